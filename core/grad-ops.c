/*
 * grad-ops.c — the gradient of every op: the vector-Jacobian product of
 * its inputs from its outputs' gradients, built as a graph.
 *
 * Each op class names its gradient function in the class table (op.c sets
 * `.grad = rgc_grad_CODE` for every entry of RG_OP_TABLE); this file
 * defines them all.  A gradient function receives the node and one
 * gradient per output (NULL: that output's gradient is zero, nothing
 * flows through it) and fills one gradient per input: NULL means the
 * input is disconnected (integer and boolean values, shapes, indices,
 * conditions), anything else is a contribution the driver (grad.c) sums
 * back to the input's type.  So rules here write the plain formula in the
 * output's (broadcast) shape and never deal with broadcasting, dtypes or
 * accumulation.  Forward values are reused, never recomputed: a rule
 * refers to the node's own outputs (exp's gradient multiplies by the exp
 * already computed).
 *
 * Non-differentiable points follow Aesara: abs' gradient at 0 is 0 (sign),
 * maximum/minimum give ties to the first operand (and a NaN result to the
 * second), max/min reductions send the gradient to every element equal to
 * the result, floor, ceil, round and sign have zero gradients.  An op
 * without a gradient (opaque) fails with a message naming it.
 */
#include "core/core-impl.h"

#include <math.h>

typedef rg_variable *V;

/* ------------------------------------------------------------------ small builders */

static V lit(rg_ctx *C, double v) { return rg_scalar_float(C, v); }

/* Zeros (or ones) of x's type; dtype dt. */
static V filled(rg_ctx *C, V x, rg_dtype dt, double v) { return rg_second(x, rg_constant_scalar(C, dt, v)); }
V rgc_zeros_like(rg_ctx *C, V x) { return filled(C, x, x->type->dtype, 0); }

/* The gradient of output k, zeros when none flows. */
static V og_or_zero(rg_ctx *C, const rg_node *n, V const *og, int k) {
  return og[k] ? og[k] : rgc_zeros_like(C, n->outputs[k]);
}

static bool differentiable(const rg_variable *v) { return rg_dtype_is_float(v->type->dtype); }

/* where(cond, g, 0) in g's dtype */
static V keep_where(rg_ctx *C, V cond, V g) { return rg_switch(cond, g, rg_constant_scalar(C, g->type->dtype, 0)); }

/* x with the given axes of a reduction added back as broadcastable
 * dimensions (rank ndim after). */
static V expand_axes(V x, int ndim, const bool *reduced) {
  int64_t order[RG_MAX_NDIM];
  int k = 0;
  for (int d = 0; d < ndim; d++) order[d] = reduced[d] ? -1 : k++;
  return rg_dimshuffle(x, ndim, order);
}

/* The reduced axes of a reduction node over an input of rank ndim. */
static void reduced_mask(const rg_op *op, int ndim, bool *mask) {
  for (int d = 0; d < ndim; d++) mask[d] = op->all_axes;
  for (int i = 0; i < op->nints; i++) mask[op->ints[i]] = true;
}

/* ------------------------------------------------------------------ the signature */

#define GRAD_FN(name) \
  static int name(rg_ctx *C, const rg_node *n, V const *og, V *ig)
#define ALIAS(code, fn)                                                   \
  int rgc_grad_##code(rg_ctx *C, const rg_node *n, V const *og, V *ig, const bool *need) { \
    (void)need;                                                           \
    return fn(C, n, og, ig);                                              \
  }

/* Disconnected from every input: comparisons, logic, shapes, indices. */
GRAD_FN(none) { return RG_OK; }

GRAD_FN(not_differentiable) {
  return rg_error(C, RG_ERR_TYPE, "grad: op %s has no gradient", rg_op_name(n->op));
}

/* Connected, but zero almost everywhere (floor, ceil, round, sign). */
GRAD_FN(zero) {
  if (differentiable(n->inputs[0])) ig[0] = rgc_zeros_like(C, n->inputs[0]);
  return RG_OK;
}

/* ------------------------------------------------------------------ elementwise arithmetic */

GRAD_FN(g_add) {
  V g = og_or_zero(C, n, og, 0);
  for (int i = 0; i < n->nin; i++) ig[i] = g;
  return RG_OK;
}

GRAD_FN(g_mul) {
  V g = og_or_zero(C, n, og, 0);
  for (int i = 0; i < n->nin; i++) {
    V others = NULL;
    for (int j = 0; j < n->nin; j++)
      if (j != i) others = others ? rg_mul(others, n->inputs[j]) : n->inputs[j];
    ig[i] = others ? rg_mul(g, others) : g;
  }
  return RG_OK;
}

GRAD_FN(g_sub) {
  V g = og_or_zero(C, n, og, 0);
  ig[0] = g;
  ig[1] = rg_neg(g);
  return RG_OK;
}

GRAD_FN(g_true_div) {
  V g = og_or_zero(C, n, og, 0), b = n->inputs[1];
  ig[0] = rg_true_div(g, b);
  ig[1] = rg_neg(rg_true_div(rg_mul(g, n->outputs[0]), b));
  return RG_OK;
}

/* a // b and a % b on floats: floor division is flat, a % b = a - b * floor(a / b). */
GRAD_FN(g_int_div) {
  for (int i = 0; i < 2; i++) ig[i] = rgc_zeros_like(C, n->outputs[0]);
  return RG_OK;
}

GRAD_FN(g_mod) {
  V g = og_or_zero(C, n, og, 0);
  ig[0] = g;
  ig[1] = rg_neg(rg_mul(g, rg_floor(rg_true_div(n->inputs[0], n->inputs[1]))));
  return RG_OK;
}

GRAD_FN(g_neg) {
  ig[0] = rg_neg(og_or_zero(C, n, og, 0));
  return RG_OK;
}

GRAD_FN(g_abs) {
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_sign(n->inputs[0]));
  return RG_OK;
}

GRAD_FN(g_exp) {
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), n->outputs[0]);
  return RG_OK;
}

GRAD_FN(g_log) {
  ig[0] = rg_true_div(og_or_zero(C, n, og, 0), n->inputs[0]);
  return RG_OK;
}

GRAD_FN(g_log1p) {
  ig[0] = rg_true_div(og_or_zero(C, n, og, 0), rg_add(n->inputs[0], lit(C, 1)));
  return RG_OK;
}

GRAD_FN(g_expm1) {
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_add(n->outputs[0], lit(C, 1)));
  return RG_OK;
}

GRAD_FN(g_sqrt) {
  ig[0] = rg_true_div(og_or_zero(C, n, og, 0), rg_mul(n->outputs[0], lit(C, 2)));
  return RG_OK;
}

GRAD_FN(g_sqr) {
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_mul(n->inputs[0], lit(C, 2)));
  return RG_OK;
}

GRAD_FN(g_pow) {
  V g = og_or_zero(C, n, og, 0), a = n->inputs[0], b = n->inputs[1];
  ig[0] = rg_mul(g, rg_mul(b, rg_pow(a, rg_sub(b, lit(C, 1)))));
  /* d/db a^b = a^b log a, taken as 0 where a is 0 (Aesara's choice; the
   * log reads 1 there, so no branch computes 0 * -inf, nor its derivative
   * 1 / 0 in a second gradient) */
  V zero = rg_eq_elem(a, lit(C, 0));
  V la = rg_log(rg_switch(zero, lit(C, 1), a));
  ig[1] = rg_switch(zero, lit(C, 0), rg_mul(g, rg_mul(n->outputs[0], la)));
  return RG_OK;
}

GRAD_FN(g_sin) {
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_cos(n->inputs[0]));
  return RG_OK;
}

GRAD_FN(g_cos) {
  ig[0] = rg_neg(rg_mul(og_or_zero(C, n, og, 0), rg_sin(n->inputs[0])));
  return RG_OK;
}

GRAD_FN(g_tanh) {
  V y = n->outputs[0];
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_sub(lit(C, 1), rg_sqr(y)));
  return RG_OK;
}

GRAD_FN(g_sigmoid) {
  V y = n->outputs[0];
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_mul(y, rg_sub(lit(C, 1), y)));
  return RG_OK;
}

GRAD_FN(g_softplus) {
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), rg_sigmoid(n->inputs[0]));
  return RG_OK;
}

GRAD_FN(g_erf) {
  V x = n->inputs[0];
  V d = rg_mul(lit(C, 2.0 / sqrt(M_PI)), rg_exp(rg_neg(rg_sqr(x))));
  ig[0] = rg_mul(og_or_zero(C, n, og, 0), d);
  return RG_OK;
}

/* As Aesara's: the first operand takes the gradient where the result is
 * that operand (ties included), the second everywhere else (also where
 * the result is NaN). */
GRAD_FN(g_maximum) {
  V g = og_or_zero(C, n, og, 0), first = rg_ge(n->inputs[0], n->inputs[1]);
  ig[0] = keep_where(C, first, g);
  ig[1] = keep_where(C, rg_not(first), g);
  return RG_OK;
}

GRAD_FN(g_minimum) {
  V g = og_or_zero(C, n, og, 0), first = rg_le(n->inputs[0], n->inputs[1]);
  ig[0] = keep_where(C, first, g);
  ig[1] = keep_where(C, rg_not(first), g);
  return RG_OK;
}

/* clip(x, lo, hi) = minimum(maximum(x, lo), hi), also when lo > hi. */
GRAD_FN(g_clip) {
  V g = og_or_zero(C, n, og, 0), x = n->inputs[0], lo = n->inputs[1], hi = n->inputs[2];
  V below_hi = rg_le(rg_maximum(x, lo), hi);
  ig[0] = keep_where(C, rg_and(rg_ge(x, lo), below_hi), g);
  ig[1] = keep_where(C, rg_and(rg_lt(x, lo), below_hi), g);
  ig[2] = keep_where(C, rg_not(below_hi), g);
  return RG_OK;
}

GRAD_FN(g_switch) {
  V g = og_or_zero(C, n, og, 0), c = n->inputs[0];
  V z = rg_constant_scalar(C, g->type->dtype, 0);
  ig[1] = rg_switch(c, g, z);
  ig[2] = rg_switch(c, z, g);
  return RG_OK;
}

/* A cast's gradient casts back (the driver casts to the input's dtype). */
GRAD_FN(g_identity) {
  ig[0] = og_or_zero(C, n, og, 0);
  return RG_OK;
}

/* second(model, value): the value filled to the model's shape. */
GRAD_FN(g_second) {
  ig[1] = og_or_zero(C, n, og, 0);
  if (differentiable(n->inputs[0])) ig[0] = rgc_zeros_like(C, n->inputs[0]);
  return RG_OK;
}

ALIAS(ADD, g_add)
ALIAS(MUL, g_mul)
ALIAS(SUB, g_sub)
ALIAS(TRUE_DIV, g_true_div)
ALIAS(INT_DIV, g_int_div)
ALIAS(MOD, g_mod)
ALIAS(NEG, g_neg)
ALIAS(ABS, g_abs)
ALIAS(EXP, g_exp)
ALIAS(LOG, g_log)
ALIAS(LOG1P, g_log1p)
ALIAS(EXPM1, g_expm1)
ALIAS(SQRT, g_sqrt)
ALIAS(SQR, g_sqr)
ALIAS(POW, g_pow)
ALIAS(SIN, g_sin)
ALIAS(COS, g_cos)
ALIAS(TANH, g_tanh)
ALIAS(SIGMOID, g_sigmoid)
ALIAS(SOFTPLUS, g_softplus)
ALIAS(ERF, g_erf)
ALIAS(MAXIMUM, g_maximum)
ALIAS(MINIMUM, g_minimum)
ALIAS(FLOOR, zero)
ALIAS(CEIL, zero)
ALIAS(ROUND, zero)
ALIAS(SIGN, zero)
ALIAS(CLIP, g_clip)
ALIAS(LT, none)
ALIAS(GT, none)
ALIAS(LE, none)
ALIAS(GE, none)
ALIAS(EQ, none)
ALIAS(NEQ, none)
ALIAS(AND, none)
ALIAS(OR, none)
ALIAS(XOR, none)
ALIAS(NOT, none)
ALIAS(SWITCH, g_switch)
ALIAS(CAST, g_identity)
ALIAS(IDENTITY, g_identity)
ALIAS(SECOND, g_second)

/* ------------------------------------------------------------------ structure */

/* The inverse permutation; dimensions the dimshuffle dropped (size 1)
 * come back, the ones it added go. */
GRAD_FN(g_dimshuffle) {
  const rg_op *op = n->op;
  int ndim = n->inputs[0]->type->ndim;
  V g = og_or_zero(C, n, og, 0);
  int64_t drop[RG_MAX_NDIM], inv[RG_MAX_NDIM];
  int nkeep = 0, ndrop = 0;
  for (int i = 0; i < op->nints; i++)
    if (op->ints[i] < 0) drop[ndrop++] = i;
  if (ndrop) g = rg_sum(g, ndrop, drop);
  for (int d = 0; d < ndim; d++) inv[d] = -1;
  for (int i = 0; i < op->nints; i++)
    if (op->ints[i] >= 0) inv[op->ints[i]] = nkeep++;
  ig[0] = rg_dimshuffle(g, ndim, inv);
  return RG_OK;
}

GRAD_FN(g_reshape) {
  ig[0] = rg_reshape(og_or_zero(C, n, og, 0), rg_shape(n->inputs[0]), n->inputs[0]->type->ndim);
  return RG_OK;
}

/* alloc(value, dims...): the value was broadcast; the driver sums back. */
GRAD_FN(g_alloc) {
  ig[0] = og_or_zero(C, n, og, 0);
  return RG_OK;
}

GRAD_FN(g_make_vector) {
  V g = og_or_zero(C, n, og, 0);
  for (int i = 0; i < n->nin; i++) {
    rg_index e = {RG_IDX_INDEX, i, RG_IDX_NONE, RG_IDX_NONE};
    ig[i] = rg_subtensor(g, 1, &e, 0, NULL);
  }
  return RG_OK;
}

/* x[:, start:stop] along axis, start and stop scalar variables. */
V rgc_slice_along(V x, int axis, V start, V stop) {
  rg_index e[RG_MAX_NDIM];
  for (int d = 0; d < axis; d++) e[d] = (rg_index){RG_IDX_SLICE, RG_IDX_NONE, RG_IDX_NONE, RG_IDX_NONE};
  e[axis] = (rg_index){RG_IDX_SLICE, RG_IDX_INPUT, RG_IDX_INPUT, RG_IDX_NONE};
  return rg_subtensor(x, axis + 1, e, 2, (V[]){start, stop});
}

/* join: each input gets its slice of the gradient. */
GRAD_FN(g_join) {
  int axis = (int)n->op->ints[0];
  V g = og_or_zero(C, n, og, 0), at = rgc_dim_const(C, 0);
  for (int i = 0; i < n->nin; i++) {
    V end = rgc_iarith(C, 0, at, rg_shape_of(C, n->inputs[i])[axis]);
    ig[i] = rgc_slice_along(g, axis, at, end);
    at = end;
  }
  return RG_OK;
}

/* split: the outputs' gradients joined back (zeros where none flows). */
GRAD_FN(g_split) {
  V parts[n->nout];
  for (int k = 0; k < n->nout; k++) parts[k] = og_or_zero(C, n, og, k);
  ig[0] = rg_join((int)n->op->ints[0], n->nout, parts);
  return RG_OK;
}

/* The index entries and index inputs of a subtensor-family node (its
 * index inputs start at `first`). */
static int index_inputs(const rg_node *n, int first, V *idx) {
  for (int i = first; i < n->nin; i++) idx[i - first] = n->inputs[i];
  return n->nin - first;
}

GRAD_FN(g_subtensor) {
  V idx[n->nin], g = og_or_zero(C, n, og, 0);
  int k = index_inputs(n, 1, idx);
  const rg_index *e = (const rg_index *)n->op->ints;
  ig[0] = rg_inc_subtensor(rgc_zeros_like(C, n->inputs[0]), g, n->op->nints / 4, e, k, idx);
  return RG_OK;
}

GRAD_FN(g_inc_subtensor) {
  V idx[n->nin], g = og_or_zero(C, n, og, 0);
  int k = index_inputs(n, 2, idx);
  const rg_index *e = (const rg_index *)n->op->ints;
  ig[0] = g;
  ig[1] = rg_subtensor(g, n->op->nints / 4, e, k, idx);
  return RG_OK;
}

GRAD_FN(g_set_subtensor) {
  V idx[n->nin], g = og_or_zero(C, n, og, 0);
  int k = index_inputs(n, 2, idx);
  const rg_index *e = (const rg_index *)n->op->ints;
  int ne = n->op->nints / 4;
  ig[0] = rg_set_subtensor(g, rg_constant_scalar(C, g->type->dtype, 0), ne, e, k, idx);
  ig[1] = rg_subtensor(g, ne, e, k, idx);
  return RG_OK;
}

ALIAS(DIMSHUFFLE, g_dimshuffle)
ALIAS(RESHAPE, g_reshape)
ALIAS(FLATTEN, g_reshape)
ALIAS(SHAPE, none)
ALIAS(SHAPE_I, none)
ALIAS(ALLOC, g_alloc)
ALIAS(ALLOC_EMPTY, none)
ALIAS(MAKE_VECTOR, g_make_vector)
ALIAS(JOIN, g_join)
ALIAS(SPLIT, g_split)
ALIAS(SUBTENSOR, g_subtensor)
ALIAS(INC_SUBTENSOR, g_inc_subtensor)
ALIAS(SET_SUBTENSOR, g_set_subtensor)
ALIAS(ARANGE, none)

/* ------------------------------------------------------------------ reductions */

/* The output's gradient spread back over the reduced axes. */
static V spread(rg_ctx *C, const rg_node *n, V g) {
  V x = n->inputs[0];
  bool mask[RG_MAX_NDIM];
  reduced_mask(n->op, x->type->ndim, mask);
  return rg_second(x, expand_axes(g, x->type->ndim, mask));
}

/* The number of elements each output element reduces, as a scalar. */
static V reduced_count(rg_ctx *C, const rg_node *n) {
  V x = n->inputs[0], k = rgc_dim_const(C, 1);
  bool mask[RG_MAX_NDIM];
  reduced_mask(n->op, x->type->ndim, mask);
  V *shape = rg_shape_of(C, x);
  for (int d = 0; d < x->type->ndim; d++)
    if (mask[d]) k = rgc_iarith(C, 2, k, shape[d]);
  return k;
}

GRAD_FN(g_sum) {
  ig[0] = spread(C, n, og_or_zero(C, n, og, 0));
  return RG_OK;
}

GRAD_FN(g_mean) {
  V g = og_or_zero(C, n, og, 0);
  ig[0] = spread(C, n, rg_true_div(g, rg_cast(reduced_count(C, n), g->type->dtype)));
  return RG_OK;
}

/* prod with zeros.  Per slice, with P the product of its non-zero
 * elements and z the sum of its zeros (0, but differentiable: it is each
 * zero's own value), the gradient prod_{j != i} x_j is written so that its
 * own gradient is right too (second derivatives; Aesara refuses them):
 *   no zero:    prod / x_i
 *   one zero:   P at the zero; z * P / x_i elsewhere
 *   two zeros:  (z - x_i) * P at each zero (the other zero times P); 0 elsewhere
 *   more:       0 (every second derivative is 0 there too).
 * Each form is prod_{j != i} x_j itself as a function near x (x_i != 0
 * where it divides), so every order is exact but for the constant 0s of
 * slices with two zeros or more: exact there to the second order.
 * Divisions are by `others` (x with its zeros as 1): the branches not
 * taken are computed too, and a 0 / 0 there would make the gradient of
 * this gradient NaN through the switch. */
GRAD_FN(g_prod) {
  V x = n->inputs[0], g = og_or_zero(C, n, og, 0);
  rg_dtype dt = x->type->dtype;
  const rg_op *sum = rg_op_reduce(RG_OP_SUM, n->op->all_axes ? -1 : n->op->nints, n->op->ints);
  const rg_op *prod = n->op;
  V zero = rg_constant_scalar(C, dt, 0), is0 = rg_eq_elem(x, zero);
  V nzeros = rg_apply(C, sum, 1, &is0);
  V others = rg_switch(is0, rg_constant_scalar(C, dt, 1), x);
  V zeros_only = rg_switch(is0, x, zero);
  V gP = spread(C, n, rg_mul(g, rg_apply(C, prod, 1, &others)));
  V z = spread(C, n, rg_apply(C, sum, 1, &zeros_only));
  V count[3];
  for (int k = 0; k < 3; k++) count[k] = spread(C, n, rg_eq_elem(nzeros, rg_constant_scalar(C, RG_INT64, k)));
  V plain = rg_true_div(spread(C, n, rg_mul(g, n->outputs[0])), others);
  V one = rg_switch(is0, gP, rg_true_div(rg_mul(z, gP), others));
  V two = rg_switch(is0, rg_mul(rg_sub(z, x), gP), zero);
  V gzero = rg_constant_scalar(C, g->type->dtype, 0);
  ig[0] = rg_switch(count[0], plain, rg_switch(count[1], one, rg_switch(count[2], two, gzero)));
  return RG_OK;
}

/* max and min: the gradient goes to every element equal to the result,
 * as Aesara's does (all elements of a tie; none where the result is NaN). */
GRAD_FN(g_max_min) {
  V x = n->inputs[0], g = og_or_zero(C, n, og, 0);
  int nd = x->type->ndim;
  bool mask[RG_MAX_NDIM], any = false;
  reduced_mask(n->op, nd, mask);
  for (int d = 0; d < nd; d++) any |= mask[d];
  if (!any) { /* over no axes: the identity */
    ig[0] = g;
    return RG_OK;
  }
  V hit = rg_eq_elem(x, expand_axes(n->outputs[0], nd, mask));
  ig[0] = keep_where(C, hit, spread(C, n, g));
  return RG_OK;
}

/* softmax: (g - sum(g * y)) * y along the axis. */
GRAD_FN(g_softmax) {
  V y = n->outputs[0], g = og_or_zero(C, n, og, 0);
  int64_t axis = n->op->ints[0];
  bool mask[RG_MAX_NDIM] = {false};
  mask[axis] = true;
  V s = expand_axes(rg_sum(rg_mul(g, y), 1, &axis), y->type->ndim, mask);
  ig[0] = rg_mul(rg_sub(g, s), y);
  return RG_OK;
}

/* log_softmax: g - exp(y) * sum(g) along the axis. */
GRAD_FN(g_log_softmax) {
  V y = n->outputs[0], g = og_or_zero(C, n, og, 0);
  int64_t axis = n->op->ints[0];
  bool mask[RG_MAX_NDIM] = {false};
  mask[axis] = true;
  V s = expand_axes(rg_sum(g, 1, &axis), y->type->ndim, mask);
  ig[0] = rg_sub(g, rg_mul(rg_exp(y), s));
  return RG_OK;
}

ALIAS(SUM, g_sum)
ALIAS(PROD, g_prod)
ALIAS(MAX, g_max_min)
ALIAS(MIN, g_max_min)
ALIAS(MEAN, g_mean)
ALIAS(ARGMAX, none)
ALIAS(ARGMIN, none)
ALIAS(ALL, none)
ALIAS(ANY, none)
ALIAS(SOFTMAX, g_softmax)
ALIAS(LOG_SOFTMAX, g_log_softmax)

/* ------------------------------------------------------------------ linear algebra */

/* d(a @ b): by the ranks of a and b (1 or 2). */
static void dot_grads(V g, V a, V b, V *ga, V *gb) {
  int ra = a->type->ndim, rb = b->type->ndim;
  if (ra == 2 && rb == 2) {
    *ga = rg_dot(g, rg_transpose(b));
    *gb = rg_dot(rg_transpose(a), g);
  } else if (ra == 2) {            /* matrix @ vector */
    *ga = rg_outer(g, b);
    *gb = rg_dot(rg_transpose(a), g);
  } else if (rb == 2) {            /* vector @ matrix */
    *ga = rg_dot(b, g);
    *gb = rg_outer(a, g);
  } else {                         /* vector @ vector: g is a scalar */
    *ga = rg_mul(g, b);
    *gb = rg_mul(g, a);
  }
}

GRAD_FN(g_dot) {
  dot_grads(og_or_zero(C, n, og, 0), n->inputs[0], n->inputs[1], &ig[0], &ig[1]);
  return RG_OK;
}

GRAD_FN(g_outer) {
  V g = og_or_zero(C, n, og, 0);
  ig[0] = rg_dot(g, n->inputs[1]);
  ig[1] = rg_dot(rg_transpose(g), n->inputs[0]);
  return RG_OK;
}

/* x with a dimension of 1 added at position `at` (1 or 2). */
static V with_unit(V x, int at) {
  int64_t order[3];
  int n = 0;
  for (int i = 0; i < x->type->ndim; i++) {
    if (i == at) order[n++] = -1;
    order[n++] = i;
  }
  if (at == x->type->ndim) order[n++] = -1;
  return rg_dimshuffle(x, n, order);
}

/* batched_dot(x, y): per batch index, the gradients of dot, each written
 * as a batched product again.  An operand of rank 2 (a vector per batch
 * index) takes part as a matrix of one row (x) or one column (y), and the
 * output's gradient g gets the matching dimension of 1. */
GRAD_FN(g_batched_dot) {
  V g = og_or_zero(C, n, og, 0), x = n->inputs[0], y = n->inputs[1];
  bool xm = x->type->ndim == 3, ym = y->type->ndim == 3;
  static const int64_t swap[3] = {0, 2, 1};
  V x3 = xm ? x : with_unit(x, 1), y3 = ym ? y : with_unit(y, 2);
  V g3 = !xm ? with_unit(g, 1) : g;
  if (!ym) g3 = with_unit(g3, 2);
  V gx = rg_batched_dot(g3, rg_dimshuffle(y3, 3, swap)); /* (B, n, k) */
  V gy = rg_batched_dot(rg_dimshuffle(x3, 3, swap), g3); /* (B, k, m) */
  static const int64_t drop1[2] = {0, 2}, drop2[2] = {0, 1};
  ig[0] = xm ? gx : rg_dimshuffle(gx, 2, drop1);
  ig[1] = ym ? gy : rg_dimshuffle(gy, 2, drop2);
  return RG_OK;
}

/* gemm(z, alpha, x, y, beta) = beta z + alpha (x @ y); gemv alike. */
GRAD_FN(g_gemm_gemv) {
  V g = og_or_zero(C, n, og, 0), z = n->inputs[0], alpha = n->inputs[1], beta = n->inputs[4];
  V x = n->inputs[2], y = n->inputs[3], xy = rg_dot(x, y), gx, gy;
  dot_grads(g, x, y, &gx, &gy);
  ig[0] = rg_mul(g, beta);
  ig[1] = rg_sum(rg_mul(g, xy), -1, NULL);
  ig[2] = rg_mul(gx, alpha);
  ig[3] = rg_mul(gy, alpha);
  ig[4] = rg_sum(rg_mul(g, z), -1, NULL);
  return RG_OK;
}

/* ger(A, alpha, x, y) = A + alpha outer(x, y) */
GRAD_FN(g_ger) {
  V g = og_or_zero(C, n, og, 0), alpha = n->inputs[1], x = n->inputs[2], y = n->inputs[3];
  ig[0] = g;
  ig[1] = rg_sum(rg_mul(g, rg_outer(x, y)), -1, NULL);
  ig[2] = rg_mul(rg_dot(g, y), alpha);
  ig[3] = rg_mul(rg_dot(rg_transpose(g), x), alpha);
  return RG_OK;
}

ALIAS(DOT, g_dot)
ALIAS(OUTER, g_outer)
ALIAS(GEMM, g_gemm_gemv)
ALIAS(GEMV, g_gemm_gemv)
ALIAS(GER, g_ger)
ALIAS(BATCHED_DOT, g_batched_dot)

/* ------------------------------------------------------------------ control and inner graphs */

/* ifelse: each branch value gets its output's gradient as it is; the
 * driver (grad.c) keeps it under the branch's guard, so it counts only
 * when that branch was taken and the lazy VM computes the gradient of the
 * branch taken alone. */
GRAD_FN(g_ifelse) {
  (void)C;
  int k = n->nout;
  for (int i = 0; i < k; i++) ig[1 + i] = ig[1 + k + i] = og[i];
  return RG_OK;
}

/* The outer value standing for inner value v: its copy in map, or, for a
 * constant of the inner graph (which belongs to that graph), a copy of it
 * (its own variable, the same value), remembered in map.  NULL on error. */
static V outer_value(rg_ctx *C, rg_memo *map, V v) {
  V m = rg_memo_get(map, v);
  if (!m && rg_clone(C, 0, NULL, 1, &v, NULL, RG_CLONE_CONSTANTS, &m) != RG_OK) return NULL;
  rg_memo_put(map, v, m);
  return m;
}

/* The inner graph's outputs rebuilt on the node's inputs, every node made
 * again so that types follow the outer values (a composite's scalar graph
 * applied to tensors). */
static int inline_inner(rg_ctx *C, const rg_node *n, V *outs) {
  rg_fgraph *inner = n->op->inner;
  rg_memo *map = rg_memo_new();
  for (int i = 0; i < inner->nin; i++) rg_memo_put(map, inner->inputs[i], n->inputs[i]);
  for (const rg_node *x = inner->head; x; x = x->next) {
    V in[x->nin > 0 ? x->nin : 1];
    for (int i = 0; i < x->nin; i++)
      if (!(in[i] = outer_value(C, map, x->inputs[i]))) return RG_ERR_TYPE;
    rg_node *y = rg_make_node(C, x->op, x->nin, in);
    if (!y) return RG_ERR_TYPE;
    for (int o = 0; o < x->nout; o++) rg_memo_put(map, x->outputs[o], y->outputs[o]);
  }
  for (int k = 0; k < inner->nout; k++)
    if (!(outs[k] = outer_value(C, map, inner->outputs[k]))) return RG_ERR_TYPE;
  return RG_OK;
}

/* composite and op_from_graph: through the inner graph, inlined on the
 * node's inputs (the gradient's nodes are plain nodes of the outer graph;
 * the fusion rewrites may group them again). */
GRAD_FN(g_inner) {
  int k = n->op->inner->nout, nin = n->nin;
  V *outs = rgk_alloc((size_t)(k > 0 ? k : 1) * sizeof *outs);
  if (inline_inner(C, n, outs) != RG_OK) return RG_ERR_TYPE;
  /* An input given twice (f(x, x)): the gradient with respect to x is
   * already the sum over its places, so it goes to the first place only
   * (the caller adds the places up). */
  V *uniq = rgk_alloc((size_t)(nin > 0 ? nin : 1) * sizeof *uniq), *gu = rgk_alloc((size_t)(nin > 0 ? nin : 1) * sizeof *gu);
  int *at = rgk_alloc((size_t)(nin > 0 ? nin : 1) * sizeof *at), nu = 0;
  for (int i = 0; i < nin; i++) {
    at[i] = -1;
    for (int j = 0; j < nu && at[i] < 0; j++)
      if (uniq[j] == n->inputs[i]) at[i] = -2; /* a repeat */
    if (at[i] == -1) at[i] = nu, uniq[nu++] = n->inputs[i];
  }
  /* The node's inputs are the leaves of this walk (constants of it that
   * still get their gradients): it must not go on into the graph that
   * computes them, where the walk this rule runs in has marked its nodes
   * (exp(w) passed to the op lost its gradient). */
  rg_grad_opts o = {.disconnected = RG_GRAD_DISCONNECTED_NULL, .nknown = k, .known = outs, .known_grads = og,
                    .nconsts = nu, .consts = uniq};
  int rc = rg_grad(C, NULL, nu, uniq, &o, gu);
  if (rc != RG_OK) return rc;
  for (int i = 0; i < nin; i++) ig[i] = at[i] >= 0 ? gu[at[i]] : NULL;
  return RG_OK;
}

ALIAS(IFELSE, g_ifelse)
ALIAS(COMPOSITE, g_inner)
ALIAS(OP_FROM_GRAPH, g_inner)
ALIAS(OPAQUE, not_differentiable)
