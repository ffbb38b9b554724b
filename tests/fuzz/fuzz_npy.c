/*
 * fuzz_npy.c — fuzz harness for the .npy reader: any byte string must give
 * a tensor or a clear error, never a crash; a tensor read must write back
 * and read again to an equal tensor.
 */
#include "fuzz_common.h"

static void check_npy(const uint8_t *data, size_t size) {
  rg_ctx *C = fuzz_ctx();
  rg_tensor *t = rg_npy_read(C, "fuzz.npy", data, size);
  if (!t) {
    if (!rg_errmsg(C)[0]) abort(); /* a failure always has a message */
    return;
  }
  void *bytes;
  size_t len;
  for (int fortran = 0; fortran < 2; fortran++) {
    if (rg_npy_write(C, t, fortran, &bytes, &len) != RG_OK) abort();
    rg_tensor *r = rg_npy_read(C, "again.npy", bytes, len);
    if (!r || !rg_tensor_equal(t, r)) abort();
    rg_tensor_free(r);
    free(bytes);
  }
  rg_tensor_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_begin();
  check_npy(data, size);
  fuzz_end();
  return 0;
}
