// The strict JSON reader and string writer behind safetensors headers.
#include <gtest/gtest.h>

#include <string>

#include "tessel/io/json.hpp"
#include "test_files.hpp"

namespace {

namespace json = tessel::io::json;
using checkpoint_test::throws_with;
using tessel::io::format_error;

json::value parse(std::string_view text, json::parse_options options = {}) { return json::parse(text, "ctx", options); }

TEST(Json, ParsesValues) {
  const auto v = parse(R"( {"a": [1, 2.5, -3, 1e3, true, false, null, "x"], "b": {}, "c": [], "d": 18446744073709551615} )");
  ASSERT_EQ(v.type, json::kind::object);
  ASSERT_EQ(v.members.size(), 4u);
  const auto& a = v.find("a")->items;
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a[0].integer, 1u);
  EXPECT_FALSE(a[1].integer);
  EXPECT_EQ(a[1].text, "2.5");
  EXPECT_FALSE(a[2].integer);  // negative: a number, not an unsigned integer
  EXPECT_FALSE(a[3].integer);
  EXPECT_TRUE(a[4].boolean);
  EXPECT_EQ(a[5].type, json::kind::boolean);
  EXPECT_EQ(a[6].type, json::kind::null);
  EXPECT_EQ(a[7].text, "x");
  EXPECT_EQ(v.find("b")->type, json::kind::object);
  EXPECT_EQ(v.find("c")->type, json::kind::array);
  EXPECT_EQ(v.find("d")->integer, 18446744073709551615u);
  EXPECT_EQ(v.find("e"), nullptr);
}

TEST(Json, DecodesEscapesAndUtf8) {
  EXPECT_EQ(parse(R"("\"\\\/\b\f\n\r\t")").text, "\"\\/\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u00e9\u20AC")").text, "\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(parse(R"("\ud83d\ude00")").text, "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse("\"\xF0\x9F\x98\x80 \xC3\xA9\"").text, "\xF0\x9F\x98\x80 \xC3\xA9");
}

TEST(Json, RejectsWhatRfc8259Forbids) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "expected a value"},
      {"{", "expected a string key"},
      {R"({"a" 1})", "expected ':'"},
      {R"({"a": 1,})", "expected a string key"},
      {"[1,]", "expected a value"},
      {"[1 2]", "expected ',' or ']'"},
      {"{} x", "unexpected text after"},
      {"01", "leading zero"},
      {"1.", "digits after '.'"},
      {"1e", "digits in the exponent"},
      {"+1", "expected a value"},
      {"-", "expected a value"},
      {"tru", "invalid literal"},
      {"\"abc", "unterminated string"},
      {"\"a\tb\"", "raw control character"},
      {R"("\x")", "invalid escape"},
      {R"("\u12")", "4 hex digits"},
      {R"("\ud800")", "high surrogate without a low surrogate"},
      {R"("\ud800\u0041")", "high surrogate without a low surrogate"},
      {R"("\udc00")", "unpaired low surrogate"},
      {"\"\xC3\"", "invalid UTF-8"},
      {"\"\xC0\xAF\"", "invalid UTF-8"},          // overlong '/'
      {"\"\xED\xA0\x80\"", "invalid UTF-8"},      // an encoded surrogate
      {"\"\xF4\x90\x80\x80\"", "invalid UTF-8"},  // above U+10FFFF
      {"\"\xFF\"", "invalid UTF-8"},
      {R"({"a": 1, "b": 2, "a": 3})", "duplicate key \"a\""},
      {"18446744073709551616", "out of range"},
      {"-99999999999999999999", "out of range"},
  };
  for (const auto& [text, what] : bad) {
    const std::string_view t = text;  // clang 16 cannot capture a structured binding
    EXPECT_TRUE(throws_with<format_error>([&] { (void)parse(t); }, {"ctx: JSON at byte", what})) << text;
  }
}

TEST(Json, LimitsDepthAndArrayLength) {
  EXPECT_NO_THROW((void)parse(R"({"a": {"b": [1]}})", {.max_depth = 3}));
  EXPECT_TRUE(throws_with<format_error>([&] { (void)parse(R"({"a": {"b": [[1]]}})", {.max_depth = 3}); },
                                        {"nesting deeper than 3 levels"}));
  // Deep nesting must not exhaust the stack with the default limit either.
  const std::string deep(100000, '[');
  EXPECT_TRUE(throws_with<format_error>([&] { (void)parse(deep); }, {"nesting deeper than 16"}));
  EXPECT_TRUE(throws_with<format_error>([&] { (void)parse("[1,2,3]", {.max_array_items = 2}); },
                                        {"more than 2 elements"}));
}

TEST(Json, WritesStringsThatReadBack) {
  const std::string texts[] = {"", "plain", "quote\" backslash\\ slash/", std::string("nul\0ctl\x01\x1f", 9),
                               "\xE2\x82\xAC \xF0\x9F\x98\x80", "\b\f\n\r\t"};
  for (const std::string& t : texts) {
    std::string out;
    json::write_string(out, t);
    EXPECT_EQ(parse(out).text, t) << out;
  }
  std::string out;
  json::write_string(out, "a\x01");
  EXPECT_EQ(out, "\"a\\u0001\"");
  EXPECT_THROW(json::write_string(out, "\xC3"), std::invalid_argument);
  EXPECT_TRUE(json::valid_utf8("\xE2\x82\xAC"));
  EXPECT_FALSE(json::valid_utf8("\xE2\x82"));
}

}  // namespace
