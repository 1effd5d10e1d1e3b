// expect: tessel::transpose: (1,0) is not a permutation of the 3 axes of [2,3,4]
#include <tessel/tessel.hpp>
using x = tessel::permute_t<tessel::shape<2, 3, 4>, 1, 0>;
int main() { return x::rank; }
