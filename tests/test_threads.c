/*
 * test_threads.c — the threading contract of the public headers, exercised.
 *
 * Threads started with plain pthread_create (unknown to the collector)
 * attach, then each works in a context of its own at the same time as the
 * others: a relational query, a graph built, rewritten by the standard
 * database, compiled and called many times, with collections forced in
 * the middle so the collector must stop and scan every attached thread.
 * Ops and types are shared values made concurrently.  Each thread checks
 * its own results; any race on shared state shows up as a wrong value or a
 * crash (and as a report under the thread sanitizer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"

#define NTHREADS 4

typedef struct job { int id; int rounds; bool attach; char err[256]; } job;

static int job_fail(job *j, const char *what, const char *msg) {
  snprintf(j->err, sizeof j->err, "thread %d: %s: %s", j->id, what, msg);
  return 1;
}

static int query_round(job *j, rg_ctx *C) {
  rg_interp *I = rg_interp_new(C);
  if (rg_interp_load_string(I, "<t>", "(defrel (twiceo x out) (== out `(,x ,x)))") != RG_OK)
    return job_fail(j, "load", rg_errmsg(C));
  rg_term q = rg_var(C), answers;
  rg_term args[2] = {q, rg_list(2, (rg_term[]){rg_int(j->id), rg_int(j->id)})};
  if (rg_run(C, -1, q, rg_call(rg_interp_lookup(I, "twiceo"), 2, args), NULL, &answers))
    return job_fail(j, "run", rg_errmsg(C));
  char want[32];
  snprintf(want, sizeof want, "(%d)", j->id);
  const char *got = rg_to_string(answers);
  return strcmp(got, want) ? job_fail(j, "answers", got) : 0;
}

/* (x * k + 0) * 1 for this thread's k: fast_run removes the neutral
 * elements, the compiled function computes x * k. */
static int graph_round(job *j, rg_ctx *C) {
  int64_t n = 5;
  rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  rg_variable *k = rg_scalar_float(C, (double)(j->id + 2));
  rg_variable *out = rg_mul(rg_add(rg_mul(x, k), rg_scalar_float(C, 0.0)), rg_scalar_float(C, 1.0));
  if (!out) return job_fail(j, "build", rg_errmsg(C));
  rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &out, RG_FG_CLONE);
  rg_rewrite_run *run = rg_rewrite(fg, rg_db_query(C, rg_std_db(C), "fast_run"), NULL);
  if (rg_rewrite_stop(run) != RG_STOP_EQUILIBRIUM) return job_fail(j, "rewrite", rg_rewrite_stop_message(run));
  if (rg_fgraph_nnodes(fg) != 1) return job_fail(j, "rewrite", "neutral elements left");
  rg_function *f = rg_compile(C, 1, &x, 1, &out, NULL);
  if (!f) return job_fail(j, "compile", rg_errmsg(C));
  double xv[5] = {1, 2, 3, 4, 5};
  rg_tensor *in = rg_tensor_from_data(RG_FLOAT64, 1, &n, xv);
  int rc = 0;
  for (int r = 0; r < 50 && !rc; r++) {
    rg_tensor *res;
    if (rg_function_call(f, &in, &res) != RG_OK) {
      rc = job_fail(j, "call", rg_function_errmsg(f));
      break;
    }
    for (int i = 0; i < 5; i++)
      if (rg_tensor_get_f64(res, i) != xv[i] * (j->id + 2)) rc = job_fail(j, "call", "wrong value");
    rg_tensor_free(res);
  }
  rg_tensor_free(in);
  rg_function_free(f);
  return rc;
}

static void *worker(void *arg) {
  job *j = arg;
  if (j->attach && rg_thread_attach() != RG_OK) {
    job_fail(j, "attach", "the collector refused the thread");
    return NULL;
  }
  for (int r = 0; r < j->rounds && !j->err[0]; r++) {
    rg_ctx *C = rg_ctx_new();
    if (query_round(j, C) || graph_round(j, C)) break;
    if (r % 4 == j->id % 4) rg_gc_collect();
  }
  if (j->attach) rg_thread_detach();
  return NULL;
}

static void test_threads_share_the_library(void **st) {
  pthread_t th[NTHREADS];
  job jobs[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    jobs[i] = (job){.id = i, .rounds = 12, .attach = true};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
  }
  /* the main thread works meanwhile too */
  job mine = {.id = NTHREADS, .rounds = 12};
  worker(&mine);
  assert_int_equal(rg_thread_attach(), RG_OK); /* known already: harmless */
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NTHREADS; i++)
    if (jobs[i].err[0]) fail_msg("%s", jobs[i].err);
  if (mine.err[0]) fail_msg("%s", mine.err);
}

int main(void) {
  rg_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_share_the_library),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
