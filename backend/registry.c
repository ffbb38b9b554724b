/*
 * registry.c — the backends compiled in, backend objects, transfers.
 *
 * Every backend is an rgb_backend interface (see backend-impl.h); the CPU
 * backend is always present and is the reference for every op.  A backend
 * object (rg_backend) pairs an interface with the context its init made;
 * the CPU's needs none, so one constant object serves every program.
 */
#include "backend/backend-impl.h"
#include "base/base.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

const rgb_backend *const rgb_backends[] = {
    &rgb_cpu_backend,
    &rgb_mirror_backend,
#ifndef RG_NO_CUDA
    &rgb_cuda_backend,
#endif
    NULL,
};

const rg_backend rgb_cpu = {.iface = &rgb_cpu_backend, .device = RG_DEVICE_HOST, .name = "cpu"};

/* "cuda:1" names the backend "cuda". */
const rgb_backend *rgb_backend_find(const char *name) {
  size_t n = strcspn(name, ":");
  for (int i = 0; rgb_backends[i]; i++)
    if (strlen(rgb_backends[i]->name) == n && !strncmp(rgb_backends[i]->name, name, n))
      return rgb_backends[i];
  return NULL;
}

int rg_backend_count(void) {
  int n = 0;
  while (rgb_backends[n]) n++;
  return n;
}

const char *rg_backend_name(int i) {
  return i >= 0 && i < rg_backend_count() ? rgb_backends[i]->name : NULL;
}

int rgb_device_ordinal(const char *name, int *ordinal) {
  const char *colon = strchr(name, ':');
  *ordinal = 0;
  if (!colon) return 0;
  char *end;
  long k = strtol(colon + 1, &end, 10);
  if (colon[1] < '0' || colon[1] > '9' || *end || k > 1023) return RG_ERR_SYNTAX;
  *ordinal = (int)k;
  return 0;
}

bool rg_backend_name_valid(const char *name, char *why, size_t len) {
  const rgb_backend *b = name ? rgb_backend_find(name) : NULL;
  if (!b) return rg_say(why, len, "no backend named '%s' in this build", name ? name : "(null)");
  if (strchr(name, ':') && !b->init) return rg_say(why, len, "backend %s has no devices to number", b->name);
  int ordinal;
  if (rgb_device_ordinal(name, &ordinal))
    return rg_say(why, len, "bad device in '%s' (%s or %s:N, N a device number)", name, b->name, b->name);
  return true;
}

bool rg_backend_available(const char *name, char *why, size_t len) {
  if (!rg_backend_name_valid(name, why, len)) return false;
  const rgb_backend *b = rgb_backend_find(name);
  if (b->abi != RGB_BACKEND_ABI)
    return rg_say(why, len, "backend %s has interface version %u, not %u", b->name, b->abi, RGB_BACKEND_ABI);
  int ordinal;
  rgb_device_ordinal(name, &ordinal);
  return !b->available || b->available(ordinal, why, len);
}

/* ------------------------------------------------------------------ objects */

rg_backend *rg_backend_new(const char *name, char *why, size_t len) {
  if (!rg_backend_available(name, why, len)) return NULL;
  const rgb_backend *i = rgb_backend_find(name);
  rg_backend *b = rg_calloc(1, sizeof *b);
  if (!b) return rg_say(why, len, "out of memory"), NULL;
  b->iface = i;
  b->device = i->device;
  if (i->init && i->init(name, &b->ctx, &b->device, why, len)) {
    rg_free(b);
    return NULL;
  }
  b->buft = i->buffer_type ? i->buffer_type(b->ctx) : NULL;
  b->host_buft = i->host_buffer_type ? i->host_buffer_type(b->ctx) : NULL;
  /* a device's backend is named by its device ("cuda" makes "cuda:0"), as
   * the cells of a dump are */
  if (b->device != RG_DEVICE_HOST) rg_device_str(b->device, b->name, sizeof b->name);
  else snprintf(b->name, sizeof b->name, "%s", name);
  return b;
}

void rg_backend_free(rg_backend *b) {
  if (!b || b == &rgb_cpu) return;
  if (b->iface->fini) b->iface->fini(b->ctx);
  rg_free(b);
}

const char *rg_backend_label(const rg_backend *b) { return b->name; }
rg_device rg_backend_device(const rg_backend *b) { return b->device; }
const rg_buffer_type *rg_backend_buffer_type(const rg_backend *b) { return b->buft; }
const rg_buffer_type *rg_backend_host_buffer_type(const rg_backend *b) { return b->host_buft; }

int rg_backend_synchronize(rg_backend *b) {
  return b->iface->synchronize ? b->iface->synchronize(b->ctx) : RG_OK;
}

/* ------------------------------------------------------------------ transfers */

int rgb_transfer_kernel(rgb_exec *x) {
  const rg_buffer_type *to = x->state;
  rg_tensor *r = rg_tensor_to_device(rgb_in(x, 0), to);
  if (!r) return rgb_error(x, RG_ERR_NOMEM, "cannot copy a value to %s", to ? to->name : "host memory");
  rgb_set_output(x, 0, r);
  return 0;
}
