// Every primitive of tessel::all_primitives that takes operands has a batching rule, and the checker
// (the other files of this binary) has run it against a loop over slices.
#include <gtest/gtest-spi.h>

#include <array>
#include <string>

#include "tessel/random/traced.hpp"
#include "vmap_check.hpp"

namespace {
using tessel::shape;
using tessel::tensor;
using tessel::testing::check_batching;
using F34 = tensor<float, shape<3, 4>>;

TEST(VmapBarriers, MaterializeAndOptimizationBarrier) {
  check_batching<F34>([](auto x) { return tessel::materialize(x * 2.0f) + 1.0f; });
  check_batching<F34, F34>([](auto x, auto y) { return tessel::optimization_barrier(x, y) * y; });
}

TEST(VmapRandom, UniformMapsABatchOfKeys) {
  using U = tensor<tessel::uint32, shape<>>;
  check_batching<U, U>(
      [](auto k0, auto k1) {
        tessel::random::key_words<tessel::tracer> key{};
        key.k0 = k0;
        key.k1 = k1;
        return tessel::random::uniform<shape<3, 4>>(key);
      },
      tessel::testing::domain{0, 4e9});
}

TEST(VmapRandom, FoldInMapsABatchOfData) {
  using U = tensor<tessel::uint32, shape<>>;
  using I = tensor<std::int32_t, shape<>>;
  check_batching<U, U, I>(
      [](auto k0, auto k1, auto data) {
        tessel::random::key_words<tessel::tracer> key{};
        key.k0 = k0;
        key.k1 = k1;
        const auto folded = tessel::random::fold_in(key, data);
        return tessel::random::uniform<shape<5>>(folded);
      },
      tessel::testing::domain{0, 2e9});
}

// The checker can fail: an identity whose batching rule reports the wrong batch axis is caught.
constexpr int wrong_axis(tessel::ir::graph_builder& g, const tessel::ir::node& n, const std::array<int, tessel::ir::max_operands>& ops,
                         const std::array<int, tessel::ir::max_operands>& axes, int& out_axis) {
  const int y = tessel::prim::batching::elementwise(g, n, ops, axes, out_axis);
  out_axis = out_axis == 0 ? 1 : 0;
  return y;
}
inline constexpr tessel::ir::primitive broken_identity_p{.name = "broken_identity",
                                                         .kind = tessel::ir::prim_kind::elementwise,
                                                         .evaluate = &tessel::prim::identity::evaluate,
                                                         .batch = &wrong_axis,
                                                         .differentiable = false};
template <tessel::Traced X>
constexpr auto broken_identity(X x) {
  return tessel::ir::emit<typename X::value_type, typename X::shape_type>(x.graph, broken_identity_p, {x.id});
}

TEST(VmapChecker, CatchesAWrongRule) {
  ::testing::TestPartResultArray failures;
  {
    const ::testing::ScopedFakeTestPartResultReporter intercept(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD,
                                                                &failures);
    check_batching<F34>([](auto x) { return broken_identity(x) + 1.0f; });
  }
  EXPECT_GT(failures.size(), 0) << "the checker passed a batching rule that reports the wrong batch axis";
}

// Runs after every test of the binary (an environment's TearDown), when the checker has recorded all.
class coverage : public ::testing::Environment {
 public:
  void TearDown() override {
    if (::testing::GTEST_FLAG(filter) != "*") return;  // a partial run checks only what it ran
    for (const tessel::ir::primitive* p : tessel::all_primitives) {
      using kind = tessel::ir::prim_kind;
      // No operands, so never batched: arguments, literals, generators, a region's parameters. Control
      // constructs (scan, switch) have no per-node rule: vmap batches each construct whole
      // (transform/control_batching.hpp), checked by control_test.cpp and control_cond_test.cpp.
      if (p->kind == kind::parameter || p->kind == kind::literal || p->kind == kind::generator ||
          p->kind == kind::region_parameter || p->kind == kind::control)
        continue;
      // Collectives run only inside shard_map: tests/shard/collective_rules_test.cpp checks their batching
      // rules there (axis_index has no operand to batch).
      if (p->varying != nullptr) continue;
      const std::string name(p->name);
      EXPECT_NE(p->batch, nullptr) << "primitive " << name << " has no batching rule (ir::primitive::batch)";
      // remat's call primitive stands for a whole function; the remat tests run it under vmap.
      if (name == "checkpoint") continue;
      EXPECT_TRUE(tessel::testing::checked_primitives().contains(name))
          << "primitive " << name << " has a batching rule that no vmap checker test runs";
    }
  }
};
const auto* const registered = ::testing::AddGlobalTestEnvironment(new coverage);
}  // namespace
