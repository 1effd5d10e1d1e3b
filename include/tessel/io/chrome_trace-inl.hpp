// Definitions of tessel/io/chrome_trace.hpp's functions: compiled once, in the tessel library
// (src/tessel.cpp), or in the one translation unit of a program that defines TESSEL_IMPLEMENTATION before
// including tessel/tessel.hpp.
#pragma once

#include "tessel/io/chrome_trace.hpp"

#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

#include "tessel/io/atomic_file.hpp"
#include "tessel/io/json.hpp"
#include "tessel/kernels/gemm.hpp"
#include "tessel/profile/profiler.hpp"

namespace tessel::profile {

namespace detail {

void append_string(std::string& out, std::string_view s) {
  if (io::json::valid_utf8(s)) return io::json::write_string(out, s);
  std::string clean;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = io::json::utf8_sequence_length(s, i);
    if (n == 0) {
      clean += '?';
      ++i;
    } else {
      clean.append(s.substr(i, n));
      i += n;
    }
  }
  io::json::write_string(out, clean);
}

// Exactly: ns / 1000 with three decimals, trailing zeros trimmed.
void append_micros(std::string& out, std::int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  out += std::to_string(ns / 1000);
  if (const std::int64_t frac = ns % 1000; frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (digits.back() == '0') digits.pop_back();
    out += '.';
    out += digits;
  }
}

void append_number(std::string& out, double v) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);  // shortest round trip; finite only
  out.append(buffer, result.ptr);
}

void append_event(std::string& out, const event& e, std::int64_t pid, std::uint64_t tid) {
  out += "{\"name\":";
  append_string(out, e.name);
  out += ",\"cat\":";
  append_string(out, e.category);
  out += ",\"ph\":\"";
  out += e.phase;
  out += "\",\"ts\":";
  append_micros(out, e.ts_ns);
  if (e.phase == 'X') {
    out += ",\"dur\":";
    append_micros(out, e.dur_ns < 0 ? 0 : e.dur_ns);
  }
  if (e.phase == 'i') {
    out += ",\"s\":\"";
    out += e.instant_scope;
    out += '"';
  }
  out += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
  if (!e.args.empty()) {
    out += ",\"args\":{";
    for (std::size_t i = 0; i < e.args.size(); ++i) {
      if (i) out += ',';
      append_string(out, e.args[i].first);
      out += ':';
      append_number(out, e.args[i].second);
    }
    out += '}';
  }
  out += '}';
}

}  // namespace detail

std::string chrome_trace_json() {
  detail::state& s = detail::global();
  const auto pid = static_cast<std::int64_t>(::getpid());
  std::string out = "{\"traceEvents\":[";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":0,\"args\":{\"name\":\"tessel\"}}";
  // The process's labels name the GEMM's instruction set and the path bf16 x bf16 products take here
  // (AMX tiles, vdpbf16ps or widened to f32), which a trace's timings depend on.
  out += ",{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"args\":{\"labels\":";
  detail::append_string(out, std::string("GEMM: Highway ") + kernels::hwy_gemm_target() + ", bf16 x bf16 products: " +
                                 kernels::hwy_gemm_bf16_path());
  out += "}}";
  std::lock_guard lock(s.buffers_mutex);
  for (const auto& b : s.buffers) {
    std::lock_guard buffer_lock(b->mutex);
    if (b->events.empty()) continue;
    const std::string tid = std::to_string(b->tid);
    out += ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + tid + ",\"args\":{\"name\":";
    detail::append_string(out, b->name);
    out += "}},{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
    for (const detail::event& e : b->events) {
      out += ',';
      detail::append_event(out, e, pid, b->tid);
    }
  }
  out += "],\"displayTimeUnit\":\"ms\"}";
  return out;
}

void write_chrome_trace(const std::filesystem::path& path) {
  const std::string text = chrome_trace_json();
  io::write_file_atomically(path, [&](io::output_file& out) { out.write(text); });
}

}  // namespace tessel::profile
