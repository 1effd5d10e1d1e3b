#!/usr/bin/env python3
"""The char-level GPT of include/tessel/nn/transformer.hpp in PyTorch, on tessel's stacked parameters.

Two uses:
  * tests/nn/gpt_torch_test.cpp: `torch_char_lm.py check DIR` reads the weights, a batch, tessel's loss and
    gradients written by the test into DIR, recomputes them with autograd in float64 and compares (rtol 1e-4).
  * `torch_char_lm.py train DIR [--threads N] [--precision f32|bf16]`: trains from the initial weights and on the
    batches that `char_lm --export DIR` wrote (the same AdamW, warm-up cosine learning rates and global-norm
    clipping, optax's formulas), printing the loss of every step and the tokens per second.

Tensors are raw little-endian files DIR/<name>.bin listed in DIR/manifest.txt as "name dtype dim0 dim1 ...".
"""
import math
import os
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the check reports it; the test skips
    torch = None


def read_dir(d):
    out = {}
    with open(os.path.join(d, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            name, dtype, dims = parts[0], parts[1], [int(x) for x in parts[2:]]
            np_dtype = {"f32": np.float32, "s32": np.int32, "pred": np.bool_}[dtype]
            a = np.fromfile(os.path.join(d, name + ".bin"), dtype=np_dtype).reshape(dims)
            out[name] = a
    return out


def forward(p, inputs, mask, heads, compute=None):
    """p: dict of tessel's leaf names -> tensors; inputs long [B,T]; mask bool [B,T]. Returns logits f32/f64.
    compute: None (the parameters' dtype) or torch.bfloat16 for the matmul inputs (results back in the
    parameters' dtype), as tessel's bf16 policy."""
    wte, wpe = p["wte"], p["wpe"]
    B, T = inputs.shape
    D = wte.shape[1]
    H, Dh = heads, D // heads
    L = p["layer.w_qkv"].shape[0]
    dt = wte.dtype

    def mm(a, b):
        if compute is None:
            return a @ b
        return (a.to(compute) @ b.to(compute)).to(dt)

    def ln(x, g, b):
        return F.layer_norm(x, (D,), g, b, eps=1e-6)

    x = wte[inputs] + wpe[:T]
    q_pos = torch.arange(T)[:, None]
    k_pos = torch.arange(T)[None, :]
    allowed = (k_pos <= q_pos)[None, None, :, :] & mask[:, None, None, :]
    bias = (allowed.to(dt) - 1.0) * 1e9
    for l in range(L):
        h = ln(x, p["layer.ln1_g"][l], p["layer.ln1_b"][l])
        qkv = mm(h, p["layer.w_qkv"][l]) + p["layer.b_qkv"][l]
        q, k, v = qkv.split(D, dim=-1)
        q, k, v = (t.reshape(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))
        s = mm(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(Dh)) + bias
        a = torch.softmax(s, dim=-1)
        ctx = mm(a, v).transpose(1, 2).reshape(B, T, D)
        x = x + mm(ctx, p["layer.w_o"][l]) + p["layer.b_o"][l]
        m = F.gelu(mm(ln(x, p["layer.ln2_g"][l], p["layer.ln2_b"][l]), p["layer.w_fc"][l]) + p["layer.b_fc"][l],
                   approximate="tanh")
        x = x + mm(m, p["layer.w_proj"][l]) + p["layer.b_proj"][l]
    out = ln(x, p["lnf_g"], p["lnf_b"])
    return mm(out, wte.t())


def loss_of(p, inputs, targets, mask, heads, compute=None):
    logits = forward(p, inputs, mask, heads, compute)
    V = logits.shape[-1]
    ce = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="none").reshape(targets.shape)
    w = mask.to(logits.dtype)
    return (ce * w).sum() / torch.clamp(w.sum(), min=1.0)


PARAM_NAMES = ["wte", "wpe"] + ["layer." + n for n in (
    "ln1_g", "ln1_b", "w_qkv", "b_qkv", "w_o", "b_o", "ln2_g", "ln2_b", "w_fc", "b_fc", "w_proj", "b_proj")] + [
    "lnf_g", "lnf_b"]


def check(d):
    if torch is None:
        print("SKIP: torch is not importable by " + sys.executable)
        return 77
    t = read_dir(d)
    heads = int(t["heads"].reshape(-1)[0])
    p = {n: torch.tensor(t["param." + n].astype(np.float64), requires_grad=True) for n in PARAM_NAMES}
    inputs = torch.tensor(t["inputs"].astype(np.int64))
    targets = torch.tensor(t["targets"].astype(np.int64))
    mask = torch.tensor(t["mask"])
    loss = loss_of(p, inputs, targets, mask, heads)
    loss.backward()
    # The same loss and gradients in float32 PyTorch: how far float32 itself lands from float64.
    p32 = {n: torch.tensor(t["param." + n], requires_grad=True) for n in PARAM_NAMES}
    loss_of(p32, inputs, targets, mask, heads).backward()
    rtol = 1e-4
    ok = True
    want = loss.item()
    got = float(t["loss"].reshape(-1)[0])
    rel = abs(got - want) / abs(want)
    print(f"loss tessel {got:.8f} torch(f64) {want:.8f} rel {rel:.2e}")
    ok &= rel <= rtol
    print("criterion: every element |tessel - torch64| <= 1e-4 * (|torch64| + 0.01 * max|torch64|)")
    for n in PARAM_NAMES:
        g_r = p[n].grad.numpy()
        scale = np.abs(g_r).max()
        floor = np.abs(g_r) + 1e-2 * scale

        def worst(g):
            return float((np.abs(g.astype(np.float64) - g_r) / floor).max())

        def norm_rel(g):
            return float(np.linalg.norm(g.astype(np.float64) - g_r) / np.linalg.norm(g_r))

        g_t = t["grad." + n]
        good = worst(g_t) <= rtol
        print(f"grad {n:14s} max|g| {scale:.2e}  tessel: worst {worst(g_t):.1e} norm-rel {norm_rel(g_t):.1e}  "
              f"torch f32: worst {worst(p32[n].grad.numpy()):.1e} norm-rel {norm_rel(p32[n].grad.numpy()):.1e}  "
              f"{'ok' if good else 'MISMATCH'}")
        ok &= good
    print("match" if ok else "MISMATCH")
    return 0 if ok else 1


def train(d, threads, steps=None, compute=None, heads=4, report_every=50):
    """Trains from DIR's initial weights on DIR's batches with tessel's optimizer (optax's formulas: clip
    to global norm 1 by g / norm * 1 when norm >= 1, then AdamW b1 0.9, b2 0.999, eps 1e-8, decay 0.01,
    u = -lr * (mu_hat / (sqrt(nu_hat) + eps) + decay * p)) in float32; prints both losses and the
    throughput (real characters per second of forward, backward and update, as char_lm reports)."""
    torch.set_num_threads(threads)
    t = read_dir(d)
    p = {n: torch.tensor(t["init." + n].copy(), requires_grad=True) for n in PARAM_NAMES}
    mu = {n: torch.zeros_like(v) for n, v in p.items()}
    nu = {n: torch.zeros_like(v) for n, v in p.items()}
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, 0.01
    n_steps = 0
    while ("step.%d.inputs" % n_steps) in t and (steps is None or n_steps < steps):
        n_steps += 1
    seconds, chars, rows = 0.0, 0, []
    for g in range(n_steps):
        pre = "step.%d." % g
        inputs = torch.tensor(t[pre + "inputs"].astype(np.int64))
        targets = torch.tensor(t[pre + "targets"].astype(np.int64))
        mask = torch.tensor(t[pre + "mask"])
        lr = float(t[pre + "lr"].reshape(-1)[0])
        t0 = time.perf_counter()
        loss = loss_of(p, inputs, targets, mask, heads, compute)
        grads = torch.autograd.grad(loss, [p[n] for n in PARAM_NAMES])
        with torch.no_grad():
            norm = torch.sqrt(sum((gr * gr).sum() for gr in grads))
            scale = 1.0 if norm < 1.0 else 1.0 / norm
            c = g + 1
            for n, gr in zip(PARAM_NAMES, grads):
                gr = gr * scale
                mu[n].mul_(b1).add_(gr, alpha=1 - b1)
                nu[n].mul_(b2).addcmul_(gr, gr, value=1 - b2)
                direction = (mu[n] / (1 - b1 ** c)) / (torch.sqrt(nu[n] / (1 - b2 ** c)) + eps)
                p[n].add_(-(direction + wd * p[n]) * lr)
        if g >= 5:  # the first steps fault pages in and fill caches (tessel's figure counts every step)
            seconds += time.perf_counter() - t0
            chars += int(mask.sum())
        ours = float(t[pre + "loss"].reshape(-1)[0]) if (pre + "loss") in t else float("nan")
        rows.append((g + 1, ours, loss.item()))
        if (g + 1) % report_every == 0 or g + 1 == n_steps:
            print(f"step {g + 1:5d}  tessel {ours:.5f}  torch {loss.item():.5f}  rel {abs(ours - loss.item()) / loss.item():.2e}",
                  flush=True)
    print(f"torch {torch.__version__}, {threads} threads, precision {'bf16' if compute else 'f32'}: "
          f"{chars / seconds:.0f} tokens/s over steps 6..{n_steps} ({seconds:.1f} s)")
    return rows


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "train":
        import argparse
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("dir")
        ap.add_argument("--threads", type=int, default=2)
        ap.add_argument("--steps", type=int, default=None)
        ap.add_argument("--precision", default="f32", choices=["f32", "bf16"])
        a = ap.parse_args()
        if torch is None:
            print("torch is not importable by " + sys.executable)
            sys.exit(2)
        train(a.dir, a.threads, a.steps, torch.bfloat16 if a.precision == "bf16" else None)
        sys.exit(0)
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
