/*
 * scan-pushout.c — work moved out of a Scan's step (Aesara's
 * push_out_non_seq and push_out_seq, written anew in C).
 *
 * Every value of the step is classified, in the step's order:
 *
 *   outside-once   computed from non-sequences and constants only: it is
 *                  the same at every step, so it is computed once before
 *                  the loop (any pure op) and enters as a new
 *                  non-sequence;
 *   outside-all    computed from sequence slices (of single-tap sequences)
 *                  and outside-once values by elementwise ops, dimshuffles
 *                  and `dot(slice, non-sequence)`: it is computed for all
 *                  steps at once over the whole sequences (elementwise ops
 *                  on the sequences with a leading time axis, a dimshuffle
 *                  keeping that axis first, one matrix product over the
 *                  sequence's rows: the LSTM's x_t W_ih^T becomes one
 *                  product for all steps) and enters as a new sequence;
 *   inside         anything reading a state, or any other op, and
 *                  elementwise work of the second kind that fuses with
 *                  inside work (rgr_keep_fusable_inside).
 *
 * The values of the first two kinds that an inside value or an output of
 * the step uses are the frontier: each becomes a new inner input, the
 * step is rebuilt over them (what only they needed is gone), and the new
 * outer values are computed before the loop.  Sequences are first cut to
 * the rows the steps read (the first n, the last n with go_backwards), so
 * sequences of different lengths line up.  The rule tracks Scan nodes (it
 * costs nothing without one) and runs in canonicalize, before the BLAS
 * rewrites of the outer graph; the step's own dot -> gemm happens when it
 * is linked.
 *
 * The push-outs are also relations that run backwards (pushing work back
 * in, scan.kn); this file is the forward direction in C.
 */
#include "rewrites/scan-rw.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

enum { INSIDE = 0, ONCE = 1, ALL = 2 };

/* The classification: variable -> (kind, outer value). */
typedef struct cls {
  rg_ctx *C;
  const rg_node *node;
  rg_scan_info s;
  rg_memo *kind, *outer;
  V n;  /* steps */
  const rgr_guards *guards; /* of the step: work under an ifelse branch stays in it */
} cls;

static int kind_in(rg_memo *kind, V v) { return (int)(intptr_t)rg_memo_get(kind, v); }
static int kind_of(const cls *c, V v) { return kind_in(c->kind, v); }

static void set(cls *c, V v, int k, V outer) {
  rg_memo_put(c->kind, v, (void *)(intptr_t)k);
  rg_memo_put(c->outer, v, outer);
}

/* ------------------------------------------------------------------ outer values */

/* The outer value of input x of a step node (NULL: none). */
static V outer_of(cls *c, V x) { return rg_is_constant(x) ? rgr_copy_const(c->C, x) : rg_memo_get(c->outer, x); }

V rgr_steps_rows(const rg_scan_info *s, V n, V x) {
  rg_index e;
  V idx[1];
  if (s->go_backwards) {
    e = (rg_index){RG_IDX_SLICE, RG_IDX_INPUT, RG_IDX_NONE, RG_IDX_NONE};
    idx[0] = rg_sub(rg_shape_i(x, 0), n);
  } else {
    e = (rg_index){RG_IDX_SLICE, 0, RG_IDX_INPUT, RG_IDX_NONE};
    idx[0] = n;
  }
  return rg_subtensor(x, 1, &e, 1, idx);
}

V rgr_copy_const(rg_ctx *C, V x) {
  V copy = NULL;
  return rg_clone(C, 0, NULL, 1, &x, NULL, RG_CLONE_CONSTANTS, &copy) == RG_OK ? copy : NULL;
}

V rgr_with_rank(V x, int ndim) {
  int have = x->type->ndim - 1;
  if (have >= ndim) return x;
  int64_t order[RG_MAX_NDIM + 1];
  int k = 0;
  order[k++] = 0;
  for (int i = 0; i < ndim - have; i++) order[k++] = -1;
  for (int d = 1; d <= have; d++) order[k++] = d;
  return rg_dimshuffle(x, k, order);
}

V rgr_dot_rows(rg_ctx *C, V a, V w) {
  V *sh = rg_shape_of(C, a);
  V flat = rg_reshape(a, rg_make_vector(C, RG_INT64, 2, (V[]){rg_mul(sh[0], sh[1]), sh[2]}), 2);
  V prod = rg_dot(flat, w);
  V *ps = rg_shape_of(C, prod);
  return rg_reshape(prod, rg_make_vector(C, RG_INT64, 3, (V[]){sh[0], sh[1], ps[1]}), 3);
}

V rgr_laid_a(rg_ctx *C, V A) {
  V *sh = rg_shape_of(C, A);
  int64_t order[3] = {1, 0, 2};
  return rg_reshape(rg_dimshuffle(A, 3, order), rg_make_vector(C, RG_INT64, 2, (V[]){sh[1], rg_mul(sh[0], sh[2])}), 2);
}

V rgr_laid_b(rg_ctx *C, V B) {
  V *sh = rg_shape_of(C, B);
  return rg_reshape(B, rg_make_vector(C, RG_INT64, 2, (V[]){rg_mul(sh[0], sh[1]), sh[2]}), 2);
}

/* A dimshuffle of all steps: the time axis stays first. */
static V dimshuffle_all(const rg_node *m, V x) {
  int n = m->op->nints;
  int64_t order[RG_MAX_NDIM + 1];
  order[0] = 0;
  for (int i = 0; i < n; i++) order[i + 1] = m->op->ints[i] < 0 ? -1 : m->op->ints[i] + 1;
  return rg_dimshuffle(x, n + 1, order);
}

/* ------------------------------------------------------------------ classifying */

/* Ops that compute a value from their inputs alone: the arithmetic
 * families, and inner-graph ops (a loop in the step over non-sequences
 * only runs once before the outer loop). */
static bool pure(const rg_node *m) {
  rg_op_family f = rg_opcode_family(m->op->code);
  return m->op->inplace < 0 && m->nout == 1 && m->op->code != RG_OP_ALLOC_EMPTY &&
         (f == RG_FAM_ELEMWISE || f == RG_FAM_SHAPE || f == RG_FAM_BLAS || f == RG_FAM_REDUCE || m->op->inner);
}

/* The outer value of an all-steps node, or NULL when it cannot be. */
static V all_steps(cls *c, const rg_node *m) {
  V in[8];
  if (m->nin > 8) return NULL;
  int out_ndim = m->outputs[0]->type->ndim;
  for (int i = 0; i < m->nin; i++)
    if (!(in[i] = outer_of(c, m->inputs[i]))) return NULL;
  rg_opcode code = m->op->code;
  if (rg_opcode_family(code) == RG_FAM_ELEMWISE) {
    for (int i = 0; i < m->nin; i++)
      if (kind_of(c, m->inputs[i]) == ALL) in[i] = rgr_with_rank(in[i], out_ndim);
    rg_node *r = rg_make_node(c->C, m->op, m->nin, in);
    return r ? r->outputs[0] : NULL;
  }
  if (code == RG_OP_DIMSHUFFLE) return dimshuffle_all(m, in[0]);
  if (code == RG_OP_DOT && kind_of(c, m->inputs[0]) == ALL && kind_of(c, m->inputs[1]) == ONCE &&
      m->inputs[1]->type->ndim == 2 && m->inputs[0]->type->ndim >= 1 && m->inputs[0]->type->ndim <= 2)
    return in[0]->type->ndim == 2 ? rg_dot(in[0], in[1]) : rgr_dot_rows(c->C, in[0], in[1]);
  return NULL;
}

/* Whether every sequence of one tap holds n (a constant) rows or more. */
static bool rows_known_to_hold(const cls *c, int64_t n) {
  const rg_scan_info *s = &c->s;
  if (n < 0) return false;
  for (int k = 0; k < s->n_seqs; k++) {
    int64_t len = c->node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)]->type->shape[0];
    if (s->seq_ntaps[k] == 1 && (len < 0 || len < n)) return false;
  }
  return true;
}

/* The count of rows cut from each sequence: the steps, n, where that is
 * valid.  With two sequences, or one read backwards (rows counted from its
 * end), a negative n or one past a sequence's end would cut rows of
 * different counts, or from the wrong end, and the work moved out of the
 * loop would fail on them with a message about shapes the user never
 * wrote.  So n is cut to [0, the shortest sequence's length] there
 * (unless it is a constant every sequence holds), and the loop itself
 * still reports the bad n as it would have. */
static V rows_cut(const cls *c) {
  const rg_scan_info *s = &c->s;
  int nseq = 0;
  for (int k = 0; k < s->n_seqs; k++) nseq += s->seq_ntaps[k] == 1;
  double v;
  if ((nseq < 2 && !s->go_backwards) || (rg_constant_get_f64(c->n, &v) && rows_known_to_hold(c, (int64_t)v)))
    return c->n;
  V cut = rg_maximum(c->n, rg_constant_scalar_int(c->C, c->n->type->dtype, 0));
  for (int k = 0; k < s->n_seqs; k++)
    if (s->seq_ntaps[k] == 1) cut = rg_minimum(cut, rg_shape_i(c->node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)], 0));
  return cut;
}

static void classify_inputs(cls *c, const rg_fgraph *g) {
  const rg_scan_info *s = &c->s;
  V cut = s->n_seqs ? rows_cut(c) : NULL;
  for (int k = 0; k < s->n_seqs; k++)
    if (s->seq_ntaps[k] == 1) {
      V x = c->node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)];
      set(c, rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SEQ, k, 0)), ALL, rgr_steps_rows(s, cut, x));
    }
  for (int k = 0; k < s->n_non_seqs; k++)
    set(c, rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)), ONCE,
        c->node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)]);
}

static void classify_node(cls *c, rg_node *m) {
  if (!pure(m) || !rgr_unguarded(c->guards, m)) return;
  int k = ONCE;
  for (int i = 0; i < m->nin; i++) {
    V x = m->inputs[i];
    if (rg_is_constant(x)) continue;
    int ki = kind_of(c, x);
    if (ki == INSIDE) return;
    if (ki == ALL) k = ALL;
  }
  V outer;
  if (k == ONCE) {
    V in[16];
    if (m->nin > 16) return;
    bool ok = true;
    for (int i = 0; i < m->nin; i++) ok &= (in[i] = outer_of(c, m->inputs[i])) != NULL;
    rg_node *r = ok ? rg_make_node(c->C, m->op, m->nin, in) : NULL;
    outer = r ? r->outputs[0] : NULL;
  } else {
    outer = all_steps(c, m);
  }
  if (outer) set(c, m->outputs[0], k, outer);
  else rg_clear_error(c->C);
}

/* ------------------------------------------------------------------ work that fuses inside */

/* Elements of one step's slice at least this many: a loop kernel over the
 * slice runs vectorised, and work kept in it costs no dispatch of its own. */
#define STAY_ELEMS 256

static bool large_slice(const rg_type *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0) return false;
    n *= t->shape[d];
  }
  return n >= STAY_ELEMS;
}

/* The region staying inside is a memo (value -> 1) that only shrinks:
 * all-steps elementwise values whose readers all fuse with them in the
 * loop (originally inside elementwise work, or the region), and whose
 * all-steps operands the loop reads anyway (a sequence slice, something
 * inside outside the region or a step output reads, or the region), so
 * that keeping them adds no trace the loop reads (stays_inside). */
static bool readers_fuse(rg_memo *kind, rg_memo *region, V v) {
  if (!v->nclients) return false;
  for (uint32_t i = 0; i < v->nclients; i++) {
    const rg_node *r = v->clients[i].node;
    if (!r || r->nout != 1) return false;
    if (rg_memo_get(region, r->outputs[0])) continue;
    if (rg_opcode_family(r->op->code) != RG_FAM_ELEMWISE || kind_in(kind, r->outputs[0]) != INSIDE) return false;
  }
  return true;
}

static bool read_anyway(rg_memo *kind, rg_memo *region, V x) {
  if (kind_in(kind, x) != ALL || !x->owner || rg_memo_get(region, x)) return true;
  for (uint32_t i = 0; i < x->nclients; i++) {
    const rg_node *r = x->clients[i].node;
    if (!r || r->nout != 1) return true;
    if (kind_in(kind, r->outputs[0]) == INSIDE && !rg_memo_get(region, r->outputs[0])) return true;
  }
  return false;
}

/* Whether inside work outside the region reads v (so that v, moved out,
 * would be a trace of its own). */
static bool read_inside(rg_memo *kind, rg_memo *region, V v) {
  for (uint32_t i = 0; i < v->nclients; i++) {
    const rg_node *r = v->clients[i].node;
    if (r && r->nout == 1 && !rg_memo_get(region, r->outputs[0]) && kind_in(kind, r->outputs[0]) == INSIDE)
      return true;
  }
  return false;
}

/* A node stays when its readers fuse with it and its operands add no
 * trace: all are read anyway, or one is not but the node's own value,
 * read by inside work, would have been a trace instead (G_t + b_ih, read
 * by the step's gate sum: the loop reads the product G_t rather than the
 * sum, and the bias is added in the step's kernel, not broadcast into the
 * product's output outside). */
static bool stays_inside(rg_memo *kind, rg_memo *region, const rg_node *m) {
  if (!readers_fuse(kind, region, m->outputs[0])) return false;
  int extra = 0;
  for (int i = 0; i < m->nin; i++)
    if (!read_anyway(kind, region, m->inputs[i])) extra++;
  return extra == 0 || (extra == 1 && read_inside(kind, region, m->outputs[0]));
}

void rgr_keep_fusable_inside(rg_memo *kind, const rg_fgraph *g) {
  size_t n = rg_fgraph_nnodes(g), k = 0;
  rg_node **cand = rg_gc_alloc(sizeof *cand * (n + 1));
  rg_memo *region = rg_memo_new();
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) {
    V v = m->nout == 1 ? m->outputs[0] : NULL;
    if (v && kind_in(kind, v) == ALL && rg_opcode_family(m->op->code) == RG_FAM_ELEMWISE && large_slice(v->type)) {
      cand[k++] = m;
      rg_memo_put(region, v, (void *)1);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = k; i-- > 0;)
      if (rg_memo_get(region, cand[i]->outputs[0]) && !stays_inside(kind, region, cand[i])) {
        rg_memo_put(region, cand[i]->outputs[0], NULL);
        changed = true;
      }
  }
  for (size_t i = 0; i < k; i++)
    if (rg_memo_get(region, cand[i]->outputs[0])) rg_memo_put(kind, cand[i]->outputs[0], (void *)(intptr_t)INSIDE);
}

/* ------------------------------------------------------------------ the frontier */

typedef struct front { V *v; int n, cap; } front;

static void front_add(front *f, V v) {
  for (int i = 0; i < f->n; i++)
    if (f->v[i] == v) return;
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 8;
    V *w = rg_gc_alloc(sizeof *w * (size_t)cap);
    if (f->n) memcpy(w, f->v, sizeof *w * (size_t)f->n);
    f->v = w, f->cap = cap;
  }
  f->v[f->n++] = v;
}

/* A computed outside value used by an inside node or as a step output. */
static bool candidate(const cls *c, V v) { return v->owner && kind_of(c, v) != INSIDE; }

static front frontier(const cls *c, const rg_fgraph *g) {
  front f = {0};
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) {
    bool inside = m->nout != 1 || kind_of(c, m->outputs[0]) == INSIDE;
    for (int i = 0; inside && i < m->nin; i++)
      if (candidate(c, m->inputs[i])) front_add(&f, m->inputs[i]);
  }
  for (int o = 0; o < rg_fgraph_noutputs(g); o++)
    if (candidate(c, rg_fgraph_output(g, o))) front_add(&f, rg_fgraph_output(g, o));
  return f;
}

/* ------------------------------------------------------------------ the new scan */

static rg_node *rebuild(cls *c, const rg_fgraph *g, const front *f) {
  const rg_scan_info *s = &c->s;
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g), nseq_in = 0;
  for (int k = 0; k < s->n_seqs; k++) nseq_in += s->seq_ntaps[k];
  rg_memo *memo = rg_memo_new();
  V *old_in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *fresh_in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1));
  for (int i = 0; i < nin; i++) {
    old_in[i] = rg_fgraph_input(g, i);
    rg_memo_put(memo, old_in[i], fresh_in[i] = rg_input(c->C, old_in[i]->name, old_in[i]->type));
  }
  int ntot = nin + f->n;
  V *in = rg_gc_alloc(sizeof(V) * (size_t)(ntot + 1)), *outer = rg_gc_alloc(sizeof(V) * (size_t)(c->node->nin + f->n + 1));
  V *seq_new = rg_gc_alloc(sizeof(V) * (size_t)(f->n + 1)), *ns_new = rg_gc_alloc(sizeof(V) * (size_t)(f->n + 1));
  V *seq_outer = rg_gc_alloc(sizeof(V) * (size_t)(f->n + 1)), *ns_outer = rg_gc_alloc(sizeof(V) * (size_t)(f->n + 1));
  int a = 0, b = 0;
  for (int i = 0; i < f->n; i++) {
    V v = f->v[i], w = rg_input(c->C, v->name, v->type), o = rg_memo_get(c->outer, v);
    rg_memo_put(memo, v, w);
    if (kind_of(c, v) == ALL) seq_new[a] = w, seq_outer[a++] = o;
    else ns_new[b] = w, ns_outer[b++] = o;
  }
  V *outs = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1)), *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (int o = 0; o < nout; o++) gout[o] = rg_fgraph_output(g, o);
  if (rg_clone(c->C, nin, old_in, nout, gout, memo, 0, outs)) return NULL;
  /* inner inputs: sequences (old, new), states, non-sequences (old, new) */
  int at = 0;
  memcpy(in + at, fresh_in, sizeof(V) * (size_t)nseq_in), at += nseq_in;
  memcpy(in + at, seq_new, sizeof(V) * (size_t)a), at += a;
  memcpy(in + at, fresh_in + nseq_in, sizeof(V) * (size_t)(nin - nseq_in)), at += nin - nseq_in;
  memcpy(in + at, ns_new, sizeof(V) * (size_t)b), at += b;
  /* layout */
  rg_scan_info t = *s;
  int *nt = rg_gc_alloc(sizeof(int) * (size_t)(s->n_seqs + a + 1));
  const int64_t **tp = rg_gc_alloc(sizeof(int64_t *) * (size_t)(s->n_seqs + a + 1));
  static const int64_t zero = 0;
  for (int k = 0; k < s->n_seqs; k++) nt[k] = s->seq_ntaps[k], tp[k] = s->seq_taps[k];
  for (int k = 0; k < a; k++) nt[s->n_seqs + k] = 1, tp[s->n_seqs + k] = &zero;
  t.n_seqs += a, t.n_non_seqs += b, t.seq_ntaps = nt, t.seq_taps = tp;
  rg_fgraph *ng = rg_fgraph_new(c->C, ntot, in, nout, outs, RG_FG_CLONE);
  const rg_op *op = ng ? rg_op_scan(c->C, &t, ng) : NULL;
  if (!op) return NULL;
  /* outer inputs: n, sequences (old, new), ..., non-sequences (old, new) */
  int k = 0, before_seq_end = 1 + s->n_seqs;
  for (int i = 0; i < before_seq_end; i++) outer[k++] = c->node->inputs[i];
  for (int i = 0; i < a; i++) outer[k++] = seq_outer[i];
  for (int i = before_seq_end; i < c->node->nin; i++) outer[k++] = c->node->inputs[i];
  for (int i = 0; i < b; i++) outer[k++] = ns_outer[i];
  return rg_make_node(c->C, op, k, outer);
}

/* Nothing left to move and nothing left inside: each output read is its
 * value broadcast over the steps, and the Scan goes away. */
static int vanish(rg_rewrite_run *run, rg_node *node, V *out) {
  rg_ctx *C = rg_rewrite_ctx(run);
  int n = 0;
  for (int o = 0; o < node->nout; o++) {
    if (!rgr_used(run, node->outputs[o])) continue;
    if (!(out[o] = rgr_scan_vanished(C, node, o))) {
      rg_clear_error(C);
      return 0;
    }
    n++;
  }
  if (n && run->opts.trace) rgr_note(run, "nothing left inside", "the outputs are their values broadcast");
  return n > 0;
}

static int remove_empty(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  return vanish(run, node, out);
}

static int push_out(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  cls c = {.C = rg_rewrite_ctx(run), .node = node, .kind = rg_memo_new(), .outer = rg_memo_new()};
  if (!rg_scan_info_of(node->op, &c.s)) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  c.n = node->inputs[0];
  rgr_guards *guards = rgr_guards_of((rg_fgraph *)g);
  c.guards = guards;
  classify_inputs(&c, g);
  for (rg_node *m = rg_fgraph_first(g); m; m = rg_fgraph_next(m)) classify_node(&c, m);
  rgr_guards_free(guards);
  c.guards = NULL;
  rgr_keep_fusable_inside(c.kind, g);
  front f = frontier(&c, g);
  if (!f.n) return vanish(run, node, out);
  rg_node *nn = rebuild(&c, g, &f);
  if (!nn) {
    rg_clear_error(c.C);
    return 0;
  }
  for (int o = 0; o < node->nout; o++)
    if (rgr_used(run, node->outputs[o])) out[o] = nn->outputs[o]; /* only outputs in use */
  if (run->opts.trace) { /* the trace names what moved: the new outer values */
    const char *moved = "";
    for (int i = 0; i < f.n; i++)
      moved = rgr_sprintf("%s%s%s", moved, i ? "; " : "", rgr_show(rg_memo_get(c.outer, f.v[i])));
    rgr_note(run, "moved out", "%s", moved);
  }
  return 1;
}

void rgr_register_scan_pushout(rg_rewrite_db *canon, rg_rewrite_db *rel) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("scan_push_out", 1, tracks, push_out, NULL);
  rw->describe = "step values from non-sequences only -> computed once before the loop; from sequence slices "
                 "by elementwise ops, dimshuffles and dot(slice, non-sequence) -> computed for all steps at once "
                 "(elementwise work on large slices that fuses with the step stays in it)";
  rg_db_register(canon, "scan_push_out", rw, 0, "fast_run fast_compile canonicalize scan");
  /* the same end of a loop beside the relational push-out (in its
   * database), whose answers replace one value: a loop of several outputs
   * cannot become several broadcasts there */
  rg_rewriter *gone = rg_node_rewriter("scan_remove_empty", 1, tracks, remove_empty, NULL);
  gone->describe = "a Scan whose step returns only non-sequences or constants -> each output read is its value "
                   "broadcast over the steps kept (the Scan goes away)";
  rg_db_register(rel, "scan_remove_empty", gone, 0, "scan push_out_non_seq"); /* fast_run: scan_push_out does it */
}
