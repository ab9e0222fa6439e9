/*
 * ops.c — CPU implementations of kernels/ops.h (normalizations, softmax and activations shared
 * by the Whisper, FastConformer and Voxtral backends).
 *
 * Two paths. The portable one is plain C over libm (expf, erff). On x86-64 CPUs with AVX2 and
 * FMA (checked at run time, so one binary runs everywhere) softmax, GELU and SiLU take eight
 * lanes at a time with their own exp and erf: libm's scalar calls were the largest single-thread
 * cost of the Whisper encoder (one exp per attention score: 54 M per 30 s window at tiny).
 *
 *   exp(x)   x = n ln2 + r, |r| <= ln2 / 2 (ln2 split in two parts so r is exact), e^r by the
 *            degree-7 Cephes expf polynomial, times 2^n built in the exponent bits. Relative
 *            error <= 2 ulp; x < -87.33 (below FLT_MIN) gives 0, x > 88 is clamped to 88 (the
 *            callers only exponentiate non-positive softmax inputs and sigmoid arguments, where
 *            both limits are invisible), NaN stays NaN.
 *   erf(z)   Abramowitz & Stegun 7.1.26 for z >= 0, odd extension: 1 - t (a1 + t (a2 + ...)) e^-z^2
 *            with t = 1 / (1 + p z); absolute error <= 1.5e-7 (1.3 float ulps of 1), the size of
 *            float rounding in 0.5 x (1 + erf), so GELU is as accurate as the libm form.
 *
 * Sums stay in double on both paths (as torch effectively keeps more than a naive float loop).
 * The test kernels_ops checks both paths against double-precision formulas.
 */
#include "../exp_poly.h"
#include "../ops.h"

#include <math.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPS_X86 1
#include <immintrin.h>
#endif

static int force_portable;

void sr_ops_force_portable(int on) { force_portable = on; }

/* Whether the AVX2 + FMA path runs (never on other architectures). */
int sr_ops_simd(void)
{
#ifdef OPS_X86
    return !force_portable && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

#ifdef OPS_X86
#define AVX2 __attribute__((target("avx2,fma")))

/* Lanes [0, n) of a mask for maskload / maskstore (n in 0..8). */
AVX2 static inline __m256i tail_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Sum of the eight lanes of v into two double accumulators' worth of precision. */
AVX2 static inline __m256d add_pd8(__m256d acc, __m256 v)
{
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

AVX2 static void softmax_avx2(float *row, int lim, int n)
{
    int j8 = lim & ~7, tail = lim - j8;
    __m256i tm = tail_mask(tail);
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    for (int j = 0; j < j8; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(row + j));
    float lanes[8];
    _mm256_storeu_ps(lanes, vmx);
    float mx = lanes[0];
    for (int i = 1; i < 8; i++) mx = lanes[i] > mx ? lanes[i] : mx;
    for (int j = j8; j < lim; j++) mx = row[j] > mx ? row[j] : mx;
    __m256 m = _mm256_set1_ps(mx);
    __m256d acc = _mm256_setzero_pd();
    for (int j = 0; j < j8; j += 8) {
        __m256 e = sr_exp_poly8(_mm256_sub_ps(_mm256_loadu_ps(row + j), m));
        _mm256_storeu_ps(row + j, e);
        acc = add_pd8(acc, e);
    }
    if (tail) {
        /* masked-off lanes load 0 and must not count: exp(0 - mx) is cleared by the mask */
        __m256 e = sr_exp_poly8(_mm256_sub_ps(_mm256_maskload_ps(row + j8, tm), m));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(tm));
        _mm256_maskstore_ps(row + j8, tm, e);
        acc = add_pd8(acc, e);
    }
    double s[4];
    _mm256_storeu_pd(s, acc);
    __m256 inv = _mm256_set1_ps((float)(1.0 / ((s[0] + s[1]) + (s[2] + s[3]))));
    for (int j = 0; j < j8; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
    if (tail) _mm256_maskstore_ps(row + j8, tm, _mm256_mul_ps(_mm256_maskload_ps(row + j8, tm), inv));
    for (int j = lim; j < n; j++) row[j] = 0.0f;
}

AVX2 static inline __m256 gelu8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x),
                             _mm256_set1_ps(0.70710678118654752440f));
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), z, one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    __m256 erf = _mm256_fnmadd_ps(p, sr_exp_poly8(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), z), z)), one);
    erf = _mm256_or_ps(erf, sign);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(one, erf));
}

AVX2 static inline __m256 silu8(__m256 x)
{
    __m256 e = sr_exp_poly8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#define MAP_AVX2(name, f8)                                                                    \
    AVX2 static void name(float *x, size_t n)                                                 \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f8(_mm256_loadu_ps(x + i)));       \
        if (i < n) {                                                                          \
            __m256i tm = tail_mask((int)(n - i));                                             \
            _mm256_maskstore_ps(x + i, tm, f8(_mm256_maskload_ps(x + i, tm)));                \
        }                                                                                     \
    }
MAP_AVX2(gelu_avx2, gelu8)
MAP_AVX2(silu_avx2, silu8)
#endif /* OPS_X86 */

void sr_layernorm(const float *x, int n, int d, const float *g, const float *b, float eps, float *y)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += xr[i];
        mean /= d;
        for (int i = 0; i < d; i++) {
            double t = xr[i] - mean;
            var += t * t;
        }
        var /= d;
        float inv = (float)(1.0 / sqrt(var + (double)eps));
        float mu = (float)mean;
        for (int i = 0; i < d; i++) yr[i] = (xr[i] - mu) * inv * g[i] + b[i];
    }
}

void sr_rmsnorm(const float *x, int n, int d, const float *g, float eps, float *y)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        float inv = 1.0f / sqrtf((float)(ss / d) + eps);
        for (int i = 0; i < d; i++) yr[i] = g[i] * (xr[i] * inv);
    }
}

void sr_softmax(float *row, int lim, int n)
{
    if (lim > n) lim = n;
    if (lim <= 0) {
        for (int j = 0; j < n; j++) row[j] = 0.0f;
        return;
    }
#ifdef OPS_X86
    if (sr_ops_simd()) {
        softmax_avx2(row, lim, n);
        return;
    }
#endif
    float mx = -INFINITY;
    for (int j = 0; j < lim; j++) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int j = 0; j < lim; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < lim; j++) row[j] *= inv;
    for (int j = lim; j < n; j++) row[j] = 0.0f;
}

void sr_gelu_erf(float *x, size_t n)
{
#ifdef OPS_X86
    if (sr_ops_simd()) {
        gelu_avx2(x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752440f));
}

void sr_silu(float *x, size_t n)
{
#ifdef OPS_X86
    if (sr_ops_simd()) {
        silu_avx2(x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}
