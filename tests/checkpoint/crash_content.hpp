#pragma once
// What checkpoint_crash_writer saves at each step: every element a function of the step.
#include <tessel/io/checkpoint.hpp>

namespace crash_content {
using tessel::shape;
using tessel::tensor;

template <template <class, class> class T = tensor>
struct state {
  BOOST_HANA_DEFINE_STRUCT(state, (T<float, shape<256, 256>>, w), (T<tessel::bfloat16, shape<1000>>, b),
                           (T<std::int32_t, shape<3>>, step));
};

inline state<> content_of(std::uint64_t step) {
  state<> s;
  for (std::size_t i = 0; i < s.w.size; ++i) s.w[i] = static_cast<float>(step) * 0.5f + static_cast<float>(i);
  for (std::size_t i = 0; i < s.b.size; ++i) s.b[i] = tessel::bfloat16(static_cast<float>((step + i) % 256));
  for (std::size_t i = 0; i < 3; ++i) s.step[i] = static_cast<std::int32_t>(step * 3 + i);
  return s;
}

inline bool matches(const state<>& s, std::uint64_t step) {
  const state<> want = content_of(step);
  return std::memcmp(s.w.data(), want.w.data(), sizeof(float) * s.w.size) == 0 &&
         std::memcmp(s.b.data(), want.b.data(), 2 * s.b.size) == 0 &&
         std::memcmp(s.step.data(), want.step.data(), 4 * 3) == 0;
}

inline tessel::random::key key_of(std::uint64_t step) {
  return tessel::random::fold_in(tessel::random::key_from_seed(7), static_cast<std::uint32_t>(step));
}
}  // namespace crash_content
