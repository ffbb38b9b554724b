/*
 * relgraph/scan.h — Scan, the loop op: its description (rg_scan_info),
 * the op itself, and the builder that writes a loop as aesara.scan does.
 *
 * Semantics are those of Aesara's Scan op.  A Scan node's outer inputs
 * are, in this order:
 *
 *   n_steps            an integer scalar: the number of steps
 *   sequences          tensors walked along their first dimension
 *   mit-mot buffers    (gradients through time) whole buffers, read and
 *                      written at several taps per step
 *   mit-sot initials   the initial values of states with several taps,
 *                      along the first dimension (-min tap rows)
 *   sit-sot initials   the initial value of states with the one tap -1
 *   nit-sot lengths    integer scalars: rows of each nit-sot trace (n_steps)
 *   non-sequences      values passed unchanged to every step
 *
 * The inner graph's inputs are one slice per sequence tap, one value per
 * state tap (mit-mot, mit-sot, sit-sot), then the non-sequences; its
 * outputs are the mit-mot outputs at each of their output taps, then one
 * output per mit-sot, sit-sot and nit-sot, then optionally a boolean
 * scalar `until` condition (the loop stops after the step where it holds).
 *
 * The outer outputs are one per mit-mot (the whole buffer after the loop),
 * mit-sot, sit-sot and nit-sot (the trace of the steps, first dimension
 * the number of steps run; the initial values are not part of it).
 *
 * Taps.  At step t (0-based, in the order the steps run) a sequence tap k
 * reads row t + k - m of the sequence, m the sequence's smallest tap (rows
 * counted from the end with go_backwards).  A state tap k (negative) reads
 * the state of step t + k; steps before 0 are the initial values, row
 * k - m of the initial buffer.  A mit-mot tap k reads or writes row
 * t + k - m of its buffer, m the smallest of its input and output taps.
 *
 * store_steps.  A state or nit-sot with store_steps s > 0 keeps only the
 * last s steps (its output has min(s, steps) rows); 0 keeps the whole
 * trace.  Any s works: the executor keeps at least the rows its taps need.
 *
 * Threads.  A scan op is an immutable value, like any op (graph.h): any
 * thread may read its layout (rg_scan_info_of, the position helpers).
 * rg_scan builds into the graph of its inputs and records errors in their
 * context, so it follows that graph's rule: one thread at a time per
 * context.  A compiled Scan runs its steps on the thread calling the
 * function, its kernels on the function's own workers (backend.h).
 */
#ifndef RELGRAPH_SCAN_H
#define RELGRAPH_SCAN_H

#include "relgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* The kinds of scan variables, in the order of the outer inputs. */
typedef enum rg_scan_kind {
  RG_SCAN_N_STEPS, RG_SCAN_SEQ, RG_SCAN_MIT_MOT, RG_SCAN_MIT_SOT, RG_SCAN_SIT_SOT,
  RG_SCAN_NIT_SOT, RG_SCAN_NON_SEQ, RG_SCAN_UNTIL
} rg_scan_kind;

/* A scan's layout (Aesara's ScanInfo).  Tap arrays: seq_taps[i] holds
 * seq_ntaps[i] taps of sequence i, and likewise for the others; a sit-sot
 * has the one tap -1.  store_steps has one entry per mit-sot, sit-sot and
 * nit-sot, in that order (NULL: every trace whole).  Invariants (checked
 * by rg_op_scan): sequence taps distinct; state taps negative and
 * distinct; every count >= 0 and every tap list non-empty. */
typedef struct rg_scan_info {
  int n_seqs, n_mit_mot, n_mit_sot, n_sit_sot, n_nit_sot, n_non_seqs;
  bool until;                 /* the inner graph's last output is a condition */
  bool go_backwards;          /* walk the sequences from their end */
  int64_t truncate_gradient;  /* -1: none (kept for gradients) */
  const int *seq_ntaps;
  const int64_t *const *seq_taps;
  const int *mit_mot_nin, *mit_mot_nout;
  const int64_t *const *mit_mot_in_taps;
  const int64_t *const *mit_mot_out_taps;
  const int *mit_sot_ntaps;
  const int64_t *const *mit_sot_taps;
  const int64_t *store_steps;
} rg_scan_info;

/* The scan op over a copy of `inner` (NULL with an error in C when the
 * layout and the inner graph disagree: counts, a state whose type changes
 * across a step, an until that is not a boolean scalar, bad taps). */
const rg_op *rg_op_scan(rg_ctx *C, const rg_scan_info *info, rg_fgraph *inner);
/* The layout of a scan op (arrays in collected memory, shared with the
 * op); false for other ops. */
bool rg_scan_info_of(const rg_op *op, rg_scan_info *out);
/* Decodes a scan op's integer parameters (op->ints) with the arrays put in
 * `scratch`, which holds at least RG_SCAN_SCRATCH(nints) bytes (NULL:
 * collected memory); false when they are malformed.  For code that must
 * not allocate collected memory (kernels). */
#define RG_SCAN_SCRATCH(nints) ((size_t)(nints) * 32 + 64)
bool rg_scan_info_decode(int nints, const int64_t *ints, rg_scan_info *out, void *scratch);
/* The same scan (layout, in-place mark) with another inner graph of the
 * same interface. */
const rg_op *rg_op_scan_with_inner(rg_ctx *C, const rg_op *op, rg_fgraph *inner);

/* Aesara's ScanArgs: positions in the flat lists, so that no code indexes
 * them by hand.  k is the k-th variable of that kind, tap the tap's index
 * in its list (0 for kinds with one); -1 when there is no such position.
 * rg_scan_inner_out of a mit-mot tap counts output taps. */
int rg_scan_count(const rg_scan_info *s, rg_scan_kind kind);
int rg_scan_outer_in(const rg_scan_info *s, rg_scan_kind kind, int k);
int rg_scan_outer_out(const rg_scan_info *s, rg_scan_kind kind, int k);
int rg_scan_inner_in(const rg_scan_info *s, rg_scan_kind kind, int k, int tap);
int rg_scan_inner_out(const rg_scan_info *s, rg_scan_kind kind, int k, int tap);
int rg_scan_n_outer_in(const rg_scan_info *s);
int rg_scan_n_outer_out(const rg_scan_info *s);
int rg_scan_n_inner_in(const rg_scan_info *s);
int rg_scan_n_inner_out(const rg_scan_info *s);
/* The lowest and the highest of n >= 1 taps. */
int64_t rg_scan_tap_min(int n, const int64_t *taps);
int64_t rg_scan_tap_max(int n, const int64_t *taps);

/* ------------------------------------------------------------------ the builder */

/* A sequence: x walked along its first dimension at the given taps
 * (ntaps 0: the one tap 0), as aesara.scan walks it: step t reads row
 * t + k - min(m, 0) for tap k (taps m..M), len - (max(M, 0) - min(m, 0))
 * steps, and with go_backwards the same rows from the last step to the
 * first (a tap keeps the sequence's own time: tap -1 is the row before;
 * fewer steps than that read the sequence's last rows, since aesara.scan
 * reverses a sequence before cutting it to n_steps).  rg_scan gives the
 * op the rows it reads and the taps it needs for that. */
typedef struct rg_scan_seq {
  rg_variable *x;
  int ntaps;
  const int64_t *taps;
} rg_scan_seq;

/* One entry of outputs_info: init NULL is a nit-sot; with ntaps 0 a
 * sit-sot (tap -1, init of the state's type); else a mit-sot whose init
 * holds the initial values along its first dimension. */
typedef struct rg_scan_output {
  rg_variable *init;
  int ntaps;
  const int64_t *taps;
} rg_scan_output;

/* The step function as a callback: given the inner inputs (in the
 * lambda's order: sequence taps, state taps in outputs order,
 * non-sequences), it builds one output per entry of outputs (in that
 * order) into outs and, for a while-loop, the condition into *until
 * (leave it NULL otherwise).  Returns RG_OK or an error recorded in C. */
typedef int (*rg_scan_fn)(rg_ctx *C, int nin, rg_variable *const *in, rg_variable **outs,
                          rg_variable **until, void *ud);

typedef struct rg_scan_spec {
  int nseqs;
  const rg_scan_seq *seqs;
  int noutputs;
  const rg_scan_output *outputs;
  int nnon_seqs;
  rg_variable *const *non_seqs;
  rg_variable *n_steps;       /* NULL: the shortest sequence, after its taps */
  bool go_backwards;
  int64_t truncate_gradient;  /* -1: none */
  /* The step: either fn (called with fresh inner inputs of the right
   * types) or an inner graph given as variables: step_in (inputs in the
   * lambda's order, owner-less), step_out (one per output) and step_until
   * (NULL unless a while-loop).  Free variables become non-sequences: of
   * a given step graph, its owner-less leaves other than step_in and
   * constants; of a step built by fn, also every value that existed
   * before fn was called (computed outside the loop, so computed once). */
  rg_scan_fn fn;
  void *ud;
  int nstep_in;
  rg_variable *const *step_in;
  rg_variable *const *step_out;
  rg_variable *step_until;
} rg_scan_spec;

/* Builds the scan node and writes its outer outputs, one per entry of
 * spec->outputs in that order, into outs (the traces; a nit-sot's too).
 * Returns the node (its outputs are in the op's kind order), or NULL with
 * an error in C. */
rg_node *rg_scan(rg_ctx *C, const rg_scan_spec *spec, rg_variable **outs);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
