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

sr_status wh_cross_kv(const wh_model *w, wh_scratch *s, const float *enc, int n, int p0,
                      sr_kpool *xk, sr_kpool *xv, int xslot)
{
    int ctx = w->n_audio_ctx;
    if (p0 < 0 || p0 + n > ctx)
        return sr_error(SR_ERR_ARG, "whisper cross K/V: frames [%d, %d) outside the %d-frame "
                        "context", p0, p0 + n, ctx);
    if (n > s->rows)
        return sr_error(SR_ERR_ARG, "whisper cross K/V: %d frames exceed the scratch (%d rows)",
                        n, s->rows);
    const sr_kernels *k = w->k;
    for (int l = 0; l < w->n_text_layer; l++) {
        const wh_block *B = &w->dec[l];
        sr_status st;
        if ((st = wh_linear(k, enc, n, B->ck, SR_ACT_NONE, 0.0f, s->kv)) ||
            (st = wh_kv_put(k, xk, l, xslot, p0, s->kv, n)) ||
            (st = wh_linear(k, enc, n, B->cv, SR_ACT_NONE, 0.0f, s->kv)) ||
            (st = wh_kv_put(k, xv, l, xslot, p0, s->kv, n)))
            return st;
    }
    return SR_OK;
}

sr_status wh_decode(const wh_model *w, wh_scratch *s, const int32_t *tok, int c0, int n,
                    sr_kpool *sk, sr_kpool *sv, int sslot, const sr_kpool *xk,
                    const sr_kpool *xv, int xslot, int enc_len)
{
    int d = w->d, tctx = w->n_text_ctx;
    int rows = n - c0;
    if (rows <= 0) return SR_OK;
    if (c0 < 0 || n > tctx || n > sk->rows || rows > s->rows || enc_len > xk->rows)
        return sr_error(SR_ERR_ARG, "whisper decoder: positions [%d, %d) exceed the text context "
                        "(%d), the K/V cache (%d rows) or the scratch", c0, n, tctx, sk->rows);
    if (enc_len <= 0)
        return sr_error(SR_ERR_ARG, "whisper decoder: no encoder frames to attend to");
    const sr_kernels *k = w->k;
    float *x = s->kv;
    for (int r = 0; r < rows; r++) {
        int32_t t = tok[c0 + r];
        if (t < 0 || t >= w->n_vocab)
            return sr_error(SR_ERR_ARG, "whisper decoder: token %d at position %d outside the "
                            "vocabulary (%d)", (int)t, c0 + r, w->n_vocab);
    }
    /* the self-attention's causal ranges: position c0 + r sees [0, c0 + r] */
    int *klim = s->klim;
    for (int r = 0; r < rows; r++) klim[r] = c0 + r + 1;
    sr_status st;
    if ((st = k->gather(w->tok_emb, tok + c0, rows, x, d)) ||
        (st = k->add(rows, d, w->dec_pos + (size_t)c0 * d, d, 1.0f, x, d)))
        return st;
    for (int l = 0; l < w->n_text_layer && !st; l++) {
        const wh_block *B = &w->dec[l];
        if ((st = wh_layernorm(k, x, rows, d, B->attn_ln, s->h)) ||
            (st = wh_linear(k, s->h, rows, B->q, SR_ACT_NONE, 0.0f, s->q)) ||
            (st = wh_linear(k, s->h, rows, B->k, SR_ACT_NONE, 0.0f, s->a)) ||
            (st = wh_kv_put(k, sk, l, sslot, c0, s->a, rows)) ||
            (st = wh_linear(k, s->h, rows, B->v, SR_ACT_NONE, 0.0f, s->a)) ||
            (st = wh_kv_put(k, sv, l, sslot, c0, s->a, rows)) ||
            (st = wh_attend(k, s, w->n_text_head, d, s->q, rows, c0, sk, sv, l, sslot, n, klim,
                            s->a)) ||
            (st = wh_linear(k, s->a, rows, B->o, SR_ACT_NONE, 1.0f, x)) ||
            (st = wh_layernorm(k, x, rows, d, B->cross_ln, s->h)) ||
            (st = wh_linear(k, s->h, rows, B->cq, SR_ACT_NONE, 0.0f, s->q)) ||
            (st = wh_attend(k, s, w->n_text_head, d, s->q, rows, 0, xk, xv, l, xslot, enc_len,
                            NULL, s->a)) ||
            (st = wh_linear(k, s->a, rows, B->co, SR_ACT_NONE, 1.0f, x)) ||
            (st = wh_layernorm(k, x, rows, d, B->mlp_ln, s->h)) ||
            (st = wh_linear(k, s->h, rows, B->fc1, SR_ACT_GELU, 0.0f, s->mlp)))
            break;
        st = wh_linear(k, s->mlp, rows, B->fc2, SR_ACT_NONE, 1.0f, x);
    }
    if (st) return st;
    return wh_layernorm(k, x, rows, d, w->dec_ln, s->h);
}

sr_status wh_logits(const wh_model *w, const float *h, int rows, float *logits)
{
    return w->k->gemm(rows, h, w->d, w->tok_emb, NULL, SR_ACT_NONE, 1.0f, 0.0f, logits,
                      w->n_vocab);
}
