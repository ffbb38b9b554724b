/*
 * cmd_search.c — `relgraph search GRAPH`: equality saturation with the
 * rules of rule files (and the standard database), then the K cheapest
 * graphs by a cost model (docs/search.md).
 *
 *   relgraph search GRAPH --rules FILE... [--query Q] [--cost flops|bytes|time|FILE]
 *                   [--answers K] [--node-limit N] [--iter-limit N] [--time-limit S]
 *                   [--size NAME=N]... [--format F] [--trace] [--egraph FILE]
 *
 * Each answer is printed as "# answer I: cost C" followed by the graph in
 * the chosen format (with --format sexp the lines start with ";" instead,
 * a comment of graph files, so that an answer saved to a file reads back
 * as a graph); then the stop reason, and with --trace the e-graph's
 * size per iteration.  --egraph writes the e-graph (JSON in the egraphs-good
 * serialized format, or Graphviz when FILE ends in .dot or .gv).  The
 * measured-time model compiles and times each candidate node on the CPU
 * backend.  Exit status 0 when saturated, 4 at a limit, 3 on bad input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"
#include "tools/cli.h"

#define MAX_FILES 64

void usage_search(void) {
  printf("usage: relgraph search [OPTIONS] GRAPH   (GRAPH '-' reads standard input)\n"
         "  --rules FILE...     load rules (defrule forms) from the files; repeatable\n"
         "                      (after GRAPH, every file up to the next option)\n"
         "  --query Q           the rules to use (default: rules if --rules, else fast_run)\n"
         "  --cost M            flops (default), bytes, time (measured on the CPU), or a\n"
         "                      rule file defining the relation (costo node c)\n"
         "  --answers K         print the K cheapest distinct graphs (default 1)\n"
         "  --node-limit N      stop at N e-nodes (default 100000)\n"
         "  --iter-limit N      stop after N iterations (default 30)\n"
         "  --time-limit S      stop after S seconds (default 10)\n"
         "  --size NAME=N       size of unknown dimensions: A.0 (dimension 0 of input A),\n"
         "                      A (every one of A) or ? (every other); repeatable\n"
         "  --depth D           relational rules: depth of the terms tried (default 2, at most 64)\n"
         "  --rel-answers N     relational rules: answers per run (default 8)\n"
         "  --no-backoff        apply every rule in every iteration\n"
         "  --interpret         run every relation in the interpreter (by default one\n"
         "                      that is two unification templates runs as e-matching)\n"
         "  --format F          pprint (default), dprint, sexp, dot or json\n"
         "  --trace             print the e-graph's size per iteration\n"
         "  --egraph FILE       write the e-graph: JSON (egraphs-good format) or, for\n"
         "                      FILE.dot / FILE.gv, Graphviz\n");
}

typedef struct search_args {
  const char *graph, *query, *format, *cost, *egraph;
  const char *rules[MAX_FILES], *sizes[MAX_FILES];
  int nrules, nsizes;
  int64_t answers;
  bool trace;
  rg_search_opts o;
} search_args;

static int parse_limit(const char *opt, const char *v, search_args *a) {
  int64_t n;
  double s;
  if (!strcmp(opt, "--time-limit")) {
    if (!cli_parse_double("search", opt, v, 1e-6, 1e9, &s)) return EXIT_USAGE;
    a->o.time_limit = s;
    return EXIT_OK;
  }
  /* each option's own range, so that the message gives it */
  int64_t max = !strcmp(opt, "--depth") ? RG_SEARCH_MAX_DEPTH : !strcmp(opt, "--answers") ? 10000 : INT32_MAX;
  if (!cli_parse_int("search", opt, v, 1, max, &n)) return EXIT_USAGE;
  if (!strcmp(opt, "--node-limit")) a->o.node_limit = n;
  else if (!strcmp(opt, "--iter-limit")) a->o.iter_limit = (int)n;
  else if (!strcmp(opt, "--depth")) a->o.rel_depth = (int)n;
  else if (!strcmp(opt, "--rel-answers")) a->o.rel_answers = (int)n;
  else a->answers = n;
  return EXIT_OK;
}

static const char *const limit_opts[] = {"--node-limit", "--iter-limit", "--time-limit", "--depth",
                                         "--rel-answers", "--answers"};

static int push(const char **v, int *n, const char *opt, const char *value) {
  if (*n == MAX_FILES) return cli_error("search", "too many %s options", opt), EXIT_USAGE;
  v[(*n)++] = value;
  return EXIT_OK;
}

/* One option at argv[*i]; EXIT_OK, EXIT_USAGE, or -1 when it is not one. */
static int parse_option(int argc, char **argv, int *i, search_args *a) {
  bool missing = false;
  const char *v;
  if (!strcmp(argv[*i], "--trace")) return a->trace = true, EXIT_OK;
  if (!strcmp(argv[*i], "--no-backoff")) return a->o.no_backoff = true, EXIT_OK;
  if (!strcmp(argv[*i], "--interpret")) return a->o.interpret_relations = true, EXIT_OK;
  for (size_t k = 0; k < sizeof limit_opts / sizeof *limit_opts; k++)
    if ((v = cli_option(argc, argv, i, limit_opts[k], &missing))) return parse_limit(limit_opts[k], v, a);
  const char **slot = NULL;
  if ((v = cli_option(argc, argv, i, "--rules", &missing))) return push(a->rules, &a->nrules, "--rules", v);
  if ((v = cli_option(argc, argv, i, "--size", &missing))) return push(a->sizes, &a->nsizes, "--size", v);
  if ((v = cli_option(argc, argv, i, "--query", &missing))) slot = &a->query;
  else if ((v = cli_option(argc, argv, i, "--cost", &missing))) slot = &a->cost;
  else if ((v = cli_option(argc, argv, i, "--format", &missing))) slot = &a->format;
  else if ((v = cli_option(argc, argv, i, "--egraph", &missing))) slot = &a->egraph;
  if (slot) return *slot = v, EXIT_OK;
  return missing ? EXIT_USAGE : -1;
}

/* GRAPH --rules FILE...: after the graph, the files that follow a
 * --rules value are rule files too (before it, the first is the graph). */
static int parse(int argc, char **argv, search_args *a) {
  memset(a, 0, sizeof *a);
  a->format = "pprint";
  a->cost = "flops";
  a->answers = 1;
  bool after_rules = false; /* the last argument was a rule file */
  for (int i = 1; i < argc; i++) {
    int nrules = a->nrules, rc = parse_option(argc, argv, &i, a);
    if (rc >= 0) {
      if (rc) return rc;
      after_rules = a->nrules > nrules;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1]) return cli_error("search", "unknown option '%s'", argv[i]), EXIT_USAGE;
    if (a->graph && after_rules) {
      if (push(a->rules, &a->nrules, "--rules", argv[i])) return EXIT_USAGE;
      continue;
    }
    if (a->graph)
      return cli_error("search", "one graph file at a time ('%s' and '%s'; several rule files follow the graph: "
                                 "GRAPH --rules FILE...)", a->graph, argv[i]),
             EXIT_USAGE;
    a->graph = argv[i];
    after_rules = false;
  }
  if (!a->graph) return cli_error("search", "no graph file given"), EXIT_USAGE;
  if (!cli_printer(a->format))
    return cli_error("search", "unknown format '%s' (pprint, dprint, sexp, dot or json)", a->format), EXIT_USAGE;
  return EXIT_OK;
}

/* ------------------------------------------------------------------ the run */

/* The rules the query selects; NULL with *code EXIT_INPUT when a rule
 * file cannot be read or loaded, EXIT_USAGE when the query is bad. */
static rg_rewriter *rules(rg_ctx *C, const search_args *a, int *code) {
  *code = EXIT_INPUT;
  rg_rewrite_db *db = rg_std_db(C);
  if (!db) return NULL;
  if (a->nrules) {
    rg_interp *I = rg_interp_new(C);
    rg_interp_set_output(I, NULL);
    rg_rule_set *rs = rg_rule_set_new(I);
    for (int i = 0; i < a->nrules; i++)
      if (rg_rule_set_load(rs, a->rules[i]) != RG_OK) return NULL;
    if (rg_rule_set_register(rs, db, "rules") != RG_OK) return NULL;
  }
  *code = EXIT_USAGE;
  return rg_db_query(C, db, a->query ? a->query : a->nrules ? "rules" : "fast_run");
}

static int write_egraph(rg_ctx *C, rg_egraph *eg, const rg_cost_model *cm, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return cli_error("search", "%s: cannot write: %s", path, strerror(errno)), EXIT_INPUT;
  size_t n = strlen(path);
  bool dot = (n > 4 && !strcmp(path + n - 4, ".dot")) || (n > 3 && !strcmp(path + n - 3, ".gv"));
  int rc = dot ? rg_egraph_write_dot(eg, f) : rg_egraph_write_json(eg, cm, f);
  if (rc && !dot && (f = freopen(path, "w", f))) {
    /* the costs could not be computed (a size not given): the e-graph
     * still goes out, every e-node at cost 1 as without a model, since
     * that is when one wants to look at it */
    cli_error("search", "%s: written with every cost 1 (%s)", path, rg_errmsg(C));
    rg_clear_error(C);
    rc = rg_egraph_write_json(eg, NULL, f);
  }
  if (f) fclose(f);
  return rc ? EXIT_INPUT : EXIT_OK;
}

static int print_answers(rg_ctx *C, rg_egraph *eg, rg_cost_model *cm, const search_args *a) {
  rg_fgraph **gs = calloc((size_t)a->answers, sizeof *gs);
  double *costs = calloc((size_t)a->answers, sizeof *costs);
  bool exact;
  int n = rg_egraph_extract(eg, cm, (int)a->answers, gs, costs, &exact);
  bool json = !strcmp(a->format, "json");
  const char *mark = strcmp(a->format, "sexp") ? "#" : ";"; /* sexp: a comment of graph files */
  if (json && n >= 0) printf("{\"answers\": [");
  for (int i = 0; i < n; i++) {
    if (json) printf("%s{\"model\": \"%s\", \"cost\": %.17g, \"graph\": ", i ? ", " : "", rg_cost_name(cm), costs[i]);
    else printf("%s answer %d: %s %.17g\n", mark, i + 1, rg_cost_name(cm), costs[i]);
    cli_printer(a->format)(stdout, gs[i]);
    if (json) printf("}");
  }
  free(gs);
  free(costs);
  if (n < 0) return cli_error("search", "%s", rg_errmsg(C)), EXIT_INPUT;
  const char *extraction = exact ? "exact" : "heuristic (search budget reached)";
  if (json)
    printf("],\n \"stop\": \"%s\", \"e_nodes\": %zu, \"e_classes\": %zu, \"extraction\": \"%s\"}\n",
           rg_egraph_stop_message(eg), rg_egraph_nnodes(eg), rg_egraph_nclasses(eg), extraction);
  else
    printf("%s %s; %zu e-nodes, %zu e-classes; extraction %s\n", mark, rg_egraph_stop_message(eg),
           rg_egraph_nnodes(eg), rg_egraph_nclasses(eg), extraction);
  return EXIT_OK;
}

static int search(rg_ctx *C, search_args *a) {
  a->o.fold = rg_eval_node; /* constant folding for the rules written in C */
  rg_fgraph *fg = cli_load_graph(C, a->graph);
  if (!fg) return cli_error("search", "%s", rg_errmsg(C)), EXIT_INPUT;
  int code;
  rg_rewriter *sel = rules(C, a, &code);
  if (!sel) return cli_error("search", "%s", rg_errmsg(C)), code;
  rg_cost_model *cm = cli_cost_model(C, a->cost);
  if (!cm) return cli_error("search", "%s", rg_errmsg(C)), EXIT_INPUT;
  int rc = cli_cost_sizes(cm, "search", a->nsizes, a->sizes);
  if (rc) return rc;
  rg_egraph *eg = rg_egraph_new(fg);
  if (!eg || rg_egraph_add_rules(eg, sel) < 0) return cli_error("search", "%s", rg_errmsg(C)), EXIT_INPUT;
  rg_search_stop stop = rg_egraph_run(eg, &a->o);
  if (a->trace) {
    cli_notes n;
    rg_egraph_trace(eg, cli_notes_begin(&n, a->format));
    cli_notes_end(&n);
  }
  if (stop == RG_SEARCH_ERROR) rc = (cli_error("search", "%s", rg_egraph_stop_message(eg)), EXIT_INPUT);
  if (!rc) rc = print_answers(C, eg, cm, a);
  if (a->egraph) { /* written also when no answer could be extracted: that is when one looks at it */
    int w = write_egraph(C, eg, cm, a->egraph);
    if (!rc) rc = w;
  }
  if (rg_egraph_rejections(eg, NULL) > 0) {
    cli_error("search", "%lld merges rejected (classes of different types or constants):", (long long)rg_egraph_rejections(eg, NULL));
    rg_egraph_rejections(eg, stderr);
  }
  rg_egraph_free(eg);
  return rc ? rc : stop == RG_SEARCH_SATURATED ? EXIT_OK : EXIT_LIMIT;
}

int cmd_search(int argc, char **argv) {
  search_args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  return search(rg_ctx_new(), &a);
}
