/*
 * map.c — the hash map of base.h (open addressing, linear probing) and
 * byte hashing.
 *
 * Keys are non-zero 64-bit words; their home slot is rg_hash64(key), so
 * pointers and small consecutive ids spread well without the caller
 * hashing them.  The table stays at most half full: a probe run is short
 * and a miss stops at the first empty slot.  Deletion moves later entries
 * of the run back into the hole when their home allows it (Knuth's
 * algorithm R), so lookups never meet tombstones.
 */
#include "base/base.h"

int rg_map_init(rg_map *m, const rg_allocator *a, size_t expect) {
  *m = (rg_map){NULL, 0, 0, a};
  size_t cap = 16;
  while (cap < 2 * expect) cap *= 2;
  m->e = rg_alloc_of(a)->alloc(cap * sizeof *m->e);
  if (!m->e) return -1;
  m->cap = cap;
  return 0;
}

void rg_map_free(rg_map *m) {
  if (m->e) rg_alloc_of(m->a)->free(m->e);
  m->e = NULL;
  m->cap = m->n = 0;
}

void rg_map_clear(rg_map *m) {
  if (m->cap) memset(m->e, 0, m->cap * sizeof *m->e);
  m->n = 0;
}

static void place(rg_map *m, rg_map_entry e) {
  size_t mask = m->cap - 1, i = rg_map_home(m, e.key);
  while (m->e[i].key) i = (i + 1) & mask;
  m->e[i] = e;
}

/* Makes room for one more entry. */
static int reserve_one(rg_map *m) {
  if (2 * (m->n + 1) <= m->cap) return 0;
  size_t cap = m->cap ? 2 * m->cap : 16;
  if (cap > SIZE_MAX / sizeof(rg_map_entry)) return -1;
  rg_map g = {rg_alloc_of(m->a)->alloc(cap * sizeof(rg_map_entry)), cap, m->n, m->a};
  if (!g.e) return -1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->e[i].key) place(&g, m->e[i]);
  if (m->e) rg_alloc_of(m->a)->free(m->e);
  *m = g;
  return 0;
}

int rg_map_add(rg_map *m, uint64_t key, uint64_t val) {
  if (reserve_one(m)) return -1;
  place(m, (rg_map_entry){key, val});
  m->n++;
  return 0;
}

rg_map_entry *rg_map_slot(rg_map *m, uint64_t key, uint64_t val, bool *fresh) {
  rg_map_entry *e = rg_map_first(m, key);
  if (fresh) *fresh = !e;
  if (e) return e;
  if (rg_map_add(m, key, val)) return NULL;
  return rg_map_first(m, key);
}

int rg_map_put(rg_map *m, uint64_t key, uint64_t val) {
  rg_map_entry *e = rg_map_slot(m, key, val, NULL);
  if (!e) return -1;
  e->val = val;
  return 0;
}

/* True when slot j lies cyclically in (i, k]: an entry at k whose home is
 * j may not move back to i. */
static bool between(size_t i, size_t j, size_t k) {
  return i <= k ? i < j && j <= k : i < j || j <= k;
}

void rg_map_remove(rg_map *m, rg_map_entry *e) {
  size_t mask = m->cap - 1, hole = (size_t)(e - m->e);
  for (size_t k = (hole + 1) & mask; m->e[k].key; k = (k + 1) & mask) {
    if (between(hole, rg_map_home(m, m->e[k].key), k)) continue;
    m->e[hole] = m->e[k];
    hole = k;
  }
  m->e[hole] = (rg_map_entry){0, 0};
  m->n--;
}

bool rg_map_del(rg_map *m, uint64_t key) {
  rg_map_entry *e = rg_map_first(m, key);
  if (e) rg_map_remove(m, e);
  return e != NULL;
}

/* ------------------------------------------------------------------ bytes */

/* Eight bytes at a time through the finaliser, the tail padded with zeros
 * and the length mixed in, so "a" and "a\0" differ. */
uint64_t rg_hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *s = p;
  uint64_t h = rg_hash64(seed ^ n);
  for (; n >= 8; s += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = rg_hash_mix(h, w);
  }
  if (n) {
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = rg_hash_mix(h, w);
  }
  return h;
}
