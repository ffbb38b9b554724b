/*
 * fault_alloc.c — every manual allocation made to fail, one at a time.
 *
 * Built only with RG_FAULT_INJECTION.  Each workload (compile and call,
 * shared variables with updates, rewriting with constant folding, graph
 * files with inner graphs and branches, .npy bytes, kernels with buffers
 * of their own, placement and transfers on the mirror backend) runs once to get the
 * reference result, then again with n = 1, 2, ...: the n-th counted
 * allocation of the run fails (rg_fault_arm).  When no allocation failed
 * the workload has been tried at every allocation point and the next one
 * starts.  Every run must end either with the reference result or with an
 * error status and a message; a crash, an abort or a wrong result fails
 * the test, and in the sanitizer build LeakSanitizer reports at exit any
 * memory a failure path forgot.  Then the same once more with every
 * allocation from the n-th on failing (the state of real exhaustion).
 *
 * Usage: fault_alloc SOURCE_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "relgraph/backend.h"
#include "relgraph/graph.h"
#include "relgraph/rewrite.h"

static const char *srcdir;

/* A workload returns a status; on success *out is its result (one tensor,
 * owned by the caller), on failure msg says why. */
typedef int (*workload_fn)(rg_ctx *C, rg_tensor **out, char *msg, size_t len);

static int fail(char *msg, size_t len, int rc, const char *what, const char *why) {
  snprintf(msg, len, "%s: %s", what, why && why[0] ? why : "");
  return rc ? rc : RG_ERR;
}

/* ------------------------------------------------------------------ helpers */

static rg_tensor *vec(int64_t n, double base) {
  rg_tensor *t = rg_tensor_new(RG_FLOAT64, 1, &n);
  for (int64_t i = 0; t && i < n; i++) rg_tensor_set_f64(t, i, base + 0.25 * (double)i);
  return t;
}

/* Compiles and calls; the first output becomes *out. */
static int compile_call(rg_ctx *C, int nin, rg_variable **vin, int nout, rg_variable **vout,
                        const rg_compile_opts *o, rg_tensor **ins, int calls, rg_tensor **out,
                        char *msg, size_t len) {
  rg_function *f = rg_compile(C, nin, vin, nout, vout, o);
  if (!f) return fail(msg, len, rg_errcode(C), "compile", rg_errmsg(C));
  rg_tensor *res[8] = {0};
  int rc = RG_OK;
  for (int c = 0; c < calls && rc == RG_OK; c++) {
    for (int j = 0; j < nout; j++) rg_tensor_free(res[j]), res[j] = NULL;
    rc = rg_function_call(f, ins, res);
    if (rc) fail(msg, len, rc, "call", rg_function_errmsg(f));
  }
  if (rc == RG_OK) *out = res[0], res[0] = NULL;
  for (int j = 0; j < nout; j++) rg_tensor_free(res[j]);
  rg_function_free(f);
  return rc;
}

static void free_all(rg_tensor **t, int n) {
  for (int i = 0; i < n; i++) rg_tensor_free(t[i]);
}

/* ------------------------------------------------------------------ workloads */

/* exp(W @ x + b) * 2 + x . x, compiled with fast_run on two threads. */
static int w_compile_call(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  int64_t wsh[2] = {4, 3}, n3 = 3, n4 = 4;
  rg_variable *W = rg_input(C, "W", rg_type_new(RG_FLOAT64, 2, wsh));
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n3));
  rg_variable *b = rg_input(C, "b", rg_type_new(RG_FLOAT64, 1, &n4));
  rg_variable *y = rg_add(rg_mul(rg_exp(rg_add(rg_dot(W, x), b)), rg_scalar_float(C, 2.0)),
                          rg_dot(x, x));
  if (!y) return fail(msg, len, rg_errcode(C), "build", rg_errmsg(C));
  rg_variable *vin[3] = {W, x, b};
  rg_tensor *ins[3] = {rg_tensor_new(RG_FLOAT64, 2, wsh), vec(3, 0.5), vec(4, -1)};
  int rc = RG_OK;
  if (!ins[0] || !ins[1] || !ins[2]) rc = fail(msg, len, RG_ERR_NOMEM, "inputs", "out of memory");
  for (int i = 0; rc == RG_OK && i < 12; i++) rg_tensor_set_f64(ins[0], i, 0.1 * i);
  rg_compile_opts o = {.mode = {.query = "fast_run"}, .nthreads = 2};
  if (rc == RG_OK) rc = compile_call(C, 3, vin, 1, &y, &o, ins, 3, out, msg, len);
  free_all(ins, 3);
  return rc;
}

/* A shared accumulator: out = s * 2, then s <- s + x, called three times. */
static int w_shared(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  int64_t n = 4;
  rg_tensor *init = vec(4, 1);
  rg_shared *s = init ? rg_shared_new(init) : NULL;
  rg_tensor_free(init);
  if (!s) return fail(msg, len, RG_ERR_NOMEM, "shared", "out of memory");
  rg_variable *sv = rg_shared_var(C, "s", s, NULL);
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  rg_variable *y = rg_mul(sv, rg_scalar_float(C, 2.0));
  rg_update up = {.shared = sv, .value = rg_add(sv, x)};
  rg_compile_opts o = {.nupdates = 1, .updates = &up};
  rg_tensor *in = vec(4, 3);
  int rc = in ? compile_call(C, 1, &x, 1, &y, &o, &in, 3, out, msg, len)
              : fail(msg, len, RG_ERR_NOMEM, "inputs", "out of memory");
  rg_tensor_free(in);
  rg_shared_free(s);
  return rc;
}

/* Kernels with buffers of their own: an integer matrix product (BLAS has
 * none), argmax, a float32 row sum wider than the stack buffer; all summed
 * into one float64 value per kind. */
static int w_kernels(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  int64_t ash[2] = {3, 4}, bsh[2] = {4, 2}, rsh[2] = {2, 1500};
  rg_variable *A = rg_input(C, "A", rg_type_new(RG_INT64, 2, ash));
  rg_variable *B = rg_input(C, "B", rg_type_new(RG_INT64, 2, bsh));
  rg_variable *R = rg_input(C, "R", rg_type_new(RG_FLOAT32, 2, rsh));
  int64_t ax1 = 1;
  rg_variable *y = rg_add(rg_cast(rg_sum(rg_dot(A, B), -1, NULL), RG_FLOAT64),
                          rg_add(rg_cast(rg_sum(rg_argmax(R, 1, &ax1), -1, NULL), RG_FLOAT64),
                                 rg_cast(rg_sum(R, 1, &ax1), RG_FLOAT64)));
  if (!y) return fail(msg, len, rg_errcode(C), "build", rg_errmsg(C));
  rg_variable *vin[3] = {A, B, R};
  rg_tensor *ins[3] = {rg_tensor_new(RG_INT64, 2, ash), rg_tensor_new(RG_INT64, 2, bsh),
                       rg_tensor_new(RG_FLOAT32, 2, rsh)};
  int rc = RG_OK;
  for (int i = 0; i < 3; i++)
    for (int64_t k = 0; ins[i] && k < rg_tensor_numel(ins[i]); k++)
      rg_tensor_set_f64(ins[i], k, (double)((k * 7 + i) % 11) - 3);
  if (!ins[0] || !ins[1] || !ins[2]) rc = fail(msg, len, RG_ERR_NOMEM, "inputs", "out of memory");
  rg_compile_opts o = {.mode = {.query = "fast_run"}};
  if (rc == RG_OK) rc = compile_call(C, 3, vin, 1, &y, &o, ins, 2, out, msg, len);
  free_all(ins, 3);
  return rc;
}

static int fold(const rg_node *n, rg_tensor **outs, char *err, size_t len) {
  return rg_eval_node(n, outs, err, len);
}

/* Rewriting with constant folding, then the rewritten graph compiled. */
static int w_rewrite(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  int64_t n = 5;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  rg_tensor *cv = vec(5, 2);
  rg_variable *c = cv ? rg_constant(C, cv) : NULL;
  rg_tensor_free(cv);
  if (!c) return fail(msg, len, RG_ERR_NOMEM, "constant", rg_errmsg(C));
  rg_variable *k = rg_exp(rg_add(c, rg_scalar_float(C, 1.0))); /* folds */
  rg_variable *y = rg_mul(rg_add(rg_mul(x, k), rg_scalar_float(C, 0.0)), rg_scalar_float(C, 1.0));
  if (!y) return fail(msg, len, rg_errcode(C), "build", rg_errmsg(C));
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &y, RG_FG_CLONE);
  if (!fg) return fail(msg, len, rg_errcode(C), "fgraph", rg_errmsg(C));
  rg_rewriter *rw = rg_db_query(C, rg_std_db(C), "fast_run");
  if (!rw) return fail(msg, len, rg_errcode(C), "query", rg_errmsg(C));
  rg_rewrite_opts ro = {.fold = fold};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &ro);
  if (!run) return fail(msg, len, rg_errcode(C), "rewrite", rg_errmsg(C));
  if (rg_rewrite_stop(run) == RG_STOP_ERROR)
    return fail(msg, len, RG_ERR, "rewrite", rg_rewrite_stop_message(run));
  rg_variable *fx = rg_fgraph_input(fg, 0), *fy = rg_fgraph_output(fg, 0);
  rg_tensor *in = vec(5, -1);
  rg_compile_opts o = {.mode = {.query = "none"}};
  int rc = in ? compile_call(C, 1, &fx, 1, &fy, &o, &in, 1, out, msg, len)
              : fail(msg, len, RG_ERR_NOMEM, "inputs", "out of memory");
  rg_tensor_free(in);
  return rc;
}

static char *slurp(const char *rel, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", srcdir, rel);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fault_alloc: cannot open %s\n", path);
    exit(2);
  }
  static char buf[1 << 16];
  *len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[*len] = 0;
  return buf;
}

/* An input of the variable's type (unknown sizes become 2) with values
 * 1, 1.25, ... (true for booleans). */
static rg_tensor *input_for(const rg_variable *v) {
  const rg_type *t = v->type;
  int64_t shape[RG_MAX_NDIM];
  for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i] < 0 ? 2 : t->shape[i];
  rg_tensor *x = rg_tensor_new(t->dtype, t->ndim, shape);
  for (int64_t i = 0; x && i < rg_tensor_numel(x); i++) rg_tensor_set_f64(x, i, 1 + 0.25 * (double)(i % 8));
  return x;
}

/* Reads a graph file, compiles it with fast_run for a backend (NULL: the
 * CPU) and calls it twice. */
static int run_graph_file_on(rg_ctx *C, const char *rel, const char *backend, rg_tensor **out,
                             char *msg, size_t len) {
  size_t n;
  const char *text = slurp(rel, &n);
  rg_fgraph *fg = rg_graph_read(C, rel, text, n);
  if (!fg) return fail(msg, len, rg_errcode(C), "read", rg_errmsg(C));
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable *vin[8], *vout[8];
  rg_tensor *ins[8] = {0};
  if (nin > 8 || nout > 8) return fail(msg, len, RG_ERR, rel, "too many inputs or outputs");
  int rc = RG_OK;
  for (int i = 0; i < nin; i++) {
    vin[i] = rg_fgraph_input(fg, i);
    ins[i] = input_for(vin[i]);
    if (!ins[i]) rc = fail(msg, len, RG_ERR_NOMEM, "inputs", "out of memory");
  }
  for (int j = 0; j < nout; j++) vout[j] = rg_fgraph_output(fg, j);
  rg_compile_opts o = {.mode = {.query = "fast_run", .backend = backend}};
  if (rc == RG_OK) rc = compile_call(C, nin, vin, nout, vout, &o, ins, 2, out, msg, len);
  free_all(ins, nin);
  return rc;
}

static int run_graph_file(rg_ctx *C, const char *rel, rg_tensor **out, char *msg, size_t len) {
  return run_graph_file_on(C, rel, NULL, out, msg, len);
}

/* Placement on the mirror backend: transfers both ways, an uploaded
 * constant, a node left to the CPU; then an input typed on the mirror. */
static int w_mirror(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  rg_tensor *first = NULL;
  int rc = run_graph_file_on(C, "tests/golden/run/placement.graph", "mirror", &first, msg, len);
  if (rc == RG_OK) rc = run_graph_file(C, "tests/golden/run/ondevice.graph", out, msg, len);
  rg_tensor_free(first);
  return rc;
}

static int w_mlp(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  return run_graph_file(C, "examples/graphs/mlp.graph", out, msg, len);
}
static int w_inner(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  return run_graph_file(C, "tests/golden/run/inner.graph", out, msg, len);
}
static int w_ifelse(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  return run_graph_file(C, "tests/golden/run/ifelse.graph", out, msg, len);
}
static int w_fast_run(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  return run_graph_file(C, "tests/golden/rewrite/fast-run.graph", out, msg, len);
}
/* Loops: a mit-sot, then a recurrent network (a sequence, a state, a
 * product per step). */
static int w_scan(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  rg_tensor *first = NULL;
  int rc = run_graph_file(C, "examples/graphs/fibonacci.graph", &first, msg, len);
  if (rc == RG_OK) rc = run_graph_file(C, "examples/graphs/rnn.graph", out, msg, len);
  rg_tensor_free(first);
  return rc;
}

/* .npy: a float32 matrix written in Fortran order, read back, and a file
 * from the tree read. */
static int w_npy(rg_ctx *C, rg_tensor **out, char *msg, size_t len) {
  int64_t sh[2] = {3, 5};
  rg_tensor *t = rg_tensor_new(RG_FLOAT32, 2, sh);
  if (!t) return fail(msg, len, RG_ERR_NOMEM, "tensor", "out of memory");
  for (int i = 0; i < 15; i++) rg_tensor_set_f64(t, i, i * 0.5);
  void *bytes;
  size_t n;
  int rc = rg_npy_write(C, t, true, &bytes, &n);
  rg_tensor_free(t);
  if (rc) return fail(msg, len, rc, "npy write", rg_errmsg(C));
  rg_tensor *back = rg_npy_read(C, "<bytes>", bytes, n);
  free(bytes);
  if (!back) return fail(msg, len, rg_errcode(C), "npy read", rg_errmsg(C));
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/golden/run/i3.npy", srcdir);
  rg_tensor *file = rg_npy_load(C, path);
  if (!file) {
    rg_tensor_free(back);
    return fail(msg, len, rg_errcode(C), "npy load", rg_errmsg(C));
  }
  rg_tensor_free(file);
  *out = back;
  return RG_OK;
}

/* ------------------------------------------------------------------ the driver */

typedef struct workload { const char *name; workload_fn fn; } workload;

/* Runs with an injected failure: ended with an error, or recovered and
 * gave the reference result. */
static uint64_t nerrors, nrecovered;

static const workload workloads[] = {
  {"compile-call", w_compile_call}, {"shared-updates", w_shared}, {"rewrite-fold", w_rewrite},
  {"graph-mlp", w_mlp},             {"graph-inner", w_inner},     {"graph-ifelse", w_ifelse},
  {"graph-fast-run", w_fast_run},   {"npy", w_npy},               {"kernels", w_kernels},
  {"mirror", w_mirror},              {"graph-scan", w_scan},
};

/* Runs w with the n-th allocation failing (0: none).  Returns 0 when the
 * run was clean; *fired says whether a failure was injected. */
static int attempt(const workload *w, uint64_t n, bool persist, const rg_tensor *ref, bool *fired,
                   rg_tensor **result) {
  rg_ctx *C = rg_ctx_new();
  char msg[1024] = "";
  rg_tensor *out = NULL;
  rg_fault_arm(n, persist);
  int rc = w->fn(C, &out, msg, sizeof msg);
  *fired = rg_fault_fired();
  rg_fault_arm(0, false);
  int bad = 0;
  if (rc != RG_OK && !msg[0]) {
    fprintf(stderr, "%s, n = %llu: status %d without a message\n", w->name, (unsigned long long)n, rc);
    bad = 1;
  } else if (rc != RG_OK && !*fired) {
    fprintf(stderr, "%s, n = %llu: failed with nothing injected: %s\n", w->name,
            (unsigned long long)n, msg);
    bad = 1;
  } else if (rc == RG_OK && ref && !rg_tensor_allclose(out, ref, 1e-12, 1e-12)) {
    fprintf(stderr, "%s, n = %llu: a wrong result after an injected failure\n", w->name,
            (unsigned long long)n);
    bad = 1;
  }
  if (*fired) rc != RG_OK ? nerrors++ : nrecovered++;
  if (result) *result = out;
  else rg_tensor_free(out);
  return bad;
}

/* Every allocation point of w, failing once or from there on. */
static int sweep(const workload *w, bool persist, uint64_t *points) {
  bool fired;
  rg_tensor *ref;
  if (attempt(w, 0, false, NULL, &fired, &ref) || !ref) {
    fprintf(stderr, "%s: the reference run failed\n", w->name);
    return 1;
  }
  int bad = 0;
  uint64_t n = 1;
  for (;; n++) {
    bad |= attempt(w, n, persist, ref, &fired, NULL);
    if (!fired) break;
  }
  *points = n - 1;
  rg_tensor_free(ref);
  return bad;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fault_alloc SOURCE_DIR\n");
    return 2;
  }
  srcdir = argv[1];
  rg_init();
  if (!rg_fault_enabled()) {
    fprintf(stderr, "fault_alloc: the library was built without RG_FAULT_INJECTION\n");
    return 2;
  }
  int bad = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++) {
    uint64_t once, from;
    bad |= sweep(&workloads[i], false, &once);
    bad |= sweep(&workloads[i], true, &from);
    printf("%-16s %5llu allocation points (each failed once, then from there on)\n",
           workloads[i].name, (unsigned long long)once);
    total += once;
  }
  printf("%llu allocation points in all; %llu runs ended with an error, %llu recovered%s\n",
         (unsigned long long)total, (unsigned long long)nerrors, (unsigned long long)nrecovered,
         bad ? "; FAILURES above" : "; every failure clean");
  return bad;
}
