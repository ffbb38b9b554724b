#!/usr/bin/env bash
# fuzz.sh — runs one libFuzzer harness for a while, one process, and keeps
# going after a crash (each crash input is kept in WORK/artifacts), then
# prints the executions and CPU time it used.
#
#   tests/fuzz/fuzz.sh BUILD NAME SECONDS WORK
#
# BUILD is a build made with RG_FUZZ=ON; WORK/corpus starts as a copy of
# tests/fuzz/corpus/NAME and keeps growing over several calls.  To check in
# what a run found, merge into a fresh copy of the checked-in corpus:
#   fuzz_NAME -merge=1 NEW tests/fuzz/corpus/NAME WORK/corpus
set -euo pipefail
build=$1 name=$2 secs=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/tests/fuzz/fuzz_$name
mkdir -p "$work/corpus" "$work/artifacts"
cp -n "$here/corpus/$name"/* "$work/corpus/" 2>/dev/null || true
opts=(-max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$work/artifacts/")
[[ -f $here/$name.dict ]] && opts+=(-dict="$here/$name.dict")
end=$((SECONDS + secs))
execs=0 cpu=0 crashes=0
while (( SECONDS < end - 5 )); do
  log=$work/run-$(date +%s).log
  start=$SECONDS
  /usr/bin/time -f "cpu %U %S" -a -o "$log.time" \
    "$bin" "${opts[@]}" -max_total_time=$((end - SECONDS)) "$work/corpus" >"$log" 2>&1 || crashes=$((crashes + 1))
  n=$(awk '/number_of_executed_units/ {print $2}' "$log" | tail -1)
  execs=$((execs + ${n:-0}))
  cpu=$(awk -v c="$cpu" '/^cpu/ {c += $2 + $3} END {print c}' "$log.time")
  rm -f "$log.time"
  grep -h "peak_rss_mb\|average_exec_per_sec" "$log" || true
  if (( SECONDS - start < 5 )) && ! grep -q "^Done" "$log"; then
    echo "stopped at once (a corpus input fails?): see $log"
    break
  fi
done
echo "$name: $execs executions, $cpu s CPU, $crashes stops on a finding"
