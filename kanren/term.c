/*
 * term.c — term constructors, accessors, the symbol table, equality and
 * hashing.
 *
 * The symbol table is the one process-wide structure of the kanren layer:
 * interning makes symbol comparison a pointer comparison, which unification
 * does constantly.  It is an open-addressing hash set guarded by a mutex,
 * held in collected memory so the symbols it holds stay alive.
 */
#include "kanren/kanren-impl.h"

#include <math.h>
#include <stdlib.h>
#include <pthread.h>

/* ------------------------------------------------------------------ numbers */

rg_term rg_int(int64_t v) {
  if (v >= RGK_FIXNUM_MIN && v <= RGK_FIXNUM_MAX) return rgk_mkfix(v);
  rgk_int *o = rgk_alloc_atomic(sizeof *o);
  o->h = (rgk_hdr){.type = RGK_T_INT};
  o->v = v;
  return (rg_term)o;
}

int64_t rg_int_value(rg_term t) {
  if (rgk_is_fixnum(t)) return rgk_fixnum(t);
  assert(rgk_type(t) == RGK_T_INT);
  return ((rgk_int *)t)->v;
}

rg_term rg_float(double v) {
  rgk_float *o = rgk_alloc_atomic(sizeof *o);
  o->h = (rgk_hdr){.type = RGK_T_FLOAT};
  o->v = v;
  return (rg_term)o;
}

double rg_float_value(rg_term t) {
  if (rgk_is_float(t)) return ((rgk_float *)t)->v;
  return (double)rg_int_value(t);
}

rg_term rg_bool(bool v) { return v ? RG_TRUE : RG_FALSE; }

/* ------------------------------------------------------------------ strings */

rg_term rg_string_n(const char *s, size_t n) {
  assert(n < UINT32_MAX);
  rgk_string *o = rgk_alloc_atomic(sizeof *o + n + 1);
  o->h = (rgk_hdr){.type = RGK_T_STRING, .n = (uint32_t)n};
  memcpy(o->s, s, n);
  o->s[n] = 0;
  return (rg_term)o;
}
rg_term rg_string(const char *s) { return rg_string_n(s, strlen(s)); }
const char *rg_string_value(rg_term t) { return ((rgk_string *)t)->s; }
size_t rg_string_length(rg_term t) { return ((rgk_string *)t)->h.n; }

/* ------------------------------------------------------------------ symbols */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static struct {
  pthread_mutex_t lock;
  rgk_symbol **slots;  /* open addressing; NULL = empty */
  size_t cap, count;   /* cap is a power of two; count < cap * 3 / 4 */
} symtab = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static size_t symtab_insert_slot(rgk_symbol **slots, size_t cap, rgk_symbol *s) {
  size_t i = s->hash & (cap - 1);
  while (slots[i]) i = (i + 1) & (cap - 1);
  slots[i] = s;
  return i;
}

/* Memory scopes (mem.c, never-free mode only) free the symbols interned
 * inside them, so the table goes back to where it stood at the mark: the
 * slots filled since in the marked array are emptied again (filling only
 * ever takes empty slots, so that restores it exactly), and arrays grown
 * since are dropped for the marked one, which no insertion touched after
 * it was replaced.  The record of filled slots is malloc'd: it must
 * outlive the scope. */
static struct {
  bool on;
  rgk_symbol **slots;
  size_t cap, count;
  size_t *filled, nfilled, maxfilled;
} symmark;

static void symmark_note(size_t i) {
  if (!symmark.on || symtab.slots != symmark.slots) return;
  if (symmark.nfilled == symmark.maxfilled) {
    symmark.maxfilled = symmark.maxfilled ? symmark.maxfilled * 2 : 64;
    symmark.filled = rg_xrealloc(symmark.filled, symmark.maxfilled * sizeof *symmark.filled);
    if (!symmark.filled) abort();
  }
  symmark.filled[symmark.nfilled++] = i;
}

void rgk_symtab_mark(void) {
  pthread_mutex_lock(&symtab.lock);
  symmark.on = true;
  symmark.slots = symtab.slots;
  symmark.cap = symtab.cap;
  symmark.count = symtab.count;
  symmark.nfilled = 0;
  pthread_mutex_unlock(&symtab.lock);
}

void rgk_symtab_rollback(void) {
  pthread_mutex_lock(&symtab.lock);
  if (symmark.on) {
    for (size_t k = 0; k < symmark.nfilled; k++) symmark.slots[symmark.filled[k]] = NULL;
    symtab.slots = symmark.slots;
    symtab.cap = symmark.cap;
    symtab.count = symmark.count;
    symmark.on = false;
  }
  pthread_mutex_unlock(&symtab.lock);
}

static void symtab_grow(void) {
  size_t cap = symtab.cap ? symtab.cap * 2 : 1024;
  rgk_symbol **slots = rgk_alloc(cap * sizeof *slots);
  for (size_t i = 0; i < symtab.cap; i++)
    if (symtab.slots[i]) symtab_insert_slot(slots, cap, symtab.slots[i]);
  symtab.slots = slots;
  symtab.cap = cap;
}

static rgk_symbol *symtab_find(const char *name, size_t n, uint64_t h) {
  if (!symtab.cap) return NULL;
  for (size_t i = h & (symtab.cap - 1);; i = (i + 1) & (symtab.cap - 1)) {
    rgk_symbol *s = symtab.slots[i];
    if (!s) return NULL;
    if (s->hash == h && s->h.n == n && memcmp(s->name, name, n) == 0) return s;
  }
}

rg_term rg_symbol_n(const char *name, size_t n) {
  uint64_t h = hash_bytes(name, n);
  pthread_mutex_lock(&symtab.lock);
  rgk_symbol *s = symtab_find(name, n, h);
  if (!s) {
    if ((symtab.count + 1) * 4 >= symtab.cap * 3) symtab_grow();
    s = rgk_alloc(sizeof *s);
    s->h = (rgk_hdr){.type = RGK_T_SYMBOL, .n = (uint32_t)n};
    s->hash = h;
    s->name = rgk_strndup(name, n);
    symmark_note(symtab_insert_slot(symtab.slots, symtab.cap, s));
    symtab.count++;
  }
  pthread_mutex_unlock(&symtab.lock);
  return (rg_term)s;
}
rg_term rg_symbol(const char *name) { return rg_symbol_n(name, strlen(name)); }
rg_term rgk_sym(const char *name) { return rg_symbol(name); }
const char *rg_symbol_name(rg_term t) { return rgk_symname(t); }

/* ------------------------------------------------------------------ pairs and lists */

rg_term rg_cons(rg_term car, rg_term cdr) { return rgk_cons(NULL, car, cdr); }

rg_term rg_car(rg_term t) { return rgk_car(t); }
rg_term rg_cdr(rg_term t) { return rgk_cdr(t); }
bool rg_is_pair(rg_term t) { return rgk_is_pair(t); }

rg_term rg_list(int n, const rg_term *items) {
  rg_term l = RG_NIL;
  for (int i = n - 1; i >= 0; i--) l = rg_cons(items[i], l);
  return l;
}
rg_term rgk_list2(rg_term a, rg_term b) { return rg_cons(a, rg_cons(b, RG_NIL)); }
rg_term rgk_list3(rg_term a, rg_term b, rg_term c) {
  return rg_cons(a, rg_cons(b, rg_cons(c, RG_NIL)));
}

rg_term rgk_reverse(rg_term l) {
  rg_term r = RG_NIL;
  for (; rgk_is_pair(l); l = rgk_cdr(l)) r = rg_cons(rgk_car(l), r);
  return r;
}

int64_t rgk_length(rg_term l) {
  int64_t n = 0;
  while (rgk_is_pair(l)) {
    l = rgk_cdr(l);
    n++;
  }
  return l == RG_NIL ? n : -1;
}
int64_t rg_list_length(rg_term t) { return rgk_length(rgk_as_list(t)); }

/* ------------------------------------------------------------------ variables */

rg_term rgk_var_scoped(rg_ctx *C, uint64_t scope) {
  rgk_var *v = rgk_alloc_in_np(C, sizeof *v);
  v->h = (rgk_hdr){.type = RGK_T_VAR};
  v->idx = C->next_var++;
  v->val = RGK_UNBOUND;
  v->scope = scope;
  return (rg_term)v;
}
rg_term rg_var(rg_ctx *C) { return rgk_var_scoped(C, 0); }
bool rg_is_var(rg_term t) { return rgk_is_var(t); }

/* ------------------------------------------------------------------ etuples */

rg_term rg_etuple_from_list(rg_term list) {
  int64_t n = rgk_length(list);
  assert(n > 0);
  rgk_etuple *e = rgk_alloc(sizeof *e);
  e->h = (rgk_hdr){.type = RGK_T_ETUPLE, .n = (uint32_t)n,
                   .flags = rgk_ground(list) ? RGK_F_GROUND : 0};
  e->list = list;
  e->value = NULL;
  return (rg_term)e;
}

rg_term rg_etuple(rg_term head, int nargs, const rg_term *args) {
  return rg_etuple_from_list(rg_cons(head, rg_list(nargs, args)));
}
bool rg_is_etuple(rg_term t) { return rgk_is_etuple(t); }
rg_term rg_etuple_list(rg_term et) { return ((rgk_etuple *)et)->list; }

/* ------------------------------------------------------------------ foreign terms */

rg_term rg_foreign(const rg_foreign_hooks *hooks, void *ptr, void *ud) {
  rgk_foreign *f = rgk_alloc(sizeof *f);
  f->h = (rgk_hdr){.type = RGK_T_FOREIGN};
  f->hooks = hooks;
  f->ptr = ptr;
  f->ud = ud;
  f->expansion = RGK_UNBOUND;
  return (rg_term)f;
}

bool rg_is_foreign(rg_term t, const rg_foreign_hooks *hooks) {
  return rgk_is_foreign(t) && (!hooks || ((rgk_foreign *)t)->hooks == hooks);
}
void *rg_foreign_ptr(rg_term t) { return ((rgk_foreign *)t)->ptr; }

rg_term rg_foreign_expand(rg_term t) {
  rgk_foreign *f = (rgk_foreign *)t;
  if (f->expansion == RGK_UNBOUND) {
    rg_term e = f->hooks->as_etuple ? f->hooks->as_etuple(f->ptr, f->ud) : NULL;
    f->expansion = e;
  }
  return f->expansion;
}

rg_term rgk_as_list(rg_term t) {
  for (;;) {
    if (rgk_is_etuple(t)) return ((rgk_etuple *)t)->list;
    if (!rgk_is_foreign(t)) return t;
    rg_term e = rg_foreign_expand(t);
    if (!e) return t;
    t = e;
  }
}

/* ------------------------------------------------------------------ kinds */

rg_kind rg_kind_of(rg_term t) {
  if (rgk_is_fixnum(t)) return RG_K_INT;
  if (rgk_is_pair(t)) return RG_K_PAIR;
  if (t == RG_NIL) return RG_K_NIL;
  if (t == RG_TRUE || t == RG_FALSE) return RG_K_BOOL;
  switch (rgk_type(t)) {
  case RGK_T_INT: return RG_K_INT;
  case RGK_T_FLOAT: return RG_K_FLOAT;
  case RGK_T_STRING: return RG_K_STRING;
  case RGK_T_SYMBOL: return RG_K_SYMBOL;
  case RGK_T_VAR: return RG_K_VAR;
  case RGK_T_ETUPLE: return RG_K_ETUPLE;
  case RGK_T_FOREIGN: return RG_K_FOREIGN;
  case RGK_T_PROC: return RG_K_PROC;
  default: return RG_K_OTHER;
  }
}

/* ------------------------------------------------------------------ equality */

/* Atoms (anything but pairs, etuples and expandable foreign terms). */
static bool atom_equal(rg_term a, rg_term b) {
  if (a == b) return true;
  int ta = rgk_type(a), tb = rgk_type(b);
  if (ta == RGK_T_FOREIGN) {
    rgk_foreign *f = (rgk_foreign *)a;
    return f->hooks->equal ? f->hooks->equal(f->ptr, b) : false;
  }
  if (tb == RGK_T_FOREIGN) return atom_equal(b, a);
  if (rgk_is_int(a) && rgk_is_int(b)) return rg_int_value(a) == rg_int_value(b);
  if (ta != tb || ta == 0) return false;
  switch (ta) {
  case RGK_T_FLOAT: { /* as Racket's equal?: NaN equals NaN, 0.0 is not -0.0 */
    double x = ((rgk_float *)a)->v, y = ((rgk_float *)b)->v;
    return (x == y && signbit(x) == signbit(y)) || (isnan(x) && isnan(y));
  }
  case RGK_T_STRING: {
    rgk_string *x = (rgk_string *)a, *y = (rgk_string *)b;
    return x->h.n == y->h.n && memcmp(x->s, y->s, x->h.n) == 0;
  }
  default: return false;
  }
}

/* Foreign terms equal to a structure compare through their expansion. */
static rg_term structural(rg_term t, rg_term other) {
  if (rgk_is_etuple(t)) return ((rgk_etuple *)t)->list;
  if (rgk_is_foreign(t) && (rgk_is_pair(other) || rgk_is_etuple(other)))
    return rgk_as_list(t);
  return t;
}

bool rg_equal(rg_term a, rg_term b) {
  RGK_LOCAL_STACK(st, 64);
  rgk_stack *s = &st;
  rgk_push(s, RGK_W(a));
  rgk_push(s, RGK_W(b));
  bool ok = true;
  while (ok && s->n) {
    rg_term y = RGK_T(s->v[--s->n]), x = RGK_T(s->v[--s->n]);
    if (x == y) continue;
    x = structural(x, y);
    y = structural(y, x);
    if (rgk_is_pair(x) && rgk_is_pair(y)) {
      rgk_push(s, RGK_W(rgk_cdr(x)));
      rgk_push(s, RGK_W(rgk_cdr(y)));
      rgk_push(s, RGK_W(rgk_car(x)));
      rgk_push(s, RGK_W(rgk_car(y)));
    } else {
      ok = atom_equal(x, y);
    }
  }
  return ok;
}

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t atom_hash(rg_term t) {
  if (rgk_is_int(t)) return mix(1, (uint64_t)rg_int_value(t));
  switch (rgk_type(t)) {
  case RGK_T_FLOAT: {
    double d = ((rgk_float *)t)->v;
    uint64_t u;
    if (d == 0) d = 0; /* -0.0 == 0.0 */
    if (isnan(d)) return mix(2, 0x7ff8000000000000ull); /* every NaN alike */
    /* an integral float hashes as the integer: a value equal to both (a
     * foreign constant) can then hash as either */
    if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) return mix(1, (uint64_t)(int64_t)d);
    memcpy(&u, &d, sizeof u);
    return mix(2, u);
  }
  case RGK_T_STRING: return mix(3, hash_bytes(((rgk_string *)t)->s, ((rgk_string *)t)->h.n));
  case RGK_T_SYMBOL: return mix(4, ((rgk_symbol *)t)->hash);
  case RGK_T_VAR: return mix(5, ((rgk_var *)t)->idx);
  case RGK_T_FOREIGN: {
    rgk_foreign *f = (rgk_foreign *)t;
    return f->hooks->hash ? f->hooks->hash(f->ptr) : mix(6, (uint64_t)(uintptr_t)f->ptr);
  }
  default: return mix(7, RGK_W(t));
  }
}

/* An atom's hash is its atom_hash, so a foreign hook may return rg_hash
 * of the atom it equals (see rg_foreign_hooks). */
uint64_t rg_hash(rg_term t) {
  if (!rgk_is_pair(t) && !rgk_is_etuple(t)) return atom_hash(t);
  uint64_t h = 17;
  RGK_LOCAL_STACK(st, 64);
  rgk_stack *s = &st;
  rgk_push(s, RGK_W(t));
  while (s->n) {
    rg_term x = RGK_T(s->v[--s->n]);
    if (rgk_is_etuple(x)) x = ((rgk_etuple *)x)->list;
    if (rgk_is_pair(x)) {
      h = mix(h, 11);
      rgk_push(s, RGK_W(rgk_cdr(x)));
      rgk_push(s, RGK_W(rgk_car(x)));
    } else {
      h = mix(h, atom_hash(x));
    }
  }
  return h;
}
