/*
 * reify.c — turning a search state into a printed answer.
 *
 * Follows faster-miniKanren: the query is walked deeply; its unbound
 * variables are named _.0, _.1, ... in order of first appearance (car
 * before cdr); the constraints on those variables are normalised, those
 * mentioning variables outside the answer are dropped, subsumed ones are
 * removed, and the rest are sorted and attached as
 *     (answer (=/= ((_.0 5)) ...) (num _.0 ...) (str ...) (sym ...) (absento (5 _.0) ...))
 * All traversals are iterative.
 */
#include "kanren/kanren-impl.h"

/* ------------------------------------------------------------------ var naming table */

typedef struct names {
  rg_term *keys, *vals; /* open addressing on the variable pointer */
  size_t cap, n;
} names;

static size_t slot_of(const names *t, rg_term v) {
  size_t h = (size_t)(rgk_varp(v)->idx * 0x9e3779b97f4a7c15ull) & (t->cap - 1);
  while (t->keys[h] && t->keys[h] != v) h = (h + 1) & (t->cap - 1);
  return h;
}

static void names_grow(names *t) {
  names n = {0};
  n.cap = t->cap ? t->cap * 2 : 16;
  n.keys = rgk_alloc(n.cap * sizeof(rg_term));
  n.vals = rgk_alloc(n.cap * sizeof(rg_term));
  for (size_t i = 0; i < t->cap; i++)
    if (t->keys[i]) {
      size_t j = slot_of(&n, t->keys[i]);
      n.keys[j] = t->keys[i];
      n.vals[j] = t->vals[i];
    }
  n.n = t->n;
  *t = n;
}

static rg_term name_of(names *t, rg_term v) {
  if ((t->n + 1) * 2 > t->cap) names_grow(t);
  size_t i = slot_of(t, v);
  if (!t->keys[i]) {
    char buf[32];
    snprintf(buf, sizeof buf, "_.%zu", t->n++);
    t->keys[i] = v;
    t->vals[i] = rg_symbol(buf);
  }
  return t->vals[i];
}

static bool is_named(const names *t, rg_term v) {
  return t->cap && t->keys[slot_of(t, v)] == v;
}

typedef struct walk_name { const rgk_map *S; names *nm; } walk_name;

static rg_term pre_walk_name(rg_term x, void *ud) {
  walk_name *w = ud;
  x = rgk_walk(x, w->S);
  return rgk_is_var(x) ? name_of(w->nm, x) : x;
}

static rg_term pre_name(rg_term x, void *ud) {
  return rgk_is_var(x) ? name_of(ud, x) : x;
}

/* Names the variables of t in order of first appearance. */
static void collect_names(rg_ctx *C, rg_term t, names *nm) { (void)rgk_rebuild(C, t, pre_name, nm); }

/* ------------------------------------------------------------------ lexical order */

static int type_rank(rg_term t) {
  if (rgk_is_number(t)) return 0;
  if (rgk_is_string(t)) return 1;
  if (rgk_is_symbol(t)) return 2;
  if (t == RG_FALSE) return 3;
  if (t == RG_TRUE) return 4;
  if (t == RG_NIL) return 5;
  if (rgk_is_pair(t)) return 6;
  return 7;
}

static int cmp3(double a, double b) { return a < b ? -1 : a > b; }

int rgk_lex_compare(rg_term a, rg_term b) {
  RGK_LOCAL_STACK(s, 32);
  rgk_push(&s, RGK_W(a));
  rgk_push(&s, RGK_W(b));
  while (s.n) {
    rg_term y = rgk_as_list(RGK_T(s.v[--s.n])), x = rgk_as_list(RGK_T(s.v[--s.n]));
    int rx = type_rank(x), ry = type_rank(y), c = 0;
    if (rx != ry) return rx < ry ? -1 : 1;
    switch (rx) {
    case 0:
      if (rgk_is_int(x) && rgk_is_int(y)) {
        int64_t p = rg_int_value(x), q = rg_int_value(y);
        c = p < q ? -1 : p > q;
      } else {
        c = cmp3(rg_float_value(x), rg_float_value(y));
      }
      break;
    case 1: c = strcmp(rg_string_value(x), rg_string_value(y)); break;
    case 2: c = strcmp(rgk_symname(x), rgk_symname(y)); break;
    case 6:
      rgk_push(&s, RGK_W(rgk_cdr(x)));
      rgk_push(&s, RGK_W(rgk_cdr(y)));
      rgk_push(&s, RGK_W(rgk_car(x)));
      rgk_push(&s, RGK_W(rgk_car(y)));
      continue;
    case 7: c = strcmp(rg_to_string(x), rg_to_string(y)); break;
    default: break;
    }
    if (c) return c < 0 ? -1 : 1;
  }
  return 0;
}

/* Stable merge sort of an array of terms by a comparison. */
static void msort(rg_term *v, rg_term *tmp, size_t n, int (*cmp)(rg_term, rg_term)) {
  if (n < 2) return;
  size_t h = n / 2;
  msort(v, tmp, h, cmp);
  msort(v + h, tmp, n - h, cmp);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = cmp(v[j], v[i]) < 0 ? v[j++] : v[i++];
  while (i < h) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, n * sizeof *v);
}

static rg_term sort_list(rg_term l, int (*cmp)(rg_term, rg_term)) {
  int64_t n = rgk_length(l);
  if (n < 2) return l;
  rg_term *v = rgk_alloc((size_t)n * sizeof *v), *tmp = rgk_alloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++, l = rgk_cdr(l)) v[i] = rgk_car(l);
  msort(v, tmp, (size_t)n, cmp);
  return rg_list((int)n, v);
}

/* ------------------------------------------------------------------ list helpers */


static bool all_vars_named(rg_term t, const names *relevant) {
  RGK_LOCAL_STACK(s, 32);
  rgk_push(&s, RGK_W(t));
  while (s.n) {
    rg_term x = rgk_as_list(RGK_T(s.v[--s.n]));
    if (rgk_is_var(x) && !is_named(relevant, x)) return false;
    if (rgk_is_pair(x) && !rgk_is_gpair(x)) {
      rgk_push(&s, RGK_W(rgk_cdr(x)));
      rgk_push(&s, RGK_W(rgk_car(x)));
    }
  }
  return true;
}

static rg_term filter_relevant(rg_term l, const names *relevant) {
  rg_term r = RG_NIL;
  for (; rgk_is_pair(l); l = rgk_cdr(l))
    if (all_vars_named(rgk_car(l), relevant)) r = rg_cons(rgk_car(l), r);
  return rgk_reverse(r);
}

/* ------------------------------------------------------------------ subsumption */

/* d1 is subsumed by d2 when, after assuming d1's equations, d2's add
 * nothing: (a . 5) subsumes ((a . 5) (b . 6)). */
static bool d_subsumed_by(rg_ctx *C, rg_term d1, rg_term d2) {
  rgk_map *S = NULL;
  for (rg_term x = d1; rgk_is_pair(x); x = rgk_cdr(x))
    if (!rgk_unify(C, rgk_car(rgk_car(x)), rgk_cdr(rgk_car(x)), &S, 0, true, NULL))
      return false;
  size_t base = C->stk2.n;
  bool ok = true;
  for (rg_term x = d2; ok && rgk_is_pair(x); x = rgk_cdr(x))
    ok = rgk_unify(C, rgk_car(rgk_car(x)), rgk_cdr(rgk_car(x)), &S, 0, true, &C->stk2);
  bool none_added = C->stk2.n == base;
  C->stk2.n = base;
  return ok && none_added;
}

static rg_term var_type(const rgk_state *st, rg_term x) {
  return rgk_is_var(x) ? rgk_lookup_c(st, x)->T : NULL;
}

static bool var_types_match(const rgk_state *st, rg_term t1, rg_term t2) {
  rg_term T1 = var_type(st, t1);
  if (!T1) return true;
  if (rgk_is_var(t2)) {
    rg_term T2 = var_type(st, t2);
    return !T2 || T1 == T2;
  }
  return rgk_has_type(T1, t2);
}

static bool d_subsumed_by_T(const rgk_state *st, rg_term d) {
  for (; rgk_is_pair(d); d = rgk_cdr(d))
    if (!var_types_match(st, rgk_car(rgk_car(d)), rgk_cdr(rgk_car(d)))) return true;
  return false;
}

/* An absento (term . var) is atomic when the var has a type constraint. */
static bool absento_rhs_atomic(const rgk_state *st, rg_term a) {
  rg_term r = rgk_cdr(a);
  return !(rgk_is_var(r) && !var_type(st, r));
}

static bool d_subsumed_by_A(rg_ctx *C, const rgk_state *st, rg_term d, rg_term A) {
  for (; rgk_is_pair(A); A = rgk_cdr(A)) {
    rg_term a = rgk_car(A);
    if (!absento_rhs_atomic(st, a) && d_subsumed_by(C, d, rg_cons(a, RG_NIL))) return true;
  }
  return false;
}

static bool member_star(rg_term u, rg_term v) {
  RGK_LOCAL_STACK(s, 32);
  rgk_push(&s, RGK_W(v));
  while (s.n) {
    rg_term x = RGK_T(s.v[--s.n]);
    if (rg_equal(u, x)) return true;
    x = rgk_as_list(x);
    if (rgk_is_pair(x)) {
      rgk_push(&s, RGK_W(rgk_cdr(x)));
      rgk_push(&s, RGK_W(rgk_car(x)));
    }
  }
  return false;
}

static bool a_subsumed_by(rg_term a1, rg_term a2) {
  return rgk_cdr(a1) == rgk_cdr(a2) && member_star(rgk_car(a2), rgk_car(a1));
}

/* The time bound of one reification: pruning is quadratic in the number
 * of constraints, so its loops look at the clock every CLOCK_EVERY
 * elements and give up (late) past the deadline or the context's. */
typedef struct pruning_clock { double deadline, ctx_deadline; unsigned tick; bool late; } pruning_clock;
#define CLOCK_EVERY 16

static bool late(pruning_clock *k) {
  if (k->late) return true;
  if ((!k->deadline && !k->ctx_deadline) || ++k->tick % CLOCK_EVERY) return false;
  double now = rgk_now();
  k->late = (k->deadline && now > k->deadline) || (k->ctx_deadline && now > k->ctx_deadline);
  return k->late;
}

/* faster-miniKanren's rem-subsumed: keeps an element unless one of the
 * later elements or one already kept subsumes it. */
typedef bool (*subsumes_fn)(rg_ctx *C, rg_term x, rg_term by);

static bool subsumed_by_one(rg_ctx *C, subsumes_fn f, rg_term x, rg_term l) {
  for (; rgk_is_pair(l); l = rgk_cdr(l))
    if (f(C, x, rgk_car(l))) return true;
  return false;
}

static rg_term rem_subsumed(rg_ctx *C, subsumes_fn f, rg_term l, pruning_clock *k) {
  rg_term result = RG_NIL;
  for (; rgk_is_pair(l) && !late(k); l = rgk_cdr(l)) {
    rg_term x = rgk_car(l);
    if (!subsumed_by_one(C, f, x, rgk_cdr(l)) && !subsumed_by_one(C, f, x, result))
      result = rg_cons(x, result);
  }
  return result;
}

static bool d_sub(rg_ctx *C, rg_term a, rg_term b) { return d_subsumed_by(C, a, b); }
static bool a_sub(rg_ctx *C, rg_term a, rg_term b) { return a_subsumed_by(a, b); }

/* ------------------------------------------------------------------ extraction */

/* A stored disequality under the final substitution: NULL if it can no
 * longer be violated, else the walked associations still needed. */
static rg_term normalize_diseq(rg_ctx *C, const rgk_state *st, rg_term d) {
  rgk_map *S = st->S;
  size_t base = C->stk2.n;
  for (; rgk_is_pair(d); d = rgk_cdr(d)) {
    if (!rgk_unify(C, rgk_car(rgk_car(d)), rgk_cdr(rgk_car(d)), &S, 0, true, &C->stk2)) {
      C->stk2.n = base;
      return NULL;
    }
  }
  rg_term added = RG_NIL;
  for (size_t i = C->stk2.n; i > base; i -= 2)
    added = rg_cons(rg_cons(RGK_T(C->stk2.v[i - 2]), RGK_T(C->stk2.v[i - 1])), added);
  C->stk2.n = base;
  return rgk_walk_star(C, added, st->S);
}

typedef struct extracted { rg_term T[3], D, A; } extracted;

static void extract(rg_ctx *C, const rgk_state *st, const names *relevant, extracted *e) {
  for (int i = 0; i < 3; i++) e->T[i] = RG_NIL;
  e->D = e->A = RG_NIL;
  for (size_t k = 0; k < relevant->cap; k++) {
    rg_term x = relevant->keys[k];
    if (!x) continue;
    rgk_crec *c = rgk_lookup_c(st, x);
    for (int i = 0; i < 3; i++)
      if (c->T == rgk_type_tag(i)) e->T[i] = rg_cons(x, e->T[i]);
    for (rg_term d = c->D; d && rgk_is_pair(d); d = rgk_cdr(d)) {
      rg_term nd = normalize_diseq(C, st, rgk_car(d));
      if (nd) e->D = rg_cons(nd, e->D);
    }
    for (rg_term a = c->A; a && rgk_is_pair(a); a = rgk_cdr(a))
      e->A = rg_cons(rg_cons(rgk_walk_star(C, rgk_car(a), st->S), x), e->A);
  }
}

static rg_term drop_subsumed_D(rg_ctx *C, const rgk_state *st, rg_term D, rg_term A, pruning_clock *k) {
  rg_term keep = RG_NIL;
  for (; rgk_is_pair(D) && !late(k); D = rgk_cdr(D)) {
    rg_term d = rgk_car(D);
    if (!d_subsumed_by_T(st, d) && !d_subsumed_by_A(C, st, d, A)) keep = rg_cons(d, keep);
  }
  return rem_subsumed(C, d_sub, rgk_reverse(keep), k);
}

static rg_term drop_subsumed_A(rg_ctx *C, const rgk_state *st, rg_term A, pruning_clock *k) {
  rg_term keep = RG_NIL;
  for (rg_term l = A; rgk_is_pair(l); l = rgk_cdr(l)) {
    rg_term a = rgk_car(l);
    if (!absento_rhs_atomic(st, a) && !rgk_occurs(C, rgk_cdr(a), rgk_car(a), st->S))
      keep = rg_cons(a, keep);
  }
  return rem_subsumed(C, a_sub, rgk_reverse(keep), k);
}

/* ------------------------------------------------------------------ formatting */

static bool reified_var(rg_term t) { return rgk_is_symbol(t) && rgk_symname(t)[0] == '_'; }

/* Orients a pair so a reified variable on the right sorts before the left. */
static rg_term sort_pr(rg_term pr) {
  rg_term l = rgk_car(pr), r = rgk_cdr(pr);
  if (reified_var(r) && rgk_is_symbol(l) && strcmp(rgk_symname(r), rgk_symname(l)) < 0)
    return rg_cons(r, l);
  return pr;
}

static rg_term drop_dot(rg_term l) {
  rg_term r = RG_NIL;
  for (; rgk_is_pair(l); l = rgk_cdr(l)) r = rg_cons(rgk_list2(rgk_car(rgk_car(l)), rgk_cdr(rgk_car(l))), r);
  return rgk_reverse(r);
}

static rg_term format_D(rg_term D) {
  rg_term ds = RG_NIL;
  for (; rgk_is_pair(D); D = rgk_cdr(D)) {
    rg_term prs = RG_NIL;
    for (rg_term d = rgk_car(D); rgk_is_pair(d); d = rgk_cdr(d)) prs = rg_cons(sort_pr(rgk_car(d)), prs);
    ds = rg_cons(sort_list(rgk_reverse(prs), rgk_lex_compare), ds); /* whole pairs, as sort-d */
  }
  ds = sort_list(rgk_reverse(ds), rgk_lex_compare);
  rg_term r = RG_NIL;
  for (; rgk_is_pair(ds); ds = rgk_cdr(ds)) r = rg_cons(drop_dot(rgk_car(ds)), r);
  return rgk_reverse(r);
}

static rg_term form(rg_term v, rg_term D, rg_term T[3], rg_term A) {
  rg_term parts = RG_NIL; /* reversed */
  if (D != RG_NIL) parts = rg_cons(rg_cons(rgk_sym("=/="), format_D(D)), parts);
  for (int i = 0; i < 3; i++)
    if (T[i] != RG_NIL) parts = rg_cons(rg_cons(rgk_type_tag(i), sort_list(T[i], rgk_lex_compare)), parts);
  if (A != RG_NIL) parts = rg_cons(rg_cons(rgk_sym("absento"), drop_dot(sort_list(A, rgk_lex_compare))), parts);
  if (parts == RG_NIL) return v;
  return rg_cons(v, rgk_reverse(parts));
}

static rg_term reify_within(rg_ctx *C, rg_term q, const rgk_state *st, pruning_clock *k) {
  names nm = {0};
  if (!st->C) {
    walk_name w = {st->S, &nm};
    return rgk_rebuild(C, q, pre_walk_name, &w);
  }
  rg_term v = rgk_walk_star(C, q, st->S);
  collect_names(C, v, &nm);
  extracted e;
  extract(C, st, &nm, &e);
  rg_term D = filter_relevant(e.D, &nm), A = filter_relevant(e.A, &nm);
  D = drop_subsumed_D(C, st, D, A, k);
  A = drop_subsumed_A(C, st, A, k);
  if (k->late) {
    rg_error(C, RG_STOP_TIMEOUT, "search stopped at its time limit (while reifying an answer)");
    return NULL;
  }
  for (int i = 0; i < 3; i++) e.T[i] = rgk_rebuild(C, e.T[i], pre_name, &nm);
  return form(rgk_rebuild(C, v, pre_name, &nm), rgk_rebuild(C, D, pre_name, &nm), e.T,
              rgk_rebuild(C, A, pre_name, &nm));
}

rg_term rgk_reify(rg_ctx *C, rg_term q, const rgk_state *st) {
  pruning_clock unbounded = {0};
  return reify_within(C, q, st, &unbounded);
}

rg_term rgk_reify_by(rg_ctx *C, rg_term q, const rgk_state *st, double deadline) {
  pruning_clock k = {.deadline = deadline, .ctx_deadline = C->deadline};
  return reify_within(C, q, st, &k);
}
