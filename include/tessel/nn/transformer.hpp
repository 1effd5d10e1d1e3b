#pragma once
// A decoder-only Transformer language model (GPT-2's layout, nanoGPT's sizes scaled down), written in
// the DSL: token and learned position embeddings (take), L pre-LayerNorm blocks of causal multi-head
// self-attention and a GELU MLP, a final LayerNorm, logits tied to the token embedding.
//
//   using model = tessel::nn::gpt<tessel::nn::gpt_config{.vocab = 256, .d_model = 128, .heads = 4, .layers = 4,
//                                                         .max_length = 256}>;
//   model::params<> p = model::init(key);
//   // inside a traced step, for a bucket of B sequences of length T (T <= max_length):
//   auto loss = model::loss<float>(p, inputs, targets, mask);   // f32[]: mean cross-entropy in nats
//
// inputs s32[B,T] (token ids), targets s32[B,T] (the token each position predicts), mask pred[B,T]
// (true at the real positions: a right-padded row has a prefix of trues). The loss is the mean of the
// cross-entropy over the true positions of the mask (bits per character: loss / ln 2).
//
// The layers' parameters are stacked [L, ...] (params::blocks) and run by one scan over the layers, each
// block under checkpoint (dots_saveable: the forward scan keeps the matmul results, the backward step
// recomputes the elementwise work), so the program does not grow with L.
//
// Attention: scores = q k^T / sqrt(d_head) + bias, bias 0 where the key is at or before the query and is
// a real position, -1e9 elsewhere (finite, so a padding row, whose keys are all masked, softmaxes to a
// uniform row instead of NaN); softmax is the stable one (the row's max subtracted first).
//
// Precision: C is the compute dtype of the matmuls (float, or bfloat16 with f32 master weights: the
// weights and the matmul inputs are converted to C, the results back to f32); the residual stream,
// LayerNorm, softmax and the loss stay in f32.

#include <cmath>
#include <cstddef>
#include <tuple>

#include "tessel/core/tensor.hpp"
#include "tessel/nn/layers.hpp"
#include "tessel/nn/losses.hpp"
#include "tessel/ops.hpp"
#include "tessel/prim/slice.hpp"
#include "tessel/prim/take.hpp"
#include "tessel/random.hpp"
#include "tessel/transform/custom_vjp.hpp"
#include "tessel/transform/remat.hpp"
#include "tessel/transform/scan.hpp"

namespace tessel::nn {

namespace detail {
// 1 / sqrt(n) rounded to f32, in constant evaluation (std::sqrt is constexpr in g++ as an extension, not
// in clang 16). Newton's iteration from above stops within an ulp of the double square root; rounded to
// f32, that equals 1 / std::sqrt(n) for every n below 20,000 (checked against libm with numpy).
consteval float inverse_sqrt_f32(std::size_t n) {
  const double target = static_cast<double>(n);
  double root = target;
  for (int step = 0; step < 2048; ++step) {
    const double next = (root + target / root) / 2;
    if (next >= root) break;
    root = next;
  }
  return static_cast<float>(1.0 / root);
}

// gelu (tanh approximation, as tessel::gelu) with a reverse rule that computes gelu'(x) from x alone, as
// PyTorch's gelu_backward does. Differentiated node by node, GELU's backward reads four of its forward
// intermediates; under checkpoint each is then recomputed into a buffer of its own (six loop kernels
// over [B,T,F] per layer), since the backward's contraction epilogue and the recomputed forward both
// read them. The rule shares no node with gelu's own (c x and c x^3 instead of x^2 and x^3; the graph
// merges equal nodes, and a value that two kernels read is stored), so the epilogue reads x only:
//   gelu'(x) = (1 + t + (1 - t^2) (c x + 3 a c x^3)) / 2,  t = tanh(c x + a c x^3).
inline constexpr auto gelu = custom_vjp([](auto x) { return tessel::gelu(x); },
                                        [](auto x) { return std::make_tuple(tessel::gelu(x), x); },
                                        [](auto x, auto ct) {
                                          constexpr float c = 0.7978845608028654f, a = 0.044715f;  // sqrt(2 / pi), as tessel::gelu
                                          auto cx = x * c;
                                          auto cx3 = cx * x * x;
                                          auto t = tanh(cx + cx3 * a);
                                          auto slope = ((1.0f + t) + (1.0f - t * t) * (cx + cx3 * (3.0f * a))) * 0.5f;
                                          return std::make_tuple(ct * slope);
                                        });

// softmax over the last axis (tessel::softmax's value) with JAX's rule for it (jax.nn.softmax is a
// custom_jvp): x's cotangent is y (ct - sum(ct y)) from the result y alone. Node by node, the backward
// reads softmax's exponentials, its row sums spread over the row and y, and under checkpoint recomputes
// each into a buffer of its own (five kernels over [B,H,T,T] per layer); with the rule, the recomputed
// forward is one row kernel storing y (which the attention's product reads anyway) and the backward
// one row kernel reading y and ct.
inline constexpr auto softmax = custom_vjp([](auto x) { return tessel::softmax(x); },
                                           [](auto x) {
                                             auto y = tessel::softmax(x);
                                             return std::make_tuple(y, y);
                                           },
                                           [](auto y, auto ct) {
                                             return std::make_tuple(y * (ct - broadcast_reduced<-1>(sum<-1>(ct * y), y)));
                                           });
}  // namespace detail

struct gpt_config {
  std::size_t vocab = 256;
  std::size_t d_model = 128;
  std::size_t heads = 4;
  std::size_t layers = 4;
  std::size_t max_length = 256;  // rows of the position embedding
  std::size_t mlp = 4 * 128;     // the MLP's hidden width
};

template <gpt_config Cfg>
struct gpt {
  static constexpr std::size_t V = Cfg.vocab, D = Cfg.d_model, H = Cfg.heads, L = Cfg.layers, F = Cfg.mlp,
                               Tmax = Cfg.max_length, Dh = Cfg.d_model / Cfg.heads;
  static_assert(D % H == 0, "tessel::nn::gpt: d_model must be a multiple of heads");
  static_assert(L >= 1, "tessel::nn::gpt: at least one layer");

  // The blocks' parameters, stacked along a leading axis of L (scan runs over it).
  template <template <class, class> class T = tensor>
  struct blocks {
    BOOST_HANA_DEFINE_STRUCT(blocks, (T<float, shape<L, D>>, ln1_g), (T<float, shape<L, D>>, ln1_b),
                             (T<float, shape<L, D, 3 * D>>, w_qkv), (T<float, shape<L, 3 * D>>, b_qkv),
                             (T<float, shape<L, D, D>>, w_o), (T<float, shape<L, D>>, b_o),
                             (T<float, shape<L, D>>, ln2_g), (T<float, shape<L, D>>, ln2_b),
                             (T<float, shape<L, D, F>>, w_fc), (T<float, shape<L, F>>, b_fc),
                             (T<float, shape<L, F, D>>, w_proj), (T<float, shape<L, D>>, b_proj));
  };

  template <template <class, class> class T = tensor>
  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (T<float, shape<V, D>>, wte), (T<float, shape<Tmax, D>>, wpe), (blocks<T>, layer),
                             (T<float, shape<D>>, lnf_g), (T<float, shape<D>>, lnf_b));
  };

  // GPT-2's initialisation: weights N(0, 0.02) (the residual projections N(0, 0.02 / sqrt(2 L))),
  // biases 0, LayerNorm gains 1.
  static params<> init(random::key k) {
    const auto keys = random::split<6>(k);
    params<> p;
    auto normal = [](auto& t, random::key key, double stddev) {
      using S = typename std::remove_cvref_t<decltype(t)>::shape_type;
      t = random::normal<S>(key);
      for (std::size_t i = 0; i < S::size; ++i) t.data()[i] = static_cast<float>(t.data()[i] * stddev);
    };
    auto fill = [](auto& t, float v) {
      using S = typename std::remove_cvref_t<decltype(t)>::shape_type;
      for (std::size_t i = 0; i < S::size; ++i) t.data()[i] = v;
    };
    const double residual = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
    normal(p.wte, keys[0], 0.02);
    normal(p.wpe, keys[1], 0.01);
    normal(p.layer.w_qkv, keys[2], 0.02);
    normal(p.layer.w_o, keys[3], residual);
    normal(p.layer.w_fc, keys[4], 0.02);
    normal(p.layer.w_proj, keys[5], residual);
    fill(p.layer.ln1_g, 1.0f), fill(p.layer.ln2_g, 1.0f), fill(p.lnf_g, 1.0f);
    fill(p.layer.ln1_b, 0.0f), fill(p.layer.ln2_b, 0.0f), fill(p.lnf_b, 0.0f);
    fill(p.layer.b_qkv, 0.0f), fill(p.layer.b_o, 0.0f), fill(p.layer.b_fc, 0.0f), fill(p.layer.b_proj, 0.0f);
    fill(p.lnf_b, 0.0f);
    return p;
  }

  // x [..., K] . w [K, N] + b [N] in the compute dtype C, the result in f32.
  template <class C, Traced X, Traced W, Traced B>
  static constexpr auto dense_c(X x, W w, B b) {
    return convert_element_type<float>(matmul(convert_element_type<C>(x), convert_element_type<C>(w))) + b;
  }

  // One pre-LayerNorm block: x + attn(ln1(x)), then + mlp(ln2(x)). Captureless, for checkpoint.
  // x f32[B,T,D], bias f32[B,1,T,T], p: one layer's slice of blocks.
  template <class C>
  struct block {
    template <class X, class Bias, class P>
    constexpr auto operator()(X x, Bias bias, P p) const {
      constexpr std::size_t B = X::shape_type::dims[0], T = X::shape_type::dims[1];
      auto qkv = dense_c<C>(layer_norm(x, p.ln1_g, p.ln1_b), p.w_qkv, p.b_qkv);  // [B,T,3D]
      auto heads = [&](auto part) {
        constexpr long at = decltype(part)::value * static_cast<long>(D);
        return convert_element_type<C>(reshape<shape<B, T, H, Dh>>(slice_in_dim<2, at, at + static_cast<long>(D)>(qkv)));
      };
      auto q = heads(std::integral_constant<long, 0>{});
      auto k = heads(std::integral_constant<long, 1>{});
      auto v = heads(std::integral_constant<long, 2>{});
      // [B,T,H,Dh] x [B,T,H,Dh] over Dh, batched over (B, H) -> [B,H,Tq,Tk]
      auto scores = convert_element_type<float>(dot_general<axes<3>, axes<3>, axes<0, 2>, axes<0, 2>>(q, k));
      auto att = detail::softmax(scores * detail::inverse_sqrt_f32(Dh) + bias);
      // [B,H,Tq,Tk] x [B,Tk,H,Dh] over Tk, batched over (B, H) -> [B,H,Tq,Dh]
      auto ctx = dot_general<axes<3>, axes<1>, axes<0, 1>, axes<0, 2>>(convert_element_type<C>(att), v);
      auto merged = reshape<shape<B, T, D>>(transpose<0, 2, 1, 3>(convert_element_type<float>(ctx)));
      auto h = x + dense_c<C>(merged, p.w_o, p.b_o);
      auto m = detail::gelu(dense_c<C>(layer_norm(h, p.ln2_g, p.ln2_b), p.w_fc, p.b_fc));
      return h + dense_c<C>(m, p.w_proj, p.b_proj);
    }
  };

  // The additive attention bias f32[B,1,T,T] of a mask pred[B,T]: 0 where key j <= query i and key j
  // is real, -1e9 elsewhere.
  template <Traced M>
  static constexpr auto attention_bias(M mask) {
    constexpr std::size_t B = M::shape_type::dims[0], T = M::shape_type::dims[1];
    using S = shape<B, 1, T, T>;
    auto query = broadcasted_iota<std::int32_t, S, 2>(mask);
    auto key = broadcasted_iota<std::int32_t, S, 3>(mask);
    auto key_real = broadcast_in_dim<S, 0, 3>(mask);
    auto allowed = convert_element_type<float>(key_real) * convert_element_type<float>(key <= query);  // 1 or 0
    return (allowed - 1.0f) * 1e9f;
  }

  // Logits f32[B,T,V] of inputs s32[B,T] with mask pred[B,T].
  template <class C, class P, Traced I, Traced M>
  static constexpr auto logits(P p, I inputs, M mask) {
    constexpr std::size_t B = I::shape_type::dims[0], T = I::shape_type::dims[1];
    static_assert(T <= Tmax, "tessel::nn::gpt: the sequence is longer than max_length");
    auto x = take<0>(p.wte, inputs) + broadcast_to<shape<B, T, D>>(slice_in_dim<0, 0, static_cast<long>(T)>(p.wpe));
    auto bias = attention_bias(mask);
    auto [h, unused] = scan(
        [&](auto carry, auto layer) {
          auto next = checkpoint(block<C>{}, checkpoint_policies::dots_saveable)(carry, bias, layer);
          return std::tuple{next, std::tuple<>{}};
        },
        x, p.layer);
    auto out = layer_norm(h, p.lnf_g, p.lnf_b);
    // tied output: [B,T,D] x wte [V,D] over D -> [B,T,V]
    return convert_element_type<float>(
        dot_general<axes<2>, axes<1>>(convert_element_type<C>(out), convert_element_type<C>(p.wte)));
  }

  // The cross-entropy (nats) summed over the positions where mask is true, and their number: a tuple of
  // two f32[]. Data parallel, each device sums its rows and the sums are psummed before the division.
  template <class C, class P, Traced I, Traced Y, Traced M>
  static constexpr auto loss_sums(P p, I inputs, Y targets, M mask) {
    auto ce = softmax_cross_entropy_with_integer_labels(logits<C>(p, inputs, mask), targets);
    auto w = convert_element_type<float>(mask);
    return std::tuple{sum(ce * w), sum(w)};
  }

  // The mean cross-entropy (nats) over the positions where mask is true (0 when there are none).
  template <Traced S, Traced N>
  static constexpr auto mean_loss(S summed, N count) {
    return summed / max(count, 1.0f);
  }
  template <class C, class P, Traced I, Traced Y, Traced M>
  static constexpr auto loss(P p, I inputs, Y targets, M mask) {
    auto [summed, count] = loss_sums<C>(p, inputs, targets, mask);
    return mean_loss(summed, count);
  }
};

}  // namespace tessel::nn
