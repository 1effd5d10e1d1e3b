// expect: tessel::jit (with shardings): add got incompatible shardings: f32[8@data,6] and f32[8,6@data] split dimension 1 differently, and which layout the result takes is ambiguous
// expect: fix: give the arguments in_shardings that split their common dimensions alike (a whole dimension takes either split)
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = jit<mesh<axis<"data", 2>>>([](auto a, auto b) { return a + b; }, in_shardings<P<"data">, P<none, "data">>, out_shardings<P<>>);
  return static_cast<int>(f(tensor<float, shape<8, 6>>{}, tensor<float, shape<8, 6>>{})[0]);
}
