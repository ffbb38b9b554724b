/*
 * host.h — the host implementation of CUDA's driver, NVRTC and cuBLAS
 * (tests/cuda-host: driver.c, nvrtc.c, cublas.c, one shared library):
 * what its parts share, and what it counts for the tests (read through
 * rgtest_cuda_stats).
 */
#ifndef RGTEST_CUDA_HOST_H
#define RGTEST_CUDA_HOST_H

#include <stdbool.h>
#include <stddef.h>

enum {
  RGTEST_HOST_WAITS,      /* cuStreamSynchronize, cuEventSynchronize */
  RGTEST_ASYNC_COPIES,    /* copies queued on a stream */
  RGTEST_PAGEABLE_ASYNC,  /* of those, host sides not in pinned memory */
  RGTEST_PEER_COPIES,     /* copies between devices */
  RGTEST_STREAM_WAITS,    /* cuStreamWaitEvent */
  RGTEST_PINNED_ALLOCS,   /* cuMemHostAlloc */
  RGTEST_BAD_POINTERS,    /* device sides outside device memory, bad frees */
  RGTEST_LAUNCHES,        /* kernels queued */
  RGTEST_BLAS_CALLS,      /* cuBLAS calls queued */
  RGTEST_NSTATS
};

/* Kernels, as the host NVRTC makes them: the kernel's CUDA C compiled as
 * C++ for the host (every thread's work done by one: the kernels are
 * grid-stride loops), with two entry points added, and the shared object
 * handed to the driver as the device code, after a header. */
#define RGTEST_IMAGE_MAGIC "RGHOSTSO"
typedef struct rgtest_image { char magic[8]; size_t size; } rgtest_image; /* then `size` bytes */
#define RGTEST_PRELUDE                                                                  \
  "#include <math.h>\n"                                                                 \
  "#define __global__\n#define __device__\n"                                            \
  "struct rg_dim3 { unsigned x; };\n"                                                   \
  "static const rg_dim3 blockIdx = {0}, blockDim = {1}, gridDim = {1}, threadIdx = {0};\n" \
  "using std::signbit;\n"                                                               \
  "static unsigned __umulhi(unsigned a, unsigned b) {"                                   \
  " return (unsigned)(((unsigned long long)a * b) >> 32); }\n"
/* The kernel's source goes in a namespace between the two (its own
 * typedefs of int64_t and friends would clash with the host's). */
#define RGTEST_OPEN "namespace rgk {\n"
#define RGTEST_EPILOGUE                                                                         \
  "}\n"                                                                                        \
  "template <class A> static void rg_host_call(void (*k)(A), const void *p) { k(*(const A *)p); }\n" \
  "template <class A> static unsigned long rg_host_size(void (*)(A)) { return sizeof(A); }\n"   \
  "extern \"C\" void rg_host_launch(const void *p) { rg_host_call(rgk::rg_kernel, p); }\n"     \
  "extern \"C\" unsigned long rg_host_args_size(void) { return rg_host_size(rgk::rg_kernel); }\n"

/* A stream of the driver, and work queued on it: fn(closure) runs when
 * the stream gets there, then free(closure). */
typedef struct stream stream;
void rgtest_queue_call(stream *s, void (*fn)(void *), void *closure);
/* Completes everything queued on s (what a blocking host call does). */
void rgtest_complete(stream *s);
void rgtest_count(int stat);

#endif
