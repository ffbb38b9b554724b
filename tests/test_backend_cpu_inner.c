/*
 * test_backend_cpu_inner.c — composite (the block interpreter over a
 * scalar graph) and op_from_graph on the CPU, with their inner graphs
 * linked here by rgb_link, against values computed in the test: several
 * outputs of several dtypes, weak literal constants, an n-ary add, casts,
 * broadcasting and strided inputs, more than one block, two threads, in
 * place, nested composites, and errors raised inside inner graphs.  Also
 * checks that the kernel table covers every op.
 */
#include "tests/test_backend_cpu.h"

#include <float.h>

/* Links the inner graph of op (the linker links nested composites). */
static rgb_program *link_inner(const rg_op *op) {
  rg_fgraph *g = rg_op_inner_graph(op);
  assert_non_null(g);
  size_t nn;
  rg_node *const *nodes = rg_fgraph_toposort(g, &nn);
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  rg_variable *ins[16], *outs[16];
  for (int i = 0; i < nin; i++) ins[i] = rg_fgraph_input(g, i);
  for (int j = 0; j < nout; j++) outs[j] = rg_fgraph_output(g, j);
  char err[512];
  rgb_link_opts lo = {.nthreads = 1};
  rgb_program *p = rgb_link((int)nn, nodes, nin, ins, nout, outs, &lo, err, sizeof err);
  if (!p) fail_msg("link: %s", err);
  return p;
}

static void free_inner(rgb_program *p) { rgb_program_free(p); }

static rg_variable *sc_in(rg_dtype dt) { return var(dt, 0, NULL); }

/* ------------------------------------------------------------------ composite */

/* a (float32), b (int8) -> exp(a) * 2 + b, a > b, a + b + a, int64(b), b ** 2 */
static const rg_op *five_outputs(void) {
  rg_variable *a = sc_in(RG_FLOAT32), *b = sc_in(RG_INT8);
  rg_variable *outs[5] = {
      rg_add(rg_mul(rg_exp(a), rg_scalar_float(C, 2)), b),
      rg_gt(a, b),
      rg_add_n(3, (rg_variable *[]){a, b, a}),
      rg_cast(b, RG_INT64),
      rg_pow(b, rg_scalar_int(C, 2)),
  };
  rg_variable *ins[2] = {a, b};
  rg_fgraph *fg = rg_fgraph_new(C, 2, ins, 5, outs, 0);
  assert_non_null(fg);
  const rg_op *op = rg_op_composite(C, fg);
  if (!op) fail_msg("%s", rg_errmsg(C));
  return op;
}

static void check_five(hand_run *h, const rg_tensor *x, const rg_tensor *y) {
  int64_t n = rg_tensor_numel(hand_out(h, 0));
  const rg_tensor *o[5];
  for (int j = 0; j < 5; j++) o[j] = hand_out(h, j);
  assert_int_equal(o[0]->dtype, RG_FLOAT32);
  assert_int_equal(o[1]->dtype, RG_BOOL);
  assert_int_equal(o[3]->dtype, RG_INT64);
  assert_int_equal(o[4]->dtype, RG_INT8);
  int64_t cols = y->shape[0];
  for (int64_t i = 0; i < n; i++) {
    int64_t r = i / cols, c = i % cols;
    float a = (float)rg_load_f64(RG_FLOAT32, x->data + r * x->strides[0] + c * x->strides[1]);
    int8_t b = (int8_t)rg_load_i64(RG_INT8, y->data + c * y->strides[0]);
    float w0 = expf(a) * 2.0f + (float)b;
    if (!same_f64(rg_tensor_get_f64(o[0], i), w0, 1e-6, 4 * FLT_EPSILON * 2.0f * expf(a))) /* exp within 4 ULP */
      fail_msg("out 0, element %lld: %g, expected %g", (long long)i, rg_tensor_get_f64(o[0], i), w0);
    assert_int_equal(rg_tensor_get_i64(o[1], i), a > (float)b);
    assert_true(rg_tensor_get_f64(o[2], i) == (double)((a + (float)b) + a));
    assert_int_equal(rg_tensor_get_i64(o[3], i), b);
    assert_int_equal(rg_tensor_get_i64(o[4], i), (int8_t)(b * b));
  }
}

static void test_composite_outputs_blocks_threads(void **st) {
  const rg_op *op = five_outputs();
  rgb_program *p = link_inner(op);
  int64_t cols = 1500; /* 3 rows: several blocks, a partial one */
  rg_variable *vx = var(RG_FLOAT32, 2, SHAPE(3, cols)), *vy = var(RG_INT8, 1, &cols);
  rg_node *node = rg_make_node(C, op, 2, (rg_variable *[]){vx, vy});
  assert_non_null(node);
  rg_tensor *x = tens_rand(RG_FLOAT32, 2, SHAPE(3, cols), -3, 3), *y = tens_rand(RG_INT8, 1, &cols, -11, 11);
  /* a transposed copy of x seen as x: strided gathers */
  rg_tensor *xt0 = tens(RG_FLOAT32, 2, SHAPE(cols, 3), NULL);
  for (int64_t i = 0; i < 3 * cols; i++) rg_tensor_set_f64(xt0, (i % cols) * 3 + i / cols, rg_tensor_get_f64(x, i));
  rg_tensor *xt = rg_tensor_permute(xt0, (const int[]){1, 0});
  for (int nth = 1; nth <= 2; nth++) {
    for (int layout = 0; layout < 2; layout++) {
      hand_run h;
      hand_init(&h, node->outputs[0], nth);
      h.bn.inner = p;
      rg_tensor *in[2] = {layout ? xt : x, y};
      assert_int_equal(hand_call(&h, in), 0);
      check_five(&h, in[0], y);
      assert_int_equal(hand_call(&h, in), 0); /* again, into reused buffers */
      check_five(&h, in[0], y);
      h.bn.inner = NULL;
      hand_free(&h);
    }
  }
  rg_tensor *all[] = {x, y, xt0, xt};
  free_all(4, all);
  free_inner(p);
}

static void test_composite_nested_scalar_empty(void **st) {
  /* inner: s = a * b + 1; outer: -composite(p, q) + p */
  rg_variable *a = sc_in(RG_FLOAT64), *b = sc_in(RG_FLOAT64);
  rg_variable *s = rg_add(rg_mul(a, b), rg_scalar_int(C, 1));
  const rg_op *inner = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){a, b}, 1, &s, 0));
  rg_variable *pv = sc_in(RG_FLOAT64), *qv = sc_in(RG_FLOAT64);
  rg_variable *r = rg_add(rg_neg(rg_apply(C, inner, 2, (rg_variable *[]){pv, qv})), pv);
  const rg_op *outer = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){pv, qv}, 1, &r, 0));
  assert_non_null(outer);
  rgb_program *p = link_inner(outer);
  rg_variable *vx = var(RG_FLOAT64, 1, SHAPE(5)), *vy = var(RG_FLOAT64, 0, NULL);
  assert_null(rg_op_inplace(outer, 0)); /* composites never work in place */
  rg_node *node = rg_make_node(C, outer, 2, (rg_variable *[]){vx, vy});
  assert_non_null(node);
  rg_tensor *x = tens(RG_FLOAT64, 1, SHAPE(5), VALS(1, 2, 3, 4, 5)), *y = scalar(RG_FLOAT64, 10);
  hand_run h;
  hand_init(&h, node->outputs[0], 1);
  h.bn.inner = p;
  rg_tensor *in[2] = {x, y};
  assert_int_equal(hand_call(&h, in), 0);
  check(hand_out(&h, 0), RG_FLOAT64, 1, SHAPE(5), VALS(-10, -19, -28, -37, -46));
  h.bn.inner = NULL;
  hand_free(&h);
  /* scalars only, and an empty broadcast */
  rg_node *n2 = rg_make_node(C, outer, 2, (rg_variable *[]){vy, vy});
  hand_init(&h, n2->outputs[0], 1);
  h.bn.inner = p;
  rg_tensor *in2[2] = {y, y};
  assert_int_equal(hand_call(&h, in2), 0);
  check(hand_out(&h, 0), RG_FLOAT64, 0, NULL, VALS(-91));
  h.bn.inner = NULL;
  hand_free(&h);
  rg_node *n3 = rg_make_node(C, outer, 2, (rg_variable *[]){var(RG_FLOAT64, 2, SHAPE(0, 4)), vy});
  hand_init(&h, n3->outputs[0], 1);
  h.bn.inner = p;
  rg_tensor *e = tens(RG_FLOAT64, 2, SHAPE(0, 4), NULL), *in3[2] = {e, y};
  assert_int_equal(hand_call(&h, in3), 0);
  assert_int_equal(rg_tensor_numel(hand_out(&h, 0)), 0);
  h.bn.inner = NULL;
  hand_free(&h);
  rg_tensor *all[] = {x, y, e};
  free_all(3, all);
  free_inner(p);
}

static void test_composite_errors(void **st) {
  /* an error inside: an integer power with a negative exponent */
  rg_variable *a = sc_in(RG_INT32), *b = sc_in(RG_INT32);
  rg_variable *pw = rg_pow(a, b);
  const rg_op *op = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){a, b}, 1, &pw, 0));
  rgb_program *p = link_inner(op);
  rg_node *node = rg_make_node(C, op, 2, (rg_variable *[]){var_u(RG_INT32, 1), var_u(RG_INT32, 1)});
  hand_run h;
  hand_init(&h, node->outputs[0], 1);
  rg_tensor *x = tens(RG_INT32, 1, SHAPE(3), VALS(1, 2, 3)), *y = tens(RG_INT32, 1, SHAPE(3), VALS(1, -1, 2));
  rg_tensor *z = tens(RG_INT32, 1, SHAPE(4), NULL);
  rg_tensor *in[2] = {x, y}, *bad[2] = {x, z};
  assert_int_not_equal(hand_call(&h, in), 0); /* not linked */
  assert_non_null(strstr(h.rt->err, "the inner graph is not linked"));
  h.bn.inner = p;
  assert_int_not_equal(hand_call(&h, in), 0);
  assert_non_null(strstr(h.rt->err, "integers to negative integer powers are not allowed"));
  assert_int_not_equal(hand_call(&h, bad), 0);
  assert_non_null(strstr(h.rt->err, "composite: shapes (3) and (4) do not broadcast"));
  h.bn.inner = NULL;
  hand_free(&h);
  rg_tensor *all[] = {x, y, z};
  free_all(3, all);
  free_inner(p);
}

/* ------------------------------------------------------------------ op_from_graph */

static void test_op_from_graph(void **st) {
  rg_variable *A = var(RG_FLOAT64, 2, SHAPE(U, 3)), *v = var(RG_FLOAT64, 1, SHAPE(3));
  rg_variable *outs[2] = {rg_dot(A, v), rg_sum(A, -1, NULL)};
  const rg_op *op = rg_op_from_graph(C, rg_fgraph_new(C, 2, (rg_variable *[]){A, v}, 2, outs, 0));
  assert_non_null(op);
  rgb_program *p = link_inner(op);
  rg_node *node = rg_make_node(C, op, 2, (rg_variable *[]){var(RG_FLOAT64, 2, SHAPE(U, 3)), var(RG_FLOAT64, 1, SHAPE(3))});
  assert_non_null(node);
  hand_run h;
  hand_init(&h, node->outputs[0], 1);
  h.bn.inner = p;
  rg_tensor *a = tens(RG_FLOAT64, 2, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6)), *w = tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, 0, -1));
  rg_tensor *in[2] = {a, w};
  for (int call = 0; call < 2; call++) {
    assert_int_equal(hand_call(&h, in), 0);
    check(hand_out(&h, 0), RG_FLOAT64, 1, SHAPE(2), VALS(-2, -2));
    check(hand_out(&h, 1), RG_FLOAT64, 0, NULL, VALS(21));
  }
  rg_tensor *a2 = tens(RG_FLOAT64, 2, SHAPE(2, 2), NULL), *bad[2] = {a2, w};
  assert_int_not_equal(hand_call(&h, bad), 0);
  assert_non_null(strstr(h.rt->err, "shapes (2 2) and (3) are not aligned"));
  h.bn.inner = NULL;
  hand_free(&h);
  rg_tensor *all[] = {a, w, a2};
  free_all(3, all);
  free_inner(p);
}

/* ------------------------------------------------------------------ the table */

static void test_every_op_has_a_kernel(void **st) {
  for (int code = 0; code < RG_OP_COUNT; code++) {
    bool none = code == RG_OP_IFELSE || code == RG_OP_OPAQUE;
    if (none != (rgb_cpu_kernels[code] == NULL))
      fail_msg("%s: %s", rg_opcode_name((rg_opcode)code), none ? "unexpected kernel" : "no kernel");
  }
  rgb_node n = {.code = RG_OP_IFELSE};
  assert_true(rgb_cpu_backend.supports(NULL, &n));
  n.code = RG_OP_OPAQUE;
  assert_false(rgb_cpu_backend.supports(NULL, &n));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_composite_outputs_blocks_threads),
      cmocka_unit_test(test_composite_nested_scalar_empty),
      cmocka_unit_test(test_composite_errors),
      cmocka_unit_test(test_op_from_graph),
      cmocka_unit_test(test_every_op_has_a_kernel),
  };
  return cmocka_run_group_tests(tests, cpu_setup, NULL);
}
