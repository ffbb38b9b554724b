/*
 * kernels.c — the table of CPU kernels, one entry per op.
 *
 * Every op of RG_OP_TABLE has a kernel here except ifelse (the virtual
 * machine evaluates it lazily) and opaque ops (not executable: the linker
 * reports them).  Elementwise ops share one kernel that dispatches on the
 * opcode and dtype to typed loops (elemwise.c); so do the reductions.
 */
#include "backend/cpu/cpu-impl.h"

#define EW(code) [RG_OP_##code] = rgb_cpu_elemwise
#define RED(code) [RG_OP_##code] = rgb_cpu_reduce

const rgb_kernel rgb_cpu_kernels[RG_OP_COUNT] = {
    EW(ADD), EW(MUL), EW(SUB), EW(TRUE_DIV), EW(INT_DIV), EW(MOD), EW(NEG), EW(ABS),
    EW(EXP), EW(LOG), EW(LOG1P), EW(EXPM1), EW(SQRT), EW(SQR), EW(POW), EW(SIN), EW(COS),
    EW(TANH), EW(SIGMOID), EW(SOFTPLUS), EW(ERF), EW(MAXIMUM), EW(MINIMUM), EW(FLOOR),
    EW(CEIL), EW(ROUND), EW(SIGN), EW(CLIP), EW(LT), EW(GT), EW(LE), EW(GE), EW(EQ), EW(NEQ),
    EW(AND), EW(OR), EW(XOR), EW(NOT), EW(SWITCH), EW(CAST), EW(IDENTITY), EW(SECOND),
    RED(SUM), RED(PROD), RED(MAX), RED(MIN), RED(MEAN), RED(ARGMAX), RED(ARGMIN), RED(ALL),
    RED(ANY), [RG_OP_SOFTMAX] = rgb_cpu_softmax, [RG_OP_LOG_SOFTMAX] = rgb_cpu_softmax,
    [RG_OP_DOT] = rgb_cpu_dot, [RG_OP_OUTER] = rgb_cpu_outer, [RG_OP_GEMM] = rgb_cpu_gemm,
    [RG_OP_GEMV] = rgb_cpu_gemv, [RG_OP_GER] = rgb_cpu_ger,
    [RG_OP_BATCHED_DOT] = rgb_cpu_batched_dot,
    [RG_OP_DIMSHUFFLE] = rgb_cpu_dimshuffle, [RG_OP_RESHAPE] = rgb_cpu_reshape,
    [RG_OP_FLATTEN] = rgb_cpu_flatten, [RG_OP_SHAPE] = rgb_cpu_shape,
    [RG_OP_SHAPE_I] = rgb_cpu_shape_i, [RG_OP_ALLOC] = rgb_cpu_alloc,
    [RG_OP_ALLOC_EMPTY] = rgb_cpu_alloc_empty, [RG_OP_MAKE_VECTOR] = rgb_cpu_make_vector,
    [RG_OP_JOIN] = rgb_cpu_join, [RG_OP_SPLIT] = rgb_cpu_split,
    [RG_OP_SUBTENSOR] = rgb_cpu_subtensor, [RG_OP_INC_SUBTENSOR] = rgb_cpu_set_subtensor,
    [RG_OP_SET_SUBTENSOR] = rgb_cpu_set_subtensor, [RG_OP_ARANGE] = rgb_cpu_arange,
    [RG_OP_COMPOSITE] = rgb_cpu_composite, [RG_OP_OP_FROM_GRAPH] = rgb_cpu_op_from_graph,
    [RG_OP_SCAN] = rgb_cpu_scan,
};
