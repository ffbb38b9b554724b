/*
 * type.c — dtypes, NumPy promotion, element conversion and tensor types.
 *
 * The eight dtypes form NumPy's promotion lattice restricted to them:
 * bool below everything; uint8 and int8 meet at int16; an integer meets a
 * float at the smallest float holding it exactly (float32 for 8- and 16-bit
 * integers, float64 beyond).  Safe casting is "promotion does not change
 * the target".
 *
 * A tensor type is an immutable collected record (dtype, device, static
 * shape).  Types are not interned: equality compares fields, and
 * constructors reuse an input's type object when the result is equal, so
 * most graphs share a handful of type objects anyway.
 */
#include "core/core-impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ dtypes */

static const struct {
  const char *name;
  size_t size;
  uint8_t kind; /* 0 bool, 1 unsigned, 2 signed, 3 float */
} dtypes[RG_NDTYPES] = {
    [RG_BOOL] = {"bool", 1, 0},       [RG_INT8] = {"int8", 1, 2},
    [RG_INT16] = {"int16", 2, 2},     [RG_INT32] = {"int32", 4, 2},
    [RG_INT64] = {"int64", 8, 2},     [RG_UINT8] = {"uint8", 1, 1},
    [RG_FLOAT32] = {"float32", 4, 3}, [RG_FLOAT64] = {"float64", 8, 3},
};

static bool valid_dtype(rg_dtype dt) { return (unsigned)dt < RG_NDTYPES; }

const char *rg_dtype_name(rg_dtype dt) { return valid_dtype(dt) ? dtypes[dt].name : "?"; }

/* The dtypes' names as interned symbols, looked up once (pthread_once: a
 * thread never sees the table half filled); [RG_NDTYPES] is "?". */
static rg_term dtype_syms[RG_NDTYPES + 1];
static pthread_once_t dtype_syms_once = PTHREAD_ONCE_INIT;

static void fill_dtype_syms(void) {
  for (int i = 0; i <= RG_NDTYPES; i++) dtype_syms[i] = rg_symbol(rg_dtype_name((rg_dtype)i));
}

rg_term rg_dtype_symbol(rg_dtype dt) {
  pthread_once(&dtype_syms_once, fill_dtype_syms);
  return dtype_syms[valid_dtype(dt) ? dt : RG_NDTYPES];
}

int rg_dtype_from_name(const char *name) {
  for (int i = 0; i < RG_NDTYPES; i++)
    if (!strcmp(name, dtypes[i].name)) return i;
  return -1;
}

size_t rg_dtype_size(rg_dtype dt) { return valid_dtype(dt) ? dtypes[dt].size : 0; }
bool rg_dtype_is_float(rg_dtype dt) { return valid_dtype(dt) && dtypes[dt].kind == 3; }
bool rg_dtype_is_int(rg_dtype dt) {
  return valid_dtype(dt) && (dtypes[dt].kind == 1 || dtypes[dt].kind == 2);
}
bool rg_dtype_is_signed(rg_dtype dt) {
  return valid_dtype(dt) && (dtypes[dt].kind == 2 || dtypes[dt].kind == 3);
}

static rg_dtype float_for_int(rg_dtype i) {
  return dtypes[i].size <= 2 ? RG_FLOAT32 : RG_FLOAT64;
}

rg_dtype rg_dtype_promote(rg_dtype a, rg_dtype b) {
  if (a == b) return a;
  if (a == RG_BOOL) return b;
  if (b == RG_BOOL) return a;
  int ka = dtypes[a].kind, kb = dtypes[b].kind;
  if (ka == 3 && kb == 3) return dtypes[a].size > dtypes[b].size ? a : b;
  if (ka == 3 || kb == 3) {
    rg_dtype f = ka == 3 ? a : b, i = ka == 3 ? b : a;
    rg_dtype need = float_for_int(i);
    return dtypes[f].size >= dtypes[need].size ? f : need;
  }
  if (ka == 2 && kb == 2) return dtypes[a].size > dtypes[b].size ? a : b;
  /* uint8 with a signed integer */
  rg_dtype s = ka == 2 ? a : b;
  return s == RG_INT8 ? RG_INT16 : s;
}

bool rg_dtype_holds(rg_dtype dt, int64_t v) {
  switch (dt) {
  case RG_BOOL: return v == 0 || v == 1;
  case RG_INT8: return v >= INT8_MIN && v <= INT8_MAX;
  case RG_INT16: return v >= INT16_MIN && v <= INT16_MAX;
  case RG_INT32: return v >= INT32_MIN && v <= INT32_MAX;
  case RG_UINT8: return v >= 0 && v <= UINT8_MAX;
  default: return true;
  }
}

/* Kinds for NEP 50: bool < integer < float, and each kind's default. */
static int nep50_kind(rg_dtype dt) { return dt == RG_BOOL ? 0 : rg_dtype_is_float(dt) ? 2 : 1; }
static const rg_dtype kind_default[3] = {RG_BOOL, RG_INT64, RG_FLOAT64};

/* The smallest dtype holding the integer v (NumPy's min_scalar_type). */
static rg_dtype smallest_holding(int64_t v) {
  static const rg_dtype order[] = {RG_UINT8, RG_INT8, RG_INT16, RG_INT32};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (rg_dtype_holds(order[i], v)) return order[i];
  return RG_INT64;
}

rg_dtype rg_dtype_result(int n, const rg_operand *in, bool compare, int *unfit) {
  int strong = -1, weak_kind = -1;
  if (unfit) *unfit = -1;
  for (int i = 0; i < n; i++) {
    rg_dtype dt = in[i].dtype;
    if (in[i].weak) {
      if (nep50_kind(dt) > weak_kind) weak_kind = nep50_kind(dt);
    } else {
      strong = strong < 0 ? (int)dt : (int)rg_dtype_promote((rg_dtype)strong, dt);
    }
  }
  if (strong < 0) return kind_default[weak_kind < 0 ? 0 : weak_kind];
  rg_dtype r = (rg_dtype)strong;
  if (weak_kind > nep50_kind(r)) return rg_dtype_promote(r, kind_default[weak_kind]);
  for (int i = 0; i < n; i++) {
    if (!in[i].weak || !in[i].known || nep50_kind(in[i].dtype) != 1 || rg_dtype_holds(r, in[i].value))
      continue;
    if (!compare) {
      if (unfit) *unfit = i;
      return r;
    }
    r = rg_dtype_promote(r, smallest_holding(in[i].value));
  }
  return r;
}

bool rg_dtype_can_cast(rg_dtype from, rg_dtype to) {
  return valid_dtype(from) && valid_dtype(to) && rg_dtype_promote(from, to) == to;
}

/* Among relgraph's dtypes, safe casting rounds in one case only: int64 ->
 * float64 (63 value bits into a 53-bit significand); int32 -> float32 and
 * int64 -> float32 are not safe casts to begin with. */
bool rg_dtype_exact_cast(rg_dtype from, rg_dtype to) {
  return rg_dtype_can_cast(from, to) && !(from == RG_INT64 && rg_dtype_is_float(to));
}

double rg_load_f64(rg_dtype dt, const void *p) {
  switch (dt) {
  case RG_BOOL: return *(const uint8_t *)p != 0;
  case RG_INT8: return *(const int8_t *)p;
  case RG_INT16: return *(const int16_t *)p;
  case RG_INT32: return *(const int32_t *)p;
  case RG_INT64: return (double)*(const int64_t *)p;
  case RG_UINT8: return *(const uint8_t *)p;
  case RG_FLOAT32: return *(const float *)p;
  case RG_FLOAT64: return *(const double *)p;
  default: return NAN;
  }
}

/* Double to integer without undefined behaviour: NaN gives 0, values out
 * of range saturate. */
static int64_t f2i(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

int64_t rg_load_i64(rg_dtype dt, const void *p) {
  switch (dt) {
  case RG_BOOL: return *(const uint8_t *)p != 0;
  case RG_INT8: return *(const int8_t *)p;
  case RG_INT16: return *(const int16_t *)p;
  case RG_INT32: return *(const int32_t *)p;
  case RG_INT64: return *(const int64_t *)p;
  case RG_UINT8: return *(const uint8_t *)p;
  case RG_FLOAT32: return f2i(*(const float *)p);
  case RG_FLOAT64: return f2i(*(const double *)p);
  default: return 0;
  }
}

void rg_store_i64(rg_dtype dt, void *p, int64_t v) {
  switch (dt) {
  case RG_BOOL: *(uint8_t *)p = v != 0; break;
  case RG_INT8: *(int8_t *)p = (int8_t)v; break;
  case RG_INT16: *(int16_t *)p = (int16_t)v; break;
  case RG_INT32: *(int32_t *)p = (int32_t)v; break;
  case RG_INT64: *(int64_t *)p = v; break;
  case RG_UINT8: *(uint8_t *)p = (uint8_t)v; break;
  case RG_FLOAT32: *(float *)p = (float)v; break;
  case RG_FLOAT64: *(double *)p = (double)v; break;
  default: break;
  }
}

void rg_store_f64(rg_dtype dt, void *p, double v) {
  switch (dt) {
  case RG_BOOL: *(uint8_t *)p = v != 0; break;
  case RG_FLOAT32: *(float *)p = (float)v; break;
  case RG_FLOAT64: *(double *)p = v; break;
  default: rg_store_i64(dt, p, f2i(v)); break; /* integers wrap as C casts */
  }
}

/* ------------------------------------------------------------------ tensor types */

const rg_type *rgc_type_alloc(rg_dtype dt, int ndim, rg_device dev) {
  rg_type *t = rgk_alloc_atomic(sizeof(rg_type) + (size_t)ndim * sizeof(int64_t));
  t->dtype = dt;
  t->ndim = ndim;
  t->device = dev;
  return t;
}

const rg_type *rg_type_new(rg_dtype dt, int ndim, const int64_t *shape) {
  if (!valid_dtype(dt) || ndim < 0 || ndim > RG_MAX_NDIM || (ndim && !shape)) return NULL;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < RG_DIM_UNKNOWN) return NULL;
  if (ndim == 0) return rg_type_scalar(dt);
  rg_type *t = (rg_type *)rgc_type_alloc(dt, ndim, RG_DEVICE_HOST);
  memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
  return t;
}

const rg_type *rg_type_scalar(rg_dtype dt) {
  static const rg_type *cache[RG_NDTYPES];
  if (!valid_dtype(dt)) return NULL;
  const rg_type *t = __atomic_load_n(&cache[dt], __ATOMIC_ACQUIRE);
  if (!t) {
    t = rgc_type_alloc(dt, 0, RG_DEVICE_HOST);
    __atomic_store_n(&cache[dt], t, __ATOMIC_RELEASE);
  }
  return t;
}

static const rg_type *type_copy(const rg_type *t, rg_dtype dt, rg_device dev) {
  rg_type *r = (rg_type *)rgc_type_alloc(dt, t->ndim, dev);
  memcpy(r->shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
  return r;
}

const rg_type *rg_type_on_device(const rg_type *t, rg_device dev) {
  if (!t || t->device == dev) return t;
  if (dev < RG_DEVICE_MIRROR || dev > RG_DEVICE_CUDA(RG_MAX_CUDA_DEVICES - 1)) return NULL; /* no such device */
  return type_copy(t, t->dtype, dev);
}

const rg_type *rg_type_with_dtype(const rg_type *t, rg_dtype dt) {
  if (!t || t->dtype == dt) return t;
  if (!valid_dtype(dt)) return NULL;
  if (t->ndim == 0 && t->device == RG_DEVICE_HOST) return rg_type_scalar(dt);
  return type_copy(t, dt, t->device);
}

/* Equal but for the device. */
static bool same_on_any_device(const rg_type *a, const rg_type *b) {
  if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim) return false;
  return memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

bool rg_type_equal(const rg_type *a, const rg_type *b) {
  return a == b || (same_on_any_device(a, b) && a->device == b->device);
}

/* Subtype but for the device. */
static bool fits_on_any_device(const rg_type *sub, const rg_type *super) {
  if (!sub || !super || sub->dtype != super->dtype || sub->ndim != super->ndim) return false;
  for (int i = 0; i < sub->ndim; i++)
    if (super->shape[i] != RG_DIM_UNKNOWN && sub->shape[i] != super->shape[i]) return false;
  return true;
}

bool rg_type_is_subtype(const rg_type *sub, const rg_type *super) {
  return sub == super || (fits_on_any_device(sub, super) && sub->device == super->device);
}

bool rg_type_stands_for(const rg_type *t, const rg_type *want) {
  return t == want || (fits_on_any_device(t, want) &&
                       (t->device == want->device || t->device == RG_DEVICE_HOST));
}

bool rg_type_equal_or_host(const rg_type *t, const rg_type *want) {
  return t == want || (same_on_any_device(t, want) &&
                       (t->device == want->device || t->device == RG_DEVICE_HOST));
}

bool rg_type_broadcastable(const rg_type *t, int dim) {
  return dim >= 0 && dim < t->ndim && t->shape[dim] == 1;
}

uint64_t rgc_mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t rgc_hash_bytes(const void *p, size_t n) {
  const uint8_t *s = p;
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

uint64_t rg_type_hash(const rg_type *t) {
  uint64_t h = rgc_mix((uint64_t)t->dtype * 31 + (uint64_t)t->ndim, (uint64_t)t->device);
  for (int i = 0; i < t->ndim; i++) h = rgc_mix(h, (uint64_t)t->shape[i]);
  return h;
}

int64_t rg_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return -1;
  return n;
}

int64_t rg_type_numel(const rg_type *t) { return rg_shape_numel(t->ndim, t->shape); }

const char *rg_shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
  size_t k = (size_t)snprintf(buf, len, "(");
  for (int d = 0; d < ndim && k + 1 < len; d++) {
    const char *sep = d ? " " : "";
    if (shape[d] < 0) k += (size_t)snprintf(buf + k, len - k, "%s?", sep);
    else k += (size_t)snprintf(buf + k, len - k, "%s%lld", sep, (long long)shape[d]);
  }
  if (k + 1 < len) snprintf(buf + k, len - k, ")");
  return buf;
}

char *rgc_shape_str(int ndim, const int64_t *shape) {
  char buf[RG_SHAPE_STR_MAX];
  return rgk_strdup(rg_shape_str(ndim, shape, buf, sizeof buf));
}

const char *rg_device_str(rg_device d, char *buf, size_t len) {
  if (d == RG_DEVICE_HOST) snprintf(buf, len, "host");
  else if (d == RG_DEVICE_MIRROR) snprintf(buf, len, "mirror");
  else snprintf(buf, len, "cuda:%d", (int)d - 1);
  return buf;
}

int rg_device_parse(const char *s, rg_device *d) {
  if (!strcmp(s, "host")) *d = RG_DEVICE_HOST;
  else if (!strcmp(s, "mirror")) *d = RG_DEVICE_MIRROR;
  else if (!strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9') {
    char *end;
    long k = strtol(s + 5, &end, 10);
    if (*end || k >= RG_MAX_CUDA_DEVICES) return RG_ERR_SYNTAX;
    *d = RG_DEVICE_CUDA((int)k);
  } else {
    return RG_ERR_SYNTAX;
  }
  return RG_OK;
}

char *rg_type_str(const rg_type *t) {
  if (!t) return rgk_strdup("<no type>");
  char *s = rgc_shape_str(t->ndim, t->shape), dev[16];
  if (t->device == RG_DEVICE_HOST) return rgk_sprintf("%s %s", rg_dtype_name(t->dtype), s);
  return rgk_sprintf("%s %s %s", rg_dtype_name(t->dtype), s, rg_device_str(t->device, dev, sizeof dev));
}

int rgc_broadcast(int n, const rg_type *const *ts, int64_t *out, int *bad_dim) {
  int nd = 0;
  for (int k = 0; k < n; k++)
    if (ts[k]->ndim > nd) nd = ts[k]->ndim;
  for (int d = 0; d < nd; d++) out[d] = 1;
  for (int k = 0; k < n; k++) {
    int off = nd - ts[k]->ndim;
    for (int d = 0; d < ts[k]->ndim; d++) {
      int64_t s = ts[k]->shape[d], *o = &out[off + d];
      if (s == 1) continue;
      if (*o == 1) {
        *o = s;
      } else if (s == RG_DIM_UNKNOWN) {
        continue; /* a known size (or unknown) stays */
      } else if (*o == RG_DIM_UNKNOWN) {
        *o = s;
      } else if (*o != s) {
        if (bad_dim) *bad_dim = off + d;
        return -1;
      }
    }
  }
  return nd;
}
