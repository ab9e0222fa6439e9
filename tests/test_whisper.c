/*
 * test_whisper.c — the Whisper backend (models/whisper/):
 *   whisper_load     loading rand.h5; malformed files and stream configs name their culprit
 *   whisper_parity   random-init model vs openai-whisper goldens (mel, encoder, logits, greedy
 *                    tokens); the AED scorer's caches against full recomputation; real tiny.en
 *                    vs openai-whisper on the same weights (skipped when the model is absent)
 *   whisper_causal   WhisperRT: streaming conv stem == whole-signal stem; block-causal encoder
 *                    one pass vs openai's modules with the eq. 37 mask; chunk-by-chunk with
 *                    K/V caches == one pass; the stream's cross K/V == one pass; context reset
 *   whisper_stream   strategies end to end through the scorer, reset reuse, short and silent
 *                    audio, feed-split invariance through the engine (when an AED decoder exists)
 *   whisper_silence  the no-speech probability vs openai-whisper (real tiny.en: jfk, digital
 *                    silence, two noise levels); silence, noise and sub-chunk audio give an empty
 *                    hypothesis for every strategy x decoder while speech is unchanged by the
 *                    gate; whisperrt past 30 s (context reset, text continues); bad model files,
 *                    chunk sizes and scorer arguments
 *   whisper_batch    batch contexts: streams joining, leaving (slot reuse), resetting and
 *                    finishing at different calls, stepped by process_batch over changing
 *                    subsets, scored by aed_logprobs_batch: every row bit-identical to the same
 *                    stream alone in a batch of one (rand.h5 in every strategy, real tiny.en);
 *                    bad batch configs, slots and requests
 *   whisper_defaults config.streaming: vanilla files default to offline + aed_greedy (final
 *                    text) / reencode + local_agreement (live), causal ones to whisperrt +
 *                    stable_greedy at the trained chunk; malformed blocks name their field; the
 *                    converter's block; real tiny.en: jfk by default, the repetition guard on
 *                    whisperrt's loop (on, off, engine == solo)
 *   whisper_train    scripts/train_whisperrt.py: the adapter merge (values, copies, refusals);
 *                    with torch ($SRKIT_TORCH_PYTHON), a few training steps on a random model
 *                    lower the loss and the merged result streams in srkit
 * Goldens: scripts/gen_golden_whisper.py and scripts/gen_golden_whisper_nospeech.py
 * (openai-whisper 20250625).
 */
#include "test.h"

#include "../decoders/aed_common.h"
#include "../models/whisper/whisper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */


typedef struct {
    const sr_model *m;
    void *batch; /* a batch context of one stream */
    void *st;
    sr_chunking ck;
    sr_scorer sc;
} bstream;

/* A stream alone in its own batch context (max_streams = 1), as core/stream.c opens one. */
static sr_status bopen_cfg(const sr_model *m, const sr_stream_config *c, bstream *b)
{
    memset(b, 0, sizeof *b);
    b->m = m;
    sr_status st = sr_whisper_ops.batch_open(m, c, 1, &b->batch);
    if (st) return st;
    st = sr_whisper_ops.stream_open(m, c, b->batch, 0, &b->st, &b->ck, &b->sc);
    if (st) {
        sr_whisper_ops.batch_close(b->batch);
        b->batch = NULL;
    }
    return st;
}

static sr_status bopen(const sr_model *m, const char *strategy, int chunk_ms, int first_ms,
                       bstream *b)
{
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = strategy;
    c.chunk_ms = chunk_ms;
    c.first_chunk_ms = first_ms;
    return bopen_cfg(m, &c, b);
}

static void bclose(bstream *b)
{
    sr_whisper_ops.stream_close(b->st);
    sr_whisper_ops.batch_close(b->batch);
    b->st = b->batch = NULL;
}

/* Feed audio in the backend's chunks, as core/stream.c does, then finish. */
static sr_status bfeed_all(bstream *b, const float *a, size_t n)
{
    size_t pos = 0, need = b->ck.first_chunk;
    while (n - pos >= need) {
        sr_status st = sr_whisper_ops.process(b->st, a + pos, need, 0);
        if (st) return st;
        pos += need;
        need = b->ck.chunk;
    }
    return sr_whisper_ops.process(b->st, a + pos, n - pos, 1);
}

/* Greedy decoding through the scorer (slot 0, one new position per call) until EOT. */
static int greedy(const sr_scorer *sc, int32_t *toks, int cap)
{
    float *lp = malloc((size_t)sc->vocab * sizeof(float));
    int n = 0;
    while (n < cap) {
        sr_status st = sc->aed_logprobs(sc->ctx, 0, toks, n, n, lp);
        if (st) {
            printf("\n      aed_logprobs: %s\n", sr_last_error());
            CU_FAIL("aed_logprobs");
            break;
        }
        int best = 0;
        for (int v = 1; v < sc->vocab; v++)
            if (lp[v] > lp[best]) best = v;
        if (best == sc->eot) break;
        toks[n++] = best;
    }
    free(lp);
    return n;
}

/* Max |a - b| over log-probability rows: equal infinities (suppressed tokens) count as 0, one
 * infinite and one finite as infinity. */
static double lp_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = isinf(a[i]) || isinf(b[i]) ? (a[i] == b[i] ? 0 : INFINITY) : fabs(a[i] - b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

static int tokens_equal(const int32_t *a, int na, const sr_tensor *g, const char *what)
{
    int ng = (int)g->shape[0];
    const int64_t *gv = g->data;
    int ok = na == ng;
    for (int i = 0; ok && i < na; i++) ok = a[i] == gv[i];
    if (!ok) {
        printf("\n      %s: %d tokens, golden %d; first difference at ", what, na, ng);
        int i = 0;
        while (i < na && i < ng && a[i] == gv[i]) i++;
        printf("%d\n", i);
    }
    return ok;
}

/* ---- whisper_load ---- */

static void test_load_rand(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    const wh_model *w = m->impl;
    CU_ASSERT_STRING_EQUAL(sr_model_arch(m), "whisper");
    CU_ASSERT_EQUAL(w->d, 32);
    CU_ASSERT_EQUAL(w->n_vocab, 259);
    CU_ASSERT_EQUAL(w->prompt_len, 2);
    CU_ASSERT_EQUAL(w->prompt[0], w->sot);
    CU_ASSERT_EQUAL(w->prompt[1], w->no_timestamps);
    CU_ASSERT_EQUAL(w->brk, w->timestamp_begin + 150);
    CU_ASSERT_EQUAL(w->window_samples, 48000);
    CU_ASSERT_EQUAL(w->text_cap, 32);
    CU_ASSERT(w->suppress[1] && w->suppress[w->sot] && w->suppress[w->brk] && !w->suppress[w->eot]);
    CU_ASSERT(w->suppress_begin[5] && w->suppress_begin[w->eot] && !w->suppress[5]);
    sr_model_free(m);
}

/* rand_mixed.h5 is rand.h5 with its attention key matrices stored f32 (their f16 values, exactly)
 * and the rest f16 (scripts/recast_model.py rand.h5 rand_mixed.h5 --dtype f16 --keep-f32
 * attn.key.weight): the stacked q | k | v and cross k | v blocks differ in element type, so the
 * loader widens them to f32 (sr_model_weight_cat); exact products of the same values, so the
 * encoder output and the greedy tokens are rand.h5's bit for bit. */
static void test_load_mixed(void)
{
    sr_model *a = test_load_model("whisper/rand.h5"), *b = test_load_model("whisper/rand_mixed.h5");
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(audio);
    const wh_model *wa = a->impl, *wb = b->impl;
    CU_ASSERT_EQUAL(wa->enc[0].qkv.w->dtype, SR_F16);
    CU_ASSERT_EQUAL(wb->enc[0].qkv.w->dtype, SR_F32);
    CU_ASSERT_EQUAL(wb->dec[0].ckv.w->dtype, SR_F32);
    CU_ASSERT_EQUAL(wb->dec[0].cq.w->dtype, SR_F16);
    bstream x, y;
    CU_ASSERT_EQUAL_FATAL(bopen(a, "offline", 0, 0, &x), SR_OK);
    CU_ASSERT_EQUAL_FATAL(bopen(b, "offline", 0, 0, &y), SR_OK);
    CU_ASSERT_EQUAL(bfeed_all(&x, audio, n), SR_OK);
    CU_ASSERT_EQUAL(bfeed_all(&y, audio, n), SR_OK);
    size_t ne = (size_t)150 * 32;
    float *ea = malloc(ne * sizeof(float)), *eb = malloc(ne * sizeof(float));
    CU_ASSERT_EQUAL(wa->k->download(ea, ((wh_stream *)x.st)->b->x, ne * sizeof(float)), SR_OK);
    CU_ASSERT_EQUAL(wb->k->download(eb, ((wh_stream *)y.st)->b->x, ne * sizeof(float)), SR_OK);
    CU_ASSERT(!memcmp(ea, eb, ne * sizeof(float)));
    int32_t ta[64], tb[64];
    int na = greedy(&x.sc, ta, 64), nb = greedy(&y.sc, tb, 64);
    CU_ASSERT(na > 0 && na == nb && !memcmp(ta, tb, (size_t)na * sizeof(int32_t)));
    free(ea);
    free(eb);
    bclose(&x);
    bclose(&y);
    free(audio);
    sr_h5_close(g);
    sr_model_free(a);
    sr_model_free(b);
}

static void test_load_bad(void)
{
    static const struct { const char *file, *needle; } cases[] = {
        {"whisper/micro_missing.h5", "decoder.blocks.0.cross_attn.key.weight"},
        {"whisper/micro_shape.h5", "encoder.conv1.weight"},
        {"whisper/micro_embed.h5", "decoder.token_embedding.weight"},
        {"whisper/micro_tokenizer.h5", "/tokenizer has 78 pieces, config.n_vocab is 79"},
        {"whisper/micro_window.h5", "config.chunk_length_s"},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(cases); i++) {
        sr_model *m = NULL;
        TEST_ASSERT_ERR(sr_model_load(test_fixture(cases[i].file), NULL, &m), SR_ERR_FORMAT,
                        cases[i].needle);
        CU_ASSERT_PTR_NULL(m);
    }
    sr_model *m = test_load_model("whisper/micro.h5");
    sr_model_free(m);
}

static void test_stream_config_bad(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    bstream b;
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 30, 0, &b), SR_ERR_ARG, "stream.chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 1020, 0, &b), SR_ERR_ARG, "stream.chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "reencode", 50, 0, &b), SR_ERR_ARG, "stream.chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 100, 3020, &b), SR_ERR_ARG, "stream.first_chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "bogus", 0, 0, &b), SR_ERR_ARG, "stream.strategy");
    TEST_ASSERT_ERR(bopen(m, "bogus", 0, 0, &b), SR_ERR_ARG, "whisperrt");
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.beam = 99;
    void *st = NULL;
    sr_chunking ck;
    sr_scorer sc;
    TEST_ASSERT_ERR(sr_whisper_ops.batch_open(m, &c, 1, &st), SR_ERR_ARG, "stream.beam");
    CU_ASSERT_PTR_NULL(st);
    TEST_ASSERT_ERR(bopen_cfg(m, &c, &b), SR_ERR_ARG, "stream.beam");
    sr_stream_config_init(&c);
    TEST_ASSERT_ERR(sr_whisper_ops.stream_open(m, &c, NULL, 0, &st, &ck, &sc), SR_ERR_ARG,
                    "needs a batch context");
    /* offline ignores chunk sizes; whisperrt's first chunk carries the stem's lookahead */
    CU_ASSERT_EQUAL(bopen(m, "offline", 30, 0, &b), SR_OK);
    CU_ASSERT_EQUAL(b.ck.chunk, 48000);
    bclose(&b);
    /* no strategy: rand.h5 has vanilla weights, whose live default is reencode (no lookahead) */
    CU_ASSERT_EQUAL(bopen(m, NULL, 100, 0, &b), SR_OK);
    CU_ASSERT_EQUAL(b.ck.first_chunk, 3200);
    bclose(&b);
    CU_ASSERT_EQUAL(bopen(m, "whisperrt", 100, 0, &b), SR_OK);
    CU_ASSERT_EQUAL(b.ck.first_chunk, 3200 + WH_LOOKAHEAD);
    CU_ASSERT_EQUAL(b.ck.chunk, 1600);
    CU_ASSERT_EQUAL(b.sc.kind, SR_SCORER_AED);
    CU_ASSERT(sr_whisper_ops.state_bytes(b.st) > 0);
    /* scorer argument checks */
    float out[259];
    int32_t p[1] = {0};
    TEST_ASSERT_ERR(b.sc.aed_logprobs(b.st, 99, p, 1, 0, out), SR_ERR_ARG, "slot 99");
    TEST_ASSERT_ERR(b.sc.aed_logprobs(b.st, 0, p, 1, 2, out), SR_ERR_ARG, "from 2");
    p[0] = 9999;
    TEST_ASSERT_ERR(b.sc.aed_logprobs(b.st, 0, p, 1, 0, out), SR_ERR_ARG, "prefix[0] = 9999");
    bclose(&b);
    sr_model_free(m);
}

/* ---- whisper_parity: random-init model ---- */

/* prec: options precision (NULL: f32, the parity mode; "bf16": the fast mode, tensors within
 * test_bf16_tol of the goldens, tokens exact). */
static void parity_rand(const char *prec)
{
    sr_model *m = test_load_prec(test_fixture("whisper/rand.h5"), prec);
    const wh_model *w = m->impl;
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    sr_tensor gmel, grows, genc, glog, gtok;
    if (!audio || !test_golden(g, "/offline/mel", SR_F32, &gmel) ||
        !test_golden(g, "/offline/mel_rows", SR_I64, &grows) ||
        !test_golden(g, "/offline/encoder", SR_F32, &genc) ||
        !test_golden(g, "/offline/logits", SR_F32, &glog) || !test_golden(g, "/offline/tokens", SR_I64, &gtok))
        goto done;

    /* log-mel of the window (audio zero-padded to 3 s) */
    float *pad = calloc((size_t)w->window_samples, sizeof(float));
    memcpy(pad, audio, n * sizeof(float));
    float *mel = NULL;
    int L = 0;
    CU_ASSERT_EQUAL_FATAL(sr_mel_compute(w->mel, pad, (size_t)w->window_samples, &mel, &L), SR_OK);
    CU_ASSERT_EQUAL(L, 300);
    double dm = 0;
    for (int r = 0; r < grows.shape[0]; r++) {
        int64_t t = ((int64_t *)grows.data)[r];
        double e = test_max_abs_diff(mel + t * 80, (float *)gmel.data + r * 80, 80);
        dm = e > dm ? e : dm;
    }
    printf("\n      rand: mel max abs diff %.2e", dm);
    CU_ASSERT(dm <= 1e-4);
    free(mel);

    /* offline stream: encoder output through the cross K/V, logits, greedy tokens */
    bstream b;
    CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
    CU_ASSERT_EQUAL_FATAL(bfeed_all(&b, audio, n), SR_OK);
    wh_stream *s = b.st;
    CU_ASSERT_EQUAL(s->n_win, 1);
    /* the stream leaves ln_post(encoder) in its batch's x (table memory) */
    double de = test_max_abs_diff_table(w->k, s->b->x, genc.data, (size_t)150 * 32);
    double tol_e = prec ? test_bf16_tol(genc.data, (size_t)150 * 32) : 2e-5;
    printf(", encoder %.2e (tol %.1e)", de, tol_e);
    CU_ASSERT(de <= tol_e);

    int32_t toks[64];
    int nt = greedy(&b.sc, toks, 64);
    CU_ASSERT(tokens_equal(toks, nt, &gtok, "rand greedy"));
    printf(", %d greedy tokens", nt);

    /* raw logits of the first steps along the golden path */
    int steps = (int)glog.shape[0];
    int32_t in[16];
    memcpy(in, w->prompt, 2 * sizeof(int32_t));
    for (int i = 0; i < steps - 1; i++) in[2 + i] = (int32_t)((int64_t *)gtok.data)[i];
    wh_scratch sc;
    CU_ASSERT_EQUAL_FATAL(wh_scratch_init(&sc, w, 64, 150), SR_OK);
    wh_dseq dq = {.tok = in, .c0 = 0, .n = 1 + steps, .sslot = 1, .xslot = 0, .enc_len = 150};
    CU_ASSERT_EQUAL(wh_decode(w, &sc, &dq, 1, s->b->sk, s->b->sv, s->b->xk, s->b->xv), SR_OK);
    /* wh_logits reads and writes table memory (sc.h is; the logits must be) */
    float *lg = test_table_alloc(w->k, (size_t)steps * 259);
    CU_ASSERT_EQUAL(wh_logits(w, sc.h + 32, steps, lg), SR_OK);
    double dl = test_max_abs_diff_table(w->k, lg, glog.data, (size_t)steps * 259);
    double tol_l = prec ? test_bf16_tol(glog.data, (size_t)steps * 259) : 1e-3;
    printf(", logits (%d steps) %.2e (tol %.1e)", steps, dl, tol_l);
    CU_ASSERT(dl <= tol_l);
    w->k->free(lg);
    wh_scratch_free(&sc);
    s->slot[1].win = -1;
    bclose(&b);
    free(pad);
done:
    sr_tensor_free(&gmel);
    sr_tensor_free(&grows);
    sr_tensor_free(&genc);
    sr_tensor_free(&glog);
    sr_tensor_free(&gtok);
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_parity_rand(void) { parity_rand(NULL); }
static void test_parity_rand_bf16(void) { parity_rand("bf16"); }

/* The scorer's slot caches give the same numbers as recomputing every position, on any slot,
 * interleaved, and with a diverging prefix. */
static void test_scorer_cache(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    bstream b;
    CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
    CU_ASSERT_EQUAL_FATAL(bfeed_all(&b, audio, n), SR_OK);
    int V = b.sc.vocab;
    int32_t toks[64];
    int nt = greedy(&b.sc, toks, 64);
    CU_ASSERT_FATAL(nt >= 8);
    float *full = malloc((size_t)(nt + 1) * V * sizeof(float));
    float *inc = malloc((size_t)3 * V * sizeof(float));
    CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 1, toks, nt, 0, full), SR_OK);
    double d = 0;
    for (int j = 0; j <= nt; j++) { /* incremental on slot 0 (cached from greedy) and slot 1 */
        CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, j % 2, toks, j, j, inc), SR_OK);
        double e = lp_diff(inc, full + (size_t)j * V, (size_t)V);
        d = e > d || e != e ? e : d;
    }
    /* diverging prefix on slot 0, then back */
    int32_t alt[64];
    memcpy(alt, toks, (size_t)nt * sizeof(int32_t));
    alt[3] = (toks[3] + 1) % 100;
    CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, alt, 6, 4, inc), SR_OK);
    CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, toks, 6, 6, inc), SR_OK);
    double e = lp_diff(inc, full + (size_t)6 * V, (size_t)V);
    d = e > d || e != e ? e : d;
    printf("\n      cached vs full recomputation: max abs diff %.2e", d);
    CU_ASSERT(d <= 1e-5);
    /* log-softmax rows: probabilities sum to 1; begin suppression at position 0 */
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp(full[v]);
    CU_ASSERT(fabs(sum - 1) < 1e-4);
    CU_ASSERT(isinf(full[5]) && full[5] < 0 && isinf(full[b.sc.eot]));
    CU_ASSERT(!isinf(full[(size_t)V + b.sc.eot]));
    free(full);
    free(inc);
    bclose(&b);
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

/* ---- whisper_parity: real tiny.en ---- */

static void parity_tiny_en(const char *prec)
{
    const char *path = test_tiny_en_path();
    const char *gpath = test_fixture("whisper/tiny_en_golden.h5");
    const char *jfk = test_shared("speech-samples/jfk.wav");
    if (!path || !jfk) {
        TEST_SKIP("~/.cache/srkit/models/whisper-tiny.en.h5 or ../shared/data absent (make models)");
        return;
    }
    sr_model *m = test_load_prec(path, prec);
    const wh_model *w = m->impl;
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(gpath, &g), SR_OK);
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(jfk, 16000, &a), SR_OK);
    sr_tensor rows, enc, idx, lg, lse, tok;
    if (!test_golden(g, "/jfk/encoder_rows", SR_I64, &rows) || !test_golden(g, "/jfk/encoder", SR_F32, &enc) ||
        !test_golden(g, "/jfk/logit_index", SR_I64, &idx) || !test_golden(g, "/jfk/logits", SR_F32, &lg) ||
        !test_golden(g, "/jfk/logsumexp", SR_F32, &lse) || !test_golden(g, "/jfk/tokens", SR_I64, &tok))
        goto done;
    bstream b;
    CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
    CU_ASSERT_EQUAL_FATAL(bfeed_all(&b, a.samples, a.n), SR_OK);
    wh_stream *s = b.st;
    /* the encoder output (its batch's x) is table memory: one host copy of the rows up to the
     * last one compared */
    int64_t tmax = 0;
    for (int r = 0; r < rows.shape[0]; r++) tmax = SR_MAX(tmax, ((int64_t *)rows.data)[r]);
    if (tmax >= s->b->es.rows) CU_FAIL_FATAL("golden encoder row past the batch's x [es.rows, d]");
    float *x = test_table_copy(w->k, s->b->x, (size_t)(tmax + 1) * w->d);
    double de = 0;
    for (int r = 0; r < rows.shape[0]; r++) {
        int64_t t = ((int64_t *)rows.data)[r];
        double e = test_max_abs_diff(x + t * w->d, (float *)enc.data + (size_t)r * w->d,
                                     (size_t)w->d);
        de = e > de ? e : de;
    }
    free(x);
    int32_t toks[512];
    int nt = greedy(&b.sc, toks, 448);
    CU_ASSERT(tokens_equal(toks, nt, &tok, "jfk"));
    /* raw logits of the first steps (subset) and their logsumexp over the whole vocabulary */
    int steps = (int)lg.shape[0], ni = (int)idx.shape[0];
    int32_t in[8];
    memcpy(in, w->prompt, 2 * sizeof(int32_t));
    for (int i = 0; i < steps - 1; i++) in[2 + i] = toks[i];
    wh_scratch sc;
    CU_ASSERT_EQUAL_FATAL(wh_scratch_init(&sc, w, 16, 1500), SR_OK);
    wh_dseq dq = {.tok = in, .c0 = 0, .n = 1 + steps, .sslot = 1, .xslot = 0, .enc_len = 1500};
    CU_ASSERT_EQUAL(wh_decode(w, &sc, &dq, 1, s->b->sk, s->b->sv, s->b->xk, s->b->xv), SR_OK);
    /* wh_logits works in table memory; the rows are then examined on the host */
    float *tL = test_table_alloc(w->k, (size_t)steps * w->n_vocab);
    CU_ASSERT_EQUAL(wh_logits(w, sc.h + w->d, steps, tL), SR_OK);
    float *L = test_table_copy(w->k, tL, (size_t)steps * w->n_vocab);
    w->k->free(tL);
    double dl = 0, dz = 0;
    for (int st = 0; st < steps; st++) {
        const float *row = L + (size_t)st * w->n_vocab;
        for (int i = 0; i < ni; i++) {
            double e = fabs(row[((int64_t *)idx.data)[i]] - ((float *)lg.data)[(size_t)st * ni + i]);
            dl = e > dl ? e : dl;
        }
        double mx = -1e30, sum = 0;
        for (int v = 0; v < w->n_vocab; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < w->n_vocab; v++) sum += exp(row[v] - mx);
        double e = fabs(mx + log(sum) - ((float *)lse.data)[st]);
        dz = e > dz ? e : dz;
    }
    double te = prec ? test_bf16_tol(enc.data, (size_t)sr_tensor_numel(&enc)) : 1e-4;
    double tl = prec ? test_bf16_tol(lg.data, (size_t)sr_tensor_numel(&lg)) : 1e-3;
    double tz = prec ? test_bf16_tol(lse.data, (size_t)sr_tensor_numel(&lse)) : 1e-3;
    printf("\n      tiny.en jfk: encoder rows max abs diff %.2e (tol %.1e), logits %.2e (tol %.1e), "
           "logsumexp %.2e (tol %.1e), %d tokens", de, te, dl, tl, dz, tz, nt);
    CU_ASSERT(de <= te);
    CU_ASSERT(dl <= tl);
    CU_ASSERT(dz <= tz);
    free(L);
    wh_scratch_free(&sc);
    s->slot[1].win = -1;
    bclose(&b);
done:
    sr_tensor_free(&rows);
    sr_tensor_free(&enc);
    sr_tensor_free(&idx);
    sr_tensor_free(&lg);
    sr_tensor_free(&lse);
    sr_tensor_free(&tok);
    sr_audio_free(&a);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_parity_tiny_en(void) { parity_tiny_en(NULL); }
static void test_parity_tiny_en_bf16(void) { parity_tiny_en("bf16"); }

static const char *const libri[] = {
    "103-1240-0000.flac", "1089-134686-0000.flac", "1089-134686-0001.flac",
    "1089-134686-0002.wav", "1089-134691-0000.flac", "1089-134691-0001.flac",
    "1221-135766-0001.wav", "1221-135766-0002.wav", "1995-1837-0001.wav", "61-70968-0000.flac",
};

/* Precision "bf16" may pick another token than the reference only where the reference itself
 * all but ties: at the first difference (index i of golden g, the bf16 run chose `got`), the
 * f32 model (m32, which matches openai-whisper's logits within 1e-3) scores the golden prefix and
 * the two candidates' log-probabilities must lie within BF16_TIE of each other: twice the largest
 * logit error bf16 makes on jfk (0.18, tiny_en_jfk_bf16 prints it), as an error of that size on
 * each of the two logits can swap them. Returns 1 when the difference is such a tie; prints the
 * gap either way (measured: 0.024 on 1995-1837-0001, the one input where the tokens differ). */
#define BF16_TIE 0.36
static int bf16_near_tie(const sr_model *m32, const float *audio, size_t n, const sr_tensor *g,
                         const int32_t *got, int ngot, const char *what)
{
    const int64_t *gv = g->data;
    int ng = (int)g->shape[0], i = 0;
    while (i < ngot && i < ng && got[i] == gv[i]) i++;
    if (i >= ngot || i >= ng) return 0; /* one is a prefix of the other: EOT moved, not a tie */
    bstream b;
    if (bopen(m32, "offline", 0, 0, &b) || bfeed_all(&b, audio, n)) {
        CU_FAIL("f32 stream for the tie check");
        return 0;
    }
    int32_t *pre = malloc((size_t)(i + 1) * sizeof *pre);
    float *lp = malloc((size_t)b.sc.vocab * sizeof *lp);
    for (int j = 0; j < i; j++) pre[j] = (int32_t)gv[j];
    sr_status st = b.sc.aed_logprobs(b.sc.ctx, 0, pre, i, i, lp);
    double gap = st ? INFINITY : (double)lp[gv[i]] - lp[got[i]];
    printf("\n      %s under bf16: token %d is %d, golden %d; f32 log-prob gap %.3f (tie if <= %.2f)",
           what, i, got[i], (int)gv[i], gap, BF16_TIE);
    free(pre);
    free(lp);
    bclose(&b);
    return gap <= BF16_TIE;
}

/* prec: NULL (f32: every input's tokens == openai-whisper's) or "bf16" (the same, except at a
 * reference near-tie: bf16_near_tie). */
static void tokens_tiny_en(const char *prec)
{
    const char *path = test_tiny_en_path();
    if (!path || !test_shared("librispeech-sample/transcripts.txt")) {
        TEST_SKIP("~/.cache/srkit/models/whisper-tiny.en.h5 or ../shared/data absent (make models)");
        return;
    }
    sr_model *m = test_load_prec(path, prec);
    sr_model *m32 = prec ? test_load_path(path) : NULL;
    int ties = 0;
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/tiny_en_golden.h5"), &g), SR_OK);
    int32_t toks[1024];
    int agree = 0, total = 0;
    float *concat = NULL;
    size_t cn = 0;
    /* 40 s: jfk then the utterances in order (the generator's long40) */
    const char *jfk = test_shared("speech-samples/jfk.wav");
    sr_audio a;
    if (jfk && sr_audio_load(jfk, 16000, &a) == SR_OK) {
        concat = malloc(a.n * sizeof(float));
        memcpy(concat, a.samples, a.n * sizeof(float));
        cn = a.n;
        sr_audio_free(&a);
    }
    for (size_t i = 0; i < SR_ARRAY_LEN(libri); i++) {
        char rel[128], gp[128];
        snprintf(rel, sizeof rel, "librispeech-sample/%s", libri[i]);
        snprintf(gp, sizeof gp, "/tokens/%s", libri[i]);
        const char *p = test_shared(rel);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 16000, &a), SR_OK);
        float *c2 = realloc(concat, (cn + a.n) * sizeof(float));
        if (c2) {
            memcpy(c2 + cn, a.samples, a.n * sizeof(float));
            concat = c2;
            cn += a.n;
        }
        bstream b;
        sr_tensor gt;
        CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
        CU_ASSERT_EQUAL(bfeed_all(&b, a.samples, a.n), SR_OK);
        int nt = greedy(&b.sc, toks, 448);
        if (test_golden(g, gp, SR_I64, &gt)) {
            total++;
            int ok = tokens_equal(toks, nt, &gt, libri[i]);
            agree += ok;
            if (!ok && m32 && bf16_near_tie(m32, a.samples, a.n, &gt, toks, nt, libri[i])) {
                ties++;
                ok = 1;
            }
            CU_ASSERT(ok);
            sr_tensor_free(&gt);
        }
        bclose(&b);
        sr_audio_free(&a);
    }
    /* silence: whatever openai-whisper's decode gives for 5 s of zeros (tiny.en: " you") */
    float *zero = calloc(5 * 16000, sizeof(float));
    bstream b;
    sr_tensor gt;
    CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
    CU_ASSERT_EQUAL(bfeed_all(&b, zero, 5 * 16000), SR_OK);
    int nt = greedy(&b.sc, toks, 448);
    if (test_golden(g, "/silence_5s", SR_I64, &gt)) {
        total++;
        agree += tokens_equal(toks, nt, &gt, "silence");
        CU_ASSERT(tokens_equal(toks, nt, &gt, "silence"));
        sr_tensor_free(&gt);
    }
    bclose(&b);
    free(zero);
    /* 40 s offline: two windows, window 0's text, the break, window 1's text */
    if (concat && cn >= 40 * 16000) {
        sr_tensor g0, g1;
        CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
        CU_ASSERT_EQUAL(bfeed_all(&b, concat, 40 * 16000), SR_OK);
        CU_ASSERT_EQUAL(((wh_stream *)b.st)->n_win, 2);
        nt = greedy(&b.sc, toks, 1024);
        if (test_golden(g, "/long40/window0", SR_I64, &g0) && test_golden(g, "/long40/window1", SR_I64, &g1)) {
            int n0 = (int)g0.shape[0];
            int brk = ((const wh_model *)m->impl)->brk;
            CU_ASSERT(nt > n0 && toks[n0] == brk);
            int ok = nt > n0 && tokens_equal(toks, n0, &g0, "long40 window 0") &&
                     tokens_equal(toks + n0 + 1, nt - n0 - 1, &g1, "long40 window 1");
            CU_ASSERT(ok);
            total++;
            agree += ok;
        }
        sr_tensor_free(&g0);
        sr_tensor_free(&g1);
        bclose(&b);
    }
    printf("\n      tiny.en greedy tokens (precision %s) identical to openai-whisper on %d of %d inputs",
           prec ? prec : "f32", agree, total);
    if (prec) printf(", %d reference near-tie(s)", ties);
    free(concat);
    sr_h5_close(g);
    sr_model_free(m);
    sr_model_free(m32);
}

static void test_tokens_tiny_en(void) { tokens_tiny_en(NULL); }
static void test_tokens_tiny_en_bf16(void) { tokens_tiny_en("bf16"); }

/* ---- whisper_causal ---- */

/* Block of encoder frame i: [0, tau0) is block 0, then tau frames each (eq. 37). */
static int block_of(int i, int tau, int tau0) { return i < tau0 ? 0 : 1 + (i - tau0) / tau; }

/* One pass over all frames with the block-causal mask. x [T, d] out. */
static sr_status one_pass(const wh_model *w, const float *mel, int L, int tau, int tau0, float *x)
{
    int T = (L + 1) / 2;
    wh_scratch s;
    sr_status st = wh_scratch_init(&s, w, T, w->n_audio_ctx);
    if (st) return st;
    sr_kpool *kc = NULL, *vc = NULL;
    if ((st = sr_kpool_create(w->k, SR_F32, w->n_audio_layer, 1, w->n_audio_ctx, w->d, &kc)) ||
        (st = sr_kpool_create(w->k, SR_F32, w->n_audio_layer, 1, w->n_audio_ctx, w->d, &vc))) {
        sr_kpool_free(w->k, kc);
        wh_scratch_free(&s);
        return st;
    }
    int *klim = malloc((size_t)T * sizeof(int));
    for (int i = 0; i < T; i++) {
        int b = block_of(i, tau, tau0), end = i;
        while (end < T && block_of(end, tau, tau0) == b) end++;
        klim[i] = end;
    }
    st = wh_stem(w, &s, mel, L, x);
    for (int i = 0; !st && i < T * w->d; i++) x[i] += w->enc_pos[i];
    wh_eseq q = {.n = T, .p0 = 0, .slot = 0};
    if (!st) st = wh_encode(w, &s, x, &q, 1, kc, vc, klim);
    sr_kpool_free(w->k, kc);
    sr_kpool_free(w->k, vc);
    free(klim);
    wh_scratch_free(&s);
    return st;
}

/* Chunk by chunk: mel slices of 2 tau0 then 2 tau frames through the streaming stem, each
 * block through the cached encoder. x [T, d] out. */
static sr_status chunked(const wh_model *w, const float *mel, int L, int tau, int tau0, float *x)
{
    int rows = tau > tau0 ? tau : tau0;
    wh_scratch s;
    wh_stem_ctx sc;
    wh_stem_stream stem = {0}, *stp = &stem;
    sr_status st = wh_scratch_init(&s, w, rows + 2, w->n_audio_ctx);
    if (st) return st;
    if ((st = wh_stem_ctx_init(&sc, w, 1, 2 * rows + 4))) { wh_scratch_free(&s); return st; }
    sr_kpool *kc = NULL, *vc = NULL;
    if ((st = sr_kpool_create(w->k, SR_F32, w->n_audio_layer, 1, w->n_audio_ctx, w->d, &kc)) ||
        (st = sr_kpool_create(w->k, SR_F32, w->n_audio_layer, 1, w->n_audio_ctx, w->d, &vc))) {
        sr_kpool_free(w->k, kc);
        wh_stem_ctx_free(&sc, w);
        wh_scratch_free(&s);
        return st;
    }
    float *pend = malloc((size_t)(3 * rows + 8) * w->d * sizeof(float));
    int pn = 0, done = 0, pos = 0, nb = 0;
    while (!st && pos <= L) {
        int take = pos == 0 ? 2 * tau0 : 2 * tau;
        if (take > L - pos) take = L - pos;
        int final = pos + take == L, nx = 0;
        const float *mp = mel + (size_t)pos * w->n_mels;
        st = wh_stem_feed(w, &s, &sc, &stp, &mp, &take, &final, 1, pend + (size_t)pn * w->d, &nx);
        pn += nx;
        pos += take;
        while (!st && pn > 0) {
            int need = nb == 0 ? tau0 : tau;
            if (pn < need && !final) break;
            int bsz = pn < need ? pn : need;
            float *xb = x + (size_t)done * w->d;
            memcpy(xb, pend, (size_t)bsz * w->d * sizeof(float));
            for (int i = 0; i < bsz * w->d; i++) xb[i] += w->enc_pos[(size_t)done * w->d + i];
            wh_eseq q = {.n = bsz, .p0 = done, .slot = 0};
            st = wh_encode(w, &s, xb, &q, 1, kc, vc, NULL);
            done += bsz;
            nb++;
            pn -= bsz;
            memmove(pend, pend + (size_t)bsz * w->d, (size_t)pn * w->d * sizeof(float));
        }
        if (final) break;
    }
    sr_kpool_free(w->k, kc);
    sr_kpool_free(w->k, vc);
    free(pend);
    wh_stem_ctx_free(&sc, w);
    wh_scratch_free(&s);
    return st;
}

static void test_stem_stream(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    const wh_model *w = m->impl;
    sr_h5 *g = NULL;
    sr_tensor gm;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    CU_ASSERT_FATAL(test_golden(g, "/causal/mel", SR_F32, &gm));
    int L = (int)gm.shape[0], T = (L + 1) / 2;
    double dmax = 0;
    for (int odd = 0; odd < 2; odd++) { /* even and odd mel lengths */
        int LL = L - odd, TT = (LL + 1) / 2;
        wh_scratch s;
        CU_ASSERT_EQUAL_FATAL(wh_scratch_init(&s, w, T + 4, 8), SR_OK);
        float *ref = malloc((size_t)T * w->d * sizeof(float));
        CU_ASSERT_EQUAL(wh_stem(w, &s, gm.data, LL, ref), SR_OK);
        /* five streams fed together, each in slices of its own size: one feed call per round
         * for all that still have frames */
        static const int splits[] = {1, 2, 3, 7, 64};
        enum { NS = 5 };
        wh_stem_ctx sc;
        CU_ASSERT_EQUAL_FATAL(wh_stem_ctx_init(&sc, w, NS, 64), SR_OK);
        wh_stem_stream st[NS];
        wh_stem_stream *sp[NS];
        const float *mp[NS];
        int take[NS], fin[NS], nx[NS], pos[NS] = {0}, got_n[NS] = {0}, ix[NS];
        float *gotb[NS], *xo = malloc((size_t)NS * (T + 4) * w->d * sizeof(float));
        for (int k = 0; k < NS; k++) {
            st[k] = (wh_stem_stream){.slot = NS - 1 - k}; /* slots in another order */
            gotb[k] = malloc((size_t)(T + 4) * w->d * sizeof(float));
        }
        for (int round = 0;; round++) {
            int c = 0;
            for (int k = 0; k < NS; k++) {
                if (pos[k] >= LL) continue;
                take[c] = SR_MIN(splits[k], LL - pos[k]);
                fin[c] = pos[k] + take[c] == LL;
                mp[c] = (const float *)gm.data + (size_t)pos[k] * 80;
                sp[c] = &st[k];
                ix[c++] = k;
            }
            if (!c) break;
            CU_ASSERT_EQUAL_FATAL(wh_stem_feed(w, &s, &sc, sp, mp, take, fin, c, xo, nx), SR_OK);
            size_t o = 0;
            for (int q = 0; q < c; q++) {
                int k = ix[q];
                memcpy(gotb[k] + (size_t)got_n[k] * w->d, xo + o * w->d, (size_t)nx[q] * w->d * sizeof(float));
                o += (size_t)nx[q];
                got_n[k] += nx[q];
                pos[k] += take[q];
            }
        }
        for (int k = 0; k < NS; k++) {
            CU_ASSERT_EQUAL(got_n[k], TT);
            /* equal up to the GEMM's summation order over a different number of rows */
            double d = test_max_abs_diff(gotb[k], ref, (size_t)TT * w->d);
            dmax = d > dmax ? d : dmax;
            CU_ASSERT(d <= 1e-6);
            free(gotb[k]);
        }
        free(xo);
        wh_stem_ctx_free(&sc, w);
        free(ref);
        wh_scratch_free(&s);
    }
    printf("\n      streaming stem vs whole-signal stem (5 streams fed together, feeds of 1..64 "
           "frames): %.2e", dmax);
    sr_tensor_free(&gm);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_causal_equivalence(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    const wh_model *w = m->impl;
    sr_h5 *g = NULL;
    sr_tensor gm, ge;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    CU_ASSERT_FATAL(test_golden(g, "/causal/mel", SR_F32, &gm) && test_golden(g, "/causal/encoder", SR_F32, &ge));
    int L = (int)gm.shape[0], T = (L + 1) / 2;
    float *a = malloc((size_t)T * w->d * sizeof(float));
    float *b = malloc((size_t)T * w->d * sizeof(float));
    /* the golden: openai's encoder modules with the eq. 37 mask, tau 5, tau0 10 */
    CU_ASSERT_EQUAL(one_pass(w, gm.data, L, 5, 10, a), SR_OK);
    double dg = test_max_abs_diff(a, ge.data, (size_t)T * w->d);
    printf("\n      block-causal one pass vs openai (tau 100 ms): %.2e", dg);
    CU_ASSERT(dg <= 1e-4);
    static const int taus_ms[] = {40, 100, 300};
    for (size_t k = 0; k < SR_ARRAY_LEN(taus_ms); k++) {
        int tau = taus_ms[k] / 20, tau0 = 2 * tau;
        CU_ASSERT_EQUAL(one_pass(w, gm.data, L, tau, tau0, a), SR_OK);
        CU_ASSERT_EQUAL(chunked(w, gm.data, L, tau, tau0, b), SR_OK);
        double d = test_max_abs_diff(a, b, (size_t)T * w->d);
        printf("; chunked vs one pass tau %d ms: %.2e", taus_ms[k], d);
        CU_ASSERT(d <= 1e-4);
    }
    /* the mask matters: a non-causal pass differs from the block-causal one */
    CU_ASSERT_EQUAL(one_pass(w, gm.data, L, T, T, b), SR_OK);
    CU_ASSERT_EQUAL(one_pass(w, gm.data, L, 2, 4, a), SR_OK);
    CU_ASSERT(test_max_abs_diff(a, b, (size_t)T * w->d) > 1e-3);
    free(a);
    free(b);
    sr_tensor_free(&gm);
    sr_tensor_free(&ge);
    sr_h5_close(g);
    sr_model_free(m);
}

/* The whisperrt stream fed audio chunk by chunk holds the cross-attention K/V of the one-pass
 * block-causal encoder over the streamed mel. */
static void test_stream_cross_kv(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    const wh_model *w = m->impl;
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    static const int taus_ms[] = {40, 100, 300};
    for (size_t k = 0; k < SR_ARRAY_LEN(taus_ms); k++) {
        int tau = taus_ms[k] / 20;
        /* the mel every chunking of the stream sees (streaming mel is split-invariant) */
        sr_mel_stream *ms = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_mel_stream_open(w->mel, &ms), SR_OK);
        int cap = sr_mel_stream_pending(ms, n) + 8, a = 0, c = 0;
        float *mel = malloc((size_t)cap * 80 * sizeof(float));
        CU_ASSERT_EQUAL(sr_mel_stream_feed(ms, audio, n, mel, cap, &a), SR_OK);
        CU_ASSERT_EQUAL(sr_mel_stream_finish(ms, mel + (size_t)a * 80, cap - a, &c), SR_OK);
        sr_mel_stream_close(ms);
        int L = a + c, T = (L + 1) / 2;
        float *x = malloc((size_t)T * w->d * sizeof(float));
        CU_ASSERT_EQUAL(one_pass(w, mel, L, tau, 2 * tau, x), SR_OK);
        sr_kpool *xk = NULL, *xv = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(w->k, SR_F32, w->n_text_layer, 1, w->n_audio_ctx, w->d, &xk), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(w->k, SR_F32, w->n_text_layer, 1, w->n_audio_ctx, w->d, &xv), SR_OK);
        wh_scratch xs;
        CU_ASSERT_EQUAL_FATAL(wh_scratch_init(&xs, w, T, 8), SR_OK);
        wh_eseq q = {.n = T, .p0 = 0, .slot = 0};
        int xslot = 0;
        CU_ASSERT_EQUAL(wh_cross_kv(w, &xs, x, &q, &xslot, 1, xk, xv), SR_OK);
        wh_scratch_free(&xs);
        bstream b;
        CU_ASSERT_EQUAL_FATAL(bopen(m, "whisperrt", taus_ms[k], 0, &b), SR_OK);
        CU_ASSERT_EQUAL(bfeed_all(&b, audio, n), SR_OK);
        wh_stream *s = b.st;
        CU_ASSERT_EQUAL(s->enc_len, T);
        double d = 0;
        for (int l = 0; l < w->n_text_layer; l++) {
            size_t off = sr_kpool_at(xk, l, 0, 0);
            double e1 = test_max_abs_diff((float *)s->b->xk->data + off, (float *)xk->data + off, (size_t)T * w->d);
            double e2 = test_max_abs_diff((float *)s->b->xv->data + off, (float *)xv->data + off, (size_t)T * w->d);
            d = SR_MAX(d, SR_MAX(e1, e2));
        }
        printf("%s stream tau %d ms: cross K/V vs one pass %.2e", k ? ";" : "\n      ",
               taus_ms[k], d);
        CU_ASSERT(d <= 1e-4);
        bclose(&b);
        sr_kpool_free(w->k, xk);
        sr_kpool_free(w->k, xv);
        free(x);
        free(mel);
    }
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

/* micro.h5 has a 1 s (50-frame) context: 2.5 s of audio in whisperrt fills it twice. */
static void test_context_reset(void)
{
    sr_model *m = test_load_model("whisper/micro.h5");
    const wh_model *w = m->impl;
    size_t n = 40000;
    float *audio = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) audio[i] = 0.3f * sinf(0.05f * (float)i) * sinf(0.0007f * (float)i);
    bstream b;
    CU_ASSERT_EQUAL_FATAL(bopen(m, "whisperrt", 100, 200, &b), SR_OK);
    CU_ASSERT_EQUAL(bfeed_all(&b, audio, n), SR_OK);
    wh_stream *s = b.st;
    /* 125 frames: blocks 10 + 8 x 5 fill window 0, window 1 likewise, 25 frames in window 2 */
    CU_ASSERT_EQUAL(s->n_win, 3);
    CU_ASSERT_EQUAL(s->win_first, 2);
    CU_ASSERT_EQUAL(s->enc_len, 25);
    /* earlier windows are final: their tokens come back certain, then the break is certain */
    int V = b.sc.vocab;
    float *out = malloc((size_t)4 * V * sizeof(float));
    int32_t p[3] = {3, 4, 6};
    CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, p, 3, 0, out), SR_OK);
    CU_ASSERT(out[3] == 0 && out[(size_t)V + 4] == 0 && out[(size_t)2 * V + 6] == 0);
    CU_ASSERT(out[(size_t)3 * V + w->brk] == 0 && isinf(out[(size_t)3 * V + w->eot]));
    int32_t q[3] = {3, w->brk, w->brk};
    CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, q, 3, 3, out), SR_OK); /* window 2: live */
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp(out[v]);
    CU_ASSERT(fabs(sum - 1) < 1e-4 && isinf(out[w->eot]) && isinf(out[5]));
    int32_t r[4] = {w->brk, w->brk, w->brk, 1};
    TEST_ASSERT_ERR(b.sc.aed_logprobs(b.st, 0, r, 4, 4, out), SR_ERR_ARG, "window");
    /* the per-window text cap forces EOT */
    int32_t t[20];
    t[0] = w->brk;
    t[1] = w->brk;
    for (int i = 2; i < 20; i++) t[i] = 10;
    CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, t, 2 + w->text_cap, 2 + w->text_cap, out), SR_OK);
    CU_ASSERT(out[w->eot] == 0);
    free(out);
    bclose(&b);
    free(audio);
    sr_model_free(m);
}

/* ---- whisper_stream ---- */

static void test_strategies(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    static const char *const strat[] = {"offline", "whisperrt", "reencode"};
    int32_t first[64], again[64];
    for (size_t k = 0; k < SR_ARRAY_LEN(strat); k++) {
        bstream b;
        CU_ASSERT_EQUAL_FATAL(bopen(m, strat[k], 100, 0, &b), SR_OK);
        CU_ASSERT_EQUAL(bfeed_all(&b, audio, n), SR_OK);
        int n1 = greedy(&b.sc, first, 64);
        CU_ASSERT(n1 <= 32);
        /* reset reuses the allocations and reproduces the result */
        size_t bytes = sr_whisper_ops.state_bytes(b.st);
        sr_whisper_ops.reset(b.st);
        CU_ASSERT_EQUAL(sr_whisper_ops.state_bytes(b.st), bytes);
        CU_ASSERT_EQUAL(bfeed_all(&b, audio, n), SR_OK);
        int n2 = greedy(&b.sc, again, 64);
        CU_ASSERT(n1 == n2 && !memcmp(first, again, (size_t)n1 * sizeof(int32_t)));
        /* before any audio the scorer offers only EOT */
        sr_whisper_ops.reset(b.st);
        float *lp = malloc((size_t)b.sc.vocab * sizeof(float));
        CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, NULL, 0, 0, lp), SR_OK);
        CU_ASSERT(lp[b.sc.eot] == 0);
        /* audio shorter than one chunk, and silence */
        float tiny[100] = {0};
        CU_ASSERT_EQUAL(sr_whisper_ops.process(b.st, tiny, 100, 1), SR_OK);
        CU_ASSERT(greedy(&b.sc, again, 64) <= 32);
        sr_whisper_ops.reset(b.st);
        float *zero = calloc(16000, sizeof(float));
        CU_ASSERT_EQUAL(bfeed_all(&b, zero, 16000), SR_OK);
        CU_ASSERT(greedy(&b.sc, again, 64) <= 32);
        free(zero);
        free(lp);
        bclose(&b);
    }
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

/* decoder_kv_cache: a slot keeps its self-attention K/V across new audio (only the requested
 * positions see the new chunk); without it new audio means full recomputation. */
static void test_decoder_kv_cache(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    for (int kv = 0; kv < 2; kv++) {
        sr_stream_config c;
        sr_stream_config_init(&c);
        c.strategy = "whisperrt";
        c.chunk_ms = 100;
        c.decoder_kv_cache = kv;
        bstream b;
        memset(&b, 0, sizeof b);
        CU_ASSERT_EQUAL_FATAL(bopen_cfg(m, &c, &b), SR_OK);
        CU_ASSERT_EQUAL(sr_whisper_ops.process(b.st, audio, b.ck.first_chunk, 0), SR_OK);
        int32_t toks[16];
        int nt = greedy(&b.sc, toks, 10);
        CU_ASSERT_EQUAL_FATAL(nt, 10);
        CU_ASSERT_EQUAL(sr_whisper_ops.process(b.st, audio + b.ck.first_chunk, b.ck.chunk, 0),
                        SR_OK);
        int V = b.sc.vocab;
        float *inc = malloc((size_t)V * sizeof(float)), *full = malloc((size_t)V * sizeof(float));
        CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 0, toks, nt, nt, inc), SR_OK);
        CU_ASSERT_EQUAL(b.sc.aed_logprobs(b.st, 1, toks, nt, nt, full), SR_OK);
        double d = lp_diff(inc, full, (size_t)V);
        printf("%s decoder_kv_cache %d: incremental vs full %.2e", kv ? ";" : "\n     ", kv, d);
        /* with the option, K/V computed under the old audio were used */
        CU_ASSERT(kv ? d > 1e-6 : d <= 1e-6);
        free(inc);
        free(full);
        bclose(&b);
    }
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

/* Through the engine: the same timeline for feeds of 1, 1600 and all samples per call. */
static void test_feed_split(void)
{
    const sr_decoder_ops *dec = NULL;
    const char *dname = NULL;
    static const char *const names[] = {"aed_greedy", "stable_greedy"};
    for (size_t i = 0; i < SR_ARRAY_LEN(names) && !dname; i++)
        if (sr_decoder_find(names[i], &dec) == SR_OK) dname = names[i];
    if (!dname) {
        TEST_SKIP("no AED decoder registered yet (aed_greedy / stable_greedy)");
        return;
    }
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    static const size_t feeds[] = {1, 1600, 0};
    sr_stream *ref = NULL;
    for (size_t k = 0; k < SR_ARRAY_LEN(feeds); k++) {
        sr_stream_config c;
        sr_stream_config_init(&c);
        c.strategy = "whisperrt";
        c.decoder = dname;
        c.chunk_ms = 100;
        sr_stream *s = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &c, &s), SR_OK);
        size_t step = feeds[k] ? feeds[k] : n;
        for (size_t pos = 0; pos < n; pos += step)
            CU_ASSERT_EQUAL(sr_stream_feed(s, audio + pos, SR_MIN(step, n - pos)), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
        sr_memstats ms;
        sr_memory(m, s, &ms);
        CU_ASSERT(ms.stream_bytes > 0);
        if (!ref) {
            ref = s;
            continue;
        }
        const sr_timeline *a = sr_stream_timeline(ref), *b = sr_stream_timeline(s);
        CU_ASSERT_EQUAL(a->n, b->n);
        for (size_t i = 0; i < a->n && i < b->n; i++) {
            CU_ASSERT_EQUAL(a->entries[i].n_tokens, b->entries[i].n_tokens);
            CU_ASSERT_STRING_EQUAL(a->entries[i].text, b->entries[i].text);
            CU_ASSERT_EQUAL(a->entries[i].audio_ms, b->entries[i].audio_ms);
        }
        sr_stream_close(s);
    }
    sr_stream_close(ref);
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

/* ---- whisper_silence ---- */

/* The generator's noise (scripts/gen_golden_whisper_nospeech.py): a 32-bit LCG from 1, each
 * sample ((s >> 8) / 2^23 - 1) * amp in float32. */
static float *lcg_noise(size_t n, float amp)
{
    float *a = malloc(n * sizeof(float));
    uint32_t s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float x = (float)(s >> 8) / 8388608.0f - 1.0f;
        a[i] = x * amp;
    }
    return a;
}

static sr_model *load_real(void)
{
    const char *path = test_tiny_en_path();
    if (!path) return NULL;
    sr_model *m = NULL;
    sr_status st = sr_model_load(path, NULL, &m);
    if (st) printf("\n      load %s: %s\n", path, sr_last_error());
    CU_ASSERT_EQUAL(st, SR_OK);
    return m;
}

/* The real tiny.en and *jfk = jfk.wav's path; NULL after a skip line naming the test when
 * either is absent. */
static sr_model *load_real_jfk(const char *test, const char **jfk)
{
    *jfk = test_shared("speech-samples/jfk.wav");
    sr_model *m = *jfk ? load_real() : NULL;
    if (!m)
        printf("\n    SKIP %s: ~/.cache/srkit/models/whisper-tiny.en.h5 or ../shared/data absent "
               "(make models)\n      ", test);
    return m;
}

/* openai-whisper's no_speech_prob against srkit's offline scorer, and the average log-prob of
 * the greedy tokens (the final EOT's included, over tokens + 1) against the same average under
 * srkit's logit rules computed with openai's modules; openai's own avg_logprob differs by up to
 * 6e-3 because decode(without_timestamps=True) leaves the timestamp tokens open: the silence
 * rule must decide the same on both. */
static void test_nospeech_golden(void)
{
    const char *jfk = NULL;
    sr_model *m = load_real_jfk(__func__, &jfk);
    if (!m) return;
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/tiny_en_nospeech.h5"), &g), SR_OK);
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(jfk, 16000, &a), SR_OK);
    static const struct { const char *name; float amp; int silent; } in[] = {
        {"jfk", 0, 0}, {"zero_3s", 0, 1}, {"noise_3s", 1e-3f, 1}, {"noise10_3s", 1e-2f, 1},
    };
    double dp = 0, da = 0;
    int V = ((const wh_model *)m->impl)->n_vocab;
    float *lp = malloc((size_t)V * sizeof(float));
    for (size_t i = 0; i < SR_ARRAY_LEN(in); i++) {
        size_t n = i ? 48000 : a.n;
        float *audio = i == 0 ? a.samples : in[i].amp > 0 ? lcg_noise(n, in[i].amp)
                                                           : calloc(n, sizeof(float));
        bstream b;
        CU_ASSERT_EQUAL_FATAL(bopen(m, "offline", 0, 0, &b), SR_OK);
        CU_ASSERT_EQUAL(bfeed_all(&b, audio, n), SR_OK);
        float p = -1;
        int start = -1;
        CU_ASSERT_EQUAL(b.sc.aed_no_speech(b.st, NULL, 0, &start, &p), SR_OK);
        CU_ASSERT_EQUAL(start, 0);
        /* greedy with the log-prob of every choice, the final EOT's included */
        int32_t toks[128];
        int nt = 0;
        double sum = 0;
        for (;;) {
            CU_ASSERT_EQUAL_FATAL(b.sc.aed_logprobs(b.st, 0, toks, nt, nt, lp), SR_OK);
            sr_aed_top tb;
            sr_aed_top_of_row(lp, V, -1, -1, &tb);
            int best = tb.best;
            sum += lp[best];
            if (best == b.sc.eot || nt == 127) break;
            toks[nt++] = best;
        }
        double avg = sum / (nt + 1);
        char path[64];
        sr_tensor gp, ga, go, gt;
        snprintf(path, sizeof path, "/%s/no_speech_prob", in[i].name);
        int ok = test_golden(g, path, SR_F32, &gp);
        snprintf(path, sizeof path, "/%s/avg_logprob_srkit_rules", in[i].name);
        ok = test_golden(g, path, SR_F32, &ga) && ok;
        snprintf(path, sizeof path, "/%s/avg_logprob", in[i].name);
        ok = test_golden(g, path, SR_F32, &go) && ok;
        snprintf(path, sizeof path, "/%s/tokens", in[i].name);
        ok = test_golden(g, path, SR_I64, &gt) && ok;
        if (ok) {
            double gpv = ((float *)gp.data)[0], gav = ((float *)ga.data)[0];
            double gov = ((float *)go.data)[0];
            double e = fabs(p - gpv), f = fabs(avg - gav);
            dp = e > dp ? e : dp;
            da = f > da ? f : da;
            CU_ASSERT(e <= 1e-4);
            CU_ASSERT(f <= 1e-4);
            CU_ASSERT(tokens_equal(toks, nt, &gt, in[i].name));
            /* the rule decides as it would on openai-whisper's own numbers, and as expected */
            CU_ASSERT_EQUAL(sr_aed_silent(p, avg), sr_aed_silent(gpv, gov));
            CU_ASSERT_EQUAL(sr_aed_silent(p, avg), in[i].silent);
            printf("%s %s p %.4f avg %.3f", i ? ";" : "\n     ", in[i].name, p, avg);
        }
        sr_tensor_free(&gp);
        sr_tensor_free(&ga);
        sr_tensor_free(&go);
        sr_tensor_free(&gt);
        bclose(&b);
        if (i) free(audio);
    }
    printf("\n      no_speech_prob max abs diff %.2e, avg_logprob (srkit rules) %.2e", dp, da);
    free(lp);
    sr_audio_free(&a);
    sr_h5_close(g);
    sr_model_free(m);
}

/* Several decoders on one backend stream, as core/stream.c drives one (process, then update
 * after every chunk, final = 1 after the last): they share the scorer (the backend recomputes
 * whatever a slot's cache no longer matches), so each strategy encodes the audio once. */
typedef struct {
    const char *name;
    int beam;
    int gate;            /* 0: the scorer's no-speech probability is hidden from it */
    const sr_decoder_ops *ops;
    void *st;
    sr_scorer sc;
    sr_hyp h;
    uint64_t sum;        /* checksum of every update's hypothesis and n_stable */
    int max_n;           /* longest hypothesis of any update */
} ddec;

static int drive_many(const sr_model *m, const char *strategy, int chunk_ms, const float *a,
                      size_t n, ddec *d, int nd)
{
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.strategy = strategy;
    cfg.chunk_ms = chunk_ms;
    cfg.beam = 3; /* slots for the widest decoder */
    bstream b;
    int ok = 0, k = 0;
    if (bopen_cfg(m, &cfg, &b)) return 0;
    for (k = 0; k < nd; k++) {
        memset(&d[k].h, 0, sizeof d[k].h);
        d[k].st = NULL;
        d[k].sum = 1469598103934665603ull;
        d[k].max_n = 0;
        d[k].sc = b.sc;
        if (!d[k].gate) d[k].sc.aed_no_speech = NULL;
        cfg.beam = d[k].beam;
        cfg.stability_n = 2;
        if (sr_decoder_find(d[k].name, &d[k].ops) || d[k].ops->open(&cfg, &d[k].sc, &d[k].st))
            goto done;
    }
    size_t pos = 0, need = b.ck.first_chunk;
    for (;;) {
        int final = n - pos < need;
        size_t take = final ? n - pos : need;
        if (sr_whisper_ops.process(b.st, a + pos, take, final)) goto done;
        pos += take;
        for (k = 0; k < nd; k++) {
            sr_hyp *h = &d[k].h;
            if (d[k].ops->update(d[k].st, &d[k].sc, final, h)) goto done;
            for (int i = 0; i < h->n; i++) d[k].sum = (d[k].sum ^ (uint64_t)h->tokens[i]) * 1099511628211ull;
            d[k].sum = (d[k].sum ^ (uint64_t)(h->n + 1000 * h->n_stable)) * 1099511628211ull;
            d[k].max_n = SR_MAX(d[k].max_n, h->n);
        }
        if (final) break;
        need = b.ck.chunk;
    }
    ok = 1;
done:
    if (!ok) printf("\n      %s %s: %s", strategy, k < nd ? d[k].name : "", sr_last_error());
    for (k = 0; k < nd; k++)
        if (d[k].st) d[k].ops->close(d[k].st);
    bclose(&b);
    return ok;
}

#define DDEC(n, b, g) {.name = (n), .beam = (b), .gate = (g)}

static void free_many(ddec *d, int nd)
{
    for (int k = 0; k < nd; k++) free(d[k].h.tokens);
}

static const struct { const char *strategy; int chunk_ms; } strategies[] = {
    {"offline", 0}, {"whisperrt", 300}, {"reencode", 1000},
};

/* Silence, low noise and audio shorter than one chunk give an empty hypothesis on every update,
 * for every strategy x decoder; and through the engine, an empty text in every timeline entry. */
static void test_silence_every_decoder(void)
{
    sr_model *m = load_real();
    if (!m) {
        TEST_SKIP("~/.cache/srkit/models/whisper-tiny.en.h5 absent (make models)");
        return;
    }
    size_t n = 32000;
    float *zero = calloc(n, sizeof(float)), *noise = lcg_noise(n, 1e-3f);
    static const struct { const char *name; size_t n; } in[] = {
        {"2 s of zeros", 32000}, {"2 s of noise at 1e-3", 32000}, {"100 zero samples", 100},
    };
    int empty = 0, total = 0;
    for (size_t si = 0; si < SR_ARRAY_LEN(strategies); si++)
        for (size_t i = 0; i < SR_ARRAY_LEN(in); i++) {
            ddec d[] = {DDEC("aed_greedy", 1, 1), DDEC("aed_beam", 3, 1),
                        DDEC("stable_greedy", 1, 1), DDEC("stable_beam", 3, 1),
                        DDEC("local_agreement", 1, 1)};
            int nd = (int)SR_ARRAY_LEN(d);
            CU_ASSERT_FATAL(drive_many(m, strategies[si].strategy, strategies[si].chunk_ms,
                                       i == 1 ? noise : zero, in[i].n, d, nd));
            for (int k = 0; k < nd; k++) {
                if (d[k].max_n)
                    printf("\n      %s %s on %s: %d tokens", strategies[si].strategy, d[k].name,
                           in[i].name, d[k].max_n);
                CU_ASSERT_EQUAL(d[k].max_n, 0);
                empty += !d[k].max_n;
                total++;
            }
            free_many(d, nd);
        }
    printf("\n      empty on every update: %d of %d strategy x decoder x input", empty, total);
    /* the engine: default strategy and decoder (tiny.en is vanilla: reencode, local_agreement) */
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s, noise, n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    const sr_timeline *t = sr_stream_timeline(s);
    CU_ASSERT(t->n > 1 && t->entries[t->n - 1].is_final);
    for (size_t k = 0; k < t->n; k++) CU_ASSERT_STRING_EQUAL(t->entries[k].text, "");
    sr_stream_close(s);
    free(zero);
    free(noise);
    sr_model_free(m);
}

/* Speech: with and without the gate a decoder gives the same hypotheses on every update (jfk's
 * no-speech probability stays far below the thresholds), for each strategy with the decoders
 * meant for it; offline greedy equals openai-whisper's tokens. The streaming strategies run on
 * jfk's first 4 s ("And so my fellow Americans") in 1 s chunks, to keep the test short. */
static void test_speech_unaffected(void)
{
    const char *jfk = NULL;
    sr_model *m = load_real_jfk(__func__, &jfk);
    if (!m) return;
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(jfk, 16000, &a), SR_OK);
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/tiny_en_nospeech.h5"), &g), SR_OK);
    static const struct { const char *strategy; const char *dec[3]; int beam[3]; } runs[] = {
        {"offline", {"aed_greedy", "aed_beam", NULL}, {1, 3, 0}},
        {"whisperrt", {"stable_greedy", "stable_beam", "local_agreement"}, {1, 3, 1}},
        {"reencode", {"stable_greedy", "local_agreement", NULL}, {1, 1, 0}},
    };
    for (size_t r = 0; r < SR_ARRAY_LEN(runs); r++) {
        size_t n = r ? SR_MIN(a.n, 64000) : a.n;
        ddec d[6];
        int nd = 0;
        for (int j = 0; j < 3 && runs[r].dec[j]; j++)
            for (int gate = 1; gate >= 0; gate--) {
                memset(&d[nd], 0, sizeof d[nd]);
                d[nd].name = runs[r].dec[j];
                d[nd].beam = runs[r].beam[j];
                d[nd].gate = gate;
                nd++;
            }
        CU_ASSERT_FATAL(drive_many(m, runs[r].strategy, r ? 1000 : 0, a.samples, n, d, nd));
        printf("\n      %s:", runs[r].strategy);
        for (int k = 0; k < nd; k += 2) {
            printf(" %s %d tokens", d[k].name, d[k].h.n);
            CU_ASSERT(d[k].h.n > 0);
            CU_ASSERT(d[k].sum == d[k + 1].sum && d[k].h.n == d[k + 1].h.n &&
                      !memcmp(d[k].h.tokens, d[k + 1].h.tokens, (size_t)d[k].h.n * sizeof(int32_t)));
        }
        sr_tensor gt;
        if (r == 0 && test_golden(g, "/jfk/tokens", SR_I64, &gt)) {
            CU_ASSERT(tokens_equal(d[0].h.tokens, d[0].h.n, &gt, "jfk offline aed_greedy"));
            sr_tensor_free(&gt);
        }
        free_many(d, nd);
    }
    sr_h5_close(g);
    sr_audio_free(&a);
    sr_model_free(m);
}

/* whisperrt past the 30 s context: the context resets (a second window); a streaming decoder
 * keeps the first window's text and continues in the new window; an offline decoder, which
 * decodes only at the end, sees only the window still held (docs/whisper.md): its hypothesis
 * is the break token then the second window's text. */
static void test_whisperrt_long(void)
{
    const char *jfk = NULL;
    sr_model *m = load_real_jfk(__func__, &jfk);
    if (!m) return;
    const wh_model *w = m->impl;
    /* 40 s: jfk (11 s), digital silence up to 30 s, then jfk's first 10 s: speech, silence
     * and speech again across the reset (few tokens, so the test stays short) */
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(jfk, 16000, &a), SR_OK);
    size_t n = 40 * 16000;
    float *audio = calloc(n, sizeof(float));
    memcpy(audio, a.samples, SR_MIN(a.n, (size_t)30 * 16000) * sizeof(float));
    memcpy(audio + 30 * 16000, a.samples, SR_MIN(a.n, (size_t)10 * 16000) * sizeof(float));
    sr_audio_free(&a);
    ddec d[] = {DDEC("stable_greedy", 1, 1), DDEC("aed_greedy", 1, 1)};
    CU_ASSERT_FATAL(drive_many(m, "whisperrt", 1000, audio, n, d, 2));
    int brk[2] = {-1, -1}, nbrk[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < d[k].h.n; i++)
            if (d[k].h.tokens[i] == w->brk) {
                nbrk[k]++;
                if (brk[k] < 0) brk[k] = i;
            }
    printf("\n      40 s whisperrt, 1 s chunks: stable_greedy %d tokens, break at %d; "
           "aed_greedy %d tokens, break at %d", d[0].h.n, brk[0], d[1].h.n, brk[1]);
    sr_strbuf tb = {0};
    if (sr_detokenize_into(m, d[0].h.tokens, d[0].h.n, &tb) == SR_OK && tb.data)
        printf("\n      \"%s\"", tb.data);
    sr_strbuf_free(&tb);
    CU_ASSERT_EQUAL(nbrk[0], 1);
    CU_ASSERT(brk[0] >= 8);                /* jfk's text before the reset */
    CU_ASSERT(d[0].h.n - brk[0] - 1 >= 8); /* and the second jfk's after it */
    CU_ASSERT(d[1].h.n > 1 && d[1].h.tokens[0] == w->brk && nbrk[1] == 1);
    free_many(d, 2);
    free(audio);
    sr_model_free(m);
}

/* ---- whisper_batch: streams stepped together in one batch context ---- */

/* One stream of the batch and its twin: the same calls on a stream alone in its own batch
 * context of one. */
typedef struct {
    int open, done;
    void *st;
    sr_scorer sc;
    bstream twin;
    const float *a;
    size_t n, pos;
    int32_t toks[24];
    int nt;
    int32_t toks2[25]; /* a second prefix: window break, then toks (streams of two windows) */
} bstr;

static sr_status bstr_open(const sr_model *m, const sr_stream_config *c, void *batch, int slot,
                           const float *a, size_t n, bstr *x)
{
    memset(x, 0, sizeof *x);
    sr_chunking ck;
    sr_status st = sr_whisper_ops.stream_open(m, c, batch, slot, &x->st, &ck, &x->sc);
    if (st) return st;
    if ((st = bopen_cfg(m, c, &x->twin))) {
        sr_whisper_ops.stream_close(x->st);
        return st;
    }
    CU_ASSERT(ck.first_chunk == x->twin.ck.first_chunk && ck.chunk == x->twin.ck.chunk);
    x->open = 1;
    x->a = a;
    x->n = n;
    return SR_OK;
}

static void bstr_close(bstr *x)
{
    if (!x->open) return;
    sr_whisper_ops.stream_close(x->st);
    bclose(&x->twin);
    x->open = 0;
}

/* Streams joining at calls 0, 1, 2, 3 of a batch of 4 (audio aud[i]), each call a changing
 * subset processed by one process_batch, then one aed_logprobs_batch over every open stream
 * (a slot and a range of positions that change per call, the prefix growing by the batch's
 * argmax); at call 5 stream 1 closes and a new one (aud[4]) takes its slot, at call 6 stream 2
 * resets. Every output row is compared bit for bit with the twin's solo calls, and so is the
 * no-speech probability. Returns the number of rows compared. */
static long batch_case(const sr_model *m, const char *strategy, int chunk_ms, int beam,
                       const float *const *aud, const size_t *alen, int calls, int max_tok)
{
    const wh_model *w = m->impl;
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = strategy;
    c.chunk_ms = chunk_ms;
    c.beam = beam;
    void *B = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_whisper_ops.batch_open(m, &c, 4, &B), SR_OK);
    int V = w->n_vocab, slots = beam > 1 ? 2 * beam : 2;
    long rows_cmp = 0, mism = 0, two_slots = 0, two_windows = 0, tops_cmp = 0, mism_top = 0, topk_cmp = 0;
    bstr S[4];
    memset(S, 0, sizeof S);
    float *out = malloc((size_t)8 * (max_tok + 1) * V * sizeof(float));
    float *ref = malloc((size_t)(max_tok + 1) * V * sizeof(float));
    float *out2 = malloc((size_t)8 * (max_tok + 1) * V * sizeof(float));
    sr_aed_top *tops = malloc((size_t)8 * (max_tok + 1) * sizeof(sr_aed_top));
    int32_t *kid = malloc((size_t)8 * (max_tok + 1) * 64 * sizeof(int32_t));
    float *klp = malloc((size_t)8 * (max_tok + 1) * 64 * sizeof(float));
    size_t bytes = sr_whisper_ops.batch_bytes(B);
    CU_ASSERT(bytes > 0);
    for (int call = 0; call < calls; call++) {
        if (call < 4)
            CU_ASSERT_EQUAL_FATAL(bstr_open(m, &c, B, call, aud[call], alen[call], &S[call]),
                                  SR_OK);
        if (call == 5) { /* a new stream in a freed slot: nothing reallocated, nothing left */
            bytes = sr_whisper_ops.batch_bytes(B);
            bstr_close(&S[1]);
            CU_ASSERT_EQUAL_FATAL(bstr_open(m, &c, B, 1, aud[4], alen[4], &S[1]), SR_OK);
            CU_ASSERT_EQUAL(sr_whisper_ops.batch_bytes(B), bytes);
        }
        if (call == 6) {
            sr_whisper_ops.reset(S[2].st);
            sr_whisper_ops.reset(S[2].twin.st);
            S[2].pos = 0;
            S[2].done = 0;
            S[2].nt = 0;
        }
        void *st[4];
        const float *pcm[4];
        size_t n[4];
        int fin[4], cnt = 0;
        for (int i = 0; i < 4; i++) {
            bstr *x = &S[i];
            if (!x->open || x->done || (call * 7 + i) % 5 == 4) continue;
            size_t need = x->pos ? x->twin.ck.chunk : x->twin.ck.first_chunk, left = x->n - x->pos;
            int final = left <= need;
            st[cnt] = x->st;
            pcm[cnt] = x->a + x->pos;
            n[cnt] = final ? left : need;
            fin[cnt] = final;
            CU_ASSERT_EQUAL(sr_whisper_ops.process(x->twin.st, pcm[cnt], n[cnt], final), SR_OK);
            x->pos += n[cnt];
            x->done = final;
            cnt++;
        }
        CU_ASSERT_EQUAL(sr_whisper_ops.process_batch(B, st, pcm, n, fin, cnt), SR_OK);
        /* every open stream's request, and on odd calls a second one of streams 0 and 2 on
         * the next slot, one token shorter (a beam decoder's round: two slots of one stream) */
        sr_aed_req req[8];
        int who[8], nr = 0;
        for (int i = 0; i < 4; i++) {
            bstr *x = &S[i];
            if (!x->open) continue;
            int from = call % 3 == 0 ? 0 : SR_MAX(0, x->nt - 2);
            req[nr] = (sr_aed_req){.ctx = x->st, .slot = (call + i) % slots, .prefix = x->toks,
                                   .n = x->nt, .from = from,
                                   .out = out + (size_t)nr * (max_tok + 1) * V};
            who[nr++] = i;
            if (call % 2 && i % 2 == 0 && x->nt) {
                /* where the stream's audio has a second window, the second prefix starts it with
                 * a window break (its positions map to other windows than the first's) */
                const wh_stream *ws = x->st;
                int brk = ws->n_win >= 2;
                x->toks2[0] = w->brk;
                memcpy(x->toks2 + 1, x->toks, (size_t)(x->nt - 1) * sizeof(int32_t));
                req[nr] = (sr_aed_req){.ctx = x->st, .slot = (call + i + 1) % slots,
                                       .prefix = brk ? x->toks2 : x->toks, .n = x->nt - 1 + brk, .from = 0,
                                       .out = out + (size_t)nr * (max_tok + 1) * V};
                who[nr++] = i;
                two_slots++;
                two_windows += brk;
            }
        }
        CU_ASSERT_EQUAL_FATAL(S[0].sc.aed_logprobs_batch(req, nr), SR_OK);
        /* the same requests asking for the rows' summaries (sr_aed_top): all of them (taken
         * by the table's ops), then every other one beside rows (taken from the rows on the
         * host); each summary is what sr_aed_top_of_row gives for the row above */
        for (int pass = 0; pass < 2 && S[0].sc.aed_top; pass++) {
            sr_aed_req rt[8];
            int K = S[0].sc.aed_top_k_max;
            for (int r = 0; r < nr; r++) {
                rt[r] = req[r];
                rt[r].out = NULL;
                rt[r].top = tops + (size_t)r * (max_tok + 1);
                /* every other request also asks for its rows' K best (a beam decoder's) */
                rt[r].top_k = (r + call) % 2 ? K : 0;
                rt[r].top_id = kid + (size_t)r * (max_tok + 1) * K;
                rt[r].top_lp = klp + (size_t)r * (max_tok + 1) * K;
                if (pass && r % 2) {
                    rt[r].top = NULL;
                    rt[r].out = out2 + (size_t)r * (max_tok + 1) * V;
                }
            }
            CU_ASSERT_EQUAL_FATAL(S[0].sc.aed_logprobs_batch(rt, nr), SR_OK);
            for (int r = 0; r < nr; r++) {
                int rows = req[r].n - req[r].from + 1;
                if (!rt[r].top) {
                    mism_top += memcmp(rt[r].out, req[r].out, (size_t)rows * V * sizeof(float)) != 0;
                    continue;
                }
                for (int j = req[r].from; j <= req[r].n; j++) {
                    sr_aed_top want;
                    sr_aed_top_of_row(req[r].out + (size_t)(j - req[r].from) * V, V,
                                      j < req[r].n ? req[r].prefix[j] : -1, w->eot, &want);
                    if (rt[r].top_k) {
                        int32_t wid[64];
                        float wlp[64];
                        size_t o = (size_t)(j - req[r].from) * K;
                        sr_aed_row_topk(req[r].out + (size_t)(j - req[r].from) * V, V, K, wid, wlp);
                        mism_top += memcmp(wid, rt[r].top_id + o, (size_t)K * sizeof *wid) != 0 ||
                                    memcmp(wlp, rt[r].top_lp + o, (size_t)K * sizeof *wlp) != 0;
                        topk_cmp++;
                    }
                    if (memcmp(&want, &rt[r].top[j - req[r].from], sizeof want) && !mism_top++)
                        printf("\n      %s call %d request %d row %d: summary %d %g %g %g, row %d %g %g %g",
                               strategy, call, r, j, rt[r].top[j - req[r].from].best,
                               rt[r].top[j - req[r].from].best_lp, rt[r].top[j - req[r].from].tok_lp,
                               rt[r].top[j - req[r].from].eot_lp, want.best, want.best_lp,
                               want.tok_lp, want.eot_lp);
                    tops_cmp++;
                }
            }
        }
        for (int r = 0; r < nr; r++) {
            bstr *x = &S[who[r]];
            int rows = req[r].n - req[r].from + 1;
            CU_ASSERT_EQUAL_FATAL(x->twin.sc.aed_logprobs(x->twin.st, req[r].slot, req[r].prefix,
                                                          req[r].n, req[r].from, ref), SR_OK);
            if (memcmp(req[r].out, ref, (size_t)rows * V * sizeof(float))) {
                if (!mism++)
                    printf("\n      %s call %d stream %d slot %d [%d, %d]: batched != solo",
                           strategy, call, who[r], req[r].slot, req[r].from, req[r].n);
            }
            rows_cmp += rows;
            const float *last = req[r].out + (size_t)(rows - 1) * V;
            sr_aed_top tb;
            sr_aed_top_of_row(last, V, -1, -1, &tb);
            int best = tb.best;
            if (best != w->eot && best != w->brk && x->nt < max_tok && req[r].n == x->nt)
                x->toks[x->nt++] = best; /* the stream's first request only */
            float p = -1, q = -2;
            int s0 = -1, s1 = -2;
            CU_ASSERT_EQUAL(x->sc.aed_no_speech(x->st, x->toks, x->nt, &s0, &p), SR_OK);
            CU_ASSERT_EQUAL(x->twin.sc.aed_no_speech(x->twin.st, x->toks, x->nt, &s1, &q), SR_OK);
            CU_ASSERT(s0 == s1 && !memcmp(&p, &q, sizeof p));
        }
    }
    CU_ASSERT_EQUAL(mism, 0);
    CU_ASSERT_EQUAL(mism_top, 0);
    CU_ASSERT(tops_cmp > 0 && topk_cmp > 0);
    CU_ASSERT(two_slots > 0);
    if (!strcmp(strategy, "whisperrt") && chunk_ms == 200) CU_ASSERT(two_windows > 0);
    /* every stream got audio through to its end and some text */
    for (int i = 0; i < 4; i++) CU_ASSERT(S[i].done && S[i].nt > 0);
    for (int i = 0; i < 4; i++) bstr_close(&S[i]);
    sr_whisper_ops.batch_close(B);
    free(out);
    free(out2);
    free(tops);
    free(kid);
    free(klp);
    free(ref);
    return rows_cmp;
}

/* Audio i: the clip rotated and scaled per stream, lengths len[i] (tiled as needed). */
static float **batch_audio(const float *a, size_t n, const size_t *len, int k)
{
    float **o = malloc((size_t)k * sizeof(float *));
    for (int i = 0; i < k; i++) {
        o[i] = malloc(len[i] * sizeof(float));
        for (size_t t = 0; t < len[i]; t++)
            o[i][t] = a[(t + (size_t)i * 2711) % n] * (1.0f - 0.15f * (float)i);
    }
    return o;
}

static void test_batch_rand(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_h5 *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_h5_open_plain(test_fixture("whisper/rand_golden.h5"), &g), SR_OK);
    size_t n = 0;
    float *audio = test_golden_audio(g, &n);
    CU_ASSERT_FATAL(audio != NULL);
    /* rand.h5 has a 3 s window: offline audio of up to 2 windows grows the cross K/V pools */
    static const struct { const char *strategy; int chunk_ms, beam, calls; size_t len[5]; } cs[] = {
        {"whisperrt", 100, 2, 30, {16000, 24000, 14000, 20000, 12000}},
        {"whisperrt", 200, 0, 30, {60000, 36000, 56000, 50000, 26000}}, /* context resets */
        {"reencode", 200, 0, 24, {20000, 28000, 14000, 22000, 12000}},
        {"offline", 0, 3, 12, {30000, 90000, 40000, 60000, 20000}},
    };
    for (size_t k = 0; k < SR_ARRAY_LEN(cs); k++) {
        float **a = batch_audio(audio, n, cs[k].len, 5);
        long rows = batch_case(m, cs[k].strategy, cs[k].chunk_ms, cs[k].beam,
                               (const float *const *)a, cs[k].len, cs[k].calls, 14);
        printf("%s %s %d ms: %ld rows compared", k ? ";" : "\n      ", cs[k].strategy,
               cs[k].chunk_ms, rows);
        CU_ASSERT(rows > 100);
        for (int i = 0; i < 5; i++) free(a[i]);
        free(a);
    }
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_batch_tiny_en(void)
{
    const char *jfk = NULL;
    sr_model *m = load_real_jfk(__func__, &jfk);
    if (!m) return;
    sr_audio au;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(jfk, 16000, &au), SR_OK);
    size_t len[5] = {48000, 40000, 56000, 32000, 36000};
    float **a = batch_audio(au.samples, au.n, len, 5);
    long rows = batch_case(m, "whisperrt", 500, 2, (const float *const *)a, len, 14, 10);
    printf("\n      tiny.en whisperrt 500 ms: %ld rows compared", rows);
    CU_ASSERT(rows > 50);
    for (int i = 0; i < 5; i++) free(a[i]);
    free(a);
    sr_audio_free(&au);
    sr_model_free(m);
}

/* Batch contexts: configs checked as stream_open checks them, slots in range and free, the
 * streams of a batched call distinct and of one context. */
static void test_batch_bad(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_stream_config c;
    sr_stream_config_init(&c);
    void *B = NULL, *B2 = NULL;
    c.chunk_ms = 30;
    TEST_ASSERT_ERR(sr_whisper_ops.batch_open(m, &c, 2, &B), SR_ERR_ARG, "stream.chunk_ms");
    c.chunk_ms = 100;
    c.first_chunk_ms = 3020;
    TEST_ASSERT_ERR(sr_whisper_ops.batch_open(m, &c, 2, &B), SR_ERR_ARG, "stream.first_chunk_ms");
    c.first_chunk_ms = 0;
    c.strategy = "bogus";
    TEST_ASSERT_ERR(sr_whisper_ops.batch_open(m, &c, 2, &B), SR_ERR_ARG, "stream.strategy");
    c.strategy = NULL;
    c.decoder_kv_cache = 2;
    TEST_ASSERT_ERR(sr_whisper_ops.batch_open(m, &c, 2, &B), SR_ERR_ARG, "stream.decoder_kv_cache");
    c.decoder_kv_cache = 0;
    TEST_ASSERT_ERR(sr_whisper_ops.batch_open(m, &c, 0, &B), SR_ERR_ARG, "max_streams");
    CU_ASSERT_PTR_NULL(B);
    CU_ASSERT_EQUAL_FATAL(sr_whisper_ops.batch_open(m, &c, 2, &B), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_whisper_ops.batch_open(m, &c, 1, &B2), SR_OK);
    /* a bigger batch holds more */
    CU_ASSERT(sr_whisper_ops.batch_bytes(B) > sr_whisper_ops.batch_bytes(B2));
    void *s0 = NULL, *s1 = NULL, *s2 = NULL, *x = NULL;
    sr_chunking ck;
    sr_scorer sc0, sc1, sc2;
    TEST_ASSERT_ERR(sr_whisper_ops.stream_open(m, &c, B, 2, &x, &ck, &sc0), SR_ERR_ARG, "slot 2");
    TEST_ASSERT_ERR(sr_whisper_ops.stream_open(m, &c, B, -1, &x, &ck, &sc0), SR_ERR_ARG, "slot -1");
    c.beam = 3;
    TEST_ASSERT_ERR(sr_whisper_ops.stream_open(m, &c, B, 0, &x, &ck, &sc0), SR_ERR_ARG, "stream.beam");
    c.beam = 0;
    CU_ASSERT_EQUAL_FATAL(sr_whisper_ops.stream_open(m, &c, B, 0, &s0, &ck, &sc0), SR_OK);
    TEST_ASSERT_ERR(sr_whisper_ops.stream_open(m, &c, B, 0, &x, &ck, &sc0), SR_ERR_ARG, "in use");
    CU_ASSERT_EQUAL_FATAL(sr_whisper_ops.stream_open(m, &c, B, 1, &s1, &ck, &sc1), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_whisper_ops.stream_open(m, &c, B2, 0, &s2, &ck, &sc2), SR_OK);
    CU_ASSERT(sr_whisper_ops.state_bytes(s0) < sr_whisper_ops.batch_bytes(B));
    float out[2 * 259];
    sr_aed_req r[5] = {{.ctx = s0, .out = out}, {.ctx = s0, .out = out + 259}, {.ctx = s1, .out = out},
                       {.ctx = s1, .slot = 1, .out = out}, {.ctx = s1, .out = out}};
    TEST_ASSERT_ERR(sc0.aed_logprobs_batch(r, 2), SR_ERR_ARG, "same stream and slot");
    /* two slots of one stream in one call (a beam decoder's round): 2 streams x 2 slots */
    r[1].slot = 1;
    CU_ASSERT_EQUAL(sc0.aed_logprobs_batch(r, 4), SR_OK);
    CU_ASSERT(sc0.batch_max == 4 && sc0.aed_batch_multi == 1);
    TEST_ASSERT_ERR(sc0.aed_logprobs_batch(r, 5), SR_ERR_ARG, "5 requests");
    r[1].slot = 0;
    r[1].ctx = s2;
    TEST_ASSERT_ERR(sc0.aed_logprobs_batch(r, 2), SR_ERR_ARG, "batch context");
    r[1].ctx = s1;
    r[1].slot = 5;
    TEST_ASSERT_ERR(sc0.aed_logprobs_batch(r, 2), SR_ERR_ARG, "slot 5");
    r[1].slot = 0;
    CU_ASSERT_EQUAL(sc0.aed_logprobs_batch(r, 2), SR_OK); /* no audio yet: EOT certain */
    CU_ASSERT(out[sc0.eot] == 0 && out[259 + sc0.eot] == 0);
    /* summaries: the best entries asked for bounded by the context's beam (1: 2 entries) */
    sr_aed_top tp[1];
    int32_t tid[3];
    float tlp[3];
    sr_aed_req rq = {.ctx = s0, .top = tp, .top_k = 3, .top_id = tid, .top_lp = tlp};
    CU_ASSERT_EQUAL(sc0.aed_top_k_max, 2);
    TEST_ASSERT_ERR(sc0.aed_logprobs_batch(&rq, 1), SR_ERR_ARG, "top_k 3");
    rq.top_k = 2;
    rq.top_lp = NULL;
    TEST_ASSERT_ERR(sc0.aed_logprobs_batch(&rq, 1), SR_ERR_ARG, "top_lp NULL");
    rq.top_lp = tlp;
    CU_ASSERT_EQUAL(sc0.aed_logprobs_batch(&rq, 1), SR_OK); /* EOT certain: then id 0 at -inf */
    CU_ASSERT(tp[0].best == sc0.eot && tid[0] == sc0.eot && tlp[0] == 0 && tid[1] == 0 && isinf(tlp[1]));
    void *st[2] = {s0, s2};
    const float *pcm[2] = {out, out};
    size_t n[2] = {0, 0};
    int fin[2] = {0, 0};
    TEST_ASSERT_ERR(sr_whisper_ops.process_batch(B, st, pcm, n, fin, 2), SR_ERR_ARG,
                    "not of this batch context");
    st[1] = s0;
    TEST_ASSERT_ERR(sr_whisper_ops.process_batch(B, st, pcm, n, fin, 2), SR_ERR_ARG, "same");
    sr_whisper_ops.stream_close(s0);
    sr_whisper_ops.stream_close(s1);
    sr_whisper_ops.stream_close(s2);
    sr_whisper_ops.batch_close(B);
    sr_whisper_ops.batch_close(B2);
    sr_model_free(m);
}

/* Model files that are missing or corrupt; stream configs and scorer calls out of range. */
static void test_silence_bad_input(void)
{
    sr_model *m = NULL;
    TEST_ASSERT_ERR(sr_model_load("/nonexistent/whisper-tiny.en.h5", NULL, &m), SR_ERR_IO,
                    "/nonexistent/whisper-tiny.en.h5");
    CU_ASSERT_PTR_NULL(m);
    /* a truncated copy of a valid model file */
    char tmp[] = "/tmp/srkit_whisper_corrupt_XXXXXX";
    int fd = mkstemp(tmp);
    CU_ASSERT_FATAL(fd >= 0);
    FILE *src = fopen(test_fixture("whisper/micro.h5"), "rb"), *dst = fdopen(fd, "wb");
    CU_ASSERT_FATAL(src && dst);
    char buf[4096];
    size_t got = fread(buf, 1, sizeof buf, src);
    fwrite(buf, 1, got / 2, dst);
    fclose(src);
    fclose(dst);
    sr_status st = sr_model_load(tmp, NULL, &m);
    CU_ASSERT(st == SR_ERR_FORMAT || st == SR_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), tmp));
    CU_ASSERT_PTR_NULL(m);
    remove(tmp);
    /* chunk sizes: not a multiple of the 20 ms encoder frame; first chunk below the chunk,
     * off the frame grid, or beyond the window */
    m = test_load_model("whisper/rand.h5");
    bstream b;
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 110, 0, &b), SR_ERR_ARG, "stream.chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "reencode", 2000, 0, &b), SR_ERR_ARG, "stream.chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 300, 200, &b), SR_ERR_ARG, "stream.first_chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "reencode", 300, 280, &b), SR_ERR_ARG, "stream.first_chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 100, 610, &b), SR_ERR_ARG, "stream.first_chunk_ms");
    TEST_ASSERT_ERR(bopen(m, "whisperrt", 100, 3020, &b), SR_ERR_ARG, "stream.first_chunk_ms");
    CU_ASSERT_EQUAL(bopen(m, "whisperrt", 300, 300, &b), SR_OK);
    bclose(&b);
    /* aed_no_speech: before audio nothing is claimed; bad arguments name themselves */
    CU_ASSERT_EQUAL_FATAL(bopen(m, "whisperrt", 100, 0, &b), SR_OK);
    float p = -1;
    int start = -1;
    CU_ASSERT_EQUAL(b.sc.aed_no_speech(b.st, NULL, 0, &start, &p), SR_OK);
    CU_ASSERT(p == 0 && start == 0);
    int32_t q[2] = {9999, 0};
    TEST_ASSERT_ERR(b.sc.aed_no_speech(b.st, q, 1, &start, &p), SR_ERR_ARG, "prefix[0] = 9999");
    TEST_ASSERT_ERR(b.sc.aed_no_speech(b.st, q, 1, NULL, &p), SR_ERR_ARG, "start NULL");
    float *zero = calloc(16000, sizeof(float));
    CU_ASSERT_EQUAL(bfeed_all(&b, zero, 16000), SR_OK);
    q[0] = ((const wh_model *)m->impl)->brk;
    TEST_ASSERT_ERR(b.sc.aed_no_speech(b.st, q, 1, &start, &p), SR_ERR_ARG, "window 1");
    q[0] = 3;
    CU_ASSERT_EQUAL(b.sc.aed_no_speech(b.st, q, 1, &start, &p), SR_OK);
    CU_ASSERT(p > 0 && p < 1 && start == 0);
    free(zero);
    bclose(&b);
    sr_model_free(m);
}

/* ---- whisper_defaults: config.streaming, per-model defaults, the repetition guard ---- */

/* rand.h5's config with top-level `key` set to the JSON text `json`, as a model file; loads it
 * into *m and returns its status (*m NULL on failure). */
static sr_status load_with(const char *key, const char *json, sr_model **m)
{
    *m = NULL;
    sr_model *base = test_load_model("whisper/rand.h5");
    cJSON *c = cJSON_Parse(sr_model_config(base));
    sr_model_free(base);
    cJSON *v = cJSON_Parse(json);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    if (cJSON_GetObjectItemCaseSensitive(c, key)) cJSON_ReplaceItemInObjectCaseSensitive(c, key, v);
    else cJSON_AddItemToObject(c, key, v);
    char *txt = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    const char *p = test_model_copy("whisper/rand.h5", "wh_streaming.h5", NULL, txt);
    free(txt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return sr_model_load(p, NULL, m);
}

static void defaults_are(const sr_model *m, sr_use use, const char *strategy, const char *decoder,
                         int chunk, int first, const sr_stream_config *cfg)
{
    sr_defaults d;
    CU_ASSERT_EQUAL_FATAL(sr_model_defaults(m, use, cfg, &d), SR_OK);
    int ok = d.strategy && !strcmp(d.strategy, strategy) && !strcmp(d.decoder, decoder) &&
             d.chunk_ms == chunk && d.first_chunk_ms == first && d.basis;
    CU_ASSERT(ok);
    if (!ok)
        printf("\n      got %s + %s, %d / %d ms; want %s + %s, %d / %d ms\n", d.strategy,
               d.decoder, d.chunk_ms, d.first_chunk_ms, strategy, decoder, chunk, first);
}

/* config.tokens.language_first near INT_MAX once overflowed language_first + index (found by
 * tests/fuzz/fuzz_model_content): now a range error naming the key. */
static void test_language_first_range(void)
{
    sr_model *base = test_load_model("whisper/rand.h5"), *m = NULL;
    cJSON *c = cJSON_Parse(sr_model_config(base));
    sr_model_free(base);
    cJSON_ReplaceItemInObjectCaseSensitive(c, "multilingual", cJSON_CreateTrue());
    cJSON_AddItemToObject(c, "lang_codes", cJSON_Parse("[\"de\", \"en\"]"));
    cJSON *tk = cJSON_GetObjectItemCaseSensitive(c, "tokens");
    const double bad[] = {2147483647.0, -5.0};
    for (int i = 0; i < 2; i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(tk, "language_first");
        cJSON_AddNumberToObject(tk, "language_first", bad[i]);
        char *txt = cJSON_PrintUnformatted(c);
        const char *p = test_model_copy("whisper/rand.h5", "wh_langfirst.h5", NULL, txt);
        free(txt);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        TEST_ASSERT_ERR(sr_model_load(p, NULL, &m), SR_ERR_FORMAT, "config.tokens.language_first");
        CU_ASSERT_PTR_NULL(m);
    }
    cJSON_Delete(c);
}

/* A stream of m with cfg (NULL: every default) over audio; its timeline's audio times and texts
 * hashed, with the number of entries. */
static uint64_t timeline_hash(const sr_model *m, const sr_stream_config *cfg, const float *a,
                              size_t n, size_t *entries, int64_t *first_ms)
{
    sr_stream *s = NULL;
    uint64_t h = 1469598103934665603ull;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, cfg, &s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s, a, n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    const sr_timeline *t = sr_stream_timeline(s);
    for (size_t k = 0; k < t->n; k++) {
        h = (h ^ (uint64_t)t->entries[k].audio_ms) * 1099511628211ull;
        for (const char *c = t->entries[k].text; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    }
    *entries = t->n;
    *first_ms = t->n ? t->entries[0].audio_ms : -1;
    sr_stream_close(s);
    return h;
}

/* Vanilla weights (no config.streaming, or causal false): offline + aed_greedy for the final
 * text, reencode + local_agreement at 1000 ms for live use; set fields are kept and the rest
 * fits them; sr_stream_open with no config runs exactly the live defaults. */
static void test_defaults_vanilla(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_stream_config c;
    sr_stream_config_init(&c);
    defaults_are(m, SR_USE_FINAL, "offline", "aed_greedy", 0, 0, NULL);
    defaults_are(m, SR_USE_LIVE, "reencode", "local_agreement", 1000, 2000, NULL);
    sr_defaults d;
    CU_ASSERT_EQUAL(sr_model_defaults(m, SR_USE_LIVE, NULL, &d), SR_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.basis, "vanilla"));
    c.decoder = "aed_beam"; /* decodes only at the end: offline even for live use */
    defaults_are(m, SR_USE_LIVE, "offline", "aed_beam", 0, 0, &c);
    c.decoder = NULL;
    c.strategy = "whisperrt";
    defaults_are(m, SR_USE_FINAL, "whisperrt", "stable_greedy", 300, 600, &c);
    c.strategy = "reencode";
    c.chunk_ms = 100;
    defaults_are(m, SR_USE_LIVE, "reencode", "local_agreement", 100, 200, &c);
    TEST_ASSERT_ERR(sr_model_defaults(m, (sr_use)7, NULL, &d), SR_ERR_ARG, "SR_USE_LIVE");
    TEST_ASSERT_ERR(sr_model_defaults(NULL, SR_USE_LIVE, NULL, &d), SR_ERR_ARG, "model is NULL");
    /* the library default is the live one */
    float *a = lcg_noise(48000, 0.1f);
    size_t n1, n2;
    int64_t f1, f2;
    sr_stream_config_init(&c);
    uint64_t h1 = timeline_hash(m, NULL, a, 48000, &n1, &f1);
    c.strategy = "reencode";
    c.decoder = "local_agreement";
    c.chunk_ms = 1000;
    c.first_chunk_ms = 2000;
    uint64_t h2 = timeline_hash(m, &c, a, 48000, &n2, &f2);
    CU_ASSERT_EQUAL(h1, h2);
    CU_ASSERT_EQUAL(n1, n2);
    CU_ASSERT_EQUAL(f1, 2000);
    sr_model_free(m);
    /* defaults fit a model's window: micro.h5 holds 1 s */
    m = test_load_model("whisper/micro.h5");
    defaults_are(m, SR_USE_LIVE, "reencode", "local_agreement", 1000, 1000, NULL);
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL(sr_stream_open(m, NULL, &s), SR_OK);
    sr_stream_close(s);
    sr_model_free(m);
    /* "causal": false is vanilla */
    CU_ASSERT_EQUAL_FATAL(load_with("streaming", "{\"causal\": false, \"lora\": {\"rank\": 8}}", &m), SR_OK);
    defaults_are(m, SR_USE_FINAL, "offline", "aed_greedy", 0, 0, NULL);
    sr_model_free(m);
    free(a);
}

/* Causal weights (config.streaming.causal): whisperrt + stable_greedy at the first trained chunk
 * with the trained first chunk, for both uses; the stream opened with no config runs that. */
static void test_defaults_causal(void)
{
    sr_model *m = NULL;
    sr_status st = load_with("streaming", "{\"causal\": true, \"chunk_ms\": [100, 200], "
                             "\"first_chunk_ms\": 400, \"lora\": {\"rank\": 8, \"pairs_merged\": "
                             "24, \"source\": \"test\"}}", &m);
    if (st) printf("\n      %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    defaults_are(m, SR_USE_FINAL, "whisperrt", "stable_greedy", 100, 400, NULL);
    defaults_are(m, SR_USE_LIVE, "whisperrt", "stable_greedy", 100, 400, NULL);
    sr_defaults d;
    CU_ASSERT_EQUAL(sr_model_defaults(m, SR_USE_LIVE, NULL, &d), SR_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.basis, "causal"));
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.chunk_ms = 200; /* the other trained chunk: the trained first chunk still fits */
    defaults_are(m, SR_USE_LIVE, "whisperrt", "stable_greedy", 200, 400, &c);
    c.chunk_ms = 500; /* beyond it: twice the chunk, as for any model */
    defaults_are(m, SR_USE_LIVE, "whisperrt", "stable_greedy", 500, 1000, &c);
    c.chunk_ms = 0;
    c.decoder = "aed_greedy"; /* causal weights stay on the causal encoder */
    defaults_are(m, SR_USE_FINAL, "whisperrt", "aed_greedy", 100, 400, &c);
    c.decoder = NULL;
    c.strategy = "reencode"; /* the trained sizes are the causal encoder's: not reencode's */
    defaults_are(m, SR_USE_LIVE, "reencode", "local_agreement", 1000, 2000, &c);
    float *a = lcg_noise(16000, 0.1f);
    size_t n1, n2;
    int64_t f1, f2;
    uint64_t h1 = timeline_hash(m, NULL, a, 16000, &n1, &f1);
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    c.decoder = "stable_greedy";
    c.chunk_ms = 100;
    c.first_chunk_ms = 400;
    uint64_t h2 = timeline_hash(m, &c, a, 16000, &n2, &f2);
    CU_ASSERT_EQUAL(h1, h2);
    CU_ASSERT_EQUAL(n1, n2);
    CU_ASSERT_EQUAL(f1, 412); /* tau0 400 ms + the 12.5 ms lookahead */
    CU_ASSERT(n1 > 6);        /* 100 ms chunks after it */
    sr_model_free(m);
    free(a);
}

/* Malformed streaming blocks fail the load naming config.streaming.<field>. */
static void test_defaults_bad_streaming(void)
{
    static const struct { const char *key, *json, *want; } cases[] = {
        {"streaming", "true", "config.streaming: expected an object"},
        {"streaming", "{}", "config.streaming.causal: missing"},
        {"streaming", "{\"causal\": \"yes\"}", "config.streaming.causal: expected true or false"},
        {"streaming", "{\"causal\": true}", "config.streaming.chunk_ms: missing"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": 300}", "config.streaming.chunk_ms: expected an array"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": []}", "config.streaming.chunk_ms: expected an array"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [100, 30]}", "config.streaming.chunk_ms[1]: 30 ms"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [110]}", "config.streaming.chunk_ms[0]: 110 ms"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [1020]}", "config.streaming.chunk_ms[0]: 1020 ms"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [\"300\"]}", "config.streaming.chunk_ms[0]: expected an integer"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [100, 100]}", "config.streaming.chunk_ms[1]: 100 ms is listed twice"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [200], \"first_chunk_ms\": 100}", "config.streaming.first_chunk_ms: 100 ms"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [200], \"first_chunk_ms\": 3020}", "config.streaming.first_chunk_ms: 3020 ms"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [200], \"first_chunk_ms\": 410}", "config.streaming.first_chunk_ms: 410 ms"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [200], \"first_chunk_ms\": \"600\"}", "config.streaming.first_chunk_ms: expected an integer"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [200], \"lora\": 8}", "config.streaming.lora: expected an object"},
        {"streaming", "{\"causal\": false, \"chunk_ms\": [200]}", "config.streaming.chunk_ms: trained chunk sizes describe causal weights"},
        {"streaming", "{\"causal\": true, \"chunk_ms\": [200], \"chunks_ms\": [1]}", "config.streaming.chunks_ms: not a field"},
        {"trained_chunk_ms", "300", "config.trained_chunk_ms: written by an older"},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(cases); i++) {
        sr_model *m = NULL;
        TEST_ASSERT_ERR(load_with(cases[i].key, cases[i].json, &m), SR_ERR_FORMAT, cases[i].want);
        if (m) {
            printf("\n      %s = %s loaded\n", cases[i].key, cases[i].json);
            sr_model_free(m);
        }
    }
    /* the converter's LoRA record of Hugging Face merges is provenance the backend accepts */
    sr_model *m = NULL;
    CU_ASSERT_EQUAL(load_with("lora_merged", "24", &m), SR_OK);
    sr_model_free(m);
}

/* scripts/convert_whisper.py's block for a WhisperRT checkpoint config loads as causal weights
 * at the trained chunk; its vanilla answer is no block. */
static void test_defaults_converter(void)
{
    if (!test_python_ok()) {
        TEST_SKIP("/usr/bin/python3 lacks numpy/h5py (make setup installs them)");
        return;
    }
    static char out[4096];
    int rc = test_run(out, sizeof out, "/usr/bin/python3 -c 'import sys, json; sys.path.insert(0, "
                      "\"scripts\"); import convert_whisper as c; d = {\"n_audio_ctx\": 150}; "
                      "print(json.dumps(c.whisperrt_streaming({\"gran\": 5, \"extra_gran_blocks\": 2, "
                      "\"rank\": 8, \"streaming_train\": True}, 24, None, d, \"x.pt\"))); "
                      "print(c.whisperrt_streaming({\"gran\": 5, \"streaming_train\": False}, 24, None, d, "
                      "\"x.pt\"), c.whisperrt_streaming({}, 0, None, d, \"x.pt\"))'");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char *nl = strchr(out, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
    *nl = '\0';
    CU_ASSERT_PTR_NOT_NULL(strstr(nl + 1, "None None"));
    sr_model *m = NULL;
    sr_status st = load_with("streaming", out, &m);
    if (st) printf("\n      %s: %s\n", out, sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    defaults_are(m, SR_USE_FINAL, "whisperrt", "stable_greedy", 100, 300, NULL);
    sr_model_free(m);
}

/* Real tiny.en (vanilla): jfk with every default transcribes to the reference, with no loop
 * cut; whisperrt loops on these weights: the guard cuts the loop (and is counted, equal in an
 * engine of two streams and a solo stream), without the guard the loop runs on. */
static void test_defaults_tiny_en(void)
{
    const char *jfk = NULL;
    sr_model *m = load_real_jfk(__func__, &jfk);
    if (!m) return;
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(jfk, 16000, &a), SR_OK);
    sr_stream_config c;
    sr_stream_config_init(&c);
    sr_defaults d;
    CU_ASSERT_EQUAL_FATAL(sr_model_defaults(m, SR_USE_FINAL, &c, &d), SR_OK);
    c.strategy = d.strategy;
    c.decoder = d.decoder;
    CU_ASSERT_STRING_EQUAL(c.strategy, "offline");
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &c, &s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s, a.samples, a.n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    CU_ASSERT_STRING_EQUAL(sr_stream_hypothesis(s)->text, " And so my fellow Americans ask not what "
                           "your country can do for you, ask what you can do for your country.");
    CU_ASSERT_EQUAL(sr_stream_hypothesis(s)->repetition_cuts, 0);
    sr_stream_close(s);
    /* whisperrt + stable_greedy on vanilla weights: guard on, off, and in an engine of two */
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    c.decoder = "stable_greedy";
    int n_on = 0, n_off = 0, cuts_on = 0, cuts_off = -1;
    char *text_on = NULL;
    for (int g = 1; g >= 0; g--) {
        c.repetition_guard = g;
        CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &c, &s), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_feed(s, a.samples, a.n), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
        const sr_hypothesis *h = sr_stream_hypothesis(s);
        CU_ASSERT_EQUAL(sr_aed_loop_keep(h->tokens, h->n_tokens, 0) >= 0, !g);
        if (g) {
            n_on = h->n_tokens;
            cuts_on = h->repetition_cuts;
            text_on = strdup(h->text);
        } else {
            n_off = h->n_tokens;
            cuts_off = h->repetition_cuts;
        }
        sr_stream_close(s);
    }
    printf("\n      whisperrt + stable_greedy on jfk: guard on %d tokens (%d cuts), off %d tokens",
           n_on, cuts_on, n_off);
    CU_ASSERT(cuts_on > 0);
    CU_ASSERT_EQUAL(cuts_off, 0);
    CU_ASSERT(n_on < 30 && n_off > 100);
    sr_engine *e = NULL;
    sr_stream *es[2] = {NULL, NULL};
    c.repetition_guard = 1;
    CU_ASSERT_EQUAL_FATAL(sr_engine_create(m, &c, 2, &e), SR_OK);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(sr_engine_open(e, &es[i]), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_feed(es[i], a.samples, a.n), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_finish(es[i]), SR_OK);
    }
    CU_ASSERT_EQUAL(sr_engine_drain(e), SR_OK);
    for (int i = 0; i < 2; i++) {
        const sr_hypothesis *h = sr_stream_hypothesis(es[i]);
        CU_ASSERT_STRING_EQUAL(h->text, text_on ? text_on : "");
        CU_ASSERT_EQUAL(h->repetition_cuts, cuts_on);
    }
    sr_engine_free(e);
    free(text_on);
    sr_audio_free(&a);
    sr_model_free(m);
}

/* ---- whisper_train: scripts/train_whisperrt.py ---- */

/* The adapter merge (numpy + h5py, no torch): a hand-made adapter on two modules of rand.h5;
 * the merged weights are base + (alpha / r) B A rounded once to the base's f16, every other
 * dataset is copied unchanged, the file loads with the adapter's streaming block (causal
 * defaults); bad adapters are refused naming the module or field. */
static const char merge_py[] =
    "import sys, json, os, numpy as np, h5py\n"
    "sys.path.insert(0, 'scripts')\n"
    "import train_whisperrt as t\n"
    "base, d, out = sys.argv[1:4]\n"
    "mods = ('encoder.blocks.0.attn.query', 'decoder.blocks.1.cross_attn.out')\n"
    "rng = np.random.default_rng(3)\n"
    "def adapter(folder, ten, streaming=True):\n"
    "    os.makedirs(folder, exist_ok=True)\n"
    "    t.write_safetensors(folder + '/adapter_model.safetensors', ten, {})\n"
    "    c = {'peft_type': 'LORA', 'r': 4, 'lora_alpha': 8}\n"
    "    if streaming:\n"
    "        c['srkit'] = {'streaming': {'causal': True, 'chunk_ms': [300, 100], 'first_chunk_ms': 600}}\n"
    "    json.dump(c, open(folder + '/adapter_config.json', 'w'))\n"
    "ten = {}\n"
    "with h5py.File(base) as f:\n"
    "    for m in mods:\n"
    "        w = f['weights/' + m.replace('.', '/') + '/weight']\n"
    "        ten['base_model.model.%s.lora_A.weight' % m] = rng.standard_normal((4, w.shape[1])) * 0.1\n"
    "        ten['base_model.model.%s.lora_B.weight' % m] = rng.standard_normal((w.shape[0], 4)) * 0.1\n"
    "adapter(d + '/good', ten)\n"
    "bad = dict(ten)\n"
    "k = 'base_model.model.%s.lora_A.weight' % mods[1]\n"
    "bad[k] = np.zeros((4, ten[k].shape[1] + 1))\n"
    "adapter(d + '/bad_shape', bad)\n"
    "adapter(d + '/no_streaming', ten, streaming=False)\n"
    "t.merge(base, d + '/good', out)\n"
    "h = {k: v.astype(np.float16).astype(np.float64) for k, v in ten.items()}\n"
    "worst, same = 0.0, True\n"
    "with h5py.File(base) as f, h5py.File(out) as g:\n"
    "    names = []\n"
    "    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)\n"
    "    for n in names:\n"
    "        m = n[len('weights/'):-len('/weight')].replace('/', '.') if n.startswith('weights/') else None\n"
    "        if m in mods:\n"
    "            a, b = h['base_model.model.%s.lora_A.weight' % m], h['base_model.model.%s.lora_B.weight' % m]\n"
    "            want = f[n][()].astype(np.float64) + 2.0 * (b @ a)\n"
    "            got = g[n][()]\n"
    "            same = same and got.dtype == f[n].dtype\n"
    "            worst = max(worst, float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()))\n"
    "        else:\n"
    "            same = same and np.array_equal(f[n][()], g[n][()]) and f[n].dtype == g[n].dtype\n"
    "    st = json.loads(g.attrs['config'])['streaming']\n"
    "print('merged %d pairs, rel err %.3g, others identical %s, chunk_ms %s, rank %d' % (st['lora']['pairs_merged'], worst, same, st['chunk_ms'], st['lora']['rank']))\n"
    "sys.exit(0 if same and worst <= 2.0 ** -11 and st['lora']['pairs_merged'] == 2 else 3)\n";

static void test_train_merge(void)
{
    if (!test_python_ok()) {
        TEST_SKIP("/usr/bin/python3 lacks numpy/h5py (make setup installs them)");
        return;
    }
    const char *py = test_tmppath("wt_merge.py"), *dir = test_tmppath("wt_adapters"),
               *out = test_tmppath("wt_merged.h5"), *again = test_tmppath("wt_again.h5");
    FILE *f = fopen(py, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(merge_py, f);
    fclose(f);
    static char msg[8192];
    int rc = test_run(msg, sizeof msg, "/usr/bin/python3 %s %s %s %s", py,
                      test_fixture("whisper/rand.h5"), dir, out);
    if (rc) printf("\n      %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "merged 2 pairs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "others identical True, chunk_ms [300, 100], rank 4"));
    sr_model *m = NULL;
    sr_status st = sr_model_load(out, NULL, &m);
    if (st) printf("\n      %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    CU_ASSERT_PTR_NULL(sr_model_warning(m)); /* sealed: the digest is there */
    defaults_are(m, SR_USE_FINAL, "whisperrt", "stable_greedy", 300, 600, NULL);
    defaults_are(m, SR_USE_LIVE, "whisperrt", "stable_greedy", 300, 600, NULL);
    sr_model_free(m);
    /* refusals: a pair that does not fit its base, no streaming block, merging twice */
    static const struct { const char *adapter, *base, *want; } bad[] = {
        {"bad_shape", NULL, "decoder.blocks.1.cross_attn.out: A [4, 33], B [32, 4] do not fit"},
        {"no_streaming", NULL, "srkit.streaming missing"},
        {"good", "merged", "already has config.streaming"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rc = test_run(msg, sizeof msg, "/usr/bin/python3 scripts/train_whisperrt.py merge %s %s/%s %s",
                      bad[i].base ? out : test_fixture("whisper/rand.h5"), dir, bad[i].adapter,
                      again);
        CU_ASSERT_EQUAL(rc, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i].want));
        if (rc != 1 || !strstr(msg, bad[i].want)) printf("\n      %s: rc %d: %s\n", bad[i].adapter, rc, msg);
    }
    FILE *g = fopen(again, "rb");
    CU_ASSERT_PTR_NULL(g); /* a refused merge leaves no output */
    if (g) fclose(g);
}

/* Load merged causal model `path`, check its causal defaults (whisperrt + stable_greedy at
 * 300 ms, first 600 ms, for `use`), stream `wav` through a stream opened with no config and
 * return the final text (malloc'd; NULL after a failed assertion) and its loop cuts. */
static char *stream_causal(const char *path, sr_use use, const char *wav, int *cuts)
{
    sr_model *m = NULL;
    sr_status st = sr_model_load(path, NULL, &m);
    if (st) printf("\n      %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    CU_ASSERT_PTR_NULL(sr_model_warning(m)); /* sealed: the merge writes the digest */
    defaults_are(m, use, "whisperrt", "stable_greedy", 300, 600, NULL);
    sr_audio a;
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(wav, 16000, &a), SR_OK);
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s, a.samples, a.n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    const sr_hypothesis *h = sr_stream_hypothesis(s);
    char *text = h && h->text ? strdup(h->text) : NULL;
    *cuts = h ? h->repetition_cuts : -1;
    sr_stream_close(s);
    sr_audio_free(&a);
    sr_model_free(m);
    return text;
}

/* The training loop on a random model (needs torch: $SRKIT_TORCH_PYTHON, e.g. the reference
 * venv's python; skipped without it): a few steps on generated tones lower the loss, the
 * exported adapter merges, and srkit loads the result and streams with its causal defaults. */
static void test_train_selftest(void)
{
    const char *py = getenv("SRKIT_TORCH_PYTHON"), *dir = test_tmppath("wt_selftest");
    static char msg[16384];
    int rc = test_run(msg, sizeof msg, "%s scripts/train_whisperrt.py selftest --model %s --out %s",
                      py && *py ? py : "/usr/bin/python3", test_fixture("whisper/rand.h5"), dir);
    if (rc == 2) {
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is not installed"));
        TEST_SKIP("train_whisperrt.py needs torch: set SRKIT_TORCH_PYTHON to the reference venv's python");
        return;
    }
    if (rc) printf("\n      %s\n", msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "selftest: loss"));
    char path[4096], wav[4096];
    snprintf(path, sizeof path, "%s/merged.h5", dir);
    snprintf(wav, sizeof wav, "%s/u3.wav", dir);
    int cuts = 0;
    char *text = stream_causal(path, SR_USE_LIVE, wav, &cuts);
    CU_ASSERT_PTR_NOT_NULL(text);
    free(text);
}

/* The shipped fine-tune (`make models` merges assets/whisperrt-tiny.en into
 * whisperrt-tiny.en.h5): causal defaults from its streaming block, and jfk streamed with no
 * options through whisperrt + stable_greedy at 300 ms. The text is pinned: the reference's
 * words (the soup of three runs; the soup of the first two wrote "as not", docs/whisper.md), no
 * loop. */
static void test_train_shipped(void)
{
    const char *path = test_model_path("whisperrt-tiny.en.h5"),
               *jfk = test_shared("speech-samples/jfk.wav");
    if (!path || !jfk) {
        TEST_SKIP("whisperrt-tiny.en.h5 (make models) or ../shared/data absent");
        return;
    }
    int cuts = -1;
    char *text = stream_causal(path, SR_USE_FINAL, jfk, &cuts);
    const char *want = " And so my fellow Americans ask not what your country can do for you, ask what "
                       "you can do for your country.";
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_STRING_EQUAL(text, want);
    if (strcmp(text, want)) printf("\n      got \"%s\"\n", text);
    CU_ASSERT_EQUAL(cuts, 0);
    free(text);
}

void test_register_whisper(void)
{
    TEST_SUITE("whisper_load", {"load_rand", test_load_rand}, {"load_mixed", test_load_mixed},
               {"load_bad", test_load_bad},
               {"stream_config_bad", test_stream_config_bad});
    TEST_SUITE("whisper_parity", {"rand_vs_openai", test_parity_rand},
               {"scorer_cache", test_scorer_cache}, {"tiny_en_jfk", test_parity_tiny_en},
               {"tiny_en_tokens", test_tokens_tiny_en}, {"rand_vs_openai_bf16", test_parity_rand_bf16},
               {"tiny_en_jfk_bf16", test_parity_tiny_en_bf16},
               {"tiny_en_tokens_bf16", test_tokens_tiny_en_bf16});
    TEST_SUITE("whisper_causal", {"stem_stream", test_stem_stream},
               {"causal_equivalence", test_causal_equivalence},
               {"stream_cross_kv", test_stream_cross_kv}, {"context_reset", test_context_reset});
    TEST_SUITE("whisper_stream", {"strategies", test_strategies},
               {"decoder_kv_cache", test_decoder_kv_cache}, {"feed_split", test_feed_split});
    TEST_SUITE("whisper_silence", {"bad_input", test_silence_bad_input},
               {"nospeech_vs_openai", test_nospeech_golden},
               {"silence_every_decoder", test_silence_every_decoder},
               {"speech_unaffected", test_speech_unaffected},
               {"whisperrt_past_30s", test_whisperrt_long});
    TEST_SUITE("whisper_batch", {"batch_bad", test_batch_bad}, {"batch_vs_solo_rand", test_batch_rand},
               {"batch_vs_solo_tiny_en", test_batch_tiny_en});
    TEST_SUITE("whisper_defaults", {"vanilla", test_defaults_vanilla},
               {"causal", test_defaults_causal}, {"bad_streaming", test_defaults_bad_streaming},
               {"language_first_range", test_language_first_range},
               {"converter_block", test_defaults_converter}, {"tiny_en", test_defaults_tiny_en});
    TEST_SUITE("whisper_train", {"merge", test_train_merge}, {"selftest", test_train_selftest},
               {"shipped_jfk", test_train_shipped});
}
