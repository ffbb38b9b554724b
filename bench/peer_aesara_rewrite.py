"""peer_aesara_rewrite.py — Aesara 2.9.4's FAST_RUN rewrites on the graph of
bench_rewrite's `fast_run` rows, for bench/run_rewrite.sh to run in the same
loop as `relgraph rewrite`.

The graph is BLOCKS ten-node blocks over a float64 vector x and matrix A:
y = log(1 + x*x); z = -(-(y*1)); w = (z*x)/x; x = w**2 + A.dot(x), built
with Aesara's API as its users write it (bench/gen_mixed.sh writes the same
graph as a relgraph graph file).  Each run clones the graph into a fresh
FunctionGraph with the features aesara.function gives it (std_fgraph) and
times the FAST_RUN optimizer's rewrite of it alone.

  python3 peer_aesara_rewrite.py BLOCKS RUNS

Prints one JSON line: the median over RUNS of the rewrite's seconds, and ns
per node of the graph before rewriting.  Needs Aesara on PYTHONPATH (see
run_aesara.sh).
"""
import json
import sys
import time
import warnings

import aesara
import aesara.tensor as at
from aesara.compile.function.types import std_fgraph
from aesara.compile.io import In, SymbolicOutput
from aesara.compile.mode import get_mode


def build(blocks):
    A = at.matrix("A")
    x0 = at.vector("x")
    x = x0
    for _ in range(blocks):
        y = at.log(1 + x * x)
        z = -(-(y * 1))
        w = (z * x) / x
        x = w ** 2 + at.dot(A, x)
    return [A, x0], [x]


def main():
    warnings.simplefilter("ignore")
    blocks, runs = int(sys.argv[1]), int(sys.argv[2])
    sys.setrecursionlimit(max(10000, 40 * blocks))
    ins, outs = build(blocks)
    rewriter = get_mode("FAST_RUN").optimizer
    ts, nodes = [], 0
    for _ in range(runs):
        fg, _ = std_fgraph([In(i) for i in ins], [SymbolicOutput(o) for o in outs], force_clone=True)
        nodes = len(fg.apply_nodes)
        t = time.perf_counter()
        rewriter.rewrite(fg)
        ts.append(time.perf_counter() - t)
    ts.sort()
    s = ts[len(ts) // 2]
    print(json.dumps({"peer": "aesara " + aesara.__version__, "blocks": blocks, "nodes": nodes,
                      "seconds": s, "ns_per_node": s / nodes * 1e9}), flush=True)


if __name__ == "__main__":
    main()
