#pragma once
// Compile-time strings: the carrier of tessel's error messages.
//
// C++20 cannot format a static_assert message, but a class-type template argument is printed by
// both g++ 12 and clang 16 in the first line of the diagnostic. So a message is built by a constexpr
// function (`message_builder`), cut to its exact length (`fit`), and passed as the template argument of
// `compile_error` (core/error.hpp): the reader sees the whole sentence, shapes included.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessel {

template <std::size_t N>
struct fixed_string {
  char text[N]{};

  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&literal)[N]) {  // NOLINT: implicit on purpose, "f32" -> fixed_string
    for (std::size_t i = 0; i < N; ++i) text[i] = literal[i];
  }
  static constexpr std::size_t capacity = N;
  constexpr std::size_t size() const {
    std::size_t n = 0;
    while (n < N && text[n] != '\0') ++n;
    return n;
  }
  constexpr std::string_view view() const { return {text, size()}; }
  constexpr const char* c_str() const { return text; }
};

template <std::size_t N>
fixed_string(const char (&)[N]) -> fixed_string<N>;

// A bounded string that constexpr code appends to. Messages longer than the capacity are cut with "...".
class message_builder {
 public:
  static constexpr std::size_t capacity = 480;

  constexpr message_builder& operator<<(std::string_view s) {
    for (char c : s) put(c);
    return *this;
  }
  constexpr message_builder& operator<<(const char* s) { return *this << std::string_view(s); }
  constexpr message_builder& operator<<(char c) {
    put(c);
    return *this;
  }
  template <std::size_t N>
  constexpr message_builder& operator<<(const fixed_string<N>& s) {
    return *this << s.view();
  }
  constexpr message_builder& operator<<(std::uint64_t v) { return number(v, false); }
  constexpr message_builder& operator<<(std::int64_t v) {
    return v < 0 ? number(static_cast<std::uint64_t>(-(v + 1)) + 1, true) : number(static_cast<std::uint64_t>(v), false);
  }
  constexpr message_builder& operator<<(unsigned v) { return *this << static_cast<std::uint64_t>(v); }
  constexpr message_builder& operator<<(int v) { return *this << static_cast<std::int64_t>(v); }
  constexpr message_builder& operator<<(unsigned long long v) { return *this << static_cast<std::uint64_t>(v); }
  constexpr message_builder& operator<<(long long v) { return *this << static_cast<std::int64_t>(v); }

  constexpr std::size_t size() const { return size_; }
  constexpr std::string_view view() const { return {text_.data(), size_}; }

 private:
  constexpr void put(char c) {
    if (size_ + 4 < capacity) {
      text_[size_++] = c;
    } else if (size_ + 4 == capacity) {
      text_[size_++] = '.';
      text_[size_++] = '.';
      text_[size_++] = '.';
    }
  }
  constexpr message_builder& number(std::uint64_t v, bool negative) {
    char digits[24]{};
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    if (negative) put('-');
    while (n > 0) put(digits[--n]);
    return *this;
  }

  std::array<char, capacity> text_{};
  std::size_t size_ = 0;
};

// Turns a constexpr callable returning a message_builder into a fixed_string of exactly its length
// (clang prints a fixed_string as text only when no padding NULs follow it).
template <auto Build>
consteval auto fit() {
  constexpr message_builder built = Build();
  fixed_string<built.size() + 1> out{};
  for (std::size_t i = 0; i < built.size(); ++i) out.text[i] = built.view()[i];
  out.text[built.size()] = '\0';  // see error.hpp: keeps clang printing it as a string
  return out;
}

}  // namespace tessel
