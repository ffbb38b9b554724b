/*
 * bench_scan.c — Scan: time per step of small loops, compile time of
 * functions holding a scan, and the LSTM forward pass (docs/benchmarks.md).
 *
 *   cumsum     cumulative sum of 10^6 float32 scalars (a sequence and a
 *              sit-sot), per step, next to a plain C loop in the same run
 *   affine     x_t = 0.5 x_{t-1} + s_t, d = 10, 10^4 steps, full trace
 *   compile    rg_compile (rewrites and linking, inner graph included) of
 *              examples/graphs/rnn.graph and lstm.graph, from the parsed graph
 *   lstm       the LSTM forward pass written as a scan (the example's form,
 *              PyTorch's gate layout), T = 100, B = 32, I = H = 256, float32;
 *              fwd+bwd (loss = sum of the outputs, gradients of the weights
 *              and biases through the backward scan), and the time to build
 *              that function from its text (grad, fast_run, link)
 *
 *   save_mem   h_t = 0.5 h_{t-1} + 0.5 over 1000 float32 (no denormals),
 *              only trace[-1] read:
 *              10^6 steps with fast_run (scan_save_mem keeps 2 rows) and the
 *              process's peak memory after it, against 10^5 steps with the
 *              whole trace kept (fast_run -scan_save_mem), per step
 *
 * Usage: bench_scan [reps] [name]   (median of reps runs, default 7; one
 * thread; with a name, only that benchmark: save_mem, cumsum, affine,
 * compile_rnn, compile_lstm, wide, lstm)
 */
#include "bench/benchutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "relgraph/backend.h"
#include "relgraph/scan.h"

static rg_ctx *C;

static void die(const char *what) {
  fprintf(stderr, "bench_scan: %s: %s\n", what, rg_errmsg(C));
  exit(1);
}

static rg_function *compile_text(const char *text, int *nin) {
  rg_fgraph *g = rg_graph_read(C, "bench", text, strlen(text));
  if (!g) die("read");
  int n = rg_fgraph_ninputs(g), m = rg_fgraph_noutputs(g);
  rg_variable *in[16], *out[16];
  for (int i = 0; i < n; i++) in[i] = rg_fgraph_input(g, i);
  for (int j = 0; j < m; j++) out[j] = rg_fgraph_output(g, j);
  rg_function *f = rg_compile(C, n, in, m, out, NULL);
  if (!f) die("compile");
  *nin = n;
  return f;
}

static rg_tensor *rand_tensor(rg_dtype dt, int nd, const int64_t *shape, double scale) {
  rg_tensor *t = rg_tensor_new(dt, nd, shape);
  uint64_t s = 12345;
  for (int64_t i = 0; i < rg_tensor_numel(t); i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    rg_tensor_set_f64(t, i, scale * ((double)(s >> 11) / 0x1p53 - 0.5));
  }
  return t;
}

typedef struct call {
  rg_function *f;
  rg_tensor **in;
  int nout;
} call;

static void run_call(void *ud) {
  call *c = ud;
  rg_tensor *out[4];
  if (rg_function_call(c->f, c->in, out)) {
    fprintf(stderr, "bench_scan: call: %s\n", rg_function_errmsg(c->f));
    exit(1);
  }
  for (int j = 0; j < c->nout; j++) rg_tensor_free(out[j]);
}

/* ------------------------------------------------------------------ small loops */

static float *c_cumsum_out;
static void c_cumsum(void *ud) {
  const rg_tensor *x = ud;
  int64_t n = x->shape[0];
  float acc = 0;
  const float *v = (const float *)x->data;
  for (int64_t i = 0; i < n; i++) c_cumsum_out[i] = acc = acc + v[i];
  __asm__ volatile("" : : "r"(c_cumsum_out) : "memory");
}

static void bench_cumsum(int reps) {
  const char *src = "(graph (input x float32 (?))\n"
                    "  (output (scan (lambda (x_t acc) (add acc x_t)) (sequences x)\n"
                    "                (outputs-info (constant float32 () (0.0))))))";
  int nin;
  rg_function *f = compile_text(src, &nin);
  int64_t n = 1000000;
  rg_tensor *x = rand_tensor(RG_FLOAT32, 1, &n, 1);
  call c = {f, &x, 1};
  c_cumsum_out = malloc((size_t)n * sizeof *c_cumsum_out);
  double t = bu_time(run_call, &c, reps), tc = bu_time(c_cumsum, x, reps);
  free(c_cumsum_out);
  printf("{\"bench\": \"scan_cumsum\", \"steps\": %lld, \"ns_per_step\": %.2f, \"c_loop_ns_per_step\": %.3f}\n",
         (long long)n, t / (double)n * 1e9, tc / (double)n * 1e9);
  rg_tensor_free(x);
  rg_function_free(f);
}

static void bench_affine(int reps) {
  const char *src = "(graph (input s float64 (? 10)) (input x0 float64 (10))\n"
                    "  (output (scan (lambda (s_t x) (add (mul 0.5 x) s_t)) (sequences s)\n"
                    "                (outputs-info x0))))";
  int nin;
  rg_function *f = compile_text(src, &nin);
  int64_t shape[2] = {10000, 10}, d = 10;
  rg_tensor *in[2] = {rand_tensor(RG_FLOAT64, 2, shape, 1), rand_tensor(RG_FLOAT64, 1, &d, 1)};
  call c = {f, in, 1};
  double t = bu_time(run_call, &c, reps);
  printf("{\"bench\": \"scan_affine_d10\", \"steps\": 10000, \"ns_per_step\": %.2f}\n", t / 1e4 * 1e9);
  rg_tensor_free(in[0]);
  rg_tensor_free(in[1]);
  rg_function_free(f);
}

/* ------------------------------------------------------------------ compile time */

typedef struct ctime_ud {
  rg_fgraph *g;
} ctime_ud;

static void compile_once(void *ud) {
  rg_fgraph *g = ((ctime_ud *)ud)->g;
  int n = rg_fgraph_ninputs(g), m = rg_fgraph_noutputs(g);
  rg_variable *in[16], *out[16];
  for (int i = 0; i < n; i++) in[i] = rg_fgraph_input(g, i);
  for (int j = 0; j < m; j++) out[j] = rg_fgraph_output(g, j);
  rg_function *f = rg_compile(C, n, in, m, out, NULL);
  if (!f) die("compile");
  rg_function_free(f);
}

static void bench_compile(const char *name, int reps) {
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/graphs/%s.graph", RG_SOURCE_DIR, name);
  ctime_ud u = {rg_graph_load(C, path)};
  if (!u.g) die(path);
  double t = bu_time(compile_once, &u, reps);
  printf("{\"bench\": \"scan_compile_%s\", \"ms\": %.3f}\n", name, t * 1e3);
}

/* A Scan with 50 outputs whose step has 50 * depth nodes: state k goes
 * through `depth` ops, each mixing in another state (Theano issue 3056:
 * push-outs that took hours on Scans with tens of outputs).  Compiling
 * it (fast_run on the outer graph and on the step, linking) is timed for
 * 500 and 5000 step nodes: the time should grow linearly. */
enum { WIDE = 50 };

static char *wide_scan_text(int depth) {
  size_t cap = (size_t)WIDE * (size_t)depth * 48 + 8192;
  char *src = malloc(cap), *q = src;
  q += sprintf(q, "(graph (input w float32 (8))");
  for (int k = 0; k < WIDE; k++) q += sprintf(q, " (input i%d float32 (8))", k);
  q += sprintf(q, "\n (define (");
  for (int k = 0; k < WIDE; k++) q += sprintf(q, "%so%d", k ? " " : "", k);
  q += sprintf(q, ") (scan (lambda (");
  for (int k = 0; k < WIDE; k++) q += sprintf(q, "s%d ", k);
  q += sprintf(q, "ww)\n");
  static const char *const ops[] = {"add", "mul", "sub", "maximum"};
  for (int k = 0; k < WIDE; k++) {
    q += sprintf(q, "  (define v%d_0 (tanh s%d))", k, k);
    for (int j = 1; j < depth; j++) {
      q += sprintf(q, " (define v%d_%d (%s v%d_%d ", k, j, ops[j % 4], k, j - 1);
      q += j % 5 ? sprintf(q, "s%d))", (k + j) % WIDE) : sprintf(q, "ww))");
    }
    q += sprintf(q, "\n");
  }
  q += sprintf(q, "  (values");
  for (int k = 0; k < WIDE; k++) q += sprintf(q, " v%d_%d", k, depth - 1);
  q += sprintf(q, "))\n (outputs-info");
  for (int k = 0; k < WIDE; k++) q += sprintf(q, " i%d", k);
  q += sprintf(q, ") (non-sequences w) (n-steps 10)))\n");
  for (int k = 0; k < WIDE; k++) q += sprintf(q, " (output o%d)", k);
  q += sprintf(q, ")");
  return src;
}

static void compile_graph(void *ud) {
  rg_fgraph *g = ud;
  int n = rg_fgraph_ninputs(g), m = rg_fgraph_noutputs(g);
  rg_variable *in[WIDE + 2], *out[WIDE + 2];
  for (int i = 0; i < n; i++) in[i] = rg_fgraph_input(g, i);
  for (int j = 0; j < m; j++) out[j] = rg_fgraph_output(g, j);
  rg_function *f = rg_compile(C, n, in, m, out, NULL);
  if (!f) die("compile");
  rg_function_free(f);
}

static void bench_wide_scan(int reps) {
  double per[2];
  for (int i = 0; i < 2; i++) {
    int depth = i ? 100 : 10;
    char *src = wide_scan_text(depth);
    rg_fgraph *g = rg_graph_read(C, "wide", src, strlen(src));
    free(src);
    if (!g) die("wide scan");
    double t = bu_time(compile_graph, g, reps);
    per[i] = t / (WIDE * depth);
    printf("{\"bench\": \"scan_wide_compile\", \"outputs\": %d, \"step_nodes\": %d, \"ms\": %.2f, "
           "\"us_per_step_node\": %.2f}\n", WIDE, WIDE * depth, t * 1e3, per[i] * 1e6);
  }
  printf("{\"bench\": \"scan_wide_compile_growth\", \"per_node_ratio_10x\": %.2f}\n", per[1] / per[0]);
}

/* ------------------------------------------------------------------ LSTM */

enum { T = 100, B = 32, I = 256, H = 256 };

/* The LSTM as a graph file, then `tail` (its outputs). */
static char *lstm_text(const char *tail) {
  static char src[4096];
  snprintf(src, sizeof src,
           "(graph (input x float32 (%d %d %d)) (input h0 float32 (%d %d)) (input c0 float32 (%d %d))\n"
           "  (input W_ih float32 (%d %d)) (input W_hh float32 (%d %d)) (input b_ih float32 (%d))\n"
           "  (input b_hh float32 (%d))\n"
           "  (define (hs cs)\n"
           "    (scan (lambda (x_t h c)\n"
           "            (define gates (add (add (dot x_t ((dimshuffle 1 0) W_ih)) b_ih)\n"
           "                               (add (dot h ((dimshuffle 1 0) W_hh)) b_hh)))\n"
           "            (define (gi gf gg go) ((split 1 4) gates (constant int64 (4) (%d %d %d %d))))\n"
           "            (define c2 (add (mul (sigmoid gf) c) (mul (sigmoid gi) (tanh gg))))\n"
           "            (define h2 (mul (sigmoid go) (tanh c2)))\n"
           "            (values h2 c2))\n"
           "          (sequences x) (outputs-info h0 c0)))\n"
           "  %s)",
           T, B, I, B, H, B, H, 4 * H, I, 4 * H, H, 4 * H, 4 * H, H, H, H, H, tail);
  return src;
}

static void lstm_inputs(rg_tensor **in) {
  int64_t sx[3] = {T, B, I}, sh[2] = {B, H}, sw[2] = {4 * H, I}, su[2] = {4 * H, H}, sb = 4 * H;
  rg_tensor *v[7] = {rand_tensor(RG_FLOAT32, 3, sx, 2), rand_tensor(RG_FLOAT32, 2, sh, 0),
                     rand_tensor(RG_FLOAT32, 2, sh, 0), rand_tensor(RG_FLOAT32, 2, sw, 0.125),
                     rand_tensor(RG_FLOAT32, 2, su, 0.125), rand_tensor(RG_FLOAT32, 1, &sb, 0.125),
                     rand_tensor(RG_FLOAT32, 1, &sb, 0.125)};
  memcpy(in, v, sizeof v);
}

static void bench_lstm_run(const char *name, const char *tail, int nout, int reps) {
  int nin;
  rg_function *f = compile_text(lstm_text(tail), &nin);
  rg_tensor *in[7];
  lstm_inputs(in);
  call c = {f, in, nout};
  double t = bu_time(run_call, &c, reps);
  printf("{\"bench\": \"%s\", \"T\": %d, \"B\": %d, \"I\": %d, \"H\": %d, \"ms\": %.2f}\n", name,
         T, B, I, H, t * 1e3);
  for (int i = 0; i < 7; i++) rg_tensor_free(in[i]);
  rg_function_free(f);
}

/* fwd+bwd: the loss is the sum of the outputs, the gradients those of the
 * weights and biases (what the hand-written C peer computes). */
#define LSTM_GRAD_TAIL                                                              \
  "(define (gWi gWh gbi gbh) (grad (sum hs) W_ih W_hh b_ih b_hh))\n"                  \
  "  (output gWi) (output gWh) (output gbi) (output gbh)"

/* Building the fwd+bwd function from its text: reading (the grad form
 * expands there), fast_run and linking. */
static void build_lstm_grad(void *ud) {
  (void)ud;
  int nin;
  rg_function_free(compile_text(lstm_text(LSTM_GRAD_TAIL), &nin));
}

static void bench_lstm(int reps) {
  bench_lstm_run("scan_lstm_forward", "(output hs)", 1, reps);
  bench_lstm_run("scan_lstm_fwd_bwd", LSTM_GRAD_TAIL, 4, reps);
  double t = bu_time(build_lstm_grad, NULL, reps * 3);
  printf("{\"bench\": \"scan_lstm_fwd_bwd_build\", \"ms\": %.3f}\n", t * 1e3);
}

/* ------------------------------------------------------------------ save_mem */

static double save_mem_run(int64_t steps, const char *query, int reps) {
  char src[512];
  snprintf(src, sizeof src, "(graph (input h0 float32 (1000)) (output ((subtensor -1) "
           "(scan (lambda (h) (add (mul h 0.5) 0.5)) (outputs-info h0) (n-steps %lld)))))", (long long)steps);
  rg_fgraph *g = rg_graph_read(C, "bench", src, strlen(src));
  if (!g) die("read");
  rg_variable *in = rg_fgraph_input(g, 0), *out = rg_fgraph_output(g, 0);
  rg_compile_opts o = {.mode = {.query = query}};
  rg_function *f = rg_compile(C, 1, &in, 1, &out, &o);
  if (!f) die("compile");
  int64_t n = 1000;
  rg_tensor *h0 = rand_tensor(RG_FLOAT32, 1, &n, 1);
  call c = {f, &h0, 1};
  double t = bu_time(run_call, &c, reps);
  rg_tensor_free(h0);
  rg_function_free(f);
  return t / (double)steps;
}

static void bench_save_mem(int reps) {
  double kept = save_mem_run(1000000, "fast_run", reps);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double whole = save_mem_run(100000, "fast_run -scan_save_mem", reps);
  printf("{\"bench\": \"scan_save_mem\", \"steps\": 1000000, \"ns_per_step\": %.1f, \"peak_rss_mb\": %.1f, "
         "\"whole_trace_steps\": 100000, \"whole_trace_ns_per_step\": %.1f}\n",
         kept * 1e9, (double)ru.ru_maxrss / 1024, whole * 1e9);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  rg_init();
  C = rg_ctx_new();
  const char *only = argc > 2 ? argv[2] : NULL;
#define WANT(name) (!only || !strcmp(name, only))
  if (WANT("save_mem")) bench_save_mem(reps > 3 ? 3 : reps); /* first: the process's peak memory is its own */
  if (WANT("cumsum")) bench_cumsum(reps);
  if (WANT("affine")) bench_affine(reps);
  if (WANT("compile_rnn")) bench_compile("rnn", reps * 3);
  if (WANT("compile_lstm")) bench_compile("lstm", reps * 3);
  if (WANT("wide")) bench_wide_scan(reps > 5 ? 5 : reps);
  if (WANT("lstm")) bench_lstm(reps);
#undef WANT
  return 0;
}
