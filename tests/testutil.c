/*
 * testutil.c — helpers shared by the cmocka test binaries.
 */
#include "tests/testutil.h"

#include "relgraph/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tu_show(rg_term t) { return t ? rg_to_string(t) : "<NULL>"; }

rg_term tu_read(rg_ctx *C, const char *text) {
  rg_term l = rg_read_all(C, "<test>", text, strlen(text));
  if (!l) fail_msg("read failed: %s", rg_errmsg(C));
  assert_true(rg_list_length(l) == 1);
  return rg_car(l);
}

const char *tu_run_program(const char *text, int *rc) {
  rg_ctx *C = rg_ctx_new();
  rg_interp *I = rg_interp_new(C);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rg_interp_set_output(I, f);
  int r = rg_interp_load_string(I, "<test>", text);
  fclose(f);
  if (rc) *rc = r;
  char *out = malloc(len + strlen(rg_errmsg(C)) + 16);
  sprintf(out, "%s%s%s", buf, r < 0 ? "ERROR: " : "", r < 0 ? rg_errmsg(C) : "");
  free(buf);
  const char *gc = rg_string_value(rg_string(out)); /* collected memory */
  free(out);
  return gc;
}

/* What print(out, x) writes, as a collected string. */
static const char *captured(void (*print)(FILE *, const void *), const void *x) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  print(out, x);
  fclose(out);
  const char *s = rg_string_value(rg_string(buf));
  free(buf);
  return s;
}

static void print_tensor(FILE *out, const void *t) { rg_tensor_fprint(out, t); }
static void print_dump(FILE *out, const void *f) { rg_function_dump(f, out); }
static void print_profile(FILE *out, const void *f) { rg_function_profile(f, out); }

const char *tu_tensor_text(const rg_tensor *t) { return captured(print_tensor, t); }
const char *tu_function_dump(const rg_function *f) { return captured(print_dump, f); }
const char *tu_function_profile(const rg_function *f) { return captured(print_profile, f); }

int64_t tu_calls_of(rg_function *f, const char *label) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  rg_function_profile(f, m);
  fclose(m);
  int64_t total = 0;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    int idx;
    char op[64];
    long long calls;
    if (sscanf(line, " %d %63s %lld", &idx, op, &calls) == 3 && !strcmp(op, label)) total += calls;
  }
  free(buf);
  return total;
}

const char *tu_eval(rg_interp *I, const char *expr) {
  rg_term v = rg_interp_eval_string(I, expr);
  if (!v) {
    char buf[1200];
    snprintf(buf, sizeof buf, "ERROR: %s", rg_errmsg(rg_interp_ctx(I)));
    return rg_string_value(rg_string(buf));
  }
  return rg_to_string(v);
}

const char *tu_source_path(const char *rel) {
  const char *root = getenv("RG_SOURCE_DIR");
#ifdef RG_SOURCE_DIR
  if (!root) root = RG_SOURCE_DIR;
#endif
  char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", root, rel);
  return rg_string_value(rg_string(buf));
}

const char *const tu_fused_graphs[TU_NFUSED] = {
    "(graph (input a float32 (256 256)) (input b float32 (256 256)) (input c float32 (256 256))"
    " (input d float32 (256 256)) (input c0 float32 (256 256))"
    " (define cell (add (mul (sigmoid b) c0) (mul (sigmoid a) (tanh c))))"
    " (output cell) (output (mul (sigmoid d) (tanh cell))))",
    "(graph (input x float64 (300 300)) (input y float64 (300))"
    " (output (add (switch (gt x 0.0) x (mul 0.1 x)) (softplus y) (erf x) (maximum x y)"
    "              (int_div x 3.0) (mod y 2.5) (clip x -1.0 1.0))))",
    "(graph (input i int32 (400 400)) (input j int32 (400))"
    " (output (exp ((cast float32) (mod (int_div (add (mul i 3) j) 2) 5)))))",
};

int tu_op_arity(rg_opcode code) {
#define TU_LO(c, name, fam, lo, hi) lo,
#define TU_HI(c, name, fam, lo, hi) hi,
  static const int los[] = {RG_OP_TABLE(TU_LO)}, his[] = {RG_OP_TABLE(TU_HI)};
#undef TU_LO
#undef TU_HI
  return los[code] == his[code] ? los[code] : 2;
}

rg_tensor *tu_value(const rg_type *t, uint64_t seed, double lo, double width) {
  int64_t shape[RG_MAX_NDIM];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d] >= 0 ? t->shape[d] : 3;
  rg_tensor *v = rg_tensor_new(t->dtype, t->ndim, shape);
  for (int64_t i = 0; i < rg_tensor_numel(v); i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    rg_tensor_set_f64(v, i, lo + width * ((double)(seed >> 11) / 0x1p53));
  }
  return v;
}

void tu_run_graph(rg_ctx *C, rg_fgraph *fg, const char *query, double lo, double width, rg_tensor **res) {
  int nin = rg_fgraph_ninputs(fg), nout = rg_fgraph_noutputs(fg);
  rg_variable *in[nin + 1], *out[nout + 1];
  rg_tensor *vals[nin + 1];
  for (int i = 0; i < nin; i++) in[i] = rg_fgraph_input(fg, i), vals[i] = tu_value(in[i]->type, 7 + (uint64_t)i, lo, width);
  for (int k = 0; k < nout; k++) out[k] = rg_fgraph_output(fg, k);
  rg_compile_opts o = {.mode = {.query = query}};
  rg_function *f = rg_compile(C, nin, in, nout, out, &o);
  if (!f) fail_msg("%s", rg_errmsg(C));
  if (rg_function_call(f, vals, res) != RG_OK) fail_msg("%s", rg_function_errmsg(f));
  rg_function_free(f);
  for (int i = 0; i < nin; i++) rg_tensor_free(vals[i]);
}

rg_node *tu_first_scan(rg_fgraph *fg, int *nscans) {
  rg_node *s = NULL;
  *nscans = 0;
  for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n))
    if (n->op->code == RG_OP_SCAN) s = s ? s : n, ++*nscans;
  return s;
}

int tu_count_inner(const rg_node *scan, rg_opcode code) {
  int k = 0;
  for (rg_node *n = rg_fgraph_first(rg_op_inner_graph(scan->op)); n; n = rg_fgraph_next(n)) k += n->op->code == code;
  return k;
}

void tu_close_graphs(rg_ctx *C, rg_fgraph *fg, rg_fgraph *ref, double tol) {
  rg_tensor *want[8], *got[8];
  tu_run_graph(C, ref, "none", -0.5, 1, want);
  tu_run_graph(C, fg, "none", -0.5, 1, got);
  for (int k = 0; k < rg_fgraph_noutputs(ref); k++) {
    assert_int_equal(rg_tensor_numel(got[k]), rg_tensor_numel(want[k]));
    for (int64_t i = 0; i < rg_tensor_numel(want[k]); i++)
      assert_true(fabs(rg_tensor_get_f64(got[k], i) - rg_tensor_get_f64(want[k], i)) <=
                  tol * (1 + fabs(rg_tensor_get_f64(want[k], i))));
    rg_tensor_free(got[k]), rg_tensor_free(want[k]);
  }
}

bool tu_equal_graphs(rg_fgraph *fg, rg_fgraph *ref) {
  int n = rg_fgraph_noutputs(ref), nin = rg_fgraph_ninputs(ref);
  assert_true(n <= 8 && nin <= 16);
  rg_variable *xs[8], *ys[8], *ia[16], *ib[16];
  for (int k = 0; k < n; k++) xs[k] = rg_fgraph_output(fg, k), ys[k] = rg_fgraph_output(ref, k);
  for (int i = 0; i < nin; i++) ia[i] = rg_fgraph_input(fg, i), ib[i] = rg_fgraph_input(ref, i);
  return rg_equal_computations(n, xs, ys, nin, ia, ib);
}
