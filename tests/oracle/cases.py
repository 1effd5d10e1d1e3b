"""JAX's side of every oracle case: the function, in jax.numpy and lax, and the bounds tessel's results
must meet against it. A case of the C++ binaries names its function here (the part of its label before '@').

Bounds, as JAX's own lax tests state theirs:
  ulp    values and vmap: units in the last place of the output's dtype ({"f32": n, "bf16": n});
         integer and pred outputs are always compared exactly.
  rtol   derivatives (vjp, jvp), and values and vmap of functions that sum (sums=True: reductions,
         contractions, pooling), which XLA may add in another order:
         |tessel - JAX| <= rtol * (|JAX| + mean |JAX|) at every element.
NaN must meet NaN and an infinity the same infinity in every comparison.
"""
from dataclasses import dataclass, field
from typing import Callable

import jax.numpy as jnp
from jax import lax
import numpy as np
import scipy.special as sp


@dataclass
class Case:
    fn: Callable
    suite: str
    ulp: dict = field(default_factory=lambda: {"f32": 0, "bf16": 0})
    rtol: dict = field(default_factory=lambda: {"f32": 1e-6, "bf16": 1e-2})
    # values and vmap by rtol, not ULP: the function adds many terms (XLA may add them in another order) or
    # iterates (a scan's steps compound their few ULP)
    sums: bool = False
    ieee: Callable = None  # the function in float64 NumPy/SciPy: the reference where XLA flushes subnormals

    def ulp_for(self, dtype):
        return self.ulp[dtype]

    def rtol_for(self, dtype):
        return self.rtol[dtype]


CASES = {}


def case(name, fn, suite, **bounds):
    CASES[name] = Case(fn, suite, **bounds)


def ulp(f32, bf16=1):
    return {"f32": f32, "bf16": bf16}


def rtol(f32, bf16=1e-2):
    return {"f32": f32, "bf16": bf16}


# ---- elementwise unary (unary_cases.cpp) -------------------------------------------------------------
# The f32 bounds are those of tessel's approximations (prim/<name>.hpp states each against a double
# reference) plus XLA:CPU's own, measured here against each other. The derivatives' rtol is 1e-6 except
# where the derivative cancels: tanh's 1 - tanh^2 and logistic's s (1 - s) at large |x|, where a few ULP of
# the value become 1e-5 relative.
P = "primitives"
U = P
case("abs", lax.abs, U, ieee=np.abs)
case("neg", lax.neg, U, ieee=np.negative)
case("floor", lax.floor, U, ieee=np.floor)
case("sign", lax.sign, U, ieee=np.sign)
case("sqrt", lax.sqrt, U, ulp=ulp(1), ieee=np.sqrt)
case("rsqrt", lax.rsqrt, U, ulp=ulp(2), ieee=lambda x: 1 / np.sqrt(x))
case("cbrt", lax.cbrt, U, ulp=ulp(2), ieee=np.cbrt)
case("exp", lax.exp, U, ulp=ulp(2), ieee=np.exp)
case("expm1", lax.expm1, U, ulp=ulp(4), ieee=np.expm1)
case("log", lax.log, U, ulp=ulp(2), ieee=np.log)
case("log1p", lax.log1p, U, ulp=ulp(4), ieee=np.log1p)
case("sin", lax.sin, U, ulp=ulp(2), ieee=np.sin)
case("cos", lax.cos, U, ulp=ulp(2), ieee=np.cos)
case("tanh", lax.tanh, U, ulp=ulp(4), rtol=rtol(1e-5), ieee=np.tanh)
case("logistic", lax.logistic, U, ulp=ulp(4), rtol=rtol(1e-5), ieee=sp.expit)
case("erf", lax.erf, U, ulp=ulp(4), ieee=sp.erf)
case("erf_inv", lax.erf_inv, U, ulp=ulp(4), ieee=sp.erfinv)

# ---- elementwise binary, comparisons (binary_cases.cpp) and integers, select, conversions
# (integer_cases.cpp). Integer and pred results are exact; XLA's integer division by zero gives -1 (s32) and
# all ones (u32), and INT32_MIN / -1 gives INT32_MIN, as tessel documents.
def broadcasting(op):
    """lax's binary op with NumPy broadcasting of its operands, as tessel's binary functions have."""
    return lambda a, b: op(*jnp.broadcast_arrays(a, b))


case("add", broadcasting(lax.add), P, ieee=np.add)
case("sub", broadcasting(lax.sub), P, ieee=np.subtract)
case("mul", broadcasting(lax.mul), P, ieee=np.multiply)
case("div", broadcasting(lax.div), P, ieee=np.divide)
case("max", broadcasting(lax.max), P, ieee=np.maximum)
case("min", broadcasting(lax.min), P, ieee=np.minimum)
case("pow", broadcasting(lax.pow), P, ulp=ulp(2), ieee=np.power)
case("eq", broadcasting(lax.eq), P, ieee=np.equal)
case("ne", broadcasting(lax.ne), P, ieee=np.not_equal)
case("lt", broadcasting(lax.lt), P, ieee=np.less)
case("le", broadcasting(lax.le), P, ieee=np.less_equal)
case("gt", broadcasting(lax.gt), P, ieee=np.greater)
case("ge", broadcasting(lax.ge), P, ieee=np.greater_equal)
case("select", lax.select, P)
case("select_lt", lambda a, b: lax.select(a < b, a, b), P, ieee=lambda a, b: np.where(a < b, a, b))
case("select_scalar", lambda p, a: lax.select(p, a, jnp.full_like(a, 0.5)), P)
case("to_bf16_and_back", lambda x: x.astype(jnp.bfloat16).astype(jnp.float32), P)
case("to_bf16", lambda x: lax.convert_element_type(x, jnp.bfloat16), P, ieee=lambda x: x)
case("to_s32", lambda x: lax.convert_element_type(x, jnp.int32), P, ieee=lambda x: np.trunc(np.nan_to_num(x, nan=0.0)).clip(-2**31, 2**31 - 1))
case("to_pred", lambda x: lax.convert_element_type(x, jnp.bool_), P, ieee=lambda x: x != 0)
case("to_f32", lambda x: lax.convert_element_type(x, jnp.float32), P)
case("to_u32", lambda x: lax.convert_element_type(x, jnp.uint32), P)

# ---- structure (layout_cases.cpp). Moves are exact; sums are compared by rtol (XLA may add in another
# order); take's out-of-range indices fill (NaN for f32) and scatter_add's are dropped, as jnp's defaults.
case("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), P)
case("broadcast_size1", lambda x: lax.broadcast_in_dim(x, (3, 2, 4), (0, 1, 2)), P)
case("reshape", lambda x: lax.reshape(x, (4, 6)), P)
case("transpose", lambda x: lax.transpose(x, (2, 0, 1)), P)
case("slice", lambda x: lax.slice(x, (1, 0), (4, 5), (2, 2)), P)
case("pad", lambda x: lax.pad(x, jnp.float32(0.5), [(1, 0, 1), (-1, 2, 1)]), P)
case("pad_value", lambda x, v: lax.pad(x, v, [(2, 1, 0), (0, 1, 2)]), P)
case("concatenate", lambda a, b, c: lax.concatenate([a, b, c], 1), P)
case("concatenate4", lambda a, b: lax.concatenate([a, b, a, b], 0), P)
case("iota", lambda x: x + (lax.broadcasted_iota(jnp.int32, (3, 4), 1) * 3 + lax.broadcasted_iota(jnp.int32, (3, 4), 0)).astype(jnp.float32), P)
case("take0", lambda x, i: jnp.take(x, i, axis=0), P)
case("take1", lambda x, i: jnp.take(x, i, axis=1), P)
case("take_clip", lambda x, i: jnp.take(x, i, axis=0, mode="clip"), P)
case("scatter_add", lambda x, i, u: jnp.asarray(x).at[i].add(u), P)
case("argmax", lambda x: jnp.argmax(x, axis=1).astype(jnp.int32), P)
case("argmax0", lambda x: jnp.argmax(x, axis=0).astype(jnp.int32), P)
case("reduce_sum", lambda x: jnp.sum(x, axis=1), P, sums=True)
case("reduce_sum0", lambda x: jnp.sum(x, axis=0), P, sums=True, ieee=lambda x: np.sum(x, axis=0))
case("reduce_sum02", lambda x: jnp.sum(x, axis=(0, 2)), P, sums=True)
case("reduce_max", lambda x: jnp.max(x, axis=0), P, ieee=lambda x: np.max(x, axis=0))
case("reduce_min", lambda x: jnp.min(x, axis=1), P)
case("reduce_min0", lambda x: jnp.min(x, axis=0), P, ieee=lambda x: np.min(x, axis=0))

# ---- contractions and pooling (contraction_cases.cpp): sums of products, compared by rtol.
NHWC = ("NHWC", "HWIO", "NHWC")
C = dict(rtol=rtol(2e-6), sums=True)
case("matmul", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=a.dtype), P, **C)
case("dot_transposed", lambda a, b: lax.dot_general(a, b, (((0,), (1,)), ((), ()))), P, **C)
case("dot_batched", lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), P, **C)
case("conv_same", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC, preferred_element_type=x.dtype), P, **C)
case("conv_valid_s2", lambda x, w: lax.conv_general_dilated(x, w, (2, 2), "VALID", dimension_numbers=NHWC), P, **C)
case("conv_dilated", lambda x, w: lax.conv_general_dilated(x, w, (1, 2), [(1, 0), (2, 1)], rhs_dilation=(2, 1), dimension_numbers=NHWC), P, **C)


def pool(init, op, window, strides, padding):
    # A NumPy init value: a concrete one makes reduce_window the max or sum monoid, which JAX differentiates
    # (under jit, jnp.asarray would be a tracer, and the generic reduce_window has no derivative).
    return lambda x: lax.reduce_window(x, np.array(init, x.dtype), op, (1, *window, 1), (1, *strides, 1), padding)


def avg_pool(window, strides, padding, count_include_pad):
    def f(x):
        s = pool(0.0, lax.add, window, strides, padding)(x)
        n = pool(0.0, lax.add, window, strides, padding)(jnp.ones_like(x)) if not count_include_pad else window[0] * window[1]
        return s / n
    return f


case("max_pool", pool(-jnp.inf, lax.max, (2, 2), (2, 2), "VALID"), P)
case("max_pool_same", pool(-jnp.inf, lax.max, (3, 2), (2, 1), "SAME"), P)
case("avg_pool_same", avg_pool((3, 3), (2, 2), "SAME", True), P, **C)
case("avg_pool_exclude_pad", avg_pool((3, 3), (2, 2), "SAME", False), P, **C)
case("sum_pool", pool(0.0, lax.add, (2, 3), (1, 2), "VALID"), P, **C)

# ---- control flow, remat, identities and random (control_cases.cpp)
import jax  # noqa: E402


def _cell(h, x):
    n = jnp.tanh(h * 0.9 + x)
    return n, n * n


def _block(x, w):
    return jnp.sin(x @ w) * x


def _key(k0, k1):
    return jax.random.wrap_key_data(jnp.stack([k0, k1]).astype(jnp.uint32), impl="threefry2x32")


case("scan", lambda h, xs: lax.scan(_cell, h, xs)[1], P, rtol=rtol(1e-5), sums=True)
case("scan_carry", lambda h, xs: lax.scan(_cell, h, xs, reverse=True)[0], P, rtol=rtol(1e-5), sums=True)
case("cond", lambda x: lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v) * 2, lambda v: v * v, x), P, ulp=ulp(2))
case("switch", lambda x, i: lax.switch(i, [lambda v: v + 1, jnp.exp, lambda v: -v], x), P, ulp=ulp(2))
case("checkpoint", _block, P, ulp=ulp(4), rtol=rtol(2e-6), sums=True)
case("stop_gradient", lambda x, y: x * lax.stop_gradient(x * y), P)
case("barriers", lambda x, y: x * 2 + lax.optimization_barrier((y, x))[0] * x, P)
case("uniform", lambda k0, k1: jax.random.uniform(_key(k0, k1), (3, 5)), P)
case("fold_in_uniform", lambda k0, k1, d: jax.random.uniform(jax.random.fold_in(_key(k0, k1), d), (7,)), P)

# ---- compositions (composition_cases.cpp, remat_composition_cases.cpp): each function is a transform, and
# the suite's vjp, jvp and vmap of it make compositions of depth three.
def _ccell(h, x):
    n = jnp.tanh(h * x + 0.5)
    return n, n


def _scan_loss(h, xs):
    return jnp.sum(lax.scan(_ccell, h, xs)[1] * h)


def _cond_loss(x):
    return jnp.sum(lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v) * v, jnp.exp, x))


def _switch_loss(x, i):
    return jnp.sum(lax.switch(i, [lambda v: v * v, jnp.tanh, lambda v: jnp.log1p(v * v)], x))


def _block(x, w):
    return jnp.tanh(x @ w) * x


def _remat_loss(policy):
    return lambda x, w: jnp.sum(jax.checkpoint(_block, policy=policy)(x, w) * w)


@jax.custom_vjp
def _softplus(x):
    return jnp.log(1 + jnp.exp(x))


def _softplus_fwd(x):
    e = jnp.exp(x)
    return jnp.log(1 + e), e


_softplus.defvjp(_softplus_fwd, lambda e, ct: (ct * e / (1 + e) * 2,))

G = dict(sums=True, rtol=rtol(1e-5))
case("grad_grad", jax.grad(lambda u: jnp.sum(jnp.sin(u) * u * u)), P, **G)
case("grad_scan", jax.grad(_scan_loss), P, **G)
case("grad_scan_xs", jax.grad(_scan_loss, 1), P, **G)
case("grad_cond", jax.grad(_cond_loss), P, **G)
case("grad_switch", jax.grad(_switch_loss), P, **G)
case("grad_checkpoint_nothing", jax.grad(_remat_loss(jax.checkpoint_policies.nothing_saveable)), P, **G)
case("grad_checkpoint_dots", jax.grad(_remat_loss(jax.checkpoint_policies.dots_saveable)), P, **G)
case("grad_checkpoint_everything", jax.grad(_remat_loss(jax.checkpoint_policies.everything_saveable)), P, **G)
case("grad_custom_vjp", jax.grad(lambda u: jnp.sum(_softplus(u))), P, **G)


def _value_and_grad(v):
    value, g = jax.value_and_grad(lambda u: jnp.sum(jnp.tanh(u) * u))(v)
    return g * value


case("value_and_grad", _value_and_grad, P, **G)
case("jvp_of_jvp", lambda v, t: jax.jvp(lambda u: jnp.sin(u) * u, (v,), (t,))[1], P, **G)
case("vmap_in_grad", jax.grad(lambda w, xs: jnp.sum(jax.vmap(lambda a, b: jnp.tanh(a * b), in_axes=(None, 0))(w, xs))), P, **G)

# ---- shard_map (collective_cases.cpp, shard_transform_cases.cpp): jax.shard_map on the first devices of
# XLA_FLAGS=--xla_force_host_platform_device_count=8, check_vma on. Collectives move or add exactly the
# same values in the same order on both sides except psum and pmean over 4 or 8 devices (XLA may add in
# another order).
import numpy as _np  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as Pspec  # noqa: E402

S = "shard"


def _mesh(**axes):
    n = int(_np.prod(list(axes.values())))
    return Mesh(_np.array(jax.devices()[:n]).reshape(tuple(axes.values())), tuple(axes))


M1, M2, M3 = _mesh(i=4), _mesh(a=2, b=2), _mesh(x=2, y=2, z=2)


def smap(mesh, f, in_specs, out_specs):
    return jax.jit(jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs))


def pvary(x, axes):
    return lax.pcast(x, axes, to="varying")


R = dict(sums=True, rtol=rtol(1e-6))
case("psum", smap(M1, lambda b: lax.psum(b, "i"), Pspec("i"), Pspec()), S, **R)
case("pmean", smap(M1, lambda b: lax.pmean(b, "i"), Pspec("i"), Pspec()), S, **R)
case("pmax", smap(M1, lambda b: lax.pmax(b, "i"), Pspec("i"), Pspec()), S)
case("pmin", smap(M1, lambda b: lax.pmin(b, "i"), Pspec("i"), Pspec()), S)
case("pvary", smap(M1, lambda b, r: pvary(r, "i") * b, (Pspec("i"), Pspec()), Pspec("i")), S)
case("all_gather_tiled", smap(M1, lambda b: lax.all_gather(b, "i", axis=0, tiled=True), Pspec("i"), Pspec("i")), S)
case("all_gather_stacked", smap(M1, lambda b: lax.all_gather(b, "i", axis=1), Pspec(None, "i"), Pspec("i")), S)
case("psum_scatter_tiled", smap(M1, lambda b: lax.psum_scatter(b, "i", scatter_dimension=1, tiled=True), Pspec("i"), Pspec("i")), S, **R)
case("psum_scatter", smap(M1, lambda b: lax.psum_scatter(pvary(b, "i"), "i", scatter_dimension=0), Pspec(), Pspec("i")), S, **R)
case("ppermute", smap(M1, lambda b: lax.ppermute(b, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]), Pspec("i"), Pspec("i")), S)
case("ppermute_partial", smap(M1, lambda b: lax.ppermute(b, "i", [(0, 2), (3, 1)]), Pspec("i"), Pspec("i")), S)
case("all_to_all_tiled", smap(M1, lambda b: lax.all_to_all(b, "i", 1, 0, tiled=True), Pspec("i"), Pspec("i")), S)
case("all_to_all", smap(M1, lambda b: lax.all_to_all(b, "i", 0, 1), Pspec(None, "i"), Pspec(None, "i")), S)
case("axis_index", smap(M1, lambda b: b + lax.axis_index("i").astype(jnp.float32), Pspec("i"), Pspec("i")), S)
case("psum_a", smap(M2, lambda b: lax.psum(b, "a"), Pspec("a", "b"), Pspec(None, "b")), S)
case("psum_ab", smap(M2, lambda b: lax.psum(b, ("a", "b")), Pspec("a", "b"), Pspec()), S, **R)
case("all_gather_b", smap(M2, lambda b: lax.all_gather(b, "b", axis=1, tiled=True), Pspec("a", "b"), Pspec("a", "b")), S)
case("axis_index_ab", smap(M2, lambda b: b * lax.axis_index(("a", "b")).astype(jnp.float32), Pspec(("a", "b")), Pspec(("a", "b"))), S)
case("psum_xz", smap(M3, lambda b: lax.psum(pvary(b, "z"), ("x", "z")), Pspec("x", "y"), Pspec(None, "y")), S, **R)
case("ppermute_z", smap(M3, lambda b: lax.ppermute(b, "z", [(0, 1), (1, 0)]) - b, Pspec(("x", "z"), "y"), Pspec(("x", "z"), "y")), S)
case("all_to_all_y", smap(M3, lambda b: lax.all_to_all(b, "y", 0, 1, tiled=True), Pspec("x", "y"), Pspec("x", "y")), S)


def _example_loss(w, x):
    return jnp.sum(jnp.tanh(w * x))


def _body_loss(w, xb):
    return lax.psum(jnp.sum(jnp.tanh(w * xb)), "i")


def _ring_step(h, x):
    n = jnp.tanh(lax.ppermute(h, "i", [(0, 1), (1, 2), (3, 0), (2, 3)]) + x)
    return n, n


_loss = jax.shard_map(_body_loss, mesh=M1, in_specs=(Pspec(), Pspec("i")), out_specs=Pspec())
T = dict(sums=True, rtol=rtol(1e-5))
case("grad_outside_w", jax.jit(jax.grad(_loss, 0)), S, **T)
case("grad_outside_x", jax.jit(jax.grad(_loss, 1)), S, **T)
case("grad_inside", smap(M1, lambda w, xb: jax.grad(_example_loss)(w, xb), (Pspec(), Pspec("i")), Pspec()), S, **T)
case("vmap_grad_inside", smap(M1, lambda w, xb: jax.vmap(jax.grad(_example_loss), in_axes=(None, 0))(w, xb),
                              (Pspec(), Pspec("i")), Pspec("i")), S, **T)
case("vmap_grad_outside", jax.jit(jax.vmap(jax.grad(_loss), in_axes=(None, 0))), S, **T)
case("vmap_outside", jax.jit(jax.vmap(jax.shard_map(lambda b: b * lax.psum(b, "i"), mesh=M1, in_specs=Pspec("i"), out_specs=Pspec("i")))), S, **T)
case("vmap_inside", smap(M1, lambda b: jax.vmap(lambda r: r * lax.pmax(r, "i"))(b), Pspec(None, "i"), Pspec(None, "i")), S)
case("jvp_inside", smap(M1, lambda b, t: jax.jvp(lambda v: jnp.sin(v) * lax.psum(v, "i"), (b,), (t,))[1], (Pspec("i"), Pspec("i")), Pspec("i")), S, **T)
case("scan_ring", smap(M1, lambda h, q: lax.scan(_ring_step, h, q)[1], (Pspec("i"), Pspec(None, "i")), Pspec(None, "i")), S, **T)
case("grad_scan_ring", jax.jit(jax.grad(jax.shard_map(lambda h, q: lax.psum(jnp.sum(lax.scan(_ring_step, h, q)[0]), "i"), mesh=M1,
                                                      in_specs=(Pspec("i"), Pspec(None, "i")), out_specs=Pspec()))), S, **T)
case("cond_inside", smap(M1, lambda b: lax.cond(jnp.sum(b) > 0, lambda v: v * 2, lambda v: -v, b), Pspec("i"), Pspec("i")), S)
case("grad_2d", jax.jit(jax.grad(jax.shard_map(lambda wb, xb: lax.psum(jnp.sum(jnp.tanh(xb @ wb)), ("a", "b")), mesh=M2,
                                               in_specs=(Pspec(None, "b"), Pspec("a")), out_specs=Pspec()))), S, **T)

# ---- the libraries (library_cases.cpp): nn against flax and jax.nn, losses against optax, optimizers against
# optax over 100 steps, random against jax.random (bit-exact: integers and samples compared exactly).
import flax.linen as nn  # noqa: E402
import optax  # noqa: E402

L = "library"
case("dense", lambda a, w, b: nn.Dense(5).apply({"params": {"kernel": w, "bias": b}}, a), L, sums=True, rtol=rtol(2e-6))
case("layer_norm", lambda a, g, b: nn.LayerNorm().apply({"params": {"scale": g, "bias": b}}, a), L, sums=True, rtol=rtol(1e-5))
case("conv2d", lambda a, k, b: nn.Conv(4, (3, 3), padding="SAME").apply({"params": {"kernel": k, "bias": b}}, a), L, sums=True, rtol=rtol(2e-6))
case("relu", jax.nn.relu, L)
case("sigmoid", jax.nn.sigmoid, L, ulp=ulp(4), rtol=rtol(1e-5))
# gelu's 1 + tanh (or erf) cancels for negative x: a few ULP of tanh become tens of ULP of the result there.
case("gelu", lambda a: jax.nn.gelu(a, approximate=True), L, sums=True, rtol=rtol(1e-5))
case("gelu_exact", lambda a: jax.nn.gelu(a, approximate=False), L, sums=True, rtol=rtol(1e-5))
case("softmax", jax.nn.softmax, L, sums=True, rtol=rtol(1e-5))
case("log_softmax", jax.nn.log_softmax, L, sums=True, rtol=rtol(1e-5))
case("softmax_axis0", lambda a: jax.nn.softmax(a, axis=0), L, sums=True, rtol=rtol(1e-5))
case("softmax_cross_entropy", lambda l, y: optax.softmax_cross_entropy(l, jax.nn.softmax(y)), L, sums=True, rtol=rtol(1e-5))
case("softmax_cross_entropy_int", optax.softmax_cross_entropy_with_integer_labels, L, sums=True, rtol=rtol(1e-5))
case("mean_squared_error", lambda p, y: jnp.mean(optax.squared_error(p, y)), L, sums=True, rtol=rtol(1e-5))


def _trajectory(opt):
    def loss(w, x, y):
        e = jnp.tanh(x @ w) - y
        return jnp.mean(e * e)

    @jax.jit
    def step(w, state, x, y):
        g = jax.grad(loss)(w, x, y)
        u, state = opt.update(g, state, w)
        return optax.apply_updates(w, u), state

    def run(w, x, y):
        state = opt.init(w)
        for _ in range(100):
            w, state = step(w, state, x, y)
        return w
    return run


# 100 steps compound the few-ULP differences of each step's gradient.
O = dict(sums=True, rtol=rtol(1e-4))
case("sgd", _trajectory(optax.sgd(0.1)), L, **O)
case("sgd_momentum", _trajectory(optax.sgd(0.1, momentum=0.9)), L, **O)
case("sgd_nesterov", _trajectory(optax.sgd(0.1, momentum=0.9, nesterov=True)), L, **O)
case("adam", _trajectory(optax.adam(0.01)), L, **O)
case("adam_eps_root", _trajectory(optax.adam(0.01, b1=0.8, b2=0.99, eps=1e-6, eps_root=1e-8)), L, **O)
case("adamw", _trajectory(optax.adamw(0.01, weight_decay=0.05)), L, **O)
case("sgd_linear", _trajectory(optax.sgd(optax.linear_schedule(0.2, 0.01, 60, 10))), L, **O)
case("adam_cosine", _trajectory(optax.adam(optax.cosine_decay_schedule(0.02, 80, 0.1))), L, **O)
case("adam_warmup_cosine", _trajectory(optax.adam(optax.warmup_cosine_decay_schedule(0.0, 0.02, 10, 100, 0.001))), L, **O)
case("clip_sgd", _trajectory(optax.chain(optax.clip_by_global_norm(0.05), optax.sgd(0.5))), L, **O)


def _key(k0, k1):
    return jax.random.wrap_key_data(jnp.stack([jnp.asarray(k0), jnp.asarray(k1)]).astype(jnp.uint32), impl="threefry2x32")


case("random_uniform", lambda k0, k1: jax.random.uniform(_key(k0, k1), (5, 7)), L)
case("random_normal", lambda k0, k1: jax.random.normal(_key(k0, k1), (5, 7)), L)
case("random_bernoulli", lambda k0, k1: jax.random.bernoulli(_key(k0, k1), 0.3, (40,)), L)
case("random_permutation", lambda k0, k1: jax.random.permutation(_key(k0, k1), 50).astype(jnp.int32), L)
case("random_split", lambda k0, k1: jax.random.key_data(jax.random.split(_key(k0, k1), 3)), L)
case("random_fold_in", lambda k0, k1: jax.random.uniform(jax.random.fold_in(jax.random.fold_in(_key(k0, k1), 5), 1000), (6,)), L)
case("random_seed", lambda seed: jax.random.normal(jax.random.key(seed), (4,)), L)

# ---- jit with shardings (sharding_cases.cpp): values, and collectives against XLA's compiled module
from jax.sharding import NamedSharding  # noqa: E402


def _step(x, w1, w2, y):
    def loss(a, b, c, t):
        e = jnp.tanh(a @ b) @ c - t
        return jnp.mean(e * e)
    l, (g1, g2) = jax.value_and_grad(loss, (1, 2))(x, w1, w2, y)
    return l, w1 - 0.1 * g1, w2 - 0.1 * g2


def sharded_step(mesh, ins, outs):
    s = lambda spec: NamedSharding(mesh, Pspec(*spec))  # noqa: E731
    return jax.jit(_step, in_shardings=tuple(s(i) for i in ins), out_shardings=tuple(s(o) for o in outs))


_data, _model = _mesh(data=4), _mesh(model=2)
_both, _fsdp = _mesh(data=2, model=2), _mesh(data=2)
case("step_data_parallel", sharded_step(_data, [("data",), (), (), ("data",)], [(), (), ()]), S, **T)
case("step_megatron", sharded_step(_model, [(), (None, "model"), ("model",), ()], [(), (None, "model"), ("model",)]), S, **T)
case("step_megatron_2d", sharded_step(_both, [("data",), (None, "model"), ("model",), ("data",)], [(), (None, "model"), ("model",)]), S, **T)
case("step_fully_sharded", sharded_step(_fsdp, [("data",), ("data",), ("data",), ("data",)], [(), ("data",), ("data",)]), S, **T)
