/*
 * compile.c — the compiler of the relational language: forms to goals
 * and term templates.
 *
 * Relations compile once, when defined, into the goal code the search
 * machine runs (see kanren-impl.h).  Variables are resolved at compile time
 * to lexical addresses (frame depth, slot) or to global cells; every
 * binding form (relation parameters, fresh, let, project) makes one frame
 * at run time.  Quasiquoted templates compile to constructors with their
 * ground parts shared, so `(== `(,a . ,d) l)` allocates one pair per run.
 *
 * Special forms are recognised by name unless the name is bound locally.
 * The compiler recurses over the form, whose depth the reader bounds.
 */
#include "kanren/kanren-impl.h"

/* A compile-time scope: the names of one run-time frame. */
typedef struct scope {
  struct scope *up;
  uint32_t n;
  rg_term *names;
} scope;

typedef struct cc {
  rg_interp *I;
  rg_ctx *C;
  rg_term where_form; /* innermost form with a known position */
  bool failed;
} cc;

static rgk_tx *compile_value(cc *k, scope *sc, rg_term form);
static rg_goal *compile_goal(cc *k, scope *sc, rg_term form);

/* ------------------------------------------------------------------ helpers */

const char *rgk_where(rg_interp *I, rg_term form) {
  const char *w = rgk_srcmap_where(I->map, form);
  return w ? w : rgk_srcmap_where(I->wmap, form);
}

static const char *where(cc *k) {
  const char *w = rgk_where(k->I, k->where_form);
  if (!w && k->I->top_form) w = rgk_where(k->I, k->I->top_form);
  return w ? w : "<input>";
}

/* The position recorded in compiled code for run-time errors.  Library
 * code (the prelude) records none: its positions mean nothing to users. */
static const char *site(cc *k) { return k->I->compiling_lib ? NULL : where(k); }

static void *cerr(cc *k, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *cerr(cc *k, int code, const char *fmt, ...) {
  if (k->failed) return NULL;
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  rg_error(k->C, code, "%s: %s", where(k), msg);
  k->failed = true;
  return NULL;
}

static rg_term sym(const char *s) { return rg_symbol(s); }

/* The built-in forms under names no program can write or bind (a symbol
 * read from text has no space): code the compiler writes uses them. */
#define KW_EQ " =="
#define KW_LIST " list"
#define KW_FRESH " fresh"

static bool is_sym(rg_term t, const char *name) {
  return rgk_is_symbol(t) && !strcmp(rgk_symname(t), name);
}

static bool lookup_local(scope *sc, rg_term name, uint16_t *depth, uint32_t *idx) {
  for (uint16_t d = 0; sc; sc = sc->up, d++)
    for (uint32_t i = sc->n; i-- > 0;)
      if (sc->names[i] == name) {
        *depth = d;
        *idx = i;
        return true;
      }
  return false;
}

static bool is_local(scope *sc, rg_term name) {
  uint16_t d;
  uint32_t i;
  return lookup_local(sc, name, &d, &i);
}

/* Whether the program has bound `name` itself (a define or defrel of its
 * own, before this form): then it shadows a built-in goal of that name. */
static bool user_bound(rg_interp *I, rg_term name) {
  if (I->compiling_lib) return false;
  rgk_global *g = rgk_table_get(&I->user, name, false), *lib;
  if (g && g->defining) return true;
  if (!g || !g->value) return false;
  lib = rgk_table_get(&I->lib, name, false); /* a user cell may hold the library's value */
  return !lib || lib->value != g->value;
}

/* Is `head` the special form `name` here (not shadowed by a local)? */
static bool is_form(scope *sc, rg_term head, const char *name) {
  return is_sym(head, name) && !is_local(sc, head);
}

static scope *scope_new(scope *up, rg_term names_list, cc *k) {
  int64_t n = rgk_length(names_list);
  scope *s = rgk_alloc(sizeof *s);
  s->up = up;
  s->n = (uint32_t)n;
  s->names = rgk_alloc((size_t)(n ? n : 1) * sizeof(rg_term));
  for (int64_t i = 0; i < n; i++, names_list = rgk_cdr(names_list)) {
    rg_term x = rgk_car(names_list);
    if (!rgk_is_symbol(x)) return cerr(k, RG_ERR_SYNTAX, "not a variable name: %s", rg_to_string(x));
    s->names[i] = x;
  }
  return s;
}

/* Sets the error position to form if the reader knows it. */
static rg_term enter(cc *k, rg_term form) {
  rg_term saved = k->where_form;
  if (rgk_is_pair(form) && rgk_where(k->I, form)) k->where_form = form;
  return saved;
}

static rgk_tx *tx_new(int op) {
  rgk_tx *t = rgk_alloc(sizeof *t);
  t->op = (uint8_t)op;
  return t;
}

static rgk_tx *tx_cons(rgk_tx *a, rgk_tx *b) {
  if (a->op == TX_CONST && b->op == TX_CONST) return rgk_tx_const(rg_cons(a->k, b->k));
  rgk_tx *t = tx_new(TX_CONS);
  t->a = a;
  t->b = b;
  return t;
}

rgk_global *rgk_global_for(rg_interp *I, rg_term s) {
  if (I->compiling_lib) return rgk_table_get(&I->lib, s, true);
  rgk_global *g = rgk_table_get(&I->user, s, false);
  if (g) return g;
  g = rgk_table_get(&I->user, s, true);
  rgk_global *lib = rgk_table_get(&I->lib, s, false);
  if (lib) g->value = lib->value; /* falls back to the library's binding */
  return g;
}

static rgk_tx *compile_ref(cc *k, scope *sc, rg_term name) {
  uint16_t d;
  uint32_t i;
  if (lookup_local(sc, name, &d, &i)) {
    rgk_tx *t = tx_new(TX_LOCAL);
    t->depth = d;
    t->idx = i;
    return t;
  }
  rgk_tx *t = tx_new(TX_GLOBAL);
  t->g = rgk_global_for(k->I, name);
  t->where = site(k);
  return t;
}

static int64_t arg_count(rg_term form) { return rgk_length(rgk_cdr(form)); }

static bool check_args(cc *k, rg_term form, int64_t lo, int64_t hi) {
  int64_t n = arg_count(form);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "improper list in %s", rg_to_string(rgk_car(form))), false;
  if (n < lo || (hi >= 0 && n > hi)) {
    if (lo == hi)
      cerr(k, RG_ERR_ARITY, "%s expects %lld argument%s, got %lld", rg_to_string(rgk_car(form)),
           (long long)lo, lo == 1 ? "" : "s", (long long)n);
    else
      cerr(k, RG_ERR_ARITY, "%s expects at least %lld argument%s, got %lld",
           rg_to_string(rgk_car(form)), (long long)lo, lo == 1 ? "" : "s", (long long)n);
    return false;
  }
  return true;
}

static rg_term nth(rg_term l, int i) {
  while (i--) l = rgk_cdr(l);
  return rgk_car(l);
}

/* ------------------------------------------------------------------ quasiquote */

static rgk_tx *compile_qq(cc *k, scope *sc, rg_term d, int level);

static rgk_tx *append_tx(rgk_tx *front, rgk_tx *back, const char *where) {
  extern rg_term rgk_prim_append(rg_ctx *, int, const rg_term *, const rgk_tx *);
  rgk_tx *t = tx_new(TX_PRIM);
  t->prim = rgk_prim_append;
  t->idx = 2;
  t->args = rgk_alloc(2 * sizeof(rgk_tx *));
  t->args[0] = front;
  t->args[1] = back;
  t->where = where;
  return t;
}

/* A two-element list (tag x) with a tag recognised at this level? */
static bool qq_tagged(rg_term d, const char *tag) {
  return rgk_is_pair(d) && is_sym(rgk_car(d), tag) && rgk_is_pair(rgk_cdr(d)) &&
         rgk_cdr(rgk_cdr(d)) == RG_NIL;
}

static rgk_tx *compile_qq_list(cc *k, scope *sc, rg_term d, int level) {
  /* elements are compiled into an array first so the tail is built right to left */
  RGK_LOCAL_STACK(items, 16);
  rg_term tail = d;
  while (rgk_is_pair(tail) && !qq_tagged(tail, "unquote")) {
    rgk_push(&items, RGK_W(rgk_car(tail)));
    tail = rgk_cdr(tail);
  }
  rgk_tx *acc = compile_qq(k, sc, tail, level);
  for (size_t i = items.n; acc && i-- > 0;) {
    rg_term e = RGK_T(items.v[i]);
    if (qq_tagged(e, "unquote-splicing") && level == 1) {
      rgk_tx *front = compile_value(k, sc, nth(e, 1));
      if (!front) return NULL;
      /* spliced last, the value is the tail itself, whatever it is (a
       * variable, an improper list, an atom), as Scheme expands it */
      acc = i == items.n - 1 && tail == RG_NIL ? front : append_tx(front, acc, site(k));
    } else {
      rgk_tx *a = compile_qq(k, sc, e, level);
      if (!a) return NULL;
      acc = tx_cons(a, acc);
    }
  }
  return acc;
}

static rgk_tx *compile_qq(cc *k, scope *sc, rg_term d, int level) {
  if (!rgk_is_pair(d)) return rgk_tx_const(d);
  rg_term saved = enter(k, d);
  rgk_tx *r;
  if (qq_tagged(d, "unquote")) {
    if (level == 1) {
      r = compile_value(k, sc, nth(d, 1));
    } else {
      rgk_tx *inner = compile_qq(k, sc, nth(d, 1), level - 1);
      r = inner ? tx_cons(rgk_tx_const(rgk_car(d)), tx_cons(inner, rgk_tx_const(RG_NIL))) : NULL;
    }
  } else if (qq_tagged(d, "quasiquote")) {
    rgk_tx *inner = compile_qq(k, sc, nth(d, 1), level + 1);
    r = inner ? tx_cons(rgk_tx_const(rgk_car(d)), tx_cons(inner, rgk_tx_const(RG_NIL))) : NULL;
  } else {
    r = compile_qq_list(k, sc, d, level);
  }
  k->where_form = saved;
  return r;
}

/* ------------------------------------------------------------------ lambda and bodies */

/* Parses a parameter list: (a b), (a . rest) or rest. */
static rg_term param_names(cc *k, rg_term params, bool *rest) {
  *rest = false;
  RGK_LOCAL_STACK(names, 16);
  while (rgk_is_pair(params)) {
    rgk_push(&names, RGK_W(rgk_car(params)));
    params = rgk_cdr(params);
  }
  if (params != RG_NIL) {
    if (!rgk_is_symbol(params)) return cerr(k, RG_ERR_SYNTAX, "bad parameter list");
    rgk_push(&names, RGK_W(params));
    *rest = true;
  }
  return rg_list((int)names.n, (rg_term *)names.v);
}

/* A relation body: one goal as is; several as (fresh () g ...), which
 * suspends, as faster-miniKanren's defrel does. */
static rg_goal *compile_rel_body(cc *k, scope *sc, rg_term body) {
  int64_t n = rgk_length(body);
  if (n <= 0) return cerr(k, RG_ERR_SYNTAX, "relation body has no goal");
  if (n == 1) return compile_goal(k, sc, rgk_car(body));
  rg_goal *conj = rgk_goal_new(G_CONJ);
  conj->n = (uint32_t)n;
  conj->kids = rgk_alloc((size_t)n * sizeof(rg_goal *));
  for (int64_t i = 0; i < n; i++, body = rgk_cdr(body))
    if (!(conj->kids[i] = compile_goal(k, sc, rgk_car(body)))) return NULL;
  rg_goal *f = rgk_goal_new(G_FRESH);
  f->body = conj;
  return f;
}

static rgk_lambda *compile_lambda_in(cc *k, scope *sc, rg_term name, rg_term params, rg_term body) {
  bool rest;
  rg_term names = param_names(k, params, &rest);
  if (!names) return NULL;
  for (rg_term a = names; rgk_is_pair(a); a = rgk_cdr(a))
    for (rg_term b = rgk_cdr(a); rgk_is_pair(b); b = rgk_cdr(b))
      if (rgk_car(a) == rgk_car(b))
        return cerr(k, RG_ERR_SYNTAX, "parameter %s is named twice", rg_to_string(rgk_car(a)));
  scope *inner = scope_new(sc, names, k);
  if (!inner) return NULL;
  rgk_lambda *lam = rgk_alloc(sizeof *lam);
  lam->name = name;
  lam->nparams = inner->n;
  lam->rest = rest;
  lam->body = compile_rel_body(k, inner, body);
  return lam->body ? lam : NULL;
}

/* Goals g... as one conjunction (bind* order). */
static rg_goal *compile_conj(cc *k, scope *sc, rg_term goals) {
  int64_t n = rgk_length(goals);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "improper list of goals");
  if (n == 0) return rg_succeed();
  if (n == 1) return compile_goal(k, sc, rgk_car(goals));
  rg_goal *g = rgk_goal_new(G_CONJ);
  g->n = (uint32_t)n;
  g->kids = rgk_alloc((size_t)n * sizeof(rg_goal *));
  for (int64_t i = 0; i < n; i++, goals = rgk_cdr(goals))
    if (!(g->kids[i] = compile_goal(k, sc, rgk_car(goals)))) return NULL;
  return g;
}

/* ------------------------------------------------------------------ goal forms */

static rg_goal *goal_binary(cc *k, scope *sc, rg_term form, int op) {
  if (!check_args(k, form, 2, 2)) return NULL;
  rg_goal *g = rgk_goal_new(op);
  if (!(g->a = compile_value(k, sc, nth(form, 1)))) return NULL;
  if (!(g->b = compile_value(k, sc, nth(form, 2)))) return NULL;
  return g;
}

static rg_goal *goal_type(cc *k, scope *sc, rg_term form, int i) {
  if (!check_args(k, form, 1, 1)) return NULL;
  rg_goal *g = rgk_goal_new(G_TYPE);
  g->tag = rgk_type_tag(i);
  g->a = compile_value(k, sc, nth(form, 1));
  return g->a ? g : NULL;
}

static rg_goal *goal_fresh(cc *k, scope *sc, rg_term form) {
  if (!check_args(k, form, 1, -1)) return NULL;
  rg_term vars = nth(form, 1);
  if (rgk_length(vars) < 0) return cerr(k, RG_ERR_SYNTAX, "fresh needs a list of variables");
  rg_goal *g = rgk_goal_new(G_FRESH);
  g->n = (uint32_t)rgk_length(vars);
  scope *inner = sc;
  if (g->n && !(inner = scope_new(sc, vars, k))) return NULL;
  g->body = compile_conj(k, inner, rgk_cdr(rgk_cdr(form)));
  return g->body ? g : NULL;
}

/* A clause's goals; a leading `else` is a test that always succeeds. */
static rg_term clause_goals(cc *k, scope *sc, rg_term clause) {
  if (rgk_length(clause) < 0 || clause == RG_NIL)
    return cerr(k, RG_ERR_SYNTAX, "a clause must be a non-empty list of goals");
  if (is_form(sc, rgk_car(clause), "else")) return rg_cons(sym("#s"), rgk_cdr(clause)); /* not a program's `succeed` */
  return clause;
}

static rg_goal *goal_conde(cc *k, scope *sc, rg_term form) {
  rg_term clauses = rgk_cdr(form);
  int64_t n = rgk_length(clauses);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "improper list in conde");
  if (n < 1) return cerr(k, RG_ERR_SYNTAX, "conde needs at least one clause");
  rg_goal *g = rgk_goal_new(G_CONDE);
  g->n = (uint32_t)n;
  g->kids = rgk_alloc((size_t)n * sizeof(rg_goal *));
  for (int64_t i = 0; i < n; i++, clauses = rgk_cdr(clauses)) {
    rg_term saved = enter(k, rgk_car(clauses));
    rg_term goals = clause_goals(k, sc, rgk_car(clauses));
    if (!goals || !(g->kids[i] = compile_conj(k, sc, goals))) return NULL;
    k->where_form = saved;
  }
  return g;
}

static rg_goal *goal_conda(cc *k, scope *sc, rg_term form, int op) {
  rg_term clauses = rgk_cdr(form);
  int64_t n = rgk_length(clauses);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "improper list in %s", rg_to_string(rgk_car(form)));
  if (n < 1) return cerr(k, RG_ERR_SYNTAX, "%s needs at least one clause", rg_to_string(rgk_car(form)));
  rg_goal *g = rgk_goal_new(op);
  g->n = (uint32_t)n;
  g->kids = rgk_alloc(2 * (size_t)n * sizeof(rg_goal *));
  for (int64_t i = 0; i < n; i++, clauses = rgk_cdr(clauses)) {
    rg_term saved = enter(k, rgk_car(clauses));
    rg_term goals = clause_goals(k, sc, rgk_car(clauses));
    if (!goals || !(g->kids[i] = compile_goal(k, sc, rgk_car(goals)))) return NULL;
    if (!(g->kids[n + i] = compile_conj(k, sc, rgk_cdr(goals)))) return NULL;
    k->where_form = saved;
  }
  return g;
}

/* (let ((x e) ...) body...) and (project (x ...) body...) */
static rg_goal *goal_binding(cc *k, scope *sc, rg_term form, int op) {
  if (!check_args(k, form, 1, -1)) return NULL;
  rg_term binds = nth(form, 1);
  int64_t n = rgk_length(binds);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "bad binding list");
  rg_goal *g = rgk_goal_new(op);
  g->n = (uint32_t)n;
  g->args = rgk_alloc((size_t)(n ? n : 1) * sizeof(rgk_tx *));
  rg_term names = RG_NIL;
  for (int64_t i = 0; i < n; i++, binds = rgk_cdr(binds)) {
    rg_term b = rgk_car(binds), name = b, init = b;
    if (op == G_LET) {
      if (rgk_length(b) != 2 || !rgk_is_symbol(rgk_car(b)))
        return cerr(k, RG_ERR_SYNTAX, "let binding must be (name expression)");
      name = rgk_car(b);
      init = nth(b, 1);
    } else if (!rgk_is_symbol(b)) {
      return cerr(k, RG_ERR_SYNTAX, "project needs variable names");
    }
    if (!(g->args[i] = compile_value(k, sc, init))) return NULL;
    names = rg_cons(name, names);
  }
  scope *inner = scope_new(sc, rgk_reverse(names), k);
  if (!inner) return NULL;
  g->body = compile_conj(k, inner, rgk_cdr(rgk_cdr(form)));
  return g->body ? g : NULL;
}

static rg_goal *goal_disj(cc *k, scope *sc, rg_term form) {
  if (rgk_length(rgk_cdr(form)) < 0) return cerr(k, RG_ERR_SYNTAX, "improper list in disj");
  RGK_LOCAL_STACK(cl, 8);
  for (rg_term l = rgk_cdr(form); rgk_is_pair(l); l = rgk_cdr(l)) {
    rg_goal *g = compile_goal(k, sc, rgk_car(l));
    if (!g) return NULL;
    rgk_push(&cl, (rgk_word)g);
  }
  return rg_conde((int)cl.n, (rg_goal **)cl.v);
}

static rg_goal *goal_call(cc *k, scope *sc, rg_term form) {
  int64_t n = arg_count(form);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "improper call");
  rg_goal *g = rgk_goal_new(G_CALL);
  rg_term head = rgk_car(form);
  if (rgk_is_symbol(head)) g->a = compile_ref(k, sc, head);
  else g->a = compile_value(k, sc, head);
  if (!g->a) return NULL;
  g->n = (uint32_t)n;
  g->args = rgk_alloc((size_t)(n ? n : 1) * sizeof(rgk_tx *));
  rg_term l = rgk_cdr(form);
  for (int64_t i = 0; i < n; i++, l = rgk_cdr(l))
    if (!(g->args[i] = compile_value(k, sc, rgk_car(l)))) return NULL;
  g->where = site(k);
  return g;
}

/* Scheme forms the language does not have (docs/language.md): a use of
 * one, unless the program binds the name, is an error when the form is
 * read, not a call of an unbound name that fails (or silently never runs)
 * later. */
static bool scheme_only(cc *k, scope *sc, rg_term h) {
  static const char *const forms[] = {"if", "cond", "case", "when", "unless", "set!", "begin",
                                      "let*", "letrec", "letrec*", "do", "define-syntax", NULL};
  if (!rgk_is_symbol(h)) return false;
  for (int i = 0; forms[i]; i++)
    if (!strcmp(rgk_symname(h), forms[i])) {
      if (is_local(sc, h) || user_bound(k->I, h)) return false;
      cerr(k, RG_ERR_SYNTAX, "%s: a Scheme form this language does not have (its expressions "
           "have no if, cond, set! or functions of the program's own)", forms[i]);
      return true;
    }
  return false;
}

static const char *const not_goals[] = {"quote", "quasiquote", "lambda", "run", "run*", "list",
                                         "cons", "define", "defrel", NULL};

static rg_goal *compile_goal_pair(cc *k, scope *sc, rg_term form) {
  rg_term h = rgk_car(form);
  if (is_sym(h, KW_EQ)) return goal_binary(k, sc, form, G_EQ);
  if (is_sym(h, KW_FRESH)) return goal_fresh(k, sc, form);
  if (scheme_only(k, sc, h)) return NULL;
  if (rgk_is_symbol(h) && !is_local(sc, h) && !user_bound(k->I, h)) {
    const char *n = rgk_symname(h);
    if (!strcmp(n, "==")) return goal_binary(k, sc, form, G_EQ);
    if (!strcmp(n, "=/=")) return goal_binary(k, sc, form, G_NEQ);
    if (!strcmp(n, "absento")) return goal_binary(k, sc, form, G_ABSENTO);
    if (!strcmp(n, "numbero")) return goal_type(k, sc, form, 0);
    if (!strcmp(n, "stringo")) return goal_type(k, sc, form, 1);
    if (!strcmp(n, "symbolo")) return goal_type(k, sc, form, 2);
    if (!strcmp(n, "fresh")) return goal_fresh(k, sc, form);
    if (!strcmp(n, "conde")) return goal_conde(k, sc, form);
    if (!strcmp(n, "conda")) return goal_conda(k, sc, form, G_CONDA);
    if (!strcmp(n, "condu")) return goal_conda(k, sc, form, G_CONDU);
    if (!strcmp(n, "let")) return goal_binding(k, sc, form, G_LET);
    if (!strcmp(n, "project")) return goal_binding(k, sc, form, G_PROJECT);
    if (!strcmp(n, "conj") || !strcmp(n, "all")) return compile_conj(k, sc, rgk_cdr(form));
    if (!strcmp(n, "disj")) return goal_disj(k, sc, form);
    for (int i = 0; not_goals[i]; i++)
      if (!strcmp(n, not_goals[i]))
        return cerr(k, RG_ERR_TYPE, "%s is not a goal: %s", n, rg_to_string(form));
  }
  if (!rgk_is_symbol(h) && !rgk_is_pair(h))
    return cerr(k, RG_ERR_TYPE, "not a goal: %s", rg_to_string(form));
  return goal_call(k, sc, form);
}

static rg_goal *compile_goal(cc *k, scope *sc, rg_term form) {
  if (k->failed) return NULL;
  if (rgk_is_symbol(form)) {
    const char *n = rgk_symname(form);
    bool s = !strcmp(n, "succeed") || !strcmp(n, "#s"), f = !strcmp(n, "fail") || !strcmp(n, "#u");
    if ((s || f) && !is_local(sc, form) && !user_bound(k->I, form)) return s ? rg_succeed() : rg_fail();
    rg_goal *g = rgk_goal_new(G_APPLYV);
    g->a = compile_ref(k, sc, form);
    g->where = site(k);
    return g;
  }
  if (!rgk_is_pair(form)) return cerr(k, RG_ERR_TYPE, "not a goal: %s", rg_to_string(form));
  rg_term saved = enter(k, form);
  rg_goal *g = compile_goal_pair(k, sc, form);
  k->where_form = saved;
  return g;
}

/* ------------------------------------------------------------------ value forms */

static rgk_tx *value_list(cc *k, scope *sc, rg_term items) {
  if (rgk_length(items) < 0) return cerr(k, RG_ERR_SYNTAX, "improper list in list");
  RGK_LOCAL_STACK(v, 16);
  for (; rgk_is_pair(items); items = rgk_cdr(items)) {
    rgk_tx *t = compile_value(k, sc, rgk_car(items));
    if (!t) return NULL;
    rgk_push(&v, (rgk_word)t);
  }
  rgk_tx *acc = rgk_tx_const(RG_NIL);
  for (size_t i = v.n; i-- > 0;) acc = tx_cons((rgk_tx *)v.v[i], acc);
  return acc;
}

static rgk_tx *value_run(cc *k, scope *sc, rg_term form, bool star) {
  if (!check_args(k, form, star ? 2 : 3, -1)) return NULL;
  rgk_tx *t = tx_new(TX_RUN);
  t->interp = k->I;
  t->where = site(k);
  rg_term rest = rgk_cdr(form);
  if (!star) {
    if (!(t->a = compile_value(k, sc, rgk_car(rest)))) return NULL;
    rest = rgk_cdr(rest);
  }
  rg_term qs = rgk_car(rest), goals = rgk_cdr(rest);
  if (rgk_is_symbol(qs)) qs = rg_cons(qs, RG_NIL); /* (run n q g ...) as in TRS2 */
  int64_t nq = rgk_length(qs);
  if (nq < 1) return cerr(k, RG_ERR_SYNTAX, "run needs query variables, as in (run* (q) goal ...)");
  if (nq == 1) {
    scope *inner = scope_new(sc, qs, k);
    if (!inner || !(t->goal = compile_conj(k, inner, goals))) return NULL;
    t->idx = 1;
    return t;
  }
  /* (run n (x y) g ...) is (run n (q) (fresh (x y) g ... (== (list x y) q))),
   * written with the names of the language's own forms, which no program
   * can bind (a query variable may be called list) */
  rg_term q = sym(" q");
  rg_term eq = rgk_list3(sym(KW_EQ), rg_cons(sym(KW_LIST), qs), q);
  rg_term fresh = rg_cons(sym(KW_FRESH), rg_cons(qs, rgk_reverse(rg_cons(eq, rgk_reverse(goals)))));
  scope *inner = scope_new(sc, rg_cons(q, RG_NIL), k);
  if (!inner || !(t->goal = compile_goal(k, inner, fresh))) return NULL;
  t->idx = 1;
  return t;
}

/* The name, parameters and goals of a relation definition inside a let
 * body: (defrel (name . params) goal ...), (define (name . params) goal
 * ...) or (define name (lambda params goal ...)); false for other forms. */
static bool local_def(rg_term d, rg_term *name, rg_term *params, rg_term *goals) {
  if (!rgk_is_pair(d) || !rgk_is_symbol(rgk_car(d)) || rgk_length(d) < 3) return false;
  const char *h = rgk_symname(rgk_car(d));
  rg_term target = nth(d, 1);
  if ((!strcmp(h, "defrel") || !strcmp(h, "define")) && rgk_is_pair(target) && rgk_is_symbol(rgk_car(target))) {
    *name = rgk_car(target), *params = rgk_cdr(target), *goals = rgk_cdr(rgk_cdr(d));
    return true;
  }
  rg_term e = rgk_length(d) == 3 ? nth(d, 2) : RG_NIL;
  if (!strcmp(h, "define") && rgk_is_symbol(target) && rgk_is_pair(e) && rgk_is_symbol(rgk_car(e)) &&
      !strcmp(rgk_symname(rgk_car(e)), "lambda") && rgk_length(e) >= 3) {
    *name = target, *params = nth(e, 1), *goals = rgk_cdr(rgk_cdr(e));
    return true;
  }
  return false;
}

/* A let body of relation definitions and then one expression (Scheme's
 * internal definitions): the relations see one another and themselves. */
static rgk_tx *value_body_defs(cc *k, scope *sc, rg_term body) {
  int64_t n = rgk_length(body) - 1;
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "let in a value needs a body expression");
  rg_term names = RG_NIL, l = body;
  for (int64_t i = 0; i < n; i++, l = rgk_cdr(l)) {
    rg_term name, params, goals;
    if (!local_def(rgk_car(l), &name, &params, &goals))
      return cerr(k, RG_ERR_SYNTAX, "in a let body only relation definitions (defrel, define) may come "
                  "before the one expression: %s", rg_to_string(rgk_car(l)));
    names = rg_cons(name, names);
  }
  scope *inner = scope_new(sc, rgk_reverse(names), k);
  if (!inner) return NULL;
  rgk_tx *t = tx_new(TX_LETREC);
  t->idx = (uint32_t)n;
  t->args = rgk_alloc((size_t)(n ? n : 1) * sizeof(rgk_tx *));
  l = body;
  for (int64_t i = 0; i < n; i++, l = rgk_cdr(l)) {
    rg_term name, params, goals;
    local_def(rgk_car(l), &name, &params, &goals);
    rgk_lambda *lam = compile_lambda_in(k, inner, name, params, goals);
    if (!lam) return NULL;
    t->args[i] = tx_new(TX_LAMBDA);
    t->args[i]->lam = lam;
  }
  t->a = compile_value(k, inner, rgk_car(l));
  return t->a ? t : NULL;
}

static rgk_tx *value_let(cc *k, scope *sc, rg_term form) {
  if (!check_args(k, form, 2, -1)) return NULL;
  rg_term binds = nth(form, 1);
  int64_t n = rgk_length(binds);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "bad binding list");
  rgk_tx *t = tx_new(TX_LET);
  t->idx = (uint32_t)n;
  t->args = rgk_alloc((size_t)(n ? n : 1) * sizeof(rgk_tx *));
  rg_term names = RG_NIL;
  for (int64_t i = 0; i < n; i++, binds = rgk_cdr(binds)) {
    rg_term b = rgk_car(binds);
    if (rgk_length(b) != 2 || !rgk_is_symbol(rgk_car(b)))
      return cerr(k, RG_ERR_SYNTAX, "let binding must be (name expression)");
    if (!(t->args[i] = compile_value(k, sc, nth(b, 1)))) return NULL;
    names = rg_cons(rgk_car(b), names);
  }
  scope *inner = scope_new(sc, rgk_reverse(names), k);
  if (!inner) return NULL;
  rg_term body = rgk_cdr(rgk_cdr(form));
  t->a = rgk_length(body) == 1 ? compile_value(k, inner, rgk_car(body)) : value_body_defs(k, inner, body);
  return t->a ? t : NULL;
}

static bool is_goal_form(cc *k, scope *sc, rg_term h) {
  static const char *const goals[] = {"==", "=/=", "absento", "numbero", "stringo", "symbolo",
                                      "fresh", "conde", "conda", "condu", "project", "conj",
                                      "disj", "all", NULL};
  for (int i = 0; goals[i]; i++)
    if (is_form(sc, h, goals[i]) && !user_bound(k->I, h)) return true;
  return false;
}

static rgk_tx *value_goal(cc *k, scope *sc, rg_term form) {
  rg_goal *g = compile_goal(k, sc, form);
  if (!g) return NULL;
  rgk_tx *t = tx_new(TX_GOAL);
  t->goal = g;
  return t;
}

static rgk_tx *value_apply(cc *k, scope *sc, rg_term form) {
  int64_t n = arg_count(form);
  if (n < 0) return cerr(k, RG_ERR_SYNTAX, "improper call");
  rgk_tx *t = tx_new(TX_APPLY);
  rg_term head = rgk_car(form);
  t->a = rgk_is_symbol(head) ? compile_ref(k, sc, head) : compile_value(k, sc, head);
  if (!t->a) return NULL;
  t->idx = (uint32_t)n;
  t->args = rgk_alloc((size_t)(n ? n : 1) * sizeof(rgk_tx *));
  rg_term l = rgk_cdr(form);
  for (int64_t i = 0; i < n; i++, l = rgk_cdr(l))
    if (!(t->args[i] = compile_value(k, sc, rgk_car(l)))) return NULL;
  t->where = site(k);
  return t;
}

static rgk_tx *compile_value_pair(cc *k, scope *sc, rg_term form) {
  rg_term h = rgk_car(form);
  if (is_sym(h, KW_LIST)) return value_list(k, sc, rgk_cdr(form));
  if (scheme_only(k, sc, h)) return NULL;
  if (is_form(sc, h, "quote")) {
    if (!check_args(k, form, 1, 1)) return NULL;
    return rgk_tx_const(nth(form, 1));
  }
  if (is_form(sc, h, "quasiquote")) {
    if (!check_args(k, form, 1, 1)) return NULL;
    return compile_qq(k, sc, nth(form, 1), 1);
  }
  if (is_form(sc, h, "list") && !rgk_table_get(&k->I->user, h, false))
    return value_list(k, sc, rgk_cdr(form));
  if (is_form(sc, h, "cons") && !rgk_table_get(&k->I->user, h, false)) {
    if (!check_args(k, form, 2, 2)) return NULL;
    rgk_tx *a = compile_value(k, sc, nth(form, 1)), *b = a ? compile_value(k, sc, nth(form, 2)) : NULL;
    return b ? tx_cons(a, b) : NULL;
  }
  if (is_form(sc, h, "lambda")) {
    if (!check_args(k, form, 2, -1)) return NULL;
    rgk_lambda *lam = compile_lambda_in(k, sc, NULL, nth(form, 1), rgk_cdr(rgk_cdr(form)));
    if (!lam) return NULL;
    rgk_tx *t = tx_new(TX_LAMBDA);
    t->lam = lam;
    return t;
  }
  if (is_form(sc, h, "run")) return value_run(k, sc, form, false);
  if (is_form(sc, h, "run*")) return value_run(k, sc, form, true);
  if (is_form(sc, h, "let")) return value_let(k, sc, form);
  if (is_goal_form(k, sc, h)) return value_goal(k, sc, form);
  if (!rgk_is_symbol(h) && !rgk_is_pair(h))
    return cerr(k, RG_ERR_TYPE, "not a procedure: %s", rg_to_string(h));
  return value_apply(k, sc, form);
}

static rgk_tx *compile_value(cc *k, scope *sc, rg_term form) {
  if (k->failed) return NULL;
  if (rgk_is_symbol(form)) {
    const char *n = rgk_symname(form);
    bool s = !strcmp(n, "succeed") || !strcmp(n, "#s"), f = !strcmp(n, "fail") || !strcmp(n, "#u");
    if ((s || f) && !is_local(sc, form) && !user_bound(k->I, form))
      return rgk_tx_const(rgk_goal_value(s ? rg_succeed() : rg_fail(), NULL));
    return compile_ref(k, sc, form);
  }
  if (!rgk_is_pair(form)) return rgk_tx_const(form);
  rg_term saved = enter(k, form);
  rgk_tx *t = compile_value_pair(k, sc, form);
  k->where_form = saved;
  return t;
}

/* ------------------------------------------------------------------ entry points */

static cc cc_init(rg_interp *I, rg_term form) {
  cc k = {.I = I, .C = I->C, .where_form = form};
  return k;
}

rgk_tx *rgk_compile_value(rg_interp *I, rg_term form) {
  cc k = cc_init(I, form);
  return compile_value(&k, NULL, form);
}

rg_goal *rgk_compile_goal_top(rg_interp *I, rg_term form) {
  cc k = cc_init(I, form);
  return compile_goal(&k, NULL, form);
}

rgk_lambda *rgk_compile_lambda(rg_interp *I, rg_term name, rg_term params, rg_term body,
                               rg_term where_form) {
  cc k = cc_init(I, where_form);
  return compile_lambda_in(&k, NULL, name, params, body);
}
