/*
 * peer_pointwise.c — the hand-written C peer of the fusion benchmarks
 * (bench/run_fusion.sh): the two pointwise expressions of
 * bench/graphs/axpb_f32.graph and sigtanh_f32.graph as single C loops over
 * 10^7 float32, into a preallocated output, one thread.  expf and tanhf
 * are declared simd so that GCC (-O3 -march=native -fno-math-errno) calls
 * glibc's vector versions (libmvec), as a careful C programmer would.
 *
 *   peer_pointwise [REPEATS]    prints one JSON line, medians in ms
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

extern float expf(float) __attribute__((simd("notinbranch")));
extern float tanhf(float) __attribute__((simd("notinbranch")));

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void axpb(const float *restrict x, float *restrict y, long n) {
  for (long i = 0; i < n; i++) y[i] = 2.0f * x[i] + 1.0f;
}

static void sigtanh(const float *restrict a, const float *restrict b, const float *restrict c,
                    const float *restrict d, float *restrict y, long n) {
  for (long i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-a[i])) * tanhf(b[i]) + c[i] * d[i];
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 21;
  if (reps < 1) reps = 1;
  long n = 10000000;
  float *v[5];
  for (int k = 0; k < 5; k++) {
    v[k] = aligned_alloc(64, (size_t)n * sizeof(float));
    if (!v[k]) return 1;
    for (long i = 0; i < n; i++) v[k][i] = (float)((i * (k + 7) % 1000) - 500) * 0.004f;
  }
  double *t = malloc((size_t)reps * sizeof *t), med[2];
  for (int e = 0; e < 2; e++) {
    for (int r = -1; r < reps; r++) {
      double t0 = now_s();
      if (e == 0) axpb(v[0], v[4], n);
      else sigtanh(v[0], v[1], v[2], v[3], v[4], n);
      if (r >= 0) t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    med[e] = t[reps / 2] * 1e3;
  }
  printf("{\"peer\": \"hand C\", \"threads\": 1, \"axpb_ms\": %.3f, \"sigtanh_ms\": %.3f, \"check\": %g}\n", med[0],
         med[1], (double)v[4][n / 3]);
  return 0;
}
