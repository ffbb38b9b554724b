/*
 * lang.c — rules written in the relational language: the `defrule` form
 * and rule sets.
 *
 *   (defrule NAME (IN OUT) GOAL ... OPTION ...)     a relational rule
 *   (defrule NAME (pattern FROM TO) OPTION ...)     a pattern rule
 *   (defrule NAME (subst OP1 OP2) OPTION ...)       op substitution
 *   (defrule NAME (remove OP) OPTION ...)           op removal
 * Options: :tags (T ...)  :tracks (OP ...)  :when GOAL (pattern rules; a
 * goal over the pattern variables)  :shared #t (allow rewriting through
 * intermediates with several clients).  See docs/rules.md.
 *
 * A relational rule's body is compiled as the relation (lambda (IN OUT)
 * GOAL ...); the ops it tracks are, unless :tracks says, the heads the
 * relation requires of IN (rg_relation_rule reads them, and reads them
 * again when a relation it calls is redefined), else all.
 *
 * Rule files also get relations over the types of graph terms, for guards
 * and relations that must not rewrite across types (a sum whose terms
 * broadcast, say): (typeo x t), (dtypeo x d), (ndimo x n).  They look at
 * the value x has when they are called; for a term whose type is not known
 * (not a graph variable or a number, or still unbound) they succeed
 * without binding anything, so relations can still be run to enumerate
 * the terms they rewrite.
 */
#include "rewrites/rewrite-impl.h"

#include <stdio.h>

typedef struct rule_entry { rg_rewriter *rw; const char *tags; } rule_entry;

struct rg_rule_set {
  rg_interp *I;
  rule_entry *v;
  int n, cap;
};

static rg_term sym(const char *s) { return rg_symbol(s); }

static int rule_err(rg_interp *I, rg_term form, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int rule_err(rg_interp *I, rg_term form, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *w = rg_interp_where(I, form);
  /* the rule's name, unless the message gives it already */
  rg_term name = rg_is_pair(form) && rg_is_pair(rg_cdr(form)) ? rg_car(rg_cdr(form)) : RG_NIL;
  const char *who = rg_kind_of(name) == RG_K_SYMBOL && strncmp(msg, "rule ", 5)
                        ? rgr_sprintf("rule %s: ", rg_symbol_name(name)) : "";
  return rg_error(rg_interp_ctx(I), code, "%s%s%s%s", w ? w : "", w ? ": " : "", who, msg);
}

/* ------------------------------------------------------------------ options */

typedef struct rule_opts {
  rg_term tags, tracks, when;
  bool has_when, has_shared;
  unsigned flags;
  rg_term body; /* the forms before the options */
} rule_opts;

static bool is_keyword(rg_term t) {
  return rg_kind_of(t) == RG_K_SYMBOL && rg_symbol_name(t)[0] == ':';
}

static int parse_opts(rg_interp *I, rg_term form, rg_term rest, rule_opts *o) {
  rg_term body = RG_NIL;
  memset(o, 0, sizeof *o);
  o->tags = o->tracks = RG_NIL;
  for (; rg_is_pair(rest); rest = rg_cdr(rest)) {
    rg_term x = rg_car(rest);
    if (!is_keyword(x)) {
      if (o->tags != RG_NIL || o->tracks != RG_NIL || o->has_when)
        return rule_err(I, form, RG_ERR_SYNTAX, "goals must come before the options");
      body = rg_cons(x, body);
      continue;
    }
    const char *k = rg_symbol_name(x);
    if (!rg_is_pair(rg_cdr(rest))) return rule_err(I, form, RG_ERR_SYNTAX, "%s needs a value", k);
    rg_term v = rg_car(rg_cdr(rest));
    rest = rg_cdr(rest);
    if ((!strcmp(k, ":tags") && o->tags != RG_NIL) || (!strcmp(k, ":tracks") && o->tracks != RG_NIL) ||
        (!strcmp(k, ":when") && o->has_when) || (!strcmp(k, ":shared") && o->has_shared))
      return rule_err(I, form, RG_ERR_SYNTAX, "%s given twice", k); /* the first would be lost */
    if (!strcmp(k, ":tags") || !strcmp(k, ":tracks")) {
      if (rg_list_length(v) < 0) return rule_err(I, form, RG_ERR_SYNTAX, "%s needs a list", k);
      for (rg_term l = v; rg_is_pair(l); l = rg_cdr(l))
        if (rg_kind_of(rg_car(l)) != RG_K_SYMBOL)
          return rule_err(I, form, RG_ERR_SYNTAX, "%s needs a list of symbols", k);
      if (k[2] == 'a') o->tags = v;
      else o->tracks = v;
    } else if (!strcmp(k, ":when")) {
      o->when = v;
      o->has_when = true;
    } else if (!strcmp(k, ":shared")) {
      if (v != RG_TRUE && v != RG_FALSE) return rule_err(I, form, RG_ERR_SYNTAX, ":shared needs #t or #f");
      o->has_shared = true;
      if (v == RG_TRUE) o->flags |= RG_RULE_SHARED_OK;
    } else {
      return rule_err(I, form, RG_ERR_SYNTAX, "unknown rule option %s", k);
    }
  }
  rg_term r = RG_NIL;
  for (; rg_is_pair(body); body = rg_cdr(body)) r = rg_cons(rg_car(body), r);
  o->body = r;
  return RG_OK;
}

static const char *tags_str(rg_term tags) {
  const char *s = "";
  for (rg_term l = tags; rg_is_pair(l); l = rg_cdr(l))
    s = rgr_sprintf("%s%s%s", s, *s ? " " : "", rg_symbol_name(rg_car(l)));
  return s;
}

static int apply_tracks(rg_interp *I, rg_term form, rg_rewriter *rw, rg_term tracks) {
  int n = (int)rg_list_length(tracks), k = 0;
  if (n <= 0) return RG_OK;
  rg_opcode codes[n];
  for (rg_term l = tracks; rg_is_pair(l); l = rg_cdr(l)) {
    int c = rg_opcode_from_name(rg_symbol_name(rg_car(l)));
    if (c < 0) {
      rg_rewriter_track_opaque(rw, rg_symbol_name(rg_car(l)));
      continue;
    }
    codes[k++] = (rg_opcode)c;
  }
  bool opaque = rw->nopaque > 0;
  const char **names = rw->opaque;
  int nopaque = rw->nopaque;
  rg_rewriter_set_tracks(rw, k, codes);
  if (opaque) {
    rw->opaque = names;
    rw->nopaque = nopaque;
    rw->track_all = false;
    rgr_track(rw, RG_OP_OPAQUE);
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ rule kinds */

/* The pattern variables (?x symbols) occurring in a form, deduplicated. */
static rg_term pattern_vars(rg_term t, rg_term acc) {
  if (rg_kind_of(t) == RG_K_SYMBOL) {
    const char *n = rg_symbol_name(t);
    if (n[0] != '?' || !n[1]) return acc;
    for (rg_term l = acc; rg_is_pair(l); l = rg_cdr(l))
      if (rg_car(l) == t) return acc;
    return rg_cons(t, acc);
  }
  if (!rg_is_pair(t)) return acc;
  return pattern_vars(rg_cdr(t), pattern_vars(rg_car(t), acc));
}

static rg_rewriter *pattern_rule(rg_interp *I, rg_term form, const char *name, rg_term spec,
                                 rule_opts *o) {
  rg_ctx *C = rg_interp_ctx(I);
  if (rg_list_length(spec) != 3) {
    rule_err(I, form, RG_ERR_SYNTAX, "pattern rule needs (pattern FROM TO)");
    return NULL;
  }
  rg_term guard = NULL, gvars = RG_NIL;
  if (o->has_when) {
    gvars = pattern_vars(o->when, RG_NIL);
    guard = rg_interp_lambda(I, rg_symbol(name), gvars, rg_cons(o->when, RG_NIL), form);
    if (!guard) return NULL;
  }
  rg_rewriter *rw = rg_pattern_rule(C, name, rg_car(rg_cdr(spec)), rg_car(rg_cdr(rg_cdr(spec))),
                                    guard, gvars, o->flags);
  if (!rw) rule_err(I, form, rg_errcode(C), "%s", rg_errmsg(C));
  return rw;
}

static const rg_op *op_named(rg_interp *I, rg_term form, rg_term t) {
  rg_ctx *C = rg_interp_ctx(I);
  const rg_op *op = rg_op_from_term(C, t);
  if (!op) rule_err(I, form, RG_ERR_NAME, "%s", rg_errmsg(C));
  return op;
}

static rg_rewriter *op_rule(rg_interp *I, rg_term form, const char *name, rg_term spec, bool subst) {
  int64_t n = rg_list_length(spec);
  if (n != (subst ? 3 : 2)) {
    rule_err(I, form, RG_ERR_SYNTAX, subst ? "needs (subst OP1 OP2)" : "needs (remove OP)");
    return NULL;
  }
  const rg_op *a = op_named(I, form, rg_car(rg_cdr(spec)));
  if (!a) return NULL;
  if (!subst) return rg_op_remove_rule(name, a);
  const rg_op *b = op_named(I, form, rg_car(rg_cdr(rg_cdr(spec))));
  return b ? rg_op_subst_rule(name, a, b) : NULL;
}

static rg_rewriter *relation_rule(rg_interp *I, rg_term form, const char *name, rg_term params,
                                  rule_opts *o) {
  rg_ctx *C = rg_interp_ctx(I);
  if (rg_list_length(params) != 2)
    return rule_err(I, form, RG_ERR_SYNTAX, "a relational rule needs two parameters (in out)"), NULL;
  if (o->body == RG_NIL) return rule_err(I, form, RG_ERR_SYNTAX, "it has no goal"), NULL;
  rg_term rel = rg_interp_lambda(I, rg_symbol(name), params, o->body, form);
  if (!rel) return NULL;
  rg_rewriter *rw = rg_relation_rule(C, name, rel, false, o->flags);
  if (!rw) return NULL;
  rw->rel_params = params;
  rw->rel_body = o->body;
  return rw;
}

/* ------------------------------------------------------------------ the form */

static int add_rule(rg_rule_set *rs, rg_rewriter *rw, const char *tags) {
  if (rs->n == rs->cap) {
    int cap = rs->cap ? 2 * rs->cap : 16;
    rule_entry *v = rg_gc_alloc((size_t)cap * sizeof *v);
    if (rs->n) memcpy(v, rs->v, (size_t)rs->n * sizeof *v);
    rs->v = v;
    rs->cap = cap;
  }
  for (int i = 0; i < rs->n; i++)
    if (!strcmp(rs->v[i].rw->name, rw->name)) {
      rs->v[i] = (rule_entry){rw, tags}; /* a later definition replaces */
      return RG_OK;
    }
  rs->v[rs->n++] = (rule_entry){rw, tags};
  return RG_OK;
}

static int defrule(rg_interp *I, rg_term form, void *ud) {
  rg_rule_set *rs = ud;
  if (rg_list_length(form) < 3 || rg_kind_of(rg_car(rg_cdr(form))) != RG_K_SYMBOL)
    return rule_err(I, form, RG_ERR_SYNTAX, "defrule needs a name and a rule: (defrule NAME (in out) goal ...)");
  const char *name = rg_symbol_name(rg_car(rg_cdr(form)));
  /* a name is a tag: one the query language reads as something else
   * (db.c: +T, -T, &T, DB:WORD, none) could not be selected */
  if (strchr("+-&", name[0]) || strchr(name, ':') || !strcmp(name, "none"))
    return rule_err(I, form, RG_ERR_SYNTAX, "a query could not name it (+, -, & begin query words, "
                    "':' names a database, 'none' selects nothing)");
  rg_term spec = rg_car(rg_cdr(rg_cdr(form)));
  rule_opts o;
  int rc = parse_opts(I, form, rg_cdr(rg_cdr(rg_cdr(form))), &o);
  if (rc) return rc;
  if (!rg_is_pair(spec)) return rule_err(I, form, RG_ERR_SYNTAX, "expected (in out), (pattern ...), (subst ...) or (remove ...)");
  rg_term head = rg_car(spec);
  if (head != sym("pattern") && (o.has_when || o.has_shared))
    return rule_err(I, form, RG_ERR_SYNTAX, "%s is an option of pattern rules%s",
                    o.has_when ? ":when" : ":shared",
                    o.has_when && head != sym("subst") && head != sym("remove")
                        ? " (a relational rule states its conditions as goals)" : "");
  rg_rewriter *rw;
  if (head == sym("pattern")) rw = pattern_rule(I, form, name, spec, &o);
  else if (head == sym("subst") || head == sym("remove")) rw = op_rule(I, form, name, spec, head == sym("subst"));
  else rw = relation_rule(I, form, name, spec, &o);
  if (!rw) return rg_errcode(rg_interp_ctx(I)) ? rg_errcode(rg_interp_ctx(I)) : RG_ERR;
  if (o.body != RG_NIL && (head == sym("pattern") || head == sym("subst") || head == sym("remove")))
    return rule_err(I, form, RG_ERR_SYNTAX, "unexpected forms after the rule");
  if (o.tracks != RG_NIL) apply_tracks(I, form, rw, o.tracks);
  return add_rule(rs, rw, tags_str(o.tags));
}

/* ------------------------------------------------------------------ type relations */

/* The type of a graph term or number; NULL when not known. */
static const rg_type *type_of(rg_term x) {
  rg_variable *v = rg_term_var(x);
  if (v) return v->type;
  switch (rg_kind_of(x)) {
  case RG_K_INT: return rg_type_scalar(RG_INT64);
  case RG_K_FLOAT: return rg_type_scalar(RG_FLOAT64);
  case RG_K_BOOL: return rg_type_scalar(RG_BOOL);
  default: return NULL;
  }
}

/* (DTYPE (SIZE ...)), ? for an unknown size: the graph file's notation
 * (rg_dtype_symbol(RG_NDTYPES) is the symbol ?). */
static rg_term type_term(const rg_type *t) {
  rg_term dims = RG_NIL;
  for (int d = t->ndim - 1; d >= 0; d--)
    dims = rg_cons(t->shape[d] < 0 ? rg_dtype_symbol(RG_NDTYPES) : rg_int(t->shape[d]), dims);
  return rg_cons(rg_dtype_symbol(t->dtype), rg_cons(dims, RG_NIL));
}

/* How a part of a term can meet a list: as a pair, as the empty list, as
 * some other atom (it cannot), or undecided (a variable, or an etuple or
 * foreign term, which unification may read as a list). */
enum { PART_PAIR, PART_NIL, PART_ATOM, PART_OPEN };
static int part_kind(rg_term x) {
  switch (rg_kind_of(x)) {
  case RG_K_PAIR: return PART_PAIR;
  case RG_K_NIL: return PART_NIL;
  case RG_K_VAR: case RG_K_ETUPLE: case RG_K_FOREIGN: return PART_OPEN;
  default: return PART_ATOM;
  }
}

/* Whether u (walked shallowly) is type_term(t), read without building it:
 * 1 yes, 0 no, -1 undecided (a variable, or a part not compared here).
 * Symbols are interned, so a different symbol is a different name. */
static int type_term_is(const rg_type *t, rg_term u) {
  static const int end[] = {[PART_PAIR] = 0, [PART_NIL] = 0, [PART_ATOM] = 0, [PART_OPEN] = -1};
  if (part_kind(u) != PART_PAIR) return end[part_kind(u)];
  rg_term d = rg_car(u), rest = rg_cdr(u);
  if (rg_kind_of(d) != RG_K_SYMBOL) return -1;
  if (d != rg_dtype_symbol(t->dtype)) return 0;
  if (part_kind(rest) != PART_PAIR) return end[part_kind(rest)];
  if (part_kind(rg_cdr(rest)) != PART_NIL) return end[part_kind(rg_cdr(rest))];
  rg_term dims = rg_car(rest);
  for (int k = 0; k < t->ndim; k++, dims = rg_cdr(dims)) {
    if (part_kind(dims) != PART_PAIR) return end[part_kind(dims)];
    rg_term s = rg_car(dims);
    rg_kind ks = rg_kind_of(s);
    if (ks != RG_K_SYMBOL && ks != RG_K_INT) return -1;
    if (t->shape[k] < 0 ? s != rg_dtype_symbol(RG_NDTYPES) : ks != RG_K_INT || rg_int_value(s) != t->shape[k])
      return 0;
  }
  return part_kind(dims) == PART_NIL ? 1 : end[part_kind(dims)];
}

/* (typeo x t), (dtypeo x d), (ndimo x n): t is x's type when x is a graph
 * term or a number; on any other term they succeed without a constraint.
 * Functional relations: no goal is built per call; typeo compares a type
 * already bound in place. */
static int typeo(rg_ctx *C, const rg_term *args, rg_term *out, void *ud) {
  const rg_type *t = type_of(args[0]);
  int known = t ? type_term_is(t, args[1]) : -1;
  *out = t && known < 0 ? type_term(t) : NULL;
  return known < 0 ? 1 : known;
}

static int dtypeo(rg_ctx *C, const rg_term *args, rg_term *out, void *ud) {
  const rg_type *t = type_of(args[0]);
  *out = t ? rg_dtype_symbol(t->dtype) : NULL;
  return 1;
}

static int ndimo(rg_ctx *C, const rg_term *args, rg_term *out, void *ud) {
  const rg_type *t = type_of(args[0]);
  *out = t ? rg_int(t->ndim) : NULL;
  return 1;
}

/* (sum-commutableo G C AXES): the sum of G over AXES, its leading axes
 * 0..k-1, commutes with an elementwise op whose other operand is C (or
 * with a unary op, C the empty list): G is float, C of its dtype, and C's
 * type, aligned on the right, fits G's dimensions after the k summed ones
 * without enlarging any (a size 1 of G meets a size 1 of C).  Then
 * op(sum(G), C) = sum(op(G, C)) up to rounding: C does not vary along
 * the summed axes.  Fails otherwise; succeeds without a constraint while
 * any argument is unbound (so the relation run with its input unknown
 * lists the terms it rewrites, which check-rules builds). */
static bool any_unbound(int n, const rg_term *args) {
  for (int i = 0; i < n; i++)
    if (rg_is_var(args[i])) return true;
  return false;
}

static rg_goal *sum_commutableo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  if (any_unbound(3, args)) return rg_succeed();
  const rg_type *g = type_of(args[0]), *c = args[1] == RG_NIL ? rg_type_scalar(g ? g->dtype : RG_FLOAT64)
                                                              : type_of(args[1]);
  int64_t k = rg_list_length(args[2]);
  if (!g || !c || !rg_term_var(args[0]) || k < 1 || k > g->ndim) return rg_fail();
  if (!rg_dtype_is_float(g->dtype) || c->dtype != g->dtype || c->ndim > g->ndim - k) return rg_fail();
  rg_term a = args[2];
  for (int64_t i = 0; i < k; i++, a = rg_cdr(a))
    if (rg_kind_of(rg_car(a)) != RG_K_INT || rg_int_value(rg_car(a)) != i) return rg_fail();
  for (int d = 0; d < c->ndim; d++) {
    int64_t cd = c->shape[d], gd = g->shape[g->ndim - c->ndim + d];
    if (cd == 1) continue;
    if (gd == 1 || (cd >= 0 && gd >= 0 && cd != gd)) return rg_fail();
  }
  return rg_succeed();
}

/* (same-static-typeo A B): graph terms of one type whose sizes are all
 * known (so elementwise they meet without broadcasting); no constraint
 * while either is unbound. */
static rg_goal *same_static_typeo(rg_ctx *C, const rg_term *args, void *ud) {
  (void)C, (void)ud;
  if (any_unbound(2, args)) return rg_succeed();
  const rg_type *a = type_of(args[0]), *b = type_of(args[1]);
  if (!a || !b || !rg_term_var(args[0]) || !rg_term_var(args[1]) || !rg_type_equal(a, b)) return rg_fail();
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] < 0) return rg_fail();
  return rg_succeed();
}

void rgr_define_scan_relations(rg_interp *I); /* scan-term.c */

static void define_type_relations(rg_interp *I) {
  rg_interp_define(I, "typeo", rg_relation_function("typeo", 2, typeo, NULL));
  rg_interp_define(I, "dtypeo", rg_relation_function("dtypeo", 2, dtypeo, NULL));
  rg_interp_define(I, "ndimo", rg_relation_function("ndimo", 2, ndimo, NULL));
  rg_interp_define(I, "sum-commutableo", rg_relation_projecting("sum-commutableo", 3, sum_commutableo, NULL));
  rg_interp_define(I, "same-static-typeo", rg_relation_projecting("same-static-typeo", 2, same_static_typeo, NULL));
}

/* ------------------------------------------------------------------ rule sets */

rg_rule_set *rg_rule_set_new(rg_interp *I) {
  rg_rule_set *rs = rg_gc_alloc(sizeof *rs);
  rs->I = I;
  rg_interp_add_form(I, "defrule", defrule, rs);
  define_type_relations(I);
  rgr_define_scan_relations(I);
  rg_graph_install_evaluator(rg_interp_ctx(I));
  return rs;
}

int rg_rule_set_load(rg_rule_set *rs, const char *path) { return rg_interp_load_file(rs->I, path); }
int rg_rule_set_load_string(rg_rule_set *rs, const char *name, const char *text) {
  return rg_interp_load_string(rs->I, name, text);
}
int rg_rule_set_count(const rg_rule_set *rs) { return rs->n; }
rg_rewriter *rg_rule_set_rule(const rg_rule_set *rs, int i) {
  return i >= 0 && i < rg_rule_set_count(rs) ? rs->v[i].rw : NULL;
}
const char *rg_rule_set_tags(const rg_rule_set *rs, int i) {
  return i >= 0 && i < rg_rule_set_count(rs) ? rs->v[i].tags : NULL;
}

int rg_rule_set_register(const rg_rule_set *rs, rg_rewrite_db *db, const char *name) {
  rg_ctx *C = rg_interp_ctx(rs->I);
  rg_rewrite_db *eq = rg_db_equilibrium(name);
  int rc = rg_db_register_db(db, name, eq, RGR_RULES_POSITION, "");
  if (rc)
    return rg_error(C, rc, "rules: the database already has an entry named '%s' (rules registered twice, "
                    "or a rule or database of that name)", name);
  for (int i = 0; i < rs->n && !rc; i++) {
    rg_rewrite_db *home = rgr_db_named_by(db, rs->v[i].tags);
    const char *tags = rgr_sprintf("%s %s", name, rs->v[i].tags);
    /* a rule named as one of that database's own runs in `name` instead */
    rc = home ? rg_db_register(home, rs->v[i].rw->name, rs->v[i].rw, 0, tags) : RG_ERR_NAME;
    if (rc == RG_ERR_NAME) rc = rg_db_register(eq, rs->v[i].rw->name, rs->v[i].rw, 0, tags);
    if (rc) return rg_error(C, rc, "rules: rule %s cannot be registered in '%s'", rs->v[i].rw->name, name);
  }
  return RG_OK;
}
