/*
 * base.h — the containers every layer shares: manual allocation, one
 * growable array, one hash map, hashing.
 *
 * It sits below kanren/ and knows nothing of terms, graphs or the
 * collector, so a layer that keeps collected pointers in a container
 * hands it an allocator that gives collected memory (kanren's rgk_gc,
 * see kanren-impl.h): the collector does not scan malloc'd memory, and a
 * collected object whose only pointer lives there would be freed under us.
 *
 * Allocation.  rg_malloc, rg_calloc, rg_realloc and rg_strdup return NULL
 * when memory runs out and never abort; every caller checks.  They are the
 * points where a fault-injection build (RG_FAULT_INJECTION) can make an
 * allocation fail on purpose (rg_fault_arm).  rg_xmalloc and friends are
 * for the few places whose failure cannot be reported (the work stacks of
 * graph walks): they abort, as the collector does, and are not counted.
 *
 * Allocators.  A container takes an rg_allocator: `rg_heap` (the
 * fallible, counted functions above), `rg_heap_abort` (the aborting ones)
 * or collected memory.  A null allocator means rg_heap.
 *
 * Growable arrays.  RG_VEC(name, T) defines a typed array {v, n, cap, a}
 * with name_push / name_reserve / name_free; all share rg_array_grow.
 *
 * Hash map.  rg_map maps non-zero 64-bit keys (pointers, ids, hashes) to
 * 64-bit values by open addressing with linear probing.  It is also a
 * multimap: rg_map_add inserts without looking for the key, and
 * rg_map_first / rg_map_next visit every entry of one key (hash-consing
 * keys items by their hash and compares the items themselves).  Deletion
 * shifts later entries of the probe run back, so there are no tombstones.
 */
#ifndef RELGRAPH_BASE_H
#define RELGRAPH_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ allocation */

void *rg_malloc(size_t n);
void *rg_calloc(size_t count, size_t size);  /* NULL also when count * size overflows */
void *rg_realloc(void *p, size_t n);         /* on failure p is untouched */
void *rg_reallocarray(void *p, size_t count, size_t size);
char *rg_strdup(const char *s);
/* `align` a power of two; any size (rounded up to a multiple of align). */
void *rg_aligned_alloc(size_t align, size_t n);
void rg_free(void *p);

/* Aborting variants: never NULL, not subject to fault injection. */
void *rg_xmalloc(size_t n);
void *rg_xrealloc(void *p, size_t n);

/* ------------------------------------------------------------------ fault injection */

/* In a build with RG_FAULT_INJECTION: after rg_fault_arm(n), the n-th
 * counted allocation fails (and every later one too when `persist`);
 * n = 0 disarms.  Elsewhere these do nothing and rg_fault_enabled() is
 * false.  Counting is atomic, so threads may allocate meanwhile. */
bool rg_fault_enabled(void);
void rg_fault_arm(uint64_t n, bool persist);
uint64_t rg_fault_count(void);  /* counted allocations since the last arm */
bool rg_fault_fired(void);      /* an allocation failed on purpose since then */

/* ------------------------------------------------------------------ allocators */

/* alloc returns a zeroed block or NULL; free may do nothing (collected
 * memory).  Both are required.  grow (optional) resizes a block like
 * realloc (contents kept up to the smaller size, the rest undefined; NULL
 * on failure with the block untouched): arrays grow with it when present,
 * so a large one can be moved by remapping pages instead of copying. */
typedef struct rg_allocator {
  void *(*alloc)(size_t n);
  void (*free)(void *p);
  void *(*grow)(void *p, size_t n);
} rg_allocator;

extern const rg_allocator rg_heap;       /* rg_calloc / rg_free */
extern const rg_allocator rg_heap_abort; /* aborts instead of failing */

static inline const rg_allocator *rg_alloc_of(const rg_allocator *a) { return a ? a : &rg_heap; }

/* ------------------------------------------------------------------ hashing */

/* A 64-bit finaliser (splitmix64): every input bit reaches every output bit. */
static inline uint64_t rg_hash64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static inline uint64_t rg_hash_ptr(const void *p) { return rg_hash64((uint64_t)(uintptr_t)p); }
/* Combines a running hash with one more word (order matters). */
static inline uint64_t rg_hash_mix(uint64_t h, uint64_t x) {
  return rg_hash64(h ^ (x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}
uint64_t rg_hash_bytes(const void *p, size_t n, uint64_t seed);
/* A hash usable as a map key (never 0). */
static inline uint64_t rg_hash_key(uint64_t h) { return h ? h : 1; }

/* A reproducible stream of random words (splitmix64): the next word of
 * the stream whose state is *s.  The random inputs of the checking
 * commands and of rg_verify_grad come from it, so a seed gives one run. */
static inline uint64_t rg_random_next(uint64_t *s) { return rg_hash64(*s += 0x9e3779b97f4a7c15ull); }

/* ------------------------------------------------------------------ growable arrays */

/* Makes room for `need` elements of `esize` bytes in *v (holding n,
 * room for *cap): the block grown by `a`, or a new block with the n
 * elements copied and the old one given back.  Capacity at least doubles.  Returns 0, or -1 when
 * the allocator fails or the size overflows (then nothing changed). */
int rg_array_grow(const rg_allocator *a, void **v, size_t *cap, size_t n, size_t esize,
                  size_t need);

/* Invariant of every RG_VEC: n <= cap; v holds cap elements (NULL when
 * cap is 0); a is the allocator of v (NULL: rg_heap). */
#define RG_VEC(name, T)                                                             \
  typedef struct name { T *v; size_t n, cap; const rg_allocator *a; } name;         \
  static inline __attribute__((unused)) int name##_reserve(name *x, size_t need) {  \
    if (need <= x->cap) return 0;                                                   \
    void *v = x->v;                                                                 \
    int rc = rg_array_grow(x->a, &v, &x->cap, x->n, sizeof(T), need);               \
    x->v = v;                                                                       \
    return rc;                                                                      \
  }                                                                                 \
  static inline __attribute__((unused)) int name##_push(name *x, T e) {             \
    if (x->n == x->cap && name##_reserve(x, x->n + 1)) return -1;                   \
    x->v[x->n++] = e;                                                               \
    return 0;                                                                       \
  }                                                                                 \
  static inline __attribute__((unused)) void name##_free(name *x) {                 \
    if (x->v) rg_alloc_of(x->a)->free(x->v);                                        \
    x->v = NULL;                                                                    \
    x->n = x->cap = 0;                                                              \
  }

RG_VEC(rg_words, uintptr_t)
RG_VEC(rg_ptrs, void *)

/* ------------------------------------------------------------------ a growing string */

/* Text appended printf-style into manual memory (generated source code).
 * Invariant: s[0..n) is the text, NUL-terminated when s is not NULL;
 * after a failed append (memory) `failed` stays set and appends do
 * nothing.  Start zeroed; release with rg_free(b.s). */
typedef struct rg_strbuf {
  char *s;
  size_t n, cap;
  bool failed;
} rg_strbuf;
void rg_strbuf_put(rg_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ------------------------------------------------------------------ the cache of generated code */

/* FNV-1a of a string, continuing from h (start with RG_FNV_SEED). */
#define RG_FNV_SEED 0xcbf29ce484222325ull
uint64_t rg_fnv1a(const char *s, uint64_t h);
/* FNV-1a of n bytes, continuing from h. */
uint64_t rg_fnv1a_bytes(const void *p, size_t n, uint64_t h);
/* Makes directory `path` and the missing ones above it (mkdir -p): 0, or
 * -1 with errno set (ENOTDIR where a part is not a directory). */
int rg_make_dirs(const char *path);
/* The cache directory (created): `chosen` when given (a function's
 * option), else $RELGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/relgraph, else
 * $HOME/.cache/relgraph; false if none can be made. */
bool rg_cache_dir(const char *chosen, char *dir, size_t len);
/* A cache entry's bytes (rg_free), or NULL when absent or damaged (an
 * entry carries its size and a hash of its bytes, checked here). */
void *rg_cache_read(const char *path, size_t *size);
/* Writes an entry atomically (a file of this process renamed into place). */
bool rg_cache_write(const char *path, const void *data, size_t size);

/* Writes a reason into why[len] (when why is not NULL) and returns false:
 * `return rg_say(why, len, "no device %d", k);`. */
bool rg_say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------ hash map */

typedef struct rg_map_entry { uint64_t key, val; } rg_map_entry;

/* Invariants: cap is 0 or a power of two; 2 * n <= cap; key 0 marks an
 * empty slot; an entry sits in the probe run that starts at its key's
 * home slot (rg_hash64(key) & (cap - 1)) with no empty slot between. */
typedef struct rg_map {
  rg_map_entry *e;
  size_t cap, n;
  const rg_allocator *a;
} rg_map;

/* An empty map whose first insertion makes room for about `expect` keys. */
int rg_map_init(rg_map *m, const rg_allocator *a, size_t expect);
void rg_map_free(rg_map *m);
void rg_map_clear(rg_map *m);  /* removes every entry, keeps the room */

static inline size_t rg_map_home(const rg_map *m, uint64_t key) {
  return (size_t)rg_hash64(key) & (m->cap - 1);
}

/* The first entry with `key` (NULL if none), then the next ones. */
static inline rg_map_entry *rg_map_next(const rg_map *m, const rg_map_entry *e) {
  size_t mask = m->cap - 1, i = ((size_t)(e - m->e) + 1) & mask;
  for (; m->e[i].key; i = (i + 1) & mask)
    if (m->e[i].key == e->key) return &m->e[i];
  return NULL;
}
static inline rg_map_entry *rg_map_first(const rg_map *m, uint64_t key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = rg_map_home(m, key); m->e[i].key; i = (i + 1) & mask)
    if (m->e[i].key == key) return &m->e[i];
  return NULL;
}

/* The value of key, or NULL. */
static inline uint64_t *rg_map_get(const rg_map *m, uint64_t key) {
  rg_map_entry *e = rg_map_first(m, key);
  return e ? &e->val : NULL;
}
static inline bool rg_map_has(const rg_map *m, uint64_t key) { return rg_map_first(m, key) != NULL; }

/* The entry of key, inserted with value `val` when absent (*fresh says
 * which); NULL when memory ran out (the map unchanged). */
rg_map_entry *rg_map_slot(rg_map *m, uint64_t key, uint64_t val, bool *fresh);
/* Sets key's value (inserting it): 0, or -1 when memory ran out. */
int rg_map_put(rg_map *m, uint64_t key, uint64_t val);
/* Adds an entry even when key is present (multimap): 0 or -1. */
int rg_map_add(rg_map *m, uint64_t key, uint64_t val);
/* Removes one entry (from rg_map_first/next); later entries may move. */
void rg_map_remove(rg_map *m, rg_map_entry *e);
/* Removes key's first entry; false if there was none. */
bool rg_map_del(rg_map *m, uint64_t key);

#endif
