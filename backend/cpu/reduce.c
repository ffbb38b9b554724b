/*
 * reduce.c — reductions over any set of axes: sum, prod, max, min, mean,
 * argmax, argmin, all, any.
 *
 * Plan.  The input's dimensions are split into kept ones (the output's,
 * in order) and reduced ones.  Each dimension gets three strides: the
 * input's (bytes), the accumulator's (elements, 0 on reduced dimensions)
 * and, for argmax/argmin, the flat index's within the reduced sub-array
 * (C order of the reduced axes, 0 on kept dimensions).  Dimensions are
 * ordered by the input's memory order and merged where all three strides
 * allow, so the innermost dimension is the contiguous one when there is
 * one.  Then:
 *   - if the innermost dimension is reduced, each row is reduced to one
 *     value with several independent accumulators (vectorised), and
 *     combined into its output element;
 *   - if it is kept, each row is accumulated elementwise into a row of
 *     accumulators (acc[j] += x[j]): a reduction over the leading axis of a
 *     matrix reads the matrix row by row, never by strided columns.
 *
 * Accumulators.  Sums and products of bool and integers accumulate in
 * int64 (wrapping), means of them in float64, all/any in bool, max/min
 * and argmax/argmin in the input dtype.  Float sums of a row are summed in
 * blocks of RED_BLOCK elements over 16 lanes of the input's float type;
 * block totals are added in float64 with Neumaier's compensation, so a
 * float32 sum of 10^7 elements is as accurate as NumPy's pairwise sum or
 * more.  When rows are accumulated into rows (the innermost dimension
 * kept), float32 sums accumulate 64 rows at a time in float32, then in
 * float64 (sum_rows_f32) for the common case of one reduced and one kept
 * dimension (any reduction over leading axes of a contiguous tensor), and
 * in float32 otherwise, as NumPy does.
 *
 * NumPy's conventions: an empty sum is 0, an empty product 1, the mean of
 * nothing is NaN, all() of nothing is true and any() false; max, min,
 * argmax and argmin of an empty reduction (with a non-empty output) are an
 * error.  max/min propagate NaN; argmax/argmin return the first index of
 * the extreme value, and the first NaN when there is one.
 *
 * Threads.  A kept dimension large enough is split among threads (each
 * owns its outputs); otherwise the largest reduced dimension is, each part
 * into its own accumulators, combined in part order afterwards (the result
 * depends on the thread count only through rounding of float sums).
 */
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>

#define RED_BLOCK 256
#define LANES 16

/* ------------------------------------------------------------------ typed loops */

/* row: *acc = comb(*acc, reduction of n elements st bytes apart).
 * accrow: acc[j] = comb(acc[j], x[j]) for n elements (acc ast bytes apart).
 * argrow / argacc: the same for argmax/argmin, tracking flat indices. */
typedef void (*row_fn)(const char *in, int64_t n, int64_t st, char *acc);
typedef void (*accrow_fn)(char *acc, int64_t ast, const char *in, int64_t n, int64_t st);
typedef void (*argrow_fn)(const char *in, int64_t n, int64_t st, char *val, int64_t *idx,
                          int64_t f0, int64_t fst);
typedef void (*argacc_fn)(char *val, int64_t *idx, int64_t ast, const char *in, int64_t n,
                          int64_t st, int64_t flat);

#define COMB_ADD(a, b) ((a) + (b))
#define COMB_IADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define COMB_MUL(a, b) ((a) * (b))
#define COMB_IMUL(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
#define COMB_MAX(a, b) ((b) > (a) || (b) != (b) ? (b) : (a))
#define COMB_MIN(a, b) ((b) < (a) || (b) != (b) ? (b) : (a))
#define COMB_AND(a, b) ((a) & (b))
#define COMB_OR(a, b) ((a) | (b))

/* A row reduced with LANES independent accumulators. */
#define ROW_LANES(NAME, TI, TA, INIT, COMB, CV)                                          \
  RGBC_SIMD static void NAME(const char *in, int64_t n, int64_t st, char *accp) {        \
    TA r = INIT;                                                                         \
    if (st == sizeof(TI)) {                                                              \
      const TI *a = (const TI *)in;                                                      \
      TA lane[LANES];                                                                    \
      for (int j = 0; j < LANES; j++) lane[j] = INIT;                                    \
      int64_t i = 0;                                                                     \
      for (; i + LANES <= n; i += LANES)                                                 \
        for (int j = 0; j < LANES; j++) lane[j] = COMB(lane[j], CV(a[i + j]));           \
      for (; i < n; i++) lane[0] = COMB(lane[0], CV(a[i]));                              \
      for (int w = LANES / 2; w; w >>= 1)                                                \
        for (int j = 0; j < w; j++) lane[j] = COMB(lane[j], lane[j + w]);                \
      r = lane[0];                                                                       \
    } else {                                                                             \
      for (int64_t i = 0; i < n; i++, in += st) r = COMB(r, CV(*(const TI *)in));        \
    }                                                                                    \
    *(TA *)accp = COMB(*(TA *)accp, r);                                                  \
  }

/* A float row summed in blocks (lanes of TL), block totals compensated in
 * double: TA is the accumulator's type (float or double). */
#define ROW_FSUM(NAME, TI, TL, TA)                                                       \
  RGBC_SIMD static void NAME(const char *in, int64_t n, int64_t st, char *accp) {        \
    double s = 0, c = 0;                                                                 \
    if (n <= LANES) { /* short rows: plainly, in double */                               \
      for (int64_t i = 0; i < n; i++) s += (double)*(const TI *)(in + i * st);           \
      *(TA *)accp = (TA)((double)*(TA *)accp + s);                                       \
      return;                                                                            \
    }                                                                                    \
    for (int64_t i0 = 0; i0 < n; i0 += RED_BLOCK) {                                      \
      int64_t m = n - i0 < RED_BLOCK ? n - i0 : RED_BLOCK;                               \
      const char *p = in + i0 * st;                                                      \
      TL lane[LANES] = {0};                                                              \
      if (st == sizeof(TI)) {                                                            \
        const TI *a = (const TI *)p;                                                     \
        int64_t i = 0;                                                                   \
        for (; i + LANES <= m; i += LANES)                                               \
          for (int j = 0; j < LANES; j++) lane[j] += (TL)a[i + j];                       \
        for (; i < m; i++) lane[0] += (TL)a[i];                                          \
      } else {                                                                           \
        for (int64_t i = 0; i < m; i++, p += st) lane[i % LANES] += (TL) * (const TI *)p; \
      }                                                                                  \
      for (int w = LANES / 2; w; w >>= 1)                                                \
        for (int j = 0; j < w; j++) lane[j] += lane[j + w];                              \
      double b = (double)lane[0], t = s + b;                                             \
      c += fabs(s) >= fabs(b) ? (s - t) + b : (b - t) + s;                               \
      s = t;                                                                             \
    }                                                                                    \
    /* an infinite total (an inf read, or overflow) made c NaN (inf - inf) */            \
    *(TA *)accp = (TA)((double)*(TA *)accp + (isfinite(s) ? s + c : s));                 \
  }

/* acc[j] = comb(acc[j], x[j]). */
#define ACCROW(NAME, TI, TA, COMB, CV)                                                   \
  RGBC_SIMD static void NAME(char *acc, int64_t ast, const char *in, int64_t n, int64_t st) { \
    if (ast == sizeof(TA) && st == sizeof(TI)) {                                         \
      TA *restrict o = (TA *)acc;                                                        \
      const TI *restrict a = (const TI *)in;                                             \
      for (int64_t i = 0; i < n; i++) o[i] = COMB(o[i], CV(a[i]));                       \
    } else {                                                                             \
      for (int64_t i = 0; i < n; i++, acc += ast, in += st)                              \
        *(TA *)acc = COMB(*(TA *)acc, CV(*(const TI *)in));                              \
    }                                                                                    \
  }

/* Whether (v, i) replaces (a, ai) as the running argmax (GT) / argmin (LT):
 * a better value, an equal one earlier, or the first NaN. */
#define TAKE(CMP, v, i, a, ai)                                                           \
  ((ai) < 0 || CMP(v, a) || ((v) == (a) && (i) < (ai)) ||                                \
   ((v) != (v) && ((a) == (a) || (i) < (ai))))
#define CMP_GT(x, y) ((x) > (y))
#define CMP_LT(x, y) ((x) < (y))

#define ARG_LOOPS(ROWNAME, ACCNAME, T, CMP, COMB)                                        \
  RGBC_SIMD static void ROWNAME(const char *in, int64_t n, int64_t st, char *valp, int64_t *idxp, \
                         int64_t f0, int64_t fst) {                                      \
    int64_t bi = 0;                                                                      \
    T bv;                                                                                \
    if (st == sizeof(T)) {                                                               \
      const T *a = (const T *)in;                                                        \
      T lane[LANES];                                                                     \
      for (int j = 0; j < LANES; j++) lane[j] = a[0];                                    \
      int64_t i = 0;                                                                     \
      for (; i + LANES <= n; i += LANES)                                                 \
        for (int j = 0; j < LANES; j++) lane[j] = COMB(lane[j], a[i + j]);               \
      for (; i < n; i++) lane[0] = COMB(lane[0], a[i]);                                  \
      for (int w = LANES / 2; w; w >>= 1)                                                \
        for (int j = 0; j < w; j++) lane[j] = COMB(lane[j], lane[j + w]);                \
      bv = lane[0];                                                                      \
      if (bv == bv) {                                                                    \
        while (a[bi] != bv) bi++;                                                        \
      } else {                                                                           \
        while (a[bi] == a[bi]) bi++;                                                     \
      }                                                                                  \
    } else {                                                                             \
      bv = *(const T *)in;                                                               \
      for (int64_t i = 1; i < n; i++) {                                                  \
        T v = *(const T *)(in + i * st);                                                 \
        if (TAKE(CMP, v, i, bv, bi)) bv = v, bi = i;                                     \
      }                                                                                  \
    }                                                                                    \
    int64_t fi = f0 + bi * fst;                                                          \
    if (TAKE(CMP, bv, fi, *(T *)valp, *idxp)) *(T *)valp = bv, *idxp = fi;               \
  }                                                                                      \
  static void ACCNAME(char *val, int64_t *idx, int64_t ast, const char *in, int64_t n,   \
                         int64_t st, int64_t flat) {                                     \
    T *vals = (T *)val;                                                                  \
    for (int64_t j = 0; j < n; j++, in += st) {                                          \
      T v = *(const T *)in;                                                              \
      if (TAKE(CMP, v, flat, vals[j * ast], idx[j * ast]))                               \
        vals[j * ast] = v, idx[j * ast] = flat;                                          \
    }                                                                                    \
  }

#define CV_ID(v) (v)
#define CV_I64(v) ((int64_t)(v))
#define CV_F64(v) ((double)(v))
#define CV_TRUTH(v) ((uint8_t)((v) != 0))

/* sums (and means): every input into int64 (integers) or double; float32
 * also into float32 */
#define SUM_LOOPS(S, T, D)                                                               \
  ROW_LANES(sum_row_##S##_i64, T, int64_t, 0, COMB_IADD, CV_I64)                         \
  ACCROW(sum_acc_##S##_i64, T, int64_t, COMB_IADD, CV_I64)                               \
  ROW_LANES(sum_row_##S##_f64, T, double, 0, COMB_ADD, CV_F64)                           \
  ACCROW(sum_acc_##S##_f64, T, double, COMB_ADD, CV_F64)                                 \
  ROW_LANES(prod_row_##S, T, int64_t, 1, COMB_IMUL, CV_I64)                              \
  ACCROW(prod_acc_##S, T, int64_t, COMB_IMUL, CV_I64)                                    \
  ROW_LANES(max_row_##S, T, T, *(const T *)in, COMB_MAX, CV_ID)                          \
  ACCROW(max_acc_##S, T, T, COMB_MAX, CV_ID)                                             \
  ROW_LANES(min_row_##S, T, T, *(const T *)in, COMB_MIN, CV_ID)                          \
  ACCROW(min_acc_##S, T, T, COMB_MIN, CV_ID)                                             \
  ROW_LANES(all_row_##S, T, uint8_t, 1, COMB_AND, CV_TRUTH)                              \
  ACCROW(all_acc_##S, T, uint8_t, COMB_AND, CV_TRUTH)                                    \
  ROW_LANES(any_row_##S, T, uint8_t, 0, COMB_OR, CV_TRUTH)                               \
  ACCROW(any_acc_##S, T, uint8_t, COMB_OR, CV_TRUTH)                                     \
  ARG_LOOPS(argmax_row_##S, argmax_acc_##S, T, CMP_GT, COMB_MAX)                         \
  ARG_LOOPS(argmin_row_##S, argmin_acc_##S, T, CMP_LT, COMB_MIN)
RGBC_TYPES(SUM_LOOPS)

/* float rows: blocked, compensated sums; float32 rows into float32 rows */
ROW_FSUM(fsum_row_f32, float, float, double)
ROW_FSUM(fsum_row_f64, double, double, double)
ACCROW(sum_acc_f32_f32, float, float, COMB_ADD, CV_ID)
ROW_LANES(fprod_row_f32, float, float, 1, COMB_MUL, CV_ID)
ACCROW(fprod_acc_f32, float, float, COMB_MUL, CV_ID)
ROW_LANES(fprod_row_f64, double, double, 1, COMB_MUL, CV_ID)
ACCROW(fprod_acc_f64, double, double, COMB_MUL, CV_ID)

/* Combining argmax/argmin partial results (value and index arrays). */
#define ARG_COMBINE(NAME, T, CMP)                                                        \
  static void NAME(char *dv, int64_t *di, const char *sv, const int64_t *si, int64_t n) { \
    T *d = (T *)dv;                                                                      \
    const T *s = (const T *)sv;                                                          \
    for (int64_t j = 0; j < n; j++)                                                      \
      if (si[j] >= 0 && TAKE(CMP, s[j], si[j], d[j], di[j])) d[j] = s[j], di[j] = si[j]; \
  }
#define ARG_COMBINES(S, T, D)                                                           \
  ARG_COMBINE(argmax_comb_##S, T, CMP_GT) ARG_COMBINE(argmin_comb_##S, T, CMP_LT)
RGBC_TYPES(ARG_COMBINES)
typedef void (*argcomb_fn)(char *dv, int64_t *di, const char *sv, const int64_t *si, int64_t n);

/* ------------------------------------------------------------------ choosing loops */

/* The loops of one reduction: the accumulator dtype, the row and accrow
 * loops for the input, and the accrow loop that combines partial
 * accumulators (the same reduction applied to the accumulator dtype). */
typedef struct red_fns {
  rg_dtype acc;
  row_fn row;
  accrow_fn accrow, combine;
  argrow_fn argrow;
  argacc_fn argacc;
  argcomb_fn argcomb;
} red_fns;

#define SEL(prefix, dt)                                                                  \
  (dt == RG_BOOL ? prefix##_b : dt == RG_INT8 ? prefix##_i8 : dt == RG_INT16 ? prefix##_i16 \
   : dt == RG_INT32 ? prefix##_i32 : dt == RG_INT64 ? prefix##_i64 : dt == RG_UINT8 ? prefix##_u8 \
   : dt == RG_FLOAT32 ? prefix##_f32 : prefix##_f64)
#define SEL2(prefix, dt, sfx)                                                            \
  (dt == RG_BOOL ? prefix##_b_##sfx : dt == RG_INT8 ? prefix##_i8_##sfx                  \
   : dt == RG_INT16 ? prefix##_i16_##sfx : dt == RG_INT32 ? prefix##_i32_##sfx           \
   : dt == RG_INT64 ? prefix##_i64_##sfx : dt == RG_UINT8 ? prefix##_u8_##sfx            \
   : dt == RG_FLOAT32 ? prefix##_f32_##sfx : prefix##_f64_##sfx)

static red_fns plain(rg_dtype acc, row_fn row, accrow_fn accrow, accrow_fn combine) {
  return (red_fns){.acc = acc, .row = row, .accrow = accrow, .combine = combine};
}

/* Sums and means: int64 (integer sums), float32 (float32 rows kept), or
 * double accumulators. */
static void sum_fns(red_fns *f, rg_opcode code, rg_dtype dt, bool inner_reduced) {
  if (!rg_dtype_is_float(dt) && code == RG_OP_SUM) {
    *f = plain(RG_INT64, SEL2(sum_row, dt, i64), SEL2(sum_acc, dt, i64), sum_acc_i64_i64);
  } else if (dt == RG_FLOAT32 && !inner_reduced) {
    *f = plain(RG_FLOAT32, NULL, sum_acc_f32_f32, sum_acc_f32_f32);
  } else {
    row_fn row = dt == RG_FLOAT32   ? fsum_row_f32
                 : dt == RG_FLOAT64 ? fsum_row_f64
                                    : SEL2(sum_row, dt, f64);
    *f = plain(RG_FLOAT64, row, SEL2(sum_acc, dt, f64), sum_acc_f64_f64);
  }
}

static void pick_fns(red_fns *f, rg_opcode code, rg_dtype dt, bool inner_reduced) {
  memset(f, 0, sizeof *f);
  switch (code) {
  case RG_OP_SUM: case RG_OP_MEAN: sum_fns(f, code, dt, inner_reduced); break;
  case RG_OP_PROD:
    if (dt == RG_FLOAT32) *f = plain(RG_FLOAT32, fprod_row_f32, fprod_acc_f32, fprod_acc_f32);
    else if (dt == RG_FLOAT64) *f = plain(RG_FLOAT64, fprod_row_f64, fprod_acc_f64, fprod_acc_f64);
    else *f = plain(RG_INT64, SEL(prod_row, dt), SEL(prod_acc, dt), prod_acc_i64);
    break;
  case RG_OP_MAX: *f = plain(dt, SEL(max_row, dt), SEL(max_acc, dt), SEL(max_acc, dt)); break;
  case RG_OP_MIN: *f = plain(dt, SEL(min_row, dt), SEL(min_acc, dt), SEL(min_acc, dt)); break;
  case RG_OP_ALL: *f = plain(RG_BOOL, SEL(all_row, dt), SEL(all_acc, dt), all_acc_b); break;
  case RG_OP_ANY: *f = plain(RG_BOOL, SEL(any_row, dt), SEL(any_acc, dt), any_acc_b); break;
  case RG_OP_ARGMAX:
    f->acc = dt;
    f->argrow = SEL(argmax_row, dt);
    f->argacc = SEL(argmax_acc, dt);
    f->argcomb = SEL(argmax_comb, dt);
    break;
  case RG_OP_ARGMIN:
    f->acc = dt;
    f->argrow = SEL(argmin_row, dt);
    f->argacc = SEL(argmin_acc, dt);
    f->argcomb = SEL(argmin_comb, dt);
    break;
  default: break;
  }
}

/* The identity of the reduction in the accumulator dtype. */
static void identity(rg_opcode code, rg_dtype acc, rgbc_scalar *v) {
  double d = 0;
  switch (code) {
  case RG_OP_PROD: case RG_OP_ALL: d = 1; break;
  case RG_OP_MAX: case RG_OP_ARGMAX: d = -INFINITY; break;
  case RG_OP_MIN: case RG_OP_ARGMIN: d = INFINITY; break;
  default: break;
  }
  if (isinf(d) && !rg_dtype_is_float(acc)) {
    static const int64_t lo[RG_NDTYPES] = {0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0};
    static const int64_t hi[RG_NDTYPES] = {1, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX, UINT8_MAX};
    rg_store_i64(acc, v->bytes, d < 0 ? lo[acc] : hi[acc]);
    return;
  }
  rg_store_f64(acc, v->bytes, d);
}

/* ------------------------------------------------------------------ plans */

typedef struct rplan {
  int nd;
  int64_t shape[RG_MAX_NDIM];
  int64_t ist[RG_MAX_NDIM]; /* input, bytes */
  int64_t ast[RG_MAX_NDIM]; /* accumulator, elements; 0 on reduced dims */
  int64_t fst[RG_MAX_NDIM]; /* flat index in the reduced sub-array; 0 on kept dims */
} rplan;

static int64_t iabs64(int64_t v) { return v < 0 ? -v : v; }

/* Builds the plan of x reduced over mask; *nacc, *count: numbers of
 * outputs and of elements reduced into each. */
static void plan_reduce(rplan *pl, const rg_tensor *x, const bool *mask, int64_t *nacc,
                        int64_t *count) {
  int64_t ast[RG_MAX_NDIM], fst[RG_MAX_NDIM], a = 1, f = 1;
  *count = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    ast[d] = mask[d] ? 0 : a;
    fst[d] = mask[d] ? f : 0;
    if (mask[d]) f *= x->shape[d], *count *= x->shape[d];
    else a *= x->shape[d];
  }
  *nacc = a;
  int dims[RG_MAX_NDIM], n = 0;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != 1) dims[n++] = d;
  for (int i = 1; i < n; i++) { /* stable: decreasing |input stride| */
    int d = dims[i], j = i;
    for (; j > 0 && iabs64(x->strides[dims[j - 1]]) < iabs64(x->strides[d]); j--) dims[j] = dims[j - 1];
    dims[j] = d;
  }
  int m = 0;
  for (int i = 0; i < n; i++) {
    int d = dims[i];
    int64_t s = x->shape[d];
    if (m > 0 && pl->ist[m - 1] == x->strides[d] * s && pl->ast[m - 1] == ast[d] * s &&
        pl->fst[m - 1] == fst[d] * s) {
      pl->shape[m - 1] *= s;
      pl->ist[m - 1] = x->strides[d];
      pl->ast[m - 1] = ast[d];
      pl->fst[m - 1] = fst[d];
      continue;
    }
    pl->shape[m] = s;
    pl->ist[m] = x->strides[d];
    pl->ast[m] = ast[d];
    pl->fst[m] = fst[d];
    m++;
  }
  if (m == 0) {
    pl->shape[0] = 1;
    pl->ist[0] = pl->ast[0] = pl->fst[0] = 0;
    m = 1;
  }
  pl->nd = m;
}

/* One reduction run: loops, accumulators, sizes. */
typedef struct rrun {
  rplan pl;
  red_fns F;
  int64_t asize;  /* accumulator element size */
  bool rows_f32;  /* float32 rows summed into float64 rows (see sum_rows_f32) */
} rrun;

/* A float32 sum over the leading (reduced) dimension of a 2-d plan into
 * float64 accumulators: rows are added into a float32 row (vectorised,
 * as fast as float32 accumulators), which is added into the float64 row
 * every ROWS_F32 rows, so the error grows with ROWS_F32, not with the
 * number of rows. */
#define ROWS_F32 64
RGBC_SIMD static void add_row_f32(float *restrict t, const char *in, int64_t k, int64_t st) {
  if (st == sizeof(float)) {
    const float *restrict a = (const float *)in;
    for (int64_t j = 0; j < k; j++) t[j] += a[j];
  } else {
    for (int64_t j = 0; j < k; j++) t[j] += *(const float *)(in + j * st);
  }
}

/* Four contiguous rows `rs` bytes apart at once: one pass over t. */
RGBC_SIMD static void add_rows4_f32(float *restrict t, const char *in, int64_t k, int64_t rs) {
  const float *restrict a = (const float *)in, *restrict b = (const float *)(in + rs);
  const float *restrict c = (const float *)(in + 2 * rs), *restrict d = (const float *)(in + 3 * rs);
  for (int64_t j = 0; j < k; j++) t[j] += (a[j] + b[j]) + (c[j] + d[j]);
}

RGBC_SIMD static void flush_row_f32(double *acc, int64_t ast, float *restrict t, int64_t k) {
  for (int64_t j = 0; j < k; j++) {
    acc[j * ast] += (double)t[j];
    t[j] = 0;
  }
}

static void sum_rows_f32(const rplan *pl, const char *in, double *acc) {
  int64_t r = pl->shape[0], k = pl->shape[1];
  float small[1024], *t = k <= 1024 ? small : rg_calloc((size_t)k, sizeof *t);
  if (!t) { /* no memory for the row: float64 accumulation directly */
    for (int64_t i = 0; i < r; i++, in += pl->ist[0])
      for (int64_t j = 0; j < k; j++) acc[j * pl->ast[1]] += *(const float *)(in + j * pl->ist[1]);
    return;
  }
  memset(t, 0, (size_t)k * sizeof *t);
  bool four = pl->ist[1] == sizeof(float);
  for (int64_t i = 0; i < r;) {
    if (four && i % ROWS_F32 + 4 <= ROWS_F32 && i + 4 <= r) {
      add_rows4_f32(t, in, k, pl->ist[0]);
      in += 4 * pl->ist[0];
      i += 4;
    } else {
      add_row_f32(t, in, k, pl->ist[1]);
      in += pl->ist[0];
      i++;
    }
    if (i % ROWS_F32 == 0 || i == r) flush_row_f32(acc, pl->ast[1], t, k);
  }
  if (t != small) rg_free(t);
}

/* Runs plan pl (whose input starts at in) into accumulators acc / idx;
 * f0 is the flat index of the plan's first element (argmax/argmin). */
static void run_plan(const rrun *r, const rplan *pl, const char *in, char *acc, int64_t *idx,
                     int64_t f0) {
  const int nd = pl->nd, ni = nd - 1;
  for (int d = 0; d < nd; d++)
    if (pl->shape[d] == 0) return;
  if (r->rows_f32) {
    sum_rows_f32(pl, in, (double *)acc);
    return;
  }
  const int64_t n = pl->shape[ni], ist = pl->ist[ni], ast = pl->ast[ni], fst = pl->fst[ni];
  const bool reduced = ast == 0;
  int64_t ix[RG_MAX_NDIM] = {0}, ao = 0, fo = f0;
  for (;;) {
    if (r->F.argrow) {
      if (reduced)
        r->F.argrow(in, n, ist, acc + ao * r->asize, idx + ao, fo, fst);
      else
        r->F.argacc(acc + ao * r->asize, idx + ao, ast, in, n, ist, fo);
    } else if (reduced) {
      r->F.row(in, n, ist, acc + ao * r->asize);
    } else {
      r->F.accrow(acc + ao * r->asize, ast * r->asize, in, n, ist);
    }
    int d = ni - 1;
    for (; d >= 0; d--) {
      in += pl->ist[d];
      ao += pl->ast[d];
      fo += pl->fst[d];
      if (++ix[d] < pl->shape[d]) break;
      in -= pl->shape[d] * pl->ist[d];
      ao -= pl->shape[d] * pl->ast[d];
      fo -= pl->shape[d] * pl->fst[d];
      ix[d] = 0;
    }
    if (d < 0) return;
  }
}

/* ------------------------------------------------------------------ parallel runs */

/* Parts of one dimension of the plan run in parallel: a kept dimension
 * (each part owns its accumulators) or a reduced one (each part has its
 * own copy of all accumulators, `partials`). */
typedef struct rjob {
  const rrun *r;
  const char *in;
  char *acc;
  int64_t *idx;
  int split;
  int64_t parts, len, nacc;
  bool partials;
} rjob;

static void part_fn(void *ud, int64_t plo, int64_t phi) {
  const rjob *j = ud;
  const rplan *pl = &j->r->pl;
  for (int64_t p = plo; p < phi; p++) {
    int64_t lo = j->len * p / j->parts, hi = j->len * (p + 1) / j->parts;
    if (lo >= hi) continue;
    rplan sub = *pl;
    sub.shape[j->split] = hi - lo;
    int64_t ao = lo * pl->ast[j->split];
    char *acc = j->partials ? j->acc + p * j->nacc * j->r->asize : j->acc;
    int64_t *idx = !j->idx ? NULL : j->partials ? j->idx + p * j->nacc : j->idx;
    run_plan(j->r, &sub, j->in + lo * pl->ist[j->split], acc + ao * j->r->asize,
             idx ? idx + ao : NULL, lo * pl->fst[j->split]);
  }
}

/* Fills n accumulators with the identity (and indices with -1). */
static void fill_identity(rg_opcode code, rg_dtype adt, char *acc, int64_t *idx, int64_t n) {
  rgbc_scalar id;
  identity(code, adt, &id);
  char *p[2] = {acc, id.bytes};
  int64_t s[2] = {rgbc_size(adt), 0};
  rgbc_cast_loop(adt, adt)(p, s, n, NULL);
  for (int64_t i = 0; idx && i < n; i++) idx[i] = -1;
}

#define RED_PAR_MIN (1 << 16)
#define RED_PARTIALS_MAX (1 << 20)

/* The dimension of kind `kept` (or reduced) with the most elements,
 * leaving out dimension `skip`. */
static int largest_dim(const rplan *pl, bool kept, int skip) {
  int best = -1;
  for (int d = 0; d < pl->nd; d++)
    if (d != skip && (pl->ast[d] != 0) == kept && (best < 0 || pl->shape[d] > pl->shape[best]))
      best = d;
  return best;
}

/* Splits dimension d of the plan into parts run in parallel; partials:
 * each part into its own accumulators, combined in part order. */
static int run_split(rgb_exec *x, rg_opcode code, rjob *j, int d, bool partials) {
  const rrun *r = j->r;
  int nth = x->rt->nthreads;
  int64_t nacc = j->nacc;
  char *acc = j->acc;
  int64_t *idx = j->idx;
  j->split = d;
  j->len = r->pl.shape[d];
  j->parts = j->len < 4 * nth ? j->len : 4 * nth;
  j->partials = partials;
  if (!partials) {
    rgb_parallel_for(x, j->parts, 1, part_fn, j);
    return RG_OK;
  }
  j->acc = rg_malloc((size_t)(j->parts * nacc * r->asize));
  j->idx = idx ? rg_malloc((size_t)(j->parts * nacc) * sizeof(int64_t)) : NULL;
  if (!j->acc || (idx && !j->idx)) {
    rg_free(j->acc);
    rg_free(j->idx);
    return rgb_error(x, RG_ERR_NOMEM, "out of memory for partial results");
  }
  fill_identity(code, r->F.acc, j->acc, j->idx, j->parts * nacc);
  rgb_parallel_for(x, j->parts, 1, part_fn, j);
  for (int64_t p = 0; p < j->parts; p++) {
    char *pa = j->acc + p * nacc * r->asize;
    if (idx)
      r->F.argcomb(acc, idx, pa, j->idx + p * nacc, nacc);
    else
      r->F.combine(acc, r->asize, pa, nacc, r->asize);
  }
  rg_free(j->acc);
  rg_free(j->idx);
  return RG_OK;
}

/* Runs the reduction into acc / idx (initialised), in parallel when
 * worth it: an outer kept dimension when one is large enough (no extra
 * work), else the largest reduced dimension into partial accumulators
 * (each part streams whole rows), else the innermost kept dimension. */
static int run_reduce(rgb_exec *x, rg_opcode code, const rrun *r, const rg_tensor *in,
                      char *acc, int64_t *idx, int64_t nacc) {
  int nth = x->rt->nthreads, inner = r->pl.nd - 1;
  rjob j = {.r = r, .in = in->data, .acc = acc, .idx = idx, .nacc = nacc};
  if (nth > 1 && rg_tensor_numel(in) >= RED_PAR_MIN) {
    int kd = largest_dim(&r->pl, true, inner);
    if (kd >= 0 && r->pl.shape[kd] >= 2 * nth) return run_split(x, code, &j, kd, false);
    int rd = largest_dim(&r->pl, false, -1);
    if (rd >= 0 && r->pl.shape[rd] >= 2 && nacc * 4 * nth <= RED_PARTIALS_MAX)
      return run_split(x, code, &j, rd, true);
    if (r->pl.ast[inner] != 0 && r->pl.shape[inner] >= 2 * nth)
      return run_split(x, code, &j, inner, false);
  }
  run_plan(r, &r->pl, in->data, acc, idx, 0);
  return RG_OK;
}

/* ------------------------------------------------------------------ the kernel */

bool rgbc_reduce_needs_elements(rg_opcode code) {
  return code == RG_OP_MAX || code == RG_OP_MIN || code == RG_OP_ARGMAX || code == RG_OP_ARGMIN;
}

int rgbc_empty_reduce_error(rgb_exec *x) {
  return rgb_error(x, RG_ERR_EVAL, "cannot reduce an empty array (the operation has no identity)");
}

/* out = acc / count (means), or acc converted to out's dtype. */
static void finish(rgb_exec *x, rg_opcode code, rg_dtype adt, const char *acc, rg_tensor *out,
                   int64_t nacc, int64_t count) {
  if (code == RG_OP_MEAN && adt == RG_FLOAT32) {
    float *o = (float *)out->data, c = (float)count;
    const float *a = (const float *)acc;
    for (int64_t i = 0; i < nacc; i++) o[i] = a[i] / c;
    return;
  }
  if (code == RG_OP_MEAN) {
    double *a = (double *)acc, c = (double)count;
    for (int64_t i = 0; i < nacc; i++) a[i] /= c;
  }
  if (acc == out->data) return;
  char *p[2] = {out->data, (char *)acc};
  int64_t s[2] = {rgbc_size(out->dtype), rgbc_size(adt)};
  rgbc_cast_loop(adt, out->dtype)(p, s, nacc, NULL);
}

int rgb_cpu_reduce(rgb_exec *x) {
  const rgb_node *n = x->node;
  rg_opcode code = n->code;
  const rg_tensor *in = rgb_in(x, 0);
  if (in->ndim != n->in[0].ndim)
    return rgb_error(x, RG_ERR_TYPE, "the input has %d dimensions, its type %d", in->ndim,
                     n->in[0].ndim);
  bool mask[RG_MAX_NDIM];
  for (int d = 0; d < in->ndim; d++) mask[d] = n->all_axes;
  for (int i = 0; i < n->nints; i++) mask[n->ints[i]] = true;
  int64_t oshape[RG_MAX_NDIM];
  int ond = 0;
  for (int d = 0; d < in->ndim; d++)
    if (!mask[d]) oshape[ond++] = in->shape[d];
  rg_tensor *out = rgb_output(x, 0, n->out[0].dtype, ond, oshape);
  if (!out) return x->rt->errcode;
  rrun r;
  int64_t nacc, count;
  plan_reduce(&r.pl, in, mask, &nacc, &count);
  if (nacc == 0) return RG_OK;
  if (count == 0 && rgbc_reduce_needs_elements(code)) return rgbc_empty_reduce_error(x);
  pick_fns(&r.F, code, in->dtype, r.pl.ast[r.pl.nd - 1] == 0);
  r.rows_f32 = (code == RG_OP_SUM || code == RG_OP_MEAN) && in->dtype == RG_FLOAT32 &&
               r.pl.nd == 2 && r.pl.ast[0] == 0 && r.pl.ast[1] != 0;
  if (r.rows_f32) pick_fns(&r.F, code, in->dtype, true); /* float64 accumulators */
  r.asize = rgbc_size(r.F.acc);
  bool arg = code == RG_OP_ARGMAX || code == RG_OP_ARGMIN;
  bool own = arg || r.F.acc != out->dtype;
  char *acc = own ? rg_malloc((size_t)(nacc * r.asize)) : out->data;
  if (!acc) return rgb_error(x, RG_ERR_NOMEM, "out of memory for accumulators");
  int64_t *idx = arg ? (int64_t *)out->data : NULL;
  fill_identity(code, r.F.acc, acc, idx, nacc);
  int rc = count > 0 ? run_reduce(x, code, &r, in, acc, idx, nacc) : RG_OK;
  if (rc == RG_OK && !arg) finish(x, code, r.F.acc, acc, out, nacc, count);
  if (own) rg_free(acc);
  return rc;
}
