#!/usr/bin/env bash
# A generated kernel's cache entry whose code was damaged in place (its
# size, ELF headers and key intact: a bad disk block, a stray write) is
# never run: the next process compiles the kernel again, and the outputs
# are bit for bit those of the interpreter.  The same for an entry written
# before entries carried their trailer (the object alone).
#   cache_damaged.sh RELGRAPH WORKDIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work"
mkdir -p "$work/cache"
cd "$work"
cat > one.graph <<'G'
(graph (input a float32 (64 80)) (input b float32 (64 80))
  (output (add (mul (sigmoid a) (tanh b)) (mul (exp a) 3.0))))
G
"$bin" run one.graph --random 1 --cache-dir cache >/dev/null
entry=cache/$(ls cache)
"$bin" run one.graph --random 1 --no-codegen --output-dir interpreted >/dev/null
# the .text section: offset and size (hexadecimal) from the section table
read -r off size < <(readelf -S -W "$entry" | sed 's/^ *\[ *[0-9]*\] *//' |
                     awk '$1 == ".text" { print $4, $5 }')
[ -n "$off" ] || { echo "no .text section in $entry" >&2; exit 1; }
head -c $((16#$size)) /dev/zero | tr '\0' '\314' |
  dd of="$entry" bs=1 seek=$((16#$off)) conv=notrunc status=none
cp "$entry" damaged
"$bin" run one.graph --random 1 --cache-dir cache --output-dir cached >/dev/null
cmp cached/out0.npy interpreted/out0.npy
cmp -s "$entry" damaged && { echo "the damaged entry was kept" >&2; exit 1; }
# an entry without its trailer
whole=$(stat -c %s "$entry")
head -c $((whole - 16)) "$entry" > bare && mv bare "$entry"
"$bin" run one.graph --random 1 --cache-dir cache --output-dir again >/dev/null
cmp again/out0.npy interpreted/out0.npy
[ "$(stat -c %s "$entry")" = "$whole" ] || { echo "the entry without its trailer was kept" >&2; exit 1; }
echo "a damaged cache entry was compiled again; the values are the interpreter's"
