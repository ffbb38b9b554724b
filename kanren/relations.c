/*
 * relations.c — the parts of the relations library written in C.
 *
 * Most relations live in prelude.kn, written in the relational language.
 * What is here either cannot be said in the language or is not relational
 * by nature (Python kanren builds the same goals by inspecting the walked
 * arguments):
 *
 *   %distinct key goal       the answers of goal, without duplicates: an
 *                            answer is dropped when `key` reifies (with its
 *                            constraints) exactly as in an earlier answer
 *   %varo x                  x is an unbound variable (a test, not a relation)
 *   %groundo x               x contains no unbound variable (a test)
 *   (%visited-set)           a function: a new, empty set of terms
 *   %visit set t             t (reified) is not in the set yet; adds it
 *   %optional name k rest x  x is the one optional argument in `rest` (the
 *                            rest arguments of `name`, which has k fixed
 *                            ones), or #f; more is an arity error
 *   %ground-order a b u v    (u v) is (a b) or (b a), the more ground first
 *   %mapo rel lists          rel holds across the elements of the lists
 *   %map-anyo rel lists ok   map-anyo; `ok`: some element already matched
 *   %eq-assoc-args op a b n no-ident
 *                            associative equality of two argument lists
 *   membero x l              on a ground proper list: one clause per distinct
 *                            element; otherwise the prelude's %membero
 *   assoc-flatten a b        b is a with nested uses of its associative
 *                            operator spliced into its arguments
 *
 * Goals that depend on the walked values of their arguments are built by
 * `projected`: a project goal walks the arguments deeply in the current
 * state, then calls a C relation on the walked values, and that relation
 * returns the goal to run.  Deterministic ones are C goals (G_CGOAL) that
 * compute a new state directly.
 *
 * Nothing here recurses on the C stack in proportion to term size.
 */
#include "kanren/kanren-impl.h"

#include <pthread.h>

/* ------------------------------------------------------------------ goal helpers */

static rgk_tx *tx_local(uint32_t idx) {
  rgk_tx *t = rgk_alloc(sizeof *t);
  t->op = TX_LOCAL;
  t->depth = 0;
  t->idx = idx;
  return t;
}

static rgk_tx **const_args(int n, const rg_term *args) {
  rgk_tx **v = rgk_alloc((size_t)(n ? n : 1) * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = rgk_tx_const(args[i]);
  return v;
}

/* A goal computed by fn from the state (deterministic). */
static rg_goal *cgoal(rgk_cgoal_fn fn, void *ud, int n, const rg_term *args) {
  rg_goal *g = rgk_goal_new(G_CGOAL);
  g->fn = (void *)fn;
  g->ud = ud;
  g->n = (uint32_t)n;
  g->args = const_args(n, args);
  return g;
}

/* Walks args deeply, then runs the goal that relation `impl` builds from
 * the walked values. */
static rg_goal *projected(rg_term impl, int n, const rg_term *args) {
  rg_goal *call = rgk_goal_new(G_CALL);
  call->a = rgk_tx_const(impl);
  call->n = (uint32_t)n;
  call->args = rgk_alloc((size_t)(n ? n : 1) * sizeof(rgk_tx *));
  for (int i = 0; i < n; i++) call->args[i] = tx_local((uint32_t)i);
  rg_goal *p = rgk_goal_new(G_PROJECT);
  p->n = (uint32_t)n;
  p->args = const_args(n, args);
  p->body = call;
  return p;
}

/* g after one suspension, as (fresh () g) would. */
static rg_goal *delayed(rg_goal *g) {
  rg_goal *f = rgk_goal_new(G_FRESH);
  f->body = g;
  return f;
}

/* Runs a goal value (a term of kind RGK_T_GOALV). */
static rg_goal *apply_goal_value(rg_term gv) {
  rg_goal *g = rgk_goal_new(G_APPLYV);
  g->a = rgk_tx_const(gv);
  return g;
}

/* Unifies in a C goal; the occurs check is always on here. */
static rgk_state *unify_in(rg_ctx *C, rgk_state *st, rg_term a, rg_term b) {
  return rgk_solve_eq(C, st, a, b, true);
}

/* ------------------------------------------------------------------ term helpers */

/* Proper list view of a walked term: lists, etuples and expandable foreign
 * terms; NULL if t is not a proper list. */
static rg_term proper_list(rg_term t) {
  rg_term l = rgk_as_list(t);
  if (l == RG_NIL) return l;
  if (!rgk_is_pair(l) || rgk_length(l) < 0) return NULL;
  return l;
}

/* Is t ground under S?  Iterative. */
static bool ground_in(rg_term t, const rgk_map *S) {
  RGK_LOCAL_STACK(s, 64);
  rgk_push(&s, RGK_W(t));
  while (s.n) {
    rg_term u = rgk_walk(RGK_T(s.v[--s.n]), S);
    if (rgk_ground(u)) continue;
    if (rgk_is_var(u)) return false;
    if (rgk_is_etuple(u)) u = ((rgk_etuple *)u)->list;
    if (rgk_is_pair(u)) {
      rgk_push(&s, RGK_W(rgk_cdr(u)));
      rgk_push(&s, RGK_W(rgk_car(u)));
    }
  }
  return true;
}

/* ------------------------------------------------------------------ %distinct */

/* Canonical stand-ins for unbound variables in deduplication keys: the
 * n-th distinct variable of a key (in order of first appearance, car before
 * cdr) becomes marker n.  Markers never leave this file. */
static struct {
  pthread_mutex_t lock;
  rg_term *v;
  size_t n;
} markers = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static rg_term marker(size_t i) {
  pthread_mutex_lock(&markers.lock);
  if (i >= markers.n) {
    size_t n = markers.n ? markers.n * 2 : 64;
    while (n <= i) n *= 2;
    rg_term *v = rgk_alloc_global(n * sizeof *v); /* a global cache */
    if (markers.n) memcpy(v, markers.v, markers.n * sizeof *v);
    for (size_t k = markers.n; k < n; k++) {
      rgk_hdr *h = rgk_alloc_global(sizeof *h);
      h->type = RGK_T_OPAQUE;
      v[k] = (rg_term)h;
    }
    markers.v = v;
    markers.n = n;
  }
  rg_term m = markers.v[i];
  pthread_mutex_unlock(&markers.lock);
  return m;
}

/* A small identity map from variables to markers: the base map in
 * collected memory, keyed by the variable's address. */
static rg_term vmap_get(rg_map *m, rg_term v, rg_term *order) {
  bool fresh;
  rg_map_entry *e = rg_map_slot(m, RGK_W(v), 0, &fresh);
  if (fresh) {
    e->val = RGK_W(marker(m->n - 1));
    *order = rg_cons(v, *order);
  }
  return RGK_T(e->val);
}

#define MARK_PAIR RGK_IMM(130)
#define MARK_TERM RGK_IMM(131)

/* The walked term t (already walked deeply) with its variables replaced by
 * markers; *vars receives the variables in reverse order of appearance. */
static rg_term canonical(rg_term t, rg_term *vars) {
  rg_map m = {.a = &rgk_gc};
  RGK_LOCAL_STACK(work, 64);
  RGK_LOCAL_STACK(vals, 64);
  rgk_push(&work, RGK_W(t));
  rgk_push(&work, RGK_W(MARK_TERM));
  while (work.n) {
    rg_term k = RGK_T(work.v[--work.n]);
    if (k == MARK_PAIR) {
      rg_term d = RGK_T(vals.v[--vals.n]), a = RGK_T(vals.v[--vals.n]);
      rgk_push(&vals, RGK_W(rg_cons(a, d)));
      continue;
    }
    rg_term x = RGK_T(work.v[--work.n]);
    if (rgk_ground(x)) {
      rgk_push(&vals, RGK_W(x));
    } else if (rgk_is_var(x)) {
      rgk_push(&vals, RGK_W(vmap_get(&m, x, vars)));
    } else {
      if (rgk_is_etuple(x)) x = ((rgk_etuple *)x)->list; /* etuples equal their lists */
      rgk_push(&work, RGK_W(MARK_PAIR));
      rgk_push(&work, RGK_W(rgk_cdr(x)));
      rgk_push(&work, RGK_W(MARK_TERM));
      rgk_push(&work, RGK_W(rgk_car(x)));
      rgk_push(&work, RGK_W(MARK_TERM));
    }
  }
  return RGK_T(vals.v[0]);
}

/* The deduplication key of an answer: the key term walked and
 * canonicalised, with the reified constraints on its variables. */
static rg_term answer_key(rg_ctx *C, rg_term key, const rgk_state *st) {
  rg_term vars = RG_NIL;
  rg_term k = canonical(rgk_walk_star(C, key, st->S), &vars);
  if (st->C && vars != RG_NIL) k = rg_cons(k, rgk_reify(C, rgk_reverse(vars), st));
  return k;
}

/* The set of keys seen by one %distinct call. */
typedef struct seen {
  rg_term *keys;
  uint64_t *hashes;
  size_t cap, n;
} seen;

static bool seen_add(seen *s, rg_term k) {
  uint64_t h = rg_hash(k);
  if ((s->n + 1) * 2 > s->cap) {
    seen g = {0};
    g.cap = s->cap ? s->cap * 2 : 16;
    g.keys = rgk_alloc(g.cap * sizeof(rg_term));
    g.hashes = rgk_alloc_atomic(g.cap * sizeof(uint64_t));
    for (size_t i = 0; i < s->cap; i++)
      if (s->keys[i]) {
        size_t j = s->hashes[i] & (g.cap - 1);
        while (g.keys[j]) j = (j + 1) & (g.cap - 1);
        g.keys[j] = s->keys[i];
        g.hashes[j] = s->hashes[i];
      }
    g.n = s->n;
    *s = g;
  }
  size_t i = h & (s->cap - 1);
  for (; s->keys[i]; i = (i + 1) & (s->cap - 1))
    if (s->hashes[i] == h && rg_equal(s->keys[i], k)) return false;
  s->keys[i] = k;
  s->hashes[i] = h;
  s->n++;
  return true;
}

static rgk_state *distinct_check(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  return seen_add(ud, answer_key(C, args[0], st)) ? st : NULL;
}

static rg_goal *rel_distinct(rg_ctx *C, const rg_term *args, void *ud) {
  if (rgk_type(args[1]) != RGK_T_GOALV) {
    rg_error(C, RG_ERR_TYPE, "%%distinct: not a goal: %s", rg_to_string(args[1]));
    return NULL;
  }
  rg_goal *check = cgoal(distinct_check, rgk_alloc(sizeof(seen)), 1, args);
  return rg_conj2(apply_goal_value(args[1]), check);
}

/* A set of terms as a value of the language: a foreign term owning a
 * `seen` table.  Each evaluation of (%visited-set) makes a new one. */
static const rg_foreign_hooks set_hooks = {"visited-set", NULL, NULL, NULL, NULL};

static rg_term prim_visited_set(rg_ctx *C, int n, const rg_term *args, const rgk_tx *site) {
  return rg_foreign(&set_hooks, rgk_alloc(sizeof(seen)), NULL);
}

static rgk_state *visit_check(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  return seen_add(rg_foreign_ptr(args[0]), answer_key(C, args[1], st)) ? st : NULL;
}

static rg_goal *rel_visit(rg_ctx *C, const rg_term *args, void *ud) {
  if (!rg_is_foreign(args[0], &set_hooks)) {
    rg_error(C, RG_ERR_TYPE, "%%visit: not a visited set: %s", rg_to_string(args[0]));
    return NULL;
  }
  return cgoal(visit_check, NULL, 2, args);
}

/* ------------------------------------------------------------------ %varo, %groundo, %ground-order */

static rgk_state *varo_check(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  return rgk_is_var(rgk_walk(args[0], st->S)) ? st : NULL;
}

static rg_goal *rel_varo(rg_ctx *C, const rg_term *args, void *ud) {
  return cgoal(varo_check, NULL, 1, args);
}

static rgk_state *groundo_check(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  return ground_in(args[0], st->S) ? st : NULL;
}

static rg_goal *rel_groundo(rg_ctx *C, const rg_term *args, void *ud) {
  return cgoal(groundo_check, NULL, 1, args);
}

static rg_goal *rel_optional(rg_ctx *C, const rg_term *args, void *ud) {
  int64_t n = rgk_length(args[2]), k = rgk_is_int(args[1]) ? rg_int_value(args[1]) : 0;
  if (n == 0) return rg_eq(args[3], RG_FALSE);
  if (n == 1) return rg_eq(args[3], rgk_car(args[2]));
  rg_error(C, RG_ERR_ARITY, "%s expects %lld or %lld arguments, got %lld", rg_to_string(args[0]),
           (long long)k, (long long)k + 1, (long long)(n < 0 ? -1 : k + n));
  return NULL;
}

/* Python kanren's ordering key: ground terms first, then other atoms,
 * then partly ground pairs, then unbound variables. */
static int ground_rank(rg_term t, const rgk_map *S) {
  t = rgk_walk(t, S);
  if (rgk_is_var(t)) return 2;
  if (ground_in(t, S)) return -1;
  return rgk_is_pair(t) || rgk_is_etuple(t) ? 1 : 0;
}

static rgk_state *ground_order_step(rg_ctx *C, rgk_state *st, int n, const rg_term *a, void *ud) {
  bool swap = ground_rank(a[1], st->S) < ground_rank(a[0], st->S);
  rg_term uv = rgk_list2(a[2], a[3]);
  return unify_in(C, st, uv, swap ? rgk_list2(a[1], a[0]) : rgk_list2(a[0], a[1]));
}

static rg_goal *rel_ground_order(rg_ctx *C, const rg_term *args, void *ud) {
  return cgoal(ground_order_step, NULL, 4, args);
}

/* ------------------------------------------------------------------ %mapo, %map-anyo */

/* Splits the list of list arguments into an array; NULL with an error if
 * it is not a proper non-empty list. */
static rg_term *list_args(rg_ctx *C, const char *who, rg_term ls, int *k) {
  int64_t n = rgk_length(ls);
  if (n < 1) {
    rg_error(C, RG_ERR_ARITY, "%s needs a relation and at least one list", who);
    return NULL;
  }
  rg_term *v = rgk_alloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++, ls = rgk_cdr(ls)) v[i] = rgk_car(ls);
  *k = (int)n;
  return v;
}

/* All k terms are the empty list. */
static rg_goal *all_null(int k, const rg_term *l) {
  rg_goal **g = rgk_alloc((size_t)k * sizeof *g);
  for (int i = 0; i < k; i++) g[i] = rg_eq(l[i], RG_NIL);
  return rg_conj(k, g);
}

/* Each l[i] is (a[i] . d[i]) for fresh a, d; returns the conjunction. */
static rg_goal *split_all(rg_ctx *C, int k, const rg_term *l, rg_term *a, rg_term *d) {
  rg_goal **g = rgk_alloc((size_t)k * sizeof *g);
  for (int i = 0; i < k; i++) {
    a[i] = rg_var(C);
    d[i] = rg_var(C);
    g[i] = rg_eq(l[i], rg_cons(a[i], d[i]));
  }
  return rg_conj(k, g);
}

static rg_goal *rel_mapo(rg_ctx *C, const rg_term *args, void *ud) {
  int k;
  rg_term *l = list_args(C, "mapo", args[1], &k);
  if (!l) return NULL;
  rg_term *a = rgk_alloc((size_t)k * sizeof *a), *d = rgk_alloc((size_t)k * sizeof *d);
  rg_goal *split = split_all(C, k, l, a, d);
  rg_goal *body[3] = {split, rg_call(args[0], k, a),
                      rg_call((rg_term)ud, 2, (rg_term[]){args[0], rg_list(k, d)})};
  rg_goal *clauses[2] = {all_null(k, l), rg_conj(3, body)};
  return rg_conde(2, clauses);
}

static rg_goal *rel_map_anyo(rg_ctx *C, const rg_term *args, void *ud) {
  int k;
  rg_term *l = list_args(C, "map-anyo", args[1], &k);
  if (!l) return NULL;
  bool matched = args[2] != RG_FALSE;
  rg_term self = (rg_term)ud;
  rg_term *a = rgk_alloc((size_t)k * sizeof *a), *d = rgk_alloc((size_t)k * sizeof *d);
  rg_goal *split = split_all(C, k, l, a, d);
  rg_term rest = rg_list(k, d);
  /* the relation holds here ... */
  rg_goal *here[2] = {rg_call(args[0], k, a), rg_call(self, 3, (rg_term[]){args[0], rest, RG_TRUE})};
  /* ... or the elements are equal */
  rg_goal **same = rgk_alloc((size_t)(k + 1) * sizeof *same);
  for (int i = 0; i + 1 < k; i++) same[i] = rg_eq(a[i], a[i + 1]);
  /* two suspensions put the branches where rel holds first in the common
   * case, as Python kanren's depth-first streams do */
  same[k > 1 ? k - 1 : 0] = delayed(delayed(rg_call(self, 3, (rg_term[]){args[0], rest, args[2]})));
  rg_goal *choice[2] = {rg_conj(2, here), rg_conj(k > 1 ? k : 1, same)};
  rg_goal *pair_clause = rg_conj2(split, rg_conde(2, choice));
  rg_goal *clauses[2] = {matched ? all_null(k, l) : rg_fail(), pair_clause};
  return rg_conde(2, clauses);
}

/* ------------------------------------------------------------------ membero */

/* The walked arguments x l.  A ground list gives a disjunction over its
 * distinct elements in order of first occurrence, the answers of the
 * relational definition without its growing disequality constraints. */
static rg_goal *membero_impl(rg_ctx *C, const rg_term *w, void *ud) {
  rg_term l = proper_list(w[1]);
  if (!l || !rgk_ground(l)) return rg_call(((rgk_global *)ud)->value, 2, w);
  seen *s = rgk_alloc(sizeof *s);
  RGK_LOCAL_STACK(alts, 16);
  for (; rgk_is_pair(l); l = rgk_cdr(l))
    if (seen_add(s, rgk_car(l))) rgk_push(&alts, RGK_W(rg_eq(w[0], rgk_car(l))));
  return rg_conde((int)alts.n, (rg_goal **)alts.v);
}

/* ------------------------------------------------------------------ associativity */

static rg_term sym_associative;

static bool is_associative(rg_ctx *C, rg_term op) {
  return !rgk_is_var(op) && rg_has_fact(C, sym_associative, 1, &op);
}

/* Splices, in the proper list `items`, every element of the form
 * (op x ...) (with at least one argument) into its arguments, recursively.
 * Returns the new list as an array in *out (count *n). */
static rg_term *flatten_args(rg_ctx *C, rg_term op, rg_term items, int64_t *n) {
  RGK_LOCAL_STACK(pending, 32); /* lists still to splice, innermost on top */
  RGK_LOCAL_STACK(acc, 32);
  rgk_push(&pending, RGK_W(items));
  while (pending.n) {
    rg_term l = RGK_T(pending.v[pending.n - 1]);
    if (!rgk_is_pair(l)) {
      pending.n--;
      continue;
    }
    pending.v[pending.n - 1] = RGK_W(rgk_cdr(l));
    rg_term x = rgk_car(l), xl = proper_list(x);
    if (xl && rgk_is_pair(xl) && rgk_is_pair(rgk_cdr(xl)) && rg_equal(rgk_car(xl), op))
      rgk_push(&pending, RGK_W(rgk_cdr(xl)));
    else
      rgk_push(&acc, RGK_W(x));
  }
  rg_term *v = rgk_alloc((acc.n ? acc.n : 1) * sizeof *v);
  memcpy(v, acc.v, acc.n * sizeof *v);
  *n = (int64_t)acc.n;
  return v;
}

/* An application of op to items[from..to) (an etuple). */
static rg_term build_app(rg_term op, const rg_term *items, int64_t from, int64_t to) {
  return rg_etuple(op, (int)(to - from), items + from);
}

/* items with the window [i, i+size) replaced by one application of op. */
static rg_term group_window(rg_term op, const rg_term *items, int64_t n, int64_t i, int64_t size) {
  rg_term l = RG_NIL;
  for (int64_t k = n; k-- > i + size;) l = rg_cons(items[k], l);
  l = rg_cons(build_app(op, items, i, i + size), l);
  for (int64_t k = i; k-- > 0;) l = rg_cons(items[k], l);
  return l;
}

/* The arguments of assoc-flatten: the walked term and its flattening. */
static rgk_state *assoc_flatten_step(rg_ctx *C, rgk_state *st, int n, const rg_term *a, void *ud) {
  rg_term t = rgk_walk_star(C, a[0], st->S);
  rg_term l = proper_list(t);
  if (l && rgk_is_pair(l) && is_associative(C, rgk_car(l))) {
    int64_t k;
    rg_term *items = flatten_args(C, rgk_car(l), rgk_cdr(l), &k);
    rg_term flat = rg_cons(rgk_car(l), rg_list((int)k, items));
    if (rgk_is_etuple(t) || rgk_is_foreign(t)) flat = rg_etuple_from_list(flat);
    t = flat;
  }
  return unify_in(C, st, a[1], t);
}

static rg_goal *rel_assoc_flatten(rg_ctx *C, const rg_term *args, void *ud) {
  return cgoal(assoc_flatten_step, NULL, 2, args);
}

/* Goals (== target candidate) for each candidate, as one disjunction. */
static rg_goal *any_eq(rg_term target, rgk_stack *cands) {
  rg_goal **g = rgk_alloc((cands->n ? cands->n : 1) * sizeof *g);
  for (size_t i = 0; i < cands->n; i++) g[i] = rg_eq(target, RGK_T(cands->v[i]));
  return rg_conde((int)cands->n, g);
}

/* What %eq-assoc-args needs at run time: itself (to retry once an
 * argument list is known) and the library's listo. */
typedef struct assoc_env {
  rg_term self;
  rgk_global *listo;
} assoc_env;

/* The walked arguments: op a b n no-ident.  a and b are argument lists;
 * n is #f or a positive integer (the size of the group); no-ident #t
 * excludes the identical grouping. */
static rg_goal *eq_assoc_args_impl(rg_ctx *C, const rg_term *w, void *ud) {
  assoc_env *env = ud;
  rg_term op = w[0], a = w[1], b = w[2], nv = w[3];
  bool no_ident = w[4] != RG_FALSE;
  int64_t want = -1;
  if (nv != RG_FALSE) {
    if (!rgk_is_int(nv) || rg_int_value(nv) < 1) {
      rg_error(C, RG_ERR_TYPE, "eq-assoc-args: the group size must be a positive integer, got %s",
               rg_to_string(nv));
      return NULL;
    }
    want = rg_int_value(nv);
  }
  rg_term al = proper_list(a), bl = proper_list(b);
  if (!al && bl) { /* the proper list first */
    rg_term t = a;
    a = b;
    b = t;
    al = bl;
    bl = NULL;
  }
  if (!al) {
    /* neither is a proper list yet: enumerate the first as one, then retry */
    rg_term again[5] = {op, a, b, nv, w[4]};
    return rg_conj2(rg_call(env->listo->value, 1, &a), rg_call(env->self, 5, again));
  }
  RGK_LOCAL_STACK(cands, 16);
  rg_goal *ident = no_ident ? rg_neq(a, b) : rg_succeed();
  if (bl) {
    int64_t na, nb;
    rg_term *fa = flatten_args(C, op, al, &na), *fb = flatten_args(C, op, bl, &nb);
    if (na == nb) return rg_conj2(ident, rg_eq(rg_list((int)na, fa), rg_list((int)nb, fb)));
    rg_term *sm = na < nb ? fa : fb, *lg = na < nb ? fb : fa;
    int64_t nsm = na < nb ? na : nb, nlg = na < nb ? nb : na, size = nlg - nsm + 1;
    for (int64_t i = 0; i + size <= nlg; i++)
      rgk_push(&cands, RGK_W(group_window(op, lg, nlg, i, size)));
    return rg_conj2(ident, any_eq(rg_list((int)nsm, sm), &cands));
  }
  /* a is a proper list, b is not: the groupings of a */
  if (rgk_length(al) == 1) {
    if (no_ident || (want != -1 && want != 1)) return rg_fail();
    return rg_eq(al, b);
  }
  int64_t n;
  rg_term *flat = flatten_args(C, op, al, &n);
  int64_t lo = want > 0 ? want : 2, hi = want > 0 ? want : (no_ident ? n - 1 : n);
  for (int64_t size = lo; size <= hi && size <= n; size++) {
    for (int64_t i = 0; i + size <= n; i++) {
      rg_term c = size == n ? rg_list((int)n, flat) : group_window(op, flat, n, i, size);
      if (!no_ident || !rg_equal(c, al)) rgk_push(&cands, RGK_W(c));
    }
  }
  return any_eq(b, &cands);
}

/* ------------------------------------------------------------------ installation */

typedef struct projector {
  rg_term impl;
  int n;
} projector;

/* A relation that walks its arguments and hands them to impl. */
static rg_goal *rel_projecting(rg_ctx *C, const rg_term *args, void *ud) {
  projector *p = ud;
  return projected(p->impl, p->n, args);
}

static rg_term define_lib(rg_interp *I, const char *name, rg_term value) {
  rgk_table_get(&I->lib, rg_symbol(name), true)->value = value;
  return value;
}

static rg_term define_rel(rg_interp *I, const char *name, int arity, rg_relation_fn fn, void *ud) {
  return define_lib(I, name, rg_relation(name, arity, fn, ud));
}

rg_term rg_relation_projecting(const char *name, int arity, rg_relation_fn fn, void *ud) {
  projector *p = rgk_alloc(sizeof *p);
  p->impl = rg_relation(name, arity, fn, ud);
  p->n = arity;
  return rg_relation(name, arity, rel_projecting, p);
}

/* Defines `name` as a relation of n arguments that walks them deeply and
 * calls impl(walked args, ud). */
static rg_term define_projecting(rg_interp *I, const char *name, int n, rg_relation_fn impl,
                                 void *ud) {
  return define_lib(I, name, rg_relation_projecting(name, n, impl, ud));
}

void rgk_install_builtins(rg_interp *I) {
  sym_associative = rg_symbol("associative");
  define_lib(I, "associative", rgk_facts_proc(sym_associative));
  define_lib(I, "commutative", rgk_facts_proc(rg_symbol("commutative")));
  define_rel(I, "%distinct", 2, rel_distinct, NULL);
  define_rel(I, "%varo", 1, rel_varo, NULL);
  define_rel(I, "%groundo", 1, rel_groundo, NULL);
  define_rel(I, "%visit", 2, rel_visit, NULL);
  rgk_proc *vs = rgk_alloc(sizeof *vs);
  vs->h = (rgk_hdr){.type = RGK_T_PROC, .aux = PROC_PRIM};
  vs->name = rg_symbol("%visited-set");
  vs->arity = 0;
  vs->prim = prim_visited_set;
  define_lib(I, "%visited-set", (rg_term)vs);
  define_rel(I, "%optional", 4, rel_optional, NULL);
  define_rel(I, "%ground-order", 4, rel_ground_order, NULL);
  define_rel(I, "assoc-flatten", 2, rel_assoc_flatten, NULL);
  rgk_proc *mapo = (rgk_proc *)define_rel(I, "%mapo", 2, rel_mapo, NULL);
  mapo->ud = mapo;
  rgk_proc *many = (rgk_proc *)define_rel(I, "%map-anyo", 3, rel_map_anyo, NULL);
  many->ud = many;
  define_projecting(I, "membero", 2, membero_impl, rgk_table_get(&I->lib, rg_symbol("%membero"), true));
  assoc_env *env = rgk_alloc(sizeof *env);
  env->listo = rgk_table_get(&I->lib, rg_symbol("listo"), true); /* defined by the prelude */
  env->self = define_projecting(I, "%eq-assoc-args", 5, eq_assoc_args_impl, env);
}
