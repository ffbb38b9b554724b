/*
 * fgraph.c — FunctionGraph: ownership of nodes, the clients index, import
 * and pruning, input changes and replacement with validation, features,
 * checkpoints and revert.
 *
 * Clients live in the variables themselves (an array per variable) with
 * back-indices in the nodes (node->cpos) and in the graph (out_cpos), so a
 * use is added or removed in O(1), whatever the number of uses.  This is
 * why a node belongs to at most one FunctionGraph.
 *
 * Importing a variable collects, by an iterative depth-first walk, the
 * nodes computing it that are not in the graph yet, checking every leaf
 * (an input of the graph, a constant, or else a missing input) before
 * anything is attached; the new nodes then enter the order right where
 * they are needed (before the node that will use them).  Pruning is a
 * worklist: a node whose outputs lost their last client leaves, and its
 * inputs are examined in turn.
 *
 * Every change of an input goes through apply_change(), which imports,
 * rewires the clients, repairs the order for the new edge, records history
 * when a checkpoint is open, tells the features and prunes.  Revert replays
 * the recorded changes backwards through the same function.
 */
#include "core/core-impl.h"

#include <stdlib.h>

#ifdef RG_DEBUG_CHECKS
static void debug_check(rg_fgraph *fg, const char *where);
#define DEBUG_CHECK(fg, where) debug_check(fg, where)
#else
#define DEBUG_CHECK(fg, where) ((void)0)
#endif

/* ------------------------------------------------------------------ clients */

void rgc_add_client(rg_variable *v, rg_node *node, int i, uint32_t *pos) {
  if (v->nclients == v->cap_clients) {
    uint32_t cap = v->cap_clients ? v->cap_clients * 2 : RGC_INLINE_CLIENTS;
    rg_client *c = rgk_alloc(cap * sizeof *c);
    if (v->nclients) memcpy(c, v->clients, v->nclients * sizeof *c);
    v->clients = c;
    v->cap_clients = cap;
  }
  *pos = v->nclients;
  v->clients[v->nclients++] = (rg_client){node, i};
}

void rgc_remove_client(rg_variable *v, uint32_t pos) {
  assert(pos < v->nclients);
  uint32_t last = --v->nclients;
  if (pos != last) {
    rg_client m = v->clients[last];
    v->clients[pos] = m;
    if (m.node)
      m.node->cpos[m.index] = pos;
    else
      v->fgraph->out_cpos[m.index] = pos;
  }
  v->clients[last] = (rg_client){NULL, 0};
}

/* ------------------------------------------------------------------ small helpers */

static uint64_t next_epoch = 1;

uint64_t rgc_new_epoch(void) { return __atomic_fetch_add(&next_epoch, 1, __ATOMIC_RELAXED); }
uint64_t rgc_new_epochs(uint64_t n) { return __atomic_fetch_add(&next_epoch, n, __ATOMIC_RELAXED); }

static const char *var_desc(const rg_variable *v) {
  if (v->name) return rgk_sprintf("'%s' (%s)", v->name, rg_type_str(v->type));
  return rgk_sprintf("of type %s", rg_type_str(v->type));
}

static int fg_error(rg_fgraph *fg, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fg_error(rg_fgraph *fg, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(fg->ctx, code, "%s", msg);
}

static int frozen_error(rg_fgraph *fg) {
  return fg_error(fg, RG_ERR_TYPE, "the inner graph of an op cannot change");
}

/* ------------------------------------------------------------------ import */

/* The graph-level state of one import: new nodes in topological order and
 * constants to attach. */
typedef struct importing {
  rgc_scratch nodes, consts, work; /* all reachable from the imported variable */
  uint64_t epoch;
} importing;

/* Checks an owner-less leaf; constants not yet in a graph are collected. */
static int check_leaf(rg_fgraph *fg, importing *im, rg_variable *x, const rg_node *user) {
  if (x->fgraph == fg) return RG_OK;
  if (x->fgraph)
    return fg_error(fg, RG_ERR_TYPE, "variable %s belongs to another FunctionGraph (clone it)",
                    var_desc(x));
  if (rg_is_constant(x)) {
    rgc_spush(&im->consts, (uintptr_t)x);
    return RG_OK;
  }
  return fg_error(fg, RG_ERR_NAME, "missing input: variable %s is needed%s%s but is not an input "
                  "of the graph", var_desc(x), user ? " by " : "", user ? rg_op_name(user->op) : "");
}

/* Examines an input of `user`: a leaf to check, a node to visit, or
 * nothing to do.  Pushes nodes to visit on the work stack. */
static int visit_var(rg_fgraph *fg, importing *im, rg_variable *x, const rg_node *user) {
  rg_node *o = x->owner;
  if (!o) return check_leaf(fg, im, x, user);
  if (o->fgraph == fg || o->mark == im->epoch) return RG_OK;
  if (o->fgraph)
    return fg_error(fg, RG_ERR_TYPE, "a node applying %s belongs to another FunctionGraph (clone "
                    "it)", rg_op_name(o->op));
  rgc_spush(&im->work, (uintptr_t)o);
  rgc_spush(&im->work, 0);
  return RG_OK;
}

/* Collects the nodes computing v that are not in fg, inputs first.  A node
 * is marked when it is expanded (not when pushed), so one reached again
 * through a later path is still emitted before its users. */
static int collect(rg_fgraph *fg, importing *im, rg_variable *v) {
  int rc = visit_var(fg, im, v, NULL);
  while (rc == RG_OK && im->work.n) {
    uintptr_t state = im->work.v[im->work.n - 1];
    rg_node *n = (rg_node *)im->work.v[im->work.n - 2];
    if (state) { /* inputs done */
      im->work.n -= 2;
      rgc_spush(&im->nodes, (uintptr_t)n);
      continue;
    }
    if (n->mark == im->epoch) { /* expanded through another path */
      im->work.n -= 2;
      continue;
    }
    n->mark = im->epoch;
    im->work.v[im->work.n - 1] = 1;
    for (int i = n->nin - 1; i >= 0 && rc == RG_OK; i--) rc = visit_var(fg, im, n->inputs[i], n);
  }
  return rc;
}

static void attach_node(rg_fgraph *fg, rg_node *n) {
  n->fgraph = fg;
  for (int k = 0; k < n->nout; k++) n->outputs[k]->fgraph = fg;
  for (int i = 0; i < n->nin; i++) rgc_add_client(n->inputs[i], n, i, &n->cpos[i]);
  fg->nnodes++;
  fg->nbycode[n->op->code]++;
}

/* Where new nodes go: before `anchor` (the node that will use them) unless
 * one of their inputs comes later; at the end without an anchor. */
static rg_node *insertion_point(rg_fgraph *fg, importing *im, rg_node *anchor, bool *append) {
  *append = !anchor;
  if (!anchor) return NULL;
  rg_node *maxw = NULL;
  for (size_t k = 0; k < im->nodes.n; k++) {
    rg_node *n = (rg_node *)im->nodes.v[k];
    for (int i = 0; i < n->nin; i++) {
      rg_node *o = n->inputs[i]->owner;
      if (o && o->fgraph == fg && (!maxw || o->label > maxw->label)) maxw = o;
    }
  }
  if (!maxw || maxw->label < anchor->label) return anchor->prev;
  return maxw;
}

static void notify_import(rg_fgraph *fg, rg_node *n, const char *reason) {
  for (int f = 0; f < fg->nfeat; f++)
    if (fg->features[f]->on_import) fg->features[f]->on_import(fg, n, reason, fg->features[f]);
}

/* Imports what v needs; new nodes are placed before `anchor`. */
static void importing_free(importing *im) {
  rgc_sfree(&im->nodes);
  rgc_sfree(&im->consts);
  rgc_sfree(&im->work);
}

static int import_var(rg_fgraph *fg, rg_variable *v, rg_node *anchor, const char *reason) {
  if (v->fgraph == fg) return RG_OK;
  importing im = {.epoch = rgc_new_epoch()};
  int rc = collect(fg, &im, v);
  if (rc != RG_OK) {
    importing_free(&im);
    return rc;
  }
  for (size_t k = 0; k < im.consts.n; k++) ((rg_variable *)im.consts.v[k])->fgraph = fg;
  bool append;
  rg_node *prev = insertion_point(fg, &im, anchor, &append);
  for (size_t k = 0; k < im.nodes.n; k++) {
    rg_node *n = (rg_node *)im.nodes.v[k];
    attach_node(fg, n);
    if (append) {
      rgc_order_append(fg, n);
    } else {
      rgc_order_insert_after(fg, prev, n);
      prev = n;
    }
  }
  if (im.nodes.n) fg->version++;
  for (size_t k = 0; k < im.nodes.n; k++) notify_import(fg, (rg_node *)im.nodes.v[k], reason);
  importing_free(&im);
  return RG_OK;
}

/* ------------------------------------------------------------------ prune */

static void notify_prune(rg_fgraph *fg, rg_node *n, const char *reason) {
  for (int f = 0; f < fg->nfeat; f++)
    if (fg->features[f]->on_prune) fg->features[f]->on_prune(fg, n, reason, fg->features[f]);
}

static bool node_unused(const rg_node *n) {
  for (int k = 0; k < n->nout; k++)
    if (n->outputs[k]->nclients) return false;
  return true;
}

static void detach_node(rg_fgraph *fg, rg_node *n, rgk_stack *work) {
  rgc_order_remove(fg, n);
  fg->nnodes--;
  fg->nbycode[n->op->code]--;
  for (int i = 0; i < n->nin; i++) {
    rgc_remove_client(n->inputs[i], n->cpos[i]);
    rgk_push(work, (rgk_word)n->inputs[i]);
  }
  n->fgraph = NULL;
  for (int k = 0; k < n->nout; k++) n->outputs[k]->fgraph = NULL;
}

static bool is_graph_input(const rg_fgraph *fg, const rg_variable *v) {
  return !v->owner && !rg_is_constant(v) && v->fgraph == fg;
}

/* Removes what no longer contributes to an output, starting from v. */
static void prune_from(rg_fgraph *fg, rg_variable *v, const char *reason) {
  RGK_LOCAL_STACK(work, 256);
  rgk_push(&work, (rgk_word)v);
  while (work.n) {
    rg_variable *x = (rg_variable *)work.v[--work.n];
    if (x->nclients || x->fgraph != fg || is_graph_input(fg, x)) continue;
    if (!x->owner) {
      x->fgraph = NULL; /* a constant no longer used */
      continue;
    }
    rg_node *n = x->owner;
    if (!node_unused(n)) continue;
    detach_node(fg, n, &work);
    fg->version++;
    notify_prune(fg, n, reason);
  }
}

/* ------------------------------------------------------------------ changes */

static void record(rg_fgraph *fg, rg_node *node, int i, rg_variable *old, rg_variable *new_) {
  if (fg->nhist == fg->cap_hist) {
    size_t cap = fg->cap_hist ? fg->cap_hist * 2 : 8;
    rgc_change *h = rgk_alloc(cap * sizeof *h);
    if (fg->nhist) memcpy(h, fg->hist, fg->nhist * sizeof *h);
    fg->hist = h;
    fg->cap_hist = cap;
  }
  fg->hist[fg->nhist++] = (rgc_change){node, i, old, new_};
}

static void notify_change(rg_fgraph *fg, rg_node *node, int i, rg_variable *old, rg_variable *new_,
                          const char *reason) {
  for (int f = 0; f < fg->nfeat; f++)
    if (fg->features[f]->on_change_input)
      fg->features[f]->on_change_input(fg, node, i, old, new_, reason, fg->features[f]);
}

/* Rewires one use; the new variable is already in the graph. */
static void rewire(rg_fgraph *fg, rg_node *node, int i, rg_variable *old, rg_variable *new_) {
  /* the clients index: a use knows its position among its variable's clients */
  assert(old->clients[node ? node->cpos[i] : fg->out_cpos[i]].node == node &&
         old->clients[node ? node->cpos[i] : fg->out_cpos[i]].index == i);
  if (node) {
    rgc_remove_client(old, node->cpos[i]);
    node->inputs[i] = new_;
    rgc_add_client(new_, node, i, &node->cpos[i]);
  } else {
    rgc_remove_client(old, fg->out_cpos[i]);
    fg->outputs[i] = new_;
    rgc_add_client(new_, NULL, i, &fg->out_cpos[i]);
  }
}

/* The one place inputs change (validation is the caller's). */
static int apply_change(rg_fgraph *fg, rg_node *node, int i, rg_variable *new_, const char *reason,
                        bool rec) {
  assert(!node || (node->fgraph == fg && i >= 0 && i < node->nin));
  rg_variable *old = node ? node->inputs[i] : fg->outputs[i];
  if (old == new_) return RG_OK;
  int rc = import_var(fg, new_, node, reason);
  if (rc != RG_OK) return rc;
  rewire(fg, node, i, old, new_);
  if (node && new_->owner && new_->owner->fgraph == fg) {
    rc = rgc_order_edge(fg, new_->owner, node);
    assert(rc == RG_OK); /* cycles are refused before any change */
  }
  fg->version++;
  if (rec && fg->recording) record(fg, node, i, old, new_);
  notify_change(fg, node, i, old, new_, reason);
  prune_from(fg, old, reason);
  return RG_OK;
}

/* Would making new_ an input of node close a cycle (node computes new_)?
 * Nodes of the graph ordered before node cannot reach it. */
static bool reaches(rg_fgraph *fg, rg_variable *from, rg_node *node, const rg_variable *target) {
  uint64_t epoch = rgc_new_epoch();
  RGK_LOCAL_STACK(work, 256);
  rgk_push(&work, (rgk_word)from);
  while (work.n) {
    rg_variable *x = (rg_variable *)work.v[--work.n];
    if (x == target) return true;
    rg_node *o = x->owner;
    if (!o || o->mark == epoch) continue;
    o->mark = epoch;
    if (o == node && !target) return true;
    if (node && o->fgraph == fg && o->label <= node->label) continue;
    for (int i = 0; i < o->nin; i++) rgk_push(&work, (rgk_word)o->inputs[i]);
  }
  return false;
}

static int check_types(rg_fgraph *fg, const rg_variable *old, const rg_variable *new_) {
  if (rg_type_stands_for(new_->type, old->type)) return RG_OK;
  return fg_error(fg, RG_ERR_TYPE, "type mismatch: cannot replace %s by %s", rg_type_str(old->type),
                  rg_type_str(new_->type));
}

int rg_fgraph_change_input(rg_fgraph *fg, rg_node *node, int i, rg_variable *new_,
                           const char *reason) {
  if (!new_) return rg_error_null(fg->ctx, "change_input: NULL variable");
  if (fg->frozen) return frozen_error(fg);
  if (node ? node->fgraph != fg || i < 0 || i >= node->nin : i < 0 || i >= fg->nout)
    return fg_error(fg, RG_ERR_TYPE, "change_input: no input %d of that node in this graph", i);
  rg_variable *old = node ? node->inputs[i] : fg->outputs[i];
  int rc = check_types(fg, old, new_);
  if (rc != RG_OK) return rc;
  if (node && reaches(fg, new_, node, NULL))
    return fg_error(fg, RG_ERR_TYPE, "change_input: the new input depends on the node (a cycle)");
  rc = apply_change(fg, node, i, new_, reason, true);
  DEBUG_CHECK(fg, "change_input");
  return rc;
}

static int replace_one(rg_fgraph *fg, rg_variable *old, rg_variable *new_, const char *reason) {
  if (!old || !new_) return fg_error(fg, RG_ERR_TYPE, "replace: NULL variable");
  if (old->fgraph != fg) return fg_error(fg, RG_ERR_TYPE, "replace: the variable %s is not in the graph", var_desc(old));
  if (old == new_) return RG_OK;
  int rc = check_types(fg, old, new_);
  if (rc != RG_OK) return rc;
  rg_node *bound = old->owner && old->owner->fgraph == fg ? old->owner : NULL;
  if (reaches(fg, new_, bound, old))
    return fg_error(fg, RG_ERR_TYPE, "replace: the replacement depends on the variable it replaces");
  uint32_t n = old->nclients;
  rg_client *snap = rgk_alloc((n ? n : 1) * sizeof *snap);
  memcpy(snap, old->clients, n * sizeof *snap);
  for (uint32_t k = 0; k < n && rc == RG_OK; k++)
    rc = apply_change(fg, snap[k].node, snap[k].index, new_, reason, true);
  return rc;
}

/* For merging: every use of old (in the graph) becomes new_, which the
 * caller guarantees is earlier in the order and of an equal type. */
void rgc_replace_unchecked(rg_fgraph *fg, rg_variable *old, rg_variable *new_, const char *reason) {
  uint32_t n = old->nclients;
  rg_client small[8];
  rg_client *snap = n <= 8 ? small : rgk_alloc(n * sizeof *snap);
  memcpy(snap, old->clients, n * sizeof *snap);
  for (uint32_t k = 0; k < n; k++) apply_change(fg, snap[k].node, snap[k].index, new_, reason, true);
}

int rgc_change_unchecked(rg_fgraph *fg, rg_node *node, int i, rg_variable *new_, const char *reason) {
  return apply_change(fg, node, i, new_, reason, true);
}

int rg_fgraph_replace(rg_fgraph *fg, rg_variable *old, rg_variable *new_, const char *reason) {
  if (fg->frozen) return frozen_error(fg);
  int rc = replace_one(fg, old, new_, reason);
  DEBUG_CHECK(fg, "replace");
  return rc;
}

static int validate_features(rg_fgraph *fg) {
  for (int f = 0; f < fg->nfeat; f++) {
    rg_feature *ft = fg->features[f];
    int rc = ft->validate ? ft->validate(fg, ft) : RG_OK;
    if (rc != RG_OK) {
      if (!rg_errmsg(fg->ctx)[0]) fg_error(fg, rc, "feature %s refused the change", ft->name);
      return rc;
    }
  }
  return RG_OK;
}

int rg_fgraph_replace_all(rg_fgraph *fg, int n, rg_variable *const *olds,
                          rg_variable *const *news, const char *reason) {
  if (fg->frozen) return frozen_error(fg);
  bool was = fg->recording;
  size_t cp = rg_fgraph_checkpoint(fg);
  int rc = RG_OK;
  /* a variable nothing reads needs no replacement; it may even have left
   * the graph when an earlier replacement pruned its node (an unused
   * output of a node of several outputs) */
  for (int k = 0; k < n && rc == RG_OK; k++)
    if (!olds[k] || olds[k]->nclients) rc = replace_one(fg, olds[k], news[k], reason);
  if (rc == RG_OK) rc = validate_features(fg);
  if (rc != RG_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(fg->ctx));
    rg_fgraph_revert(fg, cp);
    rg_error(fg->ctx, rc, "%s", msg);
  }
  if (!was) {
    fg->nhist = cp;
    fg->recording = false;
  }
  DEBUG_CHECK(fg, "replace_all");
  return rc;
}

/* ------------------------------------------------------------------ checkpoints */

size_t rg_fgraph_checkpoint(rg_fgraph *fg) {
  fg->recording = true;
  return fg->nhist;
}

int rg_fgraph_revert(rg_fgraph *fg, size_t cp) {
  if (cp > fg->nhist) return fg_error(fg, RG_ERR_TYPE, "revert: no such checkpoint");
  while (fg->nhist > cp) {
    rgc_change c = fg->hist[--fg->nhist];
    int rc = apply_change(fg, c.node, c.i, c.old, "revert", false);
    assert(rc == RG_OK);
    (void)rc;
  }
  DEBUG_CHECK(fg, "revert");
  return RG_OK;
}

void rg_fgraph_commit(rg_fgraph *fg) {
  fg->nhist = 0;
  fg->recording = false;
  fg->hist = NULL;
  fg->cap_hist = 0;
}

/* ------------------------------------------------------------------ features */

int rg_fgraph_attach(rg_fgraph *fg, rg_feature *f) {
  for (int k = 0; k < fg->nfeat; k++)
    if (fg->features[k] == f) return RG_OK;
  if (f->on_attach) {
    int rc = f->on_attach(fg, f);
    if (rc != RG_OK) return rc;
  }
  if (fg->nfeat == fg->cap_feat) {
    int cap = fg->cap_feat ? fg->cap_feat * 2 : 4;
    rg_feature **a = rgk_alloc((size_t)cap * sizeof *a);
    if (fg->nfeat) memcpy(a, fg->features, (size_t)fg->nfeat * sizeof *a);
    fg->features = a;
    fg->cap_feat = cap;
  }
  fg->features[fg->nfeat++] = f;
  return RG_OK;
}

int rg_fgraph_detach(rg_fgraph *fg, rg_feature *f) {
  for (int k = 0; k < fg->nfeat; k++) {
    if (fg->features[k] != f) continue;
    memmove(fg->features + k, fg->features + k + 1, (size_t)(fg->nfeat - k - 1) * sizeof *fg->features);
    fg->nfeat--;
    if (f->on_detach) f->on_detach(fg, f);
    return RG_OK;
  }
  return fg_error(fg, RG_ERR_NAME, "detach: feature %s is not attached", f->name ? f->name : "?");
}

/* ------------------------------------------------------------------ construction */

static void push_output(rg_fgraph *fg, rg_variable *v) {
  if (fg->nout == fg->cap_out) {
    int cap = fg->cap_out ? fg->cap_out * 2 : 4;
    rg_variable **o = rgk_alloc((size_t)cap * sizeof *o);
    uint32_t *p = rgk_alloc_atomic((size_t)cap * sizeof *p);
    if (fg->nout) {
      memcpy(o, fg->outputs, (size_t)fg->nout * sizeof *o);
      memcpy(p, fg->out_cpos, (size_t)fg->nout * sizeof *p);
    }
    fg->outputs = o;
    fg->out_cpos = p;
    fg->cap_out = cap;
  }
  int k = fg->nout++;
  fg->outputs[k] = v;
  rgc_add_client(v, NULL, k, &fg->out_cpos[k]);
}

int rg_fgraph_add_output(rg_fgraph *fg, rg_variable *v, const char *reason) {
  if (!v) return rg_error_null(fg->ctx, "add_output: NULL variable");
  if (fg->frozen) return frozen_error(fg);
  int rc = import_var(fg, v, NULL, reason);
  if (rc != RG_OK) return rc;
  push_output(fg, v);
  fg->version++;
  DEBUG_CHECK(fg, "add_output");
  return fg->nout - 1;
}

static int add_inputs(rg_fgraph *fg, int nin, rg_variable *const *inputs) {
  fg->inputs = rgk_alloc((size_t)(nin ? nin : 1) * sizeof *fg->inputs);
  for (int i = 0; i < nin; i++) {
    rg_variable *v = inputs[i];
    if (!v) return fg_error(fg, RG_ERR_TYPE, "input %d is NULL", i);
    if (v->owner || rg_is_constant(v))
      return fg_error(fg, RG_ERR_TYPE, "input %d (%s) is %s, not a free variable", i, var_desc(v),
                      v->owner ? "computed by a node" : "a constant");
    if (v->fgraph == fg) return fg_error(fg, RG_ERR_TYPE, "input %d (%s) is given twice", i, var_desc(v));
    if (v->fgraph)
      return fg_error(fg, RG_ERR_TYPE, "input %d (%s) belongs to another FunctionGraph (clone it)", i,
                      var_desc(v));
    v->fgraph = fg;
    fg->inputs[fg->nin++] = v;
  }
  return RG_OK;
}

rg_fgraph *rg_fgraph_new(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                         rg_variable *const *outputs, unsigned flags) {
  if (nin < 0 || nout < 0 || (nin && !inputs) || (nout && !outputs)) {
    if (C) rg_error(C, RG_ERR_TYPE, "FunctionGraph: %d inputs and %d outputs, %s", nin, nout,
                    nin < 0 || nout < 0 ? "a negative count" : "a count without its array");
    return NULL;
  }
  for (int k = 0; k < nout; k++)
    if (!outputs[k]) { /* a failed construction's NULL keeps its error */
      if (C) rg_error_null(C, "FunctionGraph: output %d is NULL", k);
      return NULL;
    }
  rg_variable **in = (rg_variable **)inputs, **out = (rg_variable **)outputs;
  if (flags & RG_FG_CLONE) {
    rg_memo *memo = rg_memo_new();
    in = rgk_alloc((size_t)(nin ? nin : 1) * sizeof *in);
    out = rgk_alloc((size_t)(nout ? nout : 1) * sizeof *out);
    if (rg_clone(C, nin, inputs, nout, outputs, memo, RG_CLONE_INPUTS | RG_CLONE_CONSTANTS, out))
      return NULL;
    for (int i = 0; i < nin; i++) in[i] = rg_memo_get(memo, inputs[i]);
  }
  rg_fgraph *fg = rgk_alloc(sizeof *fg);
  fg->ctx = C;
  int rc = add_inputs(fg, nin, in);
  for (int k = 0; k < nout && rc == RG_OK; k++) {
    rc = import_var(fg, out[k], NULL, "init");
    if (rc == RG_OK) push_output(fg, out[k]);
  }
  if (rc != RG_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(C));
    rg_fgraph_release(fg);
    rg_error(C, rc, "FunctionGraph: %s", msg);
    return NULL;
  }
  fg->version++;
  DEBUG_CHECK(fg, "new");
  return fg;
}

/* A FunctionGraph over nodes already in topological order (a fresh copy
 * made by cloning): attaches them in that order, with no search.  Every
 * node input must be an input, a constant or an output of an earlier node
 * of the list, and every node must be needed by an output. */
rg_fgraph *rgc_fgraph_from_order(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                                 rg_variable *const *outputs, rg_node *const *nodes, size_t n) {
  rg_fgraph *fg = rgk_alloc(sizeof *fg);
  fg->ctx = C;
  if (add_inputs(fg, nin, inputs) != RG_OK) return NULL;
  for (size_t k = 0; k < n; k++) {
    rg_node *x = nodes[k];
    for (int i = 0; i < x->nin; i++)
      if (rg_is_constant(x->inputs[i])) x->inputs[i]->fgraph = fg;
    attach_node(fg, x);
    rgc_order_append(fg, x);
  }
  for (int k = 0; k < nout; k++) {
    if (rg_is_constant(outputs[k])) outputs[k]->fgraph = fg;
    push_output(fg, outputs[k]);
  }
  fg->version++;
  DEBUG_CHECK(fg, "clone");
  return fg;
}

static void release_var(rg_fgraph *fg, rg_variable *v) {
  if (v->fgraph != fg && v->fgraph) return;
  v->fgraph = NULL;
  v->nclients = 0;
}

void rg_fgraph_release(rg_fgraph *fg) {
  if (fg->frozen) return; /* an op's inner graph stays as it is */
  for (rg_node *n = fg->head, *next; n; n = next) {
    next = n->next;
    for (int i = 0; i < n->nin; i++) release_var(fg, n->inputs[i]);
    for (int k = 0; k < n->nout; k++) release_var(fg, n->outputs[k]);
    n->fgraph = NULL;
    n->prev = n->next = NULL;
  }
  for (int i = 0; i < fg->nin; i++) release_var(fg, fg->inputs[i]);
  for (int k = 0; k < fg->nout; k++) release_var(fg, fg->outputs[k]);
  fg->head = fg->tail = NULL;
  fg->nnodes = 0;
  memset(fg->nbycode, 0, sizeof fg->nbycode);
  fg->nin = fg->nout = 0;
  fg->version++;
  rg_fgraph_commit(fg);
}

/* ------------------------------------------------------------------ accessors */

rg_ctx *rg_fgraph_ctx(const rg_fgraph *fg) { return fg->ctx; }
int rg_fgraph_ninputs(const rg_fgraph *fg) { return fg->nin; }
int rg_fgraph_noutputs(const rg_fgraph *fg) { return fg->nout; }
rg_variable *rg_fgraph_input(const rg_fgraph *fg, int i) { return i >= 0 && i < fg->nin ? fg->inputs[i] : NULL; }
rg_variable *rg_fgraph_output(const rg_fgraph *fg, int i) { return i >= 0 && i < fg->nout ? fg->outputs[i] : NULL; }
size_t rg_fgraph_nnodes(const rg_fgraph *fg) { return fg->nnodes; }
size_t rg_fgraph_count_op(const rg_fgraph *fg, rg_opcode code) {
  return code >= 0 && code < RG_OP_COUNT ? fg->nbycode[code] : 0;
}
rg_node *rg_fgraph_first(const rg_fgraph *fg) { return fg->head; }
bool rg_fgraph_contains(const rg_fgraph *fg, const rg_variable *v) { return v && v->fgraph == fg; }

rg_node *const *rg_fgraph_toposort(rg_fgraph *fg, size_t *n) {
  if (!fg->topo || fg->topo_version != fg->version) {
    rg_node **a = rgk_alloc((fg->nnodes ? fg->nnodes : 1) * sizeof *a);
    size_t k = 0;
    for (rg_node *x = fg->head; x; x = x->next) a[k++] = x;
    fg->topo = a;
    fg->ntopo = k;
    fg->topo_version = fg->version;
  }
  *n = fg->ntopo;
  return fg->topo;
}

rg_node **rgc_import_order(rg_fgraph *fg, size_t *n) {
  rg_node **a = rgk_alloc((fg->nnodes ? fg->nnodes : 1) * sizeof *a);
  rgc_scratch work = {0};
  uint64_t epoch = rgc_new_epoch();
  size_t k = 0;
  for (int o = 0; o < fg->nout; o++) {
    if (fg->outputs[o]->owner) rgc_spush(&work, (uintptr_t)fg->outputs[o]->owner), rgc_spush(&work, 0);
    while (work.n) { /* collect()'s walk: inputs left to right, a node after them */
      rg_node *x = (rg_node *)work.v[work.n - 2];
      if (work.v[work.n - 1]) {
        work.n -= 2;
        a[k++] = x;
        continue;
      }
      if (x->mark == epoch) {
        work.n -= 2;
        continue;
      }
      x->mark = epoch;
      work.v[work.n - 1] = 1;
      for (int i = x->nin - 1; i >= 0; i--) {
        rg_node *y = x->inputs[i]->owner;
        if (y && y->mark != epoch) rgc_spush(&work, (uintptr_t)y), rgc_spush(&work, 0);
      }
    }
  }
  rgc_sfree(&work);
  *n = k;
  return a;
}

#ifdef RG_DEBUG_CHECKS
#include <stdio.h>
static void debug_check(rg_fgraph *fg, const char *where) {
  char saved[1024];
  int code = rg_errcode(fg->ctx);
  snprintf(saved, sizeof saved, "%s", rg_errmsg(fg->ctx));
  if (rg_fgraph_check(fg) != RG_OK) {
    fprintf(stderr, "relgraph: FunctionGraph invariant violated after %s: %s\n", where,
            rg_errmsg(fg->ctx));
    abort();
  }
  if (code) rg_error(fg->ctx, code, "%s", saved); else rg_clear_error(fg->ctx);
}
#endif
