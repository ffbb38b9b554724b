/*
 * bench_cuda.c — the CUDA backend against the device's own limits:
 * elementwise and fused kernels over 10^7 and 10^8 float32 against the
 * device-to-device copy bandwidth measured in the same run, and matrix
 * products through a compiled function against cuBLAS called directly on
 * the same device buffers; copies between the host (ordinary and pinned
 * memory) and the device against the driver's own synchronous copies.
 *
 *   bench_cuda [--reps N] [--max-n N]
 *
 * Inputs live on the device (typed there, as `(input NAME DTYPE (SHAPE)
 * cuda:0)` types them in a graph file) and outputs stay there
 * (device_outputs), so what is timed is the program: each figure is the median of N calls
 * (default 21), each followed by a synchronisation of the context.
 * Bandwidth counts bytes read and written once each (a copy of b bytes
 * moves 2b).  The references (cuMemcpyDtoD, cublasSgemm) are loaded here
 * with dlopen, as the backend loads them, so the binary needs no CUDA
 * library to build.  Where CUDA cannot run it prints why and exits 0.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/benchutil.h"
#include "relgraph/backend.h"

/* ------------------------------------------------------------------ the references */

typedef struct refs {
  int (*init)(unsigned);
  int (*get)(int *, int);
  int (*retain)(void **, int);
  int (*set_current)(void *);
  int (*sync)(void);
  int (*d2d)(unsigned long long, unsigned long long, size_t);
  int (*h2d)(unsigned long long, const void *, size_t);
  int (*d2h)(void *, unsigned long long, size_t);
  void *blas;  /* cublasHandle_t, NULL without cuBLAS */
  int (*sgemm)(void *, int, int, int, int, int, const float *, const float *, int, const float *,
               int, const float *, float *, int);
} refs;

static bool refs_open(refs *r) {
  void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!dl) return false;
#define SYM(h, f, name) (*(void **)&r->f = dlsym(h, name)) != NULL
  if (!(SYM(dl, init, "cuInit") && SYM(dl, get, "cuDeviceGet") &&
        SYM(dl, retain, "cuDevicePrimaryCtxRetain") && SYM(dl, set_current, "cuCtxSetCurrent") &&
        SYM(dl, sync, "cuCtxSynchronize") && SYM(dl, d2d, "cuMemcpyDtoD_v2") &&
        SYM(dl, h2d, "cuMemcpyHtoD_v2") && SYM(dl, d2h, "cuMemcpyDtoH_v2")))
    return false;
  int dev;
  void *ctx;
  if (r->init(0) || r->get(&dev, 0) || r->retain(&ctx, dev) || r->set_current(ctx)) return false;
  void *bl = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!bl) bl = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
  int (*create)(void **) = NULL;
  if (bl && SYM(bl, sgemm, "cublasSgemm_v2") && (*(void **)&create = dlsym(bl, "cublasCreate_v2")))
    if (create(&r->blas)) r->blas = NULL;
#undef SYM
  return true;
}

/* ------------------------------------------------------------------ timed calls */

typedef struct job {
  refs *r;
  rg_function *f;
  int nin;
  rg_tensor *in[4];
  const rg_tensor *src;  /* the copy */
  rg_tensor *dst;
  int n;                 /* sgemm: n x n */
} job;

static void sync_or_die(refs *r) {
  if (r->sync()) {
    fprintf(stderr, "bench_cuda: the device failed\n");
    exit(1);
  }
}

static void call_once(void *ud) {
  job *j = ud;
  rg_tensor *out = NULL;
  if (rg_function_call(j->f, j->in, &out) != RG_OK) {
    fprintf(stderr, "bench_cuda: %s\n", rg_function_errmsg(j->f));
    exit(1);
  }
  sync_or_die(j->r);
  rg_tensor_free(out);
}

static void copy_once(void *ud) {
  job *j = ud;
  size_t bytes = (size_t)rg_tensor_numel(j->src) * 4;
  if (j->r->d2d((uintptr_t)j->dst->data, (uintptr_t)j->src->data, bytes)) exit(1);
  sync_or_die(j->r);
}

/* cuBLAS is column-major: C^T = B^T A^T, so row-major C = A B is sgemm(B, A). */
static void sgemm_once(void *ud) {
  job *j = ud;
  const float one = 1, zero = 0;
  int n = j->n;
  if (j->r->sgemm(j->r->blas, 0, 0, n, n, n, &one, (const float *)j->in[1]->data, n,
                  (const float *)j->in[0]->data, n, &zero, (float *)j->dst->data, n))
    exit(1);
  sync_or_die(j->r);
}

/* Host and device copies: rg_tensor_copy_to from src to dst, then the
 * device waited for; the driver's synchronous copy between the same
 * buffers (its own staging of ordinary host memory). */
static void xfer_once(void *ud) {
  job *j = ud;
  if (rg_tensor_copy_to(j->dst, j->src) != RG_OK) exit(1);
  sync_or_die(j->r);
}

static void driver_xfer_once(void *ud) {
  job *j = ud;
  size_t bytes = (size_t)rg_tensor_numel(j->src) * 4;
  bool up = rg_tensor_on_device(j->dst);
  if (up ? j->r->h2d((uintptr_t)j->dst->data, j->src->data, bytes)
         : j->r->d2h(j->dst->data, (uintptr_t)j->src->data, bytes))
    exit(1);
}

/* ------------------------------------------------------------------ the cases */

static rg_tensor *random_on(const rg_buffer_type *bt, int nd, const int64_t *shape) {
  rg_tensor *h = rg_tensor_new(RG_FLOAT32, nd, shape);
  float *p = (float *)h->data;
  uint64_t s = 88172645463325252ull;
  for (int64_t i = 0; i < rg_tensor_numel(h); i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = (float)(s % 4096) / 1024.0f - 2.0f;
  }
  rg_tensor *d = rg_tensor_to_device(h, bt);
  rg_tensor_free(h);
  if (!d) {
    fprintf(stderr, "bench_cuda: out of device memory\n");
    exit(1);
  }
  return d;
}

static rg_function *compile_on(rg_ctx *C, rg_backend *b, int nin, rg_variable **in, rg_variable *out) {
  rg_compile_opts o = {.backend = b, .device_outputs = true};
  rg_function *f = rg_compile(C, nin, in, 1, &out, &o);
  if (!f) {
    fprintf(stderr, "bench_cuda: %s\n", rg_errmsg(C));
    exit(1);
  }
  return f;
}

/* exp(x), x + y, and the fused expression of bench/graphs/pointwise_f32.graph
 * over (n / 1000, 1000) elements; bytes moved by each. */
static void elementwise(refs *r, rg_backend *b, int64_t n, int reps) {
  const rg_buffer_type *bt = rg_backend_buffer_type(b);
  int64_t shape[2] = {n / 1000, 1000};
  rg_ctx *C = rg_ctx_new();
  rg_device dev = rg_backend_device(b);
  const rg_type *t2 = rg_type_on_device(rg_type_new(RG_FLOAT32, 2, shape), dev);
  const rg_type *t1 = rg_type_on_device(rg_type_new(RG_FLOAT32, 1, shape + 1), dev);
  rg_variable *a = rg_input(C, "a", t2), *bb = rg_input(C, "b", t2), *c = rg_input(C, "c", t2);
  rg_variable *d = rg_input(C, "d", t1);
  rg_tensor *va = random_on(bt, 2, shape), *vb = random_on(bt, 2, shape), *vc = random_on(bt, 2, shape);
  rg_tensor *vd = random_on(bt, 1, shape + 1);
  rg_tensor *k_half = rg_tensor_scalar_f64(RG_FLOAT32, 0.5), *k_one = rg_tensor_scalar_f64(RG_FLOAT32, 1);
  rg_variable *half = rg_constant(C, k_half), *one = rg_constant(C, k_one);
  rg_variable *fused =
      rg_add(rg_add(rg_add(rg_mul(rg_sigmoid(a), rg_tanh(bb)), rg_mul(c, d)), rg_maximum(a, half)),
             rg_true_div(rg_sqr(bb), rg_add(one, rg_abs(c))));
  struct {
    const char *name;
    int nin;
    rg_variable *in[4];
    rg_tensor *val[4];
    rg_variable *out;
    double bytes;
  } cases[] = {
      {"exp(a)", 1, {a}, {va}, rg_exp(a), 8.0 * (double)n},
      {"a + b", 2, {a, bb}, {va, vb}, rg_add(a, bb), 12.0 * (double)n},
      {"pointwise_f32 (fused)", 4, {a, bb, c, d}, {va, vb, vc, vd}, fused, 16.0 * (double)n},
  };
  job cp = {.r = r, .src = va, .dst = rg_tensor_empty_on(bt, RG_FLOAT32, 2, shape)};
  double tcopy = bu_time(copy_once, &cp, reps), copy_bw = 8.0 * (double)n / tcopy / 1e9;
  printf("n = %lld float32: device-to-device copy %.3f ms, %.0f GB/s\n", (long long)n, tcopy * 1e3,
         copy_bw);
  rg_tensor *vals[4] = {va, vb, vc, vd};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    job j = {.r = r, .f = compile_on(C, b, cases[k].nin, cases[k].in, cases[k].out),
             .nin = cases[k].nin};
    memcpy(j.in, cases[k].val, sizeof j.in);
    double t = bu_time(call_once, &j, reps), bw = cases[k].bytes / t / 1e9;
    printf("  %-24s %8.3f ms  %6.0f GB/s  %5.1f%% of the copy\n", cases[k].name, t * 1e3, bw,
           100 * bw / copy_bw);
    rg_function_free(j.f);
  }
  rg_tensor_free(cp.dst);
  rg_tensor_free(k_half);
  rg_tensor_free(k_one);
  for (int i = 0; i < 4; i++) rg_tensor_free(vals[i]);
}

/* Copies of n float32 between the device and ordinary or pinned host
 * memory (the backend's staging and direct paths), against the driver's
 * synchronous copy from and to the same ordinary memory. */
static void transfers(refs *r, rg_backend *b, int64_t n, int reps) {
  const rg_buffer_type *bt = rg_backend_buffer_type(b), *hb = rg_backend_host_buffer_type(b);
  rg_tensor *dev = random_on(bt, 1, &n), *host = random_on(NULL, 1, &n);
  rg_tensor *pin = rg_tensor_empty_on(hb, RG_FLOAT32, 1, &n);
  if (!pin || rg_tensor_copy_to(pin, host) != RG_OK) {
    printf("transfers: no pinned memory for %lld float32\n", (long long)n);
    return;
  }
  double gb = (double)n * 4 / 1e9;
  struct { const char *name; rg_tensor *dst, *src; bool driver; } cases[] = {
      {"upload, ordinary memory", dev, host, false}, {"upload, pinned memory", dev, pin, false},
      {"upload, driver's copy", dev, host, true},    {"download, ordinary memory", host, dev, false},
      {"download, pinned memory", pin, dev, false},  {"download, driver's copy", host, dev, true},
  };
  printf("transfers of %lld float32 (%.0f MB):\n", (long long)n, gb * 1e3);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    job j = {.r = r, .src = cases[k].src, .dst = cases[k].dst};
    double t = bu_time(cases[k].driver ? driver_xfer_once : xfer_once, &j, reps);
    printf("  %-26s %8.3f ms  %6.1f GB/s\n", cases[k].name, t * 1e3, gb / t);
  }
  rg_tensor_free(pin);
  rg_tensor_free(host);
  rg_tensor_free(dev);
}

/* dot(A, B) of n x n float32 through a compiled function, and cublasSgemm. */
static void sgemm(refs *r, rg_backend *b, int n, int reps) {
  const rg_buffer_type *bt = rg_backend_buffer_type(b);
  int64_t shape[2] = {n, n};
  rg_ctx *C = rg_ctx_new();
  const rg_type *t = rg_type_on_device(rg_type_new(RG_FLOAT32, 2, shape), rg_backend_device(b));
  rg_variable *in[2] = {rg_input(C, "A", t), rg_input(C, "B", t)};
  job j = {.r = r, .f = compile_on(C, b, 2, in, rg_dot(in[0], in[1])), .nin = 2, .n = n,
           .in = {random_on(bt, 2, shape), random_on(bt, 2, shape)},
           .dst = rg_tensor_empty_on(bt, RG_FLOAT32, 2, shape)};
  double flop = 2.0 * n * (double)n * n;
  double tf = bu_time(call_once, &j, reps);
  printf("sgemm %d: compiled dot %.3f ms (%.1f TFLOP/s)", n, tf * 1e3, flop / tf / 1e12);
  if (r->blas) {
    double tb = bu_time(sgemm_once, &j, reps);
    printf(", cublasSgemm %.3f ms (%.1f TFLOP/s), ratio %.3f", tb * 1e3, flop / tb / 1e12, tf / tb);
  }
  printf("\n");
  rg_function_free(j.f);
  rg_tensor_free(j.in[0]);
  rg_tensor_free(j.in[1]);
  rg_tensor_free(j.dst);
}

int main(int argc, char **argv) {
  int reps = 21;
  int64_t max_n = 100000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-n")) max_n = atoll(argv[i + 1]);
  }
  rg_init();
  char why[256];
  rg_backend *b = rg_backend_new("cuda", why, sizeof why);
  refs r = {0};
  if (!b || !refs_open(&r)) {
    printf("bench_cuda: CUDA cannot run here: %s\n", b ? "the driver API is incomplete" : why);
    return 0;
  }
  for (int64_t n = 10000000; n <= max_n; n *= 10) elementwise(&r, b, n, reps);
  for (int n = 1024; n <= 4096; n *= 2) sgemm(&r, b, n, reps);
  transfers(&r, b, 1 << 26, reps);
  rg_backend_free(b);
  return 0;
}
