#!/usr/bin/python3
"""PyTorch's side of the training comparisons (Debian's python3-torch 1.13, eager, on the CPU).

  bench/torch_train.py step [--threads N]            one 784-256-10 MLP Adam step at batch 128
  bench/torch_train.py cnn-epoch [--threads N] [--data-dir DIR] [--epochs E] [--steps S]
                                                     Fashion-MNIST epochs of the example's CNN

Prints one JSON line. The models, batch, optimizer and data are the ones examples/fashion_mnist and
bench/train_step.cpp use. Run it with OPENBLAS_CORETYPE=Cooperlake (Debian's OpenBLAS misdetects this
CPU) for the corrected figure, or without for the default install; bench/compare_torch does both.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp_step(threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.rand(128, 784)
    y = torch.arange(128) % 10

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(20):
        step()
    # Blocks of 50 steps: the best (other users only ever add time) and the median (a typical block).
    blocks = []
    for _ in range(15):
        reps = 50
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        blocks.append((time.perf_counter() - t0) / reps)
    blocks.sort()
    return {"what": "mlp_step", "threads": threads, "seconds_per_step": blocks[0],
            "median_seconds_per_step": blocks[len(blocks) // 2]}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class Cnn(nn.Module):
    """conv 3x3x32 (same), relu, maxpool 2, conv 3x3x64 (same), relu, maxpool 2, dense 128, relu, dense 10."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.d1 = nn.Linear(7 * 7 * 64, 128)
        self.d2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.d2(F.relu(self.d1(x.flatten(1))))


def cnn_epochs(threads, data_dir, epochs, batch, max_steps):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    train_x = torch.from_numpy(read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255)
    train_y = torch.from_numpy(read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    test_x = torch.from_numpy(read_idx(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255)
    test_y = torch.from_numpy(read_idx(os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    train_x, test_x = train_x.unsqueeze(1), test_x.unsqueeze(1)
    net = Cnn()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    steps = len(train_x) // batch
    if max_steps > 0:
        steps = min(steps, max_steps)
    seconds = []
    for epoch in range(epochs):
        order = torch.randperm(len(train_x))
        t0 = time.perf_counter()
        for s in range(steps):
            idx = order[s * batch : (s + 1) * batch]
            opt.zero_grad()
            loss = F.cross_entropy(net(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
        seconds.append(time.perf_counter() - t0)
    with torch.no_grad():
        correct = sum(int((net(test_x[i : i + 1000]).argmax(1) == test_y[i : i + 1000]).sum()) for i in range(0, 10000, 1000))
    return {"what": "cnn_epoch", "threads": threads, "batch": batch, "epochs": epochs, "steps": steps, "epoch_seconds": seconds,
            "test_accuracy": correct / 10000}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["step", "cnn-epoch"])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--data-dir", default=os.environ.get("TESSEL_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=0, help="stop each epoch after N steps (0: the whole epoch)")
    a = p.parse_args()
    result = mlp_step(a.threads) if a.what == "step" else cnn_epochs(a.threads, a.data_dir, a.epochs, a.batch_size, a.steps)
    result["openblas_coretype"] = os.environ.get("OPENBLAS_CORETYPE", "")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
