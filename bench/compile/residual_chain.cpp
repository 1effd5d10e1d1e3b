// Compile-time program: a jit program of DEPTH residual layers h = h + relu(matmul(h, w_i) + b_i), width
// 64, batch 32, every weight and bias its own argument. bench/compile/measure compiles it at DEPTH = 30
// (a 30-layer residual chain must compile: TARGETS.md).
//   g++ -std=c++20 -O2 -Iinclude -DDEPTH=30 -c bench/compile/residual_chain.cpp
// With -DGRAD: value_and_grad of mean(chain(x, params)) with respect to every weight and bias, the
// gradient step's program; the parameters are a std::array of DEPTH layer structs {w, b}. With
// -DGRAD -DFLAT_TUPLE they are one flat std::tuple of 2 * DEPTH tensors instead (libstdc++'s tuple costs
// grow with the square of its length: bench/README.md has both).
#include <array>
#include <cstddef>
#include <iostream>
#include <tuple>
#include <utility>

#include <boost/hana/define_struct.hpp>
#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/transform/grad.hpp>
#include <tessel/jit.hpp>

#ifndef DEPTH
#define DEPTH 30
#endif

namespace {
constexpr std::size_t depth = DEPTH, width = 64, batch = 32;

// f(x, w0, b0, w1, b1, ...): layer i takes parameters 2i and 2i + 1.
const auto chain = [](auto x, auto... params) {
  const std::tuple<decltype(params)...> p(params...);
  auto h = x;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((h = h + tessel::relu(tessel::matmul(h, std::get<2 * I>(p)) + std::get<2 * I + 1>(p))), ...);
  }(std::make_index_sequence<sizeof...(params) / 2>{});
  return h;
};

template <template <class, class> class T = tessel::tensor>
struct layer_params {
  BOOST_HANA_DEFINE_STRUCT(layer_params, (T<float, tessel::shape<width, width>>, w), (T<float, tessel::shape<width>>, b));
};

template <std::size_t I, class W, class B>
const auto& weight_or_bias(const W& w, const B& b) {
  if constexpr (I % 2 == 0) return w;
  else return b;
}
}  // namespace

int main() {
  using tessel::shape;
  using tessel::tensor;
  const auto x = tensor<float, shape<batch, width>>::full(0.5f);
  const auto w = tensor<float, shape<width, width>>::full(1.0f / width);
  const auto b = tensor<float, shape<width>>::full(0.01f);
#if defined(GRAD) && !defined(FLAT_TUPLE)
  std::array<layer_params<>, depth> params;
  for (auto& layer : params) {
    layer.w = w;
    layer.b = b;
  }
  const auto loss = [](auto x, const auto& p) {
    auto h = x;
    for (const auto& layer : p) h = h + tessel::relu(tessel::matmul(h, layer.w) + layer.b);
    return tessel::mean(h);
  };
  const auto [value, grads] = tessel::value_and_grad<1>(loss)(x, params);
  const auto& y = grads[0].w;
  std::cout << "loss " << value[0] << ", ";
#elif defined(GRAD)
  const auto params = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple(weight_or_bias<I>(w, b)...);
  }(std::make_index_sequence<2 * depth>{});
  const auto loss = [](auto x, auto p) {
    return tessel::mean(std::apply([&](auto... q) { return chain(x, q...); }, p));
  };
  const auto [value, grads] = tessel::value_and_grad<1>(loss)(x, params);
  const auto& y = std::get<0>(grads);
  std::cout << "loss " << value[0] << ", ";
#else
  const auto y = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return tessel::jit(chain)(x, weight_or_bias<I>(w, b)...);
  }(std::make_index_sequence<2 * depth>{});
#endif
  std::cout << "residual_chain DEPTH=" << depth << ": y[0,0] = " << y(0, 0) << "\n";
}
