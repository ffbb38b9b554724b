#!/bin/sh
# run_kanren.sh — the relational core against faster-miniKanren, the same
# programs in the same run: `relgraph kanren bench/kanren/bench.kn` and
# Racket running the very same files (bench.kn and the files it loads:
# appendo, membero, the dot distribution, zebra, the quine interpreter)
# on faster-miniKanren.  The files are written in the part of the language
# the two share (defrel, fresh, conde, ==, =/=, absento, symbolo,
# quasiquote), so nothing is translated; a small module made here supplies
# what relgraph's language has built in: iota, bench (N warm-up runs,
# then the median and minimum of N timed runs) and load (as include).
#
#   bench/run_kanren.sh RELGRAPH FMK_DIR [ROUNDS]
#
# RELGRAPH is the relgraph binary; FMK_DIR a checkout of faster-miniKanren
# (its public repository: mk.rkt and mk.scm); Racket is Debian's `racket`.
# Each round runs both programs once, alternating which goes first, pinned
# to one core when taskset exists.  For each benchmark the script prints
# both medians of every round and the median over rounds of the per-round
# ratio faster-miniKanren / relgraph (above 1: relgraph is faster).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: run_kanren.sh RELGRAPH FMK_DIR [ROUNDS]}
fmk=$(cd "${2:?usage: run_kanren.sh RELGRAPH FMK_DIR [ROUNDS]}" && pwd)
rounds=${3:-5}
command -v racket >/dev/null 2>&1 || { echo "run_kanren: racket is not installed (apt-get install racket)" >&2; exit 1; }
[ -f "$fmk/mk.rkt" ] || { echo "run_kanren: no mk.rkt in $fmk" >&2; exit 1; }
pin=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 1"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/peer.rkt" <<EOF
#lang racket/base
;; bench/kanren/bench.kn on faster-miniKanren (made by bench/run_kanren.sh)
(require (file "$fmk/mk.rkt") racket/include (for-syntax racket/base))
(define (iota n) (build-list n (lambda (i) i)))
(define (bench-thunk n thunk)
  (for ([i (in-range n)]) (thunk))
  (define ts (sort (for/list ([i (in-range n)])
                     (define t0 (current-inexact-milliseconds))
                     (thunk)
                     (- (current-inexact-milliseconds) t0))
                   <))
  (printf "bench: median ~a ms, min ~a ms over ~a runs\n"
          (real->decimal-string (list-ref ts (quotient n 2)) 4) (real->decimal-string (car ts) 4) n))
(define-syntax-rule (bench n e) (bench-thunk n (lambda () e)))
(define-syntax (load stx)
  (syntax-case stx ()
    [(_ f) (datum->syntax stx (list 'include (list 'file (string-append "$here/kanren/" (syntax-e #'f)))))]))
(load "bench.kn")
EOF
raco make "$work/peer.rkt"
# "LABEL bench: median X ms, ..." -> "LABEL<TAB>X"
medians() { sed -n 's/^\(.*[^ ]\) *bench: median \([0-9.]*\) ms.*/\1\t\2/p'; }
i=0
while [ "$i" -lt "$rounds" ]; do
  if [ $((i % 2)) -eq 0 ]; then
    $pin "$bin" kanren "$here/kanren/bench.kn" | medians > "$work/rg.$i"
    $pin racket "$work/peer.rkt" | medians > "$work/fmk.$i"
  else
    $pin racket "$work/peer.rkt" | medians > "$work/fmk.$i"
    $pin "$bin" kanren "$here/kanren/bench.kn" | medians > "$work/rg.$i"
  fi
  i=$((i + 1))
done
printf '| benchmark | relgraph, ms (rounds) | faster-miniKanren, ms (rounds) | fmk / relgraph, median of rounds |\n'
printf '|---|---|---|---|\n'
cut -f1 "$work/rg.0" | while IFS= read -r label; do
  awk -F '\t' -v label="$label" -v rounds="$rounds" -v work="$work" '
    function med(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    BEGIN {
      for (r = 0; r < rounds; r++) {
        while ((getline line < (work "/rg." r)) > 0) { split(line, f, "\t"); if (f[1] == label) rg[r] = f[2] }
        while ((getline line < (work "/fmk." r)) > 0) { split(line, f, "\t"); if (f[1] == label) pk[r] = f[2] }
        close(work "/rg." r); close(work "/fmk." r)
        ra = ra sep rg[r]; pa = pa sep pk[r]; sep = ", "
        ratio[r + 1] = rg[r] > 0 ? pk[r] / rg[r] : 0
      }
      gsub(/\|/, "\\|", label)
      printf "| `%s` | %s | %s | %.2fx |\n", label, ra, pa, med(ratio, rounds)
    }'
done
