/*
 * scan-scalar.c — Scan steps made only of scalars: a cumulative sum, a
 * scalar recurrence, Fibonacci.  The general loop (scan.c) pays per step
 * for the VM, a kernel's dispatch per node and a copy per output, which
 * dominates when each value is one element; here a step is a flat list of
 * typed elementwise loops run on one element each, as the composite
 * interpreter runs its blocks.
 *
 * A plan gives every cell of the inner program a slot (a pointer to its
 * element).  Before each step the slots of inner inputs are pointed at the
 * sequence elements and state rows of that step (no view, no copy), and
 * the slots of inner outputs at their trace rows, so each output is
 * written straight where the trace keeps it; other intermediates live in
 * a scratch word of their own.  The plan applies when every thunk is
 * elementwise over 0-d values whose loop reads its operands in their own
 * dtypes, every trace has 0-d rows, and every inner output is computed by
 * a thunk (not an input or constant passed through) and used once as an
 * output; else the general loop runs.
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
  feed *feeds;
  int nfeeds;
  char **slot;          /* per cell */
  int64_t *scratch;     /* per cell: one element */
  int32_t *out_trace;   /* per cell: the trace it is the output of, or -1 */
} plan;

static bool op_fits(const rgb_thunk *t, sop *o) {
  const rgb_node *n = &t->node;
  rgbc_ew_info info;
  if (n->inner || rgbc_ew_info_of(n, &info) || n->nout != 1 || n->out[0].ndim != 0) return false;
  for (int k = 0; k < n->nin; k++) {
    if (n->in[k].ndim != 0) return false;
    rg_dtype want = info.nary || info.copy ? info.in[0] : info.in[k];
    if (!info.copy && n->in[k].dtype != want) return false;
  }
  *o = (sop){info.loop, t->out_cells[0], n->nin, t->in_cells, info.copy, info.nary};
  return true;
}

/* The traces of the inner outputs: each produced by a thunk, used once. */
static bool map_outputs(run *r, plan *pl) {
  rgb_program *p = r->p;
  for (int32_t c = 0; c < p->ncells; c++) pl->out_trace[c] = -1;
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
static int check_traces(run *r) {
  rgb_program *p = r->p;
  for (int o = 0; o < r->ntr; o++) { /* every check before any allocation */
    trace *tr = &r->tr[o];
    const rgb_vtype *vt = &p->thunks[p->producer[p->out_cells[tr->first_out]]].node.out[0];
    if (tr->kind != RG_SCAN_NIT_SOT && (tr->buf->ndim != 1 || tr->buf->dtype != vt->dtype)) return 1;
  }
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    const rgb_vtype *vt = &p->thunks[p->producer[p->out_cells[tr->first_out]]].node.out[0];
    if (tr->kind != RG_SCAN_NIT_SOT) continue;
    int64_t rows = tr->rows;
    tr->buf = rg_tensor_empty(vt->dtype, 1, &rows);
    if (!tr->buf) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory for a trace of %lld rows", (long long)rows);
  }
  return 0;
}

static bool inputs_fit(run *r) {
  const rg_scan_info *s = &r->s;
  for (int k = 0; k < s->n_seqs; k++)
    if (rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_SEQ, k))->ndim != 1) return false;
  for (int k = 0; k < s->n_non_seqs; k++)
    if (rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k))->ndim != 0) return false;
  if (s->until) {
    int32_t c = r->p->out_cells[rg_scan_inner_out(s, RG_SCAN_UNTIL, 0, 0)];
    if (r->p->producer[c] < 0 || r->p->thunks[r->p->producer[c]].node.out[0].dtype != RG_BOOL) return false;
  }
  return true;
}

static void plan_free(plan *pl) {
  rg_free(pl->feeds);
  rg_free(pl->ops);
  rg_free(pl->slot);
  rg_free(pl->scratch);
  rg_free(pl->out_trace);
}

/* 1: not applicable; 0: planned; < 0: an error. */
static int make_plan(run *r, plan *pl) {
  rgb_program *p = r->p;
  if (p->lazy || !inputs_fit(r)) return 1;
  pl->ops = rg_malloc(((size_t)p->nthunks + 1) * sizeof *pl->ops);
  pl->slot = rg_calloc((size_t)p->ncells + 1, sizeof *pl->slot);
  pl->scratch = rg_calloc((size_t)p->ncells + 1, sizeof *pl->scratch);
  pl->out_trace = rg_malloc(((size_t)p->ncells + 1) * sizeof *pl->out_trace);
  if (!pl->ops || !pl->slot || !pl->scratch || !pl->out_trace)
    return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  for (int32_t k = 0; k < p->nthunks; k++)
    if (!op_fits(&p->thunks[k], &pl->ops[pl->nops++])) return 1;
  if (!map_outputs(r, pl)) return 1;
  for (int32_t k = 0; k < p->nconst; k++) {
    const rg_tensor *c = p->cells[p->const_cells[k]];
    if (c->ndim != 0) return 1;
    pl->slot[p->const_cells[k]] = c->data;
  }
  for (int32_t c = 0; c < p->ncells; c++)
    if (p->producer[c] >= 0 && pl->out_trace[c] < 0) pl->slot[c] = (char *)&pl->scratch[c];
  return check_traces(r);
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
    int64_t lo = s->seq_taps[k][0];
    for (int j = 1; j < nt; j++) lo = s->seq_taps[k][j] < lo ? s->seq_taps[k][j] : lo;
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

static void run_op(const sop *o, char **slot, rgbc_status *st) {
  static const int64_t zero[RGBC_MAXOPS];
  char *q[RGBC_MAXOPS];
  q[0] = slot[o->out];
  if (o->copy) {
    q[1] = slot[o->in[o->nin - 1]];
    o->loop(q, zero, 1, st);
    return;
  }
  int first = o->nary ? 2 : o->nin;
  for (int k = 0; k < first; k++) q[k + 1] = slot[o->in[k]];
  o->loop(q, zero, 1, st);
  for (int k = 2; o->nary && k < o->nin; k++) {
    q[1] = q[0];
    q[2] = slot[o->in[k]];
    o->loop(q, zero, 1, st);
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
    for (int k = 0; k < pl.nops; k++) run_op(&pl.ops[k], pl.slot, &st);
    r->steps = t + 1;
    if (until >= 0 && *(const uint8_t *)pl.slot[until]) break;
  }
  plan_free(&pl);
  return rgbc_status_error(r->x, &st) ? r->x->rt->errcode : 0;
}
