/*
 * cli.h — shared declarations of the `relgraph` command's subcommands.
 *
 * Exit codes, the same for every subcommand:
 *   0 success, 1 tests or checks failed, 2 bad usage, 3 bad input or a
 *   run-time error, 4 a search or rewrite stopped at a limit.
 */
#ifndef RELGRAPH_TOOLS_CLI_H
#define RELGRAPH_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_INPUT = 3, EXIT_LIMIT = 4 };

typedef struct cli_command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
  void (*usage)(void);
} cli_command;

/* Subcommands (one file each, tools/cmd_NAME.c). */
int cmd_kanren(int argc, char **argv);
void usage_kanren(void);
int cmd_print(int argc, char **argv);
void usage_print(void);
int cmd_rewrite(int argc, char **argv);
void usage_rewrite(void);
int cmd_run(int argc, char **argv);
void usage_run(void);
int cmd_check_rules(int argc, char **argv);
void usage_check_rules(void);
int cmd_search(int argc, char **argv);
void usage_search(void);
int cmd_check_grads(int argc, char **argv);
void usage_check_grads(void);

/* Option parsing helpers: return false and print a message on bad input. */
bool cli_parse_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
struct rg_ctx;
struct rg_fgraph;
/* Loads a graph file ('-' reads standard input); NULL with an error in C. */
struct rg_fgraph *cli_load_graph(struct rg_ctx *C, const char *path);
/* The printer of a format name (pprint, dprint, sexp, dot, json) or NULL. */
typedef int (*cli_printer_fn)(FILE *f, struct rg_fgraph *fg);
cli_printer_fn cli_printer(const char *format);
/* Where a command writes the lines it adds to a graph it prints (a trace,
 * a profile): stdout; with --format sexp a buffer whose lines
 * cli_notes_end writes to stdout after "; ", comments of graph files, so
 * that the output saved to a file still reads back as a graph; with
 * --format json stderr, so that stdout stays one JSON document. */
typedef struct cli_notes {
  FILE *f;      /* write the lines here (stdout, or the buffer) */
  char *buf;    /* the buffer's text; NULL when f is stdout */
  size_t len;
} cli_notes;
FILE *cli_notes_begin(cli_notes *n, const char *format);
void cli_notes_end(cli_notes *n);
/* A cost model by name (flops, bytes, time) or from a rule file defining
 * (costo node c); NULL with an error in C. */
struct rg_cost_model;
struct rg_cost_model *cli_cost_model(struct rg_ctx *C, const char *spec);
/* Applies --size NAME=N options; EXIT_OK or EXIT_USAGE (with a message). */
int cli_cost_sizes(struct rg_cost_model *cm, const char *cmd, int n, const char *const *sizes);
/* Prints "relgraph NAME: message" to stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define cli_sprintf rg_gc_sprintf /* from relgraph/kanren.h */
/* The text of a random graph file computed by Scans (cli_scan.c), for
 * check-rules; draws from the generator state *seed. */
char *cli_random_scan(uint64_t *seed);
/* The value of an option given as `--opt VALUE` or `--opt=VALUE`, or NULL
 * if argv[*i] is not that option; advances *i past a separate value.
 * When the value is missing it says so and sets *missing (never clears
 * it: the caller starts each argument with it false, so one test of it
 * after all of its options tells usage errors from unknown options). */
const char *cli_option(int argc, char **argv, int *i, const char *name, bool *missing);

#endif
