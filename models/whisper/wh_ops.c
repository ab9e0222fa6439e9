/*
 * wh_ops.c — the small dense operations of the Whisper backend: LayerNorm (through
 * kernels/ops.h, which also holds the GELU), Linear layers and multi-head attention. Every
 * matrix product goes through the kernel table's sgemm, batched over all rows at hand; the
 * element-wise parts are plain C loops.
 *
 *   LayerNorm   y = (x - mean) / sqrt(var + 1e-5) * g + b, mean and biased variance per row
 *               (accumulated in double)
 *   GELU        x / 2 * (1 + erf(x / sqrt 2))  (the exact form torch's F.gelu uses)
 *   attention   per head h (width dh = d / H): S = Q_h K_h^T / sqrt(dh) (openai scales q and k
 *               by dh^-1/4 each: the same product), row-wise softmax over the allowed keys
 *               [0, klim[i]), O_h = P V_h written into columns [h dh, (h+1) dh) of the output.
 */
#include "whisper.h"

#include <math.h>
#include <string.h>

void wh_layernorm(const float *x, int n, int d, wh_ln p, float *y)
{
    sr_layernorm(x, n, d, p.g, p.b, WH_LN_EPS, y);
}

sr_status wh_linear(const sr_kernels *k, const float *x, int n, int in, wh_lin L, int out,
                    float beta, float *y)
{
    if (n == 0) return SR_OK;
    sr_status st = k->sgemm(0, 1, n, out, in, 1.0f, x, in, L.w, in, beta, y, out);
    if (st) return st;
    if (L.b)
        for (int r = 0; r < n; r++) {
            float *yr = y + (size_t)r * out;
            for (int i = 0; i < out; i++) yr[i] += L.b[i];
        }
    return SR_OK;
}

sr_status wh_attention(const sr_kernels *k, int n_head, int d, const float *q, int nq,
                       const float *kk, const float *vv, int nk, const int *klim,
                       float *scores, float *out)
{
    if (nq == 0) return SR_OK;
    int dh = d / n_head;
    float scale = 1.0f / sqrtf((float)dh);
    for (int h = 0; h < n_head; h++) {
        sr_status st = k->sgemm(0, 1, nq, nk, dh, scale, q + h * dh, d, kk + h * dh, d, 0.0f,
                                scores, nk);
        if (st) return st;
        for (int i = 0; i < nq; i++) {
            int lim = klim ? klim[i] : nk;
            sr_softmax(scores + (size_t)i * nk, lim, nk);
        }
        st = k->sgemm(0, 0, nq, dh, nk, 1.0f, scores, nk, vv + h * dh, d, 0.0f, out + h * dh, d);
        if (st) return st;
    }
    return SR_OK;
}

sr_status wh_scratch_init(wh_scratch *s, const wh_model *w, int rows, int keys)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->keys = keys;
    s->d = w->d;
    size_t r = (size_t)rows, d = (size_t)w->d;
    size_t colw = 3 * (size_t)(w->n_mels > w->d ? w->n_mels : w->d);
    s->colw = (int)colw;
    s->h = sr_malloc(r * d * sizeof(float), "whisper scratch h");
    s->q = sr_malloc(r * d * sizeof(float), "whisper scratch q");
    s->a = sr_malloc(r * d * sizeof(float), "whisper scratch a");
    s->kv = sr_malloc(r * d * sizeof(float), "whisper scratch kv");
    s->mlp = sr_malloc(r * 4 * d * sizeof(float), "whisper scratch mlp");
    s->scores = sr_malloc(r * (size_t)keys * sizeof(float), "whisper scratch scores");
    /* the stem's im2col covers the mel frames of one chunk: 2 per encoder row plus the held
     * context and the end-of-signal flush */
    s->col_rows = 2 * rows + 16;
    s->col = sr_malloc((size_t)s->col_rows * colw * sizeof(float), "whisper scratch im2col");
    s->klim = sr_malloc(r * sizeof(int), "whisper scratch klim");
    if (!s->h || !s->q || !s->a || !s->kv || !s->mlp || !s->scores || !s->col || !s->klim) {
        wh_scratch_free(s);
        return SR_ERR_NOMEM;
    }
    return SR_OK;
}

void wh_scratch_free(wh_scratch *s)
{
    free(s->h);
    free(s->q);
    free(s->a);
    free(s->kv);
    free(s->mlp);
    free(s->scores);
    free(s->col);
    free(s->klim);
    memset(s, 0, sizeof *s);
}

size_t wh_scratch_bytes(const wh_scratch *s)
{
    if (!s->h) return 0;
    size_t r = (size_t)s->rows, d = (size_t)s->d;
    size_t colw = (size_t)s->colw;
    return (r * d * 4 + r * 4 * d + r * (size_t)s->keys + (size_t)s->col_rows * colw) * sizeof(float) +
           r * sizeof(int);
}
