#!/usr/bin/env python3
"""JAX (jax.jit on XLA:CPU) and PyTorch 2 (eager, torch.compile, bf16 autocast) on the rows of bench/run_all,
on a given number of threads, from the virtual environment of `scripts/setup --peers`.

    .venv/bin/python bench/peers.py --threads N        prints one JSON object: seconds per call, per row and peer

Rows: SGEMM n x n x n (128 ... 2048), bf16 GEMM (256 ... 2048; bf16 in, f32 accumulation, bf16 out), row
softmax 4096 x 1024, the MLP 784-256-10 Adam step at batch 128 (as bench/train_step.cpp), and JAX's time to
the first step (trace, compile and first call of that step). Each figure is the median of 7 blocks of calls,
each block at least 20 ms, after a warm-up. The thread count is set before either library starts: XLA's CPU
client by XLA_FLAGS (intra-op threads), PyTorch by torch.set_num_threads.
"""
import argparse
import json
import os
import statistics
import sys
import time


def timed(fn, sync, min_block=0.02, blocks=7):
    fn()
    sync()
    calls = 1
    while True:  # calls per block so that a block lasts min_block seconds
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        if time.perf_counter() - t >= min_block:
            break
        calls *= 2
    per = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        per.append((time.perf_counter() - t) / calls)
    return statistics.median(per)


def jax_rows(threads, out):
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} " \
                              f"intra_op_parallelism_threads={threads}"
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    rng = np.random.default_rng(0)
    for n in (128, 256, 512, 1024, 2048):
        a = jnp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float32))
        b = jnp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float32))
        f = jax.jit(lambda x, y: x @ y)
        out[f"sgemm_{n}"]["jax"] = timed(lambda: f(a, b), lambda: f(a, b).block_until_ready())
    for n in (256, 512, 1024, 2048):
        a = jnp.asarray(rng.uniform(-1, 1, (n, n))).astype(jnp.bfloat16)
        b = jnp.asarray(rng.uniform(-1, 1, (n, n))).astype(jnp.bfloat16)
        f = jax.jit(lambda x, y: jax.lax.dot(x, y, preferred_element_type=jnp.float32).astype(jnp.bfloat16))
        out[f"bf16_gemm_{n}"]["jax"] = timed(lambda: f(a, b), lambda: f(a, b).block_until_ready())
    x = jnp.asarray(rng.uniform(-1, 1, (4096, 1024)).astype(np.float32))
    f = jax.jit(lambda v: jax.nn.softmax(v, axis=-1))
    out["softmax_4096x1024"]["jax"] = timed(lambda: f(x), lambda: f(x).block_until_ready())

    opt = optax.adam(1e-3)

    def loss(p, xb, yb):
        h = jax.nn.relu(xb @ p["w1"] + p["b1"])
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["w2"] + p["b2"], yb).mean()

    def step(p, s, xb, yb):
        g = jax.grad(loss)(p, xb, yb)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    params = {"w1": jnp.asarray(rng.normal(0, 0.05, (784, 256)).astype(np.float32)), "b1": jnp.zeros(256),
              "w2": jnp.asarray(rng.normal(0, 0.05, (256, 10)).astype(np.float32)), "b2": jnp.zeros(10)}
    xb = jnp.asarray(rng.uniform(0, 1, (128, 784)).astype(np.float32))
    yb = jnp.asarray(rng.integers(0, 10, 128).astype(np.int32))
    first = time.perf_counter()
    jstep = jax.jit(step, donate_argnums=(0, 1))
    state = opt.init(params)
    params, state = jstep(params, state, xb, yb)
    jax.block_until_ready(params)
    out["mlp_step"]["jax_first_step"] = time.perf_counter() - first
    out["mlp_step"]["jax_import"] = first - t0
    holder = [params, state]

    def run():
        holder[0], holder[1] = jstep(holder[0], holder[1], xb, yb)

    out["mlp_step"]["jax"] = timed(run, lambda: jax.block_until_ready(holder[0]))


def torch_rows(threads, out):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    out["versions"]["torch"] = torch.__version__
    for n in (128, 256, 512, 1024, 2048):
        a, b = torch.rand(n, n) * 2 - 1, torch.rand(n, n) * 2 - 1
        out[f"sgemm_{n}"]["torch_eager"] = timed(lambda: torch.mm(a, b), lambda: None)
    for n in (256, 512, 1024, 2048):
        a, b = (torch.rand(n, n) * 2 - 1).bfloat16(), (torch.rand(n, n) * 2 - 1).bfloat16()
        out[f"bf16_gemm_{n}"]["torch_eager"] = timed(lambda: torch.mm(a, b), lambda: None)
    x = torch.rand(4096, 1024) * 2 - 1
    out["softmax_4096x1024"]["torch_eager"] = timed(lambda: torch.softmax(x, dim=-1), lambda: None)
    compiled = torch.compile(lambda v: torch.softmax(v, dim=-1))
    out["softmax_4096x1024"]["torch_compile"] = timed(lambda: compiled(x), lambda: None)

    def mlp_step(compile_it, autocast):
        net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        xb, yb = torch.rand(128, 784), torch.randint(0, 10, (128,))

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = torch.nn.functional.cross_entropy(net(xb), yb)
            loss.backward()
            opt.step()
        return timed(torch.compile(step) if compile_it else step, lambda: None)

    out["mlp_step"]["torch_eager"] = mlp_step(False, False)
    out["mlp_step"]["torch_compile"] = mlp_step(True, False)
    out["mlp_step"]["torch_bf16_autocast"] = mlp_step(False, True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=["jax", "torch"])
    a = ap.parse_args()
    rows = [f"sgemm_{n}" for n in (128, 256, 512, 1024, 2048)] + [f"bf16_gemm_{n}" for n in (256, 512, 1024, 2048)]
    out = {r: {} for r in rows + ["softmax_4096x1024", "mlp_step"]}
    out["versions"] = {}
    out["threads"] = a.threads
    if a.only != "torch":
        jax_rows(a.threads, out)
        import jax
        out["versions"]["jax"] = jax.__version__
    if a.only != "jax":
        try:
            torch_rows(a.threads, out)
        except ImportError:
            out["versions"]["torch"] = None  # `scripts/setup --peers` installs it
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
