/*
 * scan-rw.h — builders the Scan rewrites share (each defined where the
 * comment says, else in scan-pushout.c): values "for all steps" carry a
 * leading time axis.
 */
#ifndef RELGRAPH_SCAN_RW_H
#define RELGRAPH_SCAN_RW_H

#include "rewrites/rewrite-impl.h"
#include "relgraph/scan.h"

/* A value the push-outs may compute outside the loop: no side effect, one
 * output, and nothing that allocates uninitialised memory (scan-term.c). */
bool rgr_pure_node(const rg_node *m);
/* Output k of a Scan whose step computes nothing for it (it returns a
 * non-sequence or a constant) as that value broadcast over the rows kept;
 * NULL when it is not (scan-term.c). */
rg_variable *rgr_scan_vanished(rg_ctx *C, const rg_node *node, int k);
/* Whether scan_merge_inouts would merge states or nit-sots of node (scan_save_mem
 * waits for it, as Aesara's save-mem runs after its merge). */
bool rgr_scan_states_merge(const rg_node *node);
/* The graph value term t names: a graph variable, or an op's expression
 * ((op input ...) or (nth K (op input ...)): an e-node's term in search)
 * evaluated into nodes; NULL for anything else, a logic variable among
 * them (scan-step.c). */
rg_variable *rgr_term_value(rg_ctx *C, rg_term t);
/* The Scan as a term and its helper relations (scan-step.c). */
void rgr_define_step_relations(rg_interp *I);
/* The rows of outer sequence x (single tap) that n steps read, in the
 * sequence's order: the first n, or the last n with go_backwards, where
 * step t reads the t-th from the end. */
rg_variable *rgr_steps_rows(const rg_scan_info *s, rg_variable *n, rg_variable *x);
/* scan_merge_inouts' inputs half (scan-inputs.c): a Scan whose sequences
 * (same taps) or non-sequences repeat an outer value rebuilt reading each
 * once; 1 with out filled, 0 when none repeats. */
int rgr_scan_merge_input_dups(rg_rewrite_run *run, rg_node *node, rg_variable **out);
/* Whether n steps surely fit sequence x: n >= 0 and x has at least n
 * rows, as far as the graph shows (scan-outputs.c).  A closed form
 * reading x[:n] where a loop ran n steps must know it: the slice clamps
 * where the loop fails. */
bool rgr_steps_fit(rg_variable *x, rg_variable *n);
/* A constant copied for another graph (a constant belongs to one). */
rg_variable *rgr_copy_const(rg_ctx *C, rg_variable *x);
/* An all-steps value aligned to rank ndim + 1, the time axis first
 * (missing dimensions broadcast). */
rg_variable *rgr_with_rank(rg_variable *x, int ndim);
/* The push-outs' classification of step values (a memo: variable ->
 * 0 inside, 1 once before the loop, 2 for all steps): elementwise work on
 * sequence slices whose readers are all elementwise work staying in the
 * loop, and whose operands the loop reads anyway (or all but one, when
 * inside work reads the value itself: the loop then reads that operand's
 * trace instead), stays with that work (back to 0), where fusion makes it
 * part of the step's kernel; pushed
 * out, it would cost a pass writing its whole trace and the loop another
 * stream reading it back (the LSTM's backward step read five derivative
 * factors so).  Where a step's slice is small or of unknown size the work
 * goes out as in Aesara: one pass over all steps beats a short vector
 * loop per step. */
void rgr_keep_fusable_inside(rg_memo *kind, const rg_fgraph *g);
/* dot(a_t, W) of matrix slices for all steps: every step's rows stacked,
 * one product, the steps split again (a is (T, B, K), W is (K, M)). */
rg_variable *rgr_dot_rows(rg_ctx *C, rg_variable *a, rg_variable *w);
/* Traces laid out for one product over all steps: A (n, m, k) as
 * (m, n*k), B (n, k, p) as (n*k, p); sum_t A_t B_t = dot(laid A, laid B). */
rg_variable *rgr_laid_a(rg_ctx *C, rg_variable *A);
rg_variable *rgr_laid_b(rg_ctx *C, rg_variable *B);
/* The users of a rebuilt Scan (scan-outputs.c): nw (layout t) has node's
 * traces (layout s) but for those of one kind, where trace k of that kind
 * is nw's trace pos[k] (-1: gone; nobody reads it, or the caller
 * rewires its users).  Sets out[o] to nw's output for each output o of
 * node that has users. */
void rgr_outputs_moved(const rg_node *node, const rg_scan_info *s, const rg_node *nw, const rg_scan_info *t,
                       rg_scan_kind kind, const int *pos, rg_variable **out);

#endif
