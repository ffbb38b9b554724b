/*
 * rules.c — rules: pattern rules, relational rules, op substitution, op
 * removal and constant folding, all node rewriters.
 *
 * Pattern and relational rules work on kanren terms: a node's output is a
 * foreign term that expands into (op input ...) only as far as a pattern
 * looks, and the answer is evaluated back into graph nodes through
 * make_node (rg_graph_eval).  A pattern without guard is matched by one
 * unification (no search); a guard or a relation runs a kanren query with
 * a step limit, so a rule that diverges stops with a clear error instead of
 * hanging the engine.  In search mode (rg_rewrite_opts.answers and .cost)
 * a relational rule takes several answers and keeps the one whose new
 * nodes cost least.
 */
#include "rewrites/egraph-impl.h"
#include "kanren/kanren-impl.h"

#include <math.h>
#include <stdio.h>

/* ------------------------------------------------------------------ pattern terms */

/* Replaces the ?x symbols of a pattern by logic variables (the same symbol,
 * the same variable); `vars` collects (symbol . var) pairs. */
static rg_term compile_pattern(rg_ctx *C, rg_term t, rg_term *vars) {
  rg_kind k = rg_kind_of(t);
  if (k == RG_K_SYMBOL) {
    const char *n = rg_symbol_name(t);
    if (n[0] != '?' || !n[1]) return t;
    for (rg_term l = *vars; rg_is_pair(l); l = rg_cdr(l))
      if (rg_car(rg_car(l)) == t) return rg_cdr(rg_car(l));
    rg_term v = rg_var(C);
    *vars = rg_cons(rg_cons(t, v), *vars);
    return v;
  }
  if (k != RG_K_PAIR) return t;
  /* patterns are program text, bounded in depth by the reader */
  return rg_cons(compile_pattern(C, rg_car(t), vars), compile_pattern(C, rg_cdr(t), vars));
}

static rg_term lookup_var(rg_term vars, rg_term sym) {
  for (rg_term l = vars; rg_is_pair(l); l = rg_cdr(l))
    if (rg_car(rg_car(l)) == sym) return rg_cdr(rg_car(l));
  return NULL;
}

/* The op the pattern's root applies, for tracking; -1 if not fixed. */
static int root_op(rg_term pat, const char **opaque) {
  *opaque = NULL;
  if (!rg_is_pair(pat)) return -1;
  rg_term h = rg_car(pat);
  if (rg_is_pair(h)) h = rg_car(h);
  if (rg_kind_of(h) != RG_K_SYMBOL) return -1;
  int c = rg_opcode_from_name(rg_symbol_name(h));
  if (c >= 0 && c != RG_OP_OPAQUE) return c;
  if (rg_symbol_name(h)[0] == '?') return -1;
  *opaque = rg_symbol_name(h);
  return RG_OP_OPAQUE;
}

/* ------------------------------------------------------------------ shapes of patterns */

/* What a pattern asks of the graph where it can be read without building
 * a term: the op of each sub-pattern, its number of arguments, and which
 * arguments are literals (they match one-element constants only).  Most
 * nodes a rule tries fail here, with no term expanded and nothing
 * allocated; the unification decides the rest. */
typedef struct shape shape;
struct shape {
  int code;      /* the op the sub-pattern applies; -1: not known */
  int nargs;     /* its arguments */
  bool open;     /* they end in a variable: nargs is a minimum */
  bool *literal; /* per argument: a number or boolean */
  shape **sub;   /* per argument: a sub-pattern's shape, NULL otherwise */
};

static int head_code(rg_term pat) {
  rg_term h = rg_car(pat);
  if (rg_is_pair(h)) h = rg_car(h);
  return rg_kind_of(h) == RG_K_SYMBOL ? rg_opcode_from_name(rg_symbol_name(h)) : -1;
}

static shape *shape_of(rg_term pat) {
  shape *s = rg_gc_alloc(sizeof *s);
  int c = head_code(pat);
  s->code = c == RG_OP_OPAQUE ? -1 : c;
  rg_term a = rg_cdr(pat);
  for (; rg_is_pair(a); a = rg_cdr(a)) s->nargs++;
  s->open = a != RG_NIL;
  s->literal = rg_gc_alloc(sizeof *s->literal * (size_t)(s->nargs + 1));
  s->sub = rg_gc_alloc(sizeof *s->sub * (size_t)(s->nargs + 1));
  int i = 0;
  for (a = rg_cdr(pat); rg_is_pair(a); a = rg_cdr(a), i++) {
    rg_kind k = rg_kind_of(rg_car(a));
    s->literal[i] = k == RG_K_INT || k == RG_K_FLOAT || k == RG_K_BOOL;
    s->sub[i] = k == RG_K_PAIR ? shape_of(rg_car(a)) : NULL;
  }
  return s;
}

/* Whether v may match the pattern of shape s (false: it cannot).  Below
 * the root, a variable with several clients matches a sub-pattern only
 * when the rule allows it (single_clients). */
static bool fits(const shape *s, const rg_variable *v, bool root, bool shared_ok) {
  const rg_node *n = v->owner;
  if (!n) return false;      /* inputs and constants are atoms */
  if (n->nout != 1) return true; /* (nth k (op ...)): left to the unification */
  if (!root && !shared_ok && v->nclients > 1) return false;
  if (s->code >= 0 && (int)n->op->code != s->code) return false;
  if (s->open ? n->nin < s->nargs : n->nin != s->nargs) return false;
  for (int i = 0; i < s->nargs; i++) {
    const rg_variable *a = n->inputs[i];
    if (s->literal[i] && !(rg_is_constant(a) && rg_type_numel(a->type) == 1)) return false;
    if (s->sub[i] && !fits(s->sub[i], a, false, shared_ok)) return false;
  }
  return true;
}

/* ------------------------------------------------------------------ evaluating answers */

/* Evaluates an answer into a graph variable; NULL when it does not
 * evaluate.  A type error means the rule does not apply (the context's
 * error is cleared, *status 0); an op unknown to the graph layer is the
 * rule's mistake (the error stays, *status negative). */
static rg_variable *eval_answer(rg_ctx *C, rg_term answer, int *status) {
  rg_variable *v = rg_graph_eval(C, answer);
  *status = 0;
  if (v) return v;
  if (rg_errcode(C) == RG_ERR_NAME) {
    *status = RG_ERR_NAME;
    return NULL;
  }
  rg_clear_error(C);
  return NULL;
}

static bool single_output(const rg_node *node) { return node->nout == 1; }

/* ------------------------------------------------------------------ pattern rules */

typedef struct pattern {
  rg_term from, to;        /* with logic variables */
  rg_term vars;            /* ((?x . var) ...) */
  rg_term guard;           /* relation or NULL */
  rg_term guard_args;      /* list of the guard's arguments (vars) */
  rg_term src_from, src_to;
  rg_term want;            /* (to var ...), vars in the order of `vars`: what a match gives */
  shape *shape;            /* of `from` */
} pattern;

/* Sub-patterns below the root must not match variables with several
 * clients unless the rule allows it (the match would duplicate work). */
static bool single_clients(rg_term pat, rg_term term) {
  rg_term ps[64], ts[64];
  int sp = 0;
  ps[sp] = pat;
  ts[sp++] = term;
  bool root = true;
  while (sp) {
    rg_term p = ps[--sp], t = ts[sp];
    if (!rg_is_pair(p)) continue;
    rg_variable *v = rg_term_var(t);
    if (v && !root && v->nclients > 1) return false;
    root = false;
    rg_term e = v ? rg_foreign_expand(t) : t;
    if (!e) continue;
    if (rg_is_etuple(e)) e = rg_etuple_list(e);
    for (rg_term a = rg_cdr(p), b = rg_is_pair(e) ? rg_cdr(e) : RG_NIL;
         rg_is_pair(a) && rg_is_pair(b) && sp < 64; a = rg_cdr(a), b = rg_cdr(b)) {
      ps[sp] = rg_car(a);
      ts[sp++] = rg_car(b);
    }
  }
  return true;
}

static const char *describe_subst(pattern *p, rg_term walked_vars) {
  char *s = "";
  rg_term l = p->vars, w = walked_vars;
  for (; rg_is_pair(l) && rg_is_pair(w); l = rg_cdr(l), w = rg_cdr(w))
    s = rgr_sprintf("%s%s%s = %s", s, *s ? ", " : "", rg_symbol_name(rg_car(rg_car(l))),
                    rgr_show_term(rg_car(w)));
  return s;
}

/* The list of the pattern's variables, in the order of p->vars. */
static rg_term var_list(rg_term vars) {
  rg_term r = RG_NIL;
  for (rg_term l = vars; rg_is_pair(l); l = rg_cdr(l)) r = rg_cons(rg_cdr(rg_car(l)), r);
  /* reverse back */
  rg_term out = RG_NIL;
  for (; rg_is_pair(r); r = rg_cdr(r)) out = rg_cons(rg_car(r), out);
  return out;
}

/* Matches with a guard: a search for the first answer of
 * (== term from) (guard args...), giving (to . vars).  1 on a match, 0
 * when the guard fails, or an error (a guard that fails to run, such as
 * one calling an unbound name, or one that runs past the step limit,
 * stops the run as a relation's error does). */
static int match_guarded(rg_rewrite_run *run, pattern *p, rg_term term, rg_term want, rg_term *out) {
  rg_ctx *C = run->C;
  int n = (int)rg_list_length(p->guard_args);
  rg_term args[n > 0 ? n : 1];
  int i = 0;
  for (rg_term l = p->guard_args; rg_is_pair(l); l = rg_cdr(l)) args[i++] = rg_car(l);
  rg_goal *g = rg_conj2(rg_eq(term, p->from), rg_call(p->guard, n, args));
  rg_run_opts o = {.max_steps = RGR_RELATION_STEPS};
  rg_term answers;
  int rc = rg_run(C, 1, want, g, &o, &answers);
  if (rc == RG_STOP_STEPS || rc == RG_STOP_TIMEOUT)
    return rg_error(C, RG_ERR_LIMIT, "the guard did not answer within %d steps on %s", RGR_RELATION_STEPS,
                    rgr_show_term(term)), RG_ERR_LIMIT;
  if (rc < 0) return rc;
  if (rc != RG_OK || answers == RG_NIL) return 0;
  *out = rg_car(answers);
  return 1;
}

/* A pattern rule: the pattern and the rule's flags. */
typedef struct pattern_rule { pattern p; unsigned flags; } pattern_rule;

static int pattern_rule_fn(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  pattern_rule *pr = ud;
  pattern *p = &pr->p;
  if (!single_output(node)) return 0;
  if (!fits(p->shape, node->outputs[0], true, pr->flags & RG_RULE_SHARED_OK)) return 0;
  rg_ctx *C = run->C;
  rg_term term = rg_var_term(node->outputs[0]);
  rg_term want = p->want, got;
  /* one unification first: most nodes fail it, and a guard's search is
   * only worth starting on a match */
  int ok = rg_unify_walk(C, term, p->from, want, true, &got);
  if (ok && p->guard) ok = match_guarded(run, p, term, want, &got);
  if (ok <= 0) return ok;
  if (!(pr->flags & RG_RULE_SHARED_OK) && !single_clients(p->from, term)) return 0;
  int status;
  rg_variable *v = eval_answer(C, rg_car(got), &status);
  if (!v) return status;
  if (run->opts.trace) run->subst = describe_subst(p, rg_cdr(got));
  out[0] = v;
  return 1;
}

rg_rewriter *rg_pattern_rule(rg_ctx *C, const char *name, rg_term from, rg_term to,
                             rg_term guard, rg_term guard_vars, unsigned flags) {
  if (!rg_is_pair(from)) {
    rg_error(C, RG_ERR_SYNTAX, "rule %s: the pattern must be an expression (op arg ...), got %s",
             name, rg_to_string(from));
    return NULL;
  }
  pattern_rule *pr = rg_gc_alloc(sizeof *pr);
  pr->flags = flags;
  pattern *p = &pr->p;
  p->vars = RG_NIL;
  p->src_from = from;
  p->src_to = to;
  p->from = compile_pattern(C, from, &p->vars);
  rg_term before = p->vars;
  p->to = compile_pattern(C, to, &p->vars);
  if (p->vars != before) {
    rg_error(C, RG_ERR_NAME, "rule %s: %s appears in the result but not in the pattern", name,
             rg_symbol_name(rg_car(rg_car(p->vars))));
    return NULL;
  }
  if (guard) {
    p->guard = guard;
    p->guard_args = RG_NIL;
    rg_term acc = RG_NIL;
    for (rg_term l = guard_vars; rg_is_pair(l); l = rg_cdr(l)) {
      rg_term v = lookup_var(p->vars, rg_car(l));
      if (!v) {
        rg_error(C, RG_ERR_NAME, "rule %s: guard argument %s is not a pattern variable", name,
                 rg_to_string(rg_car(l)));
        return NULL;
      }
      acc = rg_cons(v, acc);
    }
    for (; rg_is_pair(acc); acc = rg_cdr(acc)) p->guard_args = rg_cons(rg_car(acc), p->guard_args);
  }
  p->want = rg_cons(p->to, var_list(p->vars));
  p->shape = shape_of(p->from);
  const char *opaque;
  int c = root_op(from, &opaque);
  rg_opcode code = (rg_opcode)c;
  rg_rewriter *rw = rg_node_rewriter(name, c >= 0 && !opaque ? 1 : 0, &code, pattern_rule_fn, pr);
  if (opaque) rg_rewriter_track_opaque(rw, opaque);
  rw->flags = flags;
  rw->describe = rgr_sprintf("%s -> %s", rg_to_string(from), rg_to_string(to));
  rw->examples = rg_to_string(from);
  return rw;
}

/* ------------------------------------------------------------------ relational rules */

/* A relational rule.  Its query (rel IN OUT), or (rel OUT IN) backwards,
 * is built once per context and restarted on every node with IN bound to
 * the node's term: no goal, query or machine is allocated per node. */
typedef struct relrule {
  rg_term rel;
  bool backwards;
  rg_ctx *qctx;     /* the context Q was built in */
  rg_query *Q;
  rg_term in, out;  /* Q's argument variables */
  uint64_t held_in; /* the last run Q was noted in (rgr_hold_query) */
  bool read;        /* the shapes were read, when rgk_definitions() was read_at */
  uint64_t read_at;
  int nshapes;      /* the shapes of the templates the relation requires of */
  shape **shapes;   /* its input (rg_relation_input_templates); 0: unknown */
} relrule;

static rg_query *rule_query(relrule *r, rg_rewrite_run *run, rg_term in) {
  rg_ctx *C = run->C;
  if (r->qctx != C) {
    r->in = rg_var(C);
    r->out = rg_var(C);
    rg_term args[2] = {r->backwards ? r->out : r->in, r->backwards ? r->in : r->out};
    rg_run_opts o = {.max_steps = RGR_RELATION_STEPS};
    r->Q = rg_query_new(C, r->out, rg_call(r->rel, 2, args), &o);
    r->qctx = C;
  }
  rgr_hold_query(run, r->Q, &r->held_in);
  rg_query_restart(r->Q, 1, &r->in, &in);
  return r->Q;
}

/* Search mode: the cost of what answer v adds to the graph (the nodes
 * between v and variables the graph has, each once). */
static double answer_cost(rg_rewrite_run *run, rg_variable *v) {
  rg_fgraph *fg = rg_rewrite_graph(run);
  rg_memo *seen = rg_memo_new();
  rg_variable **stack = rg_gc_alloc(16 * sizeof *stack);
  size_t n = 0, cap = 16;
  double cost = 0;
  stack[n++] = v;
  while (n) {
    rg_variable *u = stack[--n];
    rg_node *node = u->owner;
    if (!node || rg_fgraph_contains(fg, u) || rg_memo_get(seen, node)) continue;
    rg_memo_put(seen, node, node);
    cost += rgr_node_cost(run->opts.cost, node);
    for (int i = 0; i < node->nin; i++) {
      if (n == cap) {
        rg_variable **s = rg_gc_alloc(2 * cap * sizeof *s);
        memcpy(s, stack, n * sizeof *s);
        stack = s;
        cap *= 2;
      }
      stack[n++] = node->inputs[i];
    }
  }
  return cost;
}

/* A node of several outputs is related through its first output: an
 * answer must be the first output of a node whose outputs have the same
 * types, and these replace the node's one by one (the Scan rules of
 * scan.kn relate Scans this way). */
static bool replaces_all(const rg_node *node, const rg_variable *v) {
  const rg_node *m = v->owner;
  if (!m || v->index != 0 || m->nout != node->nout) return false;
  for (int j = 0; j < m->nout; j++)
    if (!rg_type_equal(m->outputs[j]->type, node->outputs[j]->type)) return false;
  return true;
}

/* Whether the node may unify with one of the relation's templates (true
 * when they are unknown).  The relation is read when the rule runs, and
 * again after any new definition: names in its body are bound late, and
 * a file loaded after the rule may define or redefine the relations it
 * calls. */
static bool fits_templates(relrule *r, const rg_node *node) {
  uint64_t defs = rgk_definitions();
  if (!r->read || r->read_at != defs) {
    rg_term ts = rg_relation_input_templates(r->rel, r->backwards ? 1 : 0);
    int n = ts ? (int)rg_list_length(ts) : 0;
    r->shapes = rg_gc_alloc(sizeof *r->shapes * (size_t)(n + 1));
    for (int i = 0; i < n; i++, ts = rg_cdr(ts)) r->shapes[i] = shape_of(rg_car(ts));
    r->nshapes = n;
    r->read = true;
    r->read_at = defs;
  }
  if (!r->nshapes) return true;
  for (int i = 0; i < r->nshapes; i++)
    if (fits(r->shapes[i], node->outputs[0], true, true)) return true;
  return false;
}

static int relation_fn(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  relrule *r = ud;
  if (node->nout < 1 || !fits_templates(r, node)) return 0;
  rg_ctx *C = run->C;
  rg_query *Q = rule_query(r, run, rg_var_term(node->outputs[0]));
  int k = run->opts.cost && run->opts.answers > 1 ? run->opts.answers : 1;
  rg_variable *best = NULL;
  rg_term best_answer = RG_NIL;
  double best_cost = INFINITY;
  for (int i = 0; i < k; i++) {
    rg_term answer;
    int rc = rg_query_next_walked(Q, &answer);
    if ((rc == RG_STOP_STEPS || rc == RG_STOP_TIMEOUT) && !best) {
      rg_error(C, RG_ERR_LIMIT, "the relation did not answer within %d steps on %s", RGR_RELATION_STEPS,
               rgr_show(node->outputs[0]));
      return RG_ERR_LIMIT;
    }
    if (rc < 0 && !best) return rc;
    if (rc != 1) break;
    int status;
    rg_variable *v = eval_answer(C, answer, &status);
    if (status < 0) return status;
    if (!v || v == node->outputs[0]) continue;
    if (!single_output(node) && !replaces_all(node, v)) continue;
    double c = k > 1 ? answer_cost(run, v) : 0;
    if (!best || c < best_cost) {
      best = v;
      best_answer = answer;
      best_cost = c;
    }
  }
  rg_clear_error(C);
  if (!best) return 0;
  if (run->opts.trace) run->subst = rgr_sprintf("out = %s", rgr_show_term(best_answer));
  for (int j = 0; j < node->nout; j++) out[j] = single_output(node) ? best : best->owner->outputs[j];
  return 1;
}

/* The ops a relational rule tracks, unless set: the heads its relation
 * requires of its input (rg_relation_input_heads), every op when they are
 * unknown or one is not an op.  Read when the rule is made and again
 * after any new definition, like the templates above. */
int rgr_head_opcode(rg_term h) {
  if (rg_is_pair(h)) h = rg_car(h);
  return rg_kind_of(h) == RG_K_SYMBOL ? rg_opcode_from_name(rg_symbol_name(h)) : -1;
}

void rgr_refresh_tracks(rg_rewriter *rw) {
  uint64_t defs = rgk_definitions();
  if (!rw->tracks_derived || rw->tracks_read_at == defs) return;
  rw->tracks_read_at = defs;
  memset(rw->tracks, 0, sizeof rw->tracks);
  rw->track_all = true;
  rg_term heads = rg_relation_input_heads(rw->relation, rw->backwards ? 1 : 0);
  if (!heads || !rg_is_pair(heads)) return;
  for (rg_term l = heads; rg_is_pair(l); l = rg_cdr(l)) {
    int c = rgr_head_opcode(rg_car(l));
    if (c < 0) {
      memset(rw->tracks, 0, sizeof rw->tracks);
      return;
    }
    rgr_track(rw, (rg_opcode)c);
  }
  rw->track_all = false;
}

rg_rewriter *rg_relation_rule(rg_ctx *C, const char *name, rg_term rel, bool backwards,
                              unsigned flags) {
  if (rg_kind_of(rel) != RG_K_PROC || (rg_proc_arity(rel) != 2 && rg_proc_arity(rel) != -1)) {
    rg_error(C, RG_ERR_TYPE, "rule %s: needs a relation of two arguments (in out)", name);
    return NULL;
  }
  relrule *r = rg_gc_alloc(sizeof *r);
  r->rel = rel;
  r->backwards = backwards;
  rg_rewriter *rw = rg_node_rewriter(name, 0, NULL, relation_fn, r);
  rw->flags = flags;
  rw->describe = rgr_sprintf("(%s %s)", rg_proc_name(rel), backwards ? "out in" : "in out");
  rw->relation = rel;
  rw->backwards = backwards;
  rw->tracks_derived = true;
  rw->tracks_read_at = rgk_definitions() - 1;
  rgr_refresh_tracks(rw);
  return rw;
}

/* ------------------------------------------------------------------ op substitution and removal */

typedef struct opsub { const rg_op *from, *to; } opsub;

/* "(HEAD ?a ?b)": the op applied to as many leaves as it needs (two for
 * ops of any number of inputs). */
static const char *op_example(const rg_op *op) {
  static const int lo[] = {
#define RG_X_LO(code, name, fam, min, max) min,
      RG_OP_TABLE(RG_X_LO)
#undef RG_X_LO
  };
  static const int hi[] = {
#define RG_X_HI(code, name, fam, min, max) max,
      RG_OP_TABLE(RG_X_HI)
#undef RG_X_HI
  };
  int n = lo[op->code] > 0 ? lo[op->code] : hi[op->code] == 0 ? 0 : 2;
  if (hi[op->code] < 0 && n < 2) n = 2;
  const char *s = rg_to_string(rg_op_term(op));
  for (int i = 0; i < n; i++) s = rgr_sprintf("%s ?%c", s, 'a' + i);
  return rgr_sprintf("(%s)", s);
}

static int subst_fn(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  opsub *s = ud;
  if (!rg_op_equal(node->op, s->from) || rg_op_equal(s->from, s->to)) return 0;
  rg_node *n = rg_make_node(run->C, s->to, node->nin, node->inputs);
  if (!n || n->nout != node->nout) {
    rg_clear_error(run->C);
    return 0;
  }
  for (int j = 0; j < node->nout; j++) out[j] = n->outputs[j];
  return 1;
}

rg_rewriter *rg_op_subst_rule(const char *name, const rg_op *from, const rg_op *to) {
  opsub *s = rg_gc_alloc(sizeof *s);
  s->from = from;
  s->to = to;
  rg_opcode c = from->code;
  rg_rewriter *rw = rg_node_rewriter(name, 1, &c, subst_fn, s);
  if (c == RG_OP_OPAQUE) rg_rewriter_track_opaque(rw, from->name);
  rw->describe = rgr_sprintf("%s -> %s", rg_op_name(from), rg_op_name(to));
  rw->examples = op_example(from);
  return rw;
}

static int remove_fn(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  const rg_op *op = ud;
  if (!rg_op_equal(node->op, op) || node->nin != 1 || node->nout != 1) return 0;
  out[0] = node->inputs[0];
  return 1;
}

rg_rewriter *rg_op_remove_rule(const char *name, const rg_op *op) {
  rg_opcode c = op->code;
  rg_rewriter *rw = rg_node_rewriter(name, 1, &c, remove_fn, (void *)op);
  if (c == RG_OP_OPAQUE) rg_rewriter_track_opaque(rw, op->name);
  rw->describe = rgr_sprintf("%s(x) -> x", rg_op_name(op));
  rw->examples = op_example(op);
  return rw;
}

/* ------------------------------------------------------------------ constant folding */

#define FOLD_MAX_ELEMENTS (1 << 20)

static bool foldable(const rg_node *node) {
  switch (node->op->code) {
  case RG_OP_OPAQUE: case RG_OP_ALLOC_EMPTY: case RG_OP_IFELSE: return false;
  default: break;
  }
  for (int i = 0; i < node->nin; i++)
    if (!rg_is_constant(node->inputs[i])) return false;
  for (int j = 0; j < node->nout; j++) {
    int64_t n = rg_type_numel(node->outputs[j]->type);
    if (n > FOLD_MAX_ELEMENTS) return false;
  }
  return node->nin > 0;
}

static int fold_fn(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  if (!run->opts.fold || !foldable(node)) return 0;
  rg_tensor *vals[node->nout > 0 ? node->nout : 1];
  char err[512];
  if (run->opts.fold(node, vals, err, sizeof err) != RG_OK) return 0; /* leave it to run time */
  bool ok = true;
  for (int j = 0; j < node->nout; j++) {
    out[j] = ok ? rg_constant(run->C, vals[j]) : NULL;
    ok = ok && out[j] && rg_type_stands_for(out[j]->type, node->outputs[j]->type);
    rg_tensor_free(vals[j]);
  }
  if (!ok) {
    rg_clear_error(run->C);
    return 0;
  }
  return 1;
}

rg_rewriter *rgr_constant_folding(void) {
  rg_rewriter *rw = rg_node_rewriter("constant_folding", 0, NULL, fold_fn, NULL);
  rw->describe = "a node of constants -> its value";
  return rw;
}

/* ------------------------------------------------------------------ rule parts */

/* The ?x symbol a pattern's logic variable stands for. */
static rg_term var_symbol(rg_term vars, rg_term var) {
  for (rg_term l = vars; rg_is_pair(l); l = rg_cdr(l))
    if (rg_cdr(rg_car(l)) == var) return rg_car(rg_car(l));
  return var;
}

int rgr_rule_parts_of(const rg_rewriter *rw, rgr_rule_parts *out) {
  memset(out, 0, sizeof *out);
  if (rw->kind != RW_NODE) return out->kind = RGR_RULE_OTHER;
  if (rw->nfn == pattern_rule_fn) {
    const pattern *p = &((const pattern_rule *)rw->ud)->p;
    out->from = p->src_from;
    out->to = p->src_to;
    out->guard = p->guard;
    out->guard_vars = RG_NIL;
    rg_term acc = RG_NIL;
    for (rg_term l = p->guard ? p->guard_args : RG_NIL; rg_is_pair(l); l = rg_cdr(l))
      acc = rg_cons(var_symbol(p->vars, rg_car(l)), acc);
    for (; rg_is_pair(acc); acc = rg_cdr(acc)) out->guard_vars = rg_cons(rg_car(acc), out->guard_vars);
    return out->kind = RGR_RULE_PATTERN;
  }
  if (rw->nfn == relation_fn) return out->kind = RGR_RULE_RELATION;
  if (rw->nfn == subst_fn) {
    out->op_from = ((const opsub *)rw->ud)->from;
    out->op_to = ((const opsub *)rw->ud)->to;
    return out->kind = RGR_RULE_SUBST;
  }
  if (rw->nfn == remove_fn) {
    out->op_from = rw->ud;
    return out->kind = RGR_RULE_REMOVE;
  }
  return out->kind = RGR_RULE_OTHER;
}
