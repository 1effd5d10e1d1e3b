// libFuzzer target: parse_safetensors on arbitrary bytes, and on arbitrary header text behind a valid
// length. A file the reader accepts must write back to a file that reads the same; anything but a
// format_error escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "tessel/io/safetensors.hpp"

namespace {

void check_accepted(const tessel::io::safetensors_file& f) {
  const auto again = tessel::io::parse_safetensors(tessel::io::serialize_safetensors(f));
  if (again.tensors.size() != f.tensors.size() || again.metadata != f.metadata) __builtin_trap();
  for (std::size_t i = 0; i < f.tensors.size(); ++i) {
    const auto &a = f.tensors[i], &b = again.tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.bytes != b.bytes) __builtin_trap();
    try {
      (void)tessel::io::get<float, tessel::shape<2, 3>>(f, a.name);
      (void)tessel::io::get<bool, tessel::shape<4>>(f, a.name);
    } catch (const tessel::io::format_error&) {
    }
  }
}

void parse(std::span<const std::byte> bytes) {
  try {
    check_accepted(tessel::io::parse_safetensors(bytes, "fuzz"));
  } catch (const tessel::io::format_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  parse(input);
  // The input as the header, followed by up to 64 bytes of buffer taken from its own end.
  const std::uint64_t header = size > 64 ? size - 64 : size;
  std::vector<std::byte> file(8 + size);
  std::memcpy(file.data(), &header, 8);
  if (size) std::memcpy(file.data() + 8, data, size);
  parse(file);
  return 0;
}
