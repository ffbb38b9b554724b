/*
 * transfer.c — the CUDA backend's copies: host to device, device to host,
 * between backend objects (streams) and devices; pinned host memory.
 *
 * Every copy is queued on the backend's stream, so it is ordered with the
 * kernels before and after it, and the host waits only where it must
 * read or reuse memory:
 *
 *  - an upload from ordinary host memory is copied into a pinned staging
 *    block and queued (cuMemcpyHtoDAsync); the call returns at once, the
 *    caller's memory free to reuse.  The staging blocks are a ring
 *    (rgcu_stage): the host waits for a block's event only when the ring
 *    comes back to it while a copy from it is still queued;
 *  - a download is queued into staging blocks, one block ahead of the
 *    host, which waits for each block's event and copies it out, so the
 *    device's copy of one block overlaps the host's copy of the previous;
 *  - memory of the pinned host buffer type (rg_backend_host_buffer_type)
 *    is copied to and from directly, then waited for;
 *  - between two CUDA backend objects (two streams, on one device or two)
 *    the copy is queued on the destination's stream after an event of the
 *    source's stream, and the source's stream waits for an event after
 *    the copy, so neither reuses memory the other still uses, and the
 *    host waits for nothing.  The same two events order a program's input
 *    written on another stream of its device (rgcu_order, from the VM).
 *
 * Without a device none of this runs; tests/test_cuda_transfers.c runs it
 * against a host implementation of the driver calls that completes queued
 * work only when something waits for it.
 */
#include "backend/cuda/cuda-impl.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* ------------------------------------------------------------------ staging */

/* Waits until block i's queued copies are done. */
static int stage_wait(rgcu_ctx *c, int i) {
  if (!c->stage.queued[i]) return 0;
  c->stage.queued[i] = false;
  return c->d.event_sync(c->stage.ev[i]) ? RG_ERR : 0;
}

/* Block i, allocated the first time the ring reaches it (a program of
 * small values uses one block). */
static int stage_block(rgcu_ctx *c, int i) {
  void **p = (void **)&c->stage.block[i];
  return *p || !c->d.host_alloc(p, RGCU_STAGE_BYTES, CU_MEMHOSTALLOC_PORTABLE) ? 0 : RG_ERR_NOMEM;
}

/* n bytes (at most a block) of staging the host may write or read now:
 * in the current block if they fit, else at the start of the next, once
 * its last copies are done.  *blk receives the block. */
static char *stage_take(rgcu_ctx *c, size_t n, int *blk) {
  rgcu_stage *s = &c->stage;
  n = (n + 255) & ~(size_t)255;
  if (s->used + n > RGCU_STAGE_BYTES) {
    s->cur = (s->cur + 1) % RGCU_STAGES;
    s->used = 0;
    if (stage_wait(c, s->cur)) return NULL;
  }
  if (stage_block(c, s->cur)) return NULL;
  char *p = s->block[s->cur] + s->used;
  s->used += n;
  *blk = s->cur;
  return p;
}

/* Records block blk's event after a copy just queued. */
static int stage_queued(rgcu_ctx *c, int blk) {
  c->stage.queued[blk] = true;
  return c->d.event_record(c->stage.ev[blk], c->stream) ? RG_ERR : 0;
}

/* ------------------------------------------------------------------ pinned host memory */

/* The pinned block handed out that holds [p, p + n), or NULL. */
static const rgcu_pin *pinned_holding(const rgcu_ctx *c, const void *p, size_t n) {
  const char *q = p;
  for (int i = 0; i < c->pinned.nlive; i++) {
    const rgcu_pin *b = &c->pinned.live[i];
    if (q >= b->p && q + n <= b->p + b->size) return b;
  }
  return NULL;
}

static void *host_alloc(const rg_buffer_type *bt, size_t n) {
  rgcu_ctx *c = bt->ctx;
  rgcu_pinned *pp = &c->pinned;
  if (pp->nlive == pp->caplive) {
    int cap = pp->caplive ? 2 * pp->caplive : 16;
    rgcu_pin *v = rg_realloc(pp->live, (size_t)cap * sizeof *v);
    if (!v) return NULL;
    pp->live = v;
    pp->caplive = cap;
  }
  size_t want = (n + 4095) & ~(size_t)4095;
  rgcu_pin got = {NULL, 0};
  for (int i = pp->nfree - 1; i >= 0 && !got.p; i--)
    if (pp->freel[i].size >= want && pp->freel[i].size <= 2 * want) {
      got = pp->freel[i];
      pp->freel[i] = pp->freel[--pp->nfree];
    }
  if (!got.p) {
    if (c->d.set_current(c->cu) || c->d.host_alloc((void **)&got.p, want, CU_MEMHOSTALLOC_PORTABLE))
      return NULL;
    got.size = want;
  }
  pp->live[pp->nlive++] = got;
  return got.p;
}

static void host_free(const rg_buffer_type *bt, void *base, size_t n) {
  (void)n;
  rgcu_ctx *c = bt->ctx;
  rgcu_pinned *pp = &c->pinned;
  for (int i = 0; i < pp->nlive; i++)
    if (pp->live[i].p == base) {
      rgcu_pin b = pp->live[i];
      pp->live[i] = pp->live[--pp->nlive];
      if (pp->nfree < RGCU_PIN_FREE_MAX) pp->freel[pp->nfree++] = b;
      else c->d.set_current(c->cu), c->d.host_free(b.p);
      return;
    }
}

/* Host memory of the host buffer type is the host's: its copies are memcpy. */
static int host_move(const rg_buffer_type *bt, void *dst, const void *src, size_t n) {
  (void)bt;
  memmove(dst, src, n);
  return 0;
}

/* ------------------------------------------------------------------ host and device */

/* Waits for everything queued on c's stream so far (the copy just queued). */
static int wait_here(rgcu_ctx *c) {
  return c->d.event_record(c->mark, c->stream) || c->d.event_sync(c->mark) ? RG_ERR : 0;
}

int rgcu_upload(const rg_buffer_type *bt, void *dst, const void *host, size_t n) {
  rgcu_ctx *c = bt->ctx;
  if (c->d.set_current(c->cu)) return RG_ERR;
  if (pinned_holding(c, host, n)) /* direct, then waited for: the caller may write it again */
    return c->d.htod_async(dptr(dst), host, n, c->stream) ? RG_ERR : wait_here(c);
  for (size_t off = 0; off < n;) {
    size_t take = n - off < RGCU_STAGE_BYTES ? n - off : RGCU_STAGE_BYTES;
    int blk;
    char *s = stage_take(c, take, &blk);
    if (!s) return RG_ERR;
    memcpy(s, (const char *)host + off, take);
    if (c->d.htod_async(dptr(dst) + off, s, take, c->stream) || stage_queued(c, blk)) return RG_ERR;
    off += take;
  }
  return 0;
}

/* One chunk of a download queued into staging. */
typedef struct chunk { char *s; int blk; size_t off, len; } chunk;

static int chunk_queue(rgcu_ctx *c, const void *src, size_t n, size_t off, chunk *k) {
  k->off = off;
  k->len = n - off < RGCU_STAGE_BYTES ? n - off : RGCU_STAGE_BYTES;
  if (!(k->s = stage_take(c, k->len, &k->blk))) return RG_ERR;
  if (c->d.dtoh_async(k->s, dptr(src) + off, k->len, c->stream)) return RG_ERR;
  return stage_queued(c, k->blk);
}

int rgcu_download(const rg_buffer_type *bt, void *host, const void *src, size_t n) {
  rgcu_ctx *c = bt->ctx;
  if (c->d.set_current(c->cu)) return RG_ERR;
  if (pinned_holding(c, host, n))
    return c->d.dtoh_async(host, dptr(src), n, c->stream) ? RG_ERR : wait_here(c);
  if (n == 0) return 0;
  chunk k[2];
  if (chunk_queue(c, src, n, 0, &k[0])) return RG_ERR;
  for (int i = 0;; i ^= 1) {
    size_t next = k[i].off + k[i].len;
    /* the next chunk goes to another block (a whole block's worth, or the last) */
    if (next < n && chunk_queue(c, src, n, next, &k[i ^ 1])) return RG_ERR;
    if (stage_wait(c, k[i].blk)) return RG_ERR;
    memcpy((char *)host + k[i].off, k[i].s, k[i].len);
    if (next >= n) return 0;
  }
}

/* ------------------------------------------------------------------ between streams */

/* Makes later's stream wait for what earlier's has queued so far. */
static int stream_after(rgcu_ctx *earlier, rgcu_ctx *later) {
  if (earlier == later) return 0;
  if (earlier->d.set_current(earlier->cu) || earlier->d.event_record(earlier->mark, earlier->stream))
    return RG_ERR;
  return later->d.set_current(later->cu) || later->d.stream_wait(later->stream, earlier->mark, 0) ? RG_ERR : 0;
}

int rgcu_order(const rg_buffer_type *earlier, const rg_buffer_type *later) {
  return stream_after(earlier->ctx, later->ctx);
}

int rgcu_copy_from(const rg_buffer_type *bt, void *dst, const rg_buffer_type *from, const void *src, size_t n) {
  if (from->copy_from != rgcu_copy_from) return RG_ERR_TYPE; /* not a CUDA device's memory */
  rgcu_ctx *to = bt->ctx, *fc = from->ctx;
  if (stream_after(fc, to) || to->d.set_current(to->cu)) return RG_ERR;
  CUresult r = to->cu == fc->cu ? to->d.dtod_async(dptr(dst), dptr(src), n, to->stream)
                                : to->d.peer_async(dptr(dst), to->cu, dptr(src), fc->cu, n, to->stream);
  if (r) return RG_ERR;
  return stream_after(to, fc); /* the source's memory is reused only after the copy */
}

/* ------------------------------------------------------------------ init and fini */

int rgcu_transfer_init(rgcu_ctx *c, char *why, size_t len) {
  CUresult r = c->d.event_create(&c->mark, CU_EVENT_DISABLE_TIMING);
  for (int i = 0; !r && i < RGCU_STAGES; i++) r = c->d.event_create(&c->stage.ev[i], CU_EVENT_DISABLE_TIMING);
  if (r) return rg_say(why, len, "CUDA events: %s", rgcu_error(&c->d, r)), RG_ERR;
  snprintf(c->host_name, sizeof c->host_name, "%s:pinned", c->name);
  c->host_buft = (rg_buffer_type){.name = c->host_name, .device = RG_DEVICE_HOST, .ctx = c,
                                  .alloc = host_alloc, .free = host_free, .download = host_move,
                                  .upload = host_move};
  return 0;
}

void rgcu_transfer_fini(rgcu_ctx *c) {
  for (int i = 0; i < RGCU_STAGES; i++) {
    if (c->stage.block[i]) c->d.host_free(c->stage.block[i]);
    if (c->stage.ev[i]) c->d.event_destroy(c->stage.ev[i]);
  }
  if (c->mark) c->d.event_destroy(c->mark);
  for (int i = 0; i < c->pinned.nfree; i++) c->d.host_free(c->pinned.freel[i].p);
  for (int i = 0; i < c->pinned.nlive; i++) c->d.host_free(c->pinned.live[i].p);
  rg_free(c->pinned.live);
}
