"""peer_aesara_distribute.py — Aesara 2.9.4's relational dot distribution,
the kanren relation of Aesara's graph rewriting guide as written there, on
the graphs of bench_rewrite's distribution rows, for
bench/run_distribute.sh to run in the same loop as `relgraph rewrite`.

Shapes (over a float64 matrix A and vectors x1..):
  chain N      A.dot(((x1 + x2) + x3) ... + xN)
  flat N       A.dot(add(x1, ..., xN)), one n-ary add
  balanced N   A.dot of a balanced tree of additions over N leaves
  nested N     e0 = x0, e_k = A.dot(e_{k-1} + x_k), k = 1..N
The distribute direction rewrites the graph with the guide's optimizer
(EquilibriumOptimizer([KanrenRelationSub(dot_distributeo)],
max_use_ratio=10)); gather rewrites the distributed graph with the
relation's arguments swapped.  Each run rewrites a fresh FunctionGraph
(cloned, untimed) and only the rewrite is timed.

  python3 peer_aesara_distribute.py SHAPE N distribute|gather RUNS

Prints one JSON line: the median over RUNS of the rewrite's seconds and
the node counts before and after.  Needs Aesara and its kanren, etuples,
unification and cons on PYTHONPATH, and the `packaging` module (without
it etuples does not register its unification rules and nothing matches).
"""
import json
import sys
import time
import warnings

import aesara
import aesara.tensor as at
from aesara.graph.fg import FunctionGraph
from aesara.graph.rewriting.basic import EquilibriumGraphRewriter
from aesara.graph.rewriting.kanren import KanrenRelationSub
from aesara.tensor.math import _dot
from etuples import etuple
from kanren import conso, eq, fact, heado, tailo
from kanren.assoccomm import assoc_flatten, associative
from kanren.core import lall
from kanren.graph import mapo
from unification import vars as lvars

fact(associative, at.add)


def dot_distributeo(in_lv, out_lv):
    """The guide's relation: A.dot(a + b ...) == A.dot(a) + A.dot(b) ..."""
    A_lv, add_term_lv, add_cdr_lv, dot_cdr_lv, add_flat_lv = lvars(5)
    return lall(
        eq(in_lv, etuple(_dot, A_lv, add_term_lv)),
        heado(at.add, add_term_lv),
        assoc_flatten(add_term_lv, add_flat_lv),
        tailo(add_cdr_lv, add_flat_lv),
        conso(at.add, dot_cdr_lv, out_lv),
        mapo(lambda x, y: conso(_dot, etuple(A_lv, x), y), add_cdr_lv, dot_cdr_lv),
    )


def distribute_rewriter():
    return EquilibriumGraphRewriter([KanrenRelationSub(dot_distributeo)], max_use_ratio=10)


def gather_rewriter():
    return EquilibriumGraphRewriter([KanrenRelationSub(lambda x, y: dot_distributeo(y, x))],
                                    max_use_ratio=10)


def build(shape, n):
    A = at.matrix("A")
    xs = [at.vector("x%d" % i) for i in range(n + (1 if shape == "nested" else 0))]
    if shape == "chain":
        s = xs[0]
        for x in xs[1:]:
            s = s + x
        out = A.dot(s)
    elif shape == "flat":
        out = A.dot(at.add(*xs))
    elif shape == "balanced":
        level = list(xs)
        while len(level) > 1:
            nxt = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        out = A.dot(level[0])
    elif shape == "nested":
        e = xs[0]
        for x in xs[1:]:
            e = A.dot(e + x)
        out = e
    else:
        raise SystemExit("unknown shape " + shape)
    return [A] + xs, out


def main():
    warnings.simplefilter("ignore")
    shape, n, direction, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    sys.setrecursionlimit(100000)
    ins, out = build(shape, n)
    fg0 = FunctionGraph(ins, [out], clone=True)
    if direction == "gather":
        distribute_rewriter().rewrite(fg0)
        rewriter = gather_rewriter()
    else:
        rewriter = distribute_rewriter()
    ts = []
    for _ in range(runs):
        fg = fg0.clone()
        before = len(fg.apply_nodes)
        t = time.perf_counter()
        rewriter.rewrite(fg)
        ts.append(time.perf_counter() - t)
        after = len(fg.apply_nodes)
    ts.sort()
    print(json.dumps({"peer": "aesara " + aesara.__version__, "shape": shape, "n": n,
                      "direction": direction, "nodes": [before, after],
                      "seconds": ts[len(ts) // 2]}), flush=True)


if __name__ == "__main__":
    main()
