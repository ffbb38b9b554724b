/*
 * egraph-impl.h — internals of the e-graph search shared by its files:
 * egraph.c (e-nodes, e-classes, union-find, rebuild), egraph-rules.c
 * (e-matching, relational equalities, the scheduler), egraph-cost.c (cost
 * models) and egraph-extract.c (extraction, JSON and DOT).
 *
 * Memory.  The big arrays (e-nodes, children, classes' node and parent
 * lists, the hash-cons table) are manual memory, freed by rg_egraph_free;
 * they hold no pointer to collected memory.  Collected objects an e-node
 * refers to (its op, a leaf variable) live in the head table `heads`,
 * itself collected, and e-nodes name them by index; each class's type and
 * representative variable live in collected arrays too.
 */
#ifndef RELGRAPH_EGRAPH_IMPL_H
#define RELGRAPH_EGRAPH_IMPL_H

#include "rewrites/rewrite-impl.h"

#include <stdio.h>

#define EG_NONE UINT32_MAX
#define EG_MAX_LEVEL 4

/* What an e-node applies: output `out` of op `op`, or a leaf (a graph
 * input or constant, op NULL).  Interned: equal heads have one index. */
typedef struct eg_head {
  const rg_op *op;
  rg_variable *leaf;
  int32_t out;
  rg_opcode code;          /* op's code; RG_OP_COUNT for leaves */
  uint64_t hash;
} eg_head;

/* An e-node.  Invariants: kids[ch .. ch+nch) are its children (classes);
 * after a rebuild they are canonical (union-find roots); `cls` is a class
 * it belongs to (find(cls) is its class); `dead` marks a node found equal
 * to another after canonicalization (kept for ids, skipped by matching and
 * extraction); born <= iter. */
typedef struct eg_node {
  uint32_t head, nch, ch, cls;
  uint32_t dead : 1, iter : 31;   /* iteration that added it, moved it to
                                     another class or re-canonicalized its
                                     children (semi-naive matching) */
  uint32_t born;                  /* iteration that added it or moved it
                                     to another class */
} eg_node;

/* A growable array of ids: manual memory, except that a class's list of
 * capacity EG_LIST_FIRST is a piece of the e-graph's arena (every other
 * list grows from 16 ids, so the capacity tells them apart). */
typedef struct eg_ids { uint32_t *v; uint32_t n, cap; } eg_ids;
#define EG_LIST_FIRST 4
#define EG_ARENA_BLOCK 16384
void eg_ids_push(eg_ids *a, uint32_t x);
/* Appends k ids to be written at the pointer returned. */
uint32_t *eg_ids_extend(eg_ids *a, uint32_t k);

/* An e-class, meaningful at its union-find root only: its nodes (in
 * nondecreasing `born` order: a node joins a list only when added or
 * moved, stamped with the iteration then) and the
 * nodes using it (parents; may hold stale duplicates until a rebuild),
 * and its smallest node id (its representative node: every child class of
 * that node has a node of smaller id, so representatives are well
 * founded).  `mod` is the last iteration that gave the class a node or
 * merged it (semi-naive matching: a match touching no class or node
 * newer than a rule's last search was found by that search).  `plain`:
 * its representative variable is not a constant (built or still to be
 * built), so its type alone decides the types of nodes using it.
 * `konst`: its representative is a constant (kept here because a merge
 * asks, and reading the variable costs a cache miss per merge). */
typedef struct eg_class {
  eg_ids nodes, parents;
  uint32_t minnode, mod;
  bool plain, konst;
} eg_class;

/* The type cache: the type of head(children) from the children's types,
 * for ops whose type depends on their inputs' types only (elementwise,
 * reductions, BLAS) and children with plain representatives.  `rhead`
 * is the head's canonical form, EG_NONE when the node does not
 * type-check; hash 0 marks an empty slot.  Collected (types are). */
#define EG_TC_MAXCH 4
typedef struct eg_tcache {
  uint64_t hash;
  uint32_t head, nch, rhead;
  const rg_type *in[EG_TC_MAXCH];
  const rg_type *out;
} eg_tcache;

typedef struct eg_rule eg_rule;      /* egraph-rules.c */

/* One iteration's record, for --trace. */
typedef struct eg_iter {
  size_t nodes, classes, matches;
  double seconds;
  const char *banned;     /* rules banned in it, or NULL */
} eg_iter;

/* One hash-cons slot: a node's class (find(cls) is its class now), its
 * head and arity (head << 2 | the arity, 3 for three or more) and its two
 * children, so that a probe finds a node of up to two children and its
 * class without reading the node (one cache line per probe); for three or
 * more children k0 is the node's id (the children are read from it).
 * cls EG_NONE: empty; EG_TOMB: deleted. */
#define EG_TOMB (EG_NONE - 1)
typedef struct eg_slot { uint32_t cls, headn, k0, k1; } eg_slot;

struct rg_egraph {
  rg_ctx *C;
  rg_fgraph *fg;
  /* heads (collected) with their intern table */
  eg_head *heads;
  uint32_t nheads, capheads;
  uint32_t *head_tab;
  uint32_t cap_head_tab;
  /* nodes and their children */
  eg_node *nodes;
  uint32_t nnodes, capnodes;
  uint32_t *kids;
  size_t nkids, capkids;
  /* classes: union-find parents, class records, types and representative
   * variables (collected arrays; a representative is NULL until asked for,
   * then built by make_node from the class's smallest node) */
  uint32_t *uf;
  eg_class *cls;
  const rg_type **types;
  rg_variable **reps;
  uint32_t ncls, capcls;
  size_t nlive;             /* classes that are roots */
  /* the hash-cons table: canonical node -> node id (open addressing,
   * linear probing, power-of-two capacity, at most half full with
   * deleted slots counted; ntomb also counts the stale slots a rebuild
   * leaves behind, which match no canonical probe and are dropped when
   * the table grows; nmemo counts live e-nodes exactly) */
  eg_slot *memo;
  size_t capmemo, nmemo, ntomb;
  /* variables already in the e-graph -> class (leaf and rep variables) */
  rg_memo *varcls;
  /* the type cache (open addressing, power-of-two capacity) */
  eg_tcache *tcache;
  size_t captc, ntc;
  int64_t tc_hits, tc_misses;
  /* blocks of EG_ARENA_BLOCK ids that classes' first lists are cut from
   * (arena_used ids of the last one taken) */
  uint32_t **arena;
  uint32_t narena, arena_used;
  /* nodes by opcode, for e-matching roots; dead ones are dropped once
   * ndead (those died since the last drop) is a quarter of all nodes */
  eg_ids byop[RG_OP_COUNT];
  uint32_t ndead;
  /* classes merged since the last rebuild */
  eg_ids pending;
  /* level stamps (semi-naive matching), valid from eg_stamp_levels to the
   * next change: lvl[d-1][c] for a root class c is the newest `mod` of
   * the classes d or fewer steps below c (through any of its nodes), c
   * included; level 0 is `mod` itself */
  uint32_t *lvl[EG_MAX_LEVEL];
  uint32_t caplvl;
  int nlvl;
  uint32_t *roots;          /* the graph's outputs' classes */
  int nroots;
  /* strongly connected components of the class graph, valid from
   * eg_mark_cycles to the next change: comp[c] for a root class c (the
   * classes of a component reach each other through e-nodes' children) */
  uint32_t *comp;
  uint32_t capcomp;
  /* rules and the run */
  eg_rule **rules;
  int nrules, skipped;
  uint32_t iter;
  eg_iter *iters;
  int niters;
  rg_search_stop stop;
  const char *stop_msg;
  double deadline;          /* rgr_now() past which the run stops */
  int64_t node_cap;         /* e-nodes at which applying stops (the node limit) */
  bool late;                /* a rule stopped half-way at the deadline */
  const char *cur_rule;     /* the rule applying now, for rejections */
  int64_t nrejected;        /* refused merges, each distinct one once */
  const char **rejections;  /* the first 64 */
  uint64_t *rejseen;        /* (class, class) pairs refused (hash set) */
  size_t nrejseen, caprejseen;
};

/* egraph.c */
static inline uint32_t eg_find(const rg_egraph *eg, uint32_t c) {
  while (eg->uf[c] != c) c = eg->uf[c];
  return c;
}
uint32_t eg_find_compress(rg_egraph *eg, uint32_t c);
static inline const uint32_t *eg_kids(const rg_egraph *eg, uint32_t n) {
  return eg->kids + eg->nodes[n].ch;
}
uint32_t eg_intern_op(rg_egraph *eg, const rg_op *op, int out);
/* Adds the e-node head(children) and returns its class (an existing one
 * when the e-graph has it); EG_NONE when it does not type-check (no
 * error), or on an error (rg_errcode set). */
uint32_t eg_add(rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch);
/* The class of the e-node head(children) when the e-graph has it, else
 * EG_NONE (nothing is added). */
uint32_t eg_lookup_node(const rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch);
/* Adds head(children) and merges it with class `into` (a new e-node of
 * into's type goes straight into it, with no class of its own); its class
 * or EG_NONE (ill-typed, or a merge refused). */
uint32_t eg_add_into(rg_egraph *eg, uint32_t head, int nch, const uint32_t *ch, uint32_t into);
/* A small term to add, as a rule's result is: its ops in postorder, the
 * last one the root.  An op's head is `head`, or binds[opvar] when opvar
 * >= 0; a child is binds[ref] for ref >= 0, else the class of op -1 - ref
 * (an earlier one).  Invariants: nops <= EG_TERM_MAX, nch <= 2. */
#define EG_TERM_MAX 8
typedef struct eg_term_op {
  uint32_t head, nch;
  int32_t opvar, ch[2];
} eg_term_op;
typedef struct eg_term {
  int nops;
  eg_term_op op[EG_TERM_MAX];
} eg_term;
/* Adds term t for each of n matches and merges its root with the match's
 * class: match i is m[i * stride], the class, then its bindings from
 * m[i * stride + boff].  An op not made (ill-typed, a merge refused) skips
 * the rest of its match; returns RG_OK or the first error.  Each op
 * already in the e-graph costs one probe. */
int eg_add_terms(rg_egraph *eg, const eg_term *t, const uint32_t *m, uint32_t n, uint32_t stride,
                 uint32_t boff);
/* Adds everything variable v computes; its class or EG_NONE. */
uint32_t eg_add_var(rg_egraph *eg, rg_variable *v);
/* The class of v if the e-graph has it (without adding), else EG_NONE. */
uint32_t eg_lookup_var(rg_egraph *eg, rg_variable *v);
/* Merges two classes; false if their types differ (rejected, recorded
 * with the rule's name). */
bool eg_union(rg_egraph *eg, uint32_t a, uint32_t b);
void eg_rebuild(rg_egraph *eg);
/* Computes the level stamps 1..depth (at most EG_MAX_LEVEL) of every
 * class; call after a rebuild. */
void eg_stamp_levels(rg_egraph *eg, int depth);
/* The newest change at most d steps below root class c (d beyond the
 * levels computed: 0, "maybe", when nothing was computed that deep). */
static inline uint32_t eg_level(const rg_egraph *eg, uint32_t c, int d) {
  if (d <= 0) return eg->cls[c].mod;
  return d <= eg->nlvl ? eg->lvl[d - 1][c] : UINT32_MAX;
}
/* The representative variable of a class (a graph variable computing a
 * term of the class), built on first use. */
rg_variable *eg_rep(rg_egraph *eg, uint32_t c);
/* Finds the components (comp) of the class graph as it is now. */
void eg_mark_cycles(rg_egraph *eg);
/* Whether e-node id lies on a cycle: one of its children's classes reaches
 * its own class (itself included); read after eg_mark_cycles. */
static inline bool eg_on_cycle(const rg_egraph *eg, uint32_t id) {
  const eg_node *x = &eg->nodes[id];
  uint32_t c = eg->comp[eg_find(eg, x->cls)];
  const uint32_t *k = eg_kids(eg, id);
  for (uint32_t i = 0; i < x->nch; i++)
    if (eg->comp[eg_find(eg, k[i])] == c) return true;
  return false;
}
/* A graph node computing e-node id from its children's representatives;
 * NULL for a leaf or when the node does not build. */
rg_node *eg_rep_node(rg_egraph *eg, uint32_t id);
/* A node's op as a printable name ("dot", "(sum 0)", a leaf's name). */
const char *eg_head_str(const rg_egraph *eg, uint32_t head);

/* egraph-rules.c: frees the rules' match buffers (rg_egraph_free). */
void eg_rules_free(rg_egraph *eg);
/* Whether the e-graph's rule `name` is a relation of two unification
 * templates, which the search runs as e-matching (see egraph-rules.c). */
bool eg_rule_by_templates(const rg_egraph *eg, const char *name);

/* egraph-cost.c: per-node costs of a model (INFINITY: cannot cost it);
 * whole (NULL, or one byte per e-node) marks the e-nodes whose cost is
 * that of the whole node of several outputs they are one output of, which
 * extraction charges once for all of them. */
double *eg_node_costs(rg_egraph *eg, const rg_cost_model *cm, uint8_t *whole);
/* The cost of one graph node by its own static types (unknown dimensions
 * count as 0): FLOPs, bytes or measured time; INFINITY for a relation
 * model (it needs an e-graph). */
double rgr_node_cost(rg_cost_model *cm, const rg_node *node);

#endif
