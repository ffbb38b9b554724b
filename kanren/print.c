/*
 * print.c — writing terms in the reader's syntax.
 *
 * Lists print as (a b c), improper tails with a dot, (quote x) as 'x (and
 * likewise ` , ,@) as Scheme's `write` does, strings with escapes, floats
 * in the shortest form that reads back to the same double.  The printer
 * keeps its pending work on an explicit stack, so any depth prints.
 */
#include "kanren/kanren-impl.h"

#include <math.h>
#include <stdlib.h>

/* Floats print as Racket writes them: the fewest digits that read back
 * to the same double; positional from 1e-4 to below 1e14 (0.0001, but
 * 1e-5; 10000000000000.0), and from 1e14 on while that needs at most three
 * zeros before the point (where it is no longer than the exponent form:
 * 123456789012300.0, but 1e+14 and 1.2345678901e+14); else with an
 * exponent, unpadded. */
void rgk_print_float(FILE *f, double d) {
  if (isnan(d)) { fputs("+nan.0", f); return; }
  if (isinf(d)) { fputs(d > 0 ? "+inf.0" : "-inf.0", f); return; }
  if (d == 0) { fputs(signbit(d) ? "-0.0" : "0.0", f); return; }
  char buf[40], dig[24];
  for (int prec = 1; prec <= 17; prec++) { /* d.ddde+X, shortest */
    snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    if (strtod(buf, NULL) == d) break;
  }
  const char *p = buf + (buf[0] == '-');
  int nd = 0;
  for (; *p != 'e'; p++)
    if (*p != '.') dig[nd++] = *p;
  while (nd > 1 && dig[nd - 1] == '0') nd--;
  dig[nd] = 0;
  int x = atoi(p + 1);
  if (d < 0) fputc('-', f);
  if (x >= 0 && (x <= 13 || x - (nd - 1) <= 3)) { /* positional, integral part first */
    for (int i = 0; i <= x; i++) fputc(i < nd ? dig[i] : '0', f);
    fprintf(f, ".%s", nd > x + 1 ? dig + x + 1 : "0");
  } else if (x < 0 && -x - 1 <= 3) {
    fprintf(f, "0.%.*s%s", -x - 1, "000", dig);
  } else {
    fprintf(f, "%c%s%s", dig[0], nd > 1 ? "." : "", dig + 1);
    fprintf(f, "e%c%d", x < 0 ? '-' : '+', x < 0 ? -x : x);
  }
}

static void print_string(FILE *f, rg_term t) {
  const rgk_string *s = (const rgk_string *)t;
  fputc('"', f);
  for (uint32_t i = 0; i < s->h.n; i++) {
    unsigned char c = (unsigned char)s->s[i];
    switch (c) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\t': fputs("\\t", f); break;
    case '\r': fputs("\\r", f); break;
    case 7: fputs("\\a", f); break;
    default: /* other control characters and DEL as Chez writes them */
      if (c < 32 || c == 127) fprintf(f, "\\x%x;", c);
      else fputc(c, f);
    }
  }
  fputc('"', f);
}

static void print_atom(FILE *f, rg_term t) {
  if (rgk_is_fixnum(t)) { fprintf(f, "%lld", (long long)rgk_fixnum(t)); return; }
  if (t == RG_NIL) { fputs("()", f); return; }
  if (t == RG_TRUE) { fputs("#t", f); return; }
  if (t == RG_FALSE) { fputs("#f", f); return; }
  if (t == RGK_VOID) { fputs("#<void>", f); return; }
  if (t == RGK_UNBOUND) { fputs("#<unbound>", f); return; }
  if (!t) { fputs("#<null>", f); return; }
  switch (rgk_type(t)) {
  case RGK_T_INT: fprintf(f, "%lld", (long long)((rgk_int *)t)->v); return;
  case RGK_T_FLOAT: rgk_print_float(f, ((rgk_float *)t)->v); return;
  case RGK_T_STRING: print_string(f, t); return;
  case RGK_T_SYMBOL: fputs(rgk_symname(t), f); return;
  case RGK_T_VAR: fprintf(f, "_.v%llu", (unsigned long long)rgk_varp(t)->idx); return;
  case RGK_T_FOREIGN: {
    rgk_foreign *x = (rgk_foreign *)t;
    if (x->hooks->print) x->hooks->print(x->ptr, f);
    else fprintf(f, "#<%s %p>", x->hooks->name ? x->hooks->name : "foreign", x->ptr);
    return;
  }
  case RGK_T_PROC: fprintf(f, "#<procedure %s>", rg_proc_name(t)); return;
  case RGK_T_GOALV: fputs("#<goal>", f); return;
  default: fputs("#<object>", f); return;
  }
}

/* (quote x) and friends print as 'x; returns the prefix or NULL. */
static const char *quote_prefix(rg_term t) {
  if (!rgk_is_pair(t) || !rgk_is_symbol(rgk_car(t))) return NULL;
  rg_term rest = rgk_cdr(t);
  if (!rgk_is_pair(rest) || rgk_cdr(rest) != RG_NIL) return NULL;
  const char *n = rgk_symname(rgk_car(t));
  if (!strcmp(n, "quote")) return "'";
  if (!strcmp(n, "quasiquote")) return "`";
  if (!strcmp(n, "unquote")) return ",";
  if (!strcmp(n, "unquote-splicing")) return ",@";
  return NULL;
}

/* Work items: a term to print, or a literal string to emit. */
#define ITEM_STR 1u

static void push_term(rgk_stack *s, rg_term t) {
  rgk_push(s, RGK_W(t));
  rgk_push(s, 0);
}
static void push_str(rgk_stack *s, const char *str) {
  rgk_push(s, (rgk_word)str);
  rgk_push(s, ITEM_STR);
}

/* Pushes the elements of a list (after its opening parenthesis). */
static void push_list_body(rgk_stack *s, rg_term t) {
  push_str(s, ")");
  /* collect elements, then push them in reverse so they pop in order */
  RGK_LOCAL_STACK(elems, 32);
  rg_term tail = t;
  while (rgk_is_pair(tail)) {
    rgk_push(&elems, RGK_W(rgk_car(tail)));
    tail = rgk_as_list(rgk_cdr(tail));
  }
  if (tail != RG_NIL) {
    push_term(s, tail);
    push_str(s, " . ");
  }
  for (size_t i = elems.n; i-- > 0;) {
    push_term(s, RGK_T(elems.v[i]));
    if (i) push_str(s, " ");
  }
}

void rg_print(FILE *f, rg_term t) {
  RGK_LOCAL_STACK(s, 64);
  push_term(&s, t);
  while (s.n) {
    rgk_word kind = s.v[--s.n], w = s.v[--s.n];
    if (kind == ITEM_STR) {
      fputs((const char *)w, f);
      continue;
    }
    rg_term x = rgk_as_list(RGK_T(w));
    if (!rgk_is_pair(x)) {
      print_atom(f, x);
      continue;
    }
    const char *q = quote_prefix(x);
    if (q) {
      fputs(q, f);
      push_term(&s, rgk_car(rgk_cdr(x)));
      continue;
    }
    fputc('(', f);
    push_list_body(&s, x);
  }
}

char *rg_to_string(rg_term t) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rg_print(f, t);
  fclose(f);
  char *r = rgk_strndup(buf, len);
  free(buf);
  return r;
}
