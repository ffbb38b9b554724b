/*
 * scan-inputs.c — remove_constants_and_unused_inputs_scan (Aesara's
 * name): a Scan's sequences and non-sequences pared down.
 *
 *   - a non-sequence whose outer value is a constant is inlined: the step
 *     reads the constant itself (constant folding and the other rules of
 *     the step's query can then use its value);
 *   - a sequence that is a constant of one repeated row (every step reads
 *     the same value) is inlined as that row, for each of its taps;
 *   - a non-sequence passed twice (the same outer value) enters once, and
 *     so does a sequence passed twice with the same taps;
 *   - a sequence or non-sequence the step does not read is dropped (after
 *     the push-outs, the LSTM's x_t, W_ih and b_ih are such inputs).
 *
 * States are not touched: their inputs are read across steps.  The step
 * is rebuilt over the inputs that remain (a clone in which each dropped
 * inner input stands for its constant or its duplicate), and the scan's
 * outputs map one to one.  The rule tracks Scan nodes.
 */
#include "rewrites/scan-rw.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

/* What becomes of each inner input: kept, or replaced by `by` (a constant
 * or another input of the step). */
typedef struct plan {
  int nin;
  bool *keep;
  V *by;
  bool any;
  bool dups_only;  /* only duplicated inputs merged (scan_merge_inouts) */
} plan;


static void plan_non_seqs(rg_ctx *C, const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, plan *p) {
  for (int k = 0; k < s->n_non_seqs; k++) {
    int i = rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0);
    V outer = node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)], in = rg_fgraph_input(g, i);
    if (p->dups_only) goto dups;
    if (!in->nclients) {
      p->keep[i] = false, p->any = true;
      continue;
    }
    if (rg_is_constant(outer) && (p->by[i] = rgr_copy_const(C, outer))) {
      p->keep[i] = false, p->any = true;
      continue;
    }
  dups:
    for (int j = 0; j < k; j++) {
      int ij = rg_scan_inner_in(s, RG_SCAN_NON_SEQ, j, 0);
      if (p->keep[ij] && node->inputs[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, j)] == outer) {
        p->keep[i] = false, p->by[i] = rg_fgraph_input(g, ij), p->any = true;
        break;
      }
    }
  }
}

static bool same_taps(const rg_scan_info *s, int j, int k) {
  return s->seq_ntaps[j] == s->seq_ntaps[k] && !memcmp(s->seq_taps[j], s->seq_taps[k], sizeof(int64_t) * (size_t)s->seq_ntaps[k]);
}

/* A sequence passed twice with the same taps (two merged loops walking
 * one sequence) is read once. */
static bool merge_duplicate_seq(const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, plan *p, int k) {
  V x = node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)];
  for (int j = 0; j < k; j++) {
    if (!p->keep[rg_scan_inner_in(s, RG_SCAN_SEQ, j, 0)] || node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, j)] != x ||
        !same_taps(s, j, k))
      continue;
    for (int t = 0; t < s->seq_ntaps[k]; t++) {
      int i = rg_scan_inner_in(s, RG_SCAN_SEQ, k, t);
      p->keep[i] = false, p->by[i] = rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SEQ, j, t));
    }
    return p->any = true;
  }
  return false;
}

/* The row every step reads when x is a constant whose rows are all the
 * same (Aesara inlines such sequences too); NULL otherwise. */
static V repeated_row(rg_ctx *C, V x) {
  if (!rg_is_constant(x) || x->type->ndim < 1) return NULL;
  rg_tensor *t = rg_constant_to_tensor(x);
  if (!t) return NULL;
  int64_t rows = t->shape[0];
  size_t row = rows > 0 ? (size_t)(rg_tensor_numel(t) / rows) * rg_dtype_size(t->dtype) : 0;
  bool same = rows > 0;
  for (int64_t r = 1; same && r < rows; r++) same = !memcmp(t->data, t->data + (size_t)r * row, row);
  V v = same ? rg_constant_data(C, t->dtype, t->ndim - 1, t->shape + 1, t->data) : NULL;
  rg_tensor_free(t);
  return v;
}

static bool inline_repeated(rg_ctx *C, const rg_node *node, const rg_scan_info *s, plan *p, int k) {
  V row = repeated_row(C, node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, k)]);
  if (!row) return false;
  for (int t = 0; t < s->seq_ntaps[k]; t++) {
    int i = rg_scan_inner_in(s, RG_SCAN_SEQ, k, t);
    p->keep[i] = false, p->by[i] = row;
  }
  return p->any = true;
}

/* A sequence is dropped when none of its taps is read. */
static void plan_seqs(rg_ctx *C, const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, plan *p) {
  for (int k = 0; k < s->n_seqs; k++) {
    if (merge_duplicate_seq(node, s, g, p, k) || p->dups_only || inline_repeated(C, node, s, p, k)) continue;
    bool used = false;
    for (int j = 0; j < s->seq_ntaps[k]; j++) used |= rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SEQ, k, j))->nclients > 0;
    if (used) continue;
    for (int j = 0; j < s->seq_ntaps[k]; j++) p->keep[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)] = false;
    p->any = true;
  }
}

/* The step over the kept inputs. */
static rg_fgraph *new_step(rg_ctx *C, const rg_fgraph *g, const plan *p) {
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g), m = 0;
  rg_memo *memo = rg_memo_new();
  V *old = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1));
  V *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1)), *out = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (int i = 0; i < nin; i++) {
    old[i] = rg_fgraph_input(g, i);
    if (p->keep[i]) rg_memo_put(memo, old[i], in[m++] = rg_input(C, old[i]->name, old[i]->type));
  }
  for (int i = 0; i < nin; i++) /* a duplicate stands for the input kept before it */
    if (!p->keep[i] && p->by[i]) rg_memo_put(memo, old[i], rg_is_constant(p->by[i]) ? p->by[i] : rg_memo_get(memo, p->by[i]));
  for (int o = 0; o < nout; o++) gout[o] = rg_fgraph_output(g, o);
  if (rg_clone(C, nin, old, nout, gout, memo, 0, out)) return NULL;
  return rg_fgraph_new(C, m, in, nout, out, RG_FG_CLONE);
}

static int rewrite_inputs(rg_rewrite_run *run, rg_node *node, V *out, bool dups_only) {
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int nin = rg_fgraph_ninputs(g);
  plan p = {nin, rg_gc_alloc((size_t)nin + 1), rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), false, dups_only};
  memset(p.keep, 1, (size_t)nin);
  plan_non_seqs(C, node, &s, g, &p);
  plan_seqs(C, node, &s, g, &p);
  if (!p.any) return 0;
  /* the layout and the outer inputs without the dropped ones */
  rg_scan_info t = s;
  int *nt = rg_gc_alloc(sizeof(int) * (size_t)(s.n_seqs + 1));
  const int64_t **tp = rg_gc_alloc(sizeof(int64_t *) * (size_t)(s.n_seqs + 1));
  V *outer = rg_gc_alloc(sizeof(V) * (size_t)(node->nin + 1));
  int no = 0, ns = 0, nn = 0;
  const char *dropped = NULL; /* for the trace */
  for (int i = 0; i < node->nin; i++) {
    bool drop = false;
    for (int k = 0; k < s.n_seqs; k++)
      if (i == rg_scan_outer_in(&s, RG_SCAN_SEQ, k)) {
        drop = !p.keep[rg_scan_inner_in(&s, RG_SCAN_SEQ, k, 0)];
        if (!drop) nt[ns] = s.seq_ntaps[k], tp[ns++] = s.seq_taps[k];
      }
    for (int k = 0; k < s.n_non_seqs; k++)
      if (i == rg_scan_outer_in(&s, RG_SCAN_NON_SEQ, k)) {
        drop = !p.keep[rg_scan_inner_in(&s, RG_SCAN_NON_SEQ, k, 0)];
        nn += !drop;
      }
    if (!drop) outer[no++] = node->inputs[i];
    else if (run->opts.trace)
      dropped = rgr_sprintf("%s%s%s", dropped ? dropped : "", dropped ? "; " : "", rgr_show(node->inputs[i]));
  }
  t.n_seqs = ns, t.n_non_seqs = nn, t.seq_ntaps = nt, t.seq_taps = tp;
  rg_fgraph *ng = new_step(C, g, &p);
  const rg_op *op = ng ? rg_op_scan(C, &t, ng) : NULL;
  rg_node *nw = op ? rg_make_node(C, op, no, outer) : NULL;
  if (!nw) {
    rg_clear_error(C);
    return 0;
  }
  for (int o = 0; o < node->nout; o++)
    if (rgr_used(run, node->outputs[o])) out[o] = nw->outputs[o];
  if (dropped) rgr_note(run, "inputs dropped, merged or inlined", "%s", dropped);
  return 1;
}

static int remove_inputs(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  return rewrite_inputs(run, node, out, false);
}

int rgr_scan_merge_input_dups(rg_rewrite_run *run, rg_node *node, V *out) {
  return rewrite_inputs(run, node, out, true);
}

void rgr_register_scan_inputs(rg_rewrite_db *canon) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("remove_constants_and_unused_inputs_scan", 1, tracks, remove_inputs, NULL);
  rw->describe = "constant non-sequences and sequences of one repeated row inlined, duplicated ones merged, "
                 "sequences and non-sequences the step does not read dropped";
  rg_db_register(canon, "remove_constants_and_unused_inputs_scan", rw, 0, "fast_run fast_compile canonicalize scan");
}
