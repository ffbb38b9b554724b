/*
 * array.c — growth of the growable arrays (RG_VEC in base.h).
 *
 * One function grows every typed array: a new block from the array's
 * allocator (which may be collected memory, so there is no realloc), the
 * elements copied, the old block returned.  Capacity at least doubles, so
 * n pushes cost O(n) copies in all.
 */
#include "base/base.h"

int rg_array_grow(const rg_allocator *a, void **v, size_t *cap, size_t n, size_t esize,
                  size_t need) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 8;
  while (c < need) {
    if (c > SIZE_MAX / 2) return -1;
    c *= 2;
  }
  if (c > SIZE_MAX / esize) return -1;
  a = rg_alloc_of(a);
  void *w = a->alloc(c * esize);
  if (!w) return -1;
  if (n) memcpy(w, *v, n * esize);
  if (*v) a->free(*v);
  *v = w;
  *cap = c;
  return 0;
}
