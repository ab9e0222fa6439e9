/*
 * voxtral.c — the voxtral_realtime backend's streams (arch "voxtral_realtime", docs/voxtral.md):
 * audio in 80 ms steps through the streaming log-mel, the causal conv stem with carried
 * state, the encoder with per-layer ring K/V caches, the adapter, and a SYNC scorer that runs
 * one decoder step per audio embedding.
 *
 * Signal: n_left_pad_tokens * 1280 zero samples, the audio, and at finish zeros up to a whole
 * 80 ms step plus n_right_pad_tokens * 1280 zeros. Mel frame f (centre f * 160) is complete
 * when 200 samples past its centre exist, so the engine's first chunk is 1280 + 40 samples and
 * every later chunk 1280: each chunk completes exactly 8 mel frames (the seed's 40-sample
 * look-ahead), i.e. 4 encoder frames and 1 audio embedding a[p].
 *
 * Stem (transformers' causal convs, zero left padding): conv1 (k 3, s 1) output t reads mel
 * t-2..t; conv2 (k 3, s 2) output j reads conv1 outputs 2j-1..2j+1. The stream carries the
 * last two mel frames and the last conv1 output, so 8 mel frames always give 4 outputs.
 *
 * Decoder: the prompt x = [BOS] + [PAD] * (n_left + delay) (L tokens) fills positions 0..L-2
 * with embed(x[p]) + a[p] in one batch at the first step; sync step t runs position
 * L - 1 + t on embed(token) + a[p], token = x[L-1] at t = 0 and the previous argmax after.
 * After finish, flush steps run on embed(prev) alone; once a flush step has chosen EOS the
 * remaining ones (up to flush_tokens in all) return the streaming pad without computing.
 */
#include "voxtral.h"

#include <math.h>
#include <string.h>

static void stream_close(void *state);

static sr_status load(sr_model *m, sr_h5 *f) { return vx_load(m, f); }

static int vx_frames(void *ctx)
{
    const vx_stream *s = ctx;
    int64_t audio = s->n_emb - (s->prompt_len - 1);
    if (audio < 0) audio = 0;
    return (int)(audio + s->flush_avail);
}

static sr_status vx_step(void *ctx, int t, int32_t prev, float *logits)
{
    vx_stream *s = ctx;
    const vx_model *w = s->w;
    const sr_kernels *k = s->m->k;
    if (t != s->n_steps || t >= vx_frames(s))
        return sr_error(SR_ERR_ARG, "voxtral sync_step: step %d requested, next is %lld of %d "
                        "available", t, (long long)s->n_steps, vx_frames(s));
    if (prev < -1 || prev >= w->vocab)
        return sr_error(SR_ERR_ARG, "voxtral sync_step: prev token %d outside the vocabulary "
                        "(%d)", (int)prev, w->vocab);
    int L = s->prompt_len, d = w->dim;
    sr_status st;
    if (t == 0 && L > 1) { /* prefill: positions 0 .. L-2 */
        for (int r = 0; r < L - 1; r++) {
            float *x = s->s.x + (size_t)r * d;
            const float *a = s->emb + (size_t)(r % s->emb_cap) * d;
            vx_embed(w, s->prompt[r], x);
            for (int i = 0; i < d; i++) x[i] += a[i];
        }
        if ((st = vx_decode(w, k, &s->s, &s->dr, s->ada, s->s.x, L - 1, NULL))) return st;
    }
    int64_t p = L - 1 + (int64_t)t;
    int32_t tok = t == 0 ? s->prompt[L - 1] : (prev < 0 ? w->pad : prev);
    float *x = s->s.x;
    vx_embed(w, tok, x);
    if (p < s->n_emb) {
        const float *a = s->emb + (size_t)(p % s->emb_cap) * d;
        for (int i = 0; i < d; i++) x[i] += a[i];
    } else {
        if (p - s->n_emb >= 1 && prev == w->eos) s->stopped = 1;
        if (s->stopped) { /* text ended: nothing more to compute */
            for (int v = 0; v < w->vocab; v++) logits[v] = -INFINITY;
            logits[w->pad] = 0.0f;
            s->n_steps++;
            return SR_OK;
        }
    }
    if ((st = vx_decode(w, k, &s->s, &s->dr, s->ada, x, 1, logits))) return st;
    s->n_steps++;
    return SR_OK;
}

/* One 80 ms step: 8 mel frames -> conv stem -> 4 encoder frames -> 1 audio embedding. */
static sr_status encode_step(vx_stream *s, const float *mel8)
{
    const vx_model *w = s->w;
    const sr_kernels *k = s->m->k;
    int C = w->n_mels, E = w->enc_dim;
    sr_status st;
    /* conv1 im2col over [state(2); mel(8)]: row t, column c * 3 + j = input frame t + j */
    for (int t = 0; t < VX_MEL_PER_STEP; t++)
        for (int j = 0; j < 3; j++) {
            int src = t + j - 2;
            const float *in = src < 0 ? s->c1_state + (size_t)(src + 2) * C : mel8 + (size_t)src * C;
            float *col = s->col + (size_t)t * 3 * C;
            for (int c = 0; c < C; c++) col[c * 3 + j] = in[c];
        }
    if ((st = k->sgemm(0, 1, VX_MEL_PER_STEP, E, 3 * C, 1.0f, s->col, 3 * C, w->conv1_w, 3 * C,
                       0.0f, s->c1_out, E)))
        return st;
    for (int t = 0; t < VX_MEL_PER_STEP; t++)
        for (int e = 0; e < E; e++) s->c1_out[(size_t)t * E + e] += w->conv1_b[e];
    sr_gelu_erf(s->c1_out, (size_t)VX_MEL_PER_STEP * E);
    memcpy(s->c1_state, mel8 + (size_t)(VX_MEL_PER_STEP - 2) * C, 2 * (size_t)C * sizeof(float));
    /* conv2 over [state(1); conv1(8)] with stride 2: output j reads inputs 2j .. 2j + 2 */
    int n = VX_MEL_PER_STEP / 2;
    for (int o = 0; o < n; o++)
        for (int j = 0; j < 3; j++) {
            int src = 2 * o + j - 1;
            const float *in = src < 0 ? s->c2_state : s->c1_out + (size_t)src * E;
            float *col = s->col + (size_t)o * 3 * E;
            for (int c = 0; c < E; c++) col[c * 3 + j] = in[c];
        }
    float *enc = s->c1_out; /* 4 rows fit where 8 conv1 rows were once conv2 read them */
    if ((st = k->sgemm(0, 1, n, E, 3 * E, 1.0f, s->col, 3 * E, w->conv2_w, 3 * E, 0.0f, s->s.a, E)))
        return st;
    memcpy(s->c2_state, s->c1_out + (size_t)(VX_MEL_PER_STEP - 1) * E, (size_t)E * sizeof(float));
    memcpy(enc, s->s.a, (size_t)n * E * sizeof(float));
    for (int o = 0; o < n; o++)
        for (int e = 0; e < E; e++) enc[(size_t)o * E + e] += w->conv2_b[e];
    sr_gelu_erf(enc, (size_t)n * E);
    if ((st = vx_encode(w, k, &s->s, &s->er, enc, n))) return st;
    if (s->cap_enc)
        for (int o = 0; o < n && s->cap_enc_n < s->cap_enc_max; o++, s->cap_enc_n++)
            memcpy(s->cap_enc + (size_t)s->cap_enc_n * E, enc + (size_t)o * E, (size_t)E * sizeof(float));
    /* the decoder consumes a[p] at position p; an unconsumed ring slot must not be overwritten */
    int64_t consumed = s->dr.written;
    if (s->n_emb - consumed >= s->emb_cap)
        return sr_error(SR_ERR_ARG, "voxtral: %lld audio embeddings wait for the decoder (ring of "
                        "%d): sync_step is not being called", (long long)(s->n_emb - consumed),
                        s->emb_cap);
    float *a = s->emb + (size_t)(s->n_emb % s->emb_cap) * w->dim;
    if ((st = vx_adapter(w, k, &s->s, enc, n, a))) return st;
    if (s->cap_ada && s->cap_ada_n < s->cap_ada_max)
        memcpy(s->cap_ada + (size_t)s->cap_ada_n++ * w->dim, a, (size_t)w->dim * sizeof(float));
    s->n_emb++;
    return SR_OK;
}

/* Take the new mel frames at s->mel[mel_n .. mel_n + got) and run every complete step. */
static sr_status take_frames(vx_stream *s, int got)
{
    int C = s->w->n_mels;
    if (s->cap_mel)
        for (int i = 0; i < got && s->cap_mel_n < s->cap_mel_max; i++, s->cap_mel_n++)
            memcpy(s->cap_mel + (size_t)s->cap_mel_n * C, s->mel + (size_t)(s->mel_n + i) * C,
                   (size_t)C * sizeof(float));
    s->mel_n += got;
    int used = 0;
    while (s->mel_n - used >= VX_MEL_PER_STEP) {
        sr_status st = encode_step(s, s->mel + (size_t)used * C);
        if (st) return st;
        used += VX_MEL_PER_STEP;
    }
    if (used) {
        memmove(s->mel, s->mel + (size_t)used * C, (size_t)(s->mel_n - used) * C * sizeof(float));
        s->mel_n -= used;
    }
    return SR_OK;
}

/* Feed samples (NULL = zeros) to the mel stream, at most one step of samples at a time so the
 * pending mel buffer stays bounded. */
static sr_status feed(vx_stream *s, const float *pcm, size_t n)
{
    static const float zeros[VX_STEP_SAMPLES];
    while (n) {
        size_t take = n < VX_STEP_SAMPLES ? n : VX_STEP_SAMPLES;
        int room = s->mel_cap - s->mel_n, got = 0;
        if (sr_mel_stream_pending(s->ms, take) > room)
            return sr_error(SR_ERR_ARG, "voxtral: mel buffer of %d frames too small", s->mel_cap);
        sr_status st = sr_mel_stream_feed(s->ms, pcm ? pcm : zeros, take,
                                          s->mel + (size_t)s->mel_n * s->w->n_mels, room, &got);
        if (st || (st = take_frames(s, got))) return st;
        if (pcm) pcm += take;
        n -= take;
    }
    return SR_OK;
}

static sr_status process(void *state, const float *pcm, size_t n, int final)
{
    vx_stream *s = state;
    const vx_model *w = s->w;
    sr_status st;
    if (s->final) return sr_error(SR_ERR_ARG, "voxtral: stream already flushed (reset it)");
    if (!s->started) {
        s->started = 1;
        if ((st = feed(s, NULL, (size_t)w->n_left * VX_STEP_SAMPLES))) return st;
    }
    if ((st = feed(s, pcm, n))) return st;
    s->samples += (int64_t)n;
    if (!final) return SR_OK;
    int64_t rem = s->samples % VX_STEP_SAMPLES;
    size_t pad = (size_t)(rem ? VX_STEP_SAMPLES - rem : 0) + (size_t)w->n_right * VX_STEP_SAMPLES;
    if ((st = feed(s, NULL, pad))) return st;
    int room = s->mel_cap - s->mel_n, got = 0;
    if (sr_mel_stream_pending(s->ms, 0) > room)
        return sr_error(SR_ERR_ARG, "voxtral: mel buffer of %d frames too small", s->mel_cap);
    if ((st = sr_mel_stream_finish(s->ms, s->mel + (size_t)s->mel_n * w->n_mels, room, &got)) ||
        (st = take_frames(s, got)))
        return st;
    s->mel_n = 0; /* the padded signal is whole steps: nothing is left over */
    s->final = 1;
    s->flush_avail = w->flush_tokens;
    return SR_OK;
}

static void reset(void *state)
{
    vx_stream *s = state;
    const vx_model *w = s->w;
    sr_mel_stream_reset(s->ms);
    s->mel_n = 0;
    memset(s->c1_state, 0, 2 * (size_t)w->n_mels * sizeof(float));
    memset(s->c2_state, 0, (size_t)w->enc_dim * sizeof(float));
    s->er.written = s->dr.written = 0; /* slots past `written` are never read before rewritten */
    s->n_emb = s->n_steps = s->samples = 0;
    s->started = s->final = s->stopped = s->flush_avail = 0;
    s->cap_enc_n = s->cap_ada_n = s->cap_mel_n = 0;
}

static sr_status stream_open(const sr_model *m, const sr_stream_config *cfg, void **state,
                             sr_chunking *ck, sr_scorer *sc)
{
    const vx_model *w = m->impl;
    if (cfg->strategy && strcmp(cfg->strategy, "realtime"))
        return sr_error(SR_ERR_ARG, "stream.strategy: \"%s\" unknown for voxtral_realtime "
                        "(known: realtime)", cfg->strategy);
    if (cfg->chunk_ms && cfg->chunk_ms != 80)
        return sr_error(SR_ERR_ARG, "stream.chunk_ms: %d, voxtral_realtime steps 80 ms at a time",
                        cfg->chunk_ms);
    if (cfg->first_chunk_ms && cfg->first_chunk_ms != 80)
        return sr_error(SR_ERR_ARG, "stream.first_chunk_ms: %d, voxtral_realtime steps 80 ms at "
                        "a time", cfg->first_chunk_ms);
    int delay = cfg->delay_tokens ? cfg->delay_tokens : w->delay_def;
    if (delay < w->delay_min || delay > w->delay_max)
        return sr_error(SR_ERR_ARG, "stream.delay_tokens: %d outside the model's supported range "
                        "%d..%d (80 ms each)", delay, w->delay_min, w->delay_max);
    int kv_bf16 = 0;
    if (cfg->cache_dtype && strcmp(cfg->cache_dtype, "f32")) {
        if (strcmp(cfg->cache_dtype, "bf16"))
            return sr_error(SR_ERR_ARG, "stream.cache_dtype: \"%s\" unknown for voxtral_realtime "
                            "(known: f32, bf16)", cfg->cache_dtype);
        kv_bf16 = 1;
    }
    vx_stream *s = sr_calloc(1, sizeof *s, "voxtral stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->delay = delay;
    s->prompt_len = 1 + w->n_left + delay;
    int L = s->prompt_len;
    int er_slots = SR_MAX(2 * w->enc_window, w->enc_window + VX_MEL_PER_STEP / 2 - 1);
    int dr_slots = w->window + SR_MAX(L - 1, 1) - 1;
    int rows = SR_MAX(VX_MEL_PER_STEP / 2, L - 1);
    size_t width = (size_t)SR_MAX(SR_MAX(w->enc_heads * w->enc_hd, w->enc_ffn),
                                  SR_MAX(SR_MAX(w->n_heads * w->hd, w->n_kv * w->hd), w->ffn));
    width = SR_MAX(width, (size_t)SR_MAX(SR_MAX(w->enc_dim, w->dim), VX_ADA_DIM));
    sr_status st = SR_ERR_NOMEM;
    s->mel_cap = 3 * VX_MEL_PER_STEP;
    s->emb_cap = L + w->n_left + w->n_right + 4;
    int colw = 3 * SR_MAX(w->n_mels, w->enc_dim);
    /* weight tile: >= the longest matrix row (the adapter's ds * enc_dim inputs included) */
    size_t max_in = SR_MAX(width, (size_t)w->ds * w->enc_dim);
    size_t max_mat = SR_MAX((size_t)w->vocab * w->dim,
                            SR_MAX((size_t)w->ffn * w->dim, (size_t)w->enc_ffn * w->enc_dim));
    max_mat = SR_MAX(max_mat, (size_t)w->dim * w->ds * w->enc_dim);
    size_t tile = SR_MAX(max_in, SR_MIN((size_t)VX_TILE_FLOATS, max_mat));
    if (!(s->prompt = sr_malloc((size_t)L * sizeof(int32_t), "voxtral prompt")) ||
        !(s->ada = sr_malloc((size_t)w->n_layers * w->dim * sizeof(float), "voxtral ada scales")) ||
        !(s->mel = sr_malloc((size_t)s->mel_cap * w->n_mels * sizeof(float), "voxtral mel")) ||
        !(s->c1_state = sr_calloc(2 * (size_t)w->n_mels, sizeof(float), "voxtral conv1 state")) ||
        !(s->c2_state = sr_calloc((size_t)w->enc_dim, sizeof(float), "voxtral conv2 state")) ||
        !(s->c1_out = sr_malloc((size_t)VX_MEL_PER_STEP * w->enc_dim * sizeof(float), "voxtral conv1")) ||
        !(s->col = sr_malloc((size_t)VX_MEL_PER_STEP * colw * sizeof(float), "voxtral im2col")) ||
        !(s->emb = sr_malloc((size_t)s->emb_cap * w->dim * sizeof(float), "voxtral audio embeddings")))
        goto fail;
    if ((st = vx_ring_init(&s->er, w->enc_layers, er_slots, w->enc_heads * w->enc_hd, kv_bf16,
                           "voxtral encoder K/V ring")) ||
        (st = vx_ring_init(&s->dr, w->n_layers, dr_slots, w->n_kv * w->hd, kv_bf16,
                           "voxtral decoder K/V ring")) ||
        (st = vx_scratch_init(&s->s, rows, width, (size_t)SR_MAX(er_slots, dr_slots), tile)) ||
        (st = sr_mel_stream_open(w->mel, &s->ms)))
        goto fail;
    s->s.threads = m->opt.threads; /* 0: the kernels' default, as the BLAS */
    s->prompt[0] = w->bos;
    for (int i = 1; i < L; i++) s->prompt[i] = w->pad;
    if ((st = vx_ada_scales(w, m->k, &s->s, delay, s->ada))) goto fail;
    ck->first_chunk = VX_STEP_SAMPLES + VX_LOOKAHEAD;
    ck->chunk = VX_STEP_SAMPLES;
    memset(sc, 0, sizeof *sc);
    sc->kind = SR_SCORER_SYNC;
    sc->ctx = s;
    sc->vocab = w->vocab;
    sc->blank = w->pad;
    sc->eot = -1;
    sc->sync_frames = vx_frames;
    sc->sync_step = vx_step;
    *state = s;
    return SR_OK;
fail:
    stream_close(s);
    return st;
}

static void stream_close(void *state)
{
    vx_stream *s = state;
    if (!s) return;
    free(s->prompt);
    free(s->ada);
    free(s->mel);
    free(s->c1_state);
    free(s->c2_state);
    free(s->c1_out);
    free(s->col);
    free(s->emb);
    vx_ring_free(&s->er);
    vx_ring_free(&s->dr);
    vx_scratch_free(&s->s);
    sr_mel_stream_close(s->ms);
    free(s);
}

static size_t state_bytes(const void *state)
{
    const vx_stream *s = state;
    const vx_model *w = s->w;
    size_t f = sizeof(float);
    size_t ring = vx_ring_bytes(&s->er) + vx_ring_bytes(&s->dr);
    return sizeof *s + ring + vx_scratch_bytes(&s->s) + (size_t)s->prompt_len * sizeof(int32_t) +
           ((size_t)w->n_layers * w->dim + (size_t)s->mel_cap * w->n_mels + 2 * (size_t)w->n_mels +
            (size_t)w->enc_dim * (1 + VX_MEL_PER_STEP) +
            (size_t)VX_MEL_PER_STEP * 3 * SR_MAX(w->n_mels, w->enc_dim) +
            (size_t)s->emb_cap * w->dim) * f;
}

const sr_model_ops sr_voxtral_ops = {
    .name = "voxtral_realtime",
    .description = "Voxtral Realtime: causal RoPE audio encoder with ring K/V caches, frame-"
                   "concat adapter, Mistral decoder with delay-conditioned norms (sync scorer)",
    .default_decoder = "sync_greedy",
    .load = load,
    .unload = vx_unload,
    .stream_open = stream_open,
    .process = process,
    .reset = reset,
    .stream_close = stream_close,
    .state_bytes = state_bytes,
};
