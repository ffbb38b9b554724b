/*
 * test_rewrite_engine.c — the rewrite engine with the semantics of
 * Aesara's graph rewriting tests, written anew: pattern rules (at the root
 * and inside, nested, non-linear, constants, guards, several clients, the
 * graph's own ops with op variables, dotted tails and multi-output nodes), op
 * substitution and removal, navigators (expansions applied once per node,
 * walk orders), the equilibrium driver (chains, budgets, cycles, rejected
 * rewrites, errors), merge, queries, bad rules, and what a run leaves
 * behind (nothing that keeps its graph alive).
 *
 * Graphs are written in the graph file format with opaque ops op1 ... op4
 * (elementwise, like Aesara's test ops); rules in the relational language.
 * Every test ends with the invariant checker on the rewritten graph.
 */
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/rewrite.h"

#ifndef RG_GC_NEVER_FREE
#include <gc/gc.h>
#include <pthread.h>
#endif

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  return 0;
}

/* Each test gets a fresh context (opaque ops are declared per context). */
static int fresh(void **st) {
  C = rg_ctx_new();
  return 0;
}

#define OPS "(opaque op1) (opaque op2) (opaque op3) (opaque op4) "
#define XYZ "(input x float64 ()) (input y float64 ()) (input z float64 ()) "

static rg_fgraph *graph(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "<test graph>", text, strlen(text));
  if (!fg) fail_msg("graph: %s", rg_errmsg(C));
  return fg;
}

static rg_rule_set *rules(const char *text) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_rule_set *rs = rg_rule_set_new(I);
  if (rg_rule_set_load_string(rs, "<test rules>", text) != RG_OK) fail_msg("rules: %s", rg_errmsg(C));
  return rs;
}

/* The rules as the database "rules" inside a sequence database. */
static rg_rewrite_db *db_of(rg_rule_set *rs) {
  rg_rewrite_db *db = rg_db_sequence("test");
  assert_int_equal(rg_rule_set_register(rs, db, "rules"), RG_OK);
  return db;
}

/* The graph printed, outputs joined by "; ". */
static const char *show(rg_fgraph *fg) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  rg_fgraph_pprint(f, fg);
  fclose(f);
  while (n && buf[n - 1] == '\n') buf[--n] = 0;
  char *s = rg_gc_alloc(2 * n + 1), *o = s;
  for (size_t i = 0; i < n; i++) {
    if (buf[i] == '\n') *o++ = ';', *o++ = ' ';
    else *o++ = buf[i];
  }
  *o = 0;
  free(buf);
  return s;
}

static const char *text_of(void (*fn)(const rg_rewrite_run *, FILE *), const rg_rewrite_run *run) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  fn(run, f);
  fclose(f);
  char *s = rg_gc_alloc(n + 1);
  memcpy(s, buf, n + 1);
  free(buf);
  return s;
}

static rg_rewrite_run *last;

/* Rewrites a graph with rules under a query; returns the printed result
 * (the run in `last`), after checking the graph's invariants. */
static const char *rewrite_q(const char *g, const char *r, const char *q, double ratio) {
  rg_fgraph *fg = graph(g);
  rg_rewriter *rw = rg_db_query(C, db_of(rules(r)), q);
  if (!rw) fail_msg("query: %s", rg_errmsg(C));
  rg_rewrite_opts o = {.max_use_ratio = ratio, .trace = true, .provenance = true};
  last = rg_rewrite(fg, rw, &o);
  assert_non_null(last);
  if (rg_fgraph_check(fg) != RG_OK) fail_msg("invariants: %s", rg_errmsg(C));
  return show(fg);
}

static const char *rewrite(const char *g, const char *r) { return rewrite_q(g, r, "rules", 0); }

#define GRAPH(outputs) "(graph " OPS XYZ outputs ")"

/* ------------------------------------------------------------------ patterns */

/* Registering fails with a message in the context (it had none): a
 * database with an entry of the rules' name already. */
static void test_register_twice(void **st) {
  rg_rule_set *rs = rules("(defrule r1 (pattern (neg (neg ?x)) ?x))");
  rg_rewrite_db *db = db_of(rs);
  rg_clear_error(C);
  assert_true(rg_rule_set_register(rs, db, "rules") < 0);
  assert_non_null(strstr(rg_errmsg(C), "already has an entry named 'rules'"));
}

static void test_pattern_at_root(void **st) {
  const char *r = "(defrule r (pattern (op1 (op2 ?a ?b) ?c) (op3 ?c (op2 ?b ?a))))";
  assert_string_equal(rewrite(GRAPH("(output (op1 (op2 x y) z))"), r), "op3(z, op2(y, x))");
  assert_int_equal(rg_rewrite_count(last), 1);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  assert_string_equal(rg_rewrite_stop_message(last), "equilibrium after 1 rewrite");
}

static void test_pattern_inside(void **st) {
  const char *r = "(defrule r (pattern (op1 (op2 ?a ?b) ?c) (op3 ?c (op2 ?b ?a))))";
  assert_string_equal(rewrite(GRAPH("(output (op4 x (op1 (op2 x y) z)))"), r),
                      "op4(x, op3(z, op2(y, x)))");
  /* no match anywhere: nothing changes */
  assert_string_equal(rewrite(GRAPH("(output (op4 x (op1 (op3 x y) z)))"), r), "op4(x, op1(op3(x, y), z))");
  assert_int_equal(rg_rewrite_count(last), 0);
}

/* Every occurrence is rewritten, in one run. */
static void test_every_occurrence(void **st) {
  const char *r = "(defrule r (pattern (op1 ?x) (op2 ?x)))";
  assert_string_equal(rewrite(GRAPH("(output (op3 (op1 x) (op1 (op1 y)))) (output (op1 z))"), r),
                      "op3(op2(x), op2(op2(y))); op2(z)");
  assert_int_equal(rg_rewrite_count(last), 4);
}

static void test_nested_result(void **st) {
  const char *r = "(defrule r (pattern (op1 ?x ?y) (op2 (op3 ?x ?y) (op3 ?y (op4 ?x)))))";
  assert_string_equal(rewrite(GRAPH("(output (op1 x y))"), r), "op2(op3(x, y), op3(y, op4(x)))");
}

static void test_nonlinear_pattern(void **st) {
  const char *r = "(defrule same (pattern (op1 ?x ?x) (op2 ?x)))";
  assert_string_equal(rewrite(GRAPH("(output (op1 x x))"), r), "op2(x)");
  assert_string_equal(rewrite(GRAPH("(output (op1 x y))"), r), "op1(x, y)");
  /* two nodes computing the same thing are the same expression */
  assert_string_equal(rewrite(GRAPH("(output (op1 (op3 x y) (op3 x y)))"), r), "op2(op3(x, y))");
  assert_string_equal(rewrite(GRAPH("(output (op1 (op3 x y) (op3 y x)))"), r),
                      "op1(op3(x, y), op3(y, x))");
}

static void test_nested_patterns_even_odd(void **st) {
  const char *r = "(defrule twice (pattern (op1 (op1 ?x)) ?x))";
  assert_string_equal(rewrite(GRAPH("(output (op1 (op1 (op1 (op1 x)))))"), r), "x");
  assert_int_equal(rg_rewrite_count(last), 2);
  assert_string_equal(rewrite(GRAPH("(output (op1 (op1 (op1 (op1 (op1 x))))))"), r), "op1(x)");
}

static void test_constants_in_patterns(void **st) {
  const char *r = "(defrule two (pattern (op1 ?x 2) (op2 ?x)))";
  assert_string_equal(rewrite(GRAPH("(output (op1 x 2))"), r), "op2(x)");
  /* a constant equals a number of the same value, whatever its dtype */
  assert_string_equal(rewrite(GRAPH("(output (op1 x 2.0))"), r), "op2(x)");
  assert_string_equal(rewrite(GRAPH("(output (op1 x (constant float64 () (2.0))))"), r), "op2(x)");
  assert_string_equal(rewrite(GRAPH("(output (op1 x 3))"), r), "op1(x, 3)");
  assert_string_equal(rewrite(GRAPH("(output (op1 2 x))"), r), "op1(2, x)");
  /* constants in results become weak literals */
  assert_string_equal(rewrite(GRAPH("(output (op3 x))"), "(defrule k (pattern (op3 ?x) (op1 ?x 1.5)))"),
                      "op1(x, 1.5)");
}

static void test_guards(void **st) {
  const char *r = "(defrel (smallo n) (conde ((== n 1)) ((== n 2))))\n"
                  "(defrule small (pattern (op1 ?x ?n) (op2 ?x)) :when (smallo ?n))";
  assert_string_equal(rewrite(GRAPH("(output (op1 x 1)) (output (op1 x 2)) (output (op1 x 3))"), r),
                      "op2(x); op2(x); op1(x, 3)");
  /* guards over types */
  const char *g = "(graph " OPS "(input a float32 (3)) (input b int8 (3)) (output (op1 a)) (output (op1 b)))";
  assert_string_equal(rewrite(g, "(defrule f (pattern (op1 ?x) (op2 ?x)) :when (dtypeo ?x 'float32))"),
                      "op2(a); op1(b)");
  assert_string_equal(rewrite(g, "(defrule f (pattern (op1 ?x) (op2 ?x)) :when (typeo ?x '(int8 (3))))"),
                      "op1(a); op2(b)");
  assert_string_equal(rewrite(g, "(defrule f (pattern (op1 ?x) (op2 ?x)) :when (ndimo ?x 0))"),
                      "op1(a); op1(b)");
  /* typeo against a type already bound is read in place: every way it can
   * differ, and parts still open */
  const char *gu = "(graph " OPS "(input a float32 (3)) (input b int8 (3)) (input c float32 (?))"
                   " (output (op1 a)) (output (op1 b)) (output (op1 c)))";
  static const struct { const char *type, *want; } types[] = {
      {"'(float32 (3))", "op2(a); op1(b); op1(c)"},  {"'(int8 (4))", "op1(a); op1(b); op1(c)"},
      {"'(float32 (3 1))", "op1(a); op1(b); op1(c)"}, {"'(float32 ())", "op1(a); op1(b); op1(c)"},
      {"'(float32 (?))", "op1(a); op1(b); op2(c)"},  {"'(float32 (3) x)", "op1(a); op1(b); op1(c)"},
      {"'(float32 (x))", "op1(a); op1(b); op1(c)"},  {"'(float32 . 3)", "op1(a); op1(b); op1(c)"},
      {"`(float32 (,n))", "op2(a); op1(b); op2(c)"}, {"`(,n (3))", "op2(a); op2(b); op1(c)"},
      {"`(float32 ,n)", "op2(a); op1(b); op2(c)"},   {"`(float32 (3 . ,n))", "op2(a); op1(b); op1(c)"},
      {"'(float32 (3.0))", "op1(a); op1(b); op1(c)"}, {"3", "op1(a); op1(b); op1(c)"},
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    char rule[256];
    /* the type is bound before typeo runs */
    snprintf(rule, sizeof rule, "(defrule f (pattern (op1 ?x) (op2 ?x)) :when (fresh (n t) (== t %s) (typeo ?x t)))",
             types[i].type);
    assert_string_equal(rewrite(gu, rule), types[i].want);
  }
}

static void test_multiple_clients(void **st) {
  const char *g = GRAPH("(define s (op2 x)) (output (op1 s)) (output (op4 s))");
  const char *r = "(defrule r (pattern (op1 (op2 ?x)) (op3 ?x)))";
  /* op2(x) is used twice: rewriting op1(op2(x)) away would compute it twice */
  assert_string_equal(rewrite(g, r), "op1(op2(x)); op4(op2(x))");
  assert_int_equal(rg_rewrite_count(last), 0);
  assert_string_equal(rewrite(g, "(defrule r (pattern (op1 (op2 ?x)) (op3 ?x)) :shared #t)"),
                      "op3(x); op4(op2(x))");
  /* the root itself may have several clients: all of them see the result */
  assert_string_equal(rewrite(GRAPH("(define s (op1 (op2 x))) (output (op4 s s))"), r), "op4(op3(x), op3(x))");
}


/* Patterns over the graph's own ops: a rule first compares the pattern's
 * ops, arities and literals with the graph, then unifies; both must agree. */
static void test_pattern_shapes(void **st) {
  const char *g = "(graph (input x float64 (3)) (input y float64 (3)) "
                  "(output (exp (log x))) (output (exp (sin x))) (output (sin (add x y x))) "
                  "(output (mul (exp y) 1.0)) (output (mul (exp y) x)))";
  /* an op variable, a dotted tail, a literal */
  const char *r = "(defrule vh (pattern (?f (log ?x)) (?f (neg ?x))))\n"
                  "(defrule tail (pattern (sin (add ?x . ?rest)) (cos ?x)))\n"
                  "(defrule one (pattern (mul (exp ?x) 1) (tanh ?x)))";
  assert_string_equal(rewrite(g, r), "exp(-x); exp(sin(x)); cos(x); tanh(y); (exp(y) * x)");
  /* the arity must agree: (add ?x ?y) is not an add of three */
  assert_string_equal(rewrite(g, "(defrule two (pattern (sin (add ?x ?y)) (cos ?x)))"),
                      "exp(log(x)); exp(sin(x)); sin((x + y + x)); (exp(y) * 1.0); (exp(y) * x)");
  /* a sub-pattern's value with several clients, unless the rule allows it */
  const char *sh = "(graph (input x float64 (3)) (define l (log x)) (output (exp l)) (output (sin l)))";
  assert_string_equal(rewrite(sh, "(defrule e (pattern (exp (log ?x)) ?x))"), "exp(log(x)); sin(log(x))");
  assert_string_equal(rewrite(sh, "(defrule e (pattern (exp (log ?x)) ?x) :shared #t)"), "x; sin(log(x))");
  /* one output of a node with several */
  const char *sp = "(graph (input x float64 (3)) (define (a b) ((split 0 2) x (constant int64 (2) (1 2)))) "
                   "(output (exp a)) (output (exp b)))";
  assert_string_equal(rewrite(sp, "(defrule n (pattern (exp (nth 0 ((split 0 2) ?x ?s))) "
                                  "(neg (nth 0 ((split 0 2) ?x ?s)))))"),
                      "-split{0,2}(x, [1 2])[0]; exp(split{0,2}(x, [1 2])[1])");
}

/* ------------------------------------------------------------------ op rules */

static void test_op_substitution(void **st) {
  const char *g = "(graph (input x float64 (3)) (output (exp (exp (log x)))))";
  assert_string_equal(rewrite(g, "(defrule s (subst exp tanh))"), "tanh(tanh(log(x)))");
  assert_int_equal(rg_rewrite_count(last), 2);
  /* ops with parameters */
  const char *g2 = "(graph (input m float64 (2 3)) (output ((sum 0) m)))";
  assert_string_equal(rewrite(g2, "(defrule s (subst (sum 0) (max 0)))"), "max{0}(m)");
}

static void test_op_removal(void **st) {
  const char *g = "(graph (input x float64 (3)) (output (exp (identity (identity x)))))";
  assert_string_equal(rewrite(g, "(defrule r (remove identity))"), "exp(x)");
  assert_int_equal(rg_rewrite_count(last), 2);
  /* removal that would change the type is rejected, and the graph kept */
  const char *g2 = "(graph (input x int8 (3)) (output (exp ((cast float64) x))))";
  assert_string_equal(rewrite(g2, "(defrule r (remove (cast float64)))"), "exp(cast{float64}(x))");
  assert_int_equal(rg_rewrite_rejected(last), 1);
}

/* Aesara's equilibrium test: a chain of substitutions registered in the
 * reverse order still reaches the end in one run. */
static void test_equilibrium_chain(void **st) {
  const char *g = "(graph (input x float64 (3)) (output (exp (exp x))))";
  const char *r = "(defrule c (subst sin cos))\n(defrule b (subst tanh sin))\n(defrule a (subst exp tanh))";
  assert_string_equal(rewrite(g, r), "cos(cos(x))");
  assert_int_equal(rg_rewrite_count(last), 6);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
}

/* ------------------------------------------------------------------ budgets, cycles, rejections */

static void test_budget(void **st) {
  const char *r = "(defrule grow (pattern (op1 ?x) (op2 (op1 ?x))))";
  const char *out = rewrite_q(GRAPH("(output (op1 x))"), r, "rules", 3);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_BUDGET);
  assert_non_null(strstr(rg_rewrite_stop_message(last), "budget of grow exhausted"));
  /* two nodes at the start: 3 x the largest size seen; the graph is whole */
  assert_non_null(strstr(out, "op2(op2("));
  assert_true(rg_rewrite_count(last) >= 6);
}

static void test_cycle_named(void **st) {
  const char *r = "(defrule there (pattern (op1 ?x) (op2 ?x)))\n(defrule back (pattern (op2 ?x) (op1 ?x)))";
  rewrite(GRAPH("(output (op1 x))"), r);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_CYCLE);
  const char *m = rg_rewrite_stop_message(last);
  assert_non_null(strstr(m, "cycle"));
  assert_non_null(strstr(m, "there"));
  assert_non_null(strstr(m, "back"));
  /* one rule with itself */
  rewrite(GRAPH("(output (op1 x y))"), "(defrule comm (pattern (op1 ?a ?b) (op1 ?b ?a)))");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_CYCLE);
  assert_non_null(strstr(rg_rewrite_stop_message(last), "comm"));
}

/* A chain of op substitutions that rewrites equal subterms at several
 * depths: the same expressions are replaced again and again, but the graph
 * as a whole never returns to a state it had, so the run is no cycle. */
static void test_substitution_chains_at_depths(void **st) {
  const char *r = "(defrule a (subst exp tanh))\n(defrule b (subst tanh sin))\n(defrule c (subst sin cos))";
  const char *g1 = "(graph (input x float64 ()) (output (add (exp x) (exp x))))";
  assert_string_equal(rewrite(g1, r), "(cos(x) + cos(x))");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_rewrite_count(last), 6);
  const char *g2 = "(graph (input x float64 ()) "
                   "(output (add (exp x) (mul (exp (exp x)) (neg (exp (exp (exp x))))))))";
  assert_string_equal(rewrite(g2, r), "(cos(x) + (cos(cos(x)) * -cos(cos(cos(x)))))");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_rewrite_count(last), 18);
  /* many copies of one subterm, each rewritten through the whole chain */
  const char *g3 = "(graph (input x float64 ()) (define e (exp (exp x))) "
                   "(output (add (add (add e (exp (exp x))) (add (exp (exp x)) (exp (exp x)))) "
                   "(exp (exp (exp (exp x)))))))";
  rewrite(g3, r);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_rewrite_count(last), 36);
}

/* Real oscillations are still caught, wherever they are in the graph, and
 * every rule of the loop is named once. */
static void test_oscillations_caught(void **st) {
  const char *r3 = "(defrule p (pattern (op1 ?x) (op2 ?x)))\n(defrule q (pattern (op2 ?x) (op3 ?x)))\n"
                   "(defrule s (pattern (op3 ?x) (op1 ?x)))";
  rewrite(GRAPH("(output (op4 (op4 (op4 x y) (op1 z)) y))"), r3);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_CYCLE);
  const char *m = rg_rewrite_stop_message(last);
  assert_non_null(strstr(m, "the one of 3 rewrites ago"));
  assert_non_null(strstr(m, "p, q, s") ? m : strstr(m, "q, s, p") ? m : strstr(m, "s, p, q"));
  /* an oscillation beside a chain that has already done many rewrites */
  const char *r4 = "(defrule a (subst exp tanh))\n(defrule b (subst tanh sin))\n"
                   "(defrule fwd (pattern (op1 ?x ?y) (op1 ?y ?x)))";
  rewrite("(graph " OPS "(input x float64 ()) (input y float64 ()) "
          "(output (add (exp (exp (exp x))) (op1 x y))))", r4);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_CYCLE);
  m = rg_rewrite_stop_message(last);
  assert_non_null(strstr(m, "(rules: fwd)"));
}

static void test_rejected_rewrite_reported(void **st) {
  const char *g = "(graph (input x float32 (3)) (output (neg x)))";
  const char *out = rewrite(g, "(defrule widen (pattern (neg ?x) (neg ((cast float64) ?x))))");
  assert_string_equal(out, "-x");
  assert_int_equal(rg_rewrite_rejected(last), 1);
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  const char *rej = text_of(rg_rewrite_rejections, last);
  assert_non_null(strstr(rej, "widen rejected on node"));
  assert_non_null(strstr(rej, "the result has type float64 (3), the node float32 (3)"));
  assert_non_null(strstr(text_of(rg_rewrite_trace, last), "widen rejected on node"));
}

static void test_rule_errors_stop_the_run(void **st) {
  const char *g = "(graph (input x float64 (3)) (output (exp x)))";
  assert_string_equal(rewrite(g, "(defrule r (pattern (exp ?x) (frobnicate ?x)))"), "exp(x)");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_ERROR);
  assert_non_null(strstr(rg_rewrite_stop_message(last), "unknown op 'frobnicate'"));
  /* names are late-bound: an unknown relation is found when the rule runs */
  assert_string_equal(rewrite(g, "(defrule r (in out) (no-such-relation in out))"), "exp(x)");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_ERROR);
  assert_non_null(strstr(rg_rewrite_stop_message(last), "unbound variable no-such-relation"));
  /* a relation that never answers stops at its step limit */
  const char *loop = "(defrel (spino a b) (spino a b))\n(defrule spin (in out) (spino in out) :tracks (exp))";
  assert_string_equal(rewrite(g, loop), "exp(x)");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_ERROR);
  assert_non_null(strstr(rg_rewrite_stop_message(last), "did not answer"));
}

/* A relational rule runs only on nodes that fit what its relation
 * requires of its input (rg_relation_input_templates): the relation below
 * would reach its step limit before its unification, so the rule shows
 * where it ran. */
static void test_relation_templates_reject_before_running(void **st) {
  const char *rules = "(defrel (spino a) (spino a))\n"
                      "(defrel (unlogo in out) (fresh (x) (spino x) (== in `(exp (log ,x))) (== out x)))\n"
                      "(defrule unlog (in out) (unlogo in out))";
  /* exp of an input, exp of an exp: neither fits (exp (log _)); nothing runs */
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (exp x)))", rules), "exp(x)");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (exp (exp x))))", rules), "exp(exp(x))");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_EQUILIBRIUM);
  /* exp of a log fits, and the relation runs */
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (exp (log x))))", rules), "exp(log(x))");
  assert_int_equal(rg_rewrite_stop(last), RG_STOP_ERROR);
  assert_non_null(strstr(rg_rewrite_stop_message(last), "did not answer"));
  /* the templates of conde clauses are alternatives; a parameter passed a
   * constant is that constant; literals match one-element constants */
  const char *alts = "(defrel (opo op in out) (fresh (x) (== in `(,op ,x 2.0)) (== out x)))\n"
                     "(defrel (twoo in out) (conde ((opo 'mul in out)) ((opo 'true_div in out))))\n"
                     "(defrule two (in out) (twoo in out))";
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (add (mul x 2.0) (true_div x 2.0))))", alts),
                      "(x + x)");
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (mul x x)))", alts), "(x * x)");
  /* the relation is read when the rule runs: a later definition counts */
  const char *later = "(defrel (ro in out) (fresh (x) (== in `(exp ,x)) (== out x)))\n"
                      "(defrule r (in out) (ro in out) :tracks (exp log))\n"
                      "(defrel (ro in out) (fresh (x) (== in `(log ,x)) (== out x)))";
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (add (log x) (exp x))))", later),
                      "(x + exp(x))");
  /* so do the ops it tracks when no :tracks says them: first exp, then log */
  const char *derived = "(defrel (ro in out) (fresh (x) (== in `(exp ,x)) (== out x)))\n"
                        "(defrule r (in out) (ro in out))\n"
                        "(defrel (ro in out) (fresh (x) (== in `(log ,x)) (== out x)))";
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (add (log x) (exp x))))", derived),
                      "(x + exp(x))");
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (log (log x))))", derived), "x");
  /* a relation the rule calls that is defined only after the rule */
  const char *undefined = "(defrule r (in out) (ro in out))\n"
                          "(defrel (ro in out) (fresh (x) (== in `(log ,x)) (== out x)))";
  assert_string_equal(rewrite("(graph (input x float64 (3)) (output (exp (log x))))", undefined), "exp(x)");
}

static void test_bad_rule_files(void **st) {
  struct { const char *text, *message; } bad[] = {
      {"(defrule r (pattern (exp ?x) (log ?x))", "unterminated list"},
      {"(defrule r (pattern (exp ?x) (log ?y)))", "?y appears in the result but not in the pattern"},
      {"(defrule r (subst exp frobnicate))", "unknown op 'frobnicate'"},
      {"(defrule r (in out))", "rule r: it has no goal"},
      {"(defrule r (pattern ?x (log ?x)))", "the pattern must be an expression"},
      {"(defrule r (pattern (exp ?x) ?x) :colour blue)", "unknown rule option :colour"},
      {"(defrule (pattern (exp ?x) ?x))", "defrule needs a name"},
      {"(defrule r (in out) (== in out) :when (== 1 2))", "rule r: :when is an option of pattern rules"},
      {"(defrule r (subst exp log) :shared #t)", "rule r: :shared is an option of pattern rules"},
      {"(defrule r (pattern (exp ?x) ?x) :shared 5)", ":shared needs #t or #f"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rg_interp *I = rg_interp_new(C);
    rg_interp_set_output(I, NULL);
    rg_rule_set *rs = rg_rule_set_new(I);
    int rc = rg_rule_set_load_string(rs, "bad.kn", bad[i].text);
    if (rc == RG_OK) fail_msg("loaded: %s", bad[i].text);
    if (!strstr(rg_errmsg(C), bad[i].message) || strncmp(rg_errmsg(C), "bad.kn:1:", 9))
      fail_msg("%s: got '%s'", bad[i].text, rg_errmsg(C));
    rg_clear_error(C);
  }
}

/* ------------------------------------------------------------------ navigators */

static rg_rewrite_run *navigate(rg_fgraph *fg, const char *r, rg_nav_order order, bool ignore_new,
                                double ratio) {
  rg_rule_set *rs = rules(r);
  rg_rewriter *rws[8];
  int n = rg_rule_set_count(rs);
  for (int i = 0; i < n; i++) rws[i] = rg_rule_set_rule(rs, i);
  assert_null(rg_rule_set_rule(rs, n)), assert_null(rg_rule_set_tags(rs, -1)); /* no such rule */
  rg_rewrite_opts o = {.max_use_ratio = ratio, .profile = true};
  rg_rewrite_run *run = rg_rewrite(fg, rg_navigator("walk", order, ignore_new, n, rws), &o);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  return run;
}

/* Aesara's expansion test: each op1 of the original graph is wrapped once. */
static void test_navigator_expansion_once(void **st) {
  const char *r = "(defrule wrap (pattern (op1 ?x) (op2 (op1 ?x))))";
  rg_fgraph *fg = graph(GRAPH("(output (op1 (op1 (op1 x))))"));
  rg_rewrite_run *run = navigate(fg, r, RG_NAV_IN_TO_OUT, true, 0);
  assert_string_equal(show(fg), "op2(op1(op2(op1(op2(op1(x))))))");
  assert_int_equal(rg_rewrite_count(run), 3);
  assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
  /* visiting new nodes too, the expansion goes on until its budget */
  fg = graph(GRAPH("(output (op1 x))"));
  run = navigate(fg, r, RG_NAV_IN_TO_OUT, false, 2);
  assert_int_equal(rg_rewrite_stop(run), RG_STOP_BUDGET);
  assert_non_null(strstr(rg_rewrite_stop_message(run), "budget of wrap"));
}

/* Moving op1 inside op2: from the inputs, a moved op1 meets the next one
 * again; from the outputs, each node is visited before what it becomes. */
static void test_navigator_orders(void **st) {
  const char *r = "(defrule sink (pattern (op1 (op2 ?x)) (op2 (op1 ?x))))";
  rg_fgraph *fg = graph(GRAPH("(output (op1 (op1 (op2 x))))"));
  navigate(fg, r, RG_NAV_IN_TO_OUT, false, 0);
  assert_string_equal(show(fg), "op2(op1(op1(x)))");
  fg = graph(GRAPH("(output (op1 (op1 (op2 x))))"));
  navigate(fg, r, RG_NAV_OUT_TO_IN, true, 0);
  assert_string_equal(show(fg), "op1(op2(op1(x)))");
}

/* ------------------------------------------------------------------ merge */

static const char *merged(const char *g, size_t *nodes) {
  rg_fgraph *fg = graph(g);
  rg_rewriter *rw = rg_db_query(C, rg_std_db(C), "merge");
  assert_non_null(rw);
  last = rg_rewrite(fg, rw, NULL);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  *nodes = rg_fgraph_nnodes(fg);
  return show(fg);
}

static void test_merge(void **st) {
  size_t n;
  /* straightforward: one node for both */
  merged(GRAPH("(output (op4 (op1 x y) (op1 x y)))"), &n);
  assert_int_equal(n, 2);
  /* constants equal by value and type */
  merged(GRAPH("(output (op4 (op1 x (constant float64 () (2.0))) (op1 x (constant float64 () (2.0)))))"), &n);
  assert_int_equal(n, 2);
  merged(GRAPH("(output (op4 (op1 x (constant float64 () (2.0))) (op1 x (constant float32 () (2.0)))))"), &n);
  assert_int_equal(n, 3);
  /* deep: equal subgraphs merge level by level */
  merged(GRAPH("(output (op4 (op1 (op2 x) (op3 y z)) (op1 (op2 x) (op3 y z))))"), &n);
  assert_int_equal(n, 4);
  /* arguments in another order are another computation */
  merged(GRAPH("(output (op4 (op1 x y) (op1 y x)))"), &n);
  assert_int_equal(n, 3);
  /* outputs: two outputs computing the same thing become one variable */
  rg_fgraph *fg = graph(GRAPH("(output (op1 x y)) (output (op1 x y))"));
  rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "merge"), NULL);
  assert_ptr_equal(rg_fgraph_output(fg, 0), rg_fgraph_output(fg, 1));
  /* ops without inputs */
  merged("(graph (output (add ((make_vector float64)) ((make_vector float64)))))", &n);
  assert_int_equal(n, 2);
}

/* ------------------------------------------------------------------ queries */

static const char *std_rewrite(const char *g, const char *q) {
  rg_fgraph *fg = graph(g);
  rg_rewriter *rw = rg_db_query(C, rg_std_db(C), q);
  if (!rw) fail_msg("query %s: %s", q, rg_errmsg(C));
  rg_rewrite_opts o = {.trace = true};
  last = rg_rewrite(fg, rw, &o);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  return show(fg);
}

static void test_queries(void **st) {
  const char *g = "(graph (input x float64 (3)) (input A float64 (3 3)) (output (mul (add x 0) 1))"
                  " (output (log (add 1 (dot A x)))))";
  assert_string_equal(std_rewrite(g, "fast_run"),
                      "x; log1p{(inplace 0)}(gemv{(inplace 0)}(alloc_empty{float64}(3), 1.0, A, x, 0.0))");
  /* fast_compile: canonicalize only */
  assert_string_equal(std_rewrite(g, "fast_compile"), "x; log((1 + (A @ x)))");
  /* a database by name, less one rule by its printed name (constants go
   * first in products) */
  assert_string_equal(std_rewrite(g, "canonicalize -mul-one"), "(1 * x); log((1 + (A @ x)))");
  /* a rule by name alone */
  assert_string_equal(std_rewrite(g, "add-zero"), "(x * 1); log((1 + (A @ x)))");
  /* union of tags, and a requirement */
  assert_string_equal(std_rewrite(g, "add-zero log1p"), "(x * 1); log1p((A @ x))");
  assert_string_equal(std_rewrite(g, "fast_run &stabilize"), "((x + 0) * 1); log1p((A @ x))");
  /* a sub-query for a nested database */
  assert_string_equal(std_rewrite(g, "fast_run canonicalize:-add-zero specialize:-dot-to-blas"),
                      "(0 + x); log1p{(inplace 0)}((A @ x))");
  /* exclusion of a whole database */
  assert_string_equal(std_rewrite(g, "fast_run -specialize"), "x; log1p{(inplace 0)}((A @ x))");
  /* exclusions or requirements alone include nothing (Aesara's optdb:
   * the union of no tags); the database's own name includes all of it */
  assert_string_equal(std_rewrite(g, "-dot-to-blas"), "((x + 0) * 1); log((1 + (A @ x)))");
  assert_string_equal(std_rewrite(g, "&stabilize"), "((x + 0) * 1); log((1 + (A @ x)))");
  assert_string_equal(std_rewrite(g, "std -relational"), std_rewrite(g, "fast_run"));
  assert_string_equal(std_rewrite(g, "fast_run -std"), "((x + 0) * 1); log((1 + (A @ x)))");
  /* errors: unknown names, empty queries, unknown databases, empty tags */
  assert_null(rg_db_query(C, rg_std_db(C), "no-such-tag"));
  assert_non_null(strstr(rg_errmsg(C), "no rewriter or tag named 'no-such-tag'"));
  rg_clear_error(C);
  assert_null(rg_db_query(C, rg_std_db(C), ""));
  assert_non_null(strstr(rg_errmsg(C), "empty rewrite query"));
  rg_clear_error(C);
  assert_null(rg_db_query(C, rg_std_db(C), "nodb:x"));
  rg_clear_error(C);
  /* a tag or a rule is not a database: its sub-query would do nothing */
  assert_null(rg_db_query(C, rg_std_db(C), "fast_run:-mul-one fast_run"));
  assert_non_null(strstr(rg_errmsg(C), "no database named 'fast_run' in std"));
  rg_clear_error(C);
  assert_null(rg_db_query(C, rg_std_db(C), "merge1:-add-zero fast_run"));
  rg_clear_error(C);
  /* the database itself takes a sub-query too */
  assert_string_equal(std_rewrite(g, "canonicalize std:-mul-one"), std_rewrite(g, "canonicalize -mul-one"));
  /* a database inside itself is refused */
  rg_rewrite_db *a = rg_db_sequence("a"), *b = rg_db_equilibrium("b");
  assert_int_equal(rg_db_register_db(a, "b", b, 0, ""), RG_OK);
  assert_int_not_equal(rg_db_register_db(b, "a", a, 0, ""), RG_OK);
  assert_int_not_equal(rg_db_register_db(a, "self", a, 1, ""), RG_OK);
  /* unknown names inside a sub-query, included or excluded */
  assert_null(rg_db_query(C, rg_std_db(C), "fast_run canonicalize:-no-such-tag"));
  assert_non_null(strstr(rg_errmsg(C), "no rewriter or tag named 'no-such-tag'"));
  rg_clear_error(C);
  assert_null(rg_db_query(C, rg_std_db(C), "canonicalize:no-such-tag"));
  assert_non_null(strstr(rg_errmsg(C), "'no-such-tag' in canonicalize"));
  rg_clear_error(C);
  /* a rule of another nested database selects nothing there */
  assert_null(rg_db_query(C, rg_std_db(C), "fast_run canonicalize:-dot-to-blas"));
  assert_non_null(strstr(rg_errmsg(C), "'dot-to-blas' in canonicalize"));
  rg_clear_error(C);
  assert_non_null(rg_db_query(C, rg_std_db(C), "fast_run canonicalize:-add-zero specialize:-dot-to-blas"));
  assert_non_null(rg_db_query(C, rg_std_db(C), "fast_run canonicalize:&fast_run"));
  assert_null(rg_db_query(C, rg_std_db(C), "fast_run -"));
  rg_clear_error(C);
}

/* ------------------------------------------------------------------ observability */

static void test_trace_profile_provenance(void **st) {
  rg_fgraph *fg = graph("(graph (input x float64 (3)) (output (neg (neg (exp (add x 0))))))");
  rg_rewriter *rw = rg_db_query(C, rg_std_db(C), "canonicalize");
  rg_rewrite_opts o = {.trace = true, .profile = true, .provenance = true};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &o);
  assert_string_equal(show(fg), "exp(x)");
  const char *trace = text_of(rg_rewrite_trace, run);
  assert_non_null(strstr(trace, "1. add-zero rewrote node"));
  assert_non_null(strstr(trace, "neg-neg rewrote node"));
  assert_non_null(strstr(trace, "with ?x = (exp x)"));
  const char *prof = text_of(rg_rewrite_profile, run);
  assert_non_null(strstr(prof, "rewrite profile: equilibrium after 2 rewrites"));
  assert_non_null(strstr(prof, "canonicalize (equilibrium)"));
  assert_non_null(strstr(prof, "never applied:"));
  /* provenance: the sum of dots was made by the distribution, from the
   * dot of the input graph */
  rg_fgraph *fg2 = graph("(graph (input A float64 (3 3)) (input x float64 (3)) (input y float64 (3))"
                         " (output (dot A (add x y))))");
  uint64_t add_id = rg_fgraph_output(fg2, 0)->owner->inputs[1]->owner->id; /* (x + y) */
  rg_rewrite_run *r2 = rg_rewrite(fg2, rg_db_query(C, rg_std_db(C), "distribute"), &o);
  rg_variable *out = rg_fgraph_output(fg2, 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(rg_rewrite_why(r2, out->owner->id, f), RG_OK);
  assert_int_equal(rg_rewrite_why(r2, add_id, f), RG_OK);
  /* an id that is neither an input node nor one a rewrite made */
  assert_int_equal(rg_rewrite_why(r2, out->owner->id + 1000000, f), RG_ERR_NAME);
  fclose(f);
  assert_non_null(strstr(buf, "was made by dot-distribute, replacing node"));
  assert_non_null(strstr(buf, "(A @ (x + y))"));
  assert_non_null(strstr(buf, "comes from the input graph (no rewrite made it)"));
  assert_null(strstr(buf, "1000000"));
  assert_non_null(strstr(rg_errmsg(C), "in the input graph or made by the rewrites"));
  rg_clear_error(C);
  free(buf);
}


/* ------------------------------------------------------------------ memory */

#ifndef RG_GC_NEVER_FREE
typedef struct dropped { rg_rewrite_db *db; int freed; } dropped;

static void count_free(void *obj, void *cd) {
  (void)obj;
  ((dropped *)cd)->freed++;
}

/* On a thread of its own, so that no stack or register of the test still
 * points into the graph when the thread is gone. */
static void *rewrite_and_drop(void *arg) {
  dropped *d = arg;
  rg_fgraph *fg = graph(GRAPH("(output (op1 (op2 x y) z)) (output (op4 (op4 x)))"));
  rg_node *out = rg_fgraph_output(fg, 0)->owner;
  GC_register_finalizer_no_order(out, count_free, d, NULL, NULL);
  GC_register_finalizer_no_order(fg, count_free, d, NULL, NULL);
  rg_rewrite_run *run = rg_rewrite(fg, rg_db_query(C, d->db, "rules"), NULL);
  assert_int_equal(rg_rewrite_count(run), 1);
  return NULL;
}
#endif

/* A run leaves nothing in longer-lived places that keeps its graph alive:
 * neither the rules' kept queries (a relational rule restarts one query on
 * every node and takes one answer, leaving the rest of the search, with
 * the node bound, pending) nor the context's scratch stacks (the
 * unifications of the pattern rules).  Once the caller drops the graph,
 * the collector frees it. */
static void test_runs_keep_nothing_alive(void **st) {
#ifdef RG_GC_NEVER_FREE
  skip(); /* nothing is ever freed in this build */
#else
  const char *r = "(defrule p (pattern (op1 (op2 ?a ?b) ?c) (op3 ?c (op2 ?b ?a))))\n"
                  "(defrule q (in out) (conde ((== out in)) ((== out in))))";
  dropped d = {db_of(rules(r)), 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, rewrite_and_drop, &d), 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 4 && d.freed < 2; i++) {
    GC_gcollect();
    GC_invoke_finalizers();
  }
  assert_int_equal(d.freed, 2);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_register_twice, fresh),
      cmocka_unit_test_setup(test_pattern_at_root, fresh),
      cmocka_unit_test_setup(test_pattern_inside, fresh),
      cmocka_unit_test_setup(test_every_occurrence, fresh),
      cmocka_unit_test_setup(test_nested_result, fresh),
      cmocka_unit_test_setup(test_nonlinear_pattern, fresh),
      cmocka_unit_test_setup(test_nested_patterns_even_odd, fresh),
      cmocka_unit_test_setup(test_constants_in_patterns, fresh),
      cmocka_unit_test_setup(test_guards, fresh),
      cmocka_unit_test_setup(test_multiple_clients, fresh),
      cmocka_unit_test_setup(test_pattern_shapes, fresh),
      cmocka_unit_test_setup(test_runs_keep_nothing_alive, fresh),
      cmocka_unit_test_setup(test_op_substitution, fresh),
      cmocka_unit_test_setup(test_op_removal, fresh),
      cmocka_unit_test_setup(test_equilibrium_chain, fresh),
      cmocka_unit_test_setup(test_budget, fresh),
      cmocka_unit_test_setup(test_cycle_named, fresh),
      cmocka_unit_test_setup(test_substitution_chains_at_depths, fresh),
      cmocka_unit_test_setup(test_oscillations_caught, fresh),
      cmocka_unit_test_setup(test_rejected_rewrite_reported, fresh),
      cmocka_unit_test_setup(test_rule_errors_stop_the_run, fresh),
      cmocka_unit_test_setup(test_relation_templates_reject_before_running, fresh),
      cmocka_unit_test_setup(test_bad_rule_files, fresh),
      cmocka_unit_test_setup(test_navigator_expansion_once, fresh),
      cmocka_unit_test_setup(test_navigator_orders, fresh),
      cmocka_unit_test_setup(test_merge, fresh),
      cmocka_unit_test_setup(test_queries, fresh),
      cmocka_unit_test_setup(test_trace_profile_provenance, fresh),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
