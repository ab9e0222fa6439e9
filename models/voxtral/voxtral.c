/*
 * voxtral.c — the voxtral_realtime backend's streams (arch "voxtral_realtime", docs/voxtral.md):
 * audio in 80 ms steps through the streaming log-mel, the causal conv stem with carried
 * state, the encoder with per-layer ring K/V caches, the adapter, and a SYNC scorer that runs
 * one decoder step per audio embedding. The stream holds its caches as kernel-table pools
 * (one slot each) and drives the forward functions of vx_model.c as a batch of one.
 *
 * Signal: n_left_pad_tokens * 1280 zero samples, the audio, and at finish zeros up to a whole
 * 80 ms step plus n_right_pad_tokens * 1280 zeros. Mel frame f (centre f * 160) is complete
 * when 200 samples past its centre exist, so the engine's first chunk is 1280 + 40 samples and
 * every later chunk 1280: each chunk completes exactly 8 mel frames (the seed's 40-sample
 * look-ahead), i.e. 4 encoder frames and 1 audio embedding a[p]. Where several steps are
 * complete at once (the left padding, the right padding at finish) up to enc_steps of them go
 * through the stem, encoder and adapter in one call: rows are independent in every op, so the
 * result is bit for bit that of one step at a time, with fewer passes over the weights.
 *
 * Stem (transformers' causal convs, zero left padding): conv1 (k 3, s 1) output t reads mel
 * t-2..t; conv2 (k 3, s 2) output j reads conv1 outputs 2j-1..2j+1. The stream carries the
 * last two mel frames and the last conv1 output (pools c1, c2), so 8 mel frames always give
 * 4 outputs.
 *
 * Decoder: the prompt x = [BOS] + [PAD] * (n_left + delay) (L tokens) fills positions 0..L-2
 * with embed(x[p]) + a[p], in the same call as the first sync step (position L - 1) when the
 * cache ring holds L rows; sync step t runs position L - 1 + t on embed(token) + a[p], token =
 * x[L-1] at t = 0 and the previous argmax after. Positions without an audio embedding (flush
 * steps after finish; prompt positions when the padded audio is shorter than the prompt) run
 * on embed(token) alone. Once a flush step has chosen EOS the remaining ones (up to
 * flush_tokens in all) return the streaming pad without computing.
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

/* A batch of one: the stream's n rows from position p0 in its slot. */
typedef struct {
    int row0[2], slot[1];
    int64_t pos[1];
    sr_kbatch b;
} solo_batch;

static const sr_kbatch *solo(solo_batch *sb, int slot, int64_t p0, int n)
{
    sb->row0[0] = 0;
    sb->row0[1] = n;
    sb->slot[0] = slot;
    sb->pos[0] = p0;
    sb->b = (sr_kbatch){.n_seq = 1, .row0 = sb->row0, .slot = sb->slot, .pos = sb->pos};
    return &sb->b;
}

/* Decoder over the tokens s->ids[0 .. n) at positions p0 .., each input embed(token) + a[p]
 * where the audio embedding a[p] exists (the prompt and audio steps; flush steps have none).
 * logits (host, may be NULL): the last row's. */
static sr_status decode_rows(vx_stream *s, int64_t p0, int n, float *logits)
{
    const vx_model *w = s->w;
    const sr_kernels *k = s->m->k;
    int d = w->dim;
    float *x = s->s.x;
    sr_status st = k->gather(w->embed, s->ids, n, x, d);
    for (int64_t p = p0, end = SR_MIN(p0 + n, s->n_emb); !st && p < end;) { /* <= 2 ring runs */
        int at = (int)(p % s->emb_cap), run = (int)SR_MIN(end - p, (int64_t)(s->emb_cap - at));
        st = k->add(run, d, s->emb + (size_t)at * d, d, 1.0f, x + (size_t)(p - p0) * d, d);
        p += run;
    }
    solo_batch sb;
    if (st || (st = vx_decode(w, &s->s, s->dk, s->dv, solo(&sb, s->slot, p0, n), s->ada, 0, x,
                              logits ? s->logits : NULL, w->vocab)))
        return st;
    s->dec_pos = p0 + n;
    return logits ? k->download(logits, s->logits, (size_t)w->vocab * sizeof(float)) : SR_OK;
}

static sr_status vx_step(void *ctx, int t, int32_t prev, float *logits)
{
    vx_stream *s = ctx;
    const vx_model *w = s->w;
    if (t != s->n_steps || t >= vx_frames(s))
        return sr_error(SR_ERR_ARG, "voxtral sync_step: step %d requested, next is %lld of %d "
                        "available", t, (long long)s->n_steps, vx_frames(s));
    if (prev < -1 || prev >= w->vocab)
        return sr_error(SR_ERR_ARG, "voxtral sync_step: prev token %d outside the vocabulary "
                        "(%d)", (int)prev, w->vocab);
    int L = s->prompt_len;
    int64_t p = L - 1 + (int64_t)t;
    if (p >= s->n_emb) {
        if (p - s->n_emb >= 1 && prev == w->eos) s->stopped = 1;
        if (s->stopped) { /* text ended: nothing more to compute */
            for (int v = 0; v < w->vocab; v++) logits[v] = -INFINITY;
            logits[w->pad] = 0.0f;
            s->n_steps++;
            return SR_OK;
        }
    }
    sr_status st;
    if (t == 0) {
        /* the prompt: positions 0 .. L-2 (prefill) and L-1 (the first step, on the prompt's
         * last token) in one call when the cache holds all L rows, else the prefill first */
        memcpy(s->ids, s->prompt, (size_t)L * sizeof(int32_t));
        if (L <= s->dk->rows) {
            st = decode_rows(s, 0, L, logits);
        } else if (!(st = decode_rows(s, 0, L - 1, NULL))) {
            s->ids[0] = s->prompt[L - 1];
            st = decode_rows(s, L - 1, 1, logits);
        }
    } else {
        s->ids[0] = prev < 0 ? w->pad : prev;
        st = decode_rows(s, p, 1, logits);
    }
    if (st) return st;
    s->n_steps++;
    return SR_OK;
}

/* `steps` 80 ms steps of one stream in one call: 8 mel frames each -> conv stem -> 4 encoder
 * frames -> 1 audio embedding, appended to the embedding ring. */
static sr_status encode_steps(vx_stream *s, const float *mel, int steps)
{
    const vx_model *w = s->w;
    const sr_kernels *k = s->m->k;
    vx_scratch *sc = &s->s;
    int C = w->n_mels, E = w->enc_dim, d = w->dim, n = steps * VX_ENC_PER_STEP;
    solo_batch sb;
    const sr_kbatch *b = solo(&sb, s->slot, s->enc_pos, n);
    sr_status st;
    if ((st = k->upload(sc->mel, mel, (size_t)steps * VX_MEL_PER_STEP * C * sizeof(float))) ||
        (st = vx_stem(w, sc, s->c1, s->c2, b, sc->mel, sc->x)) ||
        (st = vx_encode(w, sc, s->ek, s->ev, b, sc->x)))
        return st;
    s->enc_pos += n;
    if (s->cap_enc) {
        int c = SR_MIN(n, s->cap_enc_max - s->cap_enc_n);
        if ((st = k->download(s->cap_enc + (size_t)s->cap_enc_n * E, sc->x,
                              (size_t)c * E * sizeof(float))))
            return st;
        s->cap_enc_n += c;
    }
    if ((st = vx_adapter(w, sc, sc->x, n, sc->h))) return st;
    for (int i = 0; i < steps; i++) {
        float *a = s->emb + (size_t)((s->n_emb + i) % s->emb_cap) * d;
        if ((st = k->copy2d(1, d, sc->h + (size_t)i * d, d, a, d))) return st;
        if (s->cap_ada && s->cap_ada_n < s->cap_ada_max &&
            (st = k->download(s->cap_ada + (size_t)s->cap_ada_n++ * d, a, (size_t)d * sizeof(float))))
            return st;
    }
    s->n_emb += steps;
    return SR_OK;
}

/* Take the new mel frames at s->mel[mel_n .. mel_n + got) and run every complete step, up to
 * enc_steps of them per encoder call. */
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
        /* the decoder consumes a[p] at position p; an unconsumed ring entry must not be
         * overwritten */
        int64_t room = s->emb_cap - (s->n_emb - s->dec_pos);
        if (room <= 0)
            return sr_error(SR_ERR_ARG, "voxtral: %lld audio embeddings wait for the decoder "
                            "(ring of %d): sync_step is not being called",
                            (long long)(s->n_emb - s->dec_pos), s->emb_cap);
        int steps = SR_MIN((s->mel_n - used) / VX_MEL_PER_STEP, s->enc_steps);
        steps = (int)SR_MIN((int64_t)steps, room);
        sr_status st = encode_steps(s, s->mel + (size_t)used * C, steps);
        if (st) return st;
        used += steps * VX_MEL_PER_STEP;
    }
    if (used) {
        memmove(s->mel, s->mel + (size_t)used * C, (size_t)(s->mel_n - used) * C * sizeof(float));
        s->mel_n -= used;
    }
    return SR_OK;
}

/* Feed samples (NULL = zeros) to the mel stream, at most enc_steps steps of samples at a time
 * so the pending mel buffer stays bounded. */
static sr_status feed(vx_stream *s, const float *pcm, size_t n)
{
    static const float zeros[VX_ENC_STEPS_MAX * VX_STEP_SAMPLES];
    size_t most = (size_t)s->enc_steps * VX_STEP_SAMPLES;
    while (n) {
        size_t take = n < most ? n : most;
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
    sr_mel_stream_reset(s->ms);
    s->mel_n = 0;
    /* the conv states are read as left context: zero again. The K/V pools are not cleared: a
     * query reads only positions written since the reset. */
    sr_kpool_clear(s->m->k, s->c1, s->slot);
    sr_kpool_clear(s->m->k, s->c2, s->slot);
    s->enc_pos = s->dec_pos = 0;
    s->n_emb = s->n_steps = s->samples = 0;
    s->started = s->final = s->stopped = s->flush_avail = 0;
    s->cap_enc_n = s->cap_ada_n = s->cap_mel_n = 0;
}

static sr_status stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch, int slot,
                             void **state,
                             sr_chunking *ck, sr_scorer *sc)
{
    (void)batch;
    (void)slot;
    const vx_model *w = m->impl;
    const sr_kernels *k = m->k;
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
    sr_dtype kv = SR_F32;
    if (cfg->cache_dtype && strcmp(cfg->cache_dtype, "f32")) {
        if (strcmp(cfg->cache_dtype, "bf16"))
            return sr_error(SR_ERR_ARG, "stream.cache_dtype: \"%s\" unknown for voxtral_realtime "
                            "(known: f32, bf16)", cfg->cache_dtype);
        kv = SR_BF16;
    }
    vx_stream *s = sr_calloc(1, sizeof *s, "voxtral stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->delay = delay;
    s->prompt_len = 1 + w->n_left + delay;
    int L = s->prompt_len;
    /* encoder ring: two windows (at least a window + one step's rows); a call of n rows needs
     * window + n - 1 of them, so enc_steps steps of 4 rows fit */
    int er_rows = SR_MAX(2 * w->enc_window, w->enc_window + VX_ENC_PER_STEP - 1);
    s->enc_steps = SR_MIN(VX_ENC_STEPS_MAX, (er_rows - w->enc_window + 1) / VX_ENC_PER_STEP);
    int dr_rows = w->window + SR_MAX(L - 1, 1) - 1;
    int rows = SR_MAX(s->enc_steps * VX_ENC_PER_STEP, L);
    sr_status st = SR_ERR_NOMEM;
    s->mel_cap = (s->enc_steps + 2) * VX_MEL_PER_STEP;
    s->emb_cap = L + w->n_left + w->n_right + 4;
    if (!(s->prompt = sr_malloc((size_t)L * sizeof(int32_t), "voxtral prompt")) ||
        !(s->ids = sr_malloc((size_t)rows * sizeof(int32_t), "voxtral decoder tokens")) ||
        !(s->mel = sr_malloc((size_t)s->mel_cap * w->n_mels * sizeof(float), "voxtral mel")))
        goto fail;
    if (!(s->ada = k->alloc((size_t)w->n_layers * w->dim * sizeof(float))) ||
        !(s->emb = k->alloc((size_t)s->emb_cap * w->dim * sizeof(float))) ||
        !(s->logits = k->alloc((size_t)w->vocab * sizeof(float)))) {
        st = sr_error(SR_ERR_NOMEM, "voxtral stream: out of %s memory", k->name);
        goto fail;
    }
    if ((st = sr_kpool_create(k, SR_F32, 1, 1, 2, w->n_mels, &s->c1)) ||
        (st = sr_kpool_create(k, SR_F32, 1, 1, 1, w->enc_dim, &s->c2)) ||
        (st = sr_kpool_create(k, kv, w->enc_layers, 1, er_rows, w->enc_heads * w->enc_hd, &s->ek)) ||
        (st = sr_kpool_create(k, kv, w->enc_layers, 1, er_rows, w->enc_heads * w->enc_hd, &s->ev)) ||
        (st = sr_kpool_create(k, kv, w->n_layers, 1, dr_rows, w->n_kv * w->hd, &s->dk)) ||
        (st = sr_kpool_create(k, kv, w->n_layers, 1, dr_rows, w->n_kv * w->hd, &s->dv)) ||
        (st = vx_scratch_init(&s->s, k, w, rows)) || (st = sr_mel_stream_open(w->mel, &s->ms)))
        goto fail;
    s->prompt[0] = w->bos;
    for (int i = 1; i < L; i++) s->prompt[i] = w->pad;
    if ((st = vx_ada_scales(w, &s->s, delay, s->ada))) goto fail;
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
    const sr_kernels *k = s->m->k;
    free(s->prompt);
    free(s->ids);
    free(s->mel);
    k->free(s->ada);
    k->free(s->emb);
    k->free(s->logits);
    sr_kpool *pools[] = {s->c1, s->c2, s->ek, s->ev, s->dk, s->dv};
    for (size_t i = 0; i < SR_ARRAY_LEN(pools); i++) sr_kpool_free(k, pools[i]);
    vx_scratch_free(&s->s);
    sr_mel_stream_close(s->ms);
    free(s);
}

static size_t state_bytes(const void *state)
{
    const vx_stream *s = state;
    const vx_model *w = s->w;
    size_t pools = s->c1->bytes + s->c2->bytes + s->ek->bytes + s->ev->bytes + s->dk->bytes +
                   s->dv->bytes;
    return sizeof *s + pools + vx_scratch_bytes(&s->s) +
           ((size_t)s->prompt_len + (size_t)s->s.rows) * sizeof(int32_t) +
           ((size_t)w->n_layers * w->dim + (size_t)s->mel_cap * w->n_mels +
            (size_t)s->emb_cap * w->dim + (size_t)w->vocab) * sizeof(float);
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
