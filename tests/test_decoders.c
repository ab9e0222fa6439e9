/*
 * test_decoders.c — the AED decoders (aed_greedy, aed_beam, stable_greedy, stable_beam,
 * local_agreement) on scripted fake scorers, independent of any model.
 *
 * The fake scorer answers aed_logprobs from a table of rules keyed by (chunk, prefix): a rule
 * gives the probabilities of a few tokens, the rest of the mass is spread evenly over the other
 * tokens, and a rule holds from its chunk until a later rule for the same prefix replaces it;
 * prefixes without a rule get EOT with p = 0.9. Other modes: silence (EOT 0.95), a looping
 * scorer, a counting scorer (never EOT) and a seeded random scorer for property tests. The
 * fake checks every call against the scorer contract (slot range, 0 <= from <= n <= max_len,
 * text tokens only) and logs it. The driver emulates core/stream.c: open, one update per
 * chunk, the final update, then reset and the whole stream again (it must repeat exactly),
 * close; after every update it checks the hypothesis invariants (no EOT, n <= aed_max_len,
 * n_stable <= n, n_stable never decreases, the stable prefix never changes, all stable at
 * the end). Expected answers are worked out by hand in the comments; the offline beam cases
 * were also run through openai-whisper's BeamSearchDecoder + MaximumLikelihoodRanker.
 * The fake can also report a no-speech probability (per window, windows separated by a break
 * token, or per chunk) for the no-speech gate (suite decoders_nospeech).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/plugin.h"
#include "../decoders/aed_common.h"
#include "test.h"

#define V 16
#define EOT 15
#define MAXLOG 4096

typedef struct {
    int chunk;           /* holds from this chunk on (until a later rule for the prefix) */
    int len;
    int32_t prefix[12];
    int nd;
    struct { int tok; double p; } d[4];
} rule;

enum { F_TABLE, F_SILENCE, F_LOOP, F_COUNT, F_RANDOM };

typedef struct {
    int mode;
    const rule *rules;
    int n_rules;
    int period;     /* F_LOOP: argmax token at position j is 1 + j % period */
    uint64_t seed;  /* F_RANDOM */
    int chunk;      /* the audio index, set by the driver before each update */
    int fail_at;    /* 1-based call number that fails with SR_ERR_DEVICE; 0 = never */
    int max_slots, max_len;
    int calls, bad;
    int brk;              /* no-speech: window-break token (-1: one window) */
    double ns_win[4];     /* no-speech probability of window w ... */
    const double *ns_chunk; /* ... or, when set, of every window at chunk k */
    int n_log;
    struct { int chunk, slot, n, from; } log[MAXLOG];
} fake;

/* log-probabilities of position j (prefix p[0, j)) into row */
static void fake_row(const fake *f, const int32_t *p, int j, float *row)
{
    double prob[V];
    if (f->mode == F_SILENCE || f->mode == F_LOOP || f->mode == F_COUNT) {
        int top = f->mode == F_SILENCE ? EOT : f->mode == F_LOOP ? 1 + j % f->period : j % 15;
        double pt = f->mode == F_SILENCE ? 0.95 : 0.8;
        for (int v = 0; v < V; v++) prob[v] = v == top ? pt : (1 - pt) / (V - 1);
    } else if (f->mode == F_RANDOM) {
        /* a hash of (seed, chunk / 2, prefix): decisions drift as audio arrives */
        uint64_t h = f->seed * 0x9E3779B97F4A7C15ull + (uint64_t)(f->chunk / 2) * 0xBF58476D1CE4E5B9ull;
        for (int i = 0; i < j; i++) h = (h ^ (uint64_t)p[i]) * 0x100000001B3ull;
        double z = 0, lg[V];
        for (int v = 0; v < V; v++) {
            h ^= h >> 33;
            h *= 0xff51afd7ed558ccdull;
            h ^= h >> 29;
            lg[v] = 3.0 * (double)(h >> 11) / 9007199254740992.0;
        }
        lg[EOT] += 0.8 * (j - 2 * f->chunk); /* hypotheses grow with the audio */
        for (int v = 0; v < V; v++) z += (prob[v] = exp(lg[v]));
        for (int v = 0; v < V; v++) prob[v] /= z;
    } else {
        const rule *best = NULL;
        for (int r = 0; r < f->n_rules; r++) {
            const rule *ru = &f->rules[r];
            if (ru->len != j || ru->chunk > f->chunk) continue;
            if (j && memcmp(ru->prefix, p, (size_t)j * sizeof *p)) continue;
            if (!best || ru->chunk >= best->chunk) best = ru;
        }
        static const rule dflt = {0, 0, {0}, 1, {{EOT, 0.9}}};
        if (!best) best = &dflt;
        double rest = 1;
        for (int k = 0; k < best->nd; k++) rest -= best->d[k].p;
        for (int v = 0; v < V; v++) prob[v] = rest / (V - best->nd);
        for (int k = 0; k < best->nd; k++) prob[best->d[k].tok] = best->d[k].p;
    }
    for (int v = 0; v < V; v++) row[v] = (float)log(prob[v]);
}

static sr_status fake_logprobs(void *ctx, int slot, const int32_t *prefix, int n, int from, float *out)
{
    fake *f = ctx;
    f->calls++;
    if (f->n_log < MAXLOG) {
        f->log[f->n_log].chunk = f->chunk;
        f->log[f->n_log].slot = slot;
        f->log[f->n_log].n = n;
        f->log[f->n_log].from = from;
        f->n_log++;
    }
    if (f->fail_at && f->calls == f->fail_at)
        return sr_error(SR_ERR_DEVICE, "fake scorer failure at call %d", f->calls);
    if (slot < 0 || slot >= f->max_slots || from < 0 || from > n || n > f->max_len || !out ||
        (n && !prefix)) {
        f->bad++;
        return sr_error(SR_ERR_ARG, "fake scorer: bad call slot %d n %d from %d", slot, n, from);
    }
    for (int i = 0; i < n; i++)
        if (prefix[i] < 0 || prefix[i] >= V || prefix[i] == EOT) {
            f->bad++;
            return sr_error(SR_ERR_ARG, "fake scorer: prefix token %d is %d", i, (int)prefix[i]);
        }
    for (int j = from; j <= n; j++) fake_row(f, prefix, j, out + (size_t)(j - from) * V);
    return SR_OK;
}

/* The fake's batched form answering summary requests (sr_scorer.aed_top): its rows summarized
 * by sr_aed_top_of_row, out untouched; requests without top get their rows. */
static sr_status fake_logprobs_top(const sr_aed_req *r, int count)
{
    for (int i = 0; i < count; i++) {
        const sr_aed_req *q = &r[i];
        int rows = q->n - q->from + 1;
        float *tmp = q->top ? malloc((size_t)(rows > 0 ? rows : 1) * V * sizeof(float)) : q->out;
        if (!tmp) return SR_ERR_NOMEM;
        sr_status st = fake_logprobs(q->ctx, q->slot, q->prefix, q->n, q->from, tmp);
        for (int j = q->from; !st && q->top && j <= q->n; j++) {
            const float *row = tmp + (size_t)(j - q->from) * V;
            sr_aed_top_of_row(row, V, j < q->n ? q->prefix[j] : -1, EOT, &q->top[j - q->from]);
            if (q->top_k)
                sr_aed_row_topk(row, V, q->top_k, q->top_id + (size_t)(j - q->from) * q->top_k,
                                q->top_lp + (size_t)(j - q->from) * q->top_k);
        }
        if (q->top) free(tmp);
        if (st) return st;
    }
    return SR_OK;
}

/* aed_no_speech of the fake: the window of position n starts after the last break token */
static sr_status fake_no_speech(void *ctx, const int32_t *prefix, int n, int *start, float *p)
{
    fake *f = ctx;
    int w = 0;
    *start = 0;
    for (int i = 0; i < n; i++)
        if (prefix[i] == f->brk) {
            w++;
            *start = i + 1;
        }
    *p = (float)(f->ns_chunk ? f->ns_chunk[f->chunk] : f->ns_win[SR_MIN(w, 3)]);
    return SR_OK;
}

static void fake_init(fake *f, sr_scorer *sc, int mode, const rule *rules, int n_rules, int slots, int max_len)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    f->rules = rules;
    f->n_rules = n_rules;
    f->max_slots = slots;
    f->max_len = max_len;
    f->brk = -1;
    memset(sc, 0, sizeof *sc);
    sc->kind = SR_SCORER_AED;
    sc->ctx = f;
    sc->vocab = V;
    sc->blank = -1;
    sc->eot = EOT;
    sc->aed_max_slots = slots;
    sc->aed_max_len = max_len;
    sc->aed_logprobs = fake_logprobs;
}

static const sr_decoder_ops *dec(const char *name)
{
    const sr_decoder_ops *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_decoder_find(name, &ops), SR_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
    return ops;
}

static void cfg_make(sr_stream_config *c, int beam, int window, int chunk_ms)
{
    sr_stream_config_init(c);
    c->beam = beam;
    c->stability_n = window;
    c->chunk_ms = chunk_ms;
}

#define MAXCH 64
typedef struct {
    int n, n_stable;
    int32_t tok[128];
} snap;

/* One pass over n_chunks updates (the last one final) with the invariants checked. */
static int pass(const sr_decoder_ops *ops, void *st, sr_scorer *sc, fake *f, int n_chunks, sr_hyp *h, snap *out)
{
    int prev_stable = 0;
    int32_t stable_tok[128];
    for (int k = 0; k < n_chunks; k++) {
        int final = k == n_chunks - 1;
        f->chunk = k;
        sr_status s = ops->update(st, sc, final, h);
        CU_ASSERT_EQUAL(s, SR_OK);
        if (s) {
            printf("\n      update %d of %s: %s\n", k, ops->name, sr_last_error());
            return 0;
        }
        CU_ASSERT(h->n <= sc->aed_max_len && h->n <= 128);
        CU_ASSERT(h->n_stable >= prev_stable);
        CU_ASSERT(h->n_stable <= h->n);
        for (int i = 0; i < h->n; i++) CU_ASSERT(h->tokens[i] != EOT && h->tokens[i] >= 0 && h->tokens[i] < V);
        for (int i = 0; i < prev_stable && i < h->n; i++) CU_ASSERT_EQUAL(h->tokens[i], stable_tok[i]);
        if (final) CU_ASSERT_EQUAL(h->n_stable, h->n);
        prev_stable = h->n_stable;
        if (h->n_stable > 0 && h->n_stable <= 128)
            memcpy(stable_tok, h->tokens, (size_t)h->n_stable * sizeof *h->tokens);
        out[k].n = SR_MIN(h->n, 128);
        out[k].n_stable = h->n_stable;
        if (out[k].n) memcpy(out[k].tok, h->tokens, (size_t)out[k].n * sizeof *h->tokens);
    }
    return 1;
}

/* The engine's call sequence: open, updates, reset, the same updates again (identical), close.
 * out[k] holds the hypothesis after update k. Returns 1 when everything ran. */
static int drive(const char *name, const sr_stream_config *cfg, sr_scorer *sc, fake *f, int n_chunks, snap *out)
{
    const sr_decoder_ops *ops = dec(name);
    CU_ASSERT_EQUAL(ops->kind, SR_SCORER_AED);
    void *st = NULL;
    sr_status s = ops->open(cfg, sc, &st);
    CU_ASSERT_EQUAL(s, SR_OK);
    if (s) {
        printf("\n      open %s: %s\n", name, sr_last_error());
        return 0;
    }
    CU_ASSERT(ops->state_bytes(st) > 0);
    sr_hyp h = {0};
    static snap again[MAXCH];
    int ok = pass(ops, st, sc, f, n_chunks, &h, out);
    int calls = f->calls, n_log = f->n_log;
    ops->reset(st);
    h.n = h.n_stable = 0; /* the engine clears the hypothesis on reset */
    ok = ok && pass(ops, st, sc, f, n_chunks, &h, again);
    if (ok)
        for (int k = 0; k < n_chunks; k++) {
            CU_ASSERT_EQUAL(again[k].n, out[k].n);
            CU_ASSERT_EQUAL(again[k].n_stable, out[k].n_stable);
            CU_ASSERT(!memcmp(again[k].tok, out[k].tok, (size_t)out[k].n * sizeof(int32_t)));
        }
    CU_ASSERT_EQUAL(f->calls, 2 * calls); /* the second pass makes the same calls */
    /* the same updates on a scorer that answers with row summaries (aed_top, the greedy
     * decoders' requests): the same hypotheses */
    sr_scorer s2 = *sc;
    s2.aed_top = 1;
    s2.aed_top_k_max = V;
    s2.aed_logprobs_batch = fake_logprobs_top;
    void *st2 = NULL;
    CU_ASSERT_EQUAL_FATAL(ops->open(cfg, &s2, &st2), SR_OK);
    h.n = h.n_stable = 0;
    ok = ok && pass(ops, st2, &s2, f, n_chunks, &h, again);
    if (ok)
        for (int k = 0; k < n_chunks; k++) {
            CU_ASSERT_EQUAL(again[k].n, out[k].n);
            CU_ASSERT_EQUAL(again[k].n_stable, out[k].n_stable);
            CU_ASSERT(!memcmp(again[k].tok, out[k].tok, (size_t)out[k].n * sizeof(int32_t)));
        }
    CU_ASSERT_EQUAL(f->calls, 3 * calls);
    ops->close(st2);
    f->calls = calls;
    f->n_log = n_log; /* keep the log of the first pass only */
    CU_ASSERT_EQUAL(f->bad, 0);
    ops->close(st);
    free(h.tokens);
    return ok;
}

static int same(const snap *s, int n, const int32_t *want)
{
    if (s->n != n || memcmp(s->tok, want, (size_t)n * sizeof *want)) {
        printf("\n      got [");
        for (int i = 0; i < s->n; i++) printf("%s%d", i ? " " : "", (int)s->tok[i]);
        printf("], want [");
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", (int)want[i]);
        printf("]\n");
        return 0;
    }
    return 1;
}
#define HYP_IS(s, ...)                                                          \
    do {                                                                        \
        static const int32_t want_[] = {__VA_ARGS__};                           \
        CU_ASSERT(same((s), (int)(sizeof want_ / sizeof want_[0]), want_));     \
    } while (0)
#define HYP_EMPTY(s) CU_ASSERT_EQUAL((s)->n, 0)

/* ---- offline: aed_greedy, aed_beam ------------------------------------------------------------ */

/* Beam script B1 (b = 2), all chunks:
 *   []      -> 1: .5, 2: .45           [1]   -> EOT: .6, 3: .3     [2] -> 4: .9
 *   [2 4]   -> 5: .9   [2 4 5] -> EOT: .9   [1 3] -> EOT: .9
 * Greedy: 1 then EOT -> [1].
 * Beam 2: step 1 keeps [1] (-0.693), [2] (-0.799). Step 2: [2 4] -0.904 (live), [1 EOT] -1.204
 * (finished), [1 3] -1.897 (live). Step 3: [2 4 5] -1.009 (live), [1 3 EOT] -2.002 (finished:
 * two, done). Ranking by sum / length: [1] -1.204, [1 3] -1.001 -> [1 3], although [1] has
 * the larger sum and [2 4 5] was never finished (openai-whisper gives the same). */
static const rule B1[] = {
    {0, 0, {0}, 2, {{1, .5}, {2, .45}}},
    {0, 1, {1}, 2, {{EOT, .6}, {3, .3}}},
    {0, 1, {2}, 1, {{4, .9}}},
    {0, 2, {2, 4}, 1, {{5, .9}}},
    {0, 3, {2, 4, 5}, 1, {{EOT, .9}}},
    {0, 2, {1, 3}, 1, {{EOT, .9}}},
};

static void test_greedy_offline(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, B1, SR_ARRAY_LEN(B1), 1, 32);
    cfg_make(&cfg, 1, 2, 100);
    if (!drive("aed_greedy", &cfg, &sc, &f, 3, out)) return;
    HYP_EMPTY(&out[0]); /* offline: nothing before the end */
    HYP_EMPTY(&out[1]);
    HYP_IS(&out[2], 1);
    /* two calls, both on slot 0 and for the new position only */
    CU_ASSERT_EQUAL(f.calls, 2);
    for (int i = 0; i < f.n_log; i++) {
        CU_ASSERT_EQUAL(f.log[i].slot, 0);
        CU_ASSERT_EQUAL(f.log[i].from, f.log[i].n);
        CU_ASSERT_EQUAL(f.log[i].n, i);
    }
}

static void test_beam_length_normalized(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, B1, SR_ARRAY_LEN(B1), 2, 32);
    cfg_make(&cfg, 2, 2, 100);
    if (!drive("aed_beam", &cfg, &sc, &f, 2, out)) return;
    HYP_EMPTY(&out[0]);
    HYP_IS(&out[1], 1, 3);
    /* steps: 1 call for the empty prefix, then 2 beams x 2 steps; slots 0 and 1 only */
    CU_ASSERT_EQUAL(f.calls, 5);
    for (int i = 0; i < f.n_log; i++) {
        CU_ASSERT(f.log[i].slot == 0 || f.log[i].slot == 1);
        CU_ASSERT_EQUAL(f.log[i].from, f.log[i].n);
    }
}

static void test_beam1_is_greedy(void)
{
    /* beam 1 with whisper's rules: the best candidate is live unless it is EOT -> greedy */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, B1, SR_ARRAY_LEN(B1), 1, 32);
    cfg_make(&cfg, 1, 2, 100);
    if (!drive("aed_beam", &cfg, &sc, &f, 1, out)) return;
    HYP_IS(&out[0], 1);
}

/* B2 with aed_max_len 3: nothing finishes in three steps, so the live beams [2 4 5] (-1.009)
 * and [1 3 5] (-1.897) fill the list (openai-whisper's finalize) and [2 4 5] wins. */
static const rule B2[] = {
    {0, 0, {0}, 2, {{1, .5}, {2, .45}}},
    {0, 1, {1}, 2, {{3, .6}, {4, .3}}},
    {0, 1, {2}, 1, {{4, .9}}},
    {0, 2, {2, 4}, 1, {{5, .9}}},
    {0, 2, {1, 3}, 2, {{5, .5}, {6, .4}}},
    {0, 2, {1, 4}, 1, {{5, .9}}},
    {0, 3, {2, 4, 5}, 1, {{6, .9}}},
};

static void test_beam_max_len(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, B2, SR_ARRAY_LEN(B2), 2, 3);
    cfg_make(&cfg, 2, 2, 100);
    if (!drive("aed_beam", &cfg, &sc, &f, 1, out)) return;
    HYP_IS(&out[0], 2, 4, 5);
}

/* B3 (b = 2): EOT candidates ranked below the b-th live candidate are not finished.
 *   step 1: [1], [2]; step 2: [1 3] -1.386, [2 5] -1.427 fill the beam; [2 EOT] -2.12 and
 *   [1 EOT] -3.69 come later and are dropped. Step 3: [1 3 EOT] -1.492, [2 5 EOT] -1.532 ->
 *   [1 3] (-0.746 per token). Recording the dropped EOTs would have ended at step 2 with [2].
 * B4 (b = 2): every beam offers b + 1 tokens, so a beam's third token can live when its
 *   second is EOT: step 2 from [9]: [9 1] live, [9 EOT] finished (-1.214), [9 2] live (-1.917);
 *   step 3: [9 2 6] -1.917, [9 1 3] -2.312; step 4: [9 2 6 EOT] -1.927 finishes -> [9 2 6]
 *   (-0.642 per token) beats [9] (-1.214).
 * Both answers are openai-whisper's (BeamSearchDecoder + MaximumLikelihoodRanker). */
static const rule B3[] = {
    {0, 0, {0}, 2, {{1, .5}, {2, .4}}},
    {0, 1, {1}, 3, {{3, .5}, {4, .4}, {EOT, .05}}},
    {0, 1, {2}, 2, {{5, .6}, {EOT, .3}}},
};
static const rule B4[] = {
    {0, 0, {0}, 1, {{9, .99}}},
    {0, 1, {9}, 3, {{1, .5}, {EOT, .3}, {2, .15}}},
    {0, 2, {9, 1}, 4, {{3, .2}, {4, .2}, {5, .2}, {7, .2}}},
    {0, 2, {9, 2}, 1, {{6, .99}}},
    {0, 3, {9, 2, 6}, 1, {{EOT, .99}}},
};

static void test_beam_whisper_rules(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    cfg_make(&cfg, 2, 2, 100);
    fake_init(&f, &sc, F_TABLE, B3, SR_ARRAY_LEN(B3), 2, 32);
    if (drive("aed_beam", &cfg, &sc, &f, 1, out)) HYP_IS(&out[0], 1, 3);
    fake_init(&f, &sc, F_TABLE, B4, SR_ARRAY_LEN(B4), 2, 32);
    if (drive("aed_beam", &cfg, &sc, &f, 1, out)) HYP_IS(&out[0], 9, 2, 6);
}

static void test_max_len_all(void)
{
    /* a scorer that never ends: every decoder stops at aed_max_len = 10 */
    static const char *names[] = {"aed_greedy", "aed_beam", "stable_greedy", "stable_beam", "local_agreement"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
        fake f;
        sr_scorer sc;
        sr_stream_config cfg;
        static snap out[MAXCH];
        int b = strstr(names[d], "beam") ? 2 : 1;
        fake_init(&f, &sc, F_COUNT, NULL, 0, b, 10);
        cfg_make(&cfg, b, 2, 1000);
        if (!drive(names[d], &cfg, &sc, &f, 4, out)) continue;
        HYP_IS(&out[3], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    }
}

static void test_loop_guard_offline(void)
{
    /* 1 2 1 2 ... forever: at 12 tokens the unit "1 2" has 6 copies (the loop rule: >= 4 copies
     * covering >= 12 tokens); one copy is kept */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_LOOP, NULL, 0, 2, 200);
    f.period = 2;
    cfg_make(&cfg, 1, 2, 100);
    if (drive("aed_greedy", &cfg, &sc, &f, 1, out)) HYP_IS(&out[0], 1, 2);
    CU_ASSERT_EQUAL(f.calls, 12); /* stopped at the loop, not at aed_max_len */
    fake_init(&f, &sc, F_LOOP, NULL, 0, 2, 200);
    f.period = 3;
    cfg_make(&cfg, 2, 2, 100);
    if (drive("aed_beam", &cfg, &sc, &f, 1, out)) {
        CU_ASSERT(out[0].n < 12);
        CU_ASSERT(out[0].n >= 3);
    }
}

/* Repetition that real speech has is left alone: "1 1 1 1" (4 copies of one token) then three
 * copies of a 4-token phrase, 16 tokens with no unit repeated 4 times over >= 12 tokens. */
static const rule R[] = {
    {0, 0, {0}, 1, {{1, .9}}},
    {0, 1, {1}, 1, {{1, .9}}},
    {0, 2, {1, 1}, 1, {{1, .9}}},
    {0, 3, {1, 1, 1}, 1, {{1, .9}}},
    {0, 4, {1, 1, 1, 1}, 1, {{2, .9}}},
    {0, 5, {1, 1, 1, 1, 2}, 1, {{3, .9}}},
    {0, 6, {1, 1, 1, 1, 2, 3}, 1, {{4, .9}}},
    {0, 7, {1, 1, 1, 1, 2, 3, 4}, 1, {{5, .9}}},
    {0, 8, {1, 1, 1, 1, 2, 3, 4, 5}, 1, {{2, .9}}},
    {0, 9, {1, 1, 1, 1, 2, 3, 4, 5, 2}, 1, {{3, .9}}},
    {0, 10, {1, 1, 1, 1, 2, 3, 4, 5, 2, 3}, 1, {{4, .9}}},
    {0, 11, {1, 1, 1, 1, 2, 3, 4, 5, 2, 3, 4}, 1, {{5, .9}}},
};

static void test_loop_rule_keeps_speech(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, R, SR_ARRAY_LEN(R), 1, 64);
    cfg_make(&cfg, 1, 2, 100);
    if (drive("aed_greedy", &cfg, &sc, &f, 1, out)) HYP_IS(&out[0], 1, 1, 1, 1, 2, 3, 4, 5, 2, 3, 4, 5);
}

static void test_silence_empty(void)
{
    static const char *names[] = {"aed_greedy", "aed_beam", "stable_greedy", "stable_beam", "local_agreement"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
        fake f;
        sr_scorer sc;
        sr_stream_config cfg;
        static snap out[MAXCH];
        int b = strstr(names[d], "beam") ? 3 : 1;
        fake_init(&f, &sc, F_SILENCE, NULL, 0, b, 224);
        cfg_make(&cfg, b, 2, 300);
        if (!drive(names[d], &cfg, &sc, &f, 20, out)) continue;
        for (int k = 0; k < 20; k++) HYP_EMPTY(&out[k]);
    }
}

static void test_bad_config(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    void *st = NULL;
    fake_init(&f, &sc, F_SILENCE, NULL, 0, 2, 224);
    cfg_make(&cfg, 4, 2, 100);
    TEST_ASSERT_ERR(dec("aed_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    TEST_ASSERT_ERR(dec("stable_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "aed_max_slots");
    cfg.beam = 0;
    TEST_ASSERT_ERR(dec("stable_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    TEST_ASSERT_ERR(dec("aed_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    cfg.beam = 2;
    TEST_ASSERT_ERR(dec("aed_greedy")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    TEST_ASSERT_ERR(dec("stable_greedy")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    TEST_ASSERT_ERR(dec("local_agreement")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    cfg.beam = 1;
    cfg.stability_n = -1;
    TEST_ASSERT_ERR(dec("stable_greedy")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.stability_n");
    TEST_ASSERT_ERR(dec("stable_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.stability_n");
    cfg.stability_n = 2;
    sc.aed_max_len = 0;
    TEST_ASSERT_ERR(dec("aed_greedy")->open(&cfg, &sc, &st), SR_ERR_ARG, "aed_max_len");
    sc.aed_max_len = 224;
    sc.eot = V;
    TEST_ASSERT_ERR(dec("stable_greedy")->open(&cfg, &sc, &st), SR_ERR_ARG, "eot");
    sc.eot = EOT;
    sc.aed_top = 1; /* summaries are answered by the batched form only */
    TEST_ASSERT_ERR(dec("stable_greedy")->open(&cfg, &sc, &st), SR_ERR_ARG, "aed_top");
    sc.aed_logprobs_batch = fake_logprobs_top;
    sc.aed_top_k_max = 2; /* beam 2 takes the 3 best entries of a row */
    cfg.beam = 2;
    TEST_ASSERT_ERR(dec("stable_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "stream.beam");
    sc.aed_top_k_max = 3;
    CU_ASSERT_EQUAL(dec("stable_beam")->open(&cfg, &sc, &st), SR_OK);
    dec("stable_beam")->close(st);
    st = NULL;
    cfg.beam = 1;
    sc.aed_top = 0;
    sc.aed_logprobs_batch = NULL;
    sc.kind = SR_SCORER_SYNC;
    TEST_ASSERT_ERR(dec("local_agreement")->open(&cfg, &sc, &st), SR_ERR_ARG, "AED");
    sc.kind = SR_SCORER_AED;
    sc.aed_logprobs = NULL;
    TEST_ASSERT_ERR(dec("aed_beam")->open(&cfg, &sc, &st), SR_ERR_ARG, "aed_logprobs");
    CU_ASSERT_PTR_NULL(st);
}

static void test_scorer_error(void)
{
    /* a failing scorer call surfaces as the update's status with the scorer's message */
    static const char *names[] = {"aed_greedy", "aed_beam", "stable_greedy", "stable_beam", "local_agreement"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
        fake f;
        sr_scorer sc;
        sr_stream_config cfg;
        int b = strstr(names[d], "beam") ? 2 : 1;
        fake_init(&f, &sc, F_COUNT, NULL, 0, b, 50);
        f.fail_at = 3;
        cfg_make(&cfg, b, 2, 1000);
        const sr_decoder_ops *ops = dec(names[d]);
        void *st = NULL;
        CU_ASSERT_EQUAL_FATAL(ops->open(&cfg, &sc, &st), SR_OK);
        sr_hyp h = {0};
        sr_status s = SR_OK;
        for (int k = 0; k < 4 && !s; k++) {
            f.chunk = k;
            s = ops->update(st, &sc, k == 3, &h);
        }
        TEST_ASSERT_ERR(s, SR_ERR_DEVICE, "fake scorer failure at call 3");
        ops->close(st);
        free(h.tokens);
    }
}

static void test_registry(void)
{
    static const char *names[] = {"aed_greedy", "aed_beam", "stable_greedy", "stable_beam", "local_agreement"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
        const sr_decoder_ops *ops = dec(names[d]);
        CU_ASSERT_STRING_EQUAL(ops->name, names[d]);
        CU_ASSERT_EQUAL(ops->kind, SR_SCORER_AED);
        CU_ASSERT(ops->open && ops->update && ops->reset && ops->close && ops->state_bytes && ops->description);
    }
    /* every built-in decoder is batched in the engine (decoders/lockstep.h); one with update
     * alone would run its streams one after the other */
    CU_ASSERT(sr_decoder_count() >= 8);
    for (size_t i = 0; i < sr_decoder_count(); i++) {
        const sr_decoder_ops *ops = dec(sr_decoder_name(i));
        if (!ops->update_batch) printf("\n      %s has no update_batch", ops->name);
        CU_ASSERT_PTR_NOT_NULL(ops->update_batch);
    }
}

/* ---- streaming: stable_greedy, stable_beam ---------------------------------------------------- */

/* G (window 2):
 *   chunk 0: [] -> 1: .6, 2: .3   [1] -> EOT: .7, 3: .2   [2] -> 6: .8       hyp [1] (EOT pauses)
 *   chunk 1: [] -> 1: .4, 2: .35  1 fell but is still the argmax: kept (record .4)   [1]
 *   chunk 2: [] -> 2: .5, 1: .45  1 is not the argmax but rose from .4: kept         [1]
 *   chunk 3: [] -> 2: .6, 1: .3   1 fell and lost the argmax: cut, continue 2 6      [2 6]
 *   chunk 4 (final): unchanged                                                   [2 6] */
static const rule G[] = {
    {0, 0, {0}, 2, {{1, .6}, {2, .3}}},
    {0, 1, {1}, 2, {{EOT, .7}, {3, .2}}},
    {0, 1, {2}, 1, {{6, .8}}},
    {1, 0, {0}, 2, {{1, .4}, {2, .35}}},
    {2, 0, {0}, 2, {{2, .5}, {1, .45}}},
    {3, 0, {0}, 2, {{2, .6}, {1, .3}}},
};

static void test_greedy_keep_rules(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, G, SR_ARRAY_LEN(G), 1, 32);
    cfg_make(&cfg, 1, 2, 100);
    if (!drive("stable_greedy", &cfg, &sc, &f, 5, out)) return;
    HYP_IS(&out[0], 1);
    HYP_IS(&out[1], 1);
    HYP_IS(&out[2], 1);
    HYP_IS(&out[3], 2, 6);
    HYP_IS(&out[4], 2, 6);
    CU_ASSERT_EQUAL(out[3].n_stable, 0);
    CU_ASSERT_EQUAL(out[4].n_stable, 2);
    /* chunk 0: positions 0 and 1 (EOT pauses: no third call); chunks 1, 2: one re-check call
     * of [1] from 0 whose last row already says EOT */
    int per[5] = {0};
    for (int i = 0; i < f.n_log; i++) per[f.log[i].chunk]++;
    CU_ASSERT_EQUAL(per[0], 2);
    CU_ASSERT_EQUAL(per[1], 1);
    CU_ASSERT_EQUAL(per[2], 1);
    CU_ASSERT_EQUAL(per[3], 3); /* re-check (cut at 0), then positions 1 and 2 */
}

/* C (window 2): chunk 0 gives [1 2 3] (n_stable 1). Chunk 1: at [1], 2 falls (.8 -> .3) and 5
 * is now the argmax: 2 and 3 are cut, decoding resumes with 5 -> [1 5]. Token 1 is outside the
 * window and is not re-scored. */
static const rule C[] = {
    {0, 0, {0}, 1, {{1, .9}}},
    {0, 1, {1}, 1, {{2, .8}}},
    {0, 2, {1, 2}, 1, {{3, .8}}},
    {1, 1, {1}, 2, {{5, .6}, {2, .3}}},
};

static void test_greedy_cut_all_after(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, C, SR_ARRAY_LEN(C), 1, 32);
    cfg_make(&cfg, 1, 2, 100);
    if (!drive("stable_greedy", &cfg, &sc, &f, 3, out)) return;
    HYP_IS(&out[0], 1, 2, 3);
    CU_ASSERT_EQUAL(out[0].n_stable, 1);
    HYP_IS(&out[1], 1, 5);
    CU_ASSERT_EQUAL(out[1].n_stable, 1);
    HYP_IS(&out[2], 1, 5);
    CU_ASSERT_EQUAL(out[2].n_stable, 2);
    /* the first call of chunk 1 re-checks the window [1, 3) of [1 2 3] in one call */
    for (int i = 0; i < f.n_log; i++)
        if (f.log[i].chunk == 1) {
            CU_ASSERT_EQUAL(f.log[i].n, 3);
            CU_ASSERT_EQUAL(f.log[i].from, 1);
            CU_ASSERT_EQUAL(f.log[i].slot, 0);
            break;
        }
}

static void test_greedy_window_zero(void)
{
    /* stability_n = 0: nothing is re-checked, every token is stable when emitted */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, C, SR_ARRAY_LEN(C), 1, 32);
    cfg_make(&cfg, 1, 0, 100);
    if (!drive("stable_greedy", &cfg, &sc, &f, 2, out)) return;
    HYP_IS(&out[0], 1, 2, 3);
    CU_ASSERT_EQUAL(out[0].n_stable, 3);
    HYP_IS(&out[1], 1, 2, 3);
}

static void test_greedy_cap(void)
{
    /* 100 ms chunks: at most 8 + 2 tokens per update on a scorer that never ends */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_COUNT, NULL, 0, 1, 100);
    cfg_make(&cfg, 1, 2, 100);
    if (!drive("stable_greedy", &cfg, &sc, &f, 4, out)) return;
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_EQUAL(out[k].n, 10 * (k + 1));
        if (k < 3) CU_ASSERT_EQUAL(out[k].n_stable, 10 * (k + 1) - 2);
    }
    /* a 400 ms first chunk allows 8 + 8 */
    cfg.first_chunk_ms = 400;
    fake_init(&f, &sc, F_COUNT, NULL, 0, 1, 100);
    if (drive("stable_greedy", &cfg, &sc, &f, 2, out)) {
        CU_ASSERT_EQUAL(out[0].n, 16);
        CU_ASSERT_EQUAL(out[1].n, 26);
    }
}

static void test_stream_loop_guard(void)
{
    /* a looping scorer never grows a hypothesis past the loop rule, whatever the chunking */
    static const char *names[] = {"stable_greedy", "stable_beam", "local_agreement"};
    static const int chunk_ms[] = {100, 1000};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++)
        for (size_t c = 0; c < SR_ARRAY_LEN(chunk_ms); c++) {
            fake f;
            sr_scorer sc;
            sr_stream_config cfg;
            static snap out[MAXCH];
            int b = strstr(names[d], "beam") ? 2 : 1;
            fake_init(&f, &sc, F_LOOP, NULL, 0, b, 224);
            f.period = 2;
            cfg_make(&cfg, b, 2, chunk_ms[c]);
            if (!drive(names[d], &cfg, &sc, &f, 30, out)) continue;
            for (int k = 0; k < 30; k++) CU_ASSERT(out[k].n < 12);
        }
    /* with 1 s chunks the loop is seen before anything is stable: one copy is left */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_LOOP, NULL, 0, 1, 224);
    f.period = 2;
    cfg_make(&cfg, 1, 2, 1000);
    if (drive("stable_greedy", &cfg, &sc, &f, 1, out)) HYP_IS(&out[0], 1, 2);
}

/* S1 (b = 2, window 2): "left the top b -> cut" although its probability rose; beams of
 * different lengths.
 *   chunk 0: [] -> 1: .5, 2: .4   [1] -> 3: .3, 6: .25, 8: .2   [2] -> EOT: .9
 *     step 1: [1] -0.693, [2] -0.916; step 2: [2 EOT] -1.021, [1 3] -1.897 (best two, EOT
 *     among them) -> pause with beams [2] and [1 3] (lengths 1 and 2); shown [2].
 *   chunk 1: [] -> 1: .55, 2: .42   [1] -> 4: .34, 5: .33, 3: .31   [1 3] -> 7: .99
 *     [2]: 2 rose, top 2: kept. [1 3]: 1 kept; 3 rose (.30 -> .31) but is third: cut -> [1].
 *     Step: [2 EOT] -0.973, [1 4] -1.677 -> pause with [2], [1 4]; shown [2].
 *   final (same rules): [2 EOT] -0.973, [1 4 EOT] -1.782 both finish; by sum / length
 *     [1 4] (-0.891) beats [2] (-0.973). Keeping 3 would have given [1 3 7] instead. */
static const rule S1[] = {
    {0, 0, {0}, 2, {{1, .5}, {2, .4}}},
    {0, 1, {1}, 3, {{3, .3}, {6, .25}, {8, .2}}},
    {0, 1, {2}, 1, {{EOT, .9}}},
    {1, 0, {0}, 2, {{1, .55}, {2, .42}}},
    {1, 1, {1}, 3, {{4, .34}, {5, .33}, {3, .31}}},
    {1, 2, {1, 3}, 1, {{7, .99}}},
};

static void test_beam_topb_cut(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, S1, SR_ARRAY_LEN(S1), 2, 32);
    cfg_make(&cfg, 2, 2, 100);
    if (!drive("stable_beam", &cfg, &sc, &f, 3, out)) return;
    HYP_IS(&out[0], 2);
    CU_ASSERT_EQUAL(out[0].n_stable, 0);
    HYP_IS(&out[1], 2);
    CU_ASSERT_EQUAL(out[1].n_stable, 0);
    HYP_IS(&out[2], 1, 4);
    CU_ASSERT_EQUAL(out[2].n_stable, 2);
    /* chunk 1 starts with one re-check call per beam: lengths 1 and 2, both from 0 (window 2),
     * on different slots */
    int seen = 0, lens = 0, slots = 0;
    for (int i = 0; i < f.n_log && seen < 2; i++)
        if (f.log[i].chunk == 1) {
            CU_ASSERT_EQUAL(f.log[i].from, 0);
            lens |= 1 << f.log[i].n;
            slots |= 1 << f.log[i].slot;
            seen++;
        }
    CU_ASSERT_EQUAL(lens, (1 << 2) | (1 << 1));
    CU_ASSERT_EQUAL(slots, 3);
}

/* S2 (b = 2, window 2): "still in the top b but its probability fell -> cut".
 *   chunk 0: [] -> 1: .6, 2: .3   [1] -> EOT: .7, 3: .2   [2] -> EOT: .6
 *     beams [1], [2] both end on EOT among the best two -> pause; shown [1].
 *   chunk 1: [] -> 1: .5, EOT: .45   [1] -> 3: .95
 *     [1]: 1 is still first but fell (.6 -> .5): cut to []; [2]: 2 left the top 2: cut to [].
 *     One beam []: [1] -0.693, [EOT] -0.799 -> pause with [1], []; shown [1]. (Keeping 1
 *     would have continued to [1 3].)
 *   final: [1 3 EOT] -0.849 (the empty candidate is ranked below the b-th live one) -> [1 3].
 * stable_greedy keeps 1 at chunk 1 (it is still the argmax) and continues to [1 3]. */
static const rule S2[] = {
    {0, 0, {0}, 2, {{1, .6}, {2, .3}}},
    {0, 1, {1}, 2, {{EOT, .7}, {3, .2}}},
    {0, 1, {2}, 1, {{EOT, .6}}},
    {1, 0, {0}, 2, {{1, .5}, {EOT, .45}}},
    {1, 1, {1}, 1, {{3, .95}}},
};

static void test_beam_fell_cut(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, S2, SR_ARRAY_LEN(S2), 2, 32);
    cfg_make(&cfg, 2, 2, 100);
    if (!drive("stable_beam", &cfg, &sc, &f, 3, out)) return;
    HYP_IS(&out[0], 1);
    HYP_IS(&out[1], 1);
    HYP_IS(&out[2], 1, 3);
    fake_init(&f, &sc, F_TABLE, S2, SR_ARRAY_LEN(S2), 1, 32);
    cfg_make(&cfg, 1, 2, 100);
    if (drive("stable_greedy", &cfg, &sc, &f, 3, out)) {
        HYP_IS(&out[0], 1);
        HYP_IS(&out[1], 1, 3);
        HYP_IS(&out[2], 1, 3);
    }
}

static void test_beam_committed_prefix(void)
{
    /* stability_n 0: the committed prefix is the common prefix of the beams. C gives [1 2 3]
     * as the best beam; a second beam shares [1 ...] at least, so n_stable >= 1 after chunk 0
     * and every beam descends from it later. */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, C, SR_ARRAY_LEN(C), 2, 32);
    cfg_make(&cfg, 2, 0, 1000);
    if (!drive("stable_beam", &cfg, &sc, &f, 3, out)) return;
    HYP_IS(&out[0], 1, 2, 3);
    CU_ASSERT(out[0].n_stable >= 1);
    HYP_IS(&out[2], 1, 2, 3); /* window 0: nothing is ever re-checked */
}

/* Property test: random drifting scorers; the driver asserts n_stable never decreases, the
 * stable prefix never changes, n_stable <= n, no EOT, all stable at the end, reset repeats. */
static void test_random_invariants(void)
{
    static const char *names[] = {"stable_greedy", "stable_beam", "local_agreement"};
    int runs = 0, revised = 0;
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++)
        for (int window = 0; window <= 3; window++)
            for (int b = 1; b <= 3; b++) {
                if (b > 1 && strcmp(names[d], "stable_beam")) continue;
                for (uint64_t seed = 1; seed <= 12; seed++) {
                    fake f;
                    sr_scorer sc;
                    sr_stream_config cfg;
                    static snap out[MAXCH];
                    fake_init(&f, &sc, F_RANDOM, NULL, 0, b, 40);
                    f.seed = seed * 7919 + (uint64_t)window;
                    cfg_make(&cfg, b, window, 200);
                    if (!drive(names[d], &cfg, &sc, &f, 12, out)) return;
                    runs++;
                    /* the scorer does change earlier decisions: count streams with a revision */
                    for (int k = 1; k < 12; k++) {
                        int l = 0;
                        while (l < out[k].n && l < out[k - 1].n && out[k].tok[l] == out[k - 1].tok[l]) l++;
                        if (l < out[k - 1].n) { revised++; break; }
                    }
                }
            }
    CU_ASSERT(runs > 100);
    CU_ASSERT(revised > 10); /* the invariants were exercised by real revisions */
}

/* ---- local agreement ------------------------------------------------------------------------- */

/* L: chunk 0 [1 2 3] (nothing committed); chunk 1 [1 2 4 5] -> commit [1 2]; chunk 2: the
 * scorer would now start with 7, but decoding continues after the committed [1 2] ->
 * [1 2 4 5 6], commit [1 2 4 5]; final [1 2 4 5 6 8], all stable. */
static const rule L[] = {
    {0, 0, {0}, 1, {{1, .9}}},
    {0, 1, {1}, 1, {{2, .9}}},
    {0, 2, {1, 2}, 1, {{3, .9}}},
    {1, 2, {1, 2}, 1, {{4, .9}}},
    {1, 3, {1, 2, 4}, 1, {{5, .9}}},
    {2, 0, {0}, 1, {{7, .9}}},
    {2, 4, {1, 2, 4, 5}, 1, {{6, .9}}},
    {3, 5, {1, 2, 4, 5, 6}, 1, {{8, .9}}},
};

static void test_agreement_commit(void)
{
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, L, SR_ARRAY_LEN(L), 1, 32);
    cfg_make(&cfg, 1, 2, 300);
    if (!drive("local_agreement", &cfg, &sc, &f, 4, out)) return;
    HYP_IS(&out[0], 1, 2, 3);
    CU_ASSERT_EQUAL(out[0].n_stable, 0);
    HYP_IS(&out[1], 1, 2, 4, 5);
    CU_ASSERT_EQUAL(out[1].n_stable, 2);
    HYP_IS(&out[2], 1, 2, 4, 5, 6);
    CU_ASSERT_EQUAL(out[2].n_stable, 4);
    HYP_IS(&out[3], 1, 2, 4, 5, 6, 8);
    CU_ASSERT_EQUAL(out[3].n_stable, 6);
    /* each update starts with one call for the committed prefix: n = committed, from = n */
    static const int want_first_n[] = {0, 0, 2, 4};
    int k = -1;
    for (int i = 0; i < f.n_log; i++) {
        CU_ASSERT_EQUAL(f.log[i].from, f.log[i].n);
        if (f.log[i].chunk != k) {
            k = f.log[i].chunk;
            CU_ASSERT_EQUAL(f.log[i].n, want_first_n[k]);
        }
    }
}

static void test_agreement_needs_two(void)
{
    /* the same hypothesis twice commits it; a single hypothesis commits nothing */
    fake f;
    sr_scorer sc;
    sr_stream_config cfg;
    static snap out[MAXCH];
    fake_init(&f, &sc, F_TABLE, C, SR_ARRAY_LEN(C), 1, 32);
    cfg_make(&cfg, 1, 2, 300);
    if (!drive("local_agreement", &cfg, &sc, &f, 3, out)) return;
    HYP_IS(&out[0], 1, 2, 3);
    CU_ASSERT_EQUAL(out[0].n_stable, 0);
    /* chunk 1 (C): [1] -> 5 now: hypothesis [1 5], agreement with [1 2 3] is [1] */
    HYP_IS(&out[1], 1, 5);
    CU_ASSERT_EQUAL(out[1].n_stable, 1);
    HYP_IS(&out[2], 1, 5);
    CU_ASSERT_EQUAL(out[2].n_stable, 2);
}

/* ---- no-speech gate ------------------------------------------------------------------------- */

static void test_nospeech_rule(void)
{
    /* openai-whisper's rule: p > 0.6 and avg log-prob <= -1; or p > 0.9 alone */
    CU_ASSERT_EQUAL(sr_aed_silent(0.6, -2.0), 0);
    CU_ASSERT_EQUAL(sr_aed_silent(0.61, -1.0), 1);
    CU_ASSERT_EQUAL(sr_aed_silent(0.61, -0.99), 0);
    CU_ASSERT_EQUAL(sr_aed_silent(0.89, -0.1), 0);
    CU_ASSERT_EQUAL(sr_aed_silent(0.91, -0.1), 1);
    CU_ASSERT_EQUAL(sr_aed_silent(0.91, NAN), 1);
    CU_ASSERT_EQUAL(sr_aed_silent(0.5, -5.0), 0);
}

/* Confident [1] (avg log .9 = -0.105) and unsure [2] (avg log .3 = -1.20), each ending on EOT. */
static const rule NS_SURE[] = {
    {0, 0, {0}, 1, {{1, .9}}},
    {0, 1, {1}, 1, {{EOT, .9}}},
};
static const rule NS_UNSURE[] = {
    {0, 0, {0}, 1, {{2, .3}}},
    {0, 1, {2}, 1, {{EOT, .3}}},
};

static void test_nospeech_offline(void)
{
    static const struct { const rule *r; int nr; double p; int want; } cases[] = {
        {NS_SURE, 2, 0.95, 0},   /* p > 0.9: silence whatever the log-prob */
        {NS_SURE, 2, 0.7, 1},    /* confident text survives a middling p (openai's escape) */
        {NS_UNSURE, 2, 0.7, 0},  /* p > 0.6 and avg <= -1: silence */
        {NS_UNSURE, 2, 0.5, 2},  /* p <= 0.6: kept however unsure */
    };
    static const char *names[] = {"aed_greedy", "aed_beam"};
    for (size_t c = 0; c < SR_ARRAY_LEN(cases); c++)
        for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
            fake f;
            sr_scorer sc;
            sr_stream_config cfg;
            static snap out[MAXCH];
            int b = d ? 2 : 1;
            fake_init(&f, &sc, F_TABLE, cases[c].r, cases[c].nr, b, 32);
            sc.aed_no_speech = fake_no_speech;
            f.ns_win[0] = cases[c].p;
            cfg_make(&cfg, b, 2, 300);
            if (!drive(names[d], &cfg, &sc, &f, 2, out)) continue;
            int32_t want = cases[c].want;
            CU_ASSERT(same(&out[1], want ? 1 : 0, &want));
        }
}

/* Two windows: [1] closed by the break token 14, then [2]. Only the silent window's text goes;
 * the break stays so the later window keeps its place. */
static const rule NS_WIN[] = {
    {0, 0, {0}, 1, {{1, .9}}},
    {0, 1, {1}, 1, {{14, .9}}},
    {0, 2, {1, 14}, 1, {{2, .9}}},
    {0, 3, {1, 14, 2}, 1, {{EOT, .9}}},
};

static void test_nospeech_windows(void)
{
    static const char *names[] = {"aed_greedy", "aed_beam"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++)
        for (int silent = 0; silent < 3; silent++) {
            fake f;
            sr_scorer sc;
            sr_stream_config cfg;
            static snap out[MAXCH];
            int b = d ? 2 : 1;
            fake_init(&f, &sc, F_TABLE, NS_WIN, SR_ARRAY_LEN(NS_WIN), b, 32);
            sc.aed_no_speech = fake_no_speech;
            f.brk = 14;
            f.ns_win[0] = silent == 1 ? 0.95 : 0.1;
            f.ns_win[1] = silent == 2 ? 0.95 : 0.1;
            cfg_make(&cfg, b, 2, 300);
            if (!drive(names[d], &cfg, &sc, &f, 1, out)) continue;
            if (silent == 0) HYP_IS(&out[0], 1, 14, 2);
            if (silent == 1) HYP_IS(&out[0], 14, 2);
            if (silent == 2) HYP_IS(&out[0], 1, 14);
        }
}

/* Streaming: [1 2 3 4] then EOT, every chunk. Silence first (chunks 0-1): nothing is shown; then
 * speech: the text. Speech first, then silence: the gate cuts back to n_stable, never below. */
static const rule NS_STREAM[] = {
    {0, 0, {0}, 1, {{1, .9}}},
    {0, 1, {1}, 1, {{2, .9}}},
    {0, 2, {1, 2}, 1, {{3, .9}}},
    {0, 3, {1, 2, 3}, 1, {{4, .9}}},
    {0, 4, {1, 2, 3, 4}, 1, {{EOT, .9}}},
};

static void test_nospeech_stream(void)
{
    static const double silence_first[] = {0.95, 0.95, 0.1, 0.1};
    static const double speech_first[] = {0.1, 0.1, 0.95, 0.95};
    static const char *names[] = {"stable_greedy", "stable_beam", "local_agreement"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
        fake f;
        sr_scorer sc;
        sr_stream_config cfg;
        static snap out[MAXCH];
        int b = d == 1 ? 2 : 1;
        fake_init(&f, &sc, F_TABLE, NS_STREAM, SR_ARRAY_LEN(NS_STREAM), b, 32);
        sc.aed_no_speech = fake_no_speech;
        f.ns_chunk = silence_first;
        cfg_make(&cfg, b, 2, 300);
        if (drive(names[d], &cfg, &sc, &f, 4, out)) {
            HYP_EMPTY(&out[0]);
            HYP_EMPTY(&out[1]);
            HYP_IS(&out[2], 1, 2, 3, 4);
            HYP_IS(&out[3], 1, 2, 3, 4);
        }
        fake_init(&f, &sc, F_TABLE, NS_STREAM, SR_ARRAY_LEN(NS_STREAM), b, 32);
        sc.aed_no_speech = fake_no_speech;
        f.ns_chunk = speech_first;
        if (!drive(names[d], &cfg, &sc, &f, 4, out)) continue;
        HYP_IS(&out[0], 1, 2, 3, 4);
        /* what was promised stable stays (drive checks it); the rest is withdrawn */
        int keep = out[1].n_stable;
        /* stable_greedy / stable_beam: n - stability_n (every beam extends [1 2 3 4]);
         * local_agreement committed the two equal hypotheses of chunks 0 and 1: all of it */
        CU_ASSERT_EQUAL(keep, d == 2 ? 4 : 2);
        static const int32_t all[] = {1, 2, 3, 4};
        for (int k = 2; k < 4; k++) {
            CU_ASSERT_EQUAL(out[k].n, keep);
            CU_ASSERT(!memcmp(out[k].tok, all, (size_t)SR_MIN(out[k].n, 4) * sizeof(int32_t)));
        }
    }
}

/* ---- the repetition guard (stream.repetition_guard) -------------------------------------------- */

/* One pass of n_chunks updates (the last final) on a fresh state; *cuts gets the hypothesis's
 * loop_cuts (what the stream reports as repetition_cuts). 1 when everything ran. */
static int run_counted(const char *name, const sr_stream_config *cfg, sr_scorer *sc, fake *f,
                       int n_chunks, snap *last, int *cuts)
{
    const sr_decoder_ops *ops = dec(name);
    void *st = NULL;
    sr_hyp h = {0};
    int ok = ops->open(cfg, sc, &st) == SR_OK;
    for (int k = 0; ok && k < n_chunks; k++) {
        f->chunk = k;
        ok = ops->update(st, sc, k == n_chunks - 1, &h) == SR_OK;
    }
    CU_ASSERT(ok);
    if (!ok) printf("\n      %s: %s\n", name, sr_last_error());
    last->n = SR_MIN(h.n, 128);
    last->n_stable = h.n_stable;
    if (last->n) memcpy(last->tok, h.tokens, (size_t)last->n * sizeof *h.tokens);
    *cuts = h.loop_cuts;
    if (st) ops->close(st);
    free(h.tokens);
    return ok;
}

/* The rule on token sequences: a unit repeated >= 4 times over >= 12 tokens at the end fires
 * and keeps one copy; what speech repeats does not. */
static void test_guard_rule(void)
{
    static const int32_t and12[12] = {290, 290, 290, 290, 290, 290, 290, 290, 290, 290, 290, 290};
    CU_ASSERT_EQUAL(sr_aed_loop_keep(and12, 12, 0), 1);
    CU_ASSERT_EQUAL(sr_aed_loop_keep(and12, 11, 0), -1); /* 11 tokens: not yet */
    /* " And so am I," then " and so am I," x 4 (tiny.en ids): 25 tokens, cut to 10 */
    int32_t am[25] = {843, 523, 716, 314, 11};
    for (int r = 1; r < 5; r++) {
        static const int32_t u[5] = {290, 523, 716, 314, 11};
        memcpy(am + 5 * r, u, sizeof u);
    }
    CU_ASSERT_EQUAL(sr_aed_loop_keep(am, 25, 0), 10);
    CU_ASSERT_EQUAL(sr_aed_loop_keep(am, 25, 17), 17);   /* never below min_keep */
    CU_ASSERT_EQUAL(sr_aed_loop_keep(am, 20, 0), -1);    /* three copies are left alone */
    /* tiny.en's offline tokens for jfk.wav: "ask what your country can do" twice is no loop */
    static const int32_t jfk[] = {843, 523, 616, 5891, 3399, 1265, 407, 644, 534, 1499, 460, 466,
                                  329, 345, 11, 1265, 644, 345, 460, 466, 329, 534, 1499, 13};
    for (int n = 1; n <= (int)SR_ARRAY_LEN(jfk); n++) CU_ASSERT_EQUAL(sr_aed_loop_keep(jfk, n, 0), -1);
    static const int32_t no4[] = {645, 645, 645, 645}; /* "no no no no" */
    CU_ASSERT_EQUAL(sr_aed_loop_keep(no4, 4, 0), -1);
}

/* Every AED decoder on a scorer that loops "1 2 1 2 ...": with the guard the hypothesis stays
 * short and loop_cuts counts the cuts; without it the loop runs to aed_max_len (offline) or
 * grows with every chunk (streaming), as before the guard existed, and nothing is counted. */
static void test_guard_switch(void)
{
    static const char *names[] = {"aed_greedy", "aed_beam", "stable_greedy", "stable_beam", "local_agreement"};
    for (size_t d = 0; d < SR_ARRAY_LEN(names); d++) {
        int b = strstr(names[d], "beam") ? 2 : 1, offline = !strncmp(names[d], "aed_", 4);
        int n_chunks = offline ? 1 : 8;
        fake f;
        sr_scorer sc;
        sr_stream_config cfg;
        snap on, off;
        int cuts_on = -1, cuts_off = -1;
        fake_init(&f, &sc, F_LOOP, NULL, 0, 2 * b, 64);
        f.period = 2;
        cfg_make(&cfg, b, 2, 300);
        if (!run_counted(names[d], &cfg, &sc, &f, n_chunks, &on, &cuts_on)) continue;
        fake_init(&f, &sc, F_LOOP, NULL, 0, 2 * b, 64);
        f.period = 2;
        cfg.repetition_guard = 0;
        if (!run_counted(names[d], &cfg, &sc, &f, n_chunks, &off, &cuts_off)) continue;
        CU_ASSERT(on.n < 12);
        CU_ASSERT(cuts_on >= 1);
        CU_ASSERT_EQUAL(cuts_off, 0);
        /* unguarded: the loop itself, far past the rule's 12 tokens */
        CU_ASSERT(off.n >= 24);
        if (offline) CU_ASSERT_EQUAL(off.n, 64);
        for (int i = 0; i < off.n; i++) CU_ASSERT_EQUAL(off.tok[i], 1 + i % 2);
        if (on.n >= 12 || !cuts_on || cuts_off || off.n < 24)
            printf("\n      %s: guard on %d tokens (%d cuts), off %d tokens (%d cuts)\n", names[d],
                   on.n, cuts_on, off.n, cuts_off);
    }
}

/* Hypotheses without a loop are the same with and without the guard, and nothing is counted:
 * the speech-like repetitions of script R and the beam script B1. */
static void test_guard_quiet_on_speech(void)
{
    static const struct { const char *name; const rule *r; int nr; int beam; } cases[] = {
        {"aed_greedy", R, (int)SR_ARRAY_LEN(R), 1}, {"stable_greedy", R, (int)SR_ARRAY_LEN(R), 1},
        {"local_agreement", R, (int)SR_ARRAY_LEN(R), 1}, {"aed_beam", B1, (int)SR_ARRAY_LEN(B1), 2},
        {"stable_beam", B1, (int)SR_ARRAY_LEN(B1), 2},
    };
    for (size_t c = 0; c < SR_ARRAY_LEN(cases); c++) {
        fake f;
        sr_scorer sc;
        sr_stream_config cfg;
        snap on, off;
        int cuts_on = -1, cuts_off = -1;
        fake_init(&f, &sc, F_TABLE, cases[c].r, cases[c].nr, 2 * cases[c].beam, 64);
        cfg_make(&cfg, cases[c].beam, 2, 1000);
        if (!run_counted(cases[c].name, &cfg, &sc, &f, 3, &on, &cuts_on)) continue;
        fake_init(&f, &sc, F_TABLE, cases[c].r, cases[c].nr, 2 * cases[c].beam, 64);
        cfg.repetition_guard = 0;
        if (!run_counted(cases[c].name, &cfg, &sc, &f, 3, &off, &cuts_off)) continue;
        CU_ASSERT_EQUAL(cuts_on, 0);
        CU_ASSERT_EQUAL(cuts_off, 0);
        CU_ASSERT(on.n > 0);
        CU_ASSERT(same(&off, on.n, on.tok));
    }
}

void test_register_decoders(void)
{
    TEST_SUITE("decoders_aed",
               {"greedy_offline", test_greedy_offline},
               {"beam_length_normalized", test_beam_length_normalized},
               {"beam1_is_greedy", test_beam1_is_greedy},
               {"beam_max_len_topup", test_beam_max_len},
               {"beam_whisper_rules", test_beam_whisper_rules},
               {"max_len_all_decoders", test_max_len_all},
               {"loop_guard_offline", test_loop_guard_offline},
               {"loop_rule_keeps_speech", test_loop_rule_keeps_speech},
               {"silence_empty", test_silence_empty},
               {"bad_config", test_bad_config},
               {"scorer_error", test_scorer_error},
               {"registry", test_registry});
    TEST_SUITE("decoders_stable",
               {"greedy_keep_rules", test_greedy_keep_rules},
               {"greedy_cut_all_after", test_greedy_cut_all_after},
               {"greedy_window_zero", test_greedy_window_zero},
               {"greedy_cap", test_greedy_cap},
               {"loop_guard_stream", test_stream_loop_guard},
               {"beam_topb_cut", test_beam_topb_cut},
               {"beam_fell_cut", test_beam_fell_cut},
               {"beam_committed_prefix", test_beam_committed_prefix},
               {"random_invariants", test_random_invariants});
    TEST_SUITE("decoders_agreement",
               {"commit_common_prefix", test_agreement_commit},
               {"needs_two", test_agreement_needs_two});
    TEST_SUITE("decoders_nospeech",
               {"rule", test_nospeech_rule},
               {"offline", test_nospeech_offline},
               {"windows", test_nospeech_windows},
               {"stream", test_nospeech_stream});
    TEST_SUITE("decoders_guard",
               {"rule", test_guard_rule},
               {"switch", test_guard_switch},
               {"quiet_on_speech", test_guard_quiet_on_speech});
}
