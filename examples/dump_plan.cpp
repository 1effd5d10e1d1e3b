// What jit makes of four programs: the plan printed by tessel::dump (kernels, what each fuses, the
// buffers it reads and writes, flops and bytes, the arena and its peak). Every plan is computed at
// compile time; dump only prints it.
#include <iostream>

#include <tessel/ops.hpp>
#include <tessel/dump.hpp>
#include <tessel/tessel.hpp>
#include <tessel/jit.hpp>

int main() {
  using tessel::shape;
  using tessel::tensor;

  // One loop kernel: a is a scalar argument (an f32[] parameter), b a row broadcast over x's rows.
  const auto affine_relu = [](auto x, auto a, auto b) { return tessel::relu(a * x + b); };
  std::cout << "== relu(a*x + b): x f32[128,256], a f32[], b f32[256]\n"
            << tessel::dump(affine_relu, tensor<float, shape<128, 256>>{}, 1.0f, tensor<float, shape<256>>{}) << "\n";

  // One row kernel: max, exp, sum and the division in one pass over each row.
  const auto softmax = [](auto x) { return tessel::softmax(x); };
  std::cout << "== softmax over rows: x f32[4096,1024]\n" << tessel::dump(softmax, tensor<float, shape<4096, 1024>>{}) << "\n";

  // One contraction kernel: the bias and relu are applied to each block of rows of the product.
  const auto dense = [](auto x, auto w, auto b) { return tessel::relu(tessel::matmul(x, w) + b); };
  std::cout << "== relu(matmul(x, w) + b): x f32[128,784], w f32[784,256], b f32[256]\n"
            << tessel::dump(dense, tensor<float, shape<128, 784>>{}, tensor<float, shape<784, 256>>{}, tensor<float, shape<256>>{})
            << "\n";

  // An MLP forward pass, 784-256-10 with relu, batch 128, to logits.
  const auto mlp = [](auto x, auto w1, auto b1, auto w2, auto b2) {
    const auto h = tessel::relu(tessel::matmul(x, w1) + b1);
    return tessel::matmul(h, w2) + b2;
  };
  std::cout << "== MLP forward 784-256-10 (relu), batch 128: logits f32[128,10]\n"
            << tessel::dump(mlp, tensor<float, shape<128, 784>>{}, tensor<float, shape<784, 256>>{}, tensor<float, shape<256>>{},
                            tensor<float, shape<256, 10>>{}, tensor<float, shape<10>>{});
}
