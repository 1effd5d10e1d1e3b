// The Fashion-MNIST CNN's step on one device (jit: convolutions, pooling and their gradients) as XLA runs it.
#include "steps_fashion_mnist.hpp"

namespace tessel::export_test {
void write_cnn(const std::string& dir, int steps) {
  using namespace fashion_mnist;
  write_fashion_steps<cnn<>, 8>(dir, make_step<float, 1, in_process>(), steps);
}
}  // namespace tessel::export_test
