/*
 * ref_rows.c — double-precision references of the kernel table's row ops (ref_rows.h), for the
 * kernels_ops_rows suite only: straight loops over the definitions in kernels/kernels.h.
 */
#include "ref_rows.h"

#include "../core/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ref_norm_row(sr_norm_kind kind, int d, const float *x, const float *g, const float *b,
                  float eps, const float *mul, double *y, double *mag)
{
    if (kind == SR_NORM_LAYER) {
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += x[i];
        mean /= d;
        for (int i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= d;
        double s = 1.0 / sqrt(var + (double)eps);
        for (int i = 0; i < d; i++) {
            y[i] = (x[i] - mean) * s * g[i] + b[i];
            if (mag) mag[i] = (fabs(x[i] - mean) + fabs(mean)) * s * fabs((double)g[i]) + fabs((double)b[i]);
        }
    } else {
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)x[i] * x[i];
        double s = 1.0 / sqrt(ss / d + (double)eps);
        for (int i = 0; i < d; i++) {
            y[i] = (double)g[i] * x[i] * s;
            if (mag) mag[i] = fabs(y[i]);
        }
    }
    if (mul)
        for (int i = 0; i < d; i++) {
            y[i] *= mul[i];
            if (mag) mag[i] *= fabs((double)mul[i]);
        }
}

double ref_rows_act(sr_act act, double x)
{
    switch (act) {
    case SR_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case SR_ACT_SILU: return x / (1.0 + exp(-x));
    case SR_ACT_RELU: return x > 0 ? x : 0.0;
    default: return x;
    }
}

double ref_glu(sr_glu kind, double a, double b)
{
    if (kind == SR_GLU_SIGMOID) return a / (1.0 + exp(-b));
    return a / (1.0 + exp(-a)) * b;
}

void ref_rope_row(int n_head, int hd, const float *inv, int64_t pos, const float *x, double *y,
                  double *mag)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        double a = (double)((float)pos * inv[i]);
        double c = cos(a), s = sin(a);
        for (int h = 0; h < n_head; h++) {
            const float *v = x + (size_t)h * hd;
            double x1 = v[i], x2 = v[i + half];
            y[(size_t)h * hd + i] = x1 * c - x2 * s;
            y[(size_t)h * hd + i + half] = x2 * c + x1 * s;
            mag[(size_t)h * hd + i] = fabs(x1 * c) + fabs(x2 * s);
            mag[(size_t)h * hd + i + half] = fabs(x2 * c) + fabs(x1 * s);
        }
    }
}

void ref_conv2d_s2(int C, int T, int F, const float *in, size_t in_plane_stride, const float *w,
                   const float *b, int relu, double *out, double *mag)
{
    int To = T / 2 + 1, Fo = F / 2 + 1;
    for (int c = 0; c < C; c++) {
        const float *p = in + (size_t)c * in_plane_stride;
        for (int t = 0; t < To; t++)
            for (int f = 0; f < Fo; f++) {
                double s = b[c], m = fabs((double)b[c]);
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 3; j++) {
                        int ti = 2 * t + i - 2, fj = 2 * f + j - 2;
                        if (ti < 0 || ti >= T || fj < 0 || fj >= F) continue;
                        double v = (double)w[c * 9 + i * 3 + j] * p[(size_t)ti * F + fj];
                        s += v;
                        m += fabs(v);
                    }
                size_t o = ((size_t)c * To + t) * Fo + f;
                out[o] = relu && !(s > 0) ? 0.0 : s;
                mag[o] = m;
            }
    }
}

float ref_rows_round(float v, sr_dtype dt)
{
    if (dt == SR_F16) return sr_f16_to_f32(sr_f32_to_f16(v));
    if (dt == SR_BF16) return sr_bf16_to_f32(sr_f32_to_bf16(v));
    return v;
}

void ref_conv_dw_seq(int n, int C, int K, const float *x, int ldx, const float *w,
                     const float *bias, float *state, sr_dtype dt, double *y, double *mag)
{
    /* in = [state ; x] as floats */
    size_t rows = (size_t)(K - 1 + n);
    float *in = calloc(rows * (size_t)C + 1, sizeof(float));
    if (!in) abort();
    if (state) memcpy(in, state, (size_t)(K - 1) * C * sizeof(float));
    for (int t = 0; t < n; t++)
        memcpy(in + (size_t)(K - 1 + t) * C, x + (size_t)t * ldx, (size_t)C * sizeof(float));
    for (int t = 0; t < n; t++)
        for (int c = 0; c < C; c++) {
            double s = bias[c], m = fabs((double)bias[c]);
            for (int j = 0; j < K; j++) {
                double v = (double)w[(size_t)c * K + j] * in[(size_t)(t + j) * C + c];
                s += v;
                m += fabs(v);
            }
            y[(size_t)t * C + c] = s;
            mag[(size_t)t * C + c] = m;
        }
    if (state)
        for (int r = 0; r < K - 1; r++)
            for (int c = 0; c < C; c++)
                state[(size_t)r * C + c] = ref_rows_round(in[(size_t)(n + r) * C + c], dt);
    free(in);
}

void ref_batchnorm_row(int C, const float *x, const float *mean, const float *var,
                       const float *g, const float *bias, float eps, double *y, double *mag)
{
    for (int c = 0; c < C; c++) {
        double t = ((double)x[c] - mean[c]) / sqrt((double)var[c] + eps) * g[c];
        y[c] = t + bias[c];
        mag[c] = fabs(t) + fabs((double)bias[c]);
    }
}

static double sigm(double z) { return 1.0 / (1.0 + exp(-z)); }

void ref_lstm_row(int H, const float *gates, const float *c0, double *c, double *h, double *magc)
{
    for (int i = 0; i < H; i++) {
        double gi = sigm(gates[i]), gf = sigm(gates[H + i]), gg = tanh(gates[2 * H + i]),
               go = sigm(gates[3 * H + i]);
        c[i] = gf * c0[i] + gi * gg;
        h[i] = go * tanh(c[i]);
        magc[i] = fabs(gf * c0[i]) + fabs(gi * gg);
    }
}

void ref_softmax_row(int N, const float *x, double *y)
{
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; j++) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < N; j++) sum += exp((double)x[j] - mx);
    for (int j = 0; j < N; j++) y[j] = exp((double)x[j] - mx) / sum;
}

double ref_logsoftmax_row(int N, const float *x, double *y)
{
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; j++) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < N; j++) sum += exp((double)x[j] - mx);
    double lse = mx + log(sum);
    for (int j = 0; j < N; j++) y[j] = (double)x[j] - lse;
    return lse;
}

/* Whether column a comes before column b in topk order. */
static int before(const float *x, int a, int b)
{
    int na = isnan(x[a]), nb = isnan(x[b]);
    if (na != nb) return nb;
    if (!na && x[a] != x[b]) return x[a] > x[b];
    return a < b;
}

void ref_topk_row(int N, int k, const float *x, int32_t *idx)
{
    char *taken = calloc((size_t)N + 1, 1);
    if (!taken) abort();
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int j = 0; j < N; j++)
            if (!taken[j] && (best < 0 || before(x, j, best))) best = j;
        taken[best] = 1;
        idx[i] = best;
    }
    free(taken);
}

void ref_kv_write(void *data, sr_dtype dt, int slots, int rows, int width, int layer,
                  const sr_kbatch *b, const float *x, int ldx)
{
    for (int s = 0; s < b->n_seq; s++)
        for (int r = b->row0[s]; r < b->row0[s + 1]; r++) {
            int64_t p = b->pos[s] + (r - b->row0[s]);
            size_t at = (((size_t)layer * slots + (size_t)b->slot[s]) * rows + (size_t)(p % rows)) *
                        (size_t)width;
            const float *src = x + (size_t)r * ldx;
            for (int c = 0; c < width; c++) {
                if (dt == SR_F16) ((uint16_t *)data)[at + c] = sr_f32_to_f16(src[c]);
                else if (dt == SR_BF16) ((uint16_t *)data)[at + c] = sr_f32_to_bf16(src[c]);
                else ((float *)data)[at + c] = src[c];
            }
        }
}
