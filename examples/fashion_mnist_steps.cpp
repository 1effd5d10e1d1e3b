// The training loop of the Fashion-MNIST example for one model and precision, chosen by the build
// (TESSEL_FM_CNN, TESSEL_FM_BF16: examples/CMakeLists.txt compiles this file four times), for every
// batch size. Each translation unit holds four train steps and four evaluation steps, and two data-parallel
// train steps (2 and 4 devices) for the default batch size unless the build leaves them out
// (TESSEL_FM_DATA_PARALLEL 0: the sanitizer build).
#include "fashion_mnist.hpp"

#include <type_traits>

namespace fashion_mnist {

template <class Model, class C>
int run_batch(const options& o, const dataset& d) {
  switch (o.batch_size) {
    case 32: return run<Model, 32, C>(o, d);
    case 64: return run<Model, 64, C>(o, d);
    case 256: return run<Model, 256, C>(o, d);
    default:  // the batch size the data-parallel steps are compiled for (--devices 2 or 4)
#if TESSEL_FM_DATA_PARALLEL
#if TESSEL_FM_PROCESSES
      // mpirun -np 2 --devices 2: one device in each process (the MLP only: each mesh is one more step
      // compiled into every unit).
      if constexpr (!TESSEL_FM_CNN && !TESSEL_FM_BF16) {  // --fully-sharded, --tensor-parallel: the MLP in f32
        if (o.processes == 2 && o.fully_sharded) return run<Model, 128, C, 2, tessel::over_processes, layout::fully_sharded>(o, d);
        if (o.processes == 2 && o.tensor_parallel) return run<Model, 128, C, 4, tessel::over_processes, layout::tensor_parallel>(o, d);
      }
      if constexpr (!TESSEL_FM_CNN)
        if (o.processes == 2) return run<Model, 128, C, 2, tessel::over_processes>(o, d);
#endif
      if constexpr (!TESSEL_FM_CNN && !TESSEL_FM_BF16) {
        if (o.fully_sharded && o.devices == 2) return run<Model, 128, C, 2, tessel::in_process, layout::fully_sharded>(o, d);
        if (o.fully_sharded && o.devices == 4) return run<Model, 128, C, 4, tessel::in_process, layout::fully_sharded>(o, d);
        if (o.tensor_parallel) return run<Model, 128, C, 4, tessel::in_process, layout::tensor_parallel>(o, d);
      }
      if (o.devices == 2) return run<Model, 128, C, 2>(o, d);
      if (o.devices == 4) return run<Model, 128, C, 4>(o, d);
#endif
      return run<Model, 128, C>(o, d);
  }
}

template int run_batch<std::conditional_t<TESSEL_FM_CNN, cnn<>, mlp<>>, std::conditional_t<TESSEL_FM_BF16, tessel::bfloat16, float>>(
    const options&, const dataset&);

}  // namespace fashion_mnist
