#!/usr/bin/env bash
# char_lm refuses what it cannot train on, before training, with exit status 2 and the reason; and says
# "null" for what a run could not measure:
#   check_char_lm_input.sh CHAR_LM WORK_DIR
# - a data directory with no records (it crashed here once, dereferencing the empty epoch's batch);
# - a prompt and a sample length that do not fit the model's 256 positions (it sampled nothing, silently);
# - bad flags: each problem named, an unknown flag as unknown;
# - a corpus too small to hold out validation records: the run trains, and validation_bits is null, not 0.
set -u
exe=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# run NAME STATUS ARGS...
run() {
  local name=$1 want=$2
  shift 2
  "$exe" "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  echo "--- $name: exit $rc: $*"
  cat "$name.out" "$name.err"
  [ $rc -eq "$want" ] || fail "$name: exit $rc, expected $want"
}
says() {
  local name=$1
  shift
  for text in "$@"; do grep -qF -- "$text" "$name.err" || fail "$name: stderr lacks '$text'"; done
}
quick=(--steps 2 --warmup 1 --eval-every 2 --sample-every 0)

mkdir -p empty
printf '\n%%\n\n' >empty/nothing
run empty 2 "${quick[@]}" --data-dir empty
says empty "'empty' holds no fortune records for training" "give --data-dir a directory of fortune files"

long=$(printf 'x%.0s' $(seq 200))
run prompt 2 "${quick[@]}" --sample-every 1 --prompt "$long" --sample-length 100
says prompt "--prompt of 200 bytes and --sample-length 100 need 301 positions" "give at most 255 bytes"
[ ! -s prompt.out ] || fail "prompt: it loaded or trained before refusing"

run flags 2 --steps 0 --precision f16 --frobnicate --stesp 3
says flags "--steps '0' is out of range; expected a whole number from 1 to 100000000" \
  "--precision 'f16' is not allowed; expected f32 or bf16" "unknown flag --frobnicate" "unknown flag --stesp (did you mean --steps?)"

mkdir -p tiny
for i in $(seq 8); do printf 'The fortune number %d says little.\n%%\n' "$i"; done >tiny/fortunes
run tiny 0 "${quick[@]}" --data-dir tiny
grep -qF '0 validation chunks' tiny.out || fail "tiny: the fixture has validation records (the split changed): pick other texts"
grep -qF 'validation null bits/char' tiny.out || fail "tiny: the progress line shows a validation figure without validation records"
grep -qF '"validation_bits": null' tiny.out || fail "tiny: validation_bits is not null without validation records"
echo "PASS"
