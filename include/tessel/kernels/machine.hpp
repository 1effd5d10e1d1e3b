#pragma once
// The machine this process runs on, read at run time: the threads it may use, its data caches and its
// GEMM blocking on the dispatched SIMD target. The machines tessel runs on differ (an Intel Xeon with
// 2 MiB of L2 per core and AMX, an AMD EPYC with 1 MiB and double-pumped AVX-512), so none of this is a
// compile-time constant; target/host.hpp turns it into the host target that the executor plans its
// blocks for. Compiled once in the tessel library (kernels/implementation.hpp).
//
//   const tessel::kernels::machine& m = tessel::kernels::this_machine();
//   // m.threads == 2, m.l1d_bytes == 48 KiB, m.l2_bytes == 1 MiB, m.simd_target == "AVX3_ZEN4", ...

#include <cstddef>

#include "tessel/kernels/gemm.hpp"

namespace tessel::kernels {

struct machine {
  std::size_t threads = 1;       // default_thread_count(): the affinity mask, or TESSEL_NUM_THREADS
  std::size_t l1d_bytes = 0;     // one core's L1 data cache; 0 where the OS does not say
  std::size_t l1d_alias_bytes = 4096;  // addresses this far apart share an L1 set (its size over its ways)
  std::size_t l2_bytes = 0;      // one core's L2
  std::size_t l3_bytes = 0;      // the L3 that cpu0 shares with others
  std::size_t vector_bytes = 16; // the widest f32 vector of the dispatched Highway target
  gemm_blocking gemm{};          // blocking_of(): the GEMM's register tile and its own KC, MC, NC
  const char* simd_target = "";  // hwy_gemm_target()
  // vdpbf16ps (CPUID leaf 7, sub-leaf 1, EAX bit 5). Highway 1.0.3's AVX3 and AVX3_DL targets do not
  // include AVX512_BF16 (Ice Lake has DL but no BF16, Cooper Lake the reverse), so the GEMM's bf16 atom
  // carries its own target attribute and runs only where this holds; the OS enables the AVX-512 state
  // whenever Highway picked an AVX3 target.
  bool avx512_bf16 = false;
  // The AMX tile unit with bf16 (CPUID leaf 7 EDX bits 22 and 24), its state enabled by the OS (XCR0 bits
  // 17 and 18) and, on Linux, granted to this process (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here; a
  // refusal leaves this false with one line on stderr).
  bool amx_bf16 = false;
};

// Reads the machine (sysfs, or sysconf where sysfs is absent).
machine read_machine();

// read_machine(), once per process.
const machine& this_machine();

}  // namespace tessel::kernels
