/*
 * scalar-float.h — the float semantics of the elementwise ops, defined
 * once: elemwise.c instantiates its typed loops from these tables and
 * codegen.c writes the same expressions (and the same helper functions,
 * as text) into the kernels it generates for fused groups, so a generated
 * kernel and the interpreter compute the same bits.
 *
 * Each table entry is X(OPCODE, name, S, T, expression of x, y, z) for the
 * float suffix S (f32, f64) and type T; helper functions are suffixed
 * by S (s_floordiv_f32).  The CPU's transcendental functions are the
 * vector functions of vmath.c (RGBC_VMATH); their scalar forms, for the
 * CUDA generator, are RGBC_FLOAT_TRANSCENDENTAL.
 */
#ifndef RELGRAPH_CPU_SCALAR_FLOAT_H
#define RELGRAPH_CPU_SCALAR_FLOAT_H

/* Float floor division and remainder with Python's signs (NumPy's divmod):
 * the quotient is snapped to the nearest integer of (a - mod) / b. */
#define RGBC_FLOAT_HELPERS(S, T)                                                         \
  static inline T s_fdivmod_##S(T a, T b, T *mod) {                                      \
    T m = RGBC_FN(S, fmod)(a, b);                                                        \
    if (b == 0) {                                                                        \
      *mod = m;                                                                          \
      return a / b;                                                                      \
    }                                                                                    \
    T d = (a - m) / b;                                                                   \
    if (m != 0) {                                                                        \
      if ((b < 0) != (m < 0)) {                                                          \
        m += b;                                                                          \
        d -= 1;                                                                          \
      }                                                                                  \
    } else {                                                                             \
      m = RGBC_FN(S, copysign)((T)0, b);                                                 \
    }                                                                                    \
    T q;                                                                                 \
    if (d != 0) {                                                                        \
      q = RGBC_FN(S, floor)(d);                                                          \
      if (d - q > (T)0.5) q += 1;                                                        \
    } else {                                                                             \
      q = RGBC_FN(S, copysign)((T)0, a / b);                                             \
    }                                                                                    \
    *mod = m;                                                                            \
    return q;                                                                            \
  }                                                                                      \
  static inline T s_floordiv_##S(T a, T b) {                                             \
    T m;                                                                                 \
    return s_fdivmod_##S(a, b, &m);                                                      \
  }                                                                                      \
  static inline T s_remainder_##S(T a, T b) {                                            \
    T m;                                                                                 \
    s_fdivmod_##S(a, b, &m);                                                             \
    return m;                                                                            \
  }                                                                                      \
  static inline T s_sign_##S(T x) { return x > 0 ? 1 : x < 0 ? -1 : x == 0 ? 0 : x; }    \
  static inline T s_sigmoid_##S(T x) {                                                   \
    T e = RGBC_FN(S, exp)(-RGBC_FN(S, fabs)(x)), r = 1 / (1 + e), q = e * r;             \
    return signbit(x) ? q : r;                                                           \
  }                                                                                      \
  static inline T s_softplus_##S(T x) {                                                  \
    T e = RGBC_FN(S, log1p)(RGBC_FN(S, exp)(-RGBC_FN(S, fabs)(x)));                      \
    return (x > 0 ? x : 0) + e;                                                          \
  }                                                                                      \
  static inline T s_maxnan_##S(T x, T y) { return x > y || x != x ? x : y; }             \
  static inline T s_minnan_##S(T x, T y) { return x < y || x != x ? x : y; }

/* Binary ops over (x, y). */
#define RGBC_FLOAT_BINARY(X, S, T)                                                       \
  X(ADD, add, S, T, x + y)                                                               \
  X(SUB, sub, S, T, x - y)                                                               \
  X(MUL, mul, S, T, x * y)                                                               \
  X(TRUE_DIV, true_div, S, T, x / y)                                                     \
  X(INT_DIV, int_div, S, T, s_floordiv_##S(x, y))                                        \
  X(MOD, mod, S, T, s_remainder_##S(x, y))                                               \
  X(POW, pow, S, T, RGBC_FN(S, pow)(x, y))                                               \
  X(MAXIMUM, maximum, S, T, s_maxnan_##S(x, y))                                          \
  X(MINIMUM, minimum, S, T, s_minnan_##S(x, y))

/* Unary ops over x (the transcendental ones are vector functions). */
#define RGBC_FLOAT_UNARY(X, S, T)                                                        \
  X(NEG, neg, S, T, -x)                                                                  \
  X(ABS, abs, S, T, RGBC_FN(S, fabs)(x))                                                 \
  X(SQR, sqr, S, T, x * x)                                                               \
  X(SIGN, sign, S, T, s_sign_##S(x))                                                     \
  X(SQRT, sqrt, S, T, RGBC_FN(S, sqrt)(x))                                               \
  X(FLOOR, floor, S, T, RGBC_FN(S, floor)(x))                                            \
  X(CEIL, ceil, S, T, RGBC_FN(S, ceil)(x))                                               \
  X(ROUND, round, S, T, RGBC_FN(S, rint)(x))

/* The transcendental functions one element at a time.  The CPU computes
 * them with the vector functions of vmath.c, which use the same forms for
 * sigmoid and softplus (no overflow, no lost tail: e = exp(-|x|), then
 * 1 / (1 + e) or e / (1 + e), and max(x, 0) + log1p(e)); generated CUDA
 * kernels use these scalar forms with CUDA's own math library. */
#define RGBC_FLOAT_TRANSCENDENTAL(X, S, T)                                               \
  X(EXP, exp, S, T, RGBC_FN(S, exp)(x))                                                  \
  X(LOG, log, S, T, RGBC_FN(S, log)(x))                                                  \
  X(LOG1P, log1p, S, T, RGBC_FN(S, log1p)(x))                                            \
  X(EXPM1, expm1, S, T, RGBC_FN(S, expm1)(x))                                            \
  X(SIN, sin, S, T, RGBC_FN(S, sin)(x))                                                  \
  X(COS, cos, S, T, RGBC_FN(S, cos)(x))                                                  \
  X(TANH, tanh, S, T, RGBC_FN(S, tanh)(x))                                               \
  X(ERF, erf, S, T, RGBC_FN(S, erf)(x))                                                  \
  X(SIGMOID, sigmoid, S, T, s_sigmoid_##S(x))                                            \
  X(SOFTPLUS, softplus, S, T, s_softplus_##S(x))

/* Ternary ops over (x, y, z). */
#define RGBC_FLOAT_TERNARY(X, S, T) X(CLIP, clip, S, T, s_minnan_##S(s_maxnan_##S(x, y), z))

#endif
