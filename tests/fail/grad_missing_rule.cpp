// A primitive that is differentiable but has no VJP rule: the transform names it.
// expect: tessel: a transform needs the VJP rule of primitive no_rule_op, which it does not have
// expect: fix: give the primitive that rule in its file, or wrap the call in stop_gradient
#include <tessel/tessel.hpp>
namespace {
inline constexpr tessel::ir::primitive no_rule_op_p{.name = "no_rule_op", .kind = tessel::ir::prim_kind::elementwise,
                                                    .evaluate = &tessel::prim::identity::evaluate};
template <tessel::Traced X>
constexpr auto no_rule_op(X x) {
  return tessel::ir::emit<typename X::value_type, typename X::shape_type>(x.graph, no_rule_op_p, {x.id});
}
}  // namespace
int main() {
  tessel::tensor<float, tessel::shape<2>> x;
  auto g = tessel::grad([](auto v) { return tessel::sum(no_rule_op(v)); })(x);
  return static_cast<int>(g[0]);
}
