#!/usr/bin/env bash
# char_lm_pipelined's checkpoints save and resume a pipelined run, and a run over processes writes the
# one-process run's, bit for bit:
#   check_char_lm_pipelined.sh CHAR_LM_PIPELINED WORK_DIR MPIEXEC
# Run a: 6 steps over 2 stages (1F1B) as threads, checkpoints at steps 3 and 6. Run b: a's checkpoint of
# step 3 alone in a new directory, resumed to step 6. Run c: a under mpirun -np 2, a stage per process.
# b's and c's checkpoints of step 6 must be a's, byte for byte (parameters, optimizer state, data
# position, checksum); c's of step 3 too.
set -euo pipefail
exe=$1
work=$2
mpiexec=$3
rm -rf "$work"
mkdir -p "$work/a" "$work/b" "$work/c"
args=(--pipeline 2 --schedule 1f1b --steps 6 --report-every 3 --save-every 3)
"$exe" "${args[@]}" --checkpoint-dir "$work/a" >"$work/a.log" 2>&1 || { cat "$work/a.log"; echo "run a failed"; exit 1; }
cp "$work/a/ckpt-000000000003.safetensors" "$work/b/"
"$exe" "${args[@]}" --checkpoint-dir "$work/b" --resume >"$work/b.log" 2>&1 || { cat "$work/b.log"; echo "run b failed"; exit 1; }
grep -q "resumed from .*ckpt-000000000003.safetensors (step 3)" "$work/b.log" || { cat "$work/b.log"; echo "run b did not resume"; exit 1; }
if ! cmp "$work/a/ckpt-000000000006.safetensors" "$work/b/ckpt-000000000006.safetensors"; then
  echo "FAIL: the resumed run's checkpoint of step 6 differs from the uninterrupted run's"
  exit 1
fi
timeout 200 "$mpiexec" -np 2 --oversubscribe "$exe" "${args[@]}" --checkpoint-dir "$work/c" >"$work/c.log" 2>&1 ||
  { cat "$work/c.log"; echo "run c (mpirun -np 2) failed"; exit 1; }
for step in 3 6; do
  if ! cmp "$work/a/ckpt-00000000000$step.safetensors" "$work/c/ckpt-00000000000$step.safetensors"; then
    echo "FAIL: over 2 processes the checkpoint of step $step differs from the one-process run's"
    exit 1
  fi
done
echo "PASS: resumed at step 3, the checkpoint of step 6 is the uninterrupted run's; over 2 processes both checkpoints are the one-process run's"
