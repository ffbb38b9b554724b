/*
 * scalar-expr.c — the elementwise ops' scalar semantics as C text, for
 * the code generators (codegen.c's C kernels, the CUDA generator).
 *
 * The text is the stringified expressions of scalar-float.h and
 * scalar-int.h, the very tables elemwise.c instantiates its loops from,
 * so a generated kernel computes what the interpreter computes.  An
 * expression reads x (, y, z) of the dtype it computes in; helpers are
 * returned separately, as the text of their definitions.
 */
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/scalar-float.h"
#include "backend/cpu/scalar-int.h"
#include "base/base.h"


#define STR_(...) #__VA_ARGS__
#define XSTR(...) STR_(__VA_ARGS__)
#define CASE(C, name, S, T, EXPR) \
  case RG_OP_##C: return XSTR(EXPR);

#define FLOAT_EXPRS(S, T, D, UT)                                                         \
  static const char *expr_##S(rg_opcode c, int arity) {                                  \
    if (arity == 1) switch (c) { RGBC_FLOAT_UNARY(CASE, S, T) default: return NULL; }    \
    if (arity == 2) switch (c) { RGBC_FLOAT_BINARY(CASE, S, T) default: return NULL; }   \
    if (arity == 3) switch (c) { RGBC_FLOAT_TERNARY(CASE, S, T) default: return NULL; }  \
    return NULL;                                                                         \
  }                                                                                      \
  static const char *trans_##S(rg_opcode c) {                                            \
    switch (c) { RGBC_FLOAT_TRANSCENDENTAL(CASE, S, T) default: return NULL; }           \
  }
RGBC_FLOATS(FLOAT_EXPRS)

#define INT_EXPRS(S, T, D, UT)                                                           \
  static const char *expr_##S(rg_opcode c, int arity) {                                  \
    if (arity == 1) switch (c) { RGBC_INT_UNARY(CASE, S, T, UT) default: break; }        \
    if (arity == 2) switch (c) { RGBC_INT_BINARY(CASE, S, T, UT) default: break; }       \
    if (arity == 3) switch (c) { RGBC_INT_TERNARY(CASE, S, T, UT) default: break; }      \
    if (arity == 1 && D == RG_UINT8) switch (c) { RGBC_UNSIGNED_UNARY(CASE, S, T, UT) default: break; } \
    if (arity == 1 && D != RG_UINT8) switch (c) { RGBC_SIGNED_UNARY(CASE, S, T, UT) default: break; }   \
    return NULL;                                                                         \
  }
RGBC_INTS(INT_EXPRS)

static const char *expr_b(rg_opcode c, int arity) {
  if (arity == 1) switch (c) { RGBC_BOOL_UNARY(CASE, b, uint8_t) default: return NULL; }
  if (arity == 2) switch (c) { RGBC_BOOL_BINARY(CASE, b, uint8_t) default: return NULL; }
  if (arity == 3) switch (c) { RGBC_BOOL_TERNARY(CASE, b, uint8_t) default: return NULL; }
  return NULL;
}

/* Comparisons and switch: the same text for every dtype. */
static const char *any_dtype(rg_opcode c, int arity) {
  if (arity == 2) switch (c) { RGBC_COMPARE(CASE, any, T) default: return NULL; }
  if (arity == 3) switch (c) { RGBC_SELECT(CASE, any, T) default: return NULL; }
  return NULL;
}

const char *rgbc_expr(rg_opcode c, rg_dtype dt, int arity) {
  const char *e = any_dtype(c, arity);
  if (e) return e;
  switch (dt) {
#define DISPATCH(S, T, D) \
  case D: return expr_##S(c, arity);
    RGBC_TYPES(DISPATCH)
#undef DISPATCH
  default: return NULL;
  }
}

const char *rgbc_transcendental_expr(rg_opcode c, rg_dtype dt) {
  return dt == RG_FLOAT32 ? trans_f32(c) : dt == RG_FLOAT64 ? trans_f64(c) : NULL;
}

static const char helpers_f32[] = XSTR(RGBC_FLOAT_HELPERS(f32, float));
static const char helpers_f64[] = XSTR(RGBC_FLOAT_HELPERS(f64, double));
static const char helpers_int[] = XSTR(RGBC_INT_HELPERS);

const char *rgbc_helpers_text(rg_dtype dt) {
  return dt == RG_FLOAT32 ? helpers_f32 : dt == RG_FLOAT64 ? helpers_f64 : helpers_int;
}

/* (math.h is not included here: its macros, signbit among them, would
 * expand inside the stringified expressions above) */
void rgbc_put_double(rg_strbuf *b, double v) {
  if (__builtin_isnan(v)) rg_strbuf_put(b, "(0.0 / 0.0)");
  else if (__builtin_isinf(v)) rg_strbuf_put(b, "(%s1.0 / 0.0)", v < 0 ? "-" : "");
  else rg_strbuf_put(b, "%a", v);
}
