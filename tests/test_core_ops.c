/*
 * test_core_ops.c — the op table, op parameters as terms, and type
 * inference (with its error messages) of every op family: elementwise
 * broadcasting and NEP 50 promotion, reductions, linear algebra, ifelse and
 * opaque ops.
 */
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

#include "core/core-impl.h"
#include "relgraph/scan.h"

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

static const rg_type *T(rg_dtype dt, int nd, const int64_t *shape) {
  return rg_type_new(dt, nd, shape);
}
static rg_variable *in(const char *name, rg_dtype dt, int nd, const int64_t *shape) {
  return rg_input(C, name, T(dt, nd, shape));
}
#define SHAPE(...) (const int64_t[]){__VA_ARGS__}
#define U RG_DIM_UNKNOWN

static const char *ty(const rg_variable *v) { return v ? rg_type_str(v->type) : "<NULL>"; }

/* Asserts v is NULL and the context's message contains `msg`. */
static void expect_error(rg_variable *v, const char *msg) {
  if (v) fail_msg("expected an error containing '%s', got a variable of type %s", msg, ty(v));
  if (!strstr(rg_errmsg(C), msg)) fail_msg("error '%s' does not contain '%s'", rg_errmsg(C), msg);
  rg_clear_error(C);
}

/* ------------------------------------------------------------------ the table */

static void test_class_table_matches_enum(void **st) {
  assert_int_equal(rgc_check_classes(), 0);
  assert_int_equal(RG_OP_COUNT, 78);
  assert_string_equal(rg_opcode_name(RG_OP_TRUE_DIV), "true_div");
  assert_int_equal(rg_opcode_from_name("log_softmax"), RG_OP_LOG_SOFTMAX);
  assert_int_equal(rg_opcode_from_name("nope"), -1);
  assert_int_equal(rg_opcode_family(RG_OP_GEMV), RG_FAM_BLAS);
  assert_int_equal(rg_opcode_family(RG_OP_SECOND), RG_FAM_ELEMWISE);
  for (int i = 0; i < RG_OP_COUNT; i++) assert_int_equal(rgc_classes[i].code, i);
}

static void test_op_terms_round_trip(void **st) {
  static const char *const heads[] = {
      "add", "(add (inplace 1))", "(cast float32)", "(dimshuffle 1 x 0)", "(reshape 2)",
      "(flatten 1)", "shape", "(shape_i 3)", "(alloc_empty int8)", "(make_vector int64)",
      "(join 0)", "(split 1 3)", "(subtensor 1 (1 3) (none none -1) (? ? ?))",
      "(inc_subtensor (0 none) (inplace 0))", "(set_subtensor ?)", "(arange float64)", "sum",
      "(sum)", "(sum 0 2)", "(dimshuffle)", "(subtensor)", "(inc_subtensor)", "(max 1)", "(argmax 0)", "(softmax 1)", "(log_softmax 0)", "dot",
      "gemm", "(gemm (inplace 0))", "batched_dot", "ifelse",
  };
  for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
    rg_term t = tu_read(C, heads[i]);
    const rg_op *op = rg_op_from_term(C, t);
    if (!op) fail_msg("%s: %s", heads[i], rg_errmsg(C));
    assert_string_equal(tu_show(rg_op_term(op)), heads[i]);
    const rg_op *again = rg_op_from_term(C, rg_op_term(op));
    assert_true(rg_op_equal(op, again));
    assert_true(rg_op_hash(op) == rg_op_hash(again));
  }
  assert_false(rg_op_equal(rg_op_get(RG_OP_SUM), rg_op_reduce(RG_OP_SUM, 0, NULL)));
  assert_false(rg_op_equal(rg_op_cast(RG_INT8), rg_op_cast(RG_INT16)));
  assert_true(rg_op_equal(rg_op_reduce(RG_OP_SUM, 2, SHAPE(2, 0)), rg_op_reduce(RG_OP_SUM, 2, SHAPE(0, 2))));
}

static void test_op_term_errors(void **st) {
  static const struct { const char *text, *msg; } bad[] = {
      {"frobnicate", "unknown op 'frobnicate'"},
      {"(cast)", "cast: expected a dtype"},
      {"(cast float16)", "cast: expected a dtype"},
      {"cast", "cast: needs parameters: write it as ((cast PARAMETERS...) INPUTS...)"},
      {"(add 1)", "add: bad parameters"},
      {"(dimshuffle 0 y)", "dimshuffle: bad parameters"},
      {"(sum 0 0)", "sum: names an axis twice: (0 0)"},
      {"(split 0 0)", "split: bad parameters"},
      {"(subtensor (1 2 0))", "subtensor: bad index entry (a slice's step cannot be 0)"},
      {"(subtensor (1 2 3 4))", "subtensor: bad index entry: (1 2 3 4)"},
      {"(subtensor (1))", "subtensor: bad index entry"},
      {"(dot (inplace 0))", "dot: cannot work in place"},
      {"(5 x)", "not an op"},
      {"(reshape -1)", "reshape: bad parameters"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_null(rg_op_from_term(C, tu_read(C, bad[i].text)));
    if (!strstr(rg_errmsg(C), bad[i].msg))
      fail_msg("%s: error '%s' lacks '%s'", bad[i].text, rg_errmsg(C), bad[i].msg);
    rg_clear_error(C);
  }
}

static void test_view_destroy_maps(void **st) {
  assert_int_equal(rg_op_view_of(rg_op_dimshuffle(2, SHAPE(1, 0)), 0), 0);
  assert_int_equal(rg_op_view_of(rg_op_get(RG_OP_ADD), 0), -1);
  assert_int_equal(rg_op_destroys(rg_op_get(RG_OP_ADD), 0), -1);
  assert_int_equal(rg_op_destroys(rg_op_inplace(rg_op_get(RG_OP_ADD), 1), 0), 1);
  assert_int_equal(rg_op_destroys(rg_op_inplace(rg_op_get(RG_OP_GEMM), 0), 0), 0);
  assert_null(rg_op_inplace(rg_op_get(RG_OP_DOT), 0));
}

/* ------------------------------------------------------------------ elementwise */

static void test_broadcasting(void **st) {
  rg_variable *a = in("a", RG_FLOAT64, 2, SHAPE(3, U));
  rg_variable *b = in("b", RG_FLOAT64, 1, SHAPE(4));
  rg_variable *c = in("c", RG_FLOAT64, 3, SHAPE(1, 1, U));
  rg_variable *s = in("s", RG_FLOAT64, 0, NULL);
  assert_string_equal(ty(rg_add(a, b)), "float64 (3 4)");
  assert_string_equal(ty(rg_add(a, c)), "float64 (1 3 ?)");
  assert_string_equal(ty(rg_mul(s, c)), "float64 (1 1 ?)");
  assert_ptr_equal(rg_add(a, s)->type, a->type); /* the input's type object is reused */
  rg_variable *d = in("d", RG_FLOAT64, 2, SHAPE(5, 1));
  assert_string_equal(ty(rg_sub(d, b)), "float64 (5 4)");
  rg_variable *xs[4] = {a, b, d, s};
  expect_error(rg_add_n(4, xs), "add: shapes (3 ?), (4), (5 1) and () do not broadcast (dimension 0)");
  rg_variable *e = in("e", RG_FLOAT64, 1, SHAPE(5));
  expect_error(rg_add(b, e), "add: shapes (4) and (5) do not broadcast");
  /* n-ary add with one input is allowed, with none is not */
  assert_string_equal(ty(rg_add_n(1, &a)), "float64 (3 ?)");
  expect_error(rg_apply(C, rg_op_get(RG_OP_ADD), 0, NULL), "add: expected at least 1 input, got 0");
  rg_variable *three[3] = {a, a, a};
  expect_error(rg_apply(NULL, rg_op_get(RG_OP_SUB), 3, three), "sub: expected at most 2 inputs, got 3");
}

static void test_dtype_rules(void **st) {
  rg_variable *i8 = in("i8", RG_INT8, 1, SHAPE(3)), *u8 = in("u8", RG_UINT8, 1, SHAPE(3));
  rg_variable *i32 = in("i32", RG_INT32, 1, SHAPE(3)), *f32 = in("f32", RG_FLOAT32, 1, SHAPE(3));
  rg_variable *b = in("b", RG_BOOL, 1, SHAPE(3)), *f64 = in("f64", RG_FLOAT64, 1, SHAPE(3));
  assert_string_equal(ty(rg_add(i8, u8)), "int16 (3)");
  assert_string_equal(ty(rg_mul(i32, f32)), "float64 (3)");
  assert_string_equal(ty(rg_add(b, b)), "bool (3)");
  assert_string_equal(ty(rg_true_div(i8, i8)), "float64 (3)");
  assert_string_equal(ty(rg_true_div(f32, i8)), "float32 (3)");
  assert_string_equal(ty(rg_exp(i8)), "float32 (3)");
  assert_string_equal(ty(rg_exp(i32)), "float64 (3)");
  assert_string_equal(ty(rg_sqrt(b)), "float32 (3)");
  assert_string_equal(ty(rg_int_div(b, b)), "int8 (3)");
  assert_string_equal(ty(rg_pow(b, b)), "int8 (3)");
  assert_string_equal(ty(rg_mod(f32, i8)), "float32 (3)");
  assert_string_equal(ty(rg_abs(i8)), "int8 (3)");
  assert_string_equal(ty(rg_floor(i32)), "int32 (3)");
  assert_string_equal(ty(rg_lt(i8, f64)), "bool (3)");
  assert_string_equal(ty(rg_and(i8, u8)), "int16 (3)");
  assert_string_equal(ty(rg_not(b)), "bool (3)");
  assert_string_equal(ty(rg_switch(b, i8, f32)), "float32 (3)");
  assert_string_equal(ty(rg_cast(f64, RG_UINT8)), "uint8 (3)");
  assert_string_equal(ty(rg_second(f64, i8)), "int8 (3)");
  assert_string_equal(ty(rg_clip(i8, rg_scalar_int(C, 0), rg_scalar_int(C, 5))), "int8 (3)");
  assert_string_equal(ty(rg_maximum(u8, b)), "uint8 (3)");
  expect_error(rg_sub(b, b), "sub: not defined for bool inputs");
  expect_error(rg_neg(b), "neg: not defined for bool inputs");
  expect_error(rg_and(f32, i8), "and: needs bool or integer inputs, got float32");
  expect_error(rg_cast(f64, RG_NDTYPES), "cast: invalid dtype");
}

/* NumPy 2 (NEP 50): literals are weak. */
static void test_nep50_literals(void **st) {
  rg_variable *i8 = in("i8", RG_INT8, 1, SHAPE(3)), *u8 = in("u8", RG_UINT8, 0, NULL);
  rg_variable *f32 = in("f32", RG_FLOAT32, 1, SHAPE(3)), *b = in("b", RG_BOOL, 0, NULL);
  assert_string_equal(ty(rg_add(i8, rg_scalar_int(C, 1))), "int8 (3)");
  assert_string_equal(ty(rg_add(i8, rg_scalar_float(C, 1.5))), "float64 (3)");
  assert_string_equal(ty(rg_mul(f32, rg_scalar_float(C, 2.0))), "float32 (3)");
  assert_string_equal(ty(rg_mul(f32, rg_scalar_int(C, 2))), "float32 (3)");
  assert_string_equal(ty(rg_add(b, rg_scalar_int(C, 2))), "int64 ()");
  assert_string_equal(ty(rg_add(u8, rg_scalar_int(C, 255))), "uint8 ()");
  assert_string_equal(ty(rg_add(rg_scalar_int(C, 1), rg_scalar_float(C, 2))), "float64 ()");
  assert_string_equal(ty(rg_and(b, rg_scalar_bool(C, true))), "bool ()");
  expect_error(rg_add(u8, rg_scalar_int(C, 256)), "add: the literal 256 does not fit uint8");
  expect_error(rg_add(i8, rg_scalar_int(C, -129)), "the literal -129 does not fit int8");
  /* a comparison with such a literal computes in a dtype holding both */
  assert_string_equal(ty(rg_lt(u8, rg_scalar_int(C, -1))), "bool ()");
  assert_string_equal(ty(rg_eq_elem(i8, rg_scalar_int(C, 200))), "bool (3)");
  /* a strong int64 constant promotes as a tensor would */
  assert_string_equal(ty(rg_add(i8, rg_constant_scalar_int(C, RG_INT64, 1))), "int64 (3)");
}

static void test_inplace_elementwise(void **st) {
  rg_variable *a = in("a", RG_FLOAT64, 1, SHAPE(3)), *s = in("s", RG_FLOAT64, 0, NULL);
  rg_variable *xs[2] = {a, s};
  rg_variable *r = rg_apply(NULL, rg_op_inplace(rg_op_get(RG_OP_ADD), 0), 2, xs);
  assert_non_null(r);
  assert_int_equal(rg_op_destroys(r->owner->op, 0), 0);
  expect_error(rg_apply(NULL, rg_op_inplace(rg_op_get(RG_OP_ADD), 1), 2, xs),
               "add: cannot work in place on input 1: its type float64 () differs");
  expect_error(rg_apply(NULL, rg_op_inplace(rg_op_get(RG_OP_ADD), 2), 2, xs),
               "in-place input 2 does not exist");
}

static void test_sticky_null(void **st) {
  rg_variable *a = in("a", RG_FLOAT64, 1, SHAPE(3)), *b = in("b", RG_FLOAT64, 1, SHAPE(4));
  rg_clear_error(C);
  rg_variable *bad = rg_add(a, b);
  assert_null(bad);
  const char *first = tu_show(rg_string(rg_errmsg(C)));
  /* every later construction on NULL returns NULL and keeps the first message */
  rg_variable *r = rg_exp(rg_mul(rg_neg(bad), a));
  assert_null(r);
  assert_string_equal(tu_show(rg_string(rg_errmsg(C))), first);
  assert_null(rg_sum(NULL, -1, NULL));
  assert_null(rg_dot(a, NULL));
  rg_clear_error(C);
}

static void test_devices(void **st) {
  rg_variable *g = rg_input(C, "g", rg_type_on_device(T(RG_FLOAT32, 1, SHAPE(3)), RG_DEVICE_CUDA(0)));
  rg_variable *h = in("h", RG_FLOAT32, 1, SHAPE(3));
  assert_string_equal(ty(rg_mul(g, rg_scalar_float(C, 2))), "float32 (3) cuda:0");
  /* a value on the host joins one on a device there (the linker copies it) */
  assert_string_equal(ty(rg_add(h, g)), "float32 (3) cuda:0");
  assert_string_equal(ty(rg_dot(h, g)), "float32 () cuda:0");
}

/* ------------------------------------------------------------------ reductions */

static void test_reductions(void **st) {
  rg_variable *x = in("x", RG_INT8, 3, SHAPE(2, U, 4));
  rg_variable *f = in("f", RG_FLOAT32, 2, SHAPE(2, 3));
  assert_string_equal(ty(rg_sum(x, -1, NULL)), "int64 ()");
  assert_string_equal(ty(rg_sum(x, 1, SHAPE(1))), "int64 (2 4)");
  assert_string_equal(ty(rg_max(x, 2, SHAPE(0, -1))), "int8 (?)");
  assert_string_equal(ty(rg_mean(x, 1, SHAPE(0))), "float64 (? 4)");
  assert_string_equal(ty(rg_mean(f, 1, SHAPE(0))), "float32 (3)");
  assert_string_equal(ty(rg_argmax(f, 1, SHAPE(1))), "int64 (2)");
  assert_string_equal(ty(rg_any(f, -1, NULL)), "bool ()");
  assert_string_equal(ty(rg_prod(f, 0, NULL)), "float32 (2 3)");
  assert_string_equal(ty(rg_softmax(f, -1)), "float32 (2 3)");
  assert_string_equal(ty(rg_log_softmax(x, 0)), "float32 (2 ? 4)");
  /* negative axes are normalised into the node's op */
  rg_variable *m = rg_max(x, 1, SHAPE(-1));
  assert_string_equal(tu_show(rg_op_term(m->owner->op)), "(max 2)");
  assert_true(rg_op_equal(m->owner->op, rg_max(x, 1, SHAPE(2))->owner->op));
  assert_string_equal(tu_show(rg_op_term(rg_softmax(f, -1)->owner->op)), "(softmax 1)");
  expect_error(rg_sum(x, 1, SHAPE(3)), "sum: axis 3 is out of range for a 3-dimensional input");
  expect_error(rg_sum(x, 2, SHAPE(0, -3)), "sum: axes -3 and 0 name the same dimension");
  expect_error(rg_sum(x, 2, SHAPE(1, 1)), "sum: invalid axes");
  expect_error(rg_sum(x, 2, NULL), "sum: invalid axes");
  expect_error(rg_constant_data(C, RG_FLOAT64, 1, SHAPE(2), NULL), "constant: no data");
  expect_error(rg_softmax(rg_input(C, "s", rg_type_scalar(RG_FLOAT64)), 0),
               "softmax: needs an input with at least one dimension");
}

/* ------------------------------------------------------------------ linear algebra */

static void test_blas_types(void **st) {
  rg_variable *A = in("A", RG_FLOAT64, 2, SHAPE(U, U)), *x = in("x", RG_FLOAT64, 1, SHAPE(U));
  rg_variable *B = in("B", RG_FLOAT64, 2, SHAPE(3, 4)), *y = in("y", RG_FLOAT32, 1, SHAPE(4));
  rg_variable *z = in("z", RG_FLOAT64, 1, SHAPE(5));
  assert_string_equal(ty(rg_dot(A, x)), "float64 (?)");
  assert_string_equal(ty(rg_dot(x, x)), "float64 ()");
  assert_string_equal(ty(rg_dot(x, B)), "float64 (4)");
  assert_string_equal(ty(rg_dot(B, y)), "float64 (3)");
  assert_string_equal(ty(rg_dot(A, B)), "float64 (? 4)");
  assert_string_equal(ty(rg_outer(y, z)), "float64 (4 5)");
  expect_error(rg_dot(B, z), "dot: shapes (3 4) and (5) are not aligned");
  expect_error(rg_dot(rg_input(C, "s", rg_type_scalar(RG_FLOAT64)), x),
               "dot: the first input must have 1 or 2 dimensions, got 0");
  expect_error(rg_outer(A, x), "outer: the first input must have 1 dimension, got 2");
  rg_variable *one = rg_scalar_float(C, 1.0);
  rg_variable *C34 = in("C34", RG_FLOAT64, 2, SHAPE(3, 4));
  rg_variable *gemm = rg_gemm(C34, one, B, rg_input(C, "D", T(RG_FLOAT64, 2, SHAPE(4, 4))), one);
  assert_string_equal(ty(gemm), "float64 (3 4)");
  expect_error(rg_gemm(C34, one, B, B, one), "gemm: shapes (3 4) and (3 4) are not aligned");
  expect_error(rg_gemm(C34, one, A, A, rg_input(C, "v", T(RG_FLOAT64, 1, SHAPE(1)))),
               "gemm: input 4 must be a scalar");
  expect_error(rg_gemv(y, one, B, y, one), "gemv: tensor inputs must share one dtype");
  rg_variable *iv = in("iv", RG_INT32, 1, SHAPE(3));
  expect_error(rg_gemv(iv, one, B, z, one), "gemv: needs float32 or float64 tensors, got int32");
  assert_string_equal(ty(rg_gemv(z, one, A, x, one)), "float64 (5)");
  assert_string_equal(ty(rg_ger(B, rg_constant_scalar(C, RG_FLOAT32, 2), x, x)), "float64 (3 4)");
  expect_error(rg_ger(B, one, z, x), "ger: A of shape (3 4) does not match outer(x, y)");
  rg_variable *F = in("F", RG_FLOAT32, 2, SHAPE(U, U)), *v = in("v", RG_FLOAT32, 1, SHAPE(U));
  expect_error(rg_ger(F, rg_input(C, "i", rg_type_scalar(RG_INT32)), v, v),
               "ger: scalar input 1 of dtype int32 does not cast safely to float32");
  assert_string_equal(ty(rg_ger(F, rg_scalar_int(C, 3), v, v)), "float32 (? ?)");
  rg_variable *gin[5] = {C34, one, B, B, one};
  expect_error(rg_apply(NULL, rg_op_inplace(rg_op_get(RG_OP_GEMM), 2), 5, gin),
               "gemm: can only work in place on input 0");
}

static void test_batched_dot_types(void **st) {
  rg_variable *X = in("X", RG_FLOAT32, 3, SHAPE(U, 3, 4)), *Y = in("Y", RG_FLOAT64, 3, SHAPE(7, 4, U));
  rg_variable *u = in("u", RG_INT8, 2, SHAPE(7, 4)), *w = in("w", RG_FLOAT32, 2, SHAPE(U, 3));
  assert_string_equal(ty(rg_batched_dot(X, Y)), "float64 (7 3 ?)");
  assert_string_equal(ty(rg_batched_dot(u, Y)), "float64 (7 ?)");
  assert_string_equal(ty(rg_batched_dot(X, u)), "float32 (7 3)");
  assert_string_equal(ty(rg_batched_dot(u, u)), "int8 (7)");
  assert_string_equal(ty(rg_batched_dot(w, rg_batched_dot(X, u))), "float32 (7)");
  rg_variable *v9 = in("v9", RG_FLOAT32, 2, SHAPE(9, 4));
  expect_error(rg_batched_dot(v9, Y), "batched_dot: batch sizes differ: shapes (9 4) and (7 4 ?)");
  expect_error(rg_batched_dot(X, w), "batched_dot: shapes (? 3 4) and (? 3) are not aligned");
  expect_error(rg_batched_dot(in("x1", RG_FLOAT32, 1, SHAPE(4)), u),
               "batched_dot: the first input must have 2 or 3 dimensions, got 1");
  expect_error(rg_batched_dot(X, in("y4", RG_FLOAT32, 4, SHAPE(1, 4, 1, 1))),
               "batched_dot: the second input must have 2 or 3 dimensions, got 4");
}

/* ------------------------------------------------------------------ control and opaque */

static void test_ifelse(void **st) {
  rg_variable *c = in("c", RG_BOOL, 0, NULL);
  rg_variable *a = in("a", RG_FLOAT64, 1, SHAPE(3)), *b = in("b", RG_FLOAT64, 1, SHAPE(4));
  rg_variable *i = in("i", RG_INT64, 0, NULL);
  rg_node *n = rg_ifelse(c, 2, (rg_variable *[]){a, i}, (rg_variable *[]){b, i});
  assert_non_null(n);
  assert_int_equal(n->nout, 2);
  assert_string_equal(ty(n->outputs[0]), "float64 (?)");
  assert_string_equal(ty(n->outputs[1]), "int64 ()");
  assert_null(rg_ifelse(c, 1, (rg_variable *[]){a}, (rg_variable *[]){i}));
  assert_non_null(strstr(rg_errmsg(C), "ifelse: branches of output 0 differ: float64 (3) and int64 ()"));
  rg_clear_error(C);
  assert_null(rg_ifelse(a, 1, (rg_variable *[]){a}, (rg_variable *[]){b}));
  assert_non_null(strstr(rg_errmsg(C), "ifelse: the condition must be a scalar"));
  rg_clear_error(C);
  rg_variable *even[2] = {c, a};
  assert_null(rg_make_node(NULL, rg_op_get(RG_OP_IFELSE), 2, even));
  assert_non_null(strstr(rg_errmsg(C), "ifelse: expected at least 3 inputs"));
  rg_clear_error(C);
}

static void test_opaque(void **st) {
  rg_variable *a = in("a", RG_FLOAT32, 2, SHAPE(3, 1)), *b = in("b", RG_INT8, 1, SHAPE(4));
  const rg_op *op1 = rg_op_opaque("op1", 1, NULL);
  rg_variable *ab[2] = {a, b};
  assert_string_equal(ty(rg_apply(C, op1, 2, ab)), "float32 (3 4)");
  assert_string_equal(rg_op_name(op1), "op1");
  assert_string_equal(tu_show(rg_op_term(op1)), "op1");
  const rg_op *two = rg_op_opaque("two", 2, T(RG_INT64, 0, NULL));
  rg_node *n = rg_make_node(C, two, 0, NULL);
  assert_non_null(n);
  assert_int_equal(n->nout, 2);
  assert_string_equal(ty(n->outputs[1]), "int64 ()");
  assert_true(rg_op_equal(op1, rg_op_opaque("op1", 1, NULL)));
  assert_false(rg_op_equal(op1, rg_op_opaque("op2", 1, NULL)));
  assert_false(rg_op_equal(op1, two));
  assert_null(rg_make_node(C, op1, 0, NULL));
  assert_non_null(strstr(rg_errmsg(C), "op1: an opaque op without inputs needs a declared output type"));
  rg_clear_error(C);
  assert_null(rg_make_node(C, NULL, 1, &a));
  assert_non_null(strstr(rg_errmsg(C), "invalid op"));
  rg_clear_error(C);
}


/* ------------------------------------------------------------------ every op */

/* The dtype of each elementwise op applied to inputs all of one dtype
 * (bool, int8, int32, float32), "-" for a type error. */
static void test_elementwise_dtype_table(void **st) {
  static const struct { rg_opcode op; const char *want[4]; } table[] = {
      {RG_OP_ADD, {"bool", "int8", "int32", "float32"}},
      {RG_OP_MUL, {"bool", "int8", "int32", "float32"}},
      {RG_OP_SUB, {"-", "int8", "int32", "float32"}},
      {RG_OP_TRUE_DIV, {"float64", "float64", "float64", "float32"}},
      {RG_OP_INT_DIV, {"int8", "int8", "int32", "float32"}},
      {RG_OP_MOD, {"int8", "int8", "int32", "float32"}},
      {RG_OP_NEG, {"-", "int8", "int32", "float32"}},
      {RG_OP_ABS, {"bool", "int8", "int32", "float32"}},
      {RG_OP_EXP, {"float32", "float32", "float64", "float32"}},
      {RG_OP_LOG, {"float32", "float32", "float64", "float32"}},
      {RG_OP_LOG1P, {"float32", "float32", "float64", "float32"}},
      {RG_OP_EXPM1, {"float32", "float32", "float64", "float32"}},
      {RG_OP_SQRT, {"float32", "float32", "float64", "float32"}},
      {RG_OP_SQR, {"bool", "int8", "int32", "float32"}},
      {RG_OP_POW, {"int8", "int8", "int32", "float32"}},
      {RG_OP_SIN, {"float32", "float32", "float64", "float32"}},
      {RG_OP_COS, {"float32", "float32", "float64", "float32"}},
      {RG_OP_TANH, {"float32", "float32", "float64", "float32"}},
      {RG_OP_SIGMOID, {"float32", "float32", "float64", "float32"}},
      {RG_OP_SOFTPLUS, {"float32", "float32", "float64", "float32"}},
      {RG_OP_ERF, {"float32", "float32", "float64", "float32"}},
      {RG_OP_MAXIMUM, {"bool", "int8", "int32", "float32"}},
      {RG_OP_MINIMUM, {"bool", "int8", "int32", "float32"}},
      {RG_OP_FLOOR, {"bool", "int8", "int32", "float32"}},
      {RG_OP_CEIL, {"bool", "int8", "int32", "float32"}},
      {RG_OP_ROUND, {"bool", "int8", "int32", "float32"}},
      {RG_OP_SIGN, {"-", "int8", "int32", "float32"}},
      {RG_OP_CLIP, {"bool", "int8", "int32", "float32"}},
      {RG_OP_LT, {"bool", "bool", "bool", "bool"}},
      {RG_OP_GT, {"bool", "bool", "bool", "bool"}},
      {RG_OP_LE, {"bool", "bool", "bool", "bool"}},
      {RG_OP_GE, {"bool", "bool", "bool", "bool"}},
      {RG_OP_EQ, {"bool", "bool", "bool", "bool"}},
      {RG_OP_NEQ, {"bool", "bool", "bool", "bool"}},
      {RG_OP_AND, {"bool", "int8", "int32", "-"}},
      {RG_OP_OR, {"bool", "int8", "int32", "-"}},
      {RG_OP_XOR, {"bool", "int8", "int32", "-"}},
      {RG_OP_NOT, {"bool", "int8", "int32", "-"}},
      {RG_OP_SWITCH, {"bool", "int8", "int32", "float32"}},
      {RG_OP_IDENTITY, {"bool", "int8", "int32", "float32"}},
      {RG_OP_SECOND, {"bool", "int8", "int32", "float32"}},
  };
  static const rg_dtype dts[4] = {RG_BOOL, RG_INT8, RG_INT32, RG_FLOAT32};
  int covered = 0;
  for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
    const rg_op *op = rg_op_get(table[k].op);
    int nin = rgc_classes[table[k].op].min_in;
    for (int d = 0; d < 4; d++) {
      rg_variable *xs[3];
      for (int i = 0; i < nin; i++) xs[i] = in("t", dts[d], 1, SHAPE(2));
      rg_variable *r = rg_apply(C, op, nin, xs);
      const char *got = r ? rg_dtype_name(r->type->dtype) : "-";
      if (strcmp(got, table[k].want[d]))
        fail_msg("%s on %s: got %s, want %s (%s)", rg_opcode_name(table[k].op), rg_dtype_name(dts[d]),
                 got, table[k].want[d], rg_errmsg(C));
      rg_clear_error(C);
    }
    covered++;
  }
  /* every elementwise op but cast (a parameter) is in the table */
  int ew = 0;
  for (int c = 0; c < RG_OP_COUNT; c++) ew += rg_opcode_family(c) == RG_FAM_ELEMWISE && c != RG_OP_CAST;
  assert_int_equal(covered, ew);
}

/* One node of every op: it type-checks, its shape inference agrees with
 * its static type, and its op reads back from its term. */
static void test_every_op(void **st) {
  rg_variable *m = in("m", RG_FLOAT32, 2, SHAPE(3, 4)), *v = in("v", RG_FLOAT32, 1, SHAPE(4));
  rg_variable *s = in("s", RG_FLOAT32, 0, NULL), *b = in("b", RG_BOOL, 2, SHAPE(3, 4));
  rg_variable *i = in("i", RG_INT64, 0, NULL), *y3 = in("y3", RG_FLOAT32, 1, SHAPE(3));
  rg_variable *B = in("B", RG_FLOAT32, 2, SHAPE(4, 5)), *Z = in("Z", RG_FLOAT32, 2, SHAPE(3, 5));
  rg_variable *one = rg_scalar_float(C, 1.0), *c = in("c", RG_BOOL, 0, NULL);
  rg_variable *k2 = rg_constant_scalar_int(C, RG_INT64, 2), *k3 = rg_constant_scalar_int(C, RG_INT64, 3);
  rg_variable *shape26 = rg_constant_data(C, RG_INT64, 1, SHAPE(2), SHAPE(2, 6));
  rg_variable *sizes = rg_constant_data(C, RG_INT64, 1, SHAPE(2), SHAPE(1, 2));
  rg_variable *p = rg_input(C, "p", rg_type_scalar(RG_FLOAT32)), *q = rg_input(C, "q", rg_type_scalar(RG_FLOAT32));
  rg_variable *pq = rg_add(p, rg_exp(q));
  const rg_op *comp = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){p, q}, 1, &pq, 0));
  rg_variable *mm = in("mm", RG_FLOAT32, 2, SHAPE(-1, -1));
  rg_variable *ms = rg_sum(mm, 1, SHAPE(0));
  const rg_op *ofg = rg_op_from_graph(C, rg_fgraph_new(C, 1, &mm, 1, &ms, 0));
  rg_variable *xt = in("xt", RG_FLOAT32, 1, SHAPE(4)), *ht = in("ht", RG_FLOAT32, 1, SHAPE(4));
  rg_variable *hn = rg_add(ht, xt);
  rg_scan_info si = {.n_seqs = 1, .n_sit_sot = 1, .truncate_gradient = -1, .seq_ntaps = (int[]){1},
                     .seq_taps = (const int64_t *[]){SHAPE(0)}};
  const rg_op *scan = rg_op_scan(C, &si, rg_fgraph_new(C, 2, (rg_variable *[]){xt, ht}, 1, &hn, 0));
  rg_index e[2] = {{RG_IDX_SLICE, 1, RG_IDX_NONE, RG_IDX_NONE}, {RG_IDX_INDEX, RG_IDX_INPUT, 0, 0}};
  bool seen[RG_OP_COUNT] = {0};
  for (int code = 0; code < RG_OP_COUNT; code++) {
    const rg_op *op = rg_op_get(code);
    rg_variable *a[5] = {m, v, m, NULL, NULL};
    int n = rgc_classes[code].min_in > 2 ? rgc_classes[code].min_in : 2;
    if (rg_opcode_family(code) == RG_FAM_ELEMWISE) n = rgc_classes[code].min_in;
    switch (code) {
    case RG_OP_AND: case RG_OP_OR: case RG_OP_XOR: a[0] = a[1] = b; break;
    case RG_OP_NOT: a[0] = b; break;
    case RG_OP_CLIP: a[1] = a[2] = s; break;
    case RG_OP_SWITCH: a[0] = b; break;
    case RG_OP_CAST: op = rg_op_cast(RG_INT8); break;
    case RG_OP_DIMSHUFFLE: op = rg_op_dimshuffle(3, SHAPE(1, -1, 0)); n = 1; break;
    case RG_OP_RESHAPE: op = rg_op_reshape(2); a[1] = shape26; break;
    case RG_OP_FLATTEN: op = rg_op_flatten(1); n = 1; break;
    case RG_OP_SHAPE: n = 1; break;
    case RG_OP_SHAPE_I: op = rg_op_shape_i(1); n = 1; break;
    case RG_OP_ALLOC: a[0] = s, a[1] = k2, a[2] = i, n = 3; break;
    case RG_OP_ALLOC_EMPTY: op = rg_op_alloc_empty(RG_UINT8); a[0] = i, a[1] = k3; break;
    case RG_OP_MAKE_VECTOR: op = rg_op_make_vector(RG_INT64); a[0] = i, a[1] = k2; break;
    case RG_OP_JOIN: op = rg_op_join(0); a[1] = m; break;
    case RG_OP_SPLIT: op = rg_op_split(0, 2); a[1] = sizes; a[0] = in("w", RG_FLOAT32, 2, SHAPE(3, -1)); break;
    case RG_OP_SUBTENSOR: op = rg_op_subtensor(code, 2, e); a[1] = i; break;
    case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: op = rg_op_subtensor(code, 2, e); a[1] = in("yy", RG_FLOAT32, 1, SHAPE(2)); a[2] = i; n = 3; break;
    case RG_OP_ARANGE: op = rg_op_arange(RG_INT32); a[0] = k2, a[1] = rg_scalar_int(C, 11), a[2] = k3; break;
    case RG_OP_SOFTMAX: case RG_OP_LOG_SOFTMAX: op = rg_op_reduce(code, 1, SHAPE(1)); n = 1; break;
    case RG_OP_DOT: a[0] = m, a[1] = B; break;
    case RG_OP_OUTER: a[0] = y3, a[1] = v; break;
    case RG_OP_GEMM: a[0] = Z, a[1] = one, a[2] = m, a[3] = B, a[4] = one; break;
    case RG_OP_GEMV: a[0] = y3, a[1] = one, a[2] = m, a[3] = v, a[4] = one; break;
    case RG_OP_GER: a[0] = m, a[1] = one, a[2] = y3, a[3] = v; break;
    case RG_OP_BATCHED_DOT: a[0] = in("bx", RG_FLOAT32, 3, SHAPE(2, 3, 4)), a[1] = in("by", RG_FLOAT32, 3, SHAPE(-1, 4, 5)); break;
    case RG_OP_IFELSE: a[0] = c, a[1] = m, a[2] = m, n = 3; break;
    case RG_OP_COMPOSITE: op = comp; a[0] = m, a[1] = v; break;
    case RG_OP_OP_FROM_GRAPH: op = ofg; a[0] = m, n = 1; break;
    case RG_OP_SCAN: op = scan; a[0] = k3, a[1] = m, a[2] = v, n = 3; break;
    case RG_OP_OPAQUE: op = rg_op_opaque("f", 1, NULL); break;
    default:
      if (rg_opcode_family(code) == RG_FAM_REDUCE) op = rg_op_reduce(code, 1, SHAPE(1)), n = 1;
      break;
    }
    rg_node *node = rg_make_node(C, op, n, a);
    if (!node) fail_msg("%s: %s", rg_opcode_name(code), rg_errmsg(C));
    assert_int_equal(node->op->code, code);
    seen[code] = true;
    for (int o = 0; o < node->nout; o++) {
      rg_variable **sh = rg_infer_shape(C, node, o);
      if (!sh) fail_msg("%s: infer_shape: %s", rg_opcode_name(code), rg_errmsg(C));
      const rg_type *t = node->outputs[o]->type;
      for (int d = 0; d < t->ndim; d++) {
        int64_t k;
        if (t->shape[d] >= 0 && (!rg_constant_get_i64(sh[d], &k) || k != t->shape[d]))
          fail_msg("%s: output %d dim %d: static %lld, inferred %s", rg_opcode_name(code), o, d,
                   (long long)t->shape[d], rg_pprint_str(sh[d]));
        assert_int_equal(sh[d]->type->dtype, RG_INT64);
      }
    }
    if (code != RG_OP_OPAQUE) {
      const rg_op *back = rg_op_from_term(C, rg_op_term(node->op));
      if (!back || !rg_op_equal(back, node->op)) fail_msg("%s: op term does not read back", rg_opcode_name(code));
    }
  }
  for (int code = 0; code < RG_OP_COUNT; code++) assert_true(seen[code]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_class_table_matches_enum),
      cmocka_unit_test(test_op_terms_round_trip),
      cmocka_unit_test(test_op_term_errors),
      cmocka_unit_test(test_view_destroy_maps),
      cmocka_unit_test(test_broadcasting),
      cmocka_unit_test(test_dtype_rules),
      cmocka_unit_test(test_nep50_literals),
      cmocka_unit_test(test_inplace_elementwise),
      cmocka_unit_test(test_sticky_null),
      cmocka_unit_test(test_devices),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_blas_types),
      cmocka_unit_test(test_batched_dot_types),
      cmocka_unit_test(test_ifelse),
      cmocka_unit_test(test_opaque),
      cmocka_unit_test(test_elementwise_dtype_table),
      cmocka_unit_test(test_every_op),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
