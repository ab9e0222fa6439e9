/*
 * test_ops_cuda.c — the CUDA table's op set against the CPU table's (suite kernels_cuda), in the
 * style of ggml's test-backend-ops: the same random inputs through both tables, the device
 * result downloaded and compared. The CPU ops are themselves checked against double references
 * (kernels_gemm_op, kernels_gemm_bf16, kernels_ops_rows, kernels_attn), so agreement with them
 * carries those checks over to the device.
 *
 * Bit for bit where the device computes the same sequence of correctly rounded operations:
 * copy2d, transpose, zero, gather, kv_write and kv_write2 (round to nearest even into f16 /
 * bf16), scale, topk (indices and values), gemm with no activation or ReLU (one FMA per k in increasing k per
 * output, the epilogue's roundings one by one) — and a gemm row computed alone equals the same
 * row in a batch, also for bf16 products (tensor cores), which are checked against the double
 * reference within the f32 summation bound of kernels_gemm_bf16 — and
 * attn (attn.cu performs kernels/cpu/attn.c's sequence: fmaf chains in key and column order,
 * its exp polynomial, the normalizer in double in key order). Elsewhere within a stated
 * tolerance, because the device's erff / expf / tanhf / cosf / sinf and its parallel
 * reductions round differently from the host's:
 *   gemm with GELU / SiLU      2e-6 (1 + |y|)
 *   norm, batchnorm, softmax, logsoftmax, act, glu, lstm_cell, add   2e-6 (1 + |y|)
 *   rope, conv2d_s2, conv_dw   4e-6 (1 + |y|)
 * Without a CUDA device (or without make CUDA=1) every test skips with the reason.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../core/sr.h"
#include "../kernels/cpu/cpu_impl.h"
#include "../kernels/kernels.h"
#include "ref_gemm.h"
#include "test.h"

static uint64_t rng = 1;
static float rnd(void) /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(uint32_t)(rng >> 40) / (double)(1u << 24) * 2.0 - 1.0);
}
static int rndi(int n) { return (int)((rnd() + 1.0f) * 0.5f * (float)n) % (n > 0 ? n : 1); }

/* The device table, or NULL after reporting the skip. */
static const sr_kernels *gpu(void)
{
    const sr_kernels *g = NULL;
    sr_status st = sr_kernels_cuda(&g);
    if (st) {
        char why[300];
        snprintf(why, sizeof why, "no CUDA table here (%s)", sr_last_error());
        TEST_SKIP(why);
        return NULL;
    }
    return g;
}

static float *rand_host(size_t n, float mag)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; h && i < n; i++) h[i] = mag * rnd();
    return h;
}

/* A device copy of host floats (NULL on failure, reported). */
static float *dev(const sr_kernels *g, const float *h, size_t n)
{
    float *d = g->alloc((n ? n : 1) * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d && n) CU_ASSERT_EQUAL(g->upload(d, h, n * sizeof(float)), SR_OK);
    return d;
}

static float *back(const sr_kernels *g, const float *d, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    if (h && n) CU_ASSERT_EQUAL(g->download(h, d, n * sizeof(float)), SR_OK);
    return h;
}

/* 1 when a and b agree: bitwise (tol < 0) or |a - b| <= tol (1 + |b|), NaN only with NaN. */
static int agree(const float *a, const float *b, size_t n, double tol, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        int ok;
        if (tol < 0) ok = !memcmp(&a[i], &b[i], sizeof a[i]);
        else if (isnan(b[i])) ok = isnan(a[i]);
        else ok = fabs((double)a[i] - (double)b[i]) <= tol * (1.0 + fabs((double)b[i]));
        if (!ok) {
            printf("\n      %s: element %zu: cuda %.9g, cpu %.9g", what, i, (double)a[i], (double)b[i]);
            return 0;
        }
    }
    return 1;
}

/* The CUDA table's process-wide settings (kernels.h; v < 0 asks, a value sets it and the
 * previous one comes back): without CUDA=1 the suite skips before any call. */
#ifdef SR_WITH_CUDA
#define CUDA_SETTING(f, v) f(v)
#else
#define CUDA_SETTING(f, v) ((void)(v), 0)
#endif
/* the bf16-product kernel: 0 wmma, 1 mma */
static int gemm_kernel(int v) { return CUDA_SETTING(sr_cuda_gemm_kernel, v); }
/* the mma kernel's columns a block above 16 rows: 0 16, 1 32, 2 by size */
static int gemm_cols(int v) { return CUDA_SETTING(sr_cuda_gemm_cols, v); }
/* the staged mma kernel's operands through cp.async (1) or registers (0) */
static int gemm_async(int v) { return CUDA_SETTING(sr_cuda_gemm_async, v); }
/* the attention form: 0 narrow, 1 wide, 2 by size */
static int attn_form(int v) { return CUDA_SETTING(sr_cuda_attn_form, v); }

/* bf16 products run on the tensor cores in their own order of f32 sums: y within the bound of
 * kernels_gemm_bf16 (the CPU AMX path's) of the double reference over the bf16 operands (an i8
 * weight's q, exact in bf16, times its row's scale):
 * |alpha| e_act + 2 eps (|alpha act| + |beta y0|), e_pre = (K + 3) eps sum |x w| + |bias|, the
 * activation's slope on e_pre, and 5e-7 (1 + |pre|) more for GELU / SiLU (erf / exp). */
static int agree_bf16(const float *yg, int M, int N, int K, const float *x, int ldx, const void *hw,
                      sr_dtype dt, const float *scale, const float *bias, sr_act act, float alpha,
                      float beta, const float *y0, int ldy)
{
    size_t no = (size_t)M * N;
    double *w = malloc((size_t)N * K * sizeof(double)), *ref = malloc(no * sizeof(double));
    double *pre = malloc(no * sizeof(double)), *mag = malloc(no * sizeof(double));
    double *av = malloc(no * sizeof(double));
    float *xb = malloc((size_t)M * ldx * sizeof(float));
    int ok = w && ref && pre && mag && av && xb;
    if (ok) {
        ref_weight_widen(hw, dt, N, K, scale, w); /* i8: q times its scale, exact in double */
        ref_daz(w, (size_t)N * K);
        memcpy(xb, x, (size_t)M * ldx * sizeof(float));
        ref_x_bf16(M, K, xb, ldx);
        ref_gemm(M, N, K, xb, ldx, w, bias, act, alpha, beta, y0, ldy, ref, pre, mag, av);
        const double eps = FLT_EPSILON;
        const double lip = act == SR_ACT_GELU ? 1.13 : act == SR_ACT_SILU ? 1.10 : 1.0;
        for (int m = 0; m < M && ok; m++)
            for (int n = 0; n < N && ok; n++) {
                size_t o = (size_t)m * N + n, i = (size_t)m * ldy + n;
                double e_pre = (double)(K + 3) * eps * mag[o], e_act = lip * e_pre;
                if (act == SR_ACT_GELU || act == SR_ACT_SILU) e_act += 5e-7 * (1.0 + fabs(pre[o]) + e_pre);
                double y0v = beta == 0.0f ? 0.0 : (double)y0[i];
                double tol = fabs((double)alpha) * e_act +
                             2.0 * eps * (fabs((double)alpha * av[o]) + fabs((double)beta * y0v));
                if (!(fabs((double)yg[i] - ref[o]) <= tol)) {
                    printf("\n      gemm bf16 products (%s kernel) act %d M %d N %d K %d: y[%d,%d] = %.9g, want %.9g "
                           "(tol %.3g)", gemm_kernel(-1) ? "mma" : "wmma", (int)act, M, N, K, m, n, (double)yg[i], ref[o], tol);
                    ok = 0;
                }
            }
    }
    free(w); free(ref); free(pre); free(mag); free(av); free(xb);
    return ok;
}

/* ---- gemm, gather -------------------------------------------------------------------------- */

static void test_gemm(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    static const sr_dtype dts[] = {SR_F32, SR_BF16, SR_F16, SR_I8};
    /* M 1 / 5 / 16 / 33 / 70 / 200: each tensor-core tile shape and its row remainders, several
     * row tiles; K tails of 16-wide tiles, of the mma kernel's 32-wide blocks (kpad 1104 ends in
     * half a block) and of 256-wide chunks */
    static const int shapes[][3] = {{1, 1, 1},       {5, 33, 17},     {16, 64, 301},
                                    {33, 40, 600},   {70, 100, 1100}, {200, 48, 520}};
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    int bad = 0;
    /* the 4 dtypes exact, then bf16 products by the wmma kernel and by the mma kernel, then an
     * i8 weight's bf16 products (the mma kernel, whichever is selected: asked with wmma) */
    const int prev_kernel = gemm_kernel(-1);
    for (int d = 0; d < 7; d++)
        for (int s = 0; s < NSHAPES; s++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldx = K + 3, ldy = N + 2;
            sr_dtype dt = d < 4 ? dts[d] : d < 6 ? SR_BF16 : SR_I8;
            sr_kmul mul = d < 4 ? SR_KMUL_EXACT : SR_KMUL_BF16;
            if (d >= 4) gemm_kernel(d == 5 ? 1 : 0);
            size_t nw = (size_t)N * K;
            void *hw = malloc(nw * 4);
            float *scale = rand_host((size_t)N, 0.01f), *bias = rand_host((size_t)N, 1.0f);
            for (size_t i = 0; i < nw; i++) {
                float v = rnd();
                if (dt == SR_F32) ((float *)hw)[i] = v;
                else if (dt == SR_BF16) ((uint16_t *)hw)[i] = sr_f32_to_bf16(v);
                else if (dt == SR_F16) ((uint16_t *)hw)[i] = sr_f32_to_f16(v);
                else ((int8_t *)hw)[i] = (int8_t)(127 * v);
            }
            sr_kweight *Wc = NULL, *Wg = NULL;
            CU_ASSERT_EQUAL_FATAL(c->weight_create(hw, dt, N, K, scale, mul, &Wc), SR_OK);
            CU_ASSERT_EQUAL_FATAL(g->weight_create(hw, dt, N, K, scale, mul, &Wg), SR_OK);
            float *x = rand_host((size_t)M * ldx, 1.0f), *y0 = rand_host((size_t)M * ldy, 1.0f);
            float *dx = dev(g, x, (size_t)M * ldx), *dbias = dev(g, bias, (size_t)N);
            for (int act = 0; act < 4; act++) {
                float alpha = act == 2 ? 0.7f : 1.0f, beta = act % 2 ? 1.3f : 0.0f;
                float *yc = malloc((size_t)M * ldy * sizeof(float));
                memcpy(yc, y0, (size_t)M * ldy * sizeof(float));
                float *dy = dev(g, y0, (size_t)M * ldy);
                CU_ASSERT_EQUAL(c->gemm(M, x, ldx, Wc, act % 2 ? bias : NULL, (sr_act)act, alpha, beta, yc, ldy), SR_OK);
                CU_ASSERT_EQUAL(g->gemm(M, dx, ldx, Wg, act % 2 ? dbias : NULL, (sr_act)act, alpha, beta, dy, ldy), SR_OK);
                float *yg = back(g, dy, (size_t)M * ldy);
                int exact = act == SR_ACT_NONE || act == SR_ACT_RELU;
                if (mul == SR_KMUL_BF16)
                    bad += !agree_bf16(yg, M, N, K, x, ldx, hw, dt, scale, act % 2 ? bias : NULL,
                                       (sr_act)act, alpha, beta, y0, ldy);
                else
                    bad += !agree(yg, yc, (size_t)M * ldy, exact ? -1.0 : 2e-6, "gemm");
                /* the mma form with 16 columns a block and with 32 (above 16 rows) or 8 (up to
                 * 16), and above 16 rows both again with the operands staged by cp.async: the
                 * same bits */
                if (mul == SR_KMUL_BF16 && (gemm_kernel(-1) == 1 || dt == SR_I8)) {
                    float *d2 = dev(g, y0, (size_t)M * ldy);
                    const int pc = gemm_cols(-1), pa = gemm_async(-1), other = M > 16 ? 1 : 3;
                    for (int as = 0; as <= (M > 16); as++)
                        for (int cols = 0; cols <= other; cols += other) {
                            gemm_cols(cols);
                            gemm_async(as);
                            CU_ASSERT_EQUAL(g->gemm(M, dx, ldx, Wg, act % 2 ? dbias : NULL, (sr_act)act,
                                                    alpha, beta, d2, ldy), SR_OK);
                            float *y2 = back(g, d2, (size_t)M * ldy);
                            CU_ASSERT_EQUAL(g->upload(d2, y0, (size_t)M * ldy * sizeof(float)), SR_OK);
                            bad += !agree(y2, yg, (size_t)M * ldy, -1.0,
                                          as ? (!cols ? "gemm, cp.async, 16 columns a block"
                                                      : "gemm, cp.async, 32 columns a block")
                                             : !cols ? "gemm, 16 columns a block"
                                             : cols == 1 ? "gemm, 32 columns a block" : "gemm, 8 columns a block");
                            free(y2);
                        }
                    gemm_cols(pc);
                    gemm_async(pa);
                    g->free(d2);
                }
                /* row M - 1 alone: the same bits as in the batch */
                CU_ASSERT_EQUAL(g->gemm(1, dx + (size_t)(M - 1) * ldx, ldx, Wg, act % 2 ? dbias : NULL,
                                        (sr_act)act, alpha, 0.0f, dy, ldy), SR_OK);
                float *y1 = back(g, dy, (size_t)N);
                if (beta == 0.0f) bad += !agree(y1, yg + (size_t)(M - 1) * ldy, (size_t)N, -1.0, "gemm row alone");
                free(yc); free(yg); free(y1);
                g->free(dy);
            }
            /* gather: the stored rows, exactly */
            {
                int32_t ids[4] = {0, N - 1, N / 2, 0};
                float *gc = malloc((size_t)4 * K * sizeof(float));
                float *dg = g->alloc((size_t)4 * K * sizeof(float));
                CU_ASSERT_EQUAL(c->gather(Wc, ids, 4, gc, K), SR_OK);
                CU_ASSERT_EQUAL(g->gather(Wg, ids, 4, dg, K), SR_OK);
                float *gg = back(g, dg, (size_t)4 * K);
                bad += !agree(gg, gc, (size_t)4 * K, -1.0, "gather");
                free(gc); free(gg);
                g->free(dg);
            }
            c->weight_free(Wc);
            g->weight_free(Wg);
            g->free(dx);
            g->free(dbias);
            free(hw); free(scale); free(bias); free(x); free(y0);
        }
    gemm_kernel(prev_kernel);
    CU_ASSERT_EQUAL(bad, 0);
}

/* A weight of stacked blocks (sr_model_weight_cat: q | k | v, gate | up) gives each column the
 * bits of its block alone on the device too: exact products (f32, i8) and bf16 products with
 * both tensor-core kernels; a block without bias has -0 entries in the stacked bias. */
static void test_gemm_stacked(void)
{
    const sr_kernels *g = gpu();
    if (!g) return;
    const int n1 = 40, n2 = 24, n = n1 + n2, K = 600, ldx = K + 1, ldy = n + 2;
    const int prev_kernel = gemm_kernel(-1);
    int bad = 0;
    for (int d = 0; d < 4; d++) { /* f32 exact, i8 exact, bf16 products by wmma and by mma */
        sr_dtype dt = d == 1 ? SR_I8 : d == 0 ? SR_F32 : SR_BF16;
        sr_kmul mul = d < 2 ? SR_KMUL_EXACT : SR_KMUL_BF16;
        if (d >= 2) gemm_kernel(d - 2);
        size_t es = dt == SR_F32 ? 4 : dt == SR_I8 ? 1 : 2;
        char *hw = malloc((size_t)n * K * es);
        float *scale = rand_host((size_t)n, 0.01f), *bias = rand_host((size_t)n, 1.0f);
        for (size_t i = 0; i < (size_t)n * K; i++) {
            float v = rnd();
            if (dt == SR_F32) ((float *)hw)[i] = v;
            else if (dt == SR_BF16) ((uint16_t *)hw)[i] = sr_f32_to_bf16(v);
            else ((int8_t *)hw)[i] = (int8_t)(127 * v);
        }
        for (int i = n1; i < n; i++) bias[i] = -0.0f;
        sr_kweight *W = NULL, *Wa = NULL, *Wb = NULL;
        CU_ASSERT_EQUAL_FATAL(g->weight_create(hw, dt, n, K, scale, mul, &W), SR_OK);
        CU_ASSERT_EQUAL_FATAL(g->weight_create(hw, dt, n1, K, scale, mul, &Wa), SR_OK);
        CU_ASSERT_EQUAL_FATAL(g->weight_create(hw + (size_t)n1 * K * es, dt, n2, K, scale + n1, mul, &Wb), SR_OK);
        float *dbias = dev(g, bias, (size_t)n);
        for (int M = 1; M <= 70; M += 69) {
            float *x = rand_host((size_t)M * ldx, 1.0f), *y0 = rand_host((size_t)M * ldy, 1.0f);
            for (int c = 0; M > 1 && c < K; c++) x[c] = rnd() < 0 ? -FLT_TRUE_MIN : FLT_TRUE_MIN;
            float *dx = dev(g, x, (size_t)M * ldx), *yf = dev(g, y0, (size_t)M * ldy);
            float *ys = dev(g, y0, (size_t)M * ldy);
            CU_ASSERT_EQUAL(g->gemm(M, dx, ldx, W, dbias, SR_ACT_NONE, 0.7f, 0.0f, yf, ldy), SR_OK);
            CU_ASSERT_EQUAL(g->gemm(M, dx, ldx, Wa, dbias, SR_ACT_NONE, 0.7f, 0.0f, ys, ldy), SR_OK);
            CU_ASSERT_EQUAL(g->gemm(M, dx, ldx, Wb, NULL, SR_ACT_NONE, 0.7f, 0.0f, ys + n1, ldy), SR_OK);
            float *hf = back(g, yf, (size_t)M * ldy), *hs = back(g, ys, (size_t)M * ldy);
            bad += !agree(hf, hs, (size_t)M * ldy, -1.0, d < 2 ? "stacked weight (exact)" : d == 2 ?
                          "stacked weight (bf16, wmma)" : "stacked weight (bf16, mma)");
            free(x); free(y0); free(hf); free(hs);
            g->free(dx); g->free(yf); g->free(ys);
        }
        g->free(dbias);
        g->weight_free(W); g->weight_free(Wa); g->weight_free(Wb);
        free(hw); free(scale); free(bias);
    }
    gemm_kernel(prev_kernel);
    CU_ASSERT_EQUAL(bad, 0);
}

/* The operands of bf16 products, bit for bit against the CPU's: where only one product of a sum
 * is not zero the sum is that product exactly, whatever the order, so the device's y equals the
 * CPU's bit for bit and shows each operand as the kernel made it.
 *   x: a weight of ones on its diagonal (bf16, and i8 q = 1 with scale 1) gives y[m, n] = the
 *      bf16 operand of x[m, n]: ties between two bf16 (to even, both parities), subnormals (to
 *      zero of their sign), the smallest normal, signed zeros, the largest finite bf16 values,
 *      at rows of 16 bytes (the mma kernel's vector loads) and at an odd stride (one load a
 *      float), for up to 16 rows (x read by the kernel) and more (x staged).
 *   i8 q: one-hot rows of x give y[m, n] = q[n, m] * 1: every q from -128 to 127 in each k
 *      position class, as the kernel widened it. */
static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_gemm_operands(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    enum { K = 96, N = 96 };
    const int prev_kernel = gemm_kernel(-1);
    int bad = 0;
    for (int kern = 0; kern < 2; kern++) { /* wmma, mma (i8: mma whichever is asked) */
        gemm_kernel(kern);
        for (int wi8 = 0; wi8 < 2; wi8++) {
            const sr_dtype dt = wi8 ? SR_I8 : SR_BF16;
            uint16_t *wb = calloc((size_t)N * K, sizeof *wb);
            int8_t *wq = calloc((size_t)N * K, 1);
            float *one = malloc(N * sizeof(float));
            for (int n = 0; n < N; n++) {
                wb[(size_t)n * K + n] = sr_f32_to_bf16(1.0f);
                wq[(size_t)n * K + n] = 1;
                one[n] = 1.0f;
            }
            sr_kweight *Wc = NULL, *Wg = NULL;
            const void *hw = wi8 ? (const void *)wq : (const void *)wb;
            CU_ASSERT_EQUAL_FATAL(c->weight_create(hw, dt, N, K, one, SR_KMUL_BF16, &Wc), SR_OK);
            CU_ASSERT_EQUAL_FATAL(g->weight_create(hw, dt, N, K, one, SR_KMUL_BF16, &Wg), SR_OK);
            for (int M = 1; M <= 40; M += 13) /* 1, 14: x read by the kernel; 27, 40: staged */
                for (int ldx = K; ldx <= K + 1; ldx++) {
                    float *x = malloc((size_t)M * ldx * sizeof(float));
                    for (size_t i = 0; i < (size_t)M * ldx; i++) {
                        const uint32_t b = (uint32_t)sr_f32_to_bf16(rnd()) << 16;
                        const float sg = i & 2 ? -1.0f : 1.0f;
                        float v;
                        switch (i % 9) {
                        case 1: v = bits_f32(b | 0x8000u); break;             /* a tie */
                        case 2: v = bits_f32((b | 0x8000u) + 0x10000u); break; /* the other parity */
                        case 3: v = sg * 3.0e-39f * (1.0f + rnd()); break;       /* subnormal */
                        case 4: v = sg * FLT_MIN; break;
                        case 5: v = sg * 0.0f; break;
                        case 6: v = sg * 3.3895313892515355e38f; break;           /* largest finite bf16 */
                        case 7: v = sg * FLT_TRUE_MIN; break;
                        default: v = rnd();
                        }
                        x[i] = v;
                    }
                    float *yc = calloc((size_t)M * N, sizeof(float));
                    float *dx = dev(g, x, (size_t)M * ldx), *dy = dev(g, yc, (size_t)M * N);
                    CU_ASSERT_EQUAL(c->gemm(M, x, ldx, Wc, NULL, SR_ACT_NONE, 1.0f, 0.0f, yc, N), SR_OK);
                    CU_ASSERT_EQUAL(g->gemm(M, dx, ldx, Wg, NULL, SR_ACT_NONE, 1.0f, 0.0f, dy, N), SR_OK);
                    float *yg = back(g, dy, (size_t)M * N);
                    char what[96];
                    snprintf(what, sizeof what, "x's bf16 operands (%s weight, %s, M %d, ldx %d)",
                             wi8 ? "i8" : "bf16", kern ? "mma" : "wmma", M, ldx);
                    bad += !agree(yg, yc, (size_t)M * N, -1.0, what);
                    free(x); free(yc); free(yg);
                    g->free(dx); g->free(dy);
                }
            c->weight_free(Wc);
            g->weight_free(Wg);
            free(wb); free(one);
            if (wi8) { /* every q in each position of a weight row's 8-byte groups */
                enum { NQ = 256, KQ = 64 };
                int8_t *q = malloc((size_t)NQ * KQ);
                float *sc = malloc(NQ * sizeof(float));
                for (int n = 0; n < NQ; n++) {
                    sc[n] = 1.0f;
                    for (int k = 0; k < KQ; k++) q[(size_t)n * KQ + k] = (int8_t)((n + 37 * k) % 256 - 128);
                }
                CU_ASSERT_EQUAL_FATAL(c->weight_create(q, SR_I8, NQ, KQ, sc, SR_KMUL_BF16, &Wc), SR_OK);
                CU_ASSERT_EQUAL_FATAL(g->weight_create(q, SR_I8, NQ, KQ, sc, SR_KMUL_BF16, &Wg), SR_OK);
                for (int M = 16; M <= KQ; M += KQ - 16) { /* one-hot rows: x read, then staged */
                    float *x = calloc((size_t)M * KQ, sizeof(float));
                    for (int m = 0; m < M; m++) x[(size_t)m * KQ + (m * 5) % KQ] = 1.0f;
                    float *yc = calloc((size_t)M * NQ, sizeof(float));
                    float *dx = dev(g, x, (size_t)M * KQ), *dy = dev(g, yc, (size_t)M * NQ);
                    CU_ASSERT_EQUAL(c->gemm(M, x, KQ, Wc, NULL, SR_ACT_NONE, 1.0f, 0.0f, yc, NQ), SR_OK);
                    CU_ASSERT_EQUAL(g->gemm(M, dx, KQ, Wg, NULL, SR_ACT_NONE, 1.0f, 0.0f, dy, NQ), SR_OK);
                    float *yg = back(g, dy, (size_t)M * NQ);
                    bad += !agree(yg, yc, (size_t)M * NQ, -1.0, "i8 weights widened to bf16");
                    free(x); free(yc); free(yg);
                    g->free(dx); g->free(dy);
                }
                c->weight_free(Wc);
                g->weight_free(Wg);
                free(q); free(sc);
            }
            free(wq);
        }
    }
    gemm_kernel(prev_kernel);
    CU_ASSERT_EQUAL(bad, 0);
}

/* ---- row ops -------------------------------------------------------------------------------- */

static void test_rows(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    const int M = 7, d = 300, ld = 301;
    size_t n = (size_t)M * ld;
    float *x = rand_host(n, 3.0f), *x2 = rand_host(n, 3.0f), *gv = rand_host((size_t)d, 1.0f);
    float *bv = rand_host((size_t)d, 1.0f), *mul = rand_host(n, 1.0f), *var = rand_host((size_t)d, 1.0f);
    for (int i = 0; i < d; i++) var[i] = fabsf(var[i]) + 0.1f;
    float *dx = dev(g, x, n), *dx2 = dev(g, x2, n), *dg = dev(g, gv, (size_t)d), *db = dev(g, bv, (size_t)d);
    float *dmul = dev(g, mul, n), *dvar = dev(g, var, (size_t)d);
    float *yc = malloc(n * sizeof(float)), *dy = g->alloc(n * sizeof(float));
    int bad = 0;
#define RUN_BOTH(call_c, call_g, tol, what)                                                    \
    do {                                                                                       \
        memcpy(yc, x2, n * sizeof(float));                                                     \
        CU_ASSERT_EQUAL(g->upload(dy, x2, n * sizeof(float)), SR_OK);                          \
        CU_ASSERT_EQUAL(call_c, SR_OK);                                                        \
        CU_ASSERT_EQUAL(call_g, SR_OK);                                                        \
        float *yg_ = back(g, dy, n);                                                           \
        bad += !agree(yg_, yc, n, tol, what);                                                  \
        free(yg_);                                                                             \
    } while (0)
    for (int kind = 0; kind < 2; kind++)
        for (int m = 0; m < 3; m++) {
            const float *mh = m == 0 ? NULL : mul, *md = m == 0 ? NULL : dmul;
            int ldm = m == 2 ? ld : 0;
            RUN_BOTH(c->norm((sr_norm_kind)kind, M, d, x, ld, gv, bv, 1e-5f, mh, ldm, yc, ld),
                     g->norm((sr_norm_kind)kind, M, d, dx, ld, dg, db, 1e-5f, md, ldm, dy, ld), 2e-6, "norm");
        }
    for (int a = 0; a < 4; a++)
        RUN_BOTH(c->act((sr_act)a, n, x, yc), g->act((sr_act)a, n, dx, dy), 2e-6, "act");
    for (int k = 0; k < 2; k++)
        RUN_BOTH(c->glu((sr_glu)k, M, d, x, ld, x2, ld, yc, ld), g->glu((sr_glu)k, M, d, dx, ld, dx2, ld, dy, ld),
                 2e-6, "glu");
    RUN_BOTH(c->add(M, d, x, ld, 0.75f, yc, ld), g->add(M, d, dx, ld, 0.75f, dy, ld), 2e-6, "add");
    RUN_BOTH(c->add(M, d, x, 0, 1.0f, yc, ld), g->add(M, d, dx, 0, 1.0f, dy, ld), 2e-6, "add row 0");
    RUN_BOTH(c->scale(M, d, -1.5f, yc, ld), g->scale(M, d, -1.5f, dy, ld), -1.0, "scale");
    RUN_BOTH(c->copy2d(M, d, x, ld, yc, ld), g->copy2d(M, d, dx, ld, dy, ld), -1.0, "copy2d");
    /* [7, 300] -> [300, 7] and [67, 30] (strides 31 / 68, crossing 32 x 32 tiles; both within
     * the n = 2,107 floats of x and y) */
    RUN_BOTH(c->transpose(1, M, d, x, ld, yc, M), g->transpose(1, M, d, dx, ld, dy, M), -1.0, "transpose");
    RUN_BOTH(c->transpose(1, 67, 30, x, 31, yc, 68), g->transpose(1, 67, 30, dx, 31, dy, 68), -1.0,
             "transpose 67 x 30");
    RUN_BOTH(c->transpose(3, 20, 33, x, 34, yc, 20), g->transpose(3, 20, 33, dx, 34, dy, 20), -1.0,
             "transpose 3 x 20 x 33");
    /* copy_rows: 300 rows (two launches of pointers) from both inputs, in scrambled order */
    {
        enum { NR = 300, DD = 5 };
        const float *sc[NR], *sg[NR];
        for (int i = 0; i < NR; i++) {
            size_t off = (size_t)(i * 37 % (M * d - DD));
            sc[i] = (i % 2 ? x : x2) + off;
            sg[i] = (i % 2 ? dx : dx2) + off;
        }
        RUN_BOTH(c->copy_rows(NR, DD, sc, yc, 7), g->copy_rows(NR, DD, sg, dy, 7), -1.0, "copy_rows");
    }
    RUN_BOTH(c->batchnorm(M, d, x, ld, bv, var, gv, mul, 1e-5f, yc, ld),
             g->batchnorm(M, d, dx, ld, db, dvar, dg, dmul, 1e-5f, dy, ld), 2e-6, "batchnorm");
    RUN_BOTH(c->softmax(M, d, yc, ld), g->softmax(M, d, dy, ld), 2e-6, "softmax");
    RUN_BOTH(c->logsoftmax(M, d, x, ld, yc, ld), g->logsoftmax(M, d, dx, ld, dy, ld), 2e-6, "logsoftmax");
    /* lstm: gates [M, 4H] in x, c and h in the two halves of y */
    {
        const int H = 70;
        RUN_BOTH(c->lstm_cell(M, H, x, ld, yc, ld, yc + 150, ld),
                 g->lstm_cell(M, H, dx, ld, dy, ld, dy + 150, ld), 2e-6, "lstm_cell");
    }
    /* zero */
    g->zero(dy, n * sizeof(float));
    memset(yc, 0, n * sizeof(float));
    {
        float *yg = back(g, dy, n);
        bad += !agree(yg, yc, n, -1.0, "zero");
        free(yg);
    }
    /* topk with ties and NaN */
    {
        x[3] = x[9] = 2.5f;
        x[ld + 4] = NAN;
        CU_ASSERT_EQUAL(g->upload(dx, x, n * sizeof(float)), SR_OK);
        const int k = 5;
        int32_t ic[7 * 5], ig[7 * 5];
        float vc[7 * 5], *vg;
        int32_t *di = g->alloc(sizeof ig);
        float *dv = g->alloc(sizeof vc);
        CU_ASSERT_EQUAL(c->topk(M, d, k, x, ld, ic, vc), SR_OK);
        CU_ASSERT_EQUAL(g->topk(M, d, k, dx, ld, di, dv), SR_OK);
        CU_ASSERT_EQUAL(g->download(ig, di, sizeof ig), SR_OK);
        vg = back(g, dv, (size_t)M * k);
        bad += memcmp(ic, ig, sizeof ic) != 0;
        bad += !agree(vg, vc, (size_t)M * k, -1.0, "topk values");
        free(vg);
        g->free(di);
        g->free(dv);
    }
    /* topk of few rows over a vocabulary: the split form (parts of a row, then their merge),
     * the best value repeated in other parts (the lower column wins) or only in the last part */
    {
        static const int tk[][3] = {{1, 131072, 1}, {2, 51865, 5}, {1, 4100, 64}, {1, 131072, 1}};
        for (int t = 0; t < 4; t++) {
            const int TM = tk[t][0], TN = tk[t][1], k = tk[t][2], tld = TN + 5;
            float *tx = rand_host((size_t)TM * tld, 1.0f);
            for (int r = 0; r < TM; r++) {
                float *xr = tx + (size_t)r * tld;
                xr[7] = xr[TN / 2] = xr[TN - 1] = 3.0f;
                xr[TN / 3] = NAN;
                if (t == 3) xr[TN - 3] = 5.0f;
            }
            int32_t *ic = malloc((size_t)TM * k * sizeof *ic), *ig = malloc((size_t)TM * k * sizeof *ig);
            float *vc = malloc((size_t)TM * k * sizeof *vc);
            float *dtx = dev(g, tx, (size_t)TM * tld), *dv = g->alloc((size_t)TM * k * sizeof(float));
            int32_t *di = g->alloc((size_t)TM * k * sizeof(int32_t));
            CU_ASSERT_EQUAL(c->topk(TM, TN, k, tx, tld, ic, vc), SR_OK);
            CU_ASSERT_EQUAL(g->topk(TM, TN, k, dtx, tld, di, dv), SR_OK);
            CU_ASSERT_EQUAL(g->download(ig, di, (size_t)TM * k * sizeof *ig), SR_OK);
            float *vg = back(g, dv, (size_t)TM * k);
            bad += memcmp(ic, ig, (size_t)TM * k * sizeof *ic) != 0;
            bad += !agree(vg, vc, (size_t)TM * k, -1.0, "topk values (few rows, many columns)");
            free(tx); free(ic); free(ig); free(vc); free(vg);
            g->free(dtx); g->free(dv); g->free(di);
        }
    }
#undef RUN_BOTH
    CU_ASSERT_EQUAL(bad, 0);
    g->free(dx); g->free(dx2); g->free(dg); g->free(db); g->free(dmul); g->free(dvar); g->free(dy);
    free(x); free(x2); free(gv); free(bv); free(mul); free(var); free(yc);
}

/* rope of b's rows (random, stride ld, H heads of hd) through both tables: 1 when the device
 * agrees with the CPU within 4e-6 (1 + |y|). */
static int rope_both(const sr_kernels *c, const sr_kernels *g, const sr_kbatch *b, int H, int hd,
                     int ld, const char *what)
{
    float inv[64];
    for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
    size_t n = (size_t)b->row0[b->n_seq] * ld;
    float *x = rand_host(n, 1.0f), *dx = dev(g, x, n), *dinv = dev(g, inv, (size_t)hd / 2);
    CU_ASSERT_EQUAL(c->rope(b, H, hd, inv, x, ld), SR_OK);
    CU_ASSERT_EQUAL(g->rope(b, H, hd, dinv, dx, ld), SR_OK);
    float *xg = back(g, dx, n);
    int ok = agree(xg, x, n, 4e-6, what);
    free(x); free(xg);
    g->free(dx); g->free(dinv);
    return ok;
}

/* ---- convolutions, rope --------------------------------------------------------------------- */

static void test_conv_rope(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    int bad = 0;
    /* conv2d_s2: 3 images of C 4, T 11, F 13, one input plane for all channels of an image and
     * one per channel */
    for (int shared = 0; shared < 2; shared++) {
        const int n = 3, C = 4, T = 11, F = 13, To = T / 2 + 1, Fo = F / 2 + 1;
        size_t img = (size_t)C * T * F + 7, nin = n * img, nout = (size_t)n * C * To * Fo;
        float *in = rand_host(nin, 1.0f), *w = rand_host((size_t)C * 9, 1.0f), *b = rand_host((size_t)C, 1.0f);
        float *din = dev(g, in, nin), *dw = dev(g, w, (size_t)C * 9), *db = dev(g, b, (size_t)C);
        float *oc = malloc(nout * sizeof(float)), *dout = g->alloc(nout * sizeof(float));
        size_t ps = shared ? 0 : (size_t)T * F;
        CU_ASSERT_EQUAL(c->conv2d_s2(n, C, T, F, in, img, ps, w, b, shared, oc), SR_OK);
        CU_ASSERT_EQUAL(g->conv2d_s2(n, C, T, F, din, img, ps, dw, db, shared, dout), SR_OK);
        float *og = back(g, dout, nout);
        bad += !agree(og, oc, nout, 4e-6, "conv2d_s2");
        free(in); free(w); free(b); free(oc); free(og);
        g->free(din); g->free(dw); g->free(db); g->free(dout);
    }
    /* conv_dw over two sequences with state in a pool, two chunks (the state carries) */
    for (int pdt = 0; pdt < 2; pdt++) {
        const int C = 24, K = 9, ld = 25;
        sr_dtype dt = pdt ? SR_F16 : SR_F32;
        sr_kpool *pc = NULL, *pg = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, dt, 2, 3, K - 1, C, &pc), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, dt, 2, 3, K - 1, C, &pg), SR_OK);
        float *w = rand_host((size_t)C * K, 1.0f), *bias = rand_host((size_t)C, 1.0f);
        float *dw = dev(g, w, (size_t)C * K), *dbias = dev(g, bias, (size_t)C);
        for (int chunk = 0; chunk < 2; chunk++) {
            int row0[3] = {0, 4, 4 + 7}, slot[2] = {2, 0};
            int64_t pos[2] = {chunk * 4, chunk * 7};
            sr_kbatch b = {.n_seq = 2, .row0 = row0, .slot = slot, .pos = pos};
            size_t n = (size_t)11 * ld;
            float *x = rand_host(n, 1.0f), *dx = dev(g, x, n);
            float *yc = malloc(n * sizeof(float)), *dy = g->alloc(n * sizeof(float));
            CU_ASSERT_EQUAL(c->conv_dw(&b, C, K, x, ld, w, bias, pc, 1, yc, ld), SR_OK);
            CU_ASSERT_EQUAL(g->conv_dw(&b, C, K, dx, ld, dw, dbias, pg, 1, dy, ld), SR_OK);
            float *yg = back(g, dy, n);
            for (int r = 0; r < 11; r++) bad += !agree(yg + (size_t)r * ld, yc + (size_t)r * ld, (size_t)C, 4e-6, "conv_dw");
            free(x); free(yc); free(yg);
            g->free(dx); g->free(dy);
        }
        free(w); free(bias);
        g->free(dw); g->free(dbias);
        sr_kpool_free(c, pc);
        sr_kpool_free(g, pg);
    }
    /* rope over a batch of two sequences at different positions */
    {
        const int H = 3, hd = 16, ld = H * hd + 1;
        int row0[3] = {0, 3, 8};
        int64_t pos[2] = {0, 1000};
        sr_kbatch b = {.n_seq = 2, .row0 = row0, .slot = NULL, .pos = pos};
        bad += !rope_both(c, g, &b, H, hd, ld, "rope");
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Batches of more sequences than one launch carries (the device ops take the batch arrays as a
 * kernel parameter, PB_SEQ = 384 sequences a launch in rowops.cu): 1,000 sequences of 0 to 3
 * rows at scattered slots and positions, sequences 400..799 all empty (a launch with no rows),
 * through rope, kv_write and conv_dw with state (twice, so the state carries): the CPU's bits
 * for kv_write (the pool bytes), its tolerance for rope and conv_dw. */
static void test_many_seqs(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    enum { NS = 1000 };
    int *row0 = malloc((NS + 1) * sizeof(int)), *slot = malloc(NS * sizeof(int));
    int64_t *pos = malloc(NS * sizeof(int64_t));
    CU_ASSERT_FATAL(row0 && slot && pos);
    row0[0] = 0;
    for (int s = 0; s < NS; s++) {
        int n = s >= 400 && s < 800 ? 0 : rndi(4);
        row0[s + 1] = row0[s] + n;
        slot[s] = (s * 617) % NS; /* a permutation: 617 and 1000 are coprime */
        pos[s] = rndi(50);
    }
    const int M = row0[NS];
    int bad = 0;
    sr_kbatch b = {.n_seq = NS, .row0 = row0, .slot = slot, .pos = pos};
    /* rope */
    {
        const int H = 2, hd = 8, ld = H * hd + 3;
        bad += !rope_both(c, g, &b, H, hd, ld, "rope (1,000 sequences)");
    }
    /* kv_write into a bf16 pool of 3 ring rows (sequences of 3 rows wrap) */
    {
        const int W = 12, ld = W + 1;
        sr_kpool *pc = NULL, *pg = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, SR_BF16, 2, NS, 3, W, &pc), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_BF16, 2, NS, 3, W, &pg), SR_OK);
        g->zero(pg->data, pg->bytes);
        memset(pc->data, 0, pc->bytes);
        size_t n = (size_t)M * ld;
        float *x = rand_host(n, 1.0f), *dx = dev(g, x, n);
        CU_ASSERT_EQUAL(c->kv_write(pc, 1, &b, x, ld), SR_OK);
        CU_ASSERT_EQUAL(g->kv_write(pg, 1, &b, dx, ld), SR_OK);
        char *hb = malloc(pg->bytes);
        CU_ASSERT_EQUAL(g->download(hb, pg->data, pg->bytes), SR_OK);
        bad += memcmp(hb, pc->data, pc->bytes) != 0;
        free(hb); free(x);
        g->free(dx);
        sr_kpool_free(c, pc);
        sr_kpool_free(g, pg);
    }
    /* kv_write2 into a bf16 pool of 3 ring rows and an f16 one of 2 (other widths and strides):
     * the bytes of the CPU's two kv_writes */
    {
        const int W1 = 12, W2 = 5, ld1 = W1 + 1, ld2 = W2 + 3;
        sr_kpool *pc1 = NULL, *pc2 = NULL, *pg1 = NULL, *pg2 = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, SR_BF16, 2, NS, 3, W1, &pc1), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, SR_F16, 2, NS, 2, W2, &pc2), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_BF16, 2, NS, 3, W1, &pg1), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_F16, 2, NS, 2, W2, &pg2), SR_OK);
        float *x1 = rand_host((size_t)M * ld1, 1.0f), *x2 = rand_host((size_t)M * ld2, 1.0f);
        float *dx1 = dev(g, x1, (size_t)M * ld1), *dx2 = dev(g, x2, (size_t)M * ld2);
        CU_ASSERT_EQUAL(c->kv_write(pc1, 1, &b, x1, ld1), SR_OK);
        CU_ASSERT_EQUAL(c->kv_write(pc2, 1, &b, x2, ld2), SR_OK);
        CU_ASSERT_EQUAL(g->kv_write2(pg1, pg2, 1, &b, dx1, ld1, dx2, ld2), SR_OK);
        sr_kpool *const pc[2] = {pc1, pc2}, *const pg[2] = {pg1, pg2};
        for (int i = 0; i < 2; i++) {
            char *hb = malloc(pg[i]->bytes);
            CU_ASSERT_EQUAL(g->download(hb, pg[i]->data, pg[i]->bytes), SR_OK);
            bad += memcmp(hb, pc[i]->data, pc[i]->bytes) != 0;
            free(hb);
        }
        free(x1); free(x2);
        g->free(dx1); g->free(dx2);
        sr_kpool_free(c, pc1); sr_kpool_free(c, pc2);
        sr_kpool_free(g, pg1); sr_kpool_free(g, pg2);
    }
    /* rope_kv (GQA 4 / 2 heads of 8, q | k | v rows, bf16 K and f16 V rings of 3 and 2 rows):
     * the bits of the device's rope (q and k side by side) then kv_write2, q and both pools;
     * and the CPU's rope_kv within rope's tolerance for q */
    {
        const int H = 4, G = 2, hd = 8, qw = H * hd, kw = G * hd, ld = qw + 2 * kw + 1;
        float inv[4];
        for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
        float *dinv = dev(g, inv, 4);
        sr_kpool *P[4] = {NULL}; /* device: fused K, V; unfused K, V */
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, i % 2 ? SR_F16 : SR_BF16, 2, NS, i % 2 ? 2 : 3, kw, &P[i]), SR_OK);
        size_t n = (size_t)M * ld;
        float *x = rand_host(n, 1.0f), *d1 = dev(g, x, n), *d2 = dev(g, x, n);
        CU_ASSERT_EQUAL(g->rope_kv(&b, H, G, hd, dinv, d1, ld, d1 + qw, ld, d1 + qw + kw, ld, P[0], P[1], 1), SR_OK);
        CU_ASSERT_EQUAL(g->rope(&b, H + G, hd, dinv, d2, ld), SR_OK);
        CU_ASSERT_EQUAL(g->kv_write2(P[2], P[3], 1, &b, d2 + qw, ld, d2 + qw + kw, ld), SR_OK);
        for (int i = 0; i < 2; i++) {
            char *h1 = malloc(P[i]->bytes), *h2 = malloc(P[i]->bytes);
            CU_ASSERT_EQUAL(g->download(h1, P[i]->data, P[i]->bytes), SR_OK);
            CU_ASSERT_EQUAL(g->download(h2, P[i + 2]->data, P[i]->bytes), SR_OK);
            bad += memcmp(h1, h2, P[i]->bytes) != 0;
            free(h1); free(h2);
        }
        float *y1 = back(g, d1, n), *y2 = back(g, d2, n);
        for (int r = 0; r < M; r++) {
            bad += !agree(y1 + (size_t)r * ld, y2 + (size_t)r * ld, (size_t)qw, -1.0, "rope_kv q, against rope");
            bad += !agree(y1 + (size_t)r * ld + qw, x + (size_t)r * ld + qw, (size_t)(2 * kw + 1), -1.0,
                          "rope_kv: k and v as they were");
        }
        sr_kpool *Kc = NULL, *Vc = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, SR_BF16, 2, NS, 3, kw, &Kc), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, SR_F16, 2, NS, 2, kw, &Vc), SR_OK);
        CU_ASSERT_EQUAL(c->rope_kv(&b, H, G, hd, inv, x, ld, x + qw, ld, x + qw + kw, ld, Kc, Vc, 1), SR_OK);
        for (int r = 0; r < M; r++)
            bad += !agree(y1 + (size_t)r * ld, x + (size_t)r * ld, (size_t)qw, 4e-6, "rope_kv q, against the CPU");
        sr_kpool_free(c, Kc); sr_kpool_free(c, Vc);
        free(x); free(y1); free(y2);
        g->free(d1); g->free(d2); g->free(dinv);
        for (int i = 0; i < 4; i++) sr_kpool_free(g, P[i]);
    }
    /* conv_dw with state, two calls */
    {
        const int C = 6, K = 4, ld = C + 2;
        sr_kpool *pc = NULL, *pg = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, SR_F32, 1, NS, K - 1, C, &pc), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_F32, 1, NS, K - 1, C, &pg), SR_OK);
        g->zero(pg->data, pg->bytes);
        memset(pc->data, 0, pc->bytes);
        float *w = rand_host((size_t)C * K, 1.0f), *bias = rand_host((size_t)C, 1.0f);
        float *dw = dev(g, w, (size_t)C * K), *dbias = dev(g, bias, (size_t)C);
        for (int call = 0; call < 2; call++) {
            size_t n = (size_t)M * ld;
            float *x = rand_host(n, 1.0f), *dx = dev(g, x, n);
            float *yc = calloc(n, sizeof(float)), *dy = dev(g, yc, n);
            CU_ASSERT_EQUAL(c->conv_dw(&b, C, K, x, ld, w, bias, pc, 0, yc, ld), SR_OK);
            CU_ASSERT_EQUAL(g->conv_dw(&b, C, K, dx, ld, dw, dbias, pg, 0, dy, ld), SR_OK);
            float *yg = back(g, dy, n);
            bad += !agree(yg, yc, n, 4e-6, "conv_dw (1,000 sequences)");
            free(x); free(yc); free(yg);
            g->free(dx); g->free(dy);
        }
        float *sg = back(g, pg->data, pg->bytes / sizeof(float));
        bad += !agree(sg, pc->data, pc->bytes / sizeof(float), 0.0, "conv_dw state");
        free(sg); free(w); free(bias);
        g->free(dw); g->free(dbias);
        sr_kpool_free(c, pc);
        sr_kpool_free(g, pg);
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(row0); free(slot); free(pos);
}

/* ---- pools: kv_write, attn ------------------------------------------------------------------- */

/* n random K and V rows at positions 0 .. n - 1 of slot `slot`, layer `layer`, written through
 * both tables into their pools P = {K cpu, V cpu, K cuda, V cuda} (width kw; a ring keeps the
 * last of them): the CPU's by two kv_writes, the device's by one kv_write2. */
static void kv_fill_both(const sr_kernels *c, const sr_kernels *g, sr_kpool *const P[4], int layer,
                         int slot, int n, int kw)
{
    int row0[2] = {0, n}, sl[1] = {slot};
    int64_t pos[1] = {0};
    sr_kbatch b = {.n_seq = 1, .row0 = row0, .slot = sl, .pos = pos};
    float *k = rand_host((size_t)n * kw, 1.0f), *v = rand_host((size_t)n * kw, 1.0f);
    float *dk = dev(g, k, (size_t)n * kw), *dv = dev(g, v, (size_t)n * kw);
    CU_ASSERT_EQUAL(c->kv_write(P[0], layer, &b, k, kw), SR_OK);
    CU_ASSERT_EQUAL(c->kv_write(P[1], layer, &b, v, kw), SR_OK);
    CU_ASSERT_EQUAL(g->kv_write2(P[2], P[3], layer, &b, dk, kw, dv, kw), SR_OK); /* one launch */
    free(k); free(v);
    g->free(dk); g->free(dv);
}

/* Attention of M query rows (random, stride ld = w + pad) through both tables (ag: the device
 * copy of a's pointer fields) over pools P at `layer`, the device's in each of its kernel
 * forms (narrow, wide, grouped: GQA without rel-pos whose scores fit, else narrow; split): 0
 * when every output row of each has the CPU's bits. */
static int attn_both(const sr_kernels *c, const sr_kernels *g, const sr_kattn *a,
                     const sr_kattn *ag, const sr_kbatch *b, sr_kpool *const P[4], int layer,
                     int M, int w, int pad, float mag, const char *what)
{
    const int ld = w + pad;
    size_t n = (size_t)M * ld;
    float *q = rand_host(n, mag), *dq = dev(g, q, n);
    float *oc = malloc(n * sizeof(float)), *dout = g->alloc(n * sizeof(float));
    CU_ASSERT_EQUAL(c->attn(a, b, q, ld, P[0], P[1], layer, oc, ld), SR_OK);
    int bad = 0;
    const int prev = attn_form(-1);
    static const int forms[] = {0, 1, 3, 4, 5}; /* narrow, wide, grouped, split, rows (where they apply) */
    for (int fi = 0; fi < 5; fi++) {
        attn_form(forms[fi]);
        g->zero(dout, n * sizeof(float));
        CU_ASSERT_EQUAL(g->attn(ag, b, dq, ld, P[2], P[3], layer, dout, ld), SR_OK);
        float *og = back(g, dout, n);
        for (int r = 0; r < M; r++)
            bad += !agree(og + (size_t)r * ld, oc + (size_t)r * ld, (size_t)w, -1.0, what);
        free(og);
    }
    attn_form(prev);
    free(q); free(oc);
    g->free(dq); g->free(dout);
    return bad;
}

/* Both tables' pools (f32 / f16 / bf16) filled through kv_write with more positions than ring
 * rows (wrap-around): the same bytes; then attention of three sequences of different lengths,
 * slots and positions in one call, plain with GQA and with rel-pos, an empty range among them. */
static void test_attn(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    static const sr_dtype dts[] = {SR_F32, SR_F16, SR_BF16};
    int bad = 0;
    for (int di = 0; di < 3; di++)
        for (int rel = 0; rel < 2; rel++) {
            const int H = 4, G = rel ? 4 : 2, hd = 16, w = H * hd, kw = G * hd, rows = 20, slots = 3;
            sr_kpool *Kc, *Vc, *Kg, *Vg;
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, dts[di], 2, slots, rows, kw, &Kc), SR_OK);
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, dts[di], 2, slots, rows, kw, &Vc), SR_OK);
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, dts[di], 2, slots, rows, kw, &Kg), SR_OK);
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, dts[di], 2, slots, rows, kw, &Vg), SR_OK);
            /* history: slot s holds positions [0, 30 + s) (the last 20 of them) */
            sr_kpool *const P[4] = {Kc, Vc, Kg, Vg};
            for (int s = 0; s < slots; s++) kv_fill_both(c, g, P, 1, s, 30 + s, kw);
            /* the device pools hold the same bytes */
            for (int i = 0; i < 2; i++) {
                char *hb = malloc(P[2 + i]->bytes);
                CU_ASSERT_EQUAL(g->download(hb, P[2 + i]->data, P[2 + i]->bytes), SR_OK);
                bad += memcmp(hb, P[i]->data, P[i]->bytes) != 0;
                free(hb);
            }
            /* queries: 3 sequences (slots 2, 0, 1) of 4, 1, 6 new rows at their ends */
            int row0[4] = {0, 4, 5, 11}, slot[3] = {2, 0, 1};
            int64_t pos[3] = {28, 29, 25}, lo[11], hi[11];
            for (int s = 0, r = 0; s < 3; s++)
                for (int i = 0; i < row0[s + 1] - row0[s]; i++, r++) {
                    int64_t p = pos[s] + i;
                    hi[r] = p + 1;
                    lo[r] = hi[r] - 1 - rndi(rows - 1);
                    int64_t oldest = 30 + slot[s] - rows; /* the ring holds [oldest, 30 + slot) */
                    if (lo[r] < oldest) lo[r] = oldest;
                    if (r == 4) lo[r] = hi[r]; /* an empty range: a zero row */
                }
            sr_kbatch b = {.n_seq = 3, .row0 = row0, .slot = slot, .pos = pos};
            int nrel = 2 * rows + 1;
            float *relh = rand_host((size_t)nrel * w, 1.0f), *u = rand_host((size_t)w, 0.5f), *v = rand_host((size_t)w, 0.5f);
            float *drel = dev(g, relh, (size_t)nrel * w), *du = dev(g, u, (size_t)w), *dv = dev(g, v, (size_t)w);
            sr_kattn a = {.n_head = H, .n_kv_head = G, .head_dim = hd, .scale = 0.25f, .lo = lo, .hi = hi};
            if (rel) {
                a.rel = relh;
                a.rel_max = rows;
                a.rel_min = -rows;
                a.pos_u = u;
                a.pos_v = v;
            }
            sr_kattn ag = a;
            if (rel) {
                ag.rel = drel;
                ag.pos_u = du;
                ag.pos_v = dv;
            }
            bad += attn_both(c, g, &a, &ag, &b, P, 1, 11, w, 3, 2.0f, "attn");
            free(relh); free(u); free(v);
            g->free(drel); g->free(du); g->free(dv);
            sr_kpool_free(c, Kc); sr_kpool_free(c, Vc); sr_kpool_free(g, Kg); sr_kpool_free(g, Vg);
        }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Attention at the backends' sizes, bit for bit against the CPU: head_dim 128 with GQA over a
 * bf16 ring that has wrapped (Voxtral's decoder), 64 (Whisper), 200 (a second column per
 * thread), 300 (above 2 x 128: the direct value reads), and a range of 8,200 keys (more
 * scores than shared memory keeps: the chunked second pass). Two slots of different history;
 * one sequence of 1 row over its whole ring, one of 3 rows over random ranges. */
static void test_attn_long(void)
{
    const sr_kernels *g = gpu(), *c = sr_kernels_cpu();
    if (!g) return;
    static const struct {
        sr_dtype dt;
        int H, G, hd, rows, npos;
    } cs[] = {{SR_BF16, 8, 2, 128, 800, 1000}, {SR_F32, 6, 6, 64, 700, 700},
              {SR_F16, 2, 1, 200, 300, 350},   {SR_F32, 2, 2, 300, 200, 250},
              {SR_BF16, 2, 1, 64, 8200, 8300}};
    int bad = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        const int H = cs[ci].H, G = cs[ci].G, hd = cs[ci].hd, rows = cs[ci].rows;
        const int w = H * hd, kw = G * hd, slots = 2;
        sr_kpool *Kc, *Vc, *Kg, *Vg;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, cs[ci].dt, 1, slots, rows, kw, &Kc), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(c, cs[ci].dt, 1, slots, rows, kw, &Vc), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, cs[ci].dt, 1, slots, rows, kw, &Kg), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, cs[ci].dt, 1, slots, rows, kw, &Vg), SR_OK);
        int64_t have[2]; /* slot s holds positions [have[s] - rows, have[s]) (or from 0) */
        sr_kpool *const P[4] = {Kc, Vc, Kg, Vg};
        for (int sl = 0; sl < slots; sl++) {
            have[sl] = cs[ci].npos - 37 * sl;
            kv_fill_both(c, g, P, 0, sl, (int)have[sl], kw);
        }
        /* sequence 0: slot 1, one row at its last position over everything the ring holds;
         * sequence 1: slot 0, three rows ending at its last position, random ranges */
        int row0[3] = {0, 1, 4}, slot[2] = {1, 0};
        int64_t pos[2] = {have[1] - 1, have[0] - 3}, lo[4], hi[4];
        for (int s = 0, r = 0; s < 2; s++)
            for (int i = 0; i < row0[s + 1] - row0[s]; i++, r++) {
                int64_t p = pos[s] + i, oldest = have[slot[s]] - rows;
                if (oldest < 0) oldest = 0;
                hi[r] = p + 1;
                lo[r] = s == 0 ? oldest : hi[r] - 1 - rndi(rows - 1);
                if (lo[r] < oldest) lo[r] = oldest;
            }
        sr_kbatch b = {.n_seq = 2, .row0 = row0, .slot = slot, .pos = pos};
        sr_kattn a = {.n_head = H, .n_kv_head = G, .head_dim = hd, .scale = 0.125f, .lo = lo, .hi = hi};
        bad += attn_both(c, g, &a, &a, &b, P, 0, 4, w, 5, 1.0f, "attn (long)");
        sr_kpool_free(c, Kc); sr_kpool_free(c, Vc); sr_kpool_free(g, Kg); sr_kpool_free(g, Vg);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The device table's ops refuse bad arguments as the CPU's do (the same messages). */
static void test_bad_args(void)
{
    const sr_kernels *g = gpu();
    if (!g) return;
    float host[12] = {0};
    sr_kweight *W = NULL;
    TEST_ASSERT_ERR(g->weight_create(host, SR_F32, 0, 4, NULL, SR_KMUL_EXACT, &W), SR_ERR_ARG, "weight_create: shape");
    TEST_ASSERT_ERR(g->weight_create(host, SR_F32, 3, 4, NULL, SR_KMUL_BF16, &W), SR_ERR_ARG,
                    "weight_create: bf16 products need a bf16 or i8 weight");
    CU_ASSERT_EQUAL_FATAL(g->weight_create(host, SR_F32, 3, 4, NULL, SR_KMUL_EXACT, &W), SR_OK);
    float *x = g->alloc(64 * sizeof(float));
    TEST_ASSERT_ERR(g->gemm(-1, x, 4, W, NULL, SR_ACT_NONE, 1, 0, x + 32, 3), SR_ERR_ARG, "gemm: M");
    TEST_ASSERT_ERR(g->gemm(2, x, 3, W, NULL, SR_ACT_NONE, 1, 0, x + 32, 3), SR_ERR_ARG, "gemm: ldx = 3 < k = 4");
    int32_t ids[2] = {1, 3};
    TEST_ASSERT_ERR(g->gather(W, ids, 2, x, 4), SR_ERR_ARG, "gather: ids[1] = 3 out of [0, 3)");
    TEST_ASSERT_ERR(g->softmax(-1, 4, x, 4), SR_ERR_ARG, "softmax");
    g->weight_free(W);
    g->weight_free(NULL);
    g->free(x);
    /* SRKIT_CUDA_CHECK=1: a host pointer is refused by name, device pointers pass */
    setenv("SRKIT_CUDA_CHECK", "1", 1);
    const sr_kernels *gc = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kernels_cuda(&gc), SR_OK);
    unsetenv("SRKIT_CUDA_CHECK");
    float hx[4] = {1, 2, 3, 4}, *dx = dev(gc, hx, 4), *dy = gc->alloc(4 * sizeof(float));
    TEST_ASSERT_ERR(gc->scale(1, 4, 2.0f, hx, 4), SR_ERR_ARG, "cuda scale: y");
    TEST_ASSERT_ERR(gc->copy2d(1, 4, hx, 4, dy, 4), SR_ERR_ARG, "cuda copy2d: x");
    CU_ASSERT_EQUAL(gc->copy2d(1, 4, dx, 4, dy, 4), SR_OK);
    gc->free(dx);
    gc->free(dy);
}

/* The three backends on the device: the CPU's tokens and timeline length (the same cases
 * kernels_guard runs on cpu-guard). */
static void test_backends(void)
{
    if (!gpu()) return;
    test_backends_match_cpu("cuda");
}

/* sr_kernels.mem: the table's live and peak device bytes follow alloc / free and weights;
 * the CPU table has none (its memory is in the peak RSS); sr_kpool_device_bytes counts the
 * pools of device tables only. */
static void test_mem(void)
{
    CU_ASSERT_PTR_NULL(sr_kernels_cpu()->mem);
    /* pools on the CPU are not device bytes */
    size_t pools0 = sr_kpool_device_bytes();
    sr_kpool *cp = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(sr_kernels_cpu(), SR_F32, 2, 3, 4, 8, &cp), SR_OK);
    CU_ASSERT_EQUAL(sr_kpool_device_bytes(), pools0);
    sr_kpool_free(sr_kernels_cpu(), cp);
    const sr_kernels *g = gpu();
    if (!g) return;
    sr_kpool *gp = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(g, SR_BF16, 2, 3, 4, 8, &gp), SR_OK);
    CU_ASSERT_EQUAL(sr_kpool_device_bytes(), pools0 + gp->bytes);
    sr_kpool_free(g, gp);
    CU_ASSERT_EQUAL(sr_kpool_device_bytes(), pools0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g->mem);
    size_t live0 = 0, peak0 = 0, live = 0, peak = 0;
    g->mem(&live0, &peak0);
    void *p = g->alloc(3u << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    g->mem(&live, &peak);
    CU_ASSERT_EQUAL(live, live0 + (3u << 20));
    CU_ASSERT(peak >= live && peak >= peak0);
    float hw[64 * 32];
    for (int i = 0; i < 64 * 32; i++) hw[i] = rnd();
    sr_kweight *W = NULL;
    CU_ASSERT_EQUAL_FATAL(g->weight_create(hw, SR_F32, 64, 32, NULL, SR_KMUL_EXACT, &W), SR_OK);
    size_t live2 = 0;
    g->mem(&live2, &peak);
    CU_ASSERT_EQUAL(live2, live + W->bytes);
    g->weight_free(W);
    g->free(p);
    g->mem(&live, &peak);
    CU_ASSERT_EQUAL(live, live0);
    CU_ASSERT(peak >= live2);
}

/* ---- recording: graph_begin .. graph_end as CUDA graphs ------------------------------------ */

#ifdef SR_WITH_CUDA
/* One attention layer's ops over M rows of one stream at positions p0.. (slot 0): RMSNorm, the
 * bf16 product q|k|v (M <= 16: the mma kernel reading x itself; more: a pool block of staged
 * operands inside the call), RoPE, K and V into the rings, attention over [p0, p + 1), SiLU GLU,
 * then h zeroed, h += attention and h copied over the GLU half of out; out copied (act none)
 * to qkv's start, halved, and copied back (each of zero, add, copy2d, the copies and the scale
 * changes the result if it is lost); the argmax of each row; out [M, 2 hd] (attention |
 * attention), ids [M]. */
typedef struct {
    int H, hd;
    sr_kweight *W;                  /* [3 H hd, H hd] bf16 */
    float *x, *g, *inv, *h, *qkv, *out; /* device */
    int32_t *ids;
    sr_kpool *K, *V;
} rec_layer;

static sr_status rec_ops(const sr_kernels *k, const rec_layer *L, int M, int64_t p0, int64_t *lo,
                         int64_t *hi)
{
    int w = L->H * L->hd, row0[2] = {0, M}, slot[1] = {0};
    int64_t pos[1] = {p0};
    sr_kbatch b = {.n_seq = 1, .row0 = row0, .slot = slot, .pos = pos};
    for (int r = 0; r < M; r++) {
        lo[r] = p0;
        hi[r] = p0 + r + 1;
    }
    sr_kattn a = {.n_head = L->H, .n_kv_head = L->H, .head_dim = L->hd, .scale = 0.125f, .lo = lo, .hi = hi};
    sr_status st = k->norm(SR_NORM_RMS, M, w, L->x, w, L->g, NULL, 1e-5f, NULL, 0, L->h, w);
    if (!st) st = k->gemm(M, L->h, w, L->W, NULL, SR_ACT_NONE, 1.0f, 0.0f, L->qkv, 3 * w);
    if (!st) st = k->rope(&b, 2 * L->H, L->hd, L->inv, L->qkv, 3 * w);
    if (!st) st = k->kv_write(L->K, 0, &b, L->qkv + w, 3 * w);
    if (!st) st = k->kv_write(L->V, 0, &b, L->qkv + 2 * w, 3 * w);
    if (!st) st = k->attn(&a, &b, L->qkv, 3 * w, L->K, L->V, 0, L->out, 2 * w);
    if (!st) st = k->glu(SR_GLU_SILU, M, w, L->qkv, 3 * w, L->qkv + w, 3 * w, L->out + w, 2 * w);
    if (!st) k->zero(L->h, (size_t)M * w * sizeof(float));
    if (!st) st = k->add(M, w, L->out, 2 * w, 1.0f, L->h, w);
    if (!st) st = k->copy2d(M, w, L->h, w, L->out + w, 2 * w);
    if (!st) st = k->act(SR_ACT_NONE, (size_t)M * 2 * w, L->out, L->qkv);
    if (!st) st = k->scale(M, 2 * w, 0.5f, L->out, 2 * w);
    if (!st) st = k->act(SR_ACT_NONE, (size_t)M * 2 * w, L->qkv, L->out);
    if (!st) st = k->topk(M, 2 * w, 1, L->out, 2 * w, L->ids, NULL);
    return st;
}

static void rec_free(const sr_kernels *g, rec_layer *L)
{
    g->free(L->x); g->free(L->g); g->free(L->inv); g->free(L->h); g->free(L->qkv);
    g->free(L->out); g->free(L->ids);
    sr_kpool_free(g, L->K);
    sr_kpool_free(g, L->V);
    g->weight_free(L->W);
    *L = (rec_layer){.H = L->H, .hd = L->hd};
}

/* The layer the recording tests run: 2 heads of 32, up to REC_MMAX rows. */
#define REC_H 2
#define REC_HD 32
#define REC_MMAX 40

/* L's weight, norm gains, RoPE frequencies, buffers for up to REC_MMAX rows and bf16 rings of 64
 * rows, random; returns the host copy of x [REC_MMAX, H hd] (the caller frees it), or NULL with
 * nothing left allocated. */
static float *rec_make(const sr_kernels *g, rec_layer *L)
{
    *L = (rec_layer){.H = REC_H, .hd = REC_HD};
    const int hd = REC_HD, w = REC_H * REC_HD, mmax = REC_MMAX;
    uint16_t *hw = malloc((size_t)3 * w * w * sizeof(uint16_t));
    float *hx = rand_host((size_t)mmax * w, 1.0f), *hg = rand_host((size_t)w, 1.0f), inv[64];
    if (!hw || !hx || !hg || hd > 128) goto fail;
    for (int i = 0; i < 3 * w * w; i++) hw[i] = sr_f32_to_bf16(0.2f * rnd());
    for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
    if (g->weight_create(hw, SR_BF16, 3 * w, w, NULL, SR_KMUL_BF16, &L->W)) goto fail;
    L->x = dev(g, hx, (size_t)mmax * w);
    L->g = dev(g, hg, (size_t)w);
    L->inv = dev(g, inv, (size_t)hd / 2);
    L->h = g->alloc((size_t)mmax * w * sizeof(float));
    L->qkv = g->alloc((size_t)mmax * 3 * w * sizeof(float));
    L->out = g->alloc((size_t)mmax * 2 * w * sizeof(float));
    L->ids = g->alloc((size_t)mmax * sizeof(int32_t));
    if (!L->x || !L->g || !L->inv || !L->h || !L->qkv || !L->out || !L->ids ||
        sr_kpool_create(g, SR_BF16, 1, 2, 64, w, &L->K) ||
        sr_kpool_create(g, SR_BF16, 1, 2, 64, w, &L->V))
        goto fail;
    free(hw);
    free(hg);
    return hx;
fail:
    rec_free(g, L);
    free(hw);
    free(hx);
    free(hg);
    return NULL;
}

/* iters layers over M rows at positions p0, p0 + 3, ..., each from cleared rings, eagerly or
 * each recorded into *rec; with hx, x is uploaded from it first and each layer ends with
 * x += 0.5 (its attention output), so every layer reads what the one before wrote; the last
 * layer's outputs downloaded into out / ids (host). */
static sr_status rec_chain(const sr_kernels *g, const rec_layer *L, const float *hx, int M,
                           int64_t p0, int iters, sr_kgraph **rec, float *out, int32_t *ids)
{
    const int w = L->H * L->hd;
    int64_t lo[64], hi[64];
    sr_status st = hx ? g->upload(L->x, hx, (size_t)M * w * sizeof(float)) : SR_OK;
    for (int it = 0; it < iters && !st; it++) {
        if (!(st = sr_kpool_clear(g, L->K, 0)) && !(st = sr_kpool_clear(g, L->V, 0)) && rec)
            st = sr_kgraph_begin(g, rec);
        if (st) break;
        st = rec_ops(g, L, M, p0 + 3 * it, lo, hi);
        if (!st && hx) st = g->add(M, w, L->out, 2 * w, 0.5f, L->x, w);
        if (rec) st = sr_kgraph_end(g, *rec, st);
    }
    if (!st) st = g->download(out, L->out, (size_t)M * 2 * w * sizeof(float));
    if (!st) st = g->download(ids, L->ids, (size_t)M * sizeof(int32_t));
    return st;
}
#endif

/* A recorded sequence (sr_cuda_graphs(1)) gives the bits of the same ops run one by one: first
 * recorded (instantiated), again at other positions (patched into the executable graph: an
 * update, no new instantiation), with 3 rows, with 39 rows (the product's operands staged in a
 * pool block, allocated outside the graph and freed after its launch: one more kernel, a new
 * graph) and again (patched), then 1 row again (its graph kept: patched), and with recording
 * off (begin / end do nothing, the ops run). Inside a recording the calls a graph cannot hold
 * are refused by name. */
static void graph_runs(int mode)
{
    const sr_kernels *g = gpu();
    if (!g) return;
#ifdef SR_WITH_CUDA
    const int w = REC_H * REC_HD, MMAX = REC_MMAX;
    rec_layer L;
    float *hx = rec_make(g, &L), *oe = malloc((size_t)MMAX * 2 * w * sizeof(float)),
          *orc = malloc((size_t)MMAX * 2 * w * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hx);
    int32_t ie[64], ir[64];
    CU_ASSERT_FATAL(oe && orc);

    const int prev = sr_cuda_graphs(mode);
    sr_kgraph *rec = NULL;
    unsigned long long up0, built0, up, built, up_prev, built_prev, pat0, pat, pat_prev;
    sr_cuda_graph_stats gs;
    sr_cuda_graph_counts(&gs);
    up_prev = up0 = gs.updated;
    built_prev = built0 = gs.built;
    pat_prev = pat0 = gs.patched;
    const unsigned long long timed0 = gs.timed;
    /* M, first position, graphs: first recording, the same shape again (patched), more rows */
    static const struct { int M; int64_t p0; } runs[] = {{1, 5}, {1, 6}, {1, 40}, {3, 7}, {MMAX - 1, 2},
                                                         {MMAX - 1, 9}, {1, 11}};
    int bad = 0;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        int M = runs[r].M;
        CU_ASSERT_EQUAL(rec_chain(g, &L, NULL, M, runs[r].p0, 1, NULL, oe, ie), SR_OK);
        sr_status st = rec_chain(g, &L, NULL, M, runs[r].p0, 1, &rec, orc, ir);
        if (st) printf("\n      recorded run %zu: %s", r, sr_last_error());
        CU_ASSERT_EQUAL(st, SR_OK);
        bad += !agree(orc, oe, (size_t)M * 2 * w, -1.0, "recorded layer");
        bad += memcmp(ir, ie, (size_t)M * sizeof(int32_t)) != 0;
        sr_cuda_graph_counts(&gs);
        up = gs.updated;
        built = gs.built;
        pat = gs.patched;
        if (r == 0 || r == 4) /* a first recording, and 39 rows: one more kernel (the staging) */
            CU_ASSERT(built == built_prev + 1);
        if (r == 1 || r == 2 || r == 5 || r == 6) /* a shape recorded before (r 6: the 1-row one,
                                                   * kept beside the 39-row one): patched, no new
                                                   * graph (the staging block is no node of it) */
            CU_ASSERT(up == up_prev + 1 && built == built_prev);
        if (mode == 2 && (r == 1 || r == 2)) /* replayed: the moved positions' launches set anew */
            CU_ASSERT(pat > pat_prev);
        if (mode != 2) CU_ASSERT(pat == pat_prev);
        up_prev = up;
        built_prev = built;
        pat_prev = pat;
        printf("%s recorded M %d: %llu updated, %llu built, %llu nodes set so far", r ? ";" : "\n     ",
               M, up - up0, built - built0, pat - pat0);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(built > built0);
    /* each run downloads its results before the next graph_end: every launch but the last
     * was complete when read (the last is read when rec is freed, below) */
    sr_cuda_graph_counts(&gs);
    CU_ASSERT(gs.timed >= timed0 + sizeof runs / sizeof runs[0] - 1);
    CU_ASSERT(gs.device_ms >= 0.0);
    /* refused inside a recording, by name; the recording is then dropped */
    CU_ASSERT_EQUAL_FATAL(sr_kgraph_begin(g, &rec), SR_OK);
    TEST_ASSERT_ERR(g->upload(L.x, hx, sizeof(float)), SR_ERR_ARG, "cuda upload: called while recording");
    TEST_ASSERT_ERR(g->download(orc, L.out, sizeof(float)), SR_ERR_ARG, "cuda download: called while recording");
    TEST_ASSERT_ERR(g->sync(), SR_ERR_ARG, "cuda sync: called while recording");
    TEST_ASSERT_ERR(g->graph_begin(&rec), SR_ERR_ARG, "cuda graph_begin: this thread is recording already");
    CU_ASSERT_PTR_NULL(g->alloc(64));
    TEST_ASSERT_ERR(sr_kgraph_end(g, rec, SR_OK), SR_ERR_ARG, "cuda alloc: called while recording");
    /* recording off: begin and end pass, the ops run as called */
    sr_cuda_graphs(0);
    sr_kgraph *off = NULL;
    CU_ASSERT_EQUAL(rec_chain(g, &L, NULL, 3, 9, 1, NULL, oe, ie), SR_OK);
    CU_ASSERT_EQUAL(rec_chain(g, &L, NULL, 3, 9, 1, &off, orc, ir), SR_OK);
    CU_ASSERT_PTR_NULL(off);
    CU_ASSERT(agree(orc, oe, (size_t)3 * 2 * w, -1.0, "unrecorded layer"));
    sr_cuda_graphs(prev);
    g->graph_free(rec);
    g->graph_free(NULL);
    free(hx); free(oe); free(orc);
    rec_free(g, &L);
#endif
}

static void test_graph(void) { graph_runs(1); }

/* The same runs replayed (sr_cuda_graphs(2)): launches kept, not captured; a shape seen before
 * has only its changed launches set anew (more than none when the positions moved). */
static void test_graph_replay(void) { graph_runs(2); }

/* Overlapping launches (sr_cuda_pdl(1)) give the bits of plain ones: a chain of 8 layers, each
 * the recording test's ops and then x += 0.5 (attention output), so every kernel reads what the
 * one queued just before it wrote (a kernel reading its inputs before its sr_pdl_enter returned
 * would read stale rows), over 1, 3 and 39 rows (the product's mma kernel reading x itself with
 * its weight prefetch, and staged), run eagerly, recorded and replayed, against the chain with overlap
 * off. On a device before compute capability 9.0 the setting is ignored (plain launches). */
static void test_pdl(void)
{
    const sr_kernels *g = gpu();
    if (!g) return;
#ifdef SR_WITH_CUDA
    const size_t n = (size_t)REC_MMAX * 2 * REC_H * REC_HD;
    rec_layer L;
    float *hx = rec_make(g, &L), *oe = malloc(n * sizeof(float)), *op = malloc(n * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hx);
    int32_t ie[64], ip[64];
    CU_ASSERT_FATAL(oe && op);
    const int prev = sr_cuda_pdl(-1), prev_graphs = sr_cuda_graphs(-1);
    sr_kgraph *rec = NULL;
    static const int rows[] = {1, 3, REC_MMAX - 1};
    int bad = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (int recorded = 0; recorded < 3; recorded++) {
            const int M = rows[r];
            sr_cuda_pdl(0);
            sr_cuda_graphs(0);
            CU_ASSERT_EQUAL(rec_chain(g, &L, hx, M, 0, 8, NULL, oe, ie), SR_OK);
            sr_cuda_pdl(1);
            sr_cuda_graphs(recorded);
            sr_status st = rec_chain(g, &L, hx, M, 0, 8, recorded ? &rec : NULL, op, ip);
            if (st) printf("\n      overlapping chain of %d rows: %s", M, sr_last_error());
            CU_ASSERT_EQUAL(st, SR_OK);
            bad += !agree(op, oe, (size_t)M * 2 * REC_H * REC_HD, -1.0,
                          recorded == 2 ? "replayed overlapping chain" :
                          recorded ? "recorded overlapping chain" : "overlapping chain");
            bad += memcmp(ip, ie, (size_t)M * sizeof(int32_t)) != 0;
        }
    CU_ASSERT_EQUAL(bad, 0);
    /* still on: the runtime took the attribute (a refusal turns the setting off) */
    CU_ASSERT_EQUAL(sr_cuda_pdl(-1), 1);
    sr_cuda_pdl(prev);
    sr_cuda_graphs(prev_graphs);
    g->graph_free(rec);
    free(hx); free(oe); free(op);
    rec_free(g, &L);
#endif
}

void test_register_ops_cuda(void)
{
    TEST_SUITE("kernels_cuda", {"gemm_gather", test_gemm}, {"gemm_stacked", test_gemm_stacked},
               {"gemm_operands", test_gemm_operands},
               {"row_ops", test_rows},
               {"conv_rope", test_conv_rope}, {"many_seqs", test_many_seqs}, {"kv_write_attn", test_attn}, {"attn_long", test_attn_long}, {"bad_args", test_bad_args},
               {"memory", test_mem}, {"recording", test_graph}, {"replayed_recording", test_graph_replay},
               {"overlapping_launches", test_pdl},
               {"backends_on_cuda", test_backends});
}
