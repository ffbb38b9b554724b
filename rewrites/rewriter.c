/*
 * rewriter.c — rewriter objects: node rewriters with the ops they track,
 * graph rewriters, and the merge rewriter.
 */
#include "rewrites/rewrite-impl.h"

#include <stdio.h>
#include <time.h>

double rgr_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *gc_strdup(const char *s) {
  size_t n = strlen(s);
  char *d = rg_gc_alloc(n + 1);
  memcpy(d, s, n + 1);
  return d;
}

rg_rewriter *rgr_rewriter_new(const char *name, int kind) {
  rg_rewriter *rw = rg_gc_alloc(sizeof *rw);
  rw->name = gc_strdup(name ? name : "unnamed");
  rw->kind = kind;
  return rw;
}

void rgr_track(rg_rewriter *rw, rg_opcode c) { rw->tracks[c / 64] |= (uint64_t)1 << (c % 64); }

rg_rewriter *rg_node_rewriter(const char *name, int ntracks, const rg_opcode *tracks,
                              rg_node_rewrite_fn fn, void *ud) {
  rg_rewriter *rw = rgr_rewriter_new(name, RW_NODE);
  rw->nfn = fn;
  rw->ud = ud;
  rg_rewriter_set_tracks(rw, ntracks, tracks);
  return rw;
}

void rg_rewriter_set_tracks(rg_rewriter *rw, int ntracks, const rg_opcode *tracks) {
  rw->tracks_derived = false;
  memset(rw->tracks, 0, sizeof rw->tracks);
  rw->track_all = ntracks == 0 && rw->nopaque == 0;
  for (int i = 0; i < ntracks; i++) rgr_track(rw, tracks[i]);
}

void rg_rewriter_track_opaque(rg_rewriter *rw, const char *name) {
  const char **v = rg_gc_alloc((size_t)(rw->nopaque + 1) * sizeof *v);
  if (rw->nopaque) memcpy(v, rw->opaque, (size_t)rw->nopaque * sizeof *v);
  v[rw->nopaque++] = gc_strdup(name);
  rw->opaque = v;
  rw->tracks_derived = false;
  rw->track_all = false;
  rgr_track(rw, RG_OP_OPAQUE);
}

rg_rewriter *rg_graph_rewriter(const char *name, rg_graph_rewrite_fn fn, void *ud) {
  rg_rewriter *rw = rgr_rewriter_new(name, RW_GRAPH);
  rw->gfn = fn;
  rw->ud = ud;
  return rw;
}

const char *rg_rewriter_name(const rg_rewriter *rw) { return rw->name; }
const char *rg_rewriter_describe(const rg_rewriter *rw) { return rw->describe ? rw->describe : ""; }
const char *rg_rewriter_examples(const rg_rewriter *rw) { return rw->examples; }

void rg_rewriter_set_info(rg_rewriter *rw, const char *describe, const char *examples) {
  if (describe) rw->describe = gc_strdup(describe);
  if (examples) rw->examples = gc_strdup(examples);
}

rg_term rg_rewriter_relation(const rg_rewriter *rw, bool *backwards) {
  if (backwards) *backwards = rw->backwards;
  return rw->relation;
}

/* ------------------------------------------------------------------ merge */

/* While tracing, a feature sees each value merged away (once: every
 * reader of it changes in turn). */
typedef struct merge_watch {
  rg_feature f;
  rg_rewrite_run *run;
  const rg_rewriter *rw;
  const rg_variable *last;
} merge_watch;

static void on_merge(rg_fgraph *fg, rg_node *node, int i, rg_variable *old, rg_variable *new_,
                     const char *reason, rg_feature *f) {
  (void)fg, (void)reason;
  merge_watch *w = (merge_watch *)f;
  if (old == w->last) return;
  w->last = old;
  rgr_trace_merge(w->run, w->rw, node, i, old, new_);
}

static int merge_fn(rg_rewrite_run *run, rg_fgraph *fg, void *ud) {
  size_t merged = 0;
  merge_watch w = {.f = {.name = "merge trace", .on_change_input = on_merge}, .run = run, .rw = ud};
  bool watch = run->opts.trace && rg_fgraph_attach(fg, &w.f) == RG_OK;
  int rc = rg_fgraph_merge(fg, &merged);
  if (watch) rg_fgraph_detach(fg, &w.f);
  return rc < 0 ? rc : (int)merged;
}

rg_rewriter *rgr_merge_rewriter(const char *name) {
  rg_rewriter *rw = rg_graph_rewriter(name, merge_fn, NULL);
  rw->ud = rw; /* the trace names it */
  return rw;
}
