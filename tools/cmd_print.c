/*
 * cmd_print.c — `relgraph print GRAPH [--format FORMAT]`: reads a graph
 * file (docs/graph-format.md) and prints it as pprint (Aesara's infix
 * style, the default), dprint (the indented debug print), sexp (the graph
 * file format again), dot (Graphviz) or json.
 *
 * Exit status: 0, 2 for bad usage, 3 for a file that cannot be read or is
 * not a valid graph (the message names file:line:col).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/graph.h"
#include "tools/cli.h"

void usage_print(void) {
  printf("usage: relgraph print [--format FORMAT] GRAPH   (GRAPH '-' reads standard input)\n"
         "  --format pprint   infix expressions, one line per output (default)\n"
         "  --format dprint   indented debug print with node ids and types\n"
         "  --format sexp     the graph file format\n"
         "  --format dot      Graphviz\n"
         "  --format json     JSON\n");
}

int cmd_print(int argc, char **argv) {
  const char *format = "pprint", *file = NULL;
  for (int i = 1; i < argc; i++) {
    bool missing = false;
    const char *v;
    if ((v = cli_option(argc, argv, &i, "--format", &missing))) {
      format = v;
    } else if (missing) {
      return EXIT_USAGE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("print", "unknown option '%s'", argv[i]);
      return EXIT_USAGE;
    } else if (file) {
      cli_error("print", "one graph file at a time");
      return EXIT_USAGE;
    } else {
      file = argv[i];
    }
  }
  cli_printer_fn fn = cli_printer(format);
  if (!fn) {
    cli_error("print", "unknown format '%s' (pprint, dprint, sexp, dot or json)", format);
    return EXIT_USAGE;
  }
  if (!file) {
    cli_error("print", "no graph file given (use '-' for standard input)");
    return EXIT_USAGE;
  }
  rg_ctx *C = rg_ctx_new();
  rg_fgraph *fg = cli_load_graph(C, file);
  if (!fg) {
    cli_error("print", "%s", rg_errmsg(C));
    return EXIT_INPUT;
  }
  if (fn(stdout, fg) != RG_OK || fflush(stdout)) {
    cli_error("print", "write error");
    return EXIT_INPUT;
  }
  return EXIT_OK;
}
