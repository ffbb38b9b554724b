/*
 * test_rewrite_scan_push.c — the relational Scan push-outs (rewrites/scan.kn
 * over the relations of rewrites/scan-term.c), forwards under their own
 * names (tags scan fast_run) and backwards under scan_pushin.
 *
 * Every case reads a graph twice (the second copy is never rewritten),
 * rewrites the first, checks the structure (number of Scans, of
 * non-sequences, which ops remain in the step) and the values against the
 * copy, compiled without rewrites and run at the same inputs.  A backward
 * rewrite after a forward one must give a graph rg_equal_computations
 * finds equal to the copy.
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
  (void)st;
  rg_init();
  C = rg_ctx_new();
  return 0;
}

#define INPUTS \
  "(input h0 float64 (3)) (input W1 float64 (3 3)) (input W2 float64 (3 3)) (input x float64 (5 3)) " \
  "(input y float64 (4 3)) (input z float64 (5 3)) "

static rg_fgraph *read_graph_over(const char *inputs, const char *body) {
  char text[2048];
  snprintf(text, sizeof text, "(graph %s%s)", inputs, body);
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s\n%s", rg_errmsg(C), text);
  return fg;
}

static rg_fgraph *read_graph(const char *body) { return read_graph_over(INPUTS, body); }

static int non_seqs(const rg_node *scan) {
  rg_scan_info s;
  assert_true(rg_scan_info_of(scan->op, &s));
  return s.n_non_seqs;
}

/* Rewrites fg with the rules `query` selects; returns how many applied. */
static int64_t rewrite(rg_fgraph *fg, const char *query) {
  rg_rewriter *rw = rg_db_query(C, rg_std_db(C), query);
  if (!rw) fail_msg("%s", rg_errmsg(C));
  rg_rewrite_run *r = rg_rewrite(fg, rw, NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  return rg_rewrite_count(r);
}

static void close_values(rg_fgraph *fg, rg_fgraph *ref, double tol) { tu_close_graphs(C, fg, ref, tol); }

static void same_values(rg_fgraph *fg, rg_fgraph *ref) { close_values(fg, ref, 1e-12); }

/* ------------------------------------------------------------------ push_out_non_seq */

#define DOT_SUM "(scan (lambda (h) (tanh (dot h (add W1 W2)))) (outputs-info h0) (n-steps 4))"

/* dot(h, W1 + W2): the sum is computed once, the step keeps no addition. */
static void test_non_seq_out(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " DOT_SUM ")"), *ref = read_graph("(output " DOT_SUM ")");
  int nscans;
  assert_int_equal(non_seqs(tu_first_scan(fg, &nscans)), 2);
  assert_int_equal(tu_count_inner(tu_first_scan(fg, &nscans), RG_OP_ADD), 1);
  assert_int_equal(rewrite(fg, "push_out_non_seq"), 1);
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(nscans, 1);
  assert_int_equal(non_seqs(s), 3); /* W1, W2 (unused now) and W1 + W2 */
  assert_int_equal(tu_count_inner(s, RG_OP_ADD), 0);
  assert_int_equal(tu_count_inner(s, RG_OP_DOT), 1);
  same_values(fg, ref);
}

/* Backwards: the sum goes back into the step, the original graph again. */
static void test_non_seq_round_trip(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " DOT_SUM ")"), *ref = read_graph("(output " DOT_SUM ")");
  assert_int_equal(rewrite(fg, "push_out_non_seq"), 1);
  assert_false(tu_equal_graphs(fg, ref));
  assert_int_equal(rewrite(fg, "scan_pushin"), 1);
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(non_seqs(s), 2);
  assert_int_equal(tu_count_inner(s, RG_OP_ADD), 1);
  assert_true(tu_equal_graphs(fg, ref));
  same_values(fg, ref);
}

/* A chain: (W1 + W2) * 2 and exp(W1) move out as the values the step
 * uses; backwards brings both back. */
#define CHAIN "(scan (lambda (h) (add (dot h (mul (add W1 W2) 2.0)) (sum (exp W1)))) (outputs-info h0) (n-steps 3))"
static void test_non_seq_chain(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " CHAIN ")"), *ref = read_graph("(output " CHAIN ")");
  assert_int_equal(rewrite(fg, "push_out_non_seq"), 1);
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(non_seqs(s), 4);
  assert_int_equal(tu_count_inner(s, RG_OP_MUL), 0);
  assert_int_equal(tu_count_inner(s, RG_OP_EXP), 0);
  same_values(fg, ref);
  assert_int_equal(rewrite(fg, "scan_pushin"), 2);
  assert_true(tu_equal_graphs(fg, ref));
  same_values(fg, ref);
}

/* A loop in the step over non-sequences only runs once before the outer
 * loop (scan_push_out, the C rule in fast_run, and the relational
 * push_out_non_seq, which scan_pushin reverses). */
#define NESTED "(scan (lambda (x_t h) (add (mul h ((subtensor -1) (scan (lambda (g) (tanh (dot g W1))) " \
               "(outputs-info h0) (n-steps 3)))) x_t)) (sequences x) (outputs-info h0))"
static void test_non_seq_nested_loop(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " NESTED ")"), *ref = read_graph("(output " NESTED ")");
  int nscans;
  assert_int_equal(tu_count_inner(tu_first_scan(fg, &nscans), RG_OP_SCAN), 1);
  assert_true(rewrite(fg, "scan_push_out") >= 1);
  assert_int_equal(tu_count_inner(tu_first_scan(fg, &nscans), RG_OP_SCAN), 0);
  assert_int_equal(nscans, 2); /* the inner loop, now beside the outer one */
  same_values(fg, ref);
  /* the relation does the same, and brings the loop back in */
  rg_fgraph *rel = read_graph("(output " NESTED ")");
  assert_int_equal(rewrite(rel, "push_out_non_seq"), 1);
  assert_int_equal(tu_count_inner(tu_first_scan(rel, &nscans), RG_OP_SCAN), 0);
  same_values(rel, ref);
  assert_int_equal(rewrite(rel, "scan_pushin"), 1);
  assert_true(tu_equal_graphs(rel, ref));
}

/* Nothing to move: the step reads its state everywhere; and backwards
 * nothing moves in from non-sequences that are the graph's inputs. */
static void test_non_seq_nothing(void **st) {
  (void)st;
  const char *body = "(output (scan (lambda (h) (tanh (dot h W1))) (outputs-info h0) (n-steps 4)))";
  rg_fgraph *fg = read_graph(body);
  assert_int_equal(rewrite(fg, "push_out_non_seq"), 0);
  assert_int_equal(rewrite(fg, "scan_pushin"), 0);
  rg_fgraph *g2 = read_graph("(output " DOT_SUM ")");
  assert_int_equal(rewrite(g2, "scan_pushin"), 0);
}

/* The forward rule is in fast_run (here without the C push-out, which
 * would move the sum first); the backward one is not. */
static void test_tags(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " DOT_SUM ")"), *ref = read_graph("(output " DOT_SUM ")");
  rewrite(fg, "fast_run -scan_push_out");
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_non_null(s);
  assert_int_equal(tu_count_inner(s, RG_OP_ADD), 0);
  same_values(fg, ref);
  rg_fgraph *g2 = read_graph("(output " DOT_SUM ")");
  rewrite(g2, "fast_run -scan_push_out -push_out_non_seq");
  assert_int_equal(tu_count_inner(tu_first_scan(g2, &nscans), RG_OP_ADD), 1);
}

/* ------------------------------------------------------------------ push_out_seq */

static int seqs(const rg_node *scan) {
  rg_scan_info s;
  assert_true(rg_scan_info_of(scan->op, &s));
  return s.n_seqs;
}

/* Forwards, the structure after (`op` left `remain` times in the step);
 * backwards, the original graph again. */
static void seq_round_trip(const char *scan, int seqs_after, rg_opcode op, int remain, int pushins) {
  char body[1024];
  snprintf(body, sizeof body, "(output %s)", scan);
  rg_fgraph *fg = read_graph(body), *ref = read_graph(body);
  int nscans;
  int before = seqs(tu_first_scan(fg, &nscans));
  assert_true(tu_count_inner(tu_first_scan(fg, &nscans), op) > remain);
  assert_int_equal(rewrite(fg, "push_out_seq"), 1);
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(nscans, 1);
  assert_int_equal(seqs(s), seqs_after);
  assert_int_equal(tu_count_inner(s, op), remain);
  same_values(fg, ref);
  assert_int_equal(rewrite(fg, "scan_pushin"), pushins);
  assert_int_equal(seqs(tu_first_scan(fg, &nscans)), before);
  assert_true(tu_equal_graphs(fg, ref));
  same_values(fg, ref);
}

/* Elementwise work on the slice: one elementwise op over the sequence. */
static void test_seq_elementwise(void **st) {
  (void)st;
  seq_round_trip("(scan (lambda (x_t h) (tanh (add h (exp (mul x_t 2.0))))) (sequences x) (outputs-info h0))", 2,
                 RG_OP_EXP, 0, 1);
}

/* dot(x_t, W1) becomes one product over x's rows (the input projection of
 * a recurrent net); the recurrent dot stays. */
static void test_seq_dot(void **st) {
  (void)st;
  const char *scan = "(scan (lambda (x_t h) (tanh (add (dot x_t W1) (dot h W2)))) (sequences x) (outputs-info h0))";
  seq_round_trip(scan, 2, RG_OP_DOT, 1, 1);
}

/* Two sequences and a non-sequence: (x_t + z_t) W1 computed for all rows. */
static void test_seq_two_sequences(void **st) {
  (void)st;
  const char *scan = "(scan (lambda (x_t z_t h) (mul h (dot (add x_t z_t) (add W1 W2))))"
                     " (sequences x z) (outputs-info h0))";
  char body[512];
  snprintf(body, sizeof body, "(output %s)", scan);
  rg_fgraph *fg = read_graph(body), *ref = read_graph(body);
  assert_int_equal(rewrite(fg, "push_out_seq"), 1);
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(seqs(s), 3);
  assert_int_equal(tu_count_inner(s, RG_OP_DOT), 0);
  assert_int_equal(tu_count_inner(s, RG_OP_ADD), 0);
  assert_int_equal(tu_count_inner(s, RG_OP_MUL), 1);
  same_values(fg, ref);
  assert_int_equal(rewrite(fg, "scan_pushin"), 1);
  assert_true(tu_equal_graphs(fg, ref));
}

/* Nothing moves: the slice meets the state at once; sequences of
 * different lengths are not combined outside. */
static void test_seq_nothing(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output (scan (lambda (x_t h) (tanh (add h x_t))) (sequences x) (outputs-info h0)))");
  assert_int_equal(rewrite(fg, "push_out_seq"), 0);
  assert_int_equal(rewrite(fg, "scan_pushin"), 0);
  fg = read_graph("(output (scan (lambda (x_t y_t h) (mul h (add x_t y_t))) (sequences x y) (outputs-info h0)))");
  assert_int_equal(rewrite(fg, "push_out_seq"), 0);
}

/* Elementwise work on a large slice (256 elements and more) whose
 * readers are elementwise work on the state stays in the step, where it
 * fuses: the relation has nothing to push (the C rewrite agrees). */
static void test_seq_keeps_fusable(void **st) {
  (void)st;
  const char *scan = "(output (scan (lambda (s_t h) (add (mul h (mul s_t (sub 1.0 s_t))) s_t)) (sequences s) (outputs-info h0)))";
  rg_fgraph *fg = read_graph_over("(input s float64 (5 256)) (input h0 float64 (256)) ", scan);
  assert_int_equal(rewrite(fg, "push_out_seq"), 0);
  fg = read_graph_over("(input s float64 (5 4)) (input h0 float64 (4)) ", scan);
  assert_int_equal(rewrite(fg, "push_out_seq"), 1);
}

/* The LSTM example: its input projection x_t W_ih^T (+ b_ih) becomes one
 * product over all steps' rows, a new sequence; the step keeps only the
 * recurrent product.  A Scan of two outputs: both are replaced. */
static void test_seq_lstm(void **st) {
  (void)st;
  const char *path = tu_source_path("examples/graphs/lstm.graph");
  rg_fgraph *fg = rg_graph_load(C, path), *ref = rg_graph_load(C, path);
  if (!fg || !ref) fail_msg("%s", rg_errmsg(C));
  int nscans;
  assert_int_equal(tu_count_inner(tu_first_scan(fg, &nscans), RG_OP_DOT), 2);
  assert_int_equal(rewrite(fg, "push_out_seq"), 1);
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(nscans, 1);
  assert_int_equal(seqs(s), 2);
  assert_int_equal(tu_count_inner(s, RG_OP_DOT), 1);
  rg_scan_info si;
  assert_true(rg_scan_info_of(s->op, &si));
  rg_variable *proj = s->inputs[rg_scan_outer_in(&si, RG_SCAN_SEQ, 1)];
  assert_int_equal(proj->type->ndim, 3);
  int dots = 0; /* one product over every step's rows, outside */
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) dots += n->op->code == RG_OP_DOT;
  assert_int_equal(dots, 1);
  close_values(fg, ref, 1e-5);
  assert_int_equal(rewrite(fg, "scan_pushin"), 1);
  assert_true(tu_equal_graphs(fg, ref));
  close_values(fg, ref, 1e-5);
}

/* Nothing left inside: the step's value comes from non-sequences only, so
 * after the push-out the Scan is gone, its trace the value repeated. */
static void test_non_seq_scan_gone(void **st) {
  (void)st;
  const char *body = "(output (scan (lambda (a b) (tanh (add a b))) (outputs-info none) (non-sequences W1 W2) (n-steps 4)))";
  rg_fgraph *fg = read_graph(body), *ref = read_graph(body);
  assert_int_equal(rewrite(fg, "push_out_non_seq"), 2); /* pushed out, then gone */
  int nscans;
  assert_null(tu_first_scan(fg, &nscans));
  assert_int_equal(nscans, 0);
  same_values(fg, ref);
  assert_int_equal(rewrite(fg, "scan_pushin"), 0);
}

/* ------------------------------------------------------------------ push_out_dot1 */

#define ACC "((subtensor -1) (scan (lambda (x_t acc) (add acc (dot x_t W1))) (sequences x) (outputs-info h0)))"

/* Only the last state of acc + x_t W1 is read: no loop is left, one
 * product of the summed rows; backwards, the loop of the graph file. */
static void test_dot1(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " ACC ")"), *ref = read_graph("(output " ACC ")");
  assert_int_equal(rewrite(fg, "push_out_dot1"), 1);
  int nscans;
  assert_null(tu_first_scan(fg, &nscans));
  int dots = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) dots += n->op->code == RG_OP_DOT;
  assert_int_equal(dots, 1);
  close_values(fg, ref, 1e-12);
  assert_int_equal(rewrite(fg, "scan_pushin"), 1);
  assert_non_null(tu_first_scan(fg, &nscans));
  assert_true(tu_equal_graphs(fg, ref));
  close_values(fg, ref, 1e-12);
}

/* The whole trace read, or a step that is not an accumulation: no change. */
static void test_dot1_nothing(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output (scan (lambda (x_t acc) (add acc (dot x_t W1))) (sequences x) (outputs-info h0)))");
  assert_int_equal(rewrite(fg, "push_out_dot1"), 0);
  fg = read_graph("(output ((subtensor -1) (scan (lambda (x_t acc) (mul acc (dot x_t W1))) (sequences x) (outputs-info h0))))");
  assert_int_equal(rewrite(fg, "push_out_dot1"), 0);
  fg = read_graph("(output (add h0 (dot ((sum 0) x) W1)))");
  assert_int_equal(rewrite(fg, "scan_pushin"), 0); /* no slice of the rows: not the loop's form */
}

/* Where the closed form would not compute what the loop does: integer
 * products wrap in each step (the sum of rows widens to int64); more
 * steps than the sequence may have rows (the loop fails, a slice
 * clamps); backwards, a stop past the rows or one that may be negative. */
static void test_dot1_not_equal(void **st) {
  (void)st;
  const char *ints = "(input x int8 (7 3)) (input W int8 (3 4)) (input a0 float64 (4)) ";
  rg_fgraph *fg = read_graph_over(ints, "(output ((subtensor -1) (scan (lambda (x_t acc W) (add acc (dot x_t W)))"
                                        " (sequences x) (outputs-info a0) (non-sequences W))))");
  assert_int_equal(rewrite(fg, "push_out_dot1"), 0);
  const char *dyn = "(input x float64 (? 3)) (input W float64 (3 4)) (input a0 float64 (4)) (input n int64 ()) ";
  fg = read_graph_over(dyn, "(output ((subtensor -1) (scan (lambda (x_t acc W) (add acc (dot x_t W)))"
                            " (sequences x) (outputs-info a0) (non-sequences W) (n-steps n))))");
  assert_int_equal(rewrite(fg, "push_out_dot1"), 0);
  fg = read_graph_over(dyn, "(output (add a0 (dot ((sum 0) ((subtensor (0 ?)) x n)) W)))");
  assert_int_equal(rewrite(fg, "scan_pushin"), 0);
  fg = read_graph("(output (add h0 (dot ((sum 0) ((subtensor (0 10)) x)) W1)))"); /* x has 5 rows */
  assert_int_equal(rewrite(fg, "scan_pushin"), 0);
  rg_fgraph *ref = read_graph("(output (add h0 (dot ((sum 0) ((subtensor (0 4)) x)) W1)))");
  fg = read_graph("(output (add h0 (dot ((sum 0) ((subtensor (0 4)) x)) W1)))");
  assert_int_equal(rewrite(fg, "scan_pushin"), 1); /* 4 of 5 rows: a loop of 4 steps */
  close_values(fg, ref, 1e-12);
}

/* ------------------------------------------------------------------ push_out_add */

#define SUMPROD "((subtensor -1) (scan (lambda (a_t b_t acc) (add acc (dot a_t b_t))) (sequences A B)" \
                " (outputs-info P0)))"

/* The last state of acc + a_t b_t: one product of the laid-out traces. */
static void test_push_add(void **st) {
  (void)st;
  const char *in = "(input A float64 (5 2 3)) (input B float64 (5 3 4)) (input P0 float64 (2 4)) ";
  rg_fgraph *fg = read_graph_over(in, "(output " SUMPROD ")"), *ref = read_graph_over(in, "(output " SUMPROD ")");
  assert_int_equal(rewrite(fg, "push_out_add"), 1);
  int nscans;
  assert_null(tu_first_scan(fg, &nscans));
  close_values(fg, ref, 1e-12);
  assert_int_equal(rewrite(fg, "scan_pushin"), 1);
  assert_non_null(tu_first_scan(fg, &nscans));
  assert_true(tu_equal_graphs(fg, ref));
  close_values(fg, ref, 1e-12);
  /* the whole trace read: the loop stays */
  fg = read_graph_over(in, "(output (scan (lambda (a_t b_t acc) (add acc (dot a_t b_t))) (sequences A B) (outputs-info P0)))");
  assert_int_equal(rewrite(fg, "push_out_add"), 0);
  /* int8 products wrap in each step before the float accumulator adds
   * them: no one product computes that */
  in = "(input A int8 (5 2 3)) (input B int8 (5 3 4)) (input P0 float64 (2 4)) ";
  fg = read_graph_over(in, "(output " SUMPROD ")");
  assert_int_equal(rewrite(fg, "push_out_add"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_non_seq_out),
      cmocka_unit_test(test_non_seq_round_trip),
      cmocka_unit_test(test_non_seq_chain),
      cmocka_unit_test(test_non_seq_nested_loop),
      cmocka_unit_test(test_non_seq_nothing),
      cmocka_unit_test(test_non_seq_scan_gone),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_seq_elementwise),
      cmocka_unit_test(test_seq_dot),
      cmocka_unit_test(test_seq_two_sequences),
      cmocka_unit_test(test_seq_nothing),
      cmocka_unit_test(test_seq_keeps_fusable),
      cmocka_unit_test(test_seq_lstm),
      cmocka_unit_test(test_dot1),
      cmocka_unit_test(test_dot1_nothing),
      cmocka_unit_test(test_dot1_not_equal),
      cmocka_unit_test(test_push_add),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
