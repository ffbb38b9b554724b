/*
 * constraint.c — unification goals and the constraint solver: =/=, the
 * type constraints (numbero, stringo, symbolo) and absento.
 *
 * The design is faster-miniKanren's.  Constraints live in a persistent map
 * from a variable to its record (rgk_crec); only unbound variables carry
 * records.  When unification binds a variable that has a record, the record
 * is removed and each of its constraints is re-applied to the new value.
 * A disequality is stored as the list of associations whose simultaneous
 * truth would violate it (what unifying its two sides would add); it hangs
 * on the first associated variable, and on the value too if that is a
 * variable.  Solving never writes variables in place: it runs in the
 * nonlocal scope 0.
 */
#include "kanren/kanren-impl.h"

rgk_state *rgk_state_new(rg_ctx *C, uint64_t scope, rgk_map *S, rgk_map *Cs) {
  rgk_state *st = rgk_alloc_in(C, sizeof *st);
  st->scope = scope;
  st->S = S;
  st->C = Cs;
  return st;
}

static rgk_crec empty_rec;

rgk_crec *rgk_lookup_c(const rgk_state *st, rg_term x) {
  if (!st->C) return &empty_rec;
  rg_term r = rgk_map_get(st->C, rgk_varp(x)->idx);
  return r == RGK_UNBOUND ? &empty_rec : (rgk_crec *)r;
}

static rgk_state *set_c(rg_ctx *C, rgk_state *st, rg_term x, rg_term T, rg_term D, rg_term A) {
  rgk_crec *c = rgk_alloc_in(C, sizeof *c);
  c->T = T;
  c->D = D;
  c->A = A;
  return rgk_state_new(C, st->scope, st->S, rgk_map_set(C, st->C, rgk_varp(x)->idx, (rg_term)c));
}

static bool rec_empty(const rgk_crec *c) { return !c->T && c->D == RG_NIL && c->A == RG_NIL; }

/* ------------------------------------------------------------------ types */

rg_term rgk_type_tag(int i) {
  static const char *names[] = {"num", "str", "sym"};
  return rg_symbol(names[i]);
}

bool rgk_has_type(rg_term tag, rg_term t) {
  const char *n = rgk_symname(tag);
  if (n[0] == 'n') return rgk_is_number(t);
  if (n[1] == 't') return rgk_is_string(t);
  return rgk_is_symbol(t);
}

rgk_state *rgk_solve_type(rg_ctx *C, rgk_state *st, rg_term tag, rg_term u) {
  rg_term t = rgk_walk(u, st->S);
  if (rgk_is_var(t)) {
    rgk_crec *c = rgk_lookup_c(st, t);
    if (c->T == tag) return st;
    if (c->T) return NULL;
    return set_c(C, st, t, tag, c == &empty_rec ? RG_NIL : c->D, c == &empty_rec ? RG_NIL : c->A);
  }
  return rgk_has_type(tag, t) ? st : NULL;
}

/* ------------------------------------------------------------------ disequality */

/* Unifies the lhs and rhs lists of associations, in scope 0. */
static bool unify_assocs(rg_ctx *C, rg_term d, rgk_map **S, rgk_stack *added) {
  for (; rgk_is_pair(d); d = rgk_cdr(d)) {
    rg_term a = rgk_car(d);
    if (!rgk_unify(C, rgk_car(a), rgk_cdr(a), S, 0, true, added)) return false;
  }
  return true;
}

static rg_term added_to_list(rg_ctx *C, rgk_stack *added, size_t base) {
  rg_term l = RG_NIL;
  for (size_t i = added->n; i > base; i -= 2)
    l = rgk_cons(C, rgk_cons(C, RGK_T(added->v[i - 2]), RGK_T(added->v[i - 1])), l);
  return l;
}

static rgk_state *add_to_D(rg_ctx *C, rgk_state *st, rg_term x, rg_term d) {
  rgk_crec *c = rgk_lookup_c(st, x);
  return set_c(C, st, x, c->T, rgk_cons(C, d, c == &empty_rec ? RG_NIL : c->D),
               c == &empty_rec ? RG_NIL : c->A);
}

static rgk_state *neq_assocs(rg_ctx *C, rgk_state *st, rg_term d) {
  rgk_map *S = st->S;
  size_t base = C->stk2.n;
  bool ok = unify_assocs(C, d, &S, &C->stk2);
  if (!ok) {
    C->stk2.n = base;
    return st;                 /* can never be equal: satisfied */
  }
  if (C->stk2.n == base) return NULL; /* already equal: violated */
  rg_term added = added_to_list(C, &C->stk2, base);
  C->stk2.n = base;
  rg_term el = rgk_car(added);
  st = add_to_D(C, st, rgk_car(el), added);
  if (rgk_is_var(rgk_cdr(el))) st = add_to_D(C, st, rgk_cdr(el), added);
  return st;
}

rgk_state *rgk_solve_neq(rg_ctx *C, rgk_state *st, rg_term u, rg_term v) {
  return neq_assocs(C, st, rgk_cons(C, rgk_cons(C, u, v), RG_NIL));
}

/* ------------------------------------------------------------------ absento */

/* Scheme's memv: identity, or numbers of the same exactness and value. */
static bool memv(rg_term x, rg_term l) {
  for (; rgk_is_pair(l); l = rgk_cdr(l)) {
    rg_term y = rgk_car(l);
    if (x == y) return true;
    if (rgk_is_int(x) && rgk_is_int(y) && rg_int_value(x) == rg_int_value(y)) return true;
    if (rgk_is_float(x) && rgk_is_float(y) && rg_float_value(x) == rg_float_value(y))
      return true;
  }
  return false;
}

rgk_state *rgk_solve_absento(rg_ctx *C, rgk_state *st, rg_term needle, rg_term hay) {
  /* The haystack is explored with an explicit stack, car before cdr. */
  RGK_LOCAL_STACK(work, 32);
  rgk_push(&work, RGK_W(hay));
  while (work.n && st) {
    rg_term t1 = rgk_walk(needle, st->S);
    rg_term t2 = rgk_walk(RGK_T(work.v[--work.n]), st->S);
    st = rgk_solve_neq(C, st, t1, t2);
    if (!st) break;
    rg_term l2 = rgk_is_etuple(t2) ? rgk_as_list(t2) : t2;
    if (rgk_is_foreign(t2)) l2 = t2; /* foreign terms are atomic here */
    if (rgk_is_pair(l2)) {
      rgk_push(&work, RGK_W(rgk_cdr(l2)));
      rgk_push(&work, RGK_W(rgk_car(l2)));
    } else if (rgk_is_var(l2)) {
      rgk_crec *c = rgk_lookup_c(st, l2);
      rg_term A = c == &empty_rec ? RG_NIL : c->A;
      if (!memv(t1, A))
        st = set_c(C, st, l2, c->T, c == &empty_rec ? RG_NIL : c->D, rgk_cons(C, t1, A));
    }
  }
  return st;
}

/* ------------------------------------------------------------------ == */

/* Re-applies the constraints of a variable just bound to `val`. */
static rgk_state *update_constraints(rg_ctx *C, rgk_state *st, rg_term x, rg_term val) {
  rgk_crec *old = rgk_lookup_c(st, x);
  if (old == &empty_rec || rec_empty(old)) return st;
  st = rgk_state_new(C, st->scope, st->S, rgk_map_set(C, st->C, rgk_varp(x)->idx, (rg_term)&empty_rec));
  if (old->T && !(st = rgk_solve_type(C, st, old->T, val))) return NULL;
  for (rg_term a = old->A; rgk_is_pair(a); a = rgk_cdr(a))
    if (!(st = rgk_solve_absento(C, st, rgk_car(a), val))) return NULL;
  for (rg_term d = old->D; rgk_is_pair(d); d = rgk_cdr(d))
    if (!(st = neq_assocs(C, st, rgk_car(d)))) return NULL;
  return st;
}

/* u == v, u given as a value or (t != NULL) as a matchable template in env. */
static rgk_state *solve_eq(rg_ctx *C, rgk_state *st, const rgk_tx *t, rgk_frame *env, rg_term u,
                           rg_term v, bool occurs) {
  rgk_map *S = st->S;
  rgk_stack *added = st->C ? &C->stk : NULL;
  size_t base = C->stk.n;
  int ok = t ? rgk_unify_tx(C, t, env, v, &S, st->scope, occurs, added)
             : rgk_unify(C, u, v, &S, st->scope, occurs, added);
  if (ok <= 0) {
    C->stk.n = base;
    return ok < 0 ? RGK_STATE_ERROR : NULL;
  }
  if (!st->C) return S == st->S ? st : rgk_state_new(C, st->scope, S, NULL);
  size_t top = C->stk.n;
  rgk_state *r = S == st->S ? st : rgk_state_new(C, st->scope, S, st->C);
  /* constraint updates may use the stack: copy the added pairs out first */
  size_t n = top - base;
  rgk_word *pairs = n <= 64 ? (rgk_word[64]){0} : rgk_alloc(n * sizeof(rgk_word));
  if (n) memcpy(pairs, C->stk.v + base, n * sizeof(rgk_word)); /* v is NULL until first used */
  C->stk.n = base;
  for (size_t i = 0; i < n && r; i += 2)
    r = update_constraints(C, r, RGK_T(pairs[i]), RGK_T(pairs[i + 1]));
  return r;
}

rgk_state *rgk_solve_eq(rg_ctx *C, rgk_state *st, rg_term u, rg_term v, bool occurs) {
  return solve_eq(C, st, NULL, NULL, u, v, occurs);
}

rgk_state *rgk_solve_eq_tx(rg_ctx *C, rgk_state *st, const rgk_tx *u, rgk_frame *env, rg_term v,
                           bool occurs) {
  return solve_eq(C, st, u, env, NULL, v, occurs);
}
