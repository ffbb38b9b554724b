#!/usr/bin/env bash
# The standard rewrites apply to a graph placed on a device exactly as on
# the host: every graph file of the examples, the golden runs and rewrites
# and the benchmarks, its inputs moved to the mirror device, is rewritten
# by `relgraph rewrite` (fast_run) into the same graph as on the host.
#   device_rewrites.sh RELGRAPH SOURCE_DIR WORKDIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
checked=0 failed=0
for f in "$src"/examples/graphs/*.graph "$src"/tests/golden/run/*.graph "$src"/tests/golden/rewrite/*.graph \
         "$src"/bench/graphs/*.graph; do
  grep -q 'cuda:\| mirror)' "$f" && continue
  grep -q '(input ' "$f" || continue
  "$bin" rewrite "$f" > "$work/host" 2>/dev/null || continue
  sed -E 's/\(input ([^ ()]+) ([^ ()]+) (\([^()]*\))\)/(input \1 \2 \3 mirror)/g' "$f" > "$work/on-mirror.graph"
  checked=$((checked + 1))
  if ! "$bin" rewrite "$work/on-mirror.graph" > "$work/mirror" 2> "$work/err" || ! cmp -s "$work/host" "$work/mirror"; then
    failed=$((failed + 1))
    echo "$f: rewritten differently with its inputs on the mirror"
    diff "$work/host" "$work/mirror" | head -6 || true
    head -3 "$work/err"
  fi
done
echo "$checked graphs, $failed rewritten differently on the mirror"
[ "$checked" -gt 50 ] && [ "$failed" -eq 0 ]
