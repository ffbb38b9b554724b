#!/bin/sh
# run_rewrite.sh — fast_run through the command against Aesara's FAST_RUN
# rewrites in the same run: `relgraph rewrite FILE --query fast_run
# --profile` on the graphs of bench/gen_mixed.sh (the rewrite's own time,
# from the profile's first line) beside bench/peer_aesara_rewrite.py, which
# builds the same graph with Aesara's API and times its FAST_RUN rewrite.
#
#   bench/run_rewrite.sh RELGRAPH [AESARA_PATH [ROUNDS [AESARA_MAX_BLOCKS]]]
#
# Sizes: 100, 1000 and 10000 blocks (1,100 to 110,000 nodes).  Each round
# runs relgraph five times per size (the median is the round's figure) and
# Aesara once per size up to AESARA_MAX_BLOCKS (default 100: Aesara takes
# seconds per hundred blocks); pinned to one core when taskset exists.
# Prints, per size, relgraph's median over rounds in ns per node of the
# input graph, its ratio to the 100-block size, and Aesara's median seconds
# per block against relgraph's (AESARA_PATH as in run_aesara.sh).
set -eu
rg=${1:?usage: run_rewrite.sh RELGRAPH [AESARA_PATH [ROUNDS [AESARA_MAX_BLOCKS]]]}
apath=${2-}
rounds=${3:-5}
amax=${4:-100}
here=$(cd "$(dirname "$0")" && pwd)
pin=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 1"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for b in 100 1000 10000; do sh "$here/gen_mixed.sh" "$b" > "$work/m$b.graph"; done

# seconds of one fast_run: "std (sequence): 0.0241 s, nodes 11000 -> ..."
once() { $pin "$rg" rewrite "$work/m$1.graph" --query fast_run --profile | sed -n 's/^std (sequence): \([0-9.]*\) s.*/\1/p'; }
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

r=0
while [ "$r" -lt "$rounds" ]; do
  for b in 100 1000 10000; do
    for i in 1 2 3 4 5; do once "$b"; done | med | sed "s/^/relgraph $b /" >> "$work/all"
    if [ -n "$apath" ] && [ "$b" -le "$amax" ]; then
      PYTHONPATH=$apath $pin /usr/bin/python3 "$here/peer_aesara_rewrite.py" "$b" 1 |
        sed -n "s/.*\"seconds\": \([0-9.e-]*\).*/aesara $b \1/p" >> "$work/all"
    fi
  done
  r=$((r + 1))
done
echo "| blocks (nodes in) | relgraph, ns per node | / 100 blocks | Aesara, ms per block | relgraph, ms per block | Aesara / relgraph |"
echo "|---|---|---|---|---|---|"
base=$(awk '$1 == "relgraph" && $2 == 100 { print $3 }' "$work/all" | med)
for b in 100 1000 10000; do
  s=$(awk -v b="$b" '$1 == "relgraph" && $2 == b { print $3 }' "$work/all" | med)
  a=$(awk -v b="$b" '$1 == "aesara" && $2 == b { print $3 }' "$work/all" | med)
  awk -v b="$b" -v s="$s" -v a="$a" -v base="$base" 'BEGIN {
    n = 11 * b
    printf "| %d (%d) | %.0f | %.2f | %s | %.4f | %s |\n", b, n, s / n * 1e9, (s / n) / (base / 1100),
      a == "" ? "" : sprintf("%.1f", a / b * 1e3), s / b * 1e3, a == "" ? "" : sprintf("%.0fx", a / s)
  }'
done
