/*
 * scan-impl.h — the state of one run of a Scan node on the CPU, shared by
 * scan.c (the general step loop) and scan-scalar.c (steps of scalars run
 * as a flat list of typed loops).
 */
#ifndef RELGRAPH_CPU_SCAN_IMPL_H
#define RELGRAPH_CPU_SCAN_IMPL_H

#include "backend/cpu/cpu-impl.h"
#include "relgraph/scan.h"

/* A state, nit-sot or mit-mot buffer. */
typedef struct trace {
  rg_scan_kind kind;
  int k;
  int out;                 /* outer output */
  rg_tensor *buf;          /* owned; NULL until a nit-sot's first step */
  int64_t rows;            /* R */
  int64_t ninit;           /* positions before step 0 (mit-mot: -m) */
  int64_t keep;            /* store_steps, 0: all */
  bool wrap;               /* rows < positions: circular */
  int ntaps;
  const int64_t *taps;     /* input taps */
  int nout;
  const int64_t *out_taps; /* mit-mot output taps; else the one tap 0 */
  int first_in, first_out; /* inner input / output of tap 0 */
  /* Preallocation: the step's output is computed straight into its row.
   * out_cell is the inner output's cell (-1: copied instead); row_out, a
   * tensor wrapping the row at row_data, is ours only while it sits in
   * that cell (a kernel that replaces it frees it). */
  int32_t out_cell;
  rg_tensor *row_out;
  const void *row_data;
} trace;

typedef struct run {
  rgb_exec *x;
  rg_scan_info s;
  rgb_program *p;
  int64_t n, steps;
  rg_tensor **in;          /* inner inputs */
  bool *own;               /* in[i] is a header of ours */
  int nin;
  trace *tr;
  int ntr;
  rg_tensor dst;           /* a row of a buffer, written by a step */
  rgbc_copy_fn copy;       /* the device's copy; NULL: the node runs on the host */
} run;

/* Positions: a trace's row of position pos. */
static inline int64_t rgbc_wrap_row(const trace *tr, int64_t pos) { return tr->wrap ? pos % tr->rows : pos; }

/* scan-scalar.c: runs every step when the step is all scalar elementwise
 * ops (inputs, outputs and intermediates of 0 dimensions); returns 1 when
 * it does not apply (the general loop runs instead), else 0 or an error. */
int rgbc_scan_scalar(run *r);

#endif
