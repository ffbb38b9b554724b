/*
 * scalar-int.h — the integer, boolean, comparison and selection semantics
 * of the elementwise ops, defined once: elemwise.c instantiates its typed
 * loops from these tables, and the CUDA kernel generator (backend/cuda/
 * gen.c) writes the same expressions, and the same helper functions as
 * text, into the kernels it compiles.  scalar-float.h is the float half.
 *
 * Entries are X(OPCODE, name, S, T, expression of x, y, z) for the dtype
 * suffix S (i8 ... u8, b) and type T; integer tables also receive UT, an
 * unsigned type wide enough that arithmetic on it never overflows a C int:
 * wrapping arithmetic is done there and converted back (modulo, as GCC
 * and CUDA define the conversion).  Integer pow wraps (s_ipow_i64); its
 * negative exponents are a run-time error the CPU loop reports before
 * calling it, and give 0 in a CUDA kernel, which cannot report.
 */
#ifndef RELGRAPH_CPU_SCALAR_INT_H
#define RELGRAPH_CPU_SCALAR_INT_H

/* Floor division and remainder with Python's signs on int64 (the loops of
 * narrower types compute in int64 and truncate): x // 0 and x % 0 are 0
 * (NumPy gives 0 with a warning), MIN // -1 wraps to MIN. */
#define RGBC_INT_HELPERS                                                                 \
  static inline int64_t s_floordiv_i64(int64_t a, int64_t b) {                           \
    if (b == 0) return 0;                                                                \
    if (b == -1) return (int64_t)(0 - (uint64_t)a);                                      \
    int64_t q = a / b, r = a % b;                                                        \
    return r != 0 && ((r < 0) != (b < 0)) ? q - 1 : q;                                   \
  }                                                                                      \
  static inline int64_t s_mod_i64(int64_t a, int64_t b) {                                \
    if (b == 0 || b == -1) return 0;                                                     \
    int64_t r = a % b;                                                                   \
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;                                   \
  }                                                                                      \
  static inline int64_t s_ipow_i64(int64_t base, int64_t e) {                            \
    uint64_t r = 1, b = (uint64_t)base;                                                  \
    for (; e > 0; e >>= 1, b *= b)                                                       \
      if (e & 1) r *= b;                                                                 \
    return (int64_t)r;                                                                   \
  }

/* Integers (not bool). */
#define RGBC_INT_BINARY(X, S, T, UT)                                                     \
  X(ADD, add, S, T, (T)((UT)x + (UT)y))                                                  \
  X(SUB, sub, S, T, (T)((UT)x - (UT)y))                                                  \
  X(MUL, mul, S, T, (T)((UT)x * (UT)y))                                                  \
  X(INT_DIV, int_div, S, T, (T)s_floordiv_i64(x, y))                                     \
  X(MOD, mod, S, T, (T)s_mod_i64(x, y))                                                  \
  X(MAXIMUM, maximum, S, T, x > y ? x : y)                                               \
  X(MINIMUM, minimum, S, T, x < y ? x : y)                                               \
  X(AND, and, S, T, (T)(x & y))                                                          \
  X(OR, or, S, T, (T)(x | y))                                                            \
  X(XOR, xor, S, T, (T)(x ^ y))
#define RGBC_INT_UNARY(X, S, T, UT)                                                      \
  X(NEG, neg, S, T, (T)(0 - (UT)x))                                                      \
  X(SQR, sqr, S, T, (T)((UT)x * (UT)x))                                                  \
  X(NOT, not, S, T, (T)~x)
#define RGBC_INT_TERNARY(X, S, T, UT) X(CLIP, clip, S, T, x > y ? (x < z ? x : z) : (y < z ? y : z))
/* Signed integers only (abs of uint8 is a copy). */
#define RGBC_SIGNED_UNARY(X, S, T, UT)                                                   \
  X(ABS, abs, S, T, x < 0 ? (T)(0 - (UT)x) : x)                                          \
  X(SIGN, sign, S, T, (T)((x > 0) - (x < 0)))
#define RGBC_UNSIGNED_UNARY(X, S, T, UT) X(SIGN, sign, S, T, (T)(x > 0))

/* Bool: 0 or 1 in a byte; add and maximum are or, mul and minimum and. */
#define RGBC_BOOL_BINARY(X, S, T)                                                        \
  X(ADD, add, S, T, x | y)                                                               \
  X(MUL, mul, S, T, x & y)                                                               \
  X(MAXIMUM, maximum, S, T, x | y)                                                       \
  X(MINIMUM, minimum, S, T, x & y)                                                       \
  X(AND, and, S, T, x & y)                                                               \
  X(OR, or, S, T, x | y)                                                                 \
  X(XOR, xor, S, T, x ^ y)
#define RGBC_BOOL_UNARY(X, S, T) X(NOT, not, S, T, (T)(x ^ 1))
#define RGBC_BOOL_TERNARY(X, S, T) X(CLIP, clip, S, T, (x | y) & z)

/* Every dtype: comparisons (bool results) and switch (a bool condition). */
#define RGBC_COMPARE(X, S, T)                                                            \
  X(LT, lt, S, T, x < y)                                                                 \
  X(GT, gt, S, T, x > y)                                                                 \
  X(LE, le, S, T, x <= y)                                                                \
  X(GE, ge, S, T, x >= y)                                                                \
  X(EQ, eq, S, T, x == y)                                                                \
  X(NEQ, neq, S, T, x != y)
#define RGBC_SELECT(X, S, T) X(SWITCH, switch, S, T, x ? y : z)

#endif
