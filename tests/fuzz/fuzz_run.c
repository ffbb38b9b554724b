/*
 * fuzz_run.c — fuzz harness for the input path of `relgraph run`: a graph
 * file and .npy values for its inputs, compiled (rewritten with fast_run,
 * as the command does) and run once.  Any input must run or fail with a
 * message, never crash or leak a tensor.
 *
 * An input is the graph text, then one .npy file per graph input, each
 * after a separator line ";; npy" (a comment to the graph reader):
 *
 *   (graph (input x float64 (3)) (output (neg x)))\n;; npy\n<x.npy bytes>
 *
 * Graph inputs without a .npy get small deterministic values (unknown
 * dimensions of size 2), as `--random` would.  A graph text starting with
 * ";; none" compiles without rewriting (`--query none`): cheaper, so the
 * fuzzer spends more of its time in the backend.
 */
#include "fuzz_common.h"

#include "relgraph/backend.h"

#define MAX_INPUT 16384
#define MAX_ARGS 16

static const char sep[] = "\n;; npy\n";

static const uint8_t *find_sep(const uint8_t *p, const uint8_t *end) {
  size_t n = sizeof sep - 1;
  for (; (size_t)(end - p) >= n; p++)
    if (*p == '\n' && !memcmp(p, sep, n)) return p;
  return NULL;
}

/* Splits the input at the separators: piece 0 is the graph text. */
static int split(const uint8_t *data, size_t size, const uint8_t **at, size_t *len, int max) {
  int n = 0;
  const uint8_t *p = data, *end = data + size;
  while (n < max - 1) {
    const uint8_t *s = find_sep(p, end);
    if (!s) break;
    at[n] = p, len[n++] = (size_t)(s - p);
    p = s + sizeof sep - 1;
  }
  at[n] = p, len[n++] = (size_t)(end - p);
  return n;
}

/* Values for an input without a .npy: small ones, for inputs of at most
 * FILL_MAX elements (a larger declared shape is refused with a message:
 * the harness is about relgraph, not about allocating terabytes). */
#define FILL_MAX (1 << 20)

static rg_tensor *filler(rg_ctx *C, const rg_type *t) {
  int64_t shape[RG_MAX_NDIM], n = 1;
  for (int i = 0; i < t->ndim; i++) {
    shape[i] = t->shape[i] == RG_DIM_UNKNOWN ? 2 : t->shape[i];
    if (shape[i] > FILL_MAX || (n *= shape[i] ? shape[i] : 1) > FILL_MAX) {
      rg_error(C, RG_ERR_LIMIT, "an input of %s is too large to fill", rg_type_str(t));
      return NULL;
    }
  }
  rg_tensor *v = rg_tensor_empty(t->dtype, t->ndim, shape);
  if (!v) {
    rg_error(C, RG_ERR_NOMEM, "out of memory for an input of %s", rg_type_str(t));
    return NULL;
  }
  for (int64_t i = 0; i < rg_tensor_numel(v); i++) rg_tensor_set_i64(v, i, i % 3);
  return v;
}

/* The argument values; false (with a message in C) if a .npy is bad. */
static bool load_args(rg_ctx *C, rg_fgraph *fg, int npieces, const uint8_t **at, size_t *len,
                      rg_tensor **vals) {
  for (int i = 0; i < rg_fgraph_ninputs(fg); i++) {
    const rg_type *t = rg_fgraph_input(fg, i)->type;
    vals[i] = i + 1 < npieces ? rg_npy_read(C, "input.npy", at[i + 1], len[i + 1]) : filler(C, t);
    if (!vals[i]) {
      if (!rg_errmsg(C)[0]) abort(); /* a failure always has a message */
      return false;
    }
  }
  return true;
}

static void call(rg_ctx *C, rg_fgraph *fg, rg_tensor **ins, const char *query) {
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable *vin[MAX_ARGS], *vout[MAX_ARGS];
  for (int i = 0; i < nin; i++) vin[i] = rg_fgraph_input(fg, i);
  for (int j = 0; j < nout; j++) vout[j] = rg_fgraph_output(fg, j);
  rg_compile_opts o = {.mode = {.query = query}, .nthreads = 1};
  rg_function *f = rg_compile(C, nin, vin, nout, vout, &o);
  if (!f) {
    if (!rg_errmsg(C)[0]) abort();
    return;
  }
  rg_tensor *outs[MAX_ARGS] = {0};
  if (rg_function_call(f, ins, outs) == RG_OK) {
    for (int j = 0; j < nout; j++)
      if (!outs[j]) abort();
  } else if (!rg_function_errmsg(f)[0]) {
    abort();
  }
  for (int j = 0; j < nout; j++) rg_tensor_free(outs[j]);
  rg_function_free(f);
}

static void run_input(const uint8_t *data, size_t size) {
  const uint8_t *at[MAX_ARGS + 1];
  size_t len[MAX_ARGS + 1];
  int npieces = split(data, size, at, len, MAX_ARGS + 1);
  rg_ctx *C = fuzz_ctx();
  rg_fgraph *fg = rg_graph_read(C, "fuzz.graph", (const char *)at[0], len[0]);
  if (!fg) {
    if (!rg_errmsg(C)[0]) abort();
    return;
  }
  int nin = rg_fgraph_ninputs(fg);
  if (nin > MAX_ARGS || rg_fgraph_noutputs(fg) > MAX_ARGS) return;
  rg_tensor *ins[MAX_ARGS] = {0};
  bool plain = len[0] >= 7 && !memcmp(at[0], ";; none", 7);
  if (load_args(C, fg, npieces, at, len, ins)) call(C, fg, ins, plain ? "none" : "fast_run");
  for (int i = 0; i < nin; i++) rg_tensor_free(ins[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT) return 0;
  fuzz_begin();
  run_input(data, size);
  fuzz_end();
  return 0;
}
