/*
 * rowops.c — the CPU table's row-wise, element-wise, convolution, cache and search ops
 * (contracts: the op typedefs of kernels/kernels.h).
 *
 * These ops replace loops the backends ran inline, so each keeps the exact float formula of the
 * loop it replaces and a stream gives the same numbers before and after the move:
 *   norm        sr_layernorm / sr_rmsnorm (kernels/ops.h), then y *= mul (Voxtral's ada scale)
 *   act         sr_gelu_erf / sr_silu (their AVX2 paths), ReLU x > 0 ? x : 0 (NaN -> 0, as the
 *               FastConformer subsampling's relu)
 *   glu         SIGMOID a / (1 + expf(-b)) (FastConformer conv module), SILU sr_silu(a) * b
 *               (Voxtral's silu_mul)
 *   rope        Voxtral's rope(): a = (float)pos * inv[i] in f32, cosf / sinf, x1 c - x2 s
 *   conv2d_s2   FastConformer's conv3_plane: a 9-tap f32 sum from 0 in tap order (i, then j;
 *               taps outside the plane skipped), then b + sum, then ReLU
 *   conv_dw     FastConformer's depthwise loop: s = bias; s += w * in over j (zero state rows
 *               included as products, as its memset buffer did)
 *   batchnorm   (x - mean) / sqrtf(var + eps) * g + b
 *   lstm_cell   the RNN-T predictor: sigmoid 1 / (1 + expf(-z)), tanhf, c = f c + i g
 *   softmax     sr_softmax over the whole row
 *   logsoftmax  Whisper's log-probabilities: max in f32, sum of e^d, d = (double)x - max, in
 *               double (the exp below; -inf terms are 0), lse = (float)(max + log(sum)),
 *               y = x - lse
 * The builds use -std=c11, where GCC contracts no a * b + c into a fused multiply-add, so the
 * backends' loops round every product; the vector paths here use separate multiplies and adds
 * too, and every lane computes exactly its scalar formula: the portable, AVX2 and AVX-512
 * paths agree bit for bit, and so does any split of the rows over threads (row independence).
 *
 * Vector paths (runtime dispatch, x86-64 with GCC or clang): AVX-512F (16 lanes) or AVX2 + F16C
 * (8 lanes) for the element-wise ops, the rope rotation, the depthwise conv (lanes over
 * channels, f16 / bf16 state widened in registers) and the stride-2 conv (lanes over output
 * columns, the even / odd input columns split by a two-vector shuffle). They are written once
 * with GCC vector extensions in macros instantiated per width. Cache writes to f16 / bf16 pools
 * (kv_write, the conv_dw state) convert 8 or 16 values at a time (F16C / integer lanes) with
 * exactly core/dtype.h's rounding; the scalar conversions cost 4-10 ns a value. Widening is
 * exact either way. sr_ops_force_portable(1) (kernels/ops.h) selects the portable path here as
 * well. The GLU sigmoid and the LSTM stay scalar on libm: their formulas are the libm calls.
 * logsoftmax's e^d is this file's own double exp (ls_exp_1: d = n ln2 + r, e^r by a degree-13
 * Taylor polynomial, one rounding a step; within 2 ulp of exp), summed in 16 interleaved
 * partial sums and a fixed tree, so that every path computes the same sum: libm's exp took
 * 14 % of a 16-stream whisperrt step here, 0.78 ms a 51,864-entry row.
 *
 * Not allowed: conv_dw with y aliasing x (its window reads rows that y would already have
 * overwritten); partial overlaps of any operands. norm, act, glu (y = a or y = b), add, batchnorm
 * and logsoftmax may work in place with equal strides.
 *
 * Large calls are split over the CPU worker pool (pool.c) by rows, channels or sequences; a
 * part writes only its own outputs (and its own cache slot, or its own channels of one).
 *
 * Argument checks: kernels/check.c (sr_kernels_check_<op>), shared with the CUDA table so that
 * both tables refuse the same calls with the same messages.
 */
#include "../../core/dtype.h"
#include "../../core/internal.h"
#include "../ops.h"
#include "cpu_impl.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define RO_X86 1
#include <immintrin.h>
#endif

/* The formulas above round every product: no a * b + c may become a fused multiply-add. GCC
 * in ISO C mode (-std=c11) never contracts; clang does by default unless told not to. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- batches -------------------------------------------------------------------------------- */

/* The sequence holding batch row r (< the row count): the last s with row0[s] <= r, which is
 * never an empty one. */
static int seq_of(const sr_kbatch *b, int r)
{
    int lo = 0, hi = b->n_seq - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (b->row0[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* ---- splitting work over the pool ----------------------------------------------------------- */

/* Work units (about one float operation each) per part: a hand-off to a pool worker costs a
 * few microseconds, so smaller calls run on the caller alone. */
#define RO_GRAIN 32768.0

typedef void (*ro_range_fn)(void *ctx, int64_t lo, int64_t hi);

typedef struct {
    ro_range_fn fn;
    void *ctx;
    int64_t n;
    int parts;
} ro_split;

static void ro_split_part(void *p, int part)
{
    const ro_split *s = p;
    int64_t lo = s->n * part / s->parts, hi = s->n * (part + 1) / s->parts;
    if (hi > lo) s->fn(s->ctx, lo, hi);
}

/* fn over [0, n) in contiguous ranges, each item costing about `unit` work units. */
static void ro_for(int64_t n, double unit, ro_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    int threads = sr_cpu_threads();
    double want = (double)n * unit / RO_GRAIN;
    int64_t cap = SR_MIN(n, (int64_t)4 * threads);
    int parts = threads > 1 && want >= 2.0 ? (int)SR_MIN((double)cap, want) : 1;
    if (parts <= 1) {
        fn(ctx, 0, n);
        return;
    }
    ro_split s = {fn, ctx, n, parts};
    sr_cpu_parallel(threads, parts, ro_split_part, &s);
}

/* ---- scalar kernels (the portable path, and the vector paths' tails) ------------------------- */

static inline float relu1(float v) { return v > 0.0f ? v : 0.0f; }

static void add_1(int n, const float *x, float alpha, float *y)
{
    for (int i = 0; i < n; i++) y[i] = y[i] + alpha * x[i];
}

static void scale_1(int n, float s, float *y)
{
    for (int i = 0; i < n; i++) y[i] = y[i] * s;
}

static void mul_1(int n, const float *m, float *y)
{
    for (int i = 0; i < n; i++) y[i] = y[i] * m[i];
}

static void mul3_1(int n, const float *a, const float *b, float *y)
{
    for (int i = 0; i < n; i++) y[i] = a[i] * b[i];
}

static void relu_1(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] = relu1(x[i]);
}

static void bn_1(int n, const float *x, const float *mean, const float *sd, const float *g,
                 const float *b, float *y)
{
    for (int i = 0; i < n; i++) y[i] = (x[i] - mean[i]) / sd[i] * g[i] + b[i];
}

static void rot_1(int n, const float *c, const float *s, float *x1, float *x2)
{
    for (int i = 0; i < n; i++) {
        float a = x1[i], b = x2[i];
        x1[i] = a * c[i] - b * s[i];
        x2[i] = b * c[i] + a * s[i];
    }
}

/* One output of the stride-2 conv: rw[i] is input row 2t + i - 2 (NULL outside the plane). */
static inline float conv3_1(const float *const rw[3], int F, const float *w9, int f)
{
    float s = 0.0f;
    for (int i = 0; i < 3; i++) {
        if (!rw[i]) continue;
        for (int j = 0; j < 3; j++) {
            int fj = 2 * f + j - 2;
            if (fj < 0 || fj >= F) continue;
            s += w9[i * 3 + j] * rw[i][fj];
        }
    }
    return s;
}

/* The vector part of one conv output row: none here (returns the first column left, 1). */
static int conv3_row_1(const float *const rw[3], int F, const float *w9, float b, int relu,
                       float *orow)
{
    (void)rw, (void)F, (void)w9, (void)b, (void)relu, (void)orow;
    return 1;
}

/* The depthwise conv of one sequence: input [state ; x], state row r channel c at
 * st[r * ldst + c] in dtype dt (NULL: zero rows). */
typedef struct {
    int n, K, ldx, ldy;
    size_t ldst;
    sr_dtype dt;
    const float *x, *w, *bias;
    const void *st;
    float *y;
} ro_dw;

static inline float st_get(const ro_dw *a, int row, int c)
{
    if (!a->st) return 0.0f;
    size_t i = (size_t)row * a->ldst + (size_t)c;
    switch (a->dt) {
    case SR_F16: return sr_f16_to_f32(((const uint16_t *)a->st)[i]);
    case SR_BF16: return sr_bf16_to_f32(((const uint16_t *)a->st)[i]);
    default: return ((const float *)a->st)[i];
    }
}

static void dw_1(const ro_dw *a, int c0, int c1)
{
    int K = a->K;
    for (int t = 0; t < a->n; t++) {
        float *yr = a->y + (size_t)t * a->ldy;
        int j0 = SR_MAX(0, K - 1 - t); /* taps j >= j0 read x, the others the state */
        const float *x0 = a->x + (size_t)(t + j0 - (K - 1)) * a->ldx;
        for (int c = c0; c < c1; c++) {
            const float *w = a->w + (size_t)c * K, *xp = x0 + c;
            float s = a->bias[c];
            for (int j = 0; j < j0; j++) s += w[j] * st_get(a, t + j, c);
            for (int j = j0; j < K; j++, xp += a->ldx) s += w[j] * *xp;
            yr[c] = s;
        }
    }
}

/* Pool rows: n floats to f16 / bf16, rounding to nearest even exactly as core/dtype.h. */
static void put_f16_1(size_t n, const float *src, uint16_t *dst) { sr_f32_to_f16_n(src, dst, n); }
static void put_bf16_1(size_t n, const float *src, uint16_t *dst) { sr_f32_to_bf16_n(src, dst, n); }

/* logsoftmax's exp, for d = (double)x - max <= 0 (or NaN): d = n ln2 + r with ln2 in two parts
 * (fdlibm's: n * LS_LN2_HI is exact), n = round(d log2e) by the 1.5 * 2^52 shift, e^r (|r| <=
 * 0.35) by Taylor's polynomial to r^13 (its remainder below 5e-18) in Horner form, times 2^n
 * built in the exponent bits; d < -708 (and -inf) gives 0 (such a term is below 2^-1021 of the
 * sum, which holds e^0 = 1), NaN stays NaN. Only correctly rounded operations, in this order,
 * so the vector lanes below compute these bits. */
#define LS_LO (-708.0)
#define LS_LOG2E 1.4426950408889634
#define LS_LN2_HI 6.93147180369123816490e-01
#define LS_LN2_LO 1.90821492927058770002e-10
#define LS_SHIFT 6755399441055744.0 /* 1.5 * 2^52 */
#define LS_SHIFT_BITS 0x4338000000000000ull
#define LS_DEG 13
static const double ls_coef[LS_DEG + 1] = {
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
    1.0 / 40320.0,      1.0 / 5040.0,      1.0 / 720.0,      1.0 / 120.0,     1.0 / 24.0,
    1.0 / 6.0,          0.5,               1.0,              1.0};

static inline double ls_exp_1(double d)
{
    double c = d < LS_LO ? LS_LO : d;
    double k = c * LS_LOG2E + LS_SHIFT;
    double n = k - LS_SHIFT;
    double r = c - n * LS_LN2_HI;
    r = r - n * LS_LN2_LO;
    double p = ls_coef[0];
    for (int i = 1; i <= LS_DEG; i++) p = p * r + ls_coef[i];
    uint64_t kb, e;
    memcpy(&kb, &k, sizeof kb);
    e = (kb - LS_SHIFT_BITS + 1023u) << 52;
    double s;
    memcpy(&s, &e, sizeof s);
    return d < LS_LO ? 0.0 : p * s;
}

/* The sum of a row's terms: term j goes to partial sum j % 16 for the whole blocks of 16, the
 * 16 partial sums fold in a fixed tree (l + 8, l + 4, l + 2, l + 1), the tail adds in order. */
#define LS_PARTS 16
static double ls_fold(const double a[LS_PARTS], int n, const float *x, float mx)
{
    double u[8];
    for (int l = 0; l < 8; l++) u[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) u[l] = u[l] + u[l + 4];
    for (int l = 0; l < 2; l++) u[l] = u[l] + u[l + 2];
    double s = u[0] + u[1];
    for (int i = n / LS_PARTS * LS_PARTS; i < n; i++) s += ls_exp_1((double)x[i] - mx);
    return s;
}

/* y = x - lse over one row (sum: where not NULL, the sum of the terms) */
static void logsoftmax_1(int n, const float *x, float *y, double *sum)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double a[LS_PARTS] = {0};
    for (int i = 0; i + LS_PARTS <= n; i += LS_PARTS)
        for (int l = 0; l < LS_PARTS; l++) a[l] += ls_exp_1((double)x[i + l] - mx);
    double s = ls_fold(a, n, x, mx);
    float lse = (float)(mx + log(s));
    for (int i = 0; i < n; i++) y[i] = x[i] - lse;
    if (sum) *sum = s;
}

/* ---- vector kernels ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    void (*add)(int n, const float *x, float alpha, float *y);
    void (*scale)(int n, float s, float *y);
    void (*mul)(int n, const float *m, float *y);
    void (*mul3)(int n, const float *a, const float *b, float *y);
    void (*relu)(size_t n, const float *x, float *y);
    void (*bn)(int n, const float *x, const float *mean, const float *sd, const float *g,
               const float *b, float *y);
    void (*rot)(int n, const float *c, const float *s, float *x1, float *x2);
    int (*conv3_row)(const float *const rw[3], int F, const float *w9, float b, int relu,
                     float *orow);
    void (*dw)(const ro_dw *a, int c0, int c1);
    void (*put_f16)(size_t n, const float *src, uint16_t *dst);
    void (*put_bf16)(size_t n, const float *src, uint16_t *dst);
    void (*logsoftmax)(int n, const float *x, float *y, double *sum);
} ro_vec;

static const ro_vec ro_portable = {"portable", add_1,       scale_1, mul_1,    mul3_1,
                                   relu_1,     bn_1,        rot_1,   conv3_row_1, dw_1,
                                   put_f16_1,  put_bf16_1,  logsoftmax_1};

/* Widest depthwise kernel whose taps the vector path keeps in registers / on the stack. */
#define RO_DW_MAXK 64

#ifdef RO_X86
typedef float ro_v16 __attribute__((vector_size(64)));
typedef int32_t ro_i16 __attribute__((vector_size(64)));
typedef float ro_v8 __attribute__((vector_size(32)));
typedef int32_t ro_i8 __attribute__((vector_size(32)));

#ifdef __clang__
#define RO_EVENS16(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define RO_ODDS16(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
#define RO_EVENS8(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define RO_ODDS8(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
#define RO_SHIFT16(a, b) __builtin_shufflevector(a, b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
#define RO_SHIFT8(a, b) __builtin_shufflevector(a, b, 1, 2, 3, 4, 5, 6, 7, 8)
#else
#define RO_EVENS16(a, b) __builtin_shuffle(a, b, (ro_i16){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#define RO_ODDS16(a, b) __builtin_shuffle(a, b, (ro_i16){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
#define RO_EVENS8(a, b) __builtin_shuffle(a, b, (ro_i8){0, 2, 4, 6, 8, 10, 12, 14})
#define RO_ODDS8(a, b) __builtin_shuffle(a, b, (ro_i8){1, 3, 5, 7, 9, 11, 13, 15})
#define RO_SHIFT16(a, b) __builtin_shuffle(a, b, (ro_i16){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
#define RO_SHIFT8(a, b) __builtin_shuffle(a, b, (ro_i8){1, 2, 3, 4, 5, 6, 7, 8})
#endif

#define RO_AVX512 __attribute__((target("avx512f")))
#define RO_AVX2 __attribute__((target("avx2,f16c")))

/* A state row's lanes [c, c + lanes) widened to f32 (exact), zeros for a NULL state. */
RO_AVX512 static inline ro_v16 dw_state_512(const ro_dw *a, int row, int c)
{
    ro_v16 v = {0};
    if (!a->st) return v;
    size_t i = (size_t)row * a->ldst + (size_t)c;
    const uint16_t *h = (const uint16_t *)a->st + i;
    switch (a->dt) {
    case SR_F16: return (ro_v16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
    case SR_BF16:
        return (ro_v16)_mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)h)), 16));
    default: memcpy(&v, (const float *)a->st + i, sizeof v); return v;
    }
}

RO_AVX2 static inline ro_v8 dw_state_256(const ro_dw *a, int row, int c)
{
    ro_v8 v = {0};
    if (!a->st) return v;
    size_t i = (size_t)row * a->ldst + (size_t)c;
    const uint16_t *h = (const uint16_t *)a->st + i;
    switch (a->dt) {
    case SR_F16: return (ro_v8)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    case SR_BF16:
        return (ro_v8)_mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h)), 16));
    default: memcpy(&v, (const float *)a->st + i, sizeof v); return v;
    }
}

#define RO_LD(v, p) memcpy(&(v), (p), sizeof(v))
#define RO_ST(p, v) memcpy((p), &(v), sizeof(v))

/* Every kernel of ro_vec for one vector width: VT float lanes, VI the matching int lanes, VN
 * lanes, EVENS / ODDS the shuffles, STATE the state widening. Each lane evaluates exactly the
 * scalar formula above; tails go to the scalar kernels. */
#define RO_VEC_KERNELS(SFX, ATTR, VT, VI, VN, EVENS, ODDS, SHIFT1, STATE)                              \
    ATTR static void add_##SFX(int n, const float *x, float alpha, float *y)                  \
    {                                                                                         \
        int i = 0;                                                                            \
        for (; i + VN <= n; i += VN) {                                                        \
            VT a, b;                                                                          \
            RO_LD(a, x + i);                                                                  \
            RO_LD(b, y + i);                                                                  \
            b = b + alpha * a;                                                                \
            RO_ST(y + i, b);                                                                  \
        }                                                                                     \
        add_1(n - i, x + i, alpha, y + i);                                                    \
    }                                                                                         \
    ATTR static void scale_##SFX(int n, float s, float *y)                                    \
    {                                                                                         \
        int i = 0;                                                                            \
        for (; i + VN <= n; i += VN) {                                                        \
            VT b;                                                                             \
            RO_LD(b, y + i);                                                                  \
            b = b * s;                                                                        \
            RO_ST(y + i, b);                                                                  \
        }                                                                                     \
        scale_1(n - i, s, y + i);                                                             \
    }                                                                                         \
    ATTR static void mul_##SFX(int n, const float *m, float *y)                               \
    {                                                                                         \
        int i = 0;                                                                            \
        for (; i + VN <= n; i += VN) {                                                        \
            VT a, b;                                                                          \
            RO_LD(a, m + i);                                                                  \
            RO_LD(b, y + i);                                                                  \
            b = b * a;                                                                        \
            RO_ST(y + i, b);                                                                  \
        }                                                                                     \
        mul_1(n - i, m + i, y + i);                                                           \
    }                                                                                         \
    ATTR static void mul3_##SFX(int n, const float *a, const float *b, float *y)              \
    {                                                                                         \
        int i = 0;                                                                            \
        for (; i + VN <= n; i += VN) {                                                        \
            VT u, v;                                                                          \
            RO_LD(u, a + i);                                                                  \
            RO_LD(v, b + i);                                                                  \
            u = u * v;                                                                        \
            RO_ST(y + i, u);                                                                  \
        }                                                                                     \
        mul3_1(n - i, a + i, b + i, y + i);                                                   \
    }                                                                                         \
    ATTR static void relu_##SFX(size_t n, const float *x, float *y)                           \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + VN <= n; i += VN) {                                                        \
            VT a, z = {0};                                                                    \
            RO_LD(a, x + i);                                                                  \
            a = (VT)((VI)a & (a > z)); /* x > 0 ? x : +0, NaN included */                    \
            RO_ST(y + i, a);                                                                  \
        }                                                                                     \
        relu_1(n - i, x + i, y + i);                                                          \
    }                                                                                         \
    ATTR static void bn_##SFX(int n, const float *x, const float *mean, const float *sd,      \
                              const float *g, const float *b, float *y)                       \
    {                                                                                         \
        int i = 0;                                                                            \
        for (; i + VN <= n; i += VN) {                                                        \
            VT v, m, s, gg, bb;                                                               \
            RO_LD(v, x + i);                                                                  \
            RO_LD(m, mean + i);                                                               \
            RO_LD(s, sd + i);                                                                 \
            RO_LD(gg, g + i);                                                                 \
            RO_LD(bb, b + i);                                                                 \
            v = (v - m) / s * gg + bb;                                                        \
            RO_ST(y + i, v);                                                                  \
        }                                                                                     \
        bn_1(n - i, x + i, mean + i, sd + i, g + i, b + i, y + i);                            \
    }                                                                                         \
    ATTR static void rot_##SFX(int n, const float *c, const float *s, float *x1, float *x2)   \
    {                                                                                         \
        int i = 0;                                                                            \
        for (; i + VN <= n; i += VN) {                                                        \
            VT a, b, cc, ss;                                                                  \
            RO_LD(a, x1 + i);                                                                 \
            RO_LD(b, x2 + i);                                                                 \
            RO_LD(cc, c + i);                                                                 \
            RO_LD(ss, s + i);                                                                 \
            VT u = a * cc - b * ss, v = b * cc + a * ss;                                      \
            RO_ST(x1 + i, u);                                                                 \
            RO_ST(x2 + i, v);                                                                 \
        }                                                                                     \
        rot_1(n - i, c + i, s + i, x1 + i, x2 + i);                                           \
    }                                                                                         \
    /* Output columns 1 .. fe, fe = (F - 1) / 2 the last whose three taps lie inside the row, \
     * VN at a time (a last block overlapping the one before recomputes the same values);     \
     * returns the first column left to the caller (1 when the row is too short). Lane l of   \
     * block f reads input columns 2(f + l) - 2 .. 2(f + l): evens and odds of two loads,     \
     * the third tap the evens shifted by one lane plus one scalar, so nothing past the last  \
     * tap is read. */                                                                        \
    ATTR static int conv3_row_##SFX(const float *const rw[3], int F, const float *w9, float b, \
                                    int relu, float *orow)                                    \
    {                                                                                         \
        int fe = (F - 1) / 2;                                                                 \
        if (fe < VN) return 1;                                                                \
        for (int f = 1;;) {                                                                   \
            VT s = {0}, z = {0};                                                              \
            for (int i = 0; i < 3; i++) {                                                     \
                if (!rw[i]) continue;                                                         \
                const float *p = rw[i] + 2 * f - 2;                                           \
                VT lo, hi, next = {p[2 * VN]};                                                \
                RO_LD(lo, p);                                                                 \
                RO_LD(hi, p + VN);                                                            \
                VT e0 = EVENS(lo, hi), o1 = ODDS(lo, hi), e2 = SHIFT1(e0, next);              \
                s = s + w9[i * 3] * e0;                                                       \
                s = s + w9[i * 3 + 1] * o1;                                                   \
                s = s + w9[i * 3 + 2] * e2;                                                   \
            }                                                                                 \
            s = b + s;                                                                        \
            if (relu) s = (VT)((VI)s & (s > z));                                              \
            RO_ST(orow + f, s);                                                               \
            if (f + VN - 1 >= fe) break;                                                      \
            f = f + 2 * VN - 1 <= fe ? f + VN : fe - VN + 1;                                  \
        }                                                                                     \
        return fe + 1;                                                                        \
    }                                                                                         \
    /* Lanes over channels; the taps of VN channels transposed into wt[j] once per block. */  \
    ATTR static void dw_##SFX(const ro_dw *a, int c0, int c1)                                 \
    {                                                                                         \
        int K = a->K, c = c0;                                                                 \
        for (; K <= RO_DW_MAXK && c + VN <= c1; c += VN) {                                    \
            VT wt[RO_DW_MAXK], bv;                                                            \
            for (int j = 0; j < K; j++)                                                       \
                for (int l = 0; l < VN; l++) wt[j][l] = a->w[(size_t)(c + l) * K + j];        \
            RO_LD(bv, a->bias + c);                                                           \
            for (int t = 0; t < a->n; t++) {                                                  \
                VT s = bv;                                                                    \
                int j = 0;                                                                    \
                for (; j < K && t + j < K - 1; j++) s = s + wt[j] * STATE(a, t + j, c);       \
                const float *xr = a->x + (size_t)(t + j - (K - 1)) * a->ldx + c;              \
                for (; j < K; j++, xr += a->ldx) {                                            \
                    VT v;                                                                     \
                    RO_LD(v, xr);                                                             \
                    s = s + wt[j] * v;                                                        \
                }                                                                             \
                RO_ST(a->y + (size_t)t * a->ldy + c, s);                                      \
            }                                                                                 \
        }                                                                                     \
        if (c < c1) dw_1(a, c, c1);                                                           \
    }                                                                                         \
    static const ro_vec ro_##SFX = {#SFX,         add_##SFX,      scale_##SFX, mul_##SFX,       \
                                    mul3_##SFX,   relu_##SFX,     bn_##SFX,    rot_##SFX,       \
                                    conv3_row_##SFX, dw_##SFX,    put_f16_##SFX, put_bf16_##SFX, \
                                    logsoftmax_##SFX};

/* f32 -> f16 with the hardware conversion (round to nearest even, overflow to Inf, f16
 * subnormals exact: what sr_f32_to_f16 computes); a vector holding a NaN is redone by
 * sr_f32_to_f16, whose payload rule differs from the hardware's for signalling NaNs. */
RO_AVX512 static void put_f16_avx512(size_t n, const float *src, uint16_t *dst)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) sr_f32_to_f16_n(src + i, dst + i, 16);
        else _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    sr_f32_to_f16_n(src + i, dst + i, n - i);
}

RO_AVX2 static void put_f16_avx2(size_t n, const float *src, uint16_t *dst)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) sr_f32_to_f16_n(src + i, dst + i, 8);
        else _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    sr_f32_to_f16_n(src + i, dst + i, n - i);
}

/* f32 -> bf16 in integer lanes, sr_f32_to_bf16's formula: NaN -> upper half | 0x40 (quiet),
 * else (u + 0x7fff + (u >> 16 & 1)) >> 16. */
RO_AVX512 static void put_bf16_avx512(size_t n, const float *src, uint16_t *dst)
{
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff),
                  abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                  quiet = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(src + i));
        __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(hi, one)), 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
        r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    sr_f32_to_bf16_n(src + i, dst + i, n - i);
}

RO_AVX2 static void put_bf16_avx2(size_t n, const float *src, uint16_t *dst)
{
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff),
                  abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000),
                  quiet = _mm256_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i hi = _mm256_srli_epi32(u, 16);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        /* 0 <= r <= 0xffff: the unsigned-saturating pack keeps it; the pack works per 128-bit
         * half, so the 64-bit quarters are put back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(p));
    }
    sr_f32_to_bf16_n(src + i, dst + i, n - i);
}

typedef float ro_h8 __attribute__((vector_size(32)));
typedef float ro_h4 __attribute__((vector_size(16)));
typedef double ro_d8 __attribute__((vector_size(64)));
typedef double ro_d4 __attribute__((vector_size(32)));
typedef uint64_t ro_u8 __attribute__((vector_size(64)));
typedef uint64_t ro_u4 __attribute__((vector_size(32)));

/* logsoftmax on VFN float lanes (VF, VI), its exp on DN double lanes (VD, VU; VH: DN floats):
 * ls_exp_1 and logsoftmax_1's partial sums lane for lane. The maximum folds its lanes in
 * another order than logsoftmax_1 walks the row; x > max ignores NaN either way, so only the
 * sign of a zero maximum could differ, which changes no d = x - max but a zero's sign, and
 * e^(+-0) = 1. */
#define RO_LS_KERNELS(SFX, ATTR, VF, VI, VFN, VH, VD, VU, DN)                                  \
    ATTR static inline VD ls_exp_##SFX(VD d)                                                  \
    {                                                                                         \
        const VD zero = {0};                                                                  \
        VU m = (VU)(d < LS_LO);                                                               \
        VD c = (VD)(((VU)d & ~m) | ((VU)(zero + LS_LO) & m));                                 \
        VD k = c * LS_LOG2E + LS_SHIFT;                                                       \
        VD n = k - LS_SHIFT;                                                                  \
        VD r = c - n * LS_LN2_HI;                                                             \
        r = r - n * LS_LN2_LO;                                                                \
        VD p = zero + ls_coef[0];                                                             \
        for (int i = 1; i <= LS_DEG; i++) p = p * r + ls_coef[i];                             \
        VU e = ((VU)k - LS_SHIFT_BITS + 1023u) << 52;                                         \
        VD y = p * (VD)e;                                                                     \
        return (VD)((VU)y & ~m);                                                              \
    }                                                                                         \
    ATTR static void logsoftmax_##SFX(int n, const float *x, float *y, double *sum)           \
    {                                                                                         \
        VF mv = (VF){0} + -INFINITY;                                                          \
        int i = 0;                                                                            \
        for (; i + VFN <= n; i += VFN) {                                                      \
            VF v;                                                                             \
            RO_LD(v, x + i);                                                                  \
            VI g = v > mv;                                                                    \
            mv = (VF)(((VI)v & g) | ((VI)mv & ~g));                                           \
        }                                                                                     \
        float mx = -INFINITY;                                                                 \
        for (int l = 0; l < VFN; l++) mx = mv[l] > mx ? mv[l] : mx;                           \
        for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;                                        \
        VD acc[LS_PARTS / DN];                                                                \
        memset(acc, 0, sizeof acc);                                                           \
        for (i = 0; i + LS_PARTS <= n; i += LS_PARTS)                                         \
            for (int j = 0; j < LS_PARTS / DN; j++) {                                         \
                VH h;                                                                         \
                RO_LD(h, x + i + j * DN);                                                     \
                acc[j] = acc[j] + ls_exp_##SFX(__builtin_convertvector(h, VD) - (double)mx);  \
            }                                                                                 \
        double a[LS_PARTS];                                                                   \
        memcpy(a, acc, sizeof a);                                                             \
        double s = ls_fold(a, n, x, mx);                                                      \
        float lse = (float)(mx + log(s));                                                     \
        for (i = 0; i + VFN <= n; i += VFN) {                                                 \
            VF v;                                                                             \
            RO_LD(v, x + i);                                                                  \
            v = v - lse;                                                                      \
            RO_ST(y + i, v);                                                                  \
        }                                                                                     \
        for (; i < n; i++) y[i] = x[i] - lse;                                                 \
        if (sum) *sum = s;                                                                    \
    }

RO_LS_KERNELS(avx512, RO_AVX512, ro_v16, ro_i16, 16, ro_h8, ro_d8, ro_u8, 8)
RO_LS_KERNELS(avx2, RO_AVX2, ro_v8, ro_i8, 8, ro_h4, ro_d4, ro_u4, 4)

RO_VEC_KERNELS(avx512, RO_AVX512, ro_v16, ro_i16, 16, RO_EVENS16, RO_ODDS16, RO_SHIFT16, dw_state_512)
RO_VEC_KERNELS(avx2, RO_AVX2, ro_v8, ro_i8, 8, RO_EVENS8, RO_ODDS8, RO_SHIFT8, dw_state_256)
#endif /* RO_X86 */

/* ---- dispatch ------------------------------------------------------------------------------- */

enum { RO_ISA_AUTO = 0, RO_ISA_PORTABLE = 1, RO_ISA_AVX2 = 2, RO_ISA_AVX512 = 3 };
static int ro_forced; /* RO_ISA_AUTO unless a test forced a path */

static int ro_have(int isa)
{
    switch (isa) {
    case RO_ISA_AUTO:
    case RO_ISA_PORTABLE: return 1;
#ifdef RO_X86
    case RO_ISA_AVX2: return __builtin_cpu_supports("avx2") && sr_cpu_f16c(); /* f16 state widening */
    case RO_ISA_AVX512: return __builtin_cpu_supports("avx512f");
#endif
    default: return 0;
    }
}

static const ro_vec *ro_pick(void)
{
    int isa = ro_forced;
    if (isa == RO_ISA_AUTO)
        isa = !sr_ops_simd()               ? RO_ISA_PORTABLE
              : ro_have(RO_ISA_AVX512) ? RO_ISA_AVX512
              : ro_have(RO_ISA_AVX2)   ? RO_ISA_AVX2
                                       : RO_ISA_PORTABLE;
#ifdef RO_X86
    if (isa == RO_ISA_AVX512) return &ro_avx512;
    if (isa == RO_ISA_AVX2) return &ro_avx2;
#endif
    return &ro_portable;
}

/* Test hook (cpu_impl.h): force the vector path of these ops, 0 auto,
 * 1 portable, 2 AVX2, 3 AVX-512. Returns the name of the path now used, or NULL (nothing
 * changed) when this CPU lacks it. Process-wide and not thread-safe: for tests only. */
const char *sr_cpu_rowops_force(int isa)
{
    if (isa < RO_ISA_AUTO || isa > RO_ISA_AVX512 || !ro_have(isa)) return NULL;
    ro_forced = isa;
    return ro_pick()->name;
}

double sr_cpu_logsoftmax_exp(double d) { return ls_exp_1(d); }

double sr_cpu_logsoftmax_sum(int n, const float *x, float *y)
{
    double s = 0;
    ro_pick()->logsoftmax(n, x, y, &s);
    return s;
}

/* ---- norm ----------------------------------------------------------------------------------- */

typedef struct {
    const ro_vec *V;
    sr_norm_kind kind;
    int d, ldx, ldy, ld_mul;
    const float *x, *g, *b, *mul;
    float eps;
    float *y;
} norm_ctx;

static void norm_rows(void *p, int64_t lo, int64_t hi)
{
    const norm_ctx *c = p;
    int r0 = (int)lo, n = (int)(hi - lo), d = c->d;
    if (c->ldx == d && c->ldy == d) { /* dense rows: one call over the range */
        const float *x = c->x + (size_t)r0 * d;
        float *y = c->y + (size_t)r0 * d;
        if (c->kind == SR_NORM_LAYER) sr_layernorm(x, n, d, c->g, c->b, c->eps, y);
        else sr_rmsnorm(x, n, d, c->g, c->eps, y);
    } else {
        for (int r = r0; r < r0 + n; r++) {
            const float *x = c->x + (size_t)r * c->ldx;
            float *y = c->y + (size_t)r * c->ldy;
            if (c->kind == SR_NORM_LAYER) sr_layernorm(x, 1, d, c->g, c->b, c->eps, y);
            else sr_rmsnorm(x, 1, d, c->g, c->eps, y);
        }
    }
    if (c->mul)
        for (int r = r0; r < r0 + n; r++)
            c->V->mul(d, c->mul + (size_t)r * c->ld_mul, c->y + (size_t)r * c->ldy);
}

sr_status sr_cpu_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                      const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy)
{
    sr_status st = sr_kernels_check_norm(kind, M, d, x, ldx, g, b, mul, ld_mul, y, ldy);
    if (st || M == 0 || d == 0) return st;
    norm_ctx c = {ro_pick(), kind, d, ldx, ldy, ld_mul, x, g, b, mul, eps, y};
    ro_for(M, 8.0 * d, norm_rows, &c);
    return SR_OK;
}

/* ---- act ------------------------------------------------------------------------------------ */

typedef struct {
    const ro_vec *V;
    sr_act act;
    const float *x;
    float *y;
} act_ctx;

static void act_range(void *p, int64_t lo, int64_t hi)
{
    const act_ctx *c = p;
    const float *x = c->x + lo;
    float *y = c->y + lo;
    size_t n = (size_t)(hi - lo);
    if (c->act == SR_ACT_RELU) {
        c->V->relu(n, x, y);
        return;
    }
    if (x != y) memcpy(y, x, n * sizeof(float));
    if (c->act == SR_ACT_GELU) sr_gelu_erf(y, n);
    else if (c->act == SR_ACT_SILU) sr_silu(y, n);
}

sr_status sr_cpu_act(sr_act act, size_t n, const float *x, float *y)
{
    sr_status st = sr_kernels_check_act(act, n, x, y);
    if (st || n == 0) return st;
    if (act == SR_ACT_NONE && x == y) return SR_OK;
    act_ctx c = {ro_pick(), act, x, y};
    double unit = act == SR_ACT_GELU || act == SR_ACT_SILU ? 4.0 : 1.0;
    ro_for((int64_t)n, unit, act_range, &c);
    return SR_OK;
}

/* ---- glu ------------------------------------------------------------------------------------ */

typedef struct {
    const ro_vec *V;
    sr_glu kind;
    int d, lda, ldb, ldy;
    const float *a, *b;
    float *y;
} glu_ctx;

/* Columns per block of the SiLU form: silu(a) goes through a stack buffer, so y may alias a or
 * b; sr_silu's result for an element does not depend on where a block starts. */
#define GLU_BLOCK 256

static void glu_rows(void *p, int64_t lo, int64_t hi)
{
    const glu_ctx *c = p;
    for (int64_t r = lo; r < hi; r++) {
        const float *a = c->a + (size_t)r * c->lda, *b = c->b + (size_t)r * c->ldb;
        float *y = c->y + (size_t)r * c->ldy;
        if (c->kind == SR_GLU_SIGMOID) {
            for (int i = 0; i < c->d; i++) y[i] = a[i] / (1.0f + expf(-b[i]));
        } else {
            float t[GLU_BLOCK];
            for (int i0 = 0; i0 < c->d; i0 += GLU_BLOCK) {
                int n = SR_MIN(GLU_BLOCK, c->d - i0);
                memcpy(t, a + i0, (size_t)n * sizeof(float));
                sr_silu(t, (size_t)n);
                c->V->mul3(n, t, b + i0, y + i0);
            }
        }
    }
}

sr_status sr_cpu_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                     float *y, int ldy)
{
    sr_status st = sr_kernels_check_glu(kind, M, d, a, lda, b, ldb, y, ldy);
    if (st || M == 0 || d == 0) return st;
    glu_ctx c = {ro_pick(), kind, d, lda, ldb, ldy, a, b, y};
    ro_for(M, 12.0 * d, glu_rows, &c);
    return SR_OK;
}

/* ---- add, scale ----------------------------------------------------------------------------- */

typedef struct {
    const ro_vec *V;
    int d, ldx, ldy;
    const float *x;
    float alpha, s;
    float *y;
} ew_ctx;

static void add_rows(void *p, int64_t lo, int64_t hi)
{
    const ew_ctx *c = p;
    for (int64_t r = lo; r < hi; r++)
        c->V->add(c->d, c->x + (size_t)r * c->ldx, c->alpha, c->y + (size_t)r * c->ldy);
}

static void scale_rows(void *p, int64_t lo, int64_t hi)
{
    const ew_ctx *c = p;
    for (int64_t r = lo; r < hi; r++) c->V->scale(c->d, c->s, c->y + (size_t)r * c->ldy);
}

sr_status sr_cpu_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy)
{
    sr_status st = sr_kernels_check_add(M, d, x, ldx, y, ldy);
    if (st || M == 0 || d == 0) return st;
    ew_ctx c = {ro_pick(), d, ldx, ldy, x, alpha, 0.0f, y};
    ro_for(M, 2.0 * d, add_rows, &c);
    return SR_OK;
}

sr_status sr_cpu_scale(int M, int d, float s, float *y, int ldy)
{
    sr_status st = sr_kernels_check_scale(M, d, y, ldy);
    if (st || M == 0 || d == 0) return st;
    ew_ctx c = {ro_pick(), d, 0, ldy, NULL, 0.0f, s, y};
    ro_for(M, 1.0 * d, scale_rows, &c);
    return SR_OK;
}

/* ---- rope ----------------------------------------------------------------------------------- */

/* Pairs (i, i + hd/2) whose angles are evaluated per block (stack arrays). */
#define ROPE_BLOCK 64

typedef struct {
    const ro_vec *V;
    const sr_kbatch *b;
    int n_head, hd, ldx;
    const float *inv;
    float *x;
} rope_ctx;

static void rope_rows(void *p, int64_t lo, int64_t hi)
{
    const rope_ctx *c = p;
    int half = c->hd / 2, s = seq_of(c->b, (int)lo);
    float cs[ROPE_BLOCK], sn[ROPE_BLOCK];
    for (int r = (int)lo; r < (int)hi; r++) {
        while (c->b->row0[s + 1] <= r) s++;
        float pos = (float)(c->b->pos[s] + (r - c->b->row0[s]));
        float *xr = c->x + (size_t)r * c->ldx;
        for (int i0 = 0; i0 < half; i0 += ROPE_BLOCK) {
            int n = SR_MIN(ROPE_BLOCK, half - i0);
            for (int i = 0; i < n; i++) {
                float a = pos * c->inv[i0 + i];
                cs[i] = cosf(a);
                sn[i] = sinf(a);
            }
            for (int h = 0; h < c->n_head; h++) {
                float *v = xr + (size_t)h * c->hd;
                c->V->rot(n, cs, sn, v + i0, v + half + i0);
            }
        }
    }
}

sr_status sr_cpu_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x,
                      int ldx)
{
    int rows;
    sr_status st = sr_kernels_check_rope(b, n_head, hd, inv_freq, x, ldx, &rows);
    if (st || rows == 0 || n_head == 0 || hd == 0) return st;
    rope_ctx c = {ro_pick(), b, n_head, hd, ldx, inv_freq, x};
    ro_for(rows, 40.0 * hd / 2 + 3.0 * n_head * hd, rope_rows, &c);
    return SR_OK;
}

/* ---- conv2d_s2 ------------------------------------------------------------------------------ */

typedef struct {
    const ro_vec *V;
    int C, T, F, To, Fo, relu;
    const float *in, *w, *b;
    size_t img_stride, in_stride;
    float *out;
} conv2d_ctx;

/* output planes lo .. hi of the n C planes (plane p: image p / C, channel p % C) */
static void conv2d_planes(void *p, int64_t lo, int64_t hi)
{
    const conv2d_ctx *c = p;
    for (int64_t op = lo; op < hi; op++) {
        int64_t ch = op % c->C, img = op / c->C;
        const float *in = c->in + (size_t)img * c->img_stride + (size_t)ch * c->in_stride;
        const float *w9 = c->w + (size_t)ch * 9;
        float b = c->b[ch];
        float *out = c->out + (size_t)op * c->To * c->Fo;
        for (int t = 0; t < c->To; t++) {
            const float *rw[3];
            for (int i = 0; i < 3; i++) {
                int ti = 2 * t + i - 2;
                rw[i] = ti >= 0 && ti < c->T ? in + (size_t)ti * c->F : NULL;
            }
            float *orow = out + (size_t)t * c->Fo;
            /* columns 1 .. f1 - 1 by the vector kernel; column 0 and the rest here */
            int f1 = c->V->conv3_row(rw, c->F, w9, b, c->relu, orow);
            for (int f = 0; f < c->Fo; f = f == 0 ? f1 : f + 1) {
                float v = b + conv3_1(rw, c->F, w9, f);
                orow[f] = c->relu ? relu1(v) : v;
            }
        }
    }
}

sr_status sr_cpu_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                           size_t in_plane_stride, const float *w, const float *b, int relu,
                           float *out)
{
    sr_status st = sr_kernels_check_conv2d_s2(n, C, T, F, in, in_img_stride, in_plane_stride, w, b, out);
    if (st || n == 0 || C == 0) return st;
    int To = T / 2 + 1, Fo = F / 2 + 1;
    conv2d_ctx c = {ro_pick(), C, T, F, To, Fo, relu != 0, in, w, b, in_img_stride, in_plane_stride, out};
    ro_for((int64_t)n * C, 20.0 * To * Fo, conv2d_planes, &c);
    return SR_OK;
}

/* ---- conv_dw -------------------------------------------------------------------------------- */

/* Channels per part of the depthwise conv (a multiple of every vector width). */
#define DW_GROUP 64

typedef struct {
    const ro_vec *V;
    const sr_kbatch *b;
    int C, K, ldx, ldy, groups, layer;
    const float *x, *w, *bias;
    sr_kpool *state;
    float *y;
} dw_ctx;

/* Write n floats into a pool row of dtype dt (f16 / bf16: round to nearest even). */
static void pool_put(const ro_vec *V, void *dst, sr_dtype dt, const float *src, size_t n)
{
    switch (dt) {
    case SR_F16: V->put_f16(n, src, dst); break;
    case SR_BF16: V->put_bf16(n, src, dst); break;
    default: memcpy(dst, src, n * sizeof(float)); break;
    }
}

static void dw_parts(void *p, int64_t lo, int64_t hi)
{
    const dw_ctx *c = p;
    for (int64_t part = lo; part < hi; part++) {
        int s = (int)(part / c->groups), c0 = (int)(part % c->groups) * DW_GROUP;
        int c1 = SR_MIN(c->C, c0 + DW_GROUP), r0 = c->b->row0[s], n = c->b->row0[s + 1] - r0;
        const sr_kpool *P = c->state;
        size_t es = P ? sr_dtype_size(P->dtype) : 0;
        char *st = P ? (char *)P->data + sr_kpool_at(P, c->layer, c->b->slot[s], 0) * es : NULL;
        ro_dw a = {n, c->K, c->ldx, c->ldy, P ? (size_t)P->width : 0, P ? P->dtype : SR_F32,
                   c->x + (size_t)r0 * c->ldx, c->w, c->bias, st, c->y + (size_t)r0 * c->ldy};
        if (n == 0) continue;
        c->V->dw(&a, c0, c1);
        if (!st || c->K == 1) continue;
        /* the state becomes the last K - 1 rows of [state ; x], channels c0 .. c1 */
        int Ks = c->K - 1, keep = n >= Ks ? 0 : Ks - n;
        size_t row = (size_t)P->width * es, off = (size_t)c0 * es;
        for (int r = 0; r < keep; r++)
            memcpy(st + (size_t)r * row + off, st + (size_t)(r + n) * row + off,
                   (size_t)(c1 - c0) * es);
        for (int r = keep; r < Ks; r++)
            pool_put(c->V, st + (size_t)r * row + off, P->dtype,
                     a.x + (size_t)(n - Ks + r) * c->ldx + c0, (size_t)(c1 - c0));
    }
}

sr_status sr_cpu_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                         const float *w, const float *bias, sr_kpool *state, int layer, float *y,
                         int ldy)
{
    int rows;
    sr_status st = sr_kernels_check_conv_dw(b, C, K, x, ldx, w, bias, state, layer, y, ldy, &rows);
    if (st || rows == 0 || C == 0) return st;
    int groups = (C + DW_GROUP - 1) / DW_GROUP;
    dw_ctx c = {ro_pick(), b, C, K, ldx, ldy, groups, layer, x, w, bias, state, y};
    ro_for((int64_t)b->n_seq * groups, 2.0 * K * DW_GROUP * ((double)rows / b->n_seq + 1),
           dw_parts, &c);
    return SR_OK;
}

/* ---- batchnorm ------------------------------------------------------------------------------ */

/* Channels whose sqrtf(var + eps) are held at once (a stack array). */
#define BN_BLOCK 256

typedef struct {
    const ro_vec *V;
    int C, ldx, ldy;
    const float *x, *mean, *var, *g, *bias;
    float eps;
    float *y;
} bn_ctx;

static void bn_rows(void *p, int64_t lo, int64_t hi)
{
    const bn_ctx *c = p;
    float sd[BN_BLOCK];
    for (int c0 = 0; c0 < c->C; c0 += BN_BLOCK) {
        int n = SR_MIN(BN_BLOCK, c->C - c0);
        for (int i = 0; i < n; i++) sd[i] = sqrtf(c->var[c0 + i] + c->eps);
        for (int64_t r = lo; r < hi; r++)
            c->V->bn(n, c->x + (size_t)r * c->ldx + c0, c->mean + c0, sd, c->g + c0,
                     c->bias + c0, c->y + (size_t)r * c->ldy + c0);
    }
}

sr_status sr_cpu_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                           const float *var, const float *g, const float *bias, float eps,
                           float *y, int ldy)
{
    sr_status st = sr_kernels_check_batchnorm(M, C, x, ldx, mean, var, g, bias, y, ldy);
    if (st || M == 0 || C == 0) return st;
    bn_ctx c = {ro_pick(), C, ldx, ldy, x, mean, var, g, bias, eps, y};
    ro_for(M, 4.0 * C, bn_rows, &c);
    return SR_OK;
}

/* ---- lstm_cell ------------------------------------------------------------------------------ */

typedef struct {
    int H, ldg, ldc, ldh;
    const float *gates;
    float *c, *h;
} lstm_ctx;

static void lstm_rows(void *p, int64_t lo, int64_t hi)
{
    const lstm_ctx *L = p;
    int H = L->H;
    for (int64_t r = lo; r < hi; r++) {
        const float *g = L->gates + (size_t)r * L->ldg;
        float *c = L->c + (size_t)r * L->ldc, *h = L->h + (size_t)r * L->ldh;
        for (int i = 0; i < H; i++) {
            float gi = 1.0f / (1.0f + expf(-g[i]));
            float gf = 1.0f / (1.0f + expf(-g[H + i]));
            float gg = tanhf(g[2 * H + i]);
            float go = 1.0f / (1.0f + expf(-g[3 * H + i]));
            float cn = gf * c[i] + gi * gg;
            c[i] = cn;
            h[i] = go * tanhf(cn);
        }
    }
}

sr_status sr_cpu_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc, float *h,
                           int ldh)
{
    sr_status st = sr_kernels_check_lstm_cell(M, H, gates, ldg, c, ldc, h, ldh);
    if (st || M == 0 || H == 0) return st;
    lstm_ctx L = {H, ldg, ldc, ldh, gates, c, h};
    ro_for(M, 60.0 * H, lstm_rows, &L);
    return SR_OK;
}

/* ---- softmax, logsoftmax -------------------------------------------------------------------- */

typedef struct {
    const ro_vec *V;
    int N, ldx, ldy;
    const float *x;
    float *y;
} sm_ctx;

static void softmax_rows(void *p, int64_t lo, int64_t hi)
{
    const sm_ctx *c = p;
    for (int64_t r = lo; r < hi; r++) sr_softmax(c->y + (size_t)r * c->ldy, c->N, c->N);
}

sr_status sr_cpu_softmax(int M, int N, float *x, int ldx)
{
    sr_status st = sr_kernels_check_softmax(M, N, x, ldx);
    if (st || M == 0 || N == 0) return st;
    sm_ctx c = {NULL, N, ldx, ldx, x, x};
    ro_for(M, 6.0 * N, softmax_rows, &c);
    return SR_OK;
}

static void logsoftmax_rows(void *p, int64_t lo, int64_t hi)
{
    const sm_ctx *c = p;
    for (int64_t r = lo; r < hi; r++)
        c->V->logsoftmax(c->N, c->x + (size_t)r * c->ldx, c->y + (size_t)r * c->ldy, NULL);
}

sr_status sr_cpu_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy)
{
    sr_status st = sr_kernels_check_logsoftmax(M, N, x, ldx, y, ldy);
    if (st || M == 0 || N == 0) return st;
    sm_ctx c = {ro_pick(), N, ldx, ldy, x, y};
    ro_for(M, 8.0 * N, logsoftmax_rows, &c);
    return SR_OK;
}

/* ---- topk ----------------------------------------------------------------------------------- */

/* Whether column a ranks below column b: NaN below every number, then smaller value, then (equal
 * values, or both NaN) the higher column. */
static inline int ranks_below(const float *x, int32_t a, int32_t b)
{
    float va = x[a], vb = x[b];
    int na = va != va, nb = vb != vb;
    if (na != nb) return na;
    if (!na && va != vb) return va < vb;
    return a > b;
}

/* Restore the heap (lowest-ranked column at the root) below position i of h[0, n). */
static void heap_down(const float *x, int32_t *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < n && ranks_below(x, h[l], h[m])) m = l;
        if (l + 1 < n && ranks_below(x, h[l + 1], h[m])) m = l + 1;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

typedef struct {
    int N, k, ldx;
    const float *x;
    int32_t *idx;
    float *val;
} topk_ctx;

static void topk_rows(void *p, int64_t lo, int64_t hi)
{
    const topk_ctx *c = p;
    int N = c->N, k = c->k;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = c->x + (size_t)r * c->ldx;
        int32_t *h = c->idx + (size_t)r * k;
        if (k == 1) {
            int32_t best = 0;
            float bv = x[0];
            for (int j = 1; j < N; j++)
                if (x[j] > bv || (bv != bv && x[j] == x[j])) best = j, bv = x[j];
            h[0] = best;
        } else {
            /* the k best so far in a heap rooted at the worst of them; a later column equal
             * to the root ranks below it, so ties keep the lower column */
            for (int j = 0; j < k; j++) h[j] = j;
            for (int i = k / 2 - 1; i >= 0; i--) heap_down(x, h, k, i);
            for (int j = k; j < N; j++) {
                /* most columns lose to the heap's worst on one comparison of two numbers */
                float vr = x[h[0]], vj = x[j];
                if (vj < vr && vj == vj) continue;
                if (ranks_below(x, h[0], j)) {
                    h[0] = j;
                    heap_down(x, h, k, 0);
                }
            }
            for (int n = k - 1; n > 0; n--) { /* the worst goes last: descending order */
                int32_t t = h[0];
                h[0] = h[n];
                h[n] = t;
                heap_down(x, h, n, 0);
            }
        }
        if (c->val)
            for (int i = 0; i < k; i++) c->val[(size_t)r * k + i] = x[h[i]];
    }
}

sr_status sr_cpu_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val)
{
    sr_status st = sr_kernels_check_topk(M, N, k, x, ldx, idx);
    if (st || M == 0) return st;
    topk_ctx c = {N, k, ldx, x, idx, val};
    ro_for(M, 2.0 * N + 20.0 * k, topk_rows, &c);
    return SR_OK;
}

/* ---- kv_write ------------------------------------------------------------------------------- */

typedef struct {
    const ro_vec *V;
    sr_kpool *p;
    int layer, ldx;
    const sr_kbatch *b;
    const float *x;
} kv_ctx;

static void kv_rows(void *ctx, int64_t lo, int64_t hi)
{
    const kv_ctx *c = ctx;
    const sr_kpool *P = c->p;
    size_t es = sr_dtype_size(P->dtype);
    int s = seq_of(c->b, (int)lo);
    for (int r = (int)lo; r < (int)hi; r++) {
        while (c->b->row0[s + 1] <= r) s++;
        int i = r - c->b->row0[s], n = c->b->row0[s + 1] - c->b->row0[s];
        if (n - i > P->rows) continue; /* overwritten by a later row of this call */
        int ring = (int)((c->b->pos[s] + i) % P->rows);
        char *dst = (char *)P->data + sr_kpool_at(P, c->layer, c->b->slot[s], ring) * es;
        pool_put(c->V, dst, P->dtype, c->x + (size_t)r * c->ldx, (size_t)P->width);
    }
}

sr_status sr_cpu_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx)
{
    int rows;
    sr_status st = sr_kernels_check_kv_write(p, layer, b, x, ldx, &rows);
    if (st || rows == 0) return st;
    kv_ctx c = {ro_pick(), p, layer, ldx, b, x};
    ro_for(rows, (p->dtype == SR_F32 ? 1.0 : 3.0) * p->width, kv_rows, &c);
    return SR_OK;
}

/* rope on q in place, on a copy of k's rows, then kv_write2 of the copy and v: the three ops'
 * bits (the copy is what leaves k as it was). */
sr_status sr_cpu_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd, const float *inv_freq,
                         float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                         sr_kpool *K, sr_kpool *V, int layer)
{
    int rows;
    sr_status st = sr_kernels_check_rope_kv(b, n_head, n_kv_head, hd, inv_freq, q, ldq, k, ldk, v,
                                            ldv, K, V, layer, &rows);
    if (st || rows == 0) return st;
    const int kw = K->width; /* n_kv_head * hd, checked: at least 1 */
    float *t = malloc((size_t)rows * (size_t)kw * sizeof(float));
    if (!t) return sr_error(SR_ERR_NOMEM, "rope_kv: %d x %d rotated key rows", rows, kw);
    for (int r = 0; r < rows; r++) memcpy(t + (size_t)r * kw, k + (size_t)r * ldk, (size_t)kw * sizeof(float));
    if (!(st = sr_cpu_rope(b, n_head, hd, inv_freq, q, ldq)) &&
        !(st = sr_cpu_rope(b, n_kv_head, hd, inv_freq, t, kw)))
        st = sr_cpu_kv_write2(K, V, layer, b, t, kw, v, ldv);
    free(t);
    return st;
}

sr_status sr_cpu_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                           const float *x, int ldx, const float *x2, int ldx2)
{
    int rows;
    sr_status st = sr_kernels_check_kv_write2(p, p2, layer, b, x, ldx, x2, ldx2, &rows);
    if (st || rows == 0) return st;
    if ((st = sr_cpu_kv_write(p, layer, b, x, ldx))) return st;
    return sr_cpu_kv_write(p2, layer, b, x2, ldx2);
}
