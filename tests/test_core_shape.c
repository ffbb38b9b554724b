/*
 * test_core_shape.c — structure ops: type inference and its errors, and
 * shape inference checked by evaluating the inferred scalar graphs against
 * the static rules (Python slice semantics, reshape with -1, ...).
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}
#define U RG_DIM_UNKNOWN
static rg_variable *in(const char *name, rg_dtype dt, int nd, const int64_t *shape) {
  return rg_input(C, name, rg_type_new(dt, nd, shape));
}
static const char *ty(const rg_variable *v) { return v ? rg_type_str(v->type) : "<NULL>"; }
static void expect_error(rg_variable *v, const char *msg) {
  if (v) fail_msg("expected an error containing '%s', got %s", msg, ty(v));
  if (!strstr(rg_errmsg(C), msg)) fail_msg("error '%s' does not contain '%s'", rg_errmsg(C), msg);
  rg_clear_error(C);
}
static rg_variable *K(int64_t k) { return rg_constant_scalar_int(C, RG_INT64, k); }

/* ------------------------------------------------------------------ a tiny scalar evaluator */

/* Bindings: the runtime shape of one input, and scalar input values. */
static rg_variable *bound_var;
static int64_t bound_shape[RG_MAX_NDIM];
static rg_variable *scalar_vars[4];
static int64_t scalar_vals[4];

static double ev(rg_variable *v) {
  double x;
  if (rg_constant_get_f64(v, &x)) return x;
  for (int i = 0; i < 4; i++)
    if (v == scalar_vars[i]) return (double)scalar_vals[i];
  rg_node *n = v->owner;
  if (!n) fail_msg("unbound variable");
  const rg_op *op = n->op;
  double a = n->nin > 0 && op->code != RG_OP_SHAPE_I && op->code != RG_OP_SUBTENSOR ? ev(n->inputs[0]) : 0;
  double b = n->nin > 1 && op->code != RG_OP_SWITCH ? ev(n->inputs[1]) : 0;
  switch (op->code) {
  case RG_OP_ADD: return a + b;
  case RG_OP_SUB: return a - b;
  case RG_OP_MUL: return a * b;
  case RG_OP_INT_DIV: return floor(a / b);
  case RG_OP_TRUE_DIV: return a / b;
  case RG_OP_CEIL: return ceil(a);
  case RG_OP_MAXIMUM: return a > b ? a : b;
  case RG_OP_MINIMUM: return a < b ? a : b;
  case RG_OP_LT: return a < b;
  case RG_OP_GT: return a > b;
  case RG_OP_CAST: return a;
  case RG_OP_SWITCH: return a ? ev(n->inputs[1]) : ev(n->inputs[2]);
  case RG_OP_SHAPE_I:
    assert_ptr_equal(n->inputs[0], bound_var);
    return (double)bound_shape[op->ints[0]];
  default: fail_msg("cannot evaluate %s", rg_op_name(op));
  }
  return 0;
}

/* ------------------------------------------------------------------ dimshuffle, reshape, flatten */

static void test_dimshuffle(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 3, SHAPE(2, 1, U));
  assert_string_equal(ty(rg_dimshuffle(x, 4, SHAPE(2, -1, 0, 1))), "float64 (? 1 2 1)");
  assert_string_equal(ty(rg_dimshuffle(x, 2, SHAPE(2, 0))), "float64 (? 2)"); /* drops the 1 */
  assert_string_equal(ty(rg_transpose(x)), "float64 (? 1 2)");
  expect_error(rg_dimshuffle(x, 2, SHAPE(1, 0)), "dimshuffle: dimension 2 of size ? cannot be dropped");
  expect_error(rg_dimshuffle(x, 3, SHAPE(0, 0, 2)), "dimshuffle: dimension 0 appears twice");
  expect_error(rg_dimshuffle(x, 3, SHAPE(0, 1, 3)), "dimension 3 is out of range for an input with 3");
  expect_error(rg_dimshuffle(x, 1, SHAPE(-2)), "dimshuffle: invalid parameters");
  rg_variable **s = rg_infer_shape(C, rg_dimshuffle(x, 4, SHAPE(2, -1, 0, 1))->owner, 0);
  bound_var = x;
  bound_shape[2] = 7;
  assert_true(ev(s[0]) == 7 && ev(s[1]) == 1 && ev(s[2]) == 2 && ev(s[3]) == 1);
}

static void test_reshape_flatten(void **st) {
  rg_variable *x = in("x", RG_FLOAT32, 2, SHAPE(4, 6));
  assert_string_equal(ty(rg_reshape_to(x, 3, SHAPE(2, -1, 3))), "float32 (2 4 3)");
  assert_string_equal(ty(rg_reshape_to(x, 1, SHAPE(-1))), "float32 (24)");
  expect_error(rg_reshape_to(x, 2, SHAPE(5, 5)), "reshape: cannot reshape an array of size 24 (shape (4 6)) into shape (5 5)");
  expect_error(rg_reshape_to(x, 2, SHAPE(5, -1)), "cannot reshape an array of size 24 (shape (4 6)) into shape (5 ?)");
  expect_error(rg_reshape_to(x, 2, SHAPE(-3, 8)), "reshape: invalid size -3");
  expect_error(rg_reshape_to(x, 2, SHAPE(-1, -1)), "reshape: only one size of the shape may be -1");
  rg_variable *y = in("y", RG_FLOAT32, 2, SHAPE(U, 6));
  rg_variable *n = in("n", RG_INT32, 0, NULL);
  rg_variable *sv = rg_make_vector(C, RG_INT64, 2, (rg_variable *[]){n, rg_scalar_int(C, -1)});
  rg_variable *r = rg_reshape(y, sv, 2);
  assert_string_equal(ty(r), "float32 (? ?)");
  rg_variable **s = rg_infer_shape(C, r->owner, 0);
  bound_var = y;
  bound_shape[0] = 10;
  scalar_vars[0] = n;
  scalar_vals[0] = 4;
  assert_true(ev(s[0]) == 4);
  assert_true(ev(s[1]) == 15);
  scalar_vars[0] = NULL;
  expect_error(rg_reshape(y, in("f", RG_FLOAT64, 1, SHAPE(2)), 2), "reshape: the shape must be an integer vector");
  expect_error(rg_reshape(y, in("v", RG_INT64, 1, SHAPE(3)), 2), "reshape: the shape has 3 elements, expected 2");
  assert_string_equal(ty(rg_flatten(in("z", RG_INT8, 3, SHAPE(2, 3, 4)), 2)), "int8 (2 12)");
  assert_string_equal(ty(rg_flatten(in("z", RG_INT8, 3, SHAPE(2, U, 4)), 1)), "int8 (?)");
  expect_error(rg_flatten(in("z", RG_INT8, 1, SHAPE(2)), 2), "flatten: the input has 1 dimensions, fewer than 2");
  rg_variable *w = in("w", RG_INT8, 3, SHAPE(2, U, 4));
  s = rg_infer_shape(C, rg_flatten(w, 2)->owner, 0);
  bound_var = w;
  bound_shape[1] = 5;
  assert_true(ev(s[0]) == 2 && ev(s[1]) == 20);
}

/* ------------------------------------------------------------------ shape, alloc, make_vector */

static void test_shape_alloc(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 2, SHAPE(3, U));
  assert_string_equal(ty(rg_shape(x)), "int64 (2)");
  assert_string_equal(ty(rg_shape_i(x, 1)), "int64 ()");
  expect_error(rg_shape_i(x, 2), "shape_i: dimension 2 is out of range");
  rg_variable *n = in("n", RG_INT32, 0, NULL);
  rg_variable *v = in("v", RG_FLOAT32, 1, SHAPE(4));
  assert_string_equal(ty(rg_allocate(v, 2, (rg_variable *[]){n, K(4)})), "float32 (? 4)");
  assert_string_equal(ty(rg_allocate(v, 2, (rg_variable *[]){n, n})), "float32 (? 4)");
  expect_error(rg_allocate(v, 2, (rg_variable *[]){n, K(5)}), "alloc: the value of shape (4) does not broadcast to (? 5)");
  expect_error(rg_allocate(v, 0, NULL), "alloc: the value has more dimensions (1) than the shape (0)");
  expect_error(rg_allocate(v, 1, (rg_variable *[]){v}), "alloc: dimension inputs must be integer scalars");
  expect_error(rg_allocate(v, 1, (rg_variable *[]){K(-1)}), "alloc: negative dimension -1");
  assert_string_equal(ty(rg_allocate_empty(C, RG_UINT8, 2, (rg_variable *[]){K(2), n})), "uint8 (2 ?)");
  rg_variable *mv = rg_make_vector(C, RG_INT64, 3, (rg_variable *[]){n, K(2), rg_scalar_int(C, 5)});
  assert_string_equal(ty(mv), "int64 (3)");
  expect_error(rg_make_vector(C, RG_INT8, 1, (rg_variable *[]){n}), "make_vector: input 0 of dtype int32 does not cast safely to int8");
  expect_error(rg_make_vector(C, RG_INT8, 1, (rg_variable *[]){rg_scalar_int(C, 300)}), "does not cast safely to int8");
  expect_error(rg_make_vector(C, RG_INT8, 1, (rg_variable *[]){v}), "make_vector: input 0 must be a scalar");
  rg_variable **s = rg_infer_shape(C, rg_allocate(v, 2, (rg_variable *[]){n, K(4)})->owner, 0);
  scalar_vars[0] = n;
  scalar_vals[0] = 9;
  assert_true(ev(s[0]) == 9 && ev(s[1]) == 4);
  scalar_vars[0] = NULL;
}

/* ------------------------------------------------------------------ join, split */

static void test_join_split(void **st) {
  rg_variable *a = in("a", RG_INT8, 2, SHAPE(2, U)), *b = in("b", RG_FLOAT32, 2, SHAPE(3, 5));
  rg_variable *j = rg_join(0, 2, (rg_variable *[]){a, b});
  assert_string_equal(ty(j), "float32 (5 5)");
  assert_string_equal(ty(rg_join(-1, 2, (rg_variable *[]){a, a})), "int8 (2 ?)");
  assert_string_equal(tu_show(rg_op_term(rg_join(-1, 2, (rg_variable *[]){a, a})->owner->op)), "(join 1)");
  expect_error(rg_join(1, 2, (rg_variable *[]){a, b}), "join: shapes (2 ?) and (3 5) differ outside the axis 1");
  expect_error(rg_join(2, 1, &a), "join: axis 2 is out of range");
  expect_error(rg_join(0, 2, (rg_variable *[]){a, in("c", RG_INT8, 1, SHAPE(2))}), "join: input 1 has 1 dimensions");
  rg_variable *x = in("x", RG_FLOAT64, 2, SHAPE(U, 3));
  rg_variable *sizes = rg_constant_data(C, RG_INT64, 1, SHAPE(2), SHAPE(4, 6));
  rg_node *sp = rg_split(x, sizes, 0, 2);
  assert_non_null(sp);
  assert_string_equal(ty(sp->outputs[0]), "float64 (4 3)");
  assert_string_equal(ty(sp->outputs[1]), "float64 (6 3)");
  assert_null(rg_split(in("y", RG_FLOAT64, 1, SHAPE(9)), sizes, 0, 2));
  assert_non_null(strstr(rg_errmsg(C), "split: the sizes add up to 10, but dimension 0 has size 9"));
  rg_clear_error(C);
  assert_null(rg_split(x, sizes, 0, 3));
  assert_non_null(strstr(rg_errmsg(C), "split: 2 sizes given for 3 outputs"));
  rg_clear_error(C);
  rg_variable **s = rg_infer_shape(C, j->owner, 0);
  bound_var = a;
  bound_shape[1] = 5;
  assert_true(ev(s[0]) == 5 && ev(s[1]) == 5);
  s = rg_infer_shape(C, sp, 1);
  assert_true(ev(s[0]) == 6 && ev(s[1]) == 3);
}

/* ------------------------------------------------------------------ subtensor */

static rg_index I(int64_t k) { return (rg_index){RG_IDX_INDEX, k, RG_IDX_NONE, RG_IDX_NONE}; }
static rg_index S(int64_t a, int64_t b, int64_t c) { return (rg_index){RG_IDX_SLICE, a, b, c}; }
#define N RG_IDX_NONE
#define Q RG_IDX_INPUT

static void test_subtensor_types(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 3, SHAPE(10, U, 4));
  rg_variable *i = in("i", RG_INT32, 0, NULL);
  assert_string_equal(ty(rg_subtensor(x, 1, (rg_index[]){I(2)}, 0, NULL)), "float64 (? 4)");
  assert_string_equal(ty(rg_subtensor(x, 1, (rg_index[]){S(1, 3, N)}, 0, NULL)), "float64 (2 ? 4)");
  assert_string_equal(ty(rg_subtensor(x, 1, (rg_index[]){S(N, N, -1)}, 0, NULL)), "float64 (10 ? 4)");
  assert_string_equal(ty(rg_subtensor(x, 1, (rg_index[]){S(-3, N, N)}, 0, NULL)), "float64 (3 ? 4)");
  assert_string_equal(ty(rg_subtensor(x, 1, (rg_index[]){S(8, 2, -2)}, 0, NULL)), "float64 (3 ? 4)");
  assert_string_equal(ty(rg_subtensor(x, 3, (rg_index[]){S(Q, N, N), I(Q), I(-1)}, 2, (rg_variable *[]){i, i})),
                      "float64 (?)");
  expect_error(rg_subtensor(x, 1, (rg_index[]){I(10)}, 0, NULL), "subtensor: index 10 is out of bounds for dimension 0 of size 10");
  expect_error(rg_subtensor(x, 1, (rg_index[]){I(-11)}, 0, NULL), "index -11 is out of bounds");
  expect_error(rg_subtensor(x, 4, (rg_index[]){I(0), I(0), I(0), I(0)}, 0, NULL), "subtensor: 4 indices for an input with 3 dimensions");
  expect_error(rg_subtensor(x, 1, (rg_index[]){I(Q)}, 0, NULL), "subtensor: expected 1 index input, got 0");
  expect_error(rg_subtensor(x, 1, (rg_index[]){I(Q)}, 1, (rg_variable *[]){x}), "subtensor: index input 0 must be an integer scalar");
  expect_error(rg_subtensor(x, 1, (rg_index[]){S(0, 1, 0)}, 0, NULL), "subtensor: invalid parameters");
  rg_variable *y = in("y", RG_FLOAT32, 1, SHAPE(4));
  assert_string_equal(ty(rg_set_subtensor(x, y, 1, (rg_index[]){I(0)}, 0, NULL)), "float64 (10 ? 4)");
  assert_string_equal(ty(rg_inc_subtensor(x, rg_scalar_float(C, 1), 1, (rg_index[]){S(0, 2, N)}, 0, NULL)), "float64 (10 ? 4)");
  expect_error(rg_inc_subtensor(x, in("w", RG_FLOAT64, 1, SHAPE(5)), 1, (rg_index[]){I(0)}, 0, NULL),
               "inc_subtensor: values of shape (5) do not broadcast to the selection (? 4)");
  expect_error(rg_set_subtensor(in("k", RG_INT8, 1, SHAPE(3)), y, 0, NULL, 0, NULL),
               "set_subtensor: values of dtype float32 do not cast safely to int8");
}

/* rg_slice_indices against Python: len(range(n)[a:b:c]) and its first
 * element, computed by Python for these cases (None: N). */
static void test_slice_indices(void **st) {
  static const int64_t py[][6] = {
      {5, N, N, N, 5, 0},    {5, -12, 3, 1, 3, 0},   {5, 1, -1, 2, 2, 1},  {8, 7, N, -2, 4, 7},
      {8, N, N, -1, 8, 7},   {8, -1, -12, -3, 3, 7}, {8, 12, 0, -1, 7, 7}, {0, N, N, -1, 0, -99},
      {4, 3, 3, 1, 0, -99},  {4, -5, 12, 3, 2, 0},   {8, 3, 1, 1, 0, -99}, {8, -2, N, -4, 2, 6},
  };
  for (size_t i = 0; i < sizeof py / sizeof py[0]; i++) {
    const int64_t *c = py[i];
    int64_t first, len = rg_slice_indices(c[0], c[1] != N, c[1], c[2] != N, c[2], c[3] == N ? 1 : c[3], &first);
    assert_int_equal(len, c[4]);
    if (len) assert_int_equal(first, c[5]);
  }
}

/* Slice lengths from shape inference agree with Python's rules for every
 * combination of constant or symbolic components, known or unknown size. */
static void test_subtensor_infer_matches_python(void **st) {
  static const int64_t vals[] = {N, -12, -5, -1, 0, 1, 3, 7, 12};
  static const int64_t steps[] = {N, 1, 2, 3, -1, -2, -4};
  rg_variable *xu = in("xu", RG_FLOAT64, 1, SHAPE(U));
  rg_variable *qa = in("qa", RG_INT64, 0, NULL), *qb = in("qb", RG_INT32, 0, NULL), *qc = in("qc", RG_INT8, 0, NULL);
  int checked = 0;
  for (int64_t n = 0; n <= 8; n += 4)
    for (size_t a = 0; a < 9; a++)
      for (size_t b = 0; b < 9; b++)
        for (size_t c = 0; c < 7; c++)
          for (int symbolic = 0; symbolic < 2; symbolic++) {
            int64_t start = vals[a], stop = vals[b], step = steps[c];
            int64_t first, want = rg_slice_indices(n, start != N, start, stop != N, stop, step == N ? 1 : step, &first);
            rg_variable *idx[3];
            int nidx = 0;
            rg_index e = S(start, stop, step);
            if (symbolic) { /* every given component becomes an input */
              rg_variable *qs[3] = {qa, qb, qc};
              int64_t *comp[3] = {&e.a, &e.b, &e.c};
              for (int k = 0; k < 3; k++) {
                if (*comp[k] == N) continue;
                scalar_vars[k] = qs[k];
                scalar_vals[k] = *comp[k];
                *comp[k] = Q;
                idx[nidx++] = qs[k];
              }
            }
            rg_variable *r = rg_subtensor(xu, 1, &e, nidx, idx);
            if (!r) fail_msg("%s", rg_errmsg(C));
            rg_variable **s = rg_infer_shape(C, r->owner, 0);
            bound_var = xu;
            bound_shape[0] = n;
            double got = ev(s[0]);
            if (got != (double)want)
              fail_msg("n=%lld [%lld:%lld:%lld] symbolic=%d: got %g want %lld", (long long)n,
                       (long long)start, (long long)stop, (long long)step, symbolic, got, (long long)want);
            /* with a known size and constant components, the type knows it */
            if (!symbolic) {
              rg_variable *xk = in("xk", RG_FLOAT64, 1, &n);
              assert_int_equal(rg_subtensor(xk, 1, &e, 0, NULL)->type->shape[0], want);
            }
            memset(scalar_vars, 0, sizeof scalar_vars);
            checked++;
          }
  assert_int_equal(checked, 3 * 9 * 9 * 7 * 2);
}

/* ------------------------------------------------------------------ arange */

static void test_arange(void **st) {
  assert_string_equal(ty(rg_arange(K(0), K(10), K(3), RG_INT64)), "int64 (4)");
  assert_string_equal(ty(rg_arange(rg_scalar_float(C, 1.5), K(0), rg_scalar_float(C, -0.5), RG_FLOAT64)), "float64 (3)");
  assert_string_equal(ty(rg_arange(K(5), K(0), K(1), RG_INT32)), "int32 (0)");
  rg_variable *n = in("n", RG_INT64, 0, NULL);
  rg_variable *r = rg_arange(K(2), n, K(3), RG_INT64);
  assert_string_equal(ty(r), "int64 (?)");
  rg_variable **s = rg_infer_shape(C, r->owner, 0);
  scalar_vars[0] = n;
  scalar_vals[0] = 11;
  assert_true(ev(s[0]) == 3);
  scalar_vals[0] = 0;
  assert_true(ev(s[0]) == 0);
  scalar_vars[0] = NULL;
  expect_error(rg_arange(K(0), K(1), K(0), RG_INT64), "arange: the step must not be zero");
  /* at most 2^62 elements: exactly 2^62 is allowed */
  int64_t len = 0;
  assert_null(rg_arange_length(0, 0x1p62, 1, &len));
  assert_true(len == (int64_t)1 << 62);
  assert_non_null(rg_arange_length(0, 0x1p63, 1, &len));
  /* a gradient brought back to a type it is no broadcast of */
  rg_variable *g23 = in("g", RG_FLOAT64, 2, SHAPE(2, 3));
  assert_string_equal(ty(rg_grad_sum_to(g23, rg_type_new(RG_FLOAT64, 2, SHAPE(1, 3)))), "float64 (1 3)");
  expect_error(rg_grad_sum_to(g23, rg_type_new(RG_FLOAT64, 3, SHAPE(1, 2, 3))), "grad_sum_to: a gradient of rank 2 for a value of rank 3");
  expect_error(rg_grad_sum_to(g23, rg_type_new(RG_FLOAT64, 2, SHAPE(3, 3))), "is no broadcast of float64 (3 3)");
  expect_error(rg_arange(K(0), in("v", RG_INT64, 1, SHAPE(2)), K(1), RG_INT64), "arange: start, stop and step must be numeric scalars");
}

/* ------------------------------------------------------------------ other families */

/* The one resolution of a reshape's sizes (the core's types and the CPU
 * kernel both use it) and the one way of writing a shape. */
static void test_reshape_sizes_and_shape_str(void **st) {
  (void)st;
  int64_t out[4], x24[2] = {4, 6}, xq[2] = {4, -1};
  char b[RG_SHAPE_STR_MAX];
  assert_null(rg_reshape_sizes(2, x24, 3, (int64_t[]){2, -1, 3}, NULL, out));
  assert_string_equal(rg_shape_str(3, out, b, sizeof b), "(2 4 3)");
  assert_string_equal(rg_reshape_sizes(2, x24, 2, (int64_t[]){-1, -1}, NULL, out),
                      "only one size of the shape may be -1");
  assert_string_equal(rg_reshape_sizes(2, x24, 2, (int64_t[]){-2, 12}, NULL, out),
                      "invalid size -2 in the shape");
  assert_string_equal(rg_reshape_sizes(2, x24, 2, (int64_t[]){INT64_MAX, 2}, NULL, out),
                      "the shape overflows");
  assert_string_equal(rg_reshape_sizes(2, x24, 2, (int64_t[]){0, -1}, NULL, out),
                      "cannot reshape an array of size 24 (shape (4 6)) into shape (0 ?)");
  /* x's size not known, or a size not known yet: no check, -1 unresolved */
  assert_null(rg_reshape_sizes(2, xq, 2, (int64_t[]){5, -1}, NULL, out));
  assert_int_equal(out[0], 5);
  assert_int_equal(out[1], RG_DIM_UNKNOWN);
  assert_null(rg_reshape_sizes(2, x24, 2, (int64_t[]){7, -1}, (bool[]){false, true}, out));
  assert_int_equal(out[0], RG_DIM_UNKNOWN);
  assert_int_equal(out[1], RG_DIM_UNKNOWN);
  /* an empty x reshapes to any shape holding no elements */
  int64_t x0[1] = {0};
  assert_null(rg_reshape_sizes(1, x0, 2, (int64_t[]){3, 0}, NULL, out));
  /* a shape string cut short stays a string */
  char small[5];
  assert_string_equal(rg_shape_str(2, x24, small, sizeof small), "(4 6");
  assert_string_equal(rg_shape_str(0, NULL, b, sizeof b), "()");
}

static void test_infer_other_families(void **st) {
  rg_variable *A = in("A", RG_FLOAT64, 2, SHAPE(U, 3)), *x = in("x", RG_FLOAT64, 1, SHAPE(3));
  rg_variable **s = rg_infer_shape(C, rg_dot(A, x)->owner, 0);
  bound_var = A;
  bound_shape[0] = 8;
  assert_true(ev(s[0]) == 8);
  rg_variable *b = in("b", RG_FLOAT64, 3, SHAPE(1, U, 1));
  s = rg_infer_shape(C, rg_add(b, A)->owner, 0);
  bound_var = b;
  bound_shape[1] = 5; /* must equal A's first dimension at run time */
  assert_true(ev(s[0]) == 1 && ev(s[1]) == 5 && ev(s[2]) == 3);
  s = rg_infer_shape(C, rg_sum(b, 1, SHAPE(0))->owner, 0);
  assert_true(ev(s[0]) == 5 && ev(s[1]) == 1);
  rg_variable *c = in("c", RG_BOOL, 0, NULL);
  rg_variable *y = in("y", RG_FLOAT64, 1, SHAPE(U)), *z = in("z", RG_FLOAT64, 1, SHAPE(U));
  rg_node *ie = rg_ifelse(c, 1, &y, &z);
  s = rg_infer_shape(C, ie, 0);
  assert_non_null(s[0]->owner);
  assert_int_equal(s[0]->owner->op->code, RG_OP_SWITCH);
  const rg_op *op = rg_op_opaque("blob", 1, rg_type_new(RG_FLOAT32, 2, SHAPE(2, U)));
  rg_node *o = rg_make_node(C, op, 1, &y);
  s = rg_infer_shape(C, o, 0);
  double k;
  assert_true(rg_constant_get_f64(s[0], &k) && k == 2);
  assert_int_equal(s[1]->owner->op->code, RG_OP_SHAPE_I);
  assert_ptr_equal(s[1]->owner->inputs[0], o->outputs[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dimshuffle),
      cmocka_unit_test(test_reshape_flatten),
      cmocka_unit_test(test_shape_alloc),
      cmocka_unit_test(test_join_split),
      cmocka_unit_test(test_subtensor_types),
      cmocka_unit_test(test_slice_indices),
      cmocka_unit_test(test_subtensor_infer_matches_python),
      cmocka_unit_test(test_arange),
      cmocka_unit_test(test_reshape_sizes_and_shape_str),
      cmocka_unit_test(test_infer_other_families),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
