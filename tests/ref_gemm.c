/*
 * ref_gemm.c — double-precision references of weight widening, gemm and gather (ref_gemm.h):
 * the contract's formulas written out directly, every sum in double in k order, so that the
 * only error against the exact value is double rounding (about 1e-16 relative, invisible next
 * to the f32 tolerances the tests apply).
 */
#include "ref_gemm.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "../core/dtype.h"

void ref_weight_widen(const void *host, sr_dtype dt, int n, int k, const float *scale, double *w)
{
    size_t total = (size_t)n * (size_t)k;
    for (size_t i = 0; i < total; i++) {
        size_t r = i / (size_t)k;
        switch (dt) {
        case SR_F32: w[i] = ((const float *)host)[i]; break;
        case SR_BF16: w[i] = sr_bf16_to_f32(((const uint16_t *)host)[i]); break;
        case SR_F16: w[i] = sr_f16_to_f32(((const uint16_t *)host)[i]); break;
        case SR_I8: w[i] = (double)((const int8_t *)host)[i] * (double)scale[r]; break;
        default: w[i] = NAN; break;
        }
    }
}

double ref_act(sr_act act, double t)
{
    switch (act) {
    case SR_ACT_GELU: return 0.5 * t * (1.0 + erf(t / sqrt(2.0)));
    case SR_ACT_SILU: return t / (1.0 + exp(-t));
    case SR_ACT_RELU: return t > 0 ? t : 0.0;
    default: return t;
    }
}

void ref_gemm(int M, int N, int K, const float *x, int ldx, const double *w, const float *bias,
              sr_act act, double alpha, double beta, const float *y0, int ldy, double *y,
              double *pre, double *mag, double *actv)
{
    for (int m = 0; m < M; m++) {
        const float *xr = x + (size_t)m * (size_t)ldx;
        for (int n = 0; n < N; n++) {
            const double *wr = w + (size_t)n * (size_t)K;
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)xr[k] * wr[k];
                s += p;
                a += fabs(p);
            }
            if (bias) {
                s += bias[n];
                a += fabs((double)bias[n]);
            }
            double t = ref_act(act, s);
            size_t o = (size_t)m * (size_t)N + (size_t)n;
            double yv = alpha * t;
            if (beta != 0) yv += beta * (double)y0[(size_t)m * (size_t)ldy + (size_t)n];
            y[o] = yv;
            if (pre) pre[o] = s;
            if (mag) mag[o] = a;
            if (actv) actv[o] = t;
        }
    }
}

void ref_gather(const double *w, int k, const int32_t *ids, int cnt, double *y)
{
    for (int i = 0; i < cnt; i++)
        memcpy(y + (size_t)i * (size_t)k, w + (size_t)ids[i] * (size_t)k, (size_t)k * sizeof(double));
}

void ref_daz(double *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(w[i]) < FLT_MIN) w[i] = 0.0;
}

void ref_x_bf16(int M, int K, float *x, int ldx)
{
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            float *v = x + (size_t)m * (size_t)ldx + (size_t)k;
            if (isnan(*v)) continue;
            double a = fabs((double)*v) < FLT_MIN ? 0.0 : (double)*v;
            /* nearest bf16 (8 significant bits), ties to even, by scaling to an integer */
            if (a != 0.0 && isfinite(a)) {
                int e;
                frexp(a, &e);                     /* |a| in [2^(e-1), 2^e) */
                double q = ldexp(1.0, e - 8);     /* the bf16 spacing there */
                a = nearbyint(a / q) * q;         /* FE_TONEAREST: ties to even */
            }
            *v = (float)a;
        }
}
