#pragma once
// tessel's language: tensors, the primitives and ops, random keys, nn, optim, the transforms, jit,
// shard_map and dump. The libraries that read and write files and measure runs have their own headers,
// included where they are used, because their standard headers (<filesystem>, <thread>, <mutex>,
// <chrono>) cost every translation unit that includes this one about a quarter of its compile memory
// (bench/README.md):
//   tessel/data.hpp              datasets, buckets, batches and prefetch (data/)
//   tessel/io.hpp                checkpoints, npy, safetensors, JSON, Chrome traces (io/)
//   tessel/profile/profiler.hpp  the profiler
//   tessel/distributed.hpp       processes over MPI (the tessel::distributed library)
#include "tessel/core/bfloat16.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/fixed_string.hpp"
#include "tessel/core/print.hpp"
#include "tessel/core/shape.hpp"
#include "tessel/core/tensor.hpp"
#include "tessel/random.hpp"
#include "tessel/ops.hpp"
#include "tessel/nn.hpp"
#include "tessel/optim/optim.hpp"
#include "tessel/dump.hpp"
#include "tessel/export.hpp"
#include "tessel/run/check_finite.hpp"
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
#include "tessel/data.hpp"
#include "tessel/io.hpp"
#include "tessel/profile/profiler.hpp"
#include "tessel/kernels/implementation.hpp"
#include "tessel/run/implementation.hpp"
#endif
