/*
 * test_cuda_transfers.c — the CUDA backend's copies (backend/cuda/
 * transfer.c) against the host implementation of the driver calls in
 * tests/cuda-host, which CTest names in RELGRAPH_CUDA_DRIVER.
 *
 * That driver completes queued work only when something waits for it, so
 * these tests see the values a host would see if it read or reused
 * memory before a queued copy was done, and whether two streams were
 * ordered where a value crosses between them.  They also count what the
 * backend asked of the driver: how often the host waited, whether queued
 * copies used pinned host memory, whether a copy between devices went
 * through the host.
 *
 * Skipped (77) when RELGRAPH_CUDA_DRIVER is unset or NVRTC, which the
 * backend asks for before it starts, is missing.
 */
#include "tests/cuda-host/host.h"
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rg_ctx *C;
static void (*driver_stats)(long *);
static void *(*driver_last_host)(void);

static long stat_of(int k) {
  long s[RGTEST_NSTATS];
  driver_stats(s);
  return s[k];
}

/* int32 values v[i] = seed + 7 i (i in C order), on the host. */
static rg_tensor *ints_shaped(int ndim, const int64_t *shape, int32_t seed) {
  rg_tensor *t = rg_tensor_empty_on(NULL, RG_INT32, ndim, shape);
  for (int64_t i = 0; i < rg_tensor_numel(t); i++) ((int32_t *)t->data)[i] = seed + 7 * (int32_t)i;
  return t;
}

static rg_tensor *ints(int64_t n, int32_t seed) { return ints_shaped(1, &n, seed); }

static bool holds(const rg_tensor *t, int32_t seed) {
  rg_tensor *h = rg_tensor_on_device(t) ? rg_tensor_to_host(t) : (rg_tensor *)t;
  bool ok = h && h->dtype == RG_INT32;
  for (int64_t i = 0; ok && i < rg_tensor_numel(h); i++) ok = ((int32_t *)h->data)[i] == seed + 7 * (int32_t)i;
  if (h != t) rg_tensor_free(h);
  return ok;
}

static rg_backend *backend(const char *name) {
  char why[256];
  rg_backend *b = rg_backend_new(name, why, sizeof why);
  if (!b) fail_msg("%s: %s", name, why);
  return b;
}

/* A driver that cannot be loaded: a clear reason, no backend. */
static void test_missing_driver(void **st) {
  (void)st;
  char *saved = strdup(getenv("RELGRAPH_CUDA_DRIVER"));
  setenv("RELGRAPH_CUDA_DRIVER", "/nonexistent/libcuda-missing.so", 1);
  char why[256];
  assert_false(rg_backend_available("cuda", why, sizeof why));
  assert_non_null(strstr(why, "no CUDA driver (/nonexistent/libcuda-missing.so cannot be loaded)"));
  assert_null(rg_backend_new("cuda:1", why, sizeof why));
  assert_non_null(strstr(why, "cannot be loaded"));
  setenv("RELGRAPH_CUDA_DRIVER", saved, 1);
  free(saved);
  /* NVRTC named but missing: the same */
  setenv("RELGRAPH_NVRTC", "/nonexistent/libnvrtc-missing.so", 1);
  assert_false(rg_backend_available("cuda", why, sizeof why));
  assert_string_equal(why, "NVRTC: /nonexistent/libnvrtc-missing.so cannot be loaded");
  unsetenv("RELGRAPH_NVRTC");
  assert_null(rg_backend_new("cuda:7", why, sizeof why));
  assert_string_equal(why, "no CUDA device 7 (2 present)");
}

/* An upload is staged in pinned memory and queued: the host waits for
 * nothing and may free its memory at once.  A download waits. */
static void test_upload_queued_download_waits(void **st) {
  (void)st;
  rg_backend *b = backend("cuda");
  const rg_buffer_type *bt = rg_backend_buffer_type(b);
  long waits = stat_of(RGTEST_HOST_WAITS), queued = stat_of(RGTEST_ASYNC_COPIES);
  long pinned = stat_of(RGTEST_PINNED_ALLOCS);
  rg_tensor *t = ints(3 << 20, 5); /* 12 MiB: three staging blocks */
  rg_tensor *d = rg_tensor_to_device(t, bt);
  assert_non_null(d);
  assert_true(rg_tensor_on_device(d));
  assert_int_equal(stat_of(RGTEST_HOST_WAITS), waits);
  assert_int_equal(stat_of(RGTEST_ASYNC_COPIES) - queued, 3);
  assert_int_equal(stat_of(RGTEST_PINNED_ALLOCS) - pinned, 3); /* the fourth block not yet reached */
  memset(t->data, 0, (size_t)rg_tensor_numel(t) * 4); /* the staged bytes are the device's now */
  rg_tensor_free(t);
  assert_true(holds(d, 5));
  assert_true(stat_of(RGTEST_HOST_WAITS) > waits);
  assert_int_equal(stat_of(RGTEST_PAGEABLE_ASYNC), 0);
  rg_tensor_free(d);
  rg_backend_free(b);
}

/* Many small uploads go round the staging ring several times; the host
 * waits for a block only when it comes back to one still queued, and no
 * staged value is overwritten before its copy is done. */
static void test_staging_ring(void **st) {
  (void)st;
  rg_backend *b = backend("cuda");
  const rg_buffer_type *bt = rg_backend_buffer_type(b);
  enum { N = 600 }; /* 64 KiB each: 64 a block, the ring of four blocks twice round */
  rg_tensor *d[N];
  long waits = stat_of(RGTEST_HOST_WAITS);
  for (int i = 0; i < N; i++) {
    rg_tensor *t = ints(16384, 1000 * i);
    d[i] = rg_tensor_to_device(t, bt);
    assert_non_null(d[i]);
    rg_tensor_free(t);
  }
  long ring_waits = stat_of(RGTEST_HOST_WAITS) - waits;
  assert_true(ring_waits >= 1 && ring_waits <= N / 64);
  for (int i = N - 1; i >= 0; i--) {
    assert_true(holds(d[i], 1000 * i));
    rg_tensor_free(d[i]);
  }
  assert_int_equal(stat_of(RGTEST_PAGEABLE_ASYNC), 0);
  assert_int_equal(stat_of(RGTEST_BAD_POINTERS), 0);
  rg_backend_free(b);
}

/* Pinned host memory: host tensors the CPU reads, copied to and from the
 * device directly. */
static void test_pinned_host_memory(void **st) {
  (void)st;
  rg_backend *b = backend("cuda");
  const rg_buffer_type *bt = rg_backend_buffer_type(b), *hb = rg_backend_host_buffer_type(b);
  assert_non_null(hb);
  assert_int_equal(hb->device, RG_DEVICE_HOST);
  assert_string_equal(hb->name, "cuda:0:pinned");
  rg_backend *cpu = backend("cpu");
  assert_null(rg_backend_host_buffer_type(cpu));
  rg_backend_free(cpu);
  int64_t n = 100000;
  rg_tensor *p = rg_tensor_empty_on(hb, RG_INT32, 1, &n);
  assert_non_null(p);
  assert_false(rg_tensor_on_device(p));
  assert_int_equal(rg_tensor_device(p), RG_DEVICE_HOST);
  for (int64_t i = 0; i < n; i++) ((int32_t *)p->data)[i] = 3 + 7 * (int32_t)i;
  long waits = stat_of(RGTEST_HOST_WAITS);
  rg_tensor *d = rg_tensor_to_device(p, bt);
  assert_ptr_equal(driver_last_host(), p->data); /* no staging */
  assert_int_equal(stat_of(RGTEST_HOST_WAITS), waits + 1); /* waited for: p may be written again */
  memset(p->data, 0, (size_t)n * 4);
  rg_tensor *q = rg_tensor_empty_on(hb, RG_INT32, 1, &n);
  assert_int_equal(rg_tensor_copy_to(q, d), RG_OK);
  assert_ptr_equal(driver_last_host(), q->data);
  assert_true(holds(q, 3));
  rg_tensor *r = rg_tensor_to_device(d, hb); /* to pinned memory: a host tensor */
  assert_non_null(r);
  assert_false(rg_tensor_on_device(r));
  assert_true(holds(r, 3));
  /* freed pinned memory is handed out again without the driver */
  long allocs = stat_of(RGTEST_PINNED_ALLOCS);
  rg_tensor_free(r);
  r = rg_tensor_empty_on(hb, RG_INT32, 1, &n);
  assert_int_equal(stat_of(RGTEST_PINNED_ALLOCS), allocs);
  assert_int_equal(stat_of(RGTEST_PAGEABLE_ASYNC), 0);
  rg_tensor_free(r);
  rg_tensor_free(q);
  rg_tensor_free(p);
  rg_tensor_free(d);
  rg_backend_free(b);
}

/* Between two devices: a peer copy queued on the destination's stream
 * after the source's work, and the source's stream waits for the copy
 * before it reuses the memory; the host waits for nothing. */
static void test_between_devices(void **st) {
  (void)st;
  rg_backend *b0 = backend("cuda:0"), *b1 = backend("cuda:1");
  const rg_buffer_type *t0 = rg_backend_buffer_type(b0), *t1 = rg_backend_buffer_type(b1);
  rg_tensor *h = ints(50000, 11);
  rg_tensor *d0 = rg_tensor_to_device(h, t0);
  long waits = stat_of(RGTEST_HOST_WAITS), peers = stat_of(RGTEST_PEER_COPIES);
  long swaits = stat_of(RGTEST_STREAM_WAITS);
  rg_tensor *d1 = rg_tensor_to_device(d0, t1);
  assert_non_null(d1);
  assert_int_equal(rg_tensor_device(d1), RG_DEVICE_CUDA(1));
  assert_int_equal(stat_of(RGTEST_HOST_WAITS), waits);
  assert_int_equal(stat_of(RGTEST_PEER_COPIES), peers + 1);
  assert_int_equal(stat_of(RGTEST_STREAM_WAITS), swaits + 2);
  /* d0's memory goes back to cuda:0's allocator and takes other values
   * there, before the peer copy has run */
  void *was = d0->data;
  rg_tensor_free(d0);
  rg_tensor *h2 = ints(50000, 99);
  rg_tensor *e0 = rg_tensor_to_device(h2, t0);
  assert_ptr_equal(e0->data, was);
  assert_true(holds(e0, 99)); /* completes cuda:0's stream first */
  assert_true(holds(d1, 11)); /* the copy read the old values */
  /* a copy on one device stays there */
  rg_tensor *e1 = rg_tensor_to_device(e0, t0);
  assert_true(holds(e1, 99));
  assert_int_equal(stat_of(RGTEST_PEER_COPIES), peers + 1);
  rg_tensor_free(e1);
  rg_tensor_free(e0);
  rg_tensor_free(d1);
  rg_tensor_free(h2);
  rg_tensor_free(h);
  rg_backend_free(b0);
  rg_backend_free(b1);
}

/* A program on one backend object reading a device value written on
 * another object's stream of the same device: its stream waits for that
 * work, and the other waits for the call's reads before reusing it. */
static void test_program_input_from_another_stream(void **st) {
  (void)st;
  rg_backend *ba = backend("cuda:0"), *bb = backend("cuda:0");
  int64_t shape[2] = {300, 200};
  const rg_type *ty = rg_type_on_device(rg_type_new(RG_INT32, 2, shape), RG_DEVICE_CUDA(0));
  rg_variable *x = rg_input(C, "x", ty);
  rg_variable *y = rg_transpose(x);
  rg_compile_opts o = {.backend = bb, .mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
  if (!f) fail_msg("compile: %s", rg_errmsg(C));
  rg_tensor *h = ints_shaped(2, shape, 4);
  rg_tensor *da = rg_tensor_to_device(h, rg_backend_buffer_type(ba));
  long swaits = stat_of(RGTEST_STREAM_WAITS);
  rg_tensor *out;
  assert_int_equal(rg_function_call(f, &da, &out), RG_OK);
  assert_int_equal(stat_of(RGTEST_STREAM_WAITS), swaits + 2);
  assert_int_equal(rg_tensor_device(out), RG_DEVICE_HOST);
  assert_int_equal(out->shape[0], 200);
  for (int i = 0; i < 300; i += 37)
    for (int j = 0; j < 200; j += 13) assert_int_equal(rg_tensor_get_i64(out, j * 300 + i), 4 + 7 * (i * 200 + j));
  rg_tensor_free(out);
  rg_tensor_free(da);
  rg_tensor_free(h);
  rg_function_free(f);
  rg_backend_free(ba);
  rg_backend_free(bb);
}

/* Device code the driver cannot load (real NVRTC's, which the host
 * implementation cannot run): compiling says so. */
static void test_foreign_device_code(void **st) {
  (void)st;
  rg_backend *b = backend("cuda");
  int64_t n = 1000;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT32, 1, &n));
  rg_variable *y = rg_exp(x);
  rg_compile_opts o = {.backend = b, .mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
  assert_null(f);
  assert_non_null(strstr(rg_errmsg(C), "the cuda:0 backend cannot bind exp: loading a kernel: "
                                       "a device code image this driver cannot load"));
  rg_backend_free(b);
}

int main(void) {
  const char *lib = getenv("RELGRAPH_CUDA_DRIVER");
  if (!lib || !*lib) {
    printf("skipped: RELGRAPH_CUDA_DRIVER does not name the test driver\n");
    return 77;
  }
  rg_init();
  C = rg_ctx_new();
  char why[256];
  if (!rg_backend_available("cuda", why, sizeof why)) {
    printf("skipped: %s\n", why);
    return 77;
  }
  void *dl = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (!dl || !(*(void **)&driver_stats = dlsym(dl, "rgtest_cuda_stats")) ||
      !(*(void **)&driver_last_host = dlsym(dl, "rgtest_cuda_last_host"))) {
    printf("%s is not the test driver\n", lib);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_driver),
      cmocka_unit_test(test_upload_queued_download_waits),
      cmocka_unit_test(test_staging_ring),
      cmocka_unit_test(test_pinned_host_memory),
      cmocka_unit_test(test_between_devices),
      cmocka_unit_test(test_program_input_from_another_stream),
      cmocka_unit_test(test_foreign_device_code),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
