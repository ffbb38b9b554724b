/*
 * scan-outputs.c — a Scan's outputs pared down.
 *
 * scan_merge_inouts (Aesara's name): duplicated outer inputs first, read
 * once (rgr_scan_merge_input_dups, scan-inputs.c); then sit-sots paired with earlier ones of equal initial
 * values trace the same values when each one's step computes what its
 * partner's does, all the pairs assumed at once (so the LSTM's h and c,
 * which read each other, merge with another copy of h and c: a Scan
 * merged with its recording twin).  The pairing is the greatest one found
 * by refinement: a pair whose steps differ under the current pairing
 * moves to the next candidate or is dropped, until every pair holds under
 * the pairing itself, which then holds at every step by induction.  The
 * second of each pair's users read the first.
 *
 * scan_prune_sit_sots: a sit-sot nobody reads outside, whose state the
 * outputs that stay do not depend on, is no longer carried (what merging
 * leaves: the LSTM's recording twin kept h and c a second time, a copy
 * of each per step).
 *
 * scan_prune_nit_sots: a nit-sot nobody reads is no longer recorded (the
 * step stops computing what only it needed), and two nit-sots whose step
 * values are the same computation are recorded once, both users reading
 * it (one rewrite: the node is rebuilt without the others).
 *
 * scan_nit_sot_of_seq: a nit-sot whose step value is a single-tap
 * sequence's slice records rows the graph already has: its users read
 * those rows of the outer sequence (reversed with go_backwards), and
 * scan_prune_nit_sots then stops recording it.  Only where the step count
 * surely fits the sequence (0 <= n <= its rows): the Scan refuses a count
 * that does not, a slice would clamp it silently.  Gradients through loops
 * make these (the backward loop's accumulations pushed out read the
 * forward inputs again), and each cost a copy per step.
 *
 * All four track Scan nodes; they run in the canonicalize equilibrium.
 */
#include "rewrites/scan-rw.h"

#include <string.h>

typedef rg_variable *V;

static bool same_value(V x, V y) { return x == y || rg_equal_computations(1, &x, &y, 0, NULL, NULL); }

/* ------------------------------------------------------------------ merging outputs */

static bool same_nit_sot(const rg_scan_info *s, const rg_fgraph *g, int j, int k) {
  V a = rg_fgraph_output(g, rg_scan_inner_out(s, RG_SCAN_NIT_SOT, j, 0));
  V b = rg_fgraph_output(g, rg_scan_inner_out(s, RG_SCAN_NIT_SOT, k, 0));
  return a == b || rg_equal_computations(1, &a, &b, 0, NULL, NULL);
}

/* Whether sit-sots j and k start from the same value and keep as much. */
static bool same_start(const rg_node *node, const rg_scan_info *s, int j, int k) {
  return s->store_steps[s->n_mit_sot + j] == s->store_steps[s->n_mit_sot + k] &&
         same_value(node->inputs[rg_scan_outer_in(s, RG_SCAN_SIT_SOT, j)],
                    node->inputs[rg_scan_outer_in(s, RG_SCAN_SIT_SOT, k)]);
}

/* The next candidate partner of sit-sot k after j (-1: none). */
static int next_partner(const rg_node *node, const rg_scan_info *s, int k, int j) {
  for (j++; j < k; j++)
    if (same_start(node, s, j, k)) return j;
  return -1;
}

/* Refines pair[] until every pair's steps agree under the pairing. */
static void refine_pairs(const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, int *pair) {
  int n = s->n_sit_sot;
  V xs[2 * n], ys[2 * n];
  for (bool changed = true; changed;) {
    changed = false;
    int m = 0;
    for (int k = 0; k < n; k++) /* each pair's states are one value, either way round */
      if (pair[k] >= 0) {
        V a = rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SIT_SOT, pair[k], 0));
        V b = rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SIT_SOT, k, 0));
        xs[m] = a, ys[m++] = b;
        xs[m] = b, ys[m++] = a;
      }
    for (int k = 0; k < n && !changed; k++) {
      if (pair[k] < 0) continue;
      V a = rg_fgraph_output(g, rg_scan_inner_out(s, RG_SCAN_SIT_SOT, pair[k], 0));
      V b = rg_fgraph_output(g, rg_scan_inner_out(s, RG_SCAN_SIT_SOT, k, 0));
      if (rg_equal_computations(1, &a, &b, m, xs, ys)) continue;
      pair[k] = next_partner(node, s, k, pair[k]);
      changed = true;
    }
  }
}

/* Whether the step reads the state of a paired sit-sot. */
static bool reads_paired(const rg_scan_info *s, const rg_fgraph *g, const int *pair) {
  for (int k = 0; k < s->n_sit_sot; k++)
    if (pair[k] >= 0 && rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SIT_SOT, k, 0))->nclients) return true;
  return false;
}

/* The Scan with every paired state read from its partner instead: the
 * two copies of the step become one computation (merged here), and the
 * second state is read by nobody. */
static rg_node *read_partners(rg_ctx *C, const rg_node *node, const rg_scan_info *s, const rg_fgraph *g,
                              const int *pair) {
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  V *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  V *cloned = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (int i = 0; i < nin; i++) in[i] = rg_fgraph_input(g, i);
  for (int o = 0; o < nout; o++) gout[o] = rg_fgraph_output(g, o);
  rg_memo *subst = rg_memo_new();
  for (int k = 0; k < s->n_sit_sot; k++)
    if (pair[k] >= 0)
      rg_memo_put(subst, in[rg_scan_inner_in(s, RG_SCAN_SIT_SOT, k, 0)], in[rg_scan_inner_in(s, RG_SCAN_SIT_SOT, pair[k], 0)]);
  if (rg_clone(C, nin, in, nout, gout, subst, 0, cloned) != RG_OK) return NULL;
  rg_fgraph *ng = rg_fgraph_new(C, nin, in, nout, cloned, RG_FG_CLONE);
  if (ng && rg_fgraph_merge(ng, NULL) != RG_OK) return NULL;
  const rg_op *op = ng ? rg_op_scan(C, s, ng) : NULL;
  return op ? rg_make_node(C, op, node->nin, node->inputs) : NULL;
}

static bool nit_sot_dups_read(const rg_node *node, const rg_scan_info *s);

bool rgr_scan_states_merge(const rg_node *node) {
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return false;
  if (nit_sot_dups_read(node, &s)) return true;
  if (s.n_sit_sot < 2) return false;
  int n = s.n_sit_sot, pair[n];
  bool any = false;
  for (int k = 0; k < n; k++) any |= (pair[k] = next_partner(node, &s, k, -1)) >= 0;
  if (!any) return false;
  refine_pairs(node, &s, rg_op_inner_graph(node->op), pair);
  for (int k = 0; k < n; k++)
    if (pair[k] >= 0 && node->outputs[rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, k)]->nclients) return true;
  return false;
}

static int plan_nit_sots(const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, int *alias, bool *keep);
static int prune_nit_sots(rg_rewrite_run *run, rg_node *node, V *out, void *ud);

/* Nit-sots computing the same thing become one: when a later one is read,
 * the loop is rebuilt recording only the first (scan_prune_nit_sots's
 * rebuild, which also drops nit-sots nobody reads). */
static bool nit_sot_dups_read(const rg_node *node, const rg_scan_info *s) {
  if (!s->n_nit_sot) return false;
  bool *keep = rg_gc_alloc((size_t)s->n_nit_sot + 1);
  int *alias = rg_gc_alloc(sizeof(int) * (size_t)(s->n_nit_sot + 1));
  plan_nit_sots(node, s, rg_op_inner_graph(node->op), alias, keep);
  for (int k = 0; k < s->n_nit_sot; k++)
    if (alias[k] != k && node->outputs[rg_scan_outer_out(s, RG_SCAN_NIT_SOT, k)]->nclients) return true;
  return false;
}

static int merge_nit_sots(rg_rewrite_run *run, rg_node *node, const rg_scan_info *s, V *out) {
  return nit_sot_dups_read(node, s) ? prune_nit_sots(run, node, out, NULL) : 0;
}

static int merge_outputs(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  if (rgr_scan_merge_input_dups(run, node, out)) return 1;
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return 0;
  if (merge_nit_sots(run, node, &s, out)) return 1;
  if (s.n_sit_sot < 2) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int n = s.n_sit_sot, pair[n];
  bool any = false;
  for (int k = 0; k < n; k++) any |= (pair[k] = next_partner(node, &s, k, -1)) >= 0;
  if (!any) return 0;
  refine_pairs(node, &s, g, pair);
  const rg_node *from = node;
  if (reads_paired(&s, g, pair)) {
    rg_ctx *C = rg_rewrite_ctx(run);
    rg_node *nw = read_partners(C, node, &s, g, pair);
    if (!nw) {
      rg_clear_error(C);
      return 0;
    }
    for (int o = 0; o < node->nout; o++)
      if (rgr_used(run, node->outputs[o])) out[o] = nw->outputs[o];
    from = nw;
  }
  int changed = from != node;
  for (int k = 0; k < n; k++) {
    int o = rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, k);
    if (pair[k] < 0 || !node->outputs[o]->nclients) continue;
    out[o] = from->outputs[rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, pair[k])];
    if (run->opts.trace) /* printing costs: only when traced */
      rgr_note(run, "states merged", "sit-sot %d (from %s) into sit-sot %d", k,
               rgr_show(node->inputs[rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, k)]), pair[k]);
    changed = 1;
  }
  return changed;
}

/* ------------------------------------------------------------------ users of a rebuilt Scan */

void rgr_outputs_moved(const rg_node *node, const rg_scan_info *s, const rg_node *nw, const rg_scan_info *t,
                       rg_scan_kind kind, const int *pos, V *out) {
  for (rg_scan_kind k = RG_SCAN_MIT_MOT; k <= RG_SCAN_NIT_SOT; k++)
    for (int j = 0; j < rg_scan_count(s, k); j++) {
      int o = rg_scan_outer_out(s, k, j), to = k == kind ? pos[j] : j;
      if (node->outputs[o]->nclients && to >= 0) out[o] = nw->outputs[rg_scan_outer_out(t, k, to)];
    }
}

/* ------------------------------------------------------------------ dropping sit-sots */

/* Whether inner output o is the output of a sit-sot marked in drop. */
static bool dropped_out(const rg_scan_info *s, const bool *drop, int o) {
  int k = o - rg_scan_inner_out(s, RG_SCAN_SIT_SOT, 0, 0);
  return k >= 0 && k < s->n_sit_sot && drop[k];
}

/* Marks the sit-sots that go: nobody outside reads the trace, and no
 * output that stays depends on the state (refined until stable, since
 * keeping one keeps what its step reads).  Returns how many go. */
static int plan_sit_sots(const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, bool *drop) {
  int n = s->n_sit_sot, ndrop = 0, nout = rg_fgraph_noutputs(g);
  for (int k = 0; k < n; k++) ndrop += drop[k] = !node->outputs[rg_scan_outer_out(s, RG_SCAN_SIT_SOT, k)]->nclients;
  V *kept = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (bool changed = ndrop > 0; changed;) {
    changed = false;
    int m = 0;
    for (int o = 0; o < nout; o++)
      if (!dropped_out(s, drop, o)) kept[m++] = rg_fgraph_output(g, o);
    size_t na;
    V *anc = rg_ancestors(m, kept, 0, NULL, &na);
    for (size_t i = 0; i < na; i++)
      for (int k = 0; k < n; k++)
        if (drop[k] && anc[i] == rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SIT_SOT, k, 0))) {
          drop[k] = false, ndrop--, changed = true;
        }
  }
  return ndrop;
}

/* The step without the dropped states' inputs and outputs. */
static rg_fgraph *step_without(rg_ctx *C, const rg_scan_info *s, const rg_fgraph *g, const bool *drop) {
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  int first_in = rg_scan_inner_in(s, RG_SCAN_SIT_SOT, 0, 0);
  V *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  int ni = 0, no = 0;
  for (int i = 0; i < nin; i++)
    if (i < first_in || i >= first_in + s->n_sit_sot || !drop[i - first_in]) in[ni++] = rg_fgraph_input(g, i);
  for (int o = 0; o < nout; o++)
    if (!dropped_out(s, drop, o)) gout[no++] = rg_fgraph_output(g, o);
  return rg_fgraph_new(C, ni, in, no, gout, RG_FG_CLONE);
}

static int prune_sit_sots(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s) || !s.n_sit_sot) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int n = s.n_sit_sot;
  bool *drop = rg_gc_alloc((size_t)n + 1);
  int ndrop = plan_sit_sots(node, &s, g, drop);
  if (!ndrop || rg_scan_n_outer_out(&s) == ndrop) return 0;
  rg_fgraph *ng = step_without(C, &s, g, drop);
  /* the layout and outer inputs without them */
  rg_scan_info t = s;
  int nstore = s.n_mit_sot + s.n_sit_sot + s.n_nit_sot;
  int64_t *st = rg_gc_alloc(sizeof(int64_t) * (size_t)(nstore + 1));
  int *pos = rg_gc_alloc(sizeof(int) * (size_t)(n + 1));
  for (int i = 0, at = 0; i < nstore; i++) {
    int k = i - s.n_mit_sot;
    if (k >= 0 && k < n) pos[k] = drop[k] ? -1 : at - s.n_mit_sot;
    if (k < 0 || k >= n || !drop[k]) st[at++] = s.store_steps[i];
  }
  t.n_sit_sot = n - ndrop, t.store_steps = st;
  V *outer = rg_gc_alloc(sizeof(V) * (size_t)(node->nin + 1));
  int m = 0;
  for (int i = 0; i < node->nin; i++) {
    int k = i - rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, 0);
    if (k < 0 || k >= n || !drop[k]) outer[m++] = node->inputs[i];
  }
  const rg_op *op = ng ? rg_op_scan(C, &t, ng) : NULL;
  rg_node *nw = op ? rg_make_node(C, op, m, outer) : NULL;
  if (!nw) {
    rg_clear_error(C);
    return 0;
  }
  rgr_outputs_moved(node, &s, nw, &t, RG_SCAN_SIT_SOT, pos, out);
  for (int k = 0; k < n && run->opts.trace; k++)
    if (drop[k])
      rgr_note(run, "state no longer carried", "sit-sot %d (from %s)", k,
               rgr_show(node->inputs[rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, k)]));
  return 1;
}

/* ------------------------------------------------------------------ dropping nit-sots */

/* Which nit-sots stay: alias[k] is the first nit-sot computing what k
 * does; one stays when it is its own alias and it or a duplicate is read. */
static int plan_nit_sots(const rg_node *node, const rg_scan_info *s, const rg_fgraph *g, int *alias, bool *keep) {
  int kept = 0;
  for (int k = 0; k < s->n_nit_sot; k++) {
    alias[k] = k;
    for (int j = 0; j < k && alias[k] == k; j++)
      if (alias[j] == j && !s->store_steps[s->n_mit_sot + s->n_sit_sot + j] &&
          !s->store_steps[s->n_mit_sot + s->n_sit_sot + k] && same_nit_sot(s, g, j, k))
        alias[k] = j;
    keep[k] = false;
  }
  for (int k = 0; k < s->n_nit_sot; k++)
    if (node->outputs[rg_scan_outer_out(s, RG_SCAN_NIT_SOT, k)]->nclients) keep[alias[k]] = true;
  for (int k = 0; k < s->n_nit_sot; k++) kept += keep[k];
  return kept;
}

static int prune_nit_sots(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s) || !s.n_nit_sot) return 0;
  bool *keep = rg_gc_alloc((size_t)s.n_nit_sot + 1);
  int *alias = rg_gc_alloc(sizeof(int) * (size_t)(s.n_nit_sot + 1));
  int kept = plan_nit_sots(node, &s, rg_op_inner_graph(node->op), alias, keep);
  if (kept == s.n_nit_sot || rg_scan_n_outer_out(&s) - (s.n_nit_sot - kept) == 0) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g), first_nit = rg_scan_inner_out(&s, RG_SCAN_NIT_SOT, 0, 0);
  /* the step without the dropped outputs */
  V *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (int i = 0; i < nin; i++) in[i] = rg_fgraph_input(g, i);
  int no = 0;
  for (int o = 0; o < nout; o++)
    if (o < first_nit || o >= first_nit + s.n_nit_sot || keep[o - first_nit]) gout[no++] = rg_fgraph_output(g, o);
  rg_fgraph *ng = rg_fgraph_new(C, nin, in, no, gout, RG_FG_CLONE);
  /* the layout and outer inputs without them */
  rg_scan_info t = s;
  int nstore = s.n_mit_sot + s.n_sit_sot;
  int64_t *st = rg_gc_alloc(sizeof(int64_t) * (size_t)(nstore + kept + 1));
  memcpy(st, s.store_steps, sizeof(int64_t) * (size_t)nstore);
  for (int k = 0, at = nstore; k < s.n_nit_sot; k++)
    if (keep[k]) st[at++] = s.store_steps[nstore + k];
  t.n_nit_sot = kept, t.store_steps = st;
  V *outer = rg_gc_alloc(sizeof(V) * (size_t)(node->nin + 1));
  int n = 0;
  for (int i = 0; i < node->nin; i++) {
    int k = i - rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, 0);
    if (s.n_nit_sot && k >= 0 && k < s.n_nit_sot && !keep[k]) continue;
    outer[n++] = node->inputs[i];
  }
  const rg_op *op = ng ? rg_op_scan(C, &t, ng) : NULL;
  rg_node *nw = op ? rg_make_node(C, op, n, outer) : NULL;
  if (!nw) {
    rg_clear_error(C);
    return 0;
  }
  int *pos = rg_gc_alloc(sizeof(int) * (size_t)(s.n_nit_sot + 1));
  int *moved = rg_gc_alloc(sizeof(int) * (size_t)(s.n_nit_sot + 1));
  for (int k = 0, kk = 0; k < s.n_nit_sot; k++) pos[k] = keep[k] ? kk++ : -1;
  for (int k = 0; k < s.n_nit_sot; k++) moved[k] = pos[alias[k]];
  rgr_outputs_moved(node, &s, nw, &t, RG_SCAN_NIT_SOT, moved, out);
  for (int k = 0; k < s.n_nit_sot; k++)
    if (alias[k] != k && keep[alias[k]])
      rgr_note(run, "output no longer recorded", "nit-sot %d (the same as nit-sot %d)", k, alias[k]);
    else if (!keep[k])
      rgr_note(run, "output no longer recorded", "nit-sot %d (nobody reads it)", k);
  return 1;
}

/* ------------------------------------------------------------------ nit-sots that are sequences */

/* The sequence whose single-tap slice nit-sot k records, or -1. */
static int recorded_seq(const rg_scan_info *s, const rg_fgraph *g, int k) {
  V v = rg_fgraph_output(g, rg_scan_inner_out(s, RG_SCAN_NIT_SOT, k, 0));
  for (int j = 0; j < s->n_seqs; j++)
    if (s->seq_ntaps[j] == 1 && v == rg_fgraph_input(g, rg_scan_inner_in(s, RG_SCAN_SEQ, j, 0))) return j;
  return -1;
}

/* The sequence's rows as the nit-sot's users saw them: its type, with
 * the sizes the nit-sot's type knows. */
static V seq_as_trace(const rg_node *node, const rg_scan_info *s, int j, V trace) {
  V x = rgr_steps_rows(s, node->inputs[0], node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, j)]);
  if (s->go_backwards) {
    rg_index e = {RG_IDX_SLICE, RG_IDX_NONE, RG_IDX_NONE, -1};
    x = rg_subtensor(x, 1, &e, 0, NULL);
  }
  const rg_type *t = trace->type;
  if (!x || x->type->dtype != t->dtype || x->type->ndim != t->ndim) return NULL;
  bool known = true, more = false;
  for (int d = 0; d < t->ndim; d++) {
    known &= t->shape[d] != RG_DIM_UNKNOWN;
    more |= t->shape[d] != RG_DIM_UNKNOWN && x->type->shape[d] == RG_DIM_UNKNOWN;
  }
  if (more && !known) return NULL;
  return more ? rg_reshape_to(x, t->ndim, t->shape) : x;
}

/* n without casts. */
static V uncast(V n) {
  while (n->owner && n->owner->op->code == RG_OP_CAST) n = n->owner->inputs[0];
  return n;
}

/* Whether n >= 0 for sure: a constant >= 0, a size, or a minimum of such. */
static bool nonneg(V n) {
  int64_t c;
  n = uncast(n);
  if (rg_constant_get_i64(n, &c)) return c >= 0;
  if (!n->owner) return false;
  switch (n->owner->op->code) {
  case RG_OP_SHAPE_I: return true;
  case RG_OP_MINIMUM: return nonneg(n->owner->inputs[0]) && nonneg(n->owner->inputs[1]);
  case RG_OP_MAXIMUM: return nonneg(n->owner->inputs[0]) || nonneg(n->owner->inputs[1]);
  default: return false;
  }
}

static bool rows_at_least(V x, V n);

/* Whether the integer r >= n for sure: n itself, or a size of rows that
 * are (rows_at_least). */
static bool value_at_least(V r, V n) {
  r = uncast(r), n = uncast(n);
  if (r == n) return true;
  const rg_node *o = r->owner;
  return o && o->op->code == RG_OP_SHAPE_I && o->op->ints[0] == 0 && rows_at_least(o->inputs[0], n);
}

/* Whether x has at least n rows for sure, following x back through what
 * keeps its rows: a constant within x's static length; x's own length; a
 * minimum with such a term; a slice [0:n] of such rows; elementwise ops,
 * gemm, dot and alloc (their rows are an input's or a size given); a
 * dimshuffle keeping dimension 0 first. */
static bool rows_at_least(V x, V n) {
  int64_t c;
  V m = uncast(n);
  if (rg_constant_get_i64(m, &c)) return x->type->ndim > 0 && x->type->shape[0] >= 0 && c <= x->type->shape[0];
  if (m->owner && m->owner->op->code == RG_OP_MINIMUM &&
      (rows_at_least(x, m->owner->inputs[0]) || rows_at_least(x, m->owner->inputs[1])))
    return true;
  if (m->owner && m->owner->op->code == RG_OP_SHAPE_I && m->owner->op->ints[0] == 0 && m->owner->inputs[0] == x)
    return true;
  const rg_node *o = x->owner;
  if (!o || x->type->ndim < 1) return false;
  const rg_op *op = o->op;
  switch (op->code) {
  case RG_OP_SUBTENSOR: { /* [0:stop] or [:stop], stop an input that is n itself */
    const int64_t *e = op->ints;
    if (op->nints < 4 || e[0] != RG_IDX_SLICE || !(e[1] == RG_IDX_NONE || e[1] == 0) ||
        !(e[3] == RG_IDX_NONE || e[3] == 1) || e[2] != RG_IDX_INPUT || o->nin < 2)
      return false;
    return uncast(o->inputs[1]) == m && rows_at_least(o->inputs[0], n);
  }
  case RG_OP_GEMM: return rows_at_least(o->inputs[0], n);
  case RG_OP_DOT: return o->inputs[0]->type->ndim >= 2 && rows_at_least(o->inputs[0], n);
  case RG_OP_ALLOC: return o->nin > 1 && value_at_least(o->inputs[1], n);
  case RG_OP_ALLOC_EMPTY: return o->nin > 0 && value_at_least(o->inputs[0], n);
  case RG_OP_DIMSHUFFLE: return op->nints > 0 && op->ints[0] == 0 && rows_at_least(o->inputs[0], n);
  default: break;
  }
  if (rg_opcode_family(op->code) != RG_FAM_ELEMWISE) return false;
  for (int i = 0; i < o->nin; i++)
    if (o->inputs[i]->type->ndim == x->type->ndim && rows_at_least(o->inputs[i], n)) return true;
  return false;
}

/* Whether the loop's step count fits sequence j for sure.  The executor
 * refuses a negative count or one past a sequence's rows; once the Scan
 * is gone, slices would clamp such a count silently, so the rows of the
 * sequence stand for the trace only when it cannot be wrong. */
static bool steps_fit(const rg_node *node, const rg_scan_info *s, int j) {
  return rgr_steps_fit(node->inputs[rg_scan_outer_in(s, RG_SCAN_SEQ, j)], node->inputs[0]);
}

bool rgr_steps_fit(V x, V n) { return nonneg(n) && rows_at_least(x, n); }

static int nit_sot_of_seq(rg_rewrite_run *run, rg_node *node, V *out, void *ud) {
  (void)ud;
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s) || s.until || !s.n_nit_sot || !s.n_seqs) return 0;
  const rg_fgraph *g = rg_op_inner_graph(node->op);
  int done = 0;
  for (int k = 0; k < s.n_nit_sot; k++) {
    V trace = node->outputs[rg_scan_outer_out(&s, RG_SCAN_NIT_SOT, k)];
    int j = trace->nclients && !s.store_steps[s.n_mit_sot + s.n_sit_sot + k] ? recorded_seq(&s, g, k) : -1;
    V x = j >= 0 && steps_fit(node, &s, j) ? seq_as_trace(node, &s, j, trace) : NULL;
    if (!x) {
      rg_clear_error(C);
      continue;
    }
    out[rg_scan_outer_out(&s, RG_SCAN_NIT_SOT, k)] = x;
    if (run->opts.trace) rgr_note(run, "output read from its sequence", "nit-sot %d is %s", k, rgr_show(x));
    done = 1;
  }
  return done;
}

void rgr_register_scan_outputs(rg_rewrite_db *canon) {
  static const rg_opcode tracks[] = {RG_OP_SCAN};
  rg_rewriter *rw = rg_node_rewriter("scan_merge_inouts", 1, tracks, merge_outputs, NULL);
  rw->describe = "two sit-sots from equal initial values computing the same -> one; nit-sots computing the same "
                 "-> read from the first";
  rg_db_register(canon, "scan_merge_inouts", rw, 0, "fast_run fast_compile canonicalize scan");
  rw = rg_node_rewriter("scan_prune_sit_sots", 1, tracks, prune_sit_sots, NULL);
  rw->describe = "a sit-sot nobody reads, whose state no other output needs, -> no longer carried";
  rg_db_register(canon, "scan_prune_sit_sots", rw, 0, "fast_run fast_compile canonicalize scan");
  rw = rg_node_rewriter("scan_prune_nit_sots", 1, tracks, prune_nit_sots, NULL);
  rw->describe = "a nit-sot nobody reads, or computing what another does, -> no longer recorded";
  rg_db_register(canon, "scan_prune_nit_sots", rw, 0, "fast_run fast_compile canonicalize scan");
  rw = rg_node_rewriter("scan_nit_sot_of_seq", 1, tracks, nit_sot_of_seq, NULL);
  rw->describe = "a nit-sot recording a sequence's slices -> those rows of the sequence";
  rg_db_register(canon, "scan_nit_sot_of_seq", rw, 0, "fast_run fast_compile canonicalize scan");
}
