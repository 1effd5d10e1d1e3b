// A synthetic program for the compile-time budget: COUNT distinct tensor types, each put through the
// shape rules every operation uses (broadcast, permute, concatenate, reshape, axes) and printed.
// bench/compile/measure compiles it at several COUNTs to show how compile time grows.
#include <tessel/tessel.hpp>

#include <iostream>
#include <utility>

#ifndef COUNT
#define COUNT 64
#endif

template <std::size_t I>
std::size_t exercise() {
  using s = tessel::shape<I + 1, 3, 4>;
  using b = tessel::broadcast_shapes_t<s, tessel::shape<1, 4>>;
  using p = tessel::permute_t<b, 2, 0, 1>;
  using c = tessel::concat_t<1, p, tessel::shape<4, 1, 3>>;
  using d = tessel::drop_axis_t<c, -1>;
  using r = tessel::insert_axis_t<d, 0, 2>;
  static_assert(tessel::reshapable_v<r, tessel::shape<r::size>>);
  tessel::tensor<float, s> t;
  t(I, 2, 3) = static_cast<float>(I);
  auto flat = std::move(t).template reshape<tessel::shape<s::size>>();
  std::cout << tessel::describe<tessel::tensor_type<float, r>>().view() << ' ' << flat[flat.size - 1] << '\n';
  return r::size;
}

template <std::size_t... I>
std::size_t exercise_all(std::index_sequence<I...>) {
  return (exercise<I>() + ...);
}

int main() { return exercise_all(std::make_index_sequence<COUNT>{}) == 0; }
