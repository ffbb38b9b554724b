/*
 * cast.c — dtype conversion loops (one per pair of dtypes, generated),
 * broadcasting assignment, contiguous copies, and the output of ops that
 * write into a copy of an input (in place when allowed).
 *
 * Conversions are C conversions, which is what NumPy does, with the cases
 * C leaves undefined defined the way NumPy behaves on x86-64:
 *   - to bool: non-zero is true (NaN is true);
 *   - between integers: wrap modulo 2^bits;
 *   - float to int64: truncation toward zero; NaN and values outside
 *     [-2^63, 2^63) give INT64_MIN;
 *   - float to int32, int16, int8, uint8: truncation toward zero through
 *     int32, where NaN and values outside int32 give INT32_MIN, then wrap to
 *     the target width (so 300.0 -> int8 is 44, -1.0 -> uint8 is 255);
 *   - float64 to float32: rounding to nearest, overflow to infinity.
 */
#include "backend/cpu/cpu-impl.h"

/* ------------------------------------------------------------------ element conversions */

static inline int64_t f2i64(double v) {
  return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}
static inline int32_t f2i32(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}

/* Conversion of value v of suffix FS to type T of suffix TS. */
#define CONV(FS, TS, T, v) CONV_##TS(FS, T, v)
#define CONV_b(FS, T, v) ((uint8_t)((v) != 0))
#define CONV_i8(FS, T, v) CONV_INT_##FS(T, v)
#define CONV_i16(FS, T, v) CONV_INT_##FS(T, v)
#define CONV_i32(FS, T, v) CONV_INT_##FS(T, v)
#define CONV_u8(FS, T, v) CONV_INT_##FS(T, v)
#define CONV_i64(FS, T, v) CONV_I64_##FS(v)
#define CONV_f32(FS, T, v) ((float)(v))
#define CONV_f64(FS, T, v) ((double)(v))
/* to a narrow integer type from each source */
#define CONV_INT_b(T, v) ((T)(v))
#define CONV_INT_i8(T, v) ((T)(v))
#define CONV_INT_i16(T, v) ((T)(v))
#define CONV_INT_i32(T, v) ((T)(v))
#define CONV_INT_i64(T, v) ((T)(v))
#define CONV_INT_u8(T, v) ((T)(v))
#define CONV_INT_f32(T, v) ((T)f2i32(v))
#define CONV_INT_f64(T, v) ((T)f2i32(v))
/* to int64 from each source */
#define CONV_I64_b(v) ((int64_t)(v))
#define CONV_I64_i8(v) ((int64_t)(v))
#define CONV_I64_i16(v) ((int64_t)(v))
#define CONV_I64_i32(v) ((int64_t)(v))
#define CONV_I64_i64(v) ((int64_t)(v))
#define CONV_I64_u8(v) ((int64_t)(v))
#define CONV_I64_f32(v) f2i64(v)
#define CONV_I64_f64(v) f2i64(v)

/* ------------------------------------------------------------------ loops */

#define CAST_LOOP(FS, FT, TS, TT)                                                        \
  RGBC_SIMD static __attribute__((unused)) void cast_##FS##_##TS(char **p, const int64_t *s, \
                                                        int64_t n, void *aux) {          \
    if (s[0] == sizeof(TT) && s[1] == sizeof(FT)) {                                      \
      TT *restrict o = (TT *)p[0];                                                       \
      const FT *restrict a = (const FT *)p[1];                                           \
      for (int64_t i = 0; i < n; i++) o[i] = CONV(FS, TS, TT, a[i]);                     \
    } else if (s[0] == sizeof(TT) && s[1] == 0) {                                        \
      TT *restrict o = (TT *)p[0];                                                       \
      const TT v = CONV(FS, TS, TT, *(const FT *)p[1]);                                  \
      for (int64_t i = 0; i < n; i++) o[i] = v;                                          \
    } else {                                                                             \
      char *o = p[0];                                                                    \
      const char *a = p[1];                                                              \
      for (int64_t i = 0; i < n; i++, o += s[0], a += s[1])                              \
        *(TT *)o = CONV(FS, TS, TT, *(const FT *)a);                                     \
    }                                                                                    \
  }

/* Copies between equal dtypes: memcpy when both sides are contiguous. */
#define COPY_LOOP(S, T)                                                                  \
  RGBC_SIMD static void copy_##S(char **p, const int64_t *s, int64_t n, void *aux) {     \
    if (p[0] == p[1] && s[0] == s[1]) return;                                            \
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {                                        \
      memcpy(p[0], p[1], (size_t)n * sizeof(T));                                         \
    } else if (s[0] == sizeof(T) && s[1] == 0) {                                         \
      T *restrict o = (T *)p[0];                                                         \
      const T v = *(const T *)p[1];                                                      \
      for (int64_t i = 0; i < n; i++) o[i] = v;                                          \
    } else {                                                                             \
      char *o = p[0];                                                                    \
      const char *a = p[1];                                                              \
      for (int64_t i = 0; i < n; i++, o += s[0], a += s[1]) *(T *)o = *(const T *)a;     \
    }                                                                                    \
  }

/* Every ordered pair of dtypes (the diagonal is unused: copies take it). */
#define DEF_PAIRS(FS, FT, FD)                                                            \
  CAST_LOOP(FS, FT, b, uint8_t) CAST_LOOP(FS, FT, i8, int8_t)                            \
  CAST_LOOP(FS, FT, i16, int16_t) CAST_LOOP(FS, FT, i32, int32_t)                        \
  CAST_LOOP(FS, FT, i64, int64_t) CAST_LOOP(FS, FT, u8, uint8_t)                         \
  CAST_LOOP(FS, FT, f32, float) CAST_LOOP(FS, FT, f64, double)
RGBC_TYPES(DEF_PAIRS)
#define DEF_COPY(S, T, D) COPY_LOOP(S, T)
RGBC_TYPES(DEF_COPY)

/* The table: cast_loops[from][to]. */
#define TABLE_ROW(FS, FT, FD)                                                            \
  [FD] = {[RG_BOOL] = cast_##FS##_b, [RG_INT8] = cast_##FS##_i8,                         \
          [RG_INT16] = cast_##FS##_i16, [RG_INT32] = cast_##FS##_i32,                    \
          [RG_INT64] = cast_##FS##_i64, [RG_UINT8] = cast_##FS##_u8,                     \
          [RG_FLOAT32] = cast_##FS##_f32, [RG_FLOAT64] = cast_##FS##_f64},
static const rgbc_loop cast_loops[RG_NDTYPES][RG_NDTYPES] = {RGBC_TYPES(TABLE_ROW)};
#define COPY_ENTRY(S, T, D) [D] = copy_##S,
static const rgbc_loop copy_loops[RG_NDTYPES] = {RGBC_TYPES(COPY_ENTRY)};

rgbc_loop rgbc_cast_loop(rg_dtype from, rg_dtype to) {
  return from == to ? copy_loops[from] : cast_loops[from][to];
}

/* One element: a plain function per pair (no loop, no stride tests), as
 * scalar code converts one operand per node. */
typedef void (*cast_one_fn)(void *dst, const void *src);
#define ONE_FN(FS, FT, TS, TT)                                                           \
  static void one_##FS##_##TS(void *dst, const void *src) {                              \
    FT v;                                                                                \
    memcpy(&v, src, sizeof v);                                                           \
    TT r = CONV(FS, TS, TT, v);                                                          \
    memcpy(dst, &r, sizeof r);                                                           \
  }
#define DEF_ONE(FS, FT, FD)                                                              \
  ONE_FN(FS, FT, b, uint8_t) ONE_FN(FS, FT, i8, int8_t) ONE_FN(FS, FT, i16, int16_t)     \
  ONE_FN(FS, FT, i32, int32_t) ONE_FN(FS, FT, i64, int64_t) ONE_FN(FS, FT, u8, uint8_t)  \
  ONE_FN(FS, FT, f32, float) ONE_FN(FS, FT, f64, double)
RGBC_TYPES(DEF_ONE)
#define ONE_ROW(FS, FT, FD)                                                              \
  [FD] = {[RG_BOOL] = one_##FS##_b, [RG_INT8] = one_##FS##_i8,                           \
          [RG_INT16] = one_##FS##_i16, [RG_INT32] = one_##FS##_i32,                      \
          [RG_INT64] = one_##FS##_i64, [RG_UINT8] = one_##FS##_u8,                       \
          [RG_FLOAT32] = one_##FS##_f32, [RG_FLOAT64] = one_##FS##_f64},
static const cast_one_fn one_fns[RG_NDTYPES][RG_NDTYPES] = {RGBC_TYPES(ONE_ROW)};

void rgbc_cast_one(rg_dtype from, const void *src, rg_dtype to, void *dst) {
  one_fns[from][to](dst, src);
}

/* ------------------------------------------------------------------ assignment and copies */

int rgbc_assign(rgb_exec *x, rg_tensor *dst, const rg_tensor *src, const rgb_vtype *vt) {
  if (!rgbc_fits(src, vt, dst->ndim, dst->shape))
    return rgb_error(x, RG_ERR_TYPE, "a value of %d dimensions does not fit the shape of its "
                     "destination", src->ndim);
  int64_t bst[RG_MAX_NDIM];
  rgbc_broadcast_strides(src, dst->ndim, dst->shape, bst);
  const int64_t *st[2] = {dst->strides, bst};
  char *base[2] = {dst->data, src->data};
  rgbc_plan pl;
  rgbc_plan_init(&pl, 2, dst->ndim, dst->shape, base, st, 0);
  rgbc_plan_run_parallel(x, &pl, rgbc_cast_loop(src->dtype, dst->dtype), NULL, RGBC_GRAIN_CHEAP);
  return RG_OK;
}

rg_tensor *rgbc_contiguous(rgb_exec *x, const rg_tensor *src, rg_dtype dt) {
  if (src->dtype == dt && rg_tensor_is_c_contiguous(src)) return rg_tensor_ref(src);
  rg_tensor *t = rg_tensor_empty(dt, src->ndim, src->shape);
  if (!t) {
    rgb_error(x, RG_ERR_NOMEM, "out of memory for a copy of %lld elements",
              (long long)rg_tensor_numel(src));
    return NULL;
  }
  rgbc_assign(x, t, src, NULL);
  return t;
}

static bool same_shape(const rg_tensor *a, int ndim, const int64_t *shape) {
  if (a->ndim != ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (a->shape[d] != shape[d]) return false;
  return true;
}

rg_tensor *rgbc_output_like_input(rgb_exec *x, int j, int k, bool allow, bool *in_place) {
  return rgbc_output_like_input_with(x, j, k, allow, in_place, NULL);
}

rg_tensor *rgbc_output_like_input_with(rgb_exec *x, int j, int k, bool allow, bool *in_place, rgbc_copy_fn copy) {
  rg_tensor *in = rgb_in(x, k);
  rg_dtype dt = x->node->out[j].dtype;
  *in_place = false;
  if (allow && x->node->inplace == k && in->dtype == dt && rg_storage_refcount(in) == 1 &&
      same_shape(in, x->node->out[j].ndim, in->shape)) {
    rg_tensor *r = rg_tensor_ref(in);
    if (!r) {
      rgb_error(x, RG_ERR_NOMEM, "out of memory");
      return NULL;
    }
    rgb_set_output(x, j, r);
    *in_place = true;
    return r;
  }
  rg_tensor *out = rgb_output(x, j, dt, in->ndim, in->shape);
  if (out && (copy ? copy(x, out, in) : rgbc_assign(x, out, in, NULL)) != RG_OK) return NULL;
  return out;
}

int64_t rgbc_scalar_i64(const rg_tensor *t) {
  rgbc_scalar v;
  rgbc_cast_one(t->dtype, t->data, RG_INT64, &v);
  return v.i64;
}

double rgbc_scalar_f64(const rg_tensor *t) {
  rgbc_scalar v;
  rgbc_cast_one(t->dtype, t->data, RG_FLOAT64, &v);
  return v.f64;
}
