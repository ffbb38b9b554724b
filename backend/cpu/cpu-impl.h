/*
 * cpu-impl.h — what the CPU kernel files share: dtype lists for generating
 * type-specialised loops, strided iteration plans, cast loops, and the
 * kernels' entry points (listed in kernels.c).
 *
 * Loops.  Every computation ends in a typed inner loop
 *
 *     void loop(char **p, const int64_t *s, int64_t n, void *aux)
 *
 * over n elements of each operand k, starting at p[k], s[k] bytes apart
 * (operand 0 is the one written).  A loop is specialised by op and dtype
 * with macros; it tests the strides once and runs a contiguous (or
 * contiguous-with-scalar) branch that the compiler vectorises, or a strided
 * one.  There is one indirect call per row of elements, never one per
 * element.
 *
 * Plans.  An rgbc_plan walks operands that share one logical shape (with
 * zero strides where an operand is broadcast) as rows for a loop: size-1
 * dimensions are dropped, dimensions are ordered by the memory order of one
 * operand, and adjacent dimensions that every operand steps through
 * uniformly are merged, so a contiguous tensor of any rank is one row.  A
 * plan can run any sub-range of its elements in C order of the merged
 * shape, which is how rows are shared among threads.
 */
#ifndef RELGRAPH_BACKEND_CPU_IMPL_H
#define RELGRAPH_BACKEND_CPU_IMPL_H

#include "backend/backend-impl.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ dtypes */

/* (suffix, C type, dtype) of every dtype; two copies so that lists can be
 * nested (a macro does not expand inside itself). */
#define RGBC_TYPES(X)                                                                    \
  X(b, uint8_t, RG_BOOL) X(i8, int8_t, RG_INT8) X(i16, int16_t, RG_INT16)                \
  X(i32, int32_t, RG_INT32) X(i64, int64_t, RG_INT64) X(u8, uint8_t, RG_UINT8)           \
  X(f32, float, RG_FLOAT32) X(f64, double, RG_FLOAT64)
#define RGBC_TYPES2(X)                                                                   \
  X(b, uint8_t, RG_BOOL) X(i8, int8_t, RG_INT8) X(i16, int16_t, RG_INT16)                \
  X(i32, int32_t, RG_INT32) X(i64, int64_t, RG_INT64) X(u8, uint8_t, RG_UINT8)           \
  X(f32, float, RG_FLOAT32) X(f64, double, RG_FLOAT64)

/* Integer dtypes (not bool) with an unsigned type wide enough that
 * arithmetic on it never overflows a C int: wrapping arithmetic is done
 * there and converted back (GCC defines the conversion as modulo). */
#define RGBC_INTS(X)                                                                     \
  X(i8, int8_t, RG_INT8, uint32_t) X(i16, int16_t, RG_INT16, uint32_t)                   \
  X(i32, int32_t, RG_INT32, uint32_t) X(i64, int64_t, RG_INT64, uint64_t)                \
  X(u8, uint8_t, RG_UINT8, uint32_t)
#define RGBC_FLOATS(X) X(f32, float, RG_FLOAT32, float) X(f64, double, RG_FLOAT64, double)

/* Transcendental functions over contiguous arrays (vmath.c, glibc's
 * vector math: within 4 ULP); y may be x. */
#define RGBC_VMATH(X) X(exp) X(log) X(log1p) X(expm1) X(tanh) X(erf) X(sin) X(cos) X(sigmoid) X(softplus)
#define RGBC_VDECL(name)                                            \
  void rgbc_v##name##_f32(const float *x, float *y, int64_t n);     \
  void rgbc_v##name##_f64(const double *x, double *y, int64_t n);
RGBC_VMATH(RGBC_VDECL)
#undef RGBC_VDECL

/* "These iterations are independent": GCC's ivdep, clang's equivalent. */
#if defined(__clang__)
#define RGBC_IVDEP /* clang vectorises these loops with run-time checks */
#else
#define RGBC_IVDEP _Pragma("GCC ivdep")
#endif

/* libm by float suffix: RGBC_FN(f32, exp) is expf. */
#define RGBC_FN(sfx, name) RGBC_FN_##sfx(name)
#define RGBC_FN_f32(name) name##f
#define RGBC_FN_f64(name) name

/* Scalar element holder big enough for every dtype. */
typedef union rgbc_scalar {
  double f64;
  float f32;
  int64_t i64;
  uint8_t u8;
  char bytes[8];
} rgbc_scalar;

/* Element size of a valid dtype (a table lookup: kernels ask per call). */
#define RGBC_SIZE_ENTRY(S, T, D) [D] = sizeof(T),
static inline int64_t rgbc_size(rg_dtype dt) {
  static const uint8_t size[RG_NDTYPES] = {RGBC_TYPES(RGBC_SIZE_ENTRY)};
  return size[dt];
}

/* Loops are compiled for the baseline instruction set and, on x86-64 with
 * GCC, also for AVX2 and AVX-512 (x86-64-v4), chosen once at load time by
 * the processor (function multiversioning), unless the whole build already
 * targets AVX2 or better (-march=native, RG_NATIVE).  Floating-point
 * contraction is off for these files, so every version computes the same
 * results. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX2__) && \
    !defined(RG_NO_CLONES)
#define RGBC_SIMD __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define RGBC_SIMD
#endif

/* ------------------------------------------------------------------ loops and plans */

#define RGBC_MAXOPS 4

typedef void (*rgbc_loop)(char **p, const int64_t *s, int64_t n, void *aux);

typedef struct rgbc_plan {
  int nop;                                /* operands, at most RGBC_MAXOPS */
  int ndim;                               /* >= 1 after merging */
  int64_t total;                          /* elements: product of shape */
  int64_t shape[RG_MAX_NDIM];             /* merged shape, inner dimension last */
  int64_t st[RGBC_MAXOPS][RG_MAX_NDIM];   /* byte strides per operand and dimension */
  char *base[RGBC_MAXOPS];                /* element (0, ..., 0) of each operand */
} rgbc_plan;

/* Plans nop operands over `shape`: strides[k] are operand k's strides
 * (zero where broadcast).  Dimensions are ordered by decreasing |stride|
 * of operand `key` (stable; key < 0 keeps the given order). */
void rgbc_plan_init(rgbc_plan *pl, int nop, int ndim, const int64_t *shape, char *const *base,
                    const int64_t *const *strides, int key);
/* Runs fn over elements [lo, hi) of the plan in C order of the merged shape. */
void rgbc_plan_run(const rgbc_plan *pl, int64_t lo, int64_t hi, rgbc_loop fn, void *aux);
/* Runs the whole plan, split among the function's threads when it has at
 * least 2 * grain elements. */
void rgbc_plan_run_parallel(rgb_exec *x, const rgbc_plan *pl, rgbc_loop fn, void *aux,
                            int64_t grain);

/* Grains (elements per parallel chunk): memory-bound loops and loops that
 * spend tens of cycles per element. */
#define RGBC_GRAIN_CHEAP (1 << 15)
#define RGBC_GRAIN_COSTLY (1 << 11)

/* ------------------------------------------------------------------ broadcasting */

/* The broadcast shape of n inputs under the static rule of graph.h: a
 * dimension stretches only where its static size is 1.  Returns 0, or an
 * error naming the shapes. */
int rgbc_broadcast_shape(rgb_exec *x, int n, const rg_tensor *const *t, const rgb_vtype *vt,
                         int *ndim, int64_t *shape);
/* t's strides over a target shape (t's dimensions aligned on the right),
 * zero where t is broadcast; t must fit (checked by rgbc_broadcast_shape
 * or the caller). */
void rgbc_broadcast_strides(const rg_tensor *t, int ndim, const int64_t *shape, int64_t *strides);
/* Whether t can be broadcast to shape with the static rule (vt: t's static
 * type, NULL to let any size-1 dimension stretch). */
bool rgbc_fits(const rg_tensor *t, const rgb_vtype *vt, int ndim, const int64_t *shape);
/* The shape of an alloc (its inputs 1.., checked non-negative, with the
 * value fitting it) or alloc_empty (its inputs), read from host scalars. */
int rgbc_alloc_shape(rgb_exec *x, int64_t *shape);
/* reshape, flatten and join with the copy a backend makes between two of
 * its buffers (dst and src of one shape, any strides): the CPU's is
 * rgbc_copy_host; a device backend passes its own, so the shape rules
 * stay defined once. */
typedef int (*rgbc_copy_fn)(rgb_exec *x, rg_tensor *dst, const rg_tensor *src);
int rgbc_copy_host(rgb_exec *x, rg_tensor *dst, const rg_tensor *src);
int rgbc_reshape_with(rgb_exec *x, rgbc_copy_fn copy);
int rgbc_flatten_with(rgb_exec *x, rgbc_copy_fn copy);
int rgbc_join_with(rgb_exec *x, rgbc_copy_fn copy);
/* A Scan run on the node's backend (backend/cpu/scan.c): its traces in the
 * node's buffer type, copied with `copy` (NULL or a host node: the CPU's
 * own executor, rgb_cpu_scan). */
int rgbc_scan_with(rgb_exec *x, rgbc_copy_fn copy);
/* set_subtensor and inc_subtensor with a device's copy (dst = src
 * broadcast) and addition (dst += src broadcast), both NULL on the host:
 * the index rules (backend/cpu/shape.c) stay defined once. */
int rgbc_set_subtensor_with(rgb_exec *x, rgbc_copy_fn copy, rgbc_copy_fn add);
/* The output of gemm, gemv and ger: input 0 itself when the node works in
 * place on it, its storage is unshared and BLAS can write it; else a new
 * tensor, holding a copy of input 0 (made by fn) when `copy`. */
rg_tensor *rgbc_blas_output(rgb_exec *x, bool copy, rgbc_copy_fn fn);
/* dot's output for its inputs a (m, k) or (k) and b (k, n) or (k) (the
 * matrix sizes in *m, *k, *n, 1 for a vector), or NULL with an error
 * recorded ("shapes (2 3) and (4) are not aligned"). */
rg_tensor *rgbc_dot_output(rgb_exec *x, int64_t *m, int64_t *k, int64_t *n);
/* batched_dot's output for its inputs a (B, m, k) or (B, k) and b (B, k, n)
 * or (B, k) (the sizes in *nb, *m, *k, *n, 1 for a vector), or NULL with
 * an error recorded. */
rg_tensor *rgbc_batched_dot_output(rgb_exec *x, int64_t *nb, int64_t *m, int64_t *k, int64_t *n);
/* The view of t[i] (t's leading dimension dropped) in *view, sharing t's
 * storage without a reference of its own (valid while t is). */
void rgbc_batch_slice(const rg_tensor *t, int64_t i, rg_tensor *view);

/* "(3 4)" into buf (for messages); returns buf. */

/* ------------------------------------------------------------------ casts and copies */

/* The loop converting operand 1 (dtype from) into operand 0 (dtype to),
 * element by element as NumPy does on x86-64 (see cast.c). */
rgbc_loop rgbc_cast_loop(rg_dtype from, rg_dtype to);
/* Converts one element. */
void rgbc_cast_one(rg_dtype from, const void *src, rg_dtype to, void *dst);
/* dst[...] = src broadcast to dst's shape (any dtypes and strides; src must
 * fit dst's shape with the static rule of its type vt, or NULL for any
 * size-1 dimension).  Returns 0 or an error. */
int rgbc_assign(rgb_exec *x, rg_tensor *dst, const rg_tensor *src, const rgb_vtype *vt);
/* A new C-contiguous tensor of dtype dt with src's values (a reference to
 * src itself when it already is one).  NULL with an error recorded. */
rg_tensor *rgbc_contiguous(rgb_exec *x, const rg_tensor *src, rg_dtype dt);
/* How BLAS addresses an operand of dtype dt without a copy (CBLAS and
 * cuBLAS alike; false: it must be copied first).  A 2-D matrix: row-major
 * with leading dimension *ld, or stored transposed (*trans: its columns
 * are contiguous).  A vector: any non-zero element stride *inc that fits
 * an int.  A BLAS output (gemm's z, gemv's y, ger's A) is writable in
 * place when its inner stride is one element; its leading dimension is
 * rgbc_blas_row_ld. */
bool rgbc_blas_matrix(const rg_tensor *t, rg_dtype dt, int64_t *ld, bool *trans);
bool rgbc_blas_vector(const rg_tensor *t, rg_dtype dt, int64_t *inc);
bool rgbc_blas_writable(const rg_tensor *z);
int64_t rgbc_blas_row_ld(const rg_tensor *t);
/* The output tensor for an op that overwrites a copy of input k: input k
 * itself when `allow`, the node works in place on it, its storage is
 * unshared and it has the output's dtype; else a fresh output holding a
 * copy. */
rg_tensor *rgbc_output_like_input(rgb_exec *x, int j, int k, bool allow, bool *in_place);
/* The same with a device's copy (NULL: the host's). */
rg_tensor *rgbc_output_like_input_with(rgb_exec *x, int j, int k, bool allow, bool *in_place, rgbc_copy_fn copy);

/* out = a op b for an elementwise binary op computing in out's dtype
 * (add, mul, ...), a and b broadcast to out's shape (size-1 dimensions
 * stretch) and converted as needed. */
void rgbc_binary(rgb_exec *x, rg_opcode op, rg_tensor *out, const rg_tensor *a,
                 const rg_tensor *b);

/* How an elementwise node computes, for kernels that run it on blocks
 * (the composite interpreter): its typed loop and the dtype the loop reads
 * each input in.  copy: the loop converts the last input (identity, cast,
 * second, ...) and reads only it; nary: add or mul of more than two
 * inputs, folded pairwise with the binary loop.  The loop's aux is an
 * rgbc_status. */
typedef struct rgbc_ew_info {
  rgbc_loop loop;
  rg_dtype in[RGBC_MAXOPS]; /* copy and nary: in[0] only */
  bool copy, nary, costly;
} rgbc_ew_info;
typedef struct rgbc_status {
  int bad; /* 1: an integer raised to a negative power */
} rgbc_status;
/* Fills info for node n; returns 0, or an error message (static string). */
const char *rgbc_ew_info_of(const rgb_node *n, rgbc_ew_info *info);
/* The error of a loop status (0 when fine). */
int rgbc_status_error(rgb_exec *x, const rgbc_status *st);

/* Reads a scalar input as int64 / double (any dtype). */
int64_t rgbc_scalar_i64(const rg_tensor *t);
double rgbc_scalar_f64(const rg_tensor *t);

/* ------------------------------------------------------------------ scalar semantics as text */

/* scalar-expr.c: the C expression of an elementwise op computing in dtype
 * dt over x (, y, z) (arity 1-3), from scalar-float.h and scalar-int.h;
 * NULL when the op has none for that dtype and arity (transcendental
 * functions have their own; copies and integer pow have none). */
const char *rgbc_expr(rg_opcode c, rg_dtype dt, int arity);
/* The scalar form of a transcendental function of a float dtype, or NULL. */
const char *rgbc_transcendental_expr(rg_opcode c, rg_dtype dt);
/* The definitions of the helper functions the expressions of dtype dt
 * call (the float helpers for float32 / float64, the integer helpers for
 * every other dtype), as C text. */
const char *rgbc_helpers_text(rg_dtype dt);
/* A double as a C (and CUDA C++) literal that reads back exactly: a hex
 * float, and for infinities and NaN the division that makes them (printf
 * writes `inf` and `nan`, which no compiler reads). */
typedef struct rg_strbuf rg_strbuf; /* base/base.h */
void rgbc_put_double(rg_strbuf *b, double v);

/* ------------------------------------------------------------------ generated kernels */

/* codegen.c: a kernel generated for a composite's inner program whose
 * values are all of dtype dt (float32 or float64): out[k], in[j] hold m <=
 * RGBC_CODEGEN_BLOCK contiguous elements; vf is rgbc_codegen_vfns(dt ==
 * RG_FLOAT32).  NULL when the program has ops or dtypes it does not
 * generate, generation is off (RELGRAPH_CODEGEN=0) or no compiler works;
 * the interpreter runs it then. */
#define RGBC_CODEGEN_BLOCK 1024
typedef void (*rgbc_kernel_fn)(void *const *out, const void *const *in, int64_t m, const void *vf);
/* A kernel and its twin writing with streaming stores (NULL: none, for
 * kernels with vector functions). */
typedef struct rgbc_kernels { rgbc_kernel_fn plain, stream; } rgbc_kernels;
rgbc_kernels rgbc_codegen(const struct rgb_program *p, rg_dtype dt, const rgb_codegen *cg);
/* stream.c: n bytes from a cache-hot block to dst with stores that bypass
 * the cache; rgbc_stream_fence before another thread reads them.  Worth it
 * for outputs of RGBC_STREAM_BYTES and more (measured, stream.c). */
#define RGBC_STREAM_BYTES ((size_t)4 << 20)
void rgbc_stream_store(void *dst, const void *src, size_t n);
void rgbc_stream_fence(void);
/* The vector functions vmath.c runs on this CPU: 2 AVX-512, 1 AVX2, 0 SSE. */
int rgbc_vmath_width(void);
/* Generates (or loads) a composite node's kernel into its memo, so that
 * compiling a function, not its first call, pays for it (inner.c). */
void rgbc_composite_prepare(const rgb_node *n);
const void *rgbc_codegen_vfns(bool f32);
/* The source the generator writes for p (rg_free it), or NULL (tests). */
char *rgbc_codegen_source(const struct rgb_program *p, rg_dtype dt);

/* ------------------------------------------------------------------ kernels */

/* elemwise.c */
int rgb_cpu_elemwise(rgb_exec *x);
/* reduce.c */
int rgb_cpu_reduce(rgb_exec *x);
/* Reductions with no identity (max, min, argmax, argmin): over zero
 * elements they fail, every backend with the one message of
 * rgbc_empty_reduce_error. */
bool rgbc_reduce_needs_elements(rg_opcode code);
int rgbc_empty_reduce_error(rgb_exec *x);
int rgb_cpu_softmax(rgb_exec *x);
/* blas.c */
int rgb_cpu_dot(rgb_exec *x);
int rgb_cpu_outer(rgb_exec *x);
int rgb_cpu_gemm(rgb_exec *x);
int rgb_cpu_gemv(rgb_exec *x);
int rgb_cpu_ger(rgb_exec *x);
int rgb_cpu_batched_dot(rgb_exec *x);
/* shape.c */
int rgb_cpu_dimshuffle(rgb_exec *x);
int rgb_cpu_reshape(rgb_exec *x);
int rgb_cpu_flatten(rgb_exec *x);
int rgb_cpu_shape(rgb_exec *x);
int rgb_cpu_shape_i(rgb_exec *x);
int rgb_cpu_alloc(rgb_exec *x);
int rgb_cpu_alloc_empty(rgb_exec *x);
int rgb_cpu_make_vector(rgb_exec *x);
int rgb_cpu_join(rgb_exec *x);
int rgb_cpu_split(rgb_exec *x);
int rgb_cpu_subtensor(rgb_exec *x);
int rgb_cpu_set_subtensor(rgb_exec *x); /* inc_subtensor and set_subtensor */
int rgb_cpu_arange(rgb_exec *x);
/* inner.c */
int rgb_cpu_composite(rgb_exec *x);
int rgb_cpu_op_from_graph(rgb_exec *x);
int rgb_cpu_scan(rgb_exec *x);     /* scan.c */

#endif
