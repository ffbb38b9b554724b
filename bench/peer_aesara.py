"""peer_aesara.py — Aesara 2.9.4 on the workloads of bench_vm and bench_scan,
for bench/run_aesara.sh to run in the same loop as relgraph.

Each workload is the one the relgraph benchmark times, built with Aesara's
own API as its users write it:

  dispatch_keep, dispatch_release  a chain of 1000 scalar float64 adds of
        a constant, compiled with no rewrites (so the chain stays 1000
        nodes) on the C VM, keeping intermediates (allow_gc=False) or
        freeing them after their last use; ns per node of a call
  ifelse  nested ifelse(c, v, b) on float64 scalars, 10 and 1000 levels,
        no rewrites, lazy C VM; ns per level from the difference
  call    a one-op function x + 1 on a float64 scalar, default mode; us
  scan_affine  x_t = 0.5 x_{t-1} + s_t over float64 vectors of 10, 10^4
        steps, the whole trace returned, default mode; ns per step
  scan_compile_rnn  aesara.function of examples/graphs/rnn.graph's
        computation (a tanh RNN step with two outputs, float32) in the
        default mode (FAST_RUN: rewrites of the outer graph and the step,
        linking; the C code cached on disk after the first); ms

Prints one JSON line per figure; times are medians of the given number of
runs (each run's call repeated to at least ~0.2 s where one call is short).
Needs Aesara and its dependencies on PYTHONPATH (see run_aesara.sh).
"""
import json
import sys
import time

import numpy as np

import aesara
import aesara.tensor as at
from aesara.compile.mode import Mode
from aesara.ifelse import ifelse
from aesara.link.c.basic import CLinker  # noqa: F401  (fails early without a C compiler)
from aesara.link.vm import VMLinker


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def per_call(f, args, reps, inner):
    """Median over reps of the mean time of `inner` calls, in seconds."""
    for _ in range(10):
        f(*args)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            f(*args)
        ts.append((time.perf_counter() - t) / inner)
    return median(ts)


def emit(name, **kw):
    print(json.dumps({"peer": "aesara " + aesara.__version__, "bench": name, **kw}), flush=True)


def dispatch(reps):
    x = at.dscalar("x")
    y = x
    for _ in range(1000):
        y = y + 1.0
    for keep in (True, False):
        mode = Mode(linker=VMLinker(allow_gc=not keep, use_cloop=True), optimizer=None)
        f = aesara.function([x], y, mode=mode)
        s = per_call(f, (0.5,), reps, 200)
        emit("dispatch_keep" if keep else "dispatch_release", ns_per_node=round(s / 1000 * 1e9, 1))


def nested_ifelse(reps):
    c = at.bscalar("c")
    a, b = at.dscalar("a"), at.dscalar("b")
    per = []
    for depth in (10, 1000):
        v = a
        for _ in range(depth):
            v = ifelse(c, v, b)
        mode = Mode(linker=VMLinker(allow_gc=False, use_cloop=True, lazy=True), optimizer=None)
        f = aesara.function([c, a, b], v, mode=mode)
        per.append(per_call(f, (1, 1.0, 2.0), reps, 50))
    emit("ifelse", ns_per_level=round((per[1] - per[0]) / 990 * 1e9, 1))


def call(reps):
    x = at.dscalar("x")
    f = aesara.function([x], x + 1.0)
    emit("call", us_per_call=round(per_call(f, (0.5,), reps, 5000) * 1e6, 3))


def scan_affine(reps):
    s = at.dmatrix("s")
    x0 = at.dvector("x0")
    xs, _ = aesara.scan(lambda s_t, x: 0.5 * x + s_t, sequences=[s], outputs_info=[x0])
    f = aesara.function([s, x0], xs)
    rng = np.random.default_rng(1)
    sv, x0v = rng.standard_normal((10000, 10)) - 0.5, rng.standard_normal(10) - 0.5
    emit("scan_affine_d10", ns_per_step=round(per_call(f, (sv, x0v), reps, 1) / 1e4 * 1e9, 2))


def rnn_function():
    x = at.tensor3("x", dtype="float32")
    h0 = at.matrix("h0", dtype="float32")
    W = at.matrix("W", dtype="float32")
    U = at.matrix("U", dtype="float32")
    b = at.vector("b", dtype="float32")

    def step(x_t, h, W):
        h2 = at.tanh(at.dot(h, W) + at.dot(x_t, U) + b)
        return h2, h2.sum()

    (hs, sums), _ = aesara.scan(step, sequences=[x], outputs_info=[h0, None], non_sequences=[W])
    return aesara.function([x, h0, W, U, b], [hs, sums])


def scan_compile(reps):
    rnn_function()  # the first compile writes the C modules to Aesara's cache
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        rnn_function()
        ts.append(time.perf_counter() - t)
    emit("scan_compile_rnn", ms=round(median(ts) * 1e3, 1))


def main():
    sys.setrecursionlimit(100000)  # Aesara walks a 1000-node chain recursively
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    dispatch(reps)
    nested_ifelse(reps)
    call(reps)
    scan_affine(reps)
    scan_compile(reps)


if __name__ == "__main__":
    main()
