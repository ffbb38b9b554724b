/*
 * bench_lstm_pair.c — the LSTM of the benchmarks (T 100, B 32, I = H = 256,
 * float32) through relgraph and through the hand-written C + OpenBLAS peer,
 * call by call in one process, so that each ratio compares two calls made
 * within a second of each other on a host whose speed drifts by half
 * within minutes (bench/run_lstm.sh compares whole runs instead).
 *
 *   bench_lstm_pair LIBLSTM_C [--reps N] [--threads N]
 *
 * LIBLSTM_C is the peer's own shared library (its Makefile builds
 * liblstm_c.so; its exported lstm_c_forward and lstm_c_train are the
 * forward and the forward + backward it times itself), loaded with
 * dlopen and called unchanged.  relgraph runs the documented graph files
 * bench/graphs/lstm_fwd.graph and lstm_grad.graph, compiled with fast_run
 * through the C API as `relgraph run` compiles them, with inputs of the
 * same scale as run_lstm.sh's (x in [-1, 1], weights in [-1/16, 1/16],
 * zero biases and states).  Each repetition times one relgraph call and
 * one peer call, the order alternating; the figures are the medians of
 * each and the median (with the range) of the per-repetition ratios.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/benchutil.h"
#include "relgraph/backend.h"

#include <cblas.h>
#undef I

typedef void *(*lstm_new_fn)(int, int, int, int, unsigned);
typedef void (*lstm_run_fn)(void *);

static uint64_t rng = 7;
static float uniform(float a) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return a * (2.0f * (float)((rng >> 40) & 0xffffff) / 16777216.0f - 1.0f);
}

/* The input of the graph's i-th input variable: uniform in [-a, a], or
 * zeros for biases and initial states. */
static rg_tensor *input_for(const rg_variable *v) {
  rg_tensor *t = rg_tensor_new(v->type->dtype, v->type->ndim, v->type->shape);
  const char *n = v->name ? v->name : "";
  float a = !strcmp(n, "x") ? 1.0f : n[0] == 'W' ? 1.0f / 16 : 0.0f;
  float *p = (float *)t->data;
  for (int64_t i = 0; a > 0 && i < rg_tensor_numel(t); i++) p[i] = uniform(a);
  return t;
}

typedef struct prog {
  rg_function *f;
  rg_tensor *in[8], *out[8];
  int nin, nout;
} prog;

static void compile_graph(rg_ctx *C, const char *name, int threads, prog *p) {
  char path[4096];
  snprintf(path, sizeof path, "%s/bench/graphs/%s.graph", RG_SOURCE_DIR, name);
  rg_fgraph *fg = rg_graph_load(C, path);
  if (!fg || rg_fgraph_ninputs(fg) > 8 || rg_fgraph_noutputs(fg) > 8) {
    fprintf(stderr, "bench_lstm_pair: %s: %s\n", path, fg ? "too many inputs" : rg_errmsg(C));
    exit(1);
  }
  p->nin = rg_fgraph_ninputs(fg), p->nout = rg_fgraph_noutputs(fg);
  rg_variable *vin[8], *vout[8];
  for (int i = 0; i < p->nin; i++) p->in[i] = input_for(vin[i] = rg_fgraph_input(fg, i));
  for (int j = 0; j < p->nout; j++) vout[j] = rg_fgraph_output(fg, j);
  rg_compile_opts o = {.nthreads = threads};
  if (!(p->f = rg_compile(C, p->nin, vin, p->nout, vout, &o))) {
    fprintf(stderr, "bench_lstm_pair: %s: %s\n", name, rg_errmsg(C));
    exit(1);
  }
}

static double time_rg(prog *p) {
  double t0 = bu_now();
  if (rg_function_call(p->f, p->in, p->out) != RG_OK) {
    fprintf(stderr, "bench_lstm_pair: a call failed\n");
    exit(1);
  }
  double t = bu_now() - t0;
  for (int j = 0; j < p->nout; j++) rg_tensor_free(p->out[j]), p->out[j] = NULL;
  return t;
}

static double time_c(lstm_run_fn run, void *m) {
  double t0 = bu_now();
  run(m);
  return bu_now() - t0;
}

static void pair(const char *what, prog *p, lstm_run_fn run, void *m, int threads, int reps) {
  double *a = calloc((size_t)reps, sizeof *a), *b = calloc((size_t)reps, sizeof *b), *r = calloc((size_t)reps, sizeof *r);
  openblas_set_num_threads(threads);
  time_rg(p), time_c(run, m); /* warm-up */
  for (int k = 0; k < reps; k++) {
    if (k % 2) b[k] = time_c(run, m), a[k] = time_rg(p);
    else a[k] = time_rg(p), b[k] = time_c(run, m);
    r[k] = a[k] / b[k];
  }
  double lo = r[0], hi = r[0];
  for (int k = 1; k < reps; k++) lo = r[k] < lo ? r[k] : lo, hi = r[k] > hi ? r[k] : hi;
  printf("%-8s %d thread%s: relgraph %.1f ms, C %.1f ms; relgraph / C per call: median %.3fx (%.2f-%.2f, %d calls each)\n",
         what, threads, threads > 1 ? "s" : " ", 1e3 * bu_median(a, (size_t)reps), 1e3 * bu_median(b, (size_t)reps),
         bu_median(r, (size_t)reps), lo, hi, reps);
  fflush(stdout);
  free(a), free(b), free(r);
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: bench_lstm_pair LIBLSTM_C [--reps N] [--threads N]\n");
    return 2;
  }
  int reps = 21, only = 0;
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads")) only = atoi(argv[++i]);
  if (reps < 1) reps = 1;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  lstm_new_fn mk = lib ? (lstm_new_fn)dlsym(lib, "lstm_c_new") : NULL;
  lstm_run_fn fwd = lib ? (lstm_run_fn)dlsym(lib, "lstm_c_forward") : NULL;
  lstm_run_fn train = lib ? (lstm_run_fn)dlsym(lib, "lstm_c_train") : NULL;
  if (!mk || !fwd || !train) {
    fprintf(stderr, "bench_lstm_pair: %s: %s\n", argv[1], lib ? "not the C peer's library" : dlerror());
    return 1;
  }
  rg_init();
  void *m = mk(100, 32, 256, 256, 12345);
  for (int threads = 1; threads <= 2; threads++) {
    if (only && threads != only) continue;
    rg_ctx *C = rg_ctx_new();
    prog f = {0}, g = {0};
    compile_graph(C, "lstm_fwd", threads, &f);
    compile_graph(C, "lstm_grad", threads, &g);
    pair("fwd", &f, fwd, m, threads, reps);
    pair("fwd+bwd", &g, train, m, threads, reps);
    rg_function_free(f.f), rg_function_free(g.f);
  }
  return 0;
}
