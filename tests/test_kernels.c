/*
 * test_kernels.c — the kernel dispatch tables (suite kernels_gemm).
 *
 * sgemm is checked against a naive triple loop in double precision for all four transpose
 * combinations, odd sizes, alpha/beta, and sub-matrix leading dimensions. Padding columns of
 * A and B hold NaN (a GEMM that reads them poisons its result) and padding of C holds a
 * sentinel that must survive untouched.
 *
 * Tolerance: every entry must satisfy
 *     |C - C_ref| <= (K + 3) * FLT_EPSILON * (|alpha| * sum_k |a_ik b_kj| + |beta c_ij|).
 * A float dot product of length K in any summation order (FMA or not) errs by at most
 * gamma_K = K u / (1 - K u) relative to sum |a b| (u = FLT_EPSILON / 2); scaling by alpha
 * and adding beta * c add two more roundings. The stated bound is about twice that a-priori
 * bound, so it holds for every correct implementation and fails on any wrong index.
 *
 * The CUDA table runs the same cases when sr_kernels_cuda gives one; otherwise the CUDA tests
 * print the reason and skip.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/sr.h"
#include "../kernels/cpu/cpu_impl.h" /* sr_kernels_cpu_guard_recordings */
#include "../kernels/kernels.h"
#include "../kernels/launch_log.h"
#include "../kernels/ops.h"
#include "test.h"

#define C_SENTINEL 12345.0f
/* The tests see only the public headers, so no SR_ARRAY_LEN. */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    int pad;   /* extra columns in every stored matrix (sub-matrix leading dims) */
    int nan_c; /* beta = 0 case: C starts as NaN, which must not leak into the result */
} gemm_case;

/* Worst error seen, as a fraction of the stated bound, per table (printed at the end). */
static double worst_ratio_cpu, worst_ratio_cuda;

static uint64_t rng_state;
static float rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng_state >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

/* Host-side operands of one case, in their stored (possibly transposed, padded) layout. */
typedef struct {
    int ra, ca, lda, rb, cb, ldb, ldc;
    float *A, *B, *C0;
    double *ref, *bound;
} gemm_data;

static void data_free(gemm_data *d)
{
    free(d->A); free(d->B); free(d->C0); free(d->ref); free(d->bound);
    memset(d, 0, sizeof *d);
}

static int data_make(const gemm_case *c, gemm_data *d)
{
    memset(d, 0, sizeof *d);
    d->ra = c->ta ? c->K : c->M;
    d->ca = c->ta ? c->M : c->K;
    d->rb = c->tb ? c->N : c->K;
    d->cb = c->tb ? c->K : c->N;
    d->lda = (d->ca > 0 ? d->ca : 1) + c->pad;
    d->ldb = (d->cb > 0 ? d->cb : 1) + c->pad;
    d->ldc = (c->N > 0 ? c->N : 1) + c->pad;
    size_t na = (size_t)d->ra * (size_t)d->lda, nb = (size_t)d->rb * (size_t)d->ldb;
    size_t nc = (size_t)c->M * (size_t)d->ldc;
    d->A = malloc((na ? na : 1) * sizeof(float));
    d->B = malloc((nb ? nb : 1) * sizeof(float));
    d->C0 = malloc((nc ? nc : 1) * sizeof(float));
    d->ref = malloc((nc ? nc : 1) * sizeof(double));
    d->bound = malloc((nc ? nc : 1) * sizeof(double));
    if (!d->A || !d->B || !d->C0 || !d->ref || !d->bound) { data_free(d); return 0; }
    rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(c->M * 131 + c->N * 17 + c->K);
    for (int i = 0; i < d->ra; i++)
        for (int j = 0; j < d->lda; j++) d->A[(size_t)i * d->lda + j] = j < d->ca ? rnd() : NAN;
    for (int i = 0; i < d->rb; i++)
        for (int j = 0; j < d->ldb; j++) d->B[(size_t)i * d->ldb + j] = j < d->cb ? rnd() : NAN;
    for (int i = 0; i < c->M; i++)
        for (int j = 0; j < d->ldc; j++)
            d->C0[(size_t)i * d->ldc + j] = j >= c->N ? C_SENTINEL : c->nan_c ? NAN : rnd();
    double tol = (double)(c->K + 3) * FLT_EPSILON;
    for (int i = 0; i < c->M; i++)
        for (int j = 0; j < c->N; j++) {
            double s = 0, sabs = 0;
            for (int k = 0; k < c->K; k++) {
                double a = c->ta ? d->A[(size_t)k * d->lda + i] : d->A[(size_t)i * d->lda + k];
                double b = c->tb ? d->B[(size_t)j * d->ldb + k] : d->B[(size_t)k * d->ldb + j];
                s += a * b;
                sabs += fabs(a * b);
            }
            double c0 = c->beta == 0.0f ? 0.0 : (double)d->C0[(size_t)i * d->ldc + j];
            d->ref[(size_t)i * d->ldc + j] = (double)c->alpha * s + (double)c->beta * c0;
            d->bound[(size_t)i * d->ldc + j] =
                tol * (fabs((double)c->alpha) * sabs + fabs((double)c->beta * c0));
        }
    return 1;
}

/* Run one case through table k; the result lands in out (host, [M, ldc]). */
static sr_status run_table(const sr_kernels *k, const gemm_case *c, const gemm_data *d,
                           float *out)
{
    size_t na = (size_t)d->ra * d->lda * sizeof(float), nb = (size_t)d->rb * d->ldb * sizeof(float);
    size_t nc = (size_t)c->M * d->ldc * sizeof(float);
    float *A = k->alloc(na), *B = k->alloc(nb), *C = k->alloc(nc);
    sr_status st = SR_ERR_NOMEM;
    if (A && B && C && !(st = k->upload(A, d->A, na)) && !(st = k->upload(B, d->B, nb)) &&
        !(st = k->upload(C, d->C0, nc)) &&
        !(st = k->sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, A, d->lda, B, d->ldb, c->beta,
                        C, d->ldc)) &&
        !(st = k->sync()))
        st = k->download(out, C, nc);
    k->free(A); k->free(B); k->free(C);
    return st;
}

/* Check out against the reference; returns the worst |err| / bound (0 when exact). */
static double check_result(const gemm_case *c, const gemm_data *d, const float *out,
                           const char *table)
{
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < c->M; i++)
        for (int j = 0; j < d->ldc; j++) {
            size_t x = (size_t)i * d->ldc + j;
            if (j >= c->N) {
                if (out[x] != C_SENTINEL) bad++; /* padding of C written */
                continue;
            }
            double err = fabs((double)out[x] - d->ref[x]);
            if (!(err <= d->bound[x])) {
                if (bad < 3)
                    printf("\n      %s ta=%d tb=%d %dx%dx%d pad=%d: C[%d,%d] = %.9g, want %.9g "
                           "(err %.3g > bound %.3g)", table, c->ta, c->tb, c->M, c->N, c->K,
                           c->pad, i, j, (double)out[x], d->ref[x], err, d->bound[x]);
                bad++;
            } else if (d->bound[x] > 0 && err / d->bound[x] > worst) {
                worst = err / d->bound[x];
            }
        }
    CU_ASSERT_EQUAL(bad, 0);
    return worst;
}

/* The shapes of the brief (1x1x1, 7x13x5, 64x33x129), one-row products (the CPU table's gemv
 * path) and one shape large enough for blocked kernels, each under every trans combination and three alpha/beta/padding settings. */
static int all_cases(gemm_case *cases, int cap)
{
    static const int shapes[][3] = {{1, 1, 1}, {1, 33, 7}, {1, 257, 513}, {7, 13, 5}, {64, 33, 129}, {300, 257, 513}};
    static const struct { float alpha, beta; int pad, nan_c; } modes[] = {
        {1.0f, 0.0f, 0, 0}, {-0.75f, 1.5f, 3, 0}, {2.0f, 0.0f, 1, 1}};
    int n = 0;
    for (size_t s = 0; s < ARRAY_LEN(shapes); s++)
        for (int t = 0; t < 4; t++)
            for (size_t m = 0; m < ARRAY_LEN(modes) && n < cap; m++)
                cases[n++] = (gemm_case){t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2],
                                         modes[m].alpha, modes[m].beta, modes[m].pad,
                                         modes[m].nan_c};
    /* Empty product: C = beta * C (and beta = 0 clears NaN). */
    if (n + 2 <= cap) {
        cases[n++] = (gemm_case){0, 0, 5, 6, 0, 1.0f, 0.5f, 2, 0};
        cases[n++] = (gemm_case){1, 1, 5, 6, 0, 1.0f, 0.0f, 0, 1};
    }
    return n;
}

static void run_all(const sr_kernels *k, double *worst_out, const sr_kernels *cpu_cmp)
{
    gemm_case cases[128];
    int n = all_cases(cases, 64);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        gemm_data d;
        if (!data_make(&cases[i], &d)) { CU_FAIL("out of memory"); return; }
        size_t nc = (size_t)cases[i].M * d.ldc;
        float *out = malloc((nc ? nc : 1) * sizeof(float));
        float *cpu_out = malloc((nc ? nc : 1) * sizeof(float));
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(cpu_out);
        sr_status st = run_table(k, &cases[i], &d, out);
        CU_ASSERT_EQUAL(st, SR_OK);
        if (st) printf("\n      %s: %s", k->name, sr_last_error());
        else {
            double w = check_result(&cases[i], &d, out, k->name);
            if (w > worst) worst = w;
        }
        if (!st && cpu_cmp) {
            /* Both tables within the bound of the exact result: within twice it of each other. */
            CU_ASSERT_EQUAL_FATAL(run_table(cpu_cmp, &cases[i], &d, cpu_out), SR_OK);
            int bad = 0;
            for (int r = 0; r < cases[i].M; r++)
                for (int j = 0; j < cases[i].N; j++) {
                    size_t x = (size_t)r * d.ldc + j;
                    if (!(fabs((double)out[x] - (double)cpu_out[x]) <= 2 * d.bound[x])) bad++;
                }
            CU_ASSERT_EQUAL(bad, 0);
        }
        free(out); free(cpu_out);
        data_free(&d);
    }
    *worst_out = worst;
}

static void test_cpu_sgemm_vs_naive(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_STRING_EQUAL(k->name, "cpu");
    run_all(k, &worst_ratio_cpu, NULL);
    printf("\n      cpu sgemm: worst |err| = %.3f of the bound (K + 3) eps sum|ab|\n      ",
           worst_ratio_cpu);
}

static void test_cpu_threads(void)
{
    /* Results stay within the bound whatever the BLAS thread count. */
    const sr_kernels *k = sr_kernels_cpu();
    gemm_case c = {1, 0, 300, 257, 513, 1.0f, 0.0f, 0, 0};
    gemm_data d;
    CU_ASSERT_FATAL(data_make(&c, &d));
    float *out = malloc((size_t)c.M * d.ldc * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    int threads[] = {1, 3, 2};
    for (size_t i = 0; i < 3; i++) {
        k->set_threads(threads[i]);
        CU_ASSERT_EQUAL(run_table(k, &c, &d, out), SR_OK);
        check_result(&c, &d, out, "cpu");
    }
    k->set_threads(0); /* keeps the last count: must not crash or reset to something odd */
    CU_ASSERT_EQUAL(run_table(k, &c, &d, out), SR_OK);
    check_result(&c, &d, out, "cpu");
    free(out);
    data_free(&d);
}

static void test_cpu_empty(void)
{
    /* M = 0 or N = 0: nothing to compute; C (even NULL) is not touched. */
    const sr_kernels *k = sr_kernels_cpu();
    float a[4] = {1, 2, 3, 4}, c[4] = {7, 7, 7, 7};
    CU_ASSERT_EQUAL(k->sgemm(0, 0, 0, 2, 2, 1.0f, a, 2, a, 2, 0.0f, NULL, 2), SR_OK);
    CU_ASSERT_EQUAL(k->sgemm(0, 0, 2, 0, 2, 1.0f, a, 2, a, 1, 0.0f, c, 1), SR_OK);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(c[i], 7.0f);
}

static void test_cpu_memory(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    size_t sizes[] = {0, 1, 3, 64, 1000, 1 << 20};
    for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
        unsigned char *p = k->alloc(sizes[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL((uintptr_t)p % 64, 0);
        if (sizes[i]) {
            unsigned char *src = malloc(sizes[i]), *back = malloc(sizes[i]);
            CU_ASSERT_PTR_NOT_NULL_FATAL(src);
            CU_ASSERT_PTR_NOT_NULL_FATAL(back);
            for (size_t j = 0; j < sizes[i]; j++) src[j] = (unsigned char)(j * 7 + 3);
            CU_ASSERT_EQUAL(k->upload(p, src, sizes[i]), SR_OK);
            CU_ASSERT_EQUAL(k->download(back, p, sizes[i]), SR_OK);
            CU_ASSERT_EQUAL(memcmp(src, back, sizes[i]), 0);
            free(src); free(back);
        }
        k->free(p);
    }
    k->free(NULL);
    CU_ASSERT_EQUAL(k->sync(), SR_OK);
    char buf[4];
    TEST_ASSERT_ERR(k->upload(NULL, buf, 4), SR_ERR_ARG, "dst");
    TEST_ASSERT_ERR(k->download(buf, NULL, 4), SR_ERR_ARG, "src");
    CU_ASSERT_EQUAL(k->upload(NULL, NULL, 0), SR_OK);
}

static void test_cpu_bad_args(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    float a[64] = {0}, b[64] = {0}, c[64] = {0};
    /* A is [2, 3] (lda >= 3), B is [3, 4] (ldb >= 4), C is [2, 4] (ldc >= 4). */
    CU_ASSERT_EQUAL(k->sgemm(0, 0, 2, 4, 3, 1, a, 3, b, 4, 0, c, 4), SR_OK);
    TEST_ASSERT_ERR(k->sgemm(0, 0, -1, 4, 3, 1, a, 3, b, 4, 0, c, 4), SR_ERR_ARG, "M = -1");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, -4, 3, 1, a, 3, b, 4, 0, c, 4), SR_ERR_ARG, "N = -4");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, -3, 1, a, 3, b, 4, 0, c, 4), SR_ERR_ARG, "K = -3");
    TEST_ASSERT_ERR(k->sgemm(2, 0, 2, 4, 3, 1, a, 3, b, 4, 0, c, 4), SR_ERR_ARG, "trans_a");
    TEST_ASSERT_ERR(k->sgemm(0, -1, 2, 4, 3, 1, a, 3, b, 4, 0, c, 4), SR_ERR_ARG, "trans_b");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, a, 2, b, 4, 0, c, 4), SR_ERR_ARG, "lda = 2");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, a, 3, b, 3, 0, c, 4), SR_ERR_ARG, "ldb = 3");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, a, 3, b, 4, 0, c, 3), SR_ERR_ARG, "ldc = 3");
    /* Transposed storage changes the row length: A^T stored [3, 2], B^T stored [4, 3]. */
    CU_ASSERT_EQUAL(k->sgemm(1, 1, 2, 4, 3, 1, a, 2, b, 3, 0, c, 4), SR_OK);
    TEST_ASSERT_ERR(k->sgemm(1, 0, 2, 4, 3, 1, a, 1, b, 4, 0, c, 4), SR_ERR_ARG, "lda = 1");
    TEST_ASSERT_ERR(k->sgemm(0, 1, 2, 4, 3, 1, a, 3, b, 2, 0, c, 4), SR_ERR_ARG, "ldb = 2");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 0, 1, a, 0, b, 4, 0, c, 4), SR_ERR_ARG, "lda = 0");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, NULL, 3, b, 4, 0, c, 4), SR_ERR_ARG, "A is NULL");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, a, 3, NULL, 4, 0, c, 4), SR_ERR_ARG, "B is NULL");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, a, 3, b, 4, 0, NULL, 4), SR_ERR_ARG, "C is NULL");
}

static void test_select(void)
{
    const sr_kernels *k = NULL;
    CU_ASSERT_EQUAL(sr_kernels_select(NULL, &k), SR_OK);
    CU_ASSERT_PTR_EQUAL(k, sr_kernels_cpu());
    k = NULL;
    CU_ASSERT_EQUAL(sr_kernels_select("cpu", &k), SR_OK);
    CU_ASSERT_PTR_EQUAL(k, sr_kernels_cpu());
    TEST_ASSERT_ERR(sr_kernels_select("tpu", &k), SR_ERR_ARG, "tpu");
    CU_ASSERT_PTR_NULL(k);
    CU_ASSERT(strstr(sr_last_error(), "cpu") && strstr(sr_last_error(), "cuda"));
    /* "cuda" gives the table, or the same refusal sr_kernels_cuda gives. */
    sr_status st = sr_kernels_select("cuda", &k);
    if (st == SR_OK) {
        CU_ASSERT_STRING_EQUAL(k->name, "cuda");
    } else {
        CU_ASSERT(st == SR_ERR_UNSUPPORTED || st == SR_ERR_DEVICE);
        CU_ASSERT_PTR_NULL(k);
        CU_ASSERT(sr_last_error()[0] != '\0');
#ifndef SR_WITH_CUDA
        CU_ASSERT_EQUAL(st, SR_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NOT_NULL(strstr(sr_last_error(), "make CUDA=1"));
#endif
    }
}

/* The CUDA table, or NULL with the skip reason in why. */
static const sr_kernels *cuda_or_skip(char *why, size_t cap)
{
    const sr_kernels *k = NULL;
    sr_status st = sr_kernels_cuda(&k);
    if (st != SR_OK) {
        CU_ASSERT(st == SR_ERR_UNSUPPORTED || st == SR_ERR_DEVICE);
        snprintf(why, cap, "no CUDA device: %s", sr_last_error());
        return NULL;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_STRING_EQUAL(k->name, "cuda");
    return k;
}

static void test_cuda_sgemm_vs_cpu(void)
{
    char why[1200];
    const sr_kernels *k = cuda_or_skip(why, sizeof why);
    if (!k) { TEST_SKIP(why); return; }
    run_all(k, &worst_ratio_cuda, sr_kernels_cpu());
    printf("\n      cuda sgemm: worst |err| = %.3f of the bound (K + 3) eps sum|ab|\n      ",
           worst_ratio_cuda);
}

static void test_cuda_memory_and_args(void)
{
    char why[1200];
    const sr_kernels *k = cuda_or_skip(why, sizeof why);
    if (!k) { TEST_SKIP(why); return; }
    size_t n = 1 << 20;
    unsigned char *src = malloc(n), *back = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    for (size_t j = 0; j < n; j++) src[j] = (unsigned char)(j * 13 + 1);
    void *d = k->alloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(k->upload(d, src, n), SR_OK);
    CU_ASSERT_EQUAL(k->download(back, d, n), SR_OK);
    CU_ASSERT_EQUAL(memcmp(src, back, n), 0);
    CU_ASSERT_EQUAL(k->sync(), SR_OK);
    TEST_ASSERT_ERR(k->upload(NULL, src, 4), SR_ERR_ARG, "dst");
    float *f = d;
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, 3, 1, f, 2, f, 4, 0, f, 4), SR_ERR_ARG, "lda = 2");
    TEST_ASSERT_ERR(k->sgemm(0, 0, 2, 4, -3, 1, f, 3, f, 4, 0, f, 4), SR_ERR_ARG, "K = -3");
    k->free(d);
    k->free(NULL);
    /* An impossible allocation fails with NULL, and the table keeps working afterwards. */
    CU_ASSERT_PTR_NULL(k->alloc((size_t)1 << 60));
    d = k->alloc(16);
    CU_ASSERT_PTR_NOT_NULL(d);
    CU_ASSERT_EQUAL(k->upload(d, src, 16), SR_OK);
    k->free(d);
    free(src); free(back);
}

/* kernels/ops.h against the formulas evaluated in double: relative error within a few float
 * ulps (5e-6 of the magnitude), aliasing in place allowed. */
static void test_cpu_ops(void)
{
    enum { N = 3, D = 37 };
    float x[N * D], g[D], b[D], y[N * D], z[N * D];
    unsigned s = 99;
    for (int i = 0; i < N * D; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) / 16777216.0 * 8.0 - 4.0) + (i % D == 0 ? 50.0f : 0.0f);
    }
    for (int i = 0; i < D; i++) g[i] = 0.5f + (float)i / D, b[i] = (float)i / 10 - 1.0f;
    sr_layernorm(x, N, D, g, b, 1e-5f, y);
    sr_rmsnorm(x, N, D, g, 1e-6f, z);
    double worst_ln = 0, worst_rms = 0;
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0, ss = 0;
        for (int i = 0; i < D; i++) m += x[r * D + i], ss += (double)x[r * D + i] * x[r * D + i];
        m /= D;
        for (int i = 0; i < D; i++) v += (x[r * D + i] - m) * (x[r * D + i] - m);
        v /= D;
        for (int i = 0; i < D; i++) {
            double ln = (x[r * D + i] - m) / sqrt(v + 1e-5) * g[i] + b[i];
            double rms = g[i] * x[r * D + i] / sqrt(ss / D + 1e-6);
            worst_ln = fmax(worst_ln, fabs(y[r * D + i] - ln) / (1 + fabs(ln)));
            worst_rms = fmax(worst_rms, fabs(z[r * D + i] - rms) / (1 + fabs(rms)));
        }
    }
    CU_ASSERT(worst_ln < 5e-6);
    CU_ASSERT(worst_rms < 5e-6);
    memcpy(z, x, sizeof z);
    sr_layernorm(z, N, D, g, b, 1e-5f, z); /* in place */
    CU_ASSERT_EQUAL(memcmp(z, y, sizeof z), 0);
}

/* GELU, SiLU and softmax of one path (AVX2 or portable, as selected) against double formulas:
 * GELU / SiLU absolute error <= 5e-7 (1 + |x|), softmax relative error <= 4 ulp (5e-7) per
 * entry, masked tail exactly 0, rows summing to 1 within 1e-6. Inputs cover the exp range
 * edges (-100 .. 100), exact zeros, every tail length 0..8, and -inf (masked scores). */
static void check_activations(const char *path)
{
    enum { N = 4099 };
    static float x[N], y[N], z[N];
    unsigned s = 7;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        double u = (s >> 8) / 16777216.0;
        x[i] = i % 97 == 0 ? 0.0f : (float)(i % 5 == 0 ? u * 200 - 100 : u * 16 - 8);
    }
    for (int len = 4091; len <= N; len++) { /* tails of 3..8 and 0 lanes past the last 8 */
        memcpy(y, x, sizeof y);
        memcpy(z, x, sizeof z);
        sr_gelu_erf(y, (size_t)len);
        sr_silu(z, (size_t)len);
        double worst = 0;
        for (int i = 0; i < len; i++) {
            double t = x[i], ge = 0.5 * t * (1 + erf(t / sqrt(2.0))), si = t / (1 + exp(-t));
            worst = fmax(worst, fmax(fabs(y[i] - ge), fabs(z[i] - si)) / (1 + fabs(t)));
        }
        if (!(worst <= 5e-7)) printf("\n  %s: activation error %.3g at length %d\n", path, worst, len);
        CU_ASSERT(worst <= 5e-7);
        for (int i = len; i < N; i++) CU_ASSERT_EQUAL(y[i], x[i]); /* nothing past n written */
    }
    /* softmax: row widths 1..40 and 1500 (a Whisper window), limits below the width */
    static float row[1600], ref[1600];
    for (int n = 1; n <= 1500; n = n < 40 ? n + 1 : 1500) {
        for (int lim = n; lim >= (n > 8 ? n - 9 : 0); lim--) {
            for (int j = 0; j < n; j++) row[j] = x[(j * 31 + n) % N] * (n % 3 ? 1.0f : 10.0f);
            if (lim > 2) row[1] = -INFINITY;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < lim; j++) mx = fmax(mx, row[j]);
            /* x - max is rounded to float first, as every float softmax (torch's included) does */
            for (int j = 0; j < lim; j++) sum += exp((double)(row[j] - (float)mx));
            for (int j = 0; j < lim; j++) ref[j] = (float)(exp((double)(row[j] - (float)mx)) / sum);
            sr_softmax(row, lim, n);
            double worst = 0, total = 0;
            for (int j = 0; j < lim; j++) {
                worst = fmax(worst, fabs(row[j] - ref[j]) / fmax(ref[j], 1e-30));
                total += row[j];
            }
            int tail_zero = 1;
            for (int j = lim; j < n; j++) tail_zero &= row[j] == 0.0f;
            if (!(worst <= 5e-7) || !tail_zero)
                printf("\n  %s: softmax n %d lim %d: rel error %.3g\n", path, n, lim, worst);
            CU_ASSERT(worst <= 5e-7);
            CU_ASSERT(tail_zero);
            if (lim > 0) CU_ASSERT(fabs(total - 1.0) <= 1e-6);
            if (n == 1500) break;
        }
        if (n == 1500) break;
    }
    /* NaN propagates through every function */
    float nan3[3] = {NAN, 1.0f, NAN};
    sr_gelu_erf(nan3, 3);
    CU_ASSERT(isnan(nan3[0]) && isnan(nan3[2]) && !isnan(nan3[1]));
    float nan1[1] = {NAN};
    sr_silu(nan1, 1);
    CU_ASSERT(isnan(nan1[0]));
}

static void test_cpu_activations(void)
{
    if (!sr_ops_simd()) printf("\n  (no AVX2 + FMA on this CPU: the portable path only)\n");
    check_activations(sr_ops_simd() ? "avx2" : "portable");
    sr_ops_force_portable(1);
    CU_ASSERT_EQUAL(sr_ops_simd(), 0);
    check_activations("portable");
    sr_ops_force_portable(0);
}

/* ---- cpu-guard: the stand-in for a device (kernels/cpu/guard.c) ----------------------- */

/* The guard tests' product: w [N, K] and x [M, K] (fixed patterns), the weight made on the CPU
 * (Wc) and on the guard (Wg), x uploaded to dx, dy room for y [M, N]. */
enum { GM = 3, GN = 40, GK = 33 };
typedef struct {
    float w[GN * GK], x[GM * GK];
    sr_kweight *Wc, *Wg;
    float *dx, *dy;
} guard_case;

static void guard_case_make(const sr_kernels *c, const sr_kernels *g, guard_case *t)
{
    for (int i = 0; i < GN * GK; i++) t->w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < GM * GK; i++) t->x[i] = (float)((i * 11) % 29) / 29.0f - 0.5f;
    CU_ASSERT_EQUAL_FATAL(c->weight_create(t->w, SR_F32, GN, GK, NULL, SR_KMUL_EXACT, &t->Wc), SR_OK);
    CU_ASSERT_EQUAL_FATAL(g->weight_create(t->w, SR_F32, GN, GK, NULL, SR_KMUL_EXACT, &t->Wg), SR_OK);
    t->dx = g->alloc(sizeof t->x);
    t->dy = g->alloc((size_t)GM * GN * sizeof(float));
    CU_ASSERT_FATAL(t->dx && t->dy);
    CU_ASSERT_EQUAL(g->upload(t->dx, t->x, sizeof t->x), SR_OK);
}

/* Its ops give the CPU's bits over its own memory, and refuse host memory by name. */
static void test_guard_ops(void)
{
    const sr_kernels *g = NULL, *c = sr_kernels_cpu();
    CU_ASSERT_EQUAL_FATAL(sr_kernels_select("cpu-guard", &g), SR_OK);
    CU_ASSERT_STRING_EQUAL(g->name, "cpu-guard");
    CU_ASSERT_EQUAL(sr_kernels_require(g, "guard"), SR_OK);
    enum { M = GM, N = GN, K = GK };
    static guard_case t;
    guard_case_make(c, g, &t);
    const float *x = t.x;
    float yc[M * N], yg[M * N], *dx = t.dx, *dy = t.dy;
    sr_kweight *Wc = t.Wc, *Wg = t.Wg;
    CU_ASSERT_EQUAL(c->gemm(M, x, K, Wc, NULL, SR_ACT_GELU, 1.0f, 0.0f, yc, N), SR_OK);
    CU_ASSERT_EQUAL(g->gemm(M, dx, K, Wg, NULL, SR_ACT_GELU, 1.0f, 0.0f, dy, N), SR_OK);
    CU_ASSERT_EQUAL(g->softmax(M, N, dy, N), SR_OK);
    CU_ASSERT_EQUAL(c->softmax(M, N, yc, N), SR_OK);
    CU_ASSERT_EQUAL(g->download(yg, dy, sizeof yg), SR_OK);
    CU_ASSERT_EQUAL(memcmp(yc, yg, sizeof yc), 0);
    /* transpose [M, N] -> [N, M] on both */
    float tc[M * N], tg[M * N];
    CU_ASSERT_EQUAL(c->transpose(1, M, N, yc, N, tc, M), SR_OK);
    float *dt = g->alloc(sizeof tg);
    CU_ASSERT_FATAL(dt != NULL);
    CU_ASSERT_EQUAL(g->transpose(1, M, N, dy, N, dt, M), SR_OK);
    CU_ASSERT_EQUAL(g->download(tg, dt, sizeof tg), SR_OK);
    CU_ASSERT_EQUAL(memcmp(tc, tg, sizeof tc), 0);
    TEST_ASSERT_ERR(g->transpose(1, M, N, yg, N, dt, M), SR_ERR_ARG, "cpu-guard transpose: x");
    /* copy_rows from table rows; a host row refused */
    const float *rows_g[2] = {dy + N, dy}, *rows_h[2] = {dy, yg};
    float rc[2 * N];
    CU_ASSERT_EQUAL(g->copy_rows(2, N, rows_g, dt, N), SR_OK);
    CU_ASSERT_EQUAL(g->download(rc, dt, sizeof rc), SR_OK);
    CU_ASSERT_EQUAL(memcmp(rc, yc + N, N * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(rc + N, yc, N * sizeof(float)), 0);
    TEST_ASSERT_ERR(g->copy_rows(2, N, rows_h, dt, N), SR_ERR_ARG, "cpu-guard copy_rows: src[i]");
    g->free(dt);
    /* host memory handed to an op, an upload or a download: refused, naming it */
    TEST_ASSERT_ERR(g->gemm(M, x, K, Wg, NULL, SR_ACT_NONE, 1.0f, 0.0f, dy, N), SR_ERR_ARG,
                    "cpu-guard gemm: x");
    TEST_ASSERT_ERR(g->softmax(M, N, yg, N), SR_ERR_ARG, "cpu-guard softmax: x");
    TEST_ASSERT_ERR(g->upload(yg, x, sizeof t.x), SR_ERR_ARG, "cpu-guard upload: dst");
    TEST_ASSERT_ERR(g->download(yg, x, sizeof t.x), SR_ERR_ARG, "cpu-guard download: src");
    sr_kpool *P = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_F16, 2, 2, 4, 8, &P), SR_OK);
    CU_ASSERT_EQUAL(sr_kpool_clear(g, P, 1), SR_OK);
    sr_kpool_free(g, P);
    c->weight_free(Wc);
    g->weight_free(Wg);
    g->weight_free(NULL);
    g->free(dx);
    g->free(dy);
    g->free(NULL);
}

/* Recording (graph_begin .. graph_end) on cpu-guard holds the contract the CUDA table's graphs
 * need: only ops in between (the rest refused by name), one recording per thread, the record
 * given back to graph_end, run = 0 dropping quietly; the recorded ops' results as called. The
 * CPU table has no recording: the helpers do nothing there. */
static void test_guard_recording(void)
{
    const sr_kernels *g = NULL, *c = sr_kernels_cpu();
    CU_ASSERT_EQUAL_FATAL(sr_kernels_select("cpu-guard", &g), SR_OK);
    CU_ASSERT_FATAL(g->graph_begin && g->graph_end && g->graph_free);
    CU_ASSERT_PTR_NULL(c->graph_begin);
    sr_kgraph *none = NULL;
    CU_ASSERT_EQUAL(sr_kgraph_begin(c, &none), SR_OK);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT_EQUAL(sr_kgraph_end(c, none, SR_ERR_ARG), SR_ERR_ARG); /* the ops' status back */
    sr_kgraph_free(c, none);

    enum { M = GM, N = GN, K = GK };
    static guard_case t;
    guard_case_make(c, g, &t);
    const float *x = t.x, *w = t.w;
    float yc[M * N], yg[M * N], *dx = t.dx, *dy = t.dy;
    sr_kweight *Wc = t.Wc, *Wg = t.Wg, *W2 = (sr_kweight *)&Wc;
    CU_ASSERT_EQUAL(c->gemm(M, x, K, Wc, NULL, SR_ACT_NONE, 1.0f, 0.0f, yc, N), SR_OK);
    CU_ASSERT_EQUAL(c->softmax(M, N, yc, N), SR_OK);

    sr_kgraph *rec = NULL, *other = NULL;
    unsigned long long runs0 = sr_kernels_cpu_guard_recordings();
    CU_ASSERT_EQUAL_FATAL(sr_kgraph_begin(g, &rec), SR_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
    sr_status st = g->gemm(M, dx, K, Wg, NULL, SR_ACT_NONE, 1.0f, 0.0f, dy, N);
    if (!st) st = g->softmax(M, N, dy, N);
    CU_ASSERT_EQUAL(st, SR_OK);
    /* everything but the ops refused while recording, naming the call */
    TEST_ASSERT_ERR(g->upload(dx, x, sizeof t.x), SR_ERR_ARG, "cpu-guard upload: called while recording");
    TEST_ASSERT_ERR(g->download(yg, dy, sizeof yg), SR_ERR_ARG, "cpu-guard download: called while recording");
    TEST_ASSERT_ERR(g->sync(), SR_ERR_ARG, "cpu-guard sync: called while recording");
    TEST_ASSERT_ERR(g->sgemm(0, 1, M, N, K, 1.0f, dx, K, dx, K, 0.0f, dy, N), SR_ERR_ARG,
                    "cpu-guard sgemm: called while recording");
    TEST_ASSERT_ERR(g->weight_create(w, SR_F32, N, K, NULL, SR_KMUL_EXACT, &W2), SR_ERR_ARG,
                    "cpu-guard weight_create: called while recording");
    CU_ASSERT_PTR_NULL(W2);
    TEST_ASSERT_ERR(g->graph_begin(&other), SR_ERR_ARG, "cpu-guard graph_begin: this thread is recording already");
    CU_ASSERT_EQUAL(sr_kgraph_end(g, rec, st), SR_OK);
    CU_ASSERT_EQUAL(sr_kernels_cpu_guard_recordings(), runs0 + 1);
    CU_ASSERT_EQUAL(g->download(yg, dy, sizeof yg), SR_OK);
    CU_ASSERT_EQUAL(memcmp(yc, yg, sizeof yc), 0);

    /* the same record again; an alloc inside fails graph_end by name (alloc has no status) */
    CU_ASSERT_EQUAL_FATAL(sr_kgraph_begin(g, &rec), SR_OK);
    CU_ASSERT_PTR_NULL(g->alloc(16));
    g->free(dx); /* refused too: dx stays */
    TEST_ASSERT_ERR(sr_kgraph_end(g, rec, SR_OK), SR_ERR_ARG, "cpu-guard alloc: called while recording");
    CU_ASSERT_EQUAL(g->upload(dx, x, sizeof t.x), SR_OK); /* recording over, dx still the table's */
    /* a failed op drops the recording and keeps the op's status and message */
    CU_ASSERT_EQUAL_FATAL(sr_kgraph_begin(g, &rec), SR_OK);
    st = g->softmax(M, N, yg, N);
    TEST_ASSERT_ERR(sr_kgraph_end(g, rec, st), SR_ERR_ARG, "cpu-guard softmax: x");
    CU_ASSERT_EQUAL(sr_kernels_cpu_guard_recordings(), runs0 + 1);
    /* graph_end with another record, or without graph_begin */
    CU_ASSERT_EQUAL_FATAL(sr_kgraph_begin(g, &other), SR_OK);
    TEST_ASSERT_ERR(g->graph_end(rec, 1), SR_ERR_ARG, "cpu-guard graph_end: g is not the record");
    TEST_ASSERT_ERR(g->graph_end(rec, 1), SR_ERR_ARG, "cpu-guard graph_end: no graph_begin");
    TEST_ASSERT_ERR(g->graph_begin(NULL), SR_ERR_ARG, "cpu-guard graph_begin: g is NULL");
    CU_ASSERT_EQUAL(sr_kernels_cpu_guard_recordings(), runs0 + 1);
    g->graph_free(rec);
    g->graph_free(other);
    g->graph_free(NULL);
    c->weight_free(Wc);
    g->weight_free(Wg);
    g->free(dx);
    g->free(dy);
}

/* A host read of its memory faults (in a child process, killed by SIGSEGV; exiting 0 would
 * mean the read went through); the same read inside an op is fine. */
static void test_guard_faults(void)
{
    const sr_kernels *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_select("cpu-guard", &g), SR_OK);
    float *d = g->alloc(64 * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    g->zero(d, 64 * sizeof(float));
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        /* die by the signal itself, quietly (no sanitizer report of this intended fault) */
        signal(SIGSEGV, SIG_DFL);
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        volatile float v = ((volatile float *)d)[3]; /* must fault */
        (void)v;
        _exit(0);
    }
    int wst = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
    CU_ASSERT(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGSEGV);
    float back[64];
    CU_ASSERT_EQUAL(g->download(back, d, sizeof back), SR_OK);
    CU_ASSERT_EQUAL(back[3], 0.0f);
    g->free(d);
}

/* A device-ready backend (test_linear) runs on cpu-guard with the CPU's tokens and timeline
 * (no host access to table memory, or the test would crash). */
static void test_guard_model(void)
{
    sr_options o;
    sr_options_init(&o);
    o.device = "cpu-guard";
    sr_model *mg = NULL, *mc = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_model_load(test_fixture("test_linear.h5"), &o, &mg), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_model_load(test_fixture("test_linear.h5"), NULL, &mc), SR_OK);
    enum { N = 16000 * 3 + 1234 };
    float *a = malloc(N * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    for (int i = 0; i < N; i++) a[i] = 0.3f * sinf(0.001f * (float)i * (float)(1 + i / 4000));
    sr_stream *sg = NULL, *sc = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(mg, NULL, &sg), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_stream_open(mc, NULL, &sc), SR_OK);
    for (size_t at = 0; at < N; at += 7000) {
        size_t n = N - at < 7000 ? N - at : 7000;
        CU_ASSERT_EQUAL(sr_stream_feed(sg, a + at, n), SR_OK);
        CU_ASSERT_EQUAL(sr_stream_feed(sc, a + at, n), SR_OK);
    }
    CU_ASSERT_EQUAL(sr_stream_finish(sg), SR_OK);
    CU_ASSERT_EQUAL(sr_stream_finish(sc), SR_OK);
    const sr_hypothesis *hg = sr_stream_hypothesis(sg), *hc = sr_stream_hypothesis(sc);
    CU_ASSERT_EQUAL(hg->n_tokens, hc->n_tokens);
    CU_ASSERT(hc->n_tokens > 0);
    CU_ASSERT(hg->n_tokens == hc->n_tokens &&
              !memcmp(hg->tokens, hc->tokens, (size_t)hc->n_tokens * sizeof(int32_t)));
    CU_ASSERT_EQUAL(sr_stream_timeline(sg)->n, sr_stream_timeline(sc)->n);
    sr_stream_close(sg);
    sr_stream_close(sc);
    sr_model_free(mg);
    sr_model_free(mc);
    free(a);
}

/* The three backends (FastConformer RNN-T and TDT, Voxtral, Whisper: all device_ready) run
 * their per-chunk paths on cpu-guard, i.e. through the table only (a host access to table
 * memory would crash this test), with the CPU's tokens and timeline length: streaming,
 * re-encoding, offline, beam searches, 16-bit caches. */
static void test_guard_backends(void) { test_backends_match_cpu("cpu-guard"); }

/* SRKIT_PROFILE (kernels/profile.c): the profiling table forwards to its base (same bits, same
 * name), counts every call of the timed ops, resets; a second base table is refused; the
 * variable's bad values are refused by sr_kernels_select; a model loaded through it streams
 * the plain CPU's tokens. */
static void test_profile(void)
{
    const sr_kernels *c = sr_kernels_cpu(), *p = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_profiled(c, 0, &p), SR_OK);
    CU_ASSERT_STRING_EQUAL(p->name, "cpu");
    CU_ASSERT_EQUAL(sr_kernels_require(p, "profile"), SR_OK);
    const sr_kernels *again = NULL;
    CU_ASSERT_EQUAL(sr_kernels_profiled(c, 0, &again), SR_OK);
    CU_ASSERT_PTR_EQUAL(again, p);
    const sr_kernels *gd = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_select("cpu-guard", &gd), SR_OK);
    TEST_ASSERT_ERR(sr_kernels_profiled(gd, 0, &again), SR_ERR_UNSUPPORTED, "profiled already");
    enum { M = 3, N = 20, K = 17 };
    float w[N * K], x[M * K], y1[M * N], y2[M * N];
    for (int i = 0; i < N * K; i++) w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < M * K; i++) x[i] = (float)((i * 11) % 29) / 29.0f - 0.5f;
    sr_kweight *W = NULL;
    CU_ASSERT_EQUAL_FATAL(p->weight_create(w, SR_F32, N, K, NULL, SR_KMUL_EXACT, &W), SR_OK);
    sr_kernels_profile_reset();
    for (int r = 0; r < 3; r++) CU_ASSERT_EQUAL(p->gemm(M, x, K, W, NULL, SR_ACT_NONE, 1.0f, 0.0f, y1, N), SR_OK);
    CU_ASSERT_EQUAL(p->softmax(M, N, y1, N), SR_OK);
    CU_ASSERT_EQUAL(c->gemm(M, x, K, W, NULL, SR_ACT_NONE, 1.0f, 0.0f, y2, N), SR_OK);
    CU_ASSERT_EQUAL(c->softmax(M, N, y2, N), SR_OK);
    CU_ASSERT_EQUAL(memcmp(y1, y2, sizeof y1), 0);
    float back[M * N];
    CU_ASSERT_EQUAL(p->download(back, y1, sizeof back), SR_OK);
    CU_ASSERT_EQUAL(p->download(back, y1, 2 * sizeof(float)), SR_OK);
    sr_kprof_entry e[8];
    int n = sr_kernels_profile_read(e, 8);
    CU_ASSERT_EQUAL(n, 3);
    for (int i = 0; i < n && i < 8; i++) {
        int dl = !strcmp(e[i].op, "download");
        CU_ASSERT_EQUAL(e[i].calls, dl ? 2u : strcmp(e[i].op, "gemm") ? 1u : 3u);
        CU_ASSERT_EQUAL(e[i].bytes, dl ? sizeof back + 2 * sizeof(float) : 0u);
        CU_ASSERT(e[i].seconds >= 0);
    }
    sr_kernels_profile_reset();
    CU_ASSERT_EQUAL(sr_kernels_profile_read(NULL, 0), 0);
    p->weight_free(W);
    /* through the environment */
    const sr_kernels *k = NULL;
    setenv("SRKIT_PROFILE", "yes", 1);
    TEST_ASSERT_ERR(sr_kernels_select("cpu", &k), SR_ERR_ARG, "SRKIT_PROFILE=yes");
    setenv("SRKIT_PROFILE", "1", 1);
    CU_ASSERT_EQUAL(sr_kernels_select("cpu", &k), SR_OK);
    CU_ASSERT_PTR_EQUAL(k, p);
    sr_model *m = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_model_load(test_fixture("fastconformer/rand.h5"), NULL, &m), SR_OK);
    unsetenv("SRKIT_PROFILE");
    sr_model *m0 = test_load_model("fastconformer/rand.h5");
    enum { NA = 16000, CAP = 512 };
    float *a = malloc(NA * sizeof(float));
    int32_t t1[CAP], t0[CAP];
    CU_ASSERT_FATAL(a != NULL);
    for (int i = 0; i < NA; i++) a[i] = 0.3f * sinf(0.003f * (float)i * (float)(1 + i / 4000));
    size_t e1 = 0, e0 = 0;
    sr_kernels_profile_reset();
    int n1 = test_stream_tokens(m, NULL, a, NA, t1, CAP, &e1);
    CU_ASSERT(sr_kernels_profile_read(NULL, 0) > 5); /* the stream's ops were counted */
    int n0 = test_stream_tokens(m0, NULL, a, NA, t0, CAP, &e0);
    CU_ASSERT(n1 == n0 && e1 == e0 && !memcmp(t1, t0, (size_t)n0 * sizeof *t0));
    free(a);
    sr_model_free(m);
    sr_model_free(m0);
}

/* SRKIT_PROFILE=device (kernels/profile.c) on the CPU table, whose marks are the host clock:
 * every op that queues work is timed between two marks (gemm, softmax, zero), copies are not;
 * the gemm calls are kept by weight shape and row-count class with their rows, calls, weight
 * bytes and device time, the attn calls by head layout, row class and key class with their
 * rows, keys and K / V bytes (a refused call not counted); more calls than the pending queue holds are all read; the mode is the
 * last call's (back to host time: nothing more is timed); a table without marks is refused
 * for device mode; SRKIT_PROFILE=device selects it. */
static void test_profile_device(void)
{
    const sr_kernels *c = sr_kernels_cpu(), *p = NULL, *gd = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_profiled(c, SR_KPROF_DEVICE, &p), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_kernels_select("cpu-guard", &gd), SR_OK);
    const sr_kernels *again = NULL;
    TEST_ASSERT_ERR(sr_kernels_profiled(gd, SR_KPROF_DEVICE, &again), SR_ERR_UNSUPPORTED,
                    "no device time marks");
    TEST_ASSERT_ERR(sr_kernels_profiled(c, 3, &again), SR_ERR_ARG, "mode 3");
    enum { N = 20, K = 17, N2 = 9, K2 = 40 };
    float w[N * K], w2[N2 * K2], x[8 * K2], y[8 * N];
    for (int i = 0; i < N * K; i++) w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < N2 * K2; i++) w2[i] = (float)((i * 13) % 47) / 47.0f - 0.5f;
    for (int i = 0; i < 8 * K2; i++) x[i] = (float)((i * 11) % 29) / 29.0f - 0.5f;
    sr_kweight *W = NULL, *W2 = NULL;
    CU_ASSERT_EQUAL_FATAL(p->weight_create(w, SR_F32, N, K, NULL, SR_KMUL_EXACT, &W), SR_OK);
    CU_ASSERT_EQUAL_FATAL(p->weight_create(w2, SR_F32, N2, K2, NULL, SR_KMUL_EXACT, &W2), SR_OK);
    sr_kernels_profile_reset();
    for (int r = 0; r < 2; r++) CU_ASSERT_EQUAL(p->gemm(1, x, K, W, NULL, SR_ACT_NONE, 1.0f, 0.0f, y, N), SR_OK);
    for (int r = 0; r < 3; r++) CU_ASSERT_EQUAL(p->gemm(3 + r, x, K, W, NULL, SR_ACT_NONE, 1.0f, 0.0f, y, N), SR_OK);
    CU_ASSERT_EQUAL(p->gemm(8, x, K2, W2, NULL, SR_ACT_NONE, 1.0f, 0.0f, y, N2), SR_OK);
    CU_ASSERT_EQUAL(p->softmax(8, N2, y, N2), SR_OK);
    enum { ZEROS = 5000 }; /* more than the pending queue's 4,096 pairs */
    for (int r = 0; r < ZEROS; r++) p->zero(y, sizeof(float));
    float back[4];
    CU_ASSERT_EQUAL(p->download(back, y, sizeof back), SR_OK);
    sr_kprof_entry e[8];
    int n = sr_kernels_profile_read(e, 8);
    CU_ASSERT_EQUAL(n, 4);
    for (int i = 0; i < n && i < 8; i++) {
        const int dl = !strcmp(e[i].op, "download"), gm = !strcmp(e[i].op, "gemm"),
                  z = !strcmp(e[i].op, "zero");
        CU_ASSERT_EQUAL(e[i].calls, dl || !(gm || z) ? 1u : gm ? 6u : (uint64_t)ZEROS);
        CU_ASSERT_EQUAL(e[i].timed, dl ? 0u : e[i].calls);
        if (dl) CU_ASSERT_EQUAL(e[i].device_seconds, 0.0);
        /* the marks bracket the host's timing: the clock's time between them is no shorter */
        if (!dl) CU_ASSERT(e[i].device_seconds > 0 && e[i].device_seconds >= e[i].seconds);
    }
    sr_kprof_gemm g[4];
    CU_ASSERT_EQUAL_FATAL(sr_kernels_profile_gemm_read(g, 4), 4);
    const struct { int n, k, lo, hi; uint64_t calls, rows; size_t bytes; } want[3] = {
        {N, K, 1, 1, 2, 2, W->bytes}, {N, K, 2, 4, 2, 7, W->bytes}, {N, K, 5, 16, 1, 5, W->bytes}};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(g[i].n == want[i].n && g[i].k == want[i].k && g[i].dtype == SR_F32 &&
                  g[i].mul == SR_KMUL_EXACT);
        CU_ASSERT(g[i].m_lo == want[i].lo && g[i].m_hi == want[i].hi);
        CU_ASSERT(g[i].calls == want[i].calls && g[i].rows == want[i].rows && g[i].timed == g[i].calls);
        CU_ASSERT_EQUAL(g[i].weight_bytes, want[i].bytes);
        CU_ASSERT(g[i].device_seconds > 0 && g[i].seconds > 0);
    }
    /* W2's call: the 5-16 class of another shape */
    CU_ASSERT(g[3].n == N2 && g[3].k == K2 && g[3].m_lo == 5 && g[3].calls == 1 && g[3].rows == 8);
    /* attn by head layout and row class: 3 rows of 2 sequences over an f32 K and a bf16 V pool
     * (GQA 2 / 1 heads of 4): 7 (row, key) pairs naming 7 x 4 x (4 + 2) bytes; a refused call
     * (no pools) is not counted */
    sr_kpool *KP = NULL, *VP = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(p, SR_F32, 1, 2, 256, 4, &KP), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(p, SR_BF16, 1, 2, 256, 4, &VP), SR_OK);
    const int row0[3] = {0, 1, 3}, slot[2] = {0, 1};
    const int64_t pos[2] = {0, 0}, lo[3] = {0, 0, 1}, hi[3] = {3, 2, 3};
    const sr_kbatch kb = {.n_seq = 2, .row0 = row0, .slot = slot, .pos = pos};
    const sr_kattn ka = {.n_head = 2, .n_kv_head = 1, .head_dim = 4, .scale = 0.5f, .lo = lo, .hi = hi};
    float qa[3 * 8], oa[3 * 8];
    for (int i = 0; i < 3 * 8; i++) qa[i] = (float)i / 24.0f;
    sr_kernels_profile_reset();
    CU_ASSERT_EQUAL(p->attn(&ka, &kb, qa, 8, KP, VP, 0, oa, 8), SR_OK);
    CU_ASSERT_NOT_EQUAL(p->attn(&ka, &kb, qa, 8, NULL, VP, 0, oa, 8), SR_OK);
    /* one row over 200 keys: another row class and key class */
    const int row1[2] = {0, 1};
    const int64_t lo1[1] = {0}, hi1[1] = {200};
    const sr_kbatch kb1 = {.n_seq = 1, .row0 = row1, .slot = slot, .pos = pos};
    const sr_kattn ka1 = {.n_head = 2, .n_kv_head = 1, .head_dim = 4, .scale = 0.5f, .lo = lo1, .hi = hi1};
    CU_ASSERT_EQUAL(p->attn(&ka1, &kb1, qa, 8, KP, VP, 0, oa, 8), SR_OK);
    sr_kprof_attn at[2];
    CU_ASSERT_EQUAL_FATAL(sr_kernels_profile_attn_read(at, 2), 2);
    CU_ASSERT(at[1].m_lo == 1 && at[1].k_lo == 129 && at[1].k_hi == 512 && at[1].keys == 200 && at[1].rows == 1);
    CU_ASSERT(at[0].n_head == 2 && at[0].n_kv_head == 1 && at[0].head_dim == 4 && !at[0].rel);
    CU_ASSERT(at[0].k_dtype == SR_F32 && at[0].v_dtype == SR_BF16 && at[0].m_lo == 2 && at[0].m_hi == 4);
    CU_ASSERT(at[0].k_lo == 1 && at[0].k_hi == 128); /* 7 keys over 3 rows: 3 a row, rounded up */
    CU_ASSERT(at[0].calls == 1 && at[0].rows == 3 && at[0].keys == 7 && at[0].timed == 1);
    CU_ASSERT_DOUBLE_EQUAL(at[0].kv_bytes, 7.0 * 4 * 6, 0.0);
    CU_ASSERT(at[0].device_seconds > 0 && at[0].seconds > 0);
    sr_kpool_free(p, KP);
    sr_kpool_free(p, VP);
    /* back to host time: counted, not timed */
    CU_ASSERT_EQUAL(sr_kernels_profiled(c, SR_KPROF_HOST, &again), SR_OK);
    CU_ASSERT_PTR_EQUAL(again, p);
    sr_kernels_profile_reset();
    CU_ASSERT_EQUAL(sr_kernels_profile_gemm_read(NULL, 0), 0);
    CU_ASSERT_EQUAL(sr_kernels_profile_attn_read(NULL, 0), 0);
    CU_ASSERT_EQUAL(p->gemm(1, x, K, W, NULL, SR_ACT_NONE, 1.0f, 0.0f, y, N), SR_OK);
    CU_ASSERT_EQUAL(sr_kernels_profile_read(e, 8), 1);
    CU_ASSERT(e[0].calls == 1 && e[0].timed == 0 && e[0].device_seconds == 0.0);
    CU_ASSERT(sr_kernels_profile_gemm_read(g, 4) == 1 && g[0].calls == 1 && g[0].timed == 0);
    /* through the environment */
    const sr_kernels *k = NULL;
    setenv("SRKIT_PROFILE", "device", 1);
    CU_ASSERT_EQUAL(sr_kernels_select("cpu", &k), SR_OK);
    CU_ASSERT_PTR_EQUAL(k, p);
    sr_kernels_profile_reset();
    CU_ASSERT_EQUAL(p->gemm(1, x, K, W, NULL, SR_ACT_NONE, 1.0f, 0.0f, y, N), SR_OK);
    CU_ASSERT(sr_kernels_profile_read(e, 8) == 1 && e[0].timed == 1);
    setenv("SRKIT_PROFILE", "1", 1);
    CU_ASSERT_EQUAL(sr_kernels_select("cpu", &k), SR_OK);
    unsetenv("SRKIT_PROFILE");
    sr_kernels_profile_reset();
    p->weight_free(W);
    p->weight_free(W2);
}

/* A table that records (its graph_begin / graph_end counted) under the profiling table: host
 * mode forwards both (and counts them), sync and device record nothing (the base is not asked,
 * the ops run as called); an end follows its begin's mode (a recording begun under host time
 * ends in the base after a switch to device; one begun under device does not reach the base
 * after a switch back); a refused begin is not ended. */
static int rec_begun, rec_ended;
static sr_status rec_fail;
static sr_status rec_begin(sr_kgraph **g)
{
    (void)g;
    if (rec_fail) return rec_fail;
    rec_begun++;
    return SR_OK;
}
static sr_status rec_end(sr_kgraph *g, int run)
{
    (void)g;
    (void)run;
    rec_ended++;
    return SR_OK;
}
static void test_profile_recording(void)
{
    static sr_kernels t;
    t = *sr_kernels_cpu();
    t.name = "cpu-recording";
    t.graph_begin = rec_begin;
    t.graph_end = rec_end;
    sr_kernels_profile_unbind();
    const sr_kernels *p = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_profiled(&t, SR_KPROF_HOST, &p), SR_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->graph_begin);
    sr_kgraph *g = NULL;
    float y[4] = {1, 2, 3, 4};
    rec_begun = rec_ended = 0;
    rec_fail = SR_OK;
    CU_ASSERT_EQUAL(sr_kgraph_begin(p, &g), SR_OK);
    CU_ASSERT_EQUAL(p->scale(1, 4, 2.0f, y, 4), SR_OK);
    CU_ASSERT_EQUAL(sr_kgraph_end(p, g, SR_OK), SR_OK);
    CU_ASSERT(rec_begun == 1 && rec_ended == 1);
    for (int m = SR_KPROF_SYNC; m <= SR_KPROF_DEVICE; m++) { /* nothing recorded */
        CU_ASSERT_EQUAL(sr_kernels_profiled(&t, m, &p), SR_OK);
        CU_ASSERT_EQUAL(sr_kgraph_begin(p, &g), SR_OK);
        CU_ASSERT_EQUAL(p->scale(1, 4, 2.0f, y, 4), SR_OK);
        CU_ASSERT_EQUAL(sr_kgraph_end(p, g, SR_OK), SR_OK);
        CU_ASSERT(rec_begun == 1 && rec_ended == 1);
    }
    CU_ASSERT(y[0] == 8.0f && y[3] == 32.0f); /* each scale ran */
    /* begun under device, ended under host: the base saw neither */
    CU_ASSERT_EQUAL(sr_kgraph_begin(p, &g), SR_OK);
    CU_ASSERT_EQUAL(sr_kernels_profiled(&t, SR_KPROF_HOST, &p), SR_OK);
    CU_ASSERT_EQUAL(sr_kgraph_end(p, g, SR_OK), SR_OK);
    CU_ASSERT(rec_begun == 1 && rec_ended == 1);
    /* begun under host, ended under device: the base ends it */
    CU_ASSERT_EQUAL(sr_kgraph_begin(p, &g), SR_OK);
    CU_ASSERT_EQUAL(sr_kernels_profiled(&t, SR_KPROF_DEVICE, &p), SR_OK);
    CU_ASSERT_EQUAL(sr_kgraph_end(p, g, SR_OK), SR_OK);
    CU_ASSERT(rec_begun == 2 && rec_ended == 2);
    /* a refused begin: no end reaches the base */
    CU_ASSERT_EQUAL(sr_kernels_profiled(&t, SR_KPROF_HOST, &p), SR_OK);
    rec_fail = SR_ERR_DEVICE;
    CU_ASSERT_EQUAL(p->graph_begin(&g), SR_ERR_DEVICE);
    CU_ASSERT_EQUAL(p->graph_end(g, 0), SR_OK);
    CU_ASSERT(rec_begun == 2 && rec_ended == 2);
    rec_fail = SR_OK;
    sr_kprof_entry e[8];
    const int n = sr_kernels_profile_read(e, 8);
    int begins = 0;
    for (int i = 0; i < n && i < 8; i++)
        if (!strcmp(e[i].op, "graph_begin")) begins = (int)e[i].calls;
    CU_ASSERT_EQUAL(begins, 3); /* the forwarded ones, the refused one included */
    /* back to the CPU table for the tests after */
    sr_kernels_profile_unbind();
    CU_ASSERT_EQUAL(sr_kernels_profiled(sr_kernels_cpu(), SR_KPROF_HOST, &p), SR_OK);
}

/* sr_kpool_copy_rows: rows [0, r) of every layer of one slot into another pool's slot, bit for
 * bit (bf16 and f32, a destination with more slots and rows; on the guard table, so the copy
 * goes through the table), nothing else touched; mismatched pools, too many rows and slots
 * that do not start on 4-byte words refused. */
static void test_pool_copy(void)
{
    const sr_kernels *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_select("cpu-guard", &g), SR_OK);
    static const sr_dtype dts[] = {SR_BF16, SR_F32};
    for (int di = 0; di < 2; di++) {
        sr_kpool *src = NULL, *dst = NULL;
        const int L = 3, W = 6, R = 4;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, dts[di], L, 1, R, W, &src), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, dts[di], L, 5, 10, W, &dst), SR_OK);
        size_t es = sr_dtype_size(dts[di]);
        unsigned char *hs = malloc(src->bytes), *hd = malloc(dst->bytes), *before = malloc(dst->bytes);
        CU_ASSERT_FATAL(hs && hd && before);
        for (size_t i = 0; i < src->bytes; i++) hs[i] = (unsigned char)(i * 7 + 3);
        for (size_t i = 0; i < dst->bytes; i++) before[i] = (unsigned char)(i * 13 + 1);
        CU_ASSERT_EQUAL(g->upload(src->data, hs, src->bytes), SR_OK);
        CU_ASSERT_EQUAL(g->upload(dst->data, before, dst->bytes), SR_OK);
        CU_ASSERT_EQUAL(sr_kpool_copy_rows(g, dst, 3, src, 0, R), SR_OK);
        CU_ASSERT_EQUAL(g->download(hd, dst->data, dst->bytes), SR_OK);
        int bad = 0;
        for (int l = 0; l < L; l++)
            for (int s = 0; s < 5; s++)
                for (int r = 0; r < 10; r++) {
                    size_t at = sr_kpool_at(dst, l, s, r) * es;
                    const unsigned char *want = s == 3 && r < R ? hs + sr_kpool_at(src, l, 0, r) * es
                                                                : before + at;
                    bad += memcmp(hd + at, want, (size_t)W * es) != 0;
                }
        CU_ASSERT_EQUAL(bad, 0);
        TEST_ASSERT_ERR(sr_kpool_copy_rows(g, dst, 3, src, 0, R + 1), SR_ERR_ARG, "5 rows");
        TEST_ASSERT_ERR(sr_kpool_copy_rows(g, dst, 5, src, 0, R), SR_ERR_ARG, "slot out of range");
        free(hs); free(hd); free(before);
        sr_kpool_free(g, src);
        sr_kpool_free(g, dst);
    }
    sr_kpool *a = NULL, *b = NULL, *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_BF16, 1, 2, 3, 3, &a), SR_OK); /* 18-byte slots */
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_BF16, 1, 2, 4, 3, &b), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_F32, 1, 2, 4, 3, &c), SR_OK);
    TEST_ASSERT_ERR(sr_kpool_copy_rows(g, b, 1, a, 1, 2), SR_ERR_ARG, "4-byte words");
    TEST_ASSERT_ERR(sr_kpool_copy_rows(g, c, 1, b, 1, 2), SR_ERR_ARG, "f32");
    sr_kpool_free(g, a);
    sr_kpool_free(g, b);
    sr_kpool_free(g, c);
}

/* ---- the launch log of replayed recordings (kernels/launch_log.h) --------------------------- */

/* Stand-ins for kernels: only their addresses are kept. */
static void klog_k1(void) {}
static void klog_k2(void) {}

/* A launch of kernel f with arguments (int i, double d, a 40-byte struct of bytes b, char c):
 * sizes 4, 8, 40 and 1, as a kernel of those parameters takes them. */
static sr_status klog_put(sr_klog *g, void (*f)(void), unsigned gx, int i, double d, unsigned char b,
                          char c, int pdl)
{
    unsigned char big[40];
    memset(big, b, sizeof big);
    const void *args[] = {&i, &d, big, &c};
    const size_t sizes[] = {sizeof i, sizeof d, sizeof big, sizeof c};
    const unsigned grid[3] = {gx, 1, 1}, block[3] = {128, 1, 1};
    return sr_klog_add(g, (const void *)f, grid, block, 0, pdl, args, sizes, 4);
}

/* The log keeps each launch and a copy of its argument bytes (on 16-byte offsets), compares two
 * steps' shapes (kernels, order, PDL, argument sizes) and launches (grid, block, memory, bytes),
 * grows past its first arrays, is reused after clear, and refuses bad launches by field. */
static void test_launch_log(void)
{
    sr_klog a = {0}, b = {0};
    CU_ASSERT_EQUAL(a.n, 0);
    /* 300 launches: past the first capacity (64) of every array, so each grew */
    for (int i = 0; i < 300; i++) {
        CU_ASSERT_EQUAL_FATAL(klog_put(&a, i % 3 ? klog_k1 : klog_k2, 4, i, 0.5 * i, (unsigned char)i,
                                       (char)i, i % 2), SR_OK);
        CU_ASSERT_EQUAL_FATAL(klog_put(&b, i % 3 ? klog_k1 : klog_k2, 4, i, 0.5 * i, (unsigned char)i,
                                       (char)i, i % 2), SR_OK);
    }
    CU_ASSERT_EQUAL(a.n, 300);
    CU_ASSERT_EQUAL(a.nargs, 1200);
    CU_ASSERT(sr_klog_same_shape(&a, &b));
    int same = 1;
    for (size_t i = 0; i < a.n; i++) same &= sr_klog_same_launch(&a, &b, i);
    CU_ASSERT(same);
    /* the values as given, each on 16 bytes */
    void *v[4];
    sr_klog_args(&a, 299, v);
    for (int j = 0; j < 4; j++) CU_ASSERT(((uintptr_t)((unsigned char *)v[j] - a.blob) & 15u) == 0);
    CU_ASSERT_EQUAL(*(int *)v[0], 299);
    CU_ASSERT_EQUAL(*(double *)v[1], 149.5);
    CU_ASSERT_EQUAL(((unsigned char *)v[2])[39], (unsigned char)299);
    CU_ASSERT_EQUAL(*(char *)v[3], (char)299);
    CU_ASSERT(a.l[299].func == (const void *)klog_k1 && a.l[299].pdl == 1 && a.l[299].grid[0] == 4);

    /* one changed value: the same shape, only that launch differs */
    sr_klog c = {0};
    for (int i = 0; i < 300; i++)
        CU_ASSERT_EQUAL_FATAL(klog_put(&c, i % 3 ? klog_k1 : klog_k2, i == 7 ? 8 : 4, i,
                                       i == 150 ? 1.0 : 0.5 * i, (unsigned char)(i == 200 ? 1 : i),
                                       (char)i, i % 2), SR_OK);
    CU_ASSERT(sr_klog_same_shape(&a, &c));
    int differ = 0;
    for (size_t i = 0; i < a.n; i++) differ += !sr_klog_same_launch(&a, &c, i);
    CU_ASSERT_EQUAL(differ, 3); /* 7 (its grid), 150 (a double), 200 (the struct's bytes) */
    CU_ASSERT(!sr_klog_same_launch(&a, &c, 7) && !sr_klog_same_launch(&a, &c, 150) &&
              !sr_klog_same_launch(&a, &c, 200));

    /* another shape: a kernel swapped, PDL changed, one launch fewer, an argument's size */
    sr_klog_clear(&c);
    CU_ASSERT_EQUAL(c.n, 0);
    for (int i = 0; i < 300; i++)
        CU_ASSERT_EQUAL_FATAL(klog_put(&c, i == 5 ? klog_k2 : i % 3 ? klog_k1 : klog_k2, 4, i, 0.5 * i,
                                       (unsigned char)i, (char)i, i % 2), SR_OK);
    CU_ASSERT(!sr_klog_same_shape(&a, &c));
    sr_klog_clear(&c);
    for (int i = 0; i < 300; i++)
        CU_ASSERT_EQUAL_FATAL(klog_put(&c, i % 3 ? klog_k1 : klog_k2, 4, i, 0.5 * i, (unsigned char)i,
                                       (char)i, i == 9 ? 0 : i % 2), SR_OK);
    CU_ASSERT(!sr_klog_same_shape(&a, &c));
    sr_klog_clear(&c);
    for (int i = 0; i < 299; i++)
        CU_ASSERT_EQUAL_FATAL(klog_put(&c, i % 3 ? klog_k1 : klog_k2, 4, i, 0.5 * i, (unsigned char)i,
                                       (char)i, i % 2), SR_OK);
    CU_ASSERT(!sr_klog_same_shape(&a, &c));
    CU_ASSERT_EQUAL_FATAL(klog_put(&c, klog_k1, 4, 299, 149.5, (unsigned char)299, (char)299, 1), SR_OK);
    CU_ASSERT(sr_klog_same_shape(&a, &c)); /* the 300th back: the same again */
    {
        sr_klog d = {0};
        int i = 1;
        int h = 2; /* passed as 4 bytes, and as 2 (another size) */
        const void *args[] = {&i, &h};
        const size_t s4[] = {4, 4}, s2[] = {4, 2};
        const unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
        sr_klog e = {0};
        CU_ASSERT_EQUAL(sr_klog_add(&d, (const void *)klog_k1, grid, block, 0, 0, args, s4, 2), SR_OK);
        CU_ASSERT_EQUAL(sr_klog_add(&e, (const void *)klog_k1, grid, block, 0, 0, args, s2, 2), SR_OK);
        CU_ASSERT(!sr_klog_same_shape(&d, &e)); /* the second argument's size */
        /* shared memory and block differ launch by launch, not in the shape */
        sr_klog_clear(&e);
        const unsigned block2[3] = {64, 1, 1};
        CU_ASSERT_EQUAL(sr_klog_add(&e, (const void *)klog_k1, grid, block2, 0, 0, args, s4, 2), SR_OK);
        CU_ASSERT(sr_klog_same_shape(&d, &e) && !sr_klog_same_launch(&d, &e, 0));
        sr_klog_clear(&e);
        CU_ASSERT_EQUAL(sr_klog_add(&e, (const void *)klog_k1, grid, block, 256, 0, args, s4, 2), SR_OK);
        CU_ASSERT(sr_klog_same_shape(&d, &e) && !sr_klog_same_launch(&d, &e, 0));
        /* a kernel without arguments */
        CU_ASSERT_EQUAL(sr_klog_add(&e, (const void *)klog_k2, grid, block, 0, 0, NULL, NULL, 0), SR_OK);
        CU_ASSERT_EQUAL(e.n, 2);
        CU_ASSERT_EQUAL(e.l[1].nargs, 0);
        /* refusals, by field; the log as it was */
        const size_t n0 = e.n, b0 = e.bytes;
        const unsigned g0[3] = {1, 0, 1};
        const size_t s0[] = {4, 0};
        const void *an[] = {&i, NULL};
        TEST_ASSERT_ERR(sr_klog_add(&e, NULL, grid, block, 0, 0, args, s4, 2), SR_ERR_ARG, "func is NULL");
        TEST_ASSERT_ERR(sr_klog_add(&e, (const void *)klog_k1, g0, block, 0, 0, args, s4, 2), SR_ERR_ARG,
                        "grid extent 1 is 0");
        TEST_ASSERT_ERR(sr_klog_add(&e, (const void *)klog_k1, grid, g0, 0, 0, args, s4, 2), SR_ERR_ARG,
                        "block extent 1 is 0");
        TEST_ASSERT_ERR(sr_klog_add(&e, (const void *)klog_k1, grid, block, 0, 0, args, s4, -1), SR_ERR_ARG,
                        "-1 arguments");
        TEST_ASSERT_ERR(sr_klog_add(&e, (const void *)klog_k1, grid, block, 0, 0, NULL, s4, 2), SR_ERR_ARG,
                        "without their values or sizes");
        TEST_ASSERT_ERR(sr_klog_add(&e, (const void *)klog_k1, grid, block, 0, 0, args, s0, 2), SR_ERR_ARG,
                        "argument 1 is 0 bytes");
        TEST_ASSERT_ERR(sr_klog_add(&e, (const void *)klog_k1, grid, block, 0, 0, an, s4, 2), SR_ERR_ARG,
                        "argument 1 is NULL");
        CU_ASSERT(e.n == n0 && e.bytes == b0);
        sr_klog_free(&d);
        sr_klog_free(&e);
        CU_ASSERT(e.n == 0 && !e.l && !e.blob);
    }
    sr_klog_free(&a);
    sr_klog_free(&b);
    sr_klog_free(&c);
    sr_klog_free(NULL);
}

void test_register_kernels(void)
{
    TEST_SUITE("kernels_guard", {"ops_and_host_pointers", test_guard_ops},
               {"recording", test_guard_recording},
               {"host_access_faults", test_guard_faults}, {"test_linear_on_guard", test_guard_model},
               {"backends_on_guard", test_guard_backends}, {"pool_copy_rows", test_pool_copy});
    TEST_SUITE("kernels_gemm", {"cpu_sgemm_vs_naive", test_cpu_sgemm_vs_naive},
               {"cpu_threads", test_cpu_threads}, {"cpu_empty", test_cpu_empty},
               {"cpu_memory", test_cpu_memory}, {"cpu_bad_args", test_cpu_bad_args},
               {"select", test_select}, {"profile", test_profile},
               {"profile_device", test_profile_device},
               {"profile_recording", test_profile_recording},
               {"cuda_sgemm_vs_cpu", test_cuda_sgemm_vs_cpu},
               {"cuda_memory_and_args", test_cuda_memory_and_args});
    TEST_SUITE("kernels_ops", {"cpu_norms", test_cpu_ops},
               {"cpu_activations_both_paths", test_cpu_activations});
    TEST_SUITE("kernels_launch_log", {"keep_and_compare", test_launch_log});
}
