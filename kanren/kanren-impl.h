/*
 * kanren-impl.h — internals of the relational core shared by its files.
 *
 * Term encoding (one word, low three bits are the tag):
 *
 *     ...xx1   fixnum: a 63-bit signed integer shifted left by one
 *     ...000   boxed object: points to a struct starting with rgk_hdr
 *     ...010   pair that may contain logic variables: points to {car, cdr}
 *     ...110   ground pair: no logic variable anywhere inside
 *     ...100   immediate constant: nil, #f, #t, and internal markers
 *
 * Pairs are two words (no header), the most common object.  The ground bit
 * is computed in O(1) by rg_cons from its two parts, so the occurs check,
 * absento and reification skip ground subterms without looking inside.
 * The collector recognises pointers with the small pair tags because they
 * point inside the object (rg_init registers those displacements).
 *
 * Invariants:
 *  - terms are immutable, except a logic variable's `val` slot, which is
 *    written only by the set-var-val optimisation (see rgk_var).
 *  - symbols are interned: equal names, same object.
 *  - a ground pair's car and cdr are ground; an etuple with the ground flag
 *    has a ground element list; foreign terms are ground.
 */
#ifndef RELGRAPH_KANREN_IMPL_H
#define RELGRAPH_KANREN_IMPL_H

#include <assert.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "relgraph/kanren.h"

#ifndef RG_GC_NEVER_FREE
/* The collector's inline allocation checks each object it pops with an
 * out-of-line GC_size call unless NDEBUG is set, which optimised builds
 * leave unset so that our own assertions stay on: that check was most of
 * the cost of an allocation (appendo's run* over 100 elements took 0.41 ms
 * with it, 0.24 ms without).  The
 * collector's own invariants are its business; keep them out of the fast
 * path except in the invariant-checking build. */
#if !defined(GC_ASSERT) && !defined(RG_DEBUG_CHECKS)
#define GC_ASSERT(expr) ((void)0)
#endif
#include <gc/gc.h>
#include <gc/gc_inline.h>
#define RGK_NFREELISTS GC_TINY_FREELISTS
#else
#define RGK_NFREELISTS 1
#endif

/* ------------------------------------------------------------------ memory */

/* GC allocation.  Under RG_GC_NEVER_FREE (sanitizer builds) objects come
 * from malloc and are kept on a global list, so AddressSanitizer checks
 * their bounds and LeakSanitizer does not report them. */
void *rgk_alloc(size_t n);          /* zeroed, may hold pointers */
void *rgk_alloc_atomic(size_t n);   /* not zeroed, holds no pointers */
void *rgk_realloc(void *p, size_t n);
void rgk_warm_heap(void); /* touch the collector's heap once (benchmarks) */
/* Memory scopes (RG_GC_NEVER_FREE; no-ops with the collector): the end
 * frees every block made since the beginning (see mem.c).  Fuzzers bound
 * their memory with one scope per input. */
void rgk_scope_begin(void);
void rgk_scope_end(void);
void *rgk_alloc_global(size_t n); /* zeroed; for global caches: outlives scopes */
void rgk_symtab_mark(void);     /* term.c: symbols interned from here on ... */
void rgk_symtab_rollback(void); /* ... leave the table again */
/* Collected memory as an allocator for the base containers (base.h), for
 * tables that hold collected pointers: zeroed, never fails (exhaustion
 * aborts), and giving a block back does nothing. */
extern const rg_allocator rgk_gc;
char *rgk_strdup(const char *s);
char *rgk_strndup(const char *s, size_t n);
char *rgk_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *rgk_vsprintf(const char *fmt, va_list ap);

/* ------------------------------------------------------------------ tags */

typedef uintptr_t rgk_word;
#define RGK_W(t) ((rgk_word)(t))
#define RGK_T(w) ((rg_term)(uintptr_t)(w))
#define RGK_TAG(t) (RGK_W(t) & 7u)

#define RGK_TAG_BOXED 0u
#define RGK_TAG_PAIR 2u
#define RGK_TAG_IMM 4u
#define RGK_TAG_GPAIR 6u

#define RGK_IMM(k) RGK_T(((rgk_word)(k) << 3) | RGK_TAG_IMM)
#define RGK_UNBOUND RGK_IMM(3) /* "no value" marker; never a user term */
#define RGK_VOID RGK_IMM(4)    /* value of forms evaluated for effect */
#define RGK_EOF RGK_IMM(5)     /* reader: end of input */

#define RGK_FIXNUM_MIN (-(INT64_C(1) << 62))
#define RGK_FIXNUM_MAX ((INT64_C(1) << 62) - 1)

static inline bool rgk_is_fixnum(rg_term t) { return RGK_W(t) & 1u; }
static inline int64_t rgk_fixnum(rg_term t) { return (int64_t)(intptr_t)t >> 1; }
static inline rg_term rgk_mkfix(int64_t v) { return RGK_T(((uint64_t)v << 1) | 1u); }
static inline bool rgk_is_pair(rg_term t) { return (RGK_W(t) & 3u) == 2u; }
static inline bool rgk_is_gpair(rg_term t) { return RGK_TAG(t) == RGK_TAG_GPAIR; }
static inline bool rgk_is_boxed(rg_term t) { return RGK_TAG(t) == RGK_TAG_BOXED && t; }

typedef struct rgk_pair { rg_term car, cdr; } rgk_pair;
static inline rgk_pair *rgk_pairp(rg_term t) { return (rgk_pair *)(RGK_W(t) & ~(rgk_word)7); }
static inline rg_term rgk_car(rg_term t) { return rgk_pairp(t)->car; }
static inline rg_term rgk_cdr(rg_term t) { return rgk_pairp(t)->cdr; }

/* Boxed object types. */
enum {
  RGK_T_FLOAT = 1, RGK_T_INT, RGK_T_STRING, RGK_T_SYMBOL, RGK_T_VAR,
  RGK_T_ETUPLE, RGK_T_FOREIGN, RGK_T_PROC, RGK_T_GOALV, RGK_T_OPAQUE
};
enum { RGK_F_GROUND = 1 };

typedef struct rgk_hdr { uint8_t type, flags; uint16_t aux; uint32_t n; } rgk_hdr;
static inline rgk_hdr *rgk_hdrp(rg_term t) { return (rgk_hdr *)t; }
static inline int rgk_type(rg_term t) {
  return rgk_is_boxed(t) ? rgk_hdrp(t)->type : 0;
}

typedef struct rgk_float { rgk_hdr h; double v; } rgk_float;
typedef struct rgk_int { rgk_hdr h; int64_t v; } rgk_int;  /* beyond fixnum range */
typedef struct rgk_string { rgk_hdr h; char s[]; } rgk_string;       /* h.n = length */
typedef struct rgk_symbol { rgk_hdr h; uint64_t hash; const char *name; } rgk_symbol;

/* A logic variable.  `idx` is unique within its context and orders
 * variables by creation.  `val` is RGK_UNBOUND or the variable's value set
 * directly by unification when no branch has happened since the variable
 * was created (`scope` equals the state's scope); every other binding lives
 * in the substitution.  A var made outside a search has scope 0, which is
 * never a state's scope, so it is never written. */
typedef struct rgk_var { rgk_hdr h; rg_term val; uint64_t idx; uint64_t scope; } rgk_var;
/* (scope is last: see rgk_alloc_in_np) */

/* An expression tuple: `list` is the proper list (head arg ...); `value` is
 * the cached evaluation (NULL until evaluated).  h.n = number of elements. */
typedef struct rgk_etuple { rgk_hdr h; rg_term list; rg_term value; } rgk_etuple;

typedef struct rgk_foreign {
  rgk_hdr h;
  const rg_foreign_hooks *hooks;
  void *ptr, *ud;
  rg_term expansion; /* RGK_UNBOUND until asked for; NULL if atomic */
} rgk_foreign;

static inline bool rgk_is_var(rg_term t) { return rgk_type(t) == RGK_T_VAR; }
/* A value as an error message shows it: a logic variable by what it is
 * (its internal name means nothing to the program's author). */
static inline const char *rgk_show_value(rg_term v) {
  return rgk_is_var(v) ? "a logic variable" : rg_to_string(v);
}
static inline rgk_var *rgk_varp(rg_term t) { return (rgk_var *)t; }
static inline bool rgk_is_etuple(rg_term t) { return rgk_type(t) == RGK_T_ETUPLE; }
static inline bool rgk_is_symbol(rg_term t) { return rgk_type(t) == RGK_T_SYMBOL; }
static inline bool rgk_is_string(rg_term t) { return rgk_type(t) == RGK_T_STRING; }
static inline bool rgk_is_float(rg_term t) { return rgk_type(t) == RGK_T_FLOAT; }
static inline bool rgk_is_int(rg_term t) {
  return rgk_is_fixnum(t) || rgk_type(t) == RGK_T_INT;
}
static inline bool rgk_is_number(rg_term t) { return rgk_is_int(t) || rgk_is_float(t); }
static inline bool rgk_is_foreign(rg_term t) { return rgk_type(t) == RGK_T_FOREIGN; }
static inline const char *rgk_symname(rg_term t) { return ((rgk_symbol *)t)->name; }

/* Ground: contains no logic variable. */
static inline bool rgk_ground(rg_term t) {
  switch (RGK_TAG(t)) {
  case RGK_TAG_PAIR: return false;
  case RGK_TAG_BOXED:
    switch (rgk_hdrp(t)->type) {
    case RGK_T_VAR: return false;
    case RGK_T_ETUPLE: return rgk_hdrp(t)->flags & RGK_F_GROUND;
    default: return true;
    }
  default: return true;
  }
}

rg_term rgk_var_scoped(rg_ctx *C, uint64_t scope);
rg_term rgk_list2(rg_term a, rg_term b);
rg_term rgk_list3(rg_term a, rg_term b, rg_term c);
rg_term rgk_reverse(rg_term l);
int64_t rgk_length(rg_term l);   /* -1 if improper */
/* Etuples and expanded foreign terms as lists; other terms unchanged. */
rg_term rgk_as_list(rg_term t);
/* Well-known symbols, interned once. */
rg_term rgk_sym(const char *name);

/* ------------------------------------------------------------------ context */

/* A growable stack of words, visible to the collector.  Users remember the
 * depth at entry and pop back to it, so nested uses share one stack.  It is
 * not the base module's RG_VEC: it may start in a caller's buffer on the C
 * stack (RGK_LOCAL_STACK), which must never be given back to an allocator,
 * and its push is on the hottest paths of unification and search. */
typedef struct rgk_stack { rgk_word *v; size_t n, cap; bool heap; } rgk_stack;
void rgk_stack_grow(rgk_stack *s, size_t need);
/* A stack that starts in a caller's buffer (on the C stack, which the
 * collector scans) and moves to the heap if it outgrows it. */
#define RGK_LOCAL_STACK(name, size) \
  rgk_word name##_buf[size];        \
  rgk_stack name = {name##_buf, 0, size, false}
static inline void rgk_push(rgk_stack *s, rgk_word w) {
  if (s->n == s->cap) rgk_stack_grow(s, s->n + 1);
  s->v[s->n++] = w;
}

typedef struct rgk_evalreg {
  struct rgk_evalreg *next;
  rg_term head;
  rg_evaluator fn;
  void *ud;
} rgk_evalreg;

struct rg_ctx {
  int errcode;
  char errmsg[1024];
  uint64_t next_var;    /* next variable index (starts at 1) */
  uint64_t next_scope;  /* next search scope (starts at 1; 0 = nonlocal) */
  rg_term facts;        /* list of (rel . args) lists, newest first */
  rgk_evalreg *evaluators;
  rg_evaluator default_eval;
  void *default_eval_ud;
  rgk_stack stk;        /* scratch stacks (each user pops back to its base) */
  rgk_stack stk2;
  rgk_stack rw, rv;     /* work and value stacks of rgk_rebuild */
  void *slots[RG_NSLOTS]; /* higher layers' per-context objects */
  double deadline;      /* CLOCK_MONOTONIC seconds every search stops at; 0 = none */
};

/* A thread's allocation cache: free lists of small collected objects by
 * size in granules, and of pairs, refilled in batches from the collector
 * (GC_generic_malloc_many), so most allocations pop a list without a lock
 * or a call.  The cache itself is uncollectable memory, which the
 * collector scans: the lists are traced, as it requires.  Like the
 * collector's own thread-local lists, it is part of the allocator. */
typedef struct rgk_tcache {
  void *fl[RGK_NFREELISTS];
  void *pair_fl[2];     /* [1]: free list of pairs (indexed by granules) */
} rgk_tcache;

extern __thread rgk_tcache *rgk_tc __attribute__((tls_model("initial-exec")));
rgk_tcache *rgk_tcache_init(void);

static inline rgk_tcache *rgk_cache(void) {
  rgk_tcache *c = rgk_tc;
  return __builtin_expect(c != NULL, 1) ? c : rgk_tcache_init();
}

/* Allocates n zeroed bytes that may hold pointers, from the thread's free
 * lists.  The size class keeps the collector's one extra byte, as
 * GC_MALLOC does, so the last word of the object is traced.  (C is kept
 * for callers' symmetry; the cache is per thread.) */
static inline void *rgk_alloc_in(rg_ctx *C, size_t n) {
  (void)C;
#ifdef RG_GC_NEVER_FREE
  return rgk_alloc(n);
#else
  size_t gran = (n + GC_GRANULE_BYTES) / GC_GRANULE_BYTES;
  void *r;
  GC_FAST_MALLOC_GRANS(r, gran, rgk_cache()->fl, 0, GC_I_NORMAL, rgk_alloc(n), *(void **)r = 0);
  return r;
#endif
}

/* Like rgk_alloc_in for objects whose last word holds no pointer: they
 * need no room for the collector's extra byte (which makes it skip the
 * last word), so a 32-byte variable takes 32 bytes, not 48. */
static inline void *rgk_alloc_in_np(rg_ctx *C, size_t n) {
  (void)C;
#ifdef RG_GC_NEVER_FREE
  return rgk_alloc(n);
#else
  size_t gran = (n + GC_GRANULE_BYTES - 1) / GC_GRANULE_BYTES;
  void *r;
  GC_FAST_MALLOC_GRANS(r, gran, rgk_cache()->fl, 0, GC_I_NORMAL, rgk_alloc(n), *(void **)r = 0);
  return r;
#endif
}

/* Pairs are 16-byte objects of their own collector kind, whose descriptor
 * scans both words (the ordinary kind would need a 32-byte object to trace
 * the second word, see mem.c); rg_init creates the kind. */
extern int rgk_pair_kind;
void *rgk_alloc_pair_slow(void);

/* A pair from the thread's free list of pairs. */
static inline rg_term rgk_cons(rg_ctx *C, rg_term car, rg_term cdr) {
  (void)C;
#ifdef RG_GC_NEVER_FREE
  rgk_pair *p = (rgk_pair *)rgk_alloc(sizeof(rgk_pair));
#else
  void *r;
  GC_FAST_MALLOC_GRANS(r, 1, rgk_cache()->pair_fl, 0, rgk_pair_kind, rgk_alloc_pair_slow(),
                       *(void **)r = 0);
  rgk_pair *p = (rgk_pair *)r;
#endif
  p->car = car;
  p->cdr = cdr;
  return RGK_T((rgk_word)p | (rgk_ground(car) && rgk_ground(cdr) ? RGK_TAG_GPAIR : RGK_TAG_PAIR));
}

#endif

/* ------------------------------------------------------------------ substitutions */

/* A persistent map from 64-bit keys (variable indices) to terms: a CHAMP
 * trie, five key bits per level, lowest bits first.  NULL is the empty map.
 * set() copies the path from the root (O(log n)) and never mutates. */
typedef struct rgk_map rgk_map;
rg_term rgk_map_get(const rgk_map *m, uint64_t key); /* RGK_UNBOUND if absent */
rgk_map *rgk_map_set(rg_ctx *C, const rgk_map *m, uint64_t key, rg_term val);
/* Adds n new keys (none already in m) at once, building each changed
 * node once.  keys and vals are used as scratch. */
rgk_map *rgk_map_set_many(rg_ctx *C, const rgk_map *m, size_t n, uint64_t *keys, rg_term *vals);

/* A search state: the substitution, the constraint store (variable index to
 * constraint record) and the scope of the set-var-val optimisation.  A
 * state is also a stream of exactly one answer (see search.c).  Immutable. */
typedef struct rgk_state {
  rgk_map *S;
  rgk_map *C;
  uint64_t scope;
} rgk_state;

rgk_state *rgk_state_new(rg_ctx *ctx, uint64_t scope, rgk_map *S, rgk_map *C);

/* A constraint record, attached to a variable that is its own
 * representative (unbound).  T: NULL or the type tag symbol (num, str,
 * sym); D: list of disequalities, each a list of (var . value)
 * associations violated when all hold at once; A: list of absento terms. */
typedef struct rgk_crec { rg_term T, D, A; } rgk_crec;

/* Goals on states (the constraint solver).  Each returns the new state or
 * NULL on failure. */
rgk_state *rgk_solve_eq(rg_ctx *C, rgk_state *st, rg_term u, rg_term v, bool occurs);
rgk_state *rgk_solve_neq(rg_ctx *C, rgk_state *st, rg_term u, rg_term v);
rgk_state *rgk_solve_type(rg_ctx *C, rgk_state *st, rg_term tag, rg_term u);
rgk_state *rgk_solve_absento(rg_ctx *C, rgk_state *st, rg_term needle, rg_term hay);
/* Type tags, in faster-miniKanren's order: num, str, sym. */
rg_term rgk_type_tag(int i);
bool rgk_has_type(rg_term tag, rg_term t);
rgk_crec *rgk_lookup_c(const rgk_state *st, rg_term x);

/* Reifies q in state st: walk*, names _.0 _.1 ... by first appearance, and
 * the relevant constraints in faster-miniKanren's printed form. */
rg_term rgk_reify(rg_ctx *C, rg_term q, const rgk_state *st);
/* rgk_reify bounded in time: NULL, with RG_STOP_TIMEOUT recorded, when
 * `deadline` (rgk_now seconds; 0 = none) or C's deadline passes while
 * the constraints are pruned (quadratic in their number). */
rg_term rgk_reify_by(rg_ctx *C, rg_term q, const rgk_state *st, double deadline);

/* CLOCK_MONOTONIC in seconds: the clock of every deadline. */
static inline double rgk_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
/* faster-miniKanren's total order on reified terms (for sorting). */
int rgk_lex_compare(rg_term a, rg_term b);

static inline rg_term rgk_walk(rg_term t, const rgk_map *S) {
  while (rgk_is_var(t)) {
    rgk_var *x = rgk_varp(t);
    rg_term v = x->val;
    if (v == RGK_UNBOUND) {
      v = rgk_map_get(S, x->idx);
      if (v == RGK_UNBOUND) return t;
    }
    t = v;
  }
  return t;
}

/* Unifies u and v, extending *S.  Variables whose scope equals `scope`
 * (nonzero) are bound in place.  Each new binding is pushed on `added` as
 * two words (var, value) when `added` is not NULL.  Returns false on
 * failure (then *S and `added` are unspecified). */
bool rgk_unify(rg_ctx *C, rg_term u, rg_term v, rgk_map **S, uint64_t scope,
               bool occurs_check, rgk_stack *added);
/* Does variable x occur in t under S? */
bool rgk_occurs(rg_ctx *C, rg_term x, rg_term t, const rgk_map *S);
/* The term with every bound variable replaced by its value, recursively. */
rg_term rgk_walk_star(rg_ctx *C, rg_term t, const rgk_map *S);
/* Rebuilds t bottom-up, replacing each visited subterm x by pre(x, ud)
 * first; the children of what pre returns are visited if it is a pair or
 * etuple that is not ground.  Iterative; uses the context's stacks. */
typedef rg_term (*rgk_pre_fn)(rg_term x, void *ud);
rg_term rgk_rebuild(rg_ctx *C, rg_term t, rgk_pre_fn pre, void *ud);

/* ------------------------------------------------------------------ goals */

/* An environment frame of the relational language: the values of one
 * binding form (relation parameters, fresh variables, let).  `up` is the
 * lexically enclosing frame.  Frames are never mutated after creation. */
typedef struct rgk_frame {
  struct rgk_frame *up;
  rg_term v[]; /* as many as the binding form has names */
} rgk_frame;

/* A global binding of the language (shared by every reference to it, so a
 * later definition is seen by earlier code, as in Scheme). */
typedef struct rgk_global {
  rg_term name;
  rg_term value; /* NULL while unbound */
  bool defining; /* the program defines it (set before its body compiles,
                    so the body's own uses of a built-in goal's name are
                    the definition's) */
} rgk_global;

/* Term templates: how goal operands are computed from a frame. */
enum {
  TX_CONST,  /* k */
  TX_LOCAL,  /* frame `depth` levels up, slot idx */
  TX_GLOBAL, /* g->value */
  TX_CONS,   /* (a . b) */
  TX_ETUPLE, /* etuple of the list a */
  TX_LAMBDA, /* closure of lam over the current frame */
  TX_PRIM,   /* prim(args...) on the values of args */
  TX_LET,    /* args[0..idx) into a new frame, then a */
  TX_LETREC, /* closures args[0..idx) over a new frame holding them, then a */
  TX_GOAL,   /* goal value of `goal` over the current frame */
  TX_RUN,    /* run: a = count (NULL: all), idx query variables, goal */
  TX_APPLY,  /* a(args...): a primitive's value, or a relation call's goal */
};
struct rgk_lambda;
typedef struct rgk_tx rgk_tx;
typedef rg_term (*rgk_prim_fn)(rg_ctx *C, int n, const rg_term *args, const rgk_tx *site);
struct rgk_tx {
  uint8_t op;
  uint8_t shape;  /* TX_SHAPE_* bits, computed at first use (rgk_tx_matchable) */
  uint16_t depth;
  uint32_t idx;   /* TX_LOCAL slot; TX_PRIM argument count */
  rg_term k;
  rgk_tx *a, *b;
  rgk_global *g;
  struct rgk_lambda *lam;
  rgk_prim_fn prim;
  rgk_tx **args;
  struct rg_goal *goal;
  struct rg_interp *interp; /* TX_RUN: run options */
  const char *where; /* "file:line:col" for run-time errors, or NULL */
};

/* Goal expressions.  Goals are immutable code: C API goals hold constant
 * templates and run with a NULL frame; compiled language goals run in the
 * frame of their relation call. */
enum {
  G_SUCCEED, G_FAIL,
  G_EQ, G_NEQ, G_TYPE, G_ABSENTO, /* a, b (tag for G_TYPE) */
  G_CONJ,      /* kids[0..n): applied eagerly, left to right (bind*) */
  G_FRESH,     /* n new variables, then body; suspends */
  G_CONDE,     /* kids[0..n): clauses; suspends; new scope */
  G_CONDA, G_CONDU, /* kids[0..n) tests, kids[n..2n) bodies; suspends */
  G_CALL,      /* a evaluates to a relation, args[0..n) */
  G_CFRESH,    /* C API fresh: fn(C, vars, ud) builds the body */
  G_LET,       /* args[0..n) evaluated into a new frame, then body */
  G_PROJECT,   /* args[0..n) walked deeply into a new frame, then body */
  G_APPLYV,    /* a evaluates to a goal value, which is applied */
  G_CGOAL,     /* fn(C, st, args, ud) -> state or NULL (deterministic) */
  G_REIFY,     /* end of a run: the answer, then two empty suspensions */
};

/* A C goal returns the new state, NULL to fail, or RGK_STATE_ERROR after
 * recording an error in the context. */
extern const char rgk_err_marker;
#define RGK_STATE_ERROR ((rgk_state *)(uintptr_t)&rgk_err_marker)
typedef rgk_state *(*rgk_cgoal_fn)(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud);

struct rg_goal {
  uint8_t op;
  uint32_t n;
  rgk_tx *a, *b;
  rg_term tag;
  void *fn, *ud;
  rg_goal *body;
  rg_goal **kids;
  rgk_tx **args;
  const char *where;
};

/* A relation or other procedure value (a term of kind RG_K_PROC). */
enum { PROC_LAMBDA, PROC_C, PROC_FACTS, PROC_PRIM, PROC_FUNC };
typedef struct rgk_lambda {
  rg_term name;
  uint32_t nparams;
  bool rest;        /* last parameter takes the remaining arguments */
  rg_goal *body;
} rgk_lambda;
typedef struct rgk_proc {
  rgk_hdr h;        /* type RGK_T_PROC; aux = PROC_* */
  rg_term name;
  int32_t arity;    /* -1: variadic */
  rgk_lambda *lam;  /* PROC_LAMBDA */
  rgk_frame *env;   /* PROC_LAMBDA closure frame */
  rg_relation_fn fn;/* PROC_C */
  void *ud;
  rgk_prim_fn prim; /* PROC_PRIM: a function on values, not a relation */
  rg_function_fn func; /* PROC_FUNC: the function (ud is its data) */
  struct rg_goal *cbody; /* PROC_FUNC: the C goal run over a frame of the arguments */
} rgk_proc;

/* A goal as a first-class value (RGK_T_GOALV): a goal and its frame. */
typedef struct rgk_goalv { rgk_hdr h; rg_goal *g; rgk_frame *env; } rgk_goalv;

rg_goal *rgk_goal_new(int op);
rgk_tx *rgk_tx_const(rg_term k);
/* True when t is a cons template whose every part is a constant, a local
 * or a cons: evaluating any part of it cannot fail or have effects, so
 * unification may take it apart against a term instead of building it. */
bool rgk_tx_matchable(rgk_tx *t);
/* Whether t is made of constants, locals and conses only (evaluating it
 * cannot fail): computed once, then read from t->shape. */
enum { TX_SHAPE_KNOWN = 1, TX_SHAPE_SIMPLE = 2 };
bool rgk_tx_shape_simple(rgk_tx *t);
static inline bool rgk_tx_simple(rgk_tx *t) {
  return t->shape & TX_SHAPE_KNOWN ? t->shape & TX_SHAPE_SIMPLE : rgk_tx_shape_simple(t);
}
/* The value of a constant or local template (no evaluation can fail). */
static inline rg_term rgk_tx_leaf(const rgk_tx *t, rgk_frame *env) {
  if (t->op == TX_CONST) return t->k;
  for (unsigned d = t->depth; d; d--) env = env->up;
  return env->v[t->idx];
}
/* The value of template t in frame env; NULL after rg_error.  Constants
 * and locals, most operands, are read inline. */
rg_term rgk_tx_eval_full(rg_ctx *C, const rgk_tx *t, rgk_frame *env);
static inline rg_term rgk_tx_eval(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  return t->op == TX_CONST || t->op == TX_LOCAL ? rgk_tx_leaf(t, env) : rgk_tx_eval_full(C, t, env);
}
/* Unifies the value of the matchable template t in env with v, building
 * only the parts of t that meet a variable (the rest is matched against
 * v's structure in place).  Returns 1, 0 when they do not unify, or -1
 * after an error. */
int rgk_unify_tx(rg_ctx *C, const rgk_tx *t, rgk_frame *env, rg_term v, rgk_map **S,
                 uint64_t scope, bool occurs_check, rgk_stack *added);
/* u's template (matchable, in env) == v: rgk_solve_eq without building u
 * where v has structure.  NULL on failure; RGK_STATE_ERROR after an error. */
rgk_state *rgk_solve_eq_tx(rg_ctx *C, rgk_state *st, const rgk_tx *u, rgk_frame *env, rg_term v,
                           bool occurs);
rg_term rgk_closure(rgk_lambda *lam, rgk_frame *env);
rg_term rgk_goal_value(rg_goal *g, rgk_frame *env);
rg_term rgk_facts_proc(rg_term name);
/* A query whose goal runs in `env` with the query term already built. */
rg_query *rgk_query_new(rg_ctx *C, rg_term q, rg_goal *g, rgk_frame *env, const rg_run_opts *o,
                        uint64_t scope);
uint64_t rgk_new_scope(rg_ctx *C);
/* A search of g from the state st, run from inside a goal (a sub-search
 * with its own continuation stack); its answers are states, NULL when
 * there are no more or the search stopped. */
rg_query *rgk_query_from_state(rg_ctx *C, rg_goal *g, rgk_state *st);
rgk_state *rgk_query_next_state(rg_query *Q);

/* ------------------------------------------------------------------ source positions */

/* Positions of lists read from source text, keyed by the pair.  The maps
 * of an interpreter are shared by its readers, so compiled code can name
 * the file, line and column of any form it came from.  A weak map drops a
 * form once it is collected; a strong one keeps it. */
typedef struct rgk_srcmap rgk_srcmap;
rgk_srcmap *rgk_srcmap_new(bool weak);
/* Records a pair just made (one the map does not hold: the reader puts
 * each list it conses once). */
void rgk_srcmap_put(rgk_srcmap *m, rg_term pair, const char *file, uint32_t line, uint32_t col);
/* The positions held (those of forms not yet collected). */
size_t rgk_srcmap_count(const rgk_srcmap *m);
/* "file:line:col" of the form, or NULL. */
const char *rgk_srcmap_where(const rgk_srcmap *m, rg_term form);
rg_reader *rgk_reader_new(rg_ctx *C, const char *name, const char *text, size_t len,
                          rgk_srcmap *map);

/* ------------------------------------------------------------------ the interpreter */

/* A namespace: symbol -> global cell, the base map keyed by the symbol's
 * address in collected memory (see interp.c). */
typedef rg_map rgk_table;
rgk_global *rgk_table_get(rgk_table *t, rg_term sym, bool create);

typedef int (*rgk_form_fn)(rg_interp *I, rg_term form, void *ud);
typedef struct rgk_formext { struct rgk_formext *next; rg_term name; rgk_form_fn fn; void *ud; } rgk_formext;

struct rg_interp {
  rg_ctx *C;
  rgk_table lib;        /* the relations library (prelude and C builtins) */
  rgk_table user;       /* user definitions; unknown names fall back to lib */
  bool compiling_lib;   /* compiling the prelude: names resolve in lib */
  FILE *out;
  rg_run_opts opts;
  int64_t passed, failed;
  rgk_srcmap *map;       /* positions of what files (and the prelude) hold */
  rgk_srcmap *wmap;      /* of text given as strings: weak, so that a
                          * long-lived interpreter evaluating strings keeps
                          * no form it read (a weak entry costs the collector
                          * a link, which would make loading a large file
                          * several times slower) */
  const char *dir;      /* directory of the file being loaded, for load */
  rg_term top_form;     /* the top-level form being run: the place of errors
                           in parts with no position of their own (a symbol) */
  int load_depth;
  rgk_formext *forms;
  int stop;             /* RG_STOP_* seen during loading */
  bool warmed;          /* the collector's heap was touched for `bench` */
};

/* Compiles a value expression / a goal at top level (no local scope). */
rgk_tx *rgk_compile_value(rg_interp *I, rg_term form);
rg_goal *rgk_compile_goal_top(rg_interp *I, rg_term form);
/* Compiles (lambda params body...) given params and the body list. */
rgk_lambda *rgk_compile_lambda(rg_interp *I, rg_term name, rg_term params, rg_term body,
                               rg_term where_form);
const char *rgk_where(rg_interp *I, rg_term form);
/* How many top-level definitions all interpreters have made so far: what
 * was read from a relation's code holds while this has not changed. */
uint64_t rgk_definitions(void);
rgk_global *rgk_global_for(rg_interp *I, rg_term sym);
/* Runs a compiled TX_RUN (count, vars, goal) in frame env. */
rg_term rgk_eval_run(rg_ctx *C, const rgk_tx *t, rgk_frame *env);
void rgk_install_prims(rg_interp *I);
void rgk_install_builtins(rg_interp *I);
extern const char rgk_prelude_text[];
