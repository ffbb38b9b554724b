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
 * Aesara; so does anything only reachable through them.
 */
#include "core/core-impl.h"

typedef rg_variable *V;

/* Contributions to one variable's gradient; `sum` once they are added. */
RG_VEC(var_vec, V)
/* Contributions live in collected memory (rgk_gc): they hold variables. */
typedef struct acc { var_vec g; V sum; } acc;

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

static void add_contrib(gwalk *w, V x, V g) {
  acc *a = acc_of(w, x, true);
  if (!a->g.a) a->g.a = &rgk_gc;
  int rc = var_vec_push(&a->g, g);
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
  a->sum = NULL;
}

/* The total gradient of x so far (NULL: none reached it). */
static V total(gwalk *w, V x) {
  acc *a = acc_of(w, x, false);
  if (!a || !a->g.n) return NULL;
  if (!a->sum) a->sum = a->g.n == 1 ? a->g.v[0] : rg_add_n((int)a->g.n, a->g.v);
  return a->sum;
}

/* ------------------------------------------------------------------ fitting a gradient to its input */

V rg_grad_sum_to(V g, const rg_type *t) {
  if (!g || !t) return NULL;
  int gd = g->type->ndim, td = t->ndim, lead = gd - td;
  if (lead < 0) return g; /* the caller reports it */
  int64_t axes[RG_MAX_NDIM], order[RG_MAX_NDIM];
  int na = 0, k = 0;
  for (int d = 0; d < lead; d++) axes[na++] = d;
  bool bcast[RG_MAX_NDIM];
  for (int d = 0; d < td; d++) {
    bcast[d] = t->shape[d] == 1 && g->type->shape[lead + d] != 1;
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

static int back_through(gwalk *w, const rg_node *node) {
  V og[node->nout > 0 ? node->nout : 1];
  bool any = false;
  for (int o = 0; o < node->nout; o++) any |= (og[o] = total(w, node->outputs[o])) != NULL;
  bool needed = false;
  for (int i = 0; i < node->nin && !needed; i++) needed = depends(w, node->inputs[i]);
  if (!any || !needed) return RG_OK;
  V ig[node->nin > 0 ? node->nin : 1];
  bool need[node->nin > 0 ? node->nin : 1];
  memset(ig, 0, sizeof ig);
  for (int i = 0; i < node->nin; i++) need[i] = depends(w, node->inputs[i]);
  int rc = node->op->cls->grad(w->C, node, og, ig, need);
  if (rc != RG_OK) return rc;
  for (int i = 0; i < node->nin; i++) {
    V x = node->inputs[i];
    if (!ig[i] || !depends(w, x) || !rg_dtype_is_float(x->type->dtype)) continue;
    V g = fit(w, ig[i], x);
    if (!g) {
      if (!rg_errmsg(w->C)[0])
        rg_error(w->C, RG_ERR_TYPE, "grad: the gradient rule of %s failed for input %d", rg_op_name(node->op), i);
      return RG_ERR_TYPE;
    }
    add_contrib(w, x, g);
  }
  return RG_OK;
}

static const char *var_label(const rg_variable *v, int i) {
  return v->name ? rgk_sprintf("'%s'", v->name) : rgk_sprintf("wrt %d", i);
}

static int check_args(rg_ctx *C, V cost, int nwrt, V const *wrt, const rg_grad_opts *o) {
  if (!cost && (!o || o->nknown <= 0)) return rg_error(C, RG_ERR_TYPE, "grad: no cost and no known gradients");
  if (cost && cost->type->ndim != 0)
    return rg_error(C, RG_ERR_TYPE, "grad: the cost must be a scalar, got %s", rg_type_str(cost->type));
  if (cost && !rg_dtype_is_float(cost->type->dtype))
    return rg_error(C, RG_ERR_TYPE, "grad: the cost must be a float, got %s", rg_type_str(cost->type));
  for (int i = 0; i < nwrt; i++)
    if (!wrt[i]) return rg_error(C, RG_ERR_TYPE, "grad: wrt %d is NULL", i);
  for (int i = 0; o && i < o->nknown; i++)
    if (!o->known[i]) return rg_error(C, RG_ERR_TYPE, "grad: known variable %d is NULL", i);
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
  if (cost && depends(w, cost)) add_contrib(w, cost, rg_constant_scalar(w->C, cost->type->dtype, 1));
  for (int i = 0; o && i < o->nknown; i++) {
    V x = o->known[i], g = o->known_grads ? o->known_grads[i] : NULL;
    if (g && depends(w, x) && rg_dtype_is_float(x->type->dtype)) add_contrib(w, x, fit(w, g, x));
  }
}

static int result(gwalk *w, int i, V x, const rg_grad_opts *o, V *out) {
  V g = total(w, x);
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
  int rc = check_args(C, cost, nwrt, wrt, o);
  if (rc != RG_OK) return rc;
  gwalk w = {.C = C, .leaf_dep = rg_memo_new(), .leaf_acc = rg_memo_new(), .consts = rg_memo_new()};
  w.order = walk_order(&w, cost, o, &w.n);
  number_nodes(&w);
  for (int i = 0; i < nwrt; i++)
    if (!rg_memo_get(w.consts, wrt[i])) set_depends(&w, wrt[i]);
  mark_dependents(&w);
  seed(&w, cost, o);
  for (size_t k = w.n; k-- > 0;)
    if ((rc = back_through(&w, w.order[k])) != RG_OK) return rc;
  for (int i = 0; i < nwrt; i++)
    if ((rc = result(&w, i, wrt[i], o, &out[i])) != RG_OK) return rc;
  return RG_OK;
}
