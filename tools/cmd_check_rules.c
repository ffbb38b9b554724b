/*
 * cmd_check_rules.c — `relgraph check-rules`: tests rewrite rules by
 * running graphs before and after them.
 *
 *   relgraph check-rules [FILE...] [--std] [--rule NAME]... [--trials N] [--seed S]
 *
 * For each rule, trials build random well-typed graphs the rule rewrites,
 * run each before and after the rewrite on random inputs with the CPU
 * backend (no other rewrite), and compare.
 *
 * Graphs come from templates: a rule's example terms (rg_rewriter_examples:
 * a pattern rule's pattern, an op rule's op, the examples of a standard C
 * rule) or, for a relational rule, the first answers of its relation run
 * with the input unknown (the relation itself lists terms it rewrites).
 * The leaves of a template (?x symbols, unbound logic variables) become
 * inputs, or now and then constants, of random types; leaves inside an op's
 * parameters become small integers.  An attempt whose graph does not type
 * check (make_node) or that the rule does not rewrite is drawn again, up to
 * MAX_ATTEMPTS per trial.  Types are drawn either uniformly (one dtype, one
 * size, all static sizes known or all unknown) or mixed, so that rules
 * needing matching types are reached as well as rules sensitive to
 * promotion and broadcasting.  Size-1 dimensions are always static, so
 * broadcasting is decided by the types, as the graph IR requires.
 *
 * Comparison: each output must keep its dtype and shape; where the original
 * value is finite the rewritten one must agree within the dtype's tolerance
 * (exactly for integers and bools); where the original is NaN or infinite
 * the rewrite is free (a rule is checked on the domain where the original
 * is defined).  A rewrite rejected for its type, a rule that does not stop
 * (cycle or budget), or a rewritten graph that fails to run are failures
 * too.  Of the failing graphs the smallest (fewest nodes, then fewest input
 * elements) is reported, then shrunk: sizes made smaller and dimensions
 * dropped while it still fails.
 *
 * Rules with no template (the Scan rules written in C, and relations that
 * read Scans, which give no answer with their input unknown) are tried on
 * random loops instead (cli_scan.c: recurrences, accumulations, taps,
 * twin loops, over sequences of vectors or batches), up to SCAN_ATTEMPTS
 * draws per trial; these failures are reported as drawn, not shrunk.
 *
 * Everything random comes from one seeded generator: the same seed gives
 * the same report.  Exit status: 0 when no rule failed, 1 when one did, 2
 * for bad usage, 3 for a rule file that does not load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "tools/cli.h"

#define MAX_LEAVES 16
#define MAX_TEMPLATES 8
#define MAX_ATTEMPTS 400
#define MAX_RANK 3 /* drawn types have at most 2 dimensions; random Scans' inputs 3 */
#define INPUT_DRAWS 3
#define SHRINK_STEPS 40
#define RELATION_STEPS 200000
#define TEMPLATE_DEPTH 64
#define SCAN_ATTEMPTS 40

void usage_check_rules(void) {
  printf("usage: relgraph check-rules [OPTIONS] [FILE...]\n"
         "  FILE          rule files (defrule forms) whose rules are checked\n"
         "  --std         check the rules of the standard database\n"
         "  --rule NAME   check only this rule (repeatable)\n"
         "  --trials N    graphs per rule (default 50)\n"
         "  --seed S      seed of the random graphs and inputs (default 1)\n"
         "the files' own run and test forms print first; a failed test fails the check\n"
         "exit status: 0 no rule failed, 1 a rule or a test failed, 2 bad usage, 3 bad rule file\n");
}

/* ------------------------------------------------------------------ random numbers */

typedef struct rng { uint64_t s; } rng;

static uint64_t rnd(rng *r) { return rg_random_next(&r->s); }
static int below(rng *r, int n) { return (int)(rnd(r) % (uint64_t)n); }
static double unit(rng *r) { return (double)(rnd(r) >> 11) * 0x1.0p-53; }

/* ------------------------------------------------------------------ templates and leaves */

/* A leaf of a template and the type drawn for it.  Invariant: a param
 * leaf has only pval; other leaves have dt, nd, shape (concrete sizes)
 * and known (which sizes the static type states; size 1 always). */
typedef struct leaf {
  rg_term key;          /* the ?x symbol or the logic variable */
  const char *name;
  bool param;           /* inside an op's parameters */
  int64_t pval;
  bool constant;        /* a constant instead of an input */
  rg_dtype dt;
  int nd;
  int64_t shape[MAX_RANK];
  bool known[MAX_RANK];
  rg_variable *var;
} leaf;

typedef struct leaves { int n; leaf v[MAX_LEAVES]; } leaves;

static bool is_leaf_term(rg_term t) {
  if (rg_is_var(t)) return true;
  if (rg_kind_of(t) != RG_K_SYMBOL) return false;
  const char *s = rg_symbol_name(t);
  return s[0] == '?' && s[1];
}

static int add_leaf(leaves *L, rg_term t, bool param) {
  for (int i = 0; i < L->n; i++)
    if (L->v[i].key == t) return RG_OK;
  if (L->n == MAX_LEAVES) return RG_ERR;
  leaf *l = &L->v[L->n++];
  memset(l, 0, sizeof *l);
  l->key = t;
  l->param = param;
  l->name = rg_is_var(t) ? cli_sprintf("v%d", L->n - 1) : rg_symbol_name(t) + 1;
  return RG_OK;
}

/* Collects the leaves of a template; those inside an op head (a list in
 * head position) are parameters. */
static int collect(leaves *L, rg_term t, bool param, int depth) {
  if (depth > TEMPLATE_DEPTH) return RG_ERR;
  if (is_leaf_term(t)) return add_leaf(L, t, param);
  if (!rg_is_pair(t)) return RG_OK;
  rg_term head = rg_car(t);
  int rc = collect(L, head, param || rg_is_pair(head), depth + 1);
  for (rg_term a = rg_cdr(t); rc == RG_OK && rg_is_pair(a); a = rg_cdr(a))
    rc = collect(L, rg_car(a), param, depth + 1);
  return rc;
}

static const leaf *leaf_of(const leaves *L, rg_term t) {
  for (int i = 0; i < L->n; i++)
    if (L->v[i].key == t) return &L->v[i];
  return NULL;
}

/* The template with its leaves replaced by their variables or values. */
static rg_term fill(const leaves *L, rg_term t) {
  const leaf *l = is_leaf_term(t) ? leaf_of(L, t) : NULL;
  if (l) return l->param ? rg_int(l->pval) : rg_var_term(l->var);
  if (!rg_is_pair(t)) return t;
  return rg_cons(fill(L, rg_car(t)), fill(L, rg_cdr(t)));
}

/* ------------------------------------------------------------------ drawing types */

static const rg_dtype some_dtypes[] = {RG_FLOAT64, RG_FLOAT64, RG_FLOAT32, RG_INT64,
                                       RG_INT32,   RG_INT8,    RG_UINT8,   RG_BOOL};
#define NDTYPES_DRAWN (int)(sizeof some_dtypes / sizeof some_dtypes[0])

static void draw_leaf(rng *r, leaf *l, bool uniform, rg_dtype base, int64_t size, bool all_known) {
  static const int64_t params[] = {0, 1, -1};
  if (l->param) {
    l->pval = params[below(r, 3)];
    return;
  }
  l->dt = uniform || below(r, 3) ? base : some_dtypes[below(r, NDTYPES_DRAWN)];
  l->nd = below(r, 5) < 1 ? 0 : below(r, 2) + 1;
  l->constant = !uniform && below(r, 10) == 0;
  for (int d = 0; d < l->nd; d++) {
    l->shape[d] = below(r, 8) == 0 ? 1 : uniform ? size : 2 + below(r, 3);
    l->known[d] = l->shape[d] == 1 || (uniform ? all_known : below(r, 2) == 0);
  }
}

static void draw_types(rng *r, leaves *L) {
  bool uniform = below(r, 5) < 3;
  rg_dtype base = below(r, 4) ? (below(r, 3) ? RG_FLOAT64 : RG_FLOAT32) : some_dtypes[below(r, NDTYPES_DRAWN)];
  int64_t size = 2 + below(r, 3);
  bool all_known = below(r, 2);
  for (int i = 0; i < L->n; i++) draw_leaf(r, &L->v[i], uniform, base, size, all_known);
}

/* ------------------------------------------------------------------ random values */

static void fill_random(rng *r, rg_tensor *t) {
  int64_t n = rg_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    if (rg_dtype_is_float(t->dtype)) rg_tensor_set_f64(t, i, 6 * unit(r) - 3);
    else if (t->dtype == RG_BOOL) rg_tensor_set_i64(t, i, below(r, 2));
    else if (t->dtype == RG_UINT8) rg_tensor_set_i64(t, i, below(r, 9));
    else rg_tensor_set_i64(t, i, below(r, 9) - 4);
  }
}

static rg_tensor *random_tensor(rng *r, const leaf *l) {
  rg_tensor *t = rg_tensor_new(l->dt, l->nd, l->shape);
  if (t) fill_random(r, t);
  return t;
}

/* The leaves' variables: inputs named after them, or constants. */
static bool make_vars(rg_ctx *C, rng *r, leaves *L) {
  for (int i = 0; i < L->n; i++) {
    leaf *l = &L->v[i];
    if (l->param) continue;
    if (l->constant) {
      rg_tensor *t = random_tensor(r, l);
      l->var = t ? rg_constant(C, t) : NULL;
      rg_tensor_free(t);
    } else {
      int64_t st[MAX_RANK];
      for (int d = 0; d < l->nd; d++) st[d] = l->known[d] ? l->shape[d] : RG_DIM_UNKNOWN;
      l->var = rg_input(C, l->name, rg_type_new(l->dt, l->nd, st));
    }
    if (!l->var) return false;
  }
  return true;
}

/* ------------------------------------------------------------------ one graph */

enum { T_NOT_BUILT, T_NOT_APPLIED, T_SKIPPED, T_PASSED, T_FAILED };

/* A failing graph, with what to print about it. */
typedef struct failure {
  const char *why;       /* one line */
  const char *graph;     /* the graph before, in the graph file format */
  const char *after;     /* the rewritten graph, pprint */
  const char *detail;    /* inputs and values */
  size_t nodes;
  int64_t elements;
  rg_term tmpl;
  leaves L;
} failure;

typedef struct checker {
  rg_ctx *C;
  rng r;
  int trials;
} checker;

static char *mem_text(void (*emit)(FILE *, const void *), const void *x) {
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  if (!m) return cli_sprintf("?");
  emit(m, x);
  fclose(m);
  char *s = cli_sprintf("%s", buf ? buf : "");
  free(buf);
  return s;
}

static void emit_graph(FILE *f, const void *fg) {
  rg_fgraph *g = (rg_fgraph *)fg;
  rg_graph_write(rg_fgraph_ctx(g), f, g);
}
static void emit_pprint(FILE *f, const void *fg) { rg_fgraph_pprint(f, (rg_fgraph *)fg); }

typedef struct graph_pair {
  int nin;
  rg_variable **ins, *root;   /* the graph before */
  rg_fgraph *fg;              /* a copy, rewritten */
} graph_pair;

/* Elements of the inputs and constants the leaves became. */
static int64_t input_elements(const leaves *L) {
  int64_t n = 0;
  for (int i = 0; i < L->n; i++) {
    if (L->v[i].param) continue;
    int64_t k = 1;
    for (int d = 0; d < L->v[i].nd; d++) k *= L->v[i].shape[d];
    n += k;
  }
  return n;
}

static void tensor_line(FILE *f, const char *label, const rg_tensor *t) {
  fprintf(f, "%s", label);
  rg_tensor_fprint(f, t);
  fputc('\n', f);
}

typedef struct draw { rg_tensor **in; const leaves *L; rg_tensor *before, *after; } draw;

static void emit_draw(FILE *f, const void *p) {
  const draw *d = p;
  int k = 0;
  for (int i = 0; i < d->L->n; i++) {
    const leaf *l = &d->L->v[i];
    if (l->param || l->constant) continue;
    fprintf(f, "    %s = ", l->name);
    tensor_line(f, "", d->in[k++]);
  }
  tensor_line(f, "    before: ", d->before);
  tensor_line(f, "    after:  ", d->after);
}

/* Whether the rewritten value agrees where the original is finite. */
static bool agree(const rg_tensor *a, const rg_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  int64_t n = rg_tensor_numel(a);
  double tol = a->dtype == RG_FLOAT32 ? 1e-4 : 1e-6; /* float64 results may come from float32 parts */
  for (int64_t i = 0; i < n; i++) {
    if (!rg_dtype_is_float(a->dtype)) {
      if (rg_tensor_get_i64(a, i) != rg_tensor_get_i64(b, i)) return false;
      continue;
    }
    double x = rg_tensor_get_f64(a, i), y = rg_tensor_get_f64(b, i);
    if (isfinite(x) && !(fabs(x - y) <= tol + tol * fabs(x))) return false;
  }
  return true;
}

static void free_tensors(int n, rg_tensor **t) {
  for (int i = 0; i < n; i++) rg_tensor_free(t[i]);
}

/* Runs both functions on one draw of inputs: T_PASSED, T_SKIPPED (the
 * original fails on these inputs) or T_FAILED with f filled. */
static int run_draw(checker *ck, rg_function *fb, rg_function *fa, const leaves *L, failure *f) {
  rg_tensor *in[MAX_LEAVES] = {0}, *before = NULL, *after = NULL;
  int k = 0, result = T_PASSED;
  for (int i = 0; i < L->n; i++)
    if (!L->v[i].param && !L->v[i].constant) in[k++] = random_tensor(&ck->r, &L->v[i]);
  if (rg_function_call(fb, in, &before) != RG_OK) {
    result = T_SKIPPED;
  } else if (rg_function_call(fa, in, &after) != RG_OK) {
    f->why = cli_sprintf("the rewritten graph fails to run: %s", rg_function_errmsg(fa));
    result = T_FAILED;
  } else if (!agree(before, after)) {
    f->why = "the results differ";
    draw d = {in, L, before, after};
    f->detail = mem_text(emit_draw, &d);
    result = T_FAILED;
  }
  free_tensors(k, in);
  rg_tensor_free(before);
  rg_tensor_free(after);
  return result;
}

static rg_function *compile_none(rg_ctx *C, int nin, rg_variable *const *ins, rg_variable *out) {
  rg_compile_opts o = {.mode = {.query = "none"}};
  return rg_compile(C, nin, ins, 1, &out, &o);
}

/* Compiles the graph before and after and compares them on a few draws. */
static int compare(checker *ck, const graph_pair *g, const leaves *L, failure *f) {
  rg_ctx *C = ck->C;
  rg_function *fb = compile_none(C, g->nin, g->ins, g->root);
  if (!fb) {
    rg_clear_error(C);
    return T_SKIPPED;
  }
  rg_variable **ins2 = rg_gc_alloc((size_t)(g->nin + 1) * sizeof *ins2);
  for (int i = 0; i < g->nin; i++) ins2[i] = rg_fgraph_input(g->fg, i);
  rg_function *fa = compile_none(C, g->nin, ins2, rg_fgraph_output(g->fg, 0));
  int result = T_SKIPPED;
  if (!fa) {
    f->why = cli_sprintf("the rewritten graph does not compile: %s", rg_errmsg(C));
    rg_clear_error(C);
    result = T_FAILED;
  }
  for (int i = 0; fa && i < INPUT_DRAWS && result != T_FAILED; i++) {
    int rc = run_draw(ck, fb, fa, L, f);
    if (rc == T_PASSED || rc == T_FAILED) result = rc;
  }
  rg_function_free(fb);
  rg_function_free(fa);
  return result;
}

static int rewrite_fold(const rg_node *n, rg_tensor **outs, char *err, size_t len) {
  return rg_eval_node(n, outs, err, len);
}

/* What the rewrite run says about the rule itself: T_FAILED (rejected,
 * looping, error), T_NOT_APPLIED, or T_PASSED to go on comparing. */
static int judge_run(rg_rewrite_run *run, failure *f) {
  rg_ctx *C = rg_rewrite_ctx(run);
  if (rg_rewrite_rejected(run) > 0) {
    f->why = cli_sprintf("a rewrite was rejected: %s", rg_errmsg(C));
    return T_FAILED;
  }
  switch (rg_rewrite_stop(run)) {
  case RG_STOP_EQUILIBRIUM: break;
  case RG_STOP_ERROR:
    f->why = cli_sprintf("the rule failed: %s", rg_rewrite_stop_message(run));
    return T_FAILED;
  default:
    f->why = cli_sprintf("the rule does not stop: %s", rg_rewrite_stop_message(run));
    return T_FAILED;
  }
  return rg_rewrite_count(run) > 0 ? T_PASSED : T_NOT_APPLIED;
}

/* Builds the template with the leaves' current types, rewrites a copy with
 * the rule and compares. */
static int try_types(checker *ck, rg_rewriter *rw, rg_term tmpl, leaves *L, failure *f) {
  rg_ctx *C = ck->C;
  if (!make_vars(C, &ck->r, L)) return rg_clear_error(C), T_NOT_BUILT;
  rg_variable *root = rg_graph_eval(C, fill(L, tmpl));
  if (!root || !root->owner) return rg_clear_error(C), T_NOT_BUILT;
  graph_pair g = {0, rg_gc_alloc(MAX_LEAVES * sizeof(rg_variable *)), root, NULL};
  for (int i = 0; i < L->n; i++)
    if (!L->v[i].param && !L->v[i].constant) g.ins[g.nin++] = L->v[i].var;
  rg_fgraph *show = rg_fgraph_new(C, g.nin, g.ins, 1, &root, RG_FG_CLONE);
  g.fg = rg_fgraph_new(C, g.nin, g.ins, 1, &root, RG_FG_CLONE);
  if (!show || !g.fg) return rg_clear_error(C), T_NOT_BUILT;
  rg_rewrite_opts o = {.fold = rewrite_fold};
  memset(f, 0, sizeof *f);
  f->graph = mem_text(emit_graph, show);
  f->nodes = rg_fgraph_nnodes(show);
  f->elements = input_elements(L);
  f->tmpl = tmpl;
  f->L = *L;
  int rc = judge_run(rg_rewrite(g.fg, rw, &o), f);
  rg_clear_error(C);
  if (rc == T_PASSED) rc = compare(ck, &g, L, f);
  if (rc == T_FAILED) f->after = mem_text(emit_pprint, g.fg);
  return rc;
}

/* One trial: draws types until the rule applies to a graph. */
static int trial(checker *ck, rg_rewriter *rw, rg_term tmpl, failure *f) {
  leaves L = {0};
  if (collect(&L, tmpl, false, 0) != RG_OK) return T_NOT_BUILT;
  int last = T_NOT_BUILT;
  for (int a = 0; a < MAX_ATTEMPTS; a++) {
    draw_types(&ck->r, &L);
    int rc = try_types(ck, rw, tmpl, &L, f);
    if (rc == T_PASSED || rc == T_FAILED || rc == T_SKIPPED) return rc;
    if (rc > last) last = rc;
  }
  return last;
}

/* ------------------------------------------------------------------ random loops */

/* The leaves of a graph read from text: its inputs, with their types. */
static bool input_leaves(const rg_fgraph *fg, leaves *L) {
  L->n = 0;
  for (int i = 0; i < rg_fgraph_ninputs(fg); i++) {
    rg_variable *v = rg_fgraph_input(fg, i);
    if (L->n == MAX_LEAVES || v->type->ndim > MAX_RANK) return false;
    leaf *l = &L->v[L->n++];
    memset(l, 0, sizeof *l);
    l->name = v->name, l->dt = v->type->dtype, l->nd = v->type->ndim, l->var = v;
    for (int d = 0; d < l->nd; d++) l->shape[d] = v->type->shape[d], l->known[d] = true;
  }
  return true;
}

/* One random loop: rewritten by the rule and compared, as try_types. */
static int try_scan(checker *ck, rg_rewriter *rw, failure *f) {
  rg_ctx *C = ck->C;
  const char *text = cli_random_scan(&ck->r.s);
  rg_fgraph *show = rg_graph_read(C, "<random scan>", text, strlen(text));
  leaves L;
  if (!show || rg_fgraph_noutputs(show) != 1 || !input_leaves(show, &L)) return rg_clear_error(C), T_NOT_BUILT;
  rg_variable *root = rg_fgraph_output(show, 0);
  graph_pair g = {L.n, rg_gc_alloc((MAX_LEAVES + 1) * sizeof(rg_variable *)), root, NULL};
  for (int i = 0; i < L.n; i++) g.ins[i] = L.v[i].var;
  if (!(g.fg = rg_fgraph_new(C, g.nin, g.ins, 1, &root, RG_FG_CLONE))) return rg_clear_error(C), T_NOT_BUILT;
  rg_rewrite_opts o = {.fold = rewrite_fold};
  memset(f, 0, sizeof *f);
  f->graph = text;
  f->nodes = rg_fgraph_nnodes(show);
  f->elements = input_elements(&L);
  f->L = L;
  int rc = judge_run(rg_rewrite(g.fg, rw, &o), f);
  rg_clear_error(C);
  if (rc == T_PASSED) rc = compare(ck, &g, &L, f);
  if (rc == T_FAILED) f->after = mem_text(emit_pprint, g.fg);
  return rc;
}

static int scan_trial(checker *ck, rg_rewriter *rw, failure *f) {
  int last = T_NOT_BUILT;
  for (int a = 0; a < SCAN_ATTEMPTS; a++) {
    int rc = try_scan(ck, rw, f);
    if (rc == T_PASSED || rc == T_FAILED || rc == T_SKIPPED) return rc;
    if (rc > last) last = rc;
  }
  return last;
}

/* ------------------------------------------------------------------ shrinking */

static bool smaller(const failure *a, const failure *b) {
  return a->nodes != b->nodes ? a->nodes < b->nodes : a->elements < b->elements;
}

/* A variant of the leaves' types: k-th way of making them smaller. */
static bool variant(const leaves *from, int k, leaves *to) {
  *to = *from;
  int64_t top = 1;
  for (int i = 0; i < to->n; i++)
    for (int d = 0; d < to->v[i].nd; d++)
      if (to->v[i].shape[d] > top) top = to->v[i].shape[d];
  if (k == 0) { /* every size top -> top - 1 */
    if (top <= 2) return false;
    for (int i = 0; i < to->n; i++)
      for (int d = 0; d < to->v[i].nd; d++)
        if (to->v[i].shape[d] == top) to->v[i].shape[d]--;
    return true;
  }
  int i = (k - 1) / (MAX_RANK + 1), d = (k - 1) % (MAX_RANK + 1);
  if (i >= to->n || to->v[i].param) return false;
  leaf *l = &to->v[i];
  if (d == MAX_RANK) { /* drop the first dimension */
    if (l->nd == 0) return false;
    memmove(l->shape, l->shape + 1, (size_t)(l->nd - 1) * sizeof *l->shape);
    memmove(l->known, l->known + 1, (size_t)(l->nd - 1) * sizeof *l->known);
    l->nd--;
    return true;
  }
  if (d >= l->nd || l->shape[d] == 1) return false;
  l->shape[d] = 1; /* a broadcast dimension */
  l->known[d] = true;
  return true;
}

static void shrink(checker *ck, rg_rewriter *rw, failure *best) {
  int nvariants = 1 + MAX_LEAVES * (MAX_RANK + 1);
  for (int step = 0, k = 0; step < SHRINK_STEPS && k < nvariants; k++) {
    leaves L;
    if (!variant(&best->L, k, &L)) continue;
    step++;
    failure f;
    for (int t = 0; t < INPUT_DRAWS; t++) {
      if (try_types(ck, rw, best->tmpl, &L, &f) != T_FAILED || !smaller(&f, best)) continue;
      *best = f;
      k = -1; /* start over from the smaller graph */
      break;
    }
  }
}

/* ------------------------------------------------------------------ one rule */

typedef struct rule_report {
  int passed, skipped, failed, unbuilt;
  failure best;
} rule_report;

/* A template the engine read from a relation's code, with each `_` a
 * fresh variable (a leaf) and a list left open (`(add . _)`) closed with
 * two of them. */
static rg_term open_template(rg_ctx *C, rg_term t, bool tail) {
  if (t == rg_symbol("_"))
    return tail ? rg_cons(rg_var(C), rg_cons(rg_var(C), RG_NIL)) : rg_var(C);
  if (!rg_is_pair(t)) return t;
  return rg_cons(open_template(C, rg_car(t), false), open_template(C, rg_cdr(t), true));
}

/* The templates of a rule: its examples, or answers of its relation, or
 * when the relation gives none within its steps (it searches without end
 * with its input unknown) or fails with an error there (a relation it
 * calls is not defined: the trials must show that error), the templates
 * the engine indexes it by. */
static int templates(checker *ck, rg_rewriter *rw, rg_term *out) {
  rg_ctx *C = ck->C;
  const char *ex = rg_rewriter_examples(rw);
  int n = 0;
  if (ex) {
    rg_term forms = rg_read_all(C, "<examples>", ex, strlen(ex));
    for (; forms && rg_is_pair(forms) && n < MAX_TEMPLATES; forms = rg_cdr(forms)) out[n++] = rg_car(forms);
    rg_clear_error(C);
    return n;
  }
  bool back;
  rg_term rel = rg_rewriter_relation(rw, &back);
  if (!rel) return 0;
  rg_term in = rg_var(C), o = rg_var(C), args[2] = {back ? o : in, back ? in : o};
  rg_run_opts opts = {.max_steps = RELATION_STEPS};
  rg_query *Q = rg_query_new(C, in, rg_call(rel, 2, args), &opts);
  rg_term a;
  int rc = 0;
  while (n < MAX_TEMPLATES && (rc = rg_query_next_walked(Q, &a)) == 1)
    if (rg_is_pair(a)) out[n++] = a;
  rg_clear_error(C);
  for (rg_term ts = n || rc == 0 ? RG_NIL : rg_relation_input_templates(rel, back ? 1 : 0);
       rg_is_pair(ts) && n < MAX_TEMPLATES; ts = rg_cdr(ts))
    if (rg_is_pair(rg_car(ts))) out[n++] = open_template(C, rg_car(ts), false);
  return n;
}

static void check_rule(checker *ck, rg_rewriter *rw, rule_report *rep) {
  rg_term tmpl[MAX_TEMPLATES];
  int nt = templates(ck, rw, tmpl);
  memset(rep, 0, sizeof *rep);
  for (int t = 0; t < ck->trials; t++) {
    failure f;
    switch (nt ? trial(ck, rw, tmpl[t % nt], &f) : scan_trial(ck, rw, &f)) {
    case T_PASSED: rep->passed++; break;
    case T_SKIPPED: rep->skipped++; break;
    case T_FAILED:
      if (!rep->failed++ || smaller(&f, &rep->best)) rep->best = f;
      break;
    default: rep->unbuilt++; break;
    }
  }
  if (rep->failed && rep->best.tmpl) shrink(ck, rw, &rep->best);
}

static void print_failure(const failure *f) {
  printf("    %s\n    smallest failing graph:\n", f->why);
  for (const char *p = f->graph; *p;) {
    const char *e = strchr(p, '\n');
    int len = e ? (int)(e - p) : (int)strlen(p);
    printf("      %.*s\n", len, p);
    p += len + (e ? 1 : 0);
  }
  if (f->after) printf("    rewritten: %s", f->after);
  if (f->detail) printf("%s", f->detail);
}

/* Prints the rule's line; returns whether it failed. */
static bool report_rule(const char *name, const rule_report *r) {
  if (r->failed) {
    printf("FAILED    %-28s %d of %d graphs\n", name, r->failed, r->failed + r->passed);
    print_failure(&r->best);
    return true;
  }
  if (!r->passed) {
    printf("untested  %-28s no graph it rewrites was found\n", name);
    return false;
  }
  printf("ok        %-28s %d graphs", name, r->passed);
  if (r->unbuilt) printf(", %d trials found none", r->unbuilt);
  if (r->skipped) printf(", %d could not run", r->skipped);
  printf("\n");
  return false;
}

/* ------------------------------------------------------------------ the command */

typedef struct check_args {
  const char *files[64];
  int nfiles;
  const char *only[64];
  int nonly;
  bool std;
  int64_t trials, seed;
} check_args;

static int parse(int argc, char **argv, check_args *a) {
  memset(a, 0, sizeof *a);
  a->trials = 50;
  a->seed = 1;
  for (int i = 1; i < argc; i++) {
    bool missing = false;
    const char *v;
    if (!strcmp(argv[i], "--std")) a->std = true;
    else if ((v = cli_option(argc, argv, &i, "--trials", &missing))) {
      if (!cli_parse_int("check-rules", "--trials", v, 1, 1000000, &a->trials)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--seed", &missing))) {
      if (!cli_parse_int("check-rules", "--seed", v, 0, INT64_MAX, &a->seed)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--rule", &missing))) {
      if (a->nonly == 64) return cli_error("check-rules", "too many --rule options"), EXIT_USAGE;
      a->only[a->nonly++] = v;
    } else if (missing) return EXIT_USAGE;
    else if (argv[i][0] == '-' && argv[i][1]) return cli_error("check-rules", "unknown option '%s'", argv[i]), EXIT_USAGE;
    else if (a->nfiles == 64) return cli_error("check-rules", "too many rule files"), EXIT_USAGE;
    else a->files[a->nfiles++] = argv[i];
  }
  if (!a->nfiles && !a->std) return cli_error("check-rules", "no rule file given (or --std)"), EXIT_USAGE;
  return EXIT_OK;
}

/* Whether a space-separated list holds the word w. */
static bool has_word(const char *list, const char *w) {
  size_t n = strlen(w);
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ' ');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, w, n)) return true;
    p += len + (e ? 1 : 0);
  }
  return false;
}

/* The rules to check, as (name, rewriter) pairs. */
typedef struct rule_list { int n, cap; const char **names; rg_rewriter **rws; } rule_list;

static void push_rule(rule_list *l, const char *name, rg_rewriter *rw) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 32;
    const char **names = rg_gc_alloc((size_t)l->cap * sizeof *names);
    rg_rewriter **rws = rg_gc_alloc((size_t)l->cap * sizeof *rws);
    if (l->n) {
      memcpy(names, l->names, (size_t)l->n * sizeof *names);
      memcpy(rws, l->rws, (size_t)l->n * sizeof *rws);
    }
    l->names = names;
    l->rws = rws;
  }
  l->names[l->n] = name;
  l->rws[l->n++] = rw;
}

/* Every rule of a database with examples or a relation, or tagged scan,
 * nested ones too (an explicit stack of databases). */
static void std_rules(rg_rewrite_db *db, rule_list *l) {
  rg_rewrite_db *stack[16];
  int sp = 0;
  stack[sp++] = db;
  while (sp) {
    rg_rewrite_db *d = stack[--sp];
    for (int i = 0; i < rg_db_count(d); i++) {
      rg_rewriter *rw;
      rg_rewrite_db *sub;
      const char *tags;
      const char *name = rg_db_entry(d, i, &rw, &sub, &tags);
      if (sub && sp < 16) stack[sp++] = sub;
      if (rw && (rg_rewriter_examples(rw) || rg_rewriter_relation(rw, NULL) || has_word(tags, "scan")))
        push_rule(l, name, rw);
    }
  }
}

static bool wanted(const check_args *a, const char *name) {
  if (!a->nonly) return true;
  for (int i = 0; i < a->nonly; i++)
    if (!strcmp(a->only[i], name)) return true;
  return false;
}

/* Loads the rules; the files' own `run` and `test` forms print as they
 * would under `relgraph kanren`, and *tests_failed counts failed tests. */
static int load_rules(rg_ctx *C, const check_args *a, rule_list *l, int64_t *tests_failed) {
  *tests_failed = 0;
  if (a->std) {
    rg_rewrite_db *db = rg_std_db(C);
    if (!db) return cli_error("check-rules", "%s", rg_errmsg(C)), EXIT_INPUT;
    std_rules(db, l);
  }
  if (!a->nfiles) return EXIT_OK;
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, stdout);
  rg_rule_set *rs = rg_rule_set_new(I);
  for (int i = 0; i < a->nfiles; i++)
    if (rg_rule_set_load(rs, a->files[i]) != RG_OK)
      return cli_error("check-rules", "%s", rg_errmsg(C)), EXIT_INPUT;
  int64_t passed;
  rg_interp_test_counts(I, &passed, tests_failed);
  if (passed + *tests_failed > 0)
    printf("tests in the rule files: %lld passed, %lld failed\n", (long long)passed, (long long)*tests_failed);
  for (int i = 0; i < rg_rule_set_count(rs); i++)
    push_rule(l, rg_rewriter_name(rg_rule_set_rule(rs, i)), rg_rule_set_rule(rs, i));
  return EXIT_OK;
}

int cmd_check_rules(int argc, char **argv) {
  check_args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  rg_ctx *C = rg_ctx_new();
  rg_graph_install_evaluator(C);
  rule_list l = {0};
  int64_t tests_failed;
  if ((rc = load_rules(C, &a, &l, &tests_failed))) return rc;
  for (int k = 0; k < a.nonly; k++) { /* a name given that no rule has: before any work */
    bool found = false;
    for (int i = 0; i < l.n && !found; i++) found = !strcmp(a.only[k], l.names[i]);
    if (!found) return cli_error("check-rules", "--rule %s: no such rule%s", a.only[k], a.std || a.nfiles ? "" : " (give rule files or --std)"), EXIT_USAGE;
  }
  checker ck = {C, {(uint64_t)a.seed}, (int)a.trials};
  int failed = 0, checked = 0;
  for (int i = 0; i < l.n; i++) {
    if (!wanted(&a, l.names[i])) continue;
    rule_report rep;
    ck.r.s = (uint64_t)a.seed * 0x2545f4914f6cdd1dull + (uint64_t)i; /* per rule: stable under --rule */
    check_rule(&ck, l.rws[i], &rep);
    failed += report_rule(l.names[i], &rep);
    checked++;
  }
  if (!checked) return cli_error("check-rules", "no rule to check"), EXIT_USAGE;
  printf("%d rule%s checked, %d failed\n", checked, checked == 1 ? "" : "s", failed);
  return failed || tests_failed ? EXIT_FAILED : EXIT_OK;
}
