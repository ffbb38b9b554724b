/*
 * egraph-extract.c — extraction (the k cheapest distinct graphs by DAG
 * cost) and the e-graph written as JSON or Graphviz.
 *
 * DAG cost: a selection picks one e-node per class reachable from the
 * roots; its cost is the sum of the picked nodes' costs, each class once
 * however many nodes use it (tree cost would count a shared subgraph per
 * use and mislead), and the e-nodes that are outputs of one node of
 * several outputs (each priced at the whole node, egraph-cost.c) once
 * together: the branch and bound counts a group's e-nodes as they are
 * chosen and charges the first, and its lower bound takes such e-nodes
 * as free.  Two steps:
 *
 * 1. Greedy tree cost: best[c] = min over c's nodes of cost + the children's
 *    best, to a fixed point (ties go to the smaller tree, so the selection
 *    has no cycle).  It is the classic bottom-up extraction, exact for tree
 *    cost and a good first answer for DAG cost.
 * 2. Branch and bound over DAG selections: classes are decided depth first
 *    from the roots; a class's nodes are tried in the order of their greedy
 *    tree cost, so the first complete selection is the greedy one; a branch
 *    is cut when its cost so far plus the cheapest node of every class
 *    still to decide (a lower bound: each costs at least that, once) is no
 *    better than the k-th best found.  Selections with a cycle are
 *    discarded.  When the search finishes, the k answers are exact.  It
 *    stops after a budget of branches (and is skipped when the greedy
 *    selection has more than BB_MAX_CLASSES classes): the answers are then
 *    the best found, never worse than the greedy one — the heuristic.
 * Distinct selections over the reachable classes are distinct graphs
 * (hash-consing keeps equal terms in one class), so the k answers differ.
 */
#include "rewrites/egraph-impl.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BB_MAX_CLASSES 4096
#define BB_BUDGET 2000000

typedef struct answer { double cost; uint32_t *choice; } answer;

typedef struct extractor {
  rg_egraph *eg;
  const rg_cost_model *cm;
  const double *cost;
  uint8_t *whole;      /* per e-node: its cost is its node's, with sibling outputs */
  uint32_t *group;     /* per e-node: its node among such (EG_NONE: none) */
  uint32_t *gcount;    /* B&B: per group, how many of its e-nodes are chosen */
  double *best;        /* greedy tree cost per class */
  uint32_t *size;      /* tree size of that, for ties */
  double *minc;        /* cheapest node per class */
  struct cand **cands; /* per class: its nodes by tree cost, made on first use */
  uint32_t *ncands;
  uint32_t *choice;    /* B&B: node per class or EG_NONE */
  uint8_t *pending;
  eg_ids stack;        /* classes to decide */
  double lb;           /* sum of minc over pending classes */
  int k, nans;
  answer *ans;         /* sorted by cost */
  int64_t budget;
  bool cut;            /* the budget ran out */
} extractor;

/* ------------------------------------------------------------------ greedy tree cost */

static double tree_cost(const extractor *x, uint32_t id, uint32_t *size) {
  const rg_egraph *eg = x->eg;
  double c = x->cost[id];
  uint32_t s = 1;
  for (uint32_t i = 0; i < eg->nodes[id].nch && isfinite(c); i++) {
    uint32_t k = eg_find(eg, eg_kids(eg, id)[i]);
    c += x->best[k];
    s += x->size[k];
  }
  *size = s;
  return c;
}

static void greedy(extractor *x) {
  rg_egraph *eg = x->eg;
  for (uint32_t c = 0; c < eg->ncls; c++) {
    x->best[c] = INFINITY;
    x->size[c] = UINT32_MAX;
    x->minc[c] = INFINITY;
  }
  for (uint32_t id = 0; id < eg->nnodes; id++) {
    uint32_t c = eg_find(eg, eg->nodes[id].cls);
    double m = x->group[id] != EG_NONE ? 0 : x->cost[id]; /* its node may be paid for already */
    if (!eg->nodes[id].dead && m < x->minc[c]) x->minc[c] = m;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t id = 0; id < eg->nnodes; id++) {
      if (eg->nodes[id].dead) continue;
      uint32_t c = eg_find(eg, eg->nodes[id].cls), s;
      double t = tree_cost(x, id, &s);
      if (t < x->best[c] || (t == x->best[c] && s < x->size[c])) {
        x->best[c] = t;
        x->size[c] = s;
        changed = true;
      }
    }
  }
}

/* ------------------------------------------------------------------ branch and bound */

static bool acyclic_from(extractor *x, uint32_t c, uint8_t *state) {
  /* iterative DFS: state 1 on the path, 2 done */
  rg_egraph *eg = x->eg;
  eg_ids st = {0}, it = {0};
  eg_ids_push(&st, c);
  eg_ids_push(&it, 0);
  state[c] = 1;
  bool ok = true;
  while (st.n && ok) {
    uint32_t d = st.v[st.n - 1], id = x->choice[d], i = it.v[it.n - 1];
    if (i == eg->nodes[id].nch) {
      state[d] = 2;
      st.n--;
      it.n--;
      continue;
    }
    it.v[it.n - 1]++;
    uint32_t k = eg_find(eg, eg_kids(eg, id)[i]);
    if (state[k] == 1) ok = false;
    else if (!state[k]) {
      state[k] = 1;
      eg_ids_push(&st, k);
      eg_ids_push(&it, 0);
    }
  }
  free(st.v);
  free(it.v);
  return ok;
}

static bool acyclic(extractor *x) {
  uint8_t *state = calloc(x->eg->ncls + 1, 1);
  if (!state) return false; /* out of memory: the answer is not kept */
  bool ok = true;
  for (int i = 0; i < x->eg->nroots && ok; i++) {
    uint32_t r = eg_find(x->eg, x->eg->roots[i]);
    if (!state[r]) ok = acyclic_from(x, r, state);
  }
  free(state);
  return ok;
}

static double kth(const extractor *x) { return x->nans < x->k ? INFINITY : x->ans[x->nans - 1].cost; }

static void record(extractor *x, double cost) {
  if (x->nans == x->k && cost >= kth(x)) return; /* ties keep the answer found first */
  if (!acyclic(x)) return;
  void *copy = malloc((x->eg->ncls ? x->eg->ncls : 1) * sizeof *x->choice);
  if (!copy) return; /* out of memory: this answer is not kept */
  memcpy(copy, x->choice, x->eg->ncls * sizeof *x->choice);
  int i = x->nans < x->k ? x->nans++ : x->k - 1;
  free(x->ans[i].choice);
  x->ans[i].cost = cost;
  x->ans[i].choice = copy;
  for (; i > 0 && x->ans[i].cost < x->ans[i - 1].cost; i--) {
    answer t = x->ans[i];
    x->ans[i] = x->ans[i - 1];
    x->ans[i - 1] = t;
  }
}

/* The nodes of class c in the order of their tree cost. */
/* A class's e-node with its greedy tree cost and tree size. */
typedef struct cand { double t; uint32_t size, id; } cand;
/* By tree cost, then tree size (as greedy breaks ties: each class's first
 * candidate then has children of smaller trees, so the selection of first
 * candidates, the branch and bound's first, has no cycle), then id. */
static int cmp_cand(const void *a, const void *b) {
  const cand *p = a, *q = b;
  if (p->t != q->t) return p->t < q->t ? -1 : 1;
  if (p->size != q->size) return p->size < q->size ? -1 : 1;
  return (p->id > q->id) - (p->id < q->id);
}

static cand *sorted_nodes(extractor *x, uint32_t c, uint32_t *n) {
  const eg_ids *ns = &x->eg->cls[c].nodes;
  cand *v = malloc((ns->n + 1) * sizeof *v);
  uint32_t m = 0, s;
  if (!v) return *n = 0, NULL; /* out of memory: no candidates kept */
  for (uint32_t i = 0; i < ns->n; i++) {
    uint32_t id = ns->v[i];
    if (x->eg->nodes[id].dead || !isfinite(x->cost[id])) continue;
    double t = tree_cost(x, id, &s);
    if (isfinite(t)) v[m++] = (cand){t, s, id};
  }
  qsort(v, m, sizeof *v, cmp_cand);
  *n = m;
  return v;
}

/* The same, computed once per class (tree costs are fixed after greedy);
 * the branch and bound visits a class many times. */
static const cand *candidates(extractor *x, uint32_t c, uint32_t *n) {
  if (!x->cands[c]) x->cands[c] = sorted_nodes(x, c, &x->ncands[c]);
  *n = x->ncands[c];
  return x->cands[c];
}

static void push_class(extractor *x, uint32_t c) {
  x->pending[c] = 1;
  x->lb += x->minc[c];
  eg_ids_push(&x->stack, c);
}

static void bb(extractor *x, double partial);

static void try_node(extractor *x, uint32_t c, uint32_t id, double partial) {
  rg_egraph *eg = x->eg;
  uint32_t pushed = 0;
  x->choice[c] = id;
  for (uint32_t i = 0; i < eg->nodes[id].nch; i++) {
    uint32_t k = eg_find(eg, eg_kids(eg, id)[i]);
    if (x->choice[k] == EG_NONE && !x->pending[k]) {
      push_class(x, k);
      pushed++;
    }
  }
  uint32_t g = x->group[id];
  bb(x, partial + (g != EG_NONE && x->gcount[g]++ ? 0 : x->cost[id])); /* a node once, for any of its outputs */
  if (g != EG_NONE) x->gcount[g]--;
  for (; pushed; pushed--) {
    uint32_t k = x->stack.v[--x->stack.n];
    x->pending[k] = 0;
    x->lb -= x->minc[k];
  }
  x->choice[c] = EG_NONE;
}

static void bb(extractor *x, double partial) {
  if (x->nans == x->k && partial + x->lb >= kth(x)) return;
  if (--x->budget < 0) {
    x->cut = true;
    return;
  }
  if (!x->stack.n) {
    record(x, partial);
    return;
  }
  uint32_t c = x->stack.v[--x->stack.n];
  x->pending[c] = 0;
  x->lb -= x->minc[c];
  uint32_t n;
  const cand *v = candidates(x, c, &n);
  for (uint32_t i = 0; i < n && !(x->cut && x->nans); i++) try_node(x, c, v[i].id, partial);
  push_class(x, c);
}

/* ------------------------------------------------------------------ building graphs */

/* The hash of e-node id's op and children classes: the e-nodes of one
 * multi-output node's outputs share it. */
static uint64_t node_key(const rg_egraph *eg, uint32_t id) {
  const eg_node *x = &eg->nodes[id];
  uint64_t h = rg_op_hash(eg->heads[x->head].op) * 0x9e3779b97f4a7c15ull + x->nch;
  for (uint32_t i = 0; i < x->nch; i++) h = (h ^ eg_find(eg, eg_kids(eg, id)[i])) * 0xff51afd7ed558ccdull;
  return h ? h : 1;
}

/* Whether e-nodes a and b are outputs of one node: one op over the same
 * classes. */
static bool same_node(const rg_egraph *eg, uint32_t a, uint32_t b) {
  const eg_node *x = &eg->nodes[a], *y = &eg->nodes[b];
  if (x->nch != y->nch || !rg_op_equal(eg->heads[x->head].op, eg->heads[y->head].op)) return false;
  for (uint32_t i = 0; i < x->nch; i++)
    if (eg_find(eg, eg_kids(eg, a)[i]) != eg_find(eg, eg_kids(eg, b)[i])) return false;
  return true;
}

/* The node made already for another output of e-node id's node (`made`
 * maps node_key to the classes built, whose variables' owners are the
 * nodes), or NULL: a multi-output node chosen for several classes is one
 * node of the graph, as it was one node of the input. */
static rg_node *made_sibling(rg_egraph *eg, const uint32_t *choice, rg_variable **vars, rg_map *made, uint32_t id) {
  uint64_t key = node_key(eg, id);
  for (rg_map_entry *e = rg_map_first(made, key); e; e = rg_map_next(made, e))
    if (same_node(eg, choice[e->val], id)) return vars[e->val]->owner;
  return NULL;
}

/* The variable of class c under a choice (memoized in vars). */
static rg_variable *build(rg_egraph *eg, const uint32_t *choice, rg_variable **vars, rg_map *made, uint32_t root) {
  eg_ids st = {0};
  eg_ids_push(&st, root);
  while (st.n) {
    uint32_t c = st.v[st.n - 1], id = choice[c];
    if (vars[c]) {
      st.n--;
      continue;
    }
    const eg_head *h = &eg->heads[eg->nodes[id].head];
    uint32_t n = eg->nodes[id].nch;
    rg_variable **in = rg_gc_alloc((n + 1) * sizeof *in);
    bool ready = true;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t k = eg_find(eg, eg_kids(eg, id)[i]);
      if (!(in[i] = vars[k])) {
        eg_ids_push(&st, k);
        ready = false;
      }
    }
    if (!ready) continue;
    st.n--;
    rg_node *node = h->leaf ? NULL : made_sibling(eg, choice, vars, made, id);
    if (!h->leaf && !node && (node = rg_make_node(eg->C, h->op, (int)n, in)) && node->nout > 1 &&
        rg_map_add(made, node_key(eg, id), c))
      abort();
    vars[c] = h->leaf ? h->leaf : node ? node->outputs[h->out] : NULL;
    if (!vars[c]) break;
  }
  free(st.v);
  return vars[root];
}

static rg_fgraph *graph_of(rg_egraph *eg, const uint32_t *choice) {
  rg_variable **vars = rg_gc_alloc(eg->ncls * sizeof *vars);
  int n = eg->nroots;
  rg_variable **outs = rg_gc_alloc((size_t)(n ? n : 1) * sizeof *outs);
  rg_map made; /* values: classes (the graph's variables keep the nodes alive) */
  if (rg_map_init(&made, &rg_heap_abort, 16)) abort();
  for (int i = 0; i < n; i++)
    if (!(outs[i] = build(eg, choice, vars, &made, eg_find(eg, eg->roots[i])))) {
      rg_map_free(&made);
      return NULL;
    }
  rg_map_free(&made);
  int nin = rg_fgraph_ninputs(eg->fg);
  rg_variable **ins = rg_gc_alloc((size_t)(nin ? nin : 1) * sizeof *ins);
  for (int i = 0; i < nin; i++) ins[i] = rg_fgraph_input(eg->fg, i);
  return rg_fgraph_new(eg->C, nin, ins, n, outs, RG_FG_CLONE);
}

/* ------------------------------------------------------------------ extraction */

/* The groups of e-nodes that are outputs of one node of several outputs
 * costed whole (the same op over the same classes); false when out of
 * memory. */
static bool assign_groups(extractor *x) {
  rg_egraph *eg = x->eg;
  rg_map first; /* node_key -> an e-node of each group with that key */
  if (rg_map_init(&first, &rg_heap, 16)) return false;
  uint32_t ngroups = 0;
  bool ok = true;
  for (uint32_t id = 0; id < eg->nnodes && ok; id++) {
    x->group[id] = EG_NONE;
    if (!x->whole[id] || eg->nodes[id].dead) continue;
    uint64_t key = node_key(eg, id);
    for (rg_map_entry *e = rg_map_first(&first, key); e && x->group[id] == EG_NONE; e = rg_map_next(&first, e))
      if (same_node(eg, (uint32_t)e->val, id)) x->group[id] = x->group[e->val];
    if (x->group[id] == EG_NONE) {
      x->group[id] = ngroups++;
      ok = rg_map_add(&first, key, id) == 0;
    }
  }
  rg_map_free(&first);
  return ok;
}

static void extractor_free(extractor *x) {
  free(x->whole);
  free(x->group);
  free(x->gcount);
  free(x->best);
  free(x->size);
  free(x->minc);
  for (uint32_t c = 0; x->cands && c <= x->eg->ncls; c++) free(x->cands[c]);
  free(x->cands);
  free(x->ncands);
  free(x->choice);
  free(x->pending);
  free(x->stack.v);
  for (int i = 0; i < x->nans; i++) free(x->ans[i].choice);
  free(x->ans);
  free((void *)x->cost);
}

/* The greedy selection as the one answer (the branch and bound skipped). */
static void greedy_answer(extractor *x) {
  rg_egraph *eg = x->eg;
  for (uint32_t c = 0; c < eg->ncls; c++) {
    x->choice[c] = EG_NONE;
    if (eg->uf[c] != c) continue;
    uint32_t n;
    const cand *v = candidates(x, c, &n);
    if (n) x->choice[c] = v[0].id;
  }
  double total = 0;
  uint8_t *seen = calloc(eg->ncls + 1, 1);
  if (!seen) return; /* out of memory: no greedy answer */
  memset(x->gcount, 0, (eg->nnodes + 1) * sizeof *x->gcount);
  eg_ids st = {0};
  for (int i = 0; i < eg->nroots; i++) eg_ids_push(&st, eg_find(eg, eg->roots[i]));
  while (st.n) {
    uint32_t c = st.v[--st.n];
    if (seen[c]) continue;
    seen[c] = 1;
    uint32_t g = x->group[x->choice[c]];
    if (g == EG_NONE || !x->gcount[g]++) total += x->cost[x->choice[c]];
    for (uint32_t i = 0; i < eg->nodes[x->choice[c]].nch; i++)
      eg_ids_push(&st, eg_find(eg, eg_kids(eg, x->choice[c])[i]));
  }
  free(seen);
  free(st.v);
  record(x, total);
}

static int run_extraction(extractor *x) {
  rg_egraph *eg = x->eg;
  greedy(x);
  for (int i = 0; i < eg->nroots; i++)
    if (!isfinite(x->best[eg_find(eg, eg->roots[i])])) {
      const char *why = rg_cost_why(x->cm);
      return rg_error(eg->C, RG_ERR_EVAL, "extract: output %d has no e-node of finite cost%s%s", i + 1,
                      why ? " (" : "", why ? rgr_sprintf("%s)", why) : "");
    }
  for (uint32_t c = 0; c < eg->ncls; c++) x->choice[c] = EG_NONE;
  uint32_t greedy_classes = 0;
  for (int i = 0; i < eg->nroots; i++) greedy_classes += x->size[eg_find(eg, eg->roots[i])];
  if (greedy_classes > BB_MAX_CLASSES) {
    x->cut = true;
    greedy_answer(x);
    return RG_OK;
  }
  for (int i = 0; i < eg->nroots; i++) {
    uint32_t r = eg_find(eg, eg->roots[i]);
    if (!x->pending[r]) push_class(x, r);
  }
  bb(x, 0);
  return RG_OK;
}

int rg_egraph_extract(rg_egraph *eg, const rg_cost_model *cm, int k, rg_fgraph **graphs,
                      double *costs, bool *exact) {
  if (k < 1) return rg_error(eg->C, RG_ERR_TYPE, "extract: k must be at least 1");
  eg_rebuild(eg);
  extractor x = {.eg = eg, .cm = cm, .k = k, .budget = BB_BUDGET};
  x.whole = malloc(eg->nnodes + 1);
  x.group = malloc((eg->nnodes + 1) * sizeof *x.group);
  x.gcount = calloc(eg->nnodes + 1, sizeof *x.gcount);
  if (!x.whole || !x.group || !x.gcount || !(x.cost = eg_node_costs(eg, cm, x.whole)) || !assign_groups(&x)) {
    int rc = rg_errcode(eg->C) ? rg_errcode(eg->C) : rg_error(eg->C, RG_ERR_NOMEM, "extract: out of memory");
    extractor_free(&x);
    return rc;
  }
  uint32_t n = eg->ncls + 1;
  x.best = malloc(n * sizeof *x.best);
  x.size = malloc(n * sizeof *x.size);
  x.minc = malloc(n * sizeof *x.minc);
  x.cands = calloc(n, sizeof *x.cands);
  x.ncands = calloc(n, sizeof *x.ncands);
  x.choice = malloc(n * sizeof *x.choice);
  x.pending = calloc(n, 1);
  x.ans = calloc((size_t)k, sizeof *x.ans);
  int rc = x.best && x.size && x.minc && x.cands && x.ncands && x.choice && x.pending && x.ans
               ? run_extraction(&x)
               : rg_error(eg->C, RG_ERR_NOMEM, "extract: out of memory for %u e-classes", eg->ncls);
  int got = 0;
  for (int i = 0; !rc && i < x.nans; i++) {
    if (!(graphs[got] = graph_of(eg, x.ans[i].choice))) {
      rc = rg_errcode(eg->C) ? rg_errcode(eg->C) : RG_ERR;
      break;
    }
    costs[got++] = x.ans[i].cost;
  }
  if (exact) *exact = !x.cut;
  extractor_free(&x);
  return rc ? rc : got;
}

/* ------------------------------------------------------------------ JSON and DOT */

/* A live node of class c (children in the serialized format name nodes). */
static uint32_t some_node(const rg_egraph *eg, uint32_t c) {
  const eg_ids *ns = &eg->cls[eg_find(eg, c)].nodes;
  for (uint32_t i = 0; i < ns->n; i++)
    if (!eg->nodes[ns->v[i]].dead) return ns->v[i];
  return ns->n ? ns->v[0] : 0;
}

static void json_node(FILE *f, rg_egraph *eg, uint32_t id, double cost, bool first) {
  const eg_node *x = &eg->nodes[id];
  fprintf(f, "%s\n    \"n%u\": {\"op\": ", first ? "" : ",", id);
  rg_json_string(f, eg_head_str(eg, x->head));
  fputs(", \"children\": [", f);
  for (uint32_t i = 0; i < x->nch; i++) fprintf(f, "%s\"n%u\"", i ? ", " : "", some_node(eg, eg_kids(eg, id)[i]));
  /* JSON has no infinity: an e-node no answer may use gets the largest double */
  fprintf(f, "], \"eclass\": \"c%u\", \"cost\": %.17g}", eg_find(eg, x->cls), isfinite(cost) ? cost : DBL_MAX);
}

int rg_egraph_write_json(rg_egraph *eg, const rg_cost_model *cm, FILE *f) {
  eg_rebuild(eg);
  double *cost = cm ? eg_node_costs(eg, cm, NULL) : NULL;
  if (cm && !cost) return rg_errcode(eg->C);
  fputs("{\n  \"nodes\": {", f);
  bool first = true;
  for (uint32_t id = 0; id < eg->nnodes; id++) {
    if (eg->nodes[id].dead) continue;
    json_node(f, eg, id, cost ? cost[id] : 1.0, first);
    first = false;
  }
  fputs("\n  },\n  \"root_eclasses\": [", f);
  for (int i = 0; i < eg->nroots; i++) fprintf(f, "%s\"c%u\"", i ? ", " : "", eg_find(eg, eg->roots[i]));
  fputs("],\n  \"class_data\": {", f);
  first = true;
  for (uint32_t c = 0; c < eg->ncls; c++) {
    if (eg->uf[c] != c) continue;
    fprintf(f, "%s\n    \"c%u\": {\"type\": ", first ? "" : ",", c);
    rg_json_string(f, rg_type_str(eg->types[c]));
    fputc('}', f);
    first = false;
  }
  fputs("\n  }\n}\n", f);
  free(cost);
  return RG_OK;
}

int rg_egraph_write_dot(rg_egraph *eg, FILE *f) {
  eg_rebuild(eg);
  fputs("digraph egraph {\n  compound=true;\n  node [shape=box];\n", f);
  for (uint32_t c = 0; c < eg->ncls; c++) {
    if (eg->uf[c] != c) continue;
    fprintf(f, "  subgraph cluster_c%u {\n    style=dotted; label=\"c%u: %s\";\n", c, c, rg_type_str(eg->types[c]));
    const eg_ids *ns = &eg->cls[c].nodes;
    for (uint32_t i = 0; i < ns->n; i++) {
      if (eg->nodes[ns->v[i]].dead) continue;
      fprintf(f, "    n%u [label=", ns->v[i]);
      rg_json_string(f, eg_head_str(eg, eg->nodes[ns->v[i]].head));
      fputs("];\n", f);
    }
    fputs("  }\n", f);
  }
  for (uint32_t id = 0; id < eg->nnodes; id++) {
    if (eg->nodes[id].dead) continue;
    for (uint32_t i = 0; i < eg->nodes[id].nch; i++) {
      uint32_t k = eg_find(eg, eg_kids(eg, id)[i]);
      fprintf(f, "  n%u -> n%u [lhead=cluster_c%u, label=\"%u\"];\n", id, some_node(eg, k), k, i);
    }
  }
  fputs("}\n", f);
  return RG_OK;
}
