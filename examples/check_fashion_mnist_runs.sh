#!/usr/bin/env bash
# The Fashion-MNIST example checks its flags and output paths first, and stops a diverging run:
#   bash check_fashion_mnist_runs.sh EXE WORK CASE
# CASE: bad_flags, nan_learning_rate, nonfinite_loss, bad_trace_path (examples/CMakeLists.txt registers one
# test per case). Each run is a few steps
# of batch 32; a refusal must come before training (nothing on stdout) with exit status 2 and a message on
# stderr naming the flag or file.
set -u
exe=$1 work=$2 case=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
small=(--epochs 1 --steps 2 --batch-size 32)

fail() {
  echo "FAIL ($case): $*" >&2
  exit 1
}
# run NAME STATUS ARGS...: runs the example with ARGS (stdout in NAME.out, stderr in NAME.err); its exit
# status must be STATUS (a number, or "nonzero").
run() {
  local name=$1 want=$2
  shift 2
  "$exe" "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  echo "--- $name: exit $rc: $*"
  cat "$name.out" "$name.err"
  if [ "$want" = nonzero ]; then
    [ $rc -ne 0 ] || fail "$name: exit 0, expected a failure"
  else
    [ $rc -eq "$want" ] || fail "$name: exit $rc, expected $want"
  fi
}
# says NAME TEXT...: NAME's stderr holds each TEXT.
says() {
  local name=$1
  shift
  for text in "$@"; do grep -qF -- "$text" "$name.err" || fail "$name: stderr lacks '$text'"; done
}
# refused NAME: nothing was trained (stdout is empty).
refused() { [ ! -s "$1.out" ] || fail "$1: it trained before refusing (stdout is not empty)"; }
summary() { grep -F '"test_accuracy"' "$1.out" >/dev/null || fail "$1: no JSON summary"; }

case $case in
bad_flags)
  # Each bad value alone: exit 2, before anything else, naming the flag, the value and what is allowed.
  i=0
  while IFS='|' read -r flag value allowed; do
    i=$((i + 1))
    run bad$i 2 "${small[@]}" "$flag" "$value"
    refused bad$i
    says bad$i "$flag '$value'" "$allowed"
  done <<'EOF'
--model|resnet|expected mlp or cnn
--precision|f16|expected f32 or bf16
--epochs|1.5|from 1 to 100000
--epochs|0|from 1 to 100000
--epochs|10x|from 1 to 100000
--batch-size|100|expected 32, 64, 128 or 256
--steps|-1|from 0 (the whole epoch) to 2147483647
--learning-rate|1e-3x|finite number greater than 0
--learning-rate|0|finite number greater than 0
--seed|-1|from 0 to 4294967295
--seed|4294967296|from 0 to 4294967295
--seed|1.5|from 0 to 4294967295
--save-every|1.5|from 0 (only at the end of each epoch)
--keep|0|from 1 to 2147483647
EOF
  # Every problem of one command line is reported, each on its own line.
  run several 2 --model rnn --precision f64 --epochs -2 --batch-size 7 --frobnicate
  refused several
  says several "--model 'rnn'" "--precision 'f64'" "--epochs '-2'" "--batch-size '7'" "unknown option --frobnicate"
  run no_value 2 "${small[@]}" --trace
  says no_value "--trace needs a value"
  run no_dir 2 "${small[@]}" --resume
  says no_dir "--resume needs --checkpoint-dir"
  # --flag=value is the same as --flag value.
  run equals 0 --epochs=1 --steps=2 --batch-size=32 --seed=3 --learning-rate=0.002
  summary equals
  grep -qF '"batch_size": 32, "epochs": 1, "steps": 2,' equals.out || fail "equals: the summary does not show the flags given with ="
  ;;
nan_learning_rate)
  for value in nan inf -inf 1e39; do
    run lr_$value 2 "${small[@]}" --learning-rate "$value"
    refused lr_$value
    says lr_$value "--learning-rate '$value'" "finite number greater than 0"
  done
  ;;
nonfinite_loss)
  # A learning rate of 1e30 is accepted but diverges: the loss of step 2 is NaN. Training stops there
  # (exit 1), the message names the step, and no checkpoint of step 2 or later exists.
  run diverges 1 --epochs 1 --steps 6 --batch-size 32 --learning-rate 1e30 --checkpoint-dir ckpt --save-every 1
  says diverges "the training loss is NaN at step 2 of 6" "nothing of that step saved" "--learning-rate"
  grep -qF '"test_accuracy"' diverges.out && fail "diverges: it printed a summary"
  [ -f ckpt/ckpt-000000000001.safetensors ] || fail "diverges: the checkpoint of step 1 is missing"
  for step in 2 3 4 5 6; do
    [ ! -e ckpt/ckpt-00000000000$step.safetensors ] || fail "diverges: a checkpoint of step $step was saved"
  done
  # A state holding an infinity is never saved either (1e10: the Adam state overflows at step 2).
  run overflows 1 --epochs 1 --steps 6 --batch-size 32 --learning-rate 1e10 --checkpoint-dir ckpt2 --save-every 1
  says overflows "step 2 left a NaN or an infinity in" "no checkpoint of it saved"
  [ ! -e ckpt2/ckpt-000000000002.safetensors ] || fail "overflows: the checkpoint of step 2 was saved"
  ;;
bad_trace_path)
  # Checked at start-up: no training first.
  run trace 2 "${small[@]}" --trace missing/trace.json
  refused trace
  says trace "--trace 'missing/trace.json'" "does not exist"
  mkdir -p adir
  run trace_dir 2 "${small[@]}" --trace adir
  refused trace_dir
  says trace_dir "--trace 'adir'" "is a directory"
  run curve 2 "${small[@]}" --curve missing/curve
  refused curve
  says curve "--curve 'missing/curve'" "does not exist"
  touch afile
  run ckpt 2 "${small[@]}" --checkpoint-dir afile/sub
  refused ckpt
  says ckpt "--checkpoint-dir 'afile/sub'"
  [ ! -e missing ] || fail "a refused run created 'missing'"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($case)"
