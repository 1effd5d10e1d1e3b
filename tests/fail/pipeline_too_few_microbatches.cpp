// expect: tessel::pipeline: schedule 1f1b over 4 stages needs at least 4 microbatches, and has 2
// expect: fix: use at least 4 microbatches, or the gpipe schedule
#include <tessel/tessel.hpp>
#include <tessel/pipeline.hpp>
#include "pipeline_parts.hpp"
using namespace tessel;
int main() {
  const layers<> p{};
  const tensor<float, shape<32, 16>> x{}, t{};
  pipeline<mesh<axis<"stage", 4>>, "stage", schedules::one_f_one_b, 2>(stage, loss)(p, x, t);
}
