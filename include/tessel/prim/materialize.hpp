#pragma once
// materialize: the identity, as a kernel of its own. Its operand is stored to a buffer where it stands
// in the table (a layout kernel reads whole buffers, so the operand cannot fuse into a later consumer),
// then copied. Running sums use it to stay one buffer: without it, acc + g1 + g2 + ... fuses into one
// loop at the end, which keeps every g alive until then (transform/accumulate.hpp).
//
//   acc = materialize(acc + g)   // computed now, into its own buffer

#include <array>
#include <cstring>

#include "tessel/ir/tracer.hpp"
#include "tessel/prim/build.hpp"
#include "tessel/prim/family/identity.hpp"

namespace tessel {
namespace prim {

inline void run_materialize(const ir::node& n, const ir::node* const*, const void* const* in, void* out) {
  std::memcpy(out, in[0], n.shape.size() * ir::bytes_of(n.dtype));
}

inline constexpr ir::primitive materialize_p{.name = "materialize",
                                             .kind = ir::prim_kind::layout,
                                             .run = &run_materialize,
                                             .vjp = &identity::vjp,
                                             .jvp = &identity::jvp,
                                             .batch = &identity::batch,
                                             .flops_per_element = 0, .lower = &identity::lower};
}  // namespace prim

template <Traced X>
constexpr X materialize(X x) {
  return X{x.graph, ir::make_node(*x.graph, prim::materialize_p, x.graph->operator[](x.id).dtype,
                                      x.graph->operator[](x.id).shape, {x.id})};
}
}  // namespace tessel

#include "tessel/prim/all.hpp"  // every primitive: see prim/build.hpp
