/*
 * export.c — graphs for other programs: Graphviz DOT and JSON.
 *
 * DOT: apply nodes are boxes; graph inputs, constants and outputs are
 * ellipses; an edge per use, labelled with the input position when a node
 * has several inputs and with the type of the variable.  JSON: the inputs,
 * outputs, variables (with kind, name, type, and the values of constants)
 * and nodes (op name, parameters as the op term, inputs, outputs), all by
 * number.  Both are written in topological order, in one pass: linear.
 *
 * Inner graphs (a Scan's step, a composite's scalar graph, op_from_graph)
 * are written as graphs too: in DOT a dashed cluster after the node, its
 * ids prefixed by the node's (n3_v0, n3_n1, ...), the node joined to the
 * step's outputs by dotted edges; in JSON an "inner" object of the same
 * form inside the node, numbered on its own.
 */
#include "core/core-impl.h"

#include <math.h>
#include <stdlib.h>

const char *rgc_op_label_cached(rg_memo *cache, const rg_op *op);

/* ------------------------------------------------------------------ numbering */

typedef struct numbering {
  rg_memo *ids;   /* variable or node -> number + 1 */
  int next;
  rg_memo *labels; /* op -> label or head text */
} numbering;

static int num(numbering *nb, const void *key) {
  uintptr_t k = (uintptr_t)rg_memo_get(nb->ids, key);
  if (!k) {
    k = (uintptr_t)++nb->next;
    rg_memo_put(nb->ids, key, (void *)k);
  }
  return (int)k - 1;
}

/* ------------------------------------------------------------------ escaping */

/* For Graphviz labels. */
static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c < 32) fputc(' ', f);
    else fputc(c, f);
  }
}

/* The length of the UTF-8 sequence at s (2 to 4), or 0 when it is not a
 * valid one (overlong, a surrogate, beyond U+10FFFF, cut short). */
static int utf8_length(const unsigned char *s) {
  int n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (!n || s[0] > 0xf4) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
  if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
  return n;
}

void rg_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    unsigned char c = *p;
    int n = c < 0x80 ? 1 : utf8_length(p);
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c < 32) fprintf(f, "\\u%04x", c);
    else if (!n) fputs("\\ufffd", f);
    else fwrite(p, 1, (size_t)n, f);
    p += n ? n : 1;
  }
  fputc('"', f);
}

static const char *leaf_label(const rg_variable *v) {
  if (!rg_is_constant(v)) return v->name ? v->name : "<input>";
  if (rg_type_numel(v->type) != 1) return rgk_sprintf("constant %s", rg_type_str(v->type));
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  rgc_fprint_elem(m, v->type->dtype, v->data);
  fclose(m);
  char *s = rgk_strndup(buf, len);
  free(buf);
  return s;
}

/* ------------------------------------------------------------------ DOT */

/* A DOT graph being written: its numbering and the prefix of its ids
 * ("" at the top, "n3_" inside node n3). */
typedef struct dotg {
  numbering *nb;
  const char *pre;
} dotg;

static void dot_graph(FILE *f, const dotg *g, rg_fgraph *fg);

static void dot_leaf(FILE *f, const dotg *g, const rg_variable *v) {
  numbering *nb = g->nb;
  if (rg_memo_get(nb->ids, v)) return;
  fprintf(f, "  %sv%d [shape=ellipse, label=\"", g->pre, num(nb, v));
  put_escaped(f, leaf_label(v));
  fprintf(f, "\\n%s\"%s];\n", rg_type_str(v->type), rg_is_constant(v) ? ", style=dashed" : "");
}

static void dot_edge_label(FILE *f, const rg_node *n, int i) {
  const rg_variable *x = n->inputs[i];
  fputs(" [label=\"", f);
  if (n->nin > 1) fprintf(f, "%d: ", i);
  if (x->name && x->owner) {
    put_escaped(f, x->name);
    fputc(' ', f);
  }
  fprintf(f, "%s\"]", rg_type_str(x->type));
}

/* The inner graph of node n<id>: a dashed cluster of its own ids. */
static void dot_inner(FILE *f, const dotg *g, int id, const rg_fgraph *inner) {
  numbering nb = {rg_memo_new(), 0, g->nb->labels};
  dotg in = {&nb, rgk_sprintf("%sn%d_", g->pre, id)};
  fprintf(f, "  subgraph cluster_%sn%d {\n  label=\"inner graph of %sn%d\";\n  style=dashed;\n", g->pre, id, g->pre, id);
  dot_graph(f, &in, (rg_fgraph *)inner);
  fputs("  }\n", f);
  for (int k = 0; k < inner->nout; k++) fprintf(f, "  %sn%d -> %sout%d [style=dotted];\n", g->pre, id, in.pre, k);
}

static void dot_node(FILE *f, const dotg *g, const rg_node *n) {
  numbering *nb = g->nb;
  for (int i = 0; i < n->nin; i++)
    if (!n->inputs[i]->owner) dot_leaf(f, g, n->inputs[i]);
  int id = num(nb, n);
  fprintf(f, "  %sn%d [shape=box, label=\"", g->pre, id);
  put_escaped(f, rgc_op_label_cached(nb->labels, n->op));
  fputs("\"];\n", f);
  for (int i = 0; i < n->nin; i++) {
    const rg_variable *x = n->inputs[i];
    if (x->owner) fprintf(f, "  %sn%d -> %sn%d", g->pre, num(nb, x->owner), g->pre, id);
    else fprintf(f, "  %sv%d -> %sn%d", g->pre, num(nb, x), g->pre, id);
    dot_edge_label(f, n, i);
    fputs(";\n", f);
  }
  const rg_fgraph *inner = rg_op_inner_graph(n->op);
  if (inner) dot_inner(f, g, id, inner);
}

/* The statements of one graph (the top one or an inner one). */
static void dot_graph(FILE *f, const dotg *g, rg_fgraph *fg) {
  for (int i = 0; i < fg->nin; i++) dot_leaf(f, g, fg->inputs[i]);
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  for (size_t k = 0; k < n; k++) dot_node(f, g, order[k]);
  for (int k = 0; k < fg->nout; k++) {
    const rg_variable *v = fg->outputs[k];
    fprintf(f, "  %sout%d [shape=doubleoctagon, label=\"output %d\\n%s\"];\n", g->pre, k, k, rg_type_str(v->type));
    if (v->owner) fprintf(f, "  %sn%d -> %sout%d;\n", g->pre, num(g->nb, v->owner), g->pre, k);
    else {
      dot_leaf(f, g, v);
      fprintf(f, "  %sv%d -> %sout%d;\n", g->pre, num(g->nb, v), g->pre, k);
    }
  }
}

int rg_fgraph_dot(FILE *f, rg_fgraph *fg) {
  numbering nb = {rg_memo_new(), 0, rg_memo_new()};
  dotg g = {&nb, ""};
  fputs("digraph relgraph {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n", f);
  dot_graph(f, &g, fg);
  fputs("}\n", f);
  return ferror(f) ? RG_ERR_IO : RG_OK;
}

/* ------------------------------------------------------------------ JSON */

static void json_number(FILE *f, rg_dtype dt, const void *p) {
  if (dt == RG_BOOL) {
    fputs(*(const uint8_t *)p ? "true" : "false", f);
    return;
  }
  double d = rg_load_f64(dt, p);
  if (rg_dtype_is_float(dt) && !isfinite(d)) {
    fputs(isnan(d) ? "\"nan\"" : d > 0 ? "\"inf\"" : "\"-inf\"", f);
    return;
  }
  rgc_fprint_elem(f, dt, p);
}

static void json_type(FILE *f, const rg_type *t) {
  fprintf(f, "{\"dtype\": \"%s\", \"shape\": [", rg_dtype_name(t->dtype));
  for (int d = 0; d < t->ndim; d++) {
    if (d) fputs(", ", f);
    if (t->shape[d] < 0) fputs("null", f);
    else fprintf(f, "%lld", (long long)t->shape[d]);
  }
  char dev[16];
  fprintf(f, "], \"device\": \"%s\"}", rg_device_str(t->device, dev, sizeof dev));
}

static void json_var(FILE *f, numbering *nb, const rg_fgraph *fg, const rg_variable *v, bool *first,
                     const char *ind) {
  if (rg_memo_get(nb->ids, v)) return;
  fprintf(f, "%s\n%s    {\"id\": %d, \"kind\": \"%s\"", *first ? "" : ",", ind, num(nb, v),
          v->owner ? "computed" : rg_is_constant(v) ? "constant" : "input");
  *first = false;
  if (v->name) {
    fputs(", \"name\": ", f);
    rg_json_string(f, v->name);
  }
  fputs(", \"type\": ", f);
  json_type(f, v->type);
  if (rg_is_constant(v)) {
    fputs(", \"value\": [", f);
    int64_t n = rg_type_numel(v->type);
    size_t es = rg_dtype_size(v->type->dtype);
    for (int64_t i = 0; i < n; i++) {
      if (i) fputs(", ", f);
      json_number(f, v->type->dtype, (const char *)v->data + i * (int64_t)es);
    }
    fputc(']', f);
    if (v->flags & RG_VAR_WEAK) fputs(", \"weak\": true", f);
  }
  fputc('}', f);
}

static void json_ids(FILE *f, numbering *nb, int n, rg_variable *const *vs) {
  fputc('[', f);
  for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", num(nb, vs[i]));
  fputc(']', f);
}

static void json_graph(FILE *f, rg_fgraph *fg, rg_memo *labels, const char *ind);

static void json_node(FILE *f, numbering *nb, numbering *nodes, const rg_node *n, bool first, const char *ind) {
  fprintf(f, "%s\n%s    {\"id\": %d, \"op\": ", first ? "" : ",", ind, num(nodes, n));
  rg_json_string(f, rg_op_name(n->op));
  fputs(", \"head\": ", f);
  const char *head = rg_memo_get(nodes->labels, n->op);
  if (!head) {
    head = rg_to_string(rg_op_term(n->op));
    rg_memo_put(nodes->labels, n->op, (void *)head);
  }
  rg_json_string(f, head);
  fputs(", \"inputs\": ", f);
  json_ids(f, nb, n->nin, n->inputs);
  fputs(", \"outputs\": ", f);
  json_ids(f, nb, n->nout, n->outputs);
  const rg_fgraph *inner = rg_op_inner_graph(n->op);
  if (inner) {
    fputs(", \"inner\": ", f);
    json_graph(f, (rg_fgraph *)inner, nodes->labels, rgk_sprintf("%s    ", ind));
  }
  fputc('}', f);
}

/* One graph as a JSON object, its lines indented by ind. */
static void json_graph(FILE *f, rg_fgraph *fg, rg_memo *labels, const char *ind) {
  numbering nb = {rg_memo_new(), 0, NULL}, nodes = {rg_memo_new(), 0, labels};
  size_t n;
  rg_node *const *order = rg_fgraph_toposort(fg, &n);
  bool first = true;
  fprintf(f, "{\n%s  \"variables\": [", ind);
  for (int i = 0; i < fg->nin; i++) json_var(f, &nb, fg, fg->inputs[i], &first, ind);
  for (size_t k = 0; k < n; k++) {
    for (int i = 0; i < order[k]->nin; i++) json_var(f, &nb, fg, order[k]->inputs[i], &first, ind);
    for (int o = 0; o < order[k]->nout; o++) json_var(f, &nb, fg, order[k]->outputs[o], &first, ind);
  }
  for (int k = 0; k < fg->nout; k++) json_var(f, &nb, fg, fg->outputs[k], &first, ind);
  fprintf(f, "\n%s  ],\n%s  \"nodes\": [", ind, ind);
  for (size_t k = 0; k < n; k++) json_node(f, &nb, &nodes, order[k], k == 0, ind);
  fprintf(f, "\n%s  ],\n%s  \"inputs\": ", ind, ind);
  json_ids(f, &nb, fg->nin, fg->inputs);
  fprintf(f, ",\n%s  \"outputs\": ", ind);
  json_ids(f, &nb, fg->nout, fg->outputs);
  fprintf(f, "\n%s}", ind);
}

int rg_fgraph_json(FILE *f, rg_fgraph *fg) {
  json_graph(f, fg, rg_memo_new(), "");
  fputc('\n', f);
  return ferror(f) ? RG_ERR_IO : RG_OK;
}
