// expect: tessel::jit (with shardings): in_shardings[0] gives leaf 0 ('0') of args[0] the spec P('data'), and it is of type f32[] on a mesh of shape (2,) with axis names ('data',)
// expect: the spec has 1 entries but the value has rank 0; fix: give at most one entry per dimension (P<> for a scalar)
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  using T = std::tuple<tensor<float, shape<>>, tensor<float, shape<4>>>;
  auto f = jit<mesh<axis<"data", 2>>>([](auto s) { return std::get<1>(s) * 2.0f; }, in_shardings<specs<P<"data">, P<"data">>>,
                                      out_shardings<P<"data">>);
  return static_cast<int>(f(T{})[0]);
}
