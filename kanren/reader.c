/*
 * reader.c — the S-expression reader and the source-position map.
 *
 * An iterative reader over a byte buffer: open lists, quote prefixes and
 * #; comments are frames on an explicit stack, so neither long lists nor
 * deep nesting cost C stack.  Nesting is still limited to
 * RG_READ_MAX_DEPTH levels, which bounds every later recursive walk over
 * program text (the compiler).  Each list's
 * starting position goes into a map keyed by the list's first pair, for
 * error messages of the form file:line:col.
 */
#include "kanren/kanren-impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ position map */

typedef struct srcpos { const char *file; uint32_t line, col; } srcpos;

/* Open addressing on the pair's address.  A weak map (an interpreter's
 * for text given as strings) holds its keys hidden from the collector,
 * each slot registered as a disappearing link, so that a form nobody else
 * holds is collected and its slot cleared: a long-lived interpreter that
 * evaluates strings keeps no form it read.  Cleared slots are holes inside
 * probe runs, so a lookup probes `maxprobe` + 1 slots rather than stopping
 * at the first empty one.  Invariants: keys[i] is 0 or (weak) the hidden
 * base address of a live pair, or (strong) a pair term; every key sits
 * within maxprobe slots of its home slot; n counts insertions since the
 * last rehash (an upper bound of the live keys).  A strong map's keys are
 * traced, so its forms live as long as it does. */
struct rgk_srcmap {
  uintptr_t *keys;
  srcpos *pos;
  size_t cap, n, maxprobe;
  bool weak;
};

rgk_srcmap *rgk_srcmap_new(bool weak) {
  rgk_srcmap *m = rgk_alloc(sizeof(rgk_srcmap));
#ifndef RG_GC_NEVER_FREE
  m->weak = weak;
#else
  (void)weak; /* nothing is ever collected: a strong map is the same */
#endif
  return m;
}

/* The key stored for a pair: its object's address, hidden in a weak map. */
static uintptr_t key_of(const rgk_srcmap *m, rg_term pair) {
  uintptr_t base = (uintptr_t)RGK_W(pair) & ~(uintptr_t)7;
#ifndef RG_GC_NEVER_FREE
  if (m->weak) return (uintptr_t)GC_HIDE_POINTER((void *)base);
#endif
  return base;
}

static size_t home(const rgk_srcmap *m, uintptr_t k) {
  return (size_t)((k >> 3) * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
}

/* The slot holding key k, or m->cap. */
static size_t find_slot(const rgk_srcmap *m, uintptr_t k) {
  size_t h = home(m, k);
  for (size_t d = 0; d <= m->maxprobe; d++) {
    size_t i = (h + d) & (m->cap - 1);
    if (m->keys[i] == k) return i;
  }
  return m->cap;
}

/* Stores k at the first empty slot of its probe run (no lookup); in a
 * weak map the slot becomes the key's disappearing link, moved there from
 * `from` when the key comes from an older table. */
static void insert_new(rgk_srcmap *m, uintptr_t k, srcpos p, uintptr_t *from) {
  size_t h = home(m, k), d = 0;
  while (m->keys[(h + d) & (m->cap - 1)]) d++;
  size_t i = (h + d) & (m->cap - 1);
  m->keys[i] = k;
  m->pos[i] = p;
  if (d > m->maxprobe) m->maxprobe = d;
  m->n++;
#ifndef RG_GC_NEVER_FREE
  if (m->weak && from) GC_move_disappearing_link((void **)from, (void **)&m->keys[i]);
  else if (m->weak) GC_general_register_disappearing_link((void **)&m->keys[i], GC_REVEAL_POINTER(k));
#else
  (void)from;
#endif
}

/* Rehashes into a table sized for the live keys (cleared slots dropped). */
static void srcmap_rehash(rgk_srcmap *m) {
  size_t live = rgk_srcmap_count(m);
  rgk_srcmap old = *m;
  m->cap = 256;
  while (m->cap < 4 * live) m->cap *= 2; /* a quarter full, as a doubling leaves it */
  if (m->weak) { /* hidden keys: not traced */
    m->keys = rgk_alloc_atomic(m->cap * sizeof *m->keys);
    memset(m->keys, 0, m->cap * sizeof *m->keys);
  } else {
    m->keys = rgk_alloc(m->cap * sizeof *m->keys);
  }
  m->pos = rgk_alloc(m->cap * sizeof(srcpos));
  m->n = m->maxprobe = 0;
  for (size_t i = 0; i < old.cap; i++) {
    uintptr_t k = old.keys[i];
    if (k) insert_new(m, k, old.pos[i], &old.keys[i]);
  }
}

void rgk_srcmap_put(rgk_srcmap *m, rg_term pair, const char *file, uint32_t line, uint32_t col) {
  if ((m->n + 1) * 2 > m->cap) srcmap_rehash(m);
  insert_new(m, key_of(m, pair), (srcpos){file, line, col}, NULL);
}

size_t rgk_srcmap_count(const rgk_srcmap *m) {
  size_t live = 0;
  for (size_t i = 0; i < m->cap; i++) live += m->keys[i] != 0;
  return live;
}

const char *rgk_srcmap_where(const rgk_srcmap *m, rg_term form) {
  if (!m || !m->cap || !rgk_is_pair(form)) return NULL;
  size_t i = find_slot(m, key_of(m, form));
  if (i == m->cap) return NULL;
  return rgk_sprintf("%s:%u:%u", m->pos[i].file, m->pos[i].line, m->pos[i].col);
}

/* ------------------------------------------------------------------ reader state */

struct rg_reader {
  rg_ctx *C;
  const char *name;
  const char *s;
  size_t len, i;
  uint32_t line, col;
  int depth;
  rgk_srcmap *map;
  rg_term sym_quote, sym_quasi, sym_unquote, sym_splice;
};

rg_reader *rgk_reader_new(rg_ctx *C, const char *name, const char *text, size_t len,
                          rgk_srcmap *map) {
  rg_reader *R = rgk_alloc(sizeof *R);
  R->C = C;
  R->name = rgk_strdup(name ? name : "<string>");
  R->s = text;
  R->len = len;
  R->line = 1;
  R->col = 1;
  R->map = map ? map : rgk_srcmap_new(false);
  R->sym_quote = rg_symbol("quote");
  R->sym_quasi = rg_symbol("quasiquote");
  R->sym_unquote = rg_symbol("unquote");
  R->sym_splice = rg_symbol("unquote-splicing");
  return R;
}

rg_reader *rg_reader_new(rg_ctx *C, const char *name, const char *text, size_t len) {
  return rgk_reader_new(C, name, text, len, NULL);
}

const char *rg_reader_where(rg_reader *R, rg_term form) { return rgk_srcmap_where(R->map, form); }

static int peekc(const rg_reader *R) { return R->i < R->len ? (unsigned char)R->s[R->i] : -1; }
static int peek2(const rg_reader *R) { return R->i + 1 < R->len ? (unsigned char)R->s[R->i + 1] : -1; }

static int nextc(rg_reader *R) {
  if (R->i >= R->len) return -1;
  int c = (unsigned char)R->s[R->i++];
  if (c == '\n') {
    R->line++;
    R->col = 1;
  } else {
    R->col++;
  }
  return c;
}

static int syntax_error(rg_reader *R, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int syntax_error(rg_reader *R, uint32_t line, uint32_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(R->C, RG_ERR_SYNTAX, "%s:%u:%u: %s", R->name, line, col, msg);
}

static bool is_delim(int c) {
  return c < 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(' ||
         c == ')' || c == '[' || c == ']' || c == '"' || c == ';' || c == '\'' || c == '`' ||
         c == ',';
}

/* Skips a #| ... |# comment (they nest); the opening #| is consumed. */
static int skip_block_comment(rg_reader *R, uint32_t line, uint32_t col) {
  int level = 1;
  while (level > 0) {
    int c = nextc(R);
    if (c < 0) return syntax_error(R, line, col, "unterminated #| comment");
    if (c == '|' && peekc(R) == '#') { nextc(R); level--; }
    else if (c == '#' && peekc(R) == '|') { nextc(R); level++; }
  }
  return 0;
}

/* Skips whitespace and comments, except #; datum comments, which the
 * datum reader handles (they contain a datum). */
static int skip_space(rg_reader *R) {
  for (;;) {
    int c = peekc(R);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') { nextc(R); continue; }
    if (c == ';') {
      while ((c = peekc(R)) >= 0 && c != '\n') nextc(R);
      continue;
    }
    if (c == '#' && peek2(R) == '|') {
      uint32_t line = R->line, col = R->col;
      nextc(R); nextc(R);
      int rc = skip_block_comment(R, line, col);
      if (rc) return rc;
      continue;
    }
    return 0;
  }
}

/* ------------------------------------------------------------------ atoms */

static int read_string(rg_reader *R, rg_term *out) {
  uint32_t line = R->line, col = R->col;
  nextc(R); /* opening quote */
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    int c = nextc(R);
    if (c < 0) return syntax_error(R, line, col, "unterminated string");
    if (c == '"') break;
    if (c == '\\') {
      uint32_t eline = R->line, ecol = R->col - 1; /* the backslash */
      int e = nextc(R);
      switch (e) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case 'a': c = 7; break;
      case '0': c = 0; break;
      case '\\': case '"': c = e; break;
      case '\n': continue;
      case 'x': {
        unsigned v = 0;
        int d, k = 0;
        while ((d = nextc(R)) >= 0 && d != ';' && k < 8) {
          if (!strchr("0123456789abcdefABCDEF", d))
            return syntax_error(R, eline, ecol, "bad \\x escape in string");
          v = v * 16 + (unsigned)(d <= '9' ? d - '0' : (d | 32) - 'a' + 10);
          k++;
        }
        if (d != ';' || v > 255) return syntax_error(R, eline, ecol, "bad \\x escape in string");
        c = (int)v;
        break;
      }
      case -1: return syntax_error(R, line, col, "unterminated string");
      default:
        if (e < 32 || e > 126) return syntax_error(R, eline, ecol, "unknown escape in string");
        return syntax_error(R, eline, ecol, "unknown escape \\%c in string", e);
      }
    }
    if (n + 1 >= cap) {
      cap = cap ? cap * 2 : 32;
      buf = rgk_realloc(buf, cap);
    }
    buf[n++] = (char)c;
  }
  *out = rg_string_n(buf ? buf : "", n);
  return 1;
}

/* Parses a token as a number; returns false if it is not one. */
static bool parse_number(const char *tok, rg_term *out, bool *overflow) {
  *overflow = false;
  if (!strcmp(tok, "+inf.0")) { *out = rg_float(INFINITY); return true; }
  if (!strcmp(tok, "-inf.0")) { *out = rg_float(-INFINITY); return true; }
  if (!strcmp(tok, "+nan.0") || !strcmp(tok, "-nan.0")) { *out = rg_float(NAN); return true; }
  const char *p = tok;
  if (*p == '+' || *p == '-') p++;
  bool digits = false, frac = false, expo = false;
  while (*p >= '0' && *p <= '9') { p++; digits = true; }
  if (*p == '.') {
    p++;
    frac = true;
    while (*p >= '0' && *p <= '9') { p++; digits = true; }
  }
  if (!digits) return false;
  if (*p == 'e' || *p == 'E') {
    p++;
    expo = true;
    if (*p == '+' || *p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return false;
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p) return false;
  if (!frac && !expo) {
    errno = 0;
    long long v = strtoll(tok, NULL, 10);
    if (errno == ERANGE) { *overflow = true; return true; }
    *out = rg_int(v);
    return true;
  }
  *out = rg_float(strtod(tok, NULL));
  return true;
}

static int read_atom(rg_reader *R, rg_term *out) {
  uint32_t line = R->line, col = R->col;
  size_t start = R->i;
  while (!is_delim(peekc(R))) nextc(R);
  size_t n = R->i - start;
  char small[64];
  char *tok = n < sizeof small ? small : rgk_alloc_atomic(n + 1);
  memcpy(tok, R->s + start, n);
  tok[n] = 0;
  if (tok[0] == '#') {
    if (!strcmp(tok, "#t") || !strcmp(tok, "#true")) { *out = RG_TRUE; return 1; }
    if (!strcmp(tok, "#f") || !strcmp(tok, "#false")) { *out = RG_FALSE; return 1; }
    if (!strcmp(tok, "#s") || !strcmp(tok, "#u")) { *out = rg_symbol(tok); return 1; }
    if (n == 1 && peekc(R) == '(') return syntax_error(R, line, col, "vectors #( ) are not supported");
    return syntax_error(R, line, col, "unknown syntax %s", tok);
  }
  if (!strcmp(tok, ".")) return syntax_error(R, line, col, "unexpected '.'");
  bool overflow;
  if (parse_number(tok, out, &overflow)) {
    if (overflow) return syntax_error(R, line, col, "integer %s does not fit in 64 bits", tok);
    return 1;
  }
  *out = rg_symbol_n(tok, n);
  return 1;
}

/* ------------------------------------------------------------------ data */

/* The datum reader is iterative: each open list, quote prefix, dotted
 * tail being read and #; comment is a frame on an explicit stack, so the
 * nesting limit is a limit on memory, never on the C stack. */
enum { F_LIST, F_QUOTE, F_DOT, F_SKIP };

typedef struct rframe {
  uint8_t kind;
  bool dotted;        /* F_LIST: its tail has been read; only the close may follow */
  int open;           /* F_LIST: '(' or '[' */
  uint32_t line, col; /* where the frame's syntax started */
  size_t base;        /* F_LIST: its first element on the item stack */
  rg_term sym;        /* F_QUOTE: quote, quasiquote, unquote or unquote-splicing */
  rg_term tail;       /* F_LIST: the dotted tail, or () */
} rframe;

typedef struct rstate {
  rframe *f;
  size_t n, cap;
  rgk_stack *items;
} rstate;

static int push_frame(rg_reader *R, rstate *S, int kind, uint32_t line, uint32_t col) {
  if (kind == F_LIST || kind == F_QUOTE) {
    if (++R->depth > RG_READ_MAX_DEPTH)
      return syntax_error(R, line, col, "nesting deeper than %d levels", RG_READ_MAX_DEPTH);
  }
  if (S->n == S->cap) {
    size_t cap = S->cap ? S->cap * 2 : 32;
    rframe *f = rgk_alloc(cap * sizeof *f);
    if (S->n) memcpy(f, S->f, S->n * sizeof *f);
    S->f = f;
    S->cap = cap;
  }
  S->f[S->n++] = (rframe){.kind = (uint8_t)kind, .line = line, .col = col,
                          .base = S->items->n, .tail = RG_NIL};
  return 0;
}

static rframe *top(rstate *S) { return S->n ? &S->f[S->n - 1] : NULL; }

/* Closes the list frame on top: its elements and tail become one list. */
static rg_term close_list(rg_reader *R, rstate *S) {
  rframe *fr = top(S);
  rg_term l = fr->tail;
  for (size_t k = S->items->n; k-- > fr->base;) l = rg_cons(RGK_T(S->items->v[k]), l);
  S->items->n = fr->base;
  if (rgk_is_pair(l)) rgk_srcmap_put(R->map, l, R->name, fr->line, fr->col);
  R->depth--;
  S->n--;
  return l;
}

/* Hands a complete datum to the frame that waits for it.  Returns 1 with
 * *out set when the datum is complete at top level, 0 to read on. */
static int deliver(rg_reader *R, rstate *S, rg_term v, rg_term *out) {
  for (;;) {
    rframe *fr = top(S);
    if (!fr) {
      *out = v;
      return 1;
    }
    switch (fr->kind) {
    case F_LIST:
      rgk_push(S->items, RGK_W(v));
      return 0;
    case F_QUOTE:
      v = rgk_list2(fr->sym, v);
      rgk_srcmap_put(R->map, v, R->name, fr->line, fr->col);
      R->depth--;
      S->n--;
      continue;
    case F_DOT:
      S->n--;
      fr = top(S);
      fr->tail = v;
      fr->dotted = true;
      return 0;
    default: /* F_SKIP: the datum of a #; comment is dropped */
      S->n--;
      return 0;
    }
  }
}

/* The error for input ending inside the frame on top. */
static int eof_error(rg_reader *R, rframe *fr) {
  switch (fr->kind) {
  case F_LIST:
    return syntax_error(R, fr->line, fr->col, "unterminated list (missing '%c')",
                        fr->open == '(' ? ')' : ']');
  case F_QUOTE: return syntax_error(R, fr->line, fr->col, "quote without a datum");
  case F_DOT: return syntax_error(R, fr->line, fr->col, "missing datum after '.'");
  default: return syntax_error(R, fr->line, fr->col, "#; comment without a datum");
  }
}

static bool is_dot_token(const rg_reader *R) {
  return peekc(R) == '.' && is_delim(peek2(R));
}

/* Reads one datum: 1 on success, 0 at end of input, negative on error. */
static int read_datum(rg_reader *R, rg_term *out) {
  RGK_LOCAL_STACK(items, 64);
  rstate S = {.items = &items};
  for (;;) {
    int rc = skip_space(R);
    if (rc) return rc;
    int c = peekc(R);
    uint32_t line = R->line, col = R->col;
    rframe *fr = top(&S);
    if (c < 0) return fr ? eof_error(R, fr) : 0;
    if (c == '#' && peek2(R) == ';') {
      nextc(R);
      nextc(R);
      if ((rc = push_frame(R, &S, F_SKIP, line, col))) return rc;
      continue;
    }
    rg_term v = RG_NIL;
    if (fr && fr->kind == F_LIST && (c == ')' || c == ']')) {
      int close = fr->open == '(' ? ')' : ']';
      if (c != close)
        return syntax_error(R, line, col, "'%c' closes the '%c' opened at %u:%u", c, fr->open,
                            fr->line, fr->col);
      nextc(R);
      v = close_list(R, &S);
    } else if (fr && fr->kind == F_LIST && fr->dotted) {
      return syntax_error(R, line, col, "expected '%c' after dotted tail", fr->open == '(' ? ')' : ']');
    } else if (fr && fr->kind == F_LIST && is_dot_token(R)) {
      nextc(R);
      if (S.items->n == fr->base) return syntax_error(R, line, col, "'.' before any list element");
      if ((rc = push_frame(R, &S, F_DOT, line, col))) return rc;
      continue;
    } else {
      switch (c) {
      case '(': case '[':
        nextc(R);
        if ((rc = push_frame(R, &S, F_LIST, line, col))) return rc;
        top(&S)->open = c;
        continue;
      case ')': case ']': return syntax_error(R, line, col, "unexpected '%c'", c);
      case '\'': case '`': case ',': {
        nextc(R);
        rg_term sym = c == '\'' ? R->sym_quote : c == '`' ? R->sym_quasi : R->sym_unquote;
        if (c == ',' && peekc(R) == '@') {
          nextc(R);
          sym = R->sym_splice;
        }
        if ((rc = push_frame(R, &S, F_QUOTE, line, col))) return rc;
        top(&S)->sym = sym;
        continue;
      }
      case '"': rc = read_string(R, &v); break;
      default: rc = read_atom(R, &v); break;
      }
      if (rc < 0) return rc;
    }
    if (deliver(R, &S, v, out)) return 1;
  }
}

int rg_reader_next(rg_reader *R, rg_term *out) {
  R->depth = 0;
  return read_datum(R, out);
}

rg_term rg_read_all(rg_ctx *C, const char *name, const char *text, size_t len) {
  rg_reader *R = rg_reader_new(C, name, text, len);
  rg_term acc = RG_NIL, x;
  int rc;
  while ((rc = rg_reader_next(R, &x)) == 1) acc = rgk_cons(C, x, acc);
  return rc < 0 ? NULL : rgk_reverse(acc);
}
