/*
 * function.c — rg_compile and the functions it returns; shared values.
 *
 * Compiling: the graph (outputs and update values, as functions of the
 * inputs and of the shared variables found in it) is cloned into a
 * FunctionGraph, the rewrite query of the mode is applied to the clone
 * (the caller's graph is never changed), and the linker makes the program
 * from the clone's topological order.  Shared
 * variables met in the graph become extra, hidden inputs, fed from their
 * containers at each call; update values become extra, hidden outputs,
 * written back to the containers after each call.
 *
 * A function owns only plain memory: the program, its own references to
 * shared containers, the input types for checking calls.
 */
#include "backend/backend-impl.h"
#include "base/base.h"
#include "kanren/kanren-impl.h"
#include "relgraph/backend.h"
#include "relgraph/rewrite.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ shared values */

struct rg_shared {
  long refs;
  rg_tensor *value;
};

rg_shared *rg_shared_new(const rg_tensor *init) {
  rg_shared *s = rg_calloc(1, sizeof *s);
  if (!s) return NULL;
  s->refs = 1;
  s->value = rg_tensor_copy(init);
  if (!s->value) {
    rg_free(s);
    return NULL;
  }
  return s;
}

static rg_shared *shared_ref(rg_shared *s) {
  __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
  return s;
}

void rg_shared_free(rg_shared *s) {
  if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  rg_tensor_free(s->value);
  rg_free(s);
}

rg_tensor *rg_shared_get(const rg_shared *s) { return rg_tensor_ref(s->value); }

static bool fits_shape(const rg_tensor *v, rg_dtype dt, int ndim, const int64_t *shape) {
  if (v->dtype != dt || v->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (shape[i] != RG_DIM_UNKNOWN && shape[i] != v->shape[i]) return false;
  return true;
}

int rg_shared_set(rg_shared *s, const rg_tensor *value) {
  if (!fits_shape(value, s->value->dtype, s->value->ndim, s->value->shape)) {
    /* only the dtype and rank are fixed: the shape may change */
    if (value->dtype != s->value->dtype || value->ndim != s->value->ndim) return RG_ERR_TYPE;
  }
  rg_tensor *c = rg_tensor_copy(value);
  if (!c) return RG_ERR_NOMEM;
  rg_tensor_free(s->value);
  s->value = c;
  return RG_OK;
}

rg_variable *rg_shared_var(rg_ctx *C, const char *name, rg_shared *s, const rg_type *type) {
  if (!type) {
    int64_t shape[RG_MAX_NDIM];
    for (int i = 0; i < s->value->ndim; i++) shape[i] = s->value->shape[i] == 1 ? 1 : RG_DIM_UNKNOWN;
    type = rg_type_new(s->value->dtype, s->value->ndim, shape);
  } else if (!fits_shape(s->value, type->dtype, type->ndim, type->shape)) {
    rg_error(C, RG_ERR_TYPE, "shared value %s does not fit the type %s", name ? name : "",
             rg_type_str(type));
    return NULL;
  }
  rg_variable *v = rg_input(C, name, type);
  if (v) v->user = s;
  return v;
}

rg_shared *rg_variable_shared(const rg_variable *v) { return v ? (rg_shared *)v->user : NULL; }

/* ------------------------------------------------------------------ collecting the graph */

/* Growable arrays and the visited set of collected pointers during
 * compilation: base containers in collected memory (the graph is alive
 * anyway: the caller holds the outputs). */
typedef rg_ptrs ptrvec;
#define PTRVEC_INIT {.a = &rgk_gc}

static void pv_push(ptrvec *p, void *x) {
  int rc = rg_ptrs_push(p, x);
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
}

static bool ps_add(rg_map *s, const void *x) {
  bool fresh;
  rg_map_slot(s, (uint64_t)(uintptr_t)x, 0, &fresh);
  return fresh;
}

/* Post-order of the nodes the roots depend on; ownerless variables met
 * (inputs, shared, constants) go to `leaves` in order of discovery. */
static void toposort(int nroots, rg_variable *const *roots, ptrvec *order, ptrvec *leaves) {
  rg_map seen = {.a = &rgk_gc};
  ptrvec stack = PTRVEC_INIT; /* pairs: node, next input index (as pointer-sized int) */
  for (int r = 0; r < nroots; r++) {
    rg_variable *v = roots[r];
    if (!v->owner) {
      if (ps_add(&seen, v)) pv_push(leaves, v);
      continue;
    }
    if (!ps_add(&seen, v->owner)) continue;
    pv_push(&stack, v->owner);
    pv_push(&stack, (void *)(intptr_t)0);
    while (stack.n) {
      rg_node *n = stack.v[stack.n - 2];
      intptr_t i = (intptr_t)stack.v[stack.n - 1];
      if (i == n->nin) {
        stack.n -= 2;
        pv_push(order, n);
        continue;
      }
      stack.v[stack.n - 1] = (void *)(i + 1);
      rg_variable *in = n->inputs[i];
      if (!in->owner) {
        if (ps_add(&seen, in)) pv_push(leaves, in);
      } else if (ps_add(&seen, in->owner)) {
        pv_push(&stack, in->owner);
        pv_push(&stack, (void *)(intptr_t)0);
      }
    }
  }
}

/* ------------------------------------------------------------------ compiling */

struct rg_function {
  rgb_program *p;
  int nin, nout;            /* as the caller sees them */
  int nshared;              /* hidden inputs after the caller's */
  rg_shared **shared;
  int nupdates;             /* hidden outputs after the caller's */
  int *update_shared;       /* index into shared[] of each update */
  rgb_vtype *in_types;      /* nin + nshared */
  char **in_names;          /* for messages ("" when unnamed) */
  rgb_codegen codegen;      /* its cache_dir is owned here; the program points at it */
  bool *may_share;          /* per program output: its value may be an input's, a shared
                               value's or a constant's storage (checked per call) */
  char err[1024];
};

static int shared_index(rg_shared **v, int n, rg_shared *s) {
  for (int i = 0; i < n; i++)
    if (v[i] == s) return i;
  return -1;
}

static bool check_inputs(rg_ctx *C, int nin, rg_variable *const *inputs) {
  for (int i = 0; i < nin; i++) {
    if (!inputs[i]) return rg_error_null(C, "input %d is NULL", i), false;
    if (inputs[i]->owner)
      return rg_error(C, RG_ERR_TYPE, "input %d (%s) is computed by the graph, not an input", i,
                      inputs[i]->name ? inputs[i]->name : "unnamed"), false;
    if (rg_variable_shared(inputs[i]))
      return rg_error(C, RG_ERR_TYPE, "input %d (%s) is a shared variable: its value comes from "
                      "its container, do not list it", i, inputs[i]->name ? inputs[i]->name : "unnamed"), false;
  }
  return true;
}

/* Shared variables among the graph's leaves, in order. */
static void find_shared(ptrvec *leaves, ptrvec *shared_vars) {
  for (size_t i = 0; i < leaves->n; i++)
    if (rg_variable_shared(leaves->v[i])) pv_push(shared_vars, leaves->v[i]);
}

static int fold(const rg_node *n, rg_tensor **outs, char *err, size_t len) {
  return rg_eval_node(n, outs, err, len);
}

/* Clones the graph into a FunctionGraph and rewrites it with the mode's
 * query; NULL with an error in C. */
static rg_fgraph *prepare(rg_ctx *C, int nin, rg_variable **ins, int nout, rg_variable **outs,
                          const rg_compile_opts *o) {
  rg_fgraph *fg = rg_fgraph_new(C, nin, ins, nout, outs, RG_FG_CLONE);
  if (!fg) return NULL;
  for (int i = 0; i < nin; i++) rg_fgraph_input(fg, i)->user = ins[i]->user;
  const char *q = o && o->mode.query ? o->mode.query : "fast_run";
  if (!strcmp(q, "none")) return fg;
  rg_rewrite_db *db = rg_std_db(C);
  rg_rewriter *rw = db ? rg_db_query(C, db, q) : NULL;
  if (!rw) return NULL;
  rg_rewrite_opts ro = {.fold = fold};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &ro);
  if (rg_rewrite_stop(run) == RG_STOP_ERROR) {
    rg_error(C, RG_ERR, "rewriting failed: %s", rg_rewrite_stop_message(run));
    return NULL;
  }
  return rgb_rewrite_scans(C, fg, rw, &ro) == RG_OK ? fg : NULL;
}

/* Whether cell c's value may be (a view of) a program input's or a
 * constant's storage: an input or constant cell itself, or what a view,
 * an in-place node, an ifelse or a transfer hands on, or a node whose
 * kernel may give back an input (the shape family); elementwise,
 * reduction and BLAS kernels and composites write buffers of their own. */
static bool may_share(const rgb_program *p, int32_t c, int depth) {
  int32_t k = p->producer[c];
  if (k < 0 || depth > 64) return true;
  const rgb_thunk *t = &p->thunks[k];
  if (t->kind != RGB_T_KERNEL) return true;
  if (t->node.view_of >= 0) return may_share(p, t->in_cells[t->node.view_of], depth + 1);
  if (t->node.inplace >= 0) return may_share(p, t->in_cells[t->node.inplace], depth + 1);
  if (t->node.code == RG_OP_COMPOSITE) return false;
  switch (rg_opcode_family(t->node.code)) {
  case RG_FAM_ELEMWISE: case RG_FAM_REDUCE: case RG_FAM_BLAS: return false;
  default: return true;
  }
}

/* The function's own tables: shared containers, update targets, input
 * types and names.  False when memory ran out; what was made is then
 * owned by f (rg_function_free takes it back). */
static bool describe(rg_function *f, int nallin, rg_variable *const *ins, const rg_compile_opts *o,
                     ptrvec *shared_vars) {
  int nup = o ? o->nupdates : 0, nshared = (int)shared_vars->n;
  f->shared = rg_calloc((size_t)nshared + 1, sizeof *f->shared);
  f->update_shared = rg_calloc((size_t)nup + 1, sizeof(int));
  f->in_types = rg_calloc((size_t)nallin + 1, sizeof *f->in_types);
  f->in_names = rg_calloc((size_t)nallin + 1, sizeof *f->in_names);
  if (!f->shared || !f->update_shared || !f->in_types || !f->in_names) return false;
  for (; f->nshared < nshared; f->nshared++)
    f->shared[f->nshared] = shared_ref(rg_variable_shared(shared_vars->v[f->nshared]));
  for (int i = 0; i < nallin; i++) {
    f->in_names[i] = rg_strdup(ins[i]->name ? ins[i]->name : "");
    if (!f->in_names[i]) return false;
    const rg_type *t = ins[i]->type;
    f->in_types[i].dtype = t->dtype;
    f->in_types[i].ndim = t->ndim;
    memcpy(f->in_types[i].shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
  }
  f->nupdates = nup;
  for (int u = 0; u < nup; u++)
    f->update_shared[u] = shared_index(f->shared, f->nshared, rg_variable_shared(o->updates[u].shared));
  f->may_share = rg_calloc((size_t)f->p->nout + 1, sizeof *f->may_share);
  if (!f->may_share) return false;
  for (int32_t j = 0; j < f->p->nout; j++) f->may_share[j] = may_share(f->p, f->p->out_cells[j], 0);
  return true;
}

/* The function's generated-kernel options (a copy of the cache directory's
 * name).  A directory asked for by name that cannot be used is a mistake
 * to report, not a reason to go without the cache silently; with
 * generation off it is neither made nor checked. */
static bool set_codegen(rg_ctx *C, rg_function *f, const rg_compile_opts *o) {
  f->codegen.off = (o && o->no_codegen) || rgb_codegen_env_off();
  if (!o || !o->cache_dir) return true;
  if (!(f->codegen.cache_dir = rg_strdup(o->cache_dir))) return rg_error(C, RG_ERR_NOMEM, "out of memory"), false;
  char dir[4096];
  if (f->codegen.off || rg_cache_dir(o->cache_dir, dir, sizeof dir)) return true;
  rg_error(C, RG_ERR, "the cache directory '%s' cannot be made or used: %s", o->cache_dir, strerror(errno));
  rg_free((char *)f->codegen.cache_dir);
  return false;
}

/* The mode's linker: "auto" (NULL) picks the loop VM unless something is
 * lazy (ifelse), "stack" forces the stack VM, "loop" the loop VM, which
 * runs every node and so refuses an ifelse.  Sets *stack; false with an
 * error for an unknown linker or a loop over an ifelse. */
static bool choose_linker(rg_ctx *C, const rg_compile_opts *o, size_t n, rg_node *const *order, bool *stack) {
  const char *lk = o && o->mode.linker ? o->mode.linker : "auto";
  *stack = !strcmp(lk, "stack");
  if (*stack || !strcmp(lk, "auto")) return true;
  if (strcmp(lk, "loop"))
    return rg_error(C, RG_ERR_TYPE, "unknown linker '%s' (auto, loop or stack)", lk), false;
  for (size_t k = 0; k < n; k++)
    if (order[k]->op->code == RG_OP_IFELSE)
      return rg_error(C, RG_ERR_TYPE, "the loop linker runs every node and cannot run an ifelse lazily: "
                      "use stack or auto"), false;
  return true;
}

static rg_function *build(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                          rg_variable *const *outputs, const rg_compile_opts *o,
                          ptrvec *shared_vars) {
  int nup = o ? o->nupdates : 0;
  int nallin = nin + shared_vars->n, nallout = nout + nup;
  rg_variable **ins = rg_gc_alloc((size_t)(nallin + 1) * sizeof *ins);
  rg_variable **outs = rg_gc_alloc((size_t)(nallout + 1) * sizeof *outs);
  if (nin) memcpy(ins, inputs, (size_t)nin * sizeof *ins);
  for (int i = 0; i < shared_vars->n; i++) ins[nin + i] = shared_vars->v[i];
  if (nout) memcpy(outs, outputs, (size_t)nout * sizeof *outs);
  for (int u = 0; u < nup; u++) outs[nout + u] = o->updates[u].value;
  rg_fgraph *fg = prepare(C, nallin, ins, nallout, outs, o);
  if (!fg) return NULL;
  for (int i = 0; i < nallin; i++) ins[i] = rg_fgraph_input(fg, i);
  for (int j = 0; j < nallout; j++) outs[j] = rg_fgraph_output(fg, j);
  size_t nnodes;
  rg_node *const *order = rg_fgraph_toposort(fg, &nnodes);
  bool stack;
  if (!choose_linker(C, o, nnodes, order, &stack)) return NULL;
  rg_function *f = rg_calloc(1, sizeof *f);
  if (!f) return rg_error(C, RG_ERR_NOMEM, "out of memory"), NULL;
  if (!set_codegen(C, f, o)) {
    rg_free(f);
    return NULL;
  }
  char err[1024] = "";
  rgb_link_opts lo = {.codegen = &f->codegen,
                      .backend = o ? o->backend : NULL,
                      .backend_name = o ? o->mode.backend : NULL,
                      .device_outputs = o && o->device_outputs,
                      .release = !(o && o->keep_intermediates),
                      .plan = !(o && o->keep_intermediates),
                      .profile = o && o->profile,
                      .nthreads = o ? o->nthreads : 1,
                      .stack_vm = stack};
  f->p = rgb_link((int)nnodes, order, nallin, ins, nallout, outs, &lo, err, sizeof err);
  if (!f->p) {
    rg_free((char *)f->codegen.cache_dir);
    rg_free(f);
    rg_error(C, RG_ERR_TYPE, "%s", err);
    return NULL;
  }
  f->nin = nin;
  f->nout = nout;
  if (!describe(f, nallin, ins, o, shared_vars)) {
    rg_function_free(f);
    return rg_error(C, RG_ERR_NOMEM, "out of memory"), NULL;
  }
  return f;
}

static bool check_updates(rg_ctx *C, const rg_compile_opts *o, ptrvec *shared_vars) {
  for (int u = 0; o && u < o->nupdates; u++) {
    const rg_update *up = &o->updates[u];
    if (!up->shared || !rg_variable_shared(up->shared))
      return rg_error(C, RG_ERR_TYPE, "update %d: the updated variable is not shared", u), false;
    if (!up->value) return rg_error(C, RG_ERR_TYPE, "update %d has no value", u), false;
    if (!rg_type_is_subtype(up->value->type, up->shared->type) &&
        (up->value->type->dtype != up->shared->type->dtype ||
         up->value->type->ndim != up->shared->type->ndim))
      return rg_error(C, RG_ERR_TYPE, "update %d: a value of type %s cannot replace %s", u,
                      rg_type_str(up->value->type), rg_type_str(up->shared->type)), false;
    for (int d = 0; d < up->shared->type->ndim; d++) {
      int64_t want = up->shared->type->shape[d], got = up->value->type->shape[d];
      if (want != RG_DIM_UNKNOWN && got != RG_DIM_UNKNOWN && want != got)
        return rg_error(C, RG_ERR_TYPE, "update %d: a value of type %s cannot replace %s (dimension %d)", u,
                        rg_type_str(up->value->type), rg_type_str(up->shared->type), d), false;
    }
    for (int k = 0; k < u; k++) /* Aesara: "this shared variable already has an update expression" */
      if (rg_variable_shared(o->updates[k].shared) == rg_variable_shared(up->shared))
        return rg_error(C, RG_ERR_TYPE, "updates %d and %d both update %s", k, u,
                        up->shared->name ? up->shared->name : "one shared variable"), false;
    bool listed = false;
    for (size_t i = 0; i < shared_vars->n; i++) listed |= shared_vars->v[i] == up->shared;
    if (!listed) pv_push(shared_vars, up->shared);
  }
  return true;
}

/* The counts and arrays rg_compile is given: non-negative, an array
 * wherever its count is not 0. */
static bool check_counts(rg_ctx *C, int nin, const void *inputs, int nout, const void *outputs,
                         const rg_compile_opts *o) {
  int nup = o ? o->nupdates : 0;
  if (nin < 0 || nout < 0 || nup < 0)
    return rg_error(C, RG_ERR_TYPE, "negative count: %d inputs, %d outputs, %d updates", nin, nout, nup), false;
  const char *what = nin && !inputs ? "inputs" : nout && !outputs ? "outputs" : nup && !o->updates ? "updates" : NULL;
  if (what)
    return rg_error(C, RG_ERR_TYPE, "a count of %s (%d) and no array of them", what,
                    what[0] == 'i' ? nin : what[0] == 'o' ? nout : nup), false;
  return true;
}

rg_function *rg_compile(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                        rg_variable *const *outputs, const rg_compile_opts *o) {
  if (!check_counts(C, nin, inputs, nout, outputs, o) || !check_inputs(C, nin, inputs)) return NULL;
  for (int j = 0; j < nout; j++)
    if (!outputs[j]) return rg_error_null(C, "output %d is NULL", j), NULL;
  int nup = o ? o->nupdates : 0;
  for (int u = 0; u < nup; u++)
    if (!o->updates[u].value) return rg_error(C, RG_ERR_TYPE, "update %d has no value", u), NULL;
  rg_variable **roots = rg_gc_alloc((size_t)(nout + nup + 1) * sizeof *roots);
  for (int j = 0; j < nout; j++) roots[j] = outputs[j];
  for (int u = 0; u < nup; u++) roots[nout + u] = o->updates[u].value;
  ptrvec order = PTRVEC_INIT, leaves = PTRVEC_INIT, shared_vars = PTRVEC_INIT;
  toposort(nout + nup, roots, &order, &leaves);
  find_shared(&leaves, &shared_vars);
  if (!check_updates(C, o, &shared_vars)) return NULL;
  return build(C, nin, inputs, nout, outputs, o, &shared_vars);
}

void rg_function_free(rg_function *f) {
  if (!f) return;
  rgb_program_free(f->p);
  for (int i = 0; i < f->nshared; i++) rg_shared_free(f->shared[i]);
  rg_free(f->shared);
  rg_free(f->update_shared);
  rg_free(f->may_share);
  rg_free(f->in_types);
  for (int i = 0; f->in_names && i < f->nin + f->nshared; i++) rg_free(f->in_names[i]);
  rg_free(f->in_names);
  rg_free((char *)f->codegen.cache_dir);
  rg_free(f);
}

int rg_function_nin(const rg_function *f) { return f->nin; }
rgb_program *rgb_function_program(const rg_function *f) { return f->p; }
int rg_function_nout(const rg_function *f) { return f->nout; }

void rg_function_input_type(const rg_function *f, int i, rg_dtype *dtype, int *ndim,
                            int64_t shape[RG_MAX_NDIM]) {
  if (i < 0 || i >= f->nin + f->nshared) { /* no such input */
    *dtype = RG_NDTYPES, *ndim = -1;
    return;
  }
  const rgb_vtype *t = &f->in_types[i];
  *dtype = t->dtype;
  *ndim = t->ndim;
  memcpy(shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
}

const char *rg_function_errmsg(const rg_function *f) { return f->err; }

/* ------------------------------------------------------------------ calling */

static int ferr(rg_function *f, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ferr(rg_function *f, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->err, sizeof f->err, fmt, ap);
  va_end(ap);
  return code;
}

static const char *input_label(const rg_function *f, int i, char *buf, size_t len) {
  const char *what = i < f->nin ? "input" : "shared variable";
  if (f->in_names[i][0]) snprintf(buf, len, "%s %s", what, f->in_names[i]);
  else snprintf(buf, len, "%s %d", what, i < f->nin ? i : i - f->nin);
  return buf;
}

/* Whether v fits input i's type (a shared variable's too); `what`
 * introduces the message ("the new value of " for an update). */
static int check_value_as(rg_function *f, int i, const rg_tensor *v, const char *what) {
  const rgb_vtype *t = &f->in_types[i];
  if (v && fits_shape(v, t->dtype, t->ndim, t->shape)) return RG_OK; /* the common case: nothing formatted */
  char name[128], label[160];
  snprintf(label, sizeof label, "%s%s", what, input_label(f, i, name, sizeof name));
  if (!v) return ferr(f, RG_ERR_TYPE, "%s is missing", label);
  char want[256], got[256];
  rg_shape_str(t->ndim, t->shape, want, sizeof want);
  rg_shape_str(v->ndim, v->shape, got, sizeof got);
  return ferr(f, RG_ERR_TYPE, "%s: expected %s %s, got %s %s", label, rg_dtype_name(t->dtype), want,
              rg_dtype_name(v->dtype), got);
}

static int check_value(rg_function *f, int i, const rg_tensor *v) { return check_value_as(f, i, v, ""); }

/* Whether every update's value fits its shared variable's type (a value of
 * another shape than a static one declared: the shapes the graph folded
 * from that type would no longer hold); else the values are freed. */
static int check_updates_run(rg_function *f, rg_tensor **values) {
  for (int u = 0; u < f->nupdates; u++) {
    int rc = check_value_as(f, f->nin + f->update_shared[u], values[u], "the new value of ");
    if (!rc) continue;
    for (int k = 0; k < f->nupdates; k++) rg_tensor_free(values[k]), values[k] = NULL;
    return rc;
  }
  return RG_OK;
}

/* The new values of the shared containers (references the containers take). */
static void apply_updates(rg_function *f, rg_tensor **values) {
  for (int u = 0; u < f->nupdates; u++) {
    rg_shared *s = f->shared[f->update_shared[u]];
    rg_tensor_free(s->value);
    s->value = values[u];
  }
}

/* The program's inputs: the caller's values, checked, then the shared
 * containers' values. */
static int bind_values(rg_function *f, rg_tensor *const *inputs, rg_tensor **ins) {
  if (f->nin && !inputs) return ferr(f, RG_ERR_TYPE, "no inputs given (the function takes %d)", f->nin);
  for (int i = 0; i < f->nin; i++) {
    int rc = check_value(f, i, inputs[i]);
    if (rc) return rc;
    ins[i] = inputs[i];
  }
  for (int i = 0; i < f->nshared; i++) { /* rg_shared_set may have given any shape */
    int rc = check_value(f, f->nin + i, f->shared[i]->value);
    if (rc) return rc;
    ins[f->nin + i] = f->shared[i]->value;
  }
  return RG_OK;
}

/* Whether v shares storage with a value the caller or the function keeps:
 * an input, a shared container's value, a constant of the program. */
static bool kept_elsewhere(const rg_function *f, rg_tensor *const *ins, const rg_tensor *v) {
  for (int i = 0; i < f->nin + f->nshared; i++)
    if (ins[i] && ins[i]->storage == v->storage) return true;
  const rgb_program *p = f->p;
  for (int32_t k = 0; k < p->nconst; k++) {
    const rg_tensor *c = p->cells[p->const_cells[k]];
    if (c && c->storage == v->storage) return true;
  }
  return false;
}

/* Whether v[i] shares storage with an earlier one of v. */
static bool shares_earlier(rg_tensor *const *v, int i) {
  for (int j = 0; j < i; j++)
    if (v[j]->storage == v[i]->storage) return true;
  return false;
}

/* Each returned value is the caller's alone: one that is (a view of) an
 * input, a shared value, a constant or a value returned before it (an
 * output listed twice, a view of another output, the new value of a shared
 * container that is also an output) is copied, as Aesara copies such
 * outputs, so writing into it changes neither the caller's input, nor
 * another output, nor a later call's result.  which[i]: the program output
 * v[i] is (outputs first, then the updates' values). */
static int own_values(rg_function *f, rg_tensor *const *ins, int n, const int *which, rg_tensor **v) {
  for (int i = 0; i < n; i++) {
    if (!shares_earlier(v, i) && (!f->may_share[which[i]] || !kept_elsewhere(f, ins, v[i]))) continue;
    rg_tensor *c = rg_tensor_copy(v[i]);
    if (!c) {
      for (int j = 0; j < n; j++) rg_tensor_free(v[j]);
      return ferr(f, RG_ERR_NOMEM, "out of memory copying output %d", i);
    }
    rg_tensor_free(v[i]);
    v[i] = c;
  }
  return RG_OK;
}

int rg_function_call_subset(rg_function *f, rg_tensor *const *inputs, int n, const int *which,
                            rg_tensor **outputs) {
  if (!f) return RG_ERR_TYPE;
  f->err[0] = 0;
  if (n < 0 || (n && !outputs))
    return ferr(f, RG_ERR_TYPE, n < 0 ? "a negative count of outputs (%d)" : "%d outputs asked for and no array for them", n);
  rg_tensor *ins[f->nin + f->nshared + 1];
  int rc = bind_values(f, inputs, ins);
  if (rc) return rc;
  for (int i = 0; i < n; i++)
    if (which && (which[i] < 0 || which[i] >= f->nout))
      return ferr(f, RG_ERR_TYPE, "output index %d out of range", which[i]);
  int nwant = n + f->nupdates;
  int sel[nwant + 1];
  for (int i = 0; i < n; i++) sel[i] = which ? which[i] : i;
  for (int u = 0; u < f->nupdates; u++) sel[n + u] = f->nout + u;
  rg_tensor *all[nwant + 1];
  bool everything = !which && n == f->nout;
  rc = rgb_program_run(f->p, ins, nwant, everything ? NULL : sel, all);
  if (rc) return ferr(f, rc, "%s", f->p->rt->err);
  if ((rc = own_values(f, ins, nwant, sel, all))) return rc;
  if ((rc = check_updates_run(f, all + n))) {
    for (int i = 0; i < n; i++) rg_tensor_free(all[i]);
    return rc;
  }
  for (int i = 0; i < n; i++) outputs[i] = all[i];
  apply_updates(f, all + n);
  return RG_OK;
}

int rg_function_call(rg_function *f, rg_tensor *const *inputs, rg_tensor **outputs) {
  return f ? rg_function_call_subset(f, inputs, f->nout, NULL, outputs) : RG_ERR_TYPE;
}

/* Whether v's data lies in t's memory (host memory, t contiguous: what a
 * program computes into in place). */
static bool within(const rg_tensor *v, const rg_tensor *t) {
  const char *lo = (const char *)t->data, *hi = lo + rg_tensor_numel(t) * (int64_t)rg_dtype_size(t->dtype);
  return (const char *)v->data >= lo && (const char *)v->data < hi;
}

int rg_function_call_into(rg_function *f, rg_tensor *const *inputs, rg_tensor *const *outputs) {
  if (!f) return RG_ERR_TYPE;
  f->err[0] = 0;
  if (f->nout && !outputs) return ferr(f, RG_ERR_TYPE, "no tensors given to write the %d outputs into", f->nout);
  int nall = f->nout + f->nupdates;
  rg_tensor *ins[f->nin + f->nshared + 1], *into[nall + 1], *refs[nall + 1];
  int rc = bind_values(f, inputs, ins);
  if (rc) return rc;
  for (int j = 0; j < f->nout; j++) {
    if (!outputs[j]) return ferr(f, RG_ERR_TYPE, "output %d: no tensor given to write it into", j);
    for (int k = 0; k < j; k++) /* one tensor would hold the last output written */
      if (outputs[k]->storage == outputs[j]->storage && outputs[k]->data == outputs[j]->data)
        return ferr(f, RG_ERR_TYPE, "outputs %d and %d are given the same tensor to write into", k, j);
      else if (rg_tensor_overlap(outputs[k], outputs[j]))
        return ferr(f, RG_ERR_TYPE, "outputs %d and %d are given overlapping memory to write into", k, j);
    for (int i = 0; i < f->nin; i++) /* a kernel would read what it overwrites */
      if (rg_tensor_overlap(outputs[j], inputs[i]))
        return ferr(f, RG_ERR_TYPE, "output %d is given memory of input %d to write into: the targets must not "
                    "overlap the inputs", j, i);
    into[j] = outputs[j];
  }
  int upd[f->nupdates + 1]; /* the updates' program outputs */
  for (int u = 0; u < f->nupdates; u++) into[f->nout + u] = NULL, upd[u] = f->nout + u;
  rc = rgb_program_run_into(f->p, ins, into, refs);
  if (rc) return ferr(f, rc, "%s", f->p->rt->err);
  /* a shared container's new value is its own: not an input's or a
   * constant's, nor (a view of) memory of the caller's that an output was
   * computed into */
  for (int u = 0; u < f->nupdates; u++) {
    rg_tensor **v = &refs[f->nout + u];
    for (int j = 0; j < f->nout; j++) {
      if (!within(*v, outputs[j])) continue;
      rg_tensor *c = rg_tensor_copy(*v);
      if (!c) {
        for (int k = 0; k < f->nupdates; k++) rg_tensor_free(refs[f->nout + k]);
        return ferr(f, RG_ERR_NOMEM, "out of memory copying update %d", u);
      }
      rg_tensor_free(*v);
      *v = c;
      break;
    }
  }
  if ((rc = own_values(f, ins, f->nupdates, upd, refs + f->nout))) return rc;
  if ((rc = check_updates_run(f, refs + f->nout))) return rc;
  apply_updates(f, refs + f->nout);
  return RG_OK;
}

/* ------------------------------------------------------------------ profile and dump */

/* The nodes of an inner program that ran thunk by thunk (a Scan's steps),
 * indented under their node.  A composite, one kernel, has no time per
 * node: a line names the ops fused into it; a Scan whose steps ran as flat
 * elementwise loops (the executor's fast path) says so instead. */
static void profile_inner(const rgb_thunk *parent, const rgb_program *p, FILE *out, int depth, double total) {
  int64_t calls = 0;
  for (int32_t k = 0; k < p->nthunks; k++) calls += p->thunks[k].calls;
  if (!calls) {
    if (parent->calls && parent->node.code == RG_OP_SCAN)
      fprintf(out, "  %*s       (its steps ran as flat elementwise loops: no time per node)\n", 2 * depth, "");
    if (parent->node.code == RG_OP_COMPOSITE) {
      fprintf(out, "  %*s       (fused:", 2 * depth, "");
      for (int32_t k = 0; k < p->nthunks; k++) fprintf(out, "%s %s", k ? "," : "", p->thunks[k].node.label);
      fprintf(out, ")\n");
    }
    return;
  }
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    fprintf(out, "  %*s%5d  %-*s %10lld %12.6f %12.3f %6.1f\n", 2 * depth, "", k, 16 - 2 * depth > 4 ? 16 - 2 * depth : 4,
            t->node.label, (long long)t->calls, t->seconds,
            t->calls ? t->seconds / (double)t->calls * 1e6 : 0.0, total > 0 ? 100 * t->seconds / total : 0.0);
    if (t->node.inner) profile_inner(t, t->node.inner, out, depth + 1, total);
  }
}

/* The line of op `code` in the per-op table (the transfers between
 * devices for RG_OP_COUNT); nothing when no thunk is one. */
static void per_op_line(const rgb_program *p, int code, double total, FILE *out) {
  double s = 0;
  int64_t calls = 0;
  int nodes = 0;
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    if (code == RG_OP_COUNT ? t->kind != RGB_T_TRANSFER : t->kind == RGB_T_TRANSFER || (int)t->node.code != code)
      continue;
    s += t->seconds;
    calls += t->calls;
    nodes++;
  }
  if (nodes)
    fprintf(out, "  %-16s %5d nodes %10lld calls %12.6f s %6.1f%%\n",
            code == RG_OP_COUNT ? "transfer" : rg_opcode_name((rg_opcode)code), nodes, (long long)calls, s,
            total > 0 ? 100 * s / total : 0.0);
}

void rg_function_profile(const rg_function *f, FILE *out) {
  const rgb_program *p = f->p;
  if (!p->profile) {
    fprintf(out, "no profile: compile with the profile option\n");
    return;
  }
  double total = 0;
  for (int32_t k = 0; k < p->nthunks; k++) total += p->thunks[k].seconds;
  fprintf(out, "per node (%d nodes, %.6f s in kernels):\n", p->nthunks, total);
  fprintf(out, "  %5s  %-16s %10s %12s %12s %6s\n", "#", "op", "calls", "total s", "per call us", "%");
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    fprintf(out, "  %5d  %-16s %10lld %12.6f %12.3f %6.1f\n", k, t->node.label, (long long)t->calls,
            t->seconds, t->calls ? t->seconds / (double)t->calls * 1e6 : 0.0,
            total > 0 ? 100 * t->seconds / total : 0.0);
    if (t->node.inner) profile_inner(t, t->node.inner, out, 1, total);
  }
  fprintf(out, "per op:\n");
  for (int code = 0; code <= RG_OP_COUNT; code++) /* RG_OP_COUNT: the transfers */
    per_op_line(p, code, total, out);
}

/* "c3", or "c3@mirror" for a cell off the host. */
static void dump_cell(const rgb_program *p, int32_t c, bool first, FILE *out) {
  char dev[16];
  fprintf(out, first ? "c%d" : " c%d", c);
  if (p->cell_dev[c] != RG_DEVICE_HOST) fprintf(out, "@%s", rg_device_str(p->cell_dev[c], dev, sizeof dev));
}

static void dump_thunk(const rgb_program *p, int32_t k, FILE *out) {
  const rgb_thunk *t = &p->thunks[k];
  fprintf(out, "  %4d %-14s %-8s (", k, t->node.label, t->backend->name);
  for (int i = 0; i < t->node.nin; i++) dump_cell(p, t->in_cells[i], i == 0, out);
  fprintf(out, ") -> (");
  for (int j = 0; j < t->node.nout; j++) dump_cell(p, t->out_cells[j], j == 0, out);
  fprintf(out, ")");
  if (t->node.inplace >= 0) fprintf(out, " destroys c%d", t->in_cells[t->node.inplace]);
  if (t->nrelease) {
    fprintf(out, " release");
    for (int i = 0; i < t->nrelease; i++) fprintf(out, " c%d", t->release[i]);
  }
  fputc('\n', out);
}

void rg_function_dump(const rg_function *f, FILE *out) {
  const rgb_program *p = f->p;
  fprintf(out, "program: %d cells, %d thunks, %s VM%s\n", p->ncells, p->nthunks,
          p->lazy ? "stack" : "loop", p->release ? ", releasing intermediates" : "");
  fprintf(out, "backends:");
  for (int i = 0; i < p->nbackends; i++) fprintf(out, " %s", p->backend[i]->name);
  fprintf(out, "; %d transfers\n", p->ntransfers);
  bool any = false;
  for (int32_t i = 0; i < p->nconst; i++)
    if (p->cell_dev[p->const_cells[i]] != RG_DEVICE_HOST) {
      fprintf(out, any ? " " : "constants uploaded once: ");
      dump_cell(p, p->const_cells[i], true, out);
      any = true;
    }
  if (any) fputc('\n', out);
  if (p->nplanned)
    fprintf(out, "memory plan: %d values of %zu bytes share an arena of %zu bytes\n", p->nplanned,
            p->planned_bytes, p->arena_bytes);
  for (int32_t k = 0; k < p->nthunks; k++) dump_thunk(p, k, out);
}
