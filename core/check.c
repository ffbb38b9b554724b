/*
 * check.c — the FunctionGraph invariant checker (see struct rg_fgraph in
 * core-impl.h for the invariants).  It walks the order list once, checks
 * every use against the clients index in both directions, counts uses per
 * variable, and re-runs type inference on every node.  Linear in the graph
 * (with hashing); builds with RG_DEBUG_CHECKS run it after every change.
 */
#include "core/core-impl.h"

#include <stdlib.h>

/* A description of the problem (collected string), or NULL. */
typedef const char *problem;

static const char *node_desc(const rg_node *n) {
  return rgk_sprintf("node #%llu (%s)", (unsigned long long)n->id, rg_op_name(n->op));
}

static problem check_use(const rg_fgraph *fg, const rg_node *n, int i, rg_memo *uses,
                         rg_memo *inputs) {
  const rg_variable *x = n->inputs[i];
  if (!x) return rgk_sprintf("input %d of %s is NULL", i, node_desc(n));
  if (x->fgraph != fg) return rgk_sprintf("input %d of %s is not in the graph", i, node_desc(n));
  if (x->owner) {
    if (x->owner->fgraph != fg) return rgk_sprintf("input %d of %s comes from a node outside the graph", i, node_desc(n));
    if (x->owner->outputs[x->index] != x) return rgk_sprintf("input %d of %s: broken owner link", i, node_desc(n));
    if (x->owner->label >= n->label)
      return rgk_sprintf("the order is not topological: %s uses %s, which comes later (a cycle?)",
                         node_desc(n), node_desc(x->owner));
  } else if (!rg_is_constant(x) && !rg_memo_get(inputs, x)) {
    return rgk_sprintf("input %d of %s is a free variable that is no graph input", i, node_desc(n));
  }
  uint32_t p = n->cpos[i];
  if (p >= x->nclients || x->clients[p].node != n || x->clients[p].index != i)
    return rgk_sprintf("input %d of %s is missing from its variable's clients", i, node_desc(n));
  rg_memo_put(uses, x, (void *)((uintptr_t)rg_memo_get(uses, x) + 1));
  return NULL;
}

static problem check_clients(const rg_fgraph *fg, const rg_variable *v) {
  for (uint32_t c = 0; c < v->nclients; c++) {
    rg_client cl = v->clients[c];
    if (cl.node) {
      if (cl.node->fgraph != fg || cl.index < 0 || cl.index >= cl.node->nin ||
          cl.node->inputs[cl.index] != v || cl.node->cpos[cl.index] != c)
        return rgk_sprintf("client %u of a variable used by %s is stale", c, node_desc(cl.node));
    } else if (cl.index < 0 || cl.index >= fg->nout || fg->outputs[cl.index] != v ||
               fg->out_cpos[cl.index] != c) {
      return rgk_sprintf("output client %u of a variable is stale", c);
    }
  }
  return NULL;
}

static problem check_types(const rg_node *n) {
  const rg_op *op = n->op;
  rgc_outs outs = {0};
  if (op->cls->make_node(NULL, &op, n->nin, n->inputs, &outs) != RG_OK)
    return rgk_sprintf("%s no longer type-checks with its inputs", node_desc(n));
  if (outs.n != n->nout) return rgk_sprintf("%s: the number of outputs changed", node_desc(n));
  for (int k = 0; k < n->nout; k++)
    if (!rg_type_stands_for(outs.types[k], n->outputs[k]->type))
      return rgk_sprintf("%s: output %d has type %s, but its inputs give %s", node_desc(n), k,
                         rg_type_str(n->outputs[k]->type), rg_type_str(outs.types[k]));
  return NULL;
}

static problem check_node(const rg_fgraph *fg, const rg_node *n, rg_memo *uses, rg_memo *inputs,
                          rgk_stack *vars) {
  for (int i = 0; i < n->nin; i++) {
    problem p = check_use(fg, n, i, uses, inputs);
    if (p) return p;
    rgk_push(vars, (rgk_word)n->inputs[i]);
  }
  bool used = false;
  for (int k = 0; k < n->nout; k++) {
    const rg_variable *o = n->outputs[k];
    if (o->owner != n || o->index != k || o->fgraph != fg)
      return rgk_sprintf("output %d of %s: broken owner link", k, node_desc(n));
    problem p = check_clients(fg, o);
    if (p) return p;
    used |= o->nclients > 0;
  }
  if (!used) return rgk_sprintf("%s has no client and should have been pruned", node_desc(n));
  return check_types(n);
}

static problem check_list(const rg_fgraph *fg, rg_memo *uses, rgk_stack *vars) {
  rg_memo *inputs = rg_memo_new();
  for (int k = 0; k < fg->nin; k++) rg_memo_put(inputs, fg->inputs[k], fg->inputs[k]);
  size_t count = 0;
  uint32_t bycode[RG_OP_COUNT] = {0};
  const rg_node *prev = NULL;
  for (const rg_node *n = fg->head; n; prev = n, n = n->next) {
    if (n->fgraph != fg) return rgk_sprintf("%s on the order list belongs elsewhere", node_desc(n));
    if (n->prev != prev) return "the order list is broken";
    if (prev && prev->label >= n->label) return "order labels do not increase";
    if (++count > fg->nnodes) return "more nodes on the order list than counted";
    bycode[n->op->code]++;
    problem p = check_node(fg, n, uses, inputs, vars);
    if (p) return p;
  }
  if (prev != fg->tail) return "the order list's tail is wrong";
  if (count != fg->nnodes) return rgk_sprintf("%zu nodes on the order list, %zu counted", count, fg->nnodes);
  for (int c = 0; c < RG_OP_COUNT; c++)
    if (bycode[c] != fg->nbycode[c])
      return rgk_sprintf("%u %s nodes on the order list, %u counted", bycode[c], rg_opcode_name(c), fg->nbycode[c]);
  return NULL;
}

static problem check_io(const rg_fgraph *fg, rg_memo *uses, rgk_stack *vars) {
  for (int i = 0; i < fg->nin; i++) {
    const rg_variable *v = fg->inputs[i];
    if (v->owner || v->fgraph != fg) return rgk_sprintf("graph input %d is not a free variable of the graph", i);
    problem p = check_clients(fg, v);
    if (p) return p;
  }
  for (int k = 0; k < fg->nout; k++) {
    rg_variable *v = fg->outputs[k];
    if (v->fgraph != fg) return rgk_sprintf("graph output %d is not in the graph", k);
    uint32_t p = fg->out_cpos[k];
    if (p >= v->nclients || v->clients[p].node || v->clients[p].index != k)
      return rgk_sprintf("graph output %d is missing from its variable's clients", k);
    rg_memo_put(uses, v, (void *)((uintptr_t)rg_memo_get(uses, v) + 1));
    rgk_push(vars, (rgk_word)v);
  }
  return NULL;
}

static problem check_counts(rg_memo *uses, rgk_stack *vars) {
  for (size_t k = 0; k < vars->n; k++) {
    const rg_variable *v = (const rg_variable *)vars->v[k];
    uintptr_t n = (uintptr_t)rg_memo_get(uses, v);
    if (n != v->nclients)
      return rgk_sprintf("a variable%s%s has %u clients but %zu uses", v->name ? " named " : "",
                         v->name ? v->name : "", v->nclients, (size_t)n);
  }
  return NULL;
}

int rg_fgraph_check(rg_fgraph *fg) {
  rg_memo *uses = rg_memo_new();
  rgk_stack vars = {0};
  problem p = check_list(fg, uses, &vars);
  if (!p) p = check_io(fg, uses, &vars);
  if (!p) p = check_counts(uses, &vars);
  if (!p) return RG_OK;
  return rg_error(fg->ctx, RG_ERR, "FunctionGraph invariant violated: %s", p);
}
