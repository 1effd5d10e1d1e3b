#pragma once
// Text for a byte-level language model: fortune files (the format of Debian's `fortunes` and
// `fortunes-min`), byte tokens, a deterministic train/validation split, and records cut to fit the
// longest bucket of bucket_by_length (bucket.hpp), which pads them into static shapes with masks; and
// the words of the training text, to tell how much of a sample is words (vocabulary).
//
//   namespace td = tessel::data;
//   const td::text_corpus corpus = td::read_fortunes(td::fortunes_dir());     // every file of the directory
//   const td::text_split split = td::split_records(corpus.records, {.validation = 0.05, .seed = 0});
//   td::chunked_text train = td::chunk_records(corpus.records, split.train, 512);
//   auto batches = td::from_vector(std::move(train.chunks)) | td::shuffle(key)
//                  | td::bucket_by_length<td::bucket<64, 64>, td::bucket<128, 32>, td::bucket<256, 16>, td::bucket<512, 8>>();
//   // sequence_batch<int32, B, L>: tokens s32[B,L] (byte values 0..255, 0 after the end), mask pred[B,L]
//
// The fortune format (strfile(1)): records are separated by lines that consist of exactly `%`. A record
// is the text between two separators without the newline that ends its last line; text before the first
// separator is a record, a separator at the end of the file starts none. Records with no bytes (a
// separator on the first line, or two in a row) are skipped and counted. CRLF line ends are read as LF
// (the CR before each LF is dropped, so "%\r\n" is a separator); any other byte is kept as it is (the
// files hold backspaces and bells). A file is accepted only whole: unreadable, empty, holding a NUL byte or (with
// validate_utf8, the default) invalid UTF-8 is a format_error (a std::runtime_error) naming the file,
// the byte offset and the line.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/core/dtype.hpp"
#include "tessel/io/atomic_file.hpp"

namespace tessel::data {

// The error of every reader in tessel::data (also declared by idx.hpp).
using format_error = io::format_error;

// ---- reading -----------------------------------------------------------------------------------

struct text_record {
  std::string text;        // the record's bytes (UTF-8 unless validation is off)
  std::uint32_t file = 0;  // index into text_corpus::files
  std::uint32_t line = 0;  // the record's first line in that file, from 1
};

struct text_corpus {
  std::vector<std::filesystem::path> files;  // in the order read (a directory's files sorted by name)
  std::vector<text_record> records;
  std::size_t empty_records = 0;  // separators with nothing between them: skipped
};

struct text_options {
  bool validate_utf8 = true;                    // reject a file that is not UTF-8 (overlong forms and surrogates too)
  std::uint64_t max_file_bytes = 64ull << 20;   // a larger file is rejected before it is read
};

// The records of one fortune file, appended to `corpus` (throws format_error as the top of this file says).
void read_fortune_file(const std::filesystem::path& path, text_corpus& corpus, const text_options& options = {});

// Whether read_fortunes reads this directory entry: a regular file (not a symbolic link, such as
// Debian's `*.u8` links to the same files), not a strfile index (`*.dat`), not hidden.
bool is_fortune_file(const std::filesystem::directory_entry& e);

// A fortune file, or every fortune file of a directory (not its subdirectories) in name order.
// Throws format_error for a path that does not exist, a directory without fortune files, or a bad file.
text_corpus read_fortunes(const std::filesystem::path& path, const text_options& options = {});

// Where Debian's fortunes packages put their files.
inline constexpr std::string_view fortunes_default_dir = "/usr/share/games/fortunes";

// $TESSEL_FORTUNES_DIR if set and not empty, else fortunes_default_dir.
std::filesystem::path fortunes_dir();

// ---- tokens ------------------------------------------------------------------------------------

// Byte-level tokens: each byte is its own token, 0..255 (so every text round-trips, UTF-8 or not).
inline constexpr std::size_t byte_vocabulary = 256;

std::vector<int32> byte_tokens(std::string_view text);

// The bytes of tokens 0..255 (throws std::out_of_range for any other token).
std::string text_of_tokens(std::span<const int32> tokens);

// ---- train / validation split --------------------------------------------------------------------

struct split_options {
  double validation = 0.05;  // the expected fraction of records in validation, in [0, 1]
  std::uint64_t seed = 0;
};

struct text_split {
  std::vector<std::size_t> train, validation;  // record indices, ascending; disjoint, together all records
};

namespace detail {
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
constexpr std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}
}  // namespace detail

// Whether a record with this text goes to validation: splitmix64(seed ^ fnv1a64(text)), read as a
// fraction of 2^64, is below `validation`. A pure function of the text and the seed, so the split does
// not depend on the order or the number of files read, and equal texts (a fortune in two files) always
// land on the same side: validation never holds a copy of a training record.
bool in_validation(std::string_view text, const split_options& options);

// Throws std::invalid_argument if options.validation is not in [0, 1].
text_split split_records(std::span<const text_record> records, const split_options& options = {});

// ---- chunks for bucketing -------------------------------------------------------------------------

// Records as byte-token sequences of at most `max_length` tokens, ready for from_vector and
// bucket_by_length (whose longest bucket should be max_length): a longer record is cut into
// consecutive pieces, all of max_length but the last, so no byte is lost. chunks[c] is piece
// `piece[c]` of record `record[c]`; a record's pieces are consecutive and in order.
struct chunked_text {
  std::vector<std::vector<int32>> chunks;
  std::vector<std::size_t> record;
  std::vector<std::size_t> piece;
};

// The records listed in `which` (e.g. text_split::train), in that order. Throws std::invalid_argument
// if max_length is 0 and std::out_of_range for an index past the records.
chunked_text chunk_records(std::span<const text_record> records, std::span<const std::size_t> which, std::size_t max_length);

// All the records, in order.
chunked_text chunk_records(std::span<const text_record> records, std::size_t max_length);

// The words of a text, for judging a language model's samples: maximal runs of ASCII letters, an
// apostrophe between two letters joining them ("don't"), lower-cased.
std::vector<std::string> words_of(std::string_view text);

// The words seen at least `min_count` times in some records (words_of's words): a typo or a long fragment
// is rarely seen twice. known_letters(text) says how much of a text is words it holds, counted in letters
// (a stray "e" or "st", seen often enough as initials and abbreviations, weighs little): how much of a
// language model's sample is words of the language, as one number.
class vocabulary {
 public:
  vocabulary() = default;
  // Throws std::out_of_range for an index in `which` past the records.
  vocabulary(std::span<const text_record> records, std::span<const std::size_t> which, std::size_t min_count = 2);

  bool contains(std::string_view word) const;
  std::size_t size() const { return words_.size(); }

  struct count {
    std::size_t known = 0, total = 0;  // letters of words in the vocabulary, letters of all words
    double share() const { return total == 0 ? 0.0 : static_cast<double>(known) / static_cast<double>(total); }
  };
  // The letters of a text's words and those of its words in the vocabulary, leaving out an unfinished last
  // word (the text ends inside it: a sample cut at its length).
  count known_letters(std::string_view text) const;

 private:
  std::vector<std::string> words_;  // sorted, searched by bisection
};

}  // namespace tessel::data

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/data/text-inl.hpp"
#endif
