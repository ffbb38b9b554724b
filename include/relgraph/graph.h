/*
 * relgraph/graph.h — the tensor graph IR: dtypes, tensor types, host
 * tensors, ops, variables and apply nodes, FunctionGraphs, the bridge to
 * kanren terms, graph files and printing.
 *
 * The model follows Aesara/PyTensor.  A *variable* has a tensor type and is
 * either an input (no owner), a constant (no owner, carries a value) or an
 * output of an *apply node*, which applies an *op* to input variables.  Ops
 * are values: an op class (see rg_opcode) plus parameters.  Ops describe
 * computations; the backends compute them.
 *
 * Memory.  Two worlds, on purpose:
 *   - Symbolic objects (types, ops, variables, nodes, FunctionGraphs, and the
 *     values of graph constants) are owned by the garbage collector, like
 *     kanren terms.  A constant's value lives in collected, pointer-free
 *     memory and is immutable; rg_constant() copies a tensor in, and
 *     rg_constant_to_tensor() copies it out.
 *   - Runtime host tensors (rg_tensor) are owned manually: malloc'd, with
 *     reference-counted storage so that views share data, freed with
 *     rg_tensor_free().  A linked program (backend) holds no GC pointer, so
 *     nothing it touches at run time may be collected memory.
 *
 * Errors.  Graph construction is one call per op (rg_add(a, b), ...).  Every
 * variable remembers the rg_ctx it was made in.  An invalid construction
 * (type or shape mismatch, bad parameter) records a message in that context
 * and returns NULL; a NULL argument makes the call return NULL without a new
 * message, so a chain of constructions can be checked once at the end
 * (sticky errors, as in cairo).  rg_make_node() is the checked general form.
 *
 * Broadcasting is NumPy's (shapes aligned on the right, missing leading
 * dimensions added), decided statically as in PyTensor: a dimension
 * broadcasts only when its static size is 1.  At run time, dimensions of
 * unknown static size must agree exactly; a backend reports a size-1
 * dimension of unknown static size that would need broadcasting as an
 * error.  This keeps shape inference exact and rewrites sound.
 *
 * Dtype promotion is NumPy 2's (NEP 50), see rg_dtype_promote() and
 * docs/graph-format.md: literal scalars (rg_scalar_int, rg_scalar_float,
 * numbers in graph files and kanren terms) are *weak*: they adopt the dtype
 * of the tensors they meet when their kind (bool < integer < float) is not
 * higher, so `x_float32 * 2.0` stays float32 and `x_int8 + 1` stays int8.
 *
 * Threads.  Types and ops are immutable values: any thread may make, share
 * and compare them at any time (their lazily made caches are published
 * safely).  A graph under construction records its errors in the context
 * of its variables, so one context's graphs are built by one thread at a
 * time.  A FunctionGraph and the nodes and variables it holds are used by
 * one thread at a time (even reads: walks mark nodes); graphs that share
 * no node may be used from different threads at once.  Tensors are
 * immutable in practice and their reference counts are atomic: any thread
 * may share or free them.
 */
#ifndef RELGRAPH_GRAPH_H
#define RELGRAPH_GRAPH_H

#include "relgraph/kanren.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library exports what this header declares, nothing else
 * (everything else is built with hidden visibility). */
#pragma GCC visibility push(default)

/* ------------------------------------------------------------------ dtypes */

typedef enum rg_dtype {
  RG_BOOL, RG_INT8, RG_INT16, RG_INT32, RG_INT64, RG_UINT8, RG_FLOAT32, RG_FLOAT64,
  RG_NDTYPES
} rg_dtype;

const char *rg_dtype_name(rg_dtype dt);        /* "float64"; "?" if invalid */
rg_term rg_dtype_symbol(rg_dtype dt);          /* the name as an interned symbol */
int rg_dtype_from_name(const char *name);      /* -1 if unknown */
size_t rg_dtype_size(rg_dtype dt);             /* bytes per element */
bool rg_dtype_is_float(rg_dtype dt);
bool rg_dtype_is_int(rg_dtype dt);             /* signed or unsigned integer, not bool */
bool rg_dtype_is_signed(rg_dtype dt);          /* int8..int64, floats */
/* NumPy's promotion of two dtypes (np.result_type on arrays). */
rg_dtype rg_dtype_promote(rg_dtype a, rg_dtype b);
/* Whether NumPy's "safe" casting allows a -> b (no overflow; int64 ->
 * float64 is safe but rounds integers past 2^53). */
bool rg_dtype_can_cast(rg_dtype from, rg_dtype to);
/* Whether every value of a is exactly a value of b, so that casting there
 * and back is the identity (safe casting less int64 -> float64). */
bool rg_dtype_exact_cast(rg_dtype from, rg_dtype to);
/* Whether the integer v is a value of dt (bool: 0 or 1; floats: any). */
bool rg_dtype_holds(rg_dtype dt, int64_t v);
/* An operand of an elementwise operation as promotion sees it: its dtype,
 * whether it is a weak literal (RG_VAR_WEAK), and for an integer literal
 * its value (`known`). */
typedef struct rg_operand {
  rg_dtype dtype;
  bool weak;
  bool known;
  int64_t value;
} rg_operand;
/* The dtype NumPy 2 computes an elementwise operation over in[0..n) in
 * (NEP 50, above).  An integer literal the strong integer result cannot
 * hold: a comparison (compare) computes in the promotion with the
 * literal's smallest dtype, so `x_uint8 < -1` compares exactly, as NumPy
 * does; for any other operation the result is returned as if it fitted and
 * *unfit (when not NULL) receives the literal's index, -1 when every
 * literal fits (NumPy 2 raises OverflowError there). */
rg_dtype rg_dtype_result(int n, const rg_operand *in, bool compare, int *unfit);

/* Elements as double or int64 (conversion as C casts; bool is 0/1). */
double rg_load_f64(rg_dtype dt, const void *p);
int64_t rg_load_i64(rg_dtype dt, const void *p);
void rg_store_f64(rg_dtype dt, void *p, double v);
void rg_store_i64(rg_dtype dt, void *p, int64_t v);

/* ------------------------------------------------------------------ tensor types */

#define RG_MAX_NDIM 32
#define RG_DIM_UNKNOWN (-1)

/* Device placement: 0 is host memory, RG_DEVICE_CUDA(i) is CUDA device i,
 * RG_DEVICE_MIRROR the checking device (host memory kept in a form the CPU
 * kernels cannot read: see the mirror backend in docs/backends.md). */
typedef int32_t rg_device;
#define RG_DEVICE_HOST 0
#define RG_DEVICE_CUDA(i) ((rg_device)(1 + (i)))
#define RG_DEVICE_MIRROR ((rg_device)-1)
#define RG_MAX_CUDA_DEVICES 1024 /* cuda:0 .. cuda:1023 */
/* A device's name as graph files write it: "host", "cuda:0", "mirror". */
const char *rg_device_str(rg_device d, char *buf, size_t len);
/* Parses a device name; RG_OK, or RG_ERR_SYNTAX if s names none. */
int rg_device_parse(const char *s, rg_device *d);

/* A shape as messages and graph files write it, "(2 3 ?)" (? for a size
 * not known), in buf (at most len bytes, cut short when longer); returns
 * buf.  RG_SHAPE_STR_MAX bytes always hold one. */
#define RG_SHAPE_STR_MAX (RG_MAX_NDIM * 21 + 3)
const char *rg_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);

/* A tensor type: dtype, static shape and device.  Each dimension is a size
 * (>= 0) or RG_DIM_UNKNOWN; a dimension is broadcastable when its size is 1.
 * Types are immutable and collected; compare them with rg_type_equal(). */
typedef struct rg_type {
  rg_dtype dtype;
  int32_t ndim;
  rg_device device;
  int64_t shape[];
} rg_type;

/* NULL (with no context to report to) if ndim or a size is out of range. */
const rg_type *rg_type_new(rg_dtype dt, int ndim, const int64_t *shape);
/* t on device dev (NULL for a device that cannot exist: below the mirror,
 * above cuda:1023). */
const rg_type *rg_type_on_device(const rg_type *t, rg_device dev);
const rg_type *rg_type_scalar(rg_dtype dt);    /* ndim 0, host */
const rg_type *rg_type_with_dtype(const rg_type *t, rg_dtype dt);
bool rg_type_equal(const rg_type *a, const rg_type *b);
/* Whether a value of type `sub` is always a valid value of type `super`:
 * same dtype, ndim and device, and every dimension known in super is known
 * and equal in sub. */
bool rg_type_is_subtype(const rg_type *sub, const rg_type *super);
/* Whether a value of type t may take the place of one of type want in a
 * graph: a subtype, or a subtype but for living on the host where want
 * names a device (the linker copies a value to the device of each reader,
 * and an allocation runs where its readers run; so rewrites that make
 * host constants and allocations apply to graphs placed on a device). */
bool rg_type_stands_for(const rg_type *t, const rg_type *want);
/* The same for an exact type (an accumulator, an overwritten value): t
 * equals want, or equals it but for living on the host where want names a
 * device. */
bool rg_type_equal_or_host(const rg_type *t, const rg_type *want);
bool rg_type_broadcastable(const rg_type *t, int dim);
uint64_t rg_type_hash(const rg_type *t);
/* "float64 (? 5)"; a scalar is "float64 ()"; a device suffix " cuda:0". */
char *rg_type_str(const rg_type *t);           /* collected string */
/* Number of elements when every dimension is known, else -1. */
int64_t rg_type_numel(const rg_type *t);
/* The elements of a shape: the product of its sizes, -1 when one is not
 * known (negative) or the product overflows int64. */
int64_t rg_shape_numel(int ndim, const int64_t *shape);

/* ------------------------------------------------------------------ host tensors */

/* Reference-counted host storage shared by a tensor and its views. */
typedef struct rg_storage rg_storage;

/* A host tensor: `data` points to element (0, ..., 0); strides are in
 * bytes and may be zero or negative.  Owned manually: every rg_tensor made
 * by the functions below must be released with rg_tensor_free(); the
 * storage is freed when its last tensor is.  The struct's fields may be read
 * freely; change shape/strides/data only on a tensor you own and keep them
 * inside its storage. */
typedef struct rg_tensor {
  rg_dtype dtype;
  int32_t ndim;
  int64_t shape[RG_MAX_NDIM];
  int64_t strides[RG_MAX_NDIM];
  char *data;
  rg_storage *storage;
} rg_tensor;

/* New C-contiguous tensors.  NULL if the arguments are invalid (bad dtype,
 * ndim, negative size, byte size overflowing) or memory is exhausted. */
rg_tensor *rg_tensor_new(rg_dtype dt, int ndim, const int64_t *shape);   /* zeroed */
rg_tensor *rg_tensor_empty(rg_dtype dt, int ndim, const int64_t *shape); /* uninitialised */
/* Copies `src`, C-order elements of the given shape. */
rg_tensor *rg_tensor_from_data(rg_dtype dt, int ndim, const int64_t *shape, const void *src);
rg_tensor *rg_tensor_scalar_f64(rg_dtype dt, double v);
/* Wraps external memory: `release(base, ud)` is called when the last tensor
 * using it is freed (release may be NULL).  Strides NULL means C order. */
rg_tensor *rg_tensor_wrap(rg_dtype dt, int ndim, const int64_t *shape, const int64_t *strides,
                          void *data, size_t nbytes, void (*release)(void *base, void *ud),
                          void *ud);
/* A view sharing t's storage: element (0..0) at t->data + offset bytes.
 * NULL if any element would fall outside the storage. */
rg_tensor *rg_tensor_view(const rg_tensor *t, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset);
rg_tensor *rg_tensor_ref(const rg_tensor *t);  /* the same view, a new owner */
/* The strides that view a layout (on dimensions: sizes os, strides ost)
 * as sizes ns without moving an element, NumPy's rule for a reshape
 * without a copy: each group of old dimensions that becomes a group of new
 * ones must be contiguous within itself.  es is the stride given to new
 * trailing dimensions of size 1 and the element stride of an empty layout
 * (C strides then).  False when the reshape needs a copy.  The element
 * counts must agree. */
bool rg_reshape_strides(int on, const int64_t *os, const int64_t *ost, int nn, const int64_t *ns,
                        int64_t es, int64_t *nst);
/* A view with dimensions permuted: result dim i is t's dim perm[i]. */
rg_tensor *rg_tensor_permute(const rg_tensor *t, const int *perm);
rg_tensor *rg_tensor_copy(const rg_tensor *t); /* C-contiguous copy */
rg_tensor *rg_tensor_cast(const rg_tensor *t, rg_dtype dt); /* C-contiguous converted copy */
void rg_tensor_free(rg_tensor *t);             /* NULL is ignored */

int64_t rg_tensor_numel(const rg_tensor *t);
bool rg_tensor_is_c_contiguous(const rg_tensor *t);
bool rg_tensor_is_f_contiguous(const rg_tensor *t);
int64_t rg_storage_refcount(const rg_tensor *t);
/* The start and size of t's storage (a tensor whose storage count is 1
 * may be reshaped in place anywhere inside it). */
void *rg_storage_base(const rg_tensor *t);
size_t rg_storage_nbytes(const rg_tensor *t);
/* Whether t's storage wraps memory relgraph did not allocate (rg_tensor_wrap). */
bool rg_storage_is_external(const rg_tensor *t);
/* Address of the element at a multi-index (no bounds check). */
void *rg_tensor_at(const rg_tensor *t, const int64_t *idx);
/* Element i in C order of the logical shape, as double / int64; an i
 * outside 0..numel-1 reads NaN / 0 and writes nothing. */
double rg_tensor_get_f64(const rg_tensor *t, int64_t i);
int64_t rg_tensor_get_i64(const rg_tensor *t, int64_t i);
void rg_tensor_set_f64(rg_tensor *t, int64_t i, double v);
void rg_tensor_set_i64(rg_tensor *t, int64_t i, int64_t v);
/* Same dtype, shape and values (NaNs in the same places count as equal). */
bool rg_tensor_equal(const rg_tensor *a, const rg_tensor *b);
/* Whether a and b share bytes (views of one storage whose elements meet;
 * views that interleave without meeting, a matrix's columns, do not).
 * Views are compared row by row where their last dimension is
 * contiguous, else element by element; past 2^20 rows or elements they
 * count as sharing when their strides cannot tell. */
bool rg_tensor_overlap(const rg_tensor *a, const rg_tensor *b);
/* Same shape and |a - b| <= atol + rtol * |b| elementwise (any dtypes). */
bool rg_tensor_allclose(const rg_tensor *a, const rg_tensor *b, double rtol, double atol);
/* Prints "float64 (2 2) [[1.0 2.0] [3.0 4.0]]" style. */
void rg_tensor_fprint(FILE *f, const rg_tensor *t);

/* .npy files (format versions 1.0, 2.0 and 3.0; the eight dtypes above,
 * either byte order, C or Fortran order).  Errors are recorded in C. */
rg_tensor *rg_npy_read(rg_ctx *C, const char *name, const void *bytes, size_t len);
rg_tensor *rg_npy_load(rg_ctx *C, const char *path);
/* Writes version 1.0 (2.0 if the header needs it), little-endian, in C
 * order, or in Fortran order when `fortran` is set.  Returns a status. */
int rg_npy_save(rg_ctx *C, const char *path, const rg_tensor *t, bool fortran);

/* The .npy bytes in malloc'd memory (*out, *len); the caller frees them. */
int rg_npy_write(rg_ctx *C, const rg_tensor *t, bool fortran, void **out, size_t *len);

/* ------------------------------------------------------------------ tensors on devices */

/* A buffer type: where a storage lives and how its bytes move to and from
 * host memory (ggml's buffer types).  A tensor whose storage belongs to a
 * buffer type on a device (device != RG_DEVICE_HOST) may not be read
 * through `data` by the host: move it with rg_tensor_to_host().  The
 * element accessors (rg_tensor_get_f64, ..._set_...), rg_tensor_equal,
 * rg_tensor_allclose, rg_tensor_fprint, rg_npy_write/_save and
 * rg_constant read and write such tensors through their device.  A buffer
 * type whose device is the host (a GPU backend's pinned, page-locked host
 * memory: rg_backend_host_buffer_type) is host memory the host reads and
 * writes directly, which its device copies to and from without staging.
 * A buffer type must outlive the tensors allocated from it; the backends'
 * buffer types live as long as the backend object. */
typedef struct rg_buffer_type rg_buffer_type;
struct rg_buffer_type {
  const char *name;   /* "mirror", "cuda:0" */
  rg_device device;
  void *ctx;          /* the buffer type's own state */
  void *(*alloc)(const rg_buffer_type *bt, size_t nbytes);  /* NULL when exhausted */
  void (*free)(const rg_buffer_type *bt, void *base, size_t nbytes); /* nbytes as allocated */
  /* Copies nbytes between the device and host memory; 0 or an error status. */
  int (*download)(const rg_buffer_type *bt, void *host, const void *src, size_t nbytes);
  int (*upload)(const rg_buffer_type *bt, void *dst, const void *host, size_t nbytes);
  /* (optional) Copies nbytes from src, memory of buffer type `from`, into
   * dst, memory of bt, without going through the host: 0, an error
   * status, or RG_ERR_TYPE when it cannot (from is another kind of
   * device; the caller then goes through host memory). */
  int (*copy_from)(const rg_buffer_type *bt, void *dst, const rg_buffer_type *from, const void *src,
                   size_t nbytes);
  /* (optional) Orders two queues of work (a GPU backend's streams): what
   * is queued from now on by `later`'s owner waits for what was queued
   * so far by `earlier`'s, so that memory either writes may be read by
   * the other.  The host does not wait.  Both of the same kind (the same
   * `order`); 0 or an error status. */
  int (*order)(const rg_buffer_type *earlier, const rg_buffer_type *later);
};
/* Whether t's values live on a device (the host reads them only through
 * rg_tensor_to_host), rather than in host memory of any buffer type. */
bool rg_tensor_on_device(const rg_tensor *t);
/* An uninitialised C-contiguous tensor in a buffer of bt (NULL: host). */
rg_tensor *rg_tensor_empty_on(const rg_buffer_type *bt, rg_dtype dt, int ndim, const int64_t *shape);
/* Wraps memory of bt's device (NULL: the host) that the caller keeps
 * alive while the tensor lives and frees itself (a row of a larger
 * buffer, say). */
rg_tensor *rg_tensor_wrap_on(const rg_buffer_type *bt, rg_dtype dt, int ndim, const int64_t *shape,
                             const int64_t *strides, void *data, size_t nbytes);
rg_device rg_tensor_device(const rg_tensor *t);
const rg_buffer_type *rg_tensor_buffer_type(const rg_tensor *t); /* NULL: host memory */
/* A C-contiguous copy in host memory of a tensor on any device. */
rg_tensor *rg_tensor_to_host(const rg_tensor *t);
/* A C-contiguous copy of a tensor on any device in a buffer of bt (NULL:
 * host memory); through host memory when neither side is the host. */
rg_tensor *rg_tensor_to_device(const rg_tensor *t, const rg_buffer_type *bt);
/* Copies src's values into dst: the same dtype and shape, any strides,
 * either on any device.  RG_OK, RG_ERR_TYPE when dtypes or shapes differ,
 * RG_ERR_NOMEM. */
int rg_tensor_copy_to(rg_tensor *dst, const rg_tensor *src);

/* ------------------------------------------------------------------ ops */

/* The op set, defined once.  Columns: code, name, family, minimum and
 * maximum number of inputs (-1: unbounded).  Parameters are described in
 * docs/graph-format.md and beside struct rg_op. */
#define RG_OP_TABLE(X)                                 \
  X(ADD, "add", ELEMWISE, 1, -1)                         \
  X(MUL, "mul", ELEMWISE, 1, -1)                         \
  X(SUB, "sub", ELEMWISE, 2, 2)                          \
  X(TRUE_DIV, "true_div", ELEMWISE, 2, 2)                \
  X(INT_DIV, "int_div", ELEMWISE, 2, 2)                  \
  X(MOD, "mod", ELEMWISE, 2, 2)                          \
  X(NEG, "neg", ELEMWISE, 1, 1)                          \
  X(ABS, "abs", ELEMWISE, 1, 1)                          \
  X(EXP, "exp", ELEMWISE, 1, 1)                          \
  X(LOG, "log", ELEMWISE, 1, 1)                          \
  X(LOG1P, "log1p", ELEMWISE, 1, 1)                      \
  X(EXPM1, "expm1", ELEMWISE, 1, 1)                      \
  X(SQRT, "sqrt", ELEMWISE, 1, 1)                        \
  X(SQR, "sqr", ELEMWISE, 1, 1)                          \
  X(POW, "pow", ELEMWISE, 2, 2)                          \
  X(SIN, "sin", ELEMWISE, 1, 1)                          \
  X(COS, "cos", ELEMWISE, 1, 1)                          \
  X(TANH, "tanh", ELEMWISE, 1, 1)                        \
  X(SIGMOID, "sigmoid", ELEMWISE, 1, 1)                  \
  X(SOFTPLUS, "softplus", ELEMWISE, 1, 1)                \
  X(ERF, "erf", ELEMWISE, 1, 1)                          \
  X(MAXIMUM, "maximum", ELEMWISE, 2, 2)                  \
  X(MINIMUM, "minimum", ELEMWISE, 2, 2)                  \
  X(FLOOR, "floor", ELEMWISE, 1, 1)                      \
  X(CEIL, "ceil", ELEMWISE, 1, 1)                        \
  X(ROUND, "round", ELEMWISE, 1, 1)                      \
  X(SIGN, "sign", ELEMWISE, 1, 1)                        \
  X(CLIP, "clip", ELEMWISE, 3, 3)                        \
  X(LT, "lt", ELEMWISE, 2, 2)                            \
  X(GT, "gt", ELEMWISE, 2, 2)                            \
  X(LE, "le", ELEMWISE, 2, 2)                            \
  X(GE, "ge", ELEMWISE, 2, 2)                            \
  X(EQ, "eq", ELEMWISE, 2, 2)                            \
  X(NEQ, "neq", ELEMWISE, 2, 2)                          \
  X(AND, "and", ELEMWISE, 2, 2)                          \
  X(OR, "or", ELEMWISE, 2, 2)                            \
  X(XOR, "xor", ELEMWISE, 2, 2)                          \
  X(NOT, "not", ELEMWISE, 1, 1)                          \
  X(SWITCH, "switch", ELEMWISE, 3, 3)                    \
  X(CAST, "cast", ELEMWISE, 1, 1)                        \
  X(IDENTITY, "identity", ELEMWISE, 1, 1)                \
  X(SECOND, "second", ELEMWISE, 2, 2)                    \
  X(DIMSHUFFLE, "dimshuffle", SHAPE, 1, 1)               \
  X(RESHAPE, "reshape", SHAPE, 2, 2)                     \
  X(FLATTEN, "flatten", SHAPE, 1, 1)                     \
  X(SHAPE, "shape", SHAPE, 1, 1)                         \
  X(SHAPE_I, "shape_i", SHAPE, 1, 1)                     \
  X(ALLOC, "alloc", SHAPE, 1, -1)                        \
  X(ALLOC_EMPTY, "alloc_empty", SHAPE, 0, -1)            \
  X(MAKE_VECTOR, "make_vector", SHAPE, 0, -1)            \
  X(JOIN, "join", SHAPE, 1, -1)                          \
  X(SPLIT, "split", SHAPE, 2, 2)                         \
  X(SUBTENSOR, "subtensor", SHAPE, 1, -1)                \
  X(INC_SUBTENSOR, "inc_subtensor", SHAPE, 2, -1)        \
  X(SET_SUBTENSOR, "set_subtensor", SHAPE, 2, -1)        \
  X(ARANGE, "arange", SHAPE, 3, 3)                       \
  X(SUM, "sum", REDUCE, 1, 1)                            \
  X(PROD, "prod", REDUCE, 1, 1)                          \
  X(MAX, "max", REDUCE, 1, 1)                            \
  X(MIN, "min", REDUCE, 1, 1)                            \
  X(MEAN, "mean", REDUCE, 1, 1)                          \
  X(ARGMAX, "argmax", REDUCE, 1, 1)                      \
  X(ARGMIN, "argmin", REDUCE, 1, 1)                      \
  X(ALL, "all", REDUCE, 1, 1)                            \
  X(ANY, "any", REDUCE, 1, 1)                            \
  X(SOFTMAX, "softmax", REDUCE, 1, 1)                    \
  X(LOG_SOFTMAX, "log_softmax", REDUCE, 1, 1)            \
  X(DOT, "dot", BLAS, 2, 2)                              \
  X(OUTER, "outer", BLAS, 2, 2)                          \
  X(GEMM, "gemm", BLAS, 5, 5)                            \
  X(GEMV, "gemv", BLAS, 5, 5)                            \
  X(GER, "ger", BLAS, 4, 4)                              \
  X(BATCHED_DOT, "batched_dot", BLAS, 2, 2)              \
  X(IFELSE, "ifelse", CONTROL, 3, -1)                    \
  X(COMPOSITE, "composite", INNER, 0, -1)                \
  X(OP_FROM_GRAPH, "op_from_graph", INNER, 0, -1)        \
  X(SCAN, "scan", LOOP, 1, -1)                           \
  X(OPAQUE, "opaque", OPAQUE, 0, -1)

typedef enum rg_opcode {
#define RG_X_ENUM(code, name, fam, lo, hi) RG_OP_##code,
  RG_OP_TABLE(RG_X_ENUM)
#undef RG_X_ENUM
  RG_OP_COUNT
} rg_opcode;

typedef enum rg_op_family {
  RG_FAM_ELEMWISE, RG_FAM_SHAPE, RG_FAM_REDUCE, RG_FAM_BLAS, RG_FAM_CONTROL,
  RG_FAM_INNER, RG_FAM_OPAQUE, RG_FAM_LOOP
} rg_op_family;

typedef struct rg_op_class rg_op_class;       /* the vtable; see core/core-impl.h */
typedef struct rg_variable rg_variable;
typedef struct rg_node rg_node;
typedef struct rg_fgraph rg_fgraph;

/* Index entries of the subtensor ops (four words each in rg_op.ints):
 * kind (RG_IDX_INDEX or RG_IDX_SLICE), then one component (an index) or
 * three (start, stop, step).  A component is an integer, RG_IDX_NONE
 * (an omitted slice bound) or RG_IDX_INPUT (taken from the next scalar
 * integer input of the node, in order). */
enum { RG_IDX_INDEX = 0, RG_IDX_SLICE = 1 };
#define RG_IDX_NONE INT64_MIN
#define RG_IDX_INPUT (INT64_MIN + 1)
typedef struct rg_index { int64_t kind, a, b, c; } rg_index;
/* Python's slice of a dimension of size n: a negative bound counts from
 * the end, bounds are then clipped to the dimension, an omitted one
 * (has_start / has_stop false) is the end the step starts or stops at;
 * step != 0.  Returns the slice's length and sets *first to its first
 * index (meaningful when the length is positive).  The one definition of
 * slicing: shape inference, the CPU kernels and the rewrites use it. */
int64_t rg_slice_indices(int64_t n, bool has_start, int64_t start, bool has_stop, int64_t stop, int64_t step,
                         int64_t *first);

/* An op: a class plus parameters.  Ops are immutable and collected; compare
 * them with rg_op_equal().  Parameters by op:
 *   cast, alloc_empty, make_vector, arange:  dtype
 *   elementwise ops, gemm, gemv, ger:        inplace (destroyed input or -1)
 *   dimshuffle:          ints = new order, -1 for an added broadcastable dim
 *   reshape, flatten:    ints[0] = number of output dimensions
 *   shape_i:             ints[0] = dimension
 *   join:                ints[0] = axis
 *   split:               ints = (axis, number of outputs)
 *   subtensor family:    ints = index entries, 4 words each (rg_index)
 *   reductions:          ints = sorted distinct axes; all_axes when none given
 *   softmax, log_softmax: ints[0] = axis
 *   composite, op_from_graph: inner (the inner FunctionGraph)
 *   scan:                inner, and its layout in ints (relgraph/scan.h)
 *   opaque:              name, nout, out_type (NULL: elementwise rule)
 * Ops are created with rg_op_get() (no parameters) or the rg_op_* makers. */
typedef struct rg_op {
  const rg_op_class *cls;
  rg_opcode code;
  rg_dtype dtype;        /* RG_NDTYPES when unused */
  int32_t inplace;       /* -1 when not in place */
  bool all_axes;         /* reductions over every axis */
  int32_t nints;
  const int64_t *ints;
  const char *name;      /* opaque ops */
  int32_t nout;          /* opaque ops: number of outputs */
  const rg_type *out_type; /* opaque ops: declared output type or NULL */
  rg_fgraph *inner;      /* inner-graph ops */
  uint64_t hash;
  rg_term term;          /* rg_op_term(), made once */
} rg_op;

const char *rg_opcode_name(rg_opcode code);    /* "add" */
int rg_opcode_from_name(const char *name);     /* -1 if unknown */
rg_op_family rg_opcode_family(rg_opcode code);
/* The op of a class that takes no parameters (NULL for classes needing
 * some: cast, dimshuffle, ...).  Reductions without parameters reduce
 * every axis. */
const rg_op *rg_op_get(rg_opcode code);

const rg_op *rg_op_cast(rg_dtype dt);
const rg_op *rg_op_inplace(const rg_op *op, int input); /* same op destroying `input` */
const rg_op *rg_op_dimshuffle(int n, const int64_t *order);
const rg_op *rg_op_reshape(int ndim);
const rg_op *rg_op_flatten(int ndim);
const rg_op *rg_op_shape_i(int dim); /* dim < 0 counts from the end (normalised by make_node) */
const rg_op *rg_op_alloc_empty(rg_dtype dt);
const rg_op *rg_op_make_vector(rg_dtype dt);
const rg_op *rg_op_join(int axis);
const rg_op *rg_op_split(int axis, int n);
/* code is RG_OP_SUBTENSOR, RG_OP_INC_SUBTENSOR or RG_OP_SET_SUBTENSOR. */
const rg_op *rg_op_subtensor(rg_opcode code, int n, const rg_index *entries);
const rg_op *rg_op_arange(rg_dtype dt);
/* A reduction (sum ... any) over the given axes (naxes < 0: every axis);
 * softmax and log_softmax take exactly one axis.  Negative axes count from
 * the end and are normalised when the node is made. */
const rg_op *rg_op_reduce(rg_opcode code, int naxes, const int64_t *axes);
/* An opaque op: any number of inputs, `nout` outputs, each of type
 * out_type, or, when out_type is NULL, of the elementwise result type of the
 * inputs (broadcast shape, promoted dtype). */
const rg_op *rg_op_opaque(const char *name, int nout, const rg_type *out_type);

/* Inner-graph ops hold a private frozen copy of `inner` (NULL with an error
 * in C when invalid).  composite: a graph of scalars (elementwise ops and
 * composites) applied elementwise to broadcast inputs, each outer input of
 * the inner input's dtype.  op_from_graph: any graph called as one op. */
const rg_op *rg_op_composite(rg_ctx *C, rg_fgraph *inner);
/* The most inputs, and the most outputs, of a composite the backends run
 * (fusion makes none larger). */
#define RG_COMPOSITE_MAX_IO 64
const rg_op *rg_op_from_graph(rg_ctx *C, rg_fgraph *inner);
rg_fgraph *rg_op_inner_graph(const rg_op *op); /* NULL for other ops */

bool rg_op_equal(const rg_op *a, const rg_op *b);
uint64_t rg_op_hash(const rg_op *op);
const char *rg_op_name(const rg_op *op);       /* class name, or an opaque op's name */
/* The op as a term: its name as a symbol when it has no parameters, else
 * the list (name param ...) (the head of an expression, see the graph file
 * format).  For an op owning an inner graph it is a foreign term standing
 * for the op itself, which unifies and prints as that list (expanded
 * lazily), so evaluating it needs no parsing.  rg_op_from_term() parses a
 * head back (NULL with an error in C). */
rg_term rg_op_term(const rg_op *op);
const rg_op *rg_op_from_term(rg_ctx *C, rg_term head);
/* Writes the op as rg_op_term() prints. */
void rg_op_fprint(FILE *f, const rg_op *op);
/* View and destroy maps: the input an output views (aliases) or destroys
 * (overwrites), or -1.  At most one input per output in this op set. */
int rg_op_view_of(const rg_op *op, int output);
int rg_op_destroys(const rg_op *op, int output);

/* ------------------------------------------------------------------ variables and nodes */

enum {
  RG_VAR_CONSTANT = 1, /* a constant: `data` holds its value */
  RG_VAR_WEAK = 2,     /* a literal scalar constant (NEP 50 weak dtype) */
};

/* A use of a variable in a FunctionGraph: input `index` of `node`, or, when
 * node is NULL, output `index` of the graph. */
typedef struct rg_client { rg_node *node; int32_t index; } rg_client;

/* A variable.  Fields above the line are public and read-only.
 * Invariants: owner == NULL or owner->outputs[index] == this; a constant
 * has no owner, every dimension of its type is known, and `data` holds
 * rg_type_numel(type) elements in C order (collected, pointer-free,
 * never modified). */
struct rg_variable {
  const rg_type *type;
  rg_node *owner;
  int32_t index;
  uint32_t flags;
  const char *name;      /* NULL when unnamed */
  rg_ctx *ctx;           /* where construction errors are reported */
  const void *data;      /* constants only */
  uint64_t id;           /* unique, increasing with creation */
  void *user;            /* for higher layers (the backend's shared values) */
  /* ---- maintained by the FunctionGraph holding the variable */
  rg_fgraph *fgraph;
  rg_client *clients;
  uint32_t nclients, cap_clients;
  uint64_t vhash;        /* constants: cached hash of the value, 0 = not yet */
};

/* An apply node.  op, inputs, outputs, nin, nout and id are public and
 * read-only; inputs change only through FunctionGraph operations.  The
 * fields used by every walk come first, so they share a cache line. */
struct rg_node {
  const rg_op *op;
  rg_variable **inputs;
  rg_variable **outputs;
  int32_t nin, nout;
  /* ---- maintained by the FunctionGraph holding the node (and graph walks) */
  uint64_t mark;         /* scratch for graph walks */
  rg_fgraph *fgraph;
  uint64_t label;        /* order label: increasing along prev -> next */
  rg_node *prev, *next;  /* the graph's topological order */
  uint32_t *cpos;        /* cpos[i]: position of (this, i) in inputs[i]->clients */
  /* ---- */
  uint64_t id;           /* unique, increasing with creation */
};

/* A graph input of the given type (name may be NULL). */
rg_variable *rg_input(rg_ctx *C, const char *name, const rg_type *type);
/* Sets the name (copied); returns v.  NULL propagates. */
rg_variable *rg_set_name(rg_variable *v, const char *name);
bool rg_is_constant(const rg_variable *v);

/* Constants.  rg_constant() copies the tensor's values (any layout). */
rg_variable *rg_constant(rg_ctx *C, const rg_tensor *value);
rg_variable *rg_constant_data(rg_ctx *C, rg_dtype dt, int ndim, const int64_t *shape,
                              const void *c_order_data);
rg_variable *rg_constant_scalar(rg_ctx *C, rg_dtype dt, double v);
rg_variable *rg_constant_scalar_int(rg_ctx *C, rg_dtype dt, int64_t v);
/* Weak literal scalars: int64 / float64 / bool with the RG_VAR_WEAK flag. */
rg_variable *rg_scalar_int(rg_ctx *C, int64_t v);
rg_variable *rg_scalar_float(rg_ctx *C, double v);
rg_variable *rg_scalar_bool(rg_ctx *C, bool v);
/* A copy of a constant's value (manual memory); NULL if v is no constant. */
rg_tensor *rg_constant_to_tensor(const rg_variable *v);
/* The value of a one-element constant; false if v is not one. */
bool rg_constant_get_f64(const rg_variable *v, double *out);
bool rg_constant_get_i64(const rg_variable *v, int64_t *out);
/* Same type (and weakness) and the same values (NaN equal to NaN). */
bool rg_constant_equal(const rg_variable *a, const rg_variable *b);
uint64_t rg_constant_hash(const rg_variable *v);

/* The checked general form: infers the output types, validates, and
 * returns the node (NULL with a message in C on error; NULL inputs give
 * NULL without a message).  The node's op may be a canonical form of `op`
 * (negative axes normalised).  C may be NULL when there is an input. */
rg_node *rg_make_node(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *inputs);
/* The output types rg_make_node would give, without making the node:
 * returns the number of outputs (the first min(that, cap) types are
 * written to types), or -1 as rg_make_node returns NULL (with the same
 * message).  For rewrites that only need to know whether a node rebuilt
 * on its inputs would be typed differently. */
int rg_node_types(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *inputs, int cap,
                  const rg_type **types);
/* rg_make_node() returning output 0. */
rg_variable *rg_apply(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *inputs);
/* A node like `node` with other inputs of the same types (no inference). */
rg_node *rg_node_clone_with(const rg_node *node, rg_variable *const *inputs);

/* Elementwise constructors (NULL propagates; errors go to the inputs' ctx). */
rg_variable *rg_add(rg_variable *a, rg_variable *b);
rg_variable *rg_add_n(int n, rg_variable *const *xs);
rg_variable *rg_mul(rg_variable *a, rg_variable *b);
rg_variable *rg_mul_n(int n, rg_variable *const *xs);
rg_variable *rg_sub(rg_variable *a, rg_variable *b);
rg_variable *rg_true_div(rg_variable *a, rg_variable *b);
rg_variable *rg_int_div(rg_variable *a, rg_variable *b);
rg_variable *rg_mod(rg_variable *a, rg_variable *b);
rg_variable *rg_pow(rg_variable *a, rg_variable *b);
rg_variable *rg_maximum(rg_variable *a, rg_variable *b);
rg_variable *rg_minimum(rg_variable *a, rg_variable *b);
rg_variable *rg_neg(rg_variable *x);
rg_variable *rg_abs(rg_variable *x);
rg_variable *rg_exp(rg_variable *x);
rg_variable *rg_log(rg_variable *x);
rg_variable *rg_log1p(rg_variable *x);
rg_variable *rg_expm1(rg_variable *x);
rg_variable *rg_sqrt(rg_variable *x);
rg_variable *rg_sqr(rg_variable *x);
rg_variable *rg_sin(rg_variable *x);
rg_variable *rg_cos(rg_variable *x);
rg_variable *rg_tanh(rg_variable *x);
rg_variable *rg_sigmoid(rg_variable *x);
rg_variable *rg_softplus(rg_variable *x);
rg_variable *rg_erf(rg_variable *x);
rg_variable *rg_floor(rg_variable *x);
rg_variable *rg_ceil(rg_variable *x);
rg_variable *rg_round(rg_variable *x);        /* half to even */
rg_variable *rg_sign(rg_variable *x);
rg_variable *rg_clip(rg_variable *x, rg_variable *lo, rg_variable *hi);
rg_variable *rg_lt(rg_variable *a, rg_variable *b);
rg_variable *rg_gt(rg_variable *a, rg_variable *b);
rg_variable *rg_le(rg_variable *a, rg_variable *b);
rg_variable *rg_ge(rg_variable *a, rg_variable *b);
/* eq and neq (rg_eq and rg_neq are kanren goals). */
rg_variable *rg_eq_elem(rg_variable *a, rg_variable *b);
rg_variable *rg_neq_elem(rg_variable *a, rg_variable *b);
rg_variable *rg_and(rg_variable *a, rg_variable *b);  /* bitwise; bool or integer */
rg_variable *rg_or(rg_variable *a, rg_variable *b);
rg_variable *rg_xor(rg_variable *a, rg_variable *b);
rg_variable *rg_not(rg_variable *x);
rg_variable *rg_switch(rg_variable *cond, rg_variable *a, rg_variable *b);
rg_variable *rg_cast(rg_variable *x, rg_dtype dt);
rg_variable *rg_identity(rg_variable *x);
/* fill: `value` broadcast to the shape of `model` (dtype of value). */
rg_variable *rg_second(rg_variable *model, rg_variable *value);

/* Structure ops.  dimshuffle: result dimension i is x's dimension order[i],
 * or a new broadcastable dimension for -1; dimensions of x left out must
 * have size 1. */
rg_variable *rg_dimshuffle(rg_variable *x, int n, const int64_t *order);
rg_variable *rg_transpose(rg_variable *x);    /* every dimension reversed */
/* reshape to an integer vector `shape` of `ndim` elements (one may be -1) */
rg_variable *rg_reshape(rg_variable *x, rg_variable *shape, int ndim);
rg_variable *rg_reshape_to(rg_variable *x, int ndim, const int64_t *dims);
/* keeps the first ndim-1 dimensions, merges the rest */
rg_variable *rg_flatten(rg_variable *x, int ndim);
rg_variable *rg_shape(rg_variable *x);        /* int64 vector */
rg_variable *rg_shape_i(rg_variable *x, int dim); /* int64 scalar */
/* alloc: `value` broadcast to the shape given by n integer scalars */
rg_variable *rg_allocate(rg_variable *value, int n, rg_variable *const *dims);
rg_variable *rg_allocate_empty(rg_ctx *C, rg_dtype dt, int n, rg_variable *const *dims);
rg_variable *rg_make_vector(rg_ctx *C, rg_dtype dt, int n, rg_variable *const *xs);
rg_variable *rg_join(int axis, int n, rg_variable *const *xs);
/* split x along axis into n parts of the sizes in the integer vector sizes */
rg_node *rg_split(rg_variable *x, rg_variable *sizes, int axis, int n);
/* x[entries]: idx are the scalar integer inputs for RG_IDX_INPUT
 * components, in order.  inc/set_subtensor return x with the selection
 * incremented by / set to y (broadcast). */
rg_variable *rg_subtensor(rg_variable *x, int nent, const rg_index *entries, int nidx,
                          rg_variable *const *idx);
rg_variable *rg_inc_subtensor(rg_variable *x, rg_variable *y, int nent, const rg_index *entries,
                              int nidx, rg_variable *const *idx);
rg_variable *rg_set_subtensor(rg_variable *x, rg_variable *y, int nent, const rg_index *entries,
                              int nidx, rg_variable *const *idx);
rg_variable *rg_arange(rg_variable *start, rg_variable *stop, rg_variable *step, rg_dtype dt);
/* The sizes of reshape(x, given) for an x of shape xshape[0..xnd), into
 * out[0..nd): given as the shape vector holds it, at most one -1 standing
 * for what the other sizes leave of x's elements (NumPy's rule); have[d]
 * false (have may be NULL) for a size not known yet, when the node is made
 * before its shape vector's value is known.  out has RG_DIM_UNKNOWN where
 * a size is not known yet.  NULL, or why the sizes are invalid or do not
 * hold x's elements. */
const char *rg_reshape_sizes(int xnd, const int64_t *xshape, int nd, const int64_t *given,
                             const bool *have, int64_t *out);
/* The most elements an arange may have (longer is an error, when the node
 * is made for constant bounds, else when it runs). */
#define RG_ARANGE_MAX 0x1p62
/* The length of arange(start, stop, step) (NumPy's ceil((stop - start) /
 * step), 0 when negative) in *len; NULL, or why there is none (a zero
 * step, a NaN bound or step, too many elements). */
const char *rg_arange_length(double start, double stop, double step, int64_t *len);

/* Shape inference.  rg_shape_of: one scalar int64 variable per dimension
 * of x (a constant where the type knows the size, else shape_i(x, d)).
 * rg_infer_shape: the shape of a node's output in terms of its inputs'
 * shapes and scalar inputs, folded to constants where static. */
rg_variable **rg_shape_of(rg_ctx *C, rg_variable *x);
rg_variable **rg_infer_shape(rg_ctx *C, const rg_node *node, int output);

/* Reductions over `naxes` axes (naxes < 0: every axis; negative axes count
 * from the end).  Reduced dimensions are removed. */
rg_variable *rg_sum(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_prod(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_max(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_min(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_mean(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_argmax(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_argmin(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_all(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_any(rg_variable *x, int naxes, const int64_t *axes);
rg_variable *rg_softmax(rg_variable *x, int64_t axis);
rg_variable *rg_log_softmax(rg_variable *x, int64_t axis);

/* Linear algebra. */
rg_variable *rg_dot(rg_variable *a, rg_variable *b);
rg_variable *rg_outer(rg_variable *x, rg_variable *y);
/* One product per leading (batch) index: x of shape (B, n, k) or (B, k),
 * y of shape (B, k, m) or (B, k); the result has shape (B, n, m) without
 * the dimensions an operand of rank 2 lacks (Aesara's batched_dot). */
rg_variable *rg_batched_dot(rg_variable *x, rg_variable *y);
/* beta * z + alpha * (x @ y) */
rg_variable *rg_gemm(rg_variable *z, rg_variable *alpha, rg_variable *x, rg_variable *y,
                     rg_variable *beta);
/* beta * y + alpha * (A @ x) */
rg_variable *rg_gemv(rg_variable *y, rg_variable *alpha, rg_variable *A, rg_variable *x,
                     rg_variable *beta);
/* A + alpha * outer(x, y) */
rg_variable *rg_ger(rg_variable *A, rg_variable *alpha, rg_variable *x, rg_variable *y);

/* ifelse: n outputs, output i is thens[i] if the scalar cond is non-zero,
 * else elses[i].  Returns the node (outputs in node->outputs). */
rg_node *rg_ifelse(rg_variable *cond, int n, rg_variable *const *thens,
                   rg_variable *const *elses);

/* ------------------------------------------------------------------ gradients */

/* What rg_grad does with a wrt the cost does not depend on (integer and
 * boolean values never get a gradient). */
enum {
  RG_GRAD_DISCONNECTED_RAISE = 0, /* an error naming it (the default) */
  RG_GRAD_DISCONNECTED_ZERO = 1,  /* zeros of its type */
  RG_GRAD_DISCONNECTED_NULL = 2,  /* NULL in its place */
};
typedef struct rg_grad_opts {
  int disconnected;                 /* RG_GRAD_DISCONNECTED_* */
  /* Start from given gradients (of the known variables' types) instead of,
   * or as well as, a scalar cost; a NULL gradient is zero. */
  int nknown;
  rg_variable *const *known;
  rg_variable *const *known_grads;
  /* Values treated as constants: no gradient flows through them (past
   * them to what they are computed from); one also in wrt still gets its
   * own gradient, as Aesara's consider_constant. */
  int nconsts;
  rg_variable *const *consts;
} rg_grad_opts;

/* Reverse-mode gradients of `cost` (a float scalar; may be NULL when
 * opts gives known gradients) with respect to each of wrt, as graphs:
 * out[i] has wrt[i]'s dtype, rank and broadcastable dimensions.  opts may
 * be NULL.  RG_OK, or an error in C (a cost that is not a float scalar, a
 * wrt it does not depend on, an op without a gradient on the way). */
int rg_grad(rg_ctx *C, rg_variable *cost, int nwrt, rg_variable *const *wrt,
            const rg_grad_opts *opts, rg_variable **out);
/* g summed over the dimensions where it was broadcast against type t (the
 * leading extra ones, and those of size 1 in t), keeping t's rank: the
 * one step that brings a broadcast gradient back to its input's shape.
 * NULL (an error in g's context) when g is no broadcast of t: a lower
 * rank, or a static size other than t's and 1 where t's is not 1. */
rg_variable *rg_grad_sum_to(rg_variable *g, const rg_type *t);

/* ------------------------------------------------------------------ graph walks */

/* A map from graph objects (variables, nodes) to objects, for clones. */
typedef struct rg_memo rg_memo;
rg_memo *rg_memo_new(void);
void rg_memo_put(rg_memo *m, const void *key, void *value);
void *rg_memo_get(const rg_memo *m, const void *key); /* NULL if absent */
size_t rg_memo_size(const rg_memo *m);

/* The apply nodes computing `outputs` from `inputs` (variables in inputs
 * are leaves even when they have owners), each after the nodes computing
 * its inputs.  Returns a collected array and its length in *n.  Iterative:
 * any depth. */
rg_node **rg_toposort(int nin, rg_variable *const *inputs, int nout, rg_variable *const *outputs,
                      size_t *n);
/* rg_toposort where the leaves are the variables for which leaf(v, ud)
 * holds: the walk costs what lies above them (adding a term to a structure
 * that holds most of its graph already). */
rg_node **rg_toposort_above(int nout, rg_variable *const *outputs,
                            bool (*leaf)(const rg_variable *v, const void *ud), const void *ud, size_t *n);
/* Every variable the given ones depend on, themselves included, stopping
 * at blockers; inputs of a node before its outputs. */
rg_variable **rg_ancestors(int n, rg_variable *const *vars, int nblock,
                           rg_variable *const *blockers, size_t *count);
/* The ancestors without owner (graph inputs and constants), in order. */
rg_variable **rg_graph_inputs(int n, rg_variable *const *vars, size_t *count);

enum {
  RG_CLONE_INPUTS = 1,    /* copy owner-less non-constant leaves too */
  RG_CLONE_CONSTANTS = 2, /* copy constants (new variables, shared value) */
};
/* Copies the subgraph from `inputs` to `outputs` into `out` (nout
 * variables).  Entries already in `memo` (may be NULL) replace their keys
 * and are not traversed; the memo receives every copy (old -> new, for
 * variables and nodes).  Inputs not copied are shared. */
int rg_clone(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
             rg_variable *const *outputs, rg_memo *memo, unsigned flags, rg_variable **out);

/* Whether xs and ys compute the same thing: equal ops applied to
 * corresponding inputs; constants compare by value; in_xs[i] corresponds
 * to in_ys[i]; other leaves must be the same variable. */
bool rg_equal_computations(int n, rg_variable *const *xs, rg_variable *const *ys, int nin,
                           rg_variable *const *in_xs, rg_variable *const *in_ys);

/* ------------------------------------------------------------------ FunctionGraph */

/* A FunctionGraph owns the nodes computing its outputs from its inputs:
 * each such node and variable points back to it (node->fgraph), each
 * variable knows its clients, and the nodes are kept in a topological
 * order that is maintained incrementally as the graph changes (inserting
 * imported nodes where they are needed and repairing only the region an
 * edge invalidates, after Pearce and Kelly).  A node, an input and a
 * constant belong to at most one FunctionGraph at a time (clients are
 * stored in the variables themselves, for O(1) updates); build with
 * RG_FG_CLONE to work on a copy, or rg_fgraph_release() one first.
 *
 * Features observe changes through callbacks (all optional).  validate is
 * called by rg_fgraph_replace_all() after its replacements: an error there
 * reverts them. */
typedef struct rg_feature rg_feature;
struct rg_feature {
  const char *name;
  void *ud;
  int (*on_attach)(rg_fgraph *fg, rg_feature *f);   /* an error refuses the attach */
  void (*on_detach)(rg_fgraph *fg, rg_feature *f);
  void (*on_import)(rg_fgraph *fg, rg_node *node, const char *reason, rg_feature *f);
  void (*on_prune)(rg_fgraph *fg, rg_node *node, const char *reason, rg_feature *f);
  /* node NULL: output i of the graph changed */
  void (*on_change_input)(rg_fgraph *fg, rg_node *node, int i, rg_variable *old,
                          rg_variable *new_, const char *reason, rg_feature *f);
  int (*validate)(rg_fgraph *fg, rg_feature *f);
};

enum { RG_FG_CLONE = 1 };

rg_fgraph *rg_fgraph_new(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                         rg_variable *const *outputs, unsigned flags);
rg_ctx *rg_fgraph_ctx(const rg_fgraph *fg);
int rg_fgraph_ninputs(const rg_fgraph *fg);
int rg_fgraph_noutputs(const rg_fgraph *fg);
rg_variable *rg_fgraph_input(const rg_fgraph *fg, int i);
rg_variable *rg_fgraph_output(const rg_fgraph *fg, int i);
size_t rg_fgraph_nnodes(const rg_fgraph *fg);
/* How many of its nodes have an op of this code (kept as nodes come and
 * go: rewriters that only look at some ops skip graphs without them). */
size_t rg_fgraph_count_op(const rg_fgraph *fg, rg_opcode code);
/* The nodes in topological order: a cached array, valid until the next
 * change of the graph. */
rg_node *const *rg_fgraph_toposort(rg_fgraph *fg, size_t *n);
/* Sorts n nodes of one FunctionGraph into its topological order (by their
 * order labels).  A list already in order costs one pass. */
void rg_fgraph_sort_nodes(rg_node **v, size_t n);
/* First and next node of the order (NULL at the end). */
rg_node *rg_fgraph_first(const rg_fgraph *fg);
static inline rg_node *rg_fgraph_next(const rg_node *n) { return n->next; }
bool rg_fgraph_contains(const rg_fgraph *fg, const rg_variable *v);
/* Adds an output (importing what it needs); returns its index or an error. */
int rg_fgraph_add_output(rg_fgraph *fg, rg_variable *v, const char *reason);

/* Changes input i of node (an output of the graph when node is NULL) to
 * new_, whose type must be at least as specific as the old input's.
 * Imports new_'s computation, prunes what is no longer used. */
int rg_fgraph_change_input(rg_fgraph *fg, rg_node *node, int i, rg_variable *new_,
                           const char *reason);
/* Replaces every use of old by new_ (type at least as specific; new_ may
 * not depend on old). */
int rg_fgraph_replace(rg_fgraph *fg, rg_variable *old, rg_variable *new_, const char *reason);
/* Several replacements, then the features' validate; any error reverts
 * all of them. */
int rg_fgraph_replace_all(rg_fgraph *fg, int n, rg_variable *const *olds,
                          rg_variable *const *news, const char *reason);

/* Checkpoints: history is recorded from the first checkpoint on; revert
 * undoes every change made since `cp`; commit forgets the history. */
size_t rg_fgraph_checkpoint(rg_fgraph *fg);
int rg_fgraph_revert(rg_fgraph *fg, size_t cp);
void rg_fgraph_commit(rg_fgraph *fg);

int rg_fgraph_attach(rg_fgraph *fg, rg_feature *f);
int rg_fgraph_detach(rg_fgraph *fg, rg_feature *f);

/* A copy (new inputs, nodes, constants); memo may be NULL or receives the
 * correspondence old -> new. */
rg_fgraph *rg_fgraph_clone(rg_fgraph *fg, rg_memo *memo);
/* Merges equal computations: constants equal by value, then nodes applying
 * equal ops to the same inputs.  *merged (may be NULL) receives the number
 * of variables replaced. */
int rg_fgraph_merge(rg_fgraph *fg, size_t *merged);
/* The invariant checker: clients consistent both ways, the order
 * topological (so no cycles), every node reachable and owned, types
 * valid (re-inference agrees).  RG_OK or an error naming the problem.
 * Builds with RG_DEBUG_CHECKS run it after every change. */
int rg_fgraph_check(rg_fgraph *fg);
/* Detaches every node and variable (they may join another graph); the
 * FunctionGraph is empty afterwards.  The inner graph of an op is left
 * alone. */
void rg_fgraph_release(rg_fgraph *fg);

/* ------------------------------------------------------------------ graph files */

/* The graph file format (docs/graph-format.md):
 *   (graph (input NAME DTYPE (SHAPE) [DEVICE]) (opaque NAME [options])
 *          (define NAME EXPR) (define (NAME ...) EXPR) (output EXPR) ...)
 * Reading returns NULL with "file:line:col: message" in C on error. */
rg_fgraph *rg_graph_read(rg_ctx *C, const char *name, const char *text, size_t len);
rg_fgraph *rg_graph_load(rg_ctx *C, const char *path);
rg_fgraph *rg_graph_from_term(rg_ctx *C, rg_term form);
/* Writing: shared subgraphs once (as defines), names kept, nesting bounded
 * whatever the depth of the graph. */
int rg_graph_write(rg_ctx *C, FILE *f, rg_fgraph *fg);
char *rg_graph_to_string(rg_ctx *C, rg_fgraph *fg);   /* collected */
rg_term rg_graph_to_term(rg_fgraph *fg);

/* ------------------------------------------------------------------ the kanren bridge */

/* A graph variable as a kanren term (a foreign term).  A variable computed
 * by a node unifies as the etuple (head input ...), expanded lazily, where
 * head is rg_op_term(op) — a symbol, or (name param ...) for ops with
 * parameters — and one output of a multi-output node as
 * (nth K (head input ...)).  Inputs and constants are atomic: equal only to
 * themselves, and a constant also to a constant of equal value and (one
 * element) to a kanren number or boolean of equal value.  Two computed
 * variables meeting as atoms are equal when rg_equal_computations() says
 * so.  NULL gives NULL. */
rg_term rg_var_term(rg_variable *v);
rg_variable *rg_term_var(rg_term t);          /* NULL if t is no graph variable */
/* Graph variables themselves; numbers and booleans as weak literal
 * constants; NULL with an error otherwise. */
rg_variable *rg_term_to_variable(rg_ctx *C, rg_term t);
/* Makes C's etuple evaluation build graphs: an etuple or expression list
 * whose head names an op (a symbol or (name param ...)) applies it through
 * rg_make_node(); (nth K E) picks an output.  A type error makes the
 * evaluation fail with the op's message.  Sets C's default evaluator. */
void rg_graph_install_evaluator(rg_ctx *C);
/* Lets heads naming this opaque op evaluate in C. */
void rg_graph_declare_opaque(rg_ctx *C, const rg_op *op);
/* The op a head names in C: rg_op_from_term's, or an opaque op declared
 * in C under that name; NULL with rg_op_from_term's error otherwise. */
const rg_op *rg_graph_op_of(rg_ctx *C, rg_term head);
/* Installs the evaluator and evaluates t to one graph variable (NULL with
 * an error on failure). */
rg_variable *rg_graph_eval(rg_ctx *C, rg_term t);

/* ------------------------------------------------------------------ printing */

/* Aesara's infix style, one line per variable: ((A @ x) + (A @ y)),
 * (x + y + z), -x, exp(x), x.T, x[1:3], sum{0}(x), op1(x, y).  A large
 * subexpression used several times gets its own line "t1 = ..." first. */
int rg_pprint(FILE *f, int n, rg_variable *const *vars);
char *rg_pprint_str(rg_variable *v);          /* one variable, collected */
/* One line: the expression of v down to `depth` levels of operations
 * (deeper operands print as "..."), shared parts inline, an op's label
 * (a Scan's whole step) cut at 200 characters; collected. */
char *rg_pprint_brief(rg_variable *v, int depth);
int rg_fgraph_pprint(FILE *f, rg_fgraph *fg);
/* The indented debug print with [id X] tags and types. */
int rg_dprint(FILE *f, int n, rg_variable *const *vars);
int rg_fgraph_dprint(FILE *f, rg_fgraph *fg);
int rg_fgraph_dot(FILE *f, rg_fgraph *fg);     /* Graphviz */
int rg_fgraph_json(FILE *f, rg_fgraph *fg);
/* s as a JSON string: quoted, escaped, and every byte that is not part of
 * valid UTF-8 written as U+FFFD, so that what is written always parses. */
void rg_json_string(FILE *f, const char *s);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
