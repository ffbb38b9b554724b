/*
 * rnn.c — a recurrent network with the scan builder of the C API:
 * h_t = tanh(h_{t-1} W + x_t U + b) over a sequence x, from h0, with the
 * sum of each h_t as a second output.  The step is a callback that builds
 * its graph from the inner inputs (x_t, h, then the non-sequences W, U);
 * b is used without being listed, so the builder makes it a non-sequence.
 *
 *   cc rnn.c $(pkg-config --cflags --libs relgraph) -o rnn
 */
#include <stdio.h>

#include "relgraph/backend.h"
#include "relgraph/scan.h"

static rg_variable *b; /* a free variable of the step */

/* in: x_t, h, W, U (the lambda's order: sequence taps, state taps,
 * non-sequences); outs: one per entry of outputs_info. */
static int step(rg_ctx *C, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **until,
                void *ud) {
  rg_variable *x_t = in[0], *h = in[1], *W = in[2], *U = in[3];
  rg_variable *h2 = rg_tanh(rg_add(rg_add(rg_dot(h, W), rg_dot(x_t, U)), b));
  outs[0] = h2;
  outs[1] = rg_sum(h2, -1, NULL);
  return h2 ? RG_OK : RG_ERR_TYPE;
}

static int fail(rg_ctx *C) {
  fprintf(stderr, "rnn: %s\n", rg_errmsg(C));
  return 1;
}

int main(void) {
  rg_init();
  rg_ctx *C = rg_ctx_new();
  int64_t sx[3] = {RG_DIM_UNKNOWN, 2, 3}, sh[2] = {2, 4}, sw[2] = {4, 4}, su[2] = {3, 4}, sb = 4;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 3, sx));
  rg_variable *h0 = rg_input(C, "h0", rg_type_new(RG_FLOAT64, 2, sh));
  rg_variable *W = rg_input(C, "W", rg_type_new(RG_FLOAT64, 2, sw));
  rg_variable *U = rg_input(C, "U", rg_type_new(RG_FLOAT64, 2, su));
  b = rg_input(C, "b", rg_type_new(RG_FLOAT64, 1, &sb));

  rg_scan_seq seqs[1] = {{.x = x}};                         /* taps: 0 */
  rg_scan_output outputs[2] = {{.init = h0}, {.init = NULL}}; /* a sit-sot, a nit-sot */
  rg_variable *non_seqs[2] = {W, U};
  rg_scan_spec spec = {.nseqs = 1, .seqs = seqs, .noutputs = 2, .outputs = outputs,
                       .nnon_seqs = 2, .non_seqs = non_seqs, .fn = step, .truncate_gradient = -1};
  rg_variable *ys[2]; /* the traces: hs (T 2 4), sums (T) */
  if (!rg_scan(C, &spec, ys)) return fail(C);
  rg_pprint(stdout, 2, ys);

  rg_variable *ins[5] = {x, h0, W, U, b};
  rg_function *f = rg_compile(C, 5, ins, 2, ys, NULL);
  if (!f) return fail(C);
  int64_t T = 5;
  sx[0] = T;
  rg_tensor *vals[5] = {rg_tensor_new(RG_FLOAT64, 3, sx), rg_tensor_new(RG_FLOAT64, 2, sh),
                        rg_tensor_new(RG_FLOAT64, 2, sw), rg_tensor_new(RG_FLOAT64, 2, su),
                        rg_tensor_new(RG_FLOAT64, 1, &sb)};
  for (int i = 0; i < 5; i++)
    for (int64_t k = 0; k < rg_tensor_numel(vals[i]); k++) rg_tensor_set_f64(vals[i], k, 0.1 * (double)((k * 7 + i) % 5) - 0.2);
  rg_tensor *out[2];
  if (rg_function_call(f, vals, out) != RG_OK) {
    fprintf(stderr, "rnn: %s\n", rg_function_errmsg(f));
    return 1;
  }
  printf("sums = ");
  rg_tensor_fprint(stdout, out[1]);
  printf("\n");
  for (int j = 0; j < 2; j++) rg_tensor_free(out[j]);
  for (int i = 0; i < 5; i++) rg_tensor_free(vals[i]);
  rg_function_free(f);
  return 0;
}
