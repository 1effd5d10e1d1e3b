// expect: tessel::pipeline: 6 layers do not divide into 4 stages
// expect: fix: choose a number of stages that divides 6, or pad the model to a multiple of 4 layers
#include <tessel/tessel.hpp>
#include <tessel/pipeline.hpp>
using namespace tessel;
template <template <class, class> class T = tensor>
struct layers {
  BOOST_HANA_DEFINE_STRUCT(layers, (T<float, shape<6, 16, 16>>, w));
};
constexpr auto stage = [](const auto& p, auto x) { return tanh(matmul(x, reshape<shape<16, 16>>(slice_in_dim<0, 0, 1>(p.w)))); };
constexpr auto loss = [](auto y, auto t) { return mean((y - t) * (y - t)); };
int main() {
  const layers<> p{};
  const tensor<float, shape<32, 16>> x{}, t{};
  pipeline<mesh<axis<"stage", 4>>, "stage", schedules::gpipe, 4>(stage, loss)(p, x, t);
}
