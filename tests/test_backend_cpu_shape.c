/*
 * test_backend_cpu_shape.c — the CPU structure ops: dimshuffle, reshape,
 * flatten, shape, shape_i, alloc, alloc_empty, make_vector, join, split,
 * subtensor, inc_subtensor, set_subtensor and arange, against hand-computed
 * values.  Views must share their input's storage (no copy), reshape must
 * copy only when the strides leave no choice, subtensor follows Python's
 * slice rules (negative bounds and steps, clipping), and every run-time
 * error (sizes, indices, steps, broadcasting) gives its message.
 */
#include "tests/test_backend_cpu.h"

static rg_tensor *iota(rg_dtype dt, int nd, const int64_t *shape) {
  rg_tensor *t = tens(dt, nd, shape, NULL);
  for (int64_t i = 0; i < rg_tensor_numel(t); i++) rg_tensor_set_f64(t, i, (double)i);
  return t;
}

static bool shares(const rg_tensor *a, const rg_tensor *b) {
  return rg_storage_base(a) == rg_storage_base(b);
}

/* ------------------------------------------------------------------ dimshuffle */

static void test_dimshuffle(void **st) {
  rg_tensor *x = iota(RG_INT32, 2, SHAPE(2, 3));
  rg_tensor *r = eval(rg_dimshuffle(var(RG_INT32, 2, SHAPE(2, 3)), 3, SHAPE(1, -1, 0)), 1, &x);
  check(r, RG_INT32, 3, SHAPE(3, 1, 2), VALS(0, 3, 1, 4, 2, 5));
  assert_true(shares(r, x));
  rg_tensor *y = iota(RG_FLOAT32, 3, SHAPE(2, 1, 3));
  rg_tensor *d = eval(rg_dimshuffle(var(RG_FLOAT32, 3, SHAPE(2, 1, 3)), 2, SHAPE(2, 0)), 1, &y);
  check(d, RG_FLOAT32, 2, SHAPE(3, 2), VALS(0, 3, 1, 4, 2, 5));
  /* a tensor contradicting the size-1 dimension its type promises */
  rg_tensor *bad = iota(RG_FLOAT32, 3, SHAPE(2, 2, 3));
  eval_fails(rg_dimshuffle(var(RG_FLOAT32, 3, SHAPE(2, 1, 3)), 2, SHAPE(0, 2)), 1, &bad,
             "cannot drop dimension 1 of size 2");
  rg_tensor *all[] = {x, r, y, d, bad};
  free_all(5, all);
}

/* ------------------------------------------------------------------ reshape, flatten */

static rg_tensor *reshape_run(rg_tensor *x, int nd, const int64_t *dims) {
  rg_variable *v = rg_reshape_to(var(x->dtype, x->ndim, x->shape), nd, dims);
  rg_tensor *in[2] = {x, NULL};
  return eval_k(v, 2, in);
}

static void test_reshape_views_and_copies(void **st) {
  rg_tensor *x = iota(RG_FLOAT64, 2, SHAPE(4, 6));
  rg_tensor *a = reshape_run(x, 3, SHAPE(2, -1, 3)); /* contiguous: a view */
  check(a, RG_FLOAT64, 3, SHAPE(2, 4, 3), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                               16, 17, 18, 19, 20, 21, 22, 23));
  assert_true(shares(a, x));
  /* x[:, ::2] is evenly strided: merging its dimensions is a view too */
  rg_tensor *s2 = rg_tensor_view(x, 2, SHAPE(4, 3), SHAPE(48, 16), 0);
  rg_tensor *f12 = reshape_run(s2, 1, SHAPE(12));
  check(f12, RG_FLOAT64, 1, SHAPE(12), VALS(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22));
  assert_true(shares(f12, x));
  /* x[:, :3] split along its first dimension: a view */
  rg_tensor *s = rg_tensor_view(x, 2, SHAPE(4, 3), SHAPE(48, 8), 0);
  rg_tensor *b = reshape_run(s, 3, SHAPE(2, 2, 3));
  check(b, RG_FLOAT64, 3, SHAPE(2, 2, 3), VALS(0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20));
  assert_true(shares(b, x));
  /* merging x[:, :3]'s dimensions needs a copy */
  rg_tensor *c = reshape_run(s, 1, SHAPE(12));
  check(c, RG_FLOAT64, 1, SHAPE(12), VALS(0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20));
  assert_false(shares(c, x));
  rg_tensor_free(s2);
  rg_tensor_free(f12);
  /* a transpose flattened: copy; size-1 dimensions anywhere: view */
  rg_tensor *t = rg_tensor_permute(x, (const int[]){1, 0});
  static const double tv[24] = {0, 6, 12, 18, 1, 7, 13, 19, 2, 8, 14, 20,
                                3, 9, 15, 21, 4, 10, 16, 22, 5, 11, 17, 23};
  rg_tensor *f = eval(rg_flatten(var(RG_FLOAT64, 2, SHAPE(6, 4)), 1), 1, &t);
  check(f, RG_FLOAT64, 1, SHAPE(24), tv);
  assert_false(shares(f, x));
  rg_tensor *g = reshape_run(t, 4, SHAPE(1, 6, 1, 4));
  assert_true(shares(g, x));
  check(g, RG_FLOAT64, 4, SHAPE(1, 6, 1, 4), tv);
  rg_tensor *f2 = eval(rg_flatten(var(RG_FLOAT64, 3, SHAPE(2, 4, 3)), 2), 1, &a);
  check(f2, RG_FLOAT64, 2, SHAPE(2, 12), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                             16, 17, 18, 19, 20, 21, 22, 23));
  assert_true(shares(f2, x));
  /* empty and scalar */
  rg_tensor *e = tens(RG_INT8, 2, SHAPE(0, 3), NULL);
  rg_tensor *er = reshape_run(e, 2, SHAPE(3, 0));
  assert_int_equal(er->shape[0], 3);
  assert_int_equal(er->shape[1], 0);
  rg_tensor *one = scalar(RG_INT8, 5), *o3 = reshape_run(one, 3, SHAPE(1, 1, 1));
  check(o3, RG_INT8, 3, SHAPE(1, 1, 1), VALS(5));
  rg_tensor *all[] = {x, a, s, b, c, t, f, g, f2, e, er, one, o3};
  free_all(13, all);
}

static void test_reshape_errors(void **st) {
  rg_variable *v = var_u(RG_FLOAT32, 2), *sv = var(RG_INT64, 1, SHAPE(2));
  rg_variable *r = rg_reshape(v, sv, 2);
  rg_tensor *x = iota(RG_FLOAT32, 2, SHAPE(2, 3));
  rg_tensor *s1 = tens(RG_INT64, 1, SHAPE(2), VALS(4, 2)), *s2 = tens(RG_INT64, 1, SHAPE(2), VALS(-2, 3));
  rg_tensor *s3 = tens(RG_INT64, 1, SHAPE(2), VALS(-1, -1)), *s4 = tens(RG_INT64, 1, SHAPE(2), VALS(-1, 4));
  rg_tensor *in1[2] = {x, s1}, *in2[2] = {x, s2}, *in3[2] = {x, s3}, *in4[2] = {x, s4};
  eval_fails(r, 2, in1, "reshape: cannot reshape an array of size 6 (shape (2 3)) into shape (4 2)");
  eval_fails(r, 2, in2, "invalid size -2");
  eval_fails(r, 2, in3, "reshape: only one size of the shape may be -1");
  eval_fails(r, 2, in4, "cannot reshape an array of size 6");
  rg_tensor *ok = tens(RG_INT64, 1, SHAPE(2), VALS(3, -1)), *in5[2] = {x, ok};
  rg_tensor *y = eval(r, 2, in5);
  check(y, RG_FLOAT32, 2, SHAPE(3, 2), VALS(0, 1, 2, 3, 4, 5));
  rg_tensor *all[] = {x, s1, s2, s3, s4, ok, y};
  free_all(7, all);
}

/* ------------------------------------------------------------------ shape, alloc, make_vector */

static void test_shape_alloc_make_vector(void **st) {
  rg_tensor *x = tens(RG_BOOL, 3, SHAPE(2, 0, 5), NULL);
  rg_variable *vx = var_u(RG_BOOL, 3);
  rg_tensor *sh = eval(rg_shape(vx), 1, &x), *s2 = eval(rg_shape_i(vx, 2), 1, &x);
  check(sh, RG_INT64, 1, SHAPE(3), VALS(2, 0, 5));
  check(s2, RG_INT64, 0, NULL, VALS(5));
  /* alloc: a row broadcast to run-time dimensions */
  rg_variable *d[2] = {var(RG_INT64, 0, NULL), var(RG_INT32, 0, NULL)};
  rg_tensor *row = tens(RG_FLOAT32, 1, SHAPE(3), VALS(1, 2, 3)), *two = scalar(RG_INT64, 2),
            *three = scalar(RG_INT32, 3);
  rg_tensor *in[3] = {row, two, three};
  rg_tensor *al = eval(rg_allocate(var(RG_FLOAT32, 1, SHAPE(3)), 2, d), 3, in);
  check(al, RG_FLOAT32, 2, SHAPE(2, 3), VALS(1, 2, 3, 1, 2, 3));
  rg_tensor *sc = scalar(RG_INT16, 7), *in2[3] = {sc, two, three};
  rg_tensor *al2 = eval(rg_allocate(var(RG_INT16, 0, NULL), 2, d), 3, in2);
  check(al2, RG_INT16, 2, SHAPE(2, 3), VALS(7, 7, 7, 7, 7, 7));
  /* a run-time size-1 dimension of unknown static size does not stretch */
  rg_tensor *one = tens(RG_FLOAT32, 1, SHAPE(1), VALS(4)), *in3[3] = {one, two, three};
  eval_fails(rg_allocate(var_u(RG_FLOAT32, 1), 2, d), 3, in3,
             "alloc: the value of shape (1) does not broadcast to (2 3)");
  rg_tensor *neg = scalar(RG_INT64, -1), *in4[3] = {row, neg, three};
  eval_fails(rg_allocate(var(RG_FLOAT32, 1, SHAPE(3)), 2, d), 3, in4, "negative dimension -1");
  rg_tensor *in5[2] = {three, two};
  rg_variable *dd[2] = {d[1], d[0]};
  rg_tensor *em = eval(rg_allocate_empty(C, RG_UINT8, 2, dd), 2, in5);
  assert_int_equal(em->dtype, RG_UINT8);
  assert_int_equal(em->shape[0], 3);
  assert_int_equal(em->shape[1], 2);
  rg_variable *xs[3] = {var(RG_INT8, 0, NULL), var(RG_INT64, 0, NULL), var(RG_INT32, 0, NULL)};
  rg_tensor *a = scalar(RG_INT8, -3), *in6[3] = {a, two, three};
  rg_tensor *mv = eval(rg_make_vector(C, RG_INT64, 3, xs), 3, in6);
  check(mv, RG_INT64, 1, SHAPE(3), VALS(-3, 2, 3));
  rg_tensor *all[] = {x, sh, s2, row, two, three, al, sc, al2, one, neg, em, a, mv};
  free_all(14, all);
}

/* ------------------------------------------------------------------ join, split */

static void test_join_split(void **st) {
  rg_tensor *a = iota(RG_INT8, 2, SHAPE(2, 2)), *b0 = iota(RG_FLOAT32, 2, SHAPE(2, 3));
  rg_tensor *b = rg_tensor_view(b0, 2, SHAPE(2, 3), SHAPE(12, -4), 8); /* columns reversed */
  rg_tensor *e = tens(RG_INT8, 2, SHAPE(2, 0), NULL);
  rg_variable *vs[3] = {var(RG_INT8, 2, SHAPE(2, 2)), var(RG_FLOAT32, 2, SHAPE(2, 3)), var(RG_INT8, 2, SHAPE(2, 0))};
  rg_tensor *in[3] = {a, b, e};
  rg_tensor *j1 = eval(rg_join(1, 3, vs), 3, in);
  check(j1, RG_FLOAT32, 2, SHAPE(2, 5), VALS(0, 1, 2, 1, 0, 2, 3, 5, 4, 3));
  rg_variable *v0[2] = {var(RG_FLOAT32, 2, SHAPE(2, 3)), var(RG_FLOAT32, 2, SHAPE(2, 3))};
  rg_tensor *in0[2] = {b0, b};
  rg_tensor *j0 = eval(rg_join(-2, 2, v0), 2, in0);
  check(j0, RG_FLOAT32, 2, SHAPE(4, 3), VALS(0, 1, 2, 3, 4, 5, 2, 1, 0, 5, 4, 3));
  rg_variable *vu[2] = {var_u(RG_FLOAT32, 2), var_u(RG_FLOAT32, 2)};
  rg_tensor *c = iota(RG_FLOAT32, 2, SHAPE(3, 3)), *inb[2] = {b0, c};
  eval_fails(rg_join(1, 2, vu), 2, inb, "join: shapes (2 3) and (3 3) differ outside the axis 1");
  /* split into views */
  rg_tensor *x = iota(RG_INT32, 2, SHAPE(3, 5));
  rg_tensor *sizes = tens(RG_INT64, 1, SHAPE(3), VALS(2, 0, 3));
  rg_node *sp = rg_split(var(RG_INT32, 2, SHAPE(3, 5)), var(RG_INT64, 1, SHAPE(3)), 1, 3);
  assert_non_null(sp);
  rg_tensor *sin[2] = {x, sizes}, *outs[3];
  char err[256];
  assert_int_equal(rgb_eval_node(sp, sin, outs, err, sizeof err), 0);
  check(outs[0], RG_INT32, 2, SHAPE(3, 2), VALS(0, 1, 5, 6, 10, 11));
  check(outs[1], RG_INT32, 2, SHAPE(3, 0), NULL);
  check(outs[2], RG_INT32, 2, SHAPE(3, 3), VALS(2, 3, 4, 7, 8, 9, 12, 13, 14));
  assert_true(shares(outs[0], x) && shares(outs[2], x));
  free_all(3, outs);
  rg_tensor *bad = tens(RG_INT64, 1, SHAPE(3), VALS(2, 2, 2)), *neg = tens(RG_INT64, 1, SHAPE(3), VALS(6, -1, 0));
  rg_tensor *bin1[2] = {x, bad}, *bin2[2] = {x, neg};
  assert_int_not_equal(rgb_eval_node(sp, bin1, outs, err, sizeof err), 0);
  assert_non_null(strstr(err, "the sizes add up to 6, but dimension 1 has size 5"));
  assert_int_not_equal(rgb_eval_node(sp, bin2, outs, err, sizeof err), 0);
  assert_non_null(strstr(err, "negative size -1"));
  rg_tensor *all[] = {a, b0, b, e, j1, j0, c, x, sizes, bad, neg};
  free_all(11, all);
}

/* ------------------------------------------------------------------ subtensor */

static rg_index IDX(int64_t i) { return (rg_index){RG_IDX_INDEX, i, RG_IDX_NONE, RG_IDX_NONE}; }
static rg_index SL(int64_t a, int64_t b, int64_t c) { return (rg_index){RG_IDX_SLICE, a, b, c}; }
#define N RG_IDX_NONE
#define Q RG_IDX_INPUT

static rg_tensor *sub(rg_tensor *x, int nent, const rg_index *e) {
  rg_tensor *r = eval(rg_subtensor(var(x->dtype, x->ndim, x->shape), nent, e, 0, NULL), 1, &x);
  assert_true(shares(r, x) || rg_tensor_numel(r) == 0);
  return r;
}

static void test_subtensor_python_rules(void **st) {
  rg_tensor *x = iota(RG_INT64, 2, SHAPE(4, 5));
  struct { int nent; rg_index e[2]; int nd; int64_t shape[2]; double v[20]; } cases[] = {
      {1, {IDX(1)}, 1, {5}, {5, 6, 7, 8, 9}},
      {1, {IDX(-1)}, 1, {5}, {15, 16, 17, 18, 19}},
      {2, {IDX(2), IDX(-2)}, 0, {0}, {13}},
      {1, {SL(1, 3, N)}, 2, {2, 5}, {5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
      {1, {SL(N, N, -1)}, 2, {4, 5}, {15, 16, 17, 18, 19, 10, 11, 12, 13, 14, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4}},
      {2, {SL(N, N, -2), SL(-3, -1, N)}, 2, {2, 2}, {17, 18, 7, 8}},
      {2, {SL(-3, -1, N), IDX(2)}, 1, {2}, {7, 12}},
      {1, {SL(5, N, N)}, 2, {0, 5}, {0}},
      {2, {SL(N, N, N), SL(10, -10, N)}, 2, {4, 0}, {0}},
      {2, {SL(-100, 100, 3), SL(4, -100, -2)}, 2, {2, 3}, {4, 2, 0, 19, 17, 15}},
      {2, {SL(3, 0, -1), SL(N, 1, -1)}, 2, {3, 3}, {19, 18, 17, 14, 13, 12, 9, 8, 7}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rg_tensor *r = sub(x, cases[i].nent, cases[i].e);
    check(r, RG_INT64, cases[i].nd, cases[i].shape, cases[i].v);
    rg_tensor_free(r);
  }
  /* indices and bounds from inputs, and their errors */
  rg_index e[2] = {IDX(Q), SL(Q, N, Q)};
  rg_variable *idx[3] = {var(RG_INT32, 0, NULL), var(RG_INT8, 0, NULL), var(RG_INT64, 0, NULL)};
  rg_variable *s = rg_subtensor(var_u(RG_INT64, 2), 2, e, 3, idx);
  rg_tensor *i1 = scalar(RG_INT32, -4), *a = scalar(RG_INT8, 4), *st1 = scalar(RG_INT64, -2);
  rg_tensor *in[4] = {x, i1, a, st1};
  rg_tensor *r = eval(s, 4, in);
  check(r, RG_INT64, 1, SHAPE(3), VALS(4, 2, 0));
  rg_tensor *big = scalar(RG_INT32, 4), *zero = scalar(RG_INT64, 0);
  rg_tensor *bad1[4] = {x, big, a, st1}, *bad2[4] = {x, i1, a, zero};
  eval_fails(s, 4, bad1, "subtensor: index 4 is out of bounds for axis 0 with size 4");
  eval_fails(s, 4, bad2, "slice step cannot be zero");
  rg_tensor *all[] = {x, i1, a, st1, r, big, zero};
  free_all(7, all);
}

static void test_set_inc_subtensor(void **st) {
  rg_index e[2] = {SL(1, 3, N), SL(N, N, 2)};
  rg_tensor *x = iota(RG_FLOAT32, 2, SHAPE(3, 4)), *y = tens(RG_INT8, 1, SHAPE(2), VALS(-1, -2));
  rg_variable *vx = var(RG_FLOAT32, 2, SHAPE(3, 4)), *vy = var(RG_INT8, 1, SHAPE(2));
  rg_tensor *in[2] = {x, y};
  rg_tensor *s = eval(rg_set_subtensor(vx, vy, 2, e, 0, NULL), 2, in);
  check(s, RG_FLOAT32, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, -1, 5, -2, 7, -1, 9, -2, 11));
  assert_false(shares(s, x));
  check(x, RG_FLOAT32, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  rg_tensor *i = eval(rg_inc_subtensor(vx, vy, 2, e, 0, NULL), 2, in);
  check(i, RG_FLOAT32, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, 3, 5, 4, 7, 7, 9, 8, 11));
  /* in place on an unshared x (index from an input, a scalar y) */
  rg_index e2[1] = {IDX(Q)};
  rg_variable *iv = var(RG_INT64, 0, NULL);
  rg_variable *ys = var(RG_FLOAT32, 0, NULL);
  rg_variable *inc = rg_inc_subtensor(vx, ys, 1, e2, 1, &iv);
  rg_node *n = rg_make_node(C, rg_op_inplace(inc->owner->op, 0), 3, inc->owner->inputs);
  assert_non_null(n);
  rg_tensor *ten = scalar(RG_FLOAT32, 10), *k = scalar(RG_INT64, -1);
  rg_tensor *in2[3] = {x, ten, k};
  rg_tensor *ip = eval(n->outputs[0], 3, in2);
  assert_ptr_equal(ip->data, x->data);
  check(x, RG_FLOAT32, 2, SHAPE(3, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7, 18, 19, 20, 21));
  /* x[::-1] = x in place would read what it writes: done on a copy */
  rg_index rev[1] = {SL(N, N, -1)};
  rg_variable *v4 = var(RG_INT32, 1, SHAPE(4));
  rg_variable *sr = rg_set_subtensor(v4, v4, 1, rev, 0, NULL);
  rg_node *n2 = rg_make_node(C, rg_op_inplace(sr->owner->op, 0), 2, sr->owner->inputs);
  rg_tensor *x4 = iota(RG_INT32, 1, SHAPE(4)), *in4[2] = {x4, x4};
  rg_tensor *r4 = eval(n2->outputs[0], 2, in4);
  check(r4, RG_INT32, 1, SHAPE(4), VALS(3, 2, 1, 0));
  check(x4, RG_INT32, 1, SHAPE(4), VALS(0, 1, 2, 3));
  rg_tensor_free(x4);
  rg_tensor_free(r4);
  /* broadcasting errors on run-time shapes */
  rg_variable *vu = var_u(RG_FLOAT32, 1);
  rg_tensor *y3 = tens(RG_FLOAT32, 1, SHAPE(3), NULL), *in3[2] = {x, y3};
  eval_fails(rg_set_subtensor(vx, vu, 2, e, 0, NULL), 2, in3,
             "values of shape (3) do not broadcast to the selection (2 2)");
  rg_tensor *all[] = {x, y, s, i, ten, k, ip, y3};
  free_all(8, all);
}

/* ------------------------------------------------------------------ arange */

static rg_tensor *arange_run(rg_dtype in_dt, double a, double b, double c, rg_dtype dt) {
  rg_variable *v[3] = {var(in_dt, 0, NULL), var(in_dt, 0, NULL), var(in_dt, 0, NULL)};
  rg_tensor *in[3] = {scalar(in_dt, a), scalar(in_dt, b), scalar(in_dt, c)};
  rg_tensor *r = eval(rg_arange(v[0], v[1], v[2], dt), 3, in);
  free_all(3, in);
  return r;
}

static void test_arange(void **st) {
  rg_tensor *a = arange_run(RG_INT64, 0, 10, 3, RG_INT64), *b = arange_run(RG_INT32, 10, 0, -3, RG_INT8);
  rg_tensor *c = arange_run(RG_FLOAT64, 0.1, 1, 0.3, RG_FLOAT64), *d = arange_run(RG_INT64, 5, 0, 1, RG_FLOAT32);
  rg_tensor *e = arange_run(RG_FLOAT64, -1, 1, 0.5, RG_INT16);
  check(a, RG_INT64, 1, SHAPE(4), VALS(0, 3, 6, 9));
  check(b, RG_INT8, 1, SHAPE(4), VALS(10, 7, 4, 1));
  double delta = (0.1 + 0.3) - 0.1; /* NumPy fills start + i * delta */
  check(c, RG_FLOAT64, 1, SHAPE(3), VALS(0.1, 0.1 + delta, 0.1 + 2 * delta));
  check(d, RG_FLOAT32, 1, SHAPE(0), NULL);
  check(e, RG_INT16, 1, SHAPE(4), VALS(-1, 0, 0, 0));
  rg_variable *v[3] = {var(RG_INT64, 0, NULL), var(RG_INT64, 0, NULL), var(RG_INT64, 0, NULL)};
  rg_tensor *in[3] = {scalar(RG_INT64, 0), scalar(RG_INT64, 5), scalar(RG_INT64, 0)};
  eval_fails(rg_arange(v[0], v[1], v[2], RG_INT64), 3, in, "the step must not be zero");
  free_all(3, in);
  rg_tensor *all[] = {a, b, c, d, e};
  free_all(5, all);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dimshuffle),
      cmocka_unit_test(test_reshape_views_and_copies),
      cmocka_unit_test(test_reshape_errors),
      cmocka_unit_test(test_shape_alloc_make_vector),
      cmocka_unit_test(test_join_split),
      cmocka_unit_test(test_subtensor_python_rules),
      cmocka_unit_test(test_set_inc_subtensor),
      cmocka_unit_test(test_arange),
  };
  return cmocka_run_group_tests(tests, cpu_setup, NULL);
}
