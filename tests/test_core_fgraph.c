/*
 * test_core_fgraph.c — FunctionGraph: construction and ownership errors,
 * clients, features and their callbacks, replace / replace_all with
 * validation, checkpoints and revert, the incrementally maintained order
 * (randomised against the invariant checker), clone, ancestors,
 * equal_computations, merge, the count of nodes by op, node types without
 * a node, and a 10^6-deep chain through all of them.
 */
#include "tests/testutil.h"

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
static const rg_type *vec(void) { return rg_type_new(RG_FLOAT64, 1, SHAPE(RG_DIM_UNKNOWN)); }
static rg_variable *in(const char *name) { return rg_input(C, name, vec()); }

static void ok(int rc) {
  if (rc != RG_OK) fail_msg("status %d: %s", rc, rg_errmsg(C));
}
static void checked(rg_fgraph *fg) { ok(rg_fgraph_check(fg)); }

static void expect_msg(const char *msg) {
  if (!strstr(rg_errmsg(C), msg)) fail_msg("error '%s' lacks '%s'", rg_errmsg(C), msg);
  rg_clear_error(C);
}

/* Every node after the owners of its inputs. */
static void assert_topological(size_t n, rg_node *const *order) {
  rg_memo *pos = rg_memo_new();
  for (size_t k = 0; k < n; k++) {
    for (int i = 0; i < order[k]->nin; i++) {
      rg_node *o = order[k]->inputs[i]->owner;
      if (o && !rg_memo_get(pos, o)) fail_msg("node %zu comes before its input's owner", k);
    }
    rg_memo_put(pos, order[k], order[k]);
  }
}

/* ------------------------------------------------------------------ construction */

static void test_build_and_clients(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *s = rg_add(x, y), *e = rg_exp(s), *m = rg_mul(s, e);
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 2, (rg_variable *[]){m, e}, 0);
  assert_non_null(fg);
  checked(fg);
  assert_int_equal(rg_fgraph_nnodes(fg), 3);
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  assert_int_equal(n, 3);
  assert_topological(n, order);
  assert_int_equal(s->nclients, 2);
  assert_int_equal(e->nclients, 2); /* mul and output 1 */
  assert_ptr_equal(s->owner->fgraph, fg);
  assert_true(rg_fgraph_contains(fg, x));
  /* a second graph over the same nodes is refused; a clone is fine */
  assert_null(rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &m, 0));
  expect_msg("belongs to another FunctionGraph");
  rg_fgraph *g2 = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &m, RG_FG_CLONE);
  assert_non_null(g2);
  checked(g2);
  assert_ptr_not_equal(rg_fgraph_output(g2, 0), m);
  assert_true(rg_equal_computations(1, &m, (rg_variable *[]){rg_fgraph_output(g2, 0)}, 2,
                                    (rg_variable *[]){x, y},
                                    (rg_variable *[]){rg_fgraph_input(g2, 0), rg_fgraph_input(g2, 1)}));
  checked(fg);
}

static void test_construction_errors(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *z = rg_add(x, y);
  assert_null(rg_fgraph_new(C, 1, &x, 1, &z, 0));
  expect_msg("FunctionGraph: missing input: variable 'y' (float64 (?)) is needed by add but is not an input");
  /* the failed attempt left nothing attached */
  assert_null(z->owner->fgraph);
  assert_null(x->fgraph);
  assert_int_equal(x->nclients, 0);
  assert_null(rg_fgraph_new(C, 2, (rg_variable *[]){x, x}, 1, &z, 0));
  expect_msg("is given twice");
  assert_null(rg_fgraph_new(C, 1, &z, 1, &z, 0));
  expect_msg("input 0");
  /* negative counts, counts without their arrays */
  assert_null(rg_fgraph_new(C, -1, &x, 1, &z, 0));
  expect_msg("a negative count");
  assert_null(rg_fgraph_new(C, 2, NULL, 1, &z, RG_FG_CLONE));
  expect_msg("a count without its array");
  assert_null(rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, NULL, 0));
  expect_msg("a count without its array");
  rg_variable *k = rg_scalar_float(C, 2);
  assert_null(rg_fgraph_new(C, 1, &k, 1, &z, 0));
  expect_msg("a constant, not a free variable");
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &z, 0);
  assert_non_null(fg);
  /* an output that is an input, and a constant output */
  assert_int_equal(rg_fgraph_add_output(fg, x, "test"), 1);
  assert_int_equal(rg_fgraph_add_output(fg, k, "test"), 2);
  checked(fg);
  /* NULL variables are named, unless a failed construction made them */
  rg_clear_error(C);
  assert_int_equal(rg_fgraph_add_output(fg, NULL, "test"), RG_ERR_TYPE);
  expect_msg("add_output: NULL variable");
  assert_int_equal(rg_fgraph_change_input(fg, z->owner, 0, NULL, "test"), RG_ERR_TYPE);
  expect_msg("change_input: NULL variable");
  rg_fgraph_release(fg);
  assert_null(z->owner->fgraph);
  assert_int_equal(x->nclients, 0);
  rg_clear_error(C);
  assert_null(rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 2, (rg_variable *[]){z, NULL}, 0));
  expect_msg("FunctionGraph: output 1 is NULL");
  assert_null(rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, (rg_variable *[]){rg_shape_i(z, 5)}, 0));
  expect_msg("shape_i: dimension 5 is out of range"); /* the construction's own error is kept */
  assert_non_null(rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &z, 0));
}

/* ------------------------------------------------------------------ features */

typedef struct events { char log[4096]; } events;

static void logf_(rg_feature *f, const char *s) {
  events *e = f->ud;
  strncat(e->log, s, sizeof e->log - strlen(e->log) - 1);
}
static void on_import(rg_fgraph *fg, rg_node *n, const char *reason, rg_feature *f) {
  logf_(f, rgk_sprintf("import %s/%s;", rg_op_name(n->op), reason));
}
static void on_prune(rg_fgraph *fg, rg_node *n, const char *reason, rg_feature *f) {
  logf_(f, rgk_sprintf("prune %s/%s;", rg_op_name(n->op), reason));
}
static void on_change(rg_fgraph *fg, rg_node *n, int i, rg_variable *old, rg_variable *new_,
                      const char *reason, rg_feature *f) {
  logf_(f, rgk_sprintf("change %s[%d]/%s;", n ? rg_op_name(n->op) : "output", i, reason));
}
static int on_attach(rg_fgraph *fg, rg_feature *f) {
  logf_(f, "attach;");
  return RG_OK;
}
static int refuse_exp;
/* Refuses graphs containing exp when refuse_exp is set. */
static int validate(rg_fgraph *fg, rg_feature *f) {
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
    if (refuse_exp && n->op->code == RG_OP_EXP)
      return rg_error(rg_fgraph_ctx(fg), RG_ERR_TYPE, "no exp allowed");
  return RG_OK;
}

static void test_features_replace_revert(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *a = rg_mul(x, y), *out = rg_neg(rg_add(a, x));
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &out, 0);
  events ev = {{0}};
  rg_feature f = {.name = "log", .ud = &ev, .on_attach = on_attach, .on_import = on_import,
                  .on_prune = on_prune, .on_change_input = on_change, .validate = validate};
  ok(rg_fgraph_attach(fg, &f));
  rg_fgraph *orig = rg_fgraph_clone(fg, NULL);
  size_t cp = rg_fgraph_checkpoint(fg);
  /* x * y  ->  exp(x) - y */
  rg_variable *b = rg_sub(rg_exp(x), y);
  ok(rg_fgraph_replace(fg, a, b, "rule1"));
  checked(fg);
  assert_string_equal(ev.log, "attach;import exp/rule1;import sub/rule1;change add[0]/rule1;prune mul/rule1;");
  assert_null(a->owner->fgraph);
  ev.log[0] = 0;
  ok(rg_fgraph_revert(fg, cp));
  checked(fg);
  assert_string_equal(ev.log, "import mul/revert;change add[0]/revert;prune sub/revert;prune exp/revert;");
  assert_ptr_equal(a->owner->fgraph, fg);
  assert_true(rg_equal_computations(1, (rg_variable *[]){rg_fgraph_output(fg, 0)},
                                    (rg_variable *[]){rg_fgraph_output(orig, 0)}, 2,
                                    (rg_variable *[]){x, y},
                                    (rg_variable *[]){rg_fgraph_input(orig, 0), rg_fgraph_input(orig, 1)}));
  /* replace_all: a validation failure reverts everything */
  refuse_exp = 1;
  rg_variable *olds[2] = {a, out->owner->inputs[0]};
  rg_variable *news[2] = {rg_exp(y), rg_add(rg_exp(y), x)};
  ev.log[0] = 0;
  assert_int_equal(rg_fgraph_replace_all(fg, 2, olds, news, "rule2"), RG_ERR_TYPE);
  expect_msg("no exp allowed");
  checked(fg);
  assert_true(rg_equal_computations(1, (rg_variable *[]){rg_fgraph_output(fg, 0)},
                                    (rg_variable *[]){rg_fgraph_output(orig, 0)}, 2,
                                    (rg_variable *[]){x, y},
                                    (rg_variable *[]){rg_fgraph_input(orig, 0), rg_fgraph_input(orig, 1)}));
  refuse_exp = 0;
  ok(rg_fgraph_detach(fg, &f));
  assert_int_equal(rg_fgraph_detach(fg, &f), RG_ERR_NAME);
  rg_clear_error(C);
}

static void test_replace_errors(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *s = rg_add(x, y), *out = rg_exp(s);
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &out, 0);
  /* type mismatch: different dtype, or less specific static shape */
  rg_variable *f32 = rg_input(C, "f", rg_type_new(RG_FLOAT32, 1, SHAPE(-1)));
  assert_int_equal(rg_fgraph_replace(fg, s, f32, "bad"), RG_ERR_TYPE);
  expect_msg("type mismatch: cannot replace float64 (?) by float32 (?)");
  rg_variable *k3 = rg_input(C, "k3", rg_type_new(RG_FLOAT64, 1, SHAPE(3)));
  rg_variable *t3 = rg_exp(k3);
  rg_variable *w = in("w");
  rg_fgraph *g3 = rg_fgraph_new(C, 2, (rg_variable *[]){k3, w}, 1, &t3, 0);
  assert_int_equal(rg_fgraph_replace(g3, k3, w, "bad"), RG_ERR_TYPE);
  expect_msg("cannot replace float64 (3) by float64 (?)");
  /* a more specific type is fine (k3 is in g3 though, so use a fresh one) */
  rg_variable *z3 = rg_input(C, "z3", rg_type_new(RG_FLOAT64, 1, SHAPE(5)));
  assert_int_equal(rg_fgraph_replace(fg, s, z3, "ok"), RG_ERR_NAME);
  expect_msg("missing input: variable 'z3'");
  /* cycles */
  assert_int_equal(rg_fgraph_replace(fg, x, rg_exp(x), "cycle"), RG_ERR_TYPE);
  expect_msg("the replacement depends on the variable it replaces");
  assert_int_equal(rg_fgraph_replace(fg, s, rg_neg(out), "cycle"), RG_ERR_TYPE);
  expect_msg("depends on the variable it replaces");
  assert_int_equal(rg_fgraph_change_input(fg, s->owner, 0, out, "cycle"), RG_ERR_TYPE);
  expect_msg("(a cycle)");
  assert_int_equal(rg_fgraph_replace(fg, in("w"), x, "absent"), RG_ERR_TYPE);
  expect_msg("is not in the graph");
  checked(fg);
  checked(g3);
}

/* ------------------------------------------------------------------ the incremental order */

/* Random rewrites on a random DAG: replace a node's output by a new
 * expression over random earlier and later variables (any that does not
 * depend on it), check the invariants after every step, revert half. */
static void test_order_randomised(void **st) {
  srand(12345);
  enum { NIN = 4, NNODES = 300, STEPS = 400 };
  rg_variable *ins[NIN], *vars[NIN + NNODES];
  for (int i = 0; i < NIN; i++) vars[i] = ins[i] = in(rgk_sprintf("i%d", i));
  int nv = NIN;
  for (int k = 0; k < NNODES; k++) {
    rg_variable *a = vars[rand() % nv], *b = vars[rand() % nv];
    vars[nv++] = rand() % 3 ? rg_add(a, b) : rg_mul(a, rg_exp(b));
  }
  rg_variable *outs[3] = {vars[nv - 1], vars[nv - 2], vars[nv / 2]};
  rg_fgraph *fg = rg_fgraph_new(C, NIN, ins, 3, outs, 0);
  checked(fg);
  rg_fgraph *orig = rg_fgraph_clone(fg, NULL);
  size_t cp = rg_fgraph_checkpoint(fg);
  int done = 0, cycles = 0;
  for (int s = 0; s < STEPS; s++) {
    size_t n;
    rg_node *const *order = rg_fgraph_toposort(fg, &n);
    rg_node *victim = order[rand() % n];
    rg_node *other = order[rand() % n];
    rg_variable *a = other->outputs[0], *b = ins[rand() % NIN];
    rg_variable *repl = rand() % 2 ? rg_add(rg_sin(a), b) : rg_mul(b, rg_cos(rg_add(a, a)));
    int rc = rg_fgraph_replace(fg, victim->outputs[0], repl, "random");
    if (rc == RG_OK) done++;
    else {
      expect_msg("depends on the variable it replaces");
      cycles++;
    }
    checked(fg);
    order = rg_fgraph_toposort(fg, &n);
    assert_topological(n, order);
  }
  assert_true(done > STEPS / 2);
  assert_true(cycles > 0);
  ok(rg_fgraph_revert(fg, cp));
  checked(fg);
  rg_variable *a_outs[3], *b_outs[3], *b_ins[NIN];
  for (int k = 0; k < 3; k++) a_outs[k] = rg_fgraph_output(fg, k), b_outs[k] = rg_fgraph_output(orig, k);
  for (int i = 0; i < NIN; i++) b_ins[i] = rg_fgraph_input(orig, i);
  assert_true(rg_equal_computations(3, a_outs, b_outs, NIN, ins, b_ins));
}

/* Repeated insertion at one spot exhausts label gaps and forces relabels. */
static void test_order_relabel(void **st) {
  rg_variable *x = in("x");
  rg_variable *head = rg_exp(x), *tail = rg_neg(head);
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &tail, 0);
  rg_variable *cur = head;
  for (int k = 0; k < 3000; k++) {
    /* insert a node between tail's input and tail, always at the same spot */
    rg_variable *mid = rg_sin(cur);
    ok(rg_fgraph_change_input(fg, tail->owner, 0, mid, "grow"));
    cur = mid;
  }
  checked(fg);
  assert_int_equal(rg_fgraph_nnodes(fg), 3002);
}

/* rg_fgraph_sort_nodes against the order itself: sorted, reversed, nearly
 * sorted and shuffled lists of every length around the sort's cut-offs. */
static void test_sort_nodes(void **st) {
  rg_variable *x = in("x"), *cur = x;
  for (int k = 0; k < 1000; k++) cur = rg_exp(cur);
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &cur, 0);
  size_t total;
  rg_node *const *order = rg_fgraph_toposort(fg, &total);
  assert_int_equal(total, 1000);
  static const size_t lens[] = {0, 1, 2, 3, 23, 24, 25, 26, 100, 1000};
  rg_node **v = malloc(total * sizeof *v);
  unsigned seed = 7;
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
    size_t n = lens[li];
    for (int kind = 0; kind < 4; kind++) {
      for (size_t i = 0; i < n; i++) v[i] = order[kind == 1 ? n - 1 - i : i];
      if (kind == 2 && n > 1) { /* one node moved from the front to the back */
        rg_node *t = v[0];
        memmove(v, v + 1, (n - 1) * sizeof *v);
        v[n - 1] = t;
      }
      if (kind == 3)
        for (size_t i = n; i > 1; i--) {
          size_t j = (size_t)rand_r(&seed) % i;
          rg_node *t = v[i - 1];
          v[i - 1] = v[j];
          v[j] = t;
        }
      rg_fgraph_sort_nodes(v, n);
      for (size_t i = 0; i < n; i++)
        if (v[i] != order[i]) fail_msg("length %zu, case %d: position %zu out of order", n, kind, i);
    }
  }
  free(v);
}

/* ------------------------------------------------------------------ clone, ancestors, equality */

static void test_clone_memo_ancestors(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *k = rg_scalar_float(C, 2.0);
  rg_variable *d = rg_mul(rg_add(x, y), k);
  rg_variable *out = rg_add(d, rg_exp(d)); /* d shared */
  size_t n;
  rg_node **order = rg_toposort(2, (rg_variable *[]){x, y}, 1, &out, &n);
  assert_int_equal(n, 4);
  assert_topological(n, order);
  /* blocking at d */
  order = rg_toposort(1, &d, 1, &out, &n);
  assert_int_equal(n, 2);
  rg_variable **anc = rg_ancestors(1, &out, 0, NULL, &n);
  assert_int_equal(n, 7); /* x y x+y k d exp(d) out */
  rg_variable **gi = rg_graph_inputs(1, &out, &n);
  assert_int_equal(n, 3);
  assert_true(gi[0] == x || gi[0] == y || gi[0] == k);
  (void)anc;
  /* clone with a replacement in the memo: x -> z */
  rg_variable *z = in("z");
  rg_memo *memo = rg_memo_new();
  rg_memo_put(memo, x, z);
  rg_variable *c;
  ok(rg_clone(C, 0, NULL, 1, &out, memo, 0, &c));
  assert_ptr_not_equal(c, out);
  assert_true(rg_equal_computations(1, &c, &out, 2, (rg_variable *[]){z, y}, (rg_variable *[]){x, y}));
  assert_false(rg_equal_computations(1, &c, &out, 0, NULL, NULL));
  assert_ptr_equal(rg_memo_get(memo, y), y); /* shared */
  /* shared subgraph stays shared in the copy */
  assert_ptr_equal(c->owner->inputs[0], c->owner->inputs[1]->owner->inputs[0]);
}

static void test_equal_computations(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *a = rg_add(x, rg_scalar_float(C, 1.0)), *b = rg_add(x, rg_scalar_float(C, 1.0));
  assert_true(rg_equal_computations(1, &a, &b, 0, NULL, NULL));
  rg_variable *c = rg_add(x, rg_scalar_float(C, 2.0));
  assert_false(rg_equal_computations(1, &a, &c, 0, NULL, NULL));
  rg_variable *d = rg_add(x, rg_constant_scalar(C, RG_FLOAT64, 1.0)); /* strong, not weak */
  assert_false(rg_equal_computations(1, &a, &d, 0, NULL, NULL));
  rg_variable *e = rg_add(y, rg_scalar_float(C, 1.0));
  assert_false(rg_equal_computations(1, &a, &e, 0, NULL, NULL));
  assert_true(rg_equal_computations(1, &a, &e, 1, &x, &y));
  /* sharing must correspond: (s, s) vs (s1, s2) with s1, s2 equal but distinct */
  rg_variable *s = rg_exp(x), *s1 = rg_exp(x), *s2 = rg_exp(y);
  rg_variable *p = rg_mul(s, s), *q = rg_mul(s1, s2);
  assert_false(rg_equal_computations(1, &p, &q, 1, &x, &y));
  assert_false(rg_equal_computations(1, &p, &q, 0, NULL, NULL));
  rg_variable *q2 = rg_mul(s1, s1);
  assert_true(rg_equal_computations(1, &p, &q2, 0, NULL, NULL));
}

/* ------------------------------------------------------------------ merge */

static void test_merge(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *a1 = rg_add(x, rg_scalar_float(C, 1.0)), *a2 = rg_add(x, rg_scalar_float(C, 1.0));
  rg_variable *e1 = rg_exp(a1), *e2 = rg_exp(a2);
  rg_variable *out1 = rg_mul(e1, y), *out2 = rg_mul(e2, y);
  rg_variable *other = rg_add(x, rg_scalar_float(C, 2.0));
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 3, (rg_variable *[]){out1, out2, other}, 0);
  assert_int_equal(rg_fgraph_nnodes(fg), 7);
  size_t merged;
  ok(rg_fgraph_merge(fg, &merged));
  checked(fg);
  assert_int_equal(rg_fgraph_nnodes(fg), 4);
  assert_ptr_equal(rg_fgraph_output(fg, 0), rg_fgraph_output(fg, 1));
  assert_int_equal(merged, 4); /* one constant, three nodes */
  ok(rg_fgraph_merge(fg, &merged));
  assert_int_equal(merged, 0);
}

/* ------------------------------------------------------------------ deep graphs */

static void test_million_deep_chain(void **st) {
  enum { N = 1000000 };
  rg_variable *x = in("x");
  rg_variable *v = x;
  for (int k = 0; k < N; k++) v = k % 2 ? rg_exp(v) : rg_add(v, x);
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &v, 0);
  assert_non_null(fg);
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  assert_int_equal(n, N);
  assert_ptr_equal(order[N - 1], v->owner);
  rg_node **fresh = rg_toposort(1, &x, 1, &v, &n);
  assert_int_equal(n, N);
  assert_ptr_equal(fresh[0], order[0]);
  rg_fgraph *cl = rg_fgraph_clone(fg, NULL);
  assert_int_equal(rg_fgraph_nnodes(cl), N);
  assert_true(rg_equal_computations(1, &v, (rg_variable *[]){rg_fgraph_output(cl, 0)}, 1, &x,
                                    (rg_variable *[]){rg_fgraph_input(cl, 0)}));
  size_t merged;
  ok(rg_fgraph_merge(cl, &merged));
  assert_int_equal(merged, 0);
  size_t na;
  rg_ancestors(1, &v, 0, NULL, &na);
  assert_int_equal(na, N + 1);
  checked(cl);
}


/* ------------------------------------------------------------------ counts by op, types without a node */

static void test_count_op(void **st) {
  rg_variable *x = in("x"), *y = in("y");
  rg_variable *a = rg_exp(x), *b = rg_exp(x), *s = rg_add(a, b), *m = rg_mul(s, y);
  rg_fgraph *fg = rg_fgraph_new(C, 2, (rg_variable *[]){x, y}, 1, &m, 0);
  assert_non_null(fg);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_EXP), 2);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_ADD), 1);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_SCAN), 0);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_COUNT), 0); /* out of range: none */
  assert_int_equal(rg_fgraph_count_op(fg, (rg_opcode)-1), 0);
  /* merging prunes one exp; a replacement imports a log and prunes the add */
  size_t merged;
  ok(rg_fgraph_merge(fg, &merged));
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_EXP), 1);
  ok(rg_fgraph_replace(fg, m->owner->inputs[0], rg_log(y), "test"));
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_ADD), 0);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_EXP), 0);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_LOG), 1);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_MUL), 1);
  checked(fg);
  rg_fgraph_release(fg);
  assert_int_equal(rg_fgraph_count_op(fg, RG_OP_MUL), 0);
}

static void test_node_types(void **st) {
  rg_variable *x = in("x");
  rg_variable *r = rg_input(C, "r", rg_type_new(RG_FLOAT32, 2, SHAPE(3, 4)));
  const rg_type *t[4] = {0};
  /* the types rg_make_node gives, broadcasting included */
  assert_int_equal(rg_node_types(C, rg_op_get(RG_OP_ADD), 2, (rg_variable *[]){x, r}, 4, t), 1);
  rg_node *n = rg_make_node(C, rg_op_get(RG_OP_ADD), 2, (rg_variable *[]){x, r});
  assert_non_null(n);
  assert_true(rg_type_equal(t[0], n->outputs[0]->type));
  /* several outputs, fewer slots than outputs: the count, the first types */
  rg_variable *sizes = rg_constant_data(C, RG_INT64, 1, SHAPE(2), (const int64_t[]){1, 3});
  const rg_type *one[1] = {0};
  assert_int_equal(rg_node_types(C, rg_op_split(1, 2), 2, (rg_variable *[]){r, sizes}, 1, one), 2);
  assert_true(rg_type_equal(one[0], rg_type_new(RG_FLOAT32, 2, SHAPE(3, 1))));
  /* errors: as rg_make_node's, with its message; a NULL input, no message */
  assert_int_equal(rg_node_types(C, rg_op_get(RG_OP_EXP), 2, (rg_variable *[]){x, x}, 4, t), -1);
  expect_msg("at most 1 input");
  assert_int_equal(rg_node_types(C, NULL, 1, &x, 4, t), -1);
  expect_msg("invalid op");
  assert_int_equal(rg_node_types(C, rg_op_get(RG_OP_EXP), 1, (rg_variable *[]){NULL}, 4, t), -1);
  assert_int_equal(rg_errcode(C), RG_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_and_clients),
      cmocka_unit_test(test_construction_errors),
      cmocka_unit_test(test_features_replace_revert),
      cmocka_unit_test(test_replace_errors),
      cmocka_unit_test(test_order_randomised),
      cmocka_unit_test(test_order_relabel),
      cmocka_unit_test(test_sort_nodes),
      cmocka_unit_test(test_clone_memo_ancestors),
      cmocka_unit_test(test_equal_computations),
      cmocka_unit_test(test_merge),
      cmocka_unit_test(test_count_op),
      cmocka_unit_test(test_node_types),
      cmocka_unit_test(test_million_deep_chain),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
