/*
 * infer.c — shape inference: scalar int64 arithmetic graphs with constant
 * folding, infer_shape of the structure ops, and the public entry points
 * rg_shape_of() and rg_infer_shape().
 *
 * A shape is an array of scalar int64 variables, one per dimension: a
 * constant where the static type knows the size, else an expression over
 * shape_i of inputs and the node's scalar inputs.  The helpers fold
 * constants and trivial identities (x + 0, x * 1), so fully static
 * shapes come out as constants and no graph is built for them.
 */
#include "core/core-impl.h"

#include <math.h>

/* ------------------------------------------------------------------ scalar arithmetic */

static bool cval(const rg_variable *v, int64_t *k) {
  return rg_is_constant(v) && v->type->ndim == 0 && rg_constant_get_i64(v, k);
}

rg_variable *rgc_as_i64(rg_variable *v) {
  if (!v || v->type->dtype == RG_INT64) return v;
  int64_t k;
  if (cval(v, &k)) return rgc_dim_const(v->ctx, k);
  return rg_cast(v, RG_INT64);
}

typedef enum { I_ADD, I_SUB, I_MUL, I_FLOORDIV, I_MAX, I_MIN } iop;

static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static bool fold(iop op, int64_t a, int64_t b, int64_t *r) {
  switch (op) {
  case I_ADD: return !__builtin_add_overflow(a, b, r);
  case I_SUB: return !__builtin_sub_overflow(a, b, r);
  case I_MUL: return !__builtin_mul_overflow(a, b, r);
  case I_FLOORDIV:
    if (b == 0 || (a == INT64_MIN && b == -1)) return false;
    *r = floordiv(a, b);
    return true;
  case I_MAX: *r = a > b ? a : b; return true;
  case I_MIN: *r = a < b ? a : b; return true;
  }
  return false;
}

rg_variable *rgc_iarith(rg_ctx *C, int op, rg_variable *a, rg_variable *b) {
  if (!a || !b) return NULL;
  int64_t x, y, r;
  bool ca = cval(a, &x), cb = cval(b, &y);
  if (ca && cb && fold((iop)op, x, y, &r)) return rgc_dim_const(C, r);
  if ((op == I_ADD && cb && y == 0) || (op == I_SUB && cb && y == 0)) return rgc_as_i64(a);
  if (op == I_ADD && ca && x == 0) return rgc_as_i64(b);
  if ((op == I_MUL || op == I_FLOORDIV) && cb && y == 1) return rgc_as_i64(a);
  if (op == I_MUL && ca && x == 1) return rgc_as_i64(b);
  if (a == b && (op == I_MAX || op == I_MIN)) return rgc_as_i64(a);
  rg_variable *v;
  switch ((iop)op) {
  case I_ADD: v = rg_add(a, b); break;
  case I_SUB: v = rg_sub(a, b); break;
  case I_MUL: v = rg_mul(a, b); break;
  case I_FLOORDIV: v = rg_int_div(a, b); break;
  case I_MAX: v = rg_maximum(a, b); break;
  default: v = rg_minimum(a, b); break;
  }
  return rgc_as_i64(v);
}

static rg_variable *iadd(rg_ctx *C, rg_variable *a, rg_variable *b) { return rgc_iarith(C, I_ADD, a, b); }
static rg_variable *isub(rg_ctx *C, rg_variable *a, rg_variable *b) { return rgc_iarith(C, I_SUB, a, b); }
static rg_variable *imul(rg_ctx *C, rg_variable *a, rg_variable *b) { return rgc_iarith(C, I_MUL, a, b); }
static rg_variable *idiv(rg_ctx *C, rg_variable *a, rg_variable *b) { return rgc_iarith(C, I_FLOORDIV, a, b); }
static rg_variable *imax(rg_ctx *C, rg_variable *a, rg_variable *b) { return rgc_iarith(C, I_MAX, a, b); }
static rg_variable *imin(rg_ctx *C, rg_variable *a, rg_variable *b) { return rgc_iarith(C, I_MIN, a, b); }
static rg_variable *K(rg_ctx *C, int64_t k) { return rgc_dim_const(C, k); }

/* cond ? a : b, folded when the comparison is constant.  cmp: a value's
 * sign test v < 0 (lt0) or v > 0 (gt0). */
static rg_variable *select_sign(rg_ctx *C, rg_variable *v, bool gt0, rg_variable *a, rg_variable *b) {
  int64_t k;
  if (cval(v, &k)) return (gt0 ? k > 0 : k < 0) ? a : b;
  rg_variable *c = gt0 ? rg_gt(v, K(C, 0)) : rg_lt(v, K(C, 0));
  return a == b ? a : rgc_as_i64(rg_switch(c, a, b));
}

static rg_variable *clamp(rg_ctx *C, rg_variable *v, rg_variable *lo, rg_variable *hi) {
  return imin(C, imax(C, v, lo), hi);
}

/* v < 0 ? v + n : v, clamped to [lo, hi]. */
static rg_variable *norm_clamp(rg_ctx *C, rg_variable *v, rg_variable *n, rg_variable *lo,
                               rg_variable *hi) {
  v = rgc_as_i64(v);
  return clamp(C, select_sign(C, v, false, iadd(C, v, n), v), lo, hi);
}

/* Length of a slice of a dimension of size n; NULL components are omitted
 * ones.  Python's rules (rg_slice_indices), as graph arithmetic. */
static rg_variable *slice_len_pos(rg_ctx *C, rg_variable *n, rg_variable *start, rg_variable *stop,
                                  rg_variable *step) {
  rg_variable *s = start ? norm_clamp(C, start, n, K(C, 0), n) : K(C, 0);
  rg_variable *e = stop ? norm_clamp(C, stop, n, K(C, 0), n) : n;
  rg_variable *num = iadd(C, isub(C, e, s), isub(C, step, K(C, 1)));
  return imax(C, K(C, 0), idiv(C, num, step));
}

static rg_variable *slice_len_neg(rg_ctx *C, rg_variable *n, rg_variable *start, rg_variable *stop,
                                  rg_variable *step) {
  rg_variable *hi = isub(C, n, K(C, 1)), *lo = K(C, -1);
  rg_variable *s = start ? norm_clamp(C, start, n, lo, hi) : hi;
  rg_variable *e = stop ? norm_clamp(C, stop, n, lo, hi) : lo;
  rg_variable *mstep = isub(C, K(C, 0), step);
  rg_variable *num = isub(C, isub(C, s, e), iadd(C, step, K(C, 1)));
  return imax(C, K(C, 0), idiv(C, num, mstep));
}

static rg_variable *slice_len(rg_ctx *C, rg_variable *n, rg_variable *start, rg_variable *stop,
                              rg_variable *step) {
  step = step ? rgc_as_i64(step) : K(C, 1);
  int64_t k;
  if (cval(step, &k)) return (k > 0 ? slice_len_pos : slice_len_neg)(C, n, start, stop, step);
  rg_variable *p = slice_len_pos(C, n, start, stop, step), *q = slice_len_neg(C, n, start, stop, step);
  return rgc_as_i64(rg_switch(rg_gt(step, K(C, 0)), p, q));
}

/* ------------------------------------------------------------------ shapes of variables */

rg_variable **rg_shape_of(rg_ctx *C, rg_variable *x) {
  if (!x) return NULL;
  C = C ? C : x->ctx;
  int nd = x->type->ndim;
  rg_variable **s = rgk_alloc((size_t)(nd ? nd : 1) * sizeof *s);
  for (int d = 0; d < nd; d++)
    s[d] = x->type->shape[d] >= 0 ? K(C, x->type->shape[d]) : rg_shape_i(x, d);
  return s;
}

static rgc_shape new_shape(int nd) { return rgk_alloc((size_t)(nd ? nd : 1) * sizeof(rg_variable *)); }

/* Static sizes override computed ones. */
static void pin_static(rg_ctx *C, const rg_type *t, rgc_shape s) {
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] >= 0) s[d] = K(C, t->shape[d]);
}

/* Element i of an integer vector as a scalar int64 variable. */
static rg_variable *vec_elem(rg_ctx *C, rg_variable *v, int64_t i) {
  if (v->owner && v->owner->op->code == RG_OP_MAKE_VECTOR && i < v->owner->nin)
    return rgc_as_i64(v->owner->inputs[i]);
  if (rg_is_constant(v) && i < v->type->shape[0]) {
    int64_t k = rg_load_i64(v->type->dtype, (const char *)v->data + i * (int64_t)rg_dtype_size(v->type->dtype));
    return K(C, k);
  }
  rg_index e = {RG_IDX_INDEX, i, RG_IDX_NONE, RG_IDX_NONE};
  return rgc_as_i64(rg_subtensor(v, 1, &e, 0, NULL));
}

static rg_variable *product(rg_ctx *C, int from, int to, rgc_shape s) {
  rg_variable *p = K(C, 1);
  for (int d = from; d < to; d++) p = imul(C, p, s[d]);
  return p;
}

/* ------------------------------------------------------------------ per op */

static rgc_shape reshape_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in) {
  rg_variable *x = node->inputs[0], *sv = node->inputs[1];
  int nd = node->outputs[0]->type->ndim;
  rgc_shape s = new_shape(nd), e = new_shape(nd);
  for (int d = 0; d < nd; d++) e[d] = vec_elem(C, sv, d);
  rg_variable *numel = product(C, 0, x->type->ndim, in[0]);
  for (int d = 0; d < nd; d++) {
    rg_variable *others = K(C, 1);
    for (int j = 0; j < nd; j++)
      if (j != d) others = imul(C, others, e[j]);
    s[d] = select_sign(C, e[d], false, idiv(C, numel, others), e[d]);
  }
  return s;
}

static rgc_shape subtensor_shape_of(rg_ctx *C, const rg_node *node, rgc_shape x, int first) {
  const rg_op *op = node->op;
  int nd = node->outputs[0]->type->ndim, k = 0, next = first;
  int xnd = node->inputs[0]->type->ndim, nent = op->nints / 4;
  rgc_shape s = new_shape(nd);
  for (int i = 0; i < nent; i++) {
    const int64_t *e = op->ints + 4 * i;
    rg_variable *comp[3] = {NULL, NULL, NULL};
    for (int j = 0; j < (e[0] == RG_IDX_INDEX ? 1 : 3); j++) {
      if (e[1 + j] == RG_IDX_INPUT) comp[j] = node->inputs[next++];
      else if (e[1 + j] != RG_IDX_NONE) comp[j] = K(C, e[1 + j]);
    }
    if (e[0] == RG_IDX_SLICE) s[k++] = slice_len(C, x[i], comp[0], comp[1], comp[2]);
  }
  for (int d = nent; d < xnd; d++) s[k++] = x[d];
  return s;
}

static rg_variable *arange_len(rg_ctx *C, const rg_node *node) {
  rg_variable *start = node->inputs[0], *stop = node->inputs[1], *step = node->inputs[2];
  rg_variable *q = rg_ceil(rg_true_div(rg_sub(stop, start), step));
  return imax(C, K(C, 0), rgc_as_i64(q));
}

static int shape_family(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  const rg_op *op = node->op;
  int nd = node->nout ? node->outputs[0]->type->ndim : 0;
  rgc_shape s = new_shape(nd);
  switch (op->code) {
  case RG_OP_DIMSHUFFLE:
    for (int d = 0; d < nd; d++) s[d] = op->ints[d] < 0 ? K(C, 1) : in[0][op->ints[d]];
    break;
  case RG_OP_RESHAPE: s = reshape_shape(C, node, in); break;
  case RG_OP_FLATTEN:
    for (int d = 0; d < nd - 1; d++) s[d] = in[0][d];
    s[nd - 1] = product(C, nd - 1, node->inputs[0]->type->ndim, in[0]);
    break;
  case RG_OP_SHAPE: s[0] = K(C, node->inputs[0]->type->ndim); break;
  case RG_OP_SHAPE_I: break;
  case RG_OP_ALLOC: case RG_OP_ALLOC_EMPTY: {
    int first = op->code == RG_OP_ALLOC;
    for (int d = 0; d < nd; d++) s[d] = rgc_as_i64(node->inputs[first + d]);
    break;
  }
  case RG_OP_MAKE_VECTOR: s[0] = K(C, node->nin); break;
  case RG_OP_JOIN: {
    int64_t axis = op->ints[0];
    for (int d = 0; d < nd; d++) s[d] = in[0][d];
    for (int i = 1; i < node->nin; i++) s[axis] = iadd(C, s[axis], in[i][axis]);
    break;
  }
  case RG_OP_SPLIT:
    for (int i = 0; i < node->nout; i++) {
      rgc_shape o = new_shape(nd);
      for (int d = 0; d < nd; d++) o[d] = in[0][d];
      o[op->ints[0]] = vec_elem(C, node->inputs[1], i);
      pin_static(C, node->outputs[i]->type, o);
      out[i] = o;
    }
    return RG_OK;
  case RG_OP_SUBTENSOR: s = subtensor_shape_of(C, node, in[0], 1); break;
  case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: s = in[0]; break;
  case RG_OP_ARANGE: s[0] = arange_len(C, node); break;
  default: return rgc_op_error(C, op, "no shape inference");
  }
  pin_static(C, node->outputs[0]->type, s);
  out[0] = s;
  return RG_OK;
}

int rgc_shape_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  return shape_family(C, node, in, out);
}

/* ------------------------------------------------------------------ the entry point */

rg_variable **rg_infer_shape(rg_ctx *C, const rg_node *node, int output) {
  if (!node || output < 0 || output >= node->nout) return NULL;
  C = C ? C : node->outputs[0]->ctx;
  rgc_shape *in = rgk_alloc((size_t)(node->nin ? node->nin : 1) * sizeof *in);
  for (int i = 0; i < node->nin; i++) in[i] = rg_shape_of(C, node->inputs[i]);
  rgc_shape *out = rgk_alloc((size_t)node->nout * sizeof *out);
  if (node->op->cls->infer_shape(C, node, in, out) != RG_OK) return NULL;
  rg_variable *o = node->outputs[output];
  rgc_shape s = out[output];
  for (int d = 0; d < o->type->ndim; d++) {
    if (!s[d]) s[d] = rg_shape_i(o, d); /* not inferable: ask the output itself */
    if (!s[d]) return NULL;
  }
  return s;
}
