/*
 * blas.c — the CUDA backend's linear algebra through cuBLAS: dot
 * (vector-vector, matrix-vector, vector-matrix, matrix-matrix), outer,
 * gemm, gemv and ger, in float32 and float64; batched_dot through one
 * strided batched gemm.
 *
 * cuBLAS is column-major, and a row-major matrix read column-major is its
 * transpose: C = A B is computed as C^T = B^T A^T with the operands
 * swapped, and an operand stored transposed (contiguous columns) is passed
 * with op T.  Operands are described by the CPU's rules
 * (rgbc_blas_matrix, rgbc_blas_vector; vectors with positive increments
 * only), so views cost nothing where cuBLAS can address them; anything
 * else, and an operand of another dtype than the output's, is first
 * copied on the device (rgcu_copy converts as a cast does).
 *
 * Scalars (alpha and beta) are inputs of the node.  When every one lives
 * on this device in the output's dtype they are passed by pointer
 * (cuBLAS's device pointer mode), so nothing waits for the device;
 * otherwise their values are read on the host (a download of a device
 * value waits).  The dot of two vectors writes its 0-d result on the
 * device the same way.  Outputs follow the CPU: gemm, gemv and ger work in
 * place on input 0 when the node says so, its storage is unshared and its
 * inner stride is one element, else on a device copy of it; cuBLAS does
 * not read it when beta is 0.  A product over an empty inner dimension
 * goes through gemm, which BLAS defines for k = 0 (beta * z; gemv's quick
 * return would leave y unwritten).
 */
#include "backend/cuda/cuda-impl.h"
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

enum { OP_N = 0, OP_T = 1, MODE_HOST = 0, MODE_DEVICE = 1 };

/* The entry points, [0] float32 and [1] float64 (the same prototypes with
 * float or double pointers). */
struct rgcu_blas {
  void *dl;
  void *h;  /* cublasHandle_t on the context's stream */
  int (*create)(void **);
  int (*destroy)(void *);
  int (*set_stream)(void *, CUstream);
  int (*set_mode)(void *, int);
  const char *(*status)(int);
  int (*gemm[2])(void *, int, int, int, int, int, const void *, const void *, int, const void *,
                 int, const void *, void *, int);
  int (*gemv[2])(void *, int, int, int, const void *, const void *, int, const void *, int,
                 const void *, void *, int);
  int (*ger[2])(void *, int, int, const void *, const void *, int, const void *, int, void *, int);
  int (*dot[2])(void *, int, const void *, int, const void *, int, void *);
  int (*gemm_batched[2])(void *, int, int, int, int, int, const void *, const void *, int, long long,
                         const void *, int, long long, const void *, void *, int, long long, int);
};

/* ------------------------------------------------------------------ loading */

static bool bind_all(rgcu_blas *b) {
#define SYM(f, name) (*(void **)&b->f = dlsym(b->dl, name)) != NULL
  bool ok = SYM(create, "cublasCreate_v2") && SYM(destroy, "cublasDestroy_v2") &&
            SYM(set_stream, "cublasSetStream_v2") && SYM(set_mode, "cublasSetPointerMode_v2") &&
            SYM(gemm[0], "cublasSgemm_v2") && SYM(gemm[1], "cublasDgemm_v2") &&
            SYM(gemv[0], "cublasSgemv_v2") && SYM(gemv[1], "cublasDgemv_v2") &&
            SYM(ger[0], "cublasSger_v2") && SYM(ger[1], "cublasDger_v2") &&
            SYM(dot[0], "cublasSdot_v2") && SYM(dot[1], "cublasDdot_v2") &&
            SYM(gemm_batched[0], "cublasSgemmStridedBatched") &&
            SYM(gemm_batched[1], "cublasDgemmStridedBatched");
  *(void **)&b->status = dlsym(b->dl, "cublasGetStatusString"); /* optional: cuBLAS 11.4 and later */
#undef SYM
  return ok;
}

rgcu_blas *rgcu_blas_open(rgcu_ctx *c, char *why, size_t len) {
  rgcu_blas *b = rg_calloc(1, sizeof *b);
  if (!b) return rg_say(why, len, "out of memory"), NULL;
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  const char *lib;
  if (!(b->dl = rgcu_dlopen("RELGRAPH_CUBLAS", names, 3, &lib))) {
    rg_free(b);
    if (lib) return rg_say(why, len, "cuBLAS: %s cannot be loaded", lib), NULL;
    return rg_say(why, len, "cuBLAS is not installed (no libcublas.so found)"), NULL;
  }
  int st = -1;
  if (!bind_all(b) || c->d.set_current(c->cu) || (st = b->create(&b->h)) ||
      (st = b->set_stream(b->h, c->stream))) {
    rg_say(why, len, "cuBLAS does not start (status %d)", st);
    if (b->h) b->destroy(b->h);
    dlclose(b->dl);
    rg_free(b);
    return NULL;
  }
  return b;
}

void rgcu_blas_close(rgcu_blas *b) {
  if (!b) return;
  b->destroy(b->h);
  /* the library stays loaded: cuBLAS keeps state of its own per process */
  rg_free(b);
}

static bool float_out(const rgb_node *n) {
  return n->nout == 1 && (n->out[0].dtype == RG_FLOAT32 || n->out[0].dtype == RG_FLOAT64);
}

bool rgcu_blas_supports(const rgb_node *n) {
  switch (n->code) {
  case RG_OP_DOT:
    return float_out(n) && n->in[0].ndim >= 1 && n->in[0].ndim <= 2 && n->in[1].ndim >= 1 &&
           n->in[1].ndim <= 2;
  case RG_OP_BATCHED_DOT:
    return float_out(n) && n->in[0].ndim >= 2 && n->in[0].ndim <= 3 && n->in[1].ndim >= 2 &&
           n->in[1].ndim <= 3;
  case RG_OP_OUTER: case RG_OP_GEMM: case RG_OP_GEMV: case RG_OP_GER: return float_out(n);
  default: return false;
  }
}

/* ------------------------------------------------------------------ operands */

/* A matrix or vector as cuBLAS addresses it; `own` holds a device copy
 * when one was needed. */
typedef struct operand {
  const char *p;
  int ld;      /* matrices: leading dimension; vectors: increment */
  bool trans;  /* a matrix stored transposed */
  rg_tensor *own;
} operand;

static bool fits(int64_t v) { return v >= 0 && v <= INT32_MAX; }

static bool on_this_device(const rgcu_ctx *c, const rg_tensor *t) {
  return rg_tensor_buffer_type(t) == &c->buft;
}

/* A contiguous device copy of t in dtype dt. */
static int copied(rgb_exec *x, rgcu_ctx *c, const rg_tensor *t, rg_dtype dt, operand *o) {
  o->own = rg_tensor_empty_on(&c->buft, dt, t->ndim, t->shape);
  if (!o->own) return rgb_error(x, RG_ERR_NOMEM, "out of device memory");
  int rc = rgcu_copy(x, c, o->own, t);
  o->p = o->own->data;
  o->trans = false;
  o->ld = t->ndim == 2 ? (t->shape[1] > 1 ? (int)t->shape[1] : 1) : 1;
  return rc;
}

static int matrix(rgb_exec *x, rgcu_ctx *c, const rg_tensor *t, rg_dtype dt, operand *o) {
  int64_t ld;
  o->own = NULL;
  if (on_this_device(c, t) && rgbc_blas_matrix(t, dt, &ld, &o->trans) && fits(ld)) {
    o->p = t->data;
    o->ld = (int)(ld > 0 ? ld : 1);
    return RG_OK;
  }
  return copied(x, c, t, dt, o);
}

static int vector(rgb_exec *x, rgcu_ctx *c, const rg_tensor *t, rg_dtype dt, operand *o) {
  int64_t inc;
  o->own = NULL;
  o->trans = false;
  if (on_this_device(c, t) && rgbc_blas_vector(t, dt, &inc) && inc > 0) {
    o->p = t->data;
    o->ld = (int)inc;
    return RG_OK;
  }
  return copied(x, c, t, dt, o);
}

static void release(operand *a, operand *b) {
  rg_tensor_free(a->own);
  rg_tensor_free(b->own);
}

/* The scalars alpha, beta (n of them, input indices idx) and the pointer
 * mode that passes them.  Invariant: in host mode p[i] points into this
 * struct's own f32 or f64, so a scalars is filled in place, never copied. */
typedef struct scalars {
  int mode;
  const void *p[2];
  float f32[2];
  double f64[2];
} scalars;

static int scalars_of(rgb_exec *x, rgcu_ctx *c, rg_dtype dt, int n, const int *idx, scalars *s) {
  s->mode = MODE_DEVICE;
  for (int i = 0; i < n; i++) {
    const rg_tensor *t = rgb_in(x, idx[i]);
    if (t->dtype != dt || !on_this_device(c, t)) s->mode = MODE_HOST;
  }
  for (int i = 0; i < n; i++) {
    const rg_tensor *t = rgb_in(x, idx[i]);
    if (s->mode == MODE_DEVICE) {
      s->p[i] = t->data;
      continue;
    }
    rg_tensor *h = rg_tensor_buffer_type(t) ? rg_tensor_to_host(t) : NULL;
    if (rg_tensor_buffer_type(t) && !h) return rgb_error(x, RG_ERR, "reading a scalar from %s failed", c->name);
    s->f64[i] = rgbc_scalar_f64(h ? h : t);
    s->f32[i] = (float)s->f64[i];
    s->p[i] = dt == RG_FLOAT32 ? (const void *)&s->f32[i] : (const void *)&s->f64[i];
    rg_tensor_free(h);
  }
  return RG_OK;
}

/* Host scalars alpha and beta in *s, which its pointers point into (so
 * it is filled in place: a copy's pointers would still point at the
 * original). */
static void host_scalars(scalars *s, rg_dtype dt, double alpha, double beta) {
  *s = (scalars){.mode = MODE_HOST, .f32 = {(float)alpha, (float)beta}, .f64 = {alpha, beta}};
  for (int i = 0; i < 2; i++) s->p[i] = dt == RG_FLOAT32 ? (const void *)&s->f32[i] : (const void *)&s->f64[i];
}

static int check(rgb_exec *x, const rgcu_blas *b, int st, const char *what) {
  if (!st) return RG_OK;
  return rgb_error(x, RG_ERR, "cuBLAS %s: %s (status %d)", what, b->status ? b->status(st) : "failed", st);
}

/* ------------------------------------------------------------------ the calls */

/* C (m, n, row-major, ldc) = alpha * A (m, k) @ B (k, n) + beta * C. */
static int gemm_rm(rgb_exec *x, rgcu_blas *b, rg_dtype dt, int64_t m, int64_t n, int64_t k,
                   const scalars *s, const operand *A, const operand *B, char *C, int64_t ldc) {
  if (!fits(m) || !fits(n) || !fits(k) || !fits(ldc))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by cuBLAS");
  int i = dt == RG_FLOAT64;
  b->set_mode(b->h, s->mode);
  int st = b->gemm[i](b->h, B->trans ? OP_T : OP_N, A->trans ? OP_T : OP_N, (int)n, (int)m, (int)k,
                      s->p[0], B->p, B->ld, A->p, A->ld, s->p[1], C, (int)(ldc > 0 ? ldc : 1));
  return check(x, b, st, "gemm");
}

/* y = alpha * op(M) @ v + beta * y, M an (r, c) matrix, op transposing it
 * when `want_t`; an empty inner dimension goes through gemm. */
static int gemv_rm(rgb_exec *x, rgcu_blas *b, rg_dtype dt, int64_t r, int64_t c, const operand *M,
                   bool want_t, const scalars *s, const operand *v, char *y, int incy) {
  int64_t len = want_t ? c : r, inner = want_t ? r : c;
  if (inner == 0) {
    operand none = {.p = M->p, .ld = 1};
    return gemm_rm(x, b, dt, len, 1, 0, s, &none, &none, y, 1);
  }
  if (!fits(r) || !fits(c))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by cuBLAS");
  /* read column-major, M's storage is M^T (c, r), or M (r, c) when stored transposed */
  int rows = M->trans ? (int)r : (int)c, cols = M->trans ? (int)c : (int)r;
  int i = dt == RG_FLOAT64;
  b->set_mode(b->h, s->mode);
  int st = b->gemv[i](b->h, M->trans == want_t ? OP_T : OP_N, rows, cols, s->p[0], M->p, M->ld, v->p,
                      v->ld, s->p[1], y, incy);
  return check(x, b, st, "gemv");
}

/* dot(a, b) for 1-d and 2-d operands. */
static int run_dot(rgb_exec *x, rgcu_ctx *c) {
  rgcu_blas *b = c->blas;
  const rg_tensor *a = rgb_in(x, 0), *bt = rgb_in(x, 1);
  int64_t m, k, n;
  rg_tensor *out = rgbc_dot_output(x, &m, &k, &n); /* the CPU's shape rule */
  if (!out) return x->rt->errcode;
  rg_dtype dt = out->dtype;
  if (m == 0 || n == 0) return RG_OK;
  operand A = {0}, B = {0};
  scalars s;
  host_scalars(&s, dt, 1, 0);
  int rc;
  if (a->ndim == 2 && bt->ndim == 2) {
    if (!(rc = matrix(x, c, a, dt, &A)) && !(rc = matrix(x, c, bt, dt, &B)))
      rc = gemm_rm(x, b, dt, m, n, k, &s, &A, &B, out->data, n);
  } else if (a->ndim == 2 || bt->ndim == 2) {
    const rg_tensor *mat = a->ndim == 2 ? a : bt, *vec = a->ndim == 2 ? bt : a;
    if (!(rc = matrix(x, c, mat, dt, &A)) && !(rc = vector(x, c, vec, dt, &B)))
      rc = gemv_rm(x, b, dt, mat->shape[0], mat->shape[1], &A, a->ndim == 1, &s, &B, out->data, 1);
  } else if (k == 0) {
    rc = gemv_rm(x, b, dt, 1, 0, &(operand){.p = out->data, .ld = 1}, false, &s, &A, out->data, 1);
  } else if (!fits(k)) {
    rc = rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by cuBLAS");
  } else if (!(rc = vector(x, c, a, dt, &A)) && !(rc = vector(x, c, bt, dt, &B))) {
    b->set_mode(b->h, MODE_DEVICE);
    rc = check(x, b, b->dot[dt == RG_FLOAT64](b->h, (int)k, A.p, A.ld, B.p, B.ld, out->data), "dot");
  }
  release(&A, &B);
  return rc;
}

/* t (B, r, c) as cuBLAS's strided batches address it: its slices as
 * matrices (`matrix`'s rules) one stride apart (in elements, 0 for one
 * slice), else a contiguous device copy. */
static int batches(rgb_exec *x, rgcu_ctx *c, const rg_tensor *t, rg_dtype dt, operand *o, long long *stride) {
  rg_tensor s;
  int64_t ld, es = rgbc_size(dt), bs = t->shape[0] > 1 ? t->strides[0] : 0;
  rgbc_batch_slice(t, 0, &s);
  o->own = NULL;
  if (on_this_device(c, t) && rgbc_blas_matrix(&s, dt, &ld, &o->trans) && fits(ld) && bs >= 0 && bs % es == 0) {
    o->p = t->data;
    o->ld = (int)(ld > 0 ? ld : 1);
    *stride = bs / es;
    return RG_OK;
  }
  o->own = rg_tensor_empty_on(&c->buft, dt, 3, t->shape);
  if (!o->own) return rgb_error(x, RG_ERR_NOMEM, "out of device memory");
  o->p = o->own->data;
  o->trans = false;
  o->ld = t->shape[2] > 1 ? (int)t->shape[2] : 1;
  *stride = t->shape[1] * t->shape[2];
  return rgcu_copy(x, c, o->own, t);
}

/* t of rank 2 (a vector per batch index) as a rank-3 view with a
 * dimension of 1 at `at` (1: one row, 2: one column); t itself otherwise. */
static rg_tensor as_rank3(const rg_tensor *t, int at) {
  rg_tensor v = *t;
  if (t->ndim == 3) return v;
  v.ndim = 3;
  v.shape[2] = at == 1 ? t->shape[1] : 1;
  v.strides[2] = at == 1 ? t->strides[1] : 0;
  v.shape[1] = at == 1 ? 1 : t->shape[1];
  v.strides[1] = at == 1 ? 0 : t->strides[1];
  return v;
}

/* batched_dot(a, b): every a[i] @ b[i] in one strided batched gemm (a
 * vector operand as a matrix of one row or column). */
static int run_batched_dot(rgb_exec *x, rgcu_ctx *c) {
  rgcu_blas *b = c->blas;
  int64_t nb, m, k, n;
  rg_tensor *out = rgbc_batched_dot_output(x, &nb, &m, &k, &n); /* the CPU's shape rule */
  if (!out) return x->rt->errcode;
  if (nb == 0 || m == 0 || n == 0) return RG_OK;
  if (!fits(nb) || !fits(m) || !fits(n) || !fits(k))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by cuBLAS");
  rg_dtype dt = out->dtype;
  rg_tensor a3 = as_rank3(rgb_in(x, 0), 1), b3 = as_rank3(rgb_in(x, 1), 2);
  operand A = {0}, B = {0};
  long long sa = 0, sb = 0;
  scalars s;
  host_scalars(&s, dt, 1, 0);
  int rc = batches(x, c, &a3, dt, &A, &sa);
  if (!rc) rc = batches(x, c, &b3, dt, &B, &sb);
  if (!rc) {
    /* column-major, each C[i]^T (n, m) = B[i]^T A[i]^T */
    b->set_mode(b->h, s.mode);
    rc = check(x, b,
               b->gemm_batched[dt == RG_FLOAT64](b->h, B.trans ? OP_T : OP_N, A.trans ? OP_T : OP_N, (int)n,
                                                 (int)m, (int)k, s.p[0], B.p, B.ld, sb, A.p, A.ld, sa, s.p[1],
                                                 out->data, (int)n, (long long)(m * n), (int)nb),
               "gemm (strided batched)");
  }
  release(&A, &B);
  return rc;
}

/* outer(u, v) = u[:, None] @ v[None, :], a product over k = 1. */
static int run_outer(rgb_exec *x, rgcu_ctx *c) {
  const rg_tensor *u = rgb_in(x, 0), *v = rgb_in(x, 1);
  rg_dtype dt = x->node->out[0].dtype;
  int64_t shape[2] = {u->shape[0], v->shape[0]};
  rg_tensor *out = rgb_output(x, 0, dt, 2, shape);
  if (!out) return x->rt->errcode;
  if (shape[0] == 0 || shape[1] == 0) return RG_OK;
  operand U = {0}, V = {0};
  scalars s;
  host_scalars(&s, dt, 1, 0);
  int rc = vector(x, c, u, dt, &U);
  if (!rc) rc = vector(x, c, v, dt, &V);
  if (!rc) {
    /* u as an (m, 1) row-major matrix: row stride inc; v as (1, n) stored
     * transposed unless its increment is 1 */
    operand A = {.p = U.p, .ld = U.ld}, B = {.p = V.p, .ld = V.ld, .trans = V.ld != 1};
    if (!B.trans) B.ld = (int)shape[1];
    rc = gemm_rm(x, c->blas, dt, shape[0], shape[1], 1, &s, &A, &B, out->data, shape[1]);
  }
  release(&U, &V);
  return rc;
}

/* The output of gemm, gemv and ger (the CPU's rule): input 0 itself when
 * allowed, else a device copy of it (always made: beta may be known only
 * on the device). */
static rg_tensor *blas_output(rgb_exec *x) { return rgbc_blas_output(x, true, rgcu_copy_fn); }

static int shape_error(rgb_exec *x, const char *what) {
  return rgb_error(x, RG_ERR_TYPE, "%s: the shapes of the operands do not match", what);
}

static int run_gemm(rgb_exec *x, rgcu_ctx *c) {
  const rg_tensor *z = rgb_in(x, 0), *a = rgb_in(x, 2), *bm = rgb_in(x, 3);
  int64_t m = a->shape[0], k = a->shape[1], n = bm->shape[1];
  if (bm->shape[0] != k || z->shape[0] != m || z->shape[1] != n) return shape_error(x, "gemm");
  rg_tensor *out = blas_output(x);
  if (!out) return x->rt->errcode;
  if (m == 0 || n == 0) return RG_OK;
  rg_dtype dt = out->dtype;
  scalars s;
  operand A = {0}, B = {0};
  int rc = scalars_of(x, c, dt, 2, (const int[]){1, 4}, &s);
  if (!rc) rc = matrix(x, c, a, dt, &A);
  if (!rc) rc = matrix(x, c, bm, dt, &B);
  if (!rc) rc = gemm_rm(x, c->blas, dt, m, n, k, &s, &A, &B, out->data, rgbc_blas_row_ld(out));
  release(&A, &B);
  return rc;
}

static int run_gemv(rgb_exec *x, rgcu_ctx *c) {
  const rg_tensor *y = rgb_in(x, 0), *a = rgb_in(x, 2), *v = rgb_in(x, 3);
  int64_t m = a->shape[0], k = a->shape[1];
  if (v->shape[0] != k || y->shape[0] != m) return shape_error(x, "gemv");
  rg_tensor *out = blas_output(x);
  if (!out) return x->rt->errcode;
  if (m == 0) return RG_OK;
  rg_dtype dt = out->dtype;
  scalars s;
  operand A = {0}, V = {0};
  int rc = scalars_of(x, c, dt, 2, (const int[]){1, 4}, &s);
  if (!rc) rc = matrix(x, c, a, dt, &A);
  if (!rc) rc = vector(x, c, v, dt, &V);
  if (!rc) rc = gemv_rm(x, c->blas, dt, m, k, &A, false, &s, &V, out->data, 1);
  release(&A, &V);
  return rc;
}

static int run_ger(rgb_exec *x, rgcu_ctx *c) {
  const rg_tensor *A = rgb_in(x, 0), *u = rgb_in(x, 2), *v = rgb_in(x, 3);
  int64_t m = A->shape[0], n = A->shape[1];
  if (u->shape[0] != m || v->shape[0] != n) return shape_error(x, "ger");
  rg_tensor *out = blas_output(x);
  if (!out) return x->rt->errcode;
  if (m == 0 || n == 0) return RG_OK;
  if (!fits(m) || !fits(n))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by cuBLAS");
  rg_dtype dt = out->dtype;
  scalars s;
  operand U = {0}, V = {0};
  int rc = scalars_of(x, c, dt, 1, (const int[]){1}, &s);
  if (!rc) rc = vector(x, c, u, dt, &U);
  if (!rc) rc = vector(x, c, v, dt, &V);
  if (!rc) {
    /* column-major, A's storage is A^T (n, m) += alpha v u^T */
    rgcu_blas *b = c->blas;
    b->set_mode(b->h, s.mode);
    rc = check(x, b, b->ger[dt == RG_FLOAT64](b->h, (int)n, (int)m, s.p[0], V.p, V.ld, U.p, U.ld,
                                              out->data, (int)rgbc_blas_row_ld(out)), "ger");
  }
  release(&U, &V);
  return rc;
}

int rgcu_blas_run(rgb_exec *x, rgcu_ctx *c) {
  switch (x->node->code) {
  case RG_OP_DOT: return run_dot(x, c);
  case RG_OP_OUTER: return run_outer(x, c);
  case RG_OP_GEMM: return run_gemm(x, c);
  case RG_OP_GEMV: return run_gemv(x, c);
  case RG_OP_GER: return run_ger(x, c);
  case RG_OP_BATCHED_DOT: return run_batched_dot(x, c);
  default: return rgb_error(x, RG_ERR, "%s: not a cuBLAS op", x->node->label);
  }
}
