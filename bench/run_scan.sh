#!/usr/bin/env bash
# Scan benchmarks with their peers in one run (the host's speed drifts, so
# only ratios measured together mean anything): bench_scan, NumPy's cumsum
# on the same 10^6 float32 values, and for the LSTM forward pass and
# fwd+bwd (loss = sum of the outputs, gradients of the weights and biases)
# torch.nn.LSTM (1 thread) and a hand-written C + OpenBLAS LSTM when given.
#   bench/run_scan.sh BUILD_DIR [LSTM_C_BINARY]
# Each peer is skipped when missing (python3-numpy, python3-torch).  torch
# runs with OMP_NUM_THREADS=1 as well as set_num_threads(1): its OpenMP pool
# otherwise spins on a busy machine and its times mean nothing.
set -u
build=${1:?usage: run_scan.sh BUILD_DIR [LSTM_C_BINARY]}
lstm_c=${2:-}
# the same OpenBLAS kernels as the peers below: none chosen by the environment
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/bench/bench_scan" 7
/usr/bin/python3 - <<'PY' 2>/dev/null || echo '{"peer": "numpy", "skipped": "python3-numpy missing"}'
import time, numpy as np
x = np.random.default_rng(1).standard_normal(10**6).astype(np.float32)
ts = []
for _ in range(7):
    t = time.perf_counter(); np.cumsum(x); ts.append(time.perf_counter() - t)
print('{"peer": "np.cumsum", "steps": 1000000, "ns_per_step": %.2f}' % (sorted(ts)[3] / 1e6 * 1e9))
PY
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 /usr/bin/python3 - <<'PY' 2>/dev/null || echo '{"peer": "torch", "skipped": "python3-torch missing"}'
import time, torch
torch.set_num_threads(1)
T, B, I, H = 100, 32, 256, 256
m = torch.nn.LSTM(I, H)
x = torch.randn(T, B, I)
ts = []
with torch.no_grad():
    m(x)
    for _ in range(11):
        t = time.perf_counter(); m(x); ts.append(time.perf_counter() - t)
print('{"peer": "torch.nn.LSTM", "threads": 1, "ms": %.2f}' % (sorted(ts)[5] * 1e3))
ts = []
for _ in range(12):
    m.zero_grad(set_to_none=True)
    t = time.perf_counter(); m(x)[0].sum().backward(); ts.append(time.perf_counter() - t)
ts = ts[1:]
print('{"peer": "torch.nn.LSTM", "mode": "fwd+bwd", "threads": 1, "ms": %.2f}' % (sorted(ts)[5] * 1e3))
PY
if [[ -n "$lstm_c" && -x "$lstm_c" ]]; then
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$lstm_c" bench 100 32 256 256 11 | grep '"threads": 1,' | grep lstm_c
fi
