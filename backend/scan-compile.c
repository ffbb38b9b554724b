/*
 * scan-compile.c — compiling the inner graphs of Scan nodes: each goes
 * through the mode's rewrite query once, at compile time, like the outer
 * graph (the linker then links it once, with the node).
 *
 * The inner graph of an op is frozen, so each Scan is rebuilt: a copy of
 * its inner graph is rewritten (its own Scans first, so nesting works at
 * any depth), a scan op over it is made with the same layout, and the
 * node is replaced by one applying the new op to the same inputs.
 */
#include "backend/backend-impl.h"
#include "kanren/kanren-impl.h"
#include "relgraph/rewrite.h"
#include "relgraph/scan.h"

#include <string.h>

static int rewrite_one(rg_ctx *C, rg_fgraph *fg, rg_node *node, rg_rewriter *rw,
                       const rg_rewrite_opts *ro) {
  rg_fgraph *g = rg_fgraph_clone(rg_op_inner_graph(node->op), NULL);
  if (!g) return rg_error(C, RG_ERR, "scan: cannot copy the inner graph");
  int rc = rgb_rewrite_scans(C, g, rw, ro);
  if (rc) return rc;
  rg_rewrite_run *run = rg_rewrite(g, rw, ro);
  if (rg_rewrite_stop(run) == RG_STOP_ERROR)
    return rg_error(C, RG_ERR, "rewriting the inner graph of a scan failed: %s", rg_rewrite_stop_message(run));
  const rg_op *op = rg_op_scan_with_inner(C, node->op, g);
  rg_node *n = op ? rg_make_node(C, op, node->nin, node->inputs) : NULL;
  if (!n) return RG_ERR_TYPE;
  rg_variable **olds = rgk_alloc((size_t)node->nout * sizeof *olds), **news = rgk_alloc((size_t)node->nout * sizeof *news);
  int k = 0;
  for (int j = 0; j < node->nout; j++) /* outputs nobody uses are not in the graph */
    if (node->outputs[j]->nclients > 0) olds[k] = node->outputs[j], news[k++] = n->outputs[j];
  return rg_fgraph_replace_all(fg, k, olds, news, "scan inner rewrite");
}

int rgb_rewrite_scans(rg_ctx *C, rg_fgraph *fg, rg_rewriter *rw, const rg_rewrite_opts *ro) {
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  rg_node **scans = rgk_alloc((n + 1) * sizeof *scans);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (order[i]->op->code == RG_OP_SCAN) scans[k++] = order[i];
  for (size_t i = 0; i < k; i++) {
    int rc = rewrite_one(C, fg, scans[i], rw, ro);
    if (rc) return rc;
  }
  return RG_OK;
}
