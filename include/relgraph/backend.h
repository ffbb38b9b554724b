/*
 * relgraph/backend.h — compiling graphs into functions and running them.
 *
 * rg_compile() takes a graph (inputs, outputs) and a mode, and returns a
 * function: a linked program of thunks (one per node) over storage cells
 * (one per variable), run by a virtual machine.  The program holds no
 * collected memory, so the graph may be collected while the function
 * lives; rg_function_free() releases everything it owns.
 *
 * Values are tensors (rg_tensor, see graph.h), in host memory unless a
 * backend's buffers hold them.  Inputs are borrowed for the duration of a
 * call and may live on any device (one on another device than the
 * function reads it from is copied for the call).  Each output returned is
 * a new reference the caller owns and frees with rg_tensor_free(); a later
 * call never writes into it, and the caller may write into it: an output
 * that is (a view of) an input, a shared value or a constant is returned
 * as a copy.  Outputs are host tensors unless the function was compiled
 * with device_outputs.
 *
 * Placement: every node runs on the backend asked for (the mode's, or the
 * device an input's type names) where that backend can run it, else on
 * the CPU; values crossing devices are copied once per value (see
 * rg_function_dump).
 *
 * Shared variables hold a value that persists across calls and that an
 * update (an output computed by the function) replaces after each call.
 * Their values live in containers (rg_shared) that the functions using
 * them reference.
 *
 * Threads.  rg_compile() may run in several threads at once on graphs that
 * share no FunctionGraph.  A compiled function is called by one thread at a
 * time (it keeps its storage cells and reuses its buffers from one call to
 * the next); different functions may be called at once from different
 * threads unless they share a shared variable.  rg_function_free() must
 * not overlap a call of the same function.  A function's own kernel
 * worker threads (rg_compile_opts.nthreads) belong to it, sleep between
 * calls and end with rg_function_free().
 */
#ifndef RELGRAPH_BACKEND_H
#define RELGRAPH_BACKEND_H

#include "relgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library exports what this header declares, nothing else
 * (everything else is built with hidden visibility). */
#pragma GCC visibility push(default)

/* ------------------------------------------------------------------ shared values */

/* A shared value container: manually owned, reference counted. */
typedef struct rg_shared rg_shared;
rg_shared *rg_shared_new(const rg_tensor *init);      /* copies init */
void rg_shared_free(rg_shared *s);                    /* drops the caller's reference */
/* The current value (a new reference the caller frees). */
rg_tensor *rg_shared_get(const rg_shared *s);
/* Replaces the value (copied); RG_ERR_TYPE for another dtype or rank (the
 * container has no static sizes: a call of a function whose variable
 * declares sizes the value does not have fails, naming the variable). */
int rg_shared_set(rg_shared *s, const rg_tensor *value);
/* A graph input standing for the container's value.  Its type is the
 * value's dtype with every dimension of unknown size (broadcastable
 * dimensions of size 1 stay 1) unless `type` is given. */
rg_variable *rg_shared_var(rg_ctx *C, const char *name, rg_shared *s, const rg_type *type);
rg_shared *rg_variable_shared(const rg_variable *v);  /* NULL if v is not shared */

/* ------------------------------------------------------------------ compiling */

/* The mode: which rewrites, which linker, which backend.  NULL fields take
 * the defaults: the query "fast_run" (the standard rewrite database;
 * "fast_compile" and "none" are the other standard queries), linker "auto"
 * (the loop VM when nothing is lazy, else the stack VM; "loop" or "stack"
 * force one: "loop" runs every node, so rg_compile refuses it for a graph
 * with an ifelse; any other name is an error), backend "cpu". */
typedef struct rg_mode {
  const char *query;
  const char *linker;
  const char *backend;
} rg_mode;

/* An update: at most one per shared variable; the value's type must be
 * the variable's, its sizes agreeing where both know them (rg_compile
 * refuses others), and a value whose run-time sizes are not the ones the
 * variable declares fails the call, the container unchanged. */
typedef struct rg_update {
  rg_variable *shared;  /* a variable made by rg_shared_var */
  rg_variable *value;   /* its value after each call */
} rg_update;

typedef struct rg_backend rg_backend;

typedef struct rg_compile_opts {
  rg_mode mode;
  /* The backend object to run on (borrowed; overrides mode.backend).
   * Nodes it cannot run go to the CPU, with transfers between devices. */
  const rg_backend *backend;
  /* Outputs stay on the device that computed them (else: host tensors). */
  bool device_outputs;
  bool keep_intermediates; /* default: release them after their last use */
  int nupdates;
  const rg_update *updates;
  bool profile;            /* time every node (see rg_function_profile) */
  int nthreads;            /* kernel threads; 0 means 1 */
  /* Generated kernels (C for fused groups on the CPU, NVRTC's on CUDA)
   * are cached on disk in cache_dir (NULL: $RELGRAPH_CACHE_DIR, else
   * $XDG_CACHE_HOME/relgraph, else $HOME/.cache/relgraph); no_codegen runs
   * every fused group on the CPU by the composite interpreter instead (the
   * same values; also RELGRAPH_CODEGEN=0).  A cache_dir that cannot be
   * made or written into is an error of rg_compile. */
  const char *cache_dir;
  bool no_codegen;
} rg_compile_opts;

typedef struct rg_function rg_function;

/* Compiles outputs as functions of inputs (every input a variable without
 * owner; shared variables need not be listed).  NULL with an error in C on
 * failure: an input missing from the graph, an op no backend can run (an
 * opaque op), a bad mode. */
rg_function *rg_compile(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                        rg_variable *const *outputs, const rg_compile_opts *opts);
void rg_function_free(rg_function *f);

int rg_function_nin(const rg_function *f);
int rg_function_nout(const rg_function *f);
/* The static type of input i (a copy in plain memory); *ndim -1 and
 * *dtype RG_NDTYPES when there is no input i. */
void rg_function_input_type(const rg_function *f, int i, rg_dtype *dtype, int *ndim,
                            int64_t shape[RG_MAX_NDIM]);

/* Calls the function: inputs[0..nin) are borrowed; outputs[0..nout) receive
 * new references.  Returns 0 or an error (message: rg_function_errmsg). */
int rg_function_call(rg_function *f, rg_tensor *const *inputs, rg_tensor **outputs);
/* Computes only the outputs listed in `which` (n of them), skipping nodes
 * that no requested output needs. */
int rg_function_call_subset(rg_function *f, rg_tensor *const *inputs, int n, const int *which,
                            rg_tensor **outputs);
/* Calls the function writing each output into a tensor the caller
 * provides (of the output's dtype and shape; any strides; on any device):
 * outputs computed by a kernel are computed straight into C-contiguous
 * host targets, the others copied.  The targets must not overlap the
 * inputs or each other (targets sharing an element are an error). */
int rg_function_call_into(rg_function *f, rg_tensor *const *inputs, rg_tensor *const *outputs);
const char *rg_function_errmsg(const rg_function *f);

/* Per-node profile (time per node and per op, call counts); requires the
 * profile option at compile time. */
void rg_function_profile(const rg_function *f, FILE *out);
/* The program as text: one line per thunk (for debugging). */
void rg_function_dump(const rg_function *f, FILE *out);

/* Runs one node on the CPU with the given input values (its inputs'
 * current values, e.g. constants): the evaluator rewrites use for
 * constant folding.  outputs[0..nout) receive new references. */
int rg_eval_node(const rg_node *node, rg_tensor **outputs, char *err, size_t errlen);

/* Checks symbolic gradients numerically (Aesara's verify_grad): the
 * gradient of sum(out * P), P a random projection, with respect to each
 * input, compiled and evaluated at `values` (one tensor per input),
 * against central finite differences.  RG_OK when every float input's
 * every element agrees (absolute or relative error within the tolerance:
 * 1e-4 for float64, 1e-2 for float32 where any float input or the output
 * is float32, unless opts says otherwise); else
 * an error in C naming the input and element.  An output or cost that
 * cannot be evaluated at the point (a shape error, a loop too long for its
 * sequence) is RG_ERR_EVAL, not a wrong gradient.  opts and report may be
 * NULL. */
typedef struct rg_verify_opts {
  double eps;      /* finite-difference step; 0: 1e-6 (float64), 1e-3 (float32, as the tolerance) */
  double tol;      /* 0: by dtype, as above */
  uint64_t seed;   /* of the projection; 0: a fixed default */
} rg_verify_opts;
typedef struct rg_verify_report {
  int64_t checked;          /* elements compared */
  double max_abs, max_rel;  /* the largest errors seen */
} rg_verify_report;
int rg_verify_grad(rg_ctx *C, int nin, rg_variable *const *inputs, rg_variable *out,
                   rg_tensor *const *values, const rg_verify_opts *opts, rg_verify_report *report);

/* ------------------------------------------------------------------ backends */

/* Backends compiled into this library: "cpu" always; "mirror", the
 * checking device (the CPU's kernels behind buffers the CPU kernels cannot
 * read, running a subset of the ops: it exercises placement and transfers
 * without a GPU); "cuda" unless built with -DRG_CUDA=OFF (it loads the
 * driver and NVRTC at run time, so it is usable where a GPU, its driver
 * and NVRTC are present, and says which is missing elsewhere). */
int rg_backend_count(void);
const char *rg_backend_name(int i);
/* Whether name names a backend of this build, with a well-formed device
 * number if any ("cuda:1"); if not, why.  It may still be unable to run
 * here: */
bool rg_backend_name_valid(const char *name, char *why, size_t len);
/* Whether a backend can run here; if not, why.  name may carry a device
 * number ("cuda:1").  Also callable as rg_backend_available(name, why)
 * with why a char array (its size is the length). */
bool rg_backend_available(const char *name, char *why, size_t len);
#define RG_PICK3_(a, b, c, f, ...) f
#define rg_backend_available(...) \
  RG_PICK3_(__VA_ARGS__, rg_backend_available, rg_backend_available_in_array_, )(__VA_ARGS__)
#define rg_backend_available_in_array_(name, why) rg_backend_available((name), (why), sizeof(why))

/* A backend object: an interface and its own context (a CUDA backend's
 * device, streams and handles).  Several may live at once; a function
 * compiled with one borrows it, so it must outlive the function.  NULL
 * with the reason in why when the backend cannot run here. */
typedef struct rg_backend rg_backend;
rg_backend *rg_backend_new(const char *name, char *why, size_t len);
/* Frees the backend: the functions using it, the tensors on its device
 * and those in its pinned host memory must be freed first. */
void rg_backend_free(rg_backend *b);
const char *rg_backend_label(const rg_backend *b);   /* "cpu", "cuda:0" */
rg_device rg_backend_device(const rg_backend *b);
/* The buffer type of its values (NULL: host memory), to make tensors on
 * its device with rg_tensor_empty_on / rg_tensor_to_device. */
const rg_buffer_type *rg_backend_buffer_type(const rg_backend *b);
/* Its pinned (page-locked) host memory, NULL when it has none (the CPU,
 * the mirror): tensors made there (rg_tensor_empty_on) are host tensors
 * the CPU reads and writes directly, and the device copies into them
 * without staging (rg_tensor_copy_to from a device tensor). */
const rg_buffer_type *rg_backend_host_buffer_type(const rg_backend *b);
/* Waits until everything queued on the backend (kernels run
 * asynchronously on a GPU) is done: time a function that keeps its
 * outputs on the device by a call followed by this.  0 or an error. */
int rg_backend_synchronize(rg_backend *b);

/* ------------------------------------------------------------------ BLAS kernels */

/* The CPU backend's products go to OpenBLAS, whose dynamic builds pick
 * their kernels for the processor when the library loads (before any of
 * relgraph's code runs), from the environment variable OPENBLAS_CORETYPE
 * when it is set, else from their own detection.  rg_blas_core() names
 * the kernels in use ("SkylakeX", "Haswell", "Prescott" for the generic
 * x86-64 ones).  rg_blas_better_core() is the name to put in
 * OPENBLAS_CORETYPE when OpenBLAS fell back to its generic kernels on a
 * processor it did not recognise although the processor (and the
 * operating system) support AVX-512 ("SkylakeX") or AVX2 and FMA
 * ("Haswell"); NULL otherwise.
 *
 * rg_blas_choose_kernels(argv) acts on it: when OPENBLAS_CORETYPE is unset
 * and rg_blas_better_core() names kernels, it sets the variable and starts
 * the program again (execv of /proc/self/exe with argv, the same process
 * and open files); otherwise, or when that start fails, it returns having
 * changed nothing.  Call it first in main, before any thread or state
 * worth keeping exists (the relgraph command does). */
const char *rg_blas_core(void);
const char *rg_blas_better_core(void);
void rg_blas_choose_kernels(char **argv);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
