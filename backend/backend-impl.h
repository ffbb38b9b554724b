/*
 * backend-impl.h — the contract between the linker and the backends'
 * kernels.
 *
 * The linker (backend/linker.c) turns a FunctionGraph into a program: a
 * storage cell per variable, a thunk per node, a schedule.  A linked
 * program holds no collected pointer: everything a kernel sees is copied
 * out of the graph into plain memory at link time (rgb_node), and values
 * are manually owned host tensors (rg_tensor).
 *
 * A storage cell is an `rg_tensor *` (NULL while it holds no value).  A
 * kernel reads its inputs through `inp` (pointers to the input cells) and
 * produces each output into its cell, through rgb_output() (a fresh or
 * reused buffer of the right shape) or rgb_set_output() (for views).
 *
 * Buffer reuse: the tensor left in an output cell by the previous call is
 * reused when its storage is not shared (refcount 1) and its shape fits;
 * a tensor handed to the caller has an extra reference, so it is never
 * overwritten by a later call.  When intermediates are released after
 * their last use, their buffers go to a pool of the function (by byte
 * size) that rgb_output() takes from first.
 */
#ifndef RELGRAPH_BACKEND_IMPL_H
#define RELGRAPH_BACKEND_IMPL_H

#include "relgraph/backend.h"
#include "relgraph/graph.h"

#include <stdlib.h>
#include <string.h>

/* A static type as kernels see it (a copy of rg_type). */
typedef struct rgb_vtype {
  rg_dtype dtype;
  int32_t ndim;
  int64_t shape[RG_MAX_NDIM]; /* RG_DIM_UNKNOWN where not known statically */
  bool weak;                  /* a literal scalar (NEP 50 weak dtype, RG_VAR_WEAK) */
  bool constant;              /* a constant of the graph: the same value at every call */
  rg_device device;           /* where the type says the value lives */
  bool known;                 /* weak integer literal: its value is `value` */
  int64_t value;
} rgb_vtype;

struct rgb_program;

/* A node as the backend sees it: the op's parameters and the static types
 * of the node's inputs and outputs, in plain memory owned by the program.
 * Fields mirror rg_op (see graph.h for which op uses which parameter). */
/* Where generated kernels come from (rg_compile_opts): the cache
 * directory (NULL: rg_cache_dir's default) and whether the CPU generates
 * C for fused groups at all (off: the composite interpreter runs them).
 * Owned by the function; its programs and nodes point at it. */
typedef struct rgb_codegen {
  const char *cache_dir;
  bool off;
} rgb_codegen;

/* Whether the environment turns kernel generation off (RELGRAPH_CODEGEN=0). */
static inline bool rgb_codegen_env_off(void) {
  const char *on = getenv("RELGRAPH_CODEGEN");
  return on && !strcmp(on, "0");
}

typedef struct rgb_node {
  rg_opcode code;
  rg_dtype dtype;          /* RG_NDTYPES when unused */
  int32_t inplace;         /* destroyed input, or -1 */
  int32_t view_of;         /* the input every output views (rg_op_view_of), or -1 */
  bool all_axes;
  int32_t nints;
  const int64_t *ints;
  int32_t nin, nout;
  const rgb_vtype *in;     /* nin static input types */
  const rgb_vtype *out;    /* nout static output types */
  struct rgb_program *inner; /* composite / op_from_graph: the linked inner graph */
  /* A composite whose outputs a join read (join-into.c): join_slot[k] is
   * the part output k of the inner graph is along join_axis (-1: none),
   * and the node has one output more than its inner graph, the joined
   * value; the parts are views of it.  NULL: an ordinary node. */
  int32_t *join_slot;
  int32_t join_axis;
  /* A Scan whose whole state traces are read with their initial values
   * (join-into.c): its last nfull outputs are such joins, output
   * nout - nfull + i the trace of outer output full_of[i], initial row
   * first, as a view of the buffer the state lives in.  NULL: none. */
  int32_t *full_of;
  int32_t nfull;
  const char *label;       /* "add", or an opaque op's name (for messages) */
  const rgb_codegen *codegen; /* the function's; NULL: the defaults */
  /* Kernel memo: zeroed by rgb_node_init; the node's kernel may store here
   * what it derives from the node alone (its typed loop, ...) on its first
   * run, read and written with memcpy.  A thunk's kernel runs one call at a
   * time, so the memo needs no lock. */
  _Alignas(8) unsigned char memo[80];
} rgb_node;

/* The running state a function's kernels share: the error of the current
 * call, the pool of released buffers, the worker threads. */
#define RGB_POOL_MAX 64 /* tensors a pool keeps; the oldest goes first */
typedef struct rgb_pool {
  rg_tensor **v; /* released tensors (storage count 1), any shape, oldest first */
  int n, cap;    /* n <= RGB_POOL_MAX */
} rgb_pool;
struct rgb_tpool;
typedef struct rgb_runtime {
  int errcode;
  char err[1024];
  bool use_pool;   /* released intermediates go to the pool */
  rgb_pool pool;
  int nthreads;
  struct rgb_tpool *threads; /* started on first parallel use */
} rgb_runtime;

rgb_runtime *rgb_runtime_new(int nthreads, bool use_pool);
void rgb_runtime_free(rgb_runtime *rt);
/* Releases a cell's value: to the pool when enabled and unshared, else
 * rg_tensor_free.  Sets the cell to NULL. */
void rgb_release(rgb_runtime *rt, rg_tensor **cell);
/* Values whose storage is at most this many bytes are not released after
 * their last use in a call when nobody else holds them: they stay in their
 * cell for the next call to overwrite (see vm.c). */
#define RGB_KEEP_BYTES 256

/* An output's place in the program's memory plan (backend/plan.c):
 * room for nbytes at `at`, in the arena; at NULL: not planned. */
typedef struct rgb_planned {
  char *at;
  size_t nbytes;
} rgb_planned;

/* One kernel invocation. */
typedef struct rgb_exec {
  const rgb_node *node;
  rg_tensor **const *inp;  /* inp[k]: the cell of input k (never empty) */
  rg_tensor **const *outp; /* outp[j]: the cell of output j */
  struct rgb_runtime *rt;  /* the running function: pool, threads, errors */
  void *state;             /* the kernel's own state (rgb_bound.state) */
  const rg_buffer_type *buft; /* where outputs go (the node's backend); NULL: host */
  const rgb_planned *plan;  /* per output; NULL: none of them is planned */
} rgb_exec;

/* A kernel computes its node; returns 0, or an error status after
 * rgb_error().  Kernels must accept any strides, including zero and
 * negative ones, and empty tensors. */
typedef int (*rgb_kernel)(rgb_exec *x);

static inline rg_tensor *rgb_in(const rgb_exec *x, int k) { return *x->inp[k]; }

/* The tensor to write output j into: dtype dt, C-contiguous, the given
 * shape; reuses the cell's previous buffer when it is unshared and of the
 * right size, else takes one from the pool or allocates.  NULL (with an
 * error recorded) if memory is exhausted. */
rg_tensor *rgb_output(rgb_exec *x, int j, rg_dtype dt, int ndim, const int64_t *shape);
/* Makes output j the tensor t (a view or a reference the kernel owns;
 * ownership passes to the cell). */
void rgb_set_output(rgb_exec *x, int j, rg_tensor *t);
/* Records a run-time error ("add: shapes (3) and (4) do not broadcast")
 * and returns RG_ERR_TYPE or the given code. */
int rgb_error(rgb_exec *x, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Runs fn(ud, lo, hi) over [0, n) in chunks of at least `grain`, on the
 * function's threads when it has more than one (else inline). */
void rgb_parallel_for(rgb_exec *x, int64_t n, int64_t grain,
                      void (*fn)(void *ud, int64_t lo, int64_t hi), void *ud);
/* Runs a linked inner program (composite, op_from_graph) on tensors. */
int rgb_run_inner(rgb_exec *x, struct rgb_program *p, rg_tensor *const *in, rg_tensor **out);

/* ------------------------------------------------------------------ backends */

/* What binding a node gives: its kernel and the kernel's own state (a
 * generated function, a library handle, a plan), which the kernel reads as
 * x->state and the program frees with free_state when it is freed. */
typedef struct rgb_bound {
  rgb_kernel fn;
  void *state;
  void (*free_state)(void *state);  /* (optional) */
} rgb_bound;

/* The interface every backend implements (ggml-backend's model), listed
 * in backend/registry.c.  Slots marked (optional) may be NULL.  `ctx` is
 * the backend object's own context, made by init. */
#define RGB_BACKEND_ABI 6
typedef struct rgb_backend {
  uint32_t abi;                 /* RGB_BACKEND_ABI */
  const char *name;             /* "cpu", "mirror", "cuda" */
  rg_device device;             /* where its buffers live (cuda: device 0; init picks another) */
  bool (*available)(int ordinal, char *why, size_t len); /* (optional) false + reason if device `ordinal` is unusable here */
  /* (optional) makes the context for a backend named spec ("cuda:1");
   * 0, or an error with the reason in why. */
  int (*init)(const char *spec, void **ctx, rg_device *device, char *why, size_t len);
  void (*fini)(void *ctx);                           /* (optional) */
  /* (optional) the buffer type of its values; NULL: host memory */
  const rg_buffer_type *(*buffer_type)(void *ctx);
  /* (optional) its pinned host memory (a buffer type whose device is the
   * host); NULL: none */
  const rg_buffer_type *(*host_buffer_type)(void *ctx);
  bool (*supports)(void *ctx, const rgb_node *n);    /* can it run this node? */
  /* 0, or an error with the reason in why ("" when it has none to give) */
  int (*bind)(void *ctx, const rgb_node *n, rgb_bound *out, char *why, size_t len);
  /* the inner graphs of the composites it runs are linked for the CPU
   * (its kernels only read them); else for itself.  A Scan's inner graph
   * is always linked for the backend running the Scan. */
  bool inner_on_host;
  int (*synchronize)(void *ctx);                     /* (optional) */
  /* (optional) input i of n is read by the host (a shape argument): the
   * scheduler leaves it in host memory rather than moving it to the
   * backend's device */
  bool (*host_input)(void *ctx, const rgb_node *n, int i);
  /* its composite kernels write the parts of a folded join (join_slot,
   * through rgb_joined_outputs) */
  bool joins_composites;
} rgb_backend;

/* Whether input i of Scan node n is n_steps or a nit-sot length (node.c). */
bool rgb_scan_length_input(const rgb_node *n, int i);

/* Whether input i of n is a shape argument, which the kernels read on the
 * host: alloc's inputs after the value, alloc_empty's inputs, reshape's
 * shape and split's sizes, subtensor's index inputs, a Scan's n_steps and
 * nit-sot lengths.  A device backend running these ops leaves them in
 * host memory (its host_input slot). */
static inline bool rgb_shape_argument(const rgb_node *n, int i) {
  switch (n->code) {
  case RG_OP_SCAN: return rgb_scan_length_input(n, i);
  case RG_OP_ALLOC: case RG_OP_SUBTENSOR: return i >= 1;
  case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: return i >= 2;
  case RG_OP_ALLOC_EMPTY: return true;
  case RG_OP_RESHAPE: case RG_OP_SPLIT: return i == 1;
  default: return false;
  }
}

/* Whether n reads only the shape of input i, never its values (shape,
 * shape_i): the scheduler hands it the value wherever it lives, with no
 * transfer. */
static inline bool rgb_metadata_input(const rgb_node *n, int i) {
  return (n->code == RG_OP_SHAPE || n->code == RG_OP_SHAPE_I) && i == 0;
}

/* A backend object (public as rg_backend): an interface and its context.
 * Invariant: buft is iface->buffer_type(ctx) and host_buft
 * iface->host_buffer_type(ctx), fixed at creation. */
struct rg_backend {
  const rgb_backend *iface;
  void *ctx;
  rg_device device;
  const rg_buffer_type *buft;   /* NULL: host memory */
  const rg_buffer_type *host_buft; /* pinned host memory; NULL: none */
  char name[32];                /* "cpu", "cuda:0" */
};

extern const rgb_backend rgb_cpu_backend, rgb_mirror_backend, rgb_cuda_backend;
/* The CPU backend object every program may fall back on (no context). */
extern const rg_backend rgb_cpu;
/* The registered backends, NULL-terminated. */
extern const rgb_backend *const rgb_backends[];
/* The interface for a name ("cuda:1" finds "cuda"), or NULL. */
const rgb_backend *rgb_backend_find(const char *name);
/* The device number of a backend name, "NAME:N" (0 <= N < 1024; 0 for a
 * bare "NAME"); RG_ERR_SYNTAX when N is not such a number. */
int rgb_device_ordinal(const char *name, int *ordinal);
/* The kernel of transfer thunks: copies its input to the device of the
 * buffer type in x->state (NULL: host memory). */
int rgb_transfer_kernel(rgb_exec *x);

/* The CPU backend's kernels, one per op (NULL: not executable, e.g. opaque,
 * or handled by the virtual machine itself, ifelse). */
extern const rgb_kernel rgb_cpu_kernels[RG_OP_COUNT];

/* ------------------------------------------------------------------ programs */

/* A thunk: a node bound to its kernel and its cells.  Invariants: `x.inp`
 * and `x.outp` point into the program's cells; `release` lists the cells
 * whose last reader is this thunk (released after it runs when the program
 * releases intermediates). */
enum { RGB_T_KERNEL, RGB_T_IFELSE, RGB_T_TRANSFER };
/* The code of a transfer thunk's node (no op of the table). */
#define RGB_TRANSFER ((rg_opcode)RG_OP_COUNT)
typedef struct rgb_thunk {
  /* what the virtual machines touch, first (two cache lines with the
   * node's counts) */
  rgb_kernel fn;
  rgb_exec x;
  uint8_t kind;
  int32_t nrelease;
  int32_t *in_cells, *out_cells;   /* cell indices of inputs and outputs */
  int32_t *release;
  rgb_node node;
  const rg_backend *backend;       /* where it runs (a transfer: its destination) */
  void (*free_state)(void *state); /* frees x.state with the program */
  /* profile */
  int64_t calls;
  double seconds;
} rgb_thunk;

/* A linked program: cells, thunks in a topological order, and what the
 * lazy VM needs.  Invariants: constant cells hold their value for the
 * program's whole life; input cells are borrowed during a call and empty
 * between calls; producer[c] is the thunk writing cell c, or -1. */
#define RGB_MAX_BACKENDS 8
typedef struct rgb_program {
  int32_t ncells;
  rg_tensor **cells;
  rg_device *cell_dev;      /* per cell: the device its value lives on */
  rg_tensor ***cellp;       /* cellp[c] == &cells[c] (what rgb_exec points at) */
  int32_t nin, nout;
  int32_t *in_cells, *out_cells;
  int32_t nconst;
  int32_t *const_cells;
  int32_t nthunks;
  rgb_thunk *thunks;
  int32_t *producer;
  bool lazy;                /* has ifelse: run by the stack VM */
  bool release;             /* release intermediates after their last use */
  bool profile;
  rgb_runtime *rt;
  /* placement: the backends the program runs on; backend[0] is the one
   * asked for, and the program frees those it made (own[i]) */
  int nbackends;
  const rg_backend *backend[RGB_MAX_BACKENDS];
  bool own[RGB_MAX_BACKENDS];
  int32_t ntransfers;       /* transfer thunks among the thunks */
  /* scratch of the stack VM */
  uint8_t *state;           /* per thunk: 0 not run, 1 waiting, 2 done */
  int32_t *stack;
  uint8_t *need;            /* per cell: requested by the caller */
  uint8_t *in_copied;       /* per input: its cell holds a copy made for the call */
  /* the memory plan (plan.c): planned outputs live in the arena, at the
   * places their thunks' x.plan give; nplanned values of planned_bytes
   * in all share arena_bytes */
  char *arena;
  size_t arena_bytes, planned_bytes;
  int32_t nplanned;
} rgb_program;

/* Lets each composite whose outputs only a join reads write them into
 * the joined value (the parts become views of it), and removes the join
 * (join-into.c), where both run on one backend whose composite kernels
 * can (rgb_backend.joins_composites).  Runs before the release lists are
 * made; false when memory runs out (the program is then unchanged). */
bool rgb_join_into(rgb_program *p);
/* For the kernel of such a composite: makes its last output, the joined
 * value (the parts, each of shape (nd, shape), side by side along
 * join_axis), and sets each part's output to a view of it.  *row (when
 * not NULL): the elements of a part from the axis on (a run the part
 * writes contiguously); *parts (when not NULL): how many parts.  0, or an
 * error. */
int rgb_joined_outputs(rgb_exec *x, int nd, const int64_t *shape, int64_t *row, int *parts);

/* Plans the memory of a linked program (plan.c; nothing for a program
 * with ifelse, or when memory runs out); rgb_plan_clear undoes it. */
void rgb_plan_memory(rgb_program *p);
void rgb_plan_clear(rgb_program *p);
/* Whether cell c has a place in the plan. */
static inline bool rgb_cell_planned(const rgb_program *p, int32_t c) {
  int32_t k = p->producer[c];
  if (k < 0 || !p->thunks[k].x.plan) return false;
  const rgb_thunk *t = &p->thunks[k];
  for (int j = 0; j < t->node.nout; j++)
    if (t->out_cells[j] == c) return t->x.plan[j].at != NULL;
  return false;
}

/* How to link: the backend asked for (an object the caller keeps alive,
 * or a name the program makes one from; neither: the CPU), whether
 * outputs stay on their device, the runtime's options. */
typedef struct rgb_link_opts {
  const rg_backend *backend;
  const char *backend_name;
  bool device_outputs;     /* outputs stay where computed (else: host) */
  bool inner;              /* an inner graph: inputs and outputs on the backend's device */
  bool release;            /* release intermediates after their last use */
  bool plan;               /* plan the memory of intermediates (plan.c) */
  bool profile;
  bool stack_vm;           /* run on the stack VM even when nothing is lazy */
  int nthreads;
  const rgb_codegen *codegen; /* NULL: the defaults */
} rgb_link_opts;

/* Links nodes (in topological order) into a program reading `inputs` and
 * producing `outputs`: places every node on a backend and inserts the
 * transfers between devices (backend/schedule.c).  Returns NULL with a
 * message in err on failure. */
rgb_program *rgb_link(int nnodes, rg_node *const *nodes, int nin, rg_variable *const *inputs,
                      int nout, rg_variable *const *outputs, const rgb_link_opts *o, char *err,
                      size_t errlen);
void rgb_program_free(rgb_program *p);
/* The program's backend whose values live on device d, or NULL (every
 * cell's device has one: the linker made it). */
const rg_backend *rgb_program_backend_on(const rgb_program *p, rg_device d);
/* A compiled function's program (for tests and benchmarks). */
rgb_program *rgb_function_program(const rg_function *f);
/* Runs a program: inputs are borrowed; outputs receive new references.
 * which/n select outputs (which NULL: all).  Returns 0 or an error (in
 * p->rt->err). */
int rgb_program_run(rgb_program *p, rg_tensor *const *inputs, int n, const int *which,
                    rg_tensor **outputs);
/* Runs every output of a program, leaving them in their cells
 * (p->cells[p->out_cells[j]]) for the caller to read; the inputs stay
 * bound until rgb_program_unbind().  Returns 0 or an error (p->rt->err). */
int rgb_program_step(rgb_program *p, rg_tensor *const *inputs);
void rgb_program_unbind(rgb_program *p);
/* Runs a program into tensors the caller provides: output j is written
 * into into[j] (its dtype and shape; any strides; any device), or, where
 * into[j] is NULL, returned as a new reference in refs[j].  An output a
 * kernel computes into a buffer of its own is computed in place when its
 * target is C-contiguous host memory; the others are copied.  Returns 0
 * or an error (p->rt->err). */
int rgb_program_run_into(rgb_program *p, rg_tensor *const *inputs, rg_tensor *const *into,
                         rg_tensor **refs);
/* Puts in the cell of output j a tensor wrapping the given memory (of
 * bt's device; NULL: the host), so that the kernel computing it writes
 * there (rgb_output reuses the cell's buffer); NULL when out of memory.
 * rgb_program_unbind_output takes the wrapper back out of the cell if it
 * is still there, or what replaced it over the same memory: a kernel that
 * made its output from the wrapper (an inner Scan's trace shares its
 * storage) would otherwise leave a tensor over memory the binder gives
 * back, which rgb_output would hand out again at the next call.  Scan's
 * steps write their trace rows this way. */
rg_tensor *rgb_program_bind_output(rgb_program *p, int j, const rg_buffer_type *bt, rg_dtype dt, int ndim,
                                   const int64_t *shape, const int64_t *strides, void *data,
                                   size_t nbytes);
void rgb_program_unbind_output(rgb_program *p, int j, rg_tensor *wrapper, const void *data);
/* Rewrites the inner graph of every Scan of fg with rw (scan-compile.c). */
struct rg_rewriter;
struct rg_rewrite_opts;
int rgb_rewrite_scans(rg_ctx *C, rg_fgraph *fg, struct rg_rewriter *rw,
                      const struct rg_rewrite_opts *ro);

/* ------------------------------------------------------------------ nodes */

/* A static type as kernels see it (not weak, not constant). */
void rgb_vtype_of(rgb_vtype *v, const rg_type *t);
/* Copies a graph node into plain memory (op parameters, static types);
 * rgb_node_clear frees what it allocated, the linked inner program
 * included.  Inner graphs are not linked here (inner stays NULL). */
int rgb_node_init(rgb_node *bn, const rg_node *n);
void rgb_node_clear(rgb_node *bn);
/* For an op with an inner graph (composite, op_from_graph, Scan), links
 * that graph for `backend` into bn->inner (nested inner graphs in turn),
 * its kernels running on `nthreads` threads like the function's and
 * generated with bn->codegen; does nothing for other ops.  Returns 0, or an error with a message in err. */
int rgb_node_link_inner(rgb_node *bn, const rg_node *n, const rg_backend *backend, int nthreads, char *err,
                        size_t errlen);
/* Runs one graph node on the CPU outside any function (used by tests and
 * by constant folding): outputs[0..nout) receive new references.  Returns
 * 0, or an error with the message in err. */
int rgb_eval_node(const rg_node *n, rg_tensor *const *inputs, rg_tensor **outputs, char *err,
                  size_t errlen);

#endif
