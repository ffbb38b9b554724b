/*
 * test_rewrite_scan_mem.c — the Scan rewrites of the outer graph.
 *
 * scan_save_mem (rewrites/scan-savemem.c): a
 * trace read only at its end keeps only its last rows.  For trace[-1],
 * trace[-k:] and constant negative indices, on sit-sot, mit-sot and
 * nit-sot outputs: the store_steps the op gets, the rows of the trace the
 * executor hands out, and the values against the unrewritten graph; and
 * the cases where the whole trace must stay (a graph output, a sum over
 * it, a positive index).  Read only at constant rows from the start, the
 * loop runs only the steps up to the last row read.
 *
 * scan_merge_inouts, scan_prune_sit_sots and scan_prune_nit_sots
 * (rewrites/scan-outputs.c): outputs computing the same are one, unread
 * states are not carried, unread nit-sots are not recorded.
 *
 * scan_merge (rewrites/scan-merge.c): loops of the same length, neither
 * reading the other, become one.
 *
 * push_out_scan_output (rewrites/scan-pushadd.c): an accumulated product
 * kept at its end becomes one product after the loop.
 *
 * scan_push_out (rewrites/scan-pushout.c): loop-invariant work computed
 * once before the loop, per-step work on sequences computed for all steps
 * at once (the LSTM's input projection as one product), checked by the
 * structure of the step after the rewrite and the values against the
 * unrewritten graph.
 */
#include "tests/testutil.h"

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "relgraph/scan.h"

typedef rg_variable *V;

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

#define INPUTS "(input x float64 (7 3)) (input h0 float64 (3)) (input f0 float64 (2 3)) "
#define SIT "(scan (lambda (x_t h) (tanh (add h x_t))) (sequences x) (outputs-info h0))"
#define MIT "(scan (lambda (a b) (add (mul a 0.5) (sin b))) (outputs-info (f0 (taps -2 -1))) (n-steps 9))"
#define NIT "(scan (lambda (x_t) (exp x_t)) (sequences x) (outputs-info none))"

static rg_fgraph *read_graph(const char *body) {
  char text[2048];
  snprintf(text, sizeof text, "(graph " INPUTS "%s)", body);
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s\n%s", rg_errmsg(C), text);
  return fg;
}

/* Runs the graph's outputs compiled with a query, inputs in [-0.5, 0.5). */
static void run(rg_fgraph *fg, const char *query, rg_tensor **res) { tu_run_graph(C, fg, query, -0.5, 1, res); }

/* Rewrites fg with the standard database's query to equilibrium and
 * checks it is still well formed and gives the same values, bit for bit. */
static void rewrite_same(rg_fgraph *fg, const char *query) {
  int nout = rg_fgraph_noutputs(fg);
  rg_tensor *want[8], *got[8];
  run(fg, "none", want);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), query), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  if (rg_fgraph_check(fg) != RG_OK) fail_msg("%s: %s", query, rg_errmsg(C));
  run(fg, "none", got);
  for (int k = 0; k < nout; k++) {
    assert_int_equal(rg_tensor_numel(got[k]), rg_tensor_numel(want[k]));
    for (int64_t i = 0; i < rg_tensor_numel(want[k]); i++)
      assert_true(rg_tensor_get_f64(got[k], i) == rg_tensor_get_f64(want[k], i));
    rg_tensor_free(got[k]), rg_tensor_free(want[k]);
  }
}

/* Rewrites with scan_save_mem; returns the first scan's store_steps for
 * its first trace (-1: no scan) and checks the values. */
static int64_t saved(const char *body) {
  rg_fgraph *fg = read_graph(body);
  rewrite_same(fg, "scan_save_mem");
  int64_t keep = -1;
  for (rg_node *n = rg_fgraph_first(fg); n && keep < 0; n = rg_fgraph_next(n)) {
    rg_scan_info s;
    if (n->op->code != RG_OP_SCAN || !rg_scan_info_of(n->op, &s)) continue;
    keep = s.store_steps[0];
    /* the trace the executor hands out has min(keep, steps) rows */
    if (keep > 0) assert_true(n->outputs[0]->type->shape[0] <= keep);
  }
  return keep;
}

static void test_last_rows_kept(void **st) {
  assert_int_equal(saved("(output ((subtensor -1) " SIT "))"), 1);
  assert_int_equal(saved("(output ((subtensor (-3 none)) " SIT "))"), 3);
  assert_int_equal(saved("(define t " SIT ") (output ((subtensor -1) t)) (output ((subtensor -2) t))"), 2);
  assert_int_equal(saved("(output ((subtensor -1 (0 2)) " SIT "))"), 1); /* an index on another dimension too */
}

static void test_every_trace_kind(void **st) {
  assert_int_equal(saved("(output ((subtensor -1) " MIT "))"), 1); /* buffer of max(1, 2 + 1) rows */
  assert_int_equal(saved("(output ((subtensor (-2 none)) " NIT "))"), 2);
}

static void test_whole_trace_stays(void **st) {
  assert_int_equal(saved("(output " SIT ")"), 0);
  assert_int_equal(saved("(output (sum " SIT "))"), 0);
  assert_int_equal(saved("(output ((subtensor 0) " SIT "))"), 0);
  assert_int_equal(saved("(define t " SIT ") (output ((subtensor -1) t)) (output t)"), 0);
}

/* Rewrites with scan_save_mem and checks the values; returns the first
 * scan's n_steps when it is a constant, m when it is minimum(n, m), else
 * 0 (a number of steps known only at run time). */
static int64_t steps_cut(const char *body) {
  rg_fgraph *fg = read_graph(body);
  rewrite_same(fg, "scan_save_mem");
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) {
    rg_scan_info s;
    if (n->op->code != RG_OP_SCAN || !rg_scan_info_of(n->op, &s)) continue;
    V steps = n->inputs[rg_scan_outer_in(&s, RG_SCAN_N_STEPS, 0)];
    for (int j = 0; j < s.n_nit_sot; j++) /* the nit-sots' lengths follow */
      assert_ptr_equal(n->inputs[rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, j)], steps);
    int64_t k;
    if (rg_constant_get_i64(steps, &k)) return k;
    const rg_node *m = steps->owner;
    return m && m->op->code == RG_OP_MINIMUM && rg_constant_get_i64(m->inputs[1], &k) ? k : 0;
  }
  return 0;
}

/* Read only at constant rows from the start: the loop runs only the
 * steps up to the last row read (trace[2] of a 7-step loop runs 3); a
 * number of steps known only at run time becomes minimum(n, m). */
static void test_first_rows_run(void **st) {
  assert_int_equal(steps_cut("(output ((subtensor 2) " SIT "))"), 3);
  assert_int_equal(steps_cut("(output ((subtensor 0) " MIT "))"), 1);
  assert_int_equal(steps_cut("(output ((subtensor (1 4)) " NIT "))"), 4);
  assert_int_equal(steps_cut("(output ((subtensor (none 2)) " SIT "))"), 2);
  assert_int_equal(steps_cut("(define t " SIT ") (output ((subtensor 1) t)) (output ((subtensor (0 5)) t))"), 5);
  /* a row from the end, the whole trace, or rows to the end: all 7 steps */
  assert_int_equal(steps_cut("(define t " SIT ") (output ((subtensor 1) t)) (output ((subtensor -1) t))"), 7);
  assert_int_equal(steps_cut("(define t " SIT ") (output ((subtensor 1) t)) (output (sum t))"), 7);
  assert_int_equal(steps_cut("(output ((subtensor (2 none)) " SIT "))"), 7);
}

/* A long loop read at its end: the rewrite is in fast_run, and the
 * function runs with two rows of trace. */
static void test_long_loop(void **st) {
  const char *text = "(graph (input h0 float32 (1000)) "
                     "(output ((subtensor -1) (scan (lambda (h) (mul h 0.999)) (outputs-info h0) (n-steps 100000)))))";
  rg_fgraph *fg = rg_graph_read(C, "long.graph", text, strlen(text));
  rg_variable *in = rg_fgraph_input(fg, 0), *out = rg_fgraph_output(fg, 0);
  rg_function *f = rg_compile(C, 1, &in, 1, &out, NULL);
  assert_non_null(f);
  int64_t n = 1000;
  rg_tensor *h0 = rg_tensor_new(RG_FLOAT32, 1, &n), *res;
  for (int64_t i = 0; i < n; i++) rg_tensor_set_f64(h0, i, 1.0);
  assert_int_equal(rg_function_call(f, &h0, &res), RG_OK);
  assert_true(fabs(rg_tensor_get_f64(res, 0) - pow(0.999, 100000)) < 1e-6);
  rg_tensor_free(res), rg_tensor_free(h0);
  rg_function_free(f);
}

/* ------------------------------------------------------------------ push-out */

static int count_inner(const rg_node *scan, rg_opcode code) {
  int k = 0;
  for (rg_node *n = rg_fgraph_first(rg_op_inner_graph(scan->op)); n; n = rg_fgraph_next(n)) k += n->op->code == code;
  return k;
}

static rg_node *the_scan(rg_fgraph *fg) {
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
    if (n->op->code == RG_OP_SCAN) return n;
  return NULL;
}

/* Rewrites with scan_push_out, checks the values, returns the scan. */
static rg_node *pushed(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s", rg_errmsg(C));
  int nout = rg_fgraph_noutputs(fg);
  rg_tensor *want[8], *got[8];
  run(fg, "none", want);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "scan_push_out"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  run(fg, "none", got);
  for (int k = 0; k < nout; k++) {
    for (int64_t i = 0; i < rg_tensor_numel(want[k]); i++)
      if (fabs(rg_tensor_get_f64(got[k], i) - rg_tensor_get_f64(want[k], i)) > 1e-5 * (1 + fabs(rg_tensor_get_f64(want[k], i))))
        fail_msg("output %d element %lld: %g vs %g", k, (long long)i, rg_tensor_get_f64(got[k], i), rg_tensor_get_f64(want[k], i));
    rg_tensor_free(got[k]), rg_tensor_free(want[k]);
  }
  return the_scan(fg);
}

/* dot(h, W1 + W2): the sum is computed once, outside. */
static void test_push_out_non_seq(void **st) {
  rg_node *s = pushed("(graph (input h0 float64 (3)) (input W1 float64 (3 3)) (input W2 float64 (3 3)) "
                      "(output (scan (lambda (h) (tanh (dot h (add W1 W2)))) (outputs-info h0) (n-steps 5))))");
  assert_int_equal(count_inner(s, RG_OP_ADD), 0);
  assert_int_equal(count_inner(s, RG_OP_DOT), 1);
}

/* The LSTM: x_t W_ih^T + b_ih for all steps at once (one product over the
 * sequence's rows), h W_hh^T stays in the step. */
static void test_push_out_lstm_projection(void **st) {
  char path[1024];
  snprintf(path, sizeof path, "%s", tu_source_path("examples/graphs/lstm.graph"));
  rg_fgraph *fg = rg_graph_load(C, path);
  assert_non_null(fg);
  const char *text = rg_graph_to_string(C, fg);
  /* the example's x has an unknown length: give it 6 steps */
  char *fixed = strdup(text);
  char *q = strstr(fixed, "(? 4 8)");
  if (q) memcpy(q, "(6 4 8)", 7);
  rg_node *s = pushed(fixed);
  free(fixed);
  assert_int_equal(count_inner(s, RG_OP_DOT), 1); /* h @ W_hh^T */
  rg_scan_info info;
  assert_true(rg_scan_info_of(s->op, &info));
  assert_int_equal(info.n_seqs, 2); /* x (now unused) and the projection */
  V proj = s->inputs[rg_scan_outer_in(&info, RG_SCAN_SEQ, 1)];
  assert_int_equal(proj->type->ndim, 3);
}

/* The LSTM's loss and gradients under fast_run: the forward loop and the
 * recording twin its gradient reads from merge into one loop whose step
 * computes the cell once (one product h W_hh^T, not two: the twin's h
 * and c are paired with the loop's own, which read each other), and the
 * values stay those of the unrewritten graph. */
static void test_lstm_twin_merged(void **st) {
  rg_fgraph *fg = rg_graph_load(C, tu_source_path("examples/graphs/lstm_loss.graph"));
  assert_non_null(fg);
  int nout = rg_fgraph_noutputs(fg);
  rg_tensor *want[8], *got[8];
  run(fg, "none", want);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  run(fg, "none", got);
  for (int k = 0; k < nout; k++) {
    for (int64_t i = 0; i < rg_tensor_numel(want[k]); i++)
      assert_true(fabs(rg_tensor_get_f64(got[k], i) - rg_tensor_get_f64(want[k], i)) <= 1e-9 * (1 + fabs(rg_tensor_get_f64(want[k], i))));
    rg_tensor_free(got[k]), rg_tensor_free(want[k]);
  }
  int forward = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) {
    rg_scan_info info;
    if (n->op->code != RG_OP_SCAN || !rg_scan_info_of(n->op, &info) || info.n_mit_mot) continue;
    forward++;
    assert_int_equal(count_inner(n, RG_OP_DOT) + count_inner(n, RG_OP_GEMM) + count_inner(n, RG_OP_GEMV), 1);
    assert_int_equal(count_inner(n, RG_OP_SIGMOID), 3);
    assert_int_equal(count_inner(n, RG_OP_TANH), 2);
    assert_int_equal(info.n_sit_sot, 2); /* h and c once: the twin's copies are not carried */
  }
  assert_int_equal(forward, 1);
}

/* Sequences of different lengths line up (cut to the steps run), and
 * go_backwards reads the same rows. */
static void test_push_out_seq_lengths(void **st) {
  rg_node *s = pushed("(graph (input x float64 (7 3)) (input y float64 (5 3)) (input h0 float64 (3)) "
                      "(output (scan (lambda (x_t y_t h) (add h (mul (exp x_t) y_t))) (sequences x y) (outputs-info h0))))");
  assert_int_equal(count_inner(s, RG_OP_EXP), 0);
  s = pushed("(graph (input x float64 (7 3)) (input y float64 (5 3)) (input h0 float64 (3)) "
             "(output (scan (lambda (x_t y_t h) (add h (mul (exp x_t) y_t))) (sequences x y) (outputs-info h0) "
             "(go-backwards #t))))");
  assert_int_equal(count_inner(s, RG_OP_EXP), 0);
}

/* Elementwise work on a sequence slice whose readers are elementwise work
 * on the state stays in the step when a slice is large (256 elements or
 * more): fused there, it costs no trace of its own.  The sequence itself
 * is read in the step anyway.  Small slices go out as before.  A value
 * over a product computed outside stays when the step reads the value
 * itself (the loop reads the product's trace instead of the value's, as
 * the LSTM's gate sum reads G_t and adds b_ih in the step); two such
 * products summed go out (keeping the sum would make two traces of one). */
#define DERIV_STEP(N)                                                                        \
  "(graph (input s float64 (5 " N ")) (input h0 float64 (" N ")) "                           \
  "(output (scan (lambda (s_t h) (add (mul h (mul s_t (sub 1.0 s_t))) s_t)) (sequences s) (outputs-info h0))))"

static void test_push_out_keeps_fusable(void **st) {
  rg_scan_info info;
  rg_node *s = pushed(DERIV_STEP("256"));
  assert_true(rg_scan_info_of(s->op, &info));
  assert_int_equal(info.n_seqs, 1); /* s alone: s(1 - s) stays in the step */
  assert_int_equal(count_inner(s, RG_OP_SUB), 1);
  s = pushed(DERIV_STEP("4"));
  assert_true(rg_scan_info_of(s->op, &info));
  assert_int_equal(info.n_seqs, 2); /* small slices: the factor for all steps at once */
  assert_int_equal(count_inner(s, RG_OP_SUB), 0);
  /* over a product computed outside: the product is the trace, exp stays */
  s = pushed("(graph (input x float64 (5 16 16)) (input W float64 (16 16)) (input h0 float64 (16 16)) "
             "(output (scan (lambda (x_t h W) (add h (exp (dot x_t W)))) (sequences x) (outputs-info h0) (non-sequences W))))");
  assert_int_equal(count_inner(s, RG_OP_DOT), 0);
  assert_int_equal(count_inner(s, RG_OP_EXP), 1);
  /* two products summed: one trace of the sum, not two of the products */
  s = pushed("(graph (input x float64 (5 16 16)) (input W float64 (16 16)) (input V float64 (16 16)) "
             "(input h0 float64 (16 16)) (output (scan (lambda (x_t h W V) (add h (add (dot x_t W) (dot x_t V)))) "
             "(sequences x) (outputs-info h0) (non-sequences W V))))");
  assert_int_equal(count_inner(s, RG_OP_DOT), 0);
  assert_int_equal(count_inner(s, RG_OP_ADD), 1); /* h + the sum's slice */
}

/* A step that only reads its state has nothing to push out. */
static void test_push_out_nothing(void **st) {
  rg_node *s = pushed("(graph (input h0 float64 (3)) (output (scan (lambda (h) (tanh h)) (outputs-info h0) (n-steps 4))))");
  rg_scan_info info;
  assert_true(rg_scan_info_of(s->op, &info));
  assert_int_equal(info.n_seqs + info.n_non_seqs, 0);
}

/* ------------------------------------------------------------------ inputs */

/* The graph of text rewritten by query (values unchanged), and its Scan's
 * layout in *info. */
static rg_fgraph *rewritten(const char *text, const char *query, rg_scan_info *info) {
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  rewrite_same(fg, query);
  assert_true(rg_scan_info_of(the_scan(fg)->op, info));
  return fg;
}

/* A constant non-sequence inlined, a duplicate merged, an unread
 * sequence dropped; after the push-out of the LSTM's projection, its x,
 * W_ih and b_ih leave the step. */
static void test_remove_inputs(void **st) {
  const char *text = "(graph (input h0 float64 (3)) (input x float64 (4 3)) (input w float64 (3)) "
                     "(output (scan (lambda (x_t h w a b) (mul h (add w (mul a b)))) (sequences x) (outputs-info h0) "
                     "(non-sequences w (constant float64 () (2.0)) w))))";
  rg_scan_info info;
  rewritten(text, "remove_constants_and_unused_inputs_scan", &info);
  assert_int_equal(info.n_seqs, 0);
  assert_int_equal(info.n_non_seqs, 1);
}

/* A constant sequence of one repeated row is inlined (each tap reads the
 * row); one whose rows differ stays a sequence. */
static int seqs_after_remove(const char *rows) {
  char text[512];
  snprintf(text, sizeof text,
           "(graph (input h0 float64 (2)) (output (scan (lambda (r_t r_tp1 h) (add h (mul r_t r_tp1))) "
           "(sequences ((constant float64 (4 2) (%s)) (taps 0 1))) (outputs-info h0))))", rows);
  rg_scan_info info;
  rewritten(text, "remove_constants_and_unused_inputs_scan", &info);
  return info.n_seqs;
}

/* scan_merge_inouts on its own: a sequence and a non-sequence passed
 * twice enter once, and the two states then computing the same are one. */
static void test_merge_inouts_inputs(void **st) {
  const char *text = "(graph (input x float64 (5 3)) (input h0 float64 (3)) (input W float64 (3 3)) "
                     "(define (a b) (scan (lambda (x_t y_t h g W V) (values (tanh (add (dot h W) x_t)) "
                     "(tanh (add (dot g V) y_t)))) (sequences x x) (outputs-info h0 h0) (non-sequences W W))) "
                     "(output a) (output b))";
  rg_scan_info info;
  rg_fgraph *fg = rewritten(text, "scan_merge_inouts", &info);
  assert_int_equal(info.n_seqs, 1);
  assert_int_equal(info.n_non_seqs, 1);
  assert_ptr_equal(rg_fgraph_output(fg, 0), rg_fgraph_output(fg, 1)); /* both read one state */
}

/* States that read each other merge too: under h = g each step computes
 * the same (h' = .5g + .1h + x, g' = .5h + .1g + x); the values stay. */
static void test_merge_inouts_crossed(void **st) {
  const char *text = "(graph (input x float64 (5 3)) (input h0 float64 (3)) "
                     "(define (a b) (scan (lambda (x_t h g) (values (add (add (mul g 0.5) (mul h 0.1)) x_t) "
                     "(add (add (mul h 0.5) (mul g 0.1)) x_t))) (sequences x) (outputs-info h0 h0))) "
                     "(output a) (output b))";
  rg_scan_info info;
  rg_fgraph *fg = rewritten(text, "scan_merge_inouts", &info);
  assert_ptr_equal(rg_fgraph_output(fg, 0), rg_fgraph_output(fg, 1));
}

/* Under fast_run the merge comes before save-mem cuts one state's trace
 * (as in Aesara, whose save-mem runs after scan_merge_inouts): a state read
 * at [-1] and its twin read whole become one. */
static void test_merge_before_save_mem(void **st) {
  const char *text = "(graph (input x float64 (5 3)) (input h0 float64 (3)) "
                     "(define (a b) (scan (lambda (x_t h g) (values (add (mul h 0.5) x_t) (add (mul g 0.5) x_t))) "
                     "(sequences x) (outputs-info h0 h0))) (output ((subtensor -1) a)) (output b))";
  rg_scan_info info;
  rewritten(text, "fast_run", &info);
  assert_int_equal(info.n_sit_sot, 1);
}

static void test_repeated_sequence_inlined(void **st) {
  assert_int_equal(seqs_after_remove("1.5 -2.0 1.5 -2.0 1.5 -2.0 1.5 -2.0"), 0);
  assert_int_equal(seqs_after_remove("1.5 -2.0 1.5 -2.0 1.5 -2.5 1.5 -2.0"), 1);
}

/* ------------------------------------------------------------------ push_out_scan_output */

/* Rewrites the graph with the canonicalize equilibrium, checks its values
 * against the graph before (1e-12 relative) and returns how many sit-sots
 * its Scan still carries (0 without a Scan). */
static int sit_sots_after(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s", rg_errmsg(C));
  rg_tensor *want[1], *got[1];
  run(fg, "none", want);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "canonicalize"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  rg_node *s = the_scan(fg);
  rg_scan_info info = {0};
  if (s) assert_true(rg_scan_info_of(s->op, &info));
  run(fg, "none", got);
  assert_int_equal(rg_tensor_numel(got[0]), rg_tensor_numel(want[0]));
  for (int64_t i = 0; i < rg_tensor_numel(want[0]); i++)
    assert_true(fabs(rg_tensor_get_f64(got[0], i) - rg_tensor_get_f64(want[0], i)) <
                1e-12 * (1 + fabs(rg_tensor_get_f64(want[0], i))));
  rg_tensor_free(got[0]), rg_tensor_free(want[0]);
  return info.n_sit_sot;
}

/* acc + x_t^T x_t kept at trace[-1]: after the standard scan rewrites the
 * accumulator is one product over all steps after the loop, and no scan
 * carries it (here nothing is left of the scan at all). */
static void test_push_out_add(void **st) {
  (void)st;
  assert_int_equal(sit_sots_after("(graph (input x float64 (6 2 3)) (input Z float64 (3 3)) "
                                  "(output ((subtensor -1) (scan (lambda (x_t acc) (add acc (dot ((dimshuffle 1 0) x_t) x_t))) "
                                  "(sequences x) (outputs-info Z)))))"),
                   0);
}

/* acc + sum(tanh(x_t W), axis 0) kept at trace[-1] (a bias's gradient
 * through a loop): after the standard scan rewrites no scan carries the
 * accumulator, the steps' values are summed once after the loop; a sum
 * over every axis and an accumulator whose value each step reads (acc *
 * 0.5 + ...) are handled and left alone respectively. */
static void test_push_out_sum(void **st) {
  (void)st;
  static const struct { const char *step; bool out; } cases[] = {
      {"(add acc ((sum 0) (tanh (mul x_t w))))", true},
      {"(add ((sum 0) (exp x_t)) acc)", true},
      {"(add acc (sum (mul x_t w)))", true},
      {"(add (mul acc 0.5) ((sum 0) x_t))", false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char text[1024];
    snprintf(text, sizeof text,
             "(graph (input x float64 (6 4 3)) (input w float64 (3)) (input a0 float64 (%s)) "
             "(output ((subtensor -1) (scan (lambda (x_t acc) %s) (sequences x) (outputs-info a0)))))",
             strstr(cases[c].step, "(sum (") ? "" : "3", cases[c].step);
    int left = sit_sots_after(text);
    if (cases[c].out != (left == 0)) fail_msg("case %zu: %d sit-sots left", c, left);
  }
}

/* acc + X_t, X_t any float term not reading acc: X's trace summed after
 * the loop; a term that reads the state stays in the loop. */
static void test_push_out_plain_term(void **st) {
  (void)st;
  static const struct { const char *step; bool out; } cases[] = {
      {"(add acc (tanh (mul x_t w)))", true},
      {"(add (exp x_t) acc)", true},
      {"(add acc (mul acc x_t))", false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char text[1024];
    snprintf(text, sizeof text,
             "(graph (input x float64 (6 3)) (input w float64 (3)) (input a0 float64 (3)) "
             "(output ((subtensor -1) (scan (lambda (x_t acc) %s) (sequences x) (outputs-info a0)))))",
             cases[c].step);
    int left = sit_sots_after(text);
    if (cases[c].out != (left == 0)) fail_msg("case %zu: %d sit-sots left", c, left);
  }
}

/* ------------------------------------------------------------------ scan_merge */

static int count_scans(rg_fgraph *fg) {
  int k = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) k += n->op->code == RG_OP_SCAN;
  return k;
}

/* Rewrites with the canonicalize equilibrium (the scan rules among it),
 * checks the values and returns how many scans are left. */
static int scans_after(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s", rg_errmsg(C));
  int nout = rg_fgraph_noutputs(fg);
  rg_tensor *want[8], *got[8];
  run(fg, "none", want);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "canonicalize"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  run(fg, "none", got);
  for (int k = 0; k < nout; k++) {
    for (int64_t i = 0; i < rg_tensor_numel(want[k]); i++)
      assert_true(fabs(rg_tensor_get_f64(got[k], i) - rg_tensor_get_f64(want[k], i)) < 1e-12);
    rg_tensor_free(got[k]), rg_tensor_free(want[k]);
  }
  return count_scans(fg);
}

#define TWO_LOOPS(steps_a, b_input) \
  "(graph (input x float64 (5 3)) (input h0 float64 (3)) " \
  "(define a (scan (lambda (x_t h) (tanh (add h x_t))) (sequences x) (outputs-info h0) (n-steps " steps_a "))) " \
  "(define b (scan (lambda (h) (sin h)) (outputs-info " b_input ") (n-steps 4))) (output a) (output b))"

/* Two loops of the same length become one (walking x once); loops of
 * different lengths, or one reading the other's result, stay apart. */
static void test_scan_merge(void **st) {
  assert_int_equal(scans_after(TWO_LOOPS("4", "h0")), 1);
  assert_int_equal(scans_after(TWO_LOOPS("5", "h0")), 2);
  assert_int_equal(scans_after(TWO_LOOPS("4", "((subtensor -1) a)")), 2);
}

#define TWO_WHILES(cond_b) \
  "(graph (input x float64 (6)) (input lim float64 ()) " \
  "(define a (scan (lambda (x_t h) (values (add h x_t) (until (gt x_t lim)))) (sequences x) (outputs-info 0.0))) " \
  "(define b (scan (lambda (x_t h) (values (mul h x_t) (until " cond_b "))) (sequences x) (outputs-info 1.0))) " \
  "(output a) (output b))"

/* While-loops merge when their conditions are the same (read from the
 * same sequence and non-sequence), not otherwise. */
static void test_scan_merge_until(void **st) {
  assert_int_equal(scans_after(TWO_WHILES("(gt x_t lim)")), 1);
  assert_int_equal(scans_after(TWO_WHILES("(lt x_t lim)")), 2);
  assert_int_equal(scans_after(TWO_WHILES("(gt h lim)")), 2);
}

/* ------------------------------------------------------------------ outputs */

/* Two nit-sots computing the same are recorded once, an unread one not
 * at all; two sit-sots from the same initial value with the same step
 * are one. */
static void test_outputs_pared(void **st) {
  const char *text = "(graph (input x float64 (5 3)) (input h0 float64 (3)) "
                     "(define (a b c d e) (scan (lambda (x_t h g) (values (add h x_t) (add g x_t) (exp x_t) (exp x_t) (sin x_t))) "
                     "(sequences x) (outputs-info h0 h0 none none none))) (output a) (output b) (output c) (output d))";
  for (int pass = 0; pass < 2; pass++) {
    rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
    rg_tensor *want[4], *got[4];
    run(fg, "none", want);
    const char *q = pass ? "scan_merge_inouts" : "scan_prune_nit_sots";
    rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), q), NULL);
    assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
    run(fg, "none", got);
    for (int k = 0; k < 4; k++) {
      for (int64_t i = 0; i < 15; i++) assert_true(rg_tensor_get_f64(got[k], i) == rg_tensor_get_f64(want[k], i));
      rg_tensor_free(got[k]), rg_tensor_free(want[k]);
    }
    rg_scan_info info;
    assert_true(rg_scan_info_of(the_scan(fg)->op, &info));
    if (!pass) assert_int_equal(info.n_nit_sot, 1); /* exp once, sin dropped */
    else assert_true(rg_fgraph_output(fg, 1)->owner == rg_fgraph_output(fg, 0)->owner &&
                     rg_fgraph_output(fg, 1)->index == rg_fgraph_output(fg, 0)->index);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_last_rows_kept),
      cmocka_unit_test(test_every_trace_kind),
      cmocka_unit_test(test_whole_trace_stays),
      cmocka_unit_test(test_first_rows_run),
      cmocka_unit_test(test_long_loop),
      cmocka_unit_test(test_push_out_non_seq),
      cmocka_unit_test(test_push_out_lstm_projection),
      cmocka_unit_test(test_lstm_twin_merged),
      cmocka_unit_test(test_push_out_seq_lengths),
      cmocka_unit_test(test_push_out_nothing),
      cmocka_unit_test(test_push_out_keeps_fusable),
      cmocka_unit_test(test_remove_inputs),
      cmocka_unit_test(test_repeated_sequence_inlined),
      cmocka_unit_test(test_merge_inouts_inputs),
      cmocka_unit_test(test_merge_inouts_crossed),
      cmocka_unit_test(test_merge_before_save_mem),
      cmocka_unit_test(test_push_out_add),
      cmocka_unit_test(test_push_out_sum),
      cmocka_unit_test(test_push_out_plain_term),
      cmocka_unit_test(test_scan_merge),
      cmocka_unit_test(test_scan_merge_until),
      cmocka_unit_test(test_outputs_pared),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
