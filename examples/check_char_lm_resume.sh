#!/usr/bin/env bash
# char_lm --resume after a SIGKILL ends bit-identical to an uninterrupted run:
#   check_char_lm_resume.sh CHAR_LM WORK_DIR
# Run a: 12 steps straight through. Run b: the same flags with checkpoints every 4 steps, killed with
# SIGKILL as soon as its checkpoint of step 4 is on disk (before its last step), then resumed with
# --resume. Both must end with the same parameters' digest (FNV-1a of every byte) and the same
# validation loss, printed to the last digit, and the same curve: b's CSV (appended to by the resumed run,
# the last line of each step kept, as its SVG draws it) has a's lines, and b's SVG is a's.
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
args=(--steps 12 --warmup 2 --eval-every 6 --sample-every 0 --seed 3)

summary() { grep '^{"precision"' "$1" | sed -e 's/.*"validation_bits": \([0-9.]*\).*"params_digest": "\([0-9a-f]*\)".*/\1 \2/'; }

"$exe" "${args[@]}" --curve "$work/a" >"$work/a.log" 2>&1 || { cat "$work/a.log"; echo "run a failed"; exit 1; }

"$exe" "${args[@]}" --curve "$work/b" --checkpoint-dir "$work/b" --save-every 4 --keep 10 >"$work/b1.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [ -e "$work/b/ckpt-000000000004.safetensors" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" && status=0 || status=$?
if [ "$status" -ne 137 ] || [ -e "$work/b/ckpt-000000000012.safetensors" ] || grep -q '^{"precision"' "$work/b1.log"; then
  cat "$work/b1.log"
  echo "run b was not killed before its end (status $status): the test did not interrupt it"
  exit 1
fi
echo "run b killed by SIGKILL; checkpoints left: $(ls "$work/b" | tr '\n' ' ')"

"$exe" "${args[@]}" --curve "$work/b" --checkpoint-dir "$work/b" --save-every 4 --keep 10 --resume >"$work/b2.log" 2>&1 ||
  { cat "$work/b2.log"; echo "the resumed run failed"; exit 1; }
grep '^resumed from' "$work/b2.log"
a=$(summary "$work/a.log")
b=$(summary "$work/b2.log")
echo "uninterrupted: validation bits, params digest = $a"
echo "killed+resumed: validation bits, params digest = $b"
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "MISMATCH: the resumed run is not bit-identical"
  exit 1
fi
last_per_step() { awk -F, 'NR > 1 { line[$1] = $0 } END { for (s in line) print line[s] }' "$1" | sort -n; }
if [ "$(last_per_step "$work/a.csv")" != "$(last_per_step "$work/b.csv")" ] || [ "$(wc -l <"$work/a.csv")" -ne 3 ] ||
   ! cmp -s "$work/a.svg" "$work/b.svg"; then
  echo "MISMATCH: the curves differ"; cat "$work/a.csv" "$work/b.csv"
  exit 1
fi
echo "bit-identical, the same curve"
