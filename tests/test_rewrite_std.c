/*
 * test_rewrite_std.c — the standard rewrite database, rule by rule: each
 * case runs one rule (the query is the rule's name) on a small graph and
 * checks that it fired, what the graph became, that every output kept its
 * type, and that the compiled graph computes the same values before and
 * after.  Then the whole fast_run database on random expression graphs,
 * against the same graphs compiled without rewrites.
 */
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relgraph/backend.h"
#include "relgraph/rewrite.h"

static rg_ctx *C;
static rg_rewrite_db *std_db;

static int setup(void **st) {
  rg_init();
  C = rg_ctx_new();
  std_db = rg_std_db(C);
  return std_db ? 0 : -1;
}

static int fold(const rg_node *n, rg_tensor **outs, char *err, size_t len) {
  return rg_eval_node(n, outs, err, len);
}

/* Inputs every case may use. */
/* The inputs of every case, each on the device named by D ("" for the
 * host, " mirror" for the checking device of docs/backends.md). */
#define INPUTS_ON(D)                                                                        \
  "(input x float32 (3)" D ") (input y float32 (3)" D ") (input z float32 (3)" D ") "       \
  "(input i int8 (3)" D ") (input u uint8 (3)" D ") (input b bool (3)" D ") "               \
  "(input d float64 (3)" D ") (input m float64 (2 3)" D ") (input M float64 (3 3)" D ") "   \
  "(input N float64 (3 3)" D ") (input v float64 (3)" D ") (input w float64 (3)" D ") "     \
  "(input s float64 ()" D ") (input c float64 (3 1)" D ") (input r float64 (1 3)" D ") "    \
  "(input k float64 (?)" D ") (input s_i int64 ()" D ") "
#define INPUTS INPUTS_ON("")

typedef struct std_case {
  const char *rule;    /* the query: a rule's name */
  const char *output;  /* one output expression */
  const char *expect;  /* pprint after the rule ran ("=" : unchanged) */
} std_case;

static const std_case cases[] = {
    /* ---- canonicalize */
    {"constant_folding", "(add x (mul 2.0 3.0))", "(x + 6.0)"},
    {"subtensor-constant-index", "((subtensor (0 ?)) M (constant int64 () (2)))", "M[0:2]"},
    {"subtensor-constant-index", "((subtensor (0 ?)) m (constant int64 () (1)))", "m[0:1]"}, /* the same value: a static 1 is fine */
    {"shape-static", "((shape_i 1) m)", "3"},
    {"shape-static", "(shape m)", "[2 3]"},
    {"shape-static", "((shape_i 0) k)", "="},
    {"shape-static", "(shape k)", "="},
    {"refine-types", "((subtensor (none none -1)) ((subtensor (0 ?)) M (constant int64 () (2))))", "="},
    {"view-chain", "((reshape 2) ((dimshuffle 2 1 0) ((reshape 3) ((dimshuffle 1 0) m) (constant int64 (3) (3 2 1)))) (constant int64 (2) (2 3)))", "m"},
    {"view-chain", "((dimshuffle 1 0) ((reshape 2) ((dimshuffle 1 0) ((reshape 2) m (constant int64 (2) (3 2)))) (constant int64 (2) (3 2))))", "="},
    {"view-chain", "((dimshuffle 1 0) ((reshape 2) ((dimshuffle 1 0 2) ((reshape 3) ((dimshuffle 1 0) M) (constant int64 (3) (3 3 1)))) (constant int64 (2) (3 3))))", "M.T"},
    {"view-chain", "((reshape 1) ((dimshuffle 1 0) m) (constant int64 (1) (6)))", "="},
    {"view-chain", "((reshape 1) ((dimshuffle 1 0) ((reshape 2) m (constant int64 (2) (3 2)))) (constant int64 (1) (6)))", "="},
    {"view-chain", "((reshape 2) ((dimshuffle 0 x 1) m) (constant int64 (2) (3 2)))", "reshape{2}(m, [3 2])"},
    {"view-chain", "((reshape 1) ((dimshuffle 0 x) k) (constant int64 (1) (5)))", "="},
    {"subtensor-join", "((subtensor 2) ((join 0) m M))", "M[0]"},
    {"subtensor-join", "((subtensor (3 5) (0 1)) ((join 0) m M))", "M[1:3, 0:1]"},
    {"subtensor-join", "((subtensor (1 3)) ((join 0) m M))", "="},
    {"subtensor-join", "((subtensor -1) ((join 0) m M))", "M[2]"},
    {"subtensor-join", "((subtensor 0) ((join 1) m m))", "="},
    {"subtensor-fill", "((subtensor 1) (second M 0.0))", "second(M[1], 0.0)"},
    {"subtensor-fill", "((subtensor 0) (second r m))", "="},
    {"add-zero", "(add d (second v 0.0))", "d"},
    {"reduce-size-one", "((sum 0) ((dimshuffle x 0 1) m))", "dimshuffle{1,2}(dimshuffle{x,0,1}(m))"},
    {"reduce-size-one", "((sum 1) c)", "dimshuffle{0}(c)"},
    {"reduce-size-one", "((max 0 3) ((dimshuffle x 0 1 x) m))", "dimshuffle{1,2}(dimshuffle{x,0,1,x}(m))"},
    {"reduce-size-one", "((max 0 2) ((dimshuffle x 0 1 x) m))", "="},
    {"reduce-size-one", "((sum 1) m)", "="},
    {"reduce-size-one", "((sum 0) ((dimshuffle x 0) i))", "cast{int64}(dimshuffle{1}(dimshuffle{x,0}(i)))"},
    {"subtensor-constant-index", "((subtensor (0 ?)) m s_i)", "="},
    {"subtensor-useless", "((subtensor (0 2)) m)", "m"},
    {"subtensor-useless", "((subtensor (none none none) (0 5)) m)", "m"},
    {"subtensor-useless", "((subtensor (0 1)) m)", "="},
    {"subtensor-useless", "((subtensor (none none -1)) m)", "="},
    {"subtensor-useless", "((subtensor 0) m)", "="},
    {"subtensor-useless", "((subtensor (0 ?)) k ((shape_i 0) k))", "k"},
    {"subtensor-useless", "((subtensor (? ? ?)) k 0 ((shape_i 0) k) 1)", "k"},
    {"subtensor-useless", "((subtensor (0 ?)) k ((shape_i 0) v))", "="},
    {"subtensor-useless", "((subtensor (1 ?)) k ((shape_i 0) k))", "="},
    {"subtensor-useless", "((subtensor (0 ? -1)) k ((shape_i 0) k))", "="},
    {"add-zero", "(add x 0)", "x"},
    {"add-zero", "(add 0 x y)", "(x + y)"},
    {"add-zero", "(add i (constant int16 () (0)))", "cast{int16}(i)"},
    {"add-zero", "(add x (constant float32 (2 1) (0 0)))", "alloc(x, 2, 3)"},
    {"add-zero", "(add (constant float64 () (0)) (constant float64 () (0)))", "0.0"},
    {"mul-zero", "(mul x 0)", "alloc(0.0, 3)"},
    {"mul-zero", "(mul i y 0)", "alloc(0.0, 3)"},
    {"mul-zero", "(mul s 0)", "0.0"},
    {"mul-one", "(mul i 1)", "i"},
    {"mul-one", "(mul x 1 y)", "(x * y)"},
    {"mul-one", "(mul i i (constant int16 () (1)))", "(cast{int16}(i) * cast{int16}(i))"},
    {"nary-single", "(add x)", "x"},
    {"nary-single", "(mul (constant int8 () (3)))", "3"},
    {"sub-simplify", "(sub x 0)", "x"},
    {"sub-simplify", "(sub 0 x)", "-x"},
    {"sub-simplify", "(sub (constant int16 () (0)) i)", "-cast{int16}(i)"},
    {"sub-simplify", "(sub x x)", "alloc(0.0, 3)"},
    {"div-simplify", "(true_div x 1)", "x"},
    {"div-simplify", "(true_div i 1)", "cast{float64}(i)"},
    {"div-simplify", "(int_div i 1)", "i"},
    {"div-simplify", "(int_div x 1)", "="},
    {"div-simplify", "(true_div 0 x)", "alloc(0.0, 3)"},
    {"div-cancel", "(true_div (mul x y) y)", "x"},
    {"div-cancel", "(true_div (mul x y) (mul y z))", "(x / z)"},
    {"div-cancel", "(true_div (mul i i) i)", "="}, /* an int8 product wraps around */
    {"div-cancel", "(true_div i i)", "alloc(1.0, 3)"},
    {"div-cancel", "(true_div x x)", "alloc(1.0, 3)"},
    {"div-cancel", "(true_div y (mul y z))", "(1 / z)"},
    {"div-cancel", "(true_div (mul c r) r)", "alloc(c, 3, 3)"},
    {"pow-simplify", "(pow x 1)", "x"},
    {"pow-simplify", "(pow i 1.0)", "cast{float64}(i)"},
    {"pow-simplify", "(pow x 0)", "alloc(1.0, 3)"},
    {"add-flatten", "(add (add x y) z)", "(x + y + z)"},
    {"add-flatten", "(add (add i i) x)", "="},
    {"mul-flatten", "(mul x (mul y z) (mul x x))", "(x * y * z * x * x)"},
    {"constants-first", "(mul x 2)", "(2 * x)"},
    {"constants-first", "(add x 1 y 2)", "(3.0 + x + y)"}, /* weak integers in a float sum are floats */
    {"constants-first", "(add x 4611686018427387904 y 4611686018427387904)", "(9.223372036854776e+18 + x + y)"},
    {"constants-first", "(mul x 1e30 y 1e30)", "="},  /* 1e60 is inf in float32: left apart */
    {"constants-first", "(mul x 1e-30 y 1e-15)", "="}, /* a subnormal in float32 */
    {"cast-simplify", "((cast int64) ((cast float64) s_i))", "="}, /* float64 rounds int64 past 2^53 */
    {"constants-first", "(add i (constant int8 () (5)) 3)", "(8 + i)"},
    {"dimshuffle-merge", "((dimshuffle 1 0) ((dimshuffle 1 0) m))", "m"},
    {"dimshuffle-merge", "((dimshuffle 1 x 0) ((dimshuffle 1 0) m))", "dimshuffle{0,x,1}(m)"},
    {"dimshuffle-useless", "((dimshuffle 0 1) m)", "m"},
    {"cast-simplify", "((cast float32) x)", "x"},
    {"cast-simplify", "((cast float64) ((cast int16) i))", "cast{float64}(i)"},
    {"cast-simplify", "((cast float64) ((cast int8) x))", "="},
    {"log-exp", "(log (exp x))", "x"},
    {"log-exp", "(log (exp i))", "cast{float32}(i)"},
    {"switch-const", "(switch #t x y)", "x"},
    {"switch-const", "(switch (constant bool (2 1) (#f #f)) x i)", "alloc(cast{float32}(i), 2, 3)"},
    {"neg-neg", "(neg (neg i))", "i"},
    {"not-not", "(not (not b))", "b"},
    {"sub-neg", "(sub x (neg y))", "(x + y)"},
    {"sub-neg", "(sub i (neg u))", "="},
    {"add-neg", "(add x (neg y))", "(x - y)"},
    {"neg-add", "(add (neg y) x)", "(x - y)"},
    {"neg-sub", "(neg (sub x y))", "(y - x)"},
    {"maximum-self", "(maximum x x)", "x"},
    {"minimum-self", "(minimum (exp x) (exp x))", "exp(x)"},
    {"and-self", "(and b b)", "b"},
    {"or-self", "(or i i)", "i"},
    {"dot-transpose", "((dimshuffle 1 0) (dot M N))", "(N.T @ M.T)"},
    {"identity-remove", "(exp (identity x))", "exp(x)"},
    /* scan-subsumed: a scan that computes the same and more replaces one */
    {"scan-subsumed",
     "(add (scan (lambda (h) (tanh h)) (outputs-info x) (n-steps 3)) "
     "(nth 1 (scan (lambda (h) (values (tanh h) (exp h))) (outputs-info x none) (n-steps 3))))",
     "(scan{lambda h: tanh(h), exp(h)}(3, x, 3)[0] + scan{lambda h: tanh(h), exp(h)}(3, x, 3)[1])"},
    {"scan-subsumed",
     "(add (scan (lambda (h) (sin h)) (outputs-info x) (n-steps 3)) "
     "(nth 1 (scan (lambda (h) (values (tanh h) (exp h))) (outputs-info x none) (n-steps 3))))", "="},
    {"scan-subsumed",
     "(add ((subtensor (0 3)) (scan (lambda (h) (tanh h)) (outputs-info x) (n-steps 4))) "
     "(nth 1 (scan (lambda (h) (values (tanh h) (exp h))) (outputs-info x none) (n-steps 3))))", "="},
    /* scan-mitmot-to-sitsot: only the last state reaches the cost */
    {"scan-mitmot-to-sitsot",
     "(grad (sum ((subtensor -1) (scan (lambda (h) (sin h)) (outputs-info x) (n-steps 3)))) x)",
     "t1 = join{0}(inc_subtensor(second(scan{lambda h: sin(h)}(3, x), 0.0)[-1], second(scan{lambda h: sin(h)}(3, x)[-1], "
     "dimshuffle{x}(1.0)))[::-1], second(dimshuffle{x,0}(x), 0.0))\n"
     "t2 = scan{lambda <0>, <1>: (second(<1>, 0.0) + (<1> * cos(<0>)))}(3, "
     "join{0}(dimshuffle{x,0}(x), scan{lambda h: sin(h)}(3, x))[0:3][::-1], t1[0])\n"
     "reshape{2}(join{0}(t1[0:1], t2, t1[(shape_i{0}(t2) + 1):]), [4 3])[3]"},
    {"scan-mitmot-to-sitsot", "(grad (sum (scan (lambda (h) (sin h)) (outputs-info x) (n-steps 3))) x)", "="},
    /* fusion: connected elementwise nodes, any size (test_rewrite_fusion) */
    {"fusion", "(add (mul x y) z)", "composite{((<0> * <1>) + <2>)}(x, y, z)"},
    {"fusion", "(add (mul k 2.0) (exp k))", "composite{((<0> * 2.0) + exp(<0>))}(k)"},
    {"fusion", "(add x y)", "="},
    /* scan_save_mem: a trace read only at its end keeps its last rows */
    {"scan_save_mem", "((subtensor -1) (scan (lambda (h) (sin h)) (outputs-info x) (n-steps 3)))",
     "scan{lambda h: sin(h), output 0 keeps 1 step}(3, x)[-1]"},
    {"scan_save_mem", "(sum (scan (lambda (h) (sin h)) (outputs-info x) (n-steps 3)))", "="},
    /* scan_push_out: loop-invariant work computed once, before the loop */
    {"scan_push_out", "(scan (lambda (h) (tanh (dot h (add M N)))) (outputs-info v) (n-steps 3))",
     "scan{lambda h, M, N, <3>: tanh((h @ <3>))}(3, v, M, N, (M + N))"},
    {"scan_push_out", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    /* scan_remove_empty: nothing computed inside -> the value broadcast over the steps */
    {"scan_remove_empty", "(scan (lambda (p) p) (non-sequences M) (n-steps 3))", "alloc(M, 3, 3, 3)"},
    {"scan_remove_empty", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    /* push_out_non_seq (scan.kn) and backwards, push_in_non_seq */
    {"push_out_non_seq", "(scan (lambda (h) (tanh (dot h (add M N)))) (outputs-info v) (n-steps 3))",
     "scan{lambda h, M, N, <3>: tanh((h @ <3>))}(3, v, M, N, (M + N))"},
    {"push_out_non_seq", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    {"push_in_non_seq",
     "(scan (lambda (h p q r) (tanh (dot h r))) (outputs-info v) (non-sequences M N (add M N)) (n-steps 3))",
     "scan{lambda h, p, q: tanh((h @ (p + q)))}(3, v, M, N)"},
    {"push_in_non_seq", "(scan (lambda (h) (tanh (dot h (add M N)))) (outputs-info v) (n-steps 3))", "="},
    /* push_out_seq (scan.kn) and backwards, push_in_seq */
    {"push_out_seq", "(scan (lambda (m_t h) (tanh (add (dot m_t M) h))) (sequences m) (outputs-info v))",
     "scan{lambda m_t, <1>, h, M: tanh((<1> + h))}(2, m, (m @ M), v, M)"},
    {"push_out_seq", "(scan (lambda (m_t h) (tanh (add m_t h))) (sequences m) (outputs-info v))", "="},
    {"push_in_seq",
     "(scan (lambda (m_t p_t h W) (tanh (add p_t h))) (sequences m (dot m M)) (outputs-info v) (non-sequences M))",
     "scan{lambda m_t, h, W: tanh(((m_t @ W) + h))}(2, m, v, M)"},
    {"push_in_seq", "(scan (lambda (m_t h) (tanh (add (dot m_t M) h))) (sequences m) (outputs-info v))", "="},
    /* push_out_dot1 (scan.kn) and backwards, push_in_dot1 */
    {"push_out_dot1", "((subtensor -1) (scan (lambda (m_t acc) (add acc (dot m_t M))) (sequences m) (outputs-info v)))",
     "(v + (sum{0}(m[0:2]) @ M))"},
    {"push_out_dot1", "(scan (lambda (m_t acc) (add acc (dot m_t M))) (sequences m) (outputs-info v))", "="},
    {"push_in_dot1", "(add v (dot ((sum 0) ((subtensor (0 2)) m)) M))",
     "scan{lambda x_t, acc, M: (acc + (x_t @ M))}(2, m, v, M)[-1]"},
    {"push_in_dot1", "(add v (dot ((sum 0) m) M))", "="},
    /* push_out_add (scan.kn) and backwards, push_in_add */
    {"push_out_add",
     "((subtensor -1) (scan (lambda (a_t b_t acc) (add acc (dot a_t b_t))) "
     "(sequences ((dimshuffle 0 x 1) m) ((dimshuffle 0 1 x) m)) (outputs-info ((dimshuffle x x) s))))",
     "(dimshuffle{x,x}(s) + (reshape{2}(dimshuffle{1,0,2}(dimshuffle{0,x,1}(m)[0:2]), "
     "make_vector{int64}(1, (shape_i{0}(dimshuffle{0,x,1}(m)[0:2]) * 3))) @ reshape{2}(dimshuffle{0,1,x}(m)[0:2], "
     "make_vector{int64}((shape_i{0}(dimshuffle{0,1,x}(m)[0:2]) * 3), 1))))"},
    {"push_out_add", "((subtensor -1) (scan (lambda (m_t acc) (add acc (dot m_t M))) (sequences m) (outputs-info v)))",
     "="},
    {"push_in_add", "(add v (dot ((sum 0) ((subtensor (0 2)) m)) M))", "="},
    /* remove_constants_and_unused_inputs_scan */
    {"remove_constants_and_unused_inputs_scan",
     "(scan (lambda (x_t h w a b) (mul h (add w (mul a b)))) (sequences m) (outputs-info v) "
     "(non-sequences w (constant float64 () (2.0)) w))",
     "scan{lambda h, w: (h * (w + (2.0 * w)))}(2, v, w)"},
    {"remove_constants_and_unused_inputs_scan",
     "(scan (lambda (x_t h) (mul h x_t)) (sequences m) (outputs-info v))", "="},
    /* push_out_scan_output: an accumulated product kept at its end -> one product after the loop */
    {"push_out_scan_output",
     "((subtensor -1) (scan (lambda (x_t acc) (add acc (dot ((dimshuffle 1 0) x_t) x_t))) "
     "(sequences (constant float64 (4 1 3) (1 2 3 4 5 6 7 8 9 10 11 12))) (outputs-info M)))", "="},
    /* scan_merge: needs two scans (see test_rewrite_scan_mem); one is left alone */
    {"scan_merge", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    /* scan_merge_inouts, scan_prune_nit_sots (see test_rewrite_scan_mem) */
    {"scan_merge_inouts", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    /* scan_inplace: needs a mit-mot (see test_backend_scan); no sit-sot is touched */
    {"scan_inplace", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    {"scan_prune_nit_sots", "(scan (lambda (h) (tanh h)) (outputs-info v) (n-steps 3))", "="},
    /* scan_prune_sit_sots: a state nobody reads goes; one whose state the kept output reads stays */
    {"scan_prune_sit_sots", "(nth 0 (scan (lambda (h g) (values (tanh h) (exp g))) (outputs-info v v) (n-steps 3)))",
     "scan{lambda h: tanh(h)}(3, v)"},
    {"scan_prune_sit_sots", "(nth 0 (scan (lambda (h g) (values (add h g) (exp g))) (outputs-info v v) (n-steps 3)))", "="},
    /* scan_nit_sot_of_seq: a recorded slice is the sequence's rows (reversed going backwards) */
    {"scan_nit_sot_of_seq", "(scan (lambda (x_t) x_t) (sequences m) (outputs-info none))", "reshape{2}(m[0:2], [2 3])"},
    {"scan_nit_sot_of_seq", "(scan (lambda (x_t) x_t) (sequences m) (outputs-info none) (go-backwards #t))",
     "reshape{2}(m[(shape_i{0}(m) - 2):][::-1], [2 3])"},
    {"scan_nit_sot_of_seq", "(scan (lambda (x_t) (exp x_t)) (sequences m) (outputs-info none))", "="},
    {"scan_nit_sot_of_seq", "(scan (lambda (a b) b) (sequences (m (taps 0 1))) (outputs-info none))", "="},
    /* inplace_elemwise: a value read once, by this node, computed in the graph */
    {"inplace_elemwise", "(exp (add x y))", "exp{(inplace 0)}((x + y))"},
    {"inplace_elemwise", "(maximum (tanh x) y)", "maximum{(inplace 0)}(tanh(x), y)"},
    {"inplace_elemwise", "(gemv (exp v) 1.0 M w 1.0)", "gemv{(inplace 0)}(exp(v), 1.0, M, w, 1.0)"},
    {"inplace_elemwise", "(exp ((dimshuffle 0) (tanh x)))", "="},   /* a view: never destroyed */
    {"inplace_elemwise", "(maximum (tanh c) r)", "="},              /* broadcast: another type */
    {"inplace_elemwise", "(exp x)", "="},                            /* a graph input: the caller's */
    /* ---- stabilize */
    {"log1p", "(log (add 1 x))", "log1p(x)"},
    {"log1p", "(log (add x y 1))", "log1p((x + y))"},
    {"log1p", "(log (sub 1 x))", "log1p(-x)"},
    {"log1p", "(log (add 1 i))", "="},
    {"expm1", "(sub (exp x) 1)", "expm1(x)"},
    {"expm1", "(add -1 (exp d))", "expm1(d)"},
    {"log-sigmoid", "(log (sigmoid x))", "-softplus(-x)"},
    {"log-sigmoid", "(log (sigmoid i))", "-softplus(-cast{float32}(i))"},
    {"log-sigmoid", "(log (sub 1 (sigmoid x)))", "-softplus(x)"},
    {"log1p-neg-sigmoid", "(log1p (neg (sigmoid x)))", "-softplus(x)"},
    {"one-minus-sigmoid", "(sub 1 (sigmoid x))", "sigmoid(-x)"},
    {"log-softmax", "(log ((softmax 1) m))", "log_softmax{1}(m)"},
    {"log1p-exp", "(log1p (exp x))", "softplus(x)"},
    /* ---- specialize */
    {"dot-to-blas", "(dot M N)", "gemm(alloc_empty{float64}(3, 3), 1.0, M, N, 0.0)"},
    {"dot-to-blas", "(dot m v)", "gemv(alloc_empty{float64}(2), 1.0, m, v, 0.0)"},
    {"dot-to-blas", "(dot w M)", "gemv(alloc_empty{float64}(3), 1.0, M.T, w, 0.0)"},
    {"dot-to-blas", "(dot c r)", "ger(alloc(0.0, 3, 3), 1.0, dimshuffle{0}(c), dimshuffle{1}(r))"},
    {"dot-to-blas", "(dot v w)", "="},
    {"dot-to-blas", "(dot m (constant float32 (3) (1 2 3)))", "="},
    {"outer-to-ger", "(outer v w)", "ger(alloc(0.0, 3, 3), 1.0, v, w)"},
    {"blas-add", "(add N (gemm ((alloc_empty float64) 3 3) 2.0 M N 0.0))", "gemm(N, 2.0, M, N, 1.0)"},
    {"blas-add", "(add (mul 0.5 N) (gemm ((alloc_empty float64) 3 3) 1.0 M N 0.0))", "gemm(N, 1.0, M, N, 0.5)"},
    {"blas-add", "(add w (gemv ((alloc_empty float64) 3) 1.0 M v 0.0))", "gemv(w, 1.0, M, v, 1.0)"},
    {"blas-add", "(add N (ger (alloc 0.0 3 3) 1.0 v w))", "ger(N, 1.0, v, w)"},
    /* a bias row: broadcast into the accumulator, also through a reshape keeping the last axis */
    {"blas-add", "(add r (gemm ((alloc_empty float64) 3 3) 1.0 M N 0.0))", "gemm(alloc(dimshuffle{1}(r), 3, 3), 1.0, M, N, 1.0)"},
    {"blas-add", "(add (mul 0.5 w) (gemm ((alloc_empty float64) 3 3) 2.0 M N 0.0))", "gemm(alloc(w, 3, 3), 2.0, M, N, 0.5)"},
    {"blas-add", "(add w ((reshape 3) (gemm ((alloc_empty float64) 3 3) 1.0 M N 0.0) (constant int64 (3) (3 1 3))))",
     "reshape{3}(gemm(alloc(w, 3, 3), 1.0, M, N, 1.0), [3 1 3])"},
    {"blas-add", "(add c (gemm ((alloc_empty float64) 3 3) 1.0 M N 0.0))", "="}, /* a column: not a row */
    {"blas-add", "(add s ((reshape 1) (gemm ((alloc_empty float64) 3 3) 1.0 M N 0.0) (constant int64 (1) (9))))", "="},
    {"blas-sub", "(sub N (gemm ((alloc_empty float64) 3 3) 1.0 M N 0.0))", "gemm(N, -1.0, M, N, 1.0)"},
    {"blas-sub", "(sub (gemv ((alloc_empty float64) 3) 1.0 M v 0.0) w)", "gemv(w, 1.0, M, v, -1.0)"},
    {"blas-scale", "(mul 3.0 (gemm ((alloc_empty float64) 3 3) 2.0 M N 0.0))", "gemm(alloc_empty{float64}(3, 3), 6.0, M, N, 0.0)"},
    {"blas-scale", "(neg (gemv ((alloc_empty float64) 3) 1.0 M v 0.0))", "gemv(alloc_empty{float64}(3), -1.0, M, v, 0.0)"},
    {"blas-scale", "(mul s (ger (alloc 0.0 3 3) 2.0 v w))", "ger(alloc(0.0, 3, 3), (s * 2.0), v, w)"},
    {"pow-specialize", "(pow x 2)", "sqr(x)"},
    {"pow-specialize", "(pow i 2.0)", "sqr(cast{float64}(i))"},
    {"pow-specialize", "(pow x 0.5)", "sqrt(x)"},
    {"pow-specialize", "(pow x -1)", "(1 / x)"},
    {"pow-specialize", "(pow i -1)", "="},
    {"mul-neg-one", "(mul -1 x)", "-x"},
    {"mul-neg-one", "(mul x -1 y)", "-(x * y)"},
    {"mul-square", "(mul x y x)", "(sqr(x) * y)"},
    /* each value that comes again is squared in turn, not the repeated
     * constants, in a product of more than a few factors too */
    {"mul-square", "(mul 2.0 y 2.0 w x w x 3.0 v s)", "(2.0 * y * 2.0 * sqr(w) * sqr(cast{float64}(x)) * s * v * 3.0)"},
    {"mul-self-to-sqr", "(mul x x)", "sqr(x)"},
    /* ---- SumToSize commuting (specialize) and back (relational) */
    {"sum_to_size_commute", "(mul ((sum 0) m) v)", "sum{0}((m * v))"},
    {"sum_to_size_commute", "(mul v ((sum 0) m))", "sum{0}((v * m))"},
    {"sum_to_size_commute", "(true_div ((sum 0) m) v)", "sum{0}((m / v))"},
    {"sum_to_size_commute", "(neg ((sum 0) m))", "sum{0}(-m)"},
    {"sum_to_size_commute", "(add ((sum 0) m) ((sum 0) (exp m)))", "sum{0}((m + exp(m)))"},
    {"sum_to_size_commute", "(add ((sum 0) m) v)", "="},        /* PyTorch 22833: v is not summed */
    {"sum_to_size_commute", "(add ((sum 0) m) ((sum 0) k))", "="}, /* k's length unknown */
    {"sum_to_size_commute", "(true_div v ((sum 0) m))", "="},   /* the sum as a denominator */
    {"sum_to_size_commute", "(mul ((sum 0) m) c)", "="},        /* c broadcasts the sum */
    {"sum_to_size_commute", "(mul ((sum 1) m) s)", "="},        /* not the leading axes */
    {"sum_to_size_commute", "(mul ((sum 0) m) i)", "="},        /* an integer operand */
    {"sum_to_size_in", "((sum 0) (mul m v))", "(sum{0}(m) * v)"},
    {"sum_to_size_in", "((sum 0) (add m (exp m)))", "(sum{0}(m) + sum{0}(exp(m)))"},
    {"sum_to_size_in", "((sum 0) (add m v))", "="},             /* sum(m + v) is not sum(m) + v */
    /* ---- the relational database */
    {"dot-distribute", "(dot M (add v w))", "((M @ v) + (M @ w))"},
    {"dot-distribute", "(dot M (add v (constant float64 (1) (1))))", "="},
    {"dot-gather", "(add (dot M v) (dot M w))", "(M @ (v + w))"},
};

/* ------------------------------------------------------------------ values */

/* Deterministic inputs: smooth floats in (-2, 2), small integers. */
static rg_tensor *input_value(const rg_type *t, int k) {
  int64_t shape[RG_MAX_NDIM];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d] < 0 ? 3 : t->shape[d];
  rg_tensor *v = rg_tensor_new(t->dtype, t->ndim, shape);
  for (int64_t j = 0; j < rg_tensor_numel(v); j++) {
    if (rg_dtype_is_float(t->dtype)) rg_tensor_set_f64(v, j, 2 * sin(1.3 * (double)j + 0.7 * k + 0.1));
    else if (t->dtype == RG_BOOL) rg_tensor_set_i64(v, j, (j + k) % 2);
    else if (t->dtype == RG_UINT8) rg_tensor_set_i64(v, j, (j * 5 + k) % 9);
    else rg_tensor_set_i64(v, j, (j * 7 + k * 3) % 9 - 4);
  }
  return v;
}

/* Where a is finite, b agrees within the dtype's tolerance. */
static bool agree(const rg_tensor *a, const rg_tensor *b, char *why, size_t len) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return snprintf(why, len, "dtype or rank"), false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return snprintf(why, len, "shape"), false;
  double tol = a->dtype == RG_FLOAT32 ? 1e-4 : 1e-6; /* float64 results may come from float32 parts */
  for (int64_t j = 0; j < rg_tensor_numel(a); j++) {
    double x = rg_tensor_get_f64(a, j), y = rg_tensor_get_f64(b, j);
    if (!rg_dtype_is_float(a->dtype) ? rg_tensor_get_i64(a, j) != rg_tensor_get_i64(b, j)
                                     : isfinite(x) && !(fabs(x - y) <= tol + tol * fabs(x)))
      return snprintf(why, len, "element %lld: %.17g vs %.17g", (long long)j, x, y), false;
  }
  return true;
}

typedef struct compiled { int nin; rg_variable **ins; rg_function *f; } compiled;

/* Compiles out as a function of `like`'s inputs (or of its own leaves). */
static compiled compile_like(rg_variable *out, const char *query, const compiled *like) {
  compiled c = {0};
  if (like) {
    c.nin = like->nin;
    c.ins = like->ins;
  } else {
    size_t n;
    rg_variable **leaves = rg_graph_inputs(1, &out, &n);
    c.ins = rg_gc_alloc((n + 1) * sizeof *c.ins);
    for (size_t i = 0; i < n; i++)
      if (!rg_is_constant(leaves[i])) c.ins[c.nin++] = leaves[i];
  }
  rg_compile_opts o = {.mode = {.query = query}};
  c.f = rg_compile(C, c.nin, c.ins, 1, &out, &o);
  if (!c.f) fail_msg("compile: %s", rg_errmsg(C));
  return c;
}

static compiled compile(rg_variable *out, const char *query) { return compile_like(out, query, NULL); }

/* Runs both on the same inputs; NULL when they agree, else why not. */
static const char *same_values(compiled *a, compiled *b) {
  rg_tensor *in[32], *ra = NULL, *rb = NULL;
  assert_true(a->nin <= 32);
  for (int i = 0; i < a->nin; i++) in[i] = input_value(a->ins[i]->type, i);
  static char why[256];
  const char *res = NULL;
  if (rg_function_call(a->f, in, &ra) != RG_OK) res = NULL; /* the original fails: nothing to compare */
  else if (rg_function_call(b->f, in, &rb) != RG_OK) res = rg_function_errmsg(b->f);
  else if (!agree(ra, rb, why, sizeof why)) res = why;
  for (int i = 0; i < a->nin; i++) rg_tensor_free(in[i]);
  rg_tensor_free(ra);
  rg_tensor_free(rb);
  return res;
}

/* ------------------------------------------------------------------ one rule at a time */

static const char *show_output(rg_fgraph *fg) {
  char *s = rg_pprint_str(rg_fgraph_output(fg, 0));
  size_t n = strlen(s);
  while (n && s[n - 1] == '\n') s[--n] = 0;
  return s;
}

static bool trace_names(const rg_rewrite_run *run, const char *rule) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  rg_rewrite_trace(run, f);
  fclose(f);
  char *want = rg_gc_alloc(strlen(rule) + 16);
  sprintf(want, ". %s rewrote", rule);
  bool found = strstr(buf, want) != NULL;
  free(buf);
  return found;
}

/* Returns NULL or what went wrong, with the inputs given (INPUTS_ON). */
static const char *check_case_with(const std_case *c, const char *inputs) {
  char text[4096];
  snprintf(text, sizeof text, "(graph %s(output %s))", inputs, c->output);
  rg_fgraph *fg = rg_graph_read(C, "<case>", text, strlen(text));
  if (!fg) return rg_errmsg(C);
  rg_variable *before = rg_fgraph_output(fg, 0);
  const char *shown_before = show_output(fg);
  compiled cb = compile(before, "none");
  rg_rewriter *rw = rg_db_query(C, std_db, c->rule);
  if (!rw) return rg_errmsg(C);
  rg_rewrite_opts o = {.fold = fold, .trace = true};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &o);
  static char msg[1024];
  const char *got = show_output(fg);
  rg_variable *after = rg_fgraph_output(fg, 0);
  const char *bad = NULL;
  if (rg_rewrite_stop(run) != RG_STOP_EQUILIBRIUM) bad = rg_rewrite_stop_message(run);
  else if (rg_rewrite_rejected(run)) bad = "a rewrite was rejected";
  else if (rg_fgraph_check(fg) != RG_OK) bad = rg_errmsg(C);
  else if (strcmp(got, strcmp(c->expect, "=") ? c->expect : shown_before)) bad = "another result";
  else if (strcmp(c->expect, "=") && !trace_names(run, c->rule)) bad = "the rule did not fire";
  else if (!strcmp(c->expect, "=") && rg_rewrite_count(run)) bad = "a rewrite happened";
  else if (!rg_type_stands_for(after->type, before->type)) bad = "the type changed";
  if (!bad) {
    compiled ca = compile_like(after, "none", &cb);
    bad = same_values(&cb, &ca);
    rg_function_free(ca.f);
  }
  rg_function_free(cb.f);
  if (!bad) return NULL;
  snprintf(msg, sizeof msg, "%s on %s: %s (got %s %s, want %s)", c->rule, c->output, bad, got,
           rg_type_str(after->type), c->expect);
  return msg;
}

static int failed_cases(const char *inputs, const char *where) {
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *bad = check_case_with(&cases[i], inputs);
    if (bad) {
      print_error("%s%s\n", bad, where);
      failed++;
    }
  }
  return failed;
}

static void test_every_rule(void **st) { assert_int_equal(failed_cases(INPUTS, ""), 0); }

/* The standard rewrites apply to graphs placed on a device exactly as on
 * the host (the host constants and allocations they make are uploaded or
 * made there): every case gives the same result with every input on the
 * mirror device, and the rewritten graph, run there, the same values. */
static void test_every_rule_on_a_device(void **st) {
  assert_int_equal(failed_cases(INPUTS_ON(" mirror"), " (inputs on the mirror device)"), 0);
}

/* The destroy check of inplace_elemwise on whole graphs: the value e (the
 * exp node's) read twice (by one node or two), a graph output, aliased by
 * a view, is never overwritten; read once, it is (by an elementwise node,
 * or by inc_subtensor or set_subtensor updating it); and every graph
 * computes what it computed before. */
static void test_inplace_destroy_check(void **st) {
  (void)st;
  static const struct { const char *graph; int e_destroyed; } g[] = {
      {"(define e (exp x)) (output (maximum e e))", 0},                      /* read twice by one node */
      {"(define e (exp x)) (output (add (tanh e) (sin e)))", 0},            /* read by two nodes */
      {"(define e (exp x)) (output (tanh e)) (output e)", 0},               /* a graph output */
      {"(define e (exp x)) (output (add (tanh e) ((dimshuffle 0) e)))", 0}, /* aliased by a view */
      {"(define e (exp x)) (output (tanh e))", 1},                          /* read once */
      {"(output (tanh (exp (sin x))))", 1},                                 /* a chain */
      /* the subtensor updates overwrite the tensor they update (input 0) */
      {"(define e (exp x)) (output ((set_subtensor (0 2)) e ((subtensor (1 3)) x)))", 1},
      {"(define e (exp x)) (output ((inc_subtensor 1) e ((subtensor 0) x)))", 1},
      {"(define e (exp x)) (output ((inc_subtensor 1) e ((subtensor 0) x))) (output e)", 0},
      {"(define e (exp x)) (output ((inc_subtensor (0 2)) e ((subtensor (1 3)) e)))", 0},
      {"(define e (exp x)) (output ((set_subtensor 0) (sin x) ((subtensor 1) e)))", 0},
  };
  rg_rewriter *rw = rg_db_query(C, std_db, "inplace_elemwise");
  assert_non_null(rw);
  for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
    char text[512];
    snprintf(text, sizeof text, "(graph (input x float32 (3)) %s)", g[k].graph);
    rg_fgraph *fg = rg_graph_read(C, "<inplace>", text, strlen(text));
    assert_non_null(fg);
    compiled before = compile(rg_fgraph_output(fg, 0), "none");
    rg_rewrite_opts o = {.fold = fold};
    rg_rewrite(fg, rw, &o);
    assert_int_equal(rg_fgraph_check(fg), RG_OK);
    int destroyed = 0;
    for (rg_node *n = rg_fgraph_first(fg); n; n = rg_fgraph_next(n)) {
      const rg_node *victim = n->op->inplace >= 0 ? n->inputs[n->op->inplace]->owner : NULL;
      destroyed += victim && victim->op->code == RG_OP_EXP;
    }
    if (destroyed != g[k].e_destroyed) fail_msg("%s: e overwritten %d times, want %d", g[k].graph, destroyed, g[k].e_destroyed);
    compiled after = compile_like(rg_fgraph_output(fg, 0), "none", &before);
    const char *bad = same_values(&before, &after);
    if (bad) fail_msg("%s: %s", g[k].graph, bad);
    rg_function_free(before.f);
    rg_function_free(after.f);
  }
}

/* Every rule of the standard database has a case here. */
/* SumToSize commuting on gradient graphs under fast_run: where a broadcast
 * value is computed pointwise, the derivative's product moves into the
 * gradient's sum (the rule fires, one sum remains after the fused work);
 * where a value is used twice, once broadcast and once not (PyTorch issue
 * 22833), the gradient addition keeps its sum apart.  Values as before. */
static void test_sum_to_size_in_gradients(void **st) {
  (void)st;
  static const struct { const char *text; bool fires; } graphs[] = {
      {"(graph (input X float64 (5 3)) (input p float64 (3))"
       " (define (gp) (grad (sum (tanh (add X (exp p)))) p)) (output gp))", true},
      {"(graph (input B float64 (4 3)) (input c float64 (3)) (input p float64 (3))"
       " (define a (exp p)) (define (gp) (grad (add (sum (mul a B)) (sum (mul a c))) p)) (output gp))", false},
  };
  for (size_t g = 0; g < sizeof graphs / sizeof *graphs; g++) {
    rg_fgraph *fg = rg_graph_read(C, "<case>", graphs[g].text, strlen(graphs[g].text));
    assert_non_null(fg);
    rg_variable *out = rg_fgraph_output(fg, 0);
    compiled ref = compile(out, "none"), fast = compile_like(out, "fast_run", &ref);
    const char *bad = same_values(&ref, &fast);
    if (bad) fail_msg("graph %zu: %s", g, bad);
    rg_function_free(ref.f), rg_function_free(fast.f);
    rg_rewriter *rw = rg_db_query(C, std_db, "fast_run");
    rg_rewrite_opts o = {.fold = fold, .trace = true};
    rg_rewrite_run *run = rg_rewrite(fg, rw, &o);
    assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
    assert_int_equal(trace_names(run, "sum_to_size_commute"), graphs[g].fires);
  }
}

/* A chain of n additions (and of n multiplications, a chain's gradient)
 * becomes one n-ary node in one rewrite: each level spliced one at a time
 * made n rewrites of 2, 3, ..., n inputs (10^4 took seconds and a
 * gigabyte, 10^5 ran out of memory). */
static void test_flatten_chain_at_once(void **st) {
  (void)st;
  for (int op = 0; op < 2; op++) {
    int64_t three = 3;
    rg_variable *x = rg_input(C, "x", rg_type_new(RG_FLOAT64, 1, &three)), *s = x;
    enum { N = 20000 };
    for (int i = 0; i < N; i++) s = op ? rg_mul(s, x) : rg_add(s, x);
    rg_fgraph *fg = rg_fgraph_new(C, 1, &x, 1, &s, 0);
    rg_rewrite_opts o = {.fold = fold};
    rg_rewrite_run *run = rg_rewrite(fg, rg_db_query(C, std_db, "canonicalize"), &o);
    assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
    assert_true(rg_rewrite_count(run) < 10);
    rg_node *top = rg_fgraph_output(fg, 0)->owner;
    assert_non_null(top);
    assert_int_equal(top->nin, N + 1);
  }
}

/* Types told after the fact: a slice's constant stop becomes static, and
 * the nodes built on the slice before (a reversal, a reshape, an add) are
 * rebuilt by refine-types with the sizes; shape_i of a static size folds,
 * so a reshape to (2 * shape_i{0}(x), 3) gets a static shape; the cycle
 * check takes these type-only rewrites for progress (no stop); values
 * stay as they were. */
static void test_refine_types(void **st) {
  (void)st;
  const char *text =
      "(graph (input M float64 (3 3))"
      " (define s ((subtensor (none none -1)) ((subtensor (0 ?)) M (constant int64 () (2)))))"
      " (output (add (exp s) ((reshape 2) ((reshape 1) s ((make_vector int64) (mul 3 ((shape_i 0) s))))"
      " ((make_vector int64) ((shape_i 0) s) 3)))))";
  rg_fgraph *fg = rg_graph_read(C, "<case>", text, strlen(text));
  assert_non_null(fg);
  rg_variable *out = rg_fgraph_output(fg, 0);
  assert_int_equal(out->type->shape[0], RG_DIM_UNKNOWN);
  compiled ref = compile(out, "none");
  rg_rewriter *rw = rg_db_query(C, std_db, "canonicalize");
  rg_rewrite_opts o = {.fold = fold, .trace = true};
  rg_rewrite_run *run = rg_rewrite(fg, rw, &o);
  assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
  assert_true(trace_names(run, "refine-types"));
  assert_true(trace_names(run, "shape-static"));
  rg_variable *after = rg_fgraph_output(fg, 0);
  assert_string_equal(rg_type_str(after->type), "float64 (2 3)");
  compiled got = compile_like(after, "none", &ref);
  const char *bad = same_values(&ref, &got);
  if (bad) fail_msg("%s", bad);
  rg_function_free(ref.f), rg_function_free(got.f);
  /* a refinement its readers would reject is not made: a loop of no
   * steps reads a sequence that becomes 0 rows long, which its type check
   * refuses (it runs, taking no step) */
  const char *zero = "(graph (input x float64 (4)) (output (grad (sum (scan (lambda (h) (mul h 0 0))"
                     " (outputs-info x) (n-steps 0))) x)))";
  fg = rg_graph_read(C, "<case>", zero, strlen(zero));
  assert_non_null(fg);
  run = rg_rewrite(fg, rg_db_query(C, std_db, "canonicalize -scan"), &o); /* no loop rule rebuilds it */
  assert_int_equal(rg_rewrite_stop(run), RG_STOP_EQUILIBRIUM);
  if (rg_fgraph_check(fg) != RG_OK) fail_msg("%s", rg_errmsg(C));
}

static void test_every_rule_has_a_case(void **st) {
  rg_rewrite_db *stack[8] = {std_db};
  int sp = 1, missing = 0;
  while (sp) {
    rg_rewrite_db *db = stack[--sp];
    for (int i = 0; i < rg_db_count(db); i++) {
      rg_rewriter *rw;
      rg_rewrite_db *sub;
      const char *name = rg_db_entry(db, i, &rw, &sub, NULL);
      if (sub) {
        stack[sp++] = sub;
        continue;
      }
      if (!strncmp(name, "merge", 5)) continue; /* graph rewriters: test_rewrite_engine */
      bool found = false;
      for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) found |= !strcmp(cases[k].rule, name);
      if (!found) {
        print_error("no case for %s\n", name);
        missing++;
      }
    }
  }
  assert_int_equal(missing, 0);
}

/* The tags of the standard database: fast_run, fast_compile, the
 * database's name and the rule's own. */
static void test_tags(void **st) {
  rg_rewrite_db *canon = NULL;
  for (int i = 0; i < rg_db_count(std_db); i++) {
    rg_rewrite_db *sub;
    const char *name = rg_db_entry(std_db, i, NULL, &sub, NULL);
    if (!strcmp(name, "canonicalize")) canon = sub;
  }
  assert_non_null(canon);
  for (int i = 0; i < rg_db_count(canon); i++) {
    const char *tags;
    rg_db_entry(canon, i, NULL, NULL, &tags);
    assert_non_null(strstr(tags, "fast_run"));
    assert_non_null(strstr(tags, "fast_compile"));
  }
  const char *order[] = {"merge1", "canonicalize", "stabilize", "specialize", "fusion", "merge2"};
  for (int i = 0; i < 6; i++) assert_string_equal(rg_db_entry(std_db, i, NULL, NULL, NULL), order[i]);
}

/* ------------------------------------------------------------------ fast_run on random graphs */

typedef struct rng { uint64_t s; } rng;
static uint64_t next(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
static int pick(rng *r, int n) { return (int)(next(r) % (uint64_t)n); }

/* A random expression over a few inputs, as graph-file text.  Most draws
 * type-check; those that do not are skipped.  No cast to integers: it
 * would turn rounding differences into whole units and NaNs into numbers. */
static void expr(rng *r, int depth, char *out, size_t len) {
  static const char *leaves[] = {"x", "y", "d", "i", "u", "0", "1", "2", "-1", "0.5", "s", "v", "k", "c", "r"};
  static const char *unary[] = {"neg", "exp", "log", "log1p", "sigmoid", "sqr", "abs", "tanh",
                                "softplus", "(cast float32)", "(dimshuffle 1 0)",
                                "(softmax 0)", "identity", "sqrt"};
  static const char *binary[] = {"add", "mul", "sub", "true_div", "pow", "maximum", "dot", "outer"};
  enum { NL = sizeof leaves / sizeof *leaves, NU = sizeof unary / sizeof *unary, NB = sizeof binary / sizeof *binary };
  if (depth == 0 || pick(r, 4) == 0) {
    snprintf(out, len, "%s", leaves[pick(r, NL)]);
    return;
  }
  char a[4096], b[4096];
  expr(r, depth - 1, a, sizeof a);
  int k = pick(r, 12), n;
  if (k < 5) {
    n = snprintf(out, len, "(%s %s)", unary[pick(r, NU)], a);
    assert_true(n > 0 && (size_t)n < len);
    return;
  }
  expr(r, depth - 1, b, sizeof b);
  if (k == 10) n = snprintf(out, len, "(true_div (mul %s %s) %s)", a, b, b);
  else if (k == 11) n = snprintf(out, len, "(add %s (dot M %s))", a, b);
  else n = snprintf(out, len, "(%s %s %s)", binary[pick(r, NB)], a, b);
  assert_true(n > 0 && (size_t)n < len); /* the depth bound keeps expressions short */
}

static void test_fast_run_keeps_values(void **st) {
  const char *env = getenv("RG_STD_FUZZ_ROUNDS");
  int rounds = env ? atoi(env) : 1000;
  rng r = {0x9e3779b97f4a7c15ull + (uint64_t)(env ? rounds : 0)};
  int checked = 0, failed = 0;
  for (int t = 0; t < rounds; t++) {
    char e[8192], text[9000];
    expr(&r, 4, e, sizeof e);
    snprintf(text, sizeof text, "(graph " INPUTS "(output %s))", e);
    rg_fgraph *fg = rg_graph_read(C, "<random>", text, strlen(text));
    if (!fg) {
      rg_clear_error(C);
      continue;
    }
    rg_variable *out = rg_fgraph_output(fg, 0);
    if (!out->owner) continue;
    compiled none = compile(out, "none");
    for (int q = 0; q < 2; q++) {
      compiled opt = compile_like(out, q ? "fast_compile" : "fast_run", &none);
      const char *bad = same_values(&none, &opt);
      if (bad) {
        print_error("%s differs on %s: %s\n", q ? "fast_compile" : "fast_run", e, bad);
        failed++;
      }
      rg_function_free(opt.f);
    }
    rg_function_free(none.f);
    checked++;
  }
  print_message("%d random graphs checked\n", checked);
  assert_true(checked > rounds / 4);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_rule),
      cmocka_unit_test(test_every_rule_on_a_device),
      cmocka_unit_test(test_every_rule_has_a_case),
      cmocka_unit_test(test_sum_to_size_in_gradients),
      cmocka_unit_test(test_inplace_destroy_check),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_refine_types),
      cmocka_unit_test(test_fast_run_keeps_values),
      cmocka_unit_test(test_flatten_chain_at_once),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
