// An example that reaches into bench/ and names a tessel header by a path into include/: both rejected.
#include "../bench/timer.hpp"
#include "../include/tessel/ir/a.hpp"
