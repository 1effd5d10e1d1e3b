#pragma once
// How tessel reports a broken rule at compile time.
//
//   tessel::raise<tessel::fit<[] { return tessel::message_builder{} << "tessel::op: ..."; }>()>();
//
// instantiates `compile_error<"the message">`, whose static_assert fails. Both compilers print the
// message, with every shape in it, on the first lines of the diagnostic:
//   g++:   In instantiation of 'struct tessel::compile_error<tessel::fixed_string<..>{"tessel::..."}>'
//   clang: in instantiation of template class 'tessel::compile_error<fixed_string<33>{"tessel::..."}, ...>'
// Messages name the operation, the shapes, the rule broken and the fix.

#include <cstddef>
#include <type_traits>
#include <utility>

#include "tessel/core/fixed_string.hpp"

namespace tessel {

// g++ prints a class-type template argument whole; clang 16 cuts each one after about 34 characters,
// so on clang the message travels as 32-character parts, all shown on the "in instantiation of" line.
template <fixed_string... Parts>
struct compile_error {
  // Always false, but dependent on the message, so it fires only when a rule is broken.
  static_assert(((sizeof(Parts.text) == 0) && ...), "tessel: a rule was broken; the message is the template argument above");
};

namespace detail {
inline constexpr std::size_t message_part_length = 32;

template <fixed_string Message, std::size_t Part>
consteval auto message_part() {
  constexpr std::size_t begin = Part * message_part_length;
  constexpr std::size_t end = Message.size() < begin + message_part_length ? Message.size() : begin + message_part_length;
  fixed_string<end - begin + 1> part{};
  for (std::size_t i = begin; i < end; ++i) part.text[i - begin] = Message.text[i];
  part.text[end - begin] = '\0';  // written explicitly: clang prints an array as a string only if its last stored element is 0
  return part;
}

template <fixed_string Message, class Parts>
struct parts_error;
template <fixed_string Message, std::size_t... Part>
struct parts_error<Message, std::index_sequence<Part...>> {
  using type = compile_error<message_part<Message, Part>()...>;
};

template <fixed_string Message>
consteval auto error_type() {
#if defined(__clang__)
  constexpr std::size_t parts = (Message.size() + message_part_length - 1) / message_part_length;
  return std::type_identity<typename parts_error<Message, std::make_index_sequence<parts>>::type>{};
#else
  return std::type_identity<compile_error<Message>>{};
#endif
}
}  // namespace detail

// `raise<"message">();` reports the message where it is written. A class, not a function, so that the
// report happens at once (function bodies may be instantiated only at the end of the translation
// unit, after errors that the broken rule causes further on).
// Inside a template, name a dependent type after the message (`raise<"...", T>();`): a message that
// depends on nothing would be reported by clang when the template is defined, not when it is used.
template <fixed_string Message, class... Context>
struct raise : decltype(detail::error_type<Message>())::type {
  constexpr raise() = default;
};

}  // namespace tessel
