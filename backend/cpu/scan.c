/*
 * scan.c — running a Scan node on the CPU (semantics: relgraph/scan.h).
 *
 * The inner graph was linked once with the outer function (the node's
 * inner program); each step binds the inner inputs and runs it with
 * rgb_program_step, which neither links nor makes references: after the
 * first step every inner kernel finds its output buffer in its cell.
 *
 * Buffers.  Each state (mit-sot, sit-sot) lives in one contiguous buffer
 * of R rows, Aesara's layout: position p = t + ninit holds the state of
 * step t (ninit = -min tap rows of initial values before it), in row
 * p mod R.  With the whole trace kept, R = steps + ninit and nothing
 * wraps: the output is a view of rows ninit.. of the buffer, no copy.
 * With store_steps s, R = max(s, ninit + 1) (a step never overwrites a
 * row it reads) and the last min(s, steps) positions are copied out in
 * order at the end.  A nit-sot's buffer is allocated after the first
 * step, from the shape of its first value.  A mit-mot works on a copy of
 * its outer buffer, reading and writing rows t + tap - m, or on the buffer
 * itself when the node works in place (scan_inplace) and nothing else
 * holds it.
 *
 * Scalars.  A step whose values are all scalars and whose ops are all
 * elementwise runs without the VM (scan-scalar.c): each op's typed loop on
 * one element, reading the sequences and states in place and writing the
 * outputs straight into their trace rows.
 *
 * Views.  Every inner input that is a slice (a sequence tap, a state
 * tap) is one tensor header made before the loop; a step only moves its
 * data pointer.
 *
 * Devices.  The same executor runs a Scan placed on another backend
 * (rgbc_scan_with): its traces are allocated in the node's buffer type,
 * every copy into or out of them goes through the backend's copy, the
 * condition of an until loop is downloaded after each step, and the
 * inner graph was linked for that backend, so its kernels read the rows
 * in place.  n_steps and the nit-sot lengths stay on the host (shape
 * arguments).  The scalar path is the host's only; preallocation wraps
 * device rows of any size (a copy there is a kernel launch).
 *
 * Whole traces.  A Scan node may have outputs beyond its layout's
 * (rgb_node.full_of, made at link time by join-into.c): a sit-sot's
 * buffer from its initial row on, a view like the state's own output.
 *
 * Preallocation (Aesara's).  Before a step, the cell of an inner output
 * computed by an inner node holds a tensor wrapping the row of the trace
 * the step writes, so the node's kernel, which reuses the buffer in its
 * cell when it has the right shape, computes the value straight into the
 * trace.  A kernel that makes its output some other way (a view, an input
 * reused in place, another shape) replaces the tensor; that value is then
 * copied into its row (a memcpy for contiguous rows) after being checked
 * against the row's shape, as are outputs that are not preallocated:
 * mit-mots, outputs that are inner inputs or constants, a second output
 * of one variable, values made on another device than the trace's (a
 * device's step runs integer scalar arithmetic on the host), and rows
 * under PREALLOC_MIN_BYTES, where wrapping a row each step costs more
 * than the copy it saves.  The pool of released
 * buffers never takes a wrapped row (backend/runtime.c).
 */
#include "backend/cpu/scan-impl.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t zero_tap = 0, minus_one = -1;

#define PREALLOC_MIN_BYTES 4096

/* A new buffer where the node's outputs live. */
static rg_tensor *new_buffer(run *r, rg_dtype dt, int ndim, const int64_t *shape) {
  return r->copy ? rg_tensor_empty_on(r->x->buft, dt, ndim, shape) : rg_tensor_empty(dt, ndim, shape);
}

/* dst = src (one shape; on the host src may broadcast). */
static int copy_into(run *r, rg_tensor *dst, const rg_tensor *src) {
  return r->copy ? r->copy(r->x, dst, src) : rgbc_assign(r->x, dst, src, NULL);
}

/* A contiguous copy of t in the node's memory, or NULL. */
static rg_tensor *duplicate(run *r, const rg_tensor *t) {
  if (!r->copy) return rg_tensor_copy(t);
  rg_tensor *c = new_buffer(r, t->dtype, t->ndim, t->shape);
  if (c && copy_into(r, c, t)) rg_tensor_free(c), c = NULL;
  return c;
}

static int64_t row_bytes(const rg_tensor *t) {
  int64_t b = (int64_t)rg_dtype_size(t->dtype);
  for (int d = 1; d < t->ndim; d++) b *= t->shape[d];
  return b;
}

/* A header viewing row 0 of t (which has at least one row). */
static rg_tensor *row_view(run *r, const rg_tensor *t) {
  rg_tensor *v = rg_tensor_view(t, t->ndim - 1, t->shape + 1, t->strides + 1, 0);
  if (!v) rgb_error(r->x, RG_ERR_NOMEM, "out of memory for a view");
  return v;
}

/* ------------------------------------------------------------------ checks */

static int check_steps(run *r) {
  rgb_exec *x = r->x;
  for (int k = 0; k < r->s.n_seqs; k++) {
    const rg_tensor *q = rgb_in(x, rg_scan_outer_in(&r->s, RG_SCAN_SEQ, k));
    int nt = r->s.seq_ntaps[k];
    int64_t lo = rg_scan_tap_min(nt, r->s.seq_taps[k]), hi = rg_scan_tap_max(nt, r->s.seq_taps[k]);
    /* The op holds the rows the taps reach (the builder cut the others
     * off, so they count for nothing here) and, going backwards, the
     * taps negated: messages give the taps as the program wrote them. */
    int64_t ulo = r->s.go_backwards ? -hi : lo, uhi = r->s.go_backwards ? -lo : hi;
    /* a count made from a sequence too short for its taps is negative:
     * the sequence is the cause */
    if (r->n < 0 && q->shape[0] <= hi - lo)
      return rgb_error(x, RG_ERR_EVAL, "sequence %d is too short for its taps %lld..%lld: that leaves %lld steps",
                       k, (long long)ulo, (long long)uhi, (long long)r->n);
    if (r->n > 0 && q->shape[0] < r->n + hi - lo)
      return rgb_error(x, RG_ERR_EVAL, "sequence %d is too short for %lld steps with taps %lld..%lld", k,
                       (long long)r->n, (long long)ulo, (long long)uhi);
  }
  if (r->n < 0) return rgb_error(x, RG_ERR_EVAL, "n_steps is negative (%lld)", (long long)r->n);
  for (int k = 0; k < r->s.n_nit_sot; k++) {
    int64_t len = rgbc_scalar_i64(rgb_in(x, rg_scan_outer_in(&r->s, RG_SCAN_NIT_SOT, k)));
    if (len != r->n)
      return rgb_error(x, RG_ERR_EVAL, "the length of nit-sot %d is %lld, the number of steps "
                       "%lld", k, (long long)len, (long long)r->n);
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ buffers */

/* A trace's rows.  On the host they come from the output's cell
 * (rgb_output): the storage the previous call's trace left there, when
 * nobody holds it any more, else a pooled or new buffer; so a loop called
 * again does not fault in fresh pages for every trace. */
static int alloc_rows(run *r, trace *tr, rg_dtype dt, int rowdim, const int64_t *rowshape) {
  int64_t shape[RG_MAX_NDIM];
  shape[0] = tr->rows;
  memcpy(shape + 1, rowshape, (size_t)rowdim * sizeof *shape);
  if (r->copy) {
    tr->buf = new_buffer(r, dt, rowdim + 1, shape);
  } else {
    rg_tensor *cell = rgb_output(r->x, tr->out, dt, rowdim + 1, shape);
    tr->buf = cell ? rg_tensor_ref(cell) : NULL;
  }
  if (!tr->buf) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory for a trace of %lld rows", (long long)tr->rows);
  return RG_OK;
}

/* A state: rows for its trace, the initial values in positions 0..ninit. */
static int init_state(run *r, trace *tr) {
  const rg_tensor *init = rgb_in(r->x, rg_scan_outer_in(&r->s, tr->kind, tr->k));
  tr->ninit = -rg_scan_tap_min(tr->ntaps, tr->taps);
  bool sit = tr->kind == RG_SCAN_SIT_SOT;
  if (!sit && init->shape[0] < tr->ninit)
    return rgb_error(r->x, RG_ERR_EVAL, "mit-sot state %d needs %lld initial rows, got %lld", tr->k,
                     (long long)tr->ninit, (long long)init->shape[0]);
  int64_t all = r->n + tr->ninit;
  tr->rows = all;
  if (tr->keep > 0) {
    int64_t want = tr->keep > tr->ninit + 1 ? tr->keep : tr->ninit + 1;
    tr->rows = want < all ? want : all;
  }
  tr->wrap = tr->rows < all;
  int rowdim = sit ? init->ndim : init->ndim - 1;
  const int64_t *rowshape = sit ? init->shape : init->shape + 1;
  if (alloc_rows(r, tr, init->dtype, rowdim, rowshape)) return r->x->rt->errcode;
  if (sit) {
    rg_tensor *h0 = row_view(r, tr->buf);
    int rc = h0 ? copy_into(r, h0, init) : r->x->rt->errcode;
    rg_tensor_free(h0);
    return rc;
  }
  int64_t shape[RG_MAX_NDIM];
  memcpy(shape, init->shape, (size_t)init->ndim * sizeof *shape);
  shape[0] = tr->ninit;
  rg_tensor *head = rg_tensor_view(tr->buf, init->ndim, shape, tr->buf->strides, 0);
  rg_tensor *src = rg_tensor_view(init, init->ndim, shape, init->strides, 0);
  int rc = head && src ? copy_into(r, head, src) : rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  rg_tensor_free(head);
  rg_tensor_free(src);
  return rc;
}

static int init_mit_mot(run *r, trace *tr) {
  const rg_tensor *b = rgb_in(r->x, rg_scan_outer_in(&r->s, RG_SCAN_MIT_MOT, tr->k));
  int64_t lo = rg_scan_tap_min(tr->ntaps, tr->taps), hi = rg_scan_tap_max(tr->ntaps, tr->taps);
  int64_t olo = rg_scan_tap_min(tr->nout, tr->out_taps), ohi = rg_scan_tap_max(tr->nout, tr->out_taps);
  lo = olo < lo ? olo : lo, hi = ohi > hi ? ohi : hi;
  tr->ninit = -lo;
  tr->rows = b->shape[0];
  if (r->n > 0 && b->shape[0] < r->n + hi - lo)
    return rgb_error(r->x, RG_ERR_EVAL, "mit-mot %d has %lld rows: %lld steps with taps %lld..%lld "
                     "need %lld", tr->k, (long long)b->shape[0], (long long)r->n, (long long)lo,
                     (long long)hi, (long long)(r->n + hi - lo));
  /* in place (scan_inplace; the linker made sure the buffer is computed by
   * the program): the outer buffer itself, when nothing else holds it */
  bool own = r->x->node->inplace >= 0 && rg_storage_refcount(b) == 1 && rg_tensor_is_c_contiguous(b);
  tr->buf = own ? rg_tensor_ref(b) : duplicate(r, b);
  return tr->buf ? RG_OK : rgb_error(r->x, RG_ERR_NOMEM, "out of memory for a mit-mot buffer");
}

/* The traces in outer output order, with their taps and positions. */
static int make_traces(run *r) {
  const rg_scan_info *s = &r->s;
  r->ntr = rg_scan_n_outer_out(s);
  r->tr = rg_calloc((size_t)r->ntr + 1, sizeof *r->tr);
  if (!r->tr) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      int o = rg_scan_outer_out(s, kind, k);
      trace *tr = &r->tr[o];
      *tr = (trace){.kind = kind, .k = k, .out = o, .ntaps = 1, .taps = &minus_one, .nout = 1,
                    .out_taps = &zero_tap, .first_in = rg_scan_inner_in(s, kind, k, 0),
                    .first_out = rg_scan_inner_out(s, kind, k, 0)};
      int store_at = kind == RG_SCAN_MIT_SOT ? k : kind == RG_SCAN_SIT_SOT ? s->n_mit_sot + k
                                                                         : s->n_mit_sot + s->n_sit_sot + k;
      if (kind != RG_SCAN_MIT_MOT) tr->keep = s->store_steps[store_at];
      if (kind == RG_SCAN_MIT_SOT) tr->ntaps = s->mit_sot_ntaps[k], tr->taps = s->mit_sot_taps[k];
      if (kind == RG_SCAN_MIT_MOT) {
        tr->ntaps = s->mit_mot_nin[k], tr->taps = s->mit_mot_in_taps[k];
        tr->nout = s->mit_mot_nout[k], tr->out_taps = s->mit_mot_out_taps[k];
      }
      int rc = kind == RG_SCAN_MIT_MOT ? init_mit_mot(r, tr)
               : kind == RG_SCAN_NIT_SOT ? RG_OK : init_state(r, tr);
      if (kind == RG_SCAN_NIT_SOT) {
        tr->rows = tr->keep > 0 && tr->keep < r->n ? tr->keep : r->n;
        tr->wrap = tr->rows < r->n;
      }
      if (rc) return rc;
    }
  return RG_OK;
}

/* ------------------------------------------------------------------ inner inputs */

static int make_inputs(run *r) {
  const rg_scan_info *s = &r->s;
  r->nin = rg_scan_n_inner_in(s);
  r->in = rg_calloc((size_t)r->nin + 1, sizeof *r->in);
  r->own = rg_calloc((size_t)r->nin + 1, sizeof *r->own);
  if (!r->in || !r->own) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  for (int k = 0; k < s->n_seqs; k++)
    for (int j = 0; j < s->seq_ntaps[k]; j++) {
      int i = rg_scan_inner_in(s, RG_SCAN_SEQ, k, j);
      if (!(r->in[i] = row_view(r, rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_SEQ, k))))) return r->x->rt->errcode;
      r->own[i] = true;
    }
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    for (int j = 0; tr->kind != RG_SCAN_NIT_SOT && j < tr->ntaps; j++) {
      int i = tr->first_in + j;
      if (!(r->in[i] = row_view(r, tr->buf))) return r->x->rt->errcode;
      r->own[i] = true;
    }
  }
  for (int k = 0; k < s->n_non_seqs; k++)
    r->in[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)] = rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k));
  return RG_OK;
}


/* Points every slice at step t. */
static void place_inputs(run *r, int64_t t) {
  const rg_scan_info *s = &r->s;
  for (int k = 0; k < s->n_seqs; k++) {
    const rg_tensor *q = rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_SEQ, k));
    int nt = s->seq_ntaps[k];
    int64_t lo = rg_scan_tap_min(nt, s->seq_taps[k]);
    for (int j = 0; j < nt; j++) {
      int64_t row = t + s->seq_taps[k][j] - lo;
      if (s->go_backwards) row = q->shape[0] - 1 - row;
      r->in[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)]->data = q->data + row * q->strides[0];
    }
  }
  for (int o = 0; o < r->ntr; o++) {
    const trace *tr = &r->tr[o];
    if (tr->kind == RG_SCAN_NIT_SOT) continue;
    for (int j = 0; j < tr->ntaps; j++)
      r->in[tr->first_in + j]->data = tr->buf->data + rgbc_wrap_row(tr, t + tr->ninit + tr->taps[j]) * tr->buf->strides[0];
  }
}

/* ------------------------------------------------------------------ preallocation */

/* Which outputs are computed in place: the cell of an inner output made
 * by an inner node, the first trace using it, not a mit-mot. */
static void plan_prealloc(run *r) {
  const rgb_program *p = r->p;
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    int32_t c = p->out_cells[tr->first_out];
    tr->out_cell = -1;
    if (tr->kind == RG_SCAN_MIT_MOT || p->producer[c] < 0) continue;
    bool taken = false;
    for (int q = 0; q < o && !taken; q++) taken = r->tr[q].out_cell == c;
    if (!taken) tr->out_cell = c;
  }
}

/* Takes our row tensor back out of its cell, if it is still there. */
static void unbind_row(run *r, trace *tr) {
  rgb_program_unbind_output(r->p, tr->first_out, tr->row_out, tr->row_data);
  tr->row_out = NULL;
}

/* Puts a tensor wrapping the row of step t in the cell of each
 * preallocated output whose buffer exists. */
static int bind_rows(run *r, int64_t t) {
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    if (tr->out_cell < 0 || !tr->buf || (!r->copy && row_bytes(tr->buf) < PREALLOC_MIN_BYTES)) continue;
    /* a value made on another device (integer scalars run on the host)
     * cannot be written into the trace's memory by its kernel */
    if (r->p->cell_dev[tr->out_cell] != rg_tensor_device(tr->buf)) continue;
    unbind_row(r, tr);
    int64_t row = tr->kind == RG_SCAN_NIT_SOT ? rgbc_wrap_row(tr, t) : rgbc_wrap_row(tr, t + tr->ninit);
    const rg_tensor *b = tr->buf;
    tr->row_data = b->data + row * b->strides[0];
    tr->row_out = rgb_program_bind_output(r->p, tr->first_out, r->copy ? r->x->buft : NULL, b->dtype,
                                          b->ndim - 1, b->shape + 1,
                                          b->strides + 1, b->data + row * b->strides[0],
                                          (size_t)row_bytes(b));
    if (!tr->row_out) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  }
  return RG_OK;
}

static void unbind_rows(run *r) {
  for (int o = 0; r->tr && o < r->ntr; o++)
    if (r->tr[o].out_cell >= 0) unbind_row(r, &r->tr[o]);
}

/* ------------------------------------------------------------------ a step's outputs */

static bool same_row_shape(const rg_tensor *buf, const rg_tensor *v) {
  if (v->ndim != buf->ndim - 1) return false;
  for (int d = 0; d < v->ndim; d++)
    if (v->shape[d] != buf->shape[d + 1]) return false;
  return true;
}

static int store(run *r, trace *tr, const rg_tensor *v, int64_t row, int64_t t) {
  if (!same_row_shape(tr->buf, v)) {
    char a[256], b[256];
    return rgb_error(r->x, RG_ERR_EVAL, "step %lld: output %d has shape %s, its trace's rows are %s",
                     (long long)t, tr->out, rg_shape_str(v->ndim, v->shape, a, sizeof a),
                     rg_shape_str(tr->buf->ndim - 1, tr->buf->shape + 1, b, sizeof b));
  }
  char *to = tr->buf->data + row * tr->buf->strides[0];
  if (to == v->data && v->dtype == tr->buf->dtype && rg_tensor_is_c_contiguous(v)) return RG_OK; /* the row itself */
  if (!r->copy && v->dtype == tr->buf->dtype && rg_tensor_is_c_contiguous(v)) {
    memcpy(to, v->data, (size_t)row_bytes(tr->buf));
    return RG_OK;
  }
  rg_tensor *d = &r->dst;
  d->dtype = tr->buf->dtype;
  d->ndim = tr->buf->ndim - 1;
  memcpy(d->shape, tr->buf->shape + 1, (size_t)d->ndim * sizeof(int64_t));
  memcpy(d->strides, tr->buf->strides + 1, (size_t)d->ndim * sizeof(int64_t));
  d->data = to;
  d->storage = tr->buf->storage;
  return copy_into(r, d, v);
}

static int first_nit_sot(run *r, trace *tr, const rg_tensor *v) {
  return alloc_rows(r, tr, v->dtype, v->ndim, v->shape);
}

/* Whether v's data lies in the buffer (an output that is a view of a
 * row the step read). */
static bool inside(const rg_tensor *buf, const rg_tensor *v) {
  const char *lo = buf->data, *hi = lo + buf->shape[0] * buf->strides[0];
  return buf->shape[0] > 0 && v->data >= lo && v->data < hi;
}

/* A mit-mot writing several rows reads them all first: an output that is
 * a view of one of its rows is copied before any row is written. */
static int store_mit_mot(run *r, trace *tr, int64_t t) {
  rgb_program *p = r->p;
  rg_tensor *tmp[tr->nout];
  int rc = RG_OK;
  for (int j = 0; j < tr->nout; j++) {
    const rg_tensor *v = p->cells[p->out_cells[tr->first_out + j]];
    tmp[j] = v && tr->nout > 1 && inside(tr->buf, v) ? duplicate(r, v) : NULL;
  }
  for (int j = 0; j < tr->nout && rc == RG_OK; j++) {
    const rg_tensor *v = tmp[j] ? tmp[j] : p->cells[p->out_cells[tr->first_out + j]];
    rc = v ? store(r, tr, v, rgbc_wrap_row(tr, t + tr->ninit + tr->out_taps[j]), t)
           : rgb_error(r->x, RG_ERR_EVAL, "step %lld: an inner output was not computed", (long long)t);
  }
  for (int j = 0; j < tr->nout; j++) rg_tensor_free(tmp[j]);
  return rc;
}

static int store_outputs(run *r, int64_t t) {
  rgb_program *p = r->p;
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    if (tr->kind == RG_SCAN_MIT_MOT) {
      int rc = store_mit_mot(r, tr, t);
      if (rc) return rc;
      continue;
    }
    const rg_tensor *v = p->cells[p->out_cells[tr->first_out]];
    if (!v) return rgb_error(r->x, RG_ERR_EVAL, "step %lld: an inner output was not computed", (long long)t);
    if (!tr->buf && first_nit_sot(r, tr, v)) return r->x->rt->errcode;
    int64_t row = tr->kind == RG_SCAN_NIT_SOT ? rgbc_wrap_row(tr, t) : rgbc_wrap_row(tr, t + tr->ninit);
    int rc = store(r, tr, v, row, t);
    if (rc) return rc;
  }
  return RG_OK;
}

/* 1 when the loop stops after this step, 0 when not, or an error. */
static int until_holds(run *r) {
  if (!r->s.until) return 0;
  const rg_tensor *c = r->p->cells[r->p->out_cells[rg_scan_inner_out(&r->s, RG_SCAN_UNTIL, 0, 0)]];
  if (!c) return 0;
  if (rg_tensor_device(c) == RG_DEVICE_HOST) return rgbc_scalar_f64(c) != 0;
  rg_tensor *h = rg_tensor_to_host(c); /* the host decides: a wait for the device */
  if (!h) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
  int stop = rgbc_scalar_f64(h) != 0;
  rg_tensor_free(h);
  return stop;
}

static int loop(run *r) {
  plan_prealloc(r);
  for (int64_t t = 0; t < r->n; t++) {
    place_inputs(r, t);
    int rc = bind_rows(r, t);
    if (rc) return rc;
    rc = rgb_program_step(r->p, r->in);
    if (rc) {
      rgb_program_unbind(r->p);
      return rgb_error(r->x, rc, "step %lld: %s", (long long)t,
                       r->p->rt->err[0] ? r->p->rt->err : "the inner graph failed");
    }
    rc = store_outputs(r, t);
    int stop = rc == RG_OK ? until_holds(r) : 0;
    rgb_program_unbind(r->p);
    if (rc) return rc;
    if (stop < 0) return stop;
    r->steps = t + 1;
    if (stop) break;
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ outer outputs */

/* A row of zeros of t's rows' type, in t's memory (host or device). */
static rg_tensor *zero_row(const rg_tensor *t) {
  rg_tensor *z = rg_tensor_new(t->dtype, t->ndim - 1, t->shape + 1);
  const rg_buffer_type *bt = rg_tensor_buffer_type(t);
  if (!z || !bt) return z;
  rg_tensor *d = rg_tensor_empty_on(bt, t->dtype, t->ndim - 1, t->shape + 1);
  if (d && rg_tensor_copy_to(d, z) != RG_OK) rg_tensor_free(d), d = NULL;
  rg_tensor_free(z);
  return d;
}

/* Row `row` of buffer b (a view), or a row of zeros where b has none. */
static rg_tensor *probe_row(const rg_tensor *b, int64_t row) {
  if (row >= 0 && row < b->shape[0]) return rg_tensor_view(b, b->ndim - 1, b->shape + 1, b->strides + 1, row * b->strides[0]);
  return zero_row(b);
}

/* The inner inputs of a step 0 that is not taken: the rows it would read
 * where they exist (states' initial rows, a mit-mot's buffer), zeros
 * where not (a loop of no steps may have no sequence rows to read), the
 * non-sequences; in[i] is ours where own[i].  False when out of memory. */
static bool probe_inputs(run *r, rg_tensor **in, bool *own) {
  const rg_scan_info *s = &r->s;
  for (int k = 0; k < s->n_seqs; k++) {
    const rg_tensor *q = rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_SEQ, k));
    for (int j = 0; j < s->seq_ntaps[k]; j++) {
      int i = rg_scan_inner_in(s, RG_SCAN_SEQ, k, j);
      own[i] = true;
      if (!(in[i] = zero_row(q))) return false;
    }
  }
  for (int o = 0; o < r->ntr; o++) {
    const trace *tr = &r->tr[o];
    if (tr->kind == RG_SCAN_NIT_SOT) continue;
    if (!tr->buf) return false;
    for (int j = 0; j < tr->ntaps; j++) {
      own[tr->first_in + j] = true;
      if (!(in[tr->first_in + j] = probe_row(tr->buf, rgbc_wrap_row(tr, tr->ninit + tr->taps[j])))) return false;
    }
  }
  for (int k = 0; k < s->n_non_seqs; k++)
    in[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)] = (rg_tensor *)rgb_in(r->x, rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k));
  return true;
}

/* The row shape of nit-sot tr when no step ran and its type leaves sizes
 * unknown: one step is run (where the loop runs) on probe_inputs and its
 * output's shape read, the values dropped.  False when that step cannot
 * run or fails (the caller then takes unknown sizes as 0). */
static bool probe_row_shape(run *r, const trace *tr, int ndim, int64_t *shape) {
  int nin = rg_scan_n_inner_in(&r->s);
  rg_tensor **in = rg_calloc((size_t)nin + 1, sizeof *in);
  bool *own = rg_calloc((size_t)nin + 1, sizeof *own), found = false;
  if (in && own && probe_inputs(r, in, own)) {
    rgb_program *p = r->p;
    if (rgb_program_step(p, in) == RG_OK) {
      const rg_tensor *v = p->cells[p->out_cells[tr->first_out]];
      if ((found = v && v->ndim == ndim - 1)) memcpy(shape + 1, v->shape, (size_t)v->ndim * sizeof *shape);
    }
    p->rt->errcode = 0;
    p->rt->err[0] = 0;
    rgb_program_unbind(p);
  }
  for (int i = 0; in && own && i < nin; i++)
    if (own[i]) rg_tensor_free(in[i]);
  rg_free(in);
  rg_free(own);
  return found;
}

/* A nit-sot that never ran: zero rows, the row shape its type gives, or
 * where that leaves sizes unknown the one a step would give (Aesara gives
 * 0 there: a trace of shape (0, 0) for rows of 3, which its readers then
 * refuse), else 0. */
static int empty_nit_sot(run *r, trace *tr) {
  const rgb_vtype *vt = &r->x->node->out[tr->out];
  int64_t shape[RG_MAX_NDIM];
  shape[0] = 0;
  bool unknown = false;
  for (int d = 1; d < vt->ndim; d++) unknown |= vt->shape[d] < 0;
  if (!unknown || !probe_row_shape(r, tr, vt->ndim, shape))
    for (int d = 1; d < vt->ndim; d++) shape[d] = vt->shape[d] >= 0 ? vt->shape[d] : 0;
  tr->rows = 0;
  tr->buf = new_buffer(r, vt->dtype, vt->ndim, shape);
  return tr->buf ? RG_OK : rgb_error(r->x, RG_ERR_NOMEM, "out of memory");
}

/* The last `count` positions ending before `end`, in order. */
static rg_tensor *trace_out(run *r, trace *tr, int64_t end, int64_t count) {
  rg_tensor *b = tr->buf;
  int64_t shape[RG_MAX_NDIM];
  memcpy(shape, b->shape, (size_t)b->ndim * sizeof *shape);
  shape[0] = count;
  int64_t first = end - count;
  if (!tr->wrap || count == 0) return rg_tensor_view(b, b->ndim, shape, b->strides, count ? first * b->strides[0] : 0);
  rg_tensor *out = new_buffer(r, b->dtype, b->ndim, shape);
  int64_t rb = row_bytes(b);
  for (int64_t i = 0; out && i < count; i++) {
    if (!r->copy) {
      memcpy(out->data + i * rb, b->data + rgbc_wrap_row(tr, first + i) * b->strides[0], (size_t)rb);
      continue;
    }
    rg_tensor *to = rg_tensor_view(out, b->ndim - 1, shape + 1, out->strides + 1, i * out->strides[0]);
    rg_tensor *from = rg_tensor_view(b, b->ndim - 1, b->shape + 1, b->strides + 1,
                                     rgbc_wrap_row(tr, first + i) * b->strides[0]);
    int rc = to && from ? copy_into(r, to, from) : RG_ERR_NOMEM;
    rg_tensor_free(to);
    rg_tensor_free(from);
    if (rc) rg_tensor_free(out), out = NULL;
  }
  return out;
}

static int set_outputs(run *r) {
  for (int o = 0; o < r->ntr; o++) {
    trace *tr = &r->tr[o];
    if (!tr->buf && empty_nit_sot(r, tr)) return r->x->rt->errcode;
    rg_tensor *v;
    if (tr->kind == RG_SCAN_MIT_MOT) {
      v = rg_tensor_ref(tr->buf);
    } else {
      int64_t start = tr->kind == RG_SCAN_NIT_SOT ? 0 : tr->ninit;
      int64_t count = tr->keep > 0 && tr->keep < r->steps ? tr->keep : r->steps;
      v = trace_out(r, tr, start + r->steps, count);
    }
    if (!v) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory for output %d", o);
    rgb_set_output(r->x, o, v);
  }
  /* whole traces with their initial rows (join-into.c: only of sit-sots
   * that keep every step, so nothing wrapped) */
  const rgb_node *n = r->x->node;
  for (int i = 0; i < n->nfull; i++) {
    trace *tr = &r->tr[n->full_of[i]];
    if (tr->wrap) return rgb_error(r->x, RG_ERR_TYPE, "output %d: the trace of a state that keeps only its last steps", n->nout - n->nfull + i);
    rg_tensor *v = trace_out(r, tr, tr->ninit + r->steps, tr->ninit + r->steps);
    if (!v) return rgb_error(r->x, RG_ERR_NOMEM, "out of memory for output %d", n->nout - n->nfull + i);
    rgb_set_output(r->x, n->nout - n->nfull + i, v);
  }
  return RG_OK;
}

static void run_free(run *r) {
  unbind_rows(r);
  for (int i = 0; r->in && r->own && i < r->nin; i++)
    if (r->own[i]) rg_tensor_free(r->in[i]);
  for (int o = 0; r->tr && o < r->ntr; o++) rg_tensor_free(r->tr[o].buf);
  rg_free(r->in);
  rg_free(r->own);
  rg_free(r->tr);
  rg_free(r);
}

int rgb_cpu_scan(rgb_exec *x) { return rgbc_scan_with(x, NULL); }

int rgbc_scan_with(rgb_exec *x, rgbc_copy_fn copy) {
  const rgb_node *n = x->node;
  if (!n->inner) return rgb_error(x, RG_ERR_TYPE, "the inner graph is not linked");
  char scratch[RG_SCAN_SCRATCH(n->nints)];
  run *r = rg_calloc(1, sizeof *r);
  if (!r) return rgb_error(x, RG_ERR_NOMEM, "out of memory");
  r->x = x;
  r->p = n->inner;
  r->copy = x->buft ? copy : NULL;
  int rc = RG_OK;
  if (!rg_scan_info_decode(n->nints, n->ints, &r->s, scratch))
    rc = rgb_error(x, RG_ERR_TYPE, "malformed scan parameters");
  if (rc == RG_OK) {
    r->n = rgbc_scalar_i64(rgb_in(x, 0));
    rc = check_steps(r);
  }
  if (rc == RG_OK) rc = make_traces(r);
  if (rc == RG_OK && r->n > 0) rc = make_inputs(r);
  if (rc == RG_OK) {
    int fast = r->n > 0 && !r->copy ? rgbc_scan_scalar(r) : 1;
    rc = fast == 1 ? loop(r) : fast;
  }
  if (rc == RG_OK) rc = set_outputs(r);
  run_free(r);
  return rc;
}
