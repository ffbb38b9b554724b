#!/usr/bin/env bash
# Checks that a shared library exports only declared API: every dynamic
# symbol it defines (functions and data) must be declared in one of the
# public headers.  Symbols the linker makes (_init, _end, ...) are skipped.
#   check_exports.sh LIBRARY HEADER_DIR...
set -euo pipefail
lib=$1
shift
headers=()
for d in "$@"; do headers+=("$d"/*.h); done
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^_' | sort -u)
if [[ -z "$syms" ]]; then
  echo "check_exports: $lib exports nothing" >&2
  exit 1
fi
# every identifier that appears in the headers, once
declared=$(cat "${headers[@]}" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u)
extra=$(comm -23 <(echo "$syms") <(echo "$declared"))
count=$(wc -l <<<"$syms")
if [[ -n "$extra" ]]; then
  echo "check_exports: $lib exports symbols no public header declares:" >&2
  echo "$extra" | sed 's/^/  /' >&2
  exit 1
fi
echo "check_exports: all $count exported symbols are declared in the public headers"
