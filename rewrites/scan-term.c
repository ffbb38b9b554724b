/*
 * scan-term.c — relations over Scan nodes for rule files: the push-outs
 * of the rules in scan.kn, each runnable both ways.
 *
 * A Scan output reaches a rule as a graph term like any other variable:
 * (nth K ((scan ...) n_steps outer-input ...)).  The relations below read
 * the node behind such a term and relate it to another Scan node, built
 * through rg_op_scan (which checks the layout against the inner graph), so
 * a Scan that would be ill-typed is never produced: the relation fails.
 *
 *   (scan-nonseq-pusho IN OUT)
 *       IN and OUT are the same output of two Scans computing the same
 *       thing; in OUT, the step values IN's step computes from
 *       non-sequences and constants only (pure ops, the largest such
 *       values some other step value or a step output uses) are inner
 *       inputs: new non-sequences appended after IN's, whose outer values
 *       are the same computations over IN's outer non-sequences.  IN's
 *       non-sequences are all kept (an unused one is dropped later by
 *       remove_constants_and_unused_inputs_scan), so the relation is a
 *       bijection on the Scans it relates.  Forwards only: a Scan of one
 *       output whose step returns a non-sequence (or a constant) and
 *       nothing else is gone, its trace that value repeated n_steps
 *       times (alloc); an alloc is never turned back into a loop.
 *
 *   (scan-seq-pusho IN OUT)
 *       likewise for step values IN's step computes from single-tap
 *       sequence slices (and non-sequences, constants) by elementwise ops,
 *       dimshuffles and dot(slice, matrix non-sequence): in OUT they
 *       are new sequences (tap 0, after IN's), whose outer values compute
 *       every row at once over the whole sequences (the dot as one matrix
 *       product over the sequence's rows).  Sequences combined outside
 *       must be the same or of the same known length, so the rows line up
 *       (go_backwards reads both from their end alike).  Backwards, a
 *       sequence whose outer value is such a computation over the Scan's
 *       other single-tap sequences, its non-sequences and constants moves
 *       into the step (the broadcast dimshuffles the forward direction
 *       adds to align ranks are left to the step's own broadcasting).
 *
 *   (scan-dot1-pusho IN OUT)
 *       IN is trace[-1] of a one-output Scan over one sequence x whose
 *       sit-sot from a0 steps acc + dot(x_t, W) (either order, W a
 *       non-sequence, no until, forwards); OUT is
 *       a0 + dot(sum(x[:n], axis 0), W): the loop is gone.  Backwards,
 *       that form (the stop of the slice an input or a literal) becomes
 *       the loop again, built by rg_scan as a graph file's `scan` form
 *       builds it, and its last state.
 *
 *   (scan-add-pusho IN OUT)
 *       IN is trace[-1] of a one-output Scan over two sequences a, b
 *       whose sit-sot from a0 steps acc + dot(a_t, b_t) (matrix slices);
 *       OUT is a0 + dot(reshape(a[:n]^(1,0,2), (m, n*k)),
 *       reshape(b[:n], (n*k, p))): one product of the laid-out traces.
 *       Backwards, that form becomes the loop again.
 *
 * The relations are projecting: they look at the values their arguments
 * have when called.  With IN a graph term of the form they read, they
 * compute OUT (forwards: the work moves out); with OUT a graph term and IN
 * unbound they compute IN (backwards: the first non-sequence or sequence
 * whose outer value has the form the forward direction builds, or the
 * closed form of an accumulation, moves into a loop).  Run forwards then
 * backwards, each gives the original graph back (rg_equal_computations).
 * Otherwise they fail.  The rule file composes them into rules (scan.kn).
 *
 * Design.  Each relation relates two whole graphs through C that reads and
 * builds Scan nodes with the public Scan API, rather than exposing the
 * step to the relational language as a term with leaves for its inner
 * inputs: the bridge (core/bridge.c) expands graph terms lazily and
 * evaluates etuples into nodes, and a Scan's step is a graph of its own
 * whose inner inputs have no meaning outside it.  A relation over whole
 * Scans keeps every answer a well-formed Scan (rg_op_scan checks it), and
 * costs nothing on nodes it does not read.
 *
 * Invariant of every node built here: the inner graph's inputs are in the
 * layout's order (sequence taps, state taps, non-sequences), and the outer
 * inputs are the node's own with sequences or non-sequences added after
 * their kind's, or one removed.
 */
#include "rewrites/scan-rw.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

bool rgr_pure_node(const rg_node *m) {
  rg_op_family f = rg_opcode_family(m->op->code);
  return m->op->inplace < 0 && m->nout == 1 && m->op->code != RG_OP_ALLOC_EMPTY && m->op->code != RG_OP_SCAN &&
         (f == RG_FAM_ELEMWISE || f == RG_FAM_SHAPE || f == RG_FAM_BLAS || f == RG_FAM_REDUCE);
}


/* What push_out_non_seq moves and push_in_non_seq brings back: a pure
 * node, or a loop of one output (a Scan in the step over non-sequences
 * only runs once before the outer loop). */
static bool movable_once(const rg_node *m) {
  return rgr_pure_node(m) || (m->op->code == RG_OP_SCAN && m->nout == 1 && m->op->inplace < 0);
}

/* The Scan node behind a graph term, or NULL. */
/* The Scan node of the output t names (*v: that output), or NULL. */
static const rg_node *scan_of(rg_ctx *C, rg_term t, V *v) {
  *v = rgr_term_value(C, t);
  return *v && (*v)->owner && (*v)->owner->op->code == RG_OP_SCAN ? (*v)->owner : NULL;
}

/* A growable list of variables. */
typedef struct vlist { V *v; int n, cap; } vlist;

static void vl_add(vlist *l, V v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    V *w = rg_gc_alloc(sizeof *w * (size_t)cap);
    if (l->n) memcpy(w, l->v, sizeof *w * (size_t)l->n);
    l->v = w, l->cap = cap;
  }
  l->v[l->n++] = v;
}

/* The node with the step rebuilt over `nin` inner inputs `in` (fresh
 * variables), its outputs cloned from the old step's with `memo` (old
 * inner variable -> new), the layout `t` and the outer inputs `outer`. */
static rg_node *rebuild(rg_ctx *C, const rg_node *node, const rg_scan_info *t, int nin, V *in, rg_memo *memo,
                        int nouter, V *outer) {
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int oin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  V *old_in = rg_gc_alloc(sizeof(V) * (size_t)(oin + 1)), *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  V *outs = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (int i = 0; i < oin; i++) old_in[i] = rg_fgraph_input(g, i);
  for (int o = 0; o < nout; o++) gout[o] = rg_fgraph_output(g, o);
  if (rg_clone(C, oin, old_in, nout, gout, memo, 0, outs)) return NULL;
  rg_fgraph *ng = rg_fgraph_new(C, nin, in, nout, outs, RG_FG_CLONE);
  const rg_op *op = ng ? rg_op_scan(C, t, ng) : NULL;
  return op ? rg_make_node(C, op, nouter, outer) : NULL;
}

/* ------------------------------------------------------------------ forwards: non-sequence work out */

/* The outer value of every step value computed from non-sequences and
 * constants only (inner variable -> outer variable in `outer`). */
static void classify_once(rg_ctx *C, const rg_node *node, const rg_scan_info *s, rg_memo *outer) {
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  for (int k = 0; k < s->n_non_seqs; k++)
    rg_memo_put(outer, rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)),
                node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)]);
  rgr_guards *guards = rgr_guards_of((rg_fgraph *)g); /* work under an ifelse branch stays in it */
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) {
    if (!movable_once(m) || m->nin > 16 || !rgr_unguarded(guards, m)) continue;
    V in[16];
    bool ok = true, reads = false;
    for (int i = 0; ok && i < m->nin; i++) {
      V x = m->inputs[i];
      if (rg_is_constant(x)) ok = (in[i] = rgr_copy_const(C, x)) != NULL;
      else ok = (in[i] = rg_memo_get(outer, x)) != NULL, reads = true;
    }
    if (!ok || !reads) continue;
    rg_node *r = rg_make_node(C, m->op, m->nin, in);
    if (r) rg_memo_put(outer, m->outputs[0], r->outputs[0]);
    else rg_clear_error(C);
  }
  rgr_guards_free(guards);
}

/* The computed outside values an inside node or a step output uses. */
static vlist once_frontier(const rg_fgraph *g, rg_memo *outer) {
  vlist f = {0};
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) {
    if (m->nout == 1 && rg_memo_get(outer, m->outputs[0])) continue;
    for (int i = 0; i < m->nin; i++)
      if (m->inputs[i]->owner && rg_memo_get(outer, m->inputs[i])) vl_add(&f, m->inputs[i]);
  }
  for (int o = 0; o < rg_fgraph_noutputs(g); o++) {
    V v = rg_fgraph_output(g, o);
    if (v->owner && rg_memo_get(outer, v)) vl_add(&f, v);
  }
  return f;
}

/* The non-sequence of node whose outer value computes what v does, or -1. */
static int same_non_seq(const rg_node *node, const rg_scan_info *s, V v) {
  for (int j = 0; j < s->n_non_seqs; j++) {
    V x = node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, j)];
    if (x == v || (rg_type_equal(x->type, v->type) && rg_equal_computations(1, &x, &v, 0, NULL, NULL))) return j;
  }
  return -1;
}

static rg_node *push_out_non_seq(rg_ctx *C, const rg_node *node) {
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return NULL;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  rg_memo *outer = rg_memo_new();
  classify_once(C, node, &s, outer);
  vlist f = once_frontier(g, outer);
  if (!f.n) return NULL;
  int oin = rg_fgraph_ninputs(g), nin = oin, nouter = node->nin;
  V *in = rg_gc_alloc(sizeof(V) * (size_t)(oin + f.n)), *outer_in = rg_gc_alloc(sizeof(V) * (size_t)(nouter + f.n));
  rg_memo *memo = rg_memo_new();
  for (int i = 0; i < oin; i++) {
    V x = rg_fgraph_input(g, i);
    rg_memo_put(memo, x, in[i] = rg_input(C, x->name, x->type));
  }
  memcpy(outer_in, node->inputs, sizeof(V) * (size_t)node->nin);
  for (int i = 0; i < f.n; i++) {
    V v = f.v[i], ov = rg_memo_get(outer, v);
    int j = same_non_seq(node, &s, ov);
    if (j >= 0) { /* the loop has it already: read that input (no second copy) */
      rg_memo_put(memo, v, in[rg_scan_inner_in(&s, RG_SCAN_NON_SEQ, j, 0)]);
      continue;
    }
    rg_memo_put(memo, v, in[nin++] = rg_input(C, v->name, v->type));
    outer_in[nouter++] = ov;
  }
  rg_scan_info t = s;
  t.n_non_seqs += nin - oin;
  return rebuild(C, node, &t, nin, in, memo, nouter, outer_in);
}

/* Output k of a Scan whose step computes nothing for it: the step returns
 * a non-sequence (or a constant) there, so the trace is that value
 * repeated, one row per step kept (min(store_steps, n_steps) when it keeps
 * only the last rows).  NULL when output k is not of that form (or the
 * loop has an until or mit-mots).  When every output is, the Scan goes
 * away: its outputs are these broadcasts (Aesara's push_out_non_seq). */
V rgr_scan_vanished(rg_ctx *C, const rg_node *node, int k) {
  rg_scan_info s;
  if (k < 0 || k >= node->nout || !rg_scan_info_of(node->op, &s) || s.until || s.n_mit_mot) return NULL;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  V o = rg_fgraph_output(g, k), value = NULL;
  if (rg_is_constant(o)) value = rgr_copy_const(C, o);
  for (int j = 0; !value && j < s.n_non_seqs; j++)
    if (rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_NON_SEQ, j, 0)) == o)
      value = node->inputs[rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, j)];
  if (!value) return NULL;
  V dims[RG_MAX_NDIM + 1];
  int64_t rows = node->outputs[k]->type->shape[0]; /* the type's, when it knows */
  dims[0] = rows >= 0 ? rg_constant_scalar_int(C, RG_INT64, rows) : node->inputs[0];
  if (rows < 0 && s.store_steps && s.store_steps[k] > 0)
    dims[0] = rg_minimum(dims[0], rg_constant_scalar_int(C, RG_INT64, s.store_steps[k]));
  rg_variable **shape = rg_shape_of(C, value); /* constants where the sizes are static */
  for (int d = 0; d < value->type->ndim; d++) dims[d + 1] = shape[d];
  return rg_allocate(value, value->type->ndim + 1, dims);
}

/* ------------------------------------------------------------------ backwards: non-sequence work in */

/* Whether outer value x is a pure computation over the node's outer
 * non-sequences other than the k-th, and constants (depth-limited). */
static bool pushable_in(const rg_node *node, const rg_scan_info *s, int k, V x, int depth) {
  if (rg_is_constant(x)) return true;
  for (int j = 0; j < s->n_non_seqs; j++)
    if (j != k && node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, j)] == x) return true;
  if (!x->owner || !movable_once(x->owner) || depth > 64) return false;
  for (int i = 0; i < x->owner->nin; i++)
    if (!pushable_in(node, s, k, x->owner->inputs[i], depth + 1)) return false;
  return true;
}

/* The node with non-sequence k's outer computation moved into the step. */
static rg_node *push_in_non_seq_k(rg_ctx *C, const rg_node *node, const rg_scan_info *s, int k) {
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int oin = rg_fgraph_ninputs(g), drop_in = rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0);
  int drop_out = rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k);
  V *in = rg_gc_alloc(sizeof(V) * (size_t)oin), *outer_in = rg_gc_alloc(sizeof(V) * (size_t)node->nin);
  rg_memo *memo = rg_memo_new(), *leaves = rg_memo_new();
  int a = 0;
  for (int i = 0; i < oin; i++) {
    if (i == drop_in) continue;
    V x = rg_fgraph_input(g, i);
    rg_memo_put(memo, x, in[a++] = rg_input(C, x->name, x->type));
  }
  /* the outer non-sequences (but k) are the pushed computation's leaves */
  V *lv = rg_gc_alloc(sizeof(V) * (size_t)(s->n_non_seqs + 1));
  int nl = 0;
  for (int j = 0; j < s->n_non_seqs; j++) {
    V o = node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, j)];
    if (j == k || rg_memo_get(leaves, o)) continue;
    rg_memo_put(leaves, o, rg_memo_get(memo, rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_NON_SEQ, j, 0))));
    lv[nl++] = o;
  }
  V value = NULL, x = node->inputs[drop_out];
  if (rg_clone(C, nl, lv, 1, &x, leaves, RG_CLONE_CONSTANTS, &value)) return NULL;
  rg_memo_put(memo, rg_fgraph_input(g, drop_in), value);
  int b = 0;
  for (int i = 0; i < node->nin; i++)
    if (i != drop_out) outer_in[b++] = node->inputs[i];
  rg_scan_info t = *s;
  t.n_non_seqs -= 1;
  return rebuild(C, node, &t, a, in, memo, b, outer_in);
}

static rg_node *push_in_non_seq(rg_ctx *C, const rg_node *node) {
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return NULL;
  for (int k = 0; k < s.n_non_seqs; k++) {
    V x = node->inputs[rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, k)];
    if (x->owner && pushable_in(node, &s, k, x, 0)) return push_in_non_seq_k(C, node, &s, k);
  }
  return NULL;
}

/* ------------------------------------------------------------------ forwards: sequence work out */

enum { K_NONE = 0, K_ONCE = 1, K_ALL = 2 };

/* The classification of a step for push_out_seq.  Invariant: an inner
 * variable of kind K_ALL has as outer value the step values of every row
 * of its sequences (time axis first) and as `rep` one sequence it was
 * computed from; K_ONCE ones have their outer value (no time axis). */
typedef struct seqcls {
  rg_ctx *C;
  rg_memo *kind, *outer, *rep;
  const rgr_guards *guards; /* of the step: work under an ifelse branch stays in it */
} seqcls;

static int kind_of(const seqcls *c, V v) { return (int)(intptr_t)rg_memo_get(c->kind, v); }

static void put(seqcls *c, V v, int k, V outer, V rep) {
  rg_memo_put(c->kind, v, (void *)(intptr_t)k);
  rg_memo_put(c->outer, v, outer);
  if (rep) rg_memo_put(c->rep, v, rep);
}

/* Whether whole sequences a and b line up row by row: the same sequence,
 * or the same known length. */
static bool same_rows(V a, V b) {
  return a == b || (a->type->shape[0] >= 0 && a->type->shape[0] == b->type->shape[0]);
}



/* Whether v is rgr_dot_rows(A, W) (A and W set). */
static bool is_dot_rows(rg_ctx *C, V v, V *A, V *W) {
  const rg_node *r = v->owner, *d, *f, *mv;
  if (!r || r->op->code != RG_OP_RESHAPE || v->type->ndim != 3) return false;
  if (!(d = r->inputs[0]->owner) || d->op->code != RG_OP_DOT) return false;
  if (!(f = d->inputs[0]->owner) || f->op->code != RG_OP_RESHAPE || f->inputs[0]->type->ndim != 3) return false;
  if (!(mv = r->inputs[1]->owner) || mv->op->code != RG_OP_MAKE_VECTOR || mv->nin != 3) return false;
  *A = f->inputs[0], *W = d->inputs[1];
  V *sh = rg_shape_of(C, *A);
  return sh && rg_equal_computations(2, mv->inputs, sh, 0, NULL, NULL);
}

/* The outer value of an all-steps node (NULL: it stays inside). */
static V all_steps(seqcls *c, const rg_node *m, V *in, V *rep) {
  rg_opcode code = m->op->code;
  *rep = NULL;
  for (int i = 0; i < m->nin; i++) {
    V r = kind_of(c, m->inputs[i]) == K_ALL ? rg_memo_get(c->rep, m->inputs[i]) : NULL;
    if (r && *rep && !same_rows(*rep, r)) return NULL;
    if (r && !*rep) *rep = r;
  }
  if (rg_opcode_family(code) == RG_FAM_ELEMWISE) {
    int nd = m->outputs[0]->type->ndim;
    for (int i = 0; i < m->nin; i++)
      if (kind_of(c, m->inputs[i]) == K_ALL) in[i] = rgr_with_rank(in[i], nd);
    rg_node *r = rg_make_node(c->C, m->op, m->nin, in);
    return r ? r->outputs[0] : NULL;
  }
  if (code == RG_OP_DIMSHUFFLE) {
    int n = m->op->nints;
    int64_t order[RG_MAX_NDIM + 1];
    order[0] = 0;
    for (int i = 0; i < n; i++) order[i + 1] = m->op->ints[i] < 0 ? -1 : m->op->ints[i] + 1;
    return rg_dimshuffle(in[0], n + 1, order);
  }
  if (code == RG_OP_DOT && kind_of(c, m->inputs[0]) == K_ALL && kind_of(c, m->inputs[1]) == K_ONCE &&
      m->inputs[1]->type->ndim == 2)
    return m->inputs[0]->type->ndim == 1 ? rg_dot(in[0], in[1]) : rgr_dot_rows(c->C, in[0], in[1]);
  return NULL;
}

static void classify_seq_node(seqcls *c, const rg_node *m) {
  if (!rgr_pure_node(m) || m->nin > 16 || !rgr_unguarded(c->guards, m)) return;
  V in[16];
  int k = K_ONCE;
  bool reads = false;
  for (int i = 0; i < m->nin; i++) {
    V x = m->inputs[i];
    if (rg_is_constant(x)) {
      if (!(in[i] = rgr_copy_const(c->C, x))) return;
      continue;
    }
    int ki = kind_of(c, x);
    if (ki == K_NONE) return;
    if (ki == K_ALL) k = K_ALL;
    in[i] = rg_memo_get(c->outer, x), reads = true;
  }
  if (!reads) return;
  V rep = NULL, outer;
  if (k == K_ONCE) {
    rg_node *r = rg_make_node(c->C, m->op, m->nin, in);
    outer = r ? r->outputs[0] : NULL;
  } else {
    outer = all_steps(c, m, in, &rep);
  }
  if (outer) put(c, m->outputs[0], k, outer, rep);
  else rg_clear_error(c->C);
}

/* The all-steps values an inside node or a step output uses. */
static vlist all_frontier(const seqcls *c, const rg_fgraph *g) {
  vlist f = {0};
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) {
    if (m->nout == 1 && kind_of(c, m->outputs[0]) == K_ALL) continue;
    for (int i = 0; i < m->nin; i++)
      if (m->inputs[i]->owner && kind_of(c, m->inputs[i]) == K_ALL) vl_add(&f, m->inputs[i]);
  }
  for (int o = 0; o < rg_fgraph_noutputs(g); o++) {
    V v = rg_fgraph_output(g, o);
    if (v->owner && kind_of(c, v) == K_ALL) vl_add(&f, v);
  }
  return f;
}

/* The number of inner inputs the sequences take (one per tap). */
static int seq_inner_inputs(const rg_scan_info *s) {
  int n = 0;
  for (int k = 0; k < s->n_seqs; k++) n += s->seq_ntaps[k];
  return n;
}

static rg_node *push_out_seq(rg_ctx *C, const rg_node *node) {
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return NULL;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  seqcls c = {.C = C, .kind = rg_memo_new(), .outer = rg_memo_new(), .rep = rg_memo_new()};
  for (int k = 0; k < s.n_seqs; k++)
    if (s.seq_ntaps[k] == 1) {
      V x = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SEQ, k)];
      put(&c, rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_SEQ, k, 0)), K_ALL, x, x);
    }
  for (int k = 0; k < s.n_non_seqs; k++)
    put(&c, rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_NON_SEQ, k, 0)), K_ONCE,
        node->inputs[rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, k)], NULL);
  rgr_guards *guards = rgr_guards_of((rg_fgraph *)g);
  c.guards = guards;
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) classify_seq_node(&c, m);
  rgr_guards_free(guards);
  c.guards = NULL;
  rgr_keep_fusable_inside(c.kind, g);
  vlist f = all_frontier(&c, g);
  if (!f.n) return NULL;
  int oin = rg_fgraph_ninputs(g), nsi = seq_inner_inputs(&s), nin = oin + f.n, nouter = node->nin + f.n;
  int seq_end = 1 + s.n_seqs; /* outer: n_steps, then the sequences */
  V *in = rg_gc_alloc(sizeof(V) * (size_t)nin), *outer_in = rg_gc_alloc(sizeof(V) * (size_t)nouter);
  rg_memo *memo = rg_memo_new();
  for (int i = 0, j = 0; i < oin; i++, j++) {
    if (i == nsi) j += f.n; /* the new sequences' slices follow the old ones */
    V x = rg_fgraph_input(g, i);
    rg_memo_put(memo, x, in[j] = rg_input(C, x->name, x->type));
  }
  memcpy(outer_in, node->inputs, sizeof(V) * (size_t)seq_end);
  memcpy(outer_in + seq_end + f.n, node->inputs + seq_end, sizeof(V) * (size_t)(node->nin - seq_end));
  int *nt = rg_gc_alloc(sizeof(int) * (size_t)(s.n_seqs + f.n));
  const int64_t **tp = rg_gc_alloc(sizeof(int64_t *) * (size_t)(s.n_seqs + f.n));
  int64_t *zero = rg_gc_alloc(sizeof(int64_t));
  for (int k = 0; k < s.n_seqs; k++) nt[k] = s.seq_ntaps[k], tp[k] = s.seq_taps[k];
  for (int i = 0; i < f.n; i++) {
    V v = f.v[i];
    rg_memo_put(memo, v, in[nsi + i] = rg_input(C, v->name, v->type));
    outer_in[seq_end + i] = rg_memo_get(c.outer, v);
    nt[s.n_seqs + i] = 1, tp[s.n_seqs + i] = zero;
  }
  rg_scan_info t = s;
  t.n_seqs += f.n, t.seq_ntaps = nt, t.seq_taps = (const int64_t *const *)tp;
  return rebuild(C, node, &t, nin, in, memo, nouter, outer_in);
}

/* ------------------------------------------------------------------ backwards: sequence work in */

/* Converting an outer all-steps computation back into step values.
 * Invariant: `inner` maps an outer variable already converted to its step
 * value, `kind` to K_ONCE or K_ALL. */
typedef struct pushin {
  rg_ctx *C;
  const rg_node *node;
  const rg_scan_info *s;
  int drop;               /* the sequence moving in */
  V *fresh;               /* the new step's inputs, by old inner index */
  rg_memo *inner, *kind;
} pushin;

/* x's time axis then broadcast axes then x's own: with_rank's form. */
static bool is_with_rank(V v) {
  const rg_node *m = v->owner;
  if (!m || m->op->code != RG_OP_DIMSHUFFLE || m->op->nints < 2 || m->op->ints[0] != 0) return false;
  int i = 1, pad = 0, d = 1;
  while (i < m->op->nints && m->op->ints[i] < 0) i++, pad++;
  for (; i < m->op->nints; i++, d++)
    if (m->op->ints[i] != d) return false;
  return pad > 0 && d == m->inputs[0]->type->ndim;
}

static V to_step(pushin *p, V v, int *kind, int depth);

static V leaf_to_step(pushin *p, V v, int *kind) {
  const rg_scan_info *s = p->s;
  for (int j = 0; j < s->n_seqs; j++)
    if (j != p->drop && s->seq_ntaps[j] == 1 && p->node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, j)] == v)
      return *kind = K_ALL, p->fresh[rg_scan_inner_in(s, RG_SCAN_SEQ, j, 0)];
  for (int j = 0; j < s->n_non_seqs; j++)
    if (p->node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, j)] == v)
      return *kind = K_ONCE, p->fresh[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, j, 0)];
  if (rg_is_constant(v)) return *kind = K_ONCE, rgr_copy_const(p->C, v);
  return NULL;
}

static V node_to_step(pushin *p, const rg_node *m, int *kind, int depth) {
  if (!rgr_pure_node(m) || m->nin > 16) return NULL;
  V A, W;
  if (is_dot_rows(p->C, m->outputs[0], &A, &W)) {
    int ka, kw;
    V a = to_step(p, A, &ka, depth + 1), w = a ? to_step(p, W, &kw, depth + 1) : NULL;
    if (!w || ka != K_ALL || kw != K_ONCE) return NULL;
    return *kind = K_ALL, rg_dot(a, w);
  }
  V in[16];
  int ks[16], k = K_ONCE;
  bool elem = rg_opcode_family(m->op->code) == RG_FAM_ELEMWISE;
  for (int i = 0; i < m->nin; i++) {
    V x = m->inputs[i];
    if (elem && is_with_rank(x)) x = x->owner->inputs[0]; /* broadcasting aligns ranks inside */
    if (!(in[i] = to_step(p, x, &ks[i], depth + 1))) return NULL;
    if (ks[i] == K_ALL) k = K_ALL;
  }
  *kind = k;
  if (k == K_ONCE || elem) {
    rg_node *r = rg_make_node(p->C, m->op, m->nin, in);
    return r ? r->outputs[0] : NULL;
  }
  if (m->op->code == RG_OP_DIMSHUFFLE && m->op->ints[0] == 0) {
    int64_t order[RG_MAX_NDIM];
    for (int i = 1; i < m->op->nints; i++) order[i - 1] = m->op->ints[i] < 0 ? -1 : m->op->ints[i] - 1;
    return rg_dimshuffle(in[0], m->op->nints - 1, order);
  }
  if (m->op->code == RG_OP_DOT && ks[0] == K_ALL && ks[1] == K_ONCE && m->inputs[0]->type->ndim == 2 &&
      m->inputs[1]->type->ndim == 2)
    return rg_dot(in[0], in[1]);
  return NULL;
}

static V to_step(pushin *p, V v, int *kind, int depth) {
  V done = rg_memo_get(p->inner, v);
  if (done) return *kind = (int)(intptr_t)rg_memo_get(p->kind, v), done;
  V r = leaf_to_step(p, v, kind);
  if (!r && v->owner && depth < 64) r = node_to_step(p, v->owner, kind, depth);
  if (r) {
    rg_memo_put(p->inner, v, r);
    rg_memo_put(p->kind, v, (void *)(intptr_t)*kind);
  }
  return r;
}

/* The node with sequence k's outer computation moved into the step. */
static rg_node *push_in_seq_k(rg_ctx *C, const rg_node *node, const rg_scan_info *s, int k) {
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int oin = rg_fgraph_ninputs(g), drop_in = rg_scan_inner_in(s, RG_SCAN_SEQ, k, 0);
  int drop_out = rg_scan_outer_in(s, RG_SCAN_SEQ, k);
  V *fresh = rg_gc_alloc(sizeof(V) * (size_t)oin), *in = rg_gc_alloc(sizeof(V) * (size_t)oin);
  V *outer_in = rg_gc_alloc(sizeof(V) * (size_t)node->nin);
  rg_memo *memo = rg_memo_new();
  int a = 0;
  for (int i = 0; i < oin; i++) {
    V x = rg_fgraph_input(g, i);
    fresh[i] = rg_input(C, x->name, x->type);
    if (i != drop_in) rg_memo_put(memo, x, in[a++] = fresh[i]);
  }
  pushin p = {.C = C, .node = node, .s = s, .drop = k, .fresh = fresh, .inner = rg_memo_new(), .kind = rg_memo_new()};
  int kind;
  V value = to_step(&p, node->inputs[drop_out], &kind, 0);
  if (!value || kind != K_ALL || !rg_type_equal(value->type, rg_fgraph_input(g, drop_in)->type)) return NULL;
  rg_memo_put(memo, rg_fgraph_input(g, drop_in), value);
  int b = 0;
  for (int i = 0; i < node->nin; i++)
    if (i != drop_out) outer_in[b++] = node->inputs[i];
  int *nt = rg_gc_alloc(sizeof(int) * (size_t)(s->n_seqs + 1));
  const int64_t **tp = rg_gc_alloc(sizeof(int64_t *) * (size_t)(s->n_seqs + 1));
  for (int j = 0, t = 0; j < s->n_seqs; j++)
    if (j != k) nt[t] = s->seq_ntaps[j], tp[t++] = s->seq_taps[j];
  rg_scan_info t = *s;
  t.n_seqs -= 1, t.seq_ntaps = nt, t.seq_taps = (const int64_t *const *)tp;
  return rebuild(C, node, &t, a, in, memo, b, outer_in);
}

static rg_node *push_in_seq(rg_ctx *C, const rg_node *node) {
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return NULL;
  for (int k = 0; k < s.n_seqs; k++) {
    if (s.seq_ntaps[k] != 1 || !node->inputs[rg_scan_outer_in(&s, RG_SCAN_SEQ, k)]->owner) continue;
    rg_node *r = push_in_seq_k(C, node, &s, k);
    if (r) return r;
    rg_clear_error(C);
  }
  return NULL;
}

/* ------------------------------------------------------------------ push_out_dot1: an accumulated product */

/* The loop push_out_dot1 reads: a Scan of one sequence x (one tap), one
 * sit-sot acc from a0, non-sequences, no until, forwards, whose step is
 * acc + dot(x_t, W) (either order) with W a non-sequence; only its last
 * state is read (trace[-1]).  Invariant: every field is set when
 * dot1_match returns true. */
typedef struct dot1 {
  V x, a0, W, n;
  bool acc_first;  /* acc + dot (else dot + acc) */
} dot1;

/* m reads trace[-1], the trace's only use (a trace also read elsewhere,
 * or an output of the graph, is computed anyway: the closed form would
 * do the steps' work twice).  Outside a FunctionGraph (an e-graph's
 * terms) a variable has no clients to count. */
static bool is_last_row(const rg_node *m) {
  return m && m->op->code == RG_OP_SUBTENSOR && m->nin == 1 && m->op->nints == 4 && m->op->ints[0] == RG_IDX_INDEX &&
         m->op->ints[1] == -1 && m->inputs[0]->nclients <= 1;
}

/* Whether the steps' sum and the closed form's one product compute the
 * same: float values of one dtype (an integer product wraps in each step
 * on its own, and a sum of integers widens to int64). */
static bool same_float(V a, V b) { return rg_dtype_is_float(a->type->dtype) && a->type->dtype == b->type->dtype; }

static bool dot1_match(V v, dot1 *d) {
  if (!is_last_row(v->owner)) return false;
  V trace = v->owner->inputs[0];
  const rg_node *node = trace->owner;
  rg_scan_info s;
  if (!node || node->nout != 1 || !rg_scan_info_of(node->op, &s)) return false;
  if (s.n_seqs != 1 || s.seq_ntaps[0] != 1 || s.n_sit_sot != 1 || s.n_mit_mot || s.n_mit_sot || s.n_nit_sot ||
      s.until || s.go_backwards)
    return false;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  V o = rg_fgraph_output(g, 0), acc = rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_SIT_SOT, 0, 0));
  V slice = rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_SEQ, 0, 0));
  if (!o->owner || o->owner->op->code != RG_OP_ADD || o->owner->nin != 2) return false;
  d->acc_first = o->owner->inputs[0] == acc;
  V prod = o->owner->inputs[d->acc_first ? 1 : 0];
  if (o->owner->inputs[d->acc_first ? 0 : 1] != acc || !prod->owner || prod->owner->op->code != RG_OP_DOT ||
      prod->owner->inputs[0] != slice)
    return false;
  if (!same_float(acc, prod)) return false;
  for (int k = 0; k < s.n_non_seqs; k++)
    if (rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_NON_SEQ, k, 0)) == prod->owner->inputs[1]) {
      d->W = node->inputs[rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, k)];
      d->x = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SEQ, 0)];
      d->a0 = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, 0)];
      d->n = node->inputs[0];
      /* as the other way: x, W and a0 of one float dtype */
      return same_float(d->x, d->W) && same_float(d->x, d->a0) && rgr_steps_fit(d->x, d->n);
    }
  return false;
}

/* a0 + dot(sum(x[:n], axis 0), W): the steps' products summed at once. */
static V dot1_out(const dot1 *d) {
  rg_index rows = {RG_IDX_SLICE, 0, RG_IDX_INPUT, RG_IDX_NONE};
  int64_t axis0 = 0;
  V sum = rg_sum(rg_subtensor(d->x, 1, &rows, 1, &d->n), 1, &axis0);
  V prod = sum ? rg_dot(sum, d->W) : NULL;
  if (!prod) return NULL;
  return d->acc_first ? rg_add(d->a0, prod) : rg_add(prod, d->a0);
}

/* The stop of x[0:n] (an input, or a literal the slice holds), or NULL. */
static V rows_stop(rg_ctx *C, const rg_node *st) {
  if (st->op->code != RG_OP_SUBTENSOR || st->op->nints != 4 || st->op->ints[0] != RG_IDX_SLICE ||
      st->op->ints[1] != 0 || st->op->ints[3] != RG_IDX_NONE)
    return NULL;
  int64_t stop = st->op->ints[2];
  if (stop == RG_IDX_INPUT) return st->nin == 2 ? st->inputs[1] : NULL;
  return stop >= 0 && st->nin == 1 ? rg_scalar_int(C, stop) : NULL;
}

/* The other way: a0 + dot(sum(x[:n], axis 0), W) read as such a loop. */
static bool dot1_unmatch(rg_ctx *C, V v, dot1 *d) {
  const rg_node *a = v->owner, *p, *sm, *st;
  if (!a || a->op->code != RG_OP_ADD || a->nin != 2) return false;
  for (int i = 0; i < 2; i++) {
    p = a->inputs[i]->owner;
    if (!p || p->op->code != RG_OP_DOT || !(sm = p->inputs[0]->owner) || sm->op->code != RG_OP_SUM ||
        sm->op->nints != 1 || sm->op->ints[0] != 0 || !(st = sm->inputs[0]->owner))
      continue;
    V n = rows_stop(C, st), x = st->inputs[0];
    if (!n || !same_float(x, p->inputs[1]) || !same_float(x, a->inputs[1 - i]) || !rgr_steps_fit(x, n)) continue;
    *d = (dot1){.x = x, .n = n, .W = p->inputs[1], .a0 = a->inputs[1 - i], .acc_first = i == 1};
    return true;
  }
  return false;
}

/* The loop acc + dot(x_t, W) from a0 over x's first n rows, its last state. */
static V dot1_in(rg_ctx *C, const dot1 *d) {
  rg_index first = {RG_IDX_INDEX, 0, RG_IDX_NONE, RG_IDX_NONE}, last = {RG_IDX_INDEX, -1, RG_IDX_NONE, RG_IDX_NONE};
  V row = rg_subtensor(d->x, 1, &first, 0, NULL);
  if (!row) return NULL;
  V step_in[2] = {rg_input(C, "x_t", row->type), rg_input(C, "acc", d->a0->type)};
  V prod = rg_dot(step_in[0], d->W);
  V out = prod ? (d->acc_first ? rg_add(step_in[1], prod) : rg_add(prod, step_in[1])) : NULL;
  if (!out) return NULL;
  rg_scan_seq seq = {d->x, 0, NULL};
  rg_scan_output o = {d->a0, 0, NULL};
  rg_scan_spec spec = {.nseqs = 1, .seqs = &seq, .noutputs = 1, .outputs = &o, .n_steps = d->n,
                       .truncate_gradient = -1, .nstep_in = 2, .step_in = step_in, .step_out = &out};
  V trace;
  if (!rg_scan(C, &spec, &trace)) return NULL;
  return rg_subtensor(trace, 1, &last, 0, NULL);
}

static rg_goal *dot1_pusho(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  V in = rgr_term_value(C, args[0]), out = rgr_term_value(C, args[1]), r = NULL;
  dot1 d;
  if (in && dot1_match(in, &d)) r = dot1_out(&d);
  else if (!in && out && rg_is_var(args[0]) && dot1_unmatch(C, out, &d)) r = dot1_in(C, &d);
  if (!r) {
    rg_clear_error(C);
    return rg_fail();
  }
  return rg_eq(args[in ? 1 : 0], rg_var_term(r));
}

/* ------------------------------------------------------------------ push_out_scan_output: a sum of products */

/* The loop push_out_scan_output reads: a Scan of two sequences a, b (one
 * tap each), one sit-sot acc from a0, no until, forwards, whose step is
 * acc + dot(a_t, b_t) (either order) with matrix slices; only its last
 * state is read.  The steps' products sum to one product of the laid-out
 * traces: dot(reshape(A^(1,0,2), (m, n*k)), reshape(B, (n*k, p))). */
typedef struct pushadd {
  V a, b, a0, n;
  bool acc_first;
} pushadd;

static bool add_match(V v, pushadd *d) {
  if (!is_last_row(v->owner)) return false;
  const rg_node *node = v->owner->inputs[0]->owner;
  rg_scan_info s;
  if (!node || node->nout != 1 || !rg_scan_info_of(node->op, &s)) return false;
  if (s.n_seqs != 2 || s.seq_ntaps[0] != 1 || s.seq_ntaps[1] != 1 || s.n_sit_sot != 1 || s.n_mit_mot ||
      s.n_mit_sot || s.n_nit_sot || s.until || s.go_backwards)
    return false;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  V o = rg_fgraph_output(g, 0), acc = rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_SIT_SOT, 0, 0));
  if (!o->owner || o->owner->op->code != RG_OP_ADD || o->owner->nin != 2) return false;
  d->acc_first = o->owner->inputs[0] == acc;
  V prod = o->owner->inputs[d->acc_first ? 1 : 0];
  if (o->owner->inputs[d->acc_first ? 0 : 1] != acc || !prod->owner || prod->owner->op->code != RG_OP_DOT) return false;
  V x = prod->owner->inputs[0], y = prod->owner->inputs[1];
  if (x->type->ndim != 2 || y->type->ndim != 2 || !same_float(acc, prod)) return false;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (i != j && x == rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_SEQ, i, 0)) &&
          y == rg_fgraph_input(g, rg_scan_inner_in(&s, RG_SCAN_SEQ, j, 0))) {
        d->a = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SEQ, i)];
        d->b = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SEQ, j)];
        d->a0 = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, 0)];
        d->n = node->inputs[0];
        return rgr_steps_fit(d->a, d->n) && rgr_steps_fit(d->b, d->n);
      }
  return false;
}



static V first_rows(V x, V n) {
  rg_index rows = {RG_IDX_SLICE, 0, RG_IDX_INPUT, RG_IDX_NONE};
  return rg_subtensor(x, 1, &rows, 1, &n);
}

static V add_out(rg_ctx *C, const pushadd *d) {
  V A = first_rows(d->a, d->n), B = first_rows(d->b, d->n);
  V prod = A && B ? rg_dot(rgr_laid_a(C, A), rgr_laid_b(C, B)) : NULL;
  if (!prod) return NULL;
  return d->acc_first ? rg_add(d->a0, prod) : rg_add(prod, d->a0);
}

/* Whether v is laid_a (is_a) or laid_b of x[0:n]; sets *x and *n. */
static bool is_laid(rg_ctx *C, V v, bool is_a, V *x, V *n) {
  const rg_node *r = v->owner, *st;
  if (!r || r->op->code != RG_OP_RESHAPE) return false;
  V src = r->inputs[0];
  if (is_a) {
    const rg_node *t = src->owner;
    if (!t || t->op->code != RG_OP_DIMSHUFFLE || t->op->nints != 3 || t->op->ints[0] != 1 || t->op->ints[1] != 0 ||
        t->op->ints[2] != 2)
      return false;
    src = t->inputs[0];
  }
  if (!(st = src->owner) || !(*n = rows_stop(C, st))) return false;
  *x = st->inputs[0];
  V want = is_a ? rgr_laid_a(C, src) : rgr_laid_b(C, src);
  return want && rg_equal_computations(1, &r->inputs[1], &want->owner->inputs[1], 0, NULL, NULL);
}

static bool add_unmatch(rg_ctx *C, V v, pushadd *d) {
  const rg_node *a = v->owner, *p;
  if (!a || a->op->code != RG_OP_ADD || a->nin != 2) return false;
  for (int i = 0; i < 2; i++) {
    V na, nb;
    if (!(p = a->inputs[i]->owner) || p->op->code != RG_OP_DOT || !is_laid(C, p->inputs[0], true, &d->a, &na) ||
        !is_laid(C, p->inputs[1], false, &d->b, &nb) || !rg_equal_computations(1, &na, &nb, 0, NULL, NULL))
      continue;
    d->n = na, d->a0 = a->inputs[1 - i], d->acc_first = i == 1;
    if (same_float(d->a, d->b) && same_float(d->a, d->a0) && rgr_steps_fit(d->a, na) && rgr_steps_fit(d->b, na))
      return true;
  }
  return false;
}

/* The loop acc + dot(a_t, b_t) over the first n rows, its last state. */
static V add_in(rg_ctx *C, const pushadd *d) {
  rg_index first = {RG_IDX_INDEX, 0, RG_IDX_NONE, RG_IDX_NONE}, last = {RG_IDX_INDEX, -1, RG_IDX_NONE, RG_IDX_NONE};
  V ra = rg_subtensor(d->a, 1, &first, 0, NULL), rb = rg_subtensor(d->b, 1, &first, 0, NULL);
  if (!ra || !rb) return NULL;
  V step_in[3] = {rg_input(C, "a_t", ra->type), rg_input(C, "b_t", rb->type), rg_input(C, "acc", d->a0->type)};
  V prod = rg_dot(step_in[0], step_in[1]);
  V out = prod ? (d->acc_first ? rg_add(step_in[2], prod) : rg_add(prod, step_in[2])) : NULL;
  if (!out) return NULL;
  rg_scan_seq seqs[2] = {{d->a, 0, NULL}, {d->b, 0, NULL}};
  rg_scan_output o = {d->a0, 0, NULL};
  rg_scan_spec spec = {.nseqs = 2, .seqs = seqs, .noutputs = 1, .outputs = &o, .n_steps = d->n,
                       .truncate_gradient = -1, .nstep_in = 3, .step_in = step_in, .step_out = &out};
  V trace;
  if (!rg_scan(C, &spec, &trace)) return NULL;
  return rg_subtensor(trace, 1, &last, 0, NULL);
}

static rg_goal *add_pusho(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  V in = rgr_term_value(C, args[0]), out = rgr_term_value(C, args[1]), r = NULL;
  pushadd d;
  if (in && add_match(in, &d)) r = add_out(C, &d);
  else if (!in && out && rg_is_var(args[0]) && add_unmatch(C, out, &d)) r = add_in(C, &d);
  if (!r) {
    rg_clear_error(C);
    return rg_fail();
  }
  return rg_eq(args[in ? 1 : 0], rg_var_term(r));
}

/* ------------------------------------------------------------------ the relation */

/* `a` unified with output `index` of `n` (failing when n is NULL). */
static rg_goal *same_output(rg_ctx *C, rg_term a, const rg_node *n, int index) {
  if (!n || index >= n->nout) {
    rg_clear_error(C);
    return rg_fail();
  }
  return rg_eq(a, rg_var_term(n->outputs[index]));
}

static rg_goal *nonseq_pusho(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  V vin, vout;
  const rg_node *in = scan_of(C, args[0], &vin), *out = scan_of(C, args[1], &vout);
  if (in) {
    rg_node *pushed = push_out_non_seq(C, in);
    V gone = pushed ? NULL : rgr_scan_vanished(C, in, vin->index);
    if (gone) return rg_eq(args[1], rg_var_term(gone));
    return same_output(C, args[1], pushed, vin->index);
  }
  if (out && rg_is_var(args[0])) return same_output(C, args[0], push_in_non_seq(C, out), vout->index);
  return rg_fail();
}

static rg_goal *seq_pusho(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  V vin, vout;
  const rg_node *in = scan_of(C, args[0], &vin), *out = scan_of(C, args[1], &vout);
  if (in) return same_output(C, args[1], push_out_seq(C, in), vin->index);
  if (out && rg_is_var(args[0])) return same_output(C, args[0], push_in_seq(C, out), vout->index);
  return rg_fail();
}

void rgr_define_scan_relations(rg_interp *I) {
  rgr_define_step_relations(I);
  rg_interp_define(I, "scan-nonseq-pusho", rg_relation_projecting("scan-nonseq-pusho", 2, nonseq_pusho, NULL));
  rg_interp_define(I, "scan-seq-pusho", rg_relation_projecting("scan-seq-pusho", 2, seq_pusho, NULL));
  rg_interp_define(I, "scan-dot1-pusho", rg_relation_projecting("scan-dot1-pusho", 2, dot1_pusho, NULL));
  rg_interp_define(I, "scan-add-pusho", rg_relation_projecting("scan-add-pusho", 2, add_pusho, NULL));
}
