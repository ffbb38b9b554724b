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
 * one knows a size the other does not merge, keeping the known size; a
 * type on the host merges with the same on a device (a rule's host
 * constant standing for a device value), keeping the device.  Nor do two
 * classes holding different constants merge: a rule that holds only for
 * some values (x / x = 1 where x is not 0) met a value it does not hold
 * for, and the e-graph keeps what it knew.
 *
 * Rules' results come in batches (eg_add_terms): each op of a term is
 * added across a chunk of matches at once, its hash-cons probes prepared
 * and their slots fetched a few matches ahead, since the table is larger
 * than the caches and the next op of a match needs this one's class.
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

/* Makes room for `need` ids; a list of EG_LIST_FIRST ids (the arena's)
 * moves to manual memory instead of being reallocated. */
static void ids_reserve(eg_ids *a, size_t need) {
  if (need <= a->cap) return;
  size_t cap = a->cap;
  if (cap == EG_LIST_FIRST) {
    cap = 0;
    uint32_t *v = grow(NULL, &cap, need, sizeof *v);
    memcpy(v, a->v, a->n * sizeof *v);
    a->v = v;
  } else {
    a->v = grow(a->v, &cap, need, sizeof *a->v);
  }
  a->cap = (uint32_t)cap;
}

static void ids_free(eg_ids *a) {
  if (a->cap != EG_LIST_FIRST) free(a->v);
  *a = (eg_ids){0};
}

void eg_ids_push(eg_ids *a, uint32_t x) {
  if (a->n == a->cap) ids_reserve(a, (size_t)a->n + 1);
  a->v[a->n++] = x;
}

uint32_t *eg_ids_extend(eg_ids *a, uint32_t k) {
  ids_reserve(a, (size_t)a->n + k);
  a->n += k;
  return a->v + a->n - k;
}

/* Appends x to a class's list, which starts in the arena (a class costs
 * no allocation of its own until a list outgrows EG_LIST_FIRST ids). */
static void class_push(rg_egraph *eg, eg_ids *a, uint32_t x) {
  if (!a->cap) {
    if (!eg->narena || eg->arena_used + EG_LIST_FIRST > EG_ARENA_BLOCK) {
      uint32_t **blocks = realloc(eg->arena, (eg->narena + 1) * sizeof *blocks);
      if (!blocks || !(blocks[eg->narena] = malloc(EG_ARENA_BLOCK * sizeof(uint32_t)))) abort();
      eg->arena = blocks;
      eg->narena++;
      eg->arena_used = 0;
    }
    a->v = eg->arena[eg->narena - 1] + eg->arena_used;
    a->cap = EG_LIST_FIRST;
    eg->arena_used += EG_LIST_FIRST;
  }
  eg_ids_push(a, x);
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

/* Multiplicative: each child is folded into the low half and multiplied,
 * which carries it into every higher bit; the high half is the hash. */
static inline uint32_t node_hash(uint32_t head, uint32_t n, const uint32_t *ch) {
  uint64_t h = ((uint64_t)head << 8 ^ n) * 0x9e3779b97f4a7c15ull;
  for (uint32_t i = 0; i < n; i++) h = (h ^ ch[i]) * 0xff51afd7ed558ccdull;
  return (uint32_t)(h >> 32);
}

static inline bool node_is(const rg_egraph *eg, uint32_t id, uint32_t head, uint32_t n, const uint32_t *ch) {
  const eg_node *x = &eg->nodes[id];
  if (x->head != head || x->nch != n) return false;
  const uint32_t *k = eg_kids(eg, id);
  for (uint32_t i = 0; i < n; i++)
    if (k[i] != ch[i]) return false;
  return true;
}

static inline uint32_t headn_of(uint32_t head, uint32_t n) { return head << 2 | (n < 3 ? n : 3); }

/* Whether slot e holds the node (head, ch): for three or more children
 * the rest are read from the node. */
static inline bool slot_is(const rg_egraph *eg, const eg_slot *e, uint32_t headn, uint32_t n,
                           const uint32_t *ch) {
  if (e->headn != headn) return false;
  if (n > 2) return node_is(eg, e->k0, eg->nodes[e->k0].head, n, ch);
  return (n < 1 || e->k0 == ch[0]) && (n < 2 || e->k1 == ch[1]);
}

/* A slot left behind by repair (lazy removal, below): its node's children
 * changed (the node was re-canonicalized or died), so a stored child is
 * no longer a union-find root, and never will be again.  Such a slot never
 * matches a probe with canonical children; it counts as deleted and is
 * dropped when the table grows.  (A node whose child merged and that
 * repair has not reached yet looks stale too: dropping its slot early is
 * harmless, repair puts the node back.) */
static bool slot_stale(const rg_egraph *eg, const eg_slot *e) {
  uint32_t n = e->headn & 3;
  return n <= 2 && ((n > 0 && eg->uf[e->k0] != e->k0) || (n > 1 && eg->uf[e->k1] != e->k1));
}

static uint32_t slot_hash(const rg_egraph *eg, const eg_slot *e) {
  if ((e->headn & 3) <= 2) return node_hash(e->headn >> 2, e->headn & 3, &e->k0);
  const eg_node *x = &eg->nodes[e->k0];
  return node_hash(x->head, x->nch, eg_kids(eg, e->k0));
}

static void memo_grow(rg_egraph *eg) {
  eg_slot *old = eg->memo;
  size_t oldcap = eg->capmemo;
  eg->capmemo = oldcap ? (eg->nmemo * 4 > oldcap ? oldcap * 2 : oldcap) : 1024;
  eg->memo = malloc(eg->capmemo * sizeof *eg->memo);
  if (!eg->memo) abort();
  memset(eg->memo, 0xff, eg->capmemo * sizeof *eg->memo);
  eg->ntomb = 0;
  size_t mask = eg->capmemo - 1;
  for (size_t i = 0; i < oldcap; i++) {
    const eg_slot *e = &old[i];
    if (e->cls >= EG_TOMB || slot_stale(eg, e)) continue;
    size_t s = slot_hash(eg, e) & mask;
    while (eg->memo[s].cls != EG_NONE) s = (s + 1) & mask;
    eg->memo[s] = *e;
  }
  free(old);
}

/* The slot holding a node equal to (head, ch) of hash h, or the free
 * slot to use. */
static size_t memo_probe(const rg_egraph *eg, uint32_t h, uint32_t head, uint32_t n, const uint32_t *ch,
                         bool *found) {
  size_t mask = eg->capmemo - 1, s = h & mask, free_slot = SIZE_MAX;
  uint32_t hn = headn_of(head, n);
  for (;; s = (s + 1) & mask) {
    const eg_slot *e = &eg->memo[s];
    if (e->cls == EG_NONE) break;
    if (e->cls == EG_TOMB) {
      if (free_slot == SIZE_MAX) free_slot = s;
    } else if (slot_is(eg, e, hn, n, ch)) {
      *found = true;
      return s;
    }
  }
  *found = false;
  return free_slot != SIZE_MAX ? free_slot : s;
}

/* Puts node id (head(ch), of class c) in slot s. */
static inline void memo_put(rg_egraph *eg, size_t s, uint32_t head, uint32_t n, const uint32_t *ch, uint32_t id,
                            uint32_t c) {
  if (eg->memo[s].cls == EG_TOMB) eg->ntomb--;
  eg->memo[s] = n > 2 ? (eg_slot){c, headn_of(head, n), id, 0}
                      : (eg_slot){c, headn_of(head, n), n > 0 ? ch[0] : 0, n > 1 ? ch[1] : 0};
  eg->nmemo++;
}

/* The class of the node head(ch), or EG_NONE. */
static uint32_t memo_lookup(const rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch) {
  bool found;
  size_t s = memo_probe(eg, node_hash(head, n, ch), head, n, ch, &found);
  return found ? eg->memo[s].cls : EG_NONE;
}

uint32_t eg_lookup_node(const rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch) {
  return memo_lookup(eg, head, (uint32_t)nch, ch);
}

/* Removes node id, found under its stored children. */
static void memo_remove(rg_egraph *eg, uint32_t id) {
  const eg_node *x = &eg->nodes[id];
  bool found;
  size_t s = memo_probe(eg, node_hash(x->head, x->nch, eg_kids(eg, id)), x->head, x->nch, eg_kids(eg, id), &found);
  if (!found || eg->memo[s].k0 != id) return;
  eg->memo[s].cls = EG_TOMB;
  eg->nmemo--;
  eg->ntomb++;
}

/* Makes room for one insertion: no probe sequence may fill up. */
static void memo_reserve(rg_egraph *eg) {
  if (2 * (eg->nmemo + eg->ntomb + 1) > eg->capmemo) memo_grow(eg);
}

/* ------------------------------------------------------------------ classes and nodes */

static inline bool plain_var(const rg_variable *v) {
  return !rg_is_constant(v) && !(v->flags & RG_VAR_WEAK);
}

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
  eg->cls[c].mod = eg->iter;
  eg->cls[c].plain = !rep || plain_var(rep);
  eg->cls[c].konst = rep && rg_is_constant(rep);
  eg->types[c] = t;
  eg->reps[c] = rep;
  eg->nlive++;
  return c;
}

/* Adds node head(ch) of class c into memo slot s (from a probe that found
 * no equal node, with no insertion since). */
static uint32_t new_node(rg_egraph *eg, size_t s, uint32_t h, uint32_t head, uint32_t n, const uint32_t *ch,
                         uint32_t c) {
  if (eg->nnodes == eg->capnodes) {
    size_t cap = eg->capnodes;
    eg->nodes = grow(eg->nodes, &cap, (size_t)eg->nnodes + 1, sizeof *eg->nodes);
    eg->capnodes = (uint32_t)cap;
  }
  eg->kids = grow(eg->kids, &eg->capkids, eg->nkids + n, sizeof *eg->kids);
  uint32_t id = eg->nnodes++;
  eg->nodes[id] = (eg_node){head, n, (uint32_t)eg->nkids, c, 0, eg->iter, eg->iter};
  if (n) memcpy(eg->kids + eg->nkids, ch, n * sizeof *ch);
  eg->nkids += n;
  class_push(eg, &eg->cls[c].nodes, id);
  if (eg->cls[c].minnode == EG_NONE) eg->cls[c].minnode = id;
  for (uint32_t i = 0; i < n; i++) class_push(eg, &eg->cls[ch[i]].parents, id);
  const eg_head *hd = &eg->heads[head];
  if (!hd->leaf) eg_ids_push(&eg->byop[hd->code], id);
  memo_put(eg, s, head, n, ch, id, c);
  return id;
}

/* ------------------------------------------------------------------ types of new nodes */

static bool cacheable(const rg_egraph *eg, const eg_head *h, uint32_t n, const uint32_t *ch) {
  if (n > EG_TC_MAXCH) return false;
  rg_op_family f = rg_opcode_family(h->code);
  if (f != RG_FAM_ELEMWISE && f != RG_FAM_REDUCE && f != RG_FAM_BLAS) return false;
  for (uint32_t i = 0; i < n; i++)
    if (!eg->cls[ch[i]].plain) return false;
  return true;
}

static uint64_t tc_hash(uint32_t head, uint32_t n, const rg_type *const *in) {
  uint64_t h = mix(0x7c, head);
  for (uint32_t i = 0; i < n; i++) h = mix(h, (uint64_t)(uintptr_t)in[i]);
  return h ? h : 1;
}

static inline bool same_types(const rg_type *const *a, const rg_type *const *b, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (a[i] != b[i]) return false;
  return true;
}

static eg_tcache *tc_slot(rg_egraph *eg, uint64_t h, uint32_t head, uint32_t n, const rg_type *const *in) {
  size_t mask = eg->captc - 1;
  for (size_t s = h & mask;; s = (s + 1) & mask) {
    eg_tcache *e = &eg->tcache[s];
    if (!e->hash) return e;
    if (e->hash == h && e->head == head && e->nch == n && same_types(e->in, in, n)) return e;
  }
}

static void tc_grow(rg_egraph *eg) {
  eg_tcache *old = eg->tcache;
  size_t oldcap = eg->captc;
  eg->captc = oldcap ? 2 * oldcap : 256;
  eg->tcache = rg_gc_alloc(eg->captc * sizeof *eg->tcache);
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].hash) *tc_slot(eg, old[i].hash, old[i].head, old[i].nch, old[i].in) = old[i];
}

static void tc_put(rg_egraph *eg, uint32_t head, uint32_t n, const rg_type *const *in, uint32_t rhead,
                   const rg_type *out) {
  if (2 * (eg->ntc + 1) > eg->captc) tc_grow(eg);
  uint64_t h = tc_hash(head, n, in);
  eg_tcache *e = tc_slot(eg, h, head, n, in);
  if (!e->hash) eg->ntc++;
  *e = (eg_tcache){h, head, n, rhead, {0}, out};
  if (n) memcpy(e->in, in, n * sizeof *in);
}

/* Makes the node head(reps of ch); NULL when it does not type-check (the
 * error cleared, except an unknown name). */
static rg_node *make_rep_node(rg_egraph *eg, const eg_head *h, uint32_t n, const uint32_t *ch) {
  rg_variable *small[8], **in = n <= 8 ? small : rg_gc_alloc(n * sizeof *in);
  for (uint32_t i = 0; i < n; i++) in[i] = eg_rep(eg, ch[i]);
  rg_node *node = rg_make_node(eg->C, h->op, (int)n, in);
  if (!node || h->out >= node->nout) {
    if (rg_errcode(eg->C) != RG_ERR_NAME) rg_clear_error(eg->C);
    return NULL;
  }
  return node;
}

/* The type of head(children) into *t, and a variable computing it into *v
 * when one was made (NULL when the type came from the cache); false when
 * the node does not type-check.  *head may become the op's canonical
 * form. */
static bool infer(rg_egraph *eg, uint32_t *head, uint32_t n, const uint32_t *ch, const rg_type **t,
                  rg_variable **v) {
  const eg_head *h = &eg->heads[*head];
  if (h->leaf) {
    *v = h->leaf;
    *t = h->leaf->type;
    return true;
  }
  const rg_type *in[EG_TC_MAXCH];
  bool cache = cacheable(eg, h, n, ch);
  if (cache) {
    for (uint32_t i = 0; i < n; i++) in[i] = eg->types[ch[i]];
    if (eg->captc) {
      const eg_tcache *e = tc_slot(eg, tc_hash(*head, n, in), *head, n, in);
      if (e->hash) {
        eg->tc_hits++;
        if (e->rhead == EG_NONE) return false;
        *head = e->rhead;
        *t = e->out;
        *v = NULL;
        return true;
      }
    }
    eg->tc_misses++;
  }
  uint32_t h0 = *head;
  rg_node *node = make_rep_node(eg, h, n, ch);
  if (!node) {
    if (cache && !rg_errcode(eg->C)) tc_put(eg, h0, n, in, EG_NONE, NULL);
    return false;
  }
  if (node->op != h->op && !rg_op_equal(node->op, h->op)) *head = intern_head(eg, node->op, NULL, h->out);
  *v = node->outputs[eg->heads[*head].out];
  *t = (*v)->type;
  if (cache) tc_put(eg, h0, n, in, *head, *t);
  return true;
}

static void note_var(rg_egraph *eg, rg_variable *v, uint32_t c) {
  rg_memo_put(eg->varcls, v, (void *)(uintptr_t)(c + 1));
}

/* Builds the representative of class c (whose own is missing) from its
 * smallest node, building its children's first (an explicit stack: they
 * have smaller smallest nodes, so this ends). */
static void build_rep(rg_egraph *eg, uint32_t c) {
  eg_ids st = {0};
  eg_ids_push(&st, c);
  while (st.n) {
    uint32_t x = eg_find(eg, st.v[st.n - 1]);
    if (eg->reps[x]) {
      st.n--;
      continue;
    }
    uint32_t id = eg->cls[x].minnode, n = eg->nodes[id].nch;
    const uint32_t *k = eg_kids(eg, id);
    bool ready = true;
    for (uint32_t i = 0; i < n; i++)
      if (!eg->reps[eg_find(eg, k[i])]) {
        eg_ids_push(&st, k[i]);
        ready = false;
      }
    if (!ready) continue;
    const eg_head *h = &eg->heads[eg->nodes[id].head];
    rg_node *node = h->leaf ? NULL : make_rep_node(eg, h, n, k);
    rg_variable *v = h->leaf ? h->leaf : node ? node->outputs[h->out] : rg_input(eg->C, NULL, eg->types[x]);
    eg->reps[x] = v;
    eg->cls[x].plain = plain_var(v);
    eg->cls[x].konst = rg_is_constant(v);
    note_var(eg, v, x);
    st.n--;
  }
  free(st.v);
}

rg_node *eg_rep_node(rg_egraph *eg, uint32_t id) {
  const eg_node *x = &eg->nodes[id];
  const eg_head *h = &eg->heads[x->head];
  return h->leaf ? NULL : make_rep_node(eg, h, x->nch, eg_kids(eg, id));
}

rg_variable *eg_rep(rg_egraph *eg, uint32_t c) {
  c = eg_find(eg, c);
  if (!eg->reps[c]) build_rep(eg, c);
  return eg->reps[c];
}

/* Adds head(ch) (children canonicalized here) and returns its class: an
 * existing one when the e-graph has the node, else a new one; EG_NONE
 * when it does not type-check.  One probe of the hash-cons table finds
 * the node or the slot a new one goes in. */
static uint32_t add_node(rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch,
                         rg_variable *known, uint32_t into) {
  uint32_t small[16], *cc = n <= 16 ? small : malloc(n * sizeof *cc);
  for (uint32_t i = 0; i < n; i++) cc[i] = eg_find_compress(eg, ch[i]);
  memo_reserve(eg);
  bool found;
  uint32_t h = node_hash(head, n, cc), c = EG_NONE, h0 = head;
  size_t s = memo_probe(eg, h, head, n, cc, &found);
  const rg_type *t = known ? known->type : NULL;
  rg_variable *v = known;
  if (!found && (known || infer(eg, &head, n, cc, &t, &v)) && head != h0) {
    h = node_hash(head, n, cc); /* the canonical op may be there */
    s = memo_probe(eg, h, head, n, cc, &found);
  }
  if (found) {
    c = eg_find_compress(eg, eg->memo[s].cls);
    if (known && !eg->reps[c]) {
      eg->reps[c] = known;
      eg->cls[c].plain = plain_var(known);
      eg->cls[c].konst = rg_is_constant(known);
    }
  } else if (t && into != EG_NONE && (into = eg_find_compress(eg, into), eg->types[into] == t ||
                                                                          rg_type_equal(eg->types[into], t))) {
    c = into; /* straight into the class it is to be merged with */
    eg->cls[c].mod = eg->iter;
    new_node(eg, s, h, head, n, cc, c);
  } else if (t) {
    c = new_class(eg, t, v);
    new_node(eg, s, h, head, n, cc, c);
    if (v) note_var(eg, v, c);
  }
  if (cc != small) free(cc);
  return c;
}

/* The class of head(k), canonical children k of at most two hashing to
 * h, when the table holds it under that head, else EG_NONE: the common
 * case of a rule's result, one probe with no node read.  (A head infer
 * would make canonical, and every miss, take add_node's way.) */
static inline uint32_t lookup_hashed(rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *k, uint32_t h) {
  uint32_t hn = headn_of(head, n);
  size_t mask = eg->capmemo - 1;
  for (size_t s = h & mask;; s = (s + 1) & mask) {
    const eg_slot *e = &eg->memo[s];
    if (e->cls == EG_NONE) return EG_NONE;
    if (e->headn == hn && e->k0 == k[0] && e->k1 == k[1] && e->cls != EG_TOMB) return eg_find_compress(eg, e->cls);
  }
}

/* lookup_hashed for children ch, canonicalized here. */
static inline uint32_t lookup_small(rg_egraph *eg, uint32_t head, uint32_t n, const uint32_t *ch) {
  uint32_t k[2] = {n > 0 ? eg_find_compress(eg, ch[0]) : 0, n > 1 ? eg_find_compress(eg, ch[1]) : 0};
  return lookup_hashed(eg, head, n, k, node_hash(head, n, k));
}

uint32_t eg_add(rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch) {
  uint32_t c = nch <= 2 ? lookup_small(eg, head, (uint32_t)nch, ch) : EG_NONE;
  return c != EG_NONE ? c : add_node(eg, head, (uint32_t)nch, ch, NULL, EG_NONE);
}

/* Merges the class c just found or added with `into`. */
static inline uint32_t merge_into(rg_egraph *eg, uint32_t c, uint32_t into) {
  if (c == EG_NONE || into == EG_NONE || eg_find(eg, into) == c) return c;
  return eg_union(eg, into, c) ? c : EG_NONE;
}

uint32_t eg_add_into(rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch, uint32_t into) {
  uint32_t c = nch <= 2 ? lookup_small(eg, head, (uint32_t)nch, ch) : EG_NONE;
  if (c == EG_NONE) c = add_node(eg, head, (uint32_t)nch, ch, NULL, into);
  return merge_into(eg, c, into);
}

/* The children of op o of a term under bindings b, its earlier ops'
 * classes in cls; false when one of those was not made. */
static inline bool term_kids(const eg_term_op *o, const uint32_t *b, const uint32_t *cls, uint32_t *ch) {
  for (uint32_t i = 0; i < o->nch; i++)
    if ((ch[i] = o->ch[i] >= 0 ? b[o->ch[i]] : cls[-1 - o->ch[i]]) == EG_NONE) return false;
  return true;
}

/* One op of one match, prepared PREFETCH matches ahead: its head, its
 * children canonical then, their hash; ok false when a child was not
 * made.  The slot it hashes to is asked for then. */
typedef struct term_probe {
  uint32_t head, k[2], h;
  bool ok;
} term_probe;

static inline void probe_prepare(const rg_egraph *eg, const eg_term_op *o, const uint32_t *b, const uint32_t *done,
                                 term_probe *p) {
  p->k[0] = p->k[1] = 0;
  if (!(p->ok = term_kids(o, b, done, p->k))) return;
  for (uint32_t i = 0; i < o->nch; i++) p->k[i] = eg_find(eg, p->k[i]);
  p->head = o->opvar >= 0 ? b[o->opvar] : o->head;
  p->h = node_hash(p->head, o->nch, p->k);
  __builtin_prefetch(&eg->memo[p->h & (eg->capmemo - 1)]);
}

/* The class of prepared op p, found or added (merged with `into`). */
static inline uint32_t probe_add(rg_egraph *eg, uint32_t nch, term_probe *p, uint32_t into) {
  if (!p->ok) return EG_NONE;
  bool moved = false; /* a merge since it was prepared */
  for (uint32_t i = 0; i < nch; i++)
    if (eg->uf[p->k[i]] != p->k[i]) p->k[i] = eg_find_compress(eg, p->k[i]), moved = true;
  if (moved) p->h = node_hash(p->head, nch, p->k);
  uint32_t c = lookup_hashed(eg, p->head, nch, p->k, p->h);
  if (c == EG_NONE) c = add_node(eg, p->head, nch, p->k, NULL, into);
  return merge_into(eg, c, into);
}

/* Terms are added op by op across all the matches: each op's probe is
 * prepared, and its slot asked for, PREFETCH matches ahead, which an op's
 * dependence on the one before it would not allow match by match. */
#define PREFETCH 8

int eg_add_terms(rg_egraph *eg, const eg_term *t, const uint32_t *m, uint32_t n, uint32_t stride,
                 uint32_t boff) {
  uint32_t nops = (uint32_t)t->nops, small[4 * EG_TERM_MAX];
  uint32_t *cls = (size_t)n * nops <= 4 * EG_TERM_MAX ? small : malloc((size_t)n * nops * sizeof *cls);
  if (!cls) abort();
  term_probe ring[PREFETCH];
  for (uint32_t j = 0; j < nops; j++) {
    const eg_term_op *o = &t->op[j];
    for (uint32_t i = 0; i < n && i < PREFETCH; i++)
      probe_prepare(eg, o, m + (size_t)i * stride + boff, cls + (size_t)i * nops, &ring[i]);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t into = j + 1 == nops ? m[(size_t)i * stride] : EG_NONE;
      uint32_t c = probe_add(eg, o->nch, &ring[i % PREFETCH], into);
      if (c == EG_NONE && rg_errcode(eg->C)) {
        if (cls != small) free(cls);
        return rg_errcode(eg->C);
      }
      cls[(size_t)i * nops + j] = c;
      size_t ahead = (size_t)i + PREFETCH;
      if (ahead < n) probe_prepare(eg, o, m + ahead * stride + boff, cls + ahead * nops, &ring[i % PREFETCH]);
    }
  }
  if (cls != small) free(cls);
  return RG_OK;
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
  c = add_node(eg, intern_head(eg, node->op, NULL, k), (uint32_t)node->nin, ch, node->outputs[k], EG_NONE);
  if (c != EG_NONE) rg_memo_put(eg->varcls, node->outputs[k], (void *)(uintptr_t)(c + 1));
out:
  if (ch != small) free(ch);
  return c;
}

static uint32_t add_leaf(rg_egraph *eg, rg_variable *v) {
  uint32_t c = add_node(eg, intern_head(eg, NULL, v, 0), 0, NULL, v, EG_NONE);
  rg_memo_put(eg->varcls, v, (void *)(uintptr_t)(c + 1));
  return c;
}

/* Whether v has a class already: the walks adding a term stop there (a
 * rule's answer is mostly the graph's, and sorting all of it for every
 * answer made a rule's pass quadratic, past any time limit). */
static bool has_class(const rg_variable *v, const void *eg) {
  return var_class((rg_egraph *)eg, (rg_variable *)v) != EG_NONE;
}

uint32_t eg_add_var(rg_egraph *eg, rg_variable *v) {
  uint32_t c = var_class(eg, v);
  if (c != EG_NONE) return c;
  if (!v->owner) return add_leaf(eg, v);
  size_t n;
  rg_node **order = rg_toposort_above(1, &v, has_class, eg, &n);
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
  rg_node **order = rg_toposort_above(1, &v, has_class, eg, &n);
  uint32_t small[16];
  for (size_t i = 0; i < n; i++) {
    rg_node *node = order[i];
    if (node->nin > 16) return EG_NONE;
    for (int j = 0; j < node->nin; j++)
      if ((small[j] = var_class(eg, node->inputs[j])) == EG_NONE) return EG_NONE;
    for (int k = 0; k < node->nout; k++) {
      uint32_t kc = memo_lookup(eg, intern_head(eg, node->op, NULL, k), (uint32_t)node->nin, small);
      if (kc == EG_NONE) continue;
      rg_memo_put(eg->varcls, node->outputs[k], (void *)(uintptr_t)(kc + 1));
    }
  }
  return var_class(eg, v);
}

/* ------------------------------------------------------------------ merging */

#define MAX_REJECTIONS 64

/* Whether the refusal (rule, a, b) is new (each is reported once). */
static bool rejection_new(rg_egraph *eg, uint32_t a, uint32_t b) {
  uint64_t k = mix(mix((uint64_t)(uintptr_t)eg->cur_rule, a < b ? a : b), a < b ? b : a) | 1;
  if (2 * (eg->nrejseen + 1) > eg->caprejseen) {
    uint64_t *old = eg->rejseen;
    size_t oldcap = eg->caprejseen;
    eg->caprejseen = oldcap ? 2 * oldcap : 64;
    eg->rejseen = calloc(eg->caprejseen, sizeof *eg->rejseen);
    if (!eg->rejseen) abort();
    for (size_t i = 0; i < oldcap; i++) {
      if (!old[i]) continue;
      size_t s = old[i] & (eg->caprejseen - 1);
      while (eg->rejseen[s]) s = (s + 1) & (eg->caprejseen - 1);
      eg->rejseen[s] = old[i];
    }
    free(old);
  }
  size_t s = k & (eg->caprejseen - 1);
  for (; eg->rejseen[s]; s = (s + 1) & (eg->caprejseen - 1))
    if (eg->rejseen[s] == k) return false;
  eg->rejseen[s] = k;
  eg->nrejseen++;
  return true;
}

/* Class c's representative as a rejection shows it: a literal (a weakly
 * typed constant, which promotes differently from the same value made by
 * folding) says so. */
static const char *rep_str(rg_egraph *eg, uint32_t c) {
  rg_variable *v = eg_rep(eg, c);
  const char *s = rgr_show(v);
  return v && (v->flags & RG_VAR_WEAK) ? rgr_sprintf("%s (a literal)", s) : s;
}

/* Refuses the merge of classes a and b (of different types, or holding
 * different constants), noting it once per rule and pair. */
static bool reject(rg_egraph *eg, uint32_t a, uint32_t b) {
  if (!rejection_new(eg, a, b)) return false;
  eg->nrejected++;
  if (!eg->rejections) eg->rejections = rg_gc_alloc(MAX_REJECTIONS * sizeof *eg->rejections);
  if (eg->nrejected <= MAX_REJECTIONS)
    eg->rejections[eg->nrejected - 1] =
        rgr_sprintf("%s: would merge %s of type %s with %s of type %s", eg->cur_rule ? eg->cur_rule : "merge",
                    rep_str(eg, a), rg_type_str(eg->types[a]), rep_str(eg, b), rg_type_str(eg->types[b]));
  return false;
}

/* The side whose type the merged class of a and b takes: the more precise
 * type, or the one on a device where the other lives on the host (a rule's
 * host constant or allocation for a value on a device: the class stays on
 * the device). */
static uint32_t type_side(const rg_type *ta, const rg_type *tb, uint32_t a, uint32_t b) {
  if (ta->device != tb->device) return ta->device == RG_DEVICE_HOST ? b : a;
  return rg_type_is_subtype(ta, tb) ? a : b;
}

/* Moves the ids of `from` to the end of `to` (an empty `to` takes
 * from's memory). */
static void append_ids(eg_ids *to, eg_ids *from) {
  if (!to->n) {
    ids_free(to);
    *to = *from;
  } else if (from->n) {
    ids_reserve(to, (size_t)to->n + from->n);
    memcpy(to->v + to->n, from->v, from->n * sizeof *from->v);
    to->n += from->n;
    ids_free(from);
  } else {
    ids_free(from);
  }
  *from = (eg_ids){0};
}

bool eg_union(rg_egraph *eg, uint32_t a, uint32_t b) {
  a = eg_find_compress(eg, a);
  b = eg_find_compress(eg, b);
  if (a == b) return true;
  const rg_type *ta = eg->types[a], *tb = eg->types[b];
  bool eq = ta == tb || rg_type_equal(ta, tb);
  if (!eq && !rg_type_stands_for(ta, tb) && !rg_type_stands_for(tb, ta)) return reject(eg, a, b);
  /* two different constants are two values: a rule that holds only for
   * some values (x / x = 1, for x not 0) met one it does not hold for */
  bool ca = eg->cls[a].konst, cb = eg->cls[b].konst;
  if (ca && cb && !rg_constant_equal(eg->reps[a], eg->reps[b])) return reject(eg, a, b);
  /* the type from type_side; the representative a constant where one side
   * has one (what rules written in C look for), else from the type's side,
   * else (equal types) from the side holding the older e-node among those
   * with one built: x, not the x + 0 merged with it, which is its own
   * child and which flattening would take apart and rebuild one operand
   * longer at every iteration */
  uint32_t tside = eq ? a : type_side(ta, tb, a, b);
  bool older = eg->cls[a].minnode <= eg->cls[b].minnode;
  uint32_t from = ca != cb                          ? (ca ? a : b)
                  : !eq                             ? tside
                  : !eg->reps[a] || !eg->reps[b]    ? (eg->reps[a] ? a : b)
                  : older                           ? a
                                                    : b;
  const rg_type *t = eg->types[tside];
  rg_variable *rep = eg->reps[from];
  bool plain = eg->cls[from].plain, konst = eg->cls[from].konst;
  eg_class *A = &eg->cls[a], *B = &eg->cls[b];
  if (A->nodes.n + A->parents.n < B->nodes.n + B->parents.n) {
    uint32_t x = a; a = b; b = x;
    eg_class *X = A; A = B; B = X;
  }
  eg->uf[b] = a;
  for (uint32_t i = 0; i < B->nodes.n; i++) /* moved */
    eg->nodes[B->nodes.v[i]].iter = eg->nodes[B->nodes.v[i]].born = eg->iter;
  append_ids(&A->nodes, &B->nodes);
  append_ids(&A->parents, &B->parents);
  if (B->minnode < A->minnode) A->minnode = B->minnode;
  A->mod = eg->iter;
  A->plain = plain;
  A->konst = konst;
  eg->types[a] = t;
  eg->reps[a] = rep;
  eg->nlive--;
  eg_ids_push(&eg->pending, a);
  return true;
}

/* Re-canonicalizes the nodes using class c; equal ones merge.  A node
 * whose children did not change keeps its entry in the hash-cons table:
 * any node that became equal to it changed, and finds it. */
static void repair(rg_egraph *eg, uint32_t c) {
  eg_ids ps = eg->cls[c].parents;
  eg->cls[c].parents = (eg_ids){0};
  uint32_t kept = 0;
  for (uint32_t i = 0; i < ps.n; i++) {
    uint32_t p = ps.v[i];
    eg_node *x = &eg->nodes[p];
    if (x->dead) continue;
    uint32_t *k = eg->kids + x->ch;
    bool changed = false;
    for (uint32_t j = 0; j < x->nch && !changed; j++) changed = eg_find(eg, k[j]) != k[j];
    if (changed) {
      /* a node of up to two children leaves its old slot behind (stale:
       * one probe of the table fewer per node); others are removed */
      if (x->nch > 2) memo_remove(eg, p);
      else eg->nmemo--, eg->ntomb++;
      for (uint32_t j = 0; j < x->nch; j++) k[j] = eg_find_compress(eg, k[j]);
      x->iter = eg->iter;
      memo_reserve(eg);
      bool found;
      uint32_t h = node_hash(x->head, x->nch, k);
      size_t s = memo_probe(eg, h, x->head, x->nch, k, &found);
      if (found) {
        eg->nodes[p].dead = 1;
        eg->ndead++;
        eg_union(eg, eg->nodes[p].cls, eg->memo[s].cls);
        continue;
      }
      memo_put(eg, s, x->head, x->nch, k, p, x->cls);
    }
    ps.v[kept++] = p;
  }
  ps.n = kept;
  append_ids(&eg->cls[eg_find_compress(eg, c)].parents, &ps);
}

/* Drops dead nodes from the lists by op once those that died since the
 * last drop are a quarter of all nodes (matching visits every node of a
 * list). */
static void drop_dead(rg_egraph *eg) {
  if (eg->ndead * 4 < eg->nnodes) return;
  for (int op = 0; op < RG_OP_COUNT; op++) {
    eg_ids *a = &eg->byop[op];
    uint32_t kept = 0;
    for (uint32_t i = 0; i < a->n; i++)
      if (!eg->nodes[a->v[i]].dead) a->v[kept++] = a->v[i];
    a->n = kept;
  }
  eg->ndead = 0;
}

void eg_rebuild(rg_egraph *eg) {
  while (eg->pending.n) {
    eg_ids dirty = eg->pending;
    eg->pending = (eg_ids){0};
    for (uint32_t i = 0; i < dirty.n; i++) {
      uint32_t c = eg_find_compress(eg, dirty.v[i]);
      if (eg->cls[c].parents.n) repair(eg, c);
    }
    free(dirty.v);
  }
  drop_dead(eg);
}

/* ------------------------------------------------------------------ level stamps */

void eg_stamp_levels(rg_egraph *eg, int depth) {
  if (depth > EG_MAX_LEVEL) depth = EG_MAX_LEVEL;
  if (eg->caplvl < eg->ncls) {
    for (int d = 0; d < EG_MAX_LEVEL; d++) free(eg->lvl[d]), eg->lvl[d] = NULL;
    eg->caplvl = eg->capcls;
  }
  eg->nlvl = 0;
  for (int d = 1; d <= depth; d++) {
    if (!eg->lvl[d - 1] && !(eg->lvl[d - 1] = malloc(eg->caplvl * sizeof(uint32_t)))) abort();
    uint32_t *to = eg->lvl[d - 1];
    for (uint32_t c = 0; c < eg->ncls; c++) to[c] = eg_level(eg, c, d - 1);
    for (uint32_t id = 0; id < eg->nnodes; id++) {
      const eg_node *x = &eg->nodes[id];
      if (x->dead || !x->nch) continue;
      uint32_t c = eg_find(eg, x->cls), best = to[c];
      const uint32_t *k = eg_kids(eg, id);
      for (uint32_t i = 0; i < x->nch; i++) {
        uint32_t s = eg_level(eg, eg_find(eg, k[i]), d - 1);
        if (s > best) best = s;
      }
      to[c] = best;
    }
    eg->nlvl = d;
  }
}

/* ------------------------------------------------------------------ cycles */

/* Tarjan's algorithm over the root classes (an edge from a class to the
 * class of each child of each of its live e-nodes), with the recursion
 * kept in an explicit stack of frames (the class, the e-node and the child
 * it has reached), since an e-graph may be deeper than the C stack.  A
 * class visited and not yet given a component is on Tarjan's stack. */
typedef struct scc_frame { uint32_t c, ni, ki; } scc_frame;

typedef struct scc_state {
  uint32_t *index, *low, *stk;
  scc_frame *fr;
  uint32_t next, sp, fp, ncomp;
} scc_state;

static void scc_push(scc_state *s, uint32_t c) {
  s->index[c] = s->low[c] = s->next++;
  s->stk[s->sp++] = c;
  s->fr[s->fp++] = (scc_frame){c, 0, 0};
}

/* The next child class of frame f's class not yet visited (EG_NONE when
 * its e-nodes are done), lowering its low link by those on the stack. */
static uint32_t scc_next_child(rg_egraph *eg, scc_state *s, scc_frame *f) {
  const eg_ids *ns = &eg->cls[f->c].nodes;
  while (f->ni < ns->n) {
    const eg_node *x = &eg->nodes[ns->v[f->ni]];
    if (x->dead || f->ki >= x->nch) {
      f->ni++, f->ki = 0;
      continue;
    }
    uint32_t k = eg_find(eg, eg_kids(eg, ns->v[f->ni])[f->ki++]);
    if (!s->index[k]) return k;
    if (eg->comp[k] == EG_NONE && s->index[k] < s->low[f->c]) s->low[f->c] = s->index[k];
  }
  return EG_NONE;
}

static void scc_finish(rg_egraph *eg, scc_state *s, uint32_t c) {
  if (s->low[c] == s->index[c]) {
    uint32_t m;
    do eg->comp[m = s->stk[--s->sp]] = s->ncomp;
    while (m != c);
    s->ncomp++;
  }
  if (--s->fp) {
    uint32_t p = s->fr[s->fp - 1].c;
    if (s->low[c] < s->low[p]) s->low[p] = s->low[c];
  }
}

void eg_mark_cycles(rg_egraph *eg) {
  uint32_t n = eg->ncls;
  if (eg->capcomp < n) {
    free(eg->comp);
    eg->capcomp = eg->capcls;
    if (!(eg->comp = malloc(eg->capcomp * sizeof *eg->comp))) abort();
  }
  scc_state s = {.index = calloc(n ? n : 1, sizeof(uint32_t)), .low = malloc((n ? n : 1) * sizeof(uint32_t)),
                 .stk = malloc((n ? n : 1) * sizeof(uint32_t)), .fr = malloc((n ? n : 1) * sizeof(scc_frame)),
                 .next = 1};
  if (!s.index || !s.low || !s.stk || !s.fr) abort();
  for (uint32_t c = 0; c < n; c++) eg->comp[c] = EG_NONE;
  for (uint32_t r = 0; r < n; r++) {
    if (eg->uf[r] != r || s.index[r]) continue;
    scc_push(&s, r);
    while (s.fp) {
      scc_frame *f = &s.fr[s.fp - 1];
      uint32_t k = scc_next_child(eg, &s, f);
      if (k != EG_NONE) scc_push(&s, k);
      else scc_finish(eg, &s, f->c);
    }
  }
  free(s.index), free(s.low), free(s.stk), free(s.fr);
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
  eg_rules_free(eg);
  for (uint32_t c = 0; c < eg->ncls; c++) {
    ids_free(&eg->cls[c].nodes);
    ids_free(&eg->cls[c].parents);
  }
  for (uint32_t i = 0; i < eg->narena; i++) free(eg->arena[i]);
  free(eg->arena);
  for (int i = 0; i < RG_OP_COUNT; i++) free(eg->byop[i].v);
  free(eg->cls);
  free(eg->uf);
  free(eg->nodes);
  free(eg->kids);
  free(eg->memo);
  free(eg->head_tab);
  free(eg->pending.v);
  free(eg->rejseen);
  for (int d = 0; d < EG_MAX_LEVEL; d++) free(eg->lvl[d]);
  free(eg->comp);
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
