// A new axis may go at -3..2 of a rank-2 shape, not at -4.
// expect: tessel::insert_axis: axis -4 is out of range for [2,3]
// expect: valid axes are -3 to 2 for a new axis
#include <tessel/tessel.hpp>
using x = tessel::insert_axis_t<tessel::shape<2, 3>, -4>;
int main() { return x::rank; }
