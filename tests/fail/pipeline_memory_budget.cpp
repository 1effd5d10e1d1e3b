// expect: tessel::pipeline: schedule gpipe over 4 stages and 8 microbatches keeps up to 8 activations of f32[4,16] on one device (2048 bytes), over the budget of 1024 bytes
// expect: fix: use 1f1b (at most 4 in flight), fewer or smaller microbatches, or a larger budget
#include <tessel/tessel.hpp>
#include <tessel/pipeline.hpp>
#include "pipeline_parts.hpp"
using namespace tessel;
int main() {
  const layers<> p{};
  const tensor<float, shape<32, 16>> x{}, t{};
  pipeline<mesh<axis<"stage", 4>>, "stage", schedules::gpipe, 8, 1024>(stage, loss)(p, x, t);
}
