#!/usr/bin/env bash
# A generated kernel's cache entry replaced by another kernel's whole,
# loadable object (a copy gone wrong, a cache shared between machines) is
# never run: each process that meets it compiles the right kernel again,
# and the outputs are bit for bit those of the interpreter.
#   cache_foreign.sh RELGRAPH WORKDIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work"
mkdir -p "$work/cache"
cd "$work"
cat > one.graph <<'G'
(graph (input a float32 (64 80)) (input b float32 (64 80))
  (output (add (mul (sigmoid a) (tanh b)) (mul (exp a) 3.0))))
G
cat > two.graph <<'G'
(graph (input x float32 (64 80)) (input y float32 (64 80)) (input z float32 (64 80)) (input w float32 (64 80))
  (output (add (mul (exp x) y) (mul (tanh z) w))))
G
"$bin" run one.graph --random 1 --cache-dir cache >/dev/null
first=$(ls cache)
"$bin" run two.graph --random 1 --cache-dir cache >/dev/null
second=$(ls cache | grep -v -x "$first")
rm "cache/$first"
cp "cache/$second" "cache/$first"
"$bin" run one.graph --random 1 --cache-dir cache --output-dir cached >/dev/null
"$bin" run one.graph --random 1 --no-codegen --output-dir interpreted >/dev/null
cmp cached/out0.npy interpreted/out0.npy
cmp -s "cache/$first" "cache/$second" && { echo "the foreign entry was kept" >&2; exit 1; }
echo "a foreign cache entry was compiled again; the values are the interpreter's"
