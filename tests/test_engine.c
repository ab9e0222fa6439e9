/*
 * test_engine.c — the batched engine (core/stream.c, sr_engine_*) against solo streams.
 *
 *   engine_equals_solo  many streams on one engine — random start steps, random feed sizes,
 *                       finishes at different steps, a reset mid-way, a stream closed early and
 *                       its slot reused by a new one — give every stream exactly the timeline
 *                       (tokens, stable counts, audio positions, text) of the same audio in a
 *                       solo stream. Every backend: test_linear (1 and 32 streams),
 *                       FastConformer (f32 and f16 caches, greedy and beam, offline; 3..24
 *                       streams), Whisper (whisperrt with stable_greedy / stable_beam,
 *                       reencode, offline; 3..16 streams), Voxtral (f32 and bf16 caches; 3..12
 *                       streams); real tiny.en on generated speech when it is present.
 *                       On the CUDA device (skips without one): 1, 8 and 64 streams of
 *                       each backend, precision f32 and bf16.
 *   engine_threads      streams fed (and finished) from several threads while the test's thread
 *                       steps the engine: each stream equals its solo run (`make tsan` runs it
 *                       under ThreadSanitizer).
 *   engine_api          arguments, slot limits, queued audio, errors of engine streams, memory;
 *                       a stream whose chunk fails in a step (test_linear's failure sample) is
 *                       marked failed, the others finish as solo, and a reset revives it.
 */
#include "../core/plugin.h"
#include "../kernels/cpu/cpu_impl.h" /* sr_kernels_cpu_guard_recordings */
#include "test.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#define TWO_PI 6.283185307179586
#define MIN_SZ(a, b) ((a) < (b) ? (a) : (b))

/* ---- audio and randomness ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* n samples of a voiced-like signal (two drifting partials and noise), seeded. */
static float *make_audio(uint64_t seed, size_t n)
{
    float *a = malloc(n * sizeof *a);
    if (!a) return NULL;
    uint64_t r = seed * 7919 + 17;
    double f1 = 120 + (double)(rng_next(&r) % 200), f2 = 700 + (double)(rng_next(&r) % 1500);
    double p1 = 0, p2 = 0;
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / 16000.0;
        p1 += TWO_PI * f1 * (1 + 0.2 * sin(TWO_PI * 0.7 * t)) / 16000.0;
        p2 += TWO_PI * f2 * (1 + 0.1 * sin(TWO_PI * 1.3 * t)) / 16000.0;
        double env = 0.5 + 0.5 * sin(TWO_PI * 2.1 * t + (double)(seed % 7));
        double noise = ((double)(rng_next(&r) % 2001) - 1000.0) / 1000.0;
        a[i] = (float)(env * (0.3 * sin(p1) + 0.15 * sin(p2)) + 0.02 * noise);
    }
    return a;
}

/* ---- comparing timelines ---- */

/* 1 when the two timelines are the same in everything but compute times. */
static int same_timeline(const sr_timeline *a, const sr_timeline *b, const char *what, int id)
{
    if (a->n != b->n) {
        printf("\n      %s stream %d: %zu timeline entries, solo %zu\n", what, id, a->n, b->n);
        return 0;
    }
    for (size_t i = 0; i < a->n; i++) {
        const sr_timeline_entry *x = &a->entries[i], *y = &b->entries[i];
        if (x->audio_ms != y->audio_ms || x->n_tokens != y->n_tokens || x->n_stable != y->n_stable ||
            x->is_final != y->is_final ||
            (x->n_tokens && memcmp(x->tokens, y->tokens, (size_t)x->n_tokens * sizeof(int32_t))) ||
            strcmp(x->text, y->text)) {
            printf("\n      %s stream %d entry %zu: engine \"%s\" (%d tokens, %d stable, %lld ms), "
                   "solo \"%s\" (%d, %d, %lld ms)\n",
                   what, id, i, x->text, x->n_tokens, x->n_stable, (long long)x->audio_ms, y->text,
                   y->n_tokens, y->n_stable, (long long)y->audio_ms);
            return 0;
        }
    }
    return 1;
}

/* The solo stream of `audio` fed in one call; NULL on failure (asserted). */
static sr_stream *solo_run(const sr_model *m, const sr_stream_config *cfg, const float *audio,
                           size_t n)
{
    sr_stream *s = NULL;
    sr_status st = sr_stream_open(m, cfg, &s);
    if (!st) st = sr_stream_feed(s, audio, n);
    if (!st) st = sr_stream_finish(s);
    if (st) {
        printf("\n      solo stream: %s\n", sr_last_error());
        CU_FAIL("solo stream");
        sr_stream_close(s);
        return NULL;
    }
    return s;
}

/* One stream of the scenario. */
typedef struct {
    float *audio;
    size_t n, fed;
    int start;          /* driver iteration at which it opens */
    int reset_at;       /* iteration at which it resets and starts over (-1: never) */
    int close_at;       /* iteration at which it is closed unfinished (-1: never) */
    int done;           /* finished (or closed) */
    sr_stream *s;
} player;

/* The scenario of the file comment with n_streams streams (plus one that replaces an early
 * closed stream) on one engine of n_streams slots; every surviving stream compared with solo.
 * Audio lengths between min_s and max_s seconds. */
static void engine_vs_solo(const sr_model *m, const sr_stream_config *cfg, int n_streams,
                           double min_s, double max_s, uint64_t seed, const char *what)
{
    sr_engine *e = NULL;
    sr_status st = sr_engine_create(m, cfg, n_streams, &e);
    if (st) printf("\n      %s: %s\n", what, sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    int np = n_streams + 1;
    player *p = calloc((size_t)np, sizeof *p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint64_t r = seed;
    for (int i = 0; i < np; i++) {
        double sec = min_s + (max_s - min_s) * (double)(rng_next(&r) % 1000) / 1000.0;
        p[i].n = (size_t)(sec * 16000);
        p[i].audio = make_audio(seed * 131 + (uint64_t)i, p[i].n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p[i].audio);
        p[i].start = (int)(rng_next(&r) % 6);
        p[i].reset_at = p[i].close_at = -1;
    }
    /* stream 0 resets mid-way; stream 1 (if any) is closed early and the extra player takes
     * its slot once it is free */
    p[0].reset_at = p[0].start + 3;
    if (n_streams > 1) {
        p[1].close_at = p[1].start + 2;
        p[np - 1].start = -1; /* opened when player 1 closes */
    } else {
        p[np - 1].done = 1;   /* no replacement with one slot */
    }
    int ok = 1, busy = 1;
    for (int it = 0; busy && it < 100000 && ok; it++) {
        busy = 0;
        for (int i = 0; i < np && ok; i++) {
            player *q = &p[i];
            if (q->done) continue;
            busy = 1;
            if (!q->s) {
                if (q->start < 0 || it < q->start) continue;
                if ((st = sr_engine_open(e, &q->s))) {
                    printf("\n      %s: open: %s\n", what, sr_last_error());
                    ok = 0;
                    break;
                }
            }
            if (it == q->close_at) {
                sr_stream_close(q->s);
                q->s = NULL;
                q->done = 1;
                p[np - 1].start = it; /* the replacement opens now, into the freed slot */
                continue;
            }
            if (it == q->reset_at) {
                sr_stream_reset(q->s);
                q->fed = 0;
            }
            if (q->fed < q->n) {
                size_t want = (size_t)(rng_next(&r) % 4000);
                size_t take = MIN_SZ(want, q->n - q->fed);
                if ((st = sr_stream_feed(q->s, q->audio + q->fed, take))) {
                    printf("\n      %s: feed: %s\n", what, sr_last_error());
                    ok = 0;
                    break;
                }
                q->fed += take;
                if (q->fed == q->n && (st = sr_stream_finish(q->s))) {
                    printf("\n      %s: finish: %s\n", what, sr_last_error());
                    ok = 0;
                    break;
                }
            }
        }
        /* zero, one or two steps between rounds of feeding */
        int steps = (int)(rng_next(&r) % 3);
        for (int k = 0; k < steps && ok; k++)
            if ((st = sr_engine_step(e, NULL))) {
                printf("\n      %s: step: %s\n", what, sr_last_error());
                ok = 0;
            }
        /* a player whose audio is all in and whose final chunk ran is done */
        for (int i = 0; i < np; i++)
            if (p[i].s && !p[i].done && p[i].fed == p[i].n && !sr_engine_ready(e)) {
                const sr_timeline *tl = sr_stream_timeline(p[i].s);
                if (tl->n && tl->entries[tl->n - 1].is_final) p[i].done = 1;
            }
    }
    CU_ASSERT(ok);
    if (ok) {
        st = sr_engine_drain(e);
        CU_ASSERT_EQUAL(st, SR_OK);
        int compared = 0;
        for (int i = 0; i < np; i++) {
            if (!p[i].s) continue;
            sr_stream *solo = solo_run(m, cfg, p[i].audio, p[i].n);
            if (!solo) continue;
            CU_ASSERT(same_timeline(sr_stream_timeline(p[i].s), sr_stream_timeline(solo), what, i));
            CU_ASSERT_STRING_EQUAL(sr_stream_hypothesis(p[i].s)->text, sr_stream_hypothesis(solo)->text);
            compared++;
            sr_stream_close(solo);
        }
        CU_ASSERT_EQUAL(compared, n_streams);
    }
    sr_engine_free(e); /* closes the engine's streams */
    for (int i = 0; i < np; i++) free(p[i].audio);
    free(p);
}

static void test_linear_32(void)
{
    sr_model *m = test_load_model("test_linear.h5");
    engine_vs_solo(m, NULL, 32, 0.2, 1.5, 1, "test_linear");
    engine_vs_solo(m, NULL, 1, 0.2, 1.5, 2, "test_linear x1");
    sr_model_free(m);
}

static void test_fastconformer(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5");
    sr_stream_config c;
    sr_stream_config_init(&c);
    engine_vs_solo(m, &c, 6, 0.5, 2.5, 3, "fastconformer greedy");
    engine_vs_solo(m, &c, 24, 0.3, 1.5, 14, "fastconformer greedy, 24 streams");
    c.cache_dtype = "f16";
    engine_vs_solo(m, &c, 4, 0.5, 2.0, 4, "fastconformer f16 caches");
    c.cache_dtype = NULL;
    c.decoder = "rnnt_beam";
    c.beam = 3;
    engine_vs_solo(m, &c, 3, 0.5, 1.5, 5, "fastconformer beam");
    engine_vs_solo(m, &c, 10, 0.3, 1.2, 22, "fastconformer beam, 10 streams");
    c.decoder = NULL;
    c.beam = 0;
    c.strategy = "offline";
    engine_vs_solo(m, &c, 3, 0.5, 1.5, 6, "fastconformer offline");
    sr_model_free(m);
    /* TDT (durations): rnnt_greedy's batched update steps frames by the predicted durations */
    m = test_load_model("fastconformer/rand_tdt.h5");
    engine_vs_solo(m, NULL, 7, 0.5, 2.0, 17, "fastconformer TDT greedy, 7 streams");
    sr_model_free(m);
}

static void test_whisper(void)
{
    sr_model *m = test_load_model("whisper/rand.h5");
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    c.chunk_ms = 100;
    c.decoder = "stable_greedy";
    engine_vs_solo(m, &c, 5, 0.5, 2.0, 7, "whisper whisperrt stable_greedy");
    engine_vs_solo(m, &c, 16, 0.3, 1.2, 15, "whisper whisperrt stable_greedy, 16 streams");
    c.decoder = "stable_beam";
    c.beam = 3;
    engine_vs_solo(m, &c, 3, 0.5, 1.5, 8, "whisper whisperrt stable_beam");
    engine_vs_solo(m, &c, 12, 0.3, 1.2, 18, "whisper whisperrt stable_beam, 12 streams");
    c.decoder = "local_agreement";
    c.beam = 0;
    c.strategy = "reencode";
    c.chunk_ms = 300;
    engine_vs_solo(m, &c, 3, 0.5, 1.5, 9, "whisper reencode local_agreement");
    c.decoder = "stable_beam";
    c.beam = 2;
    engine_vs_solo(m, &c, 4, 0.5, 1.5, 19, "whisper reencode stable_beam");
    c.strategy = "offline";
    c.decoder = NULL;
    c.beam = 0;
    engine_vs_solo(m, &c, 3, 0.5, 1.5, 10, "whisper offline");
    engine_vs_solo(m, &c, 9, 0.3, 1.2, 20, "whisper offline, 9 streams");
    c.decoder = "aed_beam";
    c.beam = 3;
    engine_vs_solo(m, &c, 6, 0.5, 1.5, 21, "whisper offline aed_beam");
    sr_model_free(m);
}

static void test_voxtral(void)
{
    sr_model *m = test_load_model("voxtral/model.h5");
    engine_vs_solo(m, NULL, 4, 0.5, 2.0, 11, "voxtral");
    engine_vs_solo(m, NULL, 12, 0.3, 1.2, 16, "voxtral, 12 streams");
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.cache_dtype = "bf16";
    engine_vs_solo(m, &c, 3, 0.5, 1.5, 12, "voxtral bf16 caches");
    sr_model_free(m);
}

/* precision "bf16": every product of bf16 weights with bf16-rounded activations (AMX,
 * AVX512_BF16 or the portable path, whichever this CPU has): batched is still solo, bit for
 * bit, for the three backends. */
static sr_model *load_bf16(const char *name)
{
    sr_options o;
    sr_options_init(&o);
    o.precision = "bf16";
    sr_model *m = NULL;
    sr_status st = sr_model_load(test_fixture(name), &o, &m);
    if (st) printf("\n      load %s (bf16): %s\n", name, sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    /* every matrix of the products (the fixtures' are f32) is bf16 with bf16 products */
    int bf = 0;
    for (size_t i = 0; i < m->n_kweights; i++)
        bf += m->kweights[i]->dtype == SR_BF16 && m->kweights[i]->mul == SR_KMUL_BF16;
    CU_ASSERT(m->n_kweights > 0);
    CU_ASSERT_EQUAL((size_t)bf, m->n_kweights);
    return m;
}

static void test_precision_bf16(void)
{
    sr_stream_config c;
    sr_model *m = load_bf16("fastconformer/rand.h5");
    engine_vs_solo(m, NULL, 6, 0.5, 2.0, 21, "fastconformer, precision bf16");
    sr_model_free(m);
    m = load_bf16("whisper/rand.h5");
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    c.chunk_ms = 100;
    c.decoder = "stable_greedy";
    engine_vs_solo(m, &c, 6, 0.5, 2.0, 22, "whisper whisperrt, precision bf16");
    sr_model_free(m);
    m = load_bf16("voxtral/model.h5");
    engine_vs_solo(m, NULL, 4, 0.5, 1.5, 23, "voxtral, precision bf16");
    sr_model_free(m);
}

/* On cpu-guard (the CPU ops over memory the host cannot touch outside them: a stand-in for a
 * device) the device-ready backends' batched steps equal their solo streams too. */
static void test_cpu_guard(void)
{
    sr_options o;
    sr_options_init(&o);
    o.device = "cpu-guard";
    const char *names[] = {"fastconformer/rand.h5", "voxtral/model.h5", "whisper/rand.h5"};
    for (int i = 0; i < 3; i++) {
        sr_model *m = NULL;
        sr_status st = sr_model_load(test_fixture(names[i]), &o, &m);
        if (st) printf("\n      load %s on cpu-guard: %s\n", names[i], sr_last_error());
        CU_ASSERT_EQUAL_FATAL(st, SR_OK);
        sr_stream_config c;
        sr_stream_config_init(&c);
        if (i == 2) {
            c.strategy = "whisperrt";
            c.chunk_ms = 100;
            c.decoder = "stable_greedy";
        }
        unsigned long long runs = sr_kernels_cpu_guard_recordings();
        engine_vs_solo(m, &c, 4, 0.5, 1.5, 31 + (uint64_t)i, names[i]);
        /* FastConformer records each round's layers, Voxtral its encoder rounds and decoder
         * steps, Whisper its decoder passes (graph_begin .. graph_end): the guard refuses
         * anything in them a CUDA graph could not hold */
        printf("\n      %s: %llu recordings", names[i], sr_kernels_cpu_guard_recordings() - runs);
        CU_ASSERT(sr_kernels_cpu_guard_recordings() > runs + 8);
        sr_model_free(m);
    }
    printf("\n      ");
}

/* On the CUDA device (skips without one): batched == solo for 1, 8 and 64 streams of each
 * backend, every stream's timeline, as on the CPU, with exact products and with bf16 products
 * on the tensor cores. SRKIT_TEST_CUDA_MAX_STREAMS=N leaves out the counts above N (a run
 * under compute-sanitizer, many times slower, with 1 and 8). */
static void test_cuda(void)
{
    const sr_kernels *g = NULL;
    if (sr_kernels_cuda(&g)) {
        char why[300];
        snprintf(why, sizeof why, "no CUDA table here (%s)", sr_last_error());
        TEST_SKIP(why);
        return;
    }
    sr_options o;
    sr_options_init(&o);
    o.device = "cuda";
    const char *names[] = {"fastconformer/rand.h5", "voxtral/model.h5", "whisper/rand.h5"};
    const int counts[] = {1, 8, 64};
    for (int i = 0; i < 6; i++) {
        /* precision f32 (the exact products), then bf16 (the tensor cores) */
        o.precision = i < 3 ? "f32" : "bf16";
        sr_model *m = NULL;
        sr_status st = sr_model_load(test_fixture(names[i % 3]), &o, &m);
        if (st) printf("\n      load %s on cuda: %s\n", names[i % 3], sr_last_error());
        CU_ASSERT_EQUAL_FATAL(st, SR_OK);
        sr_stream_config c;
        sr_stream_config_init(&c);
        if (i % 3 == 2) {
            c.strategy = "whisperrt";
            c.chunk_ms = 100;
            c.decoder = "stable_greedy";
        }
        const char *cap = getenv("SRKIT_TEST_CUDA_MAX_STREAMS");
        for (int k = 0; k < 3; k++) {
            if (cap && counts[k] > atoi(cap)) continue;
            char what[160];
            snprintf(what, sizeof what, "%s on cuda, precision %s, %d streams", names[i % 3],
                     o.precision, counts[k]);
            engine_vs_solo(m, &c, counts[k], 0.3, counts[k] > 8 ? 1.0 : 1.5,
                           41 + (uint64_t)(i * 3 + k), what);
        }
        sr_model_free(m);
    }
}

/* Real tiny.en with generated speech (both optional). */
static void test_tiny_en(void)
{
    const char *path = test_tiny_en_path();
    if (!path) {
        TEST_SKIP("whisper-tiny.en.h5 not present (make models)");
        return;
    }
    sr_model *m = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_model_load(path, NULL, &m), SR_OK);
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    c.chunk_ms = 300;
    c.decoder = "stable_greedy";
    engine_vs_solo(m, &c, 3, 1.0, 2.5, 13, "tiny.en whisperrt 300 ms");
    sr_model_free(m);
}

/* ---- streams fed from several threads ---- */

typedef struct {
    sr_stream **s;
    float **audio;
    size_t *n;
    int first, count; /* the streams this feeder owns */
    uint64_t seed;
    sr_status st;
    char msg[256];
    atomic_int *running;
} feeder;

static void *feeder_main(void *arg)
{
    feeder *f = arg;
    uint64_t r = f->seed;
    size_t *fed = calloc((size_t)f->count, sizeof *fed);
    int left = f->count;
    while (fed && left && !f->st) {
        for (int k = 0; k < f->count && !f->st; k++) {
            int i = f->first + k;
            if (fed[k] > f->n[i]) continue; /* finished */
            size_t want = (size_t)(rng_next(&r) % 3000);
            size_t take = MIN_SZ(want, f->n[i] - fed[k]);
            f->st = sr_stream_feed(f->s[i], f->audio[i] + fed[k], take);
            fed[k] += take;
            if (!f->st && fed[k] == f->n[i]) {
                f->st = sr_stream_finish(f->s[i]);
                fed[k]++; /* marks it finished */
                left--;
            }
        }
        struct timespec ts = {0, (long)(rng_next(&r) % 2000000)};
        nanosleep(&ts, NULL);
    }
    if (f->st) snprintf(f->msg, sizeof f->msg, "%s", sr_last_error());
    free(fed);
    atomic_fetch_sub(f->running, 1);
    return NULL;
}

static void threads_vs_solo(const sr_model *m, const sr_stream_config *cfg, int n_streams,
                            int n_threads, uint64_t seed, const char *what)
{
    sr_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_engine_create(m, cfg, n_streams, &e), SR_OK);
    sr_stream **s = calloc((size_t)n_streams, sizeof *s);
    float **audio = calloc((size_t)n_streams, sizeof *audio);
    size_t *n = calloc((size_t)n_streams, sizeof *n);
    feeder *f = calloc((size_t)n_threads, sizeof *f);
    pthread_t *th = calloc((size_t)n_threads, sizeof *th);
    CU_ASSERT_FATAL(s && audio && n && f && th);
    uint64_t r = seed;
    for (int i = 0; i < n_streams; i++) {
        n[i] = (size_t)(8000 + rng_next(&r) % 24000);
        audio[i] = make_audio(seed * 977 + (uint64_t)i, n[i]);
        CU_ASSERT_EQUAL_FATAL(sr_engine_open(e, &s[i]), SR_OK);
    }
    atomic_int running = n_threads;
    int per = n_streams / n_threads;
    for (int t = 0; t < n_threads; t++) {
        f[t] = (feeder){.s = s, .audio = audio, .n = n, .first = t * per,
                        .count = t == n_threads - 1 ? n_streams - t * per : per,
                        .seed = seed * 31 + (uint64_t)t, .running = &running};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, feeder_main, &f[t]), 0);
    }
    sr_status st = SR_OK;
    while (!st && atomic_load(&running) > 0) {
        int k = 0;
        st = sr_engine_step(e, &k);
        if (!k) {
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
    for (int t = 0; t < n_threads; t++) {
        pthread_join(th[t], NULL);
        if (f[t].st) printf("\n      %s feeder %d: %s\n", what, t, f[t].msg);
        CU_ASSERT_EQUAL(f[t].st, SR_OK);
    }
    if (!st) st = sr_engine_drain(e);
    if (st) printf("\n      %s: step: %s\n", what, sr_last_error());
    CU_ASSERT_EQUAL(st, SR_OK);
    for (int i = 0; i < n_streams && !st; i++) {
        sr_stream *solo = solo_run(m, cfg, audio[i], n[i]);
        if (!solo) continue;
        const sr_timeline *tl = sr_stream_timeline(s[i]);
        CU_ASSERT(tl->n && tl->entries[tl->n - 1].is_final);
        CU_ASSERT(same_timeline(tl, sr_stream_timeline(solo), what, i));
        sr_stream_close(solo);
    }
    sr_engine_free(e);
    for (int i = 0; i < n_streams; i++) free(audio[i]);
    free(s);
    free(audio);
    free(n);
    free(f);
    free(th);
}

static void test_threads(void)
{
    sr_model *m = test_load_model("fastconformer/rand.h5");
    threads_vs_solo(m, NULL, 6, 3, 21, "fastconformer, 3 feeding threads");
    sr_model_free(m);
    m = test_load_model("whisper/rand.h5");
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = "whisperrt";
    c.chunk_ms = 100;
    c.decoder = "stable_greedy";
    threads_vs_solo(m, &c, 4, 2, 22, "whisper whisperrt, 2 feeding threads");
    sr_model_free(m);
    m = test_load_model("voxtral/model.h5");
    threads_vs_solo(m, NULL, 4, 4, 23, "voxtral, 4 feeding threads");
    sr_model_free(m);
}

/* ---- API ---- */

/* ---- op calls per step do not grow with the streams ---- */

enum { OPC_MAX = 64 };

/* Op calls while n_streams identical streams (the same audio, fed and stepped together) run to
 * their end on m (whose table is the profiling one), counted from after the streams opened. */
static int op_calls(const sr_model *m, const sr_stream_config *cfg, int n_streams,
                    const float *audio, size_t n, sr_kprof_entry *out)
{
    sr_engine *e = NULL;
    sr_stream *st[8] = {0};
    int ok = sr_engine_create(m, cfg, n_streams, &e) == SR_OK;
    for (int i = 0; ok && i < n_streams; i++) ok = sr_engine_open(e, &st[i]) == SR_OK;
    sr_kernels_profile_reset();
    for (int i = 0; ok && i < n_streams; i++)
        ok = sr_stream_feed(st[i], audio, n) == SR_OK && sr_stream_finish(st[i]) == SR_OK;
    for (int it = 0; ok && sr_engine_ready(e) && it < 100000; it++) {
        int nc = 0;
        ok = sr_engine_step(e, &nc) == SR_OK;
    }
    int k = ok ? sr_kernels_profile_read(out, OPC_MAX) : -1;
    if (!ok) printf("\n      op_calls: %s", sr_last_error());
    sr_engine_free(e);
    return k;
}

static uint64_t calls_of(const sr_kprof_entry *p, int n, const char *op)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].op, op)) return p[i].calls;
    return 0;
}

/* 8 identical streams (the same audio, fed and stepped together) against one, streaming
 * backends whose steps and decoders batch every call over the streams: the data-movement ops
 * (uploads, copies, allocations) are called no more often (fewer where the streams share work:
 * Voxtral's 8-slot context takes its streams' first steps from the shared prefix, so they make
 * fewer encoder calls than a lone stream, which computes them), and every other op at most a
 * quarter more often (a decoder pass splits where its rows outgrow the scratch). A per-stream
 * call shows up as 8x. download is not counted: on the CPU the decoders' rows are copied one
 * by one (host memory is the table's). Not covered: offline / reencode (one 30 s window per
 * stream per encoder pass by design). SRKIT_PROFILE's table counts the calls. */
static void test_op_calls(void)
{
    static const struct { const char *model, *strategy, *decoder; int beam; } cases[] = {
        {"voxtral/model.h5", NULL, NULL, 0},
        {"whisper/rand.h5", "whisperrt", "stable_greedy", 0},
        {"whisper/rand.h5", "whisperrt", "stable_beam", 3},
        {"fastconformer/rand.h5", NULL, NULL, 0},
        {"fastconformer/rand.h5", NULL, "rnnt_beam", 4},
        {"fastconformer/rand_tdt.h5", NULL, NULL, 0},
    };
    static const char *const moving[] = {"alloc", "free", "upload", "sync", "zero", "copy2d",
                                        "transpose", "conv2d_s2"};
    const char *was = getenv("SRKIT_PROFILE");
    if (was) {
        printf("\n      skipped: SRKIT_PROFILE is set in the environment");
        return;
    }
    size_t n = 24000;
    float *audio = make_audio(99, n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(audio);
    for (size_t c = 0; c < SR_ARRAY_LEN(cases); c++) {
        setenv("SRKIT_PROFILE", "1", 1);
        sr_model *m = test_load_model(cases[c].model);
        unsetenv("SRKIT_PROFILE");
        sr_stream_config cfg;
        sr_stream_config_init(&cfg);
        cfg.strategy = cases[c].strategy;
        cfg.decoder = cases[c].decoder;
        cfg.beam = cases[c].beam;
        if (cfg.strategy && !strcmp(cfg.strategy, "whisperrt")) cfg.chunk_ms = 100;
        sr_kprof_entry one[OPC_MAX], many[OPC_MAX];
        int n1 = op_calls(m, &cfg, 1, audio, n, one), n8 = op_calls(m, &cfg, 8, audio, n, many);
        CU_ASSERT(n1 > 0 && n8 > 0);
        uint64_t total = 0;
        for (int i = 0; i < n8; i++) {
            if (!strcmp(many[i].op, "download")) continue;
            uint64_t a = calls_of(one, n1, many[i].op), b = many[i].calls;
            int data_move = 0;
            for (size_t e = 0; e < SR_ARRAY_LEN(moving); e++) data_move |= !strcmp(many[i].op, moving[e]);
            total += b;
            int ok = data_move ? b <= a : b <= a + a / 4;
            if (!ok)
                printf("\n      %s %s: %s called %llu times for 1 stream, %llu for 8",
                       cases[c].model, cases[c].decoder ? cases[c].decoder : "(default)",
                       many[i].op, (unsigned long long)a, (unsigned long long)b);
            CU_ASSERT(ok);
        }
        CU_ASSERT(total > 0);
        sr_model_free(m);
    }
    /* rnnt_beam with stream.beam 0 (its default, 4): all beams' calls of a round in one call,
     * as with beam 4 (the scorer's rows are sized for the beams the decoder takes) */
    setenv("SRKIT_PROFILE", "1", 1);
    sr_model *m = test_load_model("fastconformer/rand.h5");
    unsetenv("SRKIT_PROFILE");
    sr_kprof_entry b0[OPC_MAX], b4[OPC_MAX];
    sr_stream_config cfg;
    sr_stream_config_init(&cfg);
    cfg.decoder = "rnnt_beam";
    cfg.beam = 0;
    int n0 = op_calls(m, &cfg, 8, audio, n, b0);
    cfg.beam = 4;
    int n4 = op_calls(m, &cfg, 8, audio, n, b4);
    CU_ASSERT(n0 > 0 && calls_of(b0, n0, "lstm_cell") > 0);
    CU_ASSERT_EQUAL(calls_of(b0, n0, "lstm_cell"), calls_of(b4, n4, "lstm_cell"));
    CU_ASSERT_EQUAL(calls_of(b0, n0, "gemm"), calls_of(b4, n4, "gemm"));
    sr_model_free(m);
    free(audio);
}

static void test_api(void)
{
    sr_model *m = test_load_model("test_linear.h5");
    sr_engine *e = NULL;
    sr_stream *s = NULL, *s2 = NULL, *s3 = NULL;
    TEST_ASSERT_ERR(sr_engine_create(m, NULL, 0, &e), SR_ERR_ARG, "max_streams 0");
    TEST_ASSERT_ERR(sr_engine_create(NULL, NULL, 2, &e), SR_ERR_ARG, "model is NULL");
    TEST_ASSERT_ERR(sr_engine_create(m, NULL, 2, NULL), SR_ERR_ARG, "out is NULL");
    sr_stream_config c;
    sr_stream_config_init(&c);
    c.strategy = "nope";
    TEST_ASSERT_ERR(sr_engine_open(NULL, &s), SR_ERR_ARG, "engine is NULL");
    /* a bad config fails where the backend first sees it, naming the field */
    sr_status st = sr_engine_create(m, &c, 2, &e);
    if (!st) {
        TEST_ASSERT_ERR(sr_engine_open(e, &s), SR_ERR_ARG, "stream.strategy");
        sr_engine_free(e);
    } else {
        CU_ASSERT(strstr(sr_last_error(), "stream.strategy") != NULL);
    }
    /* numbers out of their documented range (core/internal.h) are refused for every backend
     * before any size is computed from them */
    sr_stream_config_init(&c);
    c.chunk_ms = 2147483647;
    TEST_ASSERT_ERR(sr_engine_create(m, &c, 2, &e), SR_ERR_ARG, "stream.chunk_ms: 2147483647 is outside 0 .. 600000");
    sr_stream_config_init(&c);
    c.beam = 65;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.beam: 65 is outside 0 .. 64");
    sr_stream_config_init(&c);
    c.att_context[1] = -2;
    TEST_ASSERT_ERR(sr_stream_open(m, &c, &s), SR_ERR_ARG, "stream.att_context[1]");
    CU_ASSERT_EQUAL_FATAL(sr_engine_create(m, NULL, 2, &e), SR_OK);
    CU_ASSERT_EQUAL(sr_engine_max_streams(e), 2);
    CU_ASSERT_EQUAL_FATAL(sr_engine_open(e, &s), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_engine_open(e, &s2), SR_OK);
    CU_ASSERT_EQUAL(sr_engine_streams(e), 2);
    TEST_ASSERT_ERR(sr_engine_open(e, &s3), SR_ERR_ARG, "all 2 streams");
    CU_ASSERT_PTR_NULL(s3);
    /* feeding queues; nothing runs until a step */
    size_t n = 16000;
    float *a = make_audio(99, n);
    CU_ASSERT_EQUAL(sr_stream_feed(s, a, n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, 0);
    CU_ASSERT_EQUAL(sr_engine_ready(e), 1);
    int k = -1;
    CU_ASSERT_EQUAL(sr_engine_step(e, &k), SR_OK);
    CU_ASSERT_EQUAL(k, 1);
    CU_ASSERT_EQUAL(sr_stream_timeline(s)->n, 1);
    float bad[3] = {0, NAN, 0};
    TEST_ASSERT_ERR(sr_stream_feed(s2, bad, 3), SR_ERR_ARG, "sample 1");
    CU_ASSERT_EQUAL(sr_stream_finish(s), SR_OK);
    TEST_ASSERT_ERR(sr_stream_feed(s, a, 10), SR_ERR_ARG, "already finished");
    TEST_ASSERT_ERR(sr_stream_finish(s), SR_ERR_ARG, "already finished");
    CU_ASSERT_EQUAL(sr_engine_drain(e), SR_OK);
    CU_ASSERT_EQUAL(sr_engine_ready(e), 0);
    const sr_timeline *tl = sr_stream_timeline(s);
    CU_ASSERT(tl->n >= 2 && tl->entries[tl->n - 1].is_final);
    CU_ASSERT_EQUAL(tl->entries[tl->n - 1].audio_ms, 1000);
    CU_ASSERT_EQUAL(sr_engine_step(e, &k), SR_OK);
    CU_ASSERT_EQUAL(k, 0);
    /* memory: the engine counts both streams; a stream its share */
    sr_memstats ms, me;
    sr_memory(m, s, &ms);
    sr_engine_memory(e, &me);
    CU_ASSERT(ms.stream_bytes > 0);
    CU_ASSERT(me.stream_bytes >= ms.stream_bytes);
    CU_ASSERT_EQUAL(me.weight_bytes, ms.weight_bytes);
    /* a closed stream's slot is reused */
    sr_stream_close(s);
    CU_ASSERT_EQUAL(sr_engine_streams(e), 1);
    CU_ASSERT_EQUAL(sr_engine_open(e, &s3), SR_OK);
    CU_ASSERT_EQUAL(sr_engine_streams(e), 2);
    /* reset: a fresh stream again */
    CU_ASSERT_EQUAL(sr_stream_feed(s3, a, n), SR_OK);
    sr_stream_reset(s3);
    CU_ASSERT_EQUAL(sr_engine_ready(e), 0);
    CU_ASSERT_EQUAL(sr_stream_timeline(s3)->n, 0);
    TEST_ASSERT_ERR(sr_engine_step(NULL, &k), SR_ERR_ARG, "engine is NULL");
    sr_engine_free(e); /* closes s2 and s3 */
    sr_engine_free(NULL);
    free(a);
    sr_model_free(m);
}

/* One stream's chunk fails inside a step: only that stream is failed (and says so until it is
 * reset); the others' timelines equal their solo runs. */
static void test_failure(void)
{
    sr_model *m = test_load_model("test_linear.h5");
    sr_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_engine_create(m, NULL, 3, &e), SR_OK);
    sr_stream *s[3];
    float *a[3];
    size_t n = 16000;
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(sr_engine_open(e, &s[i]), SR_OK);
        a[i] = make_audio(300 + (uint64_t)i, n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
    }
    /* stream 1's fourth chunk starts with the failure sample (the chunk size from a solo run) */
    sr_stream *probe = solo_run(m, NULL, a[0], n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(probe);
    size_t chunk = (size_t)sr_stream_timeline(probe)->entries[0].audio_ms * 16;
    sr_stream_close(probe);
    CU_ASSERT_FATAL(chunk > 0 && 4 * chunk < n);
    float *bad = malloc(n * sizeof *bad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
    memcpy(bad, a[1], n * sizeof *bad);
    bad[3 * chunk] = 0.123456789f;
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(sr_stream_feed(s[i], i == 1 ? bad : a[i], n), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_finish(s[i]), SR_OK);
    }
    sr_status st = sr_engine_drain(e);
    CU_ASSERT_EQUAL(st, SR_ERR_ARG);
    CU_ASSERT(strstr(sr_last_error(), "slot 1") && strstr(sr_last_error(), "failure sample"));
    const char *msg = NULL;
    CU_ASSERT_EQUAL(sr_stream_failed(s[1], &msg), SR_ERR_ARG);
    CU_ASSERT(msg && strstr(msg, "chunk 3"));
    CU_ASSERT_EQUAL(sr_stream_failed(s[0], NULL), SR_OK);
    TEST_ASSERT_ERR(sr_stream_feed(s[1], a[1], 10), SR_ERR_ARG, "failure sample");
    CU_ASSERT_EQUAL(sr_stream_timeline(s[1])->n, 3); /* the chunks before the failing one */
    /* the rest run to the end once the failure is out of the way */
    CU_ASSERT_EQUAL(sr_engine_drain(e), SR_OK);
    for (int i = 0; i < 3; i += 2) {
        CU_ASSERT(sr_stream_done(s[i]));
        sr_stream *solo = solo_run(m, NULL, a[i], n);
        if (solo) CU_ASSERT(same_timeline(sr_stream_timeline(s[i]), sr_stream_timeline(solo), "failure", i));
        sr_stream_close(solo);
    }
    CU_ASSERT(!sr_stream_done(s[1]));
    /* a reset revives it */
    sr_stream_reset(s[1]);
    CU_ASSERT_EQUAL(sr_stream_failed(s[1], NULL), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_feed(s[1], a[1], n), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(s[1]), SR_OK);
    CU_ASSERT_EQUAL(sr_engine_drain(e), SR_OK);
    sr_stream *solo = solo_run(m, NULL, a[1], n);
    if (solo) CU_ASSERT(same_timeline(sr_stream_timeline(s[1]), sr_stream_timeline(solo), "failure, reset", 1));
    sr_stream_close(solo);
    /* a solo stream reports the same failure from its feed */
    sr_stream *one = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(m, NULL, &one), SR_OK);
    TEST_ASSERT_ERR(sr_stream_feed(one, bad, n), SR_ERR_ARG, "failure sample");
    TEST_ASSERT_ERR(sr_stream_finish(one), SR_ERR_ARG, "failure sample");
    sr_stream_close(one);
    sr_engine_free(e);
    for (int i = 0; i < 3; i++) free(a[i]);
    free(bad);
    sr_model_free(m);
}

void test_register_engine(void)
{
    TEST_SUITE("engine_equals_solo", {"test_linear_32_streams", test_linear_32},
               {"fastconformer", test_fastconformer}, {"whisper", test_whisper},
               {"voxtral", test_voxtral}, {"tiny_en", test_tiny_en},
               {"precision_bf16", test_precision_bf16}, {"cpu_guard", test_cpu_guard}, {"cuda", test_cuda});
    TEST_SUITE("engine_threads", {"fed_from_threads", test_threads});
    TEST_SUITE("engine_api", {"api", test_api}, {"a failing stream", test_failure},
               {"op calls independent of the streams", test_op_calls});
}
