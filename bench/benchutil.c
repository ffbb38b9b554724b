/*
 * benchutil.c — timing helpers for the benchmarks.
 */
#include "bench/benchutil.h"

#include <gc.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

size_t bu_gc_count(void) { return (size_t)GC_get_gc_no(); }
size_t bu_heap_size(void) { return GC_get_heap_size(); }

__attribute__((noinline)) void bu_clear_stack(void) {
  volatile uintptr_t words[1 << 16]; /* 512 KiB: deeper than any run's frames */
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) words[i] = 0;
}

double bu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bu_median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bu_time(void (*fn)(void *ud), void *ud, int reps) {
  fn(ud);
  double *t = malloc((size_t)reps * sizeof *t);
  for (int i = 0; i < reps; i++) {
    double t0 = bu_now();
    fn(ud);
    t[i] = bu_now() - t0;
  }
  double m = bu_median(t, (size_t)reps);
  free(t);
  return m;
}
