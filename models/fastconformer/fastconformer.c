/*
 * fastconformer.c — the fastconformer_rnnt backend's streams and its TRANSDUCER scorer.
 *
 * Strategy "cache_aware" (default): NeMo's cache_aware_stream_step driven exactly as its
 * CacheAwareStreamingAudioBuffer drives it. Mel frames (NeMo front end, NA normalization:
 * streamed frames equal offline ones) accumulate; a step runs on the first 1 + 8R frames, then
 * on every 8(R + 1) new frames preceded by the 9 previous mel frames (the pre-encode cache;
 * zero-padded in front while fewer exist), whose first 2 subsampled outputs are dropped. The
 * R + 1 new encoder rows (absolute positions enc_pos ..) go through the layers as a batch of
 * one sequence (fc_layers, the same code a batch of many streams runs) over the stream's cache
 * pools: per layer the projected keys and values of the last L positions plus the step's own
 * rows (a ring of L + R + 1 rows; positions before the stream's start are never in a key
 * range: NeMo's valid-length masking), and the last K - 1 GLU outputs of the depthwise conv.
 * At the end of audio the remaining frames form one more, shorter step when at least 8 remain
 * (1 for the first step), as the buffer does; fewer are dropped. Pools and scratch are
 * allocated at open; nothing grows with time. stream.cache_dtype "f16" makes the pools IEEE
 * f16 (half the bytes; rounded once when written, computed in f32).
 *
 * Strategy "offline": all audio is kept; at finish the whole-utterance mel goes through the
 * encoder with the context mask of the stream's att_context ([-1, -1] = full attention), or
 * banded local attention (window config.local_attn_window) above config.local_attn_threshold
 * encoder frames (strategy "offline_local" forces it, "offline_full" never switches).
 *
 * Scorer (plugin.h TRANSDUCER): the encoder rows of the latest process call, projected by the
 * joint's encoder Linear, are held; pred_out is the prediction network's top LSTM output
 * already projected by the joint's prediction Linear (so the joint is ReLU(enc + pred) -> out).
 * The scorer's arrays are host memory; the LSTM (gather, gemm, lstm_cell) and the joint (add,
 * ReLU, gemm) run on table scratch with uploads / downloads of those few floats.
 */
#include "fc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define FC_PRE_CACHE 9  /* pre-encode cache in mel frames (subsampling factor + 1) */
#define FC_DROP 2       /* subsampled rows of the pre-encode cache dropped */

enum { FC_CACHE_AWARE = 0, FC_OFFLINE = 1, FC_OFFLINE_LOCAL = 2, FC_OFFLINE_FULL = 3 };

static int step_frames(const fc_stream *s) { return s->steps ? 8 * (s->ctx[1] + 1) : 1 + 8 * s->ctx[1]; }

/* Append n encoder rows x [n, d] (table memory) to the scorer's window (joint encoder
 * projection) and to the host record of raw rows. */
static sr_status push_frames(fc_stream *s, const float *x, int n)
{
    const fc_model *w = s->w;
    const sr_kernels *k = w->k;
    int J = w->joint_hidden;
    if (s->encp_n + n > s->encp_cap) {
        int cap = SR_MAX(2 * s->encp_cap, s->encp_n + n);
        float *p = k->alloc((size_t)cap * J * sizeof(float));
        if (!p) return sr_error(SR_ERR_NOMEM, "fastconformer: joint frame window of %d rows", cap);
        sr_status st = k->copy2d(s->encp_n, J, s->encp, J, p, J);
        if (st) {
            k->free(p);
            return st;
        }
        if (s->encp) k->free(s->encp);
        s->encp = p;
        s->encp_cap = cap;
    }
    if (s->encp_n + n > s->enc_raw_cap) {
        int cap = SR_MAX(2 * s->enc_raw_cap, s->encp_n + n);
        float *r = realloc(s->enc_raw, (size_t)cap * w->d * sizeof(float));
        if (!r) return sr_error(SR_ERR_NOMEM, "fastconformer: encoder frame window of %d rows", cap);
        s->enc_raw = r;
        s->enc_raw_cap = cap;
    }
    sr_status st = k->download(s->enc_raw + (size_t)s->encp_n * w->d, x, (size_t)n * w->d * sizeof(float));
    if (!st) st = fc_gemm_rows(k, n, x, w->d, w->j_enc.w, w->j_enc.b, SR_ACT_NONE, 1.0f, 0.0f,
                               s->encp + (size_t)s->encp_n * J, J);
    if (st) return st;
    s->encp_n += n;
    s->frames_total += n;
    return SR_OK;
}

/* One cache-aware step over the first `nnew` pending mel frames (after the mel_hist cached). */
static sr_status stream_step(fc_stream *s, int nnew)
{
    const fc_model *w = s->w;
    const sr_kernels *k = w->k;
    int F = w->n_mels, first = s->steps == 0;
    int hist = first ? 0 : FC_PRE_CACHE;
    int pad = hist - s->mel_hist; /* zero frames in front while fewer than 9 exist */
    int nin = hist + nnew;
    if (nin > FC_PRE_CACHE + 8 * (s->ctx[1] + 1)) /* the buffers sized at open */
        return sr_error(SR_ERR_ARG, "fastconformer: a step of %d mel frames exceeds the stream's %d", nin,
                        FC_PRE_CACHE + 8 * (s->ctx[1] + 1));
    float *in = s->sub_in;
    k->zero(in, (size_t)pad * F * sizeof(float));
    sr_status st = k->upload(in + (size_t)pad * F, s->mel + (size_t)(s->mel_hist - (hist - pad)) * F,
                             (size_t)(hist - pad + nnew) * F * sizeof(float));
    int n = 0;
    if (!st) st = fc_subsample_into(w, in, nin, s->x, &n, s->sub_scratch);
    if (st) return st;
    int drop = first ? 0 : FC_DROP;
    int T = n - drop;
    float *x = s->x + (size_t)drop * w->d;
    if ((st = k->scale(T, w->d, w->xscale, x, w->d))) return st;
    /* a batch of one sequence: rows 0 .. T-1 at positions enc_pos .., cache slot 0 */
    fc_mask mk = {.left = s->ctx[0], .right = s->ctx[1], .style = w->att_style};
    int row0[2] = {0, T}, slot[1] = {0};
    int64_t pos[1] = {s->enc_pos};
    sr_kbatch b = {.n_seq = 1, .row0 = row0, .slot = slot, .pos = pos};
    fc_seqs sq = {.b = &b, .mk = &mk, .kc = s->kc, .vc = s->vc, .conv = s->cc, .kw = s->kw, .vw = s->vw};
    if ((st = fc_layers(w, &s->ws, x, &sq))) return st;
    s->enc_pos += T;
    s->chan_len = (int)SR_MIN(s->enc_pos, (int64_t)s->csize);
    s->steps++;
    /* keep the last 9 mel frames as the next pre-encode cache */
    int total = s->mel_hist + nnew;
    int keep = SR_MIN(FC_PRE_CACHE, total);
    memmove(s->mel, s->mel + (size_t)(total - keep) * F, (size_t)(s->mel_n - (total - keep)) * F * sizeof(float));
    s->mel_n -= total - keep;
    s->mel_hist = keep;
    return push_frames(s, x, T);
}

static sr_status add_mel(fc_stream *s, const float *frames, int n)
{
    int F = s->w->n_mels;
    if (s->mel_n + n > s->mel_cap) {
        int cap = SR_MAX(2 * s->mel_cap, s->mel_n + n);
        float *p = realloc(s->mel, (size_t)cap * F * sizeof(float));
        if (!p) return sr_error(SR_ERR_NOMEM, "fastconformer: mel buffer of %d frames", cap);
        s->mel = p;
        s->mel_cap = cap;
    }
    memcpy(s->mel + (size_t)s->mel_n * F, frames, (size_t)n * F * sizeof(float));
    s->mel_n += n;
    return SR_OK;
}

static sr_status run_steps(fc_stream *s, int final)
{
    sr_status st;
    while (s->mel_n - s->mel_hist >= step_frames(s))
        if ((st = stream_step(s, step_frames(s)))) return st;
    if (final) {
        int rest = s->mel_n - s->mel_hist;
        if (rest >= (s->steps ? 8 : 1) && (st = stream_step(s, rest))) return st;
    }
    return SR_OK;
}

/* Offline: the whole mel [T, n_mels] through the encoder (full, context-masked or banded
 * attention as the stream's strategy and length decide), into the scorer's window. */
static sr_status encode_offline(fc_stream *s, const float *mel, int T)
{
    int local = s->local;
    if (local < 0) local = fc_subsample_len(T) > s->w->local_threshold;
    const int *ctx = local ? s->w->local_w : s->ctx;
    float *enc = NULL;
    int ne = 0;
    sr_status st = fc_encode_offline(s->w, mel, T, ctx, local, &enc, &ne, NULL);
    if (!st) st = push_frames(s, enc, ne);
    if (enc) s->w->k->free(enc);
    return st;
}

sr_status fc_stream_feed_mel(fc_stream *s, const float *mel, int n, int final)
{
    s->encp_n = 0;
    s->frames_base = s->frames_total;
    sr_status st = add_mel(s, mel, n);
    if (st || !s->offline) return st ? st : run_steps(s, final);
    return final && s->mel_n ? encode_offline(s, s->mel, s->mel_n) : SR_OK;
}

static sr_status ensure_mel_new(fc_stream *s, int frames)
{
    if (frames <= s->mel_new_cap) return SR_OK;
    float *p = realloc(s->mel_new, (size_t)frames * s->w->n_mels * sizeof(float));
    if (!p) return sr_error(SR_ERR_NOMEM, "fastconformer: %d mel frames", frames);
    s->mel_new = p;
    s->mel_new_cap = frames;
    return SR_OK;
}

static sr_status process_offline(fc_stream *s, const float *pcm, size_t n, int final)
{
    if (s->audio_n + n > s->audio_cap) {
        size_t cap = SR_MAX(2 * s->audio_cap, s->audio_n + n);
        float *p = realloc(s->audio, cap * sizeof(float));
        if (!p) return sr_error(SR_ERR_NOMEM, "fastconformer: offline audio of %zu samples", cap);
        s->audio = p;
        s->audio_cap = cap;
    }
    memcpy(s->audio + s->audio_n, pcm, n * sizeof(float));
    s->audio_n += n;
    if (!final || s->audio_n < (size_t)s->w->hop) return SR_OK;
    float *mel = NULL;
    int T = 0;
    sr_status st = sr_mel_compute(s->w->mel, s->audio, s->audio_n, &mel, &T);
    if (!st) st = encode_offline(s, mel, T);
    free(mel);
    return st;
}

static sr_status fc_process(void *state, const float *pcm, size_t n, int final)
{
    fc_stream *s = state;
    s->encp_n = 0; /* the scorer's window holds this call's frames only */
    s->frames_base = s->frames_total;
    s->samples_in += (int64_t)n;
    if (s->offline) return process_offline(s, pcm, n, final);
    sr_status st;
    int nf = sr_mel_stream_pending(s->ms, n);
    if ((st = ensure_mel_new(s, nf))) return st;
    int got = 0;
    if ((st = sr_mel_stream_feed(s->ms, pcm, n, s->mel_new, nf, &got))) return st;
    if ((st = add_mel(s, s->mel_new, got))) return st;
    if (final) {
        nf = sr_mel_stream_pending(s->ms, 0);
        if ((st = ensure_mel_new(s, nf))) return st;
        if ((st = sr_mel_stream_finish(s->ms, s->mel_new, nf, &got))) return st;
        if ((st = add_mel(s, s->mel_new, got))) return st;
    }
    return run_steps(s, final);
}

static void fc_reset(void *state)
{
    fc_stream *s = state;
    const sr_kernels *k = s->w->k;
    if (s->ms) sr_mel_stream_reset(s->ms);
    s->mel_n = s->mel_hist = 0;
    s->steps = 0;
    /* positions restart at 0, so old rows are out of every key range; cleared all the same
     * (the conv states are read as they are; the working pools are restaged every step) */
    if (s->kc) sr_kpool_clear(k, s->kc, 0);
    if (s->vc) sr_kpool_clear(k, s->vc, 0);
    if (s->cc) sr_kpool_clear(k, s->cc, 0);
    s->chan_len = 0;
    s->enc_pos = 0;
    s->audio_n = 0;
    s->encp_n = 0;
    s->frames_base = s->frames_total = 0;
    s->samples_in = 0;
}

static void fc_stream_close(void *state)
{
    fc_stream *s = state;
    if (!s) return;
    const sr_kernels *k = s->w->k;
    sr_mel_stream_close(s->ms);
    free(s->mel_new);
    free(s->mel);
    if (s->sub_in) k->free(s->sub_in);
    if (s->sub_scratch) k->free(s->sub_scratch);
    if (s->x) k->free(s->x);
    sr_kpool_free(k, s->kc);
    sr_kpool_free(k, s->vc);
    sr_kpool_free(k, s->cc);
    sr_kpool_free(k, s->kw);
    sr_kpool_free(k, s->vw);
    fc_work_free(s->w, &s->ws);
    free(s->audio);
    if (s->encp) k->free(s->encp);
    free(s->enc_raw);
    if (s->jh) k->free(s->jh);
    free(s);
}

static size_t fc_state_bytes(const void *state)
{
    const fc_stream *s = state;
    const fc_model *w = s->w;
    size_t b = sizeof *s;
    b += (size_t)s->mel_new_cap * w->n_mels * sizeof(float);
    b += (size_t)s->mel_cap * w->n_mels * sizeof(float);
    if (s->sub_in) b += (size_t)(FC_PRE_CACHE + 8 * (s->ctx[1] + 1)) * w->n_mels * sizeof(float);
    b += s->sub_scratch_n * sizeof(float);
    b += (size_t)s->x_cap * w->d * sizeof(float);
    const sr_kpool *pools[5] = {s->kc, s->vc, s->cc, s->kw, s->vw};
    for (int i = 0; i < 5; i++) b += pools[i] ? pools[i]->bytes : 0;
    b += s->ws.bytes;
    b += s->audio_cap * sizeof(float);
    b += (size_t)s->encp_cap * w->joint_hidden * sizeof(float);
    b += (size_t)s->enc_raw_cap * w->d * sizeof(float);
    b += s->scorer_bytes;
    return b;
}

/* ---- scorer ---- */

static int tr_frames(void *ctx) { return (int)((fc_stream *)ctx)->frames_total; }

static sr_status tr_predict(void *ctx, const float *state_in, int32_t token, float *state_out,
                            float *pred_out)
{
    fc_stream *s = ctx;
    const fc_model *w = s->w;
    const sr_kernels *k = w->k;
    int H = w->pred_hidden, J = w->joint_hidden;
    size_t nstate = (size_t)2 * w->pred_layers * H * sizeof(float);
    if (token < -1 || token >= w->vocab)
        return sr_error(SR_ERR_ARG, "fastconformer: predict on token %d (vocabulary %d, blank never fed)", token, w->vocab);
    /* state layout: per layer h [H] then c [H]; the start state is zero (NeMo's SOS with
     * blank-as-pad), and so is the start symbol's embedding */
    sr_status st = SR_OK;
    if (state_in) st = k->upload(s->pstate, state_in, nstate);
    else k->zero(s->pstate, nstate);
    if (st) return st;
    if (token < 0) k->zero(s->lstm_in, (size_t)H * sizeof(float));
    else if ((st = k->gather(w->embed, &token, 1, s->lstm_in, H))) return st;
    const float *inp = s->lstm_in;
    for (int l = 0; l < w->pred_layers; l++) {
        float *h = s->pstate + (size_t)l * 2 * H, *c = h + H;
        /* gates [4H] = W_ih x + b_ih + W_hh h + b_hh, order i, f, g, o; then the cell updates
         * c in place and overwrites h (read by the gemm before) */
        if ((st = k->gemm(1, inp, H, w->lstm_wih[l], w->lstm_bih[l], SR_ACT_NONE, 1.0f, 0.0f, s->gates, 4 * H)) ||
            (st = k->gemm(1, h, H, w->lstm_whh[l], w->lstm_bhh[l], SR_ACT_NONE, 1.0f, 1.0f, s->gates, 4 * H)) ||
            (st = k->lstm_cell(1, H, s->gates, 4 * H, c, H, h, H)))
            return st;
        inp = h;
    }
    /* pred_out = joint.pred(top h) */
    if ((st = k->gemm(1, inp, H, w->j_pred.w, w->j_pred.b, SR_ACT_NONE, 1.0f, 0.0f, s->pout, J)) ||
        (st = k->download(state_out, s->pstate, nstate)))
        return st;
    return k->download(pred_out, s->pout, (size_t)J * sizeof(float));
}

static sr_status tr_joint(void *ctx, int t, const float *pred_out, float *logits)
{
    fc_stream *s = ctx;
    const fc_model *w = s->w;
    const sr_kernels *k = w->k;
    int J = w->joint_hidden;
    int64_t r = (int64_t)t - s->frames_base;
    if (r < 0 || r >= s->encp_n)
        return sr_error(SR_ERR_ARG, "fastconformer: joint on frame %d, frames %lld..%lld are held", t,
                        (long long)s->frames_base, (long long)(s->frames_base + s->encp_n - 1));
    /* ReLU(enc_proj[t] + pred_out) -> Linear */
    sr_status st;
    if ((st = k->upload(s->jp, pred_out, (size_t)J * sizeof(float))) ||
        (st = k->copy2d(1, J, s->encp + (size_t)r * J, J, s->jh, J)) ||
        (st = k->add(1, J, s->jp, J, 1.0f, s->jh, J)) ||
        (st = k->act(SR_ACT_RELU, (size_t)J, s->jh, s->jh)) ||
        (st = k->gemm(1, s->jh, J, w->j_out.w, w->j_out.b, SR_ACT_NONE, 1.0f, 0.0f, s->logits, w->n_out)))
        return st;
    return k->download(logits, s->logits, (size_t)w->n_out * sizeof(float));
}

static sr_status fc_stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch,
                                int slot, void **state,
                                sr_chunking *ck, sr_scorer *sc)
{
    (void)batch;
    (void)slot;
    const fc_model *w = m->impl;
    int strategy = FC_CACHE_AWARE;
    if (cfg->strategy) {
        if (!strcmp(cfg->strategy, "cache_aware")) strategy = FC_CACHE_AWARE;
        else if (!strcmp(cfg->strategy, "offline")) strategy = FC_OFFLINE;
        else if (!strcmp(cfg->strategy, "offline_local")) strategy = FC_OFFLINE_LOCAL;
        else if (!strcmp(cfg->strategy, "offline_full")) strategy = FC_OFFLINE_FULL;
        else return sr_error(SR_ERR_ARG, "stream.strategy: \"%s\" unknown for fastconformer_rnnt (known: cache_aware, offline, offline_local, offline_full)", cfg->strategy);
    }
    int ctx[2] = {w->ctx[0][0], w->ctx[0][1]};
    if (cfg->att_context[0] || cfg->att_context[1]) {
        ctx[0] = cfg->att_context[0];
        ctx[1] = cfg->att_context[1];
        int known = 0;
        for (int i = 0; i < w->n_ctx; i++) known |= w->ctx[i][0] == ctx[0] && w->ctx[i][1] == ctx[1];
        int full = ctx[0] == -1 && ctx[1] == -1;
        if (!known && !(full && strategy != FC_CACHE_AWARE)) {
            char list[512] = "";
            size_t o = 0;
            for (int i = 0; i < w->n_ctx && o < sizeof list - 24; i++)
                o += (size_t)snprintf(list + o, sizeof list - o, "%s[%d, %d]", i ? ", " : "", w->ctx[i][0], w->ctx[i][1]);
            if (w->att_style == FC_STYLE_CHUNKED && ctx[1] >= 0 && ctx[0] % (ctx[1] + 1))
                return sr_error(SR_ERR_ARG, "stream.att_context: left %d is not divisible by right + 1 = %d (and the model was trained with %s)", ctx[0], ctx[1] + 1, list);
            return sr_error(SR_ERR_ARG, "stream.att_context: [%d, %d] is not one the model was trained with (%s%s)", ctx[0], ctx[1], list,
                            strategy == FC_CACHE_AWARE ? "" : "; offline also takes [-1, -1]");
        }
    }
    if (cfg->max_symbols < 0) return sr_error(SR_ERR_ARG, "stream.max_symbols: %d is negative", cfg->max_symbols);
    int f16 = 0;
    if (cfg->cache_dtype && strcmp(cfg->cache_dtype, "f32")) {
        if (strcmp(cfg->cache_dtype, "f16"))
            return sr_error(SR_ERR_ARG, "stream.cache_dtype: \"%s\" unknown for fastconformer_rnnt (known: f32, f16)",
                            cfg->cache_dtype);
        f16 = 1; /* offline strategies have no caches: accepted, nothing to store */
    }
    fc_stream *s = sr_calloc(1, sizeof *s, "fastconformer stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->offline = strategy != FC_CACHE_AWARE;
    s->local = strategy == FC_OFFLINE_LOCAL ? 1 : strategy == FC_OFFLINE_FULL ? 0 : -1;
    s->ctx[0] = ctx[0];
    s->ctx[1] = ctx[1];
    sr_status st = SR_ERR_NOMEM;
    const sr_kernels *k = w->k;
    int d = w->d, R = ctx[1], H = w->pred_hidden, J = w->joint_hidden;
    /* scorer scratch in table memory, one block */
    size_t nsc = 3 * (size_t)J + (size_t)w->n_out + 2 * (size_t)w->pred_layers * H + (size_t)H + 4 * (size_t)H;
    s->jh = k->alloc(nsc * sizeof(float));
    if (!s->jh) {
        st = sr_error(SR_ERR_NOMEM, "fastconformer: scorer scratch of %zu floats", nsc);
        goto fail;
    }
    s->scorer_bytes = nsc * sizeof(float);
    s->jp = s->jh + J;
    s->pout = s->jp + J;
    s->logits = s->pout + J;
    s->pstate = s->logits + w->n_out;
    s->lstm_in = s->pstate + 2 * (size_t)w->pred_layers * H;
    s->gates = s->lstm_in + H;
    if (!s->offline) {
        if ((st = sr_mel_stream_open(w->mel, &s->ms))) goto fail;
        st = SR_ERR_NOMEM;
        int nin = FC_PRE_CACHE + 8 * (R + 1);
        s->csize = ctx[0];
        s->x_cap = fc_subsample_len(nin);
        s->sub_in = k->alloc((size_t)nin * w->n_mels * sizeof(float));
        s->x = k->alloc((size_t)s->x_cap * d * sizeof(float));
        /* the largest step input is nin frames (a step never takes more: run_steps) */
        s->sub_scratch_n = fc_subsample_scratch(w, nin);
        s->sub_scratch = k->alloc(s->sub_scratch_n * sizeof(float));
        if (!s->sub_in || !s->x || !s->sub_scratch) {
            st = sr_error(SR_ERR_NOMEM, "fastconformer: step buffers of %d mel frames", nin);
            goto fail;
        }
        /* K / V pools: a step's R + 1 rows attend together with the L cached positions, so a
         * ring of L + R + 1 rows holds every key of a step. f16 streams store K / V rounded in
         * rings of max(L, R + 1) rows and attend in f32 working pools of one layer (fc_seqs),
         * so a step's own rows are exact while it runs, as with f32 */
        s->cache_f16 = f16;
        sr_dtype dt = f16 ? SR_F16 : SR_F32;
        int rows = f16 ? SR_MAX(SR_MAX(s->csize, R + 1), 1) : s->csize + R + 1;
        if ((st = sr_kpool_create(k, dt, w->n_layers, 1, rows, d, &s->kc)) ||
            (st = sr_kpool_create(k, dt, w->n_layers, 1, rows, d, &s->vc)) ||
            (f16 && (st = sr_kpool_create(k, SR_F32, 1, 1, s->csize + R + 1, d, &s->kw))) ||
            (f16 && (st = sr_kpool_create(k, SR_F32, 1, 1, s->csize + R + 1, d, &s->vw))) ||
            (w->kernel > 1 && (st = sr_kpool_create(k, dt, w->n_layers, 1, w->kernel - 1, d, &s->cc))) ||
            (st = fc_work_init(&s->ws, w, R + 1, 0, f16 ? s->csize : 0)))
            goto fail;
    }
    /* chunking: the first step needs mel frame 8R, complete once 160 * 8R + 256 samples (the
     * centred 512-sample window) are in; later steps every 8(R + 1) frames */
    size_t step = (size_t)8 * (R + 1) * w->hop;
    ck->chunk = cfg->chunk_ms > 0 ? (size_t)cfg->chunk_ms * 16 : step;
    ck->first_chunk = cfg->first_chunk_ms > 0 ? (size_t)cfg->first_chunk_ms * 16
                      : cfg->chunk_ms > 0 ? ck->chunk
                                          : (size_t)8 * R * w->hop + 256;
    if (s->offline && cfg->chunk_ms <= 0) ck->chunk = ck->first_chunk = 16000;
    memset(sc, 0, sizeof *sc);
    sc->kind = SR_SCORER_TRANSDUCER;
    sc->ctx = s;
    sc->vocab = w->vocab + 1;
    sc->blank = w->blank;
    sc->eot = -1;
    sc->tr_frames = tr_frames;
    sc->pred_state = 2 * w->pred_layers * w->pred_hidden;
    sc->pred_dim = w->joint_hidden;
    sc->tr_predict = tr_predict;
    sc->tr_joint = tr_joint;
    sc->tr_max_symbols = cfg->max_symbols > 0 ? cfg->max_symbols : w->max_symbols;
    sc->tr_n_durations = w->n_durations;
    sc->tr_durations = w->durations;
    *state = s;
    return SR_OK;
fail:
    fc_stream_close(s);
    return st;
}

static sr_status fc_load_ops(sr_model *m, sr_h5 *f) { return fc_model_load(m, f); }

const sr_model_ops sr_fastconformer_rnnt_ops = {
    .name = "fastconformer_rnnt",
    .description = "NeMo cache-aware streaming FastConformer with an RNN-T / TDT decoder (Nemotron)",
    .default_decoder = "rnnt_greedy",
    .load = fc_load_ops,
    .unload = fc_model_unload,
    .stream_open = fc_stream_open,
    .process = fc_process,
    .reset = fc_reset,
    .stream_close = fc_stream_close,
    .state_bytes = fc_state_bytes,
};
