/*
 * iter.c — strided iteration plans and run-time broadcasting.
 *
 * A plan (cpu-impl.h) reduces an n-dimensional walk over several operands
 * to as few dimensions as their strides allow: size-1 dimensions go, the
 * remaining ones are ordered by the memory order of a key operand, and
 * neighbours that every operand steps through uniformly merge.  Running a
 * range [lo, hi) decodes lo into a multi-index once, then calls the loop
 * on each row (the innermost dimension) and carries the index like an
 * odometer: no recursion, no per-element work outside the loop.
 *
 * Broadcasting follows the static rule of graph.h: a dimension stretches
 * only where the input's static type says size 1; two run-time sizes that
 * differ anywhere else are an error naming both shapes.
 */
#include "backend/cpu/cpu-impl.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ plans */

static int64_t iabs64(int64_t v) { return v < 0 ? -v : v; }

/* Orders dims[0..n) by decreasing |stride| of operand key (stable). */
static void order_dims(int *dims, int n, const int64_t *key_strides) {
  for (int i = 1; i < n; i++) {
    int d = dims[i], j = i;
    while (j > 0 && iabs64(key_strides[dims[j - 1]]) < iabs64(key_strides[d])) {
      dims[j] = dims[j - 1];
      j--;
    }
    dims[j] = d;
  }
}

/* Whether merged dimension m (outer) and original dimension d (inner) can
 * be one dimension for every operand. */
static bool mergeable(const rgbc_plan *pl, int m, const int64_t *const *strides, int d,
                      int64_t size_d) {
  for (int k = 0; k < pl->nop; k++)
    if (pl->st[k][m] != strides[k][d] * size_d) return false;
  return true;
}

void rgbc_plan_init(rgbc_plan *pl, int nop, int ndim, const int64_t *shape, char *const *base,
                    const int64_t *const *strides, int key) {
  pl->nop = nop;
  pl->total = 1;
  int dims[RG_MAX_NDIM], n = 0;
  for (int d = 0; d < ndim; d++) {
    pl->total *= shape[d];
    if (shape[d] != 1) dims[n++] = d;
  }
  for (int k = 0; k < nop; k++) pl->base[k] = base[k];
  if (key >= 0) order_dims(dims, n, strides[key]);
  int m = 0;
  for (int i = 0; i < n; i++) {
    int d = dims[i];
    if (m > 0 && mergeable(pl, m - 1, strides, d, shape[d])) {
      pl->shape[m - 1] *= shape[d];
      for (int k = 0; k < nop; k++) pl->st[k][m - 1] = strides[k][d];
      continue;
    }
    pl->shape[m] = shape[d];
    for (int k = 0; k < nop; k++) pl->st[k][m] = strides[k][d];
    m++;
  }
  if (m == 0) {
    pl->shape[0] = 1;
    for (int k = 0; k < nop; k++) pl->st[k][0] = 0;
    m = 1;
  }
  pl->ndim = m;
}

void rgbc_plan_run(const rgbc_plan *pl, int64_t lo, int64_t hi, rgbc_loop fn, void *aux) {
  if (lo >= hi) return;
  const int nd = pl->ndim, nop = pl->nop, in = nd - 1;
  const int64_t inner = pl->shape[in];
  int64_t idx[RG_MAX_NDIM], rem = lo, s[RGBC_MAXOPS];
  char *p[RGBC_MAXOPS], *q[RGBC_MAXOPS];
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % pl->shape[d];
    rem /= pl->shape[d];
  }
  for (int k = 0; k < nop; k++) {
    p[k] = pl->base[k];
    for (int d = 0; d < nd; d++) p[k] += idx[d] * pl->st[k][d];
    s[k] = pl->st[k][in];
  }
  for (int64_t pos = lo;;) {
    int64_t cnt = inner - idx[in];
    if (cnt > hi - pos) cnt = hi - pos;
    for (int k = 0; k < nop; k++) q[k] = p[k];
    fn(q, s, cnt, aux);
    pos += cnt;
    if (pos >= hi) return;
    /* carry: the row is finished, so idx[in] + cnt == inner */
    for (int k = 0; k < nop; k++) p[k] -= idx[in] * s[k];
    idx[in] = 0;
    for (int d = in - 1; d >= 0; d--) {
      for (int k = 0; k < nop; k++) p[k] += pl->st[k][d];
      if (++idx[d] < pl->shape[d]) break;
      for (int k = 0; k < nop; k++) p[k] -= pl->shape[d] * pl->st[k][d];
      idx[d] = 0;
    }
  }
}

typedef struct plan_job {
  const rgbc_plan *pl;
  rgbc_loop fn;
  void *aux;
} plan_job;

static void plan_chunk(void *ud, int64_t lo, int64_t hi) {
  plan_job *j = ud;
  rgbc_plan_run(j->pl, lo, hi, j->fn, j->aux);
}

void rgbc_plan_run_parallel(rgb_exec *x, const rgbc_plan *pl, rgbc_loop fn, void *aux,
                            int64_t grain) {
  if (pl->total == 0) return;
  if (x->rt->nthreads <= 1 || pl->total < 2 * grain) {
    rgbc_plan_run(pl, 0, pl->total, fn, aux);
    return;
  }
  plan_job j = {pl, fn, aux};
  rgb_parallel_for(x, pl->total, grain, plan_chunk, &j);
}

/* ------------------------------------------------------------------ broadcasting */

static int shapes_error(rgb_exec *x, int n, const rg_tensor *const *t, int dim) {
  char list[512] = "", one[160];
  size_t len = 0;
  for (int i = 0; i < n && len < sizeof list; i++) {
    const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", sep,
                            rg_shape_str(t[i]->ndim, t[i]->shape, one, sizeof one));
  }
  return rgb_error(x, RG_ERR_TYPE, "shapes %s do not broadcast (dimension %d)", list, dim);
}

int rgbc_broadcast_shape(rgb_exec *x, int n, const rg_tensor *const *t, const rgb_vtype *vt,
                         int *ndim, int64_t *shape) {
  int nd = 0;
  for (int i = 0; i < n; i++) {
    if (t[i]->ndim != vt[i].ndim)
      return rgb_error(x, RG_ERR_TYPE, "input %d has %d dimensions, its type %d", i, t[i]->ndim,
                       vt[i].ndim);
    if (t[i]->ndim > nd) nd = t[i]->ndim;
  }
  for (int d = 0; d < nd; d++) {
    int64_t size = 1;
    bool known = false;
    for (int i = 0; i < n; i++) {
      int dd = d - (nd - t[i]->ndim);
      if (dd < 0) continue;
      int64_t s = t[i]->shape[dd];
      if (vt[i].shape[dd] == 1) {
        if (s != 1)
          return rgb_error(x, RG_ERR_TYPE, "input %d has size %lld in dimension %d, which its "
                           "type declares broadcastable (size 1)", i, (long long)s, dd);
        continue;
      }
      if (!known) {
        size = s;
        known = true;
      } else if (s != size) {
        return shapes_error(x, n, t, d);
      }
    }
    shape[d] = size;
  }
  *ndim = nd;
  return RG_OK;
}

void rgbc_broadcast_strides(const rg_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
  int off = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int dd = d - off;
    strides[d] = dd >= 0 && t->shape[dd] == shape[d] ? t->strides[dd] : 0;
  }
}

bool rgbc_fits(const rg_tensor *t, const rgb_vtype *vt, int ndim, const int64_t *shape) {
  if (t->ndim > ndim) return false;
  int off = ndim - t->ndim;
  for (int dd = 0; dd < t->ndim; dd++) {
    int64_t s = t->shape[dd];
    if (s == shape[dd + off]) continue;
    if (s != 1 || (vt && vt->shape[dd] != 1)) return false;
  }
  return true;
}
