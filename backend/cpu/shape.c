/*
 * shape.c — structure ops: dimshuffle, reshape, flatten, shape, shape_i,
 * alloc, alloc_empty, make_vector, join, split, subtensor, inc_subtensor,
 * set_subtensor and arange.
 *
 * Views.  dimshuffle, split and subtensor (integers and slices with
 * negative bounds and steps) always return views of their input: a new
 * header sharing the storage, never a copy.  reshape and flatten return a
 * view when the input's strides allow it (each group of old dimensions
 * that becomes a group of new ones is contiguous within itself, NumPy's
 * rule), and a C-contiguous copy otherwise.
 *
 * Run-time checks.  Everything the static types could not settle is
 * checked here, with NumPy's wording where NumPy has one: dimensions
 * dimshuffle drops must have size 1, reshape sizes must multiply to the
 * input's size (one may be -1), indices must be in range, slice steps
 * non-zero, split sizes must add up, joined inputs must agree outside the
 * axis, values assigned into a selection must broadcast to it (static
 * rule: only dimensions of static size 1 stretch).
 *
 * Subtensor indices follow Python: negative indices and slice bounds
 * count from the end, slice bounds are clipped to the dimension, a
 * negative step walks backwards.  inc_subtensor and set_subtensor write
 * into a copy of x, or into x itself when the node works in place and x's
 * storage is unshared.
 */
#include "backend/cpu/cpu-impl.h"

#include <math.h>
#include <stdio.h>

/* ------------------------------------------------------------------ helpers */

static void c_strides(int nd, const int64_t *shape, int64_t es, int64_t *st) {
  for (int d = nd - 1; d >= 0; d--) {
    st[d] = es;
    es *= shape[d] ? shape[d] : 1;
  }
}

/* Makes output j a view of t (shape, strides, byte offset from t->data). */
static int set_view(rgb_exec *x, int j, const rg_tensor *t, int nd, const int64_t *shape,
                    const int64_t *strides, int64_t offset) {
  rg_tensor *v = rg_tensor_view(t, nd, shape, strides, offset);
  if (!v) return rgb_error(x, RG_ERR_NOMEM, "out of memory (or a view outside its storage)");
  rgb_set_output(x, j, v);
  return RG_OK;
}

/* A header (not owning storage) for t's data seen with another shape and
 * strides; only for passing to loops. */
static rg_tensor header(const rg_tensor *t, int nd, const int64_t *shape, const int64_t *strides,
                        int64_t offset) {
  rg_tensor h = *t;
  h.ndim = nd;
  for (int d = 0; d < nd; d++) {
    h.shape[d] = shape[d];
    h.strides[d] = strides[d];
  }
  h.data = t->data + offset;
  return h;
}

static int check_rank(rgb_exec *x, int k) {
  const rg_tensor *t = rgb_in(x, k);
  if (t->ndim != x->node->in[k].ndim)
    return rgb_error(x, RG_ERR_TYPE, "input %d has %d dimensions, its type %d", k, t->ndim,
                     x->node->in[k].ndim);
  return RG_OK;
}

/* ------------------------------------------------------------------ dimshuffle */

int rgb_cpu_dimshuffle(rgb_exec *x) {
  const rgb_node *n = x->node;
  const rg_tensor *t = rgb_in(x, 0);
  if (check_rank(x, 0)) return x->rt->errcode;
  int64_t shape[RG_MAX_NDIM], st[RG_MAX_NDIM];
  bool used[RG_MAX_NDIM] = {0};
  for (int i = 0; i < n->nints; i++) {
    int64_t k = n->ints[i];
    shape[i] = k < 0 ? 1 : t->shape[k];
    st[i] = k < 0 ? 0 : t->strides[k];
    if (k >= 0) used[k] = true;
  }
  for (int d = 0; d < t->ndim; d++)
    if (!used[d] && t->shape[d] != 1)
      return rgb_error(x, RG_ERR_TYPE, "cannot drop dimension %d of size %lld (only size-1 "
                       "dimensions can be dropped)", d, (long long)t->shape[d]);
  return set_view(x, 0, t, n->nints, shape, st, 0);
}

/* ------------------------------------------------------------------ reshape, flatten */

/* Output 0 = t with shape ns: a view when possible, else a copy. */
static int reshape_to(rgb_exec *x, const rg_tensor *t, int nn, const int64_t *ns, rgbc_copy_fn copy) {
  int64_t nst[RG_MAX_NDIM];
  if (rg_reshape_strides(t->ndim, t->shape, t->strides, nn, ns, rgbc_size(t->dtype), nst))
    return set_view(x, 0, t, nn, ns, nst, 0);
  rg_tensor *out = rgb_output(x, 0, t->dtype, nn, ns);
  if (!out) return x->rt->errcode;
  int64_t cst[RG_MAX_NDIM];
  c_strides(t->ndim, t->shape, rgbc_size(t->dtype), cst);
  rg_tensor dst = header(out, t->ndim, t->shape, cst, 0);
  return copy(x, &dst, t);
}

int rgbc_copy_host(rgb_exec *x, rg_tensor *dst, const rg_tensor *src) {
  return rgbc_assign(x, dst, src, NULL);
}

int rgbc_reshape_with(rgb_exec *x, rgbc_copy_fn copy) {
  const rg_tensor *t = rgb_in(x, 0), *s = rgb_in(x, 1);
  int nn = (int)x->node->ints[0];
  if (s->ndim != 1 || s->shape[0] != nn)
    return rgb_error(x, RG_ERR_TYPE, "the shape has %lld elements, expected %d",
                     (long long)(s->ndim == 1 ? s->shape[0] : 0), nn);
  int64_t given[RG_MAX_NDIM], ns[RG_MAX_NDIM];
  for (int d = 0; d < nn; d++) rgbc_cast_one(s->dtype, s->data + d * s->strides[0], RG_INT64, &given[d]);
  const char *why = rg_reshape_sizes(t->ndim, t->shape, nn, given, NULL, ns);
  if (why) return rgb_error(x, RG_ERR_TYPE, "%s", why);
  return reshape_to(x, t, nn, ns, copy);
}

int rgb_cpu_reshape(rgb_exec *x) { return rgbc_reshape_with(x, rgbc_copy_host); }

int rgbc_flatten_with(rgb_exec *x, rgbc_copy_fn copy) {
  const rg_tensor *t = rgb_in(x, 0);
  int nn = (int)x->node->ints[0];
  if (t->ndim < nn)
    return rgb_error(x, RG_ERR_TYPE, "the input has %d dimensions, fewer than %d", t->ndim, nn);
  int64_t ns[RG_MAX_NDIM];
  for (int d = 0; d < nn - 1; d++) ns[d] = t->shape[d];
  ns[nn - 1] = rg_shape_numel(t->ndim - (nn - 1), t->shape + nn - 1);
  return reshape_to(x, t, nn, ns, copy);
}

int rgb_cpu_flatten(rgb_exec *x) { return rgbc_flatten_with(x, rgbc_copy_host); }

/* ------------------------------------------------------------------ shape, shape_i */

int rgb_cpu_shape(rgb_exec *x) {
  const rg_tensor *t = rgb_in(x, 0);
  int64_t nd = t->ndim;
  rg_tensor *out = rgb_output(x, 0, RG_INT64, 1, &nd);
  if (!out) return x->rt->errcode;
  for (int d = 0; d < t->ndim; d++) ((int64_t *)out->data)[d] = t->shape[d];
  return RG_OK;
}

int rgb_cpu_shape_i(rgb_exec *x) {
  const rg_tensor *t = rgb_in(x, 0);
  int64_t d = x->node->ints[0];
  if (d >= t->ndim)
    return rgb_error(x, RG_ERR_TYPE, "dimension %lld is out of range for an input with %d "
                     "dimensions", (long long)d, t->ndim);
  rg_tensor *out = rgb_output(x, 0, RG_INT64, 0, NULL);
  if (!out) return x->rt->errcode;
  *(int64_t *)out->data = t->shape[d];
  return RG_OK;
}

/* ------------------------------------------------------------------ alloc, alloc_empty, make_vector */

/* The shape given by scalar inputs [first, nin). */
static int dims_from_inputs(rgb_exec *x, int first, int64_t *shape) {
  for (int k = first; k < x->node->nin; k++) {
    shape[k - first] = rgbc_scalar_i64(rgb_in(x, k));
    if (shape[k - first] < 0)
      return rgb_error(x, RG_ERR_TYPE, "negative dimension %lld", (long long)shape[k - first]);
  }
  return RG_OK;
}

int rgbc_alloc_shape(rgb_exec *x, int64_t *shape) {
  const rgb_node *n = x->node;
  if (n->code == RG_OP_ALLOC_EMPTY) return dims_from_inputs(x, 0, shape);
  const rg_tensor *v = rgb_in(x, 0);
  int nd = n->nin - 1;
  if (dims_from_inputs(x, 1, shape) || check_rank(x, 0)) return x->rt->errcode;
  char a[160], b[160];
  if (!rgbc_fits(v, &n->in[0], nd, shape))
    return rgb_error(x, RG_ERR_TYPE, "the value of shape %s does not broadcast to %s",
                     rg_shape_str(v->ndim, v->shape, a, sizeof a),
                     rg_shape_str(nd, shape, b, sizeof b));
  return RG_OK;
}

int rgb_cpu_alloc(rgb_exec *x) {
  const rgb_node *n = x->node;
  int64_t shape[RG_MAX_NDIM];
  if (rgbc_alloc_shape(x, shape)) return x->rt->errcode;
  rg_tensor *out = rgb_output(x, 0, n->out[0].dtype, n->nin - 1, shape);
  if (!out) return x->rt->errcode;
  return rgbc_assign(x, out, rgb_in(x, 0), &n->in[0]);
}

int rgb_cpu_alloc_empty(rgb_exec *x) {
  int64_t shape[RG_MAX_NDIM];
  if (rgbc_alloc_shape(x, shape)) return x->rt->errcode;
  return rgb_output(x, 0, x->node->dtype, x->node->nin, shape) ? RG_OK : x->rt->errcode;
}

int rgb_cpu_make_vector(rgb_exec *x) {
  int64_t n = x->node->nin;
  rg_dtype dt = x->node->dtype;
  rg_tensor *out = rgb_output(x, 0, dt, 1, &n);
  if (!out) return x->rt->errcode;
  for (int k = 0; k < n; k++) {
    const rg_tensor *s = rgb_in(x, k);
    rgbc_cast_one(s->dtype, s->data, dt, out->data + k * rgbc_size(dt));
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ join, split */

int rgbc_join_with(rgb_exec *x, rgbc_copy_fn copy) {
  const rgb_node *n = x->node;
  int axis = (int)n->ints[0];
  const rg_tensor *t0 = rgb_in(x, 0);
  int64_t shape[RG_MAX_NDIM];
  char a[160], b[160];
  for (int k = 0; k < n->nin; k++) {
    const rg_tensor *t = rgb_in(x, k);
    if (check_rank(x, k)) return x->rt->errcode;
    for (int d = 0; d < t->ndim; d++) {
      if (d != axis && t->shape[d] != t0->shape[d])
        return rgb_error(x, RG_ERR_TYPE, "shapes %s and %s differ outside the axis %d",
                         rg_shape_str(t0->ndim, t0->shape, a, sizeof a),
                         rg_shape_str(t->ndim, t->shape, b, sizeof b), axis);
      shape[d] = d == axis && k > 0 ? shape[d] + t->shape[d] : t->shape[d];
    }
  }
  rg_tensor *out = rgb_output(x, 0, n->out[0].dtype, t0->ndim, shape);
  if (!out) return x->rt->errcode;
  int64_t at = 0;
  for (int k = 0; k < n->nin; k++) {
    const rg_tensor *t = rgb_in(x, k);
    int64_t part[RG_MAX_NDIM];
    memcpy(part, shape, sizeof part);
    part[axis] = t->shape[axis];
    rg_tensor dst = header(out, out->ndim, part, out->strides, at * out->strides[axis]);
    int rc = rg_shape_numel(out->ndim, part) ? copy(x, &dst, t) : RG_OK;
    if (rc) return rc;
    at += t->shape[axis];
  }
  return RG_OK;
}

int rgb_cpu_join(rgb_exec *x) { return rgbc_join_with(x, rgbc_copy_host); }

int rgb_cpu_split(rgb_exec *x) {
  const rgb_node *n = x->node;
  const rg_tensor *t = rgb_in(x, 0), *s = rgb_in(x, 1);
  int axis = (int)n->ints[0], parts = (int)n->ints[1];
  if (check_rank(x, 0)) return x->rt->errcode;
  if (s->ndim != 1 || s->shape[0] != parts)
    return rgb_error(x, RG_ERR_TYPE, "%lld sizes given for %d outputs",
                     (long long)(s->ndim == 1 ? s->shape[0] : 0), parts);
  int64_t sizes[parts > 0 ? parts : 1], total = 0;
  for (int i = 0; i < parts; i++) {
    rgbc_cast_one(s->dtype, s->data + i * s->strides[0], RG_INT64, &sizes[i]);
    if (sizes[i] < 0) return rgb_error(x, RG_ERR_TYPE, "negative size %lld", (long long)sizes[i]);
    total += sizes[i];
  }
  if (total != t->shape[axis])
    return rgb_error(x, RG_ERR_TYPE, "the sizes add up to %lld, but dimension %d has size %lld",
                     (long long)total, axis, (long long)t->shape[axis]);
  int64_t at = 0, shape[RG_MAX_NDIM];
  memcpy(shape, t->shape, sizeof shape);
  for (int i = 0; i < parts; i++) {
    shape[axis] = sizes[i];
    int rc = set_view(x, i, t, t->ndim, shape, t->strides, sizes[i] ? at * t->strides[axis] : 0);
    if (rc) return rc;
    at += sizes[i];
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ subtensor */

/* One slice or index component: given (a number, static or from an
 * input) or omitted. */
typedef struct comp {
  bool given;
  int64_t v;
} comp;

static comp read_comp(rgb_exec *x, int64_t c, int *next) {
  if (c == RG_IDX_NONE) return (comp){false, 0};
  if (c != RG_IDX_INPUT) return (comp){true, c};
  return (comp){true, rgbc_scalar_i64(rgb_in(x, (*next)++))};
}

/* The selection of t by the node's index entries, index inputs starting
 * at input `first`: shape, strides and byte offset of the view. */
static int select_view(rgb_exec *x, const rg_tensor *t, int first, int *nd, int64_t *shape,
                       int64_t *strides, int64_t *offset) {
  const rgb_node *n = x->node;
  int nent = n->nints / 4, next = first, od = 0;
  if (nent > t->ndim)
    return rgb_error(x, RG_ERR_TYPE, "%d indices for an input with %d dimensions", nent, t->ndim);
  *offset = 0;
  for (int i = 0; i < nent; i++) {
    const int64_t *e = n->ints + 4 * i;
    int64_t size = t->shape[i];
    if (e[0] == RG_IDX_INDEX) {
      int64_t k = read_comp(x, e[1], &next).v;
      if (k < -size || k >= size)
        return rgb_error(x, RG_ERR_TYPE, "index %lld is out of bounds for axis %d with size %lld",
                         (long long)k, i, (long long)size);
      *offset += (k < 0 ? k + size : k) * t->strides[i];
      continue;
    }
    comp a = read_comp(x, e[1], &next), b = read_comp(x, e[2], &next), c = read_comp(x, e[3], &next);
    int64_t step = c.given ? c.v : 1, start;
    if (step == 0) return rgb_error(x, RG_ERR_TYPE, "slice step cannot be zero");
    int64_t len = rg_slice_indices(size, a.given, a.v, b.given, b.v, step, &start);
    shape[od] = len;
    /* a stride only matters between two elements (the step may be too
     * large to multiply when the slice has one) */
    strides[od++] = len > 1 ? t->strides[i] * step : t->strides[i];
    if (len > 0) *offset += start * t->strides[i];
  }
  for (int d = nent; d < t->ndim; d++) {
    shape[od] = t->shape[d];
    strides[od++] = t->strides[d];
  }
  *nd = od;
  return RG_OK;
}

int rgb_cpu_subtensor(rgb_exec *x) {
  const rg_tensor *t = rgb_in(x, 0);
  int nd;
  int64_t shape[RG_MAX_NDIM], st[RG_MAX_NDIM], off;
  if (check_rank(x, 0) || select_view(x, t, 1, &nd, shape, st, &off)) return x->rt->errcode;
  if (rg_shape_numel(nd, shape) == 0) off = 0;
  return set_view(x, 0, t, nd, shape, st, off);
}

int rgb_cpu_set_subtensor(rgb_exec *x) { return rgbc_set_subtensor_with(x, NULL, NULL); }

int rgbc_set_subtensor_with(rgb_exec *x, rgbc_copy_fn copy, rgbc_copy_fn add) {
  const rgb_node *n = x->node;
  const rg_tensor *y = rgb_in(x, 1);
  if (check_rank(x, 0) || check_rank(x, 1)) return x->rt->errcode;
  /* x[a] = x (one storage read and written in different places) is not
   * done in place */
  bool in_place, shared = rg_storage_base(y) == rg_storage_base(rgb_in(x, 0));
  rg_tensor *out = rgbc_output_like_input_with(x, 0, 0, !shared, &in_place, copy);
  if (!out) return x->rt->errcode;
  int nd;
  int64_t shape[RG_MAX_NDIM], st[RG_MAX_NDIM], off;
  if (select_view(x, out, 2, &nd, shape, st, &off)) return x->rt->errcode;
  char a[160], b[160];
  if (!rgbc_fits(y, &n->in[1], nd, shape))
    return rgb_error(x, RG_ERR_TYPE, "values of shape %s do not broadcast to the selection %s",
                     rg_shape_str(y->ndim, y->shape, a, sizeof a),
                     rg_shape_str(nd, shape, b, sizeof b));
  if (rg_shape_numel(nd, shape) == 0) return RG_OK;
  rg_tensor sel = header(out, nd, shape, st, off);
  if (copy) return n->code == RG_OP_SET_SUBTENSOR ? copy(x, &sel, y) : add(x, &sel, y);
  if (n->code == RG_OP_SET_SUBTENSOR) return rgbc_assign(x, &sel, y, &n->in[1]);
  rgbc_binary(x, RG_OP_ADD, &sel, &sel, y);
  return RG_OK;
}

/* ------------------------------------------------------------------ arange */

int rgb_cpu_arange(rgb_exec *x) {
  const rg_tensor *a = rgb_in(x, 0), *b = rgb_in(x, 1), *c = rgb_in(x, 2);
  rg_dtype dt = x->node->dtype;
  bool ints = !rg_dtype_is_float(a->dtype) && !rg_dtype_is_float(b->dtype) &&
              !rg_dtype_is_float(c->dtype);
  int64_t len;
  if (ints) {
    int64_t start = rgbc_scalar_i64(a), stop = rgbc_scalar_i64(b), step = rgbc_scalar_i64(c);
    if (step == 0) return rgb_error(x, RG_ERR_EVAL, "the step must not be zero");
    __int128 span = (__int128)stop - start;
    len = step > 0 ? (span > 0 ? (int64_t)((span - 1) / step + 1) : 0)
                   : (span < 0 ? (int64_t)((-span - 1) / -(__int128)step + 1) : 0);
    rg_tensor *out = rgb_output(x, 0, dt, 1, &len);
    if (!out) return x->rt->errcode;
    for (int64_t i = 0; i < len; i++) {
      int64_t v = (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step);
      rgbc_cast_one(RG_INT64, &v, dt, out->data + i * rgbc_size(dt));
    }
    return RG_OK;
  }
  double start = rgbc_scalar_f64(a), stop = rgbc_scalar_f64(b), step = rgbc_scalar_f64(c);
  const char *why = rg_arange_length(start, stop, step, &len);
  if (why) return rgb_error(x, step == 0 ? RG_ERR_EVAL : RG_ERR_LIMIT, "%s", why);
  /* NumPy's fill: the second value is start + step, the others
   * start + i * (second - start) */
  double delta = (start + step) - start;
  rg_tensor *out = rgb_output(x, 0, dt, 1, &len);
  if (!out) return x->rt->errcode;
  for (int64_t i = 0; i < len; i++) {
    double v = start + (double)i * delta;
    rgbc_cast_one(RG_FLOAT64, &v, dt, out->data + i * rgbc_size(dt));
  }
  return RG_OK;
}
