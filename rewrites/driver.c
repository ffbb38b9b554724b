/*
 * driver.c — the equilibrium driver.
 *
 * A worklist of nodes, first every node of the graph in topological order.
 * Each node taken from the front meets the node rewriters that track its
 * op, in registration order, until one applies.  The nodes a rewrite
 * creates and the nodes whose inputs it changes go back to the front of the
 * worklist at once (earliest first), so a chain of rewrites costs work in
 * proportion to the rewrites, never a pass over the whole graph per step.
 * When the worklist is empty, the graph rewriters of the selection run; if
 * they change the graph, every node is queued again.
 *
 * Budgets: each rewriter may apply at most max_use_ratio times the largest
 * graph size seen (counted up to max_use_ratio times the starting size, so
 * a rule that grows the graph with every use still runs out).  Cycles: a
 * cycle is the whole graph returning to a state seen before, compared
 * exactly (cycle.c numbers expressions by hash-consing), and the rules
 * applied between the two visits are named.  Recording starts once a run
 * has made as many rewrites as the graph's largest size: a run that ends
 * sooner cannot be cycling forever, and a cycle is still found one period
 * after that, long before any budget (8 times the size by default) ends
 * it.  Rewrites that would break the
 * graph (a type that changes, a replacement that depends on what it
 * replaces) are rejected by the FunctionGraph, reverted, and counted.
 */
#include "rewrites/rewrite-impl.h"
#include "base/base.h"

#include <assert.h>
#include <stdio.h>

/* ------------------------------------------------------------------ the worklist */

/* Rewriters, with their indices in the selection's node rewriters. */
typedef struct rwlist { rg_rewriter **v; int *idx; int n; } rwlist;

/* A set of node ids: the base map (keys id + 1, as 0 marks an empty
 * slot), on the aborting heap allocator: the graph's change callbacks that
 * fill it cannot report running out of memory. */
typedef rg_map idset;

static bool ids_has(const idset *s, uint64_t id) { return rg_map_has(s, id + 1); }

static void ids_put(idset *s, uint64_t id) {
  int rc = rg_map_put(s, id + 1, 0);
  assert(rc == 0 && "the aborting allocator does not fail");
  (void)rc;
}

static void ids_del(idset *s, uint64_t id) { rg_map_del(s, id + 1); }

typedef struct eq {
  rg_rewrite_run *run;
  rg_fgraph *fg;
  rwlist node_rws, graph_rws;
  rwlist byop[RG_OP_COUNT];
  int64_t *uses;            /* per node rewriter (index in node_rws) */
  rgr_stat **stats;         /* per node rewriter, made at its first attempt */
  /* The worklist, in two parts.  Nodes a rewrite created or changed wait
   * on a stack (the earliest on top), deduplicated by `queued`; they go
   * first.  Then the graph's nodes as they were when the pass began, in
   * topological order: a snapshot array walked by index, so the common
   * node, never touched, costs no set operation.  A node may come twice
   * (touched, then met again in the snapshot); rewriters fail quickly on
   * a node they already rejected.  Both arrays are collected memory, so a
   * node pruned from the graph stays valid until it is skipped. */
  rgr_nodes stack;
  idset queued;
  rg_node **snap;
  size_t nsnap, isnap, capsnap;
  /* nodes imported (nimported first ones) and nodes given new inputs
   * during the current replacement */
  rgr_nodes touched;
  int nimported;
  /* Cycle detection, from the rewrite numbered `first` on: the states
   * seen, and the rule of each rewrite since (rules[k]: rewrite first+k+1). */
  rgr_states *states;
  int64_t first;
  const char **rules;
  size_t caprules;
  int64_t applied;          /* rewrites applied in this run */
  rg_feature feature;
  bool stop;
} eq;

static void push_touched(eq *e, rg_node *n) {
  if (!e->byop[n->op->code].n || ids_has(&e->queued, n->id)) return;
  rgr_nodes_push(&e->stack, n);
  ids_put(&e->queued, n->id);
}

/* The next node to visit, NULL when the worklist is empty. */
static rg_node *next_node(eq *e) {
  if (e->stack.n) {
    rg_node *n = e->stack.v[--e->stack.n];
    ids_del(&e->queued, n->id);
    return n;
  }
  return e->isnap < e->nsnap ? e->snap[e->isnap++] : NULL;
}

/* Queues every node some rewriter tracks; the others cost one look at
 * their op. */
static void queue_all(eq *e) {
  size_t n = rg_fgraph_nnodes(e->fg);
  if (n > e->capsnap) {
    e->snap = rg_gc_alloc(n * sizeof *e->snap);
    e->capsnap = n;
  }
  e->nsnap = e->isnap = 0;
  for (rg_node *x = rg_fgraph_first(e->fg); x; x = rg_fgraph_next(x))
    if (e->byop[x->op->code].n) e->snap[e->nsnap++] = x;
}

/* ------------------------------------------------------------------ watching the graph */

void rgr_nodes_push(rgr_nodes *a, rg_node *n) {
  if (a->n == a->cap) {
    int cap = a->cap ? 2 * a->cap : 64;
    rg_node **v = rg_gc_alloc((size_t)cap * sizeof *v);
    if (a->n) memcpy(v, a->v, (size_t)a->n * sizeof *v);
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = n;
}

static void touch(eq *e, rg_node *n) { rgr_nodes_push(&e->touched, n); }

static void on_import(rg_fgraph *fg, rg_node *node, const char *reason, rg_feature *f) {
  eq *e = f->ud;
  touch(e, node);
  /* keep imported nodes first */
  rg_node *t = e->touched.v[e->nimported];
  e->touched.v[e->nimported] = node;
  e->touched.v[e->touched.n - 1] = t;
  e->nimported++;
}

static void on_change_input(rg_fgraph *fg, rg_node *node, int i, rg_variable *old,
                            rg_variable *new_, const char *reason, rg_feature *f) {
  eq *e = f->ud;
  if (!node) return;
  touch(e, node);
  if (e->states) rgr_states_changed(e->states, node);
}

int rgr_keep_live_in_order(const rg_fgraph *fg, rg_node **v, int n) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (v[i]->fgraph == fg) v[k++] = v[i];
  rg_fgraph_sort_nodes(v, (size_t)k);
  return k;
}

/* Queues the touched nodes still in the graph, earliest on top. */
static void requeue_touched(eq *e) {
  int k = rgr_keep_live_in_order(e->fg, e->touched.v, e->touched.n);
  for (int i = k - 1; i >= 0; i--) push_touched(e, e->touched.v[i]);
}

/* ------------------------------------------------------------------ stopping */

static void stop_with(eq *e, rg_stop_reason why, const char *msg) {
  e->stop = true;
  if (e->run->stop == RG_STOP_EQUILIBRIUM) {
    e->run->stop = why;
    e->run->stop_msg = msg;
  }
}

/* The rules of the rewrites after rewrite `since`, each named once, in
 * the order they first applied. */
static const char *rules_since(const eq *e, int64_t since) {
  const char *names = NULL;
  for (int64_t k = since - e->first; k < e->applied - e->first; k++) {
    const char *r = e->rules[k];
    bool dup = false;
    for (int64_t j = since - e->first; j < k && !dup; j++) dup = !strcmp(e->rules[j], r);
    if (!dup) names = names ? rgr_sprintf("%s, %s", names, r) : r;
  }
  return names ? names : "";
}

static void cycle_found(eq *e, int64_t since) {
  stop_with(e, RG_STOP_CYCLE,
            rgr_sprintf("cycle: the graph returned to an earlier state, the one of %lld rewrites ago (rules: %s)",
                        (long long)(e->applied - since), rules_since(e, since)));
}

/* Cycle detection starts once a run has made as many rewrites as the
 * graph's largest size: the state before this rewrite is the first one
 * recorded. */
static void start_states(eq *e) {
  if (e->states || e->applied < (int64_t)e->run->max_nodes) return;
  e->states = rgr_states_new(e->fg);
  e->first = e->applied;
  rgr_states_visit(e->states, e->applied);
}

static void log_rule(eq *e, const char *rule) {
  size_t k = (size_t)(e->applied - 1 - e->first);
  if (k >= e->caprules) {
    size_t cap = e->caprules ? 2 * e->caprules : 256;
    const char **v = rg_gc_alloc(cap * sizeof *v);
    if (k) memcpy(v, e->rules, k * sizeof *v);
    e->rules = v;
    e->caprules = cap;
  }
  e->rules[k] = rule;
}

static bool over_budget(eq *e, int idx) {
  double limit = rgr_budget(e->run);
  if ((double)e->uses[idx] < limit) return false;
  rg_rewriter *rw = e->node_rws.v[idx];
  stop_with(e, RG_STOP_BUDGET,
            rgr_sprintf("budget of %s exhausted (%lld uses; max_use_ratio %g x %.0f nodes)", rw->name,
                        (long long)e->uses[idx], e->run->opts.max_use_ratio,
                        limit / e->run->opts.max_use_ratio));
  return true;
}

/* ------------------------------------------------------------------ applying a rewrite */

static void after_apply(eq *e, rg_rewriter *rw, rgr_stat *st, rg_node *node, int n,
                        rg_variable **olds, rg_variable **news) {
  int ncreated = 0;
  for (int i = 0; i < e->nimported; i++)
    if (e->touched.v[i]->fgraph == e->fg) ncreated++;
  st->applied++;
  st->created += ncreated;
  e->run->cur->rewrites++;
  rgr_record(e->run, rw, node, n, olds, news, e->nimported, e->touched.v);
  rgr_note_size(e->run, e->fg);
  if (e->states) {
    log_rule(e, rw->name);
    int64_t since = rgr_states_visit(e->states, e->applied);
    if (since >= 0) cycle_found(e, since);
  }
  requeue_touched(e);
}

/* Tries one rewriter on a node: 1 applied, 0 not, < 0 error. */
static int try_rewriter(eq *e, rg_rewriter *rw, int idx, rg_node *node) {
  int k = node->nout > 0 ? node->nout : 1;
  rg_variable *out[k], *olds[k], *news[k];
  rgr_stat *st = e->stats[idx] ? e->stats[idx] : (e->stats[idx] = rgr_stat_of(e->run, rw));
  int rc = rgr_attempt(e->run, rw, st, node, out);
  if (rc <= 0) return rc;
  int n = rgr_changes(node, out, olds, news);
  if (!n || !rgr_types_ok(e->run, rw, st, n, olds, news)) return 0;
  if (over_budget(e, idx)) return 0;
  start_states(e);
  e->touched.n = e->nimported = 0;
  if (rg_fgraph_replace_all(e->fg, n, olds, news, rw->name) != RG_OK) {
    st->rejected++;
    rgr_reject(e->run, rw, node, olds[0], news[0]);
    return 0;
  }
  e->uses[idx]++;
  e->applied++;
  after_apply(e, rw, st, node, n, olds, news);
  return 1;
}

/* Runs the rewriters tracking the node until one applies. */
static int visit(eq *e, rg_node *node) {
  const rwlist *l = &e->byop[node->op->code];
  for (int i = 0; i < l->n && !e->stop; i++) {
    rg_rewriter *rw = l->v[i];
    if (node->op->code == RG_OP_OPAQUE && !rgr_tracks(rw, node)) continue;
    int rc = try_rewriter(e, rw, l->idx[i], node);
    if (rc < 0) {
      stop_with(e, RG_STOP_ERROR, rgr_sprintf("error in %s: %s", rw->name, rg_errmsg(e->run->C)));
      return rc;
    }
    if (rc > 0) return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ setup */

static void push_rw(rwlist *l, rg_rewriter *rw, int idx) {
  rg_rewriter **v = rg_gc_alloc((size_t)(l->n + 1) * sizeof *v);
  int *ix = rg_gc_alloc((size_t)(l->n + 1) * sizeof *ix);
  if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v), memcpy(ix, l->idx, (size_t)l->n * sizeof *ix);
  v[l->n] = rw;
  ix[l->n++] = idx;
  l->v = v;
  l->idx = ix;
}

static void flatten(eq *e, const rgr_selection *sel) {
  for (int i = 0; i < sel->n; i++) {
    const rgr_item *it = &sel->items[i];
    if (it->sub) flatten(e, it->sub);
    else if (it->rw->kind == RW_NODE) {
      rgr_refresh_tracks(it->rw);
      push_rw(&e->node_rws, it->rw, e->node_rws.n);
    }
    else push_rw(&e->graph_rws, it->rw, e->graph_rws.n);
  }
}

static void index_by_op(eq *e) {
  for (int c = 0; c < RG_OP_COUNT; c++)
    for (int i = 0; i < e->node_rws.n; i++) {
      rg_rewriter *rw = e->node_rws.v[i];
      if (rw->track_all || (rw->tracks[c / 64] >> (c % 64) & 1)) push_rw(&e->byop[c], rw, i);
    }
}

static int run_graph_rewriters(eq *e) {
  int changes = 0;
  for (int i = 0; i < e->graph_rws.n && !e->stop; i++) {
    int rc = rgr_run_rewriter(e->run, e->graph_rws.v[i]);
    if (rc < 0) {
      stop_with(e, RG_STOP_ERROR,
                rgr_sprintf("error in %s: %s", e->graph_rws.v[i]->name, rg_errmsg(e->run->C)));
      return rc;
    }
    changes += rc;
  }
  return changes;
}

static int drain(eq *e) {
  rg_node *n;
  while (!e->stop && (n = next_node(e))) {
    if (n->fgraph != e->fg) continue;
    int rc = visit(e, n);
    if (rc < 0) return rc;
  }
  return 0;
}

int rgr_equilibrium(rg_rewrite_run *run, rgr_selection *sel) {
  eq e = {.run = run, .fg = run->fg, .queued = {.a = &rg_heap_abort}};
  flatten(&e, sel);
  index_by_op(&e);
  e.uses = rg_gc_alloc((size_t)(e.node_rws.n + 1) * sizeof(int64_t));
  e.stats = rg_gc_alloc((size_t)(e.node_rws.n + 1) * sizeof *e.stats);
  e.feature = (rg_feature){.name = "equilibrium", .ud = &e, .on_import = on_import,
                           .on_change_input = on_change_input};
  rgr_pass *outer = run->cur;
  rgr_pass *p = rgr_pass_begin(run, sel->name, true);
  run->cur = p;
  int rc = rg_fgraph_attach(run->fg, &e.feature);
  int64_t before = run->rewrites;
  if (rc >= 0) rc = run_graph_rewriters(&e);
  if (rc >= 0) {
    queue_all(&e);
    rc = drain(&e);
  }
  /* graph rewriters again, and all nodes again, while they change things */
  while (rc >= 0 && !e.stop && e.graph_rws.n > 0) {
    int g = run_graph_rewriters(&e);
    if (g <= 0) {
      rc = g < 0 ? g : rc;
      break;
    }
    queue_all(&e);
    rc = drain(&e);
  }
  rg_fgraph_detach(run->fg, &e.feature);
  rg_map_free(&e.queued);
  p->stop = e.stop ? run->stop_msg : "equilibrium";
  rgr_pass_end(run, p);
  run->cur = outer;
  return rc < 0 ? rc : (int)(run->rewrites - before);
}
