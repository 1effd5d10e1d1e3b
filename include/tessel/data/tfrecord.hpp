#pragma once
// TFRecord files (TensorFlow's record format, raw or GZIP) and tf.train.Example records, as a pipeline
// source: each process reads its own files, interleaved as tf.data's `interleave` orders them, and the
// pipeline's shuffle, shard, batch and saved positions apply as to any source (dataset.hpp).
//
//   a record    u64 length (little-endian), u32 masked CRC32C of those 8 bytes, the data, u32 masked
//               CRC32C of the data; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8
//
//   namespace td = tessel::data;
//   auto records = td::from_tfrecord({"train-00000.tfrecord.gz", "train-00001.tfrecord.gz"},
//                                    {.cycle_length = 2, .process = rank, .processes = ranks});
//   auto examples = std::move(records) | td::map([](const std::string& r) { return td::parse_example(r); });
//   // examples.get(epoch, i).floats("image"), .int64s("label")
//
// A file is read whole when the source is made, every record's two CRCs checked, and its records are
// kept in memory (decompressed): for data that fits in memory, as Fashion-MNIST does; a file read as it
// is consumed is not built. A damaged file (a CRC that does not match, a record cut short, a length over
// `max_record_bytes`, a damaged gzip stream) is a format_error naming the file, the record's index and
// its byte offset in the (decompressed) file.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tessel/io/atomic_file.hpp"

namespace tessel::data {

// CRC32C (Castagnoli), as TFRecord and iSCSI compute it, and TFRecord's masking of it.
std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0);
constexpr std::uint32_t masked_crc32c(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

struct tfrecord_read_options {
  std::uint64_t max_record_bytes = std::uint64_t{1} << 30;  // a longer record's length is taken as damage
};

// Every record of one file (GZIP-compressed or raw: zlib tells them apart), in order.
std::vector<std::string> read_tfrecords(const std::filesystem::path& file, const tfrecord_read_options& options = {});

struct tfrecord_write_options {
  bool gzip = false;  // the whole file one gzip stream, as TFRecordWriter(options="GZIP") writes it
};

// Writes records as a TFRecord file, atomically (io::write_file_atomically): for tests and converters.
void write_tfrecords(const std::filesystem::path& file, std::span<const std::string> records,
                     const tfrecord_write_options& options = {});

// ---- tf.train.Example ------------------------------------------------------------------------------

// One feature's values: a BytesList, FloatList or Int64List.
using feature_values = std::variant<std::vector<std::string>, std::vector<float>, std::vector<std::int64_t>>;

// A tf.train.Example: its features by name.
struct example {
  std::map<std::string, feature_values, std::less<>> features;

  // The named feature's values; a format_error naming the feature, the kind asked for and the kind
  // found (or that the example has no such feature).
  const std::vector<std::string>& bytes(std::string_view name) const;
  const std::vector<float>& floats(std::string_view name) const;
  const std::vector<std::int64_t>& int64s(std::string_view name) const;
};

// Decodes a serialized tf.train.Example (protobuf wire format; packed and unpacked repeated values
// alike, unknown fields skipped as protobuf does). A malformed record is a format_error saying where.
example parse_example(std::string_view bytes);

// Serializes an example (packed values, features in name order; TensorFlow's order of a map's entries is
// its own, so the bytes may differ from its, the example not): for tests and converters.
std::string serialize_example(const example& e);

// ---- the source -----------------------------------------------------------------------------------

struct tfrecord_options {
  // Files read at once, a record from each in turn (tf.data.Dataset.interleave(cycle_length=...,
  // block_length=1), deterministic): a file that ends leaves its place empty until the cycle comes back
  // to it and opens the next file there.
  std::size_t cycle_length = 1;
  // This process reads files[process], files[process + processes], ... (tf.data's shard of the file list).
  std::size_t process = 0, processes = 1;
  tfrecord_read_options read{};
};

// The serialized records of this process's files, in interleave order: a dataset (size, get(epoch, i)).
class tfrecord_dataset {
 public:
  using value_type = std::string;

  tfrecord_dataset(std::vector<std::filesystem::path> files, const tfrecord_options& options);

  std::size_t size() const noexcept { return order_.size(); }
  // Throws std::out_of_range if i >= size().
  const std::string& get(std::uint64_t epoch, std::size_t i) const;
  // This process's files, in the order they were given.
  const std::vector<std::filesystem::path>& files() const noexcept { return files_; }
  // Element i's file (an index into files()) and its record in that file.
  std::pair<std::size_t, std::size_t> where(std::size_t i) const;

 private:
  std::vector<std::filesystem::path> files_;
  std::shared_ptr<const std::vector<std::vector<std::string>>> records_;  // by file; shared by copies
  std::vector<std::pair<std::uint32_t, std::uint32_t>> order_;               // (file, record) of element i
};

// Throws std::invalid_argument for no files, a cycle_length of 0, processes == 0 or process >= processes,
// or a process left without files; format_error for a damaged file.
tfrecord_dataset from_tfrecord(std::vector<std::filesystem::path> files, const tfrecord_options& options = {});

// The order interleave(cycle_length, block_length = 1) visits records in, for files of `counts` records:
// (file, record) pairs. What tfrecord_dataset uses; public for tests.
std::vector<std::pair<std::uint32_t, std::uint32_t>> interleave_order(std::span<const std::size_t> counts,
                                                                      std::size_t cycle_length);

}  // namespace tessel::data

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/data/tfrecord-inl.hpp"
#endif
