/*
 * inplace.c — elemwise_inplace, blas_inplace and the subtensor updates'
 * (Aesara's inplace database): an elementwise node overwrites one of its
 * inputs, gemm, gemv and ger their accumulator, and inc_subtensor and
 * set_subtensor the tensor they update, instead of writing a new buffer
 * (a gradient's inc_subtensor of a buffer of zeros fills it in place).
 *
 * The destroy check (what Aesara's DestroyHandler guards): an input may be
 * overwritten only when nothing can read it afterwards or through another
 * name.  It must be
 *   - computed by a node of the graph (never a graph input, a constant or
 *     a shared value: the caller's buffers are not ours to change),
 *   - read by this node alone and only once (no later reader, and no view
 *     of it anywhere: a view would be another client),
 *   - not an output of the graph,
 *   - not itself a view of another value (overwriting it would change the
 *     value it views), and
 *   - of exactly the output's type (no broadcasting, the same dtype):
 *     rg_make_node refuses an in-place op otherwise.
 * An elementwise node destroys the first input that passes; the others
 * their input 0 only.  The linker
 * drops the mark where a buffer turns out to be borrowed (an input of the
 * function), and the kernels write in place only when the buffer's
 * storage is unshared at run time, so a mark is never unsafe.
 *
 * It runs last in fast_run, after fusion and everything else that could
 * still read a destroyed value (tags fast_run inplace); fused composites
 * are left alone.
 */
#include "rewrites/rewrite-impl.h"

static bool graph_output(const rg_fgraph *fg, const rg_variable *v) {
  for (int k = 0; k < rg_fgraph_noutputs(fg); k++)
    if (rg_fgraph_output(fg, k) == v) return true;
  return false;
}

/* Whether input i of node may be overwritten by it (the file comment). */
static bool destroyable(const rg_fgraph *fg, const rg_node *node, int i) {
  const rg_variable *v = node->inputs[i];
  if (!v->owner || rg_is_constant(v) || v->nclients != 1 || graph_output(fg, v))
    return false;
  for (int j = 0; j < node->nin; j++)
    if (j != i && node->inputs[j] == v) return false;
  return rg_op_view_of(v->owner->op, v->index) < 0 && rg_type_equal_or_host(v->type, node->outputs[0]->type);
}

/* The first input of node that it may destroy (BLAS forms and subtensor
 * updates: input 0 only). */
static int victim(const rg_fgraph *fg, const rg_node *node) {
  if (node->op->inplace >= 0 || node->nout != 1) return -1;
  rg_opcode c = node->op->code;
  if (c == RG_OP_GEMM || c == RG_OP_GEMV || c == RG_OP_GER || c == RG_OP_INC_SUBTENSOR ||
      c == RG_OP_SET_SUBTENSOR)
    return destroyable(fg, node, 0) ? 0 : -1;
  if (rg_opcode_family(c) != RG_FAM_ELEMWISE) return -1;
  for (int i = 0; i < node->nin; i++)
    if (destroyable(fg, node, i)) return i;
  return -1;
}

static int make_inplace(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  (void)ud;
  const rg_fgraph *fg = rg_rewrite_graph(run);
  /* no graph (an e-graph trying C rules as equalities): who else reads a
   * value is unknown there, and overwriting is not an equality anyway */
  int k = fg ? victim(fg, node) : -1;
  if (k < 0) return 0;
  rg_ctx *C = rg_rewrite_ctx(run);
  const rg_op *op = rg_op_inplace(node->op, k);
  rg_node *nw = op ? rg_make_node(C, op, node->nin, node->inputs) : NULL;
  if (!nw) {
    rg_clear_error(C);
    return 0;
  }
  out[0] = nw->outputs[0];
  return 1;
}

rg_rewriter *rgr_inplace_rewriter(void) {
  rg_rewriter *rw = rg_node_rewriter("inplace_elemwise", 0, NULL, make_inplace, NULL);
  rw->describe = "an elementwise node, gemm, gemv, ger, inc_subtensor or set_subtensor whose input "
                 "nothing else reads -> the node overwrites that input";
  return rw;
}
