#!/bin/sh
# run_small_fusion.sh — whether fusing small elementwise groups pays, through
# the command users run: `relgraph run GRAPH --random 1 --repeat N` under
# `fast_run` (fused) and `fast_run -fusion` (the ops one by one), the two
# interleaved, on
#   axpb    2x + 1 over float32 (a generated kernel),
#   sigtanh sigmoid(a) * tanh(b) + c * d over float32 (a generated kernel),
#   int     x * y + (x - 3) over int32 (the composite interpreter),
# each at 4, 64, 1024 and 4096 elements.
#
#   bench/run_small_fusion.sh [RELGRAPH] [RUNS] [REPEAT]
#
# RELGRAPH defaults to build/relgraph.  Each run prints the median time per
# call over REPEAT calls (default 20001); the script makes RUNS runs
# (default 5) of each, pinned to one core when taskset exists, and reports
# the medians in microseconds and their ratio fused / unfused.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/relgraph}
runs=${2:-5}
repeat=${3:-20001}
pin=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 0"; fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

graph() { # NAME SIZE: writes $dir/NAME-SIZE.graph
  n=$2
  case $1 in
  axpb) body="(input x float32 ($n)) (output (add (mul 2.0 x) 1.0))" ;;
  sigtanh) body="(input a float32 ($n)) (input b float32 ($n)) (input c float32 ($n))
    (input d float32 ($n)) (output (add (mul (sigmoid a) (tanh b)) (mul c d)))" ;;
  int) body="(input x int32 ($n)) (input y int32 ($n)) (output (add (mul x y) (sub x 3)))" ;;
  esac
  echo "(graph $body)" >"$dir/$1-$n.graph"
}

us() { # GRAPH QUERY: one run's median in microseconds
  ms=$($pin "$bin" run "$1" --query "$2" --random 1 --repeat "$repeat" |
       sed -n 's/^median \([0-9.]*\) ms per call.*/\1/p')
  [ -n "$ms" ] || { echo "run_small_fusion: no timing from $bin" >&2; exit 1; }
  awk -v ms="$ms" 'BEGIN { printf "%.3f", ms * 1e3 }'
}

median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-8s %6s %12s %12s %7s\n' graph size "fused us" "unfused us" ratio
for g in axpb sigtanh int; do
  for n in 4 64 1024 4096; do
    graph "$g" "$n"
    f=""
    u=""
    i=0
    while [ "$i" -lt "$runs" ]; do
      f="$f $(us "$dir/$g-$n.graph" fast_run)"
      u="$u $(us "$dir/$g-$n.graph" "fast_run -fusion")"
      i=$((i + 1))
    done
    mf=$(echo "$f" | median)
    mu=$(echo "$u" | median)
    printf '%-8s %6s %12s %12s %7s\n' "$g" "$n" "$mf" "$mu" "$(awk -v a="$mf" -v b="$mu" 'BEGIN { printf "%.2f", a / b }')"
  done
done
