// A tour of tessel's foundation: static shapes, tensors, bfloat16 and the shape rules.
// Every shape below is a type: a wrong one is a compile error that names it (see tests/fail/).
#include <tessel/tessel.hpp>

#include <iostream>
#include <numeric>

int main() {
  using tessel::shape;
  using tessel::tensor;

  // A 2x3 tensor, row-major, on the heap and 64-byte aligned.
  tensor<float, shape<2, 3>> x{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  std::cout << "x            = " << x << "\n";

  // bf16 keeps 8 bits of mantissa: the values round to nearest even, as in JAX. It prints in its
  // shortest form; widened back to f32 it shows the value it really holds.
  const auto half = x.astype<tessel::bfloat16>();
  std::cout << "x as bf16    = " << half << "\n";
  std::cout << "  as f32     = " << half.astype<float>() << "\n";

  // Reshaping moves the buffer; the size check happens at compile time.
  auto y = std::move(x).reshape<shape<3, 2>>();
  std::cout << "reshaped     = " << y << "\n";

  // Shape rules are compile-time functions; these are what every operation uses.
  using batch = tessel::broadcast_shapes_t<shape<128, 1>, shape<10>>;
  using transposed = tessel::permute_t<shape<128, 784>, 1, 0>;
  using stacked = tessel::concat_t<0, shape<128, 784>, shape<32, 784>>;
  std::cout << "broadcast    [128,1] with [10]         -> " << tessel::describe<batch>().view() << "\n";
  std::cout << "transpose    [128,784] by (1,0)        -> " << tessel::describe<transposed>().view() << "\n";
  std::cout << "concatenate  [128,784], [32,784] on 0  -> " << tessel::describe<stacked>().view() << "\n";

  // Large static shapes are fine: a 1024x1024 tensor is 4 MiB of heap.
  auto big = tensor<std::int32_t, shape<1024, 1024>>::zeros();
  std::iota(big.begin(), big.end(), 0);
  std::cout << "big          = " << big << "\n";
  return 0;
}
