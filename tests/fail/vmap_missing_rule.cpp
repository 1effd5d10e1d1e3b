// A primitive with operands but no batching rule, under vmap: the transform names it at compile time.
// expect: tessel: a transform needs the batch rule of primitive no_batch_op, which it does not have
// expect: or call it outside vmap
#include <tessel/tessel.hpp>
namespace {
inline constexpr tessel::ir::primitive no_batch_op_p{.name = "no_batch_op", .kind = tessel::ir::prim_kind::elementwise,
                                                     .evaluate = &tessel::prim::identity::evaluate, .differentiable = false};
template <tessel::Traced X>
constexpr auto no_batch_op(X x) {
  return tessel::ir::emit<typename X::value_type, typename X::shape_type>(x.graph, no_batch_op_p, {x.id});
}
}  // namespace
int main() {
  tessel::tensor<float, tessel::shape<4, 2>> x;
  auto y = tessel::vmap([](auto v) { return no_batch_op(v) * 2.0f; })(x);
  return static_cast<int>(y[0]);
}
