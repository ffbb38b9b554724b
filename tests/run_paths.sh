#!/usr/bin/env bash
# Paths given to `relgraph run`, used as they are.
#   output-dirs:     --output-dir DIR makes DIR and the directories above it
#                    that are missing and writes out0.npy, out1.npy, ...
#                    there; a path through a file is refused with the
#                    reason, an empty one as bad usage.
#   cache-dir-names: a kernel cache directory whose name holds quotes,
#                    blanks and shell syntax: the kernel is compiled into it
#                    (the compiler runs without a shell) and nothing in the
#                    name is run.
#   run_paths.sh MODE RELGRAPH WORKDIR
set -euo pipefail
mode=$1 bin=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
cat > two.graph <<'G'
(graph (input a float32 (64)) (input b float32 (64))
  (output (add (mul (sigmoid a) (tanh b)) (mul a b))) (output (sum a)))
G
fail() { echo "$*" >&2; exit 1; }
case $mode in
output-dirs)
  "$bin" run two.graph --random 1 --output-dir deep/a/b/ > /dev/null
  [ -f deep/a/b/out0.npy ] && [ -f deep/a/b/out1.npy ] || fail "outputs not written under deep/a/b"
  "$bin" run two.graph --random 1 --output-dir deep/a/b > /dev/null # there already: written again
  touch plain
  if "$bin" run two.graph --random 1 --output-dir plain/sub 2> err.txt; then fail "a directory under a file was accepted"; fi
  grep -q "cannot create the directory plain/sub: Not a directory" err.txt || fail "$(cat err.txt)"
  code=0
  "$bin" run two.graph --random 1 --output-dir '' 2> err.txt || code=$?
  [ "$code" = 2 ] && grep -q "an empty name" err.txt || fail "an empty --output-dir: exit $code, $(cat err.txt)"
  ;;
cache-dir-names)
  cc=${RELGRAPH_CC:-cc}
  command -v "${cc%% *}" > /dev/null || { echo "no C compiler: nothing to check"; exit 0; }
  dir="$work/o'brien dir;touch $work/INJECTED;'"
  "$bin" run two.graph --random 1 --cache-dir "$dir" > /dev/null
  [ ! -e "$work/INJECTED" ] || fail "the directory's name ran as a command"
  ls "$dir"/rgk-*.so > /dev/null 2>&1 || fail "no kernel compiled into the directory"
  ;;
*) fail "unknown mode $mode" ;;
esac
echo ok
