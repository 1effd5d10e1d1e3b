// expect: tessel::random::split<0>: cannot split a key into 0 keys
// expect: fix: split<N> with N >= 1
#include <tessel/tessel.hpp>
int main() {
  auto keys = tessel::random::split<0>(tessel::random::key_from_seed(0));
  return static_cast<int>(keys.size());
}
