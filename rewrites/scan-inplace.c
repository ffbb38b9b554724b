/*
 * scan-inplace.c — scan_inplace (Aesara's name): a Scan computes its
 * mit-mot buffers over the outer buffers themselves instead of copies.
 *
 * A mit-mot's outer input is a whole buffer the loop reads and writes
 * (the gradient scans build one of zeros per recurrent state); the
 * executor copies it first unless the node works in place.  The rewrite
 * marks a Scan in place when every mit-mot buffer is safe to overwrite:
 * computed by a node (never a graph input or a constant), read by this
 * Scan alone and only once, not an output of the graph, and not a view
 * of another value.  The linker drops the mark where a buffer turns out
 * to be borrowed, and the executor copies after all where the buffer's
 * storage is shared at run time, so the mark is never unsafe.
 *
 * Relgraph's sit-sots and mit-sots do not need it: their trace buffers
 * are allocated by the executor, which copies only the initial rows into
 * them (Aesara passes the whole trace buffer as the outer input).
 *
 * It runs last in fast_run, after everything that could still read the
 * buffers (tags fast_run, inplace, scan).
 */
#include "rewrites/rewrite-impl.h"
#include "relgraph/scan.h"

static bool is_graph_output(const rg_fgraph *fg, const rg_variable *v) {
  for (int k = 0; k < rg_fgraph_noutputs(fg); k++)
    if (rg_fgraph_output(fg, k) == v) return true;
  return false;
}

/* Whether mit-mot buffer b of node may be overwritten by it. */
static bool buffer_free(const rg_fgraph *fg, const rg_node *node, const rg_variable *b) {
  if (!b->owner || rg_is_constant(b) || b->nclients != 1 || is_graph_output(fg, b)) return false;
  int uses = 0;
  for (int i = 0; i < node->nin; i++) uses += node->inputs[i] == b;
  return uses == 1 && rg_op_view_of(b->owner->op, b->index) < 0;
}

static int scan_inplace(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  (void)ud;
  rg_scan_info s;
  if (node->op->inplace >= 0 || !rg_scan_info_of(node->op, &s) || !s.n_mit_mot) return 0;
  const rg_fgraph *fg = rg_rewrite_graph(run);
  if (!fg) return 0; /* an e-graph: who else reads a buffer is unknown there */
  for (int k = 0; k < s.n_mit_mot; k++)
    if (!buffer_free(fg, node, node->inputs[rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k)])) return 0;
  const rg_op *op = rg_op_inplace(node->op, rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, 0));
  rg_node *nw = op ? rg_make_node(rg_rewrite_ctx(run), op, node->nin, node->inputs) : NULL;
  if (!nw) {
    rg_clear_error(rg_rewrite_ctx(run));
    return 0;
  }
  for (int o = 0; o < node->nout; o++)
    if (rgr_used(run, node->outputs[o])) out[o] = nw->outputs[o];
  return 1;
}

rg_rewriter *rgr_scan_inplace_rewriter(void) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("scan_inplace", 1, tracks, scan_inplace, NULL);
  rw->describe = "a Scan whose mit-mot buffers nothing else reads -> the Scan works on them in place";
  return rg_navigator("scan_inplace", RG_NAV_IN_TO_OUT, true, 1, &rw);
}
