/*
 * cli_util.c — small helpers shared by the subcommands: number parsing
 * with range checks, option values, error messages.
 */
#include "tools/cli.h"

#include "relgraph/graph.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "relgraph %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

bool cli_parse_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    cli_error(cmd, "%s needs an integer from %lld to %lld, got '%s'", opt, (long long)lo, (long long)hi, s);
    return false;
  }
  *out = v;
  return true;
}

bool cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    cli_error(cmd, "%s needs a number from %g to %g, got '%s'", opt, lo, hi, s);
    return false;
  }
  *out = v;
  return true;
}

const char *cli_option(int argc, char **argv, int *i, const char *name, bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] != 0) return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    fprintf(stderr, "relgraph %s: %s needs a value\n", argv[0], name);
    return NULL;
  }
  return argv[++*i];
}

rg_fgraph *cli_load_graph(rg_ctx *C, const char *path) {
  if (strcmp(path, "-")) return rg_graph_load(C, path);
  size_t n;
  char *text = rg_read_stream(stdin, &n);
  if (!text) {
    rg_error(C, RG_ERR_IO, "<stdin>: cannot read: %s", rg_read_stream_error(errno));
    return NULL;
  }
  return rg_graph_read(C, "<stdin>", text, n);
}

static int print_sexp(FILE *f, rg_fgraph *fg) { return rg_graph_write(rg_fgraph_ctx(fg), f, fg); }

cli_printer_fn cli_printer(const char *name) {
  static const struct { const char *name; cli_printer_fn fn; } table[] = {
      {"pprint", rg_fgraph_pprint}, {"dprint", rg_fgraph_dprint}, {"sexp", print_sexp},
      {"dot", rg_fgraph_dot},       {"json", rg_fgraph_json},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(name, table[i].name)) return table[i].fn;
  return NULL;
}

FILE *cli_notes_begin(cli_notes *n, const char *format) {
  *n = (cli_notes){.f = stdout};
  if (!strcmp(format, "json")) n->f = stderr; /* JSON has no comments */
  if (!strcmp(format, "sexp")) {
    FILE *m = open_memstream(&n->buf, &n->len);
    if (m) n->f = m;
  }
  return n->f;
}

void cli_notes_end(cli_notes *n) {
  if (n->f == stdout || n->f == stderr) return;
  fclose(n->f);
  for (char *line = n->buf, *end = n->buf + n->len; line < end;) {
    char *nl = memchr(line, '\n', (size_t)(end - line));
    size_t k = nl ? (size_t)(nl - line) : (size_t)(end - line);
    printf(";%s%.*s\n", k ? " " : "", (int)k, line);
    line += k + 1;
  }
  free(n->buf);
  *n = (cli_notes){.f = stdout};
}
