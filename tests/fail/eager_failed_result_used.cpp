// The result of a failed eager call used and printed: one error, the call's.
// expect: tessel::matmul: contracting dimensions differ: lhs f32[3,4] and rhs f32[5,6]
#include <iostream>
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3, 4>> a;
  tessel::tensor<float, tessel::shape<5, 6>> b;
  auto c = tessel::matmul(a, b);
  auto d = c + 1.0f;
  std::cout << d << "\n";
}
