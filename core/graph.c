/*
 * graph.c — variables, constants and apply nodes: construction with type
 * inference (rg_make_node), and the one-call-per-op constructors.
 *
 * A node is one collected block: the rg_node, its output variables, its
 * input and output pointer arrays and the clients back-indices; a pointer
 * to an output variable keeps the whole node alive (as its owner link would
 * anyway).  Construction never walks the graph: its cost is the op's type
 * inference plus one allocation.
 *
 * Sticky errors: a NULL input makes a constructor return NULL without a
 * new message (the first failure's message stays in the context); a type
 * error records "op: message" in the inputs' context.
 */
#include "core/core-impl.h"

#include <stdlib.h>

#ifndef RG_GC_NEVER_FREE
#include <gc/gc.h>
#endif

/* ------------------------------------------------------------------ variables */

/* Ids are unique and increase with creation within a thread; each thread
 * takes blocks of ids from one shared counter, so making a node costs no
 * atomic operation. */
uint64_t rgc_next_id(void) {
  static uint64_t shared = 1;
  static __thread uint64_t next, end;
  if (next == end) {
    next = __atomic_fetch_add(&shared, 4096, __ATOMIC_RELAXED);
    end = next + 4096;
  }
  return next++;
}

static void var_init(rg_variable *v, rg_ctx *C, const rg_type *type) {
  v->type = type;
  v->ctx = C;
  v->id = rgc_next_id();
}

/* Every variable starts with room for RGC_INLINE_CLIENTS clients right
 * after it in the same block (most variables have one or two), so the
 * clients index costs no allocation and no extra cache miss. */
rg_variable *rgc_var_new(rg_ctx *C, const rg_type *type) {
  rg_variable *v = rgk_alloc(sizeof *v + RGC_INLINE_CLIENTS * sizeof(rg_client));
  var_init(v, C, type);
  v->clients = (rg_client *)(v + 1);
  v->cap_clients = RGC_INLINE_CLIENTS;
  return v;
}

rg_ctx *rgc_ctx_of(rg_ctx *C, int n, rg_variable *const *vs) {
  if (C) return C;
  for (int i = 0; i < n; i++)
    if (vs[i]) return vs[i]->ctx;
  return NULL;
}

rg_variable *rg_input(rg_ctx *C, const char *name, const rg_type *type) {
  if (!type) {
    rg_error(C, RG_ERR_TYPE, "input %s: no type (invalid type arguments?)", name ? name : "");
    return NULL;
  }
  rg_variable *v = rgc_var_new(C, type);
  if (name) v->name = rgk_strdup(name);
  return v;
}

rg_variable *rg_set_name(rg_variable *v, const char *name) {
  if (v) v->name = name ? rgk_strdup(name) : NULL;
  return v;
}

bool rg_is_constant(const rg_variable *v) { return v && (v->flags & RG_VAR_CONSTANT); }

/* ------------------------------------------------------------------ constants */

static rg_variable *make_constant(rg_ctx *C, const rg_type *type, const void *data) {
  int64_t n = rg_type_numel(type);
  size_t nb = (size_t)n * rg_dtype_size(type->dtype);
  void *copy = rgk_alloc_atomic(nb ? nb : 1);
  if (nb) memcpy(copy, data, nb);
  if (type->dtype == RG_BOOL) /* one representation of true */
    for (size_t i = 0; i < nb; i++) ((uint8_t *)copy)[i] = ((uint8_t *)copy)[i] != 0;
  rg_variable *v = rgc_var_new(C, type);
  v->flags = RG_VAR_CONSTANT;
  v->data = copy;
  return v;
}

rg_variable *rg_constant_data(rg_ctx *C, rg_dtype dt, int ndim, const int64_t *shape,
                              const void *data) {
  const rg_type *t = rg_type_new(dt, ndim, shape);
  if (!t || rg_type_numel(t) < 0) {
    rg_error(C, RG_ERR_TYPE, "constant: invalid dtype or shape");
    return NULL;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) {
      rg_error(C, RG_ERR_TYPE, "constant: shape must be fully known");
      return NULL;
    }
  if (!data && rg_type_numel(t) > 0) {
    rg_error(C, RG_ERR_TYPE, "constant: no data");
    return NULL;
  }
  return make_constant(C, t, data);
}

rg_variable *rg_constant(rg_ctx *C, const rg_tensor *value) {
  if (!value) return NULL;
  rg_tensor *c = rg_tensor_to_host(value); /* from any device */
  if (!c) {
    rg_error(C, RG_ERR_NOMEM, "constant: out of memory copying the value");
    return NULL;
  }
  rg_variable *v = rg_constant_data(C, c->dtype, c->ndim, c->shape, c->data);
  rg_tensor_free(c);
  return v;
}

rg_variable *rg_constant_scalar(rg_ctx *C, rg_dtype dt, double x) {
  uint8_t buf[8];
  rg_store_f64(dt, buf, x);
  return rg_constant_data(C, dt, 0, NULL, buf);
}

rg_variable *rgc_dim_const(rg_ctx *C, int64_t k) { return rg_constant_scalar_int(C, RG_INT64, k); }

rg_variable *rg_constant_scalar_int(rg_ctx *C, rg_dtype dt, int64_t x) {
  uint8_t buf[8];
  rg_store_i64(dt, buf, x);
  return rg_constant_data(C, dt, 0, NULL, buf);
}

static rg_variable *weak(rg_variable *v) {
  if (v) v->flags |= RG_VAR_WEAK;
  return v;
}
rg_variable *rg_scalar_int(rg_ctx *C, int64_t x) { return weak(rg_constant_scalar_int(C, RG_INT64, x)); }
rg_variable *rg_scalar_float(rg_ctx *C, double x) { return weak(rg_constant_scalar(C, RG_FLOAT64, x)); }
rg_variable *rg_scalar_bool(rg_ctx *C, bool x) { return weak(rg_constant_scalar_int(C, RG_BOOL, x)); }

rg_tensor *rg_constant_to_tensor(const rg_variable *v) {
  if (!rg_is_constant(v)) return NULL;
  return rg_tensor_from_data(v->type->dtype, v->type->ndim, v->type->shape, v->data);
}

bool rg_constant_get_f64(const rg_variable *v, double *out) {
  if (!rg_is_constant(v) || rg_type_numel(v->type) != 1) return false;
  *out = rg_load_f64(v->type->dtype, v->data);
  return true;
}

bool rg_constant_get_i64(const rg_variable *v, int64_t *out) {
  if (!rg_is_constant(v) || rg_type_numel(v->type) != 1) return false;
  *out = rg_load_i64(v->type->dtype, v->data);
  return true;
}

static size_t value_bytes(const rg_variable *v) {
  return (size_t)rg_type_numel(v->type) * rg_dtype_size(v->type->dtype);
}

bool rg_constant_equal(const rg_variable *a, const rg_variable *b) {
  if (a == b) return true;
  if (!rg_is_constant(a) || !rg_is_constant(b) || a->flags != b->flags ||
      !rg_type_equal(a->type, b->type))
    return false;
  return memcmp(a->data, b->data, value_bytes(a)) == 0;
}

uint64_t rg_constant_hash(const rg_variable *v) {
  if (!rg_is_constant(v)) return 0;
  if (v->vhash) return v->vhash;
  uint64_t h = rgc_mix(rg_type_hash(v->type), v->flags);
  h = rgc_mix(h, rgc_hash_bytes(v->data, value_bytes(v)));
  ((rg_variable *)v)->vhash = h ? h : 1;
  return v->vhash;
}

/* ------------------------------------------------------------------ nodes */

/* Output variables live inside their node's block, so a pointer to one is
 * an interior pointer: the collector must recognise those (the default
 * configuration of Boehm GC). */
static void check_collector(void) {
#ifndef RG_GC_NEVER_FREE
  static bool checked;
  if (checked) return;
  if (!GC_get_all_interior_pointers()) {
    fputs("relgraph: the garbage collector must recognise interior pointers\n", stderr);
    abort();
  }
  checked = true;
#endif
}

/* One block, laid out for walks: the node, its input and output pointer
 * arrays, its output variables (for one or two inputs, an output's owner
 * field shares a cache line with the input array), the clients
 * back-indices, then the outputs' inline clients. */
static rg_node *node_alloc(const rg_op *op, int nin, int nout) {
  check_collector();
  size_t cpos_bytes = ((size_t)nin * sizeof(uint32_t) + 7) & ~(size_t)7;
  size_t sz = sizeof(rg_node) + (size_t)(nin + nout) * sizeof(rg_variable *) +
              (size_t)nout * sizeof(rg_variable) + cpos_bytes +
              (size_t)nout * RGC_INLINE_CLIENTS * sizeof(rg_client);
  rg_node *n = rgk_alloc(sz);
  n->op = op;
  n->nin = nin;
  n->nout = nout;
  n->inputs = (rg_variable **)(n + 1);
  n->outputs = n->inputs + nin;
  rg_variable *outs = (rg_variable *)(n->outputs + nout);
  n->cpos = (uint32_t *)(outs + nout);
  rg_client *inl = (rg_client *)((char *)n->cpos + cpos_bytes);
  for (int i = 0; i < nout; i++) {
    n->outputs[i] = &outs[i];
    outs[i].clients = inl + i * RGC_INLINE_CLIENTS;
    outs[i].cap_clients = RGC_INLINE_CLIENTS;
  }
  n->id = rgc_next_id();
  return n;
}

static void node_outputs(rg_node *n, rg_ctx *C, const rg_type *const *types) {
  for (int i = 0; i < n->nout; i++) {
    rg_variable *v = n->outputs[i];
    var_init(v, C, types[i]);
    v->owner = n;
    v->index = i;
  }
}

static int check_arity(rg_ctx *C, const rg_op *op, int nin) {
  const rg_op_class *c = op->cls;
  if (nin < c->min_in)
    return rgc_op_error(C, op, "expected at least %d input%s, got %d", c->min_in,
                        c->min_in == 1 ? "" : "s", nin);
  if (c->max_in >= 0 && nin > c->max_in)
    return rgc_op_error(C, op, "expected at most %d input%s, got %d", c->max_in,
                        c->max_in == 1 ? "" : "s", nin);
  return RG_OK;
}

/* The checks and type inference of a node: the output types in *outs,
 * the node's (maybe canonical) op in *op and its context in *C. */
static int infer_node(rg_ctx **C, const rg_op **op, int nin, rg_variable *const *inputs, rgc_outs *outs) {
  if (nin < 0 || (nin && !inputs)) return RG_ERR;
  for (int i = 0; i < nin; i++)
    if (!inputs[i]) return RG_ERR;
  *C = rgc_ctx_of(*C, nin, inputs);
  if (!*op) {
    if (*C) rg_error(*C, RG_ERR_TYPE, "invalid op (bad parameters given to its constructor)");
    return RG_ERR;
  }
  if (check_arity(*C, *op, nin) != RG_OK) return RG_ERR;
  if ((*op)->cls->make_node(*C, op, nin, inputs, outs) != RG_OK) return RG_ERR;
  for (int k = 0; k < outs->n; k++) /* a type the node's sizes could not make (too large) */
    if (!outs->types[k]) return rgc_op_error(*C, *op, "output %d has no type: a size is too large", k);
  return RG_OK;
}

int rg_node_types(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *inputs, int cap,
                  const rg_type **types) {
  rgc_outs outs = {0};
  if (infer_node(&C, &op, nin, inputs, &outs) != RG_OK) return -1;
  for (int k = 0; k < outs.n && k < cap; k++) types[k] = outs.types[k];
  return outs.n;
}

rg_node *rg_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *inputs) {
  rgc_outs outs = {0};
  if (infer_node(&C, &op, nin, inputs, &outs) != RG_OK) return NULL;
  rg_node *n = node_alloc(op, nin, outs.n);
  if (nin) memcpy(n->inputs, inputs, (size_t)nin * sizeof *inputs);
  node_outputs(n, C, outs.types);
  return n;
}

rg_variable *rg_apply(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *inputs) {
  rg_node *n = rg_make_node(C, op, nin, inputs);
  if (!n) return NULL;
  if (n->nout < 1) {
    rgc_op_error(rgc_ctx_of(C, nin, inputs), op, "has no output");
    return NULL;
  }
  return n->outputs[0];
}

rg_node *rg_node_clone_with(const rg_node *node, rg_variable *const *inputs) {
  rg_node *n = node_alloc(node->op, node->nin, node->nout);
  memcpy(n->inputs, inputs, (size_t)node->nin * sizeof *inputs);
  for (int i = 0; i < node->nout; i++) {
    const rg_variable *o = node->outputs[i];
    rg_variable *v = n->outputs[i];
    var_init(v, o->ctx, o->type);
    v->owner = n;
    v->index = i;
    v->name = o->name;
  }
  return n;
}

/* ------------------------------------------------------------------ elementwise constructors */

static rg_variable *ew(rg_opcode code, int n, rg_variable *const *xs) {
  return rg_apply(NULL, rg_op_get(code), n, xs);
}
static rg_variable *ew1(rg_opcode code, rg_variable *x) { return ew(code, 1, &x); }
static rg_variable *ew2(rg_opcode code, rg_variable *a, rg_variable *b) {
  rg_variable *xs[2] = {a, b};
  return ew(code, 2, xs);
}
static rg_variable *ew3(rg_opcode code, rg_variable *a, rg_variable *b, rg_variable *c) {
  rg_variable *xs[3] = {a, b, c};
  return ew(code, 3, xs);
}

rg_variable *rg_add(rg_variable *a, rg_variable *b) { return ew2(RG_OP_ADD, a, b); }
rg_variable *rg_add_n(int n, rg_variable *const *xs) { return ew(RG_OP_ADD, n, xs); }
rg_variable *rg_mul(rg_variable *a, rg_variable *b) { return ew2(RG_OP_MUL, a, b); }
rg_variable *rg_mul_n(int n, rg_variable *const *xs) { return ew(RG_OP_MUL, n, xs); }
rg_variable *rg_sub(rg_variable *a, rg_variable *b) { return ew2(RG_OP_SUB, a, b); }
rg_variable *rg_true_div(rg_variable *a, rg_variable *b) { return ew2(RG_OP_TRUE_DIV, a, b); }
rg_variable *rg_int_div(rg_variable *a, rg_variable *b) { return ew2(RG_OP_INT_DIV, a, b); }
rg_variable *rg_mod(rg_variable *a, rg_variable *b) { return ew2(RG_OP_MOD, a, b); }
rg_variable *rg_pow(rg_variable *a, rg_variable *b) { return ew2(RG_OP_POW, a, b); }
rg_variable *rg_maximum(rg_variable *a, rg_variable *b) { return ew2(RG_OP_MAXIMUM, a, b); }
rg_variable *rg_minimum(rg_variable *a, rg_variable *b) { return ew2(RG_OP_MINIMUM, a, b); }
rg_variable *rg_neg(rg_variable *x) { return ew1(RG_OP_NEG, x); }
rg_variable *rg_abs(rg_variable *x) { return ew1(RG_OP_ABS, x); }
rg_variable *rg_exp(rg_variable *x) { return ew1(RG_OP_EXP, x); }
rg_variable *rg_log(rg_variable *x) { return ew1(RG_OP_LOG, x); }
rg_variable *rg_log1p(rg_variable *x) { return ew1(RG_OP_LOG1P, x); }
rg_variable *rg_expm1(rg_variable *x) { return ew1(RG_OP_EXPM1, x); }
rg_variable *rg_sqrt(rg_variable *x) { return ew1(RG_OP_SQRT, x); }
rg_variable *rg_sqr(rg_variable *x) { return ew1(RG_OP_SQR, x); }
rg_variable *rg_sin(rg_variable *x) { return ew1(RG_OP_SIN, x); }
rg_variable *rg_cos(rg_variable *x) { return ew1(RG_OP_COS, x); }
rg_variable *rg_tanh(rg_variable *x) { return ew1(RG_OP_TANH, x); }
rg_variable *rg_sigmoid(rg_variable *x) { return ew1(RG_OP_SIGMOID, x); }
rg_variable *rg_softplus(rg_variable *x) { return ew1(RG_OP_SOFTPLUS, x); }
rg_variable *rg_erf(rg_variable *x) { return ew1(RG_OP_ERF, x); }
rg_variable *rg_floor(rg_variable *x) { return ew1(RG_OP_FLOOR, x); }
rg_variable *rg_ceil(rg_variable *x) { return ew1(RG_OP_CEIL, x); }
rg_variable *rg_round(rg_variable *x) { return ew1(RG_OP_ROUND, x); }
rg_variable *rg_sign(rg_variable *x) { return ew1(RG_OP_SIGN, x); }
rg_variable *rg_clip(rg_variable *x, rg_variable *lo, rg_variable *hi) {
  return ew3(RG_OP_CLIP, x, lo, hi);
}
rg_variable *rg_lt(rg_variable *a, rg_variable *b) { return ew2(RG_OP_LT, a, b); }
rg_variable *rg_gt(rg_variable *a, rg_variable *b) { return ew2(RG_OP_GT, a, b); }
rg_variable *rg_le(rg_variable *a, rg_variable *b) { return ew2(RG_OP_LE, a, b); }
rg_variable *rg_ge(rg_variable *a, rg_variable *b) { return ew2(RG_OP_GE, a, b); }
rg_variable *rg_eq_elem(rg_variable *a, rg_variable *b) { return ew2(RG_OP_EQ, a, b); }
rg_variable *rg_neq_elem(rg_variable *a, rg_variable *b) { return ew2(RG_OP_NEQ, a, b); }
rg_variable *rg_and(rg_variable *a, rg_variable *b) { return ew2(RG_OP_AND, a, b); }
rg_variable *rg_or(rg_variable *a, rg_variable *b) { return ew2(RG_OP_OR, a, b); }
rg_variable *rg_xor(rg_variable *a, rg_variable *b) { return ew2(RG_OP_XOR, a, b); }
rg_variable *rg_not(rg_variable *x) { return ew1(RG_OP_NOT, x); }
rg_variable *rg_switch(rg_variable *c, rg_variable *a, rg_variable *b) {
  return ew3(RG_OP_SWITCH, c, a, b);
}
rg_variable *rg_cast(rg_variable *x, rg_dtype dt) {
  if (!x) return NULL;
  if ((unsigned)dt >= RG_NDTYPES) {
    rg_error(x->ctx, RG_ERR_TYPE, "cast: invalid dtype %d", (int)dt);
    return NULL;
  }
  return rg_apply(NULL, rg_op_cast(dt), 1, &x);
}
rg_variable *rg_identity(rg_variable *x) { return ew1(RG_OP_IDENTITY, x); }
rg_variable *rg_second(rg_variable *model, rg_variable *value) {
  return ew2(RG_OP_SECOND, model, value);
}
