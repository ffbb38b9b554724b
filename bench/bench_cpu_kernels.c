/*
 * bench_cpu_kernels.c — the CPU backend's kernels, one node at a time,
 * against hand-written C loops and OpenBLAS called directly in the same
 * process.
 *
 * Each kernel runs as a linked function runs it: an rgb_exec over storage
 * cells kept across calls (so output buffers are reused, as in a compiled
 * function) and a runtime with 1 or 2 threads.  Each figure is the median
 * of --reps timed calls after one warm-up call.
 *
 * Usage: bench_cpu_kernels [GROUP] [--reps N], GROUP a substring of
 * "elemwise", "reduce", "gemm".  See docs/benchmarks.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend-impl.h"
#include "bench/benchutil.h"
#include "relgraph/graph.h"

#include <cblas.h> /* after relgraph's headers: it defines I (complex.h) */
#undef I

static rg_ctx *C;
static int reps = 21;

static void die(const char *what) {
  fprintf(stderr, "bench_cpu_kernels: %s\n", what);
  exit(1);
}

/* ------------------------------------------------------------------ running nodes */

/* A chain of nodes run like a linked program: cells[] holds every value,
 * each step reads and writes cells by index. */
typedef struct step {
  rgb_node bn;
  int in[8], out;
} step;

typedef struct program {
  int nsteps, ncells;
  step steps[8];
  rg_tensor *cells[32];
  rgb_runtime *rt;
} program;

static void prog_init(program *p, int nthreads) {
  memset(p, 0, sizeof *p);
  p->rt = rgb_runtime_new(nthreads, false);
}

/* Adds v's node reading cells `in` and writing a new cell; returns it. */
static int prog_add(program *p, rg_variable *v, const int *in) {
  if (!v) die(rg_errmsg(C));
  step *s = &p->steps[p->nsteps++];
  if (rgb_node_init(&s->bn, v->owner)) die("rgb_node_init");
  for (int i = 0; i < s->bn.nin; i++) s->in[i] = in[i];
  s->out = p->ncells++;
  return s->out;
}

static void prog_run(void *ud) {
  program *p = ud;
  for (int i = 0; i < p->nsteps; i++) {
    step *s = &p->steps[i];
    rg_tensor **ip[8], **op[1] = {&p->cells[s->out]};
    for (int k = 0; k < s->bn.nin; k++) ip[k] = &p->cells[s->in[k]];
    rgb_exec x = {.node = &s->bn, .inp = ip, .outp = op, .rt = p->rt};
    if (rgb_cpu_kernels[s->bn.code](&x)) die(p->rt->err);
  }
}

static void prog_free(program *p) {
  for (int i = 0; i < p->ncells; i++) rg_tensor_free(p->cells[i]);
  for (int i = 0; i < p->nsteps; i++) rgb_node_clear(&p->steps[i].bn);
  rgb_runtime_free(p->rt);
}

static int new_cell(program *p, rg_tensor *t) {
  p->cells[p->ncells] = t;
  return p->ncells++;
}

static rg_tensor *rand_f32(int nd, const int64_t *shape) {
  rg_tensor *t = rg_tensor_empty(RG_FLOAT32, nd, shape);
  if (!t) die("out of memory");
  float *d = (float *)t->data;
  int64_t n = rg_tensor_numel(t);
  uint32_t s = 12345;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    d[i] = (float)(s >> 8) / (float)(1 << 24) - 0.5f;
  }
  return t;
}

static rg_variable *in_f32(int nd, const int64_t *shape) {
  return rg_input(C, NULL, rg_type_new(RG_FLOAT32, nd, shape));
}

static const char *filter;
static bool want(const char *name) { return !filter || strstr(name, filter); }

static void row(const char *what, double sec, const char *note) {
  printf("%-46s %10.3f ms  %s\n", what, sec * 1e3, note ? note : "");
}

/* ------------------------------------------------------------------ elementwise */

#define N_EW 10000000

/* The hand-written peers are compiled as the kernels are (-O3), so that
 * the compiler vectorises them too. */
#pragma GCC push_options
#pragma GCC optimize("O3")

typedef struct loops { float *x, *t, *o; int64_t n; } loops;

static void c_unfused(void *ud) {
  loops *l = ud;
  for (int64_t i = 0; i < l->n; i++) l->t[i] = 2 * l->x[i];
  for (int64_t i = 0; i < l->n; i++) l->o[i] = l->t[i] + 1;
}

static void c_fused(void *ud) {
  loops *l = ud;
  for (int64_t i = 0; i < l->n; i++) l->o[i] = 2 * l->x[i] + 1;
}

#pragma GCC pop_options

static void bench_elemwise(void) {
  int64_t n = N_EW;
  rg_tensor *x = rand_f32(1, &n);
  for (int th = 1; th <= 2; th++) {
    program p;
    prog_init(&p, th);
    rg_variable *vx = in_f32(1, &n);
    rg_variable *m = rg_mul(rg_scalar_int(C, 2), vx), *a = rg_add(m, rg_scalar_int(C, 1));
    int cx = new_cell(&p, rg_tensor_ref(x));
    int c2 = new_cell(&p, rg_tensor_scalar_f64(RG_INT64, 2));
    int c1 = new_cell(&p, rg_tensor_scalar_f64(RG_INT64, 1));
    int cm = prog_add(&p, m, (int[]){c2, cx});
    prog_add(&p, a, (int[]){cm, c1});
    char what[80];
    snprintf(what, sizeof what, "2*x + 1, 10^7 float32, unfused, %d thread%s", th, th > 1 ? "s" : "");
    row(what, bu_time(prog_run, &p, reps), "mul then add kernels, buffers reused");
    prog_free(&p);
  }
  /* the same as one composite node (the block interpreter), its scalar
   * graph linked here */
  for (int th = 1; th <= 2; th++) {
    rg_variable *s = rg_input(C, NULL, rg_type_scalar(RG_FLOAT32));
    rg_variable *e = rg_add(rg_mul(rg_scalar_int(C, 2), s), rg_scalar_int(C, 1));
    const rg_op *op = rg_op_composite(C, rg_fgraph_new(C, 1, &s, 1, &e, 0));
    rg_fgraph *g = rg_op_inner_graph(op);
    size_t nn;
    rg_node *const *nodes = rg_fgraph_toposort(g, &nn);
    rg_variable *gi = rg_fgraph_input(g, 0), *go = rg_fgraph_output(g, 0);
    char err[256];
    rgb_link_opts lo = {.nthreads = 1};
    rgb_program *inner = rgb_link((int)nn, nodes, 1, &gi, 1, &go, &lo, err, sizeof err);
    if (!inner) die(err);
    program p;
    prog_init(&p, th);
    int cx = new_cell(&p, rg_tensor_ref(x));
    prog_add(&p, rg_apply(C, op, 1, (rg_variable *[]){in_f32(1, &n)}), &cx);
    p.steps[0].bn.inner = inner;
    char what[80];
    snprintf(what, sizeof what, "2*x + 1, 10^7 float32, composite, %d thread%s", th, th > 1 ? "s" : "");
    row(what, bu_time(prog_run, &p, reps), "one node, blocks of 1024");
    p.steps[0].bn.inner = NULL;
    prog_free(&p);
    rgb_program_free(inner);
  }
  loops l = {(float *)x->data, malloc(n * sizeof(float)), malloc(n * sizeof(float)), n};
  if (!l.t || !l.o) die("out of memory");
  memset(l.t, 0, n * sizeof(float));
  memset(l.o, 0, n * sizeof(float));
  row("2*x + 1, hand-written C, two loops", bu_time(c_unfused, &l, reps), "preallocated");
  row("2*x + 1, hand-written C, one fused loop", bu_time(c_fused, &l, reps), "memory bound");
  free(l.t);
  free(l.o);
  rg_tensor_free(x);
}

/* ------------------------------------------------------------------ reductions */

#pragma GCC push_options
#pragma GCC optimize("O3")

typedef struct csum { const float *x; int64_t n; float r; } csum;

/* The hand-written peer: 16 float32 lanes, one pass. */
static void c_sum(void *ud) {
  csum *c = ud;
  float lane[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= c->n; i += 16)
    for (int j = 0; j < 16; j++) lane[j] += c->x[i + j];
  float s = 0;
  for (int j = 0; j < 16; j++) s += lane[j];
  for (; i < c->n; i++) s += c->x[i];
  c->r = s;
}

#pragma GCC pop_options

static void bench_reduce_one(const char *what, rg_tensor *x, int naxes, const int64_t *axes,
                             int th) {
  program p;
  prog_init(&p, th);
  rg_variable *v = in_f32(x->ndim, x->shape);
  int cx = new_cell(&p, rg_tensor_ref(x));
  prog_add(&p, rg_sum(v, naxes, axes), &cx);
  char label[96];
  snprintf(label, sizeof label, "%s, %d thread%s", what, th, th > 1 ? "s" : "");
  row(label, bu_time(prog_run, &p, reps), NULL);
  prog_free(&p);
}

static void bench_reduce(void) {
  int64_t n = N_EW;
  rg_tensor *x = rand_f32(1, &n);
  for (int th = 1; th <= 2; th++) bench_reduce_one("sum, 10^7 float32", x, -1, NULL, th);
  csum c = {(const float *)x->data, n, 0};
  row("sum, 10^7 float32, hand-written C (16 lanes)", bu_time(c_sum, &c, reps), NULL);
  rg_tensor_free(x);
  rg_tensor *m = rand_f32(2, (const int64_t[]){4096, 4096});
  for (int th = 1; th <= 2; th++) {
    bench_reduce_one("sum axis 0, 4096x4096 float32", m, 1, (const int64_t[]){0}, th);
    bench_reduce_one("sum axis 1, 4096x4096 float32", m, 1, (const int64_t[]){1}, th);
  }
  rg_tensor_free(m);
}

/* ------------------------------------------------------------------ gemm */

typedef struct direct { const float *a, *b; float *c; int n; } direct;

static void sgemm_direct(void *ud) {
  direct *d = ud;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d->n, d->n, d->n, 1, d->a, d->n, d->b,
              d->n, 0, d->c, d->n);
}

static void bench_gemm(void) {
  for (int th = 1; th <= 2; th++) {
    for (int64_t n = 1024; n <= 2048; n *= 2) {
      rg_tensor *a = rand_f32(2, (const int64_t[]){n, n}), *b = rand_f32(2, (const int64_t[]){n, n});
      rg_tensor *z = rand_f32(2, (const int64_t[]){n, n});
      double flop = 2.0 * (double)n * (double)n * (double)n;
      char what[96], note[64];
      /* through the dot kernel */
      program p;
      prog_init(&p, th);
      rg_variable *va = in_f32(2, a->shape), *vb = in_f32(2, b->shape);
      int ca = new_cell(&p, rg_tensor_ref(a)), cb = new_cell(&p, rg_tensor_ref(b));
      prog_add(&p, rg_dot(va, vb), (int[]){ca, cb});
      double t = bu_time(prog_run, &p, reps);
      snprintf(what, sizeof what, "sgemm %lld, dot kernel, %d thread%s", (long long)n, th, th > 1 ? "s" : "");
      snprintf(note, sizeof note, "%.1f GFLOP/s", flop / t * 1e-9);
      row(what, t, note);
      prog_free(&p);
      /* through the gemm kernel: z = 1 * a @ b + 0 * z */
      prog_init(&p, th);
      rg_variable *vz = in_f32(2, z->shape);
      rg_variable *g = rg_gemm(vz, rg_scalar_float(C, 1), va, vb, rg_scalar_float(C, 0));
      int cz = new_cell(&p, rg_tensor_ref(z)), c1 = new_cell(&p, rg_tensor_scalar_f64(RG_FLOAT64, 1));
      int c0 = new_cell(&p, rg_tensor_scalar_f64(RG_FLOAT64, 0));
      ca = new_cell(&p, rg_tensor_ref(a));
      cb = new_cell(&p, rg_tensor_ref(b));
      prog_add(&p, g, (int[]){cz, c1, ca, cb, c0});
      t = bu_time(prog_run, &p, reps);
      snprintf(what, sizeof what, "sgemm %lld, gemm kernel, %d thread%s", (long long)n, th, th > 1 ? "s" : "");
      snprintf(note, sizeof note, "%.1f GFLOP/s", flop / t * 1e-9);
      row(what, t, note);
      prog_free(&p);
      /* OpenBLAS directly, same thread count */
      openblas_set_num_threads(th);
      direct d = {(const float *)a->data, (const float *)b->data, (float *)z->data, (int)n};
      t = bu_time(sgemm_direct, &d, reps);
      snprintf(what, sizeof what, "sgemm %lld, cblas_sgemm directly, %d thread%s", (long long)n, th, th > 1 ? "s" : "");
      snprintf(note, sizeof note, "%.1f GFLOP/s", flop / t * 1e-9);
      row(what, t, note);
      rg_tensor_free(a);
      rg_tensor_free(b);
      rg_tensor_free(z);
    }
  }
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else filter = argv[i];
  }
  rg_init();
  C = rg_ctx_new();
  printf("CPU kernels, median of %d calls\n", reps);
  if (want("elemwise")) bench_elemwise();
  if (want("reduce")) bench_reduce();
  if (want("gemm")) bench_gemm();
  return 0;
}
