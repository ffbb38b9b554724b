/*
 * inner.c — ops that own an inner graph: the shared infrastructure, and
 * the two ops of this layer, composite and op_from_graph (scan.c holds the
 * third, Scan, whose class makes its op back from parsed parameters with
 * its own checks: the class's inner_make).
 *
 * An inner-graph op holds a private, frozen copy of a FunctionGraph
 * (op->inner): it is cloned when the op is made and never changes after,
 * so ops stay immutable values and may be shared by any number of nodes
 * and graphs.  Outer inputs correspond to inner inputs and inner outputs to
 * outer outputs; composite and op_from_graph use the identity mapping,
 * and later ops (Scan) describe richer mappings in op->ints, which the
 * generic parameter code already compares, hashes, prints and parses
 * (ints first, then the graph).  Two inner-graph ops are equal when their
 * parameters are and their graphs compute the same thing
 * (rg_equal_computations with the inputs paired); the structural hash is
 * cached in the frozen graph.
 *
 *   composite      a graph of scalars (elementwise ops and composites only)
 *                  applied elementwise: its inputs broadcast like any
 *                  elementwise op's; fusion produces it.
 *   op_from_graph  any graph, called as one op: outer inputs must fit the
 *                  inner inputs' types, outputs have the inner outputs'.
 */
#include "core/core-impl.h"

/* ------------------------------------------------------------------ the infrastructure */

static rg_fgraph *freeze_copy(rg_fgraph *fg) {
  rg_fgraph *c = rg_fgraph_clone(fg, NULL);
  if (c) c->frozen = true;
  return c;
}

bool rgc_inner_equal(const rg_fgraph *a, const rg_fgraph *b) {
  if (a == b) return true;
  if (a->nin != b->nin || a->nout != b->nout) return false;
  for (int i = 0; i < a->nin; i++)
    if (!rg_type_equal(a->inputs[i]->type, b->inputs[i]->type)) return false;
  return rg_equal_computations(a->nout, a->outputs, b->outputs, a->nin, a->inputs, b->inputs);
}

static uint64_t var_hash(rg_memo *h, const rg_variable *v) {
  if (rg_is_constant(v)) return rg_constant_hash(v);
  return (uint64_t)(uintptr_t)rg_memo_get(h, v);
}

static uint64_t compute_hash(const rg_fgraph *g) {
  rg_memo *h = rg_memo_new();
  uint64_t acc = rgc_mix((uint64_t)g->nin, (uint64_t)g->nout);
  for (int i = 0; i < g->nin; i++)
    rg_memo_put(h, g->inputs[i], (void *)(uintptr_t)(rgc_mix(rg_type_hash(g->inputs[i]->type), (uint64_t)i) | 1));
  for (const rg_node *n = g->head; n; n = n->next) {
    uint64_t x = n->op->hash;
    for (int i = 0; i < n->nin; i++) x = rgc_mix(x, var_hash(h, n->inputs[i]));
    for (int k = 0; k < n->nout; k++)
      rg_memo_put(h, n->outputs[k], (void *)(uintptr_t)(rgc_mix(x, (uint64_t)k) | 1));
  }
  for (int k = 0; k < g->nout; k++) acc = rgc_mix(acc, var_hash(h, g->outputs[k]));
  return acc ? acc : 1;
}

uint64_t rgc_inner_hash(const rg_fgraph *g) {
  if (!g->frozen) return compute_hash(g);
  if (!g->hash) ((rg_fgraph *)g)->hash = compute_hash(g);
  return g->hash;
}

rg_term rgc_inner_term(const rg_op *op) {
  RGK_LOCAL_STACK(items, 16);
  for (int i = 0; i < op->nints; i++) rgk_push(&items, RGK_W(rg_int(op->ints[i])));
  rgk_push(&items, RGK_W(rg_graph_to_term(op->inner)));
  return rg_list((int)items.n, (rg_term *)items.v);
}

static int scalar_graph_error(rg_ctx *C, const rg_fgraph *g);

/* Reads what rgc_inner_term prints: the integer parameters, then one
 * (graph ...). */
const rg_op *rgc_inner_parse(rg_ctx *C, const rg_op_class *cls, rg_term params) {
  int64_t n = rg_list_length(params), nints = 0;
  int64_t *ints = n > 1 ? rg_gc_alloc((size_t)(n - 1) * sizeof *ints) : NULL;
  rg_term ps = params;
  for (; nints < n - 1 && rg_kind_of(rg_car(ps)) == RG_K_INT; ps = rg_cdr(ps))
    ints[nints++] = rg_int_value(rg_car(ps));
  rg_term g0 = n >= 1 && nints == n - 1 ? rg_car(ps) : RG_NIL;
  if (!rg_is_pair(g0) || rg_kind_of(rg_car(g0)) != RG_K_SYMBOL || strcmp(rg_symbol_name(rg_car(g0)), "graph")) {
    if (C) rg_error(C, RG_ERR_SYNTAX, "%s: expected integer parameters, then one (graph ...)", cls->name);
    return NULL;
  }
  rg_ctx *ctx = C ? C : rg_ctx_new();
  rg_fgraph *g = rgc_graph_from_term_named(ctx, g0, "inner graph");
  if (!g) return NULL;
  if (cls->inner_make) return cls->inner_make(ctx, g, (int)nints, ints);
  if (cls->code == RG_OP_COMPOSITE && scalar_graph_error(ctx, g) != RG_OK) return NULL;
  return rgc_inner_op(cls->code, g, (int)nints, ints);
}

rg_fgraph *rg_op_inner_graph(const rg_op *op) { return op ? op->inner : NULL; }

/* ------------------------------------------------------------------ composite */

static int scalar_graph_error(rg_ctx *C, const rg_fgraph *g) {
  for (int i = 0; i < g->nin; i++)
    if (g->inputs[i]->type->ndim != 0)
      return rg_error(C, RG_ERR_TYPE, "composite: the inner graph must be scalar: input %d has %d "
                      "dimensions", i, g->inputs[i]->type->ndim);
  for (int k = 0; k < g->nout; k++)
    if (g->outputs[k]->type->ndim != 0)
      return rg_error(C, RG_ERR_TYPE, "composite: the inner graph must be scalar: output %d has %d "
                      "dimensions", k, g->outputs[k]->type->ndim);
  for (const rg_node *n = g->head; n; n = n->next) {
    rg_op_family f = rgc_classes[n->op->code].family;
    if ((f != RG_FAM_ELEMWISE && n->op->code != RG_OP_COMPOSITE) || n->op->inplace >= 0)
      return rg_error(C, RG_ERR_TYPE, "composite: the inner graph may only contain elementwise ops "
                      "(not in place), found %s", rg_op_name(n->op));
  }
  if (g->nout == 0) return rg_error(C, RG_ERR_TYPE, "composite: the inner graph has no output");
  return RG_OK;
}

/* An inner-graph op over a frozen copy of fg, with integer parameters
 * (copied; the mapping of richer ops). */
const rg_op *rgc_inner_op(rg_opcode code, rg_fgraph *fg, int nints, const int64_t *ints) {
  rg_fgraph *inner = freeze_copy(fg);
  if (!inner) return NULL;
  rg_op *op = rgc_op_new(code);
  op->inner = inner;
  op->nout = inner->nout;
  if (nints) {
    int64_t *v = rg_gc_alloc((size_t)nints * sizeof *v);
    memcpy(v, ints, (size_t)nints * sizeof *v);
    op->ints = v;
    op->nints = nints;
  }
  return rgc_op_finish(op);
}

const rg_op *rg_op_composite(rg_ctx *C, rg_fgraph *fg) {
  if (!fg || scalar_graph_error(C, fg) != RG_OK) return NULL;
  return rgc_inner_op(RG_OP_COMPOSITE, fg, 0, NULL);
}

const rg_op *rg_op_from_graph(rg_ctx *C, rg_fgraph *fg) {
  if (!fg) return NULL;
  return rgc_inner_op(RG_OP_OP_FROM_GRAPH, fg, 0, NULL);
}

static int count_inputs(rg_ctx *C, const rg_op *op, int nin) {
  if (nin != op->inner->nin)
    return rgc_op_error(C, op, "expected %d input%s (the inner graph's), got %d", op->inner->nin,
                        op->inner->nin == 1 ? "" : "s", nin);
  return RG_OK;
}

static int composite_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                               rgc_outs *out) {
  const rg_fgraph *g = op->inner;
  if (count_inputs(C, op, nin)) return RG_ERR_TYPE;
  for (int i = 0; i < nin; i++)
    if (in[i]->type->dtype != g->inputs[i]->type->dtype)
      return rgc_op_error(C, op, "input %d has dtype %s, the inner graph expects %s", i,
                          rg_dtype_name(in[i]->type->dtype), rg_dtype_name(g->inputs[i]->type->dtype));
  rgc_outs_alloc(out, g->nout);
  for (int k = 0; k < g->nout; k++) {
    const rg_type *t = nin ? rgc_broadcast_type(C, op, nin, in, g->outputs[k]->type->dtype)
                           : rg_type_scalar(g->outputs[k]->type->dtype);
    if (!t) return RG_ERR_TYPE;
    out->types[k] = t;
  }
  return RG_OK;
}

static int ofg_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in, rgc_outs *out) {
  const rg_fgraph *g = op->inner;
  if (count_inputs(C, op, nin)) return RG_ERR_TYPE;
  /* an input may live on any device (the inner graph runs where the node
   * does, the linker copies inputs there), as a composite's may */
  for (int i = 0; i < nin; i++) {
    const rg_type *want = g->inputs[i]->type;
    if (!rg_type_is_subtype(rg_type_on_device(in[i]->type, want->device), want))
      return rgc_op_error(C, op, "input %d of type %s does not fit the inner input's type %s", i,
                          rg_type_str(in[i]->type), rg_type_str(want));
  }
  rg_device dev = rgc_result_device(nin, in);
  rgc_outs_alloc(out, g->nout);
  for (int k = 0; k < g->nout; k++) {
    const rg_type *t = g->outputs[k]->type;
    out->types[k] = t->device == RG_DEVICE_HOST ? rg_type_on_device(t, dev) : t;
  }
  return RG_OK;
}

int rgc_inner_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in,
                        rgc_outs *out) {
  if (!(*op)->inner) return rgc_op_error(C, *op, "has no inner graph");
  if ((*op)->code == RG_OP_COMPOSITE) return composite_make_node(C, *op, nin, in, out);
  return ofg_make_node(C, *op, nin, in, out);
}

int rgc_inner_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  if (node->op->code == RG_OP_COMPOSITE) {
    if (node->nin == 0) {
      for (int k = 0; k < node->nout; k++) out[k] = rgk_alloc(sizeof(rg_variable *));
      return RG_OK;
    }
    rgc_ew_infer_shape(C, node, in, out);
    for (int k = 1; k < node->nout; k++) out[k] = out[0];
    return RG_OK;
  }
  for (int k = 0; k < node->nout; k++) { /* static sizes; the rest from the outputs */
    const rg_type *t = node->outputs[k]->type;
    rgc_shape s = rgk_alloc((size_t)(t->ndim ? t->ndim : 1) * sizeof *s);
    for (int d = 0; d < t->ndim; d++) s[d] = t->shape[d] >= 0 ? rgc_dim_const(C, t->shape[d]) : NULL;
    out[k] = s;
  }
  return RG_OK;
}
