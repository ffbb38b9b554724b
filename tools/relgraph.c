/*
 * relgraph.c — the `relgraph` command: dispatch to subcommands.
 *
 *   relgraph kanren FILE...        run relational programs
 *   relgraph print GRAPH           print a graph file
 *   relgraph rewrite GRAPH         rewrite a graph with rule databases
 *   relgraph run GRAPH             compile and run a graph
 *   relgraph check-rules FILE...   test rules on random graphs
 *   relgraph search GRAPH          equality saturation and cost-ranked extraction
 *   relgraph check-grads --ops     test gradients against finite differences
 *   relgraph --help | --version
 *
 * Each subcommand lives in tools/cmd_NAME.c and parses its own options.
 *
 * Before anything else, the command makes sure OpenBLAS runs kernels for
 * this processor: OpenBLAS picks them when it loads, and on processors it
 * does not recognise it falls back to generic ones several times slower
 * (rg_blas_choose_kernels: the command then sets OPENBLAS_CORETYPE and
 * starts itself again, once; a variable the user set is left alone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/backend.h"
#include "relgraph/kanren.h"
#include "tools/cli.h"

static const cli_command commands[] = {
    {"kanren", "run relational programs (miniKanren) and their tests", cmd_kanren, usage_kanren},
    {"print", "print a graph file (pprint, dprint, sexp, dot, json)", cmd_print, usage_print},
    {"rewrite", "rewrite a graph with rule databases and rule files", cmd_rewrite, usage_rewrite},
    {"run", "compile and run a graph on .npy inputs", cmd_run, usage_run},
    {"check-rules", "test rewrite rules on random graphs before and after", cmd_check_rules,
     usage_check_rules},
    {"search", "equality saturation with rule files; the cheapest graphs by a cost", cmd_search,
     usage_search},
    {"check-grads", "test gradients against finite differences (every op, or a graph)", cmd_check_grads,
     usage_check_grads},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f,
          "usage: relgraph COMMAND [ARGS...]\n"
          "       relgraph --help | --version\n"
          "       relgraph COMMAND --help\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

static void print_version(void) {
  const char *set = getenv("OPENBLAS_CORETYPE");
  printf("relgraph %s\nOpenBLAS kernels: %s", rg_version(), rg_blas_core());
  if (set) printf(" (OPENBLAS_CORETYPE=%s)", set);
  printf("\n");
}

/* Whether --help or -h comes among a command's arguments (before `--`). */
static bool asks_help(int argc, char **argv) {
  for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
  return false;
}

/* `--` ends the options: it is dropped, and each later argument beginning
 * with '-' (but "-", standard input) is passed as ./NAME, a file no
 * option parser takes for an option.  Returns the new count. */
static int end_options(int argc, char **argv) {
  int i = 2;
  while (i < argc && strcmp(argv[i], "--")) i++;
  if (i == argc) return argc;
  for (int j = i + 1; j < argc; j++) {
    const char *a = argv[j];
    if (a[0] == '-' && a[1]) {
      char *p = malloc(strlen(a) + 3);
      if (!p) return argc;
      strcpy(p, "./"), strcat(p, a);
      argv[j] = p;
    }
    argv[j - 1] = argv[j];
  }
  argv[argc - 1] = NULL;
  return argc - 1;
}

/* A command's status, after what it wrote to standard output reached it:
 * a full disk or a closed pipe is an error (3), not a success. */
static int finish(const char *cmd, int rc) {
  if ((fflush(stdout) || ferror(stdout)) && rc != EXIT_INPUT) {
    fprintf(stderr, "relgraph %s: write error on standard output\n", cmd);
    return EXIT_INPUT;
  }
  return rc;
}

int main(int argc, char **argv) {
  rg_blas_choose_kernels(argv);
  rg_init();
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version")) {
    if (argc > 2) return fprintf(stderr, "relgraph: --version takes no argument ('%s' given)\n", argv[2]), EXIT_USAGE;
    print_version();
    return EXIT_OK;
  }
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (strcmp(cmd, commands[i].name)) continue;
    if (asks_help(argc, argv)) {
      commands[i].usage();
      return EXIT_OK;
    }
    argc = end_options(argc, argv);
    return finish(cmd, commands[i].run(argc - 1, argv + 1));
  }
  fprintf(stderr, "relgraph: unknown command '%s'\n", cmd);
  usage(stderr);
  return EXIT_USAGE;
}
