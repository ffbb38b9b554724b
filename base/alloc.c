/*
 * alloc.c — manual allocation and its fault injection.
 *
 * Everything the library owns by hand (tensor buffers, programs, linker
 * and backend tables) is allocated here, so one counter sees every such
 * allocation.  In a build with RG_FAULT_INJECTION the counter can be
 * armed: the n-th counted allocation after rg_fault_arm(n) returns NULL,
 * as if memory had run out (SQLite tests its error paths the same way).
 * The test that does so (tests/fault/) runs workloads with n = 1, 2, ...
 * until one completes, and checks that every failure is a clean error.
 *
 * Without the option the wrappers are plain calls to the C library and
 * the counter does not exist.
 */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ fault injection */

#ifdef RG_FAULT_INJECTION
/* fault_at: the counted allocation that fails (0: none); fault_n: counted
 * allocations since arming.  Relaxed atomics: only the counts matter. */
static uint64_t fault_at, fault_n;
static bool fault_persist, fault_hit;

bool rg_fault_enabled(void) { return true; }

void rg_fault_arm(uint64_t n, bool persist) {
  __atomic_store_n(&fault_n, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fault_hit, false, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fault_persist, persist, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fault_at, n, __ATOMIC_SEQ_CST);
}

uint64_t rg_fault_count(void) { return __atomic_load_n(&fault_n, __ATOMIC_SEQ_CST); }
bool rg_fault_fired(void) { return __atomic_load_n(&fault_hit, __ATOMIC_SEQ_CST); }

/* True when this allocation must fail. */
static bool fault_now(void) {
  uint64_t k = __atomic_add_fetch(&fault_n, 1, __ATOMIC_RELAXED);
  uint64_t at = __atomic_load_n(&fault_at, __ATOMIC_RELAXED);
  if (!at || k < at) return false;
  if (k > at && !__atomic_load_n(&fault_persist, __ATOMIC_RELAXED)) return false;
  __atomic_store_n(&fault_hit, true, __ATOMIC_RELAXED);
  return true;
}
#define FAULT() (fault_now())
#else
bool rg_fault_enabled(void) { return false; }
void rg_fault_arm(uint64_t n, bool persist) { (void)n, (void)persist; }
uint64_t rg_fault_count(void) { return 0; }
bool rg_fault_fired(void) { return false; }
#define FAULT() false
#endif

/* ------------------------------------------------------------------ fallible */

void *rg_malloc(size_t n) { return FAULT() ? NULL : malloc(n ? n : 1); }

void *rg_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  if (FAULT()) return NULL;
  return calloc(count ? count : 1, size ? size : 1);
}

void *rg_realloc(void *p, size_t n) { return FAULT() ? NULL : realloc(p, n ? n : 1); }

void *rg_reallocarray(void *p, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  return rg_realloc(p, count * size);
}

char *rg_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = rg_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void *rg_aligned_alloc(size_t align, size_t n) {
  size_t r = n ? (n + align - 1) & ~(align - 1) : align;
  if (r < n) return NULL;
  return FAULT() ? NULL : aligned_alloc(align, r);
}

void rg_free(void *p) { free(p); }

/* ------------------------------------------------------------------ aborting */

static void *must(void *p) {
  if (!p) {
    fputs("relgraph: out of memory\n", stderr);
    abort();
  }
  return p;
}

void *rg_xmalloc(size_t n) { return must(malloc(n ? n : 1)); }
void *rg_xrealloc(void *p, size_t n) { return must(realloc(p, n ? n : 1)); }

/* ------------------------------------------------------------------ allocators */

static void *heap_alloc(size_t n) { return rg_calloc(1, n); }
static void *heap_alloc_abort(size_t n) { return must(calloc(1, n ? n : 1)); }

const rg_allocator rg_heap = {heap_alloc, rg_free, rg_realloc};
const rg_allocator rg_heap_abort = {heap_alloc_abort, rg_free, rg_xrealloc};
