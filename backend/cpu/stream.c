/*
 * stream.c — stores that bypass the cache, for outputs too large to stay
 * in it.
 *
 * A kernel writing a large output with ordinary stores first reads every
 * cache line it writes (the write-allocate read) and then evicts lines a
 * later pass would have liked to keep: three memory streams for a one-
 * input, one-output pass.  Non-temporal stores (SSE2's movntdq, on every
 * x86-64) fill whole lines in the write-combining buffers and send them to
 * memory without the read, two streams instead of three.  Measured here
 * (2 * x + 1 over 10^7 float32, one thread): 7.9 ms with ordinary stores,
 * 5.1 ms streaming; and with a reader right after, streaming is no slower
 * from 4 MB on and 0.8x from 8 MB (below 2 MB it is several times slower:
 * the reader finds nothing in the cache).  Hence RGBC_STREAM_BYTES.
 *
 * Contract: rgbc_stream_store copies n bytes from a (small, cache-hot)
 * block to dst, of any alignment (a head and a tail go through ordinary
 * stores); the values are the same bytes either way.  Non-temporal stores
 * are weakly ordered, so whoever streamed must call rgbc_stream_fence
 * before another thread may read what it wrote (the thread pool's join
 * follows the fence).  Without SSE2 both are a memcpy and nothing.
 */
#include "backend/cpu/cpu-impl.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

void rgbc_stream_store(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  for (; n >= 16; d += 16, s += 16, n -= 16) _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
  memcpy(d, s, n);
}

void rgbc_stream_fence(void) { _mm_sfence(); }

#else

void rgbc_stream_store(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

void rgbc_stream_fence(void) {}

#endif
