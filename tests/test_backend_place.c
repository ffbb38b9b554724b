/*
 * test_backend_place.c — backend objects, placement and transfers, on the
 * mirror backend (the CPU's kernels behind buffers the CPU kernels cannot
 * read): which node runs where, one transfer per value and device,
 * constants uploaded once, inputs and outputs on either side, laziness
 * across devices, inner graphs, Scan, and every error.
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend-impl.h"
#include "relgraph/backend.h"

static rg_ctx *C;

static int setup(void **st) {
  (void)st;
  rg_init();
  C = rg_ctx_new();
  return 0;
}

static const rg_type *vec(rg_dtype dt, int64_t n) { return rg_type_new(dt, 1, &n); }

static rg_tensor *vec_f64(int n, const double *v) {
  int64_t shape = n;
  return rg_tensor_from_data(RG_FLOAT64, 1, &shape, v);
}


static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static rg_function *compile(int nin, rg_variable **in, int nout, rg_variable **out,
                            const char *backend, const char *query, bool device_outputs) {
  rg_compile_opts o = {.mode = {.backend = backend, .query = query}, .device_outputs = device_outputs};
  rg_function *f = rg_compile(C, nin, in, nout, out, &o);
  if (!f) fail_msg("compile: %s", rg_errmsg(C));
  return f;
}

/* a and b equal, within tol relative to 1 + |a| (0: bit for bit). */
static bool close(const rg_tensor *a, const rg_tensor *b, double tol) {
  if (!tol || rg_tensor_numel(a) != rg_tensor_numel(b) || a->dtype != b->dtype) return rg_tensor_equal(a, b);
  for (int64_t i = 0; i < rg_tensor_numel(a); i++) {
    double x = rg_tensor_get_f64(a, i), y = rg_tensor_get_f64(b, i);
    if (!(fabs(x - y) <= tol * (1 + fabs(x)))) return false;
  }
  return true;
}

/* Runs the same graph on the CPU and on the mirror and compares: bit for
 * bit, or within tol where BLAS sees other layouts (the mirror's kernels
 * read contiguous copies, the CPU's the views themselves). */
static void results_on(const char *backend, int nin, rg_variable **in, int nout, rg_variable **out,
                       rg_tensor **vals, const char *query, double tol) {
  rg_function *cpu = compile(nin, in, nout, out, NULL, query, false);
  rg_function *mir = compile(nin, in, nout, out, backend, query, false);
  rg_tensor *a[8], *b[8];
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(rg_function_call(cpu, vals, a), RG_OK);
    if (rg_function_call(mir, vals, b)) fail_msg("%s: %s", backend, rg_function_errmsg(mir));
    for (int j = 0; j < nout; j++) {
      assert_int_equal(rg_tensor_device(b[j]), RG_DEVICE_HOST);
      if (!close(a[j], b[j], tol)) fail_msg("call %d: output %d differs on %s\n%s", rep, j, backend, tu_function_dump(mir));
      rg_tensor_free(a[j]);
      rg_tensor_free(b[j]);
    }
  }
  rg_function_free(cpu);
  rg_function_free(mir);
}

static void close_results(int nin, rg_variable **in, int nout, rg_variable **out, rg_tensor **vals,
                          const char *query, double tol) {
  results_on("mirror", nin, in, nout, out, vals, query, tol);
}

static void same_results(int nin, rg_variable **in, int nout, rg_variable **out, rg_tensor **vals,
                         const char *query) {
  close_results(nin, in, nout, out, vals, query, 0);
}

/* ------------------------------------------------------------------ tensors */

static void test_tensor_transfers(void **st) {
  (void)st;
  rg_backend *m = rg_backend_new("mirror", NULL, 0);
  assert_non_null(m);
  const rg_buffer_type *bt = rg_backend_buffer_type(m);
  assert_int_equal(rg_backend_device(m), RG_DEVICE_MIRROR);
  assert_string_equal(rg_backend_label(m), "mirror");
  double v[6] = {1, 2, 3, 4, 5, 6};
  rg_tensor *h = rg_tensor_from_data(RG_FLOAT64, 2, (int64_t[]){2, 3}, v);
  rg_tensor *d = rg_tensor_to_device(h, bt);
  assert_int_equal(rg_tensor_device(d), RG_DEVICE_MIRROR);
  assert_ptr_equal(rg_tensor_buffer_type(d), bt);
  /* the bytes on the device are not the host's */
  assert_true(memcmp(d->data, h->data, 6 * sizeof(double)) != 0);
  rg_tensor *back = rg_tensor_to_host(d);
  assert_true(rg_tensor_equal(back, h));
  /* a reversed, transposed view of a device value comes back right */
  rg_tensor *t = rg_tensor_permute(d, (int[]){1, 0});
  rg_tensor *r = rg_tensor_view(t, 2, t->shape, (int64_t[]){t->strides[0], -t->strides[1]},
                                t->strides[1] * (t->shape[1] - 1));
  assert_non_null(r);
  rg_tensor *rh = rg_tensor_to_host(r);
  double want[6] = {4, 1, 5, 2, 6, 3};
  for (int i = 0; i < 6; i++) assert_true(rg_tensor_get_f64(rh, i) == want[i]);
  /* copies and casts of device values stay on the device */
  rg_tensor *c = rg_tensor_cast(r, RG_INT32);
  assert_int_equal(rg_tensor_device(c), RG_DEVICE_MIRROR);
  rg_tensor *ch = rg_tensor_to_host(c);
  assert_int_equal(ch->dtype, RG_INT32);
  for (int i = 0; i < 6; i++) assert_true(rg_tensor_get_i64(ch, i) == (int64_t)want[i]);
  /* empty tensors */
  rg_tensor *e = rg_tensor_empty_on(bt, RG_FLOAT32, 2, (int64_t[]){0, 4});
  rg_tensor *eh = rg_tensor_to_host(e);
  assert_int_equal(rg_tensor_numel(eh), 0);
  /* the host's helpers read (and write) device values through the device */
  assert_true(rg_tensor_get_f64(r, 0) == 4 && rg_tensor_get_i64(c, 5) == 3);
  assert_true(rg_tensor_equal(r, rh) && rg_tensor_allclose(rh, r, 0, 0));
  assert_string_equal(tu_tensor_text(r), "float64 (3 2) [[4.0 1.0] [5.0 2.0] [6.0 3.0]]");
  void *npy, *npy_h;
  size_t n1, n2;
  assert_int_equal(rg_npy_write(C, r, false, &npy, &n1), RG_OK);
  assert_int_equal(rg_npy_write(C, rh, false, &npy_h, &n2), RG_OK);
  assert_true(n1 == n2 && !memcmp(npy, npy_h, n1));
  free(npy), free(npy_h);
  rg_variable *k = rg_constant(C, r);
  rg_tensor *kv = rg_constant_to_tensor(k);
  assert_true(rg_tensor_equal(kv, rh));
  rg_tensor_set_f64(c, 1, 42);
  assert_true(rg_tensor_get_f64(c, 1) == 42 && rg_tensor_get_f64(c, 0) == 4);
  rg_tensor *all[] = {h, d, back, t, r, rh, c, ch, e, eh, kv};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) rg_tensor_free(all[i]);
  rg_backend_free(m);
}

/* ------------------------------------------------------------------ placement */

static void test_placement_and_transfers(void **st) {
  (void)st;
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *y = rg_input(C, "y", vec(RG_FLOAT64, 3));
  rg_variable *s = rg_add(rg_mul(x, y), rg_constant_scalar(C, RG_FLOAT64, 1.5));
  rg_variable *t = rg_sum(s, -1, NULL);
  rg_variable *j = rg_max(s, -1, NULL);
  rg_variable *k = rg_prod(s, -1, NULL);
  rg_variable *outs[4] = {rg_exp(s), t, j, k};
  rg_function *f = compile(2, (rg_variable *[]){x, y}, 4, outs, "mirror", "none", false);
  const char *d = tu_function_dump(f);
  /* mul, add, exp and sum on the mirror; max and prod on the CPU */
  assert_non_null(strstr(d, "backends: mirror cpu;"));
  assert_int_equal(count(d, " mirror   ("), 4 + 2);  /* four nodes, two input uploads */
  assert_int_equal(count(d, "max            cpu") + count(d, "prod           cpu"), 2);
  /* x and y go up once each, s comes down once for both reductions, exp and
   * sum come down as outputs: 5 transfers */
  assert_non_null(strstr(d, "; 5 transfers"));
  assert_int_equal(count(d, " transfer "), 5);
  rg_tensor *vals[2] = {vec_f64(3, (double[]){1, 2, 3}), vec_f64(3, (double[]){4, 5, 6})};
  rg_tensor *res[4];
  for (int rep = 0; rep < 3; rep++) {
    assert_int_equal(rg_function_call(f, vals, res), RG_OK);
    assert_true(rg_tensor_get_f64(res[1], 0) == 5.5 + 11.5 + 19.5);
    assert_true(rg_tensor_get_f64(res[2], 0) == 19.5);
    assert_true(rg_tensor_get_f64(res[3], 0) == 5.5 * 11.5 * 19.5);
    for (int i = 0; i < 4; i++) rg_tensor_free(res[i]);
  }
  rg_function_free(f);
  same_results(2, (rg_variable *[]){x, y}, 4, outs, vals, "fast_run");
  rg_tensor_free(vals[0]);
  rg_tensor_free(vals[1]);
}

static void test_constants_uploaded_once(void **st) {
  (void)st;
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  int64_t three = 3;
  rg_variable *k = rg_constant_data(C, RG_FLOAT64, 1, &three, (double[]){10, 20, 30});
  rg_variable *out = rg_mul(rg_add(x, k), k);
  rg_function *f = compile(1, &x, 1, &out, "mirror", "none", false);
  const char *d = tu_function_dump(f);
  /* x up, the result down; the constant is on the mirror from the start */
  assert_non_null(strstr(d, "; 2 transfers"));
  const rgb_program *p = rgb_function_program(f);
  int on_mirror = 0;
  for (int i = 0; i < p->nconst; i++) on_mirror += p->cell_dev[p->const_cells[i]] == RG_DEVICE_MIRROR;
  assert_int_equal(on_mirror, 1);
  rg_tensor *in = vec_f64(3, (double[]){1, 2, 3}), *res;
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(rg_function_call(f, &in, &res), RG_OK);
    assert_true(rg_tensor_get_f64(res, 2) == 33 * 30);
    rg_tensor_free(res);
  }
  rg_tensor_free(in);
  rg_function_free(f);
}

/* alloc runs on the mirror with its shape arguments read on the host: the
 * scalars from shape_i are never moved to the device (the backend's
 * host_input slot), while the value broadcast is; shape and shape_i read
 * values on the device without moving them. */
static void test_shape_arguments_on_the_host(void **st) {
  (void)st;
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *n = rg_shape_i(x, 0);
  rg_variable *a = rg_allocate(rg_sqr(x), 2, (rg_variable *[]){n, n});
  rg_variable *e = rg_allocate_empty(C, RG_FLOAT64, 1, &n);
  rg_variable *out[2] = {rg_add(a, x), rg_shape(e)};
  rg_function *f = compile(1, &x, 2, out, "mirror", "none", false);
  const char *d = tu_function_dump(f);
  assert_non_null(strstr(d, "alloc          mirror"));
  assert_non_null(strstr(d, "alloc_empty    mirror"));
  /* x up once, the sum down: no shape scalar moves, and shape (a CPU op)
   * reads e's shape where e lives, on the mirror */
  assert_non_null(strstr(d, "; 2 transfers"));
  assert_non_null(strstr(d, "shape          cpu"));
  rg_tensor *in = vec_f64(3, (double[]){1, 2, 3}), *res[2];
  assert_int_equal(rg_function_call(f, &in, res), RG_OK);
  assert_int_equal(res[0]->ndim, 2);
  assert_true(rg_tensor_get_f64(res[0], 0) == 2 && rg_tensor_get_f64(res[0], 8) == 12);
  assert_true(rg_tensor_get_i64(res[1], 0) == 3);
  for (int j = 0; j < 2; j++) rg_tensor_free(res[j]);
  rg_tensor_free(in);
  rg_function_free(f);
}

/* Inputs may come on either device; outputs stay on the device on request. */
static void test_inputs_and_outputs_on_devices(void **st) {
  (void)st;
  rg_backend *m = rg_backend_new("mirror", NULL, 0);
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *out[2] = {rg_sqr(x), rg_prod(x, -1, NULL)};
  rg_compile_opts o = {.backend = m, .device_outputs = true, .mode = {.query = "none"}};
  rg_function *f = rg_compile(C, 1, &x, 2, out, &o);
  assert_non_null(f);
  rg_tensor *h = vec_f64(3, (double[]){1, 2, 3});
  rg_tensor *dv = rg_tensor_to_device(h, rg_backend_buffer_type(m));
  rg_tensor *res[2];
  for (int side = 0; side < 2; side++) {
    rg_tensor *in = side ? dv : h;
    assert_int_equal(rg_function_call(f, &in, res), RG_OK);
    assert_int_equal(rg_tensor_device(res[0]), RG_DEVICE_MIRROR); /* sqr ran on the mirror */
    assert_int_equal(rg_tensor_device(res[1]), RG_DEVICE_HOST);   /* prod on the CPU */
    rg_tensor *sq = rg_tensor_to_host(res[0]);
    assert_true(rg_tensor_get_f64(sq, 2) == 9);
    assert_true(rg_tensor_get_f64(res[1], 0) == 6);
    rg_tensor_free(sq);
    rg_tensor_free(res[0]);
    rg_tensor_free(res[1]);
  }
  rg_function_free(f);
  /* an input whose type names the mirror device: a CPU program uploads it */
  rg_variable *z = rg_input(C, "z", rg_type_on_device(vec(RG_FLOAT64, 3), RG_DEVICE_MIRROR));
  rg_variable *zz = rg_exp(z);
  rg_function *g = rg_compile(C, 1, &z, 1, &zz, NULL);
  assert_non_null(g);
  const char *d = tu_function_dump(g);
  assert_non_null(strstr(d, "backends: cpu mirror;"));
  assert_non_null(strstr(d, "exp            mirror"));
  for (int side = 0; side < 2; side++) {
    rg_tensor *in = side ? dv : h;
    assert_int_equal(rg_function_call(g, &in, res), RG_OK);
    assert_int_equal(rg_tensor_device(res[0]), RG_DEVICE_HOST);
    assert_true(fabs(rg_tensor_get_f64(res[0], 0) - exp(1.0)) < 1e-15);
    rg_tensor_free(res[0]);
  }
  rg_function_free(g);
  rg_tensor_free(h);
  rg_tensor_free(dv);
  rg_backend_free(m);
}

/* ifelse runs on the CPU, its branches stay on the mirror, and only the
 * branch taken is computed. */
static void test_lazy_across_devices(void **st) {
  (void)st;
  rg_variable *c = rg_input(C, "c", rg_type_scalar(RG_BOOL));
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *a = rg_exp(x), *b = rg_log(x);
  rg_variable *sel = rg_ifelse(c, 1, &a, &b)->outputs[0];
  rg_variable *out = rg_mul(sel, x);
  rg_compile_opts o = {.mode = {.backend = "mirror", .query = "none"}, .profile = true};
  rg_function *f = rg_compile(C, 2, (rg_variable *[]){c, x}, 1, &out, &o);
  assert_non_null(f);
  const char *d = tu_function_dump(f);
  assert_non_null(strstr(d, "ifelse         cpu"));
  /* x goes up, the result comes down; the branches stay on the mirror */
  assert_non_null(strstr(d, "; 2 transfers"));
  rg_tensor *x0 = vec_f64(3, (double[]){1, 2, 3}), *res;
  for (int taken = 0; taken < 2; taken++) {
    rg_tensor *cv = rg_tensor_scalar_f64(RG_BOOL, taken);
    assert_int_equal(rg_function_call(f, (rg_tensor *[]){cv, x0}, &res), RG_OK);
    double want = taken ? exp(3.0) * 3 : log(3.0) * 3;
    assert_true(fabs(rg_tensor_get_f64(res, 2) - want) < 1e-12);
    rg_tensor_free(res);
    rg_tensor_free(cv);
  }
  const rgb_program *p = rgb_function_program(f);
  for (int k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    if (t->node.code == RG_OP_EXP || t->node.code == RG_OP_LOG) assert_int_equal(t->calls, 1);
  }
  /* the per-op table has the transfers: 2, called twice each */
  const char *prof = tu_function_profile(f), *line = strstr(prof, "\n  transfer ");
  assert_non_null(line);
  int nodes = 0;
  long long calls = 0;
  assert_int_equal(sscanf(line, " transfer %d nodes %lld calls", &nodes, &calls), 2);
  assert_int_equal(nodes, 2);
  assert_int_equal(calls, 4);
  rg_tensor_free(x0);
  rg_function_free(f);
}

/* Fused composites run on the mirror (their inner graphs on the host),
 * with a join of their outputs folded in as on the CPU; a Scan runs there
 * too, its step's nodes on the mirror. */
static void test_inner_graphs_and_scan(void **st) {
  (void)st;
  /* large enough to fuse */
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 70000));
  rg_variable *y = rg_input(C, "y", vec(RG_FLOAT64, 70000));
  rg_variable *e = rg_add(rg_mul(rg_exp(x), y), rg_tanh(rg_sub(x, y)));
  rg_tensor *vals[2] = {tu_value(x->type, 1, -1, 2), tu_value(y->type, 2, -1, 2)};
  rg_function *f = compile(2, (rg_variable *[]){x, y}, 1, &e, "mirror", "fast_run", false);
  assert_non_null(strstr(tu_function_dump(f), "composite      mirror"));
  rg_function_free(f);
  same_results(2, (rg_variable *[]){x, y}, 1, &e, vals, "fast_run");
  /* a join of one composite's outputs folds into it on a device too */
  rg_variable *j = rg_join(0, 2, (rg_variable *[]){rg_mul(rg_exp(x), y), rg_tanh(rg_sub(x, y))});
  f = compile(2, (rg_variable *[]){x, y}, 1, &j, "mirror", "fast_run", false);
  const char *dj = tu_function_dump(f);
  assert_non_null(strstr(dj, "composite      mirror"));
  assert_null(strstr(dj, "join"));
  rg_function_free(f);
  same_results(2, (rg_variable *[]){x, y}, 1, &j, vals, "fast_run");
  rg_tensor_free(vals[0]);
  rg_tensor_free(vals[1]);

  const char *text = "(graph (input x float64 (?))"
      " (define xs (scan (lambda (x_t acc) (add acc (exp x_t)))"
      "   (sequences x) (outputs-info (constant float64 () (0.0)))))"
      " (output (mul xs 2.0)))";
  rg_fgraph *g = rg_graph_read(C, "<test>", text, strlen(text));
  assert_non_null(g);
  rg_variable *sx = rg_fgraph_input(g, 0), *so = rg_fgraph_output(g, 0);
  rg_function *sf = compile(1, &sx, 1, &so, "mirror", "fast_run", false);
  const char *d = tu_function_dump(sf);
  assert_non_null(strstr(d, "scan           mirror"));
  rg_function_free(sf);
  rg_tensor *xs = vec_f64(5, (double[]){0, 1, 2, 3, 4});
  same_results(1, &sx, 1, &so, &xs, "fast_run");
  rg_tensor_free(xs);
}

static const char *const scan_graphs[] = {
    /* an RNN over a batch with a nit-sot, non-sequences, a product per step */
    "(graph (input x float64 (6 3 4)) (input h0 float64 (3 5)) (input W float64 (5 5)) (input U float64 (4 5))"
    " (define (hs sums) (scan (lambda (x_t h) (define h2 (tanh (add (dot h W) (dot x_t U)))) (values h2 (sum h2)))"
    "   (sequences x) (outputs-info h0 none)))"
    " (output hs) (output sums) (output ((subtensor -1) hs)))",
    /* a mit-sot over two taps, n_steps given */
    "(graph (input x0 float64 (2 3)) (input v float64 (3))"
    " (output (scan (lambda (a b) (add (mul a v) (mul b 0.5))) (outputs-info (x0 (taps -2 -1))) (n-steps 7))))",
    /* backwards, sequence taps, only the last state read */
    "(graph (input x float64 (9 2)) (input h0 float64 (2))"
    " (output ((subtensor -1) (scan (lambda (a b h) (add (mul h 0.5) (sub b a)))"
    "   (sequences (x (taps -1 1))) (outputs-info h0) (go-backwards #t)))))",
    /* a while-loop: stops when the state passes 10 */
    "(graph (input h0 float64 ())"
    " (output (scan (lambda (h) (define h2 (add (mul h 2.0) 1.0)) (values h2 (until (gt h2 10.0))))"
    "   (outputs-info h0) (n-steps 20))))",
    /* a gradient through a loop: backward loops over mit-mot buffers */
    "(graph (input x float64 (5 3)) (input h0 float64 (3)) (input W float64 (3 3))"
    " (define hs (scan (lambda (x_t h) (tanh (add (dot h W) x_t))) (sequences x) (outputs-info h0)))"
    " (define (gW gh) (grad (sum hs) W h0)) (output gW) (output gh))",
    /* integer states and sequences: their scalar steps run on the host
     * (integer scalars are shape arithmetic there), beside the traces */
    "(graph (input i int64 ()) (input x int32 (6))"
    " (output (scan (lambda (a) (add a 2)) (outputs-info i) (n-steps 5)))"
    " (output (scan (lambda (x_t acc) (add acc x_t)) (sequences x) (outputs-info (constant int32 () (0)))))"
    " (output (scan (lambda (a b) (add a b)) (outputs-info ((constant int64 (2) (0 1)) (taps -2 -1))) (n-steps 6))))",
};

/* Graph g of scan_graphs with its inputs' values (vals[0..nin)). */
static rg_fgraph *scan_graph(size_t g, rg_variable **in, rg_variable **out, rg_tensor **vals) {
  rg_fgraph *fg = rg_graph_read(C, "<test>", scan_graphs[g], strlen(scan_graphs[g]));
  if (!fg) fail_msg("%s", rg_errmsg(C));
  for (int i = 0; i < rg_fgraph_ninputs(fg); i++) {
    in[i] = rg_fgraph_input(fg, i);
    vals[i] = tu_value(in[i]->type, (uint64_t)(i + 1), -0.9, rg_dtype_is_float(in[i]->type->dtype) ? 1.8 : 20);
  }
  for (int j = 0; j < rg_fgraph_noutputs(fg); j++) out[j] = rg_fgraph_output(fg, j);
  return fg;
}

/* The loops on backend `name` (the mirror, or CUDA on a GPU): a Scan placed
 * there, and the values equal the CPU's (to rounding: BLAS sees other
 * layouts, CUDA's tanh rounds differently from glibc's), with and without
 * the standard rewrites (which shrink traces kept at their end to a few
 * rows). */
static void scans_on(const char *name, double tol) {
  char want[64];
  snprintf(want, sizeof want, "scan           %s", name);
  for (size_t g = 0; g < sizeof scan_graphs / sizeof *scan_graphs; g++) {
    rg_variable *in[4], *out[4];
    rg_tensor *vals[4];
    rg_fgraph *fg = scan_graph(g, in, out, vals);
    int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
    rg_function *f = compile(nin, in, nout, out, name, "none", false);
    if (!strstr(tu_function_dump(f), want)) fail_msg("graph %zu: no Scan on %s\n%s", g, name, tu_function_dump(f));
    rg_function_free(f);
    results_on(name, nin, in, nout, out, vals, "none", tol);
    results_on(name, nin, in, nout, out, vals, "fast_run", tol);
    for (int i = 0; i < nin; i++) rg_tensor_free(vals[i]);
  }
}

static void test_scans_on_a_device(void **st) {
  (void)st;
  scans_on("mirror", 1e-13);
}

/* `test_backend_place cuda`: the same loops on the CUDA backend (CTest's
 * skip status, with the reason, where CUDA cannot run). */
static void test_scans_on_cuda(void **st) {
  (void)st;
  scans_on("cuda", 1e-11);
}

/* A Scan over a sequence on a device with its state's initial value on
 * the host (an input, a literal): the Scan and its traces live on the
 * device (the first input off the host), the initial value is copied
 * there, and the values are the CPU's. */
static void test_scan_over_a_device_sequence(void **st) {
  (void)st;
  static const char *const graphs[] = {
      "(graph (input x float64 (?) mirror) (input h0 float64 ())"
      " (output (scan (lambda (x_t acc) (add acc x_t)) (sequences x) (outputs-info h0))))",
      "(graph (input x float64 (?) mirror) (input h0 float64 ())"
      " (output (scan (lambda (x_t acc) (add acc x_t)) (sequences x) (outputs-info 0.0))))",
  };
  for (size_t g = 0; g < sizeof graphs / sizeof *graphs; g++) {
    rg_fgraph *fg = rg_graph_read(C, "<test>", graphs[g], strlen(graphs[g]));
    if (!fg) fail_msg("%s", rg_errmsg(C));
    rg_variable *in[2] = {rg_fgraph_input(fg, 0), rg_fgraph_input(fg, 1)}, *out = rg_fgraph_output(fg, 0);
    assert_int_equal(out->type->device, RG_DEVICE_MIRROR);
    rg_function *f = compile(2, in, 1, &out, NULL, "fast_run", false);
    if (!strstr(tu_function_dump(f), "scan           mirror")) fail_msg("no Scan on the mirror\n%s", tu_function_dump(f));
    rg_tensor *x = vec_f64(4, (double[]){1, 2, 3, 4}), *h0 = rg_tensor_scalar_f64(RG_FLOAT64, 10), *res;
    assert_int_equal(rg_function_call(f, (rg_tensor *[]){x, h0}, &res), RG_OK);
    double first = g ? 0 : 10;
    for (int i = 0; i < 4; i++) assert_true(rg_tensor_get_f64(res, i) == first + (i + 1) * (i + 2) / 2);
    rg_tensor_free(res), rg_tensor_free(x), rg_tensor_free(h0);
    rg_function_free(f);
  }
}

/* Running into outputs the caller provides: in place for a contiguous
 * host target, copied into a strided view or a device buffer. */
static void test_call_into(void **st) {
  (void)st;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 2, (int64_t[]){20, 30}));
  rg_variable *out[3] = {rg_exp(x), rg_mul(x, x), x};
  rg_function *f = compile(1, &x, 3, out, NULL, "none", false);
  rg_tensor *in = tu_value(x->type, 3, -1, 2);
  rg_tensor *want[3];
  assert_int_equal(rg_function_call(f, &in, want), RG_OK);
  rg_backend *m = rg_backend_new("mirror", NULL, 0);
  rg_tensor *t0 = rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){20, 30});
  rg_tensor *big = rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){30, 20});
  rg_tensor *t1 = rg_tensor_permute(big, (int[]){1, 0});  /* a strided view */
  rg_tensor *t2 = rg_tensor_empty_on(rg_backend_buffer_type(m), RG_FLOAT64, 2, (int64_t[]){20, 30});
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(rg_function_call_into(f, &in, (rg_tensor *[]){t0, t1, t2}), RG_OK);
    assert_true(rg_tensor_equal(t0, want[0]));
    assert_true(rg_tensor_equal(t1, want[1]));
    rg_tensor *h2 = rg_tensor_to_host(t2);
    assert_true(rg_tensor_equal(h2, want[2]));
    rg_tensor_free(h2);
    /* exp was computed in place: its cell holds nothing of its own */
    const rgb_program *p = rgb_function_program(f);
    assert_null(p->cells[p->out_cells[0]]);
  }
  /* a target of the wrong shape or dtype, or none */
  rg_tensor *bad = rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){30, 20});
  assert_int_not_equal(rg_function_call_into(f, &in, (rg_tensor *[]){bad, t1, t2}), RG_OK);
  assert_string_equal(rg_function_errmsg(f), "output 0 is float64 (20 30), the tensor given for it float64 (30 20)");
  assert_int_not_equal(rg_function_call_into(f, &in, (rg_tensor *[]){t0, t0, t2}), RG_OK);
  assert_string_equal(rg_function_errmsg(f), "outputs 0 and 1 are given the same tensor to write into");
  /* two views sharing elements (a row of one inside the other) */
  rg_tensor *wide = rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){40, 30});
  rg_tensor *va = rg_tensor_view(wide, 2, (int64_t[]){20, 30}, (int64_t[]){240, 8}, 0);
  rg_tensor *vb = rg_tensor_view(wide, 2, (int64_t[]){20, 30}, (int64_t[]){240, 8}, 19 * 240);
  assert_int_not_equal(rg_function_call_into(f, &in, (rg_tensor *[]){va, vb, t2}), RG_OK);
  assert_string_equal(rg_function_errmsg(f), "outputs 0 and 1 are given overlapping memory to write into");
  rg_tensor *vc = rg_tensor_view(wide, 2, (int64_t[]){20, 30}, (int64_t[]){240, 8}, 20 * 240);
  assert_int_equal(rg_function_call_into(f, &in, (rg_tensor *[]){va, vc, t2}), RG_OK); /* apart: fine */
  rg_tensor_free(va), rg_tensor_free(vb), rg_tensor_free(vc), rg_tensor_free(wide);
  rg_tensor *i32 = rg_tensor_new(RG_INT32, 2, (int64_t[]){20, 30});
  assert_int_not_equal(rg_function_call_into(f, &in, (rg_tensor *[]){t0, i32, t2}), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "output 1"));
  assert_int_not_equal(rg_function_call_into(f, &in, (rg_tensor *[]){t0, NULL, t2}), RG_OK);
  assert_non_null(strstr(rg_function_errmsg(f), "no tensor given"));
  /* the function still works after the errors */
  assert_int_equal(rg_function_call_into(f, &in, (rg_tensor *[]){t0, t1, t2}), RG_OK);
  assert_true(rg_tensor_equal(t1, want[1]));
  rg_tensor *all[] = {in, want[0], want[1], want[2], t0, big, t1, t2, bad, i32};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) rg_tensor_free(all[i]);
  rg_function_free(f);
  rg_backend_free(m);
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void **st) {
  (void)st;
  char why[256];
  assert_false(rg_backend_available("tpu", why, sizeof why));
  assert_non_null(strstr(why, "no backend named 'tpu'"));
  /* the form of two arguments, with an array for the reason */
  char why2[64] = "";
  assert_false(rg_backend_available("tpu", why2));
  assert_non_null(strstr(why2, "no backend named 'tpu'"));
  assert_true(rg_backend_available("cpu", why2));
  assert_null(rg_backend_new("mirror:1", why, sizeof why));
  assert_non_null(strstr(why, "no devices to number"));
  assert_null(rg_backend_new(NULL, why, sizeof why));
  rg_backend_free(NULL);
  /* names: a backend of the build with a well-formed device, whether or
   * not it can run here */
  assert_true(rg_backend_name_valid("mirror", why, sizeof why));
  assert_false(rg_backend_name_valid("", why, sizeof why));
  assert_non_null(strstr(why, "no backend named ''"));
  assert_false(rg_backend_name_valid("mirror:1", why, sizeof why));
  if (rg_backend_name_valid("cuda", why, sizeof why)) { /* registered in this build */
    assert_true(rg_backend_name_valid("cuda:7", why, sizeof why));
    assert_false(rg_backend_name_valid("cuda:x", why, sizeof why));
    assert_non_null(strstr(why, "bad device in 'cuda:x'"));
  }
  rg_variable *x = rg_input(C, "x", vec(RG_FLOAT64, 3));
  rg_variable *y = rg_exp(x);
  rg_compile_opts o = {.mode = {.backend = "tpu"}};
  assert_null(rg_compile(C, 1, &x, 1, &y, &o));
  assert_non_null(strstr(rg_errmsg(C), "backend tpu cannot run here: no backend named 'tpu'"));
  /* CUDA where it cannot run: the reason, whichever it is here */
  if (!rg_backend_available("cuda", why, sizeof why)) {
    const char *reasons[] = {"no CUDA driver", "does not start", "no CUDA device", "NVRTC", "entry point"};
    bool known = false;
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++) known |= strstr(why, reasons[i]) != NULL;
    assert_true(known);
    o = (rg_compile_opts){.mode = {.backend = "cuda"}};
    assert_null(rg_compile(C, 1, &x, 1, &y, &o));
    assert_non_null(strstr(rg_errmsg(C), "backend cuda cannot run here: "));
    assert_non_null(strstr(rg_errmsg(C), why));
    /* an input on a device with no backend here */
    rg_variable *z = rg_input(C, "z", rg_type_on_device(vec(RG_FLOAT64, 3), RG_DEVICE_CUDA(0)));
    rg_variable *zz = rg_exp(z);
    assert_null(rg_compile(C, 1, &z, 1, &zz, NULL));
    assert_non_null(strstr(rg_errmsg(C), "input z lives on cuda:0"));
  }
  assert_false(rg_backend_available("cuda:x", why, sizeof why) && rg_backend_new("cuda:x", why, sizeof why));
  /* a mirror kernel refuses a value that skipped its transfer */
  rgb_bound b;
  rgb_node bn;
  assert_int_equal(rgb_node_init(&bn, y->owner), 0);
  assert_int_equal(rgb_mirror_backend.bind(NULL, &bn, &b, NULL, 0), 0);
  rg_tensor *h = vec_f64(3, (double[]){1, 2, 3}), *outv = NULL;
  rg_tensor **in[1] = {&h}, **outp[1] = {&outv};
  rgb_runtime *rt = rgb_runtime_new(1, false);
  rgb_exec ex = {.node = &bn, .inp = in, .outp = outp, .rt = rt, .state = b.state};
  assert_int_not_equal(b.fn(&ex), 0);
  assert_non_null(strstr(rt->err, "not on the mirror device"));
  assert_null(outv);
  b.free_state(b.state);
  rgb_runtime_free(rt);
  rgb_node_clear(&bn);
  rg_tensor_free(h);
}

int main(int argc, char **argv) {
  if (argc > 1) { /* one backend's loops: `cuda` */
    char why[256];
    rg_init();
    if (strcmp(argv[1], "cuda")) return fprintf(stderr, "usage: test_backend_place [cuda]\n"), 2;
    if (!rg_backend_available("cuda", why, sizeof why)) return printf("cuda skipped: %s\n", why), 77;
    const struct CMUnitTest cuda[] = {cmocka_unit_test(test_scans_on_cuda)};
    return cmocka_run_group_tests(cuda, setup, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tensor_transfers),
      cmocka_unit_test(test_placement_and_transfers),
      cmocka_unit_test(test_constants_uploaded_once),
      cmocka_unit_test(test_shape_arguments_on_the_host),
      cmocka_unit_test(test_inputs_and_outputs_on_devices),
      cmocka_unit_test(test_lazy_across_devices),
      cmocka_unit_test(test_inner_graphs_and_scan),
      cmocka_unit_test(test_scans_on_a_device),
      cmocka_unit_test(test_scan_over_a_device_sequence),
      cmocka_unit_test(test_call_into),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
