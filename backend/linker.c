/*
 * linker.c — turning a graph into a program: cells, thunks, a schedule.
 *
 * The linker is the boundary between the collected world and the manual
 * one.  It reads graph nodes (collected) and produces a program in plain
 * memory: a storage cell per variable, a thunk per node bound to its
 * backend kernel, and for each thunk the cells whose last reader it is, so
 * intermediates can be released as soon as they are dead.  Constants are
 * copied into cells once and live as long as the program.
 *
 * Cells are numbered: inputs first, then constants, then node outputs in
 * schedule order.
 */
#include "backend/backend-impl.h"
#include "base/base.h"
#include "relgraph/scan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rgb_program;
/* A Scan in place writes into every mit-mot buffer: each must be computed
 * by a node of the program, never a borrowed input or a constant. */
static bool scan_buffers_owned(const rgb_program *p, const rgb_thunk *t) {
  char scratch[RG_SCAN_SCRATCH(t->node.nints)];
  rg_scan_info s;
  if (!rg_scan_info_decode(t->node.nints, t->node.ints, &s, scratch)) return false;
  for (int k = 0; k < s.n_mit_mot; k++)
    if (p->producer[t->in_cells[rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k)]] < 0) return false;
  return true;
}

/* ------------------------------------------------------------------ variable -> cell map */

/* Variable -> cell number, in the base hash map keyed by the variable's
 * address.  It lives only while linking, when the graph holds every key,
 * so plain memory may hold them. */
typedef rg_map cellmap;

static int32_t cm_get(const cellmap *m, const rg_variable *v) {
  uint64_t *c = rg_map_get(m, (uint64_t)(uintptr_t)v);
  return c ? (int32_t)*c : -1;
}

static bool cm_put(cellmap *m, const rg_variable *v, int32_t c) {
  return rg_map_put(m, (uint64_t)(uintptr_t)v, (uint64_t)c) == 0;
}

/* ------------------------------------------------------------------ linking */

typedef struct linker {
  rgb_program *p;
  cellmap cells;
  const rgb_backend *backend;
  char *err;
  size_t errlen;
} linker;

static bool lerr(linker *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool lerr(linker *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(L->err, L->errlen, fmt, ap);
  va_end(ap);
  return false;
}

static const char *var_label(const rg_variable *v) { return v->name ? v->name : "an unnamed input"; }

/* The cell of a variable read by a node; constants get a cell on first use. */
static bool cell_of_input(linker *L, const rg_variable *v, int32_t *out) {
  int32_t c = cm_get(&L->cells, v);
  if (c >= 0) {
    *out = c;
    return true;
  }
  if (!rg_is_constant(v))
    return lerr(L, "the graph needs %s, which is not among the inputs", var_label(v));
  rgb_program *p = L->p;
  c = p->ncells++;
  p->cells[c] = rg_constant_to_tensor(v);
  if (!p->cells[c]) return lerr(L, "out of memory for a constant");
  p->const_cells[p->nconst++] = c;
  if (!cm_put(&L->cells, v, c)) return lerr(L, "out of memory");
  *out = c;
  return true;
}

static bool link_thunk(linker *L, rgb_thunk *t, const rg_node *n) {
  rgb_program *p = L->p;
  if (rgb_node_init(&t->node, n)) return lerr(L, "out of memory");
  if (n->op->code == RG_OP_OPAQUE)
    return lerr(L, "%s is an opaque op: it has no kernel and cannot be executed", t->node.label);
  if (rgb_node_link_inner(&t->node, n, L->backend->name, L->err, L->errlen)) {
    char why[512];
    snprintf(why, sizeof why, "%s", L->err);
    return lerr(L, "the inner graph of %s: %s", t->node.label, why);
  }
  if (!L->backend->supports(&t->node))
    return lerr(L, "the %s backend cannot run %s", L->backend->name, t->node.label);
  t->kind = n->op->code == RG_OP_IFELSE ? RGB_T_IFELSE : RGB_T_KERNEL;
  t->fn = t->kind == RGB_T_KERNEL ? L->backend->bind(&t->node) : NULL;
  t->in_cells = rg_malloc((size_t)(n->nin + 1) * sizeof(int32_t));
  t->out_cells = rg_malloc((size_t)(n->nout + 1) * sizeof(int32_t));
  rg_tensor ***inp = rg_malloc((size_t)(n->nin + 1) * sizeof *inp);
  rg_tensor ***outp = rg_malloc((size_t)(n->nout + 1) * sizeof *outp);
  t->x.inp = inp;
  t->x.outp = outp;
  t->x.node = &t->node;
  t->x.rt = p->rt;
  if (!t->in_cells || !t->out_cells || !inp || !outp) return lerr(L, "out of memory");
  for (int i = 0; i < n->nin; i++) {
    if (!cell_of_input(L, n->inputs[i], &t->in_cells[i])) return false;
    inp[i] = &p->cells[t->in_cells[i]];
  }
  for (int j = 0; j < n->nout; j++) {
    int32_t c = p->ncells++;
    if (!cm_put(&L->cells, n->outputs[j], c)) return lerr(L, "out of memory");
    t->out_cells[j] = c;
    outp[j] = &p->cells[c];
    p->producer[c] = (int32_t)(t - p->thunks);
  }
  /* never write in place into a borrowed input or a constant */
  if (t->node.inplace >= 0 && p->producer[t->in_cells[t->node.inplace]] < 0) t->node.inplace = -1;
  if (t->node.inplace >= 0 && t->node.code == RG_OP_SCAN && !scan_buffers_owned(p, t)) t->node.inplace = -1;
  return true;
}

/* For each intermediate cell, the last thunk that reads it releases it
 * (a cell nobody reads is released by its producer). */
static bool plan_releases(linker *L) {
  rgb_program *p = L->p;
  int32_t *last = rg_malloc((size_t)p->ncells * sizeof(int32_t));
  int32_t *count = rg_calloc((size_t)p->nthunks + 1, sizeof(int32_t));
  bool *keep = rg_calloc((size_t)p->ncells, sizeof(bool));
  if (!last || !count || !keep) {
    rg_free(last);
    rg_free(count);
    rg_free(keep);
    return lerr(L, "out of memory");
  }
  for (int32_t c = 0; c < p->ncells; c++) last[c] = p->producer[c];
  for (int32_t i = 0; i < p->nout; i++) keep[p->out_cells[i]] = true;
  for (int32_t k = 0; k < p->nthunks; k++)
    for (int i = 0; i < p->thunks[k].node.nin; i++) last[p->thunks[k].in_cells[i]] = k;
  for (int32_t c = 0; c < p->ncells; c++)
    if (p->producer[c] >= 0 && !keep[c]) count[last[c]]++;
  bool ok = true;
  for (int32_t k = 0; k < p->nthunks && ok; k++) {
    p->thunks[k].release = rg_malloc((size_t)(count[k] + 1) * sizeof(int32_t));
    ok = p->thunks[k].release != NULL;
  }
  for (int32_t c = 0; c < p->ncells && ok; c++)
    if (p->producer[c] >= 0 && !keep[c]) {
      rgb_thunk *t = &p->thunks[last[c]];
      t->release[t->nrelease++] = c;
    }
  rg_free(last);
  rg_free(count);
  rg_free(keep);
  return ok || lerr(L, "out of memory");
}

static bool alloc_program(linker *L, int nnodes, int nin, int nout, int ncells_max) {
  rgb_program *p = L->p;
  p->cells = rg_calloc((size_t)ncells_max, sizeof *p->cells);
  p->cellp = rg_calloc((size_t)ncells_max, sizeof *p->cellp);
  p->producer = rg_malloc((size_t)ncells_max * sizeof(int32_t));
  p->const_cells = rg_malloc((size_t)ncells_max * sizeof(int32_t));
  p->in_cells = rg_malloc((size_t)(nin + 1) * sizeof(int32_t));
  p->out_cells = rg_malloc((size_t)(nout + 1) * sizeof(int32_t));
  p->thunks = rg_calloc((size_t)(nnodes + 1), sizeof *p->thunks);
  p->state = rg_calloc((size_t)(nnodes + 1), 1);
  p->stack = rg_malloc((size_t)ncells_max * sizeof(int32_t)); /* >= edges + outputs */
  p->need = rg_calloc((size_t)ncells_max, 1);
  if (!p->cells || !p->cellp || !p->producer || !p->const_cells || !p->in_cells ||
      !p->out_cells || !p->thunks || !p->state || !p->stack || !p->need)
    return lerr(L, "out of memory");
  for (int i = 0; i < ncells_max; i++) {
    p->producer[i] = -1;
    p->cellp[i] = &p->cells[i];
  }
  return true;
}

static int count_cells(int nnodes, rg_node *const *nodes, int nin) {
  int n = nin;
  for (int k = 0; k < nnodes; k++) n += nodes[k]->nin + nodes[k]->nout;
  return n + 1;
}

static bool link_io(linker *L, int nin, rg_variable *const *inputs) {
  rgb_program *p = L->p;
  for (int i = 0; i < nin; i++) {
    if (cm_get(&L->cells, inputs[i]) >= 0)
      return lerr(L, "input %d (%s) is listed twice", i, var_label(inputs[i]));
    if (inputs[i]->owner) return lerr(L, "input %d (%s) is computed by the graph", i, var_label(inputs[i]));
    p->in_cells[i] = p->ncells++;
    if (!cm_put(&L->cells, inputs[i], p->in_cells[i])) return lerr(L, "out of memory");
  }
  p->nin = nin;
  return true;
}

static bool link_outputs(linker *L, int nout, rg_variable *const *outputs) {
  rgb_program *p = L->p;
  for (int j = 0; j < nout; j++)
    if (!cell_of_input(L, outputs[j], &p->out_cells[j])) return false;
  p->nout = nout;
  return true;
}

/* Profiling reaches the inner programs that run thunk by thunk (Scan's),
 * so a profile shows the time of each inner node too. */
static void set_profile(rgb_program *p, bool profile) {
  p->profile = profile;
  for (int32_t k = 0; k < p->nthunks; k++)
    if (p->thunks[k].node.inner) set_profile(p->thunks[k].node.inner, profile);
}

rgb_program *rgb_link(int nnodes, rg_node *const *nodes, int nin, rg_variable *const *inputs,
                      int nout, rg_variable *const *outputs, const char *backend, bool release,
                      bool profile, int nthreads, char *err, size_t errlen) {
  linker L = {.err = err, .errlen = errlen};
  L.backend = rgb_backend_find(backend ? backend : "cpu");
  if (!L.backend) {
    snprintf(err, errlen, "no backend named %s", backend);
    return NULL;
  }
  char why[256];
  if (!rg_backend_available(L.backend->name, why, sizeof why)) {
    snprintf(err, errlen, "backend %s is not available: %s", L.backend->name, why);
    return NULL;
  }
  L.p = rg_calloc(1, sizeof *L.p);
  if (!L.p) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  int ncells = count_cells(nnodes, nodes, nin) + nout;
  bool ok = rg_map_init(&L.cells, &rg_heap, (size_t)ncells) == 0 &&
            alloc_program(&L, nnodes, nin, nout, ncells);
  if (ok) L.p->rt = rgb_runtime_new(nthreads, release);
  ok = ok && L.p->rt && link_io(&L, nin, inputs);
  for (int k = 0; ok && k < nnodes; k++) {
    ok = link_thunk(&L, &L.p->thunks[k], nodes[k]);
    L.p->nthunks = k + 1;
    if (ok && L.p->thunks[k].kind == RGB_T_IFELSE) L.p->lazy = true;
  }
  ok = ok && link_outputs(&L, nout, outputs);
  L.p->release = release && !L.p->lazy;
  set_profile(L.p, profile);
  ok = ok && plan_releases(&L);
  rg_map_free(&L.cells);
  if (!ok) {
    if (!err[0]) snprintf(err, errlen, "out of memory");
    rgb_program_free(L.p);
    return NULL;
  }
  return L.p;
}

void rgb_program_free(rgb_program *p) {
  if (!p) return;
  for (int32_t k = 0; k < p->nthunks; k++) {
    rgb_thunk *t = &p->thunks[k];
    rgb_node_clear(&t->node);
    rg_free(t->in_cells);
    rg_free(t->out_cells);
    rg_free((void *)t->x.inp);
    rg_free((void *)t->x.outp);
    rg_free(t->release);
  }
  for (int32_t c = 0; p->cells && c < p->ncells; c++) {
    bool borrowed = false;
    for (int32_t i = 0; i < p->nin; i++) borrowed |= p->in_cells[i] == c;
    if (!borrowed) rg_tensor_free(p->cells[c]);
  }
  rgb_runtime_free(p->rt);
  rg_free(p->cells);
  rg_free(p->cellp);
  rg_free(p->producer);
  rg_free(p->const_cells);
  rg_free(p->in_cells);
  rg_free(p->out_cells);
  rg_free(p->thunks);
  rg_free(p->state);
  rg_free(p->stack);
  rg_free(p->need);
  rg_free(p);
}
