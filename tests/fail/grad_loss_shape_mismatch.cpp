// A shape mistake inside the loss given to grad: one error, the rule's (it was 7 errors in 99 lines on g++
// and 12 on clang, with internals such as "'program' is not a member of 't'").
// expect: tessel::matmul: contracting dimensions differ: lhs f32[5,6] and rhs f32[3,4]
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<3, 4>> w;
  tessel::tensor<float, tessel::shape<5, 6>> x;
  auto g = tessel::grad([](auto w, auto x) { return tessel::sum(tessel::matmul(x, w)); })(w, x);
  return g[0] == 0 ? 0 : 1;
}
