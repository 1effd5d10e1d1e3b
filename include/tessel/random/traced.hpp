#pragma once
// Random numbers inside a traced program: the key is an argument of the jitted function (its two words
// as a tree of two u32[] tensors, key_words; key_data(k) makes one), and the samples are bit-exact with
// the host functions of random/distributions.hpp and with JAX. Keys are values: fold in the step on the
// host and pass the step's key in, or fold a traced step or device index in inside the program (fold_in).
// The words are scalars so that spreading them over a sample's shape fuses into the loop that uses the
// samples.
//
//   auto step = [](auto params, auto x, auto key) {   // key: random::key_words<>
//     auto keep = tessel::random::bernoulli<shape<128, 256>>(key, 0.9f);
//     ...
//   };
//   step_fn(params, x, tessel::random::key_data(tessel::random::fold_in(base, step)));

#include <cstddef>
#include <limits>
#include <type_traits>

#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/add.hpp"
#include "tessel/prim/argmax.hpp"
#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/convert_element_type.hpp"
#include "tessel/prim/iota.hpp"
#include "tessel/prim/log.hpp"
#include "tessel/prim/lt.hpp"
#include "tessel/prim/max.hpp"
#include "tessel/prim/neg.hpp"
#include "tessel/prim/random_fold_in.hpp"
#include "tessel/prim/random_uniform.hpp"
#include "tessel/prim/reshape.hpp"
#include "tessel/random/key.hpp"

namespace tessel::random {

// A key's two words, as a jit argument (a tree: in a checkpoint they are "<name>.k0" and "<name>.k1").
template <template <class, class> class T = tensor>
struct key_words {
  BOOST_HANA_DEFINE_STRUCT(key_words, (T<uint32, shape<>>, k0), (T<uint32, shape<>>, k1));
};

inline key_words<> key_data(key k) {
  key_words<> w;
  w.k0[0] = k.words[0];
  w.k1[0] = k.words[1];
  return w;
}

template <class K>
concept TracedKey = std::is_same_v<std::remove_cvref_t<K>, key_words<tracer>>;

// jax.random.fold_in(key, data) inside a traced program: a new key from a key and an s32[] or u32[] scalar
// (a scan's step, a device's axis_index), the words random::fold_in gives on the host (and JAX: an s32 is
// taken modulo 2^32, as jnp.uint32(data)). Over data 0..n-1 the keys are split<n>(key)'s (JAX's
// partitionable threefry).
template <TracedKey K, Traced D>
constexpr key_words<tracer> fold_in(K key, D data) {
  using T = typename D::value_type;
  static_assert(std::is_same_v<typename D::shape_type, shape<>> && (std::is_same_v<T, uint32> || std::is_same_v<T, int32>),
                "tessel::random::fold_in(key, data): data must be an s32[] or u32[] scalar; fix: fold in one "
                "integer (reshape or index it), or vmap over the data");
  const auto bits = convert_element_type<uint32>(data);
  const auto word = [&](std::int64_t w) {
    ir::attributes a;
    a.push(w);
    return ir::emit<uint32, shape<>>(key.k0.graph, prim::random_fold_in_p, {key.k0.id, key.k1.id, bits.id}, a,
                                     ir::dtype_code::u32);
  };
  return {word(0), word(1)};
}

// jax.random.uniform(key, S) in [0, 1), f32.
template <class S, TracedKey K>
constexpr auto uniform(K key) {
  static_assert(Shape<S>, "tessel::random::uniform<S>(key): S must be a tessel::shape<...>");
  auto k0 = broadcast_to<S>(key.k0);
  auto k1 = broadcast_to<S>(key.k1);
  auto index = reshape<S>(broadcasted_iota<uint32, shape<S::size>, 0>(key.k0));
  return ir::emit<float, S>(key.k0.graph, prim::random_uniform_p, {k0.id, k1.id, index.id}, {}, ir::dtype_code::u32);
}

// jax.random.bernoulli(key, p, S): true with probability p (an f32 number or f32[] tracer).
template <class S, TracedKey K, class P>
constexpr auto bernoulli(K key, P p) {
  return uniform<S>(key) < p;
}

// jax.random.gumbel(key, S), f32: -log(-log(u)) with u uniform in [tiny, 1), tiny the least normal f32.
// JAX draws u as uniform(minval=tiny, maxval=1); in f32 that is the [0, 1) sample itself except that 0
// becomes tiny, which max(u, tiny) gives. (Same draws as JAX; the logs are tessel's, so the values
// agree to a few ulp, not bit for bit.)
template <class S, TracedKey K>
constexpr auto gumbel(K key) {
  return -log(-log(max(uniform<S>(key), std::numeric_limits<float>::min())));
}

// jax.random.categorical(key, logits, axis) (shape=None, replace=True): the Gumbel-max trick,
// argmax(logits + gumbel(key, logits.shape), Axis): an s32 index per slice along Axis, drawn with the
// probabilities softmax(logits) along Axis (a logit of -inf is never drawn). A pure function of the
// key and the logits: the same key draws the same indices; split or fold_in for fresh draws.
template <long Axis = -1, TracedKey K, Traced L>
constexpr auto categorical(K key, L logits) {
  static_assert(std::is_same_v<typename L::value_type, float>,
                "tessel::random::categorical: the logits must be f32 (the Gumbel noise is drawn in f32); fix: "
                "convert_element_type<float>(logits)");
  return argmax<Axis>(logits + gumbel<typename L::shape_type>(key));
}

}  // namespace tessel::random
