// A tuple result whose first element is claimed replicated but varies: one error, and the caller's
// structured binding of the two results compiles (it did not: a second error).
// expect: tessel::shard_map: out_specs[0] is P()
// expect: but it may vary along {i}
#include <tessel/tessel.hpp>
using M = tessel::mesh<tessel::axis<"i", 2>>;
int main() {
  tessel::tensor<float, tessel::shape<4>> x;
  auto [a, b] = tessel::shard_map<M, tessel::specs<tessel::P<"i">>, tessel::specs<tessel::P<>, tessel::P<"i">>>(
      [](auto v) { return std::tuple(v * 2.0f, v); })(x);
  return a[0] == b[0] ? 0 : 1;
}
