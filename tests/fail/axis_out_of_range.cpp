// expect: tessel::drop_axis: axis 2 is out of range for [2,3] (rank 2
// expect: valid axes are -2 to 1
#include <tessel/tessel.hpp>
using x = tessel::drop_axis_t<tessel::shape<2, 3>, 2>;
int main() { return x::rank; }
