// The gradient checker's table against tessel::all_primitives: every primitive is either exercised by a
// loss that check_gradient checks (VJP and JVP against double-precision central differences and against
// each other; gradcheck.hpp records the primitives of each checked loss) or listed below as having no
// derivative of its own. This file also holds the checks of the primitives the other grad_checker files
// do not reach (conversion, broadcasting operands, the derivative primitives of the pooling and convolution rules, the
// transforms' own primitives).
#include <algorithm>

#include "gradcheck.hpp"
#include "tessel/transform/accumulate.hpp"
#include "tessel/transform/remat.hpp"

namespace {
using tessel::shape;
using tessel::testing::check_gradient;
using tessel::testing::random_tensor;
using args = std::vector<std::vector<double>>;

// Piecewise constant or structural: no derivative to check. Each entry says why.
struct exempt {
  const tessel::ir::primitive* prim;
  const char* why;
};
constexpr exempt exempt_primitives[] = {
    {&tessel::prim::argmax_p, "piecewise constant (integer result)"},
    {&tessel::prim::eq_p, "comparison: pred result"},
    {&tessel::prim::ne_p, "comparison: pred result"},
    {&tessel::prim::lt_p, "comparison: pred result"},
    {&tessel::prim::le_p, "comparison: pred result"},
    {&tessel::prim::gt_p, "comparison: pred result"},
    {&tessel::prim::ge_p, "comparison: pred result"},
    {&tessel::prim::floor_p, "piecewise constant: zero derivative (checked: floor_has_zero_gradient)"},
    {&tessel::prim::sign_p, "piecewise constant: zero derivative (checked: floor_has_zero_gradient)"},
    {&tessel::prim::stop_gradient_p, "no derivative by definition (tests/grad/binary_grad_test.cpp)"},
    {&tessel::prim::iota_p, "a constant (no operands)"},
    {&tessel::prim::random_uniform_p, "random bits of an integer key and counter: no derivative"},
    {&tessel::prim::random_fold_in_p, "random bits of an integer key and data: no derivative"},
    {&tessel::prim::literal_p, "a constant (no operands)"},
    {&tessel::prim::parameter_p, "an argument (no operands)"},
    // Control flow is differentiated as a whole construct (reverse mode: control_vjp.hpp, checked against
    // finite differences in tests/scan); forward mode through scan and switch is not written yet, so
    // check_gradient (which checks JVP too) cannot take them.
    {&tessel::prim::region_parameter_p, "a scan/switch body's parameter: the construct is differentiated as a whole"},
    {&tessel::prim::control_p, "scan/switch output: reverse mode through the construct in tests/scan; no JVP yet"},
    // Collectives run only inside shard_map, which check_gradient's jit cannot trace: their VJPs and JVPs are
    // checked through shard_map against finite differences in tests/shard/collective_rules_test.cpp.
    {&tessel::prim::psum_p, "collective: tests/shard/collective_rules_test.cpp"},
    {&tessel::prim::pvary_p, "collective: tests/shard/collective_rules_test.cpp"},
    {&tessel::prim::all_gather_p, "collective: tests/shard/collective_rules_test.cpp"},
    {&tessel::prim::psum_scatter_p, "collective: tests/shard/collective_rules_test.cpp"},
    {&tessel::prim::ppermute_p, "collective: tests/shard/collective_rules_test.cpp"},
    {&tessel::prim::all_to_all_p, "collective: tests/shard/collective_rules_test.cpp"},
    {&tessel::prim::pmax_p, "no derivative, as JAX's (grad through it: tests/fail/shard_grad_pmax.cpp)"},
    {&tessel::prim::pmin_p, "no derivative, as JAX's"},
    {&tessel::prim::axis_index_p, "a device's position (s32, no operands)"},
};

// ---- checks of primitives the unary/binary/structural/conv files do not reach ----------------------

TEST(PrimitiveGrad, ConvertElementType) {
  // Through s32 and back is piecewise constant; through f32 -> f32 nothing: check the bf16 round trip's
  // derivative (the identity almost everywhere) at bf16-representable inputs.
  auto x = random_tensor<float, shape<4>>(7);
  for (std::size_t i = 0; i < 4; ++i) x[i] = static_cast<float>(tessel::bfloat16(x[i]));
  check_gradient([](auto v, auto w) {
    return tessel::sum(tessel::convert_element_type<float>(tessel::convert_element_type<tessel::bfloat16>(v)) * w);
  },
                 [](const args& a) {
                   double s = 0;
                   for (std::size_t i = 0; i < 4; ++i) s += a[0][i] * a[1][i];
                   return s;
                 },
                 x, random_tensor<float, shape<4>>(8));
}

TEST(PrimitiveGrad, BroadcastingBinaryOperands) {
  // A row vector against a matrix: the operand's cotangent is reduced over the broadcast axis.
  check_gradient([](auto b, auto x) { return tessel::sum(tessel::tanh(x * b + b)); },
                 [](const args& a) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i)
                     for (std::size_t j = 0; j < 4; ++j) s += std::tanh(a[1][i * 4 + j] * a[0][j] + a[0][j]);
                   return s;
                 },
                 random_tensor<float, shape<4>>(9), random_tensor<float, shape<3, 4>>(10));
}

TEST(PrimitiveGrad, TransformPrimitives) {
  // checkpoint (remat), optimization_barrier (its recomputation), materialize (accumulation's running sums).
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::checkpoint([](auto v) { return tessel::sin(v) * v; })(x) * w); },
                 [](const args& a) {
                   double s = 0;
                   for (std::size_t i = 0; i < 6; ++i) s += std::sin(a[0][i]) * a[0][i] * a[1][i];
                   return s;
                 },
                 random_tensor<float, shape<2, 3>>(11), random_tensor<float, shape<2, 3>>(12));
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::optimization_barrier(x * x, w) * w); },
                 [](const args& a) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i) s += a[0][i] * a[0][i] * a[1][i];
                   return s;
                 },
                 random_tensor<float, shape<3>>(13), random_tensor<float, shape<3>>(14));
  check_gradient([](auto x, auto w) { return tessel::sum(tessel::materialize(tessel::exp(x)) * w); },
                 [](const args& a) {
                   double s = 0;
                   for (std::size_t i = 0; i < 3; ++i) s += std::exp(a[0][i]) * a[1][i];
                   return s;
                 },
                 random_tensor<float, shape<3>>(15), random_tensor<float, shape<3>>(16));
}

TEST(PrimitiveGrad, MaxPoolTangentInTheTangent) {
  // The tangent of max_pool is select_and_gather_add(t, x): t at each window's maximum. Differentiated in t.
  check_gradient([](auto t, auto x, auto w) {
    constexpr auto pool = [](auto v) { return tessel::max_pool<tessel::window<2, 2>, tessel::stride<2, 2>, tessel::padding::valid>(v); };
    return tessel::sum(std::get<1>(tessel::jvp(pool, std::make_tuple(x), std::make_tuple(t))) * w);
  },
                 [](const args& a) {
                   double s = 0;
                   for (std::size_t i = 0; i < 2; ++i)
                     for (std::size_t j = 0; j < 2; ++j) {
                       std::size_t best = (2 * i) * 4 + 2 * j;
                       for (std::size_t di = 0; di < 2; ++di)
                         for (std::size_t dj = 0; dj < 2; ++dj)
                           if (a[1][(2 * i + di) * 4 + 2 * j + dj] > a[1][best]) best = (2 * i + di) * 4 + 2 * j + dj;
                       s += a[0][best] * a[2][i * 2 + j];
                     }
                   return s;
                 },
                 random_tensor<float, shape<1, 4, 4, 1>>(18), random_tensor<float, shape<1, 4, 4, 1>>(19),
                 random_tensor<float, shape<1, 2, 2, 1>>(20));
}

TEST(PrimitiveGrad, FloorAndSignHaveZeroGradient) {
  const auto x = random_tensor<float, shape<5>>(17, 0.1, 3);
  const auto g = tessel::grad([](auto v) { return tessel::sum(tessel::floor(v * 3.0f) + tessel::sign(v)); })(x);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(g[i], 0.0f);
}

// ---- the table ------------------------------------------------------------------------------------

TEST(PrimitiveTable, EveryPrimitiveHasAGradientCheckOrIsExempt) {
  const auto& checked = tessel::testing::checked_primitives();
  for (const tessel::ir::primitive* p : tessel::all_primitives) {
    const bool is_checked = std::find(checked.begin(), checked.end(), p) != checked.end();
    const bool is_exempt = std::any_of(std::begin(exempt_primitives), std::end(exempt_primitives), [&](const exempt& e) { return e.prim == p; });
    EXPECT_TRUE(is_checked || is_exempt) << "primitive " << p->name
                                         << " has no entry in the gradient checker's table: add a check_gradient whose "
                                            "loss uses it (tests/grad/primitive_table_test.cpp), or list it as exempt";
    EXPECT_FALSE(is_checked && is_exempt && p->vjp != nullptr) << p->name << " is both checked and exempt";
    if (is_exempt) {
      EXPECT_TRUE(!p->differentiable || p->vjp == nullptr || p->kind == tessel::ir::prim_kind::control || p->varying != nullptr ||
                  p->kind == tessel::ir::prim_kind::region_parameter || p->name == "floor" || p->name == "sign")
          << p->name << " is exempt but has a reverse rule: check it instead";
    }
  }
}
}  // namespace
