/*
 * test_cuda_kernels.c — every kernel the CUDA generator writes, compiled
 * by NVRTC for sm_80 and sm_90 (no GPU needed).
 *
 * The kernels: every elementwise op on every dtype it accepts (casts to
 * every dtype, comparisons of mixed dtypes, switch, n-ary add and mul),
 * every reduction on every dtype it accepts, softmax and log_softmax, and
 * the fused kernels (composites) fusion makes of the project's pointwise
 * benchmark, the MLP and the LSTM step, each also in its 64-bit index
 * form.  Sources are compiled in batches (each kernel in a namespace of
 * its own); a batch that fails is compiled
 * kernel by kernel so the failure names the kernel and shows NVRTC's log.
 * Where NVRTC is not installed the test is skipped (exit status 77, which
 * CTest reports as skipped) with the reason.  RG_CUDA_ARCHS (a space-
 * separated list) narrows the architectures: CTest runs one test per
 * architecture, so the two compile side by side.
 */
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda-impl.h"
#include "base/base.h"
#include "relgraph/backend.h"

static rg_ctx *C;
static rgcu_nvrtc *nv;

/* ------------------------------------------------------------------ batches */

#define BATCH 48
typedef struct batch {
  char *src[BATCH];
  char label[BATCH][96];
  int n;
  int compiled;  /* kernels compiled, over the architectures */
} batch;

static const char *archs[2] = {"sm_80", "sm_90"};
static int narchs = 2;

/* The architectures of RG_CUDA_ARCHS where it names some. */
static void pick_archs(void) {
  const char *env = getenv("RG_CUDA_ARCHS");
  if (!env || !*env) return;
  narchs = 0;
  if (strstr(env, "sm_80")) archs[narchs++] = "sm_80";
  if (strstr(env, "sm_90")) archs[narchs++] = "sm_90";
  if (!narchs) archs[narchs++] = "sm_90";
}

static void compile_one(const char *label, const char *src, const char *arch) {
  void *img;
  size_t size;
  char log[8192];
  if (rgcu_nvrtc_compile(nv, src, arch, &img, &size, log, sizeof log) != RG_OK)
    fail_msg("%s for %s:\n%s\n--- source ---\n%s", label, arch, log, src);
  assert_true(size > 0);
  rg_free(img);
}

static void flush(batch *b) {
  if (!b->n) return;
  rg_strbuf all = {0};
  for (int i = 0; i < b->n; i++)
    rg_strbuf_put(&all, "namespace k%d {\n#define rg_kernel rg_kernel_%d\n%s#undef rg_kernel\n}\n", i, i, b->src[i]);
  assert_false(all.failed);
  for (int a = 0; a < narchs; a++) {
    void *img;
    size_t size;
    char log[256];
    if (rgcu_nvrtc_compile(nv, all.s, archs[a], &img, &size, log, sizeof log) == RG_OK) {
      rg_free(img);
      continue;
    }
    for (int i = 0; i < b->n; i++) compile_one(b->label[i], b->src[i], archs[a]);
  }
  b->compiled += narchs * b->n;
  rg_free(all.s);
  for (int i = 0; i < b->n; i++) rg_free(b->src[i]);
  b->n = 0;
}

static void add(batch *b, const char *label, char *src) {
  snprintf(b->label[b->n], sizeof b->label[b->n], "%s", label);
  b->src[b->n++] = src;
  if (b->n == BATCH) flush(b);
}

/* Generates the kernel of the node computing v (NULL: the op refused the
 * dtypes, nothing to generate) with gen and queues it. */
typedef char *(*gen_fn)(const rgb_node *, char *, size_t);
static void queue(batch *b, rg_variable *v, gen_fn gen, const char *label) {
  if (!v) {
    rg_clear_error(C);
    return;
  }
  rgb_node bn;
  assert_int_equal(rgb_node_init(&bn, v->owner), 0);
  char why[512];
  char *src = gen(&bn, why, sizeof why);
  if (!src) fail_msg("%s: %s", label, why);
  add(b, label, src);
  rgb_node_clear(&bn);
}

/* ------------------------------------------------------------------ elementwise */

static rg_variable *vec_in(rg_dtype dt) {
  int64_t n = 4;
  return rg_input(C, NULL, rg_type_new(dt, 1, &n));
}

static void test_elementwise(void **st) {
  (void)st;
  batch b = {0};
  for (int code = 0; code < RG_OP_COUNT; code++) {
    if (rg_opcode_family((rg_opcode)code) != RG_FAM_ELEMWISE) continue;
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      int n = tu_op_arity((rg_opcode)code);
      rg_variable *in[3];
      for (int i = 0; i < n; i++) in[i] = vec_in(code == RG_OP_SWITCH && i == 0 ? RG_BOOL : (rg_dtype)dt);
      char label[96];
      if (code == RG_OP_CAST) {
        for (int to = 0; to < RG_NDTYPES; to++) {
          snprintf(label, sizeof label, "cast %s -> %s", rg_dtype_name((rg_dtype)dt), rg_dtype_name((rg_dtype)to));
          queue(&b, rg_cast(in[0], (rg_dtype)to), rgcu_gen_elemwise, label);
        }
        continue;
      }
      snprintf(label, sizeof label, "%s %s", rg_opcode_name(code), rg_dtype_name((rg_dtype)dt));
      queue(&b, rg_apply(C, rg_op_get((rg_opcode)code), n, in), rgcu_gen_elemwise, label);
    }
  }
  /* mixed dtypes (the CPU's conversions), n-ary folds */
  for (int dt = 0; dt < RG_NDTYPES; dt++) {
    rg_variable *a = vec_in((rg_dtype)dt), *f = vec_in(RG_FLOAT32), *i8 = vec_in(RG_INT8);
    queue(&b, rg_lt(a, f), rgcu_gen_elemwise, "lt mixed");
    queue(&b, rg_add(a, i8), rgcu_gen_elemwise, "add mixed");
    queue(&b, rg_add_n(4, (rg_variable *[]){a, f, a, i8}), rgcu_gen_elemwise, "add n-ary");
    queue(&b, rg_mul_n(3, (rg_variable *[]){a, a, a}), rgcu_gen_elemwise, "mul n-ary");
  }
  flush(&b);
  printf("%d elementwise kernels compiled (%s%s%s)\n", b.compiled / narchs, archs[0],
         narchs > 1 ? " and " : "", narchs > 1 ? archs[1] : "");
  assert_true(b.compiled / narchs > 250);
}

/* ------------------------------------------------------------------ reductions */

typedef rg_variable *(*red_fn)(rg_variable *, int, const int64_t *);

static void test_reductions(void **st) {
  (void)st;
  batch b = {0};
  static const struct { const char *name; red_fn fn; } reds[] = {
      {"sum", rg_sum}, {"prod", rg_prod}, {"max", rg_max}, {"min", rg_min}, {"mean", rg_mean},
      {"argmax", rg_argmax}, {"argmin", rg_argmin}, {"all", rg_all}, {"any", rg_any}};
  int64_t axis = 1;
  for (size_t r = 0; r < sizeof reds / sizeof *reds; r++)
    for (int dt = 0; dt < RG_NDTYPES; dt++) {
      rg_variable *x = rg_input(C, NULL, rg_type_new((rg_dtype)dt, 3, (int64_t[]){2, 3, 4}));
      char label[96];
      snprintf(label, sizeof label, "%s %s", reds[r].name, rg_dtype_name((rg_dtype)dt));
      queue(&b, reds[r].fn(x, 1, &axis), rgcu_gen_reduce, label);
      queue(&b, reds[r].fn(x, -1, NULL), rgcu_gen_reduce, label);
    }
  for (int dt = RG_FLOAT32; dt <= RG_FLOAT64; dt++) {
    rg_variable *x = rg_input(C, NULL, rg_type_new((rg_dtype)dt, 2, (int64_t[]){3, 4}));
    queue(&b, rg_softmax(x, 1), rgcu_gen_softmax, "softmax");
    queue(&b, rg_log_softmax(x, 0), rgcu_gen_softmax, "log_softmax");
  }
  flush(&b);
  printf("%d reduction and softmax kernels compiled\n", b.compiled / narchs);
  assert_true(b.compiled / narchs > 100);
}

/* ------------------------------------------------------------------ fused kernels */

/* Queues every composite of a linked program and of its inner programs. */
static int queue_composites(batch *b, const rgb_program *p, const char *file) {
  int n = 0;
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_node *bn = &p->thunks[k].node;
    if (bn->code == RG_OP_COMPOSITE) {
      char why[512];
      char *src = rgcu_gen_composite(bn, why, sizeof why);
      if (!src) fail_msg("%s: a composite: %s", file, why);
      char *wide = rgcu_widen(src); /* the form for launches past 32-bit indices */
      assert_non_null(wide);
      add(b, file, src);
      add(b, file, wide);
      n++;
    }
    if (bn->inner) n += queue_composites(b, bn->inner, file);
  }
  return n;
}

static void test_fused(void **st) {
  (void)st;
  batch b = {0};
  static const char *const files[] = {"bench/graphs/pointwise_f32.graph", "examples/graphs/mlp.graph",
                                      "examples/graphs/lstm.graph", "<graph 0>", "<graph 1>", "<graph 2>"};
  int total = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    const char *text = files[i][0] == '<' ? tu_fused_graphs[files[i][7] - '0'] : NULL;
    rg_fgraph *fg = text ? rg_graph_read(C, files[i], text, strlen(text)) : rg_graph_load(C, tu_source_path(files[i]));
    if (!fg) fail_msg("%s", rg_errmsg(C));
    int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
    rg_variable *in[16], *out[16];
    for (int k = 0; k < nin; k++) in[k] = rg_fgraph_input(fg, k);
    for (int k = 0; k < nout; k++) out[k] = rg_fgraph_output(fg, k);
    rg_function *f = rg_compile(C, nin, in, nout, out, NULL);
    if (!f) fail_msg("%s: %s", files[i], rg_errmsg(C));
    total += queue_composites(&b, rgb_function_program(f), files[i]);
    flush(&b); /* before the function (and its inner programs) goes */
    rg_function_free(f);
  }
  printf("%d fused kernels compiled\n", total);
  assert_true(total >= 4);
}

/* ------------------------------------------------------------------ the disk cache */

static void test_disk_cache(void **st) {
  (void)st;
  char dir[] = "/tmp/rg-cubin-XXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("RELGRAPH_CACHE_DIR", dir, 1);
  rg_variable *x = vec_in(RG_FLOAT32);
  rgb_node bn;
  assert_int_equal(rgb_node_init(&bn, rg_tanh(x)->owner), 0);
  char why[256], log[1024];
  char *src = rgcu_gen_elemwise(&bn, why, sizeof why);
  assert_non_null(src);
  void *a, *b;
  size_t na, nb;
  bool hit;
  assert_int_equal(rgcu_nvrtc_compile_cached(nv, src, "sm_90", NULL, true, &a, &na, &hit, log, sizeof log), RG_OK);
  assert_false(hit);
  assert_int_equal(rgcu_nvrtc_compile_cached(nv, src, "sm_90", NULL, true, &b, &nb, &hit, log, sizeof log), RG_OK);
  assert_true(hit);
  assert_true(na == nb && memcmp(a, b, na) == 0);
  rg_free(b);
  /* an entry cut short is absent: compiled again and written whole */
  char cmd0[256];
  snprintf(cmd0, sizeof cmd0, "for f in '%s'/rgcu-*-sm_90.cubin; do head -c 100 \"$f\" > \"$f.x\" && mv \"$f.x\" \"$f\"; done", dir);
  assert_int_equal(system(cmd0), 0);
  assert_int_equal(rgcu_nvrtc_compile_cached(nv, src, "sm_90", NULL, true, &b, &nb, &hit, log, sizeof log), RG_OK);
  assert_false(hit);
  assert_true(na == nb && memcmp(a, b, na) == 0);
  rg_free(b);
  assert_int_equal(rgcu_nvrtc_compile_cached(nv, src, "sm_90", NULL, true, &b, &nb, &hit, log, sizeof log), RG_OK);
  assert_true(hit);
  rg_free(b);
  /* without reuse the entry is not read (one the driver could not load) */
  assert_int_equal(rgcu_nvrtc_compile_cached(nv, src, "sm_90", NULL, false, &b, &nb, &hit, log, sizeof log), RG_OK);
  assert_false(hit);
  rg_free(b);
  /* another architecture is another entry */
  assert_int_equal(rgcu_nvrtc_compile_cached(nv, src, "sm_80", NULL, true, &b, &nb, &hit, log, sizeof log), RG_OK);
  assert_false(hit);
  rg_free(a);
  rg_free(b);
  rg_free(src);
  rgb_node_clear(&bn);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  rg_init();
  C = rg_ctx_new();
  char why[256];
  nv = rgcu_nvrtc_open(why, sizeof why);
  if (!nv) {
    printf("skipped: %s\n", why);
    return 77;
  }
  pick_archs();
  printf("NVRTC %d\n", rgcu_nvrtc_version(nv));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_fused),
      cmocka_unit_test(test_disk_cache),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rgcu_nvrtc_close(nv);
  return rc;
}
