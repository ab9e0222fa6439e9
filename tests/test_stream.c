/*
 * test_stream.c — the stream engine and timeline on the built-in test_linear backend:
 * split-invariance of feeding, reset == fresh, finish semantics, bad samples, concurrent
 * streams on one model, and the backend's output against an independent computation.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/weights.h"
#include "../kernels/kernels.h"
#include "test.h"

#define RATE 16000
#define PI 3.14159265358979323846
#define SR_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Deterministic speech-like test signal: bursts of noise and tones with varying loudness, so
 * the band energies (and the test_linear tokens) change from chunk to chunk. */
static float *make_signal(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        double noise = ((s >> 8) / 16777216.0 - 0.5);
        double env = 0.5 + 0.5 * sin(2 * PI * (double)i / (RATE * 0.37));
        double gate = ((i / 700) % 5 == 0) ? 0.02 : 1.0;
        double tone = sin(2 * PI * 220.0 * (double)i / RATE);
        x[i] = (float)(gate * env * (0.6 * noise + 0.3 * tone));
    }
    return x;
}

static sr_model *load_model(void) { return test_load_model("test_linear.h5"); }

/* Feed x in pieces of `step` samples (0 = all at once), finish, and return the stream. */
static sr_stream *run_split(const sr_model *m, const float *x, size_t n, size_t step)
{
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    if (!step) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step)
        CU_ASSERT_EQUAL(sr_stream_feed(s, x + i, SR_MIN(step, n - i)), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    return s;
}

/* Timelines equal except compute_ns. Returns 1 when equal; prints the first difference. */
static int same_timeline(const sr_timeline *a, const sr_timeline *b)
{
    if (a->n != b->n) {
        printf("\n      timeline lengths %zu vs %zu\n", a->n, b->n);
        return 0;
    }
    for (size_t i = 0; i < a->n; i++) {
        const sr_timeline_entry *x = &a->entries[i], *y = &b->entries[i];
        if (x->audio_ms != y->audio_ms || x->n_tokens != y->n_tokens || x->n_stable != y->n_stable ||
            x->is_final != y->is_final || strcmp(x->text, y->text) ||
            memcmp(x->tokens, y->tokens, (size_t)x->n_tokens * sizeof(int32_t))) {
            printf("\n      entry %zu differs: %lld ms \"%s\" vs %lld ms \"%s\"\n", i,
                   (long long)x->audio_ms, x->text, (long long)y->audio_ms, y->text);
            return 0;
        }
    }
    return 1;
}

static void test_split_invariance(void)
{
    sr_model *m = load_model();
    size_t n = RATE * 3 + 777; /* not a whole number of chunks: exercises the final remainder */
    float *x = make_signal(n, 1);
    sr_stream *ref = run_split(m, x, n, 0);
    const sr_timeline *tr = sr_stream_timeline(ref);
    CU_ASSERT_EQUAL(tr->n, n / 1280 + 1);            /* whole chunks + the final entry */
    CU_ASSERT(tr->entries[tr->n - 1].is_final);
    CU_ASSERT_EQUAL(tr->entries[tr->n - 1].audio_ms, (int64_t)(n * 1000 / RATE));
    CU_ASSERT_EQUAL(tr->entries[0].audio_ms, 80);
    CU_ASSERT(strlen(sr_stream_hypothesis(ref)->text) > 3); /* several tokens won */
    const size_t steps[] = {1, 160, 1280, 1279, 4000};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        sr_stream *s = run_split(m, x, n, steps[k]);
        if (!same_timeline(tr, sr_stream_timeline(s))) {
            printf("      (feeding %zu samples per call)\n", steps[k]);
            CU_FAIL("timeline depends on the feed split");
        }
        sr_stream_close(s);
    }
    /* irregular pieces */
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    unsigned r = 7;
    for (size_t i = 0; i < n;) {
        r = r * 1103515245u + 12345u;
        size_t k = SR_MIN((size_t)(r >> 16) % 3000, n - i);
        CU_ASSERT_EQUAL(sr_stream_feed(s, x + i, k), SR_OK);
        i += k;
    }
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    CU_ASSERT(same_timeline(tr, sr_stream_timeline(s)));
    sr_stream_close(s);
    sr_stream_close(ref);
    free(x);
    sr_model_free(m);
}

/* The tokens must be what the documented architecture gives, recomputed here from the weights
 * read independently of the backend. */
static void test_matches_architecture(void)
{
    sr_model *m = load_model();
    sr_h5 *f = NULL;
    sr_tensor w = {0}, b = {0};
    CU_ASSERT_EQUAL_FATAL(sr_h5_open(test_fixture("test_linear.h5"), &f), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f, "proj.weight", SR_F32, 2, (int64_t[]){6, 8}, &w), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_h5_tensor(f, "proj.bias", SR_F32, 1, (int64_t[]){6}, &b), SR_OK);
    size_t n = RATE * 2;
    float *x = make_signal(n, 3);
    int32_t want[64];
    int nw = 0;
    for (size_t c = 0; c < n / 1280; c++) {
        double logit[6];
        for (int v = 0; v < 6; v++) logit[v] = ((float *)b.data)[v];
        for (int band = 0; band < 8; band++) {
            double e = 0;
            for (int i = 0; i < 160; i++) {
                double s = x[c * 1280 + (size_t)band * 160 + (size_t)i];
                e += s * s;
            }
            double feat = (float)log(1e-6 + e / 160);
            for (int v = 0; v < 6; v++) logit[v] += ((float *)w.data)[v * 8 + band] * feat;
        }
        int best = 0;
        for (int v = 1; v < 6; v++)
            if (logit[v] > logit[best]) best = v;
        if (best != 0) want[nw++] = best;
    }
    sr_stream *s = run_split(m, x, n, 0);
    const sr_hypothesis *h = sr_stream_hypothesis(s);
    CU_ASSERT_EQUAL(h->n_tokens, nw);
    CU_ASSERT_EQUAL(h->n_stable, h->n_tokens);
    if (h->n_tokens == nw) CU_ASSERT(!memcmp(h->tokens, want, (size_t)nw * sizeof(int32_t)));
    sr_stream_close(s);
    free(x);
    sr_tensor_free(&w);
    sr_tensor_free(&b);
    sr_h5_close(f);
    sr_model_free(m);
}

static void test_reset_equals_fresh(void)
{
    sr_model *m = load_model();
    size_t n = RATE * 2 + 100;
    float *x = make_signal(n, 2), *y = make_signal(n, 9);
    sr_stream *fresh = run_split(m, x, n, 0);
    sr_stream *s = run_split(m, y, n, 333); /* dirty it with other audio */
    sr_stream_reset(s);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, 0);
    CU_ASSERT_EQUAL(sr_stream_hypothesis(s)->n_tokens, 0);
    CU_ASSERT_STRING_EQUAL(sr_stream_hypothesis(s)->text, "");
    CU_ASSERT_EQUAL(sr_stream_feed(s, x, n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    CU_ASSERT(same_timeline(sr_stream_timeline(fresh), sr_stream_timeline(s)));
    sr_stream_close(s);
    sr_stream_close(fresh);
    free(x);
    free(y);
    sr_model_free(m);
}

static void test_finish_rules(void)
{
    sr_model *m = load_model();
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    CU_ASSERT_STRING_EQUAL(sr_stream_hypothesis(s)->text, "");
    CU_ASSERT_EQUAL(sr_stream_feed(s, NULL, 0), SR_OK);       /* zero samples is fine */
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);              /* empty audio: one final entry */
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, 1);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->entries[0].n_tokens, 0);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->entries[0].audio_ms, 0);
    float z[10] = {0};
    TEST_ASSERT_ERR(sr_stream_feed(s, z, 10), SR_ERR_ARG, "finished");
    TEST_ASSERT_ERR(sr_stream_finish(s), SR_ERR_ARG, "finished");
    sr_stream_reset(s);
    CU_ASSERT_EQUAL(sr_stream_feed(s, z, 10), SR_OK);
    float bad[3] = {0, NAN, 0};
    TEST_ASSERT_ERR(sr_stream_feed(s, bad, 3), SR_ERR_ARG, "sample 1");
    bad[1] = INFINITY;
    TEST_ASSERT_ERR(sr_stream_feed(s, bad, 3), SR_ERR_ARG, "infinite");
    TEST_ASSERT_ERR(sr_stream_feed(s, NULL, 5), SR_ERR_ARG, "NULL");
    TEST_ASSERT_ERR(sr_stream_feed(NULL, z, 5), SR_ERR_ARG, "NULL");
    sr_stream_close(s);
    sr_model_free(m);
}

static void test_record_timeline_off(void)
{
    sr_model *m = load_model();
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.record_timeline = 0;
    sr_stream *s = NULL, *ref = NULL;
    size_t n = RATE * 3;
    float *x = make_signal(n, 5);
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, &c, &s), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s, x, n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, 1);
    sr_memstats a, b;
    sr_memory(m, s, &a);
    CU_ASSERT_EQUAL(sr_stream_feed(s, x, n), SR_OK);
    sr_memory(m, s, &b);
    CU_ASSERT(a.stream_bytes > 0);
    /* the [6, 8] projection as the kernel table holds it (gemm panels) + the f32 bias */
    sr_kweight *kw = NULL;
    float w0[6 * 8] = {0};
    CU_ASSERT_EQUAL_FATAL(sr_kernels_cpu()->weight_create(w0, SR_F32, 6, 8, NULL, SR_KMUL_EXACT, &kw), SR_OK);
    CU_ASSERT(kw->bytes >= 6 * 8 * 4);
    CU_ASSERT_EQUAL(a.weight_bytes, kw->bytes + 6 * 4);
    sr_kernels_cpu()->weight_free(kw);
    CU_ASSERT(b.stream_bytes - a.stream_bytes <= 256); /* only the hypothesis may grow */
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    ref = run_split(m, x, n, 0);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, 1);
    CU_ASSERT(sr_stream_timeline(s)->entries[0].is_final);
    CU_ASSERT(sr_stream_timeline(ref)->entries[sr_stream_timeline(ref)->n - 1].audio_ms * 2 ==
              sr_stream_timeline(s)->entries[0].audio_ms);
    sr_stream_close(s);
    sr_stream_close(ref);
    free(x);
    sr_model_free(m);
}

/* Entries whose hypothesis equals the previous entry's share its block (same pointers); every
 * entry still reads back its own hypothesis, also after reset. The signal has a quiet second
 * in the middle, where test_linear's hypothesis stops changing, so both kinds occur. */
static void test_timeline_sharing(void)
{
    sr_model *m = load_model();
    size_t n = RATE * 4;
    float *x = make_signal(n, 9);
    for (size_t i = RATE; i < 2 * RATE; i++) x[i] = 0.0f;
    sr_stream *s = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &s), SR_OK);
    for (int round = 0; round < 2; round++) {
        /* the hypothesis after each chunk, copied from sr_stream_hypothesis as it happens */
        int32_t *hist = calloc(4096, sizeof *hist);
        int starts[256], lens[256], k = 0, used = 0;
        for (size_t i = 0; i < n && k < 255; i += 640) {
            size_t before = sr_stream_timeline(s)->n;
            CU_ASSERT_EQUAL(sr_stream_feed(s, x + i, SR_MIN(640, n - i)), SR_OK);
            if (sr_stream_timeline(s)->n == before) continue;
            CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, before + 1);
            const sr_hypothesis *h = sr_stream_hypothesis(s);
            CU_ASSERT_FATAL(used + h->n_tokens <= 4096);
            if (h->n_tokens) memcpy(hist + used, h->tokens, (size_t)h->n_tokens * sizeof *hist);
            starts[k] = used, lens[k++] = h->n_tokens, used += h->n_tokens;
        }
        const sr_timeline *tl = sr_stream_timeline(s);
        CU_ASSERT_EQUAL_FATAL(tl->n, (size_t)k);
        int shared = 0, own = 0;
        for (int i = 0; i < k; i++) {
            const sr_timeline_entry *e = &tl->entries[i];
            CU_ASSERT_EQUAL(e->n_tokens, lens[i]);
            CU_ASSERT(lens[i] == 0 || !memcmp(e->tokens, hist + starts[i], (size_t)lens[i] * 4));
            if (i == 0) continue;
            int same = lens[i] == lens[i - 1] &&
                       !memcmp(hist + starts[i], hist + starts[i - 1], (size_t)lens[i] * 4);
            const sr_timeline_entry *p = &tl->entries[i - 1];
            CU_ASSERT_EQUAL(same, e->tokens == p->tokens && e->text == p->text);
            CU_ASSERT(same || strcmp(e->text, p->text) != 0 || e->n_tokens != p->n_tokens);
            shared += same, own += !same;
        }
        CU_ASSERT(shared > 0);
        CU_ASSERT(own > 0);
        free(hist);
        sr_stream_reset(s); /* frees shared and owned blocks alike (ASan checks) */
    }
    sr_stream_close(s);
    free(x);
    sr_model_free(m);
}

static void test_stream_config_errors(void)
{
    sr_model *m = load_model();
    sr_stream_config c;
    sr_stream *s = NULL;
    sr_stream_config_init(&c);
    c.decoder = "no_such_decoder";
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "sync_greedy"); /* lists known ones */
    CU_ASSERT_PTR_NULL(s);
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.strategy");
    sr_stream_config_init(&c);
    c.chunk_ms = 100;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.chunk_ms");
    sr_stream_config_init(&c);
    c.beam = 4;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.beam");
    TEST_ASSERT_ERR(sr_stream_open(NULL, &c, &s), SR_ERR_ARG, "model");
    sr_model_free(m);
}

typedef struct {
    const sr_model *m;
    const float *x;
    size_t n, step;
    char text[4096];
    int ok;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int rep = 0; rep < 3; rep++) {
        sr_stream *s = NULL;
        if (sr_stream_open(w->m, NULL, &s)) return NULL;
        for (size_t i = 0; i < w->n; i += w->step)
            if (sr_stream_feed(s, w->x + i, SR_MIN(w->step, w->n - i))) return NULL;
        if (sr_stream_finish(s)) return NULL;
        snprintf(w->text, sizeof w->text, "%s", sr_stream_hypothesis(s)->text);
        sr_stream_close(s);
    }
    w->ok = 1;
    return NULL;
}

/* Two threads, two streams, one model: each equals its single-threaded result. */
static void test_two_threads(void)
{
    sr_model *m = load_model();
    size_t n = RATE * 4;
    float *x = make_signal(n, 11), *y = make_signal(n, 12);
    sr_stream *rx = run_split(m, x, n, 0), *ry = run_split(m, y, n, 0);
    CU_ASSERT(strcmp(sr_stream_hypothesis(rx)->text, sr_stream_hypothesis(ry)->text) != 0);
    worker a = {m, x, n, 160, "", 0}, b = {m, y, n, 999, "", 0};
    pthread_t ta, tb;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ta, NULL, work, &a), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tb, NULL, work, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CU_ASSERT(a.ok && b.ok);
    CU_ASSERT_STRING_EQUAL(a.text, sr_stream_hypothesis(rx)->text);
    CU_ASSERT_STRING_EQUAL(b.text, sr_stream_hypothesis(ry)->text);
    sr_stream_close(rx);
    sr_stream_close(ry);
    free(x);
    free(y);
    sr_model_free(m);
}

/* Real speech through the engine (when ../shared is present): split-invariance on jfk.wav. */
static void test_real_speech(void)
{
    const char *p = test_shared("speech-samples/jfk.wav");
    if (!p) { TEST_SKIP("../shared/data absent"); return; }
    sr_audio a = {0};
    CU_ASSERT_EQUAL_FATAL(sr_audio_load(p, 16000, &a), SR_OK);
    sr_model *m = load_model();
    sr_stream *r1 = run_split(m, a.samples, a.n, 0), *r2 = run_split(m, a.samples, a.n, 160);
    CU_ASSERT(same_timeline(sr_stream_timeline(r1), sr_stream_timeline(r2)));
    CU_ASSERT_EQUAL(sr_stream_timeline(r1)->n, a.n / 1280 + 1);
    sr_stream_close(r1);
    sr_stream_close(r2);
    sr_model_free(m);
    sr_audio_free(&a);
}

void test_register_core_stream(void)
{
    TEST_SUITE("core_stream",
               {"feed split invariance (1, 160, 1280, 1279, 4000, random)", test_split_invariance},
               {"output matches the documented architecture", test_matches_architecture},
               {"reset equals a fresh stream", test_reset_equals_fresh},
               {"finish, empty audio, bad samples", test_finish_rules},
               {"record_timeline = 0 keeps memory bounded", test_record_timeline_off},
               {"unchanged hypotheses share one timeline block", test_timeline_sharing},
               {"stream config errors name the field", test_stream_config_errors},
               {"two threads share one model", test_two_threads},
               {"real speech (jfk.wav) split invariance", test_real_speech});
}
