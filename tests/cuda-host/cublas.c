/*
 * cublas.c — the cuBLAS calls the CUDA backend makes, implemented on the
 * host with CBLAS (OpenBLAS), column-major as cuBLAS is.  A call is queued
 * on the handle's stream (driver.c) and runs when the stream gets there;
 * scalars given by pointer are read then in device pointer mode, and at
 * the call in host mode, as cuBLAS reads them.  A dot product with a
 * host result waits for its stream first, as cuBLAS does.
 */
#include "host.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
enum { OK = 0, INVALID = 7, MODE_HOST = 0 };

typedef struct handle { stream *s; int mode; } handle;

API int cublasCreate_v2(handle **h) { return (*h = calloc(1, sizeof **h)) ? OK : INVALID; }
API int cublasDestroy_v2(handle *h) { return free(h), OK; }
API int cublasSetStream_v2(handle *h, stream *s) { return h->s = s, OK; }
API int cublasSetPointerMode_v2(handle *h, int mode) { return h->mode = mode, OK; }
API const char *cublasGetStatusString(int st) { return st ? "invalid value" : "success"; }

/* One call's arguments; scalars as values (host mode) or pointers. */
typedef struct call {
  bool dbl, ta, tb;
  int m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const void *palpha, *pbeta; /* device mode: read when the call runs */
  const void *a, *b;
  void *c;
  int batch;                   /* strided batched gemm: the count and */
  long long sa, sb, sc;        /* the operands' strides, in elements */
} call;

static double scalar(bool dbl, const void *p) { return dbl ? *(const double *)p : *(const float *)p; }

/* The call's arguments, with host-mode scalars read now. */
static call *new_call(const handle *h, bool dbl, const void *alpha, const void *beta) {
  call *c = calloc(1, sizeof *c);
  c->dbl = dbl;
  if (h->mode == MODE_HOST) {
    c->alpha = scalar(dbl, alpha);
    c->beta = beta ? scalar(dbl, beta) : 0;
  } else {
    c->palpha = alpha, c->pbeta = beta;
  }
  return c;
}

static void read_scalars(call *c) {
  if (c->palpha) c->alpha = scalar(c->dbl, c->palpha);
  if (c->pbeta) c->beta = scalar(c->dbl, c->pbeta);
}

static enum CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }

static void run_gemm(void *p) {
  call *c = p;
  read_scalars(c);
  if (c->dbl)
    cblas_dgemm(CblasColMajor, tr(c->ta), tr(c->tb), c->m, c->n, c->k, c->alpha, c->a, c->lda, c->b, c->ldb,
                c->beta, c->c, c->ldc);
  else
    cblas_sgemm(CblasColMajor, tr(c->ta), tr(c->tb), c->m, c->n, c->k, (float)c->alpha, c->a, c->lda, c->b,
                c->ldb, (float)c->beta, c->c, c->ldc);
}

static int gemm(handle *h, bool dbl, int ta, int tb, int m, int n, int k, const void *alpha, const void *a,
                int lda, const void *b, int ldb, const void *beta, void *cc, int ldc) {
  if (m < 0 || n < 0 || k < 0) return INVALID;
  call *c = new_call(h, dbl, alpha, beta);
  c->ta = ta, c->tb = tb, c->m = m, c->n = n, c->k = k, c->a = a, c->lda = lda, c->b = b, c->ldb = ldb;
  c->c = cc, c->ldc = ldc;
  rgtest_count(RGTEST_BLAS_CALLS);
  rgtest_queue_call(h->s, run_gemm, c);
  return OK;
}

API int cublasSgemm_v2(handle *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                       const float *b, int ldb, const float *beta, float *c, int ldc) {
  return gemm(h, false, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
API int cublasDgemm_v2(handle *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a,
                       int lda, const double *b, int ldb, const double *beta, double *c, int ldc) {
  return gemm(h, true, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The strided batched gemm: one gemm per batch index. */
static void run_gemm_batched(void *p) {
  call *c = p;
  read_scalars(c);
  size_t es = c->dbl ? sizeof(double) : sizeof(float);
  for (int i = 0; i < c->batch; i++) {
    const char *a = (const char *)c->a + (size_t)(i * c->sa) * es, *b = (const char *)c->b + (size_t)(i * c->sb) * es;
    char *cc = (char *)c->c + (size_t)(i * c->sc) * es;
    if (c->dbl)
      cblas_dgemm(CblasColMajor, tr(c->ta), tr(c->tb), c->m, c->n, c->k, c->alpha, (const double *)a, c->lda,
                  (const double *)b, c->ldb, c->beta, (double *)cc, c->ldc);
    else
      cblas_sgemm(CblasColMajor, tr(c->ta), tr(c->tb), c->m, c->n, c->k, (float)c->alpha, (const float *)a,
                  c->lda, (const float *)b, c->ldb, (float)c->beta, (float *)cc, c->ldc);
  }
}

static int gemm_batched(handle *h, bool dbl, int ta, int tb, int m, int n, int k, const void *alpha,
                        const void *a, int lda, long long sa, const void *b, int ldb, long long sb,
                        const void *beta, void *cc, int ldc, long long sc, int batch) {
  if (m < 0 || n < 0 || k < 0 || batch < 0) return INVALID;
  call *c = new_call(h, dbl, alpha, beta);
  c->ta = ta, c->tb = tb, c->m = m, c->n = n, c->k = k, c->a = a, c->lda = lda, c->b = b, c->ldb = ldb;
  c->c = cc, c->ldc = ldc, c->batch = batch, c->sa = sa, c->sb = sb, c->sc = sc;
  rgtest_count(RGTEST_BLAS_CALLS);
  rgtest_queue_call(h->s, run_gemm_batched, c);
  return OK;
}

API int cublasSgemmStridedBatched(handle *h, int ta, int tb, int m, int n, int k, const float *alpha,
                                  const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                                  const float *beta, float *c, int ldc, long long sc, int batch) {
  return gemm_batched(h, false, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
API int cublasDgemmStridedBatched(handle *h, int ta, int tb, int m, int n, int k, const double *alpha,
                                  const double *a, int lda, long long sa, const double *b, int ldb, long long sb,
                                  const double *beta, double *c, int ldc, long long sc, int batch) {
  return gemm_batched(h, true, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

/* gemv: y = alpha op(A) x + beta y; lda, ldb, ldc carry A's leading
 * dimension and the increments of x and y. */
static void run_gemv(void *p) {
  call *c = p;
  read_scalars(c);
  if (c->dbl)
    cblas_dgemv(CblasColMajor, tr(c->ta), c->m, c->n, c->alpha, c->a, c->lda, c->b, c->ldb, c->beta, c->c, c->ldc);
  else
    cblas_sgemv(CblasColMajor, tr(c->ta), c->m, c->n, (float)c->alpha, c->a, c->lda, c->b, c->ldb, (float)c->beta,
                c->c, c->ldc);
}

static int gemv(handle *h, bool dbl, int ta, int m, int n, const void *alpha, const void *a, int lda,
                const void *x, int incx, const void *beta, void *y, int incy) {
  call *c = new_call(h, dbl, alpha, beta);
  c->ta = ta, c->m = m, c->n = n, c->a = a, c->lda = lda, c->b = x, c->ldb = incx, c->c = y, c->ldc = incy;
  rgtest_count(RGTEST_BLAS_CALLS);
  rgtest_queue_call(h->s, run_gemv, c);
  return OK;
}

API int cublasSgemv_v2(handle *h, int ta, int m, int n, const float *alpha, const float *a, int lda,
                       const float *x, int incx, const float *beta, float *y, int incy) {
  return gemv(h, false, ta, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
API int cublasDgemv_v2(handle *h, int ta, int m, int n, const double *alpha, const double *a, int lda,
                       const double *x, int incx, const double *beta, double *y, int incy) {
  return gemv(h, true, ta, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

/* ger: A += alpha x y^T; a, lda: x and incx; b, ldb: y and incy; c, ldc: A. */
static void run_ger(void *p) {
  call *c = p;
  read_scalars(c);
  if (c->dbl) cblas_dger(CblasColMajor, c->m, c->n, c->alpha, c->a, c->lda, c->b, c->ldb, c->c, c->ldc);
  else cblas_sger(CblasColMajor, c->m, c->n, (float)c->alpha, c->a, c->lda, c->b, c->ldb, c->c, c->ldc);
}

static int ger(handle *h, bool dbl, int m, int n, const void *alpha, const void *x, int incx, const void *y,
               int incy, void *a, int lda) {
  call *c = new_call(h, dbl, alpha, NULL);
  c->m = m, c->n = n, c->a = x, c->lda = incx, c->b = y, c->ldb = incy, c->c = a, c->ldc = lda;
  rgtest_count(RGTEST_BLAS_CALLS);
  rgtest_queue_call(h->s, run_ger, c);
  return OK;
}

API int cublasSger_v2(handle *h, int m, int n, const float *alpha, const float *x, int incx, const float *y,
                      int incy, float *a, int lda) {
  return ger(h, false, m, n, alpha, x, incx, y, incy, a, lda);
}
API int cublasDger_v2(handle *h, int m, int n, const double *alpha, const double *x, int incx, const double *y,
                      int incy, double *a, int lda) {
  return ger(h, true, m, n, alpha, x, incx, y, incy, a, lda);
}

/* dot: the result written through c (device memory in device mode). */
static void run_dot(void *p) {
  call *c = p;
  if (c->dbl) *(double *)c->c = cblas_ddot(c->n, c->a, c->lda, c->b, c->ldb);
  else *(float *)c->c = cblas_sdot(c->n, c->a, c->lda, c->b, c->ldb);
}

static int dot(handle *h, bool dbl, int n, const void *x, int incx, const void *y, int incy, void *result) {
  call *c = calloc(1, sizeof *c);
  c->dbl = dbl, c->n = n, c->a = x, c->lda = incx, c->b = y, c->ldb = incy, c->c = result;
  rgtest_count(RGTEST_BLAS_CALLS);
  rgtest_queue_call(h->s, run_dot, c);
  if (h->mode == MODE_HOST) rgtest_complete(h->s);
  return OK;
}

API int cublasSdot_v2(handle *h, int n, const float *x, int incx, const float *y, int incy, float *result) {
  return dot(h, false, n, x, incx, y, incy, result);
}
API int cublasDdot_v2(handle *h, int n, const double *x, int incx, const double *y, int incy, double *result) {
  return dot(h, true, n, x, incx, y, incy, result);
}
