// expect: tessel::pipeline: schedule 1f1b over 4 stages needs at least 4 microbatches, and has 2
// expect: fix: use at least 4 microbatches, or the gpipe schedule
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
  const tensor<float, shape<32, 16>> x{}, t{};
  pipeline<mesh<axis<"stage", 4>>, "stage", schedules::one_f_one_b, 2>(stage, loss)(p, x, t);
}
