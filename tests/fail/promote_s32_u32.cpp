// expect: tessel::promote_types: s32 and u32 have no common 32-bit dtype (JAX would promote to s64)
#include <cstdint>
#include <tessel/tessel.hpp>
using x = tessel::promote_t<std::int32_t, std::uint32_t>;
int main() { return sizeof(x); }
