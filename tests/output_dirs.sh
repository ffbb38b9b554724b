#!/usr/bin/env bash
# `relgraph run --output-dir DIR` makes DIR and the directories above it
# that are missing, and writes out0.npy, out1.npy, ... there; a path
# through a file is refused with the reason.
#   output_dirs.sh RELGRAPH WORKDIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
cd "$work"
cat > two.graph <<'G'
(graph (input x float64 (3)) (output (exp x)) (output (sum x)))
G
"$bin" run two.graph --random 1 --output-dir deep/a/b/ > /dev/null
[ -f deep/a/b/out0.npy ] && [ -f deep/a/b/out1.npy ] || { echo "outputs not written under deep/a/b" >&2; exit 1; }
"$bin" run two.graph --random 1 --output-dir deep/a/b > /dev/null # exists: written again
touch plain
if "$bin" run two.graph --random 1 --output-dir plain/sub 2> err.txt; then
  echo "a directory under a file was accepted" >&2
  exit 1
fi
grep -q "cannot create the directory plain/sub: Not a directory" err.txt || { cat err.txt >&2; exit 1; }
echo ok
