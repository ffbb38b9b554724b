/*
 * op.c — the op class table, op values and their parameters.
 *
 * The op set is RG_OP_TABLE (graph.h); this file expands it into the class
 * table, one vtable per op, whose functions come from the op's family
 * (elementwise, shape, reduce, blas, control, inner, opaque).  The family
 * functions dispatch on the op code where ops of a family differ.  The
 * table is checked against the enum by a static assertion on its size and
 * by rgc_check_classes() (run by the tests): entry i has code i and the
 * name of RG_OP_TABLE.
 *
 * Parameters are stored in a few generic fields of struct rg_op (dtype,
 * inplace, ints, ...) so equality and hashing are generic; what differs per
 * op is how parameters read and print, which goes through terms: an op
 * without parameters is its name (a symbol), one with parameters is the
 * list (name param ...), as written in graph files and seen by kanren.
 */
#include "core/core-impl.h"

#include <pthread.h>

#include <stdlib.h>

/* ------------------------------------------------------------------ parameter kinds */

typedef enum pkind {
  PK_NONE,   /* no parameters */
  PK_DTYPE,  /* (name DTYPE) */
  PK_ORDER,  /* (dimshuffle i ... x ...) */
  PK_INT,    /* (name k) */
  PK_INT2,   /* (split axis n) */
  PK_AXES,   /* name (every axis) or (name axis ...) */
  PK_AXIS,   /* (softmax axis) */
  PK_INDEX,  /* (subtensor entry ...) */
  PK_INNER,  /* (composite (graph ...)) */
  PK_OPAQUE, /* the opaque op's own name */
} pkind;

static pkind param_kind(rg_opcode code) {
  switch (code) {
  case RG_OP_CAST: case RG_OP_ALLOC_EMPTY: case RG_OP_MAKE_VECTOR: case RG_OP_ARANGE:
    return PK_DTYPE;
  case RG_OP_DIMSHUFFLE: return PK_ORDER;
  case RG_OP_RESHAPE: case RG_OP_FLATTEN: case RG_OP_SHAPE_I: case RG_OP_JOIN: return PK_INT;
  case RG_OP_SPLIT: return PK_INT2;
  case RG_OP_SUM: case RG_OP_PROD: case RG_OP_MAX: case RG_OP_MIN: case RG_OP_MEAN:
  case RG_OP_ARGMAX: case RG_OP_ARGMIN: case RG_OP_ALL: case RG_OP_ANY:
    return PK_AXES;
  case RG_OP_SOFTMAX: case RG_OP_LOG_SOFTMAX: return PK_AXIS;
  case RG_OP_SUBTENSOR: case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: return PK_INDEX;
  case RG_OP_COMPOSITE: case RG_OP_OP_FROM_GRAPH: case RG_OP_SCAN: return PK_INNER;
  case RG_OP_OPAQUE: return PK_OPAQUE;
  default: return PK_NONE;
  }
}

/* Ops that may destroy an input (and which one when in place). */
static bool may_be_inplace(rg_opcode code) {
  switch (code) {
  case RG_OP_GEMM: case RG_OP_GEMV: case RG_OP_GER:
  case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR:
  case RG_OP_SCAN: /* its mit-mot buffers (rgc_scan_destroys) */
    return true;
  default: return rg_opcode_family(code) == RG_FAM_ELEMWISE;
  }
}

/* ------------------------------------------------------------------ generic class functions */

static bool params_equal(const rg_op *a, const rg_op *b);
static uint64_t params_hash(const rg_op *op);
static rg_term params_term(const rg_op *op);
static const rg_op *params_parse(rg_ctx *C, const rg_op_class *cls, rg_term params);

static int no_view(const rg_op *op, int output) { return -1; }
static int view_of_input0(const rg_op *op, int output) { return 0; }
static int destroys_inplace(const rg_op *op, int output) {
  return output == 0 ? op->inplace : -1;
}

static int views(const rg_op *op, int output) {
  switch (op->code) {
  case RG_OP_DIMSHUFFLE: case RG_OP_RESHAPE: case RG_OP_FLATTEN: case RG_OP_SUBTENSOR:
  case RG_OP_SPLIT:
    return view_of_input0(op, output);
  default: return no_view(op, output);
  }
}

/* Family make_node / infer_shape functions live in their own files. */
int rgc_shape_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_shape_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
int rgc_reduce_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_reduce_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
int rgc_blas_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_blas_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
int rgc_control_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_control_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
int rgc_inner_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_inner_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
int rgc_scan_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_scan_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
const rg_op *rgc_scan_op_make(rg_ctx *C, rg_fgraph *g, int nints, const int64_t *ints);
int rgc_scan_destroys(const rg_op *op, int output);
const char *rgc_scan_label(const rg_op *op);
int rgc_opaque_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_opaque_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);

#define COMMON                                                                    \
  .params_equal = params_equal, .params_hash = params_hash,                       \
  .params_term = params_term, .params_parse = params_parse
#define FAM_ELEMWISE                                                              \
  .make_node = rgc_ew_make_node, .infer_shape = rgc_ew_infer_shape,               \
  .view_of = no_view, .destroys = destroys_inplace, COMMON
#define FAM_SHAPE                                                                 \
  .make_node = rgc_shape_make_node, .infer_shape = rgc_shape_infer_shape,         \
  .view_of = views, .destroys = destroys_inplace, COMMON
#define FAM_REDUCE                                                                \
  .make_node = rgc_reduce_make_node, .infer_shape = rgc_reduce_infer_shape,       \
  .view_of = no_view, .destroys = destroys_inplace, COMMON
#define FAM_BLAS                                                                  \
  .make_node = rgc_blas_make_node, .infer_shape = rgc_blas_infer_shape,           \
  .view_of = no_view, .destroys = destroys_inplace, COMMON
#define FAM_CONTROL                                                               \
  .make_node = rgc_control_make_node, .infer_shape = rgc_control_infer_shape,     \
  .view_of = no_view, .destroys = destroys_inplace, COMMON
#define FAM_INNER                                                                 \
  .make_node = rgc_inner_make_node, .infer_shape = rgc_inner_infer_shape,         \
  .view_of = no_view, .destroys = destroys_inplace, COMMON
#define FAM_LOOP                                                                  \
  .make_node = rgc_scan_make_node, .infer_shape = rgc_scan_infer_shape,           \
  .view_of = no_view, .destroys = rgc_scan_destroys, .inner_make = rgc_scan_op_make, .label = rgc_scan_label, COMMON
#define FAM_OPAQUE                                                                \
  .make_node = rgc_opaque_make_node, .infer_shape = rgc_opaque_infer_shape,       \
  .view_of = no_view, .destroys = destroys_inplace, COMMON

/* Elementwise dtype rules, by op. */
int rgc_ew_rule(rg_opcode code) {
  switch (code) {
  case RG_OP_SUB: case RG_OP_NEG: case RG_OP_SIGN: return EW_PROMOTE_NUM;
  case RG_OP_INT_DIV: case RG_OP_MOD: case RG_OP_POW: return EW_INTDIV;
  case RG_OP_TRUE_DIV: return EW_TRUEDIV;
  case RG_OP_EXP: case RG_OP_LOG: case RG_OP_LOG1P: case RG_OP_EXPM1:
  case RG_OP_SQRT: case RG_OP_SIN: case RG_OP_COS: case RG_OP_TANH: case RG_OP_SIGMOID:
  case RG_OP_SOFTPLUS: case RG_OP_ERF:
    return EW_FLOAT;
  case RG_OP_ABS: case RG_OP_SQR: case RG_OP_FLOOR: case RG_OP_CEIL: case RG_OP_ROUND:
  case RG_OP_IDENTITY:
    return EW_KEEP;
  case RG_OP_LT: case RG_OP_GT: case RG_OP_LE: case RG_OP_GE: case RG_OP_EQ: case RG_OP_NEQ:
    return EW_COMPARE;
  case RG_OP_AND: case RG_OP_OR: case RG_OP_XOR: case RG_OP_NOT: return EW_BITWISE;
  case RG_OP_SWITCH: return EW_SWITCH;
  case RG_OP_CAST: return EW_CAST;
  case RG_OP_SECOND: return EW_SECOND;
  default: return EW_PROMOTE;
  }
}

const rg_op_class rgc_classes[RG_OP_COUNT] = {
#define X(code_, name_, fam_, lo_, hi_)                                              \
  [RG_OP_##code_] = {.name = name_, .code = RG_OP_##code_, .family = RG_FAM_##fam_, \
                     .min_in = lo_, .max_in = hi_, .grad = rgc_grad_##code_, FAM_##fam_},
    RG_OP_TABLE(X)
#undef X
};
_Static_assert(sizeof rgc_classes / sizeof rgc_classes[0] == RG_OP_COUNT,
               "the class table covers the enum");

static const char *const op_names[RG_OP_COUNT] = {
#define X(code_, name_, fam_, lo_, hi_) [RG_OP_##code_] = name_,
    RG_OP_TABLE(X)
#undef X
};

int rgc_check_classes(void) {
  for (int i = 0; i < RG_OP_COUNT; i++) {
    const rg_op_class *c = &rgc_classes[i];
    if ((int)c->code != i || !c->name || strcmp(c->name, op_names[i]) || !c->make_node ||
        !c->infer_shape || !c->params_term || rg_opcode_from_name(c->name) != i)
      return -(i + 1);
  }
  return 0;
}

const char *rg_opcode_name(rg_opcode code) {
  return (unsigned)code < RG_OP_COUNT ? rgc_classes[code].name : "?";
}

int rg_opcode_from_name(const char *name) {
  for (int i = 0; i < RG_OP_COUNT; i++)
    if (!strcmp(name, rgc_classes[i].name)) return i;
  return -1;
}

rg_op_family rg_opcode_family(rg_opcode code) {
  return (unsigned)code < RG_OP_COUNT ? rgc_classes[code].family : RG_FAM_OPAQUE; /* not an op of the table */
}

/* ------------------------------------------------------------------ op values */

rg_op *rgc_op_new(rg_opcode code) {
  rg_op *op = rgk_alloc(sizeof *op);
  op->cls = &rgc_classes[code];
  op->code = code;
  op->dtype = RG_NDTYPES;
  op->inplace = -1;
  op->nout = 1;
  return op;
}

const rg_op *rgc_op_finish(rg_op *op) {
  op->hash = params_hash(op);
  return op;
}

/* The parameterless ops, one object per opcode, made together the first
 * time any is asked for (pthread_once: threads starting at once all get
 * the same objects). */
static const rg_op *plain_ops[RG_OP_COUNT];
static pthread_once_t plain_once = PTHREAD_ONCE_INIT;

static void init_plain_ops(void) {
  for (int code = 0; code < RG_OP_COUNT; code++) {
    pkind k = param_kind((rg_opcode)code);
    if (k != PK_NONE && k != PK_AXES) continue;
    rg_op *o = rgc_op_new((rg_opcode)code);
    o->all_axes = k == PK_AXES;
    plain_ops[code] = rgc_op_finish(o);
  }
}

const rg_op *rg_op_get(rg_opcode code) {
  if ((unsigned)code >= RG_OP_COUNT) return NULL;
  pthread_once(&plain_once, init_plain_ops);
  return plain_ops[code];
}

static int64_t *copy_ints(int n, const int64_t *v) {
  int64_t *r = rgk_alloc_atomic((size_t)(n ? n : 1) * sizeof *r);
  if (n) memcpy(r, v, (size_t)n * sizeof *r);
  return r;
}

static const rg_op *with_ints(rg_opcode code, int n, const int64_t *v) {
  rg_op *op = rgc_op_new(code);
  op->nints = n;
  op->ints = copy_ints(n, v);
  return rgc_op_finish(op);
}

const rg_op *rg_op_cast(rg_dtype dt) {
  if ((unsigned)dt >= RG_NDTYPES) return NULL;
  rg_op *op = rgc_op_new(RG_OP_CAST);
  op->dtype = dt;
  return rgc_op_finish(op);
}

const rg_op *rg_op_inplace(const rg_op *op, int input) {
  if (!op || !may_be_inplace(op->code) || input < -1) return NULL;
  rg_op *r = rgk_alloc(sizeof *r);
  *r = *op;
  r->inplace = input;
  r->term = NULL;
  return rgc_op_finish(r);
}

const rg_op *rg_op_dimshuffle(int n, const int64_t *order) {
  if (n < 0 || n > RG_MAX_NDIM || (n && !order)) return NULL;
  for (int i = 0; i < n; i++)
    if (order[i] < -1) return NULL;
  return with_ints(RG_OP_DIMSHUFFLE, n, order);
}

static const rg_op *one_int(rg_opcode code, int64_t v) { return with_ints(code, 1, &v); }
const rg_op *rg_op_reshape(int ndim) {
  return ndim >= 0 && ndim <= RG_MAX_NDIM ? one_int(RG_OP_RESHAPE, ndim) : NULL;
}
const rg_op *rg_op_flatten(int ndim) {
  return ndim >= 1 && ndim <= RG_MAX_NDIM ? one_int(RG_OP_FLATTEN, ndim) : NULL;
}
const rg_op *rg_op_shape_i(int dim) { return one_int(RG_OP_SHAPE_I, dim); } /* negative: from the end */
const rg_op *rg_op_join(int axis) { return one_int(RG_OP_JOIN, axis); }
const rg_op *rg_op_split(int axis, int n) {
  if (n < 1) return NULL;
  int64_t v[2] = {axis, n};
  rg_op *op = (rg_op *)with_ints(RG_OP_SPLIT, 2, v);
  op->nout = n;
  return rgc_op_finish(op);
}

static const rg_op *with_dtype(rg_opcode code, rg_dtype dt) {
  if ((unsigned)dt >= RG_NDTYPES) return NULL;
  rg_op *op = rgc_op_new(code);
  op->dtype = dt;
  return rgc_op_finish(op);
}
const rg_op *rg_op_alloc_empty(rg_dtype dt) { return with_dtype(RG_OP_ALLOC_EMPTY, dt); }
const rg_op *rg_op_make_vector(rg_dtype dt) { return with_dtype(RG_OP_MAKE_VECTOR, dt); }
const rg_op *rg_op_arange(rg_dtype dt) { return with_dtype(RG_OP_ARANGE, dt); }

static bool valid_entry(const rg_index *e) {
  if (e->kind == RG_IDX_INDEX) return e->a != RG_IDX_NONE;
  if (e->kind != RG_IDX_SLICE) return false;
  return e->c != 0;
}

const rg_op *rg_op_subtensor(rg_opcode code, int n, const rg_index *entries) {
  if (param_kind(code) != PK_INDEX || n < 0 || n > RG_MAX_NDIM || (n && !entries)) return NULL;
  int64_t v[RG_MAX_NDIM * 4];
  for (int i = 0; i < n; i++) {
    rg_index e = entries[i];
    if (e.kind == RG_IDX_INDEX) e.b = e.c = RG_IDX_NONE;
    if (!valid_entry(&e)) return NULL;
    v[4 * i] = e.kind;
    v[4 * i + 1] = e.a;
    v[4 * i + 2] = e.b;
    v[4 * i + 3] = e.c;
  }
  return with_ints(code, 4 * n, v);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

const rg_op *rg_op_reduce(rg_opcode code, int naxes, const int64_t *axes) {
  pkind k = param_kind(code);
  if (naxes > 0 && !axes) return NULL;
  if (k == PK_AXIS) return naxes == 1 ? one_int(code, axes[0]) : NULL;
  if (k != PK_AXES || naxes > RG_MAX_NDIM) return NULL;
  if (naxes < 0) return rg_op_get(code);
  int64_t v[RG_MAX_NDIM];
  if (naxes) memcpy(v, axes, (size_t)naxes * sizeof *v);
  qsort(v, (size_t)naxes, sizeof *v, cmp_i64);
  for (int i = 1; i < naxes; i++)
    if (v[i] == v[i - 1]) return NULL; /* repeated axis */
  return with_ints(code, naxes, v);
}

const rg_op *rg_op_opaque(const char *name, int nout, const rg_type *out_type) {
  if (!name || !*name || nout < 0) return NULL;
  rg_op *op = rgc_op_new(RG_OP_OPAQUE);
  op->name = rgk_strdup(name);
  op->nout = nout;
  op->out_type = out_type;
  return rgc_op_finish(op);
}

/* ------------------------------------------------------------------ equality and hashing */

bool rgc_inner_equal(const rg_fgraph *a, const rg_fgraph *b);
uint64_t rgc_inner_hash(const rg_fgraph *g);

static bool params_equal(const rg_op *a, const rg_op *b) {
  if (a->code != b->code || a->dtype != b->dtype || a->inplace != b->inplace ||
      a->all_axes != b->all_axes || a->nints != b->nints || a->nout != b->nout)
    return false;
  if (a->nints && memcmp(a->ints, b->ints, (size_t)a->nints * sizeof(int64_t))) return false;
  if ((a->name || b->name) && (!a->name || !b->name || strcmp(a->name, b->name))) return false;
  if ((a->out_type || b->out_type) && !rg_type_equal(a->out_type, b->out_type)) return false;
  if (a->inner != b->inner && (!a->inner || !b->inner || !rgc_inner_equal(a->inner, b->inner)))
    return false;
  return true;
}

static uint64_t params_hash(const rg_op *op) {
  uint64_t h = rgc_mix(0x51ed270b27a4f1dbull, (uint64_t)op->code);
  h = rgc_mix(h, (uint64_t)op->dtype * 131 + (uint64_t)(op->inplace + 1) * 7 + op->all_axes);
  h = rgc_mix(h, (uint64_t)op->nout);
  for (int i = 0; i < op->nints; i++) h = rgc_mix(h, (uint64_t)op->ints[i]);
  if (op->name) h = rgc_mix(h, rgc_hash_bytes(op->name, strlen(op->name)));
  if (op->out_type) h = rgc_mix(h, rg_type_hash(op->out_type));
  if (op->inner) h = rgc_mix(h, rgc_inner_hash(op->inner));
  return h ? h : 1;
}

bool rg_op_equal(const rg_op *a, const rg_op *b) {
  if (a == b) return true;
  if (!a || !b || a->hash != b->hash) return false;
  return a->cls->params_equal(a, b);
}

uint64_t rg_op_hash(const rg_op *op) { return op->hash; }

const char *rg_op_name(const rg_op *op) {
  return op->code == RG_OP_OPAQUE ? op->name : op->cls->name;
}

int rg_op_view_of(const rg_op *op, int output) { return op->cls->view_of(op, output); }
int rg_op_destroys(const rg_op *op, int output) { return op->cls->destroys(op, output); }

/* ------------------------------------------------------------------ errors */

int rgc_op_error(rg_ctx *C, const rg_op *op, const char *fmt, ...) {
  if (!C) return RG_ERR_TYPE;
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(C, RG_ERR_TYPE, "%s: %s", op ? rg_op_name(op) : "graph", msg);
}

/* ------------------------------------------------------------------ parameters as terms */

/* Interned symbols looked up once (pthread_once: a thread never sees the
 * table half filled). */
static rg_term sym_x, sym_none, sym_q, sym_inplace;
static rg_term op_syms[RG_OP_COUNT];
static pthread_once_t syms_once = PTHREAD_ONCE_INIT;

/* The op symbols by address: an open-addressed table of at most a quarter
 * full, so a lookup is a probe or two.  Slot i holds opcode + 1 (0:
 * empty). */
#define OP_SYM_BITS 10
static int16_t op_sym_slots[1 << OP_SYM_BITS];
_Static_assert(RG_OP_COUNT * 4 <= (1 << OP_SYM_BITS), "the op symbol table is too small");

static size_t op_sym_slot(rg_term name) {
  return (size_t)(((uintptr_t)name * 0x9E3779B97F4A7C15ull) >> (64 - OP_SYM_BITS));
}

static void fill_syms(void) {
  for (int i = 0; i < RG_OP_COUNT; i++) {
    op_syms[i] = rg_symbol(rgc_classes[i].name);
    size_t k = op_sym_slot(op_syms[i]);
    while (op_sym_slots[k]) k = (k + 1) & ((1u << OP_SYM_BITS) - 1);
    op_sym_slots[k] = (int16_t)(i + 1);
  }
  sym_none = rg_symbol("none");
  sym_q = rg_symbol("?");
  sym_inplace = rg_symbol("inplace");
  sym_x = rg_symbol("x");
}

static void init_syms(void) { pthread_once(&syms_once, fill_syms); }

/* The opcode named by an interned symbol (pointer comparisons), or -1. */
static int opcode_of_symbol(rg_term name) {
  init_syms();
  for (size_t k = op_sym_slot(name); op_sym_slots[k]; k = (k + 1) & ((1u << OP_SYM_BITS) - 1))
    if (op_syms[op_sym_slots[k] - 1] == name) return op_sym_slots[k] - 1;
  return -1;
}

static rg_term idx_component(int64_t v) {
  if (v == RG_IDX_NONE) return sym_none;
  if (v == RG_IDX_INPUT) return sym_q;
  return rg_int(v);
}

static rg_term index_entry_term(const int64_t *e) {
  if (e[0] == RG_IDX_INDEX) return idx_component(e[1]);
  rg_term items[3] = {idx_component(e[1]), idx_component(e[2]), idx_component(e[3])};
  return rg_list(e[3] == RG_IDX_NONE ? 2 : 3, items);
}

rg_term rgc_inner_term(const rg_op *op);

/* The parameter list (without the name) by kind. */
static rg_term kind_params(const rg_op *op) {
  RGK_LOCAL_STACK(items, 64);
  switch (param_kind(op->code)) {
  case PK_DTYPE: return rg_cons(rg_dtype_symbol(op->dtype), RG_NIL);
  case PK_ORDER:
    for (int i = 0; i < op->nints; i++)
      rgk_push(&items, RGK_W(op->ints[i] < 0 ? sym_x : rg_int(op->ints[i])));
    break;
  case PK_INT: case PK_INT2: case PK_AXIS: case PK_AXES:
    for (int i = 0; i < op->nints; i++) rgk_push(&items, RGK_W(rg_int(op->ints[i])));
    break;
  case PK_INDEX:
    for (int i = 0; i < op->nints; i += 4) rgk_push(&items, RGK_W(index_entry_term(op->ints + i)));
    break;
  case PK_INNER: return rgc_inner_term(op);
  default: break;
  }
  return rg_list((int)items.n, (rg_term *)items.v);
}

static rg_term params_term(const rg_op *op) {
  init_syms();
  rg_term ps = kind_params(op);
  if (op->inplace >= 0) {
    rg_term ip = rgk_list2(sym_inplace, rg_int(op->inplace));
    ps = rgk_reverse(rg_cons(ip, rgk_reverse(ps)));
  }
  return ps;
}

/* Ops owning an inner graph head as a foreign term: the op itself,
 * expanding into (name param ...) when unified against structure. */
static rg_term plain_term(const rg_op *op);
static bool opterm_equal(void *self, rg_term other);
static uint64_t opterm_hash(void *self) { return ((const rg_op *)self)->hash; }
static void opterm_print(void *self, FILE *f) { rg_print(f, plain_term(self)); }
static rg_term opterm_expand(void *self, void *ud) { return plain_term(self); }
static const rg_foreign_hooks opterm_hooks = {
    .name = "graph-op",
    .equal = opterm_equal,
    .hash = opterm_hash,
    .print = opterm_print,
    .as_etuple = opterm_expand,
};
static bool opterm_equal(void *self, rg_term other) {
  return rg_is_foreign(other, &opterm_hooks) && rg_op_equal(self, rg_foreign_ptr(other));
}

rg_term rg_op_term(const rg_op *op) {
  if (op->term) return op->term;
  rg_term t = op->inner ? rg_foreign(&opterm_hooks, (void *)op, NULL) : plain_term(op);
  ((rg_op *)op)->term = t; /* a cache: racing writers store equal terms */
  return t;
}

static rg_term plain_term(const rg_op *op) {
  init_syms();
  rg_term name = op->code == RG_OP_OPAQUE ? rg_symbol(rg_op_name(op)) : op_syms[op->code];
  if (op->code == RG_OP_OPAQUE && op->inplace < 0) return name;
  rg_term ps = op->cls->params_term(op);
  pkind k = param_kind(op->code);
  /* bare only where the bare name reads back as this op: (dimshuffle) and
   * (subtensor) with no entries, (sum) over no axes, keep their list */
  bool bare = ps == RG_NIL && (k == PK_NONE || (k == PK_AXES && op->all_axes));
  return bare ? name : rg_cons(name, ps);
}

void rg_op_fprint(FILE *f, const rg_op *op) { rg_print(f, rg_op_term(op)); }

/* ------------------------------------------------------------------ parsing parameters */

static const rg_op *parse_error(rg_ctx *C, const rg_op_class *cls, const char *what, rg_term t) {
  if (C) rg_error(C, RG_ERR_SYNTAX, "%s: %s: %s", cls->name, what, t ? rg_to_string(t) : "");
  return NULL;
}

static bool term_int(rg_term t, int64_t *v) {
  if (rg_kind_of(t) != RG_K_INT) return false;
  *v = rg_int_value(t);
  return true;
}

static bool parse_component(rg_term t, int64_t *v) {
  if (t == sym_none) { *v = RG_IDX_NONE; return true; }
  if (t == sym_q) { *v = RG_IDX_INPUT; return true; }
  return term_int(t, v) && *v > RG_IDX_INPUT;
}

static bool parse_entry(rg_term t, rg_index *e) {
  if (!rg_is_pair(t)) {
    e->kind = RG_IDX_INDEX;
    e->b = e->c = RG_IDX_NONE;
    return parse_component(t, &e->a) && e->a != RG_IDX_NONE;
  }
  e->kind = RG_IDX_SLICE;
  e->c = RG_IDX_NONE;
  int64_t n = rg_list_length(t);
  if (n != 2 && n != 3) return false;
  int64_t *slots[3] = {&e->a, &e->b, &e->c};
  for (int i = 0; i < n; i++, t = rg_cdr(t))
    if (!parse_component(rg_car(t), slots[i])) return false;
  return e->c != 0;
}

/* Integers of a parameter list into v (at most max); -1 if not all ints. */
static int parse_ints(rg_term ps, int64_t *v, int max, bool allow_x) {
  int n = 0;
  for (; rg_is_pair(ps); ps = rg_cdr(ps)) {
    if (n == max) return -1;
    rg_term t = rg_car(ps);
    if (allow_x && t == sym_x) { v[n++] = -1; continue; }
    if (!term_int(t, &v[n])) return -1;
    if (allow_x && v[n] < 0) return -1;
    n++;
  }
  return n;
}

const rg_op *rgc_inner_parse(rg_ctx *C, const rg_op_class *cls, rg_term params);

static const rg_op *parse_by_kind(rg_ctx *C, const rg_op_class *cls, rg_term ps) {
  int64_t v[RG_MAX_NDIM * 4];
  int64_t len = rg_list_length(ps);
  const rg_op *op = NULL;
  switch (param_kind(cls->code)) {
  case PK_NONE: op = len == 0 ? rg_op_get(cls->code) : NULL; break;
  case PK_DTYPE: {
    int dt = len == 1 && rg_kind_of(rg_car(ps)) == RG_K_SYMBOL
                 ? rg_dtype_from_name(rg_symbol_name(rg_car(ps))) : -1;
    if (dt < 0) return parse_error(C, cls, "expected a dtype", ps);
    op = with_dtype(cls->code, (rg_dtype)dt);
    break;
  }
  case PK_ORDER: {
    int n = parse_ints(ps, v, RG_MAX_NDIM, true);
    op = n < 0 ? NULL : rg_op_dimshuffle(n, v);
    break;
  }
  case PK_INT: case PK_AXIS:
    op = len == 1 && parse_ints(ps, v, 1, false) == 1 ? one_int(cls->code, v[0]) : NULL;
    if (op && cls->code == RG_OP_RESHAPE) op = rg_op_reshape((int)v[0]);
    if (op && cls->code == RG_OP_FLATTEN) op = rg_op_flatten((int)v[0]);
    break;
  case PK_INT2:
    op = len == 2 && parse_ints(ps, v, 2, false) == 2 && v[1] >= 1 && v[1] <= INT32_MAX
             ? rg_op_split((int)v[0], (int)v[1]) : NULL;
    break;
  case PK_AXES: {
    int n = parse_ints(ps, v, RG_MAX_NDIM, false);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < i; j++)
        if (v[i] == v[j]) return parse_error(C, cls, "names an axis twice", ps);
    op = n < 0 ? NULL : rg_op_reduce(cls->code, n, v); /* (sum): no axes; sum: every axis */
    break;
  }
  case PK_INDEX: {
    rg_index e[RG_MAX_NDIM];
    int n = 0;
    for (; rg_is_pair(ps); ps = rg_cdr(ps), n++)
      if (n == RG_MAX_NDIM || !parse_entry(rg_car(ps), &e[n]))
        return parse_error(C, cls,
                           n < RG_MAX_NDIM && e[n].kind == RG_IDX_SLICE && e[n].c == 0
                               ? "bad index entry (a slice's step cannot be 0)"
                                                                     : "bad index entry",
                           rg_car(ps));
    op = rg_op_subtensor(cls->code, n, e);
    break;
  }
  case PK_INNER: return rgc_inner_parse(C, cls, ps);
  case PK_OPAQUE: break;
  }
  return op ? op : parse_error(C, cls, "bad parameters", ps);
}

/* Splits a trailing (inplace I) off the parameter list. */
static rg_term strip_inplace(rg_term ps, int64_t *inplace) {
  *inplace = -1;
  rg_term rev = rgk_reverse(ps);
  if (!rg_is_pair(rev)) return ps;
  rg_term last = rg_car(rev);
  if (!rg_is_pair(last) || rg_car(last) != sym_inplace || rg_list_length(last) != 2 ||
      !term_int(rg_car(rg_cdr(last)), inplace) || *inplace < 0)
    return ps;
  return rgk_reverse(rg_cdr(rev));
}

static const rg_op *params_parse(rg_ctx *C, const rg_op_class *cls, rg_term params) {
  init_syms();
  if (rg_list_length(params) < 0) return parse_error(C, cls, "parameters must be a list", params);
  int64_t inplace;
  rg_term ps = strip_inplace(params, &inplace);
  if (inplace >= 0 && !may_be_inplace(cls->code))
    return parse_error(C, cls, "cannot work in place", params);
  const rg_op *op = parse_by_kind(C, cls, ps);
  if (op && inplace >= 0) op = rg_op_inplace(op, (int)inplace);
  return op;
}

const rg_op *rg_op_from_term(rg_ctx *C, rg_term head) {
  init_syms();
  if (rg_is_foreign(head, &opterm_hooks)) return rg_foreign_ptr(head);
  rg_term name = rg_is_pair(head) ? rg_car(head) : head;
  if (rg_kind_of(name) != RG_K_SYMBOL) {
    if (C) rg_error(C, RG_ERR_SYNTAX, "not an op: %s", rg_to_string(head));
    return NULL;
  }
  int code = opcode_of_symbol(name);
  if (code < 0 || code == RG_OP_OPAQUE) {
    if (C) rg_error(C, RG_ERR_NAME, "unknown op '%s'", rg_symbol_name(name));
    return NULL;
  }
  const rg_op_class *cls = &rgc_classes[code];
  if (!rg_is_pair(head)) {
    const rg_op *op = rg_op_get((rg_opcode)code);
    if (!op) {
      if (C)
        rg_error(C, RG_ERR_SYNTAX, "%s: needs parameters: write it as ((%s PARAMETERS...) INPUTS...)", cls->name,
                 cls->name);
      return NULL;
    }
    return op;
  }
  return cls->params_parse(C, cls, rg_cdr(head));
}

void rgc_outs_alloc(rgc_outs *o, int n) {
  o->n = n;
  o->types = n <= 1 ? o->one : rgk_alloc((size_t)n * sizeof *o->types);
}
