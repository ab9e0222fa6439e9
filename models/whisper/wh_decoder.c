/*
 * wh_decoder.c — Whisper's text decoder: token embedding + learned positions, pre-LayerNorm blocks
 * (masked self-attention with a K/V cache, cross-attention over the encoder output, MLP), final
 * LayerNorm, logits tied to the token embedding (h · E^T).
 *
 * Positions [c0, n) are computed in one batch: each layer appends their self-attention K/V to
 * the cache rows c0.. and row r attends to keys [0, c0 + r] (causal). Cross-attention K/V are
 * computed once per encoder frame (wh_cross_kv) and only read here.
 */
#include "whisper.h"

#include <string.h>

sr_status wh_cross_kv(const wh_model *w, const float *enc, int n, int p0, float *xk, float *xv)
{
    int d = w->d, ctx = w->n_audio_ctx;
    if (p0 < 0 || p0 + n > ctx)
        return sr_error(SR_ERR_ARG, "whisper cross K/V: frames [%d, %d) outside the %d-frame "
                        "context", p0, p0 + n, ctx);
    for (int l = 0; l < w->n_text_layer; l++) {
        const wh_block *B = &w->dec[l];
        size_t off = (size_t)l * ctx * d + (size_t)p0 * d;
        sr_status st = wh_linear(w->k, enc, n, d, B->ck, d, 0.0f, xk + off);
        if (!st) st = wh_linear(w->k, enc, n, d, B->cv, d, 0.0f, xv + off);
        if (st) return st;
    }
    return SR_OK;
}

sr_status wh_decode(const wh_model *w, wh_scratch *s, const int32_t *tok, int c0, int n,
                    float *sk, float *sv, int kv_rows, const float *xk, const float *xv,
                    int enc_len)
{
    int d = w->d, tctx = w->n_text_ctx, actx = w->n_audio_ctx;
    int rows = n - c0;
    if (rows <= 0) return SR_OK;
    int keys = n > enc_len ? n : enc_len;
    if (c0 < 0 || n > tctx || n > kv_rows || rows > s->rows ||
        (size_t)rows * keys > (size_t)s->rows * s->keys)
        return sr_error(SR_ERR_ARG, "whisper decoder: positions [%d, %d) exceed the text context "
                        "(%d), the K/V cache (%d rows) or the scratch", c0, n, tctx, kv_rows);
    if (enc_len <= 0)
        return sr_error(SR_ERR_ARG, "whisper decoder: no encoder frames to attend to");
    float *x = s->kv;
    for (int r = 0; r < rows; r++) {
        int32_t t = tok[c0 + r];
        if (t < 0 || t >= w->n_vocab)
            return sr_error(SR_ERR_ARG, "whisper decoder: token %d at position %d outside the "
                            "vocabulary (%d)", (int)t, c0 + r, w->n_vocab);
        const float *e = w->tok_emb + (size_t)t * d, *p = w->dec_pos + (size_t)(c0 + r) * d;
        for (int i = 0; i < d; i++) x[(size_t)r * d + i] = e[i] + p[i];
        s->klim[r] = c0 + r + 1;
    }
    sr_status st = SR_OK;
    for (int l = 0; l < w->n_text_layer && !st; l++) {
        const wh_block *B = &w->dec[l];
        float *K = sk + (size_t)l * kv_rows * d, *V = sv + (size_t)l * kv_rows * d;
        const float *XK = xk + (size_t)l * actx * d, *XV = xv + (size_t)l * actx * d;
        wh_layernorm(x, rows, d, B->attn_ln, s->h);
        if ((st = wh_linear(w->k, s->h, rows, d, B->q, d, 0.0f, s->q)) ||
            (st = wh_linear(w->k, s->h, rows, d, B->k, d, 0.0f, K + (size_t)c0 * d)) ||
            (st = wh_linear(w->k, s->h, rows, d, B->v, d, 0.0f, V + (size_t)c0 * d)) ||
            (st = wh_attention(w->k, w->n_text_head, d, s->q, rows, K, V, n, s->klim, s->scores,
                               s->a)) ||
            (st = wh_linear(w->k, s->a, rows, d, B->o, d, 1.0f, x)))
            break;
        wh_layernorm(x, rows, d, B->cross_ln, s->h);
        if ((st = wh_linear(w->k, s->h, rows, d, B->cq, d, 0.0f, s->q)) ||
            (st = wh_attention(w->k, w->n_text_head, d, s->q, rows, XK, XV, enc_len, NULL,
                               s->scores, s->a)) ||
            (st = wh_linear(w->k, s->a, rows, d, B->co, d, 1.0f, x)))
            break;
        wh_layernorm(x, rows, d, B->mlp_ln, s->h);
        if ((st = wh_linear(w->k, s->h, rows, d, B->fc1, 4 * d, 0.0f, s->mlp))) break;
        sr_gelu_erf(s->mlp, (size_t)rows * 4 * d);
        st = wh_linear(w->k, s->mlp, rows, 4 * d, B->fc2, d, 1.0f, x);
    }
    if (st) return st;
    wh_layernorm(x, rows, d, w->dec_ln, s->h);
    return SR_OK;
}

sr_status wh_logits(const wh_model *w, const float *h, int rows, float *logits)
{
    if (rows <= 0) return SR_OK;
    return w->k->sgemm(0, 1, rows, w->n_vocab, w->d, 1.0f, h, w->d, w->tok_emb, w->d, 0.0f,
                       logits, w->n_vocab);
}
