/*
 * rewrite-impl.h — internals of the rewrite layer shared by its files.
 */
#ifndef RELGRAPH_REWRITE_IMPL_H
#define RELGRAPH_REWRITE_IMPL_H

#include <stdarg.h>
#include <string.h>

#include "base/base.h"
#include "relgraph/rewrite.h"

/* ------------------------------------------------------------------ rewriters */

enum { RW_NODE, RW_GRAPH, RW_SELECTION };

struct rgr_selection;

/* A rewriter.  Invariants: a node rewriter has nfn; `tracks` is a bitmask
 * over opcodes (all set when track_all); opaque ops are matched by name
 * against `opaque` (NULL-terminated) when the opaque bit is set. */
struct rg_rewriter {
  const char *name;
  int kind;                       /* RW_* */
  bool track_all;
  uint64_t tracks[(RG_OP_COUNT + 63) / 64];
  const char **opaque;            /* tracked opaque op names */
  int nopaque;
  rg_node_rewrite_fn nfn;
  rg_graph_rewrite_fn gfn;
  void *ud;
  unsigned flags;                 /* RG_RULE_* */
  struct rgr_selection *sel;      /* RW_SELECTION: what a query selected */
  /* what the rule does, for messages and traces ("(mul ?x 1) -> ?x") */
  const char *describe;
  /* terms it applies to, as text with ?x leaves (its pattern, or examples
   * given with it), for tools that build test graphs; NULL: unknown */
  const char *examples;
  /* relational rules: the relation and its direction, and the rule's
   * parameters and goals as written (NULL for rules made in C) */
  rg_term relation;
  bool backwards;
  rg_term rel_params, rel_body;
  /* tracks_derived: `tracks` are the heads `relation` requires of its
   * input, as read when rgk_definitions() was tracks_read_at (the
   * relations it calls are bound late; rgr_refresh_tracks reads again) */
  bool tracks_derived;
  uint64_t tracks_read_at;
};

static inline bool rgr_tracks(const rg_rewriter *rw, const rg_node *n) {
  if (rw->track_all) return true;
  rg_opcode c = n->op->code;
  if (!(rw->tracks[c / 64] >> (c % 64) & 1)) return false;
  if (c != RG_OP_OPAQUE || !rw->nopaque) return true;
  for (int i = 0; i < rw->nopaque; i++)
    if (!strcmp(rw->opaque[i], n->op->name)) return true;
  return false;
}

/* Whether the graph has a node the rewriter tracks (by op code: an
 * opaque op counts as tracked whatever its name). */
static inline bool rgr_tracks_any(const rg_rewriter *rw, const rg_fgraph *fg) {
  if (rw->track_all) return rg_fgraph_nnodes(fg) > 0;
  for (int c = 0; c < RG_OP_COUNT; c++)
    if ((rw->tracks[c / 64] >> (c % 64) & 1) && rg_fgraph_count_op(fg, (rg_opcode)c)) return true;
  return false;
}

rg_rewriter *rgr_rewriter_new(const char *name, int kind);
void rgr_track(rg_rewriter *rw, rg_opcode c);
/* The opcode a relation's input head names (a symbol, or the head of an
 * op with parameters); -1 when it names none. */
int rgr_head_opcode(rg_term h);
/* Reads a relational rule's derived tracks again if definitions changed
 * since; every reader of `tracks` calls it when a run starts. */
void rgr_refresh_tracks(rg_rewriter *rw);

/* Steps a relation may take to answer a rewrite before that is an error:
 * the rewrite driver's rules and guards, search's relations run forwards,
 * cost relations.  In search, questions that may rightly have no answer
 * (a relation run backwards, a guard) give up sooner: no answer within
 * RGR_GIVE_UP_STEPS counts as none. */
#define RGR_RELATION_STEPS 2000000
#define RGR_GIVE_UP_STEPS 200000

/* ------------------------------------------------------------------ databases */

/* The phase database (canonicalize, stabilize or specialize, an
 * equilibrium database nested directly in db) that the first of the words
 * of `tags` naming one names, or NULL: a rule tagged `canonicalize` joins
 * the standard database's canonicalize (as a rewrite registered there in
 * Aesara). */
rg_rewrite_db *rgr_db_named_by(rg_rewrite_db *db, const char *tags);
/* Where rule files' own database sits in the standard one: after
 * specialize (3), before fusion (4) and the in-place passes, which turn
 * the graph into forms written rules do not match. */
#define RGR_RULES_POSITION 3.5

/* ------------------------------------------------------------------ selections */

/* What a query selected from a database: a tree mirroring the database,
 * keeping only selected entries. */
typedef struct rgr_item {
  const char *name;
  rg_rewriter *rw;                /* a rewriter, or */
  struct rgr_selection *sub;      /* a nested selection */
} rgr_item;

typedef struct rgr_selection {
  const char *name;
  bool equilibrium;
  int n;
  rgr_item *items;
} rgr_selection;

/* ------------------------------------------------------------------ runs */

/* Per rewriter statistics of a run. */
typedef struct rgr_stat {
  const rg_rewriter *rw;
  double seconds;
  int64_t attempts, applied, created, rejected;
  struct rgr_stat *next;
} rgr_stat;

/* One database or equilibrium pass in the profile. */
typedef struct rgr_pass {
  const char *name;
  int depth;
  bool equilibrium;
  double seconds;
  size_t nodes_start, nodes_end, nodes_max;
  int64_t rewrites;
  const char *stop;     /* why an equilibrium pass ended */
  rgr_stat *stats;      /* rewriters of this pass */
  struct rgr_pass *next;
} rgr_pass;

/* A trace entry: rule, the node it rewrote (printed), what it became, the
 * substitution (pattern and relational rules) and the nodes made; or a
 * rewrite rejected (`why` set, nothing made). */
typedef struct rgr_event {
  const char *rule;
  uint64_t node_id;
  int output;           /* >= 0: output `output` of the graph, no node (node_id unused) */
  const char *before, *after, *subst;
  const char *why;      /* rejected: the reason */
  int ncreated;
  uint64_t *created;    /* ids of the nodes made */
  struct rgr_event *next;
} rgr_event;

/* Provenance of a node created by a rewrite. */
typedef struct rgr_origin {
  uint64_t node_id;
  const char *rule;
  int nreplaced;
  uint64_t *replaced;   /* ids of the nodes whose outputs it replaced */
  const char *before;
} rgr_origin;

struct rg_rewrite_run {
  rg_ctx *C;
  rg_fgraph *fg;
  rg_rewrite_opts opts;
  rg_stop_reason stop;
  const char *stop_msg;
  int64_t rewrites, rejected;
  size_t max_nodes;              /* largest graph size seen */
  size_t start_nodes;            /* graph size when the run started */
  rgr_pass *passes, *last_pass;
  rgr_pass *cur;                 /* the pass running now */
  int depth;
  rgr_event *events, *last_event;
  rgr_event *rejects, *last_reject; /* the first RGR_MAX_REJECTS rejected rewrites */
  /* provenance: node id -> origin (open addressing) */
  rgr_origin **origins;
  size_t norigins, cap_origins;
  uint64_t *input_ids;            /* provenance: the input graph's node ids, sorted */
  size_t ninput_ids;
  /* set by a rule for the trace of its current match */
  const char *subst;
  /* queries that rules keep between runs and used in this one: released
   * when the run ends, so that they keep nothing of this graph alive */
  uint64_t serial;               /* unique to the run (runs nest) */
  rg_ptrs held;                  /* rg_query *, in collected memory */
};

/* Notes that a rule's kept query ran in this run (once per run: `*mark`
 * is the rule's record of the last run it was noted in). */
void rgr_hold_query(rg_rewrite_run *run, rg_query *Q, uint64_t *mark);

/* The graph size a rewriter's use budget is measured against: the largest
 * size seen, counted up to max_use_ratio times the size at the start (so
 * that a rule growing the graph with every use still runs out). */
static inline double rgr_budget(const rg_rewrite_run *run) {
  double cap = run->opts.max_use_ratio * (double)(run->start_nodes ? run->start_nodes : 1);
  double seen = (double)run->max_nodes;
  return run->opts.max_use_ratio * (seen < cap ? seen : cap);
}

/* Runs a rewriter (of any kind) within a run; returns changes or an error. */
int rgr_run_rewriter(rg_rewrite_run *run, rg_rewriter *rw);
/* The equilibrium driver over the node and graph rewriters of a selection. */
int rgr_equilibrium(rg_rewrite_run *run, rgr_selection *sel);

/* Whether a rewrite should give a replacement for output v of the node it
 * rewrites: v is read (by a node, or as a graph output), or the run has no
 * graph (the search's e-graph, where who reads a value is not known and
 * every output of a node may be). */
static inline bool rgr_used(const rg_rewrite_run *run, const rg_variable *v) {
  return v->nclients || !rg_rewrite_graph(run);
}

rgr_pass *rgr_pass_begin(rg_rewrite_run *run, const char *name, bool equilibrium);
void rgr_pass_end(rg_rewrite_run *run, rgr_pass *p);
rgr_stat *rgr_stat_of(rg_rewrite_run *run, const rg_rewriter *rw);
void rgr_record(rg_rewrite_run *run, const rg_rewriter *rw, rg_node *node, int nout,
                rg_variable *const *olds, rg_variable *const *news, int ncreated,
                rg_node *const *created);
/* A trace entry for a merge (a graph rewriter's change that makes no
 * node: old's readers now read new_, an equal value); counted by the
 * rewriter's result, not here; client NULL: output `index` of the graph
 * changed.  Nothing unless the run traces. */
void rgr_trace_merge(rg_rewrite_run *run, const rg_rewriter *rw, rg_node *client, int index,
                     rg_variable *old, rg_variable *new_);
/* Counts and records a rewrite rejected because it would break the graph
 * (the reason: the context's error message, left in place). */
void rgr_reject(rg_rewrite_run *run, const rg_rewriter *rw, rg_node *node, rg_variable *old,
                rg_variable *new_);
#define RGR_MAX_REJECTS 64
/* Adds "WHAT = TEXT" to the trace's `with` line of the rewrite a rule is
 * making (parts joined by "; "); nothing unless the run traces (test
 * run->opts.trace first where an argument costs, a printed graph). */
void rgr_note(rg_rewrite_run *run, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
double rgr_now(void);
/* Steps shared by the equilibrium driver and the navigators.
 * rgr_attempt runs a node rewriter's function (timed only when profiling;
 * a clock read costs more than most rejections) and counts the attempt.
 * rgr_changes collects the outputs a proposal replaces (olds) and their
 * replacements (news); returns how many.  rgr_types_ok rejects (counted,
 * recorded, with a message in the context) a replacement that changes a
 * type.  rgr_note_size records the graph's size after a rewrite. */
int rgr_attempt(rg_rewrite_run *run, rg_rewriter *rw, rgr_stat *st, rg_node *node,
                rg_variable **out);
int rgr_changes(const rg_node *node, rg_variable *const *out, rg_variable **olds,
                rg_variable **news);
bool rgr_types_ok(rg_rewrite_run *run, const rg_rewriter *rw, rgr_stat *st, int n,
                  rg_variable *const *olds, rg_variable *const *news);
void rgr_note_size(rg_rewrite_run *run, const rg_fgraph *fg);

/* A growable array of nodes in collected memory (the nodes a rewrite
 * made or touched): v[0..n) in use, room for cap. */
typedef struct rgr_nodes { rg_node **v; int n, cap; } rgr_nodes;
void rgr_nodes_push(rgr_nodes *a, rg_node *n);

/* Exact cycle detection (cycle.c): the graph states seen in one run. */
typedef struct rgr_states rgr_states;
rgr_states *rgr_states_new(rg_fgraph *fg);
/* Records the graph's state as the one after rewrite `step`; returns the
 * step of an earlier visit of the same state, or -1 if it is new. */
int64_t rgr_states_visit(rgr_states *s, int64_t step);
/* An input of node changed: forgets what depended on it. */
void rgr_states_changed(rgr_states *s, rg_node *node);
/* Keeps the nodes of v[0..n) that are still in fg, sorted by their place
 * in its order (earliest first); returns how many. */
int rgr_keep_live_in_order(const rg_fgraph *fg, rg_node **v, int n);
#define rgr_sprintf rg_gc_sprintf /* messages and names in collected memory */
/* A value or a term as traces and messages show it: one line, a few levels
 * of operations deep, a term cut at a few hundred characters (a whole
 * expression can be the graph's: megabytes for a Scan's gradient). */
const char *rgr_show(rg_variable *v);
const char *rgr_show_term(rg_term t);

/* What a rule is made of, for the e-graph search (rules.c).  kind is one
 * of RGR_RULE_*; pattern rules give their forms as written (?x symbols),
 * the guard relation and its arguments (a list of ?x symbols); op rules
 * give their ops; other rewriters (C functions) give nothing. */
enum { RGR_RULE_OTHER, RGR_RULE_PATTERN, RGR_RULE_RELATION, RGR_RULE_SUBST, RGR_RULE_REMOVE };
typedef struct rgr_rule_parts {
  int kind;
  rg_term from, to, guard, guard_vars;
  const rg_op *op_from, *op_to;
} rgr_rule_parts;
int rgr_rule_parts_of(const rg_rewriter *rw, rgr_rule_parts *out);

/* The ifelse branches each node of a graph is needed under (guards.c):
 * NULL when the graph has no ifelse (or no memory was left), and then
 * every two nodes compare equal.  rgr_same_guards: whether a and b are
 * needed under the same branches (a node the graph did not have when the
 * guards were read compares equal to every node). */
typedef struct rgr_guards rgr_guards;
rgr_guards *rgr_guards_of(rg_fgraph *fg);
bool rgr_same_guards(const rgr_guards *g, const rg_node *a, const rg_node *b);
/* Whether n is needed whichever branches are taken (under no ifelse
 * branch): work that may move out of a loop's step. */
bool rgr_unguarded(const rgr_guards *g, const rg_node *n);
void rgr_guards_free(rgr_guards *g);

/* A node of the subtensor family with its constant index inputs made the
 * op's own parameters (its type then knows the sizes they give), or NULL
 * when it has none (stdrules.c; an error may be set). */
rg_variable *rgr_subtensor_static(rg_ctx *C, const rg_node *node);

/* Graph rewriters of the standard database. */
rg_rewriter *rgr_merge_rewriter(const char *name);
rg_rewriter *rgr_constant_folding(void);

#endif
