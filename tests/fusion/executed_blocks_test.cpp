// The planned grid is the executed grid: the executor runs exactly the blocks that plan::blocks_of lists
// for this machine (targets::this_host()), each once, for an elementwise loop, a row kernel and a GEMM
// with its epilogue, and exactly the work items plan::items_of lists for convolutions and pooling; and
// the host target follows the machine's description.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "tessel/tessel.hpp"
#include "reference.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::random_tensor;

// Every (kernel, block) the executor reports, counted.
std::mutex seen_mutex;
std::map<std::pair<int, std::size_t>, int> seen;
std::map<int, std::size_t> grid_size;

void record(int kernel, std::size_t block, std::size_t blocks) noexcept {
  std::lock_guard lock(seen_mutex);
  ++seen[{kernel, block}];
  grid_size[kernel] = blocks;
}

// Runs call() with the observer installed and returns what it saw.
template <class F>
std::map<std::pair<int, std::size_t>, int> blocks_run_by(F call) {
  seen.clear();
  grid_size.clear();
  tessel::run::block_observer_slot().store(&record);
  call();
  tessel::run::block_observer_slot().store(nullptr);
  return seen;
}

// The parallel grid points of kernel k's planned blocks (a matmul's K axis runs inside each).
template <class P>
std::size_t planned_blocks(const P& plan, int k) {
  const tessel::tiling::block_plan b = tessel::plan::blocks_of(plan, k, tessel::targets::this_host());
  EXPECT_TRUE(b.ok()) << tessel::tiling::name_of(b.error);
  std::size_t count = 1;
  for (std::size_t axis = 0; axis < b.grid.rank; ++axis)
    if (b.parallel[axis]) count *= b.grid.d[axis];
  return count;
}

// Each of kernel k's planned blocks ran exactly once, and nothing else of it ran.
void expect_exactly_planned(const std::map<std::pair<int, std::size_t>, int>& ran, int k, std::size_t planned) {
  std::size_t blocks = 0;
  for (const auto& [key, times] : ran) {
    if (key.first != k) continue;
    ++blocks;
    EXPECT_LT(key.second, planned) << "kernel " << k << " ran block " << key.second << " of a plan of " << planned;
    EXPECT_EQ(times, 1) << "kernel " << k << " ran block " << key.second << " " << times << " times";
  }
  EXPECT_EQ(blocks, planned) << "kernel " << k;
  EXPECT_EQ(grid_size[k], planned) << "kernel " << k;
}

TEST(ExecutedBlocks, ElementwiseLoopRunsThePlannedTiles) {
  const auto f = [](auto x) { return tessel::tanh(x) * 3.0f - 1.0f; };
  using X = tensor<float, shape<1 << 20>>;
  constexpr auto& plan = decltype(tessel::jit(f))::traced_for<X>::plan;
  static_assert(plan.kernel_count == 1 && plan.kernels[0].kind == tessel::plan::kernel_kind::loop);
  const X x = random_tensor<float, shape<1 << 20>>(1);
  X y;
  const auto ran = blocks_run_by([&] { y = tessel::jit(f)(x); });
  const std::size_t planned = planned_blocks(plan, 0);
  EXPECT_GT(planned, 1u) << "a 4 MiB loop fits one block: the test proves little";
  expect_exactly_planned(ran, 0, planned);
  // dump prints the grid that ran.
  const std::string text = tessel::dump(f, x);
  EXPECT_NE(text.find("kernel 0 loop: grid [" + std::to_string(planned) + "]"), std::string::npos) << text;
  for (std::size_t i = 0; i < x.size; i += 4099) ASSERT_NEAR(y[i], std::tanh(x[i]) * 3 - 1, 1e-6);
}

TEST(ExecutedBlocks, RowKernelRunsThePlannedRowBlocks) {
  const auto f = [](auto x) { return tessel::softmax(x); };
  using X = tensor<float, shape<4096, 1024>>;
  constexpr auto& plan = decltype(tessel::jit(f))::traced_for<X>::plan;
  static_assert(plan.kernel_count == 1 && plan.kernels[0].kind == tessel::plan::kernel_kind::row);
  const auto x = random_tensor<float, shape<4096, 1024>>(2);
  X y;
  const auto ran = blocks_run_by([&] { y = tessel::jit(f)(x); });
  const std::size_t planned = planned_blocks(plan, 0);
  EXPECT_GT(planned, 1u);
  expect_exactly_planned(ran, 0, planned);
  double row_sum = 0;
  for (std::size_t j = 0; j < 1024; ++j) row_sum += y[4095 * 1024 + j];
  EXPECT_NEAR(row_sum, 1.0, 1e-5);
}

TEST(ExecutedBlocks, GemmWithEpilogueRunsThePlannedBlocks) {
  // K = 700 runs in several K blocks on any host (the GEMM's KC is at most a few hundred); the values
  // are checked against a double-precision product with the GEMM's error bound.
  const auto f = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
  using X = tensor<float, shape<200, 700>>;
  using W = tensor<float, shape<700, 520>>;
  using B = tensor<float, shape<520>>;
  constexpr auto& plan = decltype(tessel::jit(f))::traced_for<X, W, B>::plan;
  static_assert(plan.kernel_count == 1 && plan.kernels[0].kind == tessel::plan::kernel_kind::contraction);
  const auto x = random_tensor<float, shape<200, 700>>(3);
  const auto w = random_tensor<float, shape<700, 520>>(4);
  const auto b = random_tensor<float, shape<520>>(5);
  tensor<float, shape<200, 520>> y;
  const auto ran = blocks_run_by([&] { y = tessel::jit(f)(x, w, b); });
  const std::size_t planned = planned_blocks(plan, 0);
  EXPECT_GT(planned, 1u);
  expect_exactly_planned(ran, 0, planned);
  const tessel::tiling::block_plan blocks = tessel::plan::blocks_of(plan, 0, tessel::targets::this_host());
  std::printf("GEMM 200x700x520 on this host: grid [%zu,%zu,%zu], blocks M %zu, N %zu, K %zu\n", blocks.grid.d[0],
              blocks.grid.d[1], blocks.grid.d[2], blocks.blocks[0].block.d[0], blocks.blocks[1].block.d[1],
              blocks.blocks[0].block.d[1]);
  for (std::size_t i = 0; i < 200; i += 7)
    for (std::size_t j = 0; j < 520; j += 3) {
      double dot = 0, magnitude = 0;
      for (std::size_t p = 0; p < 700; ++p) {
        dot += static_cast<double>(x[i * 700 + p]) * w[p * 520 + j];
        magnitude += std::abs(static_cast<double>(x[i * 700 + p]) * w[p * 520 + j]);
      }
      const double want = std::max(0.0, dot + b[j]);
      ASSERT_NEAR(y[i * 520 + j], want, 2 * 700 * 0x1p-24 * magnitude + 1e-6) << "(" << i << ", " << j << ")";
    }
}

TEST(ExecutedBlocks, BatchedProductRunsOneBlockRowPerBatchElement) {
  // A batched product (attention's scores): blocks never straddle two batch elements.
  const auto f = [](auto q, auto k) { return tessel::matmul(q, k); };
  using Q = tensor<float, shape<6, 40, 24>>;
  using K = tensor<float, shape<6, 24, 30>>;
  constexpr auto& plan = decltype(tessel::jit(f))::traced_for<Q, K>::plan;
  const auto q = random_tensor<float, shape<6, 40, 24>>(6);
  const auto k = random_tensor<float, shape<6, 24, 30>>(7);
  tensor<float, shape<6, 40, 30>> y;
  const auto ran = blocks_run_by([&] { y = tessel::jit(f)(q, k); });
  expect_exactly_planned(ran, 0, planned_blocks(plan, 0));
  EXPECT_GE(planned_blocks(plan, 0), 6u);
  for (std::size_t b = 0; b < 6; ++b)
    for (std::size_t i = 0; i < 40; i += 3)
      for (std::size_t j = 0; j < 30; j += 7) {
        double dot = 0;
        for (std::size_t p = 0; p < 24; ++p) dot += static_cast<double>(q[(b * 40 + i) * 24 + p]) * k[(b * 24 + p) * 30 + j];
        ASSERT_NEAR(y[(b * 40 + i) * 30 + j], dot, 1e-4);
      }
}

TEST(ExecutedBlocks, ConvolutionsAndPoolingRunThePlannedItems) {
  // A convolution layer's loss and its gradients: conv_general with its bias and relu fused, max and
  // average pooling forward, and backward conv_input_grad, conv_filter_grad (threads' partial sums
  // added), select_and_scatter_add and reduce_window_sum's transpose: every one of them a kernel of work
  // items, each item run once, by the executor's threads.
  using tessel::padding::same;
  using tessel::padding::valid;
  const auto loss = [](auto x, auto w, auto b) {
    const auto h = tessel::relu(tessel::conv_general<tessel::stride<1, 1>, same>(x, w) + b);
    const auto p = tessel::max_pool<tessel::window<2, 2>, tessel::stride<2, 2>, valid>(h);
    return tessel::sum(tessel::avg_pool<tessel::window<3, 3>, tessel::stride<1, 1>, same>(p));
  };
  const auto step = tessel::value_and_grad<0, 1>(loss);
  using X = tensor<float, shape<32, 28, 28, 3>>;
  using W = tensor<float, shape<3, 3, 3, 16>>;
  using B = tensor<float, shape<16>>;
  constexpr auto& plan = decltype(tessel::jit(step))::traced_for<X, W, B>::plan;
  const X x = random_tensor<float, shape<32, 28, 28, 3>>(8);
  const W w = random_tensor<float, shape<3, 3, 3, 16>>(9);
  const B b = random_tensor<float, shape<16>>(10);
  const auto ran = blocks_run_by([&] { (void)tessel::jit(step)(x, w, b); });
  std::map<std::string, std::size_t> items_of_primitive;
  for (int k = 0; k < plan.kernel_count; ++k) {
    const int id = tessel::plan::item_node(plan, k);
    if (id < 0) continue;
    const tessel::ir::item_plan items = tessel::plan::items_of(plan, k, tessel::targets::this_host());
    items_of_primitive[std::string(plan.node(id).prim->name)] = items.items;
    expect_exactly_planned(ran, k, items.items);
    if (plan.node(id).prim->name == "conv_filter_grad") {
      EXPECT_TRUE(items.sums_partials);
    }
  }
  for (const char* name : {"conv_general", "conv_input_grad", "conv_filter_grad", "reduce_window_max", "select_and_scatter_add",
                           "reduce_window_sum", "reduce_window_sum_transpose"})
    EXPECT_EQ(items_of_primitive.count(name), 1u) << name << " is not a kernel of work items";
  EXPECT_GT(items_of_primitive["conv_general"], 1u);
  EXPECT_GT(items_of_primitive["conv_filter_grad"], 1u) << "one item: the partial sums are not tested";
  EXPECT_NE(tessel::dump(step, x, w, b).find("work items"), std::string::npos);
}

TEST(ExecutedBlocks, FilterGradientSumsEveryThreadsRows) {
  // dw[a, b, c, o] = sum over n, i, j of x[n, i + a - 1, j + b - 1, c] * r[n, i, j, o] (SAME, stride 1),
  // made by several items whose threads' sums the executor adds, in one order; against the sum in double.
  const auto f = [](auto x, auto w, auto r) {
    return tessel::sum(tessel::conv_general<tessel::stride<1, 1>, tessel::padding::same>(x, w) * r);
  };
  const auto x = random_tensor<float, shape<16, 20, 20, 3>>(11);
  const auto w = random_tensor<float, shape<3, 3, 3, 8>>(12);
  const auto r = random_tensor<float, shape<16, 20, 20, 8>>(13);
  const auto dw = tessel::jit(tessel::grad<1>(f))(x, w, r);
  for (int again = 0; again < 8; ++again) {  // the threads' shares are added in one order: the same bits
    const auto repeat = tessel::jit(tessel::grad<1>(f))(x, w, r);
    for (std::size_t i = 0; i < dw.size; ++i) ASSERT_EQ(repeat[i], dw[i]) << "run " << again << ", element " << i;
  }
  for (std::size_t a = 0; a < 3; ++a)
    for (std::size_t bb = 0; bb < 3; ++bb)
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t o = 0; o < 8; ++o) {
          double want = 0, magnitude = 0;
          for (std::size_t n = 0; n < 16; ++n)
            for (std::size_t i = 0; i < 20; ++i)
              for (std::size_t j = 0; j < 20; ++j) {
                const long h = static_cast<long>(i + a) - 1, v = static_cast<long>(j + bb) - 1;
                if (h < 0 || v < 0 || h >= 20 || v >= 20) continue;
                const double t = static_cast<double>(x[((n * 20 + static_cast<std::size_t>(h)) * 20 + static_cast<std::size_t>(v)) * 3 + c]) *
                                 r[((n * 20 + i) * 20 + j) * 8 + o];
                want += t;
                magnitude += std::abs(t);
              }
          ASSERT_NEAR(dw[((a * 3 + bb) * 3 + c) * 8 + o], want, 4 * 6400 * 0x1p-24 * magnitude + 1e-5) << a << bb << c << o;
        }
}

TEST(HostTarget, FollowsTheMachinesCachesAndGemm) {
  tessel::kernels::machine epyc{.threads = 2, .l1d_bytes = 48 << 10, .l2_bytes = 1 << 20, .l3_bytes = 32 << 20,
                                .vector_bytes = 64, .gemm = {.mr = 12, .nr = 32, .kc = 256, .mc = 96, .nc = 2048}};
  tessel::kernels::machine xeon = epyc;
  xeon.l2_bytes = 2 << 20;
  xeon.threads = 4;
  tessel::kernels::machine unknown = epyc;
  unknown.l2_bytes = 0;
  unknown.vector_bytes = 32;
  unknown.gemm = {.mr = 6, .nr = 16, .kc = 256, .mc = 48, .nc = 1024};
  const tessel::target a = tessel::targets::host_of(epyc), b = tessel::targets::host_of(xeon), c = tessel::targets::host_of(unknown);
  EXPECT_EQ(a.vmem_bytes, 512u << 10);
  EXPECT_EQ(b.vmem_bytes, 1u << 20);
  EXPECT_EQ(c.vmem_bytes, 512u << 10);  // an L2 the OS does not give: the smaller of the two
  EXPECT_EQ(b.cores, 4u);
  EXPECT_EQ(a.lanes, 16u);
  EXPECT_EQ(c.lanes, 8u);
  EXPECT_EQ(c.mxu_rows, 6u);
  EXPECT_EQ(c.mxu_cols, 16u);
  EXPECT_EQ(c.block_m, 48u);
  // The same softmax is planned in smaller row blocks where the L2 is smaller.
  const auto softmax = tessel::tiling::row_kernel(tessel::make_name("softmax"), 4096, 1024, tessel::ir::dtype_code::f32, 2, 0);
  EXPECT_LT(tessel::tiling::plan_blocks(a, softmax).blocks[0].block.d[0], tessel::tiling::plan_blocks(b, softmax).blocks[0].block.d[0]);
  // 128 rows of a GEMM split evenly over the grid: 72 + 56, not 96 + 32.
  const auto gemm = tessel::tiling::matmul_kernel(tessel::make_name("dense"), 128, 512, 784, tessel::ir::dtype_code::f32,
                                                  tessel::ir::dtype_code::f32, tessel::ir::dtype_code::f32);
  const tessel::tiling::block_plan p = tessel::tiling::plan_blocks(a, gemm);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.grid.d[0], 2u);
  EXPECT_EQ(p.blocks[0].block.d[0], 72u);
}

TEST(HostTarget, ReadsThisMachine) {
  const tessel::kernels::machine& m = tessel::kernels::this_machine();
  EXPECT_GE(m.threads, 1u);
  EXPECT_GE(m.vector_bytes, 16u);
  EXPECT_EQ(tessel::targets::this_host().mxu_rows, m.gemm.mr);
  std::printf("this machine: %zu threads, L1d %zu KiB (sets every %zu bytes), L2 %zu KiB, L3 %zu KiB, %zu-byte vectors (%s), GEMM %zux%zu KC %zu MC %zu NC %zu\n",
              m.threads, m.l1d_bytes >> 10, m.l1d_alias_bytes, m.l2_bytes >> 10, m.l3_bytes >> 10, m.vector_bytes, m.simd_target,
              m.gemm.mr, m.gemm.nr, m.gemm.kc, m.gemm.mc, m.gemm.nc);
  // The L1's set stride (its size over its ways): a power of two from a line to the whole cache.
  EXPECT_GE(m.l1d_alias_bytes, 64u);
  EXPECT_EQ(m.l1d_alias_bytes & (m.l1d_alias_bytes - 1), 0u);
  if (m.l1d_bytes != 0) EXPECT_LE(m.l1d_alias_bytes, m.l1d_bytes);
#if defined(__linux__)
  if (m.l2_bytes == 0) GTEST_SKIP() << "the OS gives no cache sizes here";
  EXPECT_GE(m.l1d_bytes, 16u << 10);
  EXPECT_GE(m.l2_bytes, m.l1d_bytes);
#endif
}
}  // namespace
