/*
 * linker.c — turning a graph into a program: placement, cells, thunks,
 * transfers, a schedule.
 *
 * The linker is the boundary between the collected world and the manual
 * one.  It reads graph nodes (collected) and produces a program in plain
 * memory: a storage cell per variable, a thunk per node bound to its
 * backend's kernel, and for each thunk the cells whose last reader it is,
 * so intermediates can be released as soon as they are dead.  Constants
 * are copied into cells once and live as long as the program.
 *
 * Placement (ggml-backend's scheduler, simplified to one pass in schedule
 * order): a node runs on the backend of the device its output's type
 * names when that backend can run it, else on the backend the mode asks
 * for when it can, else on the CPU.  ifelse runs on the CPU: the virtual
 * machine reads its condition there, and its branches stay where their
 * `then` values live.  Every cell lives on the device of the
 * backend that wrote it (inputs: the device their type names).  When a
 * thunk reads a cell from another device, a transfer thunk placed before
 * it copies the value into a cell on the thunk's device; the copy is made
 * once per value and device and shared by every later reader.  A constant
 * is copied at link time instead: it is uploaded once, not per call.
 * Outputs come back to host memory unless the caller keeps them on their
 * device.
 *
 * Cells are numbered: inputs first, then constants and node outputs in
 * schedule order, each moved copy after the cell it copies.
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
  rg_map moved;      /* (cell + 1) << 8 | backend slot -> its copy on that device */
  const rgb_link_opts *o;
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

/* The cell of a variable read by a node; constants get a host cell on
 * first use. */
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
  p->cell_dev[c] = RG_DEVICE_HOST;
  if (!p->cells[c]) return lerr(L, "out of memory for a constant");
  p->const_cells[p->nconst++] = c;
  if (!cm_put(&L->cells, v, c)) return lerr(L, "out of memory");
  *out = c;
  return true;
}

/* ------------------------------------------------------------------ placement */

static int backend_slot(const rgb_program *p, const rg_backend *b) {
  for (int i = 0; i < p->nbackends; i++)
    if (p->backend[i] == b) return i;
  return -1;
}

const rg_backend *rgb_program_backend_on(const rgb_program *p, rg_device d) {
  for (int i = 0; i < p->nbackends; i++)
    if (p->backend[i]->device == d) return p->backend[i];
  return NULL;
}

static bool can_run(const rg_backend *b, const rgb_node *bn) {
  return b && b->iface->supports(b->ctx, bn);
}

/* Arithmetic on integer scalars (shapes, sizes, steps): on a device it
 * would only cost transfers, since its readers are shape arguments. */
static bool shape_arithmetic(const rgb_node *bn) {
  if (!bn->nout || rg_opcode_family(bn->code) != RG_FAM_ELEMWISE) return false;
  for (int j = 0; j < bn->nout; j++)
    if (bn->out[j].ndim || !rg_dtype_is_int(bn->out[j].dtype)) return false;
  for (int i = 0; i < bn->nin; i++)
    if (bn->in[i].ndim || !rg_dtype_is_int(bn->in[i].dtype)) return false;
  return true;
}

/* The device every reader of an allocation's value is typed for, or the
 * host (readers on several devices, none, or a graph output).  A rewrite
 * makes its zeros and BLAS accumulators from host sizes, so their types
 * say host even in a graph placed on a device; they are made where they
 * are read rather than made on the host and copied. */
static rg_device readers_device(const rg_node *n) {
  if (n->op->code != RG_OP_ALLOC && n->op->code != RG_OP_ALLOC_EMPTY) return RG_DEVICE_HOST;
  const rg_variable *o = n->outputs[0];
  rg_device d = RG_DEVICE_HOST;
  for (uint32_t c = 0; c < o->nclients; c++) {
    const rg_node *r = o->clients[c].node;
    rg_device rd = r && r->nout ? r->outputs[0]->type->device : RG_DEVICE_HOST;
    if (rd == RG_DEVICE_HOST || (c > 0 && rd != d)) return RG_DEVICE_HOST;
    d = rd;
  }
  return d;
}

/* The backend a node runs on (see the file comment), or NULL. */
static const rg_backend *place(const rgb_program *p, const rgb_node *bn, const rg_node *n) {
  if (bn->code == RG_OP_IFELSE) return &rgb_cpu;
  rg_device want = bn->nout ? bn->out[0].device : RG_DEVICE_HOST;
  if (want == RG_DEVICE_HOST) want = readers_device(n);
  const rg_backend *b = rgb_program_backend_on(p, want);
  if (b != &rgb_cpu && can_run(b, bn)) return b;
  if (want == RG_DEVICE_HOST && shape_arithmetic(bn) && can_run(&rgb_cpu, bn)) return &rgb_cpu;
  if (can_run(p->backend[0], bn)) return p->backend[0];
  return can_run(&rgb_cpu, bn) ? &rgb_cpu : NULL;
}

static bool add_backend(linker *L, const rg_backend *b, bool own) {
  rgb_program *p = L->p;
  if (p->nbackends == RGB_MAX_BACKENDS) return lerr(L, "more than %d backends", RGB_MAX_BACKENDS);
  p->own[p->nbackends] = own;
  p->backend[p->nbackends++] = b;
  return true;
}

/* The backend asked for, the CPU, and one for each device an input's type
 * names (made by the device's name, owned by the program). */
static bool setup_backends(linker *L, int nin, rg_variable *const *inputs) {
  const rgb_link_opts *o = L->o;
  const rg_backend *pref = o->backend;
  bool own = false;
  if (!pref && o->backend_name && strcmp(o->backend_name, "cpu")) {
    char why[256];
    rg_backend *b = rg_backend_new(o->backend_name, why, sizeof why);
    if (!b) return lerr(L, "backend %s cannot run here: %s", o->backend_name, why);
    pref = b;
    own = true;
  }
  if (!pref) pref = &rgb_cpu;
  if (!add_backend(L, pref, own)) return false;
  if (pref != &rgb_cpu && !add_backend(L, &rgb_cpu, false)) return false;
  /* an inner graph runs where its node runs, whatever its types say */
  for (int i = 0; i < nin && !o->inner; i++) {
    rg_device d = inputs[i]->type->device;
    if (rgb_program_backend_on(L->p, d)) continue;
    char name[16], why[256];
    rg_device_str(d, name, sizeof name);
    rg_backend *b = rg_backend_new(name, why, sizeof why);
    if (!b) return lerr(L, "input %s lives on %s: %s", var_label(inputs[i]), name, why);
    if (!add_backend(L, b, true)) return false;
  }
  return true;
}

/* ------------------------------------------------------------------ transfers */

/* A thunk copying cell `from` (a value of static type vt) into a new cell
 * on b's device. */
static bool emit_transfer(linker *L, int32_t from, const rgb_vtype *vt, const rg_backend *b,
                          int32_t to) {
  rgb_program *p = L->p;
  rgb_thunk *t = &p->thunks[p->nthunks++];
  t->kind = RGB_T_TRANSFER;
  t->backend = b;
  t->fn = rgb_transfer_kernel;
  t->node.code = RGB_TRANSFER;
  t->node.inplace = t->node.view_of = -1;
  t->node.nin = t->node.nout = 1;
  t->node.label = rg_strdup("transfer");
  rgb_vtype *in = rg_malloc(sizeof *in), *out = rg_malloc(sizeof *out);
  t->node.in = in;
  t->node.out = out;
  if (!in || !out) return lerr(L, "out of memory");
  *in = *out = *vt;
  in->device = p->cell_dev[from];
  out->device = b->device;
  t->in_cells = rg_malloc(sizeof(int32_t));
  t->out_cells = rg_malloc(sizeof(int32_t));
  rg_tensor ***inp = rg_malloc(sizeof *inp), ***outp = rg_malloc(sizeof *outp);
  t->x = (rgb_exec){.node = &t->node, .inp = inp, .outp = outp, .rt = p->rt,
                    .state = (void *)b->buft, .buft = b->buft};
  if (!t->node.label || !t->in_cells || !t->out_cells || !inp || !outp) return lerr(L, "out of memory");
  t->in_cells[0] = from;
  t->out_cells[0] = to;
  inp[0] = &p->cells[from];
  outp[0] = &p->cells[to];
  p->producer[to] = (int32_t)(t - p->thunks);
  p->ntransfers++;
  return true;
}

/* The copy of cell c on b's device (c itself when it lives there): made
 * once per value and device, by a transfer thunk emitted now (before the
 * reader being linked), or at link time for a constant. */
static bool moved_cell(linker *L, int32_t c, const rgb_vtype *vt, const rg_backend *b,
                       int32_t *out) {
  rgb_program *p = L->p;
  if (p->cell_dev[c] == b->device) return *out = c, true;
  uint64_t key = (uint64_t)(c + 1) << 8 | (uint64_t)backend_slot(p, b); /* never 0 */
  uint64_t *hit = rg_map_get(&L->moved, key);
  if (hit) return *out = (int32_t)*hit, true;
  int32_t c2 = p->ncells++;
  p->cell_dev[c2] = b->device;
  if (rg_map_put(&L->moved, key, (uint64_t)c2)) return lerr(L, "out of memory");
  *out = c2;
  if (!p->cells[c] || p->producer[c] >= 0) return emit_transfer(L, c, vt, b, c2);
  p->cells[c2] = rg_tensor_to_device(p->cells[c], b->buft);  /* a constant */
  if (!p->cells[c2]) return lerr(L, "cannot copy a constant to %s", b->name);
  p->const_cells[p->nconst++] = c2;
  return true;
}

/* ------------------------------------------------------------------ thunks */

static bool inner_error(linker *L, const rgb_node *bn) {
  char why[512];
  snprintf(why, sizeof why, "%s", L->err);
  return lerr(L, "the inner graph of %s: %s", bn->label, why);
}

/* Binds a node to b's kernel; inner graphs are linked first, for b or, when
 * b runs a composite's on the host, for the CPU (a composite's already is:
 * see link_thunk).  A Scan's steps run on b. */
static bool bind_node(linker *L, rgb_node *bn, const rg_node *n, const rg_backend *b,
                      rgb_bound *bound) {
  const rg_backend *ib = b->iface->inner_on_host && n->op->code != RG_OP_SCAN ? &rgb_cpu : b;
  if (bn->inner && ib != &rgb_cpu) {
    rgb_program_free(bn->inner);
    bn->inner = NULL;
  }
  if (!bn->inner && rgb_node_link_inner(bn, n, ib, L->o->nthreads, L->err, L->errlen))
    return inner_error(L, bn);
  if (n->op->code == RG_OP_IFELSE) return true;
  char why[512] = "";
  if (b->iface->bind(b->ctx, bn, bound, why, sizeof why))
    return lerr(L, "the %s backend cannot bind %s%s%s", b->name, bn->label, why[0] ? ": " : "", why);
  return true;
}

/* The thunk's cell pointers and output cells (on its backend's device). */
static bool wire_thunk(linker *L, rgb_thunk *t, const rg_node *n) {
  rgb_program *p = L->p;
  t->kind = n->op->code == RG_OP_IFELSE ? RGB_T_IFELSE : RGB_T_KERNEL;
  t->out_cells = rg_malloc((size_t)(n->nout + 1) * sizeof(int32_t));
  rg_tensor ***inp = rg_malloc((size_t)(n->nin + 1) * sizeof *inp);
  rg_tensor ***outp = rg_malloc((size_t)(n->nout + 1) * sizeof *outp);
  t->x.inp = inp;
  t->x.outp = outp;
  t->x.node = &t->node;
  t->x.rt = p->rt;
  t->x.buft = t->backend->buft;
  if (!t->out_cells || !inp || !outp) return lerr(L, "out of memory");
  for (int i = 0; i < n->nin; i++) inp[i] = &p->cells[t->in_cells[i]];
  for (int j = 0; j < n->nout; j++) {
    int32_t c = p->ncells++;
    if (!cm_put(&L->cells, n->outputs[j], c)) return lerr(L, "out of memory");
    t->out_cells[j] = c;
    outp[j] = &p->cells[c];
    /* an ifelse's outputs are its branch values, wherever they live */
    p->cell_dev[c] = t->kind == RGB_T_IFELSE ? p->cell_dev[t->in_cells[1 + j]] : t->backend->device;
    p->producer[c] = (int32_t)(t - p->thunks);
  }
  /* never write in place into a borrowed input or a constant */
  if (t->node.inplace >= 0 && p->producer[t->in_cells[t->node.inplace]] < 0) t->node.inplace = -1;
  if (t->node.inplace >= 0 && t->node.code == RG_OP_SCAN && !scan_buffers_owned(p, t)) t->node.inplace = -1;
  return true;
}

/* Where input i (in cell c) must be read: on the node's backend, or on
 * the host where the backend reads it there (shape arguments), or where it
 * lives when only its shape is read (shape, shape_i); for an
 * ifelse, the condition on the host (the virtual machine reads it) and
 * each branch where its `then` value lives, so the branch taken is never
 * copied to the host and back. */
static const rg_backend *input_home(const rgb_program *p, const rgb_node *bn, int i,
                                    const int32_t *in_cells, int32_t c, const rg_backend *b) {
  if (rgb_metadata_input(bn, i)) { /* only its shape is read: no transfer */
    const rg_backend *home = rgb_program_backend_on(p, p->cell_dev[c]);
    return home ? home : b;
  }
  if (bn->code != RG_OP_IFELSE)
    return b->iface->host_input && b->iface->host_input(b->ctx, bn, i) ? &rgb_cpu : b;
  if (i == 0) return &rgb_cpu;
  int32_t then = i <= bn->nout ? c : in_cells[i - bn->nout];
  const rg_backend *home = rgb_program_backend_on(p, p->cell_dev[then]);
  return home ? home : &rgb_cpu;
}

static bool link_thunk(linker *L, const rg_node *n) {
  rgb_program *p = L->p;
  rgb_node bn;
  if (rgb_node_init(&bn, n)) return lerr(L, "out of memory");
  bn.codegen = L->o->codegen;
  if (n->op->code == RG_OP_OPAQUE) {
    lerr(L, "%s is an opaque op: it has no kernel and cannot be executed", bn.label);
    return rgb_node_clear(&bn), false;
  }
  /* a composite's inner graph is linked for the host before placement: a
   * backend that generates one kernel for it is asked with the graph at
   * hand */
  if (n->op->code == RG_OP_COMPOSITE && rgb_node_link_inner(&bn, n, &rgb_cpu, 1, L->err, L->errlen)) {
    inner_error(L, &bn);
    return rgb_node_clear(&bn), false;
  }
  const rg_backend *b = place(p, &bn, n);
  rgb_bound bound = {0};
  if (!b || !bind_node(L, &bn, n, b, &bound)) {
    if (!b) lerr(L, "no backend can run %s", bn.label);
    return rgb_node_clear(&bn), false;
  }
  int32_t *in_cells = rg_malloc((size_t)(n->nin + 1) * sizeof(int32_t));
  bool ok = in_cells != NULL || lerr(L, "out of memory");
  for (int i = 0; ok && i < n->nin; i++) {
    int32_t c;
    ok = cell_of_input(L, n->inputs[i], &c) &&
         moved_cell(L, c, &bn.in[i], input_home(p, &bn, i, in_cells, c, b), &in_cells[i]);
  }
  rgb_thunk *t = &p->thunks[p->nthunks++];
  t->node = bn;
  t->in_cells = in_cells;
  t->backend = b;
  t->fn = bound.fn;
  t->free_state = bound.free_state;
  t->x.state = bound.state;
  return ok && wire_thunk(L, t, n);
}

/* ------------------------------------------------------------------ in-place marks */

/* Whether the value in cell c has no reader but the one thunk that reads
 * it once, and is no output: an ifelse's output is one of its branch
 * values, so each of those must be so too (the ifelse their reader). */
static bool sole_reader(const rgb_program *p, const int32_t *readers, const bool *out, int32_t c) {
  if (readers[c] != 1 || out[c]) return false;
  int32_t k = p->producer[c];
  if (k < 0 || p->thunks[k].kind != RGB_T_IFELSE) return true;
  const rgb_thunk *t = &p->thunks[k];
  int j = 0;
  while (t->out_cells[j] != c) j++;
  return sole_reader(p, readers, out, t->in_cells[1 + j]) &&
         sole_reader(p, readers, out, t->in_cells[1 + t->node.nout + j]);
}

/* Whether every input thunk t overwrites has t as its only reader. */
static bool victims_unread(const rgb_program *p, const rgb_thunk *t, const int32_t *readers, const bool *out) {
  if (t->node.code != RG_OP_SCAN) return sole_reader(p, readers, out, t->in_cells[t->node.inplace]);
  char scratch[RG_SCAN_SCRATCH(t->node.nints)];
  rg_scan_info s;
  if (!rg_scan_info_decode(t->node.nints, t->node.ints, &s, scratch)) return false;
  for (int k = 0; k < s.n_mit_mot; k++)
    if (!sole_reader(p, readers, out, t->in_cells[rg_scan_outer_in(&s, RG_SCAN_MIT_MOT, k)])) return false;
  return true;
}

/* Drops the in-place mark of every node that would overwrite a value
 * something else still reads, or an output: an op made in place by hand
 * (a graph file's `(inplace K)`, rg_op_inplace) is checked here as
 * inplace_elemwise checks the ones it makes, so a mark is never unsafe.
 * The storage check at run time does not see this case: the readers
 * share the cell's one tensor. */
static bool check_inplace(linker *L) {
  rgb_program *p = L->p;
  int32_t *readers = rg_calloc((size_t)p->ncells + 1, sizeof(int32_t));
  bool *out = rg_calloc((size_t)p->ncells + 1, sizeof(bool));
  if (!readers || !out) {
    rg_free(readers);
    rg_free(out);
    return lerr(L, "out of memory");
  }
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    for (int i = 0; i < t->node.nin; i++) {
      bool again = false; /* an ifelse passes on one value: both branches count once */
      for (int j = 0; j < i && t->kind == RGB_T_IFELSE; j++) again |= t->in_cells[j] == t->in_cells[i];
      readers[t->in_cells[i]] += !again;
    }
  }
  for (int32_t j = 0; j < p->nout; j++) out[p->out_cells[j]] = true;
  for (int32_t k = 0; k < p->nthunks; k++) {
    rgb_thunk *t = &p->thunks[k];
    if (t->node.inplace >= 0 && !victims_unread(p, t, readers, out)) t->node.inplace = -1;
  }
  rg_free(readers);
  rg_free(out);
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

static bool alloc_program(linker *L, int nthunks_max, int nin, int nout, int ncells_max) {
  rgb_program *p = L->p;
  p->cells = rg_calloc((size_t)ncells_max, sizeof *p->cells);
  p->cell_dev = rg_calloc((size_t)ncells_max, sizeof *p->cell_dev);
  p->cellp = rg_calloc((size_t)ncells_max, sizeof *p->cellp);
  p->producer = rg_malloc((size_t)ncells_max * sizeof(int32_t));
  p->const_cells = rg_malloc((size_t)ncells_max * sizeof(int32_t));
  p->in_cells = rg_malloc((size_t)(nin + 1) * sizeof(int32_t));
  p->out_cells = rg_malloc((size_t)(nout + 1) * sizeof(int32_t));
  p->thunks = rg_calloc((size_t)(nthunks_max + 1), sizeof *p->thunks);
  p->state = rg_calloc((size_t)(nthunks_max + 1), 1);
  p->stack = rg_malloc((size_t)ncells_max * sizeof(int32_t)); /* >= edges + outputs */
  p->need = rg_calloc((size_t)ncells_max, 1);
  p->in_copied = rg_calloc((size_t)nin + 1, 1);
  if (!p->cells || !p->cell_dev || !p->cellp || !p->producer || !p->const_cells || !p->in_cells ||
      !p->out_cells || !p->thunks || !p->state || !p->stack || !p->need ||
      !p->in_copied)
    return lerr(L, "out of memory");
  for (int i = 0; i < ncells_max; i++) {
    p->producer[i] = -1;
    p->cellp[i] = &p->cells[i];
  }
  return true;
}

/* Bounds: a cell per input, per node input (a constant) and per node
 * output, and as many again for moved copies; a thunk per node and per
 * moved copy. */
static int count_edges(int nnodes, rg_node *const *nodes, int nin, int nout) {
  int n = nin + nout;
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
    p->cell_dev[p->in_cells[i]] = L->o->inner ? p->backend[0]->device : inputs[i]->type->device;
    if (!cm_put(&L->cells, inputs[i], p->in_cells[i])) return lerr(L, "out of memory");
  }
  p->nin = nin;
  return true;
}

static bool link_outputs(linker *L, int nout, rg_variable *const *outputs) {
  rgb_program *p = L->p;
  const rg_backend *home = L->o->inner ? p->backend[0] : &rgb_cpu;
  for (int j = 0; j < nout; j++) {
    int32_t c;
    if (!cell_of_input(L, outputs[j], &c)) return false;
    rgb_vtype vt;
    rgb_vtype_of(&vt, outputs[j]->type);
    if (L->o->device_outputs) p->out_cells[j] = c;
    else if (!moved_cell(L, c, &vt, home, &p->out_cells[j])) return false;
  }
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

static rgb_program *link_fail(linker *L) {
  if (!L->err[0]) snprintf(L->err, L->errlen, "out of memory");
  rgb_program_free(L->p);
  return NULL;
}

rgb_program *rgb_link(int nnodes, rg_node *const *nodes, int nin, rg_variable *const *inputs,
                      int nout, rg_variable *const *outputs, const rgb_link_opts *o, char *err,
                      size_t errlen) {
  static const rgb_link_opts defaults = {.release = false};
  linker L = {.err = err, .errlen = errlen, .o = o ? o : &defaults};
  err[0] = 0;
  L.p = rg_calloc(1, sizeof *L.p);
  if (!L.p) return link_fail(&L);
  int edges = count_edges(nnodes, nodes, nin, nout);
  bool ok = rg_map_init(&L.cells, &rg_heap, (size_t)edges) == 0;
  ok = ok && rg_map_init(&L.moved, &rg_heap, 16) == 0;
  ok = ok && alloc_program(&L, nnodes + edges, nin, nout, 2 * edges);
  if (ok) L.p->rt = rgb_runtime_new(L.o->nthreads, L.o->release);
  ok = ok && L.p->rt && setup_backends(&L, nin, inputs) && link_io(&L, nin, inputs);
  for (int k = 0; ok && k < nnodes; k++) {
    ok = link_thunk(&L, nodes[k]);
    if (ok && nodes[k]->op->code == RG_OP_IFELSE) L.p->lazy = true;
  }
  if (L.o->stack_vm) L.p->lazy = true; /* the mode's linker asked for the stack VM */
  ok = ok && link_outputs(&L, nout, outputs) && check_inplace(&L);
  L.p->release = L.o->release && !L.p->lazy;
  set_profile(L.p, L.o->profile);
  ok = ok && (L.p->lazy || rgb_join_into(L.p) || lerr(&L, "out of memory"));
  ok = ok && plan_releases(&L);
  if (ok && L.o->plan) rgb_plan_memory(L.p);
  rg_map_free(&L.cells);
  rg_map_free(&L.moved);
  return ok ? L.p : link_fail(&L);
}

void rgb_program_free(rgb_program *p) {
  if (!p) return;
  for (int32_t k = 0; k < p->nthunks; k++) {
    rgb_thunk *t = &p->thunks[k];
    if (t->free_state) t->free_state(t->x.state);
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
  rgb_plan_clear(p); /* after the cells: they held wrappers of the arena */
  for (int i = 0; i < p->nbackends; i++)
    if (p->own[i]) rg_backend_free((rg_backend *)p->backend[i]);
  rg_free(p->cells);
  rg_free(p->cell_dev);
  rg_free(p->cellp);
  rg_free(p->producer);
  rg_free(p->const_cells);
  rg_free(p->in_cells);
  rg_free(p->out_cells);
  rg_free(p->thunks);
  rg_free(p->state);
  rg_free(p->stack);
  rg_free(p->need);
  rg_free(p->in_copied);
  rg_free(p);
}
