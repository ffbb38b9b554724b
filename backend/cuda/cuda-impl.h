/*
 * cuda-impl.h — the CUDA backend's internals: the kernel generator (gen.c)
 * and NVRTC, the run-time compiler (nvrtc.c).
 *
 * Both are plain C built into every library, with or without the CUDA
 * toolkit: the generator needs nothing of CUDA, and NVRTC is loaded with
 * dlopen when first asked for, so a machine without the toolkit or a GPU
 * still builds, links and runs, and says why CUDA cannot run.
 */
#ifndef RELGRAPH_CUDA_IMPL_H
#define RELGRAPH_CUDA_IMPL_H

#include "backend/backend-impl.h"

/* The largest rank a generated kernel addresses, and the most operands
 * (inputs and outputs) of an elementwise or fused kernel. */
#define RGCU_MAXND 8
#define RGCU_MAXOPS 16
/* Elements an elementwise kernel's thread handles per pass of its loop. */
#define RGCU_UNROLL 4

/* ------------------------------------------------------------------ generated kernels */

/* Every generated kernel is `extern "C" __global__ void rg_kernel(A a)`
 * for an argument struct A the source declares (the layouts below), in
 * CUDA C that NVRTC compiles with no header.  Each returns the source in
 * manual memory (rg_free), or NULL with the reason in why.
 *
 * Elementwise and fused kernels (rg_ew_args): a grid-stride loop over the
 * n elements of the output shape (nd <= RGCU_MAXND dimensions),
 * RGCU_UNROLL elements a thread per pass, loads first; operand k
 * (outputs first, then inputs) is addressed at p[k] + sum(idx[d] * st[k][d])
 * bytes, so broadcasting (stride 0), views and any strides need nothing
 * else.  The scalar semantics are the CPU's, from scalar-float.h and
 * scalar-int.h; the dtype rules are the CPU interpreter's
 * (rgbc_ew_info_of). */
char *rgcu_gen_elemwise(const rgb_node *n, char *why, size_t len);
/* A fused group: n is a composite whose linked inner program (n->inner)
 * holds elementwise nodes only; one kernel computes every inner node in
 * registers, constants inlined. */
char *rgcu_gen_composite(const rgb_node *n, char *why, size_t len);
/* A strided copy converting dtype `from` to `to` as a cast does (the
 * elementwise layout with one output and one input). */
char *rgcu_gen_copy(rg_dtype from, rg_dtype to, char *why, size_t len);
/* Reductions (sum, prod, max, min, argmax, argmin, all, any, mean) over
 * any axes (rg_red_args): one thread per output element walks the reduced
 * dimensions (kept dims kd, reduced dims rd, each with input strides;
 * argmax/argmin report the flat index over the reduced dimensions). */
char *rgcu_gen_reduce(const rgb_node *n, char *why, size_t len);
/* softmax and log_softmax along one axis (rg_red_args with one reduced
 * dimension; the output has the input's shape and its own strides). */
char *rgcu_gen_softmax(const rgb_node *n, char *why, size_t len);

/* The argument structs of the generated kernels, as their source
 * declares them (rg_ew_args, rg_red_args, with long long for int64_t:
 * the same 8 bytes), and how a kernel's arguments are laid out from its
 * tensors. */
typedef struct rgcu_ew_args {
  int64_t n;                              /* elements of the output shape */
  int nd;
  int64_t shape[RGCU_MAXND];
  int64_t st[RGCU_MAXOPS][RGCU_MAXND];    /* bytes; outputs first, then inputs */
  char *p[RGCU_MAXOPS];
  uint32_t mag[RGCU_MAXND];               /* division by shape[d] in 32 bits: rgcu_divisor */
  int sh[RGCU_MAXND];
} rgcu_ew_args;
typedef struct rgcu_red_args {
  int64_t nout;                           /* output elements (rows, for softmax) */
  int nk;                                   /* kept dimensions */
  int64_t kshape[RGCU_MAXND], kst[RGCU_MAXND], ost[RGCU_MAXND];
  int nr;                                   /* reduced dimensions */
  int64_t rshape[RGCU_MAXND], rst[RGCU_MAXND];
  int64_t rn;                             /* elements reduced per output */
  int64_t ast;                            /* softmax: the output's stride along the axis */
  const char *in;
  char *out;
} rgcu_red_args;
/* Elementwise and fused kernels: the nout outputs and nin inputs over the
 * nd-dimensional output shape (an input broadcast has stride 0 where it
 * is stretched); dimensions of size 1 are dropped and dimensions every
 * operand steps over as one are merged, so contiguous operands of any
 * rank are addressed as one dimension. */
void rgcu_ew_args_of(rgcu_ew_args *a, int nd, const int64_t *shape, int nout, rg_tensor *const *outs,
                     int nin, rg_tensor *const *ins);
/* Elementwise kernels index in 32 bits (their source declares rg_idx and
 * rg_div with RGCU_NARROW): cheaper on a GPU, whose 64-bit integer
 * arithmetic is emulated.  rgcu_ew_narrow says whether a launch fits (the
 * element count and every operand's reach in bytes under 2^31);
 * otherwise the backend runs the same kernel widened to 64 bits
 * (rgcu_widen: the source with RGCU_WIDE instead, rg_malloc'd; NULL if it
 * has no RGCU_NARROW).  rg_div(r, mag, sh, d) is r / d: in 32 bits a
 * multiply-high, an add and a shift with rgcu_divisor's numbers, in 64
 * bits the division. */
#define RGCU_NARROW                                                                         \
  "typedef int rg_idx;\n"                                                                   \
  "static __device__ inline rg_idx rg_div(rg_idx r, unsigned mag, int sh, rg_idx d) {"     \
  " return (rg_idx)((__umulhi((unsigned)r, mag) + (unsigned)r) >> sh); }"
#define RGCU_WIDE                                                                           \
  "typedef long long rg_idx;\n"                                                             \
  "static __device__ inline rg_idx rg_div(rg_idx r, unsigned mag, int sh, rg_idx d) {"     \
  " return r / d; }"
/* The numbers that divide by d (1 <= d <= 2^31) in 32 bits: for every
 * 0 <= r < 2^31, r / d == (umulhi(r, mag) + r) >> sh, where sh is the
 * least with 2^sh >= d and mag = floor(2^32 (2^sh - d) / d) + 1
 * (Granlund and Montgomery's round-up multiplier; r < 2^31 keeps the sum
 * under 2^32).  Outside that range of d, mag = sh = 0. */
void rgcu_divisor(int64_t d, uint32_t *mag, int *sh);
char *rgcu_widen(const char *src);
bool rgcu_ew_narrow(const rgcu_ew_args *a, int nops);
/* Reductions (the node's axes) and softmax (its axis): in reduced into out. */
void rgcu_red_args_of(rgcu_red_args *a, const rgb_node *n, const rg_tensor *in, rg_tensor *out);
/* The rank and shape of a reduction's or softmax's output. */
int rgcu_red_shape(const rgb_node *n, const rg_tensor *in, int64_t *shape);
/* Two-pass reductions: a reduction with few outputs (at most 8192) and a
 * long reduced range (1024 elements or more) splits the outermost reduced
 * dimension (R0 rows) into P chunks, P the largest divisor of R0 from 256
 * down to 4 (1: no split).  Pass one (`one`) reduces each chunk into
 * `scratch` (P x outputs values of esz bytes), pass two (`two`) reduces
 * the partials into the output.  Only for ops whose partials combine with
 * the op itself over equal chunks (sum, prod, max, min, all, any; mean: a
 * mean of equal-sized means) and an input of the output's dtype, so the
 * node's one kernel serves both passes.  Summation order differs from one
 * pass (rounding). */
int64_t rgcu_red_split_factor(const rgb_node *n, rg_dtype in_dtype, const rgcu_red_args *a);
void rgcu_red_split_args(const rgcu_red_args *a, int64_t P, int64_t esz, char *scratch, rgcu_red_args *one,
                         rgcu_red_args *two);

/* ------------------------------------------------------------------ loading CUDA's libraries */

/* Opens the library the environment variable `env` names, when set
 * (another implementation of the API: the tests' host implementation in
 * tests/cuda-host), else the first of names[0..n) found.  *named receives
 * the variable's library, NULL when the names were searched (for
 * messages).  NULL when none loads. */
void *rgcu_dlopen(const char *env, const char *const *names, int n, const char **named);

/* ------------------------------------------------------------------ NVRTC */

/* NVRTC, loaded from the toolkit's shared library.  A handle is owned by
 * its opener (a CUDA backend's context, a test) and closed by it. */
typedef struct rgcu_nvrtc rgcu_nvrtc;
rgcu_nvrtc *rgcu_nvrtc_open(char *why, size_t len);
void rgcu_nvrtc_close(rgcu_nvrtc *lib);
/* NVRTC's version, e.g. 13000 for 13.0. */
int rgcu_nvrtc_version(const rgcu_nvrtc *lib);
/* Compiles a kernel's source for an architecture ("sm_80", "sm_90"):
 * *image receives the device code (CUBIN, rg_free) and *size its bytes.
 * Returns 0, or an error with NVRTC's log (its first part) in log. */
int rgcu_nvrtc_compile(rgcu_nvrtc *lib, const char *src, const char *arch, void **image,
                       size_t *size, char *log, size_t loglen);
/* The same through the on-disk cache of device code (cache_dir, or
 * base/cache.c's default when NULL): *hit says whether the image came
 * from the cache.  With reuse false the entry is not read, only written
 * (for an entry the driver could not load). */
int rgcu_nvrtc_compile_cached(rgcu_nvrtc *lib, const char *src, const char *arch, const char *cache_dir,
                              bool reuse, void **image, size_t *size, bool *hit, char *log, size_t loglen);

/* ------------------------------------------------------------------ the backend's context (cuda.c) */

/* The driver API's types and the entry points the backend binds (by
 * dlopen of libcuda.so.1: no CUDA header is needed to build). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef unsigned long long CUdeviceptr;
typedef struct CUevent_st *CUevent;
enum { CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };
enum { CU_EVENT_DISABLE_TIMING = 2, CU_MEMHOSTALLOC_PORTABLE = 1 };

typedef struct rgcu_drv {
  void *dl;
  CUresult (*init)(unsigned);
  CUresult (*count)(int *);
  CUresult (*get)(CUdevice *, int);
  CUresult (*attr)(int *, int, CUdevice);
  CUresult (*retain)(CUcontext *, CUdevice);
  CUresult (*release)(CUdevice);
  CUresult (*set_current)(CUcontext);
  CUresult (*stream_create)(CUstream *, unsigned);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*sync)(CUstream);
  CUresult (*alloc)(CUdeviceptr *, size_t);
  CUresult (*free)(CUdeviceptr);
  CUresult (*load)(CUmodule *, const void *);
  CUresult (*function)(CUfunction *, CUmodule, const char *);
  CUresult (*unload)(CUmodule);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void **, void **);
  CUresult (*error)(CUresult, const char **);
  /* pinned host memory, copies queued on a stream, events */
  CUresult (*host_alloc)(void **, size_t, unsigned);
  CUresult (*host_free)(void *);
  CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
  CUresult (*event_create)(CUevent *, unsigned);
  CUresult (*event_destroy)(CUevent);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_sync)(CUevent);
  CUresult (*stream_wait)(CUstream, CUevent, unsigned);
} rgcu_drv;

/* A CUDA backend object's context.  Invariants: `cu` is the device's
 * primary context, made current before every driver call; every kernel,
 * copy and cuBLAS call of this backend goes to `stream`, which orders
 * them, so a block in `freel` may be handed out while a kernel queued
 * earlier still reads it; kernels[0..nkernels) are loaded modules keyed
 * by their source. */
#define RGCU_FREE_MAX 256 /* blocks kept for reuse */
typedef struct rgcu_block { CUdeviceptr p; size_t size; } rgcu_block;

/* Pinned staging of copies between the stream and ordinary host memory
 * (transfer.c): RGCU_STAGES blocks of RGCU_STAGE_BYTES of page-locked
 * memory (each allocated when the ring first reaches it), filled in turn
 * from offset 0 up.  Invariant: stage_ev[i] is
 * recorded on the stream after the last copy queued that reads or writes
 * block i, and the host writes or reads block i again only once that
 * event has completed (a block is waited for when the ring comes back
 * to it, so an upload returns as soon as its bytes are staged). */
#define RGCU_STAGES 4
#define RGCU_STAGE_BYTES ((size_t)4 << 20)
typedef struct rgcu_stage {
  char *block[RGCU_STAGES];
  CUevent ev[RGCU_STAGES];
  bool queued[RGCU_STAGES];   /* ev recorded since the block was last waited for */
  int cur;                    /* the block being filled */
  size_t used;                /* bytes of it handed out */
} rgcu_stage;

/* The pinned host memory a backend hands out (its host buffer type):
 * live[0..nlive) are the blocks in use, which copies to and from the
 * device use directly; freel[0..nfree) wait for reuse. */
#define RGCU_PIN_FREE_MAX 64
typedef struct rgcu_pin { char *p; size_t size; } rgcu_pin;
typedef struct rgcu_pinned {
  rgcu_pin *live;
  int nlive, caplive;
  rgcu_pin freel[RGCU_PIN_FREE_MAX];
  int nfree;
} rgcu_pinned;
typedef struct rgcu_kernel { uint64_t hash; char *src; CUmodule mod; CUfunction fn; } rgcu_kernel;

typedef struct rgcu_ctx {
  rgcu_drv d;
  int ordinal;
  CUdevice dev;
  CUcontext cu;
  CUstream stream;
  char arch[16];           /* "sm_90" */
  rgcu_nvrtc *nvrtc;       /* opened by the first bind */
  rg_buffer_type buft;     /* ctx = this */
  char name[16];
  rgcu_block freel[RGCU_FREE_MAX];   /* the caching allocator's free blocks */
  int nfree;
  rgcu_kernel *kernels;         /* compiled kernels */
  int nkernels, capk;
  CUfunction copyk[RG_NDTYPES][RG_NDTYPES]; /* copy kernels by dtypes, loaded on use */
  CUfunction copyk_wide[RG_NDTYPES][RG_NDTYPES]; /* the same with 64-bit indices */
  struct rgcu_blas *blas;  /* cuBLAS, loaded by the first BLAS node placed */
  bool blas_failed;        /* cuBLAS could not be loaded: BLAS nodes go to the CPU */
  rgcu_stage stage;        /* pinned staging of host copies (transfer.c) */
  rgcu_pinned pinned;      /* pinned host memory handed out */
  rg_buffer_type host_buft; /* that memory as a buffer type (device: the host) */
  char host_name[32];      /* "cuda:0:pinned" */
  CUevent mark;            /* recorded where another stream or the host waits for this one */
} rgcu_ctx;

/* ------------------------------------------------------------------ transfers (transfer.c) */

/* The copies of the device's buffer type (download, upload, copy_from,
 * order) and the pinned host buffer type.  Uploads from ordinary host
 * memory are staged in pinned blocks and queued on the stream: the host
 * does not wait for the device.  Downloads are queued into staging
 * (pipelined by blocks) and waited for by their events: the host reads
 * them.  Memory of the host buffer type is copied to and from directly,
 * and waited for (the caller may reuse it on return).  Copies between
 * two CUDA backend objects are queued on the destination's stream after
 * an event of the source's, whose stream then waits for the copy (no
 * host round trip; peer copies between devices). */
int rgcu_transfer_init(rgcu_ctx *c, char *why, size_t len);
void rgcu_transfer_fini(rgcu_ctx *c);
int rgcu_download(const rg_buffer_type *bt, void *host, const void *src, size_t n);
int rgcu_upload(const rg_buffer_type *bt, void *dst, const void *host, size_t n);
int rgcu_copy_from(const rg_buffer_type *bt, void *dst, const rg_buffer_type *from, const void *src, size_t n);
int rgcu_order(const rg_buffer_type *earlier, const rg_buffer_type *later);

/* A strided copy on the device (src and dst of the same shape, any
 * strides and dtypes, converting as a cast does), queued on the stream. */
int rgcu_copy(rgb_exec *x, rgcu_ctx *c, rg_tensor *dst, const rg_tensor *src);
/* The same as an rgbc_copy_fn, for a kernel of the CUDA backend (its
 * context from the kernel's state): the copies of the CPU's shape rules
 * (reshape, flatten, join) and of BLAS outputs. */
int rgcu_copy_fn(rgb_exec *x, rg_tensor *dst, const rg_tensor *src);
/* The reason of a driver error. */
const char *rgcu_error(const rgcu_drv *d, CUresult r);

/* ------------------------------------------------------------------ cuBLAS (blas.c) */

/* dot, outer, gemm, gemv and ger of float32 and float64 through cuBLAS,
 * loaded with dlopen (libcublas.so.13 or .12) when the first such node is
 * bound; one handle per backend context, on its stream. */
typedef struct rgcu_blas rgcu_blas;
bool rgcu_blas_supports(const rgb_node *n);
rgcu_blas *rgcu_blas_open(rgcu_ctx *c, char *why, size_t len);
void rgcu_blas_close(rgcu_blas *b);
int rgcu_blas_run(rgb_exec *x, rgcu_ctx *c);

#endif
