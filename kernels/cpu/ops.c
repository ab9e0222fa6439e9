/*
 * ops.c — CPU implementations of kernels/ops.h (normalizations and activations shared by the
 * Whisper, FastConformer and Voxtral backends).
 */
#include "../ops.h"

#include <math.h>

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

void sr_gelu_erf(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752440f));
}

void sr_silu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}
