/*
 * test_base.c — the base module's containers, tested once for every
 * layer that uses them: allocation wrappers, growable arrays (growth,
 * allocation failure), the hash map (empty, growth, collisions, deletion
 * against a reference model, the multimap, allocation failure),
 * hashing, and the entries of the on-disk cache (damaged ones read as
 * absent).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"

/* ------------------------------------------------------------------ a failing allocator */

/* Gives `left` blocks, then fails; counts what is outstanding. */
static int left = -1, outstanding;
static void *limited_alloc(size_t n) {
  if (left == 0) return NULL;
  if (left > 0) left--;
  void *p = calloc(1, n);
  if (p) outstanding++;
  return p;
}
static void limited_free(void *p) {
  outstanding--;
  free(p);
}
static const rg_allocator limited = {.alloc = limited_alloc, .free = limited_free};

/* ------------------------------------------------------------------ allocation */

static void test_alloc_wrappers(void **state) {
  char *s = rg_strdup("relgraph");
  assert_non_null(s);
  assert_string_equal(s, "relgraph");
  rg_free(s);
  assert_null(rg_calloc(SIZE_MAX / 2, 4));
  assert_null(rg_reallocarray(NULL, SIZE_MAX / 2, 4));
  int *v = rg_calloc(4, sizeof *v);
  assert_non_null(v);
  for (int i = 0; i < 4; i++) assert_int_equal(v[i], 0);
  int *w = rg_reallocarray(v, 1000, sizeof *w);
  assert_non_null(w);
  assert_int_equal(w[3], 0);
  rg_free(w);
  for (size_t n = 0; n < 300; n += 37) { /* any size, rounded up to the alignment */
    char *a = rg_aligned_alloc(64, n);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 1, n);
    rg_free(a);
  }
  assert_null(rg_aligned_alloc(64, SIZE_MAX - 8));
  uint64_t *h = rg_heap_abort.alloc(64 * sizeof *h);
  for (int i = 0; i < 64; i++) assert_int_equal(h[i], 0);
  rg_heap_abort.free(h);
  char *x = rg_xrealloc(NULL, 10);
  memcpy(x, "123456789", 10);
  x = rg_xrealloc(x, 100000);
  assert_string_equal(x, "123456789");
  rg_free(x);
  void *z = rg_malloc(0); /* a zero-size request still gives a block */
  assert_non_null(z);
  rg_free(z);
  rg_free(NULL);
}

static void test_fault_injection(void **state) {
  if (!rg_fault_enabled()) {
    rg_fault_arm(1, false); /* does nothing */
    void *p = rg_malloc(8);
    assert_non_null(p);
    rg_free(p);
    assert_false(rg_fault_fired());
    skip();
  }
  rg_fault_arm(2, false);
  void *a = rg_malloc(8), *b = rg_malloc(8), *c = rg_malloc(8);
  assert_non_null(a);
  assert_null(b);
  assert_non_null(c);
  assert_true(rg_fault_fired());
  assert_int_equal(rg_fault_count(), 3);
  rg_free(a), rg_free(c);
  rg_fault_arm(1, true);
  assert_null(rg_strdup("x"));
  assert_null(rg_calloc(1, 1));
  assert_null(rg_realloc(NULL, 4));
  assert_null(rg_aligned_alloc(16, 16));
  assert_null(rg_heap.alloc(8));
  void *keep = rg_xrealloc(NULL, 8); /* the aborting wrappers are not counted */
  assert_non_null(keep);
  rg_free(keep);
  rg_fault_arm(0, false);
  a = rg_malloc(8);
  assert_non_null(a);
  assert_false(rg_fault_fired());
  rg_free(a);
  /* a heap array whose growth fails keeps its elements */
  rg_words w = {0};
  for (uintptr_t i = 0; i < 100; i++) assert_int_equal(rg_words_push(&w, i), 0);
  while (w.n < w.cap) assert_int_equal(rg_words_push(&w, w.n), 0);
  rg_fault_arm(1, false);
  assert_int_equal(rg_words_push(&w, 7), -1);
  rg_fault_arm(0, false);
  for (uintptr_t i = 0; i < w.n; i++) assert_int_equal(w.v[i], i);
  assert_int_equal(rg_words_push(&w, w.n), 0);
  rg_words_free(&w);
}

/* ------------------------------------------------------------------ arrays */

RG_VEC(ivec, int64_t)
typedef struct pt { double x, y, z; } pt;
RG_VEC(ptvec, pt)

/* Heap arrays grow in place (realloc); collected ones by copying. */
static void test_vec_growth(void **state) {
  ivec v = {0};
  assert_int_equal(v.cap, 0);
  for (int64_t i = 0; i < 100000; i++) assert_int_equal(ivec_push(&v, i * 3), 0);
  assert_int_equal(v.n, 100000);
  assert_true(v.cap >= v.n);
  for (int64_t i = 0; i < 100000; i++) assert_int_equal(v.v[i], i * 3);
  ivec_free(&v);
  assert_null(v.v);
  assert_int_equal(v.n, 0);

  ptvec p = {0};
  assert_int_equal(ptvec_reserve(&p, 3), 0);
  size_t cap = p.cap;
  assert_true(cap >= 3);
  assert_int_equal(ptvec_reserve(&p, 2), 0); /* never shrinks */
  assert_int_equal(p.cap, cap);
  for (int i = 0; i < 50; i++) assert_int_equal(ptvec_push(&p, (pt){i, -i, 2 * i}), 0);
  assert_true(p.v[49].x == 49 && p.v[49].y == -49 && p.v[49].z == 98);
  ptvec_free(&p);
}

static void test_vec_alloc_failure(void **state) {
  rg_words w = {.a = &limited};
  left = 1, outstanding = 0;
  size_t pushed = 0;
  while (rg_words_push(&w, pushed) == 0) pushed++;
  assert_int_equal(pushed, w.cap); /* full, the next block refused */
  assert_int_equal(w.n, pushed);
  for (size_t i = 0; i < pushed; i++) assert_int_equal(w.v[i], i);
  left = -1;
  assert_int_equal(rg_words_push(&w, 7), 0); /* recovers when memory returns */
  assert_int_equal(w.v[pushed], 7);
  assert_int_equal(outstanding, 1); /* the old block went back */
  rg_words_free(&w);
  assert_int_equal(outstanding, 0);
  /* overflow of the byte size */
  void *v = NULL;
  size_t cap = 0;
  assert_int_equal(rg_array_grow(NULL, &v, &cap, 0, SIZE_MAX / 4, 8), -1);
  assert_null(v);
  assert_int_equal(cap, 0);
}

/* ------------------------------------------------------------------ map */

static void test_map_empty(void **state) {
  rg_map m = {0};
  assert_null(rg_map_get(&m, 5));
  assert_null(rg_map_first(&m, 5));
  assert_false(rg_map_del(&m, 5));
  rg_map_clear(&m);
  rg_map_free(&m);
  assert_int_equal(rg_map_init(&m, NULL, 0), 0);
  assert_int_equal(m.n, 0);
  assert_null(rg_map_get(&m, 1));
  rg_map_free(&m);
}

static void test_map_put_get_growth(void **state) {
  rg_map m = {0};
  for (uint64_t k = 1; k <= 50000; k++) assert_int_equal(rg_map_put(&m, k, k * 7), 0);
  assert_int_equal(m.n, 50000);
  assert_true(2 * m.n <= m.cap);
  for (uint64_t k = 1; k <= 50000; k++) {
    uint64_t *v = rg_map_get(&m, k);
    assert_non_null(v);
    assert_int_equal(*v, k * 7);
  }
  assert_null(rg_map_get(&m, 50001));
  assert_int_equal(rg_map_put(&m, 9, 1), 0); /* replaces */
  assert_int_equal(*rg_map_get(&m, 9), 1);
  assert_int_equal(m.n, 50000);
  bool fresh;
  rg_map_entry *e = rg_map_slot(&m, 9, 99, &fresh);
  assert_false(fresh);
  assert_int_equal(e->val, 1);
  e = rg_map_slot(&m, UINT64_MAX, 99, &fresh);
  assert_true(fresh);
  assert_int_equal(e->val, 99);
  rg_map_clear(&m);
  assert_int_equal(m.n, 0);
  assert_null(rg_map_get(&m, 9));
  rg_map_free(&m);
}

/* Keys that share one home slot in a 16-slot table, and the ones after. */
static int colliding_keys(uint64_t *out, int want) {
  rg_map probe = {NULL, 16, 0, NULL};
  int n = 0;
  for (uint64_t k = 1; n < want; k++)
    if (rg_map_home(&probe, k) == 15) out[n++] = k; /* the run wraps around */
  return n;
}

static void test_map_collisions(void **state) {
  uint64_t keys[6];
  colliding_keys(keys, 6);
  rg_map m;
  assert_int_equal(rg_map_init(&m, NULL, 4), 0);
  assert_int_equal(m.cap, 16);
  for (int i = 0; i < 6; i++) assert_int_equal(rg_map_put(&m, keys[i], i), 0);
  assert_int_equal(m.cap, 16);
  for (int i = 0; i < 6; i++) assert_int_equal(*rg_map_get(&m, keys[i]), i);
  /* deleting from the middle of the run keeps the later keys reachable */
  assert_true(rg_map_del(&m, keys[2]));
  assert_false(rg_map_del(&m, keys[2]));
  assert_null(rg_map_get(&m, keys[2]));
  for (int i = 0; i < 6; i++)
    if (i != 2) assert_int_equal(*rg_map_get(&m, keys[i]), i);
  assert_true(rg_map_del(&m, keys[0]));
  assert_true(rg_map_del(&m, keys[5]));
  assert_int_equal(m.n, 3);
  for (int i = 0; i < 6; i++)
    if (i == 1 || i == 3 || i == 4) assert_int_equal(*rg_map_get(&m, keys[i]), i);
  rg_map_free(&m);
}

/* Random puts and deletes against a direct-indexed model. */
static void test_map_delete_model(void **state) {
  enum { K = 4096, STEPS = 200000 };
  uint64_t *model = calloc(K, sizeof *model); /* 0: absent */
  rg_map m = {0};
  uint64_t x = 88172645463325252ull;
  size_t n = 0;
  for (int s = 0; s < STEPS; s++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t k = 1 + x % K;
    if ((x >> 32) % 3) {
      if (!model[k - 1]) n++;
      model[k - 1] = s + 1;
      assert_int_equal(rg_map_put(&m, k * 0x10000, s + 1), 0); /* spaced like pointers */
    } else {
      bool had = model[k - 1] != 0;
      n -= had;
      model[k - 1] = 0;
      assert_int_equal(rg_map_del(&m, k * 0x10000), had);
    }
    assert_int_equal(m.n, n);
  }
  for (uint64_t k = 1; k <= K; k++) {
    uint64_t *v = rg_map_get(&m, k * 0x10000);
    if (model[k - 1]) {
      assert_non_null(v);
      assert_int_equal(*v, model[k - 1]);
    } else {
      assert_null(v);
    }
  }
  free(model);
  rg_map_free(&m);
}

static void test_map_multi(void **state) {
  rg_map m = {0};
  for (uint64_t v = 0; v < 5; v++) assert_int_equal(rg_map_add(&m, 42, v), 0);
  for (uint64_t k = 1; k < 100; k++) assert_int_equal(rg_map_add(&m, k + 1000, k), 0);
  unsigned seen = 0;
  int count = 0;
  for (rg_map_entry *e = rg_map_first(&m, 42); e; e = rg_map_next(&m, e)) {
    assert_int_equal(e->key, 42);
    seen |= 1u << e->val;
    count++;
  }
  assert_int_equal(count, 5);
  assert_int_equal(seen, 31);
  /* remove the entry with value 3 found by iteration */
  rg_map_entry *e = rg_map_first(&m, 42);
  while (e->val != 3) e = rg_map_next(&m, e);
  rg_map_remove(&m, e);
  count = 0;
  for (e = rg_map_first(&m, 42); e; e = rg_map_next(&m, e)) {
    assert_int_not_equal(e->val, 3);
    count++;
  }
  assert_int_equal(count, 4);
  assert_int_equal(m.n, 103);
  rg_map_free(&m);
}

static void test_map_alloc_failure(void **state) {
  rg_map m = {.a = &limited};
  left = 0, outstanding = 0;
  assert_int_equal(rg_map_put(&m, 1, 1), -1);
  assert_null(rg_map_slot(&m, 1, 1, NULL));
  assert_int_equal(rg_map_init(&m, &limited, 100), -1);
  assert_int_equal(m.cap, 0);
  left = 1;
  uint64_t k = 1;
  while (rg_map_put(&m, k, k) == 0) k++;
  assert_int_equal(m.n, k - 1); /* the failed insertion changed nothing */
  for (uint64_t j = 1; j < k; j++) assert_int_equal(*rg_map_get(&m, j), j);
  assert_null(rg_map_get(&m, k));
  assert_int_equal(outstanding, 1);
  left = -1;
  assert_int_equal(rg_map_put(&m, k, k), 0);
  assert_int_equal(outstanding, 1);
  rg_map_free(&m);
  assert_int_equal(outstanding, 0);
}

/* ------------------------------------------------------------------ hashing */

static void test_hashing(void **state) {
  assert_int_not_equal(rg_hash64(1), rg_hash64(2));
  assert_int_not_equal(rg_hash_bytes("a", 1, 0), rg_hash_bytes("a\0", 2, 0));
  assert_int_not_equal(rg_hash_bytes("abc", 3, 0), rg_hash_bytes("abc", 3, 1));
  assert_int_equal(rg_hash_bytes("same bytes here!", 16, 5), rg_hash_bytes("same bytes here!", 16, 5));
  assert_int_not_equal(rg_hash_mix(1, 2), rg_hash_mix(2, 1));
  assert_int_equal(rg_hash_key(0), 1);
  assert_int_equal(rg_hash_key(77), 77);
  /* consecutive ids spread over the low bits the map uses */
  int hits[64] = {0};
  for (uint64_t i = 0; i < 6400; i++) hits[rg_hash64(i) & 63]++;
  for (int b = 0; b < 64; b++) assert_true(hits[b] > 50 && hits[b] < 150);
}

/* ------------------------------------------------------------------ the on-disk cache */

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* An entry reads back as written; one cut short, extended, changed in a
 * byte, empty, or written without the cache's trailer reads as absent. */
static void test_cache_entries(void **state) {
  char dir[] = "/tmp/rg-cache-XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/entry", dir);
  unsigned char data[3000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 3);
  size_t n = 0;
  assert_null(rg_cache_read(path, &n)); /* absent */
  assert_true(rg_cache_write(path, data, sizeof data));
  unsigned char *got = rg_cache_read(path, &n);
  assert_non_null(got);
  assert_int_equal(n, sizeof data);
  assert_memory_equal(got, data, sizeof data);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char whole[4096];
  size_t len = fread(whole, 1, sizeof whole, f);
  fclose(f);
  assert_true(len > sizeof data);
  size_t cuts[] = {0, 1, sizeof data / 2, sizeof data, len - 1};
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    write_bytes(path, whole, cuts[k]);
    assert_null(rg_cache_read(path, &n));
  }
  whole[100] ^= 1;
  write_bytes(path, whole, len);
  assert_null(rg_cache_read(path, &n));
  whole[100] ^= 1;
  unsigned char longer[4100];
  memcpy(longer, whole, len);
  longer[len] = 0;
  write_bytes(path, longer, len + 1);
  assert_null(rg_cache_read(path, &n));
  write_bytes(path, data, sizeof data); /* the bytes alone, no trailer */
  assert_null(rg_cache_read(path, &n));
  write_bytes(path, whole, len);
  rg_free(got);
  assert_non_null(got = rg_cache_read(path, &n));
  rg_free(got);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_alloc_wrappers),
    cmocka_unit_test(test_fault_injection),
    cmocka_unit_test(test_vec_growth),
    cmocka_unit_test(test_vec_alloc_failure),
    cmocka_unit_test(test_map_empty),
    cmocka_unit_test(test_map_put_get_growth),
    cmocka_unit_test(test_map_collisions),
    cmocka_unit_test(test_map_delete_model),
    cmocka_unit_test(test_map_multi),
    cmocka_unit_test(test_map_alloc_failure),
    cmocka_unit_test(test_hashing),
    cmocka_unit_test(test_cache_entries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
