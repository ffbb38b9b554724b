/*
 * cycle.c — exact detection of a graph state seen before.
 *
 * A cycle is the whole graph returning to an earlier state, nothing less:
 * the same rule rewriting equal subterms at two depths is no cycle.  States
 * are compared exactly by value numbering (hash-consing): every variable of
 * the graph gets a number such that two variables have the same number if
 * and only if they compute the same expression (same ops with equal
 * parameters, same output indices, the same graph inputs, equal constants,
 * equal types: a rewrite that only tells a value's sizes is progress).
 * The numbers come from two tables that compare keys exactly (a hash only
 * chooses the bucket) and that only grow during a run, so a number once
 * given always means the same expression.  A graph state is then the tuple
 * of its outputs' numbers, and two states are equal exactly when their
 * tuples are.
 *
 * Numbers are memoised per variable and kept up to date incrementally: when
 * a node's input changes, the numbers of its outputs and of everything
 * computed from them are forgotten (a walk along the clients that stops at
 * variables already without a number), and computing the outputs' tuple
 * numbers again only what was forgotten.  Invariant: a variable with a
 * number has inputs with numbers, so the walk may stop early.  A rewrite
 * thus costs work in proportion to what it changed and everything above
 * it, not to the graph.
 *
 * Everything here is collected memory: the tables (base maps on kanren's
 * collected allocator) hold graph pointers.
 */
#include "rewrites/rewrite-impl.h"
#include "base/base.h"
#include "kanren/kanren-impl.h"

#include <assert.h>
#include <string.h>

/* ------------------------------------------------------------------ a map from pointers to numbers */

/* The base map from a variable's address to its number; a zero value
 * means absent (numbers start at 1). */
typedef rg_map pmap;

static uint64_t pm_get(const pmap *m, const void *k) {
  uint64_t *v = rg_map_get(m, (uint64_t)(uintptr_t)k);
  return v ? *v : 0;
}

static void pm_put(pmap *m, const void *k, uint64_t v) {
  int rc = rg_map_put(m, (uint64_t)(uintptr_t)k, v);
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
}

/* ------------------------------------------------------------------ hash-consing tables */

/* An expression key: an op's output over numbered inputs, or a constant
 * (op NULL, konst set).  Equal keys get the same number. */
typedef struct key {
  uint64_t hash;
  const rg_op *op;
  const rg_variable *konst;
  const rg_type *type; /* the output's (NULL for constants) */
  int32_t index, nin;
  const uint64_t *in;
  uint64_t num;
} key;

/* The keys by hash: the base map as a multimap from a key's hash to the
 * key (equal hashes are told apart by key_equal). */
typedef rg_map ktable;

static bool key_equal(const key *a, const key *b) {
  if (a->hash != b->hash || a->index != b->index || a->nin != b->nin) return false;
  if (a->konst || b->konst) return a->konst && b->konst && rg_constant_equal(a->konst, b->konst);
  if (a->nin && memcmp(a->in, b->in, (size_t)a->nin * sizeof *a->in)) return false;
  if (!rg_type_equal(a->type, b->type)) return false;
  return a->op == b->op || rg_op_equal(a->op, b->op);
}

/* The number of an expression: the one given to an equal key before, or
 * `fresh` (the caller's next number) for a key never seen. */
static uint64_t kt_number(ktable *t, const key *k, uint64_t *fresh) {
  uint64_t h = rg_hash_key(k->hash);
  for (rg_map_entry *e = rg_map_first(t, h); e; e = rg_map_next(t, e)) {
    const key *old = (const key *)(uintptr_t)e->val;
    if (key_equal(old, k)) return old->num;
  }
  key *c = rg_gc_alloc(sizeof *c);
  *c = *k;
  if (k->nin) {
    uint64_t *in = rg_gc_alloc((size_t)k->nin * sizeof *in);
    memcpy(in, k->in, (size_t)k->nin * sizeof *in);
    c->in = in;
  }
  c->num = (*fresh)++;
  int rc = rg_map_add(t, h, (uint64_t)(uintptr_t)c);
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
  return c->num;
}

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

/* ------------------------------------------------------------------ states */

/* A graph state seen: its output numbers and the step after which it was
 * seen.  The states seen are a multimap from their hash to the state. */
typedef struct state { uint64_t hash; const uint64_t *outs; int64_t step; } state;

struct rgr_states {
  rg_fgraph *fg;
  pmap num;           /* variable -> number (0: not numbered now) */
  ktable exprs;       /* expression keys -> numbers */
  uint64_t next;      /* the next fresh number */
  rg_map seen;
  rgr_nodes pending;  /* work stack of the walks */
};

rgr_states *rgr_states_new(rg_fgraph *fg) {
  rgr_states *s = rg_gc_alloc(sizeof *s);
  s->fg = fg;
  s->next = 1;
  s->num.a = s->exprs.a = s->seen.a = &rgk_gc;
  return s;
}

/* A variable computed by no node: a constant by value, anything else by
 * identity (a graph input is only ever equal to itself). */
static uint64_t number_leaf(rgr_states *s, const rg_variable *v) {
  if (!rg_is_constant(v)) {
    uint64_t n = s->next++;
    pm_put(&s->num, v, n);
    return n;
  }
  key k = {.hash = mix(0xc0, rg_constant_hash(v)), .konst = v, .index = -1};
  uint64_t n = kt_number(&s->exprs, &k, &s->next);
  pm_put(&s->num, v, n);
  return n;
}

/* Numbers the outputs of a node whose inputs all have numbers. */
static void number_node(rgr_states *s, const rg_node *node) {
  uint64_t in[node->nin > 0 ? node->nin : 1];
  uint64_t h = rg_op_hash(node->op);
  for (int i = 0; i < node->nin; i++) h = mix(h, in[i] = pm_get(&s->num, node->inputs[i]));
  for (int o = 0; o < node->nout; o++) {
    const rg_type *t = node->outputs[o]->type;
    key k = {.hash = mix(mix(h, (uint64_t)o), rg_type_hash(t)), .op = node->op, .type = t, .index = o,
             .nin = node->nin, .in = in};
    pm_put(&s->num, node->outputs[o], kt_number(&s->exprs, &k, &s->next));
  }
}

/* The number of v, numbering what it depends on first (post-order on an
 * explicit stack: graphs may be far deeper than the C stack). */
static uint64_t number_of(rgr_states *s, const rg_variable *v) {
  uint64_t n = pm_get(&s->num, v);
  if (n) return n;
  if (!v->owner) return number_leaf(s, v);
  int base = s->pending.n;
  rgr_nodes_push(&s->pending, v->owner);
  while (s->pending.n > base) {
    rg_node *node = s->pending.v[s->pending.n - 1];
    int before = s->pending.n;
    for (int i = 0; i < node->nin; i++) {
      const rg_variable *x = node->inputs[i];
      if (pm_get(&s->num, x)) continue;
      if (x->owner) rgr_nodes_push(&s->pending, x->owner);
      else number_leaf(s, x);
    }
    if (s->pending.n == before) {
      s->pending.n--;
      if (!pm_get(&s->num, node->outputs[0])) number_node(s, node);
    }
  }
  return pm_get(&s->num, v);
}

void rgr_states_changed(rgr_states *s, rg_node *node) {
  int base = s->pending.n;
  rgr_nodes_push(&s->pending, node);
  while (s->pending.n > base) {
    rg_node *n = s->pending.v[--s->pending.n];
    for (int o = 0; o < n->nout; o++) {
      rg_variable *v = n->outputs[o];
      if (!pm_get(&s->num, v)) continue;
      pm_put(&s->num, v, 0);
      for (uint32_t c = 0; c < v->nclients; c++)
        if (v->clients[c].node) rgr_nodes_push(&s->pending, v->clients[c].node);
    }
  }
}

static bool same_state(const state *a, uint64_t hash, const uint64_t *outs, int nout) {
  return a->hash == hash && !memcmp(a->outs, outs, (size_t)nout * sizeof *outs);
}

int64_t rgr_states_visit(rgr_states *s, int64_t step) {
  int nout = rg_fgraph_noutputs(s->fg);
  uint64_t *outs = rg_gc_alloc((size_t)(nout > 0 ? nout : 1) * sizeof *outs);
  uint64_t hash = 0x5eed;
  for (int i = 0; i < nout; i++) hash = mix(hash, outs[i] = number_of(s, rg_fgraph_output(s->fg, i)));
  uint64_t key = rg_hash_key(hash);
  for (rg_map_entry *e = rg_map_first(&s->seen, key); e; e = rg_map_next(&s->seen, e)) {
    const state *old = (const state *)(uintptr_t)e->val;
    if (same_state(old, hash, outs, nout)) return old->step;
  }
  state *x = rg_gc_alloc(sizeof *x);
  *x = (state){hash, outs, step};
  int rc = rg_map_add(&s->seen, key, (uint64_t)(uintptr_t)x);
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
  return -1;
}
