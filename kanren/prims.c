/*
 * prims.c — primitive functions of the relational language (car, cdr,
 * list, append, arithmetic, ...) and the evaluation of etuples.
 *
 * Primitives compute on values; they are not relations and never see the
 * substitution (a primitive applied to a logic variable sees the
 * variable).  Etuple evaluation is bottom-up and iterative: arguments are
 * evaluated before their etuple, and each evaluated etuple caches its value.
 */
#include "kanren/kanren-impl.h"

#include <math.h>

static const char *site(const rgk_tx *t) { return t && t->where ? t->where : NULL; }

static rg_term perr(rg_ctx *C, const rgk_tx *t, const char *name, const char *what, rg_term v) {
  const char *w = site(t);
  rg_error(C, RG_ERR_TYPE, "%s%s%s: %s: %s", w ? w : "", w ? ": " : "", name, what, rgk_show_value(v));
  return NULL;
}

/* ------------------------------------------------------------------ lists */

static rg_term p_car(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  rg_term l = rgk_as_list(a[0]);
  return rgk_is_pair(l) ? rgk_car(l) : perr(C, t, "car", "not a pair", a[0]);
}
static rg_term p_cdr(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  rg_term l = rgk_as_list(a[0]);
  return rgk_is_pair(l) ? rgk_cdr(l) : perr(C, t, "cdr", "not a pair", a[0]);
}
static rg_term p_cadr(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  rg_term l = rgk_as_list(a[0]);
  if (rgk_is_pair(l) && rgk_is_pair(rgk_cdr(l))) return rgk_car(rgk_cdr(l));
  return perr(C, t, "cadr", "list too short", a[0]);
}
static rg_term p_cons(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rgk_cons(C, a[0], a[1]); }
static rg_term p_list(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_list(n, a); }
static rg_term p_length(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  int64_t len = rgk_length(rgk_as_list(a[0]));
  return len < 0 ? perr(C, t, "length", "not a proper list", a[0]) : rg_int(len);
}
static rg_term p_reverse(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  if (rgk_length(a[0]) < 0) return perr(C, t, "reverse", "not a proper list", a[0]);
  return rgk_reverse(a[0]);
}

rg_term rgk_prim_append(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  if (n == 0) return RG_NIL;
  rg_term acc = a[n - 1];
  for (int i = n - 2; i >= 0; i--) {
    rg_term l = rgk_as_list(a[i]);
    if (rgk_length(l) < 0) return perr(C, t, "append", "not a proper list", a[i]);
    for (rg_term r = rgk_reverse(l); rgk_is_pair(r); r = rgk_cdr(r)) acc = rgk_cons(C, rgk_car(r), acc);
  }
  return acc;
}

static rg_term p_iota(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  if (!rgk_is_int(a[0]) || rg_int_value(a[0]) < 0) return perr(C, t, "iota", "needs a count >= 0", a[0]);
  rg_term l = RG_NIL;
  for (int64_t i = rg_int_value(a[0]) - 1; i >= 0; i--) l = rgk_cons(C, rg_int(i), l);
  return l;
}

static rg_term p_etuple(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  if (n < 1) return perr(C, t, "etuple", "needs a head", RG_NIL);
  return rg_etuple(a[0], n - 1, a + 1);
}
static rg_term p_eval_etuple(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  rg_term v = rg_eval_etuple(C, a[0]);
  if (!v && site(t)) rg_error(C, C->errcode, "%s: eval-etuple: %s", site(t), rgk_strdup(C->errmsg));
  return v;
}

/* ------------------------------------------------------------------ predicates */

static rg_term p_equal(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(rg_equal(a[0], a[1])); }
static rg_term p_eq(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  return rg_bool(a[0] == a[1] || (rgk_is_int(a[0]) && rgk_is_int(a[1]) && rg_equal(a[0], a[1])));
}
/* eqv?: eq?, and numbers of one kind (both exact or both not) by value. */
static rg_term p_eqv(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  bool same_kind = (rgk_is_int(a[0]) && rgk_is_int(a[1])) || (rgk_is_float(a[0]) && rgk_is_float(a[1]));
  return rg_bool(a[0] == a[1] || (same_kind && rg_equal(a[0], a[1])));
}
static rg_term p_nullp(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(a[0] == RG_NIL); }
static rg_term p_pairp(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(rgk_is_pair(rgk_as_list(a[0]))); }
static rg_term p_symbolp(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(rgk_is_symbol(a[0])); }
static rg_term p_numberp(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(rgk_is_number(a[0])); }
static rg_term p_stringp(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(rgk_is_string(a[0])); }
static rg_term p_not(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return rg_bool(a[0] == RG_FALSE); }

/* ------------------------------------------------------------------ arithmetic */

static bool all_numbers(rg_ctx *C, const char *name, int n, const rg_term *a, const rgk_tx *t) {
  for (int i = 0; i < n; i++)
    if (!rgk_is_number(a[i])) return perr(C, t, name, "not a number", a[i]), false;
  return true;
}
static bool are_numbers(int n, const rg_term *a) {
  for (int i = 0; i < n; i++)
    if (!rgk_is_number(a[i])) return false;
  return true;
}

static bool any_float(int n, const rg_term *a) {
  for (int i = 0; i < n; i++)
    if (rgk_is_float(a[i])) return true;
  return false;
}

typedef enum { OP_ADD, OP_SUB, OP_MUL } arith_op;

static rg_term arith(rg_ctx *C, const char *name, arith_op op, int n, const rg_term *a, const rgk_tx *t) {
  if (!all_numbers(C, name, n, a, t)) return NULL;
  if (n == 0) return rg_int(op == OP_MUL ? 1 : 0);
  if (any_float(n, a)) {
    double acc = rg_float_value(a[0]);
    if (n == 1 && op == OP_SUB) return rg_float(-acc);
    for (int i = 1; i < n; i++) {
      double x = rg_float_value(a[i]);
      acc = op == OP_ADD ? acc + x : op == OP_SUB ? acc - x : acc * x;
    }
    return rg_float(acc);
  }
  int64_t acc = rg_int_value(a[0]);
  if (n == 1 && op == OP_SUB)
    return acc == INT64_MIN ? perr(C, t, name, "integer overflow", a[0]) : rg_int(-acc);
  for (int i = 1; i < n; i++) {
    int64_t x = rg_int_value(a[i]);
    bool ovf = op == OP_ADD ? __builtin_add_overflow(acc, x, &acc)
               : op == OP_SUB ? __builtin_sub_overflow(acc, x, &acc)
                              : __builtin_mul_overflow(acc, x, &acc);
    if (ovf) return perr(C, t, name, "integer overflow", a[i]);
  }
  return rg_int(acc);
}

static rg_term p_add(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return arith(C, "+", OP_ADD, n, a, t); }
static rg_term p_sub(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return arith(C, "-", OP_SUB, n, a, t); }
static rg_term p_mul(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return arith(C, "*", OP_MUL, n, a, t); }

static rg_term p_div(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) {
  if (!all_numbers(C, "/", n, a, t)) return NULL;
  if (n == 0) return perr(C, t, "/", "needs at least one argument", RG_NIL);
  double acc = rg_float_value(a[0]);
  if (n == 1) return rg_float(1.0 / acc);
  for (int i = 1; i < n; i++) acc /= rg_float_value(a[i]);
  return rg_float(acc);
}

static rg_term compare(rg_ctx *C, const char *name, int n, const rg_term *a, const rgk_tx *t) {
  if (!all_numbers(C, name, n, a, t)) return NULL;
  for (int i = 0; i + 1 < n; i++) {
    double x = rg_float_value(a[i]), y = rg_float_value(a[i + 1]);
    bool ok = name[0] == '<' ? (name[1] ? x <= y : x < y)
              : name[0] == '>' ? (name[1] ? x >= y : x > y)
                               : x == y;
    if (!ok) return RG_FALSE;
  }
  return RG_TRUE;
}
static rg_term p_lt(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return compare(C, "<", n, a, t); }
static rg_term p_gt(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return compare(C, ">", n, a, t); }
static rg_term p_le(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return compare(C, "<=", n, a, t); }
static rg_term p_ge(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return compare(C, ">=", n, a, t); }
static rg_term p_numeq(rg_ctx *C, int n, const rg_term *a, const rgk_tx *t) { return compare(C, "=", n, a, t); }

/* ------------------------------------------------------------------ table */

static const struct { const char *name; int arity; rgk_prim_fn fn; } prims[] = {
    {"car", 1, p_car}, {"cdr", 1, p_cdr}, {"cadr", 1, p_cadr}, {"cons", 2, p_cons},
    {"list", -1, p_list}, {"length", 1, p_length}, {"reverse", 1, p_reverse},
    {"append", -1, rgk_prim_append}, {"iota", 1, p_iota}, {"etuple", -1, p_etuple},
    {"eval-etuple", 1, p_eval_etuple}, {"equal?", 2, p_equal}, {"eq?", 2, p_eq},
    {"eqv?", 2, p_eqv}, {"null?", 1, p_nullp}, {"pair?", 1, p_pairp},
    {"symbol?", 1, p_symbolp}, {"number?", 1, p_numberp}, {"string?", 1, p_stringp},
    {"not", 1, p_not}, {"+", -1, p_add}, {"-", -1, p_sub}, {"*", -1, p_mul},
    {"/", -1, p_div}, {"<", -1, p_lt}, {">", -1, p_gt}, {"<=", -1, p_le},
    {">=", -1, p_ge}, {"=", -1, p_numeq},
};

void rgk_install_prims(rg_interp *I) {
  for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++) {
    rgk_proc *p = rgk_alloc(sizeof *p);
    p->h = (rgk_hdr){.type = RGK_T_PROC, .aux = PROC_PRIM};
    p->name = rg_symbol(prims[i].name);
    p->arity = prims[i].arity;
    p->prim = prims[i].fn;
    rgk_table_get(&I->lib, p->name, true)->value = (rg_term)p;
  }
}

/* ------------------------------------------------------------------ etuple evaluation */

void rg_register_evaluator(rg_ctx *C, rg_term head, rg_evaluator fn, void *ud) {
  for (rgk_evalreg *r = C->evaluators; r; r = r->next)
    if (rg_equal(r->head, head)) {
      r->fn = fn;
      r->ud = ud;
      return;
    }
  rgk_evalreg *r = rgk_alloc(sizeof *r);
  r->head = head;
  r->fn = fn;
  r->ud = ud;
  r->next = C->evaluators;
  C->evaluators = r;
}

bool rg_evaluator_of(rg_ctx *C, rg_term head, rg_evaluator *fn, void **ud) {
  for (rgk_evalreg *r = C->evaluators; r; r = r->next)
    if (rg_equal(r->head, head)) {
      *fn = r->fn;
      *ud = r->ud;
      return true;
    }
  return false;
}

void rg_set_default_evaluator(rg_ctx *C, rg_evaluator fn, void *ud) {
  C->default_eval = fn;
  C->default_eval_ud = ud;
}

/* add sub mul true_div neg exp log on numbers: the heads, with their
 * number of arguments (-1: any). */
enum { NH_ADD, NH_SUB, NH_MUL, NH_DIV, NH_NEG, NH_EXP, NH_LOG, NH_COUNT };
static const struct { const char *name; int arity; } numeric_heads[NH_COUNT] = {
    {"add", -1}, {"sub", 2}, {"mul", -1}, {"true_div", 2}, {"neg", 1}, {"exp", 1}, {"log", 1}};

/* Which numeric head h with n arguments is, or -1. */
static int numeric_kind(rg_term h, int n) {
  if (!rgk_is_symbol(h)) return -1;
  for (int k = 0; k < NH_COUNT; k++)
    if (!strcmp(rgk_symname(h), numeric_heads[k].name) && (numeric_heads[k].arity < 0 || numeric_heads[k].arity == n))
      return k;
  return -1;
}

static rg_term numeric_head(rg_ctx *C, int k, int n, const rg_term *a) {
  switch (k) {
  case NH_ADD: return arith(C, "add", OP_ADD, n, a, NULL);
  case NH_SUB: return arith(C, "sub", OP_SUB, n, a, NULL);
  case NH_MUL: return arith(C, "mul", OP_MUL, n, a, NULL);
  case NH_DIV: return rg_float(rg_float_value(a[0]) / rg_float_value(a[1]));
  case NH_NEG: return arith(C, "neg", OP_SUB, 1, a, NULL);
  case NH_EXP: return rg_float(exp(rg_float_value(a[0])));
  default: return rg_float(log(rg_float_value(a[0])));
  }
}

static rgk_evalreg *find_evaluator(rg_ctx *C, rg_term head) {
  for (rgk_evalreg *r = C->evaluators; r; r = r->next)
    if (r->head == head || (!rgk_is_symbol(head) && rg_equal(r->head, head))) return r;
  return NULL;
}

/* Applies the head of an expression to evaluated arguments. */
static rg_term apply_head(rg_ctx *C, rg_term head, int n, const rg_term *a) {
  int numeric = numeric_kind(head, n);
  if (numeric >= 0 && are_numbers(n, a)) return numeric_head(C, numeric, n, a);
  rg_clear_error(C);
  rgk_evalreg *r = find_evaluator(C, head);
  if (r) return r->fn(C, head, n, a, r->ud);
  if (rgk_type(head) == RGK_T_PROC && ((rgk_proc *)head)->h.aux == PROC_PRIM) {
    const rgk_proc *p = (const rgk_proc *)head;
    if (p->arity >= 0 && p->arity != n) {
      rg_error(C, RG_ERR_ARITY, "%s expects %d argument%s, got %d", rg_proc_name(head), p->arity,
               p->arity == 1 ? "" : "s", n);
      return NULL;
    }
    return p->prim(C, n, a, NULL);
  }
  if (C->default_eval) return C->default_eval(C, head, n, a, C->default_eval_ud);
  for (int i = 0; numeric >= 0 && i < n; i++) /* a numeric head over something else */
    if (!are_numbers(1, a + i)) {
      rg_error(C, RG_ERR_EVAL, "%s evaluates numbers only, and argument %d is %s", rgk_symname(head), i + 1,
               rg_to_string(a[i]));
      return NULL;
    }
  rg_error(C, RG_ERR_EVAL, "no evaluator for %s", rg_to_string(head));
  return NULL;
}

#define MARK_APPLY RGK_IMM(120)

/* A list is an expression when its head can name an operation: a symbol,
 * a procedure, a foreign term, or a parameterized head (a list whose car is
 * a symbol, as graph ops with parameters appear: ((sum 0) x)); other lists
 * are data. */
static bool is_expression(rg_term l) {
  if (!rgk_is_pair(l) || rgk_length(l) < 1) return false;
  rg_term h = rgk_car(l);
  return rgk_is_symbol(h) || rgk_is_foreign(h) || rgk_type(h) == RGK_T_PROC ||
         (rgk_is_pair(h) && rgk_is_symbol(rgk_car(h)));
}

/* Evaluates bottom-up with an explicit stack: an expression is pushed
 * with an APPLY marker above its arguments; when the marker pops, the
 * argument values are on the value stack. */
rg_term rg_eval_etuple(rg_ctx *C, rg_term t) {
  RGK_LOCAL_STACK(work, 256);
  RGK_LOCAL_STACK(vals, 256);
  rgk_push(&work, RGK_W(t));
  while (work.n) {
    rg_term x = RGK_T(work.v[--work.n]);
    if (x == MARK_APPLY) {
      rg_term e = RGK_T(work.v[--work.n]);
      rg_term l = rgk_as_list(e);
      int64_t n = rgk_length(l) - 1;
      rg_term *args = (rg_term *)(vals.v + vals.n - n);
      rg_term v = apply_head(C, rgk_car(l), (int)n, args);
      if (!v) return NULL;
      if (rgk_is_etuple(e)) ((rgk_etuple *)e)->value = v;
      vals.n -= (size_t)n;
      rgk_push(&vals, RGK_W(v));
      continue;
    }
    if (rgk_is_etuple(x) && ((rgk_etuple *)x)->value) {
      rgk_push(&vals, RGK_W(((rgk_etuple *)x)->value));
      continue;
    }
    rg_term l = rgk_is_etuple(x) ? ((rgk_etuple *)x)->list : x;
    if (!rgk_is_etuple(x) && !is_expression(l)) {
      rgk_push(&vals, RGK_W(x));
      continue;
    }
    rgk_push(&work, RGK_W(x));
    rgk_push(&work, RGK_W(MARK_APPLY));
    /* arguments pushed in reverse so they are evaluated left to right */
    int64_t n = rgk_length(l);
    size_t base = work.n;
    for (int64_t i = 1; i < n; i++) rgk_push(&work, 0);
    rg_term a = rgk_cdr(l);
    for (int64_t i = n - 1; i >= 1; i--, a = rgk_cdr(a)) work.v[base + (size_t)i - 1] = RGK_W(rgk_car(a));
  }
  return RGK_T(vals.v[0]);
}
