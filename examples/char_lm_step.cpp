// One train step of the char-level language model: the precision (TESSEL_LM_BF16), the bucket
// (TESSEL_LM_BATCH x TESSEL_LM_LENGTH) and the devices (TESSEL_LM_DEVICES, 1 unless given) are chosen by
// the build; examples/CMakeLists.txt compiles this file once for each, so each translation unit traces
// and plans one step.
#include "char_lm.hpp"

#include <type_traits>

#ifndef TESSEL_LM_DEVICES
#define TESSEL_LM_DEVICES 1
#endif

namespace char_lm {

static_assert((TESSEL_LM_LENGTH == bucket_64::length && TESSEL_LM_BATCH == bucket_64::batch_size) ||
                  (TESSEL_LM_LENGTH == bucket_128::length && TESSEL_LM_BATCH == bucket_128::batch_size) ||
                  (TESSEL_LM_LENGTH == bucket_256::length && TESSEL_LM_BATCH == bucket_256::batch_size),
              "char_lm_step.cpp: TESSEL_LM_LENGTH x TESSEL_LM_BATCH must be one of char_lm.hpp's buckets");

template <class C, std::size_t D>
constexpr auto make_step() {
  if constexpr (D == 1) {
    return tessel::jit(train_step<C>{});
  } else {
    using tessel::P, tessel::specs;
    // params, state | inputs, targets, mask split by rows | the learning rate; every result replicated.
    return tessel::shard_map<tessel::mesh<tessel::axis<"data", D>>, specs<P<>, P<>, P<"data">, P<"data">, P<"data">, P<>>, P<>>(
        train_step<C, data_parallel_loss_fn<C>>{});
  }
}

template <class C, std::size_t B, std::size_t L, std::size_t D>
step_result train_on(params_t& params, state_t& state, const lm_batch<B, L>& batch, const tensor<float, shape<>>& lr) {
  static const auto step = make_step<C, D>();
  using plan = typename decltype(step)::template traced_for<params_t, state_t, tensor<int32, shape<B, L>>, tensor<int32, shape<B, L>>,
                                                            tensor<bool, shape<B, L>>, tensor<float, shape<>>>;
  auto [p, st, loss, norm] = [&] {
    // On one device parameters and optimizer state are donated: the step writes the new ones into their
    // buffers (shard_map takes no donation).
    if constexpr (D == 1) return step(tessel::donate(params), tessel::donate(state), batch.inputs, batch.targets, batch.mask, lr);
    else return step(params, state, batch.inputs, batch.targets, batch.mask, lr);
  }();
  params = std::move(p), state = std::move(st);
  return {loss[0], norm[0], &plan::plan};
}

template step_result train_on<std::conditional_t<TESSEL_LM_BF16, tessel::bfloat16, float>, TESSEL_LM_BATCH, TESSEL_LM_LENGTH,
                              TESSEL_LM_DEVICES>(params_t&, state_t&, const lm_batch<TESSEL_LM_BATCH, TESSEL_LM_LENGTH>&,
                                                 const tensor<float, shape<>>&);

}  // namespace char_lm
