// expect: tessel::pipeline: the stage function maps f32[8,16] to f32[8,12], but its output is the next stage's input and must be of the same type
// expect: fix: make every stage return its input's dtype and shape
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
  constexpr auto narrowing = [](const auto& q, auto h) { return slice_in_dim<1, 0, 12>(stage(q, h)); };
  pipeline<mesh<axis<"stage", 2>>, "stage", schedules::gpipe, 4>(narrowing, loss)(p, x, t);
}
