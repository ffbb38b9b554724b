/*
 * testutil.h — helpers shared by the cmocka test binaries.
 */
#ifndef RELGRAPH_TESTUTIL_H
#define RELGRAPH_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "relgraph/graph.h"
#include "relgraph/kanren.h"
#include "relgraph/backend.h"

/* The printed form of a term (GC string). */
const char *tu_show(rg_term t);
/* Reads one datum from text (asserts it parses). */
rg_term tu_read(rg_ctx *C, const char *text);
/* Loads a program into a fresh interpreter with output captured, and
 * returns everything it printed; *rc receives the load status. */
const char *tu_run_program(const char *text, int *rc);
/* Evaluates an expression in interpreter I and returns its printed value,
 * or "ERROR: message". */
const char *tu_eval(rg_interp *I, const char *expr);
/* What rg_tensor_fprint prints for t (collected string). */
const char *tu_tensor_text(const rg_tensor *t);
/* What rg_function_dump prints for f (collected string). */
const char *tu_function_dump(const rg_function *f);
/* What rg_function_profile writes, as a collected string. */
const char *tu_function_profile(const rg_function *f);
/* The calls of every node labelled `label` in f's profile (compiled
 * with .profile). */
int64_t tu_calls_of(rg_function *f, const char *label);
/* Path of a file in the source tree. */
const char *tu_source_path(const char *rel);

/* A tensor of type t (unknown sizes 3) filled with deterministic values
 * in [lo, lo + width), drawn from seed. */
rg_tensor *tu_value(const rg_type *t, uint64_t seed, double lo, double width);
/* The number of inputs to give an op of the table: its fixed count, or 2
 * for those taking any number (add, mul). */
int tu_op_arity(rg_opcode code);
/* Graphs whose pointwise parts fusion makes one composite each (sizes
 * over its threshold): the LSTM cell's tail (two outputs), a float64 mix
 * with comparisons and switch, integer arithmetic cast to float. */
#define TU_NFUSED 3
extern const char *const tu_fused_graphs[TU_NFUSED];
/* Compiles fg's outputs with `query` and runs them at tu_value(seed
 * 7 + i, lo, width) for each input i;
 * the results go to res.  Fails the test on an error. */
void tu_run_graph(rg_ctx *C, rg_fgraph *fg, const char *query, double lo, double width, rg_tensor **res);

/* Loops: the first Scan node of fg (their number in *nscans), the number
 * of nodes of an op in a Scan's step. */
rg_node *tu_first_scan(rg_fgraph *fg, int *nscans);
int tu_count_inner(const rg_node *scan, rg_opcode code);
/* fg and ref compute the same values, compiled without rewrites and run at
 * the same inputs (tu_run_graph, lo -0.5, width 1), within tol relative
 * to 1 + |value|; and fg's outputs compute what ref's do as
 * rg_equal_computations sees it, inputs paired by position. */
void tu_close_graphs(rg_ctx *C, rg_fgraph *fg, rg_fgraph *ref, double tol);
bool tu_equal_graphs(rg_fgraph *fg, rg_fgraph *ref);

#define assert_show(term, text) assert_string_equal(tu_show(term), text)

#endif
