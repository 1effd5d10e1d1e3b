// expect: tessel::jit (with shardings): in_shardings[0] is a tree of specs (specs<...>), which does not match args[0]: a spec tree gives a std::tuple one entry per element and a struct one per member, in declaration order
// expect: fix: give one entry per element, or one PartitionSpec for the whole argument
#include <tessel/tessel.hpp>
using namespace tessel;
template <template <class, class> class T = tensor>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (T<float, shape<8, 4>>, w), (T<float, shape<3>>, b));
};
int main() {
  // Three specs for a struct of two members.
  auto f = jit<mesh<axis<"data", 2>>>([](auto l) { return l.w * 2.0f; }, in_shardings<specs<P<"data">, P<>, P<>>>,
                                      out_shardings<P<"data">>);
  return static_cast<int>(f(layer<>{})[0]);
}
