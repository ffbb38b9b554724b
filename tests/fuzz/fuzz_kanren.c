/*
 * fuzz_kanren.c — fuzz harness for the reader and the interpreter of the
 * relational language: any byte string, run as a program in a fresh
 * interpreter, must load or fail with a message, never crash.
 *
 * Each input's work is bounded so that inputs average well under a
 * millisecond under AddressSanitizer: the prelude is loaded once (see
 * fuzz_common.h), inputs are at most MAX_INPUT bytes, every search stops
 * after MAX_STEPS steps or MAX_SECONDS, all the searches of one input
 * stop once INPUT_SECONDS have passed (the context's deadline, examined
 * every few steps, so a search whose steps are costly stops too), and
 * output is silenced.  Inputs
 * that could touch the file system or run for long by design are skipped
 * (fuzz_skipped_program).
 */
#include "fuzz_common.h"

#include "relgraph/kanren.h"

#define MAX_INPUT 4096
#define MAX_STEPS 2000
#define MAX_SECONDS 0.05
#define INPUT_SECONDS 0.002 /* all the searches of one input */

static void run_program(const char *text) {
  rg_interp *I = fuzz_interp();
  rg_run_opts opts = {.max_steps = MAX_STEPS, .timeout_s = MAX_SECONDS};
  rg_interp_set_run_opts(I, &opts);
  rg_ctx_set_deadline(rg_interp_ctx(I), INPUT_SECONDS);
  int rc = rg_interp_load_string(I, "fuzz.kn", text);
  if (rc < 0 && !rg_errmsg(rg_interp_ctx(I))[0]) abort(); /* an error always has a message */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT) return 0;
  char *text = fuzz_text(data, size);
  if (!fuzz_skipped_program(text)) {
    fuzz_begin();
    run_program(text);
    fuzz_end();
  }
  free(text);
  return 0;
}
