/*
 * test_core_bridge.c — the kanren bridge: graph variables unify as
 * etuples (lazily), constants match numbers, parameterized heads, and
 * evaluation of expressions into graphs (with type errors as failures),
 * from the C API and from the relational language, forwards and backwards.
 */
#include "tests/testutil.h"

#include <string.h>

#include "relgraph/graph.h"

static rg_ctx *C;
static rg_variable *A, *x, *y, *z;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  A = rg_input(C, "A", rg_type_new(RG_FLOAT64, 2, (int64_t[]){-1, -1}));
  x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, (int64_t[]){-1}));
  y = rg_input(C, "y", rg_type_new(RG_FLOAT64, 1, (int64_t[]){5}));
  z = rg_input(C, "z", rg_type_new(RG_FLOAT64, 1, (int64_t[]){4}));
  return 0;
}

static rg_term sym(const char *s) { return rg_symbol(s); }
static rg_term L3(rg_term a, rg_term b, rg_term c) { return rg_list(3, (rg_term[]){a, b, c}); }

/* All answers of (run* (q) (== t pattern)). */
static rg_term answers(rg_term q, rg_term t, rg_term pattern) {
  rg_term out;
  assert_int_equal(rg_run(C, -1, q, rg_eq(t, pattern), NULL, &out), RG_OK);
  return out;
}

static void test_query_binds_graph_variables(void **st) {
  rg_variable *s = rg_add(x, y);
  rg_variable *g = rg_dot(A, s);
  rg_term q = rg_var(C);
  /* (run* (q) (== g `(dot ,q ,_))) binds q to A */
  rg_term out = answers(q, rg_var_term(g), L3(sym("dot"), q, rg_var(C)));
  assert_int_equal(rg_list_length(out), 1);
  assert_ptr_equal(rg_term_var(rg_car(out)), A);
  assert_show(out, "(A)");
  out = answers(q, rg_var_term(g), L3(sym("dot"), rg_var(C), q));
  assert_ptr_equal(rg_term_var(rg_car(out)), s);
  assert_show(out, "((add x y))");
  /* deeper: both sides of the sum */
  rg_term a = rg_var(C), b = rg_var(C);
  out = answers(rg_list(2, (rg_term[]){a, b}), rg_var_term(g), L3(sym("dot"), rg_var(C), L3(sym("add"), a, b)));
  assert_show(out, "((x y))");
  assert_ptr_equal(rg_term_var(rg_car(rg_car(out))), x);
  /* inputs are atomic */
  out = answers(q, rg_var_term(x), L3(sym("add"), rg_var(C), rg_var(C)));
  assert_true(out == RG_NIL);
  out = answers(q, rg_var_term(g), L3(sym("add"), rg_var(C), rg_var(C)));
  assert_true(out == RG_NIL);
  /* a variable equals itself, not another input of the same type */
  assert_true(rg_unify_terms(C, rg_var_term(x), rg_var_term(x), true, NULL));
  assert_false(rg_unify_terms(C, rg_var_term(x), rg_var_term(rg_input(C, "x", x->type)), true, NULL));
}

static void test_constants_match_numbers(void **st) {
  rg_variable *g = rg_mul(x, rg_scalar_float(C, 1.0));
  rg_term a = rg_var(C);
  assert_show(answers(a, rg_var_term(g), L3(sym("mul"), a, rg_int(1))), "(x)");
  assert_show(answers(a, rg_var_term(g), L3(sym("mul"), a, rg_float(1.0))), "(x)");
  assert_true(answers(a, rg_var_term(g), L3(sym("mul"), a, rg_int(2))) == RG_NIL);
  rg_variable *h = rg_mul(x, rg_constant_scalar(C, RG_FLOAT64, 1.0));
  assert_true(rg_unify_terms(C, rg_var_term(g), rg_var_term(h), true, NULL) == false); /* weak vs strong */
  rg_variable *h2 = rg_mul(x, rg_scalar_float(C, 1.0));
  assert_true(rg_unify_terms(C, rg_var_term(g), rg_var_term(h2), true, NULL));
  rg_variable *bt = rg_and(rg_input(C, "b", rg_type_scalar(RG_BOOL)), rg_scalar_bool(C, true));
  assert_show(answers(a, rg_var_term(bt), L3(sym("and"), a, RG_TRUE)), "(b)");
  /* equal terms hash alike, across kinds */
  rg_term one = rg_var_term(rg_scalar_float(C, 1.0)), half = rg_var_term(rg_scalar_float(C, 0.5));
  rg_term yes = rg_var_term(rg_scalar_bool(C, true)), three = rg_var_term(rg_scalar_int(C, 3));
  assert_true(rg_equal(one, rg_int(1)) && rg_hash(one) == rg_hash(rg_int(1)));
  assert_true(rg_equal(one, rg_float(1.0)) && rg_hash(one) == rg_hash(rg_float(1.0)));
  assert_true(rg_equal(half, rg_float(0.5)) && rg_hash(half) == rg_hash(rg_float(0.5)));
  assert_true(rg_equal(yes, RG_TRUE) && rg_hash(yes) == rg_hash(RG_TRUE));
  assert_true(rg_equal(three, rg_int(3)) && rg_hash(three) == rg_hash(rg_int(3)));
}

static void test_parameterized_heads(void **st) {
  rg_variable *g = rg_sum(rg_exp(A), 1, (int64_t[]){0});
  rg_term a = rg_var(C);
  rg_term head = rg_list(2, (rg_term[]){sym("sum"), rg_int(0)});
  assert_show(answers(a, rg_var_term(g), rg_list(2, (rg_term[]){head, a})), "((exp A))");
  assert_true(answers(a, rg_var_term(g), rg_list(2, (rg_term[]){sym("sum"), a})) == RG_NIL);
  /* the axis is a logic variable too */
  rg_term ax = rg_var(C);
  rg_term pat = rg_list(2, (rg_term[]){rg_list(2, (rg_term[]){sym("sum"), ax}), rg_var(C)});
  assert_show(answers(ax, rg_var_term(g), pat), "(0)");
  /* evaluation of a plain list with a parameterized head */
  rg_term e = rg_list(2, (rg_term[]){rg_list(2, (rg_term[]){sym("max"), rg_int(1)}),
                                     rg_list(2, (rg_term[]){sym("exp"), rg_var_term(A)})});
  rg_variable *v = rg_graph_eval(C, e);
  if (!v) fail_msg("%s", rg_errmsg(C));
  assert_string_equal(rg_pprint_str(v), "max{1}(exp(A))");
}

static void test_evaluate_builds_graphs(void **st) {
  rg_term e = L3(sym("add"), L3(sym("dot"), rg_var_term(A), rg_var_term(x)),
                 L3(sym("dot"), rg_var_term(A), rg_var_term(y)));
  rg_variable *v = rg_graph_eval(C, e);
  if (!v) fail_msg("%s", rg_errmsg(C));
  assert_string_equal(rg_pprint_str(v), "((A @ x) + (A @ y))");
  assert_string_equal(rg_type_str(v->type), "float64 (?)");
  /* numbers become weak literals: float32 stays float32 */
  rg_variable *f = rg_input(C, "f", rg_type_new(RG_FLOAT32, 1, (int64_t[]){3}));
  v = rg_graph_eval(C, L3(sym("mul"), rg_var_term(f), rg_int(2)));
  assert_string_equal(rg_type_str(v->type), "float32 (3)");
  /* etuples evaluate too, and the etuple caches its value */
  rg_term et = rg_etuple(sym("exp"), 1, (rg_term[]){rg_var_term(x)});
  v = rg_graph_eval(C, et);
  assert_string_equal(rg_pprint_str(v), "exp(x)");
  /* kanren arithmetic on numbers stays kanren arithmetic */
  rg_term n = rg_eval_etuple(C, L3(sym("add"), rg_int(1), rg_int(2)));
  assert_show(n, "3");
}

static void test_evaluation_errors(void **st) {
  rg_clear_error(C);
  assert_null(rg_graph_eval(C, L3(sym("dot"), rg_var_term(y), rg_var_term(z))));
  assert_non_null(strstr(rg_errmsg(C), "dot: shapes (5) and (4) are not aligned"));
  rg_clear_error(C);
  assert_null(rg_graph_eval(C, rg_list(2, (rg_term[]){sym("frob"), rg_var_term(x)})));
  assert_non_null(strstr(rg_errmsg(C), "unknown op 'frob'"));
  rg_clear_error(C);
  assert_null(rg_graph_eval(C, L3(sym("add"), rg_var_term(x), rg_string("s"))));
  assert_non_null(strstr(rg_errmsg(C), "add: argument 2: \"s\" is not a graph variable or a number"));
  rg_clear_error(C);
  rg_term bad = rg_list(2, (rg_term[]){rg_list(2, (rg_term[]){sym("sum"), rg_int(3)}), rg_var_term(x)});
  assert_null(rg_graph_eval(C, bad));
  assert_non_null(strstr(rg_errmsg(C), "sum: axis 3 is out of range"));
  rg_clear_error(C);
}

static void test_multi_outputs_and_opaque(void **st) {
  rg_variable *sizes = rg_constant_data(C, RG_INT64, 1, (int64_t[]){2}, (int64_t[]){2, 3});
  rg_node *sp = rg_split(y, sizes, 0, 2);
  rg_term t = rg_var_term(sp->outputs[1]);
  assert_show(t, "(nth 1 ((split 0 2) y #<constant int64 (2)>))");
  rg_variable *v = rg_graph_eval(C, t);
  if (!v) fail_msg("%s", rg_errmsg(C));
  assert_string_equal(rg_type_str(v->type), "float64 (3)");
  rg_term whole = rg_car(rg_cdr(rg_cdr(rg_etuple_list(rg_foreign_expand(t))))); /* the split itself */
  assert_null(rg_graph_eval(C, rg_list(2, (rg_term[]){sym("exp"), whole})));
  assert_non_null(strstr(rg_errmsg(C), "exp: argument 1 has several outputs"));
  rg_clear_error(C);
  const rg_op *op1 = rg_op_opaque("op1", 1, NULL);
  rg_graph_declare_opaque(C, op1);
  v = rg_graph_eval(C, L3(sym("op1"), rg_var_term(x), rg_float(2.0)));
  if (!v) fail_msg("%s", rg_errmsg(C));
  assert_string_equal(rg_pprint_str(v), "op1(x, 2.0)");
  /* the op a head names: built-in, declared opaque, or neither */
  assert_ptr_equal(rg_graph_op_of(C, sym("op1")), op1);
  assert_int_equal(rg_graph_op_of(C, sym("exp"))->code, RG_OP_EXP);
  assert_null(rg_graph_op_of(C, sym("op2")));
  assert_string_equal(rg_errmsg(C), "unknown op 'op2'");
  rg_clear_error(C);
}

/* The same rule from the relational language, both directions. */
static void test_language_rule_both_ways(void **st) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_variable *g = rg_dot(A, rg_add(x, rg_exp(x)));
  rg_variable *h = rg_add(rg_dot(A, x), rg_dot(A, y));
  rg_interp_define(I, "g", rg_var_term(g));
  rg_interp_define(I, "h", rg_var_term(h));
  int rc = rg_interp_load_string(I, "<rule>",
                                 "(defrel (distribute lhs rhs)\n"
                                 "  (fresh (A x y)\n"
                                 "    (== lhs `(dot ,A (add ,x ,y)))\n"
                                 "    (== rhs `(add (dot ,A ,x) (dot ,A ,y)))))\n");
  if (rc != RG_OK) fail_msg("%s", rg_errmsg(C));
  rg_term fwd = rg_interp_eval_string(I, "(run* (r) (distribute g r))");
  if (!fwd) fail_msg("%s", rg_errmsg(C));
  assert_show(fwd, "((add (dot A x) (dot A (exp x))))");
  rg_variable *v = rg_graph_eval(C, rg_car(fwd));
  assert_string_equal(rg_pprint_str(v), "((A @ x) + (A @ exp(x)))");
  rg_term back = rg_interp_eval_string(I, "(run* (l) (distribute l h))");
  assert_show(back, "((dot A (add x y)))");
  v = rg_graph_eval(C, rg_car(back));
  assert_string_equal(rg_pprint_str(v), "(A @ (x + y))");
  /* a rule whose result does not type-check fails to evaluate, with a message */
  rg_interp_define(I, "bad", rg_var_term(rg_add(rg_dot(A, z), rg_dot(A, y))));
  back = rg_interp_eval_string(I, "(run* (l) (distribute l bad))");
  assert_null(rg_graph_eval(C, rg_car(back)));
  assert_non_null(strstr(rg_errmsg(C), "add: shapes (4) and (5) do not broadcast"));
  rg_clear_error(C);
}


/* A composite heads as the op itself: matching it binds the op, and
 * evaluating with it again needs no parsing of the inner graph. */
static void test_inner_graph_heads(void **st) {
  rg_variable *p = rg_input(C, "p", rg_type_scalar(RG_FLOAT64)), *q = rg_input(C, "q", rg_type_scalar(RG_FLOAT64));
  rg_variable *pq = rg_mul(p, rg_exp(q));
  const rg_op *comp = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){p, q}, 1, &pq, 0));
  rg_variable *g = rg_apply(C, comp, 2, (rg_variable *[]){x, x});
  rg_term h = rg_var(C), a = rg_var(C), b = rg_var(C);
  rg_term out = answers(rg_list(3, (rg_term[]){h, a, b}), rg_var_term(g), L3(h, a, b));
  assert_show(out, "(((composite (graph (input p float64 ()) (input q float64 ()) (output (mul p (exp q))))) x x))");
  rg_term ans = rg_car(out);
  rg_term swapped = L3(rg_car(ans), rg_var_term(y), rg_var_term(x));
  rg_variable *v = rg_graph_eval(C, swapped);
  if (!v) fail_msg("%s", rg_errmsg(C));
  assert_ptr_equal(v->owner->op, comp);
  assert_string_equal(rg_type_str(v->type), "float64 (5)");
  /* the head also unifies with its written list form */
  rg_term written = tu_read(C, "(composite (graph (input p float64 ()) (input q float64 ()) (output (mul p (exp q)))))");
  assert_true(rg_unify_terms(C, written, rg_op_term(comp), true, NULL));
  assert_true(rg_equal(rg_op_term(comp), rg_op_term(rg_op_from_term(C, written))));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_query_binds_graph_variables),
      cmocka_unit_test(test_constants_match_numbers),
      cmocka_unit_test(test_parameterized_heads),
      cmocka_unit_test(test_evaluate_builds_graphs),
      cmocka_unit_test(test_evaluation_errors),
      cmocka_unit_test(test_multi_outputs_and_opaque),
      cmocka_unit_test(test_language_rule_both_ways),
      cmocka_unit_test(test_inner_graph_heads),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
