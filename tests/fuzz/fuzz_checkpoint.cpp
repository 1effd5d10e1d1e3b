// libFuzzer target: the checkpoint reader (check_checkpoint on what parse_safetensors accepts, then
// key() and load() into a fixed tree) on arbitrary bytes. Anything but a format_error escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "tessel/io/checkpoint.hpp"

namespace {
template <template <class, class> class T = tessel::tensor>
struct params {
  BOOST_HANA_DEFINE_STRUCT(params, (T<float, tessel::shape<2, 3>>, w), (T<bool, tessel::shape<4>>, mask));
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = tessel::io::parse_safetensors(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
    const tessel::io::loaded_checkpoint c = tessel::io::check_checkpoint(file, "fuzz");
    if (c.has("tessel.rng_key")) (void)c.key();
    params<> p;
    c.load(tessel::io::slot("params", p));
  } catch (const tessel::io::format_error&) {
  }
  return 0;
}
