/*
 * test_cuda_emulated.c — the generated CUDA kernels run on the host and
 * compared with the CPU backend, so their semantics are checked on
 * machines without a GPU.
 *
 * The kernels' CUDA C is plain C++ apart from `__global__`, `__device__`
 * and the thread coordinates; with those defined as a grid of one block of
 * one thread, the grid-stride loop of each kernel visits every element in
 * order.  Every kernel of the cases below (every elementwise op on every
 * dtype it accepts, with a broadcast input and a reversed view; the
 * reductions on every dtype over one axis and over all; softmax and
 * log_softmax; fused groups, those of several outputs also writing them
 * as strided parts of one joined value; the copy kernel between every pair of dtypes,
 * against a cast, half of them in their 64-bit index form) goes into one
 * C++ file (a namespace per
 * kernel), compiled once with the system's C++ compiler and loaded; each
 * is then called on random values laid out as the backend lays them out
 * (strides, broadcast strides of 0), and its result compared with the CPU
 * kernel's: exactly for integers and booleans, and within a tolerance for
 * floats (the host's scalar libm against glibc's vector functions: 4 ULP).
 * Without a C++ compiler the test is skipped (exit status 77).
 */
#include "tests/cuda-host/host.h"
#include "tests/testutil.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cuda/cuda-impl.h"
#include "base/base.h"
#include "relgraph/backend.h"

static rg_ctx *C;

/* ------------------------------------------------------------------ cases */

enum { K_EW, K_RED, K_SOFTMAX, K_FUSED, K_COPY };
#define MAXCASES 1200

typedef struct kcase {
  char label[96];
  int kind;
  rgb_node bn;          /* the node (fused: its inner program is linked) */
  rg_node *node;        /* the graph node (not fused) */
  char *src;
} kcase;

typedef struct suite {
  kcase c[MAXCASES];
  int n;
  rg_function *keep[8]; /* functions whose composites are cases */
  int nkeep;
} suite;

static suite S;

static void add_node(rg_variable *v, int kind, const char *label) {
  if (!v) {
    rg_clear_error(C);
    return;
  }
  assert_true(S.n < MAXCASES);
  kcase *k = &S.c[S.n];
  snprintf(k->label, sizeof k->label, "%s", label);
  k->kind = kind;
  k->node = v->owner;
  assert_int_equal(rgb_node_init(&k->bn, v->owner), 0);
  char why[512];
  k->src = kind == K_COPY ? rgcu_gen_copy(k->bn.in[0].dtype, k->bn.out[0].dtype, why, sizeof why)
         : kind == K_EW ? rgcu_gen_elemwise(&k->bn, why, sizeof why)
         : kind == K_RED ? rgcu_gen_reduce(&k->bn, why, sizeof why)
                         : rgcu_gen_softmax(&k->bn, why, sizeof why);
  if (!k->src) fail_msg("%s: %s", label, why);
  if (kind == K_COPY && S.n % 2) { /* half the copies run with 64-bit indices */
    char *w = rgcu_widen(k->src);
    assert_non_null(w);
    rg_free(k->src);
    k->src = w;
  }
  S.n++;
}

/* Input k of an elementwise case: (3 4), the second one broadcast (4). */
static rg_variable *ew_input(rg_dtype dt, int k) {
  return rg_input(C, NULL, k == 1 ? rg_type_new(dt, 1, (int64_t[]){4}) : rg_type_new(dt, 2, (int64_t[]){3, 4}));
}

static void elementwise_cases(void) {
  for (int code = 0; code < RG_OP_COUNT; code++) {
    if (rg_opcode_family((rg_opcode)code) != RG_FAM_ELEMWISE) continue;
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      int n = tu_op_arity((rg_opcode)code);
      rg_variable *in[3];
      for (int i = 0; i < n; i++) in[i] = ew_input(code == RG_OP_SWITCH && i == 0 ? RG_BOOL : (rg_dtype)dt, i);
      char label[96];
      if (code == RG_OP_CAST) {
        for (int to = 0; to < RG_NDTYPES; to++) {
          snprintf(label, sizeof label, "cast %s -> %s", rg_dtype_name((rg_dtype)dt), rg_dtype_name((rg_dtype)to));
          add_node(rg_cast(in[0], (rg_dtype)to), K_EW, label);
          snprintf(label, sizeof label, "copy %s -> %s", rg_dtype_name((rg_dtype)dt), rg_dtype_name((rg_dtype)to));
          add_node(rg_cast(in[0], (rg_dtype)to), K_COPY, label);
        }
        continue;
      }
      snprintf(label, sizeof label, "%s %s", rg_opcode_name(code), rg_dtype_name((rg_dtype)dt));
      add_node(rg_apply(C, rg_op_get((rg_opcode)code), n, in), K_EW, label);
    }
  }
  for (int dt = 0; dt < RG_NDTYPES; dt++) {
    rg_variable *a = ew_input((rg_dtype)dt, 0), *f = ew_input(RG_FLOAT32, 1), *i8 = ew_input(RG_INT8, 0);
    add_node(rg_lt(a, f), K_EW, "lt mixed");
    add_node(rg_add(a, i8), K_EW, "add mixed");
    add_node(rg_add_n(4, (rg_variable *[]){a, f, a, i8}), K_EW, "add n-ary");
  }
}

typedef rg_variable *(*red_fn)(rg_variable *, int, const int64_t *);

static void reduction_cases(void) {
  static const struct { const char *name; red_fn fn; } reds[] = {
      {"sum", rg_sum}, {"prod", rg_prod}, {"max", rg_max}, {"min", rg_min}, {"mean", rg_mean},
      {"argmax", rg_argmax}, {"argmin", rg_argmin}, {"all", rg_all}, {"any", rg_any}};
  int64_t axes[2] = {0, 2};
  for (size_t r = 0; r < sizeof reds / sizeof *reds; r++)
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      rg_variable *x = rg_input(C, NULL, rg_type_new((rg_dtype)dt, 3, (int64_t[]){2, 3, 4}));
      char label[96];
      snprintf(label, sizeof label, "%s %s", reds[r].name, rg_dtype_name((rg_dtype)dt));
      add_node(reds[r].fn(x, 1, axes + 1), K_RED, label);
      add_node(reds[r].fn(x, 2, axes), K_RED, label);
      add_node(reds[r].fn(x, -1, NULL), K_RED, label);
    }
  /* long reductions with few outputs: two passes (rgcu_red_split_args) */
  static const rg_dtype long_dts[] = {RG_FLOAT64, RG_FLOAT32, RG_BOOL};
  for (size_t r = 0; r < sizeof reds / sizeof *reds; r++)
    for (size_t t = 0; t < sizeof long_dts / sizeof *long_dts; t++) {
      rg_variable *x = rg_input(C, NULL, rg_type_new(long_dts[t], 3, (int64_t[]){120, 40, 3}));
      char label[96];
      snprintf(label, sizeof label, "long %s %s", reds[r].name, rg_dtype_name(long_dts[t]));
      add_node(reds[r].fn(x, 2, axes), K_RED, label);
      add_node(reds[r].fn(x, 2, (int64_t[]){0, 1}), K_RED, label);
    }
  for (int dt = RG_FLOAT32; dt <= RG_FLOAT64; dt++) {
    rg_variable *x = rg_input(C, NULL, rg_type_new((rg_dtype)dt, 2, (int64_t[]){3, 5}));
    add_node(rg_softmax(x, 1), K_SOFTMAX, "softmax axis 1");
    add_node(rg_softmax(x, 0), K_SOFTMAX, "softmax axis 0");
    add_node(rg_log_softmax(x, 1), K_SOFTMAX, "log_softmax axis 1");
  }
}

/* Sibling products of one value (the LSTM's gate gradients): one fused
 * group of three outputs, which a join would read. */
static const char siblings_graph[] =
    "(graph (input g float32 (64 256)) (input a float32 (64 256)) (input b float32 (64 256))"
    " (define t (mul g (sub 1.0 (sqr (tanh a)))))"
    " (output (mul t (sigmoid b))) (output (mul t (tanh b))) (output (mul t a)))";

static void fused_cases(void) {
  for (size_t g = 0; g <= TU_NFUSED; g++) {
    const char *text = g < TU_NFUSED ? tu_fused_graphs[g] : siblings_graph;
    rg_fgraph *fg = rg_graph_read(C, "<fused>", text, strlen(text));
    assert_non_null(fg);
    int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
    rg_variable *in[8], *out[8];
    for (int k = 0; k < nin; k++) in[k] = rg_fgraph_input(fg, k);
    for (int k = 0; k < nout; k++) out[k] = rg_fgraph_output(fg, k);
    rg_function *f = rg_compile(C, nin, in, nout, out, NULL);
    assert_non_null(f);
    S.keep[S.nkeep++] = f;
    const rgb_program *p = rgb_function_program(f);
    for (int32_t t = 0; t < p->nthunks; t++) {
      if (p->thunks[t].node.code != RG_OP_COMPOSITE) continue;
      kcase *k = &S.c[S.n];
      snprintf(k->label, sizeof k->label, "fused graph %zu", g);
      k->kind = K_FUSED;
      k->bn = p->thunks[t].node; /* borrowed: the function keeps it */
      char why[512];
      k->src = rgcu_gen_composite(&k->bn, why, sizeof why);
      if (!k->src) fail_msg("%s: %s", k->label, why);
      S.n++;
    }
  }
}

/* ------------------------------------------------------------------ compiling on the host */

/* CUDA C as host C++, run by one thread (tests/cuda-host/host.h). */
static const char prelude[] = RGTEST_PRELUDE;

/* Compiles every case into a shared object; its handle, or NULL. */
static void *compile_all(const char *dir) {
  rg_strbuf b = {0};
  rg_strbuf_put(&b, "%s", prelude);
  for (int i = 0; i < S.n; i++)
    rg_strbuf_put(&b, "namespace k%d {\n#define rg_kernel rg_kernel_%d\n%s#undef rg_kernel\n}\n", i, i, S.c[i].src);
  char cpp[4200], so[4200], cmd[9000];
  snprintf(cpp, sizeof cpp, "%s/cuda-emulated.cpp", dir);
  snprintf(so, sizeof so, "%s/cuda-emulated.so", dir);
  FILE *f = fopen(cpp, "w");
  assert_non_null(f);
  fputs(b.s, f);
  fclose(f);
  rg_free(b.s);
  const char *cxx = getenv("CXX");
  snprintf(cmd, sizeof cmd, "%s -O1 -w -ffp-contract=off -fno-math-errno -shared -fPIC -o '%s' '%s'",
           cxx && *cxx ? cxx : "c++", so, cpp);
  if (system(cmd) != 0) fail_msg("the host compiler failed on %s", cpp);
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("%s", dlerror());
  return h;
}

/* ------------------------------------------------------------------ running */

static uint64_t seed = 99;

static rg_tensor *random_value(rg_dtype dt, int nd, const int64_t *shape) {
  rg_tensor *v = rg_tensor_new(dt, nd, shape);
  for (int64_t i = 0; i < rg_tensor_numel(v); i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = seed >> 11;
    if (rg_dtype_is_float(dt)) rg_tensor_set_f64(v, i, (double)(r % 4096) / 1024.0 - 2);
    else if (dt == RG_BOOL) rg_tensor_set_i64(v, i, (int64_t)(r & 1));
    else if (dt == RG_UINT8) rg_tensor_set_i64(v, i, (int64_t)(r % 11));
    else rg_tensor_set_i64(v, i, (int64_t)(r % 11) - 5);
  }
  return v;
}

static bool close_enough(const rg_tensor *a, const rg_tensor *b) {
  if (a->dtype != b->dtype || rg_tensor_numel(a) != rg_tensor_numel(b)) return false;
  double tol = a->dtype == RG_FLOAT32 ? 2e-6 : 1e-13;
  for (int64_t i = 0; i < rg_tensor_numel(a); i++) {
    double x = rg_tensor_get_f64(a, i), y = rg_tensor_get_f64(b, i);
    if (isnan(x) || isnan(y)) {
      if (isnan(x) != isnan(y)) return false;
    } else if (x != y && !(rg_dtype_is_float(a->dtype) && fabs(x - y) <= tol * (1 + fabs(y)))) {
      return false;
    }
  }
  return true;
}

/* The CPU's result for a case (fused: the CPU's composite kernel on the
 * same node, whose inner program is scalar). */
static int reference(kcase *k, rg_tensor **in, rg_tensor **out, char *err, size_t len) {
  if (k->kind != K_FUSED) return rgb_eval_node(k->node, in, out, err, len);
  int nin = k->bn.nin, nout = k->bn.nout;
  rg_tensor *cells[2 * RGCU_MAXOPS] = {0}, **ptrs[2 * RGCU_MAXOPS];
  for (int i = 0; i < nin + nout; i++) ptrs[i] = &cells[i];
  for (int i = 0; i < nin; i++) cells[i] = in[i];
  rgb_runtime *rt = rgb_runtime_new(1, false);
  assert_non_null(rt);
  rgb_exec x = {.node = &k->bn, .inp = ptrs, .outp = ptrs + nin, .rt = rt};
  int rc = rgb_cpu_composite(&x);
  for (int j = 0; j < nout; j++) {
    out[j] = rc ? NULL : cells[nin + j];
    if (rc) rg_tensor_free(cells[nin + j]);
  }
  if (rc) snprintf(err, len, "%s", rt->err);
  rgb_runtime_free(rt);
  return rc;
}

typedef void (*ew_kernel)(rgcu_ew_args);
/* Launches by the rank of their merged layout: the kernels run ranks 1
 * and 2 through a loop whose dimension loop is unrolled, other ranks
 * through their general loop. */
static int by_rank[RGCU_MAXND + 1];
typedef void (*red_kernel)(rgcu_red_args);

/* The same elements addressed through one more dimension: dimension d
 * (of even size) split in two, (s / 2, 2), with its divisors; false when
 * no dimension splits. */
static bool split_dim(rgcu_ew_args *a, int nops) {
  int d = a->nd - 1;
  while (d >= 0 && a->shape[d] % 2) d--;
  if (d < 0 || a->nd == RGCU_MAXND) return false;
  for (int e = a->nd; e > d + 1; e--) {
    a->shape[e] = a->shape[e - 1];
    for (int k = 0; k < nops; k++) a->st[k][e] = a->st[k][e - 1];
  }
  a->shape[d] /= 2, a->shape[d + 1] = 2;
  for (int k = 0; k < nops; k++) a->st[k][d + 1] = a->st[k][d], a->st[k][d] *= 2;
  a->nd++;
  for (int e = 0; e < a->nd; e++) rgcu_divisor(a->shape[e], &a->mag[e], &a->sh[e]);
  return true;
}

/* An elementwise or fused case computed by its kernel, with the arguments
 * the backend lays out (rgcu_ew_args_of); then again with its layout
 * split into three or more dimensions, which the kernel runs through its
 * general loop rather than an unrolled one: the same bits. */
static void run_ew(kcase *k, void *fn, rg_tensor **in, rg_tensor **got, const rg_tensor *like) {
  int nout = k->bn.nout, nops = nout + k->bn.nin;
  rg_tensor *again[RGCU_MAXOPS];
  for (int j = 0; j < nout; j++) got[j] = rg_tensor_new(k->bn.out[j].dtype, like->ndim, like->shape);
  rgcu_ew_args a;
  rgcu_ew_args_of(&a, like->ndim, like->shape, nout, got, k->bn.nin, in);
  by_rank[a.nd]++;
  ((ew_kernel)fn)(a);
  while (a.nd < 3 && split_dim(&a, nops)) {}
  if (a.nd < 3) return;
  for (int j = 0; j < nout; j++) a.p[j] = (again[j] = rg_tensor_new(got[j]->dtype, like->ndim, like->shape))->data;
  by_rank[a.nd]++;
  ((ew_kernel)fn)(a);
  for (int j = 0; j < nout; j++) {
    if (memcmp(again[j]->data, got[j]->data, (size_t)rg_tensor_numel(got[j]) * rg_dtype_size(got[j]->dtype)))
      fail_msg("%s: the kernel differs from itself over %d dimensions\n%s", k->label, a.nd, k->src);
    rg_tensor_free(again[j]);
  }
}

/* A reduction or softmax, with the backend's arguments (rgcu_red_args_of),
 * in two passes where the backend splits it (rgcu_red_split_args). */
static int nsplit;

static void run_red(kcase *k, void *fn, rg_tensor *in, rg_tensor *got) {
  int64_t shape[RG_MAX_NDIM];
  assert_int_equal(rgcu_red_shape(&k->bn, in, shape), got->ndim);
  rgcu_red_args a;
  rgcu_red_args_of(&a, &k->bn, in, got);
  int64_t P = k->kind == K_RED ? rgcu_red_split_factor(&k->bn, in->dtype, &a) : 1;
  if (P == 1) {
    ((red_kernel)fn)(a);
    return;
  }
  int64_t total = P * a.nout;
  rg_tensor *scratch = rg_tensor_new(got->dtype, 1, &total);
  rgcu_red_args one, two;
  rgcu_red_split_args(&a, P, (int64_t)rg_dtype_size(got->dtype), scratch->data, &one, &two);
  ((red_kernel)fn)(one);
  ((red_kernel)fn)(two);
  rg_tensor_free(scratch);
  nsplit++;
}

/* A fused kernel writing its outputs as parts of one value joined along
 * the last axis: strided views, laid out as a composite that a join was
 * folded into hands them to its kernel on the device
 * (rgb_joined_outputs).  Returns how many parts differ from the CPU's
 * outputs; -1 when the outputs cannot be joined (dtypes differ, 0-d). */
static int joined_mismatches(kcase *k, void *fn, rg_tensor **in, rg_tensor **want) {
  const rg_tensor *like = want[0];
  int nd = like->ndim, n = k->bn.nout, bad = 0;
  for (int j = 1; j < n; j++)
    if (want[j]->dtype != like->dtype) return -1;
  if (nd == 0 || n > RGCU_MAXOPS) return -1;
  int64_t jshape[RG_MAX_NDIM];
  memcpy(jshape, like->shape, (size_t)nd * sizeof *jshape);
  jshape[nd - 1] *= n;
  rg_tensor *all = rg_tensor_new(like->dtype, nd, jshape), *part[RGCU_MAXOPS];
  int64_t row = like->shape[nd - 1] * (int64_t)rg_dtype_size(like->dtype);
  for (int j = 0; j < n; j++) part[j] = rg_tensor_view(all, nd, like->shape, all->strides, j * row);
  rgcu_ew_args a;
  rgcu_ew_args_of(&a, nd, like->shape, n, part, k->bn.nin, in);
  by_rank[a.nd]++;
  ((ew_kernel)fn)(a);
  for (int j = 0; j < n; j++) {
    bad += !close_enough(want[j], part[j]);
    rg_tensor_free(part[j]);
  }
  rg_tensor_free(all);
  return bad;
}

static int njoined;

/* Compares case k's kernel with the CPU; false when the CPU reports an
 * error for these inputs (nothing to compare). */
static bool check_case(kcase *k, void *h, int idx) {
  char name[32], err[1024];
  snprintf(name, sizeof name, "rg_kernel_%d", idx);
  void *fn = dlsym(h, name);
  if (!fn) fail_msg("%s: %s missing", k->label, name);
  rg_tensor *in[RGCU_MAXOPS], *want[RGCU_MAXOPS], *got[RGCU_MAXOPS] = {0};
  for (int i = 0; i < k->bn.nin; i++) {
    int64_t shape[RG_MAX_NDIM];
    for (int d = 0; d < k->bn.in[i].ndim; d++) shape[d] = k->bn.in[i].shape[d];
    in[i] = random_value(k->bn.in[i].dtype, k->bn.in[i].ndim, shape);
  }
  if (reference(k, in, want, err, sizeof err)) {
    /* an error on the CPU (a negative integer power): nothing to compare */
    for (int i = 0; i < k->bn.nin; i++) rg_tensor_free(in[i]);
    return false;
  }
  if (k->kind == K_FUSED && k->bn.nout > 1) {
    int bad = joined_mismatches(k, fn, in, want);
    if (bad > 0) fail_msg("%s (kernel %d): %d outputs written as parts of a joined value differ", k->label, idx, bad);
    njoined += bad == 0;
  }
  if (k->kind == K_EW || k->kind == K_FUSED || k->kind == K_COPY) {
    run_ew(k, fn, in, got, want[0]);
  } else {
    got[0] = rg_tensor_new(want[0]->dtype, want[0]->ndim, want[0]->shape);
    run_red(k, fn, in[0], got[0]);
  }
  for (int j = 0; j < k->bn.nout; j++) {
    if (!close_enough(want[j], got[j])) {
      rg_tensor_fprint(stderr, want[j]);
      fputc('\n', stderr);
      rg_tensor_fprint(stderr, got[j]);
      fail_msg("\n%s (kernel %d): output %d differs from the CPU\n%s", k->label, idx, j, k->src);
    }
    rg_tensor_free(want[j]);
    rg_tensor_free(got[j]);
  }
  for (int i = 0; i < k->bn.nin; i++) rg_tensor_free(in[i]);
  return true;
}

static void test_generated_kernels_on_the_host(void **st) {
  (void)st;
  elementwise_cases();
  reduction_cases();
  fused_cases();
  const char *dir = getenv("RG_BINARY_DIR");
#ifdef RG_BINARY_DIR
  if (!dir) dir = RG_BINARY_DIR;
#endif
  void *h = compile_all(dir ? dir : ".");
  int kinds[5] = {0};
  for (int i = 0; i < S.n; i++) {
    if (check_case(&S.c[i], h, i)) kinds[S.c[i].kind]++;
  }
  printf("%d elementwise, %d reduction (%d in two passes), %d softmax, %d fused and %d copy kernels agree "
         "with the CPU\n", kinds[K_EW], kinds[K_RED], nsplit, kinds[K_SOFTMAX], kinds[K_FUSED], kinds[K_COPY]);
  assert_true(nsplit >= 10);
  assert_true(njoined >= 1);
  assert_true(kinds[K_EW] > 250 && kinds[K_RED] > 100 && kinds[K_FUSED] >= 4 &&
              kinds[K_COPY] == RG_NDTYPES * RG_NDTYPES);
  int higher = 0;
  for (int d = 3; d <= RGCU_MAXND; d++) higher += by_rank[d];
  printf("launches by merged rank: %d of 0, %d of 1, %d of 2, %d of more\n", by_rank[0], by_rank[1],
         by_rank[2], higher);
  assert_true(by_rank[1] > 0 && by_rank[2] > 0 && higher > 0);
  for (int i = 0; i < S.n; i++) {
    rg_free(S.c[i].src);
    if (S.c[i].kind != K_FUSED) rgb_node_clear(&S.c[i].bn);
  }
  for (int i = 0; i < S.nkeep; i++) rg_function_free(S.keep[i]);
}

/* 32-bit indices where a launch fits them; the 64-bit form otherwise. */
static void test_index_width(void **st) {
  (void)st;
  int64_t small[2] = {1000, 1000};
  rg_tensor *t = rg_tensor_new(RG_FLOAT32, 2, small);
  rgcu_ew_args a;
  rgcu_ew_args_of(&a, 2, small, 1, &t, 1, &t);
  assert_int_equal(a.nd, 1); /* contiguous: one dimension */
  assert_true(rgcu_ew_narrow(&a, 2));
  a.n = a.shape[0] = 3000000000LL;          /* more elements than 32 bits count */
  assert_false(rgcu_ew_narrow(&a, 2));
  a.n = a.shape[0] = 1000;
  a.st[1][0] = 4LL << 28;                   /* an operand reaching past 2^31 bytes */
  assert_false(rgcu_ew_narrow(&a, 2));
  rg_tensor_free(t);
  char why[64];
  char *src = rgcu_gen_copy(RG_FLOAT32, RG_FLOAT64, why, sizeof why), *w = rgcu_widen(src);
  assert_non_null(strstr(src, RGCU_NARROW));
  assert_null(strstr(w, RGCU_NARROW));
  assert_non_null(strstr(w, RGCU_WIDE));
  assert_null(rgcu_widen("no index type here"));
  rg_free(src);
  rg_free(w);
}

/* r / d as a narrow kernel computes it, with rgcu_divisor's numbers. */
static int64_t kernel_quotient(int64_t r, int64_t d) {
  uint32_t mag;
  int sh;
  rgcu_divisor(d, &mag, &sh);
  uint32_t hi = (uint32_t)(((uint64_t)(uint32_t)r * mag) >> 32);
  return (int64_t)(((uint64_t)hi + (uint64_t)r) >> sh);
}

/* Divisor d against dividends at and around its multiples, small ones, and
 * the largest a narrow kernel meets. */
static void check_divisor(int64_t d) {
  int64_t probes[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, INT32_MAX, INT32_MAX - 1,
                      INT32_MAX - d, (INT32_MAX / d) * d, (INT32_MAX / d) * d - 1};
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    int64_t r = probes[i];
    if (r < 0 || r > INT32_MAX) continue;
    if (kernel_quotient(r, d) != r / d)
      fail_msg("%lld / %lld: %lld, not %lld", (long long)r, (long long)d, (long long)kernel_quotient(r, d),
               (long long)(r / d));
  }
}

/* rgcu_divisor's numbers divide exactly: every divisor up to 4096 and 10^5
 * random ones up to 2^31, and every dividend under 2^20 of two divisors. */
static void test_divisor(void **st) {
  (void)st;
  for (int64_t d = 1; d <= 4096; d++) check_divisor(d);
  uint64_t s = 12345;
  for (int i = 0; i < 100000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    check_divisor(1 + (int64_t)(s % ((uint64_t)1 << (1 + i % 31))));
  }
  check_divisor((int64_t)1 << 31);
  check_divisor(INT32_MAX);
  for (int64_t r = 0; r < 1 << 20; r++) {
    if (kernel_quotient(r, 1000) != r / 1000 || kernel_quotient(r, 65521) != r / 65521)
      fail_msg("%lld divided by 1000 or 65521", (long long)r);
  }
  uint32_t mag;
  int sh;
  rgcu_divisor(0, &mag, &sh); /* outside the range: nothing */
  assert_true(mag == 0 && sh == 0);
}

int main(void) {
  rg_init();
  C = rg_ctx_new();
  if (system("c++ --version > /dev/null 2>&1") != 0) {
    printf("skipped: no C++ compiler (c++) to run the kernels on the host\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_generated_kernels_on_the_host),
      cmocka_unit_test(test_index_width),
      cmocka_unit_test(test_divisor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
