/*
 * test_rewrite_fusion.c — elementwise fusion (rewrites/fusion.c): which
 * groups form (shared intermediates as extra outputs, broadcast inputs,
 * producers used only inside, cycles avoided, small and unknown shapes),
 * and that every fused graph computes what the unfused one
 * does (the composite against the separate ops, float32 transcendental
 * functions within 4 ULP of each other).
 */
#include "tests/testutil.h"

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

#define N "65536"
#define INPUTS "(input a float32 (" N ")) (input b float32 (" N ")) (input c float32 (" N ")) " \
               "(input r float32 (256 256)) (input v float32 (256)) (input M float32 (256 256)) "

static rg_fgraph *read_graph(const char *body) {
  char text[4096];
  snprintf(text, sizeof text, "(graph " INPUTS "%s)", body);
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s\n%s", rg_errmsg(C), text);
  return fg;
}

static int count_op(rg_fgraph *fg, rg_opcode code) {
  int k = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) k += n->op->code == code;
  return k;
}

/* Runs the graph's outputs compiled with a query, inputs in [-2, 2). */
static void run(rg_fgraph *fg, const char *query, rg_tensor **res) { tu_run_graph(C, fg, query, -2, 4, res); }

/* Fused and unfused give the same values (4 ULP, relative to the
 * magnitude of the terms). */
static void same_values_of(rg_fgraph *fg, const char *body) {
  int nout = rg_fgraph_noutputs(fg);
  rg_tensor *fused[8], *plain[8];
  run(fg, "fast_run", fused);
  run(fg, "fast_run -fusion", plain);
  for (int k = 0; k < nout; k++) {
    for (int64_t i = 0; i < rg_tensor_numel(plain[k]); i++) {
      double x = rg_tensor_get_f64(fused[k], i), y = rg_tensor_get_f64(plain[k], i);
      if (fabs(x - y) > 4 * 1.2e-7 * (1 + fabs(y))) fail_msg("%s: output %d element %lld: %g vs %g", body, k, (long long)i, x, y);
    }
    rg_tensor_free(fused[k]), rg_tensor_free(plain[k]);
  }
}

static void same_values(const char *body) { same_values_of(read_graph(body), body); }

/* Fuses with fast_run; returns the graph. */
static rg_fgraph *fused(const char *body) {
  rg_fgraph *fg = read_graph(body);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  return fg;
}

static void test_chain_becomes_one_composite(void **st) {
  const char *body = "(output (add (mul (sigmoid a) (tanh b)) (mul c a)))";
  rg_fgraph *fg = fused(body);
  assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
  assert_int_equal(count_op(fg, RG_OP_SIGMOID) + count_op(fg, RG_OP_TANH) + count_op(fg, RG_OP_MUL), 0);
  same_values(body);
}

/* An intermediate used outside the group is one more output. */
static void test_shared_intermediate_is_an_output(void **st) {
  const char *body = "(define t (exp a)) (output (add t b)) (output (mul t 2.0)) (output t)";
  rg_fgraph *fg = fused(body);
  rg_node *comp = NULL;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
    if (n->op->code == RG_OP_COMPOSITE) comp = n;
  assert_non_null(comp);
  assert_true(comp->nout >= 2);
  assert_int_equal(count_op(fg, RG_OP_EXP), 0);
  same_values(body);
}

/* A producer with a smaller, broadcast shape is fused when used only
 * inside; with a graph output of its own it stays outside. */
static void test_broadcast_producers(void **st) {
  const char *inside = "(output (add r (exp v)))";
  rg_fgraph *fg = fused(inside);
  assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
  assert_int_equal(count_op(fg, RG_OP_EXP), 0);
  same_values(inside);
  const char *outside = "(define e (exp v)) (output (add r e)) (output e)";
  fg = fused(outside);
  assert_int_equal(count_op(fg, RG_OP_EXP), 1);
  same_values(outside);
}

/* exp(r) feeds a non-elementwise node (a transpose) whose result comes
 * back into the group: absorbing exp would make a cycle, so exp stays out.
 * (With dot e M instead, the BLAS rewrites make one gemm of the sum first
 * and exp fuses with 2e as a two-output composite.) */
static void test_no_cycle(void **st) {
  const char *body = "(define e (exp r)) (output (add (mul e 2.0) ((dimshuffle 1 0) e)))";
  rg_fgraph *fg = fused(body);
  assert_int_equal(count_op(fg, RG_OP_EXP), 1);
  same_values(body);
}

/* The same through three transposes, with exp also feeding a long
 * branch of its own that never comes back (the search backwards from the
 * group's inputs finds exp first): the add stays out of exp's group,
 * which takes the product and the branch's negation instead. */
static void test_no_cycle_long_way(void **st) {
  char body[3072];
  int k = snprintf(body, sizeof body, "(define e (exp r)) (define d0 ((sum 0) e))");
  for (int i = 1; i < 40; i++) k += snprintf(body + k, sizeof body - (size_t)k, " (define d%d (neg d%d))", i, i - 1);
  snprintf(body + k, sizeof body - (size_t)k,
           " (define t ((dimshuffle 1 0) ((dimshuffle 1 0) ((dimshuffle 1 0) e))))"
           " (output (add (mul e 2.0) t)) (output d39)");
  rg_fgraph *fg = fused(body);
  assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
  assert_int_equal(count_op(fg, RG_OP_ADD), 1);
  assert_int_equal(count_op(fg, RG_OP_EXP), 0);
  same_values(body);
}

/* The gradient of a chain of 3000 tanh: groups along the chain, values
 * as unfused. */
static void test_long_chain_gradient(void **st) {
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT32, 1, (int64_t[]){4})), *h = x;
  for (int i = 0; i < 3000; i++) h = rg_tanh(h);
  rg_variable *cost = rg_sum(h, -1, NULL), *g;
  assert_int_equal(rg_grad(C, cost, 1, &x, NULL, &g), RG_OK);
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 2, (rg_variable *[]){cost, g}, RG_FG_CLONE);
  rg_fgraph *copy = rg_fgraph_new(C, 1, &x, 2, (rg_variable *[]){cost, g}, RG_FG_CLONE);
  rg_rewrite_run *r = rg_rewrite(copy, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_true(count_op(copy, RG_OP_COMPOSITE) > 10);
  assert_int_equal(count_op(copy, RG_OP_TANH), 0);
  same_values_of(fg, "the gradient of 3000 tanh");
}

/* Siblings reading one value join its group: four products of a shared
 * derivative with four slices (the LSTM's gate gradients) are one
 * composite of four outputs feeding the join.  A sibling whose other input
 * is computed from the group through a node outside it (a reduction of
 * the shared value) stays out: absorbing it would make a cycle. */
static void test_sibling_consumers(void **st) {
  (void)st;
  const char *gates = "(input G float32 (1024 256)) (input D float32 (1024 64))"
                      " (define d (sigmoid D)) (define s (mul d (sub 1.0 d)))"
                      " (define (g0 g1 g2 g3) ((split 1 4) G (constant int64 (4) (64 64 64 64))))"
                      " (output ((join 1) (mul s (add g0 1.0)) (mul s g1) (mul s (exp g2)) (mul s g3)))";
  rg_fgraph *fg = fused(gates);
  assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
  assert_int_equal(count_op(fg, RG_OP_MUL), 0);
  assert_int_equal(count_op(fg, RG_OP_SIGMOID), 0);
  same_values(gates);
  const char *body = "(define e (exp a)) (output (mul e b)) (output (add e c))";
  fg = fused(body);
  assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
  assert_int_equal(count_op(fg, RG_OP_EXP), 0);
  same_values(body);
  const char *cyc = "(define e (exp a)) (output (mul e b)) (output (mul e (sum e)))";
  fg = fused(cyc);
  assert_int_equal(count_op(fg, RG_OP_SUM), 1);
  same_values(cyc);
}

/* The parts of a join join one group, connected or not (two chains of
 * their own here), so the linker can write them into the joined value; a
 * part computed from the other through a node outside the group (a sum)
 * stays out, in either order of seeding. */
static void test_join_siblings(void **st) {
  (void)st;
  const char *apart = "(output ((join 1) (mul (exp r) 2.0) (tanh M) (add (sigmoid M) r)))";
  rg_fgraph *fg = fused(apart);
  assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
  assert_int_equal(count_op(fg, RG_OP_EXP) + count_op(fg, RG_OP_TANH) + count_op(fg, RG_OP_SIGMOID), 0);
  same_values(apart);
  const char *cyc = "(define s (tanh M)) (output ((join 1) (mul (exp r) (sum s)) s))";
  fg = fused(cyc);
  assert_int_equal(count_op(fg, RG_OP_TANH), 1);
  same_values(cyc);
  const char *cyc2 = "(define s (tanh M)) (output ((join 1) s (mul (exp r) (sum s))))";
  fg = fused(cyc2);
  assert_int_equal(count_op(fg, RG_OP_TANH), 1);
  same_values(cyc2);
}

/* Small or unknown shapes are left alone. */
/* Small and unknown shapes fuse as large ones do (as Aesara's groups),
 * computing what the separate ops compute (unknown sizes are 3 here); a
 * statically broadcast dimension stays a broadcast input; unknown sizes
 * that disagree at run time are refused as the separate ops refuse them. */
static void test_small_and_unknown_shapes(void **st) {
  const char *texts[] = {
      "(graph (input s float32 (3)) (input t float32 (3)) (output (add (mul (exp s) t) 1.0)))",
      "(graph (input s float32 (?)) (input t float32 (?)) (output (add (mul (exp s) t) 1.0)))",
      "(graph (input s float32 (? 3)) (input t float32 (1 ?)) (output (add (mul (exp s) t) 1.0)))",
      "(graph (input s float64 ()) (input t float64 ()) (output (sub (sqr s) (neg t))))",
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    rg_fgraph *fg = rg_graph_read(C, "small.graph", texts[i], strlen(texts[i]));
    rg_fgraph *copy = rg_graph_read(C, "small.graph", texts[i], strlen(texts[i]));
    rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
    assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
    assert_int_equal(count_op(fg, RG_OP_COMPOSITE), 1);
    same_values_of(copy, texts[i]);
  }
  rg_fgraph *fg = rg_graph_read(C, "unknown.graph", texts[1], strlen(texts[1]));
  rg_variable *in[2] = {rg_fgraph_input(fg, 0), rg_fgraph_input(fg, 1)}, *out = rg_fgraph_output(fg, 0);
  rg_function *f = rg_compile(C, 2, in, 1, &out, NULL);
  assert_non_null(f);
  int64_t one = 1, three = 3;
  rg_tensor *vals[2] = {rg_tensor_new(RG_FLOAT32, 1, &one), rg_tensor_new(RG_FLOAT32, 1, &three)}, *res = NULL;
  assert_int_not_equal(rg_function_call(f, vals, &res), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "do not broadcast"));
  assert_non_null(strstr(rg_function_errmsg(f), "(in a group fused from exp, mul, add)"));
  rg_function_free(f);
  /* the profile names the ops fused into a composite */
  rg_compile_opts prof = {.profile = true};
  f = rg_compile(C, 2, in, 1, &out, &prof);
  assert_non_null(f);
  rg_tensor_free(vals[0]);
  vals[0] = rg_tensor_new(RG_FLOAT32, 1, &three);
  assert_int_equal(rg_function_call(f, vals, &res), RG_OK);
  rg_tensor_free(res);
  assert_non_null(strstr(tu_function_profile(f), "(fused: exp, mul, add)"));
  rg_function_free(f);
  rg_tensor_free(vals[0]), rg_tensor_free(vals[1]);
}

/* An integer power of a smaller shape stays out of a group: over a group
 * with no elements it would not run, and its error (a negative exponent)
 * would be lost. */
static void test_failing_producer_kept_out(void **st) {
  const char *text = "(graph (input a int64 (3)) (input e int64 (3)) (input z int64 (? 3))"
                     " (output (add (pow a e) z)))";
  rg_fgraph *fg = rg_graph_read(C, "pow.graph", text, strlen(text));
  rg_variable *in[3] = {rg_fgraph_input(fg, 0), rg_fgraph_input(fg, 1), rg_fgraph_input(fg, 2)};
  rg_variable *out = rg_fgraph_output(fg, 0);
  rg_function *f = rg_compile(C, 3, in, 1, &out, NULL);
  assert_non_null(f);
  int64_t three = 3, empty[2] = {0, 3};
  int64_t av[3] = {1, 2, 3}, ev[3] = {1, -1, 2};
  rg_tensor *vals[3] = {rg_tensor_new(RG_INT64, 1, &three), rg_tensor_new(RG_INT64, 1, &three),
                        rg_tensor_new(RG_INT64, 2, empty)}, *res = NULL;
  for (int i = 0; i < 3; i++) rg_tensor_set_f64(vals[0], i, (double)av[i]), rg_tensor_set_f64(vals[1], i, (double)ev[i]);
  assert_int_not_equal(rg_function_call(f, vals, &res), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "negative"));
  rg_function_free(f);
  /* the same power inside a group: the error names the ops fused there */
  const char *same = "(graph (input a int64 (3)) (input e int64 (3)) (output (add (pow a e) 1)))";
  rg_fgraph *g = rg_graph_read(C, "pow.graph", same, strlen(same));
  rg_variable *gin[2] = {rg_fgraph_input(g, 0), rg_fgraph_input(g, 1)}, *gout = rg_fgraph_output(g, 0);
  f = rg_compile(C, 2, gin, 1, &gout, NULL);
  assert_non_null(f);
  assert_int_not_equal(rg_function_call(f, vals, &res), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "negative integer powers"));
  assert_non_null(strstr(rg_function_errmsg(f), "(in a group fused from pow, add)"));
  rg_function_free(f);
  for (int i = 0; i < 3; i++) rg_tensor_free(vals[i]);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  assert_int_equal(count_op(fg, RG_OP_POW), 1);
}

/* Mixed dtypes and integer wrap-around inside a group. */
/* Reads a graph written into a buffer of its own (larger cases). */
static rg_fgraph *read_text(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "case.graph", text, strlen(text));
  if (!fg) fail_msg("%s", rg_errmsg(C));
  return fg;
}

/* The composites of a rewritten graph: at most RG_COMPOSITE_MAX_IO inputs
 * and outputs each, and how many there are. */
static int composites_within_limits(rg_fgraph *fg) {
  int k = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
    if (n->op->code == RG_OP_COMPOSITE) {
      assert_true(n->nin <= RG_COMPOSITE_MAX_IO && n->nout <= RG_COMPOSITE_MAX_IO);
      k++;
    }
  return k;
}

static rg_fgraph *fast_run_of(const char *text) {
  rg_fgraph *fg = read_text(text);
  rg_rewrite_run *r = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  assert_int_equal(rg_rewrite_stop(r), RG_STOP_EQUILIBRIUM);
  return fg;
}

/* Groups stop before their composite would have more inputs or outputs
 * than the backends run, or more members than compile quickly; the graphs
 * still run, to the values of the ops one by one. */
static void test_group_limits(void **st) {
  enum { WIDE = RG_COMPOSITE_MAX_IO + 6, LONG = 300 };
  char *text = malloc(64 * 1024);
  size_t k = (size_t)sprintf(text, "(graph ");
  for (int i = 0; i < WIDE; i++) k += (size_t)sprintf(text + k, "(input x%d float32 (16)) ", i);
  size_t k0 = k;
  k += (size_t)sprintf(text + k, "(output (add"); /* one node reading more values than a composite takes */
  for (int i = 0; i < WIDE; i++) k += (size_t)sprintf(text + k, " (exp x%d)", i);
  sprintf(text + k, ")))");
  composites_within_limits(fast_run_of(text));
  same_values_of(read_text(text), "one wide node");
  k = k0 + (size_t)sprintf(text + k0, "(output"); /* a chain of binary nodes reading as many */
  for (int i = 1; i < WIDE; i++) k += (size_t)sprintf(text + k, " (maximum");
  k += (size_t)sprintf(text + k, " (exp x0)");
  for (int i = 1; i < WIDE; i++) k += (size_t)sprintf(text + k, " (exp x%d))", i);
  sprintf(text + k, "))");
  assert_int_equal(composites_within_limits(fast_run_of(text)), 2);
  same_values_of(read_text(text), "a wide chain");

  k = (size_t)sprintf(text, "(graph (input x float32 (16)) (define t (tanh x))");
  for (int i = 0; i < WIDE; i++) k += (size_t)sprintf(text + k, " (output (exp (mul t %d.5)))", i);
  sprintf(text + k, ")");
  assert_true(composites_within_limits(fast_run_of(text)) >= 2);
  rg_fgraph *fg = read_text(text);
  rg_tensor *f[WIDE], *u[WIDE];
  tu_run_graph(C, fg, "fast_run", -2, 4, f);
  tu_run_graph(C, fg, "fast_run -fusion", -2, 4, u);
  for (int j = 0; j < WIDE; j++) {
    assert_true(rg_tensor_allclose(f[j], u[j], 1e-6, 1e-6));
    rg_tensor_free(f[j]), rg_tensor_free(u[j]);
  }

  k = (size_t)sprintf(text, "(graph (input x float32 (16)) (output");
  for (int i = 0; i < LONG; i++) k += (size_t)sprintf(text + k, i % 2 ? " (cos" : " (sin");
  k += (size_t)sprintf(text + k, " x");
  for (int i = 0; i < LONG; i++) text[k++] = ')';
  sprintf(text + k, "))");
  assert_int_equal(composites_within_limits(fast_run_of(text)), 2);
  same_values_of(read_text(text), "a long chain");
  free(text);
}

static void test_dtypes(void **st) {
  same_values("(output (add ((cast float64) (mul a b)) (sqr ((cast float64) c))))");
  same_values("(output ((cast float32) (add ((cast int8) (mul a 100.0)) ((cast int8) (mul b 100.0)))))");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_becomes_one_composite),
      cmocka_unit_test(test_shared_intermediate_is_an_output),
      cmocka_unit_test(test_broadcast_producers),
      cmocka_unit_test(test_no_cycle),
      cmocka_unit_test(test_no_cycle_long_way),
      cmocka_unit_test(test_long_chain_gradient),
      cmocka_unit_test(test_sibling_consumers),
      cmocka_unit_test(test_join_siblings),
      cmocka_unit_test(test_small_and_unknown_shapes),
      cmocka_unit_test(test_failing_producer_kept_out),
      cmocka_unit_test(test_group_limits),
      cmocka_unit_test(test_dtypes),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
