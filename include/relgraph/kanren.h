/*
 * relgraph/kanren.h — the relational core: the library context and its
 * errors, terms, goals, search, and the relational language.
 *
 * This is the lowest layer of relgraph; it knows nothing of graphs.  Graph
 * variables and ops reach it only as *foreign terms* (a pointer plus a table
 * of hooks), see rg_foreign().
 *
 * Memory: every term, goal and context is owned by the garbage collector
 * (Boehm GC).  Call rg_init() once before anything else.  Never keep the
 * only pointer to a term in memory the collector cannot see (malloc'd
 * blocks, files, other processes).
 *
 * Errors: fallible calls return a status: 0 (RG_OK), a negative error code
 * (the context keeps a readable message, see rg_errmsg()), or a positive
 * code meaning "stopped early" (a step or time limit).  Logical failure — a
 * unification that fails, a goal without answers — is a value, never an
 * error.  Errors report bad *values* (a graph that does not type-check, a
 * goal that fails to run); calls' own preconditions are the caller's:
 * every pointer argument of every public header is non-NULL unless its
 * comment says NULL is allowed, counts are >= 0 and an array given with a
 * count > 0 has that many elements, an opcode or dtype is one of its
 * enum's, and a term accessor is called on a term of its kind
 * (rg_car on a pair, rg_int_value on an integer; rg_kind_of tells which).
 * Breaking one is undefined behaviour (an assertion where the library
 * checks, else whatever the bad pointer or term leads to).
 *
 * Threads.  rg_init() may be called from any number of threads at once (it
 * initialises once).  A context (rg_ctx) and everything that records into it
 * (an interpreter, a prepared query, a search) is used by one thread at a
 * time; different contexts may be used at the same time from different
 * threads.  Terms are immutable once made and may be shared by any
 * threads, except that logic variables are numbered per context.  A thread
 * that uses the library must be known to the collector: the thread that
 * called rg_init() and threads started through the collector's pthread
 * wrappers are; any other thread calls rg_thread_attach() first and
 * rg_thread_detach() before it ends.
 */
#ifndef RELGRAPH_KANREN_H
#define RELGRAPH_KANREN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "relgraph/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shared library exports what this header declares, nothing else
 * (everything else is built with hidden visibility). */
#pragma GCC visibility push(default)

/* ------------------------------------------------------------------ status */

enum {
  RG_OK = 0,
  RG_STOP_STEPS = 2,    /* a search reached its step limit */
  RG_STOP_TIMEOUT = 3,  /* a search reached its time limit */
  RG_ERR = -1,          /* generic error */
  RG_ERR_SYNTAX = -2,   /* malformed input text */
  RG_ERR_NAME = -3,     /* unbound or unknown name */
  RG_ERR_ARITY = -4,    /* wrong number of arguments */
  RG_ERR_TYPE = -5,     /* a value of the wrong kind or type */
  RG_ERR_IO = -6,       /* a file could not be read or written */
  RG_ERR_LIMIT = -7,    /* an implementation limit (nesting, size) */
  RG_ERR_EVAL = -8,     /* an expression could not be evaluated */
  RG_ERR_NOMEM = -9,    /* out of memory */
};

/* ------------------------------------------------------------------ context */

/* A library context: holds the last error, run options and the
 * associative/commutative facts.  Contexts are independent; terms made in
 * one may be used in another, except logic variables (their numbering is
 * per context). */
typedef struct rg_ctx rg_ctx;

void rg_init(void);                  /* start the collector; idempotent */
/* Makes the calling thread known to the collector, for threads not started
 * through its pthread wrappers (rg_init() must have run, in a thread the
 * collector knows, such as the main thread); RG_OK, or RG_ERR if the
 * thread's stack cannot be found.  Attaching twice is harmless. */
int rg_thread_attach(void);
/* Before a thread that attached ends: it may not touch collected memory
 * afterwards. */
void rg_thread_detach(void);
/* Collected memory, zeroed, for arrays of terms built from C (terms kept
 * only in malloc'd memory are invisible to the collector). */
void *rg_gc_alloc(size_t n);
/* A formatted string in collected memory. */
char *rg_gc_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Everything left in stream f, NUL-terminated, in collected memory
 * (*len: its length without the NUL); NULL after a read error (errno
 * tells which) or at a NUL byte, which no text holds (errno EILSEQ; a
 * device such as /dev/zero is not read without end).  Files and standard
 * input are read through this; rg_read_stream_error(errno) says why one
 * could not be. */
char *rg_read_stream(FILE *f, size_t *len);
const char *rg_read_stream_error(int err);
/* Runs a full collection now (tests, measurements). */
void rg_gc_collect(void);
/* Touches the collector's whole heap once, so that measurements do not
 * include the first-touch page faults of a new process. */
void rg_gc_warm(void);
rg_ctx *rg_ctx_new(void);
/* Every search of C, including those already started, stops with
 * RG_STOP_TIMEOUT once `seconds` from now have passed (on top of each
 * search's own limits): a time budget for a whole program or request.
 * seconds <= 0 removes it. */
void rg_ctx_set_deadline(rg_ctx *C, double seconds);
const char *rg_errmsg(const rg_ctx *C); /* "" when no error */
int rg_errcode(const rg_ctx *C);
void rg_clear_error(rg_ctx *C);
/* Records an error (printf-style message) and returns `code`. */
int rg_error(rg_ctx *C, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A NULL argument where a value was expected.  A NULL made by a failed
 * construction carries that construction's error (errors are sticky, see
 * relgraph/graph.h), so an error C already holds is kept and its code
 * returned; otherwise the message is recorded as an RG_ERR_TYPE error. */
int rg_error_null(rg_ctx *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *rg_version(void);
/* Slots where higher layers keep per-context objects (collected), such as
 * the standard rewrite database, built once per context. */
enum { RG_SLOT_REWRITE_DB, RG_SLOT_GRAPH, RG_SLOT_BACKEND, RG_NSLOTS };
void **rg_ctx_slot(rg_ctx *C, int slot);
/* The context's scratch stacks (unification, rebuilding terms) keep their
 * memory between uses, and with it pointers to what earlier work put
 * there; the collector, which scans them whole, would keep those terms,
 * and the graphs their graph variables belong to, alive.  This clears
 * what lies above their tops.  The rewrite engine calls it when a run
 * ends; call it after other long computations whose results you drop. */
void rg_ctx_release_scratch(rg_ctx *C);

/* ------------------------------------------------------------------ terms */

/* A term is one machine word: an immediate (nil, booleans, small integers)
 * or a pointer to an immutable GC-allocated object.  Compare atoms with
 * rg_equal(); symbols are interned, so equal symbols are the same word. */
typedef struct rg_obj *rg_term;

typedef enum rg_kind {
  RG_K_NIL, RG_K_BOOL, RG_K_INT, RG_K_FLOAT, RG_K_STRING, RG_K_SYMBOL,
  RG_K_VAR, RG_K_PAIR, RG_K_ETUPLE, RG_K_FOREIGN, RG_K_PROC, RG_K_OTHER
} rg_kind;

#define RG_NIL ((rg_term)(uintptr_t)0x04)
#define RG_FALSE ((rg_term)(uintptr_t)0x0c)
#define RG_TRUE ((rg_term)(uintptr_t)0x14)

rg_kind rg_kind_of(rg_term t);
rg_term rg_int(int64_t v);
rg_term rg_float(double v);
rg_term rg_bool(bool v);
rg_term rg_string(const char *s);             /* copies s */
rg_term rg_string_n(const char *s, size_t n);
rg_term rg_symbol(const char *name);          /* interned */
rg_term rg_symbol_n(const char *name, size_t n);
rg_term rg_cons(rg_term car, rg_term cdr);
rg_term rg_list(int n, const rg_term *items); /* proper list of n items */
rg_term rg_var(rg_ctx *C);                    /* a fresh logic variable */

int64_t rg_int_value(rg_term t);
double rg_float_value(rg_term t);
const char *rg_string_value(rg_term t);       /* NUL-terminated */
size_t rg_string_length(rg_term t);
const char *rg_symbol_name(rg_term t);
rg_term rg_car(rg_term t);
rg_term rg_cdr(rg_term t);
bool rg_is_pair(rg_term t);
bool rg_is_var(rg_term t);
int64_t rg_list_length(rg_term t);            /* -1 if not a proper list */

/* Structural equality: etuples equal the list of their elements; foreign
 * terms use their `equal` hook. */
bool rg_equal(rg_term a, rg_term b);
uint64_t rg_hash(rg_term t);

/* Printing, in the reader's syntax (strings quoted). */
void rg_print(FILE *f, rg_term t);
char *rg_to_string(rg_term t);                /* GC-allocated */

/* ------------------------------------------------------------------ etuples */

/* An expression tuple: a head and arguments.  It unifies with the list of
 * its elements (and with cons patterns whose car is the head), prints as
 * that list, and can be *evaluated*: arguments first, then the evaluator
 * registered for the head; the value is cached in the etuple. */
rg_term rg_etuple(rg_term head, int nargs, const rg_term *args);
rg_term rg_etuple_from_list(rg_term list);    /* list must be proper, non-empty */
bool rg_is_etuple(rg_term t);
rg_term rg_etuple_list(rg_term et);           /* (head arg ...) */

/* An evaluator receives evaluated arguments; it returns the value, or NULL
 * after recording an error in C. */
typedef rg_term (*rg_evaluator)(rg_ctx *C, rg_term head, int nargs,
                                const rg_term *args, void *ud);
/* Registers `fn` for etuples whose head is the symbol `head` (or, for a
 * foreign head, whose head is equal to it). */
void rg_register_evaluator(rg_ctx *C, rg_term head, rg_evaluator fn, void *ud);
/* The evaluator registered for `head` and its ud; false when none is. */
bool rg_evaluator_of(rg_ctx *C, rg_term head, rg_evaluator *fn, void **ud);
/* A fallback evaluator, called when no evaluator is registered for a head. */
void rg_set_default_evaluator(rg_ctx *C, rg_evaluator fn, void *ud);
/* Evaluates an etuple (or a list, read as an etuple) bottom-up; other terms
 * evaluate to themselves.  Returns NULL with an error in C on failure. */
rg_term rg_eval_etuple(rg_ctx *C, rg_term t);

/* ------------------------------------------------------------------ foreign terms */

/* Hooks of a foreign term.  Every hook is optional.
 *   equal:     self against any other term (foreign or not)
 *   hash:      consistent with equal, in rg_hash's terms: a foreign term
 *              equal to a term of another kind (a number, say) must hash
 *              to rg_hash of that term.  Numbers hash by value (1 and 1.0
 *              alike), so one hash serves a value equal to both.
 *   print:     the printed form
 *   as_etuple: expand into an etuple (or list) when unified against
 *              structure; NULL means "atomic".  The expansion is cached.
 * Foreign terms are ground: their expansions contain no logic variables. */
typedef struct rg_foreign_hooks {
  const char *name;
  bool (*equal)(void *self, rg_term other);
  uint64_t (*hash)(void *self);
  void (*print)(void *self, FILE *f);
  rg_term (*as_etuple)(void *self, void *ud);
} rg_foreign_hooks;

rg_term rg_foreign(const rg_foreign_hooks *hooks, void *ptr, void *ud);
bool rg_is_foreign(rg_term t, const rg_foreign_hooks *hooks); /* hooks NULL: any */
void *rg_foreign_ptr(rg_term t);
rg_term rg_foreign_expand(rg_term t);          /* NULL if atomic */

/* ------------------------------------------------------------------ goals */

typedef struct rg_goal rg_goal;

rg_goal *rg_succeed(void);
rg_goal *rg_fail(void);
rg_goal *rg_eq(rg_term a, rg_term b);
rg_goal *rg_neq(rg_term a, rg_term b);        /* =/= */
rg_goal *rg_symbolo(rg_term t);
rg_goal *rg_numbero(rg_term t);
rg_goal *rg_stringo(rg_term t);
rg_goal *rg_absento(rg_term needle, rg_term haystack);
rg_goal *rg_conj(int n, rg_goal *const *gs);
/* conde: each clause is a conjunction; clauses are searched fairly. */
rg_goal *rg_conde(int nclauses, rg_goal *const *clauses);
rg_goal *rg_disj2(rg_goal *a, rg_goal *b);
rg_goal *rg_conj2(rg_goal *a, rg_goal *b);
/* conda / condu: clause i is (tests[i] then bodies[i]). */
rg_goal *rg_conda(int n, rg_goal *const *tests, rg_goal *const *bodies);
rg_goal *rg_condu(int n, rg_goal *const *tests, rg_goal *const *bodies);
rg_goal *rg_onceo(rg_goal *g);

/* A goal built at search time: `fn` receives n fresh variables and returns
 * the goal to run.  The goal suspends, as fresh does in miniKanren. */
typedef rg_goal *(*rg_fresh_fn)(rg_ctx *C, rg_term *vars, void *ud);
rg_goal *rg_fresh(int n, rg_fresh_fn fn, void *ud);

/* Relations: procedures from terms to goals.  A relation is a term (kind
 * RG_K_PROC); it may be defined in the relational language or in C. */
typedef rg_goal *(*rg_relation_fn)(rg_ctx *C, const rg_term *args, void *ud);
rg_term rg_relation(const char *name, int arity, rg_relation_fn fn, void *ud);
/* A relation whose fn sees the values of its arguments: when called, the
 * arguments are walked deeply in the current state (as `project` does)
 * and fn builds the goal from them.  For relations that look at values
 * (a type test, say). */
rg_term rg_relation_projecting(const char *name, int arity, rg_relation_fn fn, void *ud);
/* A relation of arity arguments whose last argument is a function of the
 * others, computed in C: fn sees the first arity - 1 arguments walked in
 * the current state (shallowly: a bound variable gives its value, whose
 * parts may still hold variables) and returns 1 with *out set (the
 * relation then unifies its last argument with *out; *out NULL: it
 * succeeds without a constraint), 0 to fail, or a negative status after
 * rg_error.  args[arity - 1] is the last argument, walked the same way:
 * fn may compare its result with it where it is already bound, and return
 * 1 with *out NULL (they agree) or 0 (they differ) instead of building a
 * term to unify.  No goal is built per call: the cheapest way to consult C
 * from a relation (a node's type, say). */
typedef int (*rg_function_fn)(rg_ctx *C, const rg_term *args, rg_term *out, void *ud);
rg_term rg_relation_function(const char *name, int arity, rg_function_fn fn, void *ud);
/* A goal that calls relation `rel`; fails with an error at search time if
 * rel is not a relation of that arity. */
rg_goal *rg_call(rg_term rel, int nargs, const rg_term *args);
const char *rg_proc_name(rg_term rel);
int rg_proc_arity(rg_term rel);               /* -1 if variadic */

/* ------------------------------------------------------------------ search */

typedef struct rg_run_opts {
  int64_t max_steps;     /* 0: unlimited; else stop with RG_STOP_STEPS */
  double timeout_s;      /* 0: unlimited; else stop with RG_STOP_TIMEOUT */
  bool no_occurs_check;  /* the occurs check is on unless this is set */
} rg_run_opts;

/* A lazy query: answers come one at a time, reified. */
typedef struct rg_query rg_query;

/* Starts a search for the values of `q` (any term, usually a variable or a
 * list of variables) satisfying `g`.  opts may be NULL. */
rg_query *rg_query_new(rg_ctx *C, rg_term q, rg_goal *g, const rg_run_opts *opts);
/* Next answer: returns 1 and sets *answer (reified, constraints attached
 * as faster-miniKanren prints them); 0 when there are no more; negative
 * on error; RG_STOP_* (never 1) when a limit was reached. */
int rg_query_next(rg_query *Q, rg_term *answer);
/* Like rg_query_next, but the answer is q with the answer's substitution
 * applied and nothing renamed (unbound variables stay variables, no
 * constraints attached): what a consumer of terms, like a rewrite rule,
 * needs. */
int rg_query_next_walked(rg_query *Q, rg_term *answer);
int rg_query_status(const rg_query *Q);      /* RG_OK, RG_STOP_* or error */
int64_t rg_query_steps(const rg_query *Q);
/* Starts Q's search over from the beginning, with vars[i] bound to
 * vals[i] (n may be 0), reusing its goal and memory: the way to run one
 * goal on many inputs, as a rewrite rule does for every node it meets.
 * The variables must be ones the goal mentions from outside (made by
 * rg_var, not by a fresh inside it).  Answers of the previous search not
 * yet taken are dropped; the step and time limits start again.  Returns
 * RG_OK, or RG_ERR_TYPE if a vars[i] is not a variable. */
int rg_query_restart(rg_query *Q, int n, const rg_term *vars, const rg_term *vals);
/* Ends Q's search (it answers nothing until restarted) and lets go of
 * everything the search held, its bindings included: a query kept for
 * reuse then keeps no term of its last search, nor the graph a graph
 * variable among them belongs to, alive. */
void rg_query_release(rg_query *Q);

/* Collects up to n answers (n < 0: all) into a list in *out.  Returns
 * RG_OK, RG_STOP_* (answers so far in *out) or an error. */
int rg_run(rg_ctx *C, int64_t n, rg_term q, rg_goal *g, const rg_run_opts *opts,
           rg_term *out);

/* Unifies two terms outside any search; on success returns true and, if
 * `walked` is given, the pair (a . b) with the unifier applied. */
bool rg_unify_terms(rg_ctx *C, rg_term a, rg_term b, bool occurs_check,
                    rg_term *walked);

/* Unifies a and b outside any search and, on success, returns true with
 * *out = t with the unifier applied (walked deeply).  The quick path of
 * pattern matching. */
bool rg_unify_walk(rg_ctx *C, rg_term a, rg_term b, rg_term t, bool occurs_check, rg_term *out);

/* ------------------------------------------------------------------ facts */

/* Associative/commutative facts used by eq-comm, eq-assoc and friends.
 * rel is a symbol naming the fact relation ('associative, 'commutative, or
 * any other name); args are its ground arguments. */
void rg_fact(rg_ctx *C, rg_term rel, int nargs, const rg_term *args);
bool rg_has_fact(rg_ctx *C, rg_term rel, int nargs, const rg_term *args);

/* ------------------------------------------------------------------ the language */

/* An interpreter for the relational language (see docs/language.md).  Each
 * interpreter has its own global definitions, preloaded with the relations
 * library; user definitions shadow the library's. */
typedef struct rg_interp rg_interp;

rg_interp *rg_interp_new(rg_ctx *C);
rg_ctx *rg_interp_ctx(rg_interp *interp);
/* Where `run` forms at top level print their answers, and where `test`
 * failures are reported (default stdout); NULL silences them. */
void rg_interp_set_output(rg_interp *interp, FILE *out);
void rg_interp_set_run_opts(rg_interp *interp, const rg_run_opts *opts);
/* Loads and executes a file or a string.  Returns RG_OK, an error (message
 * in the context, with file:line:column), or RG_STOP_* if a search hit a
 * limit. */
int rg_interp_load_file(rg_interp *interp, const char *path);
int rg_interp_load_string(rg_interp *interp, const char *name, const char *text);
/* Evaluates one expression written in the language; returns its value or
 * NULL on error. */
rg_term rg_interp_eval_string(rg_interp *interp, const char *text);
/* The global value bound to name, or NULL. */
rg_term rg_interp_lookup(rg_interp *interp, const char *name);
void rg_interp_define(rg_interp *interp, const char *name, rg_term value);
/* Registers a top-level form handled by a higher layer (for example
 * `defrule`): fn receives the whole form and returns a status. */
typedef int (*rg_form_fn)(rg_interp *interp, rg_term form, void *ud);
void rg_interp_add_form(rg_interp *interp, const char *name, rg_form_fn fn, void *ud);
/* "file:line:col" of a form loaded by this interpreter, or NULL. */
const char *rg_interp_where(rg_interp *interp, rg_term form);
/* Compiles a relation from its parameter list and body goals (as in
 * defrel) in this interpreter's namespace; NULL with an error on failure. */
rg_term rg_interp_lambda(rg_interp *interp, rg_term name, rg_term params, rg_term body,
                         rg_term where_form);
/* What a relation requires of argument `arg` (0-based): the list of heads
 * (symbols, or lists for parameterized heads) one of which every answer's
 * argument must have as its car, found by reading the relation's code
 * (unifications in its conjunctions, through calls, over conde clauses);
 * NULL when that cannot be told.  Used to index rewrite rules by op. */
rg_term rg_relation_input_heads(rg_term rel, int arg);
/* The templates behind those heads: a list of terms, one of which every
 * answer's argument must unify with, each with its constant parts as
 * written and the symbol `_` where it holds a variable or a computed value
 * (which requires nothing); NULL when that cannot be told.  Used to reject
 * a node before the relation runs. */
rg_term rg_relation_input_templates(rg_term rel, int arg);
/* Counts of `test` forms executed so far. */
void rg_interp_test_counts(const rg_interp *interp, int64_t *passed, int64_t *failed);

/* ------------------------------------------------------------------ the reader */

/* S-expressions of the relational language (also the graph file format):
 * comments ; #| |# #;, integers, floats, strings, symbols, #t/#f, dotted
 * pairs, [ ] as parentheses, ' ` , ,@.  Nesting deeper than
 * RG_READ_MAX_DEPTH is an error. */
#define RG_READ_MAX_DEPTH 10000
typedef struct rg_reader rg_reader;
rg_reader *rg_reader_new(rg_ctx *C, const char *name, const char *text, size_t len);
/* Reads the next datum: 1 and *out set; 0 at the end; negative on a syntax
 * error (message "name:line:col: ..." in the context). */
int rg_reader_next(rg_reader *R, rg_term *out);
/* Where a list read by this reader started ("name:line:col"), or NULL. */
const char *rg_reader_where(rg_reader *R, rg_term form);
/* Reads every datum of a text into a list; NULL on a syntax error. */
rg_term rg_read_all(rg_ctx *C, const char *name, const char *text, size_t len);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
