/*
 * analyze.c — reading compiled relations: what a relation requires of an
 * argument.
 *
 * rg_relation_input_templates looks for a unification (== ARG TEMPLATE)
 * with a list template in the conjunctions of the relation's body (one
 * whose head is known where there is one), through calls to other
 * relations (following which parameter ARG becomes, and which parameters
 * receive constants), and through conde (every clause must tell, the
 * templates are the union).  A template is a term: its constant parts as
 * written, `_` where it holds a variable or a computed value.
 * rg_relation_input_heads is the heads of those templates, when all are
 * known.  Both are sound but incomplete: NULL means "unknown", and
 * callers then consider every term; a template found is required of every
 * answer, so a term that cannot unify with any of them has no answer.
 */
#include "kanren/kanren-impl.h"

#define MAX_CALL_DEPTH 8
#define MAX_VISITS 4096   /* goals read per question: calls under conde can fan out */
#define MAX_TEMPLATES 32  /* alternatives kept; more say little and cost a check each */

/* The frame of the relation being read: which parameter is ARG, and the
 * constants its caller passed for its parameters (NULL when not constant). */
typedef struct frame_info {
  int arg;              /* parameter index of ARG, or -1 */
  rg_term consts[8];    /* first eight parameters */
  int nconsts;
  int *visits;          /* goals read so far, shared by the whole question */
} frame_info;

static rg_term templates_goal(const rg_goal *g, int depth, const frame_info *fi, int calls);

/* Is t a reference to ARG?  `depth` frames separate the goal from the
 * relation's parameter frame. */
static bool is_arg(const rgk_tx *t, int depth, const frame_info *fi) {
  return fi->arg >= 0 && t->op == TX_LOCAL && t->depth == depth && (int)t->idx == fi->arg;
}

/* What a template requires, as a term: its constants and pairs as they
 * are, a parameter the caller passed a constant for as that constant, and
 * the wildcard symbol `_` for anything else (a variable, a value computed
 * at run time), which requires nothing.  A literal `_` in the template
 * reads as the wildcard too, which only asks less of the argument. */
static rg_term wildcard(void) { return rg_symbol("_"); }

static rg_term template_term(const rgk_tx *t, int depth, const frame_info *fi);

/* A chain of TX_CONS as a list, iteratively along its tail (a long
 * quasiquoted list is deep in pairs, not in the reader's nesting). */
static rg_term template_list(const rgk_tx *t, int depth, const frame_info *fi) {
  RGK_LOCAL_STACK(cars, 32);
  for (; t->op == TX_CONS; t = t->b) rgk_push(&cars, RGK_W(template_term(t->a, depth, fi)));
  rg_term l = template_term(t, depth, fi);
  while (cars.n) l = rg_cons(RGK_T(cars.v[--cars.n]), l);
  return l;
}

static rg_term template_term(const rgk_tx *t, int depth, const frame_info *fi) {
  switch (t->op) {
  case TX_CONST: return t->k;
  case TX_CONS: return template_list(t, depth, fi);
  case TX_LOCAL:
    if (t->depth == depth && (int)t->idx < fi->nconsts && fi->consts[t->idx]) return fi->consts[t->idx];
    return wildcard();
  default: return wildcard();
  }
}

/* Whether the term holds the wildcard (recursing into cars, iterating
 * along tails). */
static bool has_wildcard(rg_term t, rg_term any) {
  for (; rgk_is_pair(t); t = rgk_cdr(t))
    if (has_wildcard(rgk_car(t), any)) return true;
  return t == any;
}

/* Whether every template of the list has a head without the wildcard. */
static bool heads_known(rg_term ts) {
  rg_term any = wildcard();
  for (; rgk_is_pair(ts); ts = rgk_cdr(ts))
    if (has_wildcard(rgk_car(rgk_car(ts)), any)) return false;
  return true;
}

/* (== ARG TEMPLATE) or (== TEMPLATE ARG) with a list template: a list of
 * that one template; NULL otherwise. */
static rg_term templates_eq(const rg_goal *g, int depth, const frame_info *fi) {
  const rgk_tx *t = is_arg(g->a, depth, fi) ? g->b : is_arg(g->b, depth, fi) ? g->a : NULL;
  if (!t || !(t->op == TX_CONS || (t->op == TX_CONST && rgk_is_pair(t->k)))) return NULL;
  return rg_cons(template_term(t, depth, fi), RG_NIL);
}

/* A call: if ARG is passed on, read the callee with ARG's new position. */
static rg_term templates_call(const rg_goal *g, int depth, const frame_info *fi, int calls) {
  if (calls >= MAX_CALL_DEPTH || g->a->op == TX_LOCAL) return NULL;
  rg_term p = g->a->op == TX_GLOBAL ? g->a->g->value : g->a->op == TX_CONST ? g->a->k : NULL;
  if (!p || rgk_type(p) != RGK_T_PROC || ((rgk_proc *)p)->h.aux != PROC_LAMBDA) return NULL;
  rgk_lambda *lam = ((rgk_proc *)p)->lam;
  frame_info callee = {.arg = -1, .visits = fi->visits};
  for (uint32_t i = 0; i < g->n && i < lam->nparams; i++) {
    if (is_arg(g->args[i], depth, fi) && callee.arg < 0) callee.arg = (int)i;
    if (i < 8) {
      callee.consts[i] = g->args[i]->op == TX_CONST ? g->args[i]->k : NULL;
      callee.nconsts = (int)i + 1;
    }
  }
  if (callee.arg < 0 || lam->rest) return NULL;
  return templates_goal(lam->body, 0, &callee, calls + 1);
}

static rg_term append_new(rg_term a, rg_term b) {
  for (; rgk_is_pair(b); b = rgk_cdr(b)) {
    bool dup = false;
    for (rg_term l = a; rgk_is_pair(l); l = rgk_cdr(l)) dup |= rg_equal(rgk_car(l), rgk_car(b));
    if (!dup) a = rg_cons(rgk_car(b), a);
  }
  return a;
}

static rg_term templates_goal(const rg_goal *g, int depth, const frame_info *fi, int calls) {
  if (++*fi->visits > MAX_VISITS) return NULL;
  switch (g->op) {
  case G_EQ: return templates_eq(g, depth, fi);
  case G_CONJ: {
    rg_term first = NULL; /* the first found; one whose heads are known is better */
    for (uint32_t i = 0; i < g->n; i++) {
      rg_term ts = templates_goal(g->kids[i], depth, fi, calls);
      if (ts && heads_known(ts)) return ts;
      if (!first) first = ts;
    }
    return first;
  }
  case G_FRESH: return templates_goal(g->body, g->n ? depth + 1 : depth, fi, calls);
  case G_LET: return templates_goal(g->body, depth + 1, fi, calls);
  case G_CONDE: {
    rg_term all = RG_NIL;
    for (uint32_t i = 0; i < g->n; i++) {
      rg_term h = templates_goal(g->kids[i], depth, fi, calls);
      if (!h) return NULL;
      all = append_new(all, h);
      if (rg_list_length(all) > MAX_TEMPLATES) return NULL;
    }
    return all;
  }
  case G_CALL: return templates_call(g, depth, fi, calls);
  default: return NULL;
  }
}

rg_term rg_relation_input_templates(rg_term rel, int arg) {
  if (rgk_type(rel) != RGK_T_PROC || ((rgk_proc *)rel)->h.aux != PROC_LAMBDA) return NULL;
  rgk_lambda *lam = ((rgk_proc *)rel)->lam;
  if (arg < 0 || (uint32_t)arg >= lam->nparams || lam->rest) return NULL;
  int visits = 0;
  frame_info fi = {.arg = arg, .visits = &visits};
  rg_term ts = templates_goal(lam->body, 0, &fi, 0);
  return visits > MAX_VISITS ? NULL : ts;
}

rg_term rg_relation_input_heads(rg_term rel, int arg) {
  rg_term ts = rg_relation_input_templates(rel, arg), heads = RG_NIL;
  if (!ts || !heads_known(ts)) return NULL;
  for (; rgk_is_pair(ts); ts = rgk_cdr(ts)) heads = append_new(heads, rg_cons(rgk_car(rgk_car(ts)), RG_NIL));
  return heads;
}
