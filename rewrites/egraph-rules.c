/*
 * egraph-rules.c — rules on the e-graph and the saturation loop.
 *
 * Pattern rules are compiled into trees of three kinds of pattern nodes:
 * a variable (bound to a class; the same variable twice must meet one
 * class, which makes non-linear patterns exact), an op applied to
 * sub-patterns (an op with ?x among its parameters binds them to terms;
 * (nth K (op ...)) is output K of a multi-output op), and a number
 * literal (a class holding a constant of that value).
 * E-matching starts from every live e-node of the root's op and walks the
 * children with a stack of pending (pattern, class) pairs on the C stack,
 * trying every e-node of each class: every match is found.  A guard runs
 * its relation on the bound classes' representative variables.  A rule's
 * result of small ops is compiled into a term (eg_term) and the matches'
 * results are added op by op across chunks of matches (eg_add_terms).
 *
 * Relational rules are equalities: on an e-node the rule tracks, terms are
 * built down to a depth (every e-node of each child class to that depth,
 * representative variables below it), and the relation runs on each term
 * both ways, (rel term ?out) and (rel ?in term), taking a bounded number
 * of answers; each answer is added and merged with the node's class.  Two
 * rules whose bodies are one call of the same relation with the
 * parameters swapped, like dot-distribute and dot-gather, are one
 * equality, run once.  A term once run on is remembered (by the e-nodes
 * it was built from) and not run again.  Answers wait for the apply phase
 * as words (classes and heads), not as terms: an iteration may hold
 * hundreds of thousands, and as terms the collector marked them all at
 * every collection.  A relation that is only unifications of its
 * parameters with templates (commo, assoco) is instead compiled into
 * pairs of patterns and e-matched both ways: the same matches, without
 * terms or relation runs ("relations as e-matching" below).
 *
 * The loop (after egg): every iteration searches all rules on the e-graph
 * as it is, then applies the matches, then rebuilds.  The backoff
 * scheduler bans a rule whose matches exceed its limit for some
 * iterations, the limit and ban doubling with every ban; an iteration that
 * changes nothing lifts the bans, and saturation is an iteration that
 * changes nothing with no rule banned.
 */
#include "rewrites/egraph-impl.h"
#include "kanren/kanren-impl.h"

#include <math.h>
#include <stdlib.h>

enum { P_VAR, P_OP, P_LIT };

/* A pattern node.  P_OP: head is the interned op when it has no ?x
 * parameters (else hpat, the head as written, with ?x symbols) and code
 * its opcode; with `opv` (relations' templates, below) the op is a
 * variable instead: binding var holds a head, code is RG_OP_COUNT (any)
 * and out 0.  P_VAR: var indexes the match's bindings. */
typedef struct pat {
  int kind, var, nch;
  bool opv;
  int out;                      /* P_OP: the op's output, (nth OUT (op ...)) */
  int depth;                    /* ops on the longest path down (P_OP: >= 1) */
  bool leafop;                  /* P_OP whose children are all P_VAR */
  uint32_t head;
  rg_opcode code;
  rg_term hpat, lit;
  struct pat **ch;
} pat;

enum { R_PATTERN, R_RELATION, R_SUBST, R_REMOVE, R_NATIVE };

struct eg_rule {
  const char *name;
  int kind;
  pat *lhs, *rhs;
  rg_term vars;                 /* ((?x . index) ...) */
  int nvars;
  rg_term guard;
  int *gvars, ngvars;
  /* relational and C rules: the ops of the e-nodes tried (those the
   * relation requires of either argument, or the C rule tracks; all when
   * it cannot be told) */
  rg_rewriter *rw;
  bool track_all;
  uint64_t tracks[(RG_OP_COUNT + 63) / 64];
  rg_term rel;
  eg_term *term;                /* rhs as a term, when it is one (compile_term) */
  pat **tpl;                    /* a relation of unification templates: ntpl
                                   pairs of patterns, in and out (else NULL) */
  eg_term **tterm;              /* tpl[k] as a term, or NULL */
  int ntpl;
  bool templated;               /* this iteration searched tpl (by_templates) */
  rg_query *Q[2];               /* forwards, backwards */
  rg_term qin[2];
  uint64_t *seen;               /* terms already run (hashes; 0 empty; collected) */
  size_t nseen, capseen;
  /* op rules */
  uint32_t from_head;
  const rg_op *op_from, *op_to;
  /* matches of this iteration: pattern rules (root, bindings) as ids,
   * term bindings aside; relations (root . answer) pairs */
  eg_ids m;
  rg_term mterms;
  int64_t nmatches;
  /* relations' answers encoded in plain words (answer_keep), so that the
   * collector does not mark hundreds of thousands of answer terms: answer
   * k starts at ans.v[astart.v[k]] with its class and its token count,
   * then its tokens in preorder (a class c: c << 1; an e-node: head << 1
   * | 1, then its arity).  A count of 0 stands for the next answer of
   * mterms, one the encoding cannot express (both are consumed newest
   * first, so answers apply in the order they always did). */
  eg_ids ans, astart;
  /* the scheduler */
  uint32_t banned_until, times_banned;
  /* semi-naive matching: the iteration of the last search whose matches
   * were all applied (0: none; every node and class is newer), and of
   * this iteration's search */
  uint32_t since, searched;
  bool to_apply;                /* this iteration's search is to be applied */
};

/* Whether a relation sees output `out` of op as (nth OUT (op ...)) rather
 * than (op ...). */
static bool term_is_nth(const rg_op *op, int out) {
  return out || op->code == RG_OP_SPLIT || op->code == RG_OP_IFELSE || (op->code == RG_OP_OPAQUE && op->nout > 1);
}

/* ------------------------------------------------------------------ compiling patterns */

static int var_index(eg_rule *r, rg_term sym) {
  for (rg_term l = r->vars; rg_is_pair(l); l = rg_cdr(l))
    if (rg_car(rg_car(l)) == sym) return (int)rg_int_value(rg_cdr(rg_car(l)));
  r->vars = rg_cons(rg_cons(sym, rg_int(r->nvars)), r->vars);
  return r->nvars++;
}

static bool is_pvar(rg_term t) {
  return rg_kind_of(t) == RG_K_SYMBOL && rg_symbol_name(t)[0] == '?' && rg_symbol_name(t)[1];
}

static bool has_pvar(rg_term t) {
  if (is_pvar(t)) return true;
  return rg_is_pair(t) && (has_pvar(rg_car(t)) || has_pvar(rg_cdr(t)));
}

static void note_param_vars(eg_rule *r, rg_term t) {
  if (is_pvar(t)) var_index(r, t);
  else if (rg_is_pair(t)) {
    note_param_vars(r, rg_car(t));
    note_param_vars(r, rg_cdr(t));
  }
}

static pat *compile(rg_egraph *eg, eg_rule *r, rg_term t, bool rhs);

/* Sets an op pattern's depth and leafop from its compiled children. */
static void op_shape(pat *p) {
  p->depth = 1;
  p->leafop = true;
  for (int i = 0; i < p->nch; i++) {
    if (p->ch[i]->depth + 1 > p->depth) p->depth = p->ch[i]->depth + 1;
    if (p->ch[i]->kind != P_VAR) p->leafop = false;
  }
}

static pat *compile_op(rg_egraph *eg, eg_rule *r, rg_term t, bool rhs, int out) {
  rg_ctx *C = eg->C;
  int64_t n = rg_list_length(t) - 1;
  if (n < 0) {
    rg_error(C, RG_ERR_SYNTAX, "rule %s: the search cannot match a rest pattern: %s", r->name, rg_to_string(t));
    return NULL;
  }
  pat *p = rg_gc_alloc(sizeof *p);
  p->kind = P_OP;
  p->nch = (int)n;
  rg_term h = rg_car(t), hs = rg_is_pair(h) ? rg_car(h) : h;
  if (rg_kind_of(hs) != RG_K_SYMBOL || is_pvar(hs)) {
    rg_error(C, RG_ERR_SYNTAX, "rule %s: the search needs a known op at the head of %s", r->name, rg_to_string(t));
    return NULL;
  }
  if (has_pvar(h)) {
    int c = rg_opcode_from_name(rg_symbol_name(hs));
    p->code = c < 0 ? RG_OP_OPAQUE : (rg_opcode)c;
    p->hpat = h;
    if (!rhs) note_param_vars(r, h);
  } else {
    const rg_op *op = rg_graph_op_of(C, h);
    if (!op) {
      const char *why = rg_gc_sprintf("%s", rg_errmsg(C)); /* the message is rewritten */
      rg_error(C, rg_errcode(C), "rule %s: %s", r->name, why);
      return NULL;
    }
    if (out >= op->nout) {
      rg_error(C, RG_ERR_SYNTAX, "rule %s: %s has no output %d", r->name, rg_to_string(h), out);
      return NULL;
    }
    p->head = eg_intern_op(eg, op, out);
    p->code = op->code;
  }
  p->out = out;
  p->ch = rg_gc_alloc((size_t)(n ? n : 1) * sizeof *p->ch);
  rg_term a = rg_cdr(t);
  for (int i = 0; i < n; i++, a = rg_cdr(a))
    if (!(p->ch[i] = compile(eg, r, rg_car(a), rhs))) return NULL;
  op_shape(p);
  return p;
}

/* Whether t is (nth K (op ...)): one output of a multi-output op. */
static bool is_nth(rg_term t) {
  return rg_is_pair(t) && rg_kind_of(rg_car(t)) == RG_K_SYMBOL && !strcmp(rg_symbol_name(rg_car(t)), "nth") &&
         rg_list_length(t) == 3 && rg_kind_of(rg_car(rg_cdr(t))) == RG_K_INT &&
         rg_int_value(rg_car(rg_cdr(t))) >= 0 && rg_int_value(rg_car(rg_cdr(t))) < 1024 &&
         rg_is_pair(rg_car(rg_cdr(rg_cdr(t))));
}

static pat *compile(rg_egraph *eg, eg_rule *r, rg_term t, bool rhs) {
  if (is_nth(t)) return compile_op(eg, r, rg_car(rg_cdr(rg_cdr(t))), rhs, (int)rg_int_value(rg_car(rg_cdr(t))));
  if (rg_is_pair(t)) return compile_op(eg, r, t, rhs, 0);
  pat *p = rg_gc_alloc(sizeof *p);
  if (is_pvar(t)) {
    p->kind = P_VAR;
    int before = r->nvars;
    p->var = var_index(r, t);
    if (rhs && p->var >= before) {
      rg_error(eg->C, RG_ERR_NAME, "rule %s: %s appears in the result but not in the pattern", r->name, rg_symbol_name(t));
      return NULL;
    }
    return p;
  }
  rg_kind k = rg_kind_of(t);
  if (k != RG_K_INT && k != RG_K_FLOAT && k != RG_K_BOOL) {
    rg_error(eg->C, RG_ERR_SYNTAX, "rule %s: the search cannot match the atom %s", r->name, rg_to_string(t));
    return NULL;
  }
  p->kind = P_LIT;
  p->lit = t;
  return p;
}

/* ------------------------------------------------------------------ e-matching */

/* A pending (pattern, class) pair; the match continues with `next`. */
typedef struct goal { const pat *p; uint32_t c; const struct goal *next; } goal;

typedef struct matcher {
  rg_egraph *eg;
  eg_rule *r;
  uint32_t root;
  uint32_t *binds;              /* class per variable, EG_NONE unbound */
  rg_term *tbinds;              /* term per parameter variable, NULL unbound */
  int64_t count, limit;
  uint32_t since;               /* nodes and classes stamped >= since are new */
  int fresh;                    /* new nodes and classes on the current path */
  bool by_node;                 /* only e-nodes' stamps make a match new (a rule
                                   with no literal and no guard); else a
                                   merged class does too */
  bool linear;                  /* by_node, and no class variable appears
                                   twice in the pattern: a node matched by
                                   a leafop pattern is new only when it was
                                   added or moved (`born`), see ematch */
  bool tagged;                  /* each match records `tag` after its root */
  uint32_t tag;
} matcher;

static void on_match(matcher *m);

static bool class_has_lit(const rg_egraph *eg, uint32_t c, rg_term lit) {
  const eg_ids *ns = &eg->cls[c].nodes;
  for (uint32_t i = 0; i < ns->n; i++) {
    const eg_head *h = &eg->heads[eg->nodes[ns->v[i]].head];
    if (h->leaf && rg_is_constant(h->leaf) && rg_equal(rg_var_term(h->leaf), lit)) return true;
  }
  return false;
}

/* Matches a head with ?x parameters against an op term, binding them;
 * records what it bound in *undo (up to 8). */
static bool match_params(matcher *m, rg_term pt, rg_term t, int *undo, int *nundo) {
  if (is_pvar(pt)) {
    int v = var_index(m->r, pt);
    if (m->tbinds[v]) return rg_equal(m->tbinds[v], t);
    if (*nundo == 8) return false;
    m->tbinds[v] = t;
    undo[(*nundo)++] = v;
    return true;
  }
  if (!rg_is_pair(pt)) return rg_equal(pt, t);
  return rg_is_pair(t) && match_params(m, rg_car(pt), rg_car(t), undo, nundo) &&
         match_params(m, rg_cdr(pt), rg_cdr(t), undo, nundo);
}

static void ematch(matcher *m, const goal *t);

/* Continues the match below e-node id (which p's op matched).  With
 * by_node, a variable child is bound (or checked) here, not pending: a
 * variable's class never makes the match new then. */
static void match_kids(matcher *m, const goal *t, uint32_t id) {
  const pat *p = t->p;
  int n = p->nch ? p->nch : 1, nk = 0, nb = 0;
  goal kids[n];
  int bound[n];
  const uint32_t *k = eg_kids(m->eg, id);
  for (int i = 0; i < p->nch; i++) {
    const pat *q = p->ch[i];
    if (!m->by_node || q->kind != P_VAR) {
      kids[nk++] = (goal){q, k[i], NULL};
      continue;
    }
    uint32_t c = eg_find(m->eg, k[i]), *b = &m->binds[q->var];
    if (*b == EG_NONE) {
      *b = c;
      bound[nb++] = q->var;
    } else if (eg_find(m->eg, *b) != c) {
      nk = -1;
      break;
    }
  }
  if (nk > 0) {
    for (int i = 0; i < nk; i++) kids[i].next = i + 1 < nk ? &kids[i + 1] : t->next;
    ematch(m, &kids[0]);
  } else if (nk == 0) {
    if (t->next) ematch(m, t->next);
    else if (m->count <= m->limit) on_match(m);
  }
  for (int i = 0; i < nb; i++) m->binds[bound[i]] = EG_NONE;
}

/* An op variable meets e-node id: binds it to the node's head, or checks
 * the head it holds (equal heads are equal op terms, as unification has
 * it).  Leaves and outputs a relation sees as (nth ...) are no match. */
static void match_opvar(matcher *m, const goal *t, uint32_t id) {
  uint32_t head = m->eg->nodes[id].head, *b = &m->binds[t->p->var];
  const eg_head *h = &m->eg->heads[head];
  if (h->leaf || term_is_nth(h->op, h->out)) return;
  if (*b == EG_NONE) {
    *b = head;
    match_kids(m, t, id);
    *b = EG_NONE;
  } else if (*b == head) {
    match_kids(m, t, id);
  }
}

/* Whether e-node x, meeting op pattern p, is new to the search: changed
 * in any way since the rule's last search, or for a leafop pattern of a
 * linear rule only added or moved (see matcher.linear). */
static inline bool node_new(const matcher *m, const pat *p, const eg_node *x) {
  return (m->linear && p->leafop ? x->born : x->iter) >= m->since;
}

static void match_node(matcher *m, const goal *t, uint32_t id) {
  rg_egraph *eg = m->eg;
  const eg_node *x = &eg->nodes[id];
  const pat *p = t->p;
  if (x->dead || (int)x->nch != p->nch) return;
  int fresh = node_new(m, p, x);
  m->fresh += fresh;
  if (p->opv) {
    match_opvar(m, t, id);
    m->fresh -= fresh;
    return;
  }
  if (!p->hpat) {
    if (x->head == p->head) match_kids(m, t, id);
    m->fresh -= fresh;
    return;
  }
  const eg_head *h = &eg->heads[x->head];
  int undo[8], nundo = 0;
  if (!h->leaf && h->code == p->code && h->out == p->out &&
      match_params(m, p->hpat, rg_op_term(h->op), undo, &nundo))
    match_kids(m, t, id);
  for (int i = 0; i < nundo; i++) m->tbinds[undo[i]] = NULL;
  m->fresh -= fresh;
}

/* Whether a pending pair may still touch something new: a class within
 * its pattern's depth changed since the rule's last search. */
static bool may_be_fresh(const matcher *m, const goal *t) {
  for (; t; t = t->next)
    if ((!m->by_node || t->p->kind != P_VAR) && eg_level(m->eg, eg_find(m->eg, t->c), t->p->depth) >= m->since)
      return true;
  return false;
}

/* Where the nodes of class list ns that can make a new match start: with
 * nothing new on the path or in the pending pairs after this one, and a
 * leafop pattern of a linear rule, only the nodes added or moved since the
 * rule's last search; the list is in `born` order, so they are its tail. */
static uint32_t first_candidate(const matcher *m, const goal *t, const eg_ids *ns) {
  if (!m->linear || !t->p->leafop || m->fresh || may_be_fresh(m, t->next)) return 0;
  uint32_t i = ns->n;
  while (i > 0 && m->eg->nodes[ns->v[i - 1]].born >= m->since) i--;
  return i;
}

/* Writes the match now bound (the caller checked that it is new). */
static void record_match(matcher *m) {
  eg_rule *r = m->r;
  m->count++;
  uint32_t *w = eg_ids_extend(&r->m, 1 + m->tagged + (uint32_t)r->nvars);
  *w++ = m->root;
  if (m->tagged) *w++ = m->tag;
  for (int i = 0; i < r->nvars; i++) w[i] = m->binds[i];
}

/* The innermost loop of a linear rule, without a call per node: leafop
 * pattern p (a plain op, variable children) meets the nodes ns->v[from..]
 * with no pair pending after it, so each node of p's head is a match,
 * binding its children; it is new when the path was or the node is. */
static void match_leaves(matcher *m, const pat *p, const eg_ids *ns, uint32_t from) {
  rg_egraph *eg = m->eg;
  for (uint32_t i = from; i < ns->n && m->count <= m->limit; i++) {
    const eg_node *x = &eg->nodes[ns->v[i]];
    if (x->dead || x->head != p->head || (int)x->nch != p->nch || (!m->fresh && !node_new(m, p, x))) continue;
    const uint32_t *k = eg->kids + x->ch;
    for (int j = 0; j < p->nch; j++) m->binds[p->ch[j]->var] = eg_find(eg, k[j]);
    record_match(m);
  }
  for (int j = 0; j < p->nch; j++) m->binds[p->ch[j]->var] = EG_NONE;
}

static void ematch(matcher *m, const goal *t) {
  if (m->count > m->limit) return;
  if (!t) {
    on_match(m);
    return;
  }
  if (!m->fresh && !may_be_fresh(m, t)) return;
  rg_egraph *eg = m->eg;
  uint32_t c = eg_find(eg, t->c);
  const pat *p = t->p;
  int fresh = (!m->by_node || p->kind == P_LIT) && eg->cls[c].mod >= m->since;
  m->fresh += fresh;
  if (p->kind == P_VAR) {
    uint32_t b = m->binds[p->var];
    if (b == EG_NONE) {
      m->binds[p->var] = c;
      ematch(m, t->next);
      m->binds[p->var] = EG_NONE;
    } else if (eg_find(eg, b) == c) {
      ematch(m, t->next);
    }
  } else if (p->kind == P_LIT) {
    if (class_has_lit(eg, c, p->lit)) ematch(m, t->next);
  } else {
    const eg_ids *ns = &eg->cls[c].nodes;
    uint32_t i = first_candidate(m, t, ns);
    if (m->linear && p->leafop && !p->opv && !p->hpat && !t->next && !m->tbinds)
      match_leaves(m, p, ns, i);
    else
      for (; i < ns->n; i++) match_node(m, t, ns->v[i]);
  }
  m->fresh -= fresh;
}

static bool guard_ok(matcher *m) {
  eg_rule *r = m->r;
  rg_term args[r->ngvars > 0 ? r->ngvars : 1];
  for (int i = 0; i < r->ngvars; i++) {
    int v = r->gvars[i];
    args[i] = m->tbinds && m->tbinds[v] ? m->tbinds[v] : rg_var_term(eg_rep(m->eg, m->binds[v]));
  }
  rg_run_opts o = {.max_steps = RGR_GIVE_UP_STEPS};
  rg_term q = rg_var(m->eg->C), answers;
  int rc = rg_run(m->eg->C, 1, q, rg_call(r->guard, r->ngvars, args), &o, &answers);
  if (rc < 0) rg_clear_error(m->eg->C);
  return rc == RG_OK && answers != RG_NIL;
}

/* A match is recorded only when it touches a node or class newer than
 * the rule's last applied search: the others were found then. */
static void on_match(matcher *m) {
  eg_rule *r = m->r;
  if (!m->fresh) return;
  if (r->guard && !guard_ok(m)) return;
  record_match(m);
  if (m->tbinds) {
    rg_term l = RG_NIL;
    for (int i = r->nvars - 1; i >= 0; i--) l = rg_cons(m->tbinds[i] ? m->tbinds[i] : RG_NIL, l);
    r->mterms = rg_cons(l, r->mterms);
  }
}

static bool has_params(const pat *p) {
  if (p->kind != P_OP) return false;
  if (p->hpat) return true;
  for (int i = 0; i < p->nch; i++)
    if (has_params(p->ch[i])) return true;
  return false;
}

/* Whether the run's budget ran out (looked at every 256th step i): its
 * deadline passed, or the e-graph reached the node limit (so a rule with
 * many matches stops near the limit, not after all of them); a rule cut
 * short this way is not marked searched. */
static bool out_of_time(rg_egraph *eg, eg_rule *r, size_t i) {
  if (i & 255) return false;
  if (eg->node_cap > 0 && (int64_t)eg->nmemo >= eg->node_cap) {
    r->to_apply = false;
    return true;
  }
  if (rgr_now() <= eg->deadline) return false;
  eg->late = true;
  r->to_apply = false;
  return true;
}

static bool has_lit(const pat *p) {
  if (p->kind == P_LIT) return true;
  for (int i = 0; p->kind == P_OP && i < p->nch; i++)
    if (has_lit(p->ch[i])) return true;
  return false;
}

static bool tracks_head(const eg_rule *r, const eg_head *h);

/* Whether e-node x can be the root of a new match of lhs: with by_node,
 * it is new itself or a class the pattern descends into changed within
 * the pattern's depth (the check ematch would make one call later; most
 * roots of a large e-graph fail it). */
static bool root_may_match(const matcher *m, const pat *lhs, const eg_node *x) {
  if (x->dead || (int)x->nch != lhs->nch) return false;
  if (!m->by_node || node_new(m, lhs, x)) return true;
  const uint32_t *k = m->eg->kids + x->ch;
  for (int i = 0; i < lhs->nch; i++) {
    const pat *q = lhs->ch[i];
    if (q->kind != P_VAR && eg_level(m->eg, eg_find(m->eg, k[i]), q->depth) >= m->since) return true;
  }
  return false;
}

/* Matches lhs from every e-node of ns (with `tracked`, those the rule
 * tracks).  False when the deadline cut it short. */
static bool match_roots(matcher *m, const pat *lhs, const eg_ids *ns, bool tracked) {
  rg_egraph *eg = m->eg;
  goal root = {lhs, 0, NULL};
  for (uint32_t i = 0, n = ns->n; i < n && m->count <= m->limit; i++) {
    if (out_of_time(eg, m->r, i)) return false;
    uint32_t id = ns->v[i];
    if (!root_may_match(m, lhs, &eg->nodes[id])) continue;
    if (tracked && !tracks_head(m->r, &eg->heads[eg->nodes[id].head])) continue;
    m->root = root.c = eg_find(eg, eg->nodes[id].cls);
    match_node(m, &root, id);
  }
  return true;
}

/* Whether no class variable appears twice in p (seen: one flag per
 * variable, cleared). */
static bool pattern_linear(const pat *p, bool *seen) {
  if (p->kind == P_VAR) {
    if (seen[p->var]) return false;
    return seen[p->var] = true;
  }
  for (int i = 0; p->kind == P_OP && i < p->nch; i++)
    if (!pattern_linear(p->ch[i], seen)) return false;
  return true;
}

static void search_pattern(rg_egraph *eg, eg_rule *r, int64_t limit) {
  uint32_t binds[r->nvars ? r->nvars : 1];
  rg_term *tb = has_params(r->lhs) ? rg_gc_alloc((size_t)(r->nvars + 1) * sizeof *tb) : NULL;
  matcher m = {.eg = eg, .r = r, .binds = binds, .tbinds = tb, .limit = limit, .since = r->since,
               .by_node = !r->guard && !has_lit(r->lhs)};
  for (int i = 0; i < r->nvars; i++) binds[i] = EG_NONE;
  bool seen[r->nvars ? r->nvars : 1];
  memset(seen, 0, sizeof seen);
  m.linear = m.by_node && pattern_linear(r->lhs, seen);
  match_roots(&m, r->lhs, &eg->byop[r->lhs->code], false);
  r->nmatches = m.count;
}

/* ------------------------------------------------------------------ instantiating results */

static uint32_t instantiate(rg_egraph *eg, eg_rule *r, const pat *p, const uint32_t *binds, rg_term tb,
                            uint32_t into);

static rg_term subst_params(rg_term t, eg_rule *r, rg_term tb) {
  if (is_pvar(t)) {
    int v = var_index(r, t);
    rg_term l = tb;
    while (v-- > 0 && rg_is_pair(l)) l = rg_cdr(l);
    return rg_is_pair(l) ? rg_car(l) : t;
  }
  if (!rg_is_pair(t)) return t;
  return rg_cons(subst_params(rg_car(t), r, tb), subst_params(rg_cdr(t), r, tb));
}

static uint32_t instantiate_op(rg_egraph *eg, eg_rule *r, const pat *p, const uint32_t *binds, rg_term tb,
                               uint32_t into) {
  uint32_t head = p->opv ? binds[p->var] : p->head;
  if (p->hpat) {
    const rg_op *op = rg_graph_op_of(eg->C, subst_params(p->hpat, r, tb));
    if (!op) return EG_NONE;
    if (p->out >= op->nout) return EG_NONE;
    head = eg_intern_op(eg, op, p->out);
  }
  uint32_t ch[p->nch ? p->nch : 1];
  for (int i = 0; i < p->nch; i++) {
    const pat *q = p->ch[i];
    ch[i] = q->kind == P_VAR ? binds[q->var] : instantiate(eg, r, q, binds, tb, EG_NONE);
    if (ch[i] == EG_NONE) return EG_NONE;
  }
  return into == EG_NONE ? eg_add(eg, head, p->nch, ch) : eg_add_into(eg, head, p->nch, ch, into);
}

/* The class of p's instance; with `into`, merged with that class. */
static uint32_t instantiate(rg_egraph *eg, eg_rule *r, const pat *p, const uint32_t *binds, rg_term tb,
                            uint32_t into) {
  if (p->kind == P_VAR) return binds[p->var];
  if (p->kind == P_LIT) {
    rg_variable *v = rg_term_to_variable(eg->C, p->lit);
    return v ? eg_add_var(eg, v) : EG_NONE;
  }
  return instantiate_op(eg, r, p, binds, tb, into);
}

/* Appends p's ops to t in postorder; p's reference (a binding, or -1 -
 * its op), or INT32_MIN when p is no term: a literal, an op with
 * parameters or more than two children, more than EG_TERM_MAX ops. */
static int32_t term_ref(const pat *p, eg_term *t) {
  if (p->kind == P_VAR) return p->var;
  if (p->kind != P_OP || p->hpat || p->nch > 2) return INT32_MIN;
  eg_term_op o = {p->head, (uint32_t)p->nch, p->opv ? p->var : -1, {0, 0}};
  for (int i = 0; i < p->nch; i++)
    if ((o.ch[i] = term_ref(p->ch[i], t)) == INT32_MIN) return INT32_MIN;
  if (t->nops == EG_TERM_MAX) return INT32_MIN;
  t->op[t->nops] = o;
  return -1 - t->nops++;
}

/* Result pattern p as a term for eg_add_terms, or NULL (a variable, or
 * what term_ref refuses: instantiate builds those). */
static eg_term *compile_term(const pat *p) {
  eg_term t = {0};
  if (p->kind != P_OP || term_ref(p, &t) == INT32_MIN) return NULL;
  eg_term *c = rg_gc_alloc(sizeof *c);
  *c = t;
  return c;
}

#define TERM_CHUNK 1024 /* matches given to eg_add_terms at once (a multiple of 256) */

static int apply_pattern(rg_egraph *eg, eg_rule *r) {
  size_t stride = (size_t)r->nvars + 1;
  if (r->term) { /* in chunks, the deadline looked at between them */
    size_t n = r->m.n / stride;
    for (size_t i = 0; i < n && !out_of_time(eg, r, i); i += TERM_CHUNK) {
      int rc = eg_add_terms(eg, r->term, r->m.v + i * stride, (uint32_t)(n - i < TERM_CHUNK ? n - i : TERM_CHUNK),
                            (uint32_t)stride, 1);
      if (rc) return rc;
    }
    return RG_OK;
  }
  rg_term tl = RG_NIL;  /* term bindings were pushed in reverse */
  for (rg_term l = r->mterms; rg_is_pair(l); l = rg_cdr(l)) tl = rg_cons(rg_car(l), tl);
  for (size_t i = 0; i + stride <= r->m.n && !out_of_time(eg, r, i / stride); i += stride) {
    rg_term tb = rg_is_pair(tl) ? rg_car(tl) : RG_NIL;
    if (rg_is_pair(tl)) tl = rg_cdr(tl);
    uint32_t into = r->rhs->kind == P_OP ? r->m.v[i] : EG_NONE;
    uint32_t c = instantiate(eg, r, r->rhs, r->m.v + i + 1, tb, into);
    if (c == EG_NONE && rg_errcode(eg->C)) return rg_errcode(eg->C);
    if (c != EG_NONE && into == EG_NONE) eg_union(eg, r->m.v[i], c);
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ op rules */

static void search_op(rg_egraph *eg, eg_rule *r, int64_t limit) {
  const eg_ids *ns = &eg->byop[r->op_from->code];
  for (uint32_t i = 0, n = ns->n; i < n && (int64_t)r->m.n <= limit; i++) {
    const eg_node *x = &eg->nodes[ns->v[i]];
    const eg_head *h = &eg->heads[x->head];
    if (x->dead || x->iter < r->since || !rg_op_equal(h->op, r->op_from)) continue;
    if (r->kind == R_REMOVE && (x->nch != 1 || h->op->nout != 1)) continue;
    eg_ids_push(&r->m, ns->v[i]);
  }
  r->nmatches = r->m.n;
}

static int apply_op(rg_egraph *eg, eg_rule *r) {
  for (uint32_t i = 0; i < r->m.n; i++) {
    uint32_t id = r->m.v[i], c = eg_find(eg, eg->nodes[id].cls);
    if (r->kind == R_REMOVE) {
      eg_union(eg, c, eg_kids(eg, id)[0]);
      continue;
    }
    uint32_t n = eg->nodes[id].nch, ch[n ? n : 1];
    if (n) memcpy(ch, eg_kids(eg, id), n * sizeof *ch);
    uint32_t to = eg_add(eg, eg_intern_op(eg, r->op_to, eg->heads[eg->nodes[id].head].out), (int)n, ch);
    if (to == EG_NONE && rg_errcode(eg->C)) return rg_errcode(eg->C);
    if (to != EG_NONE) eg_union(eg, c, to);
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ relational equalities */

/* A term of the e-graph with the hash of the e-nodes it was built from. */
typedef struct alt { rg_term t; uint64_t h; } alt;
/* Terms being collected: v points at `small` until more are pushed (most
 * children have a handful of terms, and these lists live for one search
 * step). */
#define ALTS_INLINE 4
typedef struct alts { alt *v; int n, cap; alt small[ALTS_INLINE]; } alts;

static void alts_init(alts *a) {
  a->v = a->small;
  a->n = 0;
  a->cap = ALTS_INLINE;
}

static void alts_push(alts *a, rg_term t, uint64_t h) {
  if (a->n == a->cap) {
    int cap = 2 * a->cap;
    alt *v = rg_gc_alloc((size_t)cap * sizeof *v);
    if (a->n) memcpy(v, a->v, (size_t)a->n * sizeof *v);
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = (alt){t, h};
}

static uint64_t hmix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ull;
}

/* A class's representative in the hashes of the combinations a rule has
 * run on: the representative itself, not its class, so that a class whose
 * representative changes (to a constant folded into it) is tried again by
 * the rules that look at it (x + 0 once the 0 is known). */
static uint64_t rep_hash(const rg_variable *rep) { return hmix(0xc1a55, (uint64_t)(uintptr_t)rep); }

static void node_terms(rg_egraph *eg, uint32_t id, int depth, int cap, alts *out, eg_rule *fresh);
static bool seen_add(eg_rule *r, uint64_t h);

/* The terms of class c to `depth`: its representative at depth 0, else
 * the terms of each of its e-nodes. */
static void class_terms(rg_egraph *eg, uint32_t c, int depth, int cap, alts *out) {
  c = eg_find(eg, c);
  if (depth <= 0) {
    rg_variable *rep = eg_rep(eg, c);
    alts_push(out, rg_var_term(rep), rep_hash(rep));
    return;
  }
  const eg_ids *ns = &eg->cls[c].nodes;
  for (uint32_t i = 0; i < ns->n && out->n < cap; i++)
    if (!eg->nodes[ns->v[i]].dead) node_terms(eg, ns->v[i], depth, cap, out, NULL);
}

static rg_term node_term(const eg_head *h, int n, const rg_term *args) {
  rg_term e = rg_etuple(rg_op_term(h->op), n, args);
  if (!term_is_nth(h->op, h->out)) return e;
  rg_term nth[2] = {rg_int(h->out), e};
  return rg_etuple(rg_symbol("nth"), 2, nth);
}

/* The terms of e-node id: its op applied to every combination of its
 * children's terms, child i's to depth kd[i] (at most cap combinations).
 * With `fresh`, only the combinations that rule has not run on are built
 * (and marked run); `seed` starts their hashes. */
static void node_terms_d(rg_egraph *eg, uint32_t id, const int *kd, int cap, alts *out, eg_rule *fresh,
                         uint64_t seed) {
  const eg_node *x = &eg->nodes[id];
  const eg_head *h = &eg->heads[x->head];
  if (h->leaf) {
    uint64_t hh = hmix(seed ^ 0x1eaf, id);
    if (!fresh || seen_add(fresh, hh)) alts_push(out, rg_var_term(h->leaf), hh);
    return;
  }
  int n = (int)x->nch;
  alts kids[n ? n : 1];
  for (int i = 0; i < n; i++) {
    alts_init(&kids[i]);
    class_terms(eg, eg_kids(eg, id)[i], kd[i], cap, &kids[i]);
    if (!kids[i].n) return;
  }
  int idx[n ? n : 1];
  memset(idx, 0, sizeof idx);
  rg_term args[n ? n : 1];
  for (int made = 0;;) {
    uint64_t hh = hmix(seed ^ 0x90de, id);
    for (int i = 0; i < n; i++) hh = hmix(hh, kids[i].v[idx[i]].h);
    if (!fresh || seen_add(fresh, hh)) {
      for (int i = 0; i < n; i++) args[i] = kids[i].v[idx[i]].t;
      alts_push(out, node_term(h, n, args), hh);
    }
    if (++made >= cap || out->n >= cap) return;
    int i = n - 1;
    while (i >= 0 && ++idx[i] == kids[i].n) idx[i--] = 0;
    if (i < 0) return;
  }
}

static void node_terms(rg_egraph *eg, uint32_t id, int depth, int cap, alts *out, eg_rule *fresh) {
  int n = (int)eg->nodes[id].nch, kd[n ? n : 1];
  for (int i = 0; i < n; i++) kd[i] = depth - 1;
  node_terms_d(eg, id, kd, cap, out, fresh, 0);
}

static bool seen_add(eg_rule *r, uint64_t h) {
  if (!h) h = 1;
  if (2 * (r->nseen + 1) > r->capseen) {
    size_t cap = r->capseen ? 2 * r->capseen : 1024;
    /* collected memory the rule holds (a malloc'd table was never freed) */
    uint64_t *t = rgk_alloc_atomic(cap * sizeof *t);
    memset(t, 0, cap * sizeof *t);
    for (size_t i = 0; i < r->capseen; i++) {
      if (!r->seen[i]) continue;
      size_t s = r->seen[i] & (cap - 1);
      while (t[s]) s = (s + 1) & (cap - 1);
      t[s] = r->seen[i];
    }
    r->seen = t;
    r->capseen = cap;
  }
  size_t s = h & (r->capseen - 1);
  for (; r->seen[s]; s = (s + 1) & (r->capseen - 1))
    if (r->seen[s] == h) return false;
  r->seen[s] = h;
  r->nseen++;
  return true;
}

/* Reads answer term t as (op arg ...) or (nth K (op arg ...)): its op,
 * output K (else 0) and argument list; false for any other term (an
 * unknown op name leaves its error set). */
static bool op_term(rg_egraph *eg, rg_term t, const rg_op **op, int *out, rg_term *args) {
  if (rg_is_etuple(t)) t = rg_etuple_list(t);
  if (!rg_is_pair(t)) return false;
  rg_term h = rg_car(t);
  *out = 0;
  if (rg_kind_of(h) == RG_K_SYMBOL && !strcmp(rg_symbol_name(h), "nth")) {
    if (rg_list_length(t) != 3 || rg_kind_of(rg_car(rg_cdr(t))) != RG_K_INT) return false;
    *out = (int)rg_int_value(rg_car(rg_cdr(t)));
    t = rg_car(rg_cdr(rg_cdr(t)));
    if (rg_is_etuple(t)) t = rg_etuple_list(t);
    if (!rg_is_pair(t)) return false;
    h = rg_car(t);
  }
  if (has_pvar(h) || rg_is_var(h)) return false;
  *args = rg_cdr(t);
  return (*op = rg_graph_op_of(eg->C, h)) != NULL;
}

/* Appends the tokens of answer term t (see eg_rule's ans); false when
 * they cannot express it: a variable the e-graph lacks, a literal. */
static bool answer_encode(rg_egraph *eg, eg_ids *a, rg_term t) {
  rg_variable *v = rg_term_var(t);
  if (v) {
    uint32_t c = eg_lookup_var(eg, v);
    if (c == EG_NONE || c >> 31) return false;
    eg_ids_push(a, c << 1);
    return true;
  }
  const rg_op *op;
  int out;
  rg_term args;
  if (!op_term(eg, t, &op, &out, &args)) {
    rg_clear_error(eg->C); /* the term's own path reports it */
    return false;
  }
  uint32_t head = eg_intern_op(eg, op, out);
  if (head >> 31) return false;
  eg_ids_push(a, head << 1 | 1);
  uint32_t at = a->n;
  eg_ids_push(a, 0);
  uint32_t n = 0;
  for (; rg_is_pair(args); args = rg_cdr(args), n++)
    if (!answer_encode(eg, a, rg_car(args))) return false;
  a->v[at] = n;
  return true;
}

/* Keeps answer a of class c until the rule applies: encoded, or as a
 * term in mterms. */
static void answer_keep(rg_egraph *eg, eg_rule *r, uint32_t c, rg_term a) {
  uint32_t start = r->ans.n;
  eg_ids_push(&r->astart, start);
  eg_ids_push(&r->ans, c);
  eg_ids_push(&r->ans, 0);
  if (answer_encode(eg, &r->ans, a)) {
    r->ans.v[start + 1] = r->ans.n - start - 2;
    return;
  }
  r->ans.n = start + 2;
  r->mterms = rg_cons(rg_cons(rg_int(c), a), r->mterms);
}

static rg_query *rel_query(rg_egraph *eg, eg_rule *r, int dir, rg_term term) {
  if (!r->Q[dir]) {
    rg_term in = rg_var(eg->C), out = rg_var(eg->C);
    rg_term args[2] = {dir ? out : in, dir ? in : out};
    rg_run_opts o = {.max_steps = dir ? RGR_GIVE_UP_STEPS : RGR_RELATION_STEPS};
    r->Q[dir] = rg_query_new(eg->C, out, rg_call(r->rel, 2, args), &o);
    r->qin[dir] = in;
  }
  rg_query_restart(r->Q[dir], 1, &r->qin[dir], &term);
  return r->Q[dir];
}

/* Output j of the node of several outputs answer a names: a graph
 * variable's sibling, or (nth j (op' arg ...)) for a term (nth K (op'
 * arg ...)); NULL otherwise.  *k is the output a itself is (-1: a is no
 * output of a node of several). */
static rg_term answer_output(rg_egraph *eg, rg_term a, int j, int *k) {
  rg_variable *v = rg_term_var(a);
  if (v) {
    *k = v->owner && v->owner->nout > 1 ? v->index : -1;
    return *k >= 0 && j < v->owner->nout ? rg_var_term(v->owner->outputs[j]) : NULL;
  }
  const rg_op *op;
  rg_term args, e = rg_is_etuple(a) ? rg_etuple_list(a) : a;
  *k = -1;
  if (!rg_is_pair(e) || rg_kind_of(rg_car(e)) != RG_K_SYMBOL || strcmp(rg_symbol_name(rg_car(e)), "nth")) return NULL;
  if (!op_term(eg, a, &op, k, &args)) {
    rg_clear_error(eg->C);
    *k = -1;
    return NULL;
  }
  rg_term t[3] = {rg_symbol("nth"), rg_int(j), rg_car(rg_cdr(rg_cdr(e)))};
  return rg_list(3, t);
}

/* An answer for output K of e-node id, whose op has several outputs (a
 * Scan a relation rewrote), that is output K of a node too: each other
 * output J the e-graph has of that op over those children gets the
 * answer's output J, as `relgraph rewrite` replaces the outputs one by
 * one.  Else only output K's class would hold the new node, and an answer
 * could read one output of each of the two loops. */
static void keep_siblings(rg_egraph *eg, eg_rule *r, uint32_t id, rg_term a) {
  const eg_node *x = &eg->nodes[id];
  const eg_head *h = &eg->heads[x->head];
  int k;
  if (h->leaf || (answer_output(eg, a, 0, &k), k < 0 || k != h->out)) return;
  int n = (int)x->nch;
  const uint32_t *kids = eg_kids(eg, id);
  rg_variable *reps[n ? n : 1];
  for (int i = 0; i < n; i++) reps[i] = eg_rep(eg, eg_find(eg, kids[i]));
  enum { MAXOUT = 64 };
  const rg_type *types[MAXOUT];
  int nout = rg_node_types(eg->C, h->op, n, reps, MAXOUT, types);
  rg_clear_error(eg->C);
  for (int j = 0; j < nout && j < MAXOUT; j++) {
    if (j == h->out) continue;
    uint32_t cj = eg_lookup_node(eg, eg_intern_op(eg, h->op, j), n, kids);
    rg_term aj = cj == EG_NONE ? NULL : answer_output(eg, a, j, &k);
    if (aj) answer_keep(eg, r, eg_find(eg, cj), aj);
  }
}

/* Runs the relation on term in direction dir, collecting answers for
 * class c (of e-node id).  Forwards, a relation over its step limit is an
 * error (as in the rewrite driver); backwards it is taken as "no answer". */
static int run_relation(rg_egraph *eg, eg_rule *r, int dir, uint32_t id, uint32_t c, rg_term term, int nans) {
  rg_query *Q = rel_query(eg, r, dir, term);
  for (int k = 0; k < nans; k++) {
    rg_term a;
    int rc = rg_query_next_walked(Q, &a);
    if ((rc == RG_STOP_STEPS || rc == RG_STOP_TIMEOUT) && dir == 0)
      return rg_error(eg->C, RG_ERR_LIMIT, "the relation did not answer within %d steps on %s",
                      RGR_RELATION_STEPS, rgr_show_term(term));
    if (rc < 0 && dir == 0) return rc;
    if (rc != 1) break;
    answer_keep(eg, r, c, a);
    keep_siblings(eg, r, id, a);
    r->nmatches++;
  }
  if (rg_errcode(eg->C) && dir) rg_clear_error(eg->C);
  return RG_OK;
}

static bool tracks_head(const eg_rule *r, const eg_head *h) {
  if (h->leaf) return false;
  return r->track_all || (r->tracks[h->code / 64] >> (h->code % 64) & 1);
}

/* Adds the heads the relation requires of argument arg; false when it
 * cannot be told. */
static bool track_heads(eg_rule *r, int arg) {
  rg_term heads = rg_relation_input_heads(r->rel, arg);
  if (!heads || !rg_is_pair(heads)) return false;
  for (rg_term l = heads; rg_is_pair(l); l = rg_cdr(l)) {
    int c = rgr_head_opcode(rg_car(l));
    if (c < 0) c = RG_OP_OPAQUE;
    r->tracks[c / 64] |= 1ull << (c % 64);
  }
  return true;
}

/* ------------------------------------------------------------------ the structure a relation reads */

/* How deep a relation looks into the term it is given, per position of
 * the term's arguments, read from its code: a unification (== ARG (HEAD
 * A1 A2 ...)) in its body's conjunctions (inside fresh scopes; over conde
 * clauses, the deepest) gives position i the nesting depth of Ai's
 * template.  A position whose template is a variable used by no goal
 * other than one building the other argument needs no structure (the
 * class's representative is enough).  Anything else (calls, a template
 * that is not a list, a variable used elsewhere) is unknown: the full
 * depth, as without the analysis.  Sound in the sense that it gives up
 * rather than guess. */
#define REL_MAXPOS 8
typedef struct rshape { int n; int8_t d[REL_MAXPOS]; } rshape; /* n < 0: unknown */

static bool tx_mentions(const rgk_tx *t, int level, int var_level, uint32_t idx) {
  if (!t) return false;
  switch (t->op) {
  case TX_CONST: case TX_GLOBAL: return false;
  case TX_LOCAL: return level - (int)t->depth == var_level && t->idx == idx;
  case TX_CONS: return tx_mentions(t->a, level, var_level, idx) || tx_mentions(t->b, level, var_level, idx);
  default: return true;
  }
}

static bool is_param(const rgk_tx *t, int level, int param) {
  return t->op == TX_LOCAL && (int)t->depth == level && (int)t->idx == param;
}

/* Whether goal g (at frame level `level`) uses variable (var_level, idx)
 * other than in `skip` or in a unification building parameter `other`. */
static bool goal_mentions(const rg_goal *g, int level, int var_level, uint32_t idx, const rg_goal *skip,
                          int other) {
  if (g == skip) return false;
  switch (g->op) {
  case G_SUCCEED: case G_FAIL: return false;
  case G_EQ:
    if (is_param(g->a, level, other) || is_param(g->b, level, other)) return false;
    return tx_mentions(g->a, level, var_level, idx) || tx_mentions(g->b, level, var_level, idx);
  case G_CONJ: case G_CONDE:
    for (uint32_t i = 0; i < g->n; i++)
      if (goal_mentions(g->kids[i], level, var_level, idx, skip, other)) return true;
    return false;
  case G_FRESH: return goal_mentions(g->body, g->n ? level + 1 : level, var_level, idx, skip, other);
  default: return true;
  }
}

static int tx_depth(const rgk_tx *t, int full) {
  if (t->op == TX_LOCAL) return 0;
  if (t->op == TX_CONST) return rg_is_pair(t->k) ? full : 0;
  if (t->op != TX_CONS || full <= 0) return full;
  int d = 0;
  const rgk_tx *l = t->b;
  for (; l && l->op == TX_CONS; l = l->b) {
    int e = tx_depth(l->a, full - 1);
    if (e > d) d = e;
  }
  return l && l->op == TX_CONST && l->k == RG_NIL ? 1 + d : full;
}

/* The shape the template t of parameter `param` asks for (found in goal
 * eq at frame `level`, inside `body`). */
static rshape template_shape(const rgk_tx *t, int level, const rg_goal *body, const rg_goal *eq, int param,
                             int full) {
  rshape sh = {.n = -1};
  if (t->op != TX_CONS) return sh;
  sh.n = 0;
  const rgk_tx *l = t->b;
  for (; l && l->op == TX_CONS && sh.n < REL_MAXPOS; l = l->b) {
    const rgk_tx *x = l->a;
    int d = tx_depth(x, full);
    if (x->op == TX_LOCAL && goal_mentions(body, 0, level - (int)x->depth, x->idx, eq, 1 - param)) d = full;
    sh.d[sh.n++] = (int8_t)(d < full ? d : full);
  }
  if (!l || l->op != TX_CONST || l->k != RG_NIL) sh.n = -1;
  return sh;
}

static rshape shape_goal(const rg_goal *g, int level, const rg_goal *body, int param, int full) {
  rshape none = {.n = -1};
  switch (g->op) {
  case G_EQ:
    if (is_param(g->a, level, param)) return template_shape(g->b, level, body, g, param, full);
    if (is_param(g->b, level, param)) return template_shape(g->a, level, body, g, param, full);
    return none;
  case G_CONJ:
    for (uint32_t i = 0; i < g->n; i++) {
      rshape sh = shape_goal(g->kids[i], level, body, param, full);
      if (sh.n >= 0) return sh;
    }
    return none;
  case G_FRESH: return shape_goal(g->body, g->n ? level + 1 : level, body, param, full);
  case G_CONDE: {
    rshape all = {.n = -2};
    for (uint32_t i = 0; i < g->n; i++) {
      rshape sh = shape_goal(g->kids[i], level, body, param, full);
      if (sh.n < 0 || (all.n >= 0 && sh.n != all.n)) return none;
      if (all.n < 0) all = sh;
      for (int k = 0; k < sh.n; k++)
        if (sh.d[k] > all.d[k]) all.d[k] = sh.d[k];
    }
    return all.n >= 0 ? all : none;
  }
  default: return none;
  }
}

static const rgk_lambda *lambda_of(rg_term p) {
  if (!p || rgk_type(p) != RGK_T_PROC || ((rgk_proc *)p)->h.aux != PROC_LAMBDA) return NULL;
  const rgk_lambda *lam = ((rgk_proc *)p)->lam;
  return lam->nparams == 2 && !lam->rest ? lam : NULL;
}

/* The relation doing the work of rel, through bodies that are one call
 * passing both parameters on (a rule's (rel in out)); *swapped when its
 * parameters arrive swapped.  NULL for any other chain. */
static const rgk_lambda *worker_lambda(rg_term rel, bool *swapped) {
  const rgk_lambda *lam = lambda_of(rel);
  *swapped = false;
  for (int hops = 0; lam && hops < 8; hops++) {
    const rg_goal *g = lam->body;
    if (g->op != G_CALL) return lam;
    if (g->n != 2 || g->a->op == TX_LOCAL) return NULL;
    rg_term callee = g->a->op == TX_GLOBAL ? g->a->g->value : g->a->op == TX_CONST ? g->a->k : 0;
    if (is_param(g->args[0], 0, 1) && is_param(g->args[1], 0, 0)) *swapped = !*swapped;
    else if (!is_param(g->args[0], 0, 0) || !is_param(g->args[1], 0, 1)) return NULL;
    lam = lambda_of(callee);
  }
  return NULL;
}

/* The shape relation rel asks of parameter `param` (0: in, 1: out). */
static rshape relation_shape(rg_term rel, int param, int full) {
  bool sw;
  const rgk_lambda *lam = worker_lambda(rel, &sw);
  if (!lam) return (rshape){.n = -1};
  return shape_goal(lam->body, 0, lam->body, sw ? 1 - param : param, full);
}

/* ------------------------------------------------------------------ relations as e-matching */

/* A relation whose body is a conjunction of two unifications, in =
 * TEMPLATE and out = TEMPLATE, inside fresh scopes (like commo and
 * assoco), is an equality of two patterns: run forwards on an e-node's
 * term it answers out's template under the bindings in's template made,
 * and backwards the other way round, one answer each.  E-matching finds
 * the same matches without building a term or running the relation.
 * A relation whose `conde` clauses are each such a pair (or complete one:
 * (== in ...) then a conde of (== out ...) clauses) is that many pairs, one
 * answer per matching clause; it compiles when there are no more pairs
 * than the answers taken per run (rel_answers), so that none is dropped.
 * A template compiles when it is a list (HEAD ARG ...) whose HEAD is an
 * op (one a relation sees as (op ...), not as (nth ...)) or a fresh
 * variable standing for the op, and whose arguments are templates or
 * fresh variables.  The relation keeps running in the interpreter when
 * anything else appears: a constant argument, a variable twice in one
 * template (terms of one class are not equal terms), a variable used as
 * an op and as an argument, a variable in one template only (its answer
 * would not be ground), any other goal.  The search also interprets it
 * when its terms would be cut above the templates' depth (rel_depth), or
 * when asked to (interpret_relations). */

#define TPL_MAXVARS 32
typedef struct tpl_ctx {
  rg_egraph *eg;
  int nvars;
  uint32_t key[TPL_MAXVARS];    /* each variable's frame << 16 | slot */
  uint32_t seen;                /* variables of the template being compiled (bits) */
  uint32_t opvars, argvars;     /* variables used as ops / as arguments (bits) */
} tpl_ctx;

/* A way through a relation's body: the templates of `in` and `out` (as
 * found so far), with the frame levels they are read at. */
#define TPL_MAXALTS 8
typedef struct tpl_alt { const rgk_tx *tx[2]; int lv[2]; } tpl_alt;

/* Extends the n ways through the body in a[] by goal g (at frame
 * `level`): a unification of a parameter with a template sets it in each
 * way, a conjunction extends them goal by goal, a conde makes one way per
 * way and clause.  Returns the new number of ways, -1 when g holds
 * anything else (or too many ways). */
static int tpl_goals(const rg_goal *g, int level, tpl_alt *a, int n) {
  switch (g->op) {
  case G_EQ:
    for (int p = 0; p < 2; p++) {
      const rgk_tx *t = is_param(g->a, level, p) ? g->b : is_param(g->b, level, p) ? g->a : NULL;
      if (!t) continue;
      for (int i = 0; i < n; i++) {
        if (a[i].tx[p]) return -1;
        a[i].tx[p] = t;
        a[i].lv[p] = level;
      }
      return n;
    }
    return -1;
  case G_CONJ:
    for (uint32_t i = 0; i < g->n && n >= 0; i++) n = tpl_goals(g->kids[i], level, a, n);
    return n;
  case G_FRESH: return tpl_goals(g->body, g->n ? level + 1 : level, a, n);
  case G_CONDE: {
    tpl_alt in[TPL_MAXALTS], out[TPL_MAXALTS];
    memcpy(in, a, (size_t)n * sizeof *a);
    int m = 0;
    for (uint32_t k = 0; k < g->n; k++) {
      if (m + n > TPL_MAXALTS) return -1;
      memcpy(out + m, in, (size_t)n * sizeof *in);
      int got = tpl_goals(g->kids[k], level, out + m, n);
      if (got < 0) return -1;
      m += got;
    }
    memcpy(a, out, (size_t)m * sizeof *a);
    return m;
  }
  default: return -1;
  }
}

/* The variable index of a fresh variable (frame, slot), -1 for a
 * parameter or when there are too many. */
static int tpl_var(tpl_ctx *x, int frame, uint32_t slot) {
  if (frame <= 0 || slot > 0xffff) return -1;
  uint32_t key = (uint32_t)frame << 16 | slot;
  for (int i = 0; i < x->nvars; i++)
    if (x->key[i] == key) return i;
  if (x->nvars == TPL_MAXVARS) return -1;
  x->key[x->nvars] = key;
  return x->nvars++;
}

static pat *tpl_pat(tpl_ctx *x, const rgk_tx *t, int level);

/* The head of template list t: an op, or an op variable. */
static bool tpl_head(tpl_ctx *x, const rgk_tx *h, int level, pat *p) {
  if (h->op == TX_LOCAL) {
    int v = tpl_var(x, level - (int)h->depth, h->idx);
    if (v < 0) return false;
    x->seen |= 1u << v;
    x->opvars |= 1u << v;
    p->opv = true;
    p->var = v;
    p->code = RG_OP_COUNT;
    return true;
  }
  if (h->op != TX_CONST || (rg_kind_of(h->k) != RG_K_SYMBOL && !rg_is_pair(h->k)) || has_pvar(h->k)) return false;
  const rg_op *op = rg_graph_op_of(x->eg->C, h->k);
  if (!op) {
    rg_clear_error(x->eg->C); /* not an op: the interpreter keeps it */
    return false;
  }
  if (term_is_nth(op, 0)) return false;
  p->head = eg_intern_op(x->eg, op, 0);
  p->code = op->code;
  return true;
}

static pat *tpl_pat(tpl_ctx *x, const rgk_tx *t, int level) {
  pat *p = rg_gc_alloc(sizeof *p);
  if (t->op == TX_LOCAL) {
    int v = tpl_var(x, level - (int)t->depth, t->idx);
    if (v < 0 || (x->seen >> v & 1)) return NULL;
    x->seen |= 1u << v;
    x->argvars |= 1u << v;
    p->kind = P_VAR;
    p->var = v;
    return p;
  }
  if (t->op != TX_CONS) return NULL;
  p->kind = P_OP;
  if (!tpl_head(x, t->a, level, p)) return NULL;
  const rgk_tx *l = t->b;
  for (; l && l->op == TX_CONS; l = l->b) p->nch++;
  if (!l || l->op != TX_CONST || l->k != RG_NIL) return NULL;
  p->ch = rg_gc_alloc((size_t)(p->nch ? p->nch : 1) * sizeof *p->ch);
  l = t->b;
  for (int i = 0; i < p->nch; i++, l = l->b)
    if (!(p->ch[i] = tpl_pat(x, l->a, level))) return NULL;
  op_shape(p);
  return p;
}

/* Compiles relational rule r's templates into r->tpl when it has them. */
static void compile_templates(rg_egraph *eg, eg_rule *r) {
  bool sw;
  const rgk_lambda *lam = worker_lambda(r->rel, &sw);
  tpl_alt a[TPL_MAXALTS] = {{{NULL, NULL}, {0, 0}}};
  int n = lam ? tpl_goals(lam->body, 0, a, 1) : -1;
  if (n <= 0) return;
  tpl_ctx x = {.eg = eg};
  pat **p = rg_gc_alloc((size_t)(2 * n) * sizeof *p);
  for (int i = 0; i < n; i++) {
    uint32_t vars[2];
    for (int d = 0; d < 2; d++) {
      x.seen = 0;
      int k = sw ? 1 - d : d;
      if (!a[i].tx[k] || !(p[2 * i + d] = tpl_pat(&x, a[i].tx[k], a[i].lv[k])) || p[2 * i + d]->kind != P_OP)
        return;
      vars[d] = x.seen;
    }
    if (vars[0] != vars[1]) return;
  }
  if (x.opvars & x.argvars) return;
  r->tterm = rg_gc_alloc((size_t)(2 * n) * sizeof *r->tterm);
  for (int k = 0; k < 2 * n; k++) r->tterm[k] = compile_term(p[k]);
  r->tpl = p;
  r->ntpl = n;
  r->nvars = x.nvars;
}

static bool by_templates(const eg_rule *r, const rg_search_opts *o) {
  if (!r->tpl || o->interpret_relations || r->ntpl > o->rel_answers) return false;
  for (int i = 0; i < 2 * r->ntpl; i++)
    if (r->tpl[i]->depth > o->rel_depth) return false;
  return true;
}

/* A match of template k (pair k / 2, direction k % 2: 1 backwards)
 * records its root's class, k, then the bindings. */
static void search_templates(rg_egraph *eg, eg_rule *r, int64_t limit) {
  uint32_t binds[TPL_MAXVARS];
  /* templates are linear: tpl_pat refuses a variable seen twice */
  matcher m = {.eg = eg, .r = r, .binds = binds, .limit = limit, .since = r->since, .by_node = true,
               .linear = true, .tagged = true};
  for (int k = 0; k < 2 * r->ntpl; k++) {
    for (int i = 0; i < r->nvars; i++) binds[i] = EG_NONE;
    const pat *lhs = r->tpl[k];
    m.tag = (uint32_t)k;
    for (int c = 0; c < RG_OP_COUNT; c++) {
      if (lhs->code != RG_OP_COUNT ? c != (int)lhs->code : !r->track_all && !(r->tracks[c / 64] >> (c % 64) & 1))
        continue;
      if (!match_roots(&m, lhs, &eg->byop[c], true)) goto cut;
    }
  }
cut:
  r->nmatches = m.count;
}

/* Template k's matches i .. j - 1 (of `stride` ids each), one by one:
 * an ill-typed result is no answer, as for a relation's. */
static int apply_template_matches(rg_egraph *eg, eg_rule *r, uint32_t k, size_t i, size_t j, size_t stride) {
  for (; i < j && !out_of_time(eg, r, i); i++) {
    const uint32_t *mi = r->m.v + i * stride;
    if (r->tterm[k] ? !eg_add_terms(eg, r->tterm[k], mi, 1, (uint32_t)stride, 2)
                    : instantiate(eg, r, r->tpl[k], mi + 2, RG_NIL, mi[0]) != EG_NONE)
      continue;
    if (rg_errcode(eg->C) == RG_ERR_NAME) return RG_ERR_NAME;
    rg_clear_error(eg->C);
  }
  return RG_OK;
}

/* Template k's match: its other side (k ^ 1) into the root's class.  The
 * matches of one template are consecutive (search_templates); a run
 * whose other side is a term is added in chunks, and one that meets an
 * error is done again one by one (adding a term twice changes nothing). */
static int apply_templates(rg_egraph *eg, eg_rule *r) {
  size_t stride = (size_t)r->nvars + 2, n = r->m.n / stride;
  for (size_t i = 0, j; i < n; i = j) {
    uint32_t k = r->m.v[i * stride + 1] ^ 1;
    j = i + 1;
    while (j < n && (r->m.v[j * stride + 1] ^ 1) == k) j++;
    int rc = RG_OK;
    for (size_t c = i; r->tterm[k] && c < j && !rc && !out_of_time(eg, r, 0); c += TERM_CHUNK)
      rc = eg_add_terms(eg, r->tterm[k], r->m.v + c * stride, (uint32_t)(j - c < TERM_CHUNK ? j - c : TERM_CHUNK),
                        (uint32_t)stride, 2);
    if (rc == RG_ERR_NAME) return rc;
    if (rc) rg_clear_error(eg->C);
    if ((rc || !r->tterm[k]) && (rc = apply_template_matches(eg, r, k, i, j, stride))) return rc;
  }
  return RG_OK;
}

/* Runs the relation both ways on the terms of e-node id not run before,
 * each direction's terms built as deep as that direction reads (sh). */
static int search_node_rel(rg_egraph *eg, eg_rule *r, uint32_t id, const rg_search_opts *o,
                           const rshape *sh) {
  uint32_t c = eg_find(eg, eg->nodes[id].cls);
  int n = (int)eg->nodes[id].nch, kd[n ? n : 1];
  for (int dir = 0; dir < 2; dir++) {
    for (int i = 0; i < n; i++)
      kd[i] = sh[dir].n < 0 ? o->rel_depth - 1 : sh[dir].n != n ? 0 : sh[dir].d[i];
    alts ts;
    alts_init(&ts);
    node_terms_d(eg, id, kd, o->rel_terms, &ts, r, dir ? 0x2b : 0x1f);
    for (int i = 0; i < ts.n; i++) {
      int rc = run_relation(eg, r, dir, id, c, ts.v[i].t, o->rel_answers);
      if (rc) return rc;
    }
  }
  return RG_OK;
}

/* Whether the terms of e-node id to `depth` may differ from those at the
 * rule's last applied search: the node is new, or a class they are built
 * from (depth - 1 steps below a child) got a node or merged since. */
static bool rel_dirty(const rg_egraph *eg, uint32_t id, int depth, uint32_t since) {
  const eg_node *x = &eg->nodes[id];
  if (x->iter >= since) return true;
  const uint32_t *k = eg_kids(eg, id);
  for (uint32_t i = 0; i < x->nch; i++)
    if (eg_level(eg, eg_find(eg, k[i]), depth - 1) >= since) return true;
  return false;
}

static int search_relation(rg_egraph *eg, eg_rule *r, const rg_search_opts *o, int64_t limit) {
  if ((r->templated = by_templates(r, o))) {
    search_templates(eg, r, limit);
    return RG_OK;
  }
  uint32_t n = eg->nnodes;
  rshape sh[2] = {relation_shape(r->rel, 0, o->rel_depth - 1), relation_shape(r->rel, 1, o->rel_depth - 1)};
  for (uint32_t id = 0; id < n && r->nmatches <= limit; id++) {
    const eg_node *x = &eg->nodes[id];
    if (x->dead || !tracks_head(r, &eg->heads[x->head])) continue;
    if (out_of_time(eg, r, 0)) break;
    /* answers wait as words and add nothing yet: once they could reach
     * the node limit, applying them will stop there, so search no more */
    if (eg->node_cap > 0 && (int64_t)(eg->nmemo + r->astart.n) >= eg->node_cap) break;
    if (r->since && !rel_dirty(eg, id, o->rel_depth, r->since)) continue;
    int rc = search_node_rel(eg, r, id, o, sh);
    if (rc) return rc;
  }
  return RG_OK;
}

/* An answer term as a class: graph variables are classes (added when
 * new), numbers literal constants, (op arg ...) e-nodes; EG_NONE when it
 * does not evaluate (unbound variables, a type error).  With `into`, an
 * (op arg ...) answer goes straight into (or is merged with) that class. */
static uint32_t term_class(rg_egraph *eg, rg_term t, uint32_t into) {
  rg_variable *v = rg_term_var(t);
  if (v) return eg_add_var(eg, v);
  rg_kind k = rg_kind_of(t);
  if (k == RG_K_INT || k == RG_K_FLOAT || k == RG_K_BOOL) return eg_add_var(eg, rg_term_to_variable(eg->C, t));
  const rg_op *op;
  int out;
  rg_term a;
  if (!op_term(eg, t, &op, &out, &a)) return EG_NONE;
  int n = (int)rg_list_length(a);
  if (n < 0) return EG_NONE;
  uint32_t ch[n > 0 ? n : 1];
  for (int i = 0; i < n; i++, a = rg_cdr(a))
    if ((ch[i] = term_class(eg, rg_car(a), EG_NONE)) == EG_NONE) return EG_NONE;
  uint32_t head = eg_intern_op(eg, op, out);
  return into == EG_NONE ? eg_add(eg, head, n, ch) : eg_add_into(eg, head, n, ch, into);
}

/* The class of the answer whose tokens start at *p (advanced past what
 * was read), as term_class makes it. */
static uint32_t answer_class(rg_egraph *eg, const uint32_t **p, uint32_t into) {
  uint32_t tok = *(*p)++;
  if (!(tok & 1)) return eg_find_compress(eg, tok >> 1);
  uint32_t n = *(*p)++, ch[n ? n : 1];
  for (uint32_t i = 0; i < n; i++)
    if ((ch[i] = answer_class(eg, p, EG_NONE)) == EG_NONE) return EG_NONE;
  return into == EG_NONE ? eg_add(eg, tok >> 1, (int)n, ch) : eg_add_into(eg, tok >> 1, (int)n, ch, into);
}

/* Adds answer a (tokens from `at`, or the term t) and merges it with
 * class c. */
static int apply_answer(rg_egraph *eg, uint32_t c, const uint32_t *at, rg_term t) {
  uint32_t a = at ? answer_class(eg, &at, c) : term_class(eg, t, c);
  if (a == EG_NONE && rg_errcode(eg->C) == RG_ERR_NAME) return RG_ERR_NAME;
  if (a == EG_NONE) rg_clear_error(eg->C);
  else eg_union(eg, c, a);
  return RG_OK;
}

static int apply_relation(rg_egraph *eg, eg_rule *r) {
  if (r->templated) return apply_templates(eg, r);
  rg_term l = r->mterms;
  size_t done = 0;
  for (uint32_t k = r->astart.n; k-- > 0;) {
    if (out_of_time(eg, r, ++done)) return RG_OK; /* the node limit stops here, as for patterns */
    const uint32_t *rec = r->ans.v + r->astart.v[k];
    if (rec[1]) {
      if (apply_answer(eg, rec[0], rec + 2, RG_NIL)) return RG_ERR_NAME;
      continue;
    }
    if (!rg_is_pair(l)) break;
    if (apply_answer(eg, (uint32_t)rg_int_value(rg_car(rg_car(l))), NULL, rg_cdr(rg_car(l)))) return RG_ERR_NAME;
    l = rg_cdr(l);
  }
  for (; rg_is_pair(l); l = rg_cdr(l)) /* native rules' (class . variable) */
    if (apply_answer(eg, (uint32_t)rg_int_value(rg_car(rg_car(l))), NULL, rg_cdr(rg_car(l)))) return RG_ERR_NAME;
  return RG_OK;
}

/* ------------------------------------------------------------------ rules written in C */

/* Whether a child of e-node id is the e-node's own class (after x + 0 = x,
 * the class of x holds x + 0 itself). */
static bool self_loop(const rg_egraph *eg, uint32_t id) {
  const eg_node *x = &eg->nodes[id];
  uint32_t c = eg_find(eg, x->cls);
  const uint32_t *k = eg_kids(eg, id);
  for (uint32_t i = 0; i < x->nch; i++)
    if (eg_find(eg, k[i]) == c) return true;
  return false;
}

/* A node rewriter (rg_node_rewriter) as an equality: tried on each e-node
 * it tracks, as graph nodes whose inputs are the e-nodes of its children's
 * classes (each built over representatives; at most NATIVE_ALTS per child
 * and the search's rel_terms combinations per e-node, each combination
 * once, as relations' terms are), so that one rule can see what another
 * made (dot -> gemv, then add(gemv, b) -> gemv).  A replacement of the
 * e-node's output is added and merged with its class.  E-nodes that are
 * their own child are not tried, and e-nodes on a cycle of classes are not
 * offered as a child's alternatives: a rule that looks into its inputs'
 * nodes (flattening x + (y + 0), or y * x where x = (x * 0.5) * 2) would
 * otherwise make a longer term of the same class on every iteration, and
 * the term through the cycle says nothing the class's other e-nodes do
 * not.  The rewriter sees a run with the context and
 * the search's fold, no graph: what it may read of a run.  Matches go to
 * mterms as (class . variable), applied like a relation's answers. */
#define NATIVE_ALTS 8

typedef struct native_alts { rg_variable *v[NATIVE_ALTS]; uint64_t h[NATIVE_ALTS]; int n; } native_alts;

/* The variables of class c's e-nodes (its representative first; not those
 * on a cycle, whose terms only grow: x * 1 * 1 ...). */
static void class_vars(rg_egraph *eg, uint32_t c, native_alts *a) {
  c = eg_find(eg, c);
  a->n = 0;
  rg_variable *rep = eg_rep(eg, c);
  if (rep) {
    a->v[0] = rep;
    a->h[a->n++] = rep_hash(rep);
  }
  /* a class known to be a constant is that constant: rules that hold only
   * for some values (x / x = 1) see which */
  if (rep && eg->cls[c].konst) return;
  const eg_ids *ns = &eg->cls[c].nodes;
  for (uint32_t i = 0; i < ns->n && a->n < NATIVE_ALTS; i++) {
    uint32_t m = ns->v[i];
    const eg_head *h = &eg->heads[eg->nodes[m].head];
    if (eg->nodes[m].dead || eg_on_cycle(eg, m)) continue;
    rg_node *node = h->leaf ? NULL : eg_rep_node(eg, m);
    rg_variable *v = h->leaf ? h->leaf : node ? node->outputs[h->out] : NULL;
    if (!v || v == rep) continue;
    a->v[a->n] = v;
    a->h[a->n++] = hmix(0xe40de, m);
  }
}

/* Runs the rule on node (e-node id's op over one combination); a match
 * goes to mterms. */
static int try_native(rg_egraph *eg, eg_rule *r, rg_rewrite_run *run, uint32_t id, rg_node *node) {
  const eg_node *x = &eg->nodes[id];
  int k = eg->heads[x->head].out;
  if (node->op->code == RG_OP_OPAQUE && !rgr_tracks(r->rw, node)) return RG_OK;
  rg_variable *out[node->nout];
  memset(out, 0, sizeof out);
  int rc = r->rw->nfn(run, node, out, r->rw->ud);
  if (rc < 0 && rg_errcode(eg->C) == RG_ERR_NAME) return rc;
  rg_clear_error(eg->C);
  if (rc != 1 || !out[k] || out[k] == node->outputs[k]) return RG_OK;
  r->mterms = rg_cons(rg_cons(rg_int(eg_find(eg, x->cls)), rg_var_term(out[k])), r->mterms);
  r->nmatches++;
  return RG_OK;
}

static int search_node_native(rg_egraph *eg, eg_rule *r, rg_rewrite_run *run, uint32_t id, int cap) {
  const eg_node *x = &eg->nodes[id];
  const eg_head *h = &eg->heads[x->head];
  int n = (int)x->nch;
  native_alts kids[n ? n : 1];
  for (int i = 0; i < n; i++) {
    class_vars(eg, eg_kids(eg, id)[i], &kids[i]);
    if (!kids[i].n) return RG_OK;
  }
  int idx[n ? n : 1];
  memset(idx, 0, sizeof idx);
  rg_variable *in[n ? n : 1];
  for (int made = 0; made < cap; made++) {
    uint64_t hh = hmix(0x4a71e, id);
    for (int i = 0; i < n; i++) hh = hmix(hh, kids[i].h[idx[i]]);
    if (seen_add(r, hh)) {
      for (int i = 0; i < n; i++) in[i] = kids[i].v[idx[i]];
      rg_node *node = rg_make_node(eg->C, h->op, n, in);
      if (!node || h->out >= node->nout) rg_clear_error(eg->C);
      else if (try_native(eg, r, run, id, node) != RG_OK) return rg_errcode(eg->C);
    }
    int i = n - 1;
    while (i >= 0 && ++idx[i] == kids[i].n) idx[i--] = 0;
    if (i < 0) break;
  }
  return RG_OK;
}

static int search_native(rg_egraph *eg, eg_rule *r, const rg_search_opts *o, int64_t limit) {
  rg_rewrite_run run = {.C = eg->C, .opts = {.fold = o->fold}};
  uint32_t n = eg->nnodes;
  for (uint32_t id = 0; id < n && r->nmatches <= limit; id++) {
    const eg_node *x = &eg->nodes[id];
    if (x->dead || !tracks_head(r, &eg->heads[x->head])) continue;
    if (out_of_time(eg, r, 0)) break;
    /* answers wait as words and add nothing yet: once they could reach
     * the node limit, applying them will stop there, so search no more */
    if (eg->node_cap > 0 && (int64_t)(eg->nmemo + r->astart.n) >= eg->node_cap) break;
    if (r->since && !rel_dirty(eg, id, o->rel_depth, r->since)) continue;
    if (self_loop(eg, id)) continue;
    int rc = search_node_native(eg, r, &run, id, o->rel_terms);
    if (rc) return rc;
  }
  return RG_OK;
}

static eg_rule *rule_new(const char *name, int kind);

static eg_rule *native_rule(rg_rewriter *rw) {
  eg_rule *r = rule_new(rw->name, R_NATIVE);
  r->rw = rw;
  rgr_refresh_tracks(rw);
  r->track_all = rw->track_all;
  memcpy(r->tracks, rw->tracks, sizeof r->tracks);
  return r;
}

/* ------------------------------------------------------------------ rules from a selection */

static eg_rule *rule_new(const char *name, int kind) {
  eg_rule *r = rg_gc_alloc(sizeof *r);
  r->name = name;
  r->kind = kind;
  r->vars = RG_NIL;
  r->mterms = RG_NIL;
  return r;
}

static eg_rule *pattern_rule(rg_egraph *eg, rg_rewriter *rw, const rgr_rule_parts *pp) {
  eg_rule *r = rule_new(rw->name, R_PATTERN);
  if (!(r->lhs = compile(eg, r, pp->from, false)) || !(r->rhs = compile(eg, r, pp->to, true)))
    return NULL;
  if (r->lhs->kind != P_OP) {
    rg_error(eg->C, RG_ERR_SYNTAX, "rule %s: the pattern must be an expression", r->name);
    return NULL;
  }
  r->term = compile_term(r->rhs);
  if (pp->guard) {
    r->guard = pp->guard;
    r->ngvars = (int)rg_list_length(pp->guard_vars);
    r->gvars = rg_gc_alloc((size_t)(r->ngvars + 1) * sizeof *r->gvars);
    int i = 0;
    for (rg_term l = pp->guard_vars; rg_is_pair(l); l = rg_cdr(l)) r->gvars[i++] = var_index(r, rg_car(l));
  }
  return r;
}

/* Whether rw's body is one call (REL p q) of its parameters (swapped
 * when `swapped`); sets *rel to REL's name. */
static bool one_call(const rg_rewriter *rw, bool swapped, rg_term *rel) {
  rg_term b = rw->rel_body, ps = rw->rel_params;
  if (!b || !ps || rg_list_length(b) != 1 || rg_list_length(rg_car(b)) != 3) return false;
  rg_term call = rg_car(b), p = rg_car(ps), q = rg_car(rg_cdr(ps));
  rg_term a1 = rg_car(rg_cdr(call)), a2 = rg_car(rg_cdr(rg_cdr(call)));
  *rel = rg_car(call);
  return swapped ? a1 == q && a2 == p : a1 == p && a2 == q;
}

/* Whether relational rule b is a's inverse (so that, run both ways, one
 * of them is enough). */
static bool inverse_pair(const rg_rewriter *a, const rg_rewriter *b) {
  rg_term ra, rb;
  return one_call(a, false, &ra) && one_call(b, true, &rb) && ra == rb;
}

static bool covered(rg_egraph *eg, rg_rewriter *rw) {
  for (int i = 0; i < eg->nrules; i++) {
    eg_rule *r = eg->rules[i];
    if (r->kind != R_RELATION) continue;
    if (inverse_pair(r->rw, rw) || inverse_pair(rw, r->rw)) {
      r->name = rgr_sprintf("%s/%s", r->name, rw->name);
      return true;
    }
  }
  return false;
}

static eg_rule *make_rule(rg_egraph *eg, rg_rewriter *rw) {
  rgr_rule_parts pp;
  switch (rgr_rule_parts_of(rw, &pp)) {
  case RGR_RULE_PATTERN: return pattern_rule(eg, rw, &pp);
  case RGR_RULE_RELATION: {
    if (covered(eg, rw)) return NULL;
    eg_rule *r = rule_new(rw->name, R_RELATION);
    r->rw = rw;
    r->rel = rw->relation;
    r->track_all = !track_heads(r, 0) || !track_heads(r, 1);
    compile_templates(eg, r);
    return r;
  }
  case RGR_RULE_SUBST:
  case RGR_RULE_REMOVE: {
    eg_rule *r = rule_new(rw->name, pp.kind == RGR_RULE_SUBST ? R_SUBST : R_REMOVE);
    r->op_from = pp.op_from;
    r->op_to = pp.op_to;
    return r;
  }
  default:
    if (rw->kind == RW_NODE && rw->nfn) return native_rule(rw);
    eg->skipped++;
    return NULL;
  }
}

static int add_rule(rg_egraph *eg, rg_rewriter *rw) {
  eg_rule *r = make_rule(eg, rw);
  if (!r) return rg_errcode(eg->C) ? rg_errcode(eg->C) : 0;
  eg_rule **v = rg_gc_alloc((size_t)(eg->nrules + 1) * sizeof *v);
  if (eg->nrules) memcpy(v, eg->rules, (size_t)eg->nrules * sizeof *v);
  v[eg->nrules++] = r;
  eg->rules = v;
  return 1;
}

static int add_selection(rg_egraph *eg, const rgr_selection *sel) {
  int added = 0;
  for (int i = 0; i < sel->n; i++) {
    int rc = sel->items[i].sub ? add_selection(eg, sel->items[i].sub)
             : sel->items[i].rw->kind == RW_SELECTION ? add_selection(eg, sel->items[i].rw->sel)
                                                      : add_rule(eg, sel->items[i].rw);
    if (rc < 0) return rc;
    added += rc;
  }
  return added;
}

int rg_egraph_add_rules(rg_egraph *eg, rg_rewriter *selection) {
  if (selection->kind == RW_SELECTION) return add_selection(eg, selection->sel);
  return add_rule(eg, selection);
}

/* ------------------------------------------------------------------ the loop */

static rg_search_opts defaults(const rg_search_opts *o) {
  rg_search_opts d = o ? *o : (rg_search_opts){0};
  if (d.node_limit <= 0) d.node_limit = 100000;
  if (d.iter_limit <= 0) d.iter_limit = 30;
  if (d.time_limit <= 0) d.time_limit = 10;
  if (d.rel_depth <= 0) d.rel_depth = 2;
  if (d.rel_depth > RG_SEARCH_MAX_DEPTH) d.rel_depth = RG_SEARCH_MAX_DEPTH; /* terms are built recursively */
  if (d.rel_answers <= 0) d.rel_answers = 8;
  if (d.rel_terms <= 0) d.rel_terms = 256;
  if (d.match_limit <= 0) d.match_limit = 1000;
  if (d.ban_length <= 0) d.ban_length = 5;
  return d;
}

static void clear_matches(eg_rule *r) {
  r->m.n = r->ans.n = r->astart.n = 0;
  r->mterms = RG_NIL;
  r->nmatches = 0;
}

static int search_rule(rg_egraph *eg, eg_rule *r, const rg_search_opts *o, int64_t limit) {
  clear_matches(r);
  r->searched = eg->iter;
  r->to_apply = true;
  switch (r->kind) {
  case R_PATTERN: search_pattern(eg, r, limit); return RG_OK;
  case R_RELATION: return search_relation(eg, r, o, limit);
  case R_NATIVE: return search_native(eg, r, o, limit);
  default: search_op(eg, r, limit); return RG_OK;
  }
}

static int apply_rule(rg_egraph *eg, eg_rule *r) {
  eg->cur_rule = r->name;
  int rc = r->kind == R_PATTERN                               ? apply_pattern(eg, r)
           : r->kind == R_RELATION || r->kind == R_NATIVE ? apply_relation(eg, r)
                                                          : apply_op(eg, r);
  if (!rc && r->to_apply) r->since = r->searched;
  r->to_apply = false;
  clear_matches(r);
  return rc;
}

/* The backoff scheduler's limit for r, or no limit. */
static int64_t match_limit(const rg_search_opts *o, const eg_rule *r) {
  if (o->no_backoff) return INT64_MAX / 2;
  return (int64_t)o->match_limit << (r->times_banned < 20 ? r->times_banned : 20);
}

static void ban(rg_egraph *eg, eg_rule *r, const rg_search_opts *o, const char **banned) {
  uint32_t len = (uint32_t)o->ban_length << (r->times_banned < 20 ? r->times_banned : 20);
  r->banned_until = eg->iter + len;
  r->times_banned++;
  r->to_apply = false;
  clear_matches(r);
  *banned = rgr_sprintf("%s%s%s", *banned ? *banned : "", *banned ? ", " : "", r->name);
}

/* Ends a run of the search; the context's scratch stacks let go of its
 * terms (they would keep the e-graph's graphs alive after it is dropped). */
static rg_search_stop stop(rg_egraph *eg, rg_search_stop s, const char *msg) {
  eg->stop = s;
  eg->stop_msg = msg;
  rg_ctx_release_scratch(eg->C);
  return s;
}

static rg_search_stop error_stop(rg_egraph *eg, const char *rule) {
  return stop(eg, RG_SEARCH_ERROR, rgr_sprintf("error in %s: %s", rule, rg_errmsg(eg->C)));
}

static void record_iter(rg_egraph *eg, size_t matches, double t0, const char *banned) {
  eg_iter *v = rg_gc_alloc((size_t)(eg->niters + 1) * sizeof *v);
  if (eg->niters) memcpy(v, eg->iters, (size_t)eg->niters * sizeof *v);
  v[eg->niters++] = (eg_iter){eg->nmemo, eg->nlive, matches, rgr_now() - t0, banned};
  eg->iters = v;
}

typedef struct run_state {
  const rg_search_opts *o;
  double start;
  rg_search_stop s;
  const char *msg;
} run_state;

static bool over_limits(rg_egraph *eg, run_state *st) {
  if ((int64_t)eg->nmemo >= st->o->node_limit) {
    st->s = RG_SEARCH_NODE_LIMIT;
    /* the count now: the rebuild that ends the iteration may merge some */
    st->msg = rgr_sprintf("node limit %lld reached in iteration %u (%zu e-nodes before its rebuild)",
                          (long long)st->o->node_limit, eg->iter, eg->nmemo);
    return true;
  }
  if (eg->late || rgr_now() - st->start > st->o->time_limit) {
    st->s = RG_SEARCH_TIME_LIMIT;
    st->msg = rgr_sprintf("time limit %g s reached in iteration %u", st->o->time_limit, eg->iter);
    return true;
  }
  return false;
}

/* One iteration: search every rule not banned, apply, rebuild.  Returns
 * RG_OK or an error; *matches counts what was applied. */
/* The level stamps the rules' semi-naive checks read. */
static int levels_needed(const rg_egraph *eg, const rg_search_opts *o) {
  int d = 0;
  for (int i = 0; i < eg->nrules; i++) {
    const eg_rule *r = eg->rules[i];
    int need = r->kind == R_PATTERN                               ? r->lhs->depth - 1
               : r->kind == R_RELATION || r->kind == R_NATIVE ? o->rel_depth - 1
                                                              : 0;
    if (need > d) d = need;
  }
  return d;
}

static int iteration(rg_egraph *eg, run_state *st, size_t *matches, const char **banned) {
  const rg_search_opts *o = st->o;
  eg_stamp_levels(eg, levels_needed(eg, o));
  for (int i = 0; i < eg->nrules; i++)
    if (eg->rules[i]->kind == R_NATIVE && eg->rules[i]->banned_until <= eg->iter) {
      eg_mark_cycles(eg); /* class_vars's alternatives */
      break;
    }
  for (int i = 0; i < eg->nrules; i++) {
    eg_rule *r = eg->rules[i];
    if (r->banned_until > eg->iter) continue;
    int64_t lim = match_limit(o, r);
    int rc = search_rule(eg, r, o, lim);
    if (rc) return eg->cur_rule = r->name, rc;
    if (r->nmatches > lim) ban(eg, r, o, banned);
    *matches += (size_t)r->nmatches;
    if (over_limits(eg, st)) break;
  }
  eg->nlvl = 0; /* the stamps go stale as matches apply */
  for (int i = 0; i < eg->nrules && !st->msg; i++) {
    int rc = apply_rule(eg, eg->rules[i]);
    if (rc) return rc;
    over_limits(eg, st);
  }
  for (int i = 0; i < eg->nrules; i++) {
    clear_matches(eg->rules[i]);
    eg->rules[i]->to_apply = false;
  }
  eg_rebuild(eg);
  return RG_OK;
}

static bool lift_bans(rg_egraph *eg) {
  bool any = false;
  for (int i = 0; i < eg->nrules; i++)
    if (eg->rules[i]->banned_until > eg->iter) {
      eg->rules[i]->banned_until = 0;
      any = true;
    }
  return any;
}

rg_search_stop rg_egraph_run(rg_egraph *eg, const rg_search_opts *opts) {
  rg_search_opts o = defaults(opts);
  run_state st = {&o, rgr_now(), RG_SEARCH_SATURATED, NULL};
  eg->deadline = st.start + o.time_limit;
  eg->node_cap = o.node_limit;
  eg->late = false;
  for (int it = 0;; it++) {
    if (it >= o.iter_limit)
      return stop(eg, RG_SEARCH_ITER_LIMIT, rgr_sprintf("iteration limit %d reached", o.iter_limit));
    eg->iter++;
    size_t n0 = eg->nmemo, c0 = eg->nlive, matches = 0;
    double t0 = rgr_now();
    const char *banned = NULL;
    if (iteration(eg, &st, &matches, &banned)) return error_stop(eg, eg->cur_rule);
    record_iter(eg, matches, t0, banned);
    if (st.msg) return stop(eg, st.s, st.msg);
    if (eg->nmemo == n0 && eg->nlive == c0 && !lift_bans(eg))
      return stop(eg, RG_SEARCH_SATURATED, rgr_sprintf("saturated after %d iteration%s", it + 1, it ? "s" : ""));
  }
}

void eg_rules_free(rg_egraph *eg) {
  for (int i = 0; i < eg->nrules; i++) {
    eg_rule *r = eg->rules[i];
    free(r->m.v);
    free(r->ans.v);
    free(r->astart.v);
    r->m = r->ans = r->astart = (eg_ids){0};
  }
}

bool eg_rule_by_templates(const rg_egraph *eg, const char *name) {
  for (int i = 0; i < eg->nrules; i++)
    if (!strcmp(eg->rules[i]->name, name)) return eg->rules[i]->tpl != NULL;
  return false;
}

const char *rg_egraph_stop_message(const rg_egraph *eg) { return eg->stop_msg; }

/* The relational rules the last search ran as e-matching (`templated`)
 * or in the interpreter, as one line. */
static void trace_relations(const rg_egraph *eg, FILE *f, bool templated) {
  const char *sep = templated ? "relations run as e-matching: " : "relations run in the interpreter: ";
  for (int i = 0; i < eg->nrules; i++) {
    const eg_rule *r = eg->rules[i];
    if (r->kind != R_RELATION || r->templated != templated) continue;
    fprintf(f, "%s%s", sep, r->name);
    sep = ", ";
  }
  if (sep[0] == ',') fputc('\n', f);
}

void rg_egraph_trace(const rg_egraph *eg, FILE *f) {
  for (int i = 0; i < eg->niters; i++) {
    const eg_iter *t = &eg->iters[i];
    fprintf(f, "iteration %d: %zu e-nodes, %zu e-classes, %zu matches, %.6f s%s%s\n", i + 1,
            t->nodes, t->classes, t->matches, t->seconds, t->banned ? ", banned: " : "",
            t->banned ? t->banned : "");
  }
  trace_relations(eg, f, true);
  trace_relations(eg, f, false);
}
