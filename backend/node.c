/*
 * node.c — copying graph nodes into the backend's plain-memory form, and
 * running one node outside any function.
 *
 * rgb_node_init copies everything a kernel may read (op parameters, static
 * types, a label) into malloc'd memory, so that a linked program never
 * points into collected memory.
 */
#include "backend/backend-impl.h"
#include "base/base.h"
#include "relgraph/scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rgb_vtype_of(rgb_vtype *v, const rg_type *t) {
  memset(v, 0, sizeof *v);
  v->dtype = t->dtype;
  v->ndim = t->ndim;
  v->device = t->device;
  for (int i = 0; i < t->ndim; i++) v->shape[i] = t->shape[i];
}

int rgb_node_init(rgb_node *bn, const rg_node *n) {
  const rg_op *op = n->op;
  memset(bn, 0, sizeof *bn);
  bn->code = op->code;
  bn->dtype = op->dtype;
  bn->inplace = op->inplace;
  bn->view_of = n->nout ? rg_op_view_of(op, 0) : -1;
  for (int j = 1; j < n->nout; j++)
    if (rg_op_view_of(op, j) != bn->view_of) bn->view_of = -1;
  bn->all_axes = op->all_axes;
  bn->nin = n->nin;
  bn->nout = n->nout;
  rgb_vtype *in = rg_calloc((size_t)(n->nin ? n->nin : 1), sizeof *in);
  rgb_vtype *out = rg_calloc((size_t)(n->nout ? n->nout : 1), sizeof *out);
  int64_t *ints = op->nints ? rg_malloc((size_t)op->nints * sizeof(int64_t)) : NULL;
  char *label = rg_strdup(rg_op_name(op));
  if (!in || !out || (op->nints && !ints) || !label) {
    rg_free(in);
    rg_free(out);
    rg_free(ints);
    rg_free(label);
    return RG_ERR_NOMEM;
  }
  for (int i = 0; i < n->nin; i++) {
    rgb_vtype_of(&in[i], n->inputs[i]->type);
    in[i].weak = (n->inputs[i]->flags & RG_VAR_WEAK) != 0;
    in[i].known = in[i].weak && rg_dtype_is_int(in[i].dtype) && rg_constant_get_i64(n->inputs[i], &in[i].value);
    in[i].constant = rg_is_constant(n->inputs[i]);
  }
  for (int j = 0; j < n->nout; j++) rgb_vtype_of(&out[j], n->outputs[j]->type);
  if (op->nints) memcpy(ints, op->ints, (size_t)op->nints * sizeof(int64_t));
  bn->in = in;
  bn->out = out;
  bn->nints = op->nints;
  bn->ints = ints;
  bn->label = label;
  return RG_OK;
}

int rgb_node_link_inner(rgb_node *bn, const rg_node *n, const rg_backend *backend, int nthreads, char *err,
                        size_t errlen) {
  rg_fgraph *g = rg_op_inner_graph(n->op);
  if (!g) return 0;
  size_t nn;
  rg_node *const *nodes = rg_fgraph_toposort(g, &nn);
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  rg_variable **io = rg_malloc((size_t)(nin + nout + 1) * sizeof *io);
  if (!io) {
    snprintf(err, errlen, "out of memory");
    return RG_ERR_NOMEM;
  }
  for (int i = 0; i < nin; i++) io[i] = rg_fgraph_input(g, i);
  for (int j = 0; j < nout; j++) io[nin + j] = rg_fgraph_output(g, j);
  rgb_link_opts o = {.backend = backend, .inner = true, .device_outputs = true,
                      /* a composite's graph is read by its kernel, never run by a VM */
                      .plan = n->op->code != RG_OP_COMPOSITE, .nthreads = nthreads,
                      .codegen = bn->codegen};
  bn->inner = rgb_link((int)nn, nodes, nin, io, nout, io + nin, &o, err, errlen);
  rg_free(io);
  return bn->inner ? 0 : RG_ERR_TYPE;
}

void rgb_node_clear(rgb_node *bn) {
  rgb_program_free(bn->inner);
  rg_free(bn->join_slot);
  rg_free(bn->full_of);
  rg_free((void *)bn->in);
  rg_free((void *)bn->out);
  rg_free((void *)bn->ints);
  rg_free((void *)bn->label);
  memset(bn, 0, sizeof *bn);
}

int rgb_eval_node(const rg_node *n, rg_tensor *const *inputs, rg_tensor **outputs, char *err,
                  size_t errlen) {
  rgb_node bn;
  int rc = rgb_node_init(&bn, n);
  if (rc) {
    snprintf(err, errlen, "out of memory");
    return rc;
  }
  if ((rc = rgb_node_link_inner(&bn, n, &rgb_cpu, 1, err, errlen))) {
    rgb_node_clear(&bn);
    return rc;
  }
  rgb_bound bound = {0};
  rgb_kernel k = !rgb_cpu_backend.bind(NULL, &bn, &bound, NULL, 0) ? bound.fn : NULL; /* ifelse: none */
  if (!k) {
    snprintf(err, errlen, "%s: the CPU backend cannot run this op on its own", bn.label);
    rgb_node_clear(&bn);
    return RG_ERR_TYPE;
  }
  rgb_runtime *rt = rgb_runtime_new(1, false);
  rg_tensor **cells = rg_calloc((size_t)(n->nin + n->nout), sizeof *cells);
  rg_tensor ***ptrs = rg_calloc((size_t)(n->nin + n->nout), sizeof *ptrs);
  if (!rt || !cells || !ptrs) {
    rgb_runtime_free(rt);
    rg_free(cells);
    rg_free(ptrs);
    rgb_node_clear(&bn);
    snprintf(err, errlen, "out of memory");
    return RG_ERR_NOMEM;
  }
  for (int i = 0; i < n->nin + n->nout; i++) ptrs[i] = &cells[i];
  for (int i = 0; i < n->nin; i++) cells[i] = (rg_tensor *)inputs[i];
  rgb_exec x = {.node = &bn, .inp = ptrs, .outp = ptrs + n->nin, .rt = rt};
  rc = k(&x);
  for (int j = 0; j < n->nout; j++) {
    rg_tensor *t = cells[n->nin + j];
    outputs[j] = rc == 0 ? t : NULL;
    if (rc != 0) rg_tensor_free(t);
  }
  if (rc) snprintf(err, errlen, "%s", rt->err);
  rgb_runtime_free(rt);
  rg_free(cells);
  rg_free(ptrs);
  rgb_node_clear(&bn);
  return rc;
}

/* Constant folding's evaluator: a node whose inputs are all constants. */
int rg_eval_node(const rg_node *n, rg_tensor **outputs, char *err, size_t errlen) {
  rg_tensor *in[n->nin > 0 ? n->nin : 1];
  for (int i = 0; i < n->nin; i++) {
    in[i] = rg_constant_to_tensor(n->inputs[i]);
    if (!in[i]) {
      for (int k = 0; k < i; k++) rg_tensor_free(in[k]);
      snprintf(err, errlen, "input %d of %s is not a constant", i, rg_op_name(n->op));
      return RG_ERR_TYPE;
    }
  }
  int rc = rgb_eval_node(n, in, outputs, err, errlen);
  for (int i = 0; i < n->nin; i++) rg_tensor_free(in[i]);
  return rc;
}

bool rgb_scan_length_input(const rgb_node *n, int i) {
  if (i == 0) return true;
  char scratch[RG_SCAN_SCRATCH(n->nints)];
  rg_scan_info s;
  if (!rg_scan_info_decode(n->nints, n->ints, &s, scratch)) return false;
  int first = rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, 0);
  return s.n_nit_sot > 0 && i >= first && i < first + s.n_nit_sot;
}
