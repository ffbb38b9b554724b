/*
 * vmath-avx512.h — the AVX-512 forms of the vector math, defined once:
 * vmath.c compiles them (chosen at run time where the CPU has AVX-512),
 * and codegen.c writes the same text into the kernels it generates on such
 * machines, so that a generated kernel calls glibc's vector functions
 * inline on its own small blocks and still computes vmath.c's bits (each
 * lane of a libmvec function depends on that lane's input only).
 *
 * The text needs <math.h>, <stdint.h> and <string.h> (not <immintrin.h>:
 * GCC's and clang's vector types are enough).  Every function reads its
 * input before writing its output, a vector at a time, the last one padded
 * with zeros (no scalar tail).
 */
#ifndef RELGRAPH_CPU_VMATH_AVX512_H
#define RELGRAPH_CPU_VMATH_AVX512_H

/* The functions glibc's libmvec provides that the ops use. */
#define RGBC_MVEC_FUNCS(X) X(exp) X(log) X(log1p) X(expm1) X(tanh) X(erf) X(sin) X(cos)

#define RGBC_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))

/* Vectors as GCC and clang define them (the types of __m512 and __m512d
 * without <immintrin.h>, whose parsing would double a generated kernel's
 * compile time). */
#define RGBC_AVX512_TYPES                                                                \
  typedef float rgbc_v16sf __attribute__((vector_size(64)));                             \
  typedef int rgbc_v16si __attribute__((vector_size(64)));                               \
  typedef double rgbc_v8df __attribute__((vector_size(64)));                             \
  typedef long long rgbc_v8di __attribute__((vector_size(64)));

#define RGBC_AVX512_DECL(name)                                                           \
  RGBC_AVX512 rgbc_v16sf _ZGVeN16v_##name##f(rgbc_v16sf);                                \
  RGBC_AVX512 rgbc_v8df _ZGVeN8v_##name(rgbc_v8df);

/* y[0..n) = f(x[0..n)) a vector at a time, the last one padded with
 * zeros; L lanes of vector type V, element type T. */
#define RGBC_AVX512_LOOP(T, V, L, ...)                                                   \
  int64_t i = 0;                                                                         \
  for (; i + L <= n; i += L) {                                                           \
    V v, w;                                                                              \
    memcpy(&v, x + i, sizeof v);                                                         \
    __VA_ARGS__;                                                                         \
    memcpy(y + i, &w, sizeof w);                                                         \
  }                                                                                      \
  if (i < n) {                                                                           \
    V v, w;                                                                              \
    T pad[L] = {0};                                                                      \
    memcpy(pad, x + i, (size_t)(n - i) * sizeof(T));                                     \
    memcpy(&v, pad, sizeof v);                                                           \
    __VA_ARGS__;                                                                         \
    memcpy(pad, &w, sizeof w);                                                           \
    memcpy(y + i, pad, (size_t)(n - i) * sizeof(T));                                     \
  }

#define RGBC_AVX512_CHUNK(name)                                                          \
  RGBC_AVX512 static inline void name##_f32_avx512(const float *x, float *y, int64_t n) { \
    RGBC_AVX512_LOOP(float, rgbc_v16sf, 16, w = _ZGVeN16v_##name##f(v))                  \
  }                                                                                      \
  RGBC_AVX512 static inline void name##_f64_avx512(const double *x, double *y, int64_t n) { \
    RGBC_AVX512_LOOP(double, rgbc_v8df, 8, w = _ZGVeN8v_##name(v))                       \
  }

/* sigmoid in registers: e = exp(-|x|), r = 1 / (1 + e), q = e * r, q
 * where x's sign bit is set (the form scalar-float.h's s_sigmoid defines:
 * no overflow, no lost tail; NaN in, NaN out).  I is the integer vector
 * of the same size, B the sign bit's position. */
#define RGBC_AVX512_SIGMOID(S, T, V, I, L, B, EXP)                                       \
  RGBC_AVX512 static inline void sigmoid_##S##_avx512(const T *x, T *y, int64_t n) {     \
    RGBC_AVX512_LOOP(T, V, L, {                                                          \
      I bits = (I)v, neg = bits >> B;                                                    \
      V a = (V)(bits & ~(((I){0} + 1) << B)), zero = {0};                                \
      V e = EXP(zero - a), r = 1 / (1 + e), q = e * r;                                   \
      w = (V)(((I)q & neg) | ((I)r & ~neg));                                             \
    })                                                                                   \
  }

/* softplus: max(x, 0) + log1p(exp(-|x|)), in blocks of 256. */
#define RGBC_AVX512_SOFTPLUS(S, T, ABS)                                                  \
  RGBC_AVX512 static inline void softplus_##S##_avx512(const T *x, T *y, int64_t n) {    \
    T e[256];                                                                            \
    for (int64_t b = 0; b < n; b += 256) {                                               \
      int64_t m = n - b < 256 ? n - b : 256;                                             \
      for (int64_t j = 0; j < m; j++) e[j] = -ABS(x[b + j]);                             \
      exp_##S##_avx512(e, e, m);                                                         \
      log1p_##S##_avx512(e, e, m);                                                       \
      for (int64_t j = 0; j < m; j++) {                                                  \
        T v = x[b + j], p = v > 0 ? v : 0;                                               \
        y[b + j] = p + e[j];                                                             \
      }                                                                                  \
    }                                                                                    \
  }

/* Everything, for float and double. */
#define RGBC_AVX512_ALL                                                                  \
  RGBC_AVX512_TYPES                                                                      \
  RGBC_MVEC_FUNCS(RGBC_AVX512_DECL)                                                      \
  RGBC_MVEC_FUNCS(RGBC_AVX512_CHUNK)                                                     \
  RGBC_AVX512_SIGMOID(f32, float, rgbc_v16sf, rgbc_v16si, 16, 31, _ZGVeN16v_expf)        \
  RGBC_AVX512_SIGMOID(f64, double, rgbc_v8df, rgbc_v8di, 8, 63, _ZGVeN8v_exp)            \
  RGBC_AVX512_SOFTPLUS(f32, float, fabsf)                                                \
  RGBC_AVX512_SOFTPLUS(f64, double, fabs)

#endif
