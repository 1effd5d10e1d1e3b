#!/usr/bin/env python3
"""JAX (jax.jit on XLA:CPU) and PyTorch 2 (eager, torch.compile, bf16 autocast) on the rows of bench/run_all,
on a given number of threads, from the virtual environment of `scripts/setup --peers`.

    .venv/bin/python bench/peers.py --threads N        prints one JSON object: seconds per call, per row and peer

Rows: SGEMM n x n x n (128 ... 2048), bf16 GEMM (256 ... 2048; bf16 in, f32 accumulation, bf16 out), row
softmax 4096 x 1024, the MLP 784-256-10 Adam step at batch 128 (as bench/mlp_step.hpp), JAX's time to the
first step (trace, compile and first call of that step), the Fashion-MNIST CNN's train step at batch 128
(examples/fashion_mnist.hpp's model, Adam; run_all reports 100 of them) and the char-level GPT's train step
(examples/char_lm.hpp: 4 blocks, d_model 128, 4 heads, mlp 512, byte vocabulary; masked cross-entropy,
clipping to global norm 1, AdamW with decay 0.01) at each bucket, 16x64, 8x128 and 4x256 (run_all weighs
them as tessel's run met them). Inputs are random, of the real shapes. Each figure is the median of 7 blocks of calls,
each block at least 20 ms, after a warm-up. The thread count is set before either library starts: XLA's CPU
client by XLA_FLAGS (intra-op threads), PyTorch by torch.set_num_threads, and the process is pinned to that
many CPUs (XLA's GEMM library has a pool of its own).
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


CHAR_LM_BUCKETS = ((16, 64), (8, 128), (4, 256))  # (batch, length): 1024 positions each


def char_lm_shapes(V, D, L, M):
    """tessel's stacked parameters of the char-level GPT (bench/torch_char_lm.py's names, without 'layer.')."""
    return {"wte": (V, D), "wpe": (256, D), "ln1_g": (L, D), "ln1_b": (L, D), "w_qkv": (L, D, 3 * D), "b_qkv": (L, 3 * D),
            "w_o": (L, D, D), "b_o": (L, D), "ln2_g": (L, D), "ln2_b": (L, D), "w_fc": (L, D, M), "b_fc": (L, M),
            "w_proj": (L, M, D), "b_proj": (L, D), "lnf_g": (D,), "lnf_b": (D,)}


def jax_step_time(step, params, state, *batch):
    """Seconds per call of a jitted train step whose parameters and state are donated and carried over."""
    import jax
    holder = [params, state]

    def run():
        holder[0], holder[1] = step(holder[0], holder[1], *batch)

    return timed(run, lambda: jax.block_until_ready(holder[0]))


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

    # The CNN: NHWC, 3x3 'SAME' convolutions of 32 and 64 channels, relu, 2x2 max pools, dense 128, dense 10.
    def pool(v):
        return jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def conv(v, w, b):
        return jax.lax.conv_general_dilated(v, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b

    def cnn_loss(p, xb, yb):
        h = pool(jax.nn.relu(conv(xb, p["c1"], p["c1b"])))
        h = pool(jax.nn.relu(conv(h, p["c2"], p["c2b"])))
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ p["d1"] + p["d1b"])
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["d2"] + p["d2b"], yb).mean()

    cnn_opt = optax.adam(2e-3)

    def cnn_step(p, s, xb, yb):
        g = jax.grad(cnn_loss)(p, xb, yb)
        u, s = cnn_opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    def normal(*dims):
        return jnp.asarray(rng.normal(0, 0.05, dims).astype(np.float32))

    cnn = {"c1": normal(3, 3, 1, 32), "c1b": jnp.zeros(32), "c2": normal(3, 3, 32, 64), "c2b": jnp.zeros(64),
           "d1": normal(7 * 7 * 64, 128), "d1b": jnp.zeros(128), "d2": normal(128, 10), "d2b": jnp.zeros(10)}
    images = jnp.asarray(rng.uniform(0, 1, (128, 28, 28, 1)).astype(np.float32))
    out["cnn_step"]["jax"] = jax_step_time(jax.jit(cnn_step, donate_argnums=(0, 1)), cnn, cnn_opt.init(cnn), images, yb)

    # The char-level GPT: pre-LayerNorm blocks, causal attention masked by padding, tanh gelu, tied output.
    V, D, H, L, M = 256, 128, 4, 4, 512

    def layer_norm(v, g, b):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) * jax.lax.rsqrt(var + 1e-6) * g + b

    def lm_loss(p, inputs, targets, mask):
        B, T = inputs.shape
        x = p["wte"][inputs] + p["wpe"][:T]
        allowed = (jnp.arange(T)[None, :] <= jnp.arange(T)[:, None])[None, None] & mask[:, None, None, :]
        for l in range(L):
            h = layer_norm(x, p["ln1_g"][l], p["ln1_b"][l])
            q, k, v = jnp.split(h @ p["w_qkv"][l] + p["b_qkv"][l], 3, axis=-1)
            q, k, v = (t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for t in (q, k, v))
            s = jnp.where(allowed, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H), -1e9)
            ctx = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
            x = x + ctx @ p["w_o"][l] + p["b_o"][l]
            m = jax.nn.gelu(layer_norm(x, p["ln2_g"][l], p["ln2_b"][l]) @ p["w_fc"][l] + p["b_fc"][l], approximate=True)
            x = x + m @ p["w_proj"][l] + p["b_proj"][l]
        logits = layer_norm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        w = mask.astype(jnp.float32)
        return (ce * w).sum() / jnp.maximum(w.sum(), 1.0)

    lm_opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(optax.constant_schedule(5e-3), weight_decay=0.01))

    def lm_step(p, s, inputs, targets, mask):
        g = jax.grad(lm_loss)(p, inputs, targets, mask)
        u, s = lm_opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    lm = {k: normal(*dims) for k, dims in char_lm_shapes(V, D, L, M).items()}
    jit_lm = jax.jit(lm_step, donate_argnums=(0, 1))
    for b, t in CHAR_LM_BUCKETS:
        tokens = jnp.asarray(rng.integers(0, V, (b, t)).astype(np.int32))
        fresh = jax.tree.map(jnp.copy, lm)  # the step donates its parameters: each bucket starts from a copy
        out[f"char_lm_step_{t}"]["jax"] = jax_step_time(jit_lm, fresh, lm_opt.init(fresh), tokens, tokens, jnp.ones((b, t), bool))


def attempt(out, row, peer, measure):
    """One peer's figure; a peer that fails (torch.compile's generated C++ may not load) is named in
    out["errors"] and leaves the row to the others."""
    try:
        out[row][peer] = measure()
    except Exception as e:  # noqa: BLE001 - any failure of the peer's own stack
        out.setdefault("errors", {})[f"{row}/{peer}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"


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
    attempt(out, "softmax_4096x1024", "torch_compile", lambda: timed(lambda: compiled(x), lambda: None))

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
    attempt(out, "mlp_step", "torch_compile", lambda: mlp_step(True, False))
    out["mlp_step"]["torch_bf16_autocast"] = mlp_step(False, True)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_train import Cnn  # the example's CNN, as the Fashion-MNIST comparison has it
    import torch_char_lm

    def train_step_time(params, loss, clip, compile_it, autocast, opt):
        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                value = loss()
            value.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        return timed(torch.compile(step) if compile_it else step, lambda: None)

    images, labels = torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))
    for key, compile_it, autocast in (("torch_eager", False, False), ("torch_compile", True, False),
                                      ("torch_bf16_autocast", False, True)):
        net = Cnn()
        attempt(out, "cnn_step", key, lambda: train_step_time(
            list(net.parameters()), lambda: torch.nn.functional.cross_entropy(net(images), labels), False, compile_it, autocast,
            torch.optim.Adam(net.parameters(), lr=2e-3)))
    V, D, L, M = 256, 128, 4, 512
    for b, t in CHAR_LM_BUCKETS:
        tokens, mask = torch.randint(0, V, (b, t)), torch.ones(b, t, dtype=torch.bool)
        for key, compile_it, autocast in (("torch_eager", False, False), ("torch_compile", True, False),
                                          ("torch_bf16_autocast", False, True)):
            p = {("" if n in ("wte", "wpe", "lnf_g", "lnf_b") else "layer.") + n: (torch.randn(*dims) * 0.05).requires_grad_()
                 for n, dims in char_lm_shapes(V, D, L, M).items()}
            attempt(out, f"char_lm_step_{t}", key, lambda: train_step_time(
                list(p.values()), lambda: torch_char_lm.loss_of(p, tokens, tokens, mask, 4), True, compile_it, autocast,
                torch.optim.AdamW(p.values(), lr=5e-3, weight_decay=0.01)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=["jax", "torch"])
    a = ap.parse_args()
    # The process runs on its first N CPUs: XLA:CPU's GEMMs (YNNPACK) keep a thread pool of their own, which
    # XLA_FLAGS does not size, so without this the 1-thread figures of JAX ran on both cores.
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus[:a.threads])
    rows = [f"sgemm_{n}" for n in (128, 256, 512, 1024, 2048)] + [f"bf16_gemm_{n}" for n in (256, 512, 1024, 2048)]
    rows += ["softmax_4096x1024", "mlp_step", "cnn_step"] + [f"char_lm_step_{t}" for _, t in CHAR_LM_BUCKETS]
    out = {r: {} for r in rows}
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
