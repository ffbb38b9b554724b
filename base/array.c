/*
 * array.c — growth of the growable arrays (RG_VEC in base.h).
 *
 * One function grows every typed array.  With an allocator that can grow
 * a block (the heap ones: realloc, which moves a large block by remapping
 * its pages) the block is grown; otherwise (collected memory) a new block
 * is allocated, the elements copied and the old block returned.  Capacity
 * at least doubles, so n pushes cost O(n) copies in all.
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
  void *w;
  if (a->grow) {
    w = a->grow(*v, c * esize);
    if (!w) return -1;
  } else {
    w = a->alloc(c * esize);
    if (!w) return -1;
    if (n) memcpy(w, *v, n * esize);
    if (*v) a->free(*v);
  }
  *v = w;
  *cap = c;
  return 0;
}
