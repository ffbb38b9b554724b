/*
 * test_core_gfile.c — the graph file format: reading, round trips (shared
 * subgraphs once, names kept, constants exact, deep graphs in bounded
 * nesting), every class of bad input with its file:line:col message, and
 * the inner-graph ops (composite, op_from_graph) with their equality,
 * hashing and round trips.
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-impl.h"

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}

static rg_fgraph *read_ok(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "t.graph", text, strlen(text));
  if (!fg) fail_msg("read failed: %s", rg_errmsg(C));
  assert_int_equal(rg_fgraph_check(fg), RG_OK);
  return fg;
}

/* Write, read back, compare; the second write equals the first. */
static rg_fgraph *round_trip(rg_fgraph *fg) {
  char *s1 = rg_graph_to_string(C, fg);
  assert_non_null(s1);
  rg_fgraph *back = rg_graph_read(C, "rt.graph", s1, strlen(s1));
  if (!back) fail_msg("reading back failed: %s\n%s", rg_errmsg(C), s1);
  assert_int_equal(rg_fgraph_ninputs(back), rg_fgraph_ninputs(fg));
  assert_int_equal(rg_fgraph_noutputs(back), rg_fgraph_noutputs(fg));
  int n = rg_fgraph_noutputs(fg), m = rg_fgraph_ninputs(fg);
  rg_variable **a = rgk_alloc((size_t)(n + m + 1) * sizeof *a), **b = rgk_alloc((size_t)(n + m + 1) * sizeof *b);
  for (int k = 0; k < n; k++) a[k] = rg_fgraph_output(fg, k), b[k] = rg_fgraph_output(back, k);
  for (int i = 0; i < m; i++) a[n + i] = rg_fgraph_input(fg, i), b[n + i] = rg_fgraph_input(back, i);
  if (!rg_equal_computations(n, a, b, m, a + n, b + n)) fail_msg("round trip differs:\n%s", s1);
  char *s2 = rg_graph_to_string(C, back);
  assert_string_equal(s1, s2);
  return back;
}

static void expect_read_error(const char *text, const char *msg) {
  rg_clear_error(C);
  rg_fgraph *fg = rg_graph_read(C, "bad.graph", text, strlen(text));
  if (fg) fail_msg("expected '%s', read a graph from:\n%s", msg, text);
  if (!strstr(rg_errmsg(C), msg)) fail_msg("error '%s' lacks '%s'", rg_errmsg(C), msg);
}

/* ------------------------------------------------------------------ reading */

static const char *example =
    "(graph\n"
    "  (input A float64 (? ?))\n"
    "  (input x float64 (?))\n"
    "  (input y float64 (5))\n"
    "  (opaque op1)\n"
    "  (define s (add x y))\n"
    "  (output (dot A s))\n"
    "  (output (op1 s 2.0)))\n";

static void test_read_example(void **st) {
  rg_fgraph *fg = read_ok(example);
  assert_int_equal(rg_fgraph_ninputs(fg), 3);
  assert_int_equal(rg_fgraph_noutputs(fg), 2);
  assert_int_equal(rg_fgraph_nnodes(fg), 3);
  rg_variable *d = rg_fgraph_output(fg, 0), *o = rg_fgraph_output(fg, 1);
  assert_string_equal(rg_type_str(d->type), "float64 (?)");
  assert_string_equal(d->owner->inputs[1]->name, "s");
  assert_string_equal(rg_type_str(d->owner->inputs[1]->type), "float64 (5)");
  assert_string_equal(rg_op_name(o->owner->op), "op1");
  assert_true(o->owner->inputs[1]->flags & RG_VAR_WEAK);
  round_trip(fg);
  char *text = rg_graph_to_string(C, fg);
  assert_string_equal(text,
                      "(graph\n"
                      "  (input A float64 (? ?))\n"
                      "  (input x float64 (?))\n"
                      "  (input y float64 (5))\n"
                      "  (opaque op1)\n"
                      "  (define s (add x y))\n"
                      "  (output (dot A s))\n"
                      "  (output (op1 s 2.0))\n"
                      ")\n");
}

static void test_params_and_multi_outputs(void **st) {
  rg_fgraph *fg = read_ok(
      "(graph (input x float32 (4 ?)) (input i int32 ())\n"
      "  (define t ((dimshuffle 1 0) x))\n"
      "  (define (lo hi) ((split 1 2) t (constant int64 (2) (1 3))))\n"
      "  (output ((sum 0) hi))\n"
      "  (output ((subtensor (1 none -1) ?) t i))\n"
      "  (output (nth 0 ((split 1 2) t (constant int64 (2) (2 2)))))\n"
      "  (output (mul lo ((cast int8) 1))))\n");
  assert_string_equal(rg_type_str(rg_fgraph_output(fg, 0)->type), "float32 (3)");
  assert_string_equal(rg_type_str(rg_fgraph_output(fg, 1)->type), "float32 (?)");
  assert_string_equal(rg_type_str(rg_fgraph_output(fg, 2)->type), "float32 (? 2)");
  assert_string_equal(rg_fgraph_output(fg, 3)->owner->inputs[0]->name, "lo");
  round_trip(fg);
}

static void test_constants_round_trip(void **st) {
  rg_fgraph *fg = read_ok(
      "(graph (input x float64 (2 3))\n"
      "  (output (add x (constant float64 (2 3) (1.5 -0.0 +inf.0 -inf.0 +nan.0 1e-300))))\n"
      "  (output (mul x (constant float32 () (0.1))))\n"
      "  (output (and (constant bool (2) (#t #f)) #t))\n"
      "  (output (add (constant uint8 (3) (0 255 7)) 1))\n"
      "  (output (add x 3)))\n");
  rg_variable *c = rg_fgraph_output(fg, 0)->owner->inputs[1];
  assert_true(isnan(((const double *)c->data)[4]));
  assert_true(signbit(((const double *)c->data)[1]));
  assert_string_equal(rg_type_str(rg_fgraph_output(fg, 1)->type), "float64 (2 3)");
  assert_string_equal(rg_type_str(rg_fgraph_output(fg, 3)->type), "uint8 (3)");
  round_trip(fg);
  /* a big constant used twice is written once */
  int64_t n = 40;
  double v[40];
  for (int i = 0; i < 40; i++) v[i] = i * 0.25;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  rg_variable *k = rg_constant_data(C, RG_FLOAT64, 1, &n, v);
  rg_variable *out = rg_mul(rg_add(x, k), k);
  rg_fgraph *g = rg_fgraph_new(C, 1, &x, 1, &out, 0);
  char *s = rg_graph_to_string(C, g);
  assert_non_null(strstr(s, "(define t1 (constant float64 (40)"));
  assert_null(strstr(strstr(s, "(constant") + 1, "(constant"));
  round_trip(g);
}

static void test_sharing_and_names(void **st) {
  rg_variable *x = rg_input(C, NULL, rg_type_new(RG_FLOAT64, 1, SHAPE(-1)));
  rg_variable *x2 = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, SHAPE(-1)));
  rg_variable *s = rg_exp(rg_add(x, x2));           /* shared, unnamed */
  rg_variable *n = rg_set_name(rg_sin(s), "sine");  /* named, used once */
  rg_variable *bad = rg_set_name(rg_cos(n), "has space");
  rg_variable *out = rg_mul(rg_add(s, n), bad);
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, x2}, 2, (rg_variable *[]){out, s}, 0);
  char *text = rg_graph_to_string(C, fg);
  assert_string_equal(text,
                      "(graph\n"
                      "  (input t1 float64 (?))\n"
                      "  (input x float64 (?))\n"
                      "  (define t2 (exp (add t1 x)))\n"
                      "  (define sine (sin t2))\n"
                      "  (define t3 (cos sine))\n"
                      "  (output (mul (add t2 sine) t3))\n"
                      "  (output t2)\n"
                      ")\n");
  round_trip(fg);
  /* names that start like numbers but read as symbols survive; numbers
   * and the reader's infinities do not */
  rg_variable *info = rg_input(C, "info", rg_type_new(RG_FLOAT64, 1, SHAPE(3)));
  rg_variable *first = rg_input(C, "1st", rg_type_new(RG_FLOAT64, 1, SHAPE(3)));
  rg_variable *num = rg_input(C, "1e3", rg_type_new(RG_FLOAT64, 1, SHAPE(3)));
  rg_variable *inf = rg_input(C, "+inf.0", rg_type_new(RG_FLOAT64, 1, SHAPE(3)));
  rg_variable *nano = rg_set_name(rg_exp(info), "nano");
  rg_variable *sum = rg_add(rg_add(nano, first), rg_add(num, inf));
  fg = rg_fgraph_new(C, 4, (rg_variable *[]){info, first, num, inf}, 2, (rg_variable *[]){sum, nano}, 0);
  text = rg_graph_to_string(C, fg);
  assert_string_equal(text,
                      "(graph\n"
                      "  (input info float64 (3))\n"
                      "  (input 1st float64 (3))\n"
                      "  (input t1 float64 (3))\n"
                      "  (input t2 float64 (3))\n"
                      "  (define nano (exp info))\n"
                      "  (output (add (add nano 1st) (add t1 t2)))\n"
                      "  (output nano)\n"
                      ")\n");
  round_trip(fg);
}

static void test_deep_graphs(void **st) {
  enum { N = 1000000 };
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 0, NULL));
  rg_variable *v = x;
  for (int k = 0; k < N; k++) v = k % 3 ? rg_neg(v) : rg_add(v, x);
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &v, 0);
  char *text = rg_graph_to_string(C, fg);
  /* the nesting stays bounded: no line is deeper than the inline limit */
  int depth = 0, max = 0;
  for (const char *p = text; *p; p++) {
    depth += *p == '(';
    depth -= *p == ')';
    if (depth > max) max = depth;
  }
  assert_true(max < 100);
  rg_fgraph *back = rg_graph_read(C, "deep", text, strlen(text));
  if (!back) fail_msg("%s", rg_errmsg(C));
  /* and it prints, in every format */
  FILE *null = fopen("/dev/null", "w");
  assert_int_equal(rg_fgraph_pprint(null, fg), RG_OK);
  assert_int_equal(rg_fgraph_dprint(null, fg), RG_OK);
  assert_int_equal(rg_fgraph_dot(null, fg), RG_OK);
  assert_int_equal(rg_fgraph_json(null, fg), RG_OK);
  fclose(null);
  assert_int_equal(rg_fgraph_nnodes(back), N);
  assert_true(rg_equal_computations(1, &v, (rg_variable *[]){rg_fgraph_output(back, 0)}, 1, &x,
                                    (rg_variable *[]){rg_fgraph_input(back, 0)}));
}

/* JSON strings always parse: escapes, valid UTF-8 kept, other bytes as
 * U+FFFD. */
static void test_json_strings(void **st) {
  const struct { const char *in, *out; } cases[] = {
      {"plain", "\"plain\""},
      {"a\"b\\c\nd\x01", "\"a\\\"b\\\\c\\nd\\u0001\""},
      {"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
      {"x\xff\xfe", "\"x\\ufffd\\ufffd\""},
      {"\xc3", "\"\\ufffd\""},                  /* cut short */
      {"\xc0\xaf", "\"\\ufffd\\ufffd\""},         /* overlong */
      {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""}, /* a surrogate */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rg_json_string(f, cases[i].in);
    fclose(f);
    assert_string_equal(buf, cases[i].out);
    free(buf);
  }
}

/* ------------------------------------------------------------------ bad input */

static void test_bad_files(void **st) {
  static const struct { const char *text, *msg; } bad[] = {
      {"", "bad.graph: empty file"},
      {"(graph", "bad.graph:1:1: unterminated list"},
      {"(graph) (graph)", "bad.graph:1:9: text after the (graph ...) form"},
      {"(grph (input x float64 ()))", "bad.graph:1:1: expected a (graph ...) form"},
      {"42", "expected a (graph ...) form"},
      {"(graph\n  (inptu x float64 ()))", "bad.graph:2:3: unknown form inptu"},
      {"(graph (input x float16 ()))", "bad.graph:1:8: unknown dtype float16"},
      {"(graph (input x float64 (3 -1)))", "bad size -1 in a shape"},
      {"(graph (input x float64 3))", "a shape is a list of sizes"},
      {"(graph (input x float64))", "expected (input NAME DTYPE (SHAPE) [DEVICE])"},
      {"(graph (input \"x\" float64 ()))", "an input's name must be a symbol"},
      {"(graph (input x float64 () gpu))", "bad device gpu"},
      {"(graph (input x float64 ()) (input x float64 ()))", "bad.graph:1:29: the name 'x' is already defined"},
      {"(graph (input x float64 ())\n (output (add x\n   (mul y x))))", "bad.graph:3:4: unknown name 'y'"},
      {"(graph (input x float64 ()) (output (frob x)))", "bad.graph:1:37: unknown op 'frob' (declare opaque ops with (opaque NAME))"},
      {"(graph (input x float64 (3)) (input y float64 (4))\n  (output (add x y)))", "bad.graph:2:11: add: shapes (3) and (4) do not broadcast"},
      {"(graph (input x float64 (3)) (output ((sum 1) x)))", "sum: axis 1 is out of range"},
      {"(graph (input x float64 (3)) (output ((sum x) x)))", "sum: bad parameters"},
      {"(graph (input x float64 (4)) (output ((split 0 2) x (constant int64 (2) (2 2)))))", "the expression has 2 outputs"},
      {"(graph (input x float64 (4)) (output (neg ((split 0 2) x (constant int64 (2) (2 2))))))", "argument 1 has 2 outputs"},
      {"(graph (input x float64 (4)) (output (nth 2 ((split 0 2) x (constant int64 (2) (2 2))))))", "nth: no output 2 (the expression has 2)"},
      {"(graph (input x float64 (4)) (define (a b c) ((split 0 2) x (constant int64 (2) (2 2)))))", "3 names for 2 outputs"},
      {"(graph (output (constant float64 (2) (1.0))))", "the shape (2) holds 2 values, 1 given"},
      {"(graph (output (constant int8 () (1.5))))", "value 1.5 is not of dtype int8"},
      {"(graph (output (constant bool () (2))))", "value 2 is not of dtype bool"},
      {"(graph (output (constant int8 () (300))))", "value 300 is not of dtype int8"},
      {"(graph (output (constant float32 (2) (1e40 1))))", "is not of dtype float32"},
      {"(graph (output (constant uint8 (2) (0 -1))))", "value -1 is not of dtype uint8"},
      {"(graph (output (constant int32 () (5000000000))))", "value 5000000000 is not of dtype int32"},
      {"(graph (output (constant float64 (?) ())))", "bad size ? in a shape"},
      {"(graph (output (constant float64 ())))", "expected (constant DTYPE (SHAPE) (VALUES...))"},
      {"(graph (output \"text\"))", "unexpected \"text\" in an expression"},
      {"(graph (output (nth x y)))", "expected (nth INDEX EXPR)"},
      {"(graph (opaque add))", "'add' is the name of a built-in op"},
      {"(graph (opaque f) (opaque f))", "opaque op 'f' is declared twice"},
      {"(graph (opaque f (outputs x)))", "(outputs N): N from 0 to 1024, not x"},
      {"(graph (opaque f (outputs 2000)))", "(outputs N): N from 0 to 1024, not 2000"},
      {"(graph (output (constant float64 (4611686018427387904 4) (1.0))))", "holds more values than a tensor can"},
      {"(graph (opaque f) (output (f)))", "f: an opaque op without inputs needs a declared output type"},
      {"(graph (define 5 1))", "a name must be a symbol, got 5"},
      {"(graph (output (add 1 . 2)))", "an expression must be a proper list"},
      {"(graph (output (add 1 300000000000000000000)))", "does not fit in 64 bits"},
      {"(graph (output ((composite 3) 1)))", "composite: expected integer parameters, then one (graph ...)"},
      {"(graph (output ((composite (graph (input a float64 (2)) (output a))) 1.0)))", "composite: the inner graph must be scalar: input 0 has 1 dimensions"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_read_error(bad[i].text, bad[i].msg);
  rg_clear_error(C);
  assert_null(rg_graph_load(C, "/nonexistent/x.graph"));
  assert_non_null(strstr(rg_errmsg(C), "cannot open"));
  rg_clear_error(C);
}

/* ------------------------------------------------------------------ inner graphs */

static rg_fgraph *scalar_fn(const char *a, const char *b, int variant) {
  rg_variable *x = rg_input(C, a, rg_type_scalar(RG_FLOAT64)), *y = rg_input(C, b, rg_type_scalar(RG_FLOAT64));
  rg_variable *out = variant ? rg_mul(x, rg_exp(y)) : rg_add(x, rg_exp(y));
  return rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &out, 0);
}

static void test_composite(void **st) {
  const rg_op *c1 = rg_op_composite(C, scalar_fn("a", "b", 0));
  const rg_op *c2 = rg_op_composite(C, scalar_fn("p", "q", 0)); /* same computation */
  const rg_op *c3 = rg_op_composite(C, scalar_fn("a", "b", 1));
  assert_non_null(c1);
  assert_true(rg_op_equal(c1, c2));
  assert_true(rg_op_hash(c1) == rg_op_hash(c2));
  assert_false(rg_op_equal(c1, c3));
  rg_variable *u = rg_input(C, "u", rg_type_new(RG_FLOAT64, 2, SHAPE(3, 1)));
  rg_variable *v = rg_input(C, "v", rg_type_new(RG_FLOAT64, 1, SHAPE(4)));
  rg_variable *r = rg_apply(NULL, c1, 2, (rg_variable *[]){u, v});
  assert_non_null(r);
  assert_string_equal(rg_type_str(r->type), "float64 (3 4)");
  rg_variable *w = rg_input(C, "w", rg_type_new(RG_FLOAT32, 1, SHAPE(4)));
  assert_null(rg_apply(NULL, c1, 2, (rg_variable *[]){u, w}));
  assert_non_null(strstr(rg_errmsg(C), "composite: input 1 has dtype float32, the inner graph expects float64"));
  rg_clear_error(C);
  assert_null(rg_apply(NULL, c1, 1, &u));
  assert_non_null(strstr(rg_errmsg(C), "composite: expected 2 inputs (the inner graph's), got 1"));
  rg_clear_error(C);
  /* the inner graph is a frozen copy */
  rg_fgraph *inner = rg_op_inner_graph(c1);
  assert_int_equal(rg_fgraph_merge(inner, NULL), RG_ERR_TYPE);
  rg_clear_error(C);
  assert_int_equal(rg_fgraph_replace(inner, rg_fgraph_input(inner, 0), rg_fgraph_input(inner, 1), "x"), RG_ERR_TYPE);
  assert_non_null(strstr(rg_errmsg(C), "the inner graph of an op cannot change"));
  rg_clear_error(C);
  rg_fgraph_release(inner);
  assert_int_equal(rg_fgraph_nnodes(inner), 2);
  assert_int_equal(rg_fgraph_check(inner), RG_OK);
  /* not scalar / not elementwise */
  rg_variable *m = rg_input(C, "m", rg_type_new(RG_FLOAT64, 1, SHAPE(2)));
  rg_variable *sm = rg_sum(m, -1, NULL);
  rg_variable *ss = rg_input(C, "ss", rg_type_scalar(RG_FLOAT64));
  rg_variable *ds = rg_exp(ss);
  assert_null(rg_op_composite(C, rg_fgraph_new(C, 1, &m, 1, &sm, 0)));
  assert_non_null(strstr(rg_errmsg(C), "must be scalar: input 0 has 1 dimensions"));
  rg_clear_error(C);
  assert_non_null(rg_op_composite(C, rg_fgraph_new(C, 1, &ss, 1, &ds, 0)));
  /* round trip through a file, with the inner graph in the head */
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){u, v}, 1, &r, 0);
  char *text = rg_graph_to_string(C, fg);
  assert_non_null(strstr(text, "((composite (graph (input a float64 ()) (input b float64 ()) (output (add a (exp b))))) u v)"));
  rg_fgraph *back = round_trip(fg);
  assert_true(rg_op_equal(rg_fgraph_output(back, 0)->owner->op, c1));
  /* nested composites */
  rg_variable *p = rg_input(C, "p", rg_type_scalar(RG_FLOAT64)), *q = rg_input(C, "q", rg_type_scalar(RG_FLOAT64));
  rg_variable *pq = rg_neg(rg_apply(NULL, c1, 2, (rg_variable *[]){p, q}));
  const rg_op *nested = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){p, q}, 1, &pq, 0));
  assert_non_null(nested);
  rg_variable *u2 = rg_input(C, "u", rg_type_new(RG_FLOAT64, 2, SHAPE(3, 1)));
  rg_variable *r2 = rg_apply(NULL, nested, 2, (rg_variable *[]){u2, u2});
  round_trip(rg_fgraph_new(C, 1, &u2, 1, &r2, 0));
  rg_variable **s = rg_infer_shape(C, r2->owner, 0);
  double k;
  assert_true(rg_constant_get_f64(s[0], &k) && k == 3);
}

static void test_op_from_graph(void **st) {
  rg_variable *A = rg_input(C, "A", rg_type_new(RG_FLOAT64, 2, SHAPE(-1, -1)));
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, SHAPE(-1)));
  rg_variable *o1 = rg_dot(A, x), *o2 = rg_sum(x, -1, NULL);
  const rg_op *op = rg_op_from_graph(C, rg_fgraph_new(C, 2, (rg_variable *[]){A, x}, 2, (rg_variable *[]){o1, o2}, 0));
  assert_non_null(op);
  assert_int_equal(op->nout, 2);
  rg_variable *B = rg_input(C, "B", rg_type_new(RG_FLOAT64, 2, SHAPE(3, 4)));
  rg_variable *y = rg_input(C, "y", rg_type_new(RG_FLOAT64, 1, SHAPE(4)));
  rg_node *n = rg_make_node(C, op, 2, (rg_variable *[]){B, y});
  assert_non_null(n);
  assert_string_equal(rg_type_str(n->outputs[0]->type), "float64 (?)");
  assert_null(rg_make_node(C, op, 2, (rg_variable *[]){y, B}));
  assert_non_null(strstr(rg_errmsg(C), "op_from_graph: input 0 of type float64 (4) does not fit the inner input's type float64 (? ?)"));
  rg_clear_error(C);
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){B, y}, 2, n->outputs, 0);
  round_trip(fg);
  rg_variable **s = rg_infer_shape(C, n, 0);
  assert_int_equal(s[0]->owner->op->code, RG_OP_SHAPE_I);
}

/* Every printed form of an inner-graph op reads back, integer parameters
 * (the outer-to-inner mapping of richer inner-graph ops) included; ops
 * differing only in them are different ops. */
static void test_inner_ints_read_back(void **st) {
  const char *text =
      "(graph (input x float64 (3)) (input y float64 (3))\n"
      " (output ((composite 3 -1 (graph (input a float64 ()) (input b float64 ()) (output (mul a b)))) x y))\n"
      " (output ((op_from_graph 0 2 (graph (input u float64 (3)) (output (exp u)))) x))\n"
      " (output ((op_from_graph (graph (input u float64 (3)) (output (exp u)))) x)))";
  rg_fgraph *fg = read_ok(text);
  const rg_op *c = rg_fgraph_output(fg, 0)->owner->op;
  assert_int_equal(c->nints, 2);
  assert_int_equal(c->ints[0], 3);
  assert_int_equal(c->ints[1], -1);
  const rg_op *f1 = rg_fgraph_output(fg, 1)->owner->op, *f2 = rg_fgraph_output(fg, 2)->owner->op;
  assert_false(rg_op_equal(f1, f2));
  rg_fgraph *back = round_trip(fg);
  assert_true(rg_op_equal(rg_fgraph_output(back, 0)->owner->op, c));
  assert_true(rg_op_equal(rg_fgraph_output(back, 1)->owner->op, f1));
  char *s1 = rg_graph_to_string(C, fg);
  assert_non_null(strstr(s1, "(composite 3 -1 (graph"));
  expect_read_error("(graph (output ((composite 1 (graph (input a float64 ()) (output a)) 2) 1.0)))",
                    "composite: expected integer parameters, then one (graph ...)");
  expect_read_error("(graph (output ((op_from_graph 1 x (graph (input a float64 ()) (output a))) 1.0)))",
                    "op_from_graph: expected integer parameters, then one (graph ...)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inner_ints_read_back),
      cmocka_unit_test(test_read_example),
      cmocka_unit_test(test_params_and_multi_outputs),
      cmocka_unit_test(test_constants_round_trip),
      cmocka_unit_test(test_sharing_and_names),
      cmocka_unit_test(test_deep_graphs),
      cmocka_unit_test(test_json_strings),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_composite),
      cmocka_unit_test(test_op_from_graph),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
