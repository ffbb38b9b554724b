/*
 * cmd_kanren.c — `relgraph kanren FILE...`: runs relational programs.
 *
 * Every top-level `run` prints its list of answers on its own line.  If
 * any `test` form ran, the last line is "N passed, N failed" and the exit
 * status is 1 when a test failed.
 */
#include <stdio.h>
#include <string.h>

#include "relgraph/kanren.h"
#include "tools/cli.h"

void usage_kanren(void) {
  printf("usage: relgraph kanren [OPTIONS] FILE...   (FILE '-' reads standard input)\n"
         "  --no-occurs-check   unify without the occurs check\n"
         "  --max-steps N       stop any search after N steps\n"
         "  --timeout SECONDS   stop any search after SECONDS\n");
}

static int exit_for(int rc) {
  if (rc == RG_STOP_STEPS || rc == RG_STOP_TIMEOUT) return EXIT_LIMIT;
  return EXIT_INPUT;
}

int cmd_kanren(int argc, char **argv) {
  rg_run_opts opts = {0};
  const char *files[256];
  int nfiles = 0;
  for (int i = 1; i < argc; i++) {
    bool missing = false;
    const char *v;
    if (!strcmp(argv[i], "--no-occurs-check")) {
      opts.no_occurs_check = true;
    } else if ((v = cli_option(argc, argv, &i, "--max-steps", &missing))) {
      if (!cli_parse_int("kanren", "--max-steps", v, 1, INT64_MAX, &opts.max_steps)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--timeout", &missing))) {
      if (!cli_parse_double("kanren", "--timeout", v, 1e-6, 1e9, &opts.timeout_s)) return EXIT_USAGE;
    } else if (missing) {
      return EXIT_USAGE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("kanren", "unknown option '%s'", argv[i]);
      return EXIT_USAGE;
    } else if (nfiles < 256) {
      files[nfiles++] = argv[i];
    } else {
      cli_error("kanren", "too many files");
      return EXIT_USAGE;
    }
  }
  if (!nfiles) {
    cli_error("kanren", "no program file given (use '-' for standard input)");
    return EXIT_USAGE;
  }
  rg_ctx *C = rg_ctx_new();
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_run_opts(I, &opts);
  int status = EXIT_OK;
  for (int f = 0; f < nfiles && status == EXIT_OK; f++) {
    int rc = rg_interp_load_file(I, files[f]);
    if (rc != RG_OK) {
      fflush(stdout);
      fprintf(stderr, "relgraph kanren: %s\n", rg_errmsg(C));
      status = exit_for(rc);
    }
  }
  int64_t passed, failed;
  rg_interp_test_counts(I, &passed, &failed);
  if (passed + failed > 0) {
    printf("%lld passed, %lld failed\n", (long long)passed, (long long)failed);
    if (failed && status == EXIT_OK) status = EXIT_FAILED;
  }
  return status;
}
