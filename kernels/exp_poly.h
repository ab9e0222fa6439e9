/*
 * exp_poly.h — the softmax exp of the op set (Cephes' expf: x = n ln2 + r with ln2 in two parts
 * so r is exact, e^r by a degree-7 polynomial, times 2^n built in the exponent bits; x < -87.34
 * gives 0, x > 88 is clamped to 88, NaN stays NaN): its constants, used by the vector versions
 * (sr_exp_poly8 below; attn.c's 16-lane one), and its scalar form sr_exp_poly, one correctly
 * rounded operation per step, compiled for the host (C) and for the device (nvcc), so the CPU
 * and CUDA attention compute the same bits from one definition.
 */
#ifndef SR_EXP_POLY_H
#define SR_EXP_POLY_H

#define SR_EXP_LO (-87.3365447505531f) /* below: 0 */
#define SR_EXP_HI 88.0f                /* above: clamped */
#define SR_EXP_LOG2E 1.44269504088896341f
#define SR_EXP_C1 0.693359375f         /* ln2, high part */
#define SR_EXP_C2 (-2.12194440e-4f)    /* ln2, low part */
#define SR_EXP_P0 1.9875691500e-4f
#define SR_EXP_P1 1.3981999507e-3f
#define SR_EXP_P2 8.3334519073e-3f
#define SR_EXP_P3 4.1665795894e-2f
#define SR_EXP_P4 1.6666665459e-1f
#define SR_EXP_P5 5.0000001201e-1f

#ifdef __CUDACC__
#define SR_EXP_FN static __device__ __forceinline__
#define SR_EXP_MUL(a, b) __fmul_rn(a, b) /* never contracted into an FMA */
#define SR_EXP_ADD(a, b) __fadd_rn(a, b)
#define SR_EXP_POW2(n) __int_as_float(((int)(n) + 127) << 23)
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* GCC in ISO C mode never contracts; clang must be told */
#endif
static inline float sr_exp_pow2_(float n)
{
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float e;
    memcpy(&e, &bits, sizeof e);
    return e;
}
#define SR_EXP_FN static inline
#define SR_EXP_MUL(a, b) ((a) * (b))
#define SR_EXP_ADD(a, b) ((a) + (b))
#define SR_EXP_POW2(n) sr_exp_pow2_(n)
#endif

SR_EXP_FN float sr_exp_poly(float x)
{
    if (isnan(x)) return x;
    if (x < SR_EXP_LO) return 0.0f;
    float c = x < SR_EXP_HI ? x : SR_EXP_HI;
    float t = SR_EXP_MUL(c, SR_EXP_LOG2E);
    float n = rintf(t);
    float r = fmaf(-n, SR_EXP_C1, c);
    r = fmaf(-n, SR_EXP_C2, r);
    float p = SR_EXP_P0;
    p = fmaf(p, r, SR_EXP_P1);
    p = fmaf(p, r, SR_EXP_P2);
    p = fmaf(p, r, SR_EXP_P3);
    p = fmaf(p, r, SR_EXP_P4);
    p = fmaf(p, r, SR_EXP_P5);
    float r2 = SR_EXP_MUL(r, r), r1 = SR_EXP_ADD(r, 1.0f);
    float y = fmaf(p, r2, r1);
    return SR_EXP_MUL(y, SR_EXP_POW2(n));
}

#if !defined(__CUDACC__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* The same exp on 8 lanes (AVX2 + FMA), lane for lane the same sequence: the softmax of the
 * row ops (kernels/cpu/ops.c) and the CPU attention (kernels/cpu/attn.c). */
__attribute__((target("avx2,fma"))) static inline __m256 sr_exp_poly8(__m256 x)
{
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(SR_EXP_LO), _CMP_LT_OQ);
    __m256 c = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(SR_EXP_HI)), _mm256_set1_ps(SR_EXP_LO));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(SR_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SR_EXP_C1), c);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SR_EXP_C2), r);
    __m256 p = _mm256_set1_ps(SR_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SR_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SR_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SR_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SR_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SR_EXP_P5));
    __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    y = _mm256_andnot_ps(under, y);
    return _mm256_blendv_ps(y, x, nan);
}
#endif

#endif /* SR_EXP_POLY_H */
