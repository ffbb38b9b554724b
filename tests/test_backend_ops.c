/*
 * test_backend_ops.c — every op on every backend against the CPU (ggml's
 * test-backend-ops).
 *
 * Without arguments it takes every backend compiled in other than the CPU
 * and CUDA (the mirror); `test_backend_ops NAME` takes backend NAME alone
 * and exits with CTest's skip status, 77, saying why, when NAME cannot run
 * here (test_backend_ops_cuda: CUDA on a device; test_backend_ops_cuda_host:
 * CUDA without one, against the host implementation of CUDA's libraries in
 * tests/cuda-host).  On each, every elementwise op runs on every dtype it accepts, over
 * random shapes with broadcasting and empty tensors, with inputs given as
 * contiguous host values, as reversed host views, and as reversed views of
 * values already on the backend's device (inputs typed on that device);
 * then a list of the other ops (BLAS, shape ops, subtensor, reductions,
 * softmax, join, split, alloc, casts between all dtypes) on the same
 * three kinds of inputs.  Each case is compiled without rewrites, so the
 * op itself runs, and compared with the CPU's result: integers and
 * booleans exactly, floats within a tolerance by dtype and op (NaNs must
 * sit in the same places).  A dtype an op refuses is skipped (the op's
 * make_node says so); every other failure fails the test.
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/backend.h"

static rg_ctx *C;

static int setup(void **st) {
  (void)st;
  rg_init();
  C = rg_ctx_new();
  return 0;
}

/* ------------------------------------------------------------------ values */

static uint64_t next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}

/* Random values by dtype: floats in [-2, 2), integers in [-5, 5] (uint8:
 * [0, 10]), booleans. */
static rg_tensor *random_value(rg_dtype dt, int ndim, const int64_t *shape, uint64_t *s) {
  rg_tensor *v = rg_tensor_new(dt, ndim, shape);
  for (int64_t i = 0; i < rg_tensor_numel(v); i++) {
    uint64_t r = next(s);
    if (rg_dtype_is_float(dt)) rg_tensor_set_f64(v, i, (double)(r % 4096) / 1024.0 - 2);
    else if (dt == RG_BOOL) rg_tensor_set_i64(v, i, (int64_t)(r & 1));
    else if (dt == RG_UINT8) rg_tensor_set_i64(v, i, (int64_t)(r % 11));
    else rg_tensor_set_i64(v, i, (int64_t)(r % 11) - 5);
  }
  return v;
}

/* A view of t with its first dimension reversed. */
static rg_tensor *flip0(const rg_tensor *t) {
  int64_t strides[RG_MAX_NDIM];
  memcpy(strides, t->strides, sizeof strides);
  strides[0] = -t->strides[0];
  return rg_tensor_view(t, t->ndim, t->shape, strides, t->strides[0] * (t->shape[0] - 1));
}

/* The same values as v, as a view whose first dimension runs backwards
 * over a buffer of the given buffer type (NULL: host). */
static rg_tensor *reversed_view(const rg_tensor *v, const rg_buffer_type *bt) {
  if (v->ndim == 0 || v->shape[0] < 2) return rg_tensor_to_device(v, bt);
  rg_tensor *src = flip0(v);
  rg_tensor *rev = rg_tensor_copy(src);
  rg_tensor *dev = rg_tensor_to_device(rev, bt);
  rg_tensor *view = flip0(dev);
  rg_tensor_free(src);
  rg_tensor_free(rev);
  rg_tensor_free(dev);
  return view;
}

/* ------------------------------------------------------------------ comparing */

static bool transcendental(rg_opcode code) {
  switch (code) {
    case RG_OP_EXP: case RG_OP_LOG: case RG_OP_LOG1P: case RG_OP_EXPM1: case RG_OP_POW:
    case RG_OP_SIN: case RG_OP_COS: case RG_OP_TANH: case RG_OP_SIGMOID: case RG_OP_SOFTPLUS:
    case RG_OP_ERF: case RG_OP_SOFTMAX: case RG_OP_LOG_SOFTMAX: return true;
    default: return false;
  }
}

/* Relative tolerance by dtype and op (absolute: the same). */
static double tolerance(rg_dtype dt, rg_opcode code) {
  if (!rg_dtype_is_float(dt)) return 0;
  if (dt == RG_FLOAT32) return transcendental(code) ? 1e-5 : 1e-6;
  return transcendental(code) ? 1e-12 : 1e-14;
}

static bool close_enough(const rg_tensor *a, const rg_tensor *b, double tol) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  for (int64_t i = 0; i < rg_tensor_numel(a); i++) {
    double x = rg_tensor_get_f64(a, i), y = rg_tensor_get_f64(b, i);
    if (isnan(x) || isnan(y)) {
      if (isnan(x) != isnan(y)) return false;
    } else if (x != y && !(fabs(x - y) <= tol + tol * fabs(y))) {
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------------------------ running cases */

typedef struct ops_run {
  const char *backend;           /* the backend under test */
  const rg_buffer_type *buft;    /* its buffer type */
  rg_device device;
  uint64_t seed;
  int cases;                     /* compared */
} ops_run;

static rg_function *compile_on(int nin, rg_variable **in, rg_variable *out, const char *backend) {
  rg_compile_opts o = {.mode = {.backend = backend, .query = "none"}};
  return rg_compile(C, nin, in, 1, &out, &o);
}

/* Runs out(in) on the CPU and on the backend with the given values and
 * compares the results. */
static void compare(ops_run *r, const char *label, int nin, rg_variable **in, rg_variable *out,
                    rg_tensor **cpu_vals, rg_tensor **be_vals, rg_opcode code) {
  rg_function *ref = compile_on(nin, in, out, "cpu");
  rg_function *be = compile_on(nin, in, out, r->backend);
  if (!ref || !be) fail_msg("%s: %s", label, rg_errmsg(C));
  rg_tensor *a = NULL, *b = NULL;
  int ra = rg_function_call(ref, cpu_vals, &a), rb = rg_function_call(be, be_vals, &b);
  if (ra || rb) {
    /* a run-time error (integers to negative powers): both must refuse */
    if (!ra || !rb)
      fail_msg("%s: %s on %s only: %s", label, ra ? "an error" : "no error", ra ? "cpu" : r->backend,
               ra ? rg_function_errmsg(ref) : rg_function_errmsg(be));
    rg_tensor_free(a);
    rg_tensor_free(b);
    rg_function_free(ref);
    rg_function_free(be);
    r->cases++;
    return;
  }
  if (rg_tensor_device(b) != RG_DEVICE_HOST) fail_msg("%s: the output is not on the host", label);
  if (!close_enough(a, b, tolerance(a->dtype, code))) {
    rg_tensor_fprint(stderr, a);
    fputc('\n', stderr);
    rg_tensor_fprint(stderr, b);
    fail_msg("\n%s: %s differs from cpu", label, r->backend);
  }
  r->cases++;
  rg_tensor_free(a);
  rg_tensor_free(b);
  rg_function_free(ref);
  rg_function_free(be);
}

/* Three ways to give the inputs: contiguous host values, reversed host
 * views, reversed views on the backend's device (the inputs then typed on
 * that device).  make(in) builds the op over the inputs (NULL: refused). */
typedef rg_variable *(*build_fn)(rg_variable **in, const void *ud);

static void run_case(ops_run *r, const char *label, int nin, const rg_type *const *types,
                     build_fn make, const void *ud, rg_opcode code) {
  rg_tensor *vals[8], *views[8], *devs[8];
  for (int i = 0; i < nin; i++) {
    vals[i] = random_value(types[i]->dtype, types[i]->ndim, types[i]->shape, &r->seed);
    views[i] = reversed_view(vals[i], NULL);
    devs[i] = reversed_view(vals[i], r->buft);
  }
  for (int way = 0; way < 3; way++) {
    rg_variable *in[8];
    for (int i = 0; i < nin; i++)
      in[i] = rg_input(C, NULL, way == 2 ? rg_type_on_device(types[i], r->device) : types[i]);
    rg_variable *out = make(in, ud);
    if (!out) {
      if (way == 0) break; /* the op refuses these dtypes */
      fail_msg("%s: refused on the device: %s", label, rg_errmsg(C));
    }
    char name[160];
    snprintf(name, sizeof name, "%s (%s)", label, way == 0 ? "host" : way == 1 ? "host views" : "device views");
    compare(r, name, nin, in, out, vals, way == 0 ? vals : way == 1 ? views : devs, code);
  }
  for (int i = 0; i < nin; i++) {
    rg_tensor_free(vals[i]);
    rg_tensor_free(views[i]);
    rg_tensor_free(devs[i]);
  }
}

/* ------------------------------------------------------------------ elementwise */

/* A random shape of up to 3 dimensions (sizes 1-4, or 0 once in a while),
 * and the input shapes broadcasting to it. */
static int random_shape(uint64_t *s, int64_t *shape) {
  int nd = (int)(next(s) % 4);
  bool empty = next(s) % 8 == 0;
  for (int d = 0; d < nd; d++) shape[d] = (int64_t)(next(s) % 4) + 1;
  if (empty && nd) shape[next(s) % (uint64_t)nd] = 0;
  return nd;
}

static const rg_type *broadcast_input(uint64_t *s, rg_dtype dt, int nd, const int64_t *shape) {
  int drop = nd && next(s) % 4 == 0 ? (int)(next(s) % (uint64_t)nd) + 1 : 0;
  int64_t in[RG_MAX_NDIM];
  for (int d = drop; d < nd; d++) in[d - drop] = next(s) % 3 == 0 ? 1 : shape[d];
  return rg_type_new(dt, nd - drop, in);
}

typedef struct nary_case {
  const rg_op *op;
  int n;
} nary_case;

static rg_variable *make_nary(rg_variable **in, const void *ud) {
  const nary_case *e = ud;
  return rg_apply(C, e->op, e->n, in);
}

static void elementwise_on(ops_run *r) {
  for (int code = 0; code < RG_OP_COUNT; code++) {
    if (rg_opcode_family((rg_opcode)code) != RG_FAM_ELEMWISE) continue;
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      for (int trial = 0; trial < 3; trial++) {
        int n = tu_op_arity((rg_opcode)code);
        const rg_op *op = code == RG_OP_CAST ? rg_op_cast((rg_dtype)(trial * 3 % RG_NDTYPES))
                                             : rg_op_get((rg_opcode)code);
        int64_t shape[RG_MAX_NDIM];
        int nd = random_shape(&r->seed, shape);
        const rg_type *types[3];
        for (int i = 0; i < n; i++) {
          bool cond = code == RG_OP_SWITCH && i == 0;
          types[i] = broadcast_input(&r->seed, cond ? RG_BOOL : (rg_dtype)dt, nd, shape);
        }
        char label[96];
        snprintf(label, sizeof label, "%s %s trial %d", rg_op_name(op), rg_dtype_name((rg_dtype)dt), trial);
        nary_case e = {op, n};
        run_case(r, label, n, types, make_nary, &e, (rg_opcode)code);
      }
    }
  }
}

/* ------------------------------------------------------------------ the other ops */

static const rg_type *mat(rg_dtype dt, int64_t a, int64_t b) { return rg_type_new(dt, 2, (int64_t[]){a, b}); }
static const rg_type *vec(rg_dtype dt, int64_t a) { return rg_type_new(dt, 1, &a); }
static const rg_type *cube(rg_dtype dt, int64_t a, int64_t b, int64_t c) {
  return rg_type_new(dt, 3, (int64_t[]){a, b, c});
}

typedef enum other_kind {
  K_DOT_MM, K_DOT_MV, K_DOT_VV, K_OUTER, K_GEMM, K_GEMV, K_GER, K_TRANSPOSE, K_EXPAND, K_RESHAPE,
  K_FLATTEN, K_SLICE, K_SUM_AXIS, K_SUM_ALL, K_PROD, K_MAX, K_ARGMAX, K_MEAN, K_SOFTMAX,
  K_LOG_SOFTMAX, K_JOIN, K_SPLIT, K_ALLOC, K_INC_SUB, K_SET_SUB, K_SUM_LONG, K_BDOT_MM, K_BDOT_VM,
  K_BDOT_MV, K_BDOT_VV, K_BDOT_T, K_NKINDS
} other_kind;

static const char *const kind_names[K_NKINDS] = {
    "dot mm", "dot mv", "dot vv", "outer", "gemm", "gemv", "ger", "transpose", "expand",
    "reshape", "flatten", "subtensor", "sum axis", "sum", "prod", "max", "argmax", "mean",
    "softmax", "log_softmax", "join", "split", "alloc", "inc_subtensor", "set_subtensor", "sum long",
    "batched_dot mm", "batched_dot vm", "batched_dot mv", "batched_dot vv", "batched_dot transposed"};

typedef struct other_case {
  other_kind kind;
  rg_dtype dt;
} other_case;

static rg_variable *scal(rg_dtype dt, double v) { return rg_constant_scalar(C, dt, v); }

static rg_variable *make_other(rg_variable **in, const void *ud) {
  const other_case *o = ud;
  rg_variable *x = in[0];
  int64_t ax1 = 1, ax0 = 0;
  switch (o->kind) {
    case K_DOT_MM: case K_DOT_MV: case K_DOT_VV: return rg_dot(in[0], in[1]);
    case K_OUTER: return rg_outer(in[0], in[1]);
    case K_BDOT_MM: case K_BDOT_VM: case K_BDOT_MV: case K_BDOT_VV: return rg_batched_dot(in[0], in[1]);
    case K_BDOT_T: /* both operands' slices stored transposed */
      return rg_batched_dot(rg_dimshuffle(in[0], 3, (int64_t[]){0, 2, 1}), rg_dimshuffle(in[1], 3, (int64_t[]){0, 2, 1}));
    case K_GEMM: return rg_gemm(in[0], scal(o->dt, 0.5), in[1], in[2], scal(o->dt, -1.5));
    case K_GEMV: return rg_gemv(in[0], scal(o->dt, 2), in[1], in[2], scal(o->dt, 0.25));
    case K_GER: return rg_ger(in[0], scal(o->dt, -1), in[1], in[2]);
    case K_TRANSPOSE: return rg_transpose(x);
    case K_EXPAND: return rg_dimshuffle(x, 3, (int64_t[]){1, -1, 0});
    case K_RESHAPE: return rg_reshape_to(x, 3, (int64_t[]){2, -1, 3});
    case K_FLATTEN: return rg_flatten(x, 1);
    case K_SLICE: {
      rg_index e[2] = {{RG_IDX_SLICE, RG_IDX_NONE, RG_IDX_NONE, -2}, {RG_IDX_INDEX, 1, 0, 0}};
      return rg_subtensor(x, 2, e, 0, NULL);
    }
    case K_SUM_AXIS: return rg_sum(x, 1, &ax1);
    case K_SUM_LONG: return rg_sum(x, 1, &ax0); /* a long axis, few outputs: two passes on CUDA */
    case K_SUM_ALL: return rg_sum(x, -1, NULL);
    case K_PROD: return rg_prod(x, 1, &ax0);
    case K_MAX: return rg_max(x, 1, &ax1);
    case K_ARGMAX: return rg_argmax(x, 1, &ax0);
    case K_MEAN: return rg_mean(x, -1, NULL);
    case K_SOFTMAX: return rg_softmax(x, 1);
    case K_LOG_SOFTMAX: return rg_log_softmax(x, 0);
    case K_JOIN: return rg_join(1, 2, in);
    case K_SPLIT: {
      int64_t two = 2;
      rg_variable *sizes = rg_constant_data(C, RG_INT64, 1, &two, (int64_t[]){1, 3});
      rg_node *n = rg_split(x, sizes, 1, 2);
      return n ? n->outputs[1] : NULL;
    }
    case K_ALLOC: {
      rg_variable *dims[2] = {rg_scalar_int(C, 3), rg_scalar_int(C, 4)};
      return rg_allocate(x, 2, dims);
    }
    case K_INC_SUB: {
      rg_index e[1] = {{RG_IDX_SLICE, 1, RG_IDX_NONE, RG_IDX_NONE}};
      return rg_inc_subtensor(in[0], in[1], 1, e, 0, NULL);
    }
    case K_SET_SUB: {
      rg_index e[2] = {{RG_IDX_SLICE, RG_IDX_NONE, RG_IDX_NONE, -2}, {RG_IDX_INDEX, 2, 0, 0}};
      return rg_set_subtensor(in[0], in[1], 2, e, 0, NULL);
    }
    default: return NULL;
  }
}

/* The input types of each kind. */
static int other_types(other_kind k, rg_dtype dt, const rg_type **t) {
  switch (k) {
    case K_DOT_MM: t[0] = mat(dt, 3, 4); t[1] = mat(dt, 4, 2); return 2;
    case K_DOT_MV: t[0] = mat(dt, 3, 4); t[1] = vec(dt, 4); return 2;
    case K_DOT_VV: t[0] = vec(dt, 5); t[1] = vec(dt, 5); return 2;
    case K_OUTER: t[0] = vec(dt, 3); t[1] = vec(dt, 4); return 2;
    case K_BDOT_MM: t[0] = cube(dt, 3, 2, 4); t[1] = cube(dt, 3, 4, 5); return 2;
    case K_BDOT_VM: t[0] = mat(dt, 3, 4); t[1] = cube(dt, 3, 4, 2); return 2;
    case K_BDOT_MV: t[0] = cube(dt, 2, 3, 4); t[1] = mat(dt, 2, 4); return 2;
    case K_BDOT_VV: t[0] = mat(dt, 4, 5); t[1] = mat(dt, 4, 5); return 2;
    case K_BDOT_T: t[0] = cube(dt, 3, 4, 2); t[1] = cube(dt, 3, 5, 4); return 2;
    case K_GEMM: t[0] = mat(dt, 3, 2); t[1] = mat(dt, 3, 4); t[2] = mat(dt, 4, 2); return 3;
    case K_GEMV: t[0] = vec(dt, 3); t[1] = mat(dt, 3, 4); t[2] = vec(dt, 4); return 3;
    case K_GER: t[0] = mat(dt, 3, 4); t[1] = vec(dt, 3); t[2] = vec(dt, 4); return 3;
    case K_EXPAND: t[0] = mat(dt, 1, 5); return 1;
    case K_RESHAPE: t[0] = mat(dt, 4, 3); return 1;
    case K_JOIN: t[0] = mat(dt, 3, 2); t[1] = mat(dt, 3, 1); return 2;
    case K_ALLOC: t[0] = vec(dt, 4); return 1;
    case K_INC_SUB: t[0] = mat(dt, 3, 4); t[1] = vec(dt, 4); return 2;
    case K_SET_SUB: t[0] = mat(dt, 3, 4); t[1] = vec(dt, 1); return 2;
    case K_SUM_LONG: t[0] = mat(dt, 1200, 7); return 1;
    default: t[0] = mat(dt, 3, 4); return 1;
  }
}

static rg_opcode other_code(other_kind k) {
  if (k >= K_BDOT_MM && k <= K_BDOT_T) return RG_OP_BATCHED_DOT;
  return k == K_SOFTMAX ? RG_OP_SOFTMAX : k == K_LOG_SOFTMAX ? RG_OP_LOG_SOFTMAX : RG_OP_DOT;
}

static void others_on(ops_run *r) {
  for (int k = 0; k < K_NKINDS; k++)
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      const rg_type *types[3];
      int n = other_types((other_kind)k, (rg_dtype)dt, types);
      other_case o = {(other_kind)k, (rg_dtype)dt};
      char label[96];
      snprintf(label, sizeof label, "%s %s", kind_names[k], rg_dtype_name((rg_dtype)dt));
      run_case(r, label, n, types, make_other, &o, other_code((other_kind)k));
    }
}

/* ------------------------------------------------------------------ the test */

/* The backend named on the command line, or NULL: every one but the CPU
 * and CUDA (which has entries of its own). */
static const char *only;

static void test_every_op_on_every_backend(void **st) {
  (void)st;
  int tested = 0;
  for (int i = 0; i < rg_backend_count(); i++) {
    const char *name = rg_backend_name(i);
    char why[256];
    if (only ? strcmp(name, only) != 0 : !strcmp(name, "cpu") || !strcmp(name, "cuda")) continue;
    if (!rg_backend_available(name, why, sizeof why)) fail_msg("backend %s cannot run: %s", name, why);
    rg_backend *b = rg_backend_new(name, why, sizeof why);
    assert_non_null(b);
    ops_run r = {.backend = name, .buft = rg_backend_buffer_type(b), .device = rg_backend_device(b),
                 .seed = 12345};
    elementwise_on(&r);
    int elem = r.cases;
    others_on(&r);
    printf("backend %s: %d elementwise cases and %d others agree with the cpu\n", name, elem,
           r.cases - elem);
    assert_true(elem > 500 && r.cases - elem > 100);
    rg_backend_free(b);
    tested++;
  }
  assert_true(tested >= 1); /* the mirror at least */
}

int main(int argc, char **argv) {
  if (argc > 1) {
    only = argv[1];
    char why[256];
    rg_init();
    if (!rg_backend_available(only, why, sizeof why)) {
      printf("backend %s skipped: %s\n", only, why);
      return 77;
    }
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_on_every_backend),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
