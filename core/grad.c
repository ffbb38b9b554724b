/*
 * grad.c — symbolic reverse-mode differentiation (rg_grad), in the style
 * of Aesara's grad: the gradient is a graph built from each op's gradient
 * rule (grad-ops.c), so it is rewritten, compiled and run like any graph.
 *
 * The walk: the nodes between the roots (the cost, or variables whose
 * gradients are given) and the values treated as constants (leaves), in
 * topological order; a variable *depends* when it is a wrt or computed
 * from one (never through a constant).  A wrt is not a leaf: one computed
 * from another gets the paths through it too.  The cost's gradient is 1.  Going backwards, each node some
 * gradient reaches and some input of which depends gets its op's rule;
 * each contribution to an input is first fitted to the input's type (the
 * sum over broadcast dimensions, rg_grad_sum_to, then a cast), and a
 * variable's contributions are added when its own node is reached.  So a
 * value used twice gets the sum, every gradient has its input's dtype and
 * rank with the same broadcastable dimensions, and forward values are
 * shared with the forward graph, never recomputed.
 *
 * Integer and boolean variables get no gradient (disconnected), as in
 * Aesara; so does anything only reachable through them, except a float
 * value cast to an integer dtype whose integer result a rule takes a
 * gradient for (cast back to a float): Aesara's Cast gives such a float
 * input zeros, not "disconnected" (its gradient is 0 almost everywhere,
 * as floor's is).
 *
 * Branches.  The gradient reaching an ifelse's branch value counts only
 * when that branch was taken.  Rather than an ifelse of the gradient and
 * zeros at once, which every node below would read (so the lazy VM would
 * compute the forward values of the branch not taken for the rules that
 * multiply by them), a contribution carries a guard: (cond, branch), in
 * an outer guard when the ifelse sits in another's branch.  The rules are
 * linear in the output gradient, so a node whose output gradients share
 * one guard passes it on to its inputs' contributions.  A guard is
 * resolved into ifelse(cond, g, zeros) only where it must be: where
 * contributions under different guards (or none) meet, and at the wrt.
 * The gradient nodes of a branch then sit inside the branch of that
 * ifelse, and the lazy VM computes the gradient of the branch taken only.
 */
#include "core/core-impl.h"

typedef rg_variable *V;

/* A contribution counts only where `cond` took the branch `then` (true:
 * the then branch), and `outer` holds; NULL: everywhere. */
typedef struct guard {
  V cond;
  bool then;
  const struct guard *outer;
} guard;

/* One contribution to a variable's gradient, under its guard. */
typedef struct contrib {
  V g;
  const guard *gd;
} contrib;
RG_VEC(contrib_vec, contrib)
/* Contributions live in collected memory (rgk_gc): they hold variables.
 * `sum` (NULL until asked) is their total, under the guard `gd`. */
typedef struct acc { contrib_vec c; V sum; const guard *gd; } acc;

/* The walk's state.  Variables computed by a node of the walk have a slot
 * (first[k] + output index for the node at order[k], which carries the
 * mark base + k), so the hot path indexes arrays; other variables (the
 * leaves: wrt, constants, graph inputs) live in two maps.  A node's mark
 * counts only if order[mark - base] is that node, so a walk elsewhere that
 * reuses marks cannot mislead this one. */
typedef struct gwalk {
  rg_ctx *C;
  rg_node **order;
  size_t n;
  uint64_t base;
  size_t *first;    /* per node of the walk: its outputs' first slot */
  uint8_t *dep;     /* per slot: depends on a wrt */
  acc *accs;        /* per slot */
  rg_memo *leaf_dep, *leaf_acc, *consts;
} gwalk;

static long slot_of(const gwalk *w, const rg_variable *v) {
  const rg_node *o = v->owner;
  if (!o || o->mark - w->base >= w->n || w->order[o->mark - w->base] != o) return -1;
  return (long)(w->first[o->mark - w->base] + (size_t)v->index);
}

static bool depends(const gwalk *w, const rg_variable *v) {
  long s = slot_of(w, v);
  return s >= 0 ? w->dep[s] != 0 : rg_memo_get(w->leaf_dep, v) != NULL;
}

static void set_depends(gwalk *w, const rg_variable *v) {
  long s = slot_of(w, v);
  if (s >= 0) w->dep[s] = 1;
  else rg_memo_put(w->leaf_dep, v, (void *)1);
}

static acc *acc_of(gwalk *w, V x, bool make) {
  long s = slot_of(w, x);
  if (s >= 0) return &w->accs[s];
  acc *a = rg_memo_get(w->leaf_acc, x);
  if (!a && make) {
    a = rgk_alloc(sizeof *a);
    rg_memo_put(w->leaf_acc, x, a);
  }
  return a;
}

static void add_contrib(gwalk *w, V x, V g, const guard *gd) {
  acc *a = acc_of(w, x, true);
  if (!a->c.a) a->c.a = &rgk_gc;
  int rc = contrib_vec_push(&a->c, (contrib){g, gd});
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
  a->sum = NULL;
}

/* ------------------------------------------------------------------ guards */

static bool same_guard(const guard *a, const guard *b) {
  while (a != b) {
    if (!a || !b || a->cond != b->cond || a->then != b->then) return false;
    a = a->outer, b = b->outer;
  }
  return true;
}

static const guard *new_guard(V cond, bool then, const guard *outer) {
  guard *gd = rgk_alloc(sizeof *gd);
  *gd = (guard){cond, then, outer};
  return gd;
}

/* g where its guard holds, zeros of x's type elsewhere (NULL with an
 * error when an ifelse cannot be made). */
static V unguard(gwalk *w, V g, const guard *gd, V x) {
  for (; gd && g; gd = gd->outer) {
    V z = rgc_zeros_like(w->C, x);
    rg_node *n = gd->then ? rg_ifelse(gd->cond, 1, &g, &z) : rg_ifelse(gd->cond, 1, &z, &g);
    if (!n) rg_error(w->C, RG_ERR_TYPE, "grad: cannot select the gradient of a branch (%s)", rg_type_str(x->type));
    g = n ? n->outputs[0] : NULL;
  }
  return g;
}

/* The sum of x's contributions: under their guard when they share one,
 * else each guard's share resolved and all of them added. */
static void sum_up(gwalk *w, acc *a, V x) {
  size_t n = a->c.n;
  bool one = true;
  for (size_t i = 1; i < n && one; i++) one = same_guard(a->c.v[0].gd, a->c.v[i].gd);
  if (one) {
    V *g = rgk_alloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) g[i] = a->c.v[i].g;
    a->sum = n == 1 ? g[0] : rg_add_n((int)n, g);
    a->gd = a->c.v[0].gd;
    return;
  }
  V *terms = rgk_alloc(n * sizeof *terms), *part = rgk_alloc(n * sizeof *part);
  bool *done = rgk_alloc_atomic(n);
  memset(done, 0, n);
  int nt = 0;
  for (size_t i = 0; i < n; i++) { /* one resolved sum per guard */
    if (done[i]) continue;
    int np = 0;
    for (size_t j = i; j < n; j++)
      if (!done[j] && same_guard(a->c.v[i].gd, a->c.v[j].gd)) part[np++] = a->c.v[j].g, done[j] = true;
    terms[nt++] = unguard(w, np == 1 ? part[0] : rg_add_n(np, part), a->c.v[i].gd, x);
  }
  for (int i = 0; i < nt; i++)
    if (!terms[i]) return;
  a->sum = nt == 1 ? terms[0] : rg_add_n(nt, terms);
  a->gd = NULL;
}

/* The total gradient of x so far and its guard (NULL: none reached it,
 * or an error). */
static V total(gwalk *w, V x, const guard **gd) {
  acc *a = acc_of(w, x, false);
  *gd = NULL;
  if (!a || !a->c.n) return NULL;
  if (!a->sum) sum_up(w, a, x);
  *gd = a->gd;
  return a->sum;
}

/* Whether x has contributions (its total may still fail). */
static bool reached(gwalk *w, V x) {
  acc *a = acc_of(w, x, false);
  return a && a->c.n;
}

/* ------------------------------------------------------------------ fitting a gradient to its input */

V rg_grad_sum_to(V g, const rg_type *t) {
  if (!g || !t) return NULL;
  int gd = g->type->ndim, td = t->ndim, lead = gd - td;
  if (lead < 0) {
    rg_error(g->ctx, RG_ERR_TYPE, "grad_sum_to: a gradient of rank %d for a value of rank %d", gd, td);
    return NULL;
  }
  int64_t axes[RG_MAX_NDIM], order[RG_MAX_NDIM];
  int na = 0, k = 0;
  for (int d = 0; d < lead; d++) axes[na++] = d;
  bool bcast[RG_MAX_NDIM];
  for (int d = 0; d < td; d++) {
    int64_t gs = g->type->shape[lead + d], ts = t->shape[d];
    if (ts != 1 && gs != 1 && gs != RG_DIM_UNKNOWN && ts != RG_DIM_UNKNOWN && gs != ts) {
      rg_error(g->ctx, RG_ERR_TYPE, "grad_sum_to: a gradient of type %s is no broadcast of %s",
               rg_type_str(g->type), rg_type_str(t));
      return NULL;
    }
    bcast[d] = ts == 1 && gs != 1;
    if (bcast[d]) axes[na++] = lead + d;
  }
  if (!na) return g;
  V s = rg_sum(g, na, axes);
  bool any_b = false;
  for (int d = 0; d < td; d++) any_b |= bcast[d];
  if (!any_b) return s;
  for (int d = 0; d < td; d++) order[d] = bcast[d] ? -1 : k++;
  return rg_dimshuffle(s, td, order);
}

/* Sizes the input's type knows and the gradient's does not: a reshape to
 * the static shape states them (a view, no copy). */
static V fit_static_shape(rg_ctx *C, V g, const rg_type *t) {
  bool missing = false;
  for (int d = 0; d < t->ndim; d++)
    missing |= t->shape[d] != RG_DIM_UNKNOWN && g->type->shape[d] == RG_DIM_UNKNOWN;
  if (!missing) return g;
  bool all_known = true;
  for (int d = 0; d < t->ndim; d++) all_known &= t->shape[d] != RG_DIM_UNKNOWN;
  if (!all_known) return g;
  return rg_reshape_to(g, t->ndim, t->shape);
}

static V fit(gwalk *w, V g, const rg_variable *x) {
  const rg_type *t = x->type;
  if (g->type->ndim < t->ndim) {
    rg_error(w->C, RG_ERR_TYPE, "grad: a gradient of rank %d for a value of rank %d", g->type->ndim, t->ndim);
    return NULL;
  }
  V s = rg_grad_sum_to(g, t);
  if (s && s->type->dtype != t->dtype) s = rg_cast(s, t->dtype);
  return s ? fit_static_shape(w->C, s, t) : NULL;
}

/* ------------------------------------------------------------------ the walk */

/* Gives the walk's nodes their slots. */
static void number_nodes(gwalk *w) {
  w->base = rgc_new_epochs(w->n ? w->n : 1);
  w->first = rgk_alloc_atomic((w->n + 1) * sizeof *w->first);
  size_t slots = 0;
  for (size_t k = 0; k < w->n; k++) {
    w->order[k]->mark = w->base + k;
    w->first[k] = slots;
    slots += (size_t)w->order[k]->nout;
  }
  w->dep = rgk_alloc_atomic(slots + 1);
  memset(w->dep, 0, slots + 1);
  w->accs = rgk_alloc((slots + 1) * sizeof *w->accs);
}

static void mark_dependents(gwalk *w) {
  for (size_t k = 0; k < w->n; k++) {
    const rg_node *node = w->order[k];
    bool any = false;
    for (int i = 0; i < node->nin && !any; i++) any = depends(w, node->inputs[i]);
    if (!any) continue;
    for (int o = 0; o < node->nout; o++)
      if (!rg_memo_get(w->consts, node->outputs[o])) set_depends(w, node->outputs[o]);
  }
}

/* The gradients of a node's outputs, in og, under one guard (returned):
 * theirs when they share one, else none, each resolved.  Sets *any when
 * some gradient reaches the node; -1 on an error. */
static int output_grads(gwalk *w, const rg_node *node, V *og, const guard **common, bool *any) {
  const guard *gd[node->nout > 0 ? node->nout : 1];
  bool one = true, first = true;
  *common = NULL;
  *any = false;
  for (int o = 0; o < node->nout; o++) {
    bool r = reached(w, node->outputs[o]);
    og[o] = total(w, node->outputs[o], &gd[o]);
    if (r && !og[o]) return -1;
    if (!og[o]) continue;
    if (!first) one &= same_guard(*common, gd[o]);
    *common = first ? gd[o] : *common;
    first = false;
    *any = true;
  }
  if (one) return 0;
  *common = NULL;
  for (int o = 0; o < node->nout; o++)
    if (og[o] && gd[o] && !(og[o] = unguard(w, og[o], gd[o], node->outputs[o]))) return -1;
  return 0;
}

/* The guard of input i's contribution: the node's, or for an ifelse's
 * branch values the branch's within it. */
static const guard *input_guard(const rg_node *node, int i, const guard *gd, const guard *branch[2]) {
  if (node->op->code != RG_OP_IFELSE || i == 0) return gd;
  return branch[i <= node->nout ? 0 : 1];
}

/* The float value integer value v is a cast of, or NULL. */
static V cast_from_float(V v) {
  const rg_node *c = v->owner;
  return c && c->op->code == RG_OP_CAST && rg_dtype_is_float(c->inputs[0]->type->dtype) ? c->inputs[0] : NULL;
}

static int back_through(gwalk *w, const rg_node *node) {
  V og[node->nout > 0 ? node->nout : 1];
  const guard *gd;
  bool any;
  if (output_grads(w, node, og, &gd, &any)) return RG_ERR_TYPE;
  bool needed = false;
  for (int i = 0; i < node->nin && !needed; i++) needed = depends(w, node->inputs[i]);
  if (!any || !needed) return RG_OK;
  V ig[node->nin > 0 ? node->nin : 1];
  bool need[node->nin > 0 ? node->nin : 1];
  memset(ig, 0, sizeof ig);
  for (int i = 0; i < node->nin; i++) need[i] = depends(w, node->inputs[i]);
  int rc = node->op->cls->grad(w->C, node, og, ig, need);
  if (rc != RG_OK) return rc;
  const guard *branch[2] = {NULL, NULL};
  if (node->op->code == RG_OP_IFELSE)
    branch[0] = new_guard(node->inputs[0], true, gd), branch[1] = new_guard(node->inputs[0], false, gd);
  for (int i = 0; i < node->nin; i++) {
    V x = node->inputs[i];
    if (ig[i] && depends(w, x) && !rg_dtype_is_float(x->type->dtype)) x = cast_from_float(x);
    if (!ig[i] || !x || !depends(w, x) || !rg_dtype_is_float(x->type->dtype)) continue;
    if (x != node->inputs[i]) ig[i] = rg_second(x, rg_constant_scalar(w->C, x->type->dtype, 0));
    V g = fit(w, ig[i], x);
    if (!g) {
      if (!rg_errmsg(w->C)[0])
        rg_error(w->C, RG_ERR_TYPE, "grad: the gradient rule of %s failed for input %d", rg_op_name(node->op), i);
      return RG_ERR_TYPE;
    }
    add_contrib(w, x, g, input_guard(node, i, gd, branch));
  }
  return RG_OK;
}

static const char *var_label(const rg_variable *v, int i) {
  return v->name ? rgk_sprintf("'%s'", v->name) : rgk_sprintf("wrt %d", i);
}

/* A given gradient fits its variable: the same rank, the same sizes
 * where both know them (the dtype is cast). */
static bool grad_fits(const rg_type *g, const rg_type *t) {
  if (g->ndim != t->ndim) return false;
  for (int d = 0; d < t->ndim; d++)
    if (g->shape[d] >= 0 && t->shape[d] >= 0 && g->shape[d] != t->shape[d]) return false;
  return true;
}

static int check_args(rg_ctx *C, V cost, int nwrt, V const *wrt, const rg_grad_opts *o) {
  if (!cost && (!o || o->nknown <= 0)) return rg_error_null(C, "grad: no cost and no known gradients");
  if (cost && cost->type->ndim != 0)
    return rg_error(C, RG_ERR_TYPE, "grad: the cost must be a scalar, got %s", rg_type_str(cost->type));
  if (cost && !rg_dtype_is_float(cost->type->dtype))
    return rg_error(C, RG_ERR_TYPE, "grad: the cost must be a float, got %s", rg_type_str(cost->type));
  if (o && (o->disconnected < RG_GRAD_DISCONNECTED_RAISE || o->disconnected > RG_GRAD_DISCONNECTED_NULL))
    return rg_error(C, RG_ERR_TYPE, "grad: disconnected is %d, not one of RG_GRAD_DISCONNECTED_RAISE, _ZERO "
                    "or _NULL", o->disconnected);
  if (nwrt < 0) return rg_error(C, RG_ERR_TYPE, "grad: a negative count of wrt (%d)", nwrt);
  if (nwrt > 0 && !wrt) return rg_error(C, RG_ERR_TYPE, "grad: %d wrt and no list of them", nwrt);
  for (int i = 0; i < nwrt; i++)
    if (!wrt[i]) return rg_error_null(C, "grad: wrt %d is NULL", i);
  if (o && o->nconsts > 0 && !o->consts) return rg_error(C, RG_ERR_TYPE, "grad: %d constants and no list of them", o->nconsts);
  for (int i = 0; o && i < o->nconsts; i++)
    if (!o->consts[i]) return rg_error_null(C, "grad: constant %d is NULL", i);
  if (o && o->nknown > 0 && !o->known) return rg_error(C, RG_ERR_TYPE, "grad: %d known variables and no list of them", o->nknown);
  for (int i = 0; o && i < o->nknown; i++) {
    if (!o->known[i]) return rg_error_null(C, "grad: known variable %d is NULL", i);
    const rg_variable *g = o->known_grads ? o->known_grads[i] : NULL;
    if (g && !grad_fits(g->type, o->known[i]->type))
      return rg_error(C, RG_ERR_TYPE, "grad: the known gradient of %s is %s, the variable is %s",
                      o->known[i]->name ? rgk_sprintf("'%s'", o->known[i]->name) : rgk_sprintf("known variable %d", i),
                      rg_type_str(g->type), rg_type_str(o->known[i]->type));
  }
  return RG_OK;
}

/* The roots and the leaves of the walk.  Only the constants are leaves:
 * a wrt computed from another wrt gets the paths through it too (the
 * total derivative, as Aesara's grad gives), so the walk goes on past
 * every wrt; nodes no wrt reaches cost one look each. */
static rg_node **walk_order(gwalk *w, V cost, const rg_grad_opts *o, size_t *n) {
  int nk = o ? o->nknown : 0, nc = o ? o->nconsts : 0;
  V *roots = rgk_alloc((size_t)(nk + 1) * sizeof *roots), *leaves = rgk_alloc((size_t)(nc + 1) * sizeof *leaves);
  int nr = 0, nl = 0;
  if (cost) roots[nr++] = cost;
  for (int i = 0; i < nk; i++) roots[nr++] = o->known[i];
  for (int i = 0; i < nc; i++) {
    leaves[nl++] = o->consts[i];
    rg_memo_put(w->consts, o->consts[i], (void *)1);
  }
  return rg_toposort(nl, leaves, nr, roots, n);
}

static void seed(gwalk *w, V cost, const rg_grad_opts *o) {
  if (cost && depends(w, cost)) add_contrib(w, cost, rg_constant_scalar(w->C, cost->type->dtype, 1), NULL);
  for (int i = 0; o && i < o->nknown; i++) {
    V x = o->known[i], g = o->known_grads ? o->known_grads[i] : NULL;
    if (g && depends(w, x) && rg_dtype_is_float(x->type->dtype)) add_contrib(w, x, fit(w, g, x), NULL);
  }
}

static int result(gwalk *w, int i, V x, const rg_grad_opts *o, V *out) {
  const guard *gd;
  bool r = reached(w, x);
  V g = total(w, x, &gd);
  if (g && gd) g = unguard(w, g, gd, x);
  if (r && !g) return RG_ERR_TYPE;
  int mode = o ? o->disconnected : RG_GRAD_DISCONNECTED_RAISE;
  if (g) {
    *out = g;
    return RG_OK;
  }
  if (mode == RG_GRAD_DISCONNECTED_RAISE)
    return rg_error(w->C, RG_ERR_TYPE, "grad: the cost does not depend on %s (%s)%s", var_label(x, i),
                    rg_type_str(x->type), rg_dtype_is_float(x->type->dtype) ? "" : ": an integer or boolean "
                    "value has no gradient");
  *out = mode == RG_GRAD_DISCONNECTED_ZERO ? rg_second(x, rg_constant_scalar(w->C, x->type->dtype, 0)) : NULL;
  return RG_OK;
}

int rg_grad(rg_ctx *C, V cost, int nwrt, V const *wrt, const rg_grad_opts *o, V *out) {
  if (cost) C = rgc_ctx_of(C, 1, &cost);
  if (nwrt > 0 && !out) return rg_error(C, RG_ERR_TYPE, "grad: no array for the %d gradients", nwrt);
  int rc = check_args(C, cost, nwrt, wrt, o);
  if (rc != RG_OK) return rc;
  gwalk w = {.C = C, .leaf_dep = rg_memo_new(), .leaf_acc = rg_memo_new(), .consts = rg_memo_new()};
  w.order = walk_order(&w, cost, o, &w.n);
  number_nodes(&w);
  for (int i = 0; i < nwrt; i++)
    set_depends(&w, wrt[i]); /* a wrt among the constants still gets its gradient (Aesara) */
  mark_dependents(&w);
  seed(&w, cost, o);
  for (size_t k = w.n; k-- > 0;)
    if ((rc = back_through(&w, w.order[k])) != RG_OK) return rc;
  for (int i = 0; i < nwrt; i++)
    if ((rc = result(&w, i, wrt[i], o, &out[i])) != RG_OK) return rc;
  return RG_OK;
}
