/*
 * test_ops_gemm.c — the Linear op set of the CPU table (weight_create / weight_free, gemm,
 * gather; suite kernels_gemm_op) against the double references of tests/ref_gemm.c.
 *
 * gemm: every weight dtype (f32, bf16, f16, i8 + per-row scale) x activation (none, GELU,
 * SiLU, ReLU) x bias or not x (alpha, beta) in {(1, 0) over NaN y, (1, 1), (0.75, -1.5),
 * (-2, 0)}, over random shapes: M = 1..70 (register tiles of 12 / 6 / 4 rows and their
 * remainders), N not a multiple of the 32-row panels, K with tails; x and y have padded
 * strides whose padding holds NaN (x: a read past k poisons the result) or a sentinel (y: must
 * survive). Larger products cover k blocking (K > 384 with several row tiles), several row
 * blocks and panel groups, split over threads.
 *
 * Tolerance per output (u = FLT_EPSILON / 2, mag = sum_k |x w| + |bias|):
 *   before the activation  E = (K + 3) FLT_EPSILON mag: the f32 sum of K fused multiply-adds
 *     errs by at most gamma_K mag (gamma_K = K u / (1 - K u)); the int8 scale and the bias add
 *     one rounding each; the stated bound is about twice that.
 *   activation             E_act = L E + e_act: L bounds |act'| (1 for none / ReLU, 1.13 for
 *     GELU (max gelu' = 1.129), 1.10 for SiLU (max silu' = 1.0998)); e_act = 5e-7 (1 + |t|) is
 *     the error of sr_gelu_erf / sr_silu themselves (tests/test_kernels.c), 0 otherwise.
 *   output                 |alpha| E_act + 2 FLT_EPSILON (|alpha act| + |beta y0|): alpha * t,
 *     beta * y and their sum round once each (3 u, here 4 u).
 * The worst error / tolerance ratio is printed.
 *
 * Bit-identity (memcmp): each row computed alone (M = 1: one tile, k never blocked) and in
 * batches (M = 64, M = 5 at odd offsets, M = 150 with K = 1100: k blocked, several row blocks);
 * 1, 2 and 3 threads; the AVX-512, AVX2 and portable paths (those this CPU has). alpha = 0.7
 * is not a power of two, so an epilogue fusing alpha * t + beta * y into one FMA on one path
 * would show. alpha = beta = 1 must give exactly y0 + t (t from a beta = 0 call);
 * M = 0 leaves y untouched. gather must equal the exactly widened rows (i8: q * scale, one f32
 * rounding, the same as the double product rounded once). Bad arguments return SR_ERR_ARG
 * naming the op and the argument.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../kernels/cpu/cpu_impl.h"
#include "../kernels/kernels.h"
#include "ref_gemm.h"
#include "test.h"

#define Y_SENTINEL 12345.0f
#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static uint64_t rng;
static void seed(uint64_t s) { rng = 0x9E3779B97F4A7C15ULL ^ (s * 0xBF58476D1CE4E5B9ULL); }
static uint32_t rnd_u32(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 32);
}
/* uniform in [-1, 1) */
static float rnd(void) { return (float)((double)(rnd_u32() >> 8) / (double)(1u << 24) * 2.0 - 1.0); }
static int rnd_int(int lo, int hi) { return lo + (int)(rnd_u32() % (uint32_t)(hi - lo + 1)); }

static const sr_dtype dtypes[] = {SR_F32, SR_BF16, SR_F16, SR_I8};
static const char *const dt_names[] = {"f32", "f16", "bf16", "i8"};
static const char *const act_names[] = {"none", "gelu", "silu", "relu"};

/* A host weight [n, k] of dtype dt with random values (i8: q in [-127, 127] and a scale per
 * row), its exact widened values, and the table's handle. */
typedef struct {
    int n, k;
    sr_dtype dt;
    sr_kmul mul;
    void *host;
    float *scale;
    double *w;
    sr_kweight *W;
} tweight;

static void tw_free(tweight *t)
{
    const sr_kernels *kt = sr_kernels_cpu();
    kt->weight_free(t->W);
    free(t->host);
    free(t->scale);
    free(t->w);
    memset(t, 0, sizeof *t);
}

static int tw_make_mul(tweight *t, sr_dtype dt, int n, int k, sr_kmul mul)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->k = k;
    t->dt = dt;
    t->mul = mul;
    size_t cnt = (size_t)n * (size_t)k;
    size_t es = dt == SR_F32 ? 4 : dt == SR_I8 ? 1 : 2;
    t->host = malloc(cnt * es);
    t->w = malloc(cnt * sizeof(double));
    if (dt == SR_I8) t->scale = malloc((size_t)n * sizeof(float));
    if (!t->host || !t->w || (dt == SR_I8 && !t->scale)) return 0;
    for (size_t i = 0; i < cnt; i++) {
        float v = rnd();
        switch (dt) {
        case SR_F32: ((float *)t->host)[i] = v; break;
        case SR_BF16: ((uint16_t *)t->host)[i] = sr_f32_to_bf16(v); break;
        case SR_F16: ((uint16_t *)t->host)[i] = sr_f32_to_f16(v); break;
        default: ((int8_t *)t->host)[i] = (int8_t)rnd_int(-127, 127); break;
        }
    }
    for (int r = 0; dt == SR_I8 && r < n; r++) t->scale[r] = (0.5f + 0.5f * fabsf(rnd())) / 127.0f;
    ref_weight_widen(t->host, dt, n, k, t->scale, t->w);
    if (mul == SR_KMUL_BF16) ref_daz(t->w, cnt);
    sr_status st = sr_kernels_cpu()->weight_create(t->host, dt, n, k, t->scale, mul, &t->W);
    if (st) printf("\n      weight_create %s %dx%d: %s", dt_names[dt], n, k, sr_last_error());
    CU_ASSERT_EQUAL(st, SR_OK);
    return st == SR_OK;
}

static int tw_make(tweight *t, sr_dtype dt, int n, int k) { return tw_make_mul(t, dt, n, k, SR_KMUL_EXACT); }

/* x [M, K] with row stride K + padx, padding NaN; y0 [M, N] stride N + pady, padding the
 * sentinel, values random (or NaN when nan_y). */
static float *make_x(int M, int K, int ldx)
{
    float *x = malloc(((size_t)M * (size_t)ldx + 1) * sizeof(float));
    for (int m = 0; x && m < M; m++)
        for (int c = 0; c < ldx; c++) x[(size_t)m * ldx + c] = c < K ? rnd() : NAN;
    return x;
}

static float *make_y(int M, int N, int ldy, int nan_y)
{
    float *y = malloc(((size_t)M * (size_t)ldy + 1) * sizeof(float));
    for (int m = 0; y && m < M; m++)
        for (int c = 0; c < ldy; c++)
            y[(size_t)m * ldy + c] = c >= N ? Y_SENTINEL : nan_y ? NAN : 2.0f * rnd();
    return y;
}

typedef struct {
    float alpha, beta;
    int nan_y;
} ab_mode;
static const ab_mode ab_modes[] = {
    {1.0f, 0.0f, 1}, {1.0f, 1.0f, 0}, {0.75f, -1.5f, 0}, {-2.0f, 0.0f, 0}};

/* One gemm against the reference; returns the worst error / tolerance, counts failures
 * (outputs beyond tolerance, padding changed) in *bad. */
static double check_gemm(const tweight *tw, int M, int padx, int pady, const float *bias, sr_act act,
                         const ab_mode *ab, int *bad)
{
    const sr_kernels *kt = sr_kernels_cpu();
    int N = tw->n, K = tw->k, ldx = K + padx, ldy = N + pady;
    float *x = make_x(M, K, ldx), *y0 = make_y(M, N, ldy, ab->nan_y);
    float *y = malloc(((size_t)M * ldy + 1) * sizeof(float));
    size_t no = (size_t)M * (size_t)N;
    double *ref = malloc((no + 1) * sizeof(double)), *pre = malloc((no + 1) * sizeof(double));
    double *mag = malloc((no + 1) * sizeof(double)), *av = malloc((no + 1) * sizeof(double));
    double worst = 0;
    if (!x || !y0 || !y || !ref || !pre || !mag || !av) {
        CU_FAIL("out of memory");
        goto out;
    }
    memcpy(y, y0, (size_t)M * ldy * sizeof(float));
    sr_status st = kt->gemm(M, x, ldx, tw->W, bias, act, ab->alpha, ab->beta, y, ldy);
    CU_ASSERT_EQUAL(st, SR_OK);
    if (st) {
        printf("\n      gemm: %s", sr_last_error());
        (*bad)++;
        goto out;
    }
    /* bf16 products: the contract's sum is over the bf16-rounded activations */
    if (tw->mul == SR_KMUL_BF16) ref_x_bf16(M, K, x, ldx);
    ref_gemm(M, N, K, x, ldx, tw->w, bias, act, ab->alpha, ab->beta, y0, ldy, ref, pre, mag, av);
    const double eps = FLT_EPSILON;
    const double lip = act == SR_ACT_GELU ? 1.13 : act == SR_ACT_SILU ? 1.10 : 1.0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < ldy; n++) {
            size_t i = (size_t)m * ldy + n, o = (size_t)m * N + n;
            if (n >= N) {
                if (y[i] != Y_SENTINEL) {
                    if (*bad < 3) printf("\n      padding y[%d,%d] overwritten", m, n);
                    (*bad)++;
                }
                continue;
            }
            double e_pre = (double)(K + 3) * eps * mag[o];
            double e_act = lip * e_pre;
            if (act == SR_ACT_GELU || act == SR_ACT_SILU) e_act += 5e-7 * (1.0 + fabs(pre[o]) + e_pre);
            double y0v = ab->beta == 0.0f ? 0.0 : (double)y0[i];
            double tol = fabs((double)ab->alpha) * e_act +
                         2.0 * eps * (fabs((double)ab->alpha * av[o]) + fabs((double)ab->beta * y0v));
            double err = fabs((double)y[i] - ref[o]);
            if (!(err <= tol)) {
                if (*bad < 3)
                    printf("\n      %s %s bias %d a %g b %g M %d N %d K %d: y[%d,%d] = %.9g, want "
                           "%.9g (err %.3g > tol %.3g)", dt_names[tw->dt], act_names[act], bias != NULL,
                           (double)ab->alpha, (double)ab->beta, M, N, K, m, n, (double)y[i], ref[o],
                           err, tol);
                (*bad)++;
            } else if (tol > 0 && err / tol > worst) {
                worst = err / tol;
            }
        }
out:
    free(x); free(y0); free(y); free(ref); free(pre); free(mag); free(av);
    return worst;
}

static float *make_bias(int N)
{
    float *b = malloc((size_t)N * sizeof(float));
    for (int n = 0; b && n < N; n++) b[n] = rnd();
    return b;
}

/* Every dtype x act x bias x (alpha, beta) over random shapes with tails and padded strides. */
static void test_gemm_vs_ref(void)
{
    double worst = 0;
    int bad = 0, cases = 0;
    seed(1);
    for (int d = 0; d < LEN(dtypes); d++) {
        for (int s = 0; s < 6; s++) {
            /* shapes: small edge shapes first, then random ones with tails */
            static const int fixed[][3] = {{1, 1, 1}, {70, 33, 17}};
            int M = s < 2 ? fixed[s][0] : rnd_int(1, 70);
            int N = s < 2 ? fixed[s][1] : rnd_int(1, 100);
            int K = s < 2 ? fixed[s][2] : rnd_int(1, 300);
            if (s >= 2 && N % 32 == 0) N++;
            tweight tw;
            if (!tw_make(&tw, dtypes[d], N, K)) {
                tw_free(&tw);
                continue;
            }
            float *bias = make_bias(N);
            for (int act = 0; act < 4; act++)
                for (int hb = 0; hb < 2; hb++)
                    for (int a = 0; a < LEN(ab_modes); a++) {
                        int padx = (a + act) % 3 * 5, pady = (a + hb) % 2 * 3;
                        double w = check_gemm(&tw, M, padx, pady, hb ? bias : NULL, (sr_act)act,
                                              &ab_modes[a], &bad);
                        worst = fmax(worst, w);
                        cases++;
                    }
            free(bias);
            tw_free(&tw);
        }
    }
    printf("\n      %d gemm cases (path %s): worst error / tolerance %.3g, %d failures\n      ",
           cases, sr_cpu_gemm_isa(), worst, bad);
    CU_ASSERT_EQUAL(bad, 0);
}

/* Products with k blocked (K = 1100, 777; K = 513 with 3 rows is not), split over panel
 * groups, row blocks and 2 threads, against the reference. */
static void test_gemm_big(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    int saved = sr_cpu_threads();
    kt->set_threads(2);
    double worst = 0;
    int bad = 0;
    seed(2);
    static const int shapes[][3] = {{150, 100, 1100}, {3, 700, 513}, {40, 333, 777}};
    for (int s = 0; s < LEN(shapes); s++)
        for (int d = 0; d < LEN(dtypes); d++) {
            tweight tw;
            if (tw_make(&tw, dtypes[d], shapes[s][1], shapes[s][2])) {
                float *bias = make_bias(tw.n);
                sr_act act = (sr_act)((s + d) % 4);
                const ab_mode *ab = &ab_modes[(s + d) % 4];
                worst = fmax(worst, check_gemm(&tw, shapes[s][0], 1, 2, bias, act, ab, &bad));
                free(bias);
            }
            tw_free(&tw);
        }
    kt->set_threads(saved);
    printf("\n      big products: worst error / tolerance %.3g, %d failures\n      ", worst, bad);
    CU_ASSERT_EQUAL(bad, 0);
}

/* gemm with y from y0 (copied), all outputs into out [M, ldy]. */
static sr_status run_gemm(const tweight *tw, int M, const float *x, int ldx, const float *bias,
                          sr_act act, float alpha, float beta, const float *y0, float *out, int ldy)
{
    memcpy(out, y0, (size_t)M * ldy * sizeof(float));
    return sr_kernels_cpu()->gemm(M, x, ldx, tw->W, bias, act, alpha, beta, out, ldy);
}

/* memcmp of two results; prints what differed. Returns 1 when they differ. */
static int differ(const float *a, const float *b, size_t n, const char *what, sr_dtype dt)
{
    if (!memcmp(a, b, n * sizeof(float))) return 0;
    printf("\n      %s differ (%s)", what, dt_names[dt]);
    return 1;
}

/* A row alone, in M = 64, in M = 5 batches at odd offsets, over several row blocks (M = 150,
 * K = 1100); 1, 2, 3 threads; AVX-512 / AVX2 / portable: all bit-identical. */
static void test_gemm_bit_identity(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    int saved = sr_cpu_threads();
    seed(3);
    static const int shapes[][3] = {{64, 75, 301}, {150, 70, 1100}};
    static const char *const isas[] = {"avx512", "avx2", "portable"};
    int compared_isa = 0, diffs = 0;
    for (int s = 0; s < LEN(shapes); s++)
        for (int d = 0; d < LEN(dtypes); d++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldx = K + 3, ldy = N + 1;
            tweight tw;
            if (!tw_make(&tw, dtypes[d], N, K)) {
                tw_free(&tw);
                continue;
            }
            float *bias = make_bias(N), *x = make_x(M, K, ldx), *y0 = make_y(M, N, ldy, 0);
            size_t ny = (size_t)M * ldy;
            float *full = malloc(ny * sizeof(float)), *part = malloc(ny * sizeof(float));
            sr_act act = d % 2 ? SR_ACT_GELU : SR_ACT_SILU;
            kt->set_threads(1);
            CU_ASSERT_EQUAL(run_gemm(&tw, M, x, ldx, bias, act, 0.7f, 1.3f, y0, full, ldy), SR_OK);
            /* rows alone */
            for (int m = 0; m < M; m++) {
                size_t o = (size_t)m * ldy;
                CU_ASSERT_EQUAL(run_gemm(&tw, 1, x + (size_t)m * ldx, ldx, bias, act, 0.7f, 1.3f,
                                         y0 + o, part + o, ldy), SR_OK);
            }
            diffs += differ(full, part, ny, "rows alone", dtypes[d]);
            /* batches of 5 from offset 2 (rows 0, 1 as a batch of 2) */
            CU_ASSERT_EQUAL(run_gemm(&tw, 2, x, ldx, bias, act, 0.7f, 1.3f, y0, part, ldy), SR_OK);
            for (int m = 2; m < M; m += 5) {
                int cnt = (M - m < 5 ? M - m : 5);
                size_t o = (size_t)m * ldy;
                CU_ASSERT_EQUAL(run_gemm(&tw, cnt, x + (size_t)m * ldx, ldx, bias, act, 0.7f, 1.3f,
                                         y0 + o, part + o, ldy), SR_OK);
            }
            diffs += differ(full, part, ny, "batches of 5", dtypes[d]);
            for (int th = 2; th <= 3; th++) {
                kt->set_threads(th);
                CU_ASSERT_EQUAL(run_gemm(&tw, M, x, ldx, bias, act, 0.7f, 1.3f, y0, part, ldy), SR_OK);
                diffs += differ(full, part, ny, th == 2 ? "2 threads" : "3 threads", dtypes[d]);
            }
            for (int i = 0; i < LEN(isas); i++) {
                if (sr_cpu_gemm_force_isa(isas[i]) != 0) continue; /* this CPU lacks it */
                CU_ASSERT_EQUAL(run_gemm(&tw, M, x, ldx, bias, act, 0.7f, 1.3f, y0, part, ldy), SR_OK);
                diffs += differ(full, part, ny, isas[i], dtypes[d]);
                compared_isa++;
            }
            sr_cpu_gemm_force_isa(NULL);
            free(bias); free(x); free(y0); free(full); free(part);
            tw_free(&tw);
        }
    kt->set_threads(saved);
    printf("\n      %d path comparisons (auto = %s), %d differences\n      ", compared_isa,
           sr_cpu_gemm_isa(), diffs);
    CU_ASSERT(compared_isa >= 8); /* portable always, and the native path */
    CU_ASSERT_EQUAL(diffs, 0);
}

/* alpha = beta = 1 is exactly y0 + t; beta = 0 overwrites NaN; M = 0 writes nothing. */
static void test_gemm_accumulate(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    seed(4);
    int M = 9, N = 41, K = 77, ldy = N + 2;
    for (int d = 0; d < LEN(dtypes); d++) {
        tweight tw;
        if (!tw_make(&tw, dtypes[d], N, K)) {
            tw_free(&tw);
            continue;
        }
        float *x = make_x(M, K, K), *y0 = make_y(M, N, ldy, 0), *nan0 = make_y(M, N, ldy, 1);
        float *bias = make_bias(N);
        float *t = malloc((size_t)M * ldy * sizeof(float)), *acc = malloc((size_t)M * ldy * sizeof(float));
        CU_ASSERT_EQUAL(run_gemm(&tw, M, x, K, bias, SR_ACT_RELU, 1.0f, 0.0f, nan0, t, ldy), SR_OK);
        CU_ASSERT_EQUAL(run_gemm(&tw, M, x, K, bias, SR_ACT_RELU, 1.0f, 1.0f, y0, acc, ldy), SR_OK);
        int exact = 1;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                size_t i = (size_t)m * ldy + n;
                float want = y0[i] + t[i];
                exact &= memcmp(&acc[i], &want, sizeof want) == 0 && !isnan(t[i]);
            }
        CU_ASSERT(exact);
        /* M = 0: nothing read or written (NULL x allowed) */
        memcpy(acc, y0, (size_t)M * ldy * sizeof(float));
        CU_ASSERT_EQUAL(kt->gemm(0, NULL, K, tw.W, bias, SR_ACT_NONE, 1.0f, 0.0f, acc, ldy), SR_OK);
        CU_ASSERT_EQUAL(memcmp(acc, y0, (size_t)M * ldy * sizeof(float)), 0);
        free(x); free(y0); free(nan0); free(bias); free(t); free(acc);
        tw_free(&tw);
    }
}

/* gather: exact widened rows, ids repeated and at both ends; padding of y kept. */
static void test_gather(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    seed(5);
    static const int shapes[][2] = {{1, 1}, {33, 7}, {100, 65}, {70, 384}};
    int bad = 0;
    for (int s = 0; s < LEN(shapes); s++)
        for (int d = 0; d < LEN(dtypes); d++) {
            int n = shapes[s][0], k = shapes[s][1], cnt = 11, ldy = k + 3;
            tweight tw;
            if (!tw_make(&tw, dtypes[d], n, k)) {
                tw_free(&tw);
                continue;
            }
            int32_t ids[11];
            for (int i = 0; i < cnt; i++) ids[i] = i == 0 ? n - 1 : i == 1 ? 0 : rnd_int(0, n - 1);
            ids[cnt - 1] = ids[2];
            float *y = make_y(cnt, k, ldy, 1);
            double *ref = malloc((size_t)cnt * k * sizeof(double));
            CU_ASSERT_EQUAL(kt->gather(tw.W, ids, cnt, y, ldy), SR_OK);
            ref_gather(tw.w, k, ids, cnt, ref);
            for (int i = 0; i < cnt; i++)
                for (int c = 0; c < ldy; c++) {
                    float v = y[(size_t)i * ldy + c];
                    float want = c < k ? (float)ref[(size_t)i * k + c] : Y_SENTINEL;
                    if (memcmp(&v, &want, sizeof v)) {
                        if (bad < 3)
                            printf("\n      gather %s n %d k %d: y[%d,%d] = %.9g, want %.9g",
                                   dt_names[dtypes[d]], n, k, i, c, (double)v, (double)want);
                        bad++;
                    }
                }
            free(y);
            free(ref);
            tw_free(&tw);
        }
    CU_ASSERT_EQUAL(bad, 0);
}

/* weight_create: sizes and 64-byte alignment; bytes counts at least the elements held. */
static void test_weight_layout(void)
{
    seed(6);
    for (int d = 0; d < LEN(dtypes); d++) {
        tweight tw;
        if (tw_make(&tw, dtypes[d], 33, 5)) {
            size_t es = dtypes[d] == SR_F32 ? 4 : dtypes[d] == SR_I8 ? 1 : 2;
            CU_ASSERT_EQUAL(tw.W->n, 33);
            CU_ASSERT_EQUAL(tw.W->k, 5);
            CU_ASSERT_EQUAL(tw.W->dtype, dtypes[d]);
            CU_ASSERT(tw.W->bytes >= 64 * 5 * es); /* two panels of 32 rows */
            CU_ASSERT(tw.W->bytes <= 4096);
            CU_ASSERT_EQUAL((uintptr_t)tw.W->data % 64, 0);
            CU_ASSERT_EQUAL(tw.W->scale != NULL, dtypes[d] == SR_I8);
        }
        tw_free(&tw);
    }
    sr_cpu_weight_free(NULL); /* no-op */
}

static void test_bad_args(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    float host[12] = {0}, scale[3] = {1, 1, 1};
    sr_kweight *W = NULL;
    TEST_ASSERT_ERR(kt->weight_create(host, SR_F32, 0, 4, NULL, SR_KMUL_EXACT, &W), SR_ERR_ARG, "weight_create: shape");
    CU_ASSERT_PTR_NULL(W);
    TEST_ASSERT_ERR(kt->weight_create(host, SR_F32, 3, 0, NULL, SR_KMUL_EXACT, &W), SR_ERR_ARG, "weight_create: shape");
    TEST_ASSERT_ERR(kt->weight_create(host, SR_I32, 3, 4, NULL, SR_KMUL_EXACT, &W), SR_ERR_ARG, "weight_create: dtype");
    TEST_ASSERT_ERR(kt->weight_create(NULL, SR_F32, 3, 4, NULL, SR_KMUL_EXACT, &W), SR_ERR_ARG, "weight_create: host");
    TEST_ASSERT_ERR(kt->weight_create(host, SR_I8, 3, 4, NULL, SR_KMUL_EXACT, &W), SR_ERR_ARG, "weight_create: i8 weight without scale");
    TEST_ASSERT_ERR(kt->weight_create(host, SR_F32, 3, 4, NULL, SR_KMUL_EXACT, NULL), SR_ERR_ARG, "weight_create: out");
    TEST_ASSERT_ERR(kt->weight_create(host, SR_F32, 3, 4, NULL, SR_KMUL_BF16, &W), SR_ERR_ARG,
                    "weight_create: bf16 products need a bf16 or i8 weight (dtype f32)");
    TEST_ASSERT_ERR(kt->weight_create(host, SR_F32, 3, 4, NULL, (sr_kmul)7, &W), SR_ERR_ARG,
                    "weight_create: mul 7 is not exact or bf16");
    CU_ASSERT_EQUAL_FATAL(kt->weight_create(host, SR_I8, 3, 4, scale, SR_KMUL_EXACT, &W), SR_OK);
    float x[2 * 8] = {0}, y[2 * 8] = {0};
    TEST_ASSERT_ERR(kt->gemm(-1, x, 4, W, NULL, SR_ACT_NONE, 1, 0, y, 3), SR_ERR_ARG, "gemm: M");
    TEST_ASSERT_ERR(kt->gemm(2, x, 4, NULL, NULL, SR_ACT_NONE, 1, 0, y, 3), SR_ERR_ARG, "gemm: W");
    TEST_ASSERT_ERR(kt->gemm(2, NULL, 4, W, NULL, SR_ACT_NONE, 1, 0, y, 3), SR_ERR_ARG, "gemm: x");
    TEST_ASSERT_ERR(kt->gemm(2, x, 4, W, NULL, SR_ACT_NONE, 1, 0, NULL, 3), SR_ERR_ARG, "gemm: y");
    TEST_ASSERT_ERR(kt->gemm(2, x, 3, W, NULL, SR_ACT_NONE, 1, 0, y, 3), SR_ERR_ARG, "gemm: ldx = 3 < k = 4");
    TEST_ASSERT_ERR(kt->gemm(2, x, 4, W, NULL, SR_ACT_NONE, 1, 0, y, 2), SR_ERR_ARG, "gemm: ldy = 2 < n = 3");
    TEST_ASSERT_ERR(kt->gemm(2, x, 4, W, NULL, (sr_act)9, 1, 0, y, 3), SR_ERR_ARG, "gemm: act");
    TEST_ASSERT_ERR(kt->gemm(2, x, 4, W, NULL, SR_ACT_NONE, 1, 0, x + 5, 3), SR_ERR_ARG, "gemm: x and y overlap");
    int32_t ids[2] = {1, 3};
    TEST_ASSERT_ERR(kt->gather(W, ids, 2, y, 4), SR_ERR_ARG, "gather: ids[1] = 3 out of [0, 3)");
    ids[1] = -1;
    TEST_ASSERT_ERR(kt->gather(W, ids, 2, y, 4), SR_ERR_ARG, "gather: ids[1] = -1");
    ids[1] = 2;
    TEST_ASSERT_ERR(kt->gather(W, ids, 2, y, 3), SR_ERR_ARG, "gather: ldy = 3 < k = 4");
    TEST_ASSERT_ERR(kt->gather(W, ids, -1, y, 4), SR_ERR_ARG, "gather: n");
    TEST_ASSERT_ERR(kt->gather(NULL, ids, 2, y, 4), SR_ERR_ARG, "gather: E");
    TEST_ASSERT_ERR(kt->gather(W, NULL, 2, y, 4), SR_ERR_ARG, "gather: ids");
    CU_ASSERT_EQUAL(kt->gather(W, ids, 2, y, 4), SR_OK);
    CU_ASSERT_EQUAL(kt->gather(W, NULL, 0, NULL, 4), SR_OK); /* n = 0: no-op */
    kt->weight_free(W);
}

/* ---- bf16 products (SR_KMUL_BF16) ------------------------------------------------------- */

static const char *const bf_paths[] = {"amx", "avx512_bf16", "portable"};

/* Against the double reference over the bf16-rounded activations (tolerance as above: f32
 * accumulation of exact products), on every path this CPU has, for bf16 weights and for i8
 * ones (q exact in bf16, the row's scale after the sum): shapes with k tails (K not a
 * multiple of the 32-k AMX step nor of 2), k blocked (K = 1100, 777), several row blocks
 * (M = 150), 16- and 32-row AMX tiles and their remainders, 1 and 2 threads. */
static void test_bf16_vs_ref(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    int saved = sr_cpu_threads();
    double worst = 0;
    int bad = 0, cases = 0, paths = 0;
    static const int shapes[][3] = {{1, 1, 1},     {70, 33, 17},    {16, 64, 64},  {33, 65, 95},
                                    {17, 40, 301}, {150, 100, 1100}, {3, 700, 513}, {40, 333, 777}};
    for (int p = 0; p < LEN(bf_paths); p++) {
        if (sr_cpu_gemm_force_bf16(bf_paths[p])) continue; /* this CPU lacks it */
        paths++;
        seed(11);
        for (int s2 = 0; s2 < 2 * LEN(shapes); s2++) {
            const int s = s2 % LEN(shapes);
            kt->set_threads(s >= 5 ? 2 : 1);
            tweight tw;
            if (!tw_make_mul(&tw, s2 < LEN(shapes) ? SR_BF16 : SR_I8, shapes[s][1], shapes[s][2],
                             SR_KMUL_BF16)) {
                tw_free(&tw);
                continue;
            }
            float *bias = make_bias(tw.n);
            for (int act = 0; act < 4; act++) {
                const ab_mode *ab = &ab_modes[(s + act) % LEN(ab_modes)];
                worst = fmax(worst, check_gemm(&tw, shapes[s][0], act % 3 * 5, act % 2 * 3,
                                               act % 2 ? bias : NULL, (sr_act)act, ab, &bad));
                cases++;
            }
            free(bias);
            tw_free(&tw);
        }
    }
    sr_cpu_gemm_force_bf16(NULL);
    kt->set_threads(saved);
    printf("\n      %d bf16-product cases on %d paths (auto = %s): worst error / tolerance %.3g, "
           "%d failures\n      ", cases, paths, sr_cpu_gemm_bf16_path(), worst, bad);
    CU_ASSERT(paths >= 1);
    CU_ASSERT_EQUAL(bad, 0);
}

/* On each path: a row alone, in batches of 5 at odd offsets and in the whole M, on 1, 2, 3
 * threads, all the same bits; the AVX512_BF16 path and the portable one the same bits. bf16
 * weights, and an i8 one (the last shape). */
static void test_bf16_bit_identity(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    int saved = sr_cpu_threads();
    seed(12);
    static const int shapes[][3] = {{64, 75, 301}, {150, 70, 1100}, {37, 40, 64}, {45, 70, 333}};
    int diffs = 0, paths = 0, cross = 0;
    for (int s = 0; s < LEN(shapes); s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldx = K + 3, ldy = N + 1;
        tweight tw;
        if (!tw_make_mul(&tw, s == 3 ? SR_I8 : SR_BF16, N, K, SR_KMUL_BF16)) {
            tw_free(&tw);
            continue;
        }
        float *bias = make_bias(N), *x = make_x(M, K, ldx), *y0 = make_y(M, N, ldy, 0);
        size_t ny = (size_t)M * ldy;
        float *full = malloc(ny * sizeof(float)), *part = malloc(ny * sizeof(float));
        float *by_path[3] = {malloc(ny * sizeof(float)), malloc(ny * sizeof(float)), malloc(ny * sizeof(float))};
        int have[3] = {0, 0, 0};
        sr_act act = s % 2 ? SR_ACT_GELU : SR_ACT_NONE;
        for (int p = 0; p < LEN(bf_paths); p++) {
            if (sr_cpu_gemm_force_bf16(bf_paths[p])) continue;
            paths += s == 0;
            kt->set_threads(1);
            CU_ASSERT_EQUAL(run_gemm(&tw, M, x, ldx, bias, act, 0.7f, 1.3f, y0, full, ldy), SR_OK);
            for (int m = 0; m < M; m++) {
                size_t o = (size_t)m * ldy;
                CU_ASSERT_EQUAL(run_gemm(&tw, 1, x + (size_t)m * ldx, ldx, bias, act, 0.7f, 1.3f,
                                         y0 + o, part + o, ldy), SR_OK);
            }
            diffs += differ(full, part, ny, bf_paths[p], SR_BF16);
            CU_ASSERT_EQUAL(run_gemm(&tw, 2, x, ldx, bias, act, 0.7f, 1.3f, y0, part, ldy), SR_OK);
            for (int m = 2; m < M; m += 5) {
                int cnt = M - m < 5 ? M - m : 5;
                size_t o = (size_t)m * ldy;
                CU_ASSERT_EQUAL(run_gemm(&tw, cnt, x + (size_t)m * ldx, ldx, bias, act, 0.7f, 1.3f,
                                         y0 + o, part + o, ldy), SR_OK);
            }
            diffs += differ(full, part, ny, "batches of 5", SR_BF16);
            for (int th = 2; th <= 3; th++) {
                kt->set_threads(th);
                CU_ASSERT_EQUAL(run_gemm(&tw, M, x, ldx, bias, act, 0.7f, 1.3f, y0, part, ldy), SR_OK);
                diffs += differ(full, part, ny, th == 2 ? "2 threads" : "3 threads", SR_BF16);
            }
            memcpy(by_path[p], full, ny * sizeof(float));
            have[p] = 1;
        }
        if (have[1] && have[2]) {
            diffs += differ(by_path[1], by_path[2], ny, "avx512_bf16 vs portable", SR_BF16);
            cross++;
        }
        sr_cpu_gemm_force_bf16(NULL);
        free(bias); free(x); free(y0); free(full); free(part);
        for (int p = 0; p < 3; p++) free(by_path[p]);
        tw_free(&tw);
    }
    kt->set_threads(saved);
    printf("\n      %d paths, %d avx512_bf16 / portable comparisons, %d differences\n      ", paths,
           cross, diffs);
    CU_ASSERT(paths >= 1);
    CU_ASSERT_EQUAL(diffs, 0);
}

/* Subnormal activations and weights count as zero (the same bits as zeros there), and a NaN
 * in one row makes that row NaN and leaves the other rows' bits alone, on every path. */
static void test_bf16_subnormal_nan(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    seed(13);
    const int M = 6, N = 40, K = 70;
    uint16_t *wh = malloc((size_t)N * K * 2), *wz = malloc((size_t)N * K * 2);
    float *x = make_x(M, K, K), *xz = make_x(M, K, K);
    float *y1 = malloc((size_t)M * N * sizeof(float)), *y2 = malloc((size_t)M * N * sizeof(float));
    CU_ASSERT_FATAL(wh && wz && x && xz && y1 && y2);
    for (int i = 0; i < N * K; i++) wh[i] = wz[i] = sr_f32_to_bf16(rnd());
    for (int i = 5; i < N * K; i += 37) {
        wh[i] = i % 2 ? 0x0001u : 0x007fu; /* positive subnormals */
        wz[i] = 0x0000u;
    }
    memcpy(xz, x, (size_t)M * K * sizeof(float));
    for (int i = 3; i < M * K; i += 11) {
        x[i] = i % 2 ? 1e-40f : 5.9e-39f; /* f32 subnormals (and 5.9e-39 rounds to bf16 0x0040) */
        xz[i] = 0.0f;
    }
    sr_kweight *Wh = NULL, *Wz = NULL;
    CU_ASSERT_EQUAL_FATAL(kt->weight_create(wh, SR_BF16, N, K, NULL, SR_KMUL_BF16, &Wh), SR_OK);
    CU_ASSERT_EQUAL_FATAL(kt->weight_create(wz, SR_BF16, N, K, NULL, SR_KMUL_BF16, &Wz), SR_OK);
    int paths = 0, bad = 0;
    for (int p = 0; p < LEN(bf_paths); p++) {
        if (sr_cpu_gemm_force_bf16(bf_paths[p])) continue;
        paths++;
        CU_ASSERT_EQUAL(kt->gemm(M, x, K, Wh, NULL, SR_ACT_NONE, 1, 0, y1, N), SR_OK);
        CU_ASSERT_EQUAL(kt->gemm(M, xz, K, Wz, NULL, SR_ACT_NONE, 1, 0, y2, N), SR_OK);
        bad += differ(y1, y2, (size_t)M * N, "subnormals vs zeros", SR_BF16);
        float keep = xz[2 * K + 9];
        xz[2 * K + 9] = NAN;
        CU_ASSERT_EQUAL(kt->gemm(M, xz, K, Wz, NULL, SR_ACT_NONE, 1, 0, y1, N), SR_OK);
        xz[2 * K + 9] = keep;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                size_t i = (size_t)m * N + n;
                int ok = m == 2 ? isnan(y1[i]) : !memcmp(&y1[i], &y2[i], sizeof y1[i]);
                if (!ok && bad++ < 3) printf("\n      %s: NaN row 2: y[%d,%d] = %g", bf_paths[p], m, n, (double)y1[i]);
            }
    }
    sr_cpu_gemm_force_bf16(NULL);
    CU_ASSERT(paths >= 1);
    CU_ASSERT_EQUAL(bad, 0);
    kt->weight_free(Wh);
    kt->weight_free(Wz);
    free(wh); free(wz); free(x); free(xz); free(y1); free(y2);
}

/* gather from a weight of bf16 products: its rows as stored (subnormals as zero); an i8
 * weight's q times its row's scale, one rounding, as the exact path's. */
static void test_bf16_gather(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    seed(14);
    int n = 70, k = 77, bad = 0;
    for (int d = 0; d < 2; d++) {
        tweight tw;
        if (tw_make_mul(&tw, d ? SR_I8 : SR_BF16, n, k, SR_KMUL_BF16)) {
            int32_t ids[5] = {69, 0, 33, 31, 32};
            float y[5 * 77];
            double ref[5 * 77];
            CU_ASSERT_EQUAL(kt->gather(tw.W, ids, 5, y, k), SR_OK);
            ref_gather(tw.w, k, ids, 5, ref);
            for (int i = 0; i < 5 * k; i++) bad += y[i] != (float)ref[i];
        }
        tw_free(&tw);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* A weight made of stacked blocks (what sr_model_weight_cat builds for q | k | v, gate | up)
 * computes each column exactly as its block alone: for every dtype, exact and bf16 products on
 * every path this CPU has, 1 and 2 threads, rows 1 / 5 / 40; a block without bias gets -0
 * entries in the stacked bias and keeps every bit (t + -0 = t, -0 included). */
static void test_gemm_stacked(void)
{
    const sr_kernels *kt = sr_kernels_cpu();
    int saved = sr_cpu_threads();
    seed(13);
    const int n1 = 33, n2 = 17, n = n1 + n2, K = 301, ldx = K + 2, ldy = n + 3;
    static const int Ms[] = {1, 5, 40};
    int diffs = 0, cases = 0;
    for (int d = 0; d < 4 + LEN(bf_paths); d++) { /* 4 dtypes exact, then bf16 products per path */
        sr_dtype dt = d < 4 ? (sr_dtype[]){SR_F32, SR_F16, SR_BF16, SR_I8}[d] : SR_BF16;
        sr_kmul mul = d < 4 ? SR_KMUL_EXACT : SR_KMUL_BF16;
        if (d >= 4 && sr_cpu_gemm_force_bf16(bf_paths[d - 4])) continue; /* path absent */
        tweight a, b;
        if (!tw_make_mul(&a, dt, n1, K, mul) || !tw_make_mul(&b, dt, n2, K, mul)) {
            tw_free(&a);
            tw_free(&b);
            continue;
        }
        size_t es = dt == SR_F32 ? 4 : dt == SR_I8 ? 1 : 2, ra = (size_t)n1 * K * es;
        char *host = malloc((size_t)n * K * es);
        float *scale = malloc((size_t)n * sizeof(float)), *bias = make_bias(n);
        memcpy(host, a.host, ra);
        memcpy(host + ra, b.host, (size_t)n2 * K * es);
        if (dt == SR_I8) {
            memcpy(scale, a.scale, (size_t)n1 * sizeof(float));
            memcpy(scale + n1, b.scale, (size_t)n2 * sizeof(float));
        }
        for (int i = n1; i < n; i++) bias[i] = -0.0f; /* block b has none */
        sr_kweight *W = NULL;
        CU_ASSERT_EQUAL_FATAL(kt->weight_create(host, dt, n, K, scale, mul, &W), SR_OK);
        for (int mi = 0; mi < LEN(Ms); mi++)
            for (int th = 1; th <= 2; th++) {
                kt->set_threads(th);
                int M = Ms[mi];
                sr_act act = (sr_act)((mi + th) % 4);
                float beta = mi == 1 ? 1.3f : 0.0f;
                float *x = make_x(M, K, ldx), *y0 = make_y(M, n, ldy, 0);
                /* row 0 of the larger batches: +-FLT_TRUE_MIN, whose products underflow to a
                 * signed zero, so that accumulators of -0 meet the bias (exact products) */
                for (int c = 0; M > 1 && c < K; c++) x[c] = rnd() < 0 ? -FLT_TRUE_MIN : FLT_TRUE_MIN;
                size_t ny = (size_t)M * ldy;
                float *yf = malloc(ny * sizeof(float)), *ys = malloc(ny * sizeof(float));
                memcpy(yf, y0, ny * sizeof(float));
                memcpy(ys, y0, ny * sizeof(float));
                CU_ASSERT_EQUAL(kt->gemm(M, x, ldx, W, bias, act, 0.7f, beta, yf, ldy), SR_OK);
                CU_ASSERT_EQUAL(kt->gemm(M, x, ldx, a.W, bias, act, 0.7f, beta, ys, ldy), SR_OK);
                CU_ASSERT_EQUAL(kt->gemm(M, x, ldx, b.W, NULL, act, 0.7f, beta, ys + n1, ldy), SR_OK);
                char what[96];
                snprintf(what, sizeof what, "stacked vs blocks (%s, M %d, %d threads, act %s)",
                         d < 4 ? "exact" : bf_paths[d - 4], M, th, act_names[act]);
                diffs += differ(yf, ys, ny, what, dt);
                cases++;
                free(x); free(y0); free(yf); free(ys);
            }
        kt->weight_free(W);
        free(host); free(scale); free(bias);
        tw_free(&a);
        tw_free(&b);
    }
    sr_cpu_gemm_force_bf16(NULL);
    kt->set_threads(saved);
    CU_ASSERT(cases >= 24);
    CU_ASSERT_EQUAL(diffs, 0);
}

void test_register_ops_gemm(void)
{
    TEST_SUITE("kernels_gemm_op", {"gemm_vs_ref", test_gemm_vs_ref}, {"gemm_big", test_gemm_big},
               {"gemm_bit_identity", test_gemm_bit_identity}, {"gemm_stacked", test_gemm_stacked},
               {"gemm_accumulate", test_gemm_accumulate}, {"gather", test_gather},
               {"weight_layout", test_weight_layout}, {"bad_args", test_bad_args});
    TEST_SUITE("kernels_gemm_bf16", {"vs_ref", test_bf16_vs_ref},
               {"bit_identity", test_bf16_bit_identity},
               {"subnormal_nan", test_bf16_subnormal_nan}, {"gather", test_bf16_gather});
}
