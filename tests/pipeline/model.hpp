#pragma once
// The pipeline tests' model: 8 layers of tanh(x w + b) over width 16, stacked [8, ...], and a squared
// error; `whole` is the same model on one device, the judge's side of every comparison.
#include <cmath>
#include <cstring>
#include <utility>

#include "tessel/pipeline.hpp"
#include "tessel/tessel.hpp"

namespace pipeline_model {
using namespace tessel;

inline constexpr std::size_t layers = 8, width = 16, batch = 32;

template <template <class, class> class T = tensor>
struct stack {
  BOOST_HANA_DEFINE_STRUCT(stack, (T<float, shape<layers, width, width>>, w), (T<float, shape<layers, width>>, b));
};

// One stage: its block's layers in order.
inline constexpr auto stage = [](const auto& p, auto x) {
  constexpr std::size_t k = std::remove_cvref_t<decltype(p.w)>::shape_type::dims[0];
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((x = tanh(matmul(x, reshape<shape<width, width>>(slice_in_dim<0, I, I + 1>(p.w))) +
               reshape<shape<width>>(slice_in_dim<0, I, I + 1>(p.b)))),
     ...);
  }(std::make_index_sequence<k>{});
  return x;
};
inline constexpr auto loss = [](auto y, auto t) { return mean((y - t) * (y - t)); };
inline constexpr auto whole = [](const auto& p, auto x, auto t) { return loss(stage(p, x), t); };

using batch_t = tensor<float, shape<batch, width>>;

inline stack<> parameters() {
  stack<> p;
  for (std::size_t i = 0; i < p.w.size; ++i) p.w.data()[i] = 0.3f * std::sin(0.7f * static_cast<float>(i));
  for (std::size_t i = 0; i < p.b.size; ++i) p.b.data()[i] = 0.1f * std::cos(1.3f * static_cast<float>(i));
  return p;
}
template <class X>
X filled(float phase) {
  X x;
  for (std::size_t i = 0; i < X::size; ++i) x.data()[i] = std::sin(phase + 0.37f * static_cast<float>(i));
  return x;
}
template <class A>
bool same_bits(const A& a, const A& b) {
  return std::memcmp(a.data(), b.data(), A::size * sizeof(typename A::value_type)) == 0;
}

}  // namespace pipeline_model
