#!/bin/sh
# run_aesara.sh — the virtual machines and Scan against Aesara in the same
# run: bench_vm (dispatch over a chain of 1000 scalar adds, keeping or
# releasing intermediates; nested ifelse; the call overhead of a one-op
# function), bench_scan (the affine recurrence over 10^4 steps; the
# compile of the RNN example) and the command on the chain and the
# recurrence (`relgraph run bench/graphs/chain1000_f64_scalar.graph --query
# none`, which releases intermediates, and affine_scan_f64.graph) beside
# bench/peer_aesara.py, which builds the same workloads with Aesara's API.
#
#   bench/run_aesara.sh BUILD_DIR AESARA_PATH [ROUNDS]
#
# AESARA_PATH is the PYTHONPATH that makes Aesara 2.9.4 importable with
# Debian's python3 (its dependencies: python3-numpy python3-scipy
# python3-toolz python3-multipledispatch python3-filelock
# python3-typing-extensions python3-dev; and the public repositories of
# aesara at rel-2.9.4, with aesara/_version.py added, kanren v1.0.3,
# unification v0.4.6, etuples v0.3.9, cons v0.4.6).  Each round runs both
# sides once, alternating which goes first, pinned to one core when taskset
# exists; the table gives each side's median over rounds and the median of
# the per-round ratios Aesara / relgraph.
set -eu
build=${1:?usage: run_aesara.sh BUILD_DIR AESARA_PATH [ROUNDS]}
apath=${2:?usage: run_aesara.sh BUILD_DIR AESARA_PATH [ROUNDS]}
rounds=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
pin=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 1"; fi
PYTHONPATH=$apath /usr/bin/python3 -c 'import aesara' 2>/dev/null ||
  { echo "run_aesara: aesara cannot be imported from $apath" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One line per figure: NAME VALUE.
relgraph() {
  $pin "$build/bench/bench_vm" dispatch | sed -n \
    -e 's/.*keeping intermediates *\([0-9.]*\) ns per node.*/dispatch_keep \1/p' \
    -e 's/.*releasing intermediates *\([0-9.]*\) ns per node.*/dispatch_release \1/p'
  $pin "$build/bench/bench_vm" ifelse | sed -n 's/^ifelse.* \([0-9.]*\) ns per level.*/ifelse \1/p'
  $pin "$build/bench/bench_vm" call | sed -n 's/^call overhead.* \([0-9.]*\) us per call.*/call \1/p'
  { $pin "$build/bench/bench_scan" 7 affine; $pin "$build/bench/bench_scan" 7 compile_rnn; } | jsonfig
  ms=$($pin "$build/relgraph" run "$here/graphs/chain1000_f64_scalar.graph" --query none --random 1 --repeat 2001 | permedian)
  echo "command_dispatch $(awk -v ms="$ms" 'BEGIN { print ms * 1e3 }')" # 1000 nodes: ns per node
  ms=$($pin "$build/relgraph" run "$here/graphs/affine_scan_f64.graph" --random 1 --repeat 21 | permedian)
  echo "command_scan_affine $(awk -v ms="$ms" 'BEGIN { print ms * 1e2 }')" # 10^4 steps: ns per step
}
# "median X ms per call ..." -> X
permedian() { sed -n 's/^median \([0-9.]*\) ms per call.*/\1/p'; }
peer() { PYTHONPATH=$apath $pin /usr/bin/python3 "$here/peer_aesara.py" 7 | jsonfig; }
# {"bench": "NAME", ..., "UNIT": VALUE} -> NAME VALUE (the last number)
jsonfig() { sed -n 's/.*"bench": "\([a-z_0-9]*\)".*: \([0-9.]*\)}$/\1 \2/p'; }

i=0
while [ "$i" -lt "$rounds" ]; do
  if [ $((i % 2)) -eq 0 ]; then relgraph > "$work/rg.$i"; peer > "$work/ae.$i"
  else peer > "$work/ae.$i"; relgraph > "$work/rg.$i"; fi
  i=$((i + 1))
done
printf '| benchmark | unit | relgraph (median of rounds) | Aesara (median of rounds) | Aesara / relgraph |\n'
printf '|---|---|---|---|---|\n'
# relgraph's figure, and Aesara's it is compared with
for pair in dispatch_keep:dispatch_keep dispatch_release:dispatch_release \
            command_dispatch:dispatch_release ifelse:ifelse call:call \
            scan_affine_d10:scan_affine_d10 command_scan_affine:scan_affine_d10 \
            scan_compile_rnn:scan_compile_rnn; do
  name=${pair%%:*} peer=${pair##*:}
  case $name in
    *dispatch*) unit="ns per node" ;; ifelse) unit="ns per level" ;; call) unit="us per call" ;;
    *scan_affine*) unit="ns per step" ;; *) unit="ms" ;;
  esac
  cat "$work"/rg.* | awk -v n="$name" '$1 == n { print $2 }' | sort -n > "$work/r"
  cat "$work"/ae.* | awk -v n="$peer" '$1 == n { print $2 }' | sort -n > "$work/a"
  r=0
  while [ "$r" -lt "$rounds" ]; do
    a=$(awk -v n="$peer" '$1 == n { print $2 }' "$work/ae.$r")
    g=$(awk -v n="$name" '$1 == n { print $2 }' "$work/rg.$r")
    awk -v a="$a" -v g="$g" 'BEGIN { if (g > 0) print a / g }'
    r=$((r + 1))
  done | sort -n > "$work/q"
  med() { awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }' "$1"; }
  printf '| %s | %s | %s | %s | %.1fx |\n' "$name" "$unit" "$(med "$work/r")" "$(med "$work/a")" "$(med "$work/q")"
done
