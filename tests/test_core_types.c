/*
 * test_core_types.c — dtypes and NumPy promotion, tensor types, and host
 * tensors (storage sharing, views, copies, printing).
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/graph.h"

static int setup(void **st) {
  rg_init();
  return 0;
}

/* ------------------------------------------------------------------ dtypes */

static void test_dtype_names(void **st) {
  for (int i = 0; i < RG_NDTYPES; i++) assert_int_equal(rg_dtype_from_name(rg_dtype_name(i)), i);
  assert_int_equal(rg_dtype_from_name("float16"), -1);
  assert_string_equal(rg_dtype_name(RG_NDTYPES), "?");
  assert_int_equal(rg_dtype_size(RG_INT16), 2);
  assert_int_equal(rg_dtype_size(RG_FLOAT64), 8);
  assert_true(rg_dtype_is_int(RG_UINT8));
  assert_false(rg_dtype_is_int(RG_BOOL));
  assert_false(rg_dtype_is_signed(RG_UINT8));
  assert_true(rg_dtype_is_signed(RG_FLOAT32));
}

/* np.result_type over every pair of the eight dtypes. */
static void test_dtype_promotion_table(void **st) {
  enum { B = RG_BOOL, I1 = RG_INT8, I2 = RG_INT16, I4 = RG_INT32, I8 = RG_INT64, U1 = RG_UINT8,
         F4 = RG_FLOAT32, F8 = RG_FLOAT64 };
  static const int want[8][8] = {
      /*        B   I1  I2  I4  I8  U1  F4  F8 */
      /* B  */ {B, I1, I2, I4, I8, U1, F4, F8},
      /* I1 */ {I1, I1, I2, I4, I8, I2, F4, F8},
      /* I2 */ {I2, I2, I2, I4, I8, I2, F4, F8},
      /* I4 */ {I4, I4, I4, I4, I8, I4, F8, F8},
      /* I8 */ {I8, I8, I8, I8, I8, I8, F8, F8},
      /* U1 */ {U1, I2, I2, I4, I8, U1, F4, F8},
      /* F4 */ {F4, F4, F4, F8, F8, F4, F4, F8},
      /* F8 */ {F8, F8, F8, F8, F8, F8, F8, F8},
  };
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      if ((int)rg_dtype_promote(a, b) != want[a][b])
        fail_msg("promote(%s, %s) = %s, want %s", rg_dtype_name(a), rg_dtype_name(b),
                 rg_dtype_name(rg_dtype_promote(a, b)), rg_dtype_name(want[a][b]));
    }
  assert_true(rg_dtype_can_cast(RG_INT64, RG_FLOAT64));
  assert_false(rg_dtype_can_cast(RG_INT64, RG_FLOAT32));
  assert_false(rg_dtype_can_cast(RG_UINT8, RG_INT8));
  assert_true(rg_dtype_can_cast(RG_BOOL, RG_UINT8));
  assert_false(rg_dtype_can_cast(RG_INT8, RG_BOOL));
  /* exact: there and back is the identity (safe casting rounds int64 past 2^53) */
  assert_false(rg_dtype_exact_cast(RG_INT64, RG_FLOAT64));
  assert_true(rg_dtype_exact_cast(RG_INT32, RG_FLOAT64));
  assert_true(rg_dtype_exact_cast(RG_INT16, RG_FLOAT32));
  assert_true(rg_dtype_exact_cast(RG_UINT8, RG_INT16));
  assert_true(rg_dtype_exact_cast(RG_FLOAT32, RG_FLOAT64));
  assert_false(rg_dtype_exact_cast(RG_INT64, RG_FLOAT32));
  assert_false(rg_dtype_exact_cast(RG_FLOAT64, RG_INT64));
}

/* NEP 50 over operands: weak literals adopt the strong dtype unless their
 * kind is higher; an integer literal that does not fit is reported, or
 * widens a comparison (NumPy compares it exactly). */
static void test_dtype_result_weak_literals(void **st) {
  (void)st;
  rg_operand f32_f = {RG_FLOAT32, false, false, 0}, lit_f = {RG_FLOAT64, true, false, 0};
  rg_operand two[2] = {f32_f, lit_f};
  int unfit = 7;
  assert_int_equal(rg_dtype_result(2, two, false, &unfit), RG_FLOAT32);
  assert_int_equal(unfit, -1);
  rg_operand u8_m1[2] = {{RG_UINT8, false, false, 0}, {RG_INT64, true, true, -1}};
  assert_int_equal(rg_dtype_result(2, u8_m1, false, &unfit), RG_UINT8);
  assert_int_equal(unfit, 1);
  assert_int_equal(rg_dtype_result(2, u8_m1, true, &unfit), RG_INT16);
  assert_int_equal(unfit, -1);
  rg_operand i8_200[2] = {{RG_INT64, true, true, 200}, {RG_INT8, false, false, 0}};
  assert_int_equal(rg_dtype_result(2, i8_200, true, NULL), RG_INT16);
  rg_operand i32_big[2] = {{RG_INT32, false, false, 0}, {RG_INT64, true, true, (int64_t)1 << 40}};
  assert_int_equal(rg_dtype_result(2, i32_big, true, NULL), RG_INT64);
  rg_operand i8_5[2] = {{RG_INT8, false, false, 0}, {RG_INT64, true, true, 5}};
  assert_int_equal(rg_dtype_result(2, i8_5, true, NULL), RG_INT8);
  rg_operand b_int[2] = {{RG_BOOL, false, false, 0}, {RG_INT64, true, true, 300}};
  assert_int_equal(rg_dtype_result(2, b_int, false, &unfit), RG_INT64);
  assert_int_equal(unfit, -1);
  rg_operand weak_only[2] = {{RG_INT64, true, true, 1}, {RG_FLOAT64, true, false, 0}};
  assert_int_equal(rg_dtype_result(2, weak_only, false, NULL), RG_FLOAT64);
}

static void test_load_store(void **st) {
  uint8_t buf[8];
  rg_store_f64(RG_INT8, buf, -3.7);
  assert_int_equal(rg_load_i64(RG_INT8, buf), -3);
  rg_store_f64(RG_INT32, buf, NAN); /* no undefined behaviour */
  assert_int_equal(rg_load_i64(RG_INT32, buf), 0);
  rg_store_f64(RG_INT64, buf, 1e300);
  assert_true(rg_load_i64(RG_INT64, buf) == INT64_MAX);
  rg_store_i64(RG_BOOL, buf, 42);
  assert_int_equal(buf[0], 1);
  rg_store_f64(RG_FLOAT32, buf, 0.1);
  assert_true(rg_load_f64(RG_FLOAT32, buf) == (double)0.1f);
}

/* ------------------------------------------------------------------ types */

static void test_types(void **st) {
  const rg_type *a = rg_type_new(RG_FLOAT64, 2, (int64_t[]){3, RG_DIM_UNKNOWN});
  const rg_type *b = rg_type_new(RG_FLOAT64, 2, (int64_t[]){3, -1});
  assert_true(rg_type_equal(a, b));
  assert_true(rg_type_hash(a) == rg_type_hash(b));
  assert_string_equal(rg_type_str(a), "float64 (3 ?)");
  assert_string_equal(rg_type_str(rg_type_scalar(RG_INT8)), "int8 ()");
  assert_ptr_equal(rg_type_scalar(RG_INT8), rg_type_scalar(RG_INT8));
  assert_null(rg_type_new(RG_FLOAT64, 2, NULL)); /* a rank without its sizes */
  assert_null(rg_type_new(RG_FLOAT64, -1, NULL));
  const rg_type *c = rg_type_new(RG_FLOAT64, 2, (int64_t[]){3, 4});
  assert_true(rg_type_is_subtype(c, a));
  assert_false(rg_type_is_subtype(a, c));
  assert_false(rg_type_equal(a, rg_type_with_dtype(a, RG_FLOAT32)));
  const rg_type *g = rg_type_on_device(a, RG_DEVICE_CUDA(0));
  assert_string_equal(rg_type_str(g), "float64 (3 ?) cuda:0");
  assert_false(rg_type_equal(a, g));
  assert_false(rg_type_is_subtype(g, a));
  /* a host value may stand for one on a device (the linker copies it),
   * not the other way, nor across devices */
  assert_true(rg_type_stands_for(c, g));
  assert_true(rg_type_stands_for(a, g));
  assert_false(rg_type_stands_for(g, c));
  assert_false(rg_type_stands_for(g, rg_type_on_device(a, RG_DEVICE_MIRROR)));
  assert_false(rg_type_stands_for(a, rg_type_on_device(c, RG_DEVICE_CUDA(0))));
  /* exactly the type, or the same on the host */
  assert_true(rg_type_equal_or_host(a, g));
  assert_true(rg_type_equal_or_host(g, g));
  assert_false(rg_type_equal_or_host(c, g)); /* (3 4) is more precise than (3 ?): not equal */
  assert_false(rg_type_equal_or_host(g, a));
  assert_false(rg_type_equal_or_host(rg_type_on_device(a, RG_DEVICE_MIRROR), g));
  /* devices that cannot exist */
  assert_null(rg_type_on_device(a, RG_DEVICE_MIRROR - 1));
  assert_null(rg_type_on_device(a, RG_DEVICE_CUDA(RG_MAX_CUDA_DEVICES)));
  assert_non_null(rg_type_on_device(a, RG_DEVICE_CUDA(RG_MAX_CUDA_DEVICES - 1)));
  assert_true(rg_type_broadcastable(rg_type_new(RG_BOOL, 2, (int64_t[]){1, 5}), 0));
  assert_false(rg_type_broadcastable(a, 1));
  assert_int_equal(rg_type_numel(c), 12);
  assert_int_equal(rg_type_numel(a), -1);
  /* invalid arguments */
  assert_null(rg_type_new(RG_NDTYPES, 0, NULL));
  assert_null(rg_type_new(RG_INT8, RG_MAX_NDIM + 1, NULL));
  assert_null(rg_type_new(RG_INT8, 1, (int64_t[]){-2}));
}

/* ------------------------------------------------------------------ tensors */

static void test_tensor_new_and_access(void **st) {
  rg_tensor *t = rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){2, 3});
  assert_non_null(t);
  assert_int_equal(rg_tensor_numel(t), 6);
  assert_true(rg_tensor_is_c_contiguous(t));
  assert_false(rg_tensor_is_f_contiguous(t));
  assert_int_equal(t->strides[0], 24);
  for (int i = 0; i < 6; i++) rg_tensor_set_f64(t, i, i + 0.5);
  assert_true(rg_tensor_get_f64(t, 4) == 4.5);
  assert_true(*(double *)rg_tensor_at(t, (int64_t[]){1, 2}) == 5.5);
  assert_string_equal(tu_tensor_text(t), "float64 (2 3) [[0.5 1.5 2.5] [3.5 4.5 5.5]]");
  /* elements outside the tensor read NaN / 0 and write nothing */
  assert_true(isnan(rg_tensor_get_f64(t, 6)) && isnan(rg_tensor_get_f64(t, -1)) && rg_tensor_get_i64(t, 6) == 0);
  rg_tensor_set_f64(t, -1, 9), rg_tensor_set_i64(t, 6, 9);
  assert_string_equal(tu_tensor_text(t), "float64 (2 3) [[0.5 1.5 2.5] [3.5 4.5 5.5]]");
  rg_tensor *none = rg_tensor_new(RG_FLOAT64, 2, (int64_t[]){0, 5});
  assert_true(isnan(rg_tensor_get_f64(none, 0)));
  rg_tensor_free(none);
  assert_int_equal(rg_opcode_family((rg_opcode)1000), RG_FAM_OPAQUE);
  rg_tensor_free(t);
  assert_null(rg_tensor_new(RG_INT8, 1, (int64_t[]){-1}));
  assert_null(rg_tensor_new(RG_INT64, 2, (int64_t[]){INT64_MAX / 2, 4}));
  assert_null(rg_tensor_new(RG_NDTYPES, 0, NULL));
  rg_tensor_free(NULL);
}

static void test_tensor_views_share_storage(void **st) {
  int32_t data[6] = {1, 2, 3, 4, 5, 6};
  rg_tensor *t = rg_tensor_from_data(RG_INT32, 2, (int64_t[]){2, 3}, data);
  rg_tensor *tt = rg_tensor_permute(t, (int[]){1, 0});
  assert_non_null(tt);
  assert_int_equal(rg_storage_refcount(t), 2);
  assert_true(rg_tensor_is_f_contiguous(tt));
  assert_int_equal(rg_tensor_get_i64(tt, 1), 4); /* tt[0][1] = t[1][0] */
  rg_tensor_set_i64(tt, 0, 100);
  assert_int_equal(rg_tensor_get_i64(t, 0), 100);
  /* a row view with a negative stride: t[1, ::-1] */
  rg_tensor *rv = rg_tensor_view(t, 1, (int64_t[]){3}, (int64_t[]){-4}, 5 * 4);
  assert_non_null(rv);
  assert_int_equal(rg_tensor_get_i64(rv, 0), 6);
  assert_int_equal(rg_tensor_get_i64(rv, 2), 4);
  /* out of bounds views are refused */
  assert_null(rg_tensor_view(t, 1, (int64_t[]){7}, (int64_t[]){4}, 0));
  assert_null(rg_tensor_view(t, 1, (int64_t[]){2}, (int64_t[]){-4}, 0));
  /* strides and offsets whose byte ranges pass 64 bits are refused too */
  assert_null(rg_tensor_view(t, 1, (int64_t[]){4}, (int64_t[]){INT64_MAX}, 0));
  assert_null(rg_tensor_view(t, 1, (int64_t[]){3}, (int64_t[]){INT64_MAX / 2}, 0));
  assert_null(rg_tensor_view(t, 2, (int64_t[]){2, 2}, (int64_t[]){INT64_MAX / 2, INT64_MAX / 2}, 0));
  assert_null(rg_tensor_view(t, 1, (int64_t[]){1}, (int64_t[]){4}, INT64_MAX));
  rg_tensor *ev = rg_tensor_view(t, 2, (int64_t[]){0, 3}, (int64_t[]){8, INT64_MAX}, 0); /* empty: reads nothing */
  assert_non_null(ev);
  rg_tensor_free(ev);
  /* a broadcast view (stride 0) */
  rg_tensor *bv = rg_tensor_view(t, 2, (int64_t[]){4, 3}, (int64_t[]){0, 4}, 0);
  assert_non_null(bv);
  assert_int_equal(rg_tensor_get_i64(bv, 9), 100);
  rg_tensor *c = rg_tensor_copy(tt);
  assert_true(rg_tensor_is_c_contiguous(c));
  assert_int_equal(rg_storage_refcount(c), 1);
  assert_true(rg_tensor_equal(c, tt));
  int32_t want[6] = {100, 4, 2, 5, 3, 6};
  assert_memory_equal(c->data, want, sizeof want);
  rg_tensor_free(t);
  assert_int_equal(rg_storage_refcount(tt), 3);
  rg_tensor_free(tt);
  rg_tensor_free(rv);
  rg_tensor_free(bv);
  rg_tensor_free(c);
}

static int released;
static void on_release(void *base, void *ud) { released += *(int *)ud; }

/* rg_tensor_overlap: views of one array share bytes when their elements
 * meet, not when their byte ranges merely interleave. */
static void test_tensor_overlap(void **st) {
  (void)st;
  int64_t s[2] = {4, 3}, four = 4, six = 6;
  rg_tensor *m = rg_tensor_new(RG_FLOAT64, 2, s), *other = rg_tensor_new(RG_FLOAT64, 2, s);
  rg_tensor *c0 = rg_tensor_view(m, 1, &four, (int64_t[]){24}, 0), *c1 = rg_tensor_view(m, 1, &four, (int64_t[]){24}, 8);
  rg_tensor *mt = rg_tensor_view(m, 2, (int64_t[]){3, 4}, (int64_t[]){8, 24}, 0);
  rg_tensor *even = rg_tensor_view(m, 1, &six, (int64_t[]){16}, 0), *odd = rg_tensor_view(m, 1, &six, (int64_t[]){16}, 8);
  rg_tensor *row1 = rg_tensor_view(m, 1, (int64_t[]){3}, (int64_t[]){8}, 24);
  rg_tensor *rev1 = rg_tensor_view(m, 1, (int64_t[]){3}, (int64_t[]){-8}, 40);
  rg_tensor *empty = rg_tensor_view(m, 1, (int64_t[]){0}, (int64_t[]){8}, 0);
  assert_true(rg_tensor_overlap(m, m) && rg_tensor_overlap(m, mt) && rg_tensor_overlap(c0, m));
  assert_false(rg_tensor_overlap(c0, c1));
  assert_false(rg_tensor_overlap(even, odd));
  assert_true(rg_tensor_overlap(even, c0)); /* element 0 */
  assert_true(rg_tensor_overlap(row1, rev1));
  assert_true(rg_tensor_overlap(c1, row1)); /* element (1, 1) */
  assert_true(rg_tensor_overlap(c0, row1)); /* element (1, 0) */
  assert_false(rg_tensor_overlap(m, other));
  assert_false(rg_tensor_overlap(m, empty));
  rg_tensor *ts[] = {m, other, c0, c1, mt, even, odd, row1, rev1, empty};
  for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) rg_tensor_free(ts[k]);
  /* large views are compared row by row where their rows are contiguous:
   * the two halves of a 2048 x 2048 matrix (4 M elements) share nothing,
   * a half and the middle columns do */
  rg_tensor *big = rg_tensor_new(RG_FLOAT32, 2, (int64_t[]){2048, 2048});
  int64_t hs[2] = {2048, 1024}, st2[2] = {8192, 4};
  rg_tensor *left = rg_tensor_view(big, 2, hs, st2, 0), *right = rg_tensor_view(big, 2, hs, st2, 4096);
  rg_tensor *mid = rg_tensor_view(big, 2, hs, st2, 2048);
  assert_false(rg_tensor_overlap(left, right));
  assert_true(rg_tensor_overlap(left, mid) && rg_tensor_overlap(mid, right));
  rg_tensor *left_t = rg_tensor_view(big, 2, (int64_t[]){1024, 2048}, (int64_t[]){4, 8192}, 0); /* left, transposed */
  /* without contiguous rows, too many elements to compare one by one:
   * the answer errs on the safe side */
  assert_true(rg_tensor_overlap(left_t, right));
  rg_tensor_free(left), rg_tensor_free(right), rg_tensor_free(mid), rg_tensor_free(left_t), rg_tensor_free(big);
}

static void test_tensor_wrap_and_cast(void **st) {
  static double ext[4] = {1.5, -2.5, 3.0, NAN};
  int one = 1;
  released = 0;
  rg_tensor *t = rg_tensor_wrap(RG_FLOAT64, 1, (int64_t[]){4}, NULL, ext, sizeof ext, on_release, &one);
  rg_tensor *v = rg_tensor_ref(t);
  rg_tensor_free(t);
  assert_int_equal(released, 0);
  rg_tensor *i = rg_tensor_cast(v, RG_INT16);
  assert_int_equal(rg_tensor_get_i64(i, 1), -2);
  assert_int_equal(rg_tensor_get_i64(i, 3), 0);
  rg_tensor *w = rg_tensor_copy(v);
  assert_true(rg_tensor_equal(v, w)); /* NaN in the same place */
  assert_true(rg_storage_is_external(v));
  assert_false(rg_storage_is_external(w));
  assert_true(rg_tensor_allclose(v, w, 0, 0));
  rg_tensor_set_f64(w, 0, 1.5 + 1e-12);
  assert_false(rg_tensor_equal(v, w));
  assert_true(rg_tensor_allclose(v, w, 1e-9, 0));
  rg_tensor_free(v);
  assert_int_equal(released, 1);
  rg_tensor_free(i);
  rg_tensor_free(w);
  /* wrapping memory too small for the shape is refused, also where the
   * strides' byte range passes 64 bits */
  assert_null(rg_tensor_wrap(RG_FLOAT64, 1, (int64_t[]){5}, NULL, ext, sizeof ext, NULL, NULL));
  assert_null(rg_tensor_wrap(RG_FLOAT64, 1, (int64_t[]){4}, (int64_t[]){INT64_MAX}, ext, sizeof ext, NULL, NULL));
  assert_null(rg_tensor_wrap(RG_FLOAT64, 1, (int64_t[]){3}, (int64_t[]){INT64_MIN / 4}, ext, sizeof ext, NULL, NULL));
}

static void test_tensor_print_shapes(void **st) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rg_tensor *s = rg_tensor_scalar_f64(RG_BOOL, 1);
  rg_tensor *e = rg_tensor_new(RG_INT8, 2, (int64_t[]){2, 0});
  rg_tensor *c = rg_tensor_new(RG_FLOAT32, 3, (int64_t[]){2, 1, 2});
  rg_tensor_set_f64(c, 3, 0.1);
  rg_tensor_fprint(f, s);
  fputc('|', f);
  rg_tensor_fprint(f, e);
  fputc('|', f);
  rg_tensor_fprint(f, c);
  fclose(f);
  assert_string_equal(buf, "bool () #t|int8 (2 0) [[]]|float32 (2 1 2) [[[0.0 0.0]] [[0.0 0.1]]]");
  free(buf);
  rg_tensor_free(s);
  rg_tensor_free(e);
  rg_tensor_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_names),
      cmocka_unit_test(test_dtype_promotion_table),
      cmocka_unit_test(test_dtype_result_weak_literals),
      cmocka_unit_test(test_load_store),
      cmocka_unit_test(test_types),
      cmocka_unit_test(test_tensor_new_and_access),
      cmocka_unit_test(test_tensor_views_share_storage),
      cmocka_unit_test(test_tensor_overlap),
      cmocka_unit_test(test_tensor_wrap_and_cast),
      cmocka_unit_test(test_tensor_print_shapes),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
