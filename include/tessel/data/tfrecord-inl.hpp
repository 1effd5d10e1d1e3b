// Definitions of tessel/data/tfrecord.hpp's functions: compiled once, in the tessel library (src/tessel.cpp),
// or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before including
// tessel/tessel.hpp.
#pragma once

#include <zlib.h>

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessel/data/idx-inl.hpp"  // detail::gz_source: a gzip-or-raw file, read in order
#include "tessel/data/source.hpp"   // detail::out_of_range
#include "tessel/data/tfrecord.hpp"

namespace tessel::data {

namespace detail {

// The reflected Castagnoli polynomial's table, one byte at a time.
constexpr std::array<std::uint32_t, 256> crc32c_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) != 0 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}();

inline std::uint64_t load_u64_le(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
inline std::uint32_t load_u32_le(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 | static_cast<std::uint32_t>(p[2]) << 16 |
         static_cast<std::uint32_t>(p[3]) << 24;
}
inline void store_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xffu));
}

std::string hex32(std::uint32_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 7; i >= 0; --i) s += digits[v >> (4 * i) & 15u];
  return s;
}

}  // namespace detail

std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc) {
  crc = ~crc;
  for (const std::byte b : bytes) crc = detail::crc32c_table[(crc ^ static_cast<std::uint8_t>(b)) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

std::vector<std::string> read_tfrecords(const std::filesystem::path& file, const tfrecord_read_options& options) {
  detail::gz_source in(file, "tessel::data::read_tfrecords: " + io::quoted(file) + ": ");
  std::vector<std::string> records;
  std::uint64_t offset = 0;  // of the record being read, in the decompressed file
  for (;;) {
    const std::string where = "record " + std::to_string(records.size()) + " at byte " + std::to_string(offset);
    unsigned char header[12];
    const std::size_t got = in.read(header, sizeof header);
    if (got == 0) break;
    if (got < sizeof header)
      in.fail(where + ": truncated: expected a 12-byte header (length and its CRC), found " + std::to_string(got) + " bytes");
    const std::uint64_t length = detail::load_u64_le(header);
    const std::uint32_t stored = detail::load_u32_le(header + 8);
    const std::uint32_t computed = masked_crc32c(crc32c(std::as_bytes(std::span(header, 8))));
    if (stored != computed)
      in.fail(where + ": the length's CRC does not match (stored " + detail::hex32(stored) + ", computed " +
              detail::hex32(computed) + "): not a TFRecord file, or damaged");
    if (length > options.max_record_bytes)
      in.fail(where + ": length " + std::to_string(length) + " is over max_record_bytes (" +
              std::to_string(options.max_record_bytes) + ")");
    std::string data(static_cast<std::size_t>(length), '\0');
    if (const std::size_t n = in.read(data.data(), data.size()); n < data.size())
      in.fail(where + ": truncated: expected " + std::to_string(length) + " bytes of data, found " + std::to_string(n));
    unsigned char tail[4];
    if (const std::size_t n = in.read(tail, sizeof tail); n < sizeof tail)
      in.fail(where + ": truncated: expected the data's 4-byte CRC, found " + std::to_string(n) + " bytes");
    const std::uint32_t data_stored = detail::load_u32_le(tail);
    const std::uint32_t data_computed = masked_crc32c(crc32c(std::as_bytes(std::span(data.data(), data.size()))));
    if (data_stored != data_computed)
      in.fail(where + ": the data's CRC does not match (stored " + detail::hex32(data_stored) + ", computed " +
              detail::hex32(data_computed) + ")");
    records.push_back(std::move(data));
    offset += sizeof header + length + sizeof tail;
  }
  return records;
}

namespace detail {

// `raw` as one gzip stream (RFC 1952), compressed with zlib's deflate.
std::string gzip_bytes(const std::string& raw) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("tessel::data::write_tfrecords: zlib's deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(raw.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const std::size_t written = out.size() - z.avail_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("tessel::data::write_tfrecords: zlib's deflate failed (" + std::to_string(rc) + ")");
  out.resize(written);
  return out;
}

}  // namespace detail

void write_tfrecords(const std::filesystem::path& file, std::span<const std::string> records, const tfrecord_write_options& options) {
  std::string framed;
  for (const std::string& r : records) {
    const std::size_t at = framed.size();
    detail::store_le(framed, r.size(), 8);
    detail::store_le(framed, masked_crc32c(crc32c(std::as_bytes(std::span(framed.data() + at, 8)))), 4);
    framed += r;
    detail::store_le(framed, masked_crc32c(crc32c(std::as_bytes(std::span(r.data(), r.size())))), 4);
  }
  if (options.gzip) {
    if (framed.size() > std::numeric_limits<uInt>::max())
      throw std::invalid_argument("tessel::data::write_tfrecords: " + io::quoted(file) + ": over 4 GiB of records in one gzip file");
    framed = detail::gzip_bytes(framed);
  }
  io::write_file_atomically(file, [&](io::output_file& out) { out.write(framed); });
}

// ---- tf.train.Example ------------------------------------------------------------------------------
//
//   Example { Features features = 1; }   Features { map<string, Feature> feature = 1; }
//   Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }

namespace detail {

// Reads one protobuf message's fields; every failure names the message's path within the example.
class wire_reader {
 public:
  wire_reader(std::string_view bytes, std::string path) : rest_(bytes), path_(std::move(path)) {}

  bool done() const { return rest_.empty(); }
  const std::string& path() const { return path_; }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) fail("a varint runs past the end");
      const auto b = static_cast<unsigned char>(rest_.front());
      rest_.remove_prefix(1);
      v |= static_cast<std::uint64_t>(b & 0x7fu) << shift;
      if ((b & 0x80u) == 0) return v;
    }
    fail("a varint is longer than 10 bytes");
  }
  // A field's key: (number, wire type).
  std::pair<std::uint64_t, unsigned> key() {
    const std::uint64_t k = varint();
    if (k >> 3 == 0) fail("field number 0");
    return {k >> 3, static_cast<unsigned>(k & 7u)};
  }
  std::string_view length_delimited() {
    const std::uint64_t n = varint();
    if (n > rest_.size()) fail("a length of " + std::to_string(n) + " bytes runs past the end (" + std::to_string(rest_.size()) + " left)");
    const std::string_view v = rest_.substr(0, static_cast<std::size_t>(n));
    rest_.remove_prefix(static_cast<std::size_t>(n));
    return v;
  }
  std::uint32_t fixed32() {
    if (rest_.size() < 4) fail("a 4-byte value runs past the end");
    const std::uint32_t v = load_u32_le(reinterpret_cast<const unsigned char*>(rest_.data()));
    rest_.remove_prefix(4);
    return v;
  }
  // The next length-delimited field numbered `field` (the fields before it skipped); none at the end.
  std::optional<std::string_view> next_message(std::uint64_t field) {
    while (!done()) {
      const auto [f, t] = key();
      if (f == field && t == 2) return length_delimited();
      skip(t);
    }
    return std::nullopt;
  }
  void skip(unsigned wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1:
        if (rest_.size() < 8) fail("an 8-byte value runs past the end");
        rest_.remove_prefix(8);
        return;
      case 2: length_delimited(); return;
      case 5: fixed32(); return;
      default: fail("wire type " + std::to_string(wire_type) + " (groups and unknown types are not read)");
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw format_error("tessel::data::parse_example: " + path_ + ": " + what);
  }

 private:
  std::string_view rest_;
  std::string path_;
};

feature_values parse_feature(std::string_view bytes, const std::string& path) {
  wire_reader r(bytes, path);
  feature_values values = std::vector<std::string>{};  // a Feature with no kind set reads as an empty BytesList
  while (!r.done()) {
    const auto [field, type] = r.key();
    if (field < 1 || field > 3 || type != 2) {
      r.skip(type);
      continue;
    }
    wire_reader list(r.length_delimited(), path + (field == 1 ? ".bytes_list" : field == 2 ? ".float_list" : ".int64_list"));
    if (field == 1) {
      std::vector<std::string> v;
      while (const auto b = list.next_message(1)) v.emplace_back(*b);
      values = std::move(v);
    } else if (field == 2) {
      std::vector<float> v;
      while (!list.done()) {
        const auto [f, t] = list.key();
        if (f == 1 && t == 2) {  // packed
          wire_reader packed(list.length_delimited(), list.path());
          while (!packed.done()) v.push_back(std::bit_cast<float>(packed.fixed32()));
        } else if (f == 1 && t == 5) {
          v.push_back(std::bit_cast<float>(list.fixed32()));
        } else {
          list.skip(t);
        }
      }
      values = std::move(v);
    } else {
      std::vector<std::int64_t> v;
      while (!list.done()) {
        const auto [f, t] = list.key();
        if (f == 1 && t == 2) {  // packed
          wire_reader packed(list.length_delimited(), list.path());
          while (!packed.done()) v.push_back(static_cast<std::int64_t>(packed.varint()));
        } else if (f == 1 && t == 0) {
          v.push_back(static_cast<std::int64_t>(list.varint()));
        } else {
          list.skip(t);
        }
      }
      values = std::move(v);
    }
  }
  return values;
}

// With its article, as a message says it.
std::string_view kind_name(const feature_values& v) {
  return v.index() == 0 ? "a bytes_list" : v.index() == 1 ? "a float_list" : "an int64_list";
}

template <class T>
const std::vector<T>& feature_as(const example& e, std::string_view name, std::string_view kind) {
  const auto it = e.features.find(name);
  if (it == e.features.end()) {
    std::string names;
    for (const auto& [n, v] : e.features) names += (names.empty() ? "" : ", ") + n;
    throw format_error("tessel::data::example: no feature '" + std::string(name) + "' (it has: " +
                       (names.empty() ? std::string("none") : names) + ")");
  }
  if (const auto* v = std::get_if<std::vector<T>>(&it->second)) return *v;
  throw format_error("tessel::data::example: feature '" + std::string(name) + "' is " + std::string(kind_name(it->second)) +
                     ", not " + std::string(kind));
}

void put_key(std::string& out, unsigned field, unsigned type) {
  for (std::uint64_t k = field << 3 | type; ; k >>= 7) {
    if (k < 0x80) {
      out.push_back(static_cast<char>(k));
      return;
    }
    out.push_back(static_cast<char>((k & 0x7fu) | 0x80u));
  }
}
void put_varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7fu) | 0x80u));
  out.push_back(static_cast<char>(v));
}
void put_bytes(std::string& out, unsigned field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

}  // namespace detail

const std::vector<std::string>& example::bytes(std::string_view name) const {
  return detail::feature_as<std::string>(*this, name, "a bytes_list");
}
const std::vector<float>& example::floats(std::string_view name) const {
  return detail::feature_as<float>(*this, name, "a float_list");
}
const std::vector<std::int64_t>& example::int64s(std::string_view name) const {
  return detail::feature_as<std::int64_t>(*this, name, "an int64_list");
}

example parse_example(std::string_view bytes) {
  example e;
  detail::wire_reader top(bytes, "Example");
  while (const auto features_message = top.next_message(1)) {
    detail::wire_reader features(*features_message, "Example.features");
    while (const auto entry_message = features.next_message(1)) {
      detail::wire_reader entry(*entry_message, "Example.features.feature");
      std::string name;
      std::string_view value;
      while (!entry.done()) {
        const auto [ef, et] = entry.key();
        if (ef == 1 && et == 2) name = std::string(entry.length_delimited());
        else if (ef == 2 && et == 2) value = entry.length_delimited();
        else entry.skip(et);
      }
      // A map entry seen again replaces the earlier one, as protobuf's parsers do.
      e.features[name] = detail::parse_feature(value, "Example.features.feature['" + name + "']");
    }
  }
  return e;
}

std::string serialize_example(const example& e) {
  std::string features;
  for (const auto& [name, values] : e.features) {
    std::string list;
    std::visit(
        [&]<class T>(const std::vector<T>& v) {
          if constexpr (std::is_same_v<T, std::string>) {
            for (const std::string& s : v) detail::put_bytes(list, 1, s);
          } else if constexpr (std::is_same_v<T, float>) {
            std::string packed;
            for (const float x : v) detail::store_le(packed, std::bit_cast<std::uint32_t>(x), 4);
            if (!v.empty()) detail::put_bytes(list, 1, packed);
          } else {
            std::string packed;
            for (const std::int64_t x : v) detail::put_varint(packed, static_cast<std::uint64_t>(x));
            if (!v.empty()) detail::put_bytes(list, 1, packed);
          }
        },
        values);
    std::string feature;
    detail::put_bytes(feature, static_cast<unsigned>(values.index()) + 1, list);
    std::string entry;
    detail::put_bytes(entry, 1, name);
    detail::put_bytes(entry, 2, feature);
    detail::put_bytes(features, 1, entry);
  }
  std::string out;
  detail::put_bytes(out, 1, features);
  return out;
}

// ---- the source -----------------------------------------------------------------------------------

std::vector<std::pair<std::uint32_t, std::uint32_t>> interleave_order(std::span<const std::size_t> counts, std::size_t cycle_length) {
  if (cycle_length == 0) throw std::invalid_argument("tessel::data::interleave_order: cycle_length must be at least 1");
  // tf.data's InterleaveDataset with block_length 1: slot `at` of the cycle holds an open file (its
  // index, its next record) or none; an empty slot opens the next file when the cycle reaches it, a
  // file that ends empties its slot and the cycle moves on.
  struct slot {
    bool open = false;
    std::size_t file = 0, next = 0;
  };
  std::vector<slot> cycle(cycle_length);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> order;
  std::size_t next_file = 0, open = 0, at = 0;
  while (next_file < counts.size() || open > 0) {
    slot& s = cycle[at];
    if (s.open) {
      if (s.next < counts[s.file]) {
        order.emplace_back(static_cast<std::uint32_t>(s.file), static_cast<std::uint32_t>(s.next++));
      } else {
        s.open = false;
        --open;
      }
      at = (at + 1) % cycle_length;
    } else if (next_file < counts.size()) {
      s = {true, next_file++, 0};
      ++open;
    } else {
      at = (at + 1) % cycle_length;
    }
  }
  return order;
}

tfrecord_dataset::tfrecord_dataset(std::vector<std::filesystem::path> files, const tfrecord_options& options) {
  const std::string who = "tessel::data::from_tfrecord: ";
  if (files.empty()) throw std::invalid_argument(who + "no files given");
  if (options.cycle_length == 0) throw std::invalid_argument(who + "cycle_length must be at least 1");
  if (options.processes == 0 || options.process >= options.processes)
    throw std::invalid_argument(who + "process " + std::to_string(options.process) + " is not below processes (" +
                                std::to_string(options.processes) + ")");
  if (files.size() < options.processes)
    throw std::invalid_argument(who + std::to_string(files.size()) + " files for " + std::to_string(options.processes) +
                                " processes leave process " + std::to_string(files.size()) +
                                " without one; fix: write at least one file per process (TFRecord shards are split by file)");
  for (std::size_t f = options.process; f < files.size(); f += options.processes) files_.push_back(std::move(files[f]));
  auto records = std::make_shared<std::vector<std::vector<std::string>>>();
  std::vector<std::size_t> counts;
  for (const auto& file : files_) {
    records->push_back(read_tfrecords(file, options.read));
    counts.push_back(records->back().size());
  }
  order_ = interleave_order(counts, options.cycle_length);
  records_ = std::move(records);
}

const std::string& tfrecord_dataset::get(std::uint64_t, std::size_t i) const {
  if (i >= order_.size()) detail::out_of_range("tessel::data::tfrecord_dataset", i, order_.size());
  return (*records_)[order_[i].first][order_[i].second];
}

std::pair<std::size_t, std::size_t> tfrecord_dataset::where(std::size_t i) const {
  if (i >= order_.size()) detail::out_of_range("tessel::data::tfrecord_dataset::where", i, order_.size());
  return order_[i];
}

tfrecord_dataset from_tfrecord(std::vector<std::filesystem::path> files, const tfrecord_options& options) {
  return tfrecord_dataset(std::move(files), options);
}

}  // namespace tessel::data
