// Defines every function that tessel/kernels/ declares: the GEMM kernels, Highway's per-target GEMM and
// math code with their run-time dispatch, and the thread pool. Exactly one translation unit of a program
// includes this file:
//   - the tessel library (src/tessel.cpp), which CMake's tessel::tessel links, or
//   - for a program that only adds tessel's include folder, one translation unit of its own:
//         #define TESSEL_IMPLEMENTATION
//         (then include tessel/tessel.hpp)
//     and link Highway and threads (-lhwy -pthread).
// It is the only place Highway's foreach_target.h is included, so the six per-target copies of the
// kernels are compiled once per program, not once per translation unit.
#ifndef TESSEL_KERNELS_IMPLEMENTATION_HPP
#define TESSEL_KERNELS_IMPLEMENTATION_HPP

#if defined(HIGHWAY_HWY_FOREACH_TARGET_H_)
#error "tessel/kernels/implementation.hpp: hwy/foreach_target.h was already included in this translation unit. Highway 1.0.3 compiles one set of per-target code per translation unit: include tessel's implementation from a translation unit of its own."
#endif

// Highway 1.0.3 with -march=native on an AVX-512 DL CPU stops with "best baseline should be included
// in dynamic targets" unless AVX3_DL is wanted; it also lets plain x86-64 builds dispatch to AVX3_DL.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL 1
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#endif

#include "tessel/core/tensor.hpp"
#include "tessel/kernels/amx-inl.hpp"  // the AMX path: detection, selection, the tile unit's entry
#include "tessel/kernels/collective.hpp"
#include "tessel/kernels/gemm.hpp"
#include "tessel/kernels/gemm_xsimd-inl.hpp"
#include "tessel/kernels/hwy_math.hpp"
#include "tessel/kernels/machine.hpp"
#include "tessel/kernels/thread_pool.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tessel/kernels/hwy_gemm-inl.hpp"
#include <hwy/foreach_target.h>  // NOLINT: includes HWY_TARGET_INCLUDE once per target
#include <hwy/highway.h>

#include "tessel/kernels/hwy_gemm-inl.hpp"  // the static target's pass
#undef HWY_TARGET_INCLUDE

namespace tessel::kernels {

// HWY_DYNAMIC_DISPATCH names a table that HWY_EXPORT made in the same namespace.
namespace hwy_detail {
HWY_EXPORT(gemm_rows_target);
HWY_EXPORT(target_name);
HWY_EXPORT(uses_dpbf16);
HWY_EXPORT(blocking_target);
HWY_EXPORT(packed_layout_target);
HWY_EXPORT(pack_b_target);
HWY_EXPORT(gemm_rows_packed_target);
HWY_EXPORT(reads_b_in_place_target);
inline void dispatch_gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1,
                               std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch,
                               const gemm_blocking& blocks) {
  HWY_DYNAMIC_DISPATCH(gemm_rows_target)(a, b, m0, m1, n, k, c, ldc, scratch, blocks);
}
inline const char* dispatch_target_name() { return HWY_DYNAMIC_DISPATCH(target_name)(); }
inline bool dispatch_uses_dpbf16() { return HWY_DYNAMIC_DISPATCH(uses_dpbf16)(); }
inline gemm_blocking dispatch_blocking() { return HWY_DYNAMIC_DISPATCH(blocking_target)(); }
inline packed_b_layout dispatch_packed_layout(const matrix_view& a, const matrix_view& b, std::size_t n, std::size_t k,
                                              const gemm_blocking& blocks) {
  return HWY_DYNAMIC_DISPATCH(packed_layout_target)(a, b, n, k, blocks);
}
inline bool dispatch_reads_b_in_place(const matrix_view& b, std::size_t rows, std::size_t nc) {
  return HWY_DYNAMIC_DISPATCH(reads_b_in_place_target)(b, rows, nc);
}
inline void dispatch_pack_b(const matrix_view& b, std::size_t n, std::size_t k, const gemm_blocking& blocks,
                            const packed_b_layout& layout, std::size_t first, std::size_t last, float* out) {
  HWY_DYNAMIC_DISPATCH(pack_b_target)(b, n, k, blocks, layout, first, last, out);
}
inline void dispatch_gemm_rows_packed(const matrix_view& a, const float* packed, const packed_b_layout& layout,
                                      std::size_t m0, std::size_t m1, std::size_t n, std::size_t k, float* c,
                                      std::size_t ldc, float* scratch, const gemm_blocking& blocks) {
  HWY_DYNAMIC_DISPATCH(gemm_rows_packed_target)(a, packed, layout, m0, m1, n, k, c, ldc, scratch, blocks);
}
}  // namespace hwy_detail

namespace hwy_math_detail {
HWY_EXPORT(map_target);
HWY_EXPORT(target_name);
HWY_EXPORT(float_lanes);
HWY_EXPORT(names_target);
inline void dispatch_map(math_fn f, const float* x, float* y, std::size_t n, scalar_math_fn scalar) {
  HWY_DYNAMIC_DISPATCH(map_target)(f, x, y, n, scalar);
}
inline const char* dispatch_target_name() { return HWY_DYNAMIC_DISPATCH(target_name)(); }
inline std::size_t dispatch_lanes() { return HWY_DYNAMIC_DISPATCH(float_lanes)(); }
inline std::span<const std::string_view> dispatch_names() { return HWY_DYNAMIC_DISPATCH(names_target)(); }
}  // namespace hwy_math_detail

// ---- GEMM ----

void gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
               std::size_t k, float* c, std::size_t ldc, float* scratch) {
  detail::xsimd_gemm_rows(a, b, m0, m1, n, k, c, ldc, scratch, {.kc = 0});
}

void hwy_gemm_rows(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                   std::size_t k, float* c, std::size_t ldc, float* scratch) {
  if (amx_detail::takes_amx(a, b)) return amx_detail::multiply(a, b, m0, m1, n, k, c, ldc, scratch, amx_detail::own_blocking());
  hwy_detail::dispatch_gemm_rows(a, b, m0, m1, n, k, c, ldc, scratch, {.kc = 0});
}

namespace {
// The caller's blocks, checked against the kernel's own (whose scratch they use).
void check_blocks(const char* kernel, const gemm_blocking& blocks, const gemm_blocking& own) {
  if (blocks.kc == 0 || blocks.mc == 0 || blocks.nc == 0 || blocks.kc > own.kc || blocks.mc > own.mc || blocks.nc > own.nc)
    throw std::invalid_argument(std::string("tessel::kernels::") + kernel + ": blocks KC " + std::to_string(blocks.kc) +
                                ", MC " + std::to_string(blocks.mc) + ", NC " + std::to_string(blocks.nc) +
                                " must be positive and at most the kernel's own (" + std::to_string(own.kc) + ", " +
                                std::to_string(own.mc) + ", " + std::to_string(own.nc) + "), whose scratch they use");
}

void gemm_rows_blocked(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                       std::size_t k, float* c, std::size_t ldc, float* scratch, const gemm_blocking& blocks) {
  check_blocks("gemm_rows", blocks, blocking_of(gemm_kernel::xsimd));
  detail::xsimd_gemm_rows(a, b, m0, m1, n, k, c, ldc, scratch, blocks);
}

void hwy_gemm_rows_blocked(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                           std::size_t k, float* c, std::size_t ldc, float* scratch, const gemm_blocking& blocks) {
  check_blocks("hwy_gemm_rows", blocks, blocking_of(gemm_kernel::hwy));
  if (amx_detail::takes_amx(a, b)) return amx_detail::multiply(a, b, m0, m1, n, k, c, ldc, scratch, blocks);
  hwy_detail::dispatch_gemm_rows(a, b, m0, m1, n, k, c, ldc, scratch, blocks);
}

void gemm_reference_blocked(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                            std::size_t k, float* c, std::size_t ldc, float* scratch, const gemm_blocking&) {
  gemm_reference(a, b, m0, m1, n, k, c, ldc, scratch);
}

// A kernel without a packed form of B (its multiply packs B block by block).
packed_b_layout no_packed_b(const matrix_view&, const matrix_view&, std::size_t, std::size_t, const gemm_blocking&) { return {}; }

// The Highway kernel's: none where it reads B in place for calls of blocks.mc rows and blocks.nc columns.
packed_b_layout hwy_packed_b(const matrix_view& a, const matrix_view& b, std::size_t n, std::size_t k, const gemm_blocking& blocks) {
  if (hwy_gemm_reads_b_in_place(b, blocks.mc, blocks.nc)) return {};
  return hwy_gemm_packed_b_layout(a, b, n, k, blocks);
}
}  // namespace

// Each GEMM kernel, in gemm_kernel's order (a value out of range is the Highway one).
const gemm_engine& engine_of(gemm_kernel which) {
  static constexpr gemm_engine table[] = {
      {&gemm_reference, &gemm_reference_blocked, &no_packed_b, nullptr, nullptr},
      {&gemm_rows, &gemm_rows_blocked, &no_packed_b, nullptr, nullptr},
      {&hwy_gemm_rows, &hwy_gemm_rows_blocked, &hwy_packed_b, &hwy_gemm_pack_b, &hwy_gemm_rows_packed}};
  const auto i = static_cast<std::size_t>(which);
  return table[i < std::size(table) ? i : std::size(table) - 1];
}

gemm_blocked_fn select_blocked_gemm(gemm_kernel which) { return engine_of(which).multiply; }

packed_b_layout hwy_gemm_packed_b_layout(const matrix_view& a, const matrix_view& b, std::size_t n, std::size_t k,
                                         const gemm_blocking& blocks) {
  check_blocks("hwy_gemm_packed_b_layout", blocks, blocking_of(gemm_kernel::hwy));
  if (amx_detail::takes_amx(a, b))
    return {.nr = amx::nr, .panels = (n + amx::nr - 1) / amx::nr, .panel_floats = amx::panel_words(k, blocks.kc), .pairs = true, .tiles = true};
  return hwy_detail::dispatch_packed_layout(a, b, n, k, blocks);
}

bool hwy_gemm_reads_b_in_place(const matrix_view& b, std::size_t rows, std::size_t width) {
  return hwy_detail::dispatch_reads_b_in_place(b, rows, width);
}

void hwy_gemm_pack_b(const matrix_view& b, std::size_t n, std::size_t k, const gemm_blocking& blocks,
                     const packed_b_layout& layout, std::size_t first, std::size_t last, float* out) {
  check_blocks("hwy_gemm_pack_b", blocks, blocking_of(gemm_kernel::hwy));
  if (first > last || last > layout.panels)
    throw std::invalid_argument("tessel::kernels::hwy_gemm_pack_b: panels [" + std::to_string(first) + ", " +
                                std::to_string(last) + ") are not within the layout's " + std::to_string(layout.panels));
  if (layout.tiles) return amx::pack_b_whole(b, n, k, blocks.kc, first, last, reinterpret_cast<std::uint32_t*>(out));
  hwy_detail::dispatch_pack_b(b, n, k, blocks, layout, first, last, out);
}

void hwy_gemm_rows_packed(const matrix_view& a, const float* packed, const packed_b_layout& layout, std::size_t m0,
                          std::size_t m1, std::size_t n, std::size_t k, float* c, std::size_t ldc, float* scratch,
                          const gemm_blocking& blocks) {
  check_blocks("hwy_gemm_rows_packed", blocks, blocking_of(gemm_kernel::hwy));
  if (layout.tiles) {
    gemm_blocking use = blocks;  // whole panels, so that every NC block starts at one
    use.nc = std::max(amx::nr, blocks.nc / amx::nr * amx::nr);
    return amx_detail::multiply(a, matrix_view{nullptr, 0, 0, true}, m0, m1, n, k, c, ldc, scratch, use, reinterpret_cast<const std::uint32_t*>(packed),
                        layout.panel_floats);
  }
  hwy_detail::dispatch_gemm_rows_packed(a, packed, layout, m0, m1, n, k, c, ldc, scratch, blocks);
}

void gemm_reference(const matrix_view& a, const matrix_view& b, std::size_t m0, std::size_t m1, std::size_t n,
                    std::size_t k, float* c, std::size_t ldc, float* /*scratch*/) {
  for (std::size_t i = m0; i < m1; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::size_t p = 0; p < k; ++p) s += static_cast<double>(a.at(i, p)) * static_cast<double>(b.at(p, j));
      c[(i - m0) * ldc + j] = static_cast<float>(s);
    }
}

std::size_t gemm_scratch_floats() { return detail::scratch_floats; }

const char* hwy_gemm_target() { return hwy_detail::dispatch_target_name(); }

bool hwy_gemm_uses_dpbf16() { return hwy_detail::dispatch_uses_dpbf16(); }

bool hwy_gemm_uses_amx() {
  if (!this_machine().amx_bf16) return false;
  switch (hwy_gemm_bf16_products()) {
    case bf16_products::widened:
    case bf16_products::dpbf16: return false;
    case bf16_products::amx: return true;
    case bf16_products::measured: break;
  }
  static const bool faster = amx_detail::outruns_vectors(&hwy_detail::dispatch_gemm_rows);  // once, in the first caller
  return faster;
}

const char* hwy_gemm_bf16_path() { return hwy_gemm_uses_amx() ? "amx" : hwy_gemm_uses_dpbf16() ? "vdpbf16ps" : "widened"; }

namespace {
// How bf16 x bf16 products are multiplied; the default comes from TESSEL_BF16_PRODUCTS (measured, widened
// or dpbf16), else measured. vdpbf16ps runs at half the f32 FMA's flop rate on a Xeon with AMX (widening
// wins by 1.2-1.6x there) and at twice it on an AMD EPYC Zen 4 (vdpbf16ps wins by 1.8-2x): no fixed choice
// suits both.
bf16_products bf16_products_from_environment() {
  const char* v = std::getenv("TESSEL_BF16_PRODUCTS");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "measured") == 0) return bf16_products::measured;
  if (std::strcmp(v, "widened") == 0) return bf16_products::widened;
  if (std::strcmp(v, "dpbf16") == 0) return bf16_products::dpbf16;
  if (std::strcmp(v, "amx") == 0) return bf16_products::amx;
  std::fprintf(stderr,
               "tessel: TESSEL_BF16_PRODUCTS=%s is not one of measured, widened, dpbf16, amx; bf16 GEMMs use the measured "
               "choice\n",
               v);
  return bf16_products::measured;
}

std::atomic<bf16_products>& bf16_products_setting() {
  static std::atomic<bf16_products> setting{bf16_products_from_environment()};
  return setting;
}
}  // namespace

bf16_products hwy_gemm_set_bf16_products(bf16_products how) { return bf16_products_setting().exchange(how); }

bf16_products hwy_gemm_bf16_products() { return bf16_products_setting().load(std::memory_order_relaxed); }


gemm_rows_fn select_gemm(gemm_kernel which) { return engine_of(which).rows; }

gemm_blocking blocking_of(gemm_kernel which) {
  using x = detail::xsimd_blocking;
  switch (which) {
    case gemm_kernel::scalar: return {.mr = 1, .nr = 1, .kc = x::kc, .mc = x::mc, .nc = x::nc};
    case gemm_kernel::xsimd: return {.mr = x::mr, .nr = x::nr, .kc = x::kc, .mc = x::mc, .nc = x::nc};
    case gemm_kernel::hwy: break;
  }
  static const gemm_blocking hwy = hwy_detail::dispatch_blocking();
  return hwy;
}

// ---- Highway math ----

void hwy_math(math_fn f, const float* x, float* y, std::size_t n, scalar_math_fn scalar) {
  hwy_math_detail::dispatch_map(f, x, y, n, scalar);
}

std::span<const std::string_view> hwy_math_functions() { return hwy_math_detail::dispatch_names(); }

std::optional<math_fn> hwy_math_function(std::string_view name) {
  const std::span<const std::string_view> names = hwy_math_functions();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return math_fn{static_cast<unsigned char>(i)};
  return std::nullopt;
}

const char* hwy_math_target() { return hwy_math_detail::dispatch_target_name(); }

std::size_t hwy_math_lanes() { return hwy_math_detail::dispatch_lanes(); }

// ---- The machine ----

namespace {
// A cache size as sysfs writes it ("48K", "1024K", "32M"), in bytes; 0 if unreadable.
std::size_t read_cache_size(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty()) return 0;
  std::size_t value = 0, i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) value = value * 10 + static_cast<std::size_t>(text[i] - '0');
  const char unit = i < text.size() ? text[i] : ' ';
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : unit == 'G' ? value << 30 : value;
}

// CPUID leaf 7, sub-leaf 1, EAX bit 5 (machine::avx512_bf16).
bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 5) & 1u) != 0;
#else
  return false;
#endif
}

std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  in >> text;
  return text;
}
}  // namespace

machine read_machine() {
  machine m;
  m.threads = default_thread_count();
  // Linux lists cpu0's caches under sysfs (one index per cache: its level, type and size); sysconf is
  // the fallback where sysfs is absent.
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_word(dir + "level"), type = read_word(dir + "type");
    if (level.empty()) break;
    const std::size_t bytes = read_cache_size(dir + "size");
    if (level == "1" && type == "Data") {
      m.l1d_bytes = bytes;
      const std::size_t sets = read_cache_size(dir + "number_of_sets"), line = read_cache_size(dir + "coherency_line_size");
      if (sets > 0 && line > 0) m.l1d_alias_bytes = sets * line;
    }
    else if (level == "2" && type != "Instruction") m.l2_bytes = bytes;
    else if (level == "3" && type != "Instruction") m.l3_bytes = bytes;
  }
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  auto from_sysconf = [](std::size_t& bytes, int name) {
    if (bytes != 0) return;
    const long v = sysconf(name);
    if (v > 0) bytes = static_cast<std::size_t>(v);
  };
  from_sysconf(m.l1d_bytes, _SC_LEVEL1_DCACHE_SIZE);
  from_sysconf(m.l2_bytes, _SC_LEVEL2_CACHE_SIZE);
  from_sysconf(m.l3_bytes, _SC_LEVEL3_CACHE_SIZE);
#endif
  m.gemm = blocking_of();
  m.simd_target = hwy_gemm_target();
  m.vector_bytes = m.gemm.nr / 2 * 4;  // the GEMM's NR is two vectors of f32
  m.avx512_bf16 = cpu_has_avx512_bf16();
  m.amx_bf16 = amx_detail::amx_bf16_usable();
  return m;
}

const machine& this_machine() {
  static const machine m = read_machine();
  return m;
}

// ---- Thread pool ----

std::size_t default_thread_count() {
  if (const char* v = std::getenv("TESSEL_NUM_THREADS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n > 0 && n <= 4096) return static_cast<std::size_t>(n);
  }
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

thread_pool::thread_pool(std::size_t threads) {
  for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

// How long a thread of the pool spins for the next call (a worker) or for the last worker (the caller)
// before it sleeps on a condition variable: by default longer than most kernels run whole on the calling
// thread (char_lm's pads: 80-150 us), spent only between kernels (libgomp spins for longer).
// TESSEL_SPIN_US sets it (0: sleep at once), for a process whose other libraries' threads want the
// cores between tessel's calls, as OMP_WAIT_POLICY does for OpenMP.
inline std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds time = [] {
    if (const char* v = std::getenv("TESSEL_SPIN_US"); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long us = std::strtol(v, &end, 10);
      if (*end == '\0' && us >= 0 && us <= 1000000) return std::chrono::microseconds(us);
    }
    return std::chrono::microseconds(250);
  }();
  return time;
}

// Spins until ready() or spin_time() has passed; whether ready() held.
template <class Ready>
bool spin_until(Ready ready) {
  if (spin_time().count() == 0) return ready();
  const auto until = std::chrono::steady_clock::now() + spin_time();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    }
    if (std::chrono::steady_clock::now() >= until) return ready();
    std::this_thread::yield();  // a thread waiting for this core (another library's, another process's) runs first
  }
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

bool& thread_pool::serial_here() {
  thread_local bool serial = false;
  return serial;
}

void thread_pool::parallel_for(std::size_t count, std::size_t grain,
                               const std::function<void(std::size_t, std::size_t, std::size_t)>& body) {
  if (count == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  if (workers_.empty() || count <= grain || serial_here()) {
    body(0, count, 0);
    return;
  }
  std::unique_lock call_lock(call_mutex_);  // one parallel_for at a time
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    count_ = count;
    grain_ = grain;
    next_.store(0);
    participants_.store(0, std::memory_order_relaxed);
    busy_.store(workers_.size());
    generation_.fetch_add(1, std::memory_order_release);  // publishes the call to spinning workers
  }
  wake_.notify_all();
  drain(0);
  if (!spin_until([this] { return busy_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return busy_.load(std::memory_order_acquire) == 0; });
  }
  body_ = nullptr;
}

thread_pool& thread_pool::host() {
  static thread_pool pool;
  return pool;
}

void thread_pool::drain(std::size_t thread_index) {
  bool ran = false;
  for (;;) {
    const std::size_t begin = next_.fetch_add(grain_);
    if (begin >= count_) break;
    (*body_)(begin, std::min(count_, begin + grain_), thread_index);
    ran = true;
  }
  if (ran) participants_.fetch_or(std::uint64_t{1} << std::min<std::size_t>(thread_index, 63), std::memory_order_relaxed);
}

void thread_pool::work(std::size_t thread_index) {
  std::size_t seen = 0;
  for (;;) {
    const auto called = [&] { return stopping_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(called)) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, called);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    drain(thread_index);
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the mutex, so a caller that found busy_ nonzero is already waiting when notified.
      std::lock_guard lock(mutex_);
      done_.notify_one();
    }
  }
}

namespace {
process_transport& installed_transport() {
  static process_transport transport;
  return transport;
}
}  // namespace

void install_process_transport(const process_transport& transport) { installed_transport() = transport; }

const process_transport& processes() { return installed_transport(); }

void add_build(fingerprint& f) {
  f.add(__VERSION__);
  std::uint64_t isa = 0;  // the instruction sets this library's own (xsimd, scalar) code was compiled for
#ifdef __FMA__
  isa |= 1u << 0;
#endif
#ifdef __AVX2__
  isa |= 1u << 1;
#endif
#ifdef __AVX512F__
  isa |= 1u << 2;
#endif
#ifdef __AVX512BW__
  isa |= 1u << 3;
#endif
#ifdef __AVX512BF16__
  isa |= 1u << 4;
#endif
#ifdef __AMX_TILE__
  isa |= 1u << 5;
#endif
#ifdef __FAST_MATH__
  isa |= 1u << 6;
#endif
  f.add(isa);
  // Highway's dispatch runs the best target both compiled and supported here: the lowest bit. Read once:
  // SupportedTargets asks CPUID, which a virtual machine traps (about 15 us a call here).
  static const std::int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  f.add(static_cast<std::uint64_t>(targets & -targets));
  f.add(static_cast<std::uint64_t>(hwy_gemm_bf16_products()));
  f.add(static_cast<std::uint64_t>(this_machine().amx_bf16));  // the tile unit rounds its sums as it adds them
  f.add(static_cast<std::uint64_t>(forced_math_path()));
}

communicator::communicator(const std::size_t* axis_sizes, std::size_t rank, std::size_t process_axes, std::uint64_t program)
    : rank_(rank), program_(program) {
  std::size_t spanned = 1;
  for (std::size_t a = 0; a < rank; ++a) {
    sizes_[a] = axis_sizes[a];
    devices_ *= axis_sizes[a];
    if (a < process_axes) {
      spanned *= axis_sizes[a];
      process_axes_mask_ = static_cast<std::uint8_t>(process_axes_mask_ | (1u << a));
    }
  }
  // The runner checked that the run has `spanned` processes (shard_map.hpp).
  local_devices_ = devices_ / spanned;
  first_local_ = spanned > 1 ? processes().index * local_devices_ : 0;
  inputs_.assign(devices_, nullptr);
  outputs_.assign(devices_, nullptr);
}

std::size_t communicator::coordinate(std::size_t device, std::size_t axis) const {
  for (std::size_t a = rank_; a-- > axis + 1;) device /= sizes_[a];
  return device % sizes_[axis];
}

namespace {
std::atomic<std::uint64_t>& collective_clock() {
  static std::atomic<std::uint64_t> nanoseconds{0};
  return nanoseconds;
}
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::uint64_t collective_nanoseconds() { return collective_clock().load(std::memory_order_relaxed); }

void communicator::publish(std::size_t device, const void* in, void* out, std::size_t bytes, std::uint8_t axes) {
  if (device == first_local_) started_ = now_ns();
  inputs_[device] = in;
  outputs_[device] = out;
  arrive_and_wait();
  if (axes & process_axes_mask_) {
    if (device == first_local_) gather_from_processes(bytes);
    arrive_and_wait();
  }
}

// This process's devices' inputs, one after another, go to every process; the others' arrive in the same
// layout, process after process, and stand in for their devices' inputs. The staging buffers outlive the
// mesh's call (one mesh runs at a time, run/implementation.hpp), so a step's collectives touch no new pages.
void communicator::gather_from_processes(std::size_t bytes) {
  static std::vector<unsigned char> sent, received;
  const process_transport& t = processes();
  if (received.size() < devices_ * bytes) received.resize(devices_ * bytes);
  const void* mine = inputs_[first_local_];
  if (local_devices_ > 1) {  // one device: its input goes as it is
    if (sent.size() < local_devices_ * bytes) sent.resize(local_devices_ * bytes);
    for (std::size_t l = 0; l < local_devices_; ++l) std::memcpy(sent.data() + l * bytes, inputs_[first_local_ + l], bytes);
    mine = sent.data();
  }
  t.all_gather(program_, mine, local_devices_ * bytes, received.data());
  for (std::size_t d = 0; d < devices_; ++d)
    if (!is_local(d)) inputs_[d] = received.data() + d * bytes;
}

void communicator::finish(std::size_t device) {
  arrive_and_wait();
  if (device == first_local_) collective_clock().fetch_add(static_cast<std::uint64_t>(now_ns() - started_), std::memory_order_relaxed);
}

// A counting barrier: the last device to arrive opens the next generation. Waiters spin briefly (a
// collective's devices usually arrive together) and then sleep on the generation word, so devices that
// outnumber the cores do not burn them.
void communicator::arrive_and_wait() {
  if (local_devices_ == 1) return;
  const std::uint32_t generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == local_devices_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    return;
  }
  for (int spin = 0; spin < 2000; ++spin) {
    if (generation_.load(std::memory_order_acquire) != generation) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  while (generation_.load(std::memory_order_acquire) == generation) generation_.wait(generation, std::memory_order_acquire);
}

device_context& this_device() {
  thread_local device_context context;
  return context;
}

}  // namespace tessel::kernels

namespace tessel::detail {
namespace {
// Every block starts with a header (64 bytes, so the data stays 64-byte aligned) holding its size.
constexpr std::size_t block_header = 64;
// Blocks from 16 KiB are cached, rounded to whole pages: below, operator new serves them from its bins;
// above, glibc gives freed memory at the top of its heap back to the system once more than 128 KiB is
// free there, so a chain of eager ops with temporaries of 64 KiB faulted its pages in again on every call
// (230 us instead of 7 for exp(a * b + a) on f32[16384], bench/eager.cpp).
constexpr std::size_t cached_block = std::size_t{16} << 10;
constexpr std::size_t page = std::size_t{4} << 10;
// From 1 MiB, rounded to 2 MiB and with transparent huge pages asked for.
constexpr std::size_t large_block = std::size_t{1} << 20;
constexpr std::size_t huge_page = std::size_t{2} << 20;
// Freed blocks kept for reuse, at most this many bytes in all. Under AddressSanitizer nothing is kept, so
// that a use after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t cache_limit = 0;
#else
constexpr std::size_t cache_limit = std::size_t{1} << 30;
#endif

struct block_cache {
  std::mutex mutex;
  std::multimap<std::size_t, void*> free;  // by total size
  std::size_t bytes = 0;
  // Never destroyed: tensors with static storage may be freed after any destructor of this file has run.
  static block_cache& get() {
    static block_cache* cache = new block_cache;
    return *cache;
  }
};
}  // namespace

void* allocate_block(std::size_t bytes) {
  if (bytes + block_header < cached_block) {
    auto* raw = static_cast<unsigned char*>(::operator new(bytes + block_header, std::align_val_t{tensor_alignment}));
    *reinterpret_cast<std::size_t*>(raw) = 0;  // small: from operator new
    return raw + block_header;
  }
  const bool large = bytes + block_header >= large_block;
  const std::size_t unit = large ? huge_page : page;
  const std::size_t total = (bytes + block_header + unit - 1) / unit * unit;
  void* raw = nullptr;
  {
    block_cache& c = block_cache::get();
    std::lock_guard lock(c.mutex);
    if (auto it = c.free.find(total); it != c.free.end()) {
      raw = it->second;
      c.bytes -= total;
      c.free.erase(it);
    }
  }
  if (raw == nullptr) {
    raw = std::aligned_alloc(unit, total);
    if (raw == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (large) madvise(raw, total, MADV_HUGEPAGE);  // fewer page faults and TLB misses; advice only
#endif
  }
  *static_cast<std::size_t*>(raw) = total;
  return static_cast<unsigned char*>(raw) + block_header;
}

void free_block(void* p) noexcept {
  if (p == nullptr) return;
  unsigned char* raw = static_cast<unsigned char*>(p) - block_header;
  const std::size_t total = *reinterpret_cast<std::size_t*>(raw);
  if (total == 0) {
    ::operator delete(raw, std::align_val_t{tensor_alignment});
    return;
  }
  {
    block_cache& c = block_cache::get();
    std::lock_guard lock(c.mutex);
    if (c.bytes + total <= cache_limit) {
      try {
        c.free.emplace(total, raw);
        c.bytes += total;
        return;
      } catch (...) {  // no room to remember it: give it back
      }
    }
  }
  std::free(raw);
}
}  // namespace tessel::detail

#endif  // TESSEL_KERNELS_IMPLEMENTATION_HPP
