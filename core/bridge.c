/*
 * bridge.c — graph variables as kanren terms, and kanren expressions as
 * graphs.
 *
 * A graph variable reaches kanren as a foreign term (rg_foreign) with the
 * hooks below; kanren never sees a core type.  A variable computed by a
 * node expands lazily, when unification meets structure, into the etuple
 * (head input ...) whose head is the op as a term (a symbol, or the list
 * (name param ...) for ops with parameters) and whose inputs are again
 * foreign terms: a pattern only expands as much of a graph as it looks at.
 * One output of a multi-output node expands to (nth K (head input ...)).
 * Inputs and constants are atomic: equal to themselves only; a constant is
 * also equal to a constant of equal value (same type and bytes) and, when
 * it holds a single element, to a kanren number or boolean of equal value,
 * so a rule pattern with the literal 1 matches a graph constant 1.0.  Two
 * computed variables meeting as atoms are equal when they compute the same
 * thing.
 *
 * Evaluation runs the other way: rg_graph_install_evaluator() makes every
 * etuple (or expression list) whose head names an op build a node through
 * rg_make_node(); numbers become weak literal constants.  A type error makes
 * the evaluation fail with the op's message, which a rewrite treats as "the
 * rule does not apply"; it never crashes.  Opaque ops are declared per
 * context with rg_graph_declare_opaque().
 */
#include "core/core-impl.h"

#include <math.h>

/* ------------------------------------------------------------------ foreign hooks */

static bool num_equal(const rg_variable *c, rg_term t) {
  if (!rg_is_constant(c) || rg_type_numel(c->type) != 1) return false;
  rg_dtype dt = c->type->dtype;
  switch (rg_kind_of(t)) {
  case RG_K_INT:
    if (rg_dtype_is_float(dt)) return rg_load_f64(dt, c->data) == (double)rg_int_value(t);
    return rg_load_i64(dt, c->data) == rg_int_value(t);
  case RG_K_FLOAT: return rg_load_f64(dt, c->data) == rg_float_value(t);
  case RG_K_BOOL: return dt == RG_BOOL && rg_load_i64(dt, c->data) == (t == RG_TRUE);
  default: return false;
  }
}

static bool same_value(const rg_variable *a, const rg_variable *b) {
  return rg_is_constant(a) && rg_is_constant(b) && rg_type_equal(a->type, b->type) &&
         !memcmp(a->data, b->data, (size_t)rg_type_numel(a->type) * rg_dtype_size(a->type->dtype));
}

static const rg_foreign_hooks var_hooks;

/* Two graph terms are equal when they compute the same thing (equal ops on
 * equal inputs, constants by value; rg_equal_computations walks
 * iteratively, so comparing deep graphs costs no C stack). */
static bool var_equal(void *self, rg_term other) {
  rg_variable *v = self;
  if (rg_is_foreign(other, &var_hooks)) {
    rg_variable *w = rg_foreign_ptr(other);
    if (v == w || same_value(v, w)) return true;
    return v->owner && w->owner && rg_equal_computations(1, &v, &w, 0, NULL, NULL);
  }
  return num_equal(v, other);
}

/* A one-element constant hashes as the number it equals (num_equal). */
static uint64_t number_hash(const rg_variable *c) {
  rg_dtype dt = c->type->dtype;
  if (dt == RG_BOOL) return rg_hash(rg_load_i64(dt, c->data) ? RG_TRUE : RG_FALSE);
  if (rg_dtype_is_float(dt)) return rg_hash(rg_float(rg_load_f64(dt, c->data)));
  return rg_hash(rg_int(rg_load_i64(dt, c->data)));
}

/* Consistent with var_equal (and with rg_equal against numbers):
 * computed variables hash by their node's op (shallow, so hashing never
 * walks a graph); one-element constants by their value as a number. */
static uint64_t var_hash(void *self) {
  const rg_variable *v = self;
  if (v->owner) return rgc_mix(v->owner->op->hash, (uint64_t)v->index);
  if (!rg_is_constant(v)) return (uint64_t)(uintptr_t)v >> 3;
  if (rg_type_numel(v->type) == 1) return number_hash(v);
  return rgc_hash_bytes(v->data, (size_t)rg_type_numel(v->type) * rg_dtype_size(v->type->dtype)) ^
         rg_type_hash(v->type);
}

static void var_print(void *self, FILE *f) {
  const rg_variable *v = self;
  if (rg_is_constant(v) && rg_type_numel(v->type) == 1 && v->type->ndim == 0) {
    rgc_fprint_elem(f, v->type->dtype, v->data);
  } else if (v->name && !rg_is_constant(v)) {
    fputs(v->name, f);
  } else {
    fprintf(f, "#<%s %s>", rg_is_constant(v) ? "constant" : v->owner ? "variable" : "input",
            rg_type_str(v->type));
  }
}

static rg_term var_as_etuple(void *self, void *ud) {
  const rg_variable *v = self;
  const rg_node *n = v->owner;
  if (!n) return NULL;
  rg_term small[8];
  rg_term *args = n->nin <= 8 ? small : rgk_alloc((size_t)n->nin * sizeof *args);
  for (int i = 0; i < n->nin; i++) args[i] = rg_var_term(n->inputs[i]);
  rg_term e = rg_etuple(rg_op_term(n->op), n->nin, args);
  if (n->nout == 1) return e;
  rg_term nth[2] = {rg_int(v->index), e};
  return rg_etuple(rg_symbol("nth"), 2, nth);
}

static const rg_foreign_hooks var_hooks = {
    .name = "graph-variable",
    .equal = var_equal,
    .hash = var_hash,
    .print = var_print,
    .as_etuple = var_as_etuple,
};

rg_term rg_var_term(rg_variable *v) { return v ? rg_foreign(&var_hooks, v, NULL) : NULL; }

rg_variable *rg_term_var(rg_term t) {
  return t && rg_is_foreign(t, &var_hooks) ? rg_foreign_ptr(t) : NULL;
}

rg_variable *rg_term_to_variable(rg_ctx *C, rg_term t) {
  rg_variable *v = rg_term_var(t);
  if (v) return v;
  switch (t ? rg_kind_of(t) : RG_K_OTHER) {
  case RG_K_INT: return rg_scalar_int(C, rg_int_value(t));
  case RG_K_FLOAT: return rg_scalar_float(C, rg_float_value(t));
  case RG_K_BOOL: return rg_scalar_bool(C, t == RG_TRUE);
  default:
    rg_error(C, RG_ERR_TYPE, "%s is not a graph variable or a number", t ? rg_to_string(t) : "NULL");
    return NULL;
  }
}

/* ------------------------------------------------------------------ evaluation */

/* The value of an applied op: the output, or the list of outputs. */
static rg_term node_value(const rg_node *n) {
  if (n->nout == 1) return rg_var_term(n->outputs[0]);
  rg_term l = RG_NIL;
  for (int k = n->nout - 1; k >= 0; k--) l = rg_cons(rg_var_term(n->outputs[k]), l);
  return l;
}

static rg_term apply_op(rg_ctx *C, const rg_op *op, int n, const rg_term *args) {
  rg_variable *small[8];
  rg_variable **in = n <= 8 ? small : rgk_alloc((size_t)n * sizeof *in);
  for (int i = 0; i < n; i++) {
    if (rg_is_pair(args[i]) && rg_term_var(rg_car(args[i]))) {
      rg_error(C, RG_ERR_TYPE, "%s: argument %d has several outputs; pick one with (nth K ...)",
               rg_op_name(op), i + 1);
      return NULL;
    }
    if (!(in[i] = rg_term_to_variable(C, args[i]))) {
      rg_error(C, RG_ERR_TYPE, "%s: argument %d: %s", rg_op_name(op), i + 1, rgk_strdup(rg_errmsg(C)));
      return NULL;
    }
  }
  rg_node *node = rg_make_node(C, op, n, in);
  return node ? node_value(node) : NULL;
}

static rg_term eval_nth(rg_ctx *C, int n, const rg_term *args) {
  if (n != 2 || rg_kind_of(args[0]) != RG_K_INT) {
    rg_error(C, RG_ERR_EVAL, "nth: expected (nth INDEX EXPR)");
    return NULL;
  }
  int64_t k = rg_int_value(args[0]), len = rg_list_length(args[1]);
  if (len < 0) { /* a single output */
    if (k == 0 && rg_term_var(args[1])) return args[1];
    rg_error(C, RG_ERR_EVAL, "nth: %s has no output %lld", rg_to_string(args[1]), (long long)k);
    return NULL;
  }
  if (k < 0 || k >= len) {
    rg_error(C, RG_ERR_EVAL, "nth: no output %lld (the expression has %lld)", (long long)k, (long long)len);
    return NULL;
  }
  rg_term l = args[1];
  while (k-- > 0) l = rg_cdr(l);
  return rg_car(l);
}

static rg_term graph_eval(rg_ctx *C, rg_term head, int n, const rg_term *args, void *ud) {
  if (rg_kind_of(head) == RG_K_SYMBOL && !strcmp(rg_symbol_name(head), "nth")) return eval_nth(C, n, args);
  const rg_op *op = rg_op_from_term(C, head);
  return op ? apply_op(C, op, n, args) : NULL;
}

static rg_term opaque_eval(rg_ctx *C, rg_term head, int n, const rg_term *args, void *ud) {
  return apply_op(C, ud, n, args);
}

void rg_graph_install_evaluator(rg_ctx *C) { rg_set_default_evaluator(C, graph_eval, NULL); }

void rg_graph_declare_opaque(rg_ctx *C, const rg_op *op) {
  if (op && op->code == RG_OP_OPAQUE) rg_register_evaluator(C, rg_symbol(op->name), opaque_eval, (void *)op);
}

const rg_op *rg_graph_op_of(rg_ctx *C, rg_term head) {
  const rg_op *op = rg_op_from_term(C, head);
  rg_evaluator fn;
  void *ud;
  if (!op && rg_kind_of(head) == RG_K_SYMBOL && rg_evaluator_of(C, head, &fn, &ud) && fn == opaque_eval) {
    rg_clear_error(C);
    return ud;
  }
  return op;
}

rg_variable *rg_graph_eval(rg_ctx *C, rg_term t) {
  rg_graph_install_evaluator(C);
  rg_term v = rg_eval_etuple(C, t);
  if (!v) return NULL;
  if (rg_is_pair(v)) {
    rg_error(C, RG_ERR_TYPE, "the expression has several outputs; pick one with (nth K ...)");
    return NULL;
  }
  return rg_term_to_variable(C, v);
}
