/*
 * vx_model.c — the voxtral_realtime network (transformers' VoxtralRealtimeForConditionalGeneration):
 * loading and the forward pieces the stream runs.
 *
 *   encoder layer   x += o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))) + bo
 *                   x += down(silu(gate(n2(x))) * up(n2(x))) + bdown
 *                   q, v, o biased, k not; n1, n2 RMSNorm; final RMSNorm after the last layer
 *   adapter         4 consecutive encoder frames concatenated -> linear_1 -> GELU -> linear_2
 *   decoder layer   x += o(attn(GQA, rope)); x += mlp(n2(x) * (1 + ada(t_cond))), no biases,
 *                   ada = linear2(GELU(linear1(t_cond))), t_cond = [cos(delay f), sin(delay f)]
 *                   with f_i = exp(-ln(10000) i / (dim/2)); final RMSNorm; logits = h · E^T
 *                   with E the token embedding (tied output)
 *   RMSNorm         x / sqrt(mean(x^2) + eps) * g (mean accumulated in double)
 *   RoPE            rotate-half layout: for i < hd/2 the pair (x_i, x_{i+hd/2}) is rotated by
 *                   pos * inv_i, inv_i = 1 / theta^(2i/hd) (float32, as transformers)
 *   attention       over a ring K/V cache of S slots; slot j holds absolute position
 *                   j + floor((written - 1 - j) / S) S (negative: never written); a query at
 *                   position p sees keys 0 <= p - pos < window, so only the slots of the last
 *                   window + n - 1 positions are read (at most two runs of the ring); scale
 *                   hd^-1/2; GQA maps query head h to KV head h / (Hq / Hkv)
 * bf16 matrices stay bf16 (vx_linear): products of <= 4 rows read them directly (kernels/lowp.h),
 * larger ones convert a tile of rows at a time to f32 for sgemm, never a whole matrix.
 */
#include "voxtral.h"

#include "../../core/dtype.h"
#include "../../kernels/lowp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


/* ---- small ops ----------------------------------------------------------------------------- */

sr_status vx_linear(const sr_kernels *k, vx_scratch *s, const float *x, int n, vx_mat L,
                    const float *b, float beta, float *y)
{
    if (n == 0) return SR_OK;
    sr_status st;
    if (!L.bf16)
        st = k->sgemm(0, 1, n, L.out, L.in, 1.0f, x, L.in, L.w, L.in, beta, y, L.out);
    else /* direct bf16 kernel for few rows, bf16 -> f32 tiles + sgemm for many */
        st = sr_bf16_gemm(k, s->threads, n, L.out, L.in, x, L.in, L.w, L.in, beta, y, L.out,
                          s->tile, s->tile_floats);
    if (st) return st;
    if (b)
        for (int r = 0; r < n; r++)
            for (int i = 0; i < L.out; i++) y[(size_t)r * L.out + i] += b[i];
    return SR_OK;
}

void vx_embed(const vx_model *w, int32_t id, float *out)
{
    if (w->embed.bf16)
        sr_bf16_to_f32_n((const uint16_t *)w->embed.w + (size_t)id * w->dim, out, (size_t)w->dim);
    else
        memcpy(out, (const float *)w->embed.w + (size_t)id * w->dim, (size_t)w->dim * sizeof(float));
}

static void silu_mul(float *a, const float *b, size_t n)
{
    sr_silu(a, n);
    for (size_t i = 0; i < n; i++) a[i] *= b[i];
}

/* Rotate n rows of `heads` heads of width hd (row stride heads * hd) at positions p0 + r. */
static void rope(float *x, int n, int heads, int hd, const float *inv, int64_t p0)
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

/* Attention of n query rows (positions p0 ..) over layer l of ring r (K/V [S][Hkv hd]) after
 * the rows were written (r->written = p0 + n); out [n, Hq hd]. Only the keys a query can see
 * are read: positions lo = max(0, p0 - window + 1) .. p0 + n - 1, all still in the ring since
 * window + n - 1 <= S, i.e. the slots lo % S .. as at most two runs (the ring wraps once).
 * Score column c is position lo + c; query p sees it when 0 <= p - (lo + c) < window. */
static sr_status attend(const sr_kernels *k, vx_scratch *s, const float *q, int n, int Hq,
                        int Hkv, int hd, const vx_ring *r, int l, int window, int64_t p0,
                        float *out)
{
    int S = r->slots, w = Hkv * hd, qw = Hq * hd;
    size_t lay = (size_t)l * S * w;
    int64_t lo = p0 - window + 1 < 0 ? 0 : p0 - window + 1;
    int nk = (int)(p0 + n - lo);                 /* <= window + n - 1 <= S */
    int a0 = (int)(lo % S), len0 = SR_MIN(nk, S - a0); /* run 1: slots a0 .., run 2: 0 .. */
    int runs[2][3] = {{a0, len0, 0}, {0, nk - len0, len0}}; /* first slot, length, column */
    float scale = 1.0f / sqrtf((float)hd);
    int group = Hq / Hkv;
    for (int h = 0; h < Hq; h++) {
        size_t kvo = lay + (size_t)(h / group) * hd;
        const float *qh = q + (size_t)h * hd;
        float *oh = out + (size_t)h * hd;
        sr_status st = SR_OK;
        for (int u = 0; u < 2 && !st; u++) {
            if (!runs[u][1]) continue;
            size_t ko = kvo + (size_t)runs[u][0] * w;
            float *sc = s->scores + runs[u][2];
            if (r->bf16) /* scaled below, with the mask */
                st = sr_bf16_gemm(k, 1, n, runs[u][1], hd, qh, qw, (const uint16_t *)r->k + ko, w,
                                  0.0f, sc, nk, s->tile, s->tile_floats);
            else
                st = k->sgemm(0, 1, n, runs[u][1], hd, scale, qh, qw, (const float *)r->k + ko, w,
                              0.0f, sc, nk);
        }
        if (st) return st;
        float scl = r->bf16 ? scale : 1.0f;
        for (int i = 0; i < n; i++) {
            /* query p0 + i sees the contiguous columns [first, last]: itself and window - 1
             * positions back; the others get probability 0 */
            float *row = s->scores + (size_t)i * nk;
            int last = (int)(p0 + i - lo), first = SR_MAX(0, last - window + 1);
            for (int j = 0; j < first; j++) row[j] = 0.0f;
            if (scl != 1.0f)
                for (int j = first; j <= last; j++) row[j] *= scl;
            sr_softmax(row + first, last - first + 1, nk - first);
        }
        for (int u = 0; u < 2 && !st; u++) {
            if (!runs[u][1]) continue;
            size_t vo = kvo + (size_t)runs[u][0] * w;
            const float *pr = s->scores + runs[u][2];
            float beta = u && runs[0][1] ? 1.0f : 0.0f;
            if (r->bf16)
                st = sr_bf16_gemm_nn(SR_LOWP_AUTO, n, hd, runs[u][1], pr, nk,
                                     (const uint16_t *)r->v + vo, w, beta, oh, qw);
            else
                st = k->sgemm(0, 0, n, hd, runs[u][1], 1.0f, pr, nk, (const float *)r->v + vo, w,
                              beta, oh, qw);
        }
        if (st) return st;
    }
    return SR_OK;
}

/* Write n rows of K and V into layer l's ring at positions r->written + i (not yet counted). */
static void ring_write(vx_ring *r, int l, const float *kk, const float *vv, int n)
{
    size_t w = (size_t)r->w;
    for (int i = 0; i < n; i++) {
        size_t slot = (size_t)((r->written + i) % r->slots);
        size_t off = ((size_t)l * r->slots + slot) * w;
        if (r->bf16) {
            sr_f32_to_bf16_n(kk + i * w, (uint16_t *)r->k + off, w);
            sr_f32_to_bf16_n(vv + i * w, (uint16_t *)r->v + off, w);
        } else {
            memcpy((float *)r->k + off, kk + i * w, w * sizeof(float));
            memcpy((float *)r->v + off, vv + i * w, w * sizeof(float));
        }
    }
}

sr_status vx_encode(const vx_model *w, const sr_kernels *k, vx_scratch *s, vx_ring *er,
                    float *x, int n)
{
    if (n <= 0 || n > s->rows || n > er->slots - w->enc_window + 1)
        return sr_error(SR_ERR_ARG, "voxtral encoder: %d rows per step (at most %d)", n,
                        SR_MIN(s->rows, er->slots - w->enc_window + 1));
    int d = w->enc_dim, H = w->enc_heads, hd = w->enc_hd;
    int64_t p0 = er->written;
    sr_status st = SR_OK;
    for (int l = 0; l < w->enc_layers && !st; l++) {
        const vx_layer *L = &w->enc[l];
        sr_rmsnorm(x, n, d, L->attn_norm, w->enc_eps, s->h);
        if ((st = vx_linear(k, s, s->h, n, L->q, L->bq, 0.0f, s->q)) ||
            (st = vx_linear(k, s, s->h, n, L->k, NULL, 0.0f, s->k)) ||
            (st = vx_linear(k, s, s->h, n, L->v, L->bv, 0.0f, s->v)))
            break;
        rope(s->q, n, H, hd, w->enc_inv, p0);
        rope(s->k, n, H, hd, w->enc_inv, p0);
        ring_write(er, l, s->k, s->v, n);
        er->written += n; /* the mask of this step sees the new rows */
        st = attend(k, s, s->q, n, H, H, hd, er, l, w->enc_window, p0, s->a);
        er->written -= n;
        if (st || (st = vx_linear(k, s, s->a, n, L->o, L->bo, 1.0f, x))) break;
        sr_rmsnorm(x, n, d, L->ffn_norm, w->enc_eps, s->h);
        if ((st = vx_linear(k, s, s->h, n, L->gate, NULL, 0.0f, s->f1)) ||
            (st = vx_linear(k, s, s->h, n, L->up, NULL, 0.0f, s->f2)))
            break;
        silu_mul(s->f1, s->f2, (size_t)n * w->enc_ffn);
        st = vx_linear(k, s, s->f1, n, L->down, L->bdown, 1.0f, x);
    }
    if (st) return st;
    er->written += n;
    sr_rmsnorm(x, n, d, w->enc_norm, w->enc_eps, x);
    return SR_OK;
}

sr_status vx_adapter(const vx_model *w, const sr_kernels *k, vx_scratch *s, const float *enc,
                     int n, float *out)
{
    int g = n / w->ds; /* [n, enc_dim] row-major is [n / ds, ds * enc_dim]: the concat */
    sr_status st = vx_linear(k, s, enc, g, w->proj1, NULL, 0.0f, s->f1);
    if (st) return st;
    sr_gelu_erf(s->f1, (size_t)g * w->dim);
    return vx_linear(k, s, s->f1, g, w->proj2, NULL, 0.0f, out);
}

sr_status vx_decode(const vx_model *w, const sr_kernels *k, vx_scratch *s, vx_ring *dr,
                    const float *ada, float *x, int n, float *logits)
{
    if (n <= 0 || n > s->rows || n > dr->slots - w->window + 1)
        return sr_error(SR_ERR_ARG, "voxtral decoder: %d rows per step (at most %d)", n,
                        SR_MIN(s->rows, dr->slots - w->window + 1));
    int d = w->dim, hd = w->hd;
    int64_t p0 = dr->written;
    sr_status st = SR_OK;
    for (int l = 0; l < w->n_layers && !st; l++) {
        const vx_layer *L = &w->dec[l];
        sr_rmsnorm(x, n, d, L->attn_norm, w->eps, s->h);
        if ((st = vx_linear(k, s, s->h, n, L->q, NULL, 0.0f, s->q)) ||
            (st = vx_linear(k, s, s->h, n, L->k, NULL, 0.0f, s->k)) ||
            (st = vx_linear(k, s, s->h, n, L->v, NULL, 0.0f, s->v)))
            break;
        rope(s->q, n, w->n_heads, hd, w->dec_inv, p0);
        rope(s->k, n, w->n_kv, hd, w->dec_inv, p0);
        ring_write(dr, l, s->k, s->v, n);
        dr->written += n;
        st = attend(k, s, s->q, n, w->n_heads, w->n_kv, hd, dr, l, w->window, p0, s->a);
        dr->written -= n;
        if (st || (st = vx_linear(k, s, s->a, n, L->o, NULL, 1.0f, x))) break;
        sr_rmsnorm(x, n, d, L->ffn_norm, w->eps, s->h);
        const float *al = ada + (size_t)l * d;
        for (int r = 0; r < n; r++)
            for (int i = 0; i < d; i++) s->h[(size_t)r * d + i] *= al[i];
        if ((st = vx_linear(k, s, s->h, n, L->gate, NULL, 0.0f, s->f1)) ||
            (st = vx_linear(k, s, s->h, n, L->up, NULL, 0.0f, s->f2)))
            break;
        silu_mul(s->f1, s->f2, (size_t)n * w->ffn);
        st = vx_linear(k, s, s->f1, n, L->down, NULL, 1.0f, x);
    }
    if (st) return st;
    dr->written += n;
    if (!logits) return SR_OK;
    sr_rmsnorm(x + (size_t)(n - 1) * d, 1, d, w->dec_norm, w->eps, s->h);
    return vx_linear(k, s, s->h, 1, w->embed, NULL, 0.0f, logits);
}

sr_status vx_ada_scales(const vx_model *w, const sr_kernels *k, vx_scratch *s, int delay,
                        float *out)
{
    int d = w->dim, half = d / 2;
    float *t = s->x;
    float nl = (float)-log((double)w->time_theta);
    for (int i = 0; i < half; i++) {
        float inv = expf(nl * (float)i / (float)half);
        float a = (float)delay * inv;
        t[i] = cosf(a);
        t[i + half] = sinf(a);
    }
    for (int l = 0; l < w->n_layers; l++) {
        sr_status st = vx_linear(k, s, t, 1, w->dec[l].ada1, NULL, 0.0f, s->f1);
        if (st) return st;
        sr_gelu_erf(s->f1, VX_ADA_DIM);
        if ((st = vx_linear(k, s, s->f1, 1, w->dec[l].ada2, NULL, 0.0f, out + (size_t)l * d)))
            return st;
        for (int i = 0; i < d; i++) out[(size_t)l * d + i] += 1.0f;
    }
    return SR_OK;
}

/* ---- scratch and rings ----------------------------------------------------------------------- */

sr_status vx_scratch_init(vx_scratch *s, int rows, size_t width, size_t slots, size_t tile)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->width = width;
    s->slots = slots;
    s->tile_floats = tile;
    size_t rw = (size_t)rows * width;
    float **bufs[] = {&s->x, &s->h, &s->q, &s->k, &s->v, &s->a, &s->f1, &s->f2};
    for (size_t i = 0; i < SR_ARRAY_LEN(bufs); i++)
        if (!(*bufs[i] = sr_malloc(rw * sizeof(float), "voxtral scratch"))) goto fail;
    if (!(s->scores = sr_malloc((size_t)rows * slots * sizeof(float), "voxtral attention scores")) ||
        !(s->tile = sr_malloc(s->tile_floats * sizeof(float), "voxtral weight tile")))
        goto fail;
    return SR_OK;
fail:
    vx_scratch_free(s);
    return SR_ERR_NOMEM;
}

void vx_scratch_free(vx_scratch *s)
{
    float *bufs[] = {s->x, s->h, s->q, s->k, s->v, s->a, s->f1, s->f2, s->scores, s->tile};
    for (size_t i = 0; i < SR_ARRAY_LEN(bufs); i++) free(bufs[i]);
    memset(s, 0, sizeof *s);
}

size_t vx_scratch_bytes(const vx_scratch *s)
{
    return (8 * (size_t)s->rows * s->width + (size_t)s->rows * s->slots + s->tile_floats) *
           sizeof(float);
}

sr_status vx_ring_init(vx_ring *r, int layers, int slots, int w, int bf16, const char *what)
{
    memset(r, 0, sizeof *r);
    r->layers = layers;
    r->slots = slots;
    r->w = w;
    r->bf16 = bf16;
    size_t n = (size_t)layers * slots * w, el = bf16 ? sizeof(uint16_t) : sizeof(float);
    r->k = sr_calloc(n, el, what);
    r->v = sr_calloc(n, el, what);
    if (!r->k || !r->v) {
        vx_ring_free(r);
        return SR_ERR_NOMEM;
    }
    return SR_OK;
}

size_t vx_ring_bytes(const vx_ring *r)
{
    return 2 * (size_t)r->layers * r->slots * r->w * (r->bf16 ? sizeof(uint16_t) : sizeof(float));
}

void vx_ring_free(vx_ring *r)
{
    free(r->k);
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* ---- loading --------------------------------------------------------------------------------- */

static sr_status cfg_float(const sr_model *m, const char *key, float *out)
{
    sr_status st = sr_cfg_float_def(m, key, NAN, out);
    if (st) return st;
    if (isnan(*out)) return sr_error(SR_ERR_FORMAT, "%s: config.%s: missing", m->path, key);
    return SR_OK;
}

static void vx_free(vx_model *w)
{
    if (!w) return;
    free(w->enc);
    free(w->dec);
    free(w->enc_inv);
    free(w->dec_inv);
    sr_mel_free(w->mel);
    free(w);
}

static sr_status load_config(sr_model *m, vx_model *w)
{
    sr_status st;
    int sr = 0, n_fft = 0, hop = 0, ada = 0;
    struct { const char *key; int *dst; int lo, hi; } ints[] = {
        {"sample_rate", &sr, 16000, 16000}, {"n_fft", &n_fft, 400, 400},
        {"hop_length", &hop, 160, 160}, {"n_mels", &w->n_mels, 1, 1024},
        {"enc_dim", &w->enc_dim, 1, 65536}, {"enc_layers", &w->enc_layers, 1, 1024},
        {"enc_heads", &w->enc_heads, 1, 1024}, {"enc_head_dim", &w->enc_hd, 2, 4096},
        {"enc_ffn", &w->enc_ffn, 1, 1 << 20}, {"enc_sliding_window", &w->enc_window, 1, 1 << 20},
        {"downsample_factor", &w->ds, 4, 4},
        {"dim", &w->dim, 2, 65536}, {"n_layers", &w->n_layers, 1, 1024},
        {"n_heads", &w->n_heads, 1, 1024}, {"n_kv_heads", &w->n_kv, 1, 1024},
        {"head_dim", &w->hd, 2, 4096}, {"ffn", &w->ffn, 1, 1 << 20},
        {"vocab", &w->vocab, 1, 1 << 24}, {"sliding_window", &w->window, 1, 1 << 24},
        {"ada_dim", &ada, VX_ADA_DIM, VX_ADA_DIM},
        {"bos_id", &w->bos, 0, 1 << 24}, {"eos_id", &w->eos, 0, 1 << 24},
        {"pad_id", &w->pad, 0, 1 << 24},
        {"n_left_pad_tokens", &w->n_left, 0, 4096}, {"n_right_pad_tokens", &w->n_right, 0, 4096},
        {"delay_tokens", &w->delay_def, 0, 4096}, {"min_delay_tokens", &w->delay_min, 0, 4096},
        {"max_delay_tokens", &w->delay_max, 0, 4096}, {"flush_tokens", &w->flush_tokens, 0, 1 << 20},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(ints); i++) {
        if ((st = sr_cfg_int(m, ints[i].key, ints[i].dst))) return st;
        int v = *ints[i].dst;
        if (v < ints[i].lo || v > ints[i].hi) {
            if (ints[i].lo == ints[i].hi)
                return sr_error(SR_ERR_FORMAT, "%s: config.%s: %d, voxtral_realtime needs %d",
                                m->path, ints[i].key, v, ints[i].lo);
            return sr_error(SR_ERR_FORMAT, "%s: config.%s: %d out of range (%d..%d)", m->path,
                            ints[i].key, v, ints[i].lo, ints[i].hi);
        }
    }
    if ((st = cfg_float(m, "global_log_mel_max", &w->log_mel_max)) ||
        (st = cfg_float(m, "enc_rope_theta", &w->enc_theta)) ||
        (st = cfg_float(m, "enc_norm_eps", &w->enc_eps)) ||
        (st = cfg_float(m, "rope_theta", &w->theta)) || (st = cfg_float(m, "norm_eps", &w->eps)) ||
        (st = sr_cfg_float_def(m, "time_theta", 10000.0f, &w->time_theta)))
        return st;
    if (w->enc_hd % 2 || w->hd % 2 || w->dim % 2)
        return sr_error(SR_ERR_FORMAT, "%s: config.enc_head_dim / head_dim / dim (%d / %d / %d) "
                        "must be even for RoPE and the time embedding", m->path, w->enc_hd, w->hd,
                        w->dim);
    if (w->n_heads % w->n_kv)
        return sr_error(SR_ERR_FORMAT, "%s: config.n_kv_heads: %d does not divide n_heads %d",
                        m->path, w->n_kv, w->n_heads);
    if (w->bos >= w->vocab || w->eos >= w->vocab || w->pad >= w->vocab)
        return sr_error(SR_ERR_FORMAT, "%s: config.bos_id / eos_id / pad_id (%d / %d / %d) "
                        "outside the vocabulary of %d", m->path, w->bos, w->eos, w->pad, w->vocab);
    if (w->delay_min < 1 || w->delay_min > w->delay_max || w->delay_def < w->delay_min ||
        w->delay_def > w->delay_max)
        return sr_error(SR_ERR_FORMAT, "%s: config.delay_tokens: %d outside "
                        "config.min_delay_tokens..max_delay_tokens (%d..%d)", m->path,
                        w->delay_def, w->delay_min, w->delay_max);
    if (!(w->enc_theta > 0) || !(w->theta > 0) || !(w->time_theta > 0) || !(w->eps > 0) ||
        !(w->enc_eps > 0))
        return sr_error(SR_ERR_FORMAT, "%s: config rope_theta / enc_rope_theta / time_theta / "
                        "norm_eps / enc_norm_eps must be positive", m->path);
    return SR_OK;
}

/* Load one tensor: 2-D matrices in the file's dtype (bf16 kept), everything else f32. */
static sr_status ten(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                     int64_t a, int64_t b, int64_t c, const void **out)
{
    const sr_tensor *t;
    int64_t shape[3] = {a, b, c};
    sr_status st = sr_model_tensor(m, f, name, want, ndim, shape, &t);
    if (st) return st;
    *out = t->data;
    return SR_OK;
}

static sr_status mat(sr_model *m, sr_h5 *f, sr_dtype want, const char *name, int out, int in,
                     vx_mat *M)
{
    M->bf16 = want == SR_BF16;
    M->out = out;
    M->in = in;
    return ten(m, f, name, want, 2, out, in, 0, &M->w);
}

static sr_status vec(sr_model *m, sr_h5 *f, const char *name, int n, const float **out)
{
    return ten(m, f, name, SR_F32, 1, n, 0, 0, (const void **)out);
}

static sr_status load_layer(sr_model *m, sr_h5 *f, sr_dtype wt, const vx_model *w, int enc,
                            int l, vx_layer *L)
{
    char n[192];
    const char *pre = enc ? "model.audio_tower.layers" : "model.language_model.layers";
    int d = enc ? w->enc_dim : w->dim, hq = enc ? w->enc_heads : w->n_heads;
    int hk = enc ? w->enc_heads : w->n_kv, hd = enc ? w->enc_hd : w->hd;
    int ffn = enc ? w->enc_ffn : w->ffn;
    sr_status st = SR_OK;
#define NAME(s) (snprintf(n, sizeof n, "%s.%d.%s", pre, l, s), n)
    if (!st) st = mat(m, f, wt, NAME("self_attn.q_proj.weight"), hq * hd, d, &L->q);
    if (!st) st = mat(m, f, wt, NAME("self_attn.k_proj.weight"), hk * hd, d, &L->k);
    if (!st) st = mat(m, f, wt, NAME("self_attn.v_proj.weight"), hk * hd, d, &L->v);
    if (!st) st = mat(m, f, wt, NAME("self_attn.o_proj.weight"), d, hq * hd, &L->o);
    if (!st) st = mat(m, f, wt, NAME("mlp.gate_proj.weight"), ffn, d, &L->gate);
    if (!st) st = mat(m, f, wt, NAME("mlp.up_proj.weight"), ffn, d, &L->up);
    if (!st) st = mat(m, f, wt, NAME("mlp.down_proj.weight"), d, ffn, &L->down);
    if (enc) {
        if (!st) st = vec(m, f, NAME("self_attn.q_proj.bias"), hq * hd, &L->bq);
        if (!st) st = vec(m, f, NAME("self_attn.v_proj.bias"), hk * hd, &L->bv);
        if (!st) st = vec(m, f, NAME("self_attn.o_proj.bias"), d, &L->bo);
        if (!st) st = vec(m, f, NAME("mlp.down_proj.bias"), d, &L->bdown);
        if (!st) st = vec(m, f, NAME("self_attn_layer_norm.weight"), d, &L->attn_norm);
        if (!st) st = vec(m, f, NAME("final_layer_norm.weight"), d, &L->ffn_norm);
    } else {
        if (!st) st = vec(m, f, NAME("input_layernorm.weight"), d, &L->attn_norm);
        if (!st) st = vec(m, f, NAME("post_attention_layernorm.weight"), d, &L->ffn_norm);
        if (!st) st = mat(m, f, wt, NAME("ada_rms_norm.linear1.weight"), VX_ADA_DIM, d, &L->ada1);
        if (!st) st = mat(m, f, wt, NAME("ada_rms_norm.linear2.weight"), d, VX_ADA_DIM, &L->ada2);
    }
#undef NAME
    return st;
}

static float *inv_freq(int hd, float theta)
{
    float *inv = sr_malloc((size_t)(hd / 2) * sizeof(float), "voxtral rope frequencies");
    if (!inv) return NULL;
    for (int i = 0; i < hd / 2; i++) /* torch: 1 / theta ** (arange(0, hd, 2).float() / hd) */
        inv[i] = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
    return inv;
}

sr_status vx_load(sr_model *m, sr_h5 *f)
{
    vx_model *w = sr_calloc(1, sizeof *w, "voxtral model");
    if (!w) return SR_ERR_NOMEM;
    sr_status st = load_config(m, w);
    sr_dtype wt = SR_F32;
    if (!st) {
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(m->config, "dtype");
        if (!cJSON_IsString(dt) || (strcmp(dt->valuestring, "f32") && strcmp(dt->valuestring, "bf16")))
            st = sr_error(SR_ERR_FORMAT, "%s: config.dtype: expected \"f32\" or \"bf16\"", m->path);
        else if (!strcmp(dt->valuestring, "bf16"))
            wt = SR_BF16;
    }
    if (!st && m->tokenizer && sr_tokenizer_size(m->tokenizer) != w->vocab)
        st = sr_error(SR_ERR_FORMAT, "%s: /tokenizer has %d pieces, config.vocab is %d", m->path,
                      sr_tokenizer_size(m->tokenizer), w->vocab);
    if (!st) {
        sr_mel_config c;
        sr_mel_config_init(&c, SR_MEL_WHISPER);
        c.n_mels = w->n_mels;
        c.log_mel_max = w->log_mel_max;
        c.fixed_max = 1;
        if ((st = sr_mel_create(&c, &w->mel))) sr_error_prefix(st, "%s: log-mel front-end", m->path);
    }
    if (!st) {
        w->enc = sr_calloc((size_t)w->enc_layers, sizeof *w->enc, "voxtral encoder layers");
        w->dec = sr_calloc((size_t)w->n_layers, sizeof *w->dec, "voxtral decoder layers");
        w->enc_inv = inv_freq(w->enc_hd, w->enc_theta);
        w->dec_inv = inv_freq(w->hd, w->theta);
        if (!w->enc || !w->dec || !w->enc_inv || !w->dec_inv) st = SR_ERR_NOMEM;
    }
    int E = w->enc_dim;
    if (!st) st = ten(m, f, "model.audio_tower.embedder.conv1.weight", SR_F32, 3, E, w->n_mels, 3, (const void **)&w->conv1_w);
    if (!st) st = vec(m, f, "model.audio_tower.embedder.conv1.bias", E, &w->conv1_b);
    if (!st) st = ten(m, f, "model.audio_tower.embedder.conv2.weight", SR_F32, 3, E, E, 3, (const void **)&w->conv2_w);
    if (!st) st = vec(m, f, "model.audio_tower.embedder.conv2.bias", E, &w->conv2_b);
    for (int l = 0; !st && l < w->enc_layers; l++) st = load_layer(m, f, wt, w, 1, l, &w->enc[l]);
    if (!st) st = vec(m, f, "model.audio_tower.norm.weight", E, &w->enc_norm);
    if (!st) st = mat(m, f, wt, "model.multi_modal_projector.linear_1.weight", w->dim, w->ds * E, &w->proj1);
    if (!st) st = mat(m, f, wt, "model.multi_modal_projector.linear_2.weight", w->dim, w->dim, &w->proj2);
    if (!st) st = mat(m, f, wt, "model.language_model.embed_tokens.weight", w->vocab, w->dim, &w->embed);
    for (int l = 0; !st && l < w->n_layers; l++) st = load_layer(m, f, wt, w, 0, l, &w->dec[l]);
    if (!st) st = vec(m, f, "model.language_model.norm.weight", w->dim, &w->dec_norm);
    if (st) {
        vx_free(w);
        return st;
    }
    m->impl = w;
    return SR_OK;
}

void vx_unload(sr_model *m)
{
    vx_free(m->impl);
    m->impl = NULL;
}
