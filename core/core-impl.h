/*
 * core-impl.h — internals of the graph IR shared by the files of core/.
 *
 * Allocation.  Core allocates its symbolic objects with the kanren layer's
 * allocator (rgk_alloc / rgk_alloc_atomic from kanren/kanren-impl.h) rather
 * than through a public API: the allocator is a library-wide policy (Boehm
 * GC normally, malloc-and-never-free in sanitizer builds) that every layer
 * must share exactly, and keeping it internal stops users from mixing
 * collected memory with the manually owned tensor world.  Core uses nothing
 * else from kanren's internals besides the allocator and its explicit
 * stacks (rgk_stack), which the collector can see.
 *
 * Op classes.  Each op class is a vtable (struct rg_op_class) in a table
 * indexed by rg_opcode; the table is built from RG_OP_TABLE in op.c and
 * checked against the enum there.  Every class has make_node (type
 * inference and validation), infer_shape, parameter equality, hashing and
 * conversion to and from terms (which is how parameters are printed and
 * parsed), view and destroy maps, and a gradient slot filled by a later
 * layer.
 */
#ifndef RELGRAPH_CORE_IMPL_H
#define RELGRAPH_CORE_IMPL_H

#include "kanren/kanren-impl.h"
#include "relgraph/graph.h"

/* ------------------------------------------------------------------ op classes */

/* Output types computed by make_node.  `types` points at `one` for a
 * single output; make_node functions use rgc_outs_alloc() for more. */
typedef struct rgc_outs {
  int n;
  const rg_type **types;
  const rg_type *one[1];
} rgc_outs;
void rgc_outs_alloc(rgc_outs *o, int n);
static inline int rgc_outs_set1(rgc_outs *o, const rg_type *t) {
  o->n = 1;
  o->types = o->one;
  o->one[0] = t;
  return RG_OK;
}

/* Shapes for infer_shape: one scalar int64 variable per dimension. */
typedef rg_variable **rgc_shape;

/* The gradient of an op (grad-ops.c): from the gradients of the node's
 * outputs (og[k] NULL: zero) it fills one gradient per input (ig[i], NULL
 * when disconnected), in the output's shape; rg_grad fits them to the
 * inputs' types.  need[i] says whether the caller uses input i's gradient
 * (an op whose inputs' gradients cost separate work, Scan, skips the
 * others; the rest compute them all).  RG_OK, or an error recorded in C. */
typedef int (*rgc_grad_fn)(rg_ctx *C, const rg_node *node, rg_variable *const *og, rg_variable **ig,
                           const bool *need);
#define RGC_X_GRAD(code, name, fam, lo, hi) \
  int rgc_grad_##code(rg_ctx *C, const rg_node *node, rg_variable *const *og, rg_variable **ig, \
                      const bool *need);
RG_OP_TABLE(RGC_X_GRAD)
#undef RGC_X_GRAD
/* Builders the gradient rules share (grad-ops.c): zeros of x's type, and
 * x[..., start:stop] along one axis with scalar variable bounds. */
rg_variable *rgc_zeros_like(rg_ctx *C, rg_variable *x);
rg_variable *rgc_slice_along(rg_variable *x, int axis, rg_variable *start, rg_variable *stop);

struct rg_op_class {
  const char *name;
  rg_opcode code;
  rg_op_family family;
  int min_in, max_in;        /* max_in -1: unbounded */
  /* Infers output types.  May replace *op by a canonical form.  Returns
   * RG_OK or an error after recording a message (prefixed by the op name). */
  int (*make_node)(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
  /* Output shapes from input shapes, as scalar int64 variables built from
   * the input shapes (constants where the static shape knows them). */
  int (*infer_shape)(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
  bool (*params_equal)(const rg_op *a, const rg_op *b);
  uint64_t (*params_hash)(const rg_op *op);
  /* The parameters as a list of terms (RG_NIL when the op prints as a bare
   * name); params_parse reads them back (NULL with an error). */
  rg_term (*params_term)(const rg_op *op);
  const rg_op *(*params_parse)(rg_ctx *C, const rg_op_class *cls, rg_term params);
  int (*view_of)(const rg_op *op, int output);
  int (*destroys)(const rg_op *op, int output);
  rgc_grad_fn grad;          /* the gradient (grad-ops.c) */
  /* Inner-graph ops with a layout of their own (optional): the op over a
   * copy of g with integer parameters ints, checked (NULL with an error);
   * how parsing makes the op back (inner.c). */
  const rg_op *(*inner_make)(rg_ctx *C, rg_fgraph *g, int nints, const int64_t *ints);
  /* (optional) The op's label in printed graphs, "name{...}"; with it,
   * dprint also prints the op's inner graph after the outer one. */
  const char *(*label)(const rg_op *op);
};

extern const rg_op_class rgc_classes[RG_OP_COUNT];
/* 0 when entry i of the class table has code i and its RG_OP_TABLE name,
 * else -(i + 1) for the first bad entry. */
int rgc_check_classes(void);

/* A fresh op of class `code` with default fields (dtype RG_NDTYPES, no
 * parameters); callers fill parameters, then call rgc_op_finish(). */
rg_op *rgc_op_new(rg_opcode code);
const rg_op *rgc_op_finish(rg_op *op);
uint64_t rgc_mix(uint64_t h, uint64_t x);
/* An inner-graph op of class `code` over a frozen copy of g, with integer
 * parameters (copied), unchecked (inner.c). */
const rg_op *rgc_inner_op(rg_opcode code, rg_fgraph *g, int nints, const int64_t *ints);
uint64_t rgc_hash_bytes(const void *p, size_t n);

/* ------------------------------------------------------------------ errors */

/* Records "opname: message" in C (if C is not NULL); returns RG_ERR_TYPE. */
int rgc_op_error(rg_ctx *C, const rg_op *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A shape as text: "(3 ?)". */
char *rgc_shape_str(int ndim, const int64_t *shape);
/* rg_graph_from_term with the name its messages give the graph (an
 * op_from_graph's or composite's: "inner graph"). */
rg_fgraph *rgc_graph_from_term_named(rg_ctx *C, rg_term form, const char *name);

/* ------------------------------------------------------------------ printing numbers */

/* Floats in the reader's syntax, shortest form that reads back exactly
 * (as a float32 when `single`); elements of any dtype (bool as #t/#f). */
void rgc_fprint_float(FILE *f, double d, bool single);
void rgc_fprint_elem(FILE *f, rg_dtype dt, const void *p);

/* ------------------------------------------------------------------ types */

const rg_type *rgc_type_alloc(rg_dtype dt, int ndim, rg_device dev);
/* Broadcasts static shapes of n types into out (ndim = max ndim).  Returns
 * the output ndim, or -1 when two known sizes other than 1 differ (then
 * *bad_dim is the output dimension). */
int rgc_broadcast(int n, const rg_type *const *ts, int64_t *out, int *bad_dim);

/* ------------------------------------------------------------------ variables */

/* A variable with room for RGC_INLINE_CLIENTS clients in its own block. */
#define RGC_INLINE_CLIENTS 2
rg_variable *rgc_var_new(rg_ctx *C, const rg_type *type);
/* A dimension size as a (strong) int64 scalar constant. */
rg_variable *rgc_dim_const(rg_ctx *C, int64_t k);
uint64_t rgc_next_id(void);
/* The context of the first non-NULL variable (or C). */
rg_ctx *rgc_ctx_of(rg_ctx *C, int n, rg_variable *const *vs);

/* ------------------------------------------------------------------ shape arithmetic */

/* Scalar int64 arithmetic for shape inference, folded when constant:
 * op is 0 add, 1 sub, 2 mul, 3 floor division, 4 max, 5 min. */
rg_variable *rgc_iarith(rg_ctx *C, int op, rg_variable *a, rg_variable *b);
rg_variable *rgc_as_i64(rg_variable *v);

/* ------------------------------------------------------------------ elementwise */

enum {
  EW_PROMOTE,      /* promoted dtype of all inputs */
  EW_PROMOTE_NUM,  /* promoted; bool inputs are not allowed (sub, neg) */
  EW_INTDIV,       /* promoted; bool promotes to int8 */
  EW_FLOAT,        /* promoted; bool and 8/16-bit ints to float32, wider to float64 */
  EW_TRUEDIV,      /* promoted; bool and integers to float64 (NumPy's true_divide) */
  EW_KEEP,         /* dtype of the single input */
  EW_COMPARE,      /* bool, inputs promoted for the comparison */
  EW_BITWISE,      /* promoted; bool or integer inputs only */
  EW_SWITCH,       /* cond (any dtype) then promoted(a, b) */
  EW_CAST,         /* the op's dtype */
  EW_SECOND,       /* dtype of the second input */
};
/* How an elementwise op's output dtype follows from its inputs. */
int rgc_ew_rule(rg_opcode code);
/* The elementwise result dtype of inputs under NEP 50 (weak literals).
 * Returns RG_NDTYPES with a message in C when no dtype fits. */
rg_dtype rgc_ew_dtype(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in);
int rgc_ew_make_node(rg_ctx *C, const rg_op **op, int nin, rg_variable *const *in, rgc_outs *out);
int rgc_ew_infer_shape(rg_ctx *C, const rg_node *node, rgc_shape const *in, rgc_shape *out);
/* Broadcast result type of inputs with dtype dt (message in C on error). */
/* The device an op's output lives on: that of its first input off the
 * host (constants aside), else the host.  Inputs on other devices are
 * legal: the linker copies them where the node runs. */
rg_device rgc_result_device(int nin, rg_variable *const *in);
const rg_type *rgc_broadcast_type(rg_ctx *C, const rg_op *op, int nin, rg_variable *const *in,
                                  rg_dtype dt);

/* ------------------------------------------------------------------ scratch stacks */

/* A growable stack of words in malloc'd memory, invisible to the collector:
 * for the work lists of walks over big graphs, which would otherwise make
 * the collector mark the whole live heap again and again.  It may only
 * hold pointers to objects that stay reachable some other way while it is
 * in use (graph nodes reachable from the walk's roots); free it with
 * rgc_sfree().  It is the base module's word array on the aborting heap
 * allocator: walks cannot report running out of memory, so that aborts,
 * as the collector's does (and fault injection leaves it alone). */
typedef rg_words rgc_scratch;
void rgc_sgrow(rgc_scratch *s);
static inline void rgc_spush(rgc_scratch *s, uintptr_t w) {
  if (s->n == s->cap) rgc_sgrow(s);
  s->v[s->n++] = w;
}
void rgc_sfree(rgc_scratch *s);

/* ------------------------------------------------------------------ walks */

/* A fresh mark value for node->mark (process-wide, never repeats). */
uint64_t rgc_new_epoch(void);

/* ------------------------------------------------------------------ FunctionGraph */

/* One recorded change of an input (node NULL: a graph output). */
typedef struct rgc_change {
  rg_node *node;
  int32_t i;
  rg_variable *old, *new_;
} rgc_change;

/* Invariants (checked by rg_fgraph_check):
 *  - the nodes of the graph are exactly those on the list head..tail, each
 *    with node->fgraph == this; labels strictly increase along the list,
 *    and every edge (owner of an input -> node) goes to a higher label;
 *  - a variable v has v->fgraph == this iff it is an input, an output of a
 *    node of the graph, or a constant with a client here;
 *  - v->clients lists each use exactly once: (node, i) with
 *    node->inputs[i] == v and node->cpos[i] its position, or (NULL, k) with
 *    outputs[k] == v and out_cpos[k] its position;
 *  - every node has a client on some output (else it has been pruned). */
struct rg_fgraph {
  rg_ctx *ctx;
  int nin, nout, cap_out;
  rg_variable **inputs, **outputs;
  uint32_t *out_cpos;
  rg_node *head, *tail;
  size_t nnodes;
  uint32_t nbycode[RG_OP_COUNT]; /* nodes by their op's code; they sum to nnodes */
  uint64_t version;           /* changes with every structural change */
  rg_node **topo;             /* cached order, valid when topo_version == version */
  size_t ntopo;
  uint64_t topo_version;
  rg_feature **features;
  int nfeat, cap_feat;
  rgc_change *hist;
  size_t nhist, cap_hist;
  bool recording;
  bool frozen;                /* the inner graph of an op: never changes */
  uint64_t hash;              /* frozen graphs: structural hash, 0 = not yet */
};

/* The order (order.c). */
void rgc_order_append(rg_fgraph *fg, rg_node *n);
void rgc_order_insert_after(rg_fgraph *fg, rg_node *prev, rg_node *n); /* prev NULL: first */
void rgc_order_remove(rg_fgraph *fg, rg_node *n);
/* Makes u precede v (u's output feeds v); an error if v reaches u. */
int rgc_order_edge(rg_fgraph *fg, rg_node *u, rg_node *v);

/* A FunctionGraph over fresh nodes given in topological order (fgraph.c). */
/* fg's nodes in the order rg_fgraph_new() imports them from fg's outputs
 * (each output in turn, depth first, inputs left to right, a node after
 * its inputs): the order a graph read back from a file has, whatever
 * order rewrites left fg in. */
rg_node **rgc_import_order(rg_fgraph *fg, size_t *n);
rg_fgraph *rgc_fgraph_from_order(rg_ctx *C, int nin, rg_variable *const *inputs, int nout,
                                 rg_variable *const *outputs, rg_node *const *nodes, size_t n);
/* A block of n consecutive fresh marks (walk.c). */
uint64_t rgc_new_epochs(uint64_t n);

/* Changes without validation, for merging (fgraph.c). */
void rgc_replace_unchecked(rg_fgraph *fg, rg_variable *old, rg_variable *new_, const char *reason);
int rgc_change_unchecked(rg_fgraph *fg, rg_node *node, int i, rg_variable *new_, const char *reason);

/* Clients (fgraph.c). */
void rgc_add_client(rg_variable *v, rg_node *node, int i, uint32_t *pos);
void rgc_remove_client(rg_variable *v, uint32_t pos);

/* Inner graphs in printed labels (pprint.c): the graph on one line, and
 * the name inner input k prints as there (its own, else <k>). */
char *rgc_pprint_inner(const rg_fgraph *g);
const char *rgc_inner_input_name(const rg_fgraph *g, int k);

#endif
