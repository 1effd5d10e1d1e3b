// libFuzzer target: IDX bytes parsed in memory, and the same bytes as a file through zlib's gz* reader
// (which also meets damaged gzip streams when the input starts with 1f 8b). Anything but a
// format_error escaping is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "tessel/data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::uint64_t max_bytes = 1 << 24;  // keeps lying headers cheap for the fuzzer
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto a = tessel::data::parse_idx(input, "fuzz", max_bytes);
    std::size_t n = 1;
    for (const std::size_t d : a.dims) n *= d;
    if (n != a.size()) __builtin_trap();
  } catch (const tessel::data::format_error&) {
  }
  // One scratch file per process, removed when libFuzzer exits.
  static const struct scratch {
    std::string path = "/tmp/tessel-fuzz-idx-" + std::to_string(::getpid());
    ~scratch() { std::remove(path.c_str()); }
  } file;
  const std::string& path = file.path;
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
    try {
      (void)tessel::data::read_idx(path, max_bytes);
    } catch (const tessel::data::format_error&) {
    }
  }
  return 0;
}
