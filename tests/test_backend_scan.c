/*
 * test_backend_scan.c — Scan run on the CPU through rg_compile, each case
 * against a plain loop written here: cumulative sum, Fibonacci (mit-sot
 * taps -2 -1), sequence taps -1 0 1, a nit-sot of unknown shape,
 * non-sequences and free variables, go_backwards, until, zero steps, a
 * scan inside a scan, an ifelse in the step, an RNN with a matrix state,
 * store_steps smaller than the trace, outputs computed straight into
 * their trace rows (and those that cannot be), a hand-built mit-mot scan, and the
 * run-time errors (negative and inconsistent lengths).
 */
#include "tests/test_backend_cpu.h"

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "relgraph/scan.h"

static rg_tensor *run1(int nin, rg_variable **ins, rg_variable *out, rg_tensor **vals) {
  rg_function *f = rg_compile(C, nin, ins, 1, &out, NULL);
  if (!f) fail_msg("compile: %s", rg_errmsg(C));
  rg_tensor *res = NULL;
  int rc = rg_function_call(f, vals, &res);
  if (rc) fail_msg("call: %s", rg_function_errmsg(f));
  rg_function_free(f);
  return res;
}

/* The error message of a failing call. */
static char *run_err(int nin, rg_variable **ins, rg_variable *out, rg_tensor **vals) {
  rg_function *f = rg_compile(C, nin, ins, 1, &out, NULL);
  if (!f) fail_msg("compile: %s", rg_errmsg(C));
  rg_tensor *res = NULL;
  int rc = rg_function_call(f, vals, &res);
  assert_int_not_equal(rc, RG_OK);
  char *msg = strdup(rg_function_errmsg(f));
  rg_function_free(f);
  return msg;
}

static rg_node *scan_or_fail(const rg_scan_spec *sp, rg_variable **outs) {
  rg_node *n = rg_scan(C, sp, outs);
  if (!n) fail_msg("scan: %s", rg_errmsg(C));
  return n;
}

/* ------------------------------------------------------------------ steps */

static int step_add(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_add(in[1], in[0]);
  return RG_OK;
}

static void test_cumsum(void **st) {
  rg_variable *x = var_u(RG_FLOAT64, 1);
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = rg_constant_scalar(C, RG_FLOAT64, 0)};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_add,
                     .truncate_gradient = -1};
  rg_variable *ys;
  scan_or_fail(&sp, &ys);
  rg_tensor *xv = tens_rand(RG_FLOAT64, 1, SHAPE(50), -1, 1);
  rg_tensor *r = run1(1, &x, ys, &xv);
  assert_int_equal(r->shape[0], 50);
  double acc = 0;
  for (int i = 0; i < 50; i++) {
    acc += rg_tensor_get_f64(xv, i);
    assert_true(fabs(rg_tensor_get_f64(r, i) - acc) < 1e-12);
  }
  rg_tensor_free(r);
  /* zero steps: an empty trace */
  rg_tensor *e = tens(RG_FLOAT64, 1, SHAPE(0), NULL);
  r = run1(1, &x, ys, &e);
  assert_int_equal(r->ndim, 1);
  assert_int_equal(r->shape[0], 0);
  rg_tensor_free(r);
  rg_tensor_free(e);
  rg_tensor_free(xv);
}

static void test_fibonacci(void **st) {
  rg_variable *n = rg_input(C, "n", rg_type_scalar(RG_INT64));
  rg_variable *init = rg_constant_data(C, RG_INT64, 1, SHAPE(2), SHAPE(0, 1));
  rg_scan_output o = {init, 2, SHAPE(-2, -1)};
  rg_scan_spec sp = {.noutputs = 1, .outputs = &o, .n_steps = n, .fn = step_add, .truncate_gradient = -1};
  rg_variable *fib;
  scan_or_fail(&sp, &fib);
  rg_tensor *nv = tens_i(RG_INT64, 0, NULL, SHAPE(10));
  rg_tensor *r = run1(1, &n, fib, &nv);
  int64_t a = 0, b = 1;
  assert_int_equal(r->shape[0], 10);
  for (int i = 0; i < 10; i++) {
    int64_t c = a + b;
    assert_int_equal(rg_tensor_get_i64(r, i), c);
    a = b, b = c;
  }
  rg_tensor_free(r);
  /* a negative number of steps is an error */
  rg_tensor_set_i64(nv, 0, -3);
  char *msg = run_err(1, &n, fib, &nv);
  assert_non_null(strstr(msg, "n_steps is negative"));
  free(msg);
  rg_tensor_free(nv);
}

/* y_t = x[t-1] - 2 x[t] + 3 x[t+1] (not symmetric: the taps' rows tell) */
static int step_taps(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_add(rg_sub(in[0], rg_mul(rg_scalar_float(c, 2), in[1])), rg_mul(rg_scalar_float(c, 3), in[2]));
  return RG_OK;
}

static void test_sequence_taps_backwards(void **st) {
  for (int back = 0; back < 2; back++) {
    rg_variable *x = var_u(RG_FLOAT32, 2);
    rg_scan_seq seq = {x, 3, SHAPE(-1, 0, 1)};
    rg_scan_output o = {.init = NULL};
    rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_taps,
                       .go_backwards = back, .truncate_gradient = -1};
    rg_variable *y;
    scan_or_fail(&sp, &y);
    rg_tensor *xv = tens_rand(RG_FLOAT32, 2, SHAPE(7, 3), -1, 1);
    rg_tensor *r = run1(1, &x, y, &xv);
    assert_int_equal(r->shape[0], 5);
    assert_int_equal(r->shape[1], 3);
    /* as aesara.scan: backwards the steps go from the last centre row
     * (5) to the first (1), and tap -1 is still the row before it */
    for (int t = 0; t < 5; t++)
      for (int j = 0; j < 3; j++) {
        int i0 = back ? 4 - t : t, i1 = back ? 5 - t : t + 1, i2 = back ? 6 - t : t + 2;
        double want = rg_tensor_get_f64(xv, i0 * 3 + j) - 2 * rg_tensor_get_f64(xv, i1 * 3 + j) +
                      3 * rg_tensor_get_f64(xv, i2 * 3 + j);
        assert_true(fabs(rg_tensor_get_f64(r, t * 3 + j) - want) < 1e-5);
      }
    rg_tensor_free(r);
    /* a sequence too short for its taps, at run time */
    rg_tensor *shortv = tens(RG_FLOAT32, 2, SHAPE(1, 3), NULL);
    char *msg = run_err(1, &x, y, &shortv);
    if (!strstr(msg, "sequence 0 is too short for its taps -1..1: that leaves -1 steps")) fail_msg("%s", msg);
    free(msg);
    rg_tensor_free(shortv);
    rg_tensor_free(xv);
  }
}

/* A nit-sot whose row shape is unknown statically: the non-sequence's
 * first rows, one more each step (here: x_t * v). */
static int step_scale(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_mul(in[0], in[1]);
  return RG_OK;
}

static void test_nit_sot_unknown_shape_non_seqs(void **st) {
  rg_variable *x = var_u(RG_FLOAT64, 1), *v = var_u(RG_FLOAT64, 1);
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = NULL};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .nnon_seqs = 1,
                     .non_seqs = &v, .fn = step_scale, .truncate_gradient = -1};
  rg_variable *y;
  scan_or_fail(&sp, &y);
  assert_int_equal(y->type->ndim, 2);
  assert_int_equal(y->type->shape[1], U);
  rg_tensor *vals[2] = {tens(RG_FLOAT64, 1, SHAPE(4), VALS(1, 2, 3, 4)), tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, 10, 100))};
  rg_tensor *r = run1(2, (rg_variable *[]){x, v}, y, vals);
  assert_int_equal(r->shape[0], 4);
  assert_int_equal(r->shape[1], 3);
  for (int t = 0; t < 4; t++)
    for (int j = 0; j < 3; j++) assert_true(rg_tensor_get_f64(r, t * 3 + j) == (t + 1) * pow(10, j));
  rg_tensor_free(r);
  for (int i = 0; i < 2; i++) rg_tensor_free(vals[i]);
}

/* Free variable: the step uses w without listing it. */
static rg_variable *free_w;
static int step_free(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_add(rg_mul(in[1], free_w), in[0]);
  return RG_OK;
}

static void test_free_variable(void **st) {
  rg_variable *x = var_u(RG_FLOAT64, 1);
  free_w = rg_input(C, "w", rg_type_scalar(RG_FLOAT64));
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = rg_constant_scalar(C, RG_FLOAT64, 1)};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_free,
                     .truncate_gradient = -1};
  rg_variable *y;
  rg_node *node = scan_or_fail(&sp, &y);
  rg_scan_info info;
  assert_true(rg_scan_info_of(node->op, &info));
  assert_int_equal(info.n_non_seqs, 1);
  assert_ptr_equal(node->inputs[rg_scan_outer_in(&info, RG_SCAN_NON_SEQ, 0)], free_w);
  rg_tensor *vals[2] = {tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, 2, 3)), scalar(RG_FLOAT64, 0.5)};
  rg_tensor *r = run1(2, (rg_variable *[]){x, free_w}, y, vals);
  double h = 1;
  for (int t = 0; t < 3; t++) {
    h = h * 0.5 + (t + 1);
    assert_true(fabs(rg_tensor_get_f64(r, t) - h) < 1e-12);
  }
  rg_tensor_free(r);
  for (int i = 0; i < 2; i++) rg_tensor_free(vals[i]);
}

/* while-loop: double until > limit */
static int step_until(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_mul(in[0], rg_scalar_float(c, 2));
  *u = rg_gt(outs[0], in[1]);
  return RG_OK;
}

static void test_until(void **st) {
  rg_variable *lim = rg_input(C, "lim", rg_type_scalar(RG_FLOAT64));
  rg_scan_output o = {.init = rg_constant_scalar(C, RG_FLOAT64, 1)};
  rg_scan_spec sp = {.noutputs = 1, .outputs = &o, .n_steps = rg_scalar_int(C, 100), .nnon_seqs = 1,
                     .non_seqs = &lim, .fn = step_until, .truncate_gradient = -1};
  rg_variable *y;
  scan_or_fail(&sp, &y);
  rg_tensor *lv = scalar(RG_FLOAT64, 40);
  rg_tensor *r = run1(1, &lim, y, &lv);
  assert_int_equal(r->shape[0], 6); /* 2 4 8 16 32 64 */
  assert_true(rg_tensor_get_f64(r, 5) == 64);
  rg_tensor_free(r);
  rg_tensor_free(lv);
}

/* An ifelse in the step: h = h > 10 ? h - 10 : h + x */
static int step_ifelse(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  rg_variable *a = rg_sub(in[1], rg_scalar_float(c, 10)), *b = rg_add(in[1], in[0]);
  outs[0] = rg_ifelse(rg_gt(in[1], rg_scalar_float(c, 10)), 1, &a, &b)->outputs[0];
  return RG_OK;
}

static void test_ifelse_inside(void **st) {
  rg_variable *x = var_u(RG_FLOAT64, 1);
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = rg_constant_scalar(C, RG_FLOAT64, 0)};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_ifelse,
                     .truncate_gradient = -1};
  rg_variable *y;
  scan_or_fail(&sp, &y);
  rg_tensor *xv = tens_rand(RG_FLOAT64, 1, SHAPE(40), 0, 5);
  rg_tensor *r = run1(1, &x, y, &xv);
  double h = 0;
  for (int t = 0; t < 40; t++) {
    h = h > 10 ? h - 10 : h + rg_tensor_get_f64(xv, t);
    assert_true(fabs(rg_tensor_get_f64(r, t) - h) < 1e-12);
  }
  rg_tensor_free(r);
  rg_tensor_free(xv);
}

/* A scan in a scan: each row's cumulative sum, as the outer step's nit-sot. */
static int step_row_cumsum(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  rg_scan_seq seq = {.x = in[0]};
  rg_scan_output o = {.init = rg_constant_scalar(c, RG_FLOAT64, 0)};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_add,
                     .truncate_gradient = -1};
  return rg_scan(c, &sp, outs) ? RG_OK : RG_ERR_TYPE;
}

static void test_scan_in_scan(void **st) {
  rg_variable *x = var_u(RG_FLOAT64, 2);
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = NULL};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_row_cumsum,
                     .truncate_gradient = -1};
  rg_variable *y;
  scan_or_fail(&sp, &y);
  rg_tensor *xv = tens_rand(RG_FLOAT64, 2, SHAPE(4, 6), -1, 1);
  rg_tensor *r = run1(1, &x, y, &xv);
  assert_int_equal(r->shape[0], 4);
  assert_int_equal(r->shape[1], 6);
  for (int i = 0; i < 4; i++) {
    double acc = 0;
    for (int j = 0; j < 6; j++) {
      acc += rg_tensor_get_f64(xv, i * 6 + j);
      assert_true(fabs(rg_tensor_get_f64(r, i * 6 + j) - acc) < 1e-12);
    }
  }
  rg_tensor_free(r);
  rg_tensor_free(xv);
}

/* The profile of a scan in a scan: the outer step's nodes under the outer
 * scan, and for the inner scan, whose steps ran as flat elementwise loops
 * (no thunk per node), a line that says so. */
static void test_nested_profile(void **st) {
  const char *text = "(graph (input X float64 (5 4)) (input s float64 ())"
                     " (output (scan (lambda (row acc)"
                     "   (define cs (scan (lambda (e a) (add a (mul e acc))) (sequences row) (outputs-info s)))"
                     "   (add acc ((subtensor -1) cs)))"
                     " (sequences X) (outputs-info (constant float64 () (1.0))))))";
  rg_fgraph *fg = rg_graph_read(C, "nested.graph", text, strlen(text));
  assert_non_null(fg);
  rg_variable *ins[2] = {rg_fgraph_input(fg, 0), rg_fgraph_input(fg, 1)}, *out = rg_fgraph_output(fg, 0);
  rg_compile_opts o = {.mode = {.query = "none"}, .profile = true};
  rg_function *f = rg_compile(C, 2, ins, 1, &out, &o);
  assert_non_null(f);
  rg_tensor *vals[2] = {tens_rand(RG_FLOAT64, 2, SHAPE(5, 4), -1, 1), tens_rand(RG_FLOAT64, 0, NULL, -1, 1)}, *res;
  assert_int_equal(rg_function_call(f, vals, &res), RG_OK);
  const char *buf = tu_function_profile(f);
  assert_non_null(strstr(buf, "subtensor"));
  assert_non_null(strstr(buf, "(its steps ran as flat elementwise loops: no time per node)"));
  rg_tensor_free(res), rg_tensor_free(vals[0]), rg_tensor_free(vals[1]);
  rg_function_free(f);
}

/* RNN: h_t = tanh(h_{t-1} W + x_t), matrix state (batch 2, width 3),
 * plus a nit-sot sum(h_t). */
static int step_rnn(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  rg_variable *h = rg_tanh(rg_add(rg_dot(in[1], in[2]), in[0]));
  outs[0] = h;
  outs[1] = rg_sum(h, -1, NULL);
  return RG_OK;
}

static void test_rnn_matrix_state(void **st) {
  rg_variable *x = var(RG_FLOAT64, 3, SHAPE(U, 2, 3)), *h0 = var(RG_FLOAT64, 2, SHAPE(2, 3));
  rg_variable *W = var(RG_FLOAT64, 2, SHAPE(3, 3));
  rg_scan_seq seq = {.x = x};
  rg_scan_output o[2] = {{.init = h0}, {.init = NULL}};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 2, .outputs = o, .nnon_seqs = 1,
                     .non_seqs = &W, .fn = step_rnn, .truncate_gradient = -1};
  rg_variable *ys[2];
  scan_or_fail(&sp, ys);
  rg_function *f = rg_compile(C, 3, (rg_variable *[]){x, h0, W}, 2, ys, NULL);
  if (!f) fail_msg("%s", rg_errmsg(C));
  rg_tensor *vals[3] = {tens_rand(RG_FLOAT64, 3, SHAPE(5, 2, 3), -1, 1), tens_rand(RG_FLOAT64, 2, SHAPE(2, 3), -1, 1),
                        tens_rand(RG_FLOAT64, 2, SHAPE(3, 3), -1, 1)};
  rg_tensor *res[2];
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(rg_function_call(f, vals, res), RG_OK);
    double h[6], hn[6];
    for (int i = 0; i < 6; i++) h[i] = rg_tensor_get_f64(vals[1], i);
    for (int t = 0; t < 5; t++) {
      double s = 0;
      for (int b = 0; b < 2; b++)
        for (int j = 0; j < 3; j++) {
          double a = rg_tensor_get_f64(vals[0], t * 6 + b * 3 + j);
          for (int k = 0; k < 3; k++) a += h[b * 3 + k] * rg_tensor_get_f64(vals[2], k * 3 + j);
          hn[b * 3 + j] = tanh(a);
          s += hn[b * 3 + j];
        }
      memcpy(h, hn, sizeof h);
      for (int i = 0; i < 6; i++) assert_true(fabs(rg_tensor_get_f64(res[0], t * 6 + i) - h[i]) < 1e-12);
      assert_true(fabs(rg_tensor_get_f64(res[1], t) - s) < 1e-12);
    }
    rg_tensor_free(res[0]);
    rg_tensor_free(res[1]);
  }
  rg_function_free(f);
  /* one output of the two: the other is not in the compiled graph */
  rg_tensor *only = run1(3, (rg_variable *[]){x, h0, W}, ys[1], vals);
  assert_int_equal(only->shape[0], 5);
  rg_tensor_free(only);
  for (int i = 0; i < 3; i++) rg_tensor_free(vals[i]);
}

/* Rows large enough to be preallocated (8 KB): the state and a product
 * computed straight into their traces, next to outputs that cannot be (the
 * state's variable a second time, a transposed view, a non-sequence
 * passed through), each checked against a plain loop, over two calls. */
enum { PB = 4, PH = 256, PT = 3 };

static int step_wide(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  rg_variable *h = rg_tanh(rg_add(in[0], rg_dot(in[1], in[2])));
  outs[0] = h;
  outs[1] = h;
  outs[2] = rg_mul(h, rg_constant_scalar(c, RG_FLOAT64, 2));
  outs[3] = rg_dimshuffle(h, 2, SHAPE(1, 0));
  outs[4] = in[2];
  return RG_OK;
}

static void test_preallocated_rows(void **st) {
  rg_variable *x = var(RG_FLOAT64, 3, SHAPE(PT, PB, PH)), *h0 = var(RG_FLOAT64, 2, SHAPE(PB, PH));
  rg_variable *W = var(RG_FLOAT64, 2, SHAPE(PH, PH));
  rg_scan_seq seq = {.x = x};
  rg_scan_output o[5] = {{.init = h0}};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 5, .outputs = o, .nnon_seqs = 1,
                     .non_seqs = &W, .fn = step_wide, .truncate_gradient = -1};
  rg_variable *ys[5];
  scan_or_fail(&sp, ys);
  rg_function *f = rg_compile(C, 3, (rg_variable *[]){x, h0, W}, 5, ys, NULL);
  if (!f) fail_msg("%s", rg_errmsg(C));
  rg_tensor *vals[3] = {tens_rand(RG_FLOAT64, 3, SHAPE(PT, PB, PH), -1, 1),
                        tens_rand(RG_FLOAT64, 2, SHAPE(PB, PH), -1, 1),
                        tens_rand(RG_FLOAT64, 2, SHAPE(PH, PH), -0.1, 0.1)};
  static double h[PB * PH], hn[PB * PH];
  rg_tensor *res[5];
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(rg_function_call(f, vals, res), RG_OK);
    for (int i = 0; i < PB * PH; i++) h[i] = rg_tensor_get_f64(vals[1], i);
    for (int t = 0; t < PT; t++) {
      for (int b = 0; b < PB; b++)
        for (int j = 0; j < PH; j++) {
          double a = rg_tensor_get_f64(vals[0], (t * PB + b) * PH + j);
          for (int k = 0; k < PH; k++) a += h[b * PH + k] * rg_tensor_get_f64(vals[2], k * PH + j);
          hn[b * PH + j] = tanh(a);
        }
      memcpy(h, hn, sizeof h);
      for (int b = 0; b < PB; b++)
        for (int j = 0; j < PH; j++) {
          int64_t e = (t * PB + b) * PH + j;
          double want = h[b * PH + j];
          assert_true(fabs(rg_tensor_get_f64(res[0], e) - want) < 1e-12);
          assert_true(fabs(rg_tensor_get_f64(res[1], e) - want) < 1e-12);
          assert_true(fabs(rg_tensor_get_f64(res[2], e) - 2 * want) < 1e-12);
          assert_true(fabs(rg_tensor_get_f64(res[3], (t * PH + j) * PB + b) - want) < 1e-12);
        }
      for (int e = 0; e < PH * PH; e += 97)
        assert_true(rg_tensor_get_f64(res[4], t * PH * PH + e) == rg_tensor_get_f64(vals[2], e));
    }
    for (int i = 0; i < 5; i++) rg_tensor_free(res[i]);
  }
  rg_function_free(f);
  for (int i = 0; i < 3; i++) rg_tensor_free(vals[i]);
}

/* store_steps: the same Fibonacci keeping 1, 2, 3 and 20 steps. */
static void test_store_steps(void **st) {
  for (int keep = 1; keep <= 4; keep++) {
    int64_t s = keep == 4 ? 20 : keep;
    rg_variable *a = rg_input(C, NULL, rg_type_scalar(RG_INT64)), *b = rg_input(C, NULL, rg_type_scalar(RG_INT64));
    rg_variable *out = rg_add(a, b);
    rg_fgraph *g = rg_fgraph_new(C, 2, (rg_variable *[]){a, b}, 1, &out, 0);
    rg_scan_info info = {.n_mit_sot = 1, .truncate_gradient = -1, .mit_sot_ntaps = (int[]){2},
                         .mit_sot_taps = (const int64_t *[]){SHAPE(-2, -1)}, .store_steps = &s};
    const rg_op *op = rg_op_scan(C, &info, g);
    if (!op) fail_msg("%s", rg_errmsg(C));
    rg_variable *n = rg_input(C, "n", rg_type_scalar(RG_INT64));
    rg_variable *init = rg_constant_data(C, RG_INT64, 1, SHAPE(2), SHAPE(0, 1));
    rg_variable *y = rg_apply(C, op, 2, (rg_variable *[]){n, init});
    assert_non_null(y);
    rg_tensor *nv = tens_i(RG_INT64, 0, NULL, SHAPE(10));
    rg_tensor *r = run1(1, &n, y, &nv);
    int64_t want[10], p = 0, q = 1;
    for (int i = 0; i < 10; i++) want[i] = p + q, p = q, q = want[i];
    int64_t rows = s < 10 ? s : 10;
    assert_int_equal(r->shape[0], rows);
    for (int i = 0; i < rows; i++) assert_int_equal(rg_tensor_get_i64(r, i), want[10 - rows + i]);
    rg_tensor_free(r);
    rg_tensor_free(nv);
  }
}

/* A hand-built mit-mot: buffer b, input taps 0 1, output tap 1:
 * b[t+1] = b[t] + b[t+1] * 2 for t = 0..n-1 (the buffer is the output). */
static const rg_op *doubling_mit_mot(void) {
  rg_variable *a = rg_input(C, NULL, rg_type_scalar(RG_FLOAT64)), *b = rg_input(C, NULL, rg_type_scalar(RG_FLOAT64));
  rg_variable *out = rg_add(a, rg_mul(b, rg_scalar_float(C, 2)));
  rg_fgraph *g = rg_fgraph_new(C, 2, (rg_variable *[]){a, b}, 1, &out, 0);
  rg_scan_info info = {.n_mit_mot = 1, .truncate_gradient = -1, .mit_mot_nin = (int[]){2},
                       .mit_mot_in_taps = (const int64_t *[]){SHAPE(0, 1)}, .mit_mot_nout = (int[]){1},
                       .mit_mot_out_taps = (const int64_t *[]){SHAPE(1)}};
  const rg_op *op = rg_op_scan(C, &info, g);
  if (!op) fail_msg("%s", rg_errmsg(C));
  return op;
}

static void test_mit_mot(void **st) {
  const rg_op *op = doubling_mit_mot();
  rg_variable *buf = var_u(RG_FLOAT64, 1);
  rg_variable *y = rg_apply(C, op, 2, (rg_variable *[]){rg_scalar_int(C, 4), buf});
  assert_non_null(y);
  rg_tensor *bv = tens(RG_FLOAT64, 1, SHAPE(5), VALS(1, 2, 3, 4, 5));
  rg_tensor *r = run1(1, &buf, y, &bv);
  double w[5] = {1, 2, 3, 4, 5};
  for (int t = 0; t < 4; t++) w[t + 1] = w[t] + w[t + 1] * 2;
  for (int i = 0; i < 5; i++) assert_true(rg_tensor_get_f64(r, i) == w[i]);
  assert_true(rg_tensor_get_f64(bv, 1) == 2); /* the input is not changed */
  rg_tensor_free(r);
  /* too short a buffer */
  rg_tensor *shortv = tens(RG_FLOAT64, 1, SHAPE(3), NULL);
  char *msg = run_err(1, &buf, y, &shortv);
  assert_non_null(strstr(msg, "mit-mot 0 has 3 rows"));
  free(msg);
  rg_tensor_free(shortv);
  rg_tensor_free(bv);
}

/* scan_inplace: a mit-mot buffer computed in the graph and read by the
 * Scan alone is overwritten in place (the op is marked, the values stay);
 * a buffer something else reads, or a graph input, is not. */
static void test_mit_mot_in_place(void **st) {
  const rg_op *op = doubling_mit_mot();
  rg_variable *x = var(RG_FLOAT64, 1, SHAPE(5));
  rg_variable *buf = rg_add(x, rg_constant_scalar(C, RG_FLOAT64, 0.5)); /* computed: may be overwritten */
  rg_variable *y = rg_apply(C, op, 2, (rg_variable *[]){rg_scalar_int(C, 4), buf});
  rg_variable *both = rg_add(y, buf); /* the buffer read again after the loop */
  rg_tensor *xv = tens(RG_FLOAT64, 1, SHAPE(5), VALS(0.5, 1.5, 2.5, 3.5, 4.5));
  double w[5] = {1, 2, 3, 4, 5};
  for (int t = 0; t < 4; t++) w[t + 1] = w[t] + w[t + 1] * 2;
  for (int pass = 0; pass < 2; pass++) {
    rg_variable *o = pass ? both : y;
    rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &o, RG_FG_CLONE);
    rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "scan_inplace"), NULL);
    const rg_node *sn = NULL;
    for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
      if (n->op->code == RG_OP_SCAN) sn = n;
    assert_non_null(sn);
    assert_int_equal(sn->op->inplace >= 0, pass == 0); /* not when the buffer is read after */
    rg_variable *fo = rg_fgraph_output(fg, 0), *fi = rg_fgraph_input(fg, 0);
    rg_tensor *r = run1(1, &fi, fo, &xv);
    for (int i = 0; i < 5; i++) assert_true(rg_tensor_get_f64(r, i) == w[i] + (pass ? i + 1.0 : 0));
    rg_tensor_free(r);
  }
  /* compiled: the mark survives the rewriting of the inner graph (the
   * linked Scan destroys its buffer's cell instead of copying it) */
  rg_function *f = rg_compile(C, 1, &x, 1, &y, NULL);
  assert_non_null(f);
  const char *dump = tu_function_dump(f);
  const char *line = strstr(dump, " scan ");
  assert_non_null(line);
  const char *eol = strchr(line, '\n'), *mark = strstr(line, " destroys c");
  assert_true(mark && mark < eol);
  rg_tensor *r = NULL;
  for (int call = 0; call < 3; call++) {
    assert_int_equal(rg_function_call(f, &xv, &r), RG_OK);
    for (int i = 0; i < 5; i++) assert_true(rg_tensor_get_f64(r, i) == w[i]);
    rg_tensor_free(r);
  }
  rg_function_free(f);
  /* a graph input as the buffer: never marked */
  rg_variable *in = var(RG_FLOAT64, 1, SHAPE(5));
  rg_variable *yi = rg_apply(C, op, 2, (rg_variable *[]){rg_scalar_int(C, 4), in});
  rg_fgraph *fg = rg_fgraph_new(C, 1, &in, 1, &yi, RG_FG_CLONE);
  rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "scan_inplace"), NULL);
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
    if (n->op->code == RG_OP_SCAN) assert_true(n->op->inplace < 0);
  rg_tensor_free(xv);
}

/* x_t = 0.5 x_{t-1} + s_t on vectors of 3 (the small elementwise path),
 * from a contiguous sequence and from a strided one (the general path). */
static int step_affine(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_add(rg_mul(rg_scalar_float(c, 0.5), in[1]), in[0]);
  return RG_OK;
}

/* The trace of step_affine over sequence s from x0. */
static rg_variable *affine_scan(rg_variable *s, rg_variable *x0) {
  rg_scan_seq seq = {.x = s};
  rg_scan_output o = {.init = x0};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .fn = step_affine,
                     .truncate_gradient = -1};
  rg_variable *y;
  scan_or_fail(&sp, &y);
  return y;
}

static void test_small_vectors(void **st) {
  rg_variable *s = var(RG_FLOAT64, 2, SHAPE(U, 3)), *x0 = var(RG_FLOAT64, 1, SHAPE(3));
  rg_variable *y = affine_scan(s, x0);
  rg_tensor *big = tens_rand(RG_FLOAT64, 2, SHAPE(3, 12), -1, 1);
  rg_tensor *strided = rg_tensor_view(big, 2, SHAPE(6, 3), SHAPE(16, 96), 0); /* big[:, 0:12:2].T */
  rg_tensor *cont = rg_tensor_copy(strided);
  rg_tensor *xv = tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, -2, 3));
  for (int which = 0; which < 2; which++) {
    rg_tensor *vals[2] = {which ? strided : cont, xv};
    rg_tensor *r = run1(2, (rg_variable *[]){s, x0}, y, vals);
    assert_int_equal(r->shape[0], 6);
    double h[3] = {1, -2, 3};
    for (int t = 0; t < 6; t++)
      for (int j = 0; j < 3; j++) {
        h[j] = 0.5 * h[j] + rg_tensor_get_f64(cont, t * 3 + j);
        assert_true(fabs(rg_tensor_get_f64(r, t * 3 + j) - h[j]) < 1e-12);
      }
    rg_tensor_free(r);
  }
  rg_tensor_free(xv);
  rg_tensor_free(cont);
  rg_tensor_free(strided);
  rg_tensor_free(big);
}

/* A step that fusion makes one composite (two outputs, a scalar constant
 * and a 0-d non-sequence inside) still runs as flat elementwise loops, the
 * composite's inner ops among them, and gives the values of the loop by
 * hand and of the unfused step; in float32 too, where the literal 0.5 is a
 * float64 constant the plan converts once. */
static void fused_small_step(const char *dt, double tol) {
  char text[600];
  snprintf(text, sizeof text,
           "(graph (input s %s (7 3)) (input x0 %s (3)) (input a %s ())"
           " (define (xs ys) (scan (lambda (s_t x a)"
           "   (define u (mul a x))"
           "   (values (add (tanh (add u s_t)) (mul u 0.5)) (mul u u)))"
           " (sequences s) (outputs-info x0 none) (non-sequences a)))"
           " (output xs) (output ys))", dt, dt, dt);
  rg_fgraph *fg = rg_graph_read(C, "fused.graph", text, strlen(text));
  assert_non_null(fg);
  rg_dtype dtype = rg_fgraph_input(fg, 0)->type->dtype;
  rg_variable *ins[3] = {rg_fgraph_input(fg, 0), rg_fgraph_input(fg, 1), rg_fgraph_input(fg, 2)};
  rg_variable *outs[2] = {rg_fgraph_output(fg, 0), rg_fgraph_output(fg, 1)};
  rg_tensor *vals[3] = {tens_rand(dtype, 2, SHAPE(7, 3), -1, 1), tens_rand(dtype, 1, SHAPE(3), -1, 1),
                        tens_rand(dtype, 0, NULL, -1, 1)};
  rg_tensor *res[2][2];
  const char *queries[2] = {"fast_run", "fast_run -fusion"};
  for (int q = 0; q < 2; q++) {
    rg_compile_opts o = {.mode = {.query = queries[q]}, .profile = true};
    rg_function *f = rg_compile(C, 3, ins, 2, outs, &o);
    assert_non_null(f);
    assert_int_equal(rg_function_call(f, vals, res[q]), RG_OK);
    assert_non_null(strstr(tu_function_profile(f), "(its steps ran as flat elementwise loops: no time per node)"));
    rg_function_free(f);
  }
  rg_fgraph *fused = rg_graph_read(C, "fused.graph", text, strlen(text)); /* the step as compiling makes it */
  assert_int_equal(rgb_rewrite_scans(C, fused, rg_db_query(C, rg_std_db(C), "fast_run"), NULL), RG_OK);
  int nscans;
  rg_node *scan = tu_first_scan(fused, &nscans);
  assert_int_equal(nscans, 1);
  assert_int_equal(tu_count_inner(scan, RG_OP_COMPOSITE), 1);
  assert_int_equal(tu_count_inner(scan, RG_OP_TANH), 0);
  double h[3], a = rg_tensor_get_f64(vals[2], 0);
  for (int j = 0; j < 3; j++) h[j] = rg_tensor_get_f64(vals[1], j);
  for (int t = 0; t < 7; t++)
    for (int j = 0; j < 3; j++) {
      double u = a * h[j];
      h[j] = tanh(u + rg_tensor_get_f64(vals[0], t * 3 + j)) + u * 0.5;
      for (int q = 0; q < 2; q++) {
        assert_true(fabs(rg_tensor_get_f64(res[q][0], t * 3 + j) - h[j]) < tol);
        assert_true(fabs(rg_tensor_get_f64(res[q][1], t * 3 + j) - u * u) < tol);
      }
      h[j] = rg_tensor_get_f64(res[0][0], t * 3 + j); /* follow the computed state (float32 rounding) */
    }
  for (int q = 0; q < 2; q++) rg_tensor_free(res[q][0]), rg_tensor_free(res[q][1]);
  for (int i = 0; i < 3; i++) rg_tensor_free(vals[i]);
}

static void test_fused_small_step(void **st) {
  fused_small_step("float64", 1e-12);
  fused_small_step("float32", 1e-5);
}

/* join{0}(x0[None], y) for a state y with initial value x0 (what the
 * gradient of a Scan reads) becomes a view of the buffer the Scan keeps
 * the state in: no join runs.  Not when something overwrites the joined
 * value, when it is returned (or a view of it), or when the row in front
 * is not the initial value. */
static void test_trace_with_initial_row(void **st) {
  rg_variable *s = var(RG_FLOAT64, 2, SHAPE(U, 3)), *x0 = var(RG_FLOAT64, 1, SHAPE(3));
  rg_variable *z = var(RG_FLOAT64, 1, SHAPE(3));
  rg_variable *y = affine_scan(s, x0);
  rg_variable *full = rg_join(0, 2, (rg_variable *[]){rg_dimshuffle(x0, 2, (int64_t[]){-1, 0}), y});
  rg_variable *other = rg_join(0, 2, (rg_variable *[]){rg_dimshuffle(z, 2, (int64_t[]){-1, 0}), y});
  rg_variable *cases[4][2] = {
      {rg_sum(full, 1, (int64_t[]){0}), y},                            /* folded */
      {rg_add(full, rg_scalar_float(C, 1.0)), y},            /* overwritten in place */
      {rg_dimshuffle(full, 2, (int64_t[]){1, 0}), y},        /* returned as a view */
      {rg_sum(other, 1, (int64_t[]){0}), y},                           /* another row in front */
  };
  rg_tensor *sv = tens_rand(RG_FLOAT64, 2, SHAPE(5, 3), -1, 1);
  rg_tensor *xv = tens(RG_FLOAT64, 1, SHAPE(3), VALS(1, -2, 3));
  rg_tensor *zv = tens(RG_FLOAT64, 1, SHAPE(3), VALS(7, 8, 9));
  double h[6][3] = {{1, -2, 3}};
  for (int t = 0; t < 5; t++)
    for (int j = 0; j < 3; j++) h[t + 1][j] = 0.5 * h[t][j] + rg_tensor_get_f64(sv, t * 3 + j);
  for (int c = 0; c < 5; c++) { /* case 4: case 0 on the mirror backend (a device's copies) */
    rg_compile_opts opts = {.mode = {.backend = c == 4 ? "mirror" : NULL}};
    rg_function *f = rg_compile(C, 3, (rg_variable *[]){s, x0, z}, 2, cases[c % 4], &opts);
    assert_non_null(f);
    assert_int_equal(strstr(tu_function_dump(f), " join ") == NULL, c % 4 == 0);
    for (int call = 0; call < 2; call++) {
      rg_tensor *r[2];
      assert_int_equal(rg_function_call(f, (rg_tensor *[]){sv, xv, zv}, r), RG_OK);
      for (int t = 0; t < 5; t++)
        for (int j = 0; j < 3; j++) assert_true(fabs(rg_tensor_get_f64(r[1], t * 3 + j) - h[t + 1][j]) < 1e-12);
      for (int t = 0; t < 6; t++)
        for (int j = 0; j < 3; j++) {
          double want = t == 0 && c == 3 ? rg_tensor_get_f64(zv, j) : h[t][j];
          if (c == 1) assert_true(fabs(rg_tensor_get_f64(r[0], t * 3 + j) - (want + 1)) < 1e-12);
          if (c == 2) assert_true(fabs(rg_tensor_get_f64(r[0], j * 6 + t) - want) < 1e-12);
        }
      if (c % 4 == 0 || c == 3) {
        double sum[3] = {0, 0, 0};
        for (int t = 0; t < 6; t++)
          for (int j = 0; j < 3; j++) sum[j] += t == 0 && c == 3 ? rg_tensor_get_f64(zv, j) : h[t][j];
        for (int j = 0; j < 3; j++) assert_true(fabs(rg_tensor_get_f64(r[0], j) - sum[j]) < 1e-12);
      }
      rg_tensor_free(r[0]);
      rg_tensor_free(r[1]);
    }
    rg_function_free(f);
  }
  rg_tensor_free(sv);
  rg_tensor_free(xv);
  rg_tensor_free(zv);
}

/* A state whose shape changes at run time is an error, not a crash. */
static int step_grow(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u, void *ud) {
  outs[0] = rg_add(in[0], in[1]); /* (?) + (?) broadcasts a size-1 state against v */
  return RG_OK;
}

static void test_runtime_errors(void **st) {
  rg_variable *v = var_u(RG_FLOAT64, 1), *h0 = var_u(RG_FLOAT64, 1);
  rg_scan_output o = {.init = h0};
  rg_scan_spec sp = {.noutputs = 1, .outputs = &o, .n_steps = rg_scalar_int(C, 3), .nnon_seqs = 1,
                     .non_seqs = &v, .fn = step_grow, .truncate_gradient = -1};
  rg_variable *y;
  scan_or_fail(&sp, &y);
  rg_tensor *vals[2] = {tens(RG_FLOAT64, 1, SHAPE(3), NULL), tens(RG_FLOAT64, 1, SHAPE(2), NULL)};
  char *msg = run_err(2, (rg_variable *[]){h0, v}, y, vals);
  assert_non_null(strstr(msg, "scan"));
  free(msg);
  for (int i = 0; i < 2; i++) rg_tensor_free(vals[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cumsum),
      cmocka_unit_test(test_fibonacci),
      cmocka_unit_test(test_sequence_taps_backwards),
      cmocka_unit_test(test_nit_sot_unknown_shape_non_seqs),
      cmocka_unit_test(test_free_variable),
      cmocka_unit_test(test_until),
      cmocka_unit_test(test_ifelse_inside),
      cmocka_unit_test(test_nested_profile),
      cmocka_unit_test(test_scan_in_scan),
      cmocka_unit_test(test_rnn_matrix_state),
      cmocka_unit_test(test_store_steps),
      cmocka_unit_test(test_preallocated_rows),
      cmocka_unit_test(test_mit_mot),
      cmocka_unit_test(test_mit_mot_in_place),
      cmocka_unit_test(test_trace_with_initial_row),
      cmocka_unit_test(test_small_vectors),
      cmocka_unit_test(test_fused_small_step),
      cmocka_unit_test(test_runtime_errors),
  };
  return cmocka_run_group_tests(tests, cpu_setup, NULL);
}
