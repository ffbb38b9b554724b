/*
 * tensor.c — host tensors: manually owned, strided, with reference-counted
 * storage shared by views.
 *
 * This file never touches collected memory: a tensor header is malloc'd,
 * its storage record is malloc'd, and the data buffer is either ours
 * (64-byte aligned, freed with the last reference) or external memory with
 * a release callback.  Linked programs of the backends hold tensors, never
 * GC pointers.  A storage may also live on a device (a buffer of a buffer
 * type, rg_buffer_type): then its bytes are reached only through the
 * buffer type's download and upload, and copies go through host memory
 * unless the buffer type copies between devices itself (copy_from).  A
 * buffer type of the host (pinned memory) holds host tensors like ours,
 * which a device downloads into directly.
 *
 * Invariants:
 *  - every element of a tensor (all multi-indices within shape) lies
 *    inside [storage->base, storage->base + storage->nbytes);
 *  - storage->refs counts the tensors (headers) referring to it; it is
 *    changed atomically so tensors may be released from any thread.
 *
 * Elements are visited in C order with an odometer over the multi-index
 * (no recursion on ndim).
 */
#include "core/core-impl.h"

#include <math.h>
#include <stdlib.h>

struct rg_storage {
  void *base;
  size_t nbytes;
  long refs;
  void (*release)(void *base, void *ud); /* external memory: NULL or the callback */
  void *ud;
  bool owned;                            /* ours: rg_free(base) */
  const rg_buffer_type *buft;            /* a device buffer: buft->free(base); NULL: host */
  bool borrowed;                         /* device memory someone else frees (rg_tensor_wrap_on) */
};

/* ------------------------------------------------------------------ storage */

static rg_storage *storage_new(void *base, size_t nbytes, void (*release)(void *, void *),
                               void *ud) {
  rg_storage *s = rg_malloc(sizeof *s);
  if (!s) return NULL;
  *s = (rg_storage){base, nbytes, 1, release, ud, false, NULL, false};
  return s;
}

static void storage_release(rg_storage *s) {
  int64_t left = __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
  assert(left >= 0 && "a tensor released more often than referenced");
  if (left != 0) return;
  if (s->buft && !s->borrowed)
    s->buft->free(s->buft, s->base, s->nbytes ? s->nbytes : 1);
  else if (s->owned)
    rg_free(s->base);
  else if (s->release)
    s->release(s->base, s->ud);
  rg_free(s);
}

int64_t rg_storage_refcount(const rg_tensor *t) {
  return __atomic_load_n(&t->storage->refs, __ATOMIC_ACQUIRE);
}

void *rg_storage_base(const rg_tensor *t) { return t->storage->base; }
size_t rg_storage_nbytes(const rg_tensor *t) { return t->storage->nbytes; }
bool rg_storage_is_external(const rg_tensor *t) { return !t->storage->owned; }
/* Whether a storage's bytes are on a device (not readable by the host):
 * a buffer type's whose device is not the host. */
static bool on_device(const rg_storage *s) { return s->buft && s->buft->device != RG_DEVICE_HOST; }
bool rg_tensor_on_device(const rg_tensor *t) { return on_device(t->storage); }
rg_device rg_tensor_device(const rg_tensor *t) {
  return t->storage->buft ? t->storage->buft->device : RG_DEVICE_HOST;
}
const rg_buffer_type *rg_tensor_buffer_type(const rg_tensor *t) { return t->storage->buft; }

/* ------------------------------------------------------------------ shapes */

/* Number of elements and bytes; false when invalid or overflowing.  As in
 * NumPy, the product of the non-zero sizes (times the element size) must
 * fit even when the tensor is empty, so strides never overflow. */
static bool shape_size(rg_dtype dt, int ndim, const int64_t *shape, int64_t *numel,
                       size_t *nbytes) {
  if ((unsigned)dt >= RG_NDTYPES || ndim < 0 || ndim > RG_MAX_NDIM) return false;
  int64_t span = (int64_t)rg_dtype_size(dt);
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return false;
    if (shape[i] == 0) empty = true;
    else if (__builtin_mul_overflow(span, shape[i], &span) || span > INT64_MAX / 2) return false;
  }
  *nbytes = empty ? 0 : (size_t)span;
  *numel = empty ? 0 : span / (int64_t)rg_dtype_size(dt);
  return true;
}

static void c_strides(rg_tensor *t) {
  int64_t s = (int64_t)rg_dtype_size(t->dtype);
  for (int i = t->ndim - 1; i >= 0; i--) {
    t->strides[i] = s;
    s *= t->shape[i] ? t->shape[i] : 1;
  }
}

static rg_tensor *header(rg_dtype dt, int ndim, const int64_t *shape) {
  rg_tensor *t = rg_calloc(1, sizeof *t);
  if (!t) return NULL;
  t->dtype = dt;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
  return t;
}

/* A C-contiguous tensor over a buffer just allocated, from its start: our
 * own memory (bt NULL) or a buffer type's.  NULL when memory runs out (the
 * buffer is then the caller's to free). */
static rg_tensor *adopt(rg_dtype dt, int ndim, const int64_t *shape, void *base, size_t nbytes,
                        const rg_buffer_type *bt) {
  rg_tensor *t = header(dt, ndim, shape);
  rg_storage *s = t ? storage_new(base, nbytes, NULL, NULL) : NULL;
  if (!s) {
    rg_free(t);
    return NULL;
  }
  s->owned = !bt;
  s->buft = bt;
  t->storage = s;
  t->data = base;
  c_strides(t);
  return t;
}

static rg_tensor *alloc_tensor(rg_dtype dt, int ndim, const int64_t *shape, bool zero) {
  int64_t numel;
  size_t nbytes;
  if (!shape_size(dt, ndim, shape, &numel, &nbytes)) return NULL;
  size_t alloc = (nbytes + 63) & ~(size_t)63;
  void *base = rg_aligned_alloc(64, alloc ? alloc : 64);
  if (!base) return NULL;
  if (zero) memset(base, 0, alloc ? alloc : 64);
  rg_tensor *t = adopt(dt, ndim, shape, base, nbytes, NULL);
  if (!t) rg_free(base);
  return t;
}

rg_tensor *rg_tensor_new(rg_dtype dt, int ndim, const int64_t *shape) {
  return alloc_tensor(dt, ndim, shape, true);
}
rg_tensor *rg_tensor_empty(rg_dtype dt, int ndim, const int64_t *shape) {
  return alloc_tensor(dt, ndim, shape, false);
}

rg_tensor *rg_tensor_from_data(rg_dtype dt, int ndim, const int64_t *shape, const void *src) {
  rg_tensor *t = alloc_tensor(dt, ndim, shape, false);
  if (t) memcpy(t->data, src, t->storage->nbytes);
  return t;
}

rg_tensor *rg_tensor_scalar_f64(rg_dtype dt, double v) {
  rg_tensor *t = alloc_tensor(dt, 0, NULL, true);
  if (t) rg_store_f64(dt, t->data, v);
  return t;
}

/* The byte range [lo, hi) touched by elements relative to element 0;
 * false when it does not fit in 64 bits (strides no storage can hold: the
 * tensors this file makes always fit, views and wraps are checked). */
static bool extent(const rg_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                   int64_t *lo, int64_t *hi, bool *empty) {
  *lo = 0;
  *hi = (int64_t)rg_dtype_size(t->dtype);
  *empty = false;
  bool ok = true;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) *empty = true;
    if (shape[i] <= 1) continue;
    int64_t span;
    ok &= !__builtin_mul_overflow(shape[i] - 1, strides[i], &span);
    ok &= !__builtin_add_overflow(span > 0 ? *hi : *lo, span, span > 0 ? hi : lo);
  }
  return ok;
}

/* Whether bytes [off + lo, off + hi) lie in the storage, off being the
 * first element's offset in it. */
static bool inside(const rg_storage *s, int64_t off, int64_t lo, int64_t hi) {
  int64_t a, b;
  return !__builtin_add_overflow(off, lo, &a) && !__builtin_add_overflow(off, hi, &b) && a >= 0 &&
         b <= (int64_t)s->nbytes;
}

rg_tensor *rg_tensor_wrap(rg_dtype dt, int ndim, const int64_t *shape, const int64_t *strides,
                          void *data, size_t nbytes, void (*release)(void *, void *), void *ud) {
  int64_t numel;
  size_t need;
  if (!shape_size(dt, ndim, shape, &numel, &need)) return NULL;
  rg_tensor *t = header(dt, ndim, shape);
  if (!t) return NULL;
  t->data = data;
  if (strides)
    memcpy(t->strides, strides, (size_t)ndim * sizeof(int64_t));
  else
    c_strides(t);
  int64_t lo, hi;
  bool empty;
  bool fits = extent(t, ndim, t->shape, t->strides, &lo, &hi, &empty);
  rg_storage probe = {data, nbytes, 1, NULL, NULL, false, NULL, false};
  if (!empty && (!fits || !inside(&probe, 0, lo, hi))) { /* an empty tensor reads nothing */
    rg_free(t);
    return NULL;
  }
  t->storage = storage_new(data, nbytes, release, ud);
  if (!t->storage) {
    rg_free(t);
    return NULL;
  }
  return t;
}

rg_tensor *rg_tensor_wrap_on(const rg_buffer_type *bt, rg_dtype dt, int ndim, const int64_t *shape,
                             const int64_t *strides, void *data, size_t nbytes) {
  rg_tensor *t = rg_tensor_wrap(dt, ndim, shape, strides, data, nbytes, NULL, NULL);
  if (t && bt) t->storage->buft = bt, t->storage->borrowed = true;
  return t;
}

rg_tensor *rg_tensor_view(const rg_tensor *t, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset) {
  int64_t numel;
  size_t nb;
  if (!t || !shape_size(t->dtype, ndim, shape, &numel, &nb)) return NULL;
  int64_t lo, hi;
  bool empty;
  rg_tensor probe = {.dtype = t->dtype};
  int64_t off;
  bool fits = extent(&probe, ndim, shape, strides, &lo, &hi, &empty);
  if (__builtin_add_overflow((int64_t)(t->data - (char *)t->storage->base), offset, &off)) return NULL;
  if (!empty && (!fits || !inside(t->storage, off, lo, hi))) return NULL; /* an empty view reads nothing */
  rg_tensor *v = header(t->dtype, ndim, shape);
  if (!v) return NULL;
  if (ndim) memcpy(v->strides, strides, (size_t)ndim * sizeof(int64_t));
  v->data = (char *)t->storage->base + off;
  v->storage = t->storage;
  __atomic_add_fetch(&t->storage->refs, 1, __ATOMIC_ACQ_REL);
  return v;
}

bool rg_reshape_strides(int on_, const int64_t *os_, const int64_t *ost_, int nn, const int64_t *ns,
                        int64_t es, int64_t *nst) {
  int64_t os[RG_MAX_NDIM], ost[RG_MAX_NDIM], numel = 1;
  int on = 0;
  for (int d = 0; d < on_; d++) {
    numel *= os_[d];
    if (os_[d] != 1) os[on] = os_[d], ost[on++] = ost_[d]; /* size 1 places nothing */
  }
  if (numel == 0) {
    for (int d = nn - 1; d >= 0; d--) nst[d] = d == nn - 1 ? es : nst[d + 1] * ns[d + 1];
    return true;
  }
  int oi = 0, ni = 0;
  while (ni < nn && oi < on) {
    int oj = oi + 1, nj = ni + 1;
    int64_t np = ns[ni], op = os[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= nn) return false;
        np *= ns[nj++];
      } else {
        if (oj >= on) return false;
        op *= os[oj++];
      }
    }
    for (int k = oi; k < oj - 1; k++)
      if (ost[k] != ost[k + 1] * os[k + 1]) return false;
    nst[nj - 1] = ost[oj - 1];
    for (int k = nj - 1; k > ni; k--) nst[k - 1] = nst[k] * ns[k];
    ni = nj;
    oi = oj;
  }
  if (oi < on) return false;
  for (; ni < nn; ni++) nst[ni] = es;
  return true;
}

rg_tensor *rg_tensor_ref(const rg_tensor *t) {
  if (!t) return NULL;
  return rg_tensor_view(t, t->ndim, t->shape, t->strides, 0);
}

rg_tensor *rg_tensor_permute(const rg_tensor *t, const int *perm) {
  if (!t) return NULL;
  int64_t shape[RG_MAX_NDIM], strides[RG_MAX_NDIM];
  bool seen[RG_MAX_NDIM] = {0};
  for (int i = 0; i < t->ndim; i++) {
    int p = perm[i];
    if (p < 0 || p >= t->ndim || seen[p]) return NULL;
    seen[p] = true;
    shape[i] = t->shape[p];
    strides[i] = t->strides[p];
  }
  return rg_tensor_view(t, t->ndim, shape, strides, 0);
}

void rg_tensor_free(rg_tensor *t) {
  if (!t) return;
  storage_release(t->storage);
  rg_free(t);
}

/* ------------------------------------------------------------------ element access */

/* A tensor's sizes are known and their product fits (its data was
 * allocated): the plain product, without rg_shape_numel's checks, on the
 * kernels' path. */
int64_t rg_tensor_numel(const rg_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

bool rg_tensor_is_c_contiguous(const rg_tensor *t) {
  int64_t s = (int64_t)rg_dtype_size(t->dtype);
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

bool rg_tensor_is_f_contiguous(const rg_tensor *t) {
  int64_t s = (int64_t)rg_dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] != 1 && t->strides[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

void *rg_tensor_at(const rg_tensor *t, const int64_t *idx) {
  char *p = t->data;
  for (int i = 0; i < t->ndim; i++) p += idx[i] * t->strides[i];
  return p;
}

static char *flat_at(const rg_tensor *t, int64_t i) {
  char *p = t->data;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->shape[d];
    p += (i % n) * t->strides[d];
    i /= n;
  }
  return p;
}

/* Element i where the host reads it: in place, or for a tensor on a
 * device its bytes copied into buf. */
static inline const char *elem_in(const rg_tensor *t, int64_t i, char *buf) {
  const char *p = flat_at(t, i);
  if (__builtin_expect(!on_device(t->storage), 1)) return p;
  const rg_buffer_type *bt = t->storage->buft;
  memset(buf, 0, 8);
  bt->download(bt, buf, p, rg_dtype_size(t->dtype));
  return buf;
}

/* Writes element i from buf (the host's bytes) where t keeps it. */
static inline void elem_out(rg_tensor *t, int64_t i, const char *buf) {
  char *p = flat_at(t, i);
  size_t es = rg_dtype_size(t->dtype);
  if (__builtin_expect(!on_device(t->storage), 1)) memcpy(p, buf, es);
  else t->storage->buft->upload(t->storage->buft, p, buf, es);
}

/* Whether i is an element of t (0 <= i < numel). */
static inline bool in_range(const rg_tensor *t, int64_t i) {
  if (i < 0) return false;
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return i < n;
}

double rg_tensor_get_f64(const rg_tensor *t, int64_t i) {
  char buf[8];
  return in_range(t, i) ? rg_load_f64(t->dtype, elem_in(t, i, buf)) : NAN;
}

int64_t rg_tensor_get_i64(const rg_tensor *t, int64_t i) {
  char buf[8];
  return in_range(t, i) ? rg_load_i64(t->dtype, elem_in(t, i, buf)) : 0;
}

void rg_tensor_set_f64(rg_tensor *t, int64_t i, double v) {
  char buf[8];
  if (!in_range(t, i)) return;
  rg_store_f64(t->dtype, buf, v);
  elem_out(t, i, buf);
}

void rg_tensor_set_i64(rg_tensor *t, int64_t i, int64_t v) {
  char buf[8];
  if (!in_range(t, i)) return;
  rg_store_i64(t->dtype, buf, v);
  elem_out(t, i, buf);
}

/* Odometer over the elements of t in C order. */
typedef struct iter {
  const rg_tensor *t;
  int64_t idx[RG_MAX_NDIM];
  char *p;
  int64_t left;
} iter;

static void iter_init(iter *it, const rg_tensor *t) {
  it->t = t;
  memset(it->idx, 0, sizeof it->idx);
  it->p = t->data;
  it->left = rg_tensor_numel(t);
}

/* The current element, then advance; NULL when done. */
static char *iter_next(iter *it) {
  if (it->left-- <= 0) return NULL;
  char *cur = it->p;
  const rg_tensor *t = it->t;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (++it->idx[d] < t->shape[d]) {
      it->p += t->strides[d];
      break;
    }
    it->p -= (it->idx[d] - 1) * t->strides[d];
    it->idx[d] = 0;
  }
  return cur;
}

/* ------------------------------------------------------------------ overlap */

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* The byte offsets of t's elements from its data pointer, sorted. */
static int64_t *element_offsets(const rg_tensor *t, int64_t n) {
  int64_t *o = rg_malloc((size_t)n * sizeof *o);
  if (!o) return NULL;
  iter it;
  iter_init(&it, t);
  for (int64_t e = 0; e < n; e++) o[e] = iter_next(&it) - t->data;
  qsort(o, (size_t)n, sizeof *o, cmp_i64);
  return o;
}

static int64_t gcd64(int64_t a, int64_t b) {
  a = a < 0 ? -a : a, b = b < 0 ? -b : b;
  while (b) {
    int64_t r = a % b;
    a = b, b = r;
  }
  return a;
}

#define OVERLAP_EXACT_MAX (1 << 20) /* runs compared one by one, at most */

/* t as runs of bytes: its last dimension, when that is contiguous, as one
 * run of *width bytes per row (the rows' first elements in *rows), else
 * each element a run of its own. */
static void as_runs(const rg_tensor *t, rg_tensor *rows, int64_t *width) {
  int64_t size = (int64_t)rg_dtype_size(t->dtype);
  *rows = *t;
  *width = size;
  int last = t->ndim - 1;
  if (last >= 0 && t->strides[last] == size) {
    *width = size * t->shape[last];
    rows->ndim = last;
  }
}

bool rg_tensor_overlap(const rg_tensor *a, const rg_tensor *b) {
  if (!a || !b || a->storage != b->storage) return false;
  int64_t lo[2], hi[2], na = rg_tensor_numel(a), nb = rg_tensor_numel(b), g = 0;
  bool empty[2];
  const rg_tensor *t[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    extent(t[k], t[k]->ndim, t[k]->shape, t[k]->strides, &lo[k], &hi[k], &empty[k]);
    for (int d = 0; d < t[k]->ndim; d++)
      if (t[k]->shape[d] > 1) g = gcd64(g, t[k]->strides[d]);
  }
  int64_t diff = (int64_t)(a->data - b->data); /* a's element 0 from b's */
  if (empty[0] || empty[1] || !(diff + lo[0] < hi[1] && lo[1] < diff + hi[0])) return false;
  /* every difference of two element addresses is diff plus a multiple of g */
  int64_t size = (int64_t)rg_dtype_size(a->dtype);
  if (g > 0 && a->dtype == b->dtype) {
    int64_t r = ((diff % g) + g) % g;
    if (r >= size && g - r >= size) return false;
  }
  /* the runs of bytes themselves, in order of address (a run of a
   * tensor that does not overlap itself ends before its next begins) */
  rg_tensor ra, rb;
  int64_t wa, wb;
  as_runs(a, &ra, &wa), as_runs(b, &rb, &wb);
  na = rg_tensor_numel(&ra), nb = rg_tensor_numel(&rb);
  if (na + nb > OVERLAP_EXACT_MAX) return true;
  int64_t *oa = element_offsets(&ra, na), *ob = element_offsets(&rb, nb);
  bool meet = !oa || !ob;
  for (int64_t i = 0, j = 0; !meet && i < na && j < nb;) {
    int64_t x = oa[i] + diff, y = ob[j]; /* offsets from b's data pointer */
    if (x < y + wb && y < x + wa) meet = true;
    else if (x < y) i++;
    else j++;
  }
  rg_free(oa), rg_free(ob);
  return meet;
}

static rg_tensor *on_host_then_back(const rg_tensor *t, rg_dtype dt);

rg_tensor *rg_tensor_copy(const rg_tensor *t) {
  if (!t) return NULL;
  if (on_device(t->storage)) return on_host_then_back(t, t->dtype);
  rg_tensor *r = alloc_tensor(t->dtype, t->ndim, t->shape, false);
  if (!r) return NULL;
  size_t es = rg_dtype_size(t->dtype);
  if (rg_tensor_is_c_contiguous(t)) {
    memcpy(r->data, t->data, r->storage->nbytes);
    return r;
  }
  iter it;
  iter_init(&it, t);
  char *dst = r->data, *src;
  while ((src = iter_next(&it))) {
    memcpy(dst, src, es);
    dst += es;
  }
  return r;
}

rg_tensor *rg_tensor_cast(const rg_tensor *t, rg_dtype dt) {
  if (!t) return NULL;
  if (on_device(t->storage)) return on_host_then_back(t, dt);
  rg_tensor *r = alloc_tensor(dt, t->ndim, t->shape, false);
  if (!r) return NULL;
  size_t es = rg_dtype_size(dt);
  bool fl = rg_dtype_is_float(t->dtype);
  iter it;
  iter_init(&it, t);
  char *dst = r->data, *src;
  while ((src = iter_next(&it))) {
    if (fl)
      rg_store_f64(dt, dst, rg_load_f64(t->dtype, src));
    else
      rg_store_i64(dt, dst, rg_load_i64(t->dtype, src));
    dst += es;
  }
  return r;
}

/* ------------------------------------------------------------------ devices */

static bool same_shape(const rg_tensor *a, const rg_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}


rg_tensor *rg_tensor_empty_on(const rg_buffer_type *bt, rg_dtype dt, int ndim,
                              const int64_t *shape) {
  if (!bt) return alloc_tensor(dt, ndim, shape, false);
  int64_t numel;
  size_t nbytes;
  if (!shape_size(dt, ndim, shape, &numel, &nbytes)) return NULL;
  void *base = bt->alloc(bt, nbytes ? nbytes : 1);
  if (!base) return NULL;
  rg_tensor *t = adopt(dt, ndim, shape, base, nbytes, bt);
  if (!t) bt->free(bt, base, nbytes ? nbytes : 1);
  return t;
}

/* The bytes a device view covers, downloaded into a host buffer, as a host
 * view of the same strides. */
static rg_tensor *download_view(const rg_tensor *t) {
  int64_t lo, hi;
  bool empty;
  extent(t, t->ndim, t->shape, t->strides, &lo, &hi, &empty);
  if (empty) return alloc_tensor(t->dtype, t->ndim, t->shape, false);
  size_t span = (size_t)(hi - lo);
  char *buf = rg_aligned_alloc(64, (span + 63) & ~(size_t)63);
  rg_tensor *h = buf ? adopt(t->dtype, t->ndim, t->shape, buf, span, NULL) : NULL;
  const rg_buffer_type *bt = t->storage->buft;
  if (!h || bt->download(bt, buf, t->data + lo, span) != 0) {
    if (h) rg_tensor_free(h);
    else rg_free(buf);
    return NULL;
  }
  h->data = buf - lo; /* t's layout over the downloaded span */
  memcpy(h->strides, t->strides, (size_t)t->ndim * sizeof(int64_t));
  return h;
}

rg_tensor *rg_tensor_to_host(const rg_tensor *t) {
  if (!t) return NULL;
  if (!on_device(t->storage)) return rg_tensor_copy(t);
  rg_tensor *h = download_view(t);
  if (!h || rg_tensor_is_c_contiguous(h)) return h;
  rg_tensor *r = rg_tensor_copy(h);
  rg_tensor_free(h);
  return r;
}

/* A contiguous device tensor copied into a new buffer of bt by bt's
 * copy_from, without the host: *done false when bt cannot (another kind
 * of device, or none to try). */
static rg_tensor *device_to_device(const rg_tensor *t, const rg_buffer_type *bt, bool *done) {
  *done = false;
  if (!bt->copy_from || !on_device(t->storage) || !rg_tensor_is_c_contiguous(t)) return NULL;
  rg_tensor *r = rg_tensor_empty_on(bt, t->dtype, t->ndim, t->shape);
  if (!r) return *done = true, NULL;
  int rc = r->storage->nbytes ? bt->copy_from(bt, r->data, t->storage->buft, t->data, r->storage->nbytes) : 0;
  if (rc == RG_ERR_TYPE) return rg_tensor_free(r), NULL;
  *done = true;
  if (rc) rg_tensor_free(r);
  return rc ? NULL : r;
}

rg_tensor *rg_tensor_to_device(const rg_tensor *t, const rg_buffer_type *bt) {
  if (!t) return NULL;
  if (!bt) return rg_tensor_to_host(t);
  if (bt->device == RG_DEVICE_HOST) { /* host memory of a buffer type (pinned) */
    rg_tensor *r = rg_tensor_empty_on(bt, t->dtype, t->ndim, t->shape);
    if (r && rg_tensor_copy_to(r, t) != RG_OK) rg_tensor_free(r), r = NULL;
    return r;
  }
  bool done;
  rg_tensor *d = device_to_device(t, bt, &done);
  if (done) return d;
  bool direct = !on_device(t->storage) && rg_tensor_is_c_contiguous(t);
  rg_tensor *h = direct ? (rg_tensor *)t : rg_tensor_to_host(t);
  rg_tensor *r = h ? rg_tensor_empty_on(bt, t->dtype, t->ndim, t->shape) : NULL;
  if (r && r->storage->nbytes && bt->upload(bt, r->data, h->data, r->storage->nbytes) != 0) {
    rg_tensor_free(r);
    r = NULL;
  }
  if (h != t) rg_tensor_free(h);
  return r;
}

/* dst[...] = src[...] between host tensors of the same dtype and shape. */
static void host_copy_to(rg_tensor *dst, const rg_tensor *src) {
  size_t es = rg_dtype_size(src->dtype);
  if (rg_tensor_is_c_contiguous(dst) && rg_tensor_is_c_contiguous(src)) {
    memmove(dst->data, src->data, (size_t)rg_tensor_numel(src) * es);
    return;
  }
  iter a, b;
  iter_init(&a, dst);
  iter_init(&b, src);
  char *d, *s;
  while ((d = iter_next(&a)) && (s = iter_next(&b))) memcpy(d, s, es);
}

/* Copies host values into a device view: the bytes it covers go down,
 * take the values, and go back up. */
static int device_copy_to(rg_tensor *dst, const rg_tensor *h) {
  const rg_buffer_type *bt = dst->storage->buft;
  if (rg_tensor_is_c_contiguous(dst) && rg_tensor_is_c_contiguous(h))
    return bt->upload(bt, dst->data, h->data, (size_t)rg_tensor_numel(h) * rg_dtype_size(h->dtype));
  rg_tensor *span = download_view(dst);
  if (!span) return RG_ERR_NOMEM;
  host_copy_to(span, h);
  int64_t lo, hi;
  bool empty;
  extent(dst, dst->ndim, dst->shape, dst->strides, &lo, &hi, &empty);
  int rc = empty ? 0 : bt->upload(bt, dst->data + lo, span->data + lo, (size_t)(hi - lo));
  rg_tensor_free(span);
  return rc;
}

/* dst = src for contiguous tensors where no host copy of src is needed:
 * from a device straight into host memory (ordinary or pinned: the
 * buffer type's download), or between devices (copy_from).  *done false
 * when neither applies. */
static int copy_direct(rg_tensor *dst, const rg_tensor *src, bool *done) {
  *done = false;
  if (!on_device(src->storage) || !rg_tensor_is_c_contiguous(dst) || !rg_tensor_is_c_contiguous(src)) return 0;
  const rg_buffer_type *sb = src->storage->buft, *db = dst->storage->buft;
  size_t n = (size_t)rg_tensor_numel(src) * rg_dtype_size(src->dtype);
  int rc = RG_ERR_TYPE;
  if (!db || db->device == RG_DEVICE_HOST) rc = sb->download(sb, dst->data, src->data, n);
  else if (db && db->copy_from) rc = db->copy_from(db, dst->data, sb, src->data, n);
  *done = rc != RG_ERR_TYPE;
  return rc ? RG_ERR_NOMEM : RG_OK;
}

int rg_tensor_copy_to(rg_tensor *dst, const rg_tensor *src) {
  if (!dst || !src || dst->dtype != src->dtype || !same_shape(dst, src)) return RG_ERR_TYPE;
  if (rg_tensor_numel(src) == 0) return RG_OK;
  bool done;
  int drc = copy_direct(dst, src, &done);
  if (done) return drc;
  const rg_tensor *h = on_device(src->storage) ? rg_tensor_to_host(src) : src;
  if (!h) return RG_ERR_NOMEM;
  int rc = RG_OK;
  if (on_device(dst->storage)) rc = device_copy_to(dst, h) ? RG_ERR_NOMEM : RG_OK;
  else host_copy_to(dst, h);
  if (h != src) rg_tensor_free((rg_tensor *)h);
  return rc;
}

/* A copy or a conversion of a device tensor, the result in the same
 * buffer type: a copy stays on the device where the buffer type copies
 * there (copy_from), a conversion is done in host memory. */
static rg_tensor *on_host_then_back(const rg_tensor *t, rg_dtype dt) {
  if (dt == t->dtype) return rg_tensor_to_device(t, t->storage->buft); /* on the device where it can */
  rg_tensor *h = rg_tensor_to_host(t);
  rg_tensor *c = h && dt != t->dtype ? rg_tensor_cast(h, dt) : h;
  rg_tensor *r = c ? rg_tensor_to_device(c, t->storage->buft) : NULL;
  if (c != h) rg_tensor_free(c);
  rg_tensor_free(h);
  return r;
}

/* Host copies of a and b when either lives on a device (NULL: neither
 * does, or memory ran out: *failed). */
static bool on_host_pair(const rg_tensor *a, const rg_tensor *b, rg_tensor **ha, rg_tensor **hb) {
  *ha = *hb = NULL;
  if (!rg_tensor_on_device(a) && !rg_tensor_on_device(b)) return false;
  *ha = rg_tensor_to_host(a);
  *hb = rg_tensor_to_host(b);
  return true;
}

bool rg_tensor_equal(const rg_tensor *a, const rg_tensor *b) {
  if (!a || !b || a->dtype != b->dtype || !same_shape(a, b)) return false;
  rg_tensor *ha, *hb;
  if (on_host_pair(a, b, &ha, &hb)) {
    bool eq = ha && hb && rg_tensor_equal(ha, hb);
    rg_tensor_free(ha), rg_tensor_free(hb);
    return eq;
  }
  bool fl = rg_dtype_is_float(a->dtype);
  iter ia, ib;
  iter_init(&ia, a);
  iter_init(&ib, b);
  char *p, *q;
  while ((p = iter_next(&ia)) && (q = iter_next(&ib))) {
    if (fl) {
      double x = rg_load_f64(a->dtype, p), y = rg_load_f64(b->dtype, q);
      if (x != y && !(isnan(x) && isnan(y))) return false;
    } else if (rg_load_i64(a->dtype, p) != rg_load_i64(b->dtype, q)) {
      return false;
    }
  }
  return true;
}

bool rg_tensor_allclose(const rg_tensor *a, const rg_tensor *b, double rtol, double atol) {
  if (!a || !b || !same_shape(a, b)) return false;
  rg_tensor *ha, *hb;
  if (on_host_pair(a, b, &ha, &hb)) {
    bool close = ha && hb && rg_tensor_allclose(ha, hb, rtol, atol);
    rg_tensor_free(ha), rg_tensor_free(hb);
    return close;
  }
  iter ia, ib;
  iter_init(&ia, a);
  iter_init(&ib, b);
  char *p, *q;
  while ((p = iter_next(&ia)) && (q = iter_next(&ib))) {
    double x = rg_load_f64(a->dtype, p), y = rg_load_f64(b->dtype, q);
    if (isnan(x) || isnan(y)) {
      if (isnan(x) != isnan(y)) return false;
      continue;
    }
    if (x == y) continue; /* equal infinities */
    if (!(fabs(x - y) <= atol + rtol * fabs(y))) return false;
  }
  return true;
}

/* ------------------------------------------------------------------ printing */

void rgc_fprint_elem(FILE *f, rg_dtype dt, const void *p) {
  if (dt == RG_BOOL) {
    fputs(*(const uint8_t *)p ? "#t" : "#f", f);
  } else if (rg_dtype_is_float(dt)) {
    rgc_fprint_float(f, rg_load_f64(dt, p), dt == RG_FLOAT32);
  } else {
    fprintf(f, "%lld", (long long)rg_load_i64(dt, p));
  }
}

void rgc_fprint_float(FILE *f, double d, bool single) {
  if (isnan(d)) { fputs("+nan.0", f); return; }
  if (isinf(d)) { fputs(d > 0 ? "+inf.0" : "-inf.0", f); return; }
  char buf[40];
  for (int prec = single ? 6 : 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    double back = strtod(buf, NULL);
    if (single ? (float)back == (float)d : back == d) break;
  }
  fputs(buf, f);
  if (!strpbrk(buf, ".eEn")) fputs(".0", f);
}

void rg_tensor_fprint(FILE *f, const rg_tensor *t) {
  if (rg_tensor_on_device(t)) { /* its values, read back */
    rg_tensor *h = rg_tensor_to_host(t);
    if (h) rg_tensor_fprint(f, h);
    else fprintf(f, "%s %s <out of memory reading it back>", rg_dtype_name(t->dtype), rgc_shape_str(t->ndim, t->shape));
    rg_tensor_free(h);
    return;
  }
  fprintf(f, "%s %s ", rg_dtype_name(t->dtype), rgc_shape_str(t->ndim, t->shape));
  if (t->ndim == 0) {
    rgc_fprint_elem(f, t->dtype, t->data);
    return;
  }
  int64_t n = rg_tensor_numel(t);
  if (n == 0) {
    for (int d = 0; d < t->ndim; d++) fputc('[', f);
    for (int d = 0; d < t->ndim; d++) fputc(']', f);
    return;
  }
  iter it;
  iter_init(&it, t);
  char *p;
  for (int d = 0; d < t->ndim; d++) fputc('[', f);
  while ((p = iter_next(&it))) {
    rgc_fprint_elem(f, t->dtype, p);
    /* brackets closed by this element: trailing dims whose index wrapped */
    int closed = 0;
    for (int d = t->ndim - 1; d >= 0 && it.idx[d] == 0; d--) closed++;
    if (it.left <= 0) closed = t->ndim;
    for (int k = 0; k < closed; k++) fputc(']', f);
    if (it.left > 0) {
      fputc(' ', f);
      for (int k = 0; k < closed; k++) fputc('[', f);
    }
  }
}
