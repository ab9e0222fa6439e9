/*
 * wh_ops.c — the Whisper backend's calls of the kernel table's op set (kernels/kernels.h) and
 * its scratch. The backend never loops over activations itself: LayerNorm, Linear layers (one
 * gemm over all rows at hand, bias and GELU fused), K/V cache writes and attention are ops.
 *
 *   LayerNorm   y = (x - mean) / sqrt(var + 1e-5) * g + b, mean and biased variance per row
 *   attention   per head h (width dh = d / H): S = Q_h K_h^T / sqrt(dh) (openai scales q and k
 *               by dh^-1/4 each: the same product), softmax over each row's allowed keys
 *               [lo, hi), O_h = P V_h, read by k->attn from the cache pool where the keys lie;
 *               one call covers every sequence of an sr_kbatch (each in its own pool slot).
 */
#include "whisper.h"

#include <math.h>
#include <string.h>

sr_status wh_layernorm(const sr_kernels *k, const float *x, int n, int d, wh_ln p, float *y)
{
    return k->norm(SR_NORM_LAYER, n, d, x, d, p.g, p.b, WH_LN_EPS, NULL, 0, y, d);
}

sr_status wh_linear(const sr_kernels *k, const float *x, int n, wh_lin L, sr_act act, float beta,
                    float *y)
{
    return k->gemm(n, x, L.w->k, L.w, L.b, act, 1.0f, beta, y, L.w->n);
}

sr_status wh_kv_put(const sr_kernels *k, sr_kpool *K, sr_kpool *V, int l, const sr_kbatch *b,
                    const float *xk, const float *xv, int ldx)
{
    return k->kv_write2(K, V, l, b, xk, ldx, xv, ldx);
}

sr_status wh_attend(const sr_kernels *k, int n_head, int d, const float *q, int ldq,
                    const sr_kbatch *b, const int64_t *lo, const int64_t *hi, const sr_kpool *K,
                    const sr_kpool *V, int l, float *out)
{
    sr_kattn a = {.n_head = n_head, .n_kv_head = n_head, .head_dim = d / n_head,
                  .scale = 1.0f / sqrtf((float)(d / n_head)), .lo = lo, .hi = hi};
    return k->attn(&a, b, q, ldq, K, V, l, out, d);
}

sr_status wh_kbatch_add(wh_scratch *s, int *n_seq, int rows, int slot, int slot2, int64_t pos)
{
    int i = *n_seq;
    if (i >= s->rows || s->row0[i] + rows > s->rows)
        return sr_error(SR_ERR_ARG, "whisper: %d sequences / %d rows exceed the scratch (%d rows)",
                        i + 1, s->row0[i] + rows, s->rows);
    s->slot[i] = slot;
    s->slot2[i] = slot2;
    s->pos[i] = pos;
    s->row0[i + 1] = s->row0[i] + rows;
    *n_seq = i + 1;
    return SR_OK;
}

sr_status wh_scratch_init(wh_scratch *s, const wh_model *w, int rows, int keys)
{
    memset(s, 0, sizeof *s);
    const sr_kernels *k = w->k;
    s->k = k;
    s->rows = rows;
    s->keys = keys;
    s->d = w->d;
    size_t r = (size_t)rows, d = (size_t)w->d;
    size_t cin = (size_t)(w->n_mels > w->d ? w->n_mels : w->d);
    s->colw = (int)(3 * cin);
    s->h = k->alloc(r * d * sizeof(float));
    s->q = k->alloc(r * d * sizeof(float));
    s->a = k->alloc(r * d * sizeof(float));
    s->x = k->alloc(r * d * sizeof(float));
    s->mlp = k->alloc(r * 4 * d * sizeof(float));
    /* the stem's im2col covers the mel frames of one chunk: 2 per encoder row plus the held
     * context and the end-of-signal flush */
    s->col_rows = 2 * rows + 16;
    s->col = k->alloc((size_t)s->col_rows * (size_t)s->colw * sizeof(float));
    s->zero = k->alloc(cin * sizeof(float));
    s->cp = sr_malloc(3 * (size_t)s->col_rows * sizeof *s->cp, "whisper stem row pointers");
    s->lo = sr_malloc(r * sizeof(int64_t), "whisper scratch key ranges");
    s->hi = sr_malloc(r * sizeof(int64_t), "whisper scratch key ranges");
    s->hi2 = sr_malloc(r * sizeof(int64_t), "whisper scratch key ranges");
    s->pos = sr_malloc(r * sizeof(int64_t), "whisper scratch positions");
    s->row0 = sr_malloc((r + 1) * sizeof(int), "whisper scratch sequence rows");
    s->slot = sr_malloc(r * sizeof(int), "whisper scratch slots");
    s->slot2 = sr_malloc(r * sizeof(int), "whisper scratch slots");
    s->ids = sr_malloc(r * sizeof(int32_t), "whisper scratch token ids");
    s->prow = sr_malloc(r * sizeof *s->prow, "whisper scratch row pointers");
    if (!s->h || !s->q || !s->a || !s->x || !s->mlp || !s->col || !s->zero || !s->cp || !s->lo || !s->hi ||
        !s->hi2 || !s->pos || !s->row0 || !s->slot || !s->slot2 || !s->ids || !s->prow) {
        wh_scratch_free(s);
        return sr_error(SR_ERR_NOMEM, "whisper scratch of %d rows", rows);
    }
    k->zero(s->zero, cin * sizeof(float));
    s->row0[0] = 0;
    return SR_OK;
}

void wh_scratch_free(wh_scratch *s)
{
    if (s->k) {
        s->k->free(s->h);
        s->k->free(s->q);
        s->k->free(s->a);
        s->k->free(s->x);
        s->k->free(s->mlp);
        s->k->free(s->col);
        s->k->free(s->zero);
    }
    free(s->cp);
    free(s->lo);
    free(s->hi);
    free(s->hi2);
    free(s->pos);
    free(s->row0);
    free(s->slot);
    free(s->slot2);
    free(s->ids);
    free(s->prow);
    memset(s, 0, sizeof *s);
}

size_t wh_scratch_bytes(const wh_scratch *s)
{
    if (!s->h) return 0;
    size_t r = (size_t)s->rows, d = (size_t)s->d;
    size_t colw = (size_t)s->colw;
    return (r * d * 4 + r * 4 * d + (size_t)s->col_rows * colw + colw) * sizeof(float) +
           4 * r * sizeof(int64_t) + (3 * r + 1) * sizeof(int) + r * sizeof(int32_t) +
           (r + 3 * (size_t)s->col_rows) * sizeof(const float *);
}
