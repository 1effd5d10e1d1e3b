#!/usr/bin/env bash
# tessel's collectives against OpenMPI's MPI_Allreduce on 2 ranks and the machine's copy bandwidth, in one
# run, with the alpha-beta prediction from alpha and beta measured in the same run (SHARDING.md §5); then
# the all-reduce between 2 processes against MPI_Allreduce.
#   bench/collectives.sh [BUILD_DIR]   (default build/bench: cmake -DTESSEL_BUILD_BENCHMARKS=ON)
set -euo pipefail
build=${1:-build/bench}
lscpu | grep 'Model name' || true
uptime
json=$(mktemp)
"$build/bench/bench_collectives" --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json >/dev/null
mpi=""
if [ -x "$build/bench/bench_mpi_allreduce" ]; then
  mpi=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        mpirun --oversubscribe -np 2 "$build/bench/bench_mpi_allreduce")
fi
python3 - "$json" "$mpi" <<'PY'
import json, re, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
mpi = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"bytes (\d+) time_us \S+ algbw_GBps \S+ busbw_GBps (\S+)", sys.argv[2])}
copy = {int(r["bytes"]): r["copy_GBps"] for r in runs if r["name"].startswith("BM_copy")}
coll = []
for r in runs:
    m = re.match(r"BM_collective<(\d+), (.*?), op::(\w+)>", r["name"])
    if m: coll.append((m.group(3), int(r["devices"]), int(r["bytes"]), r["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[r["time_unit"]], r["busbw_GBps"]))
# alpha: the smallest all-reduce per device count is latency alone, 2(N-1) alpha; beta: the largest copy.
alpha = {n: t / (2 * (n - 1)) for op, n, s, t, bw in coll if op == "all_reduce" and s <= 16}
beta = 1 / (copy[max(copy)] * 1e9)
print(f"alpha (measured, 4-byte all-reduce): " + ", ".join(f"{n} devices {a*1e6:.2f} us" for n, a in sorted(alpha.items())) + f"; beta: 1 / {1/beta/1e9:.2f} GB/s (memcpy of {max(copy)>>20} MiB)")
print(f"{'collective':15} {'dev':>3} {'bytes':>10} {'time us':>10} {'busbw GB/s':>10} {'copy GB/s':>9} {'bus/copy':>8} {'MPI busbw':>9} {'vs MPI':>6} {'alpha-beta us':>13} {'t/pred':>6}")
for op, n, s, t, bw in coll:
    if s <= 16: continue
    a = alpha[n]
    pred = (2 * (n - 1) * a + 2 * (n - 1) / n * s * beta) if op == "all_reduce" else ((n - 1) * a + (n - 1) / n * s * beta)
    c = copy.get(s, 0)
    m = mpi.get(s) if op == "all_reduce" and n == 2 else None
    print(f"{op:15} {n:>3} {s:>10} {t*1e6:>10.1f} {bw:>10.2f} {c:>9.2f} {bw/c if c else 0:>8.2f} {m if m else 0:>9.2f} {bw/m if m else 0:>6.2f} {pred*1e6:>13.1f} {t/pred:>6.2f}")
PY
rm -f "$json"
# Between processes: the all-reduce over a mesh axis that spans 2 processes against MPI_Allreduce.
if [ -x "$build/bench/bench_processes_allreduce" ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
    mpirun --oversubscribe -np 2 "$build/bench/bench_processes_allreduce"
fi
