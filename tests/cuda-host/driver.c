/*
 * driver.c — the CUDA driver calls the backend makes, implemented on the
 * host, for tests of the CUDA backend without a GPU
 * (tests/test_cuda_transfers.c and test_cuda_host.c load it through
 * RELGRAPH_CUDA_DRIVER; its NVRTC and cuBLAS are nvrtc.c and cublas.c).
 *
 * It is the least forgiving driver the API allows: work queued on a
 * stream (copies, event records, waits for other streams' events) is
 * done only when something waits for it (cuStreamSynchronize,
 * cuEventSynchronize, and cuMemFree, which waits for every stream as the
 * real call waits for the device), and then in queue
 * order, a wait first completing the other stream up to its event.  So a
 * host that reads or rewrites memory before the copy using it is done
 * sees the wrong values, and missing order between two streams shows.
 *
 * Two devices, compute capability 9.0, one primary context each.  Device
 * memory is host memory.  A module is a shared object of host code made
 * by nvrtc.c; a launch is queued and runs the kernel's host code on the
 * arguments as they were at the launch.
 *
 * What it saw is counted in rgtest_cuda_stats (host.h), which the tests
 * read: host waits, queued copies, queued copies whose host side is not
 * pinned (the real driver would not overlap them), device pointers
 * outside any allocation, kernels and cuBLAS calls.
 */
#include "host.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, INVALID = 1, NOT_READY = 600, BAD_IMAGE = 200, NOT_FOUND = 500 };

/* ------------------------------------------------------------------ memory */

typedef struct region { char *p; size_t n; } region;
typedef struct regions { region *v; int n, cap; } regions;
static regions device_mem, pinned_mem;
static long stats[RGTEST_NSTATS];
static void *last_host;

static void add_region(regions *r, char *p, size_t n) {
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 64;
    r->v = realloc(r->v, (size_t)r->cap * sizeof *r->v);
  }
  r->v[r->n++] = (region){p, n};
}

static int find_region(const regions *r, const void *p) {
  for (int i = 0; i < r->n; i++)
    if (r->v[i].p == p) return i;
  return -1;
}

static bool inside(const regions *r, const void *p, size_t n) {
  const char *q = p;
  for (int i = 0; i < r->n; i++)
    if (q >= r->v[i].p && q + n <= r->v[i].p + r->v[i].n) return true;
  return false;
}

/* ------------------------------------------------------------------ streams and events */

enum { OP_COPY, OP_MARK, OP_WAIT, OP_CALL };
typedef struct op {
  int kind;
  char *dst;
  const char *src;
  size_t n;
  stream *other; /* OP_WAIT: complete `other` up to op `upto` */
  long upto;
  void (*fn)(void *); /* OP_CALL: fn(closure), then free(closure) */
  void *closure;
} op;
struct stream {
  op *q;
  long n, cap, done; /* q[0..done) are done */
};
typedef struct event { stream *s; long at; } event; /* at: the index of its mark, -1: none */

#define MAX_STREAMS 64
static stream *streams[MAX_STREAMS];
static int nstreams;

static long push(stream *s, op o) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 64;
    s->q = realloc(s->q, (size_t)s->cap * sizeof *s->q);
  }
  s->q[s->n] = o;
  return s->n++;
}

static void complete(stream *s, long upto) {
  while (s->done <= upto && s->done < s->n) {
    op o = s->q[s->done++];
    if (o.kind == OP_COPY) memcpy(o.dst, o.src, o.n);
    else if (o.kind == OP_WAIT) complete(o.other, o.upto);
    else if (o.kind == OP_CALL) o.fn(o.closure), free(o.closure);
  }
}

void rgtest_queue_call(stream *s, void (*fn)(void *), void *closure) {
  push(s, (op){.kind = OP_CALL, .fn = fn, .closure = closure});
}

void rgtest_complete(stream *s) { complete(s, s->n - 1); }
void rgtest_count(int stat) { stats[stat]++; }

static void complete_all(void) {
  for (int i = 0; i < nstreams; i++)
    if (streams[i]) complete(streams[i], streams[i]->n - 1);
}

/* A queued copy: device sides must be device memory; the host side of a
 * host copy should be pinned. */
static CUresult queue_copy(stream *s, char *dst, const char *src, size_t n, int host_side) {
  if ((host_side != 1 && !inside(&device_mem, dst, n)) || (host_side != 2 && !inside(&device_mem, src, n)))
    stats[RGTEST_BAD_POINTERS]++;
  if (host_side) {
    const void *h = host_side == 1 ? (const void *)dst : (const void *)src;
    if (!inside(&pinned_mem, h, n)) stats[RGTEST_PAGEABLE_ASYNC]++;
    last_host = (void *)h;
  }
  stats[RGTEST_ASYNC_COPIES]++;
  push(s, (op){.kind = OP_COPY, .dst = dst, .src = src, .n = n});
  return OK;
}

/* ------------------------------------------------------------------ the entry points */

#define API __attribute__((visibility("default")))

API CUresult cuInit(unsigned f) { return (void)f, OK; }
API CUresult cuDeviceGetCount(int *n) { return *n = 2, OK; }
API CUresult cuDeviceGet(int *d, int i) { return i < 0 || i > 1 ? INVALID : (*d = i, OK); }
API CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
  (void)d;
  *v = attr == 75 ? 9 : 0;
  return OK;
}
API CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { return *ctx = (void *)(uintptr_t)(0x1000 + d), OK; }
API CUresult cuDevicePrimaryCtxRelease_v2(int d) { return (void)d, OK; }
API CUresult cuCtxSetCurrent(void *ctx) { return (void)ctx, OK; }

API CUresult cuStreamCreate(stream **s, unsigned f) {
  (void)f;
  int i = 0;
  while (i < nstreams && streams[i]) i++; /* a destroyed stream's place */
  if (i == MAX_STREAMS) return INVALID;
  *s = calloc(1, sizeof **s);
  streams[i] = *s;
  if (i == nstreams) nstreams++;
  return OK;
}
API CUresult cuStreamDestroy_v2(stream *s) {
  complete(s, s->n - 1);
  for (int i = 0; i < nstreams; i++)
    if (streams[i] == s) streams[i] = NULL;
  free(s->q);
  free(s);
  return OK;
}
API CUresult cuStreamSynchronize(stream *s) {
  stats[RGTEST_HOST_WAITS]++;
  complete(s, s->n - 1);
  return OK;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  char *m = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (!m) return INVALID;
  add_region(&device_mem, m, n);
  *p = (CUdeviceptr)(uintptr_t)m;
  return OK;
}
API CUresult cuMemFree_v2(CUdeviceptr p) {
  complete_all(); /* as the real call, which waits for the device */
  int i = find_region(&device_mem, (void *)(uintptr_t)p);
  if (i < 0) return stats[RGTEST_BAD_POINTERS]++, INVALID;
  device_mem.v[i] = device_mem.v[--device_mem.n];
  free((void *)(uintptr_t)p);
  return OK;
}
API CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) {
  (void)f;
  if (!(*p = malloc(n ? n : 1))) return INVALID;
  add_region(&pinned_mem, *p, n);
  stats[RGTEST_PINNED_ALLOCS]++;
  return OK;
}
API CUresult cuMemFreeHost(void *p) {
  int i = find_region(&pinned_mem, p);
  if (i < 0) return stats[RGTEST_BAD_POINTERS]++, INVALID;
  pinned_mem.v[i] = pinned_mem.v[--pinned_mem.n];
  free(p);
  return OK;
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, stream *s) {
  return queue_copy(s, (char *)(uintptr_t)d, h, n, 2);
}
API CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, stream *s) {
  return queue_copy(s, h, (const char *)(uintptr_t)d, n, 1);
}
API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, stream *s) {
  return queue_copy(s, (char *)(uintptr_t)d, (const char *)(uintptr_t)src, n, 0);
}
API CUresult cuMemcpyPeerAsync(CUdeviceptr d, void *dctx, CUdeviceptr src, void *sctx, size_t n, stream *s) {
  if (dctx == sctx) return INVALID;
  stats[RGTEST_PEER_COPIES]++;
  return queue_copy(s, (char *)(uintptr_t)d, (const char *)(uintptr_t)src, n, 0);
}

API CUresult cuEventCreate(event **e, unsigned f) {
  (void)f;
  *e = calloc(1, sizeof **e);
  (*e)->at = -1;
  return OK;
}
API CUresult cuEventDestroy_v2(event *e) { return free(e), OK; }
API CUresult cuEventRecord(event *e, stream *s) {
  e->s = s;
  e->at = push(s, (op){.kind = OP_MARK});
  return OK;
}
API CUresult cuEventSynchronize(event *e) {
  stats[RGTEST_HOST_WAITS]++;
  if (e->at >= 0) complete(e->s, e->at);
  return OK;
}
API CUresult cuStreamWaitEvent(stream *s, event *e, unsigned f) {
  (void)f;
  stats[RGTEST_STREAM_WAITS]++;
  if (e->at >= 0) push(s, (op){.kind = OP_WAIT, .other = e->s, .upto = e->at});
  return OK;
}

/* A module: the kernel's host code, loaded from the image nvrtc.c made. */
typedef struct module {
  void *dl;
  void (*launch)(const void *args);
  unsigned long (*args_size)(void);
} module;

API CUresult cuModuleLoadData(module **m, const void *image) {
  const rgtest_image *h = image;
  if (memcmp(h->magic, RGTEST_IMAGE_MAGIC, 8)) return BAD_IMAGE;
  const char *tmp = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/rgtest-kernel-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) return BAD_IMAGE;
  bool ok = write(fd, h + 1, h->size) == (ssize_t)h->size;
  close(fd);
  void *dl = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  unlink(path);
  if (!dl) return BAD_IMAGE;
  *m = calloc(1, sizeof **m);
  (*m)->dl = dl;
  *(void **)&(*m)->launch = dlsym(dl, "rg_host_launch");
  *(void **)&(*m)->args_size = dlsym(dl, "rg_host_args_size");
  return (*m)->launch && (*m)->args_size ? OK : BAD_IMAGE;
}
API CUresult cuModuleGetFunction(module **f, module *m, const char *name) {
  return strcmp(name, "rg_kernel") ? NOT_FOUND : (*f = m, OK);
}
API CUresult cuModuleUnload(module *m) {
  dlclose(m->dl);
  free(m);
  return OK;
}

/* A queued launch: the kernel and a copy of its arguments. */
typedef struct launch_args { void (*launch)(const void *); char args[]; } launch_args;
static void run_launch(void *p) {
  launch_args *l = p;
  l->launch(l->args);
}

API CUresult cuLaunchKernel(module *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned shared, stream *s, void **params, void **extra) {
  (void)shared, (void)extra;
  if (!gx || !gy || !gz || !bx || !by || !bz || gx > 65535 || bx * by * bz > 1024) return INVALID;
  size_t n = f->args_size();
  launch_args *l = malloc(sizeof *l + n);
  l->launch = f->launch;
  memcpy(l->args, params[0], n);
  stats[RGTEST_LAUNCHES]++;
  rgtest_queue_call(s, run_launch, l);
  return OK;
}
API CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == NOT_READY ? "not ready" : r == BAD_IMAGE ? "a device code image this driver cannot load"
      : r == NOT_FOUND ? "no such kernel" : "invalid value";
  return OK;
}

/* What the test reads. */
API void rgtest_cuda_stats(long *out) { memcpy(out, stats, sizeof stats); }
API void *rgtest_cuda_last_host(void) { return last_host; }
