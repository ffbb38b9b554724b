/*
 * npy.c — reading and writing NumPy .npy files.
 *
 * Layout: the magic "\x93NUMPY", a major and minor version byte, the
 * header length (2 bytes little-endian in version 1, 4 bytes in versions 2
 * and 3), the header — a Python dict literal with exactly the keys 'descr',
 * 'fortran_order' and 'shape', padded with spaces and a final newline so
 * the data starts at a multiple of 64 — then the raw elements.
 *
 * The reader checks everything before trusting it: the magic and version,
 * a header length below NPY_MAX_HEADER (as NumPy's max_header_size), a
 * well-formed dict (a small literal parser, no evaluation), a supported
 * dtype, a shape whose element count and byte size do not overflow, and a
 * data section of exactly the right size.  Big-endian data is swapped;
 * Fortran-order data becomes a tensor with Fortran strides over the same
 * bytes.  Every failure names the file and the problem.
 */
#include "core/core-impl.h"

#include <errno.h>
#include <stdlib.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.c assumes a little-endian host");

#define NPY_MAX_HEADER 10000

typedef struct npy_header {
  rg_dtype dtype;
  bool swap;      /* data is big-endian */
  bool fortran;
  int ndim;
  int64_t shape[RG_MAX_NDIM];
} npy_header;

/* A cursor over the header text, for the literal parser. */
typedef struct cursor {
  const char *s, *end;
  const char *name;
  rg_ctx *C;
} cursor;

static int npy_error(rg_ctx *C, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int npy_error(rg_ctx *C, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = rgk_vsprintf(fmt, ap);
  va_end(ap);
  return rg_error(C, RG_ERR_SYNTAX, "%s: %s", name, msg);
}

static void skip_ws(cursor *c) {
  while (c->s < c->end && (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r')) c->s++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->s < c->end && *c->s == ch) {
    c->s++;
    return true;
  }
  return false;
}

/* A quoted string into buf (at most cap - 1 characters). */
static bool parse_string(cursor *c, char *buf, size_t cap) {
  skip_ws(c);
  if (c->s >= c->end || (*c->s != '\'' && *c->s != '"')) return false;
  char q = *c->s++;
  size_t n = 0;
  while (c->s < c->end && *c->s != q) {
    if (n + 1 >= cap) return false;
    buf[n++] = *c->s++;
  }
  if (c->s >= c->end) return false;
  c->s++;
  buf[n] = 0;
  return true;
}

static bool parse_word(cursor *c, const char *w) {
  skip_ws(c);
  size_t n = strlen(w);
  if ((size_t)(c->end - c->s) < n || memcmp(c->s, w, n)) return false;
  c->s += n;
  return true;
}

static bool parse_int(cursor *c, int64_t *v) {
  skip_ws(c);
  int64_t x = 0;
  const char *start = c->s;
  while (c->s < c->end && *c->s >= '0' && *c->s <= '9') {
    if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *c->s - '0', &x)) return false;
    c->s++;
  }
  if (c->s < c->end && *c->s == 'L') c->s++; /* Python 2 longs */
  *v = x;
  return c->s > start;
}

/* (), (n,), (n, m), (n, m,) */
static int parse_shape(cursor *c, npy_header *h) {
  if (!eat(c, '(')) return npy_error(c->C, c->name, "'shape' is not a tuple");
  h->ndim = 0;
  while (!eat(c, ')')) {
    if (h->ndim == RG_MAX_NDIM)
      return npy_error(c->C, c->name, "more than %d dimensions", RG_MAX_NDIM);
    if (!parse_int(c, &h->shape[h->ndim]))
      return npy_error(c->C, c->name, "'shape' must hold non-negative integers");
    h->ndim++;
    if (!eat(c, ',')) {
      if (!eat(c, ')')) return npy_error(c->C, c->name, "malformed 'shape' tuple");
      break;
    }
  }
  return RG_OK;
}

static const struct { char kind; int size; rg_dtype dt; } descrs[] = {
    {'b', 1, RG_BOOL},  {'?', 1, RG_BOOL},  {'i', 1, RG_INT8},    {'i', 2, RG_INT16},
    {'i', 4, RG_INT32}, {'i', 8, RG_INT64}, {'u', 1, RG_UINT8},   {'f', 4, RG_FLOAT32},
    {'f', 8, RG_FLOAT64},
};

static int parse_descr(cursor *c, npy_header *h) {
  char d[64];
  skip_ws(c);
  if (c->s < c->end && *c->s == '[')
    return npy_error(c->C, c->name, "structured dtypes are not supported");
  if (!parse_string(c, d, sizeof d)) return npy_error(c->C, c->name, "'descr' is not a string");
  char order = d[0];
  const char *k = d;
  if (order == '<' || order == '>' || order == '|' || order == '=') k++;
  char *end;
  long size = k[0] ? strtol(k + 1, &end, 10) : 0;
  if (k[0] == '?' && !k[1]) size = 1, end = (char *)k + 1;
  for (size_t i = 0; k[0] && i < sizeof descrs / sizeof descrs[0]; i++) {
    if (descrs[i].kind != k[0] || descrs[i].size != size || *end) continue;
    h->dtype = descrs[i].dt;
    h->swap = order == '>' && size > 1;
    return RG_OK;
  }
  return npy_error(c->C, c->name, "unsupported dtype '%s' (supported: bool, int8, int16, "
                   "int32, int64, uint8, float32, float64)", d);
}

static int parse_dict(cursor *c, npy_header *h) {
  bool seen[3] = {false, false, false};
  if (!eat(c, '{')) return npy_error(c->C, c->name, "the header is not a dict");
  while (!eat(c, '}')) {
    char key[32];
    if (!parse_string(c, key, sizeof key)) return npy_error(c->C, c->name, "malformed header dict");
    if (!eat(c, ':')) return npy_error(c->C, c->name, "malformed header dict (missing ':')");
    int rc;
    if (!strcmp(key, "descr") && !seen[0]) {
      rc = parse_descr(c, h);
      seen[0] = true;
    } else if (!strcmp(key, "fortran_order") && !seen[1]) {
      h->fortran = parse_word(c, "True");
      rc = h->fortran || parse_word(c, "False") ? RG_OK
           : npy_error(c->C, c->name, "'fortran_order' must be True or False");
      seen[1] = true;
    } else if (!strcmp(key, "shape") && !seen[2]) {
      rc = parse_shape(c, h);
      seen[2] = true;
    } else {
      rc = npy_error(c->C, c->name, "unexpected or repeated header key '%s'", key);
    }
    if (rc) return rc;
    if (!eat(c, ',')) {
      if (!eat(c, '}')) return npy_error(c->C, c->name, "malformed header dict (missing ',')");
      break;
    }
  }
  if (!seen[0] || !seen[1] || !seen[2])
    return npy_error(c->C, c->name, "the header lacks '%s'",
                     !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");
  return RG_OK;
}

/* Magic, version and header bounds: sets *hdr, *hlen and *data_off. */
static int parse_preamble(rg_ctx *C, const char *name, const uint8_t *b, size_t len,
                          const char **hdr, size_t *hlen, size_t *data_off) {
  if (len < 10 || memcmp(b, "\x93NUMPY", 6))
    return npy_error(C, name, "not a .npy file (bad magic)");
  int major = b[6];
  size_t pre;
  if (major == 1) {
    *hlen = (size_t)b[8] | (size_t)b[9] << 8;
    pre = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return npy_error(C, name, "truncated header");
    *hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    pre = 12;
  } else {
    return npy_error(C, name, "unsupported .npy format version %d.%d", major, b[7]);
  }
  if (*hlen > NPY_MAX_HEADER)
    return rg_error(C, RG_ERR_LIMIT, "%s: header of %zu bytes exceeds the limit of %d bytes",
                    name, *hlen, NPY_MAX_HEADER);
  if (pre + *hlen > len) return npy_error(C, name, "truncated header");
  *hdr = (const char *)b + pre;
  *data_off = pre + *hlen;
  return RG_OK;
}

static void swap_bytes(char *p, size_t n, size_t es) {
  for (size_t i = 0; i < n; i += es)
    for (size_t a = 0, z = es - 1; a < z; a++, z--) {
      char t = p[i + a];
      p[i + a] = p[i + z];
      p[i + z] = t;
    }
}

/* Fortran order: the same bytes, strides growing left to right. */
static rg_tensor *as_fortran(rg_tensor *t) {
  int64_t strides[RG_MAX_NDIM], s = (int64_t)rg_dtype_size(t->dtype);
  for (int i = 0; i < t->ndim; i++) {
    strides[i] = s;
    s *= t->shape[i] ? t->shape[i] : 1;
  }
  rg_tensor *f = rg_tensor_view(t, t->ndim, t->shape, strides, 0);
  rg_tensor_free(t);
  return f;
}

rg_tensor *rg_npy_read(rg_ctx *C, const char *name, const void *bytes, size_t len) {
  const char *hdr = NULL;
  size_t hlen = 0, off = 0;
  name = name ? name : "<npy>";
  if (parse_preamble(C, name, bytes, len, &hdr, &hlen, &off)) return NULL;
  npy_header h = {0};
  cursor c = {hdr, hdr + hlen, name, C};
  if (parse_dict(&c, &h)) return NULL;
  /* the product of the non-zero sizes must fit, even for an empty array */
  int64_t span = (int64_t)rg_dtype_size(h.dtype), nbytes;
  bool empty = false, big = false;
  for (int i = 0; i < h.ndim; i++) {
    if (h.shape[i] == 0) empty = true;
    else big = big || __builtin_mul_overflow(span, h.shape[i], &span) || span > INT64_MAX / 2;
  }
  if (big) {
    rg_error(C, RG_ERR_LIMIT, "%s: the shape %s is too large", name, rgc_shape_str(h.ndim, h.shape));
    return NULL;
  }
  nbytes = empty ? 0 : span;
  size_t have = len - off;
  if ((uint64_t)nbytes > have) {
    npy_error(C, name, "truncated data: %lld bytes expected, %zu present", (long long)nbytes, have);
    return NULL;
  }
  if ((uint64_t)nbytes < have) {
    npy_error(C, name, "%zu bytes of trailing garbage after the data", have - (size_t)nbytes);
    return NULL;
  }
  rg_tensor *t = rg_tensor_from_data(h.dtype, h.ndim, h.shape, (const char *)bytes + off);
  if (!t) {
    rg_error(C, RG_ERR_NOMEM, "%s: out of memory for %lld bytes", name, (long long)nbytes);
    return NULL;
  }
  if (h.swap) swap_bytes(t->data, (size_t)nbytes, rg_dtype_size(h.dtype));
  if (h.dtype == RG_BOOL)
    for (int64_t i = 0; i < nbytes; i++) t->data[i] = t->data[i] != 0;
  return h.fortran && h.ndim > 1 ? as_fortran(t) : t;
}

/* ------------------------------------------------------------------ files */

static char *read_file(rg_ctx *C, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    rg_error(C, RG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 65536;
      char *nb = rg_realloc(buf, cap);
      if (!nb) {
        rg_free(buf);
        fclose(f);
        rg_error(C, RG_ERR_NOMEM, "%s: out of memory reading the file", path);
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
    if (n >= 6 && memcmp(buf, "\x93NUMPY", 6)) break; /* not .npy: read no further (/dev/zero) */
  }
  bool bad = ferror(f);
  int err = errno;
  fclose(f);
  if (bad) {
    rg_free(buf);
    rg_error(C, RG_ERR_IO, "%s: cannot read: %s", path, strerror(err)); /* a directory, ... */
    return NULL;
  }
  *len = n;
  return buf;
}

rg_tensor *rg_npy_load(rg_ctx *C, const char *path) {
  size_t len;
  char *buf = read_file(C, path, &len);
  if (!buf) return NULL;
  rg_tensor *t = rg_npy_read(C, path, buf, len);
  rg_free(buf);
  return t;
}

/* ------------------------------------------------------------------ writing */

static const char *descr_of(rg_dtype dt) {
  static const char *const d[RG_NDTYPES] = {"|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<f4", "<f8"};
  return d[dt];
}

/* The padded header text (dict and newline) for t. */
static char *header_text(const rg_tensor *t, bool fortran, size_t *hlen, int *version) {
  char *shape = rgk_strdup("(");
  for (int i = 0; i < t->ndim; i++)
    shape = rgk_sprintf("%s%lld%s", shape, (long long)t->shape[i],
                        t->ndim == 1 ? "," : i + 1 < t->ndim ? ", " : "");
  char *dict = rgk_sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s), }", descr_of(t->dtype),
                           fortran ? "True" : "False", shape);
  size_t n = strlen(dict);
  *version = n + 11 > 65535 ? 2 : 1;
  size_t pre = *version == 1 ? 10 : 12;
  size_t total = (pre + n + 1 + 63) & ~(size_t)63;
  *hlen = total - pre;
  char *h = rgk_alloc_atomic(*hlen + 1);
  memcpy(h, dict, n);
  memset(h + n, ' ', *hlen - n - 1);
  h[*hlen - 1] = '\n';
  h[*hlen] = 0;
  return h;
}

int rg_npy_write(rg_ctx *C, const rg_tensor *t, bool fortran, void **out, size_t *len) {
  if (!t) return rg_error(C, RG_ERR_TYPE, "npy: no tensor to write");
  fortran = fortran && t->ndim > 1;
  size_t hlen;
  int version;
  char *hdr = header_text(t, fortran, &hlen, &version);
  rg_tensor *c;
  if (fortran) {
    int perm[RG_MAX_NDIM];
    for (int i = 0; i < t->ndim; i++) perm[i] = t->ndim - 1 - i;
    rg_tensor *rev = rg_tensor_permute(t, perm);
    c = rev ? rg_tensor_to_host(rev) : NULL;
    rg_tensor_free(rev);
  } else {
    c = rg_tensor_to_host(t); /* a C-order copy, from any device */
  }
  size_t pre = version == 1 ? 10 : 12;
  size_t nbytes = c ? (size_t)rg_tensor_numel(c) * rg_dtype_size(c->dtype) : 0;
  uint8_t *buf = c ? rg_malloc(pre + hlen + nbytes) : NULL;
  if (!buf) {
    rg_tensor_free(c);
    return rg_error(C, RG_ERR_NOMEM, "npy: out of memory");
  }
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)version;
  buf[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(hlen >> (8 * i));
  memcpy(buf + pre, hdr, hlen);
  memcpy(buf + pre + hlen, c->data, nbytes);
  rg_tensor_free(c);
  *out = buf;
  *len = pre + hlen + nbytes;
  return RG_OK;
}

int rg_npy_save(rg_ctx *C, const char *path, const rg_tensor *t, bool fortran) {
  void *buf;
  size_t len;
  int rc = rg_npy_write(C, t, fortran, &buf, &len);
  if (rc) return rc;
  FILE *f = fopen(path, "wb");
  if (!f) {
    rg_free(buf);
    return rg_error(C, RG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  }
  bool ok = fwrite(buf, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  rg_free(buf);
  return ok ? RG_OK : rg_error(C, RG_ERR_IO, "%s: write error", path);
}
