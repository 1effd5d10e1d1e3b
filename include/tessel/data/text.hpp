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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/core/dtype.hpp"
#include "tessel/io/atomic_file.hpp"
#include "tessel/io/json.hpp"

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

namespace detail {
inline std::string hex_byte(unsigned char c) {
  constexpr char digits[] = "0123456789ABCDEF";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

// Appends the records of one file's bytes to `out`.
inline void parse_fortunes(std::string_view bytes, std::uint32_t file_index, const std::string& prefix, const text_options& options,
                           text_corpus& out) {
  const auto fail = [&](std::size_t at, std::uint32_t line, const std::string& what) {
    throw format_error(prefix + "byte " + std::to_string(at) + " (line " + std::to_string(line) + "): " + what);
  };
  if (bytes.empty()) throw format_error(prefix + "the file is empty (a fortune file holds at least one record)");
  std::uint32_t line = 1;
  for (std::size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0) fail(i, line, "a NUL byte (not a text file); fix: remove the file from the directory, or the byte from it");
    if (c == '\n') ++line;
    const std::size_t n = options.validate_utf8 ? io::json::utf8_sequence_length(bytes, i) : 1;
    if (n == 0)
      fail(i, line, "invalid UTF-8 (byte " + hex_byte(c) +
                        "); fix: convert the file to UTF-8 (iconv -f latin1 -t utf-8), or pass {.validate_utf8 = false}");
    i += n;
  }

  std::string current;
  std::uint32_t first_line = 1;
  line = 1;
  const auto finish = [&](std::uint32_t next_line) {
    if (current.empty()) ++out.empty_records;
    else out.records.push_back(text_record{std::move(current), file_index, first_line});
    current.clear();
    first_line = next_line;
  };
  bool pending = false;  // bytes (or an empty line) since the last separator
  for (std::size_t start = 0; start < bytes.size(); ++line) {
    std::size_t end = bytes.find('\n', start);
    const bool last = end == std::string_view::npos;
    if (last) end = bytes.size();
    std::string_view text = bytes.substr(start, end - start);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    start = end + 1;
    if (text == "%") {
      finish(line + 1);
      pending = false;
      continue;
    }
    if (pending) current += '\n';
    current += text;
    pending = true;
    if (last) break;
  }
  if (pending) finish(line);
}
}  // namespace detail

// The records of one fortune file, appended to `corpus` (throws format_error as the top of this file says).
inline void read_fortune_file(const std::filesystem::path& path, text_corpus& corpus, const text_options& options = {}) {
  constexpr std::string_view who = "tessel::data::read_fortunes";
  io::input_file in(path, who);
  if (in.size() > options.max_file_bytes)
    in.fail(std::to_string(in.size()) + " bytes, more than max_file_bytes (" + std::to_string(options.max_file_bytes) +
            "); fix: raise text_options::max_file_bytes");
  std::string bytes(static_cast<std::size_t>(in.size()), '\0');
  in.read_exact(std::as_writable_bytes(std::span(bytes.data(), bytes.size())), "text");
  const auto index = static_cast<std::uint32_t>(corpus.files.size());
  corpus.files.push_back(path);
  detail::parse_fortunes(bytes, index, in.prefix(), options, corpus);
}

// Whether read_fortunes reads this directory entry: a regular file (not a symbolic link, such as
// Debian's `*.u8` links to the same files), not a strfile index (`*.dat`), not hidden.
inline bool is_fortune_file(const std::filesystem::directory_entry& e) {
  const std::string name = e.path().filename().string();
  return !e.is_symlink() && e.is_regular_file() && e.path().extension() != ".dat" && !name.empty() && name[0] != '.';
}

// A fortune file, or every fortune file of a directory (not its subdirectories) in name order.
// Throws format_error for a path that does not exist, a directory without fortune files, or a bad file.
inline text_corpus read_fortunes(const std::filesystem::path& path, const text_options& options = {}) {
  text_corpus corpus;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    read_fortune_file(path, corpus, options);
    return corpus;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(path))
    if (is_fortune_file(e)) files.push_back(e.path());
  if (files.empty())
    throw format_error("tessel::data::read_fortunes: " + io::quoted(path) +
                       " holds no fortune files (regular files other than *.dat); install the packages fortunes and "
                       "fortunes-min, or set TESSEL_FORTUNES_DIR");
  std::sort(files.begin(), files.end());
  for (const auto& f : files) read_fortune_file(f, corpus, options);
  return corpus;
}

// Where Debian's fortunes packages put their files.
inline constexpr std::string_view fortunes_default_dir = "/usr/share/games/fortunes";

// $TESSEL_FORTUNES_DIR if set and not empty, else fortunes_default_dir.
inline std::filesystem::path fortunes_dir() {
  if (const char* env = std::getenv("TESSEL_FORTUNES_DIR"); env && *env) return std::filesystem::path(env);
  return std::filesystem::path(fortunes_default_dir);
}

// ---- tokens ------------------------------------------------------------------------------------

// Byte-level tokens: each byte is its own token, 0..255 (so every text round-trips, UTF-8 or not).
inline constexpr std::size_t byte_vocabulary = 256;

inline std::vector<int32> byte_tokens(std::string_view text) {
  std::vector<int32> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<int32>(static_cast<unsigned char>(text[i]));
  return out;
}

// The bytes of tokens 0..255 (throws std::out_of_range for any other token).
inline std::string text_of_tokens(std::span<const int32> tokens) {
  std::string out(tokens.size(), '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 255)
      throw std::out_of_range("tessel::data::text_of_tokens: token " + std::to_string(tokens[i]) + " at index " +
                              std::to_string(i) + " is not a byte (0 to 255)");
    out[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return out;
}

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
inline bool in_validation(std::string_view text, const split_options& options) {
  const std::uint64_t h = detail::splitmix64(options.seed ^ detail::fnv1a64(text));
  return static_cast<double>(h >> 11) * 0x1.0p-53 < options.validation;
}

// Throws std::invalid_argument if options.validation is not in [0, 1].
inline text_split split_records(std::span<const text_record> records, const split_options& options = {}) {
  if (!(options.validation >= 0 && options.validation <= 1))
    throw std::invalid_argument("tessel::data::split_records: validation fraction " + std::to_string(options.validation) +
                                " is not in [0, 1]");
  text_split s;
  for (std::size_t i = 0; i < records.size(); ++i) (in_validation(records[i].text, options) ? s.validation : s.train).push_back(i);
  return s;
}

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
inline chunked_text chunk_records(std::span<const text_record> records, std::span<const std::size_t> which, std::size_t max_length) {
  if (max_length == 0) throw std::invalid_argument("tessel::data::chunk_records: max_length must be at least 1");
  chunked_text out;
  for (const std::size_t r : which) {
    if (r >= records.size())
      throw std::out_of_range("tessel::data::chunk_records: record " + std::to_string(r) + " of " + std::to_string(records.size()));
    const std::string_view text = records[r].text;
    for (std::size_t at = 0, k = 0; at < text.size(); at += max_length, ++k) {
      out.chunks.push_back(byte_tokens(text.substr(at, max_length)));
      out.record.push_back(r);
      out.piece.push_back(k);
    }
  }
  return out;
}

// All the records, in order.
inline chunked_text chunk_records(std::span<const text_record> records, std::size_t max_length) {
  std::vector<std::size_t> all(records.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return chunk_records(records, all, max_length);
}

// The words of a text, for judging a language model's samples: maximal runs of ASCII letters, an
// apostrophe between two letters joining them ("don't"), lower-cased.
namespace detail {
inline bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace detail

inline std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ' ';
    if (detail::is_ascii_letter(c)) {
      word += static_cast<char>(c | 0x20);
    } else if (c == '\'' && !word.empty() && i + 1 < text.size() && detail::is_ascii_letter(text[i + 1])) {
      word += c;
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  return out;
}

// The words seen at least `min_count` times in some records (words_of's words): a typo or a long fragment
// is rarely seen twice. known_letters(text) says how much of a text is words it holds, counted in letters
// (a stray "e" or "st", seen often enough as initials and abbreviations, weighs little): how much of a
// language model's sample is words of the language, as one number.
class vocabulary {
 public:
  vocabulary() = default;
  vocabulary(std::span<const text_record> records, std::span<const std::size_t> which, std::size_t min_count = 2) {
    std::map<std::string, std::size_t, std::less<>> counts;
    for (const std::size_t r : which) {
      if (r >= records.size())
        throw std::out_of_range("tessel::data::vocabulary: record " + std::to_string(r) + " of " + std::to_string(records.size()));
      for (std::string& w : words_of(records[r].text)) ++counts[std::move(w)];
    }
    for (auto& [w, n] : counts)
      if (n >= min_count) words_.push_back(w);  // in order: a sorted vector, searched by bisection
  }

  bool contains(std::string_view word) const { return std::binary_search(words_.begin(), words_.end(), word); }
  std::size_t size() const { return words_.size(); }

  struct count {
    std::size_t known = 0, total = 0;  // letters of words in the vocabulary, letters of all words
    double share() const { return total == 0 ? 0.0 : static_cast<double>(known) / static_cast<double>(total); }
  };
  // The letters of a text's words and those of its words in the vocabulary, leaving out an unfinished last
  // word (the text ends inside it: a sample cut at its length).
  count known_letters(std::string_view text) const {
    std::vector<std::string> ws = words_of(text);
    if (!ws.empty() && detail::is_ascii_letter(text.back())) ws.pop_back();
    count c;
    for (const std::string& w : ws) {
      const auto letters = static_cast<std::size_t>(std::count_if(w.begin(), w.end(), detail::is_ascii_letter));
      c.total += letters;
      c.known += contains(w) ? letters : 0;
    }
    return c;
  }

 private:
  std::vector<std::string> words_;
};

}  // namespace tessel::data
