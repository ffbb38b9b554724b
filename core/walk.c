/*
 * walk.c — whole-graph walks: the memo map, topological sort from scratch,
 * ancestors, cloning (of subgraphs and of FunctionGraphs) and
 * equal_computations.
 *
 * Every walk is iterative: an explicit stack of (node, state) pairs for the
 * depth-first ones, so a chain of a million nodes costs memory, not C
 * stack.  Visited nodes are recognised by node->mark holding the walk's
 * epoch (a number never used before), so no set needs to be built or
 * cleared.
 */
#include "core/core-impl.h"

#include <stdlib.h>

/* ------------------------------------------------------------------ scratch stacks */

void rgc_sgrow(rgc_scratch *s) {
  if (!s->a) s->a = &rg_heap_abort;
  int rc = rg_words_reserve(s, s->n + 1);
  assert(rc == 0 && "the aborting allocator does not fail");
  (void)rc;
}

void rgc_sfree(rgc_scratch *s) { rg_words_free(s); }

/* ------------------------------------------------------------------ memo */

/* The base map from key address to value, in collected memory (keys and
 * values are collected objects the memo keeps alive). */
struct rg_memo { rg_map m; };

rg_memo *rg_memo_new(void) {
  rg_memo *m = rgk_alloc(sizeof(rg_memo));
  m->m.a = &rgk_gc;
  return m;
}

void rg_memo_put(rg_memo *m, const void *key, void *value) {
  int rc = rg_map_put(&m->m, (uint64_t)(uintptr_t)key, (uint64_t)(uintptr_t)value);
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
}

void *rg_memo_get(const rg_memo *m, const void *key) {
  if (!m) return NULL;
  uint64_t *v = rg_map_get(&m->m, (uint64_t)(uintptr_t)key);
  return v ? (void *)(uintptr_t)*v : NULL;
}

size_t rg_memo_size(const rg_memo *m) { return m ? m->m.n : 0; }

/* ------------------------------------------------------------------ toposort */

/* Depth-first post-order over the owners of `outputs`, not entering
 * variables for which blocked() holds.  Returns the nodes. */
typedef bool (*blocked_fn)(const rg_variable *v, const void *ud);

static void visit(rgc_scratch *work, rg_variable *v, uint64_t epoch, blocked_fn blocked, const void *ud) {
  rg_node *n = v->owner;
  if (!n || n->mark == epoch || (blocked && blocked(v, ud))) return;
  rgc_spush(work, (uintptr_t)n);
  rgc_spush(work, 0);
}

/* The result as a collected array (the nodes stay reachable from the
 * outputs while the walk runs in scratch memory). */
static rg_node **collected_copy(rgc_scratch *out, size_t *count) {
  rg_node **r = rgk_alloc((out->n ? out->n : 1) * sizeof *r);
  if (out->n) memcpy(r, out->v, out->n * sizeof *r);
  *count = out->n;
  rgc_sfree(out);
  return r;
}

static rg_node **postorder(int nout, rg_variable *const *outputs, blocked_fn blocked,
                           const void *ud, size_t *count) {
  uint64_t epoch = rgc_new_epoch();
  rgc_scratch work = {0}, out = {0};
  for (int k = nout - 1; k >= 0; k--) {
    visit(&work, outputs[k], epoch, blocked, ud);
    while (work.n) {
      rg_node *n = (rg_node *)work.v[work.n - 2];
      if (work.v[work.n - 1]) {
        work.n -= 2;
        rgc_spush(&out, (uintptr_t)n);
        continue;
      }
      if (n->mark == epoch) { /* expanded through another path */
        work.n -= 2;
        continue;
      }
      n->mark = epoch; /* marked when expanded, so users always follow */
      work.v[work.n - 1] = 1;
      for (int i = n->nin - 1; i >= 0; i--) visit(&work, n->inputs[i], epoch, blocked, ud);
    }
  }
  rgc_sfree(&work);
  return collected_copy(&out, count);
}

static bool in_memo(const rg_variable *v, const void *memo) { return rg_memo_get(memo, v) != NULL; }

rg_node **rg_toposort(int nin, rg_variable *const *inputs, int nout, rg_variable *const *outputs,
                      size_t *n) {
  rg_memo *block = NULL;
  for (int i = 0; i < nin; i++)
    if (inputs[i] && inputs[i]->owner) {
      if (!block) block = rg_memo_new();
      rg_memo_put(block, inputs[i], inputs[i]);
    }
  /* outputs in reverse so the first output's nodes come first */
  rg_variable **rev = rgk_alloc((size_t)(nout ? nout : 1) * sizeof *rev);
  for (int k = 0; k < nout; k++) rev[k] = outputs[nout - 1 - k];
  return postorder(nout, rev, block ? in_memo : NULL, block, n);
}

rg_node **rg_toposort_above(int nout, rg_variable *const *outputs, blocked_fn leaf, const void *ud,
                            size_t *n) {
  rg_variable **rev = rgk_alloc((size_t)(nout ? nout : 1) * sizeof *rev);
  for (int k = 0; k < nout; k++) rev[k] = outputs[nout - 1 - k];
  return postorder(nout, rev, leaf, ud, n);
}

/* ------------------------------------------------------------------ ancestors */

rg_variable **rg_ancestors(int n, rg_variable *const *vars, int nblock,
                           rg_variable *const *blockers, size_t *count) {
  rg_memo *block = rg_memo_new(), *seen = rg_memo_new();
  for (int i = 0; i < nblock; i++) rg_memo_put(block, blockers[i], blockers[i]);
  size_t nn;
  rg_node **nodes = rg_toposort(nblock, blockers, n, vars, &nn);
  rgk_stack out = {0};
  for (size_t k = 0; k < nn; k++) {
    rg_node *x = nodes[k];
    for (int i = 0; i < x->nin; i++)
      if (!rg_memo_get(seen, x->inputs[i])) {
        rg_memo_put(seen, x->inputs[i], x);
        rgk_push(&out, (rgk_word)x->inputs[i]);
      }
    for (int j = 0; j < x->nout; j++)
      if (!rg_memo_get(seen, x->outputs[j])) {
        rg_memo_put(seen, x->outputs[j], x);
        rgk_push(&out, (rgk_word)x->outputs[j]);
      }
  }
  for (int i = 0; i < n; i++)
    if (vars[i] && !rg_memo_get(seen, vars[i])) {
      rg_memo_put(seen, vars[i], vars[i]);
      rgk_push(&out, (rgk_word)vars[i]);
    }
  (void)block;
  *count = out.n;
  return out.n ? (rg_variable **)out.v : rgk_alloc(sizeof(rg_variable *));
}

rg_variable **rg_graph_inputs(int n, rg_variable *const *vars, size_t *count) {
  size_t na;
  rg_variable **a = rg_ancestors(n, vars, 0, NULL, &na);
  size_t k = 0;
  for (size_t i = 0; i < na; i++)
    if (!a[i]->owner) a[k++] = a[i];
  *count = k;
  return a;
}

/* ------------------------------------------------------------------ cloning */

static rg_variable *copy_var(const rg_variable *v) {
  rg_variable *c = rgc_var_new(v->ctx, v->type);
  c->name = v->name;
  c->flags = v->flags;
  c->data = v->data;
  c->vhash = v->vhash;
  return c;
}

/* The copy of a leaf (owner-less, or blocked): memoised. */
static rg_variable *leaf(rg_memo *memo, rg_variable *v, unsigned flags) {
  rg_variable *c = rg_memo_get(memo, v);
  if (c) return c;
  bool copy = rg_is_constant(v) ? (flags & RG_CLONE_CONSTANTS) : (flags & RG_CLONE_INPUTS) && !v->owner;
  c = copy ? copy_var(v) : v;
  rg_memo_put(memo, v, c);
  return c;
}

/* Copies of the nodes of `nodes` (in topological order) go to copies[k];
 * each original is marked base + k meanwhile, so an input computed by an
 * earlier node finds its copy by index, with no hashing.  Other inputs are
 * leaves, looked up in (or added to) the memo. */
static rg_variable *copy_of_input(rg_memo *memo, rg_node **copies, uint64_t base, size_t n,
                                  rg_variable *x, unsigned flags) {
  rg_node *o = x->owner;
  if (o && o->mark >= base && o->mark < base + n) return copies[o->mark - base]->outputs[x->index];
  rg_variable *c = rg_memo_get(memo, x);
  return c ? c : leaf(memo, x, flags);
}

static rg_node **clone_nodes(rg_memo *memo, rg_node *const *nodes, size_t n, unsigned flags,
                             bool fill_memo) {
  rg_node **copies = rgk_alloc((n ? n : 1) * sizeof *copies);
  uint64_t base = rgc_new_epochs(n);
  for (size_t k = 0; k < n; k++) nodes[k]->mark = base + k;
  rg_variable *small[8];
  for (size_t k = 0; k < n; k++) {
    rg_node *x = nodes[k];
    rg_variable **in = x->nin <= 8 ? small : rgk_alloc((size_t)x->nin * sizeof *in);
    for (int i = 0; i < x->nin; i++) in[i] = copy_of_input(memo, copies, base, n, x->inputs[i], flags);
    copies[k] = rg_node_clone_with(x, in);
  }
  if (fill_memo)
    for (size_t k = 0; k < n; k++) {
      rg_memo_put(memo, nodes[k], copies[k]);
      for (int o = 0; o < nodes[k]->nout; o++) rg_memo_put(memo, nodes[k]->outputs[o], copies[k]->outputs[o]);
    }
  return copies;
}

/* The copy of an output variable after clone_nodes. */
static rg_variable *copy_of_output(rg_memo *memo, rg_node **copies, uint64_t base, size_t n,
                                   rg_variable *x, unsigned flags) {
  return copy_of_input(memo, copies, base, n, x, flags);
}

int rg_clone(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
             rg_variable *const *outputs, rg_memo *memo, unsigned flags, rg_variable **out) {
  bool fill = memo != NULL;
  if (!memo) memo = rg_memo_new();
  for (int i = 0; i < nin; i++) {
    if (!inputs[i]) return rg_error_null(C, "clone: input %d is NULL", i);
    leaf(memo, inputs[i], flags);
  }
  for (int k = 0; k < nout; k++)
    if (!outputs[k]) return rg_error_null(C, "clone: output %d is NULL", k);
  rg_variable **rev = rgk_alloc((size_t)(nout ? nout : 1) * sizeof *rev);
  for (int k = 0; k < nout; k++) rev[k] = outputs[nout - 1 - k];
  size_t nn;
  rg_node **nodes = postorder(nout, rev, in_memo, memo, &nn);
  rg_node **copies = clone_nodes(memo, nodes, nn, flags, fill);
  uint64_t base = nn ? nodes[0]->mark : 0;
  for (int k = 0; k < nout; k++) out[k] = copy_of_output(memo, copies, base, nn, outputs[k], flags);
  return RG_OK;
}

/* Clones fg's nodes in its own order: no search, no hashing per node, and
 * the copy is attached directly in that order. */
rg_fgraph *rg_fgraph_clone(rg_fgraph *fg, rg_memo *memo) {
  bool fill = memo != NULL;
  if (!memo) memo = rg_memo_new();
  unsigned flags = RG_CLONE_INPUTS | RG_CLONE_CONSTANTS;
  rg_variable **in = rgk_alloc((size_t)(fg->nin ? fg->nin : 1) * sizeof *in);
  for (int i = 0; i < fg->nin; i++) in[i] = leaf(memo, fg->inputs[i], flags);
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  rg_node **copies = clone_nodes(memo, order, n, flags, fill);
  uint64_t base = n ? order[0]->mark : 0;
  rg_variable **out = rgk_alloc((size_t)(fg->nout ? fg->nout : 1) * sizeof *out);
  for (int k = 0; k < fg->nout; k++) out[k] = copy_of_output(memo, copies, base, n, fg->outputs[k], flags);
  rg_fgraph *c = rgc_fgraph_from_order(fg->ctx, fg->nin, in, fg->nout, out, copies, n);
  return c;
}

/* ------------------------------------------------------------------ equal_computations */

/* Pairs x <-> y must correspond one to one. */
static bool pair(rg_memo *xy, rg_memo *yx, const void *x, const void *y, bool *seen) {
  const void *a = rg_memo_get(xy, x), *b = rg_memo_get(yx, y);
  *seen = a != NULL;
  if (a || b) return a == y && b == x;
  rg_memo_put(xy, x, (void *)y);
  rg_memo_put(yx, y, (void *)x);
  return true;
}

static bool same_leaf(const rg_variable *x, const rg_variable *y) {
  if (rg_is_constant(x) || rg_is_constant(y)) return rg_constant_equal(x, y);
  return x == y;
}

static bool same_node_shape(const rg_node *a, const rg_node *b) {
  return a->nin == b->nin && a->nout == b->nout && rg_op_equal(a->op, b->op);
}

bool rg_equal_computations(int n, rg_variable *const *xs, rg_variable *const *ys, int nin,
                           rg_variable *const *in_xs, rg_variable *const *in_ys) {
  rg_memo *xy = rg_memo_new(), *yx = rg_memo_new();
  bool seen;
  for (int i = 0; i < nin; i++)
    if (!pair(xy, yx, in_xs[i], in_ys[i], &seen)) return false;
  RGK_LOCAL_STACK(work, 64);
  for (int k = n - 1; k >= 0; k--) {
    rgk_push(&work, (rgk_word)xs[k]);
    rgk_push(&work, (rgk_word)ys[k]);
  }
  while (work.n) {
    rg_variable *y = (rg_variable *)work.v[--work.n], *x = (rg_variable *)work.v[--work.n];
    if (!x || !y || !rg_type_equal(x->type, y->type)) return false;
    if (rg_is_constant(x) || rg_is_constant(y)) { /* by value: one constant may stand for two equal ones */
      if (!rg_constant_equal(x, y)) return false;
      continue;
    }
    if (!pair(xy, yx, x, y, &seen)) return false;
    if (seen) continue;
    if (!x->owner || !y->owner) {
      if (x->owner || y->owner || !same_leaf(x, y)) return false;
      continue;
    }
    if (x->index != y->index || !same_node_shape(x->owner, y->owner)) return false;
    if (!pair(xy, yx, x->owner, y->owner, &seen)) return false;
    if (seen) continue;
    for (int i = x->owner->nin - 1; i >= 0; i--) {
      rgk_push(&work, (rgk_word)x->owner->inputs[i]);
      rgk_push(&work, (rgk_word)y->owner->inputs[i]);
    }
  }
  return true;
}
