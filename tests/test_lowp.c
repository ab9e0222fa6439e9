/*
 * test_lowp.c — bf16-weight products of kernels/lowp.h (suite kernels_lowp).
 *
 * Every implementation (portable C, AVX2 + FMA when the CPU has it, and the tile + sgemm path
 * of sr_bf16_gemm) is checked against a double-precision reference on the exact widened
 * weights, over shapes with k tails (K % 8 != 0), odd N (tails of the 4- and 2-row blocks),
 * M = 1..9 (blocks of 4 activation rows and their remainders), padded strides whose padding
 * holds NaN (a kernel reading past K or N poisons its result) and a y padding sentinel that
 * must survive, beta 0 over NaN y and beta 1.5, and 1 to 3 threads on products big enough to
 * be split. The values product x · W (sr_bf16_gemm_nn, W not transposed) is checked the same
 * way.
 *
 * Tolerance, per output: |y - y_ref| <= (K + 3) FLT_EPSILON (sum_k |x_k w_k| + |beta y|):
 * an f32 sum of K terms in any order errs by at most gamma_K = K u / (1 - K u) of sum |x w|
 * (u = FLT_EPSILON / 2), the product rounding (absent with FMA) adds u per term and the
 * beta term two roundings; the stated bound is about twice that, as in the sgemm test. The
 * AVX2 and portable results, both within the bound of the exact value, must be within twice
 * it of each other.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../kernels/lowp.h"
#include "test.h"

#define Y_SENTINEL 12345.0f
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng;
static float rnd(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

typedef struct {
    int M, N, K, pad;
    float beta;
    int nan_y; /* beta = 0: y starts as NaN */
} lp_case;

typedef struct {
    int ldx, ldw, ldy;
    float *x, *y0;
    uint16_t *w;
    double *ref, *bound;
} lp_data;

static void lp_free(lp_data *d)
{
    free(d->x); free(d->y0); free(d->w); free(d->ref); free(d->bound);
    memset(d, 0, sizeof *d);
}

static int lp_make(const lp_case *c, lp_data *d)
{
    memset(d, 0, sizeof *d);
    d->ldx = (c->K ? c->K : 1) + c->pad;
    d->ldw = (c->K ? c->K : 1) + c->pad;
    d->ldy = (c->N ? c->N : 1) + c->pad;
    size_t nx = (size_t)c->M * d->ldx, nw = (size_t)c->N * d->ldw, ny = (size_t)c->M * d->ldy;
    d->x = malloc((nx ? nx : 1) * sizeof(float));
    d->w = malloc((nw ? nw : 1) * sizeof(uint16_t));
    d->y0 = malloc((ny ? ny : 1) * sizeof(float));
    d->ref = malloc((ny ? ny : 1) * sizeof(double));
    d->bound = malloc((ny ? ny : 1) * sizeof(double));
    if (!d->x || !d->w || !d->y0 || !d->ref || !d->bound) { lp_free(d); return 0; }
    rng = 0x2545F4914F6CDD1DULL ^ (uint64_t)(c->M * 7919 + c->N * 131 + c->K * 17 + c->pad);
    const uint16_t bf16_nan = 0x7fc0;
    for (int m = 0; m < c->M; m++)
        for (int k = 0; k < d->ldx; k++) d->x[(size_t)m * d->ldx + k] = k < c->K ? rnd() : NAN;
    for (int n = 0; n < c->N; n++)
        for (int k = 0; k < d->ldw; k++)
            d->w[(size_t)n * d->ldw + k] = k < c->K ? sr_f32_to_bf16(rnd()) : bf16_nan;
    for (int m = 0; m < c->M; m++)
        for (int n = 0; n < d->ldy; n++)
            d->y0[(size_t)m * d->ldy + n] = n >= c->N ? Y_SENTINEL : c->nan_y ? NAN : rnd();
    double tol = (double)(c->K + 3) * FLT_EPSILON;
    for (int m = 0; m < c->M; m++)
        for (int n = 0; n < c->N; n++) {
            double s = 0, sabs = 0;
            for (int k = 0; k < c->K; k++) {
                double p = (double)d->x[(size_t)m * d->ldx + k] *
                           (double)sr_bf16_to_f32(d->w[(size_t)n * d->ldw + k]);
                s += p;
                sabs += fabs(p);
            }
            size_t i = (size_t)m * d->ldy + n;
            double y0 = c->beta == 0.0f ? 0.0 : (double)d->y0[i];
            d->ref[i] = s + (double)c->beta * y0;
            d->bound[i] = tol * (sabs + fabs((double)c->beta * y0));
        }
    return 1;
}

/* Worst |err| / bound over the outputs; counts violations (and padding writes) in *bad. */
static double lp_check(const lp_case *c, const lp_data *d, const float *y, const char *what,
                       int *bad)
{
    double worst = 0;
    for (int m = 0; m < c->M; m++)
        for (int n = 0; n < d->ldy; n++) {
            size_t i = (size_t)m * d->ldy + n;
            if (n >= c->N) {
                if (y[i] != Y_SENTINEL) (*bad)++;
                continue;
            }
            double err = fabs((double)y[i] - d->ref[i]);
            if (!(err <= d->bound[i])) {
                if (*bad < 3)
                    printf("\n      %s %dx%dx%d pad %d beta %g: y[%d,%d] = %.9g, want %.9g "
                           "(err %.3g > bound %.3g)", what, c->M, c->N, c->K, c->pad,
                           (double)c->beta, m, n, (double)y[i], d->ref[i], err, d->bound[i]);
                (*bad)++;
            } else if (d->bound[i] > 0 && err / d->bound[i] > worst) {
                worst = err / d->bound[i];
            }
        }
    return worst;
}

static const int shapes[][3] = {
    {1, 1, 1},    {1, 7, 5},     {1, 33, 8},    {2, 5, 9},     {3, 9, 17},    {4, 6, 15},
    {1, 257, 513}, {2, 130, 100}, {3, 301, 515}, {4, 129, 1029}, {5, 67, 71},  {7, 33, 40},
    {8, 20, 16},  {9, 45, 263},  {1, 1029, 771}, {4, 1031, 260},
};
static const struct { float beta; int pad, nan_y; } modes[] = {
    {0.0f, 0, 0}, {1.5f, 3, 0}, {0.0f, 1, 1}};

static void run_impl(sr_lowp_impl impl, const char *name, double *worst_out)
{
    double worst = 0;
    int cases = 0;
    for (size_t s = 0; s < ARRAY_LEN(shapes); s++)
        for (size_t md = 0; md < ARRAY_LEN(modes); md++) {
            lp_case c = {shapes[s][0], shapes[s][1], shapes[s][2], modes[md].pad, modes[md].beta,
                         modes[md].nan_y};
            lp_data d;
            CU_ASSERT_FATAL(lp_make(&c, &d));
            size_t ny = (size_t)c.M * d.ldy;
            float *y = malloc(ny * sizeof(float));
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            for (int th = 1; th <= 3; th++) {
                memcpy(y, d.y0, ny * sizeof(float));
                sr_status st = sr_bf16_gemm_direct(impl, th, c.M, c.N, c.K, d.x, d.ldx, d.w,
                                                   d.ldw, c.beta, y, d.ldy);
                CU_ASSERT_EQUAL(st, SR_OK);
                if (st) { printf("\n      %s: %s", name, sr_last_error()); continue; }
                int bad = 0;
                double w = lp_check(&c, &d, y, name, &bad);
                CU_ASSERT_EQUAL(bad, 0);
                if (w > worst) worst = w;
                cases++;
            }
            free(y);
            lp_free(&d);
        }
    *worst_out = worst;
    printf("\n      %s: %d products, worst |err| = %.3f of the bound (K + 3) eps sum|xw|\n      ",
           name, cases, worst);
}

static void test_portable_vs_reference(void)
{
    double w;
    run_impl(SR_LOWP_PORTABLE, "portable", &w);
}

static void test_avx2_vs_reference(void)
{
    if (!sr_lowp_available(SR_LOWP_AVX2)) {
        TEST_SKIP("this CPU has no AVX2 + FMA");
        CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_AVX2, 1, 1, 1, 1, (float[]){1}, 1,
                                            (uint16_t[]){0x3f80}, 1, 0, (float[]){0}, 1),
                        SR_ERR_UNSUPPORTED);
        return;
    }
    double w;
    run_impl(SR_LOWP_AVX2, "avx2", &w);
    CU_ASSERT_STRING_EQUAL(sr_lowp_auto_name(), "avx2");
}

/* AVX2 and portable, each within the bound of the exact value: within twice it of each
 * other, on every shape (also where AUTO is what the backends call). */
static void test_avx2_vs_portable(void)
{
    if (!sr_lowp_available(SR_LOWP_AVX2)) { TEST_SKIP("this CPU has no AVX2 + FMA"); return; }
    int bad = 0, cases = 0;
    for (size_t s = 0; s < ARRAY_LEN(shapes); s++) {
        lp_case c = {shapes[s][0], shapes[s][1], shapes[s][2], 2, 0.0f, 0};
        lp_data d;
        CU_ASSERT_FATAL(lp_make(&c, &d));
        size_t ny = (size_t)c.M * d.ldy;
        float *a = malloc(ny * sizeof(float)), *p = malloc(ny * sizeof(float));
        float *u = malloc(ny * sizeof(float));
        CU_ASSERT_FATAL(a && p && u);
        memcpy(a, d.y0, ny * sizeof(float));
        memcpy(p, d.y0, ny * sizeof(float));
        memcpy(u, d.y0, ny * sizeof(float));
        CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_AVX2, 2, c.M, c.N, c.K, d.x, d.ldx, d.w,
                                            d.ldw, 0.0f, a, d.ldy), SR_OK);
        CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_PORTABLE, 1, c.M, c.N, c.K, d.x, d.ldx, d.w,
                                            d.ldw, 0.0f, p, d.ldy), SR_OK);
        CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_AUTO, 0, c.M, c.N, c.K, d.x, d.ldx, d.w,
                                            d.ldw, 0.0f, u, d.ldy), SR_OK);
        for (int m = 0; m < c.M; m++)
            for (int n = 0; n < c.N; n++) {
                size_t i = (size_t)m * d.ldy + n;
                if (!(fabs((double)a[i] - (double)p[i]) <= 2 * d.bound[i])) bad++;
                if (u[i] != a[i]) bad++; /* AUTO is the AVX2 kernel here, bit for bit */
                cases++;
            }
        free(a); free(p); free(u);
        lp_free(&d);
    }
    CU_ASSERT_EQUAL(bad, 0);
    printf("\n      %d outputs compared\n      ", cases);
}

/* sr_bf16_gemm: the direct kernel up to SR_LOWP_DIRECT_ROWS rows, the tile + sgemm path past
 * it (tiles of 1, 2 and all rows), both against the reference. */
static void test_gemm_entry(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    static const int sh[][3] = {{1, 70, 33}, {4, 70, 33}, {5, 70, 33}, {9, 31, 100}, {37, 129, 64}};
    double worst = 0;
    for (size_t s = 0; s < ARRAY_LEN(sh); s++)
        for (size_t md = 0; md < ARRAY_LEN(modes); md++) {
            lp_case c = {sh[s][0], sh[s][1], sh[s][2], modes[md].pad, modes[md].beta,
                         modes[md].nan_y};
            lp_data d;
            CU_ASSERT_FATAL(lp_make(&c, &d));
            size_t ny = (size_t)c.M * d.ldy;
            float *y = malloc(ny * sizeof(float));
            size_t tiles[] = {(size_t)c.K, 2 * (size_t)c.K + 1, (size_t)c.N * c.K};
            float *tile = malloc(tiles[2] * sizeof(float));
            CU_ASSERT_FATAL(y && tile);
            for (size_t t = 0; t < ARRAY_LEN(tiles); t++) {
                memcpy(y, d.y0, ny * sizeof(float));
                sr_status st = sr_bf16_gemm(k, 2, c.M, c.N, c.K, d.x, d.ldx, d.w, d.ldw, c.beta,
                                            y, d.ldy, tile, tiles[t]);
                CU_ASSERT_EQUAL(st, SR_OK);
                if (st) { printf("\n      %s", sr_last_error()); continue; }
                int bad = 0;
                double w = lp_check(&c, &d, y, "sr_bf16_gemm", &bad);
                CU_ASSERT_EQUAL(bad, 0);
                if (w > worst) worst = w;
            }
            free(tile);
            free(y);
            lp_free(&d);
        }
    printf("\n      sr_bf16_gemm: worst |err| = %.3f of the bound\n      ", worst);
}

/* Empty products leave y alone (M or N = 0) or write beta * y (K = 0). */
static void test_empty(void)
{
    float y[6] = {1, 2, NAN, 4, 5, 6};
    uint16_t w[1] = {0x3f80};
    float x[1] = {1};
    CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_AUTO, 2, 0, 3, 4, NULL, 4, NULL, 4, 0, y, 3), SR_OK);
    CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_AUTO, 2, 2, 0, 4, x, 4, w, 4, 0, y, 1), SR_OK);
    CU_ASSERT_EQUAL(y[0], 1.0f);
    CU_ASSERT(isnan(y[2]));
    CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_PORTABLE, 1, 2, 3, 0, x, 1, w, 1, 0.5f, y, 3), SR_OK);
    CU_ASSERT_EQUAL(y[0], 0.5f);
    CU_ASSERT(isnan(y[2])); /* beta 0.5 keeps NaN */
    CU_ASSERT_EQUAL(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, 2, 3, 0, x, 1, w, 1, 0.0f, y, 3), SR_OK);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y[i], 0.0f); /* beta 0 clears NaN */
}

static void test_bad_args(void)
{
    float x[8] = {0}, y[8] = {0}, tile[8];
    uint16_t w[8] = {0};
    const sr_kernels *k = sr_kernels_cpu();
    TEST_ASSERT_ERR(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, -1, 2, 2, x, 2, w, 2, 0, y, 2), SR_ERR_ARG, "negative size");
    TEST_ASSERT_ERR(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, 1, 2, 4, x, 3, w, 4, 0, y, 2), SR_ERR_ARG, "ldx = 3 < K = 4");
    TEST_ASSERT_ERR(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, 1, 2, 4, x, 4, w, 2, 0, y, 2), SR_ERR_ARG, "ldw = 2 < K = 4");
    TEST_ASSERT_ERR(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, 1, 3, 2, x, 2, w, 2, 0, y, 2), SR_ERR_ARG, "ldy = 2 < N = 3");
    TEST_ASSERT_ERR(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, 1, 2, 2, x, 2, NULL, 2, 0, y, 2), SR_ERR_ARG, "w is NULL");
    TEST_ASSERT_ERR(sr_bf16_gemm_direct(SR_LOWP_AUTO, 1, 1, 2, 2, x, 2, w, 2, 0, NULL, 2), SR_ERR_ARG, "y is NULL");
    TEST_ASSERT_ERR(sr_bf16_gemm_direct((sr_lowp_impl)7, 1, 1, 2, 2, x, 2, w, 2, 0, y, 2), SR_ERR_ARG, "implementation 7");
    TEST_ASSERT_ERR(sr_bf16_gemm(k, 1, 5, 1, 4, x, 4, w, 4, 0, y, 1, tile, 3), SR_ERR_ARG, "tile of 3 floats");
    TEST_ASSERT_ERR(sr_bf16_gemm(k, 1, 5, 1, 4, x, 4, w, 4, 0, y, 1, NULL, 8), SR_ERR_ARG, "tile of");
    TEST_ASSERT_ERR(sr_bf16_gemm(k, 1, 5, 1, 4, x, 3, w, 4, 0, y, 1, tile, 8), SR_ERR_ARG, "ldx = 3");
    static const sr_kernels other = {.name = "other"};
    TEST_ASSERT_ERR(sr_bf16_gemm(&other, 1, 1, 1, 4, x, 4, w, 4, 0, y, 1, tile, 8),
                    SR_ERR_UNSUPPORTED, "the other table");
}

/* Two threads each running split products at once: one gets the pool, the other works alone
 * (or waits for nothing); both results are right. */
typedef struct {
    const lp_case *c;
    const lp_data *d;
    float *y;
    int reps;
    sr_status st;
} conc_arg;

static void *conc_run(void *p)
{
    conc_arg *a = p;
    for (int r = 0; r < a->reps && !a->st; r++)
        a->st = sr_bf16_gemm_direct(SR_LOWP_AUTO, 2, a->c->M, a->c->N, a->c->K, a->d->x, a->d->ldx,
                                    a->d->w, a->d->ldw, 0.0f, a->y, a->d->ldy);
    return NULL;
}

static void test_concurrent(void)
{
    lp_case c = {2, 1031, 260, 0, 0.0f, 1};
    lp_data d;
    CU_ASSERT_FATAL(lp_make(&c, &d));
    size_t ny = (size_t)c.M * d.ldy;
    float *y[2] = {malloc(ny * sizeof(float)), malloc(ny * sizeof(float))};
    CU_ASSERT_FATAL(y[0] && y[1]);
    conc_arg a[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        memcpy(y[i], d.y0, ny * sizeof(float));
        a[i] = (conc_arg){&c, &d, y[i], 50, SR_OK};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, conc_run, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        CU_ASSERT_EQUAL(a[i].st, SR_OK);
        int bad = 0;
        lp_check(&c, &d, y[i], "concurrent", &bad);
        CU_ASSERT_EQUAL(bad, 0);
        free(y[i]);
    }
    lp_free(&d);
}

/* Values product x · W (W [K, N] bf16, not transposed), both implementations, against the
 * double reference with the same bound: N with 64-, 8- and 1-column blocks, K = 0, padding
 * columns of W holding NaN, beta 0 over NaN y and beta 1.5. */
static void test_nn_vs_reference(void)
{
    static const int sh[][3] = {{1, 1, 1}, {1, 128, 413}, {3, 77, 20}, {4, 200, 9}, {37, 64, 50},
                                {2, 7, 0}, {1, 136, 1}};
    sr_lowp_impl impls[] = {SR_LOWP_PORTABLE, SR_LOWP_AVX2};
    double worst = 0;
    int bad = 0, n_out = 0;
    for (size_t s = 0; s < ARRAY_LEN(sh); s++)
        for (size_t md = 0; md < ARRAY_LEN(modes); md++) {
            int M = sh[s][0], N = sh[s][1], K = sh[s][2], pad = modes[md].pad;
            float beta = modes[md].beta;
            int ldx = (K ? K : 1) + pad, ldw = N + pad, ldy = N + pad;
            float *x = malloc(((size_t)M * ldx + 1) * sizeof(float));
            uint16_t *w = malloc(((size_t)K * ldw + 1) * sizeof(uint16_t));
            float *y0 = malloc((size_t)M * ldy * sizeof(float)), *y = malloc((size_t)M * ldy * sizeof(float));
            double *ref = malloc((size_t)M * ldy * sizeof(double)), *bnd = malloc((size_t)M * ldy * sizeof(double));
            CU_ASSERT_FATAL(x && w && y0 && y && ref && bnd);
            rng = 0xA0761D6478BD642FULL ^ (uint64_t)(M * 31 + N * 7 + K);
            for (int m = 0; m < M; m++)
                for (int k = 0; k < ldx; k++) x[(size_t)m * ldx + k] = k < K ? rnd() : NAN;
            for (int k = 0; k < K; k++)
                for (int n = 0; n < ldw; n++)
                    w[(size_t)k * ldw + n] = n < N ? sr_f32_to_bf16(rnd()) : (uint16_t)0x7fc0;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < ldy; n++)
                    y0[(size_t)m * ldy + n] = n >= N ? Y_SENTINEL : modes[md].nan_y ? NAN : rnd();
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    double sum = 0, sabs = 0;
                    for (int k = 0; k < K; k++) {
                        double p = (double)x[(size_t)m * ldx + k] *
                                   (double)sr_bf16_to_f32(w[(size_t)k * ldw + n]);
                        sum += p;
                        sabs += fabs(p);
                    }
                    double yb = beta == 0.0f ? 0.0 : (double)beta * y0[(size_t)m * ldy + n];
                    ref[(size_t)m * ldy + n] = sum + yb;
                    bnd[(size_t)m * ldy + n] = (double)(K + 3) * FLT_EPSILON * (sabs + fabs(yb));
                }
            for (size_t i = 0; i < ARRAY_LEN(impls); i++) {
                if (!sr_lowp_available(impls[i])) continue;
                memcpy(y, y0, (size_t)M * ldy * sizeof(float));
                CU_ASSERT_EQUAL(sr_bf16_gemm_nn(impls[i], M, N, K, x, ldx, w, ldw, beta, y, ldy), SR_OK);
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < ldy; n++) {
                        size_t j = (size_t)m * ldy + n;
                        if (n >= N) { if (y[j] != Y_SENTINEL) bad++; continue; }
                        double err = fabs((double)y[j] - ref[j]);
                        if (!(err <= bnd[j])) {
                            if (bad < 3)
                                printf("\n      nn impl %d %dx%dx%d: y[%d,%d] = %.9g want %.9g",
                                       (int)impls[i], M, N, K, m, n, (double)y[j], ref[j]);
                            bad++;
                        } else if (bnd[j] > 0 && err / bnd[j] > worst) {
                            worst = err / bnd[j];
                        }
                        n_out++;
                    }
            }
            free(x); free(w); free(y0); free(y); free(ref); free(bnd);
        }
    CU_ASSERT_EQUAL(bad, 0);
    float one = 1, yy[2];
    uint16_t wb[2] = {0x3f80, 0x3f80};
    TEST_ASSERT_ERR(sr_bf16_gemm_nn(SR_LOWP_AUTO, 1, 2, 1, &one, 1, wb, 1, 0, yy, 2), SR_ERR_ARG, "ldw = 1 < N = 2");
    TEST_ASSERT_ERR(sr_bf16_gemm_nn(SR_LOWP_AUTO, 1, 2, 1, &one, 1, NULL, 2, 0, yy, 2), SR_ERR_ARG, "w is NULL");
    printf("\n      %d outputs, worst |err| = %.3f of the bound\n      ", n_out, worst);
}

/* The bulk widening used by the tile path: every bf16 pattern, at every start alignment and a
 * few lengths (vector blocks and scalar tails), bit for bit equal to the scalar conversion. */
static void test_widen_bulk(void)
{
    uint16_t *in = malloc(65536 * sizeof(uint16_t) + 64);
    float *out = malloc(65536 * sizeof(float) + 64);
    CU_ASSERT_FATAL(in && out);
    for (uint32_t b = 0; b < 65536; b++) in[b] = (uint16_t)b;
    int bad = 0;
    for (int off = 0; off < 8; off++) {
        size_t n = 65536 - (size_t)off;
        sr_bf16_to_f32_n(in + off, out, n);
        for (size_t i = 0; i < n; i++) {
            float ref = sr_bf16_to_f32(in[off + i]);
            if (memcmp(&out[i], &ref, sizeof ref)) bad++;
        }
    }
    for (size_t n = 0; n < 20; n++) {
        for (size_t i = 0; i < 20; i++) out[i] = Y_SENTINEL;
        sr_bf16_to_f32_n(in + 0x3f80, out, n);
        for (size_t i = 0; i < 20; i++) {
            float ref = i < n ? sr_bf16_to_f32((uint16_t)(0x3f80 + i)) : Y_SENTINEL;
            if (memcmp(&out[i], &ref, sizeof ref)) bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(in);
    free(out);
}

void test_register_lowp(void)
{
    TEST_SUITE("kernels_lowp", {"portable_vs_reference", test_portable_vs_reference},
               {"avx2_vs_reference", test_avx2_vs_reference},
               {"avx2_vs_portable", test_avx2_vs_portable}, {"gemm_entry", test_gemm_entry},
               {"empty", test_empty}, {"bad_args", test_bad_args},
               {"concurrent", test_concurrent}, {"nn_vs_reference", test_nn_vs_reference},
               {"widen_bulk", test_widen_bulk});
}
