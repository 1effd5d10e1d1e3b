// expect: tessel::random::bernoulli: the probability p has dtype s32, but it must be floating
// expect: fix: pass p as a float (0.5f) or a tessel::bfloat16
#include <tessel/tessel.hpp>
int main() {
  auto b = tessel::random::bernoulli<tessel::shape<4>>(tessel::random::key_from_seed(0), 1);
  return b[0] ? 1 : 0;
}
