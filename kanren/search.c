/*
 * search.c — the search machine: goals applied to states, producing
 * streams, driven by an explicit continuation stack.
 *
 * Streams are data, with faster-miniKanren's shapes:
 *     NULL                  no answers
 *     rgk_state             exactly one answer
 *     rgk_choice (c . f)    an answer c, then the suspension f
 *     rgk_susp              a suspension: work to do later
 * A suspension is a first-order description of faster-miniKanren's thunks:
 *     START(g, env, st)     apply a suspending goal (fresh, conde, conda...)
 *     CONDE_REST(i)         the remaining clauses i.. of a conde
 *     MPLUS(f1, f2)         force f1, then mplus the result with f2
 *     BIND(f, g)            force f, then bind the result with g
 *     CONST(s)              the stream s
 *     IFA(g, i, f)          a conda/condu test stream f still being forced
 *     CALLBODY(g, env, st)  a relation body deferred to break call chains
 *
 * mplus and bind are the same functions as faster-miniKanren's, so answers
 * come in the same order: a suspension in mplus swaps the two streams, and
 * every fresh and conde suspends.  A relation call applies its body at
 * once, as a Scheme procedure call would; a body that is itself a bare call
 * (so faster-miniKanren would loop forever building goals, as with
 * `(defrel (nevero) (nevero))`) suspends after a long chain of such calls,
 * so a branch that never yields cannot starve its siblings.
 *
 * The machine has three modes: APPLY a goal to a state, FORCE a
 * suspension, RETURN a stream to the continuation on top of the stack.
 * Nothing recurses on the C stack, so a left-recursive relation thousands
 * of calls deep costs heap, not C stack.
 */
#include "kanren/kanren-impl.h"

#include <time.h>

enum { SU_START, SU_CONDE_REST, SU_MPLUS, SU_BIND, SU_CONST, SU_IFA, SU_CALLBODY };

typedef struct rgk_susp {
  void *a, *b, *c, *d;
  uint32_t sk;   /* SU_* */
  uint32_t i;
} rgk_susp;
/* field use:  START g env st | CONDE_REST g env st i | MPLUS f1 f2 |
 *             BIND f g env | CONST s | IFA g env st f i | CALLBODY g env st */

typedef struct rgk_choice {
  rgk_state *st;
  rgk_susp *f;
} rgk_choice;

/* A stream value is NULL or a pointer tagged in its low bits with its
 * kind, so stream objects need no kind field. */
enum { RGK_S_STATE = 0, RGK_S_CHOICE = 1, RGK_S_SUSP = 2 };
static inline unsigned kind_of(const void *v) { return (unsigned)((uintptr_t)v & 3u); }
static inline void *sv(const void *p, unsigned kind) { return (void *)((uintptr_t)p | kind); }
static inline rgk_susp *as_susp(const void *v) { return (rgk_susp *)((uintptr_t)v & ~(uintptr_t)3); }
static inline rgk_choice *as_choice(const void *v) { return (rgk_choice *)((uintptr_t)v & ~(uintptr_t)3); }


uint64_t rgk_new_scope(rg_ctx *C) { return C->next_scope++; }

static rgk_state *with_new_scope(rg_ctx *C, rgk_state *st) {
  return rgk_state_new(C, rgk_new_scope(C), st->S, st->C);
}

/* ------------------------------------------------------------------ the machine */

enum { KF_BIND = 1, KF_MPLUS, KF_IFA };
enum { M_APPLY, M_FORCE, M_RETURN };

#define CALL_CHAIN_LIMIT 1000 /* bare relation calls before one suspends */
#define CLOCK_EVERY 4096
#define CLOCK_EVERY_TIMED 128 /* with a deadline: steps can be costly (big unifications) */

typedef struct machine {
  rg_ctx *C;
  bool occurs;
  rgk_stack K;       /* continuation frames: data words, then the kind */
  int64_t steps, max_steps;
  int64_t next_check; /* step at which limits are next examined */
  double deadline;   /* CLOCK_MONOTONIC seconds; 0 = none */
  int status;        /* RG_OK, RG_STOP_*, or an error */
  int chain;         /* bare relation calls since the last force */
  /* Streams are linear: a suspension or choice has exactly one holder, and
   * once forced or taken apart it is dead.  Dead ones are recycled here
   * (linked through their first field) instead of left to the collector. */
  rgk_susp *free_susp;
  rgk_choice *free_choice;
} machine;

static rgk_susp *susp(machine *M, uint32_t sk, void *a, void *b, void *c) {
  rgk_susp *s = M->free_susp;
  if (s) M->free_susp = s->a;
  else s = rgk_alloc_in(M->C, sizeof *s);
  s->sk = sk;
  s->a = a;
  s->b = b;
  s->c = c;
  s->d = NULL;
  s->i = 0;
  return s;
}

static void recycle_susp(machine *M, rgk_susp *s) {
  s->b = s->c = s->d = NULL;
  s->a = M->free_susp;
  M->free_susp = s;
}

/* A suspension as a stream value. */
static void *susp_v(machine *M, uint32_t sk, void *a, void *b, void *c) {
  return sv(susp(M, sk, a, b, c), RGK_S_SUSP);
}

/* The stream value (st . f). */
static void *choice(machine *M, rgk_state *st, rgk_susp *f) {
  rgk_choice *c = M->free_choice;
  if (c) M->free_choice = (rgk_choice *)c->st;
  else c = rgk_alloc_in(M->C, sizeof *c);
  c->st = st;
  c->f = f;
  return sv(c, RGK_S_CHOICE);
}

static void recycle_choice(machine *M, rgk_choice *c) {
  c->f = NULL;
  c->st = (rgk_state *)M->free_choice;
  M->free_choice = c;
}

const char rgk_err_marker = 0;
static const char abort_marker = 0;
#define ABORT ((void *)&abort_marker)


/* Counts a step; true when a limit is reached.  The common case is one
 * comparison against `next_check`, the step at which limits are examined. */
static bool check_limits(machine *M);
static inline bool over_limit(machine *M) {
  return ++M->steps >= M->next_check && check_limits(M);
}

static bool check_limits(machine *M) {
  double ctx_deadline = M->C->deadline;
  bool timed = M->deadline || ctx_deadline;
  M->next_check = M->steps + (timed ? CLOCK_EVERY_TIMED : CLOCK_EVERY);
  if (M->max_steps && M->next_check > M->max_steps + 1) M->next_check = M->max_steps + 1;
  if (M->max_steps && M->steps > M->max_steps) {
    M->status = RG_STOP_STEPS;
    rg_error(M->C, RG_STOP_STEPS, "search stopped after %lld steps (step limit)",
             (long long)M->max_steps);
    return true;
  }
  double now = timed ? rgk_now() : 0;
  if ((M->deadline && now > M->deadline) || (ctx_deadline && now > ctx_deadline)) {
    M->status = RG_STOP_TIMEOUT;
    rg_error(M->C, RG_STOP_TIMEOUT, "search stopped at its time limit");
    return true;
  }
  return false;
}

void rg_ctx_set_deadline(rg_ctx *C, double seconds) {
  C->deadline = seconds > 0 ? rgk_now() + seconds : 0;
}

static void fail_machine(machine *M) {
  if (!M->status) M->status = M->C->errcode ? M->C->errcode : RG_ERR;
}

static rgk_frame *frame_new(rg_ctx *C, rgk_frame *up, uint32_t n) {
  rgk_frame *f = rgk_alloc_in(C, sizeof *f + n * sizeof(rg_term));
  f->up = up;
  return f;
}

static inline void push3(machine *M, rgk_word a, rgk_word b, rgk_word kind) {
  rgk_stack *K = &M->K;
  if (K->n + 3 > K->cap) rgk_stack_grow(K, K->n + 3);
  rgk_word *v = K->v + K->n;
  v[0] = a;
  v[1] = b;
  v[2] = kind;
  K->n += 3;
}

/* Continuation frames for applying goals kids[from..n) one after another. */
static void push_binds(machine *M, rg_goal *const *kids, uint32_t from, uint32_t n, rgk_frame *env) {
  for (uint32_t i = n; i-- > from;) push3(M, (rgk_word)kids[i], (rgk_word)env, KF_BIND);
}

/* Pushes the goals of a clause body as separate binds (bind* semantics). */
static void push_body_binds(machine *M, rg_goal *body, rgk_frame *env) {
  if (body->op == G_SUCCEED) return;
  if (body->op == G_CONJ) push_binds(M, body->kids, 0, body->n, env);
  else push3(M, (rgk_word)body, (rgk_word)env, KF_BIND);
}

static const char *where_of(const rg_goal *g) { return g->where ? g->where : ""; }
static const char *sep_of(const rg_goal *g) { return g->where ? ": " : ""; }

/* Evaluates the relation and arguments of a call and builds its frame;
 * sets *body and *fenv to the goal to apply next and its frame. */
static bool prepare_call(machine *M, const rg_goal *g, rgk_frame *env, rg_goal **body,
                         rgk_frame **fenv) {
  rg_ctx *C = M->C;
  rg_term p = rgk_tx_eval(C, g->a, env);
  if (!p) return false;
  if (rgk_type(p) != RGK_T_PROC) {
    rg_error(C, RG_ERR_TYPE, "%s%snot a relation: %s", where_of(g), sep_of(g), rgk_show_value(p));
    return false;
  }
  rgk_proc *pr = (rgk_proc *)p;
  uint32_t n = g->n;
  rg_term small[8];
  rg_term *args = n <= 8 ? small : rgk_alloc(n * sizeof(rg_term));
  for (uint32_t i = 0; i < n; i++)
    if (!(args[i] = rgk_tx_eval(C, g->args[i], env))) return false;
  if (pr->h.aux == PROC_LAMBDA) {
    rgk_lambda *lam = pr->lam;
    uint32_t np = lam->nparams, fixed = lam->rest ? np - 1 : np;
    if (lam->rest ? n < fixed : n != np) {
      rg_error(C, RG_ERR_ARITY, "%s%s%s expects %s%u argument%s, got %u", where_of(g), sep_of(g),
               rg_proc_name(p), lam->rest ? "at least " : "", fixed, fixed == 1 ? "" : "s", n);
      return false;
    }
    rgk_frame *f = frame_new(C, pr->env, np);
    for (uint32_t i = 0; i < fixed; i++) f->v[i] = args[i];
    if (lam->rest) f->v[fixed] = rg_list((int)(n - fixed), args + fixed);
    *body = lam->body;
    *fenv = f;
    return true;
  }
  if (pr->arity >= 0 && (uint32_t)pr->arity != n) {
    rg_error(C, RG_ERR_ARITY, "%s%s%s expects %d argument%s, got %u", where_of(g), sep_of(g),
             rg_proc_name(p), pr->arity, pr->arity == 1 ? "" : "s", n);
    return false;
  }
  if (pr->h.aux == PROC_PRIM) {
    rg_error(C, RG_ERR_TYPE, "%s%s%s is a function, not a relation", where_of(g), sep_of(g),
             rg_proc_name(p));
    return false;
  }
  if (pr->h.aux == PROC_FUNC) { /* its C goal, over a frame of the arguments */
    rgk_frame *f = frame_new(C, NULL, n);
    memcpy(f->v, args, n * sizeof(rg_term));
    *body = pr->cbody;
    *fenv = f;
    return true;
  }
  if (pr->h.aux == PROC_FACTS) {
    /* a fact relation is the disjunction of unifications with its facts */
    rg_term tuple = rg_list((int)n, args);
    int64_t k = 0;
    RGK_LOCAL_STACK(cl, 16);
    for (rg_term f = rgk_reverse(C->facts); rgk_is_pair(f); f = rgk_cdr(f))
      if (rgk_car(rgk_car(f)) == pr->name) {
        rgk_push(&cl, RGK_W(rg_eq(tuple, rgk_cdr(rgk_car(f)))));
        k++;
      }
    *body = rg_conde((int)k, (rg_goal **)cl.v);
    *fenv = NULL;
    return true;
  }
  rg_goal *r = pr->fn(C, args, pr->ud);
  if (!r) {
    if (!C->errcode)
      rg_error(C, RG_ERR, "%s%srelation %s failed to build its goal", where_of(g), sep_of(g),
               rg_proc_name(p));
    else if (g->where)
      rg_error(C, C->errcode, "%s: %s", g->where, rgk_strdup(C->errmsg));
    return false;
  }
  *body = r;
  *fenv = NULL;
  return true;
}

/* (== a b) with one side a cons template: match it against the other
 * side's value instead of building it (most == goals of relations
 * destructure or construct a list this way). */
static void *apply_eq_tx(machine *M, rgk_tx *t, rgk_tx *other, rgk_frame *env, rgk_state *st) {
  rg_term v = rgk_tx_eval(M->C, other, env);
  if (!v) return ABORT;
  rgk_state *r = rgk_solve_eq_tx(M->C, st, t, env, v, M->occurs);
  return r == RGK_STATE_ERROR ? ABORT : r;
}

static void *apply_constraint(machine *M, const rg_goal *g, rgk_frame *env, rgk_state *st) {
  rg_ctx *C = M->C;
  if (g->op == G_EQ) {
    if (rgk_tx_matchable(g->a)) return apply_eq_tx(M, g->a, g->b, env, st);
    if (rgk_tx_matchable(g->b)) return apply_eq_tx(M, g->b, g->a, env, st);
  }
  rg_term a = rgk_tx_eval(C, g->a, env);
  if (!a) return ABORT;
  if (g->op == G_TYPE) return rgk_solve_type(C, st, g->tag, a);
  rg_term b = rgk_tx_eval(C, g->b, env);
  if (!b) return ABORT;
  switch (g->op) {
  case G_EQ: return rgk_solve_eq(C, st, a, b, M->occurs);
  case G_NEQ: return rgk_solve_neq(C, st, a, b);
  default: return rgk_solve_absento(C, st, a, b);
  }
}

static void *apply_cgoal(machine *M, const rg_goal *g, rgk_frame *env, rgk_state *st) {
  rg_term small[8];
  rg_term *args = g->n <= 8 ? small : rgk_alloc(g->n * sizeof(rg_term));
  for (uint32_t i = 0; i < g->n; i++)
    if (!(args[i] = rgk_tx_eval(M->C, g->args[i], env))) return ABORT;
  rgk_state *r = ((rgk_cgoal_fn)g->fn)(M->C, st, (int)g->n, args, g->ud);
  if (r == RGK_STATE_ERROR) return ABORT;
  return r;
}

/* A frame for let (values) or project (values walked deeply). */
static rgk_frame *bind_frame(machine *M, const rg_goal *g, rgk_frame *env, rgk_state *st) {
  rgk_frame *f = frame_new(M->C, env, g->n);
  for (uint32_t i = 0; i < g->n; i++) {
    rg_term v = rgk_tx_eval(M->C, g->args[i], env);
    if (!v) return NULL;
    f->v[i] = g->op == G_PROJECT ? rgk_walk_star(M->C, v, st->S) : v;
  }
  return f;
}

typedef struct regs {
  int mode;
  rg_goal *g;
  rgk_frame *env;
  rgk_state *st;
  void *val; /* M_RETURN: the stream; M_FORCE: the suspension */
} regs;

/* One APPLY step. */
static void step_apply(machine *M, regs *r) {
  rg_goal *g = r->g;
  switch (g->op) {
  case G_SUCCEED: r->val = r->st; break;
  case G_FAIL: r->val = NULL; break;
  case G_EQ: case G_NEQ: case G_TYPE: case G_ABSENTO:
    r->val = apply_constraint(M, g, r->env, r->st);
    break;
  case G_CONJ:
    push_binds(M, g->kids, 1, g->n, r->env);
    r->g = g->kids[0];
    return;
  case G_FRESH: case G_CONDE: case G_CONDA: case G_CONDU: case G_CFRESH:
    r->val = susp_v(M, SU_START, g, r->env, r->st);
    break;
  case G_CALL: {
    rg_goal *body;
    rgk_frame *fenv;
    if (over_limit(M)) { r->val = ABORT; break; }
    if (!prepare_call(M, g, r->env, &body, &fenv)) { r->val = ABORT; break; }
    if (++M->chain > CALL_CHAIN_LIMIT) {
      r->val = susp_v(M, SU_CALLBODY, body, fenv, r->st);
      break;
    }
    r->g = body;
    r->env = fenv;
    return;
  }
  case G_LET: case G_PROJECT: {
    rgk_frame *f = bind_frame(M, g, r->env, r->st);
    if (!f) { r->val = ABORT; break; }
    r->g = g->body;
    r->env = f;
    return;
  }
  case G_APPLYV: {
    rg_term v = rgk_tx_eval(M->C, g->a, r->env);
    if (!v) { r->val = ABORT; break; }
    if (rgk_type(v) != RGK_T_GOALV) {
      rg_error(M->C, RG_ERR_TYPE, "%s%snot a goal: %s", where_of(g), sep_of(g), rgk_show_value(v));
      r->val = ABORT;
      break;
    }
    r->g = ((rgk_goalv *)v)->g;
    r->env = ((rgk_goalv *)v)->env;
    return;
  }
  case G_CGOAL: r->val = apply_cgoal(M, g, r->env, r->st); break;
  case G_REIFY:
    r->val = choice(M, r->st, susp(M, SU_CONST, susp_v(M, SU_CONST, NULL, NULL, NULL), NULL, NULL));
    break;
  default: assert(!"unknown goal");
  }
  r->mode = M_RETURN;
}

/* ------------------------------------------------------------------ clause indexing
 * A conde clause whose leading == goals cannot all hold in the state gives
 * the empty stream at once: == neither suspends nor fails by error when
 * both its sides are simple templates, so faster-miniKanren's mplus goes
 * straight on to the next clause.  Such clauses are skipped unrun, which
 * changes no answer and no order.  The test is shallow and one-sided: it
 * says "refuted" only where unification would certainly fail (a list
 * against an atom, two different atoms), and "maybe" wherever a variable
 * or anything deeper is involved.  When a single clause is left, the
 * conde runs it in the state's own scope: with no sibling branch, its
 * bindings of the state's variables can be written in place, as a
 * conjunction's are. */

#define CLASH_DEPTH 8 /* nesting of a template's cars the test follows */

/* t as a list if it is one (a pair, an etuple, a foreign term with an
 * expansion); NULL for an atom (nil included). */
static rg_term list_view(rg_term t) {
  if (rgk_is_pair(t)) return t;
  if (rgk_is_etuple(t)) return ((rgk_etuple *)t)->list;
  if (rgk_is_foreign(t) && rg_foreign_expand(t)) return rgk_as_list(t);
  return NULL;
}

/* Whether walked values a and b certainly do not unify, by their outer
 * shape: a list and an atom, or two atoms that differ.  Foreign atoms are
 * left to unification: their equality may compare whole computations (two
 * graph variables), which a clause that survives would then pay twice. */
static bool values_clash(rg_term a, rg_term b, const rgk_map *S) {
  a = rgk_walk(a, S);
  b = rgk_walk(b, S);
  if (a == b || rgk_is_var(a) || rgk_is_var(b)) return false;
  bool la = rgk_is_pair(a) || rgk_is_etuple(a), lb = rgk_is_pair(b) || rgk_is_etuple(b);
  if (la || lb) {
    if (la && lb) return false;
    rg_term atom = la ? b : a; /* a foreign term's expansion is a list */
    return !(rgk_is_foreign(atom) && rg_foreign_expand(atom));
  }
  if (rgk_is_foreign(a) || rgk_is_foreign(b)) return false;
  return !rg_equal(a, b);
}

/* Whether simple template t (in env) certainly does not unify with v. */
static bool template_clashes(const rgk_tx *t, rgk_frame *env, rg_term v, const rgk_map *S, int depth) {
  for (;;) {
    if (t->op != TX_CONS) return values_clash(rgk_tx_leaf(t, env), v, S);
    v = rgk_walk(v, S);
    if (rgk_is_var(v)) return false;
    rg_term l = list_view(v);
    if (!l) return true; /* a list template against an atom */
    if (depth < CLASH_DEPTH && template_clashes(t->a, env, rgk_car(l), S, depth + 1)) return true;
    t = t->b;
    v = rgk_cdr(l);
  }
}

/* Whether the leading == goals of clause c certainly fail in state S. */
static bool clause_refuted(const rg_goal *c, rgk_frame *env, const rgk_map *S) {
  rg_goal *const *gs = c->op == G_CONJ ? c->kids : (rg_goal *const *)&c;
  uint32_t n = c->op == G_CONJ ? c->n : 1;
  for (uint32_t i = 0; i < n; i++) {
    const rg_goal *g = gs[i];
    if (g->op == G_SUCCEED) continue;
    if (g->op == G_FAIL) return true;
    if (g->op != G_EQ || !rgk_tx_simple(g->a) || !rgk_tx_simple(g->b)) return false;
    bool ca = g->a->op == TX_CONS, cb = g->b->op == TX_CONS;
    if (ca && cb) continue;
    const rgk_tx *t = ca ? g->a : g->b, *o = ca ? g->b : g->a;
    if (template_clashes(t, env, rgk_tx_leaf(o, env), S, 0)) return true;
  }
  return false;
}

/* The one clause of conde g that may hold in st: its index, -1 if none
 * may, -2 if more than one may.  Kept out of line: start_goal stays small
 * enough to be inlined into the machine's loop. */
__attribute__((noinline)) static int only_clause(const rg_goal *g, rgk_frame *env, const rgk_state *st) {
  int only = -1;
  for (uint32_t i = 0; i < g->n; i++) {
    if (clause_refuted(g->kids[i], env, st->S)) continue;
    if (only >= 0) return -2;
    only = (int)i;
  }
  return only;
}

/* Starts a suspending goal (the body of its thunk). */
static void start_goal(machine *M, regs *r, rg_goal *g, rgk_frame *env, rgk_state *st) {
  rg_ctx *C = M->C;
  r->mode = M_APPLY;
  switch (g->op) {
  case G_FRESH: {
    if (g->n) {
      rgk_frame *f = frame_new(C, env, g->n);
      for (uint32_t i = 0; i < g->n; i++) f->v[i] = rgk_var_scoped(C, st->scope);
      env = f;
    }
    r->g = g->body;
    r->env = env;
    r->st = st;
    return;
  }
  case G_CFRESH: {
    rg_term *vars = rgk_alloc((g->n ? g->n : 1) * sizeof(rg_term));
    for (uint32_t i = 0; i < g->n; i++) vars[i] = rgk_var_scoped(C, st->scope);
    rg_goal *body = ((rg_fresh_fn)g->fn)(C, vars, g->ud);
    if (!body) {
      if (!C->errcode) rg_error(C, RG_ERR, "a fresh callback returned no goal");
      r->mode = M_RETURN;
      r->val = ABORT;
      return;
    }
    r->g = body;
    r->env = NULL;
    r->st = st;
    return;
  }
  case G_CONDE: {
    int only = only_clause(g, env, st);
    if (only != -2) {
      if (only < 0) {
        r->mode = M_RETURN;
        r->val = NULL;
        return;
      }
      r->g = g->kids[only]; /* in st's scope: see "clause indexing" */
      r->env = env;
      r->st = st;
      return;
    }
    st = with_new_scope(C, st);
    if (g->n > 1) {
      rgk_susp *rest = susp(M, SU_CONDE_REST, g, env, st);
      rest->i = 1;
      push3(M, (rgk_word)rest, 0, KF_MPLUS);
    }
    r->g = g->kids[0];
    r->env = env;
    r->st = st;
    return;
  }
  default: { /* G_CONDA, G_CONDU */
    st = with_new_scope(C, st);
    rgk_susp *k = susp(M, SU_IFA, g, env, st);
    k->i = 0;
    push3(M, (rgk_word)k, 0, KF_IFA);
    r->g = g->kids[0];
    r->env = env;
    r->st = st;
    return;
  }
  }
}

/* One FORCE step. */
/* One FORCE step.  The suspension is consumed: it is recycled, or reused
 * as the continuation frame it turns into. */
static void step_force(machine *M, regs *r) {
  rgk_susp *s = r->val;
  M->chain = 0;
  if (over_limit(M)) {
    r->mode = M_RETURN;
    r->val = ABORT;
    return;
  }
  switch (s->sk) {
  case SU_START: {
    rg_goal *g = s->a;
    rgk_frame *env = s->b;
    rgk_state *st = s->c;
    recycle_susp(M, s);
    start_goal(M, r, g, env, st);
    return;
  }
  case SU_CONDE_REST: {
    rg_goal *g = s->a;
    uint32_t i = s->i;
    r->mode = M_APPLY;
    r->g = g->kids[i];
    r->env = s->b;
    r->st = s->c;
    if (i + 1 < g->n) {
      s->i = i + 1; /* the rest of the clauses after this one */
      push3(M, (rgk_word)s, 0, KF_MPLUS);
    } else {
      recycle_susp(M, s);
    }
    return;
  }
  case SU_MPLUS:
    push3(M, (rgk_word)s->b, 0, KF_MPLUS);
    r->val = s->a;
    recycle_susp(M, s);
    return; /* still M_FORCE */
  case SU_BIND:
    push3(M, (rgk_word)s->b, (rgk_word)s->c, KF_BIND);
    r->val = s->a;
    recycle_susp(M, s);
    return;
  case SU_CONST:
    r->mode = M_RETURN;
    r->val = s->a;
    recycle_susp(M, s);
    return;
  case SU_IFA:
    r->val = s->d; /* keep forcing the test; s becomes its frame */
    s->d = NULL;
    push3(M, (rgk_word)s, 0, KF_IFA);
    return;
  case SU_CALLBODY:
    r->mode = M_APPLY;
    r->g = s->a;
    r->env = s->b;
    r->st = s->c;
    recycle_susp(M, s);
    return;
  }
}

static void ret_bind(machine *M, regs *r, rg_goal *g, rgk_frame *env) {
  void *v = r->val;
  if (!v) return;
  switch (kind_of(v)) {
  case RGK_S_SUSP: r->val = susp_v(M, SU_BIND, as_susp(v), g, env); return;
  case RGK_S_STATE:
    r->mode = M_APPLY;
    r->g = g;
    r->env = env;
    r->st = v;
    return;
  default: {
    rgk_choice *c = as_choice(v);
    push3(M, (rgk_word)susp(M, SU_BIND, c->f, g, env), 0, KF_MPLUS);
    r->mode = M_APPLY;
    r->g = g;
    r->env = env;
    r->st = c->st;
    recycle_choice(M, c);
    return;
  }
  }
}

static void ret_mplus(machine *M, regs *r, rgk_susp *f) {
  void *v = r->val;
  if (!v) {
    r->mode = M_FORCE;
    r->val = f;
    return;
  }
  switch (kind_of(v)) {
  case RGK_S_SUSP: r->val = susp_v(M, SU_MPLUS, f, as_susp(v), NULL); return;
  case RGK_S_STATE: r->val = choice(M, v, f); return;
  default: {
    rgk_choice *c = as_choice(v); /* reused: (c . (mplus f c.f)) */
    c->f = susp(M, SU_MPLUS, f, c->f, NULL);
    return;
  }
  }
}

/* A conda/condu test produced stream r->val for clause k->i. */
static void ret_ifa(machine *M, regs *r, rgk_susp *k) {
  rg_goal *g = k->a;
  void *v = r->val;
  if (!v) {
    if (k->i + 1 >= g->n) { /* no clause left: fail */
      recycle_susp(M, k);
      return;
    }
    k->i++; /* k becomes the frame of the next clause's test */
    push3(M, (rgk_word)k, 0, KF_IFA);
    r->mode = M_APPLY;
    r->g = g->kids[k->i];
    r->env = k->b;
    r->st = k->c;
    return;
  }
  if (kind_of(v) == RGK_S_SUSP) { /* the test suspended: k waits on it */
    k->sk = SU_IFA;
    k->d = as_susp(v);
    r->val = sv(k, RGK_S_SUSP);
    return;
  }
  if (g->op == G_CONDU && kind_of(v) == RGK_S_CHOICE) {
    rgk_choice *c = as_choice(v);
    r->val = c->st;
    recycle_choice(M, c);
  }
  rgk_frame *env = k->b;
  uint32_t i = k->i;
  recycle_susp(M, k);
  push_body_binds(M, g->kids[g->n + i], env);
}

/* One RETURN step: hands r->val to the frame on top of the stack. */
static void step_return(machine *M, regs *r) {
  rgk_word kind = M->K.v[--M->K.n];
  rgk_word y = M->K.v[--M->K.n], x = M->K.v[--M->K.n];
  switch (kind) {
  case KF_BIND: ret_bind(M, r, (rg_goal *)x, (rgk_frame *)y); return;
  case KF_MPLUS: ret_mplus(M, r, (rgk_susp *)x); return;
  default: ret_ifa(M, r, (rgk_susp *)x); return;
  }
}

/* Runs until a stream is returned past the stack depth at entry. */
static void *run_machine(machine *M, regs *r) {
  size_t base = M->K.n;
  for (;;) {
    switch (r->mode) {
    case M_APPLY: step_apply(M, r); break;
    case M_FORCE: step_force(M, r); break;
    default:
      if (r->val == ABORT) {
        M->K.n = base;
        fail_machine(M);
        return ABORT;
      }
      if (M->K.n == base) return r->val;
      step_return(M, r);
    }
  }
}

/* ------------------------------------------------------------------ queries */

#define QUERY_STACK_WORDS 48

struct rg_query {
  rg_ctx *C;
  machine M;
  rg_term q;
  rg_goal *root;    /* (fresh () goal reify), what every (re)start runs */
  rgk_frame *env;
  double timeout_s;
  void *pending; /* the suspension to force next, or NULL when exhausted */
  rgk_word kbuf[QUERY_STACK_WORDS]; /* the continuation stack starts here */
};

/* (Re)starts the search from st0: empty continuation stack, fresh limits. */
static void query_start(rg_query *Q, rgk_state *st0) {
  machine *M = &Q->M;
  M->K.n = 0;
  M->steps = M->next_check = 0;
  M->status = 0;
  M->chain = 0;
  M->deadline = Q->timeout_s > 0 ? rgk_now() + Q->timeout_s : 0;
  Q->pending = susp(M, SU_CALLBODY, Q->root, Q->env, st0);
}

rg_query *rgk_query_new(rg_ctx *C, rg_term q, rg_goal *g, rgk_frame *env, const rg_run_opts *o,
                        uint64_t scope) {
  rg_query *Q = rgk_alloc(sizeof *Q);
  Q->C = C;
  Q->q = q;
  Q->M.C = C;
  Q->M.K = (rgk_stack){Q->kbuf, 0, QUERY_STACK_WORDS, false};
  Q->M.occurs = !(o && o->no_occurs_check);
  Q->M.max_steps = o ? o->max_steps : 0;
  Q->timeout_s = o ? o->timeout_s : 0;
  /* (fresh () g reify), as faster-miniKanren's run wraps its goal */
  Q->root = rgk_goal_new(G_FRESH);
  Q->root->body = rg_conj2(g, rgk_goal_new(G_REIFY));
  Q->env = env;
  query_start(Q, rgk_state_new(C, scope, NULL, NULL));
  return Q;
}

int rg_query_restart(rg_query *Q, int n, const rg_term *vars, const rg_term *vals) {
  rgk_map *S = NULL;
  for (int i = 0; i < n; i++) {
    if (!rgk_is_var(vars[i]))
      return rg_error(Q->C, RG_ERR_TYPE, "rg_query_restart: argument %d is not a variable", i);
    S = rgk_map_set(Q->C, S, rgk_varp(vars[i])->idx, vals[i]);
  }
  query_start(Q, rgk_state_new(Q->C, rgk_new_scope(Q->C), S, NULL));
  return RG_OK;
}

void rg_query_release(rg_query *Q) {
  machine *M = &Q->M;
  Q->pending = NULL;
  M->K = (rgk_stack){Q->kbuf, 0, QUERY_STACK_WORDS, false};
  memset(Q->kbuf, 0, sizeof Q->kbuf);
  /* recycled suspensions and choices still point into the old search */
  M->free_susp = NULL;
  M->free_choice = NULL;
  M->chain = 0;
}

rg_query *rg_query_new(rg_ctx *C, rg_term q, rg_goal *g, const rg_run_opts *o) {
  return rgk_query_new(C, q, g, NULL, o, rgk_new_scope(C));
}

static int next_answer(rg_query *Q, rg_term *answer, bool reify);

int rg_query_next(rg_query *Q, rg_term *answer) { return next_answer(Q, answer, true); }
int rg_query_next_walked(rg_query *Q, rg_term *answer) { return next_answer(Q, answer, false); }

/* NULL when reifying ran past a deadline (the error is recorded). */
static rg_term answer_of(rg_query *Q, rgk_state *st, bool reify) {
  return reify ? rgk_reify_by(Q->C, Q->q, st, Q->M.deadline) : rgk_walk_star(Q->C, Q->q, st->S);
}

/* The query whose machine runs on this thread, if any.  Relations that
 * start sub-searches from inside a step (rgk_query_from_state) give them
 * its limits and count their steps in it, so that a search's step limit
 * and deadline bound all the work done on its behalf. */
static __thread rg_query *running;

static int force_state(rg_query *Q, rgk_state **out);

/* Forces the query to its next answer state: 1 and *out, 0 when there
 * are no more, or the stop status. */
static int next_state(rg_query *Q, rgk_state **out) {
  rg_query *outer = running;
  running = Q;
  int rc = force_state(Q, out);
  running = outer;
  return rc;
}

static int force_state(rg_query *Q, rgk_state **out) {
  machine *M = &Q->M;
  while (Q->pending) {
    if (M->status) return M->status;
    regs r = {.mode = M_FORCE, .val = Q->pending};
    void *v = run_machine(M, &r);
    if (v == ABORT) {
      Q->pending = NULL;
      return M->status;
    }
    if (!v) {
      Q->pending = NULL;
      break;
    }
    switch (kind_of(v)) {
    case RGK_S_SUSP: Q->pending = as_susp(v); continue;
    case RGK_S_STATE:
      Q->pending = NULL;
      *out = v;
      return 1;
    default: {
      rgk_choice *c = as_choice(v);
      Q->pending = c->f;
      *out = c->st;
      recycle_choice(M, c);
      return 1;
    }
    }
  }
  return M->status ? M->status : 0;
}

static int next_answer(rg_query *Q, rg_term *answer, bool reify) {
  rgk_state *st = NULL;
  int rc = next_state(Q, &st);
  if (rc != 1) return rc;
  rg_term a = answer_of(Q, st, reify);
  if (!a) return Q->M.status = RG_STOP_TIMEOUT;
  *answer = a;
  return rc;
}

rg_query *rgk_query_from_state(rg_ctx *C, rg_goal *g, rgk_state *st) {
  rg_query *Q = rgk_query_new(C, RG_NIL, g, NULL, NULL, 0);
  if (running) Q->M.occurs = running->M.occurs;
  query_start(Q, with_new_scope(C, st)); /* st's own variables are never written in place */
  return Q;
}

/* A sub-search may take the steps its enclosing search has left (at
 * least one, so it can stop with a status) and ends at its deadline. */
static void inherit_limits(machine *M, const machine *outer) {
  M->deadline = outer->deadline;
  int64_t left = outer->max_steps - outer->steps;
  M->max_steps = outer->max_steps ? M->steps + (left > 1 ? left : 1) : 0;
  M->next_check = M->steps; /* examine the new limits at the next step */
}

rgk_state *rgk_query_next_state(rg_query *Q) {
  rg_query *outer = running;
  if (outer) inherit_limits(&Q->M, &outer->M);
  int64_t before = Q->M.steps;
  rgk_state *st = NULL;
  int rc = next_state(Q, &st);
  if (outer) { /* the steps count in the enclosing search, which checks its limits next */
    outer->M.steps += Q->M.steps - before;
    outer->M.next_check = outer->M.steps;
  }
  return rc == 1 ? st : NULL;
}

int rg_query_status(const rg_query *Q) { return Q->M.status; }
int64_t rg_query_steps(const rg_query *Q) { return Q->M.steps; }

/* Collects answers of a query into a list. */
static int collect(rg_query *Q, int64_t n, rg_term *out) {
  rg_term acc = RG_NIL;
  int rc = 0;
  for (int64_t k = 0; n < 0 || k < n; k++) {
    rg_term a;
    rc = rg_query_next(Q, &a);
    if (rc != 1) break;
    acc = rgk_cons(Q->C, a, acc);
  }
  *out = rgk_reverse(acc);
  return rc == 1 ? RG_OK : rc;
}

int rg_run(rg_ctx *C, int64_t n, rg_term q, rg_goal *g, const rg_run_opts *o, rg_term *out) {
  *out = RG_NIL;
  if (n == 0) return RG_OK;
  return collect(rg_query_new(C, q, g, o), n, out);
}
