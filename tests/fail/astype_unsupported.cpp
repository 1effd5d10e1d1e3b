// expect: tessel::tensor::astype: element type int64_t (s64) is not a tessel dtype
#include <cstdint>
#include <tessel/tessel.hpp>
int main() {
  tessel::tensor<float, tessel::shape<2>> f;
  auto d = f.astype<std::int64_t>();
  return static_cast<int>(d[0]);
}
