/*
 * codegen.c — C kernels generated for fused groups (composite ops).
 *
 * The composite interpreter (inner.c) runs each inner op as its own loop
 * over a block of 1024 elements.  For a composite whose values are all of
 * one float dtype and whose ops this file knows, a kernel is generated
 * instead: the arithmetic between two transcendental functions becomes one
 * loop computing in registers (the compiler vectorises it for the host,
 * -march=native), each transcendental function a call of the vector
 * function of vmath.c on the block, as the interpreter makes.  The
 * expressions and their helper functions come from scalar-float.h, the
 * interpreter's own definitions, written out as text, and the kernel is
 * compiled without contracting a * b + c into one rounding
 * (-ffp-contract=off), so a generated kernel gives the interpreter's bits.
 *
 * On a CPU with AVX-512 the vector functions are not called through vf but
 * written into the kernel (vmath-avx512.h, the text vmath.c compiles), and
 * the kernel takes its block in pieces of INLINE_SUB elements through all
 * its passes (CALL_SUB elsewhere), so every array streams at once, as in one loop written by
 * hand: sigmoid(a)*tanh(b)+c*d over 10^7 float32 went from 1.6x to about
 * 1.15x a hand-written C loop with libmvec here.  The same lanes go
 * through the same libmvec functions, so the bits are vmath.c's.
 *
 * Contract of a kernel: rg_kernel(out, in, m, vf) with m <= CB elements,
 * in[j] and out[k] contiguous arrays of m elements (the caller gathers
 * broadcast and strided inputs into blocks, as for the interpreter), vf
 * the vector functions in RGBC_VMATH order.  A kernel of arithmetic alone
 * has a twin in the same object, rg_kernel_nt, computing the same values
 * and writing them with streaming stores (stream.c), for outputs too large
 * to stay in the cache; its caller fences before another thread reads
 * them.  Memory bounds such a kernel, and the twin takes 2*x + 1 over 10^7
 * float32 from about 0.9x to 0.5x NumPy's time here.  A kernel with vector
 * functions has none (the computation bounds it, streaming its staged
 * blocks measured no faster, and a twin would add a third to a cold
 * compile).
 *
 * Compiling.  The source is hashed; the shared object lives in the cache
 * directory (the function's rg_compile_opts.cache_dir, else
 * $RELGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/relgraph, else
 * $HOME/.cache/relgraph) under the hash, so a kernel is compiled once per
 * machine (about 0.1 s with cc) and later loaded with dlopen, which also
 * shares one loaded copy within a process.  The compiler is $RELGRAPH_CC
 * or cc; rg_compile_opts.no_codegen or RELGRAPH_CODEGEN=0 turns generation
 * off.  A compiler that is missing or fails leaves the interpreter in
 * charge: generation is an
 * optimisation, never a requirement.  Two processes compiling one kernel
 * write their own temporary files and rename the result into place.  The
 * key the entry is named by hashes the source, the flags, the compiler and
 * the processor's features (what -march=native resolves), and the object
 * carries it (rg_kernel_key): an entry is loaded only when it is a whole
 * ELF object naming its key, and compiled again otherwise (a kernel of
 * another source, or of another machine sharing the cache, never runs).
 * Loaded objects stay loaded for the life of the process.
 */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/scalar-float.h"
#include "backend/cpu/vmath-avx512.h"
#include "base/base.h"

#include <dlfcn.h>
#include <elf.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;


/* ------------------------------------------------------------------ the vector functions */

/* The opcodes of RGBC_VMATH, in its order. */
static const rg_opcode vcodes[] = {RG_OP_EXP,  RG_OP_LOG, RG_OP_LOG1P, RG_OP_EXPM1,   RG_OP_TANH,
                                   RG_OP_ERF,  RG_OP_SIN, RG_OP_COS,   RG_OP_SIGMOID, RG_OP_SOFTPLUS};

#define VPTR32(name) rgbc_v##name##_f32,
#define VPTR64(name) rgbc_v##name##_f64,
static void (*const vf32[])(const float *, float *, int64_t) = {RGBC_VMATH(VPTR32)};
static void (*const vf64[])(const double *, double *, int64_t) = {RGBC_VMATH(VPTR64)};
_Static_assert(sizeof vcodes / sizeof vcodes[0] == sizeof vf32 / sizeof vf32[0], "RGBC_VMATH order");

#define STR_(...) #__VA_ARGS__
#define XSTR(...) STR_(__VA_ARGS__)
static const char avx512_text[] = XSTR(RGBC_AVX512_ALL);

const void *rgbc_codegen_vfns(bool f32) { return f32 ? (const void *)vf32 : (const void *)vf64; }

static int vindex(rg_opcode c) {
  for (int i = 0; i < (int)(sizeof vcodes / sizeof vcodes[0]); i++)
    if (vcodes[i] == c) return i;
  return -1;
}

/* ------------------------------------------------------------------ the expressions */

/* The float arithmetic of an op (scalar-expr.c), or NULL: comparisons
 * and switch, whose values are not all of one float dtype, are left to
 * the interpreter. */
static const char *float_expr(rg_opcode c, bool f32, int arity) {
  switch (c) {
  case RG_OP_LT: case RG_OP_GT: case RG_OP_LE: case RG_OP_GE: case RG_OP_EQ: case RG_OP_NEQ:
  case RG_OP_SWITCH: return NULL;
  default: return rgbc_expr(c, f32 ? RG_FLOAT32 : RG_FLOAT64, arity);
  }
}

/* ------------------------------------------------------------------ generating a kernel */

/* What generation knows of a cell.  Invariant: an arithmetic value lives
 * in the register r<c> within its loop, and also in an array when a
 * vector function or a later loop reads it (`array`).  That array is the
 * block of the cell's first output where it is one (o<out>: a value the
 * kernel returns is written once, where it goes, and read back from
 * there), else a<c> of the piece. */
typedef struct cellinfo {
  int input;      /* index of the kernel input, or -1 */
  int producer;   /* thunk, or -1 */
  int loop;       /* the loop computing it (arithmetic), -1 for a vector result */
  int out;        /* the first kernel output it is, or -1 */
  bool array;     /* has a block array (o<out> or a<c>) */
  bool constant;
} cellinfo;

typedef struct gen {
  const rgb_program *p;
  rg_dtype dt;
  bool f32;
  const char *T;
  cellinfo *cells;
  int *loop_of;   /* per thunk: its loop, -1 for a vector function */
  bool inline512; /* vector functions inline (vmath-avx512.h), else through vf */
  rg_strbuf src;
} gen;

static bool is_vector(const rgb_node *n) { return vindex(n->code) >= 0; }

/* The arity an op's expression takes (0: not generated). */
static int arity(const rgb_node *n, bool f32) {
  if (n->nout != 1) return 0;
  if (is_vector(n)) return n->nin == 1;
  if ((n->code == RG_OP_ADD || n->code == RG_OP_MUL) && n->nin >= 2) return 2;
  for (int k = 1; k <= 3; k++)
    if (float_expr(n->code, f32, k)) return n->nin == k ? k : 0;
  return 0;
}

static bool is_const_cell(const rgb_program *p, int32_t c) {
  for (int32_t k = 0; k < p->nconst; k++)
    if (p->const_cells[k] == c) return true;
  return false;
}

/* Whether every value of the program is of dtype dt (constants are
 * converted, as the interpreter converts them) and every op known. */
static bool supported(gen *g) {
  const rgb_program *p = g->p;
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_thunk *th = &p->thunks[t];
    const rgb_node *n = &th->node;
    if (n->inner || !arity(n, g->f32) || n->out[0].dtype != g->dt) return false;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k].dtype != g->dt && !is_const_cell(p, th->in_cells[k])) return false;
  }
  for (int32_t k = 0; k < p->nconst; k++) {
    const rg_tensor *c = p->cells[p->const_cells[k]];
    if (!c || rg_tensor_numel(c) != 1) return false;
  }
  for (int32_t j = 0; j < p->nout; j++)
    if (p->producer[p->out_cells[j]] < 0) return false;
  return true;
}

/* Loops: arithmetic thunks between two vector functions share one; a cell
 * needs an array when a vector function or another loop reads it. */
static void plan(gen *g) {
  const rgb_program *p = g->p;
  for (int32_t c = 0; c < p->ncells; c++) g->cells[c] = (cellinfo){-1, p->producer[c], -1, -1, false, false};
  for (int32_t i = 0; i < p->nin; i++) g->cells[p->in_cells[i]].input = i;
  for (int32_t j = p->nout; j-- > 0;) g->cells[p->out_cells[j]].out = j;
  for (int32_t k = 0; k < p->nconst; k++) g->cells[p->const_cells[k]].constant = true;
  int loop = 0;
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_node *n = &p->thunks[t].node;
    if (is_vector(n)) {
      g->loop_of[t] = -1;
      loop++;
    } else {
      g->loop_of[t] = loop;
      g->cells[p->thunks[t].out_cells[0]].loop = loop;
    }
  }
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_thunk *th = &p->thunks[t];
    for (int k = 0; k < th->node.nin; k++) {
      cellinfo *ci = &g->cells[th->in_cells[k]];
      if (ci->producer < 0) continue;
      if (g->loop_of[t] < 0 || ci->loop != g->loop_of[t]) ci->array = true;
    }
  }
}

/* The name of cell c's array. */
static void array_name(gen *g, int32_t c) {
  if (g->cells[c].out >= 0) rg_strbuf_put(&g->src, "o%d", g->cells[c].out);
  else rg_strbuf_put(&g->src, "a%d", c);
}

/* The text reading cell c at element i inside loop `loop`. */
static void operand(gen *g, int32_t c, int loop) {
  const cellinfo *ci = &g->cells[c];
  if (ci->input >= 0) rg_strbuf_put(&g->src, "i%d[i]", ci->input);
  else if (ci->constant) {
    rg_strbuf_put(&g->src, "((%s)", g->T);
    rgbc_put_double(&g->src, rgbc_scalar_f64(g->p->cells[c]));
    rg_strbuf_put(&g->src, ")");
  }
  else if (ci->loop == loop && ci->loop >= 0) rg_strbuf_put(&g->src, "r%d", c);
  else array_name(g, c), rg_strbuf_put(&g->src, "[i]");
}

/* The array a vector function reads cell c from. */
static bool vector_source(gen *g, int32_t c) {
  const cellinfo *ci = &g->cells[c];
  if (ci->input >= 0) rg_strbuf_put(&g->src, "i%d", ci->input);
  else if (ci->array) array_name(g, c);
  else return false; /* a constant: folded before it gets here */
  return true;
}

static void emit_arith(gen *g, const rgb_thunk *th, int loop) {
  const rgb_node *n = &th->node;
  int32_t c = th->out_cells[0];
  bool nary = (n->code == RG_OP_ADD || n->code == RG_OP_MUL) && n->nin > 2;
  const char *e = float_expr(n->code, g->f32, nary ? 2 : n->nin);
  static const char *const names[3] = {"x", "y", "z"};
  if (!nary) {
    rg_strbuf_put(&g->src, "    %s r%d; { ", g->T, c);
    for (int k = 0; k < n->nin; k++) {
      rg_strbuf_put(&g->src, "const %s %s = ", g->T, names[k]);
      operand(g, th->in_cells[k], loop);
      rg_strbuf_put(&g->src, "; ");
    }
    rg_strbuf_put(&g->src, "r%d = (%s); }\n", c, e);
    return;
  }
  /* n-ary add and mul, folded from the left as the interpreter does */
  rg_strbuf_put(&g->src, "    %s r%d; { %s acc = ", g->T, c, g->T);
  operand(g, th->in_cells[0], loop);
  rg_strbuf_put(&g->src, ";");
  for (int k = 1; k < n->nin; k++) {
    rg_strbuf_put(&g->src, " { const %s x = acc, y = ", g->T);
    operand(g, th->in_cells[k], loop);
    rg_strbuf_put(&g->src, "; acc = (%s); }", e);
  }
  rg_strbuf_put(&g->src, " r%d = acc; }\n", c);
}

/* Whether cell c is a kernel output other than the one holding its array. */
static bool more_outputs(const gen *g, int32_t c) {
  for (int32_t j = 0; j < g->p->nout; j++)
    if (g->p->out_cells[j] == c && j != g->cells[c].out) return true;
  return false;
}

/* Stores of cell c at element i: its array (its first output, if it is
 * one), then the other outputs it is, from the register r<c> or, for a
 * vector result (`from_array`), from its array. */
static void emit_stores(gen *g, int32_t c, bool from_array) {
  const cellinfo *ci = &g->cells[c];
  if (!from_array && (ci->array || ci->out >= 0)) {
    rg_strbuf_put(&g->src, "    ");
    array_name(g, c);
    rg_strbuf_put(&g->src, "[i] = r%d;\n", c);
  }
  for (int32_t j = 0; j < g->p->nout; j++) {
    if (g->p->out_cells[j] != c || j == ci->out) continue;
    rg_strbuf_put(&g->src, "    o%d[i] = ", j);
    if (from_array) array_name(g, c), rg_strbuf_put(&g->src, "[i];\n");
    else rg_strbuf_put(&g->src, "r%d;\n", c);
  }
}

static bool emit_body(gen *g) {
  const rgb_program *p = g->p;
  bool open = false;
  for (int32_t t = 0; t < p->nthunks; t++) {
    const rgb_thunk *th = &p->thunks[t];
    int32_t c = th->out_cells[0];
    if (g->loop_of[t] < 0) {
      if (open) rg_strbuf_put(&g->src, "  }\n"), open = false;
      /* vmath-avx512.h names its functions after the ops */
      if (g->inline512) rg_strbuf_put(&g->src, "  %s_%s_avx512(", rg_opcode_name(th->node.code), g->f32 ? "f32" : "f64");
      else rg_strbuf_put(&g->src, "  vf[%d](", vindex(th->node.code));
      if (!vector_source(g, th->in_cells[0])) return false;
      rg_strbuf_put(&g->src, ", ");
      array_name(g, c);
      rg_strbuf_put(&g->src, ", m);\n");
      g->cells[c].array = true;
      if (more_outputs(g, c)) {
        rg_strbuf_put(&g->src, "  for (int64_t i = 0; i < m; i++) {\n");
        emit_stores(g, c, true);
        rg_strbuf_put(&g->src, "  }\n");
      }
      continue;
    }
    if (!open) rg_strbuf_put(&g->src, "  for (int64_t i = 0; i < m; i++) {\n"), open = true;
    emit_arith(g, th, g->loop_of[t]);
    emit_stores(g, c, false);
  }
  if (open) rg_strbuf_put(&g->src, "  }\n");
  return true;
}

/* A kernel with vector functions takes its block through its passes in
 * pieces this long (each pass reads one or two arrays; short passes keep
 * every array streaming at once, as one loop written by hand does):
 * INLINE_SUB where the vector functions are inline (AVX-512), CALL_SUB
 * where each is a call through vf (measured: sigmoid(a)*tanh(b)+c*d over
 * 10^7 float32, pieces of 32-128 about 10% faster than whole blocks
 * through calls, 32 and 64 slower again from the calls' cost).  Pure
 * arithmetic is one loop over the whole block. */
#define INLINE_SUB 32
#define CALL_SUB 128

/* The streaming store of one 64-byte line (stream.c says when it pays),
 * as text for the kernel: the compiler's non-temporal store builtin for
 * the widest vectors the target has, an ordinary copy where the line is
 * not aligned or the compiler has none. */
static const char nt_text[] =
    "typedef float rg_line __attribute__((vector_size(64)));\n"
    "static inline void rg_nt(void *p, const void *s) {\n"
    "  if ((uintptr_t)p & 63) { memcpy(p, s, 64); return; }\n"
    "#if defined(__clang__)\n"
    "  rg_line v; memcpy(&v, s, 64); __builtin_nontemporal_store(v, (rg_line *)p);\n"
    "#elif defined(__GNUC__) && defined(__AVX512F__)\n"
    "  rg_line v; memcpy(&v, s, 64); __builtin_ia32_movntps512((float *)p, v);\n"
    "#elif defined(__GNUC__) && defined(__AVX__)\n"
    "  typedef float h __attribute__((vector_size(32))); h a, b; memcpy(&a, s, 32); memcpy(&b, (const char *)s + 32, 32);\n"
    "  __builtin_ia32_movntps256((float *)p, a); __builtin_ia32_movntps256((float *)p + 8, b);\n"
    "#elif defined(__GNUC__) && defined(__SSE__)\n"
    "  typedef float q __attribute__((vector_size(16)));\n"
    "  for (int k = 0; k < 4; k++) { q v; memcpy(&v, (const char *)s + 16 * k, 16); __builtin_ia32_movntps((float *)p + 4 * k, v); }\n"
    "#else\n"
    "  memcpy(p, s, 64);\n"
    "#endif\n"
    "}\n";

/* rg_kernel_nt: rg_kernel writing its outputs with streaming stores.  The
 * block goes in pieces of one 64-byte line: the
 * inputs are copied into arrays of the piece (the compiler reads them
 * straight from memory into vectors), the body computes into arrays of the
 * piece, and each line is streamed out.  A tail shorter than a piece runs
 * the body in place. */
static void emit_streaming(gen *g) {
  const rgb_program *p = g->p;
  const int piece = 64 / (g->f32 ? 4 : 8);
  rg_strbuf_put(&g->src, "void rg_kernel_nt(%s *const *out, const %s *const *in, int64_t mm, const rgv *vf) {\n", g->T, g->T);
  rg_strbuf_put(&g->src, "  int64_t b = 0;\n  for (; b + %d <= mm; b += %d) {\n", piece, piece);
  for (int32_t i = 0; i < p->nin; i++)
    rg_strbuf_put(&g->src, "    %s s%d[%d]; memcpy(s%d, in[%d] + b, sizeof s%d);\n", g->T, i, piece, i, i, i);
  for (int32_t j = 0; j < p->nout; j++) rg_strbuf_put(&g->src, "    %s q%d[%d];\n", g->T, j, piece);
  rg_strbuf_put(&g->src, "    const %s *const pin[] = {", g->T);
  for (int32_t i = 0; i < p->nin; i++) rg_strbuf_put(&g->src, "s%d, ", i);
  rg_strbuf_put(&g->src, "0};\n    %s *const pout[] = {", g->T);
  for (int32_t j = 0; j < p->nout; j++) rg_strbuf_put(&g->src, "q%d, ", j);
  rg_strbuf_put(&g->src, "0};\n    rg_body(pout, pin, %d, vf);\n", piece);
  for (int32_t j = 0; j < p->nout; j++)
    rg_strbuf_put(&g->src, "    rg_nt(out[%d] + b, q%d);\n", j, j);
  rg_strbuf_put(&g->src, "  }\n  if (b == mm) return;\n  const %s *tin[] = {", g->T);
  for (int32_t i = 0; i < p->nin; i++) rg_strbuf_put(&g->src, "in[%d] + b, ", i);
  rg_strbuf_put(&g->src, "0};\n  %s *tout[] = {", g->T);
  for (int32_t j = 0; j < p->nout; j++) rg_strbuf_put(&g->src, "out[%d] + b, ", j);
  rg_strbuf_put(&g->src, "0};\n  rg_body(tout, tin, mm - b, vf);\n}\n");
}

/* The kernel's source for program p, or NULL (rg_free the result). */
static char *kernel_source(const rgb_program *p, rg_dtype dt) {
  gen g = {.p = p, .dt = dt, .f32 = dt == RG_FLOAT32, .T = dt == RG_FLOAT32 ? "float" : "double"};
  if (!supported(&g)) return NULL;
  g.cells = rg_calloc((size_t)p->ncells + 1, sizeof *g.cells);
  g.loop_of = rg_calloc((size_t)p->nthunks + 1, sizeof *g.loop_of);
  if (!g.cells || !g.loop_of) goto fail;
  plan(&g);
  bool any_vector = false;
  for (int32_t t = 0; t < p->nthunks; t++) any_vector |= is_vector(&p->thunks[t].node);
  g.inline512 = any_vector && rgbc_vmath_width() == 2;
  int sub = !any_vector ? RGBC_CODEGEN_BLOCK : g.inline512 ? INLINE_SUB : CALL_SUB;
  rg_strbuf_put(&g.src, "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n%s\n", rgbc_helpers_text(g.dt));
  if (g.inline512) rg_strbuf_put(&g.src, "%s\n", avx512_text);
  if (!any_vector) rg_strbuf_put(&g.src, "%s", nt_text);
  rg_strbuf_put(&g.src, "typedef void (*rgv)(const %s *, %s *, int64_t);\n", g.T, g.T);
  /* one piece of m elements at b through every pass; the block runs its
   * full pieces with m the constant `sub`, so that the compiler lays out
   * each pass as straight vector code without a remainder loop, then the
   * remainder once (with outputs as arrays: bench/graphs/lstm_cell_f32.graph,
   * the LSTM cell's kernel of seven outputs on 8192 float32, a call from
   * 55 to 36 us here) */
  rg_strbuf_put(&g.src, "static inline __attribute__((always_inline)) void rg_piece(%s *const *out, const %s *const *in, int64_t b, const int64_t m, const rgv *vf) {\n", g.T, g.T);
  rg_strbuf_put(&g.src, "  (void)vf;\n");
  for (int32_t c = 0; c < p->ncells; c++)
    if (g.cells[c].out < 0 && (g.cells[c].array || (g.cells[c].producer >= 0 && g.loop_of[g.cells[c].producer] < 0)))
      rg_strbuf_put(&g.src, "  %s a%d[%d];\n", g.T, c, sub);
  for (int32_t i = 0; i < p->nin; i++) rg_strbuf_put(&g.src, "  const %s *restrict i%d = in[%d] + b;\n", g.T, i, i);
  for (int32_t j = 0; j < p->nout; j++) rg_strbuf_put(&g.src, "  %s *restrict o%d = out[%d] + b;\n", g.T, j, j);
  if (!emit_body(&g)) goto fail;
  rg_strbuf_put(&g.src, "}\n");
  rg_strbuf_put(&g.src, "static inline __attribute__((always_inline)) void rg_body(%s *const *out, const %s *const *in, int64_t mm, const rgv *vf) {\n", g.T, g.T);
  rg_strbuf_put(&g.src, "  int64_t b = 0;\n  for (; b + %d <= mm; b += %d) rg_piece(out, in, b, %d, vf);\n", sub, sub, sub);
  rg_strbuf_put(&g.src, "  if (b < mm) rg_piece(out, in, b, mm - b, vf);\n}\n");
  rg_strbuf_put(&g.src, "void rg_kernel(%s *const *out, const %s *const *in, int64_t mm, const rgv *vf) { rg_body(out, in, mm, vf); }\n", g.T, g.T);
  if (!any_vector) emit_streaming(&g);
  if (g.src.failed) goto fail;
  rg_free(g.cells);
  rg_free(g.loop_of);
  return g.src.s;
fail:
  rg_free(g.cells);
  rg_free(g.loop_of);
  rg_free(g.src.s);
  return NULL;
}

/* ------------------------------------------------------------------ compiling and loading */

#define CFLAGS "-O3 -march=native -ffp-contract=off -fno-math-errno -fPIC -shared"

/* A cache entry is the compiled object followed by a trailer: the FNV-1a
 * hash of the object's bytes, then ENTRY_MAGIC (8 bytes each; the loader
 * maps only what the object's headers name, so the trailer is never
 * mapped).  An entry whose bytes do not give its hash (cut short, changed
 * in place, written by something else) is compiled again, never loaded:
 * a whole ELF object with its key but damaged code would otherwise run. */
#define ENTRY_MAGIC "rgksum01"
#define TRAILER 16

/* The bytes of the file at path (malloc'd), or NULL. */
static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  unsigned char *b = size >= 0 && fseek(f, 0, SEEK_SET) == 0 ? rg_malloc((size_t)size + 1) : NULL;
  if (b && fread(b, 1, (size_t)size, f) != (size_t)size) rg_free(b), b = NULL;
  fclose(f);
  *n = b ? (size_t)size : 0;
  return b;
}

/* Appends the trailer to the object at path. */
static bool seal(const char *path) {
  size_t n;
  unsigned char *b = read_file(path, &n);
  if (!b) return false;
  uint64_t h = rg_fnv1a_bytes(b, n, RG_FNV_SEED);
  rg_free(b);
  FILE *f = fopen(path, "ab");
  if (!f) return false;
  bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(ENTRY_MAGIC, 8, 1, f) == 1;
  return !fclose(f) && ok;
}

#define MAX_WORDS 64

/* Splits s (copied into buf) at blanks into argv from *n on. */
static bool split_words(const char *s, char *buf, size_t len, char **argv, int *n) {
  if (snprintf(buf, len, "%s", s) >= (int)len) return false;
  char *save = NULL;
  for (char *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (*n == MAX_WORDS - 6) return false;
    argv[(*n)++] = w;
  }
  return true;
}

/* Runs the compiler on source file csrc into out, without a shell (the
 * paths go to it as they are, whatever they hold): cc split at blanks (a
 * compiler and flags of its own), then CFLAGS; its messages go to
 * /dev/null.  Whether it succeeded. */
static bool run_compiler(const char *cc, const char *out, const char *csrc) {
  char ccbuf[1024], flags[sizeof CFLAGS], *argv[MAX_WORDS];
  int n = 0;
  if (!split_words(cc, ccbuf, sizeof ccbuf, argv, &n) || !n || !split_words(CFLAGS, flags, sizeof flags, argv, &n))
    return false;
  argv[n++] = "-o", argv[n++] = (char *)out, argv[n++] = (char *)csrc, argv[n++] = "-lm", argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return false;
  bool ok = !posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) &&
            !posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  ok = ok && !posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (!ok) return false;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Compiles src into path (through temporary files renamed into place,
 * the trailer appended before the rename). */
static bool compile(const char *src, const char *path) {
  const char *cc = getenv("RELGRAPH_CC");
  char csrc[4200], tmp[4200];
  if (snprintf(csrc, sizeof csrc, "%s.%ld.c", path, (long)getpid()) >= (int)sizeof csrc ||
      snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
    return false;
  FILE *f = fopen(csrc, "w");
  if (!f) return false;
  bool ok = fputs(src, f) >= 0;
  ok = !fclose(f) && ok;
  ok = ok && run_compiler(cc && *cc ? cc : "cc", tmp, csrc) && seal(tmp) && rename(tmp, path) == 0;
  unlink(csrc);
  unlink(tmp);
  return ok;
}

/* Whether the n bytes are a whole 64-bit ELF object: every segment the
 * loader maps and the section table lie within them. */
static bool elf_whole(const unsigned char *b, size_t n) {
  Elf64_Ehdr eh;
  if (n < sizeof eh) return false;
  memcpy(&eh, b, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phoff > n ||
      (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > n - eh.e_phoff || eh.e_shoff > n ||
      (uint64_t)eh.e_shnum * eh.e_shentsize > n - eh.e_shoff)
    return false;
  for (int i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, b + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
    if (ph.p_offset > n || ph.p_filesz > n - ph.p_offset) return false;
  }
  return true;
}

/* Whether the cache entry at path is whole: its trailer's hash is that of
 * its object, and the object is a whole ELF object. */
static bool entry_whole(const char *path) {
  size_t n;
  unsigned char *b = read_file(path, &n);
  uint64_t h;
  bool ok = b && n > TRAILER && !memcmp(b + n - 8, ENTRY_MAGIC, 8);
  if (ok) memcpy(&h, b + n - TRAILER, sizeof h);
  ok = ok && h == rg_fnv1a_bytes(b, n - TRAILER, RG_FNV_SEED) && elf_whole(b, n - TRAILER);
  rg_free(b);
  return ok;
}

/* The kernels of the object at path, compiling src into it first when
 * there is no whole entry there.  The object names its key (the string
 * rg_kernel_key), so an entry made for another source, compiler or
 * processor is never run; such an entry, and one that cannot be loaded,
 * is compiled again once (a cache is never trusted to be intact). */
static rgbc_kernels load_kernels(const char *src, const char *key, const char *path) {
  rgbc_kernels fn = {NULL, NULL};
  bool cached = access(path, R_OK) == 0 && entry_whole(path);
  for (int attempt = 0; attempt < 2 && !fn.plain; attempt++, cached = false) {
    if (!cached && !compile(src, path)) break;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const char *k = h ? (const char *)dlsym(h, "rg_kernel_key") : NULL;
    if (h && (!k || strcmp(k, key))) dlclose(h), h = NULL; /* someone else's object */
    if (h) fn.plain = (rgbc_kernel_fn)dlsym(h, "rg_kernel"), fn.stream = (rgbc_kernel_fn)dlsym(h, "rg_kernel_nt");
    if (!cached) break;
  }
  if (!fn.plain) fn.stream = NULL;
  return fn;
}

/* What the processor offers, as far as -march=native reads it (x86's
 * feature words), so an entry compiled on another machine sharing the
 * cache directory has another key. */
static uint64_t cpu_features(uint64_t h) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  char words[64];
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    snprintf(words, sizeof words, "%x.%x", c, d);
    h = rg_fnv1a(words, h);
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    snprintf(words, sizeof words, "%x.%x.%x", b, c, d);
    h = rg_fnv1a(words, h);
  }
#endif
  return h;
}

rgbc_kernels rgbc_codegen(const rgb_program *p, rg_dtype dt, const rgb_codegen *cg) {
  rgbc_kernels fn = {NULL, NULL};
  if ((cg && cg->off) || rgb_codegen_env_off() || (dt != RG_FLOAT32 && dt != RG_FLOAT64)) return fn;
  char *src = kernel_source(p, dt);
  if (!src) return fn;
  char dir[4096], path[4200], key[17];
  if (rg_cache_dir(cg ? cg->cache_dir : NULL, dir, sizeof dir)) {
    /* the key: the source, the flags, the compiler, the processor */
    const char *cc = getenv("RELGRAPH_CC");
    uint64_t h = rg_fnv1a(CFLAGS, rg_fnv1a(cc && *cc ? cc : "cc", rg_fnv1a(src, RG_FNV_SEED)));
    snprintf(key, sizeof key, "%016llx", (unsigned long long)cpu_features(h));
    snprintf(path, sizeof path, "%s/rgk-%s.so", dir, key);
    rg_strbuf full = {0};
    rg_strbuf_put(&full, "%s\nconst char rg_kernel_key[] = \"%s\";\n", src, key);
    if (!full.failed) fn = load_kernels(full.s, key, path);
    rg_free(full.s);
  }
  rg_free(src);
  return fn;
}

char *rgbc_codegen_source(const rgb_program *p, rg_dtype dt) { return kernel_source(p, dt); }
