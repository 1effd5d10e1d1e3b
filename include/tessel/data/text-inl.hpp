// Definitions of tessel/data/text.hpp's functions: compiled once, in the tessel library (src/tessel.cpp),
// or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before including
// tessel/tessel.hpp.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>

#include "tessel/data/text.hpp"
#include "tessel/io/json.hpp"

namespace tessel::data {

namespace detail {

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string hex_byte(unsigned char c) {
  constexpr char digits[] = "0123456789ABCDEF";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

void parse_fortunes(std::string_view bytes, std::uint32_t file_index, const std::string& prefix, const text_options& options,
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

void read_fortune_file(const std::filesystem::path& path, text_corpus& corpus, const text_options& options) {
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

bool is_fortune_file(const std::filesystem::directory_entry& e) {
  const std::string name = e.path().filename().string();
  return !e.is_symlink() && e.is_regular_file() && e.path().extension() != ".dat" && !name.empty() && name[0] != '.';
}

text_corpus read_fortunes(const std::filesystem::path& path, const text_options& options) {
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

std::filesystem::path fortunes_dir() {
  if (const char* env = std::getenv("TESSEL_FORTUNES_DIR"); env && *env) return std::filesystem::path(env);
  return std::filesystem::path(fortunes_default_dir);
}

std::vector<int32> byte_tokens(std::string_view text) {
  std::vector<int32> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<int32>(static_cast<unsigned char>(text[i]));
  return out;
}

std::string text_of_tokens(std::span<const int32> tokens) {
  std::string out(tokens.size(), '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 255)
      throw std::out_of_range("tessel::data::text_of_tokens: token " + std::to_string(tokens[i]) + " at index " +
                              std::to_string(i) + " is not a byte (0 to 255)");
    out[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return out;
}

bool in_validation(std::string_view text, const split_options& options) {
  const std::uint64_t h = detail::splitmix64(options.seed ^ detail::fnv1a64(text));
  return static_cast<double>(h >> 11) * 0x1.0p-53 < options.validation;
}

text_split split_records(std::span<const text_record> records, const split_options& options) {
  if (!(options.validation >= 0 && options.validation <= 1))
    throw std::invalid_argument("tessel::data::split_records: validation fraction " + std::to_string(options.validation) +
                                " is not in [0, 1]");
  text_split s;
  for (std::size_t i = 0; i < records.size(); ++i) (in_validation(records[i].text, options) ? s.validation : s.train).push_back(i);
  return s;
}

chunked_text chunk_records(std::span<const text_record> records, std::span<const std::size_t> which, std::size_t max_length) {
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

chunked_text chunk_records(std::span<const text_record> records, std::size_t max_length) {
  std::vector<std::size_t> all(records.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return chunk_records(records, all, max_length);
}

std::vector<std::string> words_of(std::string_view text) {
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

vocabulary::vocabulary(std::span<const text_record> records, std::span<const std::size_t> which, std::size_t min_count) {
  std::map<std::string, std::size_t, std::less<>> counts;
  for (const std::size_t r : which) {
    if (r >= records.size())
      throw std::out_of_range("tessel::data::vocabulary: record " + std::to_string(r) + " of " + std::to_string(records.size()));
    for (std::string& w : words_of(records[r].text)) ++counts[std::move(w)];
  }
  for (auto& [w, n] : counts)
    if (n >= min_count) words_.push_back(w);  // in order: a sorted vector
}

bool vocabulary::contains(std::string_view word) const { return std::binary_search(words_.begin(), words_.end(), word); }

vocabulary::count vocabulary::known_letters(std::string_view text) const {
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

}  // namespace tessel::data
