// The real Fashion-MNIST files (Debian's dataset-fashion-mnist), and the directory override.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdint>

#include "idx_test_util.hpp"
#include "tessel/data/idx.hpp"

namespace {

namespace td = tessel::data;
using idx_test::gzip;
using idx_test::idx_file;
using idx_test::temp_dir;
using idx_test::throws_format_error;
using idx_test::write_bytes;

TEST(FashionMnist, ReadsTheInstalledFiles) {
  const auto dir = td::fashion_mnist_dir();
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not in " << dir << " (install dataset-fashion-mnist or set TESSEL_FASHION_MNIST_DIR)";
  const td::fashion_mnist d = td::load_fashion_mnist(dir);
  EXPECT_EQ(d.train_images.dims, (std::vector<std::size_t>{60000, 28, 28}));
  EXPECT_EQ(d.train_labels.dims, (std::vector<std::size_t>{60000}));
  EXPECT_EQ(d.test_images.dims, (std::vector<std::size_t>{10000, 28, 28}));
  EXPECT_EQ(d.test_labels.dims, (std::vector<std::size_t>{10000}));
  // The first label of each set is 9 (ankle boot), as the files' bytes 8 show.
  EXPECT_EQ(d.train_labels.data<std::uint8_t>()[0], 9);
  EXPECT_EQ(d.test_labels.data<std::uint8_t>()[0], 9);
  EXPECT_EQ(td::fashion_mnist_class_names[9], "Ankle boot");
  // Every class appears equally often: 6000 per class in train, 1000 in test.
  std::vector<std::size_t> count(10);
  for (const std::uint8_t l : d.train_labels.data<std::uint8_t>()) ++count[l];
  for (const std::size_t c : count) EXPECT_EQ(c, 6000u);
  // Images are not blank.
  std::uint64_t sum = 0;
  for (const std::uint8_t p : d.test_images.data<std::uint8_t>().first(784)) sum += p;
  EXPECT_GT(sum, 0u);

  const auto labels = td::read_idx<std::uint8_t, tessel::shape<10000>>(dir / "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(labels[0], 9u);
  EXPECT_TRUE(throws_format_error(
      [&] { (void)td::read_idx<std::uint8_t, tessel::shape<60000, 28, 28>>(dir / "t10k-images-idx3-ubyte.gz"); },
      {"t10k-images-idx3-ubyte.gz", "expected u8[60000,28,28], found u8[10000,28,28]", "dim 0 is 10000, expected 60000"}));
}

// A tiny data set in the same layout, found through TESSEL_FASHION_MNIST_DIR.
void write_tiny(const temp_dir& dir, std::vector<std::uint8_t> test_labels) {
  const std::vector<std::uint8_t> images(2 * 28 * 28, 17);
  write_bytes(dir / "train-images-idx3-ubyte.gz", gzip(idx_file<std::uint8_t>({2, 28, 28}, images)));
  write_bytes(dir / "train-labels-idx1-ubyte.gz", gzip(idx_file<std::uint8_t>({2}, {3, 4})));
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_file<std::uint8_t>({2, 28, 28}, images));  // raw works too
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_file<std::uint8_t>({2}, test_labels));
}

TEST(FashionMnist, DirectoryFromTheEnvironment) {
  temp_dir dir;
  write_tiny(dir, {9, 0});
  const char* old = std::getenv("TESSEL_FASHION_MNIST_DIR");
  const std::string saved = old ? old : "";
  ::setenv("TESSEL_FASHION_MNIST_DIR", dir.path().c_str(), 1);
  EXPECT_EQ(td::fashion_mnist_dir(), dir.path());
  const auto d = td::load_fashion_mnist();
  EXPECT_EQ(d.train_labels.data<std::uint8_t>()[1], 4);
  EXPECT_EQ(d.test_images.dims[0], 2u);
  ::setenv("TESSEL_FASHION_MNIST_DIR", "", 1);
  EXPECT_EQ(td::fashion_mnist_dir(), std::filesystem::path(td::fashion_mnist_default_dir));
  if (old) ::setenv("TESSEL_FASHION_MNIST_DIR", saved.c_str(), 1);
  else ::unsetenv("TESSEL_FASHION_MNIST_DIR");
}

TEST(FashionMnist, ChecksLabelsAndShapes) {
  temp_dir dir;
  write_tiny(dir, {9, 10});
  EXPECT_TRUE(throws_format_error([&] { (void)td::load_fashion_mnist(dir.path()); },
                                  {"t10k-labels-idx1-ubyte'", "label 10 at index 1", "0 to 9"}));
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_file<std::uint8_t>({3}, {1, 2, 3}));
  EXPECT_TRUE(throws_format_error([&] { (void)td::load_fashion_mnist(dir.path()); }, {"expected u8[2] labels", "[3]"}));
  std::filesystem::remove(dir / "train-images-idx3-ubyte.gz");
  EXPECT_TRUE(throws_format_error([&] { (void)td::load_fashion_mnist(dir.path()); },
                                  {"neither 'train-images-idx3-ubyte.gz' nor 'train-images-idx3-ubyte'", "TESSEL_FASHION_MNIST_DIR"}));
}

}  // namespace
