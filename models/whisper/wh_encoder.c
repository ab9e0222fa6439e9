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
 * Cached encoder: new frames at positions p0.. compute Q/K/V for themselves only, append K and
 * V to the layer's cache and attend over [0, p0 + n) (or a per-row limit, which the one-pass
 * block-causal reference of the tests uses).
 */
#include "whisper.h"

#include <string.h>

/* Output rows [o0, o1) of a kernel-3, padding-1 conv with the given stride over input rows held
 * in `in` (absolute rows [in_base, in_base + held)); rows < 0 or >= total are zero (total < 0:
 * not known yet, the caller guarantees every read row is held). GELU applied. */
static sr_status conv_rows(const sr_kernels *k, const wh_scratch *s, const float *in, int64_t in_base, int64_t held,
                           int64_t total, int cin, int stride, int64_t o0, int64_t o1,
                           const float *W, const float *b, int cout, float *out)
{
    int n = (int)(o1 - o0);
    if (n <= 0) return SR_OK;
    if (n > s->col_rows)
        return sr_error(SR_ERR_ARG, "whisper stem: %d output rows exceed the scratch (%d)", n,
                        s->col_rows);
    float *col = s->col;
    size_t cw = 3 * (size_t)cin;
    for (int r = 0; r < n; r++) {
        float *cr = col + (size_t)r * cw;
        for (int kk = 0; kk < 3; kk++) {
            int64_t t = stride * (o0 + r) + kk - 1;
            int inside = t >= 0 && (total < 0 || t < total);
            if (inside && (t < in_base || t >= in_base + held))
                return sr_error(SR_ERR_ARG, "whisper stem: input row %lld not held", (long long)t);
            const float *src = inside ? in + (size_t)(t - in_base) * cin : NULL;
            /* col row layout [c * 3 + kk] matches the weight layout [cout, cin, 3] */
            for (int c = 0; c < cin; c++) cr[(size_t)c * 3 + kk] = src ? src[c] : 0.0f;
        }
    }
    wh_lin L = {W, b};
    sr_status st = wh_linear(k, col, n, (int)cw, L, cout, 0.0f, out);
    if (st) return st;
    sr_gelu_erf(out, (size_t)n * cout);
    return SR_OK;
}

sr_status wh_stem(const wh_model *w, wh_scratch *s, const float *mel, int L, float *x)
{
    if (L <= 0) return SR_OK;
    if ((L + 1) / 2 > s->rows)
        return sr_error(SR_ERR_ARG, "whisper stem: %d mel frames exceed the scratch (%d rows)", L,
                        2 * s->rows);
    float *c1 = s->mlp; /* [L, d] fits in [rows, 4d] since L <= 2 rows */
    sr_status st = conv_rows(w->k, s, mel, 0, L, L, w->n_mels, 1, 0, L, w->conv1_w, w->conv1_b, w->d, c1);
    if (!st)
        st = conv_rows(w->k, s, c1, 0, L, L, w->d, 2, 0, (L + 1) / 2, w->conv2_w, w->conv2_b, w->d, x);
    return st;
}

sr_status wh_stem_stream_init(wh_stem_stream *st, const wh_model *w, int max_in)
{
    memset(st, 0, sizeof *st);
    st->n_mels = w->n_mels;
    st->d = w->d;
    st->cap = max_in + 4;
    st->mel = sr_malloc((size_t)st->cap * w->n_mels * sizeof(float), "whisper stem mel rows");
    st->c1 = sr_malloc((size_t)st->cap * w->d * sizeof(float), "whisper stem conv1 rows");
    if (!st->mel || !st->c1) {
        wh_stem_stream_free(st);
        return SR_ERR_NOMEM;
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
    free(st->mel);
    free(st->c1);
    memset(st, 0, sizeof *st);
}

/* Drop held rows before `keep` (absolute), shifting the rest to the front. */
static void drop_before(float *buf, int *n, int64_t *base, int64_t keep, int width)
{
    if (keep <= *base) return;
    int64_t drop = keep - *base;
    if (drop > *n) drop = *n;
    memmove(buf, buf + (size_t)drop * width, (size_t)(*n - drop) * width * sizeof(float));
    *n -= (int)drop;
    *base += drop;
}

sr_status wh_stem_stream_feed(wh_stem_stream *st, const wh_model *w, wh_scratch *s,
                              const float *mel, int n, int final, float *x, int *n_out)
{
    *n_out = 0;
    /* keep mel rows from n_c1 - 1 (the left neighbour of the next conv1 output) */
    drop_before(st->mel, &st->mel_n, &st->mel_base, st->n_c1 - 1, st->n_mels);
    if (st->mel_n + n > st->cap)
        return sr_error(SR_ERR_ARG, "whisper stem: %d mel frames in one feed exceed %d", n,
                        st->cap - 4);
    if (n) memcpy(st->mel + (size_t)st->mel_n * st->n_mels, mel, (size_t)n * st->n_mels * sizeof(float));
    st->mel_n += n;
    int64_t mel_total = st->mel_base + st->mel_n;

    /* conv1 outputs t with mel t + 1 present (all of them at the end) */
    int64_t c1_target = final ? mel_total : (mel_total > 0 ? mel_total - 1 : 0);
    drop_before(st->c1, &st->c1_n, &st->c1_base, 2 * st->n_out - 1, st->d);
    if (c1_target > st->n_c1) {
        if (st->c1_n + (c1_target - st->n_c1) > st->cap)
            return sr_error(SR_ERR_ARG, "whisper stem: conv1 buffer overflow");
        sr_status e = conv_rows(w->k, s, st->mel, st->mel_base, st->mel_n, final ? mel_total : -1,
                                st->n_mels, 1, st->n_c1, c1_target, w->conv1_w, w->conv1_b, st->d,
                                st->c1 + (size_t)st->c1_n * st->d);
        if (e) return e;
        st->c1_n += (int)(c1_target - st->n_c1);
        st->n_c1 = c1_target;
    }
    /* conv2 outputs u with conv1 2u + 1 present (at the end: ceil(n_c1 / 2) in all) */
    int64_t out_target = final ? (st->n_c1 + 1) / 2 : st->n_c1 / 2;
    if (out_target > st->n_out) {
        sr_status e = conv_rows(w->k, s, st->c1, st->c1_base, st->c1_n, final ? st->n_c1 : -1, st->d,
                                2, st->n_out, out_target, w->conv2_w, w->conv2_b, st->d, x);
        if (e) return e;
        *n_out = (int)(out_target - st->n_out);
        st->n_out = out_target;
    }
    return SR_OK;
}

sr_status wh_encode(const wh_model *w, wh_scratch *s, float *x, int n, int p0, float *kc,
                    float *vc, const int *klim)
{
    if (n <= 0) return SR_OK;
    int d = w->d, ctx = w->n_audio_ctx;
    if (n > s->rows || p0 + n > ctx || (size_t)n * (p0 + n) > (size_t)s->rows * s->keys)
        return sr_error(SR_ERR_ARG, "whisper encoder: %d frames at position %d exceed the "
                        "context (%d) or the scratch", n, p0, ctx);
    sr_status st = SR_OK;
    for (int l = 0; l < w->n_audio_layer && !st; l++) {
        const wh_block *B = &w->enc[l];
        float *K = kc + (size_t)l * ctx * d, *V = vc + (size_t)l * ctx * d;
        wh_layernorm(x, n, d, B->attn_ln, s->h);
        if ((st = wh_linear(w->k, s->h, n, d, B->q, d, 0.0f, s->q)) ||
            (st = wh_linear(w->k, s->h, n, d, B->k, d, 0.0f, K + (size_t)p0 * d)) ||
            (st = wh_linear(w->k, s->h, n, d, B->v, d, 0.0f, V + (size_t)p0 * d)) ||
            (st = wh_attention(w->k, w->n_audio_head, d, s->q, n, K, V, p0 + n, klim, s->scores,
                               s->a)) ||
            (st = wh_linear(w->k, s->a, n, d, B->o, d, 1.0f, x)))
            break;
        wh_layernorm(x, n, d, B->mlp_ln, s->h);
        if ((st = wh_linear(w->k, s->h, n, d, B->fc1, 4 * d, 0.0f, s->mlp))) break;
        sr_gelu_erf(s->mlp, (size_t)n * 4 * d);
        st = wh_linear(w->k, s->mlp, n, 4 * d, B->fc2, d, 1.0f, x);
    }
    if (st) return st;
    wh_layernorm(x, n, d, w->ln_post, x);
    return SR_OK;
}
