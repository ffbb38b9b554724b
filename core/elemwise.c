/*
 * elemwise.c — type inference of elementwise ops: broadcasting and dtype
 * promotion, and their shape inference.
 *
 * Promotion follows NumPy 2 (NEP 50).  Inputs split into strong ones
 * (every tensor and every constant not made from a literal) and weak ones
 * (literal scalars, flagged RG_VAR_WEAK).  The strong dtypes promote as
 * usual; a weak input only contributes its kind (bool < integer < float):
 * when its kind is above the strong result's, the result becomes the
 * promotion with that kind's default dtype (int64, float64); otherwise the
 * weak input takes the strong dtype, and an integer literal that does not
 * fit it is an error (NumPy 2 raises OverflowError), except in a
 * comparison, which computes in a dtype holding both (NumPy compares such
 * values exactly).  With no strong input the weak defaults promote among
 * themselves.  The rule itself is rg_dtype_result (type.c), which the
 * backends use for the dtype a comparison computes in.
 *
 * Broadcasting is decided statically (see graph.h): shapes align on the
 * right, a size-1 dimension stretches, two known sizes other than 1 must
 * agree, and an unknown size meeting a known size k != 1 gives k.
 */
#include "core/core-impl.h"

#include <math.h>

/* ------------------------------------------------------------------ dtypes */

/* NEP 50 promotion of in[0..n) (rg_dtype_result: the one definition the
 * backends share); a literal that does not fit is an error here. */
static rg_dtype promote_nep50(rg_ctx *C, const rg_op *op, int n, rg_variable *const *in, bool compare) {
  rg_operand small[8], *ops = n <= 8 ? small : rgk_alloc((size_t)n * sizeof *ops);
  for (int i = 0; i < n; i++) {
    ops[i] = (rg_operand){.dtype = in[i]->type->dtype, .weak = (in[i]->flags & RG_VAR_WEAK) != 0};
    ops[i].known = ops[i].weak && rg_dtype_is_int(ops[i].dtype) && rg_constant_get_i64(in[i], &ops[i].value);
  }
  int unfit;
  rg_dtype r = rg_dtype_result(n, ops, compare, &unfit);
  if (unfit < 0) return r;
  rgc_op_error(C, op, "the literal %lld does not fit %s", (long long)ops[unfit].value, rg_dtype_name(r));
  return RG_NDTYPES;
}

static rg_dtype float_of(rg_dtype dt, bool wide_ints) {
  if (rg_dtype_is_float(dt)) return dt;
  if (wide_ints) return RG_FLOAT64;
  return rg_dtype_size(dt) <= 2 ? RG_FLOAT32 : RG_FLOAT64;
}

rg_dtype rgc_ew_dtype(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in) {
  int rule = rgc_ew_rule(op->code);
  if (rule == EW_CAST) return op->dtype;
  if (rule == EW_SECOND) return in[1]->type->dtype;
  if (rule == EW_SWITCH) return promote_nep50(C, op, 2, in + 1, false);
  rg_dtype dt = promote_nep50(C, op, nin, in, rule == EW_COMPARE);
  if (dt == RG_NDTYPES) return dt;
  switch (rule) {
  case EW_PROMOTE_NUM:
    if (dt == RG_BOOL) {
      rgc_op_error(C, op, "not defined for bool inputs");
      return RG_NDTYPES;
    }
    return dt;
  case EW_INTDIV: return dt == RG_BOOL ? RG_INT8 : dt;
  case EW_FLOAT: return float_of(dt, false);
  case EW_TRUEDIV: return float_of(dt, true);
  case EW_COMPARE: return RG_BOOL;
  case EW_BITWISE:
    if (rg_dtype_is_float(dt)) {
      rgc_op_error(C, op, "needs bool or integer inputs, got %s", rg_dtype_name(dt));
      return RG_NDTYPES;
    }
    return dt;
  default: return dt;
  }
}

/* ------------------------------------------------------------------ shapes */

static const rg_type *const *input_types(int nin, rg_variable *const *in, const rg_type **buf) {
  for (int i = 0; i < nin; i++) buf[i] = in[i]->type;
  return buf;
}

static int broadcast_error(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in, int dim) {
  char *list = rgk_strdup("");
  for (int i = 0; i < nin; i++)
    list = rgk_sprintf("%s%s%s", list, i ? (i == nin - 1 ? " and " : ", ") : "",
                       rgc_shape_str(in[i]->type->ndim, in[i]->type->shape));
  return rgc_op_error(C, op, "shapes %s do not broadcast (dimension %d)", list, dim);
}

/* Where the output lives: the device of the first input off the host
 * (constants aside); inputs elsewhere are copied there by the linker. */
rg_device rgc_result_device(int nin, rg_variable *const *in) {
  for (int i = 0; i < nin; i++)
    if (!rg_is_constant(in[i]) && in[i]->type->device != RG_DEVICE_HOST) return in[i]->type->device;
  return RG_DEVICE_HOST;
}

const rg_type *rgc_broadcast_type(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                                  rg_dtype dt) {
  const rg_type *small[8] = {0};
  const rg_type **buf = nin <= 8 ? small : rgk_alloc((size_t)nin * sizeof *buf);
  int64_t shape[RG_MAX_NDIM];
  int bad = 0;
  int nd = rgc_broadcast(nin, input_types(nin, in, buf), shape, &bad);
  if (nd < 0) {
    broadcast_error(C, op, nin, in, bad);
    return NULL;
  }
  rg_device dev = rgc_result_device(nin, in);
  /* reuse an input's type object when equal */
  for (int i = 0; i < nin; i++) {
    const rg_type *t = in[i]->type;
    if (t->dtype == dt && t->ndim == nd && t->device == dev &&
        !memcmp(t->shape, shape, (size_t)nd * sizeof(int64_t)))
      return t;
  }
  if (nd == 0 && dev == RG_DEVICE_HOST) return rg_type_scalar(dt);
  rg_type *t = (rg_type *)rgc_type_alloc(dt, nd, dev);
  memcpy(t->shape, shape, (size_t)nd * sizeof(int64_t));
  return t;
}

static int check_inplace(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                         const rg_type *out) {
  if (op->inplace < 0) return RG_OK;
  if (op->inplace >= nin) return rgc_op_error(C, op, "in-place input %d does not exist", op->inplace);
  if (!rg_type_equal(in[op->inplace]->type, out))
    return rgc_op_error(C, op, "cannot work in place on input %d: its type %s differs from the "
                        "output's %s", op->inplace, rg_type_str(in[op->inplace]->type),
                        rg_type_str(out));
  return RG_OK;
}

int rgc_ew_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out) {
  rg_dtype dt = rgc_ew_dtype(C, *op, nin, in);
  if (dt == RG_NDTYPES) return RG_ERR_TYPE;
  const rg_type *t = rgc_broadcast_type(C, *op, nin, in, dt);
  if (!t) return RG_ERR_TYPE;
  if (check_inplace(C, *op, nin, in, t) != RG_OK) return RG_ERR_TYPE;
  return rgc_outs_set1(out, t);
}

/* Output dimension d from input shapes: a known size, else the symbolic
 * size of the first input whose dimension is not statically 1. */
static rg_variable *broadcast_dim(rg_ctx *C, const rg_node *node, rgc_shape const *in, int d,
                                  int nd) {
  rg_variable *cand = NULL;
  for (int k = 0; k < node->nin; k++) {
    const rg_type *t = node->inputs[k]->type;
    int dd = d - (nd - t->ndim);
    if (dd < 0 || t->shape[dd] == 1) continue;
    if (t->shape[dd] >= 0) return rgc_dim_const(C, t->shape[dd]);
    if (!cand) cand = in[k][dd];
  }
  return cand ? cand : rgc_dim_const(C, 1);
}

int rgc_ew_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  int nd = node->outputs[0]->type->ndim;
  rgc_shape s = rgk_alloc((size_t)(nd ? nd : 1) * sizeof *s);
  for (int d = 0; d < nd; d++) s[d] = broadcast_dim(C, node, in, d, nd);
  out[0] = s;
  return RG_OK;
}
