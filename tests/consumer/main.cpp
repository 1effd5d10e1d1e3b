// A program outside the tessel tree: it must build against an installed tessel or a source checkout.
#include <tessel/tessel.hpp>

#include <iostream>
#include <sstream>

int main() {
  tessel::tensor<float, tessel::shape<2, 3>> t{1, 2, 3, 4, 5, 6};
  auto r = std::move(t).reshape<tessel::shape<3, 2>>();
  std::ostringstream printed;
  printed << r.astype<tessel::bfloat16>();
  std::cout << printed.str() << "\n";
  return printed.str() == "bf16[3,2]{{1, 2}, {3, 4}, {5, 6}}" ? 0 : 1;
}
