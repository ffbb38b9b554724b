/*
 * scan-pushadd.c — push_out_scan_output (Aesara's push_out_add): a
 * sit-sot that accumulates products, acc_t = acc_{t-1} + A_t B_t (or its
 * transpose), and of which only the last value is kept (store_steps 1),
 * becomes one large product after the loop:
 *
 *   sum_t A_t B_t = [A_0 A_1 ...] [B_0; B_1; ...]
 *
 * The step records A_t and B_t as two new nit-sots instead of carrying
 * the accumulator; after the loop A's trace (n, m, k) is laid side by
 * side into an m x nk matrix, B's trace (n, k, p) stacked into nk x p,
 * one matrix product (a gemm once the BLAS rewrites run) adds all the
 * steps' terms, and the initial value is added.  The kept trace is that
 * value as its one row (none when the loop ran no step).  This is what a
 * gradient through a loop does for every weight (the backward loop's
 * accumulators for W_ih and W_hh of the LSTM): per step a rank-B update
 * becomes one product over all steps, as hand-written BPTT does.
 *
 * The same holds for a sum: acc_t = acc_{t-1} + sum(X_t, axes), only the
 * last value kept, records X_t as a nit-sot and sums its trace over the
 * step axis and those axes once after the loop (a bias's gradient through
 * a loop: per step a reduction and an addition fewer), and for any other
 * float term, acc_t = acc_{t-1} + X_t: its trace summed over the step
 * axis (what push_out_dot1's loop is once scan_push_out has moved the
 * product x_t W out as one product over all steps).
 *
 * The rule tracks Scan nodes; the accumulator's input must feed only the
 * sum, and A and B (or X) must not depend on it.
 */
#include "rewrites/scan-rw.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

typedef struct accum {
  int k;            /* the sit-sot */
  int nrec;         /* values recorded per step: 2 (A, B) or 1 (X) */
  V rec[2];         /* the step's factors A and B, or the summed X */
  bool transposed;  /* the term is (A B).T */
  const rg_op *sum; /* the sum of X (NULL: a product, or X itself) */
  bool plain;       /* the term is X itself */
} accum;

static rg_node *owner_is(V v, rg_opcode c) { return v && v->owner && v->owner->op->code == c ? v->owner : NULL; }

static bool is_transpose(const rg_node *n) {
  return n && n->op->code == RG_OP_DIMSHUFFLE && n->op->nints == 2 && n->op->ints[0] == 1 && n->op->ints[1] == 0;
}

/* Whether sit-sot k of the step accumulates a product. */
static bool find_accum(const rg_scan_info *s, const rg_fgraph *g, int k, accum *acc) {
  if (s->store_steps[s->n_mit_sot + k] != 1) return false;
  V in = rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SIT_SOT, k, 0));
  V out = rg_fgraph_output(g, rg_scan_inner_out(s, RG_SCAN_SIT_SOT, k, 0));
  rg_node *add = owner_is(out, RG_OP_ADD);
  if (!add || add->nin != 2 || in->nclients != 1 || out->nclients != 1) return false;
  V term = add->inputs[0] == in ? add->inputs[1] : add->inputs[1] == in ? add->inputs[0] : NULL;
  if (!term || term->type->dtype != in->type->dtype) return false;
  rg_node *sum = owner_is(term, RG_OP_SUM);
  if (sum && rg_dtype_is_float(in->type->dtype) && sum->inputs[0]->type->dtype == in->type->dtype &&
      term->type->ndim == in->type->ndim) {
    *acc = (accum){.k = k, .nrec = 1, .rec = {sum->inputs[0]}, .sum = sum->op};
    return true;
  }
  bool transposed = term->type->ndim == 2 && is_transpose(term->owner);
  rg_node *dot = term->type->ndim == 2 ? owner_is(transposed ? term->owner->inputs[0] : term, RG_OP_DOT) : NULL;
  if (dot && dot->inputs[0]->type->ndim == 2 && dot->inputs[1]->type->ndim == 2) {
    *acc = (accum){.k = k, .nrec = 2, .rec = {dot->inputs[0], dot->inputs[1]}, .transposed = transposed};
    return true;
  }
  /* the term does not read the state (its one client is the sum) */
  if (!rg_dtype_is_float(in->type->dtype) || term->type->ndim != in->type->ndim) return false;
  *acc = (accum){.k = k, .nrec = 1, .rec = {term}, .plain = true};
  return true;
}

/* ------------------------------------------------------------------ the new scan */

/* The step without sit-sot k, recording A and B (or X) as the last nit-sots. */
static rg_fgraph *new_step(rg_ctx *C, const rg_fgraph *g, const rg_scan_info *s, const accum *acc) {
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  int drop_in = rg_scan_inner_in(s, RG_SCAN_SIT_SOT, acc->k, 0), drop_out = rg_scan_inner_out(s, RG_SCAN_SIT_SOT, acc->k, 0);
  rg_memo *memo = rg_memo_new();
  V *old = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1));
  V *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 3)), *res = rg_gc_alloc(sizeof(V) * (size_t)(nout + 3));
  int m = 0;
  for (int i = 0; i < nin; i++) {
    old[i] = rg_fgraph_input(g, i);
    V fresh = rg_input(C, old[i]->name, old[i]->type);
    rg_memo_put(memo, old[i], fresh);
    if (i != drop_in) in[m++] = fresh;
  }
  int no = 0, last_nit = rg_scan_n_inner_out(s) - s->until;
  for (int o = 0; o < last_nit; o++)
    if (o != drop_out) gout[no++] = rg_fgraph_output(g, o);
  for (int r = 0; r < acc->nrec; r++) gout[no++] = acc->rec[r];
  if (s->until) gout[no++] = rg_fgraph_output(g, nout - 1);
  if (rg_clone(C, nin, old, no, gout, memo, 0, res)) return NULL;
  return rg_fgraph_new(C, m, in, no, res, RG_FG_CLONE);
}

static rg_scan_info new_layout(const rg_scan_info *s, int k, int nrec) {
  rg_scan_info t = *s;
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  int64_t *st = rg_gc_alloc(sizeof(int64_t) * (size_t)(nstore + 2));
  int at = 0;
  for (int i = 0; i < nstore; i++)
    if (i != s->n_mit_sot + k) st[at++] = s->store_steps[i];
  for (int r = 0; r < nrec; r++) st[at++] = 0;
  t.n_sit_sot--, t.n_nit_sot += nrec, t.store_steps = st;
  return t;
}

/* Outer inputs: without the accumulator's initial value, nrec more nit-sot
 * lengths (n_steps). */
static V *new_outer(const rg_node *node, const rg_scan_info *s, int k, int nrec, int *n) {
  V *v = rg_gc_alloc(sizeof(V) * (size_t)(node->nin + 3));
  int at = 0, drop = rg_scan_outer_in(s, RG_SCAN_SIT_SOT, k), first_ns = rg_scan_n_outer_in(s) - s->n_non_seqs;
  for (int i = 0; i < first_ns; i++)
    if (i != drop) v[at++] = node->inputs[i];
  for (int r = 0; r < nrec; r++) v[at++] = node->inputs[0];
  for (int i = first_ns; i < node->nin; i++) v[at++] = node->inputs[i];
  *n = at;
  return v;
}


/* The kept trace: the final value as one row, none after zero steps. */
static V last_row(rg_ctx *C, V value, V n, const rg_type *want) {
  int64_t order[RG_MAX_NDIM];
  order[0] = -1;
  for (int d = 0; d < value->type->ndim; d++) order[d + 1] = d;
  V row = rg_dimshuffle(value, value->type->ndim + 1, order);
  V keep = rg_minimum(rg_cast(n, RG_INT64), rg_constant_scalar_int(C, RG_INT64, 1));
  rg_index e = {RG_IDX_SLICE, 0, RG_IDX_INPUT, RG_IDX_NONE};
  V r = rg_subtensor(row, 1, &e, 1, &keep);
  for (int d = 0; d < want->ndim; d++)
    if (want->shape[d] < 0) return r;
  return rg_reshape_to(r, want->ndim, want->shape);
}

/* sum_t A_t B_t from the traces of A and B, the last two nit-sots. */
static V product_of_traces(rg_ctx *C, rg_node *nw, const rg_scan_info *t, bool transposed) {
  V A = nw->outputs[rg_scan_outer_out(t, RG_SCAN_NIT_SOT, t->n_nit_sot - 2)];
  V B = nw->outputs[rg_scan_outer_out(t, RG_SCAN_NIT_SOT, t->n_nit_sot - 1)];
  V total = rg_dot(rgr_laid_a(C, A), rgr_laid_b(C, B));
  return transposed ? rg_transpose(total) : total;
}

/* sum_t sum(X_t, axes): the trace of X summed over the step axis and the
 * summed axes shifted past it. */
static V sum_of_trace(V X, const rg_op *sum) {
  int64_t axes[RG_MAX_NDIM];
  int n = 0;
  axes[n++] = 0;
  for (int d = 1; d < X->type->ndim; d++) {
    bool summed = sum->all_axes;
    for (int i = 0; !summed && i < sum->nints; i++) summed = sum->ints[i] == d - 1;
    if (summed) axes[n++] = d;
  }
  return rg_sum(X, n, axes);
}

static int push_out_add(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  accum acc = {0};
  int k = 0;
  while (k < s.n_sit_sot && !find_accum(&s, g, k, &acc)) k++;
  if (k == s.n_sit_sot) return 0;
  rg_scan_info t = new_layout(&s, k, acc.nrec);
  rg_fgraph *ng = new_step(C, g, &s, &acc);
  const rg_op *op = ng ? rg_op_scan(C, &t, ng) : NULL;
  int nouter;
  V *outer = op ? new_outer(node, &s, k, acc.nrec, &nouter) : NULL;
  rg_node *nw = outer ? rg_make_node(C, op, nouter, outer) : NULL;
  if (!nw) {
    rg_clear_error(C);
    return 0;
  }
  int *pos = rg_gc_alloc(sizeof(int) * (size_t)(s.n_sit_sot + 1));
  for (int j = 0; j < s.n_sit_sot; j++) pos[j] = j == k ? -1 : j > k ? j - 1 : j; /* k: rewired below */
  rgr_outputs_moved(node, &s, nw, &t, RG_SCAN_SIT_SOT, pos, out);
  V last = nw->outputs[rg_scan_outer_out(&t, RG_SCAN_NIT_SOT, t.n_nit_sot - 1)];
  V total = acc.plain ? rg_sum(last, 1, (int64_t[]){0})
            : acc.sum ? sum_of_trace(last, acc.sum)
                      : product_of_traces(C, nw, &t, acc.transposed);
  if (!total) {
    rg_clear_error(C);
    return 0;
  }
  V init = node->inputs[rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, k)];
  int o = rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, k);
  if (rgr_used(run, node->outputs[o])) out[o] = last_row(C, rg_add(init, total), node->inputs[0], node->outputs[o]->type);
  return 1;
}

void rgr_register_scan_pushadd(rg_rewrite_db *canon) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("push_out_scan_output", 1, tracks, push_out_add, NULL);
  rw->describe = "a sit-sot acc + A_t B_t (or acc + sum(X_t), or acc + X_t) of which only the last value is kept "
                 "-> one product (or sum) over all steps after the loop";
  rg_db_register(canon, "push_out_scan_output", rw, 0, "fast_run fast_compile canonicalize scan");
}
