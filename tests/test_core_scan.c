/*
 * test_core_scan.c — the Scan op in core: the layout helpers (ScanArgs),
 * the op's checks and their messages, output types and shape inference,
 * equality, hashing and merging of equal scans, the invariant checker,
 * printing and reading back (ops, graph files), and the scan form of
 * graph files with each of its errors at file:line:col.
 */
#include "tests/testutil.h"

#include <string.h>

#include "core/core-impl.h"
#include "relgraph/scan.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

static rg_variable *in(const char *name, rg_dtype dt, int nd, const int64_t *shape) {
  return rg_input(C, name, rg_type_new(dt, nd, shape));
}

/* ------------------------------------------------------------------ layout */

static void test_positions(void **st) {
  /* 2 sequences (taps 0; -1 1), a mit-mot (in 0 1, out 1), a mit-sot
   * (-2 -1), a sit-sot, 2 nit-sots, 1 non-sequence, until */
  rg_scan_info s = {.n_seqs = 2, .n_mit_mot = 1, .n_mit_sot = 1, .n_sit_sot = 1, .n_nit_sot = 2,
                    .n_non_seqs = 1, .until = true, .truncate_gradient = -1,
                    .seq_ntaps = (int[]){1, 2}, .seq_taps = (const int64_t *[]){SHAPE(0), SHAPE(-1, 1)},
                    .mit_mot_nin = (int[]){2}, .mit_mot_in_taps = (const int64_t *[]){SHAPE(0, 1)},
                    .mit_mot_nout = (int[]){1}, .mit_mot_out_taps = (const int64_t *[]){SHAPE(1)},
                    .mit_sot_ntaps = (int[]){2}, .mit_sot_taps = (const int64_t *[]){SHAPE(-2, -1)}};
  assert_int_equal(rg_scan_n_outer_in(&s), 1 + 2 + 1 + 1 + 1 + 2 + 1);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_N_STEPS, 0), 0);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_SEQ, 1), 2);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, 0), 3);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_MIT_SOT, 0), 4);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, 0), 5);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, 1), 7);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, 0), 8);
  assert_int_equal(rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, 1), -1);
  assert_int_equal(rg_scan_n_inner_in(&s), 3 + 2 + 2 + 1 + 1);
  assert_int_equal(rg_scan_inner_in(&s, RG_SCAN_SEQ, 1, 1), 2);
  assert_int_equal(rg_scan_inner_in(&s, RG_SCAN_MIT_MOT, 0, 1), 4);
  assert_int_equal(rg_scan_inner_in(&s, RG_SCAN_MIT_SOT, 0, 0), 5);
  assert_int_equal(rg_scan_inner_in(&s, RG_SCAN_SIT_SOT, 0, 0), 7);
  assert_int_equal(rg_scan_inner_in(&s, RG_SCAN_NON_SEQ, 0, 0), 8);
  assert_int_equal(rg_scan_inner_in(&s, RG_SCAN_NIT_SOT, 0, 0), -1);
  assert_int_equal(rg_scan_n_inner_out(&s), 1 + 1 + 1 + 2 + 1);
  assert_int_equal(rg_scan_inner_out(&s, RG_SCAN_MIT_MOT, 0, 0), 0);
  assert_int_equal(rg_scan_inner_out(&s, RG_SCAN_MIT_SOT, 0, 0), 1);
  assert_int_equal(rg_scan_inner_out(&s, RG_SCAN_NIT_SOT, 1, 0), 4);
  assert_int_equal(rg_scan_inner_out(&s, RG_SCAN_UNTIL, 0, 0), 5);
  assert_int_equal(rg_scan_n_outer_out(&s), 5);
  assert_int_equal(rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, 0), 2);
  assert_int_equal(rg_scan_outer_out(&s, RG_SCAN_NON_SEQ, 0), -1);
}

/* ------------------------------------------------------------------ the op */

/* cumsum over x (float64 (n)) from 0.0 */
static rg_node *cumsum(rg_variable *x, rg_variable **ys) {
  rg_variable *xt = in("x_t", RG_FLOAT64, 0, NULL), *acc = in("acc", RG_FLOAT64, 0, NULL);
  rg_variable *step_out = rg_add(acc, xt);
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = rg_constant_scalar(C, RG_FLOAT64, 0)};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .nstep_in = 2,
                     .step_in = (rg_variable *[]){xt, acc}, .step_out = &step_out, .truncate_gradient = -1};
  rg_node *n = rg_scan(C, &sp, ys);
  if (!n) fail_msg("%s", rg_errmsg(C));
  return n;
}

static void test_types_and_shapes(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 1, SHAPE(7)), *ys;
  rg_node *n = cumsum(x, &ys);
  assert_int_equal(ys->type->ndim, 1);
  assert_int_equal(ys->type->shape[0], 7);
  rg_variable **sh = rg_infer_shape(C, n, 0);
  int64_t k;
  assert_true(rg_constant_get_i64(sh[0], &k) && k == 7);
  /* unknown length: the shape follows n_steps */
  rg_variable *xu = in("xu", RG_FLOAT64, 1, SHAPE(-1)), *yu;
  rg_node *nu = cumsum(xu, &yu);
  assert_int_equal(yu->type->shape[0], RG_DIM_UNKNOWN);
  sh = rg_infer_shape(C, nu, 0);
  assert_non_null(sh[0]);
  assert_false(rg_constant_get_i64(sh[0], &k));
}

static void test_equal_hash_merge(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 1, SHAPE(-1)), *a, *b;
  rg_node *na = cumsum(x, &a), *nb = cumsum(x, &b);
  assert_true(rg_op_equal(na->op, nb->op));
  assert_int_equal(rg_op_hash(na->op), rg_op_hash(nb->op));
  rg_variable *sum = rg_add(a, b);
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &sum, 0);
  assert_non_null(fg);
  size_t before = rg_fgraph_nnodes(fg), merged = 0;
  assert_int_equal(rg_fgraph_merge(fg, &merged), RG_OK);
  assert_true(rg_fgraph_nnodes(fg) < before);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  /* a different step is a different op */
  rg_variable *xt = in("x_t", RG_FLOAT64, 0, NULL), *acc = in("acc", RG_FLOAT64, 0, NULL);
  rg_variable *m = rg_mul(acc, xt), *c;
  rg_scan_seq seq = {.x = x};
  rg_scan_output o = {.init = rg_constant_scalar(C, RG_FLOAT64, 1)};
  rg_scan_spec sp = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .nstep_in = 2,
                     .step_in = (rg_variable *[]){xt, acc}, .step_out = &m, .truncate_gradient = -1};
  rg_node *nc = rg_scan(C, &sp, &c);
  assert_non_null(nc);
  assert_false(rg_op_equal(na->op, nc->op));
}

static void test_print_parse(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 1, SHAPE(-1)), *ys;
  rg_node *n = cumsum(x, &ys);
  const rg_op *back = rg_op_from_term(C, rg_op_term(n->op));
  assert_non_null(back);
  assert_true(rg_op_equal(back, n->op));
  /* malformed parameters are refused */
  rg_term bad = tu_read(C, "(scan 1 0 0 1 0 0 0 0 -1 (graph (input a float64 ()) (output a)))");
  assert_null(rg_op_from_term(C, bad));
  bad = tu_read(C, "(scan 0 0 0 1 0 0 0 0 -1 0 (graph (input a float64 ()) (output (lt a 1.0))))");
  assert_null(rg_op_from_term(C, bad));
  assert_non_null(strstr(rg_errmsg(C), "changes type"));
  /* until that is not a boolean scalar */
  bad = tu_read(C, "(scan 0 0 0 1 0 0 1 0 -1 0 (graph (input a float64 ()) (output a) (output a)))");
  assert_null(rg_op_from_term(C, bad));
  assert_non_null(strstr(rg_errmsg(C), "until must be a boolean scalar"));
  /* positive tap for a state */
  bad = tu_read(C, "(scan 0 0 1 0 0 0 0 0 -1 1 1 0 (graph (input a float64 ()) (output a)))");
  assert_null(rg_op_from_term(C, bad));
  assert_non_null(strstr(rg_errmsg(C), "must be negative"));
}

static int step_mismatch(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **u,
                         void *ud) {
  int64_t four = 4;
  rg_variable *v4 = rg_constant_data(c, RG_FLOAT64, 1, &four, (double[]){1, 2, 3, 4});
  outs[0] = rg_add(in[1], rg_add(in[0], v4)); /* (3) + (4): NULL, the error set */
  return RG_OK;
}

static int step_fails_silently(rg_ctx *c, int nin, rg_variable *const *in, rg_variable **outs,
                               rg_variable **u, void *ud) {
  return RG_ERR_TYPE;
}

static void test_make_node_errors(void **st) {
  rg_variable *x = in("x", RG_FLOAT64, 1, SHAPE(-1)), *ys;
  rg_node *n = cumsum(x, &ys);
  /* wrong count, wrong n_steps, a sequence of the wrong dtype, too short */
  assert_null(rg_make_node(C, n->op, 2, n->inputs));
  assert_non_null(strstr(rg_errmsg(C), "expected 3 inputs"));
  rg_variable *ins[3] = {rg_scalar_float(C, 1), x, n->inputs[2]};
  assert_null(rg_make_node(C, n->op, 3, ins));
  assert_non_null(strstr(rg_errmsg(C), "n_steps"));
  ins[0] = n->inputs[0];
  ins[1] = in("xi", RG_INT32, 1, SHAPE(-1));
  assert_null(rg_make_node(C, n->op, 3, ins));
  assert_non_null(strstr(rg_errmsg(C), "sequence 0"));
  /* a builder without sequences needs n_steps */
  rg_scan_output o = {.init = rg_scalar_float(C, 0)};
  rg_variable *acc = in("acc", RG_FLOAT64, 0, NULL), *y;
  rg_scan_spec sp = {.noutputs = 1, .outputs = &o, .nstep_in = 1, .step_in = &acc, .step_out = &acc,
                     .truncate_gradient = -1};
  assert_null(rg_scan(C, &sp, &y));
  assert_non_null(strstr(rg_errmsg(C), "n_steps"));
  /* a sequence too short for its taps, statically (2 rows for taps -1..1
   * would be zero steps, 1 row is too few) */
  rg_scan_seq q = {in("x1", RG_FLOAT64, 1, SHAPE(1)), 3, SHAPE(-1, 0, 1)};
  rg_variable *a = in("a", RG_FLOAT64, 0, NULL), *b = in("b", RG_FLOAT64, 0, NULL), *c = in("c", RG_FLOAT64, 0, NULL);
  rg_variable *s3 = rg_add(rg_add(a, b), c);
  rg_scan_output none = {0};
  rg_scan_spec sq = {.nseqs = 1, .seqs = &q, .noutputs = 1, .outputs = &none, .nstep_in = 3,
                     .step_in = (rg_variable *[]){a, b, c}, .step_out = &s3, .truncate_gradient = -1};
  assert_null(rg_scan(C, &sq, &y));
  assert_non_null(strstr(rg_errmsg(C), "too short for its taps"));
  /* a step whose construction failed (the error is sticky, the output
   * NULL) reports that error, not a missing output */
  rg_clear_error(C);
  rg_scan_seq q3 = {.x = in("x3", RG_FLOAT64, 1, SHAPE(-1))};
  rg_scan_output acc0 = {.init = rg_constant_data(C, RG_FLOAT64, 1, SHAPE(3), (double[]){0, 0, 0})};
  rg_scan_spec sb = {.nseqs = 1, .seqs = &q3, .noutputs = 1, .outputs = &acc0, .fn = step_mismatch,
                     .truncate_gradient = -1};
  assert_null(rg_scan(C, &sb, &y));
  assert_non_null(strstr(rg_errmsg(C), "do not broadcast"));
  /* a step function that fails without a message does not leave the
   * message of an earlier error standing for its own */
  sb.fn = step_fails_silently;
  assert_null(rg_scan(C, &sb, &y));
  assert_non_null(strstr(rg_errmsg(C), "the step function failed (code"));
  /* a step graph of too few inputs for the taps (it read past step_in),
   * and a step given twice */
  rg_clear_error(C);
  rg_scan_seq q2 = {in("x2", RG_FLOAT64, 1, SHAPE(-1)), 2, SHAPE(-1, 1)};
  rg_variable *d = rg_sub(b, a);
  rg_scan_spec s1 = {.nseqs = 1, .seqs = &q2, .noutputs = 1, .outputs = &none, .nstep_in = 1,
                     .step_in = (rg_variable *[]){a, b}, .step_out = &d, .truncate_gradient = -1};
  assert_null(rg_scan(C, &s1, &y));
  assert_non_null(strstr(rg_errmsg(C), "the step graph takes 1 inputs, the scan passes 2"));
  rg_clear_error(C);
  s1.nstep_in = 2;
  s1.fn = step_mismatch;
  assert_null(rg_scan(C, &s1, &y));
  assert_non_null(strstr(rg_errmsg(C), "both fn and step_in/step_out given"));
}

/* ------------------------------------------------------------------ graph files */

static rg_fgraph *read(const char *text) { return rg_graph_read(C, "t.graph", text, strlen(text)); }

static void expect_error(const char *text, const char *where, const char *what) {
  assert_null(read(text));
  const char *msg = rg_errmsg(C);
  if (!strstr(msg, where) || !strstr(msg, what)) fail_msg("got: %s\nwant %s ... %s", msg, where, what);
}

static const char *const fib_src =
    "(graph\n"
    "  (define fib (scan (lambda (a b) (add a b))\n"
    "                    (outputs-info ((constant int64 (2) (0 1)) (taps -2 -1)))\n"
    "                    (n-steps 10)))\n"
    "  (output fib))\n";

static const char *const rnn_src =
    "(graph (input x float32 (? 3)) (input h0 float32 (3)) (input W float32 (3 3))\n"
    "  (define (hs ys) (scan (lambda (x_t h W2)\n"
    "                          (define h2 (tanh (add (dot h W2) x_t)))\n"
    "                          (values h2 (sum h2)))\n"
    "                        (sequences x) (outputs-info h0 none) (non-sequences W)))\n"
    "  (output hs) (output (nth 1 (scan (lambda (x_t h) (values (add h x_t) (mul h W)))\n"
    "                              (sequences x) (outputs-info h0 none)))))\n";

static void roundtrip(const char *src) {
  rg_fgraph *g = read(src);
  if (!g) fail_msg("%s", rg_errmsg(C));
  assert_int_equal(rg_fgraph_check(g), RG_OK);
  char *text = rg_graph_to_string(C, g);
  rg_fgraph *h = read(text);
  if (!h) fail_msg("%s\n%s", rg_errmsg(C), text);
  assert_string_equal(rg_graph_to_string(C, h), text);
  assert_true(rg_equal_computations(g->nout, g->outputs, h->outputs, g->nin, g->inputs, h->inputs));
}

static void test_file_forms(void **st) {
  roundtrip(fib_src);
  roundtrip(rnn_src);
  /* free variables become non-sequences; local defines stay local */
  rg_fgraph *g = read("(graph (input x float64 (?)) (input w float64 ())\n"
                      "  (define k (mul w 2.0))\n"
                      "  (output (scan (lambda (x_t h) (define t (mul h k)) (add t x_t))\n"
                      "                (sequences x) (outputs-info 0.0))))");
  if (!g) fail_msg("%s", rg_errmsg(C));
  rg_scan_info s;
  assert_true(rg_scan_info_of(g->outputs[0]->owner->op, &s));
  assert_int_equal(s.n_non_seqs, 1);
  /* k, computed outside, is the non-sequence: the step holds h * k and
   * t + x_t, not k's own product */
  rg_fgraph *inner = rg_op_inner_graph(g->outputs[0]->owner->op);
  int nodes = 0;
  for (rg_node *n = rg_fgraph_first(inner); n; n = rg_fgraph_next(n)) nodes++;
  assert_int_equal(nodes, 2);
  assert_true(rg_fgraph_input(inner, 2)->type->ndim == 0);
  /* a static step count: one constant for n_steps and the nit-sot's
   * length, two equal ones after reading back */
  roundtrip("(graph (input x float64 (6 2)) (input w float64 (2))\n"
            "  (output (scan (lambda (x_t w) (exp (mul x_t w))) (sequences x) (outputs-info none) (non-sequences w))))");
  /* taps, backwards, truncate-gradient */
  roundtrip("(graph (input x float64 (?)) (output (scan (lambda (a b c) (add a (sub c b)))\n"
            "  (sequences (x (taps -1 0 1))) (outputs-info none) (go-backwards #t)\n"
            "  (truncate-gradient 5))))");
  /* until */
  roundtrip("(graph (output (scan (lambda (h) (values (mul h 2.0) (until (gt h 10.0))))\n"
            "  (outputs-info 1.0) (n-steps 100))))");
}

static void test_file_errors(void **st) {
  expect_error("(graph (input x float64 (?))\n (output (scan (lambda (a b) (values a b))\n"
               "  (sequences x) (outputs-info 0.0))))", "t.graph:2:", "the step returns 2 values, outputs-info has 1");
  expect_error("(graph (input x float64 (?))\n (output (scan (lambda (a b) (lt b a))\n"
               "  (sequences x) (outputs-info 0.0))))", "t.graph:2:", "changes type across a step");
  expect_error("(graph\n (output (scan (lambda (a b) (add a b))\n"
               "  (outputs-info ((constant int64 (2) (0 1)) (taps -2 1))) (n-steps 3))))", "t.graph:3:", "wrong sign");
  expect_error("(graph (input x float64 (1))\n (output (scan (lambda (a b c) a)\n"
               "  (sequences (x (taps -1 0 1))) (outputs-info none))))", "t.graph:2:", "too short for its taps");
  expect_error("(graph\n (output (scan (lambda (h) (values (add h 1.0) (until h)))\n"
               "  (outputs-info 1.0) (n-steps 3))))", "t.graph:2:", "until must be a boolean scalar");
  expect_error("(graph (input x float64 (?))\n (output (scan (lambda (a b) (add a nowhere))\n"
               "  (sequences x) (outputs-info 0.0))))", "t.graph:2:", "unknown name 'nowhere'");
  expect_error("(graph (input x float64 (?))\n (output (scan (lambda (a) (add a a))\n"
               "  (sequences x) (outputs-info 0.0))))", "t.graph:2:", "the lambda takes 1 parameter");
  expect_error("(graph\n (output (scan (lambda (a) a) (outputs-info 0.0))))", "t.graph:2:", "needs (n-steps E)");
  expect_error("(graph\n (output (scan (lambda (a) a) (outputs-info 0.0) (n-steps 2) (bogus 1))))",
               "t.graph:2:", "unknown scan option");
  expect_error("(graph (input x float64 (?))\n (output (scan (lambda (a b) (add a b))\n"
               "  (sequences x) (outputs-info 0.0 none))))", "t.graph:2:", "the step returns 1 value, outputs-info has 2");
  /* a local define is not visible after the lambda */
  expect_error("(graph (input x float64 (?))\n (define y (scan (lambda (a b) (define t (add a b)) t)\n"
               "  (sequences x) (outputs-info 0.0)))\n (output t))", "t.graph:4:", "unknown name 't'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_types_and_shapes),
      cmocka_unit_test(test_equal_hash_merge),
      cmocka_unit_test(test_print_parse),
      cmocka_unit_test(test_make_node_errors),
      cmocka_unit_test(test_file_forms),
      cmocka_unit_test(test_file_errors),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
