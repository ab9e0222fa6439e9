/*
 * stream.c — streams and the engine that steps them (DESIGN §4). Every stream lives on an
 * engine: sr_engine_open puts it on a slot of a shared engine, sr_stream_open on a private
 * engine of one slot, and both run the same code below.
 *
 * Audio is queued per stream and cut into the backend's chunks (first chunk, then fixed
 * chunks); chunk boundaries depend only on the sample count, so any feed split gives the same
 * timeline. A step takes the next ready chunk of every stream (a whole chunk, or after finish
 * the remainder with final = 1) and runs:
 *   1. the backend over all of them at once (process_batch; backends without one: process
 *      per stream),
 *   2. every stream's decoder update, on the stepping thread. A decoder with update_batch
 *      (every built-in one: a per-stream state machine stepped by decoders/lockstep.c) runs
 *      all streams' searches in lockstep and sends each round's scorer calls of one kind to
 *      the backend as one batched call (aed_logprobs_batch, aed_no_speech_batch,
 *      tr_predict_batch, tr_joint_batch, sync_step_batch; the solo form per request where a
 *      backend has no batched one), each stream making its solo sequence of calls. A decoder
 *      with update alone runs stream after stream (correct, unbatched). No thread hand-off
 *      per call: with hundreds of streams the hand-offs cost more than the searches (the
 *      worker threads and call batcher this replaced, docs/benchmarks.md).
 *   3. per stream: detokenize, append the timeline entry (compute_ns: the step's wall time;
 *      model_ns: the backend's part).
 * Because the backends' batched forms equal their solo forms row for row, a stream's tokens do
 * not depend on which other streams shared its steps.
 *
 * Memory: a solo stream's queue holds at most one chunk (feed runs each chunk as it fills); an
 * engine stream's queue holds what was fed and not yet stepped. The hypothesis grows by
 * doubling; reset clears without freeing. The timeline is a log, not state: with
 * record_timeline = 0 only its last entry is kept. An entry whose hypothesis equals the
 * previous entry's shares that entry's block, so a recorded timeline costs one copy of the
 * hypothesis per change, not per chunk.
 */
#include "plugin.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

struct sr_stream {
    const sr_model *m;
    sr_engine *e;
    int slot;                 /* slot of e (and of the backend's batch context) */
    sr_stream_config cfg;     /* the engine's (strings owned by it) */

    void *bstate;             /* backend per-stream state */
    sr_chunking ck;
    sr_scorer bsc;            /* the backend's scorer (the decoder's) */
    const sr_decoder_ops *dec;
    void *dstate;

    float *q;                 /* [q_cap] queued samples; [q_r, q_n) not yet stepped (e->qmu) */
    size_t q_r, q_n, q_cap;
    float *chunk;             /* [max(chunk, first_chunk)] the chunk a step is running */
    int64_t samples_in;       /* samples fed so far */
    int64_t consumed;         /* samples of the chunks stepped so far */
    int64_t chunks;           /* chunks processed */
    int finish_req;           /* finish called: no more feed */
    int finished;             /* the final chunk has run */
    sr_status err;            /* != SR_OK: failed, err_msg says why (until reset) */
    char *err_msg;

    /* the current step */
    size_t step_n;
    int step_final;
    sr_status step_st;
    char *step_msg;
    /* a final update stopped at stream.final_steps (the decoder's pending): the stream takes
     * no chunk, its update goes on in each step until done, and the final timeline entry (the
     * walls of all those steps, the backend's time of its chunk) is appended then */
    int draining;
    int64_t drain_ns, drain_model_ns;

    sr_hyp hyp;
    sr_strbuf text;
    sr_hypothesis pub;

    sr_timeline_entry *tl;    /* entries; an entry owns one block with its tokens and text
                                 unless it shares the previous entry's (same tokens pointer) */
    size_t tl_n, tl_cap;
    sr_timeline tl_pub;
};

struct sr_engine {
    const sr_model *m;
    sr_stream_config cfg;
    char *strategy, *decoder, *cache_dtype; /* owned copies of the cfg strings */
    int max_streams, n_open;
    int solo;                 /* made by sr_stream_open for its one stream */
    void *batch;              /* the backend's batch context (NULL: it has none) */
    /* guards every stream's queue, finish_req and err: feed / finish may come from other
     * threads while a step runs */
    pthread_mutex_t qmu;
    int qmu_made;
    sr_stream **slots;        /* [max_streams] open streams, NULL where free */

    /* step scratch [max_streams] */
    sr_stream **sel;
    sr_stream **resume;       /* the draining streams of a step */
    void **states;
    const float **pcm;
    size_t *n;
    int *final;
    /* decoder update scratch [max_streams] */
    void **dstates;
    int *dfinal;
    const sr_scorer **scs;
    sr_hyp **hyps;
    sr_status *dst;
};

/* ---- hypothesis ---------------------------------------------------------------------------- */

sr_status sr_hyp_push(sr_hyp *h, int32_t token)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        int32_t *t = realloc(h->tokens, (size_t)cap * sizeof *t);
        if (!t) return sr_error(SR_ERR_NOMEM, "out of memory growing the hypothesis to %d tokens", cap);
        h->tokens = t;
        h->cap = cap;
    }
    h->tokens[h->n++] = token;
    return SR_OK;
}

void sr_hyp_truncate(sr_hyp *h, int n)
{
    if (n < 0) n = 0;
    if (n < h->n) h->n = n;
    if (h->n_stable > h->n) h->n_stable = h->n;
}

static sr_status update_text(sr_stream *s)
{
    sr_strbuf_clear(&s->text);
    sr_status st = sr_detokenize_into(s->m, s->hyp.tokens, s->hyp.n, &s->text);
    if (st) return st;
    s->pub.tokens = s->hyp.tokens;
    s->pub.n_tokens = s->hyp.n;
    s->pub.text = s->text.data;
    s->pub.n_stable = s->hyp.n_stable;
    s->pub.repetition_cuts = s->hyp.loop_cuts;
    return SR_OK;
}

/* ---- timeline ------------------------------------------------------------------------------ */

/* Free the blocks of entries [from, tl_n) and drop them. An entry owns its block unless its
 * tokens pointer equals the previous entry's (timeline_append's sharing). */
static void timeline_drop(sr_stream *s, size_t from)
{
    for (size_t i = from; i < s->tl_n; i++)
        if (i == 0 || s->tl[i].tokens != s->tl[i - 1].tokens)
            free((void *)s->tl[i].tokens); /* the block holding tokens and text */
    s->tl_n = from;
    s->tl_pub.n = from;
}

static sr_status timeline_append(sr_stream *s, int64_t compute_ns, int64_t model_ns, int is_final)
{
    if (!s->cfg.record_timeline && s->tl_n) timeline_drop(s, 0); /* only the last is kept */
    if (s->tl_n == s->tl_cap) {
        size_t cap = s->tl_cap ? 2 * s->tl_cap : 32;
        sr_timeline_entry *t = realloc(s->tl, cap * sizeof *t);
        if (!t) return sr_error(SR_ERR_NOMEM, "out of memory growing the timeline to %zu entries", cap);
        s->tl = t;
        s->tl_cap = cap;
    }
    size_t tok_bytes = (size_t)s->hyp.n * sizeof(int32_t);
    size_t text_len = s->text.len;
    const sr_timeline_entry *prev = s->tl_n ? &s->tl[s->tl_n - 1] : NULL;
    const int32_t *tokens;
    const char *text;
    /* the text is a function of the tokens (update_text), so equal tokens mean equal text */
    if (prev && prev->n_tokens == s->hyp.n &&
        (!tok_bytes || !memcmp(prev->tokens, s->hyp.tokens, tok_bytes))) {
        tokens = prev->tokens; /* the same block */
        text = prev->text;
    } else {
        char *block = sr_malloc(tok_bytes + text_len + 1 + sizeof(int32_t), "timeline entry");
        if (!block) return SR_ERR_NOMEM;
        /* tokens first (aligned by malloc), then the text */
        if (tok_bytes) memcpy(block, s->hyp.tokens, tok_bytes);
        char *t = block + tok_bytes;
        if (text_len) memcpy(t, s->text.data, text_len);
        t[text_len] = '\0';
        tokens = (const int32_t *)block;
        text = t;
    }
    sr_timeline_entry *e = &s->tl[s->tl_n++];
    e->audio_ms = s->consumed * 1000 / 16000;
    e->tokens = tokens;
    e->n_tokens = s->hyp.n;
    e->text = text;
    e->n_stable = s->hyp.n_stable;
    e->compute_ns = compute_ns;
    e->model_ns = model_ns;
    e->is_final = is_final;
    s->tl_pub.entries = s->tl;
    s->tl_pub.n = s->tl_n;
    return SR_OK;
}

/* ---- errors across threads ----------------------------------------------------------------- */

/* Keep this thread's current detail message in *slot (replacing what it held). */
static void keep_msg(char **slot)
{
    free(*slot);
    *slot = sr_strdup(sr_last_error()); /* NULL on no memory: the status alone then */
}

/* Mark s failed with st and the message held in msg (or this thread's current one). */
static void stream_fail(sr_stream *s, sr_status st, const char *msg)
{
    s->err = st;
    free(s->err_msg);
    s->err_msg = sr_strdup(msg ? msg : sr_last_error());
}

static sr_status stream_err(const sr_stream *s)
{
    return sr_error(s->err, "%s", s->err_msg ? s->err_msg : sr_strerror(s->err));
}

/* ---- decoders ------------------------------------------------------------------------------ */

/* Every selected stream's decoder update on this thread; step_st / step_msg get each outcome.
 * A decoder with update_batch (every built-in one, decoders/lockstep.h) steps all streams'
 * searches in lockstep and sends each round's scorer calls to the backend as one batched call;
 * one with update alone runs stream after stream, each scorer call a batch of one. */
static void run_decoders(sr_engine *e, sr_stream **sel, int count)
{
    const sr_decoder_ops *d = sel[0]->dec; /* every stream of an engine has the same decoder */
    if (!d->update_batch) {
        for (int i = 0; i < count; i++) {
            sr_stream *s = sel[i];
            s->step_st = d->update(s->dstate, &s->bsc, s->step_final, &s->hyp);
            if (s->step_st) keep_msg(&s->step_msg);
        }
        return;
    }
    for (int i = 0; i < count; i++) {
        e->dstates[i] = sel[i]->dstate;
        e->scs[i] = &sel[i]->bsc;
        e->dfinal[i] = sel[i]->step_final;
        e->hyps[i] = &sel[i]->hyp;
    }
    d->update_batch(e->dstates, e->scs, e->dfinal, e->hyps, count, e->dst);
    for (int i = 0; i < count; i++) {
        sel[i]->step_st = e->dst[i];
        if (e->dst[i]) keep_msg(&sel[i]->step_msg);
    }
}

/* ---- steps --------------------------------------------------------------------------------- */

static size_t chunk_need(const sr_stream *s) { return s->chunks ? s->ck.chunk : s->ck.first_chunk; }

/* Whether a step goes on with s's final update (stream.final_steps) instead of a chunk. */
static int draining(const sr_stream *s) { return s->draining && !s->err; }

/* Samples of s's next chunk in *n and whether it is the final one; 0 when none is ready. */
static int chunk_ready(const sr_stream *s, size_t *n, int *final)
{
    if (s->err || s->finished || s->draining) return 0;
    size_t have = s->q_n - s->q_r, need = chunk_need(s);
    if (have >= need) {
        *n = need;
        *final = 0;
        return 1;
    }
    if (!s->finish_req) return 0;
    *n = have;
    *final = 1;
    return 1;
}

int sr_engine_ready(const sr_engine *e)
{
    if (!e) return 0;
    int c = 0;
    size_t n;
    int f;
    pthread_mutex_t *mu = (pthread_mutex_t *)&e->qmu; /* the streams' queues, not e itself */
    pthread_mutex_lock(mu);
    for (int i = 0; i < e->max_streams; i++)
        if (e->slots[i] && (chunk_ready(e->slots[i], &n, &f) || draining(e->slots[i]))) c++;
    pthread_mutex_unlock(mu);
    return c;
}

/* The end of s's part in a step (dt: the step's wall, model_ns: its backend part; resumed: s
 * was draining, no chunk): counters, the timeline entry unless its final update goes on, or
 * its failure. SR_OK, or the stream's failure (then also kept as its error). */
static sr_status step_done(sr_engine *e, sr_stream *s, int64_t dt, int64_t model_ns, int resumed)
{
    if (!resumed) s->consumed += (int64_t)s->step_n;
    sr_status st = s->step_st;
    if (!st && s->draining) { /* the final update goes on in the next steps */
        s->drain_ns = (resumed ? s->drain_ns : 0) + dt;
        s->drain_model_ns = resumed ? s->drain_model_ns : model_ns;
    } else {
        if (resumed) {
            dt += s->drain_ns;
            model_ns = s->drain_model_ns;
        }
        if (s->step_final) s->finished = 1;
        if (st) /* failed in the backend or the decoder: its kept message */
            sr_error(st, "%s", s->step_msg ? s->step_msg : sr_strerror(st));
        else if (!(st = update_text(s)))
            st = timeline_append(s, dt, model_ns, s->step_final);
    }
    if (st) {
        s->draining = 0;
        sr_error_prefix(st, "%s: chunk %lld", e->m->path, (long long)(resumed ? s->chunks - 1 : s->chunks));
        pthread_mutex_lock(&e->qmu);
        stream_fail(s, st, NULL);
        pthread_mutex_unlock(&e->qmu);
    }
    if (!resumed) s->chunks++;
    return st;
}

sr_status sr_engine_step(sr_engine *e, int *n_chunks)
{
    if (n_chunks) *n_chunks = 0;
    if (!e) return sr_error(SR_ERR_ARG, "sr_engine_step: engine is NULL");
    int count = 0, nres = 0;
    pthread_mutex_lock(&e->qmu);
    for (int i = 0; i < e->max_streams; i++) {
        sr_stream *s = e->slots[i];
        size_t n;
        int final;
        if (s && draining(s)) { /* its final update goes on: no chunk */
            s->step_n = 0;
            s->step_final = 1;
            s->step_st = SR_OK;
            e->resume[nres++] = s;
            continue;
        }
        if (!s || !chunk_ready(s, &n, &final)) continue;
        /* the chunk leaves the queue now, so feeds may go on while it runs */
        memcpy(s->chunk, s->q + s->q_r, n * sizeof(float));
        s->q_r += n;
        if (s->q_r == s->q_n) s->q_r = s->q_n = 0;
        else if (s->q_r > s->q_cap / 2) { /* drop what was stepped once it is most of the buffer */
            memmove(s->q, s->q + s->q_r, (s->q_n - s->q_r) * sizeof(float));
            s->q_n -= s->q_r;
            s->q_r = 0;
        }
        s->step_n = n;
        s->step_final = final;
        s->step_st = SR_OK;
        e->sel[count] = s;
        e->states[count] = s->bstate;
        e->pcm[count] = s->chunk;
        e->n[count] = n;
        e->final[count] = final;
        count++;
    }
    pthread_mutex_unlock(&e->qmu);
    if (!count && !nres) return SR_OK;
    const sr_model_ops *ops = e->m->ops;
    int64_t t0 = sr_now_ns();
    if (count && ops->process_batch) {
        sr_status st = ops->process_batch(e->batch, e->states, e->pcm, e->n, e->final, count);
        if (st)
            for (int i = 0; i < count; i++) {
                e->sel[i]->step_st = st;
                keep_msg(&e->sel[i]->step_msg);
            }
    } else if (count) {
        for (int i = 0; i < count; i++) {
            sr_stream *s = e->sel[i];
            if ((s->step_st = ops->process(s->bstate, e->pcm[i], e->n[i], e->final[i])))
                keep_msg(&s->step_msg);
        }
    }
    int64_t t1 = sr_now_ns();
    /* decoders of the streams whose chunk went through, then of the draining ones */
    int nd = 0;
    sr_stream **dl = e->sel + count; /* sel has room for 2 * max_streams */
    for (int i = 0; i < count; i++)
        if (!e->sel[i]->step_st) dl[nd++] = e->sel[i];
    for (int i = 0; i < nres; i++) dl[nd++] = e->resume[i];
    if (nd) run_decoders(e, dl, nd);
    for (int i = 0; i < nd; i++) {
        sr_stream *s = dl[i];
        s->draining = !s->step_st && s->step_final && s->dec->pending && s->dec->pending(s->dstate);
    }
    int64_t dt = sr_now_ns() - t0;
    sr_status first = SR_OK;
    char *first_msg = NULL;
    int first_slot = -1;
    for (int i = 0; i < count + nres; i++) {
        sr_stream *s = i < count ? e->sel[i] : e->resume[i - count];
        sr_status st = step_done(e, s, dt, t1 - t0, i >= count);
        if (st && !first) {
            first = st;
            first_slot = s->slot;
            first_msg = s->err_msg;
        }
    }
    if (n_chunks) *n_chunks = count + nres;
    if (first) {
        if (e->solo) return sr_error(first, "%s", first_msg ? first_msg : sr_strerror(first));
        return sr_error(first, "stream in slot %d: %s", first_slot, first_msg ? first_msg : sr_strerror(first));
    }
    return SR_OK;
}

sr_status sr_engine_drain(sr_engine *e)
{
    for (;;) {
        int n = 0;
        sr_status st = sr_engine_step(e, &n);
        if (st || !n) return st;
    }
}

/* ---- engines ------------------------------------------------------------------------------- */

sr_status sr_stream_config_check(const sr_stream_config *c)
{
    struct { const char *name; int v, lo, hi; } f[] = {
        {"stream.chunk_ms", c->chunk_ms, 0, SR_CHUNK_MS_MAX},
        {"stream.first_chunk_ms", c->first_chunk_ms, 0, SR_CHUNK_MS_MAX},
        {"stream.stability_n", c->stability_n, 0, SR_STABILITY_N_MAX},
        {"stream.beam", c->beam, 0, SR_BEAM_MAX},
        {"stream.max_symbols", c->max_symbols, 0, SR_MAX_SYMBOLS_MAX},
        {"stream.att_context[0]", c->att_context[0], -1, SR_ATT_CONTEXT_MAX},
        {"stream.att_context[1]", c->att_context[1], -1, SR_ATT_CONTEXT_MAX},
        {"stream.delay_tokens", c->delay_tokens, 0, SR_DELAY_TOKENS_MAX},
        {"stream.repetition_guard", c->repetition_guard, 0, 1},
        {"stream.max_seconds", c->max_seconds, 0, SR_MAX_SECONDS_MAX},
        {"stream.final_steps", c->final_steps, 0, SR_FINAL_STEPS_MAX},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(f); i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return sr_error(SR_ERR_ARG, "%s: %d is outside %d .. %d", f[i].name, f[i].v, f[i].lo, f[i].hi);
    return SR_OK;
}

sr_status sr_model_defaults(const sr_model *m, sr_use use, const sr_stream_config *cfg,
                            sr_defaults *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_model_defaults: out is NULL");
    memset(out, 0, sizeof *out);
    if (!m) return sr_error(SR_ERR_ARG, "sr_model_defaults: model is NULL");
    if (use != SR_USE_LIVE && use != SR_USE_FINAL)
        return sr_error(SR_ERR_ARG, "sr_model_defaults: use %d is neither SR_USE_LIVE nor "
                        "SR_USE_FINAL", (int)use);
    sr_stream_config c;
    if (cfg) c = *cfg;
    else sr_stream_config_init(&c);
    out->strategy = c.strategy;
    out->decoder = c.decoder;
    out->chunk_ms = c.chunk_ms;
    out->first_chunk_ms = c.first_chunk_ms;
    if (m->ops->defaults) m->ops->defaults(m, use, &c, out);
    if (!out->decoder) out->decoder = m->ops->default_decoder;
    if (!out->decoder)
        return sr_error(SR_ERR_ARG, "%s: arch %s names no default decoder: set stream.decoder",
                        m->path, m->arch);
    return SR_OK;
}

sr_status sr_engine_create(const sr_model *m, const sr_stream_config *cfg, int max_streams,
                           sr_engine **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_engine_create: out is NULL");
    *out = NULL;
    if (!m) return sr_error(SR_ERR_ARG, "sr_engine_create: model is NULL");
    if (max_streams < 1 || max_streams > 65536)
        return sr_error(SR_ERR_ARG, "sr_engine_create: max_streams %d is not in 1..65536", max_streams);
    sr_engine *e = sr_calloc(1, sizeof *e, "engine");
    if (!e) return SR_ERR_NOMEM;
    e->m = m;
    e->max_streams = max_streams;
    if (cfg) e->cfg = *cfg;
    else sr_stream_config_init(&e->cfg);
    sr_status st = SR_ERR_NOMEM;
    if ((e->cfg.strategy && !(e->strategy = sr_strdup(e->cfg.strategy))) ||
        (e->cfg.decoder && !(e->decoder = sr_strdup(e->cfg.decoder))) ||
        (e->cfg.cache_dtype && !(e->cache_dtype = sr_strdup(e->cfg.cache_dtype))))
        goto fail;
    e->cfg.strategy = e->strategy;
    e->cfg.decoder = e->decoder;
    e->cfg.cache_dtype = e->cache_dtype;
    if ((st = sr_stream_config_check(&e->cfg))) goto fail;
    /* the model's defaults for what the config leaves unset, named in the engine's config so
     * that the backend and the decoder see one choice */
    sr_defaults dft;
    if ((st = sr_model_defaults(m, SR_USE_LIVE, &e->cfg, &dft))) goto fail;
    st = SR_ERR_NOMEM;
    if ((!e->strategy && dft.strategy && !(e->strategy = sr_strdup(dft.strategy))) ||
        (!e->decoder && !(e->decoder = sr_strdup(dft.decoder))))
        goto fail;
    e->cfg.strategy = e->strategy;
    e->cfg.decoder = e->decoder;
    size_t M = (size_t)max_streams;
    if (!(e->slots = sr_calloc(M, sizeof *e->slots, "engine slots")) ||
        !(e->sel = sr_calloc(2 * M, sizeof *e->sel, "engine step")) ||
        !(e->resume = sr_calloc(M, sizeof *e->resume, "engine step")) ||
        !(e->states = sr_calloc(M, sizeof *e->states, "engine step")) ||
        !(e->pcm = sr_calloc(M, sizeof *e->pcm, "engine step")) ||
        !(e->n = sr_calloc(M, sizeof *e->n, "engine step")) ||
        !(e->final = sr_calloc(M, sizeof *e->final, "engine step")) ||
        !(e->dstates = sr_calloc(M, sizeof *e->dstates, "engine step")) ||
        !(e->dfinal = sr_calloc(M, sizeof *e->dfinal, "engine step")) ||
        !(e->scs = sr_calloc(M, sizeof *e->scs, "engine step")) ||
        !(e->hyps = sr_calloc(M, sizeof *e->hyps, "engine step")) ||
        !(e->dst = sr_calloc(M, sizeof *e->dst, "engine step")))
        goto fail;
    if (pthread_mutex_init(&e->qmu, NULL)) {
        st = sr_error(SR_ERR_NOMEM, "engine: mutex");
        goto fail;
    }
    e->qmu_made = 1;
    if (m->ops->batch_open && (st = m->ops->batch_open(m, &e->cfg, max_streams, &e->batch))) goto fail;
    *out = e;
    return SR_OK;
fail:
    sr_error_prefix(st, "%s", m->path);
    sr_engine_free(e);
    return st;
}

static void stream_free(sr_stream *s);

void sr_engine_free(sr_engine *e)
{
    if (!e) return;
    if (e->slots)
        for (int i = 0; i < e->max_streams; i++)
            if (e->slots[i]) stream_free(e->slots[i]);
    if (e->batch) e->m->ops->batch_close(e->batch);
    if (e->qmu_made) pthread_mutex_destroy(&e->qmu);
    free(e->slots);
    free(e->sel);
    free(e->resume);
    free(e->states);
    free(e->pcm);
    free(e->n);
    free(e->final);
    free(e->dstates);
    free(e->dfinal);
    free(e->scs);
    free(e->hyps);
    free(e->dst);
    free(e->strategy);
    free(e->decoder);
    free(e->cache_dtype);
    free(e);
}

int sr_engine_streams(const sr_engine *e) { return e ? e->n_open : 0; }
int sr_engine_max_streams(const sr_engine *e) { return e ? e->max_streams : 0; }

/* ---- streams ------------------------------------------------------------------------------- */

/* The backend's and decoder's part of a stream's state and the stream's own arrays. */
static size_t stream_own_bytes(const sr_stream *s)
{
    size_t b = sizeof *s + s->q_cap * sizeof(float) +
               SR_MAX(s->ck.chunk, s->ck.first_chunk) * sizeof(float) + (size_t)s->hyp.cap * sizeof(int32_t) +
               s->text.cap + s->m->ops->state_bytes(s->bstate);
    if (s->dec->state_bytes) b += s->dec->state_bytes(s->dstate);
    return b;
}

static void stream_free(sr_stream *s)
{
    if (!s) return;
    if (s->dstate && s->dec && s->dec->close) s->dec->close(s->dstate);
    if (s->bstate) s->m->ops->stream_close(s->bstate);
    if (s->e && s->e->slots[s->slot] == s) {
        s->e->slots[s->slot] = NULL;
        s->e->n_open--;
    }
    timeline_drop(s, 0);
    free(s->tl);
    free(s->q);
    free(s->chunk);
    free(s->hyp.tokens);
    sr_strbuf_free(&s->text);
    free(s->err_msg);
    free(s->step_msg);
    free(s);
}

sr_status sr_engine_open(sr_engine *e, sr_stream **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_engine_open: out is NULL");
    *out = NULL;
    if (!e) return sr_error(SR_ERR_ARG, "sr_engine_open: engine is NULL");
    int slot = -1;
    for (int i = 0; i < e->max_streams && slot < 0; i++)
        if (!e->slots[i]) slot = i;
    if (slot < 0)
        return sr_error(SR_ERR_ARG, "sr_engine_open: all %d streams of the engine are open", e->max_streams);
    const sr_model *m = e->m;
    sr_stream *s = sr_calloc(1, sizeof *s, "stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->cfg = e->cfg;
    s->slot = slot;
    sr_status st;
    if ((st = sr_decoder_find(e->cfg.decoder, &s->dec))) goto fail; /* set by sr_engine_create */
    if ((st = m->ops->stream_open(m, &s->cfg, e->batch, slot, &s->bstate, &s->ck, &s->bsc))) goto fail;
    if (s->dec->kind != s->bsc.kind) {
        st = sr_error(SR_ERR_ARG, "decoder %s does not fit arch %s (it needs a different scorer)",
                      s->dec->name, m->arch);
        goto fail;
    }
    if (!s->ck.chunk || !s->ck.first_chunk) {
        st = sr_error(SR_ERR_ARG, "arch %s: zero chunk size", m->arch);
        goto fail;
    }
    if (s->dec->open && (st = s->dec->open(&s->cfg, &s->bsc, &s->dstate))) goto fail;
    s->q_cap = SR_MAX(s->ck.chunk, s->ck.first_chunk);
    if (!(s->q = sr_malloc(s->q_cap * sizeof(float), "stream audio queue")) ||
        !(s->chunk = sr_malloc(s->q_cap * sizeof(float), "stream chunk buffer"))) {
        st = SR_ERR_NOMEM;
        goto fail;
    }
    if ((st = update_text(s))) goto fail;
    s->e = e;
    e->slots[slot] = s;
    e->n_open++;
    *out = s;
    return SR_OK;
fail:
    sr_error_prefix(st, "%s", m->path);
    stream_free(s);
    return st;
}

sr_status sr_stream_open(const sr_model *m, const sr_stream_config *cfg, sr_stream **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_stream_open: out is NULL");
    *out = NULL;
    if (!m) return sr_error(SR_ERR_ARG, "sr_stream_open: model is NULL");
    sr_engine *e;
    sr_status st = sr_engine_create(m, cfg, 1, &e);
    if (st) return st;
    e->solo = 1;
    if ((st = sr_engine_open(e, out))) sr_engine_free(e);
    return st;
}

/* Append up to n samples to the queue; grows it as needed. */
static sr_status queue_push(sr_stream *s, const float *pcm, size_t n)
{
    if (s->q_n + n > s->q_cap) {
        if (s->q_r) { /* slide the unstepped samples to the front first */
            memmove(s->q, s->q + s->q_r, (s->q_n - s->q_r) * sizeof(float));
            s->q_n -= s->q_r;
            s->q_r = 0;
        }
        if (s->q_n + n > s->q_cap) {
            size_t cap = SR_MAX(2 * s->q_cap, s->q_n + n);
            float *q = realloc(s->q, cap * sizeof(float));
            if (!q) return sr_error(SR_ERR_NOMEM, "out of memory queueing %zu samples", cap);
            s->q = q;
            s->q_cap = cap;
        }
    }
    memcpy(s->q + s->q_n, pcm, n * sizeof(float));
    s->q_n += n;
    s->samples_in += (int64_t)n;
    return SR_OK;
}

sr_status sr_stream_feed(sr_stream *s, const float *pcm, size_t n)
{
    if (!s) return sr_error(SR_ERR_ARG, "sr_stream_feed: stream is NULL");
    if (n && !pcm) return sr_error(SR_ERR_ARG, "sr_stream_feed: samples are NULL");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return sr_error(SR_ERR_ARG, "sr_stream_feed: sample %zu of this call is %s", i,
                            isnan(pcm[i]) ? "NaN" : "infinite");
    sr_engine *e = s->e;
    sr_status st = SR_OK;
    pthread_mutex_lock(&e->qmu);
    if (s->err) st = stream_err(s);
    else if (s->finish_req) st = sr_error(SR_ERR_ARG, "sr_stream_feed: stream already finished (reset it first)");
    else if (e->cfg.max_seconds && s->samples_in + (int64_t)n > (int64_t)e->cfg.max_seconds * 16000)
        st = sr_error(SR_ERR_ARG, "stream.max_seconds: this feed brings the stream to %.2f s of "
                      "audio, past its %d s (nothing of it was taken)",
                      (double)(s->samples_in + (int64_t)n) / 16000.0, e->cfg.max_seconds);
    else if (!e->solo) st = queue_push(s, pcm, n);
    pthread_mutex_unlock(&e->qmu);
    if (st || !e->solo) return st;
    /* solo: run each chunk as soon as it is complete, so the queue holds at most one */
    while (n) {
        size_t have = s->q_n - s->q_r, need = chunk_need(s);
        size_t take = SR_MIN(need - have, n);
        st = queue_push(s, pcm, take); /* one thread drives a solo stream: no lock needed */
        if (!st && have + take == need) st = sr_engine_step(e, NULL);
        if (st) return st;
        pcm += take;
        n -= take;
    }
    return SR_OK;
}

sr_status sr_stream_finish(sr_stream *s)
{
    if (!s) return sr_error(SR_ERR_ARG, "sr_stream_finish: stream is NULL");
    sr_engine *e = s->e;
    sr_status st = SR_OK;
    pthread_mutex_lock(&e->qmu);
    if (s->err) st = stream_err(s);
    else if (s->finish_req) st = sr_error(SR_ERR_ARG, "sr_stream_finish: stream already finished");
    else s->finish_req = 1;
    pthread_mutex_unlock(&e->qmu);
    if (st) return st;
    return e->solo ? sr_engine_drain(e) : SR_OK;
}

sr_status sr_stream_failed(const sr_stream *s, const char **msg)
{
    if (msg) *msg = "";
    if (!s) return SR_OK;
    pthread_mutex_t *mu = (pthread_mutex_t *)&s->e->qmu; /* err is written under it */
    pthread_mutex_lock(mu);
    sr_status st = s->err;
    if (st && msg) *msg = s->err_msg ? s->err_msg : sr_strerror(st);
    pthread_mutex_unlock(mu);
    return st;
}

int sr_stream_done(const sr_stream *s) { return s ? s->finished : 0; }

const sr_hypothesis *sr_stream_hypothesis(const sr_stream *s) { return s ? &s->pub : NULL; }
const sr_timeline *sr_stream_timeline(const sr_stream *s) { return s ? &s->tl_pub : NULL; }

void sr_stream_reset(sr_stream *s)
{
    if (!s) return;
    s->m->ops->reset(s->bstate);
    if (s->dec->reset) s->dec->reset(s->dstate);
    pthread_mutex_lock(&s->e->qmu);
    s->q_r = s->q_n = 0;
    s->finish_req = 0;
    s->err = SR_OK;
    pthread_mutex_unlock(&s->e->qmu);
    s->samples_in = s->consumed = 0;
    s->chunks = 0;
    s->finished = 0;
    s->draining = 0;
    s->hyp.n = s->hyp.n_stable = s->hyp.loop_cuts = 0;
    timeline_drop(s, 0);
    update_text(s); /* cannot fail: the text buffer only shrinks */
}

void sr_stream_close(sr_stream *s)
{
    if (!s) return;
    sr_engine *e = s->e;
    stream_free(s);
    if (e && e->solo) sr_engine_free(e);
}

void sr_memory(const sr_model *m, const sr_stream *s, sr_memstats *out)
{
    memset(out, 0, sizeof *out);
    if (m) out->weight_bytes = m->weight_bytes;
    if (s) {
        const sr_engine *e = s->e;
        out->stream_bytes = stream_own_bytes(s);
        if (e->batch) out->stream_bytes += s->m->ops->batch_bytes(e->batch) / (size_t)e->max_streams;
    }
    if (m && m->k->mem) {
        m->k->mem(&out->gpu_live_bytes, &out->gpu_peak_bytes);
        out->gpu_pool_bytes = sr_kpool_device_bytes();
    }
    out->peak_rss_bytes = sr_peak_rss_bytes();
}

void sr_memory_gpu_split(const sr_memstats *ms, size_t *weights, size_t *pools, size_t *scratch)
{
    size_t w = ms && ms->gpu_live_bytes ? ms->weight_bytes : 0, p = ms ? ms->gpu_pool_bytes : 0;
    size_t live = ms ? ms->gpu_live_bytes : 0;
    if (weights) *weights = w;
    if (pools) *pools = p;
    if (scratch) *scratch = live > w + p ? live - w - p : 0;
}

void sr_engine_memory(const sr_engine *e, sr_memstats *out)
{
    memset(out, 0, sizeof *out);
    if (e) {
        out->weight_bytes = e->m->weight_bytes;
        for (int i = 0; i < e->max_streams; i++)
            if (e->slots[i]) out->stream_bytes += stream_own_bytes(e->slots[i]);
        if (e->batch) out->stream_bytes += e->m->ops->batch_bytes(e->batch);
        if (e->m->k->mem) {
            e->m->k->mem(&out->gpu_live_bytes, &out->gpu_peak_bytes);
            out->gpu_pool_bytes = sr_kpool_device_bytes();
        }
    }
    out->peak_rss_bytes = sr_peak_rss_bytes();
}
