/*
 * test_kanren_language.c — the reader and the interpreter of the
 * relational language through the C API: positions, nesting, comments,
 * evaluation, definitions and shadowing, forms added by higher layers,
 * test counts, time and bench, run options, and error reporting.
 */
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kanren/kanren-impl.h"

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

/* ------------------------------------------------------------------ the reader */

static void test_reader_data(void **st) {
  const char *text = "1 -2 3.5 \"s\\n\" sym #t #f () (a . b) [x y] 'q `(a ,b ,@c)";
  rg_term l = rg_read_all(C, "t", text, strlen(text));
  assert_non_null(l);
  assert_show(l, "(1 -2 3.5 \"s\\n\" sym #t #f () (a . b) (x y) 'q `(a ,b ,@c))");
  /* comments of all three kinds */
  text = "; line\n a #| block #| nested |# |# b #;(skipped datum) c #; #;d e f";
  l = rg_read_all(C, "t", text, strlen(text));
  assert_non_null(l);
  assert_show(l, "(a b c f)");
  /* a datum comment inside a list and after a dotted tail */
  assert_show(rg_read_all(C, "t", "(1 #;2 3 . #;4 5 #;6)", 21), "((1 3 . 5))");
}

static void test_reader_positions(void **st) {
  const char *text = "(a\n  (b c)\n  'd)";
  rg_reader *R = rg_reader_new(C, "pos.kn", text, strlen(text));
  rg_term x;
  assert_int_equal(rg_reader_next(R, &x), 1);
  assert_string_equal(rg_reader_where(R, x), "pos.kn:1:1");
  assert_string_equal(rg_reader_where(R, rg_car(rg_cdr(x))), "pos.kn:2:3");
  assert_string_equal(rg_reader_where(R, rg_car(rg_cdr(rg_cdr(x)))), "pos.kn:3:3");
  assert_int_equal(rg_reader_next(R, &x), 0);
}

static void check_syntax_error(const char *text, const char *msg) {
  rg_clear_error(C);
  assert_null(rg_read_all(C, "e.kn", text, strlen(text)));
  assert_int_equal(rg_errcode(C), RG_ERR_SYNTAX);
  if (strcmp(rg_errmsg(C), msg)) fail_msg("'%s': got '%s', expected '%s'", text, rg_errmsg(C), msg);
}

static void test_reader_errors(void **st) {
  check_syntax_error("(a b", "e.kn:1:1: unterminated list (missing ')')");
  check_syntax_error("[a b)", "e.kn:1:5: ')' closes the '[' opened at 1:1");
  check_syntax_error(")", "e.kn:1:1: unexpected ')'");
  check_syntax_error("\"abc", "e.kn:1:1: unterminated string");
  check_syntax_error("\"a\\qb\"", "e.kn:1:3: unknown escape \\q in string");
  check_syntax_error("\"a\\x4g;\"", "e.kn:1:3: bad \\x escape in string");
  check_syntax_error("#| x", "e.kn:1:1: unterminated #| comment");
  check_syntax_error("(1 . 2 3)", "e.kn:1:8: expected ')' after dotted tail");
  check_syntax_error("(. 1)", "e.kn:1:2: '.' before any list element");
  check_syntax_error("(1 .)", "e.kn:1:5: unexpected ')'");
  check_syntax_error("'", "e.kn:1:1: quote without a datum");
  check_syntax_error("#;", "e.kn:1:1: #; comment without a datum");
  check_syntax_error("(a\n  . \n", "e.kn:2:3: missing datum after '.'");
  check_syntax_error("#(1)", "e.kn:1:1: vectors #( ) are not supported");
  check_syntax_error("99999999999999999999", "e.kn:1:1: integer 99999999999999999999 does not fit in 64 bits");
}

/* Nesting up to the limit reads without using the C stack; one more
 * level is an error.  Long lists cost no stack either. */
static void test_reader_depth(void **st) {
  int depth = RG_READ_MAX_DEPTH;
  char *text = malloc(2 * (size_t)depth + 2);
  for (int i = 0; i < depth; i++) text[i] = '(', text[depth + i] = ')';
  text[2 * depth] = 0;
  rg_term l = rg_read_all(C, "deep", text, strlen(text));
  assert_non_null(l);
  int n = 0;
  for (rg_term x = rg_car(l); x != RG_NIL; x = rg_car(x)) n++;
  assert_int_equal(n, depth - 1);
  free(text);
  text = malloc(2 * (size_t)depth + 4);
  for (int i = 0; i <= depth; i++) text[i] = '(', text[depth + 1 + i] = ')';
  text[2 * depth + 2] = 0;
  check_syntax_error(text, "e.kn:1:10001: nesting deeper than 10000 levels");
  /* quotes count as nesting too */
  memset(text, '\'', (size_t)depth + 1);
  strcpy(text + depth + 1, "x");
  check_syntax_error(text, "e.kn:1:10001: nesting deeper than 10000 levels");
  free(text);
  size_t len = 200000;
  text = malloc(2 * len + 3);
  text[0] = '(';
  for (size_t i = 0; i < len; i++) text[1 + 2 * i] = 'a', text[2 + 2 * i] = ' ';
  text[2 * len + 1] = ')';
  text[2 * len + 2] = 0;
  l = rg_read_all(C, "long", text, strlen(text));
  assert_int_equal(rg_list_length(rg_car(l)), (int64_t)len);
  free(text);
}

/* ------------------------------------------------------------------ the interpreter */

/* What a relation requires of an argument, read from its code. */
static const char *templates_of(rg_interp *I, const char *rel, int arg) {
  rg_term ts = rg_relation_input_templates(rg_interp_lookup(I, rel), arg);
  return ts ? rg_to_string(ts) : "unknown";
}
static const char *heads_of(rg_interp *I, const char *rel, int arg) {
  rg_term hs = rg_relation_input_heads(rg_interp_lookup(I, rel), arg);
  return hs ? rg_to_string(hs) : "unknown";
}

static void test_relation_templates(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  assert_int_equal(rg_interp_load_string(I, "t.kn",
                                         "(defrel (disto in out) (fresh (A ts ds)\n"
                                         "  (== in `(dot ,A (add . ,ts))) (== out `(add . ,ds))))\n"
                                         "(defrel (gathero in out) (disto out in))\n"
                                         "(defrel (opo op in) (fresh (x) (== in `(,op ,x 2))))\n"
                                         "(defrel (twoo in) (conde ((opo 'mul in)) ((opo 'div in))))\n"
                                         "(defrel (anyo in) (conde ((opo 'mul in)) ((== in 3))))\n"
                                         "(defrel (varheado in) (fresh (op x) (== in `(,op ,x)) (== in `(exp ,x))))\n"
                                         "(defrel (opheado in) (fresh (op x) (== in `(,op ,x))))\n"
                                         "(defrel (paramo in) (fresh (ax g) (== in `((sum . ,ax) ,g))))"),
                   RG_OK);
  /* conde: the clauses' templates are alternatives; a constant argument
   * stands in its parameter; a clause that does not tell makes the whole
   * unknown; a template whose head is known is preferred, and one whose
   * head is not still fixes the arity, but gives no heads */
  struct { const char *rel; int arg; const char *templates, *heads; } cases[] = {
      {"disto", 0, "((dot _ (add . _)))", "(dot)"},
      {"disto", 1, "((add . _))", "(add)"},
      {"gathero", 0, "((add . _))", "(add)"},
      {"gathero", 1, "((dot _ (add . _)))", "(dot)"},
      {"twoo", 0, "((div _ 2) (mul _ 2))", "(mul div)"},
      {"anyo", 0, "unknown", "unknown"},
      {"varheado", 0, "((exp _))", "(exp)"},
      {"opheado", 0, "((_ _))", "unknown"},
      {"paramo", 0, "(((sum . _) _))", "unknown"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_string_equal(templates_of(I, cases[i].rel, cases[i].arg), cases[i].templates);
    assert_string_equal(heads_of(I, cases[i].rel, cases[i].arg), cases[i].heads);
  }
  /* more alternatives than are worth checking, or more code than is worth
   * reading (calls under conde fan out), are unknown, and quickly */
  char many[4096] = "(defrel (manyo in) (conde";
  for (int i = 0; i < 40; i++) snprintf(many + strlen(many), sizeof many - strlen(many), " ((== in '(op%d)))", i);
  strcat(many, "))");
  assert_int_equal(rg_interp_load_string(I, "many.kn", many), RG_OK);
  assert_string_equal(templates_of(I, "manyo", 0), "unknown");
  char fan[4096] = "(defrel (f0 in) (== in '(exp)))";
  for (int i = 1; i <= 8; i++)
    snprintf(fan + strlen(fan), sizeof fan - strlen(fan),
             "(defrel (f%d in) (conde ((f%d in)) ((f%d in)) ((f%d in)) ((f%d in))))", i, i - 1, i - 1, i - 1, i - 1);
  assert_int_equal(rg_interp_load_string(I, "fan.kn", fan), RG_OK);
  assert_string_equal(templates_of(I, "f2", 0), "((exp))");
  assert_string_equal(templates_of(I, "f8", 0), "unknown");
  /* a long template is read along its tail, not by recursion */
  size_t cap = 16 + 5 * 100000 + 64;
  char *lng = malloc(cap);
  size_t at = (size_t)sprintf(lng, "(defrel (longo in) (fresh (x) (== in `(add");
  for (int i = 0; i < 100000; i++) at += (size_t)sprintf(lng + at, "%s", i % 2 ? " ,x" : " 1");
  strcpy(lng + at, "))))");
  assert_int_equal(rg_interp_load_string(I, "long.kn", lng), RG_OK);
  free(lng);
  rg_term lt = rg_relation_input_templates(rg_interp_lookup(I, "longo"), 0);
  assert_non_null(lt);
  assert_int_equal(rg_list_length(rg_car(lt)), 100001);
  assert_string_equal(heads_of(I, "longo", 0), "(add)");
  /* not a relation of the language, an argument out of range */
  assert_null(rg_relation_input_templates(rg_int(3), 0));
  assert_null(rg_relation_input_templates(rg_interp_lookup(I, "disto"), 2));
  assert_null(rg_relation_input_templates(rg_interp_lookup(I, "disto"), -1));
}

static void test_eval_and_define(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  assert_string_equal(tu_eval(I, "(+ 1 2)"), "3");
  assert_string_equal(tu_eval(I, "(run* (q) (== q 'x))"), "(x)");
  rg_interp_define(I, "seven", rg_int(7));
  assert_string_equal(tu_eval(I, "(run* (q) (== q seven))"), "(7)");
  assert_string_equal(tu_eval(I, "(list seven 'a)"), "(7 a)");
  /* strings print as they read back: named escapes, \x..; for other
   * control characters and DEL */
  assert_string_equal(tu_eval(I, "(list \"a\\ab\" \"\\x7f;\\x1;\\t\")"), "(\"a\\ab\" \"\\x7f;\\x1;\\t\")");
  /* eqv? compares numbers of one kind by value, floats too */
  assert_string_equal(tu_eval(I, "(list (eqv? 2.0 2.0) (eqv? 100000000000000000 100000000000000000) (eqv? 2 2.0) (eq? 'a 'a))"),
                      "(#t #t #f #t)");
  /* a splice in last place is the tail itself, as Scheme expands it */
  assert_string_equal(tu_eval(I, "(run* (q) (fresh (x) (== q `(1 ,@x))))"), "((1 . _.0))");
  assert_string_equal(tu_eval(I, "`(1 ,@'(2 . 3))"), "(1 2 . 3)");
  assert_string_equal(tu_eval(I, "`(1 ,@5)"), "(1 . 5)");
  assert_string_equal(tu_eval(I, "`(,@'(1 2) ,@'(3) 4)"), "(1 2 3 4)");
  /* a relation made from C with rg_interp_lambda, then called from the language */
  rg_term params = tu_read(C, "(a b)"), body = tu_read(C, "((== a b))");
  rg_term lam = rg_interp_lambda(I, rg_symbol("same"), params, body, NULL);
  assert_non_null(lam);
  assert_int_equal(rg_proc_arity(lam), 2);
  rg_interp_define(I, "same", lam);
  assert_string_equal(tu_eval(I, "(run* (q) (same q 4))"), "(4)");
  /* errors */
  assert_string_equal(tu_eval(I, ""), "ERROR: <eval>: no expression");
  assert_string_equal(tu_eval(I, "(car 5)"), "ERROR: <eval>:1:1: car: not a pair: 5");
  assert_string_equal(tu_eval(I, "(no-such 1)"), "ERROR: <eval>:1:1: unbound variable no-such");
  /* a primitive as the head of an etuple is called with the etuple's
   * arguments, and its arity checked (a fuzzing finding) */
  const char *e = tu_eval(I, "(eval-etuple (etuple eval-etuple))");
  assert_non_null(strstr(e, "eval-etuple expects 1 argument, got 0"));
  assert_string_equal(tu_eval(I, "(eval-etuple (etuple car '(1 2)))"), "1");
  /* relations defined inside a let body (Scheme's internal definitions, as
   * faster-miniKanren's tests write them) see themselves and one another */
  assert_string_equal(tu_eval(I, "(let ((l '(1 2 3)))"
                                 "  (define (mem x l) (fresh (a d) (== l `(,a . ,d)) (conde ((== a x)) ((mem x d)))))"
                                 "  (define even (lambda (n) (conde ((== n '())) ((fresh (d) (== n `(s . ,d)) (odd d))))))"
                                 "  (defrel (odd n) (fresh (d) (== n `(s . ,d)) (even d)))"
                                 "  (run* (q) (mem q l) (even '(s s))))"),
                      "(1 2 3)");
  assert_string_equal(tu_eval(I, "(let () (defrel (foo x) (fresh (a) (=/= x a))) (run* (q) (fresh (a) (foo a))))"),
                      "(_.0)");
  assert_non_null(strstr(tu_eval(I, "(let () (car '(1)) 2)"),
                         "in a let body only relation definitions (defrel, define) may come before the one expression"));
}

static void test_shadowing(void **st) {
  int rc;
  /* a user membero (keeping duplicates) shadows the library's for user
   * code; library relations keep using the library's */
  const char *out = tu_run_program(
      "(defrel (membero x l) (fresh (a d) (== l `(,a . ,d)) (conde ((== a x)) ((membero x d)))))\n"
      "(run* (q) (membero q '(a b a)))\n"
      "(defrel (appendo a b c) (== c 'user))\n"
      "(run* (q) (appendo '(1) '(2) q))\n"
      "(run* (q) (permuteo '(1 2) q))\n",
      &rc);
  assert_int_equal(rc, RG_OK);
  assert_string_equal(out, "(a b a)\n(user)\n((1 2) (2 1))\n");
  /* a definition is seen by code compiled before it */
  out = tu_run_program("(defrel (f x) (g x))\n(defrel (g x) (== x 'late))\n(run* (q) (f q))\n", &rc);
  assert_string_equal(out, "(late)\n");
  /* the program's own definitions shadow the built-in goals, as they are
   * procedures in faster-miniKanren */
  out = tu_run_program("(define absento (lambda (a t) (=/= a t)))\n(run* (q) (absento 'x q) (== q '(x)))\n"
                       "(defrel (symbolo x) (== x 'only-this))\n(run* (q) (symbolo q))\n", &rc);
  assert_string_equal(out, "((x))\n(only-this)\n");
  /* the constraint goals are values too, as procedures are in faster-miniKanren */
  out = tu_run_program("(run* (q) (mapo == '(1 2) q))\n(defrel (apply2 g a b) (g a b))\n"
                       "(run* (q) (apply2 =/= q 1))\n(run* (q) (apply2 absento 'x q) (symbolo q))\n", &rc);
  assert_string_equal(out, "((1 2))\n((_.0 (=/= ((_.0 1)))))\n((_.0 (=/= ((_.0 x))) (sym _.0)))\n");
  /* disequality pairs sorted whole within a clause, as sort-d does; NaN
   * unifies with NaN, as Racket's equal? has it */
  out = tu_run_program("(run* (x y z) (=/= (list x y) (list z z)))\n(run* (q) (== +nan.0 +nan.0))\n", &rc);
  assert_string_equal(out, "(((_.0 _.1 _.2) (=/= ((_.0 _.1) (_.0 _.2)))))\n(_.0)\n");
  /* local names shadow special forms */
  out = tu_run_program("(defrel (f conde) (== conde 1))\n(run* (q) (f q))\n", &rc);
  assert_string_equal(out, "(1)\n");
  /* interpreters are independent */
  rg_interp *A = rg_interp_new(C), *B = rg_interp_new(C);
  rg_interp_set_output(A, NULL);
  assert_int_equal(rg_interp_load_string(A, "a", "(define only-in-a 1)"), RG_OK);
  assert_non_null(rg_interp_lookup(A, "only-in-a"));
  assert_null(rg_interp_lookup(B, "only-in-a"));
  assert_non_null(rg_interp_lookup(B, "appendo"));
}

static int64_t seen_forms;
static int count_form(rg_interp *I, rg_term form, void *ud) {
  seen_forms += rg_list_length(form);
  const char *w = rg_interp_where(I, form);
  if (!w || strcmp(w, "ext:1:1")) return rg_error(rg_interp_ctx(I), RG_ERR, "bad where %s", w ? w : "-");
  return *(int *)ud;
}

static void test_added_form(void **st) {
  rg_interp *I = rg_interp_new(C);
  int ret = RG_OK;
  rg_interp_add_form(I, "defthing", count_form, &ret);
  assert_int_equal(rg_interp_load_string(I, "ext", "(defthing a b c)"), RG_OK);
  assert_int_equal(seen_forms, 4);
  ret = RG_ERR_SYNTAX;
  assert_int_equal(rg_interp_load_string(I, "ext", "(defthing)"), RG_ERR_SYNTAX);
}

static void test_test_counts(void **st) {
  rg_interp *I = rg_interp_new(C);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rg_interp_set_output(I, f);
  int rc = rg_interp_load_string(I, "t.kn",
                                 "(test \"ok\" (run* (q) (== q 1)) '(1))\n"
                                 "(test \"bad\" (run* (q) (== q 1)) '(2))\n"
                                 "(test 'sym (list 1 \"a\") '(1 \"a\"))\n");
  fclose(f);
  assert_int_equal(rc, RG_OK);
  int64_t passed, failed;
  rg_interp_test_counts(I, &passed, &failed);
  assert_int_equal(passed, 2);
  assert_int_equal(failed, 1);
  assert_string_equal(buf, "Failed: \"bad\" at t.kn:2:1\n  expression: (run* (q) (== q 1))\n"
                           "  expected:   (2)\n  computed:   (1)\n");
  free(buf);
}

static void test_time_and_bench(void **st) {
  rg_interp *I = rg_interp_new(C);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rg_interp_set_output(I, f);
  int rc = rg_interp_load_string(I, "t.kn",
                                 "(time (run* (q) (membero q '(1 2 3))))\n"
                                 "(bench 5 (run* (x y) (appendo x y '(1 2 3))))\n");
  fclose(f);
  assert_int_equal(rc, RG_OK);
  double t, med, min;
  int runs;
  char *second = strchr(buf, '\n') + 1;
  assert_int_equal(sscanf(buf, "time: %lf ms", &t), 1);
  assert_int_equal(sscanf(second, "bench: median %lf ms, min %lf ms over %d runs", &med, &min, &runs), 3);
  assert_int_equal(runs, 5);
  assert_true(t >= 0 && min >= 0 && min <= med);
  free(buf);
  int prc;
  const char *out = tu_run_program("(bench 0 (+ 1 1))", &prc);
  assert_int_equal(prc, RG_ERR_SYNTAX);
  assert_non_null(strstr(out, "bench needs (bench N expression) with N from 1 to"));
}

static void test_run_options(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_run_opts o = {.max_steps = 1000};
  rg_interp_set_run_opts(I, &o);
  assert_int_equal(rg_interp_load_string(I, "s.kn", "(run 1 (q) (nevero))"), RG_STOP_STEPS);
  assert_string_equal(rg_errmsg(C), "s.kn:1:1: search stopped after 1000 steps (step limit)");
  /* the interpreter is usable after a stop */
  assert_int_equal(rg_interp_load_string(I, "s.kn", "(run 1 (q) (== q 1))"), RG_OK);
  o = (rg_run_opts){.timeout_s = 0.05};
  rg_interp_set_run_opts(I, &o);
  assert_int_equal(rg_interp_load_string(I, "t.kn", "(run* (q) (alwayso))"), RG_STOP_TIMEOUT);
  o = (rg_run_opts){.no_occurs_check = true};
  rg_interp_set_run_opts(I, &o);
  assert_string_equal(tu_eval(I, "(run* (q) (fresh (x) (== x `(1 . ,x))))"), "(_.0)");
  o = (rg_run_opts){0};
  rg_interp_set_run_opts(I, &o);
  assert_string_equal(tu_eval(I, "(run* (q) (fresh (x) (== x `(1 . ,x))))"), "()");
}

/* A context's deadline stops every search of the context, whatever the
 * search's own limits, and can be removed. */
static void test_ctx_deadline(void **st) {
  (void)st;
  rg_ctx *D = rg_ctx_new();
  rg_interp *I = rg_interp_new(D);
  rg_interp_set_output(I, NULL);
  rg_ctx_set_deadline(D, 0.05);
  assert_int_equal(rg_interp_load_string(I, "d.kn", "(run* (q) (alwayso))"), RG_STOP_TIMEOUT);
  assert_non_null(strstr(rg_errmsg(D), "time limit"));
  /* a search started after the deadline passed stops at once */
  assert_int_equal(rg_interp_load_string(I, "d.kn", "(run 1 (q) (nevero))"), RG_STOP_TIMEOUT);
  rg_ctx_set_deadline(D, 0);
  assert_int_equal(rg_interp_load_string(I, "d.kn", "(run 1 (q) (== q 1))"), RG_OK);
  /* a search's own step limit still applies under a deadline */
  rg_ctx_set_deadline(D, 60);
  rg_run_opts o = {.max_steps = 500};
  rg_interp_set_run_opts(I, &o);
  assert_int_equal(rg_interp_load_string(I, "d.kn", "(run 1 (q) (nevero))"), RG_STOP_STEPS);
  /* pruning many disequalities while reifying (quadratic) stops too */
  o = (rg_run_opts){.timeout_s = 0.02};
  rg_interp_set_run_opts(I, &o);
  assert_int_equal(rg_interp_load_string(I, "d.kn",
                                         "(defrel (diseqo x l) (conde ((== l '()))"
                                         "  ((fresh (a d) (== l (cons a d)) (=/= x (list 'f a)) (diseqo x d)))))"
                                         "(run 1 (q) (diseqo q (iota 1500)))"),
                   RG_STOP_TIMEOUT);
  assert_non_null(strstr(rg_errmsg(D), "time limit"));
  o = (rg_run_opts){0};
  rg_interp_set_run_opts(I, &o);
  assert_string_equal(tu_eval(I, "(run 1 (q) (diseqo q (iota 3)))"),
                      "((_.0 (=/= ((_.0 (f 0))) ((_.0 (f 1))) ((_.0 (f 2))))))");
}

/* Every class of bad input: a message with a position, an error status. */
static void check_program_error(const char *text, int code, const char *msg) {
  int rc;
  const char *out = tu_run_program(text, &rc);
  if (rc != code) fail_msg("'%s': status %d, expected %d (%s)", text, rc, code, out);
  if (!strstr(out, msg)) fail_msg("'%s': got '%s', expected '%s'", text, out, msg);
}

static void test_program_errors(void **st) {
  check_program_error("(run* (q) (foo q))", RG_ERR_NAME, "<test>:1:11: unbound variable foo");
  check_program_error("(run* (q) (appendo q))", RG_ERR_ARITY, "<test>:1:11: appendo expects 3 arguments, got 1");
  check_program_error("(run* (q) (== q))", RG_ERR_ARITY, "<test>:1:11: == expects 2 arguments, got 1");
  check_program_error("(run* (q) 5)", RG_ERR_TYPE, "<test>:1:1: not a goal: 5");
  check_program_error("(display (- -9223372036854775808))", RG_ERR_TYPE, "-: integer overflow");
  check_program_error("(display (+ 9223372036854775807 1))", RG_ERR_TYPE, "+: integer overflow");
  check_program_error("(run* (q) (list q))", RG_ERR_TYPE, "<test>:1:11: list is not a goal");
  /* errors raised inside a library relation carry the place of the run */
  check_program_error("(run* (q) (mapo 5 '(1) q))", RG_ERR_TYPE, "<test>:1:1: not a relation: 5");
  check_program_error("(fact associative 'add)\n(run* (q) (eq-assoc '(add 1 2 3) q 0))", RG_ERR_TYPE,
                      "<test>:2:1: eq-assoc: the group size must be a positive integer, got 0");
  check_program_error("(run* (q) (eq-assoc '(add 1 2) q -3))", RG_ERR_TYPE, /* even with nothing to group */
                      "<test>:1:1: eq-assoc: the group size must be a positive integer, got -3");
  check_program_error("(display (eval-etuple (etuple 'add 1 'x)))", RG_ERR_EVAL,
                      "add evaluates numbers only, and argument 2 is x");
  check_program_error("(define x 1)\n(run* (q) x)", RG_ERR_TYPE, "<test>:2:1: not a goal: 1");
  check_program_error("(run* (q) (car q))", RG_ERR_TYPE, "<test>:1:11: car is a function, not a relation");
  check_program_error("(run* (q) (1 q))", RG_ERR_TYPE, "<test>:1:11: not a goal: (1 q)");
  check_program_error("(run* (q) (== q \"open", RG_ERR_SYNTAX, "<test>:1:17: unterminated string");
  check_program_error("(run* (q)", RG_ERR_SYNTAX, "<test>:1:1: unterminated list");
  check_program_error("(defrel (f . 1) succeed)", RG_ERR_SYNTAX, "bad parameter list");
  check_program_error("(defrel (f x))", RG_ERR_SYNTAX, "defrel needs (defrel (name arg ...) goal ...)");
  check_program_error("(fact)", RG_ERR_SYNTAX, "fact needs a relation name");
  /* improper lists where forms take several parts; a parameter named twice */
  check_program_error("(run* (q) (== q (list 1 . 2)))", RG_ERR_SYNTAX, "<test>:1:17: improper list in list");
  check_program_error("(run* (q) (disj (== q 1) . 5))", RG_ERR_SYNTAX, "<test>:1:11: improper list in disj");
  check_program_error("(run* (q) (conde ((== q 1)) . 5))", RG_ERR_SYNTAX, "<test>:1:11: improper list in conde");
  check_program_error("(run* (q) (conda ((== q 1)) . 5))", RG_ERR_SYNTAX, "<test>:1:11: improper list in conda");
  check_program_error("(defrel (f x x) (== x 1))", RG_ERR_SYNTAX, "<test>:1:1: parameter x is named twice");
  check_program_error("(define g (lambda (a b a) succeed))", RG_ERR_SYNTAX, "parameter a is named twice");
  check_program_error("(load 5)", RG_ERR_SYNTAX, "load needs a file name string");
  check_program_error("(run* (q) (walko (lambda (a b) succeed) 1 2 3 4))", RG_ERR_ARITY,
                      "walko expects 3 or 4 arguments, got 5");
  check_program_error("(run* (q) (mapo))", RG_ERR_ARITY, "mapo expects at least 2 arguments, got 0");
  check_program_error("(run* (q) (%distinct q 5))", RG_ERR_TYPE, "%distinct: not a goal: 5");
  /* deep nesting in a goal compiles (the reader bounds it) */
  char *deep = malloc(200000), *p = deep;
  p += sprintf(p, "(run* (q) ");
  for (int i = 0; i < 9000; i++) p += sprintf(p, "(fresh () ");
  p += sprintf(p, "(== q 'deep)");
  for (int i = 0; i < 9000; i++) *p++ = ')';
  strcpy(p, ")");
  int rc;
  assert_string_equal(tu_run_program(deep, &rc), "(deep)\n");
  free(deep);
}

/* rg_interp_eval_string evaluates one expression: text after it is an
 * error (it was ignored, even "(((" ). */
static void test_eval_string_one_expression(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_term t = rg_interp_eval_string(I, "(run* (q) (== q 1))");
  assert_non_null(t);
  assert_string_equal(rg_to_string(t), "(1)");
  assert_null(rg_interp_eval_string(I, "(run* (q) (== q 1))))"));
  assert_int_equal(rg_errcode(C), RG_ERR_SYNTAX);
  assert_null(rg_interp_eval_string(I, "1 2"));
  assert_non_null(strstr(rg_errmsg(C), "text after the expression"));
}

/* An interpreter that evaluates strings for a long time keeps none of the
 * forms it read: its map of source positions is weak (it held every list
 * ever read, some 900 bytes per evaluation of this one). */
static void test_eval_string_keeps_no_forms(void **st) {
#ifdef RG_GC_NEVER_FREE
  skip(); /* nothing is ever freed in this build */
#else
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  size_t prelude = rgk_srcmap_count(I->wmap);
  const char *text = "(car (cdr '(1 2 3 4 5 6 7 8 (9 10))))";
  for (int i = 0; i < 20000; i++) assert_string_equal(rg_to_string(rg_interp_eval_string(I, text)), "2");
  rg_gc_collect();
  assert_true(rgk_srcmap_count(I->wmap) < prelude + 1000); /* 240000 were read */
  /* positions are still known for forms that are kept: a relation's body */
  assert_null(rg_interp_eval_string(I, "(begin (defrel (r x) (== x 1) (nosuch x)) 1)"));
  assert_non_null(strstr(rg_errmsg(C), "<eval>:1:"));
#endif
}

static void test_load_file(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  assert_int_equal(rg_interp_load_file(I, "/no/such/dir/file.kn"), RG_ERR_IO);
  assert_non_null(strstr(rg_errmsg(C), "cannot read /no/such/dir/file.kn"));
  assert_int_equal(rg_interp_load_file(I, tu_source_path("examples/kanren/basics.kn")), RG_OK);
}

/* A quasiquoted template as long as 2 * 10^5 elements, built and matched
 * against a list of that length: no C recursion along its spine. */
/* A conde clause whose leading == goals cannot hold is skipped unrun, and
 * a conde left with one clause runs it in its state's scope, binding in
 * place.  Neither may change an answer or the order of answers (these
 * outputs are the search's without either). */
static void test_clause_indexing(void **st) {
  static const struct { const char *program, *want; } cases[] = {
      /* the recursive clause alone, all the way down a ground list */
      {"(defrel (lasto l x) (conde ((== l `(,x))) ((fresh (a d) (== l `(,a . ,d)) (lasto d x)))))\n"
       "(run* (q) (lasto '(1 2 3) q))", "(3)"},
      /* a variable bound in place by the one clause left, then read by both
       * branches of a later conde */
      {"(run* (q) (fresh (x) (conde ((== 1 2)) ((== x 5))) (conde ((== q x)) ((== q 6)))))", "(5 6)"},
      {"(run* (q) (fresh (x y) (conde ((== x 1) (== y 2)) ((== x 3)))"
       " (conde ((== x 1) (== q 'one)) ((== x 3) (== q y)))))", "(one _.0)"},
      /* a refuted clause is not run: the goal after its failing == neither */
      {"(run* (q) (conde ((== 1 2) (undefined-relation q)) ((== q 1))))", "(1)"},
      /* refuted by a later leading ==, by a part of a list, by an etuple's list */
      {"(run* (q) (conde ((== q 1) (== 'a 'b)) ((== q 2))))", "(2)"},
      {"(run* (q) (fresh (x) (== x '(a b))"
       " (conde ((== x '(a c)) (== q 1)) ((== x `(a . ,q))) ((== x '()) (== q 3)))))", "((b))"},
      {"(run* (q) (fresh (x) (== x (etuple 'f 1 2))"
       " (conde ((== x '(f 1 2)) (== q 'list)) ((== x 5) (== q 'atom)) ((== x '(g . _)) (== q 'g)))))",
       "(list)"},
      /* interleaving with clauses left open */
      {"(run 4 (q) (fresh (a b) (== q `(,a ,b)) (appendo a b '(1 2 3))))",
       "((() (1 2 3)) ((1) (2 3)) ((1 2) (3)) ((1 2 3) ()))"},
      {"(run 3 (q) (fresh (a b c) (== q `(,a ,b ,c)) (appendo a b c)))",
       "((() _.0 _.0) ((_.0) _.1 (_.0 . _.1)) ((_.0 _.1) _.2 (_.0 _.1 . _.2)))"},
      {"(run* (q) (fresh (x) (conde ((== x 1)) ((== x 2)))"
       " (conde ((== x 1) (== q 'a)) ((== x 2) (== q 'b)) ((== x 2) (== q 'c)))))", "(a b c)"},
      {"(run 3 (q) (fresh (x) (conde ((== q 1) (== x q)) ((== q 2))) (conde ((== x 1)) ((== x 1)))))",
       "(1 2 1)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc;
    const char *out = tu_run_program(cases[i].program, &rc);
    assert_int_equal(rc, RG_OK);
    char want[512];
    snprintf(want, sizeof want, "%s\n", cases[i].want);
    assert_string_equal(out, want);
  }
}

static void test_long_templates(void **st) {
  int n = 200000, rc;
  size_t cap = (size_t)n * 8 + 256, k = 0;
  char *text = malloc(cap), *list = malloc(cap);
  for (int i = 0; i < n; i++) k += (size_t)snprintf(list + k, cap - k, " %d", i % 10);
  snprintf(text, cap,
           "(run 1 (q) (fresh (x) (== q `(,x%s)) (== x 7)))\n"
           "(run 1 (q) (fresh (l) (== l '(7%s)) (== l `(,q%s))))\n",
           list, list, list);
  const char *out = tu_run_program(text, &rc);
  assert_int_equal(rc, RG_OK);
  assert_true(strncmp(out, "((7 0 1 2 3", 11) == 0);
  assert_non_null(strstr(out, "\n(7)\n"));
  free(text);
  free(list);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reader_data),     cmocka_unit_test(test_reader_positions),
      cmocka_unit_test(test_long_templates),
      cmocka_unit_test(test_clause_indexing),
      cmocka_unit_test(test_reader_errors),   cmocka_unit_test(test_reader_depth),
      cmocka_unit_test(test_relation_templates),
      cmocka_unit_test(test_eval_and_define), cmocka_unit_test(test_shadowing),
      cmocka_unit_test(test_added_form),      cmocka_unit_test(test_test_counts),
      cmocka_unit_test(test_time_and_bench),  cmocka_unit_test(test_run_options),
      cmocka_unit_test(test_ctx_deadline),
      cmocka_unit_test(test_program_errors),  cmocka_unit_test(test_load_file),
      cmocka_unit_test(test_eval_string_one_expression),
      cmocka_unit_test(test_eval_string_keeps_no_forms),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
