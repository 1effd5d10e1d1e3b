// expect: tessel::vmap: result leaf 1 depends on a mapped argument
// expect: its out_axes entry is none
// The ys of a scan over a mapped xs are batched (vmap follows the batch through the construct), so they
// cannot be returned without an axis; the final carry (leaf 0) is shared, as its init and body are.
#include <tessel/ops.hpp>
#include <tessel/jit.hpp>
#include <tessel/transform/scan.hpp>
#include <tessel/transform/vmap.hpp>
int main() {
  tessel::tensor<float, tessel::shape<4, 2, 3>> xs;
  tessel::tensor<float, tessel::shape<3>> c;
  auto r = tessel::vmap([](auto c, auto xs) {
    return tessel::scan([](auto a, auto x) { return std::tuple{a * 2.0f, a + x}; }, c, xs);
  }, tessel::in_axes<tessel::none, 1>, tessel::out_axes<tessel::none, tessel::none>)(c, xs);
  return static_cast<int>(std::get<0>(r)[0]);
}
