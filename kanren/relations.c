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
 *   %group-size name n       n is #f or a positive integer (else an error
 *                            naming `name`), checked before any search
 *   %ground-order a b u v    (u v) is (a b) or (b a), the more ground first
 *   %mapo rel lists          rel holds across the elements of the lists
 *   %map-anyo rel lists ok   map-anyo; `ok`: some element already matched
 *   %eq-assoc-args op a b n no-ident
 *                            associative equality of two argument lists
 *   %py-walko rel rator in out, %py-map-anyo rel lists,
 *   %py-term-walko rator-rel rands-rel format-rel a b
 *                            walko, map-anyo and term-walko answering in
 *                            Python kanren's order (see "Python kanren's
 *                            order" below); %py-pull hands their answers on
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

/* (walked) name n: n is #f, unbound, or a positive integer group size. */
static rg_goal *group_size_impl(rg_ctx *C, const rg_term *w, void *ud) {
  (void)ud;
  rg_term n = w[1];
  if (n == RG_FALSE || rgk_is_var(n) || (rgk_is_int(n) && rg_int_value(n) >= 1)) return rg_succeed();
  rg_error(C, RG_ERR_TYPE, "%s: the group size must be a positive integer, got %s", rg_to_string(w[0]),
           rg_to_string(n));
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

/* ------------------------------------------------------------------ Python kanren's order */

/* walko and map-anyo on a known input give their answers in Python
 * kanren's order.  That order comes from Python's lazy generators:
 * a disjunction takes one answer from each clause's stream in turn, and a
 * conjunction takes one answer in turn from the streams of the next goal
 * applied to each answer of the first (toolz.interleave over a lazily
 * growing set of streams).  These are modelled here by small pull-based
 * generators (`gen`) whose leaves are unifications and sub-searches of the
 * user's relation (rgk_query_from_state); the generator's states are then
 * handed to the search one at a time by %py-pull.  Each branch forks its
 * state into a new scope, so no state's variables are written in place.
 * Pulling recurses on the C stack in proportion to the nesting of the
 * walked term (its depth plus the length of its lists), as Python does;
 * past GEN_MAX_DEPTH nested pulls it stops with an error, as Python stops
 * at its recursion limit, instead of running out of stack. */

typedef struct gen gen;
/* One generator run: its error (the first), the pulls now nested. */
typedef struct gen_run { int err; int depth; } gen_run;
typedef rgk_state *(*gen_next_fn)(rg_ctx *C, gen *g);
struct gen { gen_next_fn next; gen_run *run; };

#define GEN_MAX_DEPTH 1000

static rgk_state *gnext(rg_ctx *C, gen *g) {
  gen_run *run = g->run;
  if (run->err) return NULL;
  if (run->depth >= GEN_MAX_DEPTH) {
    run->err = rg_error(C, RG_ERR_LIMIT, "a term nested more than %d levels deep for Python kanren's answer order "
                        "(walko, map-anyo, eq-assoc, ...)", GEN_MAX_DEPTH);
    return NULL;
  }
  run->depth++;
  rgk_state *st = g->next(C, g);
  run->depth--;
  return st;
}

static rgk_state *fork_state(rg_ctx *C, rgk_state *st) {
  return rgk_state_new(C, rgk_new_scope(C), st->S, st->C);
}

/* At most one state. */
typedef struct gen_one { gen g; rgk_state *st; } gen_one;

static rgk_state *one_next(rg_ctx *C, gen *g) {
  gen_one *o = (gen_one *)g;
  rgk_state *st = o->st;
  o->st = NULL;
  return st;
}

static gen *gen_state(gen_run *run, rgk_state *st) {
  gen_one *o = rgk_alloc(sizeof *o);
  *o = (gen_one){{one_next, run}, st};
  return &o->g;
}

/* The answers of a goal of the language (a sub-search). */
typedef struct gen_sub { gen g; rg_query *Q; } gen_sub;

static rgk_state *sub_next(rg_ctx *C, gen *g) {
  gen_sub *q = (gen_sub *)g;
  if (!q->Q) return NULL;
  rgk_state *st = rgk_query_next_state(q->Q);
  if (!st) {
    int rc = rg_query_status(q->Q);
    if (rc && !g->run->err) g->run->err = rc;
    q->Q = NULL;
  }
  return st;
}

static gen *gen_goal(rg_ctx *C, gen_run *run, rg_goal *goal, rgk_state *st) {
  gen_sub *q = rgk_alloc(sizeof *q);
  *q = (gen_sub){{sub_next, run}, rgk_query_from_state(C, goal, st)};
  return &q->g;
}

/* A builder makes the stream of a goal applied to a state. */
typedef gen *(*build_fn)(rg_ctx *C, gen_run *run, rgk_state *st, void *env);
typedef struct builder { build_fn fn; void *env; } builder;

/* Round robin over streams that a source produces lazily (all of the
 * source's streams are started before the first one is asked again);
 * exhausted streams leave the rotation.  src_bind and src_clauses are
 * the two sources. */
typedef struct gen_rr {
  gen g;
  gen *(*src)(rg_ctx *C, struct gen_rr *r); /* the next stream, NULL when none */
  bool src_done;
  rgk_stack active;
  size_t pos;
  gen *z;           /* bind: the first goal's stream */
  builder next_goal; /* bind: the goal applied to each of its states */
  rgk_state *st;    /* clauses: the state */
  const builder *clauses;
  int nclauses, clause;
} gen_rr;

static rgk_state *rr_next(rg_ctx *C, gen *g) {
  gen_rr *r = (gen_rr *)g;
  for (;;) {
    if (r->pos >= r->active.n) {
      gen *fresh = r->src_done ? NULL : r->src(C, r);
      if (fresh) {
        rgk_push(&r->active, (rgk_word)fresh);
      } else {
        r->src_done = true;
        if (!r->active.n) return NULL;
        r->pos = 0;
      }
      continue;
    }
    rgk_state *st = gnext(C, (gen *)r->active.v[r->pos]);
    if (st) {
      r->pos++;
      return st;
    }
    memmove(r->active.v + r->pos, r->active.v + r->pos + 1, (r->active.n - r->pos - 1) * sizeof(rgk_word));
    r->active.n--;
  }
}

static gen_rr *rr_new(gen_run *run) {
  gen_rr *r = rgk_alloc(sizeof *r);
  r->g = (gen){rr_next, run};
  r->active = (rgk_stack){rgk_alloc(8 * sizeof(rgk_word)), 0, 8, true};
  return r;
}

static gen *src_bind(rg_ctx *C, gen_rr *r) {
  rgk_state *st = gnext(C, r->z);
  return st ? r->next_goal.fn(C, r->g.run, st, r->next_goal.env) : NULL;
}

/* Python's bind: the goal `next` applied to each state of z, interleaved. */
static gen *gen_bind(gen_run *run, gen *z, builder next) {
  gen_rr *r = rr_new(run);
  r->src = src_bind;
  r->z = z;
  r->next_goal = next;
  return &r->g;
}

static gen *src_clauses(rg_ctx *C, gen_rr *r) {
  if (r->clause >= r->nclauses) return NULL;
  const builder *b = &r->clauses[r->clause++];
  return b->fn(C, r->g.run, fork_state(C, r->st), b->env);
}

/* Python's conde: the clauses' streams, interleaved. */
static gen *gen_conde(gen_run *run, rgk_state *st, int n, const builder *clauses) {
  gen_rr *r = rr_new(run);
  r->src = src_clauses;
  r->st = st;
  r->clauses = clauses;
  r->nclauses = n;
  return &r->g;
}

/* The common case: two clauses over one environment each. */
static gen *gen_conde2(gen_run *run, rgk_state *st, builder a, builder b) {
  builder *cl = rgk_alloc(2 * sizeof *cl);
  cl[0] = a;
  cl[1] = b;
  return gen_conde(run, st, 2, cl);
}

/* ---- map-anyo: (map-anyo rel l ...) over k lists */

typedef struct many {
  builder elem;  /* the relation on one tuple of elements: env receives the tuple */
  gen *(*elem_gen)(rg_ctx *C, gen_run *run, rgk_state *st, const struct many *m, const rg_term *xs);
  void *data;    /* the relation, for elem_gen */
  int k;
  const rg_term *lists;
  bool any;      /* the relation already held on an earlier tuple */
  const rg_term *heads, *tails; /* after the split */
} many;

static gen *many_gen(rg_ctx *C, gen_run *run, rgk_state *st, void *env);

static many *many_rest(const many *m, bool any) {
  many *r = rgk_alloc(sizeof *r);
  *r = *m;
  r->lists = m->tails;
  r->any = any;
  return r;
}

/* the relation holds on the heads, then map-anyo on the tails */
static gen *many_rel_clause(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  many *m = env;
  gen *z = m->elem_gen(C, run, st, m, m->heads);
  return gen_bind(run, z, (builder){many_gen, many_rest(m, true)});
}

/* the heads are equal, then map-anyo on the tails */
static gen *many_eq_clause(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  many *m = env;
  for (int i = 0; st && i + 1 < m->k; i++) st = unify_in(C, st, m->heads[i], m->heads[i + 1]);
  if (!st) return gen_state(run, NULL);
  return many_gen(C, run, st, many_rest(m, m->any));
}

static gen *many_null_clause(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  many *m = env;
  for (int i = 0; st && i < m->k; i++) st = unify_in(C, st, m->lists[i], RG_NIL);
  return gen_state(run, st);
}

static gen *many_pair_clause(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  many *m = env, *split = rgk_alloc(sizeof *split);
  *split = *m;
  rg_term *a = rgk_alloc((size_t)m->k * sizeof *a), *d = rgk_alloc((size_t)m->k * sizeof *d);
  for (int i = 0; st && i < m->k; i++) {
    a[i] = rg_var(C);
    d[i] = rg_var(C);
    st = unify_in(C, st, m->lists[i], rg_cons(a[i], d[i]));
  }
  if (!st) return gen_state(run, NULL);
  split->heads = a;
  split->tails = d;
  return gen_conde2(run, st, (builder){many_rel_clause, split}, (builder){many_eq_clause, split});
}

static gen *many_gen(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  builder *cl = rgk_alloc(2 * sizeof *cl);
  cl[0] = (builder){many_null_clause, env};
  cl[1] = (builder){many_pair_clause, env};
  const many *m = env;
  return m->any ? gen_conde(run, st, 2, cl) : gen_conde(run, st, 1, cl + 1);
}

/* map-anyo's element relation: a call of the user's relation */
static gen *many_call_elem(rg_ctx *C, gen_run *run, rgk_state *st, const many *m, const rg_term *xs) {
  return gen_goal(C, run, rg_call((rg_term)m->data, m->k, xs), st);
}

/* ---- walko: rel at the root, or walko inside (on the arguments, when
 * compound terms are entered through a rator relation) */

typedef struct walk { rg_term rel, rator, in, out; } walk;

static gen *walko_gen(rg_ctx *C, gen_run *run, rgk_state *st, void *env);

static gen *walk_elem(rg_ctx *C, gen_run *run, rgk_state *st, const many *m, const rg_term *xs) {
  const walk *w = m->data;
  walk *e = rgk_alloc(sizeof *e);
  *e = (walk){w->rel, w->rator, xs[0], xs[1]};
  return walko_gen(C, run, st, e);
}

static many *walk_many(const walk *w, rg_term a, rg_term b) {
  many *m = rgk_alloc(sizeof *m);
  rg_term *l = rgk_alloc(2 * sizeof *l);
  l[0] = a;
  l[1] = b;
  *m = (many){.elem_gen = walk_elem, .data = (void *)w, .k = 2, .lists = l};
  return m;
}

static gen *walk_root(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  walk *w = env;
  return gen_goal(C, run, rg_call(w->rel, 2, (rg_term[]){w->in, w->out}), st);
}

static gen *walk_inside(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  walk *w = env;
  if (w->rator == RG_FALSE) return many_gen(C, run, st, walk_many(w, w->in, w->out));
  rg_term ri = rg_var(C), ai = rg_var(C), ro = rg_var(C), ao = rg_var(C);
  st = unify_in(C, st, w->in, rg_cons(ri, ai));
  if (st) st = unify_in(C, st, w->out, rg_cons(ro, ao));
  if (!st) return gen_state(run, NULL);
  gen *z = gen_goal(C, run, rg_call(w->rator, 2, (rg_term[]){ri, ro}), st);
  return gen_bind(run, z, (builder){many_gen, walk_many(w, ai, ao)});
}

static gen *walko_gen(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  return gen_conde2(run, st, (builder){walk_root, env}, (builder){walk_inside, env});
}

/* ---- handing a generator's states to the search */

static const rg_foreign_hooks gen_hooks = {"answer-generator", NULL, NULL, NULL, NULL};
/* The %py-pull relation of an interpreter (the ud of the %py-* relations). */
typedef struct pull_cell { rg_term pull; } pull_cell;

static rgk_state *emit_state(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  return fork_state(C, ud);
}

/* %py-pull g: the remaining states of the generator g, in order. */
static rg_goal *py_pull_impl(rg_ctx *C, const rg_term *w, void *ud) {
  rg_term self = ((pull_cell *)ud)->pull;
  gen *g = rg_foreign_ptr(w[0]);
  rgk_state *st = gnext(C, g);
  if (g->run->err) return NULL; /* an error or a limit, already reported */
  if (!st) return rg_fail();
  rg_goal *clauses[2] = {cgoal(emit_state, st, 0, NULL), delayed(rg_call(self, 1, w))};
  return rg_conde(2, clauses);
}

/* Starts a generator in the current state; binds args[n-1] to it. */
typedef gen *(*gen_start_fn)(rg_ctx *C, gen_run *run, rgk_state *st, const rg_term *args);

static rgk_state *py_start_step(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  gen_run *run = rgk_alloc(sizeof *run);
  gen *g = ((gen_start_fn)ud)(C, run, fork_state(C, st), args);
  return unify_in(C, st, args[n - 1], rg_foreign(&gen_hooks, g, NULL));
}

/* A goal: start a generator on args, then pull its states. */
static rg_goal *py_ordered(rg_ctx *C, void *cell, gen_start_fn start, int n, const rg_term *args) {
  rg_term *a = rgk_alloc((size_t)(n + 1) * sizeof *a);
  memcpy(a, args, (size_t)n * sizeof *a);
  rg_term h = a[n] = rg_var(C);
  return rg_conj2(cgoal(py_start_step, (void *)start, n + 1, a), rg_call(((pull_cell *)cell)->pull, 1, &h));
}

/* ---- term-walko: rands-rel at compound subterms whose operator satisfies
 * rator-rel; format-rel (or #f) normalises each term first */

typedef struct twalk { rg_term rator_rel, rands_rel, format_rel, s, t, w; } twalk;

static twalk *twalk_at(const twalk *base, rg_term s, rg_term t) {
  twalk *w = rgk_alloc(sizeof *w);
  *w = *base;
  w->s = s;
  w->t = t;
  return w;
}

/* (u v): (s t) in Python kanren's ground order, walked in st */
static void ground_ordered(rgk_state *st, rg_term s, rg_term t, rg_term *u, rg_term *v) {
  bool swap = ground_rank(t, st->S) < ground_rank(s, st->S);
  *u = swap ? t : s;
  *v = swap ? s : t;
}

/* the rands relation after the rator relation accepted the operator */
static gen *tw_single_rands(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  twalk *w = env; /* s: u's rands, t: v's rands, w: the operator */
  st = unify_in(C, st, w->s, rg_cons(rg_var(C), rg_var(C)));
  if (st) st = unify_in(C, st, w->t, rg_cons(rg_var(C), rg_var(C)));
  if (!st) return gen_state(run, NULL);
  return gen_goal(C, run, rg_call(w->rands_rel, 3, (rg_term[]){w->s, w->t, w->w}), st);
}

/* one application at the root of s and t */
static gen *tw_single(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  twalk *w = env, *r = rgk_alloc(sizeof *r);
  rg_term u, v, op = rg_var(C), ur = rg_var(C), vr = rg_var(C);
  ground_ordered(st, w->s, w->t, &u, &v);
  st = unify_in(C, st, u, rg_cons(op, ur));
  if (st) st = unify_in(C, st, v, rg_cons(op, vr));
  if (!st) return gen_state(run, NULL);
  *r = *w;
  r->s = ur;
  r->t = vr;
  r->w = op;
  gen *z = gen_goal(C, run, rg_call(w->rator_rel, 1, &op), st);
  return gen_bind(run, z, (builder){tw_single_rands, r});
}

static gen *tw_step(rg_ctx *C, gen_run *run, rgk_state *st, void *env);

static gen *tw_step_elem(rg_ctx *C, gen_run *run, rgk_state *st, const many *m, const rg_term *xs) {
  return tw_step(C, run, st, twalk_at(m->data, xs[0], xs[1]));
}

static gen *tw_same(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  twalk *w = env;
  return gen_state(run, unify_in(C, st, w->s, w->t));
}

/* after walking the arguments (w->s is the walked term): return it, or
 * apply once more at the root */
static gen *tw_after_walk(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  return gen_conde2(run, st, (builder){tw_same, env}, (builder){tw_single, env});
}

static gen *tw_root_first(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  twalk *w = env;
  return tw_single(C, run, st, twalk_at(w, w->w, w->t));
}

static gen *tw_walk_first(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  twalk *w = env;
  rg_term z = rg_var(C);
  many *m = rgk_alloc(sizeof *m);
  rg_term *l = rgk_alloc(2 * sizeof *l);
  l[0] = w->w;
  l[1] = z;
  *m = (many){.elem_gen = tw_step_elem, .data = w, .k = 2, .lists = l};
  return gen_bind(run, many_gen(C, run, st, m), (builder){tw_after_walk, twalk_at(w, z, w->t)});
}

/* after formatting: w->w is the formatted u, w->t is v */
static gen *tw_step_body(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  return gen_conde2(run, st, (builder){tw_root_first, env}, (builder){tw_walk_first, env});
}

/* one or more applications anywhere in s and t */
static gen *tw_step(rg_ctx *C, gen_run *run, rgk_state *st, void *env) {
  twalk *w = env, *r;
  rg_term u, v;
  ground_ordered(st, w->s, w->t, &u, &v);
  r = twalk_at(w, u, v);
  if (w->format_rel == RG_FALSE) {
    r->w = u;
    return tw_step_body(C, run, st, r);
  }
  r->w = rg_var(C);
  gen *z = gen_goal(C, run, rg_call(w->format_rel, 2, (rg_term[]){u, r->w}), st);
  return gen_bind(run, z, (builder){tw_step_body, r});
}

static gen *start_term_walko(rg_ctx *C, gen_run *run, rgk_state *st, const rg_term *args) {
  twalk *w = rgk_alloc(sizeof *w);
  *w = (twalk){args[0], args[1], rgk_walk(args[2], st->S), args[3], args[4], NULL};
  return gen_conde2(run, st, (builder){tw_step, w}, (builder){tw_same, w});
}

/* (%py-term-walko rator-rel rands-rel format-rel a b): a and b equal, or
 * related by one or more steps (Python kanren's term_walko) */
static rg_goal *rel_py_term_walko(rg_ctx *C, const rg_term *args, void *ud) {
  return py_ordered(C, ud, start_term_walko, 5, args);
}

static gen *start_walko(rg_ctx *C, gen_run *run, rgk_state *st, const rg_term *args) {
  walk *w = rgk_alloc(sizeof *w);
  *w = (walk){args[0], rgk_walk(args[1], st->S), args[2], args[3]};
  return walko_gen(C, run, st, w);
}

/* (%py-walko rel rator in out): rator is #f or a relation */
static rg_goal *rel_py_walko(rg_ctx *C, const rg_term *args, void *ud) {
  return py_ordered(C, ud, start_walko, 4, args);
}

static gen *start_map_anyo(rg_ctx *C, gen_run *run, rgk_state *st, const rg_term *args) {
  int k;
  rg_term *l = list_args(C, "map-anyo", rgk_walk_star(C, args[1], st->S), &k);
  many *m = rgk_alloc(sizeof *m);
  *m = (many){.elem_gen = many_call_elem, .data = (void *)args[0], .k = l ? k : 0, .lists = l};
  return l ? many_gen(C, run, st, m) : gen_state(run, NULL);
}

/* (%py-map-anyo rel lists) */
static rg_goal *rel_py_map_anyo(rg_ctx *C, const rg_term *args, void *ud) {
  return py_ordered(C, ud, start_map_anyo, 2, args);
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
      rg_error(C, RG_ERR_TYPE, "eq-assoc: the group size must be a positive integer, got %s",
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

/* ------------------------------------------------------------------ commutative arguments */

/* Python kanren's permuteo with no_ident, the rands goal of its eq_comm:
 * the permutations of the proper list among a and b (a's first) in
 * itertools.permutations order (by position, lexicographically), the
 * identity left out, one disjunction of (== other permutation), so the
 * answers come in that order.  With both lists known, elements equal on
 * both sides cancel first (Python's Counter difference); if all cancel,
 * the goal succeeds once; ground lists are compared, not enumerated.
 * Lists longer than COMM_MAX_EAGER, or neither side a list yet, take the
 * library's permuteo (a different order). */
#define COMM_MAX_EAGER 8

/* Counts of t in the n terms v, by rg_equal. */
static int64_t count_of(rg_term t, const rg_term *v, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++) c += rg_equal(t, v[i]);
  return c;
}

/* Python's Counter(a) - Counter(b) as elements: each distinct element of
 * a (first occurrences in order), repeated by how many more times it
 * occurs in a than in b.  *ndistinct: distinct elements of the result. */
static rg_term *multiset_minus(const rg_term *a, int64_t na, const rg_term *b, int64_t nb, int64_t *n,
                               int64_t *ndistinct) {
  rg_term *out = rgk_alloc((size_t)(na + 1) * sizeof *out);
  *n = 0, *ndistinct = 0;
  for (int64_t i = 0; i < na; i++) {
    if (count_of(a[i], a, i)) continue; /* not the first occurrence */
    int64_t extra = count_of(a[i], a, na) - count_of(a[i], b, nb);
    if (extra > 0) (*ndistinct)++;
    for (int64_t k = 0; k < extra; k++) out[(*n)++] = a[i];
  }
  return out;
}

static int64_t distinct_count(const rg_term *a, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; i++) d += !count_of(a[i], a, i);
  return d;
}

/* The next permutation of idx[0..n) in lexicographic order; false after
 * the last. */
static bool next_perm(int *idx, int n) {
  int i = n - 2;
  while (i >= 0 && idx[i] > idx[i + 1]) i--;
  if (i < 0) return false;
  int j = n - 1;
  while (idx[j] < idx[i]) j--;
  int t = idx[i];
  idx[i] = idx[j], idx[j] = t;
  for (int l = i + 1, r = n - 1; l < r; l++, r--) t = idx[l], idx[l] = idx[r], idx[r] = t;
  return true;
}

/* (== other p) for the permutations p of v, in order (the first skipped
 * with skip_first, or moved second with ident_second: Python's conde of
 * permuteo and eq interleaves so); or, when other is ground too, whether
 * it is one. */
static rg_goal *perms_eq(rg_term other, const rg_term *v, int64_t n, bool skip_first, bool ground,
                         bool ident_second) {
  RGK_LOCAL_STACK(cands, 16);
  int idx[COMM_MAX_EAGER];
  for (int i = 0; i < n; i++) idx[i] = i;
  rg_term *p = rgk_alloc((size_t)(n + 1) * sizeof *p);
  for (bool more = true, first = true; more; more = next_perm(idx, (int)n), first = false) {
    if (first && skip_first) continue;
    for (int i = 0; i < n; i++) p[i] = v[idx[i]];
    rg_term c = rg_list((int)n, p);
    if (ground && rg_equal(c, other)) return rg_succeed();
    if (!ground) rgk_push(&cands, RGK_W(c));
    if (first && ident_second && n > 1 && next_perm(idx, (int)n)) { /* the next one first */
      for (int i = 0; i < n; i++) p[i] = v[idx[i]];
      rg_term d = rg_list((int)n, p);
      cands.v[cands.n - 1] = RGK_W(d);
      rgk_push(&cands, RGK_W(c));
    }
  }
  return ground ? rg_fail() : any_eq(other, &cands);
}

/* The elements of proper list l (n of them). */
static rg_term *items(rg_term l, int64_t n) {
  rg_term *v = rgk_alloc((size_t)(n + 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++, l = rgk_cdr(l)) v[i] = rgk_car(l);
  return v;
}

/* w: a b ident.  ident #t: the identity too, second (see perms_eq). */
static rg_goal *comm_args_impl(rg_ctx *C, const rg_term *w, void *ud) {
  (void)C;
  rgk_global *fallback = ud;
  rg_term a = w[0], b = w[1], al = proper_list(a), bl = proper_list(b);
  bool ident = w[2] != RG_FALSE;
  int64_t na = al ? rgk_length(al) : -1, nb = bl ? rgk_length(bl) : -1;
  if (na > 0 && nb > 0 && na != nb) return rg_fail();
  if ((!al && !bl) || (al ? na : nb) > COMM_MAX_EAGER)
    return ident ? rg_disj2(rg_eq(a, b), rg_call(fallback->value, 2, w)) : rg_call(fallback->value, 2, w);
  if (!al) return perms_eq(a, items(bl, nb), nb, !ident, false, ident);
  rg_term *va = items(al, na);
  if (!bl) return perms_eq(b, va, na, !ident, false, ident);
  if (rg_equal(al, bl)) return ident ? rg_succeed() : rg_fail();
  rg_term *vb = items(bl, nb);
  int64_t nra, nrb, da, db;
  rg_term *ra = multiset_minus(va, na, vb, nb, &nra, &da), *rb = multiset_minus(vb, nb, va, na, &nrb, &db);
  bool skip = true;
  if (!nra && !nrb) return rg_succeed();
  if (da < distinct_count(va, na)) va = ra, na = nra, vb = rb, nb = nrb, skip = false;
  rg_term other = rg_list((int)nb, vb);
  rg_goal *g = perms_eq(other, va, na, skip, rgk_ground(rg_list((int)na, va)) && rgk_ground(other), false);
  return ident ? rg_disj2(g, rg_eq(a, b)) : g;
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
  define_projecting(I, "%group-size", 2, group_size_impl, NULL);
  define_rel(I, "%ground-order", 4, rel_ground_order, NULL);
  define_rel(I, "assoc-flatten", 2, rel_assoc_flatten, NULL);
  rgk_proc *mapo = (rgk_proc *)define_rel(I, "%mapo", 2, rel_mapo, NULL);
  mapo->ud = mapo;
  rgk_proc *many = (rgk_proc *)define_rel(I, "%map-anyo", 3, rel_map_anyo, NULL);
  many->ud = many;
  pull_cell *cell = rgk_alloc(sizeof *cell);
  cell->pull = define_projecting(I, "%py-pull", 1, py_pull_impl, cell);
  define_rel(I, "%py-walko", 4, rel_py_walko, cell);
  define_rel(I, "%py-map-anyo", 2, rel_py_map_anyo, cell);
  define_rel(I, "%py-term-walko", 5, rel_py_term_walko, cell);
  assoc_env *env = rgk_alloc(sizeof *env);
  env->listo = rgk_table_get(&I->lib, rg_symbol("listo"), true); /* defined by the prelude */
  env->self = define_projecting(I, "%eq-assoc-args", 5, eq_assoc_args_impl, env);
  rgk_global *fallback = rgk_table_get(&I->lib, rg_symbol("%comm-args-fallback"), true); /* the prelude's */
  define_projecting(I, "%comm-args", 3, comm_args_impl, fallback);
}
