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
 * Everything else stays as it was: the memory plan treats the parts as
 * views of the joined value (plan.c), the release lists are made after
 * this pass, and programs run by demand (with ifelse) are left alone.
 */
#include "backend/backend-impl.h"
#include "base/base.h"

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

/* Folds join thunk j into composite thunk k: k writes j's cell. */
static bool fold(rgb_program *p, int32_t k, const rgb_thunk *j) {
  rgb_thunk *c = &p->thunks[k];
  int nout = c->node.nout;
  int32_t *slot = rg_malloc((size_t)nout * sizeof *slot);
  int32_t *cells = rg_malloc((size_t)(nout + 2) * sizeof *cells);
  rg_tensor ***outp = rg_malloc((size_t)(nout + 2) * sizeof *outp);
  rgb_vtype *types = rg_malloc((size_t)(nout + 1) * sizeof *types);
  if (!slot || !cells || !outp || !types) {
    rg_free(slot), rg_free(cells), rg_free(outp), rg_free(types);
    return false;
  }
  for (int o = 0; o < nout; o++) {
    slot[o] = -1;
    for (int i = 0; i < j->node.nin; i++)
      if (j->in_cells[i] == c->out_cells[o]) slot[o] = i;
  }
  memcpy(cells, c->out_cells, (size_t)nout * sizeof *cells);
  memcpy(outp, c->x.outp, (size_t)nout * sizeof *outp);
  memcpy(types, c->node.out, (size_t)nout * sizeof *types);
  cells[nout] = j->out_cells[0];
  outp[nout] = &p->cells[j->out_cells[0]];
  types[nout] = j->node.out[0];
  rg_free(c->out_cells), rg_free((void *)c->x.outp), rg_free((void *)c->node.out);
  c->out_cells = cells;
  c->x.outp = outp;
  c->node.out = types;
  c->node.join_slot = slot;
  c->node.join_axis = (int32_t)j->node.ints[0];
  c->node.nout = nout + 1;
  p->producer[j->out_cells[0]] = k;
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

bool rgb_join_into(rgb_program *p) {
  int32_t *readers = reader_counts(p);
  if (!readers) return false;
  bool ok = true;
  for (int32_t j = 0; j < p->nthunks && ok; j++) {
    int32_t k = foldable(p, &p->thunks[j], readers);
    if (k < 0) continue;
    ok = fold(p, k, &p->thunks[j]);
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
