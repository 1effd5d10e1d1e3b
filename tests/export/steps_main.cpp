// Writes the examples' train steps for tests/export/run_xla.py --steps (steps.hpp): DIR/<step>/ for each.
#include <cstdio>
#include <string>

namespace tessel::export_test {
void write_data_parallel(const std::string& dir, int steps);
void write_fully_sharded(const std::string& dir, int steps);
void write_tensor_parallel(const std::string& dir, int steps);
void write_cnn(const std::string& dir, int steps);
void write_char_lm(const std::string& dir, int steps);
}  // namespace tessel::export_test

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (writes DIR/<step>/ for tests/export/run_xla.py --steps DIR)\n", argv[0]);
    return 2;
  }
  namespace t = tessel::export_test;
  const std::string dir = argv[1];
  constexpr int steps = 10;
  t::write_data_parallel(dir + "/fashion_mnist_data_parallel", steps);
  t::write_fully_sharded(dir + "/fashion_mnist_fully_sharded", steps);
  t::write_tensor_parallel(dir + "/fashion_mnist_tensor_parallel", steps);
  t::write_cnn(dir + "/fashion_mnist_cnn", steps);
  t::write_char_lm(dir + "/char_lm", steps);
  std::printf("export_steps: 5 train steps, %d steps each, written to %s\n", steps, dir.c_str());
  return 0;
}
