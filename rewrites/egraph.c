/*
 * egraph.c — the e-graph: hash-consed e-nodes over e-classes, a
 * union-find, and the rebuild that restores congruence (after the egg
 * paper's deferred rebuilding).
 *
 * An e-node is a head (an op's output, or a leaf: a graph input or
 * constant) applied to child classes.  The hash-cons table maps each
 * canonical e-node to its id, so adding a node the e-graph has returns its
 * class.  Merging two classes links their union-find roots (the larger
 * keeps its place), concatenates their node and parent lists and queues
 * the root; eg_rebuild then re-canonicalizes the parents of every queued
 * class, and two parents that became equal merge their classes in turn,
 * until nothing is queued.  Work is proportional to the parents touched,
 * so rebuilding is linear in the merges (amortized, with union by size).
 *
 * Class data is the type: a new e-node's type is inferred by make_node on
 * its children's representative variables (a graph variable computing a
 * term of the class), which also rejects nodes that do not type-check.
 * Two classes of different types never merge: the merge is refused and
 * recorded with the rule that asked for it.  Types that differ only where
 * one knows a size the other does not merge, keeping the known size.
 */
#include "rewrites/egraph-impl.h"

#include <stdlib.h>

/* ------------------------------------------------------------------ small helpers */

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *q = realloc(p, c * elem);
  if (!q) abort(); /* out of memory: nothing sensible to keep */
  *cap = c;
  return q;
}

void eg_ids_push(eg_ids *a, uint32_t x) {
  if (a->n == a->cap) {
    size_t cap = a->cap;
    a->v = grow(a->v, &cap, (size_t)a->n + 1, sizeof *a->v);
    a->cap = (uint32_t)cap;
  }
  a->v[a->n++] = x;
}

static void *gc_grow(void *p, size_t n, size_t cap, size_t elem) {
  void *q = rg_gc_alloc(cap * elem);
  if (n) memcpy(q, p, n * elem);
  return q;
}

static inline uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

uint32_t eg_find_compress(rg_egraph *eg, uint32_t c) {
  while (eg->uf[c] != c) {
    eg->uf[c] = eg->uf[eg->uf[c]];
    c = eg->uf[c];
  }
  return c;
}

/* ------------------------------------------------------------------ heads */

static bool head_equal(const eg_head *h, const rg_op *op, rg_variable *leaf, int out) {
  if (leaf || h->leaf) {
    if (!leaf || !h->leaf) return false;
    return h->leaf == leaf || (rg_is_constant(leaf) && rg_is_constant(h->leaf) &&
                               rg_constant_equal(leaf, h->leaf));
  }
  return h->out == out && (h->op == op || rg_op_equal(h->op, op));
}

static uint64_t head_hash(const rg_op *op, rg_variable *leaf, int out) {
  if (!leaf) return mix(rg_op_hash(op), (uint64_t)out);
  if (rg_is_constant(leaf)) return mix(rg_constant_hash(leaf), 7);
  return mix(leaf->id, 11);
}

static void head_table_grow(rg_egraph *eg) {
  uint32_t cap = eg->cap_head_tab ? eg->cap_head_tab * 2 : 256;
  uint32_t *t = malloc(cap * sizeof *t);
  if (!t) abort();
  memset(t, 0xff, cap * sizeof *t);
  for (uint32_t i = 0; i < eg->nheads; i++) {
    uint32_t s = (uint32_t)eg->heads[i].hash & (cap - 1);
    while (t[s] != EG_NONE) s = (s + 1) & (cap - 1);
    t[s] = i;
  }
  free(eg->head_tab);
  eg->head_tab = t;
  eg->cap_head_tab = cap;
}

static uint32_t intern_head(rg_egraph *eg, const rg_op *op, rg_variable *leaf, int out) {
  if (2 * (eg->nheads + 1) > eg->cap_head_tab) head_table_grow(eg);
  uint64_t h = head_hash(op, leaf, out);
  uint32_t s = (uint32_t)h & (eg->cap_head_tab - 1);
  for (; eg->head_tab[s] != EG_NONE; s = (s + 1) & (eg->cap_head_tab - 1)) {
    const eg_head *e = &eg->heads[eg->head_tab[s]];
    if (e->hash == h && head_equal(e, op, leaf, out)) return eg->head_tab[s];
  }
  if (eg->nheads == eg->capheads) {
    uint32_t cap = eg->capheads ? 2 * eg->capheads : 64;
    eg->heads = gc_grow(eg->heads, eg->nheads, cap, sizeof *eg->heads);
    eg->capheads = cap;
  }
  eg->heads[eg->nheads] = (eg_head){op, leaf, out, op ? op->code : RG_OP_COUNT, h};
  eg->head_tab[s] = eg->nheads;
  return eg->nheads++;
}

uint32_t eg_intern_op(rg_egraph *eg, const rg_op *op, int out) { return intern_head(eg, op, NULL, out); }

const char *eg_head_str(const rg_egraph *eg, uint32_t head) {
  const eg_head *h = &eg->heads[head];
  if (h->leaf) return rg_to_string(rg_var_term(h->leaf));
  const char *s = rg_to_string(rg_op_term(h->op));
  return h->op->nout > 1 || h->out ? rgr_sprintf("%s.%d", s, h->out) : s;
}

/* ------------------------------------------------------------------ the hash-cons table */

static uint64_t node_hash(uint32_t head, uint32_t n, const uint32_t *ch) {
  uint64_t h = mix(0x51ed27, head);
  for (uint32_t i = 0; i < n; i++) h = mix(h, ch[i]);
  return h ^ (h >> 31);
}

static bool node_is(const rg_egraph *eg, uint32_t id, uint32_t head, uint32_t n, const uint32_t *ch) {
  const eg_node *x = &eg->nodes[id];
  return x->head == head && x->nch == n && !memcmp(eg_kids(eg, id), ch, n * sizeof *ch);
}

static void memo_insert_raw(rg_egraph *eg, uint32_t id);
static void memo_grow(rg_egraph *eg) {
  uint32_t *old = eg->memo;
  size_t oldcap = eg->capmemo;
  eg->capmemo = oldcap ? (eg->nmemo * 4 > oldcap ? oldcap * 2 : oldcap) : 1024;
  eg->memo = malloc(eg->capmemo * sizeof *eg->memo);
  if (!eg->memo) abort();
  memset(eg->memo, 0xff, eg->capmemo * sizeof *eg->memo);
  eg->nmemo = eg->ntomb = 0;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i] < EG_TOMB) memo_insert_raw(eg, old[i]);
  free(old);
}

/* The slot holding a node equal to (head, ch), or the free slot to use. */
static size_t memo_probe(const rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch,
                         bool *found) {
  size_t mask = eg->capmemo - 1, s = node_hash(head, n, ch) & mask, free_slot = SIZE_MAX;
  for (;; s = (s + 1) & mask) {
    uint32_t id = eg->memo[s];
    if (id == EG_NONE) break;
    if (id == EG_TOMB) {
      if (free_slot == SIZE_MAX) free_slot = s;
    } else if (node_is(eg, id, head, n, ch)) {
      *found = true;
      return s;
    }
  }
  *found = false;
  return free_slot != SIZE_MAX ? free_slot : s;
}

static void memo_insert_raw(rg_egraph *eg, uint32_t id) {
  bool found;
  size_t s = memo_probe(eg, eg->nodes[id].head, eg->nodes[id].nch, eg_kids(eg, id), &found);
  if (eg->memo[s] == EG_TOMB) eg->ntomb--;
  eg->memo[s] = id;
  eg->nmemo++;
}

static uint32_t memo_lookup(const rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch) {
  bool found;
  size_t s = memo_probe(eg, head, n, ch, &found);
  return found ? eg->memo[s] : EG_NONE;
}

/* Removes node id, found under its stored children. */
static void memo_remove(rg_egraph *eg, uint32_t id) {
  bool found;
  size_t s = memo_probe(eg, eg->nodes[id].head, eg->nodes[id].nch, eg_kids(eg, id), &found);
  if (!found || eg->memo[s] != id) return;
  eg->memo[s] = EG_TOMB;
  eg->nmemo--;
  eg->ntomb++;
}

static void memo_reserve(rg_egraph *eg) {
  if (2 * (eg->nmemo + eg->ntomb + 1) > eg->capmemo) memo_grow(eg);
}

/* ------------------------------------------------------------------ classes and nodes */

static uint32_t new_class(rg_egraph *eg, const rg_type *t, rg_variable *rep) {
  if (eg->ncls == eg->capcls) {
    uint32_t cap = eg->capcls ? 2 * eg->capcls : 256;
    size_t c = eg->capcls;
    eg->uf = grow(eg->uf, &c, cap, sizeof *eg->uf);
    c = eg->capcls;
    eg->cls = grow(eg->cls, &c, cap, sizeof *eg->cls);
    eg->types = gc_grow(eg->types, eg->ncls, cap, sizeof *eg->types);
    eg->reps = gc_grow(eg->reps, eg->ncls, cap, sizeof *eg->reps);
    eg->capcls = cap;
  }
  uint32_t c = eg->ncls++;
  eg->uf[c] = c;
  memset(&eg->cls[c], 0, sizeof eg->cls[c]);
  eg->cls[c].minnode = EG_NONE;
  eg->types[c] = t;
  eg->reps[c] = rep;
  eg->nlive++;
  return c;
}

static uint32_t new_node(rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch, uint32_t c) {
  if (eg->nnodes == eg->capnodes) {
    size_t cap = eg->capnodes;
    eg->nodes = grow(eg->nodes, &cap, (size_t)eg->nnodes + 1, sizeof *eg->nodes);
    eg->capnodes = (uint32_t)cap;
  }
  eg->kids = grow(eg->kids, &eg->capkids, eg->nkids + n, sizeof *eg->kids);
  uint32_t id = eg->nnodes++;
  eg->nodes[id] = (eg_node){head, n, (uint32_t)eg->nkids, c, 0, eg->iter};
  memcpy(eg->kids + eg->nkids, ch, n * sizeof *ch);
  eg->nkids += n;
  eg_ids_push(&eg->cls[c].nodes, id);
  if (eg->cls[c].minnode == EG_NONE) eg->cls[c].minnode = id;
  for (uint32_t i = 0; i < n; i++) eg_ids_push(&eg->cls[ch[i]].parents, id);
  const eg_head *h = &eg->heads[head];
  if (!h->leaf) eg_ids_push(&eg->byop[h->code], id);
  memo_insert_raw(eg, id);
  return id;
}

/* The type of head(children) and a variable computing it: `known`, or
 * one made from the children's representatives (NULL: does not
 * type-check; *head may become the op's canonical form). */
static rg_variable *infer(rg_egraph *eg, uint32_t *head, uint32_t n, const uint32_t *ch) {
  const eg_head *h = &eg->heads[*head];
  if (h->leaf) return h->leaf;
  rg_variable *small[8], **in = n <= 8 ? small : rg_gc_alloc(n * sizeof *in);
  for (uint32_t i = 0; i < n; i++) in[i] = eg->reps[ch[i]];
  rg_node *node = rg_make_node(eg->C, h->op, (int)n, in);
  if (!node || h->out >= node->nout) {
    if (rg_errcode(eg->C) != RG_ERR_NAME) rg_clear_error(eg->C);
    return NULL;
  }
  if (node->op != h->op && !rg_op_equal(node->op, h->op)) *head = intern_head(eg, node->op, NULL, h->out);
  return node->outputs[eg->heads[*head].out];
}

static uint32_t add_node(rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch,
                         rg_variable *known) {
  uint32_t small[16], *cc = n <= 16 ? small : malloc(n * sizeof *cc);
  for (uint32_t i = 0; i < n; i++) cc[i] = eg_find_compress(eg, ch[i]);
  memo_reserve(eg);
  uint32_t id = memo_lookup(eg, head, n, cc), c = EG_NONE;
  if (id != EG_NONE) c = eg_find_compress(eg, eg->nodes[id].cls);
  rg_variable *v = id != EG_NONE ? NULL : known ? known : infer(eg, &head, n, cc);
  if (v && !known && (id = memo_lookup(eg, head, n, cc)) != EG_NONE)
    c = eg_find_compress(eg, eg->nodes[id].cls); /* its canonical op was there */
  else if (v) {
    c = new_class(eg, v->type, v);
    new_node(eg, head, n, cc, c);
    rg_memo_put(eg->varcls, v, (void *)(uintptr_t)(c + 1));
  }
  if (cc != small) free(cc);
  return c;
}

uint32_t eg_add(rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch) {
  return add_node(eg, head, (uint32_t)nch, ch, NULL);
}

static uint32_t var_class(rg_egraph *eg, rg_variable *v) {
  uintptr_t c = (uintptr_t)rg_memo_get(eg->varcls, v);
  return c ? eg_find_compress(eg, (uint32_t)(c - 1)) : EG_NONE;
}

/* Adds node's output k as the e-node (op.k)(classes of its inputs). */
static uint32_t add_output(rg_egraph *eg, rg_node *node, int k) {
  uint32_t small[16], *ch = node->nin <= 16 ? small : malloc((size_t)node->nin * sizeof *ch);
  uint32_t c = EG_NONE;
  for (int i = 0; i < node->nin; i++)
    if ((ch[i] = var_class(eg, node->inputs[i])) == EG_NONE) goto out;
  c = add_node(eg, intern_head(eg, node->op, NULL, k), (uint32_t)node->nin, ch, node->outputs[k]);
  if (c != EG_NONE) rg_memo_put(eg->varcls, node->outputs[k], (void *)(uintptr_t)(c + 1));
out:
  if (ch != small) free(ch);
  return c;
}

static uint32_t add_leaf(rg_egraph *eg, rg_variable *v) {
  uint32_t c = add_node(eg, intern_head(eg, NULL, v, 0), 0, NULL, v);
  rg_memo_put(eg->varcls, v, (void *)(uintptr_t)(c + 1));
  return c;
}

uint32_t eg_add_var(rg_egraph *eg, rg_variable *v) {
  uint32_t c = var_class(eg, v);
  if (c != EG_NONE) return c;
  if (!v->owner) return add_leaf(eg, v);
  size_t n;
  rg_node **order = rg_toposort(0, NULL, 1, &v, &n);
  for (size_t i = 0; i < n; i++) {
    rg_node *node = order[i];
    for (int j = 0; j < node->nin; j++)
      if (!node->inputs[j]->owner && var_class(eg, node->inputs[j]) == EG_NONE)
        add_leaf(eg, node->inputs[j]);
    for (int k = 0; k < node->nout; k++)
      if (var_class(eg, node->outputs[k]) == EG_NONE && add_output(eg, node, k) == EG_NONE)
        return EG_NONE;
  }
  return var_class(eg, v);
}

uint32_t eg_lookup_var(rg_egraph *eg, rg_variable *v) {
  uint32_t c = var_class(eg, v);
  if (c != EG_NONE || !v->owner) return c;
  size_t n;
  rg_node **order = rg_toposort(0, NULL, 1, &v, &n);
  uint32_t small[16];
  for (size_t i = 0; i < n; i++) {
    rg_node *node = order[i];
    if (node->nin > 16) return EG_NONE;
    for (int j = 0; j < node->nin; j++)
      if ((small[j] = var_class(eg, node->inputs[j])) == EG_NONE) return EG_NONE;
    for (int k = 0; k < node->nout; k++) {
      uint32_t id = memo_lookup(eg, intern_head(eg, node->op, NULL, k), (uint32_t)node->nin, small);
      if (id == EG_NONE) continue;
      rg_memo_put(eg->varcls, node->outputs[k], (void *)(uintptr_t)(eg->nodes[id].cls + 1));
    }
  }
  return var_class(eg, v);
}

/* ------------------------------------------------------------------ merging */

#define MAX_REJECTIONS 64

static bool reject(rg_egraph *eg, uint32_t a, uint32_t b) {
  eg->nrejected++;
  if (!eg->rejections) eg->rejections = rg_gc_alloc(MAX_REJECTIONS * sizeof *eg->rejections);
  if (eg->nrejected <= MAX_REJECTIONS)
    eg->rejections[eg->nrejected - 1] = rgr_sprintf(
        "%s: would merge %s of type %s with %s of type %s", eg->cur_rule ? eg->cur_rule : "merge",
        rg_pprint_str(eg->reps[a]), rg_type_str(eg->types[a]), rg_pprint_str(eg->reps[b]),
        rg_type_str(eg->types[b]));
  return false;
}

static void append_ids(eg_ids *to, eg_ids *from) {
  for (uint32_t i = 0; i < from->n; i++) eg_ids_push(to, from->v[i]);
  free(from->v);
  *from = (eg_ids){0};
}

bool eg_union(rg_egraph *eg, uint32_t a, uint32_t b) {
  a = eg_find_compress(eg, a);
  b = eg_find_compress(eg, b);
  if (a == b) return true;
  const rg_type *ta = eg->types[a], *tb = eg->types[b];
  bool eq = ta == tb || rg_type_equal(ta, tb);
  if (!eq && !rg_type_is_subtype(ta, tb) && !rg_type_is_subtype(tb, ta)) return reject(eg, a, b);
  const rg_type *t = eq || rg_type_is_subtype(ta, tb) ? ta : tb;
  rg_variable *rep = t == ta ? eg->reps[a] : eg->reps[b];
  eg_class *A = &eg->cls[a], *B = &eg->cls[b];
  if (A->nodes.n + A->parents.n < B->nodes.n + B->parents.n) {
    uint32_t x = a; a = b; b = x;
    eg_class *X = A; A = B; B = X;
  }
  eg->uf[b] = a;
  append_ids(&A->nodes, &B->nodes);
  append_ids(&A->parents, &B->parents);
  if (B->minnode < A->minnode) A->minnode = B->minnode;
  eg->types[a] = t;
  eg->reps[a] = rep;
  eg->nlive--;
  eg_ids_push(&eg->pending, a);
  return true;
}

/* Re-canonicalizes the nodes using class c; equal ones merge. */
static void repair(rg_egraph *eg, uint32_t c) {
  eg_ids ps = eg->cls[c].parents;
  eg->cls[c].parents = (eg_ids){0};
  for (uint32_t i = 0; i < ps.n; i++) {
    uint32_t p = ps.v[i];
    eg_node *x = &eg->nodes[p];
    if (x->dead) continue;
    memo_remove(eg, p);
    uint32_t *k = eg->kids + x->ch;
    for (uint32_t j = 0; j < x->nch; j++) k[j] = eg_find_compress(eg, k[j]);
    memo_reserve(eg);
    uint32_t q = memo_lookup(eg, x->head, x->nch, k);
    if (q != EG_NONE && q != p) {
      eg->nodes[p].dead = 1;
      eg_union(eg, eg->nodes[p].cls, eg->nodes[q].cls);
    } else if (q == EG_NONE) {
      memo_insert_raw(eg, p);
    }
    if (!eg->nodes[p].dead) eg_ids_push(&eg->cls[eg_find_compress(eg, c)].parents, p);
  }
  free(ps.v);
}

void eg_rebuild(rg_egraph *eg) {
  while (eg->pending.n) {
    eg_ids todo = eg->pending;
    eg->pending = (eg_ids){0};
    for (uint32_t i = 0; i < todo.n; i++) {
      uint32_t c = eg_find_compress(eg, todo.v[i]);
      if (eg->cls[c].parents.n) repair(eg, c);
    }
    free(todo.v);
  }
}

/* ------------------------------------------------------------------ the public e-graph */

rg_egraph *rg_egraph_new(rg_fgraph *fg) {
  rg_egraph *eg = rg_gc_alloc(sizeof *eg);
  eg->C = rg_fgraph_ctx(fg);
  eg->fg = fg;
  eg->varcls = rg_memo_new();
  eg->nroots = rg_fgraph_noutputs(fg);
  eg->roots = rg_gc_alloc((size_t)(eg->nroots ? eg->nroots : 1) * sizeof *eg->roots);
  memo_grow(eg);
  for (int i = 0; i < rg_fgraph_ninputs(fg); i++) eg_add_var(eg, rg_fgraph_input(fg, i));
  for (int i = 0; i < eg->nroots; i++) {
    eg->roots[i] = eg_add_var(eg, rg_fgraph_output(fg, i));
    if (eg->roots[i] == EG_NONE) {
      if (!rg_errcode(eg->C))
        rg_error(eg->C, RG_ERR_TYPE, "search: output %d does not type-check again", i + 1);
      rg_egraph_free(eg);
      return NULL;
    }
  }
  eg->stop_msg = "not run";
  return eg;
}

void rg_egraph_free(rg_egraph *eg) {
  if (!eg) return;
  for (uint32_t c = 0; c < eg->ncls; c++) {
    free(eg->cls[c].nodes.v);
    free(eg->cls[c].parents.v);
  }
  for (int i = 0; i < RG_OP_COUNT; i++) free(eg->byop[i].v);
  free(eg->cls);
  free(eg->uf);
  free(eg->nodes);
  free(eg->kids);
  free(eg->memo);
  free(eg->head_tab);
  free(eg->pending.v);
  memset(eg, 0, sizeof *eg);
}

size_t rg_egraph_nnodes(const rg_egraph *eg) { return eg->nmemo; }
size_t rg_egraph_nclasses(const rg_egraph *eg) { return eg->nlive; }

int64_t rg_egraph_class_of(rg_egraph *eg, rg_variable *v) {
  uint32_t c = eg_lookup_var(eg, v);
  return c == EG_NONE ? -1 : (int64_t)eg_find(eg, c);
}

int64_t rg_egraph_rejections(const rg_egraph *eg, FILE *f) {
  for (int64_t i = 0; f && i < eg->nrejected && i < MAX_REJECTIONS; i++)
    fprintf(f, "  %s\n", eg->rejections[i]);
  return eg->nrejected;
}
