/*
 * test_cuda_host.c — the CUDA backend end to end without a GPU: programs
 * compiled for `cuda` run against the host implementation of CUDA's
 * driver, NVRTC and cuBLAS (tests/cuda-host, named by
 * RELGRAPH_CUDA_DRIVER, RELGRAPH_NVRTC and RELGRAPH_CUBLAS) and agree with
 * the CPU backend.
 *
 * What runs is the backend's own code: placement and transfers, the
 * generated kernels (compiled for the host by the host compiler and run
 * by one thread: they are grid-stride loops), their launch arguments,
 * views, the caching allocator, cuBLAS's operands, the Scan executor
 * driving loops on the device, ifelse reading its condition back, and
 * the copies of transfer.c, all through a driver that does queued work
 * only when something waits for it.  What it cannot show is what only a
 * GPU does: many threads at once, the device's arithmetic, speed.
 *
 * Skipped (77) where the variables are unset or no host compiler (c++)
 * is found.
 */
#include "tests/cuda-host/host.h"
#include "testutil.h"
#include "base/base.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rg_ctx *C;
static rg_backend *B;
static void (*driver_stats)(long *);

static long stat_of(int k) {
  long s[RGTEST_NSTATS];
  driver_stats(s);
  return s[k];
}

/* a and b agree: equal for integers and booleans, within a tolerance
 * relative to 1 + |a| for floats: 1e-4 for float32, tol64 for float64
 * (1e-10, or float32's where a float64 output is computed from float32
 * values). */
static void agree(const char *what, int j, const rg_tensor *a, const rg_tensor *b, double tol64) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) fail_msg("%s output %d: dtype or rank differs", what, j);
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) fail_msg("%s output %d: shape differs in dimension %d", what, j, d);
  double tol = a->dtype == RG_FLOAT32 ? 1e-4 : a->dtype == RG_FLOAT64 ? tol64 : 0;
  for (int64_t i = 0; i < rg_tensor_numel(a); i++) {
    double x = rg_tensor_get_f64(a, i), y = rg_tensor_get_f64(b, i);
    if (x != y && !(fabs(x - y) <= tol * (1 + fabs(x))) && !(isnan(x) && isnan(y)))
      fail_msg("%s output %d element %lld: cpu %.17g, cuda %.17g", what, j, (long long)i, x, y);
  }
}

/* Runs graph text on the CPU and on CUDA with the same inputs (values
 * from tu_value, unknown sizes 3) and compares every output; returns the
 * kernels the CUDA run launched. */
static long cpu_and_cuda(const char *what, const char *text, double tol64) {
  rg_fgraph *fg = rg_graph_read(C, what, text, strlen(text));
  if (!fg) fail_msg("%s: %s", what, rg_errmsg(C));
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable *in[16], *out[16];
  rg_tensor *vals[16], *ref[16], *got[16];
  for (int i = 0; i < nin; i++) {
    in[i] = rg_fgraph_input(fg, i);
    vals[i] = tu_value(in[i]->type, 17 + (uint64_t)i, -1.5, 3);
  }
  for (int j = 0; j < nout; j++) out[j] = rg_fgraph_output(fg, j);
  rg_function *f = rg_compile(C, nin, in, nout, out, NULL);
  rg_compile_opts o = {.backend = B};
  rg_function *g = rg_compile(C, nin, in, nout, out, &o);
  if (!f || !g) fail_msg("%s: compile: %s", what, rg_errmsg(C));
  if (!strstr(tu_function_dump(g), "cuda:0")) fail_msg("%s: nothing placed on cuda:0", what);
  long launches = stat_of(RGTEST_LAUNCHES) + stat_of(RGTEST_BLAS_CALLS);
  if (rg_function_call(f, vals, ref) != RG_OK) fail_msg("%s on the cpu: %s", what, rg_function_errmsg(f));
  if (rg_function_call(g, vals, got) != RG_OK) fail_msg("%s on cuda: %s", what, rg_function_errmsg(g));
  launches = stat_of(RGTEST_LAUNCHES) + stat_of(RGTEST_BLAS_CALLS) - launches;
  for (int j = 0; j < nout; j++) {
    assert_int_equal(rg_tensor_device(got[j]), RG_DEVICE_HOST);
    agree(what, j, ref[j], got[j], tol64);
    rg_tensor_free(ref[j]);
    rg_tensor_free(got[j]);
  }
  for (int i = 0; i < nin; i++) rg_tensor_free(vals[i]);
  rg_function_free(f);
  rg_function_free(g);
  return launches;
}

static void test_elementwise_and_reductions(void **st) {
  (void)st;
  long k = cpu_and_cuda("pointwise",
                        "(graph (input a float32 (6 5)) (input b float32 (5)) (input c float64 (6 1))"
                        " (output (add (exp a) (mul b (tanh a))))"
                        " (output (sub ((cast float64) ((dimshuffle 1 0) a)) (constant float64 () (0.5))))"
                        " (output (mul c ((cast float64) (sigmoid a))))"
                        " (output (switch (gt a b) a (neg b))))",
                        1e-4);
  assert_true(k > 0);
  cpu_and_cuda("reductions",
               "(graph (input a float64 (7 40 3)) (input m float32 (33 1500))"
               " (output ((sum 1) a)) (output ((max 0 2) a)) (output ((argmax 1) a)) (output ((mean) a))"
               " (output ((sum 1) m)) (output ((softmax 1) m)) (output ((log_softmax 0) a)))",
               1e-10);
  /* infinite and NaN constants in a fused group */
  cpu_and_cuda("not finite", "(graph (input a float32 (6 5)) (input b float64 (4))"
               " (output (add (mul (exp a) +inf.0) 1.0)) (output (maximum (exp b) (constant float64 () (-inf.0))))"
               " (output (mul (tanh b) (constant float64 () (+nan.0)))))", 1e-10);
  /* empty: softmax over no elements is empty, sum has its identity */
  cpu_and_cuda("empty", "(graph (input e float32 (3 0)) (input f float64 (2 0 3))"
               " (output ((softmax 1) e)) (output ((log_softmax 1) f)) (output ((sum 1) f)))", 1e-10);
}

static void test_products(void **st) {
  (void)st;
  cpu_and_cuda("products",
               "(graph (input A float32 (20 30)) (input B float32 (30 7)) (input v float32 (30))"
               " (input w float64 (9)) (input D float64 (9 4))"
               " (output (dot A B)) (output (dot A v)) (output (dot ((dimshuffle 1 0) B) v))"
               " (output (dot w D)) (output (outer w w)) (output (dot v v)))",
               1e-10);
  /* a batched product is one strided batched gemm, whatever the batch
   * count; batches stored transposed are passed as they are */
  long k = cpu_and_cuda("batched products",
                        "(graph (input X float32 (12 5 3)) (input Y float32 (12 3 4))"
                        " (output (batched_dot X Y)))", 1e-10);
  assert_int_equal(k, 1);
  k = cpu_and_cuda("batched products, transposed",
                   "(graph (input X float64 (12 3 5)) (input Y float64 (12 4 3))"
                   " (output (batched_dot ((dimshuffle 0 2 1) X) ((dimshuffle 0 2 1) Y))))", 1e-10);
  assert_int_equal(k, 1);
  cpu_and_cuda("batched products of vectors",
               "(graph (input X float32 (6 5 3)) (input u float32 (6 3)) (input w float64 (6 5))"
               " (output (batched_dot X u)) (output (batched_dot w X)) (output (batched_dot u u)))", 1e-10);
}

static void test_shapes_and_updates(void **st) {
  (void)st;
  cpu_and_cuda("shapes",
               "(graph (input a float32 (4 6)) (input b float32 (4 2))"
               " (define (p q) ((split 1 2) a (constant int64 (2) (2 4))))"
               " (output ((join 1) q b p)) (output ((reshape 2) a (constant int64 (2) (3 8))))"
               " (output ((subtensor (1 3) (none none -2)) a))"
               " (output ((inc_subtensor (1 3)) a (exp ((subtensor (0 2)) a))))"
               " (output (alloc (constant float32 () (2.5)) (constant int64 () (3)) (constant int64 () (2)))))",
               1e-10);
}

/* The text of a file of the source tree (malloc'd). */
static char *source_text(const char *rel) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = fopen(tu_source_path(rel), "r");
  if (!f) fail_msg("cannot read %s", rel);
  if (getdelim(&text, &n, 0, f) <= 0) fail_msg("%s is empty", rel);
  fclose(f);
  return text;
}

static void test_ifelse_and_scan(void **st) {
  (void)st;
  cpu_and_cuda("ifelse", "(graph (input a float64 (5)) (input s float64 ())"
                         " (output (ifelse (gt s (constant float64 () (0))) (exp a) (neg a))))",
               1e-10);
  char *lstm = source_text("examples/graphs/lstm.graph");
  long k = cpu_and_cuda("lstm", lstm, 1e-10);
  assert_true(k >= 3 * 2); /* each of the 3 steps' product and fused cell on the device */
  free(lstm);
}

/* A loop on the device is driven from the host with no host wait and no
 * copy through the host per step: the host waits for the outputs only,
 * however many steps run (the LSTM of examples/graphs, 4 and 40 steps). */
static void test_loop_without_host_waits(void **st) {
  (void)st;
  char *text = source_text("examples/graphs/lstm.graph");
  rg_fgraph *fg = rg_graph_read(C, "lstm", text, strlen(text));
  free(text);
  assert_non_null(fg);
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable *in[8], *out[2];
  for (int i = 0; i < nin; i++) in[i] = rg_fgraph_input(fg, i);
  for (int j = 0; j < nout; j++) out[j] = rg_fgraph_output(fg, j);
  rg_compile_opts o = {.backend = B};
  rg_function *g = rg_compile(C, nin, in, nout, out, &o);
  assert_non_null(g);
  long waits[2], copies[2];
  for (int r = 0; r < 2; r++) {
    int64_t steps = r ? 40 : 4;
    rg_tensor *vals[8], *res[2];
    for (int i = 0; i < nin; i++) {
      const rg_type *t = in[i]->type;
      if (i == 0) t = rg_type_new(t->dtype, t->ndim, (int64_t[]){steps, t->shape[1], t->shape[2]});
      vals[i] = tu_value(t, 5 + (uint64_t)i, -1, 2);
    }
    long w0 = stat_of(RGTEST_HOST_WAITS), c0 = stat_of(RGTEST_ASYNC_COPIES);
    assert_int_equal(rg_function_call(g, vals, res), RG_OK);
    waits[r] = stat_of(RGTEST_HOST_WAITS) - w0;
    copies[r] = stat_of(RGTEST_ASYNC_COPIES) - c0;
    assert_int_equal(res[0]->shape[0], steps);
    for (int j = 0; j < nout; j++) rg_tensor_free(res[j]);
    for (int i = 0; i < nin; i++) rg_tensor_free(vals[i]);
  }
  assert_int_equal(waits[1], waits[0]);
  assert_int_equal(copies[1], copies[0]);
  assert_true(waits[0] <= nout + 1);
  rg_function_free(g);
}

/* Availability of a numbered device: the driver has two. */
static void test_device_numbers(void **st) {
  (void)st;
  char why[256];
  assert_true(rg_backend_available("cuda:1", why, sizeof why));
  assert_false(rg_backend_available("cuda:2", why, sizeof why));
  assert_string_equal(why, "no CUDA device 2 (2 present)");
  /* a backend is labelled by its device, whatever name made it */
  assert_string_equal(rg_backend_label(B), "cuda:0");
  rg_backend *one = rg_backend_new("cuda:1", why, sizeof why);
  assert_non_null(one);
  assert_string_equal(rg_backend_label(one), "cuda:1");
  rg_backend_free(one);
}

/* cuBLAS named but missing: the product runs on the CPU, as any op the
 * backend lacks, with its value. */
static void test_missing_cublas(void **st) {
  (void)st;
  char *saved = strdup(getenv("RELGRAPH_CUBLAS"));
  setenv("RELGRAPH_CUBLAS", "/nonexistent/libcublas-missing.so", 1);
  char why[256];
  rg_backend *b = rg_backend_new("cuda", why, sizeof why); /* a fresh one: cuBLAS opens on first use */
  assert_non_null(b);
  int64_t sh[2] = {4, 4};
  rg_variable *a = rg_input(C, "a", rg_type_new(RG_FLOAT32, 2, sh));
  rg_variable *p = rg_dot(a, a);
  rg_variable *e = rg_exp(p);
  rg_compile_opts o = {.backend = b, .mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &a, 1, &e, &o);
  assert_non_null(f);
  const char *dump = tu_function_dump(f);
  assert_non_null(strstr(dump, "dot            cpu"));
  assert_non_null(strstr(dump, "exp            cuda:0"));
  rg_tensor *ta = rg_tensor_new(RG_FLOAT32, 2, sh), *out = NULL;
  for (int i = 0; i < 16; i++) rg_tensor_set_f64(ta, i, i % 3 - 1);
  assert_int_equal(rg_function_call(f, &ta, &out), RG_OK);
  rg_tensor *host = rg_tensor_to_host(out);
  double want = 0; /* element (0,0): row 0 of a dotted with column 0 */
  for (int k = 0; k < 4; k++) want += (double)((0 * 4 + k) % 3 - 1) * ((k * 4 + 0) % 3 - 1);
  assert_float_equal(rg_tensor_get_f64(host, 0), exp(want), 1e-5);
  rg_tensor_free(host);
  rg_tensor_free(out);
  rg_tensor_free(ta);
  rg_function_free(f);
  setenv("RELGRAPH_CUBLAS", saved, 1);
  free(saved);
  rg_backend_free(b);
}

/* Removes a test's temporary directory and what it holds. */
static void remove_dir(const char *dir) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Device code in the cache that the driver cannot load (an entry whole
 * by the cache's check, but not code): the kernel is compiled again, the
 * function runs, and the entry is rewritten with code that loads. */
static void test_unloadable_cache_entry(void **st) {
  (void)st;
  char dir[] = "/tmp/rg-cubin-host-XXXXXX", cmd[256];
  assert_non_null(mkdtemp(dir));
  int64_t n = 37;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT32, 1, &n));
  rg_variable *y = rg_add(rg_mul(rg_cos(x), x), rg_constant_scalar(C, RG_FLOAT32, 0.75));
  rg_tensor *xv = tu_value(x->type, 5, -2, 2);
  rg_tensor *want = NULL, *got = NULL;
  for (int round = 0; round < 3; round++) {
    char why[256];
    rg_backend *b = rg_backend_new("cuda", why, sizeof why); /* no kernel loaded yet */
    assert_non_null(b);
    rg_compile_opts o = {.backend = b, .mode = {.query = "none"}, .cache_dir = dir};
    rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
    if (!f) fail_msg("round %d: %s", round, rg_errmsg(C));
    assert_int_equal(rg_function_call(f, &xv, round ? &got : &want), RG_OK);
    rg_function_free(f);
    rg_backend_free(b);
    if (round) {
      agree("unloadable entry", 0, want, got, 0);
      rg_tensor_free(got);
    }
    /* after the first round every entry is replaced by one that is whole
     * but not device code; after the second each must hold code again */
    if (round == 2) break;
    snprintf(cmd, sizeof cmd, "ls '%s'/rgcu-*.cubin > '%s/list'", dir, dir);
    assert_int_equal(system(cmd), 0);
    char list[300], path[600];
    snprintf(list, sizeof list, "%s/list", dir);
    FILE *l = fopen(list, "r");
    assert_non_null(l);
    int entries = 0;
    while (fgets(path, sizeof path, l)) {
      path[strcspn(path, "\n")] = 0;
      if (round == 0) {
        assert_true(rg_cache_write(path, "not device code", 15));
      } else {
        size_t size = 0;
        void *code = rg_cache_read(path, &size);
        assert_non_null(code);
        assert_true(size > 15);
        rg_free(code);
      }
      entries++;
    }
    fclose(l);
    assert_true(entries > 0);
  }
  rg_tensor_free(want), rg_tensor_free(xv);
  remove_dir(dir);
}

/* no_codegen (and RELGRAPH_CODEGEN=0) on CUDA: a fused group runs on the
 * CPU by the composite interpreter, as the option says, and nothing is
 * compiled into the cache directory; the values are the same. */
static void test_no_codegen(void **st) {
  (void)st;
  char dir[] = "/tmp/rg-nocodegen-XXXXXX", cmd[256];
  assert_non_null(mkdtemp(dir));
  int64_t n = 11;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT32, 1, &n));
  rg_variable *y = rg_add(rg_mul(rg_exp(x), x), rg_constant_scalar(C, RG_FLOAT32, 1.5));
  rg_tensor *xv = tu_value(x->type, 3, -1, 1), *want = NULL, *got = NULL;
  rg_compile_opts on = {.backend = B}, off = {.backend = B, .no_codegen = true, .cache_dir = dir};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &on), *g = rg_compile(C, 1, &x, 1, &y, &off);
  if (!f || !g) fail_msg("compile: %s", rg_errmsg(C));
  const char *dump = tu_function_dump(g);
  if (!strstr(dump, "composite      cpu")) fail_msg("the fused group is not on the cpu:\n%s", dump);
  assert_non_null(strstr(tu_function_dump(f), "composite      cuda"));
  assert_int_equal(rg_function_call(f, &xv, &want), RG_OK);
  assert_int_equal(rg_function_call(g, &xv, &got), RG_OK);
  agree("no_codegen", 0, want, got, 0);
  snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
  assert_int_equal(system(cmd), 0); /* nothing compiled there */
  rg_tensor_free(want), rg_tensor_free(got), rg_tensor_free(xv);
  rg_function_free(f), rg_function_free(g);
  remove_dir(dir);
}

/* Outputs kept on the device, and outputs written into tensors the
 * caller gives (on the host, strided, and on the device). */
static void test_device_outputs_and_targets(void **st) {
  (void)st;
  int64_t n = 300;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  rg_variable *y = rg_mul(rg_exp(x), x);
  rg_tensor *v = tu_value(x->type, 3, -1, 2), *ref;
  rg_function *f = rg_compile(C, 1, &x, 1, &y, NULL);
  assert_int_equal(rg_function_call(f, &v, &ref), RG_OK);
  rg_compile_opts o = {.backend = B, .device_outputs = true};
  rg_function *g = rg_compile(C, 1, &x, 1, &y, &o);
  rg_tensor *d;
  assert_int_equal(rg_function_call(g, &v, &d), RG_OK);
  assert_int_equal(rg_tensor_device(d), RG_DEVICE_CUDA(0));
  rg_tensor *h = rg_tensor_to_host(d);
  agree("device output", 0, ref, h, 1e-12);
  /* into a host tensor, into every other element of one, into a device one */
  rg_tensor *host = rg_tensor_new(RG_FLOAT64, 1, &n), *wide = rg_tensor_new(RG_FLOAT64, 1, (int64_t[]){2 * n});
  rg_tensor *strided = rg_tensor_view(wide, 1, &n, (int64_t[]){16}, 0);
  rg_tensor *dev = rg_tensor_empty_on(rg_backend_buffer_type(B), RG_FLOAT64, 1, &n);
  rg_tensor *targets[3] = {host, strided, dev};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(rg_function_call_into(g, &v, &targets[k]), RG_OK);
    rg_tensor *t = rg_tensor_to_host(targets[k]);
    agree("into a target", k, ref, t, 1e-12);
    rg_tensor_free(t);
  }
  rg_tensor_free(dev);
  rg_tensor_free(strided);
  rg_tensor_free(wide);
  rg_tensor_free(host);
  rg_tensor_free(h);
  rg_tensor_free(d);
  rg_tensor_free(ref);
  rg_tensor_free(v);
  rg_function_free(f);
  rg_function_free(g);
}

/* The example graphs: loops, gradients (of an MLP, an RNN, the LSTM's
 * loss through its Scan), a matrix chain. */
static void test_examples(void **st) {
  (void)st;
  static const char *const names[] = {"cumsum", "dot_sum", "grad", "loop", "lstm_loss",
                                      "matrix_chain", "mlp", "mlp_loss", "pow16", "rnn"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char rel[128];
    snprintf(rel, sizeof rel, "examples/graphs/%s.graph", names[i]);
    char *text = source_text(rel);
    assert_true(cpu_and_cuda(names[i], text, 1e-9) > 0);
    free(text);
  }
}

int main(void) {
  const char *lib = getenv("RELGRAPH_CUDA_DRIVER");
  if (!lib || !*lib || !getenv("RELGRAPH_NVRTC") || !getenv("RELGRAPH_CUBLAS")) {
    printf("skipped: RELGRAPH_CUDA_DRIVER, RELGRAPH_NVRTC and RELGRAPH_CUBLAS must name the host implementation\n");
    return 77;
  }
  const char *cxx = getenv("CXX");
  char probe[512];
  snprintf(probe, sizeof probe, "%s --version > /dev/null 2>&1", cxx && *cxx ? cxx : "c++");
  if (system(probe) != 0) {
    printf("skipped: no C++ compiler (c++) to compile the kernels for the host\n");
    return 77;
  }
  rg_init();
  C = rg_ctx_new();
  char why[256];
  if (!(B = rg_backend_new("cuda", why, sizeof why))) {
    printf("cuda: %s\n", why);
    return 1;
  }
  void *dl = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (!dl || !(*(void **)&driver_stats = dlsym(dl, "rgtest_cuda_stats"))) {
    printf("%s is not the host implementation\n", lib);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise_and_reductions),
      cmocka_unit_test(test_products),
      cmocka_unit_test(test_shapes_and_updates),
      cmocka_unit_test(test_ifelse_and_scan),
      cmocka_unit_test(test_loop_without_host_waits),
      cmocka_unit_test(test_device_outputs_and_targets),
      cmocka_unit_test(test_device_numbers),
      cmocka_unit_test(test_missing_cublas),
      cmocka_unit_test(test_unloadable_cache_entry),
      cmocka_unit_test(test_no_codegen),
      cmocka_unit_test(test_examples),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rg_backend_free(B);
  return rc;
}
