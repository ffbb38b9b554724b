/*
 * fuzz_graph.c — fuzz harness for the graph file reader: any text must give
 * a FunctionGraph or a clear error, never a crash.  A graph read must pass
 * the invariant checker, print in every format, write back and read again
 * to an equal graph, survive a merge and a clone, and evaluate back from
 * its kanren terms to equal computations.
 */
#include <stdio.h>

#include "fuzz_common.h"

static FILE *sink(void) {
  static FILE *f;
  if (!f) f = fopen("/dev/null", "w");
  return f;
}

static void check_round_trip(rg_ctx *C, rg_fgraph *fg) {
  char *text = rg_graph_to_string(C, fg);
  if (!text) abort();
  rg_fgraph *back = rg_graph_read(C, "again", text, strlen(text));
  if (!back) {
    fprintf(stderr, "written graph does not read back: %s\n%s", rg_errmsg(C), text);
    abort();
  }
  int n = rg_fgraph_noutputs(fg), m = rg_fgraph_ninputs(fg);
  rg_variable **a = malloc(sizeof *a * (size_t)(2 * (n + m) + 1)), **b = a + n + m;
  for (int k = 0; k < n; k++) a[k] = rg_fgraph_output(fg, k), b[k] = rg_fgraph_output(back, k);
  for (int i = 0; i < m; i++) a[n + i] = rg_fgraph_input(fg, i), b[n + i] = rg_fgraph_input(back, i);
  if (rg_fgraph_noutputs(back) != n || !rg_equal_computations(n, a, b, m, a + n, b + n)) abort();
  /* each output evaluates back from its kanren term to the same computation */
  for (int k = 0; k < n; k++) {
    rg_variable *v = rg_graph_eval(C, rg_var_term(a[k]));
    if (v && !rg_equal_computations(1, &v, &a[k], 0, NULL, NULL) && v != a[k]) abort();
  }
  free(a);
}

static void check_graph(const uint8_t *data, size_t size) {
  rg_ctx *C = fuzz_ctx();
  rg_fgraph *fg = rg_graph_read(C, "fuzz.graph", (const char *)data, size);
  if (!fg) {
    if (!rg_errmsg(C)[0]) abort(); /* a failure always has a message */
    return;
  }
  if (rg_fgraph_check(fg) != RG_OK) abort();
  FILE *f = sink();
  rg_fgraph_pprint(f, fg);
  rg_fgraph_dprint(f, fg);
  rg_fgraph_dot(f, fg);
  rg_fgraph_json(f, fg);
  check_round_trip(C, fg);
  rg_fgraph *copy = rg_fgraph_clone(fg, NULL);
  if (!copy || rg_fgraph_merge(copy, NULL) != RG_OK || rg_fgraph_check(copy) != RG_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin();
  check_graph(data, size);
  fuzz_end();
  return 0;
}
