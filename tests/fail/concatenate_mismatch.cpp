// expect: tessel::concatenate: cannot concatenate f32[2,3] and f32[2,4] along axis 0
// expect: every other dim must match
#include <tessel/tessel.hpp>
using x = tessel::concat_t<0, tessel::tensor_type<float, tessel::shape<2, 3>>, tessel::tensor_type<float, tessel::shape<2, 4>>>;
int main() { return x::rank; }
