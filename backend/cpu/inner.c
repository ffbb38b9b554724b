/*
 * inner.c — the ops with an inner graph: composite (an interpreter over
 * its scalar graph) and op_from_graph (the inner program run as a whole).
 *
 * composite.  The inner graph is a graph of scalar elementwise ops (and
 * nested composites) applied elementwise to broadcast inputs.  The
 * interpreter walks the output's elements in blocks of CB: for each block
 * it gathers every input's elements (broadcast, strided, in C order of the
 * output) into a contiguous buffer, then runs each inner op once over the
 * whole block with the op's typed, vectorised loop (elemwise.c), so the
 * per-op dispatch costs once per CB elements, never once per element; the
 * outputs are written straight into the (contiguous) output tensors, as
 * composites never work in place.  Constants of the inner graph are read
 * with stride 0.  Blocks are independent and shared among
 * threads, each with its own workspace.  A nested composite runs as one
 * more block program on the same block.
 *
 * Workspace of a program (one per thread): a slot (pointer, stride) and a
 * dtype per cell, a block buffer per cell, RGBC_MAXOPS conversion buffers
 * for inputs of another dtype, then the workspace of the largest nested
 * composite (nested ones run one after another).  A block buffer holds CB
 * elements, or a row's when rows are shorter, and a workspace of up to
 * LOCAL_WS bytes lives on the worker's stack, so a composite over a small
 * tensor allocates nothing per call; a generated kernel over contiguous
 * inputs needs none at all.  No copy is made where none is needed: a
 * contiguous input is read in place, and the op computing an output writes
 * straight into the output tensor.
 *
 * Joined outputs (backend/join-into.c).  When a join read the node's
 * outputs, the node has one output more than its inner graph: the joined
 * value, allocated here; the parts are strided views of it, each row of a
 * part (the elements from the join axis on, contiguous) a run of the
 * joined row.  Blocks then never cross a part's row, so every block's
 * outputs stay contiguous and both the interpreter and the generated
 * kernels write them in place.
 *
 * Generated kernels (codegen.c).  On its first run a composite asks for a
 * kernel generated for its inner program (kept in the node's memo); when
 * there is one and every input and output has its dtype, each block runs
 * it instead of the interpreter, with every input as a contiguous block
 * (a single element filled across the block).
 *
 * Streaming.  When the outputs together hold RGBC_STREAM_BYTES or more,
 * they go to memory with streaming stores (stream.c): a generated
 * kernel's twin rg_kernel_nt writes them itself; the interpreter computes
 * each block into a staging block and rgbc_stream_store copies it out
 * (2*x + 1 over 10^7 float32 interpreted: about 0.72x the time).  A
 * generated kernel without a twin (one with vector functions: computation
 * bounds it) writes in place as before; staging its blocks measured a
 * little slower.  Each worker fences before the pool's join.
 *
 * op_from_graph runs its linked inner program with rgb_run_inner.
 */
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define CB RGBC_CODEGEN_BLOCK
#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

/* Where a cell's block lives: p[i * s] for i < block length (s 0: one
 * value for the whole block). */
typedef struct cslot {
  char *p;
  int64_t s;
} cslot;

/* ------------------------------------------------------------------ workspace */

static size_t own_bytes(const rgb_program *p, int64_t blk) {
  return ALIGN64((size_t)p->ncells * sizeof(cslot)) + ALIGN64((size_t)p->ncells * sizeof(rg_dtype)) +
         ALIGN64((size_t)p->ncells * sizeof(char *)) + (size_t)p->ncells * blk * 8 +
         RGBC_MAXOPS * blk * 8;
}

/* The workspace a block of at most blk elements of program p needs
 * (nested composites included). */
static size_t ws_bytes(const rgb_program *p, int64_t blk) {
  size_t nested = 0;
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_node *n = &p->thunks[t].node;
    if (n->code == RG_OP_COMPOSITE && n->inner) {
      size_t b = ws_bytes(n->inner, blk);
      if (b > nested) nested = b;
    }
  }
  return own_bytes(p, blk) + nested;
}

typedef struct ws_parts {
  cslot *slot;
  rg_dtype *dt;
  char **direct; /* per cell: the output block its producer writes, or NULL */
  char *cellbuf; /* blk * 8 bytes per cell */
  char *conv;    /* RGBC_MAXOPS * blk * 8 */
  char *nested;
  int64_t blk;   /* elements a buffer holds (a block has at most as many) */
} ws_parts;

static ws_parts split_ws(const rgb_program *p, char *ws, int64_t blk) {
  ws_parts w;
  w.blk = blk;
  w.slot = (cslot *)ws;
  ws += ALIGN64((size_t)p->ncells * sizeof(cslot));
  w.dt = (rg_dtype *)ws;
  ws += ALIGN64((size_t)p->ncells * sizeof(rg_dtype));
  w.direct = (char **)ws;
  ws += ALIGN64((size_t)p->ncells * sizeof(char *));
  w.cellbuf = ws;
  ws += (size_t)p->ncells * blk * 8;
  w.conv = ws;
  w.nested = ws + RGBC_MAXOPS * blk * 8;
  return w;
}

/* ------------------------------------------------------------------ running a block */

static const char *exec_block(const rgb_program *p, const rg_dtype *in_dt, const cslot *ins,
                              char *const *outs, const rg_dtype *out_dt, int64_t m, char *ws,
                              int64_t blk, rgbc_status *st);

/* Operand k of a loop: the cell's block, converted to dtype want if it has
 * another one (into conversion buffer k). */
static cslot operand(const cslot *src, rg_dtype have, rg_dtype want, const ws_parts *w, int k,
                     int64_t m) {
  if (have == want) return *src;
  char *dst = w->conv + (size_t)k * w->blk * 8;
  int64_t n = src->s ? m : 1;
  char *q[2] = {dst, src->p};
  int64_t qs[2] = {rgbc_size(want), src->s};
  rgbc_cast_loop(have, want)(q, qs, n, NULL);
  return (cslot){dst, src->s ? rgbc_size(want) : 0};
}

/* Runs one elementwise thunk over the block: its output cell gets a
 * contiguous block. */
static const char *exec_elemwise(const rgb_thunk *t, ws_parts *w, int64_t m, rgbc_status *st) {
  const rgb_node *n = &t->node;
  rgbc_ew_info info;
  const char *why = rgbc_ew_info_of(n, &info);
  if (why) return why;
  int32_t oc = t->out_cells[0];
  rg_dtype odt = n->out[0].dtype;
  w->slot[oc] = (cslot){w->direct[oc] ? w->direct[oc] : w->cellbuf + (size_t)oc * w->blk * 8,
                        rgbc_size(odt)};
  w->dt[oc] = odt;
  char *p[RGBC_MAXOPS] = {w->slot[oc].p};
  int64_t s[RGBC_MAXOPS] = {w->slot[oc].s};
  if (info.copy) {
    int32_t c = t->in_cells[n->nin - 1];
    p[1] = w->slot[c].p;
    s[1] = w->slot[c].s;
    info.loop(p, s, m, st);
    return NULL;
  }
  int first = info.nary ? 2 : n->nin;
  for (int k = 0; k < first; k++) {
    int32_t c = t->in_cells[k];
    rg_dtype want = info.nary ? info.in[0] : info.in[k];
    cslot o = operand(&w->slot[c], w->dt[c], want, w, k, m);
    p[k + 1] = o.p;
    s[k + 1] = o.s;
  }
  info.loop(p, s, m, st);
  for (int k = 2; info.nary && k < n->nin; k++) { /* out = out op in[k] */
    int32_t c = t->in_cells[k];
    cslot o = operand(&w->slot[c], w->dt[c], info.in[0], w, 1, m);
    p[1] = w->slot[oc].p;
    s[1] = w->slot[oc].s;
    p[2] = o.p;
    s[2] = o.s;
    info.loop(p, s, m, st);
  }
  return NULL;
}

/* A nested composite: its own block program on this block. */
static const char *exec_nested(const rgb_thunk *t, ws_parts *w, int64_t m, rgbc_status *st) {
  const rgb_node *n = &t->node;
  if (!n->inner) return "a nested composite has no linked inner graph";
  if (n->nin > RG_COMPOSITE_MAX_IO || n->nout > RG_COMPOSITE_MAX_IO)
    return "a nested composite has more inputs or outputs than a composite may have";
  cslot ins[RG_COMPOSITE_MAX_IO];
  rg_dtype in_dt[RG_COMPOSITE_MAX_IO], out_dt[RG_COMPOSITE_MAX_IO];
  char *outs[RG_COMPOSITE_MAX_IO];
  for (int k = 0; k < n->nin; k++) {
    ins[k] = w->slot[t->in_cells[k]];
    in_dt[k] = w->dt[t->in_cells[k]];
  }
  for (int j = 0; j < n->nout; j++) {
    int32_t oc = t->out_cells[j];
    out_dt[j] = w->dt[oc] = n->out[j].dtype;
    w->slot[oc] = (cslot){w->direct[oc] ? w->direct[oc] : w->cellbuf + (size_t)oc * w->blk * 8,
                          rgbc_size(out_dt[j])};
    outs[j] = w->slot[oc].p;
  }
  return exec_block(n->inner, in_dt, ins, outs, out_dt, m, w->nested, w->blk, st);
}

/* Runs program p on a block of m elements: inputs in ins (dtypes in_dt),
 * outputs written contiguously to outs (dtypes out_dt). */
static const char *exec_block(const rgb_program *p, const rg_dtype *in_dt, const cslot *ins,
                              char *const *outs, const rg_dtype *out_dt, int64_t m, char *ws,
                              int64_t blk, rgbc_status *st) {
  ws_parts w = split_ws(p, ws, blk);
  for (int32_t i = 0; i < p->nin; i++) {
    w.slot[p->in_cells[i]] = ins[i];
    w.dt[p->in_cells[i]] = in_dt[i];
  }
  for (int32_t k = 0; k < p->nconst; k++) {
    int32_t c = p->const_cells[k];
    w.slot[c] = (cslot){p->cells[c]->data, 0};
    w.dt[c] = p->cells[c]->dtype;
  }
  /* an output computed by an op is written by it in place; others copied */
  bool done[RG_COMPOSITE_MAX_IO] = {0};
  memset(w.direct, 0, (size_t)p->ncells * sizeof(char *));
  for (int32_t j = 0; j < p->nout && j < RG_COMPOSITE_MAX_IO; j++) {
    int32_t c = p->out_cells[j];
    if (p->producer[c] >= 0 && !w.direct[c]) w.direct[c] = outs[j], done[j] = true;
  }
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_thunk *th = &p->thunks[t];
    const char *why = th->node.code == RG_OP_COMPOSITE ? exec_nested(th, &w, m, st)
                                                        : exec_elemwise(th, &w, m, st);
    if (why) return why;
  }
  for (int32_t j = 0; j < p->nout; j++) {
    int32_t c = p->out_cells[j];
    if (j < RG_COMPOSITE_MAX_IO && done[j]) continue;
    char *q[2] = {outs[j], w.slot[c].p};
    int64_t qs[2] = {rgbc_size(out_dt[j]), w.slot[c].s};
    rgbc_cast_loop(w.dt[c], out_dt[j])(q, qs, m, NULL);
  }
  return NULL;
}

/* ------------------------------------------------------------------ the outer loop */

/* Copies the plan's elements to a contiguous cursor (a gather). */
typedef struct cursor {
  char *at;
  int64_t es;
  rgbc_loop copy;
} cursor;

static void cursor_loop(char **p, const int64_t *s, int64_t n, void *aux) {
  cursor *c = aux;
  char *q[2] = {c->at, p[0]};
  int64_t qs[2] = {c->es, s[0]};
  c->copy(q, qs, n, NULL);
  c->at += n * c->es;
}

typedef struct cjob {
  const rgb_program *p;
  int nin, nout;
  const rg_tensor *const *in;
  rg_tensor **out;
  rgbc_plan *gather;  /* per input, unless one_in[i] */
  bool *one_in;       /* per input: a single element, read with stride 0 */
  rg_dtype *in_dt, *out_dt;
  int64_t total;
  int64_t row;        /* elements of a row: blocks never cross one (total: one row) */
  int64_t *ostride;   /* per output: elements from one row to the next */
  int64_t blk;        /* elements of a workspace block: CB, or fewer for a shorter row */
  size_t ws;          /* exec_block's workspace (none for a generated kernel) */
  rgbc_status st;
  const char *why;    /* first error */
  bool stream;        /* outputs streamed past the cache (stream.c) ... */
  bool staged;        /* ... through staging blocks (the interpreter), else by the twin */
  bool bare;          /* no workspace: a generated kernel over contiguous inputs, or over one element */
  rgbc_kernels gen;   /* the generated kernels, or NULLs: the interpreter */
  const void *vf;     /* its vector functions */
} cjob;

/* One block through the generated kernel: every input contiguous. */
static void run_generated(cjob *j, const cslot *ins, char *const *outs, char *area, int64_t m) {
  const void *in[RG_COMPOSITE_MAX_IO];
  for (int i = 0; i < j->nin; i++) {
    if (ins[i].s || m == 1) { /* a block, or the one element a block of one needs */
      in[i] = ins[i].p;
      continue;
    }
    size_t es = rgbc_size(j->in_dt[i]);
    char *b = area + (size_t)i * j->blk * 8; /* a single element, filled across the block */
    for (int64_t e = 0; e < m; e++) memcpy(b + (size_t)e * es, ins[i].p, es);
    in[i] = b;
  }
  (j->stream ? j->gen.stream : j->gen.plain)((void *const *)outs, in, m, j->vf);
}

/* Whether the walk of t is one contiguous run (read in place, no gather). */
static bool contiguous(const rgbc_plan *g, const rg_tensor *t) {
  return g->ndim == 1 && g->st[0][0] == (int64_t)rgbc_size(t->dtype);
}

/* One block [b0, b0 + m) with workspace ws (then the gather areas, then
 * the staging blocks of streamed outputs); the block lies in one row. */
static void run_one(cjob *j, char *ws, int64_t b0, int64_t m) {
  cslot ins[RG_COMPOSITE_MAX_IO];
  char *outs[RG_COMPOSITE_MAX_IO], *dst[RG_COMPOSITE_MAX_IO];
  char *area = j->bare ? NULL : ws + j->ws;
  for (int i = 0; i < j->nin; i++) {
    const rg_tensor *t = j->in[i];
    if (j->one_in[i]) {
      ins[i] = (cslot){t->data, 0};
      continue;
    }
    const rgbc_plan *g = &j->gather[i];
    if (contiguous(g, t)) { /* read in place */
      ins[i] = (cslot){g->base[0] + b0 * g->st[0][0], g->st[0][0]};
      continue;
    }
    cursor c = {area + (size_t)i * j->blk * 8, rgbc_size(t->dtype), rgbc_cast_loop(t->dtype, t->dtype)};
    ins[i] = (cslot){c.at, c.es};
    rgbc_plan_run(&j->gather[i], b0, b0 + m, cursor_loop, &c);
  }
  int64_t r = b0 / j->row, at = b0 - r * j->row;
  for (int k = 0; k < j->nout; k++) {
    dst[k] = j->out[k]->data + (r * j->ostride[k] + at) * (int64_t)rgbc_size(j->out_dt[k]);
    outs[k] = j->staged ? area + (size_t)(j->nin + k) * j->blk * 8 : dst[k];
  }
  if (j->gen.plain) run_generated(j, ins, outs, area, m); /* a twin streams itself */
  else {
    const char *why = exec_block(j->p, j->in_dt, ins, outs, j->out_dt, m, ws, j->blk, &j->st);
    if (why) j->why = why;
  }
  if (j->staged)
    for (int k = 0; k < j->nout; k++) rgbc_stream_store(dst[k], outs[k], (size_t)m * rgbc_size(j->out_dt[k]));
}

/* A workspace of at most this many bytes lives on the worker's stack, so
 * a composite over a small tensor allocates nothing per call. */
#define LOCAL_WS 131072

static void run_blocks(void *ud, int64_t lo, int64_t hi) {
  cjob *j = ud;
  size_t bytes = j->ws + (size_t)(j->nin + (j->staged ? j->nout : 0)) * j->blk * 8;
  _Alignas(64) char local[LOCAL_WS];
  char *ws = j->bare ? NULL : bytes <= LOCAL_WS ? local : rg_aligned_alloc(64, ALIGN64(bytes));
  if (!ws && !j->bare) {
    j->why = "out of memory for the composite's workspace";
    return;
  }
  int64_t per_row = (j->row + CB - 1) / CB;
  for (int64_t b = lo; b < hi && !j->why; b++) {
    int64_t r = b / per_row, at = (b - r * per_row) * CB;
    run_one(j, ws, r * j->row + at, j->row - at < CB ? j->row - at : CB);
  }
  if (j->stream) rgbc_stream_fence();
  if (ws != local) rg_free(ws);
}

/* ------------------------------------------------------------------ kernels */

/* Plans the walk of t broadcast over (nd, shape) in C order. */
static void plan_over(rgbc_plan *pl, const rg_tensor *t, int nd, const int64_t *shape) {
  int64_t st[RG_MAX_NDIM];
  rgbc_broadcast_strides(t, nd, shape, st);
  const int64_t *stp[1] = {st};
  char *base[1] = {t->data};
  rgbc_plan_init(pl, 1, nd, shape, base, stp, -1);
}

/* The joined output (the node's last) and the parts as views of it; the
 * rows of the walk are the parts' rows. */
static int joined_outputs(rgb_exec *x, cjob *j, int nd, const int64_t *shape) {
  int parts;
  if (rgb_joined_outputs(x, nd, shape, &j->row, &parts)) return x->rt->errcode;
  for (int k = 0; k < j->nout; k++) {
    if (x->node->join_slot[k] < 0) continue;
    j->out[k] = *x->outp[k];
    j->ostride[k] = j->row * parts;
  }
  return RG_OK;
}

static int composite_run(rgb_exec *x, cjob *j, int nd, const int64_t *shape) {
  const rgb_node *n = x->node;
  for (int i = 0; i < j->nin; i++) {
    j->in_dt[i] = j->in[i]->dtype;
    j->one_in[i] = rg_tensor_numel(j->in[i]) == 1;
    if (!j->one_in[i]) plan_over(&j->gather[i], j->in[i], nd, shape);
  }
  j->total = 1;
  for (int d = 0; d < nd; d++) j->total *= shape[d];
  j->row = j->total;
  for (int k = 0; k < j->nout; k++) j->out_dt[k] = n->out[k].dtype;
  if (n->join_slot && joined_outputs(x, j, nd, shape)) return x->rt->errcode;
  for (int k = 0; k < j->nout; k++) {
    if (n->join_slot && n->join_slot[k] >= 0) continue;
    j->out[k] = rgb_output(x, k, j->out_dt[k], nd, shape);
    if (!j->out[k]) return x->rt->errcode;
    j->ostride[k] = j->row;
  }
  if (j->total == 0) return RG_OK;
  j->blk = j->row < CB ? (j->row + 7) & ~(int64_t)7 : CB;
  j->ws = j->gen.plain ? 0 : ws_bytes(j->p, j->blk);
  size_t bytes = 0;
  for (int k = 0; k < j->nout; k++) bytes += (size_t)j->total * rgbc_size(j->out_dt[k]);
  j->stream = bytes >= RGBC_STREAM_BYTES && (!j->gen.plain || j->gen.stream); /* see the top */
  j->staged = j->stream && !j->gen.plain;
  j->bare = j->gen.plain && !j->staged;
  for (int i = 0; i < j->nin && j->bare && j->total > 1; i++)
    j->bare = !j->one_in[i] && contiguous(&j->gather[i], j->in[i]);
  int64_t nblocks = j->total / j->row * ((j->row + CB - 1) / CB);
  rgb_parallel_for(x, nblocks, 8, run_blocks, j);
  if (j->why) return rgb_error(x, RG_ERR_EVAL, "%s", j->why);
  return rgbc_status_error(x, &j->st);
}

/* The node's generated kernel, asked for when the node is bound (or on
 * its first run) and kept in the memo; NULL: the interpreter. */
typedef struct gen_memo {
  bool tried;
  rg_dtype dt;
  rgbc_kernels fn;
} gen_memo;
_Static_assert(sizeof(gen_memo) <= sizeof(((rgb_node *)0)->memo), "the memo does not fit");

static rgbc_kernels generated(const rgb_node *n, rg_dtype *dt) {
  gen_memo m;
  memcpy(&m, n->memo, sizeof m);
  if (!m.tried) {
    m = (gen_memo){.tried = true, .dt = n->nout ? n->out[0].dtype : RG_NDTYPES};
    m.fn = n->nout ? rgbc_codegen(n->inner, m.dt, n->codegen) : (rgbc_kernels){NULL, NULL};
    memcpy((void *)(uintptr_t)n->memo, &m, sizeof m);
  }
  *dt = m.dt;
  return m.fn;
}

void rgbc_composite_prepare(const rgb_node *n) {
  rg_dtype dt;
  (void)generated(n, &dt);
}

/* The generated kernel for this call: the values have its dtype. */
static void choose_kernel(const rgb_node *n, cjob *j) {
  rg_dtype dt;
  j->gen = generated(n, &dt);
  bool fits = true;
  for (int i = 0; i < j->nin; i++) fits &= j->in[i]->dtype == dt;
  for (int k = 0; k < j->nout; k++) fits &= n->out[k].dtype == dt;
  if (!fits) j->gen = (rgbc_kernels){NULL, NULL};
  j->vf = rgbc_codegen_vfns(dt == RG_FLOAT32);
}

/* Adds to the error of a composite the ops fused into it, which the user
 * wrote (a shape error names the composite's inputs; an op's own error,
 * such as an integer power's negative exponent, names no op). */
static int name_group(rgb_exec *x, const rgb_program *p) {
  rg_strbuf b = {0};
  rg_strbuf_put(&b, "%s (in a group fused from", x->rt->err);
  for (int32_t t = 0; t < p->nthunks; t++)
    rg_strbuf_put(&b, "%s %s", t ? "," : "", rg_opcode_name(p->thunks[t].node.code));
  rg_strbuf_put(&b, ")");
  if (!b.failed) snprintf(x->rt->err, sizeof x->rt->err, "%s", b.s);
  rg_free(b.s);
  return x->rt->errcode;
}

int rgb_cpu_composite(rgb_exec *x) {
  const rgb_node *n = x->node;
  const rgb_program *p = n->inner;
  if (!p) return rgb_error(x, RG_ERR_TYPE, "the inner graph is not linked");
  int nout = n->join_slot ? n->nout - 1 : n->nout; /* computed outputs (the joined one aside) */
  if (n->nin > RG_COMPOSITE_MAX_IO || nout > RG_COMPOSITE_MAX_IO || p->nin != n->nin || p->nout != nout)
    return rgb_error(x, RG_ERR_TYPE, "%d inputs and %d outputs do not fit the inner graph "
                     "(at most %d each)", n->nin, nout, RG_COMPOSITE_MAX_IO);
  const rg_tensor *in[RG_COMPOSITE_MAX_IO];
  rg_tensor *out[RG_COMPOSITE_MAX_IO];
  rgbc_plan gather[RG_COMPOSITE_MAX_IO];
  bool one_in[RG_COMPOSITE_MAX_IO];
  rg_dtype in_dt[RG_COMPOSITE_MAX_IO], out_dt[RG_COMPOSITE_MAX_IO];
  int64_t ostride[RG_COMPOSITE_MAX_IO];
  int nd = 0;
  int64_t shape[RG_MAX_NDIM];
  for (int i = 0; i < n->nin; i++) in[i] = rgb_in(x, i);
  if (n->nin && rgbc_broadcast_shape(x, n->nin, in, n->in, &nd, shape)) return name_group(x, p);
  cjob j = {.p = p, .nin = n->nin, .nout = nout, .in = in, .out = out, .gather = gather,
            .one_in = one_in, .in_dt = in_dt, .out_dt = out_dt, .ostride = ostride};
  choose_kernel(n, &j);
  return composite_run(x, &j, nd, shape) ? name_group(x, p) : RG_OK;
}

int rgb_cpu_op_from_graph(rgb_exec *x) {
  const rgb_node *n = x->node;
  if (!n->inner) return rgb_error(x, RG_ERR_TYPE, "the inner graph is not linked");
  if (n->nin > 64 || n->nout > 64) return rgb_error(x, RG_ERR_LIMIT, "more than 64 inputs or outputs");
  rg_tensor *in[64], *out[64] = {0};
  for (int i = 0; i < n->nin; i++) in[i] = rgb_in(x, i);
  int rc = rgb_run_inner(x, n->inner, in, out);
  if (rc) return rc;
  for (int j = 0; j < n->nout; j++) rgb_set_output(x, j, out[j]);
  return RG_OK;
}
