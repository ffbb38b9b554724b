#!/usr/bin/env bash
# The LSTM of the benchmarks (T 100, B 32, I = H = 256, float32) through the
# relgraph command, forward (bench/graphs/lstm_fwd.graph) and fwd+bwd
# (bench/graphs/lstm_grad.graph), on 1 and 2 threads, interleaved ROUNDS
# times with the hand-written C + OpenBLAS LSTM (its own program, run
# unchanged) and torch.nn.LSTM, so that every ratio compares runs made
# minutes apart on a host whose speed drifts (the order within a round
# rotates from round to round).  Prints each round's medians
# and ratios, then the median of the per-round ratios with their range.
#   bench/run_lstm.sh BUILD_DIR LSTM_C_BINARY [ROUNDS] [REPEATS]
# Inputs are .npy files of sensible scale (x uniform in [-1, 1], weights in
# [-1/16, 1/16], zero biases and states; --random's wide weights saturate
# the gates).  torch is skipped when python3-torch is missing.
# OpenBLAS's kernels: relgraph runs with the ones it chooses (`relgraph
# --version` names them; it replaces OpenBLAS's generic fallback on
# processors OpenBLAS does not recognise).  The peers run twice: as they
# start by default (OPENBLAS_CORETYPE unset), and with OPENBLAS_CORETYPE
# naming relgraph's kernels, so that one set of ratios compares the same
# products.  torch runs with OMP_WAIT_POLICY=passive (its two-thread runs
# are erratic otherwise).
set -u
build=${1:?usage: run_lstm.sh BUILD_DIR LSTM_C_BINARY [ROUNDS] [REPEATS]}
lstm_c=${2:?usage: run_lstm.sh BUILD_DIR LSTM_C_BINARY [ROUNDS] [REPEATS]}
rounds=${3:-5}
reps=${4:-7}
here=$(cd "$(dirname "$0")" && pwd)
rg="$build/relgraph"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" <<'PY' || { echo "run_lstm.sh: python3-numpy is needed for the inputs" >&2; exit 1; }
import sys, numpy as np
d, r = sys.argv[1], np.random.default_rng(7)
T, B, I, H = 100, 32, 256, 256
u = lambda s, a: r.uniform(-a, a, s).astype(np.float32)
np.save(d + "/x.npy", u((T, B, I), 1.0))
for n in ("h0", "c0"): np.save(d + "/" + n + ".npy", np.zeros((B, H), np.float32))
for n, k in (("W_ih", I), ("W_hh", H)): np.save(d + "/" + n + ".npy", u((4 * H, k), 1 / 16))
for n in ("b_ih", "b_hh"): np.save(d + "/" + n + ".npy", np.zeros(4 * H, np.float32))
PY
core=$(env -u OPENBLAS_CORETYPE "$rg" --version | sed -n 's/^OpenBLAS kernels: \([A-Za-z0-9]*\).*/\1/p')
echo "relgraph runs OpenBLAS's $core kernels; peers by default: $(env -u OPENBLAS_CORETYPE /usr/bin/python3 -c '
import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p
print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown)"
blas_env() { # KERNELS(default|same) -> env arguments for a peer
  if [ "$1" = same ]; then echo "OPENBLAS_CORETYPE=$core"; else echo "-u OPENBLAS_CORETYPE"; fi
}
inputs=()
for n in x h0 c0 W_ih W_hh b_ih b_hh; do inputs+=(--input "$n=$dir/$n.npy"); done
rgrun() { # GRAPH THREADS -> median ms
  env -u OPENBLAS_CORETYPE "$rg" run "$here/graphs/$1.graph" "${inputs[@]}" --threads "$2" --repeat "$reps" | sed -n 's/^median \([0-9.]*\) ms.*/\1/p'
}
torch_run() { # THREADS KERNELS -> "fwd_ms fwdbwd_ms"
  env $(blas_env "$2") OMP_WAIT_POLICY=passive OMP_NUM_THREADS="$1" /usr/bin/python3 - "$1" "$reps" <<'PY' 2>/dev/null || echo "- -"
import sys, time, torch
torch.set_num_threads(int(sys.argv[1])); reps = int(sys.argv[2])
m = torch.nn.LSTM(256, 256); x = torch.rand(100, 32, 256) * 2 - 1
def med(f):
    f(); ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2] * 1e3
with torch.no_grad(): fwd = med(lambda: m(x))
def fb():
    m.zero_grad(set_to_none=True); m(x)[0].sum().backward()
print("%.2f %.2f" % (fwd, med(fb)))
PY
}
c_run() { # KERNELS -> "fwd1 fb1 fwd2 fb2" (the peer's medians)
  env $(blas_env "$1") "$lstm_c" bench 100 32 256 256 "$reps" | /usr/bin/python3 -c '
import sys, json
v = {}
for line in sys.stdin:
    try: r = json.loads(line)
    except ValueError: continue
    if r.get("name") == "lstm_c": v[(r["threads"], r["mode"])] = r["ms"]
print(" ".join("%.2f" % v.get(k, float("nan")) for k in ((1, "fwd"), (1, "fwd+bwd"), (2, "fwd"), (2, "fwd+bwd"))))'
}
ratios=$dir/ratios
# The jobs of a round start one place later each round: whatever runs
# first after a round's heavy 2-thread jobs is not always relgraph's.
job() {
  case $1 in
  0) f1=$(rgrun lstm_fwd 1) ;;
  1) b1=$(rgrun lstm_grad 1) ;;
  2) f2=$(rgrun lstm_fwd 2) ;;
  3) b2=$(rgrun lstm_grad 2) ;;
  4) read -r cf1 cb1 cf2 cb2 <<<"$(c_run default)" ;;
  5) read -r tf1 tb1 <<<"$(torch_run 1 default)" ;;
  6) read -r tf2 tb2 <<<"$(torch_run 2 default)" ;;
  7) read -r sf1 sb1 sf2 sb2 <<<"$(c_run same)" ;;
  8) read -r uf1 ub1 <<<"$(torch_run 1 same)" ;;
  9) read -r uf2 ub2 <<<"$(torch_run 2 same)" ;;
  esac
}
for ((k = 1; k <= rounds; k++)); do
  for ((j = 0; j < 10; j++)); do job $(((j + k) % 10)); done
  echo "round $k: relgraph fwd $f1 / $f2 ms, fwd+bwd $b1 / $b2 ms (1 / 2 threads); peers by default: C fwd $cf1 / $cf2, fwd+bwd $cb1 / $cb2; torch fwd $tf1 / $tf2, fwd+bwd $tb1 / $tb2; peers on $core: C fwd $sf1 / $sf2, fwd+bwd $sb1 / $sb2; torch fwd $uf1 / $uf2, fwd+bwd $ub1 / $ub2"
  /usr/bin/python3 -c 'import sys; a = [float(v) if v not in ("-", "") else float("nan") for v in sys.argv[1:]]; n = len(a) // 2; print(" ".join("%.4f" % (a[i] / a[n + i]) for i in range(n)))' \
    "$f1" "$b1" "$f2" "$b2" "$f1" "$b1" "$f2" "$b2" "$f1" "$b1" "$f2" "$b2" "$f1" "$b1" "$f2" "$b2" \
    "$cf1" "$cb1" "$cf2" "$cb2" "$tf1" "$tb1" "$tf2" "$tb2" \
    "$sf1" "$sb1" "$sf2" "$sb2" "$uf1" "$ub1" "$uf2" "$ub2" >>"$ratios"
done
/usr/bin/python3 - "$ratios" <<'PY'
import sys, math, statistics
rows = [[float(v) for v in l.split()] for l in open(sys.argv[1]) if l.strip()]
names = ["fwd 1 thread", "fwd+bwd 1 thread", "fwd 2 threads", "fwd+bwd 2 threads"]
for peer, off in (("C + OpenBLAS, its default kernels", 0), ("torch.nn.LSTM, its default kernels", 4),
                  ("C + OpenBLAS, relgraph's kernels", 8), ("torch.nn.LSTM, relgraph's kernels", 12)):
    for i, n in enumerate(names):
        col = [r[off + i] for r in rows if not math.isnan(r[off + i])]
        if col:
            print("relgraph / %s, %s: median %.2fx (%.2f-%.2f over %d rounds)" % (peer, n, statistics.median(col), min(col), max(col), len(col)))
PY
