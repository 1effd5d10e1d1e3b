// Printing the result of a shard_map call that failed its checks: one error (printing it added an
// ambiguous operator<< with about 110 lines of notes).
// expect: tessel::shard_map: out_specs[0] is P()
#include <iostream>
#include <tessel/tessel.hpp>
using M = tessel::mesh<tessel::axis<"i", 2>>;
int main() {
  tessel::tensor<float, tessel::shape<4>> x;
  auto y = tessel::shard_map<M, tessel::specs<tessel::P<"i">>, tessel::P<>>([](auto v) { return v * 2.0f; })(x);
  std::cout << y << "\n";
}
