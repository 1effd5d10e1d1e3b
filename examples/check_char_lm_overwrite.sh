#!/usr/bin/env bash
# char_lm refuses a new run into a checkpoint directory that holds checkpoints, and --overwrite deletes
# them (naming each) and starts the new run; --resume-or-start starts a run where there is none and
# resumes it the second time:
#   check_char_lm_overwrite.sh CHAR_LM WORK_DIR
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
args=(--steps 2 --warmup 1 --eval-every 0 --sample-every 0 --checkpoint-dir "$work")

"$exe" "${args[@]}" >"$work.first.log" 2>&1 || { cat "$work.first.log"; echo "the first run failed"; exit 1; }
[ -e "$work/ckpt-000000000002.safetensors" ] || { ls "$work"; echo "the first run left no checkpoint of step 2"; exit 1; }

status=0
"$exe" "${args[@]}" >"$work.refused.log" 2>&1 || status=$?
if [ "$status" -ne 2 ] || ! grep -q "$work holds checkpoints of another run:" "$work.refused.log" ||
  ! grep -q "fix: --resume to continue that run, --overwrite" "$work.refused.log"; then
  cat "$work.refused.log"; echo "a second new run into $work was not refused (status $status)"; exit 1
fi

"$exe" "${args[@]}" --overwrite >"$work.overwrite.log" 2>&1 || { cat "$work.overwrite.log"; echo "--overwrite failed"; exit 1; }
grep -q "^char_lm: --overwrite: deleted $work/ckpt-000000000002.safetensors: step 2 of run [0-9a-f]\{16\} (--precision f32 --seed 0 --steps 2" "$work.overwrite.log" ||
  { cat "$work.overwrite.log"; echo "--overwrite did not name the file it deleted"; exit 1; }
[ -e "$work/ckpt-000000000002.safetensors" ] || { echo "the overwriting run left no checkpoint"; exit 1; }

status=0
"$exe" "${args[@]}" --overwrite --resume >"$work.both.log" 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "give one of them" "$work.both.log" || { cat "$work.both.log"; echo "--overwrite --resume was not refused"; exit 1; }

rm -rf "$work.fresh"
again=(--steps 2 --warmup 1 --eval-every 0 --sample-every 0 --checkpoint-dir "$work.fresh" --resume-or-start)
"$exe" "${again[@]}" >"$work.start.log" 2>&1 && grep -q "no intact checkpoint in $work.fresh: starting a new run" "$work.start.log" ||
  { cat "$work.start.log"; echo "--resume-or-start did not start a new run in an empty directory"; exit 1; }
"$exe" "${again[@]}" >"$work.again.log" 2>&1 && grep -q "^resumed from $work.fresh/ckpt-000000000002.safetensors" "$work.again.log" ||
  { cat "$work.again.log"; echo "--resume-or-start did not resume the run it started"; exit 1; }
echo "refused, overwritten, --overwrite --resume refused, --resume-or-start started then resumed"
