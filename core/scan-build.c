/*
 * scan-build.c — rg_scan, the builder that writes a loop as aesara.scan
 * does: sequences with taps, outputs_info (nit-sot, sit-sot or mit-sot per
 * output), non-sequences, n_steps, go_backwards, and a step function.
 *
 * The user's order and the op's differ: the step function sees each
 * sequence tap, then each state tap in outputs_info order, then the
 * non-sequences, and returns one value per output in outputs_info order;
 * the op groups states by kind (mit-sot, sit-sot, nit-sot).  The builder
 * makes the inner inputs in the user's order, calls the step, then
 * permutes inputs and outputs into the op's order (`slot` below maps each
 * user output to its kind and index).  Free variables of the step (leaves
 * that are neither inner inputs nor constants) become extra
 * non-sequences, as aesara.scan finds shared variables.
 */
#include "core/core-impl.h"
#include "relgraph/scan.h"

typedef struct slot {
  rg_scan_kind kind;
  int k;            /* index among the outputs of that kind */
} slot;

typedef struct build {
  rg_ctx *C;
  const rg_scan_spec *sp;
  slot *slots;                  /* per user output */
  int nms, nss, nns;            /* mit-sot, sit-sot, nit-sot counts */
  rg_variable **user_in;        /* inner inputs, the step's order */
  int nuser_in;
  rg_variable **step_out;       /* per user output */
  rg_variable *until;
  rgk_stack free_outer, free_inner; /* free variables and their inner inputs */
  rg_variable **seq_x;          /* per sequence: the rows the op walks (cut_sequences) */
  const int64_t **seq_taps;     /* per sequence: the op's taps (ntaps as the spec's) */
} build;

static rg_node *berr(rg_ctx *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static rg_node *berr(rg_ctx *C, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  rg_error(C, RG_ERR_TYPE, "scan: %s", msg);
  return NULL;
}

static bool is_sit_sot(const rg_scan_output *o) {
  return o->ntaps == 0 || (o->ntaps == 1 && o->taps[0] == -1);
}

static const rg_type *row_of(const rg_type *t) {
  return rg_type_on_device(rg_type_new(t->dtype, t->ndim - 1, t->shape + 1), t->device);
}

static int seq_ntaps(const rg_scan_seq *q) { return q->ntaps ? q->ntaps : 1; }
static int64_t seq_tap(const rg_scan_seq *q, int j) { return q->ntaps ? q->taps[j] : 0; }

/* ------------------------------------------------------------------ checking the spec */

/* The inner inputs the scan passes its step: one per sequence tap, state
 * tap and non-sequence (make_user_inputs makes them in that order). */
static int step_inputs(const rg_scan_spec *sp) {
  int n = sp->nnon_seqs;
  for (int i = 0; i < sp->nseqs; i++) n += seq_ntaps(&sp->seqs[i]);
  for (int i = 0; i < sp->noutputs; i++) {
    const rg_scan_output *o = &sp->outputs[i];
    if (o->init) n += is_sit_sot(o) ? 1 : o->ntaps;
  }
  return n;
}

static bool check_spec(build *b) {
  const rg_scan_spec *sp = b->sp;
  if (sp->nseqs < 0 || sp->noutputs < 0 || sp->nnon_seqs < 0)
    return berr(b->C, "negative counts"), false;
  if (!sp->fn && !sp->step_out && sp->noutputs)
    return berr(b->C, "no step: give fn or step_in/step_out"), false;
  for (int i = 0; i < sp->nseqs; i++) {
    const rg_scan_seq *q = &sp->seqs[i];
    if (!q->x) return false;
    if (q->x->type->ndim < 1) return berr(b->C, "sequence %d is a scalar: it needs a dimension to walk", i), false;
  }
  for (int i = 0; i < sp->noutputs; i++) {
    const rg_scan_output *o = &sp->outputs[i];
    if (!o->init) continue;
    for (int j = 0; j < o->ntaps; j++)
      if (o->taps[j] >= 0)
        return berr(b->C, "output %d: tap %lld must be negative (a state reads earlier steps)", i,
                    (long long)o->taps[j]), false;
    if (!is_sit_sot(o) && o->init->type->ndim < 1)
      return berr(b->C, "output %d: the initial values of a state with taps are rows of a tensor "
                  "(got a scalar)", i), false;
  }
  for (int i = 0; i < sp->nnon_seqs; i++)
    if (!sp->non_seqs[i]) return false;
  if (sp->fn && (sp->step_out || sp->step_in))
    return berr(b->C, "both fn and step_in/step_out given: give one step"), false;
  if (!sp->fn && sp->step_out && sp->nstep_in != step_inputs(sp))
    return berr(b->C, "the step graph takes %d inputs, the scan passes %d (one per sequence tap, state tap and "
                "non-sequence)", sp->nstep_in, step_inputs(sp)), false;
  if (!sp->n_steps && sp->nseqs == 0)
    return berr(b->C, "n_steps must be given when there are no sequences"), false;
  return true;
}

/* ------------------------------------------------------------------ the step */

static void classify(build *b) {
  const rg_scan_spec *sp = b->sp;
  b->slots = rgk_alloc((size_t)(sp->noutputs + 1) * sizeof *b->slots);
  for (int i = 0; i < sp->noutputs; i++) {
    const rg_scan_output *o = &sp->outputs[i];
    if (!o->init) b->slots[i] = (slot){RG_SCAN_NIT_SOT, b->nns++};
    else if (is_sit_sot(o)) b->slots[i] = (slot){RG_SCAN_SIT_SOT, b->nss++};
    else b->slots[i] = (slot){RG_SCAN_MIT_SOT, b->nms++};
  }
}

/* Inner inputs are named after their outer values, as Theano did:
 * x_t, x_tm1, x_tp1 for sequence taps, h0_tm1 for state taps (s0_tm1 when
 * the initial value has no name), the outer name for non-sequences. */
static const char *tap_name(const char *base, int64_t tap) {
  if (tap == 0) return rgk_sprintf("%s_t", base);
  return rgk_sprintf("%s_t%s%lld", base, tap < 0 ? "m" : "p", (long long)(tap < 0 ? -tap : tap));
}

static const char *base_name(const rg_variable *v, const char *kind, int k) {
  return v->name ? v->name : rgk_sprintf("%s%d", kind, k);
}

static rg_variable *fresh(build *b, const rg_type *t, const char *name) { return rg_input(b->C, name, t); }

/* Fresh inner inputs in the step's order. */
static void make_user_inputs(build *b) {
  const rg_scan_spec *sp = b->sp;
  rgk_stack v = {0};
  for (int i = 0; i < sp->nseqs; i++)
    for (int j = 0; j < seq_ntaps(&sp->seqs[i]); j++)
      rgk_push(&v, (rgk_word)fresh(b, row_of(sp->seqs[i].x->type),
                                   tap_name(base_name(sp->seqs[i].x, "x", i), seq_tap(&sp->seqs[i], j))));
  for (int i = 0; i < sp->noutputs; i++) {
    const rg_scan_output *o = &sp->outputs[i];
    if (!o->init) continue;
    const char *base = base_name(o->init, "s", i);
    if (is_sit_sot(o)) rgk_push(&v, (rgk_word)fresh(b, o->init->type, tap_name(base, -1)));
    else
      for (int j = 0; j < o->ntaps; j++)
        rgk_push(&v, (rgk_word)fresh(b, row_of(o->init->type), tap_name(base, o->taps[j])));
  }
  for (int i = 0; i < sp->nnon_seqs; i++)
    rgk_push(&v, (rgk_word)fresh(b, sp->non_seqs[i]->type, base_name(sp->non_seqs[i], "w", i)));
  b->user_in = (rg_variable **)v.v;
  b->nuser_in = (int)v.n;
}

static bool run_step(build *b) {
  const rg_scan_spec *sp = b->sp;
  b->step_out = rgk_alloc((size_t)(sp->noutputs + 1) * sizeof *b->step_out);
  if (sp->fn) {
    make_user_inputs(b);
    const char *before = rgk_strdup(rg_errmsg(b->C));
    int rc = sp->fn(b->C, b->nuser_in, b->user_in, b->step_out, &b->until, sp->ud);
    if (rc != RG_OK) { /* a message left from before is not the step's */
      if (!rg_errcode(b->C) || !strcmp(before, rg_errmsg(b->C)))
        berr(b->C, "the step function failed (code %d) and recorded no message", rc);
      return false;
    }
  } else {
    b->user_in = (rg_variable **)sp->step_in;
    b->nuser_in = sp->nstep_in;
    for (int i = 0; i < sp->noutputs; i++) b->step_out[i] = sp->step_out[i];
    b->until = sp->step_until;
  }
  for (int i = 0; i < sp->noutputs; i++) {
    if (b->step_out[i]) continue;
    /* a construction error in the step (they are sticky) says more */
    if (!rg_errcode(b->C)) berr(b->C, "the step returned no value for output %d", i);
    return false;
  }
  return true;
}

/* Whether v is a free value of the step: no inner input, no constant,
 * and either a leaf or, for a step built by the callback, a value that
 * existed before the step was (computed outside: ids increase with
 * creation, and the step's inputs are its first variables). */
static bool is_free(const build *b, const rg_memo *mine, uint64_t first_id, const rg_variable *v) {
  if (rg_is_constant(v) || rg_memo_get(mine, v)) return false;
  return !v->owner || (b->sp->fn && v->id < first_id);
}

/* The step's free values: each gets an inner input of its own and is
 * passed as a non-sequence, so a value computed outside the loop is
 * computed once, not copied into the step (as aesara.scan treats outer
 * variables). */
static bool find_free(build *b) {
  const rg_scan_spec *sp = b->sp;
  int n = sp->noutputs + (b->until != NULL);
  rg_variable **outs = rgk_alloc((size_t)(n + 1) * sizeof *outs);
  memcpy(outs, b->step_out, (size_t)sp->noutputs * sizeof *outs);
  if (b->until) outs[sp->noutputs] = b->until;
  rg_memo *mine = rg_memo_new(), *seen = rg_memo_new();
  uint64_t first_id = UINT64_MAX;
  for (int i = 0; i < b->nuser_in; i++) {
    rg_memo_put(mine, b->user_in[i], b->user_in[i]);
    first_id = b->user_in[i]->id < first_id ? b->user_in[i]->id : first_id;
  }
  /* the free values: a walk that stops at them */
  rgk_stack todo = {0}, found = {0};
  for (int i = 0; i < n; i++) rgk_push(&todo, (rgk_word)outs[i]);
  while (todo.n) {
    rg_variable *v = (rg_variable *)todo.v[--todo.n];
    if (rg_memo_get(seen, v)) continue;
    rg_memo_put(seen, v, v);
    if (is_free(b, mine, first_id, v)) rgk_push(&found, (rgk_word)v);
    else if (v->owner)
      for (int i = 0; i < v->owner->nin; i++) rgk_push(&todo, (rgk_word)v->owner->inputs[i]);
  }
  /* in the order the step's ancestors list them (inputs before users) */
  size_t count;
  rg_variable **anc = rg_ancestors(n, outs, (int)found.n, (rg_variable *const *)found.v, &count);
  rg_memo *is_found = rg_memo_new();
  for (size_t k = 0; k < found.n; k++) rg_memo_put(is_found, (void *)found.v[k], (void *)1);
  for (size_t i = 0; i < count; i++) {
    if (!rg_memo_get(is_found, anc[i])) continue;
    rg_memo_put(is_found, anc[i], NULL);
    rgk_push(&b->free_outer, (rgk_word)anc[i]);
    rgk_push(&b->free_inner, (rgk_word)rg_input(b->C, anc[i]->name, anc[i]->type));
  }
  return true;
}

/* A free value's inner input replaces it in the step. */
static void substitute_free(build *b) {
  if (!b->free_outer.n) return;
  rg_memo *memo = rg_memo_new();
  for (size_t k = 0; k < b->free_outer.n; k++) rg_memo_put(memo, (void *)b->free_outer.v[k], (void *)b->free_inner.v[k]);
  int n = b->sp->noutputs + (b->until != NULL);
  rg_variable **outs = rgk_alloc((size_t)(n + 1) * sizeof *outs), **res = rgk_alloc((size_t)(n + 1) * sizeof *res);
  memcpy(outs, b->step_out, (size_t)b->sp->noutputs * sizeof *outs);
  if (b->until) outs[b->sp->noutputs] = b->until;
  rg_clone(b->C, b->nuser_in, b->user_in, n, outs, memo, 0, res);
  memcpy(b->step_out, res, (size_t)b->sp->noutputs * sizeof *res);
  if (b->until) b->until = res[b->sp->noutputs];
}

/* ------------------------------------------------------------------ the op's order */

/* Position in the user's inner inputs of the first tap of user output i. */
static int user_state_at(build *b, int i) {
  const rg_scan_spec *sp = b->sp;
  int at = 0;
  for (int q = 0; q < sp->nseqs; q++) at += seq_ntaps(&sp->seqs[q]);
  for (int q = 0; q < i; q++) {
    const rg_scan_output *o = &sp->outputs[q];
    if (o->init) at += is_sit_sot(o) ? 1 : o->ntaps;
  }
  return at;
}

/* The user output of a kind's k-th state. */
static int user_output(build *b, rg_scan_kind kind, int k) {
  for (int i = 0; i < b->sp->noutputs; i++)
    if (b->slots[i].kind == kind && b->slots[i].k == k) return i;
  return -1;
}

static void fill_info(build *b, rg_scan_info *s) {
  const rg_scan_spec *sp = b->sp;
  memset(s, 0, sizeof *s);
  s->n_seqs = sp->nseqs, s->n_mit_sot = b->nms, s->n_sit_sot = b->nss, s->n_nit_sot = b->nns;
  s->n_non_seqs = sp->nnon_seqs + (int)b->free_outer.n;
  s->until = b->until != NULL, s->go_backwards = sp->go_backwards;
  s->truncate_gradient = sp->truncate_gradient;
  int *sn = rgk_alloc((size_t)(sp->nseqs + 1) * sizeof *sn);
  const int64_t **st = rgk_alloc((size_t)(sp->nseqs + 1) * sizeof *st);
  for (int i = 0; i < sp->nseqs; i++) {
    sn[i] = seq_ntaps(&sp->seqs[i]);
    st[i] = b->seq_taps[i];
  }
  int *mn = rgk_alloc((size_t)(b->nms + 1) * sizeof *mn);
  const int64_t **mt = rgk_alloc((size_t)(b->nms + 1) * sizeof *mt);
  for (int k = 0; k < b->nms; k++) {
    const rg_scan_output *o = &sp->outputs[user_output(b, RG_SCAN_MIT_SOT, k)];
    mn[k] = o->ntaps, mt[k] = o->taps;
  }
  s->seq_ntaps = sn, s->seq_taps = st, s->mit_sot_ntaps = mn, s->mit_sot_taps = mt;
}

/* Inner inputs and outputs in the op's order. */
static rg_fgraph *inner_graph(build *b, const rg_scan_info *s) {
  const rg_scan_spec *sp = b->sp;
  int nin = rg_scan_n_inner_in(s), nout = rg_scan_n_inner_out(s);
  rg_variable **in = rgk_alloc((size_t)(nin + 1) * sizeof *in);
  rg_variable **out = rgk_alloc((size_t)(nout + 1) * sizeof *out);
  int nseq_in = 0;
  for (int i = 0; i < sp->nseqs; i++) nseq_in += seq_ntaps(&sp->seqs[i]);
  if (nseq_in) memcpy(in, b->user_in, (size_t)nseq_in * sizeof *in);
  for (int i = 0; i < sp->noutputs; i++) {
    slot sl = b->slots[i];
    out[rg_scan_inner_out(s, sl.kind, sl.k, 0)] = b->step_out[i];
    if (sl.kind == RG_SCAN_NIT_SOT) continue;
    int ntaps = sl.kind == RG_SCAN_MIT_SOT ? s->mit_sot_ntaps[sl.k] : 1, at = user_state_at(b, i);
    for (int j = 0; j < ntaps; j++) in[rg_scan_inner_in(s, sl.kind, sl.k, j)] = b->user_in[at + j];
  }
  int user_ns = b->nuser_in - sp->nnon_seqs;
  for (int k = 0; k < sp->nnon_seqs; k++) in[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)] = b->user_in[user_ns + k];
  for (size_t k = 0; k < b->free_inner.n; k++)
    in[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, sp->nnon_seqs + (int)k, 0)] = (rg_variable *)b->free_inner.v[k];
  if (b->until) out[rg_scan_inner_out(s, RG_SCAN_UNTIL, 0, 0)] = b->until;
  return rg_fgraph_new(b->C, nin, in, nout, out, RG_FG_CLONE);
}

/* ------------------------------------------------------------------ outer inputs */

static void tap_range(const rg_scan_seq *q, int64_t *lo, int64_t *hi) {
  *lo = *hi = seq_tap(q, 0);
  for (int j = 0; j < seq_ntaps(q); j++) {
    int64_t t = seq_tap(q, j);
    *lo = t < *lo ? t : *lo, *hi = t > *hi ? t : *hi;
  }
}

/* Sequences as aesara.scan takes them.  Its taps count from the step's
 * row as if tap 0 were among them: with taps m..M, step t reads row
 * t + k - min(m, 0), and there are len - (max(M, 0) - min(m, 0)) steps.
 * With go_backwards each tap's rows are walked from the end, each in the
 * sequence's own time (tap -1 is the row before the step's row, in the
 * original order).  The op reads row t + k - m of its sequence (reversed
 * with go_backwards), so the builder gives it the rows max(m, 0) ..
 * len + min(M, 0) and, going backwards, the taps negated; the step still
 * sees the taps in the order and under the names the spec gives them. */
static void cut_sequences(build *b) {
  const rg_scan_spec *sp = b->sp;
  b->seq_x = rgk_alloc((size_t)(sp->nseqs + 1) * sizeof *b->seq_x);
  b->seq_taps = rgk_alloc((size_t)(sp->nseqs + 1) * sizeof *b->seq_taps);
  for (int i = 0; i < sp->nseqs; i++) {
    const rg_scan_seq *q = &sp->seqs[i];
    int n = seq_ntaps(q);
    int64_t lo, hi, *t = rgk_alloc_atomic((size_t)n * sizeof *t);
    for (int j = 0; j < n; j++) t[j] = sp->go_backwards ? -seq_tap(q, j) : seq_tap(q, j);
    b->seq_taps[i] = t;
    tap_range(q, &lo, &hi);
    b->seq_x[i] = q->x;
    if (lo > 0 || hi < 0) {
      rg_index cut = {RG_IDX_SLICE, lo > 0 ? lo : RG_IDX_NONE, hi < 0 ? hi : RG_IDX_NONE, RG_IDX_NONE};
      b->seq_x[i] = rg_subtensor(q->x, 1, &cut, 0, NULL);
    }
  }
}

/* The number of steps: given, or the shortest sequence after its taps. */
static rg_variable *steps(build *b) {
  const rg_scan_spec *sp = b->sp;
  if (sp->n_steps) return sp->n_steps;
  rg_variable *n = NULL;
  for (int i = 0; i < sp->nseqs; i++) {
    const rg_scan_seq *q = &sp->seqs[i];
    int64_t lo, hi;
    tap_range(q, &lo, &hi);
    lo = lo < 0 ? lo : 0, hi = hi > 0 ? hi : 0; /* as if tap 0 were used */
    int64_t len = q->x->type->shape[0];
    if (len >= 0 && len < hi - lo) /* len == hi - lo: zero steps */
      return berr(b->C, "sequence %d has %lld rows, too short for its taps (%lld rows needed)", i,
                  (long long)len, (long long)(hi - lo)), NULL;
    rg_variable *li = rgc_iarith(b->C, 1, rg_shape_of(b->C, q->x)[0], rgc_dim_const(b->C, hi - lo));
    n = n ? rgc_iarith(b->C, 5, n, li) : li;
  }
  return n;
}

static rg_variable **outer_inputs(build *b, const rg_scan_info *s, rg_variable *n) {
  const rg_scan_spec *sp = b->sp;
  rg_variable **in = rgk_alloc((size_t)rg_scan_n_outer_in(s) * sizeof *in);
  in[rg_scan_outer_in(s, RG_SCAN_N_STEPS, 0)] = n;
  for (int i = 0; i < sp->nseqs; i++) in[rg_scan_outer_in(s, RG_SCAN_SEQ, i)] = b->seq_x[i];
  for (int i = 0; i < sp->noutputs; i++) {
    slot sl = b->slots[i];
    in[rg_scan_outer_in(s, sl.kind, sl.k)] = sl.kind == RG_SCAN_NIT_SOT ? n : sp->outputs[i].init;
  }
  for (int k = 0; k < sp->nnon_seqs; k++) in[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)] = sp->non_seqs[k];
  for (size_t k = 0; k < b->free_outer.n; k++)
    in[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, sp->nnon_seqs + (int)k)] = (rg_variable *)b->free_outer.v[k];
  return in;
}

rg_node *rg_scan(rg_ctx *C, const rg_scan_spec *sp, rg_variable **outs) {
  if (!sp) return NULL;
  build b = {.C = C, .sp = sp};
  if (!check_spec(&b)) return NULL;
  classify(&b);
  cut_sequences(&b);
  rg_variable *n = steps(&b);
  if (!n || !run_step(&b) || !find_free(&b)) return NULL;
  substitute_free(&b);
  rg_scan_info s;
  fill_info(&b, &s);
  rg_fgraph *g = inner_graph(&b, &s);
  const rg_op *op = g ? rg_op_scan(C, &s, g) : NULL;
  rg_node *node = op ? rg_make_node(C, op, rg_scan_n_outer_in(&s), outer_inputs(&b, &s, n)) : NULL;
  if (!node) return NULL;
  for (int i = 0; i < sp->noutputs; i++)
    outs[i] = node->outputs[rg_scan_outer_out(&s, b.slots[i].kind, b.slots[i].k)];
  return node;
}
