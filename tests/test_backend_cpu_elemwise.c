/*
 * test_backend_cpu_elemwise.c — the CPU elementwise kernels against values
 * computed in the test: every op on every pair of input dtypes the core
 * accepts (a reference loop in double / int64 below), then hand-computed
 * NumPy corner cases (integer division and modulo signs and zero divisors,
 * float divmod, NaN propagation, half-to-even rounding, casts out of range,
 * weak literals), broadcasting, negative / zero / permuted strides, empty
 * tensors and scalars, in-place execution, several threads and run-time
 * errors.
 */
#include "tests/test_backend_cpu.h"

/* ------------------------------------------------------------------ reference */

/* v converted to dtype dt and back (wrapping for integers, float32
 * rounding). */
static double to_dtype(rg_dtype dt, double v) {
  char buf[8];
  if (!rg_dtype_is_float(dt) && dt != RG_BOOL && !isnan(v) && fabs(v) < 0x1p62) {
    rg_store_i64(dt, buf, (int64_t)v);
    return rg_load_f64(dt, buf);
  }
  rg_store_f64(dt, buf, v);
  return rg_load_f64(dt, buf);
}

static double py_floor_div(double a, double b, bool integer) {
  if (b == 0) return integer ? 0 : a / b;
  return floor(a / b);
}

static double py_mod(double a, double b, bool integer) {
  if (b == 0) return integer ? 0 : NAN;
  return a - b * floor(a / b);
}

static double ipow_ref(double base, double e) {
  double r = 1;
  for (int i = 0; i < (int)e; i++) r *= base;
  return r;
}

/* The expected result of op on one element (inputs already converted to
 * the dtype the op computes in, cdt), before conversion to the output. */
static double ref_elem(rg_opcode op, rg_dtype cdt, const double *v) {
  double a = v[0], b = v[1], c = v[2];
  bool isint = !rg_dtype_is_float(cdt), isbool = cdt == RG_BOOL;
  switch (op) {
  case RG_OP_ADD: return isbool ? (a || b) : a + b;
  case RG_OP_MUL: return isbool ? (a && b) : a * b;
  case RG_OP_SUB: return a - b;
  case RG_OP_TRUE_DIV: return a / b;
  case RG_OP_INT_DIV: return py_floor_div(a, b, isint);
  case RG_OP_MOD: return py_mod(a, b, isint);
  case RG_OP_POW: return isint ? ipow_ref(a, b) : pow(a, b);
  case RG_OP_NEG: return -a;
  case RG_OP_ABS: return fabs(a);
  case RG_OP_EXP: return exp(a);
  case RG_OP_LOG: return log(a);
  case RG_OP_LOG1P: return log1p(a);
  case RG_OP_EXPM1: return expm1(a);
  case RG_OP_SQRT: return sqrt(a);
  case RG_OP_SQR: return a * a;
  case RG_OP_SIN: return sin(a);
  case RG_OP_COS: return cos(a);
  case RG_OP_TANH: return tanh(a);
  case RG_OP_SIGMOID: return 1 / (1 + exp(-a));
  case RG_OP_SOFTPLUS: return log1p(exp(a));
  case RG_OP_ERF: return erf(a);
  case RG_OP_MAXIMUM: return a > b ? a : b;
  case RG_OP_MINIMUM: return a < b ? a : b;
  case RG_OP_FLOOR: return floor(a);
  case RG_OP_CEIL: return ceil(a);
  case RG_OP_ROUND: return nearbyint(a);
  case RG_OP_SIGN: return a > 0 ? 1 : a < 0 ? -1 : 0;
  case RG_OP_CLIP: return fmin(fmax(a, b), c);
  case RG_OP_LT: return a < b;
  case RG_OP_GT: return a > b;
  case RG_OP_LE: return a <= b;
  case RG_OP_GE: return a >= b;
  case RG_OP_EQ: return a == b;
  case RG_OP_NEQ: return a != b;
  case RG_OP_AND: return (double)((int64_t)a & (int64_t)b);
  case RG_OP_OR: return (double)((int64_t)a | (int64_t)b);
  case RG_OP_XOR: return (double)((int64_t)a ^ (int64_t)b);
  case RG_OP_NOT: return isbool ? !a : (double)~(int64_t)a;
  case RG_OP_SWITCH: return a != 0 ? b : c;
  case RG_OP_IDENTITY: return a;
  case RG_OP_SECOND: return b;
  default: fail_msg("no reference for %s", rg_opcode_name(op)); return 0;
  }
}

/* Element i (C order of the output shape) of t broadcast to that shape. */
static double bcast_get(const rg_tensor *t, int nd, const int64_t *shape, int64_t i) {
  int64_t idx[RG_MAX_NDIM];
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  const char *p = t->data;
  for (int d = 0; d < t->ndim; d++) {
    int64_t k = idx[d + nd - t->ndim];
    if (t->shape[d] == 1) k = 0;
    p += k * t->strides[d];
  }
  return rg_load_f64(t->dtype, p);
}

static bool is_compare(rg_opcode op) { return op >= RG_OP_LT && op <= RG_OP_NEQ; }

/* Checks out = op(in...) elementwise against ref_elem. */
static void check_against_ref(rg_opcode op, const rg_tensor *out, int nin, rg_tensor *const *in) {
  rg_dtype odt = out->dtype, cdt = odt;
  if (is_compare(op)) cdt = rg_dtype_promote(in[0]->dtype, in[1]->dtype);
  int64_t n = rg_tensor_numel(out);
  for (int64_t i = 0; i < n; i++) {
    double v[3] = {0, 0, 0};
    for (int k = 0; k < nin; k++) {
      rg_dtype kdt = op == RG_OP_SWITCH && k == 0 ? RG_BOOL : cdt;
      v[k] = to_dtype(kdt, bcast_get(in[k], out->ndim, out->shape, i));
    }
    double want = to_dtype(odt, ref_elem(op, cdt, v));
    double got = rg_tensor_get_f64(out, i);
    double rtol = odt == RG_FLOAT32 ? 2e-6 : odt == RG_FLOAT64 ? 1e-13 : 0;
    double atol = op == RG_OP_MOD ? (odt == RG_FLOAT32 ? 1e-6 : 1e-14) : 0;
    if (!same_f64(got, want, rtol, atol))
      fail_msg("%s (%s, %s): element %lld of inputs (%g, %g, %g): got %.17g, expected %.17g",
               rg_opcode_name(op), rg_dtype_name(in[0]->dtype),
               nin > 1 ? rg_dtype_name(in[1]->dtype) : "-", (long long)i, v[0], v[1], v[2],
               got, want);
  }
}

/* Random input values suited to op and input k of dtype dt. */
static rg_tensor *op_input(rg_opcode op, int k, rg_dtype dt, int nd, const int64_t *shape) {
  if (dt == RG_BOOL) return tens_rand(dt, nd, shape, 0, 1);
  bool f = rg_dtype_is_float(dt);
  double lo = dt == RG_UINT8 ? 0 : -9, hi = dt == RG_UINT8 ? 18 : 9;
  if (f) lo = -3, hi = 3;
  if (op == RG_OP_POW) {
    if (k == 0) lo = f ? 0.1 : (dt == RG_UINT8 ? 0 : -5), hi = f ? 3 : 5;
    else lo = f ? -2 : 0, hi = f ? 2 : 4;
  }
  rg_tensor *t = tens_rand(dt, nd, shape, lo, hi);
  if (f && k == 1 && (op == RG_OP_INT_DIV || op == RG_OP_MOD)) {
    int64_t n = rg_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
      if (fabs(rg_tensor_get_f64(t, i)) < 0.1) rg_tensor_set_f64(t, i, 0.5);
  }
  return t;
}

static int arity(rg_opcode op) {
  if (op == RG_OP_CLIP || op == RG_OP_SWITCH) return 3;
  int lo = 1;
  switch (op) {
  case RG_OP_ADD: case RG_OP_MUL: case RG_OP_SUB: case RG_OP_TRUE_DIV: case RG_OP_INT_DIV:
  case RG_OP_MOD: case RG_OP_POW: case RG_OP_MAXIMUM: case RG_OP_MINIMUM: case RG_OP_LT:
  case RG_OP_GT: case RG_OP_LE: case RG_OP_GE: case RG_OP_EQ: case RG_OP_NEQ: case RG_OP_AND:
  case RG_OP_OR: case RG_OP_XOR: case RG_OP_SECOND:
    lo = 2;
    break;
  default: break;
  }
  return lo;
}

/* Runs op on inputs of the given dtypes and static shapes (broadcasting);
 * returns false when the core rejects the dtypes. */
static bool run_case(rg_opcode op, int nin, const rg_dtype *dts, const int64_t (*shapes)[3],
                     const int *nds) {
  rg_variable *vs[3];
  for (int k = 0; k < nin; k++) vs[k] = var(dts[k], nds[k], shapes[k]);
  rg_node *node = rg_make_node(C, rg_op_get(op), nin, vs);
  if (!node) {
    rg_clear_error(C);
    return false;
  }
  rg_tensor *in[3];
  for (int k = 0; k < nin; k++) in[k] = op_input(op, k, dts[k], nds[k], shapes[k]);
  rg_tensor *out = eval(node->outputs[0], nin, in);
  assert_int_equal(out->dtype, node->outputs[0]->type->dtype);
  check_against_ref(op, out, nin, in);
  rg_tensor_free(out);
  free_all(nin, in);
  return true;
}

/* Every elementwise op (cast aside) on every combination of input dtypes
 * (the three inputs of clip and switch share theirs, but the condition),
 * with broadcasting shapes. */
static void test_every_op_every_dtype(void **st) {
  static const int64_t shapes3[3][3] = {{4, 1, 5}, {3, 1}, {5}};
  int nds3[3] = {3, 2, 1};
  int ran = 0;
  for (int op = RG_OP_ADD; op <= RG_OP_SECOND; op++) {
    if (op == RG_OP_CAST) continue;
    int nin = arity(op);
    for (int d0 = 0; d0 < RG_NDTYPES; d0++) {
      for (int d1 = 0; d1 < (nin == 1 ? 1 : RG_NDTYPES); d1++) {
        rg_dtype dts[3] = {(rg_dtype)d0, (rg_dtype)d1, (rg_dtype)d1};
        if (nin == 3 && op == RG_OP_CLIP) dts[0] = dts[1];
        if (run_case(op, nin, dts, shapes3, nds3)) ran++;
      }
    }
  }
  assert_true(ran > 1000);
}

/* A one-element input of another dtype is converted once; a large one in
 * blocks (more than one block, odd sizes, broadcast along rows). */
static void test_mixed_dtypes_large(void **st) {
  static const int64_t shapes[3][3] = {{3, 2500}, {2500}, {3, 1}};
  int nds[3] = {2, 1, 2};
  rg_dtype pairs[][3] = {{RG_INT8, RG_FLOAT32, RG_FLOAT64}, {RG_FLOAT64, RG_INT32, RG_INT16},
                         {RG_UINT8, RG_INT8, RG_BOOL}, {RG_BOOL, RG_FLOAT32, RG_INT64}};
  rg_opcode ops[] = {RG_OP_ADD, RG_OP_MUL, RG_OP_TRUE_DIV, RG_OP_MAXIMUM, RG_OP_LT, RG_OP_EQ};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
      assert_true(run_case(ops[o], 2, pairs[p], shapes, nds));
  static const int64_t sw[3][3] = {{3, 2500}, {3, 1}, {2500}};
  int swn[3] = {2, 2, 1};
  rg_dtype swd[3] = {RG_FLOAT32, RG_INT8, RG_FLOAT64};
  assert_true(run_case(RG_OP_SWITCH, 3, swd, sw, swn));
  assert_true(run_case(RG_OP_CLIP, 3, (rg_dtype[]){RG_FLOAT32, RG_INT8, RG_INT16}, sw, swn));
}

/* ------------------------------------------------------------------ NumPy corner cases */

static rg_tensor *bin(rg_variable *(*f)(rg_variable *, rg_variable *), rg_tensor *a, rg_tensor *b) {
  rg_variable *va = var(a->dtype, a->ndim, a->shape), *vb = var(b->dtype, b->ndim, b->shape);
  rg_tensor *in[2] = {a, b};
  return eval(f(va, vb), 2, in);
}

static rg_tensor *un(rg_variable *(*f)(rg_variable *), rg_tensor *a) {
  return eval(f(var(a->dtype, a->ndim, a->shape)), 1, &a);
}

static void test_integer_division_signs(void **st) {
  static const int64_t a[] = {7, -7, 7, -7, 0, 5, -5, 6, -128, -128, 127};
  static const int64_t b[] = {2, 2, -2, -2, 3, 0, 0, -3, -1, 1, -1};
  static const int64_t q[] = {3, -4, -4, 3, 0, 0, 0, -2, -128, -128, -127};
  static const int64_t r[] = {1, 1, -1, -1, 0, 0, 0, 0, 0, 0, 0};
  rg_dtype dts[] = {RG_INT8, RG_INT16, RG_INT32, RG_INT64};
  for (int i = 0; i < 4; i++) {
    rg_tensor *ta = tens_i(dts[i], 1, SHAPE(11), a), *tb = tens_i(dts[i], 1, SHAPE(11), b);
    rg_tensor *tq = bin(rg_int_div, ta, tb), *tr = bin(rg_mod, ta, tb);
    int64_t want_q[11];
    memcpy(want_q, q, sizeof q);
    if (dts[i] != RG_INT8) want_q[8] = 128; /* -128 // -1 fits the wider types */
    check_i(tq, dts[i], 1, SHAPE(11), want_q);
    check_i(tr, dts[i], 1, SHAPE(11), r);
    rg_tensor *all[] = {ta, tb, tq, tr};
    free_all(4, all);
  }
  /* the most negative value divided by -1 wraps (no trap) */
  static const int64_t m32[] = {INT32_MIN}, m64[] = {INT64_MIN}, neg1[] = {-1};
  rg_tensor *a32 = tens_i(RG_INT32, 1, SHAPE(1), m32), *b32 = tens_i(RG_INT32, 1, SHAPE(1), neg1);
  rg_tensor *a64 = tens_i(RG_INT64, 1, SHAPE(1), m64), *b64 = tens_i(RG_INT64, 1, SHAPE(1), neg1);
  rg_tensor *q32 = bin(rg_int_div, a32, b32), *q64 = bin(rg_int_div, a64, b64);
  rg_tensor *r64 = bin(rg_mod, a64, b64);
  check_i(q32, RG_INT32, 1, SHAPE(1), m32);
  check_i(q64, RG_INT64, 1, SHAPE(1), m64);
  check_i(r64, RG_INT64, 1, SHAPE(1), (const int64_t[]){0});
  rg_tensor *all[] = {a32, b32, a64, b64, q32, q64, r64};
  free_all(7, all);
  /* uint8 and bool (bool // bool is int8) */
  rg_tensor *ua = tens(RG_UINT8, 1, SHAPE(3), VALS(250, 7, 9)),
            *ub = tens(RG_UINT8, 1, SHAPE(3), VALS(7, 0, 4));
  rg_tensor *uq = bin(rg_int_div, ua, ub), *ur = bin(rg_mod, ua, ub);
  check(uq, RG_UINT8, 1, SHAPE(3), VALS(35, 0, 2));
  check(ur, RG_UINT8, 1, SHAPE(3), VALS(5, 0, 1));
  rg_tensor *ba = tens(RG_BOOL, 1, SHAPE(4), VALS(1, 1, 0, 0)),
            *bb = tens(RG_BOOL, 1, SHAPE(4), VALS(1, 0, 1, 0));
  rg_tensor *bq = bin(rg_int_div, ba, bb);
  check(bq, RG_INT8, 1, SHAPE(4), VALS(1, 0, 0, 0));
  rg_tensor *more[] = {ua, ub, uq, ur, ba, bb, bq};
  free_all(7, more);
}

static void test_float_divmod(void **st) {
  rg_dtype dts[] = {RG_FLOAT32, RG_FLOAT64};
  for (int i = 0; i < 2; i++) {
    rg_tensor *a = tens(dts[i], 1, SHAPE(8), VALS(7.5, -7.5, 7.5, -7.5, 1, -1, 0, NAN));
    rg_tensor *b = tens(dts[i], 1, SHAPE(8), VALS(2, 2, -2, -2, 0, 0, 0, 2));
    rg_tensor *q = bin(rg_int_div, a, b), *r = bin(rg_mod, a, b);
    check(q, dts[i], 1, SHAPE(8), VALS(3, -4, -4, 3, INFINITY, -INFINITY, NAN, NAN));
    check(r, dts[i], 1, SHAPE(8), VALS(1.5, 0.5, -0.5, -1.5, NAN, NAN, NAN, NAN));
    rg_tensor *all[] = {a, b, q, r};
    free_all(4, all);
  }
  /* the sign of a zero remainder is the divisor's */
  rg_tensor *a = tens(RG_FLOAT64, 1, SHAPE(2), VALS(4, -4)), *b = tens(RG_FLOAT64, 1, SHAPE(2), VALS(-2, 2));
  rg_tensor *r = bin(rg_mod, a, b);
  assert_true(signbit(rg_tensor_get_f64(r, 0)) && !signbit(rg_tensor_get_f64(r, 1)));
  rg_tensor *all[] = {a, b, r};
  free_all(3, all);
}

static void test_true_div_of_integers(void **st) {
  rg_tensor *a = tens(RG_INT32, 1, SHAPE(4), VALS(1, -1, 0, 7)), *b = tens(RG_INT32, 1, SHAPE(4), VALS(2, 0, 0, 7));
  rg_tensor *q = bin(rg_true_div, a, b);
  check(q, RG_FLOAT64, 1, SHAPE(4), VALS(0.5, -INFINITY, NAN, 1));
  rg_tensor *all[] = {a, b, q};
  free_all(3, all);
}

static void test_integer_pow(void **st) {
  rg_tensor *a = tens(RG_INT64, 1, SHAPE(5), VALS(2, -3, 0, 7, 2)), *b = tens(RG_INT64, 1, SHAPE(5), VALS(10, 3, 0, 1, 63));
  rg_tensor *p = bin(rg_pow, a, b);
  check_i(p, RG_INT64, 1, SHAPE(5), (const int64_t[]){1024, -27, 1, 7, INT64_MIN});
  rg_tensor *i8 = tens(RG_INT8, 1, SHAPE(2), VALS(2, 3)), *e8 = tens(RG_INT8, 1, SHAPE(2), VALS(7, 5));
  rg_tensor *p8 = bin(rg_pow, i8, e8);
  check(p8, RG_INT8, 1, SHAPE(2), VALS(-128, -13)); /* 128 and 243 wrap */
  rg_tensor *neg = tens(RG_INT32, 1, SHAPE(2), VALS(2, -1));
  rg_variable *va = var(RG_INT32, 1, SHAPE(2)), *vb = var(RG_INT32, 1, SHAPE(2));
  rg_tensor *in[2] = {neg, neg};
  eval_fails(rg_pow(va, vb), 2, in, "integers to negative integer powers are not allowed");
  rg_tensor *all[] = {a, b, p, i8, e8, p8, neg};
  free_all(7, all);
}

static void test_nan_propagation_and_signs(void **st) {
  rg_tensor *a = tens(RG_FLOAT64, 1, SHAPE(4), VALS(NAN, 1, 2, -0.0));
  rg_tensor *b = tens(RG_FLOAT64, 1, SHAPE(4), VALS(1, NAN, 1, 3));
  rg_tensor *mx = bin(rg_maximum, a, b), *mn = bin(rg_minimum, a, b);
  check(mx, RG_FLOAT64, 1, SHAPE(4), VALS(NAN, NAN, 2, 3));
  check(mn, RG_FLOAT64, 1, SHAPE(4), VALS(NAN, NAN, 1, -0.0));
  rg_tensor *lt = bin(rg_lt, a, b), *ne = bin(rg_neq_elem, a, b), *eq = bin(rg_eq_elem, a, a);
  check(lt, RG_BOOL, 1, SHAPE(4), VALS(0, 0, 0, 1));
  check(ne, RG_BOOL, 1, SHAPE(4), VALS(1, 1, 1, 1));
  check(eq, RG_BOOL, 1, SHAPE(4), VALS(0, 1, 1, 1));
  rg_tensor *s = tens(RG_FLOAT32, 1, SHAPE(6), VALS(-2, -0.0, 0, 3, NAN, -INFINITY));
  rg_tensor *sg = un(rg_sign, s);
  check(sg, RG_FLOAT32, 1, SHAPE(6), VALS(-1, 0, 0, 1, NAN, -1));
  assert_false(signbit(rg_tensor_get_f64(sg, 1)));
  rg_tensor *si = tens(RG_INT16, 1, SHAPE(3), VALS(-5, 0, 9)), *sgi = un(rg_sign, si);
  check(sgi, RG_INT16, 1, SHAPE(3), VALS(-1, 0, 1));
  rg_tensor *all[] = {a, b, mx, mn, lt, ne, eq, s, sg, si, sgi};
  free_all(11, all);
}

static void test_round_half_even_floor_ceil(void **st) {
  rg_tensor *a = tens(RG_FLOAT64, 1, SHAPE(7), VALS(0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.2));
  rg_tensor *r = un(rg_round, a), *f = un(rg_floor, a), *c = un(rg_ceil, a);
  check(r, RG_FLOAT64, 1, SHAPE(7), VALS(0, 2, 2, -0.0, -2, -3, 2));
  check(f, RG_FLOAT64, 1, SHAPE(7), VALS(0, 1, 2, -1, -2, -3, 2));
  check(c, RG_FLOAT64, 1, SHAPE(7), VALS(1, 2, 3, -0.0, -1, -2, 3));
  rg_tensor *i = tens(RG_INT32, 1, SHAPE(2), VALS(-3, 4)), *ri = un(rg_round, i);
  check(ri, RG_INT32, 1, SHAPE(2), VALS(-3, 4));
  rg_tensor *all[] = {a, r, f, c, i, ri};
  free_all(6, all);
}

static void test_stable_sigmoid_softplus(void **st) {
  rg_dtype dts[] = {RG_FLOAT32, RG_FLOAT64};
  for (int i = 0; i < 2; i++) {
    rg_tensor *a = tens(dts[i], 1, SHAPE(6), VALS(-1000, -50, 0, 50, 1000, NAN));
    rg_tensor *sg = un(rg_sigmoid, a), *sp = un(rg_softplus, a);
    double e50 = exp(-50.0);
    check_close(sg, dts[i], 1, SHAPE(6), VALS(0, e50, 0.5, 1, 1, NAN), 1e-6, 0);
    check_close(sp, dts[i], 1, SHAPE(6), VALS(0, e50, log(2.0), 50, 1000, NAN), 1e-6, 0);
    rg_tensor *all[] = {a, sg, sp};
    free_all(3, all);
  }
  rg_tensor *small = tens(RG_FLOAT64, 1, SHAPE(2), VALS(1e-10, -1e-10));
  rg_tensor *l = un(rg_log1p, small), *e = un(rg_expm1, small);
  check_close(l, RG_FLOAT64, 1, SHAPE(2), VALS(1e-10 - 5e-21, -1e-10 - 5e-21), 1e-15, 0);
  check_close(e, RG_FLOAT64, 1, SHAPE(2), VALS(1e-10 + 5e-21, -1e-10 + 5e-21), 1e-15, 0);
  rg_tensor *all[] = {small, l, e};
  free_all(3, all);
}

static void test_clip_and_switch(void **st) {
  rg_tensor *x = tens(RG_FLOAT32, 1, SHAPE(5), VALS(-3, 0.5, 7, NAN, 2));
  rg_variable *vx = var(RG_FLOAT32, 1, SHAPE(5));
  rg_tensor *lo = scalar(RG_FLOAT32, 0), *hi = scalar(RG_FLOAT32, 2);
  rg_tensor *in[3] = {x, lo, hi};
  rg_tensor *c = eval(rg_clip(vx, var(RG_FLOAT32, 0, NULL), var(RG_FLOAT32, 0, NULL)), 3, in);
  check(c, RG_FLOAT32, 1, SHAPE(5), VALS(0, 0.5, 2, NAN, 2));
  /* integer clip with literal bounds (weak int64 scalars) */
  rg_tensor *xi = tens(RG_INT16, 1, SHAPE(4), VALS(-300, 4, 300, 9));
  rg_tensor *l2 = scalar(RG_INT64, -5), *h2 = scalar(RG_INT64, 8);
  rg_tensor *in2[3] = {xi, l2, h2};
  rg_variable *ci = rg_clip(var(RG_INT16, 1, SHAPE(4)), rg_scalar_int(C, -5), rg_scalar_int(C, 8));
  rg_tensor *c2 = eval(ci, 3, in2);
  check(c2, RG_INT16, 1, SHAPE(4), VALS(-5, 4, 8, 8));
  /* switch on a float condition: NaN is true */
  rg_tensor *cond = tens(RG_FLOAT64, 1, SHAPE(4), VALS(0, 1, NAN, -0.0));
  rg_tensor *a = tens(RG_INT32, 1, SHAPE(4), VALS(1, 2, 3, 4)), *b = scalar(RG_INT32, -1);
  rg_tensor *in3[3] = {cond, a, b};
  rg_variable *sw = rg_switch(var(RG_FLOAT64, 1, SHAPE(4)), var(RG_INT32, 1, SHAPE(4)),
                              var(RG_INT32, 0, NULL));
  rg_tensor *s = eval(sw, 3, in3);
  check(s, RG_INT32, 1, SHAPE(4), VALS(-1, 2, 3, -1));
  rg_tensor *all[] = {x, lo, hi, c, xi, l2, h2, c2, cond, a, b, s};
  free_all(12, all);
}

static void test_casts_numpy_x86(void **st) {
  rg_tensor *f = tens(RG_FLOAT64, 1, SHAPE(8), VALS(300, -1, 2.7, -2.7, NAN, 3e9, 1e20, 0.5));
  rg_variable *vf = var(RG_FLOAT64, 1, SHAPE(8));
  rg_tensor *i8 = eval(rg_cast(vf, RG_INT8), 1, &f), *u8 = eval(rg_cast(vf, RG_UINT8), 1, &f);
  rg_tensor *i32 = eval(rg_cast(vf, RG_INT32), 1, &f), *i64 = eval(rg_cast(vf, RG_INT64), 1, &f);
  rg_tensor *b = eval(rg_cast(vf, RG_BOOL), 1, &f), *f32 = eval(rg_cast(vf, RG_FLOAT32), 1, &f);
  check(i8, RG_INT8, 1, SHAPE(8), VALS(44, -1, 2, -2, 0, 0, 0, 0));
  check(u8, RG_UINT8, 1, SHAPE(8), VALS(44, 255, 2, 254, 0, 0, 0, 0));
  check(i32, RG_INT32, 1, SHAPE(8), VALS(300, -1, 2, -2, INT32_MIN, INT32_MIN, INT32_MIN, 0));
  check_i(i64, RG_INT64, 1, SHAPE(8), (const int64_t[]){300, -1, 2, -2, INT64_MIN, 3000000000, INT64_MIN, 0});
  check(b, RG_BOOL, 1, SHAPE(8), VALS(1, 1, 1, 1, 1, 1, 1, 1));
  check(f32, RG_FLOAT32, 1, SHAPE(8), VALS(300, -1, (float)2.7, (float)-2.7, NAN, 3e9, (float)1e20, 0.5));
  rg_tensor *w = tens(RG_INT16, 1, SHAPE(3), VALS(256, -1, 1000));
  rg_tensor *wu = eval(rg_cast(var(RG_INT16, 1, SHAPE(3)), RG_UINT8), 1, &w);
  rg_tensor *wb = eval(rg_cast(var(RG_INT16, 1, SHAPE(3)), RG_BOOL), 1, &w);
  check(wu, RG_UINT8, 1, SHAPE(3), VALS(0, 255, 232));
  check(wb, RG_BOOL, 1, SHAPE(3), VALS(1, 1, 1));
  rg_tensor *all[] = {f, i8, u8, i32, i64, b, f32, w, wu, wb};
  free_all(10, all);
  /* every pair of dtypes on small values, including a strided source */
  for (int from = 0; from < RG_NDTYPES; from++) {
    for (int to = 0; to < RG_NDTYPES; to++) {
      rg_tensor *src = tens((rg_dtype)from, 2, SHAPE(2, 3), VALS(0, 1, 1, 0, 1, 1));
      rg_tensor *srcT = rg_tensor_permute(src, (const int[]){1, 0});
      rg_tensor *o = eval(rg_cast(var((rg_dtype)from, 2, SHAPE(3, 2)), (rg_dtype)to), 1, &srcT);
      check(o, (rg_dtype)to, 2, SHAPE(3, 2), VALS(0, 0, 1, 1, 1, 1));
      rg_tensor *t3[] = {src, srcT, o};
      free_all(3, t3);
    }
  }
}

static void test_weak_literals(void **st) {
  /* float32(0.1) == 0.1 compares in float32 (NEP 50), as NumPy 2 does */
  rg_tensor *x = tens(RG_FLOAT32, 1, SHAPE(2), VALS(0.1, 0.2));
  rg_tensor *lit = scalar(RG_FLOAT64, 0.1);
  rg_tensor *in[2] = {x, lit};
  rg_variable *e = rg_eq_elem(var(RG_FLOAT32, 1, SHAPE(2)), rg_scalar_float(C, 0.1));
  rg_tensor *r = eval(e, 2, in);
  check(r, RG_BOOL, 1, SHAPE(2), VALS(1, 0));
  /* but against a float64 tensor it compares in float64 */
  rg_variable *e2 = rg_eq_elem(var(RG_FLOAT32, 1, SHAPE(2)), var(RG_FLOAT64, 0, NULL));
  rg_tensor *r2 = eval(e2, 2, in);
  check(r2, RG_BOOL, 1, SHAPE(2), VALS(0, 0));
  /* x_int8 + 1 stays int8 and wraps */
  rg_tensor *xi = tens(RG_INT8, 1, SHAPE(2), VALS(127, -3)), *one = scalar(RG_INT64, 1);
  rg_tensor *in3[2] = {xi, one};
  rg_tensor *r3 = eval(rg_add(var(RG_INT8, 1, SHAPE(2)), rg_scalar_int(C, 1)), 2, in3);
  check(r3, RG_INT8, 1, SHAPE(2), VALS(-128, -2));
  /* uint8 < -1 and int8 == 200 compare exactly (in int16), as NumPy does */
  rg_tensor *xu = tens(RG_UINT8, 1, SHAPE(3), VALS(0, 200, 255)), *m1 = scalar(RG_INT64, -1);
  rg_tensor *in4[2] = {xu, m1};
  rg_tensor *r4 = eval(rg_gt(var(RG_UINT8, 1, SHAPE(3)), rg_scalar_int(C, -1)), 2, in4);
  check(r4, RG_BOOL, 1, SHAPE(3), VALS(1, 1, 1));
  rg_tensor *xs = tens(RG_INT8, 1, SHAPE(3), VALS(-56, 0, 127)), *big = scalar(RG_INT64, 200);
  rg_tensor *in5[2] = {xs, big};
  rg_tensor *r5 = eval(rg_neq_elem(var(RG_INT8, 1, SHAPE(3)), rg_scalar_int(C, 200)), 2, in5);
  check(r5, RG_BOOL, 1, SHAPE(3), VALS(1, 1, 1));
  rg_tensor *all[] = {x, lit, r, r2, xi, one, r3, xu, m1, r4, xs, big, r5};
  free_all(13, all);
}

static void test_second_fill_and_nary(void **st) {
  rg_tensor *m = tens(RG_FLOAT32, 2, SHAPE(2, 3), NULL), *v = scalar(RG_INT16, 7);
  rg_tensor *in[2] = {m, v};
  rg_tensor *f = eval(rg_second(var(RG_FLOAT32, 2, SHAPE(2, 3)), var(RG_INT16, 0, NULL)), 2, in);
  check(f, RG_INT16, 2, SHAPE(2, 3), VALS(7, 7, 7, 7, 7, 7));
  /* add of four inputs of mixed dtypes with broadcasting */
  rg_tensor *a = tens(RG_INT8, 1, SHAPE(3), VALS(1, 2, 3)), *b = tens(RG_FLOAT32, 2, SHAPE(2, 1), VALS(10, 20));
  rg_tensor *c = scalar(RG_INT32, 100), *d = tens(RG_FLOAT32, 2, SHAPE(2, 3), VALS(0.5, 0.5, 0.5, 1, 1, 1));
  rg_variable *vs[4] = {var(RG_INT8, 1, SHAPE(3)), var(RG_FLOAT32, 2, SHAPE(2, 1)),
                        var(RG_INT32, 0, NULL), var(RG_FLOAT32, 2, SHAPE(2, 3))};
  rg_tensor *in4[4] = {a, b, c, d};
  rg_tensor *s = eval(rg_add_n(4, vs), 4, in4);
  check(s, RG_FLOAT64, 2, SHAPE(2, 3), VALS(111.5, 112.5, 113.5, 122, 123, 124));
  rg_tensor *p = eval(rg_mul_n(4, vs), 4, in4);
  check(p, RG_FLOAT64, 2, SHAPE(2, 3), VALS(500, 1000, 1500, 2000, 4000, 6000));
  rg_tensor *one = eval(rg_add_n(1, vs), 1, in4);
  check(one, RG_INT8, 1, SHAPE(3), VALS(1, 2, 3));
  rg_tensor *all[] = {m, v, f, a, b, c, d, s, p, one};
  free_all(10, all);
}

/* The pairwise fold (x op y) op z, as two nodes run one after the other. */
static rg_tensor *folded(bool mul, rg_tensor *x, rg_tensor *y, rg_tensor *z) {
  rg_variable *vx = var(x->dtype, x->ndim, x->shape), *vy = var(y->dtype, y->ndim, y->shape);
  rg_tensor *xy = eval(mul ? rg_mul(vx, vy) : rg_add(vx, vy), 2, (rg_tensor *[]){x, y});
  rg_variable *vxy = var(xy->dtype, xy->ndim, xy->shape), *vz = var(z->dtype, z->ndim, z->shape);
  rg_tensor *r = eval(mul ? rg_mul(vxy, vz) : rg_add(vxy, vz), 2, (rg_tensor *[]){xy, z});
  rg_tensor_free(xy);
  return r;
}

/* Three float operands of add and mul run in one pass with the bits of
 * the pairwise fold ((x op y) op z): values where the order shows
 * (1e8 + 1 - 1e8 in float32 is 0, 1e8 + (1 - 1e8) is 1), a broadcast row,
 * and the node working in place on its last input, which folds first. */
static void test_nary_float_one_pass(void **st) {
  for (int dt = 0; dt < 2; dt++) {
    rg_dtype t = dt ? RG_FLOAT64 : RG_FLOAT32;
    double big = dt ? 1e17 : 1e8;
    rg_tensor *a = tens(t, 2, SHAPE(2, 3), VALS(big, 1, -2.5, 3, big, 0.1));
    rg_tensor *b = tens(t, 1, SHAPE(3), VALS(1, -big, 7));
    rg_tensor *c = tens(t, 2, SHAPE(2, 3), VALS(-big, big, 1.5, -3, 2, 0.3));
    rg_variable *vs[3] = {var(t, 2, SHAPE(2, 3)), var(t, 1, SHAPE(3)), var(t, 2, SHAPE(2, 3))};
    rg_tensor *in[3] = {a, b, c};
    for (int mul = 0; mul < 2; mul++) {
      rg_tensor *got = eval(mul ? rg_mul_n(3, vs) : rg_add_n(3, vs), 3, in), *want = folded(mul, a, b, c);
      for (int64_t i = 0; i < 6; i++) assert_true(rg_tensor_get_f64(got, i) == rg_tensor_get_f64(want, i));
      rg_tensor_free(got), rg_tensor_free(want);
    }
    /* in place on c: (c + a) + b */
    rg_tensor *c2 = rg_tensor_copy(c), *in2[3] = {a, b, c2};
    rg_node *n = rg_make_node(C, rg_op_inplace(rg_op_get(RG_OP_ADD), 2), 3, vs);
    rg_tensor *want = folded(false, c, a, b), *got = eval(n->outputs[0], 3, in2);
    assert_ptr_equal(got->data, c2->data);
    for (int64_t i = 0; i < 6; i++) assert_true(rg_tensor_get_f64(got, i) == rg_tensor_get_f64(want, i));
    assert_true(dt || rg_tensor_get_f64(want, 0) == 1); /* -1e8 + 1e8 + 1: the order shows */
    rg_tensor *all[] = {a, b, c, c2, got, want};
    free_all(6, all);
  }
}

/* ------------------------------------------------------------------ layouts */

static void test_broadcasting_and_strides(void **st) {
  /* (2 1) + (1 3) */
  rg_tensor *a = tens(RG_FLOAT64, 2, SHAPE(2, 1), VALS(10, 20)), *b = tens(RG_FLOAT64, 2, SHAPE(1, 3), VALS(1, 2, 3));
  rg_tensor *r = bin(rg_add, a, b);
  check(r, RG_FLOAT64, 2, SHAPE(2, 3), VALS(11, 12, 13, 21, 22, 23));
  /* a reversed view (negative stride) and a transposed one */
  rg_tensor *base = tens(RG_INT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6));
  rg_tensor *rev = rg_tensor_view(base, 2, SHAPE(2, 3), SHAPE(12, -4), 8); /* x[:, ::-1] */
  rg_tensor *tr = rg_tensor_permute(base, (const int[]){1, 0});
  rg_tensor *r2 = bin(rg_sub, rev, base);
  check(r2, RG_INT32, 2, SHAPE(2, 3), VALS(2, 0, -2, 2, 0, -2));
  rg_tensor *r3 = un(rg_neg, tr);
  check(r3, RG_INT32, 2, SHAPE(3, 2), VALS(-1, -4, -2, -5, -3, -6));
  /* a zero-stride view (every row the same) and a step-2 slice */
  rg_tensor *zs = rg_tensor_view(base, 2, SHAPE(4, 3), SHAPE(0, 4), 0);
  rg_tensor *r4 = un(rg_sqr, zs);
  check(r4, RG_INT32, 2, SHAPE(4, 3), VALS(1, 4, 9, 1, 4, 9, 1, 4, 9, 1, 4, 9));
  rg_tensor *step = rg_tensor_view(base, 1, SHAPE(3), SHAPE(8), 0); /* flat[::2] */
  rg_tensor *r5 = bin(rg_mul, step, step);
  check(r5, RG_INT32, 1, SHAPE(3), VALS(1, 9, 25));
  /* scalars and empty tensors */
  rg_tensor *s1 = scalar(RG_FLOAT32, 2), *s2 = scalar(RG_FLOAT32, 3);
  rg_tensor *r6 = bin(rg_pow, s1, s2);
  check(r6, RG_FLOAT32, 0, NULL, VALS(8));
  rg_tensor *e = tens(RG_FLOAT32, 2, SHAPE(0, 3), NULL), *row = tens(RG_FLOAT32, 2, SHAPE(1, 3), VALS(1, 2, 3));
  rg_tensor *r7 = bin(rg_add, e, row);
  check(r7, RG_FLOAT32, 2, SHAPE(0, 3), NULL);
  /* operands of lower rank whose sizes happen to match the first ones of
   * the others: (1 2 1) + (1) broadcasts, it is no elementwise pass */
  rg_tensor *c = tens(RG_FLOAT64, 3, SHAPE(1, 2, 1), VALS(1, 2)), *one = tens(RG_FLOAT64, 1, SHAPE(1), VALS(5));
  rg_tensor *r8 = bin(rg_add, c, one);
  check(r8, RG_FLOAT64, 3, SHAPE(1, 2, 1), VALS(6, 7));
  rg_tensor *r9 = bin(rg_maximum, one, c);
  check(r9, RG_FLOAT64, 3, SHAPE(1, 2, 1), VALS(5, 5));
  rg_tensor *all[] = {a, b, r, base, rev, tr, r2, r3, zs, r4, step, r5, s1, s2, r6, e, row, r7, c, one, r8, r9};
  free_all(22, all);
}

/* Five dimensions: a permuted view with a reversed axis plus a broadcast
 * operand, against the reference (dimension merging must not mix them). */
static void test_high_rank_layouts(void **st) {
  rg_tensor *base = tens_rand(RG_FLOAT64, 5, SHAPE(2, 3, 4, 5, 6), -5, 5);
  rg_tensor *perm = rg_tensor_permute(base, (const int[]){4, 0, 3, 1, 2}); /* (6 2 5 3 4) */
  int64_t st5[5], off = 0;
  for (int d = 0; d < 5; d++) st5[d] = perm->strides[d];
  st5[3] = -st5[3]; /* reverse the size-3 axis */
  off = 2 * perm->strides[3];
  rg_tensor *rev = rg_tensor_view(perm, 5, perm->shape, st5, off);
  rg_tensor *b = tens_rand(RG_INT32, 4, SHAPE(2, 1, 3, 1), -5, 5);
  rg_tensor *in[2] = {rev, b};
  rg_variable *v = rg_mul(var(RG_FLOAT64, 5, rev->shape), var(RG_INT32, 4, SHAPE(2, 1, 3, 1)));
  rg_tensor *out = eval(v, 2, in);
  check_against_ref(RG_OP_MUL, out, 2, in);
  rg_tensor *all[] = {base, perm, rev, b, out};
  free_all(5, all);
}

static void test_broadcast_errors(void **st) {
  rg_tensor *a = tens(RG_FLOAT32, 1, SHAPE(3), NULL), *b = tens(RG_FLOAT32, 1, SHAPE(4), NULL);
  rg_tensor *in[2] = {a, b};
  eval_fails(rg_add(var_u(RG_FLOAT32, 1), var_u(RG_FLOAT32, 1)), 2, in,
             "add: shapes (3) and (4) do not broadcast (dimension 0)");
  /* a size-1 dimension of unknown static size does not stretch */
  rg_tensor *one = tens(RG_FLOAT32, 1, SHAPE(1), NULL);
  rg_tensor *in2[2] = {one, b};
  eval_fails(rg_mul(var_u(RG_FLOAT32, 1), var_u(RG_FLOAT32, 1)), 2, in2, "do not broadcast");
  /* a tensor contradicting its broadcastable type */
  rg_tensor *in3[2] = {b, b};
  eval_fails(rg_add(var(RG_FLOAT32, 1, SHAPE(1)), var_u(RG_FLOAT32, 1)), 2, in3,
             "declares broadcastable");
  rg_tensor *all[] = {a, b, one};
  free_all(3, all);
}

/* ------------------------------------------------------------------ in place, threads */

static void test_in_place(void **st) {
  rg_variable *va = var(RG_FLOAT64, 1, SHAPE(3)), *vb = var(RG_FLOAT64, 1, SHAPE(3));
  rg_variable *ins[2] = {va, vb};
  rg_node *n = rg_make_node(C, rg_op_inplace(rg_op_get(RG_OP_SUB), 1), 2, ins);
  assert_non_null(n);
  rg_tensor *a = tens(RG_FLOAT64, 1, SHAPE(3), VALS(5, 6, 7)), *b = tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, 2, 3));
  rg_tensor *in[2] = {a, b};
  rg_tensor *r = eval(n->outputs[0], 2, in);
  assert_ptr_equal(r->data, b->data); /* b was unshared: overwritten */
  check(b, RG_FLOAT64, 1, SHAPE(3), VALS(4, 4, 4));
  rg_tensor_free(r);
  /* shared storage: not in place, the input stays */
  rg_tensor *keep = rg_tensor_ref(b);
  r = eval(n->outputs[0], 2, in);
  assert_ptr_not_equal(r->data, b->data);
  check(r, RG_FLOAT64, 1, SHAPE(3), VALS(1, 2, 3));
  check(b, RG_FLOAT64, 1, SHAPE(3), VALS(4, 4, 4));
  rg_tensor *all[] = {a, b, r, keep};
  free_all(4, all);
  /* an in-place add of three inputs destroying the last one */
  rg_variable *v3[3] = {var(RG_INT32, 1, SHAPE(2)), var(RG_INT32, 1, SHAPE(2)), var(RG_INT32, 1, SHAPE(2))};
  rg_node *n3 = rg_make_node(C, rg_op_inplace(rg_op_get(RG_OP_ADD), 2), 3, v3);
  rg_tensor *x = tens(RG_INT32, 1, SHAPE(2), VALS(1, 2)), *y = tens(RG_INT32, 1, SHAPE(2), VALS(10, 20)),
            *z = tens(RG_INT32, 1, SHAPE(2), VALS(100, 200));
  rg_tensor *in3[3] = {x, y, z};
  rg_tensor *r3 = eval(n3->outputs[0], 3, in3);
  assert_ptr_equal(r3->data, z->data);
  check(r3, RG_INT32, 1, SHAPE(2), VALS(111, 222));
  rg_tensor *more[] = {x, y, z, r3};
  free_all(4, more);
}

/* Large inputs on two threads, called repeatedly with reused buffers. */
static void test_threads_and_reuse(void **st) {
  int64_t n = 300001;
  rg_variable *vx = var(RG_FLOAT32, 1, &n), *vy = var(RG_INT16, 1, &n);
  rg_variable *ops[] = {rg_add(vx, vy), rg_exp(vx), rg_lt(vx, vy)};
  for (size_t o = 0; o < 3; o++) {
    hand_run h;
    hand_init(&h, ops[o], 2);
    rg_tensor *out0 = NULL;
    for (int call = 0; call < 3; call++) {
      rg_tensor *x = tens_rand(RG_FLOAT32, 1, &n, -4, 4), *y = tens_rand(RG_INT16, 1, &n, -4, 4);
      rg_tensor *in[2] = {x, y};
      assert_int_equal(hand_call(&h, in), 0);
      rg_tensor *out = hand_out(&h, 0);
      if (call == 0) out0 = out;
      assert_ptr_equal(out, out0); /* the cell's buffer is reused */
      rg_opcode code = ops[o]->owner->op->code;
      check_against_ref(code, out, code == RG_OP_EXP ? 1 : 2, in);
      free_all(2, in);
    }
    hand_free(&h);
  }
}

/* Outputs larger than the caches, in place too, on one and two threads. */
static void test_large_outputs(void **st) {
  int64_t n = (17 << 20) / 4 + 5;
  rg_tensor *x = tens(RG_FLOAT32, 1, &n, NULL), *y = tens(RG_INT16, 1, &n, NULL);
  float *xd = (float *)x->data;
  int16_t *yd = (int16_t *)y->data;
  for (int64_t i = 0; i < n; i++) xd[i] = (float)(i % 1000) * 0.5f, yd[i] = (int16_t)(i % 77 - 30);
  rg_variable *vx = var(RG_FLOAT32, 1, &n), *vy = var(RG_INT16, 1, &n);
  rg_variable *sum = rg_add(vx, vy), *dbl = rg_mul(vx, rg_scalar_float(C, 2));
  for (int nth = 1; nth <= 2; nth++) {
    hand_run h;
    hand_init(&h, sum, nth);
    rg_tensor *in[2] = {x, y};
    assert_int_equal(hand_call(&h, in), 0);
    const float *o = (const float *)hand_out(&h, 0)->data;
    for (int64_t i = 0; i < n; i++)
      if (o[i] != xd[i] + (float)yd[i]) fail_msg("element %lld: %g", (long long)i, o[i]);
    hand_free(&h);
    /* in place: x = x * 2 */
    rg_node *ip = rg_make_node(C, rg_op_inplace(dbl->owner->op, 0), 2, dbl->owner->inputs);
    hand_init(&h, ip->outputs[0], nth);
    rg_tensor *two = scalar(RG_FLOAT64, 2), *in2[2] = {x, two};
    assert_int_equal(hand_call(&h, in2), 0);
    assert_ptr_equal(hand_out(&h, 0)->data, x->data);
    for (int64_t i = 0; i < n; i++)
      if (xd[i] != (float)(i % 1000)) fail_msg("in place, element %lld: %g", (long long)i, xd[i]);
    for (int64_t i = 0; i < n; i++) xd[i] = (float)(i % 1000) * 0.5f;
    hand_free(&h);
    rg_tensor_free(two);
  }
  rg_tensor *all[] = {x, y};
  free_all(2, all);
}

/* A converted scalar constant is converted once and kept; a scalar input
 * of another dtype is converted at every call (its value changes). */
static void test_converted_scalars_across_calls(void **st) {
  int64_t four = 4;
  rg_variable *x = var(RG_FLOAT32, 1, &four), *s = var(RG_INT8, 0, NULL);
  rg_variable *outs[2] = {rg_add(x, rg_scalar_float(C, 1.5)), rg_add(x, s)};
  rg_variable *ins[2] = {x, s};
  rg_function *f = rg_compile(C, 2, ins, 2, outs, &(rg_compile_opts){.mode = {.query = "none"}});
  assert_non_null(f);
  for (int call = 0; call < 3; call++) {
    double xv[4] = {call, call + 1, call + 2, call + 3};
    rg_tensor *args[2] = {tens(RG_FLOAT32, 1, &four, xv), tens_i(RG_INT8, 0, NULL, (int64_t[]){10 * call})}, *res[2];
    assert_int_equal(rg_function_call(f, args, res), RG_OK);
    for (int64_t i = 0; i < 4; i++) {
      assert_true(rg_tensor_get_f64(res[0], i) == xv[i] + 1.5);
      assert_true(rg_tensor_get_f64(res[1], i) == xv[i] + 10 * call);
    }
    for (int k = 0; k < 2; k++) rg_tensor_free(args[k]), rg_tensor_free(res[k]);
  }
  /* the vector's static layout is checked at each call: a strided view of
   * the declared shape takes the general path */
  int64_t eight = 8, stride = 2 * (int64_t)sizeof(float);
  rg_tensor *base = tens(RG_FLOAT32, 1, &eight, (double[]){0, 1, 2, 3, 4, 5, 6, 7});
  rg_tensor *args[2] = {rg_tensor_view(base, 1, &four, &stride, 0), tens_i(RG_INT8, 0, NULL, (int64_t[]){3})}, *res[2];
  assert_non_null(args[0]);
  assert_int_equal(rg_function_call(f, args, res), RG_OK);
  for (int64_t i = 0; i < 4; i++) {
    assert_true(rg_tensor_get_f64(res[0], i) == 2 * i + 1.5);
    assert_true(rg_tensor_get_f64(res[1], i) == 2 * i + 3);
  }
  for (int k = 0; k < 2; k++) rg_tensor_free(args[k]), rg_tensor_free(res[k]);
  rg_tensor_free(base);
  rg_function_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_every_dtype),
      cmocka_unit_test(test_mixed_dtypes_large),
      cmocka_unit_test(test_integer_division_signs),
      cmocka_unit_test(test_float_divmod),
      cmocka_unit_test(test_true_div_of_integers),
      cmocka_unit_test(test_integer_pow),
      cmocka_unit_test(test_nan_propagation_and_signs),
      cmocka_unit_test(test_round_half_even_floor_ceil),
      cmocka_unit_test(test_stable_sigmoid_softplus),
      cmocka_unit_test(test_clip_and_switch),
      cmocka_unit_test(test_casts_numpy_x86),
      cmocka_unit_test(test_weak_literals),
      cmocka_unit_test(test_second_fill_and_nary),
      cmocka_unit_test(test_nary_float_one_pass),
      cmocka_unit_test(test_broadcasting_and_strides),
      cmocka_unit_test(test_high_rank_layouts),
      cmocka_unit_test(test_broadcast_errors),
      cmocka_unit_test(test_in_place),
      cmocka_unit_test(test_threads_and_reuse),
      cmocka_unit_test(test_large_outputs),
      cmocka_unit_test(test_converted_scalars_across_calls),
  };
  return cmocka_run_group_tests(tests, cpu_setup, NULL);
}
