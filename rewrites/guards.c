/*
 * guards.c — the ifelse branches each node of a graph is needed under,
 * for the rewrites that put nodes together (scan_merge, fusion) or move
 * them (the Scan push-outs): the lazy VM runs only the branch an ifelse's
 * condition selects, and a node that joins work of another branch, or
 * moves out of its branch, would run that work whichever branch is taken
 * (and fail where the branch not taken guards against failure).
 *
 * A path from a node to an output of the graph goes through some ifelse
 * branches: a set of (condition, branch) pairs (side 1 the then branch, 2
 * the else branch; the condition input itself is no branch).  Pairs name
 * the condition, not the ifelse: a gradient puts each branch's work under
 * ifelse nodes of its own on the same condition.  A node is needed when
 * the pairs of one of its paths all hold: its context is the set of its
 * paths' pair sets (a disjunction of conjunctions), kept minimal (a set
 * that contains another adds nothing).  A node with a path through no
 * branch is needed always.  Two nodes may be put together only when their
 * contexts are equal, and a node may leave its loop's step only when it is
 * needed always.  Contexts too large to keep (more than MAX_ALTS sets, or
 * a set of more than MAX_PAIRS pairs) are "complex": such a node is equal
 * to no other and never needed always, so nothing moves it.
 */
#include "rewrites/rewrite-impl.h"

#include <string.h>

enum { MAX_PAIRS = 8, MAX_ALTS = 4 };
typedef struct pair { const rg_variable *cond; int side; } pair;
/* Invariant: pairs sorted by (condition, side), distinct. */
typedef struct pairset { int n; pair p[MAX_PAIRS]; } pairset;
/* Invariant: no set contains another; complex: too large to keep (n and
 * s then unused); n == 0 and !complex: no path seen (yet). */
typedef struct context { bool complex; int n; pairset s[MAX_ALTS]; } context;

static int pair_cmp(pair a, pair b) {
  if (a.cond != b.cond) return (uintptr_t)a.cond < (uintptr_t)b.cond ? -1 : 1;
  return a.side - b.side;
}

/* s with p added (kept sorted); false when it would not fit. */
static bool with_pair(pairset *s, pair p) {
  int at = 0;
  while (at < s->n && pair_cmp(s->p[at], p) < 0) at++;
  if (at < s->n && !pair_cmp(s->p[at], p)) return true;
  if (s->n == MAX_PAIRS) return false;
  memmove(&s->p[at + 1], &s->p[at], sizeof(pair) * (size_t)(s->n - at));
  s->p[at] = p;
  s->n++;
  return true;
}

/* Whether every pair of a is in b. */
static bool subset(const pairset *a, const pairset *b) {
  int j = 0;
  for (int i = 0; i < a->n; i++) {
    while (j < b->n && pair_cmp(b->p[j], a->p[i]) < 0) j++;
    if (j == b->n || pair_cmp(b->p[j], a->p[i])) return false;
  }
  return true;
}

static bool set_equal(const pairset *a, const pairset *b) { return a->n == b->n && subset(a, b); }

/* c with one more path's set s (c = c or s). */
static void add_path(context *c, const pairset *s) {
  if (c->complex) return;
  for (int i = 0; i < c->n; i++)
    if (subset(&c->s[i], s)) return; /* needed already whenever s holds */
  int k = 0;
  for (int i = 0; i < c->n; i++)
    if (!subset(s, &c->s[i])) c->s[k++] = c->s[i];
  if (k == MAX_ALTS) {
    c->complex = true;
    return;
  }
  c->s[k++] = *s;
  c->n = k;
}

/* c with reader r's context, through r's input `index` (an ifelse's
 * branch adds its pair to each of r's sets). */
static void add_reader(context *c, const context *r, const rg_node *reader, int index) {
  if (r->complex) {
    c->complex = true;
    return;
  }
  bool branch = reader->op->code == RG_OP_IFELSE && index > 0;
  pair p = {reader->inputs[0], index <= reader->nout ? 1 : 2};
  for (int i = 0; i < r->n; i++) {
    pairset s = r->s[i];
    if (branch && !with_pair(&s, p)) {
      c->complex = true;
      return;
    }
    add_path(c, &s);
  }
}

static bool always(const context *c) { return !c->complex && c->n == 1 && c->s[0].n == 0; }

static bool context_equal(const context *a, const context *b) {
  if (a->complex || b->complex || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    bool found = false;
    for (int j = 0; j < b->n && !found; j++) found = set_equal(&a->s[i], &b->s[j]);
    if (!found) return false;
  }
  return true;
}

/* Invariant: c[k] is node k's context, NULL when the node is needed
 * always (most nodes: only the nodes under some branch hold one). */
struct rgr_guards {
  rg_map at;     /* node -> its index in c */
  size_t n;
  context **c;
};

static const context always_ctx = {.n = 1}; /* one path, through no branch */

static const context *ctx_at(const rgr_guards *r, size_t k) { return r->c[k] ? r->c[k] : &always_ctx; }

/* Node x's context: the union over its readers of theirs (an output of
 * the graph: a path through no branch); NULL for always, or on no memory
 * (*oom set). */
static context *context_made(const rgr_guards *r, const rg_node *x, bool *oom) {
  static const pairset none = {.n = 0};
  context acc = {0};
  for (int o = 0; o < x->nout && !always(&acc); o++)
    for (uint32_t i = 0; i < x->outputs[o]->nclients && !always(&acc); i++) {
      const rg_client *cl = &x->outputs[o]->clients[i];
      if (!cl->node) add_path(&acc, &none);
      else add_reader(&acc, ctx_at(r, *rg_map_get(&r->at, (uint64_t)(uintptr_t)cl->node)), cl->node, cl->index);
    }
  if (always(&acc)) return NULL;
  context *c = rg_calloc(1, sizeof *c);
  if (!c) *oom = true;
  else *c = acc;
  return c;
}

/* Every node's context, in reverse topological order. */
rgr_guards *rgr_guards_of(rg_fgraph *fg) {
  if (!rg_fgraph_count_op(fg, RG_OP_IFELSE)) return NULL;
  rgr_guards *r = rg_calloc(1, sizeof *r);
  if (!r) return NULL; /* no memory: every node compares equal, as without an ifelse */
  rg_node *const *order = rg_fgraph_toposort(fg, &r->n);
  if (rg_map_init(&r->at, &rg_heap, r->n + 1)) {
    rg_free(r);
    return NULL;
  }
  bool oom = !(r->c = rg_calloc(r->n + 1, sizeof *r->c));
  for (size_t k = 0; k < r->n && !oom; k++) oom = rg_map_put(&r->at, (uint64_t)(uintptr_t)order[k], k) != 0;
  for (size_t k = r->n; k-- > 0 && !oom;) r->c[k] = context_made(r, order[k], &oom);
  if (oom) {
    rgr_guards_free(r);
    return NULL;
  }
  return r;
}

static const context *context_of(const rgr_guards *r, const rg_node *n) {
  const uint64_t *i = rg_map_get(&r->at, (uint64_t)(uintptr_t)n);
  return i ? ctx_at(r, *i) : NULL;
}

bool rgr_same_guards(const rgr_guards *r, const rg_node *a, const rg_node *b) {
  if (!r) return true;
  const context *ca = context_of(r, a), *cb = context_of(r, b);
  if (!ca || !cb) return true; /* a node made since: not an original node of the graph */
  return (always(ca) && always(cb)) || context_equal(ca, cb);
}

bool rgr_unguarded(const rgr_guards *r, const rg_node *n) {
  if (!r) return true;
  const context *c = context_of(r, n);
  return !c || always(c);
}

void rgr_guards_free(rgr_guards *r) {
  if (!r) return;
  rg_map_free(&r->at);
  for (size_t k = 0; r->c && k < r->n; k++) rg_free(r->c[k]);
  rg_free(r->c);
  rg_free(r);
}
