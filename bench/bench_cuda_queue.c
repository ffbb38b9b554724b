/*
 * bench_cuda_queue.c — what one call of a program on the `cuda` backend
 * queues, counted without a GPU: generated kernels, cuBLAS calls, host
 * waits and copies, as the host implementation of CUDA's libraries
 * (tests/cuda-host) counts them.
 *
 *   RELGRAPH_CUDA_DRIVER=L RELGRAPH_NVRTC=L RELGRAPH_CUBLAS=L \
 *     bench_cuda_queue GRAPH...      (L: build/tests/librgtest_cuda_host.so)
 *
 * Each graph's inputs get deterministic values on the device (small, so
 * that nothing overflows); the outputs come back to the host.  The
 * second of two calls is counted (the first compiles the kernels).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "relgraph/backend.h"
#include "tests/cuda-host/host.h"

static rg_tensor *input_value(const rg_type *t, const rg_buffer_type *bt) {
  rg_tensor *h = rg_tensor_new(t->dtype, t->ndim, t->shape);
  for (int64_t k = 0; k < rg_tensor_numel(h); k++) rg_tensor_set_f64(h, k, 0.01 * (double)(k % 13));
  rg_tensor *d = rg_tensor_to_device(h, bt);
  rg_tensor_free(h);
  return d;
}

static int count(rg_ctx *C, rg_backend *b, void (*stats)(long *), const char *path) {
  rg_fgraph *fg = rg_graph_load(C, path);
  if (!fg) return fprintf(stderr, "%s\n", rg_errmsg(C)), 1;
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  if (nin > 16 || nout > 16) return fprintf(stderr, "%s: too many inputs or outputs\n", path), 1;
  rg_variable *in[16], *out[16];
  rg_tensor *v[16], *r[16];
  for (int i = 0; i < nin; i++) {
    in[i] = rg_fgraph_input(fg, i);
    for (int d = 0; d < in[i]->type->ndim; d++)
      if (in[i]->type->shape[d] < 0) return fprintf(stderr, "%s: an input of unknown size\n", path), 1;
    v[i] = input_value(in[i]->type, rg_backend_buffer_type(b));
  }
  for (int j = 0; j < nout; j++) out[j] = rg_fgraph_output(fg, j);
  rg_compile_opts o = {.backend = b};
  rg_function *f = rg_compile(C, nin, in, nout, out, &o);
  if (!f) return fprintf(stderr, "%s: %s\n", path, rg_errmsg(C)), 1;
  long a[RGTEST_NSTATS], z[RGTEST_NSTATS];
  for (int rep = 0; rep < 2; rep++) {
    stats(a);
    if (rg_function_call(f, v, r)) return fprintf(stderr, "%s: %s\n", path, rg_function_errmsg(f)), 1;
    stats(z);
    for (int j = 0; j < nout; j++) rg_tensor_free(r[j]);
  }
  printf("%s: %ld kernels, %ld cuBLAS calls, %ld host waits, %ld copies per call\n", path,
         z[RGTEST_LAUNCHES] - a[RGTEST_LAUNCHES], z[RGTEST_BLAS_CALLS] - a[RGTEST_BLAS_CALLS],
         z[RGTEST_HOST_WAITS] - a[RGTEST_HOST_WAITS], z[RGTEST_ASYNC_COPIES] - a[RGTEST_ASYNC_COPIES]);
  for (int i = 0; i < nin; i++) rg_tensor_free(v[i]);
  rg_function_free(f);
  return 0;
}

int main(int argc, char **argv) {
  const char *lib = getenv("RELGRAPH_CUDA_DRIVER");
  void *dl = lib && *lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
  void (*stats)(long *) = NULL;
  if (dl) *(void **)&stats = dlsym(dl, "rgtest_cuda_stats");
  if (!stats) {
    fprintf(stderr, "bench_cuda_queue: RELGRAPH_CUDA_DRIVER must name the host implementation "
                    "(build/tests/librgtest_cuda_host.so)\n");
    return 2;
  }
  rg_init();
  rg_ctx *C = rg_ctx_new();
  char why[256];
  rg_backend *b = rg_backend_new("cuda", why, sizeof why);
  if (!b) return fprintf(stderr, "bench_cuda_queue: %s\n", why), 1;
  int rc = 0;
  for (int i = 1; i < argc; i++) rc |= count(C, b, stats, argv[i]);
  rg_backend_free(b);
  return rc;
}
