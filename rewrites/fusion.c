/*
 * fusion.c — elementwise fusion (Aesara's FusionOptimizer, written anew):
 * connected elementwise nodes become one composite node, so a chain such
 * as sigmoid(a) * tanh(b) + c * d makes one pass over memory instead of
 * one per op (the composite interpreter, backend/cpu/inner.c, runs the
 * group block by block out of the caches).
 *
 * Groups.  Nodes are visited from the outputs back (reverse topological
 * order); each elementwise node not yet in a group seeds one, which then
 * absorbs the elementwise producers of its members' inputs while that is
 * legal:
 *
 *   - shapes: every value the group hands out (a group output) has the
 *     seed's type shape, so the composite computes each output over
 *     exactly its own elements; a producer used only inside the group may
 *     have a smaller, broadcast shape (computing it over the group's
 *     elements gives the same values, broadcast), unless it can fail on its
 *     own elements (an integer power: a group with no elements would not
 *     compute it, and its error would be lost).  Dimensions of unknown
 *     size are fine: broadcasting is decided statically (a dimension
 *     stretches only when its static size is 1), so connected elementwise
 *     values agree at run time on every dimension not statically 1, and
 *     the composite's kernel checks that agreement as its ops would;
 *   - no value computed twice: a member used outside the group becomes an
 *     output of the composite (several outputs per group);
 *   - no cycle: a producer is not absorbed when a path leaves it, passes
 *     through a node outside the group, and comes back into the group;
 *   - one ifelse context: every member is needed under the same ifelse
 *     branches as the seed (rgr_same_guards), since the composite runs
 *     whenever one of its outputs is needed: a group joining work of the
 *     two branches would run the branch not taken too (and its failures,
 *     an integer power the branch guards against, with it).
 *
 * A group also absorbs the elementwise consumers of its members that
 * produce its shape and were not grouped yet (siblings reading one
 * value: the LSTM's gate gradients, each a product with a shared
 * derivative, become outputs of one kernel rather than four kernels),
 * when none of their other inputs depends on the group (searched
 * backwards from each, within CONSUMER_SEARCH nodes; a longer search
 * gives up and leaves the consumer out), and the other parts of a join
 * reading a member, when the join's axis has a static size.
 *
 * Groups form at every size, as Aesara's do: with generated kernels a
 * composite over 4 float32 values runs faster than its ops one by one
 * (its kernel needs no workspace; backend/cpu/inner.c), and on a device
 * every op is a kernel launch.  `fast_run -fusion` leaves the ops alone.
 *
 * Scalar constants (0-d) become constants of the composite's inner graph;
 * every other value entering the group is an input of the composite.  A
 * group of one node is left alone.  The replacement is checked like any
 * rewrite (rg_fgraph_replace_all validates types and reverts on error).
 * Composites already present are not merged further (a later pass could).
 *
 * The rewrite runs in fast_run after specialize (so BLAS ops are formed
 * first and never swallowed), under the tags fast_run and fusion, and on
 * inner graphs with them, since those are rewritten by the same query.
 */
#include "rewrites/rewrite-impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef rg_variable *V;

/* ------------------------------------------------------------------ what may fuse */

static bool fusible(const rg_node *n) {
  return n && n->nout == 1 && n->op->inplace < 0 && rg_opcode_family(n->op->code) == RG_FAM_ELEMWISE;
}

static bool same_shape(const rg_type *a, const rg_type *b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape);
}

/* A scalar constant: it becomes a constant of the inner graph. */
static bool inner_constant(const rg_variable *v) { return rg_is_constant(v) && v->type->ndim == 0; }

/* ------------------------------------------------------------------ a group */

/* What one fusion run keeps across its groups and searches, in malloc'd
 * memory, which the collector does not scan: it holds nodes and values of
 * the graph, kept alive by the run's array of the graph's nodes (a node a
 * fused group replaces included) or, for a composite made during the run,
 * by the graph:
 *  - `group_of` maps every node taken into a group to that group's number
 *    (groups are numbered from 1 in the order they form), so membership
 *    and "grouped earlier" are one probe, with no table per group;
 *  - `clear` maps each value found independent of a group (independent())
 *    to that group's number;
 *  - `seen` and `seen_back` map each node a search visited (forwards,
 *    backwards; `seen` also each value first_slot met) to the number of
 *    the last search that did, so a search starts by taking a fresh
 *    number and nothing is cleared between searches;
 *  - `inputs` maps each value entering a group from outside to that
 *    group's number (0 once a member computes it), so a group's inputs
 *    are counted as it grows;
 *  - `stack` and `stack_back` are the searches' work lists. */
typedef struct scratch {
  rg_map group_of, clear, seen, seen_back, inputs;
  rg_ptrs stack, stack_back;
  uint64_t ngroups, nsearches;
} scratch;

static void scratch_init(scratch *s, size_t nodes) {
  *s = (scratch){.stack = {.a = &rg_heap_abort}, .stack_back = {.a = &rg_heap_abort}};
  if (rg_map_init(&s->group_of, &rg_heap_abort, nodes) || rg_map_init(&s->clear, &rg_heap_abort, 16) ||
      rg_map_init(&s->seen, &rg_heap_abort, 64) || rg_map_init(&s->seen_back, &rg_heap_abort, 64) ||
      rg_map_init(&s->inputs, &rg_heap_abort, 64))
    abort();
}

static void scratch_free(scratch *s) {
  rg_map_free(&s->group_of);
  rg_map_free(&s->clear);
  rg_map_free(&s->seen);
  rg_map_free(&s->seen_back);
  rg_map_free(&s->inputs);
  rg_ptrs_free(&s->stack);
  rg_ptrs_free(&s->stack_back);
}

static uint64_t key_of(const void *p) { return (uint64_t)(uintptr_t)p; }

/* Starts a search: empty work lists and a fresh number. */
static void search_start(scratch *s) {
  s->stack.n = s->stack_back.n = 0;
  s->nsearches++;
}

/* True the first time the current search reaches u in `seen` (and marks
 * it). */
static bool first_visit_in(rg_map *seen, uint64_t search, const void *u) {
  bool fresh;
  rg_map_entry *e = rg_map_slot(seen, key_of(u), search, &fresh);
  if (!fresh && e->val == search) return false;
  e->val = search;
  return true;
}

static bool first_visit(scratch *s, const rg_node *u) { return first_visit_in(&s->seen, s->nsearches, u); }

static void push_on(rg_ptrs *stack, rg_node *u) { (void)rg_ptrs_push(stack, u); /* aborts when out of memory */ }
static rg_node *pop_from(rg_ptrs *stack) { return stack->n ? stack->v[--stack->n] : NULL; }
static void push_node(scratch *s, rg_node *u) { push_on(&s->stack, u); }
static rg_node *pop_node(scratch *s) { return pop_from(&s->stack); }

/* The number of the group holding n (0: none yet). */
static uint64_t group_of(const scratch *s, const rg_node *n) {
  const uint64_t *g = n ? rg_map_get(&s->group_of, key_of(n)) : NULL;
  return g ? *g : 0;
}

/* A group being grown.  Invariant: members are fusible nodes of the
 * graph, exactly the nodes that s->group_of maps to id; `last` is the
 * largest order label of a member (no path reaches a member from a node
 * labelled after it); nins and nouts are the inputs and outputs its
 * composite would have (values entering from outside other than scalar
 * constants; members' values used outside), at most RG_COMPOSITE_MAX_IO
 * each, and n at most MAX_MEMBERS. */
typedef struct group {
  rg_fgraph *fg;
  scratch *s;
  const rgr_guards *guards; /* the ifelse branches each node is needed under */
  rg_node *seed;
  uint64_t id;
  const rg_type *shape;   /* the seed's output type */
  rg_node **members;
  int n, cap;
  uint64_t last;
  int nins, nouts;
  /* every value that entered the group from outside, in the order it
   * did (those a member computes since stay listed: is_input() tells) */
  const rg_variable **ins;
  int nin_seen, cap_ins;
} group;

static bool member(const group *g, const rg_node *n) { return n && group_of(g->s, n) == g->id; }

static bool used_outside(const group *g, const rg_variable *v) {
  for (uint32_t c = 0; c < v->nclients; c++)
    if (!member(g, v->clients[c].node)) return true; /* another node, or a graph output */
  return false;
}

/* Whether v has a reader other than the members and n (or is a graph
 * output). */
static bool used_outside_but(const group *g, const rg_variable *v, const rg_node *n) {
  for (uint32_t c = 0; c < v->nclients; c++) {
    const rg_node *u = v->clients[c].node;
    if (u != n && !member(g, u)) return true;
  }
  return false;
}

/* ------------------------------------------------------------------ the group's inputs and outputs */

/* A group's composite runs on every backend with at most
 * RG_COMPOSITE_MAX_IO inputs and outputs; a group of many members also
 * makes a kernel slow to compile (a C compiler's time grows faster than
 * the function), so groups stop at MAX_MEMBERS. */
#define MAX_MEMBERS 256

/* Whether x enters the group from outside (an input of its composite). */
static bool is_input(const group *g, const rg_variable *x) {
  const uint64_t *u = rg_map_get(&g->s->inputs, key_of(x));
  return u && *u == g->id;
}

/* Whether input k of n is its first input slot holding that value.  A
 * node of many inputs (a product of 10^5 factors in a chain's gradient)
 * is asked in one pass instead: the caller takes a fresh search number
 * (`mark`, 0 for a node of few inputs) and asks for every slot in order,
 * and each value is marked in the search map, so a slot costs a probe,
 * not a scan of the slots before it. */
#define FEW_INPUTS 8
static bool first_slot(scratch *s, uint64_t mark, const rg_node *n, int k) {
  if (mark) return first_visit_in(&s->seen, mark, n->inputs[k]);
  for (int j = 0; j < k; j++)
    if (n->inputs[j] == n->inputs[k]) return false;
  return true;
}

/* Whether x would enter the group from outside: not a member's value, nor
 * a scalar constant (those become the composite's own). */
static bool outer(const group *g, const rg_variable *x) { return !inner_constant(x) && !member(g, x->owner); }

/* The group's input and output counts were n a member. */
static void counts_with(const group *g, const rg_node *n, int *nins, int *nouts) {
  int ins = g->nins, outs = g->nouts;
  uint64_t mark = n->nin > FEW_INPUTS ? ++g->s->nsearches : 0; /* no search is under way */
  for (int k = 0; k < n->nin; k++) {
    const rg_variable *x = n->inputs[k];
    if (!first_slot(g->s, mark, n, k)) continue;
    if (outer(g, x)) ins += !is_input(g, x);
    else if (member(g, x->owner)) /* n may have been the reader that made it an output */
      outs += (int)used_outside_but(g, x, n) - (int)used_outside(g, x);
  }
  if (is_input(g, n->outputs[0])) ins--; /* n's value, an input until now, is computed inside */
  outs += used_outside_but(g, n->outputs[0], n);
  *nins = ins, *nouts = outs;
}

/* Whether the group may take n as far as its size goes.  n adds at most
 * its inputs to the group's and one output (its own: a member's value it
 * reads can only stop being an output), so a group far from the limits
 * needs no count. */
static bool fits(const group *g, const rg_node *n) {
  if (g->n >= MAX_MEMBERS) return false;
  if (g->nins + n->nin <= RG_COMPOSITE_MAX_IO && g->nouts < RG_COMPOSITE_MAX_IO) return true;
  int ins, outs;
  counts_with(g, n, &ins, &outs);
  return ins <= RG_COMPOSITE_MAX_IO && outs <= RG_COMPOSITE_MAX_IO;
}

/* One step forwards: true when a member is reached. */
static bool step_forwards(const group *g, rg_node *u) {
  scratch *s = g->s;
  if (member(g, u)) return true;
  if (u->label > g->last || !first_visit(s, u)) return false;
  for (int o = 0; o < u->nout; o++)
    for (uint32_t c = 0; c < u->outputs[o]->nclients; c++)
      if (u->outputs[o]->clients[c].node) push_node(s, u->outputs[o]->clients[c].node);
  return false;
}

/* One step backwards: true when p is reached. */
static bool step_backwards(const group *g, const rg_node *p, rg_node *u) {
  scratch *s = g->s;
  if (u == p) return true;
  if (u->label < p->label || member(g, u) || !first_visit_in(&s->seen_back, s->nsearches, u)) return false;
  for (int k = 0; k < u->nin; k++)
    if (u->inputs[k]->owner) push_on(&s->stack_back, u->inputs[k]->owner);
  return false;
}

/* Whether a path from p's users outside the group comes back into it.
 * Two searches, a step of each in turn, and the first to finish answers:
 * forwards from p's users outside the group, looking for a member; and
 * backwards from the producers of the group's inputs other than p (such
 * a path enters the group through one of them), over nodes outside the
 * group, looking for p.  Both keep between p's order label and the
 * group's last member's (nothing outside that window is reached from p
 * and reaches the group), and the shorter decides: in a chain's
 * gradient, where everything after p leads on for thousands of nodes
 * before it leaves the window, the group's few inputs answer at once. */
static bool reenters(const group *g, const rg_node *p) {
  scratch *s = g->s;
  search_start(s);
  for (uint32_t c = 0; c < p->outputs[0]->nclients; c++) {
    rg_node *u = p->outputs[0]->clients[c].node;
    if (u && !member(g, u)) push_node(s, u);
  }
  for (int i = 0; i < g->nin_seen; i++) {
    const rg_variable *x = g->ins[i];
    if (x->owner && x->owner != p && is_input(g, x)) push_on(&s->stack_back, x->owner);
  }
  for (;;) {
    rg_node *f = pop_node(s), *b = pop_from(&s->stack_back);
    if (!f && !b) return false;
    if (f && step_forwards(g, f)) return true;
    if (!f && !s->stack.n) return false; /* forwards done: nothing comes back */
    if (b && step_backwards(g, p, b)) return true;
    if (!b && !s->stack_back.n) return false; /* backwards done: p is no ancestor */
  }
}

/* Whether p can fail on its own elements: an integer power (a negative
 * exponent is an error).  Computed over a group's elements it would not
 * fail when the group has none, so such a producer joins a group only
 * with the group's shape. */
static bool may_fail(const rg_node *p) {
  return p->op->code == RG_OP_POW && rg_dtype_is_int(p->outputs[0]->type->dtype);
}

static bool may_absorb(const group *g, const rg_node *p) {
  if (!fusible(p) || member(g, p) || !fits(g, p) || (g->guards && !rgr_same_guards(g->guards, g->seed, p)))
    return false;
  const rg_type *t = p->outputs[0]->type;
  if (t->ndim > g->shape->ndim) return false;
  if ((used_outside(g, p->outputs[0]) || may_fail(p)) && !same_shape(t, g->shape)) return false;
  return !reenters(g, p);
}

/* Lists x among the values that entered the group. */
static void list_input(group *g, const rg_variable *x) {
  if (g->nin_seen == g->cap_ins) {
    int cap = g->cap_ins ? 2 * g->cap_ins : 8;
    const rg_variable **v = rg_gc_alloc(sizeof *v * (size_t)cap);
    if (g->nin_seen) memcpy(v, g->ins, sizeof *v * (size_t)g->nin_seen);
    g->ins = v, g->cap_ins = cap;
  }
  g->ins[g->nin_seen++] = x;
}

static void add_member(group *g, rg_node *n) {
  counts_with(g, n, &g->nins, &g->nouts);
  for (int k = 0; k < n->nin; k++) {
    const rg_variable *x = n->inputs[k];
    if (!outer(g, x) || is_input(g, x)) continue;
    if (rg_map_put(&g->s->inputs, key_of(x), g->id)) abort();
    list_input(g, x);
  }
  if (is_input(g, n->outputs[0]) && rg_map_put(&g->s->inputs, key_of(n->outputs[0]), 0)) abort();
  if (g->n == g->cap) {
    int cap = g->cap ? 2 * g->cap : 8;
    rg_node **m = rg_gc_alloc(sizeof *m * (size_t)cap);
    if (g->n) memcpy(m, g->members, sizeof *m * (size_t)g->n);
    g->members = m, g->cap = cap;
  }
  g->members[g->n++] = n;
  if (rg_map_put(&g->s->group_of, key_of(n), g->id)) abort();
  if (n->label > g->last) g->last = n->label;
}

#define CONSUMER_SEARCH 256

/* Whether x is computed without any member: a search back from its owner
 * over at most CONSUMER_SEARCH nodes finds none (false when it gives up).
 * `clear` remembers the values found so; the group grows only by nodes no
 * such value depends on (a producer is not absorbed when a path from it
 * comes back into the group, a consumer descends from a member), so the
 * answer stays true. */
static bool independent(const group *g, const rg_variable *x) {
  const uint64_t *known = rg_map_get(&g->s->clear, key_of(x));
  if (known && *known == g->id) return true;
  scratch *s = g->s;
  search_start(s);
  int visits = 0;
  if (x->owner) push_node(s, x->owner);
  for (rg_node *u; (u = pop_node(s));) {
    if (member(g, u)) return false;
    if (!first_visit(s, u)) continue;
    if (++visits > CONSUMER_SEARCH) return false;
    for (int k = 0; k < u->nin; k++)
      if (u->inputs[k]->owner) push_node(s, u->inputs[k]->owner);
  }
  if (rg_map_put(&s->clear, key_of(x), g->id)) abort();
  return true;
}

/* A consumer of a member joins when it is fusible, not grouped yet, of the
 * group's shape, and its other inputs do not depend on the group. */
static bool may_absorb_consumer(const group *g, const rg_node *u) {
  if (!fusible(u) || group_of(g->s, u) || !same_shape(u->outputs[0]->type, g->shape) || !fits(g, u) ||
      (g->guards && !rgr_same_guards(g->guards, g->seed, u)))
    return false;
  for (int k = 0; k < u->nin; k++) {
    const rg_variable *x = u->inputs[k];
    if (!member(g, x->owner) && !independent(g, x)) return false;
  }
  return true;
}

/* A sibling: a node computing another input of a join that reads a
 * member, absorbed as a consumer would be, and only when no path from it
 * through nodes outside the group comes back in.  So the parts of a join
 * are outputs of one group, which the linker then writes straight into
 * the joined value (backend/join-into.c).  A sibling is not connected to
 * the group by elementwise work: the join makes the parts agree outside
 * its axis, but along the axis they agree only where the size is static
 * (x(?) and y(?) joined have sizes of their own). */
static void absorb_siblings(group *g, const rg_node *join) {
  int64_t axis = join->op->ints[0]; /* normalised when the join was made */
  if (axis < 0 || axis >= g->shape->ndim || g->shape->shape[axis] < 0) return;
  for (int k = 0; k < join->nin; k++) {
    rg_node *s = join->inputs[k]->owner;
    if (s && may_absorb_consumer(g, s) && !reenters(g, s)) add_member(g, s);
  }
}

/* Grows the group from its seed: absorbs producers, consumers and the
 * siblings of members under a join until none is legal. */
static void grow(group *g) {
  for (int i = 0; i < g->n; i++) {
    rg_node *m = g->members[i];
    for (int k = 0; k < m->nin; k++) {
      rg_node *p = m->inputs[k]->owner;
      if (p && may_absorb(g, p)) add_member(g, p);
    }
    const rg_variable *v = m->outputs[0];
    for (uint32_t c = 0; c < v->nclients; c++) {
      rg_node *u = v->clients[c].node;
      if (u && may_absorb_consumer(g, u)) add_member(g, u);
      else if (u && u->op->code == RG_OP_JOIN) absorb_siblings(g, u);
    }
  }
}

/* ------------------------------------------------------------------ the composite */

static int by_label(const void *a, const void *b) {
  uint64_t x = (*(rg_node *const *)a)->label, y = (*(rg_node *const *)b)->label;
  return (x > y) - (x < y);
}

/* Members in topological order: by their order labels. */
static rg_node **in_order(const group *g) {
  rg_node **v = rg_gc_alloc(sizeof *v * (size_t)g->n);
  memcpy(v, g->members, sizeof *v * (size_t)g->n);
  qsort(v, (size_t)g->n, sizeof *v, by_label);
  return v;
}

typedef struct lists { V *v; int n; } lists;

/* A copy of scalar constant x for the inner graph, which then owns every
 * node and value it holds (a value belongs to one graph at a time), so it
 * is built without a copy of its own. */
static V own_constant(rg_ctx *C, V x) {
  V c = rg_constant_data(C, x->type->dtype, 0, NULL, x->data);
  if (c) c->flags |= x->flags & RG_VAR_WEAK; /* a literal stays weak */
  return c;
}

static void push(lists *l, V x) { l->v[l->n++] = x; }

/* Builds the composite and replaces the group's outputs; false when it
 * does not apply (the error, if any, is cleared). */
static bool fuse(rg_rewrite_run *run, const rg_rewriter *rw, group *g) {
  rg_ctx *C = rg_rewrite_ctx(run);
  rg_node **order = in_order(g);
  int bound = 0;
  for (int i = 0; i < g->n; i++) bound += order[i]->nin + 1;
  lists outer = {rg_gc_alloc(sizeof(V) * (size_t)bound), 0}, inner = {rg_gc_alloc(sizeof(V) * (size_t)bound), 0};
  lists olds = {rg_gc_alloc(sizeof(V) * (size_t)g->n), 0}, outs = {rg_gc_alloc(sizeof(V) * (size_t)g->n), 0};
  rg_memo *scalar = rg_memo_new(); /* outer value -> its scalar in the inner graph */
  for (int i = 0; i < g->n; i++) {
    rg_node *m = order[i];
    V *args = rg_gc_alloc(sizeof(V) * (size_t)(m->nin + 1));
    for (int k = 0; k < m->nin; k++) {
      V x = m->inputs[k];
      V s = rg_memo_get(scalar, x);
      if (!s) {
        s = inner_constant(x) ? own_constant(C, x) : rg_input(C, NULL, rg_type_scalar(x->type->dtype));
        if (!s) goto refuse;
        if (!inner_constant(x)) push(&outer, x), push(&inner, s);
        rg_memo_put(scalar, x, s);
      }
      args[k] = s;
    }
    rg_node *c = rg_make_node(C, m->op, m->nin, args);
    if (!c || c->outputs[0]->type->dtype != m->outputs[0]->type->dtype) goto refuse;
    rg_memo_put(scalar, m->outputs[0], c->outputs[0]);
    if (used_outside(g, m->outputs[0])) push(&olds, m->outputs[0]), push(&outs, c->outputs[0]);
  }
  assert(outer.n == g->nins && outs.n == g->nouts && "the group's counts as it grew");
  rg_fgraph *ig = rg_fgraph_new(C, inner.n, inner.v, outs.n, outs.v, 0); /* its nodes and values are its own */
  const rg_op *op = ig ? rg_op_composite(C, ig) : NULL;
  rg_node *node = op ? rg_make_node(C, op, outer.n, outer.v) : NULL;
  if (!node) goto refuse;
  if (rg_fgraph_replace_all(g->fg, olds.n, olds.v, node->outputs, "fusion") != RG_OK) goto refuse;
  rgr_record(run, rw, order[g->n - 1], olds.n, olds.v, node->outputs, 1, &node);
  return true;
refuse:
  rg_clear_error(C);
  return false;
}

/* ------------------------------------------------------------------ the rewrite */

static rg_node **reverse_order(rg_fgraph *fg, int *n) {
  int count = 0;
  for (rg_node *x = rg_fgraph_first(fg); x; x = rg_fgraph_next(x)) count++;
  rg_node **v = rg_gc_alloc(sizeof *v * (size_t)(count + 1));
  int k = count;
  for (rg_node *x = rg_fgraph_first(fg); x; x = rg_fgraph_next(x)) v[--k] = x;
  *n = count;
  return v;
}

static int fusion_fn(rg_rewrite_run *run, rg_fgraph *fg, void *ud) {
  const rg_rewriter *rw = ud; /* this rewriter, for the trace */
  int n, fused = 0;
  rg_node **order = reverse_order(fg, &n);
  scratch s;
  scratch_init(&s, (size_t)n);
  rgr_guards *guards = rgr_guards_of(fg);
  for (int i = 0; i < n; i++) {
    rg_node *seed = order[i];
    if (group_of(&s, seed) || !fusible(seed)) continue; /* grouped before (fused or not) */
    group g = {.fg = fg, .s = &s, .guards = guards, .seed = seed, .id = ++s.ngroups, .shape = seed->outputs[0]->type};
    add_member(&g, seed);
    grow(&g);
    if (g.n < 2) continue;
    fused += fuse(run, rw, &g);
  }
  rgr_guards_free(guards);
  scratch_free(&s);
  return fused;
}

rg_rewriter *rgr_fusion_rewriter(void) {
  rg_rewriter *rw = rg_graph_rewriter("fusion", fusion_fn, NULL);
  rw->ud = rw;
  rw->describe = "connected elementwise nodes -> one composite node (several outputs where values are used outside)";
  return rw;
}
