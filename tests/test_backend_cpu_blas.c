/*
 * test_backend_cpu_blas.c — dot, outer, gemm, gemv and ger on the CPU
 * against products computed by triple loops in the test: every shape
 * combination of dot, float and integer / bool / mixed dtypes, operands
 * that are transposed, strided, reversed or broadcast (zero strides),
 * empty inner dimensions, BLAS's beta = 0 (z not read), in-place
 * execution, two threads, and shape errors; batched_dot per batch index
 * on every rank combination, with transposed, reversed and broadcast
 * batches; which OpenBLAS kernels run
 * and which the library would choose instead.
 */
#include "tests/test_backend_cpu.h"

#include <strings.h>

#include "relgraph/backend.h"

/* ------------------------------------------------------------------ reference */

/* Element (i, j) of t seen as a matrix: vectors are rows (as_row) or
 * columns. */
static double elem(const rg_tensor *t, int64_t i, int64_t j, bool as_row) {
  if (t->ndim == 1) return rg_load_f64(t->dtype, t->data + (as_row ? j : i) * t->strides[0]);
  return rg_load_f64(t->dtype, t->data + i * t->strides[0] + j * t->strides[1]);
}

/* a @ b as doubles, (m, n) in C order. */
static double *ref_matmul(const rg_tensor *a, const rg_tensor *b, int64_t *m, int64_t *n) {
  *m = a->ndim == 2 ? a->shape[0] : 1;
  *n = b->ndim == 2 ? b->shape[1] : 1;
  int64_t k = b->shape[0];
  double *c = calloc((size_t)(*m * *n + 1), sizeof *c);
  for (int64_t i = 0; i < *m; i++)
    for (int64_t j = 0; j < *n; j++)
      for (int64_t l = 0; l < k; l++) c[i * *n + j] += elem(a, i, l, true) * elem(b, l, j, false);
  return c;
}

static void check_matmul(const rg_tensor *out, const rg_tensor *a, const rg_tensor *b) {
  int64_t m, n;
  double *want = ref_matmul(a, b, &m, &n);
  rg_dtype dt = out->dtype;
  for (int64_t i = 0; i < m * n; i++) {
    double w = want[i];
    if (dt == RG_BOOL) w = w != 0;
    else if (!rg_dtype_is_float(dt)) {
      char buf[8];
      rg_store_i64(dt, buf, (int64_t)w);
      w = rg_load_f64(dt, buf);
    }
    want[i] = w;
  }
  assert_int_equal(rg_tensor_numel(out), m * n);
  int64_t shape[2];
  int nd = 0;
  if (a->ndim == 2) shape[nd++] = m;
  if (b->ndim == 2) shape[nd++] = n;
  check_close(out, dt, nd, shape, want, dt == RG_FLOAT32 ? 1e-5 : 1e-12, dt == RG_FLOAT32 ? 1e-4 : 1e-10);
  free(want);
}

static rg_tensor *run_dot(rg_tensor *a, rg_tensor *b) {
  rg_tensor *in[2] = {a, b};
  return eval(rg_dot(var(a->dtype, a->ndim, a->shape), var(b->dtype, b->ndim, b->shape)), 2, in);
}

/* Layout variants of a (r, c) matrix holding the same values: contiguous,
 * a transposed copy seen through a permutation, and a view with padded
 * rows; of a vector: contiguous, step 2, reversed. */
static rg_tensor *variant(rg_tensor *t, int v) {
  if (v == 0) return rg_tensor_ref(t);
  if (t->ndim == 2) {
    int64_t r = t->shape[0], c = t->shape[1], es = (int64_t)rg_dtype_size(t->dtype);
    if (v == 1) { /* storage (c, r), viewed transposed */
      rg_tensor *s = rg_tensor_new(t->dtype, 2, SHAPE(c, r));
      for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) rg_tensor_set_f64(s, j * r + i, rg_tensor_get_f64(t, i * c + j));
      rg_tensor *vw = rg_tensor_permute(s, (const int[]){1, 0});
      rg_tensor_free(s);
      return vw;
    }
    rg_tensor *s = rg_tensor_new(t->dtype, 2, SHAPE(r, c + 3)); /* padded rows */
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) rg_tensor_set_f64(s, i * (c + 3) + j, rg_tensor_get_f64(t, i * c + j));
    rg_tensor *vw = rg_tensor_view(s, 2, SHAPE(r, c), SHAPE((c + 3) * es, es), 0);
    rg_tensor_free(s);
    return vw;
  }
  int64_t n = t->shape[0], es = (int64_t)rg_dtype_size(t->dtype);
  rg_tensor *s = rg_tensor_new(t->dtype, 1, SHAPE(2 * n + 1));
  for (int64_t i = 0; i < n; i++)
    rg_tensor_set_f64(s, v == 1 ? 2 * i : 2 * (n - 1 - i), rg_tensor_get_f64(t, i));
  rg_tensor *vw = v == 1 ? rg_tensor_view(s, 1, SHAPE(n), SHAPE(2 * es), 0)
                         : rg_tensor_view(s, 1, SHAPE(n), SHAPE(-2 * es), 2 * (n - 1) * es);
  rg_tensor_free(s);
  return vw;
}

/* ------------------------------------------------------------------ dot */

static void test_dot_float_layouts(void **st) {
  rg_dtype dts[] = {RG_FLOAT32, RG_FLOAT64};
  int64_t M = 7, K = 5, N = 6;
  for (int d = 0; d < 2; d++) {
    rg_tensor *A = tens_rand(dts[d], 2, SHAPE(M, K), -1, 1), *B = tens_rand(dts[d], 2, SHAPE(K, N), -1, 1);
    rg_tensor *u = tens_rand(dts[d], 1, SHAPE(K), -1, 1), *w = tens_rand(dts[d], 1, SHAPE(K), -1, 1);
    rg_tensor *lefts[2] = {A, u}, *rights[2] = {B, w};
    for (int l = 0; l < 2; l++)
      for (int r = 0; r < 2; r++)
        for (int vl = 0; vl < 3; vl++)
          for (int vr = 0; vr < 3; vr++) {
            rg_tensor *a = variant(lefts[l], vl), *b = variant(rights[r], vr);
            rg_tensor *o = run_dot(a, b);
            check_matmul(o, a, b);
            rg_tensor *t3[] = {a, b, o};
            free_all(3, t3);
          }
    rg_tensor *all[] = {A, B, u, w};
    free_all(4, all);
  }
}

static void test_dot_other_dtypes(void **st) {
  /* every pair of dtypes, matrix @ matrix and vector @ vector */
  for (int da = 0; da < RG_NDTYPES; da++)
    for (int db = 0; db < RG_NDTYPES; db++) {
      rg_tensor *a = tens_rand((rg_dtype)da, 2, SHAPE(3, 4), 0, da == RG_BOOL ? 1 : 5);
      rg_tensor *b = tens_rand((rg_dtype)db, 2, SHAPE(4, 2), 0, db == RG_BOOL ? 1 : 5);
      rg_tensor *bt = variant(b, 1);
      rg_tensor *o = run_dot(a, bt);
      assert_int_equal(o->dtype, rg_dtype_promote((rg_dtype)da, (rg_dtype)db));
      check_matmul(o, a, bt);
      rg_tensor *u = tens_rand((rg_dtype)da, 1, SHAPE(9), 0, da == RG_BOOL ? 1 : 3);
      rg_tensor *v = tens_rand((rg_dtype)db, 1, SHAPE(9), 0, db == RG_BOOL ? 1 : 3);
      rg_tensor *rv = variant(v, 2);
      rg_tensor *ov = run_dot(u, rv);
      check_matmul(ov, u, rv);
      rg_tensor *all[] = {a, b, bt, o, u, v, rv, ov};
      free_all(8, all);
    }
  /* integer products wrap like NumPy's */
  rg_tensor *a = tens(RG_INT8, 2, SHAPE(1, 2), VALS(100, 100)), *b = tens(RG_INT8, 2, SHAPE(2, 1), VALS(2, 1));
  rg_tensor *o = run_dot(a, b);
  check(o, RG_INT8, 2, SHAPE(1, 1), VALS(44)); /* 300 mod 256 */
  rg_tensor *all[] = {a, b, o};
  free_all(3, all);
}

static void test_dot_edges_and_errors(void **st) {
  /* a zero-stride (broadcast) operand is copied for BLAS */
  rg_tensor *row = tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, 2, 3));
  rg_tensor *bc = rg_tensor_view(row, 2, SHAPE(4, 3), SHAPE(0, 8), 0);
  rg_tensor *v = tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, 1, 1));
  rg_tensor *o = run_dot(bc, v);
  check(o, RG_FLOAT64, 1, SHAPE(4), VALS(6, 6, 6, 6));
  /* empty inner dimension: zeros; empty outer: empty */
  rg_tensor *a0 = tens(RG_FLOAT32, 2, SHAPE(2, 0), NULL), *b0 = tens(RG_FLOAT32, 2, SHAPE(0, 3), NULL);
  rg_tensor *z = run_dot(a0, b0);
  check(z, RG_FLOAT32, 2, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0));
  rg_tensor *b32 = tens(RG_FLOAT32, 2, SHAPE(3, 2), NULL);
  rg_tensor *e = run_dot(b0, b32);
  assert_int_equal(rg_tensor_numel(e), 0);
  rg_tensor_free(b32);
  /* shapes known only at run time */
  rg_tensor *m = tens(RG_FLOAT32, 2, SHAPE(2, 3), NULL), *w = tens(RG_FLOAT32, 1, SHAPE(4), NULL);
  rg_tensor *in[2] = {m, w};
  eval_fails(rg_dot(var_u(RG_FLOAT32, 2), var_u(RG_FLOAT32, 1)), 2, in,
             "dot: shapes (2 3) and (4) are not aligned");
  rg_tensor *all[] = {row, bc, v, o, a0, b0, z, e, m, w};
  free_all(10, all);
}

/* ------------------------------------------------------------------ batched_dot */

static rg_tensor *run_batched_dot(rg_tensor *a, rg_tensor *b) {
  rg_tensor *in[2] = {a, b};
  return eval(rg_batched_dot(var(a->dtype, a->ndim, a->shape), var(b->dtype, b->ndim, b->shape)), 2, in);
}

/* t[i], a view without the leading dimension. */
static rg_tensor *batch(const rg_tensor *t, int64_t i) {
  return rg_tensor_view(t, t->ndim - 1, t->shape + 1, t->strides + 1, i * t->strides[0]);
}

/* Each batch of out against the product of the operands' batches. */
static void check_batched(const rg_tensor *out, const rg_tensor *a, const rg_tensor *b) {
  assert_int_equal(out->shape[0], a->shape[0]);
  assert_int_equal(out->ndim, 1 + (a->ndim == 3) + (b->ndim == 3));
  for (int64_t i = 0; i < a->shape[0]; i++) {
    rg_tensor *oi = batch(out, i), *ai = batch(a, i), *bi = batch(b, i);
    check_matmul(oi, ai, bi);
    rg_tensor *t3[] = {oi, ai, bi};
    free_all(3, t3);
  }
}

/* Layouts of a (B, r, c) or (B, c) operand: contiguous, its batches
 * stored transposed, the batches in reverse order, one batch broadcast
 * (stride 0). */
static rg_tensor *batch_variant(rg_tensor *t, int v) {
  if (v == 0) return rg_tensor_ref(t);
  int64_t n = t->shape[0];
  if (v == 1 && t->ndim == 3) {
    int64_t r = t->shape[1], c = t->shape[2];
    rg_tensor *s = rg_tensor_new(t->dtype, 3, SHAPE(n, c, r));
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < r; j++)
        for (int64_t l = 0; l < c; l++)
          rg_tensor_set_f64(s, (i * c + l) * r + j, rg_tensor_get_f64(t, (i * r + j) * c + l));
    rg_tensor *vw = rg_tensor_permute(s, (const int[]){0, 2, 1});
    rg_tensor_free(s);
    return vw;
  }
  int64_t shape[3], strides[3];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d], strides[d] = t->strides[d];
  if (v == 3) { /* every batch is batch 0 */
    strides[0] = 0;
    return rg_tensor_view(t, t->ndim, shape, strides, 0);
  }
  strides[0] = -t->strides[0]; /* reversed (v 1 on a vector per batch too) */
  return rg_tensor_view(t, t->ndim, shape, strides, (n - 1) * t->strides[0]);
}

static void test_batched_dot(void **st) {
  rg_dtype dts[] = {RG_FLOAT32, RG_FLOAT64, RG_INT32};
  int64_t nb = 4, M = 3, K = 5, N = 2;
  for (int d = 0; d < 3; d++) {
    bool fl = rg_dtype_is_float(dts[d]);
    rg_tensor *A = tens_rand(dts[d], 3, SHAPE(nb, M, K), fl ? -1 : 0, fl ? 1 : 5);
    rg_tensor *B = tens_rand(dts[d], 3, SHAPE(nb, K, N), fl ? -1 : 0, fl ? 1 : 5);
    rg_tensor *u = tens_rand(dts[d], 2, SHAPE(nb, K), fl ? -1 : 0, fl ? 1 : 5);
    rg_tensor *w = tens_rand(dts[d], 2, SHAPE(nb, K), fl ? -1 : 0, fl ? 1 : 5);
    rg_tensor *lefts[2] = {A, u}, *rights[2] = {B, w};
    for (int l = 0; l < 2; l++)
      for (int r = 0; r < 2; r++)
        for (int vl = 0; vl < 4; vl++)
          for (int vr = 0; vr < 4; vr++) {
            rg_tensor *a = batch_variant(lefts[l], vl), *b = batch_variant(rights[r], vr);
            rg_tensor *o = run_batched_dot(a, b);
            assert_int_equal(o->dtype, dts[d]);
            check_batched(o, a, b);
            rg_tensor *t3[] = {a, b, o};
            free_all(3, t3);
          }
    rg_tensor *all[] = {A, B, u, w};
    free_all(4, all);
  }
  /* mixed dtypes promote; float32 @ int operands are converted once */
  rg_tensor *a = tens_rand(RG_INT16, 3, SHAPE(2, 2, 3), 0, 4), *b = tens_rand(RG_FLOAT32, 3, SHAPE(2, 3, 2), -1, 1);
  rg_tensor *o = run_batched_dot(a, b);
  assert_int_equal(o->dtype, RG_FLOAT32);
  check_batched(o, a, b);
  /* empty inner dimension: zeros; no batches: empty */
  rg_tensor *a0 = tens(RG_FLOAT64, 3, SHAPE(2, 1, 0), NULL), *b0 = tens(RG_FLOAT64, 3, SHAPE(2, 0, 2), NULL);
  rg_tensor *z = run_batched_dot(a0, b0);
  check(z, RG_FLOAT64, 3, SHAPE(2, 1, 2), VALS(0, 0, 0, 0));
  rg_tensor *e1 = tens(RG_FLOAT64, 2, SHAPE(0, 3), NULL), *e2 = tens(RG_FLOAT64, 3, SHAPE(0, 3, 2), NULL);
  rg_tensor *e = run_batched_dot(e1, e2);
  assert_int_equal(e->ndim, 2);
  assert_int_equal(rg_tensor_numel(e), 0);
  /* shapes known only at run time */
  rg_tensor *p = tens(RG_FLOAT32, 3, SHAPE(2, 2, 3), NULL), *q = tens(RG_FLOAT32, 3, SHAPE(3, 3, 2), NULL);
  rg_tensor *q2 = tens(RG_FLOAT32, 3, SHAPE(2, 4, 2), NULL);
  rg_tensor *in1[2] = {p, q}, *in2[2] = {p, q2};
  eval_fails(rg_batched_dot(var_u(RG_FLOAT32, 3), var_u(RG_FLOAT32, 3)), 2, in1,
             "batched_dot: batch sizes differ: shapes (2 2 3) and (3 3 2)");
  eval_fails(rg_batched_dot(var_u(RG_FLOAT32, 3), var_u(RG_FLOAT32, 3)), 2, in2,
             "batched_dot: shapes (2 2 3) and (2 4 2) are not aligned");
  rg_tensor *all[] = {a, b, o, a0, b0, z, e1, e2, e, p, q, q2};
  free_all(12, all);
}

static void test_outer(void **st) {
  rg_tensor *x = tens(RG_INT16, 1, SHAPE(3), VALS(1, -2, 3)), *y = tens(RG_FLOAT32, 1, SHAPE(2), VALS(0.5, 4));
  rg_tensor *in[2] = {x, y};
  rg_tensor *o = eval(rg_outer(var(RG_INT16, 1, SHAPE(3)), var(RG_FLOAT32, 1, SHAPE(2))), 2, in);
  check(o, RG_FLOAT32, 2, SHAPE(3, 2), VALS(0.5, 4, -1, -8, 1.5, 12));
  rg_tensor *rx = variant(x, 2);
  rg_tensor *in2[2] = {rx, rx};
  rg_tensor *o2 = eval(rg_outer(var(RG_INT16, 1, SHAPE(3)), var(RG_INT16, 1, SHAPE(3))), 2, in2);
  check(o2, RG_INT16, 2, SHAPE(3, 3), VALS(1, -2, 3, -2, 4, -6, 3, -6, 9));
  rg_tensor *all[] = {x, y, o, rx, o2};
  free_all(5, all);
}

/* ------------------------------------------------------------------ BLAS forms */

static rg_variable *gemm_of(rg_tensor *z, rg_tensor *a, rg_tensor *b, int inplace) {
  rg_variable *in[5] = {var(z->dtype, 2, z->shape), var(z->dtype, 0, NULL), var(a->dtype, 2, a->shape),
                        var(b->dtype, 2, b->shape), var(z->dtype, 0, NULL)};
  const rg_op *op = rg_op_get(RG_OP_GEMM);
  if (inplace >= 0) op = rg_op_inplace(op, inplace);
  rg_node *n = rg_make_node(C, op, 5, in);
  assert_non_null(n);
  return n->outputs[0];
}

static void test_gemm(void **st) {
  rg_dtype dts[] = {RG_FLOAT32, RG_FLOAT64};
  double betas[] = {0, 1, -0.5};
  for (int d = 0; d < 2; d++)
    for (int bi = 0; bi < 3; bi++)
      for (int v = 0; v < 3; v++) {
        rg_tensor *A = tens_rand(dts[d], 2, SHAPE(6, 4), -1, 1), *B = tens_rand(dts[d], 2, SHAPE(4, 5), -1, 1);
        rg_tensor *a = variant(A, v), *b = variant(B, 2 - v);
        rg_tensor *z = tens_rand(dts[d], 2, SHAPE(6, 5), -1, 1);
        if (betas[bi] == 0) rg_tensor_set_f64(z, 3, NAN); /* not read when beta = 0 */
        rg_tensor *alpha = scalar(dts[d], 1.5), *beta = scalar(dts[d], betas[bi]);
        int64_t m, n;
        double *ab = ref_matmul(a, b, &m, &n);
        double want[30];
        for (int i = 0; i < 30; i++)
          want[i] = 1.5 * ab[i] + (betas[bi] == 0 ? 0 : betas[bi] * rg_tensor_get_f64(z, i));
        rg_tensor *in[5] = {z, alpha, a, b, beta};
        rg_tensor *o = eval(gemm_of(z, a, b, v == 1 ? 0 : -1), 5, in);
        check_close(o, dts[d], 2, SHAPE(6, 5), want, 1e-5, 1e-5);
        if (v == 1) assert_ptr_equal(o->data, z->data); /* in place */
        else assert_ptr_not_equal(o->data, z->data);
        free(ab);
        rg_tensor *all[] = {A, B, a, b, z, alpha, beta, o};
        free_all(8, all);
      }
  /* alpha 0 or k = 0: beta * z only */
  rg_tensor *z = tens(RG_FLOAT64, 2, SHAPE(1, 2), VALS(2, 4)), *a = tens(RG_FLOAT64, 2, SHAPE(1, 0), NULL);
  rg_tensor *b = tens(RG_FLOAT64, 2, SHAPE(0, 2), NULL), *al = scalar(RG_FLOAT64, 1), *be = scalar(RG_FLOAT64, 3);
  rg_tensor *in[5] = {z, al, a, b, be};
  rg_tensor *o = eval(gemm_of(z, a, b, -1), 5, in);
  check(o, RG_FLOAT64, 2, SHAPE(1, 2), VALS(6, 12));
  /* errors on run-time shapes */
  rg_variable *vin[5] = {var_u(RG_FLOAT64, 2), var(RG_FLOAT64, 0, NULL), var_u(RG_FLOAT64, 2),
                         var_u(RG_FLOAT64, 2), var(RG_FLOAT64, 0, NULL)};
  rg_variable *g = rg_gemm(vin[0], vin[1], vin[2], vin[3], vin[4]);
  rg_tensor *x23 = tens(RG_FLOAT64, 2, SHAPE(2, 3), NULL), *x45 = tens(RG_FLOAT64, 2, SHAPE(4, 5), NULL);
  rg_tensor *x35 = tens(RG_FLOAT64, 2, SHAPE(3, 5), NULL);
  rg_tensor *bad1[5] = {x23, al, x23, x45, be}, *bad2[5] = {x45, al, x23, x35, be};
  eval_fails(g, 5, bad1, "gemm: shapes (2 3) and (4 5) are not aligned");
  eval_fails(g, 5, bad2, "gemm: z of shape (4 5) does not match x @ y of shape (2 5)");
  rg_tensor *all[] = {z, a, b, al, be, o, x23, x45, x35};
  free_all(9, all);
}

static void test_gemv_ger(void **st) {
  for (int v = 0; v < 3; v++) {
    rg_tensor *A0 = tens_rand(RG_FLOAT64, 2, SHAPE(5, 3), -1, 1), *x0 = tens_rand(RG_FLOAT64, 1, SHAPE(3), -1, 1);
    rg_tensor *A = variant(A0, v), *xv = variant(x0, v);
    rg_tensor *y = tens_rand(RG_FLOAT64, 1, SHAPE(5), -1, 1);
    rg_tensor *al = scalar(RG_FLOAT64, 2), *be = scalar(RG_FLOAT64, v == 0 ? 0 : 0.5);
    int64_t m, n;
    double *ax = ref_matmul(A, xv, &m, &n), want[5];
    for (int i = 0; i < 5; i++) want[i] = 2 * ax[i] + (v == 0 ? 0 : 0.5 * rg_tensor_get_f64(y, i));
    rg_variable *g = rg_gemv(var(RG_FLOAT64, 1, SHAPE(5)), var(RG_FLOAT64, 0, NULL), var(RG_FLOAT64, 2, SHAPE(5, 3)),
                             var(RG_FLOAT64, 1, SHAPE(3)), var(RG_FLOAT64, 0, NULL));
    rg_tensor *in[5] = {y, al, A, xv, be};
    rg_tensor *o = eval(g, 5, in);
    check_close(o, RG_FLOAT64, 1, SHAPE(5), want, 1e-12, 1e-12);
    free(ax);
    /* ger: A + alpha * outer(u, w), u and w in every layout */
    rg_tensor *u0 = tens_rand(RG_FLOAT32, 1, SHAPE(4), -1, 1), *w0 = tens_rand(RG_FLOAT32, 1, SHAPE(3), -1, 1);
    rg_tensor *u = variant(u0, v), *w = variant(w0, 2 - v), *B = tens_rand(RG_FLOAT32, 2, SHAPE(4, 3), -1, 1);
    rg_tensor *al32 = scalar(RG_FLOAT32, -1);
    double wg[12];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++)
        wg[i * 3 + j] = rg_tensor_get_f64(B, i * 3 + j) - rg_tensor_get_f64(u, i) * rg_tensor_get_f64(w, j);
    rg_variable *gi[4] = {var(RG_FLOAT32, 2, SHAPE(4, 3)), var(RG_FLOAT32, 0, NULL), var(RG_FLOAT32, 1, SHAPE(4)),
                          var(RG_FLOAT32, 1, SHAPE(3))};
    rg_node *gn = rg_make_node(C, rg_op_inplace(rg_op_get(RG_OP_GER), 0), 4, gi);
    rg_tensor *gin[4] = {B, al32, u, w};
    rg_tensor *go = eval(gn->outputs[0], 4, gin);
    check_close(go, RG_FLOAT32, 2, SHAPE(4, 3), wg, 1e-6, 1e-6);
    assert_ptr_equal(go->data, B->data);
    rg_tensor *all[] = {A0, x0, A, xv, y, al, be, o, u0, w0, u, w, B, al32, go};
    free_all(15, all);
  }
}

/* Large products on two threads (OpenBLAS threads follow the runtime). */
static void test_threads(void **st) {
  rg_tensor *a = tens_rand(RG_FLOAT32, 2, SHAPE(130, 70), -1, 1), *b = tens_rand(RG_FLOAT32, 2, SHAPE(70, 90), -1, 1);
  rg_variable *d = rg_dot(var(RG_FLOAT32, 2, SHAPE(130, 70)), var(RG_FLOAT32, 2, SHAPE(70, 90)));
  for (int nth = 1; nth <= 2; nth++) {
    hand_run h;
    hand_init(&h, d, nth);
    rg_tensor *in[2] = {a, b};
    assert_int_equal(hand_call(&h, in), 0);
    check_matmul(hand_out(&h, 0), a, b);
    hand_free(&h);
  }
  rg_tensor *all[] = {a, b};
  free_all(2, all);
}

/* OpenBLAS names its kernels; a better choice is offered only over the
 * generic ones, and never over a choice made in OPENBLAS_CORETYPE that
 * OpenBLAS took. */
static void test_blas_kernels(void **st) {
  (void)st;
  const char *core = rg_blas_core(), *better = rg_blas_better_core();
  assert_non_null(core);
  assert_true(strlen(core) > 0);
  if (better) {
    assert_string_equal(core, "Prescott");
    assert_true(!strcmp(better, "SkylakeX") || !strcmp(better, "Haswell"));
  }
  const char *set = getenv("OPENBLAS_CORETYPE");
  if (set && !strcasecmp(set, core) && strcasecmp(set, "Prescott")) assert_null(better);
  /* nothing to start again with: no arguments, or a choice already made */
  rg_blas_choose_kernels(NULL);
  char *args[] = {NULL};
  rg_blas_choose_kernels(args);
  char *prev = set ? strdup(set) : NULL;
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  char *self[] = {"test_backend_cpu_blas", NULL};
  rg_blas_choose_kernels(self); /* returns: the variable is set */
  assert_string_equal(getenv("OPENBLAS_CORETYPE"), "Prescott");
  if (prev) setenv("OPENBLAS_CORETYPE", prev, 1);
  else unsetenv("OPENBLAS_CORETYPE");
  free(prev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dot_float_layouts),
      cmocka_unit_test(test_dot_other_dtypes),
      cmocka_unit_test(test_dot_edges_and_errors),
      cmocka_unit_test(test_batched_dot),
      cmocka_unit_test(test_outer),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_gemv_ger),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_blas_kernels),
  };
  return cmocka_run_group_tests(tests, cpu_setup, NULL);
}
