/*
 * fc_encoder.c — the FastConformer encoder as NeMo's ConformerEncoder computes it at inference:
 *
 *   subsampling  causal dw_striding 8x on mel [T, F] as one channel: Conv2d(1 -> C, 3x3,
 *                stride 2) -> ReLU -> 2 x [depthwise Conv2d(C, 3x3, stride 2) -> pointwise
 *                Conv2d(C -> C, 1x1) -> ReLU]; every 3x3 conv is causal (CausalConv2D: 2 zero
 *                rows/columns before, 1 after, on time AND frequency), so each stage maps
 *                L -> L/2 + 1; then (T', C, F') flattened channel-major and Linear(C F' -> d)
 *   x-scaling    x * sqrt(d) when configured (NeMo does it inside the positional encoding)
 *   layer        r = x + 1/2 FF1(LN x); r += MHSA(LN r); r += Conv(LN r); r += 1/2 FF2(LN r);
 *                out = LN r.   FF = Linear(d -> d_ff), Swish, Linear(d_ff -> d)
 *   MHSA         Transformer-XL relative positions: with keys = [attention cache ; LN input],
 *                scores(i, j) = [(q_i + u) . k_j + (q_i + v) . P(c + i - j)] / sqrt(dk), where
 *                P(p) = linear_pos(sinusoid(p)) and c the cache length (NeMo's rel_shift picks
 *                exactly that position for every pair); masked scores -10000 before the
 *                softmax, masked probabilities 0 after (a fully masked row gives 0).
 *   masks        chunked_limited [L, R]: chunk = R + 1, query q sees key k iff
 *                0 <= q/chunk - k/chunk <= L/chunk; regular: q - L <= k <= q + R; banded local
 *                attention (rel_pos_local_attn): q - W0 <= k <= q + W1; unfilled cache rows are
 *                always masked (valid-length masking: no warm-up period).
 *   Conv         pointwise Conv1d(d -> 2d) -> GLU -> causal depthwise Conv1d(k) over
 *                [conv cache ; input] -> LayerNorm (or BatchNorm with running stats) -> Swish ->
 *                pointwise Conv1d(d -> d)
 *
 * Attention runs one head and one block of FC_LOCAL_BLOCK query rows at a time, over the key
 * range the mask allows for the block: full attention touches O(T) keys per row, banded local
 * attention O(W), so with the [T, d] projections the workspace is O(T d + block (T or W)).
 * Streaming caches may be stored in f16 (fc_cache): read by widening, written by rounding to
 * nearest even; every product and sum stays f32.
 */
#include "fc.h"
#include "../../core/dtype.h"
#include "../../kernels/ops.h"

#include <math.h>
#include <string.h>

int fc_subsample_len(int T)
{
    for (int i = 0; i < 3; i++) T = T / 2 + 1;
    return T;
}

/* Causal 3x3 stride-2 conv of one channel plane in [T][F] -> out [T/2+1][F/2+1] (accumulates
 * w * x; bias added by the caller). */
static void conv3_plane(const float *in, int T, int F, const float *w9, float *out, int To, int Fo)
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

static void relu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

size_t fc_subsample_scratch(const fc_model *w, int T)
{
    int C = w->sub_ch, F0 = w->n_mels;
    int T1 = T / 2 + 1, F1 = F0 / 2 + 1, T2 = T1 / 2 + 1, F2 = F1 / 2 + 1, T3 = T2 / 2 + 1,
        F3 = F2 / 2 + 1;
    return (size_t)C * T1 * F1 + 2 * (size_t)C * T2 * F2 + 2 * (size_t)C * T3 * F3;
}

sr_status fc_subsample(const fc_model *w, const float *mel, int T, float *x, int *n_out)
{
    /* In pieces of FC_SUB_PIECE output rows, as the cache-aware steps cut the mel: the first
     * piece is 1 + 8P frames, each later one the 8P next frames after the 9 before them, whose
     * first 2 output rows (which saw zero padding instead of those frames) are dropped. Pieces
     * start at mel frames 8Pj - 8 (even at every stage) and every stage sees odd lengths
     * except in the last piece, whose end is the true end: the rows are those of one pass over
     * the whole mel, with the scratch of one piece (a 17-minute input at 256 channels would
     * otherwise need 5.6 GB of conv planes). */
    const int P = FC_SUB_PIECE, first = 1 + 8 * P;
    int nin = T <= first ? T : 9 + 8 * P;
    float *a = sr_malloc(fc_subsample_scratch(w, nin) * sizeof(float), "fastconformer subsampling");
    float *rows = T <= first ? NULL : sr_malloc((size_t)(P + 2) * w->d * sizeof(float), "fastconformer subsampling rows");
    if (!a || (T > first && !rows)) {
        free(a);
        return SR_ERR_NOMEM;
    }
    int n = 0, k = 0;
    sr_status st = fc_subsample_into(w, mel, SR_MIN(T, first), x, &n, a);
    for (int pos = first; !st && pos < T;) {
        int nnew = SR_MIN(8 * P, T - pos);
        st = fc_subsample_into(w, mel + (size_t)(pos - 9) * w->n_mels, 9 + nnew, rows, &k, a);
        if (st) break;
        memcpy(x + (size_t)n * w->d, rows + (size_t)2 * w->d, (size_t)(k - 2) * w->d * sizeof(float));
        n += k - 2;
        pos += nnew;
    }
    free(a);
    free(rows);
    *n_out = st ? 0 : n;
    return st;
}

sr_status fc_subsample_into(const fc_model *w, const float *mel, int T, float *x, int *n_out,
                            float *scratch)
{
    int C = w->sub_ch, F0 = w->n_mels;
    int T1 = T / 2 + 1, F1 = F0 / 2 + 1, T2 = T1 / 2 + 1, F2 = F1 / 2 + 1, T3 = T2 / 2 + 1,
        F3 = F2 / 2 + 1;
    size_t n1 = (size_t)C * T1 * F1, n2 = (size_t)C * T2 * F2, n3 = (size_t)C * T3 * F3;
    float *s1 = scratch, *d2 = s1 + n1, *s2 = d2 + n2, *d3 = s2 + n2, *s3 = d3 + n3;
    sr_status st = SR_OK;
    /* stage 1: 1 -> C channels */
    for (int c = 0; c < C; c++) {
        float *o = s1 + (size_t)c * T1 * F1;
        for (size_t i = 0; i < (size_t)T1 * F1; i++) o[i] = w->c0_b[c];
        conv3_plane(mel, T, F0, w->c0_w + c * 9, o, T1, F1);
    }
    relu(s1, n1);
    /* stages 2 and 3: depthwise 3x3 stride 2, pointwise 1x1 as one GEMM, ReLU */
    const float *dw_w[2] = {w->dw1_w, w->dw2_w}, *dw_b[2] = {w->dw1_b, w->dw2_b};
    const float *pw_w[2] = {w->pw1_w, w->pw2_w}, *pw_b[2] = {w->pw1_b, w->pw2_b};
    const float *in = s1;
    int Ti = T1, Fi = F1;
    float *dst_d[2] = {d2, d3}, *dst_s[2] = {s2, s3};
    for (int stg = 0; stg < 2 && !st; stg++) {
        int To = Ti / 2 + 1, Fo = Fi / 2 + 1;
        size_t plane = (size_t)To * Fo;
        for (int c = 0; c < C; c++) {
            float *o = dst_d[stg] + (size_t)c * plane;
            for (size_t i = 0; i < plane; i++) o[i] = dw_b[stg][c];
            conv3_plane(in + (size_t)c * Ti * Fi, Ti, Fi, dw_w[stg] + c * 9, o, To, Fo);
        }
        /* out[C_out][plane] = W[C_out][C] . dw[C][plane] */
        st = w->k->sgemm(0, 0, C, (int)plane, C, 1.0f, pw_w[stg], C, dst_d[stg], (int)plane, 0.0f,
                         dst_s[stg], (int)plane);
        for (int c = 0; c < C && !st; c++)
            for (size_t i = 0; i < plane; i++) dst_s[stg][(size_t)c * plane + i] += pw_b[stg][c];
        relu(dst_s[stg], (size_t)C * plane);
        in = dst_s[stg];
        Ti = To;
        Fi = Fo;
    }
    if (!st) {
        /* flatten (T3, C, F3) channel-major into d3's room, then Linear(C F3 -> d) */
        float *flat = d3;
        for (int t = 0; t < T3; t++)
            for (int c = 0; c < C; c++)
                memcpy(flat + ((size_t)t * C + c) * F3, s3 + ((size_t)c * T3 + t) * F3, (size_t)F3 * sizeof(float));
        int K = C * F3;
        st = w->k->sgemm(0, 1, T3, w->d, K, 1.0f, flat, K, w->sub_out.w, K, 0.0f, x, w->d);
        for (int t = 0; t < T3 && !st; t++)
            for (int i = 0; i < w->d; i++) x[(size_t)t * w->d + i] += w->sub_out.b[i];
    }
    *n_out = st ? 0 : T3;
    return st;
}

/* ---- dense helpers ---- */

/* LayerNorm with NeMo's eps (kernels/ops.h holds the shared implementation). */
static void layernorm(const float *x, int n, int d, fc_ln p, float *y)
{
    sr_layernorm(x, n, d, p.g, p.b, FC_LN_EPS, y);
}

static sr_status linear(const sr_kernels *k, const float *x, int n, int in, fc_lin L, int out,
                        float beta, float *y)
{
    if (n == 0) return SR_OK;
    sr_status st = k->sgemm(0, 1, n, out, in, 1.0f, x, in, L.w, in, beta, y, out);
    if (st) return st;
    if (L.b)
        for (int r = 0; r < n; r++)
            for (int i = 0; i < out; i++) y[(size_t)r * out + i] += L.b[i];
    return SR_OK;
}

sr_status fc_work_init(fc_work *ws, const fc_model *w, int rows, int keys, int kb, int npos)
{
    memset(ws, 0, sizeof *ws);
    ws->rows = rows;
    ws->keys = keys;
    ws->kb = kb;
    ws->npos = npos;
    size_t r = (size_t)rows, d = (size_t)w->d, nk = (size_t)keys, np = (size_t)npos;
    size_t B = (size_t)SR_MIN(rows, FC_LOCAL_BLOCK), kbz = (size_t)kb;
    size_t bigw = (size_t)SR_MAX(w->d_ff, 2 * w->d);
    size_t total = r * d * 4 + r * bigw + nk * d * 2 + B * kbz + B * (B + kbz) + np * d * 2 +
                   2 * B * (size_t)w->dk + ((size_t)w->kernel - 1 + r) * d;
    float *a = sr_malloc(total * sizeof(float), "fastconformer workspace");
    ws->ok = sr_malloc(kbz + 1, "fastconformer mask row");
    if (!a || !ws->ok) {
        free(a);
        free(ws->ok);
        ws->ok = NULL;
        return SR_ERR_NOMEM;
    }
    ws->xn = a; a += r * d;
    ws->t1 = a; a += r * d;
    ws->q = a; a += r * d;
    ws->att = a; a += r * d;
    ws->big = a; a += r * bigw;
    ws->kk = a; a += nk * d;
    ws->vv = a; a += nk * d;
    ws->ac = a; a += B * kbz;
    ws->bd = a; a += B * (B + kbz);
    ws->pos = a; a += np * d;
    ws->sin = a; a += np * d;
    ws->qu = a; a += B * (size_t)w->dk;
    ws->qv = a; a += B * (size_t)w->dk;
    ws->conv = a;
    ws->bytes = total * sizeof(float) + kbz + 1;
    return SR_OK;
}

void fc_work_free(fc_work *ws)
{
    free(ws->xn);
    free(ws->ok);
    memset(ws, 0, sizeof *ws);
}

/* 1 if query index q may see key index kx. */
static int allowed(const fc_mask *mk, int q, int kx)
{
    if (kx < mk->first_valid) return 0;
    if (mk->band) return kx >= q - mk->left && kx <= q + mk->right;
    if (mk->style == FC_STYLE_REGULAR)
        return (mk->left < 0 || kx >= q - mk->left) && (mk->right < 0 || kx <= q + mk->right);
    if (mk->right < 0) return mk->left < 0 || kx >= q - mk->left;
    int chunk = mk->right + 1;
    int lc = mk->left >= 0 ? mk->left / chunk : 10000;
    int diff = q / chunk - kx / chunk;
    return diff >= 0 && diff <= lc;
}

/* Softmax of row[0, n) over the entries with ok[j]; masked ones 0; a fully masked row 0. */
static void softmax_masked(float *row, const unsigned char *ok, int n)
{
    float mx = -INFINITY;
    int any = 0;
    for (int j = 0; j < n; j++)
        if (ok[j] && row[j] > mx) { mx = row[j]; any = 1; }
    if (!any) {
        memset(row, 0, (size_t)n * sizeof(float));
        return;
    }
    double sum = 0;
    for (int j = 0; j < n; j++) {
        row[j] = ok[j] ? expf(row[j] - mx) : 0.0f;
        sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) row[j] *= inv;
}

/* Multi-head rel-pos attention of queries xn [T, d] over keys = [cache rows first_valid..csize ;
 * xn]; writes the concatenated heads (before linear_out) to out [T, d]. */
static sr_status attention(const fc_model *w, fc_work *ws, int l, const float *xn, int T,
                           const float *cache, int csize, const fc_mask *mk, float *out)
{
    const fc_layer *L = &w->L[l];
    const sr_kernels *k = w->k;
    int d = w->d, dk = w->dk, fv = mk->first_valid;
    int ncache = csize - fv;
    int nk = ncache + T;
    sr_status st;
    /* projections: K / V over [valid cache ; xn] */
    if (ncache > 0) {
        if ((st = linear(k, cache + (size_t)fv * d, ncache, d, L->k, d, 0.0f, ws->kk)) ||
            (st = linear(k, cache + (size_t)fv * d, ncache, d, L->v, d, 0.0f, ws->vv)))
            return st;
    }
    if ((st = linear(k, xn, T, d, L->k, d, 0.0f, ws->kk + (size_t)ncache * d)) ||
        (st = linear(k, xn, T, d, L->v, d, 0.0f, ws->vv + (size_t)ncache * d)) ||
        (st = linear(k, xn, T, d, L->q, d, 0.0f, ws->q)))
        return st;
    /* key j (0-based in kk) has mask index fv + j; query i has index csize + i, so its
     * position relative to key j is p = (csize - fv) + i - j = ncache + i - j */
    int B = SR_MIN(T, FC_LOCAL_BLOCK);
    int pmax, pmin;
    if (mk->band) {
        pmax = SR_MIN(B - 1 + mk->left, ncache + T - 1);
        pmin = -SR_MIN(B - 1 + mk->right, T - 1);
    } else {
        pmax = ncache + T - 1;
        pmin = -(T - 1);
    }
    int npos = pmax - pmin + 1;
    const float *P;
    if (pmax <= w->pos_pos && -pmin <= w->pos_neg) {
        P = w->pos_tab + ((size_t)l * w->pos_rows + (size_t)(w->pos_pos - pmax)) * d;
    } else {
        if (npos > ws->npos)
            return sr_error(SR_ERR_ARG, "fastconformer: %d relative positions exceed the workspace (%d)", npos, ws->npos);
        fc_sinusoids(d, pmax, npos, ws->sin);
        if ((st = k->sgemm(0, 1, npos, d, d, 1.0f, ws->sin, d, L->pos_w, d, 0.0f, ws->pos, d)))
            return st;
        P = ws->pos;
    }
    float scale = 1.0f / sqrtf((float)dk);
    for (int h = 0; h < w->n_heads; h++) {
        const float *u = L->pos_u + h * dk, *v = L->pos_v + h * dk;
        for (int i0 = 0; i0 < T; i0 += B) {
            int nb = SR_MIN(B, T - i0);
            /* key range of the block */
            int jlo = 0, jhi = nk;
            if (mk->band) {
                jlo = SR_MAX(0, ncache + i0 - mk->left);
                jhi = SR_MIN(nk, ncache + i0 + nb - 1 + mk->right + 1);
            }
            int nkb = jhi - jlo;
            if (nkb > ws->kb)
                return sr_error(SR_ERR_ARG, "fastconformer: %d keys per block exceed the workspace (%d)", nkb, ws->kb);
            /* block positions: from pb_max = ncache + i0 - jlo down to ncache + i0 + nb - 1 - (jhi - 1) */
            int pb_max = ncache + i0 - jlo + (nb - 1);
            int pb_min = ncache + i0 - (jhi - 1);
            int npb = pb_max - pb_min + 1;
            /* (q + u) and (q + v) rows of this head */
            float *qu = ws->qu, *qv = ws->qv;
            for (int i = 0; i < nb; i++)
                for (int c = 0; c < dk; c++) {
                    float qq = ws->q[(size_t)(i0 + i) * d + h * dk + c];
                    qu[(size_t)i * dk + c] = qq + u[c];
                    qv[(size_t)i * dk + c] = qq + v[c];
                }
            if ((st = k->sgemm(0, 1, nb, nkb, dk, 1.0f, qu, dk, ws->kk + (size_t)jlo * d + h * dk, d,
                               0.0f, ws->ac, nkb)))
                return st;
            if ((st = k->sgemm(0, 1, nb, npb, dk, 1.0f, qv, dk,
                               P + (size_t)(pmax - pb_max) * d + h * dk, d, 0.0f, ws->bd, npb)))
                return st;
            for (int i = 0; i < nb; i++) {
                float *row = ws->ac + (size_t)i * nkb;
                const float *bdr = ws->bd + (size_t)i * npb;
                unsigned char *okr = ws->ok;
                int qi = csize + i0 + i;
                for (int jj = 0; jj < nkb; jj++) {
                    int j = jlo + jj;
                    int p = ncache + i0 + i - j;
                    okr[jj] = (unsigned char)allowed(mk, qi, fv + j);
                    row[jj] = (row[jj] + bdr[pb_max - p]) * scale;
                }
                softmax_masked(row, okr, nkb);
            }
            if ((st = k->sgemm(0, 0, nb, dk, nkb, 1.0f, ws->ac, nkb, ws->vv + (size_t)jlo * d + h * dk,
                               d, 0.0f, out + (size_t)i0 * d + h * dk, d)))
                return st;
        }
    }
    return SR_OK;
}

static sr_status feed_forward(const fc_model *w, fc_work *ws, float *x, int T, fc_ln ln, fc_lin a,
                              fc_lin b)
{
    sr_status st;
    layernorm(x, T, w->d, ln, ws->xn);
    if ((st = linear(w->k, ws->xn, T, w->d, a, w->d_ff, 0.0f, ws->big))) return st;
    sr_silu(ws->big, (size_t)T * w->d_ff);
    if ((st = linear(w->k, ws->big, T, w->d_ff, b, w->d, 0.0f, ws->t1))) return st;
    for (size_t i = 0; i < (size_t)T * w->d; i++) x[i] += 0.5f * ws->t1[i];
    return SR_OK;
}

sr_status fc_layers(const fc_model *w, fc_work *ws, float *x, int T, const fc_mask *mk, fc_cache *kc)
{
    int csize = kc ? kc->csize : 0, chan_len = kc ? kc->chan_len : 0;
    if (T == 0) return SR_OK;
    if (T > ws->rows || csize + T > ws->keys)
        return sr_error(SR_ERR_ARG, "fastconformer: %d rows over %d keys exceed the workspace (%d, %d)",
                        T, csize + T, ws->rows, ws->keys);
    int d = w->d, K = w->kernel;
    sr_status st;
    float *att = ws->att; /* per-workspace: no allocation per call (streaming steps) */
    for (int l = 0; l < w->n_layers; l++) {
        const fc_layer *L = &w->L[l];
        if ((st = feed_forward(w, ws, x, T, L->ff1_ln, L->ff1a, L->ff1b))) goto done;
        /* self-attention over [cache ; LN x] */
        layernorm(x, T, d, L->att_ln, ws->xn);
        float *cl = NULL;
        uint16_t *cl16 = kc && kc->chan16 ? kc->chan16 + (size_t)l * csize * d : NULL;
        fc_mask lm = *mk;
        lm.first_valid = csize - chan_len;
        if (cl16) { /* the valid rows widened to f32 (attention reads only those) */
            cl = kc->tmp;
            sr_f16_to_f32_n(cl16 + (size_t)lm.first_valid * d, cl + (size_t)lm.first_valid * d,
                            (size_t)chan_len * d);
        } else if (kc) {
            cl = kc->chan + (size_t)l * csize * d;
        }
        if ((st = attention(w, ws, l, ws->xn, T, cl, csize, &lm, att))) goto done;
        if ((st = linear(w->k, att, T, d, L->o, d, 0.0f, ws->t1))) goto done;
        for (size_t i = 0; i < (size_t)T * d; i++) x[i] += ws->t1[i];
        if (cl16) { /* the same in f16: shift, then round the new rows */
            if (T >= csize) {
                sr_f32_to_f16_n(ws->xn + (size_t)(T - csize) * d, cl16, (size_t)csize * d);
            } else {
                memmove(cl16, cl16 + (size_t)T * d, (size_t)(csize - T) * d * sizeof(uint16_t));
                sr_f32_to_f16_n(ws->xn, cl16 + (size_t)(csize - T) * d, (size_t)T * d);
            }
        } else if (cl) { /* new cache: the last csize rows of [cache ; LN input] */
            if (T >= csize) {
                memcpy(cl, ws->xn + (size_t)(T - csize) * d, (size_t)csize * d * sizeof(float));
            } else {
                memmove(cl, cl + (size_t)T * d, (size_t)(csize - T) * d * sizeof(float));
                memcpy(cl + (size_t)(csize - T) * d, ws->xn, (size_t)T * d * sizeof(float));
            }
        }
        /* convolution module */
        layernorm(x, T, d, L->conv_ln, ws->xn);
        if ((st = linear(w->k, ws->xn, T, d, L->pw1, 2 * d, 0.0f, ws->big))) goto done;
        float *buf = ws->conv; /* [K - 1 + T, d]: left context then the GLU output */
        float *cc = kc && kc->conv ? kc->conv + (size_t)l * (K - 1) * d : NULL;
        uint16_t *cc16 = kc && kc->conv16 ? kc->conv16 + (size_t)l * (K - 1) * d : NULL;
        if (cc) memcpy(buf, cc, (size_t)(K - 1) * d * sizeof(float));
        else if (cc16) sr_f16_to_f32_n(cc16, buf, (size_t)(K - 1) * d);
        else memset(buf, 0, (size_t)(K - 1) * d * sizeof(float));
        for (int t = 0; t < T; t++) {
            const float *g = ws->big + (size_t)t * 2 * d;
            float *o = buf + (size_t)(K - 1 + t) * d;
            for (int c = 0; c < d; c++) o[c] = g[c] / (1.0f + expf(-g[d + c]));
        }
        if (cc) memcpy(cc, buf + (size_t)T * d, (size_t)(K - 1) * d * sizeof(float));
        else if (cc16) sr_f32_to_f16_n(buf + (size_t)T * d, cc16, (size_t)(K - 1) * d);
        for (int t = 0; t < T; t++) {
            float *o = ws->t1 + (size_t)t * d;
            for (int c = 0; c < d; c++) {
                float s = L->dw_b[c];
                for (int j = 0; j < K; j++) s += L->dw_w[c * K + j] * buf[(size_t)(t + j) * d + c];
                o[c] = s;
            }
        }
        if (L->bn_mean) {
            for (int t = 0; t < T; t++)
                for (int c = 0; c < d; c++) {
                    float *o = ws->t1 + (size_t)t * d + c;
                    *o = (*o - L->bn_mean[c]) / sqrtf(L->bn_var[c] + FC_LN_EPS) * L->cnorm.g[c] + L->cnorm.b[c];
                }
        } else {
            layernorm(ws->t1, T, d, L->cnorm, ws->t1);
        }
        sr_silu(ws->t1, (size_t)T * d);
        if ((st = linear(w->k, ws->t1, T, d, L->pw2, d, 0.0f, ws->xn))) goto done;
        for (size_t i = 0; i < (size_t)T * d; i++) x[i] += ws->xn[i];
        if ((st = feed_forward(w, ws, x, T, L->ff2_ln, L->ff2a, L->ff2b))) goto done;
        layernorm(x, T, d, L->out_ln, x);
    }
    st = SR_OK;
done:
    return st;
}

sr_status fc_encode_offline(const fc_model *w, const float *mel, int T, const int ctx[2],
                            int local, float **out, int *n_out, size_t *work_bytes)
{
    *out = NULL;
    *n_out = 0;
    if (T <= 0) return sr_error(SR_ERR_ARG, "fastconformer: offline encoder over %d mel frames", T);
    int Tp = fc_subsample_len(T);
    float *x = sr_malloc((size_t)Tp * w->d * sizeof(float), "fastconformer encoder output");
    if (!x) return SR_ERR_NOMEM;
    int n;
    sr_status st = fc_subsample(w, mel, T, x, &n);
    if (st) { free(x); return st; }
    for (size_t i = 0; i < (size_t)n * w->d; i++) x[i] *= w->xscale;
    fc_mask mk = {.left = ctx[0], .right = ctx[1], .style = w->att_style, .band = local};
    int B = SR_MIN(n, FC_LOCAL_BLOCK);
    int kb = local ? SR_MIN(n, B + ctx[0] + ctx[1]) : n;
    int npos = local ? SR_MIN(2 * n, 2 * B + ctx[0] + ctx[1]) : 2 * n;
    fc_work ws;
    if ((st = fc_work_init(&ws, w, n, n, kb, npos))) { free(x); return st; }
    st = fc_layers(w, &ws, x, n, &mk, NULL);
    if (work_bytes) *work_bytes = ws.bytes + (size_t)n * w->d * sizeof(float);
    fc_work_free(&ws);
    if (st) { free(x); return st; }
    *out = x;
    *n_out = n;
    return SR_OK;
}
