/*
 * test_ops_rows.c — the row ops of the CPU kernel table (kernels/cpu/rowops.c: norm, act, glu,
 * add, scale, rope, conv2d_s2, conv_dw, batchnorm, lstm_cell, softmax, logsoftmax,
 * topk, kv_write), suite kernels_ops_rows.
 *
 * Every op runs through the table (sr_kernels_cpu()) on every vector path this CPU has (auto,
 * portable, AVX2, AVX-512, and portable with kernels/ops.h's portable exp/erf as well) over
 * random shapes: widths around the vector lengths (tails), row strides whose padding holds NaN
 * (a read past the row poisons a result) and output padding plus a tail holding a sentinel that
 * must survive. Each output is checked against the double-precision reference of
 * tests/ref_rows.c, and the paths must agree bit for bit (the vector kernels evaluate the
 * scalar formula per lane; only the ops.h exp/erf of GELU, SiLU and softmax differ on the fully
 * portable path). The worst error is printed per op as a fraction of its bound.
 *
 * Bounds (eps = FLT_EPSILON = 2u; "mag" is the magnitude the roundings scale with, ref_rows.h):
 *   norm        4 eps mag: LayerNorm rounds mean to f32, then x - mu, * inv, * g, + b and * mul
 *               (about 6u of mag); RMSNorm the f32 mean square, + eps, sqrtf, 1 /, two products
 *               and * mul (about 7u of |y|)
 *   act         GELU, SiLU: 5e-7 (1 + |x|), kernels_ops' bound for ops.c's exp / erf; ReLU and
 *               NONE exact
 *   glu         SIGMOID 3 eps |y| + 1e-37 (expf within 1 ulp, 1 +, /); SILU 5e-7 (1 + |a|) |b|
 *               + eps |y| (the SiLU bound carried through one product)
 *   add         2 eps (|y0| + |alpha x|) (two roundings); alpha = 1 is checked bit-exact y0 + x
 *   scale       eps |y| (one rounding)
 *   rope        2 eps (|x1 cos| + |x2 sin|): cosf / sinf within 1 ulp, two products, one sum;
 *               the f32 angle is part of the contract, so the reference uses it too
 *   conv2d_s2   11 eps (|b| + sum |w x|): a 9-product f32 sum then + b errs by gamma_10 ~ 10u
 *               of that; the bound is about twice it, as the sgemm tests' (K + 3) eps
 *   conv_dw     (K + 2) eps (|bias| + sum |w in|), the same reasoning for K products + bias
 *   batchnorm   3 eps (|(x - mean) g / sd| + |b|): sqrtf(var + eps), -, /, *, + (about 5u)
 *   lstm_cell   c: 4 eps (|f c0| + |i g|) (expf, tanhf within 1-2 ulp, then 3 roundings);
 *               h: 4 eps (|f c0| + |i g| + |h|) (tanh' <= 1 carries c's error, plus tanhf, *)
 *   softmax     eps y (6 + |x - max| + sum_j y_j |x_j - max|) + 1e-37: the f32 x - max moves
 *               each exponent by up to u |x - max|, the sum carries the weighted mean of that,
 *               exp8 adds 2 ulp, the normalization 2 roundings; 1e-37 for exp8's flush below
 *               e^-87
 *   logsoftmax  eps (|lse| + |y|): lse rounded to f32 once, then one subtraction
 *   topk, kv_write: exact (indices, values, pool bytes)
 * Row independence: the batch computed with 1 and 3 threads and each row (sequence, channel
 * plane) computed alone must be bit-identical. conv_dw streamed in chunks must equal one call
 * over the whole input (f32 state) and follow the reference with the state rounded as the pool
 * stores it (f16, bf16).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../kernels/cpu/cpu_impl.h"
#include "../kernels/kernels.h"
#include "../kernels/ops.h"
#include "ref_rows.h"
#include "test.h"


#define SENT 12345.0f
#define TAIL 8
#define EPS ((double)FLT_EPSILON)
#define NDIMS ((int)(sizeof dims / sizeof dims[0]))

static const int dims[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 130, 257, 384, 1000};

/* ---- random numbers, buffers ---------------------------------------------------------------- */

static uint64_t rng;
static void seed(uint64_t s) { rng = s * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL; }
static double urand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float frand(double lo, double hi) { return (float)(lo + (hi - lo) * urand()); }
static int irand(int n) { return (int)(urand() * n); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

static float *fdup(const float *a, size_t n)
{
    float *p = xmalloc(n * sizeof(float));
    memcpy(p, a, n * sizeof(float));
    return p;
}

/* [M][ld] + TAIL floats: columns < d uniform in [lo, hi), padding and tail NaN. */
static float *mat(int M, int d, int ld, double lo, double hi)
{
    size_t n = (size_t)M * ld + TAIL;
    float *a = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = NAN;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < d; c++) a[(size_t)r * ld + c] = frand(lo, hi);
    return a;
}

/* An output [M][ld] + TAIL: columns < d NaN (to be overwritten), padding and tail SENT. */
static float *outm(int M, int d, int ld)
{
    size_t n = (size_t)M * ld + TAIL;
    float *a = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = SENT;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < d; c++) a[(size_t)r * ld + c] = NAN;
    return a;
}

/* Padding and tail of an in-place operand set to SENT. */
static void pad_sent(float *a, int M, int d, int ld)
{
    for (int r = 0; r < M; r++)
        for (int c = d; c < ld; c++) a[(size_t)r * ld + c] = SENT;
    for (int i = 0; i < TAIL; i++) a[(size_t)M * ld + i] = SENT;
}

/* Whether padding and tail still hold SENT. */
static int pad_ok(const float *a, int M, int d, int ld)
{
    for (int r = 0; r < M; r++)
        for (int c = d; c < ld; c++)
            if (a[(size_t)r * ld + c] != SENT) return 0;
    for (int i = 0; i < TAIL; i++)
        if (a[(size_t)M * ld + i] != SENT) return 0;
    return 1;
}

static int same_bits(const void *a, const void *b, size_t bytes, const char *what)
{
    if (!memcmp(a, b, bytes)) return 1;
    const unsigned char *x = a, *y = b;
    size_t i = 0;
    while (x[i] == y[i]) i++;
    printf("\n      %s: bytes differ from offset %zu (float %zu)", what, i, i / 4);
    CU_FAIL("bit-identical results expected");
    return 0;
}

/* ---- error accounting ----------------------------------------------------------------------- */

typedef struct {
    const char *what;
    double worst, max_abs;
    long n, bad;
} errs;

/* One output against its reference: NaN must give NaN, an infinity the same infinity, anything
 * else |got - ref| <= bound. */
static void err_add(errs *e, double got, double ref, double bound, const char *ctx, long i)
{
    e->n++;
    int ok;
    double d = 0;
    if (isnan(ref)) {
        ok = isnan(got);
    } else if (isinf(ref)) {
        ok = got == ref;
    } else {
        d = fabs(got - ref);
        ok = d <= bound;
        if (ok) {
            if (d > e->max_abs) e->max_abs = d;
            double q = bound > 0 ? d / bound : 0;
            if (q > e->worst) e->worst = q;
        }
    }
    if (!ok) {
        if (e->bad < 5)
            printf("\n      %s %s [%ld]: got %.9g, want %.9g (|err| %.3g, bound %.3g)", e->what, ctx,
                   i, got, ref, d, bound);
        e->bad++;
    }
}

static void err_done(errs *e, const char *bound)
{
    printf("%-11s max |err| %.3g = %.3f of the bound %s (%ld values)\n      ", e->what,
           e->max_abs, e->worst, bound, e->n);
    CU_ASSERT_EQUAL(e->bad, 0);
    CU_ASSERT(e->n > 0);
}

/* ---- vector paths --------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int hook, ops_portable;
} path_t;

static path_t paths[5];
static int npaths;

static void paths_init(void)
{
    if (npaths) {
        printf("\n      ");
        return;
    }
    static const path_t all[] = {{"auto", 0, 0},   {"portable", 1, 0}, {"avx2", 2, 0},
                                 {"avx512", 3, 0}, {"all-portable", 1, 1}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (sr_cpu_rowops_force(all[i].hook)) paths[npaths++] = all[i];
    sr_cpu_rowops_force(0);
    printf("\n      paths:");
    for (int i = 0; i < npaths; i++) printf(" %s", paths[i].name);
    printf("\n      ");
}

static void path_use(int p)
{
    sr_cpu_rowops_force(paths[p].hook);
    sr_ops_force_portable(paths[p].ops_portable);
}

static void path_reset(void)
{
    sr_cpu_rowops_force(0);
    sr_ops_force_portable(0);
}

/* Whether path p must reproduce path 0 bit for bit: always, unless the op goes through the
 * exp / erf of kernels/ops.h (ops_dep) and p switched those to libm. */
static int path_bitwise(int p, int ops_dep) { return p > 0 && !(ops_dep && paths[p].ops_portable); }

/* ---- norm ----------------------------------------------------------------------------------- */

static void test_norm(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs E = {.what = "norm"};
    for (int trial = 0; trial < 72; trial++) {
        seed(100 + trial);
        sr_norm_kind kind = trial % 2 ? SR_NORM_RMS : SR_NORM_LAYER;
        int M = 1 + irand(5), d = dims[irand(NDIMS)], dense = trial % 4 < 2;
        int ldx = dense ? d : d + irand(4), ldy = dense ? d : d + 1 + irand(3);
        int mode = (trial / 2) % 3; /* no mul, one broadcast mul row, a mul row per row */
        int ld_mul = mode == 2 ? d + irand(3) : 0;
        float eps = kind == SR_NORM_LAYER ? 1e-5f : 1e-6f;
        float *x = mat(M, d, ldx, -3, 3);
        for (int r = 0; r < M; r++)
            for (int c = 0; c < d; c++) x[(size_t)r * ldx + c] += 4.0f * r - 6.0f;
        float *g = mat(1, d, d, 0.5, 1.5), *b = mat(1, d, d, -1, 1);
        float *mul = mode ? mat(mode == 2 ? M : 1, d, mode == 2 ? ld_mul : d, 0.5, 2) : NULL;
        double *ref = xmalloc((size_t)d * sizeof(double)), *mag = xmalloc((size_t)d * sizeof(double));
        float *y0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *y = outm(M, d, ldy);
            CU_ASSERT_EQUAL(k->norm(kind, M, d, x, ldx, g, b, eps, mul, ld_mul, y, ldy), SR_OK);
            for (int r = 0; r < M; r++) {
                ref_norm_row(kind, d, x + (size_t)r * ldx, g, b, eps,
                             mul ? mul + (size_t)r * ld_mul : NULL, ref, mag);
                for (int c = 0; c < d; c++)
                    err_add(&E, y[(size_t)r * ldy + c], ref[c], 4 * EPS * mag[c], paths[p].name,
                            (long)r * d + c);
            }
            CU_ASSERT(pad_ok(y, M, d, ldy));
            if (path_bitwise(p, 0)) same_bits(y, y0, ((size_t)M * ldy) * sizeof(float), "norm paths");
            if (p == 0) y0 = y;
            else free(y);
        }
        path_reset();
        /* in place: x and y alias */
        float *z = fdup(x, (size_t)M * ldx + TAIL);
        CU_ASSERT_EQUAL(k->norm(kind, M, d, z, ldx, g, b, eps, mul, ld_mul, z, ldx), SR_OK);
        for (int r = 0; r < M; r++)
            same_bits(z + (size_t)r * ldx, y0 + (size_t)r * ldy, (size_t)d * sizeof(float),
                      "norm in place");
        free(x); free(g); free(b); free(mul); free(ref); free(mag); free(y0); free(z);
    }
    err_done(&E, "4 eps mag");
}

/* ---- act ------------------------------------------------------------------------------------ */

static void test_act(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    static const sr_act acts[] = {SR_ACT_NONE, SR_ACT_GELU, SR_ACT_SILU, SR_ACT_RELU};
    static const char *names[] = {"act none", "act gelu", "act silu", "act relu"};
    static const int sizes[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 100, 1000, 4099};
    for (int a = 0; a < 4; a++) {
        errs E = {.what = names[a]};
        int ops_dep = acts[a] == SR_ACT_GELU || acts[a] == SR_ACT_SILU;
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int n = sizes[si];
            seed(200 + si);
            float *x = mat(1, n, n, -8, 8);
            for (int i = 0; i < n; i++) {
                if (i % 97 == 3) x[i] = 0.0f;
                else if (i % 5 == 0) x[i] = frand(-100, 100);
            }
            float *y0 = NULL;
            for (int p = 0; p < npaths; p++) {
                path_use(p);
                float *y = outm(1, n, n);
                CU_ASSERT_EQUAL(k->act(acts[a], (size_t)n, x, y), SR_OK);
                for (int i = 0; i < n; i++) {
                    double bound = ops_dep ? 5e-7 * (1 + fabs((double)x[i])) : 0.0;
                    err_add(&E, y[i], ref_rows_act(acts[a], x[i]), bound, paths[p].name, i);
                }
                CU_ASSERT(pad_ok(y, 1, n, n));
                if (path_bitwise(p, ops_dep)) same_bits(y, y0, (size_t)n * sizeof(float), names[a]);
                if (p == 0) y0 = y;
                else free(y);
            }
            path_reset();
            float *z = fdup(x, (size_t)n + TAIL);
            CU_ASSERT_EQUAL(k->act(acts[a], (size_t)n, z, z), SR_OK); /* in place */
            same_bits(z, y0, (size_t)n * sizeof(float), "act in place");
            free(x); free(y0); free(z);
        }
        err_done(&E, acts[a] == SR_ACT_GELU || acts[a] == SR_ACT_SILU ? "5e-7 (1 + |x|)" : "0");
    }
    /* NaN, signed zero and infinities: ReLU gives +0 for NaN and -0 (x > 0 ? x : 0), NONE
     * copies bits, GELU and SiLU keep NaN */
    float v[5] = {NAN, -0.0f, 1.5f, -INFINITY, INFINITY}, y[5];
    for (int p = 0; p < npaths; p++) {
        path_use(p);
        CU_ASSERT_EQUAL(k->act(SR_ACT_RELU, 5, v, y), SR_OK);
        CU_ASSERT(y[0] == 0.0f && !signbit(y[0]) && y[1] == 0.0f && !signbit(y[1]));
        CU_ASSERT(y[2] == 1.5f && y[3] == 0.0f && y[4] == INFINITY);
        CU_ASSERT_EQUAL(k->act(SR_ACT_NONE, 5, v, y), SR_OK);
        CU_ASSERT_EQUAL(memcmp(v, y, sizeof v), 0);
        CU_ASSERT_EQUAL(k->act(SR_ACT_GELU, 1, v, y), SR_OK);
        CU_ASSERT(isnan(y[0]));
        CU_ASSERT_EQUAL(k->act(SR_ACT_SILU, 1, v, y), SR_OK);
        CU_ASSERT(isnan(y[0]));
    }
    path_reset();
}

/* ---- glu ------------------------------------------------------------------------------------ */

static void test_glu(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    for (int kind = 0; kind < 2; kind++) {
        errs E = {.what = kind ? "glu silu" : "glu sigmoid"};
        for (int trial = 0; trial < 30; trial++) {
            seed(300 + trial);
            int M = 1 + irand(4), d = dims[irand(NDIMS)];
            int lda = d + irand(3), ldb = d + irand(3), ldy = d + irand(3);
            float *a = mat(M, d, lda, -6, 6), *b = mat(M, d, ldb, -6, 6);
            float *y0 = NULL;
            for (int p = 0; p < npaths; p++) {
                path_use(p);
                float *y = outm(M, d, ldy);
                CU_ASSERT_EQUAL(k->glu((sr_glu)kind, M, d, a, lda, b, ldb, y, ldy), SR_OK);
                for (int r = 0; r < M; r++)
                    for (int c = 0; c < d; c++) {
                        double av = a[(size_t)r * lda + c], bv = b[(size_t)r * ldb + c];
                        double ref = ref_glu((sr_glu)kind, av, bv);
                        double bound = kind ? 5e-7 * (1 + fabs(av)) * fabs(bv) + EPS * fabs(ref)
                                            : 3 * EPS * fabs(ref) + 1e-37;
                        err_add(&E, y[(size_t)r * ldy + c], ref, bound, paths[p].name,
                                (long)r * d + c);
                    }
                CU_ASSERT(pad_ok(y, M, d, ldy));
                if (path_bitwise(p, kind == SR_GLU_SILU))
                    same_bits(y, y0, (size_t)M * ldy * sizeof(float), "glu paths");
                if (p == 0) y0 = y;
                else free(y);
            }
            path_reset();
            /* y aliasing a, then b */
            float *za = fdup(a, (size_t)M * lda + TAIL), *zb = fdup(b, (size_t)M * ldb + TAIL);
            CU_ASSERT_EQUAL(k->glu((sr_glu)kind, M, d, za, lda, b, ldb, za, lda), SR_OK);
            CU_ASSERT_EQUAL(k->glu((sr_glu)kind, M, d, a, lda, zb, ldb, zb, ldb), SR_OK);
            for (int r = 0; r < M; r++) {
                same_bits(za + (size_t)r * lda, y0 + (size_t)r * ldy, (size_t)d * 4, "glu y = a");
                same_bits(zb + (size_t)r * ldb, y0 + (size_t)r * ldy, (size_t)d * 4, "glu y = b");
            }
            free(a); free(b); free(y0); free(za); free(zb);
        }
        err_done(&E, kind ? "5e-7 (1 + |a|) |b| + eps |y|" : "3 eps |y|");
    }
}

/* ---- add, scale ----------------------------------------------------------------------------- */

static void test_add_scale(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs EA = {.what = "add"}, ES = {.what = "scale"};
    static const float alphas[] = {1.0f, 0.5f, -1.25f};
    for (int trial = 0; trial < 45; trial++) {
        seed(400 + trial);
        int M = 1 + irand(5), d = dims[irand(NDIMS)], bcast = trial % 3 == 1;
        int ldx = bcast ? 0 : d + irand(3), ldy = d + irand(3);
        float alpha = alphas[trial % 3], s = frand(-3, 3);
        float *x = mat(bcast ? 1 : M, d, bcast ? d : ldx, -5, 5);
        float *yin = mat(M, d, ldy, -5, 5);
        pad_sent(yin, M, d, ldy);
        float *y0 = NULL, *s0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *y = fdup(yin, (size_t)M * ldy + TAIL), *z = fdup(yin, (size_t)M * ldy + TAIL);
            CU_ASSERT_EQUAL(k->add(M, d, x, ldx, alpha, y, ldy), SR_OK);
            CU_ASSERT_EQUAL(k->scale(M, d, s, z, ldy), SR_OK);
            for (int r = 0; r < M; r++)
                for (int c = 0; c < d; c++) {
                    size_t i = (size_t)r * ldy + c;
                    double xv = x[(size_t)r * ldx + c], y0v = yin[i];
                    err_add(&EA, y[i], y0v + alpha * xv,
                            2 * EPS * (fabs(y0v) + fabs(alpha * xv)), paths[p].name, (long)i);
                    if (alpha == 1.0f) CU_ASSERT_EQUAL(y[i], yin[i] + x[(size_t)r * ldx + c]);
                    err_add(&ES, z[i], y0v * s, EPS * fabs(y0v * s), paths[p].name, (long)i);
                }
            CU_ASSERT(pad_ok(y, M, d, ldy));
            CU_ASSERT(pad_ok(z, M, d, ldy));
            if (path_bitwise(p, 0)) {
                same_bits(y, y0, (size_t)M * ldy * 4, "add paths");
                same_bits(z, s0, (size_t)M * ldy * 4, "scale paths");
            }
            if (p == 0) y0 = y, s0 = z;
            else free(y), free(z);
        }
        path_reset();
        free(x); free(yin); free(y0); free(s0);
    }
    err_done(&EA, "2 eps (|y0| + |alpha x|)");
    err_done(&ES, "eps |y|");
}

/* ---- rope ----------------------------------------------------------------------------------- */

static void make_batch(int n_seq, int max_len, int *row0, int64_t *pos, int64_t max_pos)
{
    row0[0] = 0;
    for (int s = 0; s < n_seq; s++) {
        row0[s + 1] = row0[s] + irand(max_len + 1);
        pos[s] = (int64_t)(urand() * (double)max_pos);
    }
}

static float *rope_inv(int hd, double theta)
{
    float *inv = xmalloc((size_t)(hd / 2 + 1) * sizeof(float));
    for (int i = 0; i < hd / 2; i++) inv[i] = (float)pow(theta, -2.0 * i / hd);
    return inv;
}

static void test_rope(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs E = {.what = "rope"};
    static const int hds[] = {2, 4, 8, 16, 34, 64, 128, 130};
    for (int trial = 0; trial < 40; trial++) {
        seed(500 + trial);
        int n_seq = 1 + irand(3), row0[4], slot[3] = {0, 1, 2};
        int64_t pos[3];
        make_batch(n_seq, 5, row0, pos, trial % 2 ? 100000 : 10);
        sr_kbatch b = {n_seq, row0, slot, pos};
        int rows = row0[n_seq], n_head = 1 + irand(4), hd = hds[irand(8)];
        int W = n_head * hd, ldx = W + irand(4);
        float *inv = rope_inv(hd, trial % 3 ? 10000.0 : 1e6);
        float *x = mat(rows, W, ldx, -2, 2);
        pad_sent(x, rows, W, ldx);
        double *ref = xmalloc((size_t)W * sizeof(double)), *mag = xmalloc((size_t)W * sizeof(double));
        float *y0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *y = fdup(x, (size_t)rows * ldx + TAIL);
            CU_ASSERT_EQUAL(k->rope(&b, n_head, hd, inv, y, ldx), SR_OK);
            for (int s = 0; s < n_seq; s++)
                for (int r = row0[s]; r < row0[s + 1]; r++) {
                    ref_rope_row(n_head, hd, inv, pos[s] + (r - row0[s]), x + (size_t)r * ldx, ref, mag);
                    for (int c = 0; c < W; c++)
                        err_add(&E, y[(size_t)r * ldx + c], ref[c], 2 * EPS * mag[c], paths[p].name,
                                (long)r * W + c);
                }
            CU_ASSERT(pad_ok(y, rows, W, ldx));
            if (path_bitwise(p, 0)) same_bits(y, y0, (size_t)rows * ldx * 4, "rope paths");
            if (p == 0) y0 = y;
            else free(y);
        }
        path_reset();
        free(inv); free(x); free(ref); free(mag); free(y0);
    }
    err_done(&E, "2 eps (|x1 cos| + |x2 sin|)");
}

/* ---- conv2d_s2 ------------------------------------------------------------------------------ */

static void test_conv2d(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs E = {.what = "conv2d_s2"};
    static const int Fs[] = {1, 2, 3, 5, 16, 17, 33, 34, 35, 65, 66, 80, 128, 129};
    for (int trial = 0; trial < 48; trial++) {
        seed(700 + trial);
        int C = 1 + irand(5), T = 1 + irand(20), F = Fs[irand(14)], relu = trial % 2;
        int bcast = trial % 3 == 0;
        size_t plane = (size_t)T * F, stride = bcast ? 0 : plane + (size_t)irand(4);
        size_t nin = bcast ? plane : (size_t)C * stride;
        float *in = mat(1, (int)nin, (int)nin, -2, 2);
        if (!bcast) /* the gaps between planes hold NaN */
            for (int c = 0; c < C; c++)
                for (size_t i = plane; i < stride; i++) in[(size_t)c * stride + i] = NAN;
        float *w = mat(C, 9, 9, -1, 1), *b = mat(1, C, C, -1, 1);
        int To = T / 2 + 1, Fo = F / 2 + 1;
        size_t nout = (size_t)C * To * Fo;
        double *ref = xmalloc(nout * sizeof(double)), *mag = xmalloc(nout * sizeof(double));
        ref_conv2d_s2(C, T, F, in, stride, w, b, relu, ref, mag);
        float *y0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *out = outm(1, (int)nout, (int)nout);
            CU_ASSERT_EQUAL(k->conv2d_s2(1, C, T, F, in, 0, stride, w, b, relu, out), SR_OK);
            for (size_t i = 0; i < nout; i++)
                err_add(&E, out[i], ref[i], 11 * EPS * mag[i], paths[p].name, (long)i);
            CU_ASSERT(pad_ok(out, 1, (int)nout, (int)nout));
            if (path_bitwise(p, 0)) same_bits(out, y0, nout * 4, "conv2d_s2 paths");
            if (p == 0) y0 = out;
            else free(out);
        }
        path_reset();
        /* the same image as image 1 of 3 (images 0 and 2 NaN): the same bits, the others'
         * planes NaN, and never read across */
        {
            size_t img = bcast ? nin + 3 : nin + 5;
            float *in3 = malloc(3 * img * sizeof(float)), *out3 = malloc(3 * nout * sizeof(float));
            CU_ASSERT_FATAL(in3 && out3);
            for (size_t i = 0; i < 3 * img; i++) in3[i] = NAN;
            memcpy(in3 + img, in, nin * sizeof(float));
            CU_ASSERT_EQUAL(k->conv2d_s2(3, C, T, F, in3, img, stride, w, b, relu, out3), SR_OK);
            same_bits(out3 + nout, y0, nout * 4, "conv2d_s2 image 1 of 3");
            int nan_ok = 1;
            for (size_t i = 0; i < nout; i++) nan_ok &= isnan(out3[i]) && isnan(out3[2 * nout + i]);
            CU_ASSERT(nan_ok || relu); /* ReLU turns NaN into 0 */
            free(in3);
            free(out3);
        }
        free(in); free(w); free(b); free(ref); free(mag); free(y0);
    }
    err_done(&E, "11 eps (|b| + sum |w x|)");
}

/* ---- conv_dw -------------------------------------------------------------------------------- */

static const sr_dtype pool_types[] = {SR_F32, SR_F16, SR_BF16};

/* A pool element widened to f32. */
static float pool_get(const sr_kpool *P, size_t i)
{
    if (P->dtype == SR_F16) return sr_f16_to_f32(((const uint16_t *)P->data)[i]);
    if (P->dtype == SR_BF16) return sr_bf16_to_f32(((const uint16_t *)P->data)[i]);
    return ((const float *)P->data)[i];
}

/* Offline (no state): each sequence against the reference with zero state rows. */
static void conv_dw_offline(errs *E)
{
    const sr_kernels *k = sr_kernels_cpu();
    static const int Cs[] = {1, 5, 8, 16, 17, 40, 64, 65, 130}, Ks[] = {1, 2, 3, 4, 9, 31};
    for (int trial = 0; trial < 40; trial++) {
        seed(800 + trial);
        int n_seq = 1 + irand(3), row0[4];
        int64_t pos[3];
        make_batch(n_seq, 12, row0, pos, 100);
        sr_kbatch b = {n_seq, row0, NULL, pos};
        int rows = row0[n_seq], C = Cs[irand(9)], K = Ks[irand(6)];
        int ldx = C + irand(3), ldy = C + irand(3);
        float *x = mat(rows, C, ldx, -2, 2), *w = mat(C, K, K, -1, 1), *bias = mat(1, C, C, -1, 1);
        double *ref = xmalloc(((size_t)rows * C + 1) * sizeof(double));
        double *mag = xmalloc(((size_t)rows * C + 1) * sizeof(double));
        float *y0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *y = outm(rows, C, ldy);
            CU_ASSERT_EQUAL(k->conv_dw(&b, C, K, x, ldx, w, bias, NULL, 0, y, ldy), SR_OK);
            for (int s = 0; s < n_seq; s++) {
                int n = row0[s + 1] - row0[s];
                ref_conv_dw_seq(n, C, K, x + (size_t)row0[s] * ldx, ldx, w, bias, NULL, SR_F32, ref, mag);
                for (int t = 0; t < n; t++)
                    for (int c = 0; c < C; c++)
                        err_add(E, y[(size_t)(row0[s] + t) * ldy + c], ref[(size_t)t * C + c],
                                (K + 2) * EPS * mag[(size_t)t * C + c], paths[p].name, (long)t * C + c);
            }
            CU_ASSERT(pad_ok(y, rows, C, ldy));
            if (path_bitwise(p, 0)) same_bits(y, y0, (size_t)rows * ldy * 4, "conv_dw paths");
            if (p == 0) y0 = y;
            else free(y);
        }
        path_reset();
        free(x); free(w); free(bias); free(ref); free(mag); free(y0);
    }
}

/* Streaming through a pool: several calls, each a batch of sequences on distinct slots with
 * chunks shorter and longer than K - 1; y and the pool's state rows against the reference that
 * keeps its own state (rounded to the pool's type). Every path replays the same calls: their
 * outputs are concatenated and compared. */
static void conv_dw_stream(errs *E)
{
    const sr_kernels *k = sr_kernels_cpu();
    static const int cfg[][3] = {{16, 9, 0}, {17, 4, 2}, {40, 31, 0}, {5, 2, 1}, {64, 1, 0}, {130, 3, 0}};
    enum { SLOTS = 4, STEPS = 8, LAYER = 1 };
    for (int ti = 0; ti < 3; ti++)
        for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
            int C = cfg[ci][0], K = cfg[ci][1], Ks = K - 1, prow = (Ks + cfg[ci][2] > 1 ? Ks + cfg[ci][2] : 1);
            sr_dtype dt = pool_types[ti];
            size_t logcap = (size_t)STEPS * 3 * (K + 4) * C, loglen0 = 0;
            float *log0 = NULL;
            for (int p = 0; p < npaths; p++) {
                path_use(p);
                sr_kpool *P = NULL;
                CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, dt, 2, SLOTS, prow, C, &P), SR_OK);
                float *rst = calloc((size_t)SLOTS * (Ks + 1) * C, sizeof(float)); /* ref states */
                float *log = xmalloc(logcap * sizeof(float));
                size_t loglen = 0;
                seed(900 + ti * 10 + ci);
                float *w = mat(C, K, K, -1, 1), *bias = mat(1, C, C, -1, 1);
                for (int step = 0; step < STEPS; step++) {
                    int n_seq = 1 + irand(3), row0[4], slot[3], perm[SLOTS] = {0, 1, 2, 3};
                    for (int i = SLOTS - 1; i > 0; i--) {
                        int j = irand(i + 1), t = perm[i];
                        perm[i] = perm[j], perm[j] = t;
                    }
                    row0[0] = 0;
                    for (int s = 0; s < n_seq; s++) {
                        slot[s] = perm[s];
                        row0[s + 1] = row0[s] + irand(K + 4);
                    }
                    int64_t pos[3] = {0, 0, 0};
                    sr_kbatch b = {n_seq, row0, slot, pos};
                    int rows = row0[n_seq], ldx = C + 1, ldy = C + 2;
                    float *x = mat(rows, C, ldx, -2, 2), *y = outm(rows, C, ldy);
                    double *ref = xmalloc(((size_t)rows * C + 1) * sizeof(double));
                    double *mag = xmalloc(((size_t)rows * C + 1) * sizeof(double));
                    CU_ASSERT_EQUAL(k->conv_dw(&b, C, K, x, ldx, w, bias, P, LAYER, y, ldy), SR_OK);
                    for (int s = 0; s < n_seq; s++) {
                        int n = row0[s + 1] - row0[s];
                        ref_conv_dw_seq(n, C, K, x + (size_t)row0[s] * ldx, ldx, w, bias,
                                        rst + (size_t)slot[s] * (Ks + 1) * C, dt, ref, mag);
                        for (int t = 0; t < n; t++)
                            for (int c = 0; c < C; c++)
                                err_add(E, y[(size_t)(row0[s] + t) * ldy + c], ref[(size_t)t * C + c],
                                        (K + 2) * EPS * mag[(size_t)t * C + c], "stream", (long)t * C + c);
                    }
                    CU_ASSERT(pad_ok(y, rows, C, ldy));
                    for (int r = 0; r < rows; r++, loglen += (size_t)C)
                        memcpy(log + loglen, y + (size_t)r * ldy, (size_t)C * sizeof(float));
                    /* the pool: layer 1 holds the reference states, layer 0 stays zero */
                    int state_ok = 1;
                    for (int sl = 0; sl < SLOTS; sl++)
                        for (int r = 0; r < Ks; r++)
                            for (int c = 0; c < C; c++) {
                                float got = pool_get(P, sr_kpool_at(P, LAYER, sl, r) + c);
                                float want = rst[((size_t)sl * (Ks + 1) + r) * C + c];
                                state_ok &= !memcmp(&got, &want, sizeof got);
                                state_ok &= pool_get(P, sr_kpool_at(P, 0, sl, r) + c) == 0.0f;
                            }
                    CU_ASSERT(state_ok);
                    free(x); free(y); free(ref); free(mag);
                }
                if (p == 0) {
                    log0 = log;
                    loglen0 = loglen;
                } else {
                    CU_ASSERT_EQUAL(loglen, loglen0);
                    if (path_bitwise(p, 0) && loglen == loglen0)
                        same_bits(log, log0, loglen * sizeof(float), "conv_dw stream paths");
                    free(log);
                }
                sr_kpool_free(k, P);
                free(rst); free(w); free(bias);
            }
            path_reset();
            free(log0);
        }
}

/* One call over a whole sequence == the same input in chunks (state carried, f32 pool), both
 * the outputs and the final state; with an f16 pool the final state agrees too (the last chunk
 * is longer than K - 1). */
static void conv_dw_chunks(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    enum { C = 37, K = 9, N = 40 };
    static const int chunks[] = {1, 0, 3, 8, 2, 9, 7, 10};
    seed(990);
    float *x = mat(N, C, C, -2, 2), *w = mat(C, K, K, -1, 1), *bias = mat(1, C, C, -1, 1);
    for (int ti = 0; ti < 2; ti++) {
        sr_kpool *A = NULL, *B = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, pool_types[ti], 1, 2, K - 1, C, &A), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, pool_types[ti], 1, 2, K - 1, C, &B), SR_OK);
        float *yw = outm(N, C, C), *yc = outm(N, C, C);
        int row0[2] = {0, N}, slot = 1;
        int64_t pos = 0;
        sr_kbatch b = {1, row0, &slot, &pos};
        CU_ASSERT_EQUAL(k->conv_dw(&b, C, K, x, C, w, bias, A, 0, yw, C), SR_OK);
        int at = 0;
        for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
            int r2[2] = {0, chunks[i]};
            sr_kbatch bc = {1, r2, &slot, &pos};
            CU_ASSERT_EQUAL(k->conv_dw(&bc, C, K, x + (size_t)at * C, C, w, bias, B, 0,
                                       yc + (size_t)at * C, C), SR_OK);
            at += chunks[i];
        }
        CU_ASSERT_EQUAL(at, N);
        if (pool_types[ti] == SR_F32) same_bits(yw, yc, (size_t)N * C * 4, "conv_dw chunks vs whole");
        same_bits(A->data, B->data, A->bytes, "conv_dw state chunks vs whole");
        /* the final state is the last K - 1 input rows, rounded to the pool's type */
        int ok = 1;
        for (int r = 0; r < K - 1; r++)
            for (int c = 0; c < C; c++) {
                float got = pool_get(A, sr_kpool_at(A, 0, 1, r) + c);
                ok &= got == ref_rows_round(x[(size_t)(N - K + 1 + r) * C + c], pool_types[ti]);
            }
        CU_ASSERT(ok);
        sr_kpool_free(k, A);
        sr_kpool_free(k, B);
        free(yw); free(yc);
    }
    free(x); free(w); free(bias);
}

static void test_conv_dw(void)
{
    paths_init();
    errs E = {.what = "conv_dw"};
    conv_dw_offline(&E);
    conv_dw_stream(&E);
    conv_dw_chunks();
    err_done(&E, "(K + 2) eps (|bias| + sum |w in|)");
}

/* ---- batchnorm, lstm_cell ------------------------------------------------------------------- */

static void test_batchnorm(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs E = {.what = "batchnorm"};
    for (int trial = 0; trial < 30; trial++) {
        seed(1000 + trial);
        int M = 1 + irand(5), C = dims[irand(NDIMS)], ldx = C + irand(3), ldy = C + irand(3);
        float *x = mat(M, C, ldx, -4, 4), *mean = mat(1, C, C, -1, 1), *var = mat(1, C, C, 0.01, 3);
        float *g = mat(1, C, C, -2, 2), *bias = mat(1, C, C, -1, 1);
        double *ref = xmalloc((size_t)C * sizeof(double)), *mag = xmalloc((size_t)C * sizeof(double));
        float *y0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *y = outm(M, C, ldy);
            CU_ASSERT_EQUAL(k->batchnorm(M, C, x, ldx, mean, var, g, bias, 1e-5f, y, ldy), SR_OK);
            for (int r = 0; r < M; r++) {
                ref_batchnorm_row(C, x + (size_t)r * ldx, mean, var, g, bias, 1e-5f, ref, mag);
                for (int c = 0; c < C; c++)
                    err_add(&E, y[(size_t)r * ldy + c], ref[c], 3 * EPS * mag[c], paths[p].name,
                            (long)r * C + c);
            }
            CU_ASSERT(pad_ok(y, M, C, ldy));
            if (path_bitwise(p, 0)) same_bits(y, y0, (size_t)M * ldy * 4, "batchnorm paths");
            if (p == 0) y0 = y;
            else free(y);
        }
        path_reset();
        float *z = fdup(x, (size_t)M * ldx + TAIL); /* in place */
        CU_ASSERT_EQUAL(k->batchnorm(M, C, z, ldx, mean, var, g, bias, 1e-5f, z, ldx), SR_OK);
        for (int r = 0; r < M; r++)
            same_bits(z + (size_t)r * ldx, y0 + (size_t)r * ldy, (size_t)C * 4, "batchnorm in place");
        free(x); free(mean); free(var); free(g); free(bias); free(ref); free(mag); free(y0); free(z);
    }
    err_done(&E, "3 eps (|(x - m) g / sd| + |b|)");
}

static void test_lstm(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs EC = {.what = "lstm c"}, EH = {.what = "lstm h"};
    for (int trial = 0; trial < 24; trial++) {
        seed(1100 + trial);
        int M = 1 + irand(4), H = dims[irand(NDIMS)];
        int ldg = 4 * H + irand(3), ldc = H + irand(3), ldh = H + irand(3);
        float *gates = mat(M, 4 * H, ldg, -4, 4), *c0 = mat(M, H, ldc, -2, 2);
        pad_sent(c0, M, H, ldc);
        double *rc = xmalloc((size_t)H * 8), *rh = xmalloc((size_t)H * 8), *mg = xmalloc((size_t)H * 8);
        float *c_0 = NULL, *h_0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *c = fdup(c0, (size_t)M * ldc + TAIL), *h = outm(M, H, ldh);
            CU_ASSERT_EQUAL(k->lstm_cell(M, H, gates, ldg, c, ldc, h, ldh), SR_OK);
            for (int r = 0; r < M; r++) {
                ref_lstm_row(H, gates + (size_t)r * ldg, c0 + (size_t)r * ldc, rc, rh, mg);
                for (int i = 0; i < H; i++) {
                    err_add(&EC, c[(size_t)r * ldc + i], rc[i], 4 * EPS * mg[i], paths[p].name, i);
                    err_add(&EH, h[(size_t)r * ldh + i], rh[i], 4 * EPS * (mg[i] + fabs(rh[i])),
                            paths[p].name, i);
                }
            }
            CU_ASSERT(pad_ok(c, M, H, ldc));
            CU_ASSERT(pad_ok(h, M, H, ldh));
            if (path_bitwise(p, 0)) {
                same_bits(c, c_0, (size_t)M * ldc * 4, "lstm c paths");
                same_bits(h, h_0, (size_t)M * ldh * 4, "lstm h paths");
            }
            if (p == 0) c_0 = c, h_0 = h;
            else free(c), free(h);
        }
        path_reset();
        free(gates); free(c0); free(rc); free(rh); free(mg); free(c_0); free(h_0);
    }
    err_done(&EC, "4 eps (|f c0| + |i g|)");
    err_done(&EH, "4 eps (|f c0| + |i g| + |h|)");
}

/* ---- softmax, logsoftmax -------------------------------------------------------------------- */

static void test_softmax(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    errs ES = {.what = "softmax"}, EL = {.what = "logsoftmax"};
    static const int Ns[] = {1, 2, 7, 8, 9, 16, 17, 100, 1500, 5001};
    for (int trial = 0; trial < 40; trial++) {
        seed(1200 + trial);
        int M = 1 + irand(4), N = Ns[irand(10)], ldx = N + irand(3), ldy = N + irand(3);
        double sc = trial % 2 ? 10.0 : 1.0;
        float *x = mat(M, N, ldx, -4 * sc, 4 * sc);
        if (N > 2)
            for (int r = 0; r < M; r++) x[(size_t)r * ldx + 1] = -INFINITY; /* a masked score */
        double *ref = xmalloc((size_t)N * 8);
        float *s0 = NULL, *l0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *s = fdup(x, (size_t)M * ldx + TAIL), *l = outm(M, N, ldy);
            pad_sent(s, M, N, ldx);
            CU_ASSERT_EQUAL(k->softmax(M, N, s, ldx), SR_OK);
            CU_ASSERT_EQUAL(k->logsoftmax(M, N, x, ldx, l, ldy), SR_OK);
            for (int r = 0; r < M; r++) {
                const float *xr = x + (size_t)r * ldx;
                ref_softmax_row(N, xr, ref);
                double mx = -INFINITY, E = 0;
                for (int j = 0; j < N; j++) mx = fmax(mx, xr[j]);
                for (int j = 0; j < N; j++)
                    if (isfinite(xr[j])) E += ref[j] * fabs(xr[j] - mx);
                for (int j = 0; j < N; j++) {
                    double bound = isfinite(xr[j]) ? EPS * ref[j] * (6 + fabs(xr[j] - mx) + E) + 1e-37 : 0;
                    err_add(&ES, s[(size_t)r * ldx + j], ref[j], bound, paths[p].name, j);
                }
                double lse = ref_logsoftmax_row(N, xr, ref);
                for (int j = 0; j < N; j++)
                    err_add(&EL, l[(size_t)r * ldy + j], ref[j], EPS * (fabs(lse) + fabs(ref[j])),
                            paths[p].name, j);
            }
            CU_ASSERT(pad_ok(s, M, N, ldx));
            CU_ASSERT(pad_ok(l, M, N, ldy));
            if (path_bitwise(p, 1)) same_bits(s, s0, (size_t)M * ldx * 4, "softmax paths");
            if (path_bitwise(p, 0)) same_bits(l, l0, (size_t)M * ldy * 4, "logsoftmax paths");
            if (p == 0) s0 = s, l0 = l;
            else free(s), free(l);
        }
        path_reset();
        float *z = fdup(x, (size_t)M * ldx + TAIL); /* logsoftmax in place */
        CU_ASSERT_EQUAL(k->logsoftmax(M, N, z, ldx, z, ldx), SR_OK);
        for (int r = 0; r < M; r++)
            same_bits(z + (size_t)r * ldx, l0 + (size_t)r * ldy, (size_t)N * 4, "logsoftmax in place");
        free(x); free(ref); free(s0); free(l0); free(z);
    }
    err_done(&ES, "eps y (6 + |x - max| + sum y |x - max|)");
    err_done(&EL, "eps (|lse| + |y|)");
}

/* logsoftmax's own exp (rowops.c ls_exp_1, the formula every path computes): within 2 ulp of
 * e^d (long double reference) over the d it meets, x - max in [-708, 0]; 0 below -708 and for
 * -inf, NaN kept. Then rows whose terms underflow, with -inf, +-0 and a single finite entry:
 * every path the same bits (outputs, and the double sum, whose last bits the float outputs
 * would almost never show), within the bound of test_softmax. */
static void test_logsoftmax_exp(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    seed(1290);
    double worst = 0;
    long n = 0;
    for (int i = 0; i < 400000; i++) {
        double d = i < 200000 ? -708.0 * urand() : -40.0 * urand() * urand();
        if (i == 0) d = 0.0;
        if (i == 1) d = -0.0;
        if (i == 2) d = -708.0;
        if (i == 3) d = -1e-300;
        long double r = expl((long double)d);
        double e = sr_cpu_logsoftmax_exp(d), ulp = nextafter((double)r, INFINITY) - (double)r;
        double u = (double)fabsl((long double)e - r) / ulp;
        worst = u > worst ? u : worst;
        n++;
    }
    printf("logsoftmax exp: max %.3f ulp against expl (%ld values of d in [-708, 0])\n      ", worst, n);
    CU_ASSERT(worst <= 2.0);
    CU_ASSERT_EQUAL(sr_cpu_logsoftmax_exp(-708.5), 0.0);
    CU_ASSERT_EQUAL(sr_cpu_logsoftmax_exp(-1e6), 0.0);
    CU_ASSERT_EQUAL(sr_cpu_logsoftmax_exp(-INFINITY), 0.0);
    CU_ASSERT(isnan(sr_cpu_logsoftmax_exp(NAN)));
    CU_ASSERT_EQUAL(sr_cpu_logsoftmax_exp(0.0), 1.0);

    errs E = {.what = "logsoftmax"};
    static const int Ns[] = {1, 15, 16, 17, 33, 51865};
    for (int t = 0; t < 12; t++) {
        int N = Ns[t % 6], ld = N + t % 3;
        float *x = mat(1, N, ld, -900, 0);
        if (N > 3) x[1] = -INFINITY, x[2] = -0.0f, x[3] = 0.0f; /* the max is a zero */
        if (t >= 6)
            for (int j = 1; j < N; j++) x[j] = -INFINITY; /* one finite entry: lse = max */
        double *ref = xmalloc((size_t)N * 8);
        double lse = ref_logsoftmax_row(N, x, ref), sums[5];
        float *y0 = NULL;
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            float *y = outm(1, N, ld);
            CU_ASSERT_EQUAL(k->logsoftmax(1, N, x, ld, y, ld), SR_OK);
            for (int j = 0; j < N; j++)
                err_add(&E, y[j], ref[j], EPS * (fabs(lse) + fabs(ref[j])), paths[p].name, j);
            CU_ASSERT(pad_ok(y, 1, N, ld));
            if (p > 0) same_bits(y, y0, (size_t)N * 4, "logsoftmax paths, underflowing terms");
            float *z = outm(1, N, ld);
            sums[p] = sr_cpu_logsoftmax_sum(N, x, z);
            same_bits(z, y, (size_t)N * 4, "logsoftmax hook");
            if (p > 0) same_bits(&sums[p], &sums[0], sizeof(double), "logsoftmax sums, paths");
            free(z);
            if (p == 0) y0 = y;
            else free(y);
        }
        path_reset();
        free(x); free(ref); free(y0);
    }
    err_done(&E, "eps (|lse| + |y|)");
}

/* ---- topk ----------------------------------------------------------------------------------- */

static void test_topk(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    static const int Ns[] = {1, 2, 5, 16, 100, 1000};
    long checked = 0;
    for (int trial = 0; trial < 60; trial++) {
        seed(1300 + trial);
        int M = 1 + irand(4), N = Ns[irand(6)], ldx = N + irand(3);
        int k_ = trial % 4 == 0 ? 1 : trial % 4 == 1 ? N : 1 + irand(N < 20 ? N : 20);
        float *x = mat(M, N, ldx, -4, 4);
        for (int r = 0; r < M; r++)
            for (int j = 0; j < N; j++) {
                float *v = &x[(size_t)r * ldx + j];
                if (trial % 3 == 0) *v = roundf(*v); /* many ties */
                int u = irand(40);
                if (u == 0) *v = NAN;
                else if (u == 1) *v = INFINITY;
                else if (u == 2) *v = -INFINITY;
            }
        if (trial == 4 || trial == 5) /* NaN in column 0: argmax (trial 4) must pass it */
            for (int r = 0; r < M; r++) x[(size_t)r * ldx] = NAN;
        if (trial == 6)
            for (int j = 0; j < N; j++) x[j] = NAN; /* all NaN: columns in order */
        int32_t *ref = xmalloc((size_t)k_ * sizeof(int32_t));
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            int32_t *idx = xmalloc(((size_t)M * k_ + TAIL) * sizeof(int32_t));
            float *val = outm(1, M * k_, M * k_);
            for (int i = 0; i < TAIL; i++) idx[(size_t)M * k_ + i] = -7;
            CU_ASSERT_EQUAL(k->topk(M, N, k_, x, ldx, idx, val), SR_OK);
            for (int r = 0; r < M; r++) {
                ref_topk_row(N, k_, x + (size_t)r * ldx, ref);
                CU_ASSERT(same_bits(idx + (size_t)r * k_, ref, (size_t)k_ * 4, "topk indices"));
                for (int i = 0; i < k_; i++) {
                    float want = x[(size_t)r * ldx + ref[i]];
                    CU_ASSERT_EQUAL(memcmp(&val[(size_t)r * k_ + i], &want, 4), 0);
                }
                checked += k_;
            }
            CU_ASSERT(pad_ok(val, 1, M * k_, M * k_));
            for (int i = 0; i < TAIL; i++) CU_ASSERT_EQUAL(idx[(size_t)M * k_ + i], -7);
            /* val may be NULL */
            int32_t *idx2 = xmalloc((size_t)M * k_ * sizeof(int32_t));
            CU_ASSERT_EQUAL(k->topk(M, N, k_, x, ldx, idx2, NULL), SR_OK);
            same_bits(idx2, idx, (size_t)M * k_ * 4, "topk without val");
            free(idx); free(val); free(idx2);
        }
        path_reset();
        free(x); free(ref);
    }
    /* a small exact case: ties to the lower column, NaN last, -inf before NaN */
    float v[8] = {1.0f, NAN, 3.0f, 3.0f, -INFINITY, 2.0f, NAN, 3.0f};
    int32_t idx[8];
    float val[8];
    CU_ASSERT_EQUAL(sr_kernels_cpu()->topk(1, 8, 8, v, 8, idx, val), SR_OK);
    static const int32_t want[8] = {2, 3, 7, 5, 0, 4, 1, 6};
    CU_ASSERT_EQUAL(memcmp(idx, want, sizeof want), 0);
    CU_ASSERT_EQUAL(sr_kernels_cpu()->topk(1, 8, 1, v, 8, idx, val), SR_OK);
    CU_ASSERT(idx[0] == 2 && val[0] == 3.0f);
    CU_ASSERT_EQUAL(sr_kernels_cpu()->topk(1, 3, 1, v + 1, 8, idx, val), SR_OK); /* NaN first */
    CU_ASSERT(idx[0] == 1 && val[0] == 3.0f);
    printf("topk        exact (%ld entries)\n      ", checked);
}

/* ---- kv_write ------------------------------------------------------------------------------- */

/* Values where f16 / bf16 rounding has edge cases: NaNs (quiet, signalling, payloads, sign),
 * infinities, zeros, the f16 overflow threshold 65520, f16 subnormals and the 2^-25 tie, ties
 * to even in both formats, f32 subnormals, FLT_MAX; beyond the list, raw 32-bit patterns. */
static float special_float(int i)
{
    static const uint32_t bits[] = {
        0x7fc00000, 0x7fc12345, 0xffc00001, 0x7f800001, 0x7fa00000, 0xff812345, 0x7f800000,
        0xff800000, 0x00000000, 0x80000000, 0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000,
        0x3727c5ac, 0x33800000, 0x33000000, 0x33000001, 0x387fc000, 0x38800000, 0x3f801000,
        0x3f803000, 0x3f808000, 0x3f818000, 0xbf808000, 0x00000001, 0x807fffff, 0x7f7fffff,
        0x7f7f8000, 0x3effffff};
    uint32_t u;
    if (i < (int)(sizeof bits / sizeof bits[0])) u = bits[i];
    else u = (uint32_t)(urand() * 4294967296.0);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_kv_write(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    static const int Rs[] = {1, 3, 8}, Ws[] = {1, 7, 16, 33};
    enum { LAYERS = 3, SLOTS = 4 };
    long calls = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int ri = 0; ri < 3; ri++)
            for (int wi = 0; wi < 4; wi++) {
                int R = Rs[ri], W = Ws[wi];
                sr_dtype dt = pool_types[ti];
                sr_kpool *P = NULL;
                CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, dt, LAYERS, SLOTS, R, W, &P), SR_OK);
                unsigned char *ref = calloc(1, P->bytes);
                int64_t next[SLOTS] = {0, 0, 0, 0}; /* each slot's next position */
                seed(1400 + ti * 100 + ri * 10 + wi);
                for (int step = 0; step < 10; step++) {
                    path_use(step % npaths);
                    int n_seq = 1 + irand(3), row0[4], slot[3], perm[SLOTS] = {0, 1, 2, 3};
                    int64_t pos[3];
                    for (int i = SLOTS - 1; i > 0; i--) {
                        int j = irand(i + 1), t = perm[i];
                        perm[i] = perm[j], perm[j] = t;
                    }
                    row0[0] = 0;
                    for (int s = 0; s < n_seq; s++) {
                        slot[s] = perm[s];
                        row0[s + 1] = row0[s] + irand(2 * R + 2); /* up to 2R + 1: wraps in a call */
                        pos[s] = next[slot[s]];
                        next[slot[s]] += row0[s + 1] - row0[s];
                    }
                    sr_kbatch b = {n_seq, row0, slot, pos};
                    int layer = irand(LAYERS), ldx = W + irand(3);
                    float *x = mat(row0[n_seq], W, ldx, -70000, 70000); /* beyond f16's range too */
                    for (int r = 0; r < row0[n_seq]; r++)
                        for (int c = 0; c < W; c++)
                            if (irand(4) == 0) x[(size_t)r * ldx + c] = special_float(irand(1 << 20));
                    CU_ASSERT_EQUAL(k->kv_write(P, layer, &b, x, ldx), SR_OK);
                    ref_kv_write(ref, dt, SLOTS, R, W, layer, &b, x, ldx);
                    CU_ASSERT(same_bits(P->data, ref, P->bytes, "kv_write pool"));
                    calls++;
                    free(x);
                }
                path_reset();
                sr_kpool_free(k, P);
                free(ref);
            }
    /* every special value and 100000 raw bit patterns through each path's conversion */
    enum { NW = 100003 };
    float *x = xmalloc(NW * sizeof(float));
    seed(1499);
    for (int i = 0; i < NW; i++) x[i] = special_float(i < 64 ? i : 1000);
    for (int ti = 1; ti < 3; ti++) {
        unsigned char *want = xmalloc((size_t)NW * 2);
        int row0[2] = {0, 1}, slot = 0;
        int64_t pos = 0;
        sr_kbatch b = {1, row0, &slot, &pos};
        ref_kv_write(want, pool_types[ti], 1, 1, NW, 0, &b, x, NW);
        for (int p = 0; p < npaths; p++) {
            path_use(p);
            sr_kpool *P = NULL;
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, pool_types[ti], 1, 1, 1, NW, &P), SR_OK);
            CU_ASSERT_EQUAL(k->kv_write(P, 0, &b, x, NW), SR_OK);
            char msg[64];
            snprintf(msg, sizeof msg, "kv_write %s bit patterns, %s", pool_types[ti] == SR_F16 ? "f16" : "bf16",
                     paths[p].name);
            same_bits(P->data, want, (size_t)NW * 2, msg);
            sr_kpool_free(k, P);
        }
        path_reset();
        free(want);
    }
    free(x);
    printf("kv_write    exact pool bytes (%ld calls, f32 / f16 / bf16; %d bit patterns)\n      ", calls, NW);
}

/* kv_write2 = kv_write into each pool, bit for bit: pools of different element types, ring rows
 * and widths (a K pool and a V pool need not agree), sequences wrapping their rings within a
 * call, x and x2 at their own strides. */
static void test_kv_write2(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    enum { LAYERS = 2, SLOTS = 3 };
    static const struct { int t1, t2, r1, r2, w1, w2; } cs[] = {
        {0, 0, 4, 4, 8, 8}, {2, 1, 3, 5, 16, 7}, {1, 0, 1, 6, 33, 1}, {2, 2, 8, 2, 5, 12}};
    long calls = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        sr_kpool *P[4] = {NULL}; /* P[0], P[1] by kv_write2; P[2], P[3] by two kv_writes */
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, pool_types[i % 2 ? cs[ci].t2 : cs[ci].t1], LAYERS, SLOTS,
                                                  i % 2 ? cs[ci].r2 : cs[ci].r1, i % 2 ? cs[ci].w2 : cs[ci].w1,
                                                  &P[i]), SR_OK);
        int64_t next[SLOTS] = {0, 0, 0};
        seed(1700 + (int)ci);
        for (int step = 0; step < 8; step++) {
            int n_seq = 1 + irand(SLOTS), row0[SLOTS + 1] = {0}, slot[SLOTS];
            int64_t pos[SLOTS];
            for (int s = 0; s < n_seq; s++) {
                slot[s] = (s + step) % SLOTS;
                row0[s + 1] = row0[s] + irand(10); /* past either ring: wraps in a call */
                pos[s] = next[slot[s]];
                next[slot[s]] += row0[s + 1] - row0[s];
            }
            sr_kbatch b = {n_seq, row0, slot, pos};
            int layer = irand(LAYERS), ld1 = cs[ci].w1 + irand(3), ld2 = cs[ci].w2 + irand(3);
            float *x = mat(row0[n_seq], cs[ci].w1, ld1, -70000, 70000);
            float *x2 = mat(row0[n_seq], cs[ci].w2, ld2, -70000, 70000);
            CU_ASSERT_EQUAL(k->kv_write2(P[0], P[1], layer, &b, x, ld1, x2, ld2), SR_OK);
            CU_ASSERT_EQUAL(k->kv_write(P[2], layer, &b, x, ld1), SR_OK);
            CU_ASSERT_EQUAL(k->kv_write(P[3], layer, &b, x2, ld2), SR_OK);
            CU_ASSERT(same_bits(P[0]->data, P[2]->data, P[0]->bytes, "kv_write2, first pool"));
            CU_ASSERT(same_bits(P[1]->data, P[3]->data, P[1]->bytes, "kv_write2, second pool"));
            calls++;
            free(x);
            free(x2);
        }
        for (int i = 0; i < 4; i++) sr_kpool_free(k, P[i]);
    }
    /* refused before either pool is written */
    sr_kpool *A = NULL, *B = NULL, *S = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F32, 2, 2, 2, 4, &A), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_BF16, 2, 2, 3, 2, &B), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F32, 2, 1, 2, 2, &S), SR_OK); /* one slot */
    float x[16], x2[16];
    for (int i = 0; i < 16; i++) x[i] = x2[i] = 1.0f + (float)i;
    int row0[3] = {0, 1, 2}, slot[2] = {0, 1};
    int64_t pos[2] = {0, 0};
    sr_kbatch b2 = {2, row0, slot, pos};
    TEST_ASSERT_ERR(k->kv_write2(A, A, 0, &b2, x, 4, x2, 4), SR_ERR_ARG, "kv_write2: p2 is p");
    TEST_ASSERT_ERR(k->kv_write2(A, NULL, 0, &b2, x, 4, x2, 2), SR_ERR_ARG, "kv_write2: pool p2 is NULL");
    TEST_ASSERT_ERR(k->kv_write2(A, B, 0, &b2, x, 4, NULL, 2), SR_ERR_ARG, "kv_write2: x2 is NULL");
    TEST_ASSERT_ERR(k->kv_write2(A, B, 0, &b2, x, 4, x2, 1), SR_ERR_ARG, "kv_write2: ldx2 = 1");
    TEST_ASSERT_ERR(k->kv_write2(A, S, 0, &b2, x, 4, x2, 2), SR_ERR_ARG, "kv_write2: b->slot[1] = 1");
    TEST_ASSERT_ERR(k->kv_write2(A, B, 2, &b2, x, 4, x2, 2), SR_ERR_ARG, "layer 2");
    TEST_ASSERT_ERR(k->kv_write2(A, B, 0, &b2, x, 3, x2, 2), SR_ERR_ARG, "kv_write: ldx = 3");
    static const unsigned char zeros[64];
    CU_ASSERT(!memcmp(A->data, zeros, A->bytes < sizeof zeros ? A->bytes : sizeof zeros));
    CU_ASSERT_EQUAL(k->kv_write2(A, B, 1, &b2, x, 4, x2, 2), SR_OK);
    sr_kpool_free(k, A);
    sr_kpool_free(k, B);
    sr_kpool_free(k, S);
    printf("kv_write2   the pools' bytes of two kv_writes (%ld calls, 4 pool pairs)\n      ", calls);
}

/* rope_kv = rope of q, rope of a copy of k, kv_write2 of the copy and v, bit for bit (q, both
 * pools), k left as it was: GQA and equal head counts, q | k | v in one row as the models lay
 * them out, pools of other types and ring rows, sequences wrapping their rings in a call. */
static void test_rope_kv(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    static const struct { int H, G, hd, t1, t2, r1, r2; } cs[] = {
        {4, 4, 8, 0, 0, 6, 6}, {8, 2, 16, 2, 1, 3, 5}, {2, 1, 4, 1, 2, 7, 2}};
    enum { LAYERS = 2, SLOTS = 3 };
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        const int H = cs[ci].H, G = cs[ci].G, hd = cs[ci].hd, qw = H * hd, kw = G * hd;
        const int ld = qw + 2 * kw + 1; /* q | k | v, one spare column */
        float *inv = rope_inv(hd, 10000.0);
        sr_kpool *P[4] = {NULL};
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, pool_types[i % 2 ? cs[ci].t2 : cs[ci].t1], LAYERS, SLOTS,
                                                  i % 2 ? cs[ci].r2 : cs[ci].r1, kw, &P[i]), SR_OK);
        int64_t next[SLOTS] = {0, 0, 0};
        seed(1800 + (int)ci);
        for (int step = 0; step < 6; step++) {
            int n_seq = 1 + irand(SLOTS), row0[SLOTS + 1] = {0}, slot[SLOTS];
            int64_t pos[SLOTS];
            for (int s = 0; s < n_seq; s++) {
                slot[s] = (s + step) % SLOTS;
                row0[s + 1] = row0[s] + irand(9);
                pos[s] = next[slot[s]];
                next[slot[s]] += row0[s + 1] - row0[s];
            }
            sr_kbatch b = {n_seq, row0, slot, pos};
            const int rows = row0[n_seq], layer = irand(LAYERS);
            float *x = mat(rows, ld, ld, -3, 3), *y = malloc((size_t)(rows ? rows : 1) * ld * sizeof(float));
            float *x0 = malloc((size_t)(rows ? rows : 1) * ld * sizeof(float));
            memcpy(y, x, (size_t)rows * ld * sizeof(float));
            memcpy(x0, x, (size_t)rows * ld * sizeof(float));
            /* fused into P[0], P[1] (x); the three ops into P[2], P[3] (y) */
            CU_ASSERT_EQUAL(k->rope_kv(&b, H, G, hd, inv, x, ld, x + qw, ld, x + qw + kw, ld, P[0], P[1], layer), SR_OK);
            CU_ASSERT_EQUAL(k->rope(&b, H + G, hd, inv, y, ld), SR_OK); /* q and k side by side */
            CU_ASSERT_EQUAL(k->kv_write2(P[2], P[3], layer, &b, y + qw, ld, y + qw + kw, ld), SR_OK);
            CU_ASSERT(same_bits(P[0]->data, P[2]->data, P[0]->bytes, "rope_kv, K"));
            CU_ASSERT(same_bits(P[1]->data, P[3]->data, P[1]->bytes, "rope_kv, V"));
            int q_same = 1, rest_same = 1;
            for (int r = 0; r < rows; r++) {
                q_same &= !memcmp(x + (size_t)r * ld, y + (size_t)r * ld, (size_t)qw * sizeof(float));
                /* k, v and the spare column as they were before the call */
                rest_same &= !memcmp(x + (size_t)r * ld + qw, x0 + (size_t)r * ld + qw,
                                     (size_t)(2 * kw + 1) * sizeof(float));
            }
            CU_ASSERT(q_same);
            CU_ASSERT(rest_same);
            free(x);
            free(y);
            free(x0);
        }
        free(inv);
        for (int i = 0; i < 4; i++) sr_kpool_free(k, P[i]);
    }
    /* errors, each before anything is written */
    {
        const int H = 2, G = 1, hd = 4, qw = H * hd, kw = G * hd, ld = qw + 2 * kw;
        float *inv = rope_inv(hd, 10000.0);
        float x[2 * 16], x0[2 * 16];
        for (int i = 0; i < 2 * ld; i++) x[i] = x0[i] = 0.25f * (float)(i + 1);
        int row0[2] = {0, 2}, slot[1] = {0};
        int64_t pos[1] = {5};
        sr_kbatch b = {1, row0, slot, pos};
        sr_kpool *K = NULL, *V = NULL, *W = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F32, 1, 1, 4, kw, &K), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_BF16, 1, 1, 4, kw, &V), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F32, 1, 1, 4, kw + 1, &W), SR_OK);
        TEST_ASSERT_ERR(k->rope_kv(&b, H, G, hd, inv, x, ld, x + qw, ld, x + qw + kw, ld, W, V, 0), SR_ERR_ARG,
                        "rope_kv: K's width 5 is not n_kv_head * hd = 4");
        TEST_ASSERT_ERR(k->rope_kv(&b, H, G, 3, inv, x, ld, x + qw, ld, x + qw + kw, ld, K, V, 0), SR_ERR_ARG,
                        "rope: head width hd = 3 is odd");
        TEST_ASSERT_ERR(k->rope_kv(&b, H, G, hd, inv, x, ld, x + qw, 3, x + qw + kw, ld, K, V, 0), SR_ERR_ARG,
                        "rope: ldx = 3");
        TEST_ASSERT_ERR(k->rope_kv(&b, H, G, hd, inv, x, ld, x + qw, ld, x + qw + kw, ld, K, K, 0), SR_ERR_ARG,
                        "kv_write2: p2 is p");
        TEST_ASSERT_ERR(k->rope_kv(&b, H, G, hd, NULL, x, ld, x + qw, ld, x + qw + kw, ld, K, V, 0), SR_ERR_ARG,
                        "rope: inv_freq is NULL");
        CU_ASSERT(!memcmp(x, x0, sizeof x)); /* q untouched by the refused calls */
        sr_kpool_free(k, K);
        sr_kpool_free(k, V);
        sr_kpool_free(k, W);
        free(inv);
    }
}

/* ---- row independence ----------------------------------------------------------------------- */

enum { IM = 24, ID = 4099 };
static float *I_x, *I_x2, *I_g, *I_b, *I_mul;

/* Rows r0 .. r0 + n - 1 of an op on the shared inputs, written where the full call writes them. */
typedef void (*rows_fn)(int r0, int n, float *out);

static void rf_norm(int r0, int n, float *o)
{
    sr_kernels_cpu()->norm(SR_NORM_LAYER, n, ID, I_x + (size_t)r0 * ID, ID, I_g, I_b, 1e-5f,
                           I_mul + (size_t)r0 * ID, ID, o + (size_t)r0 * ID, ID);
}
static void rf_rms(int r0, int n, float *o)
{
    sr_kernels_cpu()->norm(SR_NORM_RMS, n, ID, I_x + (size_t)r0 * ID, ID, I_g, NULL, 1e-6f, NULL,
                           0, o + (size_t)r0 * ID, ID);
}
static void rf_gelu(int r0, int n, float *o)
{
    sr_kernels_cpu()->act(SR_ACT_GELU, (size_t)n * ID, I_x + (size_t)r0 * ID, o + (size_t)r0 * ID);
}
static void rf_relu(int r0, int n, float *o)
{
    sr_kernels_cpu()->act(SR_ACT_RELU, (size_t)n * ID, I_x + (size_t)r0 * ID, o + (size_t)r0 * ID);
}
static void rf_glu_sig(int r0, int n, float *o)
{
    sr_kernels_cpu()->glu(SR_GLU_SIGMOID, n, ID, I_x + (size_t)r0 * ID, ID, I_x2 + (size_t)r0 * ID,
                          ID, o + (size_t)r0 * ID, ID);
}
static void rf_glu_silu(int r0, int n, float *o)
{
    sr_kernels_cpu()->glu(SR_GLU_SILU, n, ID, I_x + (size_t)r0 * ID, ID, I_x2 + (size_t)r0 * ID,
                          ID, o + (size_t)r0 * ID, ID);
}
static void rf_add(int r0, int n, float *o)
{
    memcpy(o + (size_t)r0 * ID, I_x2 + (size_t)r0 * ID, (size_t)n * ID * 4);
    sr_kernels_cpu()->add(n, ID, I_x + (size_t)r0 * ID, ID, 0.5f, o + (size_t)r0 * ID, ID);
}
static void rf_scale(int r0, int n, float *o)
{
    memcpy(o + (size_t)r0 * ID, I_x + (size_t)r0 * ID, (size_t)n * ID * 4);
    sr_kernels_cpu()->scale(n, ID, 0.3f, o + (size_t)r0 * ID, ID);
}
static void rf_bn(int r0, int n, float *o)
{
    sr_kernels_cpu()->batchnorm(n, ID, I_x + (size_t)r0 * ID, ID, I_b, I_mul, I_g, I_b, 1e-5f,
                                o + (size_t)r0 * ID, ID);
}
static void rf_lstm(int r0, int n, float *o)
{
    /* H = ID / 4 rounded down: c in the first quarter of each output row, h in the second */
    int H = ID / 4;
    for (int r = r0; r < r0 + n; r++) memcpy(o + (size_t)r * ID, I_x2 + (size_t)r * ID, (size_t)H * 4);
    sr_kernels_cpu()->lstm_cell(n, H, I_x + (size_t)r0 * ID, ID, o + (size_t)r0 * ID, ID,
                                o + (size_t)r0 * ID + H, ID);
}
static void rf_softmax(int r0, int n, float *o)
{
    memcpy(o + (size_t)r0 * ID, I_x + (size_t)r0 * ID, (size_t)n * ID * 4);
    sr_kernels_cpu()->softmax(n, ID, o + (size_t)r0 * ID, ID);
}
static void rf_logsoftmax(int r0, int n, float *o)
{
    sr_kernels_cpu()->logsoftmax(n, ID, I_x + (size_t)r0 * ID, ID, o + (size_t)r0 * ID, ID);
}
static void rf_topk(int r0, int n, float *o)
{
    /* indices and values of the 9 best in the first 18 floats of each output row */
    int32_t idx[IM * 9];
    float val[IM * 9];
    sr_kernels_cpu()->topk(n, ID, 9, I_x + (size_t)r0 * ID, ID, idx, val);
    for (int r = 0; r < n; r++) {
        memcpy(o + (size_t)(r0 + r) * ID, idx + r * 9, 9 * 4);
        memcpy(o + (size_t)(r0 + r) * ID + 9, val + r * 9, 9 * 4);
    }
}
/* conv2d_s2 over channel planes: "row" r is channel r (T = 24, F = 128 planes of I_x) */
static void rf_conv2d(int r0, int n, float *o)
{
    int T = 24, F = 128, plane = (T / 2 + 1) * (F / 2 + 1);
    sr_kernels_cpu()->conv2d_s2(1, n, T, F, I_x + (size_t)r0 * T * F, 0, (size_t)T * F, I_x2 + (size_t)r0 * 9,
                                I_b + r0, 1, o + (size_t)r0 * plane);
}
static void indep(const char *what, int M, size_t floats, rows_fn fn)
{
    float *a = outm(1, (int)floats, (int)floats), *b = outm(1, (int)floats, (int)floats);
    float *c = outm(1, (int)floats, (int)floats);
    int saved = sr_cpu_threads();
    sr_cpu_set_threads(1);
    fn(0, M, a);
    sr_cpu_set_threads(3);
    fn(0, M, b);
    sr_cpu_set_threads(saved);
    for (int r = 0; r < M; r++) fn(r, 1, c);
    char msg[96];
    snprintf(msg, sizeof msg, "%s: 1 vs 3 threads", what);
    same_bits(a, b, (floats + TAIL) * 4, msg);
    snprintf(msg, sizeof msg, "%s: batch vs rows alone", what);
    same_bits(a, c, (floats + TAIL) * 4, msg);
    free(a); free(b); free(c);
}

/* A sequence alone vs inside a batch with others (other slots, other positions), 1 vs 3
 * threads: rope, conv_dw (two calls, so the state matters) and kv_write. */
static void indep_sequences(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    enum { NH = 32, HD = 128, W = NH * HD, C = 1024, K = 9 };
    int row0[4] = {0, 3, 7, 9}, slot[3] = {2, 0, 3}, one[2] = {0, 4};
    int64_t pos[3] = {5, 1000, 77};
    sr_kbatch all = {3, row0, slot, pos}, alone = {1, one, &slot[1], &pos[1]};
    float *inv = rope_inv(HD, 10000.0);
    /* rope */
    float *a = fdup(I_x, (size_t)9 * W), *b = fdup(I_x, (size_t)9 * W), *c = fdup(I_x + 3 * W, 4 * W);
    int saved = sr_cpu_threads();
    sr_cpu_set_threads(1);
    CU_ASSERT_EQUAL(k->rope(&all, NH, HD, inv, a, W), SR_OK);
    sr_cpu_set_threads(3);
    CU_ASSERT_EQUAL(k->rope(&all, NH, HD, inv, b, W), SR_OK);
    CU_ASSERT_EQUAL(k->rope(&alone, NH, HD, inv, c, W), SR_OK);
    same_bits(a, b, (size_t)9 * W * 4, "rope: 1 vs 3 threads");
    same_bits(a + 3 * W, c, (size_t)4 * W * 4, "rope: sequence alone vs in a batch");
    free(a); free(b); free(c);
    /* conv_dw, f16 state, two calls */
    for (int th = 1; th <= 3; th += 2) {
        sr_cpu_set_threads(th);
        sr_kpool *PA = NULL, *PB = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F16, 2, 4, K - 1, C, &PA), SR_OK);
        CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F16, 2, 4, K - 1, C, &PB), SR_OK);
        float *ya = outm(9, C, C), *yb = outm(4, C, C);
        for (int call = 0; call < 2; call++) {
            const float *x = I_x + (size_t)call * 9 * C;
            CU_ASSERT_EQUAL(k->conv_dw(&all, C, K, x, C, I_x2, I_b, PA, 1, ya, C), SR_OK);
            CU_ASSERT_EQUAL(k->conv_dw(&alone, C, K, x + 3 * C, C, I_x2, I_b, PB, 1, yb, C), SR_OK);
            same_bits(ya + 3 * C, yb, (size_t)4 * C * 4, "conv_dw: sequence alone vs in a batch");
        }
        size_t at = sr_kpool_at(PA, 1, slot[1], 0) * 2;
        same_bits((char *)PA->data + at, (char *)PB->data + at, (size_t)(K - 1) * C * 2,
                  "conv_dw: state alone vs in a batch");
        sr_kpool_free(k, PA);
        sr_kpool_free(k, PB);
        free(ya); free(yb);
    }
    /* kv_write: the slot's rows, alone vs in a batch */
    sr_kpool *PA = NULL, *PB = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_BF16, 2, 4, 3, W, &PA), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_BF16, 2, 4, 3, W, &PB), SR_OK);
    CU_ASSERT_EQUAL(k->kv_write(PA, 1, &all, I_x, W), SR_OK);
    sr_cpu_set_threads(1);
    CU_ASSERT_EQUAL(k->kv_write(PB, 1, &alone, I_x + 3 * W, W), SR_OK);
    sr_cpu_set_threads(saved);
    size_t at = sr_kpool_at(PA, 1, slot[1], 0) * 2;
    same_bits((char *)PA->data + at, (char *)PB->data + at, (size_t)3 * W * 2,
              "kv_write: sequence alone vs in a batch");
    sr_kpool_free(k, PA);
    sr_kpool_free(k, PB);
    free(inv);
}

static void test_row_independence(void)
{
    seed(1500);
    size_t n = (size_t)IM * ID;
    I_x = mat(IM, ID, ID, -4, 4);
    I_x2 = mat(IM, ID, ID, -4, 4);
    I_g = mat(1, ID, ID, 0.5, 1.5);
    I_b = mat(1, ID, ID, -1, 1);
    I_mul = mat(IM, ID, ID, 0.1, 3); /* also a positive variance for batchnorm */
    struct { const char *what; rows_fn fn; int M; size_t floats; } ops[] = {
        {"norm layer+mul", rf_norm, IM, n}, {"norm rms", rf_rms, IM, n}, {"act gelu", rf_gelu, IM, n},
        {"act relu", rf_relu, IM, n}, {"glu sigmoid", rf_glu_sig, IM, n}, {"glu silu", rf_glu_silu, IM, n},
        {"add", rf_add, IM, n}, {"scale", rf_scale, IM, n}, {"batchnorm", rf_bn, IM, n},
        {"lstm_cell", rf_lstm, IM, n}, {"softmax", rf_softmax, IM, n},
        {"logsoftmax", rf_logsoftmax, IM, n}, {"topk", rf_topk, IM, n},
        {"conv2d_s2", rf_conv2d, 16, (size_t)16 * 13 * 65},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) indep(ops[i].what, ops[i].M, ops[i].floats, ops[i].fn);
    indep_sequences();
    free(I_x); free(I_x2); free(I_g); free(I_b); free(I_mul);
}

/* ---- the backends' loops, bit for bit -------------------------------------------------------- */

/* Literal copies of the loops these ops replace (models/voxtral/vx_model.c rope and silu_mul,
 * models/fastconformer/fc_encoder.c conv3_plane + bias + relu, the conv module's GLU, depthwise
 * conv and BatchNorm, fastconformer.c's predictor LSTM, models/whisper/whisper.c's
 * log-softmax): every path of the op must give exactly their numbers. */
static void vx_rope(float *x, int n, int heads, int hd, const float *inv, int64_t p0)
{
    int half = hd / 2;
    for (int r = 0; r < n; r++) {
        float pos = (float)(p0 + r);
        for (int i = 0; i < half; i++) {
            float a = pos * inv[i];
            float c = cosf(a), sn = sinf(a);
            for (int h = 0; h < heads; h++) {
                float *v = x + ((size_t)r * heads + h) * hd;
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c - x2 * sn;
                v[i + half] = x2 * c + x1 * sn;
            }
        }
    }
}

static void fc_conv3_plane(const float *in, int T, int F, const float *w9, float *out, int To, int Fo)
{
    for (int t = 0; t < To; t++)
        for (int f = 0; f < Fo; f++) {
            float s = 0.0f;
            for (int i = 0; i < 3; i++) {
                int ti = 2 * t + i - 2;
                if (ti < 0 || ti >= T) continue;
                for (int j = 0; j < 3; j++) {
                    int fj = 2 * f + j - 2;
                    if (fj < 0 || fj >= F) continue;
                    s += w9[i * 3 + j] * in[(size_t)ti * F + fj];
                }
            }
            out[(size_t)t * Fo + f] += s;
        }
}

static void test_backend_loops(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    paths_init();
    seed(1600);
    int ok_paths = 0;
    for (int p = 0; p < npaths; p++) {
        path_use(p);
        int ok = 1;
        /* Voxtral rope (8 rows at position 4093, 32 heads of 128) */
        {
            enum { N = 8, H = 32, HD = 128 };
            float *inv = rope_inv(HD, 1e6), *x = mat(N, H * HD, H * HD, -2, 2);
            float *y = fdup(x, (size_t)N * H * HD);
            int row0[2] = {0, N};
            int64_t pos = 4093;
            sr_kbatch b = {1, row0, NULL, &pos};
            vx_rope(x, N, H, HD, inv, pos);
            CU_ASSERT_EQUAL(k->rope(&b, H, HD, inv, y, H * HD), SR_OK);
            ok &= same_bits(x, y, (size_t)N * H * HD * 4, "rope vs vx_model.c");
            free(inv); free(x); free(y);
        }
        /* Voxtral silu_mul and the adaptive scale after RMSNorm */
        {
            enum { N = 3, D = 1000 };
            float *a = mat(N, D, D, -6, 6), *b = mat(N, D, D, -3, 3), *y = outm(N, D, D);
            float *g = mat(1, D, D, 0.5, 1.5), *al = mat(1, D, D, 0.5, 2);
            float *ref = fdup(a, (size_t)N * D), *h = outm(N, D, D), *h2 = outm(N, D, D);
            sr_silu(ref, (size_t)N * D);
            for (size_t i = 0; i < (size_t)N * D; i++) ref[i] *= b[i];
            CU_ASSERT_EQUAL(k->glu(SR_GLU_SILU, N, D, a, D, b, D, y, D), SR_OK);
            ok &= same_bits(ref, y, (size_t)N * D * 4, "glu silu vs silu_mul");
            sr_rmsnorm(a, N, D, g, 1e-5f, h);
            for (int r = 0; r < N; r++)
                for (int i = 0; i < D; i++) h[(size_t)r * D + i] *= al[i];
            CU_ASSERT_EQUAL(k->norm(SR_NORM_RMS, N, D, a, D, g, NULL, 1e-5f, al, 0, h2, D), SR_OK);
            ok &= same_bits(h, h2, (size_t)N * D * 4, "norm rms * ada vs vx_decode");
            free(a); free(b); free(y); free(g); free(al); free(ref); free(h); free(h2);
        }
        /* FastConformer subsampling stage 1 (1 -> C, ReLU) and a depthwise stage (no ReLU) */
        for (int stage = 0; stage < 2; stage++) {
            int C = 8, T = 37, F = stage ? 65 : 128, To = T / 2 + 1, Fo = F / 2 + 1;
            size_t plane = (size_t)To * Fo;
            float *in = mat(stage ? C : 1, T * F, T * F, -2, 2), *w = mat(C, 9, 9, -1, 1);
            float *bias = mat(1, C, C, -1, 1), *ref = xmalloc((size_t)C * plane * 4);
            float *out = outm(1, (int)(C * plane), (int)(C * plane));
            for (int c = 0; c < C; c++) {
                float *o = ref + (size_t)c * plane;
                for (size_t i = 0; i < plane; i++) o[i] = bias[c];
                fc_conv3_plane(in + (stage ? (size_t)c * T * F : 0), T, F, w + c * 9, o, To, Fo);
                if (!stage)
                    for (size_t i = 0; i < plane; i++) o[i] = o[i] > 0.0f ? o[i] : 0.0f;
            }
            CU_ASSERT_EQUAL(k->conv2d_s2(1, C, T, F, in, 0, stage ? (size_t)T * F : 0, w, bias, !stage, out), SR_OK);
            ok &= same_bits(ref, out, (size_t)C * plane * 4, "conv2d_s2 vs conv3_plane");
            free(in); free(w); free(bias); free(ref); free(out);
        }
        /* FastConformer conv module: GLU, causal depthwise conv over [cache ; GLU], BatchNorm */
        {
            enum { T = 13, D = 176, K = 9 };
            float *big = mat(T, 2 * D, 2 * D, -3, 3), *cache = mat(K - 1, D, D, -1, 1);
            float *dw_w = mat(D, K, K, -1, 1), *dw_b = mat(1, D, D, -1, 1);
            float *mean = mat(1, D, D, -1, 1), *var = mat(1, D, D, 0.1, 2);
            float *bg = mat(1, D, D, 0.5, 1.5), *bb = mat(1, D, D, -1, 1);
            float *buf = xmalloc((size_t)(K - 1 + T) * D * 4), *t1 = xmalloc((size_t)T * D * 4);
            memcpy(buf, cache, (size_t)(K - 1) * D * 4);
            for (int t = 0; t < T; t++) {
                const float *g = big + (size_t)t * 2 * D;
                float *o = buf + (size_t)(K - 1 + t) * D;
                for (int c = 0; c < D; c++) o[c] = g[c] / (1.0f + expf(-g[D + c]));
            }
            for (int t = 0; t < T; t++) {
                float *o = t1 + (size_t)t * D;
                for (int c = 0; c < D; c++) {
                    float s = dw_b[c];
                    for (int j = 0; j < K; j++) s += dw_w[c * K + j] * buf[(size_t)(t + j) * D + c];
                    o[c] = s;
                }
            }
            for (int t = 0; t < T; t++)
                for (int c = 0; c < D; c++) {
                    float *o = t1 + (size_t)t * D + c;
                    *o = (*o - mean[c]) / sqrtf(var[c] + 1e-5f) * bg[c] + bb[c];
                }
            /* the same through the ops, the cache in an f32 pool slot */
            sr_kpool *P = NULL;
            CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F32, 1, 2, K - 1, D, &P), SR_OK);
            memcpy((float *)P->data + sr_kpool_at(P, 0, 1, 0), cache, (size_t)(K - 1) * D * 4);
            float *gl = outm(T, D, D), *y = outm(T, D, D);
            int row0[2] = {0, T}, slot = 1;
            int64_t pos = 0;
            sr_kbatch b = {1, row0, &slot, &pos};
            CU_ASSERT_EQUAL(k->glu(SR_GLU_SIGMOID, T, D, big, 2 * D, big + D, 2 * D, gl, D), SR_OK);
            ok &= same_bits(buf + (size_t)(K - 1) * D, gl, (size_t)T * D * 4, "glu sigmoid vs conv module");
            CU_ASSERT_EQUAL(k->conv_dw(&b, D, K, gl, D, dw_w, dw_b, P, 0, y, D), SR_OK);
            CU_ASSERT_EQUAL(k->batchnorm(T, D, y, D, mean, var, bg, bb, 1e-5f, y, D), SR_OK);
            ok &= same_bits(t1, y, (size_t)T * D * 4, "conv_dw + batchnorm vs conv module");
            ok &= same_bits(buf + (size_t)T * D, (float *)P->data + sr_kpool_at(P, 0, 1, 0),
                            (size_t)(K - 1) * D * 4, "conv_dw cache vs conv module");
            sr_kpool_free(k, P);
            free(big); free(cache); free(dw_w); free(dw_b); free(mean); free(var); free(bg);
            free(bb); free(buf); free(t1); free(gl); free(y);
        }
        /* RNN-T predictor LSTM cell (gates with both biases already added) */
        {
            enum { H = 640 };
            float *g = mat(1, 4 * H, 4 * H, -4, 4), *c0 = mat(1, H, H, -2, 2);
            float *cr = xmalloc(H * 4), *hr = xmalloc(H * 4), *c = fdup(c0, H), *h = outm(1, H, H);
            for (int i = 0; i < H; i++) {
                float gi = g[i], gf = g[H + i], gg = g[2 * H + i], go = g[3 * H + i];
                gi = 1.0f / (1.0f + expf(-gi));
                gf = 1.0f / (1.0f + expf(-gf));
                gg = tanhf(gg);
                go = 1.0f / (1.0f + expf(-go));
                float cc = gf * c0[i] + gi * gg;
                cr[i] = cc;
                hr[i] = go * tanhf(cc);
            }
            CU_ASSERT_EQUAL(k->lstm_cell(1, H, g, 4 * H, c, H, h, H), SR_OK);
            ok &= same_bits(cr, c, H * 4, "lstm c vs predictor");
            ok &= same_bits(hr, h, H * 4, "lstm h vs predictor");
            free(g); free(c0); free(cr); free(hr); free(c); free(h);
        }
        /* Whisper's log-softmax (apply_rules), suppressed entries -inf, as whisper.c computed
         * it with libm's exp: the op's own exp (within 1.2 ulp of it) moves the double sum by
         * about 1e-16 relative, which reaches the float lse only when the sum lies that close
         * to a rounding boundary of it: not on this row */
        {
            enum { V = 51865 };
            float *row = mat(1, V, V, -20, 20), *y = outm(1, V, V);
            for (int v = 0; v < V; v += 7) row[v] = -INFINITY;
            CU_ASSERT_EQUAL(k->logsoftmax(1, V, row, V, y, V), SR_OK);
            float mx = -INFINITY;
            for (int v = 0; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            double sum = 0;
            for (int v = 0; v < V; v++) sum += row[v] == -INFINITY ? 0.0 : exp((double)row[v] - mx);
            float lse = (float)(mx + log(sum));
            for (int v = 0; v < V; v++) row[v] -= lse;
            ok &= same_bits(row, y, (size_t)V * 4, "logsoftmax vs whisper.c");
            free(row); free(y);
        }
        ok_paths += ok;
    }
    path_reset();
    printf("backend loops reproduced bit for bit on %d of %d paths\n      ", ok_paths, npaths);
    CU_ASSERT_EQUAL(ok_paths, npaths);
}

/* ---- empty calls, bad arguments ------------------------------------------------------------- */

/* transpose of n matrices: every element's bits where the plain loop puts them, the strides'
 * padding of y untouched; tiles of 32 with remainders on both sides; n, M or d = 0 touch
 * nothing; bad args. */
static void test_transpose(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    static const int shapes[][5] = {{1, 1, 1, 1, 1}, {1, 3, 5, 7, 4}, {2, 32, 32, 32, 32},
                                    {3, 33, 65, 70, 40}, {1, 100, 7, 9, 101}, {4, 256, 45, 45, 256}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int n = shapes[s][0], M = shapes[s][1], d = shapes[s][2], ldx = shapes[s][3], ldy = shapes[s][4];
        size_t nx = (size_t)n * M * ldx, ny = (size_t)n * d * ldy;
        float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
        CU_ASSERT_FATAL(x && y);
        for (size_t i = 0; i < nx; i++) x[i] = (float)(i * 7 % 1013) - 500.5f;
        x[0] = -0.0f;
        for (size_t i = 0; i < ny; i++) y[i] = 1234.5f;
        CU_ASSERT_EQUAL(k->transpose(n, M, d, x, ldx, y, ldy), SR_OK);
        for (int b = 0; b < n; b++)
            for (int j = 0; j < d; j++)
                for (int c = 0; c < ldy; c++) {
                    float want = c < M ? x[((size_t)b * M + c) * ldx + j] : 1234.5f;
                    bad += memcmp(&y[((size_t)b * d + j) * ldy + c], &want, sizeof want) != 0;
                }
        free(x);
        free(y);
    }
    CU_ASSERT_EQUAL(bad, 0);
    float v[4] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(k->transpose(1, 0, 4, NULL, 4, NULL, 0), SR_OK);
    CU_ASSERT_EQUAL(k->transpose(1, 2, 0, NULL, 0, NULL, 2), SR_OK);
    CU_ASSERT_EQUAL(k->transpose(0, 2, 2, NULL, 2, NULL, 2), SR_OK);
    TEST_ASSERT_ERR(k->transpose(1, -1, 2, v, 2, v, 2), SR_ERR_ARG, "transpose: negative size");
    TEST_ASSERT_ERR(k->transpose(-1, 1, 2, v, 2, v, 2), SR_ERR_ARG, "transpose: negative size");
    TEST_ASSERT_ERR(k->transpose(1, 2, 2, NULL, 2, v, 2), SR_ERR_ARG, "transpose: x is NULL");
    TEST_ASSERT_ERR(k->transpose(1, 2, 2, v, 1, v, 2), SR_ERR_ARG, "transpose: ldx = 1 < d = 2");
    TEST_ASSERT_ERR(k->transpose(1, 3, 1, v, 1, v, 2), SR_ERR_ARG, "transpose: ldy = 2 < M = 3");
}

/* copy_rows: rows from scattered places (several from one buffer, repeats, odd widths) land
 * in y's rows bit for bit, y's stride padding untouched; empty calls; bad args. */
static void test_copy_rows(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    enum { D = 37, LDY = 40, N = 9 };
    float a[5 * D], b[3 * D], y[N * LDY];
    for (int i = 0; i < 5 * D; i++) a[i] = (float)i * 0.5f - 20.0f;
    for (int i = 0; i < 3 * D; i++) b[i] = -(float)i * 0.25f;
    a[3] = -0.0f;
    const float *src[N] = {a, b + D, a + 4 * D, a, b + 2 * D, a + 2 * D, b, a + D, a + 3 * D};
    for (int i = 0; i < N * LDY; i++) y[i] = 99.0f;
    CU_ASSERT_EQUAL(k->copy_rows(N, D, src, y, LDY), SR_OK);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += memcmp(y + i * LDY, src[i], D * sizeof(float)) != 0;
        for (int c = D; c < LDY; c++) bad += y[i * LDY + c] != 99.0f;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(k->copy_rows(0, D, NULL, NULL, 0), SR_OK);
    CU_ASSERT_EQUAL(k->copy_rows(2, 0, NULL, NULL, 0), SR_OK);
    const float *holes[2] = {a, NULL};
    TEST_ASSERT_ERR(k->copy_rows(-1, D, src, y, LDY), SR_ERR_ARG, "copy_rows: negative size");
    TEST_ASSERT_ERR(k->copy_rows(2, D, NULL, y, LDY), SR_ERR_ARG, "copy_rows: src is NULL");
    TEST_ASSERT_ERR(k->copy_rows(2, D, src, NULL, LDY), SR_ERR_ARG, "copy_rows: y is NULL");
    TEST_ASSERT_ERR(k->copy_rows(2, D, src, y, D - 1), SR_ERR_ARG, "copy_rows: ldy = 36 < d = 37");
    TEST_ASSERT_ERR(k->copy_rows(2, D, holes, y, LDY), SR_ERR_ARG, "copy_rows: src[1] is NULL");
}

static void test_empty(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    /* zero rows (or elements) never touch the NULL operands */
    CU_ASSERT_EQUAL(k->norm(SR_NORM_LAYER, 0, 8, NULL, 8, NULL, NULL, 1e-5f, NULL, 0, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->act(SR_ACT_GELU, 0, NULL, NULL), SR_OK);
    CU_ASSERT_EQUAL(k->glu(SR_GLU_SILU, 0, 8, NULL, 8, NULL, 8, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->add(0, 8, NULL, 8, 1.0f, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->scale(0, 8, 2.0f, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->conv2d_s2(1, 0, 4, 4, NULL, 0, 0, NULL, NULL, 1, NULL), SR_OK);
    CU_ASSERT_EQUAL(k->conv2d_s2(0, 3, 4, 4, NULL, 0, 0, NULL, NULL, 1, NULL), SR_OK);
    CU_ASSERT_EQUAL(k->batchnorm(0, 8, NULL, 8, NULL, NULL, NULL, NULL, 1e-5f, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->lstm_cell(0, 8, NULL, 32, NULL, 8, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->softmax(0, 8, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->logsoftmax(0, 8, NULL, 8, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->topk(0, 8, 3, NULL, 8, NULL, NULL), SR_OK);
    sr_kbatch none = {0, NULL, NULL, NULL};
    int row0[3] = {0, 0, 0}, slot[2] = {0, 1};
    int64_t pos[2] = {0, 5};
    sr_kbatch empty2 = {2, row0, slot, pos};
    CU_ASSERT_EQUAL(k->rope(&none, 4, 8, NULL, NULL, 32), SR_OK);
    CU_ASSERT_EQUAL(k->rope(&empty2, 4, 8, NULL, NULL, 32), SR_OK);
    sr_kpool *P = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F16, 1, 2, 4, 8, &P), SR_OK);
    CU_ASSERT_EQUAL(k->kv_write(P, 0, &none, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->kv_write(P, 0, &empty2, NULL, 8), SR_OK);
    CU_ASSERT_EQUAL(k->conv_dw(&empty2, 8, 5, NULL, 8, NULL, NULL, P, 0, NULL, 8), SR_OK);
    unsigned char zero[2 * 4 * 8 * 2] = {0};
    CU_ASSERT_EQUAL(memcmp(P->data, zero, sizeof zero), 0); /* empty sequences leave the state */
    sr_kpool_free(k, P);
}

static void test_bad_args(void)
{
    const sr_kernels *k = sr_kernels_cpu();
    float x[64] = {0}, y[64] = {0}, g[16] = {0};
    int32_t idx[16];
    TEST_ASSERT_ERR(k->norm((sr_norm_kind)7, 1, 4, x, 4, g, g, 1e-5f, NULL, 0, y, 4), SR_ERR_ARG, "norm: kind");
    TEST_ASSERT_ERR(k->norm(SR_NORM_LAYER, -1, 4, x, 4, g, g, 1e-5f, NULL, 0, y, 4), SR_ERR_ARG, "norm: negative");
    TEST_ASSERT_ERR(k->norm(SR_NORM_LAYER, 1, 4, x, 3, g, g, 1e-5f, NULL, 0, y, 4), SR_ERR_ARG, "norm: ldx");
    TEST_ASSERT_ERR(k->norm(SR_NORM_LAYER, 1, 4, x, 4, g, NULL, 1e-5f, NULL, 0, y, 4), SR_ERR_ARG, "norm: b");
    TEST_ASSERT_ERR(k->norm(SR_NORM_RMS, 1, 4, x, 4, NULL, NULL, 1e-5f, NULL, 0, y, 4), SR_ERR_ARG, "norm: g");
    TEST_ASSERT_ERR(k->norm(SR_NORM_RMS, 1, 4, x, 4, g, NULL, 1e-5f, g, 2, y, 4), SR_ERR_ARG, "norm: ld_mul");
    TEST_ASSERT_ERR(k->norm(SR_NORM_RMS, 2, 4, x, 4, g, NULL, 1e-5f, NULL, 0, x, 8), SR_ERR_ARG, "norm: x and y alias");
    TEST_ASSERT_ERR(k->act((sr_act)9, 4, x, y), SR_ERR_ARG, "act: activation");
    TEST_ASSERT_ERR(k->act(SR_ACT_GELU, 4, NULL, y), SR_ERR_ARG, "act: x");
    TEST_ASSERT_ERR(k->glu((sr_glu)3, 1, 4, x, 4, x, 4, y, 4), SR_ERR_ARG, "glu: kind");
    TEST_ASSERT_ERR(k->glu(SR_GLU_SILU, 1, 4, x, 4, x, 3, y, 4), SR_ERR_ARG, "glu: ldb");
    TEST_ASSERT_ERR(k->glu(SR_GLU_SILU, 1, 4, x, 4, NULL, 4, y, 4), SR_ERR_ARG, "glu: b");
    TEST_ASSERT_ERR(k->add(1, 4, x, 3, 1.0f, y, 4), SR_ERR_ARG, "add: ldx");
    TEST_ASSERT_ERR(k->add(1, 4, x, -1, 1.0f, y, 4), SR_ERR_ARG, "add: ldx");
    TEST_ASSERT_ERR(k->add(1, 4, x, 0, 1.0f, NULL, 4), SR_ERR_ARG, "add: y");
    TEST_ASSERT_ERR(k->scale(1, -4, 2.0f, y, 4), SR_ERR_ARG, "scale: negative");
    TEST_ASSERT_ERR(k->scale(2, 4, 2.0f, y, 2), SR_ERR_ARG, "scale: ldy");
    int row0[3] = {0, 2, 1}, slot[2] = {0, 0}, r_ok[3] = {0, 1, 2};
    int64_t pos[2] = {0, -3}, pos_ok[2] = {0, 0};
    float inv[4] = {1, 1, 1, 1};
    sr_kbatch bad_rows = {2, row0, slot, pos_ok}, bad_pos = {2, r_ok, slot, pos},
              dup = {2, r_ok, slot, pos_ok}, neg = {-1, r_ok, slot, pos_ok}, ok1 = {1, r_ok, slot, pos_ok};
    TEST_ASSERT_ERR(k->rope(NULL, 1, 4, inv, x, 4), SR_ERR_ARG, "rope: batch");
    TEST_ASSERT_ERR(k->rope(&neg, 1, 4, inv, x, 4), SR_ERR_ARG, "rope: b->n_seq");
    TEST_ASSERT_ERR(k->rope(&bad_rows, 1, 4, inv, x, 4), SR_ERR_ARG, "rope: b->row0 decreases");
    TEST_ASSERT_ERR(k->rope(&bad_pos, 1, 4, inv, x, 4), SR_ERR_ARG, "rope: b->pos[1]");
    TEST_ASSERT_ERR(k->rope(&ok1, 1, 5, inv, x, 5), SR_ERR_ARG, "rope: head width");
    TEST_ASSERT_ERR(k->rope(&ok1, 2, 4, inv, x, 7), SR_ERR_ARG, "rope: ldx");
    TEST_ASSERT_ERR(k->rope(&ok1, 1, 4, NULL, x, 4), SR_ERR_ARG, "rope: inv_freq");
    TEST_ASSERT_ERR(k->conv2d_s2(1, 1, -2, 4, x, 0, 0, g, g, 1, y), SR_ERR_ARG, "conv2d_s2: negative");
    TEST_ASSERT_ERR(k->conv2d_s2(-1, 1, 2, 4, x, 0, 0, g, g, 1, y), SR_ERR_ARG, "conv2d_s2: negative");
    TEST_ASSERT_ERR(k->conv2d_s2(1, 2, 2, 4, x, 0, 7, g, g, 1, y), SR_ERR_ARG, "conv2d_s2: in_plane_stride");
    TEST_ASSERT_ERR(k->conv2d_s2(1, 2, 2, 4, x, 0, 0, g, NULL, 1, y), SR_ERR_ARG, "conv2d_s2: b");
    TEST_ASSERT_ERR(k->conv2d_s2(2, 2, 2, 4, x, 15, 8, g, g, 1, y), SR_ERR_ARG, "conv2d_s2: in_img_stride = 15 < 16");
    TEST_ASSERT_ERR(k->conv2d_s2(2, 2, 2, 4, x, 7, 0, g, g, 1, y), SR_ERR_ARG, "conv2d_s2: in_img_stride = 7 < 8");
    sr_kpool *P = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_kpool_create(k, SR_F32, 2, 2, 2, 4, &P), SR_OK);
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 4, 0, x, 4, g, g, NULL, 0, y, 4), SR_ERR_ARG, "conv_dw: kernel size");
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 4, 4, x, 4, g, g, P, 0, y, 4), SR_ERR_ARG, "conv_dw: state has 2 rows");
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 3, 3, x, 4, g, g, P, 0, y, 4), SR_ERR_ARG, "conv_dw: state width");
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 4, 3, x, 4, g, g, P, 2, y, 4), SR_ERR_ARG, "conv_dw: layer 2");
    TEST_ASSERT_ERR(k->conv_dw(&dup, 4, 3, x, 4, g, g, P, 0, y, 4), SR_ERR_ARG, "conv_dw: slot 0 used by sequences 0 and 1");
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 4, 3, x, 4, g, NULL, P, 0, y, 4), SR_ERR_ARG, "conv_dw: bias");
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 4, 3, x, 4, g, g, P, 0, x, 4), SR_ERR_ARG, "conv_dw: y must not alias x");
    TEST_ASSERT_ERR(k->conv_dw(&ok1, 4, 3, x, 4, g, g, P, 0, y, 3), SR_ERR_ARG, "conv_dw: ldy");
    TEST_ASSERT_ERR(k->batchnorm(1, 4, x, 4, g, NULL, g, g, 1e-5f, y, 4), SR_ERR_ARG, "batchnorm: var");
    TEST_ASSERT_ERR(k->batchnorm(1, 4, x, 4, g, g, g, g, 1e-5f, y, 2), SR_ERR_ARG, "batchnorm: ldy");
    TEST_ASSERT_ERR(k->lstm_cell(1, 4, x, 15, y, 4, g, 4), SR_ERR_ARG, "lstm_cell: ldg");
    TEST_ASSERT_ERR(k->lstm_cell(1, 4, x, 16, NULL, 4, g, 4), SR_ERR_ARG, "lstm_cell: c");
    TEST_ASSERT_ERR(k->softmax(2, 4, x, 3), SR_ERR_ARG, "softmax: ldx");
    TEST_ASSERT_ERR(k->softmax(1, 4, NULL, 4), SR_ERR_ARG, "softmax: x");
    TEST_ASSERT_ERR(k->logsoftmax(1, -4, x, 4, y, 4), SR_ERR_ARG, "logsoftmax: negative");
    TEST_ASSERT_ERR(k->logsoftmax(2, 4, x, 4, x, 8), SR_ERR_ARG, "logsoftmax: x and y alias");
    TEST_ASSERT_ERR(k->topk(1, 4, 5, x, 4, idx, NULL), SR_ERR_ARG, "topk: k = 5");
    TEST_ASSERT_ERR(k->topk(1, 4, 0, x, 4, idx, NULL), SR_ERR_ARG, "topk: k = 0");
    TEST_ASSERT_ERR(k->topk(1, 4, 2, x, 4, NULL, NULL), SR_ERR_ARG, "topk: idx");
    TEST_ASSERT_ERR(k->kv_write(NULL, 0, &ok1, x, 4), SR_ERR_ARG, "kv_write: pool");
    TEST_ASSERT_ERR(k->kv_write(P, -1, &ok1, x, 4), SR_ERR_ARG, "kv_write: layer -1");
    TEST_ASSERT_ERR(k->kv_write(P, 0, &ok1, x, 3), SR_ERR_ARG, "kv_write: ldx");
    TEST_ASSERT_ERR(k->kv_write(P, 0, &dup, x, 4), SR_ERR_ARG, "kv_write: slot 0 used");
    TEST_ASSERT_ERR(k->kv_write(P, 0, &bad_pos, x, 4), SR_ERR_ARG, "kv_write: b->pos[1]");
    int far[2] = {5, 0};
    sr_kbatch bad_slot = {2, r_ok, far, pos_ok}, no_slot = {1, r_ok, NULL, pos_ok};
    TEST_ASSERT_ERR(k->kv_write(P, 0, &bad_slot, x, 4), SR_ERR_ARG, "kv_write: b->slot[0] = 5");
    TEST_ASSERT_ERR(k->kv_write(P, 0, &no_slot, x, 4), SR_ERR_ARG, "kv_write: b->slot is NULL");
    P->dtype = SR_I8;
    TEST_ASSERT_ERR(k->kv_write(P, 0, &ok1, x, 4), SR_ERR_ARG, "kv_write: p element type i8");
    P->dtype = SR_F32;
    sr_kpool_free(k, P);
}

void test_register_ops_rows(void)
{
    TEST_SUITE("kernels_ops_rows", {"norm", test_norm}, {"act", test_act}, {"glu", test_glu},
               {"add_scale", test_add_scale}, {"rope", test_rope},
               {"conv2d_s2", test_conv2d}, {"conv_dw", test_conv_dw},
               {"batchnorm", test_batchnorm}, {"lstm_cell", test_lstm},
               {"softmax_logsoftmax", test_softmax}, {"logsoftmax_exp", test_logsoftmax_exp},
               {"topk", test_topk},
               {"kv_write", test_kv_write}, {"kv_write2", test_kv_write2}, {"rope_kv", test_rope_kv}, {"row_independence", test_row_independence},
               {"backend_loops", test_backend_loops}, {"transpose", test_transpose},
               {"copy_rows", test_copy_rows},
               {"empty", test_empty},
               {"bad_args", test_bad_args});
}
