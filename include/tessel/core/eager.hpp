#pragma once
// Eager evaluation: every op and library function also takes concrete tensors and runs at once, as
// NumPy, PyTorch and JAX outside a transform do:
//
//   tessel::tensor<float, tessel::shape<2, 3>> a{1, 2, 3, 4, 5, 6}, b{...};
//   auto c = tessel::exp(a + b);   // two calls, each a one-op program: f32[2,3]
//
// Beside its traced form, each function has an overload for concrete tensors that calls eagerly(f,
// args...), where f is a lambda calling the traced form: f is jitted for these argument types, so shapes
// and dtypes are checked at compile time with the messages jit gives, and each op is traced and planned
// once per argument types, at compile time. Eager calls do not fuse with one another (wrap a function in
// jit for that), and a concrete tensor cannot meet a traced value: pass it to jit as an argument.

#include "tessel/core/tensor.hpp"
#include "tessel/core/tracer.hpp"

namespace tessel {

// The arguments of an eager call: concrete tensors and scalars, at least one tensor.
template <class... X>
concept Eager = (Tensor<X> || ...) && ((Tensor<X> || Scalar<X>) && ...);

// jit(f)(args...), a scalar argument (`a + 1.0f`) taking the dtype of the first tensor argument that is not
// pred, as a scalar in a traced program does. Defined in tessel/jit.hpp: include it (or tessel/tessel.hpp)
// to run ops on concrete tensors.
template <class F, class... A>
auto eagerly(F f, const A&... args);

// A concrete tensor given to Op inside a traced function (a global, say): the first error names it. More
// follow for a global, whose read is not a constant expression.
template <fixed_string Op, class X>
consteval void reject_concrete() {
  raise<fit<[] {
    message_builder m;
    m << Op << ": a concrete tensor ";
    append_type<X>(m) << " meets a traced value (a traced function cannot read a tensor it was not given); fix: "
                         "pass the tensor to jit as an argument";
    return m;
  }>()>();
}

}  // namespace tessel
