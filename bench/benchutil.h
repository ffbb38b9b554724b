/*
 * benchutil.h — timing helpers for the benchmarks: a monotonic clock and
 * the median of repeated runs, and the collector's count of collections.
 */
#ifndef RELGRAPH_BENCHUTIL_H
#define RELGRAPH_BENCHUTIL_H

#include <stddef.h>

double bu_now(void);                 /* seconds, monotonic */
double bu_median(double *v, size_t n); /* sorts v */
/* Runs fn(ud) `reps` times (after one warm-up) and returns the median
 * seconds per run. */
double bu_time(void (*fn)(void *ud), void *ud, int reps);
/* Collections the collector has run since start. */
size_t bu_gc_count(void);
/* The collector's heap, in bytes. */
size_t bu_heap_size(void);
/* Overwrites the unused stack below the caller.  The collector scans the
 * stack conservatively, and the frames of a later call leave parts of the
 * stack unwritten: pointers a finished run left there (to the graph it
 * rewrote) would keep that graph alive through the next run.  A benchmark
 * that repeats a run on fresh graphs calls this between runs, so each run
 * pays for marking its own graph only, as a program that builds one
 * graph does. */
void bu_clear_stack(void);

#endif
