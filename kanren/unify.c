/*
 * unify.c — unification, the occurs check and deep walking.
 *
 * None of these recurse on the C stack: each keeps its pending work on an
 * explicit stack of words (a local buffer that moves to the heap when a
 * term is large), so a term of a million nodes costs memory, not stack.
 *
 * Unification follows faster-miniKanren: both sides are walked; two
 * variables bind the newer to the older; a variable binds to a non-variable
 * after the occurs check (skipped when the value is ground); pairs unify car
 * first, then cdr.  Etuples unify as the list of their elements and foreign
 * terms expand into their etuple when they meet structure.
 */
#include "kanren/kanren-impl.h"

/* Rewrites etuples (and foreign terms meeting structure) as lists. */
static inline rg_term structural(rg_term t, rg_term other) {
  if (rgk_is_etuple(t)) return ((rgk_etuple *)t)->list;
  if (rgk_is_foreign(t) && (rgk_is_pair(other) || rgk_is_etuple(other) || other == RG_NIL))
    return rgk_as_list(t);
  return t;
}

/* The state of one unification.  Bindings that cannot be written in place
 * go to the persistent map; after the first BATCH_AFTER of them, the rest
 * go to a hash table instead and are added to the map in one bulk insert
 * at the end, so unifying terms with many fresh variables builds each trie
 * node once instead of copying a path per variable. */
#define BATCH_AFTER 8

typedef struct unifier {
  rg_ctx *C;
  rgk_map *S;
  uint64_t scope;
  bool occurs_check;
  rgk_stack *added;
  int direct;        /* bindings put straight into S */
  uint64_t *keys;    /* batch table: open addressing, key 0 = empty */
  rg_term *vals;
  size_t cap, n;     /* cap is a power of two, n < cap / 2 */
} unifier;

static inline size_t bslot(const unifier *u, uint64_t key) {
  size_t h = (size_t)(key * 0x9e3779b97f4a7c15ull) >> 20;
  for (h &= u->cap - 1; u->keys[h] && u->keys[h] != key; h = (h + 1) & (u->cap - 1)) {}
  return h;
}

static void batch_grow(unifier *u) {
  unifier old = *u;
  u->cap = old.cap ? old.cap * 2 : 256;
  u->keys = rgk_alloc_atomic(u->cap * sizeof(uint64_t));
  memset(u->keys, 0, u->cap * sizeof(uint64_t));
  u->vals = rgk_alloc(u->cap * sizeof(rg_term));
  for (size_t i = 0; i < old.cap; i++)
    if (old.keys[i]) {
      size_t j = bslot(u, old.keys[i]);
      u->keys[j] = old.keys[i];
      u->vals[j] = old.vals[i];
    }
}

static inline rg_term uwalk(const unifier *u, rg_term t) {
  while (rgk_is_var(t)) {
    rgk_var *x = rgk_varp(t);
    rg_term v = x->val;
    if (v == RGK_UNBOUND) {
      if (u->n) {
        size_t i = bslot(u, x->idx);
        if (u->keys[i]) {
          t = u->vals[i];
          continue;
        }
      }
      v = rgk_map_get(u->S, x->idx);
      if (v == RGK_UNBOUND) return t;
    }
    t = v;
  }
  return t;
}

static bool uoccurs(const unifier *u, rg_term x, rg_term t) {
  RGK_LOCAL_STACK(s, 64);
  for (;;) {
    /* follow the cdr spine in a tight loop while it is made of pairs that
     * are not variables; only cars that are not ground are pushed */
    while (RGK_TAG(t) == RGK_TAG_PAIR) {
      const rgk_pair *p = rgk_pairp(t);
      if (!rgk_ground(p->car)) rgk_push(&s, RGK_W(p->car));
      t = p->cdr;
    }
    rg_term w = uwalk(u, t);
    if (w == x) return true;
    if (!rgk_ground(w)) {
      if (rgk_is_etuple(w)) w = ((rgk_etuple *)w)->list;
      if (rgk_is_pair(w) && w != t) {
        t = w;
        continue;
      }
    }
    if (!s.n) return false;
    t = RGK_T(s.v[--s.n]);
  }
}

bool rgk_occurs(rg_ctx *C, rg_term x, rg_term t, const rgk_map *S) {
  unifier u = {.C = C, .S = (rgk_map *)S};
  return uoccurs(&u, x, t);
}

static inline bool bind(unifier *u, rg_term x, rg_term v, bool check) {
  if (check && u->occurs_check && !rgk_ground(v) && uoccurs(u, x, v)) return false;
  rgk_var *xv = rgk_varp(x);
  if (u->scope && xv->scope == u->scope) {
    xv->val = v;
  } else if (u->direct < BATCH_AFTER) {
    u->S = rgk_map_set(u->C, u->S, xv->idx, v);
    u->direct++;
  } else {
    if ((u->n + 1) * 2 > u->cap) batch_grow(u);
    size_t i = bslot(u, xv->idx);
    u->keys[i] = xv->idx;
    u->vals[i] = v;
    u->n++;
  }
  if (u->added) {
    rgk_push(u->added, RGK_W(x));
    rgk_push(u->added, RGK_W(v));
  }
  return true;
}

/* Adds the batched bindings to the map. */
static void flush_batch(unifier *u) {
  if (!u->n) return;
  uint64_t *keys = rgk_alloc_atomic(u->n * sizeof(uint64_t));
  rg_term *vals = rgk_alloc(u->n * sizeof(rg_term));
  size_t k = 0;
  for (size_t i = 0; i < u->cap; i++)
    if (u->keys[i]) {
      keys[k] = u->keys[i];
      vals[k++] = u->vals[i];
    }
  u->S = rgk_map_set_many(u->C, u->S, k, keys, vals);
}

/* Atoms: numbers, strings, symbols, booleans, nil, foreign terms. */
static bool atoms_equal(rg_term a, rg_term b) {
  if (rgk_is_pair(a) || rgk_is_pair(b)) return false;
  return rg_equal(a, b);
}

static bool unify_loop(unifier *u, rg_term x, rg_term y) {
  RGK_LOCAL_STACK(s, 128);
  rgk_push(&s, RGK_W(x));
  rgk_push(&s, RGK_W(y));
  while (s.n) {
    rg_term b = uwalk(u, RGK_T(s.v[--s.n]));
    rg_term a = uwalk(u, RGK_T(s.v[--s.n]));
    if (a == b) continue;
    bool av = rgk_is_var(a), bv = rgk_is_var(b);
    if (av && bv) {
      bool newer_a = rgk_varp(a)->idx > rgk_varp(b)->idx;
      if (!bind(u, newer_a ? a : b, newer_a ? b : a, false)) return false;
      continue;
    }
    if (av || bv) {
      if (!bind(u, av ? a : b, av ? b : a, true)) return false;
      continue;
    }
    a = structural(a, b);
    b = structural(b, a);
    if (rgk_is_pair(a) && rgk_is_pair(b)) {
      if (rgk_is_gpair(a) && rgk_is_gpair(b)) {
        if (!rg_equal(a, b)) return false;
        continue;
      }
      rgk_push(&s, RGK_W(rgk_cdr(a)));
      rgk_push(&s, RGK_W(rgk_cdr(b)));
      rgk_push(&s, RGK_W(rgk_car(a)));
      rgk_push(&s, RGK_W(rgk_car(b)));
      continue;
    }
    if (a == b) continue;
    if (!atoms_equal(a, b)) return false;
  }
  return true;
}

bool rgk_unify(rg_ctx *C, rg_term x, rg_term y, rgk_map **S, uint64_t scope,
               bool occurs_check, rgk_stack *added) {
  unifier u = {.C = C, .S = *S, .scope = scope, .occurs_check = occurs_check, .added = added};
  if (!unify_loop(&u, x, y)) return false;
  flush_batch(&u);
  *S = u.S;
  return true;
}

/* Simple cons template t built in env, each variable it reads walked
 * (shallowly) first, so that a part whose variables are all bound comes
 * out as a ground pair, which the occurs check and a later deep walk skip.
 * Cars recurse (their depth is bounded by the reader's nesting limit); the
 * cdr spine is followed in a loop. */
static rg_term build_walked(unifier *u, const rgk_tx *t, rgk_frame *env) {
  RGK_LOCAL_STACK(cars, 16);
  for (; t->op == TX_CONS; t = t->b)
    rgk_push(&cars, RGK_W(t->a->op == TX_CONS ? build_walked(u, t->a, env) : uwalk(u, rgk_tx_leaf(t->a, env))));
  rg_term l = uwalk(u, rgk_tx_leaf(t, env));
  while (cars.n) l = rgk_cons(u->C, RGK_T(cars.v[--cars.n]), l);
  return l;
}

/* Template-directed unification: a cons template meeting a pair (or an
 * etuple or a foreign term's expansion) is matched part by part; any other
 * part is evaluated and unified as a value.  Pending (template, term)
 * pairs wait on a local stack, car before cdr, as unify_loop does. */
static int unify_tx_loop(unifier *u, const rgk_tx *t, rgk_frame *env, rg_term y) {
  RGK_LOCAL_STACK(s, 64);
  for (;;) {
    if (t->op == TX_CONS) {
      rg_term w = uwalk(u, y);
      if (rgk_is_etuple(w)) w = ((rgk_etuple *)w)->list;
      else if (rgk_is_foreign(w)) w = rgk_as_list(w);
      if (rgk_is_pair(w)) {
        rgk_push(&s, (rgk_word)t->b);
        rgk_push(&s, RGK_W(rgk_cdr(w)));
        t = t->a;
        y = rgk_car(w);
        continue;
      }
      if (!rgk_is_var(w)) return 0; /* a pair against an atom */
      y = w;
    }
    rg_term v = t->op == TX_CONS ? build_walked(u, t, env) : rgk_tx_eval(u->C, t, env);
    if (!v) return -1;
    if (!unify_loop(u, v, y)) return 0;
    if (!s.n) return 1;
    y = RGK_T(s.v[--s.n]);
    t = (const rgk_tx *)s.v[--s.n];
  }
}

int rgk_unify_tx(rg_ctx *C, const rgk_tx *t, rgk_frame *env, rg_term v, rgk_map **S,
                 uint64_t scope, bool occurs_check, rgk_stack *added) {
  unifier u = {.C = C, .S = *S, .scope = scope, .occurs_check = occurs_check, .added = added};
  int r = unify_tx_loop(&u, t, env, v);
  if (r <= 0) return r;
  flush_batch(&u);
  *S = u.S;
  return 1;
}

/* Markers on the work stack of rgk_rebuild: never user terms. */
#define MARK_PAIR RGK_IMM(100)
#define MARK_ETUPLE RGK_IMM(101)
#define MARK_TERM RGK_IMM(102)

rg_term rgk_rebuild(rg_ctx *C, rg_term t, rgk_pre_fn pre, void *ud) {
  rgk_stack *work = &C->rw, *vals = &C->rv;
  size_t wbase = work->n, vbase = vals->n;
  rgk_push(work, RGK_W(t));
  rgk_push(work, RGK_W(MARK_TERM));
  while (work->n > wbase) {
    rg_term m = RGK_T(work->v[--work->n]);
    if (m == MARK_PAIR) {
      rg_term d = RGK_T(vals->v[--vals->n]), a = RGK_T(vals->v[--vals->n]);
      rgk_push(vals, RGK_W(rgk_cons(C, a, d)));
      continue;
    }
    if (m == MARK_ETUPLE) {
      rg_term l = RGK_T(vals->v[--vals->n]);
      rgk_push(vals, RGK_W(rg_etuple_from_list(l)));
      continue;
    }
    rg_term x = pre(RGK_T(work->v[--work->n]), ud);
    if (rgk_ground(x)) {
      rgk_push(vals, RGK_W(x));
    } else if (rgk_is_pair(x)) {
      rgk_push(work, RGK_W(MARK_PAIR));
      rgk_push(work, RGK_W(rgk_cdr(x)));
      rgk_push(work, RGK_W(MARK_TERM));
      rgk_push(work, RGK_W(rgk_car(x)));
      rgk_push(work, RGK_W(MARK_TERM));
    } else if (rgk_is_etuple(x)) {
      rgk_push(work, RGK_W(MARK_ETUPLE));
      rgk_push(work, RGK_W(((rgk_etuple *)x)->list));
      rgk_push(work, RGK_W(MARK_TERM));
    } else {
      rgk_push(vals, RGK_W(x));
    }
  }
  rg_term r = RGK_T(vals->v[vbase]);
  vals->n = vbase;
  return r;
}

static rg_term pre_walk(rg_term x, void *ud) { return rgk_walk(x, ud); }

rg_term rgk_walk_star(rg_ctx *C, rg_term t, const rgk_map *S) {
  return rgk_rebuild(C, t, pre_walk, (void *)S);
}

bool rg_unify_walk(rg_ctx *C, rg_term a, rg_term b, rg_term t, bool occurs_check, rg_term *out) {
  rgk_map *S = NULL;
  if (!rgk_unify(C, a, b, &S, 0, occurs_check, NULL)) return false;
  *out = rgk_walk_star(C, t, S);
  return true;
}

bool rg_unify_terms(rg_ctx *C, rg_term a, rg_term b, bool occurs_check, rg_term *reified) {
  rgk_map *S = NULL;
  if (!rgk_unify(C, a, b, &S, 0, occurs_check, NULL)) return false;
  if (reified) *reified = rgk_walk_star(C, rg_cons(a, b), S);
  return true;
}
