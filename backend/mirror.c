/*
 * mirror.c — the mirror backend: the checking device.
 *
 * A second, real backend that needs no hardware, so that placement,
 * transfers and device borders are tested everywhere.  Its values live in
 * host memory with every byte XOR-ed with a key: the CPU kernels cannot
 * read them (they would compute garbage), and only the buffer type's
 * download and upload, which undo and redo the key, move them.  A value
 * that reaches a kernel without its transfer therefore gives a wrong
 * result, and a mirror kernel refuses an input that is not on its device.
 * Because the key applies byte by byte, views of mirror values (strides,
 * offsets) work as on the host.
 *
 * Its kernels are the CPU's: each downloads its inputs into host tensors,
 * runs the CPU kernel of the op, and uploads the outputs into mirror
 * buffers.  It runs a subset of the ops (elementwise, composite, the BLAS
 * ops, dimshuffle, reshape, flatten, subtensor, sum, softmax,
 * log_softmax, alloc, alloc_empty, inc_subtensor, set_subtensor, join and
 * Scan), so programs on it mix
 * devices; everything else runs on the CPU.  Inner graphs of its
 * composites run on the host, and the shape arguments of alloc are read
 * on the host, as a GPU backend reads them (its host_input slot).  A Scan
 * runs as on a GPU: the executor of backend/cpu/scan.c with its traces in
 * mirror buffers, rows copied by the buffer type, and its step linked for
 * the mirror (so the step's kernels read the rows in place).
 */
#include "backend/backend-impl.h"
#include "backend/cpu/cpu-impl.h"
#include "base/base.h"

#include <string.h>

#define MIRROR_KEY 0x5a

static void *mirror_alloc(const rg_buffer_type *bt, size_t nbytes) {
  (void)bt;
  return rg_aligned_alloc(64, (nbytes + 63) & ~(size_t)63);
}

static void mirror_free(const rg_buffer_type *bt, void *base, size_t nbytes) {
  (void)bt;
  (void)nbytes;
  rg_free(base);
}

/* Both directions: the key undoes itself. */
static int mirror_move(const rg_buffer_type *bt, void *dst, const void *src, size_t n) {
  (void)bt;
  unsigned char *d = dst;
  const unsigned char *s = src;
  for (size_t i = 0; i < n; i++) d[i] = s[i] ^ MIRROR_KEY;
  return 0;
}

static const rg_buffer_type mirror_buft = {
    .name = "mirror",
    .device = RG_DEVICE_MIRROR,
    .alloc = mirror_alloc,
    .free = mirror_free,
    .download = mirror_move,
    .upload = mirror_move,
};

static const rg_buffer_type *mirror_buffer_type(void *ctx) {
  (void)ctx;
  return &mirror_buft;
}

static bool mirror_supports(void *ctx, const rgb_node *n) {
  (void)ctx;
  if ((unsigned)n->code >= RG_OP_COUNT || !rgb_cpu_kernels[n->code]) return false;
  switch (rg_opcode_family(n->code)) {
    case RG_FAM_ELEMWISE:
    case RG_FAM_BLAS: return true;
    default: break;
  }
  switch (n->code) {
    /* as a backend generating one kernel from a fused group does, it
     * decides with the group's inner graph at hand (linked before placement) */
    case RG_OP_COMPOSITE: return n->inner != NULL;
    case RG_OP_DIMSHUFFLE: case RG_OP_RESHAPE: case RG_OP_FLATTEN:
    case RG_OP_SUBTENSOR: case RG_OP_SUM: case RG_OP_SOFTMAX: case RG_OP_LOG_SOFTMAX:
    case RG_OP_ALLOC: case RG_OP_ALLOC_EMPTY: case RG_OP_SCAN:
    case RG_OP_INC_SUBTENSOR: case RG_OP_SET_SUBTENSOR: case RG_OP_JOIN: return true;
    default: return false;
  }
}

/* The node's CPU kernel, kept as the mirror kernel's state. */
typedef struct mirror_state {
  rgb_kernel cpu;
} mirror_state;

static void free_host(rg_tensor **v, int n) {
  for (int i = 0; i < n; i++) rg_tensor_free(v[i]);
}

static bool mirror_host_input(void *ctx, const rgb_node *n, int i) {
  (void)ctx;
  return rgb_shape_argument(n, i);
}

/* Downloads the inputs (each must be on the mirror device, but for shape
 * arguments, which must be on the host). */
static int download_inputs(rgb_exec *x, rg_tensor **h) {
  for (int k = 0; k < x->node->nin; k++) {
    rg_tensor *v = rgb_in(x, k);
    h[k] = NULL;
    if (rgb_shape_argument(x->node, k)) {
      if (rg_tensor_device(v) != RG_DEVICE_HOST) {
        free_host(h, k);
        return rgb_error(x, RG_ERR, "shape argument %d is not on the host", k);
      }
      if (!(h[k] = rg_tensor_ref(v))) return free_host(h, k), rgb_error(x, RG_ERR_NOMEM, "out of memory");
      continue;
    }
    if (rg_tensor_device(v) != RG_DEVICE_MIRROR) {
      free_host(h, k);
      return rgb_error(x, RG_ERR, "input %d is not on the mirror device (a transfer is missing)", k);
    }
    if (!(h[k] = rg_tensor_to_host(v))) {
      free_host(h, k);
      return rgb_error(x, RG_ERR_NOMEM, "out of memory");
    }
  }
  return 0;
}

static int upload_outputs(rgb_exec *x, rg_tensor **h) {
  for (int j = 0; j < x->node->nout; j++) {
    rg_tensor *d = rg_tensor_to_device(h[j], &mirror_buft);
    if (!d) return rgb_error(x, RG_ERR_NOMEM, "out of memory");
    rgb_set_output(x, j, d);
  }
  return 0;
}

static int mirror_run(rgb_exec *x) {
  const rgb_node *n = x->node;
  const mirror_state *st = x->state;
  rg_tensor *hin[n->nin + 1], *hout[n->nout + 1];
  rg_tensor **pin[n->nin + 1], **pout[n->nout + 1];
  int rc = download_inputs(x, hin);
  if (rc) return rc;
  for (int k = 0; k < n->nin; k++) pin[k] = &hin[k];
  for (int j = 0; j < n->nout; j++) {
    hout[j] = NULL;
    pout[j] = &hout[j];
  }
  rgb_exec hx = {.node = n, .inp = pin, .outp = pout, .rt = x->rt};
  rc = st->cpu(&hx);
  if (rc == 0) rc = upload_outputs(x, hout);
  free_host(hout, n->nout);
  free_host(hin, n->nin);
  return rc;
}

/* A copy between two mirror values (or a host value into one). */
static int mirror_copy(rgb_exec *x, rg_tensor *dst, const rg_tensor *src) {
  int rc = rg_tensor_copy_to(dst, src);
  return rc ? rgb_error(x, rc, "a copy on the mirror device failed (dtypes %s and %s)", rg_dtype_name(dst->dtype),
                        rg_dtype_name(src->dtype))
            : 0;
}

static int mirror_scan(rgb_exec *x) { return rgbc_scan_with(x, mirror_copy); }

static int mirror_bind(void *ctx, const rgb_node *n, rgb_bound *out, char *why, size_t len) {
  (void)ctx, (void)why, (void)len;
  if (n->code == RG_OP_SCAN) {
    *out = (rgb_bound){.fn = mirror_scan};
    return 0;
  }
  mirror_state *st = rg_malloc(sizeof *st);
  if (!st) return RG_ERR_NOMEM;
  st->cpu = rgb_cpu_kernels[n->code];
  *out = (rgb_bound){.fn = mirror_run, .state = st, .free_state = rg_free};
  return 0;
}

const rgb_backend rgb_mirror_backend = {
    .abi = RGB_BACKEND_ABI,
    .name = "mirror",
    .device = RG_DEVICE_MIRROR,
    .buffer_type = mirror_buffer_type,
    .supports = mirror_supports,
    .bind = mirror_bind,
    .inner_on_host = true,
    .host_input = mirror_host_input,
    /* the CPU's composite kernel makes the joined value and its parts on
     * the host; each output is uploaded (the parts, which nobody reads,
     * as copies), so the fold is tested on a device here too */
    .joins_composites = true,
};
