#!/bin/sh
# run_batched_dot.sh — batched_dot through the command users run,
# `relgraph run bench/graphs/batched_dot_f32.graph --random 1 --repeat N`
# (256 products of 64 x 64 float32 matrices), against numpy.matmul on the
# same shapes in the same run, one thread each (OPENBLAS_NUM_THREADS=1).
#
#   bench/run_batched_dot.sh [RELGRAPH] [RUNS] [REPEAT]
#
# Prints each run's two medians (ms per call) and the median of the ratios.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/relgraph}
runs=${2:-5}
repeat=${3:-51}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
ratios=""
i=0
while [ "$i" -lt "$runs" ]; do
  rg=$(OPENBLAS_NUM_THREADS=1 "$bin" run "$here/graphs/batched_dot_f32.graph" --random 1 --repeat "$repeat" |
       sed -n 's/^median \([0-9.]*\) ms per call.*/\1/p')
  np=$(OPENBLAS_NUM_THREADS=1 "$py" -c "
import numpy as np, time
r = np.random.default_rng(1)
x = r.standard_normal((256, 64, 64), dtype=np.float32)
y = r.standard_normal((256, 64, 64), dtype=np.float32)
t = []
for _ in range($repeat):
    s = time.perf_counter(); np.matmul(x, y); t.append(time.perf_counter() - s)
t.sort(); print('%.6f' % (t[len(t) // 2] * 1e3))")
  echo "run $i: relgraph $rg ms, numpy.matmul $np ms"
  ratios="$ratios $(awk -v a="$rg" -v b="$np" 'BEGIN { printf "%.3f", a / b }')"
  i=$((i + 1))
done
echo "relgraph / numpy:$ratios (median $(printf '%s\n' $ratios | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'))"
