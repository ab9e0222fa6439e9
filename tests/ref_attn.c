/*
 * ref_attn.c — double-precision reference of attention over cache pools (ref_attn.h): the
 * contract's formulas written out per row and head, every sum in double, the softmax with
 * exp() of double; against it the only error is double rounding (~1e-16 relative), invisible
 * next to the f32 bound it also returns.
 */
#include "ref_attn.h"

#include <math.h>
#include <stdlib.h>

#include "../core/dtype.h"

double ref_pool_at(const sr_kpool *p, int layer, int slot, int row, int col)
{
    size_t i = sr_kpool_at(p, layer, slot, row) + (size_t)col;
    switch (p->dtype) {
    case SR_F16: return sr_f16_to_f32(((const uint16_t *)p->data)[i]);
    case SR_BF16: return sr_bf16_to_f32(((const uint16_t *)p->data)[i]);
    default: return ((const float *)p->data)[i];
    }
}

void ref_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq, const sr_kpool *K,
              const sr_kpool *V, int layer, double *out, double *bound)
{
    const int H = a->n_head, hd = a->head_dim, grp = H / a->n_kv_head, ldr = H * hd;
    const double u = ldexp(1.0, -24), scale = a->scale;
    int maxn = 1;
    for (int r = 0; r < b->row0[b->n_seq]; r++)
        if (a->hi[r] - a->lo[r] > maxn) maxn = (int)(a->hi[r] - a->lo[r]);
    double *s = malloc((size_t)maxn * sizeof(double)), *A = malloc((size_t)maxn * sizeof(double));
    double *p = malloc((size_t)maxn * sizeof(double));
    for (int sq = 0; sq < b->n_seq; sq++) {
        int slot = b->slot[sq];
        for (int r = b->row0[sq]; r < b->row0[sq + 1]; r++) {
            int64_t lo = a->lo[r], hi = a->hi[r];
            int n = (int)(hi - lo);
            int64_t pr = b->pos ? b->pos[sq] + (r - b->row0[sq]) : 0;
            for (int h = 0; h < H; h++) {
                int g = h / grp;
                double *o = out + (size_t)r * ldr + (size_t)h * hd;
                double *bd = bound ? bound + (size_t)r * ldr + (size_t)h * hd : NULL;
                const float *qh = q + (size_t)r * ldq + (size_t)h * hd;
                if (n <= 0) {
                    for (int d = 0; d < hd; d++) {
                        o[d] = 0;
                        if (bd) bd[d] = 0;
                    }
                    continue;
                }
                double m = -INFINITY;
                for (int t = 0; t < n; t++) {
                    int64_t j = lo + t;
                    int kr = (int)(j % K->rows);
                    double dot = 0, mag = 0;
                    for (int d = 0; d < hd; d++) {
                        double qq = (double)qh[d] + (a->rel ? (double)a->pos_u[h * hd + d] : 0.0);
                        double kk = ref_pool_at(K, layer, slot, kr, g * hd + d);
                        dot += qq * kk;
                        mag += fabs(qq * kk);
                    }
                    if (a->rel) {
                        const float *P = a->rel + (size_t)(a->rel_max - (pr - j)) * ldr + (size_t)h * hd;
                        for (int d = 0; d < hd; d++) {
                            double qq = (double)qh[d] + (double)a->pos_v[h * hd + d];
                            dot += qq * P[d];
                            mag += fabs(qq * P[d]);
                        }
                    }
                    s[t] = scale * dot;
                    A[t] = mag;
                    if (s[t] > m) m = s[t];
                }
                double sum = 0, dmax = 0;
                for (int t = 0; t < n; t++) {
                    p[t] = exp(s[t] - m);
                    sum += p[t];
                    double dl = 1.01 * u * ((hd + 1) * fabs(scale) * A[t] + 2 * fabs(s[t]));
                    A[t] = dl; /* reuse: delta_j */
                    if (dl > dmax) dmax = dl;
                }
                double theta = 0;
                for (int t = 0; t < n; t++) {
                    p[t] /= sum;
                    double th = A[t] + u * (fabs(s[t] - m) + 2 * dmax) + 4.1 * u;
                    if (th > theta) theta = th;
                }
                double grow = exp(2 * theta);
                double rel_f = (grow - 1) + 1.01 * (n + 3) * u * grow;
                for (int d = 0; d < hd; d++) {
                    double acc = 0, mag = 0, vmax = 0;
                    for (int t = 0; t < n; t++) {
                        int vr = (int)((lo + t) % V->rows);
                        double vv = ref_pool_at(V, layer, slot, vr, g * hd + d);
                        acc += p[t] * vv;
                        mag += p[t] * fabs(vv);
                        if (fabs(vv) > vmax) vmax = fabs(vv);
                    }
                    o[d] = acc;
                    if (bd) bd[d] = rel_f * mag + n * 1e-37 * vmax;
                }
            }
        }
    }
    free(s);
    free(A);
    free(p);
}
