// The oracle binary of the primitives: writes every case's inputs and tessel's results into the folder it
// is given, for judge.py to compare with JAX's, and fails when a primitive of tessel::all_primitives is in
// no checked program (the value's, the vjp's, the jvp's or a vmap's). The collectives run only inside a
// shard_map: oracle_shard (shard_main.cpp) must cover those.
#include "oracle.hpp"

namespace tessel::oracle {
void unary_cases(suite&);
void binary_cases(suite&);
void integer_cases(suite&);
void layout_cases(suite&);
void contraction_cases(suite&);
void control_cases(suite&);
void composition_cases(suite&);
void remat_composition_cases(suite&);
}  // namespace tessel::oracle

int main(int argc, char** argv) {
  return tessel::oracle::run_suite(argc, argv, [](const tessel::ir::primitive& p) { return !tessel::oracle::is_collective(p); },
                                   [](tessel::oracle::suite& s) {
                                     tessel::oracle::unary_cases(s);
                                     tessel::oracle::binary_cases(s);
                                     tessel::oracle::integer_cases(s);
                                     tessel::oracle::layout_cases(s);
                                     tessel::oracle::contraction_cases(s);
                                     tessel::oracle::control_cases(s);
                                     tessel::oracle::composition_cases(s);
                                     tessel::oracle::remat_composition_cases(s);
                                   });
}
