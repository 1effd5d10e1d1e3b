#pragma once
// What the profiler recorded, as a Chrome trace (the JSON object format of the Trace Event Format),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open:
//
//   {"traceEvents":[
//     {"name":"process_name","ph":"M","pid":P,"tid":0,"args":{"name":"tessel"}},
//     {"name":"thread_name","ph":"M","pid":P,"tid":1,"args":{"name":"main"}},          one per thread
//     {"name":"step","cat":"step","ph":"X","ts":12.5,"dur":830.25,"pid":P,"tid":1,"args":{"step":0,"items":128}},
//     {"name":"warmup_end","cat":"mark","ph":"i","ts":901,"s":"g","pid":P,"tid":1},
//     {"name":"step_time_ms","cat":"counter","ph":"C","ts":842.75,"pid":P,"tid":1,"args":{"value":0.83}},
//     ...],
//    "displayTimeUnit":"ms"}
//
// ts and dur are microseconds (with nanosecond decimals) since the profiler's origin; P is the process
// id; tids are small integers in the order threads first recorded. Names that are not valid UTF-8 have
// their bad bytes replaced by '?'.

#include <filesystem>
#include <string>

namespace tessel::profile {

// The trace of everything recorded since the last clear(), as one JSON text; threads that recorded
// nothing are left out. Scopes still open appear with duration 0. Safe while other threads record.
std::string chrome_trace_json();

// Writes chrome_trace_json() to `path` atomically (io::write_file_atomically): a crash leaves the old
// file or the whole new one. Throws std::system_error naming the file if it cannot be written.
void write_chrome_trace(const std::filesystem::path& path);

}  // namespace tessel::profile

#ifdef TESSEL_IMPLEMENTATION
#include "tessel/io/chrome_trace-inl.hpp"
#endif
