/*
 * scan.c — the Scan op: its layout (rg_scan_info) and the op class
 * functions (make_node, infer_shape), see relgraph/scan.h for semantics.
 *
 * Scan is an inner-graph op (inner.c): a frozen copy of the step's graph
 * in op->inner, and its layout in op->ints, which the generic parameter
 * code already compares, hashes, prints and parses (ints, then the
 * graph).  The layout is encoded as
 *
 *   [0..8]  n_seqs n_mit_mot n_mit_sot n_sit_sot n_nit_sot n_non_seqs
 *           until go_backwards truncate_gradient
 *   then    per sequence: ntaps, taps...
 *           per mit-mot:  nin, in taps..., nout, out taps...
 *           per mit-sot:  ntaps, taps...
 *           store_steps, one per mit-sot, sit-sot and nit-sot
 *
 * and decoded into an rg_scan_info whose tap arrays point into the ints.
 * Every position in the flat input and output lists is computed by the
 * helpers rg_scan_outer_in / _inner_in / ... from the counts: no other
 * code adds offsets by hand.
 */
#include "core/core-impl.h"
#include "relgraph/scan.h"

#define HDR 9

/* ------------------------------------------------------------------ decoding */

typedef struct cursor {
  const int64_t *v;
  int n, at;
  bool bad;
} cursor;

static int64_t take(cursor *c) {
  if (c->at >= c->n) {
    c->bad = true;
    return 0;
  }
  return c->v[c->at++];
}

/* A tap list: its length, then the taps (pointing into the ints). */
static void take_taps(cursor *c, int *n, const int64_t **taps) {
  int64_t k = take(c);
  if (k < 1 || k > c->n - c->at) {
    c->bad = true;
    *n = 0;
    *taps = NULL;
    return;
  }
  *n = (int)k;
  *taps = c->v + c->at;
  c->at += (int)k;
}

/* Where decoding puts its arrays: collected memory, or a caller's
 * scratch buffer (bumped; 8-byte aligned). */
typedef struct arena {
  char *buf;
} arena;

static void *arr(arena *a, int n, size_t size) {
  size_t bytes = ((size_t)(n ? n : 1) * size + 7) & ~(size_t)7;
  if (!a->buf) return rgk_alloc(bytes);
  void *p = a->buf;
  a->buf += bytes;
  return p;
}

static bool count_ok(int64_t k) { return k >= 0 && k <= 1 << 20; }

static bool decode(int nints, const int64_t *ints, rg_scan_info *s, arena *a) {
  memset(s, 0, sizeof *s);
  if (nints < HDR) return false;
  for (int i = 0; i < 6; i++)
    if (!count_ok(ints[i])) return false;
  s->n_seqs = (int)ints[0], s->n_mit_mot = (int)ints[1], s->n_mit_sot = (int)ints[2];
  s->n_sit_sot = (int)ints[3], s->n_nit_sot = (int)ints[4], s->n_non_seqs = (int)ints[5];
  if ((ints[6] | ints[7]) & ~(int64_t)1) return false;
  s->until = ints[6], s->go_backwards = ints[7], s->truncate_gradient = ints[8];
  if ((int64_t)s->n_seqs + 2 * (int64_t)s->n_mit_mot + s->n_mit_sot > nints) return false;
  cursor c = {ints, nints, HDR, false};
  int *sn = arr(a, s->n_seqs, sizeof *sn);
  const int64_t **st = arr(a, s->n_seqs, sizeof *st);
  for (int i = 0; i < s->n_seqs; i++) take_taps(&c, &sn[i], &st[i]);
  int *mi = arr(a, s->n_mit_mot, sizeof *mi), *mo = arr(a, s->n_mit_mot, sizeof *mo);
  const int64_t **mit = arr(a, s->n_mit_mot, sizeof *mit), **mot = arr(a, s->n_mit_mot, sizeof *mot);
  for (int i = 0; i < s->n_mit_mot; i++) {
    take_taps(&c, &mi[i], &mit[i]);
    take_taps(&c, &mo[i], &mot[i]);
  }
  int *ms = arr(a, s->n_mit_sot, sizeof *ms);
  const int64_t **mst = arr(a, s->n_mit_sot, sizeof *mst);
  for (int i = 0; i < s->n_mit_sot; i++) take_taps(&c, &ms[i], &mst[i]);
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  if (c.bad || nints - c.at != nstore) return false;
  s->seq_ntaps = sn, s->seq_taps = st;
  s->mit_mot_nin = mi, s->mit_mot_nout = mo, s->mit_mot_in_taps = mit, s->mit_mot_out_taps = mot;
  s->mit_sot_ntaps = ms, s->mit_sot_taps = mst;
  s->store_steps = ints + c.at;
  return true;
}

bool rg_scan_info_of(const rg_op *op, rg_scan_info *out) {
  if (!op || op->code != RG_OP_SCAN) return false;
  arena a = {NULL};
  return decode(op->nints, op->ints, out, &a);
}

bool rg_scan_info_decode(int nints, const int64_t *ints, rg_scan_info *out, void *scratch) {
  arena a = {scratch};
  return decode(nints, ints, out, &a);
}

/* ------------------------------------------------------------------ encoding */

static void put_taps(rgk_stack *v, int n, const int64_t *taps) {
  rgk_push(v, (rgk_word)n);
  for (int i = 0; i < n; i++) rgk_push(v, (rgk_word)taps[i]);
}

static int64_t *encode(const rg_scan_info *s, int *n) {
  rgk_stack v = {0};
  int64_t hdr[HDR] = {s->n_seqs, s->n_mit_mot, s->n_mit_sot, s->n_sit_sot, s->n_nit_sot,
                      s->n_non_seqs, s->until, s->go_backwards, s->truncate_gradient};
  for (int i = 0; i < HDR; i++) rgk_push(&v, (rgk_word)hdr[i]);
  for (int i = 0; i < s->n_seqs; i++) put_taps(&v, s->seq_ntaps[i], s->seq_taps[i]);
  for (int i = 0; i < s->n_mit_mot; i++) {
    put_taps(&v, s->mit_mot_nin[i], s->mit_mot_in_taps[i]);
    put_taps(&v, s->mit_mot_nout[i], s->mit_mot_out_taps[i]);
  }
  for (int i = 0; i < s->n_mit_sot; i++) put_taps(&v, s->mit_sot_ntaps[i], s->mit_sot_taps[i]);
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  for (int i = 0; i < nstore; i++) rgk_push(&v, (rgk_word)(s->store_steps ? s->store_steps[i] : 0));
  int64_t *out = rgk_alloc_atomic(v.n * sizeof *out);
  for (size_t i = 0; i < v.n; i++) out[i] = (int64_t)v.v[i];
  *n = (int)v.n;
  return out;
}

/* ------------------------------------------------------------------ positions (ScanArgs) */

static int sum(const int *v, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += v[i];
  return s;
}

int64_t rg_scan_tap_min(int n, const int64_t *taps) {
  int64_t m = taps[0];
  for (int i = 1; i < n; i++) m = taps[i] < m ? taps[i] : m;
  return m;
}

int64_t rg_scan_tap_max(int n, const int64_t *taps) {
  int64_t m = taps[0];
  for (int i = 1; i < n; i++) m = taps[i] > m ? taps[i] : m;
  return m;
}

int rg_scan_count(const rg_scan_info *s, rg_scan_kind kind) {
  switch (kind) {
  case RG_SCAN_N_STEPS: return 1;
  case RG_SCAN_SEQ: return s->n_seqs;
  case RG_SCAN_MIT_MOT: return s->n_mit_mot;
  case RG_SCAN_MIT_SOT: return s->n_mit_sot;
  case RG_SCAN_SIT_SOT: return s->n_sit_sot;
  case RG_SCAN_NIT_SOT: return s->n_nit_sot;
  case RG_SCAN_NON_SEQ: return s->n_non_seqs;
  case RG_SCAN_UNTIL: return s->until;
  }
  return 0;
}

/* Outer inputs: n_steps, then the kinds in enum order (until has none). */
int rg_scan_outer_in(const rg_scan_info *s, rg_scan_kind kind, int k) {
  if (kind == RG_SCAN_UNTIL || k < 0 || k >= rg_scan_count(s, kind)) return -1;
  int at = 0;
  for (rg_scan_kind q = RG_SCAN_N_STEPS; q < kind; q++) at += rg_scan_count(s, q);
  return at + k;
}

int rg_scan_n_outer_in(const rg_scan_info *s) {
  return 1 + s->n_seqs + s->n_mit_mot + s->n_mit_sot + s->n_sit_sot + s->n_nit_sot + s->n_non_seqs;
}

/* Outer outputs: mit-mot, mit-sot, sit-sot, nit-sot. */
int rg_scan_outer_out(const rg_scan_info *s, rg_scan_kind kind, int k) {
  if (kind < RG_SCAN_MIT_MOT || kind > RG_SCAN_NIT_SOT || k < 0 || k >= rg_scan_count(s, kind))
    return -1;
  int at = 0;
  for (rg_scan_kind q = RG_SCAN_MIT_MOT; q < kind; q++) at += rg_scan_count(s, q);
  return at + k;
}

int rg_scan_n_outer_out(const rg_scan_info *s) {
  return s->n_mit_mot + s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
}

/* Inner inputs of the k-th variable of a kind: how many, over all of the
 * variables of that kind before k (*before), and for k itself (*own). */
static void inner_in_span(const rg_scan_info *s, rg_scan_kind kind, int k, int *before, int *own) {
  switch (kind) {
  case RG_SCAN_SEQ: *before = sum(s->seq_ntaps, k), *own = s->seq_ntaps[k]; return;
  case RG_SCAN_MIT_MOT: *before = sum(s->mit_mot_nin, k), *own = s->mit_mot_nin[k]; return;
  case RG_SCAN_MIT_SOT: *before = sum(s->mit_sot_ntaps, k), *own = s->mit_sot_ntaps[k]; return;
  case RG_SCAN_SIT_SOT: case RG_SCAN_NON_SEQ: *before = k, *own = 1; return;
  default: *before = 0, *own = 0; return;
  }
}

int rg_scan_inner_in(const rg_scan_info *s, rg_scan_kind kind, int k, int tap) {
  if (kind == RG_SCAN_N_STEPS || kind == RG_SCAN_NIT_SOT || kind == RG_SCAN_UNTIL || k < 0 ||
      k >= rg_scan_count(s, kind))
    return -1;
  int at = 0, before, own;
  for (rg_scan_kind q = RG_SCAN_SEQ; q < kind; q++) {
    int n = rg_scan_count(s, q);
    if (q == RG_SCAN_NIT_SOT || n == 0) continue;
    inner_in_span(s, q, n - 1, &before, &own);
    at += before + own;
  }
  inner_in_span(s, kind, k, &before, &own);
  return tap >= 0 && tap < own ? at + before + tap : -1;
}

int rg_scan_n_inner_in(const rg_scan_info *s) {
  return sum(s->seq_ntaps, s->n_seqs) + sum(s->mit_mot_nin, s->n_mit_mot) +
         sum(s->mit_sot_ntaps, s->n_mit_sot) + s->n_sit_sot + s->n_non_seqs;
}

/* Inner outputs: mit-mot output taps, mit-sot, sit-sot, nit-sot, until. */
int rg_scan_inner_out(const rg_scan_info *s, rg_scan_kind kind, int k, int tap) {
  if (kind < RG_SCAN_MIT_MOT || kind == RG_SCAN_NON_SEQ || k < 0 || k >= rg_scan_count(s, kind))
    return -1;
  int mm = sum(s->mit_mot_nout, s->n_mit_mot);
  switch (kind) {
  case RG_SCAN_MIT_MOT: return tap >= 0 && tap < s->mit_mot_nout[k] ? sum(s->mit_mot_nout, k) + tap : -1;
  case RG_SCAN_MIT_SOT: return tap == 0 ? mm + k : -1;
  case RG_SCAN_SIT_SOT: return tap == 0 ? mm + s->n_mit_sot + k : -1;
  case RG_SCAN_NIT_SOT: return tap == 0 ? mm + s->n_mit_sot + s->n_sit_sot + k : -1;
  default: return tap == 0 ? mm + s->n_mit_sot + s->n_sit_sot + s->n_nit_sot : -1;
  }
}

int rg_scan_n_inner_out(const rg_scan_info *s) {
  return sum(s->mit_mot_nout, s->n_mit_mot) + s->n_mit_sot + s->n_sit_sot + s->n_nit_sot + s->until;
}

/* ------------------------------------------------------------------ checking a layout */

static int lerr(rg_ctx *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int lerr(rg_ctx *C, const char *fmt, ...) {
  if (!C) return RG_ERR_TYPE;
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(C, RG_ERR_TYPE, "scan: %s", msg);
}

static bool distinct(int n, const int64_t *taps) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (taps[i] == taps[j]) return false;
  return true;
}

static int check_taps(rg_ctx *C, const char *what, int k, int n, const int64_t *taps, bool negative) {
  if (n < 1 || !taps) return lerr(C, "%s %d has no taps", what, k);
  if (!distinct(n, taps)) return lerr(C, "%s %d repeats a tap", what, k);
  for (int i = 0; negative && i < n; i++)
    if (taps[i] >= 0)
      return lerr(C, "%s %d: tap %lld must be negative (a state reads earlier steps)", what, k,
                  (long long)taps[i]);
  for (int i = 0; i < n; i++)
    if (taps[i] < -(1 << 30) || taps[i] > (1 << 30))
      return lerr(C, "%s %d: tap %lld is out of range", what, k, (long long)taps[i]);
  return RG_OK;
}

static int check_layout(rg_ctx *C, const rg_scan_info *s) {
  int counts[6] = {s->n_seqs, s->n_mit_mot, s->n_mit_sot, s->n_sit_sot, s->n_nit_sot, s->n_non_seqs};
  for (int i = 0; i < 6; i++)
    if (!count_ok(counts[i])) return lerr(C, "a count of variables is negative or too large");
  if (s->truncate_gradient < -1) return lerr(C, "truncate_gradient must be -1 (none) or >= 0");
  for (int i = 0; i < s->n_seqs; i++)
    if (check_taps(C, "sequence", i, s->seq_ntaps[i], s->seq_taps[i], false)) return RG_ERR_TYPE;
  for (int i = 0; i < s->n_mit_mot; i++)
    if (check_taps(C, "mit-mot input", i, s->mit_mot_nin[i], s->mit_mot_in_taps[i], false) ||
        check_taps(C, "mit-mot output", i, s->mit_mot_nout[i], s->mit_mot_out_taps[i], false))
      return RG_ERR_TYPE;
  for (int i = 0; i < s->n_mit_sot; i++)
    if (check_taps(C, "state", i, s->mit_sot_ntaps[i], s->mit_sot_taps[i], true)) return RG_ERR_TYPE;
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  for (int i = 0; s->store_steps && i < nstore; i++)
    if (s->store_steps[i] < 0) return lerr(C, "store_steps must be >= 0 (0: the whole trace)");
  return RG_OK;
}

/* a and b agree: same dtype and rank, equal sizes where both are known.
 * Devices do not count: a step runs where its node runs, whatever its
 * types say, and the linker copies outer values to that device. */
static bool compatible(const rg_type *a, const rg_type *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] >= 0 && b->shape[d] >= 0 && a->shape[d] != b->shape[d]) return false;
  return true;
}

static const char *kind_name(rg_scan_kind k) {
  static const char *const names[] = {"n_steps", "sequence", "mit-mot", "mit-sot state",
                                      "sit-sot state", "nit-sot", "non-sequence", "until"};
  return names[k];
}

/* Each state's inner output fits the state's inner input(s). */
static int check_state(rg_ctx *C, const rg_scan_info *s, const rg_fgraph *g, rg_scan_kind kind, int k) {
  int ntap = kind == RG_SCAN_MIT_SOT ? s->mit_sot_ntaps[k] : kind == RG_SCAN_MIT_MOT ? s->mit_mot_nin[k] : 1;
  int nout = kind == RG_SCAN_MIT_MOT ? s->mit_mot_nout[k] : 1;
  for (int o = 0; o < nout; o++) {
    const rg_type *ot = g->outputs[rg_scan_inner_out(s, kind, k, o)]->type;
    for (int t = 0; t < ntap; t++) {
      const rg_type *it = g->inputs[rg_scan_inner_in(s, kind, k, t)]->type;
      if (!compatible(ot, it))
        return lerr(C, "the %s %d changes type across a step: it enters the step as %s and leaves "
                    "it as %s", kind_name(kind), k, rg_type_str(it), rg_type_str(ot));
    }
  }
  return RG_OK;
}

static int check_inner(rg_ctx *C, const rg_scan_info *s, const rg_fgraph *g) {
  if (g->nin != rg_scan_n_inner_in(s))
    return lerr(C, "the step graph has %d inputs, the layout needs %d", g->nin, rg_scan_n_inner_in(s));
  if (g->nout != rg_scan_n_inner_out(s))
    return lerr(C, "the step graph has %d outputs, the layout needs %d", g->nout, rg_scan_n_inner_out(s));
  for (int k = 0; k < s->n_mit_mot; k++)
    if (check_state(C, s, g, RG_SCAN_MIT_MOT, k)) return RG_ERR_TYPE;
  for (int k = 0; k < s->n_mit_sot; k++)
    if (check_state(C, s, g, RG_SCAN_MIT_SOT, k)) return RG_ERR_TYPE;
  for (int k = 0; k < s->n_sit_sot; k++)
    if (check_state(C, s, g, RG_SCAN_SIT_SOT, k)) return RG_ERR_TYPE;
  if (s->until) {
    const rg_type *u = g->outputs[rg_scan_inner_out(s, RG_SCAN_UNTIL, 0, 0)]->type;
    if (u->dtype != RG_BOOL || u->ndim != 0)
      return lerr(C, "until must be a boolean scalar, got %s", rg_type_str(u));
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ making the op */

const rg_op *rgc_scan_op_make(rg_ctx *C, rg_fgraph *g, int nints, const int64_t *ints) {
  rg_scan_info s;
  arena a = {NULL};
  if (!decode(nints, ints, &s, &a)) {
    lerr(C, "malformed layout parameters");
    return NULL;
  }
  if (check_layout(C, &s) || check_inner(C, &s, g)) return NULL;
  return rgc_inner_op(RG_OP_SCAN, g, nints, ints);
}

const rg_op *rg_op_scan(rg_ctx *C, const rg_scan_info *info, rg_fgraph *inner) {
  if (!info || !inner) return NULL;
  if (check_layout(C, info)) return NULL;
  int n;
  int64_t *ints = encode(info, &n);
  return rgc_scan_op_make(C, inner, n, ints);
}

/* In place (scan_inplace), a Scan computes each mit-mot over its outer
 * buffer: mit-mot output k destroys that input.  op->inplace is then the
 * outer input of the first mit-mot buffer. */
int rgc_scan_destroys(const rg_op *op, int output) {
  rg_scan_info s;
  if (op->inplace < 0 || !rg_scan_info_of(op, &s)) return -1;
  for (int k = 0; k < s.n_mit_mot; k++)
    if (rg_scan_outer_out(&s, RG_SCAN_MIT_MOT, k) == output) return rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k);
  return -1;
}

/* The same layout over another inner graph, in place where op was (the
 * inner graph is rewritten at compile time after scan_inplace ran on the
 * outer one: dropping the mark would copy every mit-mot buffer per call). */
const rg_op *rg_op_scan_with_inner(rg_ctx *C, const rg_op *op, rg_fgraph *inner) {
  if (!op || op->code != RG_OP_SCAN || !inner) return NULL;
  const rg_op *nw = rgc_scan_op_make(C, inner, op->nints, op->ints);
  return nw && op->inplace >= 0 ? rg_op_inplace(nw, op->inplace) : nw;
}

/* ------------------------------------------------------------------ make_node */

static bool is_int_scalar(const rg_variable *v) {
  return v->type->ndim == 0 && rg_dtype_is_int(v->type->dtype);
}

/* The type t without its first dimension. */
static const rg_type *row_type(const rg_type *t) {
  return rg_type_on_device(rg_type_new(t->dtype, t->ndim - 1, t->shape + 1), t->device);
}

static int check_seq(rg_ctx *C, const rg_op *op, const rg_scan_info *s, rg_variable *const *in, int k) {
  const rg_type *t = in[rg_scan_outer_in(s, RG_SCAN_SEQ, k)]->type;
  if (t->ndim < 1) return rgc_op_error(C, op, "sequence %d is a scalar: it needs a dimension to walk", k);
  const rg_type *row = row_type(t);
  int64_t lo = rg_scan_tap_min(s->seq_ntaps[k], s->seq_taps[k]), hi = rg_scan_tap_max(s->seq_ntaps[k], s->seq_taps[k]);
  for (int j = 0; j < s->seq_ntaps[k]; j++) {
    const rg_type *it = op->inner->inputs[rg_scan_inner_in(s, RG_SCAN_SEQ, k, j)]->type;
    if (!compatible(row, it))
      return rgc_op_error(C, op, "sequence %d: a slice of %s does not fit the step's input %s", k,
                          rg_type_str(t), rg_type_str(it));
  }
  if (t->shape[0] >= 0 && t->shape[0] < hi - lo) /* zero steps read none */
    return rgc_op_error(C, op, "sequence %d has %lld rows, too short for its taps %lld..%lld", k,
                        (long long)t->shape[0], (long long)lo, (long long)hi);
  return RG_OK;
}

/* A state's outer initial value against its first inner input. */
static int check_init(rg_ctx *C, const rg_op *op, const rg_scan_info *s, rg_variable *const *in,
                      rg_scan_kind kind, int k) {
  const rg_type *t = in[rg_scan_outer_in(s, kind, k)]->type;
  const rg_type *it = op->inner->inputs[rg_scan_inner_in(s, kind, k, 0)]->type;
  if (kind == RG_SCAN_SIT_SOT) {
    if (!compatible(t, it))
      return rgc_op_error(C, op, "the initial value of sit-sot state %d has type %s, the step "
                          "expects %s", k, rg_type_str(t), rg_type_str(it));
    return RG_OK;
  }
  if (t->ndim < 1 || !compatible(row_type(t), it))
    return rgc_op_error(C, op, "the initial values of %s %d (%s) must be rows of the step's %s",
                        kind_name(kind), k, rg_type_str(t), rg_type_str(it));
  if (kind == RG_SCAN_MIT_SOT) {
    int64_t need = -rg_scan_tap_min(s->mit_sot_ntaps[k], s->mit_sot_taps[k]);
    if (t->shape[0] >= 0 && t->shape[0] < need)
      return rgc_op_error(C, op, "mit-sot state %d needs %lld initial rows, its initial value has "
                          "%lld", k, (long long)need, (long long)t->shape[0]);
  }
  return RG_OK;
}

static int64_t const_steps(rg_variable *n) {
  int64_t k;
  return rg_constant_get_i64(n, &k) && k >= 0 ? k : RG_DIM_UNKNOWN;
}

/* The trace type of a state or nit-sot: rows, then the row type, on the
 * node's device. */
static const rg_type *trace_type(const rg_scan_info *s, rg_variable *n_steps, int store_at,
                                 const rg_type *row, rg_device dev) {
  int64_t shape[RG_MAX_NDIM];
  int64_t n = s->until ? RG_DIM_UNKNOWN : const_steps(n_steps);
  int64_t keep = s->store_steps[store_at];
  if (keep > 0 && n >= 0) n = n < keep ? n : keep;
  else if (keep > 0) n = RG_DIM_UNKNOWN;
  shape[0] = n;
  memcpy(shape + 1, row->shape, (size_t)row->ndim * sizeof *shape);
  return rg_type_on_device(rg_type_new(row->dtype, row->ndim + 1, shape), dev);
}

/* Where a Scan's traces live: as for any op, the device of its first
 * input off the host (sequences, initial values, non-sequences; the step
 * count and the nit-sots' lengths are shape arguments). */
static rg_device scan_device(const rg_scan_info *s, rg_variable *const *in) {
  rg_device dev = RG_DEVICE_HOST;
  for (rg_scan_kind kind = RG_SCAN_SEQ; kind <= RG_SCAN_NON_SEQ && dev == RG_DEVICE_HOST; kind++)
    if (kind != RG_SCAN_NIT_SOT && rg_scan_count(s, kind))
      dev = rgc_result_device(rg_scan_count(s, kind), in + rg_scan_outer_in(s, kind, 0));
  return dev;
}

static int check_outer(rg_ctx *C, const rg_op *op, const rg_scan_info *s, rg_variable *const *in) {
  if (!is_int_scalar(in[0]))
    return rgc_op_error(C, op, "n_steps must be an integer scalar, got %s", rg_type_str(in[0]->type));
  for (int k = 0; k < s->n_seqs; k++)
    if (check_seq(C, op, s, in, k)) return RG_ERR_TYPE;
  for (int k = 0; k < s->n_mit_mot; k++)
    if (check_init(C, op, s, in, RG_SCAN_MIT_MOT, k)) return RG_ERR_TYPE;
  for (int k = 0; k < s->n_mit_sot; k++)
    if (check_init(C, op, s, in, RG_SCAN_MIT_SOT, k)) return RG_ERR_TYPE;
  for (int k = 0; k < s->n_sit_sot; k++)
    if (check_init(C, op, s, in, RG_SCAN_SIT_SOT, k)) return RG_ERR_TYPE;
  for (int k = 0; k < s->n_nit_sot; k++)
    if (!is_int_scalar(in[rg_scan_outer_in(s, RG_SCAN_NIT_SOT, k)]))
      return rgc_op_error(C, op, "the length of nit-sot %d must be an integer scalar", k);
  for (int k = 0; k < s->n_non_seqs; k++) {
    const rg_type *t = in[rg_scan_outer_in(s, RG_SCAN_NON_SEQ, k)]->type;
    const rg_type *it = op->inner->inputs[rg_scan_inner_in(s, RG_SCAN_NON_SEQ, k, 0)]->type;
    if (!compatible(t, it))
      return rgc_op_error(C, op, "non-sequence %d has type %s, the step expects %s", k,
                          rg_type_str(t), rg_type_str(it));
  }
  return RG_OK;
}

int rgc_scan_make_node(rg_ctx *C, const rg_op **opp, int nin, rg_variable *const *in, rgc_outs *out) {
  const rg_op *op = *opp;
  rg_scan_info s;
  if (!op->inner || !rg_scan_info_of(op, &s)) return rgc_op_error(C, op, "malformed scan op");
  if (nin != rg_scan_n_outer_in(&s))
    return rgc_op_error(C, op, "expected %d inputs (n_steps, %d sequences, %d mit-mot, %d mit-sot, "
                        "%d sit-sot, %d nit-sot, %d non-sequences), got %d", rg_scan_n_outer_in(&s),
                        s.n_seqs, s.n_mit_mot, s.n_mit_sot, s.n_sit_sot, s.n_nit_sot, s.n_non_seqs, nin);
  if (check_outer(C, op, &s, in)) return RG_ERR_TYPE;
  rgc_outs_alloc(out, rg_scan_n_outer_out(&s));
  const rg_fgraph *g = op->inner;
  rg_device dev = scan_device(&s, in);
  for (int k = 0; k < s.n_mit_mot; k++)
    out->types[rg_scan_outer_out(&s, RG_SCAN_MIT_MOT, k)] = in[rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k)]->type;
  for (int k = 0; k < s.n_mit_sot; k++)
    out->types[rg_scan_outer_out(&s, RG_SCAN_MIT_SOT, k)] =
        trace_type(&s, in[0], k, g->inputs[rg_scan_inner_in(&s, RG_SCAN_MIT_SOT, k, 0)]->type, dev);
  for (int k = 0; k < s.n_sit_sot; k++)
    out->types[rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, k)] =
        trace_type(&s, in[0], s.n_mit_sot + k, g->inputs[rg_scan_inner_in(&s, RG_SCAN_SIT_SOT, k, 0)]->type, dev);
  for (int k = 0; k < s.n_nit_sot; k++)
    out->types[rg_scan_outer_out(&s, RG_SCAN_NIT_SOT, k)] =
        trace_type(&s, in[rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, k)], s.n_mit_sot + s.n_sit_sot + k,
                   g->outputs[rg_scan_inner_out(&s, RG_SCAN_NIT_SOT, k, 0)]->type, dev);
  return RG_OK;
}

/* ------------------------------------------------------------------ infer_shape */

/* Rows of a trace: the step count (or the nit-sot's length), at most
 * store_steps; unknown (NULL) for a while-loop. */
static rg_variable *trace_rows(rg_ctx *C, const rg_scan_info *s, rg_variable *n, int store_at) {
  if (s->until) return NULL;
  int64_t keep = s->store_steps[store_at];
  n = rgc_as_i64(n);
  return keep > 0 ? rgc_iarith(C, 5, n, rgc_dim_const(C, keep)) : n;
}

static rgc_shape trace_shape(rg_ctx *C, const rg_type *t, rg_variable *rows, const rgc_shape row_src,
                             int row_off) {
  rgc_shape sh = rgk_alloc((size_t)t->ndim * sizeof *sh);
  sh[0] = t->shape[0] >= 0 ? rgc_dim_const(C, t->shape[0]) : rows;
  for (int d = 1; d < t->ndim; d++)
    sh[d] = t->shape[d] >= 0 ? rgc_dim_const(C, t->shape[d]) : row_src ? row_src[d - 1 + row_off] : NULL;
  return sh;
}

int rgc_scan_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out) {
  rg_scan_info s;
  if (!rg_scan_info_of(node->op, &s)) return rgc_op_error(C, node->op, "malformed scan op");
  rg_variable *n = node->inputs[0];
  for (int k = 0; k < s.n_mit_mot; k++)
    out[rg_scan_outer_out(&s, RG_SCAN_MIT_MOT, k)] = in[rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k)];
  for (int k = 0; k < s.n_mit_sot; k++) {
    int o = rg_scan_outer_out(&s, RG_SCAN_MIT_SOT, k);
    out[o] = trace_shape(C, node->outputs[o]->type, trace_rows(C, &s, n, k),
                         in[rg_scan_outer_in(&s, RG_SCAN_MIT_SOT, k)], 1);
  }
  for (int k = 0; k < s.n_sit_sot; k++) {
    int o = rg_scan_outer_out(&s, RG_SCAN_SIT_SOT, k);
    out[o] = trace_shape(C, node->outputs[o]->type, trace_rows(C, &s, n, s.n_mit_sot + k),
                         in[rg_scan_outer_in(&s, RG_SCAN_SIT_SOT, k)], 0);
  }
  for (int k = 0; k < s.n_nit_sot; k++) {
    int o = rg_scan_outer_out(&s, RG_SCAN_NIT_SOT, k);
    rg_variable *len = node->inputs[rg_scan_outer_in(&s, RG_SCAN_NIT_SOT, k)];
    out[o] = trace_shape(C, node->outputs[o]->type,
                         trace_rows(C, &s, len, s.n_mit_sot + s.n_sit_sot + k), NULL, 0);
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ printing */

static char *taps_text(char *acc, const char *what, int k, int n, const int64_t *taps) {
  acc = rgk_sprintf("%s, %s %d taps (", acc, what, k);
  for (int i = 0; i < n; i++) acc = rgk_sprintf("%s%s%lld", acc, i ? " " : "", (long long)taps[i]);
  return rgk_sprintf("%s)", acc);
}

/* The layout where it is not the default: taps, direction, store_steps. */
static char *layout_text(const rg_scan_info *s) {
  char *acc = rgk_strdup("");
  for (int k = 0; k < s->n_seqs; k++)
    if (s->seq_ntaps[k] != 1 || s->seq_taps[k][0] != 0) acc = taps_text(acc, "seq", k, s->seq_ntaps[k], s->seq_taps[k]);
  for (int k = 0; k < s->n_mit_mot; k++) {
    acc = taps_text(acc, "mit_mot in", k, s->mit_mot_nin[k], s->mit_mot_in_taps[k]);
    acc = taps_text(acc, "mit_mot out", k, s->mit_mot_nout[k], s->mit_mot_out_taps[k]);
  }
  for (int k = 0; k < s->n_mit_sot; k++) acc = taps_text(acc, "mit_sot", k, s->mit_sot_ntaps[k], s->mit_sot_taps[k]);
  if (s->go_backwards) acc = rgk_sprintf("%s, go_backwards", acc);
  if (s->truncate_gradient >= 0) acc = rgk_sprintf("%s, truncate_gradient %lld", acc, (long long)s->truncate_gradient);
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  for (int i = 0; i < nstore; i++)
    if (s->store_steps[i])
      acc = rgk_sprintf("%s, output %d keeps %lld step%s", acc, s->n_mit_mot + i, (long long)s->store_steps[i],
                        s->store_steps[i] == 1 ? "" : "s");
  return acc;
}

/* scan{lambda x_t, acc: (acc + x_t)}: the step as a lambda over the inner
 * inputs' names, its outputs (an until condition marked), then the
 * layout where it differs from one tap per variable. */
const char *rgc_scan_label(const rg_op *op) {
  rg_scan_info s;
  const rg_fgraph *g = op->inner;
  if (!rg_scan_info_of(op, &s) || !g) return "scan{?}";
  char *params = rgk_strdup("");
  for (int i = 0; i < g->nin; i++) params = rgk_sprintf("%s%s%s", params, i ? ", " : "", rgc_inner_input_name(g, i));
  /* The inner graph's lines are separated by ';' (a nested loop's label
   * has none left): the last line is the until condition, if any. */
  const char *raw = rgc_pprint_inner(g), *cond = s.until ? strrchr(raw, ';') : NULL;
  cond = s.until ? (cond ? cond + 1 : raw) : NULL;
  /* each ';' becomes ", ", and "until " goes before the condition */
  size_t n = strlen(raw), k = 0;
  char *body = rgk_alloc_atomic(2 * n + sizeof "until ");
  for (const char *c = raw; *c; c++) {
    if (c == cond) k += (size_t)sprintf(body + k, "until ");
    if (*c == ';') body[k++] = ',', body[k++] = ' ';
    else body[k++] = *c;
  }
  body[k] = 0;
  return rgk_sprintf("scan{lambda %s: %s%s}", params, body, layout_text(&s));
}
