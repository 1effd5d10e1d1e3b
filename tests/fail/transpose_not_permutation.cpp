// expect: tessel::transpose: (1,1) is not a permutation of the 2 axes of [2,3]
// expect: fix: list every axis from 0 to 1 exactly once
#include <tessel/tessel.hpp>
using x = tessel::permute_t<tessel::shape<2, 3>, 1, 1>;
int main() { return x::rank; }
