/*
 * cache.c — the on-disk cache of generated code (C kernels compiled by the
 * system compiler, CUDA kernels compiled by NVRTC).
 *
 * One directory holds every entry: the one a function was compiled with
 * (rg_compile_opts.cache_dir, `relgraph run --cache-dir`), else
 * $RELGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/relgraph (an absolute path:
 * the XDG specification ignores a relative one), else
 * $HOME/.cache/relgraph, created on first use.  Entries are named by a
 * hash of everything that determines their content (the source, the
 * compiler's flags or version, the target), so an entry is never stale;
 * writers write a file of their own and rename it into place, so
 * concurrent processes never see half an entry.
 */
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t rg_fnv1a_bytes(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

uint64_t rg_fnv1a(const char *s, uint64_t h) { return rg_fnv1a_bytes(s, strlen(s), h); }

int rg_make_dirs(const char *path) {
  char dir[4096];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return errno = ENAMETOOLONG, -1;
  for (char *q = dir + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      if (mkdir(dir, 0777) && errno != EEXIST) return -1;
      *q = '/';
    }
  if (!mkdir(dir, 0777)) return 0;
  struct stat st; /* there already: usable only as a directory */
  if (errno == EEXIST && stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) errno = ENOTDIR;
  else if (errno == EEXIST) return 0;
  return -1;
}

bool rg_cache_dir(const char *chosen, char *dir, size_t len) {
  const char *env = getenv("RELGRAPH_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (chosen && *chosen) env = chosen;
  if (xdg && xdg[0] != '/') xdg = NULL; /* a relative one is ignored, as the XDG specification says */
  int k = env && *env   ? snprintf(dir, len, "%s", env)
          : xdg && *xdg ? snprintf(dir, len, "%s/relgraph", xdg)
          : home && *home ? snprintf(dir, len, "%s/.cache/relgraph", home)
                          : -1;
  if (k < 0 || (size_t)k >= len) return false;
  /* entries are written into it: a directory that is there but cannot take
   * them is as unusable as one that cannot be made */
  return rg_make_dirs(dir) == 0 && access(dir, W_OK | X_OK) == 0;
}

/* Every entry ends with a trailer: a tag, the size of what precedes it
 * and a hash of those bytes, so an entry cut short, overwritten or
 * written by something else reads as absent and is made again. */
typedef struct trailer { char tag[8]; uint64_t size, hash; } trailer;
static const char TRAILER_TAG[8] = "rgcache1";

void *rg_cache_read(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n > (long)sizeof(trailer) && fseek(f, 0, SEEK_SET) == 0 && (buf = rg_malloc((size_t)n)) &&
      fread(buf, 1, (size_t)n, f) != (size_t)n) {
    rg_free(buf);
    buf = NULL;
  }
  fclose(f);
  if (!buf) return NULL;
  size_t body = (size_t)n - sizeof(trailer);
  trailer t;
  memcpy(&t, buf + body, sizeof t);
  if (memcmp(t.tag, TRAILER_TAG, sizeof t.tag) || t.size != body || t.hash != rg_hash_bytes(buf, body, 0)) {
    rg_free(buf);
    return NULL;
  }
  *size = body;
  return buf;
}

bool rg_cache_write(const char *path, const void *data, size_t size) {
  char tmp[4300];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) return false;
  FILE *f = fopen(tmp, "wb");
  if (!f) return false;
  trailer t = {.size = size, .hash = rg_hash_bytes(data, size, 0)};
  memcpy(t.tag, TRAILER_TAG, sizeof t.tag);
  bool ok = fwrite(data, 1, size, f) == size && fwrite(&t, sizeof t, 1, f) == 1;
  ok = !fclose(f) && ok && rename(tmp, path) == 0;
  if (!ok) unlink(tmp);
  return ok;
}
