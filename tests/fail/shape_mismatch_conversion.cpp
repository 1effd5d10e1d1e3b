// expect: tessel::tensor: no implicit conversion from f32[2,3] to f32[3,2] (shapes differ)
// expect: fix: call .reshape<...>()
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> a;
  tessel::tensor<float, tessel::shape<3, 2>> b = a;
  return static_cast<int>(b[0]);
}
