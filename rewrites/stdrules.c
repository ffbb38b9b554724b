/*
 * stdrules.c — the standard rules written in C: those that need types,
 * shapes or values to decide (the purely structural ones are patterns in
 * std.kn).
 *
 * Every rule here builds its replacement with the graph constructors and
 * hands it to `give`, which makes it stand exactly for the node's output:
 * a cast where only the dtype differs, a broadcast (alloc to the node's
 * inferred shape) where a removed operand contributed dimensions, and no
 * rewrite at all where the type still would not be a subtype.  So a rule
 * never proposes a rewrite the driver would reject, and never changes a
 * value's type.  Casts are placed where the original computation converted:
 * when an n-ary node is rebuilt from fewer operands, operands are first
 * converted to the node's dtype (NumPy computes in the result dtype), so
 * integer overflow behaves as before.
 *
 * Rules follow Aesara's canonicalize / stabilize / specialize rewrites
 * (written anew, see docs/rules.md for the list).  Each rule is registered
 * with the ops it tracks, its tags, a one-line description, and example
 * terms (?x are leaves) from which `relgraph check-rules --std` builds
 * random graphs to check it numerically.
 */
#include "rewrites/rewrite-impl.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ looking at the graph */

/* The node computing v when it applies op c, else NULL. */
static rg_node *node_of(const rg_variable *v, rg_opcode c) {
  return v && v->owner && v->owner->op->code == c && v->owner->nout == 1 ? v->owner : NULL;
}

/* An intermediate a rule may rewrite away: used once (outputs count). */
static bool used_once(const rg_variable *v) { return v->nclients <= 1; }

#define CONST_SCAN_LIMIT 4096

/* Whether v is a constant every element of which equals x. */
static bool const_is(const rg_variable *v, double x) {
  if (!v || !rg_is_constant(v)) return false;
  int64_t n = rg_type_numel(v->type);
  if (n <= 0 || n > CONST_SCAN_LIMIT) return false;
  size_t sz = rg_dtype_size(v->type->dtype);
  const char *p = v->data;
  for (int64_t i = 0; i < n; i++)
    if (rg_load_f64(v->type->dtype, p + i * (int64_t)sz) != x) return false;
  return true;
}

static bool all_const(const rg_variable *v, bool truth) {
  if (!v || !rg_is_constant(v)) return false;
  int64_t n = rg_type_numel(v->type);
  if (n <= 0 || n > CONST_SCAN_LIMIT) return false;
  size_t sz = rg_dtype_size(v->type->dtype);
  for (int64_t i = 0; i < n; i++)
    if ((rg_load_f64(v->type->dtype, (const char *)v->data + i * (int64_t)sz) != 0) != truth)
      return false;
  return true;
}

static rg_dtype out_dtype(const rg_node *node) { return node->outputs[0]->type->dtype; }
static bool float_node(const rg_node *node) { return rg_dtype_is_float(out_dtype(node)); }

/* ------------------------------------------------------------------ building replacements */

/* A constructor's result; a failed construction clears its error. */
static rg_variable *built(rg_ctx *C, rg_variable *v) {
  if (!v) rg_clear_error(C);
  return v;
}

/* v converted to dtype dt (v itself when it has it). */
static rg_variable *to_dtype(rg_ctx *C, rg_variable *v, rg_dtype dt) {
  if (!v || v->type->dtype == dt) return v;
  return built(C, rg_cast(v, dt));
}

#define DIM_WALK_LIMIT 64

/* Whether a shape expression (arithmetic over shape_i of variables) takes
 * the shape of `old`, which would make a replacement of old depend on
 * itself.  Shape expressions are small: a walk longer than DIM_WALK_LIMIT
 * nodes answers yes, to stay safe and cheap. */
static bool dims_mention(int n, rg_variable *const *dims, const rg_variable *old) {
  const rg_variable *stack[DIM_WALK_LIMIT];
  int sp = 0, visited = 0;
  for (int i = 0; i < n; i++) {
    if (sp == DIM_WALK_LIMIT) return true;
    stack[sp++] = dims[i];
  }
  while (sp) {
    const rg_variable *v = stack[--sp];
    if (v == old) return true;
    if (!v->owner) continue;
    if (++visited > DIM_WALK_LIMIT) return true;
    rg_opcode c = v->owner->op->code;
    if (c == RG_OP_SHAPE_I || c == RG_OP_SHAPE) {
      if (v->owner->inputs[0] == old) return true;
      continue;
    }
    for (int k = 0; k < v->owner->nin; k++) {
      if (sp == DIM_WALK_LIMIT) return true;
      stack[sp++] = v->owner->inputs[k];
    }
  }
  return false;
}

/* v broadcast to the shape the node's output has (from its inputs). */
static rg_variable *broadcast_like(rg_ctx *C, rg_variable *v, const rg_node *node) {
  const rg_variable *o = node->outputs[0];
  int nd = o->type->ndim;
  if (v->type->ndim > nd) return NULL;
  rg_variable **dims = rg_infer_shape(C, node, 0);
  if (!dims) return built(C, NULL);
  if (dims_mention(nd, dims, o)) return NULL;
  return built(C, rg_allocate(v, nd, dims));
}

/* Whether a value of type t has the shape of the node's output whenever
 * both are computed: a subtype (or one on the host standing for a value on
 * a device, rg_type_stands_for), and no dimension of static size 1 where
 * the output's may be larger (another operand broadcast it). */
static bool same_shape(const rg_type *t, const rg_type *want) {
  if (!rg_type_stands_for(t, want)) return false;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] == 1 && want->shape[d] != 1) return false;
  return true;
}

/* Makes v stand exactly for the node's (single) output: the same dtype (a
 * cast) and the same shape (a broadcast).  NULL if that is impossible. */
static rg_variable *fit(rg_ctx *C, rg_variable *v, const rg_node *node) {
  const rg_type *want = node->outputs[0]->type;
  v = to_dtype(C, v, want->dtype);
  if (!v) return NULL;
  if (same_shape(v->type, want)) return v;
  v = broadcast_like(C, v, node);
  return v && same_shape(v->type, want) ? v : NULL;
}

/* The end of every rule: fits the replacement and proposes it. */
static int give(rg_rewrite_run *run, rg_node *node, rg_variable **out, rg_variable *v) {
  if (!v) {
    rg_clear_error(run->C);
    return 0;
  }
  v = fit(run->C, v, node);
  if (!v || v == node->outputs[0]) return 0;
  out[0] = v;
  return 1;
}

/* Whether every node reading output k of `node` still type-checks with v
 * in its place.  A type that tells more can make a reader's static checks
 * stricter than its run time (a Scan rejects a sequence of 0 rows, which
 * runs when the Scan takes no step), so a refinement asks the readers. */
static bool readers_accept(rg_ctx *C, const rg_node *node, int k, rg_variable *v) {
  const rg_variable *o = node->outputs[k];
  for (uint32_t c = 0; c < o->nclients; c++) {
    const rg_node *r = o->clients[c].node;
    if (!r) continue; /* a graph output */
    rg_variable *in[r->nin > 0 ? r->nin : 1];
    memcpy(in, r->inputs, (size_t)r->nin * sizeof *in);
    in[o->clients[c].index] = v;
    if (!rg_make_node(C, r->op, r->nin, in)) return rg_clear_error(C), false;
  }
  return true;
}

/* Hands over v, the node's own value computed another way (the same
 * elements in the same shape), whose type may know sizes the node's does
 * not: a static 1 included, which `give` would take for a broadcast. */
static int give_same(rg_rewrite_run *run, rg_node *node, rg_variable **out, rg_variable *v) {
  if (!v) rg_clear_error(run->C);
  if (!v || v == node->outputs[0] || !rg_type_stands_for(v->type, node->outputs[0]->type)) return 0;
  if (!rg_type_equal(v->type, node->outputs[0]->type) && !readers_accept(run->C, node, 0, v)) return 0;
  out[0] = v;
  return 1;
}

/* A constant of the node's dtype, broadcast by `give` to its shape. */
static rg_variable *filled(rg_ctx *C, const rg_node *node, double x) {
  return built(C, rg_constant_scalar(C, out_dtype(node), x));
}

/* op applied to xs[0..n) in the node's dtype: one operand is itself;
 * several are converted to the node's dtype first when computing them in
 * their own would give another dtype (NumPy computes in the result dtype). */
static rg_variable *rebuild(rg_ctx *C, const rg_node *node, int n, rg_variable **xs) {
  if (n == 1) return xs[0];
  const rg_op *op = rg_op_get(node->op->code);
  rg_variable *v = built(C, rg_apply(C, op, n, xs));
  if (!v || v->type->dtype == out_dtype(node)) return v;
  for (int i = 0; i < n; i++)
    if (!(xs[i]->flags & RG_VAR_WEAK)) xs[i] = to_dtype(C, xs[i], out_dtype(node));
  for (int i = 0; i < n; i++)
    if (!xs[i]) return NULL;
  return built(C, rg_apply(C, op, n, xs));
}

/* -v, without a double negation. */
static rg_variable *negate(rg_ctx *C, rg_variable *v) {
  rg_node *n = node_of(v, RG_OP_NEG);
  return n ? n->inputs[0] : built(C, rg_neg(v));
}

/* A scratch copy of the node's inputs. */
static rg_variable **inputs_copy(const rg_node *node) {
  rg_variable **v = rg_gc_alloc((size_t)(node->nin ? node->nin : 1) * sizeof *v);
  if (node->nin) memcpy(v, node->inputs, (size_t)node->nin * sizeof *v);
  return v;
}

/* ------------------------------------------------------------------ canonicalize: neutral and absorbing elements */

/* Drops the inputs equal to `neutral` everywhere (x + 0, x * 1); every
 * input dropped leaves the neutral element itself. */
/* A constant every element of which is x, or a fill with it (second(a,
 * x): x in a's shape, which `give` restores where it mattered). */
static bool neutral_is(const rg_variable *v, double x) {
  const rg_node *f = node_of(v, RG_OP_SECOND);
  return const_is(v, x) || (f && const_is(f->inputs[1], x));
}

static int drop_neutral(rg_rewrite_run *run, rg_node *node, rg_variable **out, double neutral) {
  rg_variable **keep = inputs_copy(node);
  int k = 0;
  for (int i = 0; i < node->nin; i++)
    if (!neutral_is(node->inputs[i], neutral)) keep[k++] = node->inputs[i];
  if (k == node->nin) return 0;
  if (k == 0) return give(run, node, out, filled(run->C, node, neutral));
  return give(run, node, out, rebuild(run->C, node, k, keep));
}

static int add_zero(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  return drop_neutral(run, node, out, 0);
}

static int mul_one(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  return drop_neutral(run, node, out, 1);
}

/* x * 0 -> zeros of the product's shape and dtype. */
static int mul_zero(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  for (int i = 0; i < node->nin; i++)
    if (const_is(node->inputs[i], 0)) return give(run, node, out, filled(run->C, node, 0));
  return 0;
}

/* add(x) and mul(x) of one operand are x. */
static int single_operand(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  return node->nin == 1 ? give(run, node, out, node->inputs[0]) : 0;
}

/* x - 0 -> x;  0 - x -> -x;  x - x -> zeros. */
static int sub_simplify(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  rg_variable *x = node->inputs[0], *y = node->inputs[1];
  if (const_is(y, 0)) return give(run, node, out, x);
  if (x == y) return give(run, node, out, filled(C, node, 0));
  if (const_is(x, 0)) return give(run, node, out, negate(C, to_dtype(C, y, out_dtype(node))));
  return 0;
}

/* x / 1 -> x (x // 1 -> x for integers: floor division of a float by 1
 * is floor);  0 / x -> zeros, for x not a constant (0 / 0 is NaN, which
 * folding the constants gives). */
static int div_simplify(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  bool floor_div = node->op->code == RG_OP_INT_DIV;
  if (const_is(node->inputs[1], 1) && !(floor_div && float_node(node)))
    return give(run, node, out, node->inputs[0]);
  if (const_is(node->inputs[0], 0) && node->op->code == RG_OP_TRUE_DIV && !rg_is_constant(node->inputs[1]))
    return give(run, node, out, filled(run->C, node, 0));
  return 0;
}

/* x ** 1 -> x;  x ** 0 -> ones. */
static int pow_simplify(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  if (const_is(node->inputs[1], 1)) return give(run, node, out, node->inputs[0]);
  if (const_is(node->inputs[1], 0)) return give(run, node, out, filled(run->C, node, 1));
  return 0;
}

/* ------------------------------------------------------------------ canonicalize: cancelling */

/* The factors of a product: the inputs of a float mul used once, else
 * itself (an integer product may wrap around: cancelling a factor of it
 * would change the value). */
static rg_variable **factors(rg_variable *v, int *n) {
  rg_node *m = node_of(v, RG_OP_MUL);
  if (m && used_once(v) && float_node(m)) {
    *n = m->nin;
    return inputs_copy(m);
  }
  rg_variable **f = rg_gc_alloc(sizeof *f);
  f[0] = v;
  *n = 1;
  return f;
}

/* Removes the factors common to both lists (by identity); how many. */
static int cancel_common(rg_variable **a, int *na, rg_variable **b, int *nb) {
  int removed = 0;
  for (int i = 0; i < *na; i++)
    for (int j = 0; j < *nb; j++) {
      if (a[i] != b[j] || rg_is_constant(a[i])) continue;
      a[i--] = a[--*na];
      b[j] = b[--*nb];
      removed++;
      break;
    }
  return removed;
}

/* (a * b) / b -> a, (a * b) / (b * c) -> a / c, x / x -> 1. */
static int div_cancel(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  int nn, nd;
  rg_variable **num = factors(node->inputs[0], &nn), **den = factors(node->inputs[1], &nd);
  if (!cancel_common(num, &nn, den, &nd)) return 0;
  if (!nn && !nd) return give(run, node, out, filled(C, node, 1));
  /* two or more factors left on top: they came from a mul */
  rg_variable *top = nn ? rebuild(C, nn > 1 ? node->inputs[0]->owner : node, nn, num)
                        : rg_scalar_int(C, 1);
  if (!nd) return give(run, node, out, top);
  rg_variable *bottom = nd == 1 ? den[0] : built(C, rg_mul_n(nd, den));
  return give(run, node, out, top && bottom ? built(C, rg_true_div(top, bottom)) : NULL);
}

/* ------------------------------------------------------------------ canonicalize: n-ary forms */

/* Whether input i of node is spliced into it: the same op, used once
 * (by node), of the same dtype. */
static bool splices(const rg_node *node, int i) {
  rg_node *in = node_of(node->inputs[i], node->op->code);
  return in && used_once(node->inputs[i]) && out_dtype(in) == out_dtype(node);
}

/* Splices inputs that are the same op, used once and of the same dtype,
 * and theirs in turn: ((a + b) + c) + d -> a + b + c + d.  A node that its
 * only reader will splice is left to it, so a chain of n adds becomes one
 * node in one rewrite of n inputs, not n rewrites of 2, 3, ..., n inputs
 * (quadratic: a 10^4-add chain took seconds and a gigabyte). */
static int flatten_nary(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  const rg_variable *o = node->outputs[0];
  if (o->nclients == 1 && o->clients[0].node && splices(o->clients[0].node, o->clients[0].index)) return 0;
  bool any = false;
  for (int i = 0; i < node->nin && !any; i++) any = splices(node, i);
  if (!any) return 0;
  /* the leaves, left to right: a stack of (node, next input) frames (the
   * nodes and the leaves are the graph's: the heap may hold them) */
  rg_words frames = {.a = &rg_heap_abort}, leaves = {.a = &rg_heap_abort};
  (void)rg_words_push(&frames, (uintptr_t)node), (void)rg_words_push(&frames, 0);
  while (frames.n) {
    rg_node *x = (rg_node *)frames.v[frames.n - 2];
    int i = (int)frames.v[frames.n - 1];
    if (i == x->nin) {
      frames.n -= 2;
      continue;
    }
    frames.v[frames.n - 1]++;
    if (splices(x, i)) (void)rg_words_push(&frames, (uintptr_t)x->inputs[i]->owner), (void)rg_words_push(&frames, 0);
    else (void)rg_words_push(&leaves, (uintptr_t)x->inputs[i]);
  }
  int n = (int)leaves.n;
  rg_variable **xs = rg_gc_alloc((size_t)n * sizeof *xs);
  memcpy(xs, leaves.v, (size_t)n * sizeof *xs);
  rg_words_free(&frames), rg_words_free(&leaves);
  return give(run, node, out, built(run->C, rg_apply(run->C, node->op, n, xs)));
}

/* Whether x is not finite, or (tiny) zero or subnormal in float dtype dt. */
static bool extreme(rg_dtype dt, double x, bool tiny) {
  return tiny ? fabs(x) < (dt == RG_FLOAT32 ? FLT_MIN : DBL_MIN) : !isfinite(x);
}

/* Whether some element of constant c is extreme (above) in dt. */
static bool has_extreme(const rg_variable *c, rg_dtype dt, bool tiny) {
  size_t size = rg_dtype_size(c->type->dtype);
  for (int64_t i = 0, n = rg_type_numel(c->type); i < n; i++)
    if (extreme(dt, rg_load_f64(c->type->dtype, (const char *)c->data + (size_t)i * size), tiny)) return true;
  return false;
}

/* Whether e, constants combined in double (a product when prod), stands
 * for them applied one by one in float dtype dt: it does not overflow to
 * an infinity there, nor underflow to a subnormal or (a product) to zero,
 * unless a constant combined was such a value already.  ((x * 1e30) *
 * 1e30 is 1e30 for x = 1e-30 in float32, but 1e60 is inf there, and 0 *
 * inf NaN at x = 0; 1e-30 * 1e-15 is a subnormal with a few bits left.)
 * Smaller differences are the rounding any reassociation changes. */
static bool combination_fits(rg_dtype dt, double e, bool prod, bool inf_given, bool tiny_given) {
  if (dt == RG_FLOAT32) e = (double)(float)e;
  if (!isfinite(e)) return inf_given;
  if (e == 0) return !prod || tiny_given;
  return !extreme(dt, e, true) || tiny_given;
}

/* combination_fits for every element of val, the node's constants cs
 * combined. */
static bool same_in_dtype(const rg_node *node, int n, rg_variable **cs, const rg_tensor *val) {
  rg_dtype dt = out_dtype(node);
  if (!rg_dtype_is_float(dt)) return true; /* integers wrap, and wrapping commutes */
  bool inf_given = false, tiny_given = false;
  for (int i = 0; i < n; i++) inf_given |= has_extreme(cs[i], dt, false), tiny_given |= has_extreme(cs[i], dt, true);
  for (int64_t i = 0, m = rg_tensor_numel(val); i < m; i++)
    if (!combination_fits(dt, rg_tensor_get_f64(val, i), node->op->code == RG_OP_MUL, inf_given, tiny_given))
      return false;
  return true;
}

/* The value of constants combined by the node's op, through the run's
 * evaluator; a combination of weak literals stays a weak literal.  NULL
 * when they are better left apart (same_in_dtype). */
static rg_variable *combine_constants(rg_rewrite_run *run, const rg_node *node, int n,
                                      rg_variable **cs) {
  rg_ctx *C = run->C;
  if (float_node(node)) /* weak integers in a float sum or product are that float, as NumPy takes them */
    for (int i = 0; i < n; i++) {
      int64_t v;
      if ((cs[i]->flags & RG_VAR_WEAK) && !rg_dtype_is_float(cs[i]->type->dtype) && rg_constant_get_i64(cs[i], &v))
        cs[i] = rg_scalar_float(C, (double)v);
    }
  rg_node *tmp = rg_make_node(C, rg_op_get(node->op->code), n, cs);
  if (!tmp) return built(C, NULL);
  rg_tensor *val = NULL;
  char err[256];
  if (run->opts.fold(tmp, &val, err, sizeof err) != RG_OK) return NULL;
  if (!same_in_dtype(node, n, cs, val)) {
    rg_tensor_free(val);
    return NULL;
  }
  bool weak = true;
  for (int i = 0; i < n; i++) weak = weak && (cs[i]->flags & RG_VAR_WEAK);
  rg_variable *v = NULL;
  if (!weak) v = rg_constant(C, val);
  else if (rg_dtype_is_float(val->dtype)) v = rg_scalar_float(C, rg_tensor_get_f64(val, 0));
  else if (val->dtype == RG_BOOL) v = rg_scalar_bool(C, rg_tensor_get_i64(val, 0) != 0);
  else v = rg_scalar_int(C, rg_tensor_get_i64(val, 0));
  rg_tensor_free(val);
  return built(C, v);
}

/* Constants first, several of them combined into one (2 * x * 3 -> 6 * x):
 * a canonical order that lets merge find equal sums and products.  Only
 * weak literals, or constants already of the node's dtype, are combined
 * (weak integers in a float node as floats), and floats only where
 * same_in_dtype says the combination stands for them. */
static int constants_first(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable **cs = inputs_copy(node), **xs = inputs_copy(node);
  int nc = 0, nx = 0, combinable = 0;
  bool ordered = true;
  for (int i = 0; i < node->nin; i++) {
    rg_variable *v = node->inputs[i];
    if (!rg_is_constant(v)) {
      xs[nx++] = v;
      continue;
    }
    ordered = ordered && nx == 0;
    cs[nc++] = v;
    combinable += (v->flags & RG_VAR_WEAK) || v->type->dtype == out_dtype(node);
  }
  bool combine = nc >= 2 && combinable == nc && run->opts.fold;
  rg_variable *c = combine ? combine_constants(run, node, nc, cs) : NULL;
  if (ordered && !c) return 0;
  if (combine && !c && float_node(node)) return 0; /* left apart: their order stays too */
  if (c) {
    cs[0] = c;
    nc = 1;
  }
  rg_variable **all = rg_gc_alloc((size_t)node->nin * sizeof *all);
  memcpy(all, cs, (size_t)nc * sizeof *all);
  memcpy(all + nc, xs, (size_t)nx * sizeof *all);
  if (nc + nx == 1) return give(run, node, out, all[0]);
  return give(run, node, out, built(run->C, rg_apply(run->C, node->op, nc + nx, all)));
}

/* ------------------------------------------------------------------ canonicalize: structure */

/* Composes two dimshuffles: result dim i is outer[i] of the inner result. */
static int dimshuffle_merge(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_node *in = node_of(node->inputs[0], RG_OP_DIMSHUFFLE);
  if (!in) return 0;
  int n = node->op->nints;
  int64_t order[RG_MAX_NDIM];
  bool identity = n == in->inputs[0]->type->ndim;
  for (int i = 0; i < n; i++) {
    int64_t k = node->op->ints[i];
    order[i] = k < 0 ? -1 : in->op->ints[k];
    identity = identity && order[i] == i;
  }
  if (identity) return give(run, node, out, in->inputs[0]);
  return give(run, node, out, built(run->C, rg_dimshuffle(in->inputs[0], n, order)));
}

/* A dimshuffle keeping every dimension in order does nothing. */
static int dimshuffle_useless(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable *x = node->inputs[0];
  if (node->op->nints != x->type->ndim) return 0;
  for (int i = 0; i < node->op->nints; i++)
    if (node->op->ints[i] != i) return 0;
  return give(run, node, out, x);
}

/* ------------------------------------------------------------------ chains of views */

/* Where the elements of a view lie in its base's C order: a size and a
 * stride (in elements) per dimension.  Invariant: every size is static
 * and positive. */
typedef struct layout {
  int nd;
  int64_t shape[RG_MAX_NDIM], stride[RG_MAX_NDIM];
} layout;

static bool static_positive(const rg_type *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] <= 0) return false;
  return true;
}

static void layout_contiguous(layout *l, const rg_type *t) {
  l->nd = t->ndim;
  int64_t s = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    l->shape[d] = t->shape[d];
    l->stride[d] = s;
    s *= t->shape[d];
  }
}

static void layout_dimshuffle(layout *l, const rg_op *op) {
  layout o = *l;
  l->nd = op->nints;
  for (int i = 0; i < op->nints; i++) {
    int64_t k = op->ints[i];
    l->shape[i] = k < 0 ? 1 : o.shape[k];
    l->stride[i] = k < 0 ? 0 : o.stride[k];
  }
}

/* The layout of l reshaped to t's shape without moving an element
 * (rg_reshape_strides); false when a reshape there copies. */
static bool layout_reshape(layout *l, const rg_type *t) {
  int64_t st[RG_MAX_NDIM];
  if (!rg_reshape_strides(l->nd, l->shape, l->stride, t->ndim, t->shape, 1, st)) return false;
  l->nd = t->ndim;
  memcpy(l->shape, t->shape, (size_t)t->ndim * sizeof *l->shape);
  memcpy(l->stride, st, (size_t)t->ndim * sizeof *l->stride);
  return true;
}

static bool layout_is_contiguous(const layout *l) {
  int64_t s = 1;
  for (int d = l->nd - 1; d >= 0; d--) {
    if (l->shape[d] != 1 && l->stride[d] != s) return false;
    s *= l->shape[d];
  }
  return true;
}

/* A chain of reshapes and dimshuffles (two or more, static shapes) that
 * leaves every element of its base in C order is one reshape of the base
 * (or the base): x.T reshaped and transposed back, the shape juggling of
 * pushed-out gradient products.  Each reshape of a non-contiguous view in
 * the chain would copy; the single reshape copies at most once. */
static int view_chain(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_node *chain[16];
  int n = 0;
  rg_variable *base = node->outputs[0];
  while (n < 16 && base->owner && base->owner->nout == 1 && static_positive(base->type) &&
         (base->owner->op->code == RG_OP_RESHAPE || base->owner->op->code == RG_OP_DIMSHUFFLE)) {
    chain[n++] = base->owner;
    base = base->owner->inputs[0];
  }
  if (n < 2 || !static_positive(base->type)) return 0;
  layout l;
  layout_contiguous(&l, base->type);
  for (int i = n - 1; i >= 0; i--) {
    if (chain[i]->op->code == RG_OP_DIMSHUFFLE) layout_dimshuffle(&l, chain[i]->op);
    else if (!layout_reshape(&l, chain[i]->outputs[0]->type)) return 0;
  }
  if (!layout_is_contiguous(&l)) return 0;
  const rg_type *t = node->outputs[0]->type;
  if (rg_type_equal(base->type, t)) return give_same(run, node, out, base);
  return give_same(run, node, out, built(run->C, rg_reshape_to(base, t->ndim, t->shape)));
}

/* A reduction over axes of static size 1 reads one element per result:
 * the input with those axes dropped, in the result's dtype. */
static int reduce_size_one(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable *x = node->inputs[0];
  const rg_type *t = x->type;
  const rg_op *op = node->op;
  if (node->nin != 1 || op->all_axes || op->nints == 0) return 0;
  bool reduced[RG_MAX_NDIM] = {false};
  for (int i = 0; i < op->nints; i++) {
    if (op->ints[i] < 0 || op->ints[i] >= t->ndim || t->shape[op->ints[i]] != 1) return 0;
    reduced[op->ints[i]] = true;
  }
  int64_t order[RG_MAX_NDIM];
  int k = 0;
  for (int d = 0; d < t->ndim; d++)
    if (!reduced[d]) order[k++] = d;
  return give(run, node, out, built(run->C, rg_dimshuffle(x, k, order)));
}

/* x[i] or x[a:b] (step 1) along axis 0 of join{0}(p0, p1, ...) where the
 * rows picked all lie in one part pk of static length: pk[i - o] or
 * pk[a - o : b - o], o the rows before pk; the other entries as they were.
 * Only the part is read (a gradient's mit-mot buffer, zeros joined to
 * zeros, of which a loop reads row 0). */
static int subtensor_join(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_node *j = node_of(node->inputs[0], RG_OP_JOIN);
  const rg_op *op = node->op;
  if (!j || node->nin != 1 || op->nints < 4 || j->op->ints[0] != 0) return 0;
  int64_t n = node->inputs[0]->type->shape[0];
  const int64_t *w = op->ints;
  int64_t lo, hi; /* rows [lo, hi) picked, in the joined tensor */
  if (n < 0) return 0;
  if (w[0] == RG_IDX_INDEX) {
    lo = w[1] < 0 ? w[1] + n : w[1], hi = lo + 1;
  } else {
    if (w[3] != RG_IDX_NONE && w[3] != 1) return 0;
    hi = rg_slice_indices(n, w[1] != RG_IDX_NONE, w[1], w[2] != RG_IDX_NONE, w[2], 1, &lo);
    hi += lo;
  }
  if (lo < 0 || hi <= lo || hi > n) return 0;
  int64_t o = 0;
  for (int k = 0; k < j->nin; k++) {
    int64_t len = j->inputs[k]->type->shape[0];
    if (len < 0) return 0;
    if (lo >= o && hi <= o + len) {
      rg_index e[RG_MAX_NDIM];
      memcpy(e, op->ints, (size_t)op->nints * sizeof(int64_t));
      if (w[0] == RG_IDX_INDEX) e[0].a = lo - o;
      else e[0].a = lo - o, e[0].b = hi - o, e[0].c = RG_IDX_NONE;
      rg_variable *part = j->inputs[k];
      return give_same(run, node, out, built(run->C, rg_apply(run->C, rg_op_subtensor(RG_OP_SUBTENSOR, op->nints / 4, e), 1, &part)));
    }
    o += len;
  }
  return 0;
}

/* second(a, v)[idx] with v a scalar: v in the shape of a[idx], so only the
 * slice's size is filled (a zero buffer of which a loop reads one row). */
static int subtensor_fill(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_node *f = node_of(node->inputs[0], RG_OP_SECOND);
  if (!f || f->inputs[1]->type->ndim != 0 || !rg_type_equal(f->inputs[0]->type, f->outputs[0]->type))
    return 0;
  rg_variable *in[node->nin];
  memcpy(in, node->inputs, (size_t)node->nin * sizeof *in);
  in[0] = f->inputs[0];
  rg_variable *part = built(run->C, rg_apply(run->C, node->op, node->nin, in));
  rg_variable *args[2] = {part, f->inputs[1]};
  return give(run, node, out, part ? built(run->C, rg_apply(run->C, f->op, 2, args)) : NULL);
}

rg_variable *rgr_subtensor_static(rg_ctx *C, const rg_node *node) {
  const rg_op *op = node->op;
  int first = op->code == RG_OP_SUBTENSOR ? 1 : 2, nent = op->nints / 4, k = first, kept = first;
  rg_index e[nent > 0 ? nent : 1];
  rg_variable *in[node->nin];
  for (int i = 0; i < first; i++) in[i] = node->inputs[i];
  bool any = false;
  for (int i = 0; i < nent; i++) {
    int64_t *w = &e[i].kind;
    memcpy(w, op->ints + 4 * i, 4 * sizeof *w);
    for (int j = 1; j <= (w[0] == RG_IDX_INDEX ? 1 : 3); j++) {
      if (w[j] != RG_IDX_INPUT) continue;
      int64_t v;
      rg_variable *x = node->inputs[k++];
      if (rg_is_constant(x) && rg_constant_get_i64(x, &v) && v > RG_IDX_INPUT) w[j] = v, any = true;
      else in[kept++] = x;
    }
  }
  return any ? rg_apply(C, rg_op_subtensor(op->code, nent, e), kept, in) : NULL;
}

/* Index inputs of the subtensor family that are constants become the
 * op's own parameters, so the result's type knows the sizes they give
 * (x[0:n] with n a constant: a static length, which fusion and the
 * rules after it need). */
static int subtensor_constant_index(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable *r = rgr_subtensor_static(run->C, node);
  if (!r) {
    rg_clear_error(run->C);
    return 0;
  }
  return give_same(run, node, out, built(run->C, r));
}

/* Whether type t knows every dimension `was` knows, and more. */
static bool refines(const rg_type *t, const rg_type *was) {
  if (rg_type_equal(t, was) || !rg_type_is_subtype(t, was)) return false;
  for (int d = 0; d < t->ndim; d++)
    if (was->shape[d] == RG_DIM_UNKNOWN && t->shape[d] != RG_DIM_UNKNOWN) return true;
  return false;
}

/* A node typed before a rewrite told its inputs' sizes (a constant index
 * made static, a slice of a known length) still says `?` where its inputs
 * now say more: the same op rebuilt on the same inputs knows the sizes, so
 * the rules after it (useless slices and reshapes, fusion, the memory
 * plan) see static shapes.  Outputs keep their dtypes; types only narrow. */
static int refine_types(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  bool unknown = false;
  for (int k = 0; k < node->nout && !unknown; k++)
    for (int d = 0; d < node->outputs[k]->type->ndim; d++)
      if (node->outputs[k]->type->shape[d] == RG_DIM_UNKNOWN) unknown = true;
  if (!unknown) return 0;
  /* the types first: most nodes tried learn nothing, and need no node */
  const rg_type *few[8], **types = node->nout <= 8 ? few : rg_gc_alloc(sizeof *types * (size_t)node->nout);
  int nout = rg_node_types(run->C, node->op, node->nin, node->inputs, node->nout, types);
  if (nout < 0) rg_clear_error(run->C);
  if (nout != node->nout) return 0;
  bool narrower = false;
  for (int k = 0; k < node->nout; k++) {
    const rg_type *t = types[k], *was = node->outputs[k]->type;
    if (!rg_type_is_subtype(t, was)) return 0;
    narrower |= refines(t, was);
  }
  if (!narrower) return 0;
  rg_node *m = rg_make_node(run->C, node->op, node->nin, node->inputs);
  if (!m) {
    rg_clear_error(run->C);
    return 0;
  }
  for (int k = 0; k < node->nout; k++)
    if (!readers_accept(run->C, node, k, m->outputs[k])) return 0;
  for (int k = 0; k < node->nout; k++) out[k] = m->outputs[k];
  return 1;
}

/* shape_i{k}(x) where x's type knows dimension k, shape(x) where it
 * knows them all: the sizes as constants, so shape arithmetic folds (a
 * reshape to (32 * shape_i{0}(x), 256) gets a static shape). */
static int shape_static(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  const rg_type *t = node->inputs[0]->type;
  if (node->op->code == RG_OP_SHAPE_I) {
    int64_t n = t->shape[node->op->ints[0]];
    return n == RG_DIM_UNKNOWN ? 0 : give(run, node, out, rg_constant_scalar_int(run->C, RG_INT64, n));
  }
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] == RG_DIM_UNKNOWN) return 0;
  int64_t nd = t->ndim;
  return give(run, node, out, rg_constant_data(run->C, RG_INT64, 1, &nd, t->shape));
}

/* Whether slice bound w of dimension d of x (an integer, omitted, or the
 * node's input *next, RG_IDX_INPUT) is the start (role 0), the stop (1) or
 * a step of 1 (2) of every element in order. */
static bool bound_useless(const rg_node *node, int64_t w, int *next, int role, int d) {
  const rg_variable *x = node->inputs[0];
  int64_t n = x->type->shape[d];
  if (w == RG_IDX_NONE) return true;
  if (w == RG_IDX_INPUT) {
    const rg_variable *v = node->inputs[(*next)++];
    if (role != 1) return const_is(v, role == 0 ? 0 : 1);
    const rg_node *s = node_of(v, RG_OP_SHAPE_I);
    return s && s->inputs[0] == x && s->op->ints[0] == d;
  }
  return role == 0 ? w == 0 || (n >= 0 && w <= -n) : role == 1 ? n >= 0 && w >= n : w == 1;
}

/* x[:], x[0:n] over a dimension of static size n, x[0:shape_i{0}(x)], ...:
 * every element in order, x itself. */
static int subtensor_useless(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  const rg_op *op = node->op;
  int next = 1;
  for (int i = 0; i < op->nints / 4; i++) {
    const int64_t *w = op->ints + 4 * i;
    if (w[0] == RG_IDX_INDEX) return 0;
    for (int role = 0; role < 3; role++)
      if (!bound_useless(node, w[1 + role], &next, role, i)) return 0;
  }
  return give(run, node, out, node->inputs[0]);
}

/* cast(x) to x's own dtype; cast(cast(x, d1), d2) -> cast(x, d2) when the
 * first conversion loses nothing. */
static int cast_simplify(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable *x = node->inputs[0];
  if (x->type->dtype == node->op->dtype) return give(run, node, out, x);
  rg_node *in = node_of(x, RG_OP_CAST);
  if (!in || !rg_dtype_exact_cast(in->inputs[0]->type->dtype, in->op->dtype)) return 0;
  return give(run, node, out, in->inputs[0]);
}

/* log(exp(x)) -> x. */
static int log_exp(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_node *e = node_of(node->inputs[0], RG_OP_EXP);
  return e ? give(run, node, out, e->inputs[0]) : 0;
}

/* switch(c, a, b) with a constant condition. */
static int switch_const(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable *c = node->inputs[0];
  if (all_const(c, true)) return give(run, node, out, node->inputs[1]);
  if (all_const(c, false)) return give(run, node, out, node->inputs[2]);
  return 0;
}

/* ------------------------------------------------------------------ stabilize */

/* The input of the node equal to x everywhere, when there is exactly one. */
static int index_of_const(const rg_node *node, double x) {
  int at = -1;
  for (int i = 0; i < node->nin; i++)
    if (const_is(node->inputs[i], x)) {
      if (at >= 0) return -1;
      at = i;
    }
  return at;
}

/* log(1 + x) -> log1p(x);  log(1 - x) -> log1p(-x). */
static int log1p_rule(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  rg_variable *arg = node->inputs[0];
  rg_node *a = node_of(arg, RG_OP_ADD);
  if (a && used_once(arg) && float_node(a)) {
    int one = index_of_const(a, 1);
    if (one < 0 || a->nin < 2) return 0;
    rg_variable **rest = inputs_copy(a);
    rest[one] = rest[a->nin - 1];
    rg_variable *x = to_dtype(C, rebuild(C, a, a->nin - 1, rest), out_dtype(a));
    return give(run, node, out, x ? built(C, rg_log1p(x)) : NULL);
  }
  rg_node *s = node_of(arg, RG_OP_SUB);
  if (s && used_once(arg) && float_node(s) && const_is(s->inputs[0], 1)) {
    rg_variable *x = to_dtype(C, s->inputs[1], out_dtype(s));
    return give(run, node, out, x ? built(C, rg_log1p(negate(C, x))) : NULL);
  }
  return 0;
}

/* The other operand of a binary node when one is the constant c. */
static rg_variable *other_than(const rg_node *node, double c) {
  if (node->nin != 2) return NULL;
  if (const_is(node->inputs[0], c)) return node->inputs[1];
  if (const_is(node->inputs[1], c)) return node->inputs[0];
  return NULL;
}

/* exp(x) - 1 -> expm1(x) (also exp(x) + -1). */
static int expm1_rule(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_variable *e;
  if (node->op->code == RG_OP_SUB)
    e = const_is(node->inputs[1], 1) ? node->inputs[0] : NULL;
  else
    e = other_than(node, -1);
  rg_node *en = node_of(e, RG_OP_EXP);
  if (!en || !used_once(e)) return 0;
  return give(run, node, out, built(run->C, rg_expm1(en->inputs[0])));
}

/* The argument of sigmoid, converted to the dtype sigmoid computes in. */
static rg_variable *sigmoid_arg(rg_ctx *C, rg_variable *v) {
  rg_node *s = node_of(v, RG_OP_SIGMOID);
  return s ? to_dtype(C, s->inputs[0], out_dtype(s)) : NULL;
}

/* log(sigmoid(x)) -> -softplus(-x);  log(1 - sigmoid(x)) -> -softplus(x). */
static int log_sigmoid(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  rg_variable *arg = node->inputs[0], *x = sigmoid_arg(C, arg);
  if (x) return give(run, node, out, negate(C, built(C, rg_softplus(negate(C, x)))));
  rg_node *s = node_of(arg, RG_OP_SUB);
  if (!s || !used_once(arg) || !const_is(s->inputs[0], 1)) return 0;
  x = sigmoid_arg(C, s->inputs[1]);
  return x ? give(run, node, out, negate(C, built(C, rg_softplus(x)))) : 0;
}

/* log1p(-sigmoid(x)) -> -softplus(x). */
static int log1p_neg_sigmoid(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_node *n = node_of(node->inputs[0], RG_OP_NEG);
  rg_variable *x = n && used_once(node->inputs[0]) ? sigmoid_arg(run->C, n->inputs[0]) : NULL;
  return x ? give(run, node, out, negate(run->C, built(run->C, rg_softplus(x)))) : 0;
}

/* 1 - sigmoid(x) -> sigmoid(-x). */
static int one_minus_sigmoid(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  if (!const_is(node->inputs[0], 1) || !used_once(node->inputs[1])) return 0;
  rg_variable *x = sigmoid_arg(run->C, node->inputs[1]);
  return x ? give(run, node, out, built(run->C, rg_sigmoid(negate(run->C, x)))) : 0;
}

/* ------------------------------------------------------------------ specialize: powers and products */

/* x ** 2 -> sqr(x), x ** 0.5 -> sqrt(x), x ** -1 -> 1 / x (the base
 * converted to the power's dtype first). */
static int pow_specialize(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  rg_variable *e = node->inputs[1], *x = to_dtype(C, node->inputs[0], out_dtype(node));
  if (!x) return 0;
  if (const_is(e, 2)) return give(run, node, out, built(C, rg_sqr(x)));
  if (!float_node(node)) return 0;
  if (const_is(e, 0.5)) return give(run, node, out, built(C, rg_sqrt(x)));
  if (const_is(e, -1)) return give(run, node, out, built(C, rg_true_div(rg_scalar_int(C, 1), x)));
  return 0;
}

/* (-1) * x -> -x (for products of any length). */
static int mul_neg_one(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  int at = index_of_const(node, -1);
  if (at < 0 || node->nin < 2) return 0;
  rg_variable **rest = inputs_copy(node);
  rest[at] = rest[node->nin - 1];
  rg_variable *p = to_dtype(C, rebuild(C, node, node->nin - 1, rest), out_dtype(node));
  return give(run, node, out, p ? negate(C, p) : NULL);
}

/* The first input slot i of node whose value, not a constant, comes
 * again, and the next slot j holding it; false if none.  Past a few
 * factors the slots are counted in a table (a product of 10^5 factors, a
 * chain's gradient, is not compared pair by pair). */
static bool repeated_input(const rg_node *node, int *i, int *j) {
  if (node->nin <= 8) { /* the common product: pairs, with no table to make */
    for (int a = 0; a < node->nin; a++)
      for (int b = a + 1; b < node->nin; b++)
        if (node->inputs[a] == node->inputs[b] && !rg_is_constant(node->inputs[a])) return *i = a, *j = b, true;
    return false;
  }
  rg_map seen;
  if (rg_map_init(&seen, &rg_heap_abort, (size_t)node->nin)) abort();
  for (int k = 0; k < node->nin; k++) {
    const rg_variable *x = node->inputs[k];
    uint64_t *c = rg_map_get(&seen, (uint64_t)(uintptr_t)x);
    if (rg_map_put(&seen, (uint64_t)(uintptr_t)x, c ? *c + 1 : 1)) abort();
  }
  bool found = false;
  for (int k = 0; k < node->nin && !found; k++) {
    const rg_variable *x = node->inputs[k];
    found = *(uint64_t *)rg_map_get(&seen, (uint64_t)(uintptr_t)x) > 1 && !rg_is_constant(x);
    if (found) *i = k;
  }
  rg_map_free(&seen);
  for (int k = found ? *i + 1 : node->nin; k < node->nin; k++)
    if (node->inputs[k] == node->inputs[*i]) return *j = k, true;
  return false;
}

/* x * x * y -> sqr(x) * y in products of three or more (binary ones are
 * the pattern rule mul-self-to-sqr). */
static int mul_square(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  int i, j;
  if (node->nin < 3 || !repeated_input(node, &i, &j)) return 0;
  rg_variable *x = node->inputs[i], **rest = inputs_copy(node);
  rest[j] = rest[node->nin - 1];
  rest[i] = built(C, rg_sqr(to_dtype(C, x, out_dtype(node))));
  if (!rest[i]) return 0;
  return give(run, node, out, built(C, rg_mul_n(node->nin - 1, rest)));
}

/* ------------------------------------------------------------------ specialize: BLAS */

/* Scalar constants and empty accumulators of a BLAS dtype. */
static rg_variable *scalar_of(rg_ctx *C, rg_dtype dt, double x) {
  return built(C, rg_constant_scalar(C, dt, x));
}

static rg_variable *empty_like_dims(rg_ctx *C, rg_dtype dt, int n, rg_variable *const *dims) {
  return built(C, rg_allocate_empty(C, dt, n, dims));
}

static rg_variable *zeros_dims(rg_ctx *C, rg_dtype dt, int n, rg_variable *const *dims) {
  rg_variable *z = scalar_of(C, dt, 0);
  return z ? built(C, rg_allocate(z, n, dims)) : NULL;
}

static bool blas_pair(const rg_variable *a, const rg_variable *b) {
  rg_dtype dt = a->type->dtype;
  return rg_dtype_is_float(dt) && b->type->dtype == dt;
}

/* dot(x, y) of a column and a row -> ger(zeros, 1, x[:, 0], y[0, :]). */
static rg_variable *dot_as_ger(rg_ctx *C, rg_variable *x, rg_variable *y) {
  int64_t first = 0, second = 1;
  rg_variable *xv = built(C, rg_dimshuffle(x, 1, &first)), *yv = built(C, rg_dimshuffle(y, 1, &second));
  if (!xv || !yv) return NULL;
  rg_variable *dims[2] = {rg_shape_of(C, x)[0], rg_shape_of(C, y)[1]};
  rg_variable *z = zeros_dims(C, x->type->dtype, 2, dims);
  return z ? built(C, rg_ger(z, scalar_of(C, x->type->dtype, 1), xv, yv)) : NULL;
}

/* dot -> gemm (matrices), gemv (a matrix and a vector), ger (a column and
 * a row), with an uninitialised accumulator and beta = 0. */
static int dot_to_blas(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  rg_variable *x = node->inputs[0], *y = node->inputs[1];
  if (!blas_pair(x, y)) return 0;
  rg_dtype dt = x->type->dtype;
  int nx = x->type->ndim, ny = y->type->ndim;
  rg_variable *one = scalar_of(C, dt, 1), *zero = scalar_of(C, dt, 0);
  if (nx == 2 && ny == 2 && x->type->shape[1] == 1 && y->type->shape[0] == 1)
    return give(run, node, out, dot_as_ger(C, x, y));
  if (nx == 2 && ny == 2) {
    rg_variable *dims[2] = {rg_shape_of(C, x)[0], rg_shape_of(C, y)[1]};
    return give(run, node, out, built(C, rg_gemm(empty_like_dims(C, dt, 2, dims), one, x, y, zero)));
  }
  if (nx == 2 && ny == 1) {
    rg_variable *dims[1] = {rg_shape_of(C, x)[0]};
    return give(run, node, out, built(C, rg_gemv(empty_like_dims(C, dt, 1, dims), one, x, y, zero)));
  }
  if (nx == 1 && ny == 2) {
    rg_variable *dims[1] = {rg_shape_of(C, y)[1]};
    rg_variable *yt = built(C, rg_transpose(y));
    return give(run, node, out, built(C, rg_gemv(empty_like_dims(C, dt, 1, dims), one, yt, x, zero)));
  }
  return 0;
}

/* outer(x, y) -> ger(zeros, 1, x, y). */
static int outer_to_ger(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  rg_variable *x = node->inputs[0], *y = node->inputs[1];
  if (!blas_pair(x, y)) return 0;
  rg_variable *dims[2] = {rg_shape_of(C, x)[0], rg_shape_of(C, y)[0]};
  rg_variable *z = zeros_dims(C, x->type->dtype, 2, dims);
  rg_variable *g = z ? built(C, rg_ger(z, scalar_of(C, x->type->dtype, 1), x, y)) : NULL;
  return give(run, node, out, g);
}

/* A BLAS form whose accumulator does not count: gemm or gemv with beta 0,
 * ger adding to zeros.  Used once, so it may be folded into its user. */
typedef struct blas_form {
  rg_node *node;
  rg_variable *alpha;
} blas_form;

static bool is_zeros(const rg_variable *v) {
  rg_node *a = node_of(v, RG_OP_ALLOC);
  return const_is(v, 0) || (a && const_is(a->inputs[0], 0));
}

static bool free_form(rg_variable *v, blas_form *f) {
  if (!v || !v->owner || !used_once(v)) return false;
  rg_node *n = v->owner;
  switch (n->op->code) {
  case RG_OP_GEMM: case RG_OP_GEMV:
    if (!const_is(n->inputs[4], 0)) return false;
    break;
  case RG_OP_GER:
    if (!is_zeros(n->inputs[0])) return false;
    break;
  default: return false;
  }
  f->node = n;
  f->alpha = n->inputs[1];
  return true;
}

/* a * b for BLAS scalars (a constant when both are). */
static rg_variable *scalar_mul(rg_ctx *C, rg_dtype dt, rg_variable *a, rg_variable *b) {
  double x, y;
  if (a->type->ndim == 0 && b->type->ndim == 0 && rg_constant_get_f64(a, &x) && rg_constant_get_f64(b, &y)) {
    bool inf = extreme(dt, x, false) || extreme(dt, y, false), tiny = extreme(dt, x, true) || extreme(dt, y, true);
    return !rg_dtype_is_float(dt) || combination_fits(dt, x * y, true, inf, tiny) ? scalar_of(C, dt, x * y) : NULL;
  }
  return to_dtype(C, built(C, rg_mul(a, b)), dt);
}

/* The form with another accumulator, alpha and beta (beta NULL for ger). */
static rg_variable *reform(rg_ctx *C, const blas_form *f, rg_variable *acc, rg_variable *alpha,
                           rg_variable *beta) {
  rg_node *n = f->node;
  if (!acc || !alpha) return NULL;
  rg_variable *in[5];
  memcpy(in, n->inputs, (size_t)n->nin * sizeof *in);
  in[0] = acc;
  in[1] = alpha;
  if (n->nin == 5) {
    if (!beta) return NULL;
    in[4] = beta;
  } else if (beta && !const_is(beta, 1)) {
    return NULL;
  }
  return built(C, rg_apply(C, rg_op_get(n->op->code), n->nin, in));
}

/* A scalar factor: a tensor of no dimensions. */
static bool is_scalar(const rg_variable *v) { return v->type->ndim == 0; }

/* Splits an accumulator term into (z, beta): b * z -> (z, b), else (t, 1). */
static void split_scaled(rg_ctx *C, rg_dtype dt, rg_variable *t, rg_variable **z, rg_variable **beta) {
  rg_node *m = node_of(t, RG_OP_MUL);
  *z = t;
  *beta = scalar_of(C, dt, 1);
  if (!m || m->nin != 2 || !used_once(t)) return;
  for (int i = 0; i < 2; i++)
    if (is_scalar(m->inputs[i]) && !is_scalar(m->inputs[1 - i]) &&
        m->inputs[1 - i]->type->dtype == dt && rg_dtype_can_cast(m->inputs[i]->type->dtype, dt)) {
      *z = m->inputs[1 - i];
      *beta = m->inputs[i];
      return;
    }
}

/* The accumulator must have exactly the result's type (or live on the
 * host where the result is on a device: a folded constant), and the form
 * the result's shape: neither may broadcast against the other. */
static bool same_type(const rg_variable *z, const blas_form *f, const rg_node *node) {
  const rg_type *want = node->outputs[0]->type;
  return rg_type_equal_or_host(z->type, want) && same_shape(f->node->outputs[0]->type, want);
}

/* A value varying along the last axis only (every other dimension of
 * static size 1): that axis as a vector, else NULL. */
static rg_variable *row_of(rg_ctx *C, rg_variable *z) {
  const rg_type *t = z->type;
  if (t->ndim == 0) return NULL;
  for (int d = 0; d + 1 < t->ndim; d++)
    if (t->shape[d] != 1) return NULL;
  if (t->ndim == 1) return z;
  int64_t last = t->ndim - 1;
  return built(C, rg_dimshuffle(z, 1, &last));
}

/* z + form -> the form accumulating into z (b * z gives beta = b).  A z
 * that broadcasts along the form's leading axis (a bias row added to a
 * product), even through a reshape of the product that keeps its last
 * axis (the LSTM's x W^T for all steps, as rows of steps), becomes the
 * accumulator broadcast: one fill the product accumulates into, instead
 * of a pass adding z to the product afterwards. */
static int blas_add(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  blas_form f;
  for (int i = 0; i < node->nin; i++) {
    rg_node *reshape = node_of(node->inputs[i], RG_OP_RESHAPE);
    if (!free_form(reshape && used_once(node->inputs[i]) ? reshape->inputs[0] : node->inputs[i], &f)) continue;
    rg_dtype dt = out_dtype(f.node);
    rg_variable **rest = inputs_copy(node);
    rest[i] = rest[node->nin - 1];
    rg_variable *t = node->nin == 1 ? NULL : rebuild(C, node, node->nin - 1, rest), *z, *beta;
    if (!t) return 0;
    split_scaled(C, dt, t, &z, &beta);
    if (!reshape && same_type(z, &f, node)) return give(run, node, out, reform(C, &f, z, f.alpha, beta));
    /* z a row broadcast over the product (gemm), its last axis kept */
    const rg_type *ft = f.node->outputs[0]->type, *nt = node->outputs[0]->type;
    rg_variable *row = f.node->nin == 5 && ft->ndim == 2 && z->type->dtype == dt ? row_of(C, z) : NULL;
    int64_t n = row ? ft->shape[1] : -1; /* ft has two dimensions where row is set */
    if (!row || n < 0 || row->type->shape[0] != n || nt->shape[nt->ndim - 1] != n || nt->dtype != dt) return 0;
    rg_variable *acc = broadcast_like(C, row, f.node);
    rg_variable *g = acc ? reform(C, &f, acc, f.alpha, beta) : NULL;
    if (g && reshape) {
      rg_variable **rin = inputs_copy(reshape);
      rin[0] = g;
      g = built(C, rg_apply(C, reshape->op, reshape->nin, rin));
    }
    return give(run, node, out, g);
  }
  return 0;
}

/* z - form -> alpha negated;  form - z -> beta = -1 (gemm, gemv). */
static int blas_sub(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  blas_form f;
  rg_variable *a = node->inputs[0], *b = node->inputs[1];
  if (free_form(b, &f) && same_type(a, &f, node)) {
    rg_dtype dt = out_dtype(f.node);
    rg_variable *alpha = scalar_mul(C, dt, scalar_of(C, dt, -1), f.alpha);
    return give(run, node, out, reform(C, &f, a, alpha, scalar_of(C, dt, 1)));
  }
  if (free_form(a, &f) && same_type(b, &f, node) && f.node->nin == 5)
    return give(run, node, out, reform(C, &f, b, f.alpha, scalar_of(C, out_dtype(f.node), -1)));
  return 0;
}

/* c * form -> alpha * c (c a scalar that casts safely);  -form likewise. */
static int blas_scale(rg_rewrite_run *run, rg_node *node, rg_variable **out, void *ud) {
  rg_ctx *C = run->C;
  blas_form f;
  if (node->op->code == RG_OP_NEG) {
    if (!free_form(node->inputs[0], &f)) return 0;
    rg_dtype dt = out_dtype(f.node);
    rg_variable *alpha = scalar_mul(C, dt, scalar_of(C, dt, -1), f.alpha);
    return give(run, node, out, reform(C, &f, f.node->inputs[0], alpha, f.node->nin == 5 ? f.node->inputs[4] : NULL));
  }
  if (node->nin != 2) return 0;
  for (int i = 0; i < 2; i++) {
    rg_variable *c = node->inputs[i];
    if (!free_form(node->inputs[1 - i], &f) || !is_scalar(c)) continue;
    rg_dtype dt = out_dtype(f.node);
    if (out_dtype(node) != dt) return 0;
    rg_variable *alpha = scalar_mul(C, dt, c, f.alpha);
    return give(run, node, out, reform(C, &f, f.node->inputs[0], alpha, f.node->nin == 5 ? f.node->inputs[4] : NULL));
  }
  return 0;
}

/* ------------------------------------------------------------------ the table */

typedef struct c_rule {
  const char *name;
  rg_node_rewrite_fn fn;
  rg_opcode tracks[5];
  int ntracks;
  const char *describe;
  const char *examples; /* terms with ?x leaves, for check-rules */
} c_rule;

#define T1(a) {RG_OP_##a}, 1
#define T2(a, b) {RG_OP_##a, RG_OP_##b}, 2

static const c_rule canonicalize[] = {
    {"add-zero", add_zero, T1(ADD), "x + 0 -> x", "(add ?x 0) (add 0 ?x ?y)"},
    {"mul-zero", mul_zero, T1(MUL), "x * 0 -> zeros of the product's shape", "(mul ?x 0) (mul ?x ?y 0.0)"},
    {"mul-one", mul_one, T1(MUL), "x * 1 -> x", "(mul ?x 1) (mul 1 ?x ?y)"},
    {"nary-single", single_operand, T2(ADD, MUL), "add(x) -> x, mul(x) -> x", "(add ?x) (mul ?x)"},
    {"sub-simplify", sub_simplify, T1(SUB), "x - 0 -> x, 0 - x -> -x, x - x -> zeros",
     "(sub ?x 0) (sub 0 ?x) (sub ?x ?x)"},
    {"div-simplify", div_simplify, T2(TRUE_DIV, INT_DIV), "x / 1 -> x, 0 / x -> zeros",
     "(true_div ?x 1) (int_div ?x 1) (true_div 0 ?x)"},
    {"div-cancel", div_cancel, T1(TRUE_DIV), "(a * b) / b -> a, (a * b) / (b * c) -> a / c, x / x -> 1",
     "(true_div (mul ?a ?b) ?b) (true_div (mul ?a ?b) (mul ?b ?c)) (true_div ?x ?x)"},
    {"pow-simplify", pow_simplify, T1(POW), "x ** 1 -> x, x ** 0 -> ones", "(pow ?x 1) (pow ?x 0)"},
    {"add-flatten", flatten_nary, T1(ADD), "(a + b) + c -> a + b + c", "(add (add ?a ?b) ?c)"},
    {"mul-flatten", flatten_nary, T1(MUL), "(a * b) * c -> a * b * c", "(mul (mul ?a ?b) ?c)"},
    {"constants-first", constants_first, T2(ADD, MUL),
     "constants first in sums and products, combined: 2 * x * 3 -> 6 * x",
     "(mul ?x 2) (add ?x 1 2) (mul 2 ?x 3)"},
    {"dimshuffle-merge", dimshuffle_merge, T1(DIMSHUFFLE), "x.T.T -> x, dimshuffles composed",
     "((dimshuffle 1 0) ((dimshuffle 1 0) ?x)) ((dimshuffle 0 x) ((dimshuffle 1 0) ?x))"},
    {"dimshuffle-useless", dimshuffle_useless, T1(DIMSHUFFLE), "a dimshuffle keeping every dimension in order -> x",
     "((dimshuffle 0 1) ?x)"},
    {"view-chain", view_chain, T2(RESHAPE, DIMSHUFFLE),
     "reshapes and dimshuffles that keep their base's element order -> one reshape",
     "((reshape 1) ((dimshuffle 1 0) ((dimshuffle 1 0) ?x)) ((make_vector int64) -1)) "
     "((reshape 1) ((dimshuffle 1 x 0) ((dimshuffle 1 0) ?x)) ((make_vector int64) -1))"},
    {"reduce-size-one", reduce_size_one, {RG_OP_SUM, RG_OP_PROD, RG_OP_MAX, RG_OP_MIN, RG_OP_MEAN}, 5,
     "a reduction over axes of static size 1 -> the input without those axes",
     "((sum 0) ((dimshuffle x 0 1) ?x)) ((max 1) ((dimshuffle 0 x) ?x))"},
    {"subtensor-join", subtensor_join, T1(SUBTENSOR), "join{0}(a, b)[i] -> a[i] or b[i - len(a)], slices alike",
     "((subtensor 0) ((join 0) ?x ?y)) ((subtensor (1 2)) ((join 0) ?x ?y ?z))"},
    {"subtensor-fill", subtensor_fill, T1(SUBTENSOR), "second(a, v)[idx] -> second(a[idx], v) for a scalar v",
     "((subtensor 0) (second ?x 0.0)) ((subtensor (0 1)) (second ?x 2))"},
    {"cast-simplify", cast_simplify, T1(CAST), "cast to x's own dtype -> x, lossless cast chains merged",
     "((cast float64) ((cast float32) ?x)) ((cast float32) ?x)"},
    {"subtensor-constant-index", subtensor_constant_index, {RG_OP_SUBTENSOR, RG_OP_INC_SUBTENSOR, RG_OP_SET_SUBTENSOR}, 3,
     "x[0:k] with k a constant input -> x[0:k] with k a parameter (static sizes)", "((subtensor (0 ?)) ?x 1)"},
    {"shape-static", shape_static, T2(SHAPE_I, SHAPE), "shape_i / shape of statically known sizes -> constants",
     "((shape_i 0) ?x) (shape ?x)"},
    {"refine-types", refine_types, {0}, 0,
     "a node whose inputs now know sizes it says are unknown -> the same node with the sizes",
     "((subtensor (none none -1)) ((subtensor (0 ?)) ?x 2))"},
    {"subtensor-useless", subtensor_useless, T1(SUBTENSOR), "x[:], x[0:n] over all n rows -> x",
     "((subtensor (none none none)) ?x) ((subtensor (0 ?)) ?x ((shape_i 0) ?x))"},
    {"log-exp", log_exp, T1(LOG), "log(exp(x)) -> x", "(log (exp ?x))"},
    {"switch-const", switch_const, T1(SWITCH), "switch with a constant condition -> the branch taken",
     "(switch #t ?a ?b) (switch #f ?a ?b)"},
};

static const c_rule stabilize[] = {
    {"log1p", log1p_rule, T1(LOG), "log(1 + x) -> log1p(x), log(1 - x) -> log1p(-x)",
     "(log (add 1 ?x)) (log (add ?x 1 ?y)) (log (sub 1 ?x))"},
    {"expm1", expm1_rule, T2(SUB, ADD), "exp(x) - 1 -> expm1(x)", "(sub (exp ?x) 1) (add -1 (exp ?x))"},
    {"log-sigmoid", log_sigmoid, T1(LOG), "log(sigmoid(x)) -> -softplus(-x), log(1 - sigmoid(x)) -> -softplus(x)",
     "(log (sigmoid ?x)) (log (sub 1 (sigmoid ?x)))"},
    {"log1p-neg-sigmoid", log1p_neg_sigmoid, T1(LOG1P), "log1p(-sigmoid(x)) -> -softplus(x)",
     "(log1p (neg (sigmoid ?x)))"},
    {"one-minus-sigmoid", one_minus_sigmoid, T1(SUB), "1 - sigmoid(x) -> sigmoid(-x)", "(sub 1 (sigmoid ?x))"},
};

static const c_rule specialize[] = {
    {"dot-to-blas", dot_to_blas, T1(DOT), "dot -> gemm, gemv or ger (beta = 0)",
     "(dot ?A ?B) (dot ?A ?x) (dot ?x ?A)"},
    {"outer-to-ger", outer_to_ger, T1(OUTER), "outer(x, y) -> ger(zeros, 1, x, y)", "(outer ?x ?y)"},
    {"blas-add", blas_add, T1(ADD), "z + gemm(_, a, x, y, 0) -> gemm(z, a, x, y, 1), b * z -> beta b; gemv, ger alike; a row z broadcast into the accumulator",
     "(add ?z (gemm ?E ?a ?A ?B 0.0)) (add (mul ?b ?z) (gemv ?e ?a ?A ?x 0.0)) "
     "(add ?Z (ger (alloc 0.0 3 2) ?a ?x ?y))"},
    {"blas-sub", blas_sub, T1(SUB), "z - gemm(...) -> alpha negated, gemm(...) - z -> beta = -1",
     "(sub ?z (gemm ?E ?a ?A ?B 0.0)) (sub (gemv ?e ?a ?A ?x 0.0) ?z)"},
    {"blas-scale", blas_scale, T2(MUL, NEG), "c * gemm(...) -> alpha * c, -gemm(...) -> -alpha",
     "(mul ?c (gemm ?E ?a ?A ?B 0.0)) (neg (gemv ?e ?a ?A ?x 0.0)) "
     "(mul (ger (alloc 0.0 3 2) ?a ?x ?y) ?c)"},
    {"pow-specialize", pow_specialize, T1(POW), "x ** 2 -> sqr(x), x ** 0.5 -> sqrt(x), x ** -1 -> 1 / x",
     "(pow ?x 2) (pow ?x 2.0) (pow ?x 0.5) (pow ?x -1.0)"},
    {"mul-neg-one", mul_neg_one, T1(MUL), "(-1) * x -> -x", "(mul -1 ?x) (mul ?x -1 ?y)"},
    {"mul-square", mul_square, T1(MUL), "x * x * y -> sqr(x) * y", "(mul ?x ?y ?x)"},
};

#define COUNT(a) (int)(sizeof a / sizeof a[0])

static void register_all(rg_rewrite_db *db, const c_rule *rules, int n, const char *tags) {
  for (int i = 0; i < n; i++) {
    const c_rule *r = &rules[i];
    rg_rewriter *rw = rg_node_rewriter(r->name, r->ntracks, r->tracks, r->fn, NULL);
    rw->describe = r->describe;
    rw->examples = r->examples;
    int rc = rg_db_register(db, r->name, rw, 0, tags);
    (void)rc;
    assert(rc == RG_OK);
  }
}

void rgr_register_c_rules(rg_rewrite_db *canon, rg_rewrite_db *stab, rg_rewrite_db *spec) {
  register_all(canon, canonicalize, COUNT(canonicalize), "fast_run fast_compile canonicalize");
  register_all(stab, stabilize, COUNT(stabilize), "fast_run stabilize");
  register_all(spec, specialize, COUNT(specialize), "fast_run specialize");
}
