/*
 * verify.c — numeric checking of symbolic gradients (rg_verify_grad), by
 * Aesara's method: a random projection P of the output (uniform in
 * [0.5, 1.5), fixed by a seed) turns it into the scalar cost sum(out * P);
 * the gradient rg_grad builds for that cost is compiled and evaluated at
 * the given point, and compared element by element with central finite
 * differences of the compiled cost, (cost(x + eps) - cost(x - eps)) / 2eps.
 * An element fails when both its absolute and its relative error
 * (|a - n| / (|a| + |n|)) exceed the tolerance.  The step and the
 * tolerance are those of the coarsest float dtype among the inputs and the
 * output (as Aesara takes the largest over the inputs): a float64 input
 * that feeds a float32 computation sees float32's rounding in the
 * differences.
 *
 * Execution lives here, above core, because checking needs it; rg_grad
 * itself is graph construction in core.
 */
#include "backend/backend-impl.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double default_eps(rg_dtype dt) { return dt == RG_FLOAT32 ? 1e-3 : 1e-6; }
static double default_tol(rg_dtype dt) { return dt == RG_FLOAT32 ? 1e-2 : 1e-4; }

/* A uniform draw in [0, 1) from the seeded stream. */
static double next_unit(uint64_t *s) { return (double)(rg_random_next(s) >> 11) * 0x1.0p-53; }

typedef struct vg {
  rg_ctx *C;
  int nin;
  rg_variable *const *inputs;
  rg_tensor **point;      /* copies of the values, perturbed in turn */
  rg_function *cost_fn;   /* inputs -> cost */
  const rg_verify_opts *o;
  rg_dtype coarse;        /* the dtype whose step and tolerance apply */
} vg;

static double cost_at(vg *v, int *rc) {
  rg_tensor *c = NULL;
  *rc = rg_function_call(v->cost_fn, v->point, &c);
  if (*rc != RG_OK) {
    *rc = rg_error(v->C, RG_ERR_EVAL, "verify_grad: the cost failed: %s", rg_function_errmsg(v->cost_fn));
    return NAN;
  }
  double x = rg_tensor_get_f64(c, 0);
  rg_tensor_free(c);
  return x;
}

/* The projection constant for an output of the given value's shape. */
static rg_variable *projection(rg_ctx *C, const rg_tensor *out, rg_dtype dt, uint64_t seed) {
  rg_tensor *p = rg_tensor_new(RG_FLOAT64, out->ndim, out->shape);
  if (!p) return NULL;
  int64_t n = rg_tensor_numel(p);
  for (int64_t i = 0; i < n; i++) rg_tensor_set_f64(p, i, 0.5 + next_unit(&seed));
  rg_tensor *q = rg_tensor_cast(p, dt);
  rg_tensor_free(p);
  rg_variable *k = q ? rg_constant(C, q) : NULL;
  rg_tensor_free(q);
  return k;
}

/* One output's value at the point, to size the projection. */
static rg_tensor *output_at(rg_ctx *C, int nin, rg_variable *const *inputs, rg_variable *out,
                            rg_tensor *const *values) {
  rg_function *f = rg_compile(C, nin, inputs, 1, &out, NULL);
  if (!f) return NULL;
  rg_tensor *t = NULL;
  if (rg_function_call(f, values, &t) != RG_OK) {
    rg_error(C, RG_ERR_EVAL, "verify_grad: the output failed: %s", rg_function_errmsg(f));
    t = NULL;
  }
  rg_function_free(f);
  return t;
}

static const char *input_label(const rg_variable *x, int i) {
  return x->name ? rg_gc_sprintf("'%s'", x->name) : rg_gc_sprintf("input %d", i);
}

/* Compares input i's analytic gradient g with finite differences. */
static int check_input(vg *v, int i, const rg_tensor *g, rg_verify_report *rep) {
  rg_tensor *x = v->point[i];
  double eps = v->o && v->o->eps > 0 ? v->o->eps : default_eps(v->coarse);
  double tol = v->o && v->o->tol > 0 ? v->o->tol : default_tol(v->coarse);
  int64_t n = rg_tensor_numel(x);
  int rc = RG_OK;
  for (int64_t j = 0; j < n && rc == RG_OK; j++) {
    double x0 = rg_tensor_get_f64(x, j);
    rg_tensor_set_f64(x, j, x0 + eps);
    double up = cost_at(v, &rc);
    rg_tensor_set_f64(x, j, x0 - eps);
    double down = rc == RG_OK ? cost_at(v, &rc) : NAN;
    rg_tensor_set_f64(x, j, x0);
    if (rc != RG_OK) return rc;
    double num = (up - down) / (2 * eps), ana = rg_tensor_get_f64(g, j);
    double abs_err = fabs(ana - num), rel = abs_err / (fabs(ana) + fabs(num) + 1e-300);
    if (abs_err > rep->max_abs) rep->max_abs = abs_err;
    if (rel > rep->max_rel) rep->max_rel = rel;
    rep->checked++;
    if ((abs_err > tol && rel > tol) || isnan(ana) != isnan(num))
      return rg_error(v->C, RG_ERR, "verify_grad: %s, element %lld: the gradient is %.9g, finite "
                      "differences give %.9g (absolute error %.3g, relative %.3g; tolerance %g)",
                      input_label(v->inputs[i], i), (long long)j, ana, num, abs_err, rel, tol);
  }
  return RG_OK;
}

static void free_all(vg *v, rg_function *gf, rg_tensor **grads, int ng) {
  for (int i = 0; v->point && i < v->nin; i++) rg_tensor_free(v->point[i]);
  for (int i = 0; i < ng; i++) rg_tensor_free(grads[i]);
  rg_function_free(v->cost_fn);
  rg_function_free(gf);
  rg_free(v->point);
  rg_free(grads);
}

int rg_verify_grad(rg_ctx *C, int nin, rg_variable *const *inputs, rg_variable *out,
                   rg_tensor *const *values, const rg_verify_opts *o, rg_verify_report *report) {
  rg_verify_report local = {0}, *rep = report ? report : &local;
  *rep = (rg_verify_report){0};
  if (!out || !rg_dtype_is_float(out->type->dtype))
    return rg_error(C, RG_ERR_TYPE, "verify_grad: the output must be a float value");
  rg_variable **gv = rg_gc_alloc((size_t)(nin > 0 ? nin : 1) * sizeof *gv);
  rg_grad_opts go = {.disconnected = RG_GRAD_DISCONNECTED_ZERO};
  /* symbolic problems (an op without a gradient) before running anything,
   * unless the output itself cannot be evaluated at the point (values of
   * other shapes than the graph was built for can fail both ways) */
  if (rg_grad(C, rg_sum(out, -1, NULL), nin, inputs, &go, gv) != RG_OK) {
    char *why = rg_gc_sprintf("%s", rg_errmsg(C));
    rg_tensor *t = output_at(C, nin, inputs, out, values);
    if (!t && rg_errcode(C) == RG_ERR_EVAL) return RG_ERR_EVAL;
    rg_tensor_free(t);
    return rg_error(C, RG_ERR_TYPE, "%s", why);
  }
  rg_tensor *o0 = output_at(C, nin, inputs, out, values);
  if (!o0) return rg_errcode(C);
  rg_variable *P = projection(C, o0, out->type->dtype, o && o->seed ? o->seed : 0x5eed);
  rg_tensor_free(o0);
  rg_variable *cost = rg_sum(rg_mul(out, P), -1, NULL);
  if (!cost || rg_grad(C, cost, nin, inputs, &go, gv) != RG_OK) return RG_ERR_TYPE;
  vg v = {.C = C, .nin = nin, .inputs = inputs, .o = o, .coarse = out->type->dtype};
  for (int i = 0; i < nin; i++)
    if (values[i] && values[i]->dtype == RG_FLOAT32) v.coarse = RG_FLOAT32;
  v.point = rg_calloc((size_t)(nin > 0 ? nin : 1), sizeof *v.point);
  rg_tensor **grads = rg_calloc((size_t)(nin > 0 ? nin : 1), sizeof *grads);
  rg_function *gf = rg_compile(C, nin, inputs, nin, gv, NULL);
  v.cost_fn = rg_compile(C, nin, inputs, 1, &cost, NULL);
  int rc = v.point && grads && gf && v.cost_fn ? RG_OK : RG_ERR;
  if (rc != RG_OK && !rg_errmsg(C)[0]) rg_error(C, RG_ERR_NOMEM, "verify_grad: out of memory");
  for (int i = 0; i < nin && rc == RG_OK; i++)
    if (!(v.point[i] = rg_tensor_copy(values[i]))) rc = rg_error(C, RG_ERR_NOMEM, "verify_grad: out of memory");
  if (rc == RG_OK && nin && rg_function_call(gf, v.point, grads) != RG_OK)
    rc = rg_error(C, RG_ERR, "verify_grad: the gradient failed: %s", rg_function_errmsg(gf));
  for (int i = 0; i < nin && rc == RG_OK; i++)
    if (rg_dtype_is_float(values[i]->dtype)) rc = check_input(&v, i, grads[i], rep);
  free_all(&v, gf, grads, grads ? nin : 0);
  return rc;
}
