/*
 * wh_encoder.c — Whisper's audio encoder: the convolutional stem (whole-signal and streaming) and
 * the pre-LayerNorm transformer blocks with a per-layer K/V cache.
 *
 *   stem     conv1 (kernel 3, padding 1) + GELU, then conv2 (kernel 3, stride 2, padding 1) +
 *            GELU, each as one GEMM over an im2col matrix: out[u] = W · [in[s u - 1], in[s u],
 *            in[s u + 1]] + b with zero rows outside the signal. L mel frames give ceil(L / 2)
 *            encoder frames.
 *   block    x += Attn(LN(x)); x += MLP(LN(x)), MLP = Linear(4d) -> GELU -> Linear(d);
 *            after the last block ln_post.
 *
 * Streaming stem: conv1 output t reads mel t + 1 and conv2 output u reads conv1 2u + 1, so each
 * conv holds back its newest input until the right neighbour arrives (or, at the end of the
 * signal, uses the zero padding the whole-signal stem uses). The held rows are the only state:
 * at most two mel frames and two conv1 rows.
 *
 * Cached encoder: new frames at positions p0.. compute Q/K/V for themselves only, write K and
 * V into the layer's cache pool and attend over [0, p0 + n) (or a per-row limit, which the
 * one-pass block-causal reference of the tests uses). One pass covers the new frames of several
 * streams (an sr_kbatch, each stream in its own pool slot): one gemm per Linear over all rows,
 * one k->attn per layer. Every step is an op of the kernel table.
 */
#include "whisper.h"

#include <string.h>

/* Output rows [o0, o1) of a kernel-3, padding-1 conv with the given stride over input rows held
 * in `in` (absolute rows [in_base, in_base + held)); rows < 0 or >= total are zero (total < 0:
 * not known yet, the caller guarantees every read row is held). GELU applied. The input matrix
 * (each output row's three input rows side by side, matching the tap-major weight) is gathered
 * by one copy_rows, padding rows from the scratch's zero row. */
static sr_status conv_rows(const sr_kernels *k, const wh_scratch *s, const float *in, int64_t in_base, int64_t held,
                           int64_t total, int cin, int stride, int64_t o0, int64_t o1, wh_lin L,
                           float *out)
{
    int n = (int)(o1 - o0);
    if (n <= 0) return SR_OK;
    if (n > s->col_rows)
        return sr_error(SR_ERR_ARG, "whisper stem: %d output rows exceed the scratch (%d)", n,
                        s->col_rows);
    for (int r = 0; r < n; r++)
        for (int kk = 0; kk < 3; kk++) {
            int64_t t = stride * (o0 + r) - 1 + kk;
            if (t < 0 || (total >= 0 && t >= total)) {
                s->cp[3 * r + kk] = s->zero;
            } else if (t >= in_base && t < in_base + held) {
                s->cp[3 * r + kk] = in + (size_t)(t - in_base) * cin;
            } else {
                return sr_error(SR_ERR_ARG, "whisper stem: input row %lld not held", (long long)t);
            }
        }
    sr_status st = k->copy_rows(3 * n, cin, s->cp, s->col, cin);
    return st ? st : wh_linear(k, s->col, n, L, SR_ACT_GELU, 0.0f, out);
}

sr_status wh_stem(const wh_model *w, wh_scratch *s, const float *mel, int L, float *x)
{
    if (L <= 0) return SR_OK;
    if ((L + 1) / 2 > s->rows)
        return sr_error(SR_ERR_ARG, "whisper stem: %d mel frames exceed the scratch (%d rows)", L,
                        2 * s->rows);
    float *c1 = s->mlp; /* [L, d] fits in [rows, 4d] since L <= 2 rows */
    sr_status st = conv_rows(w->k, s, mel, 0, L, L, w->n_mels, 1, 0, L, w->conv1, c1);
    if (!st)
        st = conv_rows(w->k, s, c1, 0, L, L, w->d, 2, 0, (L + 1) / 2, w->conv2, x);
    return st;
}

sr_status wh_stem_stream_init(wh_stem_stream *st, const wh_model *w, int max_in)
{
    memset(st, 0, sizeof *st);
    st->k = w->k;
    st->n_mels = w->n_mels;
    st->d = w->d;
    st->cap = max_in + 4;
    size_t wmax = (size_t)(w->n_mels > w->d ? w->n_mels : w->d);
    st->mel = w->k->alloc((size_t)st->cap * w->n_mels * sizeof(float));
    st->c1 = w->k->alloc((size_t)st->cap * w->d * sizeof(float));
    st->tmp = w->k->alloc((size_t)st->cap * wmax * sizeof(float));
    if (!st->mel || !st->c1 || !st->tmp) {
        wh_stem_stream_free(st);
        return sr_error(SR_ERR_NOMEM, "whisper stem rows (%d)", st->cap);
    }
    return SR_OK;
}

void wh_stem_stream_reset(wh_stem_stream *st)
{
    st->mel_n = st->c1_n = 0;
    st->mel_base = st->c1_base = 0;
    st->n_c1 = st->n_out = 0;
}

void wh_stem_stream_free(wh_stem_stream *st)
{
    if (st->k) {
        st->k->free(st->mel);
        st->k->free(st->c1);
        st->k->free(st->tmp);
    }
    memset(st, 0, sizeof *st);
}

/* Drop held rows before `keep` (absolute), shifting the rest to the front: through tmp, as
 * the table's copy2d takes no overlapping rows. */
static sr_status drop_before(const wh_stem_stream *st, float *buf, int *n, int64_t *base,
                             int64_t keep, int width)
{
    if (keep <= *base) return SR_OK;
    int64_t drop = keep - *base;
    if (drop > *n) drop = *n;
    int left = *n - (int)drop;
    sr_status e = SR_OK;
    if (left > 0 && drop > 0) {
        e = st->k->copy2d(left, width, buf + (size_t)drop * width, width, st->tmp, width);
        if (!e) e = st->k->copy2d(left, width, st->tmp, width, buf, width);
    }
    *n = left;
    *base += drop;
    return e;
}

sr_status wh_stem_stream_feed(wh_stem_stream *st, const wh_model *w, wh_scratch *s,
                              const float *mel, int n, int final, float *x, int *n_out)
{
    *n_out = 0;
    /* keep mel rows from n_c1 - 1 (the left neighbour of the next conv1 output) */
    sr_status e0 = drop_before(st, st->mel, &st->mel_n, &st->mel_base, st->n_c1 - 1, st->n_mels);
    if (e0) return e0;
    if (st->mel_n + n > st->cap)
        return sr_error(SR_ERR_ARG, "whisper stem: %d mel frames in one feed exceed %d", n,
                        st->cap - 4);
    /* mel: host rows from the front-end */
    if (n && (e0 = st->k->upload(st->mel + (size_t)st->mel_n * st->n_mels, mel,
                                 (size_t)n * st->n_mels * sizeof(float))))
        return e0;
    st->mel_n += n;
    int64_t mel_total = st->mel_base + st->mel_n;

    /* conv1 outputs t with mel t + 1 present (all of them at the end) */
    int64_t c1_target = final ? mel_total : (mel_total > 0 ? mel_total - 1 : 0);
    if ((e0 = drop_before(st, st->c1, &st->c1_n, &st->c1_base, 2 * st->n_out - 1, st->d))) return e0;
    if (c1_target > st->n_c1) {
        if (st->c1_n + (c1_target - st->n_c1) > st->cap)
            return sr_error(SR_ERR_ARG, "whisper stem: conv1 buffer overflow");
        sr_status e = conv_rows(w->k, s, st->mel, st->mel_base, st->mel_n, final ? mel_total : -1,
                                st->n_mels, 1, st->n_c1, c1_target, w->conv1,
                                st->c1 + (size_t)st->c1_n * st->d);
        if (e) return e;
        st->c1_n += (int)(c1_target - st->n_c1);
        st->n_c1 = c1_target;
    }
    /* conv2 outputs u with conv1 2u + 1 present (at the end: ceil(n_c1 / 2) in all) */
    int64_t out_target = final ? (st->n_c1 + 1) / 2 : st->n_c1 / 2;
    if (out_target > st->n_out) {
        sr_status e = conv_rows(w->k, s, st->c1, st->c1_base, st->c1_n, final ? st->n_c1 : -1, st->d,
                                2, st->n_out, out_target, w->conv2, x);
        if (e) return e;
        *n_out = (int)(out_target - st->n_out);
        st->n_out = out_target;
    }
    return SR_OK;
}

sr_status wh_encode(const wh_model *w, wh_scratch *s, float *x, const wh_eseq *q, int n_seq,
                    sr_kpool *kc, sr_kpool *vc, const int *klim)
{
    int d = w->d, ctx = w->n_audio_ctx, nb = 0;
    for (int i = 0; i < n_seq; i++) {
        int n = q[i].n, p0 = q[i].p0;
        if (n < 0 || p0 < 0 || p0 + n > ctx)
            return sr_error(SR_ERR_ARG, "whisper encoder: %d frames at position %d exceed the "
                            "context (%d)", n, p0, ctx);
        if (n == 0) continue;
        int r0 = s->row0[nb];
        sr_status st = wh_kbatch_add(s, &nb, n, q[i].slot, q[i].slot, p0);
        if (st) return sr_error_prefix(st, "whisper encoder");
        for (int r = 0; r < n; r++) {
            s->lo[r0 + r] = 0;
            s->hi[r0 + r] = klim ? klim[r0 + r] : p0 + n;
        }
    }
    int n = s->row0[nb];
    if (n <= 0) return SR_OK;
    sr_kbatch b = {.n_seq = nb, .row0 = s->row0, .slot = s->slot, .pos = s->pos};
    const sr_kernels *k = w->k;
    sr_status st = SR_OK;
    for (int l = 0; l < w->n_audio_layer && !st; l++) {
        const wh_block *B = &w->enc[l];
        if ((st = wh_layernorm(k, x, n, d, B->attn_ln, s->h)) ||
            (st = wh_linear(k, s->h, n, B->q, SR_ACT_NONE, 0.0f, s->q)) ||
            (st = wh_linear(k, s->h, n, B->k, SR_ACT_NONE, 0.0f, s->kv)) ||
            (st = wh_kv_put(k, kc, l, &b, s->kv)) ||
            (st = wh_linear(k, s->h, n, B->v, SR_ACT_NONE, 0.0f, s->kv)) ||
            (st = wh_kv_put(k, vc, l, &b, s->kv)) ||
            (st = wh_attend(k, w->n_audio_head, d, s->q, &b, s->lo, s->hi, kc, vc, l, s->a)) ||
            (st = wh_linear(k, s->a, n, B->o, SR_ACT_NONE, 1.0f, x)) ||
            (st = wh_layernorm(k, x, n, d, B->mlp_ln, s->h)) ||
            (st = wh_linear(k, s->h, n, B->fc1, SR_ACT_GELU, 0.0f, s->mlp)))
            break;
        st = wh_linear(k, s->mlp, n, B->fc2, SR_ACT_NONE, 1.0f, x);
    }
    if (st) return st;
    return wh_layernorm(k, x, n, d, w->ln_post, x);
}
