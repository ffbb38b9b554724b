#!/bin/bash
# The CUDA backend on a GPU, with its peers measured in the same run:
# bench_cuda (kernels against the device-to-device copy, sgemm against
# cublasSgemm), `relgraph run` on the documented GPU graphs (the LSTM's
# forward and fwd+bwd loops on the device among them), and PyTorch on
# the same device for the same work (the pointwise expression eager,
# torch.matmul, and torch.nn.LSTM through cuDNN, T = 100, B = 32,
# I = H = 256, forward and fwd+bwd), each timed to the end of its device
# work (torch.cuda.synchronize).  Peers are skipped when missing.
#   bench/run_cuda.sh BUILD_DIR [REPEATS]
set -u
build=${1:?usage: run_cuda.sh BUILD_DIR [REPEATS]}
reps=${2:-21}
here=$(cd "$(dirname "$0")" && pwd)
"$build/bench/bench_cuda" --reps "$reps"
for g in pointwise_f32_cuda sgemm4096_cuda lstm_cuda lstm_grad_cuda; do
  echo "relgraph run $g: $("$build/relgraph" run "$here/graphs/$g.graph" --backend cuda --random 1 --repeat "$reps" | grep "^median")"
done
python3 - "$reps" <<'PY' 2>&1 || echo '{"peer": "torch", "skipped": "python3 with torch and CUDA missing"}'
import sys, time, torch
reps = int(sys.argv[1])
assert torch.cuda.is_available()
dev = torch.device("cuda")
def timed(fn):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2] * 1e3
g = torch.Generator(device=dev).manual_seed(1)
a, b, c = (torch.rand(10000, 1000, device=dev, generator=g) * 4 - 2 for _ in range(3))
d = torch.rand(1000, device=dev, generator=g) * 4 - 2
def pointwise():
    return torch.sigmoid(a) * torch.tanh(b) + c * d + torch.clamp_min(a, 0.5) + b * b / (1 + c.abs())
print('{"peer": "torch eager", "work": "pointwise_f32_cuda", "ms": %.3f}' % timed(pointwise))
A, B = (torch.randn(4096, 4096, device=dev, generator=g) for _ in range(2))
torch.backends.cuda.matmul.allow_tf32 = False
print('{"peer": "torch.matmul", "work": "sgemm 4096", "ms": %.3f}' % timed(lambda: A @ B))
m = torch.nn.LSTM(256, 256).to(dev)
x = torch.randn(100, 32, 256, device=dev)
with torch.no_grad():
    print('{"peer": "torch.nn.LSTM (cuDNN)", "mode": "forward", "ms": %.3f}' % timed(lambda: m(x)))
def step():
    m.zero_grad(set_to_none=True)
    m(x)[0].sum().backward()
print('{"peer": "torch.nn.LSTM (cuDNN)", "mode": "fwd+bwd", "ms": %.3f}' % timed(step))
PY
