#pragma once
// Helpers for the checkpoint tests: a temporary directory, whole-file bytes, tensors of every dtype
// filled with telling values (NaN, infinities, extremes), and a check that a call throws a given
// exception type whose message says given things.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/core/tensor.hpp"

namespace checkpoint_test {

class temp_dir {
 public:
  temp_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("tessel-" + std::string(info ? info->name() : "test") + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

inline std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

// A tensor whose elements differ from each other and include each dtype's awkward values.
template <class T, class S>
tessel::tensor<T, S> sample() {
  tessel::tensor<T, S> t;
  for (std::size_t i = 0; i < S::size; ++i) {
    if constexpr (std::is_same_v<T, bool>) t[i] = i % 3 == 1;
    else if constexpr (std::is_same_v<T, tessel::bfloat16>) t[i] = tessel::bfloat16(static_cast<float>(i) * 0.25f - 1.0f);
    else if constexpr (std::is_same_v<T, float>) t[i] = static_cast<float>(i) * 0.1f - 0.7f;
    else t[i] = static_cast<T>(static_cast<std::int64_t>(i) * 1000003 - 7);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (S::size > 2) t[1] = std::numeric_limits<float>::quiet_NaN(), t[2] = -std::numeric_limits<float>::infinity();
  } else if constexpr (std::is_same_v<T, tessel::bfloat16>) {
    if (S::size > 2) t[1] = std::numeric_limits<tessel::bfloat16>::quiet_NaN(), t[2] = std::numeric_limits<tessel::bfloat16>::lowest();
  } else if constexpr (!std::is_same_v<T, bool>) {
    if (S::size > 1) t[S::size - 1] = std::numeric_limits<T>::max(), t[0] = std::numeric_limits<T>::min();
  }
  return t;
}

// Bitwise equality: NaNs compare equal to themselves.
template <class T, class S>
bool same_bits(const tessel::tensor<T, S>& a, const tessel::tensor<T, S>& b) {
  return S::size == 0 || std::memcmp(a.data(), b.data(), S::size * sizeof(T)) == 0;
}

template <class E, class F>
::testing::AssertionResult throws_with(F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const E& e) {
    const std::string message = e.what();
    for (const std::string_view part : parts)
      if (message.find(part) == std::string::npos)
        return ::testing::AssertionFailure() << "the message lacks \"" << part << "\": " << message;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace checkpoint_test
