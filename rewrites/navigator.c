/*
 * navigator.c — navigators: graph rewriters that walk the graph once,
 * trying node rewriters on each node (Aesara's WalkingGraphRewriter).
 *
 * The walk starts from the graph's topological order (inputs to outputs)
 * or its reverse.  Nodes are kept on an explicit stack, so the next one
 * popped is the next in the walk.  A rewrite's new nodes are pushed on top,
 * in the walk's order, and visited before the walk goes on — unless the
 * navigator ignores new nodes, in which case each node of the graph as it
 * was meets the rewriters once (an expansion x -> f(x) applies once per
 * original node instead of forever).  Replaced nodes left on the stack are
 * skipped when popped.  Rewrites are checked as the equilibrium driver
 * checks them (types, the FunctionGraph's validation), and each rewriter
 * has the same use budget.
 */
#include "rewrites/rewrite-impl.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct navigator {
  const char *name;
  rg_nav_order order;
  bool ignore_new;
  int n;
  rg_rewriter **rws;
} navigator;

/* One walk: the stack of nodes and the nodes imported by the rewrite in
 * progress. */
typedef struct walk {
  rg_rewrite_run *run;
  rg_fgraph *fg;
  const navigator *nav;
  rg_node **stack;
  size_t sp, cap;
  rgr_nodes made;
  int64_t *uses;
  int changes;
  bool stop;
} walk;

static void push(walk *w, rg_node *n) {
  if (w->sp == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 256;
    rg_node **v = rg_gc_alloc(cap * sizeof *v);
    if (w->sp) memcpy(v, w->stack, w->sp * sizeof *v);
    w->stack = v;
    w->cap = cap;
  }
  w->stack[w->sp++] = n;
}

static void on_import(rg_fgraph *fg, rg_node *node, const char *reason, rg_feature *f) {
  rgr_nodes_push(&((walk *)f->ud)->made, node);
}

/* The new nodes, so that they pop in the walk's order. */
static void push_made(walk *w) {
  int k = rgr_keep_live_in_order(w->fg, w->made.v, w->made.n);
  bool forward = w->nav->order == RG_NAV_IN_TO_OUT;
  for (int i = 0; i < k; i++) push(w, w->made.v[forward ? k - 1 - i : i]);
}

static bool over_budget(walk *w, int idx) {
  rg_rewrite_run *run = w->run;
  double limit = rgr_budget(run);
  if ((double)w->uses[idx] < limit) return false;
  w->stop = true;
  if (run->stop == RG_STOP_EQUILIBRIUM) {
    run->stop = RG_STOP_BUDGET;
    run->stop_msg = rgr_sprintf("budget of %s exhausted (%lld uses; max_use_ratio %g x %.0f nodes)",
                                w->nav->rws[idx]->name, (long long)w->uses[idx],
                                run->opts.max_use_ratio, limit / run->opts.max_use_ratio);
  }
  return true;
}

/* Applies a rewriter's proposal: 1 applied, 0 rejected or over budget. */
static int apply(walk *w, rg_rewriter *rw, int idx, rg_node *node, rg_variable **out) {
  rg_rewrite_run *run = w->run;
  rgr_stat *st = rgr_stat_of(run, rw);
  int k = node->nout > 0 ? node->nout : 1;
  rg_variable *olds[k], *news[k];
  int n = rgr_changes(node, out, olds, news);
  if (!rgr_types_ok(run, rw, st, n, olds, news)) return 0;
  if (!n || over_budget(w, idx)) return 0;
  w->made.n = 0;
  if (rg_fgraph_replace_all(w->fg, n, olds, news, rw->name) != RG_OK) {
    st->rejected++;
    rgr_reject(run, rw, node, olds[0], news[0]);
    return 0;
  }
  w->uses[idx]++;
  st->applied++;
  st->created += w->made.n;
  rgr_record(run, rw, node, n, olds, news, w->made.n, w->made.v);
  rgr_note_size(run, w->fg);
  if (!w->nav->ignore_new) push_made(w);
  return 1;
}

/* The rewriters tracking the node, in order, until one applies. */
static int visit(walk *w, rg_node *node) {
  for (int i = 0; i < w->nav->n && !w->stop; i++) {
    rg_rewriter *rw = w->nav->rws[i];
    if (rw->kind != RW_NODE || !rgr_tracks(rw, node)) continue;
    rg_variable *out[node->nout > 0 ? node->nout : 1];
    int rc = rgr_attempt(w->run, rw, rgr_stat_of(w->run, rw), node, out);
    if (rc < 0) return rc;
    if (rc > 0 && apply(w, rw, i, node, out)) {
      w->changes++;
      return 1;
    }
  }
  return 0;
}

static void start(walk *w) {
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(w->fg, &n);
  bool forward = w->nav->order == RG_NAV_IN_TO_OUT;
  for (size_t i = 0; i < n; i++) push(w, order[forward ? n - 1 - i : i]);
}

static int run_walk(walk *w) {
  start(w);
  while (w->sp && !w->stop) {
    rg_node *node = w->stack[--w->sp];
    if (node->fgraph != w->fg) continue;
    int rc = visit(w, node);
    if (rc < 0) return rc;
  }
  return RG_OK;
}

/* Whether a walk could apply anything: some rewriter tracks an op the
 * graph has (new nodes are only made by rewrites, so none otherwise). */
static bool worth_walking(const navigator *nav, const rg_fgraph *fg) {
  for (int i = 0; i < nav->n; i++)
    if (nav->rws[i]->kind == RW_NODE && rgr_tracks_any(nav->rws[i], fg)) return true;
  return false;
}

static int navigate(rg_rewrite_run *run, rg_fgraph *fg, void *ud) {
  const navigator *nav = ud;
  for (int i = 0; i < nav->n; i++)
    if (nav->rws[i]->kind == RW_NODE) rgr_refresh_tracks(nav->rws[i]);
  if (!worth_walking(nav, fg)) return 0;
  walk w = {.run = run, .fg = fg, .nav = nav};
  w.uses = rg_gc_alloc(((size_t)nav->n + 1) * sizeof *w.uses);
  rg_feature f = {.name = "navigator", .ud = &w, .on_import = on_import};
  rgr_pass *outer = run->cur;
  rgr_pass *p = rgr_pass_begin(run, nav->name, false);
  run->cur = p;
  int rc = rg_fgraph_attach(fg, &f);
  if (rc >= 0) {
    rc = run_walk(&w);
    rg_fgraph_detach(fg, &f);
  }
  p->rewrites = w.changes;
  rgr_pass_end(run, p);
  run->cur = outer;
  /* rgr_record counted each rewrite already; the caller counts the
   * changes a graph rewriter returns, so take them back here. */
  run->rewrites -= w.changes;
  return rc < 0 ? rc : w.changes;
}

rg_rewriter *rg_navigator(const char *name, rg_nav_order order, bool ignore_new, int n,
                          rg_rewriter *const *rws) {
  navigator *nav = rg_gc_alloc(sizeof *nav);
  nav->name = rgr_sprintf("%s", name);
  nav->order = order;
  nav->ignore_new = ignore_new;
  nav->n = n;
  nav->rws = rg_gc_alloc((size_t)(n ? n : 1) * sizeof *nav->rws);
  if (n) memcpy(nav->rws, rws, (size_t)n * sizeof *nav->rws);
  rg_rewriter *rw = rg_graph_rewriter(name, navigate, nav);
  rw->describe = rgr_sprintf("a walk %s%s", order == RG_NAV_IN_TO_OUT ? "from inputs to outputs" : "from outputs to inputs",
                             ignore_new ? ", new nodes left alone" : "");
  return rw;
}
