#!/usr/bin/env bash
# char_lm_pipelined's checkpoints save and resume a pipelined run, bit for bit:
#   check_char_lm_pipelined.sh CHAR_LM_PIPELINED WORK_DIR
# Run a: 6 steps over 2 stages (1F1B), checkpoints at steps 3 and 6. Run b: a's checkpoint of step 3 alone
# in a new directory, resumed to step 6. b's checkpoint of step 6 must be a's, byte for byte (parameters,
# optimizer state, data position, checksum).
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
mkdir -p "$work/a" "$work/b"
args=(--pipeline 2 --schedule 1f1b --steps 6 --report-every 3 --save-every 3)
"$exe" "${args[@]}" --checkpoint-dir "$work/a" >"$work/a.log" 2>&1 || { cat "$work/a.log"; echo "run a failed"; exit 1; }
cp "$work/a/ckpt-000000000003.safetensors" "$work/b/"
"$exe" "${args[@]}" --checkpoint-dir "$work/b" --resume >"$work/b.log" 2>&1 || { cat "$work/b.log"; echo "run b failed"; exit 1; }
grep -q "resumed from .*ckpt-000000000003.safetensors (step 3)" "$work/b.log" || { cat "$work/b.log"; echo "run b did not resume"; exit 1; }
if ! cmp "$work/a/ckpt-000000000006.safetensors" "$work/b/ckpt-000000000006.safetensors"; then
  echo "FAIL: the resumed run's checkpoint of step 6 differs from the uninterrupted run's"
  exit 1
fi
echo "PASS: resumed at step 3, the checkpoint of step 6 is the uninterrupted run's"
