/*
 * testlinear.c — "test_linear", a tiny real backend used by the tests of the stream engine,
 * registry, timeline and decoders (it has no use beyond that).
 *
 * Architecture: audio in chunks of chunk_ms (one output frame per chunk)
 *   chunk [S] -> n_bands equal segments -> f[b] = ln(1e-6 + mean(x^2) over segment b)  [n_bands]
 *   logits = proj.weight [vocab, n_bands] · f + proj.bias [vocab]                     [vocab]
 * scored one frame at a time (SYNC scorer); token `blank` means "no token".
 * A final partial chunk is zero-padded to a whole chunk; an empty one produces no frame.
 *
 * Device-neutral: the features are computed on the host and uploaded, the product runs in the
 * table's memory and the logits are downloaded for the decoder, so it runs on any table (the
 * tests run it on "cpu-guard", which faults on any host access to table memory).
 *
 * Failure hook (for the engine's failure tests; this backend serves tests only): a chunk whose
 * first sample is exactly TL_FAIL_SAMPLE fails with SR_ERR_ARG. The value is not k / 32768
 * for any integer k, so no 16-bit recording contains it.
 */
#include "../../core/plugin.h"

#include <math.h>
#include <string.h>

#define TL_FAIL_SAMPLE 0.123456789f

typedef struct {
    int chunk;          /* samples per chunk */
    int n_bands, vocab, blank;
    const sr_kweight *w; /* [vocab, n_bands] */
    float *b;           /* [vocab], table memory */
} tl_model;

typedef struct {
    const sr_model *m;
    const tl_model *tm;
    int n_frames;       /* frames produced */
    float *feat;        /* [n_bands] features of the latest frame (host) */
    float *pad;         /* [chunk] zero-padded final chunk (host) */
    float *dfeat;       /* [n_bands] table memory */
    float *dlogits;     /* [vocab] table memory */
} tl_stream;

static sr_status tl_load(sr_model *m, sr_h5 *f)
{
    int sr = 0, chunk_ms = 0;
    tl_model *tm = sr_calloc(1, sizeof *tm, "test_linear model");
    if (!tm) return SR_ERR_NOMEM;
    sr_status st;
    if ((st = sr_cfg_int(m, "sample_rate", &sr)) || (st = sr_cfg_int(m, "chunk_ms", &chunk_ms)) ||
        (st = sr_cfg_int(m, "n_bands", &tm->n_bands)) || (st = sr_cfg_int(m, "vocab", &tm->vocab)) ||
        (st = sr_cfg_int_def(m, "blank", 0, &tm->blank)))
        goto fail;
    st = SR_ERR_FORMAT;
    if (sr != 16000) { sr_error(st, "%s: config.sample_rate: %d, test_linear needs 16000", m->path, sr); goto fail; }
    if (chunk_ms <= 0 || chunk_ms > 10000) { sr_error(st, "%s: config.chunk_ms: %d out of range (1..10000)", m->path, chunk_ms); goto fail; }
    tm->chunk = chunk_ms * 16;
    if (tm->n_bands <= 0 || tm->chunk % tm->n_bands) { sr_error(st, "%s: config.n_bands: %d must divide the %d-sample chunk", m->path, tm->n_bands, tm->chunk); goto fail; }
    if (tm->vocab <= 0) { sr_error(st, "%s: config.vocab: %d must be positive", m->path, tm->vocab); goto fail; }
    if (tm->blank < 0 || tm->blank >= tm->vocab) { sr_error(st, "%s: config.blank: %d outside the vocabulary", m->path, tm->blank); goto fail; }
    if (m->tokenizer && sr_tokenizer_size(m->tokenizer) != tm->vocab) {
        sr_error(st, "%s: /tokenizer has %d pieces, config.vocab is %d", m->path, sr_tokenizer_size(m->tokenizer), tm->vocab);
        goto fail;
    }
    const sr_tensor *b;
    if ((st = sr_model_weight(m, f, "proj.weight", SR_F32, tm->vocab, tm->n_bands, &tm->w)) ||
        (st = sr_model_tensor(m, f, "proj.bias", SR_F32, 1, (int64_t[]){tm->vocab}, &b)))
        goto fail;
    if (!(tm->b = m->k->alloc((size_t)tm->vocab * sizeof(float)))) {
        st = sr_error(SR_ERR_NOMEM, "%s: proj.bias in %s memory", m->path, m->k->name);
        goto fail;
    }
    if ((st = m->k->upload(tm->b, b->data, (size_t)tm->vocab * sizeof(float)))) goto fail;
    m->impl = tm;
    return SR_OK;
fail:
    m->k->free(tm->b);
    free(tm);
    return st;
}

static void tl_unload(sr_model *m)
{
    tl_model *tm = m->impl;
    if (tm) m->k->free(tm->b);
    free(tm);
    m->impl = NULL;
}

static int tl_frames(void *ctx) { return ((tl_stream *)ctx)->n_frames; }

static sr_status tl_step(void *ctx, int t, int32_t prev, float *logits)
{
    tl_stream *s = ctx;
    const tl_model *tm = s->tm;
    if (t != s->n_frames - 1)
        return sr_error(SR_ERR_ARG, "test_linear: step over frame %d, only frame %d is held", t, s->n_frames - 1);
    /* logits[1, vocab] = feat[1, n_bands] · W^T + b, in table memory, then to the decoder */
    const sr_kernels *k = s->m->k;
    sr_status st = k->upload(s->dfeat, s->feat, (size_t)tm->n_bands * sizeof(float));
    if (!st)
        st = k->gemm(1, s->dfeat, tm->n_bands, tm->w, tm->b, SR_ACT_NONE, 1.0f, 0.0f, s->dlogits,
                     tm->vocab);
    if (!st) st = k->download(logits, s->dlogits, (size_t)tm->vocab * sizeof(float));
    return st;
}

static void tl_reset(void *state)
{
    tl_stream *s = state;
    s->n_frames = 0;
}

static void tl_stream_close(void *state)
{
    tl_stream *s = state;
    if (!s) return;
    free(s->feat);
    free(s->pad);
    s->m->k->free(s->dfeat);
    s->m->k->free(s->dlogits);
    free(s);
}

static sr_status tl_stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch,
                                int slot, void **state,
                                sr_chunking *ck, sr_scorer *sc)
{
    (void)batch;
    (void)slot;
    const tl_model *tm = m->impl;
    if (cfg->strategy && strcmp(cfg->strategy, "sync"))
        return sr_error(SR_ERR_ARG, "stream.strategy: \"%s\" unknown for test_linear (known: sync)", cfg->strategy);
    if (cfg->chunk_ms && cfg->chunk_ms * 16 != tm->chunk)
        return sr_error(SR_ERR_ARG, "stream.chunk_ms: test_linear has a fixed chunk of %d ms", tm->chunk / 16);
    tl_stream *s = sr_calloc(1, sizeof *s, "test_linear stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->tm = tm;
    s->feat = sr_calloc((size_t)tm->n_bands, sizeof(float), "test_linear features");
    s->pad = sr_calloc((size_t)tm->chunk, sizeof(float), "test_linear padding");
    s->dfeat = m->k->alloc((size_t)tm->n_bands * sizeof(float));
    s->dlogits = m->k->alloc((size_t)tm->vocab * sizeof(float));
    if (!s->feat || !s->pad || !s->dfeat || !s->dlogits) {
        tl_stream_close(s);
        return SR_ERR_NOMEM;
    }
    ck->first_chunk = ck->chunk = (size_t)tm->chunk;
    memset(sc, 0, sizeof *sc);
    sc->kind = SR_SCORER_SYNC;
    sc->ctx = s;
    sc->vocab = tm->vocab;
    sc->blank = tm->blank;
    sc->eot = -1;
    sc->sync_frames = tl_frames;
    sc->sync_step = tl_step;
    *state = s;
    return SR_OK;
}

static sr_status tl_process(void *state, const float *pcm, size_t n, int final)
{
    tl_stream *s = state;
    const tl_model *tm = s->tm;
    if (n == 0) return SR_OK;
    if (pcm[0] == TL_FAIL_SAMPLE)
        return sr_error(SR_ERR_ARG, "test_linear: chunk %d starts with the failure sample", s->n_frames);
    if (n < (size_t)tm->chunk) { /* final remainder: zero-pad to a whole chunk */
        memset(s->pad, 0, (size_t)tm->chunk * sizeof(float));
        memcpy(s->pad, pcm, n * sizeof(float));
        pcm = s->pad;
    }
    int seg = tm->chunk / tm->n_bands;
    for (int b = 0; b < tm->n_bands; b++) {
        double e = 0;
        for (int i = 0; i < seg; i++) e += (double)pcm[b * seg + i] * pcm[b * seg + i];
        s->feat[b] = (float)log(1e-6 + e / seg);
    }
    s->n_frames++;
    return SR_OK;
}

static size_t tl_state_bytes(const void *state)
{
    const tl_stream *s = state;
    return sizeof *s + 2 * (size_t)s->tm->n_bands * sizeof(float) +
           (size_t)s->tm->chunk * sizeof(float) + (size_t)s->tm->vocab * sizeof(float);
}

const sr_model_ops sr_test_linear_ops = {
    .name = "test_linear",
    .description = "test-only backend: log band energies through one linear map (sync scorer)",
    .default_decoder = "sync_greedy",
    .device_ready = 1,
    .load = tl_load,
    .unload = tl_unload,
    .stream_open = tl_stream_open,
    .process = tl_process,
    .reset = tl_reset,
    .stream_close = tl_stream_close,
    .state_bytes = tl_state_bytes,
};
