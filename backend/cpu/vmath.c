/*
 * vmath.c — transcendental functions over contiguous arrays with glibc's
 * vector math library (libmvec), for the elementwise loops (elemwise.c),
 * and through them the composite interpreter and the scan fast path.
 *
 * libmvec computes 4 floats (SSE, any x86-64), 8 (AVX2) or 16 (AVX-512)
 * per call, each function within 4 ULP of the exact result (glibc's
 * documented bound for its vector functions), against a scalar libm call
 * per element before: exp over 10^7 floats goes from one libm call per
 * element to one per 16.  The width is chosen per call from the CPU
 * (AVX-512, else AVX2 with FMA, else SSE), so one machine always gives the
 * same bits (the widths' algorithms differ in the last bits); an
 * array's tail is padded into one more full vector rather than finished
 * with scalar libm, so an element's value never depends on its position.
 * Arrays are processed in chunks of CHUNK elements, each read before it is
 * written, so the output may be the input (in place).
 *
 * The AVX-512 forms live in vmath-avx512.h, as text generated kernels
 * reuse.
 *
 * sigmoid and softplus are built on exp(-|x|), the forms elemwise.c
 * documents (no overflow, no lost tail): sigmoid(x) = 1 / (1 + e) for
 * x >= 0 and e / (1 + e) below, softplus(x) = max(x, 0) + log1p(e).
 */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/vmath-avx512.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define CHUNK 256

/* No floating-point traps are relied on: the glue loops' selects may
 * compute both sides, so they vectorise instead of branching per element
 * (a branch on the sign of random data mispredicts half the time). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
/* GCC cannot see that the chunk functions read only the m elements the
 * glue loops wrote, and warns about the rest of the scratch arrays. */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/* Code for AVX2 and AVX-512 (chosen at run time; a function attribute,
 * which GCC and clang both honour). */
#define AVX2 __attribute__((target("avx2,fma")))

/* ------------------------------------------------------------------ libmvec entry points */

#define DECL_SSE(name)                  \
  __m128 _ZGVbN4v_##name##f(__m128);    \
  __m128d _ZGVbN2v_##name(__m128d);
#define FUNCS RGBC_MVEC_FUNCS
FUNCS(DECL_SSE)

#define DECL_AVX(name)                       \
  AVX2 __m256 _ZGVdN8v_##name##f(__m256);    \
  AVX2 __m256d _ZGVdN4v_##name(__m256d);
FUNCS(DECL_AVX)


/* ------------------------------------------------------------------ one chunk, one width */

/* y[0..n) = f(x[0..n)) for n <= CHUNK, the last vector padded. */
#define SSE_CHUNK(name)                                                                  \
  static void name##_f32_sse(const float *x, float *y, int n) {                          \
    int i = 0;                                                                           \
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _ZGVbN4v_##name##f(_mm_loadu_ps(x + i))); \
    if (i < n) {                                                                         \
      float pad[4] = {0};                                                                \
      memcpy(pad, x + i, (size_t)(n - i) * sizeof *pad);                                 \
      _mm_storeu_ps(pad, _ZGVbN4v_##name##f(_mm_loadu_ps(pad)));                         \
      memcpy(y + i, pad, (size_t)(n - i) * sizeof *pad);                                 \
    }                                                                                    \
  }                                                                                      \
  static void name##_f64_sse(const double *x, double *y, int n) {                        \
    int i = 0;                                                                           \
    for (; i + 2 <= n; i += 2) _mm_storeu_pd(y + i, _ZGVbN2v_##name(_mm_loadu_pd(x + i))); \
    if (i < n) {                                                                         \
      double pad[2] = {x[i], 0};                                                         \
      _mm_storeu_pd(pad, _ZGVbN2v_##name(_mm_loadu_pd(pad)));                            \
      y[i] = pad[0];                                                                     \
    }                                                                                    \
  }
FUNCS(SSE_CHUNK)

#define AVX_CHUNK(name)                                                                  \
  AVX2 static void name##_f32_avx(const float *x, float *y, int n) {                     \
    int i = 0;                                                                           \
    for (; i + 8 <= n; i += 8)                                                           \
      _mm256_storeu_ps(y + i, _ZGVdN8v_##name##f(_mm256_loadu_ps(x + i)));               \
    if (i < n) {                                                                         \
      float pad[8] = {0};                                                                \
      memcpy(pad, x + i, (size_t)(n - i) * sizeof *pad);                                 \
      _mm256_storeu_ps(pad, _ZGVdN8v_##name##f(_mm256_loadu_ps(pad)));                   \
      memcpy(y + i, pad, (size_t)(n - i) * sizeof *pad);                                 \
    }                                                                                    \
  }                                                                                      \
  AVX2 static void name##_f64_avx(const double *x, double *y, int n) {                   \
    int i = 0;                                                                           \
    for (; i + 4 <= n; i += 4)                                                           \
      _mm256_storeu_pd(y + i, _ZGVdN4v_##name(_mm256_loadu_pd(x + i)));                  \
    if (i < n) {                                                                         \
      double pad[4] = {0};                                                               \
      memcpy(pad, x + i, (size_t)(n - i) * sizeof *pad);                                 \
      _mm256_storeu_pd(pad, _ZGVdN4v_##name(_mm256_loadu_pd(pad)));                      \
      memcpy(y + i, pad, (size_t)(n - i) * sizeof *pad);                                 \
    }                                                                                    \
  }
FUNCS(AVX_CHUNK)

/* The AVX-512 forms (vmath-avx512.h, shared with generated kernels). */
RGBC_AVX512_ALL

int rgbc_vmath_width(void) {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return 2;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* ------------------------------------------------------------------ whole arrays */

#define ARRAY(name, S, T)                                                                \
  void rgbc_v##name##_##S(const T *x, T *y, int64_t n) {                                 \
    int w = rgbc_vmath_width();                                                          \
    for (int64_t i = 0; i < n; i += CHUNK) {                                             \
      int m = n - i < CHUNK ? (int)(n - i) : CHUNK;                                      \
      if (w == 2) name##_##S##_avx512(x + i, y + i, m);                                  \
      else if (w) name##_##S##_avx(x + i, y + i, m);                                     \
      else name##_##S##_sse(x + i, y + i, m);                                            \
    }                                                                                    \
  }
#define ARRAYS(name) ARRAY(name, f32, float) ARRAY(name, f64, double)
FUNCS(ARRAYS)

/* sigmoid and softplus on one chunk (m <= CHUNK) at one width W: e =
 * exp(-|x|), then the form that neither overflows nor loses the tail.
 * The glue loops are compiled for the width of the vector calls they
 * follow (mixing SSE code with dirty AVX registers costs a stall per
 * instruction). */
#define SIG_CHUNK(S, T, W, ATTR) SIGMOID_CHUNK(S, T, W, ATTR) SOFTPLUS_CHUNK(S, T, W, ATTR)
#define SIGMOID_CHUNK(S, T, W, ATTR)                                                     \
  ATTR static void sigmoid_##S##_##W(const T *x, T *y, int m) {                          \
    T e[CHUNK];                                                                          \
    for (int j = 0; j < m; j++) e[j] = -RGBC_FN(S, fabs)(x[j]);                          \
    exp_##S##_##W(e, e, m);                                                              \
    RGBC_IVDEP for (int j = 0; j < m; j++) {                                   \
      T r = 1 / (1 + e[j]), q = e[j] * r; /* both computed: a select vectorises */        \
      y[j] = signbit(x[j]) ? q : r;       /* NaN in, NaN out: e is NaN then */           \
    }                                                                                    \
  }
#define SOFTPLUS_CHUNK(S, T, W, ATTR)                                                    \
  ATTR static void softplus_##S##_##W(const T *x, T *y, int m) {                         \
    T e[CHUNK];                                                                          \
    for (int j = 0; j < m; j++) e[j] = -RGBC_FN(S, fabs)(x[j]);                          \
    exp_##S##_##W(e, e, m);                                                              \
    log1p_##S##_##W(e, e, m);                                                            \
    RGBC_IVDEP for (int j = 0; j < m; j++) {                                   \
      T v = x[j], p = v > 0 ? v : 0; /* NaN in, NaN out: e is NaN then */                \
      y[j] = p + e[j];                                                                   \
    }                                                                                    \
  }
SIG_CHUNK(f32, float, sse, )
SIG_CHUNK(f64, double, sse, )
SIG_CHUNK(f32, float, avx, AVX2)
SIG_CHUNK(f64, double, avx, AVX2)



ARRAYS(sigmoid)
ARRAYS(softplus)
