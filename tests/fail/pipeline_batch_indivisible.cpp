// expect: tessel::pipeline: the batch of 30 rows (inputs of 30, targets of 30) must be the same for both and divide into 2 data replicas x 4 microbatches = 8
// expect: fix: choose a batch that is a multiple of 8, or fewer microbatches
#include <tessel/tessel.hpp>
#include <tessel/pipeline.hpp>
#include "pipeline_parts.hpp"
using namespace tessel;
int main() {
  const layers<> p{};
  const tensor<float, shape<30, 16>> x{}, t{};
  pipeline<mesh<axis<"data", 2>, axis<"stage", 2>>, "stage", schedules::gpipe, 4>(stage, loss)(p, x, t);
}
