#!/usr/bin/env bash
# The fusion issue's pointwise and compile figures through the relgraph
# command, with NumPy (1.24, preallocated out= buffers and plain) and, when
# installed, PyTorch eager (1 thread) on the same expressions in the same
# run, and the hand-written C loops of bench/peer_pointwise.c (the host's
# speed drifts: only ratios measured together mean anything):
#   2*x + 1 and sigmoid(a)*tanh(b) + c*d over 10^7 float32, fused
#   (fast_run) on 1 and 2 threads and unfused (--query none);
#   the first compile of a fused kernel (an empty cache directory), a
#   compile that finds it in the cache, and the LSTM fwd+bwd's whole
#   compile with a warm cache.
#   bench/run_fusion.sh BUILD_DIR [REPEATS]
set -u
build=${1:?usage: run_fusion.sh BUILD_DIR [REPEATS]}
reps=${2:-21}
here=$(cd "$(dirname "$0")" && pwd)
rg="$build/relgraph"
field() { sed -n "s/^$1 \([0-9.]*\) ms.*/\1/p"; }
median() { "$rg" run "$@" --random 1 --repeat "$reps" | field median; }
for g in axpb_f32 sigtanh_f32; do
  f="$here/graphs/$g.graph"
  echo "{\"bench\": \"$g\", \"fused_1thread_ms\": $(median "$f"), \"fused_2threads_ms\": $(median "$f" --threads 2), \"unfused_ms\": $(median "$f" --query none)}"
done
cache=$(mktemp -d)
cold=$(RELGRAPH_CACHE_DIR=$cache "$rg" run "$here/graphs/sigtanh_f32.graph" --random 1 --repeat 2 | field "compiled in")
warm=$(RELGRAPH_CACHE_DIR=$cache "$rg" run "$here/graphs/sigtanh_f32.graph" --random 1 --repeat 2 | field "compiled in")
none=$(RELGRAPH_CODEGEN=0 "$rg" run "$here/graphs/sigtanh_f32.graph" --random 1 --repeat 2 | field "compiled in")
RELGRAPH_CACHE_DIR=$cache "$rg" run "$here/graphs/lstm_grad.graph" --random 1 --repeat 2 >/dev/null
lstm=$(RELGRAPH_CACHE_DIR=$cache "$rg" run "$here/graphs/lstm_grad.graph" --random 1 --repeat 2 | field "compiled in")
rm -rf "$cache"
echo "{\"bench\": \"compile\", \"sigtanh_cold_cache_ms\": $cold, \"sigtanh_warm_cache_ms\": $warm, \"sigtanh_no_codegen_ms\": $none, \"lstm_grad_warm_cache_ms\": $lstm}"
if [ -x "$build/bench/peer_pointwise" ]; then "$build/bench/peer_pointwise" "$reps"
else echo '{"peer": "hand C", "skipped": "built only where glibc has libmvec"}'; fi
env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=1 /usr/bin/python3 - "$reps" <<'PY' 2>/dev/null || echo '{"peer": "numpy", "skipped": "python3-numpy missing"}'
import sys, time, numpy as np
reps = int(sys.argv[1])
n = 10**7
r = np.random.default_rng(1)
x, a, b, c, d = (r.standard_normal(n).astype(np.float32) for _ in range(5))
t1, t2 = np.empty_like(x), np.empty_like(x)
def med(fn):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2] * 1e3
def axpb_out():
    np.multiply(x, 2, out=t1); np.add(t1, 1, out=t1)
def sig_out():
    np.negative(a, out=t1); np.exp(t1, out=t1); np.add(t1, 1, out=t1); np.reciprocal(t1, out=t1)
    np.tanh(b, out=t2); np.multiply(t1, t2, out=t1); np.multiply(c, d, out=t2); np.add(t1, t2, out=t1)
print('{"peer": "numpy", "axpb_out_ms": %.3f, "axpb_ms": %.3f, "sigtanh_out_ms": %.3f, "sigtanh_ms": %.3f}' % (
    med(axpb_out), med(lambda: 2 * x + 1), med(sig_out),
    med(lambda: 1 / (1 + np.exp(-a)) * np.tanh(b) + c * d)))
try:
    import torch
except ImportError:
    print('{"peer": "torch", "skipped": "python3-torch missing"}')
    sys.exit(0)
torch.set_num_threads(1)
ta, tb, tc, td, tx = (torch.from_numpy(v) for v in (a, b, c, d, x))
print('{"peer": "torch", "threads": 1, "axpb_ms": %.3f, "sigtanh_ms": %.3f}' % (
    med(lambda: 2 * tx + 1), med(lambda: torch.sigmoid(ta) * torch.tanh(tb) + tc * td)))
PY
