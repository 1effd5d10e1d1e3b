// expect: tessel::add: shapes f32[2,3] and f32[4,3] do not broadcast
// The eager call reports what jit does (jit_add_broadcast.cpp), once.
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> a;
  tessel::tensor<float, tessel::shape<4, 3>> b;
  auto y = a + b;
  return static_cast<int>(y[0]);
}
