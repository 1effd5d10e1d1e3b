// The tessel library: the kernels, the executor and every primitive's tile functions, compiled once for
// every program that links it. TESSEL_IMPLEMENTATION turns on the definitions that the headers only
// declare elsewhere (prim/family/elementwise.hpp, prim/all.hpp), so it comes before any include.
#define TESSEL_IMPLEMENTATION
#include "tessel/kernels/implementation.hpp"
#include "tessel/run/implementation.hpp"
