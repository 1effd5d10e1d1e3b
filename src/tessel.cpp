// The tessel library: the kernels, the executor, and the elementwise, convolution and pooling tile
// functions, compiled once for every program that links it. TESSEL_IMPLEMENTATION turns on the definitions
// that the headers only declare elsewhere (prim/family/elementwise.hpp with the instantiations at the end of
// prim/all.hpp, prim/conv_general.hpp, prim/reduce_window.hpp), so it comes before any include.
#define TESSEL_IMPLEMENTATION
#include "tessel/kernels/implementation.hpp"
#include "tessel/run/implementation.hpp"
