// The oracle binary of the primitives: writes every case's inputs and tessel's results into the folder it
// is given, for judge.py to compare with JAX's, and fails when a primitive of tessel::all_primitives is in
// no checked program (the value's, the vjp's, the jvp's or a vmap's) and not exempt below with its reason.
#include <cstdio>
#include <string>
#include <string_view>

#include "oracle.hpp"
#include "tessel/lax.hpp"

namespace tessel::oracle {
void unary_cases(suite&);
void binary_cases(suite&);
void integer_cases(suite&);
void layout_cases(suite&);
void contraction_cases(suite&);
void control_cases(suite&);
}  // namespace tessel::oracle

namespace {
struct exempt {
  std::string_view name;
  const char* why;
};
// Every primitive here is judged elsewhere, or is no operation of its own.
constexpr exempt exempt_primitives[] = {
    {"psum", "collective: judged by oracle_shard"},
    {"pmax", "collective: judged by oracle_shard"},
    {"pmin", "collective: judged by oracle_shard"},
    {"pvary", "collective: judged by oracle_shard"},
    {"all_gather", "collective: judged by oracle_shard"},
    {"psum_scatter", "collective: judged by oracle_shard"},
    {"ppermute", "collective: judged by oracle_shard"},
    {"all_to_all", "collective: judged by oracle_shard"},
    {"axis_index", "collective: judged by oracle_shard"},
};
bool is_exempt(std::string_view name) {
  for (const exempt& e : exempt_primitives)
    if (e.name == name) return true;
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (writes DIR/manifest.jsonl and one folder per case)\n", argv[0]);
    return 2;
  }
  tessel::oracle::suite s(argv[1]);
  tessel::oracle::unary_cases(s);
  tessel::oracle::binary_cases(s);
  tessel::oracle::integer_cases(s);
  tessel::oracle::layout_cases(s);
  tessel::oracle::contraction_cases(s);
  tessel::oracle::control_cases(s);
  s.manifest.close();
  int missing = 0;
  for (const tessel::ir::primitive* p : tessel::all_primitives) {
    const std::string name(p->name);
    if (s.primitives.contains(name) || is_exempt(name)) continue;
    std::fprintf(stderr, "oracle: primitive %s is in no oracle case: add one (tests/oracle/*_cases.cpp and cases.py)\n", name.c_str());
    ++missing;
  }
  std::printf("oracle: %d cases over %zu primitives (of %zu; %zu judged elsewhere) written to %s\n", s.cases, s.primitives.size(),
              tessel::all_primitives.size(), std::size(exempt_primitives), argv[1]);
  return missing == 0 ? 0 : 1;
}
