/*
 * test_kanren_core.c — terms, printing, the persistent map, unification
 * and reification through the C API, including terms of 10^6 nodes.
 */
#include "tests/testutil.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

static void test_atoms_print(void **st) {
  assert_show(rg_int(42), "42");
  assert_show(rg_int(-7), "-7");
  assert_show(rg_int(INT64_MAX), "9223372036854775807");
  assert_show(rg_int(INT64_MIN), "-9223372036854775808");
  assert_show(rg_float(1.0), "1.0");
  assert_show(rg_float(0.1), "0.1");
  assert_show(rg_float(-2.5e300), "-2.5e+300");
  assert_show(rg_float(INFINITY), "+inf.0");
  /* as Racket writes them: shortest digits, positional from 1e-4 to 1e14 */
  assert_show(rg_float(1e-5), "1e-5");
  assert_show(rg_float(5e-324), "5e-324");
  assert_show(rg_float(1e13), "10000000000000.0");
  assert_show(rg_float(1e14), "1e+14");
  assert_show(rg_float(123456789012300.0), "123456789012300.0"); /* no longer than 1.234567890123e+14 */
  assert_show(rg_float(123456789010000.0), "1.2345678901e+14");
  assert_show(rg_float(0.00012), "0.00012");
  assert_show(rg_float(-12345600.0), "-12345600.0");
  assert_show(rg_float(-0.0), "-0.0");
  assert_show(rg_float(1.7976931348623157e308), "1.7976931348623157e+308");
  /* equal? as Racket's: NaN is NaN, 0.0 is not -0.0 */
  assert_true(rg_equal(rg_float(NAN), rg_float(NAN)));
  assert_false(rg_equal(rg_float(0.0), rg_float(-0.0)));
  assert_show(rg_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  assert_show(rg_symbol("foo"), "foo");
  assert_show(RG_NIL, "()");
  assert_show(RG_TRUE, "#t");
  assert_show(RG_FALSE, "#f");
  assert_ptr_equal(rg_symbol("foo"), rg_symbol("foo"));
  assert_true(rg_int_value(rg_int(INT64_MIN)) == INT64_MIN);
}

static void test_lists_print(void **st) {
  rg_term l = rg_list(3, (rg_term[]){rg_int(1), rg_symbol("a"), rg_string("s")});
  assert_show(l, "(1 a \"s\")");
  assert_show(rg_cons(rg_int(1), rg_int(2)), "(1 . 2)");
  assert_show(rg_cons(rg_int(1), rg_cons(rg_int(2), rg_int(3))), "(1 2 . 3)");
  assert_show(tu_read(C, "'x"), "'x");
  assert_show(tu_read(C, "(quote x y)"), "(quote x y)");
  assert_show(tu_read(C, "`(a ,b ,@c)"), "`(a ,b ,@c)");
  assert_int_equal(rg_list_length(l), 3);
  assert_int_equal(rg_list_length(rg_cons(rg_int(1), rg_int(2))), -1);
}

static void test_equal_hash(void **st) {
  rg_term a = tu_read(C, "(1 (2.5 \"x\") sym)"), b = tu_read(C, "(1 (2.5 \"x\") sym)");
  assert_true(rg_equal(a, b));
  assert_true(rg_hash(a) == rg_hash(b));
  assert_false(rg_equal(a, tu_read(C, "(1 (2.5 \"y\") sym)")));
  assert_false(rg_equal(rg_int(1), rg_float(1.0)));
  rg_term et = rg_etuple(rg_symbol("add"), 2, (rg_term[]){rg_int(1), rg_int(2)});
  assert_true(rg_equal(et, tu_read(C, "(add 1 2)")));
  assert_true(rg_hash(et) == rg_hash(tu_read(C, "(add 1 2)")));
  assert_show(et, "(add 1 2)");
}

static void test_unify_basic(void **st) {
  rg_term x = rg_var(C), y = rg_var(C), w;
  rg_term a = rg_list(2, (rg_term[]){x, rg_int(2)});
  rg_term b = rg_list(2, (rg_term[]){rg_int(1), y});
  assert_true(rg_unify_terms(C, a, b, true, &w));
  assert_show(w, "((1 2) 1 2)");
  assert_false(rg_unify_terms(C, rg_int(1), rg_int(2), true, NULL));
  /* occurs check */
  assert_false(rg_unify_terms(C, x, rg_cons(rg_int(1), x), true, NULL));
  assert_true(rg_unify_terms(C, x, rg_cons(rg_int(1), x), false, NULL));
}

/* A proper list of n fresh variables (or n integers). */
static rg_term big_list(int64_t n, bool vars) {
  rg_term l = RG_NIL;
  for (int64_t i = 0; i < n; i++) l = rg_cons(vars ? rg_var(C) : rg_int(i), l);
  return l;
}

static void test_unify_million_list(void **st) {
  int64_t n = 1000000;
  rg_term vs = big_list(n, true), ns = big_list(n, false);
  rg_term q = rg_var(C), ans;
  rg_goal *g = rg_conj2(rg_eq(vs, ns), rg_eq(q, vs));
  assert_int_equal(rg_run(C, 1, q, g, NULL, &ans), RG_OK);
  assert_int_equal(rg_list_length(rg_car(ans)), n);
  assert_true(rg_equal(rg_car(ans), ns));
}

/* (((...(x)...))) nested 10^6 deep through the car. */
static rg_term deep_car(int64_t n, rg_term leaf) {
  rg_term t = leaf;
  for (int64_t i = 0; i < n; i++) t = rg_cons(t, RG_NIL);
  return t;
}

static void test_unify_reify_million_deep(void **st) {
  int64_t n = 1000000;
  rg_term x = rg_var(C);
  rg_term a = deep_car(n, x), b = deep_car(n, rg_symbol("leaf"));
  rg_term q = rg_var(C), ans;
  rg_goal *g = rg_conj2(rg_eq(a, b), rg_eq(q, a));
  assert_int_equal(rg_run(C, 1, q, g, NULL, &ans), RG_OK);
  assert_true(rg_equal(rg_car(ans), b));
  /* reify of an unbound deep term names its variable */
  rg_term y = rg_var(C);
  assert_int_equal(rg_run(C, 1, q, rg_eq(q, deep_car(n, y)), NULL, &ans), RG_OK);
  rg_term t = rg_car(ans);
  for (int64_t i = 0; i < n; i++) t = rg_car(t);
  assert_show(t, "_.0");
  char *s = rg_to_string(deep_car(1000, rg_int(1)));
  assert_int_equal(strlen(s), 2001);
}

/* Many variables in one unification take the batched path of the
 * substitution (see unify.c): repeated variables must still be seen. */
static void test_unify_batched(void **st) {
  int n = 5000;
  rg_term *vs = rg_gc_alloc(n * sizeof(rg_term));
  for (int i = 0; i < n; i++) vs[i] = rg_var(C);
  rg_term xs = RG_NIL, same = RG_NIL, diff = RG_NIL;
  xs = rg_cons(vs[7], xs); /* the last element repeats vs[7] */
  same = rg_cons(rg_int(7), same);
  diff = rg_cons(rg_int(8), diff);
  for (int i = n - 1; i >= 0; i--) {
    xs = rg_cons(vs[i], xs);
    same = rg_cons(rg_int(i), same);
    diff = rg_cons(rg_int(i), diff);
  }
  rg_term q = rg_var(C), ans;
  assert_int_equal(rg_run(C, 1, q, rg_conj2(rg_eq(xs, same), rg_eq(q, xs)), NULL, &ans), RG_OK);
  assert_true(rg_equal(rg_car(ans), same));
  assert_int_equal(rg_run(C, 1, q, rg_conj2(rg_eq(xs, diff), rg_eq(q, xs)), NULL, &ans), RG_OK);
  assert_show(ans, "()");
  /* a second batch on top of a large substitution */
  rg_term ys = RG_NIL, more = RG_NIL;
  for (int i = n - 1; i >= 0; i--) {
    ys = rg_cons(rg_var(C), ys);
    more = rg_cons(rg_int(-i), more);
  }
  rg_goal *g = rg_conj(3, (rg_goal *[]){rg_eq(xs, same), rg_eq(ys, more),
                                        rg_eq(q, rg_list(2, (rg_term[]){xs, ys}))});
  assert_int_equal(rg_run(C, 1, q, g, NULL, &ans), RG_OK);
  assert_true(rg_equal(rg_car(ans), rg_list(2, (rg_term[]){same, more})));
  /* the occurs check sees batched bindings: z12 := (z11) fails because
   * z11 := (z10) and z10 := (z12) were batched just before */
  rg_term z[13], t[13];
  for (int i = 0; i < 13; i++) z[i] = rg_var(C);
  for (int i = 0; i < 10; i++) t[i] = rg_int(i);
  t[10] = rg_list(1, &z[12]);
  t[11] = rg_list(1, &z[10]);
  t[12] = rg_list(1, &z[11]);
  assert_int_equal(rg_run(C, 1, q, rg_eq(rg_list(13, z), rg_list(13, t)), NULL, &ans), RG_OK);
  assert_show(ans, "()");
  t[12] = rg_int(12);
  assert_int_equal(rg_run(C, 1, q, rg_conj2(rg_eq(rg_list(13, z), rg_list(13, t)), rg_eq(q, z[11])), NULL, &ans), RG_OK);
  assert_show(ans, "(((12)))");
}

static void test_goals_c_api(void **st) {
  rg_term q = rg_var(C), ans;
  rg_goal *cl[3] = {rg_eq(q, rg_int(1)), rg_eq(q, rg_int(2)), rg_eq(q, rg_int(3))};
  assert_int_equal(rg_run(C, -1, q, rg_conde(3, cl), NULL, &ans), RG_OK);
  assert_show(ans, "(1 2 3)");
  assert_int_equal(rg_run(C, 2, q, rg_conde(3, cl), NULL, &ans), RG_OK);
  assert_show(ans, "(1 2)");
  assert_int_equal(rg_run(C, 0, q, rg_conde(3, cl), NULL, &ans), RG_OK);
  assert_show(ans, "()");
  assert_int_equal(rg_run(C, -1, q, rg_conj2(rg_neq(q, rg_int(5)), rg_numbero(q)), NULL, &ans), RG_OK);
  assert_show(ans, "((_.0 (=/= ((_.0 5))) (num _.0)))");
}

static rg_goal *fresh_body(rg_ctx *ctx, rg_term *v, void *ud) {
  rg_term q = ud;
  return rg_conj2(rg_eq(v[0], rg_int(7)), rg_eq(q, rg_list(2, (rg_term[]){v[0], v[1]})));
}

static void test_fresh_c_api(void **st) {
  rg_term q = rg_var(C), ans;
  assert_int_equal(rg_run(C, -1, q, rg_fresh(2, fresh_body, q), NULL, &ans), RG_OK);
  assert_show(ans, "((7 _.0))");
}

static void test_step_limit(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_run_opts o = {.max_steps = 1000};
  rg_interp_set_run_opts(I, &o);
  rg_interp_set_output(I, NULL);
  int rc = rg_interp_load_string(I, "<t>", "(run 1 (q) (nevero))");
  assert_int_equal(rc, RG_STOP_STEPS);
  assert_non_null(strstr(rg_errmsg(C), "step limit"));
}

/* One query restarted on new inputs: answers, a restart while answers are
 * pending, the step limit starting again, and a bad argument. */
static void test_query_restart(void **st) {
  rg_term x = rg_var(C), q = rg_var(C), a;
  rg_goal *cl[2] = {rg_eq(x, rg_cons(rg_int(1), q)), rg_eq(x, rg_cons(q, rg_int(2)))};
  rg_run_opts o = {.max_steps = 100};
  rg_query *Q = rg_query_new(C, q, rg_conde(2, cl), &o);
  rg_term v1 = rg_cons(rg_int(1), rg_int(2)), v2 = rg_cons(rg_int(3), rg_int(4));
  for (int rep = 0; rep < 300; rep++) { /* 300 x 100 steps: the limit restarts */
    assert_int_equal(rg_query_restart(Q, 1, &x, &v1), RG_OK);
    assert_int_equal(rg_query_next_walked(Q, &a), 1);
    assert_show(a, "2");
    if (rep % 2) continue; /* leave the second answer pending */
    assert_int_equal(rg_query_next_walked(Q, &a), 1);
    assert_show(a, "1");
    assert_int_equal(rg_query_next_walked(Q, &a), 0);
  }
  assert_int_equal(rg_query_restart(Q, 1, &x, &v2), RG_OK);
  assert_int_equal(rg_query_next_walked(Q, &a), 0);
  /* released with an answer pending: it answers nothing until restarted,
   * then as before (twice released, and released fresh, are the same) */
  assert_int_equal(rg_query_restart(Q, 1, &x, &v1), RG_OK);
  assert_int_equal(rg_query_next_walked(Q, &a), 1);
  rg_query_release(Q);
  rg_query_release(Q);
  assert_int_equal(rg_query_next_walked(Q, &a), 0);
  assert_int_equal(rg_query_status(Q), RG_OK);
  assert_int_equal(rg_query_restart(Q, 1, &x, &v1), RG_OK);
  assert_int_equal(rg_query_next_walked(Q, &a), 1);
  assert_show(a, "2");
  assert_int_equal(rg_query_next_walked(Q, &a), 1);
  assert_show(a, "1");
  assert_int_equal(rg_query_restart(Q, 1, (rg_term[]){rg_int(5)}, &v1), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "not a variable"));
  rg_clear_error(C);
  /* the scratch stacks let go of what they held; the context still works */
  rg_ctx_release_scratch(rg_ctx_new()); /* never used: nothing to clear */
  rg_ctx_release_scratch(C);
  assert_int_equal(rg_query_restart(Q, 1, &x, &v1), RG_OK);
  assert_int_equal(rg_query_next_walked(Q, &a), 1);
  assert_show(a, "2");
}

/* (succ n m): m = n + 1 on integers; fails on other numbers; an error on
 * a string; no constraint on an unbound n. */
static int succ_fn(rg_ctx *ctx, const rg_term *args, rg_term *out, void *ud) {
  *(int *)ud += 1;
  switch (rg_kind_of(args[0])) {
  case RG_K_INT: *out = rg_int(rg_int_value(args[0]) + 1); return 1;
  case RG_K_VAR: *out = NULL; return 1;
  case RG_K_STRING: return rg_error(ctx, RG_ERR_TYPE, "succ: a string");
  default: return 0;
  }
}

static void test_functional_relation(void **st) {
  int calls = 0;
  rg_term succ = rg_relation_function("succ", 2, succ_fn, &calls), q = rg_var(C), n = rg_var(C), ans;
  rg_goal *g = rg_conj2(rg_eq(n, rg_int(41)), rg_call(succ, 2, (rg_term[]){n, q}));
  assert_int_equal(rg_run(C, -1, q, g, NULL, &ans), RG_OK);
  assert_show(ans, "(42)");
  assert_int_equal(rg_run(C, -1, q, rg_call(succ, 2, (rg_term[]){rg_int(1), rg_int(3)}), NULL, &ans),
                   RG_OK);
  assert_show(ans, "()");
  assert_int_equal(rg_run(C, -1, q, rg_call(succ, 2, (rg_term[]){rg_float(1.5), q}), NULL, &ans),
                   RG_OK);
  assert_show(ans, "()");
  assert_int_equal(rg_run(C, -1, q, rg_call(succ, 2, (rg_term[]){n, q}), NULL, &ans), RG_OK);
  assert_show(ans, "(_.0)");
  assert_int_not_equal(rg_run(C, -1, q, rg_call(succ, 2, (rg_term[]){rg_string("s"), q}), NULL, &ans),
                       RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "succ: a string"));
  rg_clear_error(C);
  assert_int_not_equal(rg_run(C, -1, q, rg_call(succ, 3, (rg_term[]){n, q, q}), NULL, &ans), RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "expects 2 arguments"));
  rg_clear_error(C);
  assert_int_equal(calls, 5);
}

static void test_read_stream(void **st) {
  char text[] = "(graph)\n;; twelve more\n";
  FILE *f = fmemopen(text, strlen(text), "r");
  size_t n;
  char *got = rg_read_stream(f, &n);
  fclose(f);
  assert_int_equal(n, strlen(text));
  assert_string_equal(got, text);
  f = fmemopen(text, 0, "r");
  got = rg_read_stream(f, &n);
  fclose(f);
  assert_int_equal(n, 0);
  assert_string_equal(got, "");
  /* a NUL byte: not text, and not read further */
  char binary[] = "(graph\0)";
  f = fmemopen(binary, sizeof binary - 1, "r");
  errno = 0;
  assert_null(rg_read_stream(f, &n));
  assert_int_equal(errno, EILSEQ);
  fclose(f);
  assert_non_null(strstr(rg_read_stream_error(EILSEQ), "NUL byte"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_atoms_print),     cmocka_unit_test(test_lists_print),
      cmocka_unit_test(test_equal_hash),      cmocka_unit_test(test_unify_basic),
      cmocka_unit_test(test_unify_million_list), cmocka_unit_test(test_unify_reify_million_deep),
      cmocka_unit_test(test_unify_batched),
      cmocka_unit_test(test_goals_c_api),     cmocka_unit_test(test_fresh_c_api),
      cmocka_unit_test(test_step_limit),      cmocka_unit_test(test_query_restart),
      cmocka_unit_test(test_functional_relation), cmocka_unit_test(test_read_stream),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
