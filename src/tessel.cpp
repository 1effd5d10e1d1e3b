// The tessel library: what every program that links it shares, compiled once: the kernels, the
// executor, the elementwise, convolution and pooling tile functions, and the host code of data/, io/ and
// profile/. It is the translation unit that a header-only program writes itself (tessel/tessel.hpp):
// TESSEL_IMPLEMENTATION turns on the definitions that the headers only declare elsewhere, so it comes
// before any include.
#define TESSEL_IMPLEMENTATION
#include "tessel/tessel.hpp"
