/*
 * scan-grad.c — the gradient of a Scan: a backward Scan that runs the
 * forward steps in reverse (Aesara's Scan.L_op, laid out anew).
 *
 * Let n be the number of steps the forward loop ran and backward step s
 * stand for forward step t = n-1-s.  Each backward step recomputes the
 * forward step from its inputs (a clone of the forward inner graph) and
 * takes the vector-Jacobian product of that step with rg_grad, starting
 * from the gradients of the step's outputs.  Everything the forward step
 * read is handed to the backward loop as a *sequence read in reverse*:
 *
 *   forward sequence k, taps K    rev(x[0 : n + span]) at taps max(K) - k
 *                                 (x reversed first for go_backwards)
 *   forward state (mit-/sit-sot)  rev(join(init rows, trace)[0 : M+n-1])
 *   with taps k < 0, M = -min k   at taps -1 - k
 *   forward mit-mot, in tap k     the values the step read, recorded by a
 *                                 twin of the forward loop (below), rev
 *   forward nit-sot               rev(its trace's gradient)
 *
 * Gradients that flow across steps are mit-mot buffers of the backward
 * loop, again over reversed rows:
 *
 *   forward state   buffer rev(dtrace) ++ zeros(M rows); at step s tap 0
 *                   is the complete gradient of row t (every later step
 *                   has added to it), taps -k get the step's contribution
 *                   to the rows it read: out(-k) = in(-k) + d input(k).
 *                   Afterwards rows n..n+M-1 are the initial rows'
 *                   gradients (reversed).
 *   forward mit-mot buffer rev(dbuffer[0 : n + span]) at taps max - x
 *                   for every tap x the forward step read or wrote: a
 *                   written row passes its gradient to the written value
 *                   and restarts from zero, a read row adds the read's
 *                   gradient: out(x) = (x written ? 0 : in(x)) + d in(x).
 *
 * Non-sequence gradients are sit-sot accumulators keeping one row
 * (store_steps 1), summed over their zero or one rows afterwards; sequence
 * gradients are nit-sots, one per tap, added into zeros of the sequence's
 * shape at the rows each tap read.  truncate_gradient T runs only the
 * last min(n, T) steps backwards; an `until` loop is differentiated over
 * the steps it ran (the rows of its traces).
 *
 * The twin.  A mit-mot row may be rewritten during the loop, so the value
 * a step read is in no output; a state kept with store_steps has no whole
 * trace.  For such loops the gradient reads a twin of the forward node:
 * the same step with whole traces and one extra nit-sot per mit-mot input
 * tap that records what the step read.  This is what makes gradients of
 * gradients (whose loops have mit-mots) exact at every order.
 */
#include "core/core-impl.h"
#include "relgraph/scan.h"

typedef rg_variable *V;

/* ------------------------------------------------------------------ rows of a tensor */

static V idx(rg_ctx *C, int64_t k) { return rgc_dim_const(C, k); }
static V iplus(rg_ctx *C, V a, int64_t k) { return rgc_iarith(C, 0, a, idx(C, k)); }
static V iminus(rg_ctx *C, V a, V b) { return rgc_iarith(C, 1, a, b); }
static V rows(V x, V a, V b) { return rgc_slice_along(x, 0, a, b); }

static V reversed(V x) {
  rg_index e = {RG_IDX_SLICE, RG_IDX_NONE, RG_IDX_NONE, -1};
  return rg_subtensor(x, 1, &e, 0, NULL);
}

static V row(V x, V i) {
  rg_index e = {RG_IDX_INDEX, RG_IDX_INPUT, 0, 0};
  return rg_subtensor(x, 1, &e, 1, &i);
}

/* x with a new leading dimension of one row. */
static V as_row(V x) {
  int64_t order[RG_MAX_NDIM + 1];
  order[0] = -1;
  for (int d = 0; d < x->type->ndim; d++) order[d + 1] = d;
  return rg_dimshuffle(x, x->type->ndim + 1, order);
}

/* y added into x[a:b]. */
static V inc_rows(V x, V y, V a, V b) {
  rg_index e = {RG_IDX_SLICE, RG_IDX_INPUT, RG_IDX_INPUT, RG_IDX_NONE};
  return rg_inc_subtensor(x, y, 1, &e, 2, (V[]){a, b});
}

static V set_rows(V x, V y, V a, V b) {
  rg_index e = {RG_IDX_SLICE, RG_IDX_INPUT, RG_IDX_INPUT, RG_IDX_NONE};
  return rg_set_subtensor(x, y, 1, &e, 2, (V[]){a, b});
}

static int find_tap(int n, const int64_t *t, int64_t x) {
  for (int i = 0; i < n; i++)
    if (t[i] == x) return i;
  return -1;
}

static int sum_taps(const int *n, int k) {
  int t = 0;
  for (int i = 0; i < k; i++) t += n[i];
  return t;
}

/* ------------------------------------------------------------------ the backward layout */

/* A list with a fixed capacity (sized from the forward layout). */
typedef struct vlist { V *v; int n; } vlist;
static void vpush(vlist *l, V x) { l->v[l->n++] = x; }

/* The backward scan being laid out: per kind its outer values and taps,
 * and the inner inputs and outputs in the op's order.  Invariant: the
 * inner lists hold exactly the taps the tap lists name, in order. */
typedef struct bscan {
  vlist seq;                    /* outer sequences */
  int *seq_nt;
  const int64_t **seq_taps;
  vlist mm;                     /* outer mit-mot buffers */
  int *mm_nin, *mm_nout;
  const int64_t **mm_in, **mm_out;
  vlist ss;                     /* sit-sot initial values */
  int n_nit;
  vlist in_seq, in_mm, in_ss;   /* inner inputs by kind (non-sequences: the forward's) */
  vlist out_mm, out_ss, out_nit;
} bscan;

/* The gradient's working state. */
typedef struct sg {
  rg_ctx *C;
  const rg_node *node;
  rg_scan_info s;
  const rg_fgraph *g;   /* the forward step */
  const rg_node *src;   /* where traces are read: the node or its twin */
  rg_scan_info ts;      /* src's layout */
  V n, nb;              /* forward steps run, backward steps */
  V *vin;               /* per forward inner input: its value in the backward step */
  V *gout;              /* per forward inner output: its gradient there (NULL: none) */
  V *din;               /* per forward inner input: its gradient (NULL: none) */
  bool *want;           /* per forward inner input: whether its gradient is used */
  bool *has_go;         /* per forward inner output: whether a gradient reaches it */
  const bool *need;     /* per outer input: whether the caller uses its gradient */
  vlist stored;         /* forward inner values the backward step reads, not recomputes */
  V *stored_in;         /* their inputs in the backward step */
  /* find_stored's trial differentiation (trial_clone NULL: none), over
   * fresh inputs trial_in and output gradients trial_go: step_grads
   * substitutes into it instead of differentiating the step again (twice
   * per level made a loop nested D deep cost 2^D differentiations) */
  V *trial_in, *trial_go, *trial_d;
  rg_memo *trial_clone;
  int nreads;           /* mit-mot input taps (recorded by the twin first) */
  bscan b;
} sg;

static V *vec(int n) { return rgk_alloc((size_t)(n > 0 ? n : 1) * sizeof(V)); }

static void bscan_init(bscan *b, int cap) {
  vlist *ls[] = {&b->seq, &b->mm, &b->ss, &b->in_seq, &b->in_mm, &b->in_ss, &b->out_mm, &b->out_ss, &b->out_nit};
  for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) *ls[i] = (vlist){vec(cap), 0};
  b->seq_nt = rgk_alloc((size_t)cap * sizeof(int));
  b->mm_nin = rgk_alloc((size_t)cap * sizeof(int));
  b->mm_nout = rgk_alloc((size_t)cap * sizeof(int));
  b->seq_taps = rgk_alloc((size_t)cap * sizeof(int64_t *));
  b->mm_in = rgk_alloc((size_t)cap * sizeof(int64_t *));
  b->mm_out = rgk_alloc((size_t)cap * sizeof(int64_t *));
}

static int64_t *taps_new(int n) { return rgk_alloc_atomic((size_t)(n > 0 ? n : 1) * sizeof(int64_t)); }

static V fresh(sg *w, const rg_type *t) { return rg_input(w->C, NULL, t); }

static void add_seq(sg *w, V outer, int nt, const int64_t *taps) {
  bscan *b = &w->b;
  b->seq_nt[b->seq.n] = nt;
  b->seq_taps[b->seq.n] = taps;
  vpush(&b->seq, outer);
}

/* ------------------------------------------------------------------ the twin */

static bool needs_twin(const rg_scan_info *s) {
  if (s->n_mit_mot) return true;
  for (int i = 0; i < s->n_mit_sot + s->n_sit_sot; i++)
    if (s->store_steps[i]) return true;
  return false;
}

/* The forward node with whole traces and more nit-sots: one per mit-mot
 * input tap recording the value read (see the top of the file), then one
 * per stored value. */
static const rg_node *make_twin(sg *w) {
  rg_ctx *C = w->C;
  const rg_scan_info *s = &w->s;
  const rg_fgraph *g = w->g;
  int R = w->nreads + w->stored.n;
  rg_scan_info t = *s;
  t.n_nit_sot += R;
  int nstore = t.n_mit_sot + t.n_sit_sot + t.n_nit_sot;
  t.store_steps = rgk_alloc_atomic((size_t)(nstore + 1) * sizeof(int64_t));
  memset((void *)t.store_steps, 0, (size_t)(nstore + 1) * sizeof(int64_t));
  rg_memo *memo = rg_memo_new();
  V *outs = vec(g->nout), *in = vec(g->nin);
  if (rg_clone(C, g->nin, g->inputs, g->nout, g->outputs, memo, RG_CLONE_INPUTS, outs)) return NULL;
  for (int i = 0; i < g->nin; i++) {
    in[i] = rg_memo_get(memo, g->inputs[i]);
    if (!in[i]) in[i] = fresh(w, g->inputs[i]->type);
  }
  int nplain = g->nout - s->until, nout = g->nout + R;
  V *out = vec(nout);
  memcpy(out, outs, (size_t)nplain * sizeof(V));
  int at = nplain;
  for (int k = 0; k < s->n_mit_mot; k++)
    for (int j = 0; j < s->mit_mot_nin[k]; j++) out[at++] = rg_identity(in[rg_scan_inner_in(s, RG_SCAN_MIT_MOT, k, j)]);
  for (int r = 0; r < w->stored.n; r++) {
    V v = rg_memo_get(memo, w->stored.v[r]);
    bool is_out = false;
    for (int o = 0; o < g->nout; o++) is_out |= g->outputs[o] == w->stored.v[r];
    out[at++] = is_out ? rg_identity(v) : v;
  }
  if (s->until) out[at++] = outs[nplain];
  rg_fgraph *fg = rg_fgraph_new(C, g->nin, in, nout, out, RG_FG_CLONE);
  const rg_op *op = fg ? rg_op_scan(C, &t, fg) : NULL;
  if (!op) return NULL;
  int nouter = rg_scan_n_outer_in(&t), before_ns = rg_scan_n_outer_in(s) - s->n_non_seqs;
  V *oin = vec(nouter);
  memcpy(oin, w->node->inputs, (size_t)before_ns * sizeof(V));
  for (int r = 0; r < R; r++) oin[before_ns + r] = w->node->inputs[0];
  memcpy(oin + before_ns + R, w->node->inputs + before_ns, (size_t)s->n_non_seqs * sizeof(V));
  return rg_make_node(C, op, nouter, oin);
}

/* The number of steps run: n_steps, or the rows of a trace for a
 * while-loop.  NULL (with an error) when a while-loop has no trace. */
static V steps_run(sg *w) {
  if (!w->s.until) return rgc_as_i64(w->node->inputs[0]);
  const rg_scan_info *t = &w->ts;
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_NIT_SOT; kind++)
    if (rg_scan_count(t, kind) > 0) return rg_shape_i(w->src->outputs[rg_scan_outer_out(t, kind, 0)], 0);
  rg_error(w->C, RG_ERR_TYPE, "grad: a while-loop scan with no state or nit-sot has no record of "
           "how many steps it ran");
  return NULL;
}

/* ------------------------------------------------------------------ what the backward step reads */

/* Forward sequences, reversed, at taps max - k. */
static void seq_inputs(sg *w) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_seqs; k++) {
    int nt = s->seq_ntaps[k];
    const int64_t *taps = s->seq_taps[k];
    int64_t lo = rg_scan_tap_min(nt, taps), hi = rg_scan_tap_max(nt, taps);
    V x = w->node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)];
    V eff = s->go_backwards ? reversed(x) : x;
    int64_t *bt = taps_new(nt);
    for (int j = 0; j < nt; j++) {
      bt[j] = hi - taps[j];
      int i = rg_scan_inner_in(s, RG_SCAN_SEQ, k, j);
      vpush(&w->b.in_seq, w->vin[i] = fresh(w, w->g->inputs[i]->type));
    }
    add_seq(w, reversed(rows(eff, idx(w->C, 0), iplus(w->C, w->n, hi - lo))), nt, bt);
  }
}

static int state_ntaps(const rg_scan_info *s, rg_scan_kind kind, int k) {
  return kind == RG_SCAN_MIT_SOT ? s->mit_sot_ntaps[k] : 1;
}

static int64_t state_tap(const rg_scan_info *s, rg_scan_kind kind, int k, int j) {
  return kind == RG_SCAN_MIT_SOT ? s->mit_sot_taps[k][j] : -1;
}

/* A state's M initial rows (a sit-sot's one value as a row). */
static V init_rows(sg *w, rg_scan_kind kind, int k, int64_t M) {
  V init = w->node->inputs[rg_scan_outer_in(&w->s, kind, k)];
  return kind == RG_SCAN_SIT_SOT ? as_row(init) : rows(init, idx(w->C, 0), idx(w->C, M));
}

/* Forward states: the rows the steps read, reversed.  Forward step t
 * reads tap k of a state at row t + M + k of its initial rows (M of them)
 * joined with its trace, so backward step b (forward step n - 1 - b) reads
 * row b - 1 - k of those rows reversed.  A sequence's taps count from its
 * smallest (rg_scan_tap_min), so the reversed rows start at the smallest
 * of the offsets, lo = -1 - (the largest tap), which is not 0 when the
 * state has no tap -1: taps (-3 -2) read rows b + 1 and b + 2. */
static void state_inputs(sg *w) {
  const rg_scan_info *s = &w->s;
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_SIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      int nt = state_ntaps(s, kind, k);
      int64_t M = 0;
      int64_t *bt = taps_new(nt);
      for (int j = 0; j < nt; j++) {
        int64_t tap = state_tap(s, kind, k, j);
        M = -tap > M ? -tap : M;
        bt[j] = -1 - tap;
        int i = rg_scan_inner_in(s, kind, k, j);
        vpush(&w->b.in_seq, w->vin[i] = fresh(w, w->g->inputs[i]->type));
      }
      int64_t lo = rg_scan_tap_min(nt, bt);
      V trace = w->src->outputs[rg_scan_outer_out(&w->ts, kind, k)];
      V full = rg_join(0, 2, (V[]){init_rows(w, kind, k, M), trace});
      add_seq(w, reversed(rows(full, idx(w->C, 0), iplus(w->C, w->n, M - 1 - lo))), nt, bt);
    }
}

/* Forward mit-mot reads, from the twin's records, reversed. */
static void mit_mot_inputs(sg *w) {
  const rg_scan_info *s = &w->s;
  int r = 0;
  for (int k = 0; k < s->n_mit_mot; k++)
    for (int j = 0; j < s->mit_mot_nin[k]; j++, r++) {
      int i = rg_scan_inner_in(s, RG_SCAN_MIT_MOT, k, j);
      vpush(&w->b.in_seq, w->vin[i] = fresh(w, w->g->inputs[i]->type));
      V rec = w->src->outputs[rg_scan_outer_out(&w->ts, RG_SCAN_NIT_SOT, s->n_nit_sot + r)];
      int64_t *bt = taps_new(1);
      bt[0] = 0;
      add_seq(w, reversed(rec), 1, bt);
    }
}

/* Stored forward values, from the twin's records, reversed. */
static void stored_inputs(sg *w) {
  w->stored_in = vec(w->stored.n);
  for (int r = 0; r < w->stored.n; r++) {
    vpush(&w->b.in_seq, w->stored_in[r] = fresh(w, w->stored.v[r]->type));
    V rec = w->src->outputs[rg_scan_outer_out(&w->ts, RG_SCAN_NIT_SOT, w->s.n_nit_sot + w->nreads + r)];
    int64_t *bt = taps_new(1);
    bt[0] = 0;
    add_seq(w, reversed(rec), 1, bt);
  }
}

/* Forward nit-sots with a gradient: that gradient, reversed. */
static void nit_sot_grads(sg *w, V const *og) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_nit_sot; k++) {
    V d = og[rg_scan_outer_out(s, RG_SCAN_NIT_SOT, k)];
    if (!d) continue;
    int o = rg_scan_inner_out(s, RG_SCAN_NIT_SOT, k, 0);
    vpush(&w->b.in_seq, w->gout[o] = fresh(w, w->g->outputs[o]->type));
    int64_t *bt = taps_new(1);
    bt[0] = 0;
    add_seq(w, reversed(d), 1, bt);
  }
}

/* ------------------------------------------------------------------ gradients across steps */

static void add_mit_mot(sg *w, V buffer, int nin, const int64_t *in, int nout, const int64_t *out) {
  bscan *b = &w->b;
  b->mm_nin[b->mm.n] = nin, b->mm_in[b->mm.n] = in;
  b->mm_nout[b->mm.n] = nout, b->mm_out[b->mm.n] = out;
  vpush(&b->mm, buffer);
}

/* The gradient of a state's whole trace: a trace kept with store_steps
 * holds its last rows, so its gradient goes to those. */
static V trace_grad(sg *w, V const *og, rg_scan_kind kind, int k) {
  const rg_scan_info *s = &w->s;
  V whole = w->src->outputs[rg_scan_outer_out(&w->ts, kind, k)];
  V ext = og[rg_scan_outer_out(s, kind, k)];
  int store_at = kind == RG_SCAN_MIT_SOT ? k : s->n_mit_sot + k;
  if (!ext || !s->store_steps[store_at]) return ext ? ext : rgc_zeros_like(w->C, whole);
  return inc_rows(rgc_zeros_like(w->C, whole), ext, iminus(w->C, w->n, rg_shape_i(ext, 0)), w->n);
}

/* A forward state's gradient buffer: tap 0 the complete gradient of the
 * row the step wrote, taps -k the running gradients of the rows it read. */
static void state_buffers(sg *w, V const *og) {
  const rg_scan_info *s = &w->s;
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_SIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      int nt = state_ntaps(s, kind, k), o = rg_scan_inner_out(s, kind, k, 0);
      int64_t M = 0, *in = taps_new(nt + 1), *out = taps_new(nt);
      in[0] = 0;
      vpush(&w->b.in_mm, w->gout[o] = fresh(w, w->g->outputs[o]->type));
      for (int j = 0; j < nt; j++) {
        int64_t tap = state_tap(s, kind, k, j);
        M = -tap > M ? -tap : M;
        in[j + 1] = out[j] = -tap;
        vpush(&w->b.in_mm, fresh(w, w->g->inputs[rg_scan_inner_in(s, kind, k, j)]->type));
      }
      V head = reversed(trace_grad(w, og, kind, k));
      add_mit_mot(w, rg_join(0, 2, (V[]){head, rgc_zeros_like(w->C, init_rows(w, kind, k, M))}), nt + 1, in, nt, out);
    }
}

/* Every tap a forward mit-mot reads or writes, in order of first mention. */
static int mit_mot_union(const rg_scan_info *s, int k, int64_t *u) {
  int n = 0;
  for (int j = 0; j < s->mit_mot_nin[k]; j++) u[n++] = s->mit_mot_in_taps[k][j];
  for (int j = 0; j < s->mit_mot_nout[k]; j++)
    if (find_tap(n, u, s->mit_mot_out_taps[k][j]) < 0) u[n++] = s->mit_mot_out_taps[k][j];
  return n;
}

/* A forward mit-mot's gradient buffer over its touched rows, reversed, at
 * taps max - x for each tap x; a written row's gradient is the written
 * value's. */
static void mit_mot_buffers(sg *w, V const *og) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_mit_mot; k++) {
    int64_t *u = taps_new(s->mit_mot_nin[k] + s->mit_mot_nout[k]);
    int nu = mit_mot_union(s, k, u);
    int64_t lo = rg_scan_tap_min(nu, u), hi = rg_scan_tap_max(nu, u), *bt = taps_new(nu);
    const rg_type *rt = w->g->outputs[rg_scan_inner_out(s, RG_SCAN_MIT_MOT, k, 0)]->type;
    for (int j = 0; j < nu; j++) {
      bt[j] = hi - u[j];
      V old = fresh(w, rt);
      vpush(&w->b.in_mm, old);
      int oj = find_tap(s->mit_mot_nout[k], s->mit_mot_out_taps[k], u[j]);
      if (oj >= 0) w->gout[rg_scan_inner_out(s, RG_SCAN_MIT_MOT, k, oj)] = old;
    }
    V buf = w->node->inputs[rg_scan_outer_in(s, RG_SCAN_MIT_MOT, k)];
    V ext = og[rg_scan_outer_out(s, RG_SCAN_MIT_MOT, k)];
    if (!ext) ext = rgc_zeros_like(w->C, buf);
    add_mit_mot(w, reversed(rows(ext, idx(w->C, 0), iplus(w->C, w->n, hi - lo))), nu, bt, nu, bt);
  }
}

/* ------------------------------------------------------------------ the backward step's outputs */

static V plus(V a, V b) { return b ? rg_add(a, b) : a; }

/* In the order state_buffers and mit_mot_buffers made the inputs. */
static void mit_mot_outputs(sg *w) {
  const rg_scan_info *s = &w->s;
  int at = 0;
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_SIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      at++; /* tap 0: read only */
      for (int j = 0; j < state_ntaps(s, kind, k); j++, at++)
        vpush(&w->b.out_mm, plus(w->b.in_mm.v[at], w->din[rg_scan_inner_in(s, kind, k, j)]));
    }
  for (int k = 0; k < s->n_mit_mot; k++) {
    int64_t *u = taps_new(s->mit_mot_nin[k] + s->mit_mot_nout[k]);
    int nu = mit_mot_union(s, k, u);
    for (int j = 0; j < nu; j++, at++) {
      V old = w->b.in_mm.v[at];
      int ij = find_tap(s->mit_mot_nin[k], s->mit_mot_in_taps[k], u[j]);
      V d = ij >= 0 ? w->din[rg_scan_inner_in(s, RG_SCAN_MIT_MOT, k, ij)] : NULL;
      bool written = find_tap(s->mit_mot_nout[k], s->mit_mot_out_taps[k], u[j]) >= 0;
      vpush(&w->b.out_mm, written ? (d ? d : rgc_zeros_like(w->C, old)) : plus(old, d));
    }
  }
}

/* Non-sequence accumulators (sit-sots) and sequence gradients (nit-sots). */
static void other_outputs(sg *w) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_non_seqs; k++) {
    V d = w->din[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)];
    if (!d) continue;
    V acc = fresh(w, d->type);
    vpush(&w->b.in_ss, acc);
    vpush(&w->b.out_ss, rg_add(acc, d));
    vpush(&w->b.ss, rgc_zeros_like(w->C, w->node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)]));
  }
  for (int k = 0; k < s->n_seqs; k++)
    for (int j = 0; j < s->seq_ntaps[k]; j++) {
      V d = w->din[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)];
      if (d) vpush(&w->b.out_nit, d), w->b.n_nit++;
    }
}

/* ------------------------------------------------------------------ the step's gradient */

/* Which inner inputs' gradients are used (the states' and mit-mots'
 * always: they flow across steps) and which inner outputs a gradient
 * reaches (states and mit-mots always, nit-sots when theirs is given). */
static void wanted(sg *w, V const *og) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_seqs; k++)
    for (int j = 0; j < s->seq_ntaps[k]; j++) w->want[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)] = w->need[rg_scan_outer_in(s, RG_SCAN_SEQ, k)];
  for (int k = 0; k < s->n_non_seqs; k++)
    w->want[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)] = w->need[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)];
  int first_state = rg_scan_n_inner_in(s) - s->n_non_seqs - s->n_sit_sot - sum_taps(s->mit_sot_ntaps, s->n_mit_sot) -
                    sum_taps(s->mit_mot_nin, s->n_mit_mot);
  for (int i = first_state; i < rg_scan_n_inner_in(s) - s->n_non_seqs; i++) w->want[i] = true;
  for (int o = 0; o < rg_scan_n_inner_out(s) - s->until; o++) w->has_go[o] = true;
  for (int k = 0; k < s->n_nit_sot; k++)
    w->has_go[rg_scan_inner_out(s, RG_SCAN_NIT_SOT, k, 0)] = og[rg_scan_outer_out(s, RG_SCAN_NIT_SOT, k)] != NULL;
}

/* A clone of the forward step over `in`, differentiated from the output
 * gradients `go` (NULL: none): d per inner input (NULL: none or not
 * wanted); *clone receives the clone's memo.  *any: whether a gradient
 * reaches any output. */
static int clone_grad(sg *w, V *in, V *go, V *d, rg_memo **clone, bool *any) {
  const rg_fgraph *g = w->g;
  rg_memo *memo = *clone = rg_memo_new();
  for (int i = 0; i < g->nin; i++) rg_memo_put(memo, g->inputs[i], in[i]);
  V *outs = vec(g->nout), *known = vec(g->nout), *kg = vec(g->nout), *wrt = vec(g->nin), *dw = vec(g->nin);
  int rc = rg_clone(w->C, g->nin, g->inputs, g->nout, g->outputs, memo, 0, outs);
  if (rc) return rc;
  int nk = 0, nw = 0;
  for (int o = 0; o < g->nout; o++)
    if (go[o]) known[nk] = outs[o], kg[nk++] = go[o];
  *any = nk > 0;
  if (!nk) return RG_OK;
  for (int i = 0; i < g->nin; i++)
    if (w->want[i] && rg_dtype_is_float(g->inputs[i]->type->dtype)) wrt[nw++] = in[i];
  /* the step's inputs are the walk's leaves: it never goes on into what
   * computes them (as through a composite's inputs, grad-ops.c) */
  rg_grad_opts opts = {.disconnected = RG_GRAD_DISCONNECTED_NULL, .nknown = nk, .known = known, .known_grads = kg,
                       .nconsts = g->nin, .consts = in};
  rc = rg_grad(w->C, NULL, nw, wrt, &opts, dw);
  if (rc) return rc;
  for (int i = 0, j = 0; i < g->nin; i++)
    d[i] = w->want[i] && rg_dtype_is_float(g->inputs[i]->type->dtype) ? dw[j++] : NULL;
  return RG_OK;
}

/* The forward inner variables that change from step to step (computed
 * from a sequence, state or mit-mot input). */
static rg_memo *per_step(const sg *w) {
  const rg_fgraph *g = w->g;
  rg_memo *m = rg_memo_new();
  int first_ns = g->nin - w->s.n_non_seqs;
  for (int i = 0; i < first_ns; i++) rg_memo_put(m, g->inputs[i], (void *)1);
  size_t n;
  rg_node **order = rg_toposort(g->nin, g->inputs, g->nout, g->outputs, &n);
  for (size_t k = 0; k < n; k++) {
    bool varies = false;
    for (int i = 0; i < order[k]->nin; i++) varies |= rg_memo_get(m, order[k]->inputs[i]) != NULL;
    for (int o = 0; varies && o < order[k]->nout; o++) rg_memo_put(m, order[k]->outputs[o], (void *)1);
  }
  return m;
}

typedef struct frontier {
  rg_memo *fwd;     /* cloned forward node -> its original */
  rg_memo *orig;    /* cloned forward variable -> its original */
  rg_memo *step;    /* per_step */
  rg_memo *seen;
  rg_memo *sizes;   /* size value -> 1 the same at every step, 2 not */
  rg_memo *shapes;  /* forward value -> 1 its shape the same at every step, 2 not */
} frontier;

static bool same_shape_each_step(sg *w, frontier *f, V x);

/* Whether the integer value e (a size) is the same at every step: it
 * reads values that change per step (step: per_step) only through their
 * shapes, and those shapes are the same at every step. */
static bool same_value_each_step(sg *w, frontier *f, V e) {
  if (rg_is_constant(e)) return true;
  void *known = rg_memo_get(f->sizes, e);
  if (known) return known == (void *)1;
  bool same = true;
  const rg_node *n = e->owner;
  if (n && (n->op->code == RG_OP_SHAPE_I || n->op->code == RG_OP_SHAPE))
    same = same_shape_each_step(w, f, n->inputs[0]);
  else if (rg_memo_get(f->step, e))
    same = false; /* a value of the step that changes per step: k_t in x[:k_t] */
  else
    for (int i = 0; n && same && i < n->nin; i++) same = same_value_each_step(w, f, n->inputs[i]);
  rg_memo_put(f->sizes, e, (void *)(uintptr_t)(same ? 1 : 2));
  return same;
}

/* Whether x, a value of the forward step, has the same shape at every
 * step: its sizes are static, or it is an input of the step (a slice of
 * a sequence, a state, a non-sequence), or its sizes are computed from
 * such shapes.  x[:k_t] is not: its length is k_t's value. */
static bool same_shape_each_step(sg *w, frontier *f, V x) {
  bool known = true;
  for (int d = 0; d < x->type->ndim; d++) known &= x->type->shape[d] >= 0;
  if (known || !x->owner) return true;
  /* While x is being looked at its entry says "not the same": a size
   * inference that can only answer shape_i(x) (an op_from_graph, a loop
   * with an until) ends there. */
  void *seen = rg_memo_get(f->shapes, x);
  if (seen) return seen == (void *)1;
  rg_memo_put(f->shapes, x, (void *)2);
  V *dims = rg_infer_shape(w->C, x->owner, x->index);
  bool same = dims != NULL;
  if (!dims) rg_clear_error(w->C);
  for (int d = 0; same && d < x->type->ndim; d++)
    same = x->type->shape[d] >= 0 || same_value_each_step(w, f, dims[d]);
  rg_memo_put(f->shapes, x, (void *)(uintptr_t)(same ? 1 : 2));
  return same;
}

/* A value the gradient reads from the forward step: stored when it
 * changes per step (a loop-invariant one is cheap to recompute and would
 * cost a copy per step) and has the same shape at every step (the twin
 * loop records it as a trace of rows; another is recomputed). */
static void consider(sg *w, frontier *f, V x) {
  if (!x || !x->owner || !rg_memo_get(f->fwd, x->owner)) return;
  V o = rg_memo_get(f->orig, x);
  if (!o || !rg_memo_get(f->step, o) || rg_memo_get(f->seen, o)) return;
  if (!same_shape_each_step(w, f, o)) return;
  rg_memo_put(f->seen, o, (void *)1);
  vpush(&w->stored, o);
}

/* Which forward values the backward step reads rather than recomputes:
 * those of the forward step that the step's gradient uses directly (a
 * trial differentiation on a throwaway clone finds them), as PyTorch's
 * autograd saves activations.  The backward step then recomputes nothing
 * that changes per step. */
static void find_stored(sg *w) {
  const rg_fgraph *g = w->g;
  V *in = vec(g->nin), *go = vec(g->nout), *d = vec(g->nin), *roots = vec(g->nin);
  w->stored = (vlist){vec(4 * g->nout + 4 * (int)rg_memo_size(per_step(w)) + 4), 0};
  for (int i = 0; i < g->nin; i++) in[i] = fresh(w, g->inputs[i]->type);
  for (int o = 0; o < g->nout; o++) go[o] = w->has_go[o] ? fresh(w, g->outputs[o]->type) : NULL;
  rg_memo *clone;
  bool any;
  if (clone_grad(w, in, go, d, &clone, &any) || !any) return; /* an error comes back from step_grads */
  w->trial_in = in, w->trial_go = go, w->trial_d = d, w->trial_clone = clone;
  frontier f = {rg_memo_new(), rg_memo_new(), per_step(w), rg_memo_new(), rg_memo_new(), rg_memo_new()};
  size_t n, nb;
  rg_node **order = rg_toposort(g->nin, g->inputs, g->nout, g->outputs, &n);
  for (size_t k = 0; k < n; k++) {
    rg_node *c = rg_memo_get(clone, order[k]);
    if (!c) continue;
    rg_memo_put(f.fwd, c, order[k]);
    for (int o = 0; o < c->nout; o++) rg_memo_put(f.orig, c->outputs[o], order[k]->outputs[o]);
  }
  int nr = 0;
  for (int i = 0; i < g->nin; i++)
    if (d[i]) roots[nr++] = d[i];
  rg_node **back = rg_toposort(g->nin, in, nr, roots, &nb);
  for (size_t k = 0; k < nb; k++)
    if (!rg_memo_get(f.fwd, back[k]))
      for (int i = 0; i < back[k]->nin; i++) consider(w, &f, back[k]->inputs[i]);
  for (int i = 0; i < nr; i++) consider(w, &f, roots[i]);
}

/* Whether the trial's output gradients are the backward step's: given for
 * the same outputs. */
static bool trial_fits(const sg *w) {
  if (!w->trial_clone) return false;
  for (int o = 0; o < w->g->nout; o++)
    if (!w->trial_go[o] != !w->gout[o]) return false;
  return true;
}

/* The step's gradient over the backward inputs, reading stored values
 * where find_stored chose them (the recomputation they replace is then
 * unreachable): the trial's gradient with the backward step's inputs put
 * in, or (when it does not fit) a differentiation of its own.  *any:
 * false when no gradient flows at all. */
static int step_grads(sg *w, bool *any) {
  const rg_fgraph *g = w->g;
  for (int i = 0; i < g->nin; i++)
    if (!w->vin[i]) w->vin[i] = fresh(w, g->inputs[i]->type);
  rg_memo *clone, *use = rg_memo_new();
  V *from = w->vin, *grads = w->din;
  if (trial_fits(w)) {
    *any = true;
    clone = w->trial_clone, from = w->trial_in, grads = w->trial_d;
    for (int i = 0; i < g->nin; i++) rg_memo_put(use, w->trial_in[i], w->vin[i]);
    for (int o = 0; o < g->nout; o++)
      if (w->trial_go[o]) rg_memo_put(use, w->trial_go[o], w->gout[o]);
  } else {
    int rc = clone_grad(w, w->vin, w->gout, w->din, &clone, any);
    if (rc || !*any || !w->stored.n) return rc;
  }
  for (int r = 0; r < w->stored.n; r++) {
    V c = rg_memo_get(clone, w->stored.v[r]);
    if (c) rg_memo_put(use, c, w->stored_in[r]);
  }
  V *d = vec(g->nin), *d2 = vec(g->nin);
  int nd = 0;
  for (int i = 0; i < g->nin; i++)
    if (grads[i]) d[nd++] = grads[i];
  int rc = rg_clone(w->C, g->nin, from, nd, d, use, 0, d2);
  if (rc) return rc;
  for (int i = 0, j = 0; i < g->nin; i++) w->din[i] = grads[i] ? d2[j++] : NULL;
  return RG_OK;
}

/* ------------------------------------------------------------------ building the backward node */

static V *concat(int n, const vlist *const *ls, int *total) {
  int t = 0;
  for (int i = 0; i < n; i++) t += ls[i]->n;
  V *v = vec(t);
  for (int i = 0, at = 0; i < n; i++) {
    memcpy(v + at, ls[i]->v, (size_t)ls[i]->n * sizeof(V));
    at += ls[i]->n;
  }
  *total = t;
  return v;
}

static rg_node *backward_node(sg *w) {
  bscan *b = &w->b;
  const rg_scan_info *s = &w->s;
  vlist ns_in = {vec(s->n_non_seqs), 0}, ns_out = {vec(s->n_non_seqs), 0};
  for (int k = 0; k < s->n_non_seqs; k++) {
    vpush(&ns_in, w->vin[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)]);
    vpush(&ns_out, w->node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)]);
  }
  int nstore = b->ss.n + b->n_nit;
  int64_t *store = taps_new(nstore);
  for (int i = 0; i < nstore; i++) store[i] = i < b->ss.n ? 1 : 0;
  rg_scan_info t = {.n_seqs = b->seq.n, .n_mit_mot = b->mm.n, .n_sit_sot = b->ss.n, .n_nit_sot = b->n_nit,
                    .n_non_seqs = s->n_non_seqs, .truncate_gradient = -1, .seq_ntaps = b->seq_nt,
                    .seq_taps = b->seq_taps, .mit_mot_nin = b->mm_nin, .mit_mot_nout = b->mm_nout,
                    .mit_mot_in_taps = b->mm_in, .mit_mot_out_taps = b->mm_out, .store_steps = store};
  int nin, nout, nouter;
  V *in = concat(4, (const vlist *[]){&b->in_seq, &b->in_mm, &b->in_ss, &ns_in}, &nin);
  V *out = concat(3, (const vlist *[]){&b->out_mm, &b->out_ss, &b->out_nit}, &nout);
  vlist nb = {vec(1 + b->n_nit), 0};
  for (int i = 0; i <= b->n_nit; i++) vpush(&nb, w->nb);
  vlist first = {nb.v, 1}, lens = {nb.v + 1, b->n_nit};
  V *outer = concat(6, (const vlist *[]){&first, &b->seq, &b->mm, &b->ss, &lens, &ns_out}, &nouter);
  rg_fgraph *fg = rg_fgraph_new(w->C, nin, in, nout, out, RG_FG_CLONE);
  const rg_op *op = fg ? rg_op_scan(w->C, &t, fg) : NULL;
  return op ? rg_make_node(w->C, op, nouter, outer) : NULL;
}

/* ------------------------------------------------------------------ reading the results */

static void state_results(sg *w, const rg_node *bn, V *ig, int *mm) {
  const rg_scan_info *s = &w->s;
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_SIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++, (*mm)++) {
      V buf = bn->outputs[*mm];
      int at = rg_scan_outer_in(s, kind, k);
      if (kind == RG_SCAN_SIT_SOT) {
        ig[at] = row(buf, w->n);
        continue;
      }
      int64_t M = -rg_scan_tap_min(s->mit_sot_ntaps[k], s->mit_sot_taps[k]);
      V d = reversed(rows(buf, w->n, iplus(w->C, w->n, M)));
      ig[at] = inc_rows(rgc_zeros_like(w->C, w->node->inputs[at]), d, idx(w->C, 0), idx(w->C, M));
    }
}

static void mit_mot_results(sg *w, const rg_node *bn, V const *og, V *ig, int *mm) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_mit_mot; k++, (*mm)++) {
    int at = rg_scan_outer_in(s, RG_SCAN_MIT_MOT, k);
    V ext = og[rg_scan_outer_out(s, RG_SCAN_MIT_MOT, k)];
    if (!ext) ext = rgc_zeros_like(w->C, w->node->inputs[at]);
    V back = reversed(bn->outputs[*mm]);
    ig[at] = set_rows(ext, back, idx(w->C, 0), rg_shape_i(back, 0));
  }
}

static void other_results(sg *w, const rg_node *bn, V *ig, int at_out) {
  const rg_scan_info *s = &w->s;
  for (int k = 0; k < s->n_non_seqs; k++)
    if (w->din[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)])
      ig[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)] = rg_sum(bn->outputs[at_out++], 1, (int64_t[]){0});
  for (int k = 0; k < s->n_seqs; k++) {
    int nt = s->seq_ntaps[k];
    int64_t lo = rg_scan_tap_min(nt, s->seq_taps[k]);
    V x = w->node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)], acc = NULL;
    for (int j = 0; j < nt; j++) {
      if (!w->din[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)]) continue;
      V start = iplus(w->C, iminus(w->C, w->n, w->nb), s->seq_taps[k][j] - lo);
      V base = acc ? acc : rgc_zeros_like(w->C, x);
      acc = inc_rows(base, reversed(bn->outputs[at_out++]), start, rgc_iarith(w->C, 0, start, w->nb));
    }
    if (acc) ig[rg_scan_outer_in(s, RG_SCAN_SEQ, k)] = s->go_backwards ? reversed(acc) : acc;
  }
}

/* ------------------------------------------------------------------ the gradient */

int rgc_grad_SCAN(rg_ctx *C, const rg_node *node, V const *og, V *ig, const bool *need) {
  sg w = {.C = C, .node = node, .g = node->op->inner, .need = need};
  if (!w.g || !rg_scan_info_of(node->op, &w.s)) return rgc_op_error(C, node->op, "malformed scan op");
  bool flows = false;
  for (int o = 0; o < node->nout; o++) flows |= og[o] != NULL;
  if (!flows) return RG_OK;
  w.vin = vec(w.g->nin), w.din = vec(w.g->nin), w.gout = vec(w.g->nout);
  w.want = rgk_alloc_atomic((size_t)w.g->nin + 1);
  w.has_go = rgk_alloc_atomic((size_t)w.g->nout + 1);
  memset(w.want, 0, (size_t)w.g->nin + 1);
  memset(w.has_go, 0, (size_t)w.g->nout + 1);
  wanted(&w, og);
  w.nreads = sum_taps(w.s.mit_mot_nin, w.s.n_mit_mot);
  find_stored(&w);
  w.src = needs_twin(&w.s) || w.stored.n ? make_twin(&w) : node;
  if (!w.src) return rg_errmsg(C)[0] ? RG_ERR_TYPE : rgc_op_error(C, node->op, "could not record its values");
  w.ts = w.s;
  if (w.src != node) rg_scan_info_of(w.src->op, &w.ts);
  if (!(w.n = steps_run(&w))) return RG_ERR_TYPE;
  w.nb = w.s.truncate_gradient >= 0 ? rgc_iarith(C, 5, w.n, idx(C, w.s.truncate_gradient)) : w.n;
  bscan_init(&w.b, 4 * (w.g->nin + w.g->nout + node->nin + w.stored.n) + 16);
  seq_inputs(&w);
  state_inputs(&w);
  mit_mot_inputs(&w);
  stored_inputs(&w);
  nit_sot_grads(&w, og);
  state_buffers(&w, og);
  mit_mot_buffers(&w, og);
  bool any;
  int rc = step_grads(&w, &any);
  if (rc || !any) return rc;
  mit_mot_outputs(&w);
  other_outputs(&w);
  rg_node *bn = backward_node(&w);
  if (!bn) return RG_ERR_TYPE;
  int mm = 0;
  state_results(&w, bn, ig, &mm);
  mit_mot_results(&w, bn, og, ig, &mm);
  other_results(&w, bn, ig, mm);
  return RG_OK;
}
