/*
 * scan-savemem.c — scan_save_mem (Aesara's name): a Scan's trace that is
 * read only at its last k rows is kept to those rows.
 *
 * For every state (mit-sot, sit-sot) and nit-sot output of a Scan, the
 * clients are looked at: when each one is a subtensor whose first index
 * is a constant -j (trace[-j], j >= 1) or a slice from a constant -j to
 * the end (trace[-j:]), only the last k = max j rows are ever read, and
 * the op's store_steps for that output becomes k (the executor then keeps
 * max(k, the state's taps + 1) rows in a circular buffer and hands out
 * the last min(k, steps) rows in order; see backend/cpu/scan.c).  An
 * output with another client (a graph output, a gradient reading the
 * whole trace, any other index) keeps its whole trace.
 *
 * The trace's type changes (k rows instead of n), so the scan's outputs
 * cannot be replaced as they are: the clients are rebuilt over the new
 * scan (the same index reads the same element of the shorter trace, and
 * each client keeps its type), and untouched outputs map one to one.  A
 * 10^6-step sit-sot of 1000 floats read at trace[-1] keeps 2 rows, not
 * 10^6 (8 KB instead of 4 GB).
 *
 * Constant indices from the start: when every client of every output
 * reads only rows below m (trace[j], j < m; trace[a:b], 0 <= a, b <= m),
 * the steps after the first m are never read, and n_steps becomes
 * minimum(n_steps, m) (with the nit-sots' lengths): trace[2] of a 10-step
 * scan runs 3 steps.  The clients are rebuilt over the new scan as above
 * (from the start, the same index reads the same row).
 *
 * A graph rewriter in fast_run (tags fast_run scan scan_save_mem): it
 * looks at Scan nodes only, so a graph without one costs one walk.
 */
#include "rewrites/scan-rw.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

/* ------------------------------------------------------------------ what a client reads */

/* The number of last rows a client reads (0: it needs the whole trace). */
static int64_t rows_read(const rg_client *c) {
  const rg_node *n = c->node;
  if (!n || n->op->code != RG_OP_SUBTENSOR || c->index != 0 || n->op->nints < 4) return 0;
  const int64_t *e = n->op->ints; /* the first entry: kind, a, b, c */
  if (e[0] == RG_IDX_INDEX) return e[1] < 0 && e[1] != RG_IDX_NONE && e[1] != RG_IDX_INPUT ? -e[1] : 0;
  if (e[0] != RG_IDX_SLICE) return 0;
  bool from_end = e[1] < 0 && e[1] != RG_IDX_NONE && e[1] != RG_IDX_INPUT;
  bool to_end = e[2] == RG_IDX_NONE, unit = e[3] == RG_IDX_NONE || e[3] == 1;
  return from_end && to_end && unit ? -e[1] : 0;
}

/* The rows from the start a client reads, all below the returned count
 * (0: it reads other rows, or a row counted from the end). */
static int64_t rows_from_start(const rg_client *c) {
  const rg_node *n = c->node;
  if (!n || n->op->code != RG_OP_SUBTENSOR || c->index != 0 || n->op->nints < 4) return 0;
  const int64_t *e = n->op->ints;
  bool is_const0 = e[1] != RG_IDX_NONE && e[1] != RG_IDX_INPUT && e[1] >= 0;
  if (e[0] == RG_IDX_INDEX) return is_const0 ? e[1] + 1 : 0;
  if (e[0] != RG_IDX_SLICE || !(e[3] == RG_IDX_NONE || e[3] == 1)) return 0;
  bool start_ok = e[1] == RG_IDX_NONE || is_const0;
  bool stop_const = e[2] != RG_IDX_NONE && e[2] != RG_IDX_INPUT && e[2] >= 0;
  return start_ok && stop_const && e[2] > 0 ? e[2] : 0;
}

/* The rows every client of v reads, at most (0: the whole trace). */
static int64_t rows_needed(const V v) {
  int64_t k = 0;
  if (!v->nclients) return 0;
  for (uint32_t c = 0; c < v->nclients; c++) {
    int64_t r = rows_read(&v->clients[c]);
    if (!r) return 0;
    k = r > k ? r : k;
  }
  return k;
}

static int store_at(const rg_scan_info *s, rg_scan_kind kind, int k) {
  return kind == RG_SCAN_MIT_SOT ? k : kind == RG_SCAN_SIT_SOT ? s->n_mit_sot + k : s->n_mit_sot + s->n_sit_sot + k;
}

/* New store_steps where some output can keep fewer rows; NULL if none. */
static int64_t *smaller_stores(const rg_node *node, const rg_scan_info *s) {
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  int64_t *st = rg_gc_alloc((size_t)(nstore + 1) * sizeof *st);
  memcpy(st, s->store_steps, (size_t)nstore * sizeof *st);
  bool any = false;
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      int64_t need = rows_needed(node->outputs[rg_scan_outer_out(s, kind, k)]);
      int at = store_at(s, kind, k);
      if (need > 0 && (st[at] == 0 || need < st[at])) st[at] = need, any = true;
    }
  return any ? st : NULL;
}

/* ------------------------------------------------------------------ the rewrite */

/* Old values and their replacements, collected for one replace_all. */
typedef struct swaps { V *old, *new_; int n, cap; } swaps;

static void swap_add(swaps *w, V a, V b) {
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 16;
    V *o = rg_gc_alloc(sizeof *o * (size_t)cap), *n = rg_gc_alloc(sizeof *n * (size_t)cap);
    if (w->n) memcpy(o, w->old, sizeof *o * (size_t)w->n), memcpy(n, w->new_, sizeof *n * (size_t)w->n);
    w->old = o, w->new_ = n, w->cap = cap;
  }
  w->old[w->n] = a, w->new_[w->n++] = b;
}

/* Each output of the old scan: its clients rebuilt over the new one where
 * the trace shrank, else the new output as it is. */
static bool plan_swaps(const rg_node *old, const rg_node *nw, const rg_scan_info *s, const int64_t *st, swaps *w) {
  for (rg_scan_kind kind = RG_SCAN_MIT_MOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      int o = rg_scan_outer_out(s, kind, k);
      V v = old->outputs[o];
      if (!v->nclients) continue;
      bool shrank = kind != RG_SCAN_MIT_MOT && st[store_at(s, kind, k)] != s->store_steps[store_at(s, kind, k)];
      if (!shrank) {
        swap_add(w, v, nw->outputs[o]);
        continue;
      }
      for (uint32_t c = 0; c < v->nclients; c++) {
        rg_node *client = v->clients[c].node;
        V *in = rg_gc_alloc(sizeof *in * (size_t)(client->nin + 1));
        memcpy(in, client->inputs, sizeof *in * (size_t)client->nin);
        in[0] = nw->outputs[o];
        rg_node *copy = rg_node_clone_with(client, in);
        if (!copy) return false;
        swap_add(w, client->outputs[0], copy->outputs[0]);
      }
    }
  return true;
}

/* The steps whose rows some client reads, when every client of every
 * output reads only rows from the start (0: not so, or nothing to gain). */
static int64_t steps_read(const rg_node *node, const rg_scan_info *s) {
  if (s->n_mit_mot) return 0;
  int64_t m = 0;
  bool any = false;
  for (int o = 0; o < node->nout; o++) {
    const rg_variable *v = node->outputs[o];
    for (uint32_t c = 0; c < v->nclients; c++) {
      int64_t r = rows_from_start(&v->clients[c]);
      if (!r) return 0;
      m = r > m ? r : m;
      any = true;
    }
  }
  return any ? m : 0;
}

/* Whether n already runs at most m steps: a constant <= m, or a minimum
 * with one. */
static bool at_most(const rg_variable *n, int64_t m) {
  int64_t k;
  if (rg_constant_get_i64(n, &k)) return k <= m;
  if (!n->owner || n->owner->op->code != RG_OP_MINIMUM) return false;
  for (int i = 0; i < n->owner->nin; i++)
    if (at_most(n->owner->inputs[i], m)) return true;
  return false;
}

/* n_steps cut to the steps whose rows are read (see the top). */
static bool shrink_steps(rg_rewrite_run *run, const rg_rewriter *rw, rg_fgraph *fg, rg_node *node) {
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return false;
  int64_t m = steps_read(node, &s);
  V n = node->inputs[rg_scan_outer_in(&s, RG_SCAN_N_STEPS, 0)];
  if (!m || at_most(n, m)) return false;
  /* a number of steps the outputs' types state is cut to a constant, so
   * the new outputs' types are as static as the old ones */
  int64_t known = node->nout ? node->outputs[0]->type->shape[0] : -1;
  if (known >= 0 && known <= m) return false;
  V cut = known >= 0 ? rg_constant_scalar_int(C, n->type->dtype, m)
                     : rg_minimum(n, rg_constant_scalar_int(C, n->type->dtype, m));
  V *in = rg_gc_alloc(sizeof *in * (size_t)(node->nin + 1));
  memcpy(in, node->inputs, sizeof *in * (size_t)node->nin);
  in[rg_scan_outer_in(&s, RG_SCAN_N_STEPS, 0)] = cut;
  for (int k = 0; k < s.n_nit_sot; k++) in[rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, k)] = cut;
  rg_node *nw = cut ? rg_make_node(C, node->op, node->nin, in) : NULL;
  swaps w = {0};
  bool ok = nw != NULL;
  for (int o = 0; ok && o < node->nout; o++) {
    V v = node->outputs[o];
    for (uint32_t c = 0; ok && c < v->nclients; c++) {
      rg_node *client = v->clients[c].node;
      V *cin = rg_gc_alloc(sizeof *cin * (size_t)(client->nin + 1));
      memcpy(cin, client->inputs, sizeof *cin * (size_t)client->nin);
      cin[0] = nw->outputs[o];
      rg_node *copy = rg_make_node(C, client->op, client->nin, cin);
      if ((ok = copy != NULL)) swap_add(&w, client->outputs[0], copy->outputs[0]);
    }
  }
  if (!ok || !w.n || rg_fgraph_replace_all(fg, w.n, w.old, w.new_, "scan_save_mem") != RG_OK) {
    rg_clear_error(C);
    return false;
  }
  rgr_note(run, "steps", "at most %lld", (long long)m);
  rgr_record(run, rw, node, w.n, w.old, w.new_, 1, &nw);
  return true;
}

/* The trace's `with` line: the steps each cut trace keeps. */
static void note_rows(rg_rewrite_run *run, const rg_scan_info *s, const int64_t *st) {
  static const char *const kinds[] = {[RG_SCAN_MIT_SOT] = "mit-sot", [RG_SCAN_SIT_SOT] = "sit-sot",
                                      [RG_SCAN_NIT_SOT] = "nit-sot"};
  for (rg_scan_kind kind = RG_SCAN_MIT_SOT; kind <= RG_SCAN_NIT_SOT; kind++)
    for (int k = 0; k < rg_scan_count(s, kind); k++) {
      int at = store_at(s, kind, k);
      if (st[at] != s->store_steps[at]) rgr_note(run, "steps kept", "%s %d: %lld", kinds[kind], k, (long long)st[at]);
    }
}

static bool save_mem(rg_rewrite_run *run, const rg_rewriter *rw, rg_fgraph *fg, rg_node *node) {
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return false;
  int64_t *st = smaller_stores(node, &s);
  if (!st) return false;
  rg_scan_info t = s;
  t.store_steps = st;
  const rg_op *op = rg_op_scan(C, &t, rg_op_inner_graph(node->op));
  rg_node *nw = op ? rg_make_node(C, op, node->nin, node->inputs) : NULL;
  swaps w = {0};
  if (!nw || !plan_swaps(node, nw, &s, st, &w) || !w.n ||
      rg_fgraph_replace_all(fg, w.n, w.old, w.new_, "scan_save_mem") != RG_OK) {
    rg_clear_error(C);
    return false;
  }
  note_rows(run, &s, st);
  rgr_record(run, rw, node, w.n, w.old, w.new_, 1, &nw);
  return true;
}

static int save_mem_fn(rg_rewrite_run *run, rg_fgraph *fg, void *ud) {
  int changed = 0, n = (int)rg_fgraph_count_op(fg, RG_OP_SCAN);
  if (!n) return 0;
  rg_node **scans = rg_gc_alloc(sizeof *scans * (size_t)n);
  int k = 0;
  for (rg_node *x = rg_fgraph_first(fg); x; x = rg_fgraph_next(x))
    if (x->op->code == RG_OP_SCAN) scans[k++] = x;
  for (int i = 0; i < n; i++) {
    if (rgr_scan_states_merge(scans[i])) continue; /* merged first, then cut */
    bool cut = shrink_steps(run, ud, fg, scans[i]);
    changed += cut || save_mem(run, ud, fg, scans[i]);
  }
  return changed;
}

rg_rewriter *rgr_scan_save_mem_rewriter(void) {
  rg_rewriter *rw = rg_graph_rewriter("scan_save_mem", save_mem_fn, NULL);
  rw->ud = rw;
  rw->describe = "a scan trace read only at its last k rows (trace[-j], trace[-j:]) keeps k rows; "
                 "one read only at its first m rows (trace[j], trace[:m]) runs m steps";
  return rw;
}
