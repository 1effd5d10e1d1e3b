// expect: tessel::tensor: element type double (f64) is not a tessel dtype
// expect: supported: f32 (float), bf16 (tessel::bfloat16)
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<double, tessel::shape<2>> d;
  return static_cast<int>(d[0]);
}
