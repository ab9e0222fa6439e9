/*
 * fastconformer.c — the fastconformer_rnnt backend's batch contexts, streams and its
 * TRANSDUCER scorer.
 *
 * Batch context (batch_open): the config validated once (fc_config), the cache pools with one
 * slot per stream, the encoder workspace, step buffers and scorer scratch sized for a batch of
 * max_streams streams. A stream (stream_open) takes one slot and keeps only its private state;
 * a lone stream lives in a batch of one, and process is process_batch with count = 1.
 *
 * Strategy "cache_aware" (default): NeMo's cache_aware_stream_step driven exactly as its
 * CacheAwareStreamingAudioBuffer drives it. Mel frames (NeMo front end, NA normalization:
 * streamed frames equal offline ones) accumulate; a step runs on the first 1 + 8R frames, then
 * on every 8(R + 1) new frames preceded by the 9 previous mel frames (the pre-encode cache;
 * zero-padded in front while fewer exist), whose first 2 subsampled outputs are dropped. At the
 * end of audio the remaining frames form one more, shorter step when at least 8 remain (1 for
 * the first step), as the buffer does; fewer are dropped. process_batch runs the mel front end
 * of each stream, then rounds while any stream has a step ready: each ready stream's step is
 * subsampled (one stream at a time, shared buffers) into consecutive rows of the round, the
 * round's R + 1 (or fewer) rows per stream at its absolute positions enc_pos .. go through the
 * layers as ONE batch of sequences (fc_layers over an sr_kbatch of the streams' slots) over the
 * pools: per layer the projected keys and values of the last L positions plus the step's own
 * rows (a ring of L + R + 1 rows; positions before the stream's start are never in a key
 * range: NeMo's valid-length masking), and the last K - 1 GLU outputs of the depthwise conv;
 * then one joint encoder projection of all the round's rows, written straight into the batch's
 * frame window (fc_batch.jw; the batch keeps each slot's row numbers). Every op is
 * row-independent, so a stream's rows are bit for bit those it computes alone. Pools and
 * scratch are allocated at batch_open; nothing grows while streams are fed chunk by chunk.
 * stream.cache_dtype "f16" makes the pools IEEE f16 (half the bytes; rounded once when
 * written, computed in f32).
 *
 * Strategy "offline": all audio is kept; at finish the whole-utterance mel goes through the
 * encoder with the context mask of the stream's att_context ([-1, -1] = full attention), or
 * banded local attention (window config.local_attn_window) above config.local_attn_threshold
 * encoder frames (strategy "offline_local" forces it, "offline_full" never switches); in
 * process_batch one stream after the other.
 *
 * Scorer (plugin.h TRANSDUCER): the encoder rows of each stream's latest process call,
 * projected by the joint's encoder Linear, are held in the batch's frame window; pred_out is
 * the prediction network's top LSTM output already projected by the joint's prediction Linear
 * (so the joint is ReLU(enc + pred) -> out).
 * The scorer's arrays are host memory; the batched forms run the LSTM (one gather, per layer
 * one gemm for W_ih and one for W_hh and one lstm_cell over all requests, one j_pred gemm; the
 * start symbol's zero input by one copy_rows) and
 * the joint (add, ReLU, one j_out gemm) on the batch's table scratch, one row per request, with
 * one upload / download of those few floats per call for all requests (staged in host rows:
 * on a device each copy waits for the queue); the solo forms are these with one request.
 */
#include "fc.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define FC_PRE_CACHE 9  /* pre-encode cache in mel frames (subsampling factor + 1) */
#define FC_DROP 2       /* subsampled rows of the pre-encode cache dropped */

static int step_frames(const fc_stream *s)
{
    return s->steps ? 8 * (s->b->cfg.ctx[1] + 1) : 1 + 8 * s->b->cfg.ctx[1];
}

/* Mel frames of the step stream s can run now (0: none): a full step, else with final the
 * last, shorter one. */
static int step_ready(const fc_stream *s, int final)
{
    int rest = s->mel_n - s->mel_hist, full = step_frames(s);
    if (rest >= full) return full;
    return final && rest >= (s->steps ? 8 : 1) ? rest : 0;
}

/* ---- config ---- */

/* Validate a stream config for model w (batch_open and stream_open: SR_ERR_ARG naming the
 * field). */
static sr_status fc_config(const fc_model *w, const sr_stream_config *cfg, fc_cfg *out)
{
    memset(out, 0, sizeof *out);
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
    out->strategy = strategy;
    out->offline = strategy != FC_CACHE_AWARE;
    out->local = strategy == FC_OFFLINE_LOCAL ? 1 : strategy == FC_OFFLINE_FULL ? 0 : -1;
    out->ctx[0] = ctx[0];
    out->ctx[1] = ctx[1];
    out->f16 = f16;
    return SR_OK;
}

/* ---- batch context ---- */

static void fc_batch_close(void *batch)
{
    fc_batch *b = batch;
    if (!b) return;
    const sr_kernels *k = b->w->k;
    sr_kpool_free(k, b->kc);
    sr_kpool_free(k, b->vc);
    sr_kpool_free(k, b->cc);
    sr_kpool_free(k, b->kw);
    sr_kpool_free(k, b->vw);
    fc_work_free(b->w, &b->ws);
    sr_kgraph_free(k, b->g_layers);
    float *tab[7] = {b->sub_in, b->sub_x, b->sub_scratch, b->x, b->jh, b->jw, b->jw_alt};
    for (int i = 0; i < 7; i++)
        if (tab[i]) k->free(tab[i]);
    for (int i = 0; b->win && i < b->max_streams; i++) free(b->win[i].row);
    free(b->win);
    free(b->wsrc);
    free(b->call);
    free(b->hstate);
    free(b->jsrc);
    free(b->ids);
    free(b->hmel);
    free(b->hx);
    free(b);
}

static size_t fc_batch_bytes(const void *batch)
{
    const fc_batch *b = batch;
    size_t n = b->bytes + ((size_t)b->jw_cap + (size_t)b->jw_alt_cap) * b->w->joint_hidden * sizeof(float) +
               b->wsrc_cap * sizeof *b->wsrc;
    for (int i = 0; i < b->max_streams; i++) n += (size_t)b->win[i].cap * sizeof(int);
    return n;
}

/* The chunks a stream of config cfg is fed (samples; sr_chunking): the first step needs mel
 * frame 8R, complete once 160 * 8R + 256 samples (the centred 512-sample window) are in;
 * later steps every 8(R + 1) frames; offline 1 s unless the config says. */
static void fc_chunks(const fc_model *w, const sr_stream_config *cfg, const fc_cfg *c, size_t *chunk, size_t *first)
{
    int R = c->ctx[1];
    size_t step = (size_t)8 * (R + 1) * w->hop;
    *chunk = cfg->chunk_ms > 0 ? (size_t)cfg->chunk_ms * 16 : step;
    *first = cfg->first_chunk_ms > 0 ? (size_t)cfg->first_chunk_ms * 16
             : cfg->chunk_ms > 0 ? *chunk
                                 : (size_t)8 * R * w->hop + 256;
    if (c->offline && cfg->chunk_ms <= 0) *chunk = *first = 16000;
}

static sr_status fc_batch_open(const sr_model *m, const sr_stream_config *cfg, int max_streams,
                               void **batch)
{
    *batch = NULL;
    const fc_model *w = m->impl;
    if (max_streams < 1)
        return sr_error(SR_ERR_ARG, "fastconformer: batch context of %d streams (at least 1)", max_streams);
    fc_cfg c;
    sr_status st = fc_config(w, cfg, &c);
    if (st) return st;
    fc_batch *b = sr_calloc(1, sizeof *b, "fastconformer batch context");
    if (!b) return SR_ERR_NOMEM;
    b->m = m;
    b->w = w;
    b->cfg = c;
    b->max_streams = max_streams;
    b->bytes = sizeof *b;
    const sr_kernels *k = w->k;
    size_t S = (size_t)max_streams;
    int d = w->d, R = c.ctx[1], H = w->pred_hidden, J = w->joint_hidden;
    /* host bookkeeping, one block: call [S] pointers, then pos [S], mk [S], row0 [S + 1],
     * slot, seq, nnew, seen [S] */
    size_t host = S * sizeof(fc_stream *) + S * sizeof(int64_t) + (4 * S + 1) * sizeof(int) + S * sizeof(fc_mask) + S;
    char *h = sr_calloc(1, host, "fastconformer batch bookkeeping");
    if (!h) {
        fc_batch_close(b);
        return SR_ERR_NOMEM;
    }
    b->call = (fc_stream **)(void *)h;
    h += S * sizeof(fc_stream *);
    b->pos = (int64_t *)(void *)h;
    h += S * sizeof(int64_t);
    b->mk = (fc_mask *)(void *)h;
    h += S * sizeof(fc_mask);
    b->row0 = (int *)(void *)h;
    b->slot = b->row0 + S + 1;
    b->seq = b->slot + S;
    b->nnew = b->seq + S;
    b->seen = (unsigned char *)(b->nnew + S);
    b->bytes += host;
    /* scorer scratch in table memory, one block of Q rows per array: a row per request, up to
     * stream.beam requests per stream in one call (a beam decoder's calls of a round; beam 0
     * is rnnt_beam's default of 4) */
    size_t Q = S * (size_t)(cfg->beam > 0 ? cfg->beam : 4);
    if (Q > INT_MAX) {
        st = sr_error(SR_ERR_ARG, "fastconformer: %d streams x stream.beam %d scorer rows", max_streams, cfg->beam);
        goto fail;
    }
    b->req_max = (int)Q;
    size_t nsc = 3 * (size_t)J + (size_t)w->n_out + 2 * (size_t)w->pred_layers * H + (size_t)H + 4 * (size_t)H;
    b->jh = k->alloc((Q * nsc + H) * sizeof(float));
    if (!b->jh) {
        st = sr_error(SR_ERR_NOMEM, "fastconformer: scorer scratch of %zu floats", Q * nsc + H);
        goto fail;
    }
    k->zero(b->jh + Q * nsc, (size_t)H * sizeof(float));
    b->bytes += (Q * nsc + H) * sizeof(float);
    b->zrow = b->jh + Q * nsc;
    b->jp = b->jh + Q * J;
    b->pout = b->jp + Q * J;
    b->logits = b->pout + Q * J;
    b->pstate = b->logits + Q * w->n_out;
    b->lstm_in = b->pstate + Q * 2 * w->pred_layers * H;
    b->gates = b->lstm_in + Q * H;
    /* host staging of the scorer's rows (one upload / download per batched call), the
     * predict tokens, the joint's frame rows */
    size_t nst = 2 * (size_t)w->pred_layers * H + (size_t)J + (size_t)w->n_out;
    b->hstate = sr_malloc(Q * nst * sizeof(float), "fastconformer scorer staging");
    b->ids = sr_malloc(Q * sizeof *b->ids, "fastconformer predict tokens");
    b->jsrc = sr_malloc(Q * sizeof *b->jsrc, "fastconformer joint rows");
    if (!b->hstate || !b->ids || !b->jsrc) {
        st = SR_ERR_NOMEM;
        goto fail;
    }
    b->bytes += Q * (nst * sizeof(float) + sizeof *b->ids + sizeof *b->jsrc);
    b->hpred = b->hstate + Q * 2 * w->pred_layers * H;
    b->hlogits = b->hpred + Q * J;
    if (!(b->win = sr_calloc(S, sizeof *b->win, "fastconformer frame windows"))) {
        st = SR_ERR_NOMEM;
        goto fail;
    }
    b->bytes += S * sizeof *b->win;
    if (!c.offline) {
        /* a step's input is at most nin mel frames (step_ready), its output sub_rows rows, of
         * which at most R + 1 go to the round */
        b->csize = c.ctx[0];
        b->nin = FC_PRE_CACHE + 8 * (R + 1);
        b->sub_rows = fc_subsample_len(b->nin);
        b->sub_scratch_n = fc_subsample_scratch(w, b->nin);
        size_t rows = S * (size_t)(R + 1), nmel = S * (size_t)b->nin * w->n_mels;
        /* every stream's step input subsampled together: S images */
        b->sub_in = k->alloc(nmel * sizeof(float));
        b->sub_x = k->alloc(S * (size_t)b->sub_rows * d * sizeof(float));
        b->sub_scratch = k->alloc(S * b->sub_scratch_n * sizeof(float));
        b->x = k->alloc(rows * d * sizeof(float));
        b->hmel = sr_malloc(nmel * sizeof(float), "fastconformer step input staging");
        b->hx = sr_malloc(rows * d * sizeof(float), "fastconformer round rows staging");
        if (!b->sub_in || !b->sub_x || !b->sub_scratch || !b->x || !b->hmel || !b->hx) {
            st = sr_error(SR_ERR_NOMEM, "fastconformer: step buffers of %d streams (%d mel frames each)", max_streams, b->nin);
            goto fail;
        }
        b->bytes += (2 * nmel + S * ((size_t)b->sub_rows * d + b->sub_scratch_n) + rows * 2 * d) * sizeof(float);
        /* the frame window for calls of the config's chunks: at most `per` rows a stream (the
         * steps a chunk completes, one more where the chunk and step grids are offset, one
         * more for the final remainder), so the streams hold at most S per rows at a time and
         * a window of four times that never grows, a compaction leaving at least three
         * quarters of it free */
        size_t chunk, first, step = (size_t)8 * (R + 1) * w->hop;
        fc_chunks(w, cfg, &c, &chunk, &first);
        size_t per = (SR_MAX(chunk, first) / step + 2) * (size_t)(R + 1);
        if (per > (size_t)INT_MAX / 4 / S) {
            st = sr_error(SR_ERR_ARG, "fastconformer: chunks of %zu samples give frame windows of %zu rows per stream", chunk, per);
            goto fail;
        }
        int cap = (int)(4 * S * per);
        b->jw = k->alloc((size_t)cap * J * sizeof(float));
        b->jw_alt = k->alloc((size_t)cap * J * sizeof(float));
        if (!b->jw || !b->jw_alt) {
            st = sr_error(SR_ERR_NOMEM, "fastconformer: joint frame window of %d rows", cap);
            goto fail;
        }
        b->jw_cap = b->jw_alt_cap = cap;
        if (!(b->wsrc = sr_malloc(S * per * sizeof *b->wsrc, "fastconformer frame window compaction"))) {
            st = SR_ERR_NOMEM;
            goto fail;
        }
        b->wsrc_cap = S * per;
        for (int i = 0; i < max_streams; i++) {
            if (!(b->win[i].row = sr_malloc(per * sizeof(int), "fastconformer frame window rows"))) {
                st = SR_ERR_NOMEM;
                goto fail;
            }
            b->win[i].cap = (int)per;
        }
        /* K / V pools: a step's R + 1 rows attend together with the L cached positions, so a
         * ring of L + R + 1 rows holds every key of a step. f16 stores K / V rounded in rings
         * of max(L, R + 1) rows and attends in f32 working pools of one layer (fc_seqs), so a
         * step's own rows are exact while it runs, as with f32 */
        sr_dtype dt = c.f16 ? SR_F16 : SR_F32;
        int prow = c.f16 ? SR_MAX(SR_MAX(b->csize, R + 1), 1) : b->csize + R + 1;
        if ((st = sr_kpool_create(k, dt, w->n_layers, max_streams, prow, d, &b->kc)) ||
            (st = sr_kpool_create(k, dt, w->n_layers, max_streams, prow, d, &b->vc)) ||
            (c.f16 && (st = sr_kpool_create(k, SR_F32, 1, max_streams, b->csize + R + 1, d, &b->kw))) ||
            (c.f16 && (st = sr_kpool_create(k, SR_F32, 1, max_streams, b->csize + R + 1, d, &b->vw))) ||
            (w->kernel > 1 && (st = sr_kpool_create(k, dt, w->n_layers, max_streams, w->kernel - 1, d, &b->cc))) ||
            (st = fc_work_init(&b->ws, w, (int)rows, 0, c.f16 ? max_streams * b->csize : 0)))
            goto fail;
        const sr_kpool *pools[5] = {b->kc, b->vc, b->cc, b->kw, b->vw};
        for (int i = 0; i < 5; i++) b->bytes += pools[i] ? pools[i]->bytes : 0;
        b->bytes += b->ws.bytes;
    }
    *batch = b;
    return SR_OK;
fail:
    fc_batch_close(b);
    return st;
}

/* Zero slot `slot` of every pool (a stream opening it or resetting). */
static sr_status clear_slot(fc_batch *b, int slot)
{
    const sr_kernels *k = b->w->k;
    sr_kpool *pools[5] = {b->kc, b->vc, b->cc, b->kw, b->vw};
    sr_status st = SR_OK;
    for (int i = 0; i < 5 && !st; i++)
        if (pools[i]) st = sr_kpool_clear(k, pools[i], slot);
    return st;
}

/* ---- frames ---- */

/* n free rows of the frame window at *base (jw rows *base .. *base + n - 1), making room when
 * it is full (fc_batch.jw): with no live rows it restarts at row 0; else the live rows (every
 * slot's, in slot order) go to the front of jw_alt by one copy_rows and the two swap; where
 * they and the n rows would not fit, into a new window of 1.5 times the live rows plus n
 * instead (jw_alt is then dropped, to be allocated at the new size when next needed). The rows
 * become a stream's with push_frames. */
static sr_status win_reserve(fc_batch *b, int n, int *base)
{
    const sr_kernels *k = b->w->k;
    int J = b->w->joint_hidden;
    if (b->jw_n + (int64_t)n > b->jw_cap) {
        int64_t live = 0;
        for (int i = 0; i < b->max_streams; i++) live += b->win[i].n;
        int grow = live + n > b->jw_cap;
        int64_t cap = grow ? live + n + live / 2 : b->jw_cap;
        if (cap > INT_MAX) return sr_error(SR_ERR_NOMEM, "fastconformer: joint frame window of %lld rows", (long long)cap);
        if (live && (size_t)live > b->wsrc_cap) {
            const float **p = realloc(b->wsrc, (size_t)live * sizeof *p);
            if (!p) return sr_error(SR_ERR_NOMEM, "fastconformer: %lld frame window rows", (long long)live);
            b->wsrc = p;
            b->wsrc_cap = (size_t)live;
        }
        float *dst = b->jw_alt;
        if (grow || (live && b->jw_alt_cap < cap)) {
            if (!(dst = k->alloc((size_t)cap * J * sizeof(float))))
                return sr_error(SR_ERR_NOMEM, "fastconformer: joint frame window of %lld rows", (long long)cap);
        }
        if (live) {
            int j = 0;
            for (int i = 0; i < b->max_streams; i++)
                for (int r = 0; r < b->win[i].n; r++) b->wsrc[j++] = b->jw + (size_t)b->win[i].row[r] * J;
            sr_status st = k->copy_rows((int)live, J, b->wsrc, dst, J);
            if (st) {
                if (dst != b->jw_alt) k->free(dst);
                return st;
            }
            j = 0;
            for (int i = 0; i < b->max_streams; i++)
                for (int r = 0; r < b->win[i].n; r++) b->win[i].row[r] = j++;
        }
        if (grow) {
            /* the old window and its twin are too small now */
            if (b->jw) k->free(b->jw);
            if (b->jw_alt) k->free(b->jw_alt);
            b->jw = dst;
            b->jw_cap = (int)cap;
            b->jw_alt = NULL;
            b->jw_alt_cap = 0;
        } else if (live) {
            if (dst != b->jw_alt) {
                if (b->jw_alt) k->free(b->jw_alt);
                b->jw_alt_cap = (int)cap;
            }
            b->jw_alt = b->jw;
            b->jw = dst;
            int t = b->jw_alt_cap;
            b->jw_alt_cap = b->jw_cap;
            b->jw_cap = t;
        }
        b->jw_n = (int)live;
    }
    *base = b->jw_n;
    b->jw_n += n;
    return SR_OK;
}

/* Record n new encoder rows of stream s: their joint projection is already in window rows base
 * .. base + n - 1 (win_reserve); the unprojected rows go to the host record (hx: already
 * downloaded, or x [n, d] in table memory to download here). */
static sr_status push_frames(fc_stream *s, const float *x, const float *hx, int base, int n)
{
    const fc_model *w = s->w;
    fc_win *wn = &s->b->win[s->slot];
    if (wn->n + n > wn->cap) {
        int cap = SR_MAX(2 * wn->cap, wn->n + n);
        int *p = realloc(wn->row, (size_t)cap * sizeof(int));
        if (!p) return sr_error(SR_ERR_NOMEM, "fastconformer: frame window of %d rows", cap);
        wn->row = p;
        wn->cap = cap;
    }
    if (wn->n + n > s->enc_raw_cap) {
        int cap = SR_MAX(2 * s->enc_raw_cap, wn->n + n);
        float *r = realloc(s->enc_raw, (size_t)cap * w->d * sizeof(float));
        if (!r) return sr_error(SR_ERR_NOMEM, "fastconformer: encoder frame window of %d rows", cap);
        s->enc_raw = r;
        s->enc_raw_cap = cap;
    }
    float *raw = s->enc_raw + (size_t)wn->n * w->d;
    if (hx) memcpy(raw, hx, (size_t)n * w->d * sizeof(float));
    else {
        sr_status st = w->k->download(raw, x, (size_t)n * w->d * sizeof(float));
        if (st) return st;
    }
    for (int j = 0; j < n; j++) wn->row[wn->n + j] = base + j;
    wn->n += n;
    s->frames_total += n;
    return SR_OK;
}

/* A process call starts: stream s's scorer frames are those it produces from here on. */
static void frames_restart(fc_stream *s)
{
    s->b->win[s->slot].n = 0;
    s->frames_base = s->frames_total;
}

/* ---- cache-aware steps ---- */

/* Stream s's next step over its first `nnew` pending mel frames: its input is nin frames (the
 * mel_hist cached ones, zeros in front while fewer than 9 exist, then the new ones); the
 * subsampled rows' first `drop` (the pre-encode cache's) are dropped. */
static void step_shape(const fc_stream *s, int nnew, int *nin, int *drop)
{
    int first = s->steps == 0;
    *nin = (first ? 0 : FC_PRE_CACHE) + nnew;
    *drop = first ? 0 : FC_DROP;
}

/* The step's input [nin, n_mels] into dst (host). */
static void step_input(const fc_stream *s, int nnew, float *dst)
{
    int F = s->w->n_mels, hist = s->steps == 0 ? 0 : FC_PRE_CACHE;
    int pad = hist - s->mel_hist;
    memset(dst, 0, (size_t)pad * F * sizeof(float));
    memcpy(dst + (size_t)pad * F, s->mel + (size_t)(s->mel_hist - (hist - pad)) * F,
           (size_t)(hist - pad + nnew) * F * sizeof(float));
}

/* After the step: the mel buffer keeps the last 9 frames as the next pre-encode cache. */
static void step_consume(fc_stream *s, int nnew)
{
    int F = s->w->n_mels, total = s->mel_hist + nnew;
    int keep = SR_MIN(FC_PRE_CACHE, total);
    memmove(s->mel, s->mel + (size_t)(total - keep) * F, (size_t)(s->mel_n - (total - keep)) * F * sizeof(float));
    s->mel_n -= total - keep;
    s->mel_hist = keep;
}

/* Every step the streams ss[0 .. count) (cache-aware, of batch b) have ready, in rounds: each
 * round takes one step of every stream that has one, as one batch of sequences through the
 * layers and the joint's encoder projection. The round's inputs are subsampled together, one
 * call per input shape (steady steps share one; first and final steps may differ): their mel
 * staged on the host, one upload, fc_subsample_into over all images, one copy of the kept rows
 * into the round's rows — no per-stream launch or copy (each waits for the device). final[i]:
 * stream i's audio has ended. */
static sr_status run_rounds(fc_batch *b, fc_stream *const *ss, const int *final, int count)
{
    const fc_model *w = b->w;
    const sr_kernels *k = w->k;
    int d = w->d, J = w->joint_hidden, F = w->n_mels;
    sr_status st;
    for (;;) {
        int ns = 0, M = 0, nready = 0;
        b->row0[0] = 0;
        /* b->nnew[i]: stream i's step this round, in mel frames (0: none, or already taken) */
        for (int i = 0; i < count; i++) {
            int nnew = step_ready(ss[i], final[i]);
            b->nnew[i] = nnew;
            if (!nnew) continue;
            int nin, drop;
            step_shape(ss[i], nnew, &nin, &drop);
            if (nin > b->nin) /* the buffers sized at batch_open */
                return sr_error(SR_ERR_ARG, "fastconformer: a step of %d mel frames exceeds the stream's %d", nin, b->nin);
            nready++;
        }
        if (!nready) return SR_OK;
        /* groups of one input shape, in the order of their first stream */
        for (int g0 = 0; g0 < count; g0++) {
            if (!b->nnew[g0]) continue;
            int nin, drop, ng = 0;
            step_shape(ss[g0], b->nnew[g0], &nin, &drop);
            for (int i = g0; i < count; i++) {
                int ni, di;
                if (!b->nnew[i]) continue;
                step_shape(ss[i], b->nnew[i], &ni, &di);
                if (ni != nin || di != drop) continue;
                step_input(ss[i], b->nnew[i], b->hmel + (size_t)ng * nin * F);
                b->seq[ns + ng++] = i;
            }
            int T3 = 0;
            if ((st = k->upload(b->sub_in, b->hmel, (size_t)ng * nin * F * sizeof(float))) ||
                (st = fc_subsample_into(w, ng, b->sub_in, nin, b->sub_x, &T3, b->sub_scratch)))
                return st;
            int T = T3 - drop;
            if (T > b->cfg.ctx[1] + 1)
                return sr_error(SR_ERR_ARG, "fastconformer: a step of %d encoder rows exceeds the stream's %d", T,
                                b->cfg.ctx[1] + 1);
            /* the kept rows of each image, back to back: rows M .. M + ng T */
            if ((st = k->copy2d(ng, T * d, b->sub_x + (size_t)drop * d, T3 * d, b->x + (size_t)M * d, T * d)))
                return st;
            for (int j = 0; j < ng; j++, ns++) {
                fc_stream *s = ss[b->seq[ns]];
                /* sequence ns: rows M .. M + T - 1 at positions enc_pos .., the stream's slot */
                b->slot[ns] = s->slot;
                b->pos[ns] = s->enc_pos;
                b->mk[ns] = (fc_mask){.left = b->cfg.ctx[0], .right = b->cfg.ctx[1], .style = w->att_style};
                step_consume(s, b->nnew[b->seq[ns]]);
                b->nnew[b->seq[ns]] = 0;
                M += T;
                b->row0[ns + 1] = M;
            }
        }
        sr_kbatch kb = {.n_seq = ns, .row0 = b->row0, .slot = b->slot, .pos = b->pos};
        fc_seqs sq = {.b = &kb, .mk = b->mk, .kc = b->kc, .vc = b->vc, .conv = b->cc, .kw = b->kw, .vw = b->vw,
                      .rec = &b->g_layers};
        int base = 0;
        if ((st = k->scale(M, d, w->xscale, b->x, d)) || (st = fc_layers(w, &b->ws, b->x, &sq)) ||
            /* the joint projection straight into the scorer's frame window */
            (st = win_reserve(b, M, &base)) ||
            (st = fc_gemm_rows(k, M, b->x, d, w->j_enc.w, w->j_enc.b, SR_ACT_NONE, 1.0f, 0.0f, b->jw + (size_t)base * J, J)) ||
            /* the round's raw rows for the streams' host records: one download */
            (st = k->download(b->hx, b->x, (size_t)M * d * sizeof(float))))
            return st;
        for (int q = 0; q < ns; q++) {
            fc_stream *s = ss[b->seq[q]];
            int r0 = b->row0[q], T = b->row0[q + 1] - r0;
            s->enc_pos += T;
            s->chan_len = (int)SR_MIN(s->enc_pos, (int64_t)b->csize);
            s->steps++;
            if ((st = push_frames(s, NULL, b->hx + (size_t)r0 * d, base + r0, T)))
                return st;
        }
    }
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

/* Offline: the whole mel [T, n_mels] through the encoder (full, context-masked or banded
 * attention as the stream's strategy and length decide), into the scorer's window. */
static sr_status encode_offline(fc_stream *s, const float *mel, int T)
{
    int local = s->b->cfg.local;
    if (local < 0) local = fc_subsample_len(T) > s->w->local_threshold;
    const int *ctx = local ? s->w->local_w : s->b->cfg.ctx;
    float *enc = NULL;
    int ne = 0;
    sr_status st = fc_encode_offline(s->w, mel, T, ctx, local, &enc, &ne, NULL);
    int base = 0, J = s->w->joint_hidden;
    if (!st) st = win_reserve(s->b, ne, &base);
    if (!st) st = fc_gemm_rows(s->w->k, ne, enc, s->w->d, s->w->j_enc.w, s->w->j_enc.b, SR_ACT_NONE, 1.0f, 0.0f,
                               s->b->jw + (size_t)base * J, J);
    if (!st) st = push_frames(s, enc, NULL, base, ne);
    if (enc) s->w->k->free(enc);
    return st;
}

sr_status fc_stream_feed_mel(fc_stream *s, const float *mel, int n, int final)
{
    frames_restart(s);
    sr_status st = add_mel(s, mel, n);
    if (st || !s->b->cfg.offline) return st ? st : run_rounds(s->b, &s, &final, 1);
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
    if (n) memcpy(s->audio + s->audio_n, pcm, n * sizeof(float));
    s->audio_n += n;
    if (!final || s->audio_n < (size_t)s->w->hop) return SR_OK;
    float *mel = NULL;
    int T = 0;
    sr_status st = sr_mel_compute(s->w->mel, s->audio, s->audio_n, &mel, &T);
    if (!st) st = encode_offline(s, mel, T);
    free(mel);
    return st;
}

/* The cache-aware front end of one stream's chunk: its mel frames (the rest of them at
 * final) appended to the stream's mel buffer. */
static sr_status feed_audio(fc_stream *s, const float *pcm, size_t n, int final)
{
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
    return SR_OK;
}

static sr_status fc_process_batch(void *batch, void *const *states, const float *const *pcm,
                                  const size_t *n, const int *final, int count)
{
    fc_batch *b = batch;
    if (!b) return sr_error(SR_ERR_ARG, "fastconformer: process_batch without a batch context");
    if (count < 0 || count > b->max_streams)
        return sr_error(SR_ERR_ARG, "fastconformer: process_batch of %d streams (batch context of %d)", count,
                        b->max_streams);
    memset(b->seen, 0, (size_t)b->max_streams);
    for (int i = 0; i < count; i++) {
        fc_stream *s = states[i];
        if (!s || s->b != b)
            return sr_error(SR_ERR_ARG, "fastconformer: process_batch stream %d is not of this batch context", i);
        if (b->seen[s->slot])
            return sr_error(SR_ERR_ARG, "fastconformer: process_batch stream %d repeats slot %d", i, s->slot);
        b->seen[s->slot] = 1;
        b->call[i] = s;
    }
    /* per stream: the scorer's window holds this call's frames only; the front end */
    for (int i = 0; i < count; i++) {
        fc_stream *s = b->call[i];
        frames_restart(s);
        s->samples_in += (int64_t)n[i];
        sr_status st = b->cfg.offline ? process_offline(s, pcm[i], n[i], final[i]) : feed_audio(s, pcm[i], n[i], final[i]);
        if (st) return st;
    }
    return b->cfg.offline ? SR_OK : run_rounds(b, b->call, final, count);
}

static sr_status fc_process(void *state, const float *pcm, size_t n, int final)
{
    fc_stream *s = state;
    void *one[1] = {s};
    return fc_process_batch(s->b, one, &pcm, &n, &final, 1);
}

static void fc_reset(void *state)
{
    fc_stream *s = state;
    if (s->ms) sr_mel_stream_reset(s->ms);
    s->mel_n = s->mel_hist = 0;
    s->steps = 0;
    /* positions restart at 0, so old rows are out of every key range; the slot is cleared all
     * the same (the conv states are read as they are) */
    (void)clear_slot(s->b, s->slot);
    s->chan_len = 0;
    s->enc_pos = 0;
    s->audio_n = 0;
    s->frames_base = s->frames_total = 0;
    s->b->win[s->slot].n = 0;
    s->samples_in = 0;
}

static void fc_stream_close(void *state)
{
    fc_stream *s = state;
    if (!s) return;
    sr_mel_stream_close(s->ms);
    free(s->mel_new);
    free(s->mel);
    free(s->audio);
    free(s->enc_raw);
    free(s);
}

static size_t fc_state_bytes(const void *state)
{
    const fc_stream *s = state;
    const fc_model *w = s->w;
    size_t b = sizeof *s;
    b += (size_t)s->mel_new_cap * w->n_mels * sizeof(float);
    b += (size_t)s->mel_cap * w->n_mels * sizeof(float);
    b += s->audio_cap * sizeof(float);
    b += (size_t)s->enc_raw_cap * w->d * sizeof(float);
    return b;
}

/* ---- scorer ---- */

static int tr_frames(void *ctx) { return (int)((fc_stream *)ctx)->frames_total; }

/* Request i of a batched scorer call of `count` (ctx: its stream): every request of a call is
 * a stream of one batch context (*b, set by request 0), at most max_streams of them. */
static sr_status req_stream(const void *ctx, int i, int count, const char *what, fc_batch **b)
{
    const fc_stream *s = ctx;
    if (!s) return sr_error(SR_ERR_ARG, "fastconformer: %s request %d has no stream", what, i);
    if (i && s->b != *b)
        return sr_error(SR_ERR_ARG, "fastconformer: %s request %d is of another batch context", what, i);
    *b = s->b;
    if (count > (*b)->req_max)
        return sr_error(SR_ERR_ARG, "fastconformer: %s of %d requests (batch context of %d streams x stream.beam: %d)", what,
                        count, (*b)->max_streams, (*b)->req_max);
    return SR_OK;
}

static sr_status tr_predict_batch(const sr_tr_predict_req *r, int count)
{
    fc_batch *b = NULL;
    sr_status st;
    if (count < 0) return sr_error(SR_ERR_ARG, "fastconformer: tr_predict_batch of %d requests", count);
    for (int i = 0; i < count; i++)
        if ((st = req_stream(r[i].ctx, i, count, "tr_predict_batch", &b))) return st;
    if (!count) return SR_OK;
    const fc_model *w = b->w;
    const sr_kernels *k = w->k;
    int H = w->pred_hidden, J = w->joint_hidden, S = 2 * w->pred_layers * H;
    size_t nstate = (size_t)S * sizeof(float);
    /* state layout: per layer h [H] then c [H]; the start state is zero (NeMo's SOS with
     * blank-as-pad), and so is the start symbol's embedding */
    for (int i = 0; i < count; i++) {
        if (r[i].token < -1 || r[i].token >= w->vocab)
            return sr_error(SR_ERR_ARG, "fastconformer: predict on token %d (vocabulary %d, blank never fed)", r[i].token, w->vocab);
        float *hs = b->hstate + (size_t)i * S;
        if (r[i].state_in) memcpy(hs, r[i].state_in, nstate);
        else memset(hs, 0, nstate);
        b->ids[i] = r[i].token < 0 ? 0 : r[i].token;
    }
    /* the states of all requests in one upload (each copy waits for the device) */
    if ((st = k->upload(b->pstate, b->hstate, (size_t)count * nstate))) return st;
    /* the LSTM inputs: embedding rows; with start symbols among them, gathered into the gates
     * scratch first and copied with the zero row in their place (one call for all) */
    int sos = 0;
    for (int i = 0; i < count; i++) sos |= r[i].token < 0;
    if ((st = k->gather(w->embed, b->ids, count, sos ? b->gates : b->lstm_in, H))) return st;
    if (sos) {
        for (int i = 0; i < count; i++) b->jsrc[i] = r[i].token < 0 ? b->zrow : b->gates + (size_t)i * H;
        if ((st = k->copy_rows(count, H, b->jsrc, b->lstm_in, H))) return st;
    }
    const float *inp = b->lstm_in;
    int ldi = H;
    for (int l = 0; l < w->pred_layers; l++) {
        float *h = b->pstate + (size_t)l * 2 * H, *c = h + H;
        /* gates [count, 4H] = W_ih x + b_ih + W_hh h + b_hh, order i, f, g, o; then the cell
         * updates c in place and overwrites h (read by the gemm before) */
        if ((st = k->gemm(count, inp, ldi, w->lstm_wih[l], w->lstm_bih[l], SR_ACT_NONE, 1.0f, 0.0f, b->gates, 4 * H)) ||
            (st = k->gemm(count, h, S, w->lstm_whh[l], w->lstm_bhh[l], SR_ACT_NONE, 1.0f, 1.0f, b->gates, 4 * H)) ||
            (st = k->lstm_cell(count, H, b->gates, 4 * H, c, S, h, S)))
            return st;
        inp = h;
        ldi = S;
    }
    /* pred_out = joint.pred(top h) */
    if ((st = k->gemm(count, inp, ldi, w->j_pred.w, w->j_pred.b, SR_ACT_NONE, 1.0f, 0.0f, b->pout, J))) return st;
    if ((st = k->download(b->hstate, b->pstate, (size_t)count * nstate)) ||
        (st = k->download(b->hpred, b->pout, (size_t)count * J * sizeof(float))))
        return st;
    for (int i = 0; i < count; i++) {
        memcpy(r[i].state_out, b->hstate + (size_t)i * S, nstate);
        memcpy(r[i].pred_out, b->hpred + (size_t)i * J, (size_t)J * sizeof(float));
    }
    return SR_OK;
}

static sr_status tr_joint_batch(const sr_tr_joint_req *r, int count)
{
    fc_batch *b = NULL;
    sr_status st;
    if (count < 0) return sr_error(SR_ERR_ARG, "fastconformer: tr_joint_batch of %d requests", count);
    for (int i = 0; i < count; i++)
        if ((st = req_stream(r[i].ctx, i, count, "tr_joint_batch", &b))) return st;
    if (!count) return SR_OK;
    const fc_model *w = b->w;
    const sr_kernels *k = w->k;
    int J = w->joint_hidden;
    /* per request: its held frame row and its pred_out, one row each; then ReLU(enc + pred)
     * -> Linear over all rows */
    for (int i = 0; i < count; i++) {
        const fc_stream *s = r[i].ctx;
        const fc_win *wn = &b->win[s->slot];
        int64_t t = (int64_t)r[i].t - s->frames_base;
        if (t < 0 || t >= wn->n)
            return sr_error(SR_ERR_ARG, "fastconformer: joint on frame %d, frames %lld..%lld are held", r[i].t,
                            (long long)s->frames_base, (long long)(s->frames_base + wn->n - 1));
        memcpy(b->hpred + (size_t)i * J, r[i].pred_out, (size_t)J * sizeof(float));
        b->jsrc[i] = b->jw + (size_t)wn->row[t] * J;
    }
    /* every request's frame row (each in its stream's window) in one call, then its pred rows */
    if ((st = k->copy_rows(count, J, b->jsrc, b->jh, J)) ||
        (st = k->upload(b->jp, b->hpred, (size_t)count * J * sizeof(float))))
        return st;
    if ((st = k->add(count, J, b->jp, J, 1.0f, b->jh, J)) ||
        (st = k->act(SR_ACT_RELU, (size_t)count * J, b->jh, b->jh)) ||
        (st = k->gemm(count, b->jh, J, w->j_out.w, w->j_out.b, SR_ACT_NONE, 1.0f, 0.0f, b->logits, w->n_out)))
        return st;
    if ((st = k->download(b->hlogits, b->logits, (size_t)count * w->n_out * sizeof(float)))) return st;
    for (int i = 0; i < count; i++)
        memcpy(r[i].logits, b->hlogits + (size_t)i * w->n_out, (size_t)w->n_out * sizeof(float));
    return SR_OK;
}

static sr_status tr_predict(void *ctx, const float *state_in, int32_t token, float *state_out,
                            float *pred_out)
{
    sr_tr_predict_req r = {.ctx = ctx, .state_in = state_in, .token = token, .state_out = state_out, .pred_out = pred_out};
    return tr_predict_batch(&r, 1);
}

static sr_status tr_joint(void *ctx, int t, const float *pred_out, float *logits)
{
    sr_tr_joint_req r = {.ctx = ctx, .t = t, .pred_out = pred_out, .logits = logits};
    return tr_joint_batch(&r, 1);
}

/* ---- streams ---- */

static sr_status fc_stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch,
                                int slot, void **state, sr_chunking *ck, sr_scorer *sc)
{
    *state = NULL;
    const fc_model *w = m->impl;
    fc_batch *b = batch;
    fc_cfg c;
    sr_status st = fc_config(w, cfg, &c);
    if (st) return st;
    if (!b) return sr_error(SR_ERR_ARG, "fastconformer: stream_open needs a batch context");
    if (b->w != w) return sr_error(SR_ERR_ARG, "fastconformer: stream_open on a batch context of another model");
    if (slot < 0 || slot >= b->max_streams)
        return sr_error(SR_ERR_ARG, "fastconformer: stream_open on slot %d of a batch context of %d", slot, b->max_streams);
    if (c.strategy != b->cfg.strategy || c.ctx[0] != b->cfg.ctx[0] || c.ctx[1] != b->cfg.ctx[1] || c.f16 != b->cfg.f16)
        return sr_error(SR_ERR_ARG, "fastconformer: stream config (stream.strategy, stream.att_context [%d, %d], "
                        "stream.cache_dtype) differs from its batch context's (att_context [%d, %d])",
                        c.ctx[0], c.ctx[1], b->cfg.ctx[0], b->cfg.ctx[1]);
    fc_stream *s = sr_calloc(1, sizeof *s, "fastconformer stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->b = b;
    s->slot = slot;
    if (!c.offline && ((st = sr_mel_stream_open(w->mel, &s->ms)) || (st = clear_slot(b, slot)))) {
        fc_stream_close(s);
        return st;
    }
    b->win[slot].n = 0;
    fc_chunks(w, cfg, &c, &ck->chunk, &ck->first_chunk);
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
    sc->tr_predict_batch = tr_predict_batch;
    sc->tr_joint_batch = tr_joint_batch;
    sc->batch_max = b->req_max;
    sc->tr_batch_multi = 1; /* requests are independent rows, a stream's too */
    sc->tr_max_symbols = cfg->max_symbols > 0 ? cfg->max_symbols : w->max_symbols;
    sc->tr_n_durations = w->n_durations;
    sc->tr_durations = w->durations;
    *state = s;
    return SR_OK;
}

static sr_status fc_load_ops(sr_model *m, sr_h5 *f) { return fc_model_load(m, f); }

/* Recorded by scripts/convert_nemo.py from NeMo's encoder config; the relative positions are
 * computed for any length here, so nothing reads it. */
static const char *const fc_config_info[] = {"pos_emb_max_len", NULL};

const sr_model_ops sr_fastconformer_rnnt_ops = {
    .name = "fastconformer_rnnt",
    .description = "NeMo cache-aware streaming FastConformer with an RNN-T / TDT decoder (Nemotron)",
    .default_decoder = "rnnt_greedy",
    .device_ready = 1, /* every per-chunk access through the table (checked on cpu-guard) */
    .load = fc_load_ops,
    .unload = fc_model_unload,
    .config_info = fc_config_info,
    .batch_open = fc_batch_open,
    .batch_close = fc_batch_close,
    .batch_bytes = fc_batch_bytes,
    .stream_open = fc_stream_open,
    .process = fc_process,
    .process_batch = fc_process_batch,
    .reset = fc_reset,
    .stream_close = fc_stream_close,
    .state_bytes = fc_state_bytes,
};
