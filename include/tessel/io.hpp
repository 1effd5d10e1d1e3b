#pragma once
// Files: checkpoints (orbax's habits: atomic, versioned, checked on load; one file, or sharded over
// processes), npy, safetensors, JSON, the profiler's Chrome traces, and a training program's command line
// and run directory. Not included by tessel/tessel.hpp (it says why).
#include "tessel/io/atomic_file.hpp"
#include "tessel/io/checkpoint.hpp"
#include "tessel/io/chrome_trace.hpp"
#include "tessel/io/flags.hpp"
#include "tessel/io/json.hpp"
#include "tessel/io/npy.hpp"
#include "tessel/io/run_directory.hpp"
#include "tessel/io/safetensors.hpp"
#include "tessel/io/sharded_checkpoint.hpp"
