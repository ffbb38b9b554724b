#!/bin/sh
# run_distribute.sh — the relational dot distribution through the command
# against Aesara's kanren relation in the same run: `relgraph rewrite FILE
# --query distribute|gather --profile` (the rewrite's own time, from the
# profile) on the graphs of bench/gen_distribute.sh, beside
# bench/peer_aesara_distribute.py, which builds the same graphs with
# Aesara's API and times the relation of Aesara's rewriting guide on them.
#
#   bench/run_distribute.sh RELGRAPH [AESARA_PATH [ROUNDS [BENCH_REWRITE]]]
#
# Rows: the chain of 8, 32 and 128 terms both ways, the flat sum and the
# balanced tree of 128 terms, nested dots 32 deep (the workloads and the
# reference figures of the rewrite engine's issue).  Each round runs
# relgraph five times per row (one process each; the median is the
# round's figure) and Aesara once per row (the median of 3 rewrites);
# pinned to one core when taskset exists.  Prints, per row, the medians
# over rounds and Aesara / relgraph.  The gather rows start from the
# distributed graph, which relgraph writes (`--format sexp`).  Each process
# of the command rewrites one graph, cold (Aesara's figure is the median of
# three rewrites in one process); with BENCH_REWRITE (build/bench/
# bench_rewrite) each round also runs its distribution rows, the median of
# 11 rewrites in one process, for the warm figure beside Aesara's.
set -eu
rg=${1:?usage: run_distribute.sh RELGRAPH [AESARA_PATH [ROUNDS [BENCH_REWRITE]]]}
apath=${2-}
rounds=${3:-3}
bench=${4-}
here=$(cd "$(dirname "$0")" && pwd)
pin=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 1"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows="chain:8:distribute chain:8:gather chain:32:distribute chain:32:gather chain:128:distribute
chain:128:gather flat:128:distribute balanced:128:distribute nested:32:distribute"
for row in $rows; do
  set -- $(echo "$row" | tr ':' ' ')
  f="$work/$1$2.graph"
  [ -f "$f" ] || sh "$here/gen_distribute.sh" "$1" "$2" > "$f"
  if [ "$3" = gather ]; then
    "$rg" rewrite "$f" --query distribute --format sexp > "$work/$1$2.dist.graph"
  fi
done

# seconds of one rewrite: "std (sequence): 0.0241 s, nodes ..."
once() { $pin "$rg" rewrite "$1" --query "$2" --profile | sed -n 's/^std (sequence): \([0-9.]*\) s.*/\1/p'; }
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

r=0
while [ "$r" -lt "$rounds" ]; do
  for row in $rows; do
    set -- $(echo "$row" | tr ':' ' ')
    f="$work/$1$2.graph"
    [ "$3" = gather ] && f="$work/$1$2.dist.graph"
    for i in 1 2 3 4 5; do once "$f" "$3"; done | med | sed "s/^/relgraph $row /" >> "$work/all"
    if [ -n "$apath" ]; then
      PYTHONPATH=$apath $pin /usr/bin/python3 "$here/peer_aesara_distribute.py" "$1" "$2" "$3" 3 |
        sed -n "s/.*\"seconds\": \([0-9.e-]*\).*/aesara $row \1/p" >> "$work/all"
    fi
  done
  if [ -n "$bench" ]; then
    # "chain N=8   distribute   0.035 ms ..." -> "warm chain:8:distribute 0.000035"
    for f in "chain N=" flat balanced nested; do $pin "$bench" "$f"; done | awk '$0 ~ / (distribute|gather) / {
      shape = $1 == "chain" ? "chain" : $1 == "flat" ? "flat" : $1 == "balanced" ? "balanced" : "nested"
      n = shape == "chain" ? substr($2, 3) : shape == "nested" ? 32 : 128
      for (i = 1; i <= NF; i++) if ($i == "distribute" || $i == "gather") { d = $i; ms = $(i + 1) }
      printf "warm %s:%s:%s %.9f\n", shape, n, d, ms / 1e3 }' >> "$work/all"
  fi
  r=$((r + 1))
done
echo "| row | relgraph, ms (the command) | warm, ms (bench_rewrite) | Aesara, ms | Aesara / relgraph (command) | Aesara / relgraph (warm) |"
echo "|---|---|---|---|---|---|"
for row in $rows; do
  s=$(awk -v r="$row" '$1 == "relgraph" && $2 == r { print $3 }' "$work/all" | med)
  w=$(awk -v r="$row" '$1 == "warm" && $2 == r { print $3 }' "$work/all" | med)
  a=$(awk -v r="$row" '$1 == "aesara" && $2 == r { print $3 }' "$work/all" | med)
  awk -v row="$row" -v s="$s" -v w="$w" -v a="$a" 'BEGIN {
    gsub(":", " ", row)
    printf "| %s | %.3f | %s | %s | %s | %s |\n", row, s * 1e3, w == "" ? "" : sprintf("%.3f", w * 1e3),
      a == "" ? "" : sprintf("%.1f", a * 1e3), a == "" ? "" : sprintf("%.0fx", a / s),
      a == "" || w == "" ? "" : sprintf("%.0fx", a / w)
  }'
done
