/*
 * stats.h — what the host implementation of the CUDA driver counts
 * (driver.c), read by the tests through rgtest_cuda_stats.
 */
#ifndef RGTEST_CUDA_STATS_H
#define RGTEST_CUDA_STATS_H

#include <stdbool.h>

enum {
  RGTEST_HOST_WAITS,      /* cuStreamSynchronize, cuEventSynchronize */
  RGTEST_ASYNC_COPIES,    /* copies queued on a stream */
  RGTEST_PAGEABLE_ASYNC,  /* of those, host sides not in pinned memory */
  RGTEST_PEER_COPIES,     /* copies between devices */
  RGTEST_STREAM_WAITS,    /* cuStreamWaitEvent */
  RGTEST_PINNED_ALLOCS,   /* cuMemHostAlloc */
  RGTEST_BAD_POINTERS,    /* device sides outside device memory, bad frees */
  RGTEST_NSTATS
};

#endif
