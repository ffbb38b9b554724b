/*
 * cpu.c — the CPU backend: its interface table and kernel selection.
 *
 * The CPU backend is the reference implementation of every op; kernels
 * live in the files of backend/cpu/ and are listed in rgb_cpu_kernels.
 * ifelse has no kernel: the virtual machine evaluates it lazily.  It needs
 * no context, and its values live in host memory.  Binding a composite
 * generates its kernel (backend/cpu/codegen.c) then, at compile time.
 */
#include "backend/backend-impl.h"
#include "backend/cpu/cpu-impl.h"

static bool cpu_supports(void *ctx, const rgb_node *n) {
  (void)ctx;
  if (n->code == RG_OP_IFELSE) return true;
  return (unsigned)n->code < RG_OP_COUNT && rgb_cpu_kernels[n->code] != NULL;
}

static int cpu_bind(void *ctx, const rgb_node *n, rgb_bound *out, char *why, size_t len) {
  (void)ctx, (void)why, (void)len;
  *out = (rgb_bound){.fn = rgb_cpu_kernels[n->code]};
  if (n->code == RG_OP_COMPOSITE && n->inner) rgbc_composite_prepare(n);
  return out->fn ? 0 : RG_ERR_TYPE;
}

const rgb_backend rgb_cpu_backend = {
    .abi = RGB_BACKEND_ABI,
    .name = "cpu",
    .device = RG_DEVICE_HOST,
    .supports = cpu_supports,
    .bind = cpu_bind,
    .joins_composites = true,
};
