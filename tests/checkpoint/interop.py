"""Interop of tessel's checkpoints with the Python tools, every value compared bit for bit.

  1. 2 processes save a fully sharded checkpoint and consolidate it (sharded_processes.cpp `export`);
     safetensors' own reader loads the file (safetensors.numpy).
  2. Orbax loads it with its safetensors layout onto a JAX mesh of 8 host devices, each tensor whose first
     dimension 8 divides split along it (the others replicated): every array on the sharding asked for.
  3. PyTorch loads it (safetensors.torch.load_file).
  4. PyTorch writes parameters (safetensors.torch.save_file) and tessel reads them into its parameter tree
     (sharded_processes.cpp `import`).
Without PyTorch in this Python (scripts/setup --peers installs it; CI has only the JAX side) checks 3 and 4
are skipped, and say so.

usage: interop.py MPIEXEC EXE WORKDIR
"""
import os
import shutil
import subprocess
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from safetensors import numpy as st_numpy  # noqa: E402
from orbax.checkpoint import v1 as ocp  # noqa: E402


def bits(a):
    """The bytes of an array as unsigned integers of its size, so that NaNs and -0 compare by their bits."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def expected_of(directory, dtypes):
    """tessel's .npy files (bf16 written as its bits) as arrays of the checkpoint's dtypes."""
    out = {}
    for name, dtype in dtypes.items():
        a = np.load(os.path.join(directory, name + ".npy"))
        out[name] = a.view(ml_dtypes.bfloat16) if dtype == ml_dtypes.bfloat16 else a
    return out


def compare(who, got, want):
    if sorted(got) != sorted(want):
        sys.exit(f"FAIL ({who}): tensors {sorted(got)}, expected {sorted(want)}")
    for name, w in want.items():
        g = np.asarray(got[name])
        if g.dtype != w.dtype or g.shape != w.shape:
            sys.exit(f"FAIL ({who}): {name} is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
        if not np.array_equal(bits(g), bits(w)):
            sys.exit(f"FAIL ({who}): {name} differs in {np.count_nonzero(bits(g) != bits(w))} elements")
    print(f"ok ({who}): {len(want)} tensors equal bit for bit")


def main():
    mpiexec, exe, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([mpiexec, "-np", "2", "--oversubscribe", exe, "export", work], check=True)
    path = os.path.join(work, "tessel.safetensors")

    # 1. safetensors' reader.
    plain = st_numpy.load_file(path)
    want = expected_of(os.path.join(work, "expected"), {n: a.dtype for n, a in plain.items()})
    compare("safetensors.numpy reads tessel's file", plain, want)

    # 2. Orbax, onto 8 devices.
    devices = jax.devices()
    if len(devices) != 8:
        sys.exit(f"FAIL: JAX sees {len(devices)} devices, expected 8 (XLA_FLAGS)")
    mesh = jax.sharding.Mesh(np.array(devices), ("data",))
    P = jax.sharding.PartitionSpec
    shardings = {n: jax.sharding.NamedSharding(mesh, P("data") if a.ndim and a.shape[0] % 8 == 0 else P())
                 for n, a in want.items()}
    abstract = {n: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=shardings[n]) for n, a in want.items()}
    context = ocp.Context()
    context.checkpoint_layout = ocp.options.CheckpointLayout.SAFETENSORS
    with context:
        restored = ocp.load(path, abstract_state=abstract)
    for n, a in restored.items():
        if a.sharding != shardings[n] or len(a.addressable_shards) != 8:
            sys.exit(f"FAIL (Orbax): {n} came back on {a.sharding}, asked for {shardings[n]}")
    split = sum(1 for s in shardings.values() if s.spec == P("data"))
    compare(f"Orbax's safetensors layout loads tessel's file onto 8 devices, {split} tensors split", restored, want)

    try:
        import torch
        from safetensors import torch as st_torch
    except ImportError:
        print("skipped: PyTorch is not installed in this Python (scripts/setup --peers installs it), so it neither "
              "reads tessel's file nor writes one for tessel")
        return

    # 3. PyTorch reads tessel's file.
    loaded = st_torch.load_file(path)
    as_numpy = {n: (t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 else t.numpy())
                for n, t in loaded.items()}
    compare(f"PyTorch {torch.__version__} reads tessel's file", as_numpy, want)

    # 4. tessel reads PyTorch's file into its parameter tree.
    g = torch.Generator().manual_seed(20261207)
    params = {"params.w1": torch.randn(64, 32, generator=g), "params.b1": torch.randn(32, generator=g),
              "params.w2": torch.randn(32, 48, generator=g).to(torch.bfloat16), "params.b2": torch.randn(48, generator=g)}
    torch_file = os.path.join(work, "torch.safetensors")
    st_torch.save_file(params, torch_file, metadata={"written_by": "torch " + torch.__version__})
    reference = os.path.join(work, "torch_expected")
    os.makedirs(reference)
    for n, t in params.items():
        a = t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()
        np.save(os.path.join(reference, n + ".npy"), a)
    subprocess.run([mpiexec, "-np", "1", exe, "import", torch_file, reference], check=True)
    print(f"ok (tessel reads PyTorch {torch.__version__}'s save_file)")


if __name__ == "__main__":
    main()
