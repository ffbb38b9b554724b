/*
 * interp.c — the interpreter of the relational language: namespaces,
 * top-level forms, loading files, `run` and `test`.
 *
 * Each interpreter has two namespaces.  `lib` holds the relations library
 * (prelude.kn, compiled into the library, and C builtins); library code
 * refers only to library bindings.  `user` holds what loaded programs
 * define; a user name not defined yet resolves to the library's binding,
 * and a user definition shadows it for user code only, so a program may
 * define its own `appendo` without breaking library relations built on it.
 *
 * Top-level forms: defrel, define, run, run*, test, load, fact, time,
 * bench, display/newline, and forms registered by higher layers (defrule).
 * Anything else is evaluated as an expression.
 */
#include "kanren/kanren-impl.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

/* ------------------------------------------------------------------ namespaces */

/* A zeroed table is empty; it takes collected memory on its first
 * insertion (its keys, symbols, and values, globals, are collected). */
rgk_global *rgk_table_get(rgk_table *t, rg_term sym, bool create) {
  uint64_t *v = rg_map_get(t, RGK_W(sym));
  if (v || !create) return v ? (rgk_global *)(uintptr_t)*v : NULL;
  if (!t->a) t->a = &rgk_gc;
  rgk_global *g = rgk_alloc(sizeof *g);
  g->name = sym;
  int rc = rg_map_put(t, RGK_W(sym), RGK_W(g));
  assert(rc == 0 && "collected memory does not run out quietly");
  (void)rc;
  return g;
}

/* ------------------------------------------------------------------ helpers */

static bool head_is(rg_term form, const char *name) {
  return rgk_is_pair(form) && rgk_is_symbol(rgk_car(form)) && !strcmp(rgk_symname(rgk_car(form)), name);
}

static int ierr(rg_interp *I, rg_term form, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int ierr(rg_interp *I, rg_term form, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  const char *w = rgk_where(I, form);
  return rg_error(I->C, code, "%s%s%s", w ? w : "", w ? ": " : "", msg);
}


/* Counts the definitions made by every interpreter, for readers of
 * compiled code that must notice a relation redefined (rgk_definitions). */
static uint64_t definitions;
uint64_t rgk_definitions(void) { return __atomic_load_n(&definitions, __ATOMIC_ACQUIRE); }

static void define_global(rg_interp *I, rg_term name, rg_term value) {
  rgk_global_for(I, name)->value = value;
  __atomic_add_fetch(&definitions, 1, __ATOMIC_RELEASE);
}

/* Evaluates a value expression at top level. */
static rg_term eval_top(rg_interp *I, rg_term form) {
  rgk_tx *t = rgk_compile_value(I, form);
  return t ? rgk_tx_eval(I->C, t, NULL) : NULL;
}

static int status_of(rg_interp *I) {
  int c = I->C->errcode;
  return c ? c : RG_ERR;
}

/* ------------------------------------------------------------------ run */

/* Whether a message starts with a place, "FILE:LINE:COL: ". */
static bool located(const char *msg) {
  const char *c = strchr(msg, ':');
  for (int part = 0; c && part < 2; part++) {
    const char *d = c + 1;
    while (*d >= '0' && *d <= '9') d++;
    if (d == c + 1 || *d != ':') return false;
    c = d;
  }
  return c && c[1] == ' ';
}

rg_term rgk_eval_run(rg_ctx *C, const rgk_tx *t, rgk_frame *env) {
  int64_t n = -1;
  if (t->a) {
    rg_term nv = rgk_tx_eval(C, t->a, env);
    if (!nv) return NULL;
    if (nv != RG_FALSE) {
      if (!rgk_is_int(nv) || rg_int_value(nv) < 0) {
        rg_error(C, RG_ERR_TYPE, "%s%srun needs a count >= 0 or #f, got %s", t->where ? t->where : "",
                 t->where ? ": " : "", rg_to_string(nv));
        return NULL;
      }
      n = rg_int_value(nv);
    }
  }
  if (n == 0) return RG_NIL;
  uint64_t scope = rgk_new_scope(C);
  rgk_frame *f = rgk_alloc(sizeof *f + sizeof(rg_term));
  f->up = env;
  f->v[0] = rgk_var_scoped(C, scope);
  rg_query *Q = rgk_query_new(C, f->v[0], t->goal, f, &t->interp->opts, scope);
  rg_term acc = RG_NIL, a;
  int rc = 0;
  for (int64_t k = 0; n < 0 || k < n; k++) {
    if ((rc = rg_query_next(Q, &a)) != 1) break;
    acc = rg_cons(a, acc);
  }
  if (rc != 0 && rc != 1) {
    if (rc > 0) t->interp->stop = rc;
    /* a limit belongs to the run that reached it, and so does an error
     * raised where no place is known (inside a library relation) */
    if (t->where && (rc > 0 || !located(C->errmsg))) rg_error(C, rc > 0 ? rc : C->errcode, "%s: %s", t->where, rgk_strdup(C->errmsg));
    return NULL;
  }
  return rgk_reverse(acc);
}

/* ------------------------------------------------------------------ definitions */

/* Marks name as defined by the program before its value compiles (so a
 * recursive use of a built-in goal's name is the definition's); returns
 * the mark it had, to restore if the definition fails. */
static bool mark_defining(rg_interp *I, rg_term name) {
  if (I->compiling_lib) return false;
  rgk_global *g = rgk_global_for(I, name);
  bool was = g->defining;
  g->defining = true;
  return was;
}

static int def_relation(rg_interp *I, rg_term form, rg_term name, rg_term params, rg_term body) {
  if (!rgk_is_symbol(name)) return ierr(I, form, RG_ERR_SYNTAX, "relation name must be a symbol");
  bool was = mark_defining(I, name);
  rgk_lambda *lam = rgk_compile_lambda(I, name, params, body, form);
  if (!lam) {
    if (!I->compiling_lib) rgk_global_for(I, name)->defining = was;
    return status_of(I);
  }
  define_global(I, name, rgk_closure(lam, NULL));
  return RG_OK;
}

/* (defrel (name arg ...) goal ...) */
static int form_defrel(rg_interp *I, rg_term form) {
  if (rgk_length(form) < 3 || !rgk_is_pair(rgk_car(rgk_cdr(form))))
    return ierr(I, form, RG_ERR_SYNTAX, "defrel needs (defrel (name arg ...) goal ...)");
  rg_term sig = rgk_car(rgk_cdr(form));
  return def_relation(I, form, rgk_car(sig), rgk_cdr(sig), rgk_cdr(rgk_cdr(form)));
}

/* (define name expr) | (define (name arg ...) goal ...) */
static int form_define(rg_interp *I, rg_term form) {
  if (rgk_length(form) < 3) return ierr(I, form, RG_ERR_SYNTAX, "define needs a name and a value");
  rg_term target = rgk_car(rgk_cdr(form));
  if (rgk_is_pair(target))
    return def_relation(I, form, rgk_car(target), rgk_cdr(target), rgk_cdr(rgk_cdr(form)));
  if (!rgk_is_symbol(target)) return ierr(I, form, RG_ERR_SYNTAX, "define needs a symbol name");
  if (rgk_length(form) != 3) return ierr(I, form, RG_ERR_SYNTAX, "define takes one value");
  rg_term expr = rgk_car(rgk_cdr(rgk_cdr(form)));
  if (head_is(expr, "lambda") && rgk_length(expr) >= 3)
    return def_relation(I, expr, target, rgk_car(rgk_cdr(expr)), rgk_cdr(rgk_cdr(expr)));
  /* bind the name first so a recursive reference compiles to its cell */
  bool was = mark_defining(I, target);
  rg_term v = eval_top(I, expr);
  if (!v) {
    if (!I->compiling_lib) rgk_global_for(I, target)->defining = was;
    return status_of(I);
  }
  define_global(I, target, v);
  return RG_OK;
}

/* (fact rel arg ...): records a fact and makes rel a fact relation. */
static int form_fact(rg_interp *I, rg_term form) {
  if (rgk_length(form) < 2 || !rgk_is_symbol(rgk_car(rgk_cdr(form))))
    return ierr(I, form, RG_ERR_SYNTAX, "fact needs a relation name: (fact rel arg ...)");
  rg_term rel = rgk_car(rgk_cdr(form));
  RGK_LOCAL_STACK(args, 8);
  for (rg_term l = rgk_cdr(rgk_cdr(form)); rgk_is_pair(l); l = rgk_cdr(l)) {
    rg_term v = eval_top(I, rgk_car(l));
    if (!v) return status_of(I);
    rgk_push(&args, RGK_W(v));
  }
  rg_fact(I->C, rel, (int)args.n, (rg_term *)args.v);
  rgk_global *g = rgk_global_for(I, rel);
  if (!g->value) g->value = rgk_facts_proc(rel);
  return RG_OK;
}

/* ------------------------------------------------------------------ run, test, time */

static int form_run(rg_interp *I, rg_term form) {
  rg_term v = eval_top(I, form);
  if (!v) return status_of(I);
  if (I->out) {
    rg_print(I->out, v);
    fputc('\n', I->out);
  }
  return RG_OK;
}

static void report_failure(rg_interp *I, rg_term form, rg_term name, rg_term expr,
                           rg_term expected, rg_term computed, const char *error) {
  if (!I->out) return;
  const char *w = rgk_where(I, form);
  fprintf(I->out, "Failed: ");
  rg_print(I->out, name);
  fprintf(I->out, "%s%s\n  expression: ", w ? " at " : "", w ? w : "");
  rg_print(I->out, expr);
  fputs("\n  expected:   ", I->out);
  if (expected) rg_print(I->out, expected);
  fputs("\n  computed:   ", I->out);
  if (error) fprintf(I->out, "error: %s", error);
  else rg_print(I->out, computed);
  fputc('\n', I->out);
}

/* (test name expr expected): structural comparison; failures are
 * reported and counted, and loading goes on. */
static int form_test(rg_interp *I, rg_term form) {
  if (rgk_length(form) != 4) return ierr(I, form, RG_ERR_SYNTAX, "test needs (test name expression expected)");
  rg_term name = rgk_car(rgk_cdr(form)), expr = rgk_car(rgk_cdr(rgk_cdr(form)));
  rg_term exp_form = rgk_car(rgk_cdr(rgk_cdr(rgk_cdr(form))));
  rg_term expected = eval_top(I, exp_form);
  if (!expected) {
    I->failed++;
    report_failure(I, form, name, exp_form, NULL, NULL, rgk_strdup(rg_errmsg(I->C)));
    rg_clear_error(I->C);
    return RG_OK;
  }
  rg_term computed = eval_top(I, expr);
  if (computed && rg_equal(expected, computed)) {
    I->passed++;
    return RG_OK;
  }
  I->failed++;
  report_failure(I, form, name, expr, expected, computed,
                 computed ? NULL : rgk_strdup(rg_errmsg(I->C)));
  rg_clear_error(I->C);
  I->stop = 0;
  return RG_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* (time expr) prints the time one evaluation takes; (bench n expr) the
 * median and minimum over n evaluations, after n untimed warm-up runs. */
/* bench keeps every run's time to take their median: at most this many. */
#define BENCH_MAX_RUNS 10000000

static int form_time(rg_interp *I, rg_term form, bool bench) {
  int64_t reps = 1;
  rg_term expr;
  if (bench) {
    if (rgk_length(form) != 3 || !rgk_is_int(rgk_car(rgk_cdr(form))) || rg_int_value(rgk_car(rgk_cdr(form))) < 1 ||
        rg_int_value(rgk_car(rgk_cdr(form))) > BENCH_MAX_RUNS)
      return ierr(I, form, RG_ERR_SYNTAX, "bench needs (bench N expression) with N from 1 to %d", BENCH_MAX_RUNS);
    reps = rg_int_value(rgk_car(rgk_cdr(form)));
    expr = rgk_car(rgk_cdr(rgk_cdr(form)));
  } else {
    if (rgk_length(form) != 2) return ierr(I, form, RG_ERR_SYNTAX, "time needs one expression");
    expr = rgk_car(rgk_cdr(form));
  }
  rgk_tx *t = rgk_compile_value(I, expr);
  if (!t) return status_of(I);
  double *ms = rgk_alloc_atomic((size_t)reps * sizeof(double));
  if (bench && !I->warmed) {
    rgk_warm_heap();
    I->warmed = true;
  }
  for (int64_t r = 0; bench && r < reps; r++)
    if (!rgk_tx_eval(I->C, t, NULL)) return status_of(I);
  for (int64_t r = 0; r < reps; r++) {
    double t0 = rgk_now();
    if (!rgk_tx_eval(I->C, t, NULL)) return status_of(I);
    ms[r] = (rgk_now() - t0) * 1e3;
  }
  qsort(ms, (size_t)reps, sizeof(double), cmp_double);
  if (!I->out) return RG_OK;
  if (bench)
    fprintf(I->out, "bench: median %.4f ms, min %.4f ms over %lld runs\n", ms[reps / 2], ms[0],
            (long long)reps);
  else
    fprintf(I->out, "time: %.4f ms\n", ms[0]);
  return RG_OK;
}

static int form_display(rg_interp *I, rg_term form, bool write) {
  if (rgk_length(form) != 2) return ierr(I, form, RG_ERR_SYNTAX, "display takes one expression");
  rg_term v = eval_top(I, rgk_car(rgk_cdr(form)));
  if (!v) return status_of(I);
  if (!I->out) return RG_OK;
  if (!write && rgk_is_string(v)) fputs(rg_string_value(v), I->out);
  else rg_print(I->out, v);
  return RG_OK;
}

/* ------------------------------------------------------------------ load */

/* Files of faster-miniKanren's own distribution: programs load them to
 * get miniKanren and `test`, which relgraph provides itself. */
static bool is_mk_infrastructure(const char *path) {
  static const char *const names[] = {"mk.scm", "mk-vicare.scm", "mk-chicken.scm", "mk-guile.scm",
                                      "mk.rkt", "test-check.scm", "chez.scm", NULL};
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (int i = 0; names[i]; i++)
    if (!strcmp(base, names[i])) return true;
  return false;
}

static int form_load(rg_interp *I, rg_term form) {
  if (rgk_length(form) != 2 || !rgk_is_string(rgk_car(rgk_cdr(form))))
    return ierr(I, form, RG_ERR_SYNTAX, "load needs a file name string");
  const char *file = rg_string_value(rgk_car(rgk_cdr(form)));
  if (is_mk_infrastructure(file)) return RG_OK;
  const char *path = file[0] == '/' || !I->dir || !strcmp(I->dir, ".") ? file
                     : rgk_sprintf("%s/%s", I->dir, file);
  if (I->load_depth >= 64) return ierr(I, form, RG_ERR_LIMIT, "load nested more than 64 deep");
  int rc = rg_interp_load_file(I, path);
  if (rc < 0 && rc == RG_ERR_IO) {
    char *msg = rgk_strdup(rg_errmsg(I->C));
    return ierr(I, form, RG_ERR_IO, "%s", msg);
  }
  return rc;
}

/* ------------------------------------------------------------------ dispatch */

static int exec_form(rg_interp *I, rg_term form) {
  if (rgk_is_pair(form) && rgk_is_symbol(rgk_car(form))) {
    const char *h = rgk_symname(rgk_car(form));
    if (!strcmp(h, "defrel")) return form_defrel(I, form);
    if (!strcmp(h, "define")) return form_define(I, form);
    if (!strcmp(h, "run") || !strcmp(h, "run*")) return form_run(I, form);
    if (!strcmp(h, "test")) return form_test(I, form);
    if (!strcmp(h, "load")) return form_load(I, form);
    if (!strcmp(h, "fact")) return form_fact(I, form);
    if (!strcmp(h, "time")) return form_time(I, form, false);
    if (!strcmp(h, "bench")) return form_time(I, form, true);
    if (!strcmp(h, "display")) return form_display(I, form, false);
    if (!strcmp(h, "write")) return form_display(I, form, true);
    if (!strcmp(h, "newline")) {
      if (I->out) fputc('\n', I->out);
      return RG_OK;
    }
    for (rgk_formext *x = I->forms; x; x = x->next)
      if (x->name == rgk_car(form)) return x->fn(I, form, x->ud);
  }
  if (!rgk_is_pair(form) && !rgk_is_symbol(form)) return RG_OK; /* a literal: no effect */
  return eval_top(I, form) ? RG_OK : status_of(I);
}

static int load_text(rg_interp *I, const char *name, const char *text, size_t len, rgk_srcmap *map) {
  rg_reader *R = rgk_reader_new(I->C, name, text, len, map);
  rg_term form;
  int rc;
  rg_term outer = I->top_form;
  while ((rc = rg_reader_next(R, &form)) == 1) {
    I->stop = 0;
    I->top_form = form;
    rc = exec_form(I, form);
    I->top_form = outer;
    if (rc == RG_OK && I->stop) rc = I->stop;
    if (rc != RG_OK) return rc;
  }
  return rc;
}

int rg_interp_load_string(rg_interp *I, const char *name, const char *text) {
  rg_clear_error(I->C);
  return load_text(I, name, text, strlen(text), I->wmap);
}

/* The text of a file, or of standard input for "-"; NULL (errno set) if
 * it cannot be read. */
static char *slurp(const char *path, size_t *len) {
  if (!strcmp(path, "-")) return rg_read_stream(stdin, len);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = rg_read_stream(f, len);
  int err = errno;
  fclose(f);
  errno = err;
  return text;
}

int rg_interp_load_file(rg_interp *I, const char *path) {
  rg_clear_error(I->C);
  size_t len;
  bool std_in = !strcmp(path, "-");
  char *text = slurp(path, &len);
  if (!text) return rg_error(I->C, RG_ERR_IO, "cannot read %s: %s", path, rg_read_stream_error(errno));
  const char *saved = I->dir;
  char *dircopy = rgk_strdup(path);
  I->dir = std_in ? saved : rgk_strdup(dirname(dircopy));
  I->load_depth++;
  int rc = load_text(I, std_in ? "<stdin>" : path, text, len, I->map);
  I->load_depth--;
  I->dir = saved;
  return rc;
}

/* ------------------------------------------------------------------ public */

rg_interp *rg_interp_new(rg_ctx *C) {
  rg_interp *I = rgk_alloc(sizeof *I);
  I->C = C;
  I->out = stdout;
  I->map = rgk_srcmap_new(false);
  I->wmap = rgk_srcmap_new(true);
  rgk_install_prims(I);
  rgk_install_builtins(I);
  I->compiling_lib = true;
  int rc = load_text(I, "<prelude>", rgk_prelude_text, strlen(rgk_prelude_text), I->map);
  I->compiling_lib = false;
  if (rc != RG_OK) {
    fprintf(stderr, "relgraph: the relations prelude failed to load: %s\n", rg_errmsg(C));
    abort();
  }
  return I;
}

rg_ctx *rg_interp_ctx(rg_interp *I) { return I->C; }
void rg_interp_set_output(rg_interp *I, FILE *out) { I->out = out; }
void rg_interp_set_run_opts(rg_interp *I, const rg_run_opts *opts) { I->opts = opts ? *opts : (rg_run_opts){0}; }

rg_term rg_interp_eval_string(rg_interp *I, const char *text) {
  rg_clear_error(I->C);
  rg_reader *R = rgk_reader_new(I->C, "<eval>", text, strlen(text), I->wmap);
  rg_term form;
  int rc = rg_reader_next(R, &form);
  if (rc < 0) return NULL;
  if (rc == 0) {
    rg_error(I->C, RG_ERR_SYNTAX, "<eval>: no expression");
    return NULL;
  }
  rg_term extra;
  rc = rg_reader_next(R, &extra); /* one expression: text after it is an error, not ignored */
  if (rc < 0) return NULL;
  if (rc > 0) {
    rg_error(I->C, RG_ERR_SYNTAX, "<eval>: text after the expression (one expression is evaluated; "
             "rg_interp_load_string reads several)");
    return NULL;
  }
  return eval_top(I, form);
}

rg_term rg_interp_lookup(rg_interp *I, const char *name) {
  rg_term s = rg_symbol(name);
  rgk_global *g = rgk_table_get(&I->user, s, false);
  if (g && g->value) return g->value;
  g = rgk_table_get(&I->lib, s, false);
  return g ? g->value : NULL;
}

void rg_interp_define(rg_interp *I, const char *name, rg_term value) {
  define_global(I, rg_symbol(name), value);
}

void rg_interp_test_counts(const rg_interp *I, int64_t *passed, int64_t *failed) {
  if (passed) *passed = I->passed;
  if (failed) *failed = I->failed;
}

void rg_interp_add_form(rg_interp *I, const char *name, rg_form_fn fn, void *ud) {
  rgk_formext *x = rgk_alloc(sizeof *x);
  x->name = rg_symbol(name);
  x->fn = (rgk_form_fn)fn;
  x->ud = ud;
  x->next = I->forms;
  I->forms = x;
}

const char *rg_interp_where(rg_interp *I, rg_term form) { return rgk_where(I, form); }

rg_term rg_interp_lambda(rg_interp *I, rg_term name, rg_term params, rg_term body, rg_term where_form) {
  rgk_lambda *lam = rgk_compile_lambda(I, name, params, body, where_form);
  return lam ? rgk_closure(lam, NULL) : NULL;
}
