#!/usr/bin/env bash
# Sharded checkpoints across processes (sharded_processes.cpp does the checking):
#   matrix  save with 1, 2 and 4 processes in each of the three layouts, then restore all nine checkpoints
#           into each layout with 1, 2 and 4 processes: every process's blocks bit for bit
#   kill    TRIALS times: NP processes save fully sharded checkpoints in a loop and one of them, chosen at
#           random, is killed (SIGKILL) at a random moment; the next run restores the newest committed
#           checkpoint and checks every element before it saves again
# usage: check_sharded.sh MPIEXEC EXE matrix, or check_sharded.sh MPIEXEC EXE kill NP TRIALS
set -uo pipefail
mpiexec=$1 exe=$2 case=$3 np=${4:-2} trials=${5:-8}
dir=$(mktemp -d) && out=$(mktemp) && trap 'rm -rf "$dir" "$out"' EXIT
fail() { echo "FAIL ($case): $*"; cat "$out"; exit 1; }
mpi() { local np=$1; shift; "$mpiexec" -np "$np" --oversubscribe "$exe" "$@"; }

case "$case" in
  matrix)
    for np in 1 2 4; do mpi "$np" save "$dir" >"$out" 2>&1 || fail "saving with $np processes"; done
    for np in 1 2 4; do
      mpi "$np" restore "$dir" >"$out" 2>&1 || fail "restoring with $np processes"
      cat "$out"
    done
    ;;
  kill)
    for trial in $(seq "$trials"); do
      mpi "$np" loop "$dir/ckpt" >"$out" 2>&1 &
      run=$!
      pids=
      for _ in $(seq 150); do
        grep -q '^saving$' "$out" && pids=$(sed -n 's/^process [0-9]* pid \([0-9]*\)$/\1/p' "$out" | tr '\n' ' ')
        [ "$(echo $pids | wc -w)" = "$np" ] && break
        kill -0 "$run" 2>/dev/null || fail "trial $trial: the run ended before saving (a damaged restore?)"
        sleep 0.1
      done
      [ "$(echo $pids | wc -w)" = "$np" ] || { kill -9 "$run"; fail "trial $trial: the run never started saving"; }
      sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
      victim=$(echo $pids | cut -d' ' -f$((RANDOM % np + 1)))
      kill -9 "$victim"
      for _ in $(seq 300); do kill -0 "$run" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$run" 2>/dev/null && { kill -9 "$run"; fail "trial $trial: the run went on 30 s after a process was killed"; }
      wait "$run"
      steps=$(ls "$dir/ckpt" | tr '\n' ' ')
      echo "trial $trial: killed process $victim; left: $steps"
    done
    mpi "$np" verify "$dir/ckpt" >"$out" 2>&1 || fail "the newest checkpoint after the last kill"
    cat "$out"
    ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac
echo "ok ($case)"
