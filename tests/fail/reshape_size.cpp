// expect: tessel::reshape: cannot reshape f32[2,3] (6 elements) to [4,4] (16 elements)
// expect: fix: choose dims whose product is 6
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2, 3>> t;
  auto r = std::move(t).reshape<tessel::shape<4, 4>>();
  return static_cast<int>(r[0]);
}
