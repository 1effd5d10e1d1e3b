// expect: tessel::pipeline: the batch of 30 rows (inputs of 30, targets of 30) must be the same for both and divide into 2 data replicas x 4 microbatches = 8
// expect: fix: choose a batch that is a multiple of 8, or fewer microbatches
#include <tessel/tessel.hpp>
#include <tessel/pipeline.hpp>
using namespace tessel;
template <template <class, class> class T = tensor>
struct layers {
  BOOST_HANA_DEFINE_STRUCT(layers, (T<float, shape<8, 16, 16>>, w));
};
constexpr auto stage = [](const auto& p, auto x) { return tanh(matmul(x, reshape<shape<16, 16>>(slice_in_dim<0, 0, 1>(p.w)))); };
constexpr auto loss = [](auto y, auto t) { return mean((y - t) * (y - t)); };
int main() {
  const layers<> p{};
  const tensor<float, shape<30, 16>> x{}, t{};
  pipeline<mesh<axis<"data", 2>, axis<"stage", 2>>, "stage", schedules::gpipe, 4>(stage, loss)(p, x, t);
}
