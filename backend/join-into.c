/*
 * join-into.c — a join of a fused group's outputs as views: the group's
 * kernel writes each part straight into its place in the joined value.
 *
 * The LSTM's backward step computes the four gate gradients in one fused
 * kernel and joins them along axis 1 into the matrix its products read
 * (the fast-LSTM article: the join is a view at the group's border, not a
 * copy).  After linking, a join thunk whose inputs are distinct outputs
 * of one composite thunk on the same backend, each read by that join
 * alone and none a program output, is folded into the composite, where
 * the backend's composite kernels know how (joins_composites: the CPU's
 * and CUDA's; on a GPU the fold saves a copy kernel per part):
 *
 *   - the composite's node gets join_slot (per output of its inner graph:
 *     its place among the join's inputs, or -1) and join_axis, and one
 *     output more, the join's cell, which it now produces;
 *   - its kernel (backend/cpu/inner.c, backend/cuda/cuda.c) allocates the
 *     joined value and hands each part out as a strided view of it
 *     (rgb_joined_outputs, below), writing the part's rows where they
 *     belong; the part cells hold those views (nothing reads them);
 *   - the join's thunk leaves the schedule.
 *
 * The same pass folds a second kind of join: a state's whole trace with
 * its initial value in front, join{0}(dimshuffle{x,0,..}(h0), hs) for a
 * Scan's sit-sot output hs with initial value h0 (what the gradient of a
 * Scan reads: every state before each step).  The Scan keeps that state
 * in one buffer of steps + 1 rows, h0 first (backend/cpu/scan.c), so the
 * join is a view of it: the Scan's node gets full_of and one output more
 * per such join, and the join leaves the schedule.  The join's value
 * then shares storage with hs, so the fold requires that nothing
 * destroys either (or a view of either) and that no program output is the
 * join's value or a view of it.
 *
 * Everything else stays as it was: the memory plan treats the parts as
 * views of the joined value (plan.c), the release lists are made after
 * this pass, and programs run by demand (with ifelse) are left alone.
 */
#include "backend/backend-impl.h"
#include "base/base.h"
#include "relgraph/scan.h"

#include <string.h>

/* How many thunk inputs read each cell, program outputs counted. */
static int32_t *reader_counts(const rgb_program *p) {
  int32_t *n = rg_calloc((size_t)p->ncells + 1, sizeof *n);
  if (!n) return NULL;
  for (int32_t k = 0; k < p->nthunks; k++)
    for (int i = 0; i < p->thunks[k].node.nin; i++) n[p->thunks[k].in_cells[i]]++;
  for (int32_t i = 0; i < p->nout; i++) n[p->out_cells[i]]++;
  return n;
}

/* The composite thunk whose outputs join j reads, or -1 when the join
 * cannot become its views. */
static int32_t foldable(const rgb_program *p, const rgb_thunk *j, const int32_t *readers) {
  if (j->kind != RGB_T_KERNEL || j->node.code != RG_OP_JOIN || !j->backend ||
      !j->backend->iface->joins_composites || j->node.nin < 2 || j->node.nints < 1)
    return -1;
  int32_t k = p->producer[j->in_cells[0]];
  if (k < 0) return -1;
  const rgb_thunk *c = &p->thunks[k];
  if (c->kind != RGB_T_KERNEL || c->node.code != RG_OP_COMPOSITE || c->backend != j->backend ||
      c->node.join_slot || !c->node.inner || c->node.nout >= 64)
    return -1;
  int64_t axis = j->node.ints[0];
  for (int i = 0; i < j->node.nin; i++) {
    int32_t cell = j->in_cells[i];
    if (p->producer[cell] != k || readers[cell] != 1) return -1;
    for (int q = 0; q < i; q++)
      if (j->in_cells[q] == cell) return -1;
    int o = 0;
    while (o < c->node.nout && c->out_cells[o] != cell) o++;
    const rgb_vtype *t = &c->node.out[o];
    if (o == c->node.nout || t->dtype != j->node.out[0].dtype || axis < 0 || axis >= t->ndim) return -1;
  }
  return k;
}

/* Gives thunk t one output more, join j's value (t now computes j's
 * cell); false, t unchanged, when memory runs out. */
static bool take_join_output(rgb_program *p, rgb_thunk *t, const rgb_thunk *j) {
  int nout = t->node.nout;
  int32_t *cells = rg_malloc((size_t)(nout + 1) * sizeof *cells);
  rg_tensor ***outp = rg_malloc((size_t)(nout + 1) * sizeof *outp);
  rgb_vtype *types = rg_malloc((size_t)(nout + 1) * sizeof *types);
  if (!cells || !outp || !types) {
    rg_free(cells), rg_free(outp), rg_free(types);
    return false;
  }
  memcpy(cells, t->out_cells, (size_t)nout * sizeof *cells);
  memcpy(outp, t->x.outp, (size_t)nout * sizeof *outp);
  memcpy(types, t->node.out, (size_t)nout * sizeof *types);
  cells[nout] = j->out_cells[0];
  outp[nout] = &p->cells[j->out_cells[0]];
  types[nout] = j->node.out[0];
  rg_free(t->out_cells), rg_free((void *)t->x.outp), rg_free((void *)t->node.out);
  t->out_cells = cells;
  t->x.outp = outp;
  t->node.out = types;
  t->node.nout = nout + 1;
  p->producer[j->out_cells[0]] = (int32_t)(t - p->thunks);
  return true;
}

/* Folds join thunk j into composite thunk k: k writes j's cell. */
static bool fold(rgb_program *p, int32_t k, const rgb_thunk *j) {
  rgb_thunk *c = &p->thunks[k];
  int nout = c->node.nout;
  int32_t *slot = rg_malloc((size_t)nout * sizeof *slot);
  if (!slot) return false;
  for (int o = 0; o < nout; o++) {
    slot[o] = -1;
    for (int i = 0; i < j->node.nin; i++)
      if (j->in_cells[i] == c->out_cells[o]) slot[o] = i;
  }
  if (!take_join_output(p, c, j)) {
    rg_free(slot);
    return false;
  }
  c->node.join_slot = slot;
  c->node.join_axis = (int32_t)j->node.ints[0];
  return true;
}

/* Removes thunk j from the schedule; later thunks move down one place. */
static void drop_thunk(rgb_program *p, int32_t j) {
  rgb_thunk *t = &p->thunks[j];
  if (t->free_state) t->free_state(t->x.state);
  rgb_node_clear(&t->node);
  rg_free(t->in_cells), rg_free(t->out_cells), rg_free((void *)t->x.inp), rg_free((void *)t->x.outp);
  rg_free(t->release);
  memmove(t, t + 1, (size_t)(p->nthunks - j - 1) * sizeof *t);
  p->nthunks--;
  memset(&p->thunks[p->nthunks], 0, sizeof *p->thunks);
  for (int32_t k = j; k < p->nthunks; k++) p->thunks[k].x.node = &p->thunks[k].node;
  for (int32_t c = 0; c < p->ncells; c++)
    if (p->producer[c] > j) p->producer[c]--;
}

/* ------------------------------------------------------------------ a state's trace */

/* Whether cell c is cell root or a view of it (through the producers'
 * view inputs). */
static bool views_cell(const rgb_program *p, int32_t c, int32_t root) {
  for (int hops = 0; hops <= p->nthunks; hops++) {
    if (c == root) return true;
    int32_t k = p->producer[c];
    if (k < 0 || p->thunks[k].node.view_of < 0) return false;
    c = p->thunks[k].in_cells[p->thunks[k].node.view_of];
  }
  return false;
}

/* Whether some thunk overwrites cell a, cell b or a view of either. */
static bool destroyed(const rgb_program *p, int32_t a, int32_t b) {
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    if (t->node.inplace < 0) continue;
    int32_t c = t->in_cells[t->node.inplace];
    if (views_cell(p, c, a) || views_cell(p, c, b)) return true;
  }
  return false;
}

/* Whether thunk d adds one leading broadcastable dimension to its input,
 * keeping the others in order (dimshuffle{x,0,1,..}). */
static bool adds_leading_dim(const rgb_thunk *d) {
  if (d->kind != RGB_T_KERNEL || d->node.code != RG_OP_DIMSHUFFLE || d->node.nints < 1 || d->node.ints[0] != -1)
    return false;
  for (int i = 1; i < d->node.nints; i++)
    if (d->node.ints[i] != i - 1) return false;
  return true;
}

/* The Scan thunk whose whole sit-sot trace join j reads with its initial
 * value in front (*o: that outer output), or -1. */
static int32_t trace_foldable(const rgb_program *p, const rgb_thunk *j, int *o) {
  if (j->kind != RGB_T_KERNEL || j->node.code != RG_OP_JOIN || j->node.nin != 2 || j->node.nints < 1 ||
      j->node.ints[0] != 0)
    return -1;
  int32_t d = p->producer[j->in_cells[0]], k = p->producer[j->in_cells[1]];
  if (d < 0 || k < 0 || !adds_leading_dim(&p->thunks[d])) return -1;
  const rgb_thunk *s = &p->thunks[k];
  if (s->kind != RGB_T_KERNEL || s->node.code != RG_OP_SCAN || s->backend != j->backend) return -1;
  char scratch[RG_SCAN_SCRATCH(s->node.nints)];
  rg_scan_info si;
  if (!rg_scan_info_decode(s->node.nints, s->node.ints, &si, scratch)) return -1;
  for (int q = 0; q < si.n_sit_sot; q++) {
    int out = rg_scan_outer_out(&si, RG_SCAN_SIT_SOT, q);
    if (s->out_cells[out] != j->in_cells[1]) continue;
    if (si.store_steps && si.store_steps[si.n_mit_sot + q] != 0) return -1; /* not the whole trace */
    if (p->thunks[d].in_cells[0] != s->in_cells[rg_scan_outer_in(&si, RG_SCAN_SIT_SOT, q)]) return -1;
    for (int32_t i = 0; i < p->nout; i++) /* no output shares the Scan's buffer through it */
      if (views_cell(p, p->out_cells[i], j->out_cells[0])) return -1;
    if (destroyed(p, j->out_cells[0], j->in_cells[1])) return -1;
    *o = out;
    return k;
  }
  return -1;
}

/* Scan thunk k produces join j's value as one output more, the trace of
 * its outer output o. */
static bool fold_trace(rgb_program *p, int32_t k, const rgb_thunk *j, int o) {
  rgb_thunk *s = &p->thunks[k];
  int nfull = s->node.nfull;
  int32_t *full = rg_malloc((size_t)(nfull + 1) * sizeof *full);
  if (!full || !take_join_output(p, s, j)) {
    rg_free(full);
    return false;
  }
  if (nfull) memcpy(full, s->node.full_of, (size_t)nfull * sizeof *full);
  full[nfull] = o;
  rg_free(s->node.full_of);
  s->node.full_of = full;
  s->node.nfull = nfull + 1;
  return true;
}

bool rgb_join_into(rgb_program *p) {
  int32_t *readers = reader_counts(p);
  if (!readers) return false;
  bool ok = true;
  for (int32_t j = 0; j < p->nthunks && ok; j++) {
    int o = -1;
    int32_t k = foldable(p, &p->thunks[j], readers);
    if (k >= 0) ok = fold(p, k, &p->thunks[j]);
    else if ((k = trace_foldable(p, &p->thunks[j], &o)) >= 0) ok = fold_trace(p, k, &p->thunks[j], o);
    else continue;
    if (ok) drop_thunk(p, j--);
  }
  rg_free(readers);
  return ok;
}

int rgb_joined_outputs(rgb_exec *x, int nd, const int64_t *shape, int64_t *row, int *parts) {
  const rgb_node *n = x->node;
  int axis = n->join_axis, np = 0;
  for (int k = 0; k < n->nout - 1; k++) np += n->join_slot[k] >= 0;
  if (axis >= nd) return rgb_error(x, RG_ERR_TYPE, "join axis %d of values with %d dimensions", axis, nd);
  int64_t jshape[RG_MAX_NDIM];
  memcpy(jshape, shape, (size_t)nd * sizeof *jshape);
  jshape[axis] *= np;
  rg_tensor *all = rgb_output(x, n->nout - 1, n->out[n->nout - 1].dtype, nd, jshape);
  if (!all) return x->rt->errcode;
  int64_t r = 1;
  for (int d = axis; d < nd; d++) r *= shape[d];
  for (int k = 0; k < n->nout - 1; k++) {
    if (n->join_slot[k] < 0) continue;
    int64_t off = n->join_slot[k] * r * (int64_t)rg_dtype_size(all->dtype);
    rg_tensor *v = rg_tensor_view(all, nd, shape, all->strides, off);
    if (!v) return rgb_error(x, RG_ERR_NOMEM, "out of memory for a view of the joined output");
    rgb_set_output(x, k, v);
  }
  if (row) *row = r;
  if (parts) *parts = np;
  return RG_OK;
}
