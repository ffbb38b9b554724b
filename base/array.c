/*
 * array.c — growth of the growable arrays (RG_VEC in base.h).
 *
 * One function grows every typed array.  With an allocator that can grow
 * a block (the heap ones: realloc, which moves a large block by remapping
 * its pages) the block is grown; otherwise (collected memory) a new block
 * is allocated, the elements copied and the old block returned.  Capacity
 * at least doubles, so n pushes cost O(n) copies in all.  Also the growing
 * string of generated source (rg_strbuf).
 */
#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>

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

/* ------------------------------------------------------------------ strings */

void rg_strbuf_put(rg_strbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->failed = true;
      return;
    }
    if (b->s && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = (b->cap ? 2 * b->cap : 4096) + (size_t)k;
    char *s = rg_realloc(b->s, cap);
    if (!s) {
      b->failed = true;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
}

bool rg_say(char *why, size_t len, const char *fmt, ...) {
  if (why && len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
  }
  return false;
}
