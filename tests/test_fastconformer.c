/*
 * test_fastconformer.c — the fastconformer_rnnt backend (models/fastconformer/) and the
 * transducer decoders:
 *   fastconformer_parity  random-init model vs NeMo 3.0.0 goldens: mel front end, causal
 *                         subsampling, offline encoder for every att_context_size and full
 *                         attention, prediction network + joint, greedy tokens
 *   fastconformer_stream  cache_aware_stream_step chunk after chunk for every att_context_size
 *                         (encoder rows, attention / conv caches and their valid length), split
 *                         invariance, end-to-end tokens from audio, reset, memory bounds
 *   fastconformer_local   banded local attention vs a plain masked band reference, O(T W) memory
 *   fastconformer_tdt     rand_tdt.h5 (the same encoder with a TDT joint, durations 0..4):
 *                         rnnt_greedy's every joint evaluation (frame, token + duration logits)
 *                         vs NeMo's GreedyTDTInfer offline; tokens, frames and durations vs
 *                         NeMo's label-looping TDT decoder carried across the cache-aware
 *                         chunks of every context (jumps past a chunk's end carried); from audio
 *   fastconformer_batch   a batch context of 5 slots: streams of different audio joining at
 *                         different calls, stepped in changing subsets by process_batch,
 *                         finishing at different calls, one closed and its slot reused, one
 *                         reset: encoder rows, batched predict and joint equal each stream run
 *                         alone bit for bit (f32 and f16 caches); batch_open's config errors,
 *                         slots out of range, foreign / repeated streams
 *   fastconformer_bad     malformed files and stream configs name their culprit
 *   fastconformer_convert scripts/convert_nemo.py on rand.nemo (the same random model as a
 *                         .nemo archive) gives a file that computes exactly what rand.h5 does;
 *                         bad archives fail naming the defect. The converter needs torch to
 *                         read the .ckpt: it runs with $SRKIT_TORCH_PYTHON or /usr/bin/python3
 *                         and the cases that need torch skip when it exits 2 (package missing)
 * Goldens: scripts/gen_golden_fastconformer.py (tests/fixtures/fastconformer/).
 */
#include "test.h"

#include "../models/fastconformer/fc.h"
#include "../core/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern const sr_decoder_ops sr_dec_rnnt_greedy;

static const int CTX[][2] = {{70, 0}, {70, 1}, {70, 6}, {70, 13}, {4, 0}, {6, 1}};
#define N_CTX ((int)(sizeof CTX / sizeof CTX[0]))
#define TOL 1e-4


static sr_h5 *golden(void) { return test_open_golden("fastconformer/golden.h5"); }

static int check(const char *what, const float *a, const float *b, size_t n, double tol)
{
    double d = test_max_abs_diff(a, b, n);
    printf("\n      %-34s max |diff| %.2e (tol %.0e)", what, d, tol);
    CU_ASSERT(d <= tol);
    return d <= tol;
}

/* check() of a that is table memory of k (what the backend's functions write). */
static int check_table(const char *what, const sr_kernels *k, const float *a, const float *b,
                       size_t n, double tol)
{
    float *h = test_table_copy(k, a, n);
    int ok = check(what, h, b, n, tol);
    free(h);
    return ok;
}

/* A backend stream opened directly (no engine), for the tests that look inside: a lone stream
 * in its own batch context of one slot, as the core opens one. */
typedef struct {
    void *batch;
    void *st;
    sr_chunking ck;
    sr_scorer sc;
} bstream;

static int bopen_dtype(const sr_model *m, const char *strategy, int L, int R, const char *cache_dtype,
                       bstream *b)
{
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = strategy;
    c.cache_dtype = cache_dtype;
    c.att_context[0] = L;
    c.att_context[1] = R;
    b->st = NULL;
    sr_status st = sr_fastconformer_rnnt_ops.batch_open(m, &c, 1, &b->batch);
    if (!st) {
        st = sr_fastconformer_rnnt_ops.stream_open(m, &c, b->batch, 0, &b->st, &b->ck, &b->sc);
        if (st) {
            sr_fastconformer_rnnt_ops.batch_close(b->batch);
            b->batch = NULL;
        }
    }
    if (st) printf("\n      open: %s\n", sr_last_error());
    CU_ASSERT_EQUAL(st, SR_OK);
    return st == SR_OK;
}

static void bclose(bstream *b)
{
    sr_fastconformer_rnnt_ops.stream_close(b->st);
    sr_fastconformer_rnnt_ops.batch_close(b->batch);
    b->st = b->batch = NULL;
}

/* Bytes a lone stream holds: its own state and its batch context of one (the core's count). */
static size_t bbytes(const bstream *b)
{
    return sr_fastconformer_rnnt_ops.state_bytes(b->st) + sr_fastconformer_rnnt_ops.batch_bytes(b->batch);
}

static int bopen(const sr_model *m, const char *strategy, int L, int R, bstream *b)
{
    return bopen_dtype(m, strategy, L, R, NULL, b);
}

/* ---- fastconformer_parity ---- */

static void test_mel(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    size_t n;
    float *audio = test_golden_audio(g, &n);
    sr_tensor ref;
    if (audio && test_golden(g, "/mel", SR_F32, &ref)) {
        float *mel = NULL;
        int T = 0;
        CU_ASSERT_EQUAL(sr_mel_compute(w->mel, audio, n, &mel, &T), SR_OK);
        CU_ASSERT_EQUAL(T, ref.shape[0]);
        /* float32 torch vs this front end: README's measured bound for NeMo mels */
        if (T == ref.shape[0]) check("mel", mel, ref.data, (size_t)T * w->n_mels, 1e-3);
        free(mel);
        sr_tensor_free(&ref);
    }
    free(audio);
    sr_h5_close(g);
    sr_model_free(m);
}

/* prec in the parity tests: NULL (f32, TOL) or "bf16" (issue 11's fast mode: test_bf16_tol of
 * each golden tensor, tokens exact). */
static double ptol(const char *prec, const sr_tensor *ref, double f32_tol)
{
    return prec ? test_bf16_tol(ref->data, (size_t)sr_tensor_numel(ref)) : f32_tol;
}

static void pre_encode(const char *prec)
{
    sr_model *m = test_load_prec(test_fixture("fastconformer/rand.h5"), prec);
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    sr_tensor mel, ref;
    if (test_golden(g, "/mel", SR_F32, &mel) && test_golden(g, "/pre_encode", SR_F32, &ref)) {
        int T = (int)mel.shape[0], n = 0;
        /* the mel is host memory, the subsampled rows table memory */
        float *x = test_table_alloc(w->k, (size_t)fc_subsample_len(T) * w->d);
        CU_ASSERT_EQUAL(fc_subsample(w, mel.data, T, x, &n), SR_OK);
        CU_ASSERT_EQUAL(n, ref.shape[0]);
        if (n == ref.shape[0])
            check_table("pre_encode", w->k, x, ref.data, (size_t)n * w->d, ptol(prec, &ref, TOL));
        w->k->free(x);
    }
    sr_tensor_free(&mel);
    sr_tensor_free(&ref);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_pre_encode(void) { pre_encode(NULL); }
static void test_pre_encode_bf16(void) { pre_encode("bf16"); }

static void offline(const char *prec)
{
    sr_model *m = test_load_prec(test_fixture("fastconformer/rand.h5"), prec);
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    sr_tensor mel;
    if (test_golden(g, "/mel", SR_F32, &mel)) {
        for (int c = 0; c <= N_CTX; c++) {
            int ctx[2] = {-1, -1};
            char path[64], what[64];
            if (c < N_CTX) {
                ctx[0] = CTX[c][0];
                ctx[1] = CTX[c][1];
                snprintf(path, sizeof path, "/offline/%d_%d/encoder", ctx[0], ctx[1]);
            } else {
                snprintf(path, sizeof path, "/offline/full/encoder");
            }
            snprintf(what, sizeof what, "offline [%d, %d]", ctx[0], ctx[1]);
            sr_tensor ref;
            if (!test_golden(g, path, SR_F32, &ref)) continue;
            float *out = NULL;
            int n = 0;
            CU_ASSERT_EQUAL(fc_encode_offline(w, mel.data, (int)mel.shape[0], ctx, 0, &out, &n, NULL), SR_OK);
            CU_ASSERT_EQUAL(n, ref.shape[0]);
            if (n == ref.shape[0])
                check_table(what, w->k, out, ref.data, (size_t)n * w->d, ptol(prec, &ref, TOL));
            w->k->free(out);
            sr_tensor_free(&ref);
        }
    }
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_offline(void) { offline(NULL); }
static void test_offline_bf16(void) { offline("bf16"); }

static void predict_joint(const char *prec)
{
    sr_model *m = test_load_prec(test_fixture("fastconformer/rand.h5"), prec);
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    bstream b;
    sr_tensor mel, st_out, h, c, jref;
    if (bopen(m, NULL, 70, 0, &b) && test_golden(g, "/mel", SR_F32, &mel)) {
        fc_stream *s = b.st;
        int H = w->pred_hidden, J = w->joint_hidden;
        float *state = calloc((size_t)b.sc.pred_state, sizeof(float));
        float *pred = calloc((size_t)b.sc.pred_dim, sizeof(float));
        float *logits = calloc((size_t)b.sc.vocab, sizeof(float));
        float *top = calloc((size_t)H, sizeof(float));
        CU_ASSERT_EQUAL(b.sc.tr_predict(s, NULL, -1, state, pred), SR_OK);
        CU_ASSERT_EQUAL(b.sc.tr_predict(s, state, 5, state, pred), SR_OK);
        if (test_golden(g, "/pred/tok5_h", SR_F32, &h) && test_golden(g, "/pred/tok5_c", SR_F32, &c)) {
            /* golden [layers, H] each; the scorer state interleaves h and c per layer */
            float *hs = malloc((size_t)w->pred_layers * H * sizeof(float));
            float *cs = malloc((size_t)w->pred_layers * H * sizeof(float));
            for (int l = 0; l < w->pred_layers; l++) {
                memcpy(hs + (size_t)l * H, state + (size_t)l * 2 * H, (size_t)H * sizeof(float));
                memcpy(cs + (size_t)l * H, state + (size_t)l * 2 * H + H, (size_t)H * sizeof(float));
            }
            check("LSTM h after start, token 5", hs, h.data, (size_t)w->pred_layers * H, ptol(prec, &h, 1e-5));
            check("LSTM c after start, token 5", cs, c.data, (size_t)w->pred_layers * H, ptol(prec, &c, 1e-5));
            free(hs);
            free(cs);
        }
        /* joint on frame 0 of the [70, 0] streaming path (its first step equals offline row 0) */
        CU_ASSERT_EQUAL(fc_stream_feed_mel(s, mel.data, 1, 0), SR_OK);
        CU_ASSERT_EQUAL(b.sc.tr_frames(s), 1);
        CU_ASSERT_EQUAL(b.sc.tr_joint(s, 0, pred, logits), SR_OK);
        /* NeMo's joint on CPU returns log-probabilities: compare log_softmax(logits) */
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < b.sc.vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
        for (int i = 0; i < b.sc.vocab; i++) sum += exp(logits[i] - mx);
        for (int i = 0; i < b.sc.vocab; i++) logits[i] = (float)(logits[i] - mx - log(sum));
        if (test_golden(g, "/pred/joint_f0_tok5", SR_F32, &jref))
            check("joint(frame 0, token 5), log-probs", logits, jref.data, (size_t)b.sc.vocab,
                  ptol(prec, &jref, TOL));
        TEST_ASSERT_ERR(b.sc.tr_joint(s, 1, pred, logits), SR_ERR_ARG, "frame 1");
        TEST_ASSERT_ERR(b.sc.tr_predict(s, state, w->vocab, state, pred), SR_ERR_ARG, "token 63");
        (void)J;
        free(state);
        free(pred);
        free(logits);
        free(top);
        sr_tensor_free(&h);
        sr_tensor_free(&c);
        sr_tensor_free(&jref);
        bclose(&b);
    }
    (void)st_out;
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_predict_joint(void) { predict_joint(NULL); }
static void test_predict_joint_bf16(void) { predict_joint("bf16"); }

/* ---- fastconformer_stream ---- */

/* Row `row` of layer l, slot `slot` of pool p widened to f32 (the CPU table's memory is host
 * memory). */
static void pool_row(const sr_kpool *p, int l, int slot, int row, float *out)
{
    size_t at = sr_kpool_at(p, l, slot, row);
    if (p->dtype == SR_F16) sr_f16_to_f32_n((const uint16_t *)p->data + at, out, (size_t)p->width);
    else memcpy(out, (const float *)p->data + at, (size_t)p->width * sizeof(float));
}

/* The K / V pools of stream s over its last n positions: [n_layers][n][d] each, oldest first. */
static void stream_kv(const fc_stream *s, int n, float *k, float *v)
{
    const sr_kpool *kc = s->b->kc, *vc = s->b->vc;
    int nl = kc->layers, d = kc->width;
    for (int l = 0; l < nl; l++)
        for (int i = 0; i < n; i++) {
            int row = (int)((s->enc_pos - n + i) % kc->rows);
            pool_row(kc, l, s->slot, row, k + ((size_t)l * n + i) * d);
            pool_row(vc, l, s->slot, row, v + ((size_t)l * n + i) * d);
        }
}

/* The conv states of stream s as NeMo's cache_last_time [n_layers][d][K - 1]. */
static void stream_conv(const fc_stream *s, float *out)
{
    const sr_kpool *cc = s->b->cc;
    int nl = cc->layers, K1 = cc->rows, d = cc->width;
    float *row = malloc((size_t)d * sizeof(float));
    for (int l = 0; l < nl; l++)
        for (int t = 0; t < K1; t++) {
            pool_row(cc, l, s->slot, t, row);
            for (int ch = 0; ch < d; ch++) out[((size_t)l * d + ch) * K1 + t] = row[ch];
        }
    free(row);
}

/* linear_k / linear_v of every layer of a fixture, in double, to project NeMo's attention
 * cache (LayerNorm'd layer inputs) into the keys and values srkit caches. */
typedef struct {
    int nl, d;
    double *wk, *bk, *wv, *bv; /* [nl][d][d], [nl][d] */
} kv_proj;

static int kv_proj_load(const char *fixture, int nl, int d, kv_proj *r)
{
    sr_h5 *f = NULL;
    memset(r, 0, sizeof *r);
    if (sr_h5_open(test_fixture(fixture), &f)) return 0;
    r->nl = nl;
    r->d = d;
    r->wk = malloc((size_t)nl * d * d * sizeof(double));
    r->wv = malloc((size_t)nl * d * d * sizeof(double));
    r->bk = malloc((size_t)nl * d * sizeof(double));
    r->bv = malloc((size_t)nl * d * sizeof(double));
    int ok = 1;
    for (int l = 0; l < nl && ok; l++)
        for (int kv = 0; kv < 2 && ok; kv++) {
            char n[128];
            sr_tensor W = {0}, B = {0};
            snprintf(n, sizeof n, "encoder.layers.%d.self_attn.linear_%s.weight", l, kv ? "v" : "k");
            ok &= sr_h5_tensor(f, n, SR_F32, 2, (int64_t[]){d, d}, &W) == SR_OK;
            snprintf(n, sizeof n, "encoder.layers.%d.self_attn.linear_%s.bias", l, kv ? "v" : "k");
            ok &= ok && sr_h5_tensor(f, n, SR_F32, 1, (int64_t[]){d}, &B) == SR_OK;
            for (size_t i = 0; ok && i < (size_t)d * d; i++)
                (kv ? r->wv : r->wk)[(size_t)l * d * d + i] = ((const float *)W.data)[i];
            for (int i = 0; ok && i < d; i++) (kv ? r->bv : r->bk)[(size_t)l * d + i] = ((const float *)B.data)[i];
            sr_tensor_free(&W);
            sr_tensor_free(&B);
        }
    sr_h5_close(f);
    CU_ASSERT(ok);
    return ok;
}

static void kv_proj_free(kv_proj *r)
{
    free(r->wk);
    free(r->wv);
    free(r->bk);
    free(r->bv);
}

/* NeMo's cache rows x [nl][n][d] through linear_k and linear_v (double, rounded at the end). */
static void kv_project(const kv_proj *r, const float *x, int n, float *k, float *v)
{
    int d = r->d;
    for (int l = 0; l < r->nl; l++)
        for (int i = 0; i < n; i++) {
            const float *xr = x + ((size_t)l * n + i) * d;
            for (int o = 0; o < d; o++) {
                const double *wk = r->wk + ((size_t)l * d + o) * d, *wv = r->wv + ((size_t)l * d + o) * d;
                double sk = r->bk[(size_t)l * d + o], sv = r->bv[(size_t)l * d + o];
                for (int c = 0; c < d; c++) {
                    sk += (double)xr[c] * wk[c];
                    sv += (double)xr[c] * wv[c];
                }
                k[((size_t)l * n + i) * d + o] = (float)sk;
                v[((size_t)l * n + i) * d + o] = (float)sv;
            }
        }
}

/* Max |diff| of the stream's K and V over its last n positions vs NeMo's cache [nl, n, d]
 * projected; *kd / *vd each. */
static void kv_compare(const fc_stream *s, const kv_proj *r, const float *nemo, int n, double *kd, double *vd)
{
    size_t sz = (size_t)r->nl * n * r->d + 1;
    float *k = malloc(sz * sizeof(float)), *v = malloc(sz * sizeof(float));
    float *rk = malloc(sz * sizeof(float)), *rv = malloc(sz * sizeof(float));
    stream_kv(s, n, k, v);
    kv_project(r, nemo, n, rk, rv);
    *kd = test_max_abs_diff(k, rk, sz - 1);
    *vd = test_max_abs_diff(v, rv, sz - 1);
    free(k);
    free(v);
    free(rk);
    free(rv);
}


/* Feed the golden mel `piece` frames at a time through the cache-aware path of context c and
 * compare with NeMo's cache_aware_stream_step outputs; greedy tokens too. */
static void stream_mel_case(const sr_model *m, sr_h5 *g, const kv_proj *kvp, const float *mel, int T,
                            int c, int piece, int verbose)
{
    const fc_model *w = m->impl;
    bstream b;
    if (!bopen(m, NULL, CTX[c][0], CTX[c][1], &b)) return;
    fc_stream *s = b.st;
    char base[64], path[96], what[96];
    snprintf(base, sizeof base, "/stream/%d_%d/", CTX[c][0], CTX[c][1]);
    sr_tensor enc, frames, clen, cch1, ctm1, cchl, ctml, toks;
    snprintf(path, sizeof path, "%senc", base);
    int ok = test_golden(g, path, SR_F32, &enc);
    snprintf(path, sizeof path, "%schunk_frames", base);
    ok &= test_golden(g, path, SR_I32, &frames);
    snprintf(path, sizeof path, "%schannel_len", base);
    ok &= test_golden(g, path, SR_I32, &clen);
    snprintf(path, sizeof path, "%scache_channel_1", base);
    ok &= test_golden(g, path, SR_F32, &cch1);
    snprintf(path, sizeof path, "%scache_time_1", base);
    ok &= test_golden(g, path, SR_F32, &ctm1);
    snprintf(path, sizeof path, "%scache_channel_last", base);
    ok &= test_golden(g, path, SR_F32, &cchl);
    snprintf(path, sizeof path, "%scache_time_last", base);
    ok &= test_golden(g, path, SR_F32, &ctml);
    snprintf(path, sizeof path, "%stokens", base);
    ok &= test_golden(g, path, SR_I32, &toks);
    void *dec = NULL;
    sr_hyp hyp = {0};
    ok = ok && sr_dec_rnnt_greedy.open(NULL, &b.sc, &dec) == SR_OK;
    int d = w->d, K1 = w->kernel - 1, nl = w->n_layers;
    float *rows = malloc((size_t)(enc.shape[0] + 64) * d * sizeof(float));
    int nrows = 0, steps_seen = 0, len_ok = 1, overflow = 0;
    for (int f0 = 0; ok && f0 < T; f0 += piece) {
        int n = SR_MIN(piece, T - f0), final = f0 + n >= T;
        int64_t steps0 = s->steps;
        CU_ASSERT_EQUAL_FATAL(fc_stream_feed_mel(s, mel + (size_t)f0 * w->n_mels, n, final), SR_OK);
        if (nrows + fc_frames_held(s) > enc.shape[0] + 64) { overflow = 1; break; }
        if (fc_frames_held(s)) memcpy(rows + (size_t)nrows * d, s->enc_raw, (size_t)fc_frames_held(s) * d * sizeof(float));
        nrows += fc_frames_held(s);
        CU_ASSERT_EQUAL(sr_dec_rnnt_greedy.update(dec, &b.sc, final, &hyp), SR_OK);
        if (s->steps > steps_seen && steps0 < s->steps && s->steps - 1 < clen.shape[0])
            len_ok &= s->chan_len == ((int32_t *)clen.data)[s->steps - 1];
        /* caches after the first step: K / V of the valid positions (NeMo's attention cache
         * rows, newest last, projected by the layer's linear_k / linear_v), the conv states */
        if (steps0 == 0 && s->steps >= 1 && piece == 1) {
            int L0 = ((int32_t *)clen.data)[0];
            double kd, vd;
            kv_compare(s, kvp, cch1.data, L0, &kd, &vd);
            float *tv = malloc((size_t)nl * d * K1 * sizeof(float));
            stream_conv(s, tv);
            if (verbose) {
                printf("\n      [%d, %d] K cache, step 1 (NeMo's projected) max |diff| %.2e (tol %.0e)", CTX[c][0], CTX[c][1], kd, TOL);
                printf("\n      [%d, %d] V cache, step 1 (NeMo's projected) max |diff| %.2e (tol %.0e)", CTX[c][0], CTX[c][1], vd, TOL);
            }
            CU_ASSERT(kd <= TOL && vd <= TOL);
            snprintf(what, sizeof what, "[%d, %d] conv cache, step 1", CTX[c][0], CTX[c][1]);
            if (verbose) check(what, tv, ctm1.data, (size_t)nl * d * K1, TOL);
            else CU_ASSERT(test_max_abs_diff(tv, ctm1.data, (size_t)nl * d * K1) <= TOL);
            free(tv);
        }
        steps_seen = (int)s->steps;
    }
    CU_ASSERT(!overflow);
    CU_ASSERT(len_ok);
    if (ok) {
        CU_ASSERT_EQUAL(s->steps, frames.shape[0]);
        CU_ASSERT_EQUAL(nrows, enc.shape[0]);
        snprintf(what, sizeof what, "[%d, %d] encoder rows (piece %d)", CTX[c][0], CTX[c][1], piece);
        if (nrows == enc.shape[0]) {
            if (verbose) check(what, rows, enc.data, (size_t)nrows * d, TOL);
            else CU_ASSERT(test_max_abs_diff(rows, enc.data, (size_t)nrows * d) <= TOL);
        }
        int L0 = ((int32_t *)clen.data)[clen.shape[0] - 1];
        CU_ASSERT_EQUAL(s->chan_len, L0);
        double kd, vd;
        kv_compare(s, kvp, cchl.data, L0, &kd, &vd);
        float *tv = malloc((size_t)nl * d * K1 * sizeof(float));
        stream_conv(s, tv);
        double td = test_max_abs_diff(tv, ctml.data, (size_t)nl * d * K1);
        if (verbose)
            printf("\n      [%d, %d] caches at the end: K %.2e, V %.2e, conv %.2e (tol %.0e)", CTX[c][0], CTX[c][1], kd, vd, td, TOL);
        CU_ASSERT(kd <= TOL && vd <= TOL && td <= TOL);
        free(tv);
        int same = hyp.n == toks.shape[0] &&
                   !memcmp(hyp.tokens, toks.data, (size_t)hyp.n * sizeof(int32_t));
        if (!same || verbose)
            printf("\n      [%d, %d] greedy tokens: %d (NeMo %d) %s", CTX[c][0], CTX[c][1], hyp.n,
                   (int)toks.shape[0], same ? "identical" : "DIFFERENT");
        CU_ASSERT(same);
    }
    free(rows);
    free(hyp.tokens);
    if (dec) sr_dec_rnnt_greedy.close(dec);
    sr_tensor_free(&enc);
    sr_tensor_free(&frames);
    sr_tensor_free(&clen);
    sr_tensor_free(&cch1);
    sr_tensor_free(&ctm1);
    sr_tensor_free(&cchl);
    sr_tensor_free(&ctml);
    sr_tensor_free(&toks);
    bclose(&b);
}

static void test_stream_parity(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    sr_tensor mel = {0};
    kv_proj kvp;
    if (kv_proj_load("fastconformer/rand.h5", w->n_layers, w->d, &kvp) && test_golden(g, "/mel", SR_F32, &mel))
        for (int c = 0; c < N_CTX; c++) stream_mel_case(m, g, &kvp, mel.data, (int)mel.shape[0], c, 1, 1);
    kv_proj_free(&kvp);
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_stream_split(void)
{
    /* any split of the mel into feeds gives the same steps, rows, caches and tokens */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    sr_tensor mel = {0};
    kv_proj kvp;
    static const int pieces[] = {3, 8, 17, 1000};
    if (kv_proj_load("fastconformer/rand.h5", w->n_layers, w->d, &kvp) && test_golden(g, "/mel", SR_F32, &mel))
        for (int c = 0; c < N_CTX; c++)
            for (size_t p = 0; p < SR_ARRAY_LEN(pieces); p++)
                stream_mel_case(m, g, &kvp, mel.data, (int)mel.shape[0], c, pieces[p], 0);
    kv_proj_free(&kvp);
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_model_free(m);
}


/* Run a whole utterance through the public API; returns the final hypothesis tokens (malloc'ed)
 * and, when tl_n is given, the timeline length. */
static int32_t *run_api(const sr_model *m, const char *strategy, const char *decoder, int L, int R,
                        int beam, const float *a, size_t n, size_t feed, int *n_tok, size_t *tl_n,
                        int **per_entry)
{
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = strategy;
    c.decoder = decoder;
    c.att_context[0] = L;
    c.att_context[1] = R;
    c.beam = beam;
    sr_stream *s = NULL;
    sr_status st = sr_stream_open(m, &c, &s);
    if (st) printf("\n      open: %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    for (size_t i = 0; i < n; i += feed) CU_ASSERT_EQUAL(sr_stream_feed(s, a + i, SR_MIN(feed, n - i)), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    const sr_hypothesis *h = sr_stream_hypothesis(s);
    CU_ASSERT_EQUAL(h->n_stable, h->n_tokens);
    int32_t *out = malloc((size_t)h->n_tokens * sizeof(int32_t) + 1);
    memcpy(out, h->tokens, (size_t)h->n_tokens * sizeof(int32_t));
    *n_tok = h->n_tokens;
    const sr_timeline *tl = sr_stream_timeline(s);
    if (tl_n) *tl_n = tl->n;
    if (per_entry) {
        *per_entry = malloc((tl->n + 1) * sizeof(int));
        for (size_t i = 0; i < tl->n; i++) (*per_entry)[i] = tl->entries[i].n_tokens;
    }
    sr_stream_close(s);
    return out;
}

/* Precision "bf16" may choose another symbol than NeMo only where the reference all but ties:
 * the f32 model (whose tokens equal NeMo's) and the bf16 one run greedy searches in lockstep on
 * the same [L, R] stream, and at the first decision where their argmaxes differ the f32 joint's
 * logits of the two symbols must lie within FC_BF16_TIE: twice the largest joint log-prob error
 * bf16 makes (predict_joint_bf16 prints it: 0.078), as an error of that size on each of the two
 * can swap them. Returns that gap; -1 when no decision differs, INFINITY on a failure. */
#define FC_BF16_TIE 0.16
static double rnnt_first_flip(const sr_model *m32, const sr_model *m16, const float *a, size_t n,
                              int L, int R)
{
    bstream b[2];
    if (!bopen(m32, NULL, L, R, &b[0])) return INFINITY;
    if (!bopen(m16, NULL, L, R, &b[1])) {
        bclose(&b[0]);
        return INFINITY;
    }
    const sr_scorer *sc = &b[0].sc;
    int V = sc->vocab;
    float *state[2], *pred[2], *lg[2];
    for (int j = 0; j < 2; j++) {
        state[j] = calloc((size_t)sc->pred_state, sizeof(float));
        pred[j] = calloc((size_t)sc->pred_dim, sizeof(float));
        lg[j] = calloc((size_t)V, sizeof(float));
    }
    double gap = -1;
    int ok = sc->tr_n_durations == 0; /* the RNN-T fixture: one symbol decision per joint */
    for (int j = 0; ok && j < 2; j++) ok = !b[j].sc.tr_predict(b[j].st, NULL, -1, state[j], pred[j]);
    size_t pos = 0, need = b[0].ck.first_chunk;
    int64_t t = 0;
    for (int final = 0; ok && gap < 0 && !final;) {
        final = n - pos < need;
        size_t len = final ? n - pos : need;
        for (int j = 0; ok && j < 2; j++) ok = !sr_fastconformer_rnnt_ops.process(b[j].st, a + pos, len, final);
        pos += len;
        need = b[0].ck.chunk;
        int64_t T = ok ? sc->tr_frames(b[0].st) : 0;
        ok = ok && T == b[1].sc.tr_frames(b[1].st);
        for (; ok && gap < 0 && t < T; t++) {
            for (int sym = 0, more = 1; ok && more && sym < sc->tr_max_symbols; sym++) {
                int k[2];
                for (int j = 0; ok && j < 2; j++) {
                    ok = !b[j].sc.tr_joint(b[j].st, (int)t, pred[j], lg[j]);
                    k[j] = 0;
                    for (int v = 1; v < V; v++) k[j] = lg[j][v] > lg[j][k[j]] ? v : k[j];
                }
                if (ok && k[0] != k[1]) {
                    gap = (double)lg[0][k[0]] - lg[0][k[1]];
                    printf("\n      [%d, %d] under bf16: frame %lld symbol %d, f32 chose %d; f32 logit gap "
                           "%.3f (tie if <= %.2f)", L, R, (long long)t, k[1], k[0], gap, FC_BF16_TIE);
                    break;
                }
                more = k[0] != sc->blank;
                for (int j = 0; ok && more && j < 2; j++)
                    ok = !b[j].sc.tr_predict(b[j].st, state[j], k[j], state[j], pred[j]);
            }
        }
    }
    for (int j = 0; j < 2; j++) {
        free(state[j]);
        free(pred[j]);
        free(lg[j]);
        bclose(&b[j]);
    }
    CU_ASSERT(ok);
    return ok ? gap : INFINITY;
}

/* prec: NULL (f32: tokens == NeMo's) or "bf16" (the same, except after a reference near-tie,
 * rnnt_first_flip). */
static void audio_tokens(const char *prec)
{
    /* srkit's own mel (within 1.3e-4 of NeMo's) all the way to tokens: equal to NeMo's
     * streaming for every context, and to its offline decode for the offline strategy */
    sr_model *m = test_load_prec(test_fixture("fastconformer/rand.h5"), prec);
    sr_model *m32 = prec ? test_load_model("fastconformer/rand.h5") : NULL;
    sr_h5 *g = golden();
    size_t n;
    float *a = test_golden_audio(g, &n);
    for (int c = 0; a && c <= N_CTX; c++) {
        sr_tensor ref;
        char path[64];
        if (c < N_CTX) snprintf(path, sizeof path, "/stream/%d_%d/tokens", CTX[c][0], CTX[c][1]);
        else snprintf(path, sizeof path, "/offline/tokens");
        if (!test_golden(g, path, SR_I32, &ref)) continue;
        int nt = 0;
        int32_t *t = c < N_CTX ? run_api(m, NULL, NULL, CTX[c][0], CTX[c][1], 0, a, n, n, &nt, NULL, NULL)
                               : run_api(m, "offline", NULL, 70, 0, 0, a, n, n, &nt, NULL, NULL);
        int same = nt == ref.shape[0] && !memcmp(t, ref.data, (size_t)nt * sizeof(int32_t));
        printf("\n      %s: %d tokens from audio, NeMo %d: %s", path, nt, (int)ref.shape[0], same ? "identical" : "DIFFERENT");
        if (!same && m32 && c < N_CTX) {
            double gap = rnnt_first_flip(m32, m, a, n, CTX[c][0], CTX[c][1]);
            same = gap >= 0 && gap <= FC_BF16_TIE;
        }
        CU_ASSERT(same);
        free(t);
        sr_tensor_free(&ref);
    }
    free(a);
    sr_h5_close(g);
    sr_model_free(m);
    sr_model_free(m32);
}

static void test_audio_tokens(void) { audio_tokens(NULL); }
static void test_audio_tokens_bf16(void) { audio_tokens("bf16"); }

static void test_feed_split(void)
{
    /* the engine's chunking: any feed size gives the same timeline (token counts per entry) */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    size_t n;
    float *a = test_golden_audio(g, &n);
    static const size_t feeds[] = {1, 160, 1279, 1280, 4000};
    for (int c = 0; a && c < 4; c++) {
        int n0 = 0, *e0 = NULL;
        size_t tl0 = 0;
        int32_t *t0 = run_api(m, NULL, NULL, CTX[c][0], CTX[c][1], 0, a, n, n, &n0, &tl0, &e0);
        for (size_t f = 0; f < SR_ARRAY_LEN(feeds); f++) {
            int n1 = 0, *e1 = NULL;
            size_t tl1 = 0;
            int32_t *t1 = run_api(m, NULL, NULL, CTX[c][0], CTX[c][1], 0, a, n, feeds[f], &n1, &tl1, &e1);
            CU_ASSERT(n1 == n0 && !memcmp(t1, t0, (size_t)n0 * sizeof(int32_t)));
            /* one feed of everything runs every chunk inside that feed: same entries */
            CU_ASSERT_EQUAL(tl1, tl0);
            if (tl1 == tl0) CU_ASSERT(!memcmp(e1, e0, tl0 * sizeof(int)));
            free(t1);
            free(e1);
        }
        /* beam search: deterministic and split-invariant too */
        int nb0 = 0, nb1 = 0;
        int32_t *b0 = run_api(m, NULL, "rnnt_beam", CTX[c][0], CTX[c][1], 4, a, n, n, &nb0, NULL, NULL);
        int32_t *b1 = run_api(m, NULL, "rnnt_beam", CTX[c][0], CTX[c][1], 4, a, n, 1279, &nb1, NULL, NULL);
        CU_ASSERT(nb0 == nb1 && !memcmp(b0, b1, (size_t)nb0 * sizeof(int32_t)));
        CU_ASSERT(nb0 > 0);
        free(b0);
        free(b1);
        free(t0);
        free(e0);
    }
    free(a);
    sr_h5_close(g);
    sr_model_free(m);
}

/* Sequences of the batching test: context [L, R] (steps of R + 1 rows), first row in the
 * shared input rows. */
typedef struct { int L, R, first; } layer_seq;

/* `steps` cache-aware steps of the sequences q[0 .. n) through fc_layers, all sequences of a
 * step in one call (n = 1: alone), each its own slot of pools sized for all of them; the rows
 * each sequence gets back go to out[i] (its steps one after another). Returns 1 if every call
 * succeeded. */
static int layers_run(const fc_model *w, const float *X, const layer_seq *q, int n, int f16, int steps,
                      float **out)
{
    const sr_kernels *k = w->k;
    int d = w->d, rows = 0, kvrows = 0, store = 1, grows = 0;
    for (int i = 0; i < n; i++) {
        rows += q[i].R + 1;
        kvrows = SR_MAX(kvrows, q[i].L + q[i].R + 1);
        store = SR_MAX(store, SR_MAX(q[i].L, q[i].R + 1));
        grows += q[i].L;
    }
    sr_kpool *kc = NULL, *vc = NULL, *cc = NULL, *kw = NULL, *vw = NULL;
    sr_dtype dt = f16 ? SR_F16 : SR_F32;
    fc_work ws = {0};
    float *x = k->alloc((size_t)rows * d * sizeof(float));
    int ok = x && !sr_kpool_create(k, dt, w->n_layers, n, f16 ? store : kvrows, d, &kc) &&
             !sr_kpool_create(k, dt, w->n_layers, n, f16 ? store : kvrows, d, &vc) &&
             !sr_kpool_create(k, dt, w->n_layers, n, w->kernel - 1, d, &cc) &&
             (!f16 || (!sr_kpool_create(k, SR_F32, 1, n, kvrows, d, &kw) && !sr_kpool_create(k, SR_F32, 1, n, kvrows, d, &vw))) &&
             !fc_work_init(&ws, w, rows, 0, f16 ? grows : 0);
    fc_mask mk[2];
    int row0[3], slot[2];
    int64_t pos[2];
    for (int i = 0; i < n; i++) {
        mk[i] = (fc_mask){.left = q[i].L, .right = q[i].R, .style = w->att_style};
        slot[i] = n - 1 - i; /* slots in the other order than rows */
    }
    sr_kbatch b = {.n_seq = n, .row0 = row0, .slot = slot, .pos = pos};
    fc_seqs sq = {.b = &b, .mk = mk, .kc = kc, .vc = vc, .conv = cc, .kw = kw, .vw = vw};
    for (int t = 0; ok && t < steps; t++) {
        row0[0] = 0;
        for (int i = 0; i < n; i++) {
            int T = q[i].R + 1;
            pos[i] = (int64_t)t * T;
            memcpy(x + (size_t)row0[i] * d, X + (size_t)(q[i].first + t * T) * d, (size_t)T * d * sizeof(float));
            row0[i + 1] = row0[i] + T;
        }
        sr_status st = fc_layers(w, &ws, x, &sq);
        if (st) printf("\n      fc_layers: %s", sr_last_error());
        ok = st == SR_OK;
        for (int i = 0; ok && i < n; i++)
            memcpy(out[i] + (size_t)pos[i] * d, x + (size_t)row0[i] * d, (size_t)(q[i].R + 1) * d * sizeof(float));
    }
    fc_work_free(w, &ws);
    sr_kpool_free(k, kc);
    sr_kpool_free(k, vc);
    sr_kpool_free(k, cc);
    sr_kpool_free(k, kw);
    sr_kpool_free(k, vw);
    if (x) k->free(x);
    return ok;
}

static void test_batched_layers(void)
{
    /* the row-independence of the encoder: two streams of different contexts, positions and
     * slots stepped together through one fc_layers call per step compute, bit for bit, what
     * each computes alone (f32 pools attended in place, and f16 stores staged through f32
     * working pools) */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    sr_tensor mel;
    if (test_golden(g, "/mel", SR_F32, &mel)) {
        int T = (int)mel.shape[0], n = 0, d = w->d;
        float *X = malloc((size_t)fc_subsample_len(T) * d * sizeof(float));
        CU_ASSERT_EQUAL_FATAL(fc_subsample(w, mel.data, T, X, &n), SR_OK);
        static const layer_seq q[2] = {{4, 1, 0}, {6, 2, 3}};
        int steps = 6; /* rows 0..11 and 3..20 of the 26: both left contexts roll over */
        for (int f16 = 0; f16 < 2; f16++) {
            float *solo[2], *both[2];
            for (int i = 0; i < 2; i++) {
                solo[i] = calloc((size_t)steps * (q[i].R + 1) * d, sizeof(float));
                both[i] = calloc((size_t)steps * (q[i].R + 1) * d, sizeof(float));
            }
            int ok = layers_run(w, X, &q[0], 1, f16, steps, &solo[0]) && layers_run(w, X, &q[1], 1, f16, steps, &solo[1]) &&
                     layers_run(w, X, q, 2, f16, steps, both);
            CU_ASSERT(ok);
            int same = ok;
            for (int i = 0; i < 2; i++)
                same &= !memcmp(solo[i], both[i], (size_t)steps * (q[i].R + 1) * d * sizeof(float));
            printf("\n      %s pools: [4, 1] and [6, 2] stepped together vs alone, %d steps: %s", f16 ? "f16" : "f32", steps,
                   same ? "bit-identical" : "DIFFERENT");
            CU_ASSERT(same);
            for (int i = 0; i < 2; i++) {
                free(solo[i]);
                free(both[i]);
            }
        }
        free(X);
    }
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_reset_memory(void)
{
    /* reset reproduces a fresh stream; a long stream keeps constant state bytes */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    size_t n;
    float *a = test_golden_audio(g, &n);
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.record_timeline = 0;
    c.att_context[0] = 70;
    c.att_context[1] = 0;
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &c, &s), SR_OK);
    int32_t first[4096];
    int nf = 0;
    for (int pass = 0; a && pass < 2; pass++) {
        CU_ASSERT_EQUAL(sr_stream_feed(s, a, n), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
        const sr_hypothesis *h = sr_stream_hypothesis(s);
        if (!pass) {
            nf = SR_MIN(h->n_tokens, 4096);
            memcpy(first, h->tokens, (size_t)nf * sizeof(int32_t));
        } else {
            CU_ASSERT(h->n_tokens == nf && !memcmp(first, h->tokens, (size_t)nf * sizeof(int32_t)));
        }
        sr_stream_reset(s);
    }
    /* 60 s through the backend and greedy decoder: their state does not grow after the first
     * seconds (the engine's hypothesis and timeline are the transcript, not state) */
    bstream b;
    void *dec = NULL;
    sr_hyp hyp = {0};
    size_t s10 = 0, s60 = 0;
    if (a && bopen(m, NULL, 70, 0, &b) && sr_dec_rnnt_greedy.open(NULL, &b.sc, &dec) == SR_OK) {
        size_t ch = b.ck.chunk, pos = b.ck.first_chunk;
        CU_ASSERT_EQUAL(sr_fastconformer_rnnt_ops.process(b.st, a, pos, 0), SR_OK);
        CU_ASSERT_EQUAL(sr_dec_rnnt_greedy.update(dec, &b.sc, 0, &hyp), SR_OK);
        for (int64_t done = (int64_t)pos; done < 60 * 16000; done += (int64_t)ch) {
            if (pos + ch > n) pos = 0;
            CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.process(b.st, a + pos, ch, 0), SR_OK);
            CU_ASSERT_EQUAL_FATAL(sr_dec_rnnt_greedy.update(dec, &b.sc, 0, &hyp), SR_OK);
            pos += ch;
            size_t bytes = bbytes(&b) + sr_dec_rnnt_greedy.state_bytes(dec);
            if (done < 10 * 16000) s10 = bytes;
            s60 = bytes;
        }
        printf("\n      backend + decoder state after 10 s %zu bytes, after 60 s %zu", s10, s60);
        CU_ASSERT_EQUAL(s10, s60);
        /* the caches themselves: K and V of 70 + 1 positions, K - 1 conv rows per layer */
        const fc_model *w = m->impl;
        size_t caches = (size_t)w->n_layers * (2 * 71 + w->kernel - 1) * w->d * sizeof(float);
        CU_ASSERT(s60 > caches);
        sr_dec_rnnt_greedy.close(dec);
        bclose(&b);
    }
    free(hyp.tokens);
    sr_stream_close(s);
    free(a);
    sr_h5_close(g);
    sr_model_free(m);
}

/* Tokens of the whole golden audio through the public API with stream.cache_dtype. */
static int32_t *run_cache_dtype(const sr_model *m, int L, int R, const char *cache_dtype, const float *a,
                                size_t n, int *n_tok)
{
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.att_context[0] = L;
    c.att_context[1] = R;
    c.cache_dtype = cache_dtype;
    sr_stream *s = NULL;
    *n_tok = 0;
    if (sr_stream_open(m, &c, &s)) return NULL;
    int32_t *out = NULL;
    if (!sr_stream_feed(s, a, n) && !sr_stream_finish(s)) {
        const sr_hypothesis *h = sr_stream_hypothesis(s);
        out = malloc((size_t)h->n_tokens * sizeof(int32_t) + 1);
        memcpy(out, h->tokens, (size_t)h->n_tokens * sizeof(int32_t));
        *n_tok = h->n_tokens;
    }
    sr_stream_close(s);
    return out;
}

/* Largest |a - b| over n floats, with the largest |b| in *ref_max. */
static double diff_and_max(const float *a, const float *b, size_t n, double *ref_max)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        r = fmax(r, fabs((double)b[i]));
    }
    *ref_max = r;
    return d;
}

#define F16_REL_TOL 4e-3 /* encoder rows and caches vs the f32-cache run, relative to their max |x| */

static void test_f16_caches(void)
{
    /* stream.cache_dtype "f16": the cache pools (projected K / V, conv states) take half their
     * f32 bytes, the encoder rows and the caches stay within F16_REL_TOL x max |x| of the
     * f32-cache run (f16 rounding is 2^-11 relative per stored value), and the greedy tokens
     * from audio are identical (RNN-T and TDT models, every context) */
    sr_model *m = test_load_model("fastconformer/rand.h5"), *mt = test_load_model("fastconformer/rand_tdt.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    int d = w->d, nl = w->n_layers, K1 = w->kernel - 1;
    sr_tensor mel;
    double worst_rows = 0, worst_cache = 0;
    if (test_golden(g, "/mel", SR_F32, &mel)) {
        int T = (int)mel.shape[0];
        for (int c = 0; c < N_CTX; c++) {
            bstream a, b;
            if (!bopen(m, NULL, CTX[c][0], CTX[c][1], &a)) continue;
            if (!bopen_dtype(m, NULL, CTX[c][0], CTX[c][1], "f16", &b)) {
                bclose(&a);
                continue;
            }
            fc_stream *sa = a.st, *sb = b.st;
            size_t ba = bbytes(&a), bb = bbytes(&b);
            /* f32: K / V rings of L + R + 1 rows per layer, attended in place. f16: stores of
             * max(L, R + 1) rows per layer at 2 bytes, f32 working pools of one layer and the
             * widening scratch (L zero queries and outputs, their ranges) */
            const fc_batch *xa = sa->b, *xb = sb->b;
            int L = xa->csize, R = CTX[c][1], rs = SR_MAX(L, R + 1);
            size_t pools32 = xa->kc->bytes + xa->vc->bytes + xa->cc->bytes;
            size_t stores16 = xb->kc->bytes + xb->vc->bytes + xb->cc->bytes, work = xb->kw->bytes + xb->vw->bytes;
            size_t staging = 2 * (size_t)L * d * sizeof(float) + 2 * (size_t)L * sizeof(int64_t);
            CU_ASSERT(xb->cfg.f16 && xb->kc->dtype == SR_F16 && xb->vc->dtype == SR_F16 && xb->cc->dtype == SR_F16 &&
                      xb->kw->dtype == SR_F32 && xb->vw->dtype == SR_F32);
            CU_ASSERT(!xa->cfg.f16 && xa->kc->dtype == SR_F32 && xa->vc->dtype == SR_F32 && xa->cc->dtype == SR_F32 &&
                      !xa->kw && !xa->vw);
            CU_ASSERT_EQUAL(pools32, (size_t)nl * (2 * (L + R + 1) + K1) * d * sizeof(float));
            CU_ASSERT_EQUAL(stores16, (size_t)nl * (2 * rs + K1) * d * sizeof(uint16_t));
            CU_ASSERT_EQUAL(work, 2 * (size_t)(L + R + 1) * d * sizeof(float));
            CU_ASSERT_EQUAL(xb->ws.bytes - xa->ws.bytes, staging);
            CU_ASSERT_EQUAL(ba + stores16 + work + staging, bb + pools32);
            CU_ASSERT_EQUAL(fc_stream_feed_mel(sa, mel.data, T, 1), SR_OK);
            CU_ASSERT_EQUAL(fc_stream_feed_mel(sb, mel.data, T, 1), SR_OK);
            CU_ASSERT_EQUAL(fc_frames_held(sa), fc_frames_held(sb));
            CU_ASSERT_EQUAL(sa->chan_len, sb->chan_len);
            double rmax, kmax, vmax, tmax;
            double dr = diff_and_max(sb->enc_raw, sa->enc_raw, (size_t)SR_MIN(fc_frames_held(sa), fc_frames_held(sb)) * d, &rmax);
            int n = sa->chan_len;
            size_t nkv = (size_t)nl * n * d, nconv = (size_t)nl * K1 * d;
            float *ka = malloc((4 * nkv + 2 * nconv + 1) * sizeof(float));
            float *va = ka + nkv, *kb = va + nkv, *vb = kb + nkv, *ta = vb + nkv, *tb = ta + nconv;
            stream_kv(sa, n, ka, va);
            stream_kv(sb, n, kb, vb);
            stream_conv(sa, ta);
            stream_conv(sb, tb);
            double dk = diff_and_max(kb, ka, nkv, &kmax), dv = diff_and_max(vb, va, nkv, &vmax);
            double dt = diff_and_max(tb, ta, nconv, &tmax);
            free(ka);
            printf("\n      [%d, %d] f16 caches: state %zu -> %zu B; vs f32 caches: rows %.2e (max |x| %.2f), "
                   "K %.2e (%.2f), V %.2e (%.2f), conv %.2e (%.2f)", CTX[c][0], CTX[c][1], ba, bb, dr, rmax,
                   dk, kmax, dv, vmax, dt, tmax);
            CU_ASSERT(dr <= F16_REL_TOL * rmax && dk <= F16_REL_TOL * kmax && dv <= F16_REL_TOL * vmax &&
                      dt <= F16_REL_TOL * tmax);
            worst_rows = fmax(worst_rows, dr / rmax);
            worst_cache = fmax(worst_cache, fmax(fmax(dk / kmax, dv / vmax), dt / tmax));
            /* reset clears the f16 caches: the same rows again */
            float *first = malloc((size_t)fc_frames_held(sb) * d * sizeof(float) + 1);
            int nfirst = fc_frames_held(sb);
            memcpy(first, sb->enc_raw, (size_t)nfirst * d * sizeof(float));
            sr_fastconformer_rnnt_ops.reset(sb);
            CU_ASSERT_EQUAL(fc_stream_feed_mel(sb, mel.data, T, 1), SR_OK);
            CU_ASSERT(fc_frames_held(sb) == nfirst && !memcmp(first, sb->enc_raw, (size_t)nfirst * d * sizeof(float)));
            free(first);
            bclose(&a);
            bclose(&b);
        }
        printf("\n      worst relative difference: rows %.2e, caches %.2e (tol %.0e)", worst_rows, worst_cache, F16_REL_TOL);
    }
    size_t n;
    float *au = test_golden_audio(g, &n);
    for (int c = 0; au && c < N_CTX; c++)
        for (int k = 0; k < 2; k++) {
            const sr_model *mm = k ? mt : m;
            int na = 0, nb = 0;
            int32_t *ta = run_cache_dtype(mm, CTX[c][0], CTX[c][1], "f32", au, n, &na);
            int32_t *tb = run_cache_dtype(mm, CTX[c][0], CTX[c][1], "f16", au, n, &nb);
            int same = ta && tb && na == nb && na > 0 && !memcmp(ta, tb, (size_t)na * sizeof(int32_t));
            if (!same) {
                printf("\n      %s [%d, %d] tokens f32 %d, f16 %d DIFFERENT:", k ? "TDT" : "RNN-T", CTX[c][0], CTX[c][1], na, nb);
                for (int i = 0; i < SR_MAX(na, nb); i++)
                    if (i >= na || i >= nb || ta[i] != tb[i]) {
                        printf(" first at %d", i);
                        break;
                    }
            }
            CU_ASSERT(same);
            free(ta);
            free(tb);
        }
    /* bad values: the config parser names the key and its choices; the API names the backend */
    sr_config *cfg = NULL;
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"x\", \"model\": {\"path\": \"-\"}, \"data\": {\"path\": \"-\"}, "
                                    "\"stream\": {\"cache_dtype\": \"f8\"}}", "test", &cfg),
                    SR_ERR_ARG, "stream.cache_dtype: \"f8\" is not one of f32, f16, bf16");
    sr_config_free(cfg);
    sr_stream_config sc;
    sr_stream_config_init(&sc);
    sc.cache_dtype = "bf16";
    sr_stream *s = NULL;
    TEST_ASSERT_ERR(sr_stream_open(m, &sc, &s), SR_ERR_ARG, "stream.cache_dtype: \"bf16\" unknown for fastconformer_rnnt");
    free(au);
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_model_free(m);
    sr_model_free(mt);
}

static void test_nemotron_state(void)
{
    /* State of a lone stream (its own state and its batch context of one) at the nemotron-0.6b
     * shape (24 x 1024, 8 heads, d_ff 4096, 128 mels, 256 subsampling channels, LSTM 2 x 640,
     * joint 640) without its 2.5 GB of weights: what a stream allocates depends only on the
     * dimensions, so the small model's view is given the Nemotron dimensions (and a 128-mel
     * front end) and streams are opened, not run, on it. The
     * caches are exactly the pools: projected K and V of L + R + 1 positions and K - 1 conv
     * rows per layer (f32, or f16 at half the bytes), plus the LSTM state; the rest is
     * per-step scratch. */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    fc_model big = *(const fc_model *)m->impl;
    big.d = 1024;
    big.n_layers = 24;
    big.n_heads = 8;
    big.dk = 128;
    big.d_ff = 4096;
    big.kernel = 9;
    big.n_mels = 128;
    big.sub_ch = 256;
    big.sub_f3 = 17;
    big.vocab = big.blank = 1024;
    big.n_out = 1025;
    big.pred_hidden = 640;
    big.pred_layers = 2;
    big.joint_hidden = 640;
    static const int nctx[4][2] = {{70, 0}, {70, 1}, {70, 6}, {70, 13}};
    big.n_ctx = 4;
    memcpy(big.ctx, nctx, sizeof nctx);
    sr_mel_config mc;
    sr_mel_config_init(&mc, SR_MEL_NEMO);
    mc.n_fft = 512;
    mc.win_length = 400;
    mc.hop_length = 160;
    mc.n_mels = 128;
    mc.normalize = SR_NORM_NONE;
    CU_ASSERT_EQUAL_FATAL(sr_mel_create(&mc, &big.mel), SR_OK);
    sr_model fake = *m;
    fake.impl = &big;
    size_t lstm = 2 * (size_t)big.pred_layers * big.pred_hidden * sizeof(float);
    for (int c = 0; c < 4; c++) {
        bstream b;
        if (!bopen(&fake, NULL, nctx[c][0], nctx[c][1], &b)) continue;
        fc_stream *s = b.st;
        CU_ASSERT_EQUAL(s->b->csize, 70);
        CU_ASSERT_EQUAL(b.sc.pred_state * sizeof(float), lstm);
        size_t kv = (size_t)2 * 24 * (70 + nctx[c][1] + 1) * 1024 * 4, conv = (size_t)24 * 8 * 1024 * 4;
        size_t pools = s->b->kc->bytes + s->b->vc->bytes + s->b->cc->bytes;
        size_t total = bbytes(&b);
        printf("\n      nemotron shape [%d, %2d]: caches + LSTM %zu B (K/V %zu, conv %zu), stream total %zu B "
               "(scratch: workspace %zu, subsampling %zu)", nctx[c][0], nctx[c][1], pools + lstm, kv, conv, total,
               s->b->ws.bytes, s->b->sub_scratch_n * sizeof(float));
        CU_ASSERT_EQUAL(pools, kv + conv);
        CU_ASSERT(total >= pools);
        /* stream.cache_dtype "f16": K / V stores of max(L, R + 1) = 70 rows and the conv
         * states at 2 bytes, plus one layer's f32 working K / V of L + R + 1 rows and the
         * widening scratch of L rows */
        bstream h;
        if (bopen_dtype(&fake, NULL, nctx[c][0], nctx[c][1], "f16", &h)) {
            size_t total16 = bbytes(&h);
            size_t stores = (size_t)24 * (2 * 70 + 8) * 1024 * 2, work = (size_t)2 * (70 + nctx[c][1] + 1) * 1024 * 4;
            size_t staging = (size_t)2 * 70 * 1024 * 4 + 2 * 70 * sizeof(int64_t);
            printf("\n        f16 caches: caches + LSTM %zu B (+ f32 working K/V %zu, staging %zu), stream total %zu B",
                   stores + lstm, work, staging, total16);
            CU_ASSERT_EQUAL(total16 + pools, total + stores + work + staging);
            bclose(&h);
        }
        bclose(&b);
    }
    sr_mel_free(big.mel);
    sr_model_free(m);
}

/* ---- fastconformer_local ---- */

static float *tiled_mel(sr_h5 *g, int reps, int *T, int n_mels)
{
    sr_tensor mel;
    if (!test_golden(g, "/mel", SR_F32, &mel)) return NULL;
    int t0 = (int)mel.shape[0];
    float *out = malloc((size_t)t0 * reps * n_mels * sizeof(float));
    for (int r = 0; r < reps; r++) memcpy(out + (size_t)r * t0 * n_mels, mel.data, (size_t)t0 * n_mels * sizeof(float));
    *T = t0 * reps;
    sr_tensor_free(&mel);
    return out;
}

static void test_subsample_pieces(void)
{
    /* the offline subsampling runs in pieces of FC_SUB_PIECE rows (scratch independent of T):
     * equal to one pass over the whole mel at every length around the piece boundaries, bit for
     * bit (every op computes each output row from its own inputs only) */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    int T = 0;
    float *mel = tiled_mel(g, 20, &T, w->n_mels);
    const int P8 = 8 * FC_SUB_PIECE;
    const int lens[] = {P8, P8 + 1, P8 + 2, P8 + 8, P8 + 9, P8 + 10, 2 * P8 + 1, 2 * P8 + 2, 2 * P8 + 7,
                        2 * P8 + 16, 3 * P8 + 5, T};
    double worst = 0;
    int rows_ok = 1;
    for (size_t i = 0; mel && i < SR_ARRAY_LEN(lens); i++) {
        int t = SR_MIN(lens[i], T), n1 = 0, n2 = 0, n = fc_subsample_len(t);
        float *a = malloc((size_t)n * w->d * sizeof(float)), *b = malloc((size_t)n * w->d * sizeof(float));
        float *scratch = malloc(fc_subsample_scratch(w, t) * sizeof(float));
        CU_ASSERT_EQUAL(fc_subsample(w, mel, t, a, &n1), SR_OK);
        CU_ASSERT_EQUAL(fc_subsample_into(w, 1, mel, t, b, &n2, scratch), SR_OK);
        rows_ok &= n1 == n && n2 == n;
        if (n1 == n && n2 == n) worst = fmax(worst, test_max_abs_diff(a, b, (size_t)n * w->d));
        free(a);
        free(b);
        free(scratch);
    }
    printf("\n      pieces of %d rows vs one pass, %d lengths up to %d frames: rows equal, max |diff| %.2e",
           FC_SUB_PIECE, (int)SR_ARRAY_LEN(lens), T, worst);
    CU_ASSERT(rows_ok);
    CU_ASSERT(worst == 0);
    /* a batch of images (the steps of several streams, run_rounds) == each image alone, bit for
     * bit: 4 images of 25 frames (a [70,1] step) from different places of the mel */
    if (mel && T >= 100) {
        enum { NI = 4, TI = 25 };
        int n = fc_subsample_len(TI), nb = 0, n1 = 0;
        size_t per = (size_t)TI * w->n_mels, rows = (size_t)n * w->d;
        float *imgs = malloc(NI * per * sizeof(float)), *xb = malloc(NI * rows * sizeof(float));
        float *x1 = malloc(rows * sizeof(float));
        float *sb = malloc(NI * fc_subsample_scratch(w, TI) * sizeof(float));
        float *s1 = malloc(fc_subsample_scratch(w, TI) * sizeof(float));
        CU_ASSERT_FATAL(imgs && xb && x1 && sb && s1);
        for (int i = 0; i < NI; i++) memcpy(imgs + i * per, mel + (size_t)(i * 23) * w->n_mels, per * sizeof(float));
        CU_ASSERT_EQUAL(fc_subsample_into(w, NI, imgs, TI, xb, &nb, sb), SR_OK);
        CU_ASSERT_EQUAL(nb, n);
        for (int i = 0; i < NI; i++) {
            CU_ASSERT_EQUAL(fc_subsample_into(w, 1, imgs + i * per, TI, x1, &n1, s1), SR_OK);
            CU_ASSERT_EQUAL(memcmp(x1, xb + i * rows, rows * sizeof(float)), 0);
        }
        free(imgs); free(xb); free(x1); free(sb); free(s1);
    }
    free(mel);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_local_parity(void)
{
    /* banded attention vs the plain reference: attention over every key with the band as a
     * regular-style mask (the two must give the same key ranges, so the same rows) */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    fc_model ref = *w;
    ref.att_style = FC_STYLE_REGULAR;
    int T = 0;
    float *mel = tiled_mel(g, 6, &T, w->n_mels);
    static const int win[][2] = {{5, 5}, {16, 16}, {70, 3}, {128, 128}};
    for (size_t i = 0; mel && i < SR_ARRAY_LEN(win); i++) {
        float *a = NULL, *b = NULL;
        int na = 0, nb = 0;
        CU_ASSERT_EQUAL(fc_encode_offline(w, mel, T, win[i], 1, &a, &na, NULL), SR_OK);
        CU_ASSERT_EQUAL(fc_encode_offline(&ref, mel, T, win[i], 0, &b, &nb, NULL), SR_OK);
        char what[64];
        snprintf(what, sizeof what, "local [%d, %d], %d frames", win[i][0], win[i][1], na);
        CU_ASSERT_EQUAL(na, nb);
        if (a && b && na == nb) check(what, a, b, (size_t)na * w->d, TOL);
        if (a) w->k->free(a);
        if (b) w->k->free(b);
    }
    free(mel);
    sr_h5_close(g);
    sr_model_free(m);
}

static void test_local_memory(void)
{
    /* the offline memory (workspace, the K / V pool of the utterance, the rows) grows linearly
     * in T for both; full attention also projects 2T - 1 relative positions, the band only
     * its window */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    int T = 0;
    float *mel = tiled_mel(g, 16, &T, w->n_mels);
    static const int win[2] = {16, 16}, full[2] = {-1, -1};
    size_t lb[2] = {0, 0}, fb[2] = {0, 0};
    for (int k = 0; mel && k < 2; k++) {
        int t = k ? T : T / 2, n = 0;
        float *o = NULL;
        CU_ASSERT_EQUAL(fc_encode_offline(w, mel, t, win, 1, &o, &n, &lb[k]), SR_OK);
        if (o) w->k->free(o);
        CU_ASSERT_EQUAL(fc_encode_offline(w, mel, t, full, 0, &o, &n, &fb[k]), SR_OK);
        if (o) w->k->free(o);
    }
    double rl = (double)lb[1] / (double)lb[0], rf = (double)fb[1] / (double)fb[0];
    printf("\n      workspace T -> 2T: local [16, 16] %zu -> %zu (x%.3f), full %zu -> %zu (x%.3f)",
           lb[0], lb[1], rl, fb[0], fb[1], rf);
    CU_ASSERT(rl <= 2.1);
    CU_ASSERT(lb[1] < fb[1]);
    free(mel);
    sr_h5_close(g);
    sr_model_free(m);
}

/* ---- fastconformer_tdt ---- */

static sr_h5 *golden_tdt(void) { return test_open_golden("fastconformer/golden_tdt.h5"); }

/* The backend's scorer wrapped so that every joint evaluation rnnt_greedy makes (one step of
 * its TDT loop) is recorded: frame t[i], logits lg[i * nl ..] (tokens + blank, then durations). */
typedef struct {
    sr_scorer in;
    int n, cap, nl;
    int *t;
    float *lg;
} rec_scorer;

static int rec_frames(void *ctx)
{
    rec_scorer *r = ctx;
    return r->in.tr_frames(r->in.ctx);
}

static sr_status rec_predict(void *ctx, const float *si, int32_t tok, float *so, float *po)
{
    rec_scorer *r = ctx;
    return r->in.tr_predict(r->in.ctx, si, tok, so, po);
}

static sr_status rec_joint(void *ctx, int t, const float *pred, float *logits)
{
    rec_scorer *r = ctx;
    sr_status st = r->in.tr_joint(r->in.ctx, t, pred, logits);
    if (st) return st;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        int *tt = realloc(r->t, (size_t)cap * sizeof(int));
        if (tt) r->t = tt;
        float *l = realloc(r->lg, (size_t)cap * r->nl * sizeof(float));
        if (l) r->lg = l;
        if (!tt || !l) return SR_ERR_NOMEM;
        r->cap = cap;
    }
    r->t[r->n] = t;
    memcpy(r->lg + (size_t)r->n * r->nl, logits, (size_t)r->nl * sizeof(float));
    r->n++;
    return SR_OK;
}

static void rec_wrap(rec_scorer *r, const sr_scorer *in, sr_scorer *out)
{
    memset(r, 0, sizeof *r);
    r->in = *in;
    r->nl = in->vocab + in->tr_n_durations;
    *out = *in;
    out->ctx = r;
    out->tr_frames = rec_frames;
    out->tr_predict = rec_predict;
    out->tr_joint = rec_joint;
    /* the batched forms would bypass the recording: the decoders then call the solo forms */
    out->tr_predict_batch = NULL;
    out->tr_joint_batch = NULL;
}

static int argmax_f(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Tokens emitted by steps [0, n) of logits lg [n, V + nd] at frames t: the non-blank argmaxes
 * with their frame and duration (NeMo's hypothesis timestamp and token_duration). Returns
 * their count; tok / ts / du have room for n. */
static int tdt_emitted(const float *lg, const int *t, int n, const sr_scorer *sc, int32_t *tok,
                       int32_t *ts, int32_t *du)
{
    int V = sc->vocab, nd = sc->tr_n_durations, nl = V + nd, k = 0;
    for (int i = 0; i < n; i++) {
        int a = argmax_f(lg + (size_t)i * nl, V);
        if (a == sc->blank) continue;
        tok[k] = a;
        ts[k] = t[i];
        du[k] = sc->tr_durations[argmax_f(lg + (size_t)i * nl + V, nd)];
        k++;
    }
    return k;
}

static int same_i32(const int32_t *a, const sr_tensor *ref, int n)
{
    return n == ref->shape[0] && (!n || !memcmp(a, ref->data, (size_t)n * sizeof(int32_t)));
}

static void test_tdt_offline(void)
{
    sr_model *m = test_load_model("fastconformer/rand_tdt.h5");
    sr_h5 *g = golden(), *gt = golden_tdt();
    const fc_model *w = m->impl;
    bstream b;
    sr_tensor mel = {0}, st = {0}, sl = {0}, tok = {0}, ts = {0}, du = {0};
    CU_ASSERT_EQUAL(w->n_durations, 5);
    int ok = bopen(m, "offline", 70, 0, &b);
    ok = ok && test_golden(g, "/mel", SR_F32, &mel) && test_golden(gt, "/offline/steps_t", SR_I32, &st) &&
         test_golden(gt, "/offline/steps_logits", SR_F32, &sl) && test_golden(gt, "/offline/tokens", SR_I32, &tok) &&
         test_golden(gt, "/offline/timestamps", SR_I32, &ts) && test_golden(gt, "/offline/durations", SR_I32, &du);
    if (ok) {
        rec_scorer r;
        sr_scorer sc;
        rec_wrap(&r, &b.sc, &sc);
        int V = sc.vocab, nd = sc.tr_n_durations, nl = r.nl, S = (int)st.shape[0];
        CU_ASSERT_EQUAL_FATAL(sl.shape[1], nl);
        /* the fixture exercises every path of the TDT loop: NeMo's steps have blanks, tokens,
         * tokens of duration 0 (a second step on the same frame) and every duration */
        int nblank = 0, ntok = 0, ntok0 = 0, seen[16] = {0}, kinds = 0;
        for (int i = 0; i < S; i++) {
            const float *l = (const float *)sl.data + (size_t)i * nl;
            int k = argmax_f(l, V), d = sc.tr_durations[argmax_f(l + V, nd)];
            nblank += k == sc.blank;
            ntok += k != sc.blank;
            ntok0 += k != sc.blank && d == 0;
            kinds += !seen[argmax_f(l + V, nd)]++;
        }
        printf("\n      NeMo GreedyTDTInfer: %d steps, %d blank, %d token (%d of duration 0), %d of %d durations",
               S, nblank, ntok, ntok0, kinds, nd);
        CU_ASSERT(nblank >= 3 && ntok >= 3 && ntok0 >= 1 && kinds == nd);
        void *dec = NULL;
        sr_hyp hyp = {0};
        CU_ASSERT_EQUAL_FATAL(sr_dec_rnnt_greedy.open(NULL, &sc, &dec), SR_OK);
        CU_ASSERT_EQUAL(fc_stream_feed_mel(b.st, mel.data, (int)mel.shape[0], 1), SR_OK);
        CU_ASSERT_EQUAL(sr_dec_rnnt_greedy.update(dec, &sc, 1, &hyp), SR_OK);
        /* step by step: the same frames, the same logits */
        CU_ASSERT_EQUAL(r.n, S);
        if (r.n == S) {
            CU_ASSERT(!memcmp(r.t, st.data, (size_t)S * sizeof(int)));
            check("TDT joint logits, every step", r.lg, sl.data, (size_t)S * nl, TOL);
        }
        int32_t *et = malloc((size_t)(r.n + 1) * 3 * sizeof(int32_t));
        int ne = tdt_emitted(r.lg, r.t, r.n, &sc, et, et + r.n + 1, et + 2 * (r.n + 1));
        CU_ASSERT(same_i32(hyp.tokens, &tok, hyp.n));
        CU_ASSERT(same_i32(et, &tok, ne));
        CU_ASSERT(same_i32(et + r.n + 1, &ts, ne));
        CU_ASSERT(same_i32(et + 2 * (r.n + 1), &du, ne));
        printf("\n      offline [70, 0]: %d tokens, frames and durations %s", hyp.n,
               same_i32(et + r.n + 1, &ts, ne) && same_i32(et + 2 * (r.n + 1), &du, ne) ? "identical" : "DIFFERENT");
        free(et);
        free(hyp.tokens);
        free(r.t);
        free(r.lg);
        sr_dec_rnnt_greedy.close(dec);
    }
    if (b.st) bclose(&b);
    sr_tensor_free(&mel);
    sr_tensor_free(&st);
    sr_tensor_free(&sl);
    sr_tensor_free(&tok);
    sr_tensor_free(&ts);
    sr_tensor_free(&du);
    sr_h5_close(g);
    sr_h5_close(gt);
    sr_model_free(m);
}

/* Context c of the TDT model fed the golden mel `piece` frames at a time: every joint
 * evaluation (frame, logits) and the tokens, frames and durations vs NeMo's label-looping
 * decoder carried across the same chunks (which evaluates a blank of duration 0 once where
 * rnnt_greedy, as GreedyTDTInfer, repeats the identical step up to max_symbols times: repeats
 * are collapsed before comparing); where a chunk boundary falls, the first joint evaluation
 * after it is at the frame NeMo carried its jump to (*carried counts those with a jump > 0).
 * *worst: the largest logit difference. Returns 1 if the tokens equal NeMo's restart-per-chunk
 * GreedyTDTInfer decode too. */
static int tdt_stream_case(const sr_model *m, sr_h5 *gt, const float *mel, int T, int c, int piece,
                           int *carried, double *worst)
{
    bstream b;
    if (!bopen(m, NULL, CTX[c][0], CTX[c][1], &b)) return 0;
    fc_stream *s = b.st;
    char path[96];
    sr_tensor tok = {0}, ts = {0}, du = {0}, jump = {0}, rst = {0}, st = {0}, sl = {0};
    const char *names[] = {"tokens", "timestamps", "durations", "time_jump", "tokens_restart", "steps_t", "steps_logits"};
    sr_tensor *dst[] = {&tok, &ts, &du, &jump, &rst, &st, &sl};
    int ok = 1, restart_same = 0;
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "/stream/%d_%d/%s", CTX[c][0], CTX[c][1], names[i]);
        ok &= test_golden(gt, path, i < 6 ? SR_I32 : SR_F32, dst[i]);
    }
    rec_scorer r;
    sr_scorer sc;
    rec_wrap(&r, &b.sc, &sc);
    void *dec = NULL;
    sr_hyp hyp = {0};
    ok = ok && sr_dec_rnnt_greedy.open(NULL, &sc, &dec) == SR_OK;
    int64_t expect = -1;
    int at_boundary = 1;
    for (int f0 = 0; ok && f0 < T; f0 += piece) {
        int n = SR_MIN(piece, T - f0), final = f0 + n >= T, r0 = r.n;
        int64_t steps0 = s->steps;
        CU_ASSERT_EQUAL_FATAL(fc_stream_feed_mel(s, mel + (size_t)f0 * ((const fc_model *)m->impl)->n_mels, n, final), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_dec_rnnt_greedy.update(dec, &sc, final, &hyp), SR_OK);
        if (expect >= 0 && r.n > r0) {
            CU_ASSERT_EQUAL(r.t[r0], expect);
            *carried += r.t[r0] == expect && !at_boundary;
            expect = -1;
        }
        /* exactly one step in this feed: NeMo's jump after that chunk says where the next
         * chunk's decoding starts */
        if (s->steps == steps0 + 1 && !final && s->steps - 1 < jump.shape[0]) {
            int j = ((int32_t *)jump.data)[s->steps - 1];
            expect = s->frames_total + j;
            at_boundary = j == 0;
        }
    }
    if (ok) {
        int32_t *et = malloc((size_t)(r.n + 1) * 3 * sizeof(int32_t));
        int ne = tdt_emitted(r.lg, r.t, r.n, &sc, et, et + r.n + 1, et + 2 * (r.n + 1));
        int same = same_i32(hyp.tokens, &tok, hyp.n) && same_i32(et, &tok, ne) &&
                   same_i32(et + r.n + 1, &ts, ne) && same_i32(et + 2 * (r.n + 1), &du, ne);
        restart_same = same_i32(hyp.tokens, &rst, hyp.n);
        if (piece == 1 || !same)
            printf("\n      [%d, %d] piece %d: %d tokens (NeMo label looping %d) %s; NeMo GreedyTDTInfer restarting "
                   "each chunk: %d tokens, %s", CTX[c][0], CTX[c][1], piece, hyp.n, (int)tok.shape[0],
                   same ? "identical with frames and durations" : "DIFFERENT", (int)rst.shape[0],
                   restart_same ? "the same" : "different");
        CU_ASSERT(same);
        free(et);
        /* joint evaluations, identical repeats collapsed */
        int u = 0, nl = r.nl;
        for (int i = 0; i < r.n; i++) {
            if (u && r.t[i] == r.t[u - 1] &&
                !memcmp(r.lg + (size_t)i * nl, r.lg + (size_t)(u - 1) * nl, (size_t)nl * sizeof(float)))
                continue;
            r.t[u] = r.t[i];
            memmove(r.lg + (size_t)u * nl, r.lg + (size_t)i * nl, (size_t)nl * sizeof(float));
            u++;
        }
        CU_ASSERT_EQUAL(u, st.shape[0]);
        CU_ASSERT_EQUAL(sl.shape[1], nl);
        if (u == st.shape[0] && sl.shape[1] == nl) {
            CU_ASSERT(!memcmp(r.t, st.data, (size_t)u * sizeof(int)));
            double dl = test_max_abs_diff(r.lg, sl.data, (size_t)u * nl);
            CU_ASSERT(dl <= TOL);
            *worst = fmax(*worst, dl);
        }
    }
    free(hyp.tokens);
    free(r.t);
    free(r.lg);
    if (dec) sr_dec_rnnt_greedy.close(dec);
    for (int i = 0; i < 7; i++) sr_tensor_free(dst[i]);
    bclose(&b);
    return restart_same;
}

static void test_tdt_stream(void)
{
    sr_model *m = test_load_model("fastconformer/rand_tdt.h5");
    sr_h5 *g = golden(), *gt = golden_tdt();
    sr_tensor mel;
    int carried = 0, restart_differs = 0;
    double worst = 0;
    static const int pieces[] = {1, 17, 1000};
    if (test_golden(g, "/mel", SR_F32, &mel))
        for (int c = 0; c < N_CTX; c++)
            for (size_t p = 0; p < SR_ARRAY_LEN(pieces); p++)
                restart_differs += !tdt_stream_case(m, gt, mel.data, (int)mel.shape[0], c, pieces[p], &carried, &worst);
    /* the chunk-boundary carry is exercised (and is why NeMo's restarting decode differs) */
    printf("\n      joint logits of every step, 6 contexts x 3 feeds: max |diff| %.2e (tol %.0e)", worst, TOL);
    printf("\n      jumps past a chunk's end carried and checked: %d", carried);
    CU_ASSERT(carried >= 5);
    CU_ASSERT(restart_differs >= 1);
    sr_tensor_free(&mel);
    sr_h5_close(g);
    sr_h5_close(gt);
    sr_model_free(m);
}

static void test_tdt_audio(void)
{
    /* srkit's mel from the audio all the way to TDT tokens, through the public API */
    sr_model *m = test_load_model("fastconformer/rand_tdt.h5");
    sr_h5 *g = golden(), *gt = golden_tdt();
    size_t n;
    float *a = test_golden_audio(g, &n);
    for (int c = 0; a && c <= N_CTX; c++) {
        sr_tensor ref;
        char path[64];
        if (c < N_CTX) snprintf(path, sizeof path, "/stream/%d_%d/tokens", CTX[c][0], CTX[c][1]);
        else snprintf(path, sizeof path, "/offline/tokens");
        if (!test_golden(gt, path, SR_I32, &ref)) continue;
        int nt = 0;
        int32_t *t = c < N_CTX ? run_api(m, NULL, NULL, CTX[c][0], CTX[c][1], 0, a, n, 1279, &nt, NULL, NULL)
                               : run_api(m, "offline", NULL, 70, 0, 0, a, n, n, &nt, NULL, NULL);
        int same = same_i32(t, &ref, nt);
        printf("\n      TDT %s: %d tokens from audio, NeMo %d: %s", path, nt, (int)ref.shape[0], same ? "identical" : "DIFFERENT");
        CU_ASSERT(same);
        free(t);
        sr_tensor_free(&ref);
    }
    /* beam search does not do TDT: refused by name */
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.decoder = "rnnt_beam";
    sr_stream *s = NULL;
    TEST_ASSERT_ERR(sr_stream_open(m, &cfg, &s), SR_ERR_UNSUPPORTED, "TDT");
    free(a);
    sr_h5_close(g);
    sr_h5_close(gt);
    sr_model_free(m);
}

/* ---- fastconformer_bad ---- */

/* rand.h5 with one object deleted and / or the config replaced (tests/main.c). */
static const char *bad_copy(const char *name, const char *drop, const char *config)
{
    return test_model_copy("fastconformer/rand.h5", name, drop, config);
}

static char *config_with(const sr_model *m, const char *key, const char *json)
{
    cJSON *c = cJSON_Parse(sr_model_config(m));
    cJSON_ReplaceItemInObjectCaseSensitive(c, key, cJSON_Parse(json));
    char *s = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return s;
}

static void test_bad_files(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5"), *b = NULL;
    const char *p = bad_copy("fc_missing.h5", "/weights/encoder/layers/1/self_attn/linear_pos/weight", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, "encoder.layers.1.self_attn.linear_pos.weight");
    char *cfg = config_with(m, "att_context_size", "[[70,0],[70,2]]");
    p = bad_copy("fc_ctx.h5", NULL, cfg);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, "att_context_size[1]");
    free(cfg);
    cfg = config_with(m, "subsampling", "\"striding\"");
    p = bad_copy("fc_sub.h5", NULL, cfg);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, "config.subsampling");
    free(cfg);
    cfg = config_with(m, "d_model", "48");
    p = bad_copy("fc_shape.h5", NULL, cfg);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, "encoder.pre_encode.out.weight");
    free(cfg);
    cfg = config_with(m, "blank", "0");
    p = bad_copy("fc_blank.h5", NULL, cfg);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, "config.blank");
    free(cfg);
    /* a symbol cap that would let a frame emit without end is refused where the file sets it */
    cfg = config_with(m, "max_symbols", "1000000000");
    p = bad_copy("fc_maxsym.h5", NULL, cfg);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, "config.max_symbols: 1000000000 is outside 1 .. 100");
    free(cfg);
    /* widths far beyond any model, a non-integer past int's range, contexts past the cap,
     * pre-emphasis outside [0, 1): refused before any arithmetic on them */
    const struct { const char *key, *json, *needle; } bad[] = {
        {"d_model", "1000000000", "config.d_model: 1000000000 is outside 2 .. 65536"},
        {"n_layers", "0", "config.n_layers: 0 is outside 1 .. 1024"},
        {"vocab_size", "1e30", "config.vocab_size: expected an integer, got 1e+30"},
        {"n_mels", "-5", "config.n_mels: -5 is outside 1 .. 1024"},
        {"att_context_size", "[[70,0],[2000000,0]]", "config.att_context_size[1]: expected [left, right], each 0 .. 100000"},
        {"local_attn_window", "[1, 1000000]", "config.local_attn_window"},
        {"preemph", "1.5", "config.preemph: 1.5 is outside [0, 1)"},
        {"preemph", "1e300", "config.preemph: 1e+300 is not a finite float"},
        {"local_attn_threshold", "0", "config.local_attn_threshold: 0 is outside 1 .. 16777216"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cfg = config_with(m, bad[i].key, bad[i].json);
        p = bad_copy("fc_range.h5", NULL, cfg);
        TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT, bad[i].needle);
        CU_ASSERT_PTR_NULL(b);
        free(cfg);
    }
    /* a key no fastconformer_rnnt reader knows (a typo of max_symbols) is an error, not a
     * default left silently in force; every unknown key is named */
    cJSON *c = cJSON_Parse(sr_model_config(m));
    cJSON_AddNumberToObject(c, "max_symbol", 3);
    cJSON_AddStringToObject(c, "vendor_note", "x");
    cfg = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    p = bad_copy("fc_unknown.h5", NULL, cfg);
    TEST_ASSERT_ERR(sr_model_load(p, NULL, &b), SR_ERR_FORMAT,
                    "config.max_symbol, config.vendor_note: not keys of arch fastconformer_rnnt");
    free(cfg);
    sr_model_free(m);
}

static void test_bad_streams(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_stream_config c;
    sr_stream *s = NULL;
    sr_stream_config_init(&c);
    c.att_context[0] = 70;
    c.att_context[1] = 4;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "[70, 4] is not one the model was trained with");
    c.att_context[1] = 3;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "not divisible by right + 1 = 4");
    c.att_context[0] = -1;
    c.att_context[1] = -1;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.att_context");
    c.strategy = "offline"; /* full attention is an offline option */
    CU_ASSERT_EQUAL(sr_stream_open(m, &c, &s), SR_OK);
    sr_stream_close(s);
    s = NULL;
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.strategy");
    sr_stream_config_init(&c);
    c.decoder = "aed_greedy";
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "aed_greedy");
    c.decoder = "rnnt_beam";
    c.beam = 1000;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.beam");
    /* NaN audio is refused by the engine; audio shorter than the first chunk gives one short
     * final step and no crash; empty audio gives no frames */
    sr_stream_config_init(&c);
    c.att_context[0] = 70;
    c.att_context[1] = 13;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &c, &s), SR_OK);
    float x[300] = {0};
    for (int i = 0; i < 300; i++) x[i] = 0.1f * sinf(0.07f * (float)i);
    x[7] = NAN;
    TEST_ASSERT_ERR(sr_stream_feed(s, x, 300), SR_ERR_ARG, "NaN");
    x[7] = 0;
    CU_ASSERT_EQUAL(sr_stream_feed(s, x, 300), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    const sr_timeline *tl = sr_stream_timeline(s);
    CU_ASSERT(tl->n >= 1 && tl->entries[tl->n - 1].is_final);
    sr_stream_reset(s);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_hypothesis(s)->n_tokens, 0);
    sr_stream_close(s);
    sr_model_free(m);
}

static void test_offline_switch(void)
{
    /* strategy offline switches to banded attention above local_attn_threshold encoder
     * frames, offline_local always bands, offline_full never does. On a copy of rand.h5 with
     * threshold 10 and window [2, 2] (the golden 2 s gives 26 frames), at att_context
     * [-1, -1]: offline and offline_local compute the band, offline_full NeMo's full attention */
    sr_model *m = test_load_model("fastconformer/rand.h5"), *b = NULL;
    cJSON *c = cJSON_Parse(sr_model_config(m));
    cJSON_ReplaceItemInObjectCaseSensitive(c, "local_attn_threshold", cJSON_CreateNumber(10));
    cJSON_ReplaceItemInObjectCaseSensitive(c, "local_attn_window", cJSON_Parse("[2, 2]"));
    char *cfg = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    const char *p = bad_copy("fc_switch.h5", NULL, cfg);
    free(cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(sr_model_load(p, NULL, &b), SR_OK);
    const fc_model *w = b->impl;
    sr_h5 *g = golden();
    sr_tensor mel, full;
    if (test_golden(g, "/mel", SR_F32, &mel) && test_golden(g, "/offline/full/encoder", SR_F32, &full)) {
        int T = (int)mel.shape[0], nb = 0;
        float *band = NULL;
        static const int win[2] = {2, 2};
        CU_ASSERT_EQUAL(fc_encode_offline(w, mel.data, T, win, 1, &band, &nb, NULL), SR_OK);
        CU_ASSERT(nb == full.shape[0] && nb > 10);
        static const char *strat[] = {"offline", "offline_local", "offline_full"};
        for (int i = 0; i < 3 && band; i++) {
            bstream bs;
            if (!bopen(b, strat[i], -1, -1, &bs)) continue;
            fc_stream *s = bs.st;
            CU_ASSERT_EQUAL(fc_stream_feed_mel(s, mel.data, T, 1), SR_OK);
            CU_ASSERT_EQUAL(fc_frames_held(s), nb);
            if (fc_frames_held(s) == nb) {
                size_t n = (size_t)nb * w->d;
                double dfull = test_max_abs_diff(s->enc_raw, full.data, n), dband = test_max_abs_diff(s->enc_raw, band, n);
                printf("\n      %-13s [-1, -1], 26 frames, threshold 10: vs NeMo full %.2e, vs band [2, 2] %.2e", strat[i],
                       dfull, dband);
                if (i < 2) {
                    CU_ASSERT(dband == 0 && dfull > 1e-2);
                } else {
                    CU_ASSERT(dfull <= TOL && dband > 1e-2);
                }
            }
            bclose(&bs);
        }
        w->k->free(band);
    }
    sr_tensor_free(&mel);
    sr_tensor_free(&full);
    sr_h5_close(g);
    sr_model_free(b);
    sr_model_free(m);
}

/* ---- fastconformer_convert ---- */

/* Run scripts/convert_nemo.py with `args` under $SRKIT_TORCH_PYTHON (default /usr/bin/python3);
 * stdout + stderr into out. Returns the exit status, -1 if it did not exit normally. */
static int convert_nemo(const char *args, char *out, size_t cap)
{
    const char *py = getenv("SRKIT_TORCH_PYTHON");
    return test_run(out, cap, "%s scripts/convert_nemo.py -q %s", py && *py ? py : "/usr/bin/python3", args);
}

static void test_convert_nemo(void)
{
    char msg[4096], args[1024];
    const char *out = test_tmppath("fc_converted.h5");
    remove(out);
    snprintf(args, sizeof args, "--dtype f16 %s %s", test_fixture("fastconformer/rand.nemo"), out);
    int rc = convert_nemo(args, msg, sizeof msg);
    if (rc == 2) {
        /* torch (or PyYAML) is missing: the message must say which, then skip */
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "needs Py"));
        TEST_SKIP("convert_nemo.py needs torch to read the .ckpt: set SRKIT_TORCH_PYTHON to the reference venv's python");
        return;
    }
    if (rc) printf("\n      convert_nemo.py exit %d: %s", rc, msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    sr_model *a = test_load_model("fastconformer/rand.h5"), *b = NULL;
    sr_status st = sr_model_load(out, NULL, &b);
    if (st) printf("\n      load %s: %s", out, sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    CU_ASSERT_STRING_EQUAL(sr_model_config(a), sr_model_config(b));
    /* every encoder weight: the offline encoder over the golden mel, bit for bit */
    sr_h5 *g = golden();
    sr_tensor mel;
    if (test_golden(g, "/mel", SR_F32, &mel)) {
        static const int full[2] = {-1, -1};
        float *oa = NULL, *ob = NULL;
        int na = 0, nb = 0;
        CU_ASSERT_EQUAL(fc_encode_offline(a->impl, mel.data, (int)mel.shape[0], full, 0, &oa, &na, NULL), SR_OK);
        CU_ASSERT_EQUAL(fc_encode_offline(b->impl, mel.data, (int)mel.shape[0], full, 0, &ob, &nb, NULL), SR_OK);
        CU_ASSERT(na == nb && na > 0 && oa && ob && !memcmp(oa, ob, (size_t)na * ((const fc_model *)a->impl)->d * sizeof(float)));
        if (oa) a->k->free(oa);
        if (ob) b->k->free(ob);
    }
    sr_tensor_free(&mel);
    /* prediction network, joint and tokenizer: tokens and text of every context from audio */
    size_t n;
    float *audio = test_golden_audio(g, &n);
    for (int c = 0; audio && c < N_CTX; c++) {
        int nt_a = 0, nt_b = 0;
        int32_t *ta = run_api(a, NULL, NULL, CTX[c][0], CTX[c][1], 0, audio, n, n, &nt_a, NULL, NULL);
        int32_t *tb = run_api(b, NULL, NULL, CTX[c][0], CTX[c][1], 0, audio, n, n, &nt_b, NULL, NULL);
        CU_ASSERT(nt_a == nt_b && nt_a > 0 && !memcmp(ta, tb, (size_t)nt_a * sizeof(int32_t)));
        char *xa = NULL, *xb = NULL;
        CU_ASSERT_EQUAL(sr_model_detokenize(a, ta, nt_a, &xa), SR_OK);
        CU_ASSERT_EQUAL(sr_model_detokenize(b, tb, nt_b, &xb), SR_OK);
        CU_ASSERT(xa && xb && !strcmp(xa, xb));
        if (c == 0) printf("\n      converted rand.nemo: [70, 0] %d tokens \"%.40s...\" as rand.h5", nt_b, xb ? xb : "");
        free(xa);
        free(xb);
        free(ta);
        free(tb);
    }
    free(audio);
    sr_h5_close(g);
    sr_model_free(a);
    sr_model_free(b);
    /* a checkpoint lacking one tensor (rewritten with the same torch) fails naming it */
    const char *py = getenv("SRKIT_TORCH_PYTHON"), *miss = test_tmppath("fc_missing.nemo");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -c \"import io, sys, tarfile, torch\n"
             "src = tarfile.open(sys.argv[1]); t = tarfile.open(sys.argv[2], 'w')\n"
             "for m in src.getmembers():\n"
             "    data = src.extractfile(m).read()\n"
             "    if m.name.endswith('.ckpt'):\n"
             "        sd = torch.test_load_model(io.BytesIO(data), weights_only=True)\n"
             "        del sd['encoder.layers.1.self_attn.linear_pos.weight']\n"
             "        b = io.BytesIO(); torch.save(sd, b); data = b.getvalue()\n"
             "    m.size = len(data); t.addfile(m, io.BytesIO(data))\n"
             "t.close()\" %s %s",
             py && *py ? py : "/usr/bin/python3", test_fixture("fastconformer/rand.nemo"), miss);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "%s %s", miss, out);
    CU_ASSERT_EQUAL(convert_nemo(args, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "tensor encoder.layers.1.self_attn.linear_pos.weight is missing"));
}

static void test_convert_nemo_bad(void)
{
    char msg[4096], args[1024], cmd[2048];
    if (!test_python_ok()) {
        TEST_SKIP("/usr/bin/python3 lacks numpy/h5py");
        return;
    }
    /* not an archive */
    const char *out = test_tmppath("fc_bad_out.h5");
    remove(out);
    snprintf(args, sizeof args, "%s %s", test_fixture("fastconformer/rand.h5"), out);
    CU_ASSERT_EQUAL(convert_nemo(args, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "not a readable .nemo"));
    /* an archive without weights; one whose config asks for a variant srkit lacks */
    const char *noweights = test_tmppath("fc_noweights.nemo"), *variant = test_tmppath("fc_variant.nemo");
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import io, sys, tarfile\n"
             "src = tarfile.open(sys.argv[1])\n"
             "for dst, edit in ((sys.argv[2], 'drop'), (sys.argv[3], 'variant')):\n"
             "    t = tarfile.open(dst, 'w')\n"
             "    for m in src.getmembers():\n"
             "        data = src.extractfile(m).read()\n"
             "        if edit == 'drop' and m.name.endswith('.ckpt'): continue\n"
             "        if edit == 'variant' and m.name.endswith('.yaml'): data = data.replace(b'subsampling: dw_striding', b'subsampling: striding')\n"
             "        m.size = len(data)\n"
             "        t.addfile(m, io.BytesIO(data))\n"
             "    t.close()\" %s %s %s",
             test_fixture("fastconformer/rand.nemo"), noweights, variant);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "%s %s", noweights, out);
    CU_ASSERT_EQUAL(convert_nemo(args, msg, sizeof msg), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "no model_weights.ckpt"));
    snprintf(args, sizeof args, "%s %s", variant, out);
    int rc = convert_nemo(args, msg, sizeof msg);
    if (rc == 2) {
        TEST_SKIP("convert_nemo.py needs PyYAML for the config check");
    } else {
        CU_ASSERT_EQUAL(rc, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "encoder.subsampling 'striding'"));
    }
    FILE *f = fopen(out, "rb");
    CU_ASSERT_PTR_NULL(f); /* a failed conversion leaves no output */
    if (f) fclose(f);
}

/* ---- fastconformer_batch ---- */

#define BT_SLOTS 5
#define BT_STREAMS 6

/* A stream of the batching test: its slot of the shared batch context and the calls at which
 * it is opened, closed (not finished) or reset (-1: never); its audio; and its twin, the same
 * calls on a lone stream (its own batch of one). */
typedef struct {
    int slot, join, close_at, reset_at;
    float *a;
    size_t n, pos;
    int open, done, calls;   /* calls: process calls since it (re)started */
    void *st;
    sr_chunking ck;
    sr_scorer sc;
    bstream twin;
    float *state, *pred, *tstate, *tpred; /* prediction state and output: batched, twin */
    int started;
} bt_stream;

/* One process_batch call's extra checks for the streams idx[0 .. cnt) of S: encoder rows, a
 * batched tr_predict over all of them and batched tr_joint over their held frames vs the
 * twins' solo calls, bit for bit. Returns the number of differences. */
static int bt_compare(const fc_model *w, bt_stream *S, const int *idx, int cnt, int call)
{
    int bad = 0, d = w->d;
    sr_tr_predict_req pr[BT_SLOTS];
    if (cnt < 1 || cnt > BT_SLOTS) return 1;
    for (int q = 0; q < cnt; q++) {
        bt_stream *b = &S[idx[q]];
        const fc_stream *s = b->st, *t = b->twin.st;
        if (fc_frames_held(s) != fc_frames_held(t) || s->frames_base != t->frames_base || s->frames_total != t->frames_total ||
            memcmp(s->enc_raw, t->enc_raw, (size_t)fc_frames_held(s) * d * sizeof(float)))
            bad++;
        int32_t tok = b->started ? (int32_t)((call * 7 + idx[q] * 13) % w->vocab) : -1;
        pr[q] = (sr_tr_predict_req){.ctx = b->st, .state_in = b->started ? b->state : NULL, .token = tok,
                                    .state_out = b->state, .pred_out = b->pred};
        CU_ASSERT_EQUAL(b->twin.sc.tr_predict(b->twin.st, b->started ? b->tstate : NULL, tok, b->tstate, b->tpred), SR_OK);
    }
    CU_ASSERT_EQUAL(S[idx[0]].sc.tr_predict_batch(pr, cnt), SR_OK);
    int maxf = 0;
    for (int q = 0; q < cnt; q++) {
        bt_stream *b = &S[idx[q]];
        b->started = 1;
        if (memcmp(b->state, b->tstate, (size_t)b->sc.pred_state * sizeof(float)) ||
            memcmp(b->pred, b->tpred, (size_t)b->sc.pred_dim * sizeof(float)))
            bad++;
        maxf = SR_MAX(maxf, fc_frames_held(b->st));
    }
    /* the joint: frame j of every stream that holds one, as one batch */
    int nl = S[idx[0]].sc.vocab + S[idx[0]].sc.tr_n_durations;
    float *lg = malloc((size_t)(cnt + 1) * nl * sizeof(float)), *tl = lg + (size_t)cnt * nl;
    sr_tr_joint_req jr[BT_SLOTS];
    for (int j = 0; j < maxf; j++) {
        int nj = 0, who[BT_SLOTS];
        for (int q = 0; q < cnt; q++) {
            const fc_stream *s = S[idx[q]].st;
            if (j >= fc_frames_held(s)) continue;
            who[nj] = idx[q];
            jr[nj] = (sr_tr_joint_req){.ctx = S[idx[q]].st, .t = (int)s->frames_base + j, .pred_out = S[idx[q]].pred,
                                       .logits = lg + (size_t)nj * nl};
            nj++;
        }
        CU_ASSERT_EQUAL(S[idx[0]].sc.tr_joint_batch(jr, nj), SR_OK);
        for (int q = 0; q < nj; q++) {
            bt_stream *b = &S[who[q]];
            CU_ASSERT_EQUAL(b->twin.sc.tr_joint(b->twin.st, jr[q].t, b->tpred, tl), SR_OK);
            bad += memcmp(jr[q].logits, tl, (size_t)nl * sizeof(float)) != 0;
        }
    }
    free(lg);
    return bad;
}

/* Open b's stream on its slot of `batch` and its twin (a batch of one), with its prediction
 * buffers. */
static void bt_join(const sr_model *m, const sr_stream_config *c, void *batch, bt_stream *b)
{
    CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.stream_open(m, c, batch, b->slot, &b->st, &b->ck, &b->sc), SR_OK);
    b->twin.st = b->twin.batch = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.batch_open(m, c, 1, &b->twin.batch), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.stream_open(m, c, b->twin.batch, 0, &b->twin.st, &b->twin.ck, &b->twin.sc),
                          SR_OK);
    b->state = calloc(4 * (size_t)(b->sc.pred_state + b->sc.pred_dim), sizeof(float));
    b->tstate = b->state + b->sc.pred_state;
    b->pred = b->tstate + b->sc.pred_state;
    b->tpred = b->pred + b->sc.pred_dim;
    b->open = 1;
}

/* Close the n streams of S still open (and their twins), the batch, the golden and the model. */
static void bt_teardown(bt_stream *S, int n, void *batch, float *au, sr_h5 *g, sr_model *m)
{
    for (int i = 0; i < n; i++) {
        if (S[i].open) {
            sr_fastconformer_rnnt_ops.stream_close(S[i].st);
            bclose(&S[i].twin);
        }
        free(S[i].state);
        free(S[i].a);
    }
    sr_fastconformer_rnnt_ops.batch_close(batch);
    free(au);
    sr_h5_close(g);
    sr_model_free(m);
}

/* Five slots, six streams of different audio (variants of the golden audio: shifted, scaled,
 * odd ones time-reversed, of different lengths) with context [L, R] and cache_dtype: stream i
 * < 5 joins at call i on slot i; the streams of a call are a changing subset (each skips every
 * fourth call), in alternating order; each finishes at its own call (final with the
 * remainder); stream 2 is closed unfinished at call 6 and stream 5 opened on its slot at call
 * 7; stream 3 is reset at call 8 and restarts its audio. After every call each stream's
 * encoder rows, a batched prediction step and batched joints over its held frames equal its
 * twin's, bit for bit. */
static void batch_case(const char *model, const char *cache_dtype, int L, int R, int chunk_ms)
{
    sr_model *m = test_load_model(model);
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    size_t n = 0;
    float *au = test_golden_audio(g, &n);
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.cache_dtype = cache_dtype;
    c.att_context[0] = L;
    c.att_context[1] = R;
    c.chunk_ms = chunk_ms;
    void *batch = NULL;
    if (!au || sr_fastconformer_rnnt_ops.batch_open(m, &c, BT_SLOTS, &batch) != SR_OK) {
        CU_FAIL("audio / batch_open");
        free(au);
        sr_h5_close(g);
        sr_model_free(m);
        return;
    }
    /* the frame window at a quarter of its size (still what the streams can hold at a time),
     * so that these few calls compact it several times */
    fc_batch *fb = batch;
    fb->jw_cap /= 4;
    fb->jw_alt_cap /= 4;
    size_t bytes0 = sr_fastconformer_rnnt_ops.batch_bytes(batch);
    bt_stream S[BT_STREAMS];
    memset(S, 0, sizeof S);
    for (int i = 0; i < BT_STREAMS; i++) {
        size_t off = (size_t)i * 1100, len = n - off - (size_t)(i % 3) * 2900 - (size_t)i * 700;
        S[i].a = malloc(len * sizeof(float));
        S[i].n = len;
        for (size_t j = 0; j < len; j++)
            S[i].a[j] = (i % 2 ? au[off + len - 1 - j] : au[off + j]) * (1.0f - 0.1f * (float)i);
        S[i].slot = i < BT_SLOTS ? i : 2;
        S[i].join = i < BT_SLOTS ? i : 7;
        S[i].close_at = i == 2 ? 6 : -1;
        S[i].reset_at = i == 3 ? 8 : -1;
    }
    int diffs = 0, calls = 0, max_cnt = 0, reused = 0, resets = 0, compactions = 0;
    const float *jw_was = ((const fc_batch *)batch)->jw;
    for (int call = 0; call < 400; call++) {
        int live = 0;
        for (int i = 0; i < BT_STREAMS; i++) {
            bt_stream *b = &S[i];
            if (b->join == call) {
                bt_join(m, &c, batch, b);
                reused += i >= BT_SLOTS;
            }
            if (b->open && b->close_at == call) {
                sr_fastconformer_rnnt_ops.stream_close(b->st);
                bclose(&b->twin);
                b->open = 0;
                b->done = 1;
            }
            if (b->open && b->reset_at == call && !b->done) {
                sr_fastconformer_rnnt_ops.reset(b->st);
                sr_fastconformer_rnnt_ops.reset(b->twin.st);
                b->pos = 0;
                b->calls = 0;
                b->started = 0;
                resets++;
            }
            live += !b->done;
        }
        if (!live) break;
        void *states[BT_SLOTS];
        const float *pcm[BT_SLOTS];
        size_t nn[BT_SLOTS];
        int fin[BT_SLOTS], idx[BT_SLOTS], cnt = 0;
        for (int k = 0; k < BT_STREAMS; k++) {
            int i = call % 2 ? BT_STREAMS - 1 - k : k;
            bt_stream *b = &S[i];
            if (!b->open || b->done || ((call + i) % 4 == 3 && b->join != call)) continue;
            size_t want = b->calls ? b->ck.chunk : b->ck.first_chunk, left = b->n - b->pos;
            fin[cnt] = left <= want;
            nn[cnt] = fin[cnt] ? left : want;
            pcm[cnt] = b->a + b->pos;
            states[cnt] = b->st;
            idx[cnt++] = i;
        }
        if (!cnt) continue;
        CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.process_batch(batch, states, pcm, nn, fin, cnt), SR_OK);
        for (int q = 0; q < cnt; q++)
            CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.process(S[idx[q]].twin.st, pcm[q], nn[q], fin[q]), SR_OK);
        /* every open stream, not only this call's: a stream's frames stay held until its
         * next call, through other streams' calls and the window's compactions */
        int all[BT_STREAMS], nall = 0;
        for (int i = 0; i < BT_STREAMS; i++)
            if (S[i].open) all[nall++] = i;
        diffs += bt_compare(w, S, all, nall, call);
        compactions += fb->jw != jw_was;
        jw_was = fb->jw;
        for (int q = 0; q < cnt; q++) {
            bt_stream *b = &S[idx[q]];
            b->pos += nn[q];
            b->calls++;
            b->done = fin[q];
        }
        calls++;
        max_cnt = SR_MAX(max_cnt, cnt);
    }
    int finished = 0;
    for (int i = 0; i < BT_STREAMS; i++) finished += S[i].done && S[i].close_at < 0;
    printf("\n      %s [%d, %d] %s caches, chunks of %d ms: %d process_batch calls of up to %d streams (%d finished, a slot reused %d, "
           "a reset %d, %d frame window compactions): rows, predict, joint vs alone %s", model, L, R,
           cache_dtype ? cache_dtype : "f32", chunk_ms ? chunk_ms : 80 * (R + 1), calls, max_cnt,
           finished, reused, resets, compactions, diffs ? "DIFFERENT" : "bit-identical");
    CU_ASSERT_EQUAL(diffs, 0);
    CU_ASSERT(max_cnt >= 4 && finished == BT_STREAMS - 1 && reused == 1 && resets == 1 && compactions >= 2);
    CU_ASSERT_EQUAL(sr_fastconformer_rnnt_ops.batch_bytes(batch), bytes0); /* nothing reallocated */
    bt_teardown(S, BT_STREAMS, batch, au, g, m);
}

static void test_batch_f32(void)
{
    /* a step per call; 3 or 4 steps of a stream per call (rounds of changing subsets) */
    batch_case("fastconformer/rand.h5", NULL, 6, 1, 0);
    batch_case("fastconformer/rand_tdt.h5", NULL, 4, 0, 250);
}

static void test_batch_f16(void)
{
    batch_case("fastconformer/rand.h5", "f16", 6, 1, 0);
    batch_case("fastconformer/rand.h5", "f16", 70, 1, 130);
}

/* Offline streams of one batch context: three of different audio, each finished in a call of
 * its own, then all three again (reset) in one call. Each stream's frames stay held through the
 * others' calls, while the shared frame window grows and is compacted: encoder rows, a batched
 * prediction step and batched joints over every held frame of every stream equal a lone
 * twin's, bit for bit. */
static void test_batch_offline(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_h5 *g = golden();
    const fc_model *w = m->impl;
    size_t n = 0;
    float *au = test_golden_audio(g, &n);
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = "offline";
    void *batch = NULL;
    if (!au || sr_fastconformer_rnnt_ops.batch_open(m, &c, 3, &batch) != SR_OK) {
        CU_FAIL("audio / batch_open");
        free(au);
        sr_h5_close(g);
        sr_model_free(m);
        return;
    }
    const fc_batch *fb = batch;
    bt_stream S[3];
    memset(S, 0, sizeof S);
    int diffs = 0, moved = 0, all[3] = {0, 1, 2};
    const float *jw_was = fb->jw;
    for (int i = 0; i < 3; i++) {
        bt_stream *b = &S[i];
        b->n = n - (size_t)i * 5000;
        b->a = malloc(b->n * sizeof(float));
        for (size_t j = 0; j < b->n; j++) b->a[j] = (i == 1 ? au[n - 1 - j] : au[j]) * (1.0f - 0.2f * (float)i);
        b->slot = i;
        bt_join(m, &c, batch, b);
    }
    for (int round = 0; round < 2; round++) {
        for (int q = 0; q < 3; q++) {
            /* round 0: one stream a call; round 1: all three in one call */
            int cnt = round ? 3 : 1;
            void *states[3];
            const float *pcm[3];
            size_t nn[3];
            int fin[3] = {1, 1, 1};
            for (int j = 0; j < cnt; j++) {
                bt_stream *b = &S[round ? j : q];
                if (round) {
                    sr_fastconformer_rnnt_ops.reset(b->st);
                    sr_fastconformer_rnnt_ops.reset(b->twin.st);
                }
                states[j] = b->st;
                pcm[j] = b->a;
                nn[j] = b->n;
                CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.process(b->twin.st, b->a, b->n, 1), SR_OK);
            }
            CU_ASSERT_EQUAL_FATAL(sr_fastconformer_rnnt_ops.process_batch(batch, states, pcm, nn, fin, cnt), SR_OK);
            diffs += bt_compare(w, S, all, round ? 3 : q + 1, round * 3 + q);
            moved += fb->jw != jw_was;
            jw_was = fb->jw;
            if (round) break;
        }
    }
    int held = 0;
    for (int i = 0; i < 3; i++) held += fc_frames_held(S[i].st);
    printf("\n      3 offline streams, alone then together: %d frames held, the window moved %d times: "
           "rows, predict, joint vs alone %s", held, moved, diffs ? "DIFFERENT" : "bit-identical");
    CU_ASSERT_EQUAL(diffs, 0);
    CU_ASSERT(moved >= 3 && held > 30);
    bt_teardown(S, 3, batch, au, g, m);
}

static void test_batch_errors(void)
{
    /* batch_open validates the config as stream_open does (SR_ERR_ARG naming the field);
     * slots out of range, a missing batch context, another config, foreign or repeated
     * streams are refused; the pools hold one slot per stream */
    sr_model *m = test_load_model("fastconformer/rand.h5");
    const sr_model_ops *o = &sr_fastconformer_rnnt_ops;
    sr_stream_config c;
    void *b1 = NULL, *b2 = NULL, *st = NULL, *st2 = NULL;
    sr_chunking ck;
    sr_scorer sc;
    sr_stream_config_init(&c);
    c.att_context[0] = 70;
    c.att_context[1] = 4;
    TEST_ASSERT_ERR(o->batch_open(m, &c, 2, &b1), SR_ERR_ARG, "stream.att_context: [70, 4] is not one the model was trained with");
    c.att_context[1] = 3;
    TEST_ASSERT_ERR(o->batch_open(m, &c, 2, &b1), SR_ERR_ARG, "not divisible by right + 1 = 4");
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    TEST_ASSERT_ERR(o->batch_open(m, &c, 2, &b1), SR_ERR_ARG, "stream.strategy: \"whisperrt\" unknown");
    sr_stream_config_init(&c);
    c.cache_dtype = "bf16";
    TEST_ASSERT_ERR(o->batch_open(m, &c, 2, &b1), SR_ERR_ARG, "stream.cache_dtype: \"bf16\" unknown for fastconformer_rnnt");
    sr_stream_config_init(&c);
    c.max_symbols = -1;
    TEST_ASSERT_ERR(o->batch_open(m, &c, 2, &b1), SR_ERR_ARG, "stream.max_symbols: -1 is negative");
    sr_stream_config_init(&c);
    TEST_ASSERT_ERR(o->batch_open(m, &c, 0, &b1), SR_ERR_ARG, "batch context of 0 streams");
    CU_ASSERT_PTR_NULL(b1);
    /* one slot per stream: the pools of a batch of 3 are 3 times those of 1 */
    CU_ASSERT_EQUAL_FATAL(o->batch_open(m, &c, 1, &b1), SR_OK);
    CU_ASSERT_EQUAL_FATAL(o->batch_open(m, &c, 3, &b2), SR_OK);
    const fc_batch *x1 = b1, *x3 = b2;
    CU_ASSERT(x3->kc->slots == 3 && x3->vc->slots == 3 && x3->cc->slots == 3 && x3->kc->bytes == 3 * x1->kc->bytes &&
              x3->cc->bytes == 3 * x1->cc->bytes && x3->ws.rows == 3 * x1->ws.rows);
    CU_ASSERT(o->batch_bytes(b2) > 2 * o->batch_bytes(b1));
    TEST_ASSERT_ERR(o->stream_open(m, &c, NULL, 0, &st, &ck, &sc), SR_ERR_ARG, "fastconformer: stream_open needs a batch context");
    TEST_ASSERT_ERR(o->stream_open(m, &c, b2, 3, &st, &ck, &sc), SR_ERR_ARG, "slot 3 of a batch context of 3");
    TEST_ASSERT_ERR(o->stream_open(m, &c, b2, -1, &st, &ck, &sc), SR_ERR_ARG, "slot -1");
    CU_ASSERT_PTR_NULL(st);
    c.att_context[0] = 6;
    c.att_context[1] = 1;
    TEST_ASSERT_ERR(o->stream_open(m, &c, b2, 0, &st, &ck, &sc), SR_ERR_ARG, "differs from its batch context");
    c.strategy = "offline";
    c.att_context[0] = c.att_context[1] = 0;
    TEST_ASSERT_ERR(o->stream_open(m, &c, b2, 0, &st, &ck, &sc), SR_ERR_ARG, "differs from its batch context");
    sr_stream_config_init(&c);
    CU_ASSERT_EQUAL_FATAL(o->stream_open(m, &c, b2, 2, &st, &ck, &sc), SR_OK);
    CU_ASSERT_EQUAL_FATAL(o->stream_open(m, &c, b1, 0, &st2, &ck, &sc), SR_OK);
    /* process_batch: streams of this context only, each once, at most max_streams */
    float z[4000] = {0};
    void *two[2] = {st, st}, *other[2] = {st, st2};
    const float *pcm[4] = {z, z, z, z};
    size_t nn[4] = {ck.first_chunk, ck.first_chunk, ck.first_chunk, ck.first_chunk};
    int fin[4] = {0};
    TEST_ASSERT_ERR(o->process_batch(b2, two, pcm, nn, fin, 2), SR_ERR_ARG, "repeats slot 2");
    TEST_ASSERT_ERR(o->process_batch(b2, other, pcm, nn, fin, 2), SR_ERR_ARG, "stream 1 is not of this batch context");
    void *four[4] = {st, st, st, st};
    TEST_ASSERT_ERR(o->process_batch(b2, four, pcm, nn, fin, 4), SR_ERR_ARG, "process_batch of 4 streams (batch context of 3)");
    /* batched scorer calls: one batch context, frames held */
    float *state = malloc((size_t)(sc.pred_state + sc.pred_dim + sc.vocab) * sizeof(float));
    float *pred = state + sc.pred_state, *lg = pred + sc.pred_dim;
    sr_tr_predict_req pr[2] = {{.ctx = st, .token = -1, .state_out = state, .pred_out = pred},
                               {.ctx = st2, .token = -1, .state_out = state, .pred_out = pred}};
    TEST_ASSERT_ERR(sc.tr_predict_batch(pr, 2), SR_ERR_ARG, "tr_predict_batch request 1 is of another batch context");
    pr[0].token = 63;
    TEST_ASSERT_ERR(sc.tr_predict_batch(pr, 1), SR_ERR_ARG, "token 63");
    sr_tr_joint_req jr[1] = {{.ctx = st, .t = 0, .pred_out = pred, .logits = lg}};
    TEST_ASSERT_ERR(sc.tr_joint_batch(jr, 1), SR_ERR_ARG, "joint on frame 0");
    CU_ASSERT_EQUAL(sc.tr_joint_batch(jr, 0), SR_OK);
    free(state);
    o->stream_close(st);
    o->stream_close(st2);
    o->batch_close(b1);
    o->batch_close(b2);
    sr_model_free(m);
}

void test_register_fastconformer(void)
{
    TEST_SUITE("fastconformer_parity", {"mel", test_mel}, {"pre_encode", test_pre_encode},
               {"offline_encoder", test_offline}, {"predict_joint", test_predict_joint},
               {"pre_encode_bf16", test_pre_encode_bf16}, {"offline_encoder_bf16", test_offline_bf16},
               {"predict_joint_bf16", test_predict_joint_bf16}, {"audio_tokens_bf16", test_audio_tokens_bf16});
    TEST_SUITE("fastconformer_stream", {"cache_aware_parity", test_stream_parity},
               {"mel_split", test_stream_split}, {"audio_tokens", test_audio_tokens},
               {"feed_split", test_feed_split}, {"reset_memory", test_reset_memory},
               {"f16_caches", test_f16_caches}, {"nemotron_state", test_nemotron_state},
               {"batched_layers", test_batched_layers});
    TEST_SUITE("fastconformer_local", {"subsample_pieces", test_subsample_pieces}, {"band_parity", test_local_parity},
               {"offline_switch", test_offline_switch},
               {"band_memory", test_local_memory});
    TEST_SUITE("fastconformer_tdt", {"offline_steps", test_tdt_offline}, {"stream", test_tdt_stream},
               {"audio_tokens", test_tdt_audio});
    TEST_SUITE("fastconformer_batch", {"streams_f32", test_batch_f32}, {"streams_f16", test_batch_f16},
               {"offline_streams", test_batch_offline},
               {"errors", test_batch_errors});
    TEST_SUITE("fastconformer_bad", {"files", test_bad_files}, {"streams", test_bad_streams});
    TEST_SUITE("fastconformer_convert", {"nemo", test_convert_nemo}, {"bad_nemo", test_convert_nemo_bad});
}
