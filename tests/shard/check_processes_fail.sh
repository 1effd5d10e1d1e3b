#!/usr/bin/env bash
# A run over 2 processes whose other process fails must end, with an error, within 30 s:
#   killed   process 1 is killed (SIGKILL) while both run collectives
#   stopped  process 1 is stopped (SIGSTOP) while both run collectives: process 0's wait times out (3 s),
#            wherever it was, the check before a collective or the collective's data
#   stalled  process 1 stops calling collectives: process 0's wait times out (3 s in this test)
#   other_program  process 1 runs another program of the same sizes: the fingerprints differ
# killed and stopped also over 4 processes (NP 4): every process ends, the message names process 1.
# usage: check_processes_fail.sh MPIEXEC PROCESSES_TEST killed|stopped|stalled|other_program [NP]
set -uo pipefail
mpiexec=$1 exe=$2 case=$3 np=${4:-2}
out=$(mktemp) && trap 'rm -f "$out"' EXIT
fail() { echo "FAIL ($case): $*"; cat "$out"; exit 1; }

start=$(date +%s)
case "$case" in
  killed|stopped)
    # killed: the others learn it from mpirun, within the default 30 s deadline; stopped: from the deadline.
    deadline=$([ "$case" = stopped ] && echo 3 || echo 30)
    "$mpiexec" -np "$np" --oversubscribe "$exe" --loop 60 --timeout "$deadline" >"$out" 2>&1 &
    run=$!
    for _ in $(seq 100); do
      pid=$(sed -n 's/^process 1 pid \([0-9]*\)$/\1/p' "$out")
      [ -n "$pid" ] && break
      sleep 0.2
    done
    [ -n "$pid" ] || { kill -9 "$run"; fail "process 1 never started"; }
    trap 'kill -9 "$pid" 2>/dev/null; rm -f "$out"' EXIT
    sleep 1
    killed_at=$(date +%s)
    if [ "$case" = killed ]; then kill -9 "$pid"; else kill -STOP "$pid"; fi
    ;;
  stalled)
    "$mpiexec" -np 2 --oversubscribe "$exe" --stall >"$out" 2>&1 &
    run=$!
    killed_at=$start
    ;;
  other_program)
    "$mpiexec" -np 2 --oversubscribe "$exe" --other-program >"$out" 2>&1 &
    run=$!
    killed_at=$start
    ;;
  *) echo "unknown case '$case'"; exit 2 ;;
esac

for _ in $(seq 300); do
  kill -0 "$run" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$run" 2>/dev/null; then
  kill -9 "$run"
  fail "the run was still going 30 s after process 1 failed"
fi
wait "$run"
status=$?
elapsed=$(( $(date +%s) - killed_at ))
[ "$status" -ne 0 ] || fail "the run exited with status 0"
[ "$elapsed" -le 30 ] || fail "the run took $elapsed s to end"
if [ "$case" = stalled ] || [ "$case" = stopped ]; then
  grep -q "tessel::distributed: process [0-9] of $np: collective .* waited 3 s for the other processes" "$out" ||
    fail "no process reported its timeout"
fi
# The missing process is named: at the check before a collective (stalled; stopped, mostly) or in its data.
if [ "$case" = stalled ]; then
  grep -q "process 1 has not reached it (died, stopped, or stuck before it); ending the run" "$out" ||
    fail "process 0 did not name process 1"
elif [ "$case" = stopped ]; then
  grep -Eq "process 1 has (not reached it \(died, stopped, or stuck before it\)|died or stopped while the data moved); ending the run" "$out" ||
    fail "process 0 did not name process 1"
fi
if [ "$case" = other_program ]; then
  grep -q "tessel::distributed: process [01] of 2: collective 0 ([a-z_]*): this process runs program [0-9a-f]\{16\}, process [01] runs program [0-9a-f]\{16\}; the fingerprint covers" "$out" ||
    fail "no process reported the other's program"
  ! grep -q "were not told apart" "$out" || fail "a process finished the different program"
fi
echo "ok ($case): the run ended with status $status ${elapsed} s after process 1 failed"
grep "tessel::distributed" "$out" || tail -5 "$out"
