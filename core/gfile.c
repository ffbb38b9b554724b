/*
 * gfile.c — the graph file format (docs/graph-format.md): reading a
 * (graph ...) form into a FunctionGraph, and writing one back.
 *
 * Reading goes through the kanren reader (rg_reader), which records the
 * file:line:col of every list, so every error names its place.  Forms are
 * processed in order; an expression is evaluated with an explicit stack
 * (arguments before their application, like etuple evaluation), so
 * nesting costs no C stack beyond the reader's own limit.  Nodes are made
 * with rg_make_node(): a type error is reported with the position of the
 * application.
 *
 * Writing walks the graph in topological order.  A variable gets a name
 * (and a define) when it is used more than once, has a name of its own,
 * is an output of a multi-output node, or when inlining it would nest
 * deeper than INLINE_DEPTH; everything else is written inline at its one
 * use.  So shared subgraphs are written once, names survive a round trip,
 * and the nesting of the file stays far below RG_READ_MAX_DEPTH whatever
 * the depth of the graph.
 */
#include "core/core-impl.h"
#include "core/gfile-impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define INLINE_DEPTH 48

/* ------------------------------------------------------------------ names */

/* The reader's state (scope, reader) is shared with gfile-scan.c, which
 * reads the scan form: see core/gfile-impl.h. */

/* "where: " for a form, or the file name. */
static const char *where(reader *r, rg_term form) {
  const char *w = r->R && form ? rg_reader_where(r->R, form) : NULL;
  return w ? w : r->name;
}

static int rerr(reader *r, rg_term form, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int rerr(reader *r, rg_term form, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(r->C, code, "%s: %s", where(r, form), msg);
}

static bool is_sym(rg_term t, const char *name) {
  return rg_kind_of(t) == RG_K_SYMBOL && !strcmp(rg_symbol_name(t), name);
}

static int64_t len(rg_term t) { return rg_is_pair(t) || t == RG_NIL ? rg_list_length(t) : -1; }

static rg_term nth(rg_term l, int k) {
  while (k-- > 0) l = rg_cdr(l);
  return rg_car(l);
}

/* ------------------------------------------------------------------ reading: types and constants */

static int read_dtype(reader *r, rg_term form, rg_term t, rg_dtype *dt) {
  int d = rg_kind_of(t) == RG_K_SYMBOL ? rg_dtype_from_name(rg_symbol_name(t)) : -1;
  if (d < 0) return rerr(r, form, RG_ERR_TYPE, "unknown dtype %s", rg_to_string(t));
  *dt = (rg_dtype)d;
  return RG_OK;
}

static int read_shape(reader *r, rg_term form, rg_term t, bool allow_unknown, int *nd, int64_t *shape) {
  int64_t n = len(t);
  if (n < 0) return rerr(r, form, RG_ERR_SYNTAX, "a shape is a list of sizes, got %s", rg_to_string(t));
  if (n > RG_MAX_NDIM) return rerr(r, form, RG_ERR_LIMIT, "more than %d dimensions", RG_MAX_NDIM);
  *nd = (int)n;
  for (int d = 0; d < n; d++, t = rg_cdr(t)) {
    rg_term s = rg_car(t);
    if (allow_unknown && is_sym(s, "?")) {
      shape[d] = RG_DIM_UNKNOWN;
    } else if (rg_kind_of(s) == RG_K_INT && rg_int_value(s) >= 0) {
      shape[d] = rg_int_value(s);
    } else {
      return rerr(r, form, RG_ERR_SYNTAX, "bad size %s in a shape (sizes are integers%s)",
                  rg_to_string(s), allow_unknown ? " or ?" : "");
    }
  }
  return RG_OK;
}

static int read_device(reader *r, rg_term form, rg_term t, rg_device *dev) {
  const char *s = rg_kind_of(t) == RG_K_SYMBOL ? rg_symbol_name(t) : "";
  if (rg_device_parse(s, dev) == RG_OK) return RG_OK;
  return rerr(r, form, RG_ERR_SYNTAX, "bad device %s (host, cuda:N or mirror)", rg_to_string(t));
}

static bool value_of(rg_term t, rg_dtype dt, void *p) {
  switch (rg_kind_of(t)) {
  case RG_K_BOOL: rg_store_i64(dt, p, t == RG_TRUE); return dt == RG_BOOL;
  case RG_K_INT: rg_store_i64(dt, p, rg_int_value(t)); return rg_dtype_holds(dt, rg_int_value(t));
  case RG_K_FLOAT: /* a finite value float32 cannot hold would become inf */
    rg_store_f64(dt, p, rg_float_value(t));
    return rg_dtype_is_float(dt) && (dt != RG_FLOAT32 || !isfinite(rg_float_value(t)) || isfinite(*(float *)p));
  default: return false;
  }
}

/* (constant DTYPE (SHAPE) (VALUES...)) */
static rg_variable *read_constant(reader *r, rg_term form) {
  if (len(form) != 4) {
    rerr(r, form, RG_ERR_SYNTAX, "expected (constant DTYPE (SHAPE) (VALUES...))");
    return NULL;
  }
  rg_dtype dt = RG_FLOAT64;
  int nd = 0;
  int64_t shape[RG_MAX_NDIM];
  if (read_dtype(r, form, nth(form, 1), &dt) || read_shape(r, form, nth(form, 2), false, &nd, shape))
    return NULL;
  const rg_type *t = rg_type_new(dt, nd, shape);
  int64_t n = rg_type_numel(t), have = len(nth(form, 3));
  if (n < 0) {
    rerr(r, form, RG_ERR_TYPE, "the shape %s holds more values than a tensor can", rgc_shape_str(nd, shape));
    return NULL;
  }
  if (have != n) {
    rerr(r, form, RG_ERR_TYPE, "the shape %s holds %lld values, %lld given", rgc_shape_str(nd, shape),
         (long long)n, (long long)have);
    return NULL;
  }
  size_t es = rg_dtype_size(dt);
  char *buf = rgk_alloc_atomic((size_t)(n ? n : 1) * es);
  rg_term v = nth(form, 3);
  for (int64_t i = 0; i < n; i++, v = rg_cdr(v))
    if (!value_of(rg_car(v), dt, buf + i * (int64_t)es)) {
      rerr(r, form, RG_ERR_TYPE, "value %s is not of dtype %s", rg_to_string(rg_car(v)), rg_dtype_name(dt));
      return NULL;
    }
  return rg_constant_data(r->C, dt, nd, shape, buf);
}

/* ------------------------------------------------------------------ reading: expressions */

/* Values on the evaluation stack are two words: the object and its kind.
 * Work items are two words: a term and a tag, which is a marker (odd) or
 * the list the term appears in (a pair, for error positions) or 0. */
#define MARK_APPLY ((rgk_word)1)
#define MARK_NTH ((rgk_word)3)

static rg_variable *literal(reader *r, rg_term t) {
  switch (rg_kind_of(t)) {
  case RG_K_INT: return rg_scalar_int(r->C, rg_int_value(t));
  case RG_K_FLOAT: return rg_scalar_float(r->C, rg_float_value(t));
  case RG_K_BOOL: return rg_scalar_bool(r->C, t == RG_TRUE);
  default: return NULL;
  }
}

static const rg_op *resolve_op(reader *r, rg_term form, rg_term head) {
  rg_term name = rg_is_pair(head) ? rg_car(head) : head;
  if (rg_kind_of(name) == RG_K_SYMBOL && !rg_is_pair(head)) {
    const rg_op *op = rg_memo_get(r->sc.opaque, name);
    if (op) return op;
  }
  rg_clear_error(r->C);
  const rg_op *op = rg_op_from_term(r->C, head);
  if (!op) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(r->C));
    /* the hint is for an op named here: an error from inside an inner
     * graph (op_from_graph, composite) carries its own, once */
    bool named_here = rg_kind_of(name) == RG_K_SYMBOL && !rg_is_pair(head);
    rerr(r, form, rg_errcode(r->C), "%s%s", msg,
         named_here && rg_errcode(r->C) == RG_ERR_NAME ? " (declare opaque ops with (opaque NAME))" : "");
  }
  return op;
}

static int push_value(rgk_stack *vals, void *p, rgk_word kind) {
  rgk_push(vals, (rgk_word)p);
  rgk_push(vals, kind);
  return RG_OK;
}

/* An atom: a name or a literal. */
static int eval_atom(reader *r, rg_term form, rg_term t, rgk_stack *vals) {
  if (rg_kind_of(t) == RG_K_SYMBOL) {
    rg_variable *v = rgc_gf_lookup(&r->sc, t);
    if (!v) return rerr(r, form, RG_ERR_NAME, "unknown name '%s'", rg_symbol_name(t));
    return push_value(vals, v, V_VAR);
  }
  rg_variable *v = literal(r, t);
  if (!v) return rerr(r, form, RG_ERR_SYNTAX, "unexpected %s in an expression", rg_to_string(t));
  return push_value(vals, v, V_VAR);
}

/* Schedules a list: its arguments first, then a marker. */
static int schedule(reader *r, rg_term e, rgk_stack *work, rgk_stack *vals) {
  rg_term head = rg_car(e);
  if (len(e) < 1) return rerr(r, e, RG_ERR_SYNTAX, "an expression must be a proper list");
  if (is_sym(head, "constant")) {
    rg_variable *c = read_constant(r, e);
    return c ? push_value(vals, c, V_VAR) : RG_ERR_TYPE;
  }
  if (is_sym(head, "scan")) {
    void *p;
    rgk_word kind;
    int rc = rgc_gf_scan(r, e, &p, &kind);
    return rc ? rc : push_value(vals, p, kind);
  }
  if (is_sym(head, "nth")) {
    if (len(e) != 3 || rg_kind_of(nth(e, 1)) != RG_K_INT)
      return rerr(r, e, RG_ERR_SYNTAX, "expected (nth INDEX EXPR)");
    rgk_push(work, RGK_W(e));
    rgk_push(work, MARK_NTH);
    rgk_push(work, RGK_W(nth(e, 2)));
    rgk_push(work, RGK_W(e));
    return RG_OK;
  }
  rgk_push(work, RGK_W(e));
  rgk_push(work, MARK_APPLY);
  int64_t n = len(e) - 1;
  size_t base = work->n;
  for (int64_t i = 0; i < n; i++) {
    rgk_push(work, 0);
    rgk_push(work, 0);
  }
  rg_term a = rg_cdr(e);
  for (int64_t i = n - 1; i >= 0; i--, a = rg_cdr(a)) {
    work->v[base + 2 * (size_t)i] = RGK_W(rg_car(a));
    work->v[base + 2 * (size_t)i + 1] = RGK_W(e); /* the parent, for positions */
  }
  return RG_OK;
}

/* (grad COST WRT ...): one gradient per WRT, expanded into the gradient
 * graph as the file is read.  Several travel as a node that holds only
 * their list (no op), which define and nth take apart like any
 * multi-output node. */
static int apply_grad(reader *r, rg_term e, int n, rg_variable **args, rgk_stack *vals) {
  if (n < 2) return rerr(r, e, RG_ERR_SYNTAX, "expected (grad COST WRT ...)");
  rg_variable **g = rgk_alloc((size_t)(n - 1) * sizeof *g);
  rg_clear_error(r->C);
  if (rg_grad(r->C, args[0], n - 1, args + 1, NULL, g) != RG_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(r->C));
    return rerr(r, e, RG_ERR_TYPE, "%s", msg);
  }
  if (n == 2) return push_value(vals, g[0], V_VAR);
  rg_node *tuple = rgk_alloc(sizeof *tuple);
  tuple->nout = n - 1;
  tuple->outputs = g;
  return push_value(vals, tuple, V_NODE);
}

/* Applies the op of list e to the n values on top of vals. */
static int apply(reader *r, rg_term e, rgk_stack *vals) {
  int n = (int)len(e) - 1;
  rg_variable **args = rgk_alloc((size_t)(n ? n : 1) * sizeof *args);
  for (int i = 0; i < n; i++) {
    size_t at = vals->n - 2 * (size_t)(n - i);
    if (vals->v[at + 1] != V_VAR) {
      rg_node *m = (rg_node *)vals->v[at];
      return rerr(r, e, RG_ERR_TYPE, "argument %d has %d outputs; name them with (define (a b ...) "
                  "EXPR) or pick one with (nth K EXPR)", i + 1, m->nout);
    }
    args[i] = (rg_variable *)vals->v[at];
  }
  vals->n -= 2 * (size_t)n;
  if (is_sym(rg_car(e), "grad")) return apply_grad(r, e, n, args, vals);
  const rg_op *op = resolve_op(r, e, rg_car(e));
  if (!op) return RG_ERR_NAME;
  rg_clear_error(r->C);
  rg_node *node = rg_make_node(r->C, op, n, args);
  if (!node) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(r->C));
    return rerr(r, e, RG_ERR_TYPE, "%s", msg);
  }
  if (node->nout == 1) return push_value(vals, node->outputs[0], V_VAR);
  return push_value(vals, node, V_NODE);
}

static int pick(reader *r, rg_term e, rgk_stack *vals) {
  int64_t k = rg_int_value(nth(e, 1));
  rgk_word kind = vals->v[vals->n - 1];
  void *p = (void *)vals->v[vals->n - 2];
  vals->n -= 2;
  int nout = kind == V_NODE ? ((rg_node *)p)->nout : ((rg_variable *)p)->owner ? ((rg_variable *)p)->owner->nout : 1;
  if (kind != V_NODE && nout == 1 && k == 0) return push_value(vals, p, V_VAR);
  if (kind != V_NODE || k < 0 || k >= nout)
    return rerr(r, e, RG_ERR_TYPE, "nth: no output %lld (the expression has %d)", (long long)k, nout);
  return push_value(vals, ((rg_node *)p)->outputs[k], V_VAR);
}

/* Evaluates an expression to a variable or a multi-output node. */
static int eval_expr(reader *r, rg_term form, rg_term expr, void **out, rgk_word *kind) {
  rgk_stack work = {0}, vals = {0};
  rgk_push(&work, RGK_W(expr));
  rgk_push(&work, 0);
  int rc = RG_OK;
  while (rc == RG_OK && work.n) {
    rgk_word tag = work.v[--work.n];
    rg_term x = RGK_T(work.v[--work.n]);
    if (tag == MARK_APPLY) rc = apply(r, x, &vals);
    else if (tag == MARK_NTH) rc = pick(r, x, &vals);
    else if (rg_is_pair(x)) rc = schedule(r, x, &work, &vals);
    else rc = eval_atom(r, tag ? RGK_T(tag) : form, x, &vals);
  }
  if (rc != RG_OK) return rc;
  *out = (void *)vals.v[0];
  *kind = vals.v[1];
  return RG_OK;
}

static int eval_var(reader *r, rg_term form, rg_term expr, rg_variable **out) {
  void *p;
  rgk_word kind;
  int rc = eval_expr(r, form, expr, &p, &kind);
  if (rc != RG_OK) return rc;
  if (kind != V_VAR)
    return rerr(r, form, RG_ERR_TYPE, "the expression has %d outputs; name them with (define (a b "
                "...) EXPR) or pick one with (nth K EXPR)", ((rg_node *)p)->nout);
  *out = p;
  return RG_OK;
}

/* ------------------------------------------------------------------ reading: forms */

static int bind_name(reader *r, rg_term form, rg_term name, rg_variable *v) {
  if (rg_kind_of(name) != RG_K_SYMBOL)
    return rerr(r, form, RG_ERR_SYNTAX, "a name must be a symbol, got %s", rg_to_string(name));
  if (rg_memo_get(r->sc.vars, name))
    return rerr(r, form, RG_ERR_NAME, "the name '%s' is already defined", rg_symbol_name(name));
  rg_memo_put(r->sc.vars, name, v);
  if (!v->name && !rg_is_constant(v)) v->name = rg_symbol_name(name);
  return RG_OK;
}

/* (input NAME DTYPE (SHAPE) [DEVICE]) */
static int form_input(reader *r, rg_term form) {
  int64_t n = len(form);
  if (n != 4 && n != 5) return rerr(r, form, RG_ERR_SYNTAX, "expected (input NAME DTYPE (SHAPE) [DEVICE])");
  rg_dtype dt = RG_FLOAT64;
  int nd = 0;
  int64_t shape[RG_MAX_NDIM];
  rg_device dev = RG_DEVICE_HOST;
  if (read_dtype(r, form, nth(form, 2), &dt) || read_shape(r, form, nth(form, 3), true, &nd, shape) ||
      (n == 5 && read_device(r, form, nth(form, 4), &dev)))
    return RG_ERR_SYNTAX;
  rg_term name = nth(form, 1);
  if (rg_kind_of(name) != RG_K_SYMBOL)
    return rerr(r, form, RG_ERR_SYNTAX, "an input's name must be a symbol, got %s", rg_to_string(name));
  rg_variable *v = rg_input(r->C, rg_symbol_name(name), rg_type_on_device(rg_type_new(dt, nd, shape), dev));
  rgk_push(&r->inputs, (rgk_word)v);
  return bind_name(r, form, name, v);
}

/* (opaque NAME [(outputs N)] [(type DTYPE (SHAPE))]) */
static int form_opaque(reader *r, rg_term form) {
  rg_term name = len(form) >= 2 ? nth(form, 1) : RG_NIL;
  if (rg_kind_of(name) != RG_K_SYMBOL)
    return rerr(r, form, RG_ERR_SYNTAX, "expected (opaque NAME [(outputs N)] [(type DTYPE (SHAPE))])");
  int64_t nout = 1;
  const rg_type *t = NULL;
  for (rg_term o = rg_cdr(rg_cdr(form)); rg_is_pair(o); o = rg_cdr(o)) {
    rg_term opt = rg_car(o);
    if (len(opt) == 2 && is_sym(rg_car(opt), "outputs")) {
      if (rg_kind_of(nth(opt, 1)) != RG_K_INT || rg_int_value(nth(opt, 1)) < 0 || rg_int_value(nth(opt, 1)) > 1024)
        return rerr(r, form, RG_ERR_SYNTAX, "(outputs N): N from 0 to 1024, not %s", rg_to_string(nth(opt, 1)));
      nout = rg_int_value(nth(opt, 1));
    } else if (len(opt) == 3 && is_sym(rg_car(opt), "type")) {
      rg_dtype dt = RG_FLOAT64;
      int nd = 0;
      int64_t shape[RG_MAX_NDIM];
      if (read_dtype(r, form, nth(opt, 1), &dt) || read_shape(r, form, nth(opt, 2), true, &nd, shape))
        return RG_ERR_SYNTAX;
      t = rg_type_new(dt, nd, shape);
    } else {
      return rerr(r, form, RG_ERR_SYNTAX, "unknown opaque option %s", rg_to_string(opt));
    }
  }
  if (rg_opcode_from_name(rg_symbol_name(name)) >= 0)
    return rerr(r, form, RG_ERR_NAME, "'%s' is the name of a built-in op", rg_symbol_name(name));
  if (rg_memo_get(r->sc.opaque, name))
    return rerr(r, form, RG_ERR_NAME, "opaque op '%s' is declared twice", rg_symbol_name(name));
  const rg_op *op = rg_op_opaque(rg_symbol_name(name), (int)nout, t);
  rg_memo_put(r->sc.opaque, name, (void *)op);
  rg_graph_declare_opaque(r->C, op); /* so kanren expressions can apply it too */
  return RG_OK;
}

/* (define NAME EXPR) or (define (NAME ...) EXPR) */
static int form_define(reader *r, rg_term form) {
  if (len(form) != 3) return rerr(r, form, RG_ERR_SYNTAX, "expected (define NAME EXPR)");
  rg_term names = nth(form, 1);
  void *p;
  rgk_word kind;
  int rc = eval_expr(r, form, nth(form, 2), &p, &kind);
  if (rc != RG_OK) return rc;
  if (!rg_is_pair(names)) {
    if (kind != V_VAR)
      return rerr(r, form, RG_ERR_TYPE, "the expression has %d outputs; name each with (define "
                  "(a b ...) EXPR)", ((rg_node *)p)->nout);
    return bind_name(r, form, names, p);
  }
  int nout = kind == V_NODE ? ((rg_node *)p)->nout : 1;
  if (len(names) != nout)
    return rerr(r, form, RG_ERR_TYPE, "%lld names for %d outputs", (long long)len(names), nout);
  for (int k = 0; k < nout; k++, names = rg_cdr(names)) {
    rg_variable *v = kind == V_NODE ? ((rg_node *)p)->outputs[k] : p;
    if ((rc = bind_name(r, form, rg_car(names), v))) return rc;
  }
  return RG_OK;
}

static int form_output(reader *r, rg_term form) {
  if (len(form) != 2) return rerr(r, form, RG_ERR_SYNTAX, "expected (output EXPR)");
  rg_variable *v = NULL;
  int rc = eval_var(r, form, nth(form, 1), &v);
  if (rc == RG_OK) rgk_push(&r->outputs, (rgk_word)v);
  return rc;
}

static int read_form(reader *r, rg_term form) {
  rg_term head = rg_is_pair(form) ? rg_car(form) : RG_NIL;
  if (is_sym(head, "input")) return form_input(r, form);
  if (is_sym(head, "opaque")) return form_opaque(r, form);
  if (is_sym(head, "define")) return form_define(r, form);
  if (is_sym(head, "output")) return form_output(r, form);
  return rerr(r, rg_is_pair(form) ? form : NULL, RG_ERR_SYNTAX,
              "unknown form %s (expected input, opaque, define or output)", rg_to_string(head == RG_NIL ? form : head));
}

/* ------------------------------------------------------------------ reading: for gfile-scan.c */

rg_variable *rgc_gf_lookup(const scope *sc, rg_term name) {
  for (; sc; sc = sc->parent) {
    rg_variable *v = rg_memo_get(sc->vars, name);
    if (v) return v;
  }
  return NULL;
}

int rgc_gf_eval(reader *r, rg_term form, rg_term expr, void **out, rgk_word *kind) {
  return eval_expr(r, form, expr, out, kind);
}

int rgc_gf_eval_var(reader *r, rg_term form, rg_term expr, rg_variable **out) {
  return eval_var(r, form, expr, out);
}

int rgc_gf_define(reader *r, rg_term form) { return form_define(r, form); }

int rgc_gf_bind(reader *r, rg_term form, rg_term name, rg_variable *v) {
  return bind_name(r, form, name, v);
}

int rgc_gf_error(reader *r, rg_term form, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(r->C, code, "%s: %s", where(r, form), msg);
}

static rg_fgraph *read_graph(reader *r, rg_term g) {
  if (!rg_is_pair(g) || !is_sym(rg_car(g), "graph") || len(g) < 1) {
    if (rg_is_pair(g)) rerr(r, g, RG_ERR_SYNTAX, "expected a (graph ...) form");
    else rerr(r, NULL, RG_ERR_SYNTAX, "expected a (graph ...) form, got '%.40s'", rg_to_string(g));
    return NULL;
  }
  r->sc.vars = rg_memo_new();
  r->sc.opaque = rg_memo_new();
  for (rg_term f = rg_cdr(g); rg_is_pair(f); f = rg_cdr(f))
    if (read_form(r, rg_car(f)) != RG_OK) return NULL;
  rg_fgraph *fg = rg_fgraph_new(r->C, (int)r->inputs.n, (rg_variable **)r->inputs.v,
                                (int)r->outputs.n, (rg_variable **)r->outputs.v, 0);
  if (!fg) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(r->C));
    rerr(r, g, RG_ERR_TYPE, "%s", msg);
  }
  return fg;
}

rg_fgraph *rgc_graph_from_term_named(rg_ctx *C, rg_term form, const char *name) {
  reader r = {.C = C, .name = name};
  return read_graph(&r, form);
}

rg_fgraph *rg_graph_from_term(rg_ctx *C, rg_term form) { return rgc_graph_from_term_named(C, form, "<graph>"); }

rg_fgraph *rg_graph_read(rg_ctx *C, const char *name, const char *text, size_t n) {
  reader r = {.C = C, .name = name ? name : "<graph>"};
  r.R = rg_reader_new(C, r.name, text, n);
  rg_term g, extra;
  int rc = rg_reader_next(r.R, &g);
  if (rc < 0) return NULL;
  if (rc == 0) {
    rg_error(C, RG_ERR_SYNTAX, "%s: empty file (expected a (graph ...) form)", r.name);
    return NULL;
  }
  if (!rg_is_pair(g) || !is_sym(rg_car(g), "graph")) return read_graph(&r, g); /* says what it got */
  rc = rg_reader_next(r.R, &extra);
  if (rc < 0) return NULL;
  if (rc > 0) {
    rerr(&r, rg_is_pair(extra) ? extra : NULL, RG_ERR_SYNTAX, "text after the (graph ...) form");
    return NULL;
  }
  return read_graph(&r, g);
}

rg_fgraph *rg_graph_load(rg_ctx *C, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    rg_error(C, RG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t n;
  char *text = rg_read_stream(f, &n);
  int err = errno;
  fclose(f);
  if (!text) {
    rg_error(C, RG_ERR_IO, "%s: cannot read: %s", path, rg_read_stream_error(err)); /* a directory, ... */
    return NULL;
  }
  return rg_graph_read(C, path, text, n);
}

/* ------------------------------------------------------------------ writing: names */

typedef struct writer {
  FILE *f;
  rg_fgraph *fg;
  rg_memo *names;   /* variable -> const char * (defined or input names) */
  rg_memo *used;    /* symbol -> itself: names taken */
  rg_memo *wanted;  /* symbol -> itself: the graph's own names, never generated for another */
  rg_memo *depth;   /* variable -> inline depth + 1 */
  rg_memo *heads;   /* op -> its term as text (ops are shared by many nodes) */
  int next;
} writer;

/* Whether a name reads back as the same symbol (the reader decides: `info`
 * and `1st` are symbols, `1e3` and `+inf.0` numbers) and is not special. */
static bool good_name(rg_ctx *C, const char *s) {
  if (!*s || !strcmp(s, ".") || s[0] == '#' || !strcmp(s, "?")) return false;
  for (const char *p = s; *p; p++)
    if (strchr(" \t\n\r\f()[]\";'`,", *p) || (unsigned char)*p < 33) return false;
  rg_term t = rg_read_all(C, "name", s, strlen(s));
  if (!t) rg_clear_error(C);
  if (!t || !rg_is_pair(t) || rg_cdr(t) != RG_NIL || rg_car(t) != rg_symbol(s)) return false;
  static const char *const reserved[] = {"graph", "input", "opaque", "define", "output", "constant", "nth", "scan"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if (!strcmp(s, reserved[i])) return false;
  return true;
}

static const char *fresh_name(writer *w, const char *want) {
  if (want && good_name(rg_fgraph_ctx(w->fg), want) && !rg_memo_get(w->used, rg_symbol(want))) {
    rg_memo_put(w->used, rg_symbol(want), (void *)want);
    return want;
  }
  for (;;) {
    char *s = rgk_sprintf("t%d", ++w->next);
    if (!rg_memo_get(w->used, rg_symbol(s)) && !rg_memo_get(w->wanted, rg_symbol(s))) {
      rg_memo_put(w->used, rg_symbol(s), s);
      return s;
    }
  }
}

static bool literal_constant(const rg_variable *v) {
  return rg_is_constant(v) && (v->flags & RG_VAR_WEAK) && v->type->ndim == 0 &&
         (v->type->dtype == RG_INT64 || v->type->dtype == RG_FLOAT64 || v->type->dtype == RG_BOOL);
}

/* Does variable v (computed by a node) need a name of its own? */
static bool needs_name(writer *w, const rg_variable *v, int inline_depth) {
  return v->nclients != 1 || v->name || v->owner->nout != 1 || inline_depth > INLINE_DEPTH;
}

/* ------------------------------------------------------------------ writing: values */

static void write_constant(FILE *f, const rg_variable *v) {
  if (literal_constant(v)) {
    rgc_fprint_elem(f, v->type->dtype, v->data);
    return;
  }
  const rg_type *t = v->type;
  fprintf(f, "(constant %s %s (", rg_dtype_name(t->dtype), rgc_shape_str(t->ndim, t->shape));
  int64_t n = rg_type_numel(t);
  size_t es = rg_dtype_size(t->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (i) fputc(' ', f);
    rgc_fprint_elem(f, t->dtype, (const char *)v->data + i * (int64_t)es);
  }
  fputs("))", f);
}

static void write_expr(writer *w, const rg_variable *v);

static void write_ref(writer *w, const rg_variable *v) {
  const char *name = rg_memo_get(w->names, v);
  if (name) fputs(name, w->f);
  else if (rg_is_constant(v)) write_constant(w->f, v);
  else write_expr(w, v); /* inlined: depth bounded by INLINE_DEPTH */
}

static void write_apply(writer *w, const rg_node *n) {
  const char *head = rg_memo_get(w->heads, n->op);
  if (!head) {
    head = rg_to_string(rg_op_term(n->op));
    rg_memo_put(w->heads, n->op, (void *)head);
  }
  fputc('(', w->f);
  fputs(head, w->f);
  for (int i = 0; i < n->nin; i++) {
    fputc(' ', w->f);
    write_ref(w, n->inputs[i]);
  }
  fputc(')', w->f);
}

static void write_expr(writer *w, const rg_variable *v) { write_apply(w, v->owner); }

/* ------------------------------------------------------------------ writing: the graph */

static void write_type(FILE *f, const rg_type *t) {
  fprintf(f, "%s %s", rg_dtype_name(t->dtype), rgc_shape_str(t->ndim, t->shape));
  char dev[16];
  if (t->device != RG_DEVICE_HOST) fprintf(f, " %s", rg_device_str(t->device, dev, sizeof dev));
}

static void write_opaque_decls(writer *w, rg_node *const *order, size_t n) {
  rg_memo *seen = rg_memo_new();
  for (size_t k = 0; k < n; k++) {
    const rg_op *op = order[k]->op;
    if (op->code != RG_OP_OPAQUE || rg_memo_get(seen, rg_symbol(op->name))) continue;
    rg_memo_put(seen, rg_symbol(op->name), (void *)op);
    fprintf(w->f, "  (opaque %s", op->name);
    if (op->nout != 1) fprintf(w->f, " (outputs %d)", op->nout);
    if (op->out_type) {
      fputs(" (type ", w->f);
      write_type(w->f, op->out_type);
      fputc(')', w->f);
    }
    fputs(")\n", w->f);
  }
}

/* Large constants used more than once are written once, as defines. */
static void write_shared_constants(writer *w, rg_node *const *order, size_t n) {
  for (size_t k = 0; k < n; k++)
    for (int i = 0; i < order[k]->nin; i++) {
      rg_variable *c = order[k]->inputs[i];
      if (!rg_is_constant(c) || c->nclients < 2 || rg_type_numel(c->type) <= 16 ||
          rg_memo_get(w->names, c))
        continue;
      const char *name = fresh_name(w, NULL);
      rg_memo_put(w->names, c, (void *)name);
      fprintf(w->f, "  (define %s ", name);
      write_constant(w->f, c);
      fputs(")\n", w->f);
    }
}

/* The names the graph's inputs and values carry, so that a name made up
 * for an unnamed value never takes one a value named later wants. */
static void want_names(writer *w, rg_node *const *order, size_t n) {
  for (int i = 0; i < w->fg->nin; i++)
    if (w->fg->inputs[i]->name) rg_memo_put(w->wanted, rg_symbol(w->fg->inputs[i]->name), (void *)1);
  for (size_t k = 0; k < n; k++)
    for (int o = 0; o < order[k]->nout; o++)
      if (order[k]->outputs[o]->name) rg_memo_put(w->wanted, rg_symbol(order[k]->outputs[o]->name), (void *)1);
}

/* Decides names and inline depths in topological order. */
static void plan(writer *w, rg_node *const *order, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const rg_node *x = order[k];
    int d = 1;
    for (int i = 0; i < x->nin; i++) {
      intptr_t di = (intptr_t)rg_memo_get(w->depth, x->inputs[i]);
      if (di > d) d = (int)di;
    }
    for (int o = 0; o < x->nout; o++) {
      rg_variable *v = x->outputs[o];
      if (needs_name(w, v, d)) rg_memo_put(w->names, v, (void *)fresh_name(w, v->name));
      else rg_memo_put(w->depth, v, (void *)(intptr_t)(d + 1));
    }
  }
}

static void write_defines(writer *w, rg_node *const *order, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const rg_node *x = order[k];
    if (!rg_memo_get(w->names, x->outputs[0]) && x->nout == 1) continue;
    fputs("  (define ", w->f);
    if (x->nout == 1) {
      fputs(rg_memo_get(w->names, x->outputs[0]), w->f);
    } else {
      fputc('(', w->f);
      for (int o = 0; o < x->nout; o++)
        fprintf(w->f, "%s%s", o ? " " : "", (const char *)rg_memo_get(w->names, x->outputs[o]));
      fputc(')', w->f);
    }
    fputc(' ', w->f);
    write_apply(w, x);
    fputs(")\n", w->f);
  }
}

int rg_graph_write(rg_ctx *C, FILE *f, rg_fgraph *fg) {
  writer w = {.f = f, .fg = fg, .names = rg_memo_new(), .used = rg_memo_new(), .wanted = rg_memo_new(),
              .depth = rg_memo_new(), .heads = rg_memo_new()};
  size_t n;
  rg_node *const *order = rgc_import_order(fg, &n); /* written again after a read: the same text */
  want_names(&w, order, n);
  fputs("(graph\n", f);
  for (int i = 0; i < fg->nin; i++) {
    rg_variable *v = fg->inputs[i];
    const char *name = fresh_name(&w, v->name);
    rg_memo_put(w.names, v, (void *)name);
    fprintf(f, "  (input %s ", name);
    write_type(f, v->type);
    fputs(")\n", f);
  }
  write_opaque_decls(&w, order, n);
  plan(&w, order, n);
  write_shared_constants(&w, order, n);
  write_defines(&w, order, n);
  for (int k = 0; k < fg->nout; k++) {
    fputs("  (output ", f);
    write_ref(&w, fg->outputs[k]);
    fputs(")\n", f);
  }
  fputs(")\n", f);
  return ferror(f) ? rg_error(C, RG_ERR_IO, "write error") : RG_OK;
}

char *rg_graph_to_string(rg_ctx *C, rg_fgraph *fg) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  int rc = rg_graph_write(C, f, fg);
  fclose(f);
  char *s = rc == RG_OK ? rgk_strndup(buf, n) : NULL;
  free(buf);
  return s;
}

rg_term rg_graph_to_term(rg_fgraph *fg) {
  rg_ctx *C = fg->ctx ? fg->ctx : rg_ctx_new();
  char *s = rg_graph_to_string(C, fg);
  rg_term l = s ? rg_read_all(C, "<graph>", s, strlen(s)) : NULL;
  return l && rg_is_pair(l) ? rg_car(l) : NULL;
}
