#pragma once
// Files: checkpoints (orbax's habits: atomic, versioned, checked on load), npy, safetensors, JSON, and the
// profiler's Chrome traces. Not included by tessel/tessel.hpp (it says why).
#include "tessel/io/atomic_file.hpp"
#include "tessel/io/checkpoint.hpp"
#include "tessel/io/chrome_trace.hpp"
#include "tessel/io/json.hpp"
#include "tessel/io/npy.hpp"
#include "tessel/io/safetensors.hpp"
