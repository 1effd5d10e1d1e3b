// expect: tessel::pipeline: 6 layers do not divide into 4 stages
// expect: fix: choose a number of stages that divides 6, or pad the model to a multiple of 4 layers
#include <tessel/tessel.hpp>
#include <tessel/pipeline.hpp>
#include "pipeline_parts.hpp"
using namespace tessel;
template <template <class, class> class T = tensor>
struct six_layers {
  BOOST_HANA_DEFINE_STRUCT(six_layers, (T<float, shape<6, 16, 16>>, w));
};
int main() {
  const six_layers<> p{};
  const tensor<float, shape<32, 16>> x{}, t{};
  pipeline<mesh<axis<"stage", 4>>, "stage", schedules::gpipe, 4>(stage, loss)(p, x, t);
}
