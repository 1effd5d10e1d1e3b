#!/usr/bin/env bash
# char_lm --devices N (data parallel on a mesh ("data", N) of host devices) trains as one device does:
#   check_char_lm_devices.sh CHAR_LM WORK_DIR
# The same 12 steps on 1, 2 and 4 devices, each exporting its batches and losses (--export). The devices
# see the same batches; step 0 (the same weights) has the 1-device loss to 1e-6 relative, the later steps
# and the final validation loss to 1e-5 (the devices sum in another order; on an AMD EPYC the 12 steps
# stayed within 2e-7). The 2-device run repeated ends with the same parameters' digest (the
# collectives reduce in a fixed order: the result does not depend on the threads' timing).
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
steps=12
args=(--steps $steps --warmup 2 --eval-every $steps --sample-every 0 --seed 3)

run() {  # run NAME DEVICES [more flags]
  local name=$1 devices=$2
  shift 2
  "$exe" "${args[@]}" --devices "$devices" "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; echo "run $name failed"; exit 1; }
  if ! grep -q "\"devices\": $devices," "$work/$name.log"; then
    cat "$work/$name.log"; echo "run $name does not report $devices devices"; exit 1
  fi
}
field() { grep '^{"precision"' "$1" | sed -e "s/.*\"$2\": \"*\([0-9a-f.]*\).*/\1/"; }
loss() { od -An -tf4 -v "$1" | tr -d ' '; }
# close A B TOLERANCE: |A - B| <= TOLERANCE * |A|
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; exit !(d <= t * m) }'; }

run d1 1 --export "$work/d1"
run d2 2 --export "$work/d2"
run d4 4 --export "$work/d4"
run d2_again 2

for d in d2 d4; do
  for ((g = 0; g < steps; g++)); do
    for t in inputs targets mask lr; do
      cmp -s "$work/d1/step.$g.$t.bin" "$work/$d/step.$g.$t.bin" || { echo "MISMATCH: $d's batch $t of step $g differs"; exit 1; }
    done
    a=$(loss "$work/d1/step.$g.loss.bin")
    b=$(loss "$work/$d/step.$g.loss.bin")
    tolerance=$([ "$g" -eq 0 ] && echo 1e-6 || echo 1e-5)
    close "$a" "$b" "$tolerance" || { echo "MISMATCH: step $g's loss on 1 device $a, on $d $b (tolerance $tolerance)"; exit 1; }
  done
  a=$(field "$work/d1.log" validation_bits)
  b=$(field "$work/$d.log" validation_bits)
  close "$a" "$b" 1e-5 || { echo "MISMATCH: validation bits on 1 device $a, on $d $b"; exit 1; }
  echo "$d: step 0 loss $(loss "$work/$d/step.0.loss.bin") (1 device $(loss "$work/d1/step.0.loss.bin")), step $((steps - 1)) loss" \
       "$(loss "$work/$d/step.$((steps - 1)).loss.bin") (1 device $(loss "$work/d1/step.$((steps - 1)).loss.bin")), validation $b (1 device $a)"
done
a=$(field "$work/d2.log" params_digest)
b=$(field "$work/d2_again.log" params_digest)
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "MISMATCH: two 2-device runs end with different parameters ($a, $b)"; exit 1
fi
echo "the devices train as one device; a 2-device run repeated is bit-identical"
