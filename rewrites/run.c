/*
 * run.c — a rewrite run: starting it, the sequence driver, and what it
 * records (profile per pass and per rewriter, the trace, provenance).
 */
#include "rewrites/rewrite-impl.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "kanren/kanren-impl.h"

/* ------------------------------------------------------------------ passes and statistics */

rgr_pass *rgr_pass_begin(rg_rewrite_run *run, const char *name, bool equilibrium) {
  rgr_pass *p = rg_gc_alloc(sizeof *p);
  p->name = name;
  p->depth = run->depth;
  p->equilibrium = equilibrium;
  p->nodes_start = p->nodes_max = rg_fgraph_nnodes(run->fg);
  p->seconds = -rgr_now();
  if (run->last_pass) run->last_pass->next = p;
  else run->passes = p;
  run->last_pass = p;
  return p;
}

void rgr_pass_end(rg_rewrite_run *run, rgr_pass *p) {
  p->seconds += rgr_now();
  p->nodes_end = rg_fgraph_nnodes(run->fg);
  if (p->nodes_end > p->nodes_max) p->nodes_max = p->nodes_end;
}

/* The stats of rw in the current pass, made at its first attempt and kept
 * in the order of first attempts (the order the profile prints). */
rgr_stat *rgr_stat_of(rg_rewrite_run *run, const rg_rewriter *rw) {
  rgr_stat **link = &run->cur->stats;
  for (; *link; link = &(*link)->next)
    if ((*link)->rw == rw) return *link;
  rgr_stat *s = rg_gc_alloc(sizeof *s);
  s->rw = rw;
  *link = s;
  return s;
}

/* ------------------------------------------------------------------ trace and provenance */

static void put_origin(rg_rewrite_run *run, rgr_origin *o) {
  if ((run->norigins + 1) * 2 > run->cap_origins) {
    size_t cap = run->cap_origins ? run->cap_origins * 2 : 256;
    rgr_origin **v = rg_gc_alloc(cap * sizeof *v);
    for (size_t i = 0; i < run->cap_origins; i++) {
      rgr_origin *x = run->origins[i];
      if (!x) continue;
      size_t h = (size_t)(x->node_id * 0x9e3779b97f4a7c15ull) & (cap - 1);
      while (v[h]) h = (h + 1) & (cap - 1);
      v[h] = x;
    }
    run->origins = v;
    run->cap_origins = cap;
  }
  size_t h = (size_t)(o->node_id * 0x9e3779b97f4a7c15ull) & (run->cap_origins - 1);
  while (run->origins[h] && run->origins[h]->node_id != o->node_id) h = (h + 1) & (run->cap_origins - 1);
  if (!run->origins[h]) run->norigins++;
  run->origins[h] = o;
}

static const rgr_origin *get_origin(const rg_rewrite_run *run, uint64_t id) {
  if (!run->cap_origins) return NULL;
  size_t h = (size_t)(id * 0x9e3779b97f4a7c15ull) & (run->cap_origins - 1);
  while (run->origins[h]) {
    if (run->origins[h]->node_id == id) return run->origins[h];
    h = (h + 1) & (run->cap_origins - 1);
  }
  return NULL;
}

static void append_event(rgr_event **first, rgr_event **last, rgr_event *e) {
  if (*last) (*last)->next = e;
  else *first = e;
  *last = e;
}

#define SHOW_DEPTH 4      /* levels of operations rgr_show prints */
#define SHOW_TERM_MAX 400 /* characters of a term rgr_show_term keeps */

const char *rgr_show(rg_variable *v) {
  char *s = rg_pprint_brief(v, SHOW_DEPTH);
  return s ? s : "?";
}

const char *rgr_show_term(rg_term t) {
  const char *s = rg_to_string(t);
  return strlen(s) > SHOW_TERM_MAX ? rgr_sprintf("%.*s ...", SHOW_TERM_MAX, s) : s;
}

/* Appends a trace entry: rule rw rewrote node_id from before to new_. */
static rgr_event *trace_event(rg_rewrite_run *run, const rg_rewriter *rw, uint64_t node_id,
                              const char *before, rg_variable *new_) {
  rgr_event *e = rg_gc_alloc(sizeof *e);
  e->rule = rw->name;
  e->node_id = node_id;
  e->output = -1;
  e->before = before;
  e->after = rgr_show(new_);
  e->subst = run->subst;
  append_event(&run->events, &run->last_event, e);
  return e;
}

void rgr_trace_merge(rg_rewrite_run *run, const rg_rewriter *rw, rg_node *client, int index,
                     rg_variable *old, rg_variable *new_) {
  if (!run->opts.trace) return;
  rg_node *gone = old->owner ? old->owner : client;
  rgr_event *e = trace_event(run, rw, gone ? gone->id : 0, rgr_show(old), new_);
  if (!gone) e->output = index; /* an output of the graph changed, no node */
  e->subst = new_->owner ? rgr_sprintf("the same value as node %llu", (unsigned long long)new_->owner->id)
                         : "an equal constant";
}

void rgr_record(rg_rewrite_run *run, const rg_rewriter *rw, rg_node *node, int nout,
                rg_variable *const *olds, rg_variable *const *news, int ncreated,
                rg_node *const *created) {
  run->rewrites++;
  const char *before = NULL;
  if (run->opts.trace || run->opts.provenance) before = rgr_show(olds[0]);
  if (run->opts.trace) {
    rgr_event *e = trace_event(run, rw, node->id, before, news[0]);
    e->created = rg_gc_alloc((size_t)(ncreated ? ncreated : 1) * sizeof *e->created);
    for (int k = 0; k < ncreated; k++)
      if (created[k]->fgraph == run->fg) e->created[e->ncreated++] = created[k]->id;
  }
  run->subst = NULL; /* the note was this rewrite's */
  if (run->opts.provenance) {
    for (int k = 0; k < ncreated; k++) {
      rgr_origin *o = rg_gc_alloc(sizeof *o);
      o->node_id = created[k]->id;
      o->rule = rw->name;
      o->nreplaced = 1;
      o->replaced = rg_gc_alloc(sizeof(uint64_t));
      o->replaced[0] = node->id;
      o->before = before;
      put_origin(run, o);
    }
  }
  (void)nout;
}

void rgr_note(rg_rewrite_run *run, const char *what, const char *fmt, ...) {
  if (!run->opts.trace) return;
  va_list ap;
  va_start(ap, fmt);
  const char *text = rgk_vsprintf(fmt, ap);
  va_end(ap);
  run->subst = run->subst ? rgr_sprintf("%s; %s = %s", run->subst, what, text) : rgr_sprintf("%s = %s", what, text);
}

void rgr_reject(rg_rewrite_run *run, const rg_rewriter *rw, rg_node *node, rg_variable *old,
                rg_variable *new_) {
  int64_t k = run->rejected++;
  if (k >= RGR_MAX_REJECTS && !run->opts.trace) return;
  rgr_event *e = rg_gc_alloc(sizeof *e);
  e->output = -1;
  e->rule = rw->name;
  e->node_id = node ? node->id : 0;
  e->before = rgr_show(old);
  e->after = rgr_show(new_);
  e->subst = run->subst;
  e->why = rgr_sprintf("%s", rg_errmsg(run->C));
  if (k < RGR_MAX_REJECTS) append_event(&run->rejects, &run->last_reject, e);
  if (run->opts.trace) {
    rgr_event *t = rg_gc_alloc(sizeof *t);
    *t = *e;
    t->next = NULL;
    append_event(&run->events, &run->last_event, t);
  }
  run->subst = NULL;
}

static void print_ids(FILE *f, const char *label, int n, const uint64_t *ids) {
  fprintf(f, "%s", label);
  for (int k = 0; k < n; k++) fprintf(f, " %llu", (unsigned long long)ids[k]);
  fputc('\n', f);
}

void rg_rewrite_trace(const rg_rewrite_run *run, FILE *f) {
  int i = 0;
  for (const rgr_event *e = run->events; e; e = e->next, i++) {
    if (e->why) {
      fprintf(f, "%d. %s rejected on node %llu: %s => %s\n   because %s\n", i + 1, e->rule,
              (unsigned long long)e->node_id, e->before, e->after, e->why);
      continue;
    }
    if (e->output >= 0)
      fprintf(f, "%d. %s rewrote output %d of the graph: %s => %s\n", i + 1, e->rule, e->output, e->before, e->after);
    else
      fprintf(f, "%d. %s rewrote node %llu: %s => %s\n", i + 1, e->rule, (unsigned long long)e->node_id,
              e->before, e->after);
    if (e->subst) fprintf(f, "   with %s\n", e->subst);
    if (e->ncreated) print_ids(f, "   made nodes", e->ncreated, e->created);
  }
  if (!run->events) fprintf(f, "no rewrites\n");
}

void rg_rewrite_rejections(const rg_rewrite_run *run, FILE *f) {
  for (const rgr_event *e = run->rejects; e; e = e->next)
    fprintf(f, "%s rejected on node %llu: %s => %s: %s\n", e->rule, (unsigned long long)e->node_id,
            e->before, e->after, e->why);
  if (run->rejected > RGR_MAX_REJECTS)
    fprintf(f, "... and %lld more\n", (long long)(run->rejected - RGR_MAX_REJECTS));
}

static int cmp_id(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Provenance: the ids of the nodes the run starts from. */
static void note_input_ids(rg_rewrite_run *run) {
  size_t n = rg_fgraph_nnodes(run->fg), k = 0;
  run->input_ids = rg_gc_alloc((n + 1) * sizeof *run->input_ids);
  for (rg_node *x = rg_fgraph_first(run->fg); x && k < n; x = rg_fgraph_next(x)) run->input_ids[k++] = x->id;
  qsort(run->input_ids, k, sizeof *run->input_ids, cmp_id);
  run->ninput_ids = k;
}

static bool input_node(const rg_rewrite_run *run, uint64_t id) {
  return run->input_ids && bsearch(&id, run->input_ids, run->ninput_ids, sizeof id, cmp_id);
}

int rg_rewrite_why(const rg_rewrite_run *run, uint64_t id, FILE *f) {
  const rgr_origin *o = get_origin(run, id);
  if (!o) {
    if (!input_node(run, id))
      return rg_error(run->C, RG_ERR_NAME, "no node %llu in the input graph or made by the rewrites%s",
                      (unsigned long long)id, run->input_ids ? "" : " (provenance was not recorded)");
    fprintf(f, "node %llu comes from the input graph (no rewrite made it)\n", (unsigned long long)id);
    return RG_OK;
  }
  for (int depth = 0; o && depth < 10000; depth++) {
    fprintf(f, "%*snode %llu was made by %s, replacing node %llu: %s\n", 2 * depth, "",
            (unsigned long long)o->node_id, o->rule, (unsigned long long)o->replaced[0], o->before);
    const rgr_origin *up = get_origin(run, o->replaced[0]);
    if (!up) {
      fprintf(f, "%*snode %llu comes from the input graph\n", 2 * depth + 2, "",
              (unsigned long long)o->replaced[0]);
      break;
    }
    o = up;
  }
  return RG_OK;
}

/* ------------------------------------------------------------------ profile */

static void print_stats(FILE *f, const rgr_pass *p) {
  int never = 0;
  for (const rgr_stat *s = p->stats; s; s = s->next) {
    if (!s->applied) {
      never++;
      continue;
    }
    fprintf(f, "%*s  %-32s %9.6f s %8lld applied %8lld created %8lld tried", 2 * p->depth, "",
            s->rw->name, s->seconds, (long long)s->applied, (long long)s->created,
            (long long)s->attempts);
    if (s->rejected) fprintf(f, " %lld rejected", (long long)s->rejected);
    fputc('\n', f);
  }
  if (!never) return;
  fprintf(f, "%*s  never applied:\n", 2 * p->depth, "");
  for (const rgr_stat *s = p->stats; s; s = s->next)
    if (!s->applied) {
      fprintf(f, "%*s    %-30s %9.6f s %8lld tried", 2 * p->depth, "", s->rw->name, s->seconds,
              (long long)s->attempts);
      if (s->rejected) fprintf(f, " %lld rejected", (long long)s->rejected);
      fputc('\n', f);
    }
}

void rg_rewrite_profile(const rg_rewrite_run *run, FILE *f) {
  fprintf(f, "rewrite profile: %s\n", run->stop_msg ? run->stop_msg : "");
  for (const rgr_pass *p = run->passes; p; p = p->next) {
    fprintf(f, "%*s%s (%s): %.6f s, nodes %zu -> %zu (max %zu), %lld rewrites%s%s\n", 2 * p->depth,
            "", p->name, p->equilibrium ? "equilibrium" : "sequence", p->seconds, p->nodes_start,
            p->nodes_end, p->nodes_max, (long long)p->rewrites, p->stop ? ", " : "",
            p->stop ? p->stop : "");
    print_stats(f, p);
  }
}

/* ------------------------------------------------------------------ applying node rewriters */

int rgr_attempt(rg_rewrite_run *run, rg_rewriter *rw, rgr_stat *st, rg_node *node,
                rg_variable **out) {
  memset(out, 0, (size_t)(node->nout > 0 ? node->nout : 1) * sizeof *out);
  bool timed = run->opts.profile;
  double t0 = timed ? rgr_now() : 0;
  run->subst = NULL;
  int rc = rw->nfn(run, node, out, rw->ud);
  st->attempts++;
  if (timed) st->seconds += rgr_now() - t0;
  return rc;
}

/* Whether v is output j of a node computing what `node` does: the same
 * op over the same inputs, of the same type (a node rebuilt only to learn
 * a narrower type is a change). */
static bool same_as(const rg_node *node, int j, const rg_variable *v) {
  const rg_node *m = v->owner;
  if (!m || m->nin != node->nin || m->nout != node->nout || m->outputs[j] != v) return false;
  for (int i = 0; i < m->nin; i++)
    if (m->inputs[i] != node->inputs[i]) return false;
  return rg_op_equal(m->op, node->op) && rg_type_equal(v->type, node->outputs[j]->type);
}

/* A result that is the node's output itself, or the same expression built
 * again (a normalising rule on a term already in normal form), is no
 * change; nor is a result for an output nothing reads (refine-types
 * learning the size of a Scan's unread output). */
int rgr_changes(const rg_node *node, rg_variable *const *out, rg_variable **olds,
                rg_variable **news) {
  int n = 0;
  for (int j = 0; j < node->nout; j++)
    if (out[j] && out[j] != node->outputs[j] && node->outputs[j]->nclients && !same_as(node, j, out[j])) {
      olds[n] = node->outputs[j];
      news[n++] = out[j];
    }
  return n;
}

bool rgr_types_ok(rg_rewrite_run *run, const rg_rewriter *rw, rgr_stat *st, int n,
                  rg_variable *const *olds, rg_variable *const *news) {
  for (int i = 0; i < n; i++)
    if (!rg_type_stands_for(news[i]->type, olds[i]->type)) {
      st->rejected++;
      rg_error(run->C, RG_ERR_TYPE, "the result has type %s, the node %s",
               rg_type_str(news[i]->type), rg_type_str(olds[i]->type));
      rgr_reject(run, rw, olds[i]->owner, olds[i], news[i]);
      return false;
    }
  return true;
}

void rgr_note_size(rg_rewrite_run *run, const rg_fgraph *fg) {
  size_t nn = rg_fgraph_nnodes(fg);
  if (nn > run->max_nodes) run->max_nodes = nn;
  if (nn > run->cur->nodes_max) run->cur->nodes_max = nn;
}

/* ------------------------------------------------------------------ running */

static int run_graph_rewriter(rg_rewrite_run *run, rg_rewriter *rw) {
  rgr_stat *s = run->cur ? rgr_stat_of(run, rw) : NULL;
  double t0 = rgr_now();
  int rc = rw->gfn(run, run->fg, rw->ud);
  if (s) {
    s->seconds += rgr_now() - t0;
    s->attempts++;
    if (rc > 0) s->applied += rc;
  }
  if (rc > 0) run->rewrites += rc;
  return rc;
}

static int run_selection(rg_rewrite_run *run, rgr_selection *sel) {
  if (sel->equilibrium) return rgr_equilibrium(run, sel);
  rgr_pass *outer = run->cur;
  rgr_pass *p = rgr_pass_begin(run, sel->name, false);
  run->cur = p;
  run->depth++;
  int total = 0, rc = 0;
  for (int i = 0; i < sel->n && rc >= 0 && run->stop == RG_STOP_EQUILIBRIUM; i++) {
    rgr_item *it = &sel->items[i];
    rc = it->sub ? run_selection(run, it->sub) : rgr_run_rewriter(run, it->rw);
    if (rc > 0) total += rc;
  }
  run->depth--;
  run->cur = p;
  p->rewrites = total;
  rgr_pass_end(run, p);
  run->cur = outer;
  return rc < 0 ? rc : total;
}

int rgr_run_rewriter(rg_rewrite_run *run, rg_rewriter *rw) {
  switch (rw->kind) {
  case RW_GRAPH: return run_graph_rewriter(run, rw);
  case RW_SELECTION: return run_selection(run, rw->sel);
  default: {
    /* a lone node rewriter runs to equilibrium */
    rgr_item it = {rw->name, rw, NULL};
    rgr_selection sel = {rw->name, true, 1, &it};
    return rgr_equilibrium(run, &sel);
  }
  }
}

void rgr_hold_query(rg_rewrite_run *run, rg_query *Q, uint64_t *mark) {
  if (*mark == run->serial) return;
  *mark = run->serial;
  if (!run->held.a) run->held.a = &rgk_gc;
  int rc = rg_ptrs_push(&run->held, Q);
  assert(rc == 0 && "the collector's allocator does not fail");
  (void)rc;
}

/* What the run leaves in longer-lived places (rules' kept queries, the
 * context's scratch stacks) would keep its graph alive after the caller
 * drops it: let go of it. */
static void release_held(rg_rewrite_run *run) {
  for (size_t i = 0; i < run->held.n; i++) rg_query_release(run->held.v[i]);
  run->held.n = 0;
  rg_ctx_release_scratch(run->C);
}

rg_rewrite_run *rg_rewrite(rg_fgraph *fg, rg_rewriter *rw, const rg_rewrite_opts *opts) {
  static uint64_t serials;
  rg_rewrite_run *run = rg_gc_alloc(sizeof *run);
  run->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  run->C = rg_fgraph_ctx(fg);
  run->fg = fg;
  if (opts) run->opts = *opts;
  if (run->opts.max_use_ratio <= 0) run->opts.max_use_ratio = 8;
  run->max_nodes = run->start_nodes = rg_fgraph_nnodes(fg);
  if (run->opts.provenance) note_input_ids(run);
  int rc = rgr_run_rewriter(run, rw);
  release_held(run);
  if (rc < 0 && run->stop == RG_STOP_EQUILIBRIUM) {
    run->stop = RG_STOP_ERROR;
    run->stop_msg = rgr_sprintf("error: %s", rg_errmsg(run->C));
  }
  if (!run->stop_msg)
    run->stop_msg = rgr_sprintf("equilibrium after %lld rewrite%s", (long long)run->rewrites,
                                run->rewrites == 1 ? "" : "s");
  return run;
}

rg_stop_reason rg_rewrite_stop(const rg_rewrite_run *run) { return run->stop; }
const char *rg_rewrite_stop_message(const rg_rewrite_run *run) { return run->stop_msg; }
int64_t rg_rewrite_count(const rg_rewrite_run *run) { return run->rewrites; }
int64_t rg_rewrite_rejected(const rg_rewrite_run *run) { return run->rejected; }
rg_ctx *rg_rewrite_ctx(const rg_rewrite_run *run) { return run->C; }
rg_fgraph *rg_rewrite_graph(const rg_rewrite_run *run) { return run->fg; }
const rg_rewrite_opts *rg_rewrite_options(const rg_rewrite_run *run) { return &run->opts; }
