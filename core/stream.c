/*
 * stream.c — the stream engine (DESIGN §4). Audio of any split is buffered into the backend's
 * chunks (first chunk, then fixed chunks); each complete chunk runs backend.process then
 * decoder.update, is timed (in all, and the backend's part), detokenized and appended to the
 * timeline. finish() hands the remainder to the backend with final = 1. Because chunk
 * boundaries depend only on the sample count, feeding 1, 160, 1280 or all samples per call
 * gives the same timeline.
 *
 * Memory: the chunk buffer, the hypothesis and the backend/decoder state are allocated at open
 * (the hypothesis grows by doubling); reset clears without freeing. The timeline is a log, not
 * state: with record_timeline = 0 only its last entry is kept, for unbounded streams. An entry
 * whose hypothesis equals the previous entry's shares that entry's block (most chunks of a
 * streaming decoder add no token), so a recorded timeline costs one copy of the hypothesis per
 * change, not per chunk.
 */
#include "plugin.h"

#include <math.h>
#include <string.h>

struct sr_stream {
    const sr_model *m;
    sr_stream_config cfg;
    char *strategy, *decoder; /* owned copies of the cfg strings */

    void *bstate;             /* backend per-stream state */
    sr_chunking ck;
    sr_scorer sc;
    const sr_decoder_ops *dec;
    void *dstate;

    float *buf;               /* [cap] pending samples of the current chunk */
    size_t buf_n, buf_cap;
    int64_t samples_in;       /* samples fed so far */
    int64_t chunks;           /* chunks processed */
    int finished;

    sr_hyp hyp;
    sr_strbuf text;
    sr_hypothesis pub;

    sr_timeline_entry *tl;    /* entries; an entry owns one block with its tokens and text
                                 unless it shares the previous entry's (same tokens pointer) */
    size_t tl_n, tl_cap;
    sr_timeline tl_pub;
};

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
    return SR_OK;
}

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
    e->audio_ms = s->samples_in * 1000 / 16000;
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

/* Run one chunk (or the final remainder) through backend and decoder. */
static sr_status run_chunk(sr_stream *s, const float *pcm, size_t n, int final)
{
    int64_t t0 = sr_now_ns();
    sr_status st = s->m->ops->process(s->bstate, pcm, n, final);
    int64_t t1 = sr_now_ns();
    if (!st) st = s->dec->update(s->dstate, &s->sc, final, &s->hyp);
    int64_t dt = sr_now_ns() - t0;
    if (!st) st = update_text(s);
    if (!st) st = timeline_append(s, dt, t1 - t0, final);
    if (st) return sr_error_prefix(st, "%s: chunk %lld", s->m->path, (long long)s->chunks);
    s->chunks++;
    return SR_OK;
}

static size_t chunk_need(const sr_stream *s) { return s->chunks ? s->ck.chunk : s->ck.first_chunk; }

sr_status sr_stream_open(const sr_model *m, const sr_stream_config *cfg, sr_stream **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_stream_open: out is NULL");
    *out = NULL;
    if (!m) return sr_error(SR_ERR_ARG, "sr_stream_open: model is NULL");
    sr_stream *s = sr_calloc(1, sizeof *s, "stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    if (cfg) s->cfg = *cfg;
    else sr_stream_config_init(&s->cfg);
    sr_status st = SR_ERR_NOMEM;
    if ((s->cfg.strategy && !(s->strategy = sr_strdup(s->cfg.strategy))) ||
        (s->cfg.decoder && !(s->decoder = sr_strdup(s->cfg.decoder))))
        goto fail;
    s->cfg.strategy = s->strategy;
    s->cfg.decoder = s->decoder;

    const char *dname = s->decoder ? s->decoder : m->ops->default_decoder;
    if ((st = sr_decoder_find(dname, &s->dec))) goto fail;
    if ((st = m->ops->stream_open(m, &s->cfg, NULL, 0, &s->bstate, &s->ck, &s->sc))) goto fail;
    if (s->dec->kind != s->sc.kind) {
        st = sr_error(SR_ERR_ARG, "decoder %s does not fit arch %s (it needs a different scorer)",
                      s->dec->name, m->arch);
        goto fail;
    }
    if (!s->ck.chunk || !s->ck.first_chunk) {
        st = sr_error(SR_ERR_ARG, "arch %s: zero chunk size", m->arch);
        goto fail;
    }
    if (s->dec->open && (st = s->dec->open(&s->cfg, &s->sc, &s->dstate))) goto fail;
    s->buf_cap = SR_MAX(s->ck.chunk, s->ck.first_chunk);
    if (!(s->buf = sr_malloc(s->buf_cap * sizeof(float), "stream chunk buffer"))) {
        st = SR_ERR_NOMEM;
        goto fail;
    }
    if ((st = update_text(s))) goto fail;
    *out = s;
    return SR_OK;
fail:
    sr_error_prefix(st, "%s", m->path);
    sr_stream_close(s);
    return st;
}

sr_status sr_stream_feed(sr_stream *s, const float *pcm, size_t n)
{
    if (!s) return sr_error(SR_ERR_ARG, "sr_stream_feed: stream is NULL");
    if (s->finished) return sr_error(SR_ERR_ARG, "sr_stream_feed: stream already finished (reset it first)");
    if (n && !pcm) return sr_error(SR_ERR_ARG, "sr_stream_feed: samples are NULL");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return sr_error(SR_ERR_ARG, "sr_stream_feed: sample %zu of this call is %s", i,
                            isnan(pcm[i]) ? "NaN" : "infinite");
    while (n) {
        size_t need = chunk_need(s);
        size_t take = SR_MIN(need - s->buf_n, n);
        memcpy(s->buf + s->buf_n, pcm, take * sizeof(float));
        s->buf_n += take;
        s->samples_in += (int64_t)take;
        pcm += take;
        n -= take;
        if (s->buf_n == need) {
            s->buf_n = 0;
            sr_status st = run_chunk(s, s->buf, need, 0);
            if (st) return st;
        }
    }
    return SR_OK;
}

sr_status sr_stream_finish(sr_stream *s)
{
    if (!s) return sr_error(SR_ERR_ARG, "sr_stream_finish: stream is NULL");
    if (s->finished) return sr_error(SR_ERR_ARG, "sr_stream_finish: stream already finished");
    s->finished = 1;
    size_t n = s->buf_n;
    s->buf_n = 0;
    return run_chunk(s, s->buf, n, 1);
}

const sr_hypothesis *sr_stream_hypothesis(const sr_stream *s) { return s ? &s->pub : NULL; }
const sr_timeline *sr_stream_timeline(const sr_stream *s) { return s ? &s->tl_pub : NULL; }

void sr_stream_reset(sr_stream *s)
{
    if (!s) return;
    s->m->ops->reset(s->bstate);
    if (s->dec->reset) s->dec->reset(s->dstate);
    s->buf_n = 0;
    s->samples_in = 0;
    s->chunks = 0;
    s->finished = 0;
    s->hyp.n = s->hyp.n_stable = 0;
    timeline_drop(s, 0);
    update_text(s); /* cannot fail: the text buffer only shrinks */
}

void sr_stream_close(sr_stream *s)
{
    if (!s) return;
    if (s->dstate && s->dec && s->dec->close) s->dec->close(s->dstate);
    if (s->bstate) s->m->ops->stream_close(s->bstate);
    timeline_drop(s, 0);
    free(s->tl);
    free(s->buf);
    free(s->hyp.tokens);
    sr_strbuf_free(&s->text);
    free(s->strategy);
    free(s->decoder);
    free(s);
}

void sr_memory(const sr_model *m, const sr_stream *s, sr_memstats *out)
{
    memset(out, 0, sizeof *out);
    if (m) out->weight_bytes = m->weight_bytes;
    if (s) {
        out->stream_bytes = sizeof *s + s->buf_cap * sizeof(float) +
                            (size_t)s->hyp.cap * sizeof(int32_t) + s->text.cap +
                            s->m->ops->state_bytes(s->bstate);
        if (s->dec->state_bytes) out->stream_bytes += s->dec->state_bytes(s->dstate);
    }
    out->peak_rss_bytes = sr_peak_rss_bytes();
}
