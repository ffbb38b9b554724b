/*
 * test_init_race.c — the library's lazy initialisations, started by
 * several threads at the same moment.
 *
 * Nothing initialises the library before the threads start: each waits at
 * a barrier, then all call into it at once, so the collector's set-up
 * (rg_init), the table of parameterless ops and the op layer's interned
 * symbols are first asked for concurrently.  Every thread must see the
 * same op objects (ops without parameters are unique values), read the
 * same op back from its name, and get a working context.  This is a test
 * binary of its own because the first call into the library is what it
 * tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "relgraph/graph.h"

#define NTHREADS 8
#define NOPS 4

static pthread_barrier_t start;

static const rg_opcode probe[NOPS] = {RG_OP_ADD, RG_OP_MUL, RG_OP_EXP, RG_OP_DOT};

typedef struct seen {
  const rg_op *ops[NOPS];
  const rg_op *parsed;  /* the op read back from the symbol add */
  bool attached, ok;
} seen;

static void *starter(void *arg) {
  seen *s = arg;
  pthread_barrier_wait(&start);
  rg_init();
  s->attached = rg_thread_attach() == RG_OK;
  for (int i = 0; i < NOPS; i++) s->ops[i] = rg_op_get(probe[i]);
  rg_ctx *C = rg_ctx_new();
  s->parsed = rg_op_from_term(C, rg_symbol("add"));
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 0, NULL));
  s->ok = rg_add(x, x) != NULL;
  if (s->attached) rg_thread_detach();
  return NULL;
}

static void test_first_calls_at_once(void **state) {
  pthread_t th[NTHREADS];
  seen s[NTHREADS];
  memset(s, 0, sizeof s);
  assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
  for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, starter, &s[i]), 0);
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&start);
  for (int t = 0; t < NTHREADS; t++) {
    assert_true(s[t].attached);
    assert_true(s[t].ok);
    for (int i = 0; i < NOPS; i++) {
      assert_non_null(s[t].ops[i]);
      assert_ptr_equal(s[t].ops[i], s[0].ops[i]);
    }
    assert_ptr_equal(s[t].parsed, s[0].ops[0]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_calls_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
