// The harness's control: this file compiles, so its fail-test must fail (registered with WILL_FAIL).
// expect: this text never appears
#include <tessel/tessel.hpp>
int main() { return tessel::shape<2, 3>::size == 6 ? 0 : 1; }
