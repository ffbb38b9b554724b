#!/usr/bin/env bash
# The install test: installs the built tree into a staging prefix, then
# builds the quickstart example as a consumer outside the tree would, once
# through pkg-config (shared and static) and once through
# find_package(relgraph) with CMake, and runs each program.  The prefix is
# chosen here, after configuring, so the installed files must not depend on
# the prefix chosen at configure time.
#   check_install.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
stage="$work/stage"
cmake --install "$build" --prefix "$stage" >/dev/null
pc=$(dirname "$(find "$stage" -name relgraph.pc | head -1)")
quick="$src/examples/c/quickstart.c"
expect='A @ (x + y) = float64 (3) [2.0 6.0 12.0]'

check() { # NAME PROGRAM [ENV...]
  local name=$1 prog=$2 out
  shift 2
  out=$(env "$@" "$prog")
  if ! grep -qF "$expect" <<<"$out"; then
    echo "install test: $name printed:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "ok  $name"
}

libdir=$(PKG_CONFIG_PATH="$pc" pkg-config --variable=libdir relgraph)
case "$libdir" in
  "$stage"/*) ;;
  *) echo "install test: relgraph.pc points to $libdir, outside $stage" >&2; exit 1 ;;
esac
pkgc() { PKG_CONFIG_PATH="$pc" pkg-config "$@" relgraph; }
# shellcheck disable=SC2046  # pkg-config's flags are words
cc "$quick" $(pkgc --cflags) $(pkgc --libs) -o "$work/pc_shared"
check "pkg-config, shared" "$work/pc_shared" LD_LIBRARY_PATH="$libdir"
# shellcheck disable=SC2046
cc "$quick" $(pkgc --cflags) "$libdir/librelgraph.a" $(pkgc --static --libs | sed 's/-lrelgraph//') \
  -o "$work/pc_static"
check "pkg-config, static" "$work/pc_static"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$stage" \
  -DQUICKSTART="$quick" >/dev/null
cmake --build "$work/consumer" >/dev/null
check "find_package, static" "$work/consumer/consumer_static"
check "find_package, shared" "$work/consumer/consumer_shared" LD_LIBRARY_PATH="$libdir"
