/*
 * cli_scan.c — random loops for `relgraph check-rules`: the text of a
 * graph file whose output is computed by one or two Scans, drawn so that
 * the Scan rules find what they rewrite.
 *
 * A draw picks a kind of loop and, within it, the pieces of its step:
 *
 *   recurrent   h_t = f(state piece, sequence piece) over a sequence x of
 *               vectors or of batches of vectors, with non-sequences W1,
 *               W2 (matrices) and v (a vector).  State pieces read h and
 *               non-sequences (dot(h, W1 + W2) has work that reads
 *               non-sequences only); sequence pieces read x_t and
 *               non-sequences (elementwise, or dot(x_t, W2): work that
 *               moves out over the whole sequence).  Now and then a
 *               non-sequence or a sequence is itself computed outside
 *               from the others (what the push-ins move back in), a
 *               non-sequence is passed and never read, the state's sum is
 *               a second output, the loop runs backwards, or only the
 *               last state is read.
 *   accumulate  acc_t = acc + dot(x_t, W) or acc + dot(a_t, b_t) of matrix
 *               slices, only the last state read (push_out_dot1,
 *               push_out_scan_output).
 *   closed      the closed forms of those accumulations (push_in_dot1,
 *               push_in_add turn them back into loops).
 *   gradient    the gradient of a recurrence by W, h0 or x: backward
 *               loops with mit-mots next to the forward loop.
 *   kept        what rules after others see: an accumulation keeping one
 *               row (store_steps 1, the op's own form), twin states.
 *   taps        a state over the two taps -2 and -1 (a mit-sot).
 *   constant    a step that returns non-sequence work and reads nothing
 *               else (the loop disappears).
 *   twins       two loops over the same sequence, their traces added
 *               (scan_merge).
 *
 * Every input is float64 with static shapes: T steps (3 to 5), vectors of
 * D = 2 or 3, batches of 2.  The text is read by the graph file reader,
 * so a draw is a well-typed graph by construction.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "relgraph/kanren.h"
#include "tools/cli.h"

/* An int64 constant in the graph file format (a bare literal is weak). */
#define I64(n) "(constant int64 () (" #n "))"

static int pick(uint64_t *s, int n) { return (int)(rg_random_next(s) % (uint64_t)n); }

/* The pieces of a recurrent step over vectors h, x_t of size D. */
static const char *const state_pieces[] = {
    "(dot h W1)", "(dot h (add W1 W2))", "(mul h v)", "(dot h (mul W1 0.5))", "(add (dot h W1) (mul v 2.0))",
};
static const char *const seq_pieces[] = {
    "(mul x_t v)", "(add x_t v)", "(dot x_t W2)", "(exp (mul x_t 0.1))", "x_t", "(add (dot x_t W2) v)",
};
#define NSTATE (int)(sizeof state_pieces / sizeof *state_pieces)
#define NSEQ (int)(sizeof seq_pieces / sizeof *seq_pieces)

static char *recurrent(uint64_t *s, int T, int D) {
  bool batch = pick(s, 3) == 0, derived_nonseq = pick(s, 4) == 0, derived_seq = pick(s, 5) == 0;
  bool unused = pick(s, 6) == 0, nit = pick(s, 4) == 0, back = pick(s, 5) == 0, last = pick(s, 3) == 0;
  bool rec = nit && pick(s, 2) == 0; /* the nit-sot records the sequence's slice, and is read */
  char xs[32], hs[32];
  if (batch) snprintf(xs, sizeof xs, "(%d 2 %d)", T, D), snprintf(hs, sizeof hs, "(2 %d)", D);
  else snprintf(xs, sizeof xs, "(%d %d)", T, D), snprintf(hs, sizeof hs, "(%d)", D);
  const char *state = state_pieces[pick(s, NSTATE)], *seq = seq_pieces[pick(s, NSEQ)];
  char step[512];
  /* a non-sequence computed outside (W3 = W1 + W2) read beside W1 and W2 */
  if (derived_nonseq) snprintf(step, sizeof step, "(add (add (dot h W3) (dot h W1)) (mul %s (sum W2)))", seq);
  else snprintf(step, sizeof step, pick(s, 2) ? "(tanh (add %s %s))" : "(add %s (mul %s 0.5))", state, seq);
  char body[768];
  if (derived_seq) snprintf(body, sizeof body, "(add %s (mul y_t 0.25))", step);
  else snprintf(body, sizeof body, "%s", step);
  const char *params = derived_seq ? (unused ? "x_t y_t h U" : "x_t y_t h") : (unused ? "x_t h U" : "x_t h");
  char values[1024];
  if (nit) snprintf(values, sizeof values, "(define h2 %s) (values h2 %s)", body, rec ? "x_t" : "(sum h2)");
  else snprintf(values, sizeof values, "%s", body);
  char scan[2048];
  snprintf(scan, sizeof scan, "(scan (lambda (%s) %s) (sequences x%s) (outputs-info h0%s)%s%s)", params, values,
           derived_seq ? " y" : "", nit ? " none" : "", unused ? " (non-sequences W1)" : "",
           back ? " (go-backwards #t)" : "");
  char out[2200];
  if (nit)
    snprintf(out, sizeof out, "(define (hs ss) %s) (output %s)", scan,
             rec ? (last ? "((subtensor -1) (add hs ss))" : "(add hs ss)") : last ? "((subtensor -1) hs)" : "hs");
  else snprintf(out, sizeof out, "(output %s)", last ? cli_sprintf("((subtensor -1) %s)", scan) : scan);
  return cli_sprintf("(graph (input x float64 %s) (input h0 float64 %s) (input W1 float64 (%d %d)) "
                     "(input W2 float64 (%d %d)) (input v float64 (%d))%s%s\n  %s)",
                     xs, hs, D, D, D, D, D, derived_nonseq ? " (define W3 (add W1 W2))" : "",
                     derived_seq ? " (define y (mul x 2.0))" : "", out);
}

static char *accumulate(uint64_t *s, int T, int D) {
  if (pick(s, 2))
    return cli_sprintf("(graph (input x float64 (%d %d)) (input a0 float64 (%d)) (input W float64 (%d %d))\n"
                       "  (output ((subtensor -1) (scan (lambda (x_t acc) %s) (sequences x) (outputs-info a0)))))",
                       T, D, D, D, D, pick(s, 2) ? "(add acc (dot x_t W))" : "(add (dot x_t W) acc)");
  return cli_sprintf("(graph (input a float64 (%d 2 %d)) (input b float64 (%d %d 3)) (input a0 float64 (2 3))\n"
                     "  (output ((subtensor -1) (scan (lambda (a_t b_t acc) (add acc (dot a_t b_t))) "
                     "(sequences a b) (outputs-info a0)))))",
                     T, D, T, D);
}

/* What the standard rewrites leave for two rules that apply only after
 * others: an accumulation already keeping one row (scan_save_mem's
 * store_steps 1, written in the op's own form), and two states of one
 * step computing the same thing from one initial value. */
static char *kept(uint64_t *s, int T, int D) {
  if (pick(s, 2))
    return cli_sprintf("(graph (input x float64 (%d 2 %d)) (input a0 float64 (%d %d))\n"
                       "  (output ((subtensor -1) ((scan 1 0 0 1 0 0 0 0 -1 1 0 1 (graph (input x_t float64 (2 %d)) "
                       "(input acc float64 (%d %d)) (output (add acc (%s))))) " I64(%d) " x a0))))",
                       T, D, D, D, D, D, D,
                       pick(s, 2) ? "dot ((dimshuffle 1 0) x_t) x_t" : "sum (mul x_t 2.0)", T);
  return cli_sprintf("(graph (input x float64 (%d %d)) (input h0 float64 (%d)) (input W float64 (%d %d))\n"
                     "  (define (a b) (scan (lambda (x_t h g) (values (tanh (add (dot h W) x_t)) "
                     "(tanh (add (dot g W) x_t)))) (sequences x) (outputs-info h0 h0)))\n"
                     "  (output (add a (mul b 2.0))))",
                     T, D, D, D, D);
}

/* The closed forms of the accumulations (what push_in_dot1 and
 * push_in_add turn back into loops). */
static char *closed(uint64_t *s, int T, int D) {
  if (pick(s, 2))
    return cli_sprintf("(graph (input x float64 (%d %d)) (input a0 float64 (%d)) (input W float64 (%d %d))\n"
                       "  (output (add a0 (dot ((sum 0) ((subtensor (0 ?)) x %d)) W))))",
                       T, D, D, D, D, T - pick(s, 2));
  return cli_sprintf("(graph (input a float64 (%d 2 %d)) (input b float64 (%d %d 3)) (input a0 float64 (2 3))\n"
                     "  (define t1 ((subtensor (0 ?)) a " I64(%d) ")) (define t2 ((subtensor (0 ?)) b " I64(%d) "))\n"
                     "  (output (add a0 (dot ((reshape 2) ((dimshuffle 1 0 2) t1) ((make_vector int64) " I64(2)
                     " (mul ((shape_i 0) t1) " I64(%d) "))) ((reshape 2) t2 ((make_vector int64) "
                     "(mul ((shape_i 0) t2) " I64(%d) ") " I64(3) "))))))",
                     T, D, T, D, T, T, D, D);
}

/* The gradient of a recurrence (backward loops, mit-mots, the forward
 * loop's recording twin). */
static char *gradient(uint64_t *s, int T, int D) {
  static const char *const wrt[] = {"W1", "h0", "x"};
  return cli_sprintf("(graph (input x float64 (%d %d)) (input h0 float64 (%d)) (input W1 float64 (%d %d))\n"
                     "  (define hs (scan (lambda (x_t h) (tanh (add (dot h W1) %s))) (sequences x) (outputs-info h0)))\n"
                     "  (output (grad (sum %s) %s)))",
                     T, D, D, D, D, pick(s, 2) ? "x_t" : "(mul x_t h)", pick(s, 2) ? "hs" : "((subtensor -1) hs)",
                     wrt[pick(s, 3)]);
}

static char *taps(uint64_t *s, int T, int D) {
  (void)s;
  return cli_sprintf("(graph (input x0 float64 (2 %d)) (input v float64 (%d))\n"
                     "  (output (scan (lambda (a b) (add (mul a v) (mul b 0.5))) (outputs-info (x0 (taps -2 -1))) "
                     "(n-steps %d))))",
                     D, D, T);
}

static char *constant(uint64_t *s, int T, int D) {
  (void)s;
  return cli_sprintf("(graph (input h0 float64 (%d)) (input v float64 (%d))\n"
                     "  (output (scan (lambda (h) (mul v 2.0)) (outputs-info h0) (n-steps %d))))",
                     D, D, T);
}

static char *twins(uint64_t *s, int T, int D) {
  const char *a = seq_pieces[pick(s, NSEQ)], *b = seq_pieces[pick(s, NSEQ)];
  return cli_sprintf("(graph (input x float64 (%d %d)) (input h0 float64 (%d)) (input W1 float64 (%d %d)) "
                     "(input W2 float64 (%d %d)) (input v float64 (%d))\n"
                     "  (output (add (scan (lambda (x_t h) (tanh (add (dot h W1) %s))) (sequences x) (outputs-info h0))"
                     " (scan (lambda (x_t h) (add (mul h v) %s)) (sequences x) (outputs-info h0)))))",
                     T, D, D, D, D, D, D, D, a, b);
}

char *cli_random_scan(uint64_t *seed) {
  int T = 3 + pick(seed, 3), D = 2 + pick(seed, 2), kind = pick(seed, 15);
  if (kind == 14) return kept(seed, T, D);
  if (kind < 5) return recurrent(seed, T, D);
  if (kind < 7) return accumulate(seed, T, D);
  if (kind < 8) return closed(seed, T, D);
  if (kind < 10) return gradient(seed, T, D);
  if (kind < 11) return taps(seed, T, D);
  if (kind < 13) return twins(seed, T, D);
  return constant(seed, T, D);
}
