/*
 * test_backend_cpu_reduce.c — the CPU reductions and softmax against
 * values computed by straightforward loops in the test: every reduction on
 * every dtype over every set of axes of a 3-d input (contiguous, permuted
 * and reversed layouts), NumPy's corner cases (sum of bool, argmax ties and
 * NaNs, empty reductions, the error for max of nothing), large inputs on
 * two threads, and softmax / log_softmax along every axis.
 */
#include "tests/test_backend_cpu.h"

static const rg_opcode red_ops[] = {RG_OP_SUM, RG_OP_PROD, RG_OP_MAX, RG_OP_MIN, RG_OP_MEAN,
                                    RG_OP_ARGMAX, RG_OP_ARGMIN, RG_OP_ALL, RG_OP_ANY};

/* ------------------------------------------------------------------ reference */

/* The reduction of x over mask, one double per output element (C order). */
static double *ref_reduce(rg_opcode op, const rg_tensor *x, const bool *mask, int64_t *nout) {
  int64_t n = rg_tensor_numel(x), no = 1, nred = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (mask[d]) nred *= x->shape[d];
    else no *= x->shape[d];
  }
  double *acc = calloc((size_t)(no ? no : 1), sizeof *acc);
  int64_t *best = calloc((size_t)(no ? no : 1), sizeof *best);
  bool *seen = calloc((size_t)(no ? no : 1), sizeof *seen);
  for (int64_t o = 0; o < no; o++) {
    acc[o] = op == RG_OP_PROD || op == RG_OP_ALL ? 1 : 0;
    best[o] = -1;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t idx[RG_MAX_NDIM], r = i, o = 0, f = 0;
    for (int d = x->ndim - 1; d >= 0; d--) {
      idx[d] = r % x->shape[d];
      r /= x->shape[d];
    }
    for (int d = 0; d < x->ndim; d++) {
      if (mask[d]) f = f * x->shape[d] + idx[d];
      else o = o * x->shape[d] + idx[d];
    }
    double v = rg_tensor_get_f64(x, i);
    switch (op) {
    case RG_OP_SUM: case RG_OP_MEAN: acc[o] += v; break;
    case RG_OP_PROD: acc[o] *= v; break;
    case RG_OP_ALL: acc[o] = acc[o] && v != 0; break;
    case RG_OP_ANY: acc[o] = acc[o] || v != 0; break;
    case RG_OP_MAX: case RG_OP_MIN: case RG_OP_ARGMAX: case RG_OP_ARGMIN: {
      /* visited in C order, so f increases: the first extreme wins */
      bool mx = op == RG_OP_MAX || op == RG_OP_ARGMAX;
      bool better = !seen[o] || (isnan(v) && !isnan(acc[o])) ||
                    (!isnan(acc[o]) && (mx ? v > acc[o] : v < acc[o]));
      if (better) {
        acc[o] = v;
        best[o] = f;
        seen[o] = true;
      }
      break;
    }
    default: break;
    }
  }
  for (int64_t o = 0; o < no; o++) {
    if (op == RG_OP_MEAN) acc[o] = nred ? acc[o] / (double)nred : NAN;
    if (op == RG_OP_ARGMAX || op == RG_OP_ARGMIN) acc[o] = (double)best[o];
  }
  free(best);
  free(seen);
  *nout = no;
  return acc;
}

static rg_dtype expected_dtype(rg_opcode op, rg_dtype dt) {
  bool f = rg_dtype_is_float(dt);
  switch (op) {
  case RG_OP_SUM: case RG_OP_PROD: return f ? dt : RG_INT64;
  case RG_OP_MEAN: return f ? dt : RG_FLOAT64;
  case RG_OP_ARGMAX: case RG_OP_ARGMIN: return RG_INT64;
  case RG_OP_ALL: case RG_OP_ANY: return RG_BOOL;
  default: return dt;
  }
}

/* Reduces x (static type: x's dtype and shape) over the axes in mask and
 * checks the result against the reference. */
static void check_reduce(rg_opcode op, rg_tensor *x, const bool *mask, bool all_axes, int nth) {
  int64_t axes[RG_MAX_NDIM];
  int na = 0;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) axes[na++] = d;
  rg_variable *v = var(x->dtype, x->ndim, x->shape);
  rg_variable *r = rg_apply(C, rg_op_reduce(op, all_axes ? -1 : na, axes), 1, &v);
  assert_non_null(r);
  rg_tensor *out;
  hand_run h;
  if (nth > 1) {
    hand_init(&h, r, nth);
    assert_int_equal(hand_call(&h, &x), 0);
    out = hand_out(&h, 0);
  } else {
    out = eval(r, 1, &x);
  }
  int64_t no;
  double *want = ref_reduce(op, x, mask, &no);
  assert_int_equal(out->dtype, expected_dtype(op, x->dtype));
  assert_int_equal(rg_tensor_numel(out), no);
  /* float32 rows accumulated into float32 rows (as NumPy does) err by up
   * to about count * eps * max|x| */
  int64_t count = rg_tensor_numel(x) / (no ? no : 1);
  double rtol = out->dtype == RG_FLOAT32 ? 1e-5 : 1e-12;
  double atol = out->dtype == RG_FLOAT32 ? 1e-6 + (double)count * 6e-8 * 5 : 1e-6;
  if (op == RG_OP_MEAN && count) atol /= (double)count;
  for (int64_t i = 0; i < no; i++) {
    double got = rg_tensor_get_f64(out, i);
    double w = rg_dtype_is_float(out->dtype) || out->dtype == RG_BOOL || op == RG_OP_ARGMAX ||
                       op == RG_OP_ARGMIN ? want[i] : (double)(int64_t)want[i];
    if (out->dtype == RG_FLOAT32) w = (float)w;
    if (!same_f64(got, w, rg_dtype_is_float(out->dtype) ? rtol : 0, rg_dtype_is_float(out->dtype) ? atol : 0))
      fail_msg("%s of %s over %d axes (%d threads): element %lld: got %.17g, expected %.17g",
               rg_opcode_name(op), rg_dtype_name(x->dtype), na, nth, (long long)i, got, w);
  }
  free(want);
  if (nth > 1) hand_free(&h);
  else rg_tensor_free(out);
}

/* ------------------------------------------------------------------ tests */

static rg_tensor *values_for(rg_opcode op, rg_dtype dt, int nd, const int64_t *shape) {
  if (dt == RG_BOOL) return tens_rand(dt, nd, shape, 0, 1);
  if (op == RG_OP_PROD) return rg_dtype_is_float(dt) ? tens_rand(dt, nd, shape, 0.5, 1.5)
                                                     : tens_rand(dt, nd, shape, dt == RG_UINT8 ? 0 : -2, 2);
  /* few distinct values so that argmax ties happen */
  if (op == RG_OP_ARGMAX || op == RG_OP_ARGMIN) {
    rg_tensor *t = tens_rand(dt, nd, shape, 0, 3);
    return t;
  }
  return rg_dtype_is_float(dt) ? tens_rand(dt, nd, shape, -5, 5)
                               : tens_rand(dt, nd, shape, dt == RG_UINT8 ? 0 : -50, 50);
}

/* Every op, dtype and subset of the axes of a (3 4 5) input, in three
 * layouts: contiguous, permuted (2 0 1) and reversed along axis 1. */
static void test_every_reduction_every_axes(void **st) {
  for (size_t o = 0; o < sizeof red_ops / sizeof red_ops[0]; o++) {
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      rg_tensor *base = values_for(red_ops[o], (rg_dtype)dt, 3, SHAPE(3, 4, 5));
      rg_tensor *perm = rg_tensor_permute(base, (const int[]){2, 0, 1});
      rg_tensor *rev = rg_tensor_view(base, 3, base->shape,
                                      SHAPE(base->strides[0], -base->strides[1], base->strides[2]),
                                      3 * base->strides[1]);
      rg_tensor *layouts[3] = {base, perm, rev};
      for (int l = 0; l < 3; l++) {
        for (int m = 0; m < 8; m++) {
          bool mask[3] = {m & 1, (m >> 1) & 1, (m >> 2) & 1};
          check_reduce(red_ops[o], layouts[l], mask, false, 1);
        }
        bool all[3] = {1, 1, 1};
        check_reduce(red_ops[o], layouts[l], all, true, 1);
      }
      free_all(3, layouts);
    }
  }
}

static rg_tensor *reduce1(rg_opcode op, rg_tensor *x, int na, const int64_t *axes) {
  rg_variable *v = var(x->dtype, x->ndim, x->shape);
  return eval(rg_apply(C, rg_op_reduce(op, na, axes), 1, &v), 1, &x);
}

static void test_numpy_corner_cases(void **st) {
  /* sum of bool counts; sums of int8 do not overflow (int64) */
  rg_tensor *b = tens(RG_BOOL, 1, SHAPE(5), VALS(1, 0, 1, 1, 0));
  rg_tensor *s = reduce1(RG_OP_SUM, b, -1, NULL);
  check(s, RG_INT64, 0, NULL, VALS(3));
  rg_tensor *i8 = tens(RG_INT8, 1, SHAPE(3), VALS(100, 100, 100));
  rg_tensor *s8 = reduce1(RG_OP_SUM, i8, -1, NULL), *m8 = reduce1(RG_OP_MEAN, i8, -1, NULL);
  check(s8, RG_INT64, 0, NULL, VALS(300));
  check(m8, RG_FLOAT64, 0, NULL, VALS(100));
  /* argmax ties go to the first; NaN wins, the first one */
  rg_tensor *t = tens(RG_FLOAT64, 1, SHAPE(6), VALS(1, 3, 3, NAN, 2, NAN));
  rg_tensor *am = reduce1(RG_OP_ARGMAX, t, -1, NULL), *an = reduce1(RG_OP_ARGMIN, t, -1, NULL);
  rg_tensor *mx = reduce1(RG_OP_MAX, t, -1, NULL);
  check(am, RG_INT64, 0, NULL, VALS(3));
  check(an, RG_INT64, 0, NULL, VALS(3));
  check(mx, RG_FLOAT64, 0, NULL, VALS(NAN));
  rg_tensor *ties = tens(RG_INT32, 2, SHAPE(2, 4), VALS(5, 7, 7, 1, 2, 2, 0, 2));
  rg_tensor *a1 = reduce1(RG_OP_ARGMAX, ties, 1, SHAPE(1)), *a0 = reduce1(RG_OP_ARGMIN, ties, 1, SHAPE(0));
  check(a1, RG_INT64, 1, SHAPE(2), VALS(1, 0));
  check(a0, RG_INT64, 1, SHAPE(4), VALS(1, 1, 1, 0));
  rg_tensor *all[] = {b, s, i8, s8, m8, t, am, an, mx, ties, a1, a0};
  free_all(12, all);
}

/* A sum reaching an infinity is that infinity, as in NumPy, also in rows
 * long enough for the blocked, compensated sum (its correction term is
 * NaN there: inf - inf); inf + -inf stays NaN. */
static void test_sums_reaching_infinity(void **st) {
  const int64_t n = 40;
  rg_dtype dts[] = {RG_FLOAT64, RG_FLOAT32};
  for (int d = 0; d < 2; d++) {
    rg_tensor *x = tens(dts[d], 1, &n, NULL), *big = tens(dts[d], 1, &n, NULL);
    for (int64_t i = 0; i < n; i++) {
      rg_tensor_set_f64(x, i, i == 17 ? -INFINITY : 1);
      rg_tensor_set_f64(big, i, dts[d] == RG_FLOAT64 ? 1e308 : 3e38);
    }
    rg_tensor *s = reduce1(RG_OP_SUM, x, -1, NULL), *m = reduce1(RG_OP_MEAN, x, -1, NULL);
    rg_tensor *o = reduce1(RG_OP_SUM, big, -1, NULL);
    check(s, dts[d], 0, NULL, VALS(-INFINITY));
    check(m, dts[d], 0, NULL, VALS(-INFINITY));
    check(o, dts[d], 0, NULL, VALS(INFINITY));
    rg_tensor_set_f64(x, 30, INFINITY);
    rg_tensor *nan = reduce1(RG_OP_SUM, x, -1, NULL);
    check(nan, dts[d], 0, NULL, VALS(NAN));
    rg_tensor *all[] = {x, big, s, m, o, nan};
    free_all(6, all);
  }
}

static void test_empty_reductions(void **st) {
  rg_tensor *e = tens(RG_FLOAT32, 2, SHAPE(3, 0), NULL);
  rg_tensor *s = reduce1(RG_OP_SUM, e, 1, SHAPE(1)), *p = reduce1(RG_OP_PROD, e, 1, SHAPE(1));
  rg_tensor *m = reduce1(RG_OP_MEAN, e, 1, SHAPE(1)), *al = reduce1(RG_OP_ALL, e, 1, SHAPE(1));
  rg_tensor *an = reduce1(RG_OP_ANY, e, 1, SHAPE(1));
  check(s, RG_FLOAT32, 1, SHAPE(3), VALS(0, 0, 0));
  check(p, RG_FLOAT32, 1, SHAPE(3), VALS(1, 1, 1));
  check(m, RG_FLOAT32, 1, SHAPE(3), VALS(NAN, NAN, NAN));
  check(al, RG_BOOL, 1, SHAPE(3), VALS(1, 1, 1));
  check(an, RG_BOOL, 1, SHAPE(3), VALS(0, 0, 0));
  /* max of an empty axis: an error; over the other axis: an empty result */
  rg_variable *v = var(RG_FLOAT32, 2, SHAPE(3, 0));
  rg_opcode noid[] = {RG_OP_MAX, RG_OP_MIN, RG_OP_ARGMAX, RG_OP_ARGMIN};
  for (int i = 0; i < 4; i++) {
    eval_fails(rg_apply(C, rg_op_reduce(noid[i], 1, SHAPE(1)), 1, &v), 1, &e,
               "cannot reduce an empty array");
    eval_fails(rg_apply(C, rg_op_reduce(noid[i], -1, NULL), 1, &v), 1, &e,
               "cannot reduce an empty array");
    rg_tensor *ok = eval(rg_apply(C, rg_op_reduce(noid[i], 1, SHAPE(0)), 1, &v), 1, &e);
    assert_int_equal(ok->ndim, 1);
    assert_int_equal(ok->shape[0], 0);
    rg_tensor_free(ok);
  }
  rg_tensor *sc = scalar(RG_INT16, -7);
  rg_tensor *ss = reduce1(RG_OP_SUM, sc, -1, NULL), *sa = reduce1(RG_OP_ARGMAX, sc, -1, NULL);
  check(ss, RG_INT64, 0, NULL, VALS(-7));
  check(sa, RG_INT64, 0, NULL, VALS(0));
  rg_tensor *all[] = {e, s, p, m, al, an, sc, ss, sa};
  free_all(9, all);
}

/* Large inputs, one and two threads, every strategy: the whole array, the
 * leading axis (rows accumulated), the last axis (rows reduced), a
 * reduction split into partial results. */
static void test_large_and_threads(void **st) {
  rg_tensor *big = tens_rand(RG_FLOAT32, 1, SHAPE(1000003), -1, 1);
  rg_tensor *mat = tens_rand(RG_FLOAT32, 2, SHAPE(300, 1001), -1, 1);
  rg_tensor *tall = tens_rand(RG_INT32, 2, SHAPE(100000, 3), -100, 100);
  bool m1[1] = {1}, r0[2] = {1, 0}, r1[2] = {0, 1};
  rg_opcode ops[] = {RG_OP_SUM, RG_OP_MEAN, RG_OP_MAX, RG_OP_ARGMIN, RG_OP_ANY};
  for (int nth = 1; nth <= 2; nth++) {
    for (size_t o = 0; o < 5; o++) {
      check_reduce(ops[o], big, m1, false, nth);
      check_reduce(ops[o], mat, r0, false, nth);
      check_reduce(ops[o], mat, r1, false, nth);
      check_reduce(ops[o], tall, r0, false, nth);
    }
  }
  /* ties and a NaN across the parts of a split reduction */
  rg_tensor *eq = tens(RG_FLOAT64, 1, SHAPE(200000), NULL);
  rg_tensor_set_f64(eq, 150000, NAN);
  rg_tensor_set_f64(eq, 190000, NAN);
  for (int nth = 1; nth <= 2; nth++) {
    check_reduce(RG_OP_ARGMAX, eq, m1, false, nth);
    check_reduce(RG_OP_MAX, eq, m1, false, nth);
  }
  rg_tensor_set_f64(eq, 150000, 0);
  rg_tensor_set_f64(eq, 190000, 0);
  check_reduce(RG_OP_ARGMIN, eq, m1, false, 2);
  rg_tensor *all[] = {big, mat, tall, eq};
  free_all(4, all);
}

static void test_float32_sum_accuracy(void **st) {
  /* 10^6 copies of 0.1f: a single float32 accumulator drifts by about 1%;
   * the blocked sum stays within a few float32 ulps of the exact value */
  int64_t n = 1000000;
  rg_tensor *x = tens(RG_FLOAT32, 1, &n, NULL);
  float naive = 0;
  for (int64_t i = 0; i < n; i++) {
    ((float *)x->data)[i] = 0.1f;
    naive += 0.1f;
  }
  double exact = (double)0.1f * (double)n;
  rg_tensor *s = reduce1(RG_OP_SUM, x, -1, NULL);
  double got = rg_tensor_get_f64(s, 0);
  assert_true(fabs(naive - exact) > 100);
  if (fabs(got - exact) > 4 * 0.0078125) fail_msg("sum %.9g, exact %.9g", got, exact);
  /* the same over the leading axis of a (250000 4) matrix (rows added
   * into rows, 64 at a time in float32): within 1e-6 relative, where a
   * float32 accumulator drifts by 1e-3 */
  rg_tensor *m = rg_tensor_view(x, 2, SHAPE(250000, 4), SHAPE(16, 4), 0);
  rg_variable *v = var(RG_FLOAT32, 2, SHAPE(250000, 4));
  rg_variable *r = rg_sum(v, 1, SHAPE(0));
  double ex4 = (double)0.1f * 250000;
  for (int nth = 1; nth <= 2; nth++) {
    hand_run h;
    hand_init(&h, r, nth);
    assert_int_equal(hand_call(&h, &m), 0);
    for (int j = 0; j < 4; j++) {
      double g = rg_tensor_get_f64(hand_out(&h, 0), j);
      if (fabs(g - ex4) > 1e-6 * ex4) fail_msg("column %d: %.9g, exact %.9g", j, g, ex4);
    }
    hand_free(&h);
  }
  rg_tensor *all[] = {x, s, m};
  free_all(3, all);
}

/* ------------------------------------------------------------------ softmax */

static void ref_softmax(const rg_tensor *x, int axis, bool lg, double *out) {
  int64_t outer = 1, n = x->shape[axis], inner = 1;
  for (int d = 0; d < axis; d++) outer *= x->shape[d];
  for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < inner; j++) {
      double m = -INFINITY, s = 0;
      for (int64_t i = 0; i < n; i++) m = fmax(m, rg_tensor_get_f64(x, (o * n + i) * inner + j));
      for (int64_t i = 0; i < n; i++) s += exp(rg_tensor_get_f64(x, (o * n + i) * inner + j) - m);
      for (int64_t i = 0; i < n; i++) {
        int64_t k = (o * n + i) * inner + j;
        double v = rg_tensor_get_f64(x, k) - m;
        out[k] = lg ? v - log(s) : exp(v) / s;
      }
    }
  }
}

static void check_softmax(rg_tensor *x, int axis, bool lg, rg_dtype odt, int nth) {
  rg_variable *v = var(x->dtype, x->ndim, x->shape);
  rg_variable *r = lg ? rg_log_softmax(v, axis) : rg_softmax(v, axis);
  hand_run h;
  hand_init(&h, r, nth);
  assert_int_equal(hand_call(&h, &x), 0);
  int64_t n = rg_tensor_numel(x);
  double *want = malloc((size_t)n * sizeof *want);
  ref_softmax(x, axis, lg, want);
  check_close(hand_out(&h, 0), odt, x->ndim, x->shape, want, odt == RG_FLOAT32 ? 2e-5 : 1e-12, 1e-6);
  free(want);
  hand_free(&h);
}

static void test_softmax(void **st) {
  rg_tensor *a = tens_rand(RG_FLOAT64, 3, SHAPE(3, 7, 300), -5, 5);
  rg_tensor *b = tens_rand(RG_FLOAT32, 2, SHAPE(40, 9), 995, 1005); /* large: needs the max shift */
  rg_tensor *c = tens_rand(RG_INT16, 2, SHAPE(4, 6), -3, 3);        /* int16 -> float32 */
  for (int lg = 0; lg < 2; lg++) {
    for (int axis = 0; axis < 3; axis++) check_softmax(a, axis, lg, RG_FLOAT64, axis == 2 ? 2 : 1);
    check_softmax(b, 0, lg, RG_FLOAT32, 1);
    check_softmax(b, 1, lg, RG_FLOAT32, 2);
    check_softmax(c, 1, lg, RG_FLOAT32, 1);
  }
  rg_tensor *nan = tens(RG_FLOAT64, 2, SHAPE(2, 3), VALS(1, NAN, 2, 1, 2, 3));
  rg_tensor *sm = eval(rg_softmax(var(RG_FLOAT64, 2, SHAPE(2, 3)), 1), 1, &nan);
  double e = exp(1.0), t = 1 + e + e * e;
  check_close(sm, RG_FLOAT64, 2, SHAPE(2, 3), VALS(NAN, NAN, NAN, 1 / t, e / t, e * e / t), 1e-12, 0);
  rg_tensor *empty = tens(RG_FLOAT32, 2, SHAPE(0, 3), NULL);
  rg_tensor *se = eval(rg_softmax(var(RG_FLOAT32, 2, SHAPE(0, 3)), 1), 1, &empty);
  assert_int_equal(se->shape[0], 0);
  rg_tensor *all[] = {a, b, c, nan, sm, empty, se};
  free_all(7, all);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_reduction_every_axes),
      cmocka_unit_test(test_numpy_corner_cases),
      cmocka_unit_test(test_sums_reaching_infinity),
      cmocka_unit_test(test_empty_reductions),
      cmocka_unit_test(test_large_and_threads),
      cmocka_unit_test(test_float32_sum_accuracy),
      cmocka_unit_test(test_softmax),
  };
  return cmocka_run_group_tests(tests, cpu_setup, NULL);
}
