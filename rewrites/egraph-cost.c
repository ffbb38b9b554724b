/*
 * egraph-cost.c — cost models for extraction: FLOPs and bytes moved from
 * static shapes, measured time, and a cost written as a relation.
 *
 * Costs need concrete shapes.  Every class gets a *sized* variable: its
 * representative node rebuilt by make_node on its children's sized
 * variables, starting from the graph's inputs with their unknown
 * dimensions given sizes by name ("A.0", "A", "?").  Classes are sized in
 * the order of their smallest e-node id, which puts every class after the
 * classes its representative node uses (egraph-impl.h).  A node's cost
 * then looks at its children's sized types and its class's.
 *
 * FLOPs: dot-like ops 2*m*k*n (gemm and gemv add the scaling), outer and
 * ger m*n, elementwise ops one per output element and operand beyond the
 * first (unary: one per element), reductions one per input element
 * (softmax five), a Scan its steps times its step's FLOPs, shape ops and
 * leaves none.  Bytes: what a node reads and writes (its inputs' and
 * output's sizes), nothing for views (dimshuffle, reshape, subtensor) and
 * leaves.  Measured and relational costs are cached per op and input
 * types.
 *
 * A node of several outputs (a Scan, a split, an opaque op of several) is
 * one e-node per output; each costs what the whole node costs (its inputs
 * read, every output written, a Scan's work, its measured time), and
 * extraction charges the node once for any number of its outputs an
 * answer uses (eg_node_costs marks these e-nodes): the node runs whole
 * however many of its outputs are read.  A cost relation prices each
 * output as it says.
 */
#include "rewrites/egraph-impl.h"
#include "relgraph/scan.h"

#include <math.h>
#include <stdlib.h>

enum { CM_FLOPS, CM_BYTES, CM_TIME, CM_RELATION };

typedef struct size_entry { const char *name; int64_t size; struct size_entry *next; } size_entry;

/* A cached cost: key hash (0 empty), the node it was measured on (its
 * op, input types and the output costed are the key, compared in full
 * on a hash hit) and the value.  In collected memory (it holds nodes). */
typedef struct cost_slot { uint64_t key; const rg_node *node; int out; double cost; } cost_slot;

struct rg_cost_model {
  int kind;
  size_entry *sizes;
  double (*measure)(const rg_node *node, void *ud);
  void *ud;
  rg_term rel;
  cost_slot *cache;
  size_t ncache, capcache;
  const char *why;  /* the first reason the relation gave a node no cost */
};

const char *rg_cost_why(const rg_cost_model *cm) { return cm ? cm->why : NULL; }

static rg_cost_model *model(int kind) {
  rg_cost_model *cm = rg_gc_alloc(sizeof *cm);
  cm->kind = kind;
  return cm;
}

rg_cost_model *rg_cost_flops(void) { return model(CM_FLOPS); }
rg_cost_model *rg_cost_bytes(void) { return model(CM_BYTES); }

rg_cost_model *rg_cost_measured(double (*measure)(const rg_node *node, void *ud), void *ud) {
  rg_cost_model *cm = model(CM_TIME);
  cm->measure = measure;
  cm->ud = ud;
  return cm;
}

rg_cost_model *rg_cost_relation(rg_term rel) {
  rg_cost_model *cm = model(CM_RELATION);
  cm->rel = rel;
  return cm;
}

const char *rg_cost_name(const rg_cost_model *cm) {
  static const char *names[] = {"flops", "bytes", "time", "relation"};
  return names[cm->kind];
}

int rg_cost_set_size(rg_cost_model *cm, const char *name, int64_t size) {
  if (!name || !*name || size < 0) return RG_ERR_TYPE;
  size_entry *e = rg_gc_alloc(sizeof *e);
  e->name = rgr_sprintf("%s", name);
  e->size = size;
  e->next = cm->sizes;
  cm->sizes = e;
  return RG_OK;
}

/* ------------------------------------------------------------------ sized classes */

static int64_t size_of(const rg_cost_model *cm, const char *name) {
  for (const size_entry *e = cm->sizes; e; e = e->next)
    if (!strcmp(e->name, name)) return e->size;
  return -1;
}

/* The size of dimension d of leaf v: "v.d", "v", then "?". */
static int64_t leaf_size(rg_ctx *C, const rg_cost_model *cm, const rg_variable *v, int d) {
  const char *n = v->name ? v->name : "";
  int64_t s = *n ? size_of(cm, rgr_sprintf("%s.%d", n, d)) : -1;
  if (s < 0 && *n) s = size_of(cm, n);
  if (s < 0) s = size_of(cm, "?");
  if (s < 0)
    rg_error(C, RG_ERR_TYPE, "cost: dimension %d of %s has no static size; give --size %s.%d=N (or ?=N)",
             d, *n ? n : "an input", *n ? n : "NAME", d);
  return s;
}

static rg_variable *sized_leaf(rg_ctx *C, const rg_cost_model *cm, rg_variable *v) {
  const rg_type *t = v->type;
  bool unknown = false;
  for (int d = 0; d < t->ndim; d++) unknown |= t->shape[d] < 0;
  if (!unknown || rg_is_constant(v)) return v;
  int64_t shape[RG_MAX_NDIM];
  for (int d = 0; d < t->ndim; d++)
    if ((shape[d] = t->shape[d] >= 0 ? t->shape[d] : leaf_size(C, cm, v, d)) < 0) return NULL;
  return rg_input(C, v->name, rg_type_on_device(rg_type_new(t->dtype, t->ndim, shape), t->device));
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The leaf of the e-graph named name, or NULL. */
static const rg_variable *named_leaf(const rg_egraph *eg, const char *name) {
  for (uint32_t i = 0; i < eg->nheads; i++) {
    const rg_variable *v = eg->heads[i].leaf;
    if (v && v->name && !strcmp(v->name, name)) return v;
  }
  return NULL;
}

/* Every size given names something of the e-graph: "?", a leaf, or a
 * dimension "leaf.d" of one (a misspelt name would quietly leave its
 * dimensions at "?"); false with an error naming it otherwise. */
static bool sizes_name_leaves(rg_egraph *eg, const rg_cost_model *cm) {
  for (const size_entry *e = cm->sizes; e; e = e->next) {
    if (!strcmp(e->name, "?") || named_leaf(eg, e->name)) continue;
    const char *dot = strrchr(e->name, '.');
    char *end = NULL;
    long d = dot && dot[1] ? strtol(dot + 1, &end, 10) : -1;
    const rg_variable *v = end && !*end ? named_leaf(eg, rgr_sprintf("%.*s", (int)(dot - e->name), e->name)) : NULL;
    if (!v) {
      rg_error(eg->C, RG_ERR_NAME, "cost: size %s: the graph has no input named '%.*s'", e->name,
               (int)(dot && end && !*end ? dot - e->name : (long)strlen(e->name)), e->name);
      return false;
    }
    if (d < 0 || d >= v->type->ndim) {
      rg_error(eg->C, RG_ERR_NAME, "cost: size %s: %s has %d dimension%s (%s)", e->name, v->name,
               v->type->ndim, v->type->ndim == 1 ? "" : "s", rg_type_str(v->type));
      return false;
    }
  }
  return true;
}

/* Sized variables of every root class (indexed by class id); NULL with an
 * error in the context when a size is missing or sizes do not fit. */
static const rg_type *sized_type(const rg_cost_model *cm, const rg_type *t);

/* An int64 constant of the value of shape arithmetic over sized values
 * (shape_i and shape of known sizes, make_vector, +, -, *, // and
 * max/min of such constants), or NULL. */
static rg_variable *shape_constant(rg_ctx *C, const rg_node *node) {
  rg_opcode code = node->op->code;
  int64_t a, b, v[RG_MAX_NDIM];
  const rg_type *t = node->inputs[0]->type;
  switch (code) {
  case RG_OP_SHAPE_I:
    return t->shape[node->op->ints[0]] >= 0 ? rg_constant_scalar_int(C, RG_INT64, t->shape[node->op->ints[0]]) : NULL;
  case RG_OP_SHAPE:
    for (int d = 0; d < t->ndim; d++)
      if ((v[d] = t->shape[d]) < 0) return NULL;
    return rg_constant_data(C, RG_INT64, 1, (int64_t[]){t->ndim}, v);
  case RG_OP_MAKE_VECTOR:
    if (node->nin > RG_MAX_NDIM || node->outputs[0]->type->dtype != RG_INT64) return NULL;
    for (int i = 0; i < node->nin; i++)
      if (!rg_constant_get_i64(node->inputs[i], &v[i])) return NULL;
    return rg_constant_data(C, RG_INT64, 1, (int64_t[]){node->nin}, v);
  case RG_OP_ADD: case RG_OP_SUB: case RG_OP_MUL: case RG_OP_INT_DIV: case RG_OP_MAXIMUM: case RG_OP_MINIMUM:
    if (node->nin != 2 || node->outputs[0]->type->ndim || !rg_dtype_is_int(node->outputs[0]->type->dtype) ||
        !rg_constant_get_i64(node->inputs[0], &a) || !rg_constant_get_i64(node->inputs[1], &b) ||
        (code == RG_OP_INT_DIV && b <= 0) || a < -(1 << 30) || a > (1 << 30) || b < -(1 << 30) || b > (1 << 30))
      return NULL;
    a = code == RG_OP_ADD ? a + b : code == RG_OP_SUB ? a - b : code == RG_OP_MUL ? a * b
      : code == RG_OP_INT_DIV ? (a >= 0 ? a / b : -((-a + b - 1) / b)) : code == RG_OP_MAXIMUM ? (a > b ? a : b) : (a < b ? a : b);
    return rg_constant_scalar_int(C, node->outputs[0]->type->dtype, a);
  default: return NULL;
  }
}

/* The sized variable of output `out` of a node rebuilt on sized inputs:
 * shape arithmetic over known sizes folded into a constant (so the
 * slices and reshapes a Scan push-out writes with shape_i get their sizes,
 * which cost them), else the output, its sizes still unknown given the
 * size `?` when there is one. */
static rg_variable *sized_value(rg_ctx *C, const rg_cost_model *cm, const rg_node *node, int out) {
  rg_variable *v = node->nout == 1 ? shape_constant(C, node) : NULL;
  if (!v && node->op->code == RG_OP_SUBTENSOR && !(v = rgr_subtensor_static(C, node))) rg_clear_error(C);
  if (v) return v;
  v = node->outputs[out];
  const rg_type *t = sized_type(cm, v->type);
  return t == v->type ? v : rg_input(C, v->name, t);
}

static rg_variable **sized_classes(rg_egraph *eg, const rg_cost_model *cm) {
  if (!sizes_name_leaves(eg, cm)) return NULL;
  /* (smallest node id, class) pairs, sorted */
  uint64_t *order = malloc((eg->nlive + 1) * sizeof *order);
  if (!order) return rg_error(eg->C, RG_ERR_NOMEM, "cost: out of memory for %u e-classes", eg->ncls), NULL;
  uint32_t n = 0;
  for (uint32_t c = 0; c < eg->ncls; c++)
    if (eg->uf[c] == c) order[n++] = (uint64_t)eg->cls[c].minnode << 32 | c;
  qsort(order, n, sizeof *order, cmp_u64);
  rg_variable **sized = rg_gc_alloc((eg->ncls + 1) * sizeof *sized);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t c = (uint32_t)order[i], m = eg->cls[c].minnode;
    const eg_head *h = &eg->heads[eg->nodes[m].head];
    if (h->leaf) {
      sized[c] = sized_leaf(eg->C, cm, h->leaf);
    } else {
      uint32_t nch = eg->nodes[m].nch;
      rg_variable **in = rg_gc_alloc((nch + 1) * sizeof *in);
      for (uint32_t j = 0; j < nch; j++) in[j] = sized[eg_find(eg, eg_kids(eg, m)[j])];
      rg_node *node = rg_make_node(eg->C, h->op, (int)nch, in);
      sized[c] = node ? sized_value(eg->C, cm, node, h->out) : NULL;
    }
    if (!sized[c]) {
      free(order);
      if (!rg_errcode(eg->C)) rg_error(eg->C, RG_ERR_TYPE, "cost: the sizes given do not fit the graph");
      else if (!h->leaf) /* a leaf's own message says what size is missing */
        rg_error(eg->C, rg_errcode(eg->C), "cost: with the sizes given: %s", rgr_sprintf("%s", rg_errmsg(eg->C)));
      return NULL;
    }
  }
  free(order);
  return sized;
}

/* ------------------------------------------------------------------ static costs */

static double numel(const rg_type *t) {
  double n = 1;
  for (int d = 0; d < t->ndim; d++) n *= (double)(t->shape[d] > 0 ? t->shape[d] : 0);
  return n;
}

static double nbytes(const rg_type *t) { return numel(t) * (double)rg_dtype_size(t->dtype); }

/* FLOPs of a dot-like product: 2 * (output elements) * (contracted size). */
static double dot_flops(const rg_type *a, const rg_type *out) {
  double k = a->ndim ? (double)(a->shape[a->ndim - 1] > 0 ? a->shape[a->ndim - 1] : 0) : 1;
  return 2 * numel(out) * k;
}

static double flops(rg_opcode code, int nin, const rg_type *const *in, const rg_type *out) {
  switch (code) {
  case RG_OP_DOT: case RG_OP_BATCHED_DOT: return nin == 2 ? dot_flops(in[0], out) : 0;
  case RG_OP_GEMM: return nin == 5 ? dot_flops(in[2], out) + 2 * numel(out) : 0;
  case RG_OP_GEMV: return nin == 5 ? dot_flops(in[2], out) + 2 * numel(out) : 0;
  case RG_OP_OUTER: return numel(out);
  case RG_OP_GER: return 2 * numel(out);
  case RG_OP_SOFTMAX: case RG_OP_LOG_SOFTMAX: return 5 * numel(in[0]);
  case RG_OP_OPAQUE: return numel(out); /* unknown work: one per element made */
  default: break;
  }
  switch (rg_opcode_family(code)) {
  case RG_FAM_ELEMWISE:
    if (code == RG_OP_CAST || code == RG_OP_IDENTITY || code == RG_OP_SECOND) return 0;
    return numel(out) * (nin > 2 ? nin - 1 : 1);
  case RG_FAM_REDUCE: return numel(in[0]);
  default: return 0;
  }
}

/* The steps a Scan node runs: its n_steps when constant, else the length
 * of its first sequence (its type is sized in the e-graph), else the size
 * "?" when given, else 1. */
static double scan_steps(const rg_cost_model *cm, const rg_node *node, const rg_scan_info *s) {
  int64_t n;
  if (rg_is_constant(node->inputs[0]) && rg_constant_get_i64(node->inputs[0], &n)) return n > 0 ? (double)n : 0;
  if (s->n_seqs) {
    const rg_type *t = node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, 0)]->type;
    if (t->ndim && t->shape[0] >= 0) return (double)t->shape[0];
  }
  n = size_of(cm, "?");
  return n >= 0 ? (double)n : 1;
}

/* FLOPs of a Scan node: its steps times its step's (the inner graph's
 * nodes, their unknown sizes at "?"). */
static double scan_flops(const rg_cost_model *cm, const rg_node *node) {
  rg_scan_info s;
  rg_fgraph *inner = rg_op_inner_graph(node->op);
  if (!inner || !rg_scan_info_of(node->op, &s)) return 0;
  rg_cost_model step = {.kind = CM_FLOPS, .sizes = cm->sizes};
  double per = 0;
  for (rg_node *m = rg_fgraph_first(inner); m; m = rg_fgraph_next(m)) per += rgr_node_cost(&step, m);
  return scan_steps(cm, node, &s) * per;
}

static bool is_view(rg_opcode code) {
  return code == RG_OP_DIMSHUFFLE || code == RG_OP_RESHAPE || code == RG_OP_FLATTEN ||
         code == RG_OP_SUBTENSOR || code == RG_OP_SHAPE || code == RG_OP_SHAPE_I;
}

/* Bytes a node moves for one output: that output, and its inputs' `share`
 * (1 / the node's outputs). */
static double bytes(rg_opcode code, int nin, const rg_type *const *in, const rg_type *out, double share) {
  if (is_view(code)) return 0;
  double b = 0;
  for (int i = 0; i < nin; i++) b += nbytes(in[i]);
  return nbytes(out) + share * b;
}

/* Ops whose node may have several outputs. */
static bool may_have_outputs(rg_opcode code) {
  return code == RG_OP_SCAN || code == RG_OP_SPLIT || code == RG_OP_IFELSE || code == RG_OP_COMPOSITE ||
         code == RG_OP_OP_FROM_GRAPH || code == RG_OP_OPAQUE;
}

/* ------------------------------------------------------------------ cached costs */

static uint64_t node_key(const rg_node *node, int out) {
  uint64_t h = rg_op_hash(node->op) * 0x9e3779b97f4a7c15ull + 1 + (uint64_t)out;
  for (int i = 0; i < node->nin; i++) h = (h ^ rg_type_hash(node->inputs[i]->type)) * 0xff51afd7ed558ccdull;
  return h ? h : 1;
}

/* Whether two nodes have one key: op, input types and the output. */
static bool same_key(const rg_node *a, int aout, const rg_node *b, int bout) {
  if (aout != bout || a->nin != b->nin || !rg_op_equal(a->op, b->op)) return false;
  for (int i = 0; i < a->nin; i++)
    if (!rg_type_equal(a->inputs[i]->type, b->inputs[i]->type)) return false;
  return true;
}

static double *cache_slot(rg_cost_model *cm, const rg_node *node, int out, bool *found) {
  uint64_t key = node_key(node, out);
  if (2 * (cm->ncache + 1) > cm->capcache) {
    size_t cap = cm->capcache ? 2 * cm->capcache : 256;
    cost_slot *t = rg_gc_alloc(cap * sizeof *t);
    for (size_t i = 0; i < cm->capcache; i++) {
      if (!cm->cache[i].key) continue;
      size_t s = cm->cache[i].key & (cap - 1);
      while (t[s].key) s = (s + 1) & (cap - 1);
      t[s] = cm->cache[i];
    }
    cm->cache = t;
    cm->capcache = cap;
  }
  size_t s = key & (cm->capcache - 1);
  for (; cm->cache[s].key; s = (s + 1) & (cm->capcache - 1))
    if (cm->cache[s].key == key && same_key(cm->cache[s].node, cm->cache[s].out, node, out))
      return *found = true, &cm->cache[s].cost;
  cm->cache[s] = (cost_slot){key, node, out, 0};
  cm->ncache++;
  *found = false;
  return &cm->cache[s].cost;
}

static double relation_cost(rg_ctx *C, rg_cost_model *cm, rg_variable *out) {
  rg_term c = rg_var(C), args[2] = {rg_var_term(out), c}, answers;
  rg_run_opts o = {.max_steps = RGR_RELATION_STEPS};
  int rc = rg_run(C, 1, c, rg_call(cm->rel, 2, args), &o, &answers);
  const char *why = NULL, *rel = rg_proc_name(cm->rel) ? rg_proc_name(cm->rel) : "the cost relation";
  double v = INFINITY;
  if (rc != RG_OK) why = rgr_sprintf("%s failed on %s: %s", rel, rgr_show(out), rg_errmsg(C));
  else if (!rg_is_pair(answers)) why = rgr_sprintf("%s has no answer for %s", rel, rgr_show(out));
  else if (rg_kind_of(rg_car(answers)) == RG_K_INT) v = (double)rg_int_value(rg_car(answers));
  else if (rg_kind_of(rg_car(answers)) == RG_K_FLOAT) v = rg_float_value(rg_car(answers));
  else why = rgr_sprintf("%s answered %s for %s, not a number", rel, rgr_show_term(rg_car(answers)), rgr_show(out));
  if (!why && !(v >= 0)) { /* negative or NaN; +inf.0 rules the node out */
    why = rgr_sprintf("%s answered %s for %s: a cost is a number >= 0", rel, rgr_show_term(rg_car(answers)),
                      rgr_show(out));
    v = INFINITY;
  } else if (!why && isinf(v)) {
    why = rgr_sprintf("%s priced %s at +inf.0", rel, rgr_show(out));
  }
  rg_clear_error(C);
  if (why && !cm->why) cm->why = why;
  return v;
}

/* A measured or relational cost, cached per (op, input types, output). */
static double cached_dynamic(rg_ctx *C, rg_cost_model *cm, const rg_node *node, int out) {
  bool found;
  double *slot = cache_slot(cm, node, out, &found);
  if (found) return *slot;
  double v = cm->kind == CM_TIME ? cm->measure(node, cm->ud) : relation_cost(C, cm, node->outputs[out]);
  if (cm->kind == CM_TIME && v < 0 && !cm->why)
    cm->why = rgr_sprintf("%s could not be timed: it did not compile or run on the CPU", rgr_show(node->outputs[out]));
  return *slot = v < 0 ? INFINITY : v;
}

/* The whole of a node of several outputs (an e-node is one output of it):
 * a Scan's FLOPs, every output's elementwise work, the bytes of its inputs
 * and of every output. */
static double whole_node(const rg_cost_model *cm, const rg_node *node, int n, const rg_type *const *ts) {
  if (cm->kind == CM_FLOPS && node->op->code == RG_OP_SCAN) return scan_flops(cm, node);
  double total = 0;
  for (int k = 0; k < node->nout; k++)
    total += cm->kind == CM_FLOPS ? flops(node->op->code, n, ts, node->outputs[k]->type)
                                  : bytes(node->op->code, n, ts, node->outputs[k]->type, k == 0 ? 1 : 0);
  return total;
}

/* E-node id's cost; *whole is set when it is the cost of the whole node of
 * several outputs the e-node is one output of (extraction charges such a
 * node once, whichever of its outputs an answer uses). */
static double node_cost(rg_egraph *eg, const rg_cost_model *cm, rg_variable **sized, uint32_t id, bool *whole) {
  const eg_node *x = &eg->nodes[id];
  const eg_head *h = &eg->heads[x->head];
  *whole = false;
  if (h->leaf) return 0;
  int n = (int)x->nch;
  rg_variable *in[n ? n : 1];
  const rg_type *ts[n ? n : 1];
  for (int i = 0; i < n; i++) {
    in[i] = sized[eg_find(eg, eg_kids(eg, id)[i])];
    ts[i] = in[i]->type;
  }
  const rg_type *out = sized[eg_find(eg, x->cls)]->type;
  /* the node itself, for what depends on it whole */
  rg_node *node = cm->kind == CM_TIME || cm->kind == CM_RELATION || may_have_outputs(h->code)
                      ? rg_make_node(eg->C, h->op, n, in)
                      : NULL;
  if (!node && (cm->kind == CM_TIME || cm->kind == CM_RELATION)) {
    rg_clear_error(eg->C);
    return INFINITY;
  }
  rg_clear_error(eg->C);
  if (cm->kind == CM_RELATION) return cached_dynamic(eg->C, (rg_cost_model *)cm, node, h->out); /* what costo says of the output */
  *whole = node && node->nout > 1;
  if (cm->kind == CM_TIME) return cached_dynamic(eg->C, (rg_cost_model *)cm, node, h->out); /* the whole node's time */
  if (*whole || (node && h->code == RG_OP_SCAN)) return whole_node(cm, node, n, ts);
  return cm->kind == CM_FLOPS ? flops(h->code, n, ts, out) : bytes(h->code, n, ts, out, 1);
}

double *eg_node_costs(rg_egraph *eg, const rg_cost_model *cm, uint8_t *whole) {
  rg_variable **sized = sized_classes(eg, cm);
  if (!sized) return NULL;
  double *cost = malloc((eg->nnodes + 1) * sizeof *cost);
  if (!cost) return rg_error(eg->C, RG_ERR_NOMEM, "cost: out of memory for %u e-nodes", eg->nnodes), NULL;
  for (uint32_t id = 0; id < eg->nnodes; id++) {
    bool w = false;
    cost[id] = eg->nodes[id].dead ? INFINITY : node_cost(eg, cm, sized, id, &w);
    if (whole) whole[id] = w;
  }
  return cost;
}

/* ------------------------------------------------------------------ costs of graph nodes */

/* t with its statically unknown dimensions at the size "?" (the driver
 * sees inner values, which have no names to size them by); t itself when
 * it has none or no "?" size was given (they then count as 0). */
static const rg_type *sized_type(const rg_cost_model *cm, const rg_type *t) {
  int64_t q = -1, shape[RG_MAX_NDIM];
  bool unknown = false;
  for (int d = 0; d < t->ndim; d++) unknown |= t->shape[d] < 0;
  if (!unknown || (q = size_of(cm, "?")) < 0) return t;
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d] < 0 ? q : t->shape[d];
  return rg_type_new(t->dtype, t->ndim, shape);
}

/* The models that run something (time, a cost relation) see the node
 * over inputs of the sized types, as the e-graph's classes are sized:
 * the node itself when nothing was sized, else a copy over fresh inputs
 * of those types (NULL when the op refuses them). */
static const rg_node *sized_node(const rg_node *node, const rg_type *const *ts) {
  int n = node->nin;
  bool changed = false;
  for (int i = 0; i < n; i++) changed |= ts[i] != node->inputs[i]->type;
  if (!changed) return node;
  rg_ctx *C = node->outputs[0]->ctx;
  rg_variable *in[n ? n : 1];
  for (int i = 0; i < n; i++)
    in[i] = ts[i] == node->inputs[i]->type ? node->inputs[i] : rg_input(C, node->inputs[i]->name, ts[i]);
  rg_node *copy = rg_make_node(C, node->op, n, in);
  if (!copy) rg_clear_error(C);
  return copy;
}

double rgr_node_cost(rg_cost_model *cm, const rg_node *node) {
  if (!node->nout) return 0;
  int n = node->nin;
  const rg_type *ts[n ? n : 1];
  for (int i = 0; i < n; i++) ts[i] = sized_type(cm, node->inputs[i]->type);
  if (cm->kind == CM_TIME || cm->kind == CM_RELATION) {
    const rg_node *sized = sized_node(node, ts);
    return sized ? cached_dynamic(node->outputs[0]->ctx, cm, sized, 0) : INFINITY;
  }
  if (cm->kind == CM_FLOPS && node->op->code == RG_OP_SCAN) return scan_flops(cm, node);
  double total = 0; /* every output's part, of a node of several */
  for (int k = 0; k < node->nout; k++) {
    const rg_type *out = sized_type(cm, node->outputs[k]->type);
    total += cm->kind == CM_FLOPS ? flops(node->op->code, n, ts, out)
                                  : bytes(node->op->code, n, ts, out, 1.0 / node->nout);
  }
  return total;
}
