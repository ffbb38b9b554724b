/*
 * test_backend_cpu.h — helpers shared by the CPU kernel tests
 * (tests/test_backend_cpu_*.c): making graph inputs and host tensors,
 * running one node through rgb_eval_node or through a runtime of several
 * threads, and comparing results with values computed in the test.
 *
 * Every helper is static: each test binary includes this header once.
 */
#ifndef RELGRAPH_TEST_BACKEND_CPU_H
#define RELGRAPH_TEST_BACKEND_CPU_H

#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend-impl.h"
#include "relgraph/graph.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})
#define U RG_DIM_UNKNOWN
#define MAYBE_UNUSED __attribute__((unused))

static rg_ctx *C;

static int cpu_setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

/* A graph input of a dtype and static shape. */
MAYBE_UNUSED static rg_variable *var(rg_dtype dt, int nd, const int64_t *shape) {
  return rg_input(C, NULL, rg_type_new(dt, nd, shape));
}

/* A graph input whose static shape is all unknown. */
MAYBE_UNUSED static rg_variable *var_u(rg_dtype dt, int nd) {
  int64_t s[RG_MAX_NDIM];
  for (int d = 0; d < nd; d++) s[d] = U;
  return var(dt, nd, s);
}

/* A tensor with the given values (C order), converted from doubles. */
MAYBE_UNUSED static rg_tensor *tens(rg_dtype dt, int nd, const int64_t *shape, const double *v) {
  rg_tensor *t = rg_tensor_new(dt, nd, shape);
  assert_non_null(t);
  int64_t n = rg_tensor_numel(t);
  for (int64_t i = 0; i < n && v; i++) rg_tensor_set_f64(t, i, v[i]);
  return t;
}

/* A tensor of int64 values (exact for large integers). */
MAYBE_UNUSED static rg_tensor *tens_i(rg_dtype dt, int nd, const int64_t *shape, const int64_t *v) {
  rg_tensor *t = rg_tensor_new(dt, nd, shape);
  assert_non_null(t);
  int64_t n = rg_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) rg_tensor_set_i64(t, i, v[i]);
  return t;
}

MAYBE_UNUSED static rg_tensor *scalar(rg_dtype dt, double v) { return tens(dt, 0, NULL, &v); }

/* Deterministic pseudo-random numbers (xorshift). */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
/* Uniform in [lo, hi]. */
static double rng_range(double lo, double hi) { return lo + (hi - lo) * (double)(rng() >> 11) / 0x1p53; }
static int64_t rng_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1)); }

/* A tensor of random values in [lo, hi] (integers for integer dtypes). */
MAYBE_UNUSED static rg_tensor *tens_rand(rg_dtype dt, int nd, const int64_t *shape, double lo, double hi) {
  rg_tensor *t = tens(dt, nd, shape, NULL);
  int64_t n = rg_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    if (rg_dtype_is_float(dt))
      rg_tensor_set_f64(t, i, rng_range(lo, hi));
    else
      rg_tensor_set_i64(t, i, rng_int((int64_t)lo, (int64_t)hi));
  }
  return t;
}

/* ------------------------------------------------------------------ running nodes */

static char last_err[1024];

/* Runs v's node on the inputs; returns output `j` (the others freed), or
 * NULL with the message in last_err. */
static rg_tensor *eval_out(rg_variable *v, int j, int nin, rg_tensor *const *in) {
  assert_non_null(v);
  rg_node *n = v->owner;
  assert_non_null(n);
  assert_int_equal(n->nin, nin);
  rg_tensor *outs[16] = {0};
  assert_true(n->nout <= 16);
  last_err[0] = 0;
  int rc = rgb_eval_node(n, in, outs, last_err, sizeof last_err);
  if (rc) return NULL;
  for (int k = 0; k < n->nout; k++)
    if (k != j) rg_tensor_free(outs[k]);
  return outs[j];
}

MAYBE_UNUSED static rg_tensor *eval(rg_variable *v, int nin, rg_tensor *const *in) {
  rg_tensor *r = eval_out(v, 0, nin, in);
  if (!r) fail_msg("unexpected error: %s", last_err);
  return r;
}

/* eval() where NULL inputs are taken from the node's constant inputs. */
MAYBE_UNUSED static rg_tensor *eval_k(rg_variable *v, int nin, rg_tensor **in) {
  rg_tensor *own[64] = {0};
  assert_non_null(v);
  assert_true(nin <= 64);
  for (int i = 0; i < nin; i++)
    if (!in[i]) in[i] = own[i] = rg_constant_to_tensor(v->owner->inputs[i]);
  rg_tensor *r = eval_out(v, 0, nin, in);
  for (int i = 0; i < nin; i++)
    if (own[i]) {
      rg_tensor_free(own[i]);
      in[i] = NULL;
    }
  if (!r) fail_msg("unexpected error: %s", last_err);
  return r;
}

/* Runs and expects an error whose message contains `msg`. */
MAYBE_UNUSED static void eval_fails(rg_variable *v, int nin, rg_tensor *const *in, const char *msg) {
  rg_tensor *r = eval_out(v, 0, nin, in);
  if (r) {
    rg_tensor_free(r);
    fail_msg("expected an error containing '%s'", msg);
  }
  if (!strstr(last_err, msg)) fail_msg("error '%s' does not contain '%s'", last_err, msg);
}

/* A node run by hand: its own runtime (threads, pool) and cells kept
 * across calls, as a linked function keeps them. */
typedef struct hand_run {
  rgb_node bn;
  rgb_runtime *rt;
  rg_tensor *cells[32];
  rg_tensor **ptrs[32];
  int nin, nout;
} hand_run;

MAYBE_UNUSED static void hand_init(hand_run *h, rg_variable *v, int nthreads) {
  rg_node *n = v->owner;
  assert_non_null(n);
  memset(h, 0, sizeof *h);
  assert_int_equal(rgb_node_init(&h->bn, n), 0);
  h->rt = rgb_runtime_new(nthreads, false);
  h->nin = n->nin;
  h->nout = n->nout;
  assert_true(h->nin + h->nout <= 32);
  for (int i = 0; i < 32; i++) h->ptrs[i] = &h->cells[i];
}

/* Calls the kernel with the given inputs (borrowed); returns the status. */
MAYBE_UNUSED static int hand_call(hand_run *h, rg_tensor *const *in) {
  for (int i = 0; i < h->nin; i++) h->cells[i] = in[i];
  rgb_exec x = {.node = &h->bn, .inp = h->ptrs, .outp = h->ptrs + h->nin, .rt = h->rt};
  return rgb_cpu_kernels[h->bn.code](&x);
}

MAYBE_UNUSED static rg_tensor *hand_out(hand_run *h, int j) { return h->cells[h->nin + j]; }

MAYBE_UNUSED static void hand_free(hand_run *h) {
  for (int j = 0; j < h->nout; j++) rg_tensor_free(h->cells[h->nin + j]);
  rgb_runtime_free(h->rt);
  rgb_node_clear(&h->bn);
}

/* ------------------------------------------------------------------ comparing */

static bool same_f64(double a, double b, double rtol, double atol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= atol + rtol * fabs(b);
}

/* Asserts t has dtype dt, shape (nd, shape) and values v (NaN equal to
 * NaN), within tolerances for floats, exactly otherwise. */
MAYBE_UNUSED static void check_close(const rg_tensor *t, rg_dtype dt, int nd, const int64_t *shape,
                        const double *v, double rtol, double atol) {
  assert_non_null(t);
  if (t->dtype != dt) fail_msg("dtype %s, expected %s", rg_dtype_name(t->dtype), rg_dtype_name(dt));
  assert_int_equal(t->ndim, nd);
  for (int d = 0; d < nd; d++) assert_int_equal(t->shape[d], shape[d]);
  int64_t n = rg_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    double got = rg_tensor_get_f64(t, i);
    if (!same_f64(got, v[i], rg_dtype_is_float(dt) ? rtol : 0, rg_dtype_is_float(dt) ? atol : 0))
      fail_msg("element %lld: got %.17g, expected %.17g", (long long)i, got, v[i]);
  }
}

MAYBE_UNUSED static void check(const rg_tensor *t, rg_dtype dt, int nd, const int64_t *shape, const double *v) {
  check_close(t, dt, nd, shape, v, 0, 0);
}

/* Exact int64 comparison. */
MAYBE_UNUSED static void check_i(const rg_tensor *t, rg_dtype dt, int nd, const int64_t *shape,
                    const int64_t *v) {
  assert_non_null(t);
  assert_int_equal(t->dtype, dt);
  assert_int_equal(t->ndim, nd);
  for (int d = 0; d < nd; d++) assert_int_equal(t->shape[d], shape[d]);
  int64_t n = rg_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (rg_tensor_get_i64(t, i) != v[i])
      fail_msg("element %lld: got %lld, expected %lld", (long long)i,
               (long long)rg_tensor_get_i64(t, i), (long long)v[i]);
}

MAYBE_UNUSED static void free_all(int n, rg_tensor **ts) {
  for (int i = 0; i < n; i++) rg_tensor_free(ts[i]);
}

#endif
