/*
 * elemwise.c — the elementwise ops: one typed loop per (op, dtype),
 * generated from a scalar expression, and one kernel that broadcasts the
 * inputs, converts them to the dtype the loop computes in, and runs the
 * loop over a plan (iter.c).
 *
 * Dtypes.  The core types every node (core/elemwise.c); a loop computes in
 * the output dtype, except comparisons (which compute in the NEP 50
 * promotion of their inputs and write bool), switch (a bool condition),
 * cast (a conversion loop) and second (a copy of its value input).  An
 * input of another dtype is converted on the fly: a one-element input once
 * into a local scalar, any other in blocks of RGBC_BLOCK elements into a
 * scratch buffer on the stack, so no converted copy of a whole tensor is
 * ever made.
 *
 * Semantics (NumPy's, on x86-64):
 *   - integer arithmetic wraps modulo 2^bits (computed in unsigned types,
 *     so there is no undefined overflow);
 *   - int_div floors and mod takes the sign of the divisor (Python's
 *     rules); for integers x // 0 and x % 0 are 0 (NumPy gives 0 with a
 *     warning), and MIN // -1 wraps to MIN; for floats they follow NumPy's
 *     divmod: x // 0 is x / 0 (inf or nan) and x % 0 is nan;
 *   - pow of integers wraps; a negative integer exponent is a run-time
 *     error, as in NumPy;
 *   - maximum, minimum and clip propagate NaN; sign(nan) is nan, sign(-0.0)
 *     is 0; round is half to even (rint in the default rounding mode);
 *   - sigmoid and softplus are evaluated in forms that neither overflow nor
 *     lose the small tail: sigmoid(x) = e^x / (1 + e^x) for x < 0, and
 *     softplus(x) = x + log1p(e^-x) for x > 0;
 *   - exp, log, log1p, expm1, sin, cos, tanh, erf, sigmoid and softplus
 *     use glibc's vector functions (vmath.c: within 4 ULP, the same bits
 *     for an element wherever it sits);
 *   - bool add/maximum is logical or, mul/minimum logical and.
 *
 * In place.  When the node destroys input k (node->inplace), the output is
 * that input's tensor itself if its storage is unshared (count 1) and it has
 * the output's dtype and shape; elementwise loops read each element before
 * writing the same element, so the aliasing is safe.
 */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/scalar-float.h"
#include "backend/cpu/scalar-int.h"

#include <math.h>
#include <stdlib.h>

#define IVDEP RGBC_IVDEP

/* ------------------------------------------------------------------ scalar helpers */

/* Loops report inputs they cannot compute in their rgbc_status. */
static inline void flag_bad(void *aux, int code) {
  __atomic_store_n(&((rgbc_status *)aux)->bad, code, __ATOMIC_RELAXED);
}

RGBC_INT_HELPERS

static inline int64_t ipow64(int64_t base, int64_t e, void *aux) {
  if (e < 0) {
    flag_bad(aux, 1);
    return 0;
  }
  return s_ipow_i64(base, e);
}

/* (sigmoid and softplus come from vmath.c here: their scalar forms are for
 * the CUDA generator) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
RGBC_FLOAT_HELPERS(f32, float)
RGBC_FLOAT_HELPERS(f64, double)
#pragma GCC diagnostic pop

/* ------------------------------------------------------------------ loop generators */

/* A loop over operands (out, x): contiguous and strided branches. */
#define UN_LOOP(NAME, T, TO, EXPR)                                                       \
  RGBC_SIMD static void NAME(char **p, const int64_t *s, int64_t n, void *aux) {         \
    if (s[0] == sizeof(TO) && s[1] == sizeof(T)) {                                       \
      TO *o = (TO *)p[0];                                                                \
      const T *a = (const T *)p[1];                                                      \
      IVDEP for (int64_t i = 0; i < n; i++) {                                            \
        const T x = a[i];                                                                \
        o[i] = (EXPR);                                                                   \
      }                                                                                  \
    } else {                                                                             \
      char *po = p[0];                                                                   \
      const char *pa = p[1];                                                             \
      for (int64_t i = 0; i < n; i++, po += s[0], pa += s[1]) {                          \
        const T x = *(const T *)pa;                                                      \
        *(TO *)po = (EXPR);                                                              \
      }                                                                                  \
    }                                                                                    \
  }

/* (out, x, y): both contiguous, one a broadcast scalar, or strided. */
#define BIN_LOOP(NAME, T, TO, EXPR)                                                      \
  RGBC_SIMD static void NAME(char **p, const int64_t *s, int64_t n, void *aux) {         \
    TO *o = (TO *)p[0];                                                                  \
    const T *a = (const T *)p[1], *b = (const T *)p[2];                                  \
    if (s[0] == sizeof(TO) && s[1] == sizeof(T) && s[2] == sizeof(T)) {                  \
      IVDEP for (int64_t i = 0; i < n; i++) {                                            \
        const T x = a[i], y = b[i];                                                      \
        o[i] = (EXPR);                                                                   \
      }                                                                                  \
    } else if (s[0] == sizeof(TO) && s[1] == sizeof(T) && s[2] == 0) {                   \
      const T y = *b;                                                                    \
      IVDEP for (int64_t i = 0; i < n; i++) {                                            \
        const T x = a[i];                                                                \
        o[i] = (EXPR);                                                                   \
      }                                                                                  \
    } else if (s[0] == sizeof(TO) && s[1] == 0 && s[2] == sizeof(T)) {                   \
      const T x = *a;                                                                    \
      IVDEP for (int64_t i = 0; i < n; i++) {                                            \
        const T y = b[i];                                                                \
        o[i] = (EXPR);                                                                   \
      }                                                                                  \
    } else {                                                                             \
      char *po = p[0];                                                                   \
      const char *pa = p[1], *pb = p[2];                                                 \
      for (int64_t i = 0; i < n; i++, po += s[0], pa += s[1], pb += s[2]) {              \
        const T x = *(const T *)pa, y = *(const T *)pb;                                  \
        *(TO *)po = (EXPR);                                                              \
      }                                                                                  \
    }                                                                                    \
  }

/* (out, x, y, z) with x of type TX: all contiguous, x contiguous with y and
 * z broadcast scalars, or strided. */
#define TER_LOOP(NAME, TX, T, TO, EXPR)                                                  \
  RGBC_SIMD static void NAME(char **p, const int64_t *s, int64_t n, void *aux) {         \
    TO *o = (TO *)p[0];                                                                  \
    const TX *a = (const TX *)p[1];                                                      \
    const T *b = (const T *)p[2], *c = (const T *)p[3];                                  \
    if (s[0] == sizeof(TO) && s[1] == sizeof(TX) && s[2] == sizeof(T) &&                 \
        s[3] == sizeof(T)) {                                                             \
      IVDEP for (int64_t i = 0; i < n; i++) {                                            \
        const TX x = a[i];                                                               \
        const T y = b[i], z = c[i];                                                      \
        o[i] = (EXPR);                                                                   \
      }                                                                                  \
    } else if (s[0] == sizeof(TO) && s[1] == sizeof(TX) && s[2] == 0 && s[3] == 0) {     \
      const T y = *b, z = *c;                                                            \
      IVDEP for (int64_t i = 0; i < n; i++) {                                            \
        const TX x = a[i];                                                               \
        o[i] = (EXPR);                                                                   \
      }                                                                                  \
    } else {                                                                             \
      char *po = p[0];                                                                   \
      const char *pa = p[1], *pb = p[2], *pc = p[3];                                     \
      for (int64_t i = 0; i < n; i++, po += s[0], pa += s[1], pb += s[2], pc += s[3]) {  \
        const TX x = *(const TX *)pa;                                                    \
        const T y = *(const T *)pb, z = *(const T *)pc;                                  \
        *(TO *)po = (EXPR);                                                              \
      }                                                                                  \
    }                                                                                    \
  }

/* A transcendental function over (out, x): the vector version (vmath.c)
 * on contiguous operands, and on strided ones gathered into a contiguous
 * chunk, so every element gets the same function whatever its layout. */
#define VCHUNK 256
#define VUN_LOOP(NAME, T, VFN)                                                           \
  static void NAME(char **p, const int64_t *s, int64_t n, void *aux) {                   \
    (void)aux;                                                                           \
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {                                        \
      VFN((const T *)p[1], (T *)p[0], n);                                                \
      return;                                                                            \
    }                                                                                    \
    T buf[VCHUNK];                                                                       \
    char *po = p[0];                                                                     \
    const char *pa = p[1];                                                               \
    for (int64_t i = 0; i < n; i += VCHUNK) {                                            \
      int64_t m = n - i < VCHUNK ? n - i : VCHUNK;                                       \
      for (int64_t j = 0; j < m; j++, pa += s[1]) buf[j] = *(const T *)pa;               \
      VFN(buf, buf, m);                                                                  \
      for (int64_t j = 0; j < m; j++, po += s[0]) *(T *)po = buf[j];                     \
    }                                                                                    \
  }

/* ------------------------------------------------------------------ loops by dtype class */

/* Integers, bools, comparisons and switch: the expressions of
 * scalar-int.h; integer pow here (its negative exponents are flagged). */
#define DEF_IBIN(C, name, S, T, EXPR) BIN_LOOP(name##_##S, T, T, EXPR)
#define DEF_IUN(C, name, S, T, EXPR) UN_LOOP(name##_##S, T, T, EXPR)
#define DEF_ITER(C, name, S, T, EXPR) TER_LOOP(name##_##S, T, T, T, EXPR)
#define INT_LOOPS(S, T, D, UT)                                                           \
  RGBC_INT_BINARY(DEF_IBIN, S, T, UT)                                                    \
  RGBC_INT_UNARY(DEF_IUN, S, T, UT)                                                      \
  RGBC_INT_TERNARY(DEF_ITER, S, T, UT)                                                   \
  BIN_LOOP(pow_##S, T, T, (T)ipow64(x, y, aux))
RGBC_INTS(INT_LOOPS)
RGBC_SIGNED_UNARY(DEF_IUN, i8, int8_t, uint32_t)
RGBC_SIGNED_UNARY(DEF_IUN, i16, int16_t, uint32_t)
RGBC_SIGNED_UNARY(DEF_IUN, i32, int32_t, uint32_t)
RGBC_SIGNED_UNARY(DEF_IUN, i64, int64_t, uint64_t)
RGBC_UNSIGNED_UNARY(DEF_IUN, u8, uint8_t, uint32_t)

/* Floats: the arithmetic from scalar-float.h, the transcendental
 * functions from vmath.c. */
#define DEF_BIN(C, name, S, T, EXPR) BIN_LOOP(name##_##S, T, T, EXPR)
#define DEF_UN(C, name, S, T, EXPR) UN_LOOP(name##_##S, T, T, EXPR)
#define DEF_TER(C, name, S, T, EXPR) TER_LOOP(name##_##S, T, T, T, EXPR)
#define FLOAT_LOOPS(S, T, D, UT)                                                         \
  RGBC_FLOAT_BINARY(DEF_BIN, S, T)                                                       \
  RGBC_FLOAT_UNARY(DEF_UN, S, T)                                                         \
  RGBC_FLOAT_TERNARY(DEF_TER, S, T)                                                      \
  VUN_LOOP(exp_##S, T, rgbc_vexp_##S)                                                    \
  VUN_LOOP(log_##S, T, rgbc_vlog_##S)                                                    \
  VUN_LOOP(log1p_##S, T, rgbc_vlog1p_##S)                                                \
  VUN_LOOP(expm1_##S, T, rgbc_vexpm1_##S)                                                \
  VUN_LOOP(sin_##S, T, rgbc_vsin_##S)                                                    \
  VUN_LOOP(cos_##S, T, rgbc_vcos_##S)                                                    \
  VUN_LOOP(tanh_##S, T, rgbc_vtanh_##S)                                                  \
  VUN_LOOP(sigmoid_##S, T, rgbc_vsigmoid_##S)                                            \
  VUN_LOOP(softplus_##S, T, rgbc_vsoftplus_##S)                                          \
  VUN_LOOP(erf_##S, T, rgbc_verf_##S)
RGBC_FLOATS(FLOAT_LOOPS)

/* Three float operands of add and mul in one pass: the pairwise fold of
 * scalar-float.h's x + y and x * y, in the same order ((x op y) op z), so
 * the bits are those of two passes. */
#define FOLD3_LOOPS(S, T, D, UT)                                                         \
  TER_LOOP(add3_##S, T, T, T, (x + y) + z)                                               \
  TER_LOOP(mul3_##S, T, T, T, (x * y) * z)
RGBC_FLOATS(FOLD3_LOOPS)

/* Bool (0 or 1 in a byte). */
RGBC_BOOL_BINARY(DEF_IBIN, b, uint8_t)
RGBC_BOOL_UNARY(DEF_IUN, b, uint8_t)
RGBC_BOOL_TERNARY(DEF_ITER, b, uint8_t)

/* Comparisons and switch: every dtype. */
#define DEF_CMP(C, name, S, T, EXPR) BIN_LOOP(name##_##S, T, uint8_t, EXPR)
#define DEF_SEL(C, name, S, T, EXPR) TER_LOOP(name##_##S, uint8_t, T, T, EXPR)
#define ALL_LOOPS(S, T, D) RGBC_COMPARE(DEF_CMP, S, T) RGBC_SELECT(DEF_SEL, S, T)
RGBC_TYPES(ALL_LOOPS)

/* ------------------------------------------------------------------ the loop table */

#define E_ALL(name)                                                                      \
  {[RG_BOOL] = name##_b, [RG_INT8] = name##_i8, [RG_INT16] = name##_i16,                 \
   [RG_INT32] = name##_i32, [RG_INT64] = name##_i64, [RG_UINT8] = name##_u8,             \
   [RG_FLOAT32] = name##_f32, [RG_FLOAT64] = name##_f64}
#define E_NUM(name)                                                                      \
  {[RG_INT8] = name##_i8, [RG_INT16] = name##_i16, [RG_INT32] = name##_i32,              \
   [RG_INT64] = name##_i64, [RG_UINT8] = name##_u8, [RG_FLOAT32] = name##_f32,           \
   [RG_FLOAT64] = name##_f64}
#define E_BITS(name)                                                                     \
  {[RG_BOOL] = name##_b, [RG_INT8] = name##_i8, [RG_INT16] = name##_i16,                 \
   [RG_INT32] = name##_i32, [RG_INT64] = name##_i64, [RG_UINT8] = name##_u8}
#define E_SIGNED(name)                                                                   \
  {[RG_INT8] = name##_i8, [RG_INT16] = name##_i16, [RG_INT32] = name##_i32,              \
   [RG_INT64] = name##_i64, [RG_FLOAT32] = name##_f32, [RG_FLOAT64] = name##_f64}
#define E_FLOAT(name) {[RG_FLOAT32] = name##_f32, [RG_FLOAT64] = name##_f64}

/* loops[op][dtype the loop computes in]; NULL where the op is a copy for
 * that dtype (see is_copy) or not defined. */
static const rgbc_loop loops[RG_OP_COUNT][RG_NDTYPES] = {
    [RG_OP_ADD] = E_ALL(add),
    [RG_OP_MUL] = E_ALL(mul),
    [RG_OP_SUB] = E_NUM(sub),
    [RG_OP_TRUE_DIV] = E_FLOAT(true_div),
    [RG_OP_INT_DIV] = E_NUM(int_div),
    [RG_OP_MOD] = E_NUM(mod),
    [RG_OP_NEG] = E_NUM(neg),
    [RG_OP_ABS] = E_SIGNED(abs),
    [RG_OP_EXP] = E_FLOAT(exp),
    [RG_OP_LOG] = E_FLOAT(log),
    [RG_OP_LOG1P] = E_FLOAT(log1p),
    [RG_OP_EXPM1] = E_FLOAT(expm1),
    [RG_OP_SQRT] = E_FLOAT(sqrt),
    [RG_OP_SQR] = E_NUM(sqr),
    [RG_OP_POW] = E_NUM(pow),
    [RG_OP_SIN] = E_FLOAT(sin),
    [RG_OP_COS] = E_FLOAT(cos),
    [RG_OP_TANH] = E_FLOAT(tanh),
    [RG_OP_SIGMOID] = E_FLOAT(sigmoid),
    [RG_OP_SOFTPLUS] = E_FLOAT(softplus),
    [RG_OP_ERF] = E_FLOAT(erf),
    [RG_OP_MAXIMUM] = E_ALL(maximum),
    [RG_OP_MINIMUM] = E_ALL(minimum),
    [RG_OP_FLOOR] = E_FLOAT(floor),
    [RG_OP_CEIL] = E_FLOAT(ceil),
    [RG_OP_ROUND] = E_FLOAT(round),
    [RG_OP_SIGN] = E_NUM(sign),
    [RG_OP_CLIP] = E_ALL(clip),
    [RG_OP_LT] = E_ALL(lt),
    [RG_OP_GT] = E_ALL(gt),
    [RG_OP_LE] = E_ALL(le),
    [RG_OP_GE] = E_ALL(ge),
    [RG_OP_EQ] = E_ALL(eq),
    [RG_OP_NEQ] = E_ALL(neq),
    [RG_OP_AND] = E_BITS(and),
    [RG_OP_OR] = E_BITS(or),
    [RG_OP_XOR] = E_BITS(xor),
    [RG_OP_NOT] = E_BITS(not),
    [RG_OP_SWITCH] = E_ALL(switch),
};

/* Ops that are a plain copy (with conversion) of their last input for a
 * dtype: identity, cast, second, a one-input add or mul, and the
 * operations that leave integers and bools unchanged. */
static bool is_copy(const rgb_node *n, rg_dtype dt) {
  switch (n->code) {
  case RG_OP_IDENTITY: case RG_OP_CAST: case RG_OP_SECOND: return true;
  case RG_OP_ADD: case RG_OP_MUL: return n->nin == 1;
  case RG_OP_FLOOR: case RG_OP_CEIL: case RG_OP_ROUND: return !rg_dtype_is_float(dt);
  case RG_OP_ABS: return dt == RG_BOOL || dt == RG_UINT8;
  case RG_OP_SQR: return dt == RG_BOOL;
  default: return false;
  }
}

/* Ops whose loops cost tens of cycles per element (split finer among threads). */
static bool is_costly(rg_opcode code) {
  switch (code) {
  case RG_OP_INT_DIV: case RG_OP_MOD: case RG_OP_POW: case RG_OP_EXP: case RG_OP_LOG:
  case RG_OP_LOG1P: case RG_OP_EXPM1: case RG_OP_SIN: case RG_OP_COS: case RG_OP_TANH:
  case RG_OP_SIGMOID: case RG_OP_SOFTPLUS: case RG_OP_ERF:
    return true;
  default: return false;
  }
}

/* ------------------------------------------------------------------ dtypes */

/* The dtype a comparison (two inputs) computes in: rg_dtype_result of its
 * inputs, as the core typed it. */
static rg_dtype compare_dtype(const rgb_node *n) {
  rg_operand ops[2];
  for (int i = 0; i < n->nin; i++)
    ops[i] = (rg_operand){n->in[i].dtype, n->in[i].weak, n->in[i].known, n->in[i].value};
  return rg_dtype_result(n->nin, ops, true, NULL);
}

/* The dtype the loop reads input k in. */
static rg_dtype input_dtype(const rgb_node *n, int k, rg_dtype compute) {
  if (n->code == RG_OP_SWITCH && k == 0) return RG_BOOL;
  return compute;
}

/* ------------------------------------------------------------------ running loops */

#define RGBC_BLOCK 1024

/* A loop whose inputs are converted block by block before it runs. */
typedef struct buffered {
  rgbc_loop loop;
  void *aux;
  int nop;
  rgbc_loop cast[RGBC_MAXOPS]; /* NULL: operand used as it is */
  int64_t size[RGBC_MAXOPS];   /* element size after conversion */
} buffered;

static void buffered_loop(char **p, const int64_t *s, int64_t n, void *aux) {
  const buffered *b = aux;
  _Alignas(64) char scratch[RGBC_MAXOPS][RGBC_BLOCK * 8];
  char *q[RGBC_MAXOPS];
  int64_t qs[RGBC_MAXOPS];
  for (int64_t i0 = 0; i0 < n; i0 += RGBC_BLOCK) {
    int64_t m = n - i0 < RGBC_BLOCK ? n - i0 : RGBC_BLOCK;
    for (int k = 0; k < b->nop; k++) {
      q[k] = p[k] + i0 * s[k];
      qs[k] = s[k];
      if (!b->cast[k]) continue;
      char *cp[2] = {scratch[k], q[k]};
      int64_t cs[2] = {b->size[k], s[k]};
      b->cast[k](cp, cs, m, NULL);
      q[k] = scratch[k];
      qs[k] = b->size[k];
    }
    b->loop(q, qs, m, b->aux);
  }
}

/* One pass: out = loop(in[0..nin)) with inputs converted to cdt[k] where
 * their dtype differs; aux is the loop's (an rgbc_status or NULL). */
static void run_pass(rgb_exec *x, rg_tensor *out, rgbc_loop loop, void *aux, int nin,
                     const rg_tensor *const *in, const rg_dtype *cdt, int64_t grain) {
  int64_t st[RGBC_MAXOPS][RG_MAX_NDIM];
  const int64_t *stp[RGBC_MAXOPS] = {out->strides};
  char *base[RGBC_MAXOPS] = {out->data};
  rgbc_scalar sc[RGBC_MAXOPS];
  buffered b = {.loop = loop, .aux = aux, .nop = nin + 1};
  bool need_buffer = false;
  for (int k = 0; k < nin; k++) {
    const rg_tensor *t = in[k];
    int o = k + 1;
    rgbc_broadcast_strides(t, out->ndim, out->shape, st[o]);
    stp[o] = st[o];
    base[o] = t->data;
    b.cast[o] = NULL;
    if (t->dtype == cdt[k]) continue;
    if (rg_tensor_numel(t) == 1) {
      rgbc_cast_one(t->dtype, t->data, cdt[k], &sc[o]);
      base[o] = sc[o].bytes;
      memset(st[o], 0, sizeof st[o]);
    } else {
      b.cast[o] = rgbc_cast_loop(t->dtype, cdt[k]);
      b.size[o] = rgbc_size(cdt[k]);
      need_buffer = true;
    }
  }
  b.cast[0] = NULL;
  rgbc_plan pl;
  rgbc_plan_init(&pl, nin + 1, out->ndim, out->shape, base, stp, 0);
  if (need_buffer)
    rgbc_plan_run_parallel(x, &pl, buffered_loop, &b, grain);
  else
    rgbc_plan_run_parallel(x, &pl, loop, aux, grain);
}

/* The one-pass loop of three float operands of add or mul, or NULL. */
static rgbc_loop fold3_loop(rg_opcode op, rg_dtype dt) {
  if (dt == RG_FLOAT32) return op == RG_OP_ADD ? add3_f32 : op == RG_OP_MUL ? mul3_f32 : NULL;
  if (dt == RG_FLOAT64) return op == RG_OP_ADD ? add3_f64 : op == RG_OP_MUL ? mul3_f64 : NULL;
  return NULL;
}

/* add and mul of three or more inputs: out = in[a] op in[b], then
 * out = out op in[k] for the others (in[a] first when out is in[a]);
 * three float operands in one pass, in that order. */
static void run_nary(rgb_exec *x, rg_tensor *out, rgbc_loop loop, int nin,
                     const rg_tensor *const *in, rg_dtype dt, int first, int64_t grain) {
  rg_dtype cdt[3] = {dt, dt, dt};
  int second = first == 0 ? 1 : 0;
  rgbc_loop three = nin == 3 ? fold3_loop(x->node->code, dt) : NULL;
  if (three) {
    const rg_tensor *trio[3] = {in[first], in[second], in[3 - first - second]};
    run_pass(x, out, three, NULL, 3, trio, cdt, grain);
    return;
  }
  const rg_tensor *pair[2] = {in[first], in[second]};
  run_pass(x, out, loop, NULL, 2, pair, cdt, grain);
  for (int k = 0; k < nin; k++) {
    if (k == first || k == second) continue;
    const rg_tensor *two[2] = {out, in[k]};
    run_pass(x, out, loop, NULL, 2, two, cdt, grain);
  }
}

/* ------------------------------------------------------------------ outputs and loops */

static bool same_shape(const rg_tensor *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return false;
  return true;
}

/* The output: input k itself when the node works in place on it and may,
 * else a buffer from rgb_output.  *first is the input already in out. */
static rg_tensor *ew_output(rgb_exec *x, const rg_tensor *const *in, int ndim,
                            const int64_t *shape, int *first) {
  const rgb_node *n = x->node;
  rg_dtype dt = n->out[0].dtype;
  int k = n->inplace;
  *first = 0;
  if (k >= 0 && k < n->nin && in[k]->dtype == dt && same_shape(in[k], ndim, shape) &&
      rg_storage_refcount(in[k]) == 1) {
    rg_tensor *r = rg_tensor_ref(in[k]);
    if (!r) {
      rgb_error(x, RG_ERR_NOMEM, "out of memory");
      return NULL;
    }
    rgb_set_output(x, 0, r);
    *first = k;
    return r;
  }
  return rgb_output(x, 0, dt, ndim, shape);
}

const char *rgbc_ew_info_of(const rgb_node *n, rgbc_ew_info *info) {
  rg_dtype odt = n->out[0].dtype;
  bool compare = n->code >= RG_OP_LT && n->code <= RG_OP_NEQ;
  rg_dtype cdt = compare ? compare_dtype(n) : odt;
  memset(info, 0, sizeof *info);
  info->costly = is_costly(n->code);
  if (rg_opcode_family(n->code) != RG_FAM_ELEMWISE) return "not an elementwise op";
  if (is_copy(n, odt)) {
    info->copy = true;
    info->in[0] = n->in[n->nin - 1].dtype;
    info->loop = rgbc_cast_loop(info->in[0], odt);
    return NULL;
  }
  info->loop = loops[n->code][cdt];
  if (!info->loop) return "no loop for these dtypes";
  if (n->nin > 2 && (n->code == RG_OP_ADD || n->code == RG_OP_MUL)) {
    info->nary = true;
    info->in[0] = cdt;
    return NULL;
  }
  for (int k = 0; k < n->nin; k++) info->in[k] = input_dtype(n, k, cdt);
  return NULL;
}

int rgbc_status_error(rgb_exec *x, const rgbc_status *st) {
  if (st->bad == 1)
    return rgb_error(x, RG_ERR_EVAL, "integers to negative integer powers are not allowed");
  return RG_OK;
}

/* ------------------------------------------------------------------ the direct path */

/* Small operands (scalars, tiny vectors) are dispatch-bound: the kernel's
 * fixed cost is what a chain of them pays per node.  So the node's loop
 * and dtypes are derived once and kept in the node's memo, and operands
 * that need neither broadcasting nor a plan run as one loop call, read
 * straight from their cells: every input has its static rank and is
 * either rank 0 (read with stride 0) or C-contiguous with the shape of the
 * first input of non-zero rank, stretching no dimension its type declares
 * of size 1.  Anything else (and large operands a function's threads
 * share) takes the general path. */

typedef struct ew_memo {
  rgbc_ew_info info;
  bool ready;      /* info is filled */
  bool direct;     /* at most three inputs, not folded pairwise */
  bool fixed;      /* direct, and the static shapes settle the layout (below) */
  uint8_t convert; /* fixed: bit k set when input k (rank 0) is read in another dtype */
  uint8_t dt[RGBC_MAXOPS - 1];  /* fixed: the static dtype of each input */
  uint8_t esz[RGBC_MAXOPS - 1]; /* fixed: element size of input k if it has the
                                 * output's shape, 0 if it has rank 0 */
  int32_t numel;   /* fixed: elements of the output */
  uint8_t cached;  /* fixed: bit k set when input k is a converted constant whose
                    * converted value is in cval[k] (converted on the first call:
                    * a constant has the same value at every call) */
  _Alignas(8) unsigned char cval[RGBC_MAXOPS - 1][8];
} ew_memo;
_Static_assert(sizeof(ew_memo) <= sizeof(((rgb_node *)0)->memo), "the memo does not fit");

/* The fixed case: the output's static shape is fully known and too small
 * to be shared among threads, and each input is of rank 0 or of the
 * output's static shape, read in its own dtype unless of rank 0.  Scalar
 * code is the rank-0 instance.  Fills m's fields for it; false if n is
 * not such a node. */
static bool memo_fixed(const rgb_node *n, ew_memo *m) {
  const rgb_vtype *o = &n->out[0];
  int64_t numel = 1;
  for (int d = 0; d < o->ndim; d++) {
    if (o->shape[d] == RG_DIM_UNKNOWN) return false;
    numel *= o->shape[d];
  }
  if (numel >= 2 * RGBC_GRAIN_COSTLY || n->nin > RGBC_MAXOPS - 1) return false;
  int k0 = m->info.copy ? n->nin - 1 : 0;
  for (int k = 0; k < n->nin; k++) {
    const rgb_vtype *v = &n->in[k];
    bool other = k >= k0 && v->dtype != m->info.in[k - k0];
    m->dt[k] = (uint8_t)v->dtype;
    if (v->ndim == 0) {
      if (other) m->convert |= (uint8_t)(1u << k);
      continue;
    }
    if (other || v->ndim != o->ndim) return false;
    for (int d = 0; d < o->ndim; d++)
      if (v->shape[d] != o->shape[d]) return false;
    m->esz[k] = (uint8_t)rgbc_size(v->dtype);
  }
  m->numel = (int32_t)numel;
  return true;
}

/* Fills the memo of node n; returns NULL, or why the node has no loop
 * (then the memo stays unfilled). */
static const char *memo_fill(const rgb_node *n, ew_memo *m) {
  memset(m, 0, sizeof *m);
  const char *why = rgbc_ew_info_of(n, &m->info);
  if (why) return why;
  m->ready = true;
  m->direct = !m->info.nary && n->nin <= 3;
  m->fixed = m->direct && memo_fixed(n, m);
  memcpy((void *)(uintptr_t)n->memo, m, sizeof *m);
  return NULL;
}

/* Whether t is C-contiguous of the given rank and shape. */
static inline bool layout_is(const rg_tensor *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return false;
  int64_t stride = rgbc_size(t->dtype);
  for (int d = ndim - 1; d >= 0; d--) {
    if (t->shape[d] != shape[d] || (shape[d] != 1 && t->strides[d] != stride)) return false;
    stride *= shape[d];
  }
  return true;
}

/* Keeps constant input k's converted value in the node's memo: later
 * calls skip the conversion. */
static void cache_constant(const rgb_node *n, int k, const void *bytes) {
  ew_memo m;
  memcpy(&m, n->memo, sizeof m);
  memcpy(m.cval[k], bytes, sizeof m.cval[k]);
  m.cached |= (uint8_t)(1u << k);
  memcpy((void *)(uintptr_t)n->memo, &m, sizeof m);
}

/* The fixed case at run time: the values must have their static layout
 * (else false: the other paths take the node).  The output cell's
 * previous value is rewritten when nobody else holds it.  rank (the
 * output's rank, or -1 for any) is a constant in each copy that run_fixed
 * calls: scalar code gets a copy without loops over dimensions, vectors
 * one with the single dimension unrolled. */
static inline __attribute__((always_inline)) bool
fixed_n(rgb_exec *x, const ew_memo *m, int *rc, const int nin, const int rank) {
  const rgb_node *n = x->node;
  const int k0 = m->info.copy ? nin - 1 : 0, ndim = rank >= 0 ? rank : n->out[0].ndim;
  const int64_t *shape = n->out[0].shape;
  const rg_tensor *in[RGBC_MAXOPS];
  char *p[RGBC_MAXOPS + 1]; /* operands from p[k0]: the output, then inputs k0.. */
  int64_t s[RGBC_MAXOPS + 1];
  for (int k = 0; k < nin; k++) {
    const rg_tensor *t = in[k] = rgb_in(x, k);
    if (t->dtype != (rg_dtype)m->dt[k] || !layout_is(t, m->esz[k] ? ndim : 0, shape)) return false;
    p[k + 1] = t->data;
    s[k + 1] = m->esz[k];
  }
  rgbc_scalar sc[RGBC_MAXOPS];
  for (unsigned c = m->convert & ~m->cached; c; c &= c - 1) {
    int k = __builtin_ctz(c);
    rgbc_cast_one((rg_dtype)m->dt[k], p[k + 1], m->info.in[k - k0], &sc[k]);
    p[k + 1] = sc[k].bytes;
    if (n->in[k].constant) cache_constant(n, k, sc[k].bytes);
  }
  for (unsigned c = m->convert & m->cached; c; c &= c - 1) {
    int k = __builtin_ctz(c);
    p[k + 1] = (char *)m->cval[k];
  }
  rg_tensor *out = *x->outp[0];
  if (n->inplace >= 0 || !out || out->dtype != n->out[0].dtype || !layout_is(out, ndim, shape) ||
      rg_storage_refcount(out) != 1) {
    int first;
    out = ew_output(x, in, ndim, shape, &first);
    if (!out) return *rc = x->rt->errcode, true;
    if (m->info.copy && in[k0] == out) return *rc = RG_OK, true;
  }
  *rc = RG_OK;
  if (m->numel == 0) return true;
  p[k0] = out->data;
  s[k0] = ndim ? rgbc_size(out->dtype) : 0;
  rgbc_status st = {0};
  m->info.loop(p + k0, s + k0, m->numel, &st);
  if (st.bad) *rc = rgbc_status_error(x, &st);
  return true;
}

static bool run_fixed(rgb_exec *x, const ew_memo *m, int *rc) {
  switch (x->node->out[0].ndim) {
  case 0: return fixed_n(x, m, rc, x->node->nin, 0);
  case 1: return fixed_n(x, m, rc, x->node->nin, 1);
  default: return fixed_n(x, m, rc, x->node->nin, -1);
  }
}

/* Whether t (of static type vt) is C-contiguous with the given shape
 * (NULL: its own) and stretches no dimension vt declares of size 1. */
static bool direct_layout(const rg_tensor *t, const rgb_vtype *vt, const int64_t *shape) {
  int64_t stride = rgbc_size(t->dtype);
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t size = t->shape[d];
    if ((shape && size != shape[d]) || (vt->shape[d] == 1 && size != 1)) return false;
    if (size != 1 && t->strides[d] != stride) return false;
    stride *= size;
  }
  return true;
}

/* The output when the cell's previous value fits as it is (unshared,
 * C-contiguous of the dtype and shape), else ew_output's. */
static rg_tensor *direct_output(rgb_exec *x, const rg_tensor *const *in, int ndim,
                                const int64_t *shape) {
  const rgb_node *n = x->node;
  rg_tensor *t = *x->outp[0];
  if (n->inplace < 0 && t && t->ndim == ndim && t->dtype == n->out[0].dtype &&
      direct_layout(t, &n->out[0], shape) && rg_storage_refcount(t) == 1)
    return t;
  int first;
  return ew_output(x, in, ndim, shape, &first);
}

/* Runs the node as one loop call when its operands allow it (each of rank
 * 0, or of one common rank and shape): true when it did, with the status
 * in *rc; false leaves the node to the general path (broadcasting).
 * nin is a constant in each copy the kernel calls (see run_direct), so the
 * loop over inputs unrolls. */
static inline __attribute__((always_inline)) bool
direct_n(rgb_exec *x, const rgbc_ew_info *info, int *rc, const int nin) {
  const rgb_node *n = x->node;
  const int k0 = info->copy ? nin - 1 : 0;
  const rg_tensor *in[RGBC_MAXOPS], *ref = NULL;
  char *p[RGBC_MAXOPS + 1]; /* operands from p[k0]: the output, then inputs k0.. */
  int64_t s[RGBC_MAXOPS + 1];
  rgbc_scalar sc[RGBC_MAXOPS];
  for (int k = 0; k < nin; k++) {
    const rg_tensor *t = in[k] = rgb_in(x, k);
    if (t->ndim != n->in[k].ndim || (t->ndim && ref && t->ndim != ref->ndim)) return false;
    if (t->ndim && !direct_layout(t, &n->in[k], ref ? ref->shape : NULL)) return false;
    if (t->ndim && !ref) ref = t;
    if (k < k0) continue;
    rg_dtype want = info->in[k - k0];
    p[k + 1] = t->data;
    s[k + 1] = t->ndim ? rgbc_size(want) : 0;
    if (t->dtype == want) continue;
    if (t->ndim) return false; /* converted in blocks by the general path */
    rgbc_cast_one(t->dtype, t->data, want, &sc[k]);
    p[k + 1] = sc[k].bytes;
  }
  int ndim = ref ? ref->ndim : 0;
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= ref->shape[d];
  if (x->rt->nthreads > 1 && numel >= 2 * (info->costly ? RGBC_GRAIN_COSTLY : RGBC_GRAIN_CHEAP))
    return false;
  rg_tensor *out = direct_output(x, in, ndim, ref ? ref->shape : NULL);
  *rc = out ? RG_OK : x->rt->errcode;
  if (!out || numel == 0 || (info->copy && in[k0] == out)) return true;
  p[k0] = out->data;
  s[k0] = ndim ? rgbc_size(out->dtype) : 0;
  rgbc_status st = {0};
  info->loop(p + k0, s + k0, numel, &st);
  *rc = st.bad ? rgbc_status_error(x, &st) : RG_OK;
  return true;
}

static bool run_direct(rgb_exec *x, const rgbc_ew_info *info, int *rc) {
  switch (x->node->nin) {
  case 1: return direct_n(x, info, rc, 1);
  case 2: return direct_n(x, info, rc, 2);
  case 3: return direct_n(x, info, rc, 3);
  default: return false;
  }
}

/* ------------------------------------------------------------------ the kernel */

/* Broadcasting, conversions in blocks, pairwise folding, threads (kept out
 * of line: the direct paths stay small). */
__attribute__((noinline)) static int run_general(rgb_exec *x, const rg_tensor *const *in, const rgbc_ew_info *info) {
  const rgb_node *n = x->node;
  int nin = n->nin, ndim, first;
  int64_t shape[RG_MAX_NDIM];
  if (rgbc_broadcast_shape(x, nin, in, n->in, &ndim, shape) != RG_OK) return x->rt->errcode;
  rg_tensor *out = ew_output(x, in, ndim, shape, &first);
  if (!out) return x->rt->errcode;
  if (rg_tensor_numel(out) == 0) return RG_OK;
  int64_t grain = info->costly ? RGBC_GRAIN_COSTLY : RGBC_GRAIN_CHEAP;
  if (info->copy) {
    const rg_tensor *src = in[nin - 1];
    if (src == out) return RG_OK;
    rg_dtype sdt = src->dtype;
    run_pass(x, out, rgbc_cast_loop(sdt, out->dtype), NULL, 1, &src, &sdt, grain);
    return RG_OK;
  }
  if (info->nary) {
    run_nary(x, out, info->loop, nin, in, info->in[0], first, grain);
    return RG_OK;
  }
  rgbc_status st = {0};
  run_pass(x, out, info->loop, &st, nin, in, info->in, grain);
  return rgbc_status_error(x, &st);
}

void rgbc_binary(rgb_exec *x, rg_opcode op, rg_tensor *out, const rg_tensor *a,
                 const rg_tensor *b) {
  const rg_tensor *in[2] = {a, b};
  rg_dtype cdt[2] = {out->dtype, out->dtype};
  rgbc_loop loop = loops[op][out->dtype];
  if (rg_tensor_numel(out) && loop)
    run_pass(x, out, loop, NULL, 2, in, cdt, is_costly(op) ? RGBC_GRAIN_COSTLY : RGBC_GRAIN_CHEAP);
}

int rgb_cpu_elemwise(rgb_exec *x) {
  const rgb_node *n = x->node;
  ew_memo m;
  memcpy(&m, n->memo, sizeof m);
  const char *why = m.ready ? NULL : memo_fill(n, &m);
  if (why) return rgb_error(x, RG_ERR_TYPE, "%s (%s output)", why, rg_dtype_name(n->out[0].dtype));
  int rc;
  if (m.fixed && run_fixed(x, &m, &rc)) return rc;
  if (m.direct && run_direct(x, &m.info, &rc)) return rc;
  int nin = n->nin;
  const rg_tensor *small[8], **in = nin <= 8 ? small : malloc((size_t)nin * sizeof *in);
  if (!in) return rgb_error(x, RG_ERR_NOMEM, "out of memory");
  for (int k = 0; k < nin; k++) in[k] = rgb_in(x, k);
  rc = run_general(x, in, &m.info);
  if (in != small) free(in);
  return rc;
}
