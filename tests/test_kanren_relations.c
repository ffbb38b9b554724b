/*
 * test_kanren_relations.c — the relations library: list relations,
 * mapo/map-anyo, walko/term-walko/reduceo and the associative/commutative
 * relations, through the language and through the C API (rg_interp_lookup
 * + rg_call), on lists, etuples and foreign terms.  Every query is also
 * checked to give no answer twice.
 */
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

static rg_ctx *C;
static rg_interp *I;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  const char *facts = "(fact commutative 'add) (fact associative 'add)"
                      "(fact commutative 'mul) (fact associative 'mul)"
                      "(fact commutative 'c) (fact associative 'a)"
                      "(fact commutative 'ac) (fact associative 'ac)";
  assert_int_equal(rg_interp_load_string(I, "<facts>", facts), RG_OK);
  return 0;
}

/* Evaluates a run expression, checks that its answers are distinct and
 * that it printed `want`. */
static void check(const char *expr, const char *want) {
  rg_term v = rg_interp_eval_string(I, expr);
  if (!v) fail_msg("%s: %s", expr, rg_errmsg(C));
  for (rg_term a = v; rg_is_pair(a); a = rg_cdr(a))
    for (rg_term b = rg_cdr(a); rg_is_pair(b); b = rg_cdr(b))
      if (rg_equal(rg_car(a), rg_car(b))) fail_msg("%s: duplicate answer %s", expr, tu_show(rg_car(a)));
  if (strcmp(tu_show(v), want)) fail_msg("%s\n  expected %s\n  got      %s", expr, want, tu_show(v));
}

/* Number of answers of a run expression (checking they are distinct). */
static int64_t count(const char *expr) {
  rg_term v = rg_interp_eval_string(I, expr);
  if (!v) fail_msg("%s: %s", expr, rg_errmsg(C));
  for (rg_term a = v; rg_is_pair(a); a = rg_cdr(a))
    for (rg_term b = rg_cdr(a); rg_is_pair(b); b = rg_cdr(b))
      if (rg_equal(rg_car(a), rg_car(b))) fail_msg("%s: duplicate answer %s", expr, tu_show(rg_car(a)));
  return rg_list_length(v);
}

static void check_error(const char *expr, const char *fragment) {
  rg_term v = rg_interp_eval_string(I, expr);
  if (v) fail_msg("%s: expected an error, got %s", expr, tu_show(v));
  if (!strstr(rg_errmsg(C), fragment)) fail_msg("%s: error '%s' lacks '%s'", expr, rg_errmsg(C), fragment);
}

/* ------------------------------------------------------------------ lists */

static void test_simple_lists(void **st) {
  check("(run* (q) (conso 1 '(2 3) q))", "((1 2 3))");
  check("(run* (x y) (conso x y '(1 2 3)))", "((1 (2 3)))");
  check("(run* (q) (conso q '(2 3) '()))", "()");
  check("(run* (q) (heado q '(1 2 3)))", "(1)");
  check("(run* (q) (heado q '()))", "()");
  check("(run* (q) (fresh (z y) (heado q z) (conso 1 y z)))", "(1)");
  check("(run* (q) (tailo q '(1 2 3)))", "((2 3))");
  check("(run* (q) (tailo q '(1)))", "(())");
  check("(run* (q) (nullo q))", "(())");
  check("(run* (q) (nullo '() q '()))", "(())");
  check("(run* (q) (nullo q 1))", "()");
  check("(run* (q) (pairo q))", "((_.0 . _.1))");
  check("(run* (q) (pairo '()))", "()");
  check("(run* (q) (caro '(a b) q))", "(a)");
  check("(run* (q) (cdro '(a b) q))", "((b))");
  check("(run 3 (q) (listo q))", "(() (_.0) (_.0 _.1))");
  check("(run* (q) (listo '(1 2 . 3)))", "()");
}

/* Like check, but answers may repeat (membero finds a value once per
 * occurrence). */
static void check_all(const char *expr, const char *want) {
  rg_term v = rg_interp_eval_string(I, expr);
  if (!v) fail_msg("%s: %s", expr, rg_errmsg(C));
  if (strcmp(tu_show(v), want)) fail_msg("%s\n  expected %s\n  got      %s", expr, want, tu_show(v));
}

/* Answers and orders as Python kanren's membero gives them (and as The
 * Reasoned Schemer's membero gives them in faster-miniKanren). */
static void test_membero(void **st) {
  check("(run* (q) (membero q '(1 2 3)) (membero q '(2 3 4)))", "(2 3)");
  check("(run* (q) (membero 2 `(1 ,q 3)))", "(2)");
  check("(run* (q) (membero 1 '(1 2 3)))", "(_.0)");
  check("(run* (q) (membero 1 '(2 3)))", "()");
  /* any position: a value that repeats is found at each occurrence */
  check_all("(run* (q) (membero q '(tea cup tea)))", "(tea cup tea)");
  check_all("(run* (q) (membero q '(a b a c b)))", "(a b a c b)");
  check_all("(run* (q) (membero 'a '(a b a)))", "(_.0 _.0)");
  /* no disequality constraints in the answers */
  check_all("(run* (q) (fresh (x) (membero q `(a ,x a))))", "(a _.0 a)");
  check_all("(run* (q) (membero `(a ,q) '((a 1) (b 2) (a 1) (a 3))))", "(1 1 3)");
  check("(run 2 (q) (membero 'tea q))", "((tea . _.0) (_.0 tea . _.1))");
  /* inside a conjunction the search keeps faster-miniKanren's order */
  check("(run* (q) (fresh (y) (membero y '((1 2 3) (4 5 6))) (membero q y)))", "(1 2 4 3 5 6)");
  /* a program's own membero replaces the library's for the program */
  assert_int_equal(rg_interp_load_string(I, "<user>",
      "(defrel (membero x l) (fresh (d) (== l `(,x . ,d))))"), RG_OK);
  check("(run* (q) (membero q '(1 2 3)))", "(1)");
  assert_int_equal(rg_interp_load_string(I, "<user>",
      "(define membero (lambda (x l) (fresh (a d) (== `(,a . ,d) l)"
      "  (conde ((== a x)) ((membero x d))))))"), RG_OK);
  check("(run* (q) (fresh (y) (membero y '((1 2 3) (4 5 6))) (membero q y)))", "(1 2 4 3 5 6)");
  check_all("(run* (q) (membero q '(x y x)))", "(x y x)");
}

static void test_appendo(void **st) {
  check("(run* (q) (appendo '() '(1 2) '(1 2)))", "(_.0)");
  check("(run* (q) (appendo '() '(1 2) 1))", "()");
  check("(run* (q) (appendo '(1 2 3) q '(1 2 3 4 5)))", "((4 5))");
  check("(run* (q) (appendo q '(4 5) '(1 2 3 4 5)))", "((1 2 3))");
  check("(run* (x y) (appendo x y '(1 2 3)))",
        "((() (1 2 3)) ((1) (2 3)) ((1 2) (3)) ((1 2 3) ()))");
  check("(run 3 (x y) (appendo x '(3 4) y))",
        "((() (3 4)) ((_.0) (_.0 3 4)) ((_.0 _.1) (_.0 _.1 3 4)))");
  check("(run* (x y) (appendo '(3 4) x y))", "((_.0 (3 4 . _.0)))");
}

static void test_rembero(void **st) {
  check("(run* (q) (rembero 1 '(1) q))", "(())");
  check("(run* (q) (rembero 1 q '()))", "(() (1))");
  check("(run* (q) (rembero 2 '(1 2 3 2) q))", "((1 3 2))");
  check("(run* (q) (rembero 5 '(1 2) q))", "((1 2))");
  check("(run* (q) (rembero 5 q '(1 2 3 4)))",
        "((5 1 2 3 4) (1 5 2 3 4) (1 2 5 3 4) (1 2 3 5 4) (1 2 3 4) (1 2 3 4 5))");
}

static void test_permuteo(void **st) {
  check("(run* (q) (permuteo '(1 2) '(2 1)))", "(_.0)");
  check("(run* (q) (permuteo '(1 2 2) '(2 1 2)))", "(_.0)");
  check("(run* (q) (permuteo '(1 2) '(2 1 2)))", "()");
  check("(run* (q) (permuteo '(1 2 1) '(2 1 2)))", "()");
  check("(run* (q) (permuteo q '(1 2 2)))", "((1 2 2) (2 1 2) (2 2 1))");
  check("(run* (q) (permuteo '(1 2 3) `(,q 2 1)))", "(3)");
  check("(run* (q) (permuteo '(1 2 3) q))",
        "((1 2 3) (1 3 2) (2 1 3) (3 1 2) (2 3 1) (3 2 1))");
  assert_int_equal(count("(run* (q) (permuteo q '(a b c d e)))"), 120);
  assert_int_equal(count("(run* (q) (permuteo '(a a b b c) q))"), 30);
  /* answers with fresh elements do not overlap */
  check("(run* (q) (permuteo `(1 obj ,q) `(obj ,q 1)))", "(1 (_.0 (=/= ((_.0 1)))))");
  check("(run 5 (a b) (permuteo a b))",
        "((() ()) ((_.0) (_.0)) ((_.0 _.1) (_.0 _.1)) (((_.0 _.1) (_.1 _.0)) (=/= ((_.0 _.1))))"
        " ((_.0 _.1 _.2) (_.0 _.1 _.2)))");
}

/* ------------------------------------------------------------------ mapo, map-anyo */

static void test_mapo(void **st) {
  assert_int_equal(rg_interp_load_string(I, "<rel>",
      "(defrel (blah x y) (conde ((== x 1) (== y 'a)) ((== x 3) (== y 'b))))"), RG_OK);
  check("(run* (q) (mapo blah '() q))", "(())");
  check("(run* (q) (mapo blah '(1 2 3) q))", "()");
  check("(run* (q) (mapo blah '(1 1 3) q))", "((a a b))");
  check("(run* (q) (mapo blah q '(a a b)))", "((1 1 3))");
  check("(run 5 (q a) (mapo blah q a))",
        "((() ()) ((1) (a)) ((3) (b)) ((1 1) (a a)) ((3 1) (b a)))");
  /* one list, three lists */
  check("(run* (q) (fresh (a b) (== q `(,a ,b)) (mapo (lambda (x) (== x 7)) q)))", "((7 7))");
  check("(run* (q) (mapo (lambda (x y z) (== x y) (== y z)) '(1 2) `(1 ,q) '(1 2)))", "(2)");
  check("(run 3 (a b) (mapo (lambda (x y) succeed) a b))",
        "((() ()) ((_.0) (_.1)) ((_.0 _.1) (_.2 _.3)))");
  check_error("(run* (q) (mapo (lambda (x) succeed)))", "mapo expects at least 2 arguments");
}

static void test_map_anyo(void **st) {
  check("(run* (q) (map-anyo (lambda (x y) (== x y)) '(1 2 3) '(1 2 3)))", "(_.0)");
  check("(run* (q) (map-anyo (lambda (x y) (== x y)) '(1 2 3) '(1 3 3)))", "()");
  check("(run* (q) (map-anyo (lambda (x y) (== x y)) '() '()))", "()");
  check("(run 1 (q) (map-anyo (lambda (x y) (== x 1) (== y 3)) '(1 2 4 1 4 1 1) q))",
        "((3 2 4 3 4 3 3))");
  assert_int_equal(count("(run* (q) (map-anyo (lambda (x y) (== x 1) (== y 3)) '(1 2 4 1 4 1 1) q))"),
                   15);
  check("(run 1 (q) (map-anyo (lambda (x y) (== x y)) '(1) q))", "((1))");
}

/* ------------------------------------------------------------------ term graphs */

static const char *math =
    "(defrel (math x y)"
    "  (fresh (v)"
    "    (conde"
    "      ((== x `(add ,v ,v)) (== y `(mul 2 ,v)))"
    "      ((== x `(log (exp ,v))) (== y v)))))"
    "(defrel (one-to-three x y) (== x 1) (== y 3))"
    "(defrel (same x y) (== x y))";

static void test_reduceo(void **st) {
  assert_int_equal(rg_interp_load_string(I, "<rel>", math), RG_OK);
  check("(run* (q) (reduceo math '(log (exp (log 1))) q))", "((log 1))");
  /* the fixed point first */
  check("(run* (q) (reduceo math '(log (exp (log (exp 1)))) q))", "(1 (log (exp 1)))");
  check("(run 1 (q) (reduceo math '(log (exp (log (exp (log (exp (add 3 3))))))) q))",
        "((mul 2 3))");
  check("(run* (q) (reduceo math 1 q))", "()");
  /* backwards */
  check("(run 3 (q) (reduceo math q 1))",
        "((log (exp 1)) (log (exp (log (exp 1)))) (log (exp (log (exp (log (exp 1)))))))");
  /* reduce with walko, the fixed point first, every reachable term once */
  check("(run* (q) (reduceo (lambda (a b) (walko math a b same)) "
        "'(add (mul (log (exp 2)) 1) (add 1 1)) q))",
        "((mul 2 (mul 2 1)) (add (mul 2 1) (mul 2 1)) (add (mul (log (exp 2)) 1) (mul 2 1))"
        " (add (mul 2 1) (add 1 1)))");
  /* a reduction with many paths to the same terms explores each term once */
  check("(run* (q) (reduceo (lambda (a b) (walko (lambda (x y) (fresh (v) (== x `(add ,v 0)) (== y v))) a b))"
        " '(add (add (add (add (add (add z 0) 0) 0) 0) 0) 0) q))",
        "(z (add (add (add (add (add z 0) 0) 0) 0) 0) (add (add (add (add z 0) 0) 0) 0)"
        " (add (add (add z 0) 0) 0) (add (add z 0) 0) (add z 0))");
  /* a partly unknown term reduces too, the fixed point first */
  check("(run* (q) (fresh (x) (== x 1) (reduceo math `(log (exp (log (exp ,x)))) q)))",
        "(1 (log (exp 1)))");
  check("(run 2 (x q) (reduceo math `(log (exp (log (exp ,x)))) q))",
        "((_.0 _.0) (_.0 (log (exp _.0))))");
}

static void test_walko(void **st) {
  assert_int_equal(rg_interp_load_string(I, "<rel>", math), RG_OK);
  check("(run* (q) (walko same '(add (mul 2 1) (add 1 1)) '(add (mul 2 1) (add 1 1))))", "(_.0)");
  check("(run* (q) (walko same '(add (mul 2 1) (add 1 1)) '(add (mul 2 1) (add 2 1))))", "()");
  assert_int_equal(count("(run* (q) (walko one-to-three '(1 (1 2 4) 2 ((4 1 1)) 1) q))"), 31);
  check("(run* (q) (walko one-to-three '(1 (1 2 4) 2 ((4 1 1)) 1) '(3 (3 2 4) 2 ((4 3 3)) 3)))",
        "(_.0)");
  check("(run* (q) (walko one-to-three '(add 1 (mul (add 1 2) 1) (add (add 1 2) 2)) q"
        "        (lambda (x y) (== x 'add) (== y 'add))))",
        "((add 3 (mul (add 1 2) 1) (add (add 3 2) 2)) (add 1 (mul (add 1 2) 1) (add (add 3 2) 2))"
        " (add 3 (mul (add 1 2) 1) (add (add 1 2) 2)))");
  check("(run 2 (q) (walko math q '(mul 2 5) same))", "((add 5 5) (log (exp (mul 2 5))))");
  check("(run* (q) (walko math '(a (add 1 1) (log (exp 5))) q))",
        "((a (mul 2 1) 5) (a (add 1 1) 5) (a (mul 2 1) (log (exp 5))))");
  check_error("(run* (q) (walko same 1 2 same same))", "walko expects 3 or 4 arguments, got 5");
}

static void test_term_walko(void **st) {
  /* swap the two arguments of f, anywhere */
  assert_int_equal(rg_interp_load_string(I, "<rel>",
      "(defrel (is-f op) (== op 'f))"
      "(defrel (swap a b op) (fresh (x y) (== a `(,x ,y)) (== b `(,y ,x))))"), RG_OK);
  check("(run* (q) (term-walko is-f swap '(f 1 2) q))", "((f 2 1) (f 1 2))");
  check("(run* (q) (term-walko is-f swap '(f (f 1 2) 3) q))",
        "((f 3 (f 1 2)) (f (f 1 2) 3) (f (f 2 1) 3) (f 3 (f 2 1)))");
  check("(run* (q) (term-walko is-f swap '(g 1 2) q))", "((g 1 2))");
}

/* ------------------------------------------------------------------ associativity, commutativity */

static void test_eq_comm(void **st) {
  check("(run* (q) (eq-comm 1 1))", "(_.0)");
  check("(run* (q) (eq-comm '(c 1 2 3) '(c 1 2 3)))", "(_.0)");
  check("(run* (q) (eq-comm '(c 3 2 1) '(c 1 2 3)))", "(_.0)");
  check("(run* (q) (eq-comm `(c 3 ,q 1) '(c 1 2 3)))", "(2)");
  check("(run* (x y) (eq-comm `(c ,x ,y 1) '(c 1 2 3)))", "((2 3) (3 2))");
  check("(run* (x y) (eq-comm '(c 2 3 1) `(c 1 ,x ,y)))", "((2 3) (3 2))");
  check("(run* (q) (eq-comm '(op 3 2 1) '(op 1 2 3)))", "()");
  check("(run* (q) (eq-comm '(3 c 2 1) '(c 1 2 3)))", "()");
  check("(run* (q) (eq-comm '(c 1 2 1) '(c 1 2 3)))", "()");
  check("(run* (q) (eq-comm '(div 1 (c 1 2 3)) `(div 1 (c 2 ,q 1))))", "(3)");
  check("(run* (q) (eq-comm '(div 1 (div 1 2 3)) `(div 1 (div 2 ,q 1))))", "()");
  assert_int_equal(count("(run* (x y z) (eq-comm '(c 1 2 3) `(c ,x ,y ,z)))"), 6);
  assert_int_equal(count("(run* (x y z) (eq-comm `(c ,x ,y ,z) '(c 1 2 3)))"), 6);
  check("(run* (x y) (eq-comm `(c (c 1 ,x) ,y) '(c 2 (c 3 1))))", "((3 2))");
  check("(run* (x y) (eq-comm `(2 (c 3 1)) `(,y (c 1 ,x))))", "((3 2))");
  check("(run* (q) (eq-comm '(c (c 1 2) 3) q))",
        "((c 3 (c 1 2)) (c (c 1 2) 3) (c (c 2 1) 3) (c 3 (c 2 1)))");
  check("(run* (q) (eq-comm '(c 1 1) q))", "((c 1 1))");
  /* three or more arguments: Python kanren's order, permutations as
   * itertools.permutations makes them (the term itself second) */
  check("(run* (q) (eq-comm '(c 1 2 3) q))", "((c 1 3 2) (c 1 2 3) (c 2 1 3) (c 2 3 1) (c 3 1 2) (c 3 2 1))");
  check("(run* (x y z) (eq-comm `(c ,x ,y ,z) '(c 1 2 3)))",
        "((1 3 2) (1 2 3) (2 1 3) (2 3 1) (3 1 2) (3 2 1))");
  check("(run 2 (x y) (eq-comm x y))", "((_.0 _.0) (((add _.0 _.1) (add _.1 _.0)) (=/= ((_.0 _.1)))))");
}

static void test_eq_assoc_args(void **st) {
  check("(run* (q) (eq-assoc-args 'a '(1) '(1)))", "(_.0)");
  check("(run* (q) (eq-assoc-args 'a '(1 2 3) '(1 (a 2 3))))", "(_.0)");
  check("(run* (q) (eq-assoc-args 'a '(1 (a 2 3)) '(1 2 3)))", "(_.0)");
  check("(run* (q) (eq-assoc-args 'a '(1 (a 2 3) 4) '(1 2 3 4)))", "(_.0)");
  check("(run* (q) (eq-assoc-args 'a '(1 2 3) '(1 (a 2 3) 4)))", "()");
  check("(run* (x y) (eq-assoc-args 'a x `(,y)))", "(((_.0) _.0))");
  check("(run* (x) (eq-assoc-args 'a `(1 ,x 4) '(1 2 3 4)))", "((a 2 3))");
  check("(run* (x) (eq-assoc-args 'a '(1 2 3 4) `(1 ,x 4)))", "((a 2 3))");
  check("(run* (x) (eq-assoc-args 'a '(1 1) '(other 1 1)))", "()");
  check("(run* (x) (eq-assoc-args 'a '(1 2 3) x 2))", "(((a 1 2) 3) (1 (a 2 3)))");
  check("(run* (x) (eq-assoc-args 'a x '(1 2 3) 2))", "(((a 1 2) 3) (1 (a 2 3)))");
  check("(run* (x) (eq-assoc-args 'a '(1 2 3) x))", "(((a 1 2) 3) (1 (a 2 3)) (1 2 3))");
  check("(run* (x) (eq-assoc-args 'a '(1 2 3 4) x 3))", "(((a 1 2 3) 4) (1 (a 2 3 4)))");
  check("(run 2 (x y) (eq-assoc-args 'a x y))", "(((_.0) (_.0)) ((_.0 _.1) (_.0 _.1)))");
  check_error("(run* (x) (eq-assoc-args 'a '(1 2 3) x 0))", "positive integer");
  check_error("(run* (x) (eq-assoc-args 'a '(1 2 3) x 1 2))", "eq-assoc-args expects 3 or 4 arguments");
}

static void test_eq_assoc(void **st) {
  check("(run* (q) (eq-assoc 1 1))", "(_.0)");
  check("(run* (q) (eq-assoc '(a 1 2 3) '(a 1 2 3)))", "(_.0)");
  check("(run* (q) (eq-assoc '(a 3 2 1) '(a 1 2 3)))", "()");
  check("(run* (q) (eq-assoc '(a (a 1 2) 3) '(a 1 2 3)))", "(_.0)");
  check("(run* (q) (eq-assoc '(a 1 2 3) '(a (a 1 2) 3)))", "(_.0)");
  check("(run* (q) (eq-assoc '(o 1 2 3) '(o (o 1 2) 3)))", "()");
  check("(run* (x) (eq-assoc '(a 1 2 3) x 2))", "((a (a 1 2) 3) (a 1 2 3) (a 1 (a 2 3)))");
  check("(run* (x) (eq-assoc x '(a 1 2 3) 2))", "((a (a 1 2) 3) (a 1 2 3) (a 1 (a 2 3)))");
  check("(run* (x y) (eq-assoc (cons x y) '(a 1 2 3)))",
        "((a ((a 1 2) 3)) (a (1 2 3)) (a (1 (a 2 3))))");
  check("(run* (x) (eq-assoc `(a 1 2 (a ,x 5 6)) '(a (a 1 2) 3 4 5 6) 2))", "((a 3 4))");
}

static void test_assoc_flatten(void **st) {
  check("(run* (q) (assoc-flatten '(mul 1 (add 2 3) (mul 4 5)) '(mul 1 (add 2 3) 4 5)))", "(_.0)");
  check("(run* (q) (assoc-flatten '(mul 1 (add 2 3) (mul 4 5)) q))", "((mul 1 (add 2 3) 4 5))");
  check("(run* (q) (assoc-flatten '(op 1 (add 2 3) (mul 4 5)) q))", "((op 1 (add 2 3) (mul 4 5)))");
  check("(run* (q) (assoc-flatten '(add (add (add 1 2) 3) (add 4 (add 5))) q))", "((add 1 2 3 4 5))");
  check("(run* (q) (assoc-flatten '(add (add) 1) q))", "((add (add) 1))");
  check("(run* (q) (assoc-flatten q 5))", "(5)");
  check("(run* (q) (fresh (x) (assoc-flatten `(add ,x (add 1 2)) q)))", "((add _.0 1 2))");
}

static void test_eq_assoccomm(void **st) {
  check("(run* (q) (eq-assoccomm 1 1))", "(_.0)");
  check("(run* (q) (eq-assoccomm '(1) '(1)))", "(_.0)");
  check("(run* (x) (eq-assoccomm x '(1)))", "((1))");
  check("(run* (q) (eq-assoccomm '(ac 1 (ac 2 3)) '(ac (ac 1 2) 3)))", "(_.0)");
  check("(run* (q) (eq-assoccomm '(ac 1 (ac 2 3)) '(ac (ac 3 2) 1)))", "(_.0)");
  check("(run* (q) (eq-assoccomm '(ac 1 (ac 3 2)) '(ac (ac 1 2) 3)))", "(_.0)");
  assert_int_equal(count("(run* (x) (eq-assoccomm '(ac 1 (ac 2 3)) x))"), 18);
  assert_int_equal(count("(run* (x) (eq-assoccomm '(ac 1 3 2) x))"), 18);
  assert_int_equal(count("(run* (x) (eq-assoccomm x '(ac 1 (ac 2 3))))"), 18);
  check("(run* (x y) (eq-assoccomm `(ac (ac 1 ,x) ,y) '(ac 2 (ac 3 1))))", "((2 3) (3 2))");
  check("(run* (q) (eq-assoccomm '(ac 3 (ac 1 2)) '(ac 1 2 3)))", "(_.0)");
  check("(run* (q) (eq-assoccomm '(ac 1 1) '(other 1 1)))", "()");
  check("(run* (x) (eq-assoccomm '(ac 3 (ac 1 2)) `(ac 1 ,x 3)))", "(2)");
  /* Python kanren's docstring example, in its order; and the first
   * permutation before the term itself */
  check("(run* (x) (eq-assoccomm '(ac 1 2 3) `(ac 1 ,x)))", "((ac 3 2) (ac 2 3))");
  check("(run* (q) (eq-assoccomm '(mul 2 (ac 1 3)) q))",
        "((mul (ac 1 3) 2) (mul 2 (ac 1 3)) (mul 2 (ac 3 1)) (mul (ac 3 1) 2))");
  check("(run* (x y) (eq-assoccomm `(mul (add 1 ,x) ,y) '(mul 2 (add 3 1))))", "((3 2))");
  assert_int_equal(count("(run* (x y z) (eq-assoccomm `(add ,x (mul ,y ,z)) '(add (mul 2 3) 4 5 6)))"),
                   12);
}

/* ------------------------------------------------------------------ Python kanren's order */

/* Each expected list below is what Python kanren (pythological/kanren)
 * answers for the same query, in its order. */
static void test_python_order(void **st) {
  assert_int_equal(rg_interp_load_string(I, "<rel>", math), RG_OK);
  check("(run* (q) (map-anyo (lambda (x y) (== x 'old) (== y 'new)) '(old old old) q))",
        "((new new new) (old new new) (new old new) (old old new) (new new old) (old new old) (new old old))");
  check("(run* (q) (map-anyo one-to-three '(1 2 4 1 4 1 1) q))",
        "((3 2 4 3 4 3 3) (1 2 4 3 4 3 3) (3 2 4 1 4 3 3) (1 2 4 1 4 3 3) (3 2 4 3 4 1 3) (1 2 4 3 4 1 3)"
        " (3 2 4 1 4 1 3) (1 2 4 1 4 1 3) (3 2 4 3 4 3 1) (1 2 4 3 4 3 1) (3 2 4 1 4 3 1) (1 2 4 1 4 3 1)"
        " (3 2 4 3 4 1 1) (1 2 4 3 4 1 1) (3 2 4 1 4 1 1))");
  check("(run 4 (q) (walko one-to-three '(1 (1 2 4) 2 ((4 1 1)) 1) q))",
        "((3 (3 2 4) 2 ((4 3 3)) 3) (1 (3 2 4) 2 ((4 3 3)) 3) (3 (1 2 4) 2 ((4 3 3)) 3) (1 (1 2 4) 2 ((4 3 3)) 3))");
  check("(run* (x) (eq-assoc '(add 1 2 3 4) x))",
        "((add (add 1 2) 3 4) (add 1 2 3 4) (add 1 (add 2 3) 4) (add 1 2 (add 3 4)) (add (add 1 2 3) 4)"
        " (add 1 (add 2 3 4)))");
  check("(run* (x) (eq-assoc '(add 1 (add 2 3) 4) x))",
        "((add (add 1 2) 3 4) (add 1 (add 2 3) 4) (add 1 2 (add 3 4)) (add (add 1 2 3) 4) (add 1 (add 2 3 4)))");
  check("(run* (x) (eq-assoc '(add 1 2 (add 3 4)) x))",
        "((add (add 1 2) 3 4) (add 1 2 (add 3 4)) (add 1 (add 2 3) 4) (add (add 1 2 3) 4) (add 1 (add 2 3 4)))");
  check("(run* (x) (eq-assoc '(f (mul 1 2 3) (add 4 5 6)) x))",
        "((f (mul (mul 1 2) 3) (add (add 4 5) 6)) (f (mul 1 2 3) (add 4 5 6)) (f (mul 1 2 3) (add (add 4 5) 6))"
        " (f (mul 1 (mul 2 3)) (add (add 4 5) 6)) (f (mul 1 2 3) (add 4 (add 5 6))) (f (mul (mul 1 2) 3) (add 4 5 6))"
        " (f (mul 1 (mul 2 3)) (add 4 5 6)) (f (mul (mul 1 2) 3) (add 4 (add 5 6)))"
        " (f (mul 1 (mul 2 3)) (add 4 (add 5 6))))");
  check("(run* (x) (eq-assoc x '(add (mul 1 2 3) 4 5)))",
        "((add (add (mul 1 2 3) 4) 5) (add (mul 1 2 3) 4 5) (add (mul (mul 1 2) 3) 4 5) (add (mul 1 2 3) (add 4 5))"
        " (add (mul 1 (mul 2 3)) 4 5) (add (add (mul (mul 1 2) 3) 4) 5) (add (add (mul 1 (mul 2 3)) 4) 5)"
        " (add (mul (mul 1 2) 3) (add 4 5)) (add (mul 1 (mul 2 3)) (add 4 5)))");
}

/* ------------------------------------------------------------------ the C API and foreign terms */

static void test_c_api(void **st) {
  rg_term appendo = rg_interp_lookup(I, "appendo");
  assert_non_null(appendo);
  assert_int_equal(rg_proc_arity(appendo), 3);
  rg_term x = rg_var(C), y = rg_var(C);
  rg_term args[3] = {x, y, tu_read(C, "(1 2)")};
  rg_term out;
  assert_int_equal(rg_run(C, -1, rg_list(2, (rg_term[]){x, y}), rg_call(appendo, 3, args), NULL, &out),
                   RG_OK);
  assert_show(out, "((() (1 2)) ((1) (2)) ((1 2) ()))");
  /* a relation that takes a relation */
  rg_term mapo = rg_interp_lookup(I, "mapo"), same = rg_interp_eval_string(I, "(lambda (a b) (== a b))");
  rg_term q = rg_var(C);
  assert_int_equal(rg_run(C, -1, q, rg_call(mapo, 3, (rg_term[]){same, tu_read(C, "(1 2)"), q}), NULL,
                          &out), RG_OK);
  assert_show(out, "((1 2))");
  /* a user definition shadows the library for user code, not for C callers of the library */
  assert_int_equal(rg_interp_load_string(I, "<user>", "(defrel (appendo a b c) (== c 'mine))"), RG_OK);
  assert_true(rg_interp_lookup(I, "appendo") != appendo);
  check("(run* (q) (appendo '(1) '(2) q))", "(mine)");
  rg_term membero = rg_interp_lookup(I, "membero");
  assert_int_equal(rg_run(C, -1, q, rg_call(membero, 2, (rg_term[]){q, tu_read(C, "(a b)")}), NULL, &out),
                   RG_OK);
  assert_show(out, "(a b)");
}

/* A tiny graph node: an operator and arguments, expanding into an etuple. */
typedef struct node { rg_term op; int n; rg_term args[4]; } node;

static rg_term node_expand(void *self, void *ud) {
  node *nd = self;
  return rg_etuple(nd->op, nd->n, nd->args);
}
static void node_print(void *self, FILE *f) { fprintf(f, "#<node %s>", rg_symbol_name(((node *)self)->op)); }
static bool node_equal(void *self, rg_term other) {
  return rg_is_foreign(other, NULL) && rg_foreign_ptr(other) == self;
}
static const rg_foreign_hooks node_hooks = {"node", node_equal, NULL, node_print, node_expand};

static rg_term mknode(const char *op, int n, const rg_term *args) {
  node *nd = calloc(1, sizeof *nd); /* never freed: lives for the test */
  nd->op = rg_symbol(op);
  nd->n = n;
  memcpy(nd->args, args, (size_t)n * sizeof(rg_term));
  return rg_foreign(&node_hooks, nd, NULL);
}

static rg_term run_rel(const char *rel, int n, rg_term *args, rg_term q) {
  rg_term out;
  int rc = rg_run(C, -1, q, rg_call(rg_interp_lookup(I, rel), n, args), NULL, &out);
  if (rc != RG_OK) fail_msg("%s: %s", rel, rg_errmsg(C));
  return out;
}

static void test_foreign_terms(void **st) {
  /* (add (add 1 2) 3) as graph nodes */
  rg_term inner = mknode("add", 2, (rg_term[]){rg_int(1), rg_int(2)});
  rg_term outer = mknode("add", 2, (rg_term[]){inner, rg_int(3)});
  rg_term q = rg_var(C);
  assert_show(run_rel("assoc-flatten", 2, (rg_term[]){outer, q}, q), "((add 1 2 3))");
  /* match a pattern modulo associativity and commutativity */
  rg_term x = rg_var(C);
  rg_term pat = rg_list(3, (rg_term[]){rg_symbol("add"), rg_int(3), x});
  assert_show(run_rel("eq-assoccomm", 2, (rg_term[]){outer, pat}, x), "((add 1 2) (add 2 1))");
  /* the first answer is the node itself (foreign terms print as their expansion) */
  rg_term r = run_rel("eq-comm", 2, (rg_term[]){outer, pat}, x);
  assert_show(r, "((add 1 2) (add 2 1))");
  assert_true(rg_is_foreign(rg_car(r), &node_hooks) && rg_foreign_ptr(rg_car(r)) == rg_foreign_ptr(inner));
  /* walko: rewrite (add a b) with equal a b ... here: 1 -> one, anywhere in the graph */
  rg_term rel = rg_interp_eval_string(I, "(lambda (a b) (== a 1) (== b 'one))");
  assert_show(run_rel("walko", 3, (rg_term[]){rel, outer, q}, q), "((add (add one 2) 3))");
  /* unification of a foreign term with structure */
  assert_show(run_rel("conso", 3, (rg_term[]){rg_symbol("add"), q, inner}, q), "((1 2))");
  assert_show(run_rel("membero", 2, (rg_term[]){q, inner}, q), "(add 1 2)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_simple_lists), cmocka_unit_test(test_membero),
      cmocka_unit_test(test_appendo),      cmocka_unit_test(test_rembero),
      cmocka_unit_test(test_permuteo),     cmocka_unit_test(test_mapo),
      cmocka_unit_test(test_map_anyo),     cmocka_unit_test(test_reduceo),
      cmocka_unit_test(test_walko),        cmocka_unit_test(test_term_walko),
      cmocka_unit_test(test_eq_comm),      cmocka_unit_test(test_eq_assoc_args),
      cmocka_unit_test(test_eq_assoc),     cmocka_unit_test(test_assoc_flatten),
      cmocka_unit_test(test_eq_assoccomm), cmocka_unit_test(test_python_order),
      cmocka_unit_test(test_c_api),
      cmocka_unit_test(test_foreign_terms),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
