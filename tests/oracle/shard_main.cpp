// The oracle binary of shard_map: every collective on meshes of one, two and three axes, and the
// transforms composed with shard_map inside the body and outside it, and jit with shardings (sharding_cases.cpp). It fails when a collective of
// tessel::all_primitives is in none of its programs.
#include "oracle.hpp"

namespace tessel::oracle {
void collective_cases(suite&);
void shard_transform_cases(suite&);
void sharding_cases(suite&);
}  // namespace tessel::oracle

int main(int argc, char** argv) {
  return tessel::oracle::run_suite(argc, argv, tessel::oracle::is_collective, [](tessel::oracle::suite& s) {
    tessel::oracle::collective_cases(s);
    tessel::oracle::shard_transform_cases(s);
    tessel::oracle::sharding_cases(s);
  });
}
