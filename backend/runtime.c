/*
 * runtime.c — what kernels use while a function runs: output buffers
 * (reused or pooled), errors, and a fork-join pool of worker threads.
 *
 * Buffers.  A cell keeps its tensor between calls.  rgb_output() reuses it
 * when its storage is unshared (count 1) and large enough, rewriting the
 * header in place; otherwise it takes a released tensor from the pool or
 * allocates.  Released intermediates (rgb_release) keep their storage in
 * the pool for the next rgb_output of any shape that fits (the best fit;
 * the pool keeps at most RGB_POOL_MAX tensors, dropping the oldest).
 *
 * Threads.  A parallel loop hands out chunks of the range through an
 * atomic counter, the calling thread working too, and returns when every
 * chunk is done.  Between loops a worker first polls for the next one for
 * a short while (SPIN_ROUNDS yields of the processor), then sleeps on a
 * condition variable; the caller waits for the workers the same way.
 * Waking a sleeping thread costs tens of microseconds on a busy virtual
 * machine, as long as a Scan step's whole fused kernel, and the loops of
 * a step come one after the other; yielding rather than spinning leaves
 * the processor to OpenBLAS's threads, which run the products between
 * them.
 */
#include "backend/backend-impl.h"
#include "base/base.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

int rgb_error(rgb_exec *x, int code, const char *fmt, ...) {
  rgb_runtime *rt = x->rt;
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(rt->err, sizeof rt->err, "%s: ", x->node->label);
  vsnprintf(rt->err + n, sizeof rt->err - (size_t)n, fmt, ap);
  va_end(ap);
  rt->errcode = code ? code : RG_ERR_TYPE;
  return rt->errcode;
}

/* ------------------------------------------------------------------ buffers */

static bool shape_bytes(rg_dtype dt, int ndim, const int64_t *shape, size_t *out) {
  size_t n = rg_dtype_size(dt);
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || __builtin_mul_overflow(n, (size_t)shape[i], &n)) return false;
  }
  *out = n;
  return true;
}

/* Makes t (unshared) a C-contiguous tensor of the given shape at the start
 * of its storage. */
static void reshape_in_place(rg_tensor *t, rg_dtype dt, int ndim, const int64_t *shape) {
  t->dtype = dt;
  t->ndim = ndim;
  int64_t stride = (int64_t)rg_dtype_size(dt);
  for (int i = ndim - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->strides[i] = stride;
    stride *= shape[i] ? shape[i] : 1;
  }
  t->data = rg_storage_base(t);
}

static bool fits(const rg_tensor *t, size_t nbytes) {
  return rg_storage_refcount(t) == 1 && rg_storage_nbytes(t) >= nbytes;
}

/* The pooled tensor with the least room for nbytes, and not much more
 * (best fit: a first fit hands a larger buffer to a smaller request, and
 * the larger request after it then allocates, so the pool grows every
 * call of a program whose sizes differ by a little, e.g. the Scan traces
 * of T and T + 1 rows). */
static rg_tensor *pool_take(rgb_pool *p, size_t nbytes) {
  int best = -1;
  size_t best_cap = 0;
  for (int i = 0; i < p->n; i++) {
    size_t cap = rg_storage_nbytes(p->v[i]);
    if (cap >= nbytes && cap <= 2 * nbytes + 4096 && (best < 0 || cap < best_cap)) best = i, best_cap = cap;
  }
  if (best < 0) return NULL;
  rg_tensor *t = p->v[best];
  memmove(p->v + best, p->v + best + 1, (size_t)(p->n - best - 1) * sizeof *p->v);
  p->n--;
  return t;
}

/* Keeps t; a full pool first frees its oldest tensor, so buffers that
 * kernels allocate outside rgb_output and release every call (a copy made
 * for a product, say) cannot make the pool grow without end. */
static void pool_put(rgb_pool *p, rg_tensor *t) {
  if (p->n == RGB_POOL_MAX) {
    rg_tensor_free(p->v[0]);
    memmove(p->v, p->v + 1, (size_t)(p->n - 1) * sizeof *p->v);
    p->n--;
  }
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 16;
    rg_tensor **v = rg_realloc(p->v, (size_t)cap * sizeof *v);
    if (!v) {
      rg_tensor_free(t);
      return;
    }
    p->v = v;
    p->cap = cap;
  }
  p->v[p->n++] = t;
}

void rgb_release(rgb_runtime *rt, rg_tensor **cell) {
  rg_tensor *t = *cell;
  *cell = NULL;
  if (!t) return;
  /* the pool holds only storage of our own: a wrapped tensor (a Scan's
   * trace row, the caller's memory) is never handed to another output */
  if (rt->use_pool && rg_storage_refcount(t) == 1 && !rg_storage_is_external(t)) pool_put(&rt->pool, t);
  else rg_tensor_free(t);
}

/* Whether t, left in its cell, already is the output asked for: unshared,
 * at the start of its storage, C-contiguous of that dtype and shape (the
 * common case of a call after the first, checked before any size
 * arithmetic). */
static bool same_header(const rg_tensor *t, rg_dtype dt, int ndim, const int64_t *shape) {
  if (t->dtype != dt || t->ndim != ndim) return false;
  int64_t stride = (int64_t)rg_dtype_size(dt);
  for (int i = ndim - 1; i >= 0; i--) {
    if (t->shape[i] != shape[i] || t->strides[i] != stride) return false;
    stride *= shape[i] ? shape[i] : 1;
  }
  return t->data == rg_storage_base(t) && rg_storage_refcount(t) == 1;
}

/* An output on a device: the cell's tensor when it already is one of the
 * right header in the same buffer type, else a new buffer (device buffers
 * are not pooled). */
static rg_tensor *device_output(rgb_exec *x, int j, rg_dtype dt, int ndim, const int64_t *shape) {
  rg_tensor **cell = x->outp[j];
  rg_tensor *t = *cell;
  if (t && rg_tensor_buffer_type(t) == x->buft && same_header(t, dt, ndim, shape)) return t;
  if (t) rgb_release(x->rt, cell);
  t = rg_tensor_empty_on(x->buft, dt, ndim, shape);
  if (!t) rgb_error(x, RG_ERR_NOMEM, "out of memory on %s", x->buft->name);
  return *cell = t;
}

/* A planned output: a tensor wrapping its place in the arena (NULL when
 * the value does not fit there, or out of memory: the caller allocates). */
static rg_tensor *planned_output(rgb_exec *x, int j, rg_dtype dt, int ndim, const int64_t *shape,
                                 size_t nbytes) {
  const rgb_planned *pl = &x->plan[j];
  if (nbytes > pl->nbytes) return NULL;
  rg_tensor **cell = x->outp[j];
  if (*cell && rg_storage_base(*cell) == pl->at && rg_storage_refcount(*cell) == 1) {
    reshape_in_place(*cell, dt, ndim, shape);
    return *cell;
  }
  rg_tensor *t = rg_tensor_wrap_on(NULL, dt, ndim, shape, NULL, pl->at, pl->nbytes);
  if (!t) return NULL;
  if (*cell) rgb_release(x->rt, cell);
  return *cell = t;
}

rg_tensor *rgb_output(rgb_exec *x, int j, rg_dtype dt, int ndim, const int64_t *shape) {
  if (x->buft) return device_output(x, j, dt, ndim, shape);
  rg_tensor **cell = x->outp[j];
  rg_tensor *t = *cell;
  if (t && same_header(t, dt, ndim, shape)) return t;
  size_t nbytes;
  if (!shape_bytes(dt, ndim, shape, &nbytes)) {
    rgb_error(x, RG_ERR_LIMIT, "output size overflows");
    return NULL;
  }
  if (x->plan && x->plan[j].at && (t = planned_output(x, j, dt, ndim, shape, nbytes))) return t;
  t = *cell;
  if (t && fits(t, nbytes)) {
    reshape_in_place(t, dt, ndim, shape);
    return t;
  }
  if (t) rgb_release(x->rt, cell);
  t = x->rt->use_pool ? pool_take(&x->rt->pool, nbytes) : NULL;
  if (t) {
    reshape_in_place(t, dt, ndim, shape);
  } else {
    t = rg_tensor_empty(dt, ndim, shape);
    if (!t) {
      rgb_error(x, RG_ERR_NOMEM, "out of memory for an output of %zu bytes", nbytes);
      return NULL;
    }
  }
  *cell = t;
  return t;
}

void rgb_set_output(rgb_exec *x, int j, rg_tensor *t) {
  rg_tensor **cell = x->outp[j];
  if (*cell) rgb_release(x->rt, cell);
  *cell = t;
}

/* ------------------------------------------------------------------ threads */

/* Invariants: gen, quit and the loop's fields (fn, ud, total, chunk,
 * next) are written under m, and a worker reads the fields only after
 * taking m and seeing a new gen; polling reads gen and quit by atomic
 * loads.  busy counts the workers still in the current loop: set under m
 * before gen moves, decremented atomically by each worker, and the one
 * that makes it 0 signals `done` under m, where the caller checks it
 * before it sleeps (so the signal is never lost). */
typedef struct rgb_tpool {
  int n;                 /* worker threads (the caller is one more) */
  pthread_t *th;
  pthread_mutex_t m;
  pthread_cond_t go, done;
  uint64_t gen;          /* incremented for each parallel loop */
  int busy;              /* workers still in the current loop */
  bool quit;
  void (*fn)(void *, int64_t, int64_t);
  void *ud;
  int64_t total, chunk;
  int64_t next;          /* next chunk start (atomic) */
} rgb_tpool;

enum { SPIN_ROUNDS = 256 }; /* yields before sleeping: about 0.1-0.3 ms */

static void run_chunks(rgb_tpool *p) {
  for (;;) {
    int64_t lo = __atomic_fetch_add(&p->next, p->chunk, __ATOMIC_RELAXED);
    if (lo >= p->total) return;
    int64_t hi = lo + p->chunk < p->total ? lo + p->chunk : p->total;
    p->fn(p->ud, lo, hi);
  }
}

/* Polls for a loop after `seen` (or the end) without the lock. */
static void poll_for_work(rgb_tpool *p, uint64_t seen) {
  for (int i = 0; i < SPIN_ROUNDS; i++) {
    if (__atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
      return;
    sched_yield();
  }
}

static void *worker(void *arg) {
  rgb_tpool *p = arg;
  uint64_t seen = 0;
  for (;;) {
    poll_for_work(p, seen);
    pthread_mutex_lock(&p->m);
    while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->m);
    bool quit = p->quit;
    seen = p->gen;
    pthread_mutex_unlock(&p->m);
    if (quit) break;
    run_chunks(p);
    if (__atomic_sub_fetch(&p->busy, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&p->m); /* the caller checks busy under the lock before it sleeps */
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->m);
    }
  }
  return NULL;
}

static rgb_tpool *tpool_new(int nworkers) {
  rgb_tpool *p = rg_calloc(1, sizeof *p);
  if (!p) return NULL;
  p->th = rg_calloc((size_t)nworkers, sizeof(pthread_t));
  pthread_mutex_init(&p->m, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
  for (int i = 0; p->th && i < nworkers; i++) {
    if (pthread_create(&p->th[i], NULL, worker, p) != 0) break;
    p->n++;
  }
  return p;
}

static void tpool_free(rgb_tpool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->m);
  __atomic_store_n(&p->quit, true, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->m);
  for (int i = 0; i < p->n; i++) pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->m);
  pthread_cond_destroy(&p->go);
  pthread_cond_destroy(&p->done);
  rg_free(p->th);
  rg_free(p);
}

void rgb_parallel_for(rgb_exec *x, int64_t n, int64_t grain,
                      void (*fn)(void *ud, int64_t lo, int64_t hi), void *ud) {
  rgb_runtime *rt = x->rt;
  if (grain < 1) grain = 1;
  if (rt->nthreads <= 1 || n < 2 * grain) {
    if (n > 0) fn(ud, 0, n);
    return;
  }
  if (!rt->threads) rt->threads = tpool_new(rt->nthreads - 1);
  rgb_tpool *p = rt->threads;
  if (!p || p->n == 0) {
    fn(ud, 0, n);
    return;
  }
  int64_t parts = (int64_t)(p->n + 1) * 4, chunk = (n + parts - 1) / parts;
  if (chunk < grain) chunk = grain;
  pthread_mutex_lock(&p->m);
  p->fn = fn;
  p->ud = ud;
  p->total = n;
  p->chunk = chunk;
  p->next = 0;
  __atomic_store_n(&p->busy, p->n, __ATOMIC_RELAXED);
  __atomic_add_fetch(&p->gen, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->m);
  run_chunks(p);
  for (int i = 0; i < SPIN_ROUNDS && __atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0; i++) sched_yield();
  pthread_mutex_lock(&p->m);
  while (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&p->done, &p->m);
  pthread_mutex_unlock(&p->m);
}

/* ------------------------------------------------------------------ runtime */

rgb_runtime *rgb_runtime_new(int nthreads, bool use_pool) {
  rgb_runtime *rt = rg_calloc(1, sizeof *rt);
  if (!rt) return NULL;
  rt->nthreads = nthreads > 0 ? nthreads : 1;
  rt->use_pool = use_pool;
  return rt;
}

void rgb_runtime_free(rgb_runtime *rt) {
  if (!rt) return;
  tpool_free(rt->threads);
  for (int i = 0; i < rt->pool.n; i++) rg_tensor_free(rt->pool.v[i]);
  rg_free(rt->pool.v);
  rg_free(rt);
}

/* ------------------------------------------------------------------ inner programs */

int rgb_run_inner(rgb_exec *x, struct rgb_program *p, rg_tensor *const *in, rg_tensor **out) {
  int rc = rgb_program_run(p, in, p->nout, NULL, out);
  if (rc) return rgb_error(x, rc, "%s", p->rt->err[0] ? p->rt->err : "the inner graph failed");
  return RG_OK;
}
