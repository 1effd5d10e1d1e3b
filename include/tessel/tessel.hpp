#pragma once
// The whole public API of tessel.
#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/print.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/data/idx.hpp"
#include "tessel/data/pipeline.hpp"
#include "tessel/data/text.hpp"
#include "tessel/io/atomic_file.hpp"
#include "tessel/io/checkpoint.hpp"
#include "tessel/io/json.hpp"
#include "tessel/io/npy.hpp"
#include "tessel/io/safetensors.hpp"
#include "tessel/random.hpp"
#include "tessel/ops.hpp"
#include "tessel/nn.hpp"
#include "tessel/optim/optim.hpp"
#include "tessel/dump.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/run/check_finite.hpp"
#include "tessel/io/chrome_trace.hpp"
#include "tessel/target/host.hpp"
#include "tessel/target/tpu.hpp"
#include "tessel/transform/accumulate.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/custom_vjp.hpp"
#include "tessel/transform/grad.hpp"
#include "tessel/jit.hpp"
#include "tessel/core/mesh.hpp"
#include "tessel/shard_map.hpp"
#include "tessel/transform/remat.hpp"
#include "tessel/transform/scan.hpp"
#include "tessel/transform/vmap.hpp"

// A program that uses tessel without its CMake package (only the include folder) defines
// TESSEL_IMPLEMENTATION before including this header in exactly one of its translation units: the
// kernels, the executor, and the host code that the headers above only declare (the readers and writers
// of data/ and io/, the profiler: each header's -inl.hpp) are then compiled there (link with -lhwy -lz
// -pthread). The tessel library is that translation unit (src/tessel.cpp).
#ifdef TESSEL_IMPLEMENTATION
#include "tessel/kernels/implementation.hpp"
#include "tessel/run/implementation.hpp"
#endif
