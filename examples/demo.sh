#!/usr/bin/env bash
# The relgraph demonstration, on the embedded default CPU backend:
#   1. relational programs (miniKanren) from examples/kanren/,
#   2. a relational rewrite rule run forwards and backwards on a graph,
#   3. the standard rewrites and a compiled graph run on random inputs,
#   4. loops (Scan): a cumulative sum, Fibonacci and an RNN,
#   5. gradients, built from each op's rule and checked numerically,
#   6. optimization search: matrix-chain orders by e-graph and cost,
#   7. backends: nodes placed on the mirror checking device with the
#      transfers between devices, and why CUDA cannot run here.
set -euo pipefail
bin=${1:-relgraph}
case $bin in */*) bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin") ;; esac # the script moves
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# prints the command as it can be pasted (words with spaces quoted), runs it
show() {
  printf '$ relgraph'
  for a in "$@"; do case $a in *' '*) printf " '%s'" "$a" ;; *) printf ' %s' "$a" ;; esac; done
  echo
  "$bin" "$@"
  echo
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the paths below are the repository's (or the installed share/relgraph's)
cd "$here/.."

echo "== 1. relational programs"
for f in "$here"/kanren/*.kn; do
  show kanren "examples/kanren/$(basename "$f")"
done 2>&1 | sed "s|$here|examples|g"

echo "== 2. one relation, two directions: dot distribution and gathering"
show print examples/graphs/dot_sum.graph
# "-relational" leaves out the standard database's own copy of these rules
show rewrite examples/graphs/dot_sum.graph --rules examples/rules/distribute.kn --query "distribute -relational" --trace
"$bin" rewrite examples/graphs/dot_sum.graph --rules examples/rules/distribute.kn --query "distribute -relational" --format sexp > "$work/distributed.graph"
echo "\$ relgraph rewrite (the distributed graph) --rules examples/rules/distribute.kn --query \"gather -relational\""
"$bin" rewrite "$work/distributed.graph" --rules examples/rules/distribute.kn --query "gather -relational"
echo
echo "\$ relgraph rewrite examples/graphs/dot_sum.graph --rules examples/rules/distribute.kn   (both directions at once)"
"$bin" rewrite examples/graphs/dot_sum.graph --rules examples/rules/distribute.kn || true
echo
show rewrite examples/graphs/dot_sum.graph --rules examples/rules/distribute-flat.kn --query distribute-flat

echo "== 3. standard rewrites, compile and run"
show --version   # the OpenBLAS kernels the products run on
show rewrite examples/graphs/mlp.graph --profile
show run examples/graphs/mlp.graph --random 1 --repeat 1000 --profile

echo "== 4. loops (Scan)"
show print examples/graphs/cumsum.graph
show run examples/graphs/cumsum.graph --random 1
show run examples/graphs/fibonacci.graph
show run examples/graphs/rnn.graph --random 1 --repeat 100

echo "== 5. gradients"
show print examples/graphs/grad.graph
show rewrite examples/graphs/grad.graph
show print examples/graphs/mlp_loss.graph
show check-grads examples/graphs/mlp_loss.graph --wrt W1 --wrt b1 --wrt W2 --wrt b2 --trials 3
show run examples/graphs/pow16.graph --input x=tests/golden/run/x15.npy
show check-grads examples/graphs/lstm_loss.graph --wrt W_ih --wrt W_hh --wrt b_ih --wrt b_hh --trials 3
show run examples/graphs/lstm_loss.graph --random 1 --profile
"$bin" check-grads --ops --trials 5 | tail -1
echo

echo "== 6. optimization search"
show search examples/graphs/matrix_chain.graph --rules examples/rules/assoc.kn --answers 3

echo "== 7. backends: placement and transfers"
# mirror: a checking device whose memory the CPU kernels cannot read; the
# nodes it runs go there, the others stay on the CPU, values cross once
show run tests/golden/run/placement.graph --random 7 --backend mirror --placement --query none
show run examples/graphs/mlp.graph --random 1 --backend mirror --placement
# CUDA where a GPU is present; here, the reason it cannot run
show run examples/graphs/mlp.graph --random 1 --backend cuda || true
