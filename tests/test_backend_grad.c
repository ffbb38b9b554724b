/*
 * test_backend_grad.c — gradients: rg_grad's graphs checked numerically
 * with rg_verify_grad for every differentiable op (float64 and float32,
 * broadcasting in every position), and the driver's own behaviour: types
 * of the gradients, a value used twice, disconnected and integer inputs,
 * constants, known gradients, bad costs, and an MLP whose gradients agree
 * with a backward pass written by hand in this file.
 *
 * Op cases are small graph files: the first output is differentiated with
 * respect to every float input, at random points in [0.5, 1.5) (so logs,
 * roots and powers are defined and kinks are far away).
 */
#include "tests/testutil.h"

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "relgraph/scan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

static uint64_t rng_state = 12345;
static double unit(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static rg_tensor *random_value(const rg_type *t) {
  int64_t shape[RG_MAX_NDIM];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d] >= 0 ? t->shape[d] : 3;
  rg_tensor *v = rg_tensor_new(t->dtype, t->ndim, shape);
  int64_t n = rg_tensor_numel(v);
  for (int64_t i = 0; i < n; i++)
    rg_tensor_set_f64(v, i, rg_dtype_is_float(t->dtype) ? 0.5 + unit() : (double)(i % 2));
  return v;
}

static rg_fgraph *read_graph(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s\n%s", rg_errmsg(C), text);
  return fg;
}

/* Verifies the gradient of the graph's first output at a random point. */
static void verify_text(const char *text) {
  rg_fgraph *fg = read_graph(text);
  int nin = rg_fgraph_ninputs(fg);
  rg_variable **ins = rg_gc_alloc((size_t)(nin + 1) * sizeof *ins);
  rg_tensor **vals = calloc((size_t)(nin + 1), sizeof *vals);
  for (int i = 0; i < nin; i++) {
    ins[i] = rg_fgraph_input(fg, i);
    vals[i] = random_value(ins[i]->type);
  }
  rg_variable *out = rg_fgraph_output(fg, 0);
  rg_fgraph_release(fg);
  rg_verify_report rep;
  rg_clear_error(C);
  int rc = rg_verify_grad(C, nin, ins, out, vals, NULL, &rep);
  for (int i = 0; i < nin; i++) rg_tensor_free(vals[i]);
  free(vals);
  if (rc != RG_OK) fail_msg("%s\n%s", rg_errmsg(C), text);
  assert_true(rep.checked > 0);
}

#define M34 "(input x float64 (3 4)) "
#define V4 "(input v float64 (4)) "
#define V3 "(input u float64 (3)) "
#define S "(input s float64 ()) "
#define G(decls, expr) "(graph " decls "(output " expr "))"

/* Elementwise ops, with broadcasting in each position. */
static const char *const ew_cases[] = {
    G(M34 V4, "(add x v)"), G(M34 V4 S, "(add v x s)"), G(M34 V4, "(mul x v x)"),
    G(M34 V4, "(sub v x)"), G(M34 V4, "(true_div x v)"), G(M34 V4, "(true_div v x)"),
    G(M34 V4, "(mod x v)"), G(M34, "(neg x)"), G(M34, "(abs (sub x 1.0))"), G(M34, "(exp x)"),
    G(M34, "(log x)"), G(M34, "(log1p x)"), G(M34, "(expm1 x)"), G(M34, "(sqrt x)"),
    G(M34, "(sqr x)"), G(M34 V4, "(pow x v)"), G(M34 S, "(pow s x)"), G(M34, "(sin x)"),
    G(M34, "(cos x)"), G(M34, "(tanh x)"), G(M34, "(sigmoid x)"), G(M34, "(softplus x)"),
    G(M34, "(erf x)"), G(M34 V4, "(maximum x v)"), G(M34 V4, "(minimum v x)"),
    G(M34, "(mul x (floor (mul x 3.0)))"), G(M34, "(add x (ceil x) (round x) (sign x))"),
    G(M34 V4, "(clip x 0.8 v)"), G(M34 V4, "(switch (lt x v) x (mul v 2.0))"),
    G("(input x float32 (3 4)) ", "(mul ((cast float64) x) 2.0)"), G(M34, "(identity x)"),
    G(M34 S, "(second x s)"), G(M34 V4, "(int_div x v)"),
};

static void test_elementwise(void **st) {
  for (size_t i = 0; i < sizeof ew_cases / sizeof *ew_cases; i++) verify_text(ew_cases[i]);
}

static const char *const shape_cases[] = {
    G(M34, "((dimshuffle 1 0) x)"), G(M34, "(mul ((dimshuffle x 1 0) x) 2.0)"),
    G("(input x float64 (3 1 4)) ", "((dimshuffle 2 0) x)"),
    G(M34, "((reshape 1) x (constant int64 (1) (12)))"), G(M34, "((flatten 1) x)"),
    G(S, "(alloc s 3 2)"), G(V4, "(alloc v 3 4)"), G(M34 V4, "((join 0) x ((dimshuffle x 0) v))"),
    G(M34, "(nth 1 ((split 1 2) x (constant int64 (2) (1 3))))"),
    G(M34, "(add (nth 0 ((split 1 2) x (constant int64 (2) (1 3)))) 1.0)"),
    G(M34, "((subtensor (1 3) 0) x)"), G(M34, "((subtensor (none none -1) (1 none)) x)"),
    G(M34 "(input i int64 ()) ", "((subtensor ? (1 none)) x i)"),
    G(M34 "(input y float64 (2 4)) ", "((inc_subtensor (0 2)) x y)"),
    G(M34 V4, "((set_subtensor 1) x v)"),
    G(S "(input t float64 ()) ", "((make_vector float64) s t s)"),
};

static void test_structure(void **st) {
  for (size_t i = 0; i < sizeof shape_cases / sizeof *shape_cases; i++) verify_text(shape_cases[i]);
}

static const char *const reduce_cases[] = {
    G(M34, "(sum x)"), G(M34, "((sum 0) x)"), G(M34, "((sum 1) x)"), G(M34, "((prod 1) x)"),
    G(M34, "(prod x)"), G(M34, "((max 0) x)"), G(M34, "(max x)"), G(M34, "((min 1) x)"),
    G("(input x float64 (2 3 4)) ", "((max 0 2) x)"), G(M34, "((mean 0) x)"), G(M34, "(mean x)"),
    G(M34, "((softmax 1) x)"), G(M34, "((softmax 0) x)"), G(M34, "((log_softmax 1) x)"),
};

static void test_reductions(void **st) {
  for (size_t i = 0; i < sizeof reduce_cases / sizeof *reduce_cases; i++) verify_text(reduce_cases[i]);
}

static const char *const blas_cases[] = {
    G(M34 "(input y float64 (4 2)) ", "(dot x y)"), G(M34 V4, "(dot x v)"),
    G(M34 V3, "(dot u x)"), G(V4 "(input w float64 (4)) ", "(dot v w)"), G(V3 V4, "(outer u v)"),
    G("(input z float64 (3 2)) (input a float64 ()) " M34 "(input y float64 (4 2)) (input b float64 ()) ",
      "(gemm z a x y b)"),
    G(V3 "(input a float64 ()) " M34 V4 "(input b float64 ()) ", "(gemv u a x v b)"),
    G(M34 "(input a float64 ()) " V3 V4, "(ger x a u v)"),
};

static void test_linear_algebra(void **st) {
  for (size_t i = 0; i < sizeof blas_cases / sizeof *blas_cases; i++) verify_text(blas_cases[i]);
}

static void test_control_and_inner_graphs(void **st) {
  verify_text(G(M34 V4 "(input c bool ()) ", "(nth 0 (ifelse c (exp x) (mul x v)))"));
  verify_text(G(M34 V4 "(input c bool ()) ", "(nth 1 (ifelse (not c) (exp x) x (mul x v) (sin x)))"));
  /* (c is false at the points drawn) nested, under a guard, a value in
   * both branches and outside, two outputs of one ifelse */
  verify_text(G(M34 V4 "(input c bool ()) ", "(nth 0 (ifelse c (exp x) (nth 0 (ifelse (not c) (mul x v) (cos x)))))"));
  verify_text(G(M34 V4 "(input c bool ()) ",
                "(nth 0 (ifelse (not c) (mul (nth 0 (ifelse c (exp x) (cos x))) (sin v)) (add x v)))"));
  verify_text(G(M34 V4 "(input c bool ()) ", "(add (nth 0 (ifelse (not c) (exp x) (sin x))) (mul x x))"));
  verify_text(G(M34 V4 "(input c bool ()) ",
                "(mul (nth 0 (ifelse (not c) (exp x) (tanh v) (sin x) v)) (nth 1 (ifelse (not c) (exp x) (tanh v) (sin x) v)))"));
  verify_text(G(M34 V4, "((composite (graph (input a float64 ()) (input b float64 ()) "
                        "(output (add (mul a b) (exp a))))) x v)"));
  verify_text(G(M34 V4, "((op_from_graph (graph (input a float64 (3 4)) (input b float64 (4)) "
                        "(output (sum (dot a b))))) x v)"));
}

/* The gradient of an ifelse is the gradient of the branch taken, and the
 * lazy VM computes only that branch's forward values and gradient, after
 * the standard rewrites too. */
static void test_ifelse_gradient_lazy(void **st) {
  rg_fgraph *fg = read_graph("(graph (input c bool ()) (input x float64 (3)) (input y float64 (3)) "
                             "(define out (ifelse c (exp (sin x)) (neg y))) (define cost (sum (mul out out))) "
                             "(define (gx gy) (grad cost x y)) (output gx) (output gy))");
  const char *queries[] = {"none", "fast_run -fusion"};
  rg_tensor *tx = rg_tensor_new(RG_FLOAT64, 1, (int64_t[]){3}), *ty = rg_tensor_new(RG_FLOAT64, 1, (int64_t[]){3});
  for (int i = 0; i < 3; i++) rg_tensor_set_f64(tx, i, 0.1 * (i + 1)), rg_tensor_set_f64(ty, i, i + 1.0);
  rg_tensor *yes = rg_tensor_scalar_f64(RG_BOOL, 1), *no = rg_tensor_scalar_f64(RG_BOOL, 0);
  for (int q = 0; q < 2; q++) {
    rg_compile_opts o = {.mode = {.query = queries[q]}, .profile = true};
    rg_variable *outs[] = {rg_fgraph_output(fg, 0), rg_fgraph_output(fg, 1)};
    rg_function *f = rg_compile(C, 3, (rg_variable *[]){rg_fgraph_input(fg, 0), rg_fgraph_input(fg, 1),
                                                       rg_fgraph_input(fg, 2)}, 2, outs, &o);
    assert_non_null(f);
    rg_tensor *res[2];
    assert_int_equal(rg_function_call(f, (rg_tensor *[]){no, tx, ty}, res), RG_OK);
    for (int i = 0; i < 3; i++) {
      assert_float_equal(rg_tensor_get_f64(res[0], i), 0, 0);
      assert_float_equal(rg_tensor_get_f64(res[1], i), 2 * (i + 1.0), 1e-12);
    }
    rg_tensor_free(res[0]), rg_tensor_free(res[1]);
    assert_int_equal(tu_calls_of(f, "sin") + tu_calls_of(f, "exp") + tu_calls_of(f, "cos"), 0);
    assert_int_equal(rg_function_call(f, (rg_tensor *[]){yes, tx, ty}, res), RG_OK);
    for (int i = 0; i < 3; i++) {
      double x = 0.1 * (i + 1);
      assert_float_equal(rg_tensor_get_f64(res[0], i), 2 * exp(2 * sin(x)) * cos(x), 1e-12);
      assert_float_equal(rg_tensor_get_f64(res[1], i), 0, 0);
    }
    rg_tensor_free(res[0]), rg_tensor_free(res[1]);
    assert_int_equal(tu_calls_of(f, "sin"), 1);
    assert_int_equal(tu_calls_of(f, "cos"), 1);
    rg_function_free(f);
  }
  rg_tensor_free(tx), rg_tensor_free(ty), rg_tensor_free(yes), rg_tensor_free(no);
}

/* float32 inputs are checked with float32 tolerances. */
static void test_float32(void **st) {
  verify_text(G("(input x float32 (3 4)) (input v float32 (4)) ", "(tanh (add (mul x v) v))"));
  verify_text(G("(input x float32 (3 4)) (input y float32 (4 2)) ", "((softmax 1) (dot x y))"));
  verify_text(G("(input x float32 (3 4)) ", "((sum 1) (sigmoid x))"));
}

/* prod's gradient with zeros: one zero in a slice gets the product of the
 * others, two zeros give zeros. */
static void test_prod_with_zeros(void **st) {
  rg_fgraph *fg = read_graph(G("(input x float64 (2 3)) ", "((prod 1) x)"));
  rg_variable *x = rg_fgraph_input(fg, 0), *out = rg_fgraph_output(fg, 0);
  rg_fgraph_release(fg);
  double xv[6] = {2, 0, 3, 0, 5, 0};
  rg_tensor *in = rg_tensor_from_data(RG_FLOAT64, 2, (int64_t[]){2, 3}, xv);
  assert_int_equal(rg_verify_grad(C, 1, &x, out, &in, NULL, NULL), RG_OK);
  rg_variable *cost = rg_sum(out, -1, NULL), *g;
  assert_int_equal(rg_grad(C, cost, 1, &x, NULL, &g), RG_OK);
  rg_function *f = rg_compile(C, 1, &x, 1, &g, NULL);
  rg_tensor *res;
  assert_int_equal(rg_function_call(f, &in, &res), RG_OK);
  double want[6] = {0, 6, 0, 0, 0, 0};
  for (int i = 0; i < 6; i++) assert_true(rg_tensor_get_f64(res, i) == want[i]);
  rg_tensor_free(res);
  rg_tensor_free(in);
  rg_function_free(f);
}

/* ------------------------------------------------------------------ the driver */

static rg_variable *input(const char *name, rg_dtype dt, int nd, const int64_t *shape) {
  return rg_input(C, name, rg_type_new(dt, nd, shape));
}

/* A bias added to a matrix: its gradient is the column sums, with the
 * bias's own type (rank 2, broadcastable first dimension, too). */
static void test_broadcast_types(void **st) {
  rg_variable *x = input("x", RG_FLOAT64, 2, (int64_t[]){3, 4});
  rg_variable *b = input("b", RG_FLOAT64, 1, (int64_t[]){4});
  rg_variable *b2 = input("b2", RG_FLOAT64, 2, (int64_t[]){1, 4});
  rg_variable *s = input("s", RG_FLOAT32, 0, NULL);
  rg_variable *cost = rg_sum(rg_mul(rg_add(rg_add(x, b), b2), s), -1, NULL), *g[4];
  assert_int_equal(rg_grad(C, cost, 4, (rg_variable *[]){x, b, b2, s}, NULL, g), RG_OK);
  for (int i = 0; i < 4; i++) {
    rg_variable *w = (rg_variable *[]){x, b, b2, s}[i];
    assert_true(rg_type_equal(g[i]->type, w->type));
  }
  rg_function *f = rg_compile(C, 4, (rg_variable *[]){x, b, b2, s}, 1, &g[1], NULL);
  rg_tensor *vals[4] = {rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){3, 4}), rg_tensor_new(RG_FLOAT64, 1, (int64_t[]){4}),
                        rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){1, 4}), rg_tensor_scalar_f64(RG_FLOAT32, 2)};
  rg_tensor *res;
  assert_int_equal(rg_function_call(f, vals, &res), RG_OK);
  for (int j = 0; j < 4; j++) assert_true(rg_tensor_get_f64(res, j) == 6.0); /* 3 rows x s */
  rg_tensor_free(res);
  for (int i = 0; i < 4; i++) rg_tensor_free(vals[i]);
  rg_function_free(f);
}

/* A value used twice: the gradients add. */
static void test_value_used_twice(void **st) {
  rg_variable *x = input("x", RG_FLOAT64, 1, (int64_t[]){3});
  rg_variable *e = rg_exp(x), *cost = rg_sum(rg_add(rg_mul(e, e), e), -1, NULL), *g;
  assert_int_equal(rg_grad(C, cost, 1, &x, NULL, &g), RG_OK);
  rg_function *f = rg_compile(C, 1, &x, 1, &g, NULL);
  double xv[3] = {0, 1, -1};
  rg_tensor *in = rg_tensor_from_data(RG_FLOAT64, 1, (int64_t[]){3}, xv), *res;
  assert_int_equal(rg_function_call(f, &in, &res), RG_OK);
  for (int i = 0; i < 3; i++) {
    double ex = exp(xv[i]);
    assert_true(fabs(rg_tensor_get_f64(res, i) - (2 * ex * ex + ex)) < 1e-12);
  }
  rg_tensor_free(res);
  rg_tensor_free(in);
  rg_function_free(f);
}

/* A wrt computed from another wrt: each gets its total derivative, the
 * paths through the other included (Aesara's grad does the same).  With
 * s = y*y and cost = sum(exp(s) + y): d/ds = exp(s), d/dy = 1 + 2y exp(y^2);
 * and with the cost reaching y only through s, y is still connected. */
static void test_wrt_computed_from_wrt(void **st) {
  rg_variable *y = input("y", RG_FLOAT64, 1, (int64_t[]){3});
  rg_variable *s = rg_mul(y, y);
  rg_variable *costs[2] = {rg_sum(rg_add(rg_exp(s), y), -1, NULL), rg_sum(rg_exp(s), -1, NULL)};
  double yv[3] = {0.3, -0.5, 0.8};
  rg_tensor *in = rg_tensor_from_data(RG_FLOAT64, 1, (int64_t[]){3}, yv);
  for (int c = 0; c < 2; c++)
    for (int order = 0; order < 2; order++) { /* (s y) and (y s) */
      rg_variable *wrt[2] = {order ? y : s, order ? s : y}, *g[2];
      assert_int_equal(rg_grad(C, costs[c], 2, wrt, NULL, g), RG_OK);
      rg_function *f = rg_compile(C, 1, &y, 2, g, NULL);
      assert_non_null(f);
      rg_tensor *res[2];
      assert_int_equal(rg_function_call(f, &in, res), RG_OK);
      rg_tensor *gs = res[order ? 1 : 0], *gy = res[order ? 0 : 1];
      for (int i = 0; i < 3; i++) {
        double e = exp(yv[i] * yv[i]);
        assert_true(fabs(rg_tensor_get_f64(gs, i) - e) < 1e-12);
        assert_true(fabs(rg_tensor_get_f64(gy, i) - ((c == 0 ? 1 : 0) + 2 * yv[i] * e)) < 1e-12);
      }
      rg_tensor_free(res[0]), rg_tensor_free(res[1]);
      rg_function_free(f);
    }
  rg_tensor_free(in);
}

static void test_disconnected_and_integers(void **st) {
  rg_variable *x = input("x", RG_FLOAT64, 1, (int64_t[]){3}), *y = input("y", RG_FLOAT64, 1, (int64_t[]){3});
  rg_variable *k = input("k", RG_INT64, 1, (int64_t[]){3});
  rg_variable *cost = rg_sum(rg_mul(x, k), -1, NULL), *g[2];
  rg_clear_error(C);
  assert_int_equal(rg_grad(C, cost, 2, (rg_variable *[]){x, y}, NULL, g), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "the cost does not depend on 'y'"));
  rg_clear_error(C);
  assert_int_equal(rg_grad(C, cost, 1, &k, NULL, g), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "an integer or boolean value has no gradient"));
  rg_grad_opts zero = {.disconnected = RG_GRAD_DISCONNECTED_ZERO}, null = {.disconnected = RG_GRAD_DISCONNECTED_NULL};
  assert_int_equal(rg_grad(C, cost, 2, (rg_variable *[]){x, y}, &zero, g), RG_OK);
  assert_true(rg_type_equal(g[1]->type, y->type));
  assert_int_equal(rg_grad(C, cost, 2, (rg_variable *[]){x, y}, &null, g), RG_OK);
  assert_non_null(g[0]);
  assert_null(g[1]);
}

static void test_bad_costs(void **st) {
  rg_variable *x = input("x", RG_FLOAT64, 1, (int64_t[]){3}), *g;
  rg_clear_error(C);
  assert_int_equal(rg_grad(C, rg_exp(x), 1, &x, NULL, &g), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "the cost must be a scalar, got float64 (3)"));
  rg_variable *k = input("k", RG_INT64, 0, NULL);
  rg_clear_error(C);
  assert_int_equal(rg_grad(C, k, 1, &k, NULL, &g), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "the cost must be a float"));
  rg_clear_error(C);
  assert_int_equal(rg_grad(C, NULL, 1, &x, NULL, &g), RG_ERR_TYPE);
  /* an opaque op on the way has no gradient */
  rg_variable *o = rg_apply(C, rg_op_opaque("mystery", 1, NULL), 1, &x);
  rg_clear_error(C);
  assert_int_equal(rg_grad(C, rg_sum(o, -1, NULL), 1, &x, NULL, &g), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "op mystery has no gradient"));
  /* an option value outside its enum is an error, not the default */
  rg_clear_error(C);
  rg_grad_opts bad = {.disconnected = 7};
  assert_int_equal(rg_grad(C, rg_sum(x, -1, NULL), 1, &x, &bad, &g), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "grad: disconnected is 7"));
}

/* The value of scalar y at scalar x = v. */
static double scalar_at(rg_variable *x, rg_variable *y, double v) {
  rg_function *f = rg_compile(C, 1, &x, 1, &y, NULL);
  rg_tensor *in = rg_tensor_scalar_f64(RG_FLOAT64, v), *res;
  assert_int_equal(rg_function_call(f, &in, &res), RG_OK);
  double r = rg_tensor_get_f64(res, 0);
  rg_tensor_free(res);
  rg_tensor_free(in);
  rg_function_free(f);
  return r;
}

/* Values treated as constants stop the gradient; known gradients start it. */
static void test_constants_and_known(void **st) {
  rg_variable *x = input("x", RG_FLOAT64, 0, NULL);
  rg_variable *h = rg_mul(x, x), *cost = rg_mul(h, x), *g;
  rg_grad_opts o = {.nconsts = 1, .consts = &h};
  assert_int_equal(rg_grad(C, cost, 1, &x, &o, &g), RG_OK); /* d(h x)/dx with h fixed = h */
  assert_true(scalar_at(x, g, 3) == 9.0);
  /* a wrt among the constants still gets its own gradient (Aesara's
   * consider_constant stops the walk there, not the gradient): d(h x)/dh */
  assert_int_equal(rg_grad(C, cost, 1, &h, &o, &g), RG_OK);
  assert_true(scalar_at(x, g, 3) == 3.0);
  /* start from a given gradient of h: dh/dx * 10 */
  rg_variable *ten = rg_constant_scalar(C, RG_FLOAT64, 10);
  rg_grad_opts k = {.nknown = 1, .known = &h, .known_grads = &ten};
  assert_int_equal(rg_grad(C, NULL, 1, &x, &k, &g), RG_OK);
  assert_true(scalar_at(x, g, 3) == 60.0);
  /* a known gradient must fit its variable; the list must be there */
  rg_variable *v3 = input("v3", RG_FLOAT64, 1, (int64_t[]){3}), *s3 = rg_sin(v3);
  rg_variable *g4 = input("g4", RG_FLOAT64, 1, (int64_t[]){4});
  rg_grad_opts bad = {.nknown = 1, .known = &s3, .known_grads = &g4};
  assert_int_not_equal(rg_grad(C, rg_sum(v3, -1, NULL), 1, &v3, &bad, &g), RG_OK);
  assert_string_equal(rg_errmsg(C), "grad: the known gradient of known variable 0 is float64 (4), the variable is float64 (3)");
  rg_grad_opts none = {.nknown = 1};
  assert_int_not_equal(rg_grad(C, NULL, 1, &v3, &none, &g), RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "1 known variables and no list of them"));
  rg_grad_opts no_consts = {.nconsts = 2};
  assert_int_not_equal(rg_grad(C, rg_sum(v3, -1, NULL), 1, &v3, &no_consts, &g), RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "2 constants and no list of them"));
  assert_int_not_equal(rg_grad(C, rg_sum(v3, -1, NULL), 1, NULL, NULL, &g), RG_OK);
  assert_int_not_equal(rg_grad(C, rg_sum(v3, -1, NULL), 1, &v3, NULL, NULL), RG_OK);
}

/* ------------------------------------------------------------------ an MLP against a hand-written backward pass */

enum { NB = 5, NI = 4, NH = 3, NO = 2 };

/* loss = sum(softmax-free squared error): y = W2 tanh(W1 x + b1) + b2 */
static void mlp_by_hand(const double *X, const double *W1, const double *b1, const double *W2,
                        const double *b2, const double *T, double *gW1, double *gb1, double *gW2,
                        double *gb2) {
  memset(gW1, 0, sizeof(double) * NI * NH), memset(gb1, 0, sizeof(double) * NH);
  memset(gW2, 0, sizeof(double) * NH * NO), memset(gb2, 0, sizeof(double) * NO);
  for (int n = 0; n < NB; n++) {
    double h[NH], dy[NO], dh[NH];
    for (int j = 0; j < NH; j++) {
      double a = b1[j];
      for (int i = 0; i < NI; i++) a += X[n * NI + i] * W1[i * NH + j];
      h[j] = tanh(a);
    }
    for (int k = 0; k < NO; k++) {
      double y = b2[k];
      for (int j = 0; j < NH; j++) y += h[j] * W2[j * NO + k];
      dy[k] = 2 * (y - T[n * NO + k]);
      gb2[k] += dy[k];
      for (int j = 0; j < NH; j++) gW2[j * NO + k] += h[j] * dy[k];
    }
    for (int j = 0; j < NH; j++) {
      double s = 0;
      for (int k = 0; k < NO; k++) s += W2[j * NO + k] * dy[k];
      dh[j] = s * (1 - h[j] * h[j]);
      gb1[j] += dh[j];
      for (int i = 0; i < NI; i++) gW1[i * NH + j] += X[n * NI + i] * dh[j];
    }
  }
}

static void test_mlp_against_hand_written(void **st) {
  const char *text = "(graph (input X float64 (5 4)) (input W1 float64 (4 3)) (input b1 float64 (3)) "
                     "(input W2 float64 (3 2)) (input b2 float64 (2)) (input T float64 (5 2)) "
                     "(define y (add (dot (tanh (add (dot X W1) b1)) W2) b2)) "
                     "(define loss (sum (sqr (sub y T)))) "
                     "(define (gW1 gb1 gW2 gb2) (grad loss W1 b1 W2 b2)) "
                     "(output gW1) (output gb1) (output gW2) (output gb2))";
  rg_fgraph *fg = read_graph(text);
  rg_variable *ins[6], *outs[4];
  for (int i = 0; i < 6; i++) ins[i] = rg_fgraph_input(fg, i);
  for (int k = 0; k < 4; k++) outs[k] = rg_fgraph_output(fg, k);
  rg_fgraph_release(fg);
  rg_function *f = rg_compile(C, 6, ins, 4, outs, NULL);
  assert_non_null(f);
  rg_tensor *vals[6], *res[4];
  for (int i = 0; i < 6; i++) vals[i] = random_value(ins[i]->type);
  assert_int_equal(rg_function_call(f, vals, res), RG_OK);
  double p[6][20], want[4][20];
  for (int i = 0; i < 6; i++)
    for (int64_t j = 0; j < rg_tensor_numel(vals[i]); j++) p[i][j] = rg_tensor_get_f64(vals[i], j);
  mlp_by_hand(p[0], p[1], p[2], p[3], p[4], p[5], want[0], want[1], want[2], want[3]);
  for (int k = 0; k < 4; k++)
    for (int64_t j = 0; j < rg_tensor_numel(res[k]); j++)
      assert_true(fabs(rg_tensor_get_f64(res[k], j) - want[k][j]) < 1e-10);
  for (int k = 0; k < 4; k++) rg_tensor_free(res[k]);
  for (int i = 0; i < 6; i++) rg_tensor_free(vals[i]);
  rg_function_free(f);
}

/* The gradient shares forward values with the forward graph: after the
 * standard rewrites, tanh and the matrix product are computed once. */
static void test_forward_values_shared(void **st) {
  rg_fgraph *fg = read_graph("(graph (input X float64 (5 4)) (input W float64 (4 3)) (input b float64 (3)) "
                             "(define loss (sum (tanh (add (dot X W) b)))) (define (gW gb) (grad loss W b)) "
                             "(output loss) (output gW) (output gb))");
  rg_rewrite_run *run = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run -fusion"), NULL);
  assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
  rg_variable *X = rg_fgraph_input(fg, 0), *W = rg_fgraph_input(fg, 1);
  int tanhs = 0, products = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) {
    tanhs += n->op->code == RG_OP_TANH;
    bool uses_x = false, uses_w = false;
    for (int i = 0; i < n->nin; i++) uses_x |= n->inputs[i] == X, uses_w |= n->inputs[i] == W;
    products += uses_x && uses_w; /* X @ W, as dot or gemm */
  }
  assert_int_equal(tanhs, 1);
  assert_int_equal(products, 1);
}

/* A bad (grad ...) in a graph file names its place. */
static void test_grad_form_errors(void **st) {
  const char *bad[][2] = {
      {"(graph (input x float64 (3)) (output (grad (exp x) x)))", "case.graph:1:38: grad: the cost must be a scalar"},
      {"(graph (input x float64 ()) (input y float64 ()) (output (grad (exp x) y)))",
       "grad: the cost does not depend on 'y'"},
      {"(graph (input x float64 ()) (output (grad x)))", "expected (grad COST WRT ...)"},
      {"(graph (input x float64 ()) (input y float64 ()) (output (grad (mul x y) x y)))",
       "the expression has 2 outputs"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    rg_clear_error(C);
    assert_null(rg_graph_read(C, "case.graph", bad[i][0], strlen(bad[i][0])));
    if (!strstr(rg_errmsg(C), bad[i][1])) fail_msg("%s\nwanted: %s", rg_errmsg(C), bad[i][1]);
  }
}

/* ------------------------------------------------------------------ through Scan */

#define SCAN_G(decls, body) "(graph " decls body ")"

/* Every kind of scan variable, differentiated against finite differences
 * (the first output is the cost). */
static const char *const scan_cases[] = {
    /* sit-sot with a non-sequence and a nit-sot beside it (an RNN) */
    SCAN_G("(input x float64 (5 3 4)) (input h0 float64 (3 6)) (input W float64 (6 6)) (input U float64 (4 6)) ",
           "(define (hs sums) (scan (lambda (x_t h W) (define h2 (tanh (add (dot h W) (dot x_t U)))) "
           "(values h2 (sum h2))) (sequences x) (outputs-info h0 none) (non-sequences W))) "
           "(output (add (sum (mul hs hs)) (sum sums)))"),
    /* mit-sot with taps -3 -1 */
    SCAN_G("(input i0 float64 (3 2)) (input a float64 (2)) ",
           "(define f (scan (lambda (p q a) (add (mul p a) (tanh q))) (outputs-info (i0 (taps -3 -1))) "
           "(non-sequences a) (n-steps 6))) (output (sum (mul f f)))"),
    /* mit-sots without tap -1: the backward step reads each state at its
     * own row (taps -2; -3 -2), with the non-sequence's gradient needing it */
    SCAN_G("(input i0 float64 (2)) (input w float64 ()) ",
           "(define f (scan (lambda (s w) (tanh (mul s w))) (outputs-info (i0 (taps -2))) "
           "(non-sequences w) (n-steps 5))) (output (sum (mul f f)))"),
    SCAN_G("(input i0 float64 (3 2)) (input w float64 (2)) ",
           "(define f (scan (lambda (p q w) (tanh (add (mul p w) (mul q q) 0.1))) (outputs-info (i0 (taps -3 -2))) "
           "(non-sequences w) (n-steps 6))) (output (sum (mul f f)))"),
    /* sequence taps -1 1 and a second sequence */
    SCAN_G("(input x float64 (9 2)) (input y float64 (7 2)) (input h0 float64 (2)) ",
           "(define hs (scan (lambda (xm xp y_t h) (add (mul h (tanh xm)) (mul xp y_t))) "
           "(sequences (x (taps -1 1)) y) (outputs-info h0))) (output (sum (mul hs hs)))"),
    /* go_backwards, a weighted cost */
    SCAN_G("(input x float64 (6 2)) (input h0 float64 (2)) ",
           "(define hs (scan (lambda (x_t h) (tanh (add h x_t))) (sequences x) (outputs-info h0) "
           "(go-backwards #t))) (output (sum (mul hs (constant float64 (2) (1 -2)))))"),
    /* nit-sot only */
    SCAN_G("(input x float64 (6 2)) (input w float64 (2)) ",
           "(define ys (scan (lambda (x_t w) (exp (mul x_t w))) (sequences x) (outputs-info none) "
           "(non-sequences w))) (output (sum (mul ys ys)))"),
    /* a while-loop: differentiated over the steps it ran */
    SCAN_G("(input h0 float64 ()) (input w float64 ()) ",
           "(define hs (scan (lambda (h w) (define h2 (mul h (add w 1.0))) (values h2 (until (gt h2 4.0)))) "
           "(outputs-info h0) (non-sequences w) (n-steps 20))) (output (sum hs))"),
    /* only the last state used */
    SCAN_G("(input h0 float64 (3)) (input w float64 (3)) ",
           "(define hs (scan (lambda (h w) (sin (mul h w))) (outputs-info h0) (non-sequences w) (n-steps 5))) "
           "(output (sum ((subtensor -1) hs)))"),
    /* float32: the LSTM cell */
    SCAN_G("(input x float32 (3 2 3)) (input h0 float32 (2 4)) (input c0 float32 (2 4)) (input Wi float32 (3 16)) "
           "(input Wh float32 (4 16)) (input b float32 (16)) ",
           "(define (hs cs) (scan (lambda (x_t h c) (define gates (add (dot x_t Wi) (dot h Wh) b)) "
           "(define (gi gf gg go) ((split 1 4) gates (constant int64 (4) (4 4 4 4)))) "
           "(define c2 (add (mul (sigmoid gf) c) (mul (sigmoid gi) (tanh gg)))) "
           "(values (mul (sigmoid go) (tanh c2)) c2)) (sequences x) (outputs-info h0 c0))) "
           "(output (add (mean hs) (mean cs)))"),
    /* second derivatives through a mit-sot (the loop's gradient has
     * mit-mots), checked by differentiating them once more: third order */
    SCAN_G("(input i0 float64 (2)) (input a float64 ()) ",
           "(define f (scan (lambda (p q a) (add (mul p a) (mul (tanh q) p))) (outputs-info (i0 (taps -2 -1))) "
           "(non-sequences a) (n-steps 5))) (define y (sum (mul f f))) (define (gi ga) (grad y i0 a)) "
           "(define (gii gia) (grad (add (sum gi) ga) i0 a)) (output (add (sum (mul gii gii)) (mul gia ga)))"),
    /* second derivatives through sequence taps */
    SCAN_G("(input x float64 (7 2)) (input h0 float64 (2)) ",
           "(define hs (scan (lambda (xm xp h) (tanh (add (mul h xm) xp))) (sequences (x (taps -1 1))) "
           "(outputs-info h0))) (define (gx gh) (grad (sum (mul hs hs)) x h0)) "
           "(output (add (sum (mul gx gx)) (sum (mul gh gh))))"),
};

static void test_scan_kinds(void **st) {
  for (size_t i = 0; i < sizeof scan_cases / sizeof *scan_cases; i++) verify_text(scan_cases[i]);
}

/* Runs a graph's outputs at the given input values (all of them). */
static void run_graph(rg_fgraph *fg, rg_tensor *const *vals, rg_tensor **res) {
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable **ins = rg_gc_alloc((size_t)(nin + 1) * sizeof *ins), **outs = rg_gc_alloc((size_t)(nout + 1) * sizeof *outs);
  for (int i = 0; i < nin; i++) ins[i] = rg_fgraph_input(fg, i);
  for (int k = 0; k < nout; k++) outs[k] = rg_fgraph_output(fg, k);
  rg_fgraph_release(fg);
  rg_function *f = rg_compile(C, nin, ins, nout, outs, NULL);
  if (!f) fail_msg("%s", rg_errmsg(C));
  if (rg_function_call(f, vals, res) != RG_OK) fail_msg("%s", rg_errmsg(C));
  rg_function_free(f);
}

static rg_tensor *scalar64(double v) {
  rg_tensor *t = rg_tensor_new(RG_FLOAT64, 0, NULL);
  rg_tensor_set_f64(t, 0, v);
  return t;
}

/* x^16 by four squarings: derivatives of order 1 to 4, exactly. */
static void test_scan_higher_order(void **st) {
  rg_fgraph *fg = read_graph("(graph (input x float64 ()) "
                             "(define y ((subtensor -1) (scan (lambda (s) (mul s s)) (outputs-info x) (n-steps 4)))) "
                             "(define g1 (grad y x)) (define g2 (grad g1 x)) (define g3 (grad g2 x)) (define g4 (grad g3 x)) "
                             "(output y) (output g1) (output g2) (output g3) (output g4))");
  double x = -0.7730993158856909;
  rg_tensor *in = scalar64(x), *res[5];
  run_graph(fg, &in, res);
  double want[5] = {pow(x, 16), 16 * pow(x, 15), 240 * pow(x, 14), 3360 * pow(x, 13), 43680 * pow(x, 12)};
  for (int k = 0; k < 5; k++) {
    double got = rg_tensor_get_f64(res[k], 0);
    if (fabs(got - want[k]) > 1e-12 * fabs(want[k])) fail_msg("order %d: %.17g, want %.17g", k, got, want[k]);
    rg_tensor_free(res[k]);
  }
  rg_tensor_free(in);
}

/* truncate_gradient 2: only the last two steps are differentiated.  For
 * h_t = 0.9 h_{t-1} + x_t and cost sum(h), row 5 of the gradient of x is
 * 1, row 4 is 1 + 0.9, the rows before and h0 get nothing. */
static void test_scan_truncate_gradient(void **st) {
  rg_fgraph *fg = read_graph("(graph (input x float64 (6 2)) (input h0 float64 (2)) "
                             "(define hs (scan (lambda (x_t h) (add (mul h 0.9) x_t)) (sequences x) (outputs-info h0) "
                             "(truncate-gradient 2))) (define (gx gh) (grad (sum hs) x h0)) (output gx) (output gh))");
  rg_tensor *vals[2] = {random_value(rg_fgraph_input(fg, 0)->type), random_value(rg_fgraph_input(fg, 1)->type)}, *res[2];
  run_graph(fg, vals, res);
  for (int64_t i = 0; i < 12; i++) {
    double want = i >= 10 ? 1 : i >= 8 ? 1.9 : 0;
    assert_true(fabs(rg_tensor_get_f64(res[0], i) - want) < 1e-12);
  }
  for (int64_t i = 0; i < 2; i++) assert_true(rg_tensor_get_f64(res[1], i) == 0);
  for (int k = 0; k < 2; k++) rg_tensor_free(vals[k]), rg_tensor_free(res[k]);
}

/* Zero steps: empty traces, the initial value's gradient is what the
 * cost gives it directly, the non-sequence's is zero. */
static void test_scan_zero_steps(void **st) {
  rg_fgraph *fg = read_graph("(graph (input x float64 (? 2)) (input h0 float64 (2)) (input w float64 (2)) "
                             "(define hs (scan (lambda (x_t h w) (tanh (mul (add h x_t) w))) (sequences x) (outputs-info h0) "
                             "(non-sequences w))) (define (gh gw) (grad (add (sum hs) (sum (mul h0 3.0))) h0 w)) "
                             "(output gh) (output gw))");
  int64_t shape[2] = {0, 2};
  rg_tensor *vals[3] = {rg_tensor_new(RG_FLOAT64, 2, shape), random_value(rg_fgraph_input(fg, 1)->type),
                        random_value(rg_fgraph_input(fg, 2)->type)}, *res[2];
  run_graph(fg, vals, res);
  for (int64_t i = 0; i < 2; i++) {
    assert_true(rg_tensor_get_f64(res[0], i) == 3.0);
    assert_true(rg_tensor_get_f64(res[1], i) == 0.0);
  }
  for (int k = 0; k < 3; k++) rg_tensor_free(vals[k]);
  for (int k = 0; k < 2; k++) rg_tensor_free(res[k]);
}

/* The backward loop's structure: the state's gradient is a mit-mot, the
 * non-sequence's an accumulator that keeps one row, the sequence's a
 * nit-sot, and the forward values the step's gradient uses (tanh's output
 * and h + x_t here) are read from a twin of the forward loop that records them.
 * After fast_run the twin has replaced the forward loop (scan-subsumed):
 * two scans, the forward one computed once. */
static int count_scans(rg_fgraph *fg, rg_scan_info *back) {
  int scans = 0;
  rg_scan_info s;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) {
    if (n->op->code != RG_OP_SCAN) continue;
    scans++;
    assert_true(rg_scan_info_of(n->op, &s));
    if (s.n_mit_mot) *back = s;
  }
  return scans;
}

static void test_scan_backward_structure(void **st) {
  rg_fgraph *fg = read_graph("(graph (input x float64 (5 2)) (input h0 float64 (2)) (input w float64 (2)) "
                             "(define hs (scan (lambda (x_t h w) (tanh (mul (add h x_t) w))) (sequences x) (outputs-info h0) "
                             "(non-sequences w))) (define (gx gh gw) (grad (sum hs) x h0 w)) "
                             "(output hs) (output gx) (output gh) (output gw))");
  rg_scan_info s = {0};
  assert_int_equal(count_scans(fg, &s), 3);
  assert_int_equal(s.n_mit_mot, 1);
  assert_int_equal(s.n_sit_sot, 1);
  assert_int_equal(s.store_steps[0], 1);
  assert_int_equal(s.n_nit_sot, 1);
  assert_int_equal(s.mit_mot_nin[0], 2);
  assert_int_equal(s.mit_mot_nout[0], 1);
  assert_int_equal(s.n_seqs, 4); /* x, the states read, the recorded tanh output and h + x_t */
  rg_rewrite_run *run = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
  assert_int_equal(count_scans(fg, &s), 2);
}

/* Only the last state reaches the cost: after fast_run the backward loop
 * carries the state's gradient as a sit-sot, not a mit-mot reading and
 * adding zeros (scan-mitmot-to-sitsot), with the same values; with the
 * whole trace in the cost the mit-mot stays. */
static void compile_and_run(rg_fgraph *fg, const char *query, rg_tensor *const *vals, rg_tensor **res) {
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable *ins[8], *outs[8];
  for (int i = 0; i < nin; i++) ins[i] = rg_fgraph_input(fg, i);
  for (int k = 0; k < nout; k++) outs[k] = rg_fgraph_output(fg, k);
  rg_compile_opts o = {.mode = {.query = query}};
  rg_function *f = rg_compile(C, nin, ins, nout, outs, &o);
  if (!f) fail_msg("%s", rg_errmsg(C));
  assert_int_equal(rg_function_call(f, vals, res), RG_OK);
  rg_function_free(f);
}

static void test_scan_last_state_sitsot(void **st) {
  const char *fmt = "(graph (input x float64 (5 3)) (input h0 float64 (3)) (input W float64 (3 3)) "
                    "(define hs (scan (lambda (x_t h W) (tanh (add (dot h W) x_t))) (sequences x) (outputs-info h0) "
                    "(non-sequences W))) (define (gh gW gx) (grad (sum %s) h0 W x)) (output gh) (output gW) (output gx))";
  for (int last = 1; last >= 0; last--) {
    char text[1024];
    snprintf(text, sizeof text, fmt, last ? "((subtensor -1) hs)" : "hs");
    rg_fgraph *fg = read_graph(text);
    rg_tensor *vals[3], *want[3], *got[3];
    for (int i = 0; i < 3; i++) vals[i] = random_value(rg_fgraph_input(fg, i)->type);
    compile_and_run(fg, "none", vals, want);
    rg_rewrite_run *run = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
    assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
    rg_scan_info back = {0};
    assert_int_equal(count_scans(fg, &back), 2);
    assert_int_equal(back.n_mit_mot, last ? 0 : 1);
    compile_and_run(fg, "none", vals, got);
    for (int k = 0; k < 3; k++) {
      for (int64_t j = 0; j < rg_tensor_numel(want[k]); j++)
        assert_true(fabs(rg_tensor_get_f64(got[k], j) - rg_tensor_get_f64(want[k], j)) < 1e-12);
      rg_tensor_free(want[k]), rg_tensor_free(got[k]), rg_tensor_free(vals[k]);
    }
  }
}

/* The LSTM (PyTorch's gate layout) in float64, its gradients against the
 * backward pass written out below. */
enum { LT = 3, LB = 2, LI = 3, LH = 4, LG = 4 * LH };

static double sigm(double a) { return 1 / (1 + exp(-a)); }

typedef struct lstm_p { const double *x, *h0, *c0, *Wih, *Whh, *bih, *bhh; } lstm_p;
typedef struct lstm_g { double x[LT * LB * LI], h0[LB * LH], c0[LB * LH], Wih[LG * LI], Whh[LG * LH], bih[LG], bhh[LG]; } lstm_g;

/* Forward: the gate activations and states of every step (h, c at t + 1). */
static void lstm_forward(const lstm_p *p, double act[LT][LB][LG], double h[LT + 1][LB][LH], double c[LT + 1][LB][LH]) {
  memcpy(h[0], p->h0, sizeof h[0]);
  memcpy(c[0], p->c0, sizeof c[0]);
  for (int t = 0; t < LT; t++)
    for (int b = 0; b < LB; b++) {
      for (int g = 0; g < LG; g++) {
        double a = p->bih[g] + p->bhh[g];
        for (int i = 0; i < LI; i++) a += p->x[(t * LB + b) * LI + i] * p->Wih[g * LI + i];
        for (int j = 0; j < LH; j++) a += h[t][b][j] * p->Whh[g * LH + j];
        act[t][b][g] = g / LH == 2 ? tanh(a) : sigm(a);
      }
      for (int j = 0; j < LH; j++) {
        const double *A = act[t][b];
        c[t + 1][b][j] = A[LH + j] * c[t][b][j] + A[j] * A[2 * LH + j];
        h[t + 1][b][j] = A[3 * LH + j] * tanh(c[t + 1][b][j]);
      }
    }
}

/* Backward for cost = sum(h) + sum(c * c) over every step. */
static void lstm_backward(const lstm_p *p, lstm_g *d) {
  double act[LT][LB][LG], h[LT + 1][LB][LH], c[LT + 1][LB][LH], dh[LB][LH] = {{0}}, dc[LB][LH] = {{0}};
  lstm_forward(p, act, h, c);
  memset(d, 0, sizeof *d);
  for (int t = LT - 1; t >= 0; t--)
    for (int b = 0; b < LB; b++) {
      const double *A = act[t][b];
      double da[LG];
      for (int j = 0; j < LH; j++) {
        double i = A[j], f = A[LH + j], g = A[2 * LH + j], o = A[3 * LH + j], tc = tanh(c[t + 1][b][j]);
        double gh = 1 + dh[b][j], gc = 2 * c[t + 1][b][j] + dc[b][j] + gh * o * (1 - tc * tc);
        da[j] = gc * g * i * (1 - i);
        da[LH + j] = gc * c[t][b][j] * f * (1 - f);
        da[2 * LH + j] = gc * i * (1 - g * g);
        da[3 * LH + j] = gh * tc * o * (1 - o);
        dc[b][j] = gc * f;
      }
      for (int j = 0; j < LH; j++) {
        double s = 0;
        for (int g = 0; g < LG; g++) s += da[g] * p->Whh[g * LH + j];
        dh[b][j] = s;
      }
      for (int g = 0; g < LG; g++) {
        d->bih[g] += da[g], d->bhh[g] += da[g];
        for (int i = 0; i < LI; i++) d->Wih[g * LI + i] += da[g] * p->x[(t * LB + b) * LI + i];
        for (int j = 0; j < LH; j++) d->Whh[g * LH + j] += da[g] * h[t][b][j];
      }
      for (int i = 0; i < LI; i++) {
        double s = 0;
        for (int g = 0; g < LG; g++) s += da[g] * p->Wih[g * LI + i];
        d->x[(t * LB + b) * LI + i] = s;
      }
    }
  memcpy(d->h0, dh, sizeof dh);
  memcpy(d->c0, dc, sizeof dc);
}

static void test_lstm_against_hand_written(void **st) {
  rg_fgraph *fg = read_graph(
      "(graph (input x float64 (3 2 3)) (input h0 float64 (2 4)) (input c0 float64 (2 4)) "
      "(input W_ih float64 (16 3)) (input W_hh float64 (16 4)) (input b_ih float64 (16)) (input b_hh float64 (16)) "
      "(define (hs cs) (scan (lambda (x_t h c) "
      "(define gates (add (add (dot x_t ((dimshuffle 1 0) W_ih)) b_ih) (add (dot h ((dimshuffle 1 0) W_hh)) b_hh))) "
      "(define (gi gf gg go) ((split 1 4) gates (constant int64 (4) (4 4 4 4)))) "
      "(define c2 (add (mul (sigmoid gf) c) (mul (sigmoid gi) (tanh gg)))) "
      "(values (mul (sigmoid go) (tanh c2)) c2)) (sequences x) (outputs-info h0 c0))) "
      "(define (a b c d e f g) (grad (add (sum hs) (sum (mul cs cs))) x h0 c0 W_ih W_hh b_ih b_hh)) "
      "(output a) (output b) (output c) (output d) (output e) (output f) (output g))");
  rg_tensor *vals[7], *res[7];
  for (int i = 0; i < 7; i++) {
    vals[i] = random_value(rg_fgraph_input(fg, i)->type);
    for (int64_t j = 0; j < rg_tensor_numel(vals[i]); j++) rg_tensor_set_f64(vals[i], j, rg_tensor_get_f64(vals[i], j) - 1.0);
  }
  run_graph(fg, vals, res);
  double *pv[7];
  for (int i = 0; i < 7; i++) {
    pv[i] = malloc((size_t)rg_tensor_numel(vals[i]) * sizeof(double));
    for (int64_t j = 0; j < rg_tensor_numel(vals[i]); j++) pv[i][j] = rg_tensor_get_f64(vals[i], j);
  }
  lstm_p p = {pv[0], pv[1], pv[2], pv[3], pv[4], pv[5], pv[6]};
  lstm_g d;
  lstm_backward(&p, &d);
  const double *want[7] = {d.x, d.h0, d.c0, d.Wih, d.Whh, d.bih, d.bhh};
  for (int k = 0; k < 7; k++) {
    for (int64_t j = 0; j < rg_tensor_numel(res[k]); j++)
      if (fabs(rg_tensor_get_f64(res[k], j) - want[k][j]) > 1e-10)
        fail_msg("gradient %d, element %lld: %.12g, by hand %.12g", k, (long long)j, rg_tensor_get_f64(res[k], j), want[k][j]);
    rg_tensor_free(res[k]), rg_tensor_free(vals[k]), free(pv[k]);
  }
}

/* n_steps is an integer: no gradient, and asking for one says so. */
static void test_scan_grad_errors(void **st) {
  const char *text = "(graph (input n int64 ()) (input h0 float64 ()) "
                     "(output (grad (sum (scan (lambda (h) (mul h 2.0)) (outputs-info h0) (n-steps n))) n)))";
  rg_clear_error(C);
  assert_null(rg_graph_read(C, "case.graph", text, strlen(text)));
  if (!strstr(rg_errmsg(C), "an integer or boolean value has no gradient")) fail_msg("%s", rg_errmsg(C));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_linear_algebra),
      cmocka_unit_test(test_control_and_inner_graphs),
      cmocka_unit_test(test_ifelse_gradient_lazy),
      cmocka_unit_test(test_float32),
      cmocka_unit_test(test_prod_with_zeros),
      cmocka_unit_test(test_broadcast_types),
      cmocka_unit_test(test_value_used_twice),
      cmocka_unit_test(test_wrt_computed_from_wrt),
      cmocka_unit_test(test_disconnected_and_integers),
      cmocka_unit_test(test_bad_costs),
      cmocka_unit_test(test_constants_and_known),
      cmocka_unit_test(test_mlp_against_hand_written),
      cmocka_unit_test(test_grad_form_errors),
      cmocka_unit_test(test_forward_values_shared),
      cmocka_unit_test(test_scan_kinds),
      cmocka_unit_test(test_scan_higher_order),
      cmocka_unit_test(test_scan_truncate_gradient),
      cmocka_unit_test(test_scan_zero_steps),
      cmocka_unit_test(test_scan_backward_structure),
      cmocka_unit_test(test_scan_last_state_sitsot),
      cmocka_unit_test(test_lstm_against_hand_written),
      cmocka_unit_test(test_scan_grad_errors),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
