#!/usr/bin/env bash
# A generated kernel's cache entry that is not the right, whole kernel is
# never run: the next process that meets it compiles the kernel again, and
# the outputs are bit for bit those of the interpreter.
#   foreign: the entry replaced by another kernel's whole, loadable object
#            (a copy gone wrong, a cache shared between machines);
#   damaged: the entry's code overwritten in place, its size, ELF headers
#            and key intact (a bad disk block, a stray write), and then the
#            entry without its trailer (as entries were written before
#            they carried one).
#   cache_entry.sh MODE RELGRAPH WORKDIR
set -euo pipefail
mode=$1 bin=$2 work=$3
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
entry=cache/$(ls cache)
"$bin" run one.graph --random 1 --no-codegen --output-dir interpreted >/dev/null

# runs one.graph through the cache; the values must be the interpreter's
# and the entry must no longer be the bad one kept in file $1
check() {
  rm -rf cached
  "$bin" run one.graph --random 1 --cache-dir cache --output-dir cached >/dev/null
  cmp cached/out0.npy interpreted/out0.npy
  cmp -s "$entry" "$1" && { echo "the $mode entry was kept" >&2; exit 1; }
  return 0
}

case $mode in
foreign)
  "$bin" run two.graph --random 1 --cache-dir cache >/dev/null
  other=cache/$(ls cache | grep -v -x "${entry#cache/}")
  cp "$other" "$entry"
  cp "$other" bad
  check bad ;;
damaged)
  # the .text section: offset and size (hexadecimal) from the section table
  read -r off size < <(readelf -S -W "$entry" | sed 's/^ *\[ *[0-9]*\] *//' |
                       awk '$1 == ".text" { print $4, $5 }')
  [ -n "$off" ] || { echo "no .text section in $entry" >&2; exit 1; }
  head -c $((16#$size)) /dev/zero | tr '\0' '\314' |
    dd of="$entry" bs=1 seek=$((16#$off)) conv=notrunc status=none
  cp "$entry" bad
  check bad
  whole=$(stat -c %s "$entry")
  head -c $((whole - 16)) "$entry" > bare
  cp bare "$entry"
  check bare ;;
*) echo "cache_entry.sh: unknown mode $mode" >&2; exit 2 ;;
esac
echo "a $mode cache entry was compiled again; the values are the interpreter's"
