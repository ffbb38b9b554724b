/*
 * test_backend_vm.c — the linker, the two virtual machines and the
 * function API: cells, releases, buffer reuse, laziness, shared values,
 * updates, subsets and every compile-time and call-time error.
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend-impl.h"
#include "relgraph/backend.h"
#include "relgraph/scan.h"

static rg_ctx *C;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  return 0;
}

static const rg_type *vec(rg_dtype dt, int64_t n) { return rg_type_new(dt, 1, &n); }

static rg_tensor *vec_f64(int n, const double *v) {
  int64_t shape = n;
  return rg_tensor_from_data(RG_FLOAT64, 1, &shape, v);
}

static void test_identity_and_constants(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  double kv[3] = {7, 8, 9};
  int64_t shape = 3;
  rg_variable *k = rg_constant_data(C, RG_FLOAT64, 1, &shape, kv);
  rg_variable *outs[3] = {x, k, x};
  rg_function *f = rg_compile(C, 1, &x, 3, outs, NULL);
  assert_non_null(f);
  rg_tensor *in = vec_f64(3, (double[]){1, 2, 3}), *res[3];
  for (int rep = 0; rep < 3; rep++) {
    assert_int_equal(rg_function_call(f, &in, res), RG_OK);
    assert_true(rg_tensor_equal(res[0], in));
    assert_true(rg_tensor_get_f64(res[1], 2) == 9);
    assert_true(rg_tensor_equal(res[2], in));
    /* each output is the caller's own: writing into it changes neither
     * the input nor the constant a later call returns */
    for (int i = 0; i < 3; i++) rg_tensor_set_f64(res[i], 0, -1);
    assert_true(rg_tensor_get_f64(in, 0) == 1);
    for (int i = 0; i < 3; i++) rg_tensor_free(res[i]);
  }
  rg_tensor_free(in);
  rg_function_free(f);
}

/* Outputs that are views of an input or of a constant, and a constant
 * the kernels also read, are copies the caller may write into. */
static void test_outputs_are_the_callers(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  int64_t shape = 3;
  rg_variable *k = rg_constant_data(C, RG_FLOAT64, 1, &shape, (double[]){7, 8, 9});
  rg_variable *outs[4] = {rg_dimshuffle(x, 2, (int64_t[]){-1, 0}), k, rg_add(x, k),
                          rg_dimshuffle(k, 2, (int64_t[]){0, -1})};
  const char *queries[] = {"none", "fast_run"};
  for (int q = 0; q < 2; q++) {
    rg_compile_opts o = {.mode = {.query = queries[q]}};
    rg_function *f = rg_compile(C, 1, &x, 4, outs, &o);
    assert_non_null(f);
    rg_tensor *in = vec_f64(3, (double[]){1, 2, 3}), *res[4];
    for (int rep = 0; rep < 3; rep++) {
      assert_int_equal(rg_function_call(f, &in, res), RG_OK);
      assert_true(rg_tensor_get_f64(res[0], 1) == 2);
      assert_true(rg_tensor_get_f64(res[1], 0) == 7);
      assert_true(rg_tensor_get_f64(res[2], 2) == 12);
      assert_true(rg_tensor_get_f64(res[3], 1) == 8);
      for (int i = 0; i < 4; i++) {
        for (int e = 0; e < 3; e++) rg_tensor_set_f64(res[i], e, 12345);
        rg_tensor_free(res[i]);
      }
      assert_true(rg_tensor_get_f64(in, 1) == 2);
    }
    rg_tensor_free(in);
    rg_function_free(f);
  }
}

/* Outputs that would share storage with one another (one variable listed
 * twice, a view of another output, through a subset too) or with the new
 * value of a shared container are copies: writing into one changes no
 * other output and no later call's result. */
static void test_outputs_not_each_others(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *e = rg_exp(x);
  rg_variable *outs[3] = {e, e, rg_dimshuffle(e, 2, (int64_t[]){-1, 0})};
  rg_function *f = rg_compile(C, 1, &x, 3, outs, NULL);
  assert_non_null(f);
  rg_tensor *in = vec_f64(3, (double[]){0, 0, 0}), *res[3];
  assert_int_equal(rg_function_call(f, &in, res), RG_OK);
  rg_tensor_set_f64(res[0], 0, 42);
  assert_true(rg_tensor_get_f64(res[1], 0) == 1);
  assert_true(rg_tensor_get_f64(res[2], 0) == 1);
  for (int i = 0; i < 3; i++) rg_tensor_free(res[i]);
  assert_int_equal(rg_function_call_subset(f, &in, 2, (int[]){0, 0}, res), RG_OK);
  rg_tensor_set_f64(res[0], 1, 42);
  assert_true(rg_tensor_get_f64(res[1], 1) == 1);
  for (int i = 0; i < 2; i++) rg_tensor_free(res[i]);
  rg_function_free(f);

  rg_tensor *zero = vec_f64(3, (double[]){0, 0, 0});
  rg_shared *s = rg_shared_new(zero);
  rg_variable *w = rg_shared_var(C, "w", s, NULL);
  rg_variable *nw = rg_add(w, rg_scalar_float(C, 1));
  rg_update up = {w, nw};
  rg_compile_opts o = {.nupdates = 1, .updates = &up};
  f = rg_compile(C, 0, NULL, 1, &nw, &o);
  assert_non_null(f);
  rg_tensor *r;
  assert_int_equal(rg_function_call(f, NULL, &r), RG_OK);
  rg_tensor_set_f64(r, 0, 1000);
  rg_tensor_free(r);
  assert_int_equal(rg_function_call(f, NULL, &r), RG_OK);
  assert_true(rg_tensor_get_f64(r, 0) == 2 && rg_tensor_get_f64(r, 2) == 2);
  rg_tensor_free(r);
  rg_function_free(f);
  rg_shared_free(s);
  rg_tensor_free(zero);
  rg_tensor_free(in);
}

/* Running into the caller's tensors: a shared container's new value is
 * its own, whether the update is also an output (computed into the
 * caller's tensor, which the caller then writes into or frees) or an
 * input's value. */
static void test_call_into_updates(void **st) {
  rg_tensor *init = vec_f64(3, (double[]){1, 2, 3});
  rg_shared *sa = rg_shared_new(init);
  rg_variable *a = rg_shared_var(C, "a", sa, NULL);
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *na = rg_add(a, x);
  rg_update up = {a, na};
  rg_compile_opts o = {.nupdates = 1, .updates = &up};
  rg_function *f = rg_compile(C, 1, &x, 1, &na, &o);
  assert_non_null(f);
  rg_tensor *xi = vec_f64(3, (double[]){10, 10, 10}), *r = vec_f64(3, (double[]){0, 0, 0});
  assert_int_equal(rg_function_call_into(f, &xi, &r), RG_OK);
  assert_true(rg_tensor_get_f64(r, 0) == 11);
  rg_tensor_set_f64(r, 0, -1000);
  rg_tensor_free(r);
  r = vec_f64(3, (double[]){0, 0, 0});
  assert_int_equal(rg_function_call_into(f, &xi, &r), RG_OK);
  assert_true(rg_tensor_get_f64(r, 0) == 21 && rg_tensor_get_f64(r, 2) == 23);
  rg_tensor_free(r);
  rg_function_free(f);

  /* the update a view (a transpose) of an output computed into the
   * caller's tensor */
  int64_t sq[2] = {2, 2};
  rg_tensor *m0 = rg_tensor_from_data(RG_FLOAT64, 2, sq, (double[]){1, 2, 3, 4});
  rg_shared *sm = rg_shared_new(m0);
  rg_variable *m = rg_shared_var(C, "m", sm, NULL), *y = rg_input(C, "y", m->type);
  rg_variable *nm = rg_add(m, y);
  rg_update transposed = {m, rg_dimshuffle(nm, 2, (int64_t[]){1, 0})};
  rg_compile_opts ot = {.nupdates = 1, .updates = &transposed};
  f = rg_compile(C, 1, &y, 1, &nm, &ot);
  assert_non_null(f);
  rg_tensor *yi = rg_tensor_from_data(RG_FLOAT64, 2, sq, (double[]){10, 10, 10, 10});
  r = rg_tensor_new(RG_FLOAT64, 2, sq);
  assert_int_equal(rg_function_call_into(f, &yi, &r), RG_OK);
  rg_tensor_set_f64(r, 1, -1000);
  rg_tensor_free(r);
  rg_tensor *held = rg_shared_get(sm);
  assert_true(rg_tensor_get_f64(held, 1) == 13 && rg_tensor_get_f64(held, 2) == 12); /* (m + y).T */
  rg_tensor_free(held);
  rg_tensor_free(yi);
  rg_tensor_free(m0);
  rg_shared_free(sm);
  rg_function_free(f);

  rg_update to_input = {a, x};
  o.updates = &to_input;
  f = rg_compile(C, 1, &x, 1, &na, &o);
  assert_non_null(f);
  r = vec_f64(3, (double[]){0, 0, 0});
  assert_int_equal(rg_function_call_into(f, &xi, &r), RG_OK);
  rg_tensor_set_f64(xi, 0, -100); /* the caller's input, reused */
  rg_tensor *now = rg_shared_get(sa);
  assert_true(rg_tensor_get_f64(now, 0) == 10);
  rg_tensor_free(now);
  rg_tensor_free(r);
  rg_tensor_free(xi);
  rg_function_free(f);
  rg_shared_free(sa);
  rg_tensor_free(init);
}

/* A Scan's nit-sot computed into the caller's tensor: its trace is a view
 * of a buffer made in the caller's memory, and the function must not keep
 * that view for the next call. */
static int row_sum(rg_ctx *ctx, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **until,
                   void *ud) {
  (void)ctx, (void)nin, (void)until, (void)ud;
  return (outs[0] = rg_sum(in[0], -1, NULL)) ? RG_OK : RG_ERR_TYPE;
}

static void test_call_into_scan_trace(void **st) {
  int64_t u[2] = {RG_DIM_UNKNOWN, RG_DIM_UNKNOWN}, s[2] = {4, 2}, n = 4;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 2, u)), *ys[1];
  rg_scan_seq seqs[1] = {{.x = x}};
  rg_scan_output outs[1] = {{.init = NULL}};
  rg_scan_spec spec = {.nseqs = 1, .seqs = seqs, .noutputs = 1, .outputs = outs, .fn = row_sum,
                       .truncate_gradient = -1};
  assert_non_null(rg_scan(C, &spec, ys));
  rg_function *f = rg_compile(C, 1, &x, 1, ys, NULL);
  assert_non_null(f);
  rg_tensor *xa = rg_tensor_from_data(RG_FLOAT64, 2, s, (double[]){1, 0, 2, 0, 3, 0, 4, 0});
  rg_tensor *xb = rg_tensor_from_data(RG_FLOAT64, 2, s, (double[]){100, 0, 200, 0, 300, 0, 400, 0});
  rg_tensor *target = rg_tensor_new(RG_FLOAT64, 1, &n), *out = NULL;
  assert_int_equal(rg_function_call_into(f, &xa, &target), RG_OK);
  assert_true(rg_tensor_get_f64(target, 3) == 4);
  assert_int_equal(rg_function_call(f, &xb, &out), RG_OK);
  assert_true(rg_tensor_get_f64(out, 3) == 400);
  assert_true(rg_tensor_get_f64(target, 3) == 4); /* the caller's tensor is left alone */
  assert_true(rg_storage_base(out) != rg_storage_base(target));
  rg_tensor_free(out);
  /* a target freed after the call is never written again */
  rg_tensor_free(target);
  assert_int_equal(rg_function_call(f, &xa, &out), RG_OK);
  assert_true(rg_tensor_get_f64(out, 0) == 1);
  rg_tensor_free(out);
  rg_tensor_free(xa);
  rg_tensor_free(xb);
  rg_function_free(f);
}

static void test_errors(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *y = rg_input(C, "y", vec(RG_FLOAT64, 3));
  /* y is needed but not given */
  rg_variable *cond = rg_input(C, "cond", rg_type_scalar(RG_BOOL));
  rg_variable *sel = rg_ifelse(cond, 1, &x, &y)->outputs[0];
  assert_null(rg_compile(C, 2, (rg_variable *[]){cond, x}, 1, &sel, NULL));
  assert_non_null(strstr(rg_errmsg(C), "missing input: variable 'y'"));
  rg_variable *c = rg_apply(C, rg_op_opaque("op1", 1, NULL), 2, (rg_variable *[]){x, y});
  /* opaque ops cannot run */
  assert_null(rg_compile(C, 2, (rg_variable *[]){x, y}, 1, &c, NULL));
  assert_non_null(strstr(rg_errmsg(C), "opaque"));
  /* an input computed by the graph */
  assert_null(rg_compile(C, 1, &c, 1, &c, NULL));
  /* unknown backend, unknown query */
  rg_compile_opts o = {.mode = {.backend = "tpu"}};
  assert_null(rg_compile(C, 1, &x, 1, &x, &o));
  assert_non_null(strstr(rg_errmsg(C), "tpu"));
  o = (rg_compile_opts){.mode = {.query = "fast_nothing"}};
  assert_null(rg_compile(C, 1, &x, 1, &x, &o));
  /* negative counts, and counts without their arrays */
  assert_null(rg_compile(C, 1, &x, -1, &x, NULL));
  assert_non_null(strstr(rg_errmsg(C), "negative count"));
  assert_null(rg_compile(C, -2, &x, 1, &x, NULL));
  o = (rg_compile_opts){.nupdates = 1};
  assert_null(rg_compile(C, 1, &x, 1, &x, &o));
  assert_non_null(strstr(rg_errmsg(C), "a count of updates (1) and no array of them"));
  assert_null(rg_compile(C, 1, NULL, 1, &x, NULL));
  assert_non_null(strstr(rg_errmsg(C), "a count of inputs (1)"));
  assert_null(rg_compile(C, 1, &x, 2, NULL, NULL));
}

/* The calls that end a chain of constructions keep the error that made a
 * NULL they are given (they said "output 0 is NULL"); a NULL with no error
 * before it is named. */
static void test_errors_sticky_null(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  int64_t s[2] = {4, 5};
  rg_variable *m = rg_input(C, "m", rg_type_new(RG_FLOAT64, 2, s));
  rg_variable *y = rg_exp(rg_dot(m, x));
  assert_null(y);
  assert_null(rg_compile(C, 2, (rg_variable *[]){x, m}, 1, &y, NULL));
  assert_non_null(strstr(rg_errmsg(C), "not aligned"));
  rg_variable *g;
  assert_int_not_equal(rg_grad(C, y, 1, &x, NULL, &g), RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "not aligned"));
  assert_int_not_equal(rg_grad(C, rg_sum(rg_exp(x), -1, NULL), 1, (rg_variable *[]){rg_neg(NULL)}, NULL, &g), RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "not aligned"));
  rg_clear_error(C);
  y = NULL;
  assert_null(rg_compile(C, 1, &x, 1, &y, NULL));
  assert_non_null(strstr(rg_errmsg(C), "output 0 is NULL"));
  rg_clear_error(C);
  assert_int_not_equal(rg_grad(C, NULL, 1, &x, NULL, &g), RG_OK);
  assert_non_null(strstr(rg_errmsg(C), "no cost"));
}

/* A target that shares memory with an input is refused: the kernels would
 * read what they overwrite (a transpose plus one, computed into its own
 * input, gave wrong values silently). */
static void test_call_into_overlapping_input(void **st) {
  int64_t s[2] = {3, 3};
  rg_variable *m = rg_input(C, "m", rg_type_new(RG_FLOAT64, 2, s));
  rg_variable *y = rg_add(rg_transpose(m), rg_scalar_float(C, 1));
  rg_function *f = rg_compile(C, 1, &m, 1, &y, NULL);
  assert_non_null(f);
  rg_tensor *in = rg_tensor_new(RG_FLOAT64, 2, s);
  for (int i = 0; i < 9; i++) ((double *)in->data)[i] = i + 1;
  assert_int_equal(rg_function_call_into(f, &in, &in), RG_ERR_TYPE);
  assert_non_null(strstr(rg_function_errmsg(f), "output 0 is given memory of input 0"));
  /* a transposed view of the input overlaps it too; a separate tensor does not */
  rg_tensor *row = rg_tensor_view(in, 2, (int64_t[]){3, 3}, (int64_t[]){8, 24}, 0);
  assert_int_equal(rg_function_call_into(f, &in, &row), RG_ERR_TYPE);
  rg_tensor *out = rg_tensor_new(RG_FLOAT64, 2, s);
  assert_int_equal(rg_function_call_into(f, &in, &out), RG_OK);
  assert_true(((double *)out->data)[1] == 5 && ((double *)in->data)[1] == 2);
  rg_tensor_free(row);
  rg_tensor_free(out);
  /* views of one array that share no element are fine: the columns of a
   * matrix (their byte ranges interleave), the even and odd elements */
  int64_t three = 3;
  rg_variable *v = rg_input(C, "v", rg_type_new(RG_FLOAT64, 1, &three));
  rg_variable *w = rg_add(rg_mul(v, rg_scalar_float(C, 2)), rg_scalar_float(C, 1));
  rg_function *g = rg_compile(C, 1, &v, 1, &w, NULL);
  rg_tensor *c0 = rg_tensor_view(in, 1, &three, (int64_t[]){24}, 0), *c1 = rg_tensor_view(in, 1, &three, (int64_t[]){24}, 8);
  assert_int_equal(rg_function_call_into(g, &c0, &c1), RG_OK);
  double *e = (double *)in->data; /* column 0 is 1 4 7 */
  assert_true(e[1] == 3 && e[4] == 9 && e[7] == 15 && e[0] == 1);
  assert_int_equal(rg_function_call_into(g, &c0, &c0), RG_ERR_TYPE);
  rg_tensor_free(c0);
  rg_tensor_free(c1);
  rg_function_free(g);
  rg_tensor_free(in);
  rg_function_free(f);
}

static void test_call_type_errors(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_function *f = rg_compile(C, 1, &x, 1, &x, NULL);
  assert_non_null(f);
  int64_t four = 4;
  rg_tensor *bad = rg_tensor_new(RG_FLOAT64, 1, &four), *wrong = rg_tensor_new(RG_FLOAT32, 1, &four);
  rg_tensor *out;
  assert_int_not_equal(rg_function_call(f, &bad, &out), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "input x: expected float64 (3), got float64 (4)"));
  assert_int_not_equal(rg_function_call(f, &wrong, &out), RG_OK);
  rg_tensor *none = NULL;
  assert_int_not_equal(rg_function_call(f, &none, &out), RG_OK);
  assert_int_not_equal(rg_function_call(f, NULL, &out), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "no inputs given (the function takes 1)"));
  rg_tensor *good = rg_tensor_new(RG_FLOAT64, 1, (int64_t[]){3});
  assert_int_not_equal(rg_function_call(f, &good, NULL), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "1 outputs asked for and no array"));
  assert_int_not_equal(rg_function_call_subset(f, &good, -1, NULL, &out), RG_OK);
  assert_int_not_equal(rg_function_call_into(f, &good, NULL), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "no tensors given to write the 1 outputs into"));
  assert_int_not_equal(rg_function_call(NULL, &good, &out), RG_OK);
  rg_tensor_free(good);
  rg_tensor_free(bad);
  rg_tensor_free(wrong);
  rg_function_free(f);
}

/* ifelse chains on inputs need no kernel: the stack VM picks branches. */
static void test_ifelse_selects(void **st) {
  rg_variable *c = rg_input(C, "c", rg_type_scalar(RG_BOOL));
  rg_variable *a = rg_input(C, "a", vec(RG_FLOAT64, 2));
  rg_variable *b = rg_input(C, "b", vec(RG_FLOAT64, 2));
  rg_variable *v = a;
  for (int i = 0; i < 10; i++) v = rg_ifelse(c, 1, &v, &b)->outputs[0];
  rg_function *f = rg_compile(C, 3, (rg_variable *[]){c, a, b}, 1, &v, NULL);
  assert_non_null(f);
  rg_tensor *ta = vec_f64(2, (double[]){1, 2}), *tb = vec_f64(2, (double[]){3, 4});
  rg_tensor *yes = rg_tensor_scalar_f64(RG_BOOL, 1), *no = rg_tensor_scalar_f64(RG_BOOL, 0), *out;
  assert_int_equal(rg_function_call(f, (rg_tensor *[]){yes, ta, tb}, &out), RG_OK);
  assert_true(rg_tensor_equal(out, ta));
  rg_tensor_free(out);
  assert_int_equal(rg_function_call(f, (rg_tensor *[]){no, ta, tb}, &out), RG_OK);
  assert_true(rg_tensor_equal(out, tb));
  rg_tensor_free(out);
  rg_tensor_free(ta);
  rg_tensor_free(tb);
  rg_tensor_free(yes);
  rg_tensor_free(no);
  rg_function_free(f);
}

/* The VM a function's dump names. */
static bool dump_has(rg_function *f, const char *what) {
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  rg_function_dump(f, m);
  fclose(m);
  bool has = buf && strstr(buf, what);
  free(buf);
  return has;
}

/* The mode's linker: auto picks by laziness, stack and loop force one,
 * loop refuses an ifelse, anything else is an error. */
static void test_mode_linker(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 2)), *y = rg_exp(x);
  rg_compile_opts o = {.mode = {.query = "none", .linker = "stack"}};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
  assert_non_null(f);
  assert_true(dump_has(f, "stack VM"));
  rg_tensor *tx = vec_f64(2, (double[]){0, 1}), *out;
  assert_int_equal(rg_function_call(f, &tx, &out), RG_OK);
  assert_true(rg_tensor_get_f64(out, 0) == 1.0);
  rg_tensor_free(out);
  rg_function_free(f);
  o.mode.linker = "loop";
  assert_non_null(f = rg_compile(C, 1, &x, 1, &y, &o));
  assert_true(dump_has(f, "loop VM"));
  rg_function_free(f);
  o.mode.linker = "nope";
  assert_null(rg_compile(C, 1, &x, 1, &y, &o));
  assert_string_equal(rg_errmsg(C), "unknown linker 'nope' (auto, loop or stack)");
  rg_variable *c = rg_input(C, "c", rg_type_scalar(RG_BOOL));
  rg_variable *v = rg_ifelse(c, 1, &y, &x)->outputs[0];
  o.mode.linker = "loop";
  assert_null(rg_compile(C, 2, (rg_variable *[]){c, x}, 1, &v, &o));
  assert_non_null(strstr(rg_errmsg(C), "cannot run an ifelse lazily"));
  rg_clear_error(C);
  rg_tensor_free(tx);
}

static void test_shared_identity_update(void **st) {
  rg_tensor *init = vec_f64(2, (double[]){5, 6});
  rg_shared *s = rg_shared_new(init);
  rg_variable *w = rg_shared_var(C, "w", s, NULL);
  rg_variable *x = rg_input(C, "x", w->type);
  rg_update up = {w, x};
  rg_compile_opts o = {.nupdates = 1, .updates = &up};
  rg_function *f = rg_compile(C, 1, &x, 1, &w, &o);
  assert_non_null(f);
  rg_tensor *in = vec_f64(2, (double[]){1, 2}), *out;
  assert_int_equal(rg_function_call(f, &in, &out), RG_OK);
  assert_true(rg_tensor_equal(out, init)); /* the old value */
  rg_tensor_free(out);
  rg_tensor *now = rg_shared_get(s);
  assert_true(rg_tensor_equal(now, in)); /* replaced by the update */
  rg_tensor_free(now);
  rg_tensor_free(in);
  rg_tensor_free(init);
  rg_function_free(f);
  rg_shared_free(s);
}

/* Updates that cannot hold: two of one shared variable, a value whose
 * static shape is not the variable's, a value whose shape is known only at
 * run time (refused then, the container unchanged); a value set from
 * outside that does not fit; a function of updates only. */
static void test_update_checks(void **st) {
  rg_tensor *init = vec_f64(3, (double[]){0, 0, 0});
  rg_shared *s = rg_shared_new(init);
  rg_variable *w = rg_shared_var(C, "w", s, vec(RG_FLOAT64, 3));
  rg_update twice[2] = {{w, rg_add(w, rg_scalar_float(C, 1))}, {w, rg_add(w, rg_scalar_float(C, 10))}};
  assert_null(rg_compile(C, 0, NULL, 1, &w, &(rg_compile_opts){.nupdates = 2, .updates = twice}));
  assert_string_equal(rg_errmsg(C), "updates 0 and 1 both update w");
  rg_clear_error(C);
  rg_variable *seven = rg_constant_data(C, RG_FLOAT64, 1, (int64_t[]){1}, (double[]){7});
  rg_update longer = {w, rg_join(0, 2, (rg_variable *[]){w, seven})};
  assert_null(rg_compile(C, 0, NULL, 1, &w, &(rg_compile_opts){.nupdates = 1, .updates = &longer}));
  assert_string_equal(rg_errmsg(C),
                      "update 0: a value of type float64 (4) cannot replace float64 (3) (dimension 0)");
  rg_clear_error(C);
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, RG_DIM_UNKNOWN));
  rg_update some = {w, x};
  rg_function *f = rg_compile(C, 1, &x, 0, NULL, &(rg_compile_opts){.nupdates = 1, .updates = &some});
  assert_non_null(f);
  rg_tensor *x3 = vec_f64(3, (double[]){1, 2, 3}), *x4 = vec_f64(4, (double[]){1, 2, 3, 4});
  assert_int_equal(rg_function_call(f, &x3, NULL), RG_OK);
  assert_int_equal(rg_function_call(f, &x4, NULL), RG_ERR_TYPE);
  assert_string_equal(rg_function_errmsg(f), "the new value of shared variable w: expected float64 (3), got float64 (4)");
  rg_tensor *now = rg_shared_get(s);
  assert_true(rg_tensor_equal(now, x3));
  rg_tensor_free(now);
  assert_int_equal(rg_shared_set(s, x4), RG_OK); /* the container itself has no static shape */
  assert_int_equal(rg_function_call(f, &x3, NULL), RG_ERR_TYPE);
  assert_string_equal(rg_function_errmsg(f), "shared variable w: expected float64 (3), got float64 (4)");
  rg_function_free(f);
  rg_tensor_free(x3);
  rg_tensor_free(x4);
  rg_tensor_free(init);
  rg_shared_free(s);
}

static void test_function_outlives_graph(void **st) {
  rg_function *f;
  {
    rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
    double kv[3] = {1, 2, 3};
    int64_t shape = 3;
    rg_variable *k = rg_constant_data(C, RG_FLOAT64, 1, &shape, kv);
    f = rg_compile(C, 1, &x, 1, &k, NULL);
  }
  for (int i = 0; i < 3; i++) rg_gc_collect();
  rg_tensor *in = vec_f64(3, (double[]){0, 0, 0}), *out;
  assert_int_equal(rg_function_call(f, &in, &out), RG_OK);
  assert_true(rg_tensor_get_f64(out, 1) == 2);
  rg_tensor_free(out);
  rg_tensor_free(in);
  rg_function_free(f);
}

/* Only the branch the condition selects runs. */
static void test_ifelse_lazy(void **st) {
  rg_variable *c = rg_input(C, "c", rg_type_scalar(RG_BOOL));
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 4));
  rg_variable *then = rg_exp(x), *els = rg_sin(rg_cos(x));
  rg_variable *out = rg_ifelse(c, 1, &then, &els)->outputs[0];
  rg_compile_opts o = {.mode = {.query = "none"}, .profile = true};
  rg_function *f = rg_compile(C, 2, (rg_variable *[]){c, x}, 1, &out, &o);
  assert_non_null(f);
  rg_tensor *tx = vec_f64(4, (double[]){0, 1, 2, 3}), *res;
  rg_tensor *yes = rg_tensor_scalar_f64(RG_BOOL, 1), *no = rg_tensor_scalar_f64(RG_BOOL, 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rg_function_call(f, (rg_tensor *[]){yes, tx}, &res), RG_OK);
    assert_true(rg_tensor_get_f64(res, 1) > 2.71 && rg_tensor_get_f64(res, 1) < 2.72);
    rg_tensor_free(res);
  }
  assert_int_equal(tu_calls_of(f, "exp"), 3);
  assert_int_equal(tu_calls_of(f, "sin"), 0);
  assert_int_equal(tu_calls_of(f, "cos"), 0);
  assert_int_equal(rg_function_call(f, (rg_tensor *[]){no, tx}, &res), RG_OK);
  rg_tensor_free(res);
  assert_int_equal(tu_calls_of(f, "exp"), 3);
  assert_int_equal(tu_calls_of(f, "sin"), 1);
  rg_tensor_free(tx);
  rg_tensor_free(yes);
  rg_tensor_free(no);
  rg_function_free(f);
}

/* The same function many times with different inputs: buffers are reused
 * and outputs handed out are never overwritten by later calls. */
static void test_buffer_reuse(void **st) {
  for (int keep = 0; keep < 2; keep++) {
    rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 5));
    rg_variable *y = rg_add(rg_mul(x, x), rg_exp(rg_neg(x)));
    rg_variable *z = rg_sub(y, x);
    rg_compile_opts o = {.mode = {.query = "none"}, .keep_intermediates = keep};
    rg_function *f = rg_compile(C, 1, &x, 2, (rg_variable *[]){y, z}, &o);
    assert_non_null(f);
    rg_tensor *kept[20][2];
    for (int call = 0; call < 20; call++) {
      double v[5];
      for (int i = 0; i < 5; i++) v[i] = call + 0.25 * i;
      rg_tensor *in = vec_f64(5, v);
      assert_int_equal(rg_function_call(f, &in, kept[call]), RG_OK);
      rg_tensor_free(in);
    }
    for (int call = 0; call < 20; call++) {
      for (int i = 0; i < 5; i++) {
        double a = call + 0.25 * i, want = a * a + exp(-a);
        assert_true(fabs(rg_tensor_get_f64(kept[call][0], i) - want) < 1e-9);
        assert_true(fabs(rg_tensor_get_f64(kept[call][1], i) - (want - a)) < 1e-9);
      }
      rg_tensor_free(kept[call][0]);
      rg_tensor_free(kept[call][1]);
    }
    rg_function_free(f);
  }
}

/* The pool of released buffers: a request takes the buffer that fits
 * best (a slightly larger one stays for the request it suits: with the
 * first fit, a program whose buffers differ by a row allocated one more
 * every call), and a pool fed buffers from elsewhere keeps at most
 * RGB_POOL_MAX of them. */
static void test_pool_best_fit_bounded(void **st) {
  rgb_runtime *rt = rgb_runtime_new(1, true);
  rg_tensor *cell = NULL;
  rg_tensor **cells[1] = {&cell};
  rgb_node node = {.label = "test"};
  rgb_exec x = {.node = &node, .outp = cells, .rt = rt};
  int64_t big = 101, small = 100;
  void *data_big, *data_small;
  cell = rg_tensor_empty(RG_FLOAT32, 1, &small), data_small = cell->data;
  rgb_release(rt, &cell);
  cell = rg_tensor_empty(RG_FLOAT32, 1, &big), data_big = cell->data;
  rgb_release(rt, &cell);
  assert_int_equal(rt->pool.n, 2);
  /* the small request gets the small buffer, whatever the order */
  for (int order = 0; order < 2; order++) {
    int64_t first = order ? big : small, second = order ? small : big;
    rg_tensor *a = rgb_output(&x, 0, RG_FLOAT32, 1, &first);
    assert_ptr_equal(a->data, first == big ? data_big : data_small);
    cell = NULL;
    rg_tensor *b = rgb_output(&x, 0, RG_FLOAT32, 1, &second);
    assert_ptr_equal(b->data, second == big ? data_big : data_small);
    assert_int_equal(rt->pool.n, 0);
    rgb_release(rt, &cell);
    cell = a;
    rgb_release(rt, &cell);
  }
  /* buffers released without being asked for: the pool stays bounded */
  for (int i = 0; i < 3 * RGB_POOL_MAX; i++) {
    int64_t n = 8 + i;
    cell = rg_tensor_empty(RG_FLOAT64, 1, &n);
    rgb_release(rt, &cell);
    assert_true(rt->pool.n <= RGB_POOL_MAX);
  }
  assert_int_equal(rt->pool.n, RGB_POOL_MAX);
  /* the oldest went first: the newest sizes are still there */
  int64_t want = 8 + 3 * RGB_POOL_MAX - 1;
  rg_tensor *t = rgb_output(&x, 0, RG_FLOAT64, 1, &want);
  assert_int_equal(rg_storage_nbytes(t), (size_t)want * 8);
  rgb_runtime_free(rt);
  rg_tensor_free(cell);
}

/* The standard rewrites run by default and keep the results. */
static void test_fast_run_default(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *one = rg_scalar_float(C, 1.0), *zero = rg_scalar_float(C, 0.0);
  rg_variable *y = rg_add(rg_mul(rg_neg(rg_neg(x)), one), zero);
  rg_variable *z = rg_log(rg_add(one, rg_mul(x, x)));
  rg_function *f = rg_compile(C, 1, &x, 2, (rg_variable *[]){y, z}, NULL);
  assert_non_null(f);
  rg_tensor *in = vec_f64(3, (double[]){0.5, -1, 2}), *out[2];
  assert_int_equal(rg_function_call(f, &in, out), RG_OK);
  for (int i = 0; i < 3; i++) {
    double a = rg_tensor_get_f64(in, i);
    assert_true(fabs(rg_tensor_get_f64(out[0], i) - a) < 1e-12);
    assert_true(fabs(rg_tensor_get_f64(out[1], i) - log1p(a * a)) < 1e-12);
  }
  rg_tensor_free(out[0]);
  rg_tensor_free(out[1]);
  rg_tensor_free(in);
  rg_function_free(f);
}

/* Only the requested outputs are computed. */
static void test_subset(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 2));
  rg_variable *a = rg_exp(x), *b = rg_sin(x);
  rg_compile_opts o = {.mode = {.query = "none"}, .profile = true};
  rg_function *f = rg_compile(C, 1, &x, 2, (rg_variable *[]){a, b}, &o);
  rg_tensor *in = vec_f64(2, (double[]){0, 1}), *out;
  assert_int_equal(rg_function_call_subset(f, &in, 1, (int[]){1}, &out), RG_OK);
  assert_true(fabs(rg_tensor_get_f64(out, 1) - sin(1.0)) < 1e-12);
  assert_int_equal(tu_calls_of(f, "exp"), 0);
  assert_int_equal(tu_calls_of(f, "sin"), 1);
  rg_tensor_free(out);
  assert_int_not_equal(rg_function_call_subset(f, &in, 1, (int[]){5}, &out), RG_OK);
  rg_tensor_free(in);
  rg_function_free(f);
}

/* Composite and op_from_graph nodes compile: the linker links their inner
 * graphs (a composite nested in the op_from_graph's graph too), and
 * constant folding evaluates a composite of constants. */
static void test_inner_graphs(void **st) {
  rg_variable *a = rg_input(C, "a", rg_type_new(RG_FLOAT64, 0, NULL));
  rg_variable *b = rg_input(C, "b", rg_type_new(RG_FLOAT64, 0, NULL));
  rg_variable *s = rg_add(rg_mul(a, b), rg_scalar_float(C, 1.0));
  const rg_op *comp = rg_op_composite(C, rg_fgraph_new(C, 2, (rg_variable *[]){a, b}, 1, &s, 0));
  assert_non_null(comp);
  rg_variable *u = rg_input(C, "u", vec(RG_FLOAT64, 3)), *v = rg_input(C, "v", vec(RG_FLOAT64, 3));
  rg_variable *cu = rg_apply(C, comp, 2, (rg_variable *[]){u, v});
  rg_variable *w = rg_exp(cu);
  const rg_op *ofg = rg_op_from_graph(C, rg_fgraph_new(C, 2, (rg_variable *[]){u, v}, 1, &w, 0));
  assert_non_null(ofg);
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3)), *y = rg_input(C, "y", vec(RG_FLOAT64, 3));
  rg_variable *o1 = rg_apply(C, comp, 2, (rg_variable *[]){x, y});
  rg_variable *o2 = rg_apply(C, ofg, 2, (rg_variable *[]){x, y});
  double kv[3] = {1, 2, 3};
  int64_t three = 3;
  rg_variable *k = rg_constant_data(C, RG_FLOAT64, 1, &three, kv);
  rg_variable *o3 = rg_add(x, rg_apply(C, comp, 2, (rg_variable *[]){k, k}));
  assert_non_null(o1);
  assert_non_null(o2);
  assert_non_null(o3);
  for (int mode = 0; mode < 2; mode++) {
    rg_compile_opts o = {.mode = {.query = mode ? "none" : NULL}};
    rg_function *f = rg_compile(C, 2, (rg_variable *[]){x, y}, 3, (rg_variable *[]){o1, o2, o3}, &o);
    if (!f) fail_msg("compile: %s", rg_errmsg(C));
    rg_tensor *in[2] = {vec_f64(3, (double[]){1, 2, 3}), vec_f64(3, (double[]){-1, 0.5, 2})}, *out[3];
    for (int rep = 0; rep < 3; rep++) {
      assert_int_equal(rg_function_call(f, in, out), RG_OK);
      for (int i = 0; i < 3; i++) {
        double p = rg_tensor_get_f64(in[0], i), q = rg_tensor_get_f64(in[1], i);
        assert_true(fabs(rg_tensor_get_f64(out[0], i) - (p * q + 1)) < 1e-12);
        assert_true(fabs(rg_tensor_get_f64(out[1], i) - exp(p * q + 1)) < 1e-9);
        assert_true(fabs(rg_tensor_get_f64(out[2], i) - (p + kv[i] * kv[i] + 1)) < 1e-12);
      }
      for (int j = 0; j < 3; j++) rg_tensor_free(out[j]);
    }
    rg_tensor_free(in[0]);
    rg_tensor_free(in[1]);
    rg_function_free(f);
  }
}

/* Compile, call and free many times: the sanitizer build checks that
 * nothing manual leaks. */
static void test_many_functions(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 8));
  rg_variable *y = rg_tanh(rg_add(x, rg_scalar_float(C, 1.0)));
  rg_tensor *in = vec_f64(8, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
  int n = getenv("RG_SANITIZE_RUN") ? 10000 : 2000;
  for (int i = 0; i < n; i++) {
    rg_compile_opts o = {.mode = {.query = i % 2 ? "none" : NULL}};
    rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
    assert_non_null(f);
    rg_tensor *out;
    assert_int_equal(rg_function_call(f, &in, &out), RG_OK);
    rg_tensor_free(out);
    rg_function_free(f);
  }
  rg_tensor_free(in);
}


/* ------------------------------------------------------------------ the memory plan */

/* The place in the arena of the value the first thunk labelled `label`
 * computes (NULL: not planned). */
static const char *place_of(rg_function *f, const char *label) {
  const rgb_program *p = rgb_function_program(f);
  for (int32_t k = 0; k < p->nthunks; k++)
    if (!strcmp(p->thunks[k].node.label, label)) return p->thunks[k].x.plan ? p->thunks[k].x.plan[0].at : NULL;
  fail_msg("no thunk %s", label);
  return NULL;
}

static rg_tensor *ramp(int64_t n, int64_t m, double from) {
  int64_t shape[2] = {n, m};
  rg_tensor *t = rg_tensor_empty(RG_FLOAT64, m ? 2 : 1, shape);
  for (int64_t i = 0; i < rg_tensor_numel(t); i++) ((double *)t->data)[i] = from + 0.001 * (double)i;
  return t;
}

/* Calls the planned function and the same graph with every intermediate
 * kept (no plan) on three inputs: the same bits every time. */
static void same_as_unplanned(rg_function *f, int nin, rg_variable **in, int nout, rg_variable **out,
                              int64_t n, int64_t m) {
  rg_compile_opts keep = {.mode = {.query = "none"}, .keep_intermediates = true};
  rg_function *g = rg_compile(C, nin, in, nout, out, &keep);
  assert_non_null(g);
  assert_int_equal(rgb_function_program(g)->nplanned, 0);
  for (int call = 0; call < 3; call++) {
    rg_tensor *x = ramp(n, m, 0.1 + call), *a[4], *b[4];
    assert_int_equal(rg_function_call(f, &x, a), RG_OK);
    assert_int_equal(rg_function_call(g, &x, b), RG_OK);
    for (int j = 0; j < nout; j++) {
      assert_true(rg_tensor_equal(a[j], b[j]));
      rg_tensor_free(a[j]);
      rg_tensor_free(b[j]);
    }
    rg_tensor_free(x);
  }
  rg_function_free(g);
}

/* A chain of ops: each value is dead two ops later, so two places serve
 * six values, and the results are those of the unplanned program. */
static void test_plan_chain(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 1000));
  rg_variable *h = rg_tanh(rg_exp(rg_cos(rg_sin(rg_cos(rg_sin(x))))));
  rg_variable *y = rg_sum(h, -1, NULL);
  rg_compile_opts o = {.mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
  assert_non_null(f);
  const rgb_program *p = rgb_function_program(f);
  assert_int_equal(p->nplanned, 6);
  assert_int_equal(p->planned_bytes, 6 * 8000);
  assert_int_equal(p->arena_bytes, 2 * 8000);
  assert_ptr_equal(place_of(f, "sin"), place_of(f, "exp"));
  assert_ptr_not_equal(place_of(f, "sin"), place_of(f, "cos"));
  /* planned values are not released: they stay in the arena */
  for (int32_t k = 0; k < p->nthunks; k++) assert_int_equal(p->thunks[k].nrelease, 0);
  same_as_unplanned(f, 1, &x, 1, &y, 1000, 0);
  rg_function_free(f);
}

/* A view lives as long as the value it views: exp(x) is read only by its
 * transpose, but the transpose is read last, so nothing computed in
 * between may take exp's place. */
static void test_plan_views(void **st) {
  int64_t shape[2] = {16, 16}, perm[2] = {1, 0};
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 2, shape));
  rg_variable *v = rg_dimshuffle(rg_exp(x), 2, perm);
  rg_variable *b = rg_sin(rg_cos(rg_tanh(x)));
  rg_variable *y = rg_add(v, b);
  rg_compile_opts o = {.mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
  assert_non_null(f);
  const char *e = place_of(f, "exp");
  assert_non_null(e);
  assert_ptr_not_equal(place_of(f, "tanh"), e);
  assert_ptr_not_equal(place_of(f, "cos"), e);
  assert_ptr_not_equal(place_of(f, "sin"), e);
  assert_null(place_of(f, "dimshuffle")); /* a view has no place of its own */
  same_as_unplanned(f, 1, &x, 1, &y, 16, 16);
  rg_function_free(f);
}

/* A value an output views escapes the call: it is not planned, and an
 * output kept from one call is not overwritten by the next. */
static void test_plan_escaping_view(void **st) {
  int64_t shape[2] = {8, 8}, perm[2] = {1, 0};
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 2, shape));
  rg_variable *y = rg_dimshuffle(rg_exp(rg_sin(x)), 2, perm);
  rg_compile_opts o = {.mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &o);
  assert_non_null(f);
  assert_null(place_of(f, "exp"));
  assert_non_null(place_of(f, "sin"));
  rg_tensor *x1 = ramp(8, 8, 0.5), *x2 = ramp(8, 8, 2), *y1, *y2;
  assert_int_equal(rg_function_call(f, &x1, &y1), RG_OK);
  rg_tensor *copy = rg_tensor_copy(y1);
  assert_int_equal(rg_function_call(f, &x2, &y2), RG_OK);
  assert_true(rg_tensor_equal(y1, copy));
  assert_false(rg_tensor_equal(y1, y2));
  rg_tensor_free(x1), rg_tensor_free(x2), rg_tensor_free(y1), rg_tensor_free(y2), rg_tensor_free(copy);
  rg_function_free(f);
}

/* Inputs are borrowed for the call only: an output that is a view of an
 * input (x[::-1], x.T, a reshape) is the caller's, and the function keeps
 * no reference to the input's storage after the call (its output cell kept
 * the view until the next call or the function's end), through every way
 * of calling. */
static void count_release(void *base, void *ud) {
  (void)base;
  ++*(int *)ud;
}

static void test_no_input_kept_after_call(void **st) {
  int64_t n = 4, perm[2] = {1, 0}, two[2] = {2, 2};
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  rg_index rev = {RG_IDX_SLICE, RG_IDX_NONE, RG_IDX_NONE, -1};
  rg_variable *m = rg_reshape_to(x, 2, two);
  rg_variable *outs[3] = {rg_subtensor(x, 1, &rev, 0, NULL), rg_dimshuffle(m, 2, perm), m};
  rg_compile_opts o = {.mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 3, outs, &o);
  assert_non_null(f);
  double mem[4] = {1, 2, 3, 4};
  for (int way = 0; way < 3; way++) {
    int released = 0;
    rg_tensor *X = rg_tensor_wrap(RG_FLOAT64, 1, &n, NULL, mem, sizeof mem, count_release, &released);
    rg_tensor *y[3] = {NULL, NULL, NULL};
    int one = 0;
    if (way == 0) assert_int_equal(rg_function_call(f, &X, y), RG_OK);
    if (way == 1) assert_int_equal(rg_function_call_subset(f, &X, 1, &one, y), RG_OK);
    if (way == 2) {
      for (int j = 0; j < 3; j++) y[j] = rg_tensor_new(RG_FLOAT64, j ? 2 : 1, j ? two : &n);
      assert_int_equal(rg_function_call_into(f, &X, y), RG_OK);
    }
    assert_true(rg_tensor_get_f64(y[0], 0) == 4);
    for (int j = 0; j < 3; j++) rg_tensor_free(y[j]);
    assert_int_equal(rg_storage_refcount(X), 1);
    rg_tensor_free(X);
    assert_int_equal(released, 1);
  }
  rg_function_free(f);
}

/* Partial calls run the thunks they need in the planned order: the values
 * are right whichever outputs are asked for, in any sequence of calls. */
static void test_plan_subset(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 500));
  rg_variable *a = rg_exp(rg_sin(x)), *b = rg_cos(rg_tanh(x));
  rg_variable *outs[2] = {rg_sum(rg_mul(a, b), -1, NULL), rg_sum(rg_sqrt(rg_exp(b)), -1, NULL)};
  rg_compile_opts o = {.mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 2, outs, &o);
  assert_non_null(f);
  assert_true(rgb_function_program(f)->nplanned > 0);
  rg_tensor *in = ramp(500, 0, -0.3), *all[2], *one;
  assert_int_equal(rg_function_call(f, &in, all), RG_OK);
  for (int rep = 0; rep < 2; rep++)
    for (int j = 1; j >= 0; j--) {
      assert_int_equal(rg_function_call_subset(f, &in, 1, &j, &one), RG_OK);
      assert_true(rg_tensor_equal(one, all[j]));
      rg_tensor_free(one);
    }
  same_as_unplanned(f, 1, &x, 2, outs, 500, 0);
  rg_tensor_free(all[0]), rg_tensor_free(all[1]), rg_tensor_free(in);
  rg_function_free(f);
}

/* No plan where intermediates are kept or the program runs by demand
 * (ifelse); the dump reports a plan. */
static void test_plan_off(void **st) {
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 100));
  rg_variable *y = rg_sum(rg_exp(rg_sin(x)), -1, NULL);
  rg_compile_opts keep = {.mode = {.query = "none"}, .keep_intermediates = true};
  rg_function *f = rg_compile(C, 1, &x, 1, &y, &keep);
  assert_int_equal(rgb_function_program(f)->nplanned, 0);
  rg_function_free(f);
  rg_compile_opts o = {.mode = {.query = "none"}};
  f = rg_compile(C, 1, &x, 1, &y, &o);
  assert_non_null(strstr(tu_function_dump(f), "memory plan: 2 values of 1664 bytes share an arena of 1664 bytes"));
  rg_function_free(f);
  rg_variable *c = rg_input(C, "c", rg_type_scalar(RG_BOOL));
  rg_node *n = rg_ifelse(c, 1, (rg_variable *[]){rg_exp(rg_sin(x))}, (rg_variable *[]){rg_cos(rg_sin(x))});
  rg_variable *z = rg_sum(rg_exp(n->outputs[0]), -1, NULL);
  f = rg_compile(C, 2, (rg_variable *[]){x, c}, 1, &z, &o);
  assert_non_null(f);
  assert_true(rgb_function_program(f)->lazy);
  assert_int_equal(rgb_function_program(f)->nplanned, 0);
  rg_function_free(f);
}

/* ------------------------------------------------------------------ thread counts */

/* The same function on 1 to 4 threads: elementwise work (fused, and
 * inside a Scan's steps) gives the same bits; sums and products only
 * change their summation order (docs/c-api.md), so they agree closely. */
static void test_thread_counts(void **st) {
  static const char text[] =
      "(graph (input x float64 (512 300)) (input w float64 (300)) (input h0 float64 (300))"
      " (output (tanh (add (mul x w) 1.0)))"
      " (output ((sum 0) (exp (mul x 0.01))))"
      " (output (dot x w))"
      " (output (scan (lambda (x_t h) (tanh (add (mul h 0.5) x_t))) (sequences x) (outputs-info h0))))";
  rg_fgraph *fg = rg_graph_read(C, "<threads>", text, strlen(text));
  assert_non_null(fg);
  rg_variable *in[3], *out[4];
  for (int i = 0; i < 3; i++) in[i] = rg_fgraph_input(fg, i);
  for (int j = 0; j < 4; j++) out[j] = rg_fgraph_output(fg, j);
  rg_tensor *v[3] = {ramp(512, 300, -0.5), ramp(300, 0, 0.1), ramp(300, 0, 0)};
  rg_tensor *first[4];
  for (int t = 1; t <= 4; t++) {
    rg_compile_opts o = {.nthreads = t};
    rg_function *f = rg_compile(C, 3, in, 4, out, &o);
    assert_non_null(f);
    rg_tensor *got[4];
    assert_int_equal(rg_function_call(f, v, got), RG_OK);
    for (int j = 0; j < 4; j++) {
      if (t == 1) {
        first[j] = got[j];
        continue;
      }
      if (j == 0 || j == 3) assert_true(rg_tensor_equal(got[j], first[j]));
      for (int64_t i = 0; i < rg_tensor_numel(got[j]); i++) {
        double a = rg_tensor_get_f64(got[j], i), b = rg_tensor_get_f64(first[j], i);
        assert_true(fabs(a - b) <= 1e-12 * (1 + fabs(b)));
      }
      rg_tensor_free(got[j]);
    }
    rg_function_free(f);
  }
  for (int j = 0; j < 4; j++) rg_tensor_free(first[j]);
  for (int i = 0; i < 3; i++) rg_tensor_free(v[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_and_constants), cmocka_unit_test(test_errors),
      cmocka_unit_test(test_errors_sticky_null), cmocka_unit_test(test_call_into_overlapping_input),
      cmocka_unit_test(test_call_type_errors),       cmocka_unit_test(test_ifelse_selects),
      cmocka_unit_test(test_outputs_are_the_callers),
      cmocka_unit_test(test_outputs_not_each_others),
      cmocka_unit_test(test_call_into_updates),
      cmocka_unit_test(test_call_into_scan_trace), cmocka_unit_test(test_update_checks), cmocka_unit_test(test_mode_linker),
      cmocka_unit_test(test_shared_identity_update), cmocka_unit_test(test_function_outlives_graph),
      cmocka_unit_test(test_ifelse_lazy),            cmocka_unit_test(test_buffer_reuse),
      cmocka_unit_test(test_pool_best_fit_bounded),
      cmocka_unit_test(test_fast_run_default),       cmocka_unit_test(test_subset),
      cmocka_unit_test(test_many_functions),         cmocka_unit_test(test_inner_graphs),
      cmocka_unit_test(test_plan_chain),             cmocka_unit_test(test_plan_views),
      cmocka_unit_test(test_plan_escaping_view),
      cmocka_unit_test(test_no_input_kept_after_call),     cmocka_unit_test(test_plan_subset),
      cmocka_unit_test(test_plan_off),               cmocka_unit_test(test_thread_counts),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
