/*
 * guards.c — the ifelse branches each node of a graph is needed under,
 * for the rewrites that put nodes together (scan_merge, fusion) or move
 * them (the Scan push-outs): the lazy VM runs only the branch an ifelse's
 * condition selects, and a node that joins work of another branch, or
 * moves out of its branch, would run that work whichever branch is taken
 * (and fail where the branch not taken guards against failure).
 */
#include "rewrites/rewrite-impl.h"

#include <string.h>

/* The ifelse branches a node is needed under: the (condition, branch)
 * pairs that every path from it to an output of the graph goes through
 * (side 1 the then branch, 2 the else branch; the condition itself is not
 * a branch).  Pairs name the condition, not the ifelse: a gradient puts
 * each branch's work under ifelse nodes of its own on the same condition.
 * Invariant: pairs sorted by (condition, side), at most MAX_GUARDS (a
 * deeper nesting keeps the first it met: two nodes then compare equal on
 * what is kept). */
enum { MAX_GUARDS = 8 };
typedef struct guard { const rg_variable *cond; int side; } guard;
typedef struct guards { bool any; int n; guard g[MAX_GUARDS]; } guards; /* any: no path seen yet */

static int guard_cmp(guard a, guard b) {
  if (a.cond != b.cond) return (uintptr_t)a.cond < (uintptr_t)b.cond ? -1 : 1;
  return a.side - b.side;
}

static bool guards_equal(const guards *a, const guards *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (guard_cmp(a->g[i], b->g[i])) return false;
  return true;
}

/* s with the pair p added (kept sorted). */
static guards with_pair(guards s, guard p) {
  int at = 0;
  while (at < s.n && guard_cmp(s.g[at], p) < 0) at++;
  if ((at < s.n && !guard_cmp(s.g[at], p)) || s.n == MAX_GUARDS) return s;
  memmove(&s.g[at + 1], &s.g[at], sizeof(guard) * (size_t)(s.n - at));
  s.g[at] = p;
  s.n++;
  return s;
}

/* *acc = *acc ∩ s (a path through s's pairs). */
static void meet(guards *acc, const guards *s) {
  if (acc->any) {
    *acc = *s;
    acc->any = false;
    return;
  }
  int n = 0;
  for (int i = 0, j = 0; i < acc->n && j < s->n;) {
    int c = guard_cmp(acc->g[i], s->g[j]);
    if (!c) acc->g[n++] = acc->g[i], i++, j++;
    else if (c < 0) i++;
    else j++;
  }
  acc->n = n;
}

struct rgr_guards {
  rg_map at;   /* node -> its index in g */
  guards *g;
};

/* Every node's pairs, in reverse topological order: a node's are the meet
 * over its readers of the reader's own, plus the branch it enters where
 * the reader is an ifelse. */
rgr_guards *rgr_guards_of(rg_fgraph *fg) {
  if (!rg_fgraph_count_op(fg, RG_OP_IFELSE)) return NULL;
  rgr_guards *r = rg_calloc(1, sizeof *r);
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  if (!r || rg_map_init(&r->at, &rg_heap, n + 1) || !(r->g = rg_calloc(n + 1, sizeof *r->g))) {
    rg_free(r);
    return NULL; /* no memory: every node compares equal, as without an ifelse */
  }
  for (size_t k = 0; k < n; k++) rg_map_put(&r->at, (uint64_t)(uintptr_t)order[k], k);
  static const guards none = {.any = false, .n = 0};
  for (size_t k = n; k-- > 0;) {
    const rg_node *x = order[k];
    guards acc = {.any = true};
    for (int o = 0; o < x->nout; o++)
      for (uint32_t c = 0; c < x->outputs[o]->nclients; c++) {
        const rg_client *cl = &x->outputs[o]->clients[c];
        if (!cl->node) { /* an output of the graph */
          meet(&acc, &none);
          continue;
        }
        guards via = r->g[*rg_map_get(&r->at, (uint64_t)(uintptr_t)cl->node)];
        if (cl->node->op->code == RG_OP_IFELSE && cl->index > 0)
          via = with_pair(via, (guard){cl->node->inputs[0], cl->index <= cl->node->nout ? 1 : 2});
        meet(&acc, &via);
      }
    r->g[k] = acc.any ? none : acc;
  }
  return r;
}

bool rgr_same_guards(const rgr_guards *r, const rg_node *a, const rg_node *b) {
  if (!r) return true;
  const uint64_t *ia = rg_map_get(&r->at, (uint64_t)(uintptr_t)a), *ib = rg_map_get(&r->at, (uint64_t)(uintptr_t)b);
  if (!ia || !ib) return true; /* a node made since: not an original node of the graph */
  return guards_equal(&r->g[*ia], &r->g[*ib]);
}

bool rgr_unguarded(const rgr_guards *r, const rg_node *n) {
  if (!r) return true;
  const uint64_t *i = rg_map_get(&r->at, (uint64_t)(uintptr_t)n);
  return !i || r->g[*i].n == 0;
}

void rgr_guards_free(rgr_guards *r) {
  if (!r) return;
  rg_map_free(&r->at);
  rg_free(r->g);
  rg_free(r);
}
