#!/bin/sh
# run_small_ops.sh — the fixed cost per node of small ops through the
# command users run: `relgraph run GRAPH --query none --random 1 --repeat N`
# on chains of 1000 adds (bench/graphs/chain1000_*.graph, made by
# gen_chain.sh), a 0-d float64 one and a float32 (4) one.
#
#   bench/run_small_ops.sh [RELGRAPH] [RUNS] [REPEAT]
#
# RELGRAPH defaults to build/relgraph.  Each run of the program prints the
# median time per call over REPEAT calls (default 2001); the script runs
# the program RUNS times (default 5) per graph, pinned to one core when
# taskset exists, and reports each run's ns per node and their median.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/relgraph}
runs=${2:-5}
repeat=${3:-2001}
nodes=1000
pin=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 0"; fi
for g in chain1000_f64_scalar chain1000_f32_4; do
  file=$here/graphs/$g.graph
  list=""
  i=0
  while [ "$i" -lt "$runs" ]; do
    ms=$($pin "$bin" run "$file" --query none --random 1 --repeat "$repeat" |
         sed -n 's/^median \([0-9.]*\) ms per call.*/\1/p')
    [ -n "$ms" ] || { echo "run_small_ops: no timing from $bin" >&2; exit 1; }
    list="$list $(awk -v ms="$ms" -v n="$nodes" 'BEGIN { printf "%.1f", ms * 1e6 / n }')"
    i=$((i + 1))
  done
  med=$(echo $list | tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  printf '%-22s ns per node:%s  median %s\n' "$g" "$list" "$med"
done
