/*
 * mem.c — allocation of collected objects and the library context.
 *
 * Every symbolic object (terms, goals, streams, graphs) is allocated here.
 * Normally that is Boehm GC: rgk_alloc for objects that hold pointers,
 * rgk_alloc_atomic for pointer-free payloads (strings, numbers).
 *
 * With RG_GC_NEVER_FREE (the sanitizer build) the collector is not used:
 * each object is a malloc'd block behind a small header that links it into
 * one global list, and nothing is ever freed.  AddressSanitizer then checks
 * every access against the block's true size, and LeakSanitizer sees the
 * blocks as reachable from the list, so it reports only leaks of manually
 * owned memory (tensor buffers, device memory), which is what we want.
 *
 * Memory scopes bound that mode for long runs (the fuzzers): blocks are
 * listed newest first, so rgk_scope_begin notes the list's head and
 * rgk_scope_end frees every block made since (AddressSanitizer then
 * reports any later use of them) and takes the symbols interned since out
 * of the symbol table.  Nothing made before a scope may keep a pointer to
 * a block made inside it: a global cache that grows on demand allocates
 * with rgk_alloc_global (never in a scope), and lazily filled ones (op and
 * type caches, interned symbols of a layer) are filled before the first
 * scope.  With the collector, scopes do nothing.
 */
#include "kanren/kanren-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <pthread.h>

#ifdef RG_GC_NEVER_FREE

typedef struct nf_hdr { struct nf_hdr *next; size_t size; } nf_hdr;
_Static_assert(sizeof(nf_hdr) == 16, "header keeps 16-byte alignment");
static nf_hdr *nf_all;   /* every block ever allocated (sanitizer mode only) */
static pthread_mutex_t nf_lock = PTHREAD_MUTEX_INITIALIZER;

static nf_hdr *nf_global; /* blocks of global caches, kept out of scopes */

static void *nf_alloc_on(nf_hdr **list, size_t n, bool zero) {
  nf_hdr *h = zero ? calloc(1, sizeof(nf_hdr) + n) : malloc(sizeof(nf_hdr) + n);
  if (!h) { fputs("relgraph: out of memory\n", stderr); abort(); }
  h->size = n;
  pthread_mutex_lock(&nf_lock);
  h->next = *list;
  *list = h;
  pthread_mutex_unlock(&nf_lock);
  return h + 1;
}

static void *nf_alloc(size_t n, bool zero) { return nf_alloc_on(&nf_all, n, zero); }
void *rgk_alloc_global(size_t n) { return nf_alloc_on(&nf_global, n ? n : 1, true); }

static nf_hdr *nf_mark;  /* the newest block when the open scope began */
static bool nf_scoped;

void rgk_scope_begin(void) {
  pthread_mutex_lock(&nf_lock);
  assert(!nf_scoped && "memory scopes do not nest");
  nf_mark = nf_all;
  nf_scoped = true;
  pthread_mutex_unlock(&nf_lock);
  rgk_symtab_mark();
}

void rgk_scope_end(void) {
  rgk_symtab_rollback();
  pthread_mutex_lock(&nf_lock);
  nf_hdr *h = nf_all;
  nf_all = nf_mark;
  nf_scoped = false;
  pthread_mutex_unlock(&nf_lock);
  while (h != nf_mark) {
    nf_hdr *next = h->next;
    free(h);
    h = next;
  }
}

void rg_init(void) {}
int rg_thread_attach(void) { return RG_OK; }
void rg_thread_detach(void) {}
void rg_gc_collect(void) {}
void rgk_warm_heap(void) {}
void rg_gc_warm(void) {}
void *rgk_alloc(size_t n) { return nf_alloc(n ? n : 1, true); }
void *rgk_alloc_atomic(size_t n) { return nf_alloc(n ? n : 1, false); }
void *rgk_realloc(void *p, size_t n) {
  if (!p) return rgk_alloc(n);
  nf_hdr *old = (nf_hdr *)p - 1;
  void *q = rgk_alloc(n);
  memcpy(q, p, old->size < n ? old->size : n);
  return q;
}
#else
#include <gc/gc.h>
#include <gc/gc_mark.h>

int rgk_pair_kind;

static void *oom(void) {
  fputs("relgraph: out of memory\n", stderr);
  abort();
}

/* The collector's handler when a heap cannot grow: every path that
 * allocates collected memory ends the same way (the inline free-list
 * refills would otherwise hand back NULL and be written through). */
static void *GC_CALLBACK oom_handler(size_t bytes) {
  (void)bytes;
  return oom();
}

/* A kind whose objects are scanned for exactly 16 bytes.  Objects of the
 * ordinary kind are traced except their last word (the collector reserves
 * a byte past the end of each object for pointers one past it), so a
 * two-word pair would take 32 bytes; pairs never have such pointers. */
static void make_pair_kind(void) {
  rgk_pair_kind = (int)GC_new_kind(GC_new_free_list(), (GC_word)16 | GC_DS_LENGTH, 0, 1);
}

void *rgk_alloc_pair_slow(void) {
  void *p = GC_generic_malloc(15, rgk_pair_kind); /* 15 + the reserved byte = 16 */
  return p ? p : oom();
}

/* Once per process, however many threads start at once (pthread_once:
 * the others wait until the collector is ready). */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_collector(void) {
  GC_INIT();
  GC_set_oom_fn(oom_handler);
  /* Searches allocate at a high rate and keep little alive: start with a
   * heap large enough that collections are rare (unless the environment
   * chose a size, see the collector's GC_INITIAL_HEAP_SIZE). */
  if (!getenv("GC_INITIAL_HEAP_SIZE")) GC_expand_hp(64u << 20);
  /* Graph building keeps what it allocates (a gradient of 10^5 nodes is
   * all live): collect after allocating half the heap rather than a
   * third, so collections stay proportional to the growing live set and
   * the cost per node flat (bench_grad: 10^5 nodes 780 -> 520 ns each). */
  if (!getenv("GC_FREE_SPACE_DIVISOR")) GC_set_free_space_divisor(2);
  /* pair pointers carry tags 2 and 6 (see kanren-impl.h) */
  GC_register_displacement(2);
  GC_register_displacement(6);
  make_pair_kind();
  /* threads the collector did not start may register (rg_thread_attach) */
  GC_allow_register_threads();
}

void rg_init(void) { pthread_once(&init_once, init_collector); }

/* Allocates garbage until the collector has run once, so every page of
 * its heap has been touched (timed code then pays no first-touch faults). */
void rgk_warm_heap(void) {
  GC_word gcs = GC_get_gc_no();
  for (size_t bytes = 0; GC_get_gc_no() == gcs && bytes < (512u << 20); bytes += 64) {
    void *volatile p = GC_MALLOC(48);
    (void)p;
  }
}

void rg_gc_collect(void) { GC_gcollect(); }
void rgk_scope_begin(void) {}
void rgk_scope_end(void) {}
void *rgk_alloc_global(size_t n) { return rgk_alloc(n); }
void rg_gc_warm(void) { rgk_warm_heap(); }

/* ------------------------------------------------------------------ thread caches */

__thread rgk_tcache *rgk_tc __attribute__((tls_model("initial-exec")));
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

/* A thread's cache dies with the thread; what its lists held is garbage. */
static void tcache_free(void *c) { GC_FREE(c); }
static void tcache_key_init(void) { pthread_key_create(&tcache_key, tcache_free); }

rgk_tcache *rgk_tcache_init(void) {
  rg_init();
  pthread_once(&tcache_once, tcache_key_init);
  rgk_tcache *c = GC_MALLOC_UNCOLLECTABLE(sizeof *c);
  if (!c) oom();
  pthread_setspecific(tcache_key, c);
  rgk_tc = c;
  return c;
}

int rg_thread_attach(void) {
  struct GC_stack_base sb;
  if (GC_get_stack_base(&sb) != GC_SUCCESS) return RG_ERR;
  int rc = GC_register_my_thread(&sb);
  return rc == GC_SUCCESS || rc == GC_DUPLICATE ? RG_OK : RG_ERR;
}

/* The thread's allocation cache goes first: freeing it needs the thread
 * still registered. */
void rg_thread_detach(void) {
  if (rgk_tc) {
    pthread_setspecific(tcache_key, NULL);
    GC_FREE(rgk_tc);
    rgk_tc = NULL;
  }
  GC_unregister_my_thread();
}

void *rgk_alloc(size_t n) {
  size_t gran = (n + GC_GRANULE_BYTES) / GC_GRANULE_BYTES;
  if (gran < RGK_NFREELISTS) return rgk_alloc_in(NULL, n);
  void *p = GC_MALLOC(n);
  return p ? p : oom();
}
void *rgk_alloc_atomic(size_t n) {
  void *p = GC_MALLOC_ATOMIC(n);
  return p ? p : oom();
}
void *rgk_realloc(void *p, size_t n) {
  void *q = GC_REALLOC(p, n);
  return q ? q : oom();
}
#endif

void *rg_gc_alloc(size_t n) { return rgk_alloc(n); }

static void gc_keep(void *p) { (void)p; }
const rg_allocator rgk_gc = {.alloc = rg_gc_alloc, .free = gc_keep};

const char *rg_read_stream_error(int err) {
  return err == EILSEQ ? "it holds a NUL byte (not a text file)" : strerror(err);
}

char *rg_read_stream(FILE *f, size_t *len) {
  size_t n = 0, cap = 65536;
  char *buf = rgk_alloc_atomic(cap);
  for (;;) {
    if (cap - n < 4096) buf = rgk_realloc(buf, cap *= 2);
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    if (memchr(buf + n, 0, got)) return errno = EILSEQ, NULL; /* not text (/dev/zero ends nowhere) */
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) return NULL;
  buf[n] = 0;
  *len = n;
  return buf;
}

char *rg_gc_sprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return s;
}

char *rgk_strndup(const char *s, size_t n) {
  char *d = rgk_alloc_atomic(n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}
char *rgk_strdup(const char *s) { return rgk_strndup(s, strlen(s)); }

char *rgk_vsprintf(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return rgk_strdup("<text too long>"); /* over INT_MAX bytes */
  char *s = rgk_alloc_atomic((size_t)n + 1);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}
char *rgk_sprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return s;
}

void rgk_stack_grow(rgk_stack *s, size_t need) {
  size_t cap = s->cap ? s->cap : 16;
  while (cap < need) cap *= 2;
  if (s->heap) {
    s->v = rgk_realloc(s->v, cap * sizeof(rgk_word));
  } else {
    rgk_word *v = rgk_alloc(cap * sizeof(rgk_word));
    if (s->n) memcpy(v, s->v, s->n * sizeof(rgk_word));
    s->v = v;
    s->heap = true;
  }
  s->cap = cap;
}

/* ------------------------------------------------------------------ context */

rg_ctx *rg_ctx_new(void) {
  rg_init();
  rg_ctx *C = rgk_alloc(sizeof *C);
  C->next_var = 1;
  C->next_scope = 1;
  C->facts = RG_NIL;
  C->stk.heap = C->stk2.heap = C->rw.heap = C->rv.heap = true;
  return C;
}

static void scrub(rgk_stack *s) {
  if (s->v && s->cap > s->n) memset(s->v + s->n, 0, (s->cap - s->n) * sizeof *s->v);
}

void rg_ctx_release_scratch(rg_ctx *C) {
  scrub(&C->stk);
  scrub(&C->stk2);
  scrub(&C->rw);
  scrub(&C->rv);
}

const char *rg_errmsg(const rg_ctx *C) { return C->errmsg; }
int rg_errcode(const rg_ctx *C) { return C->errcode; }
void rg_clear_error(rg_ctx *C) {
  C->errcode = 0;
  C->errmsg[0] = 0;
}

int rg_error(rg_ctx *C, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(C->errmsg, sizeof C->errmsg, fmt, ap);
  va_end(ap);
  C->errcode = code;
  return code;
}

int rg_error_null(rg_ctx *C, const char *fmt, ...) {
  if (C->errcode) return C->errcode;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(C->errmsg, sizeof C->errmsg, fmt, ap);
  va_end(ap);
  return C->errcode = RG_ERR_TYPE;
}

const char *rg_version(void) { return RG_VERSION_STRING; }

void **rg_ctx_slot(rg_ctx *C, int slot) { return &C->slots[slot]; }
