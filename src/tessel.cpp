// The tessel library: the kernels and the executor, compiled once for every program that links it.
#include "tessel/kernels/implementation.hpp"
#include "tessel/run/implementation.hpp"
