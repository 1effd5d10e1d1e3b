// chrome_trace_check FILE [NAME...]: exits 0 if FILE is a Chrome trace that follows the Trace Event
// Format (chrome_trace_schema.hpp) and has an event of every NAME given (a name, or "cat:CATEGORY" for
// any event of that category); otherwise prints every problem and exits 1.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chrome_trace_schema.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: chrome_trace_check FILE [NAME | cat:CATEGORY]...\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "chrome_trace_check: cannot open %s\n", argv[1]);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> problems;
  std::vector<tessel::io::json::value> events;
  try {
    problems = chrome_trace::problems(text.str(), &events);
  } catch (const std::exception& e) {
    problems.push_back(e.what());
  }
  for (int i = 2; i < argc; ++i) {
    const std::string want = argv[i];
    bool found = false;
    for (const auto& e : events) {
      const auto* name = e.find("name");
      const auto* cat = e.find("cat");
      if (want.starts_with("cat:") ? cat && cat->text == want.substr(4) : name && name->text == want) found = true;
    }
    if (!found) problems.push_back("no event " + want);
  }
  for (const std::string& p : problems) std::fprintf(stderr, "chrome_trace_check: %s: %s\n", argv[1], p.c_str());
  if (problems.empty()) std::printf("chrome_trace_check: %s: %zu events, valid\n", argv[1], events.size());
  return problems.empty() ? 0 : 1;
}
