/*
 * scan-merge.c — scan_merge (Aesara's name): two Scans with the same
 * number of steps, neither depending on the other, become one loop whose
 * step computes both steps (one pass over the steps, the sequences read
 * once when the two share them).
 *
 * Conditions: equal step counts (the same value), the same direction and
 * truncate_gradient, the same until condition or none in either, and no
 * path from one scan's outputs to the other's inputs.  Two conditions are
 * the same when they compute the same thing from inner inputs of the same
 * outer values (sequences at the same taps, non-sequences): the merged
 * loop stops where both would.  The merged layout lists each kind
 * of variable of the first scan, then of the second; its step is the two
 * steps side by side over fresh inputs in that order.  Both scans'
 * outputs are replaced at once (a graph rewriter), each by its place in
 * the merged scan.  An ifelse runs only the branch its condition selects
 * (the lazy VM), so two scans needed under different branches are not
 * merged (rgr_same_guards): the merged loop would run both whichever
 * branch is taken, and the branch not taken may fail (an index out of
 * range it guards).  Merging runs in the canonicalize equilibrium; the
 * merged step is merged (its shared work computed once) when linked.
 */
#include "rewrites/rewrite-impl.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

static bool same_value(V x, V y) { return x == y || rg_equal_computations(1, &x, &y, 0, NULL, NULL); }

/* Whether some input of b depends on an output of a. */
static bool depends_on(const rg_node *b, const rg_node *a) {
  size_t n;
  V *anc = rg_ancestors(b->nin, b->inputs, 0, NULL, &n);
  for (size_t i = 0; i < n; i++)
    if (anc[i]->owner == a) return true;
  return false;
}

static bool same_seq_taps(const rg_scan_info *sa, int ka, const rg_scan_info *sb, int kb) {
  return sa->seq_ntaps[ka] == sb->seq_ntaps[kb] &&
         !memcmp(sa->seq_taps[ka], sb->seq_taps[kb], sizeof(int64_t) * (size_t)sa->seq_ntaps[ka]);
}

/* Whether the two until conditions compute the same thing, inner inputs
 * of equal outer sequences (same taps) and non-sequences corresponding. */
static bool same_condition(const rg_node *a, const rg_scan_info *sa, const rg_node *b, const rg_scan_info *sb) {
  const rg_fgraph *ga = rg_op_inner_graph(a->op), *gb = rg_op_inner_graph(b->op);
  int cap = rg_fgraph_ninputs(ga) + 1, n = 0;
  V *xs = rg_gc_alloc(sizeof(V) * (size_t)cap), *ys = rg_gc_alloc(sizeof(V) * (size_t)cap);
  for (int ka = 0; ka < sa->n_seqs; ka++)
    for (int kb = 0; kb < sb->n_seqs; kb++) {
      if (!same_value(a->inputs[rg_scan_outer_in(sa, RG_SCAN_SEQ, ka)], b->inputs[rg_scan_outer_in(sb, RG_SCAN_SEQ, kb)]) ||
          !same_seq_taps(sa, ka, sb, kb))
        continue;
      for (int t = 0; t < sa->seq_ntaps[ka] && n + 1 < cap; t++, n++)
        xs[n] = rg_fgraph_input(ga, rg_scan_inner_in(sa, RG_SCAN_SEQ, ka, t)),
        ys[n] = rg_fgraph_input(gb, rg_scan_inner_in(sb, RG_SCAN_SEQ, kb, t));
      break;
    }
  for (int ka = 0; ka < sa->n_non_seqs; ka++)
    for (int kb = 0; kb < sb->n_non_seqs && n + 1 < cap; kb++)
      if (same_value(a->inputs[rg_scan_outer_in(sa, RG_SCAN_NON_SEQ, ka)], b->inputs[rg_scan_outer_in(sb, RG_SCAN_NON_SEQ, kb)])) {
        xs[n] = rg_fgraph_input(ga, rg_scan_inner_in(sa, RG_SCAN_NON_SEQ, ka, 0));
        ys[n++] = rg_fgraph_input(gb, rg_scan_inner_in(sb, RG_SCAN_NON_SEQ, kb, 0));
        break;
      }
  V ca = rg_fgraph_output(ga, rg_scan_inner_out(sa, RG_SCAN_UNTIL, 0, 0));
  V cb = rg_fgraph_output(gb, rg_scan_inner_out(sb, RG_SCAN_UNTIL, 0, 0));
  return rg_equal_computations(1, &ca, &cb, n, xs, ys);
}

static bool mergeable(const rg_node *a, const rg_scan_info *sa, const rg_node *b, const rg_scan_info *sb) {
  return a != b && sa->until == sb->until && sa->go_backwards == sb->go_backwards &&
         sa->truncate_gradient == sb->truncate_gradient && same_value(a->inputs[0], b->inputs[0]) &&
         (!sa->until || same_condition(a, sa, b, sb)) && !depends_on(b, a) && !depends_on(a, b);
}

/* ------------------------------------------------------------------ the merged layout */

#define CAT(field, na, nb, T)                                                           \
  do {                                                                                  \
    T *v = rg_gc_alloc(sizeof(T) * (size_t)((na) + (nb) + 1));                          \
    if (na) memcpy(v, sa->field, sizeof(T) * (size_t)(na));                             \
    if (nb) memcpy(v + (na), sb->field, sizeof(T) * (size_t)(nb));                      \
    t.field = v;                                                                        \
  } while (0)

static rg_scan_info merged_layout(const rg_scan_info *sa, const rg_scan_info *sb) {
  rg_scan_info t = *sa;
  t.n_seqs += sb->n_seqs, t.n_mit_mot += sb->n_mit_mot, t.n_mit_sot += sb->n_mit_sot;
  t.n_sit_sot += sb->n_sit_sot, t.n_nit_sot += sb->n_nit_sot, t.n_non_seqs += sb->n_non_seqs;
  CAT(seq_ntaps, sa->n_seqs, sb->n_seqs, int);
  CAT(seq_taps, sa->n_seqs, sb->n_seqs, const int64_t *);
  CAT(mit_mot_nin, sa->n_mit_mot, sb->n_mit_mot, int);
  CAT(mit_mot_nout, sa->n_mit_mot, sb->n_mit_mot, int);
  CAT(mit_mot_in_taps, sa->n_mit_mot, sb->n_mit_mot, const int64_t *);
  CAT(mit_mot_out_taps, sa->n_mit_mot, sb->n_mit_mot, const int64_t *);
  CAT(mit_sot_ntaps, sa->n_mit_sot, sb->n_mit_sot, int);
  CAT(mit_sot_taps, sa->n_mit_sot, sb->n_mit_sot, const int64_t *);
  int64_t *st = rg_gc_alloc(sizeof(int64_t) * (size_t)(t.n_mit_sot + t.n_sit_sot + t.n_nit_sot + 1));
  int at = 0;
  const int *ca[3] = {&sa->n_mit_sot, &sa->n_sit_sot, &sa->n_nit_sot}, *cb[3] = {&sb->n_mit_sot, &sb->n_sit_sot, &sb->n_nit_sot};
  int oa = 0, ob = 0;
  for (int g = 0; g < 3; g++) {
    for (int i = 0; i < *ca[g]; i++) st[at++] = sa->store_steps[oa + i];
    for (int i = 0; i < *cb[g]; i++) st[at++] = sb->store_steps[ob + i];
    oa += *ca[g], ob += *cb[g];
  }
  t.store_steps = st;
  return t;
}

/* ------------------------------------------------------------------ the merged step and inputs */

typedef struct side {
  const rg_node *node;
  const rg_scan_info *s;
  V *in, *out;   /* the step's fresh inputs and cloned outputs */
} side;

static bool clone_step(rg_ctx *C, side *d) {
  const rg_fgraph *g = rg_op_inner_graph(d->node->op);
  int nin = rg_fgraph_ninputs(g), nout = rg_fgraph_noutputs(g);
  rg_memo *memo = rg_memo_new();
  V *old = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *gout = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  d->in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), d->out = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (int i = 0; i < nin; i++) {
    old[i] = rg_fgraph_input(g, i);
    rg_memo_put(memo, old[i], d->in[i] = rg_input(C, old[i]->name, old[i]->type));
  }
  for (int o = 0; o < nout; o++) gout[o] = rg_fgraph_output(g, o);
  return rg_clone(C, nin, old, nout, gout, memo, 0, d->out) == RG_OK;
}

static int total(const int *v, int n) {
  int t = 0;
  for (int i = 0; i < n; i++) t += v[i];
  return t;
}

/* How many inner inputs (outputs) each kind has, in the op's order. */
static int inner_count(const rg_scan_info *s, rg_scan_kind kind, bool out) {
  switch (kind) {
  case RG_SCAN_SEQ: return out ? 0 : total(s->seq_ntaps, s->n_seqs);
  case RG_SCAN_MIT_MOT: return total(out ? s->mit_mot_nout : s->mit_mot_nin, s->n_mit_mot);
  case RG_SCAN_MIT_SOT: return out ? s->n_mit_sot : total(s->mit_sot_ntaps, s->n_mit_sot);
  case RG_SCAN_SIT_SOT: return s->n_sit_sot;
  case RG_SCAN_NIT_SOT: return out ? s->n_nit_sot : 0;
  case RG_SCAN_NON_SEQ: return out ? 0 : s->n_non_seqs;
  default: return 0;
  }
}

/* The range [first, first + n) of a kind's inner inputs (outputs). */
static void inner_range(const rg_scan_info *s, rg_scan_kind kind, bool out, int *first, int *n) {
  *first = 0;
  for (rg_scan_kind q = RG_SCAN_SEQ; q < kind; q++) *first += inner_count(s, q, out);
  *n = inner_count(s, kind, out);
}

static void append_kind(V *v, int *at, const side *d, rg_scan_kind kind, bool out) {
  int first, n;
  inner_range(d->s, kind, out, &first, &n);
  for (int i = 0; i < n; i++) v[(*at)++] = (out ? d->out : d->in)[first + i];
}

static void append_outer(V *v, int *at, const side *d, rg_scan_kind kind) {
  for (int k = 0; k < rg_scan_count(d->s, kind); k++) v[(*at)++] = d->node->inputs[rg_scan_outer_in(d->s, kind, k)];
}

static rg_node *merge_nodes(rg_ctx *C, side *a, side *b) {
  if (!clone_step(C, a) || !clone_step(C, b)) return NULL;
  rg_scan_info t = merged_layout(a->s, b->s);
  int nin = rg_scan_n_inner_in(&t), nout = rg_scan_n_inner_out(&t), ni = 0, no = 0;
  V *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1)), *out = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  for (rg_scan_kind kind = RG_SCAN_SEQ; kind <= RG_SCAN_NON_SEQ; kind++) {
    if (kind == RG_SCAN_NIT_SOT) continue;
    append_kind(in, &ni, a, kind, false), append_kind(in, &ni, b, kind, false);
  }
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    append_kind(out, &no, a, kind, true), append_kind(out, &no, b, kind, true);
  if (t.until) out[no++] = a->out[rg_scan_inner_out(a->s, RG_SCAN_UNTIL, 0, 0)]; /* b's is the same */
  if (ni != nin || no != nout) return NULL;
  rg_fgraph *g = rg_fgraph_new(C, nin, in, nout, out, RG_FG_CLONE);
  const rg_op *op = g ? rg_op_scan(C, &t, g) : NULL;
  if (!op) return NULL;
  V *outer = rg_gc_alloc(sizeof(V) * (size_t)(rg_scan_n_outer_in(&t) + 1));
  int k = 0;
  outer[k++] = a->node->inputs[0];
  for (rg_scan_kind kind = RG_SCAN_SEQ; kind <= RG_SCAN_NON_SEQ; kind++) append_outer(outer, &k, a, kind), append_outer(outer, &k, b, kind);
  return rg_make_node(C, op, k, outer);
}

/* Each output of a side, replaced by its place in the merged scan. */
static int add_swaps(const side *d, const rg_scan_info *t, int offset_of_side_b, rg_node *m, V *olds, V *news, int n) {
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(d->s, kind); k++) {
      V v = d->node->outputs[rg_scan_outer_out(d->s, kind, k)];
      if (!v->nclients) continue;
      int before = 0;
      if (offset_of_side_b) before = rg_scan_count(t, kind) - rg_scan_count(d->s, kind);
      olds[n] = v, news[n++] = m->outputs[rg_scan_outer_out(t, kind, before + k)];
    }
  return n;
}

static bool try_merge(rg_rewrite_run *run, const rg_rewriter *rw, rg_fgraph *fg, rg_node *a, rg_node *b) {
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info sa, sb;
  if (!rg_scan_info_of(a->op, &sa) || !rg_scan_info_of(b->op, &sb) || !mergeable(a, &sa, b, &sb)) return false;
  side da = {a, &sa, NULL, NULL}, db = {b, &sb, NULL, NULL};
  rg_node *m = merge_nodes(C, &da, &db);
  rg_scan_info t;
  if (!m || !rg_scan_info_of(m->op, &t)) {
    rg_clear_error(C);
    return false;
  }
  V *olds = rg_gc_alloc(sizeof(V) * (size_t)(a->nout + b->nout + 1)), *news = rg_gc_alloc(sizeof(V) * (size_t)(a->nout + b->nout + 1));
  int n = add_swaps(&da, &t, 0, m, olds, news, 0);
  n = add_swaps(&db, &t, 1, m, olds, news, n);
  if (!n || rg_fgraph_replace_all(fg, n, olds, news, "scan_merge") != RG_OK) {
    rg_clear_error(C);
    return false;
  }
  rgr_record(run, rw, a, n, olds, news, 1, &m);
  return true;
}

static int merge_fn(rg_rewrite_run *run, rg_fgraph *fg, void *ud) {
  int n = (int)rg_fgraph_count_op(fg, RG_OP_SCAN);
  if (n < 2) return 0;
  rg_node **scans = rg_gc_alloc(sizeof *scans * (size_t)n);
  int k = 0;
  for (rg_node *x = rg_fgraph_first(fg); x; x = rg_fgraph_next(x))
    if (x->op->code == RG_OP_SCAN) scans[k++] = x;
  rgr_guards *g = rgr_guards_of(fg);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++)
    for (int j = i + 1; j < n && !rc; j++)
      if (rgr_same_guards(g, scans[i], scans[j]) && try_merge(run, ud, fg, scans[i], scans[j]))
        rc = 1; /* the graph changed: the driver calls again */
  rgr_guards_free(g);
  return rc;
}

rg_rewriter *rgr_scan_merge_rewriter(void) {
  rg_rewriter *rw = rg_graph_rewriter("scan_merge", merge_fn, NULL);
  rw->ud = rw;
  rw->describe = "two scans with the same steps, neither depending on the other -> one scan";
  return rw;
}
