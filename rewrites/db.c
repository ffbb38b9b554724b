/*
 * db.c — rewrite databases and their queries.
 *
 * A database is a list of named entries (rewriters or nested databases),
 * each with tags and, in a sequence database, a position.  A query selects
 * entries by tags: a word "t" or "+t" includes the entries tagged t (or
 * named t), "&t" requires every selected rewriter to carry t, "-t" excludes
 * what is tagged or named t, and "name:word" applies one more word inside
 * the nested database `name`.  Selecting a nested database by one of its
 * tags selects all its entries (less exclusions); otherwise its entries are
 * selected one by one.  Tags of enclosing databases count as tags of their
 * entries for the "&" requirement.
 */
#include "rewrites/rewrite-impl.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct db_entry {
  const char *name;
  double pos;
  const char **tags; /* NULL-terminated, includes the name */
  rg_rewriter *rw;
  rg_rewrite_db *sub;
} db_entry;

struct rg_rewrite_db {
  const char *name;
  bool equilibrium;
  db_entry *e;
  int n, cap;
};

static rg_rewrite_db *db_new(const char *name, bool eq) {
  rg_rewrite_db *db = rg_gc_alloc(sizeof *db);
  db->name = rgr_sprintf("%s", name);
  db->equilibrium = eq;
  return db;
}

rg_rewrite_db *rg_db_sequence(const char *name) { return db_new(name, false); }
rg_rewrite_db *rg_db_equilibrium(const char *name) { return db_new(name, true); }
const char *rg_db_name(const rg_rewrite_db *db) { return db->name; }

/* Splits "a b  c" into a NULL-terminated array, with `first` prepended. */
static const char **split_words(const char *first, const char *s) {
  int n = 1;
  for (const char *p = s; p && *p; p++)
    if (*p != ' ' && (p == s || p[-1] == ' ')) n++;
  const char **v = rg_gc_alloc((size_t)(n + 1) * sizeof *v);
  int k = 0;
  if (first) v[k++] = rgr_sprintf("%s", first);
  for (const char *p = s; p && *p;) {
    while (*p == ' ') p++;
    const char *q = p;
    while (*q && *q != ' ') q++;
    if (q > p) v[k++] = rgr_sprintf("%.*s", (int)(q - p), p);
    p = q;
  }
  v[k] = NULL;
  return v;
}

static int db_add(rg_rewrite_db *db, const char *name, rg_rewriter *rw, rg_rewrite_db *sub,
                  double pos, const char *tags) {
  for (int i = 0; i < db->n; i++)
    if (!strcmp(db->e[i].name, name)) return RG_ERR_NAME;
  if (db->n == db->cap) {
    int cap = db->cap ? 2 * db->cap : 16;
    db_entry *e = rg_gc_alloc((size_t)cap * sizeof *e);
    if (db->n) memcpy(e, db->e, (size_t)db->n * sizeof *e);
    db->e = e;
    db->cap = cap;
  }
  /* keep sequence entries sorted by position (stable) */
  int at = db->n;
  while (!db->equilibrium && at > 0 && db->e[at - 1].pos > pos) at--;
  memmove(db->e + at + 1, db->e + at, (size_t)(db->n - at) * sizeof *db->e);
  db->e[at] = (db_entry){rgr_sprintf("%s", name), pos, split_words(name, tags), rw, sub};
  db->n++;
  return RG_OK;
}

int rg_db_register(rg_rewrite_db *db, const char *name, rg_rewriter *rw, double position,
                   const char *tags) {
  return db_add(db, name, rw, NULL, position, tags);
}

/* Whether db is inner, or nested somewhere in it. */
static bool contains_db(const rg_rewrite_db *db, const rg_rewrite_db *inner) {
  if (db == inner) return true;
  for (int i = 0; i < db->n; i++)
    if (db->e[i].sub && contains_db(db->e[i].sub, inner)) return true;
  return false;
}

int rg_db_register_db(rg_rewrite_db *db, const char *name, rg_rewrite_db *sub, double position,
                      const char *tags) {
  if (contains_db(sub, db)) return RG_ERR_TYPE; /* a database inside itself */
  return db_add(db, name, NULL, sub, position, tags);
}

rg_rewrite_db *rgr_db_named_by(rg_rewrite_db *db, const char *tags) {
  static const char *const phases[] = {"canonicalize", "stabilize", "specialize", NULL};
  for (const char **w = split_words(NULL, tags); *w; w++) {
    bool phase = false;
    for (int p = 0; phases[p]; p++) phase |= !strcmp(*w, phases[p]);
    for (int i = 0; phase && i < db->n; i++)
      if (db->e[i].sub && db->e[i].sub->equilibrium && !strcmp(db->e[i].sub->name, *w)) return db->e[i].sub;
  }
  return NULL;
}

static void describe(const rg_rewrite_db *db, FILE *f, int depth) {
  fprintf(f, "%*s%s (%s)\n", 2 * depth, "", db->name, db->equilibrium ? "equilibrium" : "sequence");
  for (int i = 0; i < db->n; i++) {
    const db_entry *e = &db->e[i];
    fprintf(f, "%*s", 2 * depth + 2, "");
    if (!db->equilibrium) fprintf(f, "%g ", e->pos);
    fprintf(f, "%s [", e->name);
    for (int t = 1; e->tags[t]; t++) fprintf(f, t > 1 ? " %s" : "%s", e->tags[t]);
    fprintf(f, "]%s\n", e->sub ? ":" : "");
    if (e->sub) describe(e->sub, f, depth + 2);
  }
}

void rg_db_describe(const rg_rewrite_db *db, FILE *f) { describe(db, f, 0); }

int rg_db_count(const rg_rewrite_db *db) { return db->n; }

const char *rg_db_entry(const rg_rewrite_db *db, int i, rg_rewriter **rw, rg_rewrite_db **sub,
                        const char **tags) {
  if (i < 0 || i >= db->n) return NULL;
  const db_entry *e = &db->e[i];
  if (rw) *rw = e->rw;
  if (sub) *sub = e->sub;
  if (tags) {
    const char *s = "";
    for (int t = 1; e->tags[t]; t++) s = rgr_sprintf("%s%s%s", s, t > 1 ? " " : "", e->tags[t]);
    *tags = s;
  }
  return e->name;
}

/* ------------------------------------------------------------------ queries */

typedef struct query {
  const char **include, **require, **exclude; /* NULL-terminated */
  const char **subnames, **subwords;          /* name:word pairs */
  int nsub;
  bool none;                                  /* the query `none`: select nothing */
} query;

static bool has(const char *const *v, const char *s) {
  for (; v && *v; v++)
    if (!strcmp(*v, s)) return true;
  return false;
}

static bool any_in(const char *const *tags, const char *const *set) {
  for (; tags && *tags; tags++)
    if (has(set, *tags)) return true;
  return false;
}

static const char **append(const char **v, const char *s) {
  int n = 0;
  while (v && v[n]) n++;
  const char **w = rg_gc_alloc((size_t)(n + 2) * sizeof *w);
  for (int i = 0; i < n; i++) w[i] = v[i];
  w[n] = s;
  return w;
}

static int add_word(rg_ctx *C, query *q, const char *w) {
  const char *colon = strchr(w, ':');
  if (colon) {
    if (colon == w || !colon[1]) return rg_error(C, RG_ERR_SYNTAX, "bad sub-query '%s'", w);
    q->subnames = append(q->subnames, rgr_sprintf("%.*s", (int)(colon - w), w));
    q->subwords = append(q->subwords, colon + 1);
    q->nsub++;
    return RG_OK;
  }
  const char *t = w + (*w == '+' || *w == '-' || *w == '&');
  if (!*t) return rg_error(C, RG_ERR_SYNTAX, "empty tag in query");
  if (*w == '-') q->exclude = append(q->exclude, t);
  else if (*w == '&') q->require = append(q->require, t);
  else q->include = append(q->include, t);
  return RG_OK;
}

/* `none` selects no rewriter at all; it stands alone. */
static int parse_query(rg_ctx *C, const char *s, query *q) {
  memset(q, 0, sizeof *q);
  const char **words = split_words(NULL, s);
  if (!words[0]) return rg_error(C, RG_ERR_SYNTAX, "empty rewrite query");
  for (int i = 0; words[i]; i++)
    if (!strcmp(words[i], "none")) {
      if (i || words[1]) return rg_error(C, RG_ERR_SYNTAX, "rewrite query: 'none' stands alone");
      q->none = true;
      return RG_OK;
    }
  for (int i = 0; words[i]; i++) {
    int rc = add_word(C, q, words[i]);
    if (rc) return rc;
  }
  return RG_OK;
}

/* The query for a nested database: this one plus its name:word parts. */
static query sub_query(rg_ctx *C, const query *q, const char *name) {
  query s = *q;
  for (int i = 0; i < q->nsub; i++)
    if (!strcmp(q->subnames[i], name)) add_word(C, &s, q->subwords[i]);
  return s;
}

static rgr_selection *select_db(rg_ctx *C, const rg_rewrite_db *db, const query *q, bool inherited,
                                const char **ctags);

static bool selected_leaf(const db_entry *e, const query *q, bool match, const char **ctags) {
  if (!match) return false;
  for (const char *const *r = q->require; r && *r; r++)
    if (!has(e->tags, *r) && !has(ctags, *r)) return false;
  return true;
}

static void push_item(rgr_selection *s, rgr_item it) {
  rgr_item *v = rg_gc_alloc((size_t)(s->n + 1) * sizeof *v);
  if (s->n) memcpy(v, s->items, (size_t)s->n * sizeof *v);
  v[s->n++] = it;
  s->items = v;
}

static rgr_selection *select_db(rg_ctx *C, const rg_rewrite_db *db, const query *q, bool inherited,
                                const char **ctags) {
  rgr_selection *s = rg_gc_alloc(sizeof *s);
  s->name = db->name;
  s->equilibrium = db->equilibrium;
  for (int i = 0; i < db->n; i++) {
    const db_entry *e = &db->e[i];
    if (any_in(e->tags, q->exclude) || (e->rw && has(q->exclude, e->rw->name))) continue;
    bool match = inherited || any_in(e->tags, q->include);
    if (e->sub) {
      const char **tags = ctags;
      for (int t = 0; e->tags[t]; t++) tags = append(tags, e->tags[t]);
      query sq = sub_query(C, q, e->name);
      rgr_selection *sub = select_db(C, e->sub, &sq, match, tags);
      if (sub->n) push_item(s, (rgr_item){e->name, NULL, sub});
    } else if (selected_leaf(e, q, match, ctags)) {
      push_item(s, (rgr_item){e->name, e->rw, NULL});
    }
  }
  return s;
}

/* Every word of the query must name a tag or entry somewhere. */
static bool known_tag(const rg_rewrite_db *db, const char *t) {
  if (!strcmp(db->name, t)) return true;
  for (int i = 0; i < db->n; i++) {
    if (has(db->e[i].tags, t)) return true;
    if (db->e[i].sub && known_tag(db->e[i].sub, t)) return true;
  }
  return false;
}

static int check_known(rg_ctx *C, const rg_rewrite_db *db, const char *const *words) {
  for (; words && *words; words++)
    if (!known_tag(db, *words))
      return rg_error(C, RG_ERR_NAME, "rewrite query: no rewriter or tag named '%s' in %s", *words,
                      db->name);
  return RG_OK;
}

/* The database named `name` within db (db itself included), or NULL. */
static const rg_rewrite_db *find_db(const rg_rewrite_db *db, const char *name) {
  if (!strcmp(db->name, name)) return db;
  for (int i = 0; i < db->n; i++) {
    const rg_rewrite_db *d = db->e[i].sub ? find_db(db->e[i].sub, name) : NULL;
    if (d) return d;
  }
  return NULL;
}

/* Every word of q names something of db, and every name:word part a
 * database within db and (a requirement, which enclosing databases' tags
 * meet, aside) something of that database. */
static int check_query(rg_ctx *C, const rg_rewrite_db *db, const query *q) {
  if (check_known(C, db, q->include) || check_known(C, db, q->require) || check_known(C, db, q->exclude))
    return rg_errcode(C);
  for (int i = 0; i < q->nsub; i++) {
    const rg_rewrite_db *sub = find_db(db, q->subnames[i]);
    if (!sub) /* a tag or a rule has no words of its own */
      return rg_error(C, RG_ERR_NAME, "rewrite query: no database named '%s' in %s (in '%s:%s')",
                      q->subnames[i], db->name, q->subnames[i], q->subwords[i]);
    query part;
    memset(&part, 0, sizeof part);
    int rc = add_word(C, &part, q->subwords[i]);
    if (rc || (rc = check_query(C, sub && !part.require ? sub : db, &part))) return rc;
  }
  return RG_OK;
}

rg_rewriter *rg_db_query(rg_ctx *C, rg_rewrite_db *db, const char *qs) {
  query q;
  if (parse_query(C, qs, &q) || check_query(C, db, &q)) return NULL;
  rg_rewriter *rw = rgr_rewriter_new(rgr_sprintf("%s{%s}", db->name, qs), RW_SELECTION);
  if (q.none || has(q.exclude, db->name)) {
    rw->sel = rg_gc_alloc(sizeof *rw->sel);
    rw->sel->name = db->name;
    rw->sel->equilibrium = db->equilibrium;
    return rw;
  }
  /* what no word includes stays out (Aesara's optdb); the database's own
   * name includes all of it, as a nested database's name does */
  query top = sub_query(C, &q, db->name); /* `std:-mul-one` */
  rw->sel = select_db(C, db, &top, has(top.include, db->name), NULL);
  return rw;
}
