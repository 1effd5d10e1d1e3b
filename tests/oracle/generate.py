#!/usr/bin/env python3
"""Random programs for the oracle suite: one spec of each program (10 to 40 operations: elementwise math,
NumPy broadcasting, reductions, dot_general, transpose, reshape, slice, broadcast_in_dim, concatenate,
select, cond and scan), written both as a tessel function (C++) and as a JAX function, so that the two
sides are the same program by construction. Each is checked as every oracle case is (value, vjp, jvp,
vmap over each axis); a third of them are first wrapped in grad, so that the suite's transforms of them
are compositions of depth three.

    generate.py --seed S --count N --per-file K --out DIR
        writes DIR/programs_<k>.cpp (K programs each, a function programs_<k>(suite&)), DIR/programs_main.cpp
        and DIR/programs.py (the JAX functions and their bounds, for judge.py --cases)

Only the standard library: it runs at build time with any Python 3.
"""
import argparse
import os
import random
import re

UNARY = [  # name, C++ of x, JAX of x: bounded so that 40 of them in a row stay finite
    ("sin", "tessel::sin({x})", "jnp.sin({x})"),
    ("cos", "tessel::cos({x})", "jnp.cos({x})"),
    ("tanh", "tessel::tanh({x})", "jnp.tanh({x})"),
    ("logistic", "tessel::logistic({x})", "jax.nn.sigmoid({x})"),
    ("exp_tanh", "tessel::exp(tessel::tanh({x}))", "jnp.exp(jnp.tanh({x}))"),
    ("log1p_abs", "tessel::log1p(tessel::abs({x}))", "jnp.log1p(jnp.abs({x}))"),
    ("sqrt_1p", "tessel::sqrt(tessel::abs({x}) + 1.0f)", "jnp.sqrt(jnp.abs({x}) + 1.0)"),
    ("neg", "-{x}", "-{x}"),
    ("scale", "{x} * 0.75f", "{x} * 0.75"),
    ("erf", "tessel::erf({x})", "jax.lax.erf({x})"),
]
BINARY = [
    ("add", "{a} + {b}", "{a} + {b}"),
    ("sub", "{a} - {b}", "{a} - {b}"),
    ("mul", "{a} * {b}", "{a} * {b}"),
    ("div", "{a} / (tessel::abs({b}) + 1.0f)", "{a} / (jnp.abs({b}) + 1.0)"),
    ("max", "tessel::max({a}, {b})", "jnp.maximum({a}, {b})"),
    ("min", "tessel::min({a}, {b})", "jnp.minimum({a}, {b})"),
]


def broadcast(s, t):
    """NumPy's broadcast shape, or None."""
    out = []
    for i in range(max(len(s), len(t))):
        a = s[len(s) - 1 - i] if i < len(s) else 1
        b = t[len(t) - 1 - i] if i < len(t) else 1
        if a != b and a != 1 and b != 1:
            return None
        out.append(max(a, b))
    return tuple(reversed(out))


def shape_cpp(s):
    return "shape<" + ", ".join(str(d) for d in s) + ">"


def size(s):
    n = 1
    for d in s:
        n *= d
    return n


class Program:
    def __init__(self, name, rng):
        self.name, self.rng = name, rng
        self.values = []  # (name, shape)
        self.cpp, self.py = [], []
        self.inputs = []

    def new(self, shape, cpp, py):
        v = f"v{len(self.values)}"
        self.values.append((v, tuple(shape)))
        self.cpp.append(f"    const auto {v} = {cpp};")
        self.py.append(f"    {v} = {py}")
        return v, tuple(shape)

    def pick(self, pred=lambda s: True, recent=True):
        cands = [v for v in self.values if pred(v[1])]
        if not cands:
            return None
        # prefer recent values, so that the program is a chain more than a bush
        weights = [1 + i * i for i in range(len(cands))] if recent else None
        return self.rng.choices(cands, weights=weights)[0]

    def step(self):
        r = self.rng
        kind = r.choices(["unary", "binary", "reduce", "dot", "transpose", "reshape", "slice", "broadcast", "concat", "select", "cond",
                          "scan"], weights=[22, 22, 7, 5, 5, 5, 5, 4, 4, 4, 3, 3])[0]
        if kind == "unary":
            x, s = self.pick()
            _, c, p = r.choice(UNARY)
            return self.new(s, c.format(x=x), p.format(x=x))
        if kind == "binary":
            a, sa = self.pick()
            got = self.pick(lambda t: broadcast(sa, t) is not None and len(t) <= 3, recent=False)
            b, sb = got
            _, c, p = r.choice(BINARY)
            return self.new(broadcast(sa, sb), c.format(a=a, b=b), p.format(a=a, b=b))
        if kind == "reduce":
            got = self.pick(lambda s: len(s) >= 1)
            if got is None:
                return None
            x, s = got
            axis = r.randrange(len(s))
            op, jop = r.choice([("reduce_sum", "jnp.sum"), ("reduce_max", "jnp.max"), ("reduce_min", "jnp.min")])
            return self.new(s[:axis] + s[axis + 1:], f"tessel::{op}<{axis}>({x})", f"{jop}({x}, axis={axis})")
        if kind == "dot":
            got = self.pick(lambda s: len(s) == 2)
            if got is None:
                return None
            x, (m, k) = got
            other = self.pick(lambda s: len(s) == 2 and s[0] == k, recent=False)
            if other is not None and r.random() < 0.5:
                y, (_, n) = other
                return self.new((m, n), f"tessel::dot_general<axes<1>, axes<0>>({x}, {y})",
                                f"jax.lax.dot_general({x}, {y}, (((1,), (0,)), ((), ())))")
            return self.new((m, m), f"tessel::dot_general<axes<1>, axes<1>>({x}, {x})",
                            f"jax.lax.dot_general({x}, {x}, (((1,), (1,)), ((), ())))")
        if kind == "transpose":
            got = self.pick(lambda s: len(s) >= 2)
            if got is None:
                return None
            x, s = got
            perm = list(range(len(s)))
            while perm == sorted(perm):
                r.shuffle(perm)
            return self.new(tuple(s[i] for i in perm), f"tessel::transpose<{', '.join(map(str, perm))}>({x})",
                            f"jax.lax.transpose({x}, {tuple(perm)})")
        if kind == "reshape":
            got = self.pick(lambda s: size(s) > 1)
            if got is None:
                return None
            x, s = got
            n = size(s)
            divisors = [d for d in range(2, n) if n % d == 0]
            to = (n,)
            if divisors and r.random() < 0.7:
                d = r.choice(divisors)
                to = (d, n // d)
            if to == s:
                to = (1, n) if s == (n,) else (n,)
            return self.new(to, f"tessel::reshape<{shape_cpp(to)}>({x})", f"jnp.reshape({x}, {to})")
        if kind == "slice":
            got = self.pick(lambda s: any(d >= 2 for d in s))
            if got is None:
                return None
            x, s = got
            axes = [i for i, d in enumerate(s) if d >= 2]
            a = r.choice(axes)
            start = [0] * len(s)
            limit = list(s)
            stride = [1] * len(s)
            start[a] = r.randrange(s[a] - 1)
            stride[a] = r.choice([1, 2])
            out = list(s)
            out[a] = (limit[a] - start[a] + stride[a] - 1) // stride[a]
            arr = lambda v: "std::array{" + ", ".join(map(str, v)) + "}"
            return self.new(tuple(out), f"tessel::slice<{arr(start)}, {arr(limit)}, {arr(stride)}>({x})",
                            f"jax.lax.slice({x}, {tuple(start)}, {tuple(limit)}, {tuple(stride)})")
        if kind == "broadcast":
            got = self.pick(lambda s: len(s) <= 2)
            if got is None:
                return None
            x, s = got
            to = (2,) + s
            dims = tuple(range(1, len(s) + 1))
            dims_cpp = "".join(f", {d}" for d in dims)
            return self.new(to, f"tessel::broadcast_in_dim<{shape_cpp(to)}{dims_cpp}>({x})",
                            f"jax.lax.broadcast_in_dim({x}, {to}, {dims})")
        if kind == "concat":
            got = self.pick(lambda s: len(s) >= 1)
            if got is None:
                return None
            x, s = got
            a = r.randrange(len(s))
            _, c, p = r.choice(UNARY)
            out = list(s)
            out[a] *= 2
            return self.new(tuple(out), f"tessel::concatenate<{a}>({x}, {c.format(x=x)})",
                            f"jax.lax.concatenate([{x}, {p.format(x=x)}], {a})")
        if kind == "select":
            a, sa = self.pick()
            got = self.pick(lambda t: t == sa, recent=False)
            b, _ = got
            if b == a:
                _, c, p = r.choice(UNARY)
                b, _ = self.new(sa, c.format(x=a), p.format(x=a))
            return self.new(sa, f"tessel::select({a} > {b}, {a}, {b} * 0.5f)", f"jnp.where({a} > {b}, {a}, {b} * 0.5)")
        if kind == "cond":
            x, s = self.pick()
            _, c1, p1 = r.choice(UNARY)
            _, c2, p2 = r.choice(UNARY)
            return self.new(s, f"tessel::cond(tessel::sum({x}) > 0.0f, [](auto u) {{ return {c1.format(x='u')}; }}, "
                               f"[](auto u) {{ return {c2.format(x='u')}; }}, {x})",
                            f"jax.lax.cond(jnp.sum({x}) > 0, lambda u: {p1.format(x='u')}, lambda u: {p2.format(x='u')}, {x})")
        if kind == "scan":
            got = self.pick(lambda s: len(s) >= 2)
            if got is None:
                return None
            x, s = got
            return self.new(s, f"std::get<1>(tessel::scan(scan_cell{{}}, tessel::reduce_sum<0>({x}) * 0.25f, {x}))",
                            f"jax.lax.scan(_scan_cell, jnp.sum({x}, axis=0) * 0.25, {x})[1]")
        return None


def make(name, rng):
    p = Program(name, rng)
    n_in = rng.choice([1, 1, 2, 2, 3])
    shapes = [(3, 4), (4,), (2, 3, 4), (4, 4), (1, 4), (3, 1), (5,), (2, 5)]
    first = rng.choice(shapes)
    for i in range(n_in):
        s = first if i == 0 else rng.choice([first, first[-1:], rng.choice(shapes)])
        v = f"a{i}"
        p.inputs.append(s)
        p.values.append((v, tuple(s)))
    ops = rng.randint(10, 40)
    done = 0
    while done < ops:
        if p.step() is not None:
            done += 1
    # Every value counts: the sums of those nothing reads are added to the last one (scaled, to stay small).
    last, s = p.values[-1]
    text = "\n".join(p.cpp)
    unread = [v for v, _ in p.values[:-1] if not v.startswith("a") and len(re.findall(rf"\b{v}\b", text)) == 1]
    if unread:
        p.new(s, last + "".join(f" + tessel::sum({v}) * 0.125f" for v in unread), last + "".join(f" + jnp.sum({v}) * 0.125" for v in unread))
    p.wrap_grad = rng.random() < 1 / 3
    return p


def cpp_of(p):
    args = ", ".join(f"auto a{i}" for i in range(len(p.inputs)))
    body = "\n".join(p.cpp)
    out = p.values[-1][0]
    fn = f"struct {p.name}_fn {{\n  constexpr auto operator()({args}) const {{\n{body}\n    return {out};\n  }}\n}};\n"
    if p.wrap_grad:  # grad of the sum of the program, with respect to its first input
        fn += (f"struct {p.name}_grad {{\n  constexpr auto operator()({args}) const {{\n"
               f"    return grad([](auto... a) {{ return tessel::sum({p.name}_fn{{}}(a...)); }})({', '.join(f'a{i}' for i in range(len(p.inputs)))});\n"
               f"  }}\n}};\n")
    return fn


def py_of(p):
    args = ", ".join(f"a{i}" for i in range(len(p.inputs)))
    body = "\n".join(p.py)
    out = p.values[-1][0]
    fn = f"def {p.name}_fn({args}):\n{body}\n    return {out}\n\n\n"
    target = f"{p.name}_fn" if not p.wrap_grad else f"jax.grad(lambda *a: jnp.sum({p.name}_fn(*a)))"
    fn += f"case(\"{p.name}\", {target}, \"programs\", sums=True, rtol=rtol(RTOL))\n\n\n"
    return fn


CPP_HEAD = """// Generated by tests/oracle/generate.py (seed {seed}): random programs, each also written in JAX in
// programs.py. Do not edit; run the generator.
#include "oracle.hpp"
#include "tessel/transform/cond.hpp"
#include "tessel/transform/scan.hpp"

namespace tessel::oracle {{
namespace {{
template <class S>
using f32 = tensor<float, S>;
struct scan_cell {{
  constexpr auto operator()(auto h, auto x) const {{
    const auto n = tessel::tanh(h * 0.5f + x);
    return std::tuple{{n, h * x}};
  }}
}};
"""

PY_HEAD = '''"""Generated by tests/oracle/generate.py (seed {seed}): the JAX side of the random programs. Do not edit."""
import jax
import jax.numpy as jnp

from cases import case, rtol

# Programs of up to 40 operations, transcendental functions included, compound their few-ULP differences:
# values and derivatives are compared by this relative bound at the scale of each result.
RTOL = 2e-5


def _scan_cell(h, x):
    n = jnp.tanh(h * 0.5 + x)
    return n, h * x


'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=48)
    ap.add_argument("--per-file", type=int, default=12)
    ap.add_argument("--out", required=True)
    ap.add_argument("--light", action="store_true", help="vmap all arguments at 0 and argument 0 at its last axis only")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    programs = [make(f"program_{a.seed}_{k}", rng) for k in range(a.count)]
    files = []
    for f in range(0, a.count, a.per_file):
        chunk = programs[f:f + a.per_file]
        k = f // a.per_file
        files.append(k)
        text = CPP_HEAD.format(seed=a.seed)
        text += "".join(cpp_of(p) for p in chunk) + "}  // namespace\n\n"
        text += f"void programs_{k}(suite& s) {{\n"
        for i, p in enumerate(chunk):
            ins = ", ".join(f"uniform<f32<{shape_cpp(sh)}>>({1000 * a.seed + 10 * (f + i) + j})" for j, sh in enumerate(p.inputs))
            fn = f"{p.name}_grad" if p.wrap_grad else f"{p.name}_fn"
            opts = "options{.every_axis = false}" if a.light else "options{}"
            text += f"  check(s, \"{p.name}\", \"{p.name}\", {fn}{{}}, {opts}, {ins});\n"
        text += "}\n}  // namespace tessel::oracle\n"
        write(os.path.join(a.out, f"programs_{k}.cpp"), text)
    main_cpp = f"// Generated by tests/oracle/generate.py (seed {a.seed}, {a.count} programs). Do not edit.\n#include \"oracle.hpp\"\n\n"
    main_cpp += "namespace tessel::oracle {\n" + "".join(f"void programs_{k}(suite&);\n" for k in files) + "}\n\n"
    main_cpp += "int main(int argc, char** argv) {\n  return tessel::oracle::run_suite(argc, argv, nullptr, [](tessel::oracle::suite& s) {\n"
    main_cpp += "".join(f"    tessel::oracle::programs_{k}(s);\n" for k in files) + "  });\n}\n"
    write(os.path.join(a.out, "programs_main.cpp"), main_cpp)
    write(os.path.join(a.out, "programs.py"), PY_HEAD.format(seed=a.seed) + "".join(py_of(p) for p in programs))


def write(path, text):
    """Writes only when the text changed, so that a build does not recompile what is the same."""
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
