/*
 * cuda.c — the CUDA backend: device memory, transfers, and the generated
 * kernels launched through the driver API.
 *
 * Everything CUDA is loaded at run time: the driver (libcuda.so.1) when a
 * backend is made or its availability asked, NVRTC when the first kernel
 * is bound; both stay loaded (a driver that has started is never
 * unloaded).  Every call into the driver first makes the backend's context
 * current on the calling thread, so functions and tensors may be used
 * from any thread.  A machine without them builds, links and runs, and
 * rg_backend_available("cuda", ...) says which is missing (no driver, no
 * device, no NVRTC).
 *
 * A backend object ("cuda" or "cuda:N") holds the device's primary
 * context, one blocking stream, a caching allocator, pinned staging for
 * copies, pinned host memory to hand out, and the kernels it has
 * loaded (keyed by their source; the device code of each comes from the
 * disk cache or one NVRTC compilation for the device's architecture).
 * Kernels run asynchronously on the stream in schedule order; the buffers
 * a released value leaves go back to the allocator's free list and are
 * reused by later kernels of the same stream, which the stream orders.
 * Copies are queued on the stream too (transfer.c): uploads through
 * pinned staging, so the host does not wait for them; downloads waited
 * for by events, so a value read by the host is complete; copies between
 * backend objects ordered by events of both streams.
 *
 * What runs here: every elementwise node (but integer pow, whose errors
 * only the CPU reports) and fused group, the reductions and softmax
 * (backend/cuda/gen.c, the CPU's semantics), strided copies, alloc and
 * alloc_empty, dimshuffle, subtensor and split as views (the CPU's own
 * kernels: they only compute shapes and strides), reshape, flatten and
 * join (the CPU's shape rules with device copies), and dot, outer, gemm,
 * gemv and ger through cuBLAS (backend/cuda/blas.c).  Shape arguments
 * (alloc's shape, subtensor's indices, ...) are read on the host
 * (host_input).  inc_subtensor and set_subtensor run through the CPU's
 * index rules with a device copy and a generated addition, and a Scan
 * through the CPU's executor with device buffers (backend/cpu/scan.c).
 * Everything else runs on the CPU with transfers.
 */
#include "backend/cuda/cuda-impl.h"
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the driver API */

void *rgcu_dlopen(const char *env, const char *const *names, int n, const char **named) {
  const char *lib = getenv(env);
  *named = lib && *lib ? lib : NULL;
  if (*named) return dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  for (int i = 0; i < n; i++) {
    void *dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (dl) return dl;
  }
  return NULL;
}

/* Loads the driver and binds the entry points used. */
static bool drv_open(rgcu_drv *d, char *why, size_t len) {
  memset(d, 0, sizeof *d);
  static const char *const names[] = {"libcuda.so.1"};
  const char *lib;
  d->dl = rgcu_dlopen("RELGRAPH_CUDA_DRIVER", names, 1, &lib);
  if (!d->dl) return rg_say(why, len, "no CUDA driver (%s cannot be loaded)", lib ? lib : names[0]);
#define SYM(f, name) (*(void **)&d->f = dlsym(d->dl, name)) != NULL
  bool ok = SYM(init, "cuInit") && SYM(count, "cuDeviceGetCount") && SYM(get, "cuDeviceGet") &&
            SYM(attr, "cuDeviceGetAttribute") && SYM(retain, "cuDevicePrimaryCtxRetain") &&
            SYM(release, "cuDevicePrimaryCtxRelease_v2") && SYM(set_current, "cuCtxSetCurrent") &&
            SYM(stream_create, "cuStreamCreate") && SYM(stream_destroy, "cuStreamDestroy_v2") &&
            SYM(sync, "cuStreamSynchronize") && SYM(alloc, "cuMemAlloc_v2") &&
            SYM(free, "cuMemFree_v2") &&
            SYM(load, "cuModuleLoadData") && SYM(function, "cuModuleGetFunction") &&
            SYM(unload, "cuModuleUnload") && SYM(launch, "cuLaunchKernel") &&
            SYM(error, "cuGetErrorString") && SYM(host_alloc, "cuMemHostAlloc") &&
            SYM(host_free, "cuMemFreeHost") && SYM(htod_async, "cuMemcpyHtoDAsync_v2") &&
            SYM(dtoh_async, "cuMemcpyDtoHAsync_v2") && SYM(dtod_async, "cuMemcpyDtoDAsync_v2") &&
            SYM(peer_async, "cuMemcpyPeerAsync") && SYM(event_create, "cuEventCreate") &&
            SYM(event_destroy, "cuEventDestroy_v2") && SYM(event_record, "cuEventRecord") &&
            SYM(event_sync, "cuEventSynchronize") && SYM(stream_wait, "cuStreamWaitEvent");
#undef SYM
  if (!ok) {
    dlclose(d->dl);
    return rg_say(why, len, "the CUDA driver found lacks an entry point relgraph uses");
  }
  return true;
}

const char *rgcu_error(const rgcu_drv *d, CUresult r) {
  const char *s = NULL;
  if (d->error && d->error(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}

/* The number of devices, or -1 with the reason. */
static int device_count(rgcu_drv *d, char *why, size_t len) {
  CUresult r = d->init(0);
  if (r) return rg_say(why, len, "the CUDA driver does not start: %s", rgcu_error(d, r)), -1;
  int n = 0;
  if ((r = d->count(&n))) return rg_say(why, len, "no CUDA device: %s", rgcu_error(d, r)), -1;
  if (n == 0) return rg_say(why, len, "no CUDA device"), -1;
  return n;
}

static bool cuda_available(int ordinal, char *why, size_t len) {
  rgcu_drv d;
  if (!drv_open(&d, why, len)) return false;
  int n = device_count(&d, why, len);
  if (n < 0) return false;
  if (ordinal >= n) return rg_say(why, len, "no CUDA device %d (%d present)", ordinal, n);
  rgcu_nvrtc *nv = rgcu_nvrtc_open(why, len);
  if (!nv) return false;
  rgcu_nvrtc_close(nv);
  return true;
}

/* ------------------------------------------------------------------ a backend's context */

/* ------------------------------------------------------------------ device memory */

/* Blocks are rounded to 256 bytes; a freed block waits in the free list
 * for an allocation of about its size (at most twice smaller), so the
 * buffers of a program's values are reused from call to call without the
 * driver.  One stream orders every use, so a block freed while a kernel
 * still reads it is only reused by a later kernel. */
static size_t rounded(size_t n) { return (n + 255) & ~(size_t)255; }

static void *cu_alloc(const rg_buffer_type *bt, size_t n) {
  rgcu_ctx *c = bt->ctx;
  if (c->d.set_current(c->cu)) return NULL;
  size_t want = rounded(n);
  for (int i = c->nfree - 1; i >= 0; i--)
    if (c->freel[i].size >= want && c->freel[i].size <= 2 * want + 65536) {
      CUdeviceptr p = c->freel[i].p;
      c->freel[i] = c->freel[--c->nfree];
      return (void *)(uintptr_t)p;
    }
  CUdeviceptr p = 0;
  if (c->d.alloc(&p, want) == 0) return (void *)(uintptr_t)p;
  /* out of device memory: give the cached blocks back and try again */
  for (int i = 0; i < c->nfree; i++) c->d.free(c->freel[i].p);
  c->nfree = 0;
  return c->d.alloc(&p, want) == 0 ? (void *)(uintptr_t)p : NULL;
}

static void cu_free(const rg_buffer_type *bt, void *base, size_t n) {
  rgcu_ctx *c = bt->ctx;
  c->d.set_current(c->cu);
  if (c->nfree < RGCU_FREE_MAX) c->freel[c->nfree++] = (rgcu_block){(CUdeviceptr)(uintptr_t)base, rounded(n)};
  else c->d.free((CUdeviceptr)(uintptr_t)base);
}

/* ------------------------------------------------------------------ init and fini */

static void cuda_fini(void *ctx) {
  rgcu_ctx *c = ctx;
  if (!c) return;
  if (c->cu) c->d.set_current(c->cu);
  if (c->stream) c->d.sync(c->stream);
  rgcu_transfer_fini(c);
  for (int i = 0; i < c->nfree; i++) c->d.free(c->freel[i].p);
  for (int i = 0; i < c->nkernels; i++) {
    c->d.unload(c->kernels[i].mod);
    rg_free(c->kernels[i].src);
  }
  rg_free(c->kernels);
  rgcu_blas_close(c->blas);
  if (c->stream) c->d.stream_destroy(c->stream);
  if (c->cu) c->d.release(c->dev);
  rgcu_nvrtc_close(c->nvrtc);
  rg_free(c);
}

/* The device, its context, the stream, the architecture. */
static bool open_device(rgcu_ctx *c, char *why, size_t len) {
  int n = device_count(&c->d, why, len);
  if (n < 0) return false;
  if (c->ordinal >= n) return rg_say(why, len, "no CUDA device %d (%d present)", c->ordinal, n);
  CUresult r;
  int major = 0, minor = 0;
  if ((r = c->d.get(&c->dev, c->ordinal)) || (r = c->d.retain(&c->cu, c->dev)) ||
      (r = c->d.set_current(c->cu)) || (r = c->d.stream_create(&c->stream, 0)) ||
      (r = c->d.attr(&major, CU_ATTR_CC_MAJOR, c->dev)) || (r = c->d.attr(&minor, CU_ATTR_CC_MINOR, c->dev)))
    return rg_say(why, len, "CUDA device %d: %s", c->ordinal, rgcu_error(&c->d, r));
  snprintf(c->arch, sizeof c->arch, "sm_%d%d", major, minor);
  return true;
}

static int cuda_init(const char *spec, void **ctx, rg_device *device, char *why, size_t len) {
  rgcu_ctx *c = rg_calloc(1, sizeof *c);
  if (!c) return rg_say(why, len, "out of memory"), RG_ERR_NOMEM;
  if (rgb_device_ordinal(spec, &c->ordinal)) {
    rg_free(c);
    return rg_say(why, len, "bad CUDA device in '%s' (cuda or cuda:N)", spec), RG_ERR_SYNTAX;
  }
  if (!drv_open(&c->d, why, len)) {
    rg_free(c);
    return RG_ERR;
  }
  if (!open_device(c, why, len)) {
    cuda_fini(c);
    return RG_ERR;
  }
  snprintf(c->name, sizeof c->name, "cuda:%d", c->ordinal);
  c->buft = (rg_buffer_type){.name = c->name, .device = RG_DEVICE_CUDA(c->ordinal), .ctx = c,
                             .alloc = cu_alloc, .free = cu_free, .download = rgcu_download,
                             .upload = rgcu_upload, .copy_from = rgcu_copy_from, .order = rgcu_order};
  if (rgcu_transfer_init(c, why, len)) {
    cuda_fini(c);
    return RG_ERR;
  }
  *ctx = c;
  *device = c->buft.device;
  return 0;
}

static const rg_buffer_type *cuda_buffer_type(void *ctx) { return &((rgcu_ctx *)ctx)->buft; }
static const rg_buffer_type *cuda_host_buffer_type(void *ctx) { return &((rgcu_ctx *)ctx)->host_buft; }

/* ------------------------------------------------------------------ kernels */

enum { K_EW, K_FUSED, K_RED, K_SOFTMAX, K_BLAS, K_ALLOC, K_VIEW, K_SHAPE, K_SCAN, K_UPDATE };

static int kind_of(const rgb_node *n) {
  if (n->code == RG_OP_COMPOSITE) return K_FUSED;
  if (n->code == RG_OP_SOFTMAX || n->code == RG_OP_LOG_SOFTMAX) return K_SOFTMAX;
  if (rgcu_blas_supports(n)) return K_BLAS;
  switch (n->code) {
  case RG_OP_ALLOC: case RG_OP_ALLOC_EMPTY: return K_ALLOC;
  case RG_OP_DIMSHUFFLE: case RG_OP_SUBTENSOR: case RG_OP_SPLIT: return K_VIEW;
  case RG_OP_RESHAPE: case RG_OP_FLATTEN: case RG_OP_JOIN: return K_SHAPE;
  case RG_OP_SCAN: return K_SCAN;
  case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: return K_UPDATE;
  default: break;
  }
  switch (rg_opcode_family(n->code)) {
  case RG_FAM_ELEMWISE: return K_EW;
  case RG_FAM_REDUCE: return K_RED;
  default: return -1;
  }
}

/* inc_subtensor's addition into the selection: an add node of the
 * output's dtype over (the selection, the values). */
static char *update_add_source(const rgb_node *n, char *why, size_t len) {
  rgb_vtype in[2] = {n->out[0], n->in[1]};
  rgb_node add = {.code = RG_OP_ADD, .dtype = RG_NDTYPES, .inplace = -1, .nin = 2, .nout = 1,
                  .in = in, .out = n->out, .label = "inc_subtensor"};
  return rgcu_gen_elemwise(&add, why, len);
}

static char *source_of(const rgb_node *n, char *why, size_t len) {
  switch (kind_of(n)) {
  case K_UPDATE:
    if (n->code == RG_OP_INC_SUBTENSOR) return update_add_source(n, why, len);
    return rg_say(why, len, "%s: no CUDA kernel", n->label), NULL;
  case K_EW: return rgcu_gen_elemwise(n, why, len);
  case K_FUSED: return rgcu_gen_composite(n, why, len);
  case K_RED: return rgcu_gen_reduce(n, why, len);
  case K_SOFTMAX: return rgcu_gen_softmax(n, why, len);
  default: return rg_say(why, len, "%s: no CUDA kernel", n->label), NULL;
  }
}

/* A Scan copies rows of its inputs and outputs with the copy kernel. */
static bool scan_ranks_fit(const rgb_node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i].ndim > RGCU_MAXND) return false;
  for (int j = 0; j < n->nout; j++)
    if (n->out[j].ndim > RGCU_MAXND) return false;
  return true;
}

static bool ranks_fit(const rgb_node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i].ndim > RGCU_MAXND) return false;
  for (int j = 0; j < n->nout; j++)
    if (n->out[j].ndim > RGCU_MAXND) return false;
  return n->nin + n->nout <= RGCU_MAXOPS;
}

static bool int_pow(const rgb_node *n) {
  return n->code == RG_OP_POW && n->nout == 1 && !rg_dtype_is_float(n->out[0].dtype);
}

/* Whether cuBLAS is there (loaded once, when a BLAS node is first
 * placed): without it the products run on the CPU, as any op the backend
 * lacks. */
static bool blas_ready(rgcu_ctx *c) {
  char why[8];
  if (!c->blas && !c->blas_failed) c->blas_failed = !(c->blas = rgcu_blas_open(c, why, sizeof why));
  return c->blas != NULL;
}

static bool cuda_supports(void *ctx, const rgb_node *n) {
  int kind = kind_of(n);
  if (kind == K_BLAS) return blas_ready(ctx);
  if (kind == K_ALLOC || kind == K_VIEW || kind == K_SHAPE) return ranks_fit(n);
  if (kind == K_SCAN) return scan_ranks_fit(n);
  if (kind == K_UPDATE && (!ranks_fit(n) || n->in[1].ndim > RGCU_MAXND)) return false;
  if (kind == K_UPDATE && n->code == RG_OP_SET_SUBTENSOR) return true;
  if (kind < 0 || !ranks_fit(n)) return false;
  /* generation turned off (rg_compile_opts.no_codegen): a fused group runs
   * on the CPU by the composite interpreter, as the option says */
  if (kind == K_FUSED && n->codegen && n->codegen->off) return false;
  /* integer pow reports negative exponents, which a kernel cannot: the CPU runs it */
  if (int_pow(n)) return false;
  for (int32_t t = 0; n->inner && t < n->inner->nthunks; t++)
    if (int_pow(&n->inner->thunks[t].node)) return false;
  char why[8];
  char *src = source_of(n, why, sizeof why);
  rg_free(src);
  return src != NULL;
}

/* The compiled kernel of a source (compiled on first use). */
static CUfunction kernel_for(rgcu_ctx *c, char *src, const char *cache_dir, char *why, size_t len) {
  uint64_t h = rg_fnv1a(src, RG_FNV_SEED);
  for (int i = 0; i < c->nkernels; i++)
    if (c->kernels[i].hash == h && !strcmp(c->kernels[i].src, src)) {
      rg_free(src);
      return c->kernels[i].fn;
    }
  if (!c->nvrtc && !(c->nvrtc = rgcu_nvrtc_open(why, len))) return rg_free(src), NULL;
  void *image = NULL;
  size_t size;
  char log[2048];
  bool hit = true;
  rgcu_kernel k = {.hash = h, .src = src};
  CUresult r = 0;
  /* an entry of the cache the driver cannot load is compiled again, once */
  for (bool reuse = true; hit; reuse = false) {
    if (rgcu_nvrtc_compile_cached(c->nvrtc, src, c->arch, cache_dir, reuse, &image, &size, &hit, log, sizeof log)) {
      rg_say(why, len, "NVRTC: %s", log);
      rg_free(src);
      return NULL;
    }
    r = c->d.load(&k.mod, image);
    rg_free(image);
    if (!r && (r = c->d.function(&k.fn, k.mod, "rg_kernel"))) c->d.unload(k.mod);
    if (!r) break;
  }
  if (r) return rg_say(why, len, "loading a kernel: %s", rgcu_error(&c->d, r)), rg_free(src), NULL;
  if (c->nkernels == c->capk) {
    int cap = c->capk ? 2 * c->capk : 32;
    rgcu_kernel *v = rg_realloc(c->kernels, (size_t)cap * sizeof *v);
    if (!v) return c->d.unload(k.mod), rg_free(src), rg_say(why, len, "out of memory"), NULL;
    c->kernels = v;
    c->capk = cap;
  }
  c->kernels[c->nkernels++] = k;
  return k.fn;
}

/* A bound kernel's state: the function and the backend it runs on; for
 * elementwise kernels, the source widened to 64-bit indices and its
 * function, compiled the first time a launch needs it. */
typedef struct cuda_state {
  rgcu_ctx *c;
  CUfunction fn;
  int kind;
  char *wide_src;
  CUfunction wide;
  const char *cache_dir; /* the function's (rgb_codegen), or NULL */
} cuda_state;

static void free_state(void *p) {
  cuda_state *s = p;
  if (s) rg_free(s->wide_src);
  rg_free(s);
}

/* The function of an elementwise launch: narrow where its indices fit in
 * 32 bits, else the widened kernel (compiled on first use). */
static CUfunction ew_function(rgb_exec *x, cuda_state *s, const rgcu_ew_args *a, int nops) {
  if (rgcu_ew_narrow(a, nops)) return s->fn;
  if (s->wide) return s->wide;
  char why[512];
  char *src = s->wide_src;
  s->wide_src = NULL; /* kernel_for takes it */
  if (!src || !(s->wide = kernel_for(s->c, src, s->cache_dir, why, sizeof why))) {
    rgb_error(x, RG_ERR, "a kernel with 64-bit indices on %s: %s", s->c->name, src ? why : "lost");
    return NULL;
  }
  return s->wide;
}

/* A grid-stride kernel over n items, `per` of them a thread per pass: 256
 * threads a block, at most 65535 blocks. */
static int launch(rgb_exec *x, rgcu_ctx *c, CUfunction fn, void *args, long long n, int per) {
  if (n <= 0) return 0;
  long long blocks = (n + 256LL * per - 1) / (256LL * per);
  unsigned grid = (unsigned)(blocks < 65535 ? blocks : 65535);
  void *params[] = {args};
  CUresult r = c->d.launch(fn, grid, 1, 1, 256, 1, 1, 0, c->stream, params, NULL);
  return r ? rgb_error(x, RG_ERR, "CUDA launch: %s", rgcu_error(&c->d, r)) : 0;
}

int rgcu_copy(rgb_exec *x, rgcu_ctx *c, rg_tensor *dst, const rg_tensor *src) {
  rgcu_ew_args a;
  rgcu_ew_args_of(&a, dst->ndim, dst->shape, 1, &dst, 1, (rg_tensor *const *)&src);
  bool narrow = rgcu_ew_narrow(&a, 2);
  CUfunction *fn = narrow ? &c->copyk[src->dtype][dst->dtype] : &c->copyk_wide[src->dtype][dst->dtype];
  if (!*fn) { /* the first copy between these dtypes in this width */
    char why[512];
    char *code = rgcu_gen_copy(src->dtype, dst->dtype, why, sizeof why);
    if (code && !narrow) {
      char *w = rgcu_widen(code);
      rg_free(code);
      if (!(code = w)) snprintf(why, sizeof why, "out of memory");
    }
    if (!code || !(*fn = kernel_for(c, code, NULL, why, sizeof why)))
      return rgb_error(x, RG_ERR, "a copy on %s: %s", c->name, why);
  }
  return launch(x, c, *fn, &a, a.n, RGCU_UNROLL);
}

/* Elementwise nodes and composites.  A composite that a join was folded
 * into (join_slot) writes its parts as strided views of the joined value,
 * its last output (rgb_joined_outputs): the kernel takes any strides. */
static int run_ew(rgb_exec *x, cuda_state *s) {
  const rgb_node *n = x->node;
  int64_t shape[RG_MAX_NDIM];
  int nd, nout = n->join_slot ? n->nout - 1 : n->nout;
  rg_tensor *outs[RGCU_MAXOPS], *ins[RGCU_MAXOPS];
  for (int i = 0; i < n->nin; i++) ins[i] = rgb_in(x, i);
  /* the CPU's rule: a dimension stretches only where its static size is 1 */
  int rc = rgbc_broadcast_shape(x, n->nin, (const rg_tensor *const *)ins, n->in, &nd, shape);
  if (rc) return rc;
  if (n->join_slot && rgb_joined_outputs(x, nd, shape, NULL, NULL)) return x->rt->errcode;
  for (int j = 0; j < nout; j++)
    if (n->join_slot && n->join_slot[j] >= 0) outs[j] = *x->outp[j];
    else if (!(outs[j] = rgb_output(x, j, n->out[j].dtype, nd, shape))) return x->rt->errcode;
  rgcu_ew_args a;
  rgcu_ew_args_of(&a, nd, shape, nout, outs, n->nin, ins);
  CUfunction fn = ew_function(x, s, &a, nout + n->nin);
  return fn ? launch(x, s->c, fn, &a, a.n, RGCU_UNROLL) : x->rt->errcode;
}

/* A reduction with few outputs and a long reduced range runs in two
 * passes of its kernel (rgcu_red_split_args): partials into a scratch
 * buffer of the device, then the partials reduced. */
static int run_red_split(rgb_exec *x, const cuda_state *s, const rgcu_red_args *a, int64_t P, rg_dtype dt) {
  int64_t total = P * a->nout;
  rg_tensor *scratch = rg_tensor_empty_on(x->buft, dt, 1, &total);
  if (!scratch) return rgb_error(x, RG_ERR_NOMEM, "out of memory on %s", x->buft->name);
  rgcu_red_args one, two;
  rgcu_red_split_args(a, P, (int64_t)rg_dtype_size(dt), scratch->data, &one, &two);
  int rc = launch(x, s->c, s->fn, &one, one.nout, 1);
  if (!rc) rc = launch(x, s->c, s->fn, &two, two.nout, 1);
  rg_tensor_free(scratch); /* the caching allocator reuses it in stream order */
  return rc;
}

/* Reductions and softmax: kept and reduced dimensions of the input. */
static int run_red(rgb_exec *x, const cuda_state *s) {
  const rgb_node *n = x->node;
  const rg_tensor *in = rgb_in(x, 0);
  int64_t oshape[RG_MAX_NDIM];
  int od = rgcu_red_shape(n, in, oshape);
  rg_tensor *o = rgb_output(x, 0, n->out[0].dtype, od, oshape);
  if (!o) return x->rt->errcode;
  rgcu_red_args a;
  rgcu_red_args_of(&a, n, in, o);
  if (a.rn == 0 && a.nout > 0) {
    if (s->kind == K_SOFTMAX) return RG_OK; /* rows of no elements: nothing to write */
    if (rgbc_reduce_needs_elements(n->code)) return rgbc_empty_reduce_error(x);
  }
  int64_t P = s->kind == K_RED ? rgcu_red_split_factor(n, in->dtype, &a) : 1;
  if (P > 1) return run_red_split(x, s, &a, P, o->dtype);
  return launch(x, s->c, s->fn, &a, a.nout, 1);
}

/* alloc (the value broadcast by a copy) and alloc_empty; the shape comes
 * from host scalars (host_input). */
static int run_alloc(rgb_exec *x, rgcu_ctx *c) {
  const rgb_node *n = x->node;
  int64_t shape[RG_MAX_NDIM];
  if (rgbc_alloc_shape(x, shape)) return x->rt->errcode;
  bool empty = n->code == RG_OP_ALLOC_EMPTY;
  rg_tensor *out = rgb_output(x, 0, n->out[0].dtype, empty ? n->nin : n->nin - 1, shape);
  if (!out) return x->rt->errcode;
  return empty ? RG_OK : rgcu_copy(x, c, out, rgb_in(x, 0));
}

int rgcu_copy_fn(rgb_exec *x, rg_tensor *dst, const rg_tensor *src) {
  return rgcu_copy(x, ((const cuda_state *)x->state)->c, dst, src);
}

/* dst += src (broadcast), inc_subtensor's kernel over the selection. */
static int update_add(rgb_exec *x, rg_tensor *dst, const rg_tensor *src) {
  cuda_state *s = x->state;
  rg_tensor *ins[2] = {dst, (rg_tensor *)src};
  rgcu_ew_args a;
  rgcu_ew_args_of(&a, dst->ndim, dst->shape, 1, &dst, 2, ins);
  CUfunction fn = ew_function(x, s, &a, 3);
  return fn ? launch(x, s->c, fn, &a, a.n, RGCU_UNROLL) : x->rt->errcode;
}

static bool cuda_host_input(void *ctx, const rgb_node *n, int i) {
  (void)ctx;
  return rgb_shape_argument(n, i);
}

static int cuda_run(rgb_exec *x) {
  cuda_state *s = x->state;
  rgcu_ctx *c = s->c;
  CUresult r = c->d.set_current(c->cu);
  if (r) return rgb_error(x, RG_ERR, "CUDA: %s", rgcu_error(&c->d, r));
  if (s->kind == K_BLAS) return rgcu_blas_run(x, c);
  if (s->kind == K_ALLOC) return run_alloc(x, c);
  if (s->kind == K_SCAN) return rgbc_scan_with(x, rgcu_copy_fn); /* its steps' kernels are on this stream */
  if (s->kind == K_UPDATE) return rgbc_set_subtensor_with(x, rgcu_copy_fn, update_add);
  if (s->kind == K_SHAPE) {
    rgbc_copy_fn copy = rgcu_copy_fn;
    if (x->node->code == RG_OP_JOIN) return rgbc_join_with(x, copy);
    return x->node->code == RG_OP_RESHAPE ? rgbc_reshape_with(x, copy) : rgbc_flatten_with(x, copy);
  }
  return s->kind == K_RED || s->kind == K_SOFTMAX ? run_red(x, s) : run_ew(x, s);
}

static int cuda_bind(void *ctx, const rgb_node *n, rgb_bound *out, char *why, size_t len) {
  rgcu_ctx *c = ctx;
  int kind = kind_of(n);
  if (kind == K_VIEW) { /* views: the CPU's kernels, which only read shapes and strides */
    *out = (rgb_bound){.fn = rgb_cpu_kernels[n->code]};
    return 0;
  }
  if (kind == K_BLAS || kind == K_ALLOC || kind == K_SHAPE || kind == K_SCAN ||
      (kind == K_UPDATE && n->code == RG_OP_SET_SUBTENSOR)) {
    cuda_state *s = rg_malloc(sizeof *s);
    if (!s) return rg_say(why, len, "out of memory"), RG_ERR;
    if (kind == K_BLAS && !c->blas && !(c->blas = rgcu_blas_open(c, why, len))) return rg_free(s), RG_ERR;
    *s = (cuda_state){.c = c, .kind = kind};
    *out = (rgb_bound){.fn = cuda_run, .state = s, .free_state = rg_free};
    return 0;
  }
  char *src = source_of(n, why, len);
  if (!src) return RG_ERR;
  cuda_state *s = rg_malloc(sizeof *s);
  /* elementwise kernels keep their 64-bit form for launches too large for 32-bit indices */
  bool ew = kind == K_EW || kind == K_FUSED || kind == K_UPDATE;
  char *wide = s && ew ? rgcu_widen(src) : NULL;
  const char *cache_dir = n->codegen ? n->codegen->cache_dir : NULL;
  CUfunction fn = s ? kernel_for(c, src, cache_dir, why, len) : (rg_free(src), NULL);
  if (!fn || (ew && !wide)) {
    if (fn) rg_say(why, len, "out of memory");
    rg_free(wide);
    rg_free(s);
    return RG_ERR;
  }
  *s = (cuda_state){.c = c, .fn = fn, .kind = kind, .wide_src = wide, .cache_dir = cache_dir};
  *out = (rgb_bound){.fn = cuda_run, .state = s, .free_state = free_state};
  return 0;
}

static int cuda_synchronize(void *ctx) {
  rgcu_ctx *c = ctx;
  return c->d.set_current(c->cu) || c->d.sync(c->stream) ? RG_ERR : 0;
}

const rgb_backend rgb_cuda_backend = {
    .abi = RGB_BACKEND_ABI,
    .name = "cuda",
    .device = RG_DEVICE_CUDA(0),
    .available = cuda_available,
    .init = cuda_init,
    .fini = cuda_fini,
    .buffer_type = cuda_buffer_type,
    .host_buffer_type = cuda_host_buffer_type,
    .supports = cuda_supports,
    .bind = cuda_bind,
    .synchronize = cuda_synchronize,
    .inner_on_host = true, /* a composite's inner graph only describes its kernel */
    .host_input = cuda_host_input,
    .joins_composites = true, /* run_ew */
};
