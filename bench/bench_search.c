/*
 * bench_search.c — the e-graph search (docs/search.md): matrix chains of
 * ten saturated and extracted exactly; growth of e-nodes per second under
 * associativity and commutativity with pattern rules and with relational
 * rules (run as e-matching, their templates compiled, and in the
 * interpreter); rebuilding after merges at 10^4, 10^5 and 10^6 e-nodes.
 *
 *   bench_search [chain|growth|growth-pattern|growth-relation|
 *                 growth-interpreted|rebuild]...
 *                                            (default: all)
 *
 * Prints one line per figure (medians of the thread's CPU time), as
 * docs/benchmarks.md records.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/benchutil.h"
#include "relgraph/rewrite.h"
#include "rewrites/egraph-impl.h"

static rg_ctx *C;

/* The thread's CPU time in seconds (the machine may be shared). */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


static rg_rewriter *rules(const char *text) {
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_rule_set *rs = rg_rule_set_new(I);
  if (rg_rule_set_load_string(rs, "<bench rules>", text) != RG_OK) {
    fprintf(stderr, "%s\n", rg_errmsg(C));
    exit(1);
  }
  rg_rewrite_db *db = rg_db_sequence("bench");
  rg_rule_set_register(rs, db, "rules");
  return rg_db_query(C, db, "rules");
}

static rg_fgraph *graph(const char *text) {
  rg_fgraph *fg = rg_graph_read(C, "<bench>", text, strlen(text));
  if (!fg) {
    fprintf(stderr, "%s\n", rg_errmsg(C));
    exit(1);
  }
  return fg;
}

/* ------------------------------------------------------------------ matrix chains */

static uint64_t rng = 7;
static int64_t rnd(int64_t lo, int64_t hi) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (int64_t)((rng >> 33) % (uint64_t)(hi - lo + 1));
}

static const char *chain_text(int n) {
  const char *s = "(graph ", *e = "M0";
  int64_t d0 = rnd(2, 512);
  for (int i = 0; i < n; i++) {
    int64_t d1 = rnd(2, 512);
    s = rg_gc_sprintf("%s(input M%d float64 (%lld %lld)) ", s, i, (long long)d0, (long long)d1);
    d0 = d1;
  }
  for (int i = 1; i < n; i++) e = rg_gc_sprintf("(dot %s M%d)", e, i);
  return rg_gc_sprintf("%s(output %s))", s, e);
}

typedef struct chain_case { rg_rewriter *rw; const char *text; size_t nodes; } chain_case;

static void chain_once(void *ud) {
  chain_case *c = ud;
  rg_egraph *eg = rg_egraph_new(graph(c->text));
  rg_egraph_add_rules(eg, c->rw);
  if (rg_egraph_run(eg, NULL) != RG_SEARCH_SATURATED) abort();
  rg_fgraph *g;
  double cost;
  bool exact;
  if (rg_egraph_extract(eg, rg_cost_flops(), 1, &g, &cost, &exact) != 1 || !exact) abort();
  c->nodes = rg_egraph_nnodes(eg);
  rg_egraph_free(eg);
}

static void bench_chain(const char *what, const char *text) {
  rg_rewriter *rw = rules(text);
  double t[10];
  size_t nodes = 0;
  for (int i = 0; i < 10; i++) {
    chain_case c = {rw, chain_text(10), 0};
    chain_once(&c); /* warm-up */
    double r[5];
    for (int j = 0; j < 5; j++) {
      double t0 = cpu_now();
      chain_once(&c);
      r[j] = cpu_now() - t0;
    }
    t[i] = bu_median(r, 5);
    nodes = c.nodes;
  }
  printf("chain10 %-9s saturate+exact extract: median %.3f ms per chain (%zu e-nodes)\n", what,
         1e3 * bu_median(t, 10), nodes);
}

/* ------------------------------------------------------------------ growth */

static const char *sum_text(const char *op, int n) {
  const char *s = "(graph ", *e = "x0";
  for (int i = 0; i < n; i++) s = rg_gc_sprintf("%s(input x%d float64 ()) ", s, i);
  for (int i = 1; i < n; i++) e = rg_gc_sprintf("(%s %s x%d)", op, e, i);
  return rg_gc_sprintf("%s(output %s))", s, e);
}

#define AC_PATTERNS                                                                 \
  "(defrule add-comm (pattern (add ?a ?b) (add ?b ?a)))"                            \
  "(defrule add-assoc (pattern (add (add ?a ?b) ?c) (add ?a (add ?b ?c))))"         \
  "(defrule mul-comm (pattern (mul ?a ?b) (mul ?b ?a)))"                            \
  "(defrule mul-assoc (pattern (mul (mul ?a ?b) ?c) (mul ?a (mul ?b ?c))))"

#define AC_RELATIONS                                                                \
  "(defrel (commo in out) (fresh (op a b) (== in `(,op ,a ,b)) (== out `(,op ,b ,a))))" \
  "(defrel (assoco in out) (fresh (op a b c) (== in `(,op (,op ,a ,b) ,c))"         \
  "  (== out `(,op ,a (,op ,b ,c)))))"                                              \
  "(defrule comm (in out) (commo in out) :tracks (add mul))"                        \
  "(defrule assoc (in out) (assoco in out) :tracks (add mul))"

typedef struct grow_case {
  rg_rewriter *rw;
  const char *text;
  int64_t limit;
  bool interpret;               /* relations in the interpreter (interpret_relations) */
  double made, net, seconds;
  const char *stop;
} grow_case;

/* Runs to saturation or the node limit.  `made`: e-nodes created (each
 * new hash-consed node, including those a later rebuild finds congruent
 * to another); `net`: the growth of the hash-cons table. */
static void grow_once(grow_case *c) {
  rg_egraph *eg = rg_egraph_new(graph(c->text));
  rg_egraph_add_rules(eg, c->rw);
  size_t n0 = rg_egraph_nnodes(eg), m0 = eg->nnodes;
  rg_search_opts o = {.node_limit = c->limit, .iter_limit = 1000, .time_limit = 600, .no_backoff = true,
                      .interpret_relations = c->interpret};
  double t0 = cpu_now();
  rg_search_stop s = rg_egraph_run(eg, &o);
  c->seconds = cpu_now() - t0;
  c->made = (double)(eg->nnodes - m0);
  c->net = (double)(rg_egraph_nnodes(eg) - n0);
  c->stop = s == RG_SEARCH_SATURATED ? "saturated" : s == RG_SEARCH_NODE_LIMIT ? "node limit" : "other stop";
  rg_egraph_free(eg);
}

static void bench_growth(const char *what, const char *text, int64_t limit, int reps, bool interpret) {
  rg_rewriter *rw = rules(text);
  const char *ops[2] = {"add", "mul"};
  for (int n = 8; n <= 12; n += 2) {
    double made[8], net[8];
    grow_case c = {0};
    for (int i = 0; i < reps; i++) {
      c = (grow_case){rw, sum_text(ops[i % 2], n), limit, interpret, 0, 0, 0, NULL};
      grow_once(&c);
      made[i] = c.made / c.seconds;
      net[i] = c.net / c.seconds;
    }
    printf("growth %-9s %2d leaves: median %.0f e-nodes made per CPU second (%.0f net), %.0f made in %.3f s, %s\n",
           what, n, bu_median(made, (size_t)reps), bu_median(net, (size_t)reps), c.made, c.seconds, c.stop);
    fflush(stdout);
  }
}

/* ------------------------------------------------------------------ rebuild */

/* n leaves x_i and n e-nodes neg(x_i); merging x_i with x_{i+1} for all
 * i makes every neg node congruent: n - 1 merges of leaves, n - 1 more
 * found by the rebuild.  Returns the CPU seconds of the merges and the
 * rebuild. */
static double rebuild_once(int n) {
  rg_variable **xs = rg_gc_alloc((size_t)n * sizeof *xs), **ys = rg_gc_alloc((size_t)n * sizeof *ys);
  for (int i = 0; i < n; i++) {
    xs[i] = rg_input(C, NULL, rg_type_scalar(RG_FLOAT64));
    ys[i] = rg_neg(xs[i]);
  }
  rg_egraph *eg = rg_egraph_new(rg_fgraph_new(C, n, xs, n, ys, 0));
  uint32_t *cls = malloc((size_t)n * sizeof *cls);
  for (int i = 0; i < n; i++) cls[i] = (uint32_t)rg_egraph_class_of(eg, xs[i]);
  double t0 = cpu_now();
  for (int i = 0; i + 1 < n; i++) eg_union(eg, cls[i], cls[i + 1]);
  eg_rebuild(eg);
  double t = cpu_now() - t0;
  if (rg_egraph_nclasses(eg) != 2) abort();
  free(cls);
  rg_egraph_free(eg);
  return t;
}

static void bench_rebuild(int n) {
  double t[3];
  for (int i = 0; i < 3; i++) t[i] = rebuild_once(n);
  double m = bu_median(t, 3);
  printf("rebuild %8zu e-nodes: median %.3f ms (CPU) for %d merges, %.1f ns per e-node\n", (size_t)2 * n,
         1e3 * m, 2 * (n - 1), 1e9 * m / (2.0 * n));
  fflush(stdout);
}

int main(int argc, char **argv) {
  rg_init();
  rg_gc_warm();
  C = rg_ctx_new();
  bool all = argc < 2;
  for (int i = 1; i < argc || all; i++) {
    const char *w = all ? "all" : argv[i];
    if (all || !strcmp(w, "chain")) {
      bench_chain("pattern", "(defrule a1 (pattern (dot (dot ?a ?b) ?c) (dot ?a (dot ?b ?c))))"
                             "(defrule a2 (pattern (dot ?a (dot ?b ?c)) (dot (dot ?a ?b) ?c)))");
      bench_chain("relation", "(defrel (dot-assoco in out) (fresh (a b c) (== in `(dot (dot ,a ,b) ,c))"
                              " (== out `(dot ,a (dot ,b ,c)))))"
                              "(defrule dot-assoc (in out) (dot-assoco in out))");
    }
    if (all || !strcmp(w, "growth") || !strcmp(w, "growth-pattern"))
      bench_growth("pattern", AC_PATTERNS, 200000, 6, false);
    if (all || !strcmp(w, "growth") || !strcmp(w, "growth-relation"))
      bench_growth("relation", AC_RELATIONS, 50000, 4, false);
    if (all || !strcmp(w, "growth") || !strcmp(w, "growth-interpreted"))
      bench_growth("interpret", AC_RELATIONS, 50000, 4, true);
    if (all || !strcmp(w, "rebuild"))
      for (int n = 5000; n <= 500000; n *= 10) bench_rebuild(n);
    if (all) break;
  }
  return 0;
}
