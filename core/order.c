/*
 * order.c — the incrementally maintained topological order of a
 * FunctionGraph.
 *
 * The nodes form a doubly linked list whose labels (64-bit integers)
 * increase along it, so "does u come before v" is one comparison.  New
 * labels go in the gap between two neighbours; when a gap is exhausted, a
 * window around the spot is relabelled evenly, the window growing until its
 * label span leaves a comfortable gap per node (order maintenance in the
 * style of Dietz and Sleator; appends take a large fixed stride).
 *
 * A new edge u -> v with label(u) > label(v) is repaired as in Pearce and
 * Kelly's dynamic topological sort: F = nodes reachable forward from v with
 * labels below u's, B = nodes reaching u backward with labels above v's.
 * Moving F right after u, or B right before v, restores the order (F's
 * other inputs are all before u; B's other clients all after v).  The two
 * searches advance in lockstep and the first to finish is moved, so the
 * cost is proportional to the smaller affected region, not to the graph.
 * Finding u in F (or v in B) means the edge would close a cycle.
 */
#include "core/core-impl.h"

#define STRIDE (UINT64_C(1) << 32)   /* label step of appends */
#define LABEL_MAX (UINT64_C(1) << 62)
#define MIN_GAP (UINT64_C(1) << 16)  /* gap per node left by a relabel */

/* ------------------------------------------------------------------ relabelling */

static void relabel_all(rg_fgraph *fg) {
  uint64_t step = LABEL_MAX / (fg->nnodes + 2);
  uint64_t l = step;
  for (rg_node *n = fg->head; n; n = n->next, l += step) n->label = l;
}

/* Relabels a window around `at` (a node of the list) so that the gap after
 * `at` is at least 2. */
static void relabel_around(rg_fgraph *fg, rg_node *at) {
  rg_node *lo = at, *hi = at;
  size_t k = 1;
  for (;;) {
    uint64_t below = lo->prev ? lo->prev->label : 0;
    uint64_t above = hi->next ? hi->next->label : LABEL_MAX;
    if ((above - below) / (k + 1) >= MIN_GAP) {
      uint64_t step = (above - below) / (k + 1), l = below + step;
      for (rg_node *n = lo;; n = n->next, l += step) {
        n->label = l;
        if (n == hi) break;
      }
      return;
    }
    if (!lo->prev && !hi->next) {
      relabel_all(fg);
      return;
    }
    /* double the window, half on each side */
    size_t grow = k / 2 + 1;
    for (size_t i = 0; i < grow && lo->prev; i++, k++) lo = lo->prev;
    for (size_t i = 0; i < grow && hi->next; i++, k++) hi = hi->next;
  }
}

/* ------------------------------------------------------------------ the list */

static void link_after(rg_fgraph *fg, rg_node *prev, rg_node *n) {
  rg_node *next = prev ? prev->next : fg->head;
  n->prev = prev;
  n->next = next;
  if (prev) prev->next = n; else fg->head = n;
  if (next) next->prev = n; else fg->tail = n;
}

void rgc_order_append(rg_fgraph *fg, rg_node *n) {
  uint64_t l = fg->tail ? fg->tail->label + STRIDE : STRIDE;
  link_after(fg, fg->tail, n);
  n->label = l;
  if (l >= LABEL_MAX) relabel_all(fg);
}

void rgc_order_insert_after(rg_fgraph *fg, rg_node *prev, rg_node *n) {
  uint64_t below = prev ? prev->label : 0;
  uint64_t above = (prev ? prev->next : fg->head) ? (prev ? prev->next : fg->head)->label : LABEL_MAX;
  link_after(fg, prev, n);
  if (above - below >= 2) {
    n->label = below + (above - below) / 2;
    return;
  }
  n->label = below; /* temporarily equal; the relabel fixes it */
  relabel_around(fg, n);
}

void rgc_order_remove(rg_fgraph *fg, rg_node *n) {
  if (n->prev) n->prev->next = n->next; else fg->head = n->next;
  if (n->next) n->next->prev = n->prev; else fg->tail = n->prev;
  n->prev = n->next = NULL;
}

/* ------------------------------------------------------------------ repairing an edge */

/* One lockstep search: a stack of nodes and the set found so far. */
typedef struct search {
  rgc_scratch pending, found; /* nodes of the graph */
  uint64_t epoch;
} search;

/* Insertion sort by label: short lists, and the nearly sorted ones a
 * rewrite leaves. */
static void sort_short(rg_node **v, size_t n) {
  for (size_t i = 1; i < n; i++) {
    rg_node *x = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1]->label > x->label; j--) v[j] = v[j - 1];
    v[j] = x;
  }
}

/* Quicksort by label (Hoare's partition around the middle element's label),
 * recursing into the shorter part, insertion sort below 24 nodes. */
static void sort_long(rg_node **v, size_t n) {
  while (n > 24) {
    uint64_t p = v[(n - 1) / 2]->label;
    size_t i = (size_t)-1, j = n;
    for (;;) {
      do i++; while (v[i]->label < p);
      do j--; while (v[j]->label > p);
      if (i >= j) break;
      rg_node *t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
    size_t left = j + 1; /* [0, left) <= p <= [left, n) */
    if (left < n - left) {
      sort_long(v, left);
      v += left;
      n -= left;
    } else {
      sort_long(v + left, n - left);
      n = left;
    }
  }
  sort_short(v, n);
}

void rg_fgraph_sort_nodes(rg_node **v, size_t n) {
  size_t i = 1;
  while (i < n && v[i - 1]->label < v[i]->label) i++;
  if (i < n) sort_long(v, n);
}

/* Pushes the graph's clients of x's outputs with label < bound.  Returns
 * false when `target` is among them (a cycle). */
static bool forward_step(rg_fgraph *fg, search *s, rg_node *x, rg_node *target) {
  for (int k = 0; k < x->nout; k++) {
    rg_variable *o = x->outputs[k];
    for (uint32_t c = 0; c < o->nclients; c++) {
      rg_node *y = o->clients[c].node;
      if (!y) continue;
      if (y == target) return false;
      if (y->label < target->label && y->mark != s->epoch) {
        y->mark = s->epoch;
        rgc_spush(&s->pending, (uintptr_t)y);
        rgc_spush(&s->found, (uintptr_t)y);
      }
    }
  }
  return true;
}

/* Pushes owners of x's inputs (in the graph) with label > target's. */
static bool backward_step(rg_fgraph *fg, search *s, rg_node *x, rg_node *target) {
  for (int i = 0; i < x->nin; i++) {
    rg_node *y = x->inputs[i]->owner;
    if (!y || y->fgraph != fg) continue;
    if (y == target) return false;
    if (y->label > target->label && y->mark != s->epoch) {
      y->mark = s->epoch;
      rgc_spush(&s->pending, (uintptr_t)y);
      rgc_spush(&s->found, (uintptr_t)y);
    }
  }
  return true;
}

/* Moves the found set (sorted by label) after `after` or before `before`. */
static void move_set(rg_fgraph *fg, search *s, rg_node *after, rg_node *before) {
  rg_node **v = (rg_node **)s->found.v;
  size_t n = s->found.n;
  rg_fgraph_sort_nodes(v, n);
  for (size_t i = 0; i < n; i++) rgc_order_remove(fg, v[i]);
  rg_node *prev = after ? after : before->prev;
  for (size_t i = 0; i < n; i++) {
    rgc_order_insert_after(fg, prev, v[i]);
    prev = v[i];
  }
}

static int finish(search *F, search *B, int rc) {
  rgc_sfree(&F->pending), rgc_sfree(&F->found), rgc_sfree(&B->pending), rgc_sfree(&B->found);
  return rc;
}

int rgc_order_edge(rg_fgraph *fg, rg_node *u, rg_node *v) {
  if (u == v) return rg_error(fg->ctx, RG_ERR_TYPE, "the change would make a node its own input (a cycle)");
  if (u->label < v->label) return RG_OK;
  search F = {.epoch = rgc_new_epoch()}, B = {.epoch = rgc_new_epoch()};
  rgc_spush(&F.pending, (uintptr_t)v);
  rgc_spush(&F.found, (uintptr_t)v);
  v->mark = F.epoch;
  rgc_spush(&B.pending, (uintptr_t)u);
  rgc_spush(&B.found, (uintptr_t)u);
  u->mark = B.epoch;
  for (;;) {
    if (!F.pending.n) {
      move_set(fg, &F, u, NULL);
      return finish(&F, &B, RG_OK);
    }
    if (!B.pending.n) {
      move_set(fg, &B, NULL, v);
      return finish(&F, &B, RG_OK);
    }
    rg_node *x = (rg_node *)F.pending.v[--F.pending.n];
    rg_node *y = (rg_node *)B.pending.v[--B.pending.n];
    if (!forward_step(fg, &F, x, u) || !backward_step(fg, &B, y, v))
      return finish(&F, &B, rg_error(fg->ctx, RG_ERR_TYPE, "the change would create a cycle"));
  }
}
