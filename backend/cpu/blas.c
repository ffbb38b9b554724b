/*
 * blas.c — linear algebra: dot (vector-vector, matrix-vector,
 * vector-matrix, matrix-matrix), outer, and the BLAS forms gemm, gemv and
 * ger.
 *
 * float32 and float64 go to OpenBLAS.  A strided operand is passed as it
 * is whenever BLAS can describe it: a matrix whose rows or columns are
 * contiguous becomes a row-major matrix with a leading dimension and a
 * transpose flag (so x.T costs nothing), a vector with any non-zero stride
 * becomes an increment (negative ones pointing at the lowest address, as
 * CBLAS expects).  Anything else (zero or negative matrix strides, a
 * different dtype) is first copied to a contiguous tensor.
 *
 * Other dtypes (integers, bool, mixed integer dtypes) are computed by
 * plain loops: both operands converted to int64, an i-k-j product that
 * streams rows of the right operand, wrapping modulo 2^64, then converted
 * to the output dtype (which wraps the same way NumPy's integer matmul
 * does; a bool product is true where some term is).
 *
 * batched_dot(x, y) is one dot per batch index on views of the operands'
 * slices (an operand BLAS cannot address, or of another dtype, is made
 * contiguous once for all of them).
 *
 * outer(x, y) is a broadcast multiply of x[:, None] by y[None, :]: one
 * vectorised pass writing each output element once, which is faster than
 * clearing the output and calling ger.
 *
 * gemm, gemv and ger follow BLAS: z, y or A is read only when beta is not
 * zero (rewrites give gemm an uninitialised z with beta = 0), and they
 * work in place on input 0 when the node says so, its storage is unshared
 * and BLAS can address it.
 *
 * OpenBLAS threads are process-wide: the kernels set them to the running
 * function's thread count when it differs from the last count set.
 *
 * OpenBLAS's kernels are chosen when it loads; rg_blas_better_core() says
 * when its own choice is the generic fallback on a processor with wider
 * vector units (relgraph/backend.h).
 */
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h> /* after relgraph's headers: it defines I (complex.h) */
#undef I

/* ------------------------------------------------------------- OpenBLAS's kernels */

const char *rg_blas_core(void) { return openblas_get_corename(); }

const char *rg_blas_better_core(void) {
  const char *now = openblas_get_corename();
  if (!now || strcasecmp(now, "Prescott")) return NULL; /* OpenBLAS knew the processor */
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init(); /* the checks below include the operating system's support */
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return NULL;
}

void rg_blas_choose_kernels(char **argv) {
  if (!argv || !argv[0] || getenv("OPENBLAS_CORETYPE")) return;
  const char *core = rg_blas_better_core();
  if (!core || setenv("OPENBLAS_CORETYPE", core, 1)) return;
  fflush(NULL);
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE"); /* not started again: go on as we are */
}

/* ------------------------------------------------------------------ operands */

/* OpenBLAS's thread count is one setting of the process.  The count last
 * given to it, and the lock that keeps the two equal: two functions of
 * different counts called at once in two threads would otherwise leave
 * the recorded count other than OpenBLAS's, and later calls would run on
 * a count they did not ask for. */
static int blas_threads = -1;
static pthread_mutex_t blas_threads_lock = PTHREAD_MUTEX_INITIALIZER;

static void set_blas_threads(rgb_exec *x) {
  int n = x->rt->nthreads;
  pthread_mutex_lock(&blas_threads_lock);
  if (blas_threads != n) {
    openblas_set_num_threads(n);
    blas_threads = n;
  }
  pthread_mutex_unlock(&blas_threads_lock);
}

/* A matrix as BLAS sees it: row-major data with leading dimension ld,
 * transposed or not.  `own` holds a copy when one was needed. */
typedef struct bmat {
  const char *data;
  int64_t ld;
  bool trans;
  rg_tensor *own;
} bmat;

bool rgbc_blas_matrix(const rg_tensor *t, rg_dtype dt, int64_t *ld, bool *trans) {
  int64_t es = rgbc_size(dt), r = t->shape[0], c = t->shape[1];
  int64_t rs = r > 1 ? t->strides[0] : (c > 1 ? c : 1) * es, cs = c > 1 ? t->strides[1] : es;
  *trans = false;
  if (t->dtype != dt) return false;
  if (cs == es && rs % es == 0 && rs >= (c > 1 ? c : 1) * es) {
    *ld = rs / es;
    return true;
  }
  if (r > 1 && c > 1 && rs == es && cs % es == 0 && cs >= r * es) {
    *ld = cs / es;
    *trans = true;
    return true;
  }
  return false;
}

bool rgbc_blas_vector(const rg_tensor *t, rg_dtype dt, int64_t *inc) {
  int64_t es = rgbc_size(dt), n = t->shape[0], s = n > 1 ? t->strides[0] : es;
  *inc = s / es;
  return t->dtype == dt && s != 0 && s % es == 0 && s / es <= INT32_MAX && s / es >= -INT32_MAX;
}

/* Describes the (r, c) matrix t of dtype dt to BLAS, copying it when its
 * strides do not allow otherwise.  Returns false with an error recorded. */
static bool as_matrix(rgb_exec *x, const rg_tensor *t, rg_dtype dt, bmat *m) {
  m->own = NULL;
  if (rgbc_blas_matrix(t, dt, &m->ld, &m->trans)) {
    m->data = t->data;
    return true;
  }
  m->own = rgbc_contiguous(x, t, dt);
  if (!m->own) return false;
  m->data = m->own->data;
  m->ld = t->shape[1] > 1 ? t->shape[1] : 1;
  return true;
}

/* A vector as BLAS sees it: the lowest address and an increment. */
typedef struct bvec {
  const char *data;
  int inc;
  rg_tensor *own;
} bvec;

static bool as_vector(rgb_exec *x, const rg_tensor *t, rg_dtype dt, bvec *v) {
  int64_t inc;
  v->own = NULL;
  if (rgbc_blas_vector(t, dt, &inc)) {
    v->inc = (int)inc;
    v->data = inc > 0 ? t->data : t->data + (t->shape[0] - 1) * inc * rgbc_size(dt);
    return true;
  }
  v->own = rgbc_contiguous(x, t, dt);
  if (!v->own) return false;
  v->data = v->own->data;
  v->inc = 1;
  return true;
}

static bool fits_int(int64_t v) { return v <= INT32_MAX; }

/* ------------------------------------------------------------------ BLAS calls */

/* C (m, n, row-major, ldc) = alpha * A @ B + beta * C. */
static void gemm_call(rg_dtype dt, int64_t m, int64_t n, int64_t k, double alpha, const bmat *a,
                      const bmat *b, double beta, char *c, int64_t ldc) {
  enum CBLAS_TRANSPOSE ta = a->trans ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = b->trans ? CblasTrans : CblasNoTrans;
  if (dt == RG_FLOAT32)
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, (const float *)a->data,
                (int)a->ld, (const float *)b->data, (int)b->ld, (float)beta, (float *)c, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, (const double *)a->data,
                (int)a->ld, (const double *)b->data, (int)b->ld, beta, (double *)c, (int)ldc);
}

/* y = alpha * op(A) @ x + beta * y, A described by bmat as an (r, c)
 * matrix before op. */
static void gemv_call(rg_dtype dt, int64_t r, int64_t c, double alpha, const bmat *a, bool trans,
                      const bvec *x, double beta, char *y, int incy) {
  /* A stored transposed: BLAS sees the (c, r) row-major matrix */
  bool t = trans != a->trans;
  int64_t M = a->trans ? c : r, N = a->trans ? r : c;
  enum CBLAS_TRANSPOSE tr = t ? CblasTrans : CblasNoTrans;
  if (dt == RG_FLOAT32)
    cblas_sgemv(CblasRowMajor, tr, (int)M, (int)N, (float)alpha, (const float *)a->data, (int)a->ld,
                (const float *)x->data, x->inc, (float)beta, (float *)y, incy);
  else
    cblas_dgemv(CblasRowMajor, tr, (int)M, (int)N, alpha, (const double *)a->data, (int)a->ld,
                (const double *)x->data, x->inc, beta, (double *)y, incy);
}

static void free_ops(rg_tensor *a, rg_tensor *b, rg_tensor *c) {
  rg_tensor_free(a);
  rg_tensor_free(b);
  rg_tensor_free(c);
}

/* ------------------------------------------------------------------ integer products */

/* out (m, n) = a (m, k) @ b (k, n) for contiguous int64 operands,
 * wrapping; then converted to out's dtype. */
static int int_matmul(rgb_exec *x, const rg_tensor *a, const rg_tensor *b, int64_t m, int64_t k,
                      int64_t n, rg_tensor *out) {
  rg_tensor *a64 = rgbc_contiguous(x, a, RG_INT64), *b64 = rgbc_contiguous(x, b, RG_INT64);
  uint64_t *c = rg_calloc((size_t)(m * n > 0 ? m * n : 1), sizeof *c);
  if (!a64 || !b64 || !c) {
    free_ops(a64, b64, NULL);
    rg_free(c);
    return x->rt->errcode ? x->rt->errcode : rgb_error(x, RG_ERR_NOMEM, "out of memory");
  }
  const uint64_t *A = (const uint64_t *)a64->data, *B = (const uint64_t *)b64->data;
  for (int64_t i = 0; i < m; i++) {
    uint64_t *ci = c + i * n;
    for (int64_t l = 0; l < k; l++) {
      uint64_t av = A[i * k + l];
      const uint64_t *bl = B + l * n;
      for (int64_t j = 0; j < n; j++) ci[j] += av * bl[j];
    }
  }
  char *p[2] = {out->data, (char *)c};
  int64_t s[2] = {rgbc_size(out->dtype), 8};
  rgbc_cast_loop(RG_INT64, out->dtype)(p, s, m * n, NULL);
  rg_free(c);
  free_ops(a64, b64, NULL);
  return RG_OK;
}

/* ------------------------------------------------------------------ dot */

static int align_error(rgb_exec *x, const rg_tensor *a, const rg_tensor *b) {
  char sa[64], sb[64];
  return rgb_error(x, RG_ERR_TYPE, "shapes %s and %s are not aligned",
                   rg_shape_str(a->ndim, a->shape, sa, sizeof sa),
                   rg_shape_str(b->ndim, b->shape, sb, sizeof sb));
}

/* a @ b with a, b viewed as (m, k) and (k, n) matrices. */
static int dot_float(rgb_exec *x, const rg_tensor *a, const rg_tensor *b, int64_t m, int64_t k,
                     int64_t n, rg_tensor *out) {
  rg_dtype dt = out->dtype;
  if (a->ndim == 1 && b->ndim == 1) {
    bvec va, vb;
    if (!as_vector(x, a, dt, &va) || !as_vector(x, b, dt, &vb)) return x->rt->errcode;
    if (dt == RG_FLOAT32)
      *(float *)out->data = cblas_sdot((int)k, (const float *)va.data, va.inc,
                                       (const float *)vb.data, vb.inc);
    else
      *(double *)out->data = cblas_ddot((int)k, (const double *)va.data, va.inc,
                                        (const double *)vb.data, vb.inc);
    free_ops(va.own, vb.own, NULL);
    return RG_OK;
  }
  if (a->ndim == 2 && b->ndim == 2) {
    bmat ma, mb;
    if (!as_matrix(x, a, dt, &ma)) return x->rt->errcode;
    if (!as_matrix(x, b, dt, &mb)) {
      free_ops(ma.own, NULL, NULL);
      return x->rt->errcode;
    }
    gemm_call(dt, m, n, k, 1, &ma, &mb, 0, out->data, n);
    free_ops(ma.own, mb.own, NULL);
    return RG_OK;
  }
  /* matrix-vector: out = A @ v; vector-matrix: out = B.T @ v */
  const rg_tensor *mat = a->ndim == 2 ? a : b, *vec = a->ndim == 2 ? b : a;
  bmat mm;
  bvec vv;
  if (!as_matrix(x, mat, dt, &mm)) return x->rt->errcode;
  if (!as_vector(x, vec, dt, &vv)) {
    free_ops(mm.own, NULL, NULL);
    return x->rt->errcode;
  }
  gemv_call(dt, mat->shape[0], mat->shape[1], 1, &mm, a->ndim == 1, &vv, 0, out->data, 1);
  free_ops(mm.own, vv.own, NULL);
  return RG_OK;
}

rg_tensor *rgbc_dot_output(rgb_exec *x, int64_t *m, int64_t *k, int64_t *n) {
  const rg_tensor *a = rgb_in(x, 0), *b = rgb_in(x, 1);
  *m = a->ndim == 2 ? a->shape[0] : 1;
  *k = a->shape[a->ndim - 1];
  *n = b->ndim == 2 ? b->shape[1] : 1;
  if (*k != b->shape[0]) {
    align_error(x, a, b);
    return NULL;
  }
  int64_t shape[2];
  int nd = 0;
  if (a->ndim == 2) shape[nd++] = *m;
  if (b->ndim == 2) shape[nd++] = *n;
  return rgb_output(x, 0, x->node->out[0].dtype, nd, shape);
}

int rgb_cpu_dot(rgb_exec *x) {
  const rg_tensor *a = rgb_in(x, 0), *b = rgb_in(x, 1);
  int64_t m, k, n;
  rg_tensor *out = rgbc_dot_output(x, &m, &k, &n);
  if (!out) return x->rt->errcode;
  rg_dtype dt = out->dtype;
  if (m == 0 || n == 0) return RG_OK;
  if (!rg_dtype_is_float(dt)) return int_matmul(x, a, b, m, k, n, out);
  if (k == 0 || !fits_int(m) || !fits_int(n) || !fits_int(k)) {
    memset(out->data, 0, (size_t)(m * n * rgbc_size(dt)));
    if (k == 0) return RG_OK;
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by BLAS");
  }
  set_blas_threads(x);
  return dot_float(x, a, b, m, k, n, out);
}

/* ------------------------------------------------------------------ batched_dot */

rg_tensor *rgbc_batched_dot_output(rgb_exec *x, int64_t *nb, int64_t *m, int64_t *k, int64_t *n) {
  const rg_tensor *a = rgb_in(x, 0), *b = rgb_in(x, 1);
  *nb = a->shape[0];
  *m = a->ndim == 3 ? a->shape[1] : 1;
  *k = a->shape[a->ndim - 1];
  *n = b->ndim == 3 ? b->shape[2] : 1;
  if (b->shape[0] != *nb) {
    char sa[64], sb[64];
    rgb_error(x, RG_ERR_TYPE, "batch sizes differ: shapes %s and %s",
              rg_shape_str(a->ndim, a->shape, sa, sizeof sa), rg_shape_str(b->ndim, b->shape, sb, sizeof sb));
    return NULL;
  }
  if (*k != b->shape[1]) {
    align_error(x, a, b);
    return NULL;
  }
  int64_t shape[3];
  int nd = 0;
  shape[nd++] = *nb;
  if (a->ndim == 3) shape[nd++] = *m;
  if (b->ndim == 3) shape[nd++] = *n;
  return rgb_output(x, 0, x->node->out[0].dtype, nd, shape);
}

void rgbc_batch_slice(const rg_tensor *t, int64_t i, rg_tensor *view) {
  *view = *t;
  view->ndim = t->ndim - 1;
  for (int d = 0; d < view->ndim; d++) {
    view->shape[d] = t->shape[d + 1];
    view->strides[d] = t->strides[d + 1];
  }
  view->data = t->data + i * t->strides[0];
}

/* t itself when BLAS addresses its slices in dtype dt, else (in *own) a
 * contiguous copy in dt; NULL with an error recorded. */
static const rg_tensor *batch_operand(rgb_exec *x, const rg_tensor *t, rg_dtype dt, rg_tensor **own) {
  rg_tensor s;
  int64_t ld, inc;
  bool trans;
  *own = NULL;
  rgbc_batch_slice(t, 0, &s);
  if (t->dtype == dt && (s.ndim == 2 ? rgbc_blas_matrix(&s, dt, &ld, &trans) && fits_int(ld)
                                     : rgbc_blas_vector(&s, dt, &inc)))
    return t;
  return (*own = rgbc_contiguous(x, t, dt));
}

int rgb_cpu_batched_dot(rgb_exec *x) {
  int64_t nb, m, k, n;
  rg_tensor *out = rgbc_batched_dot_output(x, &nb, &m, &k, &n);
  if (!out) return x->rt->errcode;
  rg_dtype dt = out->dtype;
  if (nb == 0 || m == 0 || n == 0) return RG_OK;
  bool fl = rg_dtype_is_float(dt);
  if (fl && (k == 0 || !fits_int(m) || !fits_int(n) || !fits_int(k))) {
    memset(out->data, 0, (size_t)(nb * m * n * rgbc_size(dt)));
    if (k == 0) return RG_OK;
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by BLAS");
  }
  rg_tensor *own_a = NULL, *own_b = NULL;
  const rg_tensor *a = rgb_in(x, 0), *b = rgb_in(x, 1);
  if (fl && (!(a = batch_operand(x, a, dt, &own_a)) || !(b = batch_operand(x, b, dt, &own_b)))) {
    free_ops(own_a, own_b, NULL);
    return x->rt->errcode;
  }
  if (fl) set_blas_threads(x);
  int rc = RG_OK;
  for (int64_t i = 0; i < nb && !rc; i++) {
    rg_tensor ai, bi, oi;
    rgbc_batch_slice(a, i, &ai);
    rgbc_batch_slice(b, i, &bi);
    rgbc_batch_slice(out, i, &oi);
    rc = fl ? dot_float(x, &ai, &bi, m, k, n, &oi) : int_matmul(x, &ai, &bi, m, k, n, &oi);
  }
  free_ops(own_a, own_b, NULL);
  return rc;
}

/* ------------------------------------------------------------------ outer */

int rgb_cpu_outer(rgb_exec *x) {
  const rg_tensor *a = rgb_in(x, 0), *b = rgb_in(x, 1);
  int64_t shape[2] = {a->shape[0], b->shape[0]};
  rg_tensor *out = rgb_output(x, 0, x->node->out[0].dtype, 2, shape);
  if (!out) return x->rt->errcode;
  rg_tensor col = *a, row = *b;
  col.ndim = row.ndim = 2;
  col.shape[1] = 1;
  col.strides[1] = 0;
  row.shape[1] = b->shape[0];
  row.strides[1] = b->strides[0];
  row.shape[0] = 1;
  row.strides[0] = 0;
  rgbc_binary(x, RG_OP_MUL, out, &col, &row);
  return RG_OK;
}

/* ------------------------------------------------------------------ gemm, gemv, ger */

/* The output of a BLAS form: input 0 itself (in place) when allowed and
 * BLAS can write it (unit inner stride), else a fresh tensor holding a
 * copy of input 0 (not made when beta is 0: BLAS does not read it). */
bool rgbc_blas_writable(const rg_tensor *z) {
  int64_t es = rgbc_size(z->dtype);
  return z->ndim == 1 ? (z->shape[0] <= 1 || z->strides[0] == es)
                      : (z->shape[1] <= 1 || z->strides[1] == es) &&
                            (z->shape[0] <= 1 ||
                             (z->strides[0] % es == 0 && z->strides[0] >= z->shape[1] * es));
}

int64_t rgbc_blas_row_ld(const rg_tensor *t) {
  int64_t es = rgbc_size(t->dtype);
  return t->shape[0] > 1 ? t->strides[0] / es : (t->shape[1] > 1 ? t->shape[1] : 1);
}

rg_tensor *rgbc_blas_output(rgb_exec *x, bool copy, rgbc_copy_fn fn) {
  rg_tensor *z = rgb_in(x, 0);
  if (x->node->inplace == 0 && rgbc_blas_writable(z) && rg_storage_refcount(z) == 1) {
    rg_tensor *r = rg_tensor_ref(z);
    if (!r) {
      rgb_error(x, RG_ERR_NOMEM, "out of memory");
      return NULL;
    }
    rgb_set_output(x, 0, r);
    return r;
  }
  rg_tensor *out = rgb_output(x, 0, z->dtype, z->ndim, z->shape);
  if (out && copy && fn(x, out, z) != RG_OK) return NULL;
  return out;
}

static rg_tensor *blas_output(rgb_exec *x, bool copy) { return rgbc_blas_output(x, copy, rgbc_copy_host); }

/* out = beta * out where BLAS is not called (k == 0 or alpha == 0);
 * beta == 0 clears out (whatever it held, NaN included). */
static int scale(rgb_exec *x, rg_tensor *out, double beta) {
  if (beta == 1) return RG_OK;
  rg_tensor *s = rg_tensor_scalar_f64(out->dtype, beta);
  if (!s) return rgb_error(x, RG_ERR_NOMEM, "out of memory");
  if (beta == 0) rgbc_assign(x, out, s, NULL);
  else rgbc_binary(x, RG_OP_MUL, out, out, s);
  rg_tensor_free(s);
  return RG_OK;
}

int rgb_cpu_gemm(rgb_exec *x) {
  const rg_tensor *z = rgb_in(x, 0), *a = rgb_in(x, 2), *b = rgb_in(x, 3);
  double alpha = rgbc_scalar_f64(rgb_in(x, 1)), beta = rgbc_scalar_f64(rgb_in(x, 4));
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  if (b->shape[0] != k) return align_error(x, a, b);
  if (z->shape[0] != m || z->shape[1] != n)
    return rgb_error(x, RG_ERR_TYPE, "z of shape (%lld %lld) does not match x @ y of shape (%lld %lld)",
                     (long long)z->shape[0], (long long)z->shape[1], (long long)m, (long long)n);
  rg_tensor *out = blas_output(x, beta != 0);
  if (!out) return x->rt->errcode;
  if (m == 0 || n == 0) return RG_OK;
  if (k == 0 || alpha == 0) return scale(x, out, beta);
  if (!fits_int(m) || !fits_int(n) || !fits_int(k))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by BLAS");
  set_blas_threads(x);
  bmat ma, mb;
  if (!as_matrix(x, a, out->dtype, &ma)) return x->rt->errcode;
  if (!as_matrix(x, b, out->dtype, &mb)) {
    free_ops(ma.own, NULL, NULL);
    return x->rt->errcode;
  }
  gemm_call(out->dtype, m, n, k, alpha, &ma, &mb, beta, out->data, rgbc_blas_row_ld(out));
  free_ops(ma.own, mb.own, NULL);
  return RG_OK;
}

int rgb_cpu_gemv(rgb_exec *x) {
  const rg_tensor *y = rgb_in(x, 0), *a = rgb_in(x, 2), *v = rgb_in(x, 3);
  double alpha = rgbc_scalar_f64(rgb_in(x, 1)), beta = rgbc_scalar_f64(rgb_in(x, 4));
  int64_t m = a->shape[0], k = a->shape[1];
  if (v->shape[0] != k) return align_error(x, a, v);
  if (y->shape[0] != m)
    return rgb_error(x, RG_ERR_TYPE, "y of shape (%lld) does not match the rows of A (%lld %lld)",
                     (long long)y->shape[0], (long long)m, (long long)k);
  rg_tensor *out = blas_output(x, beta != 0);
  if (!out) return x->rt->errcode;
  if (m == 0) return RG_OK;
  if (k == 0 || alpha == 0) return scale(x, out, beta);
  if (!fits_int(m) || !fits_int(k))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by BLAS");
  set_blas_threads(x);
  bmat ma;
  bvec vv;
  if (!as_matrix(x, a, out->dtype, &ma)) return x->rt->errcode;
  if (!as_vector(x, v, out->dtype, &vv)) {
    free_ops(ma.own, NULL, NULL);
    return x->rt->errcode;
  }
  gemv_call(out->dtype, m, k, alpha, &ma, false, &vv, beta, out->data, 1);
  free_ops(ma.own, vv.own, NULL);
  return RG_OK;
}

int rgb_cpu_ger(rgb_exec *x) {
  const rg_tensor *A = rgb_in(x, 0), *u = rgb_in(x, 2), *v = rgb_in(x, 3);
  double alpha = rgbc_scalar_f64(rgb_in(x, 1));
  int64_t m = A->shape[0], n = A->shape[1];
  if (u->shape[0] != m || v->shape[0] != n)
    return rgb_error(x, RG_ERR_TYPE,
                     "A of shape (%lld %lld) does not match outer(x, y) of shape (%lld %lld)",
                     (long long)m, (long long)n, (long long)u->shape[0], (long long)v->shape[0]);
  rg_tensor *out = blas_output(x, true);
  if (!out) return x->rt->errcode;
  if (m == 0 || n == 0 || alpha == 0) return RG_OK;
  if (!fits_int(m) || !fits_int(n))
    return rgb_error(x, RG_ERR_LIMIT, "dimensions beyond 2^31 are not supported by BLAS");
  set_blas_threads(x);
  bvec vu, vv;
  if (!as_vector(x, u, out->dtype, &vu)) return x->rt->errcode;
  if (!as_vector(x, v, out->dtype, &vv)) {
    free_ops(vu.own, NULL, NULL);
    return x->rt->errcode;
  }
  if (out->dtype == RG_FLOAT32)
    cblas_sger(CblasRowMajor, (int)m, (int)n, (float)alpha, (const float *)vu.data, vu.inc,
               (const float *)vv.data, vv.inc, (float *)out->data, (int)rgbc_blas_row_ld(out));
  else
    cblas_dger(CblasRowMajor, (int)m, (int)n, alpha, (const double *)vu.data, vu.inc,
               (const double *)vv.data, vv.inc, (double *)out->data, (int)rgbc_blas_row_ld(out));
  free_ops(vu.own, vv.own, NULL);
  return RG_OK;
}
