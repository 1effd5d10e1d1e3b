#pragma once
// The Trace Event Format's rules (the JSON Object Format, as Perfetto and chrome://tracing read it),
// checked on a parsed trace: used by profiler_test and by chrome_trace_check (which the Fashion-MNIST
// example's test runs on the trace the example writes).
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/io/json.hpp"

namespace chrome_trace {

namespace json = tessel::io::json;

// What is wrong with one event, or "" if nothing: every event has a string name, a phase from the
// format's set, integer pid and tid; X has numeric ts and dur >= 0; i has ts and a scope among g/p/t;
// C has ts and an object of numeric args; M is a known metadata name with its arg.
inline std::string event_problem(const json::value& e) {
  const auto at = [&](const std::string& why) { return why + " (event at byte " + std::to_string(e.offset) + ")"; };
  if (e.type != json::kind::object) return at("an event is not an object");
  const json::value* name = e.find("name");
  const json::value* ph = e.find("ph");
  if (!name || name->type != json::kind::string) return at("no string name");
  if (!ph || ph->type != json::kind::string) return at("no string ph");
  static const std::set<std::string> phases = {"B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M"};
  if (!phases.contains(ph->text)) return at("ph '" + ph->text + "' is not a phase");
  for (const char* key : {"pid", "tid"}) {
    const json::value* v = e.find(key);
    if (!v || !v->integer) return at(std::string(key) + " is not a non-negative integer");
  }
  const auto number = [&](const char* key) {
    const json::value* v = e.find(key);
    return v && v->type == json::kind::number;
  };
  const json::value* args = e.find("args");
  if (args && args->type != json::kind::object) return at("args is not an object");
  if (ph->text == "X") {
    if (!number("ts") || !number("dur")) return at("X without numeric ts and dur");
    if (e.find("dur")->text.starts_with("-")) return at("negative dur");
  } else if (ph->text == "i") {
    if (!number("ts")) return at("i without numeric ts");
    const json::value* s = e.find("s");
    if (s && (s->type != json::kind::string || (s->text != "g" && s->text != "p" && s->text != "t"))) return at("bad i scope");
  } else if (ph->text == "C") {
    if (!number("ts")) return at("C without numeric ts");
    if (!args || args->members.empty()) return at("C without args");
    for (const json::member& m : args->members)
      if (m.val.type != json::kind::number) return at("C arg " + m.key + " is not a number");
  } else if (ph->text == "M") {
    if (!args) return at("M without args");
    if (name->text == "process_name" || name->text == "thread_name") {
      const json::value* n = args->find("name");
      if (!n || n->type != json::kind::string) return at("M " + name->text + " without a string args.name");
    } else if (name->text == "process_labels") {
      const json::value* n = args->find("labels");
      if (!n || n->type != json::kind::string) return at("M process_labels without a string args.labels");
    } else if (name->text == "process_sort_index" || name->text == "thread_sort_index") {
      const json::value* n = args->find("sort_index");
      if (!n || n->type != json::kind::number) return at("M " + name->text + " without a numeric args.sort_index");
    } else {
      return at("unknown metadata event " + name->text);
    }
  }
  return "";
}

// Parses `text` (throws tessel::io::format_error if it is not JSON) and lists what breaks the format:
// the root must be an object with a "traceEvents" array and, if present, "displayTimeUnit" "ms" or "ns".
// `events` receives the events.
inline std::vector<std::string> problems(std::string_view text, std::vector<json::value>* events = nullptr) {
  std::vector<std::string> out;
  json::value root = json::parse(text, "chrome trace");
  if (root.type != json::kind::object) return {"the root is not an object"};
  const json::value* list = root.find("traceEvents");
  const json::value* unit = root.find("displayTimeUnit");
  if (!list || list->type != json::kind::array) return {"no traceEvents array"};
  if (unit && (unit->type != json::kind::string || (unit->text != "ms" && unit->text != "ns")))
    out.push_back("displayTimeUnit is not \"ms\" or \"ns\"");
  for (const json::value& e : list->items)
    if (std::string p = event_problem(e); !p.empty()) out.push_back(std::move(p));
  if (events) *events = list->items;
  return out;
}

}  // namespace chrome_trace
