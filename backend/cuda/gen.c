/*
 * gen.c — CUDA C for the CUDA backend's kernels, compiled by NVRTC.
 *
 * Nothing here is a second definition of an op: an elementwise node's
 * dtypes come from the CPU interpreter's rules (rgbc_ew_info_of: the dtype
 * a loop computes in, the dtype it reads each input in, copies, n-ary
 * folds) and its scalar semantics from scalar-expr.c, the text of the
 * tables the CPU's loops are made of.  Helper functions are that text
 * with `__device__` added; the transcendental functions are the scalar
 * forms of scalar-float.h over CUDA's math library (its own accuracy:
 * within 2 ULP for the float32 functions used, 1 ULP or better for
 * float64, as CUDA's programming guide lists).
 *
 * Known differences from the CPU, by construction of the hardware or of
 * CUDA: integer pow with a negative exponent gives 0 (a kernel cannot
 * report the CPU's error); float-to-integer conversion of out-of-range
 * values saturates (x86-64 gives the minimum value); float sums accumulate
 * in the output dtype in element order (the CPU sums float32 in blocks).
 *
 * Layouts of the argument structs are in cuda-impl.h.  Every kernel is a
 * grid-stride loop, so any launch covers any size.
 */
#include "backend/cuda/cuda-impl.h"
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ text pieces */

static const char *ctype(rg_dtype dt) {
  static const char *const names[RG_NDTYPES] = {
      [RG_BOOL] = "uint8_t", [RG_INT8] = "int8_t",   [RG_INT16] = "int16_t",  [RG_INT32] = "int32_t",
      [RG_INT64] = "int64_t", [RG_UINT8] = "uint8_t", [RG_FLOAT32] = "float", [RG_FLOAT64] = "double"};
  return names[dt];
}

/* The helpers' text as device functions. */
static void put_device(rg_strbuf *b, const char *text) {
  for (const char *p = text; *p;) {
    const char *q = strstr(p, "static inline");
    if (!q) {
      rg_strbuf_put(b, "%s\n", p);
      return;
    }
    rg_strbuf_put(b, "%.*sstatic __device__ inline", (int)(q - p), p);
    p = q + strlen("static inline");
  }
}

/* What every kernel starts with: fixed-width types and the helpers. */
static void put_prelude(rg_strbuf *b) {
  rg_strbuf_put(b, "typedef signed char int8_t; typedef short int16_t; typedef int int32_t;\n"
                   "typedef long long int64_t; typedef unsigned char uint8_t;\n"
                   "typedef unsigned int uint32_t; typedef unsigned long long uint64_t;\n");
  put_device(b, rgbc_helpers_text(RG_INT64));
  put_device(b, rgbc_helpers_text(RG_FLOAT32));
  put_device(b, rgbc_helpers_text(RG_FLOAT64));
}

/* A value of dtype `from` (a C expression) converted to `to`. */
static void put_convert(rg_strbuf *b, const char *v, rg_dtype from, rg_dtype to) {
  if (to == RG_BOOL && from != RG_BOOL) rg_strbuf_put(b, "((uint8_t)((%s) != 0))", v);
  else if (to == from) rg_strbuf_put(b, "(%s)", v);
  else rg_strbuf_put(b, "((%s)(%s))", ctype(to), v);
}

/* ------------------------------------------------------------------ one node's value */

static bool is_compare(rg_opcode c) {
  return c == RG_OP_LT || c == RG_OP_GT || c == RG_OP_LE || c == RG_OP_GE || c == RG_OP_EQ ||
         c == RG_OP_NEQ;
}

/* The expression of op c computing in dtype cdt over `arity` operands. */
static const char *expr_of(rg_opcode c, rg_dtype cdt, int arity) {
  const char *e = rgbc_expr(c, cdt, arity);
  if (!e && arity == 1) e = rgbc_transcendental_expr(c, cdt);
  if (!e && c == RG_OP_POW && arity == 2 && !rg_dtype_is_float(cdt)) e = "s_ipow_i64(x, y)";
  return e;
}

/* Emits `{ ... out = value; }`: node n over its inputs, given as C
 * expressions arg[k] of the node's input dtypes; out has the output's
 * dtype. */
static bool put_node(rg_strbuf *b, const rgb_node *n, const char *const *arg, const char *out,
                     char *why, size_t len) {
  rgbc_ew_info info;
  const char *err = n->nout == 1 ? rgbc_ew_info_of(n, &info) : "more than one output";
  if (err) return rg_say(why, len, "%s: %s", n->label, err);
  rg_dtype odt = n->out[0].dtype;
  if (info.copy) {
    rg_strbuf_put(b, "{ %s = ", out);
    put_convert(b, arg[n->nin - 1], n->in[n->nin - 1].dtype, odt);
    rg_strbuf_put(b, "; }");
    return true;
  }
  rg_dtype cdt = is_compare(n->code) ? info.in[0] : n->code == RG_OP_SWITCH ? info.in[1] : odt;
  int arity = info.nary ? 2 : n->nin;
  const char *e = expr_of(n->code, cdt, arity);
  if (!e) return rg_say(why, len, "%s: no CUDA form for %s", n->label, rg_dtype_name(cdt));
  const char *T = ctype(cdt), *names[3] = {"x", "y", "z"};
  if (info.nary) {
    rg_strbuf_put(b, "{ %s acc = ", T);
    put_convert(b, arg[0], n->in[0].dtype, cdt);
    for (int k = 1; k < n->nin; k++) {
      rg_strbuf_put(b, "; { const %s x = acc, y = ", T);
      put_convert(b, arg[k], n->in[k].dtype, cdt);
      rg_strbuf_put(b, "; acc = (%s); }", e);
    }
    rg_strbuf_put(b, "; %s = acc; }", out);
    return true;
  }
  rg_strbuf_put(b, "{ ");
  for (int k = 0; k < n->nin; k++) {
    rg_strbuf_put(b, "const %s %s = ", ctype(info.in[k]), names[k]);
    put_convert(b, arg[k], n->in[k].dtype, info.in[k]);
    rg_strbuf_put(b, "; ");
  }
  rg_strbuf_put(b, "%s = (%s)(%s); }", out, ctype(odt), e);
  return true;
}

/* ------------------------------------------------------------------ elementwise and fused kernels */

/* The body's signature: rg_body(const IN0 in0, ..., OUT0 &out0, ...),
 * the IN%d and OUT%d types declared before it. */
static void put_body_head(rg_strbuf *b, int nout, int nin) {
  rg_strbuf_put(b, "static __device__ inline void rg_body(");
  for (int k = 0; k < nin; k++) rg_strbuf_put(b, "%sconst IN%d in%d", k ? ", " : "", k, k);
  for (int j = 0; j < nout; j++) rg_strbuf_put(b, "%sOUT%d &out%d", nin || j ? ", " : "", j, j);
  rg_strbuf_put(b, ") {\n");
}

static void put_types(rg_strbuf *b, const char *what, int n, const rgb_vtype *t) {
  for (int k = 0; k < n; k++) rg_strbuf_put(b, "typedef %s %s%d;\n", ctype(t[k].dtype), what, k);
}

/* The grid-stride loop around rg_body: RGCU_UNROLL elements a thread per
 * pass (elements step apart, so a warp's accesses stay contiguous).
 * Every load of a pass is issued before any value is used: a thread has
 * several loads in flight, which a memory-bound kernel needs to approach
 * the device's bandwidth.  Operand k (outputs first) is at
 * p[k] + sum(idx[d] * st[k][d]); the outermost dimension needs no
 * division, and the others divide by multiplying (rg_div).
 *
 * `fixed`: the loop of rg_fixed<ND>, whose dimension loop unrolls, so the
 * compiler knows which argument each stride is and reads it once; else
 * the loop of rg_any, for any nd, which indexes the arguments by a
 * variable.  When every element read its strides that way and divided,
 * the index arithmetic was about a third of a fused kernel's
 * instructions: enough to make a kernel of a few transcendental functions
 * wait on issue rather than on memory. */
static void put_ew_loop(rg_strbuf *b, int nout, int nin, bool fixed) {
  int nops = nout + nin;
  rg_strbuf_put(b, fixed ? "template <int ND> static __device__ inline void rg_fixed(const rg_ew_args &a) {\n"
                         : "static __device__ inline void rg_any(const rg_ew_args &a) {\n");
  rg_strbuf_put(b, "  const rg_idx step = (rg_idx)blockDim.x * gridDim.x, n = (rg_idx)a.n;\n"
                   "  for (rg_idx i0 = (rg_idx)blockIdx.x * blockDim.x + threadIdx.x; i0 < n;"
                   " i0 += %d * step) {\n"
                   "    rg_idx oo[%d][%d];\n", RGCU_UNROLL, nout, RGCU_UNROLL);
  for (int k = 0; k < nin; k++) rg_strbuf_put(b, "    IN%d x%d[%d];\n", k, k, RGCU_UNROLL);
  rg_strbuf_put(b, "#pragma unroll\n"
                   "    for (int u = 0; u < %d; u++) {\n"
                   "      const rg_idx i = i0 + u * step;\n"
                   "      if (i >= n) break;\n"
                   "      rg_idx off[%d], r = i;\n"
                   "#pragma unroll\n"
                   "      for (int k = 0; k < %d; k++) off[k] = 0;\n"
                   "%s"
                   "      for (int d = %s - 1; d > 0; d--) {\n"
                   "        const rg_idx q = rg_div(r, a.mag[d], a.sh[d], (rg_idx)a.shape[d]), j = r - q * (rg_idx)a.shape[d];\n"
                   "        r = q;\n"
                   "#pragma unroll\n"
                   "        for (int k = 0; k < %d; k++) off[k] += j * (rg_idx)a.st[k][d];\n"
                   "      }\n"
                   "      %sfor (int k = 0; k < %d; k++) off[k] += r * (rg_idx)a.st[k][0];\n",
                RGCU_UNROLL, nops, nops, fixed ? "#pragma unroll\n" : "", fixed ? "ND" : "a.nd", nops,
                fixed ? "" : "if (a.nd > 0) ", nops);
  for (int j = 0; j < nout; j++) rg_strbuf_put(b, "      oo[%d][u] = off[%d];\n", j, j);
  for (int k = 0; k < nin; k++)
    rg_strbuf_put(b, "      x%d[u] = *(const IN%d *)(a.p[%d] + off[%d]);\n", k, k, nout + k, nout + k);
  rg_strbuf_put(b, "    }\n"
                   "#pragma unroll\n"
                   "    for (int u = 0; u < %d; u++) {\n"
                   "      if (i0 + u * step >= n) break;\n", RGCU_UNROLL);
  for (int j = 0; j < nout; j++) rg_strbuf_put(b, "      OUT%d y%d;\n", j, j);
  rg_strbuf_put(b, "      rg_body(");
  for (int k = 0; k < nin; k++) rg_strbuf_put(b, "%sx%d[u]", k ? ", " : "", k);
  for (int j = 0; j < nout; j++) rg_strbuf_put(b, "%sy%d", nin || j ? ", " : "", j);
  rg_strbuf_put(b, ");\n");
  for (int j = 0; j < nout; j++) rg_strbuf_put(b, "      *(OUT%d *)(a.p[%d] + oo[%d][u]) = y%d;\n", j, j, j, j);
  rg_strbuf_put(b, "    }\n  }\n}\n");
}

/* The argument struct and the kernel around rg_body: operands laid out
 * in one or two dimensions after rgcu_ew_args_of's merging (contiguous,
 * or one stretched or transposed) take rg_fixed; any other rank, rg_any.
 * Only ranks 1 and 2 are fixed: each fixed rank is one more copy of the
 * loop to compile. */
static void put_ew_kernel(rg_strbuf *b, int nout, int nin) {
  rg_strbuf_put(b, "struct rg_ew_args { long long n; int nd; long long shape[%d];"
                   " long long st[%d][%d]; char *p[%d]; unsigned mag[%d]; int sh[%d]; };\n",
                RGCU_MAXND, RGCU_MAXOPS, RGCU_MAXND, RGCU_MAXOPS, RGCU_MAXND, RGCU_MAXND);
  rg_strbuf_put(b, RGCU_NARROW "\n");
  put_ew_loop(b, nout, nin, true);
  put_ew_loop(b, nout, nin, false);
  rg_strbuf_put(b, "extern \"C\" __global__ void rg_kernel(const rg_ew_args a) {\n"
                   "  if (a.nd <= 1) rg_fixed<1>(a);\n"
                   "  else if (a.nd == 2) rg_fixed<2>(a);\n"
                   "  else rg_any(a);\n"
                   "}\n");
}

static void put_ew_tail(rg_strbuf *b) { rg_strbuf_put(b, "  }\n}\n"); }

char *rgcu_widen(const char *src) {
  const char *at = strstr(src, RGCU_NARROW);
  if (!at) return NULL;
  size_t head = (size_t)(at - src), nl = strlen(RGCU_NARROW), wl = strlen(RGCU_WIDE), n = strlen(src);
  char *w = rg_malloc(n - nl + wl + 1);
  if (!w) return NULL;
  memcpy(w, src, head);
  memcpy(w + head, RGCU_WIDE, wl);
  memcpy(w + head + wl, at + nl, n - head - nl + 1);
  return w;
}

bool rgcu_ew_narrow(const rgcu_ew_args *a, int nops) {
  /* i0 + u * step may pass n by RGCU_UNROLL steps of at most 65535 x 256 threads */
  if (a->n > INT32_MAX - (int64_t)RGCU_UNROLL * 65535 * 256) return false;
  for (int k = 0; k < nops; k++) {
    int64_t reach = 0;
    for (int d = 0; d < a->nd; d++) {
      int64_t st = a->st[k][d] < 0 ? -a->st[k][d] : a->st[k][d];
      if (st > INT32_MAX || (a->shape[d] > 1 && (a->shape[d] - 1) > INT32_MAX / (st ? st : 1))) return false;
      reach += (a->shape[d] - 1) * st;
      if (reach > INT32_MAX) return false;
    }
  }
  return true;
}

static char *finish(rg_strbuf *b, char *why, size_t len) {
  if (!b->failed) return b->s;
  rg_free(b->s);
  rg_say(why, len, "out of memory");
  return NULL;
}

char *rgcu_gen_elemwise(const rgb_node *n, char *why, size_t len) {
  int nops = n->nout + n->nin;
  if (rg_opcode_family(n->code) != RG_FAM_ELEMWISE || nops > RGCU_MAXOPS || n->nout != 1)
    return rg_say(why, len, "%s: not an elementwise node of at most %d operands", n->label, RGCU_MAXOPS), NULL;
  rg_strbuf b = {0};
  put_prelude(&b);
  put_types(&b, "IN", n->nin, n->in);
  put_types(&b, "OUT", 1, n->out);
  put_body_head(&b, 1, n->nin);
  char names[RGCU_MAXOPS][16];
  const char *args[RGCU_MAXOPS];
  for (int k = 0; k < n->nin; k++) {
    snprintf(names[k], sizeof names[k], "in%d", k);
    args[k] = names[k];
  }
  rg_strbuf_put(&b, "  ");
  if (!put_node(&b, n, args, "out0", why, len)) {
    rg_free(b.s);
    return NULL;
  }
  rg_strbuf_put(&b, "\n}\n");
  put_ew_kernel(&b, 1, n->nin);
  return finish(&b, why, len);
}

char *rgcu_gen_copy(rg_dtype from, rg_dtype to, char *why, size_t len) {
  rg_strbuf b = {0};
  put_prelude(&b);
  rg_strbuf_put(&b, "typedef %s IN0;\ntypedef %s OUT0;\n", ctype(from), ctype(to));
  put_body_head(&b, 1, 1);
  rg_strbuf_put(&b, "  out0 = ");
  put_convert(&b, "in0", from, to);
  rg_strbuf_put(&b, ";\n}\n");
  put_ew_kernel(&b, 1, 1);
  return finish(&b, why, len);
}

/* A scalar constant of the inner program as a literal of its dtype. */
static bool put_constant(rg_strbuf *b, const rg_tensor *t, int32_t c, char *why, size_t len) {
  if (rg_tensor_numel(t) != 1) return rg_say(why, len, "composite: a constant of %lld elements", (long long)rg_tensor_numel(t));
  if (rg_dtype_is_float(t->dtype)) {
    rg_strbuf_put(b, "    const %s v%d = (%s)", ctype(t->dtype), c, ctype(t->dtype));
    rgbc_put_double(b, rg_tensor_get_f64(t, 0));
    rg_strbuf_put(b, ";\n");
  } else rg_strbuf_put(b, "    const %s v%d = (%s)%lldLL;\n", ctype(t->dtype), c, ctype(t->dtype), (long long)rg_tensor_get_i64(t, 0));
  return true;
}

/* The inner program's constants, inputs and nodes, each value in v<cell>. */
static bool put_inner(rg_strbuf *b, const rgb_program *p, char *why, size_t len) {
  for (int32_t k = 0; k < p->nconst; k++)
    if (!put_constant(b, p->cells[p->const_cells[k]], p->const_cells[k], why, len)) return false;
  for (int32_t i = 0; i < p->nin; i++) rg_strbuf_put(b, "    const IN%d v%d = in%d;\n", i, p->in_cells[i], i);
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_thunk *th = &p->thunks[t];
    const rgb_node *n = &th->node;
    if (th->kind != RGB_T_KERNEL || n->inner || n->nout != 1 || n->nin > 3 * RGCU_MAXOPS)
      return rg_say(why, len, "composite: %s cannot be fused on CUDA", n->label);
    char names[3 * RGCU_MAXOPS][16];
    const char *args[3 * RGCU_MAXOPS];
    for (int k = 0; k < n->nin; k++) {
      snprintf(names[k], sizeof names[k], "v%d", th->in_cells[k]);
      args[k] = names[k];
    }
    char out[16];
    snprintf(out, sizeof out, "v%d", th->out_cells[0]);
    rg_strbuf_put(b, "    %s %s; ", ctype(n->out[0].dtype), out);
    if (!put_node(b, n, args, out, why, len)) return false;
    rg_strbuf_put(b, "\n");
  }
  return true;
}

char *rgcu_gen_composite(const rgb_node *n, char *why, size_t len) {
  const rgb_program *p = n->inner;
  if (n->code != RG_OP_COMPOSITE || !p) return rg_say(why, len, "%s: not a linked composite", n->label), NULL;
  int nops = n->nout + n->nin;
  if (nops > RGCU_MAXOPS || p->nin != n->nin || p->nout != n->nout)
    return rg_say(why, len, "composite: %d operands (at most %d)", nops, RGCU_MAXOPS), NULL;
  rg_strbuf b = {0};
  put_prelude(&b);
  put_types(&b, "IN", n->nin, n->in);
  put_types(&b, "OUT", n->nout, n->out);
  put_body_head(&b, n->nout, n->nin);
  if (!put_inner(&b, p, why, len)) {
    rg_free(b.s);
    return NULL;
  }
  for (int j = 0; j < n->nout; j++) rg_strbuf_put(&b, "    out%d = v%d;\n", j, p->out_cells[j]);
  rg_strbuf_put(&b, "}\n");
  put_ew_kernel(&b, n->nout, n->nin);
  return finish(&b, why, len);
}

/* ------------------------------------------------------------------ reductions and softmax */

/* The argument struct of reductions and the head of the loop over output
 * elements: base (input bytes), obase (output bytes) of output element i. */
static void put_red_head(rg_strbuf *b, const char *TI, const char *TO) {
  rg_strbuf_put(b, "struct rg_red_args { long long nout; int nk; long long kshape[%d];"
                   " long long kst[%d]; long long ost[%d]; int nr; long long rshape[%d];"
                   " long long rst[%d]; long long rn; long long ast; const char *in; char *out; };\n",
                RGCU_MAXND, RGCU_MAXND, RGCU_MAXND, RGCU_MAXND, RGCU_MAXND);
  rg_strbuf_put(b, "typedef %s TI; typedef %s TO;\n", TI, TO);
  rg_strbuf_put(b, "static __device__ inline long long rg_roff(const rg_red_args &a, long long j) {\n"
                   "  long long off = 0;\n"
                   "  for (int d = a.nr - 1; d >= 0; d--) {\n"
                   "    const long long q = j / a.rshape[d];\n"
                   "    off += (j - q * a.rshape[d]) * a.rst[d];\n"
                   "    j = q;\n"
                   "  }\n"
                   "  return off;\n"
                   "}\n");
  rg_strbuf_put(b, "extern \"C\" __global__ void rg_kernel(const rg_red_args a) {\n"
                   "  const long long step = (long long)blockDim.x * gridDim.x;\n"
                   "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.nout; i += step) {\n"
                   "    long long base = 0, obase = 0, r = i;\n"
                   "    for (int d = a.nk - 1; d >= 0; d--) {\n"
                   "      const long long q = r / a.kshape[d], j = r - q * a.kshape[d];\n"
                   "      r = q;\n"
                   "      base += j * a.kst[d];\n"
                   "      obase += j * a.ost[d];\n"
                   "    }\n");
}

#define VAL "(*(const TI *)(a.in + base + rg_roff(a, j)))"

/* The body of a reduction: acc starts, takes each element v, is written. */
static bool put_reduce_body(rg_strbuf *b, const rgb_node *n, char *why, size_t len) {
  rg_dtype idt = n->in[0].dtype, odt = n->out[0].dtype;
  bool fl = rg_dtype_is_float(odt);
  const char *S = odt == RG_FLOAT32 ? "f32" : "f64";
  const char *loop = "    for (long long j = 0; j < a.rn; j++) { const TI v = " VAL "; ";
  switch (n->code) {
  case RG_OP_SUM: case RG_OP_MEAN:
    rg_strbuf_put(b, "    TO acc = 0;\n%sacc = (TO)(acc + (TO)v); }\n", loop);
    if (n->code == RG_OP_MEAN) rg_strbuf_put(b, "    acc = acc / (TO)a.rn;\n");
    break;
  case RG_OP_PROD:
    if (fl) rg_strbuf_put(b, "    TO acc = 1;\n%sacc = acc * (TO)v; }\n", loop);
    else rg_strbuf_put(b, "    TO acc = 1;\n%sacc = (TO)((uint64_t)acc * (uint64_t)(TO)v); }\n", loop);
    break;
  case RG_OP_MAX: case RG_OP_MIN: {
    bool mx = n->code == RG_OP_MAX;
    rg_strbuf_put(b, "    TO acc = (TO)(*(const TI *)(a.in + base));\n%s", loop);
    if (rg_dtype_is_float(idt)) rg_strbuf_put(b, "acc = s_%snan_%s(acc, (TO)v); }\n", mx ? "max" : "min", S);
    else rg_strbuf_put(b, "acc = (TO)v %s acc ? (TO)v : acc; }\n", mx ? ">" : "<");
    break;
  }
  case RG_OP_ARGMAX: case RG_OP_ARGMIN: {
    /* the first extreme; a NaN is an extreme, the first one wins */
    const char *cmp = n->code == RG_OP_ARGMAX ? ">" : "<";
    rg_strbuf_put(b, "    TI best = *(const TI *)(a.in + base); long long at = 0;\n%s", loop);
    rg_strbuf_put(b, "if (!(best != best) && (v %s best || v != v)) { best = v; at = j; } }\n    const TO acc = (TO)at;\n", cmp);
    break;
  }
  case RG_OP_ALL:
    rg_strbuf_put(b, "    TO acc = 1;\n%sacc = (TO)(acc & (v != 0)); }\n", loop);
    break;
  case RG_OP_ANY:
    rg_strbuf_put(b, "    TO acc = 0;\n%sacc = (TO)(acc | (v != 0)); }\n", loop);
    break;
  default: return rg_say(why, len, "%s: not a reduction", n->label);
  }
  rg_strbuf_put(b, "    *(TO *)(a.out + obase) = acc;\n");
  return true;
}

char *rgcu_gen_reduce(const rgb_node *n, char *why, size_t len) {
  if (rg_opcode_family(n->code) != RG_FAM_REDUCE || n->code == RG_OP_SOFTMAX || n->code == RG_OP_LOG_SOFTMAX)
    return rg_say(why, len, "%s: not a reduction", n->label), NULL;
  rg_strbuf b = {0};
  put_prelude(&b);
  put_red_head(&b, ctype(n->in[0].dtype), ctype(n->out[0].dtype));
  if (!put_reduce_body(&b, n, why, len)) {
    rg_free(b.s);
    return NULL;
  }
  put_ew_tail(&b);
  return finish(&b, why, len);
}

char *rgcu_gen_softmax(const rgb_node *n, char *why, size_t len) {
  rg_dtype dt = n->out[0].dtype;
  if ((n->code != RG_OP_SOFTMAX && n->code != RG_OP_LOG_SOFTMAX) || !rg_dtype_is_float(dt))
    return rg_say(why, len, "%s: not a float softmax", n->label), NULL;
  bool f32 = dt == RG_FLOAT32;
  const char *S = f32 ? "f32" : "f64", *ex = f32 ? "expf" : "exp", *lg = f32 ? "logf" : "log";
  rg_strbuf b = {0};
  put_prelude(&b);
  put_red_head(&b, ctype(n->in[0].dtype), ctype(dt));
  /* one row: its maximum, the sum of the shifted exponentials, the values */
  rg_strbuf_put(&b, "    TO m = (TO)(*(const TI *)(a.in + base));\n"
                    "    for (long long j = 0; j < a.rn; j++) m = s_maxnan_%s(m, (TO)" VAL ");\n"
                    "    TO s = 0;\n"
                    "    for (long long j = 0; j < a.rn; j++) s += %s((TO)" VAL " - m);\n",
                S, ex);
  if (n->code == RG_OP_SOFTMAX)
    rg_strbuf_put(&b, "    for (long long j = 0; j < a.rn; j++) *(TO *)(a.out + obase + j * a.ast) = %s((TO)" VAL " - m) / s;\n", ex);
  else
    rg_strbuf_put(&b, "    const TO ls = %s(s);\n"
                      "    for (long long j = 0; j < a.rn; j++) *(TO *)(a.out + obase + j * a.ast) = (TO)" VAL " - m - ls;\n",
                  lg);
  put_ew_tail(&b);
  return finish(&b, why, len);
}

/* ------------------------------------------------------------------ kernel arguments */

/* Merges dimension d into d + 1 wherever every operand steps over both
 * as over one (st[d] == st[d + 1] * shape[d + 1]) and drops dimensions
 * of size 1, so a contiguous operand set is one dimension whatever its
 * rank: the kernel divides once per remaining inner dimension. */
static void coalesce(rgcu_ew_args *a, int nops) {
  int nd = 0;
  for (int d = 0; d < a->nd; d++) {
    if (a->shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; merge && k < nops; k++)
      merge = a->st[k][nd - 1] == a->st[k][d] * a->shape[d];
    if (merge) {
      a->shape[nd - 1] *= a->shape[d];
      for (int k = 0; k < nops; k++) a->st[k][nd - 1] = a->st[k][d];
      continue;
    }
    a->shape[nd] = a->shape[d];
    for (int k = 0; k < nops; k++) a->st[k][nd] = a->st[k][d];
    nd++;
  }
  a->nd = nd;
}

void rgcu_divisor(int64_t d, uint32_t *mag, int *sh) {
  *mag = 0, *sh = 0;
  if (d < 1 || d > ((int64_t)1 << 31)) return;
  int l = 0;
  while (((int64_t)1 << l) < d) l++;
  *sh = l;
  *mag = (uint32_t)(((((uint64_t)1 << l) - (uint64_t)d) << 32) / (uint64_t)d + 1);
}

void rgcu_ew_args_of(rgcu_ew_args *a, int nd, const int64_t *shape, int nout, rg_tensor *const *outs,
                     int nin, rg_tensor *const *ins) {
  memset(a, 0, sizeof *a);
  a->nd = nd;
  a->n = 1;
  for (int d = 0; d < nd; d++) a->shape[d] = shape[d], a->n *= shape[d];
  for (int j = 0; j < nout; j++) {
    rgbc_broadcast_strides(outs[j], nd, shape, a->st[j]);
    a->p[j] = outs[j]->data;
  }
  for (int i = 0; i < nin; i++) {
    rgbc_broadcast_strides(ins[i], nd, shape, a->st[nout + i]);
    a->p[nout + i] = ins[i]->data;
  }
  if (a->n > 0) coalesce(a, nout + nin);
  for (int d = 0; d < a->nd; d++) rgcu_divisor(a->shape[d], &a->mag[d], &a->sh[d]);
}

static bool is_softmax(const rgb_node *n) { return n->code == RG_OP_SOFTMAX || n->code == RG_OP_LOG_SOFTMAX; }

/* Which dimensions of the input a reduction or softmax runs along. */
static void reduced_dims(const rgb_node *n, int ndim, bool *red) {
  bool soft = is_softmax(n);
  for (int d = 0; d < ndim; d++) red[d] = n->all_axes && !soft;
  for (int i = 0; i < n->nints && (!soft || i < 1); i++) red[n->ints[i]] = true;
}

int rgcu_red_shape(const rgb_node *n, const rg_tensor *in, int64_t *shape) {
  bool red[RG_MAX_NDIM];
  reduced_dims(n, in->ndim, red);
  int od = 0;
  for (int d = 0; d < in->ndim; d++)
    if (is_softmax(n) || !red[d]) shape[od++] = in->shape[d];
  return od;
}

void rgcu_red_args_of(rgcu_red_args *a, const rgb_node *n, const rg_tensor *in, rg_tensor *out) {
  bool red[RG_MAX_NDIM], soft = is_softmax(n);
  reduced_dims(n, in->ndim, red);
  memset(a, 0, sizeof *a);
  *a = (rgcu_red_args){.in = in->data, .out = out->data, .rn = 1, .nout = 1};
  for (int d = 0, k = 0; d < in->ndim; d++) {
    if (red[d]) {
      a->rshape[a->nr] = in->shape[d];
      a->rst[a->nr++] = in->strides[d];
      a->rn *= in->shape[d];
      if (soft) a->ast = out->strides[d];
      continue;
    }
    a->kshape[a->nk] = in->shape[d];
    a->kst[a->nk] = in->strides[d];
    a->ost[a->nk++] = out->strides[soft ? d : k++];
    a->nout *= in->shape[d];
  }
}

/* ------------------------------------------------------------------ two-pass reductions */

#define SPLIT_MAX_OUTPUTS 8192
#define SPLIT_MIN_REDUCED 1024

int64_t rgcu_red_split_factor(const rgb_node *n, rg_dtype in_dtype, const rgcu_red_args *a) {
  switch (n->code) {
  case RG_OP_SUM: case RG_OP_PROD: case RG_OP_MAX: case RG_OP_MIN: case RG_OP_MEAN:
  case RG_OP_ALL: case RG_OP_ANY: break;
  default: return 1;
  }
  if (in_dtype != n->out[0].dtype || a->nr < 1 || a->nk + 1 > RGCU_MAXND || a->nout > SPLIT_MAX_OUTPUTS ||
      a->rn < SPLIT_MIN_REDUCED)
    return 1;
  for (int64_t p = 256; p >= 4; p--)
    if (a->rshape[0] % p == 0) return p;
  return 1;
}

void rgcu_red_split_args(const rgcu_red_args *a, int64_t P, int64_t esz, char *scratch, rgcu_red_args *one,
                         rgcu_red_args *two) {
  *one = *a, *two = *a;
  /* pass one: the chunk index becomes the first kept dimension, the
   * partials laid out (P, outputs) */
  one->nk = a->nk + 1;
  one->kshape[0] = P, one->kst[0] = (a->rshape[0] / P) * a->rst[0], one->ost[0] = a->nout * esz;
  int64_t stride = esz;
  for (int d = a->nk - 1; d >= 0; d--) {
    one->kshape[d + 1] = a->kshape[d], one->kst[d + 1] = a->kst[d], one->ost[d + 1] = stride;
    two->kst[d] = stride; /* pass two reads the partials where pass one wrote them */
    stride *= a->kshape[d];
  }
  one->rshape[0] = a->rshape[0] / P, one->rn = a->rn / P, one->nout = P * a->nout, one->out = scratch;
  /* pass two: the P partials of each output reduced, into the output */
  two->nr = 1, two->rshape[0] = P, two->rst[0] = a->nout * esz, two->rn = P, two->in = scratch;
}

