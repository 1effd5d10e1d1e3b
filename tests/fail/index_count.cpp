// expect: tessel::tensor::operator(): f32[2,3] has rank 2 but 1 index was given
// expect: fix: pass one index per axis
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> t;
  return static_cast<int>(t(1));
}
