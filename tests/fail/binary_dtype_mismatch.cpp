// A binary operation on f32 and s32 operands: tessel never promotes between tensors.
// expect: tessel::add: dtypes differ: f32[2] and s32[2]
// expect: fix: convert_element_type one operand, e.g. to f32
#include <tessel/tessel.hpp>
using f32 = tessel::tensor_type<float, tessel::shape<2>>;
using s32 = tessel::tensor_type<std::int32_t, tessel::shape<2>>;
int main() { return tessel::require_same_dtype<"tessel::add", f32, s32>() ? 0 : 1; }
