/*
 * blas.c — linear algebra ops: dot (vector-vector, matrix-vector,
 * vector-matrix, matrix-matrix), outer, batched_dot (one product per
 * leading index, Aesara's), and the BLAS forms that rewrites produce:
 *
 *   batched_dot(x, y)[b] = x[b] @ y[b]    x (B, n, k) or (B, k),
 *                                         y (B, k, m) or (B, k)
 *   gemm(z, alpha, x, y, beta) = beta * z + alpha * (x @ y)   matrices
 *   gemv(y, alpha, A, x, beta) = beta * y + alpha * (A @ x)   A matrix
 *   ger(A, alpha, x, y)        = A + alpha * outer(x, y)
 *
 * dot, outer and batched_dot promote dtypes as NumPy does.  The BLAS
 * forms take float32 or float64 tensors of one dtype (as BLAS does) and
 * scalars alpha, beta of any dtype that casts safely to it; their output
 * has the type of their first input, which they destroy when made in
 * place (input 0).
 */
#include "core/core-impl.h"

static int check_dims(rg_ctx *C, const rg_op *op, rg_variable *x, const char *what, int lo,
                      int hi) {
  int nd = x->type->ndim;
  if (nd >= lo && nd <= hi) return RG_OK;
  if (lo == hi)
    return rgc_op_error(C, op, "%s must have %d dimension%s, got %d", what, lo, lo == 1 ? "" : "s", nd);
  return rgc_op_error(C, op, "%s must have %d or %d dimensions, got %d", what, lo, hi, nd);
}

/* Two sizes that must agree: equal, or one unknown. */
static bool agree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

static int align_error(rg_ctx *C, const rg_op *op, rg_variable *a, rg_variable *b) {
  return rgc_op_error(C, op, "shapes %s and %s are not aligned",
                      rgc_shape_str(a->type->ndim, a->type->shape),
                      rgc_shape_str(b->type->ndim, b->type->shape));
}


static const rg_type *typed(rg_dtype dt, int nd, const int64_t *shape, rg_device dev) {
  return rg_type_on_device(rg_type_new(dt, nd, shape), dev);
}

static int dot_make_node(rg_ctx *C, const rg_op *op, rg_variable *a, rg_variable *b,
                         rgc_outs *out) {
  if (check_dims(C, op, a, "the first input", 1, 2) || check_dims(C, op, b, "the second input", 1, 2))
    return RG_ERR_TYPE;
  const rg_type *ta = a->type, *tb = b->type;
  int64_t ka = ta->shape[ta->ndim - 1], kb = tb->shape[0];
  if (!agree(ka, kb)) return align_error(C, op, a, b);
  int64_t shape[2];
  int nd = 0;
  if (ta->ndim == 2) shape[nd++] = ta->shape[0];
  if (tb->ndim == 2) shape[nd++] = tb->shape[1];
  rg_variable *in[2] = {a, b};
  rg_device dev = rgc_result_device(2, in);
  return rgc_outs_set1(out, typed(rg_dtype_promote(ta->dtype, tb->dtype), nd, shape, dev));
}

/* batched_dot: the batch sizes agree and so do the inner dimensions; the
 * result keeps the batch, then x's rows and y's columns where they have
 * them. */
static int batched_dot_make_node(rg_ctx *C, const rg_op *op, rg_variable *a, rg_variable *b,
                                 rgc_outs *out) {
  if (check_dims(C, op, a, "the first input", 2, 3) || check_dims(C, op, b, "the second input", 2, 3))
    return RG_ERR_TYPE;
  const rg_type *ta = a->type, *tb = b->type;
  if (!agree(ta->shape[0], tb->shape[0]))
    return rgc_op_error(C, op, "batch sizes differ: shapes %s and %s", rgc_shape_str(ta->ndim, ta->shape),
                        rgc_shape_str(tb->ndim, tb->shape));
  if (!agree(ta->shape[ta->ndim - 1], tb->shape[1])) return align_error(C, op, a, b);
  int64_t shape[3];
  int nd = 0;
  shape[nd++] = ta->shape[0] >= 0 ? ta->shape[0] : tb->shape[0];
  if (ta->ndim == 3) shape[nd++] = ta->shape[1];
  if (tb->ndim == 3) shape[nd++] = tb->shape[2];
  rg_variable *in[2] = {a, b};
  rg_device dev = rgc_result_device(2, in);
  return rgc_outs_set1(out, typed(rg_dtype_promote(ta->dtype, tb->dtype), nd, shape, dev));
}

static int outer_make_node(rg_ctx *C, const rg_op *op, rg_variable *a, rg_variable *b,
                           rgc_outs *out) {
  if (check_dims(C, op, a, "the first input", 1, 1) || check_dims(C, op, b, "the second input", 1, 1))
    return RG_ERR_TYPE;
  int64_t shape[2] = {a->type->shape[0], b->type->shape[0]};
  rg_variable *in[2] = {a, b};
  rg_device dev = rgc_result_device(2, in);
  return rgc_outs_set1(out, typed(rg_dtype_promote(a->type->dtype, b->type->dtype), 2, shape, dev));
}

/* The BLAS forms: tensor dtypes equal and float; scalars cast safely. */
static int blas_dtypes(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                       const bool *scalar) {
  rg_dtype dt = in[0]->type->dtype;
  if (!rg_dtype_is_float(dt))
    return rgc_op_error(C, op, "needs float32 or float64 tensors, got %s", rg_dtype_name(dt));
  for (int i = 1; i < nin; i++) {
    rg_dtype d = in[i]->type->dtype;
    if (scalar[i]) {
      if (in[i]->type->ndim != 0)
        return rgc_op_error(C, op, "input %d must be a scalar, got %d dimensions", i,
                            in[i]->type->ndim);
      if (!rg_dtype_can_cast(d, dt) && !(in[i]->flags & RG_VAR_WEAK))
        return rgc_op_error(C, op, "scalar input %d of dtype %s does not cast safely to %s", i,
                            rg_dtype_name(d), rg_dtype_name(dt));
    } else if (d != dt) {
      return rgc_op_error(C, op, "tensor inputs must share one dtype, got %s and %s",
                          rg_dtype_name(dt), rg_dtype_name(d));
    }
  }
  return RG_OK;
}

/* The result of gemm, gemv and ger: the accumulator's type, on the device
 * where the operation runs (its first input off the host, as for every
 * op; an accumulator a rewrite made from host sizes reads host). */
static int acc_result(int nin, rg_variable *const *in, rgc_outs *out) {
  const rg_type *t = in[0]->type;
  rg_device dev = rgc_result_device(nin, in);
  return rgc_outs_set1(out, dev == t->device ? t : rg_type_on_device(t, dev));
}

static int inplace_ok(rg_ctx *C, const rg_op *op) {
  if (op->inplace > 0) return rgc_op_error(C, op, "can only work in place on input 0");
  return RG_OK;
}

static int gemm_make_node(rg_ctx *C, const rg_op *op, rg_variable *const *in, rgc_outs *out) {
  static const bool scalar[5] = {false, true, false, false, true};
  rg_variable *z = in[0], *x = in[2], *y = in[3];
  if (check_dims(C, op, z, "z", 2, 2) || check_dims(C, op, x, "x", 2, 2) ||
      check_dims(C, op, y, "y", 2, 2) || blas_dtypes(C, op, 5, in, scalar))
    return RG_ERR_TYPE;
  const int64_t *sz = z->type->shape, *sx = x->type->shape, *sy = y->type->shape;
  if (!agree(sx[1], sy[0])) return align_error(C, op, x, y);
  if (!agree(sz[0], sx[0]) || !agree(sz[1], sy[1]))
    return rgc_op_error(C, op, "z of shape %s does not match x @ y of shape (%s %s)",
                        rgc_shape_str(2, sz), sx[0] < 0 ? "?" : rgk_sprintf("%lld", (long long)sx[0]),
                        sy[1] < 0 ? "?" : rgk_sprintf("%lld", (long long)sy[1]));
  return acc_result(5, in, out);
}

static int gemv_make_node(rg_ctx *C, const rg_op *op, rg_variable *const *in, rgc_outs *out) {
  static const bool scalar[5] = {false, true, false, false, true};
  rg_variable *y = in[0], *A = in[2], *x = in[3];
  if (check_dims(C, op, y, "y", 1, 1) || check_dims(C, op, A, "A", 2, 2) ||
      check_dims(C, op, x, "x", 1, 1) || blas_dtypes(C, op, 5, in, scalar))
    return RG_ERR_TYPE;
  if (!agree(A->type->shape[1], x->type->shape[0])) return align_error(C, op, A, x);
  if (!agree(A->type->shape[0], y->type->shape[0]))
    return rgc_op_error(C, op, "y of shape %s does not match the rows of A %s",
                        rgc_shape_str(1, y->type->shape), rgc_shape_str(2, A->type->shape));
  return acc_result(5, in, out);
}

static int ger_make_node(rg_ctx *C, const rg_op *op, rg_variable *const *in, rgc_outs *out) {
  static const bool scalar[4] = {false, true, false, false};
  rg_variable *A = in[0], *x = in[2], *y = in[3];
  if (check_dims(C, op, A, "A", 2, 2) || check_dims(C, op, x, "x", 1, 1) ||
      check_dims(C, op, y, "y", 1, 1) || blas_dtypes(C, op, 4, in, scalar))
    return RG_ERR_TYPE;
  if (!agree(A->type->shape[0], x->type->shape[0]) || !agree(A->type->shape[1], y->type->shape[0]))
    return rgc_op_error(C, op, "A of shape %s does not match outer(x, y) of shapes %s and %s",
                        rgc_shape_str(2, A->type->shape), rgc_shape_str(1, x->type->shape),
                        rgc_shape_str(1, y->type->shape));
  return acc_result(4, in, out);
}

int rgc_blas_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in,
                       rgc_outs *out) {
  const rg_op *o = *op;
  switch (o->code) {
  case RG_OP_DOT: return dot_make_node(C, o, in[0], in[1], out);
  case RG_OP_OUTER: return outer_make_node(C, o, in[0], in[1], out);
  case RG_OP_BATCHED_DOT: return batched_dot_make_node(C, o, in[0], in[1], out);
  default: break;
  }
  if (inplace_ok(C, o)) return RG_ERR_TYPE;
  if (o->code == RG_OP_GEMM) return gemm_make_node(C, o, in, out);
  if (o->code == RG_OP_GEMV) return gemv_make_node(C, o, in, out);
  return ger_make_node(C, o, in, out);
}

int rgc_blas_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  const rg_type *ta = node->inputs[0]->type;
  switch (node->op->code) {
  case RG_OP_DOT: {
    const rg_type *tb = node->inputs[1]->type;
    rgc_shape s = rgk_alloc(2 * sizeof *s);
    int nd = 0;
    if (ta->ndim == 2) s[nd++] = in[0][0];
    if (tb->ndim == 2) s[nd++] = in[1][1];
    out[0] = s;
    return RG_OK;
  }
  case RG_OP_BATCHED_DOT: {
    const rg_type *tb = node->inputs[1]->type;
    rgc_shape s = rgk_alloc(3 * sizeof *s);
    int nd = 0;
    s[nd++] = in[0][0];
    if (ta->ndim == 3) s[nd++] = in[0][1];
    if (tb->ndim == 3) s[nd++] = in[1][2];
    out[0] = s;
    return RG_OK;
  }
  case RG_OP_OUTER: {
    rgc_shape s = rgk_alloc(2 * sizeof *s);
    s[0] = in[0][0];
    s[1] = in[1][0];
    out[0] = s;
    return RG_OK;
  }
  default: out[0] = in[0]; return RG_OK;
  }
}

/* ------------------------------------------------------------------ constructors */

static rg_variable *apply_n(rg_opcode code, int n, rg_variable *const *in) {
  return rg_apply(NULL, rg_op_get(code), n, in);
}

rg_variable *rg_dot(rg_variable *a, rg_variable *b) {
  rg_variable *in[2] = {a, b};
  return apply_n(RG_OP_DOT, 2, in);
}
rg_variable *rg_outer(rg_variable *x, rg_variable *y) {
  rg_variable *in[2] = {x, y};
  return apply_n(RG_OP_OUTER, 2, in);
}
rg_variable *rg_batched_dot(rg_variable *x, rg_variable *y) {
  rg_variable *in[2] = {x, y};
  return apply_n(RG_OP_BATCHED_DOT, 2, in);
}
rg_variable *rg_gemm(rg_variable *z, rg_variable *alpha, rg_variable *x, rg_variable *y,
                     rg_variable *beta) {
  rg_variable *in[5] = {z, alpha, x, y, beta};
  return apply_n(RG_OP_GEMM, 5, in);
}
rg_variable *rg_gemv(rg_variable *y, rg_variable *alpha, rg_variable *A, rg_variable *x,
                     rg_variable *beta) {
  rg_variable *in[5] = {y, alpha, A, x, beta};
  return apply_n(RG_OP_GEMV, 5, in);
}
rg_variable *rg_ger(rg_variable *A, rg_variable *alpha, rg_variable *x, rg_variable *y) {
  rg_variable *in[4] = {A, alpha, x, y};
  return apply_n(RG_OP_GER, 4, in);
}
