/*
 * test_voxtral.c — the voxtral_realtime backend (models/voxtral/):
 *   voxtral_parity  random-init model vs transformers' VoxtralRealtimeForConditionalGeneration
 *                   (scripts/gen_golden_voxtral.py): streaming log-mel vs the offline feature
 *                   extractor, streaming encoder (ring K/V caches, windows 16 and 750) vs the
 *                   offline encoder under its sliding-window mask, adapter, the first decoder
 *                   logits, and every greedy step (decoder window 20 and 8192, flush to EOS);
 *                   the same with bf16 K/V caches (cache_dtype "bf16": tolerance one bf16 rounding
 *                   of the tensor's largest magnitude, tokens still exact); an int8 recast of
 *                   model.h5 keeps its matrices int8 and streams as its dequantized f32 copy
 *                   does (model_i8.h5, model_i8_f32.h5: `make fixtures`)
 *   voxtral_stream  the public stream API: tokens equal the golden for any feed split, reset
 *                   reuse, bounded per-stream memory over a long stream (f32 and bf16 caches),
 *                   sub-frame audio, bf16 caches halving exactly the batch context's cache
 *                   bytes; the forward functions over a batch of two streams (different row
 *                   counts, positions, slots and delays, rings wrapping) equal each stream alone
 *                   bit for bit
 *   voxtral_batch   streams of one batch context (4 slots, f32 and bf16 caches): five streams
 *                   over different audio joining at different calls, process_batch /
 *                   sync_step_batch over changing subsets, finals at different calls, a reset
 *                   mid-way, a closed stream's slot reused by a new one; every step's logits,
 *                   mel frames, encoder rows and audio embeddings equal (memcmp) those of the
 *                   same stream alone in a context of one (process / sync_step); batch_open
 *                   config errors, slots out of range or taken, mixed or repeated streams
 *   voxtral_bad     stream configs (delay, chunk, strategy, cache_dtype), scorer misuse, malformed
 *                   files
 *   voxtral_convert scripts/convert_voxtral.py (run as CI has it: /usr/bin/python3 + numpy + h5py)
 *                   on the golden model saved in the Mistral layout (interleaved RoPE rows) and
 *                   the transformers layout: the Q/K rows, q bias and every other matrix equal
 *                   model.h5's bit for bit, and streaming gives the golden tokens; a checkpoint
 *                   without a tensor and one whose tekken.json is a token short fail with a
 *                   message naming the culprit and leave no output file
 * Tolerances: mel 1e-4, encoder / adapter / logits 1e-4 absolute (float32 throughout; the
 * weights are bf16 values in both implementations). Tokens: exact.
 */
#include "test.h"

#include "../models/voxtral/voxtral.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


static sr_h5 *open_golden(void) { return test_open_golden("voxtral/golden.h5"); }

static void check_close(const char *what, const float *got, const float *want, size_t n,
                        double tol)
{
    double d = test_max_abs_diff(got, want, n);
    printf("\n      %s: max |diff| %.3g (tolerance %.2g)", what, d, tol);
    CU_ASSERT(d <= tol);
}

/* A stream alone in a batch context of one slot, as the core opens a lone stream. */
static sr_status open_solo(const sr_model *m, const sr_stream_config *cfg, void **batch,
                           void **state, sr_chunking *ck, sr_scorer *sc)
{
    *state = NULL;
    sr_status st = m->ops->batch_open(m, cfg, 1, batch);
    if (st) return st;
    if ((st = m->ops->stream_open(m, cfg, *batch, 0, state, ck, sc))) {
        m->ops->batch_close(*batch);
        *batch = NULL;
    }
    return st;
}

static void close_solo(const sr_model *m, void *batch, void *state)
{
    m->ops->stream_close(state);
    m->ops->batch_close(batch);
}

/* Drive the backend as the engine does: chunks of first_chunk then chunk samples, the scorer
 * stepped greedily after each, the remainder with final = 1. Steps' argmax go to steps[]. */
static int run_backend(const sr_model *m, vx_stream *s, const sr_scorer *sc, const float *a,
                       size_t n, int32_t *steps, int max_steps, float *logits, float *rec,
                       int rec_n)
{
    size_t first = VX_STEP_SAMPLES + VX_LOOKAHEAD, pos = 0;
    int t = 0;
    int32_t prev = -1;
    for (;;) {
        size_t need = pos ? VX_STEP_SAMPLES : first;
        int final = pos + need > n;
        size_t take = final ? n - pos : need;
        sr_status st = m->ops->process(s, a + pos, take, final);
        if (st) printf("\n      process: %s\n", sr_last_error());
        CU_ASSERT_EQUAL_FATAL(st, SR_OK);
        pos += take;
        for (int nf = sc->sync_frames(sc->ctx); t < nf; t++) {
            st = sc->sync_step(sc->ctx, t, prev, logits);
            if (st) printf("\n      sync_step: %s\n", sr_last_error());
            CU_ASSERT_EQUAL_FATAL(st, SR_OK);
            int best = 0;
            for (int v = 1; v < sc->vocab; v++)
                if (logits[v] > logits[best]) best = v;
            if (t < rec_n) memcpy(rec + (size_t)t * sc->vocab, logits, (size_t)sc->vocab * sizeof(float));
            if (t < max_steps) steps[t] = best;
            prev = best;
        }
        if (final) break;
    }
    return t;
}

/* Tolerance of a tensor computed through bf16 K/V caches: one bf16 rounding (unit roundoff
 * 2^-9) of the tensor's largest magnitude. Rounding K and V perturbs each attention output by
 * at most 2^-9 of the largest |V| (a convex combination of rounded rows) plus the softmax's
 * response to scores perturbed by 2^-9 relative; measured: 1.0e-3 (encoder), 7.4e-4 (adapter),
 * 6.9e-4 (logits) of the largest magnitude, about half the bound. */
static double kv_bf16_tol(const float *want, size_t n)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)want[i]));
    return ldexp(mx, -9);
}

/* kv: the stream's cache_dtype (NULL = f32: every tensor within 1e-4; "bf16": the encoder, adapter
 * and logits downstream of the caches within kv_bf16_tol). prec: the options precision (NULL:
 * f32; "bf16", issue 11's fast mode: those three within test_bf16_tol). Tokens must be exact
 * either way. */
static void parity_prec(const char *fixture, const char *grp, const char *kv, const char *prec)
{
    sr_model *m = test_load_prec(test_fixture(fixture), prec);
    sr_h5 *g = open_golden();
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    char path[128];
    sr_tensor mh, mt, enc, ada, lg, steps;
#define G(name, dt, t) (snprintf(path, sizeof path, "/%s/%s", grp, name), test_golden(g, path, dt, t))
    /* one at a time: the operands of & may interleave their use of `path` */
    int ok = G("mel_head", SR_F32, &mh);
    ok = G("mel_tail", SR_F32, &mt) && ok;
    ok = G("encoder", SR_F32, &enc) && ok;
    ok = G("adapter", SR_F32, &ada) && ok;
    ok = G("logits", SR_F32, &lg) && ok;
    ok = G("steps", SR_I32, &steps) && ok;
#undef G
    CU_ASSERT_FATAL(ok && audio);
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.cache_dtype = kv;
    void *state = NULL, *batch = NULL;
    sr_chunking ck;
    sr_scorer sc;
    CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &batch, &state, &ck, &sc), SR_OK);
    sr_dtype want_kv = kv && !strcmp(kv, "bf16") ? SR_BF16 : SR_F32;
    CU_ASSERT_EQUAL(((vx_stream *)state)->b->ek->dtype, want_kv);
    CU_ASSERT_EQUAL(((vx_stream *)state)->b->dk->dtype, want_kv);
    CU_ASSERT_EQUAL(ck.first_chunk, VX_STEP_SAMPLES + VX_LOOKAHEAD);
    CU_ASSERT_EQUAL(ck.chunk, VX_STEP_SAMPLES);
    vx_stream *s = state;
    const vx_model *w = m->impl;
    int n_enc = (int)enc.shape[0], n_ada = (int)ada.shape[0];
    int n_mel = 2 * n_enc;
    s->cap_mel = malloc((size_t)n_mel * w->n_mels * sizeof(float));
    s->cap_mel_max = n_mel;
    s->cap_enc = malloc((size_t)n_enc * w->enc_dim * sizeof(float));
    s->cap_enc_max = n_enc;
    s->cap_ada = malloc((size_t)n_ada * w->dim * sizeof(float));
    s->cap_ada_max = n_ada;
    int K = (int)lg.shape[0], max_steps = 256;
    int32_t *got = calloc((size_t)max_steps, sizeof(int32_t));
    float *logits = malloc((size_t)sc.vocab * sizeof(float));
    float *rec = malloc((size_t)K * sc.vocab * sizeof(float));
    int nsteps = run_backend(m, s, &sc, audio, n, got, max_steps, logits, rec, K);

    CU_ASSERT_EQUAL(s->cap_mel_n, n_mel);
    CU_ASSERT_EQUAL(s->cap_enc_n, n_enc);
    CU_ASSERT_EQUAL(s->cap_ada_n, n_ada);
    if (s->cap_mel_n == n_mel) {
        check_close("mel head (streaming vs offline)", s->cap_mel, mh.data, (size_t)sr_tensor_numel(&mh), 1e-4);
        check_close("mel tail", s->cap_mel + (size_t)(n_mel - mt.shape[0]) * w->n_mels, mt.data,
                    (size_t)sr_tensor_numel(&mt), 1e-4);
    }
    size_t ne = (size_t)sr_tensor_numel(&enc), na = (size_t)sr_tensor_numel(&ada),
           nl = (size_t)sr_tensor_numel(&lg);
    int kvb = kv && !strcmp(kv, "bf16");
#define VX_TOL(t, n) (prec ? test_bf16_tol(t, n) : kvb ? kv_bf16_tol(t, n) : 1e-4)
    if (s->cap_enc_n == n_enc) check_close("encoder", s->cap_enc, enc.data, ne, VX_TOL(enc.data, ne));
    if (s->cap_ada_n == n_ada) check_close("adapter", s->cap_ada, ada.data, na, VX_TOL(ada.data, na));
    check_close("decoder logits (first steps)", rec, lg.data, nl, VX_TOL(lg.data, nl));
#undef VX_TOL
    /* every step's argmax; after EOS the flush steps report the pad, which the golden omits */
    int ng = (int)steps.shape[0], same = nsteps >= ng;
    for (int i = 0; same && i < ng; i++) same = got[i] == ((int32_t *)steps.data)[i];
    for (int i = ng; same && i < nsteps && i < max_steps; i++) same = got[i] == w->pad;
    printf("\n      %d steps (golden %d), greedy steps equal: %s", nsteps, ng, same ? "yes" : "NO");
    CU_ASSERT(same);
    free(s->cap_mel);
    free(s->cap_enc);
    free(s->cap_ada);
    close_solo(m, batch, state);
    free(got);
    free(logits);
    free(rec);
    free(audio);
    sr_tensor *ts[] = {&mh, &mt, &enc, &ada, &lg, &steps};
    for (size_t i = 0; i < SR_ARRAY_LEN(ts); i++) sr_tensor_free(ts[i]);
    sr_h5_close(g);
    sr_model_free(m);
}

static void parity(const char *fixture, const char *grp, const char *kv)
{
    parity_prec(fixture, grp, kv, NULL);
}

static void test_parity_small(void) { parity("voxtral/model.h5", "small", NULL); }
static void test_parity_full(void) { parity("voxtral/model_full.h5", "full", NULL); }
static void test_parity_small_bf16(void) { parity("voxtral/model.h5", "small", "bf16"); }
static void test_parity_full_bf16(void) { parity("voxtral/model_full.h5", "full", "bf16"); }
static void test_parity_small_prec_bf16(void) { parity_prec("voxtral/model.h5", "small", NULL, "bf16"); }
static void test_parity_full_prec_bf16(void) { parity_prec("voxtral/model_full.h5", "full", NULL, "bf16"); }

/* An int8 file (scripts/recast_model.py model.h5 --dtype int8: per-row scales) keeps its
 * matrices int8 (the i8 weight of the table: its q and scales), and streams as its own
 * dequantized f32 copy (recast again --dtype f32) does. prec NULL (f32): the exact path, one
 * byte a weight read per product: every step the same token, the first steps' logits within
 * 1e-4 (only where the scale multiplies: once after the sum, or into each weight). prec "bf16":
 * the table's fast products for i8 (sr_kernels.i8_fast_mul: on a GPU bf16 products over the
 * int8 values, exact in bf16, the scale after the sum; on the CPU the exact ones): the same
 * tokens, the logits within test_bf16_tol of the f32 copy's exact ones. */
static void int8_vs_f32(const char *prec)
{
    sr_model *m8 = test_load_prec(test_fixture("voxtral/model_i8.h5"), prec),
             *mf = test_load_model("voxtral/model_i8_f32.h5");
    CU_ASSERT_FATAL(m8 && mf);
    const vx_model *w8 = m8->impl, *wf = mf->impl;
    CU_ASSERT_EQUAL(w8->dec[0].qkv.w->dtype, SR_I8);
    CU_ASSERT_EQUAL(w8->enc[1].gu.w->dtype, SR_I8);
    CU_ASSERT_EQUAL(w8->dec[1].down.w->dtype, SR_I8);
    CU_ASSERT_EQUAL(w8->embed->dtype, SR_I8);
    const sr_kmul mul = prec ? m8->k->i8_fast_mul : SR_KMUL_EXACT;
    CU_ASSERT_EQUAL(w8->dec[0].qkv.w->mul, mul);
    CU_ASSERT_EQUAL(w8->embed->mul, mul);
    CU_ASSERT_EQUAL(wf->dec[0].qkv.w->dtype, SR_F32);
    CU_ASSERT(w8->embed->bytes * (prec ? 1 : 3) < wf->embed->bytes);
    sr_h5 *g = open_golden();
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    sr_h5_close(g);
    CU_ASSERT_FATAL(audio != NULL);
    enum { K = 8, MAXS = 256 };
    const sr_model *ms[2] = {m8, mf};
    int32_t *steps[2];
    float *rec[2];
    int ns[2];
    for (int i = 0; i < 2; i++) {
        sr_stream_config cfg;
        sr_stream_config_init(&cfg);
        void *state = NULL, *batch = NULL;
        sr_chunking ck;
        sr_scorer sc;
        CU_ASSERT_EQUAL_FATAL(open_solo(ms[i], &cfg, &batch, &state, &ck, &sc), SR_OK);
        steps[i] = calloc(MAXS, sizeof(int32_t));
        rec[i] = malloc((size_t)K * sc.vocab * sizeof(float));
        float *logits = malloc((size_t)sc.vocab * sizeof(float));
        ns[i] = run_backend(ms[i], state, &sc, audio, n, steps[i], MAXS, logits, rec[i], K);
        free(logits);
        close_solo(ms[i], batch, state);
    }
    CU_ASSERT(ns[0] > K && ns[0] == ns[1]);
    CU_ASSERT_EQUAL(memcmp(steps[0], steps[1], sizeof(int32_t) * (size_t)SR_MIN(ns[0], MAXS)), 0);
    size_t nl = (size_t)K * w8->vocab;
    check_close(prec ? "int8 in precision bf16 vs its f32 copy: decoder logits"
                     : "int8 vs its f32 copy: decoder logits",
                rec[0], rec[1], nl, prec ? test_bf16_tol(rec[1], nl) : 1e-4);
    printf("\n      %d steps, the same tokens", ns[0]);
    for (int i = 0; i < 2; i++) {
        free(steps[i]);
        free(rec[i]);
    }
    free(audio);
    sr_model_free(m8);
    sr_model_free(mf);
}

static void test_int8_as_stored(void) { int8_vs_f32(NULL); }
static void test_int8_bf16_products(void) { int8_vs_f32("bf16"); }

/* ---- public stream API ---- */

static int32_t *gold_tokens(const char *grp, int *n)
{
    sr_h5 *g = open_golden();
    char path[64];
    snprintf(path, sizeof path, "/%s/tokens", grp);
    sr_tensor t;
    int32_t *out = NULL;
    if (test_golden(g, path, SR_I32, &t)) {
        *n = (int)t.shape[0];
        out = malloc((size_t)(*n + 1) * sizeof(int32_t));
        memcpy(out, t.data, (size_t)*n * sizeof(int32_t));
        sr_tensor_free(&t);
    }
    sr_h5_close(g);
    return out;
}

/* The golden audio (*audio, *n samples) and the small model's golden tokens (returned, *nt). */
/* The golden audio and the tokens of golden group grp ("small": model.h5, "full":
 * model_full.h5). */
static int32_t *golden_of(const char *grp, float **audio, size_t *n, int *nt)
{
    sr_h5 *g = open_golden();
    *audio = test_golden_audio(g, n);
    sr_h5_close(g);
    return gold_tokens(grp, nt);
}

static int32_t *golden_small(float **audio, size_t *n, int *nt) { return golden_of("small", audio, n, nt); }

/* Feed the audio in pieces of `split` samples (0: random sizes), finish, compare tokens. */
static void feed_split(sr_stream *st, const float *a, size_t n, size_t split, unsigned seed)
{
    size_t pos = 0;
    while (pos < n) {
        size_t k = split ? split : 1 + (size_t)(rand_r(&seed) % 3000);
        if (k > n - pos) k = n - pos;
        CU_ASSERT_EQUAL_FATAL(sr_stream_feed(st, a + pos, k), SR_OK);
        pos += k;
    }
    sr_status s = sr_stream_finish(st);
    if (s) printf("\n      finish: %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(s, SR_OK);
}

static int same_tokens(const sr_hypothesis *h, const int32_t *want, int n)
{
    if (h->n_tokens != n) return 0;
    return !memcmp(h->tokens, want, (size_t)n * sizeof(int32_t));
}

static void test_stream_splits(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    size_t n = 0;
    float *audio = NULL;
    int nt = 0;
    int32_t *want = golden_small(&audio, &n, &nt);
    CU_ASSERT_FATAL(audio && want);
    sr_stream *st = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &st), SR_OK);
    size_t splits[] = {1, 160, 1279, 1280, 1320, 4000, 0, 0};
    size_t n_entries = 0;
    for (size_t i = 0; i < SR_ARRAY_LEN(splits); i++) {
        sr_stream_reset(st);
        feed_split(st, audio, n, splits[i], 17u + (unsigned)i);
        const sr_hypothesis *h = sr_stream_hypothesis(st);
        int ok = same_tokens(h, want, nt);
        if (!ok) printf("\n      split %zu: %d tokens, golden %d", splits[i], h->n_tokens, nt);
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(h->n_stable, h->n_tokens);
        size_t ne = sr_stream_timeline(st)->n;
        if (i == 0) n_entries = ne;
        CU_ASSERT_EQUAL(ne, n_entries);
    }
    /* 2 s of audio: one entry per 80 ms chunk after the first 82.5 ms, plus the final one */
    CU_ASSERT_EQUAL(n_entries, (n - 40) / 1280 + 1);
    sr_stream_close(st);
    free(audio);
    free(want);
    sr_model_free(m);
}

/* sync_greedy straight on the backend's scorer, chunk by chunk as the engine drives it, with
 * the argmax taken by the backend (sync_token, the default: one id per step comes back) and
 * with the scorer's logits rows (sync_token cleared: the decoder's own argmax): both give the
 * golden tokens. */
static void test_sync_token(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    size_t n = 0;
    float *audio = NULL;
    int nt = 0;
    int32_t *want = golden_small(&audio, &n, &nt);
    const sr_decoder_ops *dec = NULL;
    CU_ASSERT_FATAL(audio && want && sr_decoder_find("sync_greedy", &dec) == SR_OK);
    for (int mode = 1; mode >= 0; mode--) {
        sr_stream_config cfg;
        sr_stream_config_init(&cfg);
        void *batch = NULL, *state = NULL, *ds = NULL;
        sr_chunking ck;
        sr_scorer sc;
        CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &batch, &state, &ck, &sc), SR_OK);
        CU_ASSERT_EQUAL(sc.sync_token, 1);
        sc.sync_token = mode;
        CU_ASSERT_EQUAL_FATAL(dec->open(&cfg, &sc, &ds), SR_OK);
        /* the logits row is held only where the decoder takes the argmax itself */
        size_t bytes = dec->state_bytes(ds);
        CU_ASSERT(mode ? bytes < (size_t)sc.vocab * sizeof(float) : bytes > (size_t)sc.vocab * sizeof(float));
        sr_hyp h = {0};
        size_t pos = 0;
        sr_status st = SR_OK;
        for (int k = 0; !st; k++) {
            size_t want_n = k ? ck.chunk : ck.first_chunk, left = n - pos;
            int final = left <= want_n;
            size_t take = final ? left : want_n;
            st = m->ops->process(state, audio + pos, take, final);
            if (!st) st = dec->update(ds, &sc, final, &h);
            pos += take;
            if (final) break;
        }
        if (st) printf("\n      %s: %s", mode ? "sync_token" : "logits", sr_last_error());
        CU_ASSERT_EQUAL(st, SR_OK);
        int same = h.n == nt && !memcmp(h.tokens, want, (size_t)nt * sizeof(int32_t));
        printf("%s%s: %d tokens, golden %d, %s", mode ? "\n      " : "; ", mode ? "argmax on the backend" : "logits rows",
               h.n, nt, same ? "equal" : "DIFFERENT");
        CU_ASSERT(same);
        free(h.tokens);
        dec->close(ds);
        close_solo(m, batch, state);
    }
    free(audio);
    free(want);
    sr_model_free(m);
}

/* A stream far longer than both windows: state bytes do not grow; sub-frame audio works. */
/* cache_dtype "bf16" halves exactly the encoder ring and decoder caches of the batch context;
 * the streams' own bytes do not depend on it. */
static void test_stream_kv_bytes(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    void *s32 = NULL, *s16 = NULL, *b32 = NULL, *b16 = NULL;
    sr_chunking ck;
    sr_scorer sc;
    CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &b32, &s32, &ck, &sc), SR_OK);
    cfg.cache_dtype = "bf16";
    CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &b16, &s16, &ck, &sc), SR_OK);
    const vx_batch *a = b32, *b = b16;
    size_t ring32 = a->ek->bytes + a->ev->bytes + a->dk->bytes + a->dv->bytes;
    size_t ring16 = b->ek->bytes + b->ev->bytes + b->dk->bytes + b->dv->bytes;
    CU_ASSERT_EQUAL(ring32, 2 * ring16);
    CU_ASSERT_EQUAL(ring32, 2 * sizeof(float) *
                                ((size_t)a->ek->layers * a->ek->rows * a->ek->width +
                                 (size_t)a->dk->layers * a->dk->rows * a->dk->width));
    CU_ASSERT_EQUAL(m->ops->batch_bytes(b32) - m->ops->batch_bytes(b16), ring32 / 2);
    CU_ASSERT_EQUAL(m->ops->state_bytes(s32), m->ops->state_bytes(s16));
    printf("\n      context %zu B with f32 caches, %zu B with bf16; stream %zu B",
           m->ops->batch_bytes(b32), m->ops->batch_bytes(b16), m->ops->state_bytes(s32));
    close_solo(m, b32, s32);
    close_solo(m, b16, s16);
    sr_model_free(m);
}

/* stream.max_seconds on the model of mini-4b's geometry (an 8,192-position decoder window):
 * the decoder ring sized for that much audio gives the golden tokens as the whole window does;
 * a feed past it is refused; the backend refuses a decoder position past its ring (a stream
 * driven past it through the backend's ops, as no engine does) instead of wrapping. */
static void test_max_seconds(void)
{
    sr_model *m = test_load_model("voxtral/model_full.h5");
    size_t n = 0;
    float *audio = NULL;
    int nt = 0;
    int32_t *want = golden_of("full", &audio, &n, &nt);
    CU_ASSERT_FATAL(audio && want && n > 16000);
    int secs = (int)((n + 15999) / 16000);
    size_t bytes[2] = {0, 0};
    for (int c = 0; c < 2; c++) {
        sr_stream_config cfg;
        sr_stream_config_init(&cfg);
        cfg.max_seconds = c ? secs : 0;
        sr_stream *st = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &cfg, &st), SR_OK);
        feed_split(st, audio, n, 3000, 7);
        CU_ASSERT(same_tokens(sr_stream_hypothesis(st), want, nt));
        sr_memstats ms;
        sr_memory(m, st, &ms);
        bytes[c] = ms.stream_bytes;
        sr_stream_close(st);
    }
    printf("\n      %.2f s of audio: stream %zu B unbounded, %zu B with max_seconds %d", (double)n / 16000,
           bytes[0], bytes[1], secs);
    CU_ASSERT(bytes[1] < bytes[0] / 2);
    /* the ring's rows: the positions of max_seconds of audio, not the window */
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.max_seconds = 1;
    void *batch = NULL, *state = NULL;
    sr_chunking ck;
    sr_scorer sc;
    CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &batch, &state, &ck, &sc), SR_OK);
    const vx_batch *B = batch;
    CU_ASSERT(B->pos_cap > 0 && B->dk->rows < B->w->window);
    CU_ASSERT_EQUAL(B->dk->rows, (int)B->pos_cap + SR_MAX(B->prompt_len - 1, 1) - 1);
    /* past the ring through the backend's ops (5 s of the audio repeated): refused, naming
     * the field */
    sr_status st = SR_OK;
    float *logits = malloc((size_t)sc.vocab * sizeof(float));
    size_t pos = 0, n5 = 5 * 16000;
    float *a5 = malloc(n5 * sizeof(float));
    for (size_t i = 0; i < n5; i++) a5[i] = audio[i % n];
    int t = 0;
    while (!st && pos < n5) {
        size_t take = SR_MIN(pos ? ck.chunk : ck.first_chunk, n5 - pos);
        st = m->ops->process(state, a5 + pos, take, 0);
        pos += take;
        for (int nf = st ? 0 : sc.sync_frames(sc.ctx); !st && t < nf; t++)
            st = sc.sync_step(sc.ctx, t, -1 + (t > 0) * 3, logits);
    }
    CU_ASSERT_EQUAL(st, SR_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), "stream.max_seconds"));
    free(logits);
    free(a5);
    close_solo(m, batch, state);
    /* through the public API the feed itself is refused */
    sr_stream *ps = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &cfg, &ps), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(ps, audio, 16000), SR_OK);
    TEST_ASSERT_ERR(sr_stream_feed(ps, audio, 1), SR_ERR_ARG, "stream.max_seconds");
    CU_ASSERT_EQUAL(sr_stream_finish(ps), SR_OK);
    sr_stream_close(ps);
    free(audio);
    free(want);
    sr_model_free(m);
}

static void stream_memory(const char *kv)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.record_timeline = 0;
    cfg.cache_dtype = kv;
    sr_stream *st = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &cfg, &st), SR_OK);
    sr_memstats a, b;
    sr_memory(m, st, &a);
    CU_ASSERT(a.weight_bytes > 0);
    CU_ASSERT(a.stream_bytes > 0);
    size_t n = 16000 * 12; /* 12 s: 150 steps, 600 encoder frames vs windows 16 and 20 */
    float *x = malloc(n * sizeof(float));
    unsigned seed = 5;
    for (size_t i = 0; i < n; i++) x[i] = 0.1f * sinf((float)i * 0.05f) + 0.01f * (float)(rand_r(&seed) % 100) / 100.0f;
    CU_ASSERT_EQUAL(sr_stream_feed(st, x, n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(st), SR_OK);
    sr_memory(m, st, &b);
    printf("\n      kv %s: weights %zu B, stream %zu B before, %zu B after 12 s", kv ? kv : "f32",
           a.weight_bytes, a.stream_bytes, b.stream_bytes);
    /* the engine's split of a chunk's time: the backend's part is within the whole */
    const sr_timeline *tl = sr_stream_timeline(st);
    CU_ASSERT(tl->n == 1 && tl->entries[0].model_ns >= 0 &&
              tl->entries[0].model_ns <= tl->entries[0].compute_ns);
    /* only the hypothesis may grow (by doubling); caches are fixed */
    CU_ASSERT(b.stream_bytes <= a.stream_bytes + 4096);
    /* audio shorter than one 80 ms step: padded to one step, decoded, no error */
    sr_stream_reset(st);
    CU_ASSERT_EQUAL(sr_stream_feed(st, x, 100), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(st), SR_OK);
    CU_ASSERT(sr_stream_timeline(st)->n == 1 && sr_stream_timeline(st)->entries[0].is_final);
    /* no audio at all */
    sr_stream_reset(st);
    CU_ASSERT_EQUAL(sr_stream_finish(st), SR_OK);
    free(x);
    sr_stream_close(st);
    sr_model_free(m);
}

static void test_stream_memory(void)
{
    stream_memory(NULL);
    stream_memory("bf16");
}

/* ---- batches of streams ---- */

/* Uniform values in [-1, 1) into table memory (host on the CPU table). */
static void fill_rand(const sr_kernels *k, float *dst, size_t n, unsigned *seed)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)(rand_r(seed) % 20001 - 10000) / 10000.0f;
    CU_ASSERT_EQUAL(k->upload(dst, h, n * sizeof(float)), SR_OK);
    free(h);
}

static int same_bits(const sr_kernels *k, const float *a, const float *b, size_t n)
{
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    int ok = k->download(x, a, n * sizeof(float)) == SR_OK &&
             k->download(y, b, n * sizeof(float)) == SR_OK && !memcmp(x, y, n * sizeof(float));
    free(x);
    free(y);
    return ok;
}

/* The caches of sequences that run alone (one pool set each, slot 0) or together (one pool set
 * of two slots: sequence A in slot 1, B in slot 0). */
typedef struct { sr_kpool *c1, *c2, *ek, *ev, *dk, *dv; } vx_pools;

static void pools_make(const sr_model *m, sr_dtype kv, int slots, int er, int dr, vx_pools *p)
{
    const vx_model *w = m->impl;
    const sr_kernels *k = m->k;
    CU_ASSERT_FATAL(!sr_kpool_create(k, SR_F32, 1, slots, 2, w->n_mels, &p->c1) &&
                    !sr_kpool_create(k, SR_F32, 1, slots, 1, w->enc_dim, &p->c2) &&
                    !sr_kpool_create(k, kv, w->enc_layers, slots, er, w->enc_heads * w->enc_hd, &p->ek) &&
                    !sr_kpool_create(k, kv, w->enc_layers, slots, er, w->enc_heads * w->enc_hd, &p->ev) &&
                    !sr_kpool_create(k, kv, w->n_layers, slots, dr, w->n_kv * w->hd, &p->dk) &&
                    !sr_kpool_create(k, kv, w->n_layers, slots, dr, w->n_kv * w->hd, &p->dv));
}

static void pools_free(const sr_model *m, vx_pools *p)
{
    sr_kpool *all[] = {p->c1, p->c2, p->ek, p->ev, p->dk, p->dv};
    for (size_t i = 0; i < SR_ARRAY_LEN(all); i++) sr_kpool_free(m->k, all[i]);
}

/* Two streams in one call of each forward function (stem, encoder, adapter, decoder with
 * logits) against each alone, over rounds that wrap every ring: A has 8 encoder rows (2 steps)
 * and 3 decoder rows per round at its own positions and delay, B 4 and 1 at others. Every
 * output row of the batch must equal the solo one bit for bit (the row-independence of the
 * ops, and the batch bookkeeping here: row offsets, slots, positions, per-row adaptive scales,
 * the last row's logits per sequence). */
static void batch_vs_solo(sr_dtype kv)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    const vx_model *w = m->impl;
    const sr_kernels *k = m->k;
    int C = w->n_mels, E = w->enc_dim, D = w->dim, V = w->vocab, NL = w->n_layers;
    int nA = 8, nB = 4, dA = 3, dB = 1;
    int er = 2 * w->enc_window, dr = w->window + dA - 1; /* as the stream sizes them */
    CU_ASSERT_FATAL(nA <= er - w->enc_window + 1);
    vx_pools solo[2], both;
    pools_make(m, kv, 1, er, dr, &solo[0]);
    pools_make(m, kv, 1, er, dr, &solo[1]);
    pools_make(m, kv, 2, er, dr, &both);
    vx_scratch s;
    CU_ASSERT_EQUAL_FATAL(vx_scratch_init(&s, k, w, 20), SR_OK);
    /* adaptive scales of two different delays; the batch's per-row table [rows][NL * D] */
    int delay[2] = {w->delay_max, w->delay_min};
    CU_ASSERT_FATAL(delay[0] != delay[1]);
    size_t ada_n = (size_t)NL * D;
    float *ada[2] = {k->alloc(ada_n * sizeof(float)), k->alloc(ada_n * sizeof(float))};
    float *ada_rows = k->alloc((size_t)(dA + dB) * ada_n * sizeof(float));
    for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(vx_ada_scales(w, &s, delay[i], ada[i]), SR_OK);
    for (int r = 0; r < dA + dB; r++)
        CU_ASSERT_EQUAL(k->copy2d(1, (int)ada_n, ada[r < dA ? 0 : 1], (int)ada_n,
                                  ada_rows + (size_t)r * ada_n, (int)ada_n), SR_OK);
    CU_ASSERT(!same_bits(k, ada[0], ada[1], ada_n));
    /* table buffers: inputs (batch layout: A's rows then B's) and outputs of each run */
    int nE = nA + nB, nD = dA + dB;
    float *mel = k->alloc((size_t)2 * nE * C * sizeof(float));
    float *xin = k->alloc((size_t)nD * D * sizeof(float));
    float *stem[3], *enc[3], *adp[3], *dx[3], *lg[3];
    for (int i = 0; i < 3; i++) {
        stem[i] = k->alloc((size_t)nE * E * sizeof(float));
        enc[i] = k->alloc((size_t)nE * E * sizeof(float));
        adp[i] = k->alloc((size_t)nE / 4 * D * sizeof(float));
        dx[i] = k->alloc((size_t)nD * D * sizeof(float));
        lg[i] = k->alloc((size_t)2 * V * sizeof(float));
    }
    unsigned seed = 11;
    int ok_stem = 1, ok_enc = 1, ok_ada = 1, ok_dec = 1, ok_lg = 1, rounds = 12;
    int64_t pe[2] = {0, 0}, pd[2] = {0, 0};
    for (int round = 0; round < rounds; round++) {
        fill_rand(k, mel, (size_t)2 * nE * C, &seed);
        fill_rand(k, xin, (size_t)nD * D, &seed);
        /* alone: sequence i's rows at its offset in the batch layout (A first) */
        for (int i = 0; i < 2; i++) {
            int n = i ? nB : nA, off = i ? nA : 0, nd = i ? dB : dA, od = i ? dA : 0;
            int row0[2] = {0, n}, slot[1] = {0}, drow0[2] = {0, nd};
            int64_t pos[1] = {pe[i]}, dpos[1] = {pd[i]};
            sr_kbatch b = {1, row0, slot, pos}, db = {1, drow0, slot, dpos};
            float *st = stem[i] + (size_t)off * E, *en = enc[i] + (size_t)off * E;
            CU_ASSERT_EQUAL(vx_stem(w, &s, solo[i].c1, solo[i].c2, &b, mel + (size_t)2 * off * C, st), SR_OK);
            CU_ASSERT_EQUAL(k->copy2d(n, E, st, E, en, E), SR_OK);
            CU_ASSERT_EQUAL(vx_encode(w, &s, solo[i].ek, solo[i].ev, &b, en), SR_OK);
            CU_ASSERT_EQUAL(vx_adapter(w, &s, en, n, adp[i] + (size_t)off / 4 * D), SR_OK);
            float *x = dx[i] + (size_t)od * D;
            CU_ASSERT_EQUAL(k->copy2d(nd, D, xin + (size_t)od * D, D, x, D), SR_OK);
            CU_ASSERT_EQUAL(vx_decode(w, &s, solo[i].dk, solo[i].dv, &db, ada[i], 0, x,
                                      lg[i] + (size_t)i * V, V), SR_OK);
        }
        /* together: A in slot 1, B in slot 0 */
        int row0[3] = {0, nA, nE}, slot[2] = {1, 0}, drow0[3] = {0, dA, nD};
        sr_kbatch b = {2, row0, slot, pe}, db = {2, drow0, slot, pd};
        CU_ASSERT_EQUAL(vx_stem(w, &s, both.c1, both.c2, &b, mel, stem[2]), SR_OK);
        CU_ASSERT_EQUAL(k->copy2d(nE, E, stem[2], E, enc[2], E), SR_OK);
        CU_ASSERT_EQUAL(vx_encode(w, &s, both.ek, both.ev, &b, enc[2]), SR_OK);
        CU_ASSERT_EQUAL(vx_adapter(w, &s, enc[2], nE, adp[2]), SR_OK);
        CU_ASSERT_EQUAL(k->copy2d(nD, D, xin, D, dx[2], D), SR_OK);
        CU_ASSERT_EQUAL(vx_decode(w, &s, both.dk, both.dv, &db, ada_rows, (int)ada_n, dx[2], lg[2], V),
                        SR_OK);
        /* A's rows come from run 0, B's from run 1 */
        for (int i = 0; i < 2; i++) {
            int off = i ? nA : 0, n = i ? nB : nA, od = i ? dA : 0, nd = i ? dB : dA;
            ok_stem &= same_bits(k, stem[i] + (size_t)off * E, stem[2] + (size_t)off * E, (size_t)n * E);
            ok_enc &= same_bits(k, enc[i] + (size_t)off * E, enc[2] + (size_t)off * E, (size_t)n * E);
            ok_ada &= same_bits(k, adp[i] + (size_t)off / 4 * D, adp[2] + (size_t)off / 4 * D,
                                (size_t)n / 4 * D);
            ok_dec &= same_bits(k, dx[i] + (size_t)od * D, dx[2] + (size_t)od * D, (size_t)nd * D);
            ok_lg &= same_bits(k, lg[i] + (size_t)i * V, lg[2] + (size_t)i * V, (size_t)V);
        }
        pe[0] += nA;
        pe[1] += nB;
        pd[0] += dA;
        pd[1] += dB;
    }
    printf("\n      %s caches, %d rounds (encoder positions %lld / %lld, ring %d; decoder %lld / "
           "%lld, ring %d): stem %s, encoder %s, adapter %s, decoder %s, logits %s",
           kv == SR_BF16 ? "bf16" : "f32", rounds, (long long)pe[0], (long long)pe[1], er,
           (long long)pd[0], (long long)pd[1], dr, ok_stem ? "equal" : "DIFFER",
           ok_enc ? "equal" : "DIFFER", ok_ada ? "equal" : "DIFFER", ok_dec ? "equal" : "DIFFER",
           ok_lg ? "equal" : "DIFFER");
    CU_ASSERT(ok_stem && ok_enc && ok_ada && ok_dec && ok_lg);
    /* a call that would overwrite keys its first row still needs, and an empty sequence */
    int row0[2] = {0, er - w->enc_window + 2}, slot[1] = {0}, e0[3] = {0, 0, 4};
    int64_t pos[2] = {100, 100};
    sr_kbatch big = {1, row0, slot, pos}, empty = {2, e0, (int[]){0, 1}, pos};
    TEST_ASSERT_ERR(vx_encode(w, &s, solo[0].ek, solo[0].ev, &big, enc[0]), SR_ERR_ARG,
                    "voxtral encoder: 18 rows from position 100 with a window of 16 overrun the cache of 32 rows");
    TEST_ASSERT_ERR(vx_stem(w, &s, both.c1, both.c2, &empty, mel, stem[0]), SR_ERR_ARG,
                    "voxtral stem: sequence 0 of the batch has no rows");
    int r21[2] = {0, 21};
    sr_kbatch toolong = {1, r21, slot, pos};
    TEST_ASSERT_ERR(vx_decode(w, &s, solo[0].dk, solo[0].dv, &toolong, ada[0], 0, dx[0], NULL, 0),
                    SR_ERR_ARG, "voxtral decoder: 21 rows in one call (scratch holds 20)");
    for (int i = 0; i < 3; i++) {
        float *all[] = {stem[i], enc[i], adp[i], dx[i], lg[i]};
        for (size_t j = 0; j < SR_ARRAY_LEN(all); j++) k->free(all[j]);
    }
    k->free(mel);
    k->free(xin);
    k->free(ada[0]);
    k->free(ada[1]);
    k->free(ada_rows);
    vx_scratch_free(&s);
    pools_free(m, &solo[0]);
    pools_free(m, &solo[1]);
    pools_free(m, &both);
    sr_model_free(m);
}

static void test_batch_f32(void) { batch_vs_solo(SR_F32); }

/* One engine of 3 streams (stream 0 short, fed whole and finished at once; 1 and 2 fed a
 * chunk a step) through the public API with stream.final_steps = fs: the step after which each
 * stream is done into done_at[], its final tokens into tok[] (malloc'ed), n_tok[]; drained: the
 * steps after which stream 0 had consumed all its audio and was not done (1 with its final
 * update whole: the step before its final chunk); others_moved: the steps of its final update
 * going on in which streams 1 and 2 both ran a chunk. With do_reset, stream 0 is reset while
 * its final update goes on and fed again whole. */
typedef struct {
    int done_at[3], n_tok[3], n_entries[3], drained, others_moved, reset_done;
    int32_t *tok[3];
} fs_run;

static void final_steps_run(sr_model *m, int fs, const float *audio, size_t na, int do_reset,
                            fs_run *r)
{
    memset(r, 0, sizeof *r);
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.final_steps = fs;
    sr_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_engine_create(m, &cfg, 3, &e), SR_OK);
    sr_stream *s[3];
    size_t len[3] = {9000, na, na - 3000};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(sr_engine_open(e, &s[i]), SR_OK);
        r->done_at[i] = -1;
    }
    /* streams 1 and 2 are fed a chunk's worth a step, stream 0 all at once and finished */
    CU_ASSERT_EQUAL(sr_stream_feed(s[0], audio, len[0]), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s[0]), SR_OK);
    size_t fed[3] = {len[0], 0, 0};
    for (int step = 0; step < 400; step++) {
        for (int i = 1; i < 3; i++) {
            size_t n = SR_MIN(len[i] - fed[i], (size_t)1280);
            if (n) CU_ASSERT_EQUAL(sr_stream_feed(s[i], audio + fed[i], n), SR_OK);
            fed[i] += n;
            if (n && fed[i] == len[i]) CU_ASSERT_EQUAL(sr_stream_finish(s[i]), SR_OK);
        }
        size_t before[3];
        for (int i = 0; i < 3; i++) before[i] = sr_stream_timeline(s[i])->n;
        int ready = sr_engine_ready(e), k = 0;
        CU_ASSERT_EQUAL_FATAL(sr_engine_step(e, &k), SR_OK);
        CU_ASSERT_EQUAL(k, ready); /* a stream whose final update goes on counts as ready */
        const sr_timeline *tl0 = sr_stream_timeline(s[0]);
        if (!sr_stream_done(s[0]) && tl0->n && tl0->entries[tl0->n - 1].audio_ms >= (int64_t)(len[0] / 16))
            r->drained++;
        if (r->drained >= 2 && !sr_stream_done(s[0])) { /* its final update goes on */
            int moved = 1;
            for (int i = 1; i < 3; i++)
                moved &= sr_stream_done(s[i]) || sr_stream_timeline(s[i])->n > before[i];
            r->others_moved += moved;
            if (do_reset && !r->reset_done) {
                sr_stream_reset(s[0]);
                CU_ASSERT_EQUAL(sr_stream_done(s[0]), 0);
                CU_ASSERT_EQUAL(sr_stream_feed(s[0], audio, len[0]), SR_OK);
                CU_ASSERT_EQUAL(sr_stream_finish(s[0]), SR_OK);
                r->reset_done = 1;
                r->drained = 0;
            }
        }
        for (int i = 0; i < 3; i++)
            if (r->done_at[i] < 0 && sr_stream_done(s[i])) r->done_at[i] = step;
        if (r->done_at[0] >= 0 && r->done_at[1] >= 0 && r->done_at[2] >= 0) break;
    }
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(r->done_at[i] >= 0);
        const sr_hypothesis *h = sr_stream_hypothesis(s[i]);
        r->n_tok[i] = h->n_tokens;
        r->tok[i] = malloc(((size_t)h->n_tokens + 1) * sizeof(int32_t));
        memcpy(r->tok[i], h->tokens, (size_t)h->n_tokens * sizeof(int32_t));
        const sr_timeline *tl = sr_stream_timeline(s[i]);
        r->n_entries[i] = (int)tl->n;
        CU_ASSERT(tl->n > 0 && tl->entries[tl->n - 1].is_final);
        CU_ASSERT_EQUAL(h->n_stable, h->n_tokens);
    }
    CU_ASSERT_EQUAL(sr_engine_ready(e), 0);
    sr_engine_free(e);
}

static int fs_same(const fs_run *a, const fs_run *b, int i)
{
    return a->n_tok[i] == b->n_tok[i] &&
           !memcmp(a->tok[i], b->tok[i], (size_t)a->n_tok[i] * sizeof(int32_t));
}

static void fs_free(fs_run *r)
{
    for (int i = 0; i < 3; i++) free(r->tok[i]);
}

/* stream.final_steps: a final update spread over steps gives the tokens and timeline of the
 * whole one; the other streams' chunks go on meanwhile (stream 0 done later, the others not);
 * a reset while it goes on starts the stream afresh; a solo stream finishes it in
 * sr_stream_finish; out-of-range values name the field. */
static void test_final_steps(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    sr_h5 *g = open_golden();
    size_t na = 0;
    float *audio = test_golden_audio(g, &na);
    sr_h5_close(g);
    CU_ASSERT_FATAL(audio && na > 20000);
    fs_run whole, spread, reset;
    final_steps_run(m, 0, audio, na, 0, &whole);
    final_steps_run(m, 1, audio, na, 0, &spread);
    final_steps_run(m, 1, audio, na, 1, &reset);
    CU_ASSERT_EQUAL(whole.drained, 1);
    CU_ASSERT(spread.drained >= 3); /* stream 0's final update took several steps */
    CU_ASSERT_EQUAL(spread.others_moved, spread.drained - 1); /* the others ran a chunk in each */
    CU_ASSERT(spread.done_at[0] > whole.done_at[0]);
    CU_ASSERT(reset.reset_done);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(fs_same(&whole, &spread, i));
        CU_ASSERT(fs_same(&whole, &reset, i));
        CU_ASSERT_EQUAL(whole.n_entries[i], spread.n_entries[i]);
        CU_ASSERT(spread.done_at[i] >= whole.done_at[i]);
    }
    printf("\n      stream 0 done after step %d with its final update whole, after %d with "
           "final_steps 1 (the others ran a chunk in each of its %d steps)", whole.done_at[0],
           spread.done_at[0], spread.done_at[0] - whole.done_at[0] + 1);
    /* solo: sr_stream_finish runs the whole final update */
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.final_steps = 1;
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &cfg, &s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s, audio, 9000), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    CU_ASSERT(sr_stream_done(s));
    const sr_hypothesis *h = sr_stream_hypothesis(s);
    CU_ASSERT(h->n_tokens == whole.n_tok[0] &&
              !memcmp(h->tokens, whole.tok[0], (size_t)h->n_tokens * sizeof(int32_t)));
    sr_stream_close(s);
    for (int v = -1; v <= SR_FINAL_STEPS_MAX + 1; v += SR_FINAL_STEPS_MAX + 2) {
        cfg.final_steps = v;
        sr_engine *e = NULL;
        TEST_ASSERT_ERR(sr_engine_create(m, &cfg, 2, &e), SR_ERR_ARG, "stream.final_steps");
        CU_ASSERT_PTR_NULL(e);
    }
    fs_free(&whole);
    fs_free(&spread);
    fs_free(&reset);
    free(audio);
    sr_model_free(m);
}
static void test_batch_bf16(void) { batch_vs_solo(SR_BF16); }

/* ---- streams of one batch context ---- */

/* One stream of the script below: its audio, the chunks fed so far, its scorer loop, and the
 * record of every step's logits and of its captures (host). */
typedef struct {
    const float *a;
    size_t n, pos;           /* audio and samples fed */
    int done;                /* the final chunk went in */
    void *st;
    sr_scorer sc;
    int t;
    int32_t prev;
    float *lg;               /* every step's logits, in order, [n_lg][vocab] */
    size_t n_lg, cap_lg;
    float *enc, *ada, *mel;  /* capture buffers of the stream */
    int n_enc, n_ada, n_mel; /* captured when the stream closed */
} vx_player;

enum { NS = 5, CAP_STEPS = 64 };

/* The script, per stream i and call c: stream i < 4 opens in slot i at call i; stream 0 closes
 * the call after its final chunk and stream 4 opens in its slot in that call; stream 2 sits out
 * every third call and stream 3 every fifth (they fall behind: finals at different calls);
 * stream 1 is reset at call 9 and then feeds another audio from its start. */
static int joins_at(int i, int close0) { return i < 4 ? i : close0; }
static int sits_out(int i, int c) { return (i == 2 && c % 3 == 0) || (i == 3 && c % 5 == 2); }

static void player_open(const sr_model *m, const sr_stream_config *cfg, void *batch, int slot,
                        vx_player *p, const float *a, size_t n)
{
    const vx_model *w = m->impl;
    sr_chunking ck;
    sr_status st = m->ops->stream_open(m, cfg, batch, slot, &p->st, &ck, &p->sc);
    if (st) printf("\n      stream_open: %s", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    p->a = a;
    p->n = n;
    p->pos = 0;
    p->done = 0;
    p->t = 0;
    p->prev = -1;
    vx_stream *s = p->st;
    if (!p->enc) {
        p->enc = malloc((size_t)CAP_STEPS * VX_ENC_PER_STEP * w->enc_dim * sizeof(float));
        p->ada = malloc((size_t)CAP_STEPS * w->dim * sizeof(float));
        p->mel = malloc((size_t)CAP_STEPS * VX_MEL_PER_STEP * w->n_mels * sizeof(float));
    }
    s->cap_enc = p->enc;
    s->cap_enc_max = CAP_STEPS * VX_ENC_PER_STEP;
    s->cap_ada = p->ada;
    s->cap_ada_max = CAP_STEPS;
    s->cap_mel = p->mel;
    s->cap_mel_max = CAP_STEPS * VX_MEL_PER_STEP;
}

/* The script's reset: the stream starts over on another audio. */
static void player_reset(const sr_model *m, vx_player *p, const float *a, size_t n)
{
    m->ops->reset(p->st);
    p->a = a;
    p->n = n;
    p->pos = 0;
    p->t = 0;
    p->prev = -1;
}

static void player_close(const sr_model *m, vx_player *p)
{
    const vx_stream *s = p->st;
    p->n_enc = s->cap_enc_n;
    p->n_ada = s->cap_ada_n;
    p->n_mel = s->cap_mel_n;
    m->ops->stream_close(p->st);
    p->st = NULL;
}

/* The next chunk as the engine cuts it: 1320 samples first, then 1280; the remainder (maybe
 * empty) with final = 1. */
static void player_chunk(vx_player *p, const float **pcm, size_t *n, int *final)
{
    size_t need = p->pos ? VX_STEP_SAMPLES : VX_STEP_SAMPLES + VX_LOOKAHEAD;
    *final = p->pos + need > p->n;
    *n = *final ? p->n - p->pos : need;
    *pcm = p->a + p->pos;
    p->pos += *n;
    p->done = *final;
}

static void player_record(vx_player *p, const float *logits)
{
    int V = p->sc.vocab, best = 0;
    if (p->n_lg == p->cap_lg) {
        p->cap_lg = p->cap_lg ? 2 * p->cap_lg : 64;
        p->lg = realloc(p->lg, p->cap_lg * (size_t)V * sizeof(float));
    }
    memcpy(p->lg + p->n_lg++ * (size_t)V, logits, (size_t)V * sizeof(float));
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    p->prev = best;
    p->t++;
}

/* Every new frame of the players in `on` (their scorer ctx in one context), stepped greedily:
 * rounds of one sync_step_batch over each player that still has a frame. *max_count: the most
 * requests in one call; *mixed: a call held a step 0 (the prompt) beside later steps. */
static void step_batched(vx_player *const *on, int count, float *buf, int *max_count, int *mixed)
{
    for (;;) {
        sr_sync_req r[NS];
        vx_player *who[NS];
        int nr = 0, t0 = 0, tn = 0;
        for (int i = 0; i < count; i++) {
            vx_player *p = on[i];
            if (p->t >= p->sc.sync_frames(p->sc.ctx)) continue;
            r[nr] = (sr_sync_req){.ctx = p->sc.ctx, .t = p->t, .prev = p->prev,
                                  .logits = buf + (size_t)nr * p->sc.vocab};
            t0 |= p->t == 0;
            tn |= p->t > 0;
            who[nr++] = p;
        }
        if (!nr) return;
        sr_status st = on[0]->sc.sync_step_batch(r, nr);
        if (st) printf("\n      sync_step_batch: %s", sr_last_error());
        CU_ASSERT_EQUAL_FATAL(st, SR_OK);
        for (int i = 0; i < nr; i++) player_record(who[i], r[i].logits);
        *max_count = SR_MAX(*max_count, nr);
        *mixed |= t0 && tn;
    }
}

static int same_floats(const float *a, const float *b, size_t n)
{
    return n == 0 || !memcmp(a, b, n * sizeof(float));
}

/* Five streams over four slots of one context, run by the script above with process_batch and
 * sync_step_batch over whichever streams take part in a call, against each stream run by the
 * same script alone in a context of one slot through process and sync_step: every step's
 * logits, the mel frames, encoder rows and audio embeddings equal bit for bit. */
static void batch_streams(const char *kv, const char *model)
{
    sr_model *m = test_load_path(model);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const vx_model *w = m->impl;
    const sr_kernels *k = m->k;
    sr_h5 *g = open_golden();
    size_t ng = 0;
    float *gold = test_golden_audio(g, &ng);
    sr_h5_close(g);
    CU_ASSERT_FATAL(gold && ng > 20000);
    /* the audios: golden pieces, a quieter golden copy with noise, and two synthetic signals */
    size_t n_syn = 24000;
    float *syn = malloc(n_syn * sizeof(float)), *quiet = malloc(ng * sizeof(float));
    unsigned seed = 3;
    for (size_t i = 0; i < n_syn; i++)
        syn[i] = 0.2f * sinf((float)i * 0.031f) * sinf((float)i * 0.0007f) +
                 0.02f * (float)(rand_r(&seed) % 200 - 100) / 100.0f;
    for (size_t i = 0; i < ng; i++)
        quiet[i] = 0.5f * gold[i] + 0.005f * (float)(rand_r(&seed) % 200 - 100) / 100.0f;
    const float *audio[NS] = {gold + 4000, syn, gold, quiet, syn + 3000};
    size_t len[NS] = {15000, n_syn, ng, ng - 6000, 17321};
    const float *after_reset = gold; /* stream 1 from call 9 */
    size_t after_reset_n = ng - 2000;

    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.cache_dtype = kv;
    void *batch = NULL;
    CU_ASSERT_EQUAL_FATAL(m->ops->batch_open(m, &cfg, 4, &batch), SR_OK);
    /* a context of several slots holds the shared prefix: its streams start past it, those of
     * the one-slot contexts below compute it */
    CU_ASSERT_EQUAL(((const vx_batch *)batch)->pre, w->n_left - 1);
    size_t bytes0 = m->ops->batch_bytes(batch);
    vx_player bp[NS], sp[NS];
    memset(bp, 0, sizeof bp);
    memset(sp, 0, sizeof sp);
    float *buf = malloc((size_t)NS * w->vocab * sizeof(float));
    int close0 = -1, max_proc = 0, max_step = 0, mixed = 0, diff_rows = 0, calls = 0;
    /* ---- together ---- */
    for (int c = 0; c < 200; c++) {
        int all_done = 1;
        /* stream 0 closes the call after its final chunk; stream 4 takes its slot */
        if (close0 < 0 && bp[0].st && bp[0].done) {
            player_close(m, &bp[0]);
            close0 = c;
        }
        void *states[NS];
        const float *pcm[NS];
        size_t n[NS];
        int final[NS], count = 0;
        vx_player *on[NS];
        int64_t rows_before[NS];
        for (int i = 0; i < NS; i++) {
            vx_player *p = &bp[i];
            int join = joins_at(i, close0);
            if (join < 0 || c < join || (p->done && !p->st) || (c > join && !p->st)) {
                all_done &= join >= 0 && c > join;
                continue;
            }
            if (c == join) player_open(m, &cfg, batch, i == 4 ? 0 : i, p, audio[i], len[i]);
            if (p->done) continue; /* finished, waiting to be closed (stream 0) or done */
            all_done = 0;
            if (sits_out(i, c)) continue;
            if (i == 1 && c == 9) player_reset(m, p, after_reset, after_reset_n);
            states[count] = p->st;
            player_chunk(p, &pcm[count], &n[count], &final[count]);
            rows_before[count] = ((vx_stream *)p->st)->n_emb;
            on[count++] = p;
        }
        if (all_done) break;
        if (!count) continue;
        sr_status st = m->ops->process_batch(batch, states, pcm, n, final, count);
        if (st) printf("\n      process_batch: %s", sr_last_error());
        CU_ASSERT_EQUAL_FATAL(st, SR_OK);
        calls++;
        max_proc = SR_MAX(max_proc, count);
        /* streams of one call that produced different numbers of audio embeddings */
        for (int i = 1; i < count; i++)
            diff_rows |= ((vx_stream *)states[i])->n_emb - rows_before[i] !=
                         ((vx_stream *)states[0])->n_emb - rows_before[0];
        step_batched(on, count, buf, &max_step, &mixed);
    }
    CU_ASSERT(close0 > 0);
    CU_ASSERT_EQUAL(m->ops->batch_bytes(batch), bytes0); /* the slot was reused in place */
    for (int i = 1; i < NS; i++)
        if (bp[i].st) player_close(m, &bp[i]);
    m->ops->batch_close(batch);

    /* ---- each alone, same script ---- */
    for (int i = 0; i < NS; i++) {
        vx_player *p = &sp[i];
        void *solo = NULL;
        CU_ASSERT_EQUAL_FATAL(m->ops->batch_open(m, &cfg, 1, &solo), SR_OK);
        int join = joins_at(i, close0);
        player_open(m, &cfg, solo, 0, p, audio[i], len[i]);
        for (int c = join; !p->done; c++) {
            if (sits_out(i, c)) continue;
            if (i == 1 && c == 9) player_reset(m, p, after_reset, after_reset_n);
            const float *pcm;
            size_t n;
            int final;
            player_chunk(p, &pcm, &n, &final);
            sr_status st = m->ops->process(p->st, pcm, n, final);
            if (st) printf("\n      process: %s", sr_last_error());
            CU_ASSERT_EQUAL_FATAL(st, SR_OK);
            for (int nf = p->sc.sync_frames(p->sc.ctx); p->t < nf;) {
                CU_ASSERT_EQUAL_FATAL(p->sc.sync_step(p->sc.ctx, p->t, p->prev, buf), SR_OK);
                player_record(p, buf);
            }
        }
        player_close(m, p);
        m->ops->batch_close(solo);
    }

    int ok = 1;
    for (int i = 0; i < NS; i++) {
        const vx_player *a = &bp[i], *b = &sp[i];
        int same = a->n_lg == b->n_lg && a->n_lg > 0 &&
                   same_floats(a->lg, b->lg, a->n_lg * (size_t)w->vocab) &&
                   a->n_enc == b->n_enc && a->n_enc > 0 &&
                   same_floats(a->enc, b->enc, (size_t)a->n_enc * w->enc_dim) &&
                   a->n_ada == b->n_ada && a->n_ada > 0 &&
                   same_floats(a->ada, b->ada, (size_t)a->n_ada * w->dim) &&
                   a->n_mel == b->n_mel && a->n_mel > 0 &&
                   same_floats(a->mel, b->mel, (size_t)a->n_mel * w->n_mels);
        printf("\n      stream %d: %zu steps (alone %zu), %d encoder rows, %d embeddings: %s", i,
               a->n_lg, b->n_lg, a->n_enc, a->n_ada, same ? "equal" : "DIFFER");
        ok &= same;
    }
    /* the streams computed different things (no shared or crossed rows could pass as equal) */
    size_t nmin = SR_MIN(bp[0].n_lg, bp[2].n_lg);
    CU_ASSERT(nmin > 0 && memcmp(bp[0].lg, bp[2].lg, nmin * w->vocab * sizeof(float)) != 0);
    printf("\n      %s caches: %d calls, up to %d streams per process_batch (row counts %s), up "
           "to %d per sync_step_batch (prompt beside later steps: %s)", kv ? kv : "f32", calls,
           max_proc, diff_rows ? "differing" : "SAME", max_step, mixed ? "yes" : "NO");
    CU_ASSERT(ok);
    CU_ASSERT(max_proc >= 3 && max_step >= 3 && mixed && diff_rows);
    for (int i = 0; i < NS; i++) {
        vx_player *ps[] = {&bp[i], &sp[i]};
        for (int j = 0; j < 2; j++) {
            free(ps[j]->lg);
            free(ps[j]->enc);
            free(ps[j]->ada);
            free(ps[j]->mel);
        }
    }
    (void)k;
    free(buf);
    free(syn);
    free(quiet);
    free(gold);
    sr_model_free(m);
}

static void test_streams_f32(void) { batch_streams(NULL, test_fixture("voxtral/model.h5")); }
static void test_streams_bf16(void) { batch_streams("bf16", test_fixture("voxtral/model.h5")); }

/* The same with 6 steps of left padding (model.h5's config edited): a shared prefix of 5 steps
 * (20 encoder rows of the 32-row ring, 5 decoder positions) instead of 1, with both windows
 * still wrapping. */
static void test_streams_left6(void)
{
    sr_h5 *f = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(test_fixture("voxtral/model.h5"), &f), SR_OK);
    const char *c0 = sr_h5_root_attr(f, "config");
    char *cfg = c0 ? strdup(c0) : NULL;
    sr_h5_close(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    char *at = strstr(cfg, "\"n_left_pad_tokens\":2,");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    at[strlen("\"n_left_pad_tokens\":")] = '6';
    const char *path = test_model_copy("voxtral/model.h5", "voxtral_left6.h5", NULL, cfg);
    free(cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    batch_streams(NULL, path);
    batch_streams("bf16", path);
}

/* Batch contexts and slots: the config checked as a stream's, slots in range and free, the
 * streams of one call distinct and of one context. */
static void test_batch_errors(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    const sr_model_ops *ops = m->ops;
    sr_stream_config cfg;
    void *batch = (void *)1;
    struct { int delay, chunk, first; const char *strategy, *kv, *needle; } bad[] = {
        {31, 0, 0, NULL, NULL, "stream.delay_tokens: 31 outside"},
        {0, 100, 0, NULL, NULL, "stream.chunk_ms: 100"},
        {0, 0, 160, NULL, NULL, "stream.first_chunk_ms: 160"},
        {0, 0, 0, "offline", NULL, "stream.strategy: \"offline\""},
        {0, 0, 0, NULL, "f16", "stream.cache_dtype: \"f16\" unknown"},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(bad); i++) {
        sr_stream_config_init(&cfg);
        cfg.delay_tokens = bad[i].delay;
        cfg.chunk_ms = bad[i].chunk;
        cfg.first_chunk_ms = bad[i].first;
        cfg.strategy = bad[i].strategy;
        cfg.cache_dtype = bad[i].kv;
        TEST_ASSERT_ERR(ops->batch_open(m, &cfg, 2, &batch), SR_ERR_ARG, bad[i].needle);
        CU_ASSERT_PTR_NULL(batch);
    }
    sr_stream_config_init(&cfg);
    TEST_ASSERT_ERR(ops->batch_open(m, &cfg, 0, &batch), SR_ERR_ARG, "max_streams 0");
    CU_ASSERT_EQUAL_FATAL(ops->batch_open(m, &cfg, 3, &batch), SR_OK);
    void *a = NULL, *b = NULL, *other = NULL;
    sr_chunking ck;
    sr_scorer sa, sb, sc;
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, NULL, 0, &a, &ck, &sa), SR_ERR_ARG,
                    "voxtral: stream_open needs a batch context");
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, batch, 3, &a, &ck, &sa), SR_ERR_ARG,
                    "slot 3 outside the batch context's 3");
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, batch, -1, &a, &ck, &sa), SR_ERR_ARG,
                    "slot -1 outside");
    CU_ASSERT_EQUAL_FATAL(ops->stream_open(m, &cfg, batch, 1, &a, &ck, &sa), SR_OK);
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, batch, 1, &b, &ck, &sb), SR_ERR_ARG,
                    "slot 1 of the batch context holds an open stream");
    /* a stream's config: checked as always, and it must be the context's */
    cfg.delay_tokens = 31;
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, batch, 0, &b, &ck, &sb), SR_ERR_ARG,
                    "stream.delay_tokens: 31 outside");
    cfg.delay_tokens = 6;
    CU_ASSERT_FATAL(6 != ((vx_batch *)batch)->delay);
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, batch, 0, &b, &ck, &sb), SR_ERR_ARG,
                    "stream.delay_tokens: 6, the batch context's streams use");
    sr_stream_config_init(&cfg);
    cfg.cache_dtype = "bf16";
    TEST_ASSERT_ERR(ops->stream_open(m, &cfg, batch, 0, &b, &ck, &sb), SR_ERR_ARG,
                    "stream.cache_dtype: bf16, the batch context's caches are f32");
    sr_stream_config_init(&cfg);
    CU_ASSERT_EQUAL_FATAL(ops->stream_open(m, &cfg, batch, 0, &b, &ck, &sb), SR_OK);
    /* closing frees the slot for another stream */
    ops->stream_close(a);
    CU_ASSERT_EQUAL_FATAL(ops->stream_open(m, &cfg, batch, 1, &a, &ck, &sa), SR_OK);
    void *solo = NULL;
    CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &solo, &other, &ck, &sc), SR_OK);
    /* one call: distinct streams of this context */
    float z[VX_STEP_SAMPLES * 6] = {0};
    const float *pcm[2] = {z, z};
    size_t n[2] = {SR_ARRAY_LEN(z), SR_ARRAY_LEN(z)};
    int fin[2] = {0, 0};
    void *dup[2] = {a, a}, *mix[2] = {a, other}, *ab[2] = {a, b};
    TEST_ASSERT_ERR(ops->process_batch(batch, dup, pcm, n, fin, 2), SR_ERR_ARG,
                    "streams 0 and 1 are the same");
    TEST_ASSERT_ERR(ops->process_batch(batch, mix, pcm, n, fin, 2), SR_ERR_ARG,
                    "stream 1 is in another batch context");
    CU_ASSERT_EQUAL(ops->process_batch(batch, ab, pcm, n, fin, 2), SR_OK);
    CU_ASSERT_EQUAL(ops->process(other, z, SR_ARRAY_LEN(z), 0), SR_OK);
    CU_ASSERT(sa.sync_frames(a) > 0 && sb.sync_frames(b) > 0);
    float *lg = malloc(2 * (size_t)sa.vocab * sizeof(float));
    sr_sync_req r[2] = {{.ctx = a, .t = 0, .prev = -1, .logits = lg},
                        {.ctx = a, .t = 0, .prev = -1, .logits = lg + sa.vocab}};
    TEST_ASSERT_ERR(sa.sync_step_batch(r, 2), SR_ERR_ARG, "requests 0 and 1 are the same stream");
    r[1].ctx = other;
    TEST_ASSERT_ERR(sa.sync_step_batch(r, 2), SR_ERR_ARG, "request 1's stream is in another");
    r[1].ctx = b;
    r[1].t = 1;
    TEST_ASSERT_ERR(sa.sync_step_batch(r, 2), SR_ERR_ARG, "step 1 requested");
    r[1].t = 0;
    CU_ASSERT_EQUAL(sa.sync_step_batch(r, 2), SR_OK);
    /* the same audio and steps in two slots: the same logits */
    CU_ASSERT(!memcmp(lg, lg + sa.vocab, (size_t)sa.vocab * sizeof(float)));
    /* one request for logits, one for the argmax only (sync_token): the id is the row's
     * first maximum; neither asked for is refused */
    CU_ASSERT_FATAL(sa.sync_frames(a) > 1 && sb.sync_frames(b) > 1);
    int32_t tk = -5;
    r[0] = (sr_sync_req){.ctx = a, .t = 1, .prev = 11, .logits = lg};
    r[1] = (sr_sync_req){.ctx = b, .t = 1, .prev = 11, .token = &tk};
    CU_ASSERT_EQUAL(sa.sync_step_batch(r, 2), SR_OK);
    int best = 0;
    for (int v = 1; v < sa.vocab; v++)
        if (lg[v] > lg[best]) best = v;
    CU_ASSERT_EQUAL(tk, best);
    r[0] = (sr_sync_req){.ctx = a, .t = 2, .prev = best};
    TEST_ASSERT_ERR(sa.sync_step_batch(r, 1), SR_ERR_ARG, "request 0: logits (and token) is NULL");
    free(lg);
    ops->stream_close(a);
    ops->stream_close(b);
    ops->batch_close(batch);
    close_solo(m, solo, other);
    sr_model_free(m);
}

/* ---- bad input ---- */

static void test_bad_config(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    sr_stream *st = NULL;
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.delay_tokens = 31;
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &st), SR_ERR_ARG, "delay_tokens");
    cfg.delay_tokens = -2;
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &st), SR_ERR_ARG, "delay_tokens");
    sr_stream_config_init(&cfg);
    cfg.chunk_ms = 100;
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &st), SR_ERR_ARG, "chunk_ms");
    sr_stream_config_init(&cfg);
    cfg.strategy = "offline";
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &st), SR_ERR_ARG, "strategy");
    sr_stream_config_init(&cfg);
    cfg.decoder = "aed_greedy";
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &st), SR_ERR_ARG, "aed_greedy");
    sr_stream_config_init(&cfg);
    cfg.cache_dtype = "f16";
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &st), SR_ERR_ARG, "stream.cache_dtype: \"f16\" unknown for voxtral_realtime");
    /* experiment configs reject it when parsed, naming the choices */
    sr_config *c = NULL;
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"x\", \"model\": {\"path\": \"m.h5\"}, "
                                    "\"data\": {\"path\": \"d\"}, \"stream\": {\"cache_dtype\": "
                                    "\"int8\"}}", "kv.json", &c),
                    SR_ERR_ARG, "stream.cache_dtype: \"int8\" is not one of f32, f16, bf16");
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NULL(st);
    /* a different delay is accepted and changes the prompt length */
    sr_stream_config_init(&cfg);
    cfg.delay_tokens = 6;
    void *state = NULL, *batch = NULL;
    sr_chunking ck;
    sr_scorer sc;
    CU_ASSERT_EQUAL_FATAL(open_solo(m, &cfg, &batch, &state, &ck, &sc), SR_OK);
    CU_ASSERT_EQUAL(((vx_stream *)state)->b->prompt_len, 1 + 2 + 6);
    /* scorer misuse: a step that does not exist yet, out-of-order steps, bad previous token */
    float *logits = malloc((size_t)sc.vocab * sizeof(float));
    TEST_ASSERT_ERR(sc.sync_step(sc.ctx, 0, -1, logits), SR_ERR_ARG, "sync_step");
    float z[VX_STEP_SAMPLES * 12] = {0};
    CU_ASSERT_EQUAL(m->ops->process(state, z, sizeof z / sizeof z[0], 0), SR_OK);
    CU_ASSERT(sc.sync_frames(sc.ctx) > 1);
    TEST_ASSERT_ERR(sc.sync_step(sc.ctx, 1, -1, logits), SR_ERR_ARG, "step 1");
    TEST_ASSERT_ERR(sc.sync_step(sc.ctx, 0, sc.vocab, logits), SR_ERR_ARG, "prev token");
    CU_ASSERT_EQUAL(sc.sync_step(sc.ctx, 0, -1, logits), SR_OK);
    free(logits);
    close_solo(m, batch, state);
    sr_model_free(m);
}

static void test_bad_files(void)
{
    struct { const char *file; const char *needle; } cases[] = {
        {"voxtral/bad_missing.h5", "model.language_model.norm.weight"},
        {"voxtral/bad_tokenizer.h5", "/tokenizer"},
        {"voxtral/bad_delay.h5", "config.delay_tokens"},
        {"voxtral/bad_shape.h5", "model.audio_tower.embedder.conv1.weight"},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(cases); i++) {
        sr_model *m = NULL;
        TEST_ASSERT_ERR(sr_model_load(test_fixture(cases[i].file), NULL, &m), SR_ERR_FORMAT,
                        cases[i].needle);
        CU_ASSERT_PTR_NULL(m);
    }
    sr_model *m = test_load_model("voxtral/micro.h5");
    CU_ASSERT_STRING_EQUAL(sr_model_arch(m), "voxtral_realtime");
    sr_model_free(m);
}

/* ---- converter ---- */

/* Run scripts/convert_voxtral.py with `args`; stdout+stderr into out. Returns the exit status
 * (-1 if it did not exit normally). */
static int run_converter(const char *args, char *out, size_t cap)
{
    return test_run(out, cap, "/usr/bin/python3 scripts/convert_voxtral.py -q %s", args);
}

/* Two table weights hold the same matrix: shape, element type and every row read back through
 * the table's gather (exact widening to f32), whatever the table's layout. */
static int same_mat(const sr_kernels *k, const sr_kweight *a, const sr_kweight *b)
{
    if (a->n != b->n || a->k != b->k || a->dtype != b->dtype) return 0;
    size_t el = (size_t)a->n * a->k;
    int32_t *ids = malloc((size_t)a->n * sizeof(int32_t));
    float *x = malloc(el * sizeof(float)), *y = malloc(el * sizeof(float));
    for (int i = 0; i < a->n; i++) ids[i] = i;
    int ok = ids && x && y && k->gather(a, ids, a->n, x, a->k) == SR_OK &&
             k->gather(b, ids, b->n, y, b->k) == SR_OK && !memcmp(x, y, el * sizeof(float));
    free(ids);
    free(x);
    free(y);
    return ok;
}

static int same_lin(const sr_kernels *k, vx_lin a, vx_lin b, int n_bias)
{
    if (!same_mat(k, a.w, b.w) || !a.b != !b.b) return 0;
    return !a.b || !memcmp(a.b, b.b, (size_t)n_bias * sizeof(float));
}

/* Weights of the converted model equal model.h5's bit for bit: the RoPE-permuted rows (q, k,
 * encoder q bias) first of all, then every other matrix and vector the backend uses. */
static int same_weights(const sr_kernels *k, const vx_model *a, const vx_model *b)
{
    if (a->enc_layers != b->enc_layers || a->n_layers != b->n_layers || a->enc_dim != b->enc_dim ||
        a->dim != b->dim || a->vocab != b->vocab || a->n_mels != b->n_mels || a->ffn != b->ffn ||
        a->enc_ffn != b->enc_ffn)
        return 0;
    int ok = 1, E = a->enc_dim, D = a->dim, qe = a->enc_heads * a->enc_hd;
    size_t f = sizeof(float);
    for (int l = 0; l < a->enc_layers; l++) {
        const vx_layer *x = &a->enc[l], *y = &b->enc[l];
        ok &= same_lin(k, x->qkv, y->qkv, 3 * qe) && same_lin(k, x->o, y->o, E) &&
              same_lin(k, x->gu, y->gu, 0) && same_lin(k, x->down, y->down, E);
        ok &= !memcmp(x->attn_norm, y->attn_norm, E * f) && !memcmp(x->ffn_norm, y->ffn_norm, E * f);
    }
    for (int l = 0; l < a->n_layers; l++) {
        const vx_layer *x = &a->dec[l], *y = &b->dec[l];
        ok &= same_lin(k, x->qkv, y->qkv, 0) && same_lin(k, x->o, y->o, 0) &&
              same_lin(k, x->gu, y->gu, 0) &&
              same_lin(k, x->down, y->down, 0) && same_lin(k, x->ada1, y->ada1, 0) &&
              same_lin(k, x->ada2, y->ada2, 0);
        ok &= !memcmp(x->attn_norm, y->attn_norm, D * f) && !memcmp(x->ffn_norm, y->ffn_norm, D * f);
    }
    ok &= same_lin(k, a->proj1, b->proj1, 0) && same_lin(k, a->proj2, b->proj2, 0) &&
          same_mat(k, a->embed, b->embed);
    ok &= same_lin(k, a->conv1, b->conv1, E) && same_lin(k, a->conv2, b->conv2, E) &&
          !memcmp(a->enc_norm, b->enc_norm, E * f) && !memcmp(a->dec_norm, b->dec_norm, D * f);
    return ok;
}

static void convert_layout(const char *layout)
{
    if (!test_python_ok()) {
        TEST_SKIP("/usr/bin/python3 lacks numpy/h5py (make setup installs them)");
        return;
    }
    char name[64], args[1024], out[4096];
    snprintf(name, sizeof name, "voxtral_%s.h5", layout);
    const char *dst = test_tmppath(name);
    /* the golden run used 2 right-pad tokens and 8 flush steps (the defaults are 11 + delay, 32) */
    snprintf(args, sizeof args, "%s/ckpt_%s %s --right-pad-tokens 2 --flush-tokens 8",
             test_fixture("voxtral"), layout, dst);
    int rc = run_converter(args, out, sizeof out);
    if (rc) printf("\n      convert_voxtral.py %s: exit %d: %s", layout, rc, out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    sr_model *m = NULL, *ref = test_load_model("voxtral/model.h5");
    sr_status st = sr_model_load(dst, NULL, &m);
    if (st) printf("\n      load %s: %s", dst, sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    CU_ASSERT_STRING_EQUAL(sr_model_arch(m), "voxtral_realtime");
    const vx_model *w = m->impl, *r = ref->impl;
    int same = same_weights(m->k, w, r);
    CU_ASSERT(same);
    CU_ASSERT(w->enc_window == r->enc_window && w->window == r->window && w->n_left == r->n_left &&
              w->n_right == r->n_right && w->delay_def == r->delay_def && w->bos == r->bos &&
              w->eos == r->eos && w->pad == r->pad && w->flush_tokens == r->flush_tokens &&
              w->log_mel_max == r->log_mel_max && w->theta == r->theta && w->enc_theta == r->enc_theta);
    /* end to end: the golden tokens */
    size_t n = 0;
    float *audio = NULL;
    int nt = 0;
    int32_t *want = golden_small(&audio, &n, &nt);
    CU_ASSERT_FATAL(audio && want);
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    feed_split(s, audio, n, 1280, 1);
    int ok = same_tokens(sr_stream_hypothesis(s), want, nt);
    printf("\n      %s layout: weights equal model.h5: %s, %d golden tokens equal: %s", layout,
           same ? "yes" : "NO", nt, ok ? "yes" : "NO");
    CU_ASSERT(ok);
    sr_stream_close(s);
    free(audio);
    free(want);
    sr_model_free(m);
    sr_model_free(ref);
}

static void test_convert_mistral(void) { convert_layout("mistral"); }
static void test_convert_hf(void) { convert_layout("hf"); }

static void test_convert_bad(void)
{
    if (!test_python_ok()) {
        TEST_SKIP("/usr/bin/python3 lacks numpy/h5py (make setup installs them)");
        return;
    }
    struct { const char *src; const char *needles[3]; } cases[] = {
        {"ckpt_bad_missing", {"consolidated.safetensors", "norm.weight", "missing"}},
        {"ckpt_bad_vocab", {"tekken.json", "359 tokens", "vocab size is 360"}},
        {"", {"voxtral", "neither params.json", "config.json"}}, /* not a checkpoint folder */
    };
    const char *dst = test_tmppath("voxtral_bad.h5");
    for (size_t i = 0; i < SR_ARRAY_LEN(cases); i++) {
        char args[1024], out[4096];
        snprintf(args, sizeof args, "%s/%s %s", test_fixture("voxtral"), cases[i].src, dst);
        int rc = run_converter(args, out, sizeof out);
        int named = 1;
        for (int k = 0; k < 3; k++) named &= strstr(out, cases[i].needles[k]) != NULL;
        if (rc != 1 || !named) printf("\n      %s: exit %d, output: %s", cases[i].src, rc, out);
        CU_ASSERT_EQUAL(rc, 1);
        CU_ASSERT(named);
        CU_ASSERT(access(dst, F_OK) != 0); /* no partial output */
    }
}

void test_register_voxtral(void)
{
    TEST_SUITE("voxtral_parity", {"small_windows_wrap", test_parity_small},
               {"full_windows", test_parity_full},
               {"small_windows_wrap_kv_bf16", test_parity_small_bf16},
               {"full_windows_kv_bf16", test_parity_full_bf16},
               {"small_windows_wrap_precision_bf16", test_parity_small_prec_bf16},
               {"full_windows_precision_bf16", test_parity_full_prec_bf16},
               {"int8_as_stored", test_int8_as_stored},
               {"int8_bf16_products", test_int8_bf16_products});
    TEST_SUITE("voxtral_stream", {"feed_splits", test_stream_splits}, {"sync_token", test_sync_token},
               {"memory_short_audio", test_stream_memory}, {"kv_bf16_bytes", test_stream_kv_bytes},
               {"max_seconds", test_max_seconds}, {"final_steps", test_final_steps},
               {"batch_equals_solo", test_batch_f32}, {"batch_equals_solo_kv_bf16", test_batch_bf16});
    TEST_SUITE("voxtral_batch", {"streams_equal_alone", test_streams_f32},
               {"streams_equal_alone_kv_bf16", test_streams_bf16},
               {"streams_equal_alone_prefix_5", test_streams_left6}, {"contexts_slots", test_batch_errors});
    TEST_SUITE("voxtral_bad", {"stream_config", test_bad_config}, {"files", test_bad_files});
    TEST_SUITE("voxtral_convert", {"mistral_layout", test_convert_mistral},
               {"hf_layout", test_convert_hf}, {"bad_checkpoints", test_convert_bad});
}
