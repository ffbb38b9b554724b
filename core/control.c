/*
 * control.c — ifelse, and opaque ops.
 *
 * ifelse(cond, then_1 .. then_n, else_1 .. else_n) has n outputs: output i
 * is then_i when the scalar cond is true (non-zero), else else_i.  A
 * backend evaluates only the branch taken (a lazy thunk).  then_i and
 * else_i must have the same dtype, number of dimensions and device; a
 * dimension of the output is known when it is known and equal in both.
 *
 * Opaque ops are declared by name for rewriting experiments without
 * kernels: any number of inputs, `nout` outputs, each of the declared type
 * or, without one, of the elementwise result type of the inputs.
 */
#include "core/core-impl.h"

/* ------------------------------------------------------------------ ifelse */

static const rg_type *join_types(const rg_type *a, const rg_type *b) {
  if (rg_type_equal(a, b)) return a;
  rg_type *t = (rg_type *)rgc_type_alloc(a->dtype, a->ndim, a->device);
  for (int d = 0; d < a->ndim; d++)
    t->shape[d] = a->shape[d] == b->shape[d] ? a->shape[d] : RG_DIM_UNKNOWN;
  return t;
}

int rgc_control_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in,
                          rgc_outs *out) {
  if (nin % 2 == 0)
    return rgc_op_error(C, *op, "expected a condition and pairs of branches (an odd number of "
                        "inputs), got %d inputs", nin);
  if (in[0]->type->ndim != 0)
    return rgc_op_error(C, *op, "the condition must be a scalar, got %d dimensions",
                        in[0]->type->ndim);
  int n = (nin - 1) / 2;
  rgc_outs_alloc(out, n);
  for (int i = 0; i < n; i++) {
    const rg_type *a = in[1 + i]->type, *b = in[1 + n + i]->type;
    /* branches may live on different devices: the output lives where the
     * `then` value does (join_types), and the linker moves the `else`
     * value there */
    if (a->dtype != b->dtype || a->ndim != b->ndim)
      return rgc_op_error(C, *op, "branches of output %d differ: %s and %s", i, rg_type_str(a),
                          rg_type_str(b));
    out->types[i] = join_types(a, b);
  }
  return RG_OK;
}

int rgc_control_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  int n = node->nout;
  rg_variable *cond = node->inputs[0];
  for (int i = 0; i < n; i++) {
    const rg_type *t = node->outputs[i]->type;
    rgc_shape s = rgk_alloc((size_t)(t->ndim ? t->ndim : 1) * sizeof *s);
    for (int d = 0; d < t->ndim; d++) {
      rg_variable *a = in[1 + i][d], *b = in[1 + n + i][d];
      if (t->shape[d] >= 0)
        s[d] = rgc_dim_const(C, t->shape[d]);
      else
        s[d] = a == b ? a : rg_switch(cond, a, b);
    }
    out[i] = s;
  }
  return RG_OK;
}

rg_node *rg_ifelse(rg_variable *cond, int n, rg_variable *const *thens,
                   rg_variable *const *elses) {
  if (!cond || n < 1) return NULL;
  rg_variable **in = rgk_alloc((size_t)(2 * n + 1) * sizeof *in);
  in[0] = cond;
  memcpy(in + 1, thens, (size_t)n * sizeof *in);
  memcpy(in + 1 + n, elses, (size_t)n * sizeof *in);
  return rg_make_node(NULL, rg_op_get(RG_OP_IFELSE), 2 * n + 1, in);
}

/* ------------------------------------------------------------------ opaque ops */

int rgc_opaque_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in,
                         rgc_outs *out) {
  const rg_op *o = *op;
  const rg_type *t = o->out_type;
  if (!t) {
    if (nin == 0)
      return rgc_op_error(C, o, "an opaque op without inputs needs a declared output type");
    rg_dtype dt = rgc_ew_dtype(C, rg_op_get(RG_OP_ADD), nin, in); /* NEP 50, as elementwise */
    if (dt == RG_NDTYPES) return RG_ERR_TYPE;
    t = rgc_broadcast_type(C, o, nin, in, dt);
    if (!t) return RG_ERR_TYPE;
  }
  rgc_outs_alloc(out, o->nout);
  for (int i = 0; i < o->nout; i++) out->types[i] = t;
  return RG_OK;
}

int rgc_opaque_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  if (!node->op->out_type && node->nout > 0) {
    rgc_ew_infer_shape(C, node, in, out);
    for (int i = 1; i < node->nout; i++) out[i] = out[0];
    return RG_OK;
  }
  /* declared types: known dimensions only; the rest stay NULL (unknown) */
  for (int i = 0; i < node->nout; i++) {
    const rg_type *t = node->outputs[i]->type;
    rgc_shape s = rgk_alloc((size_t)(t->ndim ? t->ndim : 1) * sizeof *s);
    for (int d = 0; d < t->ndim; d++)
      s[d] = t->shape[d] >= 0 ? rgc_dim_const(C, t->shape[d]) : NULL;
    out[i] = s;
  }
  return RG_OK;
}
