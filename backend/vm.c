/*
 * vm.c — the two virtual machines that run linked programs.
 *
 * The loop VM runs the thunks in schedule order and, after each one,
 * releases the cells whose last reader it was.  It is what runs when no
 * node is lazy and every output is wanted.  A small value (storage of at
 * most RGB_KEEP_BYTES, held by no one else) stays in its cell instead:
 * the next call's kernel rewrites it in place, so graphs of scalars and
 * tiny tensors pay neither the pool nor the allocator per node, at a cost
 * bounded by RGB_KEEP_BYTES per cell.
 *
 * The stack VM evaluates on demand: it starts from the requested outputs
 * and runs a thunk once the thunks producing its inputs have run.  An
 * ifelse asks only for its condition first, then only for the branch the
 * condition selects, so the other branch is never computed.  It runs
 * programs with ifelse and calls that ask for a subset of the outputs.
 * Its stack holds thunk indices; each thunk pushes its missing producers
 * once, so the stack never exceeds the number of edges.
 */
#include "backend/backend-impl.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { ST_NEW = 0, ST_WAIT = 1, ST_DONE = 2 };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#ifdef RG_DEBUG_CHECKS
/* Every input of a kernel lives on the device of the backend running it
 * (a missing transfer would hand a kernel memory it cannot read), but for
 * those the backend reads on the host (its host_input slot) and those
 * whose shape alone is read. */
static void check_devices(const rgb_thunk *t) {
  if (t->kind != RGB_T_KERNEL) return;
  const rgb_backend *b = t->backend->iface;
  for (int i = 0; i < t->node.nin; i++) {
    if (rgb_metadata_input(&t->node, i)) continue; /* read where it lives */
    bool host = b->host_input && b->host_input(t->backend->ctx, &t->node, i);
    assert(rg_tensor_device(*t->x.inp[i]) == (host ? RG_DEVICE_HOST : t->backend->device) &&
           "a value on the wrong device");
  }
}
#define CHECK_DEVICES(t) check_devices(t)
#else
#define CHECK_DEVICES(t) ((void)0)
#endif

static int run_thunk(rgb_program *p, rgb_thunk *t) {
  CHECK_DEVICES(t);
  if (!p->profile) return t->fn(&t->x);
  double t0 = now_s();
  int rc = t->fn(&t->x);
  t->seconds += now_s() - t0;
  t->calls++;
  return rc;
}

/* Retires a cell after its last reader: small unshared buffers stay. */
static inline void retire(rgb_runtime *rt, rg_tensor **cell) {
  rg_tensor *t = *cell;
  if (t && rg_storage_nbytes(t) <= RGB_KEEP_BYTES && rg_storage_refcount(t) == 1) return;
  rgb_release(rt, cell);
}

static int run_loop(rgb_program *p) {
  rgb_runtime *rt = p->rt;
  rgb_thunk *t = p->thunks, *end = p->thunks + p->nthunks;
  if (!p->release && !p->profile) {
    for (; t < end; t++) {
      CHECK_DEVICES(t);
      int rc = t->fn(&t->x);
      if (rc) return rc;
    }
    return 0;
  }
  for (; t < end; t++) {
    int rc = run_thunk(p, t);
    if (rc) return rc;
    for (int32_t i = 0; i < t->nrelease; i++) retire(rt, &p->cells[t->release[i]]);
  }
  return 0;
}

/* ------------------------------------------------------------------ the stack VM */

/* A condition, read on the host (the linker puts it there). */
static bool truthy(const rg_tensor *t) {
  if (rg_tensor_numel(t) != 1) return false;
  if (t->dtype == RG_BOOL) return *(const uint8_t *)t->data != 0;
  return rg_tensor_get_f64(t, 0) != 0;
}

/* Pushes the producers of cells[first..first+n) that have not run; true
 * if all those cells are ready. */
static bool demand(rgb_program *p, const int32_t *cells, int n, int32_t *sp) {
  bool ready = true;
  for (int i = 0; i < n; i++) {
    int32_t k = p->producer[cells[i]];
    if (k >= 0 && p->state[k] != ST_DONE) {
      p->stack[(*sp)++] = k;
      ready = false;
    }
  }
  return ready;
}

/* Whether a is a view of exactly what b views (same storage, data, shape
 * and strides): then a may stay as ifelse's output for b. */
static bool same_view(const rg_tensor *a, const rg_tensor *b) {
  if (a->storage != b->storage || a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim)
    return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i] || a->strides[i] != b->strides[i]) return false;
  return true;
}

/* An ifelse whose condition is ready: demands the selected branch, and
 * when it is ready makes the outputs references to it. */
static int step_ifelse(rgb_program *p, rgb_thunk *t, int32_t *sp, bool *done) {
  int n = t->node.nout;
  const int32_t *branch = t->in_cells + 1 + (truthy(p->cells[t->in_cells[0]]) ? 0 : n);
  *done = false;
  if (!demand(p, branch, n, sp)) return 0;
  for (int j = 0; j < n; j++) {
    const rg_tensor *src = p->cells[branch[j]], *cur = *t->x.outp[j];
    if (cur && same_view(cur, src)) continue; /* still a reference to it */
    rg_tensor *v = rg_tensor_ref(src);
    if (!v) return rgb_error(&t->x, RG_ERR_NOMEM, "out of memory");
    rgb_set_output(&t->x, j, v);
  }
  if (p->profile) t->calls++;
  *done = true;
  return 0;
}

static int run_stack(rgb_program *p, const int32_t *want, int nwant) {
  memset(p->state, ST_NEW, (size_t)p->nthunks);
  int32_t sp = 0;
  demand(p, want, nwant, &sp);
  while (sp > 0) {
    int32_t k = p->stack[sp - 1];
    rgb_thunk *t = &p->thunks[k];
    if (p->state[k] == ST_DONE) {
      sp--;
      continue;
    }
    if (p->state[k] == ST_NEW) {
      p->state[k] = ST_WAIT;
      int nin = t->kind == RGB_T_IFELSE ? 1 : t->node.nin;
      if (!demand(p, t->in_cells, nin, &sp)) continue;
    }
    if (t->kind == RGB_T_IFELSE) {
      if (!demand(p, t->in_cells, 1, &sp)) continue; /* condition first */
      bool done;
      int rc = step_ifelse(p, t, &sp, &done);
      if (rc) return rc;
      if (!done) continue;
    } else {
      int rc = run_thunk(p, t);
      if (rc) return rc;
    }
    p->state[k] = ST_DONE;
  }
  return 0;
}

/* A partial run of a program without ifelse: the thunks the wanted cells
 * need, in schedule order (the order its memory plan assumes), with no
 * release on the way (release_all follows). */
static int run_needed(rgb_program *p, const int32_t *want, int nwant) {
  memset(p->state, ST_NEW, (size_t)p->nthunks);
  for (int i = 0; i < nwant; i++)
    if (p->producer[want[i]] >= 0) p->state[p->producer[want[i]]] = ST_WAIT;
  for (int32_t k = p->nthunks; k-- > 0;) {
    if (p->state[k] != ST_WAIT) continue;
    const rgb_thunk *t = &p->thunks[k];
    for (int i = 0; i < t->node.nin; i++)
      if (p->producer[t->in_cells[i]] >= 0) p->state[p->producer[t->in_cells[i]]] = ST_WAIT;
  }
  for (int32_t k = 0; k < p->nthunks; k++)
    if (p->state[k] == ST_WAIT) {
      int rc = run_thunk(p, &p->thunks[k]);
      if (rc) return rc;
    }
  return 0;
}

/* ------------------------------------------------------------------ calls */

/* The buffer types of a value already on its cell's device, and of the
 * backend that reads it there, when they are two queues of one kind that
 * must be ordered (two CUDA backend objects of one device: two streams). */
static bool two_queues(rgb_program *p, int32_t c, const rg_tensor *v, const rg_buffer_type **mine,
                       const rg_buffer_type **theirs) {
  if (p->cell_dev[c] == RG_DEVICE_HOST) return false; /* host memory: one queue, the caller's */
  *theirs = rg_tensor_buffer_type(v);
  if (!*theirs || !(*theirs)->order || !rg_tensor_on_device(v)) return false;
  *mine = rgb_program_backend_on(p, p->cell_dev[c])->buft;
  return *mine && *mine != *theirs && (*mine)->order == (*theirs)->order;
}

static void unbind_inputs(rgb_program *p) {
  for (int32_t i = 0; i < p->nin; i++) {
    rg_tensor **cell = &p->cells[p->in_cells[i]];
    const rg_buffer_type *mine, *theirs;
    /* the owner reuses the input's memory only after this call's reads */
    if (*cell && !p->in_copied[i] && two_queues(p, p->in_cells[i], *cell, &mine, &theirs))
      mine->order(mine, theirs);
    if (p->in_copied[i]) rg_tensor_free(*cell);
    p->in_copied[i] = 0;
    *cell = NULL;
  }
}

/* Binds the inputs to their cells; a value on another device than its
 * cell's is copied there for the call (and freed by unbind_inputs).  A
 * value on the cell's device written by another queue (stream) is read
 * after that queue's work (order). */
static int bind_inputs(rgb_program *p, rg_tensor *const *inputs) {
  for (int32_t i = 0; i < p->nin; i++) {
    int32_t c = p->in_cells[i];
    rg_tensor *v = inputs[i];
    const rg_buffer_type *mine, *theirs;
    if (v && two_queues(p, c, v, &mine, &theirs) && rg_tensor_device(v) == p->cell_dev[c] &&
        theirs->order(theirs, mine)) {
      snprintf(p->rt->err, sizeof p->rt->err, "cannot order input %d after the work writing it", i);
      return p->rt->errcode = RG_ERR;
    }
    if (v && rg_tensor_device(v) != p->cell_dev[c]) {
      v = rg_tensor_to_device(v, rgb_program_backend_on(p, p->cell_dev[c])->buft);
      if (!v) {
        snprintf(p->rt->err, sizeof p->rt->err, "out of memory copying input %d to its device", i);
        return p->rt->errcode = RG_ERR_NOMEM;
      }
      p->in_copied[i] = 1;
    }
    p->cells[c] = v;
  }
  return 0;
}

/* Releases every intermediate after a lazy or partial run (planned
 * values stay: their memory is the arena's). */
static void release_all(rgb_program *p) {
  for (int32_t c = 0; c < p->ncells; c++)
    if (p->producer[c] >= 0 && !rgb_cell_planned(p, c)) {
      bool out = false;
      for (int32_t j = 0; j < p->nout; j++) out |= p->out_cells[j] == c;
      if (!out) rgb_release(p->rt, &p->cells[c]);
    }
}

/* After a call, an output cell holding a view of an input's storage (x.T,
 * x[::-1] as an output) lets it go: the caller has its own reference, and
 * inputs are borrowed for the call only, so the program must not keep one
 * alive (or reachable) until its next call.  Other outputs stay: their
 * storage is the program's, reused by the next call. */
static void release_input_views(rgb_program *p) {
  for (int32_t j = 0; j < p->nout; j++) {
    rg_tensor **cell = &p->cells[p->out_cells[j]];
    if (!*cell || p->producer[p->out_cells[j]] < 0) continue;
    for (int32_t i = 0; i < p->nin; i++) {
      const rg_tensor *in = p->cells[p->in_cells[i]];
      if (in && in->storage == (*cell)->storage) {
        rg_tensor_free(*cell);
        *cell = NULL;
        break;
      }
    }
  }
}

static int collect_outputs(rgb_program *p, int n, const int *which, rg_tensor **outputs) {
  for (int i = 0; i < n; i++) outputs[i] = NULL;
  for (int i = 0; i < n; i++) {
    int j = which ? which[i] : i;
    rg_tensor *v = p->cells[p->out_cells[j]];
    outputs[i] = v ? rg_tensor_ref(v) : NULL;
    if (!outputs[i]) {
      for (int m = 0; m < i; m++) rg_tensor_free(outputs[m]);
      snprintf(p->rt->err, sizeof p->rt->err, "output %d was not computed", j);
      return p->rt->errcode = RG_ERR;
    }
  }
  return 0;
}

int rgb_program_run(rgb_program *p, rg_tensor *const *inputs, int n, const int *which,
                    rg_tensor **outputs) {
  p->rt->errcode = 0;
  p->rt->err[0] = 0;
  int rc = bind_inputs(p, inputs);
  if (rc) {
    unbind_inputs(p);
    return rc;
  }
  bool all = !which && n == p->nout;
  if (!p->lazy && all) {
    rc = run_loop(p);
  } else {
    int32_t want[n > 0 ? n : 1];
    for (int i = 0; i < n; i++) want[i] = p->out_cells[which ? which[i] : i];
    rc = p->lazy ? run_stack(p, want, n) : run_needed(p, want, n);
    if (p->rt->use_pool) release_all(p);
  }
  if (rc == 0) rc = collect_outputs(p, n, which, outputs);
  release_input_views(p);
  unbind_inputs(p);
  return rc;
}

/* A call whose caller reads the outputs straight from their cells (a
 * Scan's steps): no references are made, and the inputs stay bound until
 * rgb_program_unbind, so an output that is an input can still be read.
 * The inputs must already be on their cells' device. */
int rgb_program_step(rgb_program *p, rg_tensor *const *inputs) {
  for (int32_t i = 0; i < p->nin; i++) p->cells[p->in_cells[i]] = (rg_tensor *)inputs[i];
  if (!p->lazy) return run_loop(p);
  return run_stack(p, p->out_cells, p->nout);
}

void rgb_program_unbind(rgb_program *p) { unbind_inputs(p); }

/* ------------------------------------------------------------------ running into given outputs */

rg_tensor *rgb_program_bind_output(rgb_program *p, int j, const rg_buffer_type *bt, rg_dtype dt, int ndim,
                                   const int64_t *shape, const int64_t *strides, void *data,
                                   size_t nbytes) {
  rg_tensor **cell = &p->cells[p->out_cells[j]];
  rg_tensor *w = rg_tensor_wrap_on(bt, dt, ndim, shape, strides, data, nbytes);
  if (!w) return NULL;
  if (*cell) rgb_release(p->rt, cell);
  return *cell = w;
}

void rgb_program_unbind_output(rgb_program *p, int j, rg_tensor *w, const void *data) {
  rg_tensor **cell = &p->cells[p->out_cells[j]];
  if (!w) return;
  if (*cell == w || (*cell && rg_storage_is_external(*cell) && rg_storage_base(*cell) == data)) {
    /* w, or a tensor made from it (w itself was freed when it was replaced) */
    rg_tensor_free(*cell);
    *cell = NULL;
  }
}

/* Whether output j can be computed straight into t: a kernel of the
 * program computes it, t is C-contiguous host memory (device buffers
 * cannot be wrapped), and no other output shares its cell (the caller's
 * memory would be another output's value too, or a shared container's
 * new value). */
static bool in_place_target(const rgb_program *p, int j, const rg_tensor *t) {
  int32_t c = p->out_cells[j];
  if (!t || p->producer[c] < 0 || p->thunks[p->producer[c]].kind == RGB_T_IFELSE) return false;
  if (rg_tensor_device(t) != RG_DEVICE_HOST || p->cell_dev[c] != RG_DEVICE_HOST) return false;
  if (!rg_tensor_is_c_contiguous(t)) return false;
  for (int k = 0; k < p->nout; k++)
    if (k != j && p->out_cells[k] == c) return false;
  return true;
}

static bool same_type_shape(const rg_tensor *a, const rg_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

/* Copies the outputs that did not land in their targets, and makes
 * references to those without one. */
static int finish_into(rgb_program *p, rg_tensor *const *into, rg_tensor **refs) {
  for (int32_t j = 0; j < p->nout; j++) {
    rg_tensor *v = p->cells[p->out_cells[j]];
    if (!v) {
      snprintf(p->rt->err, sizeof p->rt->err, "output %d was not computed", j);
      return p->rt->errcode = RG_ERR;
    }
    if (!into[j]) {
      if (!(refs[j] = rg_tensor_ref(v))) return p->rt->errcode = RG_ERR_NOMEM;
    } else if (!same_type_shape(v, into[j])) {
      char a[256], b[256];
      snprintf(p->rt->err, sizeof p->rt->err, "output %d is %s %s, the tensor given for it %s %s", j,
               rg_dtype_name(v->dtype), rg_shape_str(v->ndim, v->shape, a, sizeof a),
               rg_dtype_name(into[j]->dtype), rg_shape_str(into[j]->ndim, into[j]->shape, b, sizeof b));
      return p->rt->errcode = RG_ERR_TYPE;
    } else if (v->data != into[j]->data || rg_tensor_device(v) != rg_tensor_device(into[j])) {
      int rc = rg_tensor_copy_to(into[j], v);
      if (rc) {
        snprintf(p->rt->err, sizeof p->rt->err, "output %d: cannot copy the value into the given tensor", j);
        return p->rt->errcode = rc;
      }
    }
  }
  return 0;
}

int rgb_program_run_into(rgb_program *p, rg_tensor *const *inputs, rg_tensor *const *into,
                         rg_tensor **refs) {
  p->rt->errcode = 0;
  p->rt->err[0] = 0;
  for (int32_t j = 0; j < p->nout; j++) refs[j] = NULL;
  int rc = bind_inputs(p, inputs);
  rg_tensor *wrap[p->nout + 1];
  for (int32_t j = 0; j < p->nout; j++) {
    const rg_tensor *t = into[j];
    wrap[j] = rc == 0 && in_place_target(p, j, t)
                  ? rgb_program_bind_output(p, j, NULL, t->dtype, t->ndim, t->shape, t->strides,
                                            t->data, (size_t)rg_tensor_numel(t) * rg_dtype_size(t->dtype))
                  : NULL;
  }
  if (rc == 0) rc = p->lazy ? run_stack(p, p->out_cells, p->nout) : run_loop(p);
  if (rc == 0) rc = finish_into(p, into, refs);
  /* the caller's memory leaves the cells: no later call writes or reads it */
  for (int32_t j = 0; j < p->nout; j++) rgb_program_unbind_output(p, j, wrap[j], into[j] ? into[j]->data : NULL);
  if (p->lazy && p->rt->use_pool) release_all(p);
  release_input_views(p);
  unbind_inputs(p);
  if (rc)
    for (int32_t j = 0; j < p->nout; j++) rg_tensor_free(refs[j]), refs[j] = NULL;
  return rc;
}
