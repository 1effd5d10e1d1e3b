#pragma once
// How tessel reports a broken rule at compile time.
//
//   tessel::raise<tessel::fit<[] { return tessel::message_builder{} << "tessel::op: ..."; }>()>();
//
// fails a static_assert whose condition names `compile_error<"the message">`. Both compilers print the
// message, with every shape in it, on the first lines of the diagnostic:
//   g++:   In instantiation of 'consteval void tessel::raise() [with ... Message = tessel::fixed_string<..>{"tessel::..."}...]'
//   clang: static assertion failed due to requirement 'tessel::rule_broken<tessel::compile_error<fixed_string<33>{"tessel::..."}, ...>>'
// Messages name the operation, the shapes, the rule broken and the fix.
//
// One mistake gives one error. The static_assert sits in the body of raise, a consteval function, so a
// function that raises stays a valid constant expression (clang would reject every constant evaluation
// that calls a function whose body holds an invalid expression, as an object of a class whose
// static_assert failed is): the caller returns a placeholder (a tracer of id -1, which the node table
// propagates and jit does not plan: transform/trace.hpp), and nothing after it reports the mistake again.

#include <cstddef>
#include <type_traits>
#include <utility>

#include "tessel/core/fixed_string.hpp"

namespace tessel {

// g++ prints a class-type template argument whole; clang 16 cuts each one after about 34 characters,
// so on clang the message travels as 32-character parts, all shown on the "in instantiation of" line.
template <fixed_string... Parts>
struct compile_error {};

// Always false; the compilers print its argument, the message, when the assertion on it fails.
template <class Error>
inline constexpr bool rule_broken = false;

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

// `raise<"message">();` reports the message where it is written. consteval, so that the report happens
// at once (an immediate invocation is evaluated where it is written, not at the end of the translation
// unit, after what the broken rule causes further on).
// Inside a template, name a dependent type after the message (`raise<"...", T>();`): a message that
// depends on nothing would be reported by clang when the template is defined, not when it is used.
template <fixed_string Message, class... Context>
consteval void raise() {
  static_assert(rule_broken<typename decltype(detail::error_type<Message>())::type>,
                "tessel: a rule was broken; the message is the template argument of compile_error");
}

}  // namespace tessel
