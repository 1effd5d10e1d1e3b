// expect: tessel::matmul: contracting dimensions differ: lhs f32[3,4] and rhs f32[5,6] (lhs axis 1 has 4, rhs axis 0 has 5)
// expect: fix: contract axes of equal size
// The eager call reports what jit does (matmul_contracting.cpp), once.
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3, 4>> a;
  tessel::tensor<float, tessel::shape<5, 6>> b;
  auto y = tessel::matmul(a, b);
  return static_cast<int>(y[0]);
}
