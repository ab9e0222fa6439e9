/*
 * pool.c — cache pools (sr_kpool, kernels/kernels.h): one block of table memory per cache kind,
 * [layers][slots][rows][width], made and cleared through the table so the same code serves
 * every device. Streams hold slot ids into a pool; opening and closing streams clears and
 * reuses slots, never reallocates.
 */
#include "../core/internal.h"
#include "kernels.h"

#include <stdatomic.h>

/* Bytes of the pools held on device tables (those that count their memory: sr_kernels.mem),
 * for the memory report's split of a device's bytes into weights / pools / scratch. */
static atomic_size_t device_pool_bytes;

size_t sr_kpool_device_bytes(void) { return atomic_load(&device_pool_bytes); }

sr_status sr_kpool_create(const sr_kernels *k, sr_dtype dtype, int layers, int slots, int rows,
                          int width, sr_kpool **out)
{
    *out = NULL;
    if (dtype != SR_F32 && dtype != SR_F16 && dtype != SR_BF16)
        return sr_error(SR_ERR_ARG, "cache pool: element type %s (f32, f16 or bf16)",
                        sr_dtype_name(dtype));
    if (layers < 1 || slots < 1 || rows < 1 || width < 1)
        return sr_error(SR_ERR_ARG, "cache pool: layers %d, slots %d, rows %d, width %d (each >= 1)",
                        layers, slots, rows, width);
    size_t es = sr_dtype_size(dtype), n = (size_t)layers * (size_t)slots;
    if (n > SIZE_MAX / (size_t)rows || n * (size_t)rows > SIZE_MAX / (size_t)width / es)
        return sr_error(SR_ERR_ARG, "cache pool: %d x %d x %d x %d elements overflow", layers,
                        slots, rows, width);
    size_t bytes = n * (size_t)rows * (size_t)width * es;
    sr_kpool *p = sr_calloc(1, sizeof *p, "cache pool");
    if (!p) return SR_ERR_NOMEM;
    p->data = k->alloc(bytes);
    if (!p->data) {
        free(p);
        return sr_error(SR_ERR_NOMEM, "cache pool: %zu bytes of %s memory", bytes, k->name);
    }
    p->dtype = dtype;
    p->layers = layers;
    p->slots = slots;
    p->rows = rows;
    p->width = width;
    p->bytes = bytes;
    k->zero(p->data, bytes);
    if (k->mem) atomic_fetch_add(&device_pool_bytes, bytes);
    *out = p;
    return SR_OK;
}

void sr_kpool_free(const sr_kernels *k, sr_kpool *p)
{
    if (!p) return;
    if (k->mem) atomic_fetch_sub(&device_pool_bytes, p->bytes);
    k->free(p->data);
    free(p);
}

sr_status sr_kpool_clear(const sr_kernels *k, sr_kpool *p, int slot)
{
    if (!p || slot < 0 || slot >= p->slots)
        return sr_error(SR_ERR_ARG, "cache pool: slot %d out of range (%d slots)", slot,
                        p ? p->slots : 0);
    size_t es = sr_dtype_size(p->dtype), one = (size_t)p->rows * (size_t)p->width * es;
    for (int l = 0; l < p->layers; l++)
        k->zero((char *)p->data + sr_kpool_at(p, l, slot, 0) * es, one);
    return SR_OK;
}

sr_status sr_kpool_copy_rows(const sr_kernels *k, sr_kpool *dst, int dst_slot, const sr_kpool *src,
                             int src_slot, int rows)
{
    if (!dst || !src || dst_slot < 0 || dst_slot >= dst->slots || src_slot < 0 ||
        src_slot >= src->slots)
        return sr_error(SR_ERR_ARG, "cache pool copy: %s", !dst || !src ? "pool is NULL" :
                        "slot out of range");
    if (dst->dtype != src->dtype || dst->layers != src->layers || dst->width != src->width ||
        rows < 0 || rows > dst->rows || rows > src->rows)
        return sr_error(SR_ERR_ARG, "cache pool copy: %d rows of a [%d][%d][%d] %s pool into a "
                        "[%d][%d][%d] %s one", rows, src->layers, src->rows, src->width,
                        sr_dtype_name(src->dtype), dst->layers, dst->rows, dst->width,
                        sr_dtype_name(dst->dtype));
    size_t es = sr_dtype_size(src->dtype), bytes = (size_t)rows * (size_t)src->width * es;
    /* whole 4-byte words, and every slot of both pools starting on one */
    if (bytes % sizeof(float) || bytes / sizeof(float) > INT32_MAX ||
        (size_t)src->rows * src->width * es % sizeof(float) ||
        (size_t)dst->rows * dst->width * es % sizeof(float))
        return sr_error(SR_ERR_ARG, "cache pool copy: %zu bytes a layer, or a slot of %d or %d "
                        "rows, not whole 4-byte words (of at most 2^31)", bytes, src->rows,
                        dst->rows);
    if (!bytes) return SR_OK;
    /* a layer's rows are contiguous, the layers a pool's layer stride apart: one copy2d of a
     * row of bytes / 4 words per layer, or of all layers at once when the strides (in words)
     * fit its int arguments (a device copies it as one 2-D copy) */
    const int d = (int)(bytes / sizeof(float));
    const size_t ls = (size_t)src->slots * src->rows * src->width * es / sizeof(float),
                 ld = (size_t)dst->slots * dst->rows * dst->width * es / sizeof(float);
    const float *s0 = (const float *)((const char *)src->data + sr_kpool_at(src, 0, src_slot, 0) * es);
    float *d0 = (float *)((char *)dst->data + sr_kpool_at(dst, 0, dst_slot, 0) * es);
    if (ls <= INT32_MAX && ld <= INT32_MAX)
        return k->copy2d(src->layers, d, s0, (int)ls, d0, (int)ld);
    sr_status st = SR_OK;
    for (int l = 0; l < src->layers && !st; l++)
        st = k->copy2d(1, d, s0 + (size_t)l * ls, d, d0 + (size_t)l * ld, d);
    return st;
}
