#!/usr/bin/env bash
# The Fashion-MNIST example refuses to lose or mix a run, and checks its flags and output paths first:
#   bash check_fashion_mnist_runs.sh EXE WORK CASE
# CASE: bad_flags, nan_learning_rate, nonfinite_loss, check_finite, bad_trace_path, fresh_run_refuses, wrong_run_resume,
# two_writers, all_damaged, tfrecord, devices, threads, processes (with the mpirun path as 4th argument) (examples/CMakeLists.txt registers one test per case). Each run is a few steps
# of batch 32; a refusal must come before training (nothing on stdout) with exit status 2 and a message on
# stderr naming the flag, file or process.
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
launcher=()  # mpirun and its flags, for the runs over processes
run() {
  local name=$1 want=$2
  shift 2
  "${launcher[@]}" "$exe" "$@" >"$name.out" 2>"$name.err"
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
# Do two checkpoints hold the same tensor bytes (what follows a safetensors file's 8-byte length and JSON
# header)? Both files must exist.
same_tensors() {
  local f n
  for f in "$1" "$2"; do [ -s "$f" ] || fail "no checkpoint $f"; done
  tensor_bytes() {
    n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    tail -c +$((9 + n)) "$1"
  }
  cmp <(tensor_bytes "$1") <(tensor_bytes "$2")
}
run_id() { sed -n 's/.*"run": "\([0-9a-f]*\)".*/\1/p' "$1.out"; }

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
--devices|3|expected 1, 2 or 4
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
  says several "--model 'rnn'" "--precision 'f64'" "--epochs '-2'" "--batch-size '7'" "unknown flag --frobnicate"
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
check_finite)
  # --check-finite names the first kernel that stored a non-finite value, not only the loss: with a learning
  # rate of 1e30 the weights reach 1e30 after step 1, and step 2's second dense layer overflows (to -inf here).
  run checked 1 --epochs 1 --steps 6 --batch-size 32 --learning-rate 1e30 --check-finite --checkpoint-dir ckpt --save-every 1
  says checked "--check-finite: the train step of step 2 of 6 (epoch 1, batch 2): kernel " "(contraction dot_general+" \
    "f32[32," "inf at element" "nothing of that step saved"
  grep -qF "the training loss is" checked.err && fail "checked: the loss was reported, not the kernel"
  [ ! -e ckpt/ckpt-000000000002.safetensors ] || fail "checked: the checkpoint of step 2 was saved"
  # A finite run with the check trains as usual; the flag takes no value.
  run finite 0 "${small[@]}" --check-finite
  summary finite
  run valued 2 "${small[@]}" --check-finite=yes
  says valued "--check-finite takes no value (given 'yes')"
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
fresh_run_refuses)
  run a 0 "${small[@]}" --seed 1 --checkpoint-dir ckpt
  run_a=$(run_id a)
  # A new run into a directory holding another run's checkpoints: refused, naming them.
  run b 2 "${small[@]}" --seed 1 --checkpoint-dir ckpt
  refused b
  says b "ckpt holds checkpoints of another run" "ckpt/ckpt-000000000002.safetensors: step 2 of run $run_a" "--overwrite"
  # --overwrite deletes them first: afterwards the directory holds only the new run's files.
  run c 0 "${small[@]}" --seed 2 --checkpoint-dir ckpt --save-every 1 --overwrite
  says c "--overwrite: deleted ckpt/ckpt-000000000002.safetensors: step 2 of run $run_a"
  run_c=$(run_id c)
  [ -n "$run_c" ] && [ "$run_c" != "$run_a" ] || fail "c: run id '$run_c', a's '$run_a'"
  for f in ckpt/ckpt-*.safetensors; do
    grep -aqF "\"tessel.run\":\"$run_c\"" "$f" || fail "$f is not of run c"
  done
  ;;
wrong_run_resume)
  run a 0 "${small[@]}" --seed 1 --checkpoint-dir ckpt --save-every 1
  # Resuming with flags that shape another run: refused, naming each flag that differs.
  run seed 2 "${small[@]}" --seed 0 --checkpoint-dir ckpt --resume
  refused seed
  says seed "cannot resume: ckpt/ckpt-000000000002.safetensors" "--seed: the run has 1, these flags give 0" "--seed 1"
  run several 2 --epochs 2 --steps 3 --batch-size 32 --seed 1 --learning-rate 0.01 --checkpoint-dir ckpt --resume
  says several "--epochs: the run has 1, these flags give 2" "--steps: the run has 2, these flags give 3" \
    "--learning-rate: the run has 0.001, these flags give 0.01"
  run model 2 "${small[@]}" --seed 1 --model cnn --checkpoint-dir ckpt --resume
  says model "--model: the run has mlp, these flags give cnn"
  # The run's own flags resume it.
  run same 0 "${small[@]}" --seed 1 --checkpoint-dir ckpt --resume
  grep -qF '"resumed_from": 2' same.out || fail "same: did not resume from step 2"
  ;;
two_writers)
  # A is training into ckpt; B, started meanwhile with the same flags, must stop at once, naming A.
  "$exe" --epochs 1 --steps 300 --batch-size 32 --checkpoint-dir ckpt --save-every 100 >a.out 2>a.err &
  a=$!
  for _ in $(seq 200); do
    [ -s ckpt/lock ] && break
    sleep 0.05
  done
  run b 2 --epochs 1 --steps 300 --batch-size 32 --checkpoint-dir ckpt --save-every 100
  refused b
  says b "'ckpt' is in use by another writer (process $a holds 'ckpt/lock')"
  wait $a
  rc=$?
  cat a.out a.err
  [ $rc -eq 0 ] || fail "a: exit $rc"
  summary a
  # A lock left by a process that died does not block: the kernel released it.
  "$exe" --epochs 1 --steps 100000 --batch-size 32 --checkpoint-dir dead >dead.out 2>dead.err &
  d=$!
  for _ in $(seq 200); do
    [ -s dead/lock ] && break
    sleep 0.05
  done
  kill -KILL $d
  wait $d 2>/dev/null
  grep -qx "$d" dead/lock || fail "dead/lock does not name the killed process $d"
  run after 0 "${small[@]}" --checkpoint-dir dead
  summary after
  ;;
all_damaged)
  mkdir -p ckpt
  printf 'not a checkpoint' >ckpt/ckpt-000000000010.safetensors
  : >ckpt/ckpt-000000000020.safetensors
  # --resume with no intact checkpoint: refused, listing each file and why.
  run resume 2 "${small[@]}" --checkpoint-dir ckpt --resume
  refused resume
  says resume "no intact checkpoint in ckpt" "ckpt/ckpt-000000000010.safetensors: damaged:" \
    "ckpt/ckpt-000000000020.safetensors: damaged:" "truncated" "--resume-or-start"
  run empty 2 "${small[@]}" --checkpoint-dir empty --resume
  says empty "no intact checkpoint in empty (it holds no checkpoint files)"
  # --resume-or-start starts a new run; its first save deletes the damaged files, higher steps too.
  run start 0 "${small[@]}" --checkpoint-dir ckpt --resume-or-start --save-every 1
  says start "no intact checkpoint in ckpt: starting a new run"
  [ ! -e ckpt/ckpt-000000000010.safetensors ] && [ ! -e ckpt/ckpt-000000000020.safetensors ] ||
    fail "start: the damaged checkpoints were not deleted"
  [ -f ckpt/ckpt-000000000002.safetensors ] || fail "start: no checkpoint of step 2"
  ;;
devices)
  # Data parallel on 2 devices, twice: both runs end with bit-identical tensors in their checkpoints (the
  # collectives add in a fixed order, whatever the threads' timing); another batch size is refused.
  run wrong_batch 2 --epochs 1 --steps 2 --batch-size 64 --devices 2
  refused wrong_batch
  says wrong_batch "--devices 2 is compiled for --batch-size 128 only"
  run first 0 --epochs 1 --steps 12 --devices 2 --checkpoint-dir a
  run second 0 --epochs 1 --steps 12 --devices 2 --checkpoint-dir b
  summary first
  grep -qF '"devices": 2' first.out || fail "first: the summary does not say 2 devices"
  same_tensors a/ckpt-000000000012.safetensors b/ckpt-000000000012.safetensors || fail "two runs on 2 devices differ"
  # Fully sharded (parameters and Adam state split too): each element of the state is updated from the same
  # sum of the same two halves of its gradient, so the checkpoint holds the same bytes as the replicated run.
  run sharded 0 --epochs 1 --steps 12 --devices 2 --fully-sharded --checkpoint-dir c
  grep -qF '"fully_sharded": true' sharded.out || fail "sharded: the summary does not say fully sharded"
  same_tensors a/ckpt-000000000012.safetensors c/ckpt-000000000012.safetensors || fail "fully sharded differs from replicated"
  # On 4 devices each struct member takes its own spec: b3 (f32[10]) stays whole, the rest is split in four.
  run four 0 --epochs 1 --steps 12 --devices 4 --checkpoint-dir d
  run sharded_four 0 --epochs 1 --steps 12 --devices 4 --fully-sharded --checkpoint-dir e
  same_tensors d/ckpt-000000000012.safetensors e/ckpt-000000000012.safetensors || fail "fully sharded on 4 devices differs from replicated"
  run sharded_one 2 --epochs 1 --steps 2 --fully-sharded
  says sharded_one "--fully-sharded is compiled for --devices 2 or 4 with --model mlp --precision f32"
  run tensor_two 2 --epochs 1 --steps 2 --devices 2 --tensor-parallel
  says tensor_two "--tensor-parallel is compiled for --devices 4 (a mesh of 2 x 2)"
  ;;
threads)
  # The same steps on 1 and on 3 threads give the same bytes (the CNN's filter gradients sum their rows
  # in shares fixed by the shapes, ir::partial_shares, not one a thread).
  for model in cnn mlp; do
    launcher=(env TESSEL_NUM_THREADS=1)
    run "${model}_one" 0 --epochs 1 --steps 2 --batch-size 128 --model "$model" --checkpoint-dir "${model}1"
    launcher=(env TESSEL_NUM_THREADS=3)
    run "${model}_three" 0 --epochs 1 --steps 2 --batch-size 128 --model "$model" --checkpoint-dir "${model}3"
    same_tensors "${model}1/ckpt-000000000002.safetensors" "${model}3/ckpt-000000000002.safetensors" ||
      fail "the $model's steps on 1 and 3 threads differ"
  done
  ;;
processes)
  # mpirun -np 2 --devices 2 (one device in each process) trains exactly as 2 devices in one process: the
  # checkpoints hold the same bytes, also after a resume under mpirun; only process 0 writes and reports.
  run one 0 --epochs 1 --steps 12 --devices 2 --checkpoint-dir a
  launcher=("$4" -np 2 --oversubscribe)
  run two 0 --epochs 1 --steps 12 --devices 2 --checkpoint-dir b --save-every 6
  summary two
  [ "$(grep -c '"test_accuracy"' two.out)" = 1 ] || fail "two: not exactly one summary (process 0 reports alone)"
  same_tensors a/ckpt-000000000012.safetensors b/ckpt-000000000012.safetensors || fail "2 processes differ from 2 devices in one"
  rm b/ckpt-000000000012.safetensors
  run resumed 0 --epochs 1 --steps 12 --devices 2 --checkpoint-dir b --resume
  grep -qF "resumed from b/ckpt-000000000006.safetensors at step 6" resumed.out || fail "resumed: it did not resume from step 6"
  same_tensors a/ckpt-000000000012.safetensors b/ckpt-000000000012.safetensors || fail "the resumed run over 2 processes differs"
  # Fully sharded over the 2 processes (jit with shardings on a mesh axis that spans them): the same bytes.
  run sharded 0 --epochs 1 --steps 12 --devices 2 --fully-sharded --checkpoint-dir c
  same_tensors a/ckpt-000000000012.safetensors c/ckpt-000000000012.safetensors || fail "fully sharded over 2 processes differs"
  run wrong 2 --epochs 1 --steps 2 --devices 4
  says wrong "mpirun -np 2: a run over processes is compiled for --devices 2 (one device in each process; --model mlp, or cnn in f32)"
  run wrong_cnn 2 --epochs 1 --steps 2 --devices 2 --model cnn --precision bf16
  says wrong_cnn "given --model cnn --precision bf16 --devices 2"
  # The CNN over the 2 processes (f32): the same bytes as its 2 devices in one process.
  run cnn_two 0 --epochs 1 --steps 4 --devices 2 --model cnn --checkpoint-dir cnn2
  grep -qF '"model": "cnn", "precision": "f32", "batch_size": 128, "epochs": 1, "steps": 4, "devices": 2' cnn_two.out ||
    fail "cnn_two: the summary does not say the CNN on 2 devices"
  launcher=()
  run cnn_one 0 --epochs 1 --steps 4 --devices 2 --model cnn --checkpoint-dir cnn1
  same_tensors cnn1/ckpt-000000000004.safetensors cnn2/ckpt-000000000004.safetensors || fail "the CNN over 2 processes differs"
  # The mesh ("data", 2) x ("model", 2) with "data" across the 2 processes (--tensor-parallel: Megatron's MLP
  # over "model" in each process): the same bytes as the mesh in one process, also after a resume under
  # mpirun; resuming it without the flag is refused with the fix.
  launcher=()
  run tensor_one 0 --epochs 1 --steps 12 --devices 4 --tensor-parallel --checkpoint-dir t1
  grep -qF '"tensor_parallel": true' tensor_one.out || fail "tensor_one: the summary does not say tensor parallel"
  launcher=("$4" -np 2 --oversubscribe)
  run tensor_two 0 --epochs 1 --steps 12 --devices 4 --tensor-parallel --checkpoint-dir t2 --save-every 6
  same_tensors t1/ckpt-000000000012.safetensors t2/ckpt-000000000012.safetensors || fail "tensor parallel over 2 processes differs"
  rm t2/ckpt-000000000012.safetensors
  launcher=()
  run tensor_flagless 2 --epochs 1 --steps 12 --devices 4 --checkpoint-dir t2 --resume
  says tensor_flagless "--tensor-parallel: the run has true, these flags give false" "fix: give the run's flags (--tensor-parallel)"
  launcher=("$4" -np 2 --oversubscribe)
  run tensor_resumed 0 --epochs 1 --steps 12 --devices 4 --tensor-parallel --checkpoint-dir t2 --resume
  same_tensors t1/ckpt-000000000012.safetensors t2/ckpt-000000000012.safetensors || fail "the resumed tensor-parallel run differs"
  ;;
tfrecord)
  # --write-tfrecord writes the IDX data as TFRecord shards; trained from them, the run is the run from the
  # IDX files (the same curve, to the last digit); a damaged shard stops the run before training, naming
  # the file and the record; --tfrecord-dir with --data-dir is refused.
  run write 0 --write-tfrecord shards --shards 3
  n=$(ls shards | grep -c '\.tfrecord$')
  [ "$n" = 6 ] || fail "write: $n files, expected 6"
  run idx 0 --epochs 1 --steps 20 --batch-size 32 --curve idx
  run tfr 0 --epochs 1 --steps 20 --batch-size 32 --tfrecord-dir shards --curve tfr
  summary idx
  summary tfr
  cmp idx.csv tfr.csv || fail "the run from TFRecord shards differs from the run from the IDX files"
  f=shards/train-00001-of-00003.tfrecord
  b=$(od -An -tu1 -j1000 -N1 "$f" | tr -d ' ')
  printf "\\$(printf '%03o' $((255 - b)))" | dd of="$f" bs=1 seek=1000 conv=notrunc 2>/dev/null
  run damaged 1 "${small[@]}" --tfrecord-dir shards
  says damaged "train-00001-of-00003.tfrecord" "record 1 at byte" "CRC does not match"
  refused damaged
  run both 2 "${small[@]}" --tfrecord-dir shards --data-dir .
  says both "--tfrecord-dir and --data-dir name two sources of the data"
  refused both
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($case)"
