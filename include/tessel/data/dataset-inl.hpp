// Definitions of tessel/data/dataset.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include "tessel/data/dataset.hpp"
#include "tessel/io/json.hpp"

namespace tessel::data {

std::string stream_position::to_json() const {
  std::string s = "{\"epoch\":" + std::to_string(epoch) + ",\"index\":" + std::to_string(index) + ",\"pending\":[";
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(pending[i]);  // appended, not "," + string: g++ 12 warns falsely (-Wrestrict, bug 105329)
  }
  return s + "]}";
}

stream_position stream_position::from_json(std::string_view text) {
  constexpr std::string_view who = "tessel::data::stream_position::from_json";
  const io::json::value v = io::json::parse(text, who, {.max_depth = 2});
  const auto fail = [&](const std::string& what) -> void { throw io::format_error(std::string(who) + ": " + what); };
  if (v.type != io::json::kind::object) fail("expected an object, found " + std::string(io::json::kind_name(v.type)));
  for (const io::json::member& m : v.members)
    if (m.key != "epoch" && m.key != "index" && m.key != "pending") fail("unknown member '" + m.key + "'");
  const auto integer = [&](const io::json::value* x, std::string_view name) {
    if (!x || !x->integer) fail("'" + std::string(name) + "' must be a non-negative integer");
    return *x->integer;
  };
  stream_position p;
  p.epoch = integer(v.find("epoch"), "epoch");
  p.index = integer(v.find("index"), "index");
  const io::json::value* pending = v.find("pending");
  if (!pending || pending->type != io::json::kind::array) fail("'pending' must be an array");
  for (const io::json::value& x : pending->items) {
    p.pending.push_back(integer(&x, "pending[]"));
    if (p.pending.back() >= p.index || (p.pending.size() > 1 && p.pending.back() <= p.pending[p.pending.size() - 2]))
      fail("'pending' must be sorted, unique and below 'index'");
  }
  return p;
}

shard_adaptor shard(std::size_t process_index, std::size_t process_count, shard_remainder rem) {
  if (process_count == 0 || process_index >= process_count)
    throw std::invalid_argument("tessel::data::shard: process index " + std::to_string(process_index) +
                                " is not below the process count " + std::to_string(process_count));
  return {process_index, process_count, rem};
}

std::vector<std::uint32_t> permutation_of(random::key k, std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::length_error("tessel::data::permutation_of: " + std::to_string(n) +
                            " elements; at most 2147483647 can be permuted");
  std::vector<std::pair<std::uint32_t, std::uint32_t>> items(n);
  for (std::size_t i = 0; i < n; ++i) items[i].second = static_cast<std::uint32_t>(i);
  for (int round = 0; round < detail::shuffle_rounds(n); ++round) {
    const auto [next, sub] = random::split(k);
    k = next;
    for (std::size_t i = 0; i < n; ++i) items[i].first = random::bits32_at(sub, i);
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = items[i].second;
  return out;
}

}  // namespace tessel::data
