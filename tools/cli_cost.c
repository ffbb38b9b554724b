/*
 * cli_cost.c — the cost models the `search` and `rewrite` subcommands take
 * from the command line: `--cost flops|bytes|time|FILE` and `--size
 * NAME=N`.  The measured model compiles each candidate node alone on the
 * CPU backend and times it on fixed inputs of its input types (on the
 * host, whatever device they name); FILE is a
 * rule file defining the relation (costo node c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "tools/cli.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds per run of node on random inputs of its inputs' types (the
 * median of five runs after one warm-up); -1 when it cannot run. */
static double measure_node(const rg_node *node, void *ud) {
  rg_ctx *C = ud;
  int n = node->nin;
  rg_variable **ins = calloc((size_t)n + 1, sizeof *ins), **vars = calloc((size_t)n + 1, sizeof *vars);
  rg_tensor **vals = calloc((size_t)n + 1, sizeof *vals);
  int nvar = 0;
  for (int i = 0; i < n; i++) {
    const rg_type *t = rg_type_on_device(node->inputs[i]->type, RG_DEVICE_HOST); /* timed on the CPU */
    ins[i] = rg_is_constant(node->inputs[i]) ? node->inputs[i] : (vars[nvar] = rg_input(C, NULL, t));
    if (rg_is_constant(node->inputs[i])) continue;
    vals[nvar] = rg_tensor_new(t->dtype, t->ndim, t->shape);
    for (int64_t e = 0; vals[nvar] && e < rg_tensor_numel(vals[nvar]); e++)
      rg_tensor_set_f64(vals[nvar], e, (double)((e * 7919) % 13) / 13.0 + 0.5);
    nvar++;
  }
  rg_variable *out = rg_apply(C, node->op, n, ins);
  rg_compile_opts co = {.mode = {.query = "none"}};
  rg_function *f = out ? rg_compile(C, nvar, vars, 1, &out, &co) : NULL;
  double times[6], best = -1;
  for (int r = 0; f && r < 6; r++) {
    rg_tensor *res = NULL;
    double t0 = now();
    if (rg_function_call(f, vals, &res)) break;
    times[r] = now() - t0;
    rg_tensor_free(res);
    if (r == 5) {
      for (int x = 1; x < 6; x++)
        for (int y = x; y > 1 && times[y] < times[y - 1]; y--) {
          double s = times[y]; times[y] = times[y - 1]; times[y - 1] = s;
        }
      best = times[3];
    }
  }
  rg_clear_error(C);
  rg_function_free(f);
  for (int i = 0; i < nvar; i++) rg_tensor_free(vals[i]);
  free(ins);
  free(vars);
  free(vals);
  return best;
}

rg_cost_model *cli_cost_model(rg_ctx *C, const char *spec) {
  if (!strcmp(spec, "flops")) return rg_cost_flops();
  if (!strcmp(spec, "bytes")) return rg_cost_bytes();
  if (!strcmp(spec, "time")) return rg_cost_measured(measure_node, C);
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_rule_set_new(I); /* typeo, dtypeo, ndimo and the graph evaluator */
  if (rg_interp_load_file(I, spec) != RG_OK) {
    if (rg_errcode(C) == RG_ERR_IO) { /* not a file: say what --cost takes */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", rg_errmsg(C));
      rg_error(C, RG_ERR_IO, "--cost %s: neither a cost model (flops, bytes, time) nor a readable "
               "rule file defining (costo node c): %s", spec, msg);
    }
    return NULL;
  }
  rg_term rel = rg_interp_lookup(I, "costo");
  if (!rel || rg_kind_of(rel) != RG_K_PROC) {
    rg_error(C, RG_ERR_NAME, "%s: defines no relation costo (costo node c)", spec);
    return NULL;
  }
  return rg_cost_relation(rel);
}

int cli_cost_sizes(rg_cost_model *cm, const char *cmd, int n, const char *const *sizes) {
  for (int i = 0; i < n; i++) {
    const char *eq = strrchr(sizes[i], '=');
    int64_t v;
    if (!eq || eq == sizes[i]) return cli_error(cmd, "--size: expected NAME=N, got '%s'", sizes[i]), EXIT_USAGE;
    if (!cli_parse_int(cmd, "--size", eq + 1, 0, INT64_MAX / 4, &v)) return EXIT_USAGE;
    rg_cost_set_size(cm, cli_sprintf("%.*s", (int)(eq - sizes[i]), sizes[i]), v);
  }
  return EXIT_OK;
}
