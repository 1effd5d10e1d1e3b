// A primitive without a StableHLO lowering: export_stablehlo names it.
// expect: tessel::export_stablehlo: the program uses primitive no_lowering_op, which has no StableHLO lowering; fix: compute it
// expect: from primitives that export, or give it a lowering in its file (primitive::lower)
#include <tessel/tessel.hpp>
namespace {
inline constexpr tessel::ir::primitive no_lowering_op_p{.name = "no_lowering_op", .kind = tessel::ir::prim_kind::elementwise,
                                                        .evaluate = &tessel::prim::identity::evaluate};
template <tessel::Traced X>
constexpr auto no_lowering_op(X x) {
  return tessel::ir::emit<typename X::value_type, typename X::shape_type>(x.graph, no_lowering_op_p, {x.id});
}
}  // namespace
int main() {
  tessel::tensor<float, tessel::shape<2>> x;
  return static_cast<int>(tessel::export_stablehlo([](auto v) { return no_lowering_op(v) + 1.0f; }, x).size());
}
