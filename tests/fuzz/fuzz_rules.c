/*
 * fuzz_rules.c — fuzz harness for rule files: any byte string, loaded as a
 * rule file (the `defrule` forms of docs/rules.md) into a fresh rule set
 * and applied to a small graph, must load or fail with a message, and a
 * rewrite run must stop and leave a valid graph of the same output types,
 * never crash.
 *
 * The graph holds the ops the rules of tests/golden and examples match
 * (arithmetic, dot, casts, integer and float dtypes, a constant to fold).
 * Work per input is bounded like the kanren harness's: at most MAX_INPUT
 * bytes, searches of at most MAX_STEPS steps, all the searches of an input
 * within INPUT_SECONDS (a rule whose relation recurses without end made
 * thousands of searches of MAX_STEPS each, 12 s in all), and a rewrite
 * budget of MAX_USE_RATIO times the graph's size per rule.  Programs the kanren
 * harness skips are skipped here too (fuzz_skipped_program).
 */
#include "fuzz_common.h"

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"

#define MAX_INPUT 4096
#define MAX_STEPS 2000
#define MAX_SECONDS 0.05
#define MAX_USE_RATIO 2.0
#define INPUT_SECONDS 0.02 /* all the searches of one input */

static const char small_graph[] =
    "(graph\n"
    "  (input A float64 (2 3))\n"
    "  (input x float64 (3))\n"
    "  (input y float64 (?))\n"
    "  (input i int8 (3))\n"
    "  (output (dot A (add x y)))\n"
    "  (output (exp (neg (mul x (constant float64 () (2.0))))))\n"
    "  (output (tanh (sub (true_div (mul x x) x) y)))\n"
    "  (output (add i (constant int16 () (0))))\n"
    "  (output (neg (add (constant float32 () (1.5)) (constant float32 () (2.5))))))\n";

static int fold(const rg_node *n, rg_tensor **outs, char *err, size_t len) {
  return rg_eval_node(n, outs, err, len);
}

/* The rules as a rewriter, or NULL (with a message) when they do not load. */
static rg_rewriter *load_rules(rg_interp *I, const char *text) {
  rg_ctx *C = rg_interp_ctx(I);
  rg_rule_set *rs = rg_rule_set_new(I);
  rg_rewrite_db *db = rg_db_sequence("fuzz");
  if (!rs || rg_rule_set_load_string(rs, "fuzz.kn", text) != RG_OK ||
      rg_rule_set_register(rs, db, "rules") != RG_OK)
    return NULL;
  return rg_db_query(C, db, "rules");
}

static void check_types_kept(rg_fgraph *fg, const rg_type **before) {
  if (rg_fgraph_check(fg) != RG_OK) abort();
  for (int k = 0; k < rg_fgraph_noutputs(fg); k++)
    if (!rg_type_equal(rg_fgraph_output(fg, k)->type, before[k])) abort();
}

static void apply_rules(const char *text) {
  rg_interp *I = fuzz_interp();
  rg_ctx *C = rg_interp_ctx(I);
  rg_run_opts ropts = {.max_steps = MAX_STEPS, .timeout_s = MAX_SECONDS};
  rg_interp_set_run_opts(I, &ropts);
  rg_ctx_set_deadline(C, INPUT_SECONDS);
  rg_rewriter *rw = load_rules(I, text);
  if (!rw) {
    if (!rg_errmsg(C)[0]) abort(); /* a failure always has a message */
    return;
  }
  rg_fgraph *fg = rg_graph_read(C, "small.graph", small_graph, sizeof small_graph - 1);
  if (!fg) abort();
  const rg_type *before[16];
  for (int k = 0; k < rg_fgraph_noutputs(fg); k++) before[k] = rg_fgraph_output(fg, k)->type;
  rg_rewrite_opts o = {.max_use_ratio = MAX_USE_RATIO, .trace = true, .fold = fold};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &o);
  if (!run) {
    if (!rg_errmsg(C)[0]) abort();
    return;
  }
  if (!rg_rewrite_stop_message(run)) abort();
  check_types_kept(fg, before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT) return 0;
  char *text = fuzz_text(data, size);
  if (!fuzz_skipped_program(text)) {
    fuzz_begin();
    apply_rules(text);
    fuzz_end();
  }
  free(text);
  return 0;
}
