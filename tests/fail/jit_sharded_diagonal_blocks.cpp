// expect: tessel::jit (with shardings): dot_general of f32[8@data,4] and f32[4,16@data]: both are split over {data} in dimensions the result keeps, so each device would hold only diagonal blocks of the result
// expect: fix: give one operand an in_sharding that leaves that dimension whole, or split the two over different mesh axes
#include <tessel/tessel.hpp>
using namespace tessel;
int main() {
  auto f = jit<mesh<axis<"data", 2>>>([](auto a, auto b) { return matmul(a, b); }, in_shardings<P<"data">, P<none, "data">>,
                                      out_shardings<P<"data">>);
  return static_cast<int>(f(tensor<float, shape<8, 4>>{}, tensor<float, shape<4, 16>>{})[0]);
}
