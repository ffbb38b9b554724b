/*
 * bench_rewrite.c — the rewrite engine's benchmarks.
 *
 * Relational dot distribution (the standard database's `distribute` and
 * `gather` rules, a relation run in both directions) on the graphs of
 * Aesara's benchmark: a left-nested chain A.dot(((x1+x2)+x3)...) of N
 * terms, a flat n-ary sum, a balanced tree, nested dots; the cost of
 * rejecting nodes no rule tracks; the full fast_run database on growing
 * graphs; and fast_run on a 14-node graph.  Each figure is the median of
 * several runs; graphs are rebuilt before every run and only rg_rewrite is
 * timed.  Usage: bench_rewrite [--reps N] [--blocks N] [--profile] [ROW-NAME-SUBSTRING]
 * (--blocks: the fast_run rows on that many ten-node blocks only;
 * --profile: each row's last run's rewrite profile, on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/benchutil.h"
#include "relgraph/backend.h"
#include "relgraph/rewrite.h"

static rg_ctx *C;
static rg_rewrite_db *db;
static int reps = 11;
static const char *only; /* run only rows whose name contains this */
static int blocks_only;  /* fast_run on this many blocks only (0: 100, 1000, 10000) */
static bool profile;     /* print each row's last run's profile to stderr */

static const rg_type *vec(void) {
  int64_t d = RG_DIM_UNKNOWN;
  return rg_type_new(RG_FLOAT64, 1, &d);
}
static const rg_type *mat(void) {
  int64_t d[2] = {RG_DIM_UNKNOWN, RG_DIM_UNKNOWN};
  return rg_type_new(RG_FLOAT64, 2, d);
}

typedef rg_variable *(*builder)(int n, rg_variable **A, rg_variable ***xs);

static int nxs; /* how many vector inputs the last builder made */

static rg_variable **inputs(int n) {
  nxs = n;
  rg_variable **xs = rg_gc_alloc((size_t)n * sizeof *xs);
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i + 1);
    xs[i] = rg_input(C, name, vec());
  }
  return xs;
}

static rg_variable *chain(int n, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "A", mat());
  *xs = inputs(n);
  rg_variable *s = (*xs)[0];
  for (int i = 1; i < n; i++) s = rg_add(s, (*xs)[i]);
  return rg_dot(*A, s);
}

static rg_variable *flat(int n, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "A", mat());
  *xs = inputs(n);
  return rg_dot(*A, rg_add_n(n, *xs));
}

static rg_variable *balanced(int n, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "A", mat());
  *xs = inputs(n);
  rg_variable **level = rg_gc_alloc((size_t)n * sizeof *level);
  memcpy(level, *xs, (size_t)n * sizeof *level);
  while (n > 1) {
    int m = 0;
    for (int i = 0; i + 1 < n; i += 2) level[m++] = rg_add(level[i], level[i + 1]);
    if (n % 2) level[m++] = level[n - 1];
    n = m;
  }
  return rg_dot(*A, level[0]);
}

/* e0 = x0, e_k = dot(A, e_{k-1} + x_k): 2 nodes per level. */
static rg_variable *nested_dots(int n, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "A", mat());
  *xs = inputs(n + 1);
  rg_variable *e = (*xs)[0];
  for (int k = 1; k <= n; k++) e = rg_dot(*A, rg_add(e, (*xs)[k]));
  return e;
}

static rg_fgraph *graph_of(builder b, int n) {
  rg_variable *A, **xs;
  rg_variable *out = b(n, &A, &xs);
  int nx = nxs;
  rg_variable **ins = rg_gc_alloc((size_t)(nx + 1) * sizeof *ins);
  ins[0] = A;
  memcpy(ins + 1, xs, (size_t)nx * sizeof *ins);
  return rg_fgraph_new(C, nx + 1, ins, 1, &out, 0);
}

/* Times rg_rewrite of `query` on fresh graphs; `pre` (may be NULL) is run
 * untimed first (to time gather on distributed graphs). */
static double gcs_per_run; /* collections in the last time_query's timed runs, on average */

/* One run on a fresh graph: the seconds of rg_rewrite alone.  A function
 * of its own, and the stack cleared before it (bu_clear_stack), so that no
 * register or stack slot still points to the previous run's graph: the
 * collector would keep it alive and mark two graphs instead of one. */
__attribute__((noinline)) static double one_run(builder b, int n, rg_rewriter *rw, rg_rewriter *prw,
                                                bool prof, size_t *nodes_in, size_t *nodes_out,
                                                int64_t *rewrites, size_t *gcs) {
  rg_fgraph *fg = graph_of(b, n);
  if (prw) rg_rewrite(fg, prw, NULL);
  *nodes_in = rg_fgraph_nnodes(fg);
  size_t g0 = bu_gc_count();
  double t0 = bu_now();
  rg_rewrite_opts opts = {.profile = prof};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &opts);
  double dt = bu_now() - t0;
  *gcs = bu_gc_count() - g0;
  if (prof) rg_rewrite_profile(run, stderr);
  *nodes_out = rg_fgraph_nnodes(fg);
  *rewrites = rg_rewrite_count(run);
  if (rg_rewrite_stop(run) != RG_STOP_EQUILIBRIUM)
    fprintf(stderr, "bench_rewrite: %s\n", rg_rewrite_stop_message(run));
  return dt;
}

static double time_query(builder b, int n, const char *query, const char *pre, size_t *nodes_in,
                         size_t *nodes_out, int64_t *rewrites) {
  size_t gcs = 0;
  rg_rewriter *rw = rg_db_query(C, db, query), *prw = pre ? rg_db_query(C, db, pre) : NULL;
  double *t = malloc((size_t)reps * sizeof *t);
  for (int r = -1; r < reps; r++) {
    size_t g;
    bu_clear_stack();
    double dt = one_run(b, n, rw, prw, profile && r == reps - 1, nodes_in, nodes_out, rewrites, &g);
    if (r >= 0) {
      t[r] = dt;
      gcs += g;
    }
  }
  double m = bu_median(t, (size_t)reps);
  free(t);
  gcs_per_run = (double)gcs / reps;
  return m;
}

static void row(const char *name, builder b, int n, const char *q, const char *pre, double aesara_ms,
                double target_ms) {
  if (only && !strstr(name, only)) return;
  size_t nin = 0, nout = 0;
  int64_t rw = 0;
  double ms = time_query(b, n, q, pre, &nin, &nout, &rw) * 1e3;
  printf("%-34s %-10s %9.3f ms  %5zu -> %5zu nodes %5lld rewrites", name, q, ms, nin, nout,
         (long long)rw);
  if (aesara_ms > 0) printf("  aesara %7.0f ms  x%8.0f", aesara_ms, aesara_ms / ms);
  if (target_ms > 0) printf("  target %6.2f ms %s", target_ms, ms <= target_ms ? "ok" : "MISSED");
  printf("\n");
  fflush(stdout);
}

static void distribution(void) {
  static const int ns[] = {8, 32, 128};
  static const double dist_aes[] = {11, 130, 1900}, gath_aes[] = {18, 265, 4400};
  for (int i = 0; i < 3; i++) {
    char name[64];
    snprintf(name, sizeof name, "chain N=%d", ns[i]);
    row(name, chain, ns[i], "distribute", NULL, dist_aes[i], dist_aes[i] / 1000);
    row(name, chain, ns[i], "gather", "distribute", gath_aes[i], gath_aes[i] / 1000);
  }
  row("flat n-ary add of 128", flat, 128, "distribute", NULL, 61, 0.061);
  row("balanced tree of 128 leaves", balanced, 128, "distribute", NULL, 200, 0.2);
  row("nested dots 32 deep", nested_dots, 32, "distribute", NULL, 1650, 1.6);
}

/* ------------------------------------------------------------------ rejection and fast_run */

/* A chain of n exp nodes: no distribute rule tracks exp. */
static rg_variable *exp_chain(int n, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "A", mat());
  *xs = inputs(1);
  rg_variable *e = (*xs)[0];
  for (int i = 0; i < n; i++) e = rg_exp(e);
  return e;
}

static void rejection(void) {
  if (only && !strstr("untracked node rejection", only)) return;
  size_t nin = 0, nout = 0;
  int64_t rw = 0;
  int n = 100000;
  double s = time_query(exp_chain, n, "distribute", NULL, &nin, &nout, &rw);
  printf("%-34s %-10s %9.1f ns per node (%zu nodes)  target 50 ns %s\n", "untracked node rejection",
         "distribute", s / (double)nin * 1e9, nin, s / (double)nin * 1e9 <= 50 ? "ok" : "MISSED");
}

/* Blocks of ten nodes with rewrite opportunities: log(1 + x*x), x*1, --x,
 * (a*b)/b, x**2, a dot of a transpose. */
static rg_variable *mixed(int blocks, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "A", mat());
  *xs = inputs(1);
  rg_variable *x = (*xs)[0], *one = rg_scalar_float(C, 1.0), *two = rg_scalar_float(C, 2.0);
  for (int i = 0; i < blocks; i++) {
    rg_variable *y = rg_log(rg_add(one, rg_mul(x, x)));
    rg_variable *z = rg_neg(rg_neg(rg_mul(y, one)));
    rg_variable *w = rg_true_div(rg_mul(z, x), x);
    x = rg_add(rg_pow(w, two), rg_dot(*A, x));
  }
  return x;
}

static void fast_run(void) {
  if (only && !strstr("fast_run, mixed blocks", only)) return;
  static const int all_sizes[] = {100, 1000, 10000};
  const int *sizes = blocks_only ? &blocks_only : all_sizes;
  int nsizes = blocks_only ? 1 : 3;
  double per[3];
  for (int i = 0; i < nsizes; i++) {
    size_t nin = 0, nout = 0;
    int64_t rw = 0;
    double s = time_query(mixed, sizes[i], "fast_run", NULL, &nin, &nout, &rw);
    per[i] = s / (double)nin * 1e9;
    printf("%-34s %-10s %9.3f ms  %6zu -> %6zu nodes  %7.0f ns per node  %5.2f collections\n",
           "fast_run, mixed blocks", "fast_run", s * 1e3, nin, nout, per[i], gcs_per_run);
  }
  if (nsizes == 3)
    printf("fast_run linearity: per-node time at the largest / smallest = %.2f (target <= 2)\n",
           per[2] / per[0]);
}

/* About the 14-node graph of Aesara's measurement: softplus-like
 * expression of an affine map, with redundant pieces. */
static rg_variable *small(int n, rg_variable **A, rg_variable ***xs) {
  *A = rg_input(C, "W", mat());
  *xs = inputs(2);
  rg_variable *x = (*xs)[0], *b = (*xs)[1];
  rg_variable *one = rg_scalar_float(C, 1.0), *zero = rg_scalar_float(C, 0.0);
  rg_variable *h = rg_add(rg_dot(*A, x), b);
  rg_variable *sp = rg_log(rg_add(one, rg_exp(h)));
  rg_variable *y = rg_mul(rg_add(sp, zero), one);
  rg_variable *z = rg_true_div(rg_mul(y, h), h);
  return rg_add(rg_mul(z, z), rg_neg(rg_neg(b)));
}

static void small_graph(void) {
  if (only && !strstr("small graph", only)) return;
  size_t nin = 0, nout = 0;
  int64_t rw = 0;
  double s = time_query(small, 0, "fast_run", NULL, &nin, &nout, &rw);
  printf("%-34s %-10s %9.3f ms  %5zu -> %5zu nodes %5lld rewrites  aesara 32 ms  target 0.30 ms %s\n",
         "small graph", "fast_run", s * 1e3, nin, nout, (long long)rw, s * 1e3 <= 0.3 ? "ok" : "MISSED");
}

static int fold(const rg_node *n, rg_tensor **outs, char *err, size_t len) {
  return rg_eval_node(n, outs, err, len);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) blocks_only = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--profile")) profile = true;
    else only = argv[i];
  rg_init();
  C = rg_ctx_new();
  db = rg_std_db(C);
  rg_gc_warm();
  (void)fold;
  printf("rewrite engine, median of %d runs (Aesara 2.9.4 reference figures)\n", reps);
  distribution();
  rejection();
  small_graph();
  fast_run();
  return 0;
}
