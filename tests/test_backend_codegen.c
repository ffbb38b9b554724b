/*
 * test_backend_codegen.c — kernels generated for fused groups
 * (backend/cpu/codegen.c) against the composite interpreter and the
 * unfused graph: the same bits for every float op the generator knows, in
 * float32 and float64, with broadcast, transposed and scalar inputs,
 * constants of another dtype, n-ary sums, NaN; the kernel lands in the
 * cache directory (the environment's, or the one a function is compiled
 * with); without a working compiler, with generation turned off, or for a
 * group it does not generate (integers, comparisons), the interpreter
 * gives the same values.
 *
 * Each case compiles one graph three ways: fast_run with generation on
 * (its own cache directory), fast_run with RELGRAPH_CODEGEN=0, and with
 * the query none (every op on its own).  A damaged cache entry is
 * compiled again, not loaded.
 */
#include "tests/test_backend_cpu.h"

#include <dirent.h>
#include <elf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "relgraph/backend.h"

static char cache[256];

static int setup(void **st) {
  snprintf(cache, sizeof cache, "/tmp/rg-codegen-test-%ld", (long)getpid());
  setenv("RELGRAPH_CACHE_DIR", cache, 1);
  return cpu_setup(st);
}

static int teardown(void **st) {
  (void)st;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
  return system(cmd) == 0 ? 0 : -1;
}

/* Generated kernels in a directory. */
static int kernels_in(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, "rgk-", 4) && strstr(e->d_name, ".so");
  closedir(d);
  return n;
}
static int kernels_cached(void) { return kernels_in(cache); }

static rg_tensor *run_with(const char *query, const char *codegen, int nin, rg_variable **ins, rg_variable *out,
                           rg_tensor **vals) {
  setenv("RELGRAPH_CODEGEN", codegen, 1);
  rg_compile_opts o = {.mode = {.query = query}};
  rg_function *f = rg_compile(C, nin, ins, 1, &out, &o);
  if (!f) fail_msg("compile: %s", rg_errmsg(C));
  rg_tensor *res = NULL;
  if (rg_function_call(f, vals, &res)) fail_msg("call: %s", rg_function_errmsg(f));
  rg_function_free(f);
  unsetenv("RELGRAPH_CODEGEN");
  return res;
}

/* Whether two tensors hold the same bits; NaN matches any NaN (which
 * operand's NaN an IEEE operation returns is not specified, and a
 * compiler may swap the operands of a commutative op). */
static void same_bits(const rg_tensor *a, const rg_tensor *b) {
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(rg_tensor_numel(a), rg_tensor_numel(b));
  size_t es = rg_dtype_size(a->dtype);
  for (int64_t i = 0; i < rg_tensor_numel(a); i++) {
    int64_t idx[RG_MAX_NDIM], r = i;
    for (int d = a->ndim - 1; d >= 0; d--) idx[d] = r % a->shape[d], r /= a->shape[d];
    if (isnan(rg_tensor_get_f64(a, i)) && isnan(rg_tensor_get_f64(b, i))) continue;
    if (memcmp(rg_tensor_at(a, idx), rg_tensor_at(b, idx), es))
      fail_msg("element %lld: %.17g vs %.17g", (long long)i, rg_tensor_get_f64(a, i), rg_tensor_get_f64(b, i));
  }
}

/* The three ways agree; returns how many kernels were generated. */
static int check3(int nin, rg_variable **ins, rg_variable *out, rg_tensor **vals) {
  int before = kernels_cached();
  rg_tensor *gen = run_with("fast_run", "1", nin, ins, out, vals);
  int made = kernels_cached() - before;
  rg_tensor *interp = run_with("fast_run", "0", nin, ins, out, vals);
  rg_tensor *plain = run_with("none", "0", nin, ins, out, vals);
  same_bits(gen, interp);
  same_bits(gen, plain);
  rg_tensor_free(gen), rg_tensor_free(interp), rg_tensor_free(plain);
  return made;
}

enum { R = 300, K = 256 }; /* 76 800 elements */

/* Every arithmetic op, every vector function, n-ary sums, constants of
 * the other float dtype, a broadcast row, a transposed input and a 0-d
 * input, in one fused group. */
static rg_variable *every_op(rg_variable *a, rg_variable *b, rg_variable *row, rg_variable *bt, rg_variable *s) {
  rg_variable *pos = rg_add(rg_abs(a), rg_scalar_float(C, 0.25)); /* a weak float64 literal */
  rg_variable *t[] = {
      rg_sub(a, b), rg_mul(a, row), rg_true_div(b, pos), rg_int_div(a, pos), rg_mod(b, pos),
      rg_pow(pos, b), rg_maximum(a, b), rg_minimum(a, rg_transpose(bt)), rg_neg(a), rg_sqr(b),
      rg_sign(a), rg_sqrt(pos), rg_floor(a), rg_ceil(b), rg_round(rg_mul(a, s)),
      rg_clip(a, rg_scalar_float(C, -0.5), rg_scalar_float(C, 0.5)),
      rg_exp(b), rg_log(pos), rg_log1p(pos), rg_expm1(b), rg_tanh(a), rg_erf(b), rg_sin(a), rg_cos(b),
      rg_sigmoid(a), rg_softplus(b)};
  return rg_add_n((int)(sizeof t / sizeof t[0]), t);
}

static void check_dtype(rg_dtype dt) {
  rg_variable *a = var(dt, 2, SHAPE(R, K)), *b = var(dt, 2, SHAPE(R, K)), *row = var(dt, 1, SHAPE(K));
  rg_variable *bt = var(dt, 2, SHAPE(K, R)), *s = var(dt, 0, NULL);
  rg_variable *ins[] = {a, b, row, bt, s};
  rg_tensor *vals[] = {tens_rand(dt, 2, SHAPE(R, K), -3, 3), tens_rand(dt, 2, SHAPE(R, K), -3, 3),
                       tens_rand(dt, 1, SHAPE(K), -2, 2), tens_rand(dt, 2, SHAPE(K, R), -3, 3), scalar(dt, 1.5)};
  /* NaN where maximum and minimum must propagate it */
  rg_tensor_set_f64(vals[0], 7, NAN);
  rg_tensor_set_f64(vals[1], 11, NAN);
  assert_true(check3(5, ins, every_op(a, b, row, bt, s), vals) >= 1);
  for (int i = 0; i < 5; i++) rg_tensor_free(vals[i]);
}

static void test_float32(void **st) { check_dtype(RG_FLOAT32); }
static void test_float64(void **st) { check_dtype(RG_FLOAT64); }

/* A group the generator leaves to the interpreter (integers and a
 * comparison), and a compiler that does not work: the same values. */
static void test_fallbacks(void **st) {
  rg_variable *i = var(RG_INT32, 2, SHAPE(R, K)), *x = var(RG_FLOAT32, 2, SHAPE(R, K));
  rg_tensor *iv = tens_rand(RG_INT32, 2, SHAPE(R, K), -100, 100), *xv = tens_rand(RG_FLOAT32, 2, SHAPE(R, K), -1, 1);
  rg_variable *e = rg_add(rg_mul(i, i), rg_neg(i));
  assert_int_equal(check3(1, &i, e, &iv), 0);
  rg_variable *cmp = rg_switch(rg_lt(x, rg_constant_scalar(C, RG_FLOAT32, 0)), rg_neg(x), rg_mul(x, x));
  assert_int_equal(check3(1, &x, cmp, &xv), 0);
  setenv("RELGRAPH_CC", "/nonexistent/cc", 1);
  rg_variable *f = rg_add(rg_mul(rg_exp(x), x), rg_constant_scalar(C, RG_FLOAT32, 3)); /* a new kernel */
  assert_int_equal(check3(1, &x, f, &xv), 0);
  unsetenv("RELGRAPH_CC");
  rg_tensor_free(iv), rg_tensor_free(xv);
}

/* Infinite and NaN constants in a group are literals the compiler reads
 * (printf's `inf` and `nan` are not): the kernel is made, and agrees. */
static void test_constants_not_finite(void **st) {
  rg_variable *x = var(RG_FLOAT64, 2, SHAPE(R, K));
  rg_tensor *xv = tens_rand(RG_FLOAT64, 2, SHAPE(R, K), -3, 3);
  rg_tensor_set_f64(xv, 3, INFINITY);
  rg_tensor_set_f64(xv, 5, 0);
  rg_variable *f = rg_maximum(rg_add(rg_mul(x, rg_constant_scalar(C, RG_FLOAT64, INFINITY)), rg_exp(x)),
                              rg_mul(rg_tanh(x), rg_constant_scalar(C, RG_FLOAT64, -INFINITY)));
  assert_int_equal(check3(1, &x, f, &xv), 1);
  rg_variable *g = rg_add(rg_mul(rg_sin(x), rg_constant_scalar(C, RG_FLOAT64, NAN)), rg_cos(x));
  assert_int_equal(check3(1, &x, g, &xv), 1);
  rg_tensor_free(xv);
}

/* A second compile of the same group loads the cached kernel. */
static void test_cache_reused(void **st) {
  rg_variable *x = var(RG_FLOAT32, 2, SHAPE(R, K));
  rg_tensor *xv = tens_rand(RG_FLOAT32, 2, SHAPE(R, K), -1, 1);
  rg_variable *f = rg_mul(rg_add(rg_tanh(x), x), rg_constant_scalar(C, RG_FLOAT32, 0.5));
  int first = check3(1, &x, f, &xv);
  assert_int_equal(first, 1);
  assert_int_equal(check3(1, &x, f, &xv), 0);
  rg_tensor_free(xv);
}

/* The kernel is generated when the function is compiled, before any call:
 * the first call pays nothing for it. */
static void test_generated_at_compile(void **st) {
  rg_variable *x = var(RG_FLOAT32, 2, SHAPE(R, K));
  rg_variable *f = rg_mul(rg_sub(rg_exp(x), rg_sigmoid(x)), rg_constant_scalar(C, RG_FLOAT32, 0.25));
  int before = kernels_cached();
  setenv("RELGRAPH_CODEGEN", "1", 1);
  rg_function *fn = rg_compile(C, 1, &x, 1, &f, NULL);
  assert_non_null(fn);
  assert_int_equal(kernels_cached() - before, 1);
  unsetenv("RELGRAPH_CODEGEN");
  rg_function_free(fn);
}

/* How many thunks of a function's outer program apply op `name`. */
static int thunks_named(const rg_function *f, const char *name) {
  char pat[64];
  snprintf(pat, sizeof pat, " %s ", name);
  int n = 0;
  for (const char *p = tu_function_dump(f); (p = strstr(p, pat)); p++) n++;
  return n;
}

/* Gate-like parts computed by one fused group (two of them chains of
 * their own, joined as siblings) and joined along `axis`: the group writes
 * them straight into the joined value and the join leaves the program;
 * values as the interpreter and the unfused graph give them.  A part the
 * program reads twice keeps its join. */
static void check_join(int axis, int nd, const int64_t *shape, bool shared) {
  rg_variable *x = var(RG_FLOAT32, nd, shape), *y = var(RG_FLOAT32, nd, shape);
  rg_variable *half = rg_constant_scalar(C, RG_FLOAT32, 0.5);
  rg_variable *parts[] = {rg_mul(rg_tanh(x), y), rg_add(rg_sigmoid(x), y), rg_mul(rg_exp(y), half),
                          rg_mul(rg_sub(x, half), rg_sigmoid(y))};
  rg_variable *out = rg_join(axis, 4, parts);
  if (shared) {
    rg_variable *again[] = {parts[1], parts[0], parts[3], parts[2]};
    out = rg_mul(out, rg_join(axis, 4, again));
  }
  rg_variable *ins[] = {x, y};
  rg_tensor *vals[] = {tens_rand(RG_FLOAT32, nd, shape, -2, 2), tens_rand(RG_FLOAT32, nd, shape, -2, 2)};
  for (int threads = 1; threads <= 2; threads++) {
    rg_compile_opts o = {.mode = {.query = "fast_run"}, .nthreads = threads};
    rg_function *f = rg_compile(C, 2, ins, 1, &out, &o);
    assert_non_null(f);
    assert_int_equal(thunks_named(f, "composite"), 1);
    assert_int_equal(thunks_named(f, "join"), shared ? 2 : 0);
    rg_tensor *got = NULL, *again = NULL;
    assert_int_equal(rg_function_call(f, vals, &got), 0);
    assert_int_equal(rg_function_call(f, vals, &again), 0); /* a second call into the same storage */
    rg_tensor *plain = run_with("none", "0", 2, ins, out, vals);
    same_bits(got, plain);
    same_bits(again, plain);
    rg_tensor_free(got), rg_tensor_free(again), rg_tensor_free(plain);
    rg_function_free(f);
  }
  assert_true(check3(2, ins, out, vals) >= 0);
  rg_tensor_free(vals[0]), rg_tensor_free(vals[1]);
}

/* rg_compile_opts: a function's own cache directory (made when missing)
 * takes the kernel instead of the environment's; no_codegen generates
 * nothing and gives the same bits. */
static void test_compile_options(void **st) {
  rg_variable *x = var(RG_FLOAT32, 2, SHAPE(R, K));
  rg_tensor *xv = tens_rand(RG_FLOAT32, 2, SHAPE(R, K), -1, 1);
  rg_variable *f = rg_add(rg_mul(rg_tanh(x), rg_exp(x)), rg_constant_scalar(C, RG_FLOAT32, 0.75));
  char own[300];
  snprintf(own, sizeof own, "%s/own/dir", cache);
  rg_tensor *out[2];
  for (int k = 0; k < 2; k++) {
    int before = kernels_cached();
    rg_compile_opts o = {.cache_dir = own, .no_codegen = k == 1};
    rg_function *fn = rg_compile(C, 1, &x, 1, &f, &o);
    assert_non_null(fn);
    assert_int_equal(kernels_cached(), before);
    assert_int_equal(kernels_in(own), 1); /* made by the first compile; the second adds none */
    assert_int_equal(rg_function_call(fn, &xv, &out[k]), 0);
    rg_function_free(fn);
  }
  same_bits(out[0], out[1]);
  rg_variable *g = rg_sub(rg_sigmoid(x), rg_mul(x, x)); /* a new group, generation off */
  rg_compile_opts off = {.cache_dir = own, .no_codegen = true};
  rg_function *fn = rg_compile(C, 1, &x, 1, &g, &off);
  assert_non_null(fn);
  assert_int_equal(kernels_in(own), 1);
  rg_function_free(fn);
  /* a directory that cannot be made (under a file): an error naming it */
  char file[320], bad[330];
  snprintf(file, sizeof file, "%s/not-a-dir", own);
  snprintf(bad, sizeof bad, "%s/sub", file);
  FILE *fp = fopen(file, "w");
  assert_non_null(fp);
  fclose(fp);
  rg_compile_opts nodir = {.cache_dir = bad};
  assert_null(rg_compile(C, 1, &x, 1, &f, &nodir));
  assert_non_null(strstr(rg_errmsg(C), "not-a-dir/sub"));
  assert_non_null(strstr(rg_errmsg(C), "cannot be made"));
  /* generation off (by option or by RELGRAPH_CODEGEN=0): the directory named is not made */
  char never[320];
  for (int k = 0; k < 2; k++) {
    snprintf(never, sizeof never, "%s/never-%d", own, k);
    if (k) setenv("RELGRAPH_CODEGEN", "0", 1);
    rg_compile_opts quiet = {.cache_dir = never, .no_codegen = k == 0};
    rg_function *q = rg_compile(C, 1, &x, 1, &f, &quiet);
    unsetenv("RELGRAPH_CODEGEN");
    assert_non_null(q);
    rg_function_free(q);
    assert_int_not_equal(access(never, F_OK), 0);
  }
  rg_tensor_free(out[0]), rg_tensor_free(out[1]), rg_tensor_free(xv);
}

/* The path of the one kernel in dir (the test's own directory). */
static void kernel_path(const char *dir, char *path, size_t cap) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  path[0] = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, "rgk-", 4) && strstr(e->d_name, ".so")) snprintf(path, cap, "%s/%s", dir, e->d_name);
  closedir(d);
  assert_true(path[0]);
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* The file offset and size of the .text section of the ELF object b. */
static void text_section(const char *b, long n, long *off, long *size) {
  Elf64_Ehdr eh;
  memcpy(&eh, b, sizeof eh);
  assert_true(eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) <= (uint64_t)n);
  Elf64_Shdr names;
  memcpy(&names, b + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof names, sizeof names);
  for (int i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, b + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
    if (!strcmp(b + names.sh_offset + sh.sh_name, ".text")) {
      *off = (long)sh.sh_offset, *size = (long)sh.sh_size;
      return;
    }
  }
  fail_msg("no .text section");
}

/* A cache entry cut short, empty, not an object at all, with its code
 * damaged in place or without its trailer is compiled again, not loaded
 * (a cut one would fault when mapped, a damaged one when run): the
 * function gives the same bits and the entry is whole again. */
static void test_corrupt_cache_entry(void **st) {
  rg_variable *x = var(RG_FLOAT64, 2, SHAPE(R, K));
  rg_tensor *xv = tens_rand(RG_FLOAT64, 2, SHAPE(R, K), -1, 1);
  rg_variable *f = rg_sub(rg_mul(rg_sigmoid(x), rg_cos(x)), rg_constant_scalar(C, RG_FLOAT64, 0.125));
  char own[300], path[600];
  snprintf(own, sizeof own, "%s/corrupt", cache);
  rg_compile_opts o = {.cache_dir = own};
  rg_tensor *want = NULL;
  rg_function *fn = rg_compile(C, 1, &x, 1, &f, &o);
  assert_non_null(fn);
  assert_int_equal(rg_function_call(fn, &xv, &want), 0);
  rg_function_free(fn);
  kernel_path(own, path, sizeof path);
  long whole = file_size(path);
  assert_true(whole > 1000);
  char *bytes = malloc((size_t)whole);
  FILE *in = fopen(path, "rb");
  assert_non_null(in);
  assert_int_equal(fread(bytes, 1, (size_t)whole, in), (size_t)whole);
  fclose(in);
  /* cut short; -1: text instead of an object; -2: whole, its code
   * overwritten by int3 (headers and key intact); -3: the object without
   * its trailer */
  long cuts[] = {whole / 4, whole / 2, whole - 1, 64, 0, -1, -2, -3};
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    /* a new file: the object this process loaded stays mapped as it was */
    assert_int_equal(unlink(path), 0);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    if (cuts[k] >= 0) assert_int_equal(fwrite(bytes, 1, (size_t)cuts[k], out), (size_t)cuts[k]);
    else if (cuts[k] == -1) fputs("not an object\n", out);
    else if (cuts[k] == -2) {
      char *bad = malloc((size_t)whole);
      memcpy(bad, bytes, (size_t)whole);
      long off = 0, size = 0;
      text_section(bytes, whole, &off, &size);
      memset(bad + off, 0xcc, (size_t)size);
      assert_int_equal(fwrite(bad, 1, (size_t)whole, out), (size_t)whole);
      free(bad);
    } else
      assert_int_equal(fwrite(bytes, 1, (size_t)whole - 16, out), (size_t)whole - 16);
    fclose(out);
    rg_tensor *got = NULL;
    fn = rg_compile(C, 1, &x, 1, &f, &o);
    assert_non_null(fn);
    assert_int_equal(rg_function_call(fn, &xv, &got), 0);
    rg_function_free(fn);
    same_bits(want, got);
    rg_tensor_free(got);
    assert_int_equal(file_size(path), whole);
  }
  free(bytes);
  rg_tensor_free(want), rg_tensor_free(xv);
}

static void test_join_into(void **st) {
  check_join(1, 2, SHAPE(64, 256), false);  /* the LSTM's gate gradients: rows of parts */
  check_join(0, 2, SHAPE(64, 256), false);  /* parts one after another */
  check_join(1, 3, SHAPE(4, 40, 50), false); /* rows of 2 000 elements: blocks within rows */
  check_join(2, 3, SHAPE(8, 32, 300), false);
  check_join(1, 2, SHAPE(64, 256), true);
}

/* Outputs of 4 MB and more go out with streaming stores (stream.c; the
 * generated kernel's rg_kernel_nt, the interpreter through a staging
 * block): the same bits, with a tail shorter than a piece, in both float
 * dtypes, and through a join whose rows start off a cache line (the
 * kernel falls back to ordinary stores there) on one and two threads. */
static void test_streaming(void **st) {
  rg_dtype dts[] = {RG_FLOAT32, RG_FLOAT64};
  for (int k = 0; k < 2; k++) {
    rg_variable *x = var(dts[k], 2, SHAPE(1031, 1031)), *y = var(dts[k], 2, SHAPE(1031, 1031));
    rg_variable *ins[] = {x, y};
    rg_tensor *vals[] = {tens_rand(dts[k], 2, SHAPE(1031, 1031), -3, 3), tens_rand(dts[k], 2, SHAPE(1031, 1031), -3, 3)};
    rg_variable *two = rg_constant_scalar(C, dts[k], 2), *one = rg_constant_scalar(C, dts[k], 1);
    assert_true(check3(1, &x, rg_add(rg_mul(two, x), one), vals) >= 0);
    assert_true(check3(2, ins, rg_add(rg_mul(rg_tanh(x), y), x), vals) >= 0);
    rg_tensor_free(vals[0]), rg_tensor_free(vals[1]);
  }
  check_join(1, 2, SHAPE(517, 1031), false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_float32),
      cmocka_unit_test(test_float64),
      cmocka_unit_test(test_fallbacks),
      cmocka_unit_test(test_constants_not_finite), cmocka_unit_test(test_cache_reused),
      cmocka_unit_test(test_generated_at_compile),
      cmocka_unit_test(test_compile_options),
      cmocka_unit_test(test_corrupt_cache_entry),
      cmocka_unit_test(test_join_into),
      cmocka_unit_test(test_streaming),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
