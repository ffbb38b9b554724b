/*
 * shape.c — structure ops: dimshuffle, reshape, flatten, shape, shape_i,
 * alloc, alloc_empty, make_vector, join, split, subtensor, inc_subtensor,
 * set_subtensor and arange; their type inference, shape inference and
 * constructors; and the public shape-inference entry points.
 *
 * Static shapes are computed exactly where the inputs allow it: constant
 * shape vectors (or make_vector of constants) for reshape, constant index
 * and slice bounds on known dimensions for subtensor (Python's slice
 * rules), constant bounds for arange.  Shape inference builds the same
 * arithmetic as small scalar int64 graphs (infer.c), which
 * fold to constants when their operands are constants.
 */
#include "core/core-impl.h"

#include <math.h>

/* ------------------------------------------------------------------ helpers */

static bool is_int_scalar(const rg_variable *v) {
  return v->type->ndim == 0 && (rg_dtype_is_int(v->type->dtype));
}

static bool is_int_vector(const rg_variable *v) {
  return v->type->ndim == 1 && rg_dtype_is_int(v->type->dtype);
}

static const rg_type *mk_type(rg_dtype dt, int nd, const int64_t *shape, rg_device dev) {
  return rg_type_on_device(rg_type_new(dt, nd, shape), dev);
}

/* The constant integer value of a scalar, or false. */
static bool const_int(const rg_variable *v, int64_t *out) {
  return v && rg_is_constant(v) && v->type->ndim == 0 && rg_constant_get_i64(v, out);
}

/* Element i of an integer vector when statically known: a constant vector,
 * or a make_vector whose element i is a constant. */
static bool vector_elem(const rg_variable *v, int64_t i, int64_t *out) {
  if (rg_is_constant(v)) {
    if (i >= v->type->shape[0]) return false;
    *out = rg_load_i64(v->type->dtype, (const char *)v->data + i * (int64_t)rg_dtype_size(v->type->dtype));
    return true;
  }
  if (v->owner && v->owner->op->code == RG_OP_MAKE_VECTOR && i < v->owner->nin)
    return const_int(v->owner->inputs[i], out);
  return false;
}

static char *dim_str(int64_t d) { return d < 0 ? "?" : rgk_sprintf("%lld", (long long)d); }

/* ------------------------------------------------------------------ dimshuffle */

static int dimshuffle_make_node(rg_ctx *C, const rg_op *op, rg_variable *x, rgc_outs *out) {
  const rg_type *t = x->type;
  bool used[RG_MAX_NDIM] = {0};
  int64_t shape[RG_MAX_NDIM];
  for (int i = 0; i < op->nints; i++) {
    int64_t k = op->ints[i];
    if (k < 0) {
      shape[i] = 1;
      continue;
    }
    if (k >= t->ndim)
      return rgc_op_error(C, op, "dimension %lld is out of range for an input with %d dimensions",
                          (long long)k, t->ndim);
    if (used[k]) return rgc_op_error(C, op, "dimension %lld appears twice", (long long)k);
    used[k] = true;
    shape[i] = t->shape[k];
  }
  for (int d = 0; d < t->ndim; d++)
    if (!used[d] && t->shape[d] != 1)
      return rgc_op_error(C, op, "dimension %d of size %s cannot be dropped (only size-1 "
                          "dimensions can)", d, dim_str(t->shape[d]));
  return rgc_outs_set1(out, mk_type(t->dtype, op->nints, shape, t->device));
}

/* ------------------------------------------------------------------ reshape, flatten */

static int reshape_make_node(rg_ctx *C, const rg_op *op, rg_variable *x, rg_variable *s,
                             rgc_outs *out) {
  int nd = (int)op->ints[0];
  if (!is_int_vector(s))
    return rgc_op_error(C, op, "the shape must be an integer vector, got %s", rg_type_str(s->type));
  if (s->type->shape[0] >= 0 && s->type->shape[0] != nd)
    return rgc_op_error(C, op, "the shape has %lld elements, expected %d", (long long)s->type->shape[0], nd);
  int64_t given[RG_MAX_NDIM], shape[RG_MAX_NDIM];
  bool have[RG_MAX_NDIM];
  for (int d = 0; d < nd; d++) have[d] = vector_elem(s, d, &given[d]);
  const char *why = rg_reshape_sizes(x->type->ndim, x->type->shape, nd, given, have, shape);
  if (why) return rgc_op_error(C, op, "%s", why);
  return rgc_outs_set1(out, mk_type(x->type->dtype, nd, shape, x->type->device));
}

const char *rg_reshape_sizes(int xnd, const int64_t *xshape, int nd, const int64_t *given,
                             const bool *have, int64_t *out) {
  int64_t known = 1; /* the product of the sizes given other than -1; -1 if one is not known */
  int minus = -1;
  for (int d = 0; d < nd; d++) {
    out[d] = given[d];
    if (have && !have[d]) {
      out[d] = RG_DIM_UNKNOWN;
      known = -1;
    } else if (given[d] == -1 && minus < 0) {
      minus = d;
    } else if (given[d] == -1) {
      return "only one size of the shape may be -1";
    } else if (given[d] < 0) {
      return rgk_sprintf("invalid size %lld in the shape", (long long)given[d]);
    } else if (known >= 0 && __builtin_mul_overflow(known, given[d], &known)) {
      return "the shape overflows";
    }
  }
  int64_t n = rg_shape_numel(xnd, xshape); /* -1 if not known */
  if (minus >= 0) out[minus] = n >= 0 && known > 0 && n % known == 0 ? n / known : RG_DIM_UNKNOWN;
  if (n >= 0 && known >= 0 && (minus < 0 ? known != n : known == 0 || n % known)) {
    char a[RG_SHAPE_STR_MAX], b[RG_SHAPE_STR_MAX];
    return rgk_sprintf("cannot reshape an array of size %lld (shape %s) into shape %s", (long long)n,
                       rg_shape_str(xnd, xshape, a, sizeof a), rg_shape_str(nd, out, b, sizeof b));
  }
  return NULL;
}

static int flatten_make_node(rg_ctx *C, const rg_op *op, rg_variable *x, rgc_outs *out) {
  const rg_type *t = x->type;
  int nd = (int)op->ints[0];
  if (t->ndim < nd)
    return rgc_op_error(C, op, "the input has %d dimensions, fewer than %d", t->ndim, nd);
  int64_t shape[RG_MAX_NDIM], last = 1;
  for (int d = 0; d < nd - 1; d++) shape[d] = t->shape[d];
  for (int d = nd - 1; d < t->ndim; d++)
    if (last >= 0) last = t->shape[d] < 0 || __builtin_mul_overflow(last, t->shape[d], &last) ? -1 : last;
  shape[nd - 1] = last;
  return rgc_outs_set1(out, mk_type(t->dtype, nd, shape, t->device));
}

/* ------------------------------------------------------------------ shape, shape_i */

/* shape_i's dimension counts from the end when negative, normalised here
 * as an axis is. */
static int shape_make_node(rg_ctx *C, const rg_op **op, rg_variable *x, rgc_outs *out) {
  int64_t n = x->type->ndim, d = (*op)->code == RG_OP_SHAPE_I ? (*op)->ints[0] : 0;
  if ((*op)->code == RG_OP_SHAPE) return rgc_outs_set1(out, rg_type_new(RG_INT64, 1, &n));
  if (d >= n || d < -n)
    return rgc_op_error(C, *op, "dimension %lld is out of range for an input with %d dimensions",
                        (long long)d, (int)n);
  if (d < 0) *op = rg_op_shape_i((int)(d + n));
  return rgc_outs_set1(out, rg_type_scalar(RG_INT64));
}

/* ------------------------------------------------------------------ alloc, alloc_empty */

static int dims_from_inputs(rg_ctx *C, const rg_op *op, int n, rg_variable *const *dims,
                            int64_t *shape) {
  if (n > RG_MAX_NDIM) return rgc_op_error(C, op, "more than %d dimensions", RG_MAX_NDIM);
  for (int d = 0; d < n; d++) {
    if (!is_int_scalar(dims[d]))
      return rgc_op_error(C, op, "dimension inputs must be integer scalars, input %d is %s", d,
                          rg_type_str(dims[d]->type));
    if (!const_int(dims[d], &shape[d])) shape[d] = RG_DIM_UNKNOWN;
    else if (shape[d] < 0) return rgc_op_error(C, op, "negative dimension %lld", (long long)shape[d]);
  }
  return RG_OK;
}

static int alloc_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                           rgc_outs *out) {
  const rg_type *v = in[0]->type;
  int nd = nin - 1;
  int64_t shape[RG_MAX_NDIM];
  if (dims_from_inputs(C, op, nd, in + 1, shape)) return RG_ERR_TYPE;
  if (v->ndim > nd)
    return rgc_op_error(C, op, "the value has more dimensions (%d) than the shape (%d)", v->ndim, nd);
  for (int d = 0; d < v->ndim; d++) {
    int64_t vs = v->shape[d], *o = &shape[nd - v->ndim + d];
    if (vs == 1 || vs < 0) continue;
    if (*o >= 0 && *o != vs)
      return rgc_op_error(C, op, "the value of shape %s does not broadcast to %s",
                          rgc_shape_str(v->ndim, v->shape), rgc_shape_str(nd, shape));
    *o = vs;
  }
  return rgc_outs_set1(out, mk_type(v->dtype, nd, shape, v->device));
}

static int alloc_empty_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                                 rgc_outs *out) {
  int64_t shape[RG_MAX_NDIM];
  if (dims_from_inputs(C, op, nin, in, shape)) return RG_ERR_TYPE;
  return rgc_outs_set1(out, rg_type_new(op->dtype, nin, shape));
}

/* ------------------------------------------------------------------ make_vector */

static bool fits_dtype(const rg_variable *v, rg_dtype dt) {
  if (rg_dtype_can_cast(v->type->dtype, dt)) return true;
  if (!(v->flags & RG_VAR_WEAK)) return false;
  double x;
  if (!rg_constant_get_f64(v, &x)) return false;
  uint8_t buf[8];
  rg_store_f64(dt, buf, x);
  return rg_load_f64(dt, buf) == x; /* a literal exactly representable */
}

static int make_vector_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                                 rgc_outs *out) {
  for (int i = 0; i < nin; i++) {
    if (in[i]->type->ndim != 0)
      return rgc_op_error(C, op, "input %d must be a scalar, got %s", i, rg_type_str(in[i]->type));
    if (!fits_dtype(in[i], op->dtype))
      return rgc_op_error(C, op, "input %d of dtype %s does not cast safely to %s", i,
                          rg_dtype_name(in[i]->type->dtype), rg_dtype_name(op->dtype));
  }
  int64_t n = nin;
  return rgc_outs_set1(out, rg_type_new(op->dtype, 1, &n));
}

/* ------------------------------------------------------------------ join, split */

static int norm_axis(rg_ctx *C, const rg_op *op, int64_t a, int ndim, int64_t *out) {
  if (a < -ndim || a >= ndim)
    return rgc_op_error(C, op, "axis %lld is out of range for inputs with %d dimensions",
                        (long long)a, ndim);
  *out = a < 0 ? a + ndim : a;
  return RG_OK;
}

static int join_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in,
                          rgc_outs *out) {
  const rg_type *t0 = in[0]->type;
  if (t0->ndim == 0) return rgc_op_error(C, *op, "cannot join scalars");
  int64_t axis = 0;
  if (norm_axis(C, *op, (*op)->ints[0], t0->ndim, &axis)) return RG_ERR_TYPE;
  if (axis != (*op)->ints[0]) *op = rg_op_join((int)axis);
  int64_t shape[RG_MAX_NDIM];
  memcpy(shape, t0->shape, (size_t)t0->ndim * sizeof *shape);
  rg_dtype dt = t0->dtype;
  for (int i = 1; i < nin; i++) {
    const rg_type *t = in[i]->type;
    if (t->ndim != t0->ndim)
      return rgc_op_error(C, *op, "input %d has %d dimensions, input 0 has %d", i, t->ndim, t0->ndim);
    dt = rg_dtype_promote(dt, t->dtype);
    for (int d = 0; d < t->ndim; d++) {
      if (d == axis) {
        if (shape[d] < 0 || t->shape[d] < 0) shape[d] = RG_DIM_UNKNOWN;
        else if (__builtin_add_overflow(shape[d], t->shape[d], &shape[d]))
          return rgc_op_error(C, *op, "the joined length along axis %lld passes 2^63", (long long)axis);
      } else if (shape[d] >= 0 && t->shape[d] >= 0 && shape[d] != t->shape[d]) {
        return rgc_op_error(C, *op, "shapes %s and %s differ outside the axis %lld",
                            rgc_shape_str(t0->ndim, t0->shape), rgc_shape_str(t->ndim, t->shape),
                            (long long)axis);
      } else if (shape[d] < 0) {
        shape[d] = t->shape[d];
      }
    }
  }
  return rgc_outs_set1(out, mk_type(dt, t0->ndim, shape, t0->device));
}

static int split_make_node(rg_ctx *C, const rg_op **op, rg_variable *x, rg_variable *sizes,
                           rgc_outs *out) {
  const rg_type *t = x->type;
  int n = (int)(*op)->ints[1];
  if (t->ndim == 0) return rgc_op_error(C, *op, "cannot split a scalar");
  int64_t axis = 0;
  if (norm_axis(C, *op, (*op)->ints[0], t->ndim, &axis)) return RG_ERR_TYPE;
  if (axis != (*op)->ints[0]) *op = rg_op_split((int)axis, n);
  if (!is_int_vector(sizes))
    return rgc_op_error(C, *op, "the sizes must be an integer vector, got %s", rg_type_str(sizes->type));
  if (sizes->type->shape[0] >= 0 && sizes->type->shape[0] != n)
    return rgc_op_error(C, *op, "%lld sizes given for %d outputs", (long long)sizes->type->shape[0], n);
  rgc_outs_alloc(out, n);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    int64_t s;
    rg_type *o = (rg_type *)rgc_type_alloc(t->dtype, t->ndim, t->device);
    memcpy(o->shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
    bool known = vector_elem(sizes, i, &s);
    if (known && s < 0) return rgc_op_error(C, *op, "negative size %lld", (long long)s);
    o->shape[axis] = known ? s : RG_DIM_UNKNOWN;
    total = known && total >= 0 ? total + s : -1;
    out->types[i] = o;
  }
  if (total >= 0 && t->shape[axis] >= 0 && total != t->shape[axis])
    return rgc_op_error(C, *op, "the sizes add up to %lld, but dimension %lld has size %lld",
                        (long long)total, (long long)axis, (long long)t->shape[axis]);
  return RG_OK;
}

/* ------------------------------------------------------------------ subtensor */

static int64_t slice_bound(int64_t v, int64_t n, int64_t lo, int64_t hi) {
  v = v < 0 ? v + n : v;
  return v < lo ? lo : v > hi ? hi : v;
}

int64_t rg_slice_indices(int64_t n, bool has_start, int64_t start, bool has_stop, int64_t stop, int64_t step,
                         int64_t *first) {
  int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
  int64_t a = has_start ? slice_bound(start, n, lo, hi) : step > 0 ? 0 : n - 1;
  int64_t b = has_stop ? slice_bound(stop, n, lo, hi) : step > 0 ? n : -1;
  *first = a;
  if (step > 0) return b > a ? (b - a - 1) / step + 1 : 0;
  return a > b ? (a - b - 1) / -step + 1 : 0;
}

static int count_idx_inputs(const rg_op *op) {
  int k = 0;
  for (int i = 0; i < op->nints; i += 4)
    for (int j = 1; j <= (op->ints[i] == RG_IDX_INDEX ? 1 : 3); j++) k += op->ints[i + j] == RG_IDX_INPUT;
  return k;
}

/* The shape of x[entries] (static), or an error. */
static int subtensor_shape(rg_ctx *C, const rg_op *op, const rg_type *t, int64_t *shape, int *nd) {
  int nent = op->nints / 4;
  if (nent > t->ndim)
    return rgc_op_error(C, op, "%d indices for an input with %d dimensions", nent, t->ndim);
  *nd = 0;
  for (int i = 0; i < nent; i++) {
    const int64_t *e = op->ints + 4 * i;
    int64_t n = t->shape[i];
    if (e[0] == RG_IDX_INDEX) {
      if (e[1] != RG_IDX_INPUT && n >= 0 && (e[1] >= n || e[1] < -n))
        return rgc_op_error(C, op, "index %lld is out of bounds for dimension %d of size %lld",
                            (long long)e[1], i, (long long)n);
      continue;
    }
    bool symbolic = e[1] == RG_IDX_INPUT || e[2] == RG_IDX_INPUT || e[3] == RG_IDX_INPUT;
    int64_t first;
    shape[(*nd)++] = n < 0 || symbolic ? RG_DIM_UNKNOWN
                                       : rg_slice_indices(n, e[1] != RG_IDX_NONE, e[1], e[2] != RG_IDX_NONE, e[2],
                                                          e[3] == RG_IDX_NONE ? 1 : e[3], &first);
  }
  for (int d = nent; d < t->ndim; d++) shape[(*nd)++] = t->shape[d];
  return RG_OK;
}

static int check_idx_inputs(rg_ctx *C, const rg_op *op, int first, int nin, rg_variable *const *in) {
  int want = count_idx_inputs(op);
  if (nin - first != want)
    return rgc_op_error(C, op, "expected %d index input%s, got %d", want, want == 1 ? "" : "s",
                        nin - first);
  for (int i = first; i < nin; i++)
    if (!is_int_scalar(in[i]))
      return rgc_op_error(C, op, "index input %d must be an integer scalar, got %s", i - first,
                          rg_type_str(in[i]->type));
  return RG_OK;
}

static int subtensor_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                               rgc_outs *out) {
  const rg_type *t = in[0]->type;
  int64_t shape[RG_MAX_NDIM];
  int nd;
  if (check_idx_inputs(C, op, 1, nin, in) || subtensor_shape(C, op, t, shape, &nd)) return RG_ERR_TYPE;
  return rgc_outs_set1(out, mk_type(t->dtype, nd, shape, t->device));
}

static int incsub_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                            rgc_outs *out) {
  const rg_type *t = in[0]->type, *ty = in[1]->type;
  int64_t shape[RG_MAX_NDIM];
  int nd;
  if (check_idx_inputs(C, op, 2, nin, in) || subtensor_shape(C, op, t, shape, &nd)) return RG_ERR_TYPE;
  if (op->inplace > 0) return rgc_op_error(C, op, "can only work in place on input 0");
  if (!fits_dtype(in[1], t->dtype))
    return rgc_op_error(C, op, "values of dtype %s do not cast safely to %s",
                        rg_dtype_name(ty->dtype), rg_dtype_name(t->dtype));
  bool fits = ty->ndim <= nd;
  for (int d = 0; fits && d < ty->ndim; d++) {
    int64_t ys = ty->shape[d], ts = shape[nd - ty->ndim + d];
    fits = ys == 1 || ys < 0 || ts < 0 || ys == ts;
  }
  if (!fits)
    return rgc_op_error(C, op, "values of shape %s do not broadcast to the selection %s",
                        rgc_shape_str(ty->ndim, ty->shape), rgc_shape_str(nd, shape));
  return rgc_outs_set1(out, t);
}

/* ------------------------------------------------------------------ arange */

static int arange_make_node(rg_ctx *C, const rg_op *op, rg_variable *const *in, rgc_outs *out) {
  int64_t len = RG_DIM_UNKNOWN;
  double v[3];
  bool all = true;
  for (int i = 0; i < 3; i++) {
    if (in[i]->type->ndim != 0 || in[i]->type->dtype == RG_BOOL)
      return rgc_op_error(C, op, "start, stop and step must be numeric scalars, input %d is %s", i,
                          rg_type_str(in[i]->type));
    all = rg_constant_get_f64(in[i], &v[i]) && all;
  }
  const char *why = all ? rg_arange_length(v[0], v[1], v[2], &len) : NULL;
  if (why) return rgc_op_error(C, op, "%s", why);
  return rgc_outs_set1(out, rg_type_new(op->dtype, 1, &len));
}

const char *rg_arange_length(double start, double stop, double step, int64_t *len) {
  if (step == 0) return "the step must not be zero";
  double n = ceil((stop - start) / step);
  if (isnan(n)) return "the length cannot be computed (a bound or the step is NaN, or both bounds infinite)";
  if (!(n <= RG_ARANGE_MAX)) return rgk_sprintf("%g elements are too many (at most 2^62)", n);
  *len = n > 0 ? (int64_t)n : 0;
  return NULL;
}

/* ------------------------------------------------------------------ dispatch */

int rgc_shape_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in,
                        rgc_outs *out) {
  const rg_op *o = *op;
  switch (o->code) {
  case RG_OP_DIMSHUFFLE: return dimshuffle_make_node(C, o, in[0], out);
  case RG_OP_RESHAPE: return reshape_make_node(C, o, in[0], in[1], out);
  case RG_OP_FLATTEN: return flatten_make_node(C, o, in[0], out);
  case RG_OP_SHAPE: case RG_OP_SHAPE_I: return shape_make_node(C, op, in[0], out);
  case RG_OP_ALLOC: return alloc_make_node(C, o, nin, in, out);
  case RG_OP_ALLOC_EMPTY: return alloc_empty_make_node(C, o, nin, in, out);
  case RG_OP_MAKE_VECTOR: return make_vector_make_node(C, o, nin, in, out);
  case RG_OP_JOIN: return join_make_node(C, op, nin, in, out);
  case RG_OP_SPLIT: return split_make_node(C, op, in[0], in[1], out);
  case RG_OP_SUBTENSOR: return subtensor_make_node(C, o, nin, in, out);
  case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: return incsub_make_node(C, o, nin, in, out);
  case RG_OP_ARANGE: return arange_make_node(C, o, in, out);
  default: return rgc_op_error(C, o, "not a structure op");
  }
}

/* ------------------------------------------------------------------ constructors */

static rg_variable *apply_op(const rg_op *op, int n, rg_variable *const *in, rg_ctx *C,
                             const char *what) {
  C = rgc_ctx_of(C, n, in);
  for (int i = 0; i < n; i++)
    if (!in[i]) return NULL;
  if (!op) {
    if (C) rg_error(C, RG_ERR_TYPE, "%s: invalid parameters", what);
    return NULL;
  }
  return rg_apply(C, op, n, in);
}

rg_variable *rg_dimshuffle(rg_variable *x, int n, const int64_t *order) {
  return apply_op(rg_op_dimshuffle(n, order), 1, &x, NULL, "dimshuffle");
}

rg_variable *rg_transpose(rg_variable *x) {
  if (!x) return NULL;
  int64_t order[RG_MAX_NDIM];
  for (int i = 0; i < x->type->ndim; i++) order[i] = x->type->ndim - 1 - i;
  return rg_dimshuffle(x, x->type->ndim, order);
}

rg_variable *rg_reshape(rg_variable *x, rg_variable *shape, int ndim) {
  rg_variable *in[2] = {x, shape};
  return apply_op(rg_op_reshape(ndim), 2, in, NULL, "reshape");
}

rg_variable *rg_reshape_to(rg_variable *x, int ndim, const int64_t *dims) {
  if (!x) return NULL;
  int64_t n = ndim;
  rg_variable *s = rg_constant_data(x->ctx, RG_INT64, 1, &n, dims);
  return rg_reshape(x, s, ndim);
}

rg_variable *rg_flatten(rg_variable *x, int ndim) {
  return apply_op(rg_op_flatten(ndim), 1, &x, NULL, "flatten");
}

rg_variable *rg_shape(rg_variable *x) { return apply_op(rg_op_get(RG_OP_SHAPE), 1, &x, NULL, "shape"); }

rg_variable *rg_shape_i(rg_variable *x, int dim) {
  return apply_op(rg_op_shape_i(dim), 1, &x, NULL, "shape_i");
}

static rg_variable **prepend(rg_variable *first, int n, rg_variable *const *rest) {
  rg_variable **in = rgk_alloc((size_t)(n + 1) * sizeof *in);
  in[0] = first;
  if (n) memcpy(in + 1, rest, (size_t)n * sizeof *in);
  return in;
}

rg_variable *rg_allocate(rg_variable *value, int n, rg_variable *const *dims) {
  return apply_op(rg_op_get(RG_OP_ALLOC), n + 1, prepend(value, n, dims), NULL, "alloc");
}

rg_variable *rg_allocate_empty(rg_ctx *C, rg_dtype dt, int n, rg_variable *const *dims) {
  return apply_op(rg_op_alloc_empty(dt), n, dims, C, "alloc_empty");
}

rg_variable *rg_make_vector(rg_ctx *C, rg_dtype dt, int n, rg_variable *const *xs) {
  return apply_op(rg_op_make_vector(dt), n, xs, C, "make_vector");
}

rg_variable *rg_join(int axis, int n, rg_variable *const *xs) {
  return apply_op(rg_op_join(axis), n, xs, NULL, "join");
}

rg_node *rg_split(rg_variable *x, rg_variable *sizes, int axis, int n) {
  if (!x || !sizes) return NULL;
  const rg_op *op = rg_op_split(axis, n);
  if (!op) {
    rg_error(x->ctx, RG_ERR_TYPE, "split: needs at least one output");
    return NULL;
  }
  rg_variable *in[2] = {x, sizes};
  return rg_make_node(NULL, op, 2, in);
}

static rg_variable *sub_family(rg_opcode code, rg_variable *x, rg_variable *y, int nent,
                               const rg_index *entries, int nidx, rg_variable *const *idx) {
  int first = y ? 2 : 1;
  rg_variable **in = rgk_alloc((size_t)(first + nidx) * sizeof *in);
  in[0] = x;
  if (y) in[1] = y;
  if (nidx) memcpy(in + first, idx, (size_t)nidx * sizeof *in);
  return apply_op(rg_op_subtensor(code, nent, entries), first + nidx, in, NULL,
                  rg_opcode_name(code));
}

rg_variable *rg_subtensor(rg_variable *x, int nent, const rg_index *entries, int nidx,
                          rg_variable *const *idx) {
  return sub_family(RG_OP_SUBTENSOR, x, NULL, nent, entries, nidx, idx);
}

rg_variable *rg_inc_subtensor(rg_variable *x, rg_variable *y, int nent, const rg_index *entries,
                              int nidx, rg_variable *const *idx) {
  if (!y) return NULL;
  return sub_family(RG_OP_INC_SUBTENSOR, x, y, nent, entries, nidx, idx);
}

rg_variable *rg_set_subtensor(rg_variable *x, rg_variable *y, int nent, const rg_index *entries,
                              int nidx, rg_variable *const *idx) {
  if (!y) return NULL;
  return sub_family(RG_OP_SET_SUBTENSOR, x, y, nent, entries, nidx, idx);
}

rg_variable *rg_arange(rg_variable *start, rg_variable *stop, rg_variable *step, rg_dtype dt) {
  rg_variable *in[3] = {start, stop, step};
  return apply_op(rg_op_arange(dt), 3, in, NULL, "arange");
}
