#pragma once
// Every primitive (JAX's lax), one file each under prim/; prim/all.hpp includes and lists them all.
#include "tessel/prim/all.hpp"
