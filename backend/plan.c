/*
 * plan.c — the memory plan of a linked program: buffers of values whose
 * lifetimes do not overlap share memory, decided once at link time.
 *
 * Which values are planned.  An output of a host thunk on the CPU backend
 * whose static type gives its size, that the kernel writes into a fresh
 * buffer (rgb_output), and that nothing lets escape the call.  Values that
 * may share storage — a view and what it views, an in-place output and
 * the input it overwrites, and conservatively every output and input of
 * ops whose kernels may return an input (ifelse, Scan, op_from_graph,
 * transfers, opaque ops) — form one *storage class* (a union-find over
 * cells).  A class is planned only when every member is an intermediate
 * computed on the host: one holding a program output, a graph input or a
 * constant may be read after the call or is not ours to reuse.
 *
 * Lifetimes.  A class lives from the first thunk writing a member to the
 * last thunk reading one, in schedule order; a planned buffer lives as
 * long as its class, so no view of it outlives it.  An input and an
 * output of the same thunk overlap (the kernel reads one while writing
 * the other): a buffer is placed before its producer runs and freed only
 * after its class's last reader.
 *
 * Placement.  A simulation of the schedule with a best-fit free list over
 * one arena (offsets 64-byte aligned, neighbouring free blocks
 * coalesced): linear in the thunks times the free blocks, which stay few.
 * The arena is allocated with the program.
 *
 * At run time (runtime.c) rgb_output hands a planned output a tensor
 * wrapping its place in the arena; the wrapper stays in its cell between
 * calls, so a call after the first allocates nothing for planned values
 * and planned cells are not released.  Any other shape or a larger size
 * than planned falls back to an ordinary buffer.  The plan holds only for
 * runs in schedule order: partial runs of a planned program follow it
 * too (vm.c), and programs with ifelse, run by demand, are not planned.
 */
#include "backend/backend-impl.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_ALIGN 64

/* Whether output j of thunk t may share storage with input i at run
 * time: the op's view and destroy maps, and every input of ops whose
 * kernels may hand one back; the families listed write fresh buffers
 * otherwise. */
static bool may_alias(const rgb_thunk *t, int j, int i) {
  if (t->kind != RGB_T_KERNEL) return true; /* ifelse, transfers */
  const rgb_node *n = &t->node;
  if ((n->inplace == i && j == 0) || n->view_of == i) return true;
  if (n->code == RG_OP_COMPOSITE) return false;
  switch (rg_opcode_family(n->code)) {
  case RG_FAM_ELEMWISE: case RG_FAM_REDUCE: case RG_FAM_BLAS: case RG_FAM_SHAPE: return false;
  default: return true;
  }
}

static int32_t uf_find(int32_t *uf, int32_t c) {
  while (uf[c] != c) c = uf[c] = uf[uf[c]];
  return c;
}

static void uf_union(int32_t *uf, int32_t a, int32_t b) {
  a = uf_find(uf, a);
  b = uf_find(uf, b);
  if (a != b) uf[a < b ? b : a] = a < b ? a : b;
}

/* The bytes of a static type, 0 when a dimension is unknown. */
static size_t static_bytes(const rgb_vtype *t) {
  size_t n = rg_dtype_size(t->dtype);
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0 || __builtin_mul_overflow(n, (size_t)t->shape[d], &n)) return 0;
  }
  return n;
}

/* Whether output j of thunk t gets a place: a fresh buffer the CPU
 * backend allocates on the host. */
static bool fresh_host_output(const rgb_program *p, const rgb_thunk *t, int j) {
  if (t->kind != RGB_T_KERNEL || t->x.buft || p->cell_dev[t->out_cells[j]] != RG_DEVICE_HOST) return false;
  if (t->node.join_slot && j < t->node.nout - 1 && t->node.join_slot[j] >= 0) return false; /* a view */
  for (int i = 0; i < t->node.nin; i++)
    if (may_alias(t, j, i)) return false;
  return static_bytes(&t->node.out[j]) > 0;
}

/* ------------------------------------------------------------------ storage classes */

typedef struct classes {
  int32_t *uf;       /* per cell: union-find parent */
  int32_t *last;     /* per root: last thunk reading (or writing) a member */
  bool *ok;          /* per root: every member is a host intermediate */
} classes;

static void classes_free(classes *s) {
  rg_free(s->uf);
  rg_free(s->last);
  rg_free(s->ok);
}

static bool classes_build(const rgb_program *p, classes *s) {
  size_t n = (size_t)p->ncells;
  s->uf = rg_malloc((n + 1) * sizeof *s->uf);
  s->last = rg_malloc((n + 1) * sizeof *s->last);
  s->ok = rg_malloc(n + 1);
  if (!s->uf || !s->last || !s->ok) return false;
  for (int32_t c = 0; c < p->ncells; c++) s->uf[c] = c;
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    for (int j = 0; j < t->node.nout; j++)
      for (int i = 0; i < t->node.nin; i++)
        if (may_alias(t, j, i)) uf_union(s->uf, t->out_cells[j], t->in_cells[i]);
    for (int j = 0; t->node.join_slot && j < t->node.nout - 1; j++) /* parts view the joined value */
      if (t->node.join_slot[j] >= 0) uf_union(s->uf, t->out_cells[j], t->out_cells[t->node.nout - 1]);
  }
  for (int32_t c = 0; c < p->ncells; c++) s->last[c] = -1, s->ok[c] = true;
  for (int32_t c = 0; c < p->ncells; c++) {
    int32_t r = uf_find(s->uf, c), k = p->producer[c];
    if (k < 0 || p->cell_dev[c] != RG_DEVICE_HOST) s->ok[r] = false;
    if (k > s->last[r]) s->last[r] = k;
  }
  for (int32_t i = 0; i < p->nout; i++) s->ok[uf_find(s->uf, p->out_cells[i])] = false;
  for (int32_t k = 0; k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    for (int i = 0; i < t->node.nin; i++) {
      int32_t r = uf_find(s->uf, t->in_cells[i]);
      if (k > s->last[r]) s->last[r] = k;
    }
  }
  return true;
}

/* ------------------------------------------------------------------ placement */

/* Free blocks of the arena, sorted by offset, neighbours coalesced. */
typedef struct block { size_t at, size; } block;
typedef struct arena {
  block *free;
  size_t nfree, top;
} arena;

/* Best fit among the free blocks, else the end of the arena (growing a
 * free block that ends there). */
static size_t arena_take(arena *a, size_t size) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < a->nfree; i++)
    if (a->free[i].size >= size && (best == SIZE_MAX || a->free[i].size < a->free[best].size)) best = i;
  if (best != SIZE_MAX) {
    size_t at = a->free[best].at;
    a->free[best].at += size;
    a->free[best].size -= size;
    if (!a->free[best].size) memmove(&a->free[best], &a->free[best + 1], (--a->nfree - best) * sizeof(block));
    return at;
  }
  if (a->nfree && a->free[a->nfree - 1].at + a->free[a->nfree - 1].size == a->top) {
    size_t at = a->free[--a->nfree].at;
    a->top = at + size;
    return at;
  }
  size_t at = a->top;
  a->top += size;
  return at;
}

/* Returns [at, at + size) to the free list (room for one more block is
 * reserved by the caller). */
static void arena_give(arena *a, size_t at, size_t size) {
  size_t i = 0;
  while (i < a->nfree && a->free[i].at < at) i++;
  bool left = i > 0 && a->free[i - 1].at + a->free[i - 1].size == at;
  bool right = i < a->nfree && at + size == a->free[i].at;
  if (left && right) {
    a->free[i - 1].size += size + a->free[i].size;
    memmove(&a->free[i], &a->free[i + 1], (--a->nfree - i) * sizeof(block));
  } else if (left) {
    a->free[i - 1].size += size;
  } else if (right) {
    a->free[i].at = at;
    a->free[i].size += size;
  } else {
    memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof(block));
    a->free[i] = (block){at, size};
    a->nfree++;
  }
}

/* One planned value: cell c, written by thunk `from`, dead after thunk
 * `until` (from <= until). */
typedef struct slot {
  int32_t cell, from, until;
  size_t size, at;
} slot;

/* A slot's last use and index, sorted by last use. */
typedef struct death { int32_t until, i; } death;
static int by_until(const void *x, const void *y) {
  const death *a = x, *b = y;
  return (a->until > b->until) - (a->until < b->until);
}

/* Places slots sl[0..n) (in order of `from`) by simulating the schedule:
 * before thunk k writes, every slot dead before k is freed (each was
 * placed already: from <= until < k). */
static bool place(slot *sl, int32_t n, size_t *top) {
  arena a = {.free = rg_malloc(((size_t)n + 1) * sizeof(block))};
  death *order = rg_malloc(((size_t)n + 1) * sizeof *order);
  if (!a.free || !order) {
    rg_free(a.free);
    rg_free(order);
    return false;
  }
  for (int32_t i = 0; i < n; i++) order[i] = (death){sl[i].until, i};
  qsort(order, (size_t)n, sizeof *order, by_until);
  int32_t e = 0;
  for (int32_t i = 0; i < n; i++) {
    for (; e < n && order[e].until < sl[i].from; e++) arena_give(&a, sl[order[e].i].at, sl[order[e].i].size);
    sl[i].at = arena_take(&a, sl[i].size);
  }
  *top = a.top;
  rg_free(order);
  rg_free(a.free);
  return true;
}

/* ------------------------------------------------------------------ the plan */

/* The planned values: outputs with a place whose class may be planned. */
static slot *collect_slots(const rgb_program *p, const classes *s, int32_t *n) {
  slot *sl = rg_malloc(((size_t)p->ncells + 1) * sizeof *sl);
  *n = 0;
  for (int32_t k = 0; sl && k < p->nthunks; k++) {
    const rgb_thunk *t = &p->thunks[k];
    for (int j = 0; j < t->node.nout; j++) {
      int32_t c = t->out_cells[j], r = uf_find(s->uf, c);
      if (!s->ok[r] || !fresh_host_output(p, t, j)) continue;
      size_t size = (static_bytes(&t->node.out[j]) + PLAN_ALIGN - 1) & ~(size_t)(PLAN_ALIGN - 1);
      sl[(*n)++] = (slot){.cell = c, .from = k, .until = s->last[r], .size = size};
    }
  }
  return sl;
}

/* Gives the thunks their places in the arena; false when out of memory. */
static bool attach(rgb_program *p, const slot *sl, int32_t n) {
  for (int32_t i = 0; i < n; i++) {
    rgb_thunk *t = &p->thunks[sl[i].from];
    if (!t->x.plan && !(t->x.plan = rg_calloc((size_t)t->node.nout, sizeof *t->x.plan))) return false;
    int j = 0;
    while (t->out_cells[j] != sl[i].cell) j++;
    ((rgb_planned *)t->x.plan)[j] = (rgb_planned){p->arena + sl[i].at, sl[i].size};
    p->planned_bytes += sl[i].size;
  }
  return true;
}

/* Planned cells stay in their cells between calls: not released. */
static void drop_releases(rgb_program *p) {
  for (int32_t k = 0; k < p->nthunks; k++) {
    rgb_thunk *t = &p->thunks[k];
    int32_t m = 0;
    for (int32_t i = 0; i < t->nrelease; i++)
      if (!rgb_cell_planned(p, t->release[i])) t->release[m++] = t->release[i];
    t->nrelease = m;
  }
}

void rgb_plan_clear(rgb_program *p) {
  for (int32_t k = 0; k < p->nthunks; k++) {
    rg_free((void *)p->thunks[k].x.plan);
    p->thunks[k].x.plan = NULL;
  }
  rg_free(p->arena);
  p->arena = NULL;
  p->arena_bytes = p->planned_bytes = 0;
  p->nplanned = 0;
}

void rgb_plan_memory(rgb_program *p) {
  if (p->lazy || !p->nthunks) return;
  classes s = {0};
  int32_t n = 0;
  slot *sl = classes_build(p, &s) ? collect_slots(p, &s, &n) : NULL;
  size_t top = 0;
  if (sl && n && place(sl, n, &top) && (p->arena = rg_aligned_alloc(PLAN_ALIGN, top))) {
    p->arena_bytes = top;
    p->nplanned = n;
    if (attach(p, sl, n)) drop_releases(p);
    else rgb_plan_clear(p); /* out of memory: no plan, every value allocated as before */
  }
  rg_free(sl);
  classes_free(&s);
}
