// Two shapes whose trailing dims clash (3 vs 4 is fine to align; 2 vs 4 is not).
// expect: tessel::broadcast_shapes: shapes f32[2,3] and f32[4,3] do not broadcast
// expect: result axis 0 would need 2 and 4
// expect: fix: reshape or broadcast_in_dim one operand
#include <tessel/tessel.hpp>
using x = tessel::broadcast_shapes_t<tessel::tensor_type<float, tessel::shape<2, 3>>, tessel::tensor_type<float, tessel::shape<4, 3>>>;
int main() { return x::rank; }
