/*
 * scan-scalar.c — Scan steps of small elementwise work: a cumulative sum,
 * a scalar recurrence, Fibonacci, x_t = 0.5 x_{t-1} + s_t on a short
 * vector.  The general loop (scan.c) pays per step for the VM, a kernel's
 * dispatch per node and a copy per output, which dominates when each value
 * is a few elements; here a step is a flat list of typed elementwise loops
 * over m elements each (m the one static shape every non-scalar value of
 * the step has; scalars are read with stride 0), as the composite
 * interpreter runs its blocks.  A composite of the step (fusion's) is
 * flattened into the list: each op of its inner program is one more loop,
 * its scalar values becoming values of the plan (of the plan's shape where
 * they read one, else scalars), so a fused step keeps this path.  A 0-d
 * constant of another dtype than its op computes in (the literal 0.5 of
 * 0.5 * x is float64 beside float32 x) is converted once, into a cell of
 * its own.
 *
 * A plan gives every cell of the inner program a slot (a pointer to its
 * element).  Before each step the slots of inner inputs are pointed at the
 * sequence elements and state rows of that step (no view, no copy), and
 * the slots of inner outputs at their trace rows, so each output is
 * written straight where the trace keeps it; other intermediates live in
 * scratch of their own.  The plan applies when every thunk is elementwise
 * (or a composite of elementwise ops, not nested, computing each output
 * over its shape) over values that are 0-d or of the one static shape (so
 * nothing broadcasts but scalars), its loop reading the operands in their
 * own dtypes; sequence rows, non-sequences and constants of that shape are
 * C-contiguous; every inner output is computed by a thunk (not an input or
 * constant passed through) and used once as an output.  Else the general
 * loop runs.
 */
#include "backend/cpu/scan-impl.h"
#include "base/base.h"

#include <string.h>

typedef struct sop {
  rgbc_loop loop;
  int32_t out;          /* cell */
  int32_t nin;
  const int32_t *in;    /* cells */
  bool copy, nary;
  int64_t st[RGBC_MAXOPS + 1]; /* byte strides: output, then each input (0: a scalar) */
} sop;

/* A slot moved every step: to base + row * stride, row = t + off (from
 * the end when back >= 0: back - row; circular when tr wraps). */
typedef struct feed {
  int32_t cell;
  char *base;
  int64_t stride, off, back;
  const trace *tr;
} feed;

typedef struct plan {
  sop *ops;
  int nops;
  int32_t ncells;       /* the program's cells, its composites' inner cells, converted constants */
  int32_t nextra, next; /* converted constants: cells from ncells - nextra on; the next free one */
  int32_t *inpool;      /* the input cells of the ops */
  const rg_tensor **cval; /* per cell: the constant it holds, or NULL */
  int64_t *conv;        /* the converted constants' values, one word each */
  feed *feeds;
  int nfeeds;
  char **slot;          /* per cell */
  int64_t *scratch;     /* per cell: m elements */
  int nd;               /* the shape of non-scalar values (nd -1: none yet) */
  int64_t shape[RG_MAX_NDIM], m;
  int32_t *out_trace;   /* per cell: the trace it is the output of, or -1 */
} plan;

/* A value's byte stride: 0 for a scalar, its element size when it has the
 * plan's shape (the first such value fixes it); -1 when neither. */
static int64_t stride_of(plan *pl, int nd, const int64_t *shape, rg_dtype dt) {
  if (nd == 0) return 0;
  if (nd < 0 || nd > RG_MAX_NDIM) return -1;
  if (pl->nd < 0) {
    for (int d = 0; d < nd; d++)
      if (shape[d] < 0) return -1;
    pl->nd = nd;
    memcpy(pl->shape, shape, (size_t)nd * sizeof *shape);
    pl->m = 1;
    for (int d = 0; d < nd; d++) pl->m *= shape[d];
  }
  if (nd != pl->nd || memcmp(shape, pl->shape, (size_t)nd * sizeof *shape)) return -1;
  return rgbc_size(dt);
}

/* The cell an operand reads: cell c itself when its dtype `have` is the
 * one the loop wants; a 0-d constant of another dtype (a literal such as
 * 0.5 beside float32 values is a float64 constant) converted once into a
 * cell of its own; else -1. */
static int32_t operand_cell(plan *pl, int32_t c, rg_dtype have, rg_dtype want) {
  if (have == want) return c;
  const rg_tensor *v = pl->cval[c];
  if (!v || v->ndim != 0 || v->dtype != have || pl->next >= pl->ncells) return -1;
  int32_t nc = pl->next++;
  char *dst = (char *)&pl->conv[nc - (pl->ncells - pl->nextra)], *q[2] = {dst, v->data};
  int64_t qs[2] = {0, 0};
  rgbc_cast_loop(have, want)(q, qs, 1, NULL);
  pl->slot[nc] = dst;
  return nc;
}

static bool op_fits(const rgb_thunk *t, sop *o, plan *pl, int32_t *in) {
  const rgb_node *n = &t->node;
  rgbc_ew_info info;
  if (t->kind != RGB_T_KERNEL || n->inner || rgbc_ew_info_of(n, &info) || n->nout != 1 || n->nin >= RGBC_MAXOPS)
    return false;
  *o = (sop){info.loop, t->out_cells[0], n->nin, in, info.copy, info.nary, {0}};
  if ((o->st[0] = stride_of(pl, n->out[0].ndim, n->out[0].shape, n->out[0].dtype)) < 0) return false;
  for (int k = 0; k < n->nin; k++) {
    rg_dtype want = info.nary || info.copy ? info.in[0] : info.in[k];
    in[k] = info.copy ? t->in_cells[k] : operand_cell(pl, t->in_cells[k], n->in[k].dtype, want);
    if (in[k] < 0) return false;
    if ((o->st[k + 1] = stride_of(pl, n->in[k].ndim, n->in[k].shape, n->in[k].dtype)) < 0) return false;
    if (o->st[k + 1] && !o->st[0]) return false; /* a scalar output of a non-scalar input */
  }
  return true;
}

/* Whether a tensor (or its rows, from dimension `from`) is a scalar or
 * the plan's shape, C-contiguous. */
static bool value_fits(const plan *pl, const rg_tensor *t, int from) {
  int nd = t->ndim - from;
  if (nd == 0) return true;
  if (nd != pl->nd) return false;
  int64_t st = (int64_t)rg_dtype_size(t->dtype);
  for (int d = nd - 1; d >= 0; d--) {
    if (t->shape[from + d] != pl->shape[d] || (t->shape[from + d] > 1 && t->strides[from + d] != st)) return false;
    st *= t->shape[from + d];
  }
  return true;
}

/* The type of cell c, which a thunk of p computes (a composite computes
 * several). */
static const rgb_vtype *cell_vtype(const rgb_program *p, int32_t c) {
  const rgb_thunk *t = &p->thunks[p->producer[c]];
  for (int j = 0; j < t->node.nout; j++)
    if (t->out_cells[j] == c) return &t->node.out[j];
  return &t->node.out[0];
}

/* The traces of the inner outputs: each produced by a thunk, used once. */
static bool map_outputs(run *r, plan *pl) {
  rgb_program *p = r->p;
  for (int32_t c = 0; c < pl->ncells; c++) pl->out_trace[c] = -1;
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    if (tr->kind == RG_SCAN_MIT_MOT) return false;
    int32_t c = p->out_cells[tr->first_out];
    if (p->producer[c] < 0 || pl->out_trace[c] >= 0) return false;
    pl->out_trace[c] = o;
  }
  return true;
}

/* Traces of 0-d rows; a nit-sot's buffer made now, from its static dtype. */
static int check_traces(run *r, const plan *pl) {
  rgb_program *p = r->p;
  for (int o = 0; o < r->ntr; o++) { /* every check before any allocation */
    trace *tr = &r->tr[o];
    const rgb_vtype *vt = cell_vtype(p, p->out_cells[tr->first_out]);
    if (tr->kind != RG_SCAN_NIT_SOT &&
        (tr->buf->ndim != vt->ndim + 1 || tr->buf->dtype != vt->dtype || !value_fits(pl, tr->buf, 1)))
      return 1;
  }
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    const rgb_vtype *vt = cell_vtype(p, p->out_cells[tr->first_out]);
    if (tr->kind != RG_SCAN_NIT_SOT) continue;
    int64_t shape[RG_MAX_NDIM + 1] = {tr->rows};
    memcpy(shape + 1, vt->shape, (size_t)vt->ndim * sizeof *shape);
    tr->buf = rg_tensor_empty(vt->dtype, vt->ndim + 1, shape);
    if (!tr->buf) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory for a trace of %lld rows", (long long)tr->rows);
  }
  return 0;
}

static bool inputs_fit(run *r, const plan *pl) {
  const rg_scan_info *s = &r->s;
  for (int k = 0; k < s->n_seqs; k++)
    if (!value_fits(pl, rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_SEQ, k)), 1)) return false;
  for (int k = 0; k < s->n_non_seqs; k++)
    if (!value_fits(pl, rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)), 0)) return false;
  if (s->until) {
    int32_t c = r->p->out_cells[rg_scan_inner_out(s, RG_SCAN_UNTIL, 0, 0)];
    if (r->p->producer[c] < 0 || cell_vtype(r->p, c)->dtype != RG_BOOL) return false;
  }
  return true;
}

static void plan_free(plan *pl) {
  rg_free(pl->feeds);
  rg_free(pl->ops);
  rg_free(pl->slot);
  rg_free(pl->scratch);
  rg_free(pl->out_trace);
  rg_free(pl->inpool);
  rg_free(pl->cval);
  rg_free(pl->conv);
}

/* A composite's inner op as one more loop of the plan, its cells
 * translated by map; st gives each inner cell's byte stride (0: a scalar,
 * -1: not computed yet), and the op's output gets the element size where
 * an input is not a scalar. */
static bool inner_op_fits(const rgb_thunk *th, const int32_t *map, int64_t *st, plan *pl, int32_t *in) {
  const rgb_node *m = &th->node;
  rgbc_ew_info info;
  if (th->kind != RGB_T_KERNEL || m->inner || rgbc_ew_info_of(m, &info) || m->nout != 1 || m->nin >= RGBC_MAXOPS)
    return false;
  sop *o = &pl->ops[pl->nops++];
  *o = (sop){info.loop, map[th->out_cells[0]], m->nin, in, info.copy, info.nary, {0}};
  bool wide = false;
  for (int k = 0; k < m->nin; k++) {
    int32_t c = th->in_cells[k];
    rg_dtype want = info.nary || info.copy ? info.in[0] : info.in[k];
    in[k] = info.copy ? map[c] : operand_cell(pl, map[c], m->in[k].dtype, want);
    if (in[k] < 0 || st[c] < 0) return false;
    o->st[k + 1] = st[c];
    wide |= st[c] != 0;
  }
  o->st[0] = st[th->out_cells[0]] = wide ? (int64_t)rgbc_size(m->out[0].dtype) : 0;
  return true;
}

/* Flattens composite thunk t: its inner inputs become the composite's
 * input cells, its outputs the composite's output cells, its other values
 * cells of their own from `base` on, its scalar constants slots read with
 * stride 0.  False when it does not fit: nested composites, an output that
 * is an input or constant or given twice, joined outputs, an output that
 * would broadcast, or an op that does not fit. */
static bool flatten(const rgb_thunk *t, plan *pl, int32_t base, int32_t **pool) {
  const rgb_node *n = &t->node;
  const rgb_program *q = n->inner;
  if (!q || n->join_slot || q->nin != n->nin || q->nout != n->nout) return false;
  int32_t *map = rg_malloc(((size_t)q->ncells + 1) * sizeof *map);
  int64_t *st = rg_malloc(((size_t)q->ncells + 1) * sizeof *st);
  bool ok = map && st;
  for (int32_t c = 0; ok && c < q->ncells; c++) map[c] = base + c, st[c] = -1;
  for (int i = 0; ok && i < q->nin; i++) {
    map[q->in_cells[i]] = t->in_cells[i];
    ok = (st[q->in_cells[i]] = stride_of(pl, n->in[i].ndim, n->in[i].shape, n->in[i].dtype)) >= 0;
  }
  for (int32_t k = 0; ok && k < q->nconst; k++) {
    int32_t c = q->const_cells[k];
    ok = q->cells[c]->ndim == 0;
    st[c] = 0;
    pl->slot[map[c]] = q->cells[c]->data;
    pl->cval[map[c]] = q->cells[c];
  }
  for (int j = 0; ok && j < q->nout; j++) {
    int32_t c = q->out_cells[j];
    ok = q->producer[c] >= 0 && map[c] >= base; /* computed, and not given twice */
    map[c] = t->out_cells[j];
  }
  for (int32_t k = 0; ok && k < q->nthunks; k++) {
    ok = inner_op_fits(&q->thunks[k], map, st, pl, *pool);
    *pool += q->thunks[k].node.nin;
  }
  for (int j = 0; ok && j < q->nout; j++) /* each output computed over the composite's shape */
    ok = st[q->out_cells[j]] == stride_of(pl, n->out[j].ndim, n->out[j].shape, n->out[j].dtype);
  rg_free(map);
  rg_free(st);
  return ok;
}

/* Counts the plan's ops, cells (before the converted constants) and
 * operands; false when a composite nests another. */
static bool plan_sizes(const rgb_program *p, size_t *nops, size_t *ncells, size_t *nins) {
  *nops = 0, *ncells = (size_t)p->ncells, *nins = 0;
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_node *n = &p->thunks[k].node;
    if (n->code != RG_OP_COMPOSITE || !n->inner) {
      ++*nops, *nins += (size_t)n->nin;
      continue;
    }
    for (int32_t j = 0; j < n->inner->nthunks; j++) {
      if (n->inner->thunks[j].node.inner) return false;
      ++*nops, *nins += (size_t)n->inner->thunks[j].node.nin;
    }
    *ncells += (size_t)n->inner->ncells;
  }
  return true;
}

/* 1: not applicable; 0: planned; < 0: an error. */
static int make_plan(run *r, plan *pl) {
  rgb_program *p = r->p;
  size_t nops, ncells, nins;
  if (p->lazy || !plan_sizes(p, &nops, &ncells, &nins) || ncells + nins > INT32_MAX) return 1;
  pl->nd = -1;
  pl->m = 1;
  pl->next = (int32_t)ncells; /* converted constants after the other cells */
  pl->nextra = (int32_t)nins;
  pl->ncells = (int32_t)(ncells + nins);
  pl->ops = rg_malloc((nops + 1) * sizeof *pl->ops);
  pl->slot = rg_calloc((size_t)pl->ncells + 1, sizeof *pl->slot);
  pl->out_trace = rg_malloc(((size_t)pl->ncells + 1) * sizeof *pl->out_trace);
  pl->inpool = rg_malloc((nins + 1) * sizeof *pl->inpool);
  pl->cval = rg_calloc((size_t)pl->ncells + 1, sizeof *pl->cval);
  pl->conv = rg_calloc(nins + 1, sizeof *pl->conv);
  if (!pl->ops || !pl->slot || !pl->out_trace || !pl->inpool || !pl->cval || !pl->conv)
    return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  for (int32_t k = 0; k < p->nconst; k++) {
    int32_t c = p->const_cells[k];
    pl->slot[c] = p->cells[c]->data;
    pl->cval[c] = p->cells[c];
  }
  int32_t base = p->ncells, *pool = pl->inpool;
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    if (t->node.code == RG_OP_COMPOSITE && t->node.inner) {
      if (!flatten(t, pl, base, &pool)) return 1;
      base += t->node.inner->ncells;
    } else {
      if (!op_fits(t, &pl->ops[pl->nops++], pl, pool)) return 1;
      pool += t->node.nin;
    }
  }
  if (!inputs_fit(r, pl) || !map_outputs(r, pl)) return 1;
  for (int32_t k = 0; k < p->nconst; k++)
    if (!value_fits(pl, p->cells[p->const_cells[k]], 0)) return 1;
  pl->scratch = rg_calloc(ncells * (size_t)pl->m + 1, sizeof *pl->scratch);
  if (!pl->scratch) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  for (int k = 0; k < pl->nops; k++) { /* values not kept in a trace live in scratch */
    int32_t c = pl->ops[k].out;
    if (pl->out_trace[c] < 0) pl->slot[c] = (char *)&pl->scratch[(size_t)c * (size_t)pl->m];
  }
  return check_traces(r, pl);
}

/* The slots each step moves: sequence taps, state taps, outputs. */
static int make_feeds(run *r, plan *pl) {
  const rg_scan_info *s = &r->s;
  rgb_program *p = r->p;
  pl->feeds = rg_malloc(((size_t)p->nin + (size_t)r->ntr + 1) * sizeof *pl->feeds);
  if (!pl->feeds) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  for (int k = 0; k < s->n_seqs; k++) {
    const rg_tensor *q = rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_SEQ, k));
    int nt = s->seq_ntaps[k];
    int64_t lo = rg_scan_tap_min(nt, s->seq_taps[k]);
    for (int j = 0; j < nt; j++)
      pl->feeds[pl->nfeeds++] = (feed){p->in_cells[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)], q->data,
                                       q->strides[0], s->seq_taps[k][j] - lo,
                                       s->go_backwards ? q->shape[0] - 1 : -1, NULL};
  }
  for (int o = 0; o < r->ntr; o++) {
    const trace *tr = &r->tr[o];
    int64_t st = tr->buf->strides[0];
    for (int j = 0; tr->kind != RG_SCAN_NIT_SOT && j < tr->ntaps; j++)
      pl->feeds[pl->nfeeds++] = (feed){p->in_cells[tr->first_in + j], tr->buf->data, st,
                                       tr->ninit + tr->taps[j], -1, tr};
    pl->feeds[pl->nfeeds++] = (feed){p->out_cells[tr->first_out], tr->buf->data, st,
                                     tr->kind == RG_SCAN_NIT_SOT ? 0 : tr->ninit, -1, tr};
  }
  return 0;
}

/* Points the moving slots at step t's elements. */
static inline void place(plan *pl, int64_t t) {
  for (const feed *f = pl->feeds, *end = pl->feeds + pl->nfeeds; f < end; f++) {
    int64_t row = t + f->off;
    if (f->back >= 0) row = f->back - row;
    else if (f->tr && f->tr->wrap) row %= f->tr->rows;
    pl->slot[f->cell] = f->base + row * f->stride;
  }
}

static void run_op(const sop *o, char **slot, int64_t m, rgbc_status *st) {
  char *q[RGBC_MAXOPS + 1];
  int64_t s[RGBC_MAXOPS + 1];
  q[0] = slot[o->out];
  s[0] = o->st[0];
  if (o->copy) {
    q[1] = slot[o->in[o->nin - 1]];
    s[1] = o->st[o->nin];
    o->loop(q, s, m, st);
    return;
  }
  int first = o->nary ? 2 : o->nin;
  for (int k = 0; k < first; k++) q[k + 1] = slot[o->in[k]], s[k + 1] = o->st[k + 1];
  o->loop(q, s, m, st);
  for (int k = 2; o->nary && k < o->nin; k++) { /* out = out op in[k] */
    q[1] = q[0], s[1] = s[0];
    q[2] = slot[o->in[k]], s[2] = o->st[k + 1];
    o->loop(q, s, m, st);
  }
}

static void set_non_seqs(run *r, plan *pl) {
  const rg_scan_info *s = &r->s;
  for (int k = 0; k < s->n_non_seqs; k++)
    pl->slot[r->p->in_cells[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)]] =
        rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k))->data;
}

int rgbc_scan_scalar(run *r) {
  plan pl = {0};
  int rc = make_plan(r, &pl);
  if (rc) {
    plan_free(&pl);
    return rc;
  }
  set_non_seqs(r, &pl);
  if ((rc = make_feeds(r, &pl))) {
    plan_free(&pl);
    return rc;
  }
  int32_t until = r->s.until ? r->p->out_cells[rg_scan_inner_out(&r->s, RG_SCAN_UNTIL, 0, 0)] : -1;
  rgbc_status st = {0};
  for (int64_t t = 0; t < r->n; t++) {
    place(&pl, t);
    for (int k = 0; k < pl.nops; k++) run_op(&pl.ops[k], pl.slot, pl.m, &st);
    r->steps = t + 1;
    if (until >= 0 && *(const uint8_t *)pl.slot[until]) break;
  }
  plan_free(&pl);
  return rgbc_status_error(r->x, &st) ? r->x->rt->errcode : 0;
}
