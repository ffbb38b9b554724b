/*
 * fuzz_common.h — what the fuzz harnesses share: one memory scope per
 * input, warm global caches, and interpreters that skip the prelude.
 *
 * Memory.  In the sanitizer build collected objects are malloc'd and kept
 * (RG_GC_NEVER_FREE); a fuzzer running millions of inputs would grow
 * without bound, so every input runs in a memory scope (kanren/mem.c) that
 * frees what the input made.  Everything an input touches must therefore
 * be made inside its scope (a fresh context per input), and the library's
 * lazily filled global caches are filled once before the first scope
 * (fuzz_warm), so no old object points into freed memory.  With the
 * collector the scopes do nothing.
 *
 * Interpreters.  Loading the relations prelude costs milliseconds under
 * AddressSanitizer, more than a whole input should.  One interpreter is
 * made before the first scope; each input gets a copy that shares its
 * library table (which user code only reads: definitions go to the user
 * table, see rgk_global_for) with a fresh context, user table and source
 * map.
 */
#ifndef RELGRAPH_FUZZ_COMMON_H
#define RELGRAPH_FUZZ_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "kanren/kanren-impl.h"
#include "relgraph/graph.h"

/* Fills the caches that live across inputs: interned op and type objects,
 * their terms and the symbols of the op and dtype names. */
static inline void fuzz_warm_caches(void) {
  for (int code = 0; code < RG_OP_COUNT; code++) {
    const rg_op *op = rg_op_get((rg_opcode)code);
    if (op) rg_op_from_term(NULL, rg_op_term(op));
  }
  for (int dt = 0; dt < RG_NDTYPES; dt++) rg_type_scalar((rg_dtype)dt), rg_dtype_symbol((rg_dtype)dt);
}

static rg_interp *fuzz_base_interp;

/* Call first in every input: starts the library once, then the scope. */
static inline void fuzz_begin(void) {
  static bool ready;
  if (!ready) {
    rg_init();
    fuzz_warm_caches();
    fuzz_base_interp = rg_interp_new(rg_ctx_new());
    ready = true;
  }
  rgk_scope_begin();
}

/* Call last in every input: frees what the input made. */
static inline void fuzz_end(void) { rgk_scope_end(); }

/* A fresh context with the facts the prelude declared. */
static inline rg_ctx *fuzz_ctx(void) {
  rg_ctx *C = rg_ctx_new();
  C->facts = fuzz_base_interp->C->facts;
  return C;
}

/* An interpreter with the prelude loaded, in a fresh context (made inside
 * the current scope). */
static inline rg_interp *fuzz_interp(void) {
  rg_interp *I = rgk_alloc(sizeof *I);
  *I = *fuzz_base_interp;
  I->C = fuzz_ctx();
  memset(&I->user, 0, sizeof I->user);
  I->map = rgk_srcmap_new(false);
  I->wmap = rgk_srcmap_new(true);
  I->out = NULL;
  I->passed = I->failed = 0;
  I->dir = NULL;
  I->load_depth = 0;
  I->stop = 0;
  return I;
}

/* Whether a program is skipped: `load` reads any path (standard input
 * included), `bench` repeats its expression as often as asked and `iota`
 * builds a list as long as asked; their cost is by design, not a bug. */
static inline bool fuzz_skipped_program(const char *text) {
  return strstr(text, "load") || strstr(text, "bench") || strstr(text, "iota");
}

/* The input as a NUL-terminated string (malloc'd). */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = 0;
  return text;
}

#endif
