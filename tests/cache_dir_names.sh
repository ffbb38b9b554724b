#!/usr/bin/env bash
# A kernel cache directory whose name holds quotes, blanks and shell
# syntax is used as it is: the kernel is compiled into it (the compiler
# runs without a shell), and nothing in the name is run.
#   cache_dir_names.sh RELGRAPH WORKDIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
cd "$work"
cat > one.graph <<'G'
(graph (input a float32 (64)) (input b float32 (64))
  (output (add (mul (sigmoid a) (tanh b)) (mul a b))))
G
dir="$work/o'brien dir;touch $work/INJECTED;'"
if ! command -v "${RELGRAPH_CC:-cc}" > /dev/null; then
  echo "no C compiler: nothing to check"
  exit 0
fi
"$bin" run one.graph --random 1 --cache-dir "$dir" > /dev/null
[ ! -e "$work/INJECTED" ] || { echo "the directory's name ran as a command" >&2; exit 1; }
ls "$dir"/rgk-*.so > /dev/null 2>&1 || { echo "no kernel compiled into the directory" >&2; exit 1; }
echo ok
