/*
 * wh_decoder.c — Whisper's text decoder: token embedding + learned positions, pre-LayerNorm blocks
 * (masked self-attention with a K/V cache, cross-attention over the encoder output, MLP), final
 * LayerNorm, logits tied to the token embedding (h · E^T).
 *
 * One pass computes positions [c0, n) of several sequences (streams, or beams of one stream)
 * whose rows sit one after another: one gemm per Linear over all rows, one k->attn per
 * attention over all sequences (an sr_kbatch: each sequence reads its own pool slot). Each
 * layer appends a sequence's self-attention K/V to its slot's rows c0.. and row r attends to
 * keys [0, c0 + r] (causal). Cross-attention K/V are computed once per encoder frame
 * (wh_cross_kv) and only read here.
 */
#include "whisper.h"

#include <string.h>

sr_status wh_cross_kv(const wh_model *w, wh_scratch *s, const float *enc, const wh_eseq *q,
                      const int *xslot, int n_seq, sr_kpool *xk, sr_kpool *xv)
{
    int ctx = w->n_audio_ctx, nb = 0;
    for (int i = 0; i < n_seq; i++) {
        if (q[i].n < 0 || q[i].p0 < 0 || q[i].p0 + q[i].n > ctx)
            return sr_error(SR_ERR_ARG, "whisper cross K/V: frames [%d, %d) outside the %d-frame "
                            "context", q[i].p0, q[i].p0 + q[i].n, ctx);
        if (q[i].n == 0) continue;
        sr_status st = wh_kbatch_add(s, &nb, q[i].n, xslot[i], xslot[i], q[i].p0);
        if (st) return sr_error_prefix(st, "whisper cross K/V");
    }
    int rows = s->row0[nb];
    if (!rows) return SR_OK;
    sr_kbatch b = {.n_seq = nb, .row0 = s->row0, .slot = s->slot, .pos = s->pos};
    const sr_kernels *k = w->k;
    for (int l = 0; l < w->n_text_layer; l++) {
        const wh_block *B = &w->dec[l];
        sr_status st;
        if ((st = wh_linear(k, enc, rows, B->ckv, SR_ACT_NONE, 0.0f, s->mlp)) || /* k | v */
            (st = wh_kv_put(k, xk, xv, l, &b, s->mlp, s->mlp + w->d, 2 * w->d)))
            return st;
    }
    return SR_OK;
}

sr_status wh_decode(const wh_model *w, wh_scratch *s, const wh_dseq *q, int n_seq, sr_kpool *sk,
                    sr_kpool *sv, const sr_kpool *xk, const sr_kpool *xv)
{
    int d = w->d, tctx = w->n_text_ctx, nb = 0;
    const sr_kernels *k = w->k;
    sr_status st;
    for (int i = 0; i < n_seq; i++) {
        const wh_dseq *e = &q[i];
        int c0 = e->c0, n = e->n;
        if (n - c0 <= 0) continue;
        if (c0 < 0 || n > tctx || n > sk->rows)
            return sr_error(SR_ERR_ARG, "whisper decoder: positions [%d, %d) exceed the text "
                            "context (%d) or the K/V cache (%d rows)", c0, n, tctx, sk->rows);
        if (e->enc_len <= 0 || e->enc_len > xk->rows)
            return sr_error(SR_ERR_ARG, "whisper decoder: %d encoder frames to attend to (the "
                            "cross K/V hold %d)", e->enc_len, xk->rows);
        for (int j = c0; j < n; j++)
            if (e->tok[j] < 0 || e->tok[j] >= w->n_vocab)
                return sr_error(SR_ERR_ARG, "whisper decoder: token %d at position %d outside the "
                                "vocabulary (%d)", (int)e->tok[j], j, w->n_vocab);
        int r0 = s->row0[nb];
        if ((st = wh_kbatch_add(s, &nb, n - c0, e->sslot, e->xslot, c0)))
            return sr_error_prefix(st, "whisper decoder");
        /* the self-attention's causal ranges: position c0 + r sees [0, c0 + r]; the cross
         * attention sees the enc_len frames */
        for (int r = 0; r < n - c0; r++) {
            s->lo[r0 + r] = 0;
            s->hi[r0 + r] = c0 + r + 1;
            s->hi2[r0 + r] = e->enc_len;
        }
    }
    int rows = s->row0[nb];
    if (!rows) return SR_OK;
    sr_kbatch bs = {.n_seq = nb, .row0 = s->row0, .slot = s->slot, .pos = s->pos};
    sr_kbatch bx = {.n_seq = nb, .row0 = s->row0, .slot = s->slot2, .pos = s->pos};
    float *x = s->x;
    /* embeddings + learned positions of every row of every sequence: one gather, the position
     * rows gathered by one copy_rows, one add (x + pos, the same operation per element as a
     * call per sequence: batched or alone, the same bits) */
    for (int i = 0, r = 0; i < n_seq; i++) {
        const wh_dseq *e = &q[i];
        for (int j = e->c0; j < e->n; j++, r++) {
            s->ids[r] = e->tok[j];
            s->prow[r] = w->dec_pos + (size_t)j * d;
        }
    }
    if ((st = k->gather(w->tok_emb, s->ids, rows, x, d)) ||
        (st = k->copy_rows(rows, d, s->prow, s->a, d)) ||
        (st = k->add(rows, d, s->a, d, 1.0f, x, d)))
        return st;
    st = SR_OK;
    for (int l = 0; l < w->n_text_layer && !st; l++) {
        const wh_block *B = &w->dec[l];
        if ((st = wh_layernorm(k, x, rows, d, B->attn_ln, s->h)) ||
            /* q | k | v rows [rows, 3d] into the MLP scratch ([rows, 4d], free until fc1) */
            (st = wh_linear(k, s->h, rows, B->qkv, SR_ACT_NONE, 0.0f, s->mlp)) ||
            (st = wh_kv_put(k, sk, sv, l, &bs, s->mlp + d, s->mlp + 2 * d, 3 * d)) ||
            (st = wh_attend(k, w->n_text_head, d, s->mlp, 3 * d, &bs, s->lo, s->hi, sk, sv, l, s->a)) ||
            (st = wh_linear(k, s->a, rows, B->o, SR_ACT_NONE, 1.0f, x)) ||
            (st = wh_layernorm(k, x, rows, d, B->cross_ln, s->h)) ||
            (st = wh_linear(k, s->h, rows, B->cq, SR_ACT_NONE, 0.0f, s->q)) ||
            (st = wh_attend(k, w->n_text_head, d, s->q, d, &bx, s->lo, s->hi2, xk, xv, l, s->a)) ||
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
