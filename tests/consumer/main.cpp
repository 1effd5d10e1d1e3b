// A program outside the tessel tree: it must build against an installed tessel, a source checkout
// (add_subdirectory), or only the include folder with the kernels compiled in a TU of its own
// (implementation.cpp), and run a jitted program whose GEMM, epilogue and exp run in the kernels.
#include <tessel/tessel.hpp>

#include <cmath>
#include <iostream>
#include <sstream>

int main() {
  tessel::tensor<float, tessel::shape<2, 3>> t{1, 2, 3, 4, 5, 6};
  auto r = std::move(t).reshape<tessel::shape<3, 2>>();
  std::ostringstream printed;
  printed << r.astype<tessel::bfloat16>();
  std::cout << printed.str() << "\n";
  if (printed.str() != "bf16[3,2]{{1, 2}, {3, 4}, {5, 6}}") return 1;

  // relu(x . w + b) and exp of it: x = [[1, 2], [3, 4]], w = [[1, -1], [1, -1]], b = [0.5, 0.5].
  tessel::tensor<float, tessel::shape<2, 2>> x{1, 2, 3, 4}, w{1, -1, 1, -1};
  tessel::tensor<float, tessel::shape<2>> b{0.5f, 0.5f};
  auto f = [](auto x, auto w, auto b) {
    auto y = tessel::relu(tessel::matmul(x, w) + b);
    return std::make_tuple(y, tessel::exp(y));
  };
  auto [y, e] = tessel::jit(f)(x, w, b);
  std::cout << y << " " << e << "\n";
  const float expected[] = {3.5f, 0.0f, 7.5f, 0.0f};
  for (int i = 0; i < 4; ++i)
    if (y[i] != expected[i] || std::abs(e[i] - std::exp(expected[i])) > 1e-5f * std::exp(expected[i])) return 1;
  return 0;
}
