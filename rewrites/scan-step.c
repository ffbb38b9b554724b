/*
 * scan-step.c — a Scan as a term of the relational language, and the
 * helper relations rule files write their own loop rules with.
 *
 * The term.  (scan-term K LAYOUT N-STEPS OUTER STEP) stands for output K
 * of a Scan node:
 *
 *   LAYOUT   the kinds of its inputs and outputs, as a list of fields
 *            ((seqs TAPS ...) (mit-mots (IN-TAPS OUT-TAPS) ...)
 *             (mit-sots TAPS ...) (sit-sots N) (nit-sots N) (non-seqs N)
 *             (until B) (go-backwards B) (truncate-gradient N)
 *             (store-steps N ...)), TAPS a list of integers;
 *   N-STEPS  the outer n_steps;
 *   OUTER    the other outer inputs in the layout's order (sequences,
 *            mit-mot buffers, mit-sot and sit-sot initial values, nit-sot
 *            lengths, non-sequences), graph terms;
 *   STEP     the step's outputs in the inner graph's order (mit-mot
 *            outputs, mit-sot, sit-sot, nit-sot, then the until
 *            condition), as expressions (op arg ...) over constants and
 *            leaves naming the inner inputs:
 *              (inner-seq K TAP) (inner-mit-mot K TAP) (inner-mit-sot K TAP)
 *              (inner-sit-sot K) (inner-nonseq K)
 *            K counts the inputs of one kind from 0, TAP is the tap's
 *            value (a slice x[t + TAP], a state of step t + TAP).
 *
 * A value shared inside the step is one term shared by its users (a DAG
 * of terms), so the term is the size of the step.
 *
 * (scan-termo S T) relates a Scan output S to its term T.  With S a Scan
 * output it gives T; with S unbound and T a scan-term it builds the Scan:
 * inner inputs are made with the types the outer inputs give them (a
 * sequence's row, a state's value, a non-sequence's type), the step is
 * evaluated over them, and the op is made by rg_op_scan, which checks the
 * layout against the step.  A term that does not describe a well-typed
 * Scan (a leaf out of range, a step output whose type differs from its
 * state's, an outer variable used inside the step) makes the relation
 * fail: a rule never produces an ill-typed Scan.
 *
 * Helpers (each projecting: it reads the values its arguments have when
 * called, and fails when those it reads are unbound):
 *
 *   (inner-subtermo T SUB)       SUB is each compound subterm of T's step
 *                                outputs, outermost first, once each
 *   (inner-freeo X LEAVES)       LEAVES: the distinct inner-input leaves of
 *                                the term X, in order of first occurrence
 *   (inner-replaceo T OLD NEW T2)  T2 is T with every occurrence of OLD in
 *                                its step replaced by NEW
 *   (scan-inputo T KIND LEAF V)  each outer input of KIND (seq or nonseq)
 *                                of T: its leaf and its outer value
 *   (scan-add-inputo T KIND V T2 LEAF)  T2 is T with an outer input of
 *                                KIND (seq: tap 0, after the sequences;
 *                                nonseq: after the non-sequences) whose
 *                                value is V; LEAF is its inner leaf
 *   (scan-drop-inputo T LEAF T2) T2 is T without the input LEAF (a
 *                                one-tap sequence or a non-sequence) that
 *                                its step does not read; the later leaves
 *                                of its kind are renumbered
 *   (inner-outero T SUB V)       V is SUB computed outside the loop: its
 *                                non-sequence leaves are their outer
 *                                values, its one-tap sequence leaves the
 *                                whole sequences (then SUB must be
 *                                elementwise above them, or dot(slice,
 *                                matrix computed outside), the sequences
 *                                the same or of one static length); fails
 *                                on state leaves
 *   (inner-innero T V SUB)       SUB is the outer value V computed inside
 *                                the step: V's graph, its top node at
 *                                least, down to T's outer non-sequences
 *                                (leaves) and constants, through pure
 *                                ops; fails if V reads any other input
 *
 * Invariant: every scan-term this file makes is ground, and its leaves
 * are in range of its layout.
 */
#include "rewrites/scan-rw.h"
#include "relgraph/scan.h"

#include <string.h>

typedef rg_variable *V;

/* ------------------------------------------------------------------ small terms */

static rg_term sym(const char *s) { return rg_symbol(s); }

static rg_term pair2(rg_term a, rg_term b) {
  rg_term t[2] = {a, b};
  return rg_list(2, t);
}

static rg_term ints_term(int n, const int64_t *v) {
  rg_term l = RG_NIL;
  for (int i = n - 1; i >= 0; i--) l = rg_cons(rg_int(v[i]), l);
  return l;
}

/* t as a list: etuples as their elements, other terms as they are. */
static rg_term as_list(rg_term t) { return rg_kind_of(t) == RG_K_ETUPLE ? rg_etuple_list(t) : t; }

static bool is_sym(rg_term t, const char *name) {
  return rg_kind_of(t) == RG_K_SYMBOL && !strcmp(rg_symbol_name(t), name);
}

/* Item i of a proper list, or NULL. */
static rg_term nth_item(rg_term l, int i) {
  for (l = as_list(l); rg_is_pair(l); l = as_list(rg_cdr(l)), i--)
    if (!i) return rg_car(l);
  return NULL;
}

static bool int_of(rg_term t, int64_t *v) {
  if (!t || rg_kind_of(t) != RG_K_INT) return false;
  *v = rg_int_value(t);
  return true;
}

/* A proper list of integers into a collected array. */
static bool ints_of(rg_term l, int *n, int64_t **v) {
  int64_t len = rg_list_length(as_list(l));
  if (len < 0 || len > 1 << 16) return false;
  *n = (int)len;
  *v = rg_gc_alloc(sizeof **v * (size_t)(len + 1));
  for (int i = 0; i < len; i++)
    if (!int_of(nth_item(l, i), &(*v)[i])) return false;
  return true;
}

/* ------------------------------------------------------------------ the layout */

static rg_term field(const char *name, rg_term rest) { return rg_cons(sym(name), rest); }

static rg_term taps_list(int n, const int *ntaps, const int64_t *const *taps) {
  rg_term l = RG_NIL;
  for (int i = n - 1; i >= 0; i--) l = rg_cons(ints_term(ntaps[i], taps[i]), l);
  return l;
}

/* The layout of s with `names` (a list of the inner inputs' names, #f
 * for none) as its last field. */
static rg_term layout_term(const rg_scan_info *s, rg_term names) {
  rg_term mm = RG_NIL;
  for (int i = s->n_mit_mot - 1; i >= 0; i--)
    mm = rg_cons(pair2(ints_term(s->mit_mot_nin[i], s->mit_mot_in_taps[i]),
                       ints_term(s->mit_mot_nout[i], s->mit_mot_out_taps[i])), mm);
  int nstore = s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
  rg_term f[11] = {
      field("seqs", taps_list(s->n_seqs, s->seq_ntaps, s->seq_taps)),
      field("mit-mots", mm),
      field("mit-sots", taps_list(s->n_mit_sot, s->mit_sot_ntaps, s->mit_sot_taps)),
      pair2(sym("sit-sots"), rg_int(s->n_sit_sot)),
      pair2(sym("nit-sots"), rg_int(s->n_nit_sot)),
      pair2(sym("non-seqs"), rg_int(s->n_non_seqs)),
      pair2(sym("until"), rg_bool(s->until)),
      pair2(sym("go-backwards"), rg_bool(s->go_backwards)),
      pair2(sym("truncate-gradient"), rg_int(s->truncate_gradient)),
      field("store-steps", ints_term(nstore, s->store_steps)),
      field("names", names),
  };
  return rg_list(11, f);
}

/* The rest of the field `name` of a layout term (after its name), or NULL. */
static rg_term field_of(rg_term layout, const char *name) {
  for (rg_term l = as_list(layout); rg_is_pair(l); l = as_list(rg_cdr(l))) {
    rg_term f = as_list(rg_car(l));
    if (rg_is_pair(f) && is_sym(rg_car(f), name)) return as_list(rg_cdr(f));
  }
  return NULL;
}

static bool count_field(rg_term layout, const char *name, int *n) {
  int64_t v;
  rg_term f = field_of(layout, name);
  if (!f || !rg_is_pair(f) || !int_of(rg_car(f), &v) || v < 0 || v > 1 << 16) return false;
  *n = (int)v;
  return true;
}

static bool bool_field(rg_term layout, const char *name, bool *b) {
  rg_term f = field_of(layout, name);
  if (!f || !rg_is_pair(f) || (rg_car(f) != RG_TRUE && rg_car(f) != RG_FALSE)) return false;
  *b = rg_car(f) == RG_TRUE;
  return true;
}

/* A field holding one tap list per variable. */
static bool taps_field(rg_term layout, const char *name, int *n, int **ntaps, const int64_t *const **taps) {
  rg_term f = field_of(layout, name);
  int64_t len = f ? rg_list_length(f) : -1;
  if (len < 0 || len > 1 << 16) return false;
  int *nt = rg_gc_alloc(sizeof *nt * (size_t)(len + 1));
  int64_t **tp = rg_gc_alloc(sizeof *tp * (size_t)(len + 1));
  for (int i = 0; i < len; i++)
    if (!ints_of(nth_item(f, i), &nt[i], &tp[i])) return false;
  *n = (int)len, *ntaps = nt, *taps = (const int64_t *const *)tp;
  return true;
}

static bool mit_mot_field(rg_term layout, rg_scan_info *s) {
  rg_term f = field_of(layout, "mit-mots");
  int64_t len = f ? rg_list_length(f) : -1;
  if (len < 0 || len > 1 << 16) return false;
  int *nin = rg_gc_alloc(sizeof(int) * (size_t)(len + 1)), *nout = rg_gc_alloc(sizeof(int) * (size_t)(len + 1));
  int64_t **in = rg_gc_alloc(sizeof(int64_t *) * (size_t)(len + 1));
  int64_t **out = rg_gc_alloc(sizeof(int64_t *) * (size_t)(len + 1));
  for (int i = 0; i < len; i++) {
    rg_term m = nth_item(f, i);
    if (rg_list_length(as_list(m)) != 2 || !ints_of(nth_item(m, 0), &nin[i], &in[i]) ||
        !ints_of(nth_item(m, 1), &nout[i], &out[i]))
      return false;
  }
  s->n_mit_mot = (int)len, s->mit_mot_nin = nin, s->mit_mot_nout = nout;
  s->mit_mot_in_taps = (const int64_t *const *)in, s->mit_mot_out_taps = (const int64_t *const *)out;
  return true;
}

/* A layout term into s (arrays in collected memory); false when malformed
 * (rg_op_scan checks the rest). */
static bool layout_of(rg_term layout, rg_scan_info *s) {
  memset(s, 0, sizeof *s);
  int nstore;
  int64_t *store;
  rg_term tg = field_of(layout, "truncate-gradient"), st = field_of(layout, "store-steps");
  if (!taps_field(layout, "seqs", &s->n_seqs, (int **)&s->seq_ntaps, &s->seq_taps) || !mit_mot_field(layout, s) ||
      !taps_field(layout, "mit-sots", &s->n_mit_sot, (int **)&s->mit_sot_ntaps, &s->mit_sot_taps) ||
      !count_field(layout, "sit-sots", &s->n_sit_sot) || !count_field(layout, "nit-sots", &s->n_nit_sot) ||
      !count_field(layout, "non-seqs", &s->n_non_seqs) || !bool_field(layout, "until", &s->until) ||
      !bool_field(layout, "go-backwards", &s->go_backwards) || !tg || !rg_is_pair(tg) ||
      !int_of(rg_car(tg), &s->truncate_gradient) || !st || !ints_of(st, &nstore, &store))
    return false;
  s->store_steps = store;
  return nstore == s->n_mit_sot + s->n_sit_sot + s->n_nit_sot;
}

/* ------------------------------------------------------------------ leaves */

static const struct { const char *name; rg_scan_kind kind; bool tap; } leaf_kinds[] = {
    {"inner-seq", RG_SCAN_SEQ, true},         {"inner-mit-mot", RG_SCAN_MIT_MOT, true},
    {"inner-mit-sot", RG_SCAN_MIT_SOT, true}, {"inner-sit-sot", RG_SCAN_SIT_SOT, false},
    {"inner-nonseq", RG_SCAN_NON_SEQ, false},
};

/* The taps of variable k of a kind (input taps of a mit-mot). */
static int taps_of(const rg_scan_info *s, rg_scan_kind kind, int k, const int64_t **taps) {
  static const int64_t minus_one = -1, zero = 0;
  switch (kind) {
  case RG_SCAN_SEQ: *taps = s->seq_taps[k]; return s->seq_ntaps[k];
  case RG_SCAN_MIT_MOT: *taps = s->mit_mot_in_taps[k]; return s->mit_mot_nin[k];
  case RG_SCAN_MIT_SOT: *taps = s->mit_sot_taps[k]; return s->mit_sot_ntaps[k];
  case RG_SCAN_SIT_SOT: *taps = &minus_one; return 1;
  default: *taps = &zero; return 1;
  }
}

static rg_term leaf_term(rg_scan_kind kind, int k, int64_t tap) {
  for (size_t i = 0; i < sizeof leaf_kinds / sizeof *leaf_kinds; i++)
    if (leaf_kinds[i].kind == kind) {
      rg_term t[3] = {sym(leaf_kinds[i].name), rg_int(k), rg_int(tap)};
      return rg_list(leaf_kinds[i].tap ? 3 : 2, t);
    }
  return NULL;
}

/* Whether t has the form of a leaf (whatever its numbers). */
static bool is_leaf(rg_term t) {
  t = as_list(t);
  if (!rg_is_pair(t) || rg_kind_of(rg_car(t)) != RG_K_SYMBOL) return false;
  for (size_t i = 0; i < sizeof leaf_kinds / sizeof *leaf_kinds; i++)
    if (is_sym(rg_car(t), leaf_kinds[i].name)) return true;
  return false;
}

/* The inner input a leaf names in layout s: its index, kind, k and tap
 * index; -1 when t is not a leaf in range. */
static int leaf_index(const rg_scan_info *s, rg_term t, rg_scan_kind *kind, int *kp, int *jp) {
  t = as_list(t);
  if (!is_leaf(t)) return -1;
  for (size_t i = 0; i < sizeof leaf_kinds / sizeof *leaf_kinds; i++) {
    if (!is_sym(rg_car(t), leaf_kinds[i].name)) continue;
    int64_t k, tap = leaf_kinds[i].kind == RG_SCAN_SIT_SOT ? -1 : 0;
    if (rg_list_length(t) != (leaf_kinds[i].tap ? 3 : 2) || !int_of(nth_item(t, 1), &k) ||
        (leaf_kinds[i].tap && !int_of(nth_item(t, 2), &tap)))
      return -1;
    rg_scan_kind kd = leaf_kinds[i].kind;
    if (k < 0 || k >= rg_scan_count(s, kd)) return -1;
    const int64_t *taps;
    int n = taps_of(s, kd, (int)k, &taps);
    for (int j = 0; j < n; j++)
      if (taps[j] == tap) {
        if (kind) *kind = kd, *kp = (int)k, *jp = j;
        return rg_scan_inner_in(s, kd, (int)k, j);
      }
  }
  return -1;
}

/* ------------------------------------------------------------------ a Scan as a term */

typedef struct to_term {
  const rg_fgraph *g;
  rg_term *leaf;  /* per inner input */
  rg_memo *memo;  /* inner variable or node -> term */
} to_term;

static rg_term value_term(to_term *c, V v);

/* The etuple of a node, shared by its outputs. */
static rg_term node_term(to_term *c, const rg_node *n) {
  rg_term e = rg_memo_get(c->memo, n);
  if (e) return e;
  rg_term *args = rg_gc_alloc(sizeof *args * (size_t)(n->nin + 1));
  for (int i = 0; i < n->nin; i++) args[i] = value_term(c, n->inputs[i]);
  e = rg_etuple(rg_op_term(n->op), n->nin, args);
  rg_memo_put(c->memo, n, e);
  return e;
}

static rg_term value_term(to_term *c, V v) {
  rg_term t = rg_memo_get(c->memo, v);
  if (t) return t;
  if (!v->owner) {
    for (int i = 0; i < rg_fgraph_ninputs(c->g); i++)
      if (rg_fgraph_input(c->g, i) == v) return c->leaf[i];
    return rg_var_term(v); /* a constant */
  }
  t = node_term(c, v->owner);
  if (v->owner->nout > 1) {
    rg_term nth[2] = {rg_int(v->index), t};
    t = rg_etuple(sym("nth"), 2, nth);
  }
  rg_memo_put(c->memo, v, t);
  return t;
}

/* The leaves of every inner input of layout s, in the inner graph's order. */
static rg_term *leaves_of(const rg_scan_info *s) {
  rg_term *leaf = rg_gc_alloc(sizeof *leaf * (size_t)(rg_scan_n_inner_in(s) + 1));
  static const rg_scan_kind kinds[] = {RG_SCAN_SEQ, RG_SCAN_MIT_MOT, RG_SCAN_MIT_SOT, RG_SCAN_SIT_SOT,
                                       RG_SCAN_NON_SEQ};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    for (int k = 0; k < rg_scan_count(s, kinds[i]); k++) {
      const int64_t *taps;
      int n = taps_of(s, kinds[i], k, &taps);
      for (int j = 0; j < n; j++) leaf[rg_scan_inner_in(s, kinds[i], k, j)] = leaf_term(kinds[i], k, taps[j]);
    }
  return leaf;
}

/* The scan-term of output `out` of a Scan node. */
static rg_term scan_term(V out) {
  const rg_node *n = out->owner;
  rg_scan_info s;
  if (!rg_scan_info_of(n->op, &s)) return NULL;
  to_term c = {.g = rg_op_inner_graph(n->op), .leaf = leaves_of(&s), .memo = rg_memo_new()};
  rg_term outer = RG_NIL, step = RG_NIL;
  for (int i = n->nin - 1; i >= 1; i--) outer = rg_cons(rg_var_term(n->inputs[i]), outer);
  for (int o = rg_fgraph_noutputs(c.g) - 1; o >= 0; o--) step = rg_cons(value_term(&c, rg_fgraph_output(c.g, o)), step);
  rg_term names = RG_NIL;
  for (int i = rg_fgraph_ninputs(c.g) - 1; i >= 0; i--) {
    const char *name = rg_fgraph_input(c.g, i)->name;
    names = rg_cons(name ? rg_string(name) : RG_FALSE, names);
  }
  rg_term t[6] = {sym("scan-term"), rg_int(out->index), layout_term(&s, names), rg_var_term(n->inputs[0]), outer,
                  step};
  return rg_list(6, t);
}

/* The parts of a scan-term. */
typedef struct sterm { int64_t k; rg_term layout, n_steps, outer, step; rg_scan_info s; } sterm;

static bool sterm_of(rg_term t, sterm *st) {
  t = as_list(t);
  if (rg_list_length(t) != 6 || !is_sym(rg_car(t), "scan-term") || !int_of(nth_item(t, 1), &st->k)) return false;
  st->layout = nth_item(t, 2), st->n_steps = nth_item(t, 3);
  st->outer = as_list(nth_item(t, 4)), st->step = as_list(nth_item(t, 5));
  return layout_of(st->layout, &st->s) && rg_list_length(st->outer) == rg_scan_n_outer_in(&st->s) - 1 &&
         rg_list_length(st->step) == rg_scan_n_inner_out(&st->s);
}

static rg_term sterm_make(const sterm *st, rg_term layout, rg_term outer, rg_term step) {
  rg_term t[6] = {sym("scan-term"), rg_int(st->k), layout ? layout : st->layout, st->n_steps,
                  outer ? outer : st->outer, step ? step : st->step};
  return rg_list(6, t);
}

/* ------------------------------------------------------------------ a term as a Scan */

typedef struct build {
  rg_ctx *C;
  const rg_scan_info *s;
  V *in;         /* the inner inputs */
  rg_memo *memo; /* term -> its value (a variable) */
  rg_memo *nodes; /* expression term of several outputs -> its node (one node for every (nth K X) of one X) */
} build;

static const rg_type *row_of(const rg_type *t) {
  return t->ndim < 1 ? NULL : rg_type_on_device(rg_type_new(t->dtype, t->ndim - 1, t->shape + 1), t->device);
}

/* A graph variable from an outer term (a graph term, a number or an
 * expression), or NULL with an error in C. */
static V outer_value(rg_ctx *C, rg_term t) {
  V v = rg_term_var(t);
  return v ? v : rg_graph_eval(C, t);
}

static rg_node *step_node(build *b, rg_term t);

/* A step value: a leaf, a constant, a number or an expression. */
static V step_value(build *b, rg_term t) {
  V v = rg_term_var(t);
  if (v) {
    if (rg_is_constant(v)) return v;
    rg_error(b->C, RG_ERR_TYPE, "a step uses %s, which is not an inner input or a constant", rg_to_string(t));
    return NULL;
  }
  rg_term l = as_list(t);
  if (!rg_is_pair(l)) return rg_term_to_variable(b->C, t);
  if (is_leaf(l)) {
    int i = leaf_index(b->s, l, NULL, NULL, NULL);
    if (i < 0) rg_error(b->C, RG_ERR_TYPE, "%s names no inner input of the layout", rg_to_string(t));
    return i < 0 ? NULL : b->in[i];
  }
  if ((v = rg_memo_get(b->memo, t))) return v;
  int64_t k;
  if (is_sym(rg_car(l), "nth")) {
    rg_node *n = NULL;
    if (rg_list_length(l) == 3 && int_of(nth_item(l, 1), &k)) {
      rg_term x = nth_item(l, 2);
      if (!(n = rg_memo_get(b->nodes, x)) && (n = step_node(b, x))) rg_memo_put(b->nodes, x, n);
    }
    v = n && k >= 0 && k < n->nout ? n->outputs[k] : NULL;
    if (n && !v) rg_error(b->C, RG_ERR_TYPE, "%s: no such output", rg_to_string(t));
  } else {
    rg_node *n = step_node(b, t);
    v = n && n->nout == 1 ? n->outputs[0] : NULL;
    if (n && !v) rg_error(b->C, RG_ERR_TYPE, "%s has several outputs; pick one with (nth K ...)", rg_to_string(t));
  }
  if (v) rg_memo_put(b->memo, t, v);
  return v;
}

/* The node of an expression (op arg ...) in the step. */
static rg_node *step_node(build *b, rg_term t) {
  rg_term l = as_list(t);
  if (!rg_is_pair(l) || is_leaf(l)) {
    rg_error(b->C, RG_ERR_TYPE, "%s is not an expression", rg_to_string(t));
    return NULL;
  }
  const rg_op *op = rg_op_from_term(b->C, rg_car(l));
  int64_t n = rg_list_length(l) - 1;
  if (!op || n < 0) return NULL;
  V *args = rg_gc_alloc(sizeof(V) * (size_t)(n + 1));
  for (int i = 0; i < n; i++)
    if (!(args[i] = step_value(b, nth_item(l, i + 1)))) return NULL;
  return rg_make_node(b->C, op, (int)n, args);
}

/* The type of the inner input of a kind for outer value x. */
static const rg_type *inner_type(rg_scan_kind kind, V x) {
  return kind == RG_SCAN_SIT_SOT || kind == RG_SCAN_NON_SEQ ? x->type : row_of(x->type);
}

/* Builds the Scan a scan-term describes and returns output K; NULL with an
 * error in C when the term is not a well-typed Scan. */
static V build_scan(rg_ctx *C, rg_term t) {
  sterm st;
  if (!sterm_of(t, &st)) {
    rg_error(C, RG_ERR_TYPE, "not a scan-term with a valid layout");
    return NULL;
  }
  const rg_scan_info *s = &st.s;
  int nouter = rg_scan_n_outer_in(s), nin = rg_scan_n_inner_in(s), nout = rg_scan_n_inner_out(s);
  V *outer = rg_gc_alloc(sizeof(V) * (size_t)(nouter + 1)), *in = rg_gc_alloc(sizeof(V) * (size_t)(nin + 1));
  V *outs = rg_gc_alloc(sizeof(V) * (size_t)(nout + 1));
  if (!(outer[0] = outer_value(C, st.n_steps))) return NULL;
  for (int i = 1; i < nouter; i++)
    if (!(outer[i] = outer_value(C, nth_item(st.outer, i - 1)))) return NULL;
  static const rg_scan_kind kinds[] = {RG_SCAN_SEQ, RG_SCAN_MIT_MOT, RG_SCAN_MIT_SOT, RG_SCAN_SIT_SOT,
                                       RG_SCAN_NON_SEQ};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    for (int k = 0; k < rg_scan_count(s, kinds[i]); k++) {
      const int64_t *taps;
      V x = outer[rg_scan_outer_in(s, kinds[i], k)];
      const rg_type *ty = inner_type(kinds[i], x);
      if (!ty) {
        rg_error(C, RG_ERR_TYPE, "%s %d is a scalar: it has no rows", kinds[i] == RG_SCAN_SEQ ? "sequence" : "state", k);
        return NULL;
      }
      for (int j = 0; j < taps_of(s, kinds[i], k, &taps); j++)
        in[rg_scan_inner_in(s, kinds[i], k, j)] = rg_input(C, x->name, ty);
    }
  rg_term names = field_of(st.layout, "names");
  for (int i = 0; names && rg_list_length(names) == nin && i < nin; i++) {
    rg_term name = nth_item(names, i);
    rg_set_name(in[i], rg_kind_of(name) == RG_K_STRING ? rg_string_value(name) : NULL);
  }
  build b = {.C = C, .s = s, .in = in, .memo = rg_memo_new(), .nodes = rg_memo_new()};
  for (int o = 0; o < nout; o++)
    if (!(outs[o] = step_value(&b, nth_item(st.step, o)))) return NULL;
  rg_fgraph *g = rg_fgraph_new(C, nin, in, nout, outs, RG_FG_CLONE);
  const rg_op *op = g ? rg_op_scan(C, s, g) : NULL;
  rg_node *n = op ? rg_make_node(C, op, nouter, outer) : NULL;
  if (n && (st.k < 0 || st.k >= n->nout)) {
    rg_error(C, RG_ERR_TYPE, "the Scan has no output %lld", (long long)st.k);
    return NULL;
  }
  return n ? n->outputs[st.k] : NULL;
}

/* ------------------------------------------------------------------ term walks */

/* Calls fn on each distinct (by identity) subterm of t, outermost first;
 * fn returns false to skip a subterm's parts. */
typedef bool (*visit_fn)(rg_term t, void *ud);

static void visit(rg_term t, visit_fn fn, void *ud, rg_memo *seen) {
  if (!rg_is_pair(as_list(t)) || rg_memo_get(seen, t)) return;
  rg_memo_put(seen, t, t);
  if (!fn(t, ud) || is_leaf(t)) return;
  for (rg_term l = rg_cdr(as_list(t)); rg_is_pair(l); l = rg_cdr(l)) visit(rg_car(l), fn, ud, seen);
}

/* t with fn(t) in place of each subterm fn maps (NULL: keep and go in),
 * sharing kept: one copy per distinct subterm. */
typedef rg_term (*map_fn)(rg_term t, void *ud);

static rg_term map_term(rg_term t, map_fn fn, void *ud, rg_memo *memo) {
  rg_term r = fn(t, ud);
  if (r) return r;
  rg_term l = as_list(t);
  if (!rg_is_pair(l) || is_leaf(l)) return t;
  if ((r = rg_memo_get(memo, t))) return r;
  int64_t n = rg_list_length(l);
  if (n < 1) return t;
  rg_term *items = rg_gc_alloc(sizeof *items * (size_t)n);
  bool same = true;
  for (int64_t i = 0; i < n; i++, l = rg_cdr(l)) {
    items[i] = i ? map_term(rg_car(l), fn, ud, memo) : rg_car(l);
    same = same && items[i] == rg_car(l);
  }
  r = same ? t : rg_etuple(items[0], (int)n - 1, items + 1);
  rg_memo_put(memo, t, r);
  return r;
}

static rg_term map_step(const sterm *st, map_fn fn, void *ud) {
  rg_memo *memo = rg_memo_new();
  int n = (int)rg_list_length(st->step);
  rg_term *items = rg_gc_alloc(sizeof *items * (size_t)(n + 1));
  for (int i = 0; i < n; i++) items[i] = map_term(nth_item(st->step, i), fn, ud, memo);
  return rg_list(n, items);
}

/* ------------------------------------------------------------------ the relations */

typedef struct tlist { rg_term *v; int n, cap; } tlist;

static void tl_add(tlist *l, rg_term t) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    rg_term *w = rg_gc_alloc(sizeof *w * (size_t)cap);
    if (l->n) memcpy(w, l->v, sizeof *w * (size_t)l->n);
    l->v = w, l->cap = cap;
  }
  l->v[l->n++] = t;
}

/* x unified with each of the items in turn. */
static rg_goal *each(rg_term x, const tlist *l) {
  rg_goal *g = rg_fail();
  for (int i = l->n - 1; i >= 0; i--) g = rg_disj2(rg_eq(x, l->v[i]), g);
  return g;
}

rg_variable *rgr_term_value(rg_ctx *C, rg_term t) {
  V v = rg_term_var(t);
  if (v || !(rg_is_etuple(t) || rg_is_pair(t))) return v;
  v = rg_graph_eval(C, t);
  rg_clear_error(C);
  return v;
}

static rg_goal *scan_termo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  if (!rg_is_var(args[0])) {
    V s = rgr_term_value(C, args[0]);
    return s && s->owner && s->owner->op->code == RG_OP_SCAN ? rg_eq(args[1], scan_term(s)) : rg_fail();
  }
  V out = build_scan(C, args[1]);
  if (!out) {
    rg_clear_error(C);
    return rg_fail();
  }
  return rg_eq(args[0], rg_var_term(out));
}

static bool add_compound(rg_term t, void *ud) {
  if (!is_leaf(t)) tl_add(ud, t);
  return true;
}

static rg_goal *subtermo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  sterm st;
  if (!sterm_of(args[0], &st)) return rg_fail();
  tlist subs = {0};
  rg_memo *seen = rg_memo_new();
  for (rg_term l = st.step; rg_is_pair(l); l = rg_cdr(l)) visit(rg_car(l), add_compound, &subs, seen);
  return each(args[1], &subs);
}

static bool add_leaf(rg_term t, void *ud) {
  tlist *l = ud;
  if (!is_leaf(t)) return true;
  for (int i = 0; i < l->n; i++)
    if (rg_equal(l->v[i], t)) return false;
  tl_add(l, t);
  return false;
}

static tlist free_leaves(rg_term t) {
  tlist leaves = {0};
  visit(t, add_leaf, &leaves, rg_memo_new());
  return leaves;
}

/* The leaves the step's outputs read. */
static tlist step_leaves(const sterm *st) {
  tlist leaves = {0};
  rg_memo *seen = rg_memo_new();
  for (rg_term l = st->step; rg_is_pair(l); l = rg_cdr(l)) visit(rg_car(l), add_leaf, &leaves, seen);
  return leaves;
}

static rg_goal *freeo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  tlist leaves = free_leaves(args[0]);
  return rg_eq(args[1], rg_list(leaves.n, leaves.v));
}

typedef struct swap { rg_term old, new; } swap;

static rg_term swap_one(rg_term t, void *ud) {
  swap *w = ud;
  return rg_equal(t, w->old) ? w->new : NULL;
}

static rg_goal *replaceo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  sterm st;
  if (!sterm_of(args[0], &st) || rg_is_var(args[1]) || rg_is_var(args[2])) return rg_fail();
  swap w = {args[1], args[2]};
  return rg_eq(args[3], sterm_make(&st, NULL, NULL, map_step(&st, swap_one, &w)));
}

static bool kind_arg(rg_term t, rg_scan_kind *kind) {
  if (is_sym(t, "seq")) return *kind = RG_SCAN_SEQ, true;
  if (is_sym(t, "nonseq")) return *kind = RG_SCAN_NON_SEQ, true;
  return false;
}

static rg_goal *inputo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  sterm st;
  rg_scan_kind kind;
  if (!sterm_of(args[0], &st) || !kind_arg(args[1], &kind)) return rg_fail();
  rg_goal *g = rg_fail();
  for (int k = rg_scan_count(&st.s, kind) - 1; k >= 0; k--) {
    const int64_t *taps;
    rg_term value = nth_item(st.outer, rg_scan_outer_in(&st.s, kind, k) - 1);
    for (int j = taps_of(&st.s, kind, k, &taps) - 1; j >= 0; j--)
      g = rg_disj2(rg_conj2(rg_eq(args[2], leaf_term(kind, k, taps[j])), rg_eq(args[3], value)), g);
  }
  return g;
}

/* The names of the layout with `name` inserted at inner position at, or
 * the one there removed (name NULL). */
static rg_term names_edit(const sterm *st, int at, rg_term name) {
  rg_term old = field_of(st->layout, "names");
  int64_t n = old ? rg_list_length(old) : -1;
  if (n != rg_scan_n_inner_in(&st->s)) return RG_NIL;
  rg_term *items = rg_gc_alloc(sizeof *items * (size_t)(n + 2));
  int m = 0;
  for (int i = 0; i <= n; i++) {
    if (i == at && name) items[m++] = name;
    if (i < n && !(i == at && !name)) items[m++] = nth_item(old, i);
  }
  return rg_list(m, items);
}

/* The inner inputs of the sequences: their taps in all. */
static int seq_taps_total(const rg_scan_info *s) {
  int n = 0;
  for (int k = 0; k < s->n_seqs; k++) n += s->seq_ntaps[k];
  return n;
}

/* The name of a new inner input: its outer value's, else its leaf's. */
static rg_term new_name(rg_scan_kind kind, int k, rg_term value) {
  V v = rg_term_var(value);
  char buf[64];
  if (v && v->name) snprintf(buf, sizeof buf, "%s%s", v->name, kind == RG_SCAN_SEQ ? "_t" : "");
  else snprintf(buf, sizeof buf, "%s%d", kind == RG_SCAN_SEQ ? "seq" : "nonseq", k);
  return rg_string(buf);
}

/* The layout with one more input of a kind (a tap-0 sequence or a
 * non-sequence, named `name`), as a term. */
static rg_term layout_plus(const sterm *st, rg_scan_kind kind, rg_term name) {
  rg_scan_info s = st->s;
  if (kind == RG_SCAN_NON_SEQ) s.n_non_seqs++;
  else {
    static const int64_t zero = 0;
    int *ntaps = rg_gc_alloc(sizeof(int) * (size_t)(s.n_seqs + 1));
    const int64_t **taps = rg_gc_alloc(sizeof(int64_t *) * (size_t)(s.n_seqs + 1));
    if (s.n_seqs) memcpy(ntaps, s.seq_ntaps, sizeof(int) * (size_t)s.n_seqs);
    if (s.n_seqs) memcpy(taps, s.seq_taps, sizeof(int64_t *) * (size_t)s.n_seqs);
    ntaps[s.n_seqs] = 1, taps[s.n_seqs] = &zero;
    s.seq_ntaps = ntaps, s.seq_taps = (const int64_t *const *)taps, s.n_seqs++;
  }
  int at = kind == RG_SCAN_SEQ ? seq_taps_total(&st->s) : rg_scan_n_inner_in(&st->s);
  return layout_term(&s, names_edit(st, at, name));
}

/* The outer list with `value` inserted at outer position `at` (n_steps is
 * position 0, so the list's index at - 1), or item at - 1 removed. */
static rg_term outer_edit(rg_term outer, int at, rg_term value) {
  int64_t n = rg_list_length(outer);
  rg_term *items = rg_gc_alloc(sizeof *items * (size_t)(n + 2));
  int m = 0;
  for (int i = 0; i <= n; i++) {
    if (i == at - 1 && value) items[m++] = value;
    if (i < n && !(i == at - 1 && !value)) items[m++] = nth_item(outer, i);
  }
  return rg_list(m, items);
}

static rg_goal *add_inputo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  sterm st;
  rg_scan_kind kind;
  if (!sterm_of(args[0], &st) || !kind_arg(args[1], &kind) || rg_is_var(args[2])) return rg_fail();
  int k = rg_scan_count(&st.s, kind);
  /* the new input goes after the last of its kind: where the next kind starts */
  int at = kind == RG_SCAN_NON_SEQ ? rg_scan_n_outer_in(&st.s) : 1 + st.s.n_seqs;
  rg_term name = new_name(kind, k, args[2]);
  rg_term t2 = sterm_make(&st, layout_plus(&st, kind, name), outer_edit(st.outer, at, args[2]), NULL);
  return rg_conj2(rg_eq(args[3], t2), rg_eq(args[4], leaf_term(kind, k, 0)));
}

typedef struct renumber { const rg_scan_info *s; rg_scan_kind kind; int k; } renumber;

/* A leaf of the dropped input's kind after it: one index lower. */
static rg_term renumber_one(rg_term t, void *ud) {
  renumber *r = ud;
  rg_scan_kind kind;
  int k, j;
  if (!is_leaf(t) || leaf_index(r->s, t, &kind, &k, &j) < 0 || kind != r->kind || k < r->k) return NULL;
  const int64_t *taps;
  taps_of(r->s, kind, k, &taps);
  return leaf_term(kind, k - 1, taps[j]);
}

/* The layout without input k of a kind (a one-tap sequence or a non-sequence). */
static rg_term layout_minus(const sterm *st, rg_scan_kind kind, int k) {
  rg_scan_info s = st->s;
  if (kind == RG_SCAN_NON_SEQ) s.n_non_seqs--;
  else {
    int *ntaps = rg_gc_alloc(sizeof(int) * (size_t)s.n_seqs);
    const int64_t **taps = rg_gc_alloc(sizeof(int64_t *) * (size_t)s.n_seqs);
    for (int i = 0, m = 0; i < s.n_seqs; i++)
      if (i != k) ntaps[m] = s.seq_ntaps[i], taps[m++] = s.seq_taps[i];
    s.seq_ntaps = ntaps, s.seq_taps = (const int64_t *const *)taps, s.n_seqs--;
  }
  return layout_term(&s, names_edit(st, rg_scan_inner_in(&st->s, kind, k, 0), NULL));
}

static rg_goal *drop_inputo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  sterm st;
  rg_scan_kind kind;
  int k, j;
  if (!sterm_of(args[0], &st) || leaf_index(&st.s, args[1], &kind, &k, &j) < 0) return rg_fail();
  if ((kind != RG_SCAN_SEQ || st.s.seq_ntaps[k] != 1) && kind != RG_SCAN_NON_SEQ) return rg_fail();
  tlist used = step_leaves(&st);
  for (int i = 0; i < used.n; i++)
    if (rg_equal(used.v[i], args[1])) return rg_fail();
  renumber r = {&st.s, kind, k + 1};
  rg_term step = map_step(&st, renumber_one, &r);
  rg_term outer = outer_edit(st.outer, rg_scan_outer_in(&st.s, kind, k), NULL);
  return rg_eq(args[2], sterm_make(&st, layout_minus(&st, kind, k), outer, step));
}

/* ------------------------------------------------------------------ inside and outside */

/* A step subterm computed outside: every value a variable, with a flag
 * when it has one row per step (it reads a sequence). */
typedef struct outside {
  rg_ctx *C;
  const sterm *st;
  rg_memo *memo, *per_step; /* term -> variable; variable -> itself when per step */
  int64_t rows;             /* the static length of the sequences read, or -1 */
  V seq;                    /* the first sequence read */
  bool ok;
} outside;

static V outside_value(outside *o, rg_term t);

static bool rows_agree(outside *o, V x) {
  if (!o->seq || o->seq == x) return o->seq = x, o->rows = x->type->shape[0], true;
  return x->type->shape[0] >= 0 && x->type->shape[0] == o->rows;
}

static V outside_leaf(outside *o, rg_term t) {
  rg_scan_kind kind;
  int k, j;
  if (leaf_index(&o->st->s, t, &kind, &k, &j) < 0) return NULL;
  V x = outer_value(o->C, nth_item(o->st->outer, rg_scan_outer_in(&o->st->s, kind, k) - 1));
  if (!x) return NULL;
  if (kind == RG_SCAN_NON_SEQ) return x;
  if (kind != RG_SCAN_SEQ || o->st->s.seq_ntaps[k] != 1 || !rows_agree(o, x)) return NULL;
  rg_memo_put(o->per_step, x, x);
  return x;
}

/* dot(slice, W), W a matrix computed outside: one product over every
 * step's rows. */
static V outside_dot(outside *o, int64_t n, V *args) {
  if (n != 2 || rg_memo_get(o->per_step, args[1]) || args[1]->type->ndim != 2) return NULL;
  V r = NULL;
  if (args[0]->type->ndim == 2) r = rg_dot(args[0], args[1]);
  else if (args[0]->type->ndim == 3) r = rgr_dot_rows(o->C, args[0], args[1]);
  if (r) rg_memo_put(o->per_step, r, r);
  return r;
}

/* An op over outside values; where some have a row per step, the op must
 * be elementwise and those are aligned so their time axis leads. */
static V outside_op(outside *o, rg_term l) {
  const rg_op *op = rg_op_from_term(o->C, rg_car(l));
  int64_t n = rg_list_length(l) - 1;
  if (!op || n < 0) return NULL;
  V *args = rg_gc_alloc(sizeof(V) * (size_t)(n + 1));
  int rank = 0;
  bool steps = false;
  for (int i = 0; i < n; i++) {
    if (!(args[i] = outside_value(o, nth_item(l, i + 1)))) return NULL;
    bool p = rg_memo_get(o->per_step, args[i]) != NULL;
    int r = args[i]->type->ndim - (p ? 1 : 0);
    rank = r > rank ? r : rank, steps = steps || p;
  }
  if (steps && op->code == RG_OP_DOT) return outside_dot(o, n, args);
  if (steps && rg_opcode_family(op->code) != RG_FAM_ELEMWISE) return NULL;
  for (int i = 0; steps && i < n; i++)
    if (rg_memo_get(o->per_step, args[i]) && !(args[i] = rgr_with_rank(args[i], rank))) return NULL;
  rg_node *m = rg_make_node(o->C, op, (int)n, args);
  if (!m || !rgr_pure_node(m)) return NULL;
  if (steps) rg_memo_put(o->per_step, m->outputs[0], m->outputs[0]);
  return m->outputs[0];
}

static V outside_value(outside *o, rg_term t) {
  V v = rg_term_var(t);
  if (v) return rg_is_constant(v) ? rgr_copy_const(o->C, v) : NULL;
  rg_term l = as_list(t);
  if (!rg_is_pair(l)) return rg_term_to_variable(o->C, t);
  if (is_leaf(l)) return outside_leaf(o, l);
  if ((v = rg_memo_get(o->memo, t))) return v;
  if (is_sym(rg_car(l), "nth")) return NULL; /* ops of several outputs are not moved */
  if ((v = outside_op(o, l))) rg_memo_put(o->memo, t, v);
  return v;
}

/* Whether t reaches sub along a path that enters no ifelse branch (an
 * ifelse is entered through its condition only): work the step needs
 * whichever branch is taken, which may leave the loop (rewrites/guards.c
 * for graphs). */
static bool reaches_unguarded(rg_term t, rg_term sub, rg_memo *seen) {
  if (t == sub || rg_equal(t, sub)) return true;
  rg_term l = as_list(t);
  if (!rg_is_pair(l) || is_leaf(l) || rg_memo_get(seen, t)) return false;
  rg_memo_put(seen, t, t);
  bool ifelse = is_sym(rg_car(l), "ifelse");
  int i = 0;
  for (rg_term a = rg_cdr(l); rg_is_pair(a) && !(ifelse && i > 0); a = rg_cdr(a), i++)
    if (reaches_unguarded(rg_car(a), sub, seen)) return true;
  return false;
}

static bool needed_always(const sterm *st, rg_term sub) {
  rg_memo *seen = rg_memo_new();
  for (rg_term l = st->step; rg_is_pair(l); l = rg_cdr(l))
    if (reaches_unguarded(rg_car(l), sub, seen)) return true;
  return false;
}

static rg_goal *outero(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  sterm st;
  if (!sterm_of(args[0], &st) || !needed_always(&st, args[1])) return rg_fail();
  outside o = {.C = C, .st = &st, .memo = rg_memo_new(), .per_step = rg_memo_new(), .rows = -1};
  V v = outside_value(&o, args[1]);
  rg_clear_error(C);
  return v ? rg_eq(args[2], rg_var_term(v)) : rg_fail();
}

/* An outer value as a step term over the non-sequence leaves of st. */
typedef struct inside { const sterm *st; rg_memo *memo; } inside;

static rg_term inside_term(inside *in, V v, bool root) {
  for (int k = 0; !root && k < in->st->s.n_non_seqs; k++)
    if (rg_term_var(nth_item(in->st->outer, rg_scan_outer_in(&in->st->s, RG_SCAN_NON_SEQ, k) - 1)) == v)
      return leaf_term(RG_SCAN_NON_SEQ, k, 0);
  if (rg_is_constant(v)) return rg_var_term(v);
  if (!v->owner || !rgr_pure_node(v->owner)) return NULL;
  rg_term t = rg_memo_get(in->memo, v);
  if (t) return t;
  const rg_node *n = v->owner;
  rg_term *args = rg_gc_alloc(sizeof *args * (size_t)(n->nin + 1));
  for (int i = 0; i < n->nin; i++)
    if (!(args[i] = inside_term(in, n->inputs[i], false))) return NULL;
  t = rg_etuple(rg_op_term(n->op), n->nin, args);
  rg_memo_put(in->memo, v, t);
  return t;
}

static rg_goal *innero(rg_ctx *C, const rg_term *args, void *ud) {
  (void)ud;
  sterm st;
  V v = rg_term_var(args[1]);
  if (!sterm_of(args[0], &st) || (!v && !(v = rg_graph_eval(C, args[1])))) {
    rg_clear_error(C);
    return rg_fail();
  }
  inside in = {&st, rg_memo_new()};
  rg_term t = inside_term(&in, v, true);
  return t ? rg_eq(args[2], t) : rg_fail();
}

void rgr_define_step_relations(rg_interp *I) {
  static const struct { const char *name; int arity; rg_relation_fn fn; } rels[] = {
      {"scan-termo", 2, scan_termo},     {"inner-subtermo", 2, subtermo},  {"inner-freeo", 2, freeo},
      {"inner-replaceo", 4, replaceo},   {"scan-inputo", 4, inputo},       {"scan-add-inputo", 5, add_inputo},
      {"scan-drop-inputo", 3, drop_inputo}, {"inner-outero", 3, outero},   {"inner-innero", 3, innero},
  };
  for (size_t i = 0; i < sizeof rels / sizeof *rels; i++)
    rg_interp_define(I, rels[i].name, rg_relation_projecting(rels[i].name, rels[i].arity, rels[i].fn, NULL));
}
