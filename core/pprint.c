/*
 * pprint.c — human-readable printing: Aesara's infix style (pprint) and the
 * indented debug print (dprint).
 *
 * pprint writes each output as an expression: binary and n-ary operators
 * infix and fully parenthesised ((A @ x) + (A @ y)), (x + y + z), unary
 * minus -x, transposes x.T, indexing x[1:3, i], other ops as calls
 * exp(x), op1(x, y), with parameters in braces sum{0}(x).  A subexpression
 * used several times is printed inline while small; a large shared one is
 * bound to a name on a line of its own (t1 = ...) and referred to, so the
 * output is linear in the graph, never exponential.  A node of several
 * outputs used more than once in all, when large or with a long label (a
 * loop, a fused kernel), is bound as a whole (t1 = scan{...}(x, h0)) and
 * its outputs are t1[0], t1[1] ..., so its label is written once.
 * Expressions are printed from an explicit stack: any depth.
 *
 * dprint is Aesara's debugprint: one line per variable, indented under the
 * node using it, with [id X] tags; a node already shown is not expanded
 * again.  Indentation is capped (deeper levels are numbered), so a chain of
 * a million nodes prints in linear space.
 */
#include "core/core-impl.h"

#include <stdlib.h>

#define SHARED_INLINE_MAX 12   /* shared subexpressions up to this size stay inline */
#define SHARED_LABEL_MAX 40    /* a node of several outputs with a longer label is bound when shared */
#define INDENT_MAX 32
#define BRIEF_LABEL_MAX 200    /* rg_pprint_brief cuts an op's label (a Scan's step) here */
#define INNER_TEXT_MAX 65536   /* an inner graph's text in a label is cut here */

/* ------------------------------------------------------------------ labels */

static const char *infix_of(rg_opcode code) {
  switch (code) {
  case RG_OP_ADD: return "+";
  case RG_OP_MUL: return "*";
  case RG_OP_SUB: return "-";
  case RG_OP_TRUE_DIV: return "/";
  case RG_OP_INT_DIV: return "//";
  case RG_OP_MOD: return "%";
  case RG_OP_POW: return "**";
  case RG_OP_DOT: return "@";
  case RG_OP_LT: return "<";
  case RG_OP_GT: return ">";
  case RG_OP_LE: return "<=";
  case RG_OP_GE: return ">=";
  case RG_OP_EQ: return "==";
  case RG_OP_NEQ: return "!=";
  case RG_OP_AND: return "&";
  case RG_OP_OR: return "|";
  case RG_OP_XOR: return "^";
  default: return NULL;
  }
}

static bool is_transpose(const rg_op *op, int ndim) {
  if (op->code != RG_OP_DIMSHUFFLE || op->nints != ndim || ndim < 2) return false;
  for (int i = 0; i < ndim; i++)
    if (op->ints[i] != ndim - 1 - i) return false;
  return true;
}

char *rgc_pprint_inner(const rg_fgraph *g);

/* "name" or "name{p,q}" from the op's parameter terms. */
const char *rgc_op_label(const rg_op *op) {
  if (op->cls->label) return op->cls->label(op);
  if (op->inner) return rgk_sprintf("%s{%s}", op->cls->name, rgc_pprint_inner(op->inner));
  rg_term ps = op->code == RG_OP_OPAQUE ? RG_NIL : op->cls->params_term(op);
  if (ps == RG_NIL && op->code == RG_OP_OPAQUE) return op->name;
  /* an empty parameter list where the bare name means another op: a
   * reduction over no axes is sum{}, the bare sum reduces every axis */
  if (ps == RG_NIL) return rg_is_pair(rg_op_term(op)) ? rgk_sprintf("%s{}", op->cls->name) : op->cls->name;
  char *s = rgk_strdup("");
  for (; rg_is_pair(ps); ps = rg_cdr(ps))
    s = rgk_sprintf("%s%s%s", s, *s ? "," : "", rg_to_string(rg_car(ps)));
  return rgk_sprintf("%s{%s}", rg_op_name(op), s);
}

/* rgc_op_label through a cache (ops are shared by many nodes). */
const char *rgc_op_label_cached(rg_memo *cache, const rg_op *op) {
  const char *s = rg_memo_get(cache, op);
  if (!s) {
    s = rgc_op_label(op);
    rg_memo_put(cache, op, (void *)s);
  }
  return s;
}

static void print_value(FILE *f, const rg_variable *c) {
  const rg_type *t = c->type;
  int64_t n = rg_type_numel(t);
  if (t->ndim == 0) {
    rgc_fprint_elem(f, t->dtype, c->data);
    return;
  }
  if (n > 8) {
    fprintf(f, "<%s constant>", rg_type_str(t));
    return;
  }
  rg_tensor *v = rg_constant_to_tensor(c);
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  rg_tensor_fprint(m, v);
  fclose(m);
  /* drop the "dtype (shape) " prefix */
  const char *p = strchr(buf, '[');
  fputs(p ? p : buf, f);
  free(buf);
  rg_tensor_free(v);
}

/* A leaf: its name, its value, or its type. */
static void print_leaf(FILE *f, const rg_variable *v) {
  if (rg_is_constant(v)) print_value(f, v);
  else if (v->name) fputs(v->name, f);
  else fprintf(f, "<%s>", rg_type_str(v->type));
}

/* ------------------------------------------------------------------ pprint */

typedef struct pp {
  FILE *f;
  rg_memo *bound;   /* variable -> name of its own line; a node of several outputs -> its name */
  rg_memo *labels;  /* op -> label */
  rgk_stack work;   /* (word, kind) pairs; a variable's kind holds its depth */
  int depth;        /* depth of the expression being expanded (its operands: depth + 1) */
  int max_depth;    /* operands deeper than this print as "..."; 0: no limit */
} pp;

enum { W_STR = 1, W_VAR = 2 };
#define W_VAR_AT(d) ((rgk_word)W_VAR | (rgk_word)(d) << 2)

static void push_str(pp *p, const char *s) {
  rgk_push(&p->work, (rgk_word)s);
  rgk_push(&p->work, W_STR);
}
static void push_var(pp *p, const rg_variable *v) {
  rgk_push(&p->work, (rgk_word)v);
  rgk_push(&p->work, W_VAR_AT(p->depth + 1));
}

/* Pushes, in reverse, the pieces of: prefix a0 sep a1 sep ... suffix. */
static void push_list(pp *p, const char *prefix, const char *sep, const char *suffix,
                      rg_variable *const *args, int n) {
  push_str(p, suffix);
  for (int i = n - 1; i >= 0; i--) {
    push_var(p, args[i]);
    if (i) push_str(p, sep);
  }
  push_str(p, prefix);
}

/* Items in output order, pushed reversed onto the work stack at the end. */
static void add_str(rgk_stack *q, const char *s) { rgk_push(q, (rgk_word)s), rgk_push(q, W_STR); }
static void add_var(rgk_stack *q, const rg_variable *v) { rgk_push(q, (rgk_word)v), rgk_push(q, W_VAR); }

/* x[1:3, i, ::-1], or inc_subtensor(x[...], y) / set_subtensor(x[...], y). */
static void push_subtensor(pp *p, const rg_node *n) {
  const rg_op *op = n->op;
  bool sub = op->code == RG_OP_SUBTENSOR;
  int next = sub ? 1 : 2;
  rgk_stack q = {0};
  if (!sub) add_str(&q, op->code == RG_OP_INC_SUBTENSOR ? "inc_subtensor(" : "set_subtensor(");
  add_var(&q, n->inputs[0]);
  add_str(&q, "[");
  for (int i = 0; i < op->nints; i += 4) {
    const int64_t *e = op->ints + i;
    int ncomp = e[0] == RG_IDX_INDEX ? 1 : e[3] == RG_IDX_NONE ? 2 : 3;
    for (int j = 1; j <= ncomp; j++) {
      if (j > 1) add_str(&q, ":");
      if (e[j] == RG_IDX_INPUT) add_var(&q, n->inputs[next++]);
      else if (e[j] != RG_IDX_NONE) add_str(&q, rgk_sprintf("%lld", (long long)e[j]));
    }
    if (i + 4 < op->nints) add_str(&q, ", ");
  }
  add_str(&q, "]");
  if (!sub) {
    add_str(&q, ", ");
    add_var(&q, n->inputs[1]);
    add_str(&q, ")");
  }
  for (size_t k = q.n; k > 0; k -= 2) {
    rgk_push(&p->work, q.v[k - 2]);
    rgk_push(&p->work, q.v[k - 1] == W_VAR ? W_VAR_AT(p->depth + 1) : W_STR);
  }
}

/* Pushes the pieces of the expression computing v. */
static void push_expr(pp *p, const rg_variable *v) {
  const rg_node *n = v->owner;
  const rg_op *op = n->op;
  const char *inf = infix_of(op->code);
  if (n->nout > 1 && !rg_memo_get(p->bound, n)) /* a bound node's line shows the node */
    push_str(p, rgk_sprintf("[%d]", v->index));
  if (inf && n->nin >= 2) {
    push_list(p, "(", rgk_sprintf(" %s ", inf), ")", n->inputs, n->nin);
  } else if (op->code == RG_OP_NEG && op->inplace < 0) {
    push_var(p, n->inputs[0]);
    push_str(p, "-");
  } else if (op->code == RG_OP_NOT && op->inplace < 0) {
    push_var(p, n->inputs[0]);
    push_str(p, "~");
  } else if (is_transpose(op, n->inputs[0]->type->ndim)) {
    push_str(p, ".T");
    push_var(p, n->inputs[0]);
  } else if (op->code == RG_OP_SUBTENSOR || op->code == RG_OP_INC_SUBTENSOR ||
             op->code == RG_OP_SET_SUBTENSOR) {
    push_subtensor(p, n);
  } else {
    const char *label = rgc_op_label_cached(p->labels, op);
    if (p->max_depth && strlen(label) > BRIEF_LABEL_MAX) /* a loop's whole step */
      label = rgk_sprintf("%.*s ...}", BRIEF_LABEL_MAX, label);
    push_list(p, rgk_sprintf("%s(", label), ", ", ")", n->inputs, n->nin);
  }
}

static void run(pp *p) {
  while (p->work.n) {
    rgk_word kind = p->work.v[--p->work.n], w = p->work.v[--p->work.n];
    if (kind == W_STR) {
      fputs((const char *)w, p->f);
      continue;
    }
    const rg_variable *v = (const rg_variable *)w;
    const char *name = rg_memo_get(p->bound, v), *node = v->owner ? rg_memo_get(p->bound, v->owner) : NULL;
    int depth = (int)(kind >> 2);
    if (name) fputs(name, p->f);
    else if (node) fprintf(p->f, "%s[%d]", node, v->index);
    else if (!v->owner) print_leaf(p->f, v);
    else if (p->max_depth && depth > p->max_depth) fputs("...", p->f);
    else {
      p->depth = depth;
      push_expr(p, v);
    }
  }
}

/* A fresh name: v's own if free, else the next t<k> nobody holds. */
static const char *fresh_name(const rg_variable *v, rg_memo *taken, rg_memo *named, int *next) {
  const char *name = v && v->name && !rg_memo_get(taken, rg_symbol(v->name)) ? v->name : NULL;
  while (!name) {
    char *c = rgk_sprintf("t%d", ++*next);
    if (!rg_memo_get(taken, rg_symbol(c)) && !rg_memo_get(named, rg_symbol(c))) name = c; /* nobody's name */
  }
  rg_memo_put(taken, rg_symbol(name), (void *)name);
  return name;
}

/* Whether node x, of several outputs, is printed once on a line of its own:
 * its outputs are used (by nodes, or printed as outputs) more than once in
 * all, and it is large or its label is long. */
static bool bind_node(pp *p, const rg_node *x, uintptr_t size, rg_memo *uses, rg_memo *printed) {
  if (x->nout < 2) return false;
  uintptr_t total = 0;
  for (int o = 0; o < x->nout; o++)
    total += (uintptr_t)rg_memo_get(uses, x->outputs[o]) + (uintptr_t)rg_memo_get(printed, x->outputs[o]);
  return total > 1 && (size > SHARED_INLINE_MAX || strlen(rgc_op_label_cached(p->labels, x->op)) > SHARED_LABEL_MAX);
}

/* Sizes of inline expressions, and names for large shared ones. */
static void bind_shared(pp *p, int n, rg_variable *const *outs, rgk_stack *lines) {
  size_t nn;
  rg_node **order = rg_toposort(0, NULL, n, outs, &nn);
  rg_memo *size = rg_memo_new(), *uses = rg_memo_new(), *taken = rg_memo_new(), *named = rg_memo_new();
  for (size_t k = 0; k < nn; k++)
    for (int i = 0; i < order[k]->nin; i++) {
      const rg_variable *in = order[k]->inputs[i];
      rg_memo_put(uses, in, (void *)((uintptr_t)rg_memo_get(uses, in) + 1));
      if (!in->owner && in->name) rg_memo_put(taken, rg_symbol(in->name), (void *)in->name); /* printed as is */
    }
  rg_memo *printed = rg_memo_new(); /* how often each value is printed as an output */
  for (int k = 0; k < n; k++) {
    rg_memo_put(printed, outs[k], (void *)((uintptr_t)rg_memo_get(printed, outs[k]) + 1));
    if (!outs[k]->owner && outs[k]->name) rg_memo_put(taken, rg_symbol(outs[k]->name), (void *)outs[k]->name);
  }
  for (size_t k = 0; k < nn; k++)
    for (int o = 0; o < order[k]->nout; o++)
      if (order[k]->outputs[o]->name) rg_memo_put(named, rg_symbol(order[k]->outputs[o]->name), (void *)1);
  int next = 0;
  for (size_t k = 0; k < nn; k++) {
    const rg_node *x = order[k];
    uintptr_t s = 1;
    for (int i = 0; i < x->nin; i++) {
      uintptr_t si = (uintptr_t)rg_memo_get(size, x->inputs[i]);
      s += si ? si : 1;
      if (s > 1000000) s = 1000000;
    }
    if (bind_node(p, x, s, uses, printed)) {
      rg_memo_put(p->bound, x, (void *)fresh_name(NULL, taken, named, &next));
      rgk_push(lines, (rgk_word)x->outputs[0]);
      for (int o = 0; o < x->nout; o++) rg_memo_put(size, x->outputs[o], (void *)1);
      continue;
    }
    for (int o = 0; o < x->nout; o++) {
      rg_variable *v = x->outputs[o];
      if ((uintptr_t)rg_memo_get(uses, v) > 1 && s > SHARED_INLINE_MAX) {
        const char *name = fresh_name(v, taken, named, &next);
        rg_memo_put(p->bound, v, (void *)name);
        rgk_push(lines, (rgk_word)v);
        rg_memo_put(size, v, (void *)1);
      } else {
        rg_memo_put(size, v, (void *)s);
      }
    }
  }
}

static void print_line(pp *p, const rg_variable *v, bool expand) {
  p->depth = 0;
  if (expand && v->owner) push_expr(p, v);
  else push_var(p, v);
  run(p);
}

/* The name a line binds: a variable's, or its node's when the node is
 * bound as a whole. */
static const char *line_name(const pp *p, const rg_variable *v) {
  const char *name = rg_memo_get(p->bound, v);
  return name ? name : rg_memo_get(p->bound, v->owner);
}

/* rg_pprint with the first nin leaves given names (NULL: their own). */
static int pprint_named(FILE *f, int n, rg_variable *const *vars, int nin, rg_variable *const *ins,
                        const char *const *names) {
  pp p = {.f = f, .bound = rg_memo_new(), .labels = rg_memo_new()};
  for (int i = 0; i < nin; i++)
    if (names[i]) rg_memo_put(p.bound, ins[i], (void *)names[i]);
  rgk_stack lines = {0};
  bind_shared(&p, n, vars, &lines);
  for (size_t k = 0; k < lines.n; k++) {
    const rg_variable *v = (const rg_variable *)lines.v[k];
    fprintf(f, "%s = ", line_name(&p, v));
    print_line(&p, v, true);
    fputc('\n', f);
  }
  for (int k = 0; k < n; k++) {
    print_line(&p, vars[k], false);
    fputc('\n', f);
  }
  return ferror(f) ? RG_ERR_IO : RG_OK;
}

int rg_pprint(FILE *f, int n, rg_variable *const *vars) { return pprint_named(f, n, vars, 0, NULL, NULL); }

/* One value as collected text, without the last newline: pprint's lines
 * (max_depth 0), or one line down to max_depth levels. */
static char *value_text(rg_variable *v, int max_depth) {
  if (!v) return rgk_strdup("<NULL>");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (max_depth) {
    pp p = {.f = f, .bound = rg_memo_new(), .labels = rg_memo_new(), .max_depth = max_depth};
    print_line(&p, v, false);
  } else {
    rg_pprint(f, 1, &v);
  }
  fclose(f);
  if (len && buf[len - 1] == '\n') len--;
  char *s = rgk_strndup(buf, len);
  free(buf);
  return s;
}

char *rg_pprint_str(rg_variable *v) { return value_text(v, 0); }
char *rg_pprint_brief(rg_variable *v, int depth) { return value_text(v, depth > 0 ? depth : 1); }

int rg_fgraph_pprint(FILE *f, rg_fgraph *fg) { return rg_pprint(f, fg->nout, fg->outputs); }

/* Whether inner input k prints as its own name: it has one, and no
 * earlier input has the same (merged steps can repeat a name). */
static bool own_name(const rg_fgraph *g, int k) {
  const char *n = g->inputs[k]->name;
  for (int i = 0; n && i < k; i++)
    if (g->inputs[i]->name && !strcmp(g->inputs[i]->name, n)) return false;
  return n != NULL;
}

/* The name an inner input prints as: its own, else <k> (k its position)
 * or, for a repeated name, NAME<k>, as the lambda of rgc_scan_label lists
 * it. */
const char *rgc_inner_input_name(const rg_fgraph *g, int k) {
  if (own_name(g, k)) return g->inputs[k]->name;
  const char *n = g->inputs[k]->name;
  return rgk_sprintf("%s<%d>", n ? n : "", k);
}

/* The inner graph of an op on one line: outputs separated by ", ";
 * unnamed inner inputs print as <k>. */
char *rgc_pprint_inner(const rg_fgraph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  const char **names = rgk_alloc(((size_t)g->nin + 1) * sizeof *names);
  for (int k = 0; k < g->nin; k++) names[k] = own_name(g, k) ? NULL : rgc_inner_input_name(g, k);
  pprint_named(f, g->nout, g->outputs, g->nin, g->inputs, names);
  fclose(f);
  for (size_t i = 0; i < len; i++)
    if (buf[i] == '\n') buf[i] = i + 1 < len ? ';' : 0;
  /* a step holding loops whose steps hold loops: each label holds the
   * inner ones whole, as often as the step uses them (a gradient's
   * backward loops use each forward loop several times), so the text
   * grows geometrically with the depth; it is cut (megabytes at 12
   * levels, beyond what printf can count at 24) */
  char *s = len > INNER_TEXT_MAX ? rgk_sprintf("%.*s ...", INNER_TEXT_MAX, buf) : rgk_strdup(buf);
  free(buf);
  return s;
}

/* ------------------------------------------------------------------ dprint */

typedef struct dp {
  FILE *f;
  rg_memo *ids;   /* node or leaf -> id number + 1 */
  rg_memo *labels; /* op -> label */
  int next;
  rgk_stack inner; /* nodes whose inner graph is printed after the outer one */
  const char *prefix; /* before every line (inner graphs: " >") */
} dp;

static const char *id_text(int k) {
  char buf[16];
  int n = 0;
  do {
    buf[n++] = (char)('A' + k % 26);
    k /= 26;
  } while (k > 0);
  char *s = rgk_alloc_atomic((size_t)n + 1);
  for (int i = 0; i < n; i++) s[i] = buf[n - 1 - i];
  s[n] = 0;
  return s;
}

/* The id of a node (or a leaf variable); *fresh tells whether it is new. */
static const char *id_of(dp *d, const void *key, bool *fresh) {
  uintptr_t k = (uintptr_t)rg_memo_get(d->ids, key);
  *fresh = !k;
  if (!k) {
    k = (uintptr_t)++d->next;
    rg_memo_put(d->ids, key, (void *)k);
  }
  return id_text((int)k - 1);
}

static void indent(FILE *f, int depth) {
  int shown = depth < INDENT_MAX ? depth : INDENT_MAX;
  for (int i = 0; i < shown; i++) fputs(" |", f);
  if (depth > INDENT_MAX) fprintf(f, "(%d)", depth);
}

/* Prints v's line; returns whether its node's inputs should follow. */
static bool dprint_line(dp *d, const rg_variable *v, int depth) {
  if (d->prefix) fputs(d->prefix, d->f);
  indent(d->f, depth);
  bool fresh;
  if (!v->owner) {
    const char *id = id_of(d, v, &fresh);
    if (rg_is_constant(v)) {
      fputs("constant ", d->f);
      print_value(d->f, v);
    } else {
      fputs(v->name ? v->name : "<input>", d->f);
    }
    fprintf(d->f, " [id %s] %s\n", id, rg_type_str(v->type));
    return false;
  }
  const char *id = id_of(d, v->owner, &fresh);
  if (fresh && v->owner->op->cls->label && v->owner->op->inner) rgk_push(&d->inner, (rgk_word)v->owner);
  fputs(rgc_op_label_cached(d->labels, v->owner->op), d->f);
  if (v->owner->nout > 1) fprintf(d->f, ".%d", v->index);
  fprintf(d->f, " [id %s] %s", id, rg_type_str(v->type));
  if (v->name) fprintf(d->f, " '%s'", v->name);
  if (v->owner->op->inplace >= 0) fprintf(d->f, " (destroys input %d)", v->owner->op->inplace);
  fputs(fresh ? "\n" : " ...\n", d->f);
  return fresh;
}

static void dprint_var(dp *d, const rg_variable *root, int depth0) {
  rgk_stack work = {0}; /* (variable, depth) */
  rgk_push(&work, (rgk_word)root);
  rgk_push(&work, (rgk_word)depth0);
  while (work.n) {
    int depth = (int)work.v[--work.n];
    const rg_variable *v = (const rg_variable *)work.v[--work.n];
    if (!dprint_line(d, v, depth)) continue;
    const rg_node *n = v->owner;
    for (int i = n->nin - 1; i >= 0; i--) {
      rgk_push(&work, (rgk_word)n->inputs[i]);
      rgk_push(&work, (rgk_word)(depth + 1));
    }
  }
}

/* Aesara's "Inner graphs:" section: each inner graph's outputs, indented
 * under the node's label and id (nested ones join the list as met). */
static void dprint_inner(dp *d) {
  if (!d->inner.n) return;
  fputs("\nInner graphs:\n", d->f);
  for (size_t k = 0; k < d->inner.n; k++) {
    const rg_node *n = (const rg_node *)d->inner.v[k];
    bool fresh;
    fprintf(d->f, "\n%s [id %s]\n", rgc_op_label_cached(d->labels, n->op), id_of(d, n, &fresh));
    rg_fgraph *g = n->op->inner;
    d->prefix = " >";
    for (int j = 0; j < g->nout; j++) dprint_var(d, g->outputs[j], 0);
    d->prefix = NULL;
  }
}

int rg_dprint(FILE *f, int n, rg_variable *const *vars) {
  dp d = {.f = f, .ids = rg_memo_new(), .labels = rg_memo_new()};
  for (int k = 0; k < n; k++) dprint_var(&d, vars[k], 0);
  dprint_inner(&d);
  return ferror(f) ? RG_ERR_IO : RG_OK;
}

int rg_fgraph_dprint(FILE *f, rg_fgraph *fg) {
  for (int i = 0; i < fg->nin; i++) {
    const rg_variable *v = fg->inputs[i];
    fprintf(f, "input %s %s\n", v->name ? v->name : "<unnamed>", rg_type_str(v->type));
  }
  return rg_dprint(f, fg->nout, fg->outputs);
}
