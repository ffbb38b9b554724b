/*
 * test_rewrite_scan_step.c — a Scan as a term of the relational language
 * (rewrites/scan-step.c): the term of a Scan, the Scan of a term, the
 * helper relations, and loop rules written with them in a rule file
 * (examples/rules/loop.kn) rewriting graphs forwards and back.
 *
 * Rewritten graphs are checked by structure (Scans, inputs, ops left in
 * the step) and by value against an unrewritten copy read from the same
 * text; a rule that pushes work out followed by the one that pushes it
 * back gives a graph rg_equal_computations finds equal to the copy.
 */
#include "tests/testutil.h"

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
  "(input x float64 (6 3)) (input X float64 (5 2 3)) (input h0 float64 (3)) (input H0 float64 (2 3)) " \
  "(input W1 float64 (3 3)) (input W2 float64 (3 3)) (input s float64 (3)) "

/* The loop of examples/graphs/loop.graph: W1 + W2 reads non-sequences
 * only, x_t * s + 1 a slice and a non-sequence. */
#define LOOP \
  "(scan (lambda (x_t h) (tanh (add (dot h (add W1 W2)) (add (mul x_t s) 1.0)))) " \
  "(sequences x) (outputs-info h0))"

static rg_fgraph *read_graph(const char *body) {
  char text[2048];
  snprintf(text, sizeof text, "(graph " INPUTS "%s)", body);
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s\n%s", rg_errmsg(C), text);
  return fg;
}

static rg_scan_info info(const rg_node *scan) {
  rg_scan_info s;
  assert_true(rg_scan_info_of(scan->op, &s));
  return s;
}

/* An interpreter with the rule file loaded, S bound to fg's first output. */
static rg_interp *interp_over(rg_fgraph *fg, rg_rule_set **rs) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  *rs = rg_rule_set_new(I);
  if (rg_rule_set_load(*rs, RG_SOURCE_DIR "/examples/rules/loop.kn") != RG_OK) fail_msg("%s", rg_errmsg(C));
  rg_interp_define(I, "S", rg_var_term(rg_fgraph_output(fg, 0)));
  return I;
}

static rg_term eval(rg_interp *I, const char *text) {
  rg_term t = rg_interp_eval_string(I, text);
  if (!t) fail_msg("%s: %s", text, rg_errmsg(C));
  return t;
}

static const char *str(rg_term t) { return rg_to_string(t); }

/* Rewrites fg with the rule file's rules `query` selects. */
static int64_t rewrite(rg_fgraph *fg, const char *query) {
  rg_rule_set *rs;
  interp_over(fg, &rs);
  rg_rewrite_db *db = rg_db_sequence("loop");
  assert_int_equal(rg_rule_set_register(rs, db, "rules"), RG_OK);
  rg_rewriter *rw = rg_db_query(C, db, query);
  if (!rw) fail_msg("%s", rg_errmsg(C));
  rg_rewrite_run *r = rg_rewrite(fg, rw, NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  return rg_rewrite_count(r);
}

static void same_values(rg_fgraph *fg, rg_fgraph *ref) { tu_close_graphs(C, fg, ref, 1e-12); }

/* ------------------------------------------------------------------ the term */

/* A Scan's term: layout, outer inputs, the step over leaves. */
static void test_term_of_scan(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " LOOP ")");
  rg_rule_set *rs;
  rg_interp *I = interp_over(fg, &rs);
  assert_string_equal(
      str(eval(I, "(run 1 (q) (scan-termo S q))")),
      "((scan-term 0 ((seqs (0)) (mit-mots) (mit-sots) (sit-sots 1) (nit-sots 0) (non-seqs 3) (until #f) "
      "(go-backwards #f) (truncate-gradient -1) (store-steps 0) (names \"x_t\" \"h\" \"W1\" \"W2\" \"s\")) 6 "
      "(x h0 W1 W2 s) ((tanh (add (dot (inner-sit-sot 0) (add (inner-nonseq 0) (inner-nonseq 1))) "
      "(add (mul (inner-seq 0 0) (inner-nonseq 2)) 1.0))))))");
  /* the term of a mit-sot over two taps, with a nit-sot and go_backwards */
  rg_fgraph *fib = read_graph("(define (f g) (scan (lambda (a b) (values (add a b) (mul a b))) "
                              "(outputs-info (x (taps -2 -1)) none) (n-steps 4) (go-backwards #t)))"
                              "(output f) (output g)");
  rg_interp_define(I, "F", rg_var_term(rg_fgraph_output(fib, 1)));
  const char *t = str(eval(I, "(run 1 (q) (scan-termo F q))"));
  assert_non_null(strstr(t, "(scan-term 1 ((seqs) (mit-mots) (mit-sots (-2 -1)) (sit-sots 0) (nit-sots 1)"));
  assert_non_null(strstr(t, "((add (inner-mit-sot 0 -2) (inner-mit-sot 0 -1)) (mul (inner-mit-sot 0 -2) "
                            "(inner-mit-sot 0 -1)))"));
}

/* The term built back is the same computation, on a new node. */
static void test_round_trip(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " LOOP ")");
  rg_rule_set *rs;
  rg_interp *I = interp_over(fg, &rs);
  rg_term r = eval(I, "(run 1 (q) (fresh (t) (scan-termo S t) (scan-termo q t)))");
  rg_variable *v = rg_term_var(rg_car(r)), *old = rg_fgraph_output(fg, 0);
  assert_non_null(v);
  assert_ptr_not_equal(v->owner, old->owner);
  assert_true(rg_equal_computations(1, &v, &old, 0, NULL, NULL));
}

/* ------------------------------------------------------------------ helpers */

static void test_helpers(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " LOOP ")");
  rg_rule_set *rs;
  rg_interp *I = interp_over(fg, &rs);
  /* subterms outermost first; the free leaves of each */
  assert_string_equal(str(eval(I, "(run 3 (q) (fresh (t) (scan-termo S t) (inner-subtermo t q)))")),
                      "((tanh (add (dot (inner-sit-sot 0) (add (inner-nonseq 0) (inner-nonseq 1))) "
                      "(add (mul (inner-seq 0 0) (inner-nonseq 2)) 1.0))) "
                      "(add (dot (inner-sit-sot 0) (add (inner-nonseq 0) (inner-nonseq 1))) "
                      "(add (mul (inner-seq 0 0) (inner-nonseq 2)) 1.0)) "
                      "(dot (inner-sit-sot 0) (add (inner-nonseq 0) (inner-nonseq 1))))");
  assert_string_equal(str(eval(I, "(run* (q) (fresh (t u) (scan-termo S t) (inner-subtermo t u) "
                                  "(inner-freeo u q) (fresh (l r) (== q `(,l . ,r))) (nonseq-leaveso q)))")),
                      "(((inner-nonseq 0) (inner-nonseq 1)))");
  assert_string_equal(str(eval(I, "(run* (l v) (fresh (t) (scan-termo S t) (scan-inputo t 'seq l v)))")),
                      "(((inner-seq 0 0) x))");
  /* an input added and dropped again: the same term */
  assert_string_equal(str(eval(I, "(run* (q) (fresh (t t1 t2 leaf) (scan-termo S t) "
                                  "(scan-add-inputo t 'nonseq 2.0 t1 leaf) (scan-drop-inputo t1 leaf t2) "
                                  "(conde ((== t t2) (== q 'same)) ((=/= t t2) (== q 'different)))))")),
                      "(same)");
  /* a leaf the step reads is not dropped; the later leaves are renumbered */
  assert_string_equal(str(eval(I, "(run* (q) (fresh (t) (scan-termo S t) (scan-drop-inputo t '(inner-nonseq 2) q)))")),
                      "()");
  const char *t = str(eval(I, "(run* (q) (fresh (t t1) (scan-termo S t) "
                              "(inner-replaceo t '(add (inner-nonseq 0) (inner-nonseq 1)) '(inner-nonseq 1) t1) "
                              "(scan-drop-inputo t1 '(inner-nonseq 0) q)))"));
  assert_non_null(strstr(t, "(non-seqs 2)"));
  assert_non_null(strstr(t, "(dot (inner-sit-sot 0) (inner-nonseq 0))"));
  assert_non_null(strstr(t, "(mul (inner-seq 0 0) (inner-nonseq 1))"));
  assert_non_null(strstr(t, "(x h0 W2 s)"));
  /* outside and inside */
  assert_string_equal(str(eval(I, "(run* (q) (fresh (t) (scan-termo S t) "
                                  "(inner-outero t '(add (inner-nonseq 0) (inner-nonseq 1)) q)))")),
                      "((add W1 W2))");
  assert_string_equal(str(eval(I, "(run* (q) (fresh (t) (scan-termo S t) (inner-outero t '(tanh (inner-sit-sot 0)) q)))")),
                      "()");
  assert_string_equal(str(eval(I, "(run* (q) (fresh (t v) (scan-termo S t) "
                                  "(inner-outero t '(add (inner-nonseq 0) (inner-nonseq 1)) v) (inner-innero t v q)))")),
                      "((add (inner-nonseq 0) (inner-nonseq 1)))");
}

/* Terms that describe no well-typed Scan build nothing: the relation
 * fails, with no error left behind. */
static void test_ill_typed_rejected(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " LOOP ")");
  rg_rule_set *rs;
  rg_interp *I = interp_over(fg, &rs);
  static const char *bad[] = {
      /* the state's step value a matrix */
      "(run* (q) (fresh (t t1) (scan-termo S t) "
      "(inner-replaceo t '(dot (inner-sit-sot 0) (add (inner-nonseq 0) (inner-nonseq 1))) "
      "'(add (inner-nonseq 0) (inner-nonseq 1)) t1) (scan-termo q t1)))",
      /* a leaf out of range */
      "(run* (q) (fresh (t t1) (scan-termo S t) (inner-replaceo t '(inner-nonseq 2) '(inner-nonseq 7) t1) "
      "(scan-termo q t1)))",
      /* an outer variable inside the step */
      "(run* (q) (fresh (t t1 v) (scan-termo S t) (scan-inputo t 'nonseq '(inner-nonseq 2) v) "
      "(inner-replaceo t '(inner-nonseq 2) v t1) (scan-termo q t1)))",
      /* malformed terms and layouts */
      "(run* (q) (scan-termo q '(scan-term 0 () 6 () ())))",
      "(run* (q) (scan-termo q '(scan-term 0 ((seqs (0)) (mit-mots) (mit-sots) (sit-sots 1) (nit-sots 0) "
      "(non-seqs 0) (until #f) (go-backwards #f) (truncate-gradient -1) (store-steps)) 6 (x h0) ((inner-sit-sot 0)))))",
      "(run* (q) (scan-termo q 'scan-term))",
      "(run* (q) (fresh (a) (scan-termo q a)))",
      "(run* (q) (scan-termo 3 q))",
      /* an op that does not exist */
      "(run* (q) (fresh (t t1) (scan-termo S t) (inner-replaceo t '(inner-nonseq 2) '(no-such-op (inner-nonseq 2)) t1) "
      "(scan-termo q t1)))",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_string_equal(str(eval(I, bad[i])), "()");
    assert_int_equal(rg_errcode(C), RG_OK);
  }
}

/* ------------------------------------------------------------------ loop rules in a rule file */

/* hoist (push_out_non_seq) then sink: W1 + W2 leaves the loop and comes back. */
static void test_hoist_and_sink(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " LOOP ")"), *ref = read_graph("(output " LOOP ")");
  assert_int_equal(rewrite(fg, "hoist"), 1);
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(nscans, 1);
  assert_int_equal(info(s).n_non_seqs, 4);
  assert_int_equal(tu_count_inner(s, RG_OP_ADD), 2); /* the dot's sum is gone */
  same_values(fg, ref);
  assert_int_equal(rewrite(fg, "sink"), 1);
  s = tu_first_scan(fg, &nscans);
  assert_int_equal(info(s).n_non_seqs, 3);
  assert_true(tu_equal_graphs(fg, ref));
}

/* hoist_seq (push_out_seq): x_t * s + 1 becomes a new sequence. */
static void test_hoist_seq(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(output " LOOP ")"), *ref = read_graph("(output " LOOP ")");
  assert_int_equal(rewrite(fg, "hoist_seq"), 1);
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_int_equal(info(s).n_seqs, 2);
  assert_int_equal(tu_count_inner(s, RG_OP_MUL), 0);
  same_values(fg, ref);
}

/* A batch of states: the slice's product by a matrix moves out as one
 * product over every step's rows, and a non-sequence vector broadcasts.
 * The relation's answers interleave, so the first may be the product
 * alone; the sum follows on the next pass. */
static void test_hoist_seq_dot(void **st) {
  (void)st;
#define BATCH \
  "(scan (lambda (x_t h) (tanh (add (dot h W1) (add (dot x_t W2) s)))) (sequences X) (outputs-info H0))"
  rg_fgraph *fg = read_graph("(output " BATCH ")"), *ref = read_graph("(output " BATCH ")");
  assert_true(rewrite(fg, "hoist_seq") >= 1);
  int nscans;
  rg_node *s = tu_first_scan(fg, &nscans);
  assert_true(info(s).n_seqs >= 2);
  assert_int_equal(tu_count_inner(s, RG_OP_DOT), 1);
  assert_int_equal(tu_count_inner(s, RG_OP_ADD), 1);
  same_values(fg, ref);
}

/* Sequences of different static lengths are not combined outside. */
static void test_hoist_seq_lengths(void **st) {
  (void)st;
  rg_fgraph *fg = read_graph("(input y float64 (7 3)) (output (scan (lambda (a b h) (add h (mul a b))) "
                             "(sequences x y) (outputs-info h0)))");
  assert_int_equal(rewrite(fg, "hoist_seq"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_term_of_scan),       cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_helpers),            cmocka_unit_test(test_ill_typed_rejected),
      cmocka_unit_test(test_hoist_and_sink),     cmocka_unit_test(test_hoist_seq),
      cmocka_unit_test(test_hoist_seq_dot),      cmocka_unit_test(test_hoist_seq_lengths),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
