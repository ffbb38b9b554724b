/*
 * scan-backward.c — rules for the loops gradients make.
 *
 * scan-subsumed: a Scan whose every output another Scan over the same
 * inputs also computes is replaced by that Scan's outputs.
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
 * scan-mitmot-to-sitsot: a backward loop carries a state's gradient in a
 * mit-mot buffer, reading tap 0 (the row's complete gradient) and adding
 * the step's contribution to tap 1.  When the buffer is zero from row 1 on
 * (only the forward loop's last state reached the cost: the gradient of
 * trace[-1]), every tap-1 read is a zero and every tap-0 read is what the
 * previous step wrote: the mit-mot is a sit-sot c_s = f(c_{s-1}, 0) from
 * c_{-1} = buffer[0] (pymc-devs/pytensor issue 1687).  The buffer after the
 * loop is buffer[0], then the trace, then the untouched rows.
 *
 * The rules track Scan nodes only, so they cost nothing on graphs without
 * one.  scan-subsumed looks for the subsuming Scan among the other
 * clients of the node's inputs.
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
/* The twin's outputs for the node's read ones; none (0) while one of them
 * knows fewer sizes than the node's (refine-types tells the twin's later:
 * the rule waits rather than have its result refused). */
static int replace(const rg_node *node, const rg_node *b, const rg_scan_info *sa, const rg_scan_info *sb,
                   rg_variable **out) {
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(sa, kind); k++) {
      int o = rg_scan_outer_out(sa, kind, k);
      if (!node->outputs[o]->nclients) continue;
      out[o] = output_of(b, sa, sb, kind, k);
      if (!out[o] || !rg_type_stands_for(out[o]->type, node->outputs[o]->type)) return 0;
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

/* ------------------------------------------------------------------ scan-mitmot-to-sitsot */

static rg_node *owner_of(const rg_variable *v, rg_opcode c) {
  return v && v->owner && v->owner->op->code == c ? v->owner : NULL;
}

static bool zero_scalar(const rg_variable *v) {
  double x;
  return rg_constant_get_f64(v, &x) && x == 0;
}

/* Zeros everywhere: second(x, 0), alloc(0, ...). */
static bool all_zero(const rg_variable *v) {
  rg_node *n = owner_of(v, RG_OP_SECOND);
  if (n) return zero_scalar(n->inputs[1]);
  n = owner_of(v, RG_OP_ALLOC);
  return n && zero_scalar(n->inputs[0]);
}

/* The one index entry of a subtensor-family node: index k (RG_IDX_NONE
 * when it is no constant index). */
static int64_t single_index(const rg_node *n) {
  if (n->op->nints != 4 || n->op->ints[0] != RG_IDX_INDEX || n->op->ints[1] == RG_IDX_INPUT) return RG_IDX_NONE;
  return n->op->ints[1];
}

/* x[::-1] */
static const rg_node *reversal(const rg_variable *v) {
  rg_node *n = owner_of(v, RG_OP_SUBTENSOR);
  if (!n || n->op->nints != 4 || n->op->ints[0] != RG_IDX_SLICE) return NULL;
  const int64_t *e = n->op->ints;
  return e[1] == RG_IDX_NONE && e[2] == RG_IDX_NONE && e[3] == -1 ? n : NULL;
}

static bool zero_but_last(const rg_variable *v, int depth);

/* Zero in every row but the first (row 0 along the first dimension). */
static bool zero_but_first(const rg_variable *v, int depth) {
  if (depth > 8) return false;
  const rg_node *r = reversal(v);
  if (r) return zero_but_last(r->inputs[0], depth + 1);
  rg_node *n = owner_of(v, RG_OP_JOIN);
  if (n && n->op->ints[0] == 0 && n->nin >= 1 && zero_but_first(n->inputs[0], depth + 1)) {
    for (int i = 1; i < n->nin; i++)
      if (!all_zero(n->inputs[i])) return false;
    return true;
  }
  n = owner_of(v, RG_OP_INC_SUBTENSOR);
  if (!n) n = owner_of(v, RG_OP_SET_SUBTENSOR);
  return all_zero(v) || (n && all_zero(n->inputs[0]) && single_index(n) == 0);
}

/* Zero in every row but the last. */
static bool zero_but_last(const rg_variable *v, int depth) {
  if (depth > 8) return false;
  const rg_node *r = reversal(v);
  if (r) return zero_but_first(r->inputs[0], depth + 1);
  rg_node *n = owner_of(v, RG_OP_JOIN);
  if (n && n->op->ints[0] == 0 && n->nin >= 1 && zero_but_last(n->inputs[n->nin - 1], depth + 1)) {
    for (int i = 0; i + 1 < n->nin; i++)
      if (!all_zero(n->inputs[i])) return false;
    return true;
  }
  n = owner_of(v, RG_OP_INC_SUBTENSOR);
  if (!n) n = owner_of(v, RG_OP_SET_SUBTENSOR);
  return all_zero(v) || (n && all_zero(n->inputs[0]) && single_index(n) == -1);
}

/* A mit-mot reading taps 0 and 1 and writing tap 1: the gradient buffer
 * of a sit-sot. */
static bool carries_one_row(const rg_scan_info *s, int k, int *tap0) {
  if (s->mit_mot_nin[k] != 2 || s->mit_mot_nout[k] != 1 || s->mit_mot_out_taps[k][0] != 1) return false;
  const int64_t *t = s->mit_mot_in_taps[k];
  *tap0 = t[0] == 0 ? 0 : 1;
  return (t[0] == 0 && t[1] == 1) || (t[0] == 1 && t[1] == 0);
}

/* The layout with mit-mot k turned into the first sit-sot. */
static rg_scan_info sitsot_layout(const rg_scan_info *s, int k) {
  rg_scan_info t = *s;
  int nm = s->n_mit_mot - 1, nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot + 1;
  int *nin = rg_gc_alloc((size_t)(nm + 1) * sizeof *nin), *nout = rg_gc_alloc((size_t)(nm + 1) * sizeof *nout);
  const int64_t **in = rg_gc_alloc((size_t)(nm + 1) * sizeof *in), **out = rg_gc_alloc((size_t)(nm + 1) * sizeof *out);
  for (int j = 0, at = 0; j < s->n_mit_mot; j++)
    if (j != k) nin[at] = s->mit_mot_nin[j], nout[at] = s->mit_mot_nout[j], in[at] = s->mit_mot_in_taps[j], out[at++] = s->mit_mot_out_taps[j];
  int64_t *store = rg_gc_alloc((size_t)nstore * sizeof *store);
  for (int i = 0, at = 0; i < nstore; i++) store[i] = i == s->n_mit_sot ? 0 : s->store_steps[at++];
  t.n_mit_mot = nm, t.n_sit_sot++;
  t.mit_mot_nin = nin, t.mit_mot_nout = nout, t.mit_mot_in_taps = in, t.mit_mot_out_taps = out;
  t.store_steps = store;
  return t;
}

/* Appends the inner inputs (outputs: out) of every variable of a kind
 * but `skip` (-1: none) to v. */
static void append_inner(rg_variable **v, int *at, rg_variable *const *src, const rg_scan_info *s, rg_scan_kind kind,
                         int skip, bool out) {
  for (int k = 0; k < rg_scan_count(s, kind); k++) {
    if (k == skip) continue;
    int ntaps = kind == RG_SCAN_SEQ ? s->seq_ntaps[k] : kind == RG_SCAN_MIT_MOT ? (out ? s->mit_mot_nout[k] : s->mit_mot_nin[k])
              : kind == RG_SCAN_MIT_SOT && !out ? s->mit_sot_ntaps[k] : 1;
    for (int j = 0; j < ntaps; j++) v[(*at)++] = src[out ? rg_scan_inner_out(s, kind, k, j) : rg_scan_inner_in(s, kind, k, j)];
  }
}

/* The step of the new layout: mit-mot k's tap-0 input is the sit-sot's
 * state, its tap-1 input a zero, its output the sit-sot's. */
static rg_fgraph *sitsot_inner(rg_ctx *C, const rg_fgraph *g, const rg_scan_info *s, int k, int tap0) {
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  rg_variable **gin = inner_list(g, false, nin), **gout = inner_list(g, true, nout);
  int p0 = rg_scan_inner_in(s, RG_SCAN_MIT_MOT, k, tap0), p1 = rg_scan_inner_in(s, RG_SCAN_MIT_MOT, k, 1 - tap0);
  rg_memo *memo = rg_memo_new();
  rg_variable **in = rg_gc_alloc((size_t)(nin + 1) * sizeof *in), **out = rg_gc_alloc((size_t)(nout + 1) * sizeof *out);
  for (int i = 0; i < nin; i++) rg_memo_put(memo, gin[i], in[i] = rg_input(C, gin[i]->name, gin[i]->type));
  rg_memo_put(memo, gin[p1], rg_second(in[p0], rg_constant_scalar(C, gin[p1]->type->dtype, 0)));
  if (rg_clone(C, nin, gin, nout, gout, memo, 0, out)) return NULL;
  rg_variable **in2 = rg_gc_alloc((size_t)(nin + 1) * sizeof *in2), **out2 = rg_gc_alloc((size_t)(nout + 1) * sizeof *out2);
  int a = 0, b = 0;
  append_inner(in2, &a, in, s, RG_SCAN_SEQ, -1, false);
  append_inner(in2, &a, in, s, RG_SCAN_MIT_MOT, k, false);
  append_inner(in2, &a, in, s, RG_SCAN_MIT_SOT, -1, false);
  in2[a++] = in[p0];
  append_inner(in2, &a, in, s, RG_SCAN_SIT_SOT, -1, false);
  append_inner(in2, &a, in, s, RG_SCAN_NON_SEQ, -1, false);
  append_inner(out2, &b, out, s, RG_SCAN_MIT_MOT, k, true);
  append_inner(out2, &b, out, s, RG_SCAN_MIT_SOT, -1, true);
  out2[b++] = out[rg_scan_inner_out(s, RG_SCAN_MIT_MOT, k, 0)];
  append_inner(out2, &b, out, s, RG_SCAN_SIT_SOT, -1, true);
  append_inner(out2, &b, out, s, RG_SCAN_NIT_SOT, -1, true);
  if (s->until) out2[b++] = out[nout - 1];
  return rg_fgraph_new(C, a, in2, b, out2, RG_FG_CLONE);
}

/* Outer inputs in the new layout: buffer k gives way to its row 0 as the
 * first sit-sot's initial value. */
static rg_variable **sitsot_outer(rg_ctx *C, const rg_node *node, const rg_scan_info *s, int k, int *n) {
  rg_variable **v = rg_gc_alloc((size_t)(node->nin + 1) * sizeof *v);
  int at = 0;
  for (int i = 0; i < node->nin; i++) {
    if (i == rg_scan_outer_in(s, RG_SCAN_MIT_MOT, k)) continue;
    if (i == 1 + s->n_seqs + s->n_mit_mot + s->n_mit_sot) {
      rg_index e = {RG_IDX_INDEX, 0, 0, 0};
      v[at++] = rg_subtensor(node->inputs[rg_scan_outer_in(s, RG_SCAN_MIT_MOT, k)], 1, &e, 0, NULL);
    }
    v[at++] = node->inputs[i];
  }
  if (at == node->nin - 1) { /* no input after the mit-sots: the new initial value goes last */
    rg_index e = {RG_IDX_INDEX, 0, 0, 0};
    v[at++] = rg_subtensor(node->inputs[rg_scan_outer_in(s, RG_SCAN_MIT_MOT, k)], 1, &e, 0, NULL);
  }
  (void)C;
  *n = at;
  return v;
}

/* v with want's static sizes where want knows them all (a reshape, a
 * view), so the replacement has exactly the replaced type. */
static rg_variable *with_static_shape(rg_variable *v, const rg_type *want) {
  for (int d = 0; d < want->ndim; d++)
    if (want->shape[d] < 0) return v;
  return v->type == want ? v : rg_reshape_to(v, want->ndim, want->shape);
}

/* The old buffer after the loop: row 0, the trace, the rows no step wrote. */
static rg_variable *buffer_after(rg_ctx *C, rg_variable *buf, rg_variable *trace) {
  rg_index first = {RG_IDX_SLICE, 0, 1, RG_IDX_NONE}, rest = {RG_IDX_SLICE, RG_IDX_INPUT, RG_IDX_NONE, RG_IDX_NONE};
  rg_variable *end = rg_add(rg_shape_i(trace, 0), rg_constant_scalar_int(C, RG_INT64, 1));
  rg_variable *parts[3] = {rg_subtensor(buf, 1, &first, 0, NULL), trace, rg_subtensor(buf, 1, &rest, 1, &end)};
  return with_static_shape(rg_join(0, 3, parts), buf->type);
}

static int replace_mitmot(rg_ctx *C, const rg_node *node, const rg_scan_info *s, int k, int tap0, rg_variable **out) {
  rg_scan_info t = sitsot_layout(s, k);
  rg_fgraph *g = sitsot_inner(C, rg_op_inner_graph(node->op), s, k, tap0);
  const rg_op *op = g ? rg_op_scan(C, &t, g) : NULL;
  int n;
  rg_variable **outer = op ? sitsot_outer(C, node, s, k, &n) : NULL;
  rg_node *nn = outer ? rg_make_node(C, op, n, outer) : NULL;
  if (!nn) return 0; /* the rule proposes nothing rather than an ill-typed loop */
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int j = 0; j < rg_scan_count(s, kind); j++) {
      int o = rg_scan_outer_out(s, kind, j);
      if (!node->outputs[o]->nclients) continue;
      if (kind == RG_SCAN_MIT_MOT && j == k)
        out[o] = buffer_after(C, node->inputs[rg_scan_outer_in(s, kind, j)], nn->outputs[rg_scan_outer_out(&t, RG_SCAN_SIT_SOT, 0)]);
      else
        out[o] = nn->outputs[rg_scan_outer_out(&t, kind, kind == RG_SCAN_MIT_MOT && j > k ? j - 1 : kind == RG_SCAN_SIT_SOT ? j + 1 : j)];
    }
  return 1;
}

static int scan_mitmot_to_sitsot(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  (void)ud;
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return 0;
  for (int k = 0; k < s.n_mit_mot; k++) {
    int tap0;
    if (carries_one_row(&s, k, &tap0) && zero_but_first(node->inputs[rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k)], 0))
      return replace_mitmot(rg_rewrite_ctx(run), node, &s, k, tap0, out);
  }
  return 0;
}

void rgr_register_scan_rules(rg_rewrite_db *canon) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("scan-subsumed", 1, tracks, scan_subsumed, NULL);
  rw->describe = "a scan whose outputs another scan over the same inputs also computes -> that scan's outputs";
  rg_db_register(canon, "scan-subsumed", rw, 0, "fast_run fast_compile canonicalize scan");
  rw = rg_node_rewriter("scan-mitmot-to-sitsot", 1, tracks, scan_mitmot_to_sitsot, NULL);
  rw->describe = "a gradient's mit-mot buffer that is zero but for row 0 -> a sit-sot";
  rg_db_register(canon, "scan-mitmot-to-sitsot", rw, 0, "fast_run fast_compile canonicalize scan");
}
