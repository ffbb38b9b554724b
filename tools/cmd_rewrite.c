/*
 * cmd_rewrite.c — `relgraph rewrite GRAPH`: rewrites a graph file with the
 * standard database and/or rule files, and prints the result.
 *
 *   relgraph rewrite GRAPH [--rules FILE]... [--query Q] [--format F]
 *                    [--profile] [--trace] [--why NODE] [--max-use-ratio R]
 *                    [--answers K [--cost flops|bytes|time|FILE] [--size NAME=N]...]
 *                    [--describe]
 *
 * Rules from --rules files form the database "rules" (nested in the
 * standard one); the query defaults to "rules" when files are given, else
 * "fast_run".  The result goes to standard output (pprint: one output per
 * line); the profile, trace and provenance follow it.  A run that stops on
 * a budget or a cycle says why on standard error and exits with 4.
 *
 * Search mode (--answers K, K > 1): each relational rule takes up to K
 * answers of its relation and keeps the one whose new nodes cost least by
 * the --cost model (tools/cli_cost.c), instead of the first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "tools/cli.h"

void usage_rewrite(void) {
  printf("usage: relgraph rewrite [OPTIONS] GRAPH   (GRAPH '-' reads standard input)\n"
         "  --rules FILE        load rules (defrule forms) from FILE; repeatable\n"
         "  --query Q           the rewrite query (default: rules if --rules, else fast_run)\n"
         "  --format F          pprint (default), dprint, sexp, dot or json\n"
         "  --profile           print the rewrite profile\n"
         "  --trace             print every rewrite, in order\n"
         "  --why NODE          print how node NODE came to be (ids as --trace shows them)\n"
         "  --max-use-ratio R   budget of each rewriter: R x the largest graph size (default 8)\n"
         "  --answers K         search mode: a relational rule takes up to K answers and\n"
         "                      keeps the cheapest (default 1: the first answer)\n"
         "  --cost M            cost of the answers: flops (default), bytes, time (measured\n"
         "                      on the CPU), or a rule file defining (costo node c)\n"
         "  --size ?=N          the size of every dimension not known statically, for\n"
         "                      the cost (otherwise such dimensions count as 0)\n"
         "  --describe          print the database (and --rules files) instead of rewriting;\n"
         "                      it takes no other option (a graph given is not read)\n");
}

#define MAX_FILES 64

typedef struct rewrite_args {
  const char *graph, *query, *format, *cost;
  const char *rules[MAX_FILES], *sizes[MAX_FILES];
  int nrules, nsizes;
  int64_t answers;
  bool profile, trace, describe;
  int64_t why;
  double ratio;
} rewrite_args;

static int parse(int argc, char **argv, rewrite_args *a) {
  memset(a, 0, sizeof *a);
  a->format = "pprint";
  a->cost = "flops";
  a->answers = 1;
  a->why = -1;
  for (int i = 1; i < argc; i++) {
    bool missing = false;
    const char *v;
    if (!strcmp(argv[i], "--profile")) a->profile = true;
    else if (!strcmp(argv[i], "--trace")) a->trace = true;
    else if (!strcmp(argv[i], "--describe")) a->describe = true;
    else if ((v = cli_option(argc, argv, &i, "--rules", &missing))) {
      if (a->nrules == MAX_FILES) return cli_error("rewrite", "too many rule files"), EXIT_USAGE;
      a->rules[a->nrules++] = v;
    } else if ((v = cli_option(argc, argv, &i, "--size", &missing))) {
      if (a->nsizes == MAX_FILES) return cli_error("rewrite", "too many --size options"), EXIT_USAGE;
      a->sizes[a->nsizes++] = v;
    } else if ((v = cli_option(argc, argv, &i, "--cost", &missing))) a->cost = v;
    else if ((v = cli_option(argc, argv, &i, "--answers", &missing))) {
      if (!cli_parse_int("rewrite", "--answers", v, 1, 10000, &a->answers)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--query", &missing))) a->query = v;
    else if ((v = cli_option(argc, argv, &i, "--format", &missing))) a->format = v;
    else if ((v = cli_option(argc, argv, &i, "--why", &missing))) {
      if (!cli_parse_int("rewrite", "--why", v, 0, INT64_MAX, &a->why)) return EXIT_USAGE;
    } else if ((v = cli_option(argc, argv, &i, "--max-use-ratio", &missing))) {
      if (!cli_parse_double("rewrite", "--max-use-ratio", v, 1e-9, 1e9, &a->ratio)) return EXIT_USAGE;
    } else if (missing) return EXIT_USAGE;
    else if (argv[i][0] == '-' && argv[i][1]) return cli_error("rewrite", "unknown option '%s'", argv[i]), EXIT_USAGE;
    else if (a->graph) return cli_error("rewrite", "one graph file at a time"), EXIT_USAGE;
    else a->graph = argv[i];
  }
  if (a->describe) { /* the database, with the rule files' rules: no rewriting option applies */
    const char *other = a->query ? "--query" : a->profile ? "--profile"
                      : a->trace ? "--trace" : a->why >= 0 ? "--why" : a->nsizes ? "--size"
                      : a->answers != 1 ? "--answers" : strcmp(a->cost, "flops") ? "--cost"
                      : strcmp(a->format, "pprint") ? "--format" : a->ratio ? "--max-use-ratio" : NULL;
    if (other)
      return cli_error("rewrite", "--describe prints the database and takes no rewriting option ('%s' "
                       "given)", other), EXIT_USAGE;
  }
  if (!a->graph && !a->describe) return cli_error("rewrite", "no graph file given"), EXIT_USAGE;
  if (!cli_printer(a->format))
    return cli_error("rewrite", "unknown format '%s' (pprint, dprint, sexp, dot or json)", a->format), EXIT_USAGE;
  return EXIT_OK;
}

/* The standard database plus the rule files. */
static rg_rewrite_db *database(rg_ctx *C, const rewrite_args *a) {
  rg_rewrite_db *db = rg_std_db(C);
  if (!db || !a->nrules) return db;
  rg_interp *I = rg_interp_new(C);
  rg_interp_set_output(I, NULL);
  rg_rule_set *rs = rg_rule_set_new(I);
  for (int i = 0; i < a->nrules; i++)
    if (rg_rule_set_load(rs, a->rules[i]) != RG_OK) return NULL;
  return rg_rule_set_register(rs, db, "rules") == RG_OK ? db : NULL;
}

static int report(const rewrite_args *a, rg_rewrite_run *run) {
  cli_notes n;
  FILE *f = cli_notes_begin(&n, a->format);
  if (a->profile) rg_rewrite_profile(run, f);
  if (a->trace) rg_rewrite_trace(run, f);
  int why = a->why >= 0 ? rg_rewrite_why(run, (uint64_t)a->why, f) : RG_OK;
  cli_notes_end(&n);
  if (why != RG_OK)
    return cli_error("rewrite", "--why %lld: %s", (long long)a->why, rg_errmsg(rg_rewrite_ctx(run))), EXIT_INPUT;
  if (rg_rewrite_rejected(run) > 0) {
    cli_error("rewrite", "%lld rewrite%s rejected (a changed type or a cycle):",
              (long long)rg_rewrite_rejected(run), rg_rewrite_rejected(run) == 1 ? "" : "s");
    rg_rewrite_rejections(run, stderr);
  }
  switch (rg_rewrite_stop(run)) {
  case RG_STOP_EQUILIBRIUM: return EXIT_OK;
  case RG_STOP_ERROR:
    cli_error("rewrite", "%s", rg_rewrite_stop_message(run));
    return EXIT_INPUT;
  default:
    cli_error("rewrite", "stopped: %s", rg_rewrite_stop_message(run));
    return EXIT_LIMIT;
  }
}

int cmd_rewrite(int argc, char **argv) {
  rewrite_args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  rg_ctx *C = rg_ctx_new();
  rg_rewrite_db *db = database(C, &a);
  if (!db) return cli_error("rewrite", "%s", rg_errmsg(C)), EXIT_INPUT;
  if (a.describe) {
    rg_db_describe(db, stdout);
    return EXIT_OK;
  }
  rg_fgraph *fg = cli_load_graph(C, a.graph);
  if (!fg) return cli_error("rewrite", "%s", rg_errmsg(C)), EXIT_INPUT;
  const char *q = a.query ? a.query : a.nrules ? "rules" : "fast_run";
  rg_rewriter *rw = rg_db_query(C, db, q);
  if (!rw) return cli_error("rewrite", "%s", rg_errmsg(C)), EXIT_USAGE;
  rg_rewrite_opts o = {.max_use_ratio = a.ratio, .profile = a.profile, .trace = a.trace,
                       .provenance = a.why >= 0, .fold = rg_eval_node, .answers = (int)a.answers};
  /* the cost and sizes are checked whether or not answers use them */
  rg_cost_model *cost = cli_cost_model(C, a.cost);
  if (!cost) return cli_error("rewrite", "%s", rg_errmsg(C)), EXIT_INPUT;
  for (int i = 0; i < a.nsizes; i++)
    if (strncmp(a.sizes[i], "?=", 2))
      return cli_error("rewrite", "--size: only ?=N (inner values have no names), got '%s'", a.sizes[i]), EXIT_USAGE;
  if ((rc = cli_cost_sizes(cost, "rewrite", a.nsizes, a.sizes))) return rc;
  if (a.answers > 1) o.cost = cost;
  rg_rewrite_run *run = rg_rewrite(fg, rw, &o);
  if (o.cost && rg_cost_why(cost)) /* the answers a node had no cost for were not compared */
    cli_error("rewrite", "--cost %s: %s (an answer without a cost is never the cheapest: the first "
              "answer was kept where none had one)", a.cost, rg_cost_why(cost));
  if (cli_printer(a.format)(stdout, fg) != RG_OK)
    return cli_error("rewrite", "%s", rg_errmsg(C)), EXIT_INPUT;
  return report(&a, run);
}
