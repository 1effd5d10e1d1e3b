// The pipeline fail-tests' model: 8 stacked layers of tanh(x w), a stage that applies its first layer, a
// squared error. Included after <tessel/tessel.hpp> and <tessel/pipeline.hpp>, which it does not include
// itself: the fail-tests' precompiled tessel.hpp serves only an include of the test file's own.
#pragma once

template <template <class, class> class T = tessel::tensor>
struct layers {
  BOOST_HANA_DEFINE_STRUCT(layers, (T<float, tessel::shape<8, 16, 16>>, w));
};
constexpr auto stage = [](const auto& p, auto x) {
  return tessel::tanh(tessel::matmul(x, tessel::reshape<tessel::shape<16, 16>>(tessel::slice_in_dim<0, 0, 1>(p.w))));
};
constexpr auto loss = [](auto y, auto t) { return tessel::mean((y - t) * (y - t)); };
