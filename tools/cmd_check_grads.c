/*
 * cmd_check_grads.c — `relgraph check-grads`: symbolic gradients against
 * finite differences (rg_verify_grad).
 *
 *   relgraph check-grads --ops [--op NAME]... [--dtype D] [--trials N] [--seed S]
 *   relgraph check-grads GRAPH --wrt NAME... [--size N] [--trials N] [--seed S]
 *
 * With --ops, every differentiable op of the op table is checked on random
 * inputs of random shapes, broadcasting included, as `check-rules --std`
 * checks rules: each op has a template (a graph file with holes for its
 * shapes, axes and sizes) that a trial fills at random, in float64 and
 * float32 (or the --dtype given).  With a graph file, the gradients of its
 * first output with respect to the named inputs are checked at random
 * points (the inputs keep their declared dtypes; every unknown size of a
 * point is one size, --size or drawn from 1..4, as `run --size` gives).
 * A point where the graph itself cannot be evaluated (a shape error, a
 * loop longer than its sequence) is reported apart: it says nothing of
 * the gradient.
 *
 * Inputs are drawn from a grid in [0.5, 1.5): values 0.502 + 0.004 k, no
 * two elements of one case equal, so no two are closer than 0.004 and none
 * is within 0.002 of the kinks of floor, ceil and round (0.5, 1, 1.5).
 * Finite differences (steps of 1e-6, or 1e-3 in float32) then never cross
 * a kink of maximum, max, round and the like, and a failure is a wrong
 * gradient.  Of the failing
 * cases the smallest (fewest input elements) is printed as a graph file,
 * with the error.  Exit status: 0 when every check passed, 1 when one
 * failed, 2 for bad usage, 3 for a graph that does not load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "relgraph/backend.h"
#include "tools/cli.h"

void usage_check_grads(void) {
  printf("usage: relgraph check-grads --ops [OPTIONS]\n"
         "       relgraph check-grads GRAPH --wrt NAME... [OPTIONS]\n"
         "  --ops          check the gradient of every differentiable op on random graphs\n"
         "  --op NAME      with --ops: only this op (repeatable)\n"
         "  --wrt NAME...  with GRAPH: inputs to differentiate against (after GRAPH, several\n"
         "                 names may follow one --wrt; the option is repeatable)\n"
         "  --size N       with GRAPH: the size of its unknown dimensions (default: drawn, 1 to 4)\n"
         "  --dtype D      with --ops: float64 or float32 (default: both; a graph keeps its dtypes)\n"
         "  --trials N     random cases per op and dtype, or points of GRAPH (default 10)\n"
         "  --seed S       seed of the random draws (default 1)\n");
}

typedef struct rng { uint64_t s; } rng;
static uint64_t rnd(rng *r) { return rg_random_next(&r->s); }
static int below(rng *r, int n) { return (int)(rnd(r) % (uint64_t)n); }

/* ------------------------------------------------------------------ random shapes as text */

typedef struct shape { int nd; int64_t d[4]; } shape;

static shape random_shape(rng *r, int lo, int hi) {
  shape s = {lo + below(r, hi - lo + 1), {0}};
  for (int k = 0; k < s.nd; k++) s.d[k] = 1 + below(r, 4);
  return s;
}

/* A shape that broadcasts against s: fewer leading dims, or 1s. */
static shape broadcasting(rng *r, shape s) {
  shape b = s;
  int drop = below(r, s.nd + 1);
  if (below(r, 2)) drop = 0;
  b.nd = s.nd - drop;
  for (int k = 0; k < b.nd; k++) b.d[k] = below(r, 3) == 0 ? 1 : s.d[k + drop];
  return b;
}

static const char *shape_text(shape s) {
  char *t = cli_sprintf("(");
  for (int k = 0; k < s.nd; k++) t = cli_sprintf("%s%s%lld", t, k ? " " : "", (long long)s.d[k]);
  return cli_sprintf("%s)", t);
}

static const char *in(const char *name, const char *dt, shape s) {
  return cli_sprintf("(input %s %s %s) ", name, dt, shape_text(s));
}

static int64_t numel(shape s) {
  int64_t n = 1;
  for (int k = 0; k < s.nd; k++) n *= s.d[k];
  return n;
}

/* ------------------------------------------------------------------ op templates */

/* A template writes a graph file for one random case. */
typedef const char *(*tmpl_fn)(rng *r, const char *op, const char *dt);

static const char *unary(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 3);
  return cli_sprintf("(graph %s(output (%s x)))", in("x", dt, s), op);
}

static const char *binary(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 3), b = broadcasting(r, s);
  bool swap = below(r, 2);
  return cli_sprintf("(graph %s%s(output (%s %s)))", in("x", dt, swap ? b : s), in("y", dt, swap ? s : b), op,
                     "x y");
}

/* x // y and x % y jump where x / y is an integer: the divisor is kept
 * above x so that the check stays where they are smooth. */
static const char *division_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 3), b = broadcasting(r, s);
  return cli_sprintf("(graph %s%s(output (%s x (add y 2.0))))", in("x", dt, s), in("y", dt, b), op);
}

static const char *clip_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 3);
  return cli_sprintf("(graph %s%s%s(output (clip x lo hi)))", in("x", dt, s), in("lo", dt, broadcasting(r, s)),
                     in("hi", dt, broadcasting(r, s)));
}

static const char *switch_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 3);
  return cli_sprintf("(graph %s%s(output (switch (lt x y) (mul x 2.0) y)))", in("x", dt, s),
                     in("y", dt, broadcasting(r, s)));
}

static const char *cast_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 3);
  return cli_sprintf("(graph %s(output (mul ((cast float64) x) 3.0)))", in("x", dt, s));
}

static const char *dimshuffle_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3);
  int perm[4] = {0, 1, 2, 3};
  for (int k = s.nd - 1; k > 0; k--) {
    int j = below(r, k + 1), t = perm[k];
    perm[k] = perm[j], perm[j] = t;
  }
  const char *order = "";
  int at = below(r, s.nd + 1);
  for (int k = 0; k <= s.nd; k++) {
    if (k == at) order = cli_sprintf("%s x", order);
    if (k < s.nd) order = cli_sprintf("%s %d", order, perm[k]);
  }
  return cli_sprintf("(graph %s(output ((dimshuffle%s) x)))", in("x", dt, s), order);
}

static const char *reshape_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3);
  if (!strcmp(op, "flatten")) return cli_sprintf("(graph %s(output ((flatten 1) x)))", in("x", dt, s));
  return cli_sprintf("(graph %s(output ((reshape 2) x (constant int64 (2) (1 %lld)))))", in("x", dt, s),
                     (long long)numel(s));
}

static const char *alloc_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3), v = broadcasting(r, s);
  const char *dims = "";
  for (int k = 0; k < s.nd; k++) dims = cli_sprintf("%s %lld", dims, (long long)s.d[k]);
  return cli_sprintf("(graph %s(output (alloc v%s)))", in("v", dt, v), dims);
}

static const char *join_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3), t = s;
  int axis = below(r, s.nd);
  t.d[axis] = 1 + below(r, 3);
  return cli_sprintf("(graph %s%s(output ((join %d) x y)))", in("x", dt, s), in("y", dt, t), axis);
}

static const char *split_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3);
  int axis = below(r, s.nd);
  s.d[axis] += 1;
  int64_t a = 1 + below(r, (int)s.d[axis] - 1);
  return cli_sprintf("(graph %s(output (nth %d ((split %d 2) x (constant int64 (2) (%lld %lld))))))",
                     in("x", dt, s), below(r, 2), axis, (long long)a, (long long)(s.d[axis] - a));
}

/* A random slice of the first dimension: its entry and its length. */
static const char *slice_of(rng *r, int64_t n, int64_t *len) {
  int64_t lo = below(r, (int)n), hi = lo + 1 + below(r, (int)(n - lo));
  *len = hi - lo;
  return cli_sprintf("(%lld %lld)", (long long)lo, (long long)hi);
}

static const char *subtensor_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3);
  int64_t len;
  const char *e = slice_of(r, s.d[0], &len);
  shape y = s;
  y.d[0] = len;
  if (!strcmp(op, "subtensor")) return cli_sprintf("(graph %s(output ((subtensor %s) x)))", in("x", dt, s), e);
  return cli_sprintf("(graph %s%s(output ((%s %s) x y)))", in("x", dt, s), in("y", dt, broadcasting(r, y)), op, e);
}

static const char *make_vector_t(rng *r, const char *op, const char *dt) {
  shape z = {0, {0}};
  return cli_sprintf("(graph %s%s(output ((make_vector %s) a b a)))", in("a", dt, z), in("b", dt, z), dt);
}

static const char *reduce_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3);
  if (below(r, 3) == 0) return cli_sprintf("(graph %s(output (%s x)))", in("x", dt, s), op);
  const char *axes = "";
  for (int k = 0; k < s.nd; k++)
    if (below(r, 2) || (!axes[0] && k == s.nd - 1)) axes = cli_sprintf("%s %d", axes, k);
  return cli_sprintf("(graph %s(output ((%s%s) x)))", in("x", dt, s), op, axes);
}

static const char *softmax_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 1, 3);
  return cli_sprintf("(graph %s(output ((%s %d) x)))", in("x", dt, s), op, below(r, s.nd));
}

static const char *dot_t(rng *r, const char *op, const char *dt) {
  int m = 1 + below(r, 4), k = 1 + below(r, 4), n = 1 + below(r, 4);
  shape a = below(r, 2) ? (shape){2, {m, k}} : (shape){1, {k}};
  shape b = below(r, 2) ? (shape){2, {k, n}} : (shape){1, {k}};
  return cli_sprintf("(graph %s%s(output (dot a b)))", in("a", dt, a), in("b", dt, b));
}

/* batched_dot: each operand a matrix or a vector per batch index. */
static const char *batched_dot_t(rng *r, const char *op, const char *dt) {
  int64_t nb = 1 + below(r, 3), m = 1 + below(r, 4), k = 1 + below(r, 4), n = 1 + below(r, 4);
  shape a = below(r, 2) ? (shape){3, {nb, m, k}} : (shape){2, {nb, k}};
  shape b = below(r, 2) ? (shape){3, {nb, k, n}} : (shape){2, {nb, k}};
  return cli_sprintf("(graph %s%s(output (%s a b)))", in("a", dt, a), in("b", dt, b), op);
}

static const char *outer_t(rng *r, const char *op, const char *dt) {
  shape a = {1, {1 + below(r, 4)}}, b = {1, {1 + below(r, 4)}};
  return cli_sprintf("(graph %s%s(output (outer a b)))", in("a", dt, a), in("b", dt, b));
}

static const char *blas3_t(rng *r, const char *op, const char *dt) {
  int64_t m = 1 + below(r, 4), k = 1 + below(r, 4), n = 1 + below(r, 4);
  shape z = {0, {0}};
  const char *s = in("alpha", dt, z), *b = in("beta", dt, z);
  if (!strcmp(op, "gemm"))
    return cli_sprintf("(graph %s%s%s%s%s(output (gemm z alpha x y beta)))", in("z", dt, (shape){2, {m, n}}), s,
                       in("x", dt, (shape){2, {m, k}}), in("y", dt, (shape){2, {k, n}}), b);
  if (!strcmp(op, "gemv"))
    return cli_sprintf("(graph %s%s%s%s%s(output (gemv y alpha A x beta)))", in("y", dt, (shape){1, {m}}), s,
                       in("A", dt, (shape){2, {m, k}}), in("x", dt, (shape){1, {k}}), b);
  return cli_sprintf("(graph %s%s%s%s(output (ger A alpha x y)))", in("A", dt, (shape){2, {m, n}}), s,
                     in("x", dt, (shape){1, {m}}), in("y", dt, (shape){1, {n}}));
}

static const char *ifelse_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 2);
  return cli_sprintf("(graph %s%s(output (nth 0 (ifelse %s (exp x) (mul x y)))))", in("x", dt, s),
                     in("y", dt, broadcasting(r, s)), below(r, 2) ? "(lt 1 2)" : "(gt 1 2)");
}

static const char *inner_t(rng *r, const char *op, const char *dt) {
  shape s = random_shape(r, 0, 2);
  if (!strcmp(op, "composite"))
    return cli_sprintf("(graph %s%s(output ((composite (graph (input a %s ()) (input b %s ()) "
                       "(output (mul (exp a) (add a b))))) x y)))",
                       in("x", dt, s), in("y", dt, broadcasting(r, s)), dt, dt);
  return cli_sprintf("(graph %s(output ((op_from_graph (graph %s(output (tanh (mul u u))))) x)))", in("x", dt, s),
                     in("u", dt, s));
}

/* A loop: a sit-sot or a mit-sot state over a sequence read at one or
 * two taps, a non-sequence, forwards or backwards, the whole trace or its
 * last row read. */
static const char *scan_t(rng *r, const char *op, const char *dt) {
  (void)op;
  int64_t d = 1 + below(r, 3), steps = 1 + below(r, 4);
  bool two_taps = below(r, 2), mit = below(r, 2), back = below(r, 2), last = below(r, 2);
  int64_t rows = steps + two_taps;
  const char *state = mit ? "(h0 (taps -2 -1))" : "h0";
  const char *params = cli_sprintf("(%s %s w)", two_taps ? "x0 x1" : "x0", mit ? "h2 h1" : "h1");
  const char *step = cli_sprintf("(tanh (add (mul h1 w) %s%s))", two_taps ? "(mul x0 x1)" : "x0",
                                 mit ? " (mul 0.5 h2)" : "");
  const char *loop = cli_sprintf("(scan (lambda %s %s) (sequences %s) (outputs-info %s) (non-sequences w)%s)", params,
                                 step, two_taps ? "(x (taps 0 1))" : "x", state, back ? " (go-backwards #t)" : "");
  return cli_sprintf("(graph (input x %s (%lld %lld)) (input h0 %s (%s%lld)) (input w %s (%lld)) (output %s))", dt,
                     (long long)rows, (long long)d, dt, mit ? "2 " : "", (long long)d, dt, (long long)d,
                     last ? cli_sprintf("((subtensor -1) %s)", loop) : loop);
}

typedef struct opcase { const char *op; tmpl_fn t; } opcase;

static const opcase cases[] = {
    {"add", binary}, {"mul", binary}, {"sub", binary}, {"true_div", binary}, {"int_div", division_t},
    {"mod", division_t}, {"neg", unary}, {"abs", unary}, {"exp", unary}, {"log", unary}, {"log1p", unary},
    {"expm1", unary}, {"sqrt", unary}, {"sqr", unary}, {"pow", binary}, {"sin", unary}, {"cos", unary},
    {"tanh", unary}, {"sigmoid", unary}, {"softplus", unary}, {"erf", unary}, {"maximum", binary},
    {"minimum", binary}, {"floor", unary}, {"ceil", unary}, {"round", unary}, {"sign", unary},
    {"clip", clip_t}, {"switch", switch_t}, {"cast", cast_t}, {"identity", unary}, {"second", binary},
    {"dimshuffle", dimshuffle_t}, {"reshape", reshape_t}, {"flatten", reshape_t}, {"alloc", alloc_t},
    {"make_vector", make_vector_t}, {"join", join_t}, {"split", split_t}, {"subtensor", subtensor_t},
    {"inc_subtensor", subtensor_t}, {"set_subtensor", subtensor_t}, {"sum", reduce_t}, {"prod", reduce_t},
    {"max", reduce_t}, {"min", reduce_t}, {"mean", reduce_t}, {"softmax", softmax_t},
    {"log_softmax", softmax_t}, {"dot", dot_t}, {"outer", outer_t}, {"gemm", blas3_t}, {"gemv", blas3_t},
    {"ger", blas3_t}, {"batched_dot", batched_dot_t}, {"ifelse", ifelse_t}, {"composite", inner_t}, {"op_from_graph", inner_t},
    {"scan", scan_t},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* ------------------------------------------------------------------ checking */

typedef struct args {
  bool ops;
  const char *graph;
  const char *names[64];         /* --op names with --ops, --wrt names with a graph */
  int nnames;
  bool op_named, wrt_named;
  const char *dtype;
  int64_t trials, seed, size;    /* size: of unknown dimensions (0: drawn) */
} args;

/* A failing case: its graph text, the point (its inputs' values), error
 * and size. */
typedef struct failure { const char *text, *point, *msg; int64_t elements; } failure;

/* The grid points one case has not used yet. */
#define GRID 250
typedef struct pool { bool used[GRID]; int left; } pool;

static double grid_value(rng *r, pool *p) {
  if (p->left == 0) return 0.502 + 0.004 * below(r, GRID); /* a case this large may repeat */
  int k = below(r, GRID);
  while (p->used[k]) k = (k + 1) % GRID;
  p->used[k] = true;
  p->left--;
  return 0.502 + 0.004 * k;
}

/* A value of input x's type; its unknown dimensions have size `unknown`.
 * NULL, with an error in C, when no memory can hold it. */
static rg_tensor *draw(rg_ctx *C, rng *r, pool *p, const rg_variable *x, int64_t unknown, int64_t *elements) {
  const rg_type *t = x->type;
  int64_t shape[RG_MAX_NDIM];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d] >= 0 ? t->shape[d] : unknown;
  rg_tensor *v = rg_tensor_new(t->dtype, t->ndim, shape);
  if (!v) {
    const rg_type *want = rg_type_new(t->dtype, t->ndim, shape);
    rg_error(C, RG_ERR_EVAL, "input %s: no memory for a value of %s", x->name ? x->name : "?",
             want ? rg_type_str(want) : rg_type_str(t));
    return NULL;
  }
  int64_t n = rg_tensor_numel(v);
  for (int64_t i = 0; i < n; i++)
    rg_tensor_set_f64(v, i, rg_dtype_is_float(t->dtype) ? grid_value(r, p) : below(r, 2));
  *elements += n;
  return v;
}

/* The values of a point, one input a line. */
static const char *point_text(int nin, rg_variable *const *ins, rg_tensor *const *vals) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return "";
  for (int i = 0; i < nin; i++) {
    fprintf(f, "      %s = ", ins[i]->name ? ins[i]->name : "?");
    rg_tensor_fprint(f, vals[i]);
    fputc('\n', f);
  }
  fclose(f);
  const char *s = cli_sprintf("%s", buf ? buf : "");
  free(buf);
  return s;
}

/* One check: the gradients of the graph's first output with respect to
 * its float inputs at a random point (unknown sizes `unknown`).  Returns
 * RG_OK when it passed, RG_ERR_EVAL when the graph could not be evaluated
 * there, else an error, the smallest case kept in worst. */
static int check_graph(rg_ctx *C, rng *r, rg_fgraph *fg, const char *text, int64_t unknown, failure *worst) {
  int nin = rg_fgraph_ninputs(fg);
  rg_variable **ins = rg_gc_alloc((size_t)(nin + 1) * sizeof *ins), *out = rg_fgraph_output(fg, 0);
  rg_tensor **vals = rg_gc_alloc((size_t)(nin + 1) * sizeof *vals); /* the tensors themselves freed below */
  int64_t elements = 0;
  pool p = {.left = GRID};
  rg_clear_error(C);
  int rc = RG_OK, drawn = 0;
  for (; drawn < nin && rc == RG_OK; drawn++)
    if (!(vals[drawn] = draw(C, r, &p, ins[drawn] = rg_fgraph_input(fg, drawn), unknown, &elements))) rc = RG_ERR_EVAL;
  rg_fgraph_release(fg);
  rg_verify_opts o = {.seed = rnd(r) | 1};
  if (rc == RG_OK) rc = rg_verify_grad(C, nin, ins, out, vals, &o, NULL);
  if (rc != RG_OK && (!worst->text || elements < worst->elements)) /* a point not drawn whole is not shown */
    *worst = (failure){text, drawn == nin && vals[nin - 1] ? point_text(nin, ins, vals) : "",
                       cli_sprintf("%s", rg_errmsg(C)), elements};
  for (int i = 0; i < drawn; i++) rg_tensor_free(vals[i]);
  return rc;
}

static void print_failure(const failure *f) {
  printf("    %s\n    smallest failing case:\n", f->msg);
  for (const char *s = f->text; *s;) { /* each line indented */
    const char *e = strchr(s, '\n');
    int n = e ? (int)(e - s) : (int)strlen(s);
    if (n) printf("      %.*s\n", n, s);
    s += n + (e != NULL);
  }
  if (f->point && f->point[0]) printf("    at\n%s", f->point);
}

/* Runs one op's template `trials` times per dtype. */
static bool check_op(rg_ctx *C, const args *a, int k, int *graphs) {
  const char *dts[2] = {"float64", "float32"};
  failure worst = {0};
  int failed = 0, n = 0;
  for (int d = 0; d < 2; d++) {
    if (a->dtype && strcmp(a->dtype, dts[d])) continue;
    rng r = {(uint64_t)a->seed * 0x2545f4914f6cdd1dull + (uint64_t)k * 2 + (uint64_t)d};
    for (int t = 0; t < a->trials; t++, n++) {
      const char *text = cases[k].t(&r, cases[k].op, dts[d]);
      rg_fgraph *fg = rg_graph_read(C, cases[k].op, text, strlen(text));
      if (!fg) {
        failed++;
        if (!worst.text) worst = (failure){text, NULL, cli_sprintf("%s", rg_errmsg(C)), 0};
        continue;
      }
      failed += check_graph(C, &r, fg, text, 1, &worst) != RG_OK;
    }
  }
  *graphs = n;
  if (!failed) printf("ok        %-20s %d graphs\n", cases[k].op, n);
  else {
    printf("FAILED    %-20s %d of %d graphs\n", cases[k].op, failed, n);
    print_failure(&worst);
  }
  return failed == 0;
}

static bool wanted(const args *a, const char *op) {
  if (!a->nnames) return true;
  for (int i = 0; i < a->nnames; i++)
    if (!strcmp(a->names[i], op)) return true;
  return false;
}

static int check_ops(rg_ctx *C, const args *a) {
  int failed = 0, checked = 0, graphs;
  for (int i = 0; i < a->nnames; i++) {
    bool known = false;
    for (size_t k = 0; k < NCASES && !known; k++) known = !strcmp(cases[k].op, a->names[i]);
    if (!known) return cli_error("check-grads", "--op %s: no differentiable op of that name", a->names[i]), EXIT_USAGE;
  }
  for (size_t k = 0; k < NCASES; k++) {
    if (!wanted(a, cases[k].op)) continue;
    failed += !check_op(C, a, (int)k, &graphs);
    checked++;
  }
  printf("%d op%s checked, %d failed\n", checked, checked == 1 ? "" : "s", failed);
  return failed ? EXIT_FAILED : EXIT_OK;
}

/* ------------------------------------------------------------------ a graph file */

/* The graph with the named inputs as its only inputs: the others become
 * constants drawn once, so only the named ones are differentiated. */
static int check_file(rg_ctx *C, const args *a) {
  rg_fgraph *fg = cli_load_graph(C, a->graph);
  if (!fg) return cli_error("check-grads", "%s", rg_errmsg(C)), EXIT_INPUT;
  int nin = rg_fgraph_ninputs(fg);
  for (int w = 0; w < a->nnames; w++) {
    bool found = false;
    for (int i = 0; i < nin && !found; i++) {
      const rg_variable *x = rg_fgraph_input(fg, i);
      found = x->name && !strcmp(x->name, a->names[w]);
      if (found && !rg_dtype_is_float(x->type->dtype))
        return cli_error("check-grads", "input '%s' is %s: only float inputs have gradients", a->names[w],
                         rg_type_str(x->type)), EXIT_USAGE;
    }
    if (!found) return cli_error("check-grads", "the graph has no input named '%s'", a->names[w]), EXIT_USAGE;
  }
  if (rg_fgraph_noutputs(fg) < 1) return cli_error("check-grads", "%s has no output to differentiate", a->graph), EXIT_INPUT;
  rg_variable **all = rg_gc_alloc((size_t)(nin + 1) * sizeof *all), **named = rg_gc_alloc((size_t)(nin + 1) * sizeof *named);
  for (int i = 0; i < nin; i++) all[i] = rg_fgraph_input(fg, i);
  rg_variable *out = rg_fgraph_output(fg, 0), *fixed;
  if (!rg_dtype_is_float(out->type->dtype))
    return cli_error("check-grads", "output 0 of %s is %s: only a float output has gradients", a->graph,
                     rg_type_str(out->type)), EXIT_INPUT;
  /* an input on a device that cannot run here is one error, not a
   * failure at every point */
  for (int i = 0; i < nin; i++) {
    char dev[32], why[256];
    if (all[i]->type->device == RG_DEVICE_HOST) continue;
    rg_device_str(all[i]->type->device, dev, sizeof dev);
    if (!rg_backend_available(dev, why, sizeof why))
      return cli_error("check-grads", "input %s lives on %s, which cannot run here: %s",
                       all[i]->name ? all[i]->name : "?", dev, why), EXIT_INPUT;
  }
  rg_fgraph_release(fg);
  rng r = {(uint64_t)a->seed};
  failure worst = {0}, unevaluated = {0};
  int failed = 0, skipped = 0;
  for (int t = 0; t < a->trials; t++) {
    rg_memo *memo = rg_memo_new();
    pool p = {.left = GRID};
    int nn = 0;
    int64_t unknown = a->size ? a->size : 1 + below(&r, 4);
    for (int i = 0; i < nin; i++) {
      bool is_named = false;
      for (int w = 0; w < a->nnames; w++) is_named |= all[i]->name && !strcmp(all[i]->name, a->names[w]);
      if (is_named) {
        named[nn++] = all[i];
        continue;
      }
      int64_t e = 0;
      rg_tensor *v = draw(C, &r, &p, all[i], unknown, &e);
      if (!v) return cli_error("check-grads", "%s", rg_errmsg(C)), EXIT_INPUT;
      rg_memo_put(memo, all[i], rg_constant(C, v));
      rg_tensor_free(v);
    }
    if (rg_clone(C, nn, named, 1, &out, memo, 0, &fixed) != RG_OK) return cli_error("check-grads", "%s", rg_errmsg(C)), EXIT_INPUT;
    rg_fgraph *g = rg_fgraph_new(C, nn, named, 1, &fixed, 0);
    if (!g) return cli_error("check-grads", "%s", rg_errmsg(C)), EXIT_INPUT;
    /* the case as text (the other inputs as constants) before check_graph
     * releases the graph */
    const char *text = rg_graph_to_string(C, g);
    failure one = {0};
    int rc = check_graph(C, &r, g, text ? text : a->graph, unknown, &one);
    if (rc == RG_OK) continue;
    failure *keep = rc == RG_ERR_EVAL ? &unevaluated : &worst;
    if (!keep->text || one.elements < keep->elements) *keep = one;
    skipped += rc == RG_ERR_EVAL;
    failed += rc != RG_ERR_EVAL;
  }
  int checked = a->trials - skipped;
  if (failed) {
    printf("FAILED    %-20s %d of %d points\n", a->graph, failed, checked);
    print_failure(&worst);
  } else if (checked) {
    printf("ok        %-20s %d points\n", a->graph, checked);
  }
  if (skipped) {
    printf("NOT RUN   %-20s %d of %lld points: the graph cannot be evaluated there (unknown sizes %s)\n    %s\n",
           a->graph, skipped, (long long)a->trials, a->size ? "as --size gives" : "drawn from 1 to 4; see --size",
           unevaluated.msg);
    if (!failed) return skipped == a->trials ? EXIT_INPUT : EXIT_OK;
  }
  return failed ? EXIT_FAILED : EXIT_OK;
}

static bool add_name(args *a, const char *v) {
  if (a->nnames == 64) return cli_error("check-grads", "too many names"), false;
  a->names[a->nnames++] = v;
  return true;
}

static int parse(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->trials = 10;
  a->seed = 1;
  for (int i = 1; i < argc; i++) {
    bool missing = false;
    const char *v;
    if (!strcmp(argv[i], "--ops")) a->ops = true;
    else if ((v = cli_option(argc, argv, &i, "--trials", &missing))) {
      if (!cli_parse_int("check-grads", "--trials", v, 1, 100000, &a->trials)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--seed", &missing))) {
      if (!cli_parse_int("check-grads", "--seed", v, 0, INT64_MAX, &a->seed)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--dtype", &missing))) {
      if (strcmp(v, "float64") && strcmp(v, "float32"))
        return cli_error("check-grads", "--dtype must be float64 or float32, not '%s'", v), EXIT_USAGE;
      a->dtype = v;
    } else if ((v = cli_option(argc, argv, &i, "--size", &missing))) {
      if (!cli_parse_int("check-grads", "--size", v, 1, 1 << 20, &a->size)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--wrt", &missing))) {
      if (!add_name(a, v)) return EXIT_USAGE;
      /* after the graph file, the words up to the next option are names too */
      while (a->graph && i + 1 < argc && argv[i + 1][0] != '-')
        if (!add_name(a, argv[++i])) return EXIT_USAGE;
      a->wrt_named = true;
    } else if ((v = cli_option(argc, argv, &i, "--op", &missing))) {
      if (!add_name(a, v)) return EXIT_USAGE;
      a->op_named = true;
    } else if (missing) return EXIT_USAGE;
    else if (argv[i][0] == '-' && argv[i][1]) return cli_error("check-grads", "unknown option '%s'", argv[i]), EXIT_USAGE;
    else if (a->graph)
      return cli_error("check-grads", "'%s': one graph file at a time (several inputs: GRAPH --wrt A B, or --wrt A --wrt B)",
                       argv[i]), EXIT_USAGE;
    else a->graph = argv[i];
  }
  if (a->ops == (a->graph != NULL))
    return cli_error("check-grads", "give either --ops or a graph file with --wrt"), EXIT_USAGE;
  if (a->ops && a->wrt_named)
    return cli_error("check-grads", "--wrt names inputs of a graph file; with --ops, choose ops with --op"), EXIT_USAGE;
  if (a->graph && a->op_named)
    return cli_error("check-grads", "--op chooses ops with --ops; with a graph file, name its inputs with --wrt"), EXIT_USAGE;
  if (a->graph && !a->nnames) return cli_error("check-grads", "--wrt NAME is needed with a graph file"), EXIT_USAGE;
  if (a->graph && a->dtype)
    return cli_error("check-grads", "--dtype chooses the dtypes of --ops; a graph file keeps its inputs' dtypes"), EXIT_USAGE;
  if (a->ops && a->size)
    return cli_error("check-grads", "--size gives the unknown sizes of a graph file; --ops draws its own shapes"), EXIT_USAGE;
  return EXIT_OK;
}

int cmd_check_grads(int argc, char **argv) {
  args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  rg_ctx *C = rg_ctx_new();
  return a.ops ? check_ops(C, &a) : check_file(C, &a);
}
