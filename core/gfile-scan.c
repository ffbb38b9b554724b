/*
 * gfile-scan.c — the scan form of graph files, aesara.scan argument by
 * argument (docs/graph-format.md):
 *
 *   (scan (lambda (PARAM ...) DEFINE ... RESULT)
 *         (sequences S ...) (outputs-info I ...) (non-sequences E ...)
 *         (n-steps E) (go-backwards #t) (truncate-gradient K))
 *
 * S is EXPR or (EXPR (taps K ...)); I is none (nit-sot), EXPR (sit-sot)
 * or (EXPR (taps K ...)) (mit-sot); RESULT is one expression or
 * (values E ... [(until COND)]).  The form is read into an rg_scan_spec
 * and built by rg_scan (scan-build.c), whose step callback reads the
 * lambda body: parameters bound to the inner inputs, in a scope of its
 * own whose parent is the enclosing one, so names defined earlier in the
 * file stay visible (the builder turns such free variables into
 * non-sequences).  Every error names the place of the offending form.
 */
#include "core/gfile-impl.h"
#include "relgraph/scan.h"

typedef struct sform {
  rg_term form, lambda, params, body;
  rgk_stack seqs, outs, non_seqs;   /* rg_scan_seq / rg_scan_output / variables */
  rg_term seq_forms, out_forms;     /* for positions */
  rg_variable *n_steps;
  bool backwards;
  int64_t truncate;
  rg_term seen[6];                  /* options given (for duplicates) */
} sform;

static bool is_sym(rg_term t, const char *name) {
  return rg_kind_of(t) == RG_K_SYMBOL && !strcmp(rg_symbol_name(t), name);
}

static int64_t len(rg_term t) { return rg_is_pair(t) || t == RG_NIL ? rg_list_length(t) : -1; }

static rg_term second(rg_term l) { return rg_car(rg_cdr(l)); }

/* (taps K ...) into a collected array. */
static int read_taps(reader *r, rg_term t, bool negative, int *n, const int64_t **taps) {
  int64_t k = len(t) - 1;
  if (k < 1) return rgc_gf_error(r, t, RG_ERR_SYNTAX, "expected (taps K ...) with at least one tap");
  int64_t *v = rgk_alloc_atomic((size_t)k * sizeof *v);
  rg_term p = rg_cdr(t);
  for (int64_t i = 0; i < k; i++, p = rg_cdr(p)) {
    if (rg_kind_of(rg_car(p)) != RG_K_INT)
      return rgc_gf_error(r, t, RG_ERR_SYNTAX, "a tap must be an integer, got %s", rg_to_string(rg_car(p)));
    v[i] = rg_int_value(rg_car(p));
    if (negative && v[i] >= 0)
      return rgc_gf_error(r, t, RG_ERR_TYPE, "tap %lld has the wrong sign: a state's taps are "
                          "negative (earlier steps)", (long long)v[i]);
    for (int64_t j = 0; j < i; j++)
      if (v[j] == v[i]) return rgc_gf_error(r, t, RG_ERR_SYNTAX, "tap %lld is repeated", (long long)v[i]);
  }
  *n = (int)k;
  *taps = v;
  return RG_OK;
}

/* (EXPR (taps K ...)) */
static bool with_taps(rg_term t) {
  return rg_is_pair(t) && len(t) == 2 && rg_is_pair(second(t)) && is_sym(rg_car(second(t)), "taps");
}

static void push_struct(rgk_stack *s, const void *p, size_t size) {
  void *c = rgk_alloc(size);
  memcpy(c, p, size);
  rgk_push(s, (rgk_word)c);
}

/* ------------------------------------------------------------------ options */

static int opt_sequences(reader *r, sform *f, rg_term opt) {
  f->seq_forms = rg_cdr(opt);
  for (rg_term p = rg_cdr(opt); rg_is_pair(p); p = rg_cdr(p)) {
    rg_term s = rg_car(p);
    rg_scan_seq q = {0};
    int rc = with_taps(s) ? read_taps(r, second(s), false, &q.ntaps, &q.taps) : RG_OK;
    if (!rc) rc = rgc_gf_eval_var(r, rg_is_pair(s) ? s : opt, with_taps(s) ? rg_car(s) : s, &q.x);
    if (rc) return rc;
    if (q.x->type->ndim < 1)
      return rgc_gf_error(r, rg_is_pair(s) ? s : opt, RG_ERR_TYPE, "a sequence needs a dimension to "
                          "walk; this one is a scalar");
    push_struct(&f->seqs, &q, sizeof q);
  }
  return RG_OK;
}

static int opt_outputs_info(reader *r, sform *f, rg_term opt) {
  f->out_forms = rg_cdr(opt);
  for (rg_term p = rg_cdr(opt); rg_is_pair(p); p = rg_cdr(p)) {
    rg_term s = rg_car(p);
    rg_scan_output o = {0};
    int rc = RG_OK;
    if (!is_sym(s, "none")) {
      rc = with_taps(s) ? read_taps(r, second(s), true, &o.ntaps, &o.taps) : RG_OK;
      if (!rc) rc = rgc_gf_eval_var(r, rg_is_pair(s) ? s : opt, with_taps(s) ? rg_car(s) : s, &o.init);
      if (!rc && o.ntaps && !(o.ntaps == 1 && o.taps[0] == -1) && o.init->type->ndim < 1)
        rc = rgc_gf_error(r, s, RG_ERR_TYPE, "the initial values of a state with taps are the rows "
                          "of a tensor; this one is a scalar");
    }
    if (rc) return rc;
    push_struct(&f->outs, &o, sizeof o);
  }
  return RG_OK;
}

static int opt_non_sequences(reader *r, sform *f, rg_term opt) {
  for (rg_term p = rg_cdr(opt); rg_is_pair(p); p = rg_cdr(p)) {
    rg_variable *v;
    int rc = rgc_gf_eval_var(r, opt, rg_car(p), &v);
    if (rc) return rc;
    rgk_push(&f->non_seqs, (rgk_word)v);
  }
  return RG_OK;
}

static int opt_one(reader *r, sform *f, rg_term opt, int which) {
  if (len(opt) != 2) return rgc_gf_error(r, opt, RG_ERR_SYNTAX, "expected one value");
  rg_term v = second(opt);
  switch (which) {
  case 3: return rgc_gf_eval_var(r, opt, v, &f->n_steps);
  case 4:
    if (rg_kind_of(v) != RG_K_BOOL) return rgc_gf_error(r, opt, RG_ERR_SYNTAX, "expected (go-backwards #t) or #f");
    f->backwards = v == RG_TRUE;
    return RG_OK;
  default:
    if (rg_kind_of(v) != RG_K_INT || rg_int_value(v) < -1)
      return rgc_gf_error(r, opt, RG_ERR_SYNTAX, "expected (truncate-gradient K), K >= 0 or -1");
    f->truncate = rg_int_value(v);
    return RG_OK;
  }
}

static const char *const option_names[6] = {"sequences", "outputs-info", "non-sequences", "n-steps",
                                            "go-backwards", "truncate-gradient"};

static int read_option(reader *r, sform *f, rg_term opt) {
  int which = -1;
  for (int i = 0; i < 6 && rg_is_pair(opt); i++)
    if (is_sym(rg_car(opt), option_names[i])) which = i;
  if (which < 0 || len(opt) < 1)
    return rgc_gf_error(r, rg_is_pair(opt) ? opt : f->form, RG_ERR_SYNTAX, "unknown scan option %s "
                        "(sequences, outputs-info, non-sequences, n-steps, go-backwards, "
                        "truncate-gradient)", rg_to_string(opt));
  if (f->seen[which]) return rgc_gf_error(r, opt, RG_ERR_SYNTAX, "%s is given twice", option_names[which]);
  f->seen[which] = opt;
  if (which == 0) return opt_sequences(r, f, opt);
  if (which == 1) return opt_outputs_info(r, f, opt);
  if (which == 2) return opt_non_sequences(r, f, opt);
  return opt_one(r, f, opt, which);
}

/* ------------------------------------------------------------------ the lambda */

static int read_lambda(reader *r, sform *f) {
  rg_term l = f->lambda;
  if (!rg_is_pair(l) || !is_sym(rg_car(l), "lambda") || len(l) < 3 || len(second(l)) < 0)
    return rgc_gf_error(r, rg_is_pair(l) ? l : f->form, RG_ERR_SYNTAX,
                        "expected (lambda (PARAM ...) DEFINE ... RESULT) as the step");
  f->params = second(l);
  f->body = rg_cdr(rg_cdr(l));
  for (rg_term p = f->params; rg_is_pair(p); p = rg_cdr(p))
    if (rg_kind_of(rg_car(p)) != RG_K_SYMBOL)
      return rgc_gf_error(r, l, RG_ERR_SYNTAX, "a parameter must be a symbol, got %s", rg_to_string(rg_car(p)));
  return RG_OK;
}

typedef struct step_ud {
  reader *r;
  sform *f;
  int noutputs;
} step_ud;

/* The number of values RESULT gives (until excluded). */
static int result_count(rg_term res) {
  bool vals = rg_is_pair(res) && is_sym(rg_car(res), "values");
  rg_term items = vals ? rg_cdr(res) : rg_cons(res, RG_NIL);
  int n = 0;
  for (rg_term p = items; rg_is_pair(p); p = rg_cdr(p))
    n += !(rg_is_pair(rg_car(p)) && is_sym(rg_car(rg_car(p)), "until"));
  return n;
}

/* Without outputs-info every output is a nit-sot, as aesara.scan takes a
 * missing outputs_info: one per value the lambda's RESULT gives. */
static void default_outputs(sform *f) {
  rg_term res = f->body;
  while (rg_is_pair(rg_cdr(res))) res = rg_cdr(res);
  int n = rg_is_pair(res) ? result_count(rg_car(res)) : 0;
  for (int k = 0; k < n; k++) {
    rg_scan_output o = {0};
    push_struct(&f->outs, &o, sizeof o);
  }
}

/* RESULT: one expression, or (values E ... [(until COND)]). */
static int read_result(step_ud *u, rg_term res, rg_variable **outs, rg_variable **until) {
  reader *r = u->r;
  bool vals = rg_is_pair(res) && is_sym(rg_car(res), "values");
  rg_term items = vals ? rg_cdr(res) : rg_cons(res, RG_NIL);
  int n = result_count(res);
  if (n != u->noutputs)
    return rgc_gf_error(r, rg_is_pair(res) ? res : u->f->lambda, RG_ERR_TYPE, "the step returns %d "
                        "value%s, outputs-info has %d", n, n == 1 ? "" : "s", u->noutputs);
  n = 0;
  for (rg_term p = items; rg_is_pair(p); p = rg_cdr(p)) {
    rg_term e = rg_car(p);
    if (rg_is_pair(e) && is_sym(rg_car(e), "until")) {
      if (rg_cdr(p) != RG_NIL || len(e) != 2)
        return rgc_gf_error(r, e, RG_ERR_SYNTAX, "(until COND) comes last in values, with one condition");
      int rc = rgc_gf_eval_var(r, e, second(e), until);
      if (rc) return rc;
      if ((*until)->type->dtype != RG_BOOL || (*until)->type->ndim != 0)
        return rgc_gf_error(r, e, RG_ERR_TYPE, "until must be a boolean scalar, got %s",
                            rg_type_str((*until)->type));
      continue;
    }
    int rc = rgc_gf_eval_var(r, rg_is_pair(e) ? e : rg_is_pair(res) ? res : u->f->lambda, e, &outs[n++]);
    if (rc) return rc;
  }
  return RG_OK;
}

/* A state's value must keep the state's type across the step. */
static int check_states(step_ud *u, rg_variable *const *in, rg_variable *const *outs) {
  sform *f = u->f;
  int at = 0;
  for (size_t i = 0; i < f->seqs.n; i++) {
    const rg_scan_seq *q = (const rg_scan_seq *)f->seqs.v[i];
    at += q->ntaps ? q->ntaps : 1;
  }
  for (int k = 0; k < u->noutputs; k++) {
    const rg_scan_output *o = (const rg_scan_output *)f->outs.v[k];
    if (!o->init) continue;
    const rg_type *want = in[at]->type, *got = outs[k]->type;
    bool ok = want->dtype == got->dtype && want->ndim == got->ndim;
    for (int d = 0; ok && d < want->ndim; d++)
      ok = want->shape[d] < 0 || got->shape[d] < 0 || want->shape[d] == got->shape[d];
    if (!ok)
      return rgc_gf_error(u->r, f->lambda, RG_ERR_TYPE, "output %d changes type across a step: the "
                          "state is %s, the step returns %s", k, rg_type_str(want), rg_type_str(got));
    at += o->ntaps && !(o->ntaps == 1 && o->taps[0] == -1) ? o->ntaps : 1;
  }
  return RG_OK;
}

static int body(rg_ctx *C, int nin, rg_variable *const *in, rg_variable **outs, rg_variable **until, void *ud) {
  step_ud *u = ud;
  reader *r = u->r;
  sform *f = u->f;
  if (len(f->params) != nin)
    return rgc_gf_error(r, f->lambda, RG_ERR_TYPE, "the lambda takes %lld parameter%s, the scan passes "
                        "%d (one per sequence tap, state tap and non-sequence)", (long long)len(f->params),
                        len(f->params) == 1 ? "" : "s", nin);
  scope *outer = rgk_alloc(sizeof *outer);
  *outer = r->sc;
  r->sc = (scope){.vars = rg_memo_new(), .opaque = outer->opaque, .parent = outer};
  int rc = RG_OK, i = 0;
  for (rg_term p = f->params; rc == RG_OK && rg_is_pair(p); p = rg_cdr(p), i++) {
    in[i]->name = rg_symbol_name(rg_car(p)); /* the parameter's name, not the builder's */
    rc = rgc_gf_bind(r, f->lambda, rg_car(p), in[i]);
  }
  rg_term b = f->body;
  for (; rc == RG_OK && rg_cdr(b) != RG_NIL; b = rg_cdr(b)) {
    rg_term d = rg_car(b);
    if (!rg_is_pair(d) || !is_sym(rg_car(d), "define"))
      rc = rgc_gf_error(r, rg_is_pair(d) ? d : f->lambda, RG_ERR_SYNTAX, "only (define ...) forms may "
                        "come before the lambda's result");
    else
      rc = rgc_gf_define(r, d);
  }
  if (rc == RG_OK) rc = read_result(u, rg_car(b), outs, until);
  if (rc == RG_OK) rc = check_states(u, in, outs);
  r->sc = *outer;
  return rc;
}

/* ------------------------------------------------------------------ the form */

int rgc_gf_scan(reader *r, rg_term form, void **out, rgk_word *kind) {
  sform f = {.form = form, .truncate = -1};
  if (len(form) < 2) return rgc_gf_error(r, form, RG_ERR_SYNTAX, "expected (scan (lambda ...) OPTION ...)");
  f.lambda = second(form);
  int rc = read_lambda(r, &f);
  for (rg_term p = rg_cdr(rg_cdr(form)); rc == RG_OK && rg_is_pair(p); p = rg_cdr(p))
    rc = read_option(r, &f, rg_car(p));
  if (rc) return rc;
  if (!f.n_steps && f.seqs.n == 0)
    return rgc_gf_error(r, form, RG_ERR_TYPE, "a scan without sequences needs (n-steps E)");
  if (!f.seen[1]) default_outputs(&f);
  int nout = (int)f.outs.n;
  rg_scan_seq *seqs = rgk_alloc((f.seqs.n + 1) * sizeof *seqs);
  rg_scan_output *outs = rgk_alloc((f.outs.n + 1) * sizeof *outs);
  for (size_t i = 0; i < f.seqs.n; i++) seqs[i] = *(rg_scan_seq *)f.seqs.v[i];
  for (size_t i = 0; i < f.outs.n; i++) outs[i] = *(rg_scan_output *)f.outs.v[i];
  step_ud u = {r, &f, nout};
  rg_scan_spec sp = {.nseqs = (int)f.seqs.n, .seqs = seqs, .noutputs = nout, .outputs = outs,
                     .nnon_seqs = (int)f.non_seqs.n, .non_seqs = (rg_variable **)f.non_seqs.v,
                     .n_steps = f.n_steps, .go_backwards = f.backwards, .truncate_gradient = f.truncate,
                     .fn = body, .ud = &u};
  rg_variable **res = rgk_alloc((size_t)(nout + 1) * sizeof *res);
  rg_clear_error(r->C);
  rg_node *node = rg_scan(r->C, &sp, res);
  if (!node) {
    if (strchr(rg_errmsg(r->C), ':') && strstr(rg_errmsg(r->C), r->name)) return rg_errcode(r->C);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rg_errmsg(r->C));
    return rgc_gf_error(r, form, RG_ERR_TYPE, "%s", msg);
  }
  if (nout == 1) {
    *out = res[0];
    *kind = V_VAR;
    return RG_OK;
  }
  rg_node *tuple = rgk_alloc(sizeof *tuple); /* the outputs in outputs-info order */
  tuple->nout = nout;
  tuple->outputs = res;
  *out = tuple;
  *kind = V_NODE;
  return RG_OK;
}
