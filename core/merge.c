/*
 * merge.c — merging equal computations in a FunctionGraph (hash-consing).
 *
 * One pass over the nodes in topological order.  Constants are made
 * canonical first (the first constant of each value, by type, weakness and
 * bytes, stands for all), so two nodes computing the same thing have
 * pointer-identical inputs by the time they are reached; a node whose
 * (op, inputs) key is already in the table has its outputs replaced by the
 * earlier node's, which precede every client in the order, so no repair of
 * the order is needed and the duplicate is pruned.  The cost is one hash
 * and probe per node plus the rewiring of duplicates' clients: linear.
 */
#include "core/core-impl.h"

/* The table of canonical items: the base map used as a multimap from an
 * item's hash to the item (hashes may collide; intern compares the items
 * themselves).  Collected memory, as the items are collected objects. */
typedef rg_map table;

static void table_init(table *t, size_t expect) {
  int rc = rg_map_init(t, &rgk_gc, expect);
  assert(rc == 0);
  (void)rc;
}

static uint64_t node_hash(const rg_node *n) {
  uint64_t h = rgc_mix(n->op->hash, (uint64_t)n->nin);
  for (int i = 0; i < n->nin; i++) h = rgc_mix(h, (uint64_t)(uintptr_t)n->inputs[i] >> 3);
  return h;
}

static bool same_node(const rg_node *a, const rg_node *b) {
  if (a->nin != b->nin || a->nout != b->nout || !rg_op_equal(a->op, b->op)) return false;
  for (int i = 0; i < a->nin; i++)
    if (a->inputs[i] != b->inputs[i]) return false;
  for (int k = 0; k < a->nout; k++)
    if (!rg_type_equal(a->outputs[k]->type, b->outputs[k]->type)) return false;
  return true;
}

typedef bool (*same_fn)(const void *a, const void *b);

/* The item equal to x (inserting x when there is none). */
static void *intern(table *t, void *x, uint64_t h, same_fn same) {
  h = rg_hash_key(h);
  for (rg_map_entry *e = rg_map_first(t, h); e; e = rg_map_next(t, e))
    if (same((void *)(uintptr_t)e->val, x)) return (void *)(uintptr_t)e->val;
  int rc = rg_map_add(t, h, (uint64_t)(uintptr_t)x);
  assert(rc == 0);
  (void)rc;
  return x;
}

static bool same_const(const void *a, const void *b) { return rg_constant_equal(a, b); }
static bool same_apply(const void *a, const void *b) { return same_node(a, b); }

/* Makes the constant inputs of n canonical. */
static size_t merge_constants(rg_fgraph *fg, table *consts, rg_node *n) {
  size_t merged = 0;
  for (int i = 0; i < n->nin; i++) {
    rg_variable *x = n->inputs[i];
    if (!rg_is_constant(x)) continue;
    rg_variable *c = intern(consts, x, rg_constant_hash(x), same_const);
    if (c == x) continue;
    merged += x->nclients == 1;
    rgc_change_unchecked(fg, n, i, c, "merge");
  }
  return merged;
}

int rg_fgraph_merge(rg_fgraph *fg, size_t *merged) {
  if (fg->frozen) return rg_error(fg->ctx, RG_ERR_TYPE, "the inner graph of an op cannot change");
  size_t count = 0;
  table consts, nodes;
  table_init(&consts, 64);
  table_init(&nodes, fg->nnodes);
  /* Walking the order list directly is safe: merging only prunes the
   * current node and its ancestors (earlier), never moves or adds nodes. */
  for (rg_node *x = fg->head, *next; x; x = next) {
    next = x->next;
    if (next) /* likely the next probe's slot (a hint: merging x may change next's inputs) */
      __builtin_prefetch(&nodes.e[rg_map_home(&nodes, rg_hash_key(node_hash(next)))]);
    count += merge_constants(fg, &consts, x);
    rg_node *c = intern(&nodes, x, node_hash(x), same_apply);
    if (c == x || c->fgraph != fg) continue; /* a canonical node always keeps a client */
    for (int o = 0; o < x->nout; o++) rgc_replace_unchecked(fg, x->outputs[o], c->outputs[o], "merge");
    count += (size_t)x->nout;
  }
  for (int k = 0; k < fg->nout; k++) {
    rg_variable *x = fg->outputs[k];
    if (!rg_is_constant(x)) continue;
    rg_variable *c = intern(&consts, x, rg_constant_hash(x), same_const);
    if (c != x) rgc_change_unchecked(fg, NULL, k, c, "merge"), count++;
  }
  if (merged) *merged = count;
  return RG_OK;
}
