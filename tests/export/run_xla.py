#!/usr/bin/env python3
"""XLA runs what tessel exports: each StableHLO module tessel wrote (tessel::export_stablehlo) is parsed and
compiled by XLA:CPU (jaxlib's PJRT client, as jax.jit compiles its own; a module on a mesh is partitioned by
Shardy over that many host devices), run on the inputs tessel used, and its outputs compared with tessel's.

    run_xla.py --oracle DIR    every module of an oracle suite's folder (tests/oracle): each case's value.mlir,
                               vjp.mlir and jvp.mlir (the programs of jit(f), its VJP and its JVP), against
                               tessel's value, cotangents and tangent; a module of a shard_map or of a jit
                               with shardings also against the collectives of tessel's plan (plan.txt)
    run_xla.py --steps DIR     every train step DIR/<step>/ that tests/export/steps.hpp wrote: the step's
                               module run for as many steps under XLA, its parameters and optimizer state
                               carried from step to step, every result against tessel's after every step
                               (the bounds above run_steps), and its collectives against the plan

The bounds: integers and pred exactly; f32 within 1e-6 relative and bf16 within one unit in the last place
(NaN only where NaN) -- or, where that is tighter than the oracle's own bound for the case (cases.py: the
bound tessel meets against JAX, which is XLA running JAX's lowering of the same function), within the
case's bound, judged as judge.py judges tessel against JAX, with its explanations (XLA:CPU flushes
subnormals to zero). The last lines count the modules each bound decided and list the cases that needed
their oracle bound.

Prints one line per disagreement and ends with 'N passed, N failed'; exits 1 on any failure, and when a
folder holds no module at all.
"""
import json
import os
import re
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import ml_dtypes  # noqa: E402
import jax  # noqa: E402
from jax._src.lib import xla_client  # noqa: E402
from jax._src.sharding_impls import GSPMDSharding  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import judge  # noqa: E402
import cases as registry  # noqa: E402

F32_RTOL = 1e-6


# ---- XLA -------------------------------------------------------------------------------------------

def result_shapes(text):
    """The shapes of @main's results, from its signature."""
    signature = next(line for line in text.splitlines() if "func.func public @main(" in line)
    return [tuple(int(d) for d in dims.split("x") if d) for dims in re.findall(r"tensor<((?:\d+x)*)\w+>", signature.split(") -> (", 1)[1])]


def partitions(text):
    m = re.search(r"mhlo.num_partitions = (\d+)", text)
    return int(m.group(1)) if m else 1


def compile_module(text):
    """XLA's executable of a StableHLO module's text on the first mhlo.num_partitions CPU devices (SPMD,
    partitioned by Shardy, as jax.jit compiles a sharded program)."""
    n = partitions(text)
    devices = jax.devices("cpu")[:n]
    options = xla_client.CompileOptions()
    if n > 1:
        options.num_partitions = n
        build = options.executable_build_options
        build.num_partitions = n
        build.use_spmd_partitioning = True
        build.use_shardy_partitioner = True
        build.device_assignment = xla_client.DeviceAssignment.create(np.arange(n).reshape(1, n))
    return devices, devices[0].client.compile_and_load(text, xla_client.DeviceList(tuple(devices)), options)


def run_module(text, inputs, compiled=None):
    """The module's outputs on the inputs (global arrays, placed as its parameters' shardings say), and the
    text of XLA's compiled HLO module; `compiled`: compile_module(text), when the caller runs it again."""
    devices, executable = compiled or compile_module(text)
    hlo = executable.hlo_modules()[0].to_string()
    if len(devices) == 1:
        return [np.asarray(r) for r in executable.execute([jax.device_put(x, devices[0]) for x in inputs])], hlo
    mesh = xla_client.DeviceList(tuple(devices))
    placed = [jax.device_put(x, GSPMDSharding(mesh, s)) for x, s in zip(inputs, executable.get_parameter_shardings())]
    shards = executable.execute_sharded(placed).disassemble_into_single_device_arrays()
    results = []
    for per_device, s, shape in zip(shards, executable.get_output_shardings(), result_shapes(text)):
        results.append(np.asarray(jax.make_array_from_single_device_arrays(shape, GSPMDSharding(mesh, s), per_device)))
    return results, hlo


# ---- bounds ----------------------------------------------------------------------------------------

def within_tight_bound(tessel, xla):
    """Integers exactly; f32 within 1e-6 relative; bf16 within 1 ULP; NaN only where NaN."""
    if tessel.shape != xla.shape or tessel.dtype != xla.dtype:
        return False
    if tessel.dtype not in (np.float32, ml_dtypes.bfloat16):
        return bool((tessel == xla).all())
    t, x = tessel.astype(np.float64), xla.astype(np.float64)
    if (np.isnan(t) != np.isnan(x)).any():
        return False
    if tessel.dtype == ml_dtypes.bfloat16:
        d = np.abs(judge.ordered(tessel) - judge.ordered(xla))
        d[np.isnan(t)] = 0
        return bool((d <= 1).all())
    with np.errstate(invalid="ignore"):
        ok = (t == x) | (np.abs(t - x) <= F32_RTOL * np.abs(x)) | np.isnan(t)
    return bool(ok.all())


def judged(fn, what, tessel, xla, dtype, xs):
    """None, or why tessel's result is outside the oracle's bound of case fn against XLA's."""
    case = registry.CASES.get(fn)
    if case is None:
        return f"cases.py has no function '{fn}' to take the bound from"
    return judge.compare(tessel, xla, dtype, case, what, xs if what == "value" else None)


# ---- the oracle's folders ----------------------------------------------------------------------------

def oracle_modules(root):
    """(label, fn, program, module text, inputs, [(tessel's output, dtype)], plan.txt or None) of every module
    an oracle folder holds: value.mlir (the inputs; value.npy or value<k>.npy), vjp.mlir (ct.npy and the
    inputs; vjp<k>.npy) and jvp.mlir (the inputs and tan<k>.npy; jvp.npy)."""
    with open(os.path.join(root, "manifest.jsonl")) as f:
        for line in f:
            entry = json.loads(line)
            d = os.path.join(root, entry["case"])
            types = entry["inputs"]
            xs = [judge.load(os.path.join(d, f"in{k}.npy"), t) for k, t in enumerate(types)]
            if "outputs" in entry:
                values = [(f"value{k}.npy", t) for k, t in enumerate(entry["outputs"])]
            else:
                values = [("value.npy", entry["output"])]
            programs = [("value", xs, values)]
            if os.path.exists(os.path.join(d, "vjp.mlir")):
                programs.append(("vjp", [judge.load(os.path.join(d, "ct.npy"), "f32")] + xs, [(f"vjp{k}.npy", t) for k, t in enumerate(types)]))
            if os.path.exists(os.path.join(d, "jvp.mlir")):
                tangents = [judge.load(os.path.join(d, f"tan{k}.npy"), t) for k, t in enumerate(types)]
                programs.append(("jvp", xs + tangents, [("jvp.npy", "f32")]))
            for what, inputs, outputs in programs:
                path = os.path.join(d, what + ".mlir")
                if not os.path.exists(path):
                    continue
                plan = os.path.join(d, "plan.txt") if what == "value" and entry.get("plan") else None
                with open(path) as m:
                    wants = [(judge.load(os.path.join(d, o), t), t) for o, t in outputs]
                    yield entry["case"], entry["fn"], what, m.read(), inputs, wants, plan


def collective_counts(kinds):
    counts = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    return counts


COMBINED = ("all-reduce", "all-gather", "reduce-scatter")
PLAN_COLLECTIVE = re.compile(r"kernel \d+ (\w+) over \{")  # dump's line of each collective of the plan


def xla_collective_kinds(hlo):
    """The collectives of XLA's compiled module. XLA:CPU combines independent all-reduces, all-gathers and
    reduce-scatters into one op of several operands, which are as many of tessel's: those count once per
    operand; an all-to-all, which XLA writes with one operand per chunk, and a collective-permute once."""
    kinds = []
    for line in hlo.splitlines():
        m = judge.HLO_LINE.match(line)
        if not m:
            continue
        _, _, op, args = m.groups()
        kind = op[:-len("-start")] if op.endswith("-start") else op
        if kind in judge.XLA_KIND.values():
            operands = len([a for a in args.split(",") if a.strip()]) if kind in COMBINED else 1
            kinds += [kind] * max(1, operands)
    return kinds


def compare_collectives(plan_path, hlo):
    """None, or how the collectives of XLA's compiled module differ from those of tessel's plan (kinds and
    counts: the module holds tessel's own collectives, which XLA compiles as they are)."""
    with open(plan_path) as f:
        ours = collective_counts(judge.XLA_KIND[k] for k in PLAN_COLLECTIVE.findall(f.read()))
    theirs = collective_counts(xla_collective_kinds(hlo))
    return None if ours == theirs else f"collectives differ: tessel's plan {ours}, XLA's compiled module {theirs}"


# A step's results after every step, XLA's own trajectory against tessel's. Both add a batch's gradients in
# their own order, and Adam carries that on: it moves every parameter by about the learning rate whatever
# its gradient's size, so where a gradient is at the scale of Adam's epsilon (a unit no example activates)
# the direction comes from the last bits of a sum. Hence three bounds:
#   the step's own outputs (loss, accuracy, norm): within STEP_RTOL of their value;
#   parameters: within PARAM_LR_FRACTION of the run's largest learning rate, absolute (a twentieth of one
#     step's movement);
#   optimizer state (Adam's moments): within STATE_RTOL of the leaf's scale (|tessel| + mean |tessel|); the
#     step count exactly.
STEP_RTOL = 1e-5
PARAM_LR_FRACTION = 0.05
STATE_RTOL = 1e-3


def leaf_problem(r, want, bound, scaled):
    """None, or the worst element of XLA's leaf r against tessel's outside the bound (text), and its measure."""
    g, w = r.astype(np.float64), want.astype(np.float64)
    if r.shape != want.shape:
        return f"shape {r.shape} against tessel's {want.shape}", np.inf
    if r.dtype.kind in "iub":
        bad = g != w
        return (f"element {int(np.argmax(bad))} differs (integers compare exactly)" if bad.any() else None), float(bad.any())
    diff = np.abs(g - w)
    if scaled:
        diff = diff / np.maximum(np.abs(w) + np.mean(np.abs(w)), np.finfo(np.float64).tiny)
    measure = float(np.nanmax(diff)) if diff.size else 0.0
    if (np.isnan(g) != np.isnan(w)).any() or measure > bound:
        i = int(np.nanargmax(diff))
        return f"element {i}: XLA {r.ravel()[i]!r}, tessel {want.ravel()[i]!r} ({diff.ravel()[i]:.2e} > {bound:.2e})", measure
    return None, measure


def run_steps(root):
    passed = failed = 0
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        with open(os.path.join(d, "steps.json")) as f:
            meta = json.load(f)
        with open(os.path.join(d, "step.mlir")) as f:
            text = f.read()
        params, carried_count = meta["params"], meta["carried"]
        carried = [np.load(os.path.join(d, f"carried{j}.npy")) for j in range(carried_count)]
        data = [[np.load(os.path.join(d, f"data{k}_{j}.npy")) for j in range(meta["data"])] for k in range(meta["steps"])]
        param_bound = PARAM_LR_FRACTION * max(float(step[-1]) for step in data)
        problems, worst, hlo = [], {"params": 0.0, "state": 0.0, "outputs": 0.0}, None
        try:
            compiled = compile_module(text)  # once: every step runs the same executable
            devices = compiled[0]
            for k in range(meta["steps"]):
                results, hlo = run_module(text, carried + data[k], compiled)
                for j, r in enumerate(results):
                    want = np.load(os.path.join(d, f"out{k}_{j}.npy"))
                    kind = "params" if j < params else "state" if j < carried_count else "outputs"
                    bound = {"params": param_bound, "state": STATE_RTOL, "outputs": STEP_RTOL}[kind]
                    msg, measure = leaf_problem(r, want, bound, scaled=kind != "params")
                    worst[kind] = max(worst[kind], measure)
                    if msg:
                        problems.append(f"step {k} result {j} ({kind}): {msg}")
                carried = results[:carried_count]
        except Exception as e:  # a module XLA refuses is a failure of the export
            problems.append(f"XLA refused the module: {str(e).splitlines()[0]}")
            devices = []
        plan = os.path.join(d, "plan.txt")
        if hlo and os.path.exists(plan) and (msg := compare_collectives(plan, hlo)):
            problems.append(msg)
        for p in problems[:5]:
            print(f"{name}: {p}")
        print(f"{name}: {meta['steps']} steps on {len(devices)} devices; largest differences from tessel: parameters "
              f"{worst['params']:.2e} (bound {param_bound:.2e}), optimizer state {worst['state']:.2e} of its scale, the step's "
              f"outputs {worst['outputs']:.2e} of theirs{'; collectives as in the plan' if os.path.exists(plan) and not problems else ''}")
        failed += bool(problems)
        passed += not problems
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--steps":
        return run_steps(argv[2])
    if len(argv) != 3 or argv[1] != "--oracle":
        print(__doc__, file=sys.stderr)
        return 2
    passed = failed = tight = 0
    loose, ops = [], set()
    for label, fn, what, text, inputs, wants, plan in oracle_modules(argv[2]):
        ops.update(re.findall(r'"((?:stablehlo|chlo)\.\w+)"\(', text))
        ops.update(re.findall(r"\b(sdy\.manual_computation)\b", text))
        try:
            results, hlo = run_module(text, inputs)
        except Exception as e:  # a module XLA refuses is a failure of the export
            print(f"{label}/{what}: XLA refused the module: {str(e).splitlines()[0]}")
            failed += 1
            continue
        problems = []
        if len(results) != len(wants):
            problems.append(f"XLA returned {len(results)} results, tessel {len(wants)}")
        elif all(within_tight_bound(w, r) for (w, _), r in zip(wants, results)):
            tight += 1
        else:
            for o, ((w, t), r) in enumerate(zip(wants, results)):
                if (msg := judged(fn, what, w, r, t, inputs)):
                    problems.append(f"output {o}: {msg}")
            if not problems:
                loose.append(f"{label}/{what}")
        if plan and (msg := compare_collectives(plan, hlo)):
            problems.append(msg)
        for p in problems:
            print(f"{label}/{what}: {p}")
        failed += bool(problems)
        passed += not problems
    for why, n in judge.EXPLAINED.items():
        print(f"explained: {n} elements: {why}")
    print(f"StableHLO ops in the modules: {len(ops)}: {' '.join(sorted(ops))}")
    print(f"{tight} modules within 1e-6 relative (f32) and 1 ULP (bf16), integers exact; {len(loose)} more as the oracle "
          f"judges their case (its bound in cases.py, its explanations): {' '.join(loose)}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
