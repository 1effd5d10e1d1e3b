// The header-only way in: this one translation unit compiles tessel's kernels and executor.
#define TESSEL_IMPLEMENTATION
#include <tessel/tessel.hpp>
