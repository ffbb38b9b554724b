/*
 * nvrtc.c — NVRTC's calls the CUDA backend makes, implemented on the
 * host: a "compilation" compiles the kernel's CUDA C as C++ for the host
 * (the host compiler, $CXX or c++, into a shared object) after the
 * prelude that test_cuda_emulated.c uses too (host.h), and the "device
 * code" is that shared object behind a header (rgtest_image), which
 * driver.c loads.  Its version, 0.1, keeps its code apart from real
 * NVRTC's in the on-disk cache of device code.
 */
#include "host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
enum { OK = 0, FAILED = 6 };

typedef struct prog {
  char *src;
  char *log;
  char *image;
  size_t size;
} prog;

API int nvrtcVersion(int *major, int *minor) { return *major = 0, *minor = 1, OK; }
API const char *nvrtcGetErrorString(int r) { return r ? "the host compiler failed" : "success"; }

API int nvrtcCreateProgram(prog **p, const char *src, const char *name, int nh, const char *const *h,
                           const char *const *names) {
  (void)name, (void)nh, (void)h, (void)names;
  *p = calloc(1, sizeof **p);
  (*p)->src = strdup(src);
  return OK;
}

API int nvrtcDestroyProgram(prog **p) {
  free((*p)->src);
  free((*p)->log);
  free((*p)->image);
  free(*p);
  *p = NULL;
  return OK;
}

/* The whole of a file in malloc'd memory (NUL-terminated), or NULL. */
static char *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  b[n] = 0;
  fclose(f);
  *size = (size_t)n;
  return b;
}

API int nvrtcCompileProgram(prog *p, int nopt, const char *const *opts) {
  (void)nopt, (void)opts;
  const char *tmp = getenv("TMPDIR"), *cxx = getenv("CXX");
  char dir[4096], cpp[4200], so[4200], log[4200], cmd[13000];
  snprintf(dir, sizeof dir, "%s/rgtest-nvrtc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return FAILED;
  snprintf(cpp, sizeof cpp, "%s/k.cpp", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  FILE *f = fopen(cpp, "w");
  if (!f) return FAILED;
  fprintf(f, "%s%s%s\n%s", RGTEST_PRELUDE, RGTEST_OPEN, p->src, RGTEST_EPILOGUE);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s -O1 -w -ffp-contract=off -fno-math-errno -shared -fPIC -o '%s' '%s' 2> '%s'",
           cxx && *cxx ? cxx : "c++", so, cpp, log);
  int rc = system(cmd);
  size_t n = 0;
  free(p->log);
  p->log = slurp(log, &n);
  char *code = rc == 0 ? slurp(so, &n) : NULL;
  if (code) {
    rgtest_image h = {.size = n};
    memcpy(h.magic, RGTEST_IMAGE_MAGIC, 8);
    p->size = sizeof h + n;
    p->image = malloc(p->size);
    memcpy(p->image, &h, sizeof h);
    memcpy(p->image + sizeof h, code, n);
    free(code);
  }
  unlink(cpp), unlink(so), unlink(log), rmdir(dir);
  return code ? OK : FAILED;
}

API int nvrtcGetProgramLogSize(prog *p, size_t *n) { return *n = (p->log ? strlen(p->log) : 0) + 1, OK; }
API int nvrtcGetProgramLog(prog *p, char *out) { return strcpy(out, p->log ? p->log : ""), OK; }
API int nvrtcGetCUBINSize(prog *p, size_t *n) { return p->image ? (*n = p->size, OK) : FAILED; }
API int nvrtcGetCUBIN(prog *p, char *out) { return p->image ? (memcpy(out, p->image, p->size), OK) : FAILED; }
