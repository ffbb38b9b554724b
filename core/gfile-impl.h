/*
 * gfile-impl.h — the graph file reader's state, shared by gfile.c (the
 * format) and gfile-scan.c (the scan form, which reads a lambda body in a
 * scope of its own).
 *
 * Scopes nest: a lambda's scope holds its parameters and local defines,
 * and a name not found there is looked up in the enclosing scopes (so a
 * step may use any name defined earlier in the file).
 */
#ifndef RELGRAPH_GFILE_IMPL_H
#define RELGRAPH_GFILE_IMPL_H

#include "core/core-impl.h"

/* A symbol table from names (interned symbols) to values. */
typedef struct scope {
  rg_memo *vars;          /* symbol -> variable */
  rg_memo *opaque;        /* symbol -> op */
  const struct scope *parent; /* the enclosing scope, or NULL */
} scope;

typedef struct reader {
  rg_ctx *C;
  rg_reader *R;        /* for positions (may be NULL) */
  const char *name;
  scope sc;
  rgk_stack inputs, outputs;
} reader;

/* Values on the evaluation stack: a variable, or a node whose several
 * outputs are still to be named. */
enum { V_VAR = 0, V_NODE = 1 };

/* gfile.c, for gfile-scan.c */
rg_variable *rgc_gf_lookup(const scope *sc, rg_term name);
int rgc_gf_eval(reader *r, rg_term form, rg_term expr, void **out, rgk_word *kind);
int rgc_gf_eval_var(reader *r, rg_term form, rg_term expr, rg_variable **out);
int rgc_gf_define(reader *r, rg_term form);
int rgc_gf_bind(reader *r, rg_term form, rg_term name, rg_variable *v);
/* "file:line:col: message" for form; returns code. */
int rgc_gf_error(reader *r, rg_term form, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* gfile-scan.c: (scan (lambda ...) OPTION ...) */
int rgc_gf_scan(reader *r, rg_term form, void **out, rgk_word *kind);

#endif
