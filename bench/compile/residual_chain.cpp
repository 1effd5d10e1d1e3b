// Compile-time program: a jit program of DEPTH residual layers h = h + relu(matmul(h, w_i) + b_i), width
// 64, batch 32, every weight and bias its own argument. bench/compile/measure compiles it at DEPTH = 30
// (a 30-layer residual chain must compile: TARGETS.md).
//   g++ -std=c++20 -O2 -Iinclude -DDEPTH=30 -c bench/compile/residual_chain.cpp
// With -DGRAD: value_and_grad of mean(chain(x, params)) with respect to every weight and bias (the
// parameters passed as one std::tuple tree), the gradient step's program.
#include <cstddef>
#include <iostream>
#include <tuple>
#include <utility>

#include <tessel/ops.hpp>
#include <tessel/tessel.hpp>
#include <tessel/transform/grad.hpp>
#include <tessel/transform/jit.hpp>

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
#ifdef GRAD
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
