/*
 * nvrtc.c — NVRTC, CUDA's run-time compiler, loaded with dlopen.
 *
 * The library is found by its soname (libnvrtc.so.13, .12, then the
 * unversioned name), so relgraph needs neither the toolkit's headers nor
 * a link-time dependency: where NVRTC is missing, opening it says so and
 * everything else runs.  Only the handful of entry points used are
 * declared, with the types of NVRTC's C API (nvrtcResult is an int enum,
 * nvrtcProgram an opaque pointer).  NVRTC compiles without a GPU, which is
 * what lets the kernel test run on machines that have none.  Compiled
 * device code is also kept on disk (base/cache.c), keyed by the source,
 * the architecture, NVRTC's version and the options.
 */
#include "backend/cuda/cuda-impl.h"
#include "base/base.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The compile options beyond the architecture (part of the cache key). */
#define OPTIONS_KEY "--fmad=false"

typedef int nvres;
typedef struct nvprog_ *nvprog;

struct rgcu_nvrtc {
  void *dl;
  int major, minor;
  nvres (*version)(int *, int *);
  nvres (*create)(nvprog *, const char *, const char *, int, const char *const *, const char *const *);
  nvres (*compile)(nvprog, int, const char *const *);
  nvres (*log_size)(nvprog, size_t *);
  nvres (*log)(nvprog, char *);
  nvres (*cubin_size)(nvprog, size_t *);
  nvres (*cubin)(nvprog, char *);
  nvres (*destroy)(nvprog *);
  const char *(*error)(nvres);
};

static void *open_lib(char *why, size_t len) {
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  const char *lib;
  void *dl = rgcu_dlopen("RELGRAPH_NVRTC", names, 3, &lib);
  if (dl) return dl;
  if (why && len && lib) snprintf(why, len, "NVRTC: %s cannot be loaded", lib);
  else if (why && len) snprintf(why, len, "NVRTC is not installed (no libnvrtc.so found)");
  return NULL;
}

/* Binds every entry point; false when one is missing. */
static bool bind_all(rgcu_nvrtc *l) {
#define SYM(field, name) (*(void **)&l->field = dlsym(l->dl, name)) != NULL
  return SYM(version, "nvrtcVersion") && SYM(create, "nvrtcCreateProgram") &&
         SYM(compile, "nvrtcCompileProgram") && SYM(log_size, "nvrtcGetProgramLogSize") &&
         SYM(log, "nvrtcGetProgramLog") && SYM(cubin_size, "nvrtcGetCUBINSize") &&
         SYM(cubin, "nvrtcGetCUBIN") && SYM(destroy, "nvrtcDestroyProgram") &&
         SYM(error, "nvrtcGetErrorString");
#undef SYM
}

rgcu_nvrtc *rgcu_nvrtc_open(char *why, size_t len) {
  void *dl = open_lib(why, len);
  if (!dl) return NULL;
  rgcu_nvrtc *l = rg_calloc(1, sizeof *l);
  if (!l) {
    dlclose(dl);
    if (why && len) snprintf(why, len, "out of memory");
    return NULL;
  }
  l->dl = dl;
  if (!bind_all(l) || l->version(&l->major, &l->minor) != 0) {
    if (why && len) snprintf(why, len, "the NVRTC library found lacks an entry point relgraph uses");
    dlclose(dl);
    rg_free(l);
    return NULL;
  }
  return l;
}

/* The library stays loaded (as dlopen counts it, a later open shares
 * it): unloading it would strand the allocations of the C++ runtime it
 * brings, which leak checkers then report. */
void rgcu_nvrtc_close(rgcu_nvrtc *l) { rg_free(l); }

int rgcu_nvrtc_version(const rgcu_nvrtc *l) { return l->major * 1000 + l->minor * 10; }

/* NVRTC's log into log (truncated). */
static void copy_log(rgcu_nvrtc *l, nvprog prog, char *log, size_t loglen) {
  size_t n = 0;
  if (!log || !loglen) return;
  log[0] = 0;
  if (l->log_size(prog, &n) != 0 || n == 0) return;
  char *all = rg_malloc(n + 1);
  if (!all) return;
  if (l->log(prog, all) == 0) snprintf(log, loglen, "%s", all);
  rg_free(all);
}

int rgcu_nvrtc_compile(rgcu_nvrtc *l, const char *src, const char *arch, void **image, size_t *size,
                       char *log, size_t loglen) {
  *image = NULL;
  *size = 0;
  nvprog prog = NULL;
  nvres r = l->create(&prog, src, "rg_kernel.cu", 0, NULL, NULL);
  if (r != 0) {
    snprintf(log, loglen, "nvrtcCreateProgram: %s", l->error(r));
    return RG_ERR;
  }
  char opt_arch[64];
  snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
  /* no fused multiply-add: the CPU's loops do not contract either;
   * unused helpers are the rule (every kernel carries them all) */
  const char *opts[] = {opt_arch, OPTIONS_KEY, "--diag-suppress=177"};
  r = l->compile(prog, 3, opts);
  int rc = RG_OK;
  if (r != 0) {
    copy_log(l, prog, log, loglen);
    rc = RG_ERR;
  } else if (l->cubin_size(prog, size) != 0 || !(*image = rg_malloc(*size ? *size : 1)) ||
             l->cubin(prog, *image) != 0) {
    snprintf(log, loglen, "NVRTC gave no device code for %s", arch);
    rg_free(*image);
    *image = NULL;
    rc = RG_ERR;
  }
  l->destroy(&prog);
  return rc;
}

/* The cache entry of a kernel: its source, the architecture, NVRTC's
 * version and the options determine the device code. */
static bool entry_path(const rgcu_nvrtc *l, const char *src, const char *arch, const char *cache_dir,
                       char *path, size_t len) {
  char dir[4096], key[96];
  if (!rg_cache_dir(cache_dir, dir, sizeof dir)) return false;
  snprintf(key, sizeof key, "%s %d.%d %s", arch, l->major, l->minor, OPTIONS_KEY);
  uint64_t h = rg_fnv1a(key, rg_fnv1a(src, RG_FNV_SEED));
  return snprintf(path, len, "%s/rgcu-%016llx-%s.cubin", dir, (unsigned long long)h, arch) < (int)len;
}

int rgcu_nvrtc_compile_cached(rgcu_nvrtc *l, const char *src, const char *arch, const char *cache_dir,
                              bool reuse, void **image, size_t *size, bool *hit, char *log, size_t loglen) {
  char path[4200];
  bool cacheable = entry_path(l, src, arch, cache_dir, path, sizeof path);
  *hit = reuse && cacheable && (*image = rg_cache_read(path, size)) != NULL;
  if (*hit) return RG_OK;
  int rc = rgcu_nvrtc_compile(l, src, arch, image, size, log, loglen);
  if (rc == RG_OK && cacheable) rg_cache_write(path, *image, *size); /* best effort */
  return rc;
}
