/*
 * relgraph/rewrite.h — rewriting graphs: rewriters, rules written as
 * relations or patterns, equilibrium and sequence drivers, rewrite
 * databases queried by tags, and what a rewrite run reports.
 *
 * A *node rewriter* looks at one node and may return replacements for its
 * outputs; it declares the ops it tracks, so a node meets only the
 * rewriters that can match it.  A *graph rewriter* sees a whole
 * FunctionGraph.  Rules are node rewriters: pattern rules (`?x` variables,
 * non-linear, guards), relational rules (a miniKanren relation between the
 * node's term and its replacement: run with the arguments swapped, the same
 * relation rewrites backwards), op substitution and op removal.
 *
 * The equilibrium driver runs node rewriters from a worklist: a node
 * created or changed by a rewrite is considered again at once, so work is
 * linear in the number of rewrites.  Every rewriter has a use budget
 * (max_use_ratio times the largest graph size seen, counted up to
 * max_use_ratio times the starting size).  The driver notices
 * the graph returning to an earlier state and names the rules involved.
 * It always reports why it stopped.
 *
 * Rewrite databases hold named entries (rewriters or other databases) with
 * tags; a query ("fast_run -inplace &stable") selects entries and gives a
 * rewriter that runs them.  The standard database is rg_std_db().
 *
 * Memory: everything here is collected, like graphs.
 *
 * Threads.  A rewrite run works on one FunctionGraph, which no other thread
 * may use meanwhile; runs on different graphs may go on at once in
 * different contexts.  Rewriters, rules and databases are not changed by
 * running them, so several runs may share them, except relational rules,
 * which keep one prepared query and so serve one run at a time (build a
 * rule set per thread).  Registering rules in a database, and the first
 * rg_std_db() of a context, are not safe against concurrent use of that
 * database or context.
 */
#ifndef RELGRAPH_REWRITE_H
#define RELGRAPH_REWRITE_H

#include "relgraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library exports what this header declares, nothing else
 * (everything else is built with hidden visibility). */
#pragma GCC visibility push(default)

typedef struct rg_rewriter rg_rewriter;
typedef struct rg_rewrite_db rg_rewrite_db;
typedef struct rg_rewrite_run rg_rewrite_run;

/* ------------------------------------------------------------------ rewriters */

/* A node rewriter's function: on a match, fills out[0..node->nout) with
 * replacements (NULL leaves an output alone) and returns 1; returns 0 when
 * the rewrite does not apply, a negative status on error (message in the
 * run's context). */
typedef int (*rg_node_rewrite_fn)(rg_rewrite_run *run, rg_node *node, rg_variable **out,
                                  void *ud);
/* A graph rewriter's function: changes fg; returns the number of changes
 * made (>= 0) or a negative status. */
typedef int (*rg_graph_rewrite_fn)(rg_rewrite_run *run, rg_fgraph *fg, void *ud);

/* tracks: the ops the rewriter can match; ntracks 0 means every op. */
rg_rewriter *rg_node_rewriter(const char *name, int ntracks, const rg_opcode *tracks,
                              rg_node_rewrite_fn fn, void *ud);
/* Also (or only, with ntracks 0 above and this) track an opaque op by name. */
void rg_rewriter_track_opaque(rg_rewriter *rw, const char *name);
rg_rewriter *rg_graph_rewriter(const char *name, rg_graph_rewrite_fn fn, void *ud);

/* A navigator: a graph rewriter that walks the graph once, from inputs to
 * outputs or back, trying the node rewriters rws (in order, those tracking
 * the node) on each node.  New nodes a rewrite makes are visited next,
 * unless ignore_new: then only the nodes of the graph as it was are
 * visited (an expansion x -> f(x) applies once per node).  Rewrites are
 * checked and budgeted as in the equilibrium driver. */
typedef enum rg_nav_order { RG_NAV_IN_TO_OUT, RG_NAV_OUT_TO_IN } rg_nav_order;
rg_rewriter *rg_navigator(const char *name, rg_nav_order order, bool ignore_new, int n,
                          rg_rewriter *const *rws);
const char *rg_rewriter_name(const rg_rewriter *rw);

/* Rule options. */
enum {
  /* rewrite a node even when an output it replaces has several clients
   * (the rewritten expression is then computed for all of them) */
  RG_RULE_SHARED_OK = 1,
};

/* A pattern rule: `from` and `to` are terms where symbols ?x are pattern
 * variables (the same ?x twice must match equal expressions); `guard`, if
 * not NULL, is a relation called with the values of `guard_vars` (a list
 * of pattern variable symbols) that must succeed.  NULL with an error in C
 * if the pattern is malformed. */
rg_rewriter *rg_pattern_rule(rg_ctx *C, const char *name, rg_term from, rg_term to,
                             rg_term guard, rg_term guard_vars, unsigned flags);
/* A relational rule: rel is a relation of two arguments (in out); the
 * first answer for out, evaluated into graph nodes, replaces the node (an
 * answer that fails to evaluate, or has unbound variables, means "does not
 * apply").  With `backwards`, the relation runs as (rel out in).  The
 * rule keeps one prepared query for the context it last ran in, so it
 * serves one rewrite run at a time (build a rule per thread).  It tracks
 * the heads the relation requires of its input where they can be read
 * from its unifications (read again when a relation is defined after),
 * else every op; rg_rewriter_set_tracks overrides this. */
rg_rewriter *rg_relation_rule(rg_ctx *C, const char *name, rg_term rel, bool backwards,
                              unsigned flags);
/* Replaces every application of op `from` by op `to` (same inputs). */
rg_rewriter *rg_op_subst_rule(const char *name, const rg_op *from, const rg_op *to);
/* Removes applications of a one-input op: f(x) -> x (when types allow). */
rg_rewriter *rg_op_remove_rule(const char *name, const rg_op *op);
/* Restricts a rule to ops (overrides what it inferred). */
void rg_rewriter_set_tracks(rg_rewriter *rw, int ntracks, const rg_opcode *tracks);

/* What a rule does in one line ("(mul ?x 1) -> ?x"); "" when not said. */
const char *rg_rewriter_describe(const rg_rewriter *rw);
/* Terms the rule applies to, as text with ?x leaves ("(add ?x 0) (add 0
 * ?x ?y)"): a pattern rule's pattern, an op rule's op applied to ?a ...,
 * or the examples given with the rule; NULL when unknown.  Tools build
 * test graphs from them (relgraph check-rules). */
const char *rg_rewriter_examples(const rg_rewriter *rw);
/* Sets the description and examples (either may be NULL: unchanged). */
void rg_rewriter_set_info(rg_rewriter *rw, const char *describe, const char *examples);
/* A relational rule's relation (NULL for other rewriters); *backwards
 * (may be NULL) tells whether it runs as (rel out in). */
rg_term rg_rewriter_relation(const rg_rewriter *rw, bool *backwards);

/* ------------------------------------------------------------------ databases */

/* A sequence database runs its entries in order of position; an
 * equilibrium database runs its node rewriters to a fixed point (graph
 * rewriters among its entries run once per pass). */
rg_rewrite_db *rg_db_sequence(const char *name);
rg_rewrite_db *rg_db_equilibrium(const char *name);
/* Registers a rewriter or a sub-database under a name with tags (a
 * space-separated list; the entry's own name is always a tag too).
 * Positions order sequence entries; equilibrium databases ignore them.
 * Returns an error if the name is taken, or (rg_db_register_db) if the
 * database would end up inside itself. */
int rg_db_register(rg_rewrite_db *db, const char *name, rg_rewriter *rw, double position,
                   const char *tags);
int rg_db_register_db(rg_rewrite_db *db, const char *name, rg_rewrite_db *sub, double position,
                      const char *tags);
const char *rg_db_name(const rg_rewrite_db *db);
/* The entries, in order: rg_db_entry() returns entry i's name and sets its
 * rewriter or sub-database (the other NULL) and its tags (space-separated,
 * without the name); any out pointer may be NULL. */
int rg_db_count(const rg_rewrite_db *db);
const char *rg_db_entry(const rg_rewrite_db *db, int i, rg_rewriter **rw, rg_rewrite_db **sub,
                        const char **tags);
/* Writes the database's entries (names, positions, tags), nested. */
void rg_db_describe(const rg_rewrite_db *db, FILE *f);

/* Selects entries with a query: space-separated words, each a tag to
 * include ("fast_run", or "+fast_run"), a tag every entry must have
 * ("&stable"), a tag or name to exclude ("-inplace"), or a sub-query for a
 * nested database ("canonicalize:-local_fill_sink").  An entry is selected
 * when it has an included tag (or its name is included), has every
 * required tag, and is not excluded; a selected database runs its entries
 * that the same query selects.  NULL with an error in C for a malformed
 * query or one that names nothing known. */
rg_rewriter *rg_db_query(rg_ctx *C, rg_rewrite_db *db, const char *query);

/* The standard database, in order: merge, canonicalize (the Scan
 * rewrites included), stabilize, specialize, fusion, merge again, the
 * relational rules, scan_inplace, inplace_elemwise.  Tags: fast_run (all
 * but the distribution and the push-ins), fast_compile (merge and
 * canonicalize), plus each entry's name; the relational dot distribution
 * under `distribute` / `gather` and the Scan push-ins under `scan_pushin`
 * (not in fast_run).  Built once per context. */
rg_rewrite_db *rg_std_db(rg_ctx *C);

/* ------------------------------------------------------------------ running */

typedef enum rg_stop_reason {
  RG_STOP_EQUILIBRIUM = 0, /* nothing more applies */
  RG_STOP_BUDGET,          /* a rewriter used up its budget */
  RG_STOP_CYCLE,           /* the graph returned to an earlier state */
  RG_STOP_ERROR,           /* a rewriter failed */
} rg_stop_reason;

typedef struct rg_rewrite_opts {
  double max_use_ratio;   /* budget per rewriter: ratio x largest graph size, at most
                           * ratio x the starting size (default 8) */
  bool profile;           /* collect the profile (rg_rewrite_profile) */
  bool trace;             /* record every rewrite (rg_rewrite_trace) */
  bool provenance;        /* record why each new node exists (rg_rewrite_why) */
  /* Constant folding computes a node whose inputs are constants; the
   * compile pipeline hands in the CPU backend's evaluator.  NULL: no
   * constant folding. */
  int (*fold)(const rg_node *node, rg_tensor **outputs, char *err, size_t errlen);
  /* Search mode: a relational rule takes up to `answers` answers of its
   * relation and keeps the cheapest by `cost` (any model below: the summed
   * cost of the nodes the answer adds to the graph, by their static types,
   * dimensions unknown statically at the model's size "?" or else 0; ties
   * go to the earlier answer).  answers <= 1 or no cost: the first answer. */
  int answers;
  struct rg_cost_model *cost;
} rg_rewrite_opts;

/* Runs a rewriter on a graph.  Returns a run (with the stop reason, the
 * profile, the trace and provenance when asked), or NULL with an error in
 * C if the run could not start.  The graph is left in a valid state:
 * rewrites that would break it (a type change, a cycle) are rejected and
 * reported, never applied. */
rg_rewrite_run *rg_rewrite(rg_fgraph *fg, rg_rewriter *rw, const rg_rewrite_opts *opts);
rg_stop_reason rg_rewrite_stop(const rg_rewrite_run *run);
/* A sentence: "equilibrium after 12 rewrites", "budget of grow exhausted
 * (4 uses; max_use_ratio 2 x 2 nodes)", "cycle: the graph returned to an
 * earlier state, ... (rules: ...)". */
const char *rg_rewrite_stop_message(const rg_rewrite_run *run);
int64_t rg_rewrite_count(const rg_rewrite_run *run);      /* rewrites applied */
rg_ctx *rg_rewrite_ctx(const rg_rewrite_run *run);
rg_fgraph *rg_rewrite_graph(const rg_rewrite_run *run);
const rg_rewrite_opts *rg_rewrite_options(const rg_rewrite_run *run);
/* Rewrites rejected because they would have broken the graph. */
int64_t rg_rewrite_rejected(const rg_rewrite_run *run);
/* One line per rejected rewrite (the first 64): the rule, the node, what
 * it would have become, and why it was refused. */
void rg_rewrite_rejections(const rg_rewrite_run *run, FILE *f);

/* The profile, in the spirit of Aesara's optimizer profile: per database
 * and per equilibrium pass, time and node counts (start, end, max); per
 * rewriter, time, times applied and nodes created; rewriters that never
 * applied are listed with their time. */
void rg_rewrite_profile(const rg_rewrite_run *run, FILE *f);
/* The trace: which rule rewrote which node into what, with the
 * substitution and the ids of the nodes it made (for rg_rewrite_why), in
 * order, rejected rewrites included. */
void rg_rewrite_trace(const rg_rewrite_run *run, FILE *f);
/* Provenance: the chain of rules and replaced nodes that led from the
 * input graph to the node computing v (by id, as the trace shows them).
 * RG_ERR_NAME, printing nothing, for an id that is neither a node of the
 * input graph nor one the rewrites made (or without opts.provenance). */
int rg_rewrite_why(const rg_rewrite_run *run, uint64_t node_id, FILE *f);

/* ------------------------------------------------------------------ rules in the language */

/* A rule set collects the rules of loaded rule files (the `defrule` form of
 * the relational language, see docs/rules.md).  Loading a file into an
 * interpreter with a rule set registers `defrule` there. */
typedef struct rg_rule_set rg_rule_set;
rg_rule_set *rg_rule_set_new(rg_interp *interp);
int rg_rule_set_load(rg_rule_set *rs, const char *path);
int rg_rule_set_load_string(rg_rule_set *rs, const char *name, const char *text);
int rg_rule_set_count(const rg_rule_set *rs);
/* Rule i and its tags (NULL when i is not 0..count-1). */
rg_rewriter *rg_rule_set_rule(const rg_rule_set *rs, int i);
const char *rg_rule_set_tags(const rg_rule_set *rs, int i);
/* Adds the rules to db with their tags and the tag `name`: a rule one of
 * whose tags is `canonicalize`, `stabilize` or `specialize`, naming an
 * equilibrium database nested in db, joins it and runs with its rules
 * (unless it has a rule of that name); the others go in a new equilibrium
 * database `name`, at
 * position 3.5 (in the standard database: after specialize, before fusion
 * and the in-place passes). */
int rg_rule_set_register(const rg_rule_set *rs, rg_rewrite_db *db, const char *name);

/* ------------------------------------------------------------------ search (e-graphs) */

/* Equality saturation over the rules of a query (docs/search.md).  An
 * e-graph holds hash-consed e-nodes (an op applied to e-classes, or a
 * graph input or constant) in e-classes joined by a union-find; a rebuild
 * restores congruence after merges.  Every e-class has the type of the
 * values it stands for: a rule that would merge classes of different types
 * is rejected and reported with its name.  Pattern rules match by
 * e-matching (non-linear patterns, guards); relational rules are
 * equalities, run forwards and backwards on terms of each e-node built to
 * a bounded depth from its classes' nodes (a pair of rules that are each
 * other's inverse is one equality); op substitutions and removals apply to
 * every e-node of their op.  Extraction picks the cheapest graph by a cost
 * model, a subgraph shared by several users counted once.
 *
 * Memory: an e-graph holds manual memory; free it with rg_egraph_free().
 * Threads: one thread at a time per e-graph (and its graph's context). */
typedef struct rg_egraph rg_egraph;

typedef enum rg_search_stop {
  RG_SEARCH_SATURATED = 0,  /* no rule adds anything more */
  RG_SEARCH_NODE_LIMIT,     /* the e-graph reached the node limit */
  RG_SEARCH_ITER_LIMIT,     /* the iteration limit */
  RG_SEARCH_TIME_LIMIT,     /* the time limit */
  RG_SEARCH_ERROR,          /* a rule failed (message in the context) */
} rg_search_stop;

#define RG_SEARCH_MAX_DEPTH 64
typedef struct rg_search_opts {
  int64_t node_limit;       /* e-nodes (default 100000) */
  int iter_limit;           /* iterations (default 30) */
  double time_limit;        /* seconds (default 10) */
  int rel_depth;            /* relational rules: depth of the terms built per e-node,
                             * every alternative down to it (default 2, at most
                             * RG_SEARCH_MAX_DEPTH: a deeper one is taken as that) */
  int rel_answers;          /* answers taken per relation run (default 8) */
  int rel_terms;            /* terms built per e-node and rule at most (default 256) */
  bool no_backoff;          /* apply every rule every iteration */
  bool interpret_relations; /* run every relation in the interpreter, also one
                             * that is two unification templates (which the
                             * search otherwise runs as e-matching) */
  int match_limit;          /* backoff: matches a rule may make per iteration before
                             * it is banned (default 1000, doubled per ban) */
  int ban_length;           /* backoff: iterations of the first ban (default 5,
                             * doubled per ban) */
  /* Constant folding for rules written in C (as rg_rewrite_opts.fold);
   * NULL: they fold nothing. */
  int (*fold)(const rg_node *node, rg_tensor **outputs, char *err, size_t errlen);
} rg_search_opts;

/* An e-graph holding the graph's outputs (each the root of its class).
 * NULL with an error in the graph's context when the graph holds what an
 * e-graph cannot (a node of several outputs used by no nth). */
rg_egraph *rg_egraph_new(rg_fgraph *fg);
void rg_egraph_free(rg_egraph *eg);
/* The rules a query selected (rg_db_query's rewriter): pattern, relational,
 * op substitution and removal rules, and node rewriters written in C
 * (tried on each e-node built from its children's representatives); graph
 * rewriters are skipped and counted.  Returns the number of rules added or an error (a pattern the
 * e-graph cannot match). */
int rg_egraph_add_rules(rg_egraph *eg, rg_rewriter *selection);
/* Runs the rules to saturation or a limit; opts may be NULL. */
rg_search_stop rg_egraph_run(rg_egraph *eg, const rg_search_opts *opts);
/* "saturated after 7 iterations", "node limit 100000 reached in iteration
 * 5", ... */
const char *rg_egraph_stop_message(const rg_egraph *eg);
size_t rg_egraph_nnodes(const rg_egraph *eg);
size_t rg_egraph_nclasses(const rg_egraph *eg);
/* Per iteration: e-nodes and e-classes after it, matches applied, the
 * rules banned by the scheduler; one line each.  Then the relational
 * rules run as e-matching (relations of unification templates) and those
 * run in the interpreter, a line each when there are any. */
void rg_egraph_trace(const rg_egraph *eg, FILE *f);
/* Merges rejected because the classes' types differ (the rule named), one
 * line each (the first 64); returns their number. */
int64_t rg_egraph_rejections(const rg_egraph *eg, FILE *f);
/* The e-class of the expression v computes if the e-graph holds it, else
 * -1 (v is looked up, not added). */
int64_t rg_egraph_class_of(rg_egraph *eg, rg_variable *v);
/* The e-graph as JSON in the serialized format of the egraphs-good
 * projects (nodes with op, children, eclass, cost; root_eclasses;
 * class_data with each class's type), or as Graphviz DOT (clusters per
 * class).  Costs are the model's per node (cm may be NULL: 1 each). */
typedef struct rg_cost_model rg_cost_model;
int rg_egraph_write_json(rg_egraph *eg, const rg_cost_model *cm, FILE *f);
int rg_egraph_write_dot(rg_egraph *eg, FILE *f);

/* Cost models: the cost of one e-node from static shapes.  Unknown
 * dimensions take sizes given by name: "A.0" (dimension 0 of input A),
 * "A" (every unknown dimension of input A) or "?" (every other one). */
rg_cost_model *rg_cost_flops(void);
rg_cost_model *rg_cost_bytes(void);
/* Measured time: measure(node, ud) runs the node (its inputs of concrete
 * types) and returns seconds (< 0: cannot run).  Cached per op and input
 * types. */
rg_cost_model *rg_cost_measured(double (*measure)(const rg_node *node, void *ud), void *ud);
/* A relation (costo node c): node is the e-node as a graph term (op applied
 * to variables of concrete types), c its cost, a number (the first
 * answer). */
rg_cost_model *rg_cost_relation(rg_term rel);
/* Gives unknown dimensions a size (see above); an error for an empty name
 * or a negative size.  A name that is no input of the graph, or a
 * dimension it does not have, is an error when costs are computed. */
int rg_cost_set_size(rg_cost_model *cm, const char *name, int64_t size);
const char *rg_cost_name(const rg_cost_model *cm);
/* The first reason the model gave a node no cost (a cost relation that
 * failed, had no answer or priced it at +inf.0; a node that could not be
 * timed); NULL while every node it was asked about has one. */
const char *rg_cost_why(const rg_cost_model *cm);

/* The k cheapest distinct graphs of the e-graph, in cost order (DAG cost:
 * a class used several times counted once).  Fills graphs[0..) (new
 * FunctionGraphs on the original inputs' copies) and costs[0..); returns
 * how many (<= k) or an error.  *exact (may be NULL) tells whether the
 * answers are proven best (branch and bound finished) or the heuristic's. */
int rg_egraph_extract(rg_egraph *eg, const rg_cost_model *cm, int k, rg_fgraph **graphs,
                      double *costs, bool *exact);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
