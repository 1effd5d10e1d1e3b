#!/usr/bin/env python3
"""The JAX side of the differential suite: runs an oracle binary (tests/oracle/*_main.cpp), which writes
tessel's results, computes the same with JAX (the function of each case's name in cases.py) and compares
within the bounds stated there.

    judge.py BINARY WORKDIR [--cases MODULE.py]   run BINARY WORKDIR, then judge WORKDIR/manifest.jsonl
    judge.py --dir WORKDIR [--cases MODULE.py]     judge what a binary wrote before
MODULE.py adds cases to cases.py's (generate.py's programs.py). The cases judged are those of the suite
named as WORKDIR's last component.

Prints one line per disagreement and ends with 'N passed, N failed'; exits 1 on any failure (a case whose
function cases.py lacks, or a function of cases.py that no case uses, is a failure too).
"""
import json
import os
import re
import subprocess
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import ml_dtypes  # noqa: E402
import jax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as registry  # noqa: E402

NP_DTYPE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32, "u32": np.uint32, "pred": np.bool_}


def load(path, dtype):
    a = np.load(path)
    if dtype == "bf16":
        a = a.view(ml_dtypes.bfloat16)
    return a


def ordered(a):
    """Floats as integers in the order of their values (+0 and -0 both 0), for ULP distances."""
    if a.dtype == ml_dtypes.bfloat16:
        i = a.view(np.uint16).astype(np.int64)
        sign = 1 << 15
    else:
        i = a.astype(np.float32).view(np.uint32).astype(np.int64)
        sign = 1 << 31
    return np.where(i >= sign, sign - i, i)


def compare_ulp(got, want, bound):
    """Every element within `bound` units in the last place of the output's dtype; NaN only where NaN."""
    got = np.asarray(got)
    want = np.asarray(want).astype(got.dtype)
    gf, wf = got.astype(np.float32), want.astype(np.float32)
    nan_g, nan_w = np.isnan(gf), np.isnan(wf)
    if (nan_g != nan_w).any():
        i = int(np.argmax(nan_g != nan_w))
        return f"NaN differs at element {i}: tessel {gf.flat[i]!r}, JAX {wf.flat[i]!r}"
    d = np.abs(ordered(got) - ordered(want))
    d[nan_w] = 0
    if d.size and d.max() > bound:
        i = int(np.argmax(d))
        return f"{int(d.max())} ULP > {bound} at element {i}: tessel {gf.flat[i]!r}, JAX {wf.flat[i]!r}"
    return None


def rel_excess(g, w, rtol):
    """The finite elements over the relative bound, the differences and the bound (float64 arrays in)."""
    fin = np.isfinite(w)
    scale = np.abs(w[fin]).mean() if fin.any() else 0.0
    err = np.abs(g - w)
    allowed = rtol * (np.abs(w) + scale)
    return fin & (err > allowed), err, allowed


def compare_rel(got, want, rtol):
    """|tessel - JAX| <= rtol * (|JAX| + mean |JAX|) at every element; NaN only where NaN."""
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if (np.isnan(g) != np.isnan(w)).any():
        i = int(np.argmax(np.isnan(g) != np.isnan(w)))
        return f"NaN differs at element {i}: tessel {g.flat[i]!r}, JAX {w.flat[i]!r}"
    fin = np.isfinite(w)
    inf = np.isinf(w)
    if (g[inf] != w[inf]).any():
        i = int(np.argmax(inf & (g != w)))
        return f"infinity differs at element {i}: tessel {g.flat[i]!r}, JAX {w.flat[i]!r}"
    if not fin.any():
        return None
    bad, err, allowed = rel_excess(g, w, rtol)
    if bad.any():
        i = int(np.argmax(np.where(bad, err / np.maximum(allowed, 1e-300), 0)))
        return f"|difference| {err.flat[i]:.3g} > {allowed.flat[i]:.3g} (rtol {rtol}) at element {i}: tessel {g.flat[i]!r}, JAX {w.flat[i]!r}"
    return None


def compare_exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} against JAX's {want.shape}"
    ne = got != want
    if ne.any():
        i = int(np.argmax(ne))
        return f"element {i}: tessel {got.flat[i]!r}, JAX {want.flat[i]!r}"
    return None


F32_MIN = np.float32(np.finfo(np.float32).tiny)
EXPLAINED = {}


def explain(why, n):
    if n:
        EXPLAINED[why] = EXPLAINED.get(why, 0) + int(n)


def ieee_reference(case, xs, dtype):
    """The case's NumPy/SciPy function in float64 on the inputs as they are, rounded once to `dtype`."""
    with np.errstate(all="ignore"):
        r = np.asarray(case.ieee(*[np.asarray(x, dtype=np.float64) for x in xs]))
        return r.astype(NP_DTYPE[dtype])


def substitute_ieee(case, xs, want, dtype):
    """XLA:CPU treats subnormal inputs and results as zero (denormals-are-zero and flush-to-zero, by design:
    jax-ml/jax#16200); tessel keeps IEEE gradual underflow. At elements with a subnormal input, or whose
    exact result is subnormal, the judge takes the IEEE result (case.ieee in float64, rounded once) instead
    of JAX's. A case with subnormals and no IEEE function is judged against JAX as it is."""
    if case.ieee is None or any(np.ndim(x) != want.ndim for x in xs):
        return want
    xs = [np.broadcast_to(x, want.shape) for x in xs]
    f = [np.asarray(x, dtype=np.float32) for x in xs if x.dtype in (np.float32, ml_dtypes.bfloat16)]
    sub_in = np.zeros(want.shape, bool)
    for x in f:
        sub_in |= (x != 0) & (np.abs(x) < F32_MIN)
    ref = ieee_reference(case, xs, dtype)
    mask = sub_in
    if dtype in ("f32", "bf16"):
        rf = ref.astype(np.float32)
        mask = mask | ((rf != 0) & (np.abs(rf) < F32_MIN))
    explain("subnormal input or result: IEEE reference instead of XLA's flush to zero", mask.sum())
    return np.where(mask, ref, want)


def f64(arrays):
    """Float arrays as float64 (the others as they are), for JAX under enable_x64."""
    return [np.asarray(a, dtype=np.float64) if np.asarray(a).dtype in (np.float32, ml_dtypes.bfloat16) else a for a in arrays]


def compare(got, want, dtype, case, what, xs=None, exact=None):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} against JAX's {want.shape}"
    if xs is not None:
        want = substitute_ieee(case, xs, want, dtype)
    if dtype in ("s32", "u32", "pred"):
        return compare_exact(got, want)
    if what in ("value", "vmap") and not case.sums:
        msg = compare_ulp(got, want, case.ulp_for(dtype))
        if msg and case.ieee is not None and xs is not None:
            # Where tessel's result is the exact value rounded once and XLA's is not, tessel is right: XLA
            # evaluates some bf16 compositions in bf16 steps (logistic: negate, exp, add, divide, each
            # rounded to bf16) and rewrites x / broadcast(y) as x * (1 / y) under vmap.
            exact = np.broadcast_to(ieee_reference(case, xs, dtype), got.shape)  # vmap: unbatched inputs lead with 1
            off = np.abs(ordered(got) - ordered(want.astype(got.dtype))) > case.ulp_for(dtype)
            if compare_ulp(got[off], exact[off], 0) is None:
                explain("tessel correctly rounded where XLA is not (bf16 steps; x * (1 / y) for x / y)", off.sum())
                return None
        return msg
    msg = compare_rel(got, want, case.rtol_for(dtype))
    if msg and exact is not None:
        # A sum that cancels (a derivative of many terms, say) is as far from the exact value in XLA's f32 as
        # in tessel's: where tessel is within the bound of the same computation in float64, JAX's own f32
        # rounding made the difference.
        with jax.enable_x64(True):
            reference = np.asarray(exact(), dtype=np.float64)
        rtol = case.rtol_for(dtype)
        over = rel_excess(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol)[0]
        if compare_rel(got, reference, rtol) is None:
            explain("within the bound of JAX's float64 result (the sum cancels: XLA's f32 rounding differs)", over.sum())
            return None
        # Where JAX's own f32 result is as far from its float64 one, f32 cannot decide the case: a comparison
        # or a branch on a value that rounding puts on either side (x > y with x - y = 0 in f32, 4e-8 in f64).
        jax_over = rel_excess(np.asarray(want, np.float64), reference, rtol)[0]
        if not (over & ~jax_over).any():
            explain("JAX's f32 result is as far from its float64 one: a branch decided by f32 rounding", over.sum())
            return None
    return msg


# tessel's collectives (dump's names) as XLA's HLO opcodes.
XLA_KIND = {"psum": "all-reduce", "pmax": "all-reduce", "pmin": "all-reduce", "all_gather": "all-gather",
            "psum_scatter": "reduce-scatter", "ppermute": "collective-permute", "all_to_all": "all-to-all"}
HLO_LINE = re.compile(r"^\s*(?:ROOT )?%?([\w.-]+) = (\(.*?\)|\S+) ([\w-]+)\((.*?)\)")
SHAPE = re.compile(r"(pred|s32|u32|f32|bf16|f16|s8|u8|s64|u64|f64)\[([\d,]*)\]")
BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8}
TESSEL_LINE = re.compile(r"kernel \d+ (\w+) over \{[^}]*\} \(\d+ devices\): (\d+) bytes")


def shape_bytes(text):
    total = 0
    for dtype, dims in SHAPE.findall(text):
        n = 1
        for d in dims.split(","):
            if d:
                n *= int(d)
        total += n * BYTES[dtype]
    return total


def xla_collectives(hlo):
    """(kind, bytes per device) of every collective of XLA's compiled module: the larger of its operands' and
    its results' bytes, as tessel's plan counts them (an all-reduce of several operands is one)."""
    shapes, found = {}, []
    for line in hlo.splitlines():
        m = HLO_LINE.match(line)
        if not m:
            continue
        name, type_text, op, args = m.groups()
        shapes[name] = type_text
        kind = op[:-len("-start")] if op.endswith("-start") else op
        if kind in XLA_KIND.values():
            operands = sum(shape_bytes(shapes.get(a.strip().lstrip("%"), "")) for a in args.split(",") if a.strip())
            found.append((kind, max(operands, shape_bytes(type_text))))
    return found


def compare_collectives(plan_path, f, xs):
    """tessel moves no more bytes per device than XLA's compiled module. Kinds and counts are reported, not
    judged: XLA combines the all-reduces over one axis into one (a tuple), and tessel, whose results come
    back to the host as blocks, may reduce-scatter a gradient whose update XLA all-reduces."""
    ours = [(XLA_KIND[k], int(b)) for k, b in TESSEL_LINE.findall(open(plan_path).read())]
    theirs = xla_collectives(jax.jit(f).lower(*xs).compile().as_text())
    ours_total, theirs_total = sum(b for _, b in ours), sum(b for _, b in theirs)
    COLLECTIVES.append((os.path.basename(os.path.dirname(plan_path)), ours, theirs))
    if ours_total > theirs_total:
        return f"tessel moves {ours_total} bytes per device, XLA {theirs_total}: tessel {ours}, XLA {theirs}"
    return None


COLLECTIVES = []


def judge_case(root, entry):
    label, fn = entry["case"], entry["fn"]
    case = registry.CASES.get(fn)
    if case is None:
        return [f"{label}: cases.py has no function '{fn}'"]
    d = os.path.join(root, label)
    dtypes = entry["inputs"]
    xs = [load(os.path.join(d, f"in{k}.npy"), t) for k, t in enumerate(dtypes)]
    out = entry.get("output")
    f = case.fn
    problems = []

    def report(what, msg):
        if msg:
            problems.append(f"{label}: {what}: {msg}")

    if "outputs" in entry:  # several results
        wants = jax.jit(f)(*xs)
        for k, t in enumerate(entry["outputs"]):
            report(f"result {k}", compare(load(os.path.join(d, f"value{k}.npy"), t), np.asarray(wants[k]), t, case, "value"))
    else:
        want = np.asarray(jax.jit(f)(*xs))
        report("value", compare(load(os.path.join(d, "value.npy"), out), want, out, case, "value", xs,
                                exact=lambda: f(*f64(xs))))
    if entry.get("plan"):
        report("collectives", compare_collectives(os.path.join(d, "plan.txt"), f, xs))
    floats = [k for k, t in enumerate(dtypes) if t == "f32"]
    if entry.get("vjp"):
        ct = load(os.path.join(d, "ct.npy"), out)
        cts = jax.jit(lambda xs, ct: jax.vjp(f, *xs)[1](ct))(xs, ct)
        for k in floats:
            report(f"vjp of input {k}", compare(load(os.path.join(d, f"vjp{k}.npy"), "f32"), cts[k], "f32", case, "vjp",
                                                exact=lambda k=k: jax.vjp(f, *f64(xs))[1](*f64([ct]))[k]))
    if entry.get("jvp"):
        tans = []
        for k, t in enumerate(dtypes):
            if t == "f32":
                tans.append(load(os.path.join(d, f"tan{k}.npy"), t))
            else:
                tans.append(np.zeros(xs[k].shape, dtype=jax.dtypes.float0))

        def tangent_out(xs, float_tans):  # the float0 tangents are constants: jit takes arrays of numbers
            it = iter(float_tans)
            return jax.jvp(f, tuple(xs), tuple(next(it) if t == "f32" else z for t, z in zip(dtypes, tans)))[1]
        t_out = jax.jit(tangent_out)(xs, [tans[k] for k in floats])
        report("jvp", compare(load(os.path.join(d, "jvp.npy"), out), t_out, out, case, "jvp",
                              exact=lambda: jax.jvp(f, tuple(f64(xs)), tuple(f64(tans)))[1]))
    for j, axes in enumerate(entry.get("vmap", [])):
        bs = [load(os.path.join(d, f"vmap{j}_in{k}.npy"), t) for k, t in enumerate(dtypes)]
        w = jax.jit(jax.vmap(f, in_axes=tuple(axes)))(*bs)
        # The IEEE reference sees the batch axis first, the unbatched arguments with a leading axis of 1, and
        # each argument with 1s after it up to the result's rank, as NumPy broadcasts within one element.
        rank = np.ndim(w) - 1

        def leading(b, a):
            e = np.moveaxis(b, a, 0) if a is not None else np.asarray(b)[None]
            return e.reshape(e.shape[:1] + (1,) * max(rank - (e.ndim - 1), 0) + e.shape[1:])
        lead = [leading(b, a) for b, a in zip(bs, axes)]
        report(f"vmap in_axes={axes}", compare(load(os.path.join(d, f"vmap{j}_out.npy"), out), w, out, case, "vmap", lead,
                                               exact=lambda bs=bs, axes=axes: jax.vmap(f, in_axes=tuple(axes))(*f64(bs))))
    return problems


def main(argv):
    if len(argv) >= 5 and argv[-2] == "--cases":
        import importlib.util
        spec = importlib.util.spec_from_file_location("generated_cases", argv[-1])
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        argv = argv[:-2]
    if len(argv) == 3 and argv[1] == "--dir":
        root = argv[2]
    elif len(argv) == 3:
        binary, root = argv[1], argv[2]
        os.makedirs(root, exist_ok=True)
        r = subprocess.run([binary, root])
        if r.returncode != 0:
            print(f"judge.py: {binary} failed (exit {r.returncode})")
            return 1
    else:
        print(__doc__)
        return 2
    with open(os.path.join(root, "manifest.jsonl")) as m:
        entries = [json.loads(line) for line in m if line.strip()]
    passed = failed = 0
    used = set()
    for e in entries:
        used.add(e["fn"])
        try:
            problems = judge_case(root, e)
        except Exception as ex:  # a JAX error is a disagreement to look at, not a crash of the suite
            problems = [f"{e['case']}: JAX raised {type(ex).__name__}: {ex}"]
        if problems:
            failed += 1
            for p in problems:
                print("DISAGREES", p)
        else:
            passed += 1
    suite = os.path.basename(os.path.normpath(root))
    unused = sorted(n for n in registry.CASES if registry.CASES[n].suite == suite and n not in used)
    for n in unused:
        print(f"UNUSED cases.py has '{n}' (suite {suite}) but no case of the binary runs it")
        failed += 1
    print(f"oracle {suite}: {len(entries)} cases, jax {jax.__version__}")
    for why, n in sorted(EXPLAINED.items()):
        print(f"explained: {n} elements: {why}")
    for label, ours, theirs in COLLECTIVES:
        kinds = lambda c: ", ".join(sorted({k for k, _ in c})) or "none"  # noqa: E731
        print(f"collectives of {label}: tessel {len(ours)} ({kinds(ours)}) moving {sum(b for _, b in ours)} bytes per device, "
              f"XLA {len(theirs)} ({kinds(theirs)}) moving {sum(b for _, b in theirs)}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
