/*
 * test_ops_attn.c — attention over cache pools (kernels.h: sr_kattn, the CPU table's attn;
 * suite kernels_attn).
 *
 * Every case builds K / V pools (f32, f16, bf16; several layers and slots), a batch of
 * sequences with their own slots, positions (often beyond the pool's rows, so the ring wraps)
 * and new-row counts, and per-row key ranges in the patterns the backends use: full (offline
 * encoder, cross-attention), causal sliding windows (Voxtral), Whisper's block-causal limits,
 * FastConformer's chunked [L, R] masks and banded windows, random ranges, empty ones and
 * scattered 1-3 key ranges (which make the op cut a sequence's rows into several blocks). The
 * op is compared with the double reference of tests/ref_attn.c on every output element.
 * Poison: the padding of q rows, every pool row no range of its sequence reads (other slots,
 * other layers, ring rows outside the ranges) and every rel row no row needs hold NaN, so a
 * read outside the contract poisons the result; out starts as NaN (every element must be
 * written) with a sentinel after each row that must survive.
 *
 * Tolerance, per element (ref_attn.h derives it): with u = 2^-24 and n keys in the range,
 *   |out - ref| <= ((e^(2 Theta) - 1) + 1.01 (n + 3) u e^(2 Theta)) sum_j p_j |v_jd| + tiny,
 *   Theta = max_j [delta_j + u |s_j - m|] + 2 u max delta + 4.1 u,
 *   delta_j = 1.01 u ((hd + 1) |scale| sum_d |q'_d k_jd| + 2 |s_j|):
 * the score error of an f32 fused dot product of hd terms (plus q + u and the scale), the
 * rounding of s - max and exp's <= 2 ulp (checked exhaustively over [-87, 0] when the kernel
 * was written: 1.99 u) move every softmax weight by at most e^(+-2 Theta) after normalisation,
 * and the f32 weighted sum of n terms, 1 / sum and the final product add (n + 3) u of it. The
 * printed figures are the max absolute error and the max ratio error / bound.
 *
 * Row independence: a batch of several sequences is computed once; then each sequence alone
 * (n_seq = 1) and each row alone (a one-row sequence at its position) must give the same bits
 * (memcmp), as must 1 vs 2 threads and the AVX-512, AVX2 and portable paths (the op's numbers
 * are defined to be identical on all of them).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../kernels/cpu/cpu_impl.h"
#include "ref_attn.h"
#include "test.h"

#define SENTINEL 4242.0f
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MAXSEQ 8

static uint64_t rng;
static double rnd(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 40) / (double)(1ULL << 24) * 2.0 - 1.0;
}
static int rndi(int n) /* [0, n) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int)((rng >> 33) % (uint64_t)n);
}

enum { R_FULL, R_CAUSAL, R_BLOCK, R_CHUNKED, R_BAND, R_RANDOM, R_EMPTY, R_SPREAD };

typedef struct {
    const char *name;
    int H, G, hd;
    sr_dtype kdt, vdt;
    int rows, slots, layers, layer;
    int rel;
    int n_seq;
    int n[MAXSEQ];      /* new rows per sequence */
    int slot[MAXSEQ];
    int64_t pos[MAXSEQ];
    int mode[MAXSEQ];
    int par;            /* window / block / chunk parameter */
    int padq, pado;
    float qmag;         /* q magnitude: larger = sharper softmax */
} attn_case;

typedef struct {
    sr_kattn a;
    sr_kbatch b;
    int row0[MAXSEQ + 1];
    int M, ldq, ldo, nrel;
    int64_t *lo, *hi;
    float *q, *out, *rel, *u, *v;
    sr_kpool *K, *V;
    double *ref, *bound;
} attn_data;

static void data_free(attn_data *D)
{
    const sr_kernels *k = sr_kernels_cpu();
    free(D->lo); free(D->hi); free(D->q); free(D->out); free(D->rel); free(D->u); free(D->v);
    free(D->ref); free(D->bound);
    sr_kpool_free(k, D->K);
    sr_kpool_free(k, D->V);
    memset(D, 0, sizeof *D);
}

static void set_elt(sr_kpool *p, size_t i, float x)
{
    if (p->dtype == SR_F16) ((uint16_t *)p->data)[i] = sr_f32_to_f16(x);
    else if (p->dtype == SR_BF16) ((uint16_t *)p->data)[i] = sr_f32_to_bf16(x);
    else ((float *)p->data)[i] = x;
}

/* Key range of row i (position p) of a sequence whose rows are at pos .. pos + n - 1 and whose
 * keys are the positions [0, pos + n), the pool holding the last `rows` of them. */
static void row_range(const attn_case *c, int s, int i, int64_t *lo, int64_t *hi)
{
    int64_t p = c->pos[s] + i, end = c->pos[s] + c->n[s];
    int64_t first = end - c->rows > 0 ? end - c->rows : 0; /* oldest position held */
    int w = c->par > 0 ? c->par : 1;
    switch (c->mode[s]) {
    case R_FULL: *lo = first; *hi = end; break;
    case R_CAUSAL: /* window of w ending at p */
        *hi = p + 1;
        *lo = p + 1 - w > first ? p + 1 - w : first;
        break;
    case R_BLOCK: /* Whisper's klim: keys up to the end of p's block of w rows */
        *hi = (p / w + 1) * w < end ? (p / w + 1) * w : end;
        *lo = first;
        break;
    case R_CHUNKED: { /* [L, R] = [2w - 1, w - 1]: chunk w, two chunks of left context */
        int64_t qc = p / w;
        *lo = (qc - 2) * w > first ? (qc - 2) * w : first;
        *hi = (qc + 1) * w < end ? (qc + 1) * w : end;
        break;
    }
    case R_BAND: /* p - w .. p + w / 2 */
        *lo = p - w > first ? p - w : first;
        *hi = p + w / 2 + 1 < end ? p + w / 2 + 1 : end;
        break;
    case R_RANDOM: {
        int64_t span = end - first;
        *lo = first + rndi((int)span + 1);
        int64_t room = end - *lo;
        *hi = *lo + (room ? rndi((int)room + 1) : 0);
        break;
    }
    case R_SPREAD: { /* 1-3 keys at scattered places: the op must cut blocks (hull cap) */
        int64_t span = end - first;
        *lo = first + (int64_t)((i * 7919 + 13) % (span ? span : 1));
        *hi = *lo + 1 + i % 3 < end ? *lo + 1 + i % 3 : end;
        break;
    }
    default: *lo = *hi = first; break;
    }
    if (*hi < *lo) *hi = *lo;
    if (*hi - *lo > c->rows) *lo = *hi - c->rows;
}

static int data_make(const attn_case *c, attn_data *D, uint64_t seed)
{
    memset(D, 0, sizeof *D);
    const sr_kernels *k = sr_kernels_cpu();
    rng = seed;
    int H = c->H, G = c->G, hd = c->hd, w = H * hd, kw = G * hd;
    D->row0[0] = 0;
    for (int s = 0; s < c->n_seq; s++) D->row0[s + 1] = D->row0[s] + c->n[s];
    D->M = D->row0[c->n_seq];
    int M1 = D->M ? D->M : 1;
    D->ldq = w + c->padq;
    D->ldo = w + c->pado;
    D->lo = malloc((size_t)M1 * sizeof(int64_t));
    D->hi = malloc((size_t)M1 * sizeof(int64_t));
    D->q = malloc((size_t)M1 * D->ldq * sizeof(float));
    D->out = malloc((size_t)M1 * D->ldo * sizeof(float));
    D->ref = malloc((size_t)M1 * w * sizeof(double));
    D->bound = malloc((size_t)M1 * w * sizeof(double));
    if (!D->lo || !D->hi || !D->q || !D->out || !D->ref || !D->bound) return 0;
    if (sr_kpool_create(k, c->kdt, c->layers, c->slots, c->rows, kw, &D->K) ||
        sr_kpool_create(k, c->vdt, c->layers, c->slots, c->rows, kw, &D->V))
        return 0;
    /* ranges, and which ring rows of which slot any range reads */
    unsigned char *used = calloc((size_t)c->slots * c->rows, 1);
    if (!used) return 0;
    int64_t dmax = INT64_MIN, dmin = INT64_MAX;
    for (int s = 0; s < c->n_seq; s++)
        for (int i = 0; i < c->n[s]; i++) {
            int r = D->row0[s] + i;
            row_range(c, s, i, &D->lo[r], &D->hi[r]);
            for (int64_t j = D->lo[r]; j < D->hi[r]; j++) used[(size_t)c->slot[s] * c->rows + j % c->rows] = 1;
            if (D->hi[r] > D->lo[r]) {
                int64_t p = c->pos[s] + i;
                dmax = MAX(dmax, p - D->lo[r]);
                dmin = MIN(dmin, p - (D->hi[r] - 1));
            }
        }
    /* pools: data where read, NaN elsewhere (other layers, slots, ring rows) */
    for (int l = 0; l < c->layers; l++)
        for (int sl = 0; sl < c->slots; sl++)
            for (int rr = 0; rr < c->rows; rr++) {
                int live = l == c->layer && used[(size_t)sl * c->rows + rr];
                size_t at = sr_kpool_at(D->K, l, sl, rr);
                for (int x = 0; x < kw; x++) {
                    set_elt(D->K, at + x, live ? (float)rnd() : NAN);
                    set_elt(D->V, at + x, live ? (float)rnd() : NAN);
                }
            }
    free(used);
    for (int r = 0; r < D->M; r++)
        for (int x = 0; x < D->ldq; x++)
            D->q[(size_t)r * D->ldq + x] = x < w ? (float)(c->qmag * rnd()) : NAN;
    for (int r = 0; r < D->M; r++)
        for (int x = 0; x < D->ldo; x++) D->out[(size_t)r * D->ldo + x] = x < w ? NAN : SENTINEL;
    D->a = (sr_kattn){.n_head = H, .n_kv_head = G, .head_dim = hd,
                      .scale = 1.0f / sqrtf((float)hd), .lo = D->lo, .hi = D->hi};
    if (c->rel) {
        if (dmax == INT64_MIN) dmax = dmin = 0;
        D->a.rel_max = (int)dmax + 3;
        D->a.rel_min = (int)dmin - 2;
        D->nrel = D->a.rel_max - D->a.rel_min + 1;
        D->rel = malloc((size_t)D->nrel * w * sizeof(float));
        D->u = malloc((size_t)w * sizeof(float));
        D->v = malloc((size_t)w * sizeof(float));
        unsigned char *need = calloc((size_t)D->nrel, 1);
        if (!D->rel || !D->u || !D->v || !need) { free(need); return 0; }
        for (int s = 0; s < c->n_seq; s++)
            for (int i = 0; i < c->n[s]; i++) {
                int r = D->row0[s] + i;
                int64_t p = c->pos[s] + i;
                for (int64_t j = D->lo[r]; j < D->hi[r]; j++) need[D->a.rel_max - (p - j)] = 1;
            }
        for (int m = 0; m < D->nrel; m++)
            for (int x = 0; x < w; x++) D->rel[(size_t)m * w + x] = need[m] ? (float)rnd() : NAN;
        free(need);
        for (int x = 0; x < w; x++) {
            D->u[x] = (float)(0.5 * rnd());
            D->v[x] = (float)(0.5 * rnd());
        }
        D->a.rel = D->rel;
        D->a.pos_u = D->u;
        D->a.pos_v = D->v;
    }
    D->b = (sr_kbatch){.n_seq = c->n_seq, .row0 = D->row0, .slot = c->slot, .pos = c->pos};
    return 1;
}

/* Compare D->out with the reference; returns 1 when every element is within its bound and
 * every sentinel survived. */
static int check(const attn_case *c, attn_data *D, double *max_err, double *max_ratio)
{
    int w = c->H * c->hd, ok = 1;
    ref_attn(&D->a, &D->b, D->q, D->ldq, D->K, D->V, c->layer, D->ref, D->bound);
    for (int r = 0; r < D->M; r++) {
        for (int x = 0; x < w; x++) {
            double o = D->out[(size_t)r * D->ldo + x], ref = D->ref[(size_t)r * w + x];
            double bd = D->bound[(size_t)r * w + x], err = fabs(o - ref);
            if (!(err <= bd)) {
                if (ok)
                    printf("\n      %s: row %d col %d: %.9g vs ref %.9g (err %.3g > bound %.3g)", c->name,
                           r, x, o, ref, err, bd);
                ok = 0;
            }
            if (err > *max_err) *max_err = err;
            if (bd > 0 && err / bd > *max_ratio) *max_ratio = err / bd;
        }
        for (int x = w; x < D->ldo; x++)
            if (D->out[(size_t)r * D->ldo + x] != SENTINEL) {
                if (ok) printf("\n      %s: row %d: sentinel overwritten", c->name, r);
                ok = 0;
            }
    }
    return ok;
}

static sr_status run_op(attn_data *D, const attn_case *c)
{
    return sr_kernels_cpu()->attn(&D->a, &D->b, D->q, D->ldq, D->K, D->V, c->layer, D->out, D->ldo);
}

/* ---- cases -------------------------------------------------------------------------------- */

static const sr_dtype dts[3] = {SR_F32, SR_F16, SR_BF16};

/* A random case: shape from the list, 1-5 sequences with random modes and positions. */
static void random_case(attn_case *c, int idx)
{
    static const int shapes[][3] = {{6, 6, 64}, {32, 8, 64}, {4, 2, 24}, {3, 3, 17}, {8, 1, 16},
                                    {2, 2, 1},  {5, 5, 40},  {4, 4, 128}, {12, 3, 32}, {1, 1, 7}};
    memset(c, 0, sizeof *c);
    c->name = "random";
    const int *sh = shapes[idx % 10];
    c->H = sh[0];
    c->G = sh[1];
    c->hd = sh[2];
    c->kdt = dts[rndi(3)];
    c->vdt = rndi(4) ? c->kdt : dts[rndi(3)];
    c->rows = 8 + rndi(90);
    c->layers = 1 + rndi(3);
    c->layer = rndi(c->layers);
    c->rel = rndi(2);
    c->n_seq = 1 + rndi(5);
    c->slots = c->n_seq + rndi(3);
    c->par = 1 + rndi(12);
    c->padq = rndi(3) * 5;
    c->pado = rndi(3) * 3;
    c->qmag = rndi(3) == 0 ? 4.0f : 1.0f;
    int perm[MAXSEQ + 3];
    for (int i = 0; i < c->slots; i++) perm[i] = i;
    for (int i = c->slots - 1; i > 0; i--) {
        int j = rndi(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int s = 0; s < c->n_seq; s++) {
        c->slot[s] = perm[s];
        c->mode[s] = rndi(8);
        int maxn = c->rows < 40 ? c->rows : 40;
        c->n[s] = rndi(4) == 0 ? rndi(3) : 1 + rndi(maxn);
        c->pos[s] = rndi(3) == 0 ? 0 : rndi(4 * c->rows + 50); /* often past the ring's end */
    }
}

static void test_random_vs_reference(void)
{
    double max_err = 0, max_ratio = 0;
    int fails = 0;
    for (int idx = 0; idx < 120; idx++) {
        attn_case c;
        rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(idx + 1);
        random_case(&c, idx);
        attn_data D;
        if (!data_make(&c, &D, 0xABCDEF01ULL + (uint64_t)idx)) {
            CU_FAIL("allocation");
            data_free(&D);
            return;
        }
        sr_status st = run_op(&D, &c);
        CU_ASSERT_EQUAL(st, SR_OK);
        if (st) printf("\n      case %d: %s", idx, sr_last_error());
        if (!st && !check(&c, &D, &max_err, &max_ratio)) {
            printf(" [case %d: H %d G %d hd %d k %s v %s rows %d rel %d n_seq %d]", idx, c.H, c.G, c.hd,
                   sr_dtype_name(c.kdt), sr_dtype_name(c.vdt), c.rows, c.rel, c.n_seq);
            fails++;
        }
        data_free(&D);
    }
    CU_ASSERT_EQUAL(fails, 0);
    printf("\n      120 random cases (%s): max |err| %.3g, max err / bound %.3g\n      ",
           sr_cpu_attn_isa(), max_err, max_ratio);
}

/* The backends' patterns at their shapes (reduced lengths). */
static void test_backend_shapes(void)
{
    attn_case cs[] = {
        /* Whisper encoder, block-causal streaming: 6 heads of 64, f32 cache, 2 x 16 rows */
        {.name = "whisper block-causal", .H = 6, .G = 6, .hd = 64, .kdt = SR_F32, .vdt = SR_F32,
         .rows = 300, .slots = 2, .layers = 2, .layer = 1, .n_seq = 1, .n = {50}, .slot = {1},
         .pos = {100}, .mode = {R_BLOCK}, .par = 16, .qmag = 1},
        /* Whisper decoder cross-attention: every row the full encoder output */
        {.name = "whisper cross", .H = 6, .G = 6, .hd = 64, .kdt = SR_F32, .vdt = SR_F32,
         .rows = 150, .slots = 3, .layers = 1, .n_seq = 3, .n = {1, 3, 2}, .slot = {2, 0, 1},
         .pos = {150, 150, 150}, .mode = {R_FULL, R_FULL, R_FULL}, .qmag = 1},
        /* FastConformer chunked [L, R] with rel-pos over a f16 cache */
        {.name = "fastconformer chunked rel f16", .H = 4, .G = 4, .hd = 32, .kdt = SR_F16,
         .vdt = SR_F16, .rows = 70, .slots = 2, .layers = 1, .rel = 1, .n_seq = 2, .n = {12, 9},
         .slot = {1, 0}, .pos = {200, 7}, .mode = {R_CHUNKED, R_CHUNKED}, .par = 4, .qmag = 2},
        /* FastConformer regular / banded local attention with rel-pos */
        {.name = "fastconformer band rel", .H = 4, .G = 4, .hd = 32, .kdt = SR_F32, .vdt = SR_F32,
         .rows = 64, .slots = 1, .layers = 1, .rel = 1, .n_seq = 1, .n = {40}, .slot = {0},
         .pos = {500}, .mode = {R_BAND}, .par = 9, .qmag = 1},
        /* Voxtral decoder: GQA 32 / 8, head 64 (reduced), bf16 ring, sliding window, 1 row */
        {.name = "voxtral gqa bf16", .H = 32, .G = 8, .hd = 64, .kdt = SR_BF16, .vdt = SR_BF16,
         .rows = 90, .slots = 4, .layers = 2, .layer = 0, .n_seq = 3, .n = {1, 4, 1},
         .slot = {3, 1, 2}, .pos = {1000, 20, 89}, .mode = {R_CAUSAL, R_CAUSAL, R_CAUSAL},
         .par = 80, .qmag = 1},
        /* Voxtral encoder: 32 heads of 64, no GQA, several rows */
        {.name = "voxtral encoder", .H = 32, .G = 32, .hd = 64, .kdt = SR_BF16, .vdt = SR_BF16,
         .rows = 60, .slots = 1, .layers = 1, .n_seq = 1, .n = {8}, .slot = {0}, .pos = {333},
         .mode = {R_CAUSAL}, .par = 50, .qmag = 1},
    };
    double max_err = 0, max_ratio = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        attn_data D;
        if (!data_make(&cs[i], &D, 77 + i)) {
            CU_FAIL("allocation");
            data_free(&D);
            return;
        }
        sr_status st = run_op(&D, &cs[i]);
        CU_ASSERT_EQUAL(st, SR_OK);
        if (st) printf("\n      %s: %s", cs[i].name, sr_last_error());
        else CU_ASSERT(check(&cs[i], &D, &max_err, &max_ratio));
        data_free(&D);
    }
    printf("\n      backend patterns: max |err| %.3g, max err / bound %.3g\n      ", max_err, max_ratio);
}

/* Every path the CPU has gives the same bits as the default one, and each path is checked
 * against the reference on its own. */
static void test_paths_identical(void)
{
    static const char *paths[] = {"avx512", "avx2", "portable"};
    int checked = 0;
    double max_err = 0, max_ratio = 0;
    for (int idx = 0; idx < 30; idx++) {
        attn_case c;
        rng = 0xD1B54A32D192ED03ULL * (uint64_t)(idx + 3);
        random_case(&c, idx);
        attn_data D;
        if (!data_make(&c, &D, 0x5151ULL + (uint64_t)idx)) {
            CU_FAIL("allocation");
            data_free(&D);
            return;
        }
        size_t bytes = (size_t)(D.M ? D.M : 1) * D.ldo * sizeof(float);
        float *first = malloc(bytes);
        int have = 0;
        for (int p = 0; p < 3; p++) {
            if (sr_cpu_attn_force_isa(paths[p])) continue;
            for (int r = 0; r < D.M; r++)
                for (int x = 0; x < c.H * c.hd; x++) D.out[(size_t)r * D.ldo + x] = NAN;
            CU_ASSERT_EQUAL(run_op(&D, &c), SR_OK);
            CU_ASSERT(check(&c, &D, &max_err, &max_ratio));
            if (!have) {
                memcpy(first, D.out, bytes);
                have = 1;
            } else if (memcmp(first, D.out, bytes)) {
                printf("\n      case %d: path %s differs from the first path", idx, paths[p]);
                CU_FAIL("paths differ");
            }
            checked++;
        }
        sr_cpu_attn_force_isa(NULL);
        free(first);
        data_free(&D);
    }
    printf("\n      %d (case, path) runs bit-identical across paths; max |err| %.3g, err / bound %.3g\n      ",
           checked, max_err, max_ratio);
}

/* Each sequence alone, each row alone, 1 vs 2 threads: the same bits as in the batch. */
static void independence_case(const attn_case *c, uint64_t seed)
{
    attn_data D;
    if (!data_make(c, &D, seed)) {
        CU_FAIL("allocation");
        data_free(&D);
        return;
    }
    const sr_kernels *k = sr_kernels_cpu();
    int w = c->H * c->hd, threads0 = sr_cpu_threads();
    size_t bytes = (size_t)D.M * D.ldo * sizeof(float);
    float *batch = malloc(bytes), *alone = malloc(bytes);
    sr_cpu_set_threads(2);
    CU_ASSERT_EQUAL(run_op(&D, c), SR_OK);
    double e = 0, r = 0;
    CU_ASSERT(check(c, &D, &e, &r));
    memcpy(batch, D.out, bytes);

    /* one thread */
    sr_cpu_set_threads(1);
    for (int i = 0; i < D.M; i++)
        for (int x = 0; x < w; x++) D.out[(size_t)i * D.ldo + x] = NAN;
    CU_ASSERT_EQUAL(run_op(&D, c), SR_OK);
    if (memcmp(batch, D.out, bytes)) {
        printf("\n      %s: 1 thread differs from 2", c->name);
        CU_FAIL("threads differ");
    }
    sr_cpu_set_threads(2);

    /* each sequence alone, then each row alone */
    for (int s = 0; s < c->n_seq; s++) {
        int r0 = D.row0[s], n = c->n[s];
        if (!n) continue;
        int row0[2] = {0, n};
        sr_kbatch b1 = {.n_seq = 1, .row0 = row0, .slot = &c->slot[s], .pos = &c->pos[s]};
        sr_kattn a1 = D.a;
        a1.lo = D.lo + r0;
        a1.hi = D.hi + r0;
        for (size_t i = 0; i < (size_t)n * D.ldo; i++) alone[i] = NAN;
        CU_ASSERT_EQUAL(k->attn(&a1, &b1, D.q + (size_t)r0 * D.ldq, D.ldq, D.K, D.V, c->layer, alone, D.ldo), SR_OK);
        for (int i = 0; i < n; i++)
            if (memcmp(alone + (size_t)i * D.ldo, batch + (size_t)(r0 + i) * D.ldo, (size_t)w * sizeof(float))) {
                printf("\n      %s: sequence %d row %d alone differs from the batch", c->name, s, i);
                CU_FAIL("sequence alone differs");
                break;
            }
        for (int i = 0; i < n; i++) {
            int one[2] = {0, 1};
            int64_t p = c->pos[s] + i;
            sr_kbatch b2 = {.n_seq = 1, .row0 = one, .slot = &c->slot[s], .pos = &p};
            sr_kattn a2 = D.a;
            a2.lo = D.lo + r0 + i;
            a2.hi = D.hi + r0 + i;
            for (int x = 0; x < w; x++) alone[x] = NAN;
            CU_ASSERT_EQUAL(k->attn(&a2, &b2, D.q + (size_t)(r0 + i) * D.ldq, D.ldq, D.K, D.V, c->layer, alone, D.ldo), SR_OK);
            if (memcmp(alone, batch + (size_t)(r0 + i) * D.ldo, (size_t)w * sizeof(float))) {
                printf("\n      %s: sequence %d row %d as a one-row sequence differs", c->name, s, i);
                CU_FAIL("row alone differs");
                break;
            }
        }
    }
    sr_cpu_set_threads(threads0);
    free(batch);
    free(alone);
    data_free(&D);
}

static void test_row_independence(void)
{
    attn_case cs[] = {
        {.name = "mixed plain", .H = 6, .G = 6, .hd = 64, .kdt = SR_F32, .vdt = SR_F32, .rows = 200,
         .slots = 6, .layers = 2, .layer = 1, .n_seq = 5, .n = {1, 5, 70, 0, 33},
         .slot = {4, 0, 2, 5, 1}, .pos = {0, 640, 37, 9, 1201},
         .mode = {R_FULL, R_CAUSAL, R_BLOCK, R_FULL, R_RANDOM}, .par = 11, .padq = 3, .pado = 2, .qmag = 2},
        {.name = "gqa bf16", .H = 32, .G = 8, .hd = 64, .kdt = SR_BF16, .vdt = SR_BF16, .rows = 120,
         .slots = 4, .layers = 1, .n_seq = 4, .n = {1, 7, 3, 40}, .slot = {3, 1, 0, 2},
         .pos = {500, 119, 2, 77}, .mode = {R_CAUSAL, R_CAUSAL, R_EMPTY, R_BAND}, .par = 100, .qmag = 1},
        {.name = "rel f16", .H = 4, .G = 4, .hd = 24, .kdt = SR_F16, .vdt = SR_F32, .rows = 80,
         .slots = 3, .layers = 1, .rel = 1, .n_seq = 3, .n = {17, 2, 45}, .slot = {2, 0, 1},
         .pos = {333, 0, 160}, .mode = {R_CHUNKED, R_FULL, R_BAND}, .par = 5, .pado = 5, .qmag = 1},
        {.name = "rel gqa", .H = 6, .G = 2, .hd = 17, .kdt = SR_F32, .vdt = SR_BF16, .rows = 50,
         .slots = 2, .layers = 1, .rel = 1, .n_seq = 2, .n = {20, 9}, .slot = {1, 0},
         .pos = {70, 3}, .mode = {R_RANDOM, R_CAUSAL}, .par = 30, .qmag = 1},
        {.name = "spread", .H = 8, .G = 4, .hd = 16, .kdt = SR_F32, .vdt = SR_F16, .rows = 200,
         .slots = 2, .layers = 1, .rel = 1, .n_seq = 2, .n = {60, 3}, .slot = {0, 1},
         .pos = {900, 12}, .mode = {R_SPREAD, R_SPREAD}, .qmag = 2},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) independence_case(&cs[i], 1000 + i);
    /* the same on the AVX2 path (a different block size) when the CPU has it */
    if (!sr_cpu_attn_force_isa("avx2")) {
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) independence_case(&cs[i], 2000 + i);
        sr_cpu_attn_force_isa(NULL);
    }
}

static void test_edges(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    /* M = 0: a no-op, even without q / out / ranges */
    attn_case c = {.name = "edges", .H = 2, .G = 1, .hd = 8, .kdt = SR_F32, .vdt = SR_F32, .rows = 16,
                   .slots = 2, .layers = 1, .n_seq = 2, .n = {3, 4}, .slot = {0, 1}, .pos = {5, 30},
                   .mode = {R_EMPTY, R_FULL}, .pado = 1, .qmag = 1};
    attn_data D;
    if (!data_make(&c, &D, 5)) {
        CU_FAIL("allocation");
        data_free(&D);
        return;
    }
    int zero_rows[3] = {0, 0, 0};
    sr_kbatch b0 = {.n_seq = 2, .row0 = zero_rows, .slot = NULL, .pos = NULL};
    sr_kattn a0 = D.a;
    a0.lo = a0.hi = NULL;
    CU_ASSERT_EQUAL(k->attn(&a0, &b0, NULL, 0, D.K, D.V, 0, NULL, 0), SR_OK);
    b0.n_seq = 0;
    CU_ASSERT_EQUAL(k->attn(&a0, &b0, NULL, 0, D.K, D.V, 0, NULL, 0), SR_OK);
    /* empty ranges give zero rows (out starts as NaN), full ones are checked */
    CU_ASSERT_EQUAL(run_op(&D, &c), SR_OK);
    double e = 0, r = 0;
    CU_ASSERT(check(&c, &D, &e, &r));
    for (int i = 0; i < 3; i++)
        for (int x = 0; x < 16; x++) CU_ASSERT_EQUAL(D.out[(size_t)i * D.ldo + x], 0.0f);
    /* a single key: out = v exactly */
    D.lo[3] = 40; D.hi[3] = 41;
    CU_ASSERT_EQUAL(run_op(&D, &c), SR_OK);
    for (int x = 0; x < 16; x++) {
        float v = (float)ref_pool_at(D.V, 0, 1, 40 % 16, x % 8);
        CU_ASSERT_EQUAL(D.out[(size_t)3 * D.ldo + x], v);
    }
    /* a range of exactly the pool's rows, wrapping */
    D.lo[4] = 21; D.hi[4] = 37;
    CU_ASSERT_EQUAL(run_op(&D, &c), SR_OK);
    CU_ASSERT(check(&c, &D, &e, &r));
    data_free(&D);
}

static void test_bad_args(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    attn_case c = {.name = "bad", .H = 4, .G = 2, .hd = 8, .kdt = SR_F32, .vdt = SR_F32, .rows = 16,
                   .slots = 2, .layers = 2, .rel = 1, .n_seq = 2, .n = {3, 2}, .slot = {0, 1},
                   .pos = {5, 30}, .mode = {R_FULL, R_CAUSAL}, .par = 4, .qmag = 1};
    attn_data D;
    if (!data_make(&c, &D, 9)) {
        CU_FAIL("allocation");
        data_free(&D);
        return;
    }
    sr_kattn a = D.a;
    sr_kbatch b = D.b;
    float *q = D.q, *o = D.out;
    int ldq = D.ldq, ldo = D.ldo;
#define CALL(A, B, Q, LQ, KP, VP, L, O, LO) k->attn((A), (B), (Q), (LQ), (KP), (VP), (L), (O), (LO))
    CU_ASSERT_EQUAL(CALL(&a, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_OK);
    TEST_ASSERT_ERR(CALL(NULL, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: a is NULL");
    TEST_ASSERT_ERR(CALL(&a, NULL, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: b is NULL");
    sr_kattn x = a;
    x.n_head = 0;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: n_head 0");
    x = a;
    x.head_dim = -1;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "head_dim -1");
    x = a;
    x.n_kv_head = 3;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "not a multiple of n_kv_head");
    sr_kbatch y = b;
    y.n_seq = -1;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: n_seq = -1");
    y = b;
    y.row0 = NULL;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: b->row0 is NULL");
    int bad0[3] = {1, 3, 5}, dec[3] = {0, 3, 2};
    y.row0 = bad0;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "row0[0] = 1");
    y.row0 = dec;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "row0[2] = 2 < row0[1]");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, NULL, D.V, 0, o, ldo), SR_ERR_ARG, "attn: K is NULL");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, NULL, 0, o, ldo), SR_ERR_ARG, "attn: V is NULL");
    sr_kpool P = *D.K;
    P.dtype = SR_I8;
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, &P, D.V, 0, o, ldo), SR_ERR_ARG, "attn: K pool dtype");
    P = *D.V;
    P.width = 8;
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, &P, 0, o, ldo), SR_ERR_ARG, "attn: V pool width 8");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, D.V, 2, o, ldo), SR_ERR_ARG, "attn: layer 2");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, D.V, -1, o, ldo), SR_ERR_ARG, "attn: layer -1");
    TEST_ASSERT_ERR(CALL(&a, &b, NULL, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: q is NULL");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, D.V, 0, NULL, ldo), SR_ERR_ARG, "attn: out is NULL");
    TEST_ASSERT_ERR(CALL(&a, &b, q, 31, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: ldq = 31");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, D.V, 0, o, 0), SR_ERR_ARG, "attn: ldo = 0");
    TEST_ASSERT_ERR(CALL(&a, &b, q, ldq, D.K, D.V, 0, q + 8, ldq), SR_ERR_ARG, "attn: q and out overlap");
    y = b;
    y.slot = NULL;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: b->slot is NULL");
    int bad_slot[2] = {0, 2};
    y.slot = bad_slot;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: slot[1] = 2");
    x = a;
    x.hi = NULL;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: hi is NULL");
    int64_t lo[5], hi[5];
    memcpy(lo, D.lo, sizeof lo);
    memcpy(hi, D.hi, sizeof hi);
    x = a;
    x.lo = lo;
    x.hi = hi;
    lo[1] = -1;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: row 1: key range [lo = -1");
    lo[1] = hi[1] + 1;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "need 0 <= lo <= hi");
    lo[1] = D.lo[1];
    lo[3] = hi[3] - 17;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "more than the pool's 16 rows");
    lo[3] = D.lo[3];
    /* rel-pos arguments */
    x = a;
    x.pos_v = NULL;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: rel-pos without pos_v");
    y = b;
    y.pos = NULL;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: rel-pos needs b->pos");
    x = a;
    x.rel_min = x.rel_max + 1;
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: rel_max");
    x = a;
    x.rel_max -= 4; /* the farthest key is now beyond the table */
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "outside rel [rel_min");
    x = a;
    x.rel_min += 3; /* the nearest key (a future one in the full mode) is below it */
    TEST_ASSERT_ERR(CALL(&x, &b, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "outside rel [rel_min");
    y = b;
    int64_t neg[2] = {-1, 30};
    y.pos = neg;
    TEST_ASSERT_ERR(CALL(&a, &y, q, ldq, D.K, D.V, 0, o, ldo), SR_ERR_ARG, "attn: pos[0] = -1");
#undef CALL
    data_free(&D);
}

void test_register_ops_attn(void);
void test_register_ops_attn(void)
{
    TEST_SUITE("kernels_attn", {"random shapes vs double reference", test_random_vs_reference},
               {"backend patterns (whisper, fastconformer, voxtral)", test_backend_shapes},
               {"avx512 / avx2 / portable bit-identical", test_paths_identical},
               {"row independence (batch, alone, threads)", test_row_independence},
               {"edges: M = 0, empty ranges, one key, full ring", test_edges},
               {"bad arguments", test_bad_args});
}
