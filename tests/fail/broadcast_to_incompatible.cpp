// expect: tessel::broadcast_to: cannot broadcast [2,3] to [3,2]
// expect: fix: reshape the source first
#include <tessel/tessel.hpp>
int main() { return tessel::broadcastable_to_v<tessel::shape<2, 3>, tessel::shape<3, 2>> ? 0 : 1; }
