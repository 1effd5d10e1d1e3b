#pragma once
// Random numbers inside a traced program: the key is an argument of the jitted function (its two words
// as a tree of two u32[] tensors, key_words; key_data(k) makes one), and the samples are bit-exact with
// the host functions of random/distributions.hpp and with JAX. Keys are values: fold in the step and
// split on the host, pass the step's key in. The words are scalars so that spreading them over a sample's
// shape fuses into the loop that uses the samples.
//
//   auto step = [](auto params, auto x, auto key) {   // key: random::key_words<>
//     auto keep = tessel::random::bernoulli<shape<128, 256>>(key, 0.9f);
//     ...
//   };
//   step_fn(params, x, tessel::random::key_data(tessel::random::fold_in(base, step)));

#include <cstddef>
#include <type_traits>

#include "tessel/core/tensor.hpp"
#include "tessel/core/tree.hpp"
#include "tessel/ir/tracer.hpp"
#include "tessel/prim/broadcast_in_dim.hpp"
#include "tessel/prim/iota.hpp"
#include "tessel/prim/lt.hpp"
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

}  // namespace tessel::random
