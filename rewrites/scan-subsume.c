/*
 * scan-subsume.c — scan-subsumed: a Scan whose every output another Scan
 * over the same inputs also computes is replaced by that Scan's outputs.
 *
 * The gradient of a Scan (core/scan-grad.c) reads forward values from a
 * twin of the forward loop that records more (the values the backward
 * step would otherwise recompute, the rows a mit-mot read).  The cost
 * still uses the original loop, so before this rule both run.  The twin
 * subsumes the original: the same layout with more nit-sots (appended
 * after the original's), the same outer inputs (plus the new nit-sots'
 * lengths), and an inner graph whose first outputs compute what the
 * original's compute (rg_equal_computations over corresponding inner
 * inputs).  A trace the original keeps with store_steps k > 0 is the last
 * k rows of the twin's whole trace.
 *
 * The rule tracks Scan nodes only, so it costs nothing on graphs without
 * one; it looks for the subsuming Scan among the other clients of the
 * node's n_steps input.
 */
#include "rewrites/rewrite-impl.h"
#include "relgraph/scan.h"

#include <string.h>

static bool same_taps(int n, const int64_t *a, const int64_t *b) { return !memcmp(a, b, (size_t)n * sizeof *a); }

/* Same counts (b may have more nit-sots), flags and taps. */
static bool same_layout(const rg_scan_info *a, const rg_scan_info *b) {
  if (a->n_seqs != b->n_seqs || a->n_mit_mot != b->n_mit_mot || a->n_mit_sot != b->n_mit_sot ||
      a->n_sit_sot != b->n_sit_sot || a->n_non_seqs != b->n_non_seqs || a->n_nit_sot > b->n_nit_sot ||
      a->until != b->until || a->go_backwards != b->go_backwards || a->truncate_gradient != b->truncate_gradient)
    return false;
  for (int k = 0; k < a->n_seqs; k++)
    if (a->seq_ntaps[k] != b->seq_ntaps[k] || !same_taps(a->seq_ntaps[k], a->seq_taps[k], b->seq_taps[k])) return false;
  for (int k = 0; k < a->n_mit_mot; k++)
    if (a->mit_mot_nin[k] != b->mit_mot_nin[k] || a->mit_mot_nout[k] != b->mit_mot_nout[k] ||
        !same_taps(a->mit_mot_nin[k], a->mit_mot_in_taps[k], b->mit_mot_in_taps[k]) ||
        !same_taps(a->mit_mot_nout[k], a->mit_mot_out_taps[k], b->mit_mot_out_taps[k]))
      return false;
  for (int k = 0; k < a->n_mit_sot; k++)
    if (a->mit_sot_ntaps[k] != b->mit_sot_ntaps[k] || !same_taps(a->mit_sot_ntaps[k], a->mit_sot_taps[k], b->mit_sot_taps[k]))
      return false;
  int nstore = a->n_mit_sot + a->n_sit_sot + a->n_nit_sot;
  for (int i = 0; i < nstore; i++)
    if (b->store_steps[i] && b->store_steps[i] != a->store_steps[i]) return false;
  return true;
}

/* The same variable, equal constants or equal computations. */
static bool same_value(rg_variable *x, rg_variable *y) {
  return x == y || rg_equal_computations(1, &x, &y, 0, NULL, NULL);
}

/* The outer inputs agree (b's extra nit-sot lengths aside). */
static bool same_outer(const rg_node *a, const rg_scan_info *sa, const rg_node *b, const rg_scan_info *sb) {
  int before_ns = rg_scan_n_outer_in(sa) - sa->n_non_seqs, extra = sb->n_nit_sot - sa->n_nit_sot;
  for (int i = 0; i < rg_scan_n_outer_in(sa); i++)
    if (!same_value(a->inputs[i], b->inputs[i < before_ns ? i : i + extra])) return false;
  return true;
}

/* b's inner output for a's inner output o (the until condition last). */
static int inner_out_of(const rg_scan_info *sa, const rg_scan_info *sb, int o) {
  return sa->until && o == rg_scan_n_inner_out(sa) - 1 ? rg_scan_n_inner_out(sb) - 1 : o;
}

static rg_variable **inner_list(const rg_fgraph *g, bool outputs, int n) {
  rg_variable **v = rg_gc_alloc((size_t)(n + 1) * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = outputs ? rg_fgraph_output(g, i) : rg_fgraph_input(g, i);
  return v;
}

static bool same_inner(const rg_fgraph *a, const rg_scan_info *sa, const rg_fgraph *b, const rg_scan_info *sb) {
  int nin = rg_fgraph_ninputs(a), nout = rg_fgraph_noutputs(a);
  if (nin != rg_fgraph_ninputs(b)) return false;
  rg_variable **bo = rg_gc_alloc((size_t)(nout + 1) * sizeof *bo);
  for (int o = 0; o < nout; o++) bo[o] = rg_fgraph_output(b, inner_out_of(sa, sb, o));
  return rg_equal_computations(nout, inner_list(a, true, nout), bo, nin, inner_list(a, false, nin),
                               inner_list(b, false, nin));
}

static bool subsumes(const rg_node *b, const rg_node *a, rg_scan_info *sa, rg_scan_info *sb) {
  return b != a && b->op->code == RG_OP_SCAN && rg_scan_info_of(b->op, sb) &&
         same_layout(sa, sb) && same_outer(a, sa, b, sb) && same_inner(rg_op_inner_graph(a->op), sa, rg_op_inner_graph(b->op), sb);
}

/* b's output for a's output of the given kind: the last k rows where a
 * keeps only those. */
static rg_variable *output_of(const rg_node *b, const rg_scan_info *sa, const rg_scan_info *sb, rg_scan_kind kind, int k) {
  rg_variable *v = b->outputs[rg_scan_outer_out(sb, kind, k)];
  if (kind == RG_SCAN_MIT_MOT) return v;
  int store_at = kind == RG_SCAN_MIT_SOT ? k : kind == RG_SCAN_SIT_SOT ? sa->n_mit_sot + k : sa->n_mit_sot + sa->n_sit_sot + k;
  int64_t keep = sa->store_steps[store_at];
  if (!keep || sb->store_steps[store_at] == keep) return v;
  rg_index e = {RG_IDX_SLICE, -keep, RG_IDX_NONE, RG_IDX_NONE};
  return rg_subtensor(v, 1, &e, 0, NULL);
}

/* node's outputs in use, from b. */
static int replace(const rg_node *node, const rg_node *b, const rg_scan_info *sa, const rg_scan_info *sb,
                   rg_variable **out) {
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(sa, kind); k++) {
      int o = rg_scan_outer_out(sa, kind, k);
      if (node->outputs[o]->nclients) out[o] = output_of(b, sa, sb, kind, k);
    }
  return 1;
}

/* The subsuming scan is a client of one of the node's inputs. */
static int scan_subsumed(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  (void)run, (void)ud;
  rg_scan_info sa, sb;
  if (!rg_scan_info_of(node->op, &sa)) return 0;
  for (int i = 0; i < node->nin; i++)
    for (uint32_t c = 0; c < node->inputs[i]->nclients; c++) {
      const rg_node *b = node->inputs[i]->clients[c].node;
      if (b && subsumes(b, node, &sa, &sb)) return replace(node, b, &sa, &sb, out);
    }
  return 0;
}

void rgr_register_scan_rules(rg_rewrite_db *canon) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("scan-subsumed", 1, tracks, scan_subsumed, NULL);
  rw->describe = "a scan whose outputs another scan over the same inputs also computes -> that scan's outputs";
  rg_db_register(canon, "scan-subsumed", rw, 0, "fast_run fast_compile canonicalize scan");
}
