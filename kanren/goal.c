/*
 * goal.c — goal constructors of the C API, term templates, closures.
 *
 * A goal is immutable code (struct rg_goal).  Goals built from C hold
 * constant templates; the relational language compiles to the same goals
 * with templates that read variables from the frame of the running
 * relation (see compile.c).  Either kind runs on the same search machine.
 */
#include "kanren/kanren-impl.h"

rg_goal *rgk_goal_new(int op) {
  rg_goal *g = rgk_alloc(sizeof *g);
  g->op = (uint8_t)op;
  return g;
}

rgk_tx *rgk_tx_const(rg_term k) {
  rgk_tx *t = rgk_alloc(sizeof *t);
  t->op = TX_CONST;
  t->k = k;
  return t;
}

rg_term rgk_closure(rgk_lambda *lam, rgk_frame *env) {
  rgk_proc *p = rgk_alloc(sizeof *p);
  p->h = (rgk_hdr){.type = RGK_T_PROC, .aux = PROC_LAMBDA};
  p->name = lam->name;
  p->arity = lam->rest ? -1 : (int32_t)lam->nparams;
  p->lam = lam;
  p->env = env;
  return (rg_term)p;
}

rg_term rgk_goal_value(rg_goal *g, rgk_frame *env) {
  rgk_goalv *v = rgk_alloc(sizeof *v);
  v->h = (rgk_hdr){.type = RGK_T_GOALV};
  v->g = g;
  v->env = env;
  return (rg_term)v;
}

static rg_term eval_list(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  RGK_LOCAL_STACK(cars, 16);
  while (t->op == TX_CONS) {
    rg_term a = rgk_tx_eval(C, t->a, env);
    if (!a) return NULL;
    rgk_push(&cars, RGK_W(a));
    t = t->b;
  }
  rg_term l = rgk_tx_eval(C, t, env);
  if (!l) return NULL;
  while (cars.n) l = rgk_cons(C, RGK_T(cars.v[--cars.n]), l);
  return l;
}

static rg_term eval_prim(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  rg_term small[8];
  rg_term *args = t->idx <= 8 ? small : rgk_alloc(t->idx * sizeof(rg_term));
  for (uint32_t i = 0; i < t->idx; i++)
    if (!(args[i] = rgk_tx_eval(C, t->args[i], env))) return NULL;
  return t->prim(C, (int)t->idx, args, t);
}

/* A let (TX_LET: the values computed in env) or the relations defined
 * inside a let body (TX_LETREC: each closure made over the frame that
 * holds them all, so they call themselves and one another), then t->a in
 * the new frame. */
static rg_term eval_let(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  rgk_frame *f = rgk_alloc(sizeof *f + t->idx * sizeof(rg_term));
  f->up = env;
  rgk_frame *in = t->op == TX_LETREC ? f : env;
  for (uint32_t i = 0; i < t->idx; i++)
    if (!(f->v[i] = rgk_tx_eval(C, t->args[i], in))) return NULL;
  return rgk_tx_eval(C, t->a, f);
}

/* (f arg ...) as a value: a primitive computes; a relation gives the goal
 * of calling it. */
static rg_term eval_apply(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  rg_term f = rgk_tx_eval(C, t->a, env);
  if (!f) return NULL;
  rg_term small[8];
  rg_term *args = t->idx <= 8 ? small : rgk_alloc(t->idx * sizeof(rg_term));
  for (uint32_t i = 0; i < t->idx; i++)
    if (!(args[i] = rgk_tx_eval(C, t->args[i], env))) return NULL;
  if (rgk_type(f) != RGK_T_PROC) {
    rg_error(C, RG_ERR_TYPE, "%s%snot a procedure: %s", t->where ? t->where : "",
             t->where ? ": " : "", rgk_show_value(f));
    return NULL;
  }
  rgk_proc *p = (rgk_proc *)f;
  if (p->h.aux == PROC_PRIM) {
    if (p->arity >= 0 && (uint32_t)p->arity != t->idx) {
      rg_error(C, RG_ERR_ARITY, "%s%s%s expects %d argument%s, got %u", t->where ? t->where : "",
               t->where ? ": " : "", rg_proc_name(f), p->arity, p->arity == 1 ? "" : "s", t->idx);
      return NULL;
    }
    return p->prim(C, (int)t->idx, args, t);
  }
  rg_goal *g = rg_call(f, (int)t->idx, args);
  g->where = t->where;
  return rgk_goal_value(g, NULL);
}

rg_term rgk_tx_eval_full(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  switch (t->op) {
  case TX_CONST: case TX_LOCAL: return rgk_tx_leaf(t, env);
  case TX_GLOBAL:
    if (!t->g->value) {
      rg_error(C, RG_ERR_NAME, "%s%sunbound variable %s", t->where ? t->where : "",
               t->where ? ": " : "", rgk_symname(t->g->name));
      return NULL;
    }
    return t->g->value;
  case TX_CONS: return eval_list(C, t, env);
  case TX_ETUPLE: {
    rg_term l = rgk_tx_eval(C, t->a, env);
    if (!l) return NULL;
    if (rgk_length(l) < 1) {
      rg_error(C, RG_ERR_TYPE, "%s%setuple needs a head", t->where ? t->where : "",
               t->where ? ": " : "");
      return NULL;
    }
    return rg_etuple_from_list(l);
  }
  case TX_LAMBDA: return rgk_closure(t->lam, env);
  case TX_PRIM: return eval_prim(C, t, env);
  case TX_LET: return eval_let(C, t, env);
  case TX_LETREC: return eval_let(C, t, env);
  case TX_GOAL: return rgk_goal_value(t->goal, env);
  case TX_RUN: return rgk_eval_run(C, t, env);
  case TX_APPLY: return eval_apply(C, t, env);
  }
  return NULL;
}

/* Whether every part of t is a constant, a local or a cons.  The cdr
 * spine (as long as the list) is followed in a loop; only cars recurse,
 * and their depth is bounded by the reader's nesting limit. */
static bool tx_simple(rgk_tx *t) {
  if (t->shape & TX_SHAPE_KNOWN) return t->shape & TX_SHAPE_SIMPLE;
  bool simple = true;
  const rgk_tx *x = t;
  for (; x->op == TX_CONS && simple; x = x->b) simple = tx_simple(x->a);
  simple = simple && (x->op == TX_CONST || x->op == TX_LOCAL || x->op == TX_CONS);
  t->shape = TX_SHAPE_KNOWN | (simple ? TX_SHAPE_SIMPLE : 0);
  return simple;
}

bool rgk_tx_matchable(rgk_tx *t) { return t->op == TX_CONS && tx_simple(t); }
bool rgk_tx_shape_simple(rgk_tx *t) { return tx_simple(t); }

/* ------------------------------------------------------------------ C API constructors */

static rg_goal *goal2(int op, rg_term a, rg_term b) {
  rg_goal *g = rgk_goal_new(op);
  g->a = rgk_tx_const(a);
  g->b = rgk_tx_const(b);
  return g;
}

rg_goal *rg_succeed(void) { return rgk_goal_new(G_SUCCEED); }
rg_goal *rg_fail(void) { return rgk_goal_new(G_FAIL); }
rg_goal *rg_eq(rg_term a, rg_term b) { return goal2(G_EQ, a, b); }
rg_goal *rg_neq(rg_term a, rg_term b) { return goal2(G_NEQ, a, b); }
rg_goal *rg_absento(rg_term needle, rg_term hay) { return goal2(G_ABSENTO, needle, hay); }

static rg_goal *type_goal(int i, rg_term t) {
  rg_goal *g = rgk_goal_new(G_TYPE);
  g->a = rgk_tx_const(t);
  g->tag = rgk_type_tag(i);
  return g;
}
rg_goal *rg_numbero(rg_term t) { return type_goal(0, t); }
rg_goal *rg_stringo(rg_term t) { return type_goal(1, t); }
rg_goal *rg_symbolo(rg_term t) { return type_goal(2, t); }

static rg_goal **copy_goals(int n, rg_goal *const *gs) {
  rg_goal **v = rgk_alloc((size_t)(n ? n : 1) * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = gs[i];
  return v;
}

rg_goal *rg_conj(int n, rg_goal *const *gs) {
  if (n == 0) return rg_succeed();
  if (n == 1) return gs[0];
  rg_goal *g = rgk_goal_new(G_CONJ);
  g->n = (uint32_t)n;
  g->kids = copy_goals(n, gs);
  return g;
}
rg_goal *rg_conj2(rg_goal *a, rg_goal *b) { return rg_conj(2, (rg_goal *[]){a, b}); }

rg_goal *rg_conde(int n, rg_goal *const *clauses) {
  if (n == 0) return rg_fail();
  rg_goal *g = rgk_goal_new(G_CONDE);
  g->n = (uint32_t)n;
  g->kids = copy_goals(n, clauses);
  return g;
}
rg_goal *rg_disj2(rg_goal *a, rg_goal *b) { return rg_conde(2, (rg_goal *[]){a, b}); }

static rg_goal *cond_ifte(int op, int n, rg_goal *const *tests, rg_goal *const *bodies) {
  if (n == 0) return rg_fail();
  rg_goal *g = rgk_goal_new(op);
  g->n = (uint32_t)n;
  g->kids = rgk_alloc(2 * (size_t)n * sizeof(rg_goal *));
  for (int i = 0; i < n; i++) {
    g->kids[i] = tests[i];
    g->kids[n + i] = bodies[i] ? bodies[i] : rg_succeed();
  }
  return g;
}
rg_goal *rg_conda(int n, rg_goal *const *t, rg_goal *const *b) { return cond_ifte(G_CONDA, n, t, b); }
rg_goal *rg_condu(int n, rg_goal *const *t, rg_goal *const *b) { return cond_ifte(G_CONDU, n, t, b); }
rg_goal *rg_onceo(rg_goal *g) {
  rg_goal *s = rg_succeed();
  return rg_condu(1, &g, &s);
}

rg_goal *rg_fresh(int n, rg_fresh_fn fn, void *ud) {
  rg_goal *g = rgk_goal_new(G_CFRESH);
  g->n = (uint32_t)n;
  g->fn = (void *)fn;
  g->ud = ud;
  return g;
}

rg_term rg_relation(const char *name, int arity, rg_relation_fn fn, void *ud) {
  rgk_proc *p = rgk_alloc(sizeof *p);
  p->h = (rgk_hdr){.type = RGK_T_PROC, .aux = PROC_C};
  p->name = rg_symbol(name);
  p->arity = arity;
  p->fn = fn;
  p->ud = ud;
  return (rg_term)p;
}

/* The C goal of a functional relation: args are the call's arguments. */
static rgk_state *func_goal(rg_ctx *C, rgk_state *st, int n, const rg_term *args, void *ud) {
  rgk_proc *p = ud;
  rg_term small[8];
  rg_term *in = n <= 8 ? small : rgk_alloc((size_t)n * sizeof(rg_term));
  for (int i = 0; i < n; i++) in[i] = rgk_walk(args[i], st->S);
  rg_term out = NULL;
  int rc = p->func(C, in, &out, p->ud);
  if (rc < 0) return RGK_STATE_ERROR;
  if (rc == 0) return NULL;
  return out ? rgk_solve_eq(C, st, args[n - 1], out, true) : st;
}

rg_term rg_relation_function(const char *name, int arity, rg_function_fn fn, void *ud) {
  rgk_proc *p = rgk_alloc(sizeof *p);
  p->h = (rgk_hdr){.type = RGK_T_PROC, .aux = PROC_FUNC};
  p->name = rg_symbol(name);
  p->arity = arity > 0 ? arity : 1;
  p->func = fn;
  p->ud = ud;
  rg_goal *g = rgk_goal_new(G_CGOAL);
  g->fn = (void *)func_goal;
  g->ud = p;
  g->n = (uint32_t)p->arity;
  g->args = rgk_alloc((size_t)p->arity * sizeof(rgk_tx *));
  for (int i = 0; i < p->arity; i++) {
    rgk_tx *t = rgk_alloc(sizeof *t);
    t->op = TX_LOCAL;
    t->idx = (uint32_t)i;
    g->args[i] = t;
  }
  p->cbody = g;
  return (rg_term)p;
}

rg_term rgk_facts_proc(rg_term name) {
  rgk_proc *p = rgk_alloc(sizeof *p);
  p->h = (rgk_hdr){.type = RGK_T_PROC, .aux = PROC_FACTS};
  p->name = name;
  p->arity = -1;
  return (rg_term)p;
}

rg_goal *rg_call(rg_term rel, int nargs, const rg_term *args) {
  rg_goal *g = rgk_goal_new(G_CALL);
  g->a = rgk_tx_const(rel);
  g->n = (uint32_t)nargs;
  g->args = rgk_alloc((size_t)(nargs ? nargs : 1) * sizeof(rgk_tx *));
  for (int i = 0; i < nargs; i++) g->args[i] = rgk_tx_const(args[i]);
  return g;
}

const char *rg_proc_name(rg_term rel) {
  rgk_proc *p = (rgk_proc *)rel;
  return p->name ? rgk_symname(p->name) : "lambda";
}
int rg_proc_arity(rg_term rel) { return ((rgk_proc *)rel)->arity; }

/* ------------------------------------------------------------------ facts */

void rg_fact(rg_ctx *C, rg_term rel, int nargs, const rg_term *args) {
  if (rg_has_fact(C, rel, nargs, args)) return;
  C->facts = rg_cons(rg_cons(rel, rg_list(nargs, args)), C->facts);
}

bool rg_has_fact(rg_ctx *C, rg_term rel, int nargs, const rg_term *args) {
  rg_term want = rg_cons(rel, rg_list(nargs, args));
  for (rg_term f = C->facts; rgk_is_pair(f); f = rgk_cdr(f))
    if (rg_equal(rgk_car(f), want)) return true;
  return false;
}
