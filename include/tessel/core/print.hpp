#pragma once
// Printing: `f32[2,3]{{1, 2, 3}, {4, 5, 6}}`. Floats print in their shortest round-trip form (for
// bf16: the shortest that reads back as the same bf16);
// tensors with more than `print_options::threshold` elements show the first and last `edge_items`
// of each axis around "...", as NumPy does.

#include <charconv>
#include <cstddef>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

#include "tessel/core/tensor.hpp"

namespace tessel {

struct print_options {
  std::size_t threshold = 1000;
  std::size_t edge_items = 3;
};

namespace detail {
template <class T>
void print_element(std::ostream& os, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, float>) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    os.write(buf, end - buf);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    // The shortest decimal that reads back as the same bf16 (NumPy's rule for its own float types).
    char buf[32];
    const float f = v;
    for (int digits = 1; digits <= 9; ++digits) {
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::general, digits);
      float parsed = 0;
      std::from_chars(buf, end, parsed);
      if (digits == 9 || bfloat16(parsed).bits() == v.bits() || f != f) {
        os.write(buf, end - buf);
        break;
      }
    }
  } else {
    os << +v;
  }
}

template <class T, class S>
void print_axis(std::ostream& os, const tensor<T, S>& t, std::size_t axis, std::size_t offset, bool summarize,
                const print_options& opt) {
  if constexpr (S::rank == 0) {
    print_element(os, t[0]);
  } else {
    const std::size_t n = S::dims[axis];
    os << '{';
    for (std::size_t i = 0; i < n; ++i) {
      if (i) os << ", ";
      if (summarize && n > 2 * opt.edge_items && i == opt.edge_items) {
        os << "...";
        i = n - opt.edge_items - 1;
        continue;
      }
      const std::size_t at = offset + i * S::strides[axis];
      if (axis + 1 == S::rank)
        print_element(os, t[at]);
      else
        print_axis(os, t, axis + 1, at, summarize, opt);
    }
    os << '}';
  }
}
}  // namespace detail

template <class T, class S>
void print(std::ostream& os, const tensor<T, S>& t, const print_options& opt = {}) {
  os << describe<tensor_type<T, S>>().view();
  if (!t.data()) {
    os << "{moved-from}";
    return;
  }
  detail::print_axis(os, t, 0, 0, S::size > opt.threshold, opt);
}

template <class T, class S>
std::ostream& operator<<(std::ostream& os, const tensor<T, S>& t) {
  print(os, t);
  return os;
}

template <class T, class S>
std::string to_string(const tensor<T, S>& t, const print_options& opt = {}) {
  std::ostringstream os;
  print(os, t, opt);
  return os.str();
}

}  // namespace tessel
