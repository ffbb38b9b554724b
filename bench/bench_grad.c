/*
 * bench_grad.c — building gradients: rg_grad on chains of growing length,
 * time per forward node and the gradient graph's size per forward node
 * (both should stay flat: the gradient is linear in the forward graph), and
 * compiling an MLP's forward and backward function end to end.
 *
 *   bench_grad [--reps N] [--nodes 1001|10001|100001]
 *
 * Each chain is h_{k+1} = tanh(h_k * w + b) over vectors, so every node
 * has a broadcast input and a forward value its gradient reuses.  Figures
 * are medians of N runs (default 7), once the collector's heap has stopped
 * growing: the first calls on a large chain grow it, and each new page
 * costs its first touch (a cost of the machine, about 0.25 us per 4 KB
 * page on bare metal, 13 us on some virtual machines).  The first call of
 * each size is shown apart, with what the heap grew by.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/benchutil.h"
#include "relgraph/backend.h"

typedef struct chain { rg_ctx *C; int n; rg_variable *x, *w, *b, *cost, *g[3]; } chain;

static void build_chain(chain *c) {
  int64_t n = 16;
  c->x = rg_input(c->C, "x", rg_type_new(RG_FLOAT64, 1, &n));
  c->w = rg_input(c->C, "w", rg_type_new(RG_FLOAT64, 1, &n));
  c->b = rg_input(c->C, "b", rg_type_new(RG_FLOAT64, 0, NULL));
  rg_variable *h = c->x;
  for (int k = 0; k < c->n; k++) h = rg_tanh(rg_add(rg_mul(h, c->w), c->b));
  c->cost = rg_sum(h, -1, NULL);
}

static void grad_once(void *ud) {
  chain *c = ud;
  if (rg_grad(c->C, c->cost, 3, (rg_variable *[]){c->x, c->w, c->b}, NULL, c->g) != RG_OK) {
    fprintf(stderr, "bench_grad: %s\n", rg_errmsg(c->C));
    exit(1);
  }
}

/* Nodes computing the cost and the gradients. */
static size_t graph_size(chain *c) {
  size_t n;
  rg_variable *outs[4] = {c->cost, c->g[0], c->g[1], c->g[2]};
  rg_toposort(3, (rg_variable *[]){c->x, c->w, c->b}, 4, outs, &n);
  return n;
}

/* Calls the gradient, untimed, until a call leaves the heap as it found it
 * (at most 10 calls). */
static void settle_heap(chain *c) {
  for (int i = 0; i < 10; i++) {
    size_t h = bu_heap_size();
    grad_once(c);
    if (bu_heap_size() == h) return;
  }
}

static void chains(int reps, int only) {
  printf("| forward nodes | rg_grad, ns per forward node | first call, ns per forward node (heap grown by) | "
         "nodes of forward + gradient per forward node |\n");
  printf("|---|---|---|---|\n");
  double per[3] = {0};
  int k = 0;
  for (int n = 250; n <= 25000; n *= 10, k++) { /* 10^3, 10^4, 10^5 forward nodes */
    if (only && 4 * n + 1 != only) continue;
    chain c = {.C = rg_ctx_new(), .n = n};
    build_chain(&c);
    size_t fwd = 4 * (size_t)n + 1, h0 = bu_heap_size();
    double t0 = bu_now();
    grad_once(&c);
    double first = bu_now() - t0;
    size_t grown = bu_heap_size() - h0;
    settle_heap(&c);
    per[k] = bu_time(grad_once, &c, reps) * 1e9 / (double)fwd;
    printf("| %zu | %.0f | %.0f (%.0f MB) | %.2f |\n", fwd, per[k], first * 1e9 / (double)fwd, (double)grown / 1e6,
           (double)graph_size(&c) / (double)fwd);
    rg_gc_collect();
  }
  if (!only) printf("\nrg_grad growth: ns per node at 10^5 / at 10^3 = %.2f (target <= 2)\n", per[2] / per[0]);
}

/* An MLP's loss and its gradients: read, differentiate, rewrite, link. */
static const char *mlp =
    "(graph (input X float32 (32 256)) (input W1 float32 (256 256)) (input b1 float32 (256)) "
    "(input W2 float32 (256 10)) (input b2 float32 (10)) "
    "(define h (tanh (add (dot X W1) b1))) "
    "(define loss (neg (mean ((log_softmax 1) (add (dot h W2) b2))))) "
    "(define (g1 g2 g3 g4) (grad loss W1 b1 W2 b2)) (output loss) (output g1) (output g2) (output g3) (output g4))";

static void compile_mlp(void *ud) {
  rg_ctx *C = ud;
  rg_fgraph *fg = rg_graph_read(C, "mlp", mlp, strlen(mlp));
  if (!fg) {
    fprintf(stderr, "bench_grad: %s\n", rg_errmsg(C));
    exit(1);
  }
  rg_variable *ins[5], *outs[5];
  for (int i = 0; i < 5; i++) ins[i] = rg_fgraph_input(fg, i), outs[i] = rg_fgraph_output(fg, i);
  rg_fgraph_release(fg);
  rg_function *f = rg_compile(C, 5, ins, 5, outs, NULL);
  if (!f) {
    fprintf(stderr, "bench_grad: %s\n", rg_errmsg(C));
    exit(1);
  }
  rg_function_free(f);
}

int main(int argc, char **argv) {
  int reps = 7, only = 0;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nodes")) only = atoi(argv[++i]);
  rg_init();
  rg_gc_warm();
  chains(reps, only);
  if (only) return 0;
  rg_ctx *C = rg_ctx_new();
  double t = bu_time(compile_mlp, C, reps);
  printf("\nMLP (32x256 -> 256 -> 10, float32): read, grad, fast_run and link: %.2f ms\n", t * 1e3);
  return 0;
}
