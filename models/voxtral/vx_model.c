/*
 * vx_model.c — the voxtral_realtime network (transformers' VoxtralRealtimeForConditionalGeneration):
 * loading and the forward pieces the stream runs, every operation a call of the kernel table.
 *
 *   stem            conv1 (k 3, s 1) + GELU, conv2 (k 3, s 2) + GELU, causal: the im2col of
 *                   [carried state ; new rows] of every sequence gathered by one copy_rows,
 *                   then gemm with the bias and GELU fused; states updated by one kv_write
 *   encoder layer   x += o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))) + bo
 *                   x += down(silu(gate(n2(x))) * up(n2(x))) + bdown
 *                   q, v, o biased, k not; n1, n2 RMSNorm; final RMSNorm after the last layer
 *   adapter         4 consecutive encoder frames concatenated -> linear_1 -> GELU -> linear_2
 *   decoder layer   x += o(attn(GQA, rope)); x += mlp(n2(x) * (1 + ada(t_cond))), no biases,
 *                   ada = linear2(GELU(linear1(t_cond))), t_cond = [cos(delay f), sin(delay f)]
 *                   with f_i = exp(-ln(10000) i / (dim/2)); final RMSNorm; logits = h · E^T
 *                   with E the token embedding (tied output: the same sr_kweight as the lookup)
 *   RMSNorm         k->norm (RMS); the decoder's adaptive scale is its `mul` row
 *   RoPE            rotate-half, inv_i = 1 / theta^(2i/hd) (float32, as transformers), on q
 *                   and k by k->rope_kv, which also writes the rotated k and v
 *   attention       the call's K/V rows in the ring pools (k->rope_kv; position p at ring
 *                   row p % rows), then k->attn: a query at position p reads the key positions
 *                   [max(0, p - window + 1), p + 1), scale hd^-1/2, GQA query head h -> KV head
 *                   h / (Hq / Hkv). A call of n rows of one sequence fits when its first
 *                   query's range is still held after all n rows are written.
 * Linear weights stay in the file's precision (bf16 included): the table's gemm reads them as
 * stored, with the bias and the activation fused where the layer has them.
 */
#include "voxtral.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- forward ----------------------------------------------------------------------------- */

/* Every sequence of b has >= 1 row, rows <= max_rows; pool slots in range (pool may be NULL). */
static sr_status check_batch(const sr_kbatch *b, int max_rows, const sr_kpool *p,
                             const char *what)
{
    if (!b || b->n_seq < 1 || !b->row0 || !b->slot || !b->pos)
        return sr_error(SR_ERR_ARG, "%s: batch missing or empty", what);
    if (b->row0[0] != 0)
        return sr_error(SR_ERR_ARG, "%s: batch row0[0] = %d, not 0", what, b->row0[0]);
    for (int i = 0; i < b->n_seq; i++) {
        if (b->row0[i + 1] <= b->row0[i])
            return sr_error(SR_ERR_ARG, "%s: sequence %d of the batch has no rows", what, i);
        if (p && (b->slot[i] < 0 || b->slot[i] >= p->slots))
            return sr_error(SR_ERR_ARG, "%s: slot %d of sequence %d outside the pool's %d", what,
                            b->slot[i], i, p->slots);
        if (b->pos[i] < 0)
            return sr_error(SR_ERR_ARG, "%s: position %lld of sequence %d", what,
                            (long long)b->pos[i], i);
    }
    if (b->row0[b->n_seq] > max_rows)
        return sr_error(SR_ERR_ARG, "%s: %d rows in one call (scratch holds %d)", what,
                        b->row0[b->n_seq], max_rows);
    return SR_OK;
}

static sr_status check_pool(const sr_kpool *p, int layers, int width, const char *what)
{
    if (!p || p->layers != layers || p->width != width)
        return sr_error(SR_ERR_ARG, "%s: cache pool %s (want %d layers of width %d)", what,
                        p ? "of another shape" : "missing", layers, width);
    return SR_OK;
}

/* Key ranges of a sliding window: row r of sequence s (position p) sees [max(0, p - window + 1),
 * p + 1). Those positions must still be held by a ring of `rows` rows once the sequence's last
 * row is written: its first query's low end >= last position + 1 - rows. */
static sr_status window_ranges(vx_scratch *s, const sr_kbatch *b, int window, int rows,
                               const char *what)
{
    for (int i = 0; i < b->n_seq; i++) {
        int n = b->row0[i + 1] - b->row0[i];
        int64_t p0 = b->pos[i], lo0 = SR_MAX(0, p0 - window + 1);
        if (lo0 < p0 + n - rows)
            return sr_error(SR_ERR_ARG, "%s: %d rows from position %lld with a window of %d "
                            "overrun the cache of %d rows", what, n, (long long)p0, window, rows);
        for (int r = 0; r < n; r++) {
            int64_t p = p0 + r;
            s->lo[b->row0[i] + r] = SR_MAX(0, p - window + 1);
            s->hi[b->row0[i] + r] = p + 1;
        }
    }
    return SR_OK;
}

sr_status vx_stem(const vx_model *w, vx_scratch *s, sr_kpool *c1, sr_kpool *c2,
                  const sr_kbatch *b, const float *mel, float *out)
{
    const sr_kernels *k = s->k;
    int C = w->n_mels, E = w->enc_dim, cw1 = 3 * C, cw2 = 3 * E;
    sr_status st = check_batch(b, s->rows, c1, "voxtral stem");
    if (st || (st = check_batch(b, s->rows, c2, "voxtral stem"))) return st;
    if (c1->dtype != SR_F32 || c1->rows != 2 || c1->width != C || c2->dtype != SR_F32 ||
        c2->rows != 1 || c2->width != E)
        return sr_error(SR_ERR_ARG, "voxtral stem: state pools must be f32 [2][%d] and [1][%d]",
                        C, E);
    int n = b->row0[b->n_seq], ns = b->n_seq;
    const float **rp = s->rp;
    /* conv1 per sequence over [state(2) ; its 2 n_s mel frames]: 2 n_s outputs. Its im2col
     * matrix [2n, 3C] is 6n rows of C, each an input row of state or mel: one gather (one
     * op call for every sequence), one product */
    for (int i = 0; i < ns; i++) {
        int r0 = b->row0[i], m = 2 * (b->row0[i + 1] - r0);
        const float *state = sr_kpool_row_f32(c1, 0, b->slot[i], 0), *x = mel + (size_t)2 * r0 * C;
        for (int j = 0; j < m; j++)
            for (int t = 0; t < 3; t++) {
                int r = j + t; /* row of [state; x] */
                rp[(size_t)(2 * r0 + j) * 3 + t] = r < 2 ? state + (size_t)r * C : x + (size_t)(r - 2) * C;
            }
    }
    if ((st = k->copy_rows(6 * n, C, rp, s->col, C))) return st;
    /* the new state, each sequence's last two mel frames (m >= 2): gathered, then written to
     * the slots as pool positions 0 and 1 */
    for (int i = 0; i < ns; i++) {
        const float *last = mel + (size_t)(2 * b->row0[i + 1] - 2) * C;
        rp[2 * i] = last;
        rp[2 * i + 1] = last + C;
        s->srow[i] = 2 * i;
        s->spos[i] = 0;
    }
    s->srow[ns] = 2 * ns;
    sr_kbatch sb = {.n_seq = ns, .row0 = s->srow, .slot = b->slot, .pos = s->spos};
    if ((st = k->copy_rows(2 * ns, C, rp, s->c1in, C)) || (st = k->kv_write(c1, 0, &sb, s->c1in, C)) ||
        (st = k->gemm(2 * n, s->col, cw1, w->conv1.w, w->conv1.b, SR_ACT_GELU, 1.0f, 0.0f, s->c1, E)))
        return st;
    /* conv2 (stride 2) per sequence over [state(1) ; its 2 n_s conv1 outputs]: n_s outputs,
     * the same way (3n rows of E) */
    for (int i = 0; i < ns; i++) {
        int r0 = b->row0[i], m = b->row0[i + 1] - r0;
        const float *state = sr_kpool_row_f32(c2, 0, b->slot[i], 0), *x = s->c1 + (size_t)2 * r0 * E;
        for (int j = 0; j < m; j++)
            for (int t = 0; t < 3; t++) {
                int r = 2 * j + t; /* row of [state; x] */
                rp[(size_t)(r0 + j) * 3 + t] = r < 1 ? state : x + (size_t)(r - 1) * E;
            }
    }
    if ((st = k->copy_rows(3 * n, E, rp, s->col, E))) return st;
    for (int i = 0; i < ns; i++) { /* the new state: each sequence's last conv1 output */
        rp[i] = s->c1 + (size_t)(2 * b->row0[i + 1] - 1) * E;
        s->srow[i] = i;
    }
    s->srow[ns] = ns;
    if ((st = k->copy_rows(ns, E, rp, s->c2in, E)) || (st = k->kv_write(c2, 0, &sb, s->c2in, E)))
        return st;
    return k->gemm(n, s->col, cw2, w->conv2.w, w->conv2.b, SR_ACT_GELU, 1.0f, 0.0f, out, E);
}

sr_status vx_encode(const vx_model *w, vx_scratch *s, sr_kpool *K, sr_kpool *V,
                    const sr_kbatch *b, float *x)
{
    const sr_kernels *k = s->k;
    int d = w->enc_dim, H = w->enc_heads, hd = w->enc_hd, qw = H * hd, F = w->enc_ffn;
    sr_status st = check_batch(b, s->rows, K, "voxtral encoder");
    if (st || (st = check_pool(K, w->enc_layers, qw, "voxtral encoder")) ||
        (st = check_pool(V, w->enc_layers, qw, "voxtral encoder")) ||
        (st = window_ranges(s, b, w->enc_window, SR_MIN(K->rows, V->rows), "voxtral encoder")))
        return st;
    int n = b->row0[b->n_seq], lq = 3 * qw; /* q | k | v rows of the fused product */
    float *q = s->qkv, *kk = q + qw, *v = kk + qw;
    sr_kattn at = {.n_head = H, .n_kv_head = H, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd),
                   .lo = s->lo, .hi = s->hi};
    for (int l = 0; l < w->enc_layers && !st; l++) {
        const vx_layer *L = &w->enc[l];
        if ((st = k->norm(SR_NORM_RMS, n, d, x, d, L->attn_norm, NULL, w->enc_eps, NULL, 0, s->h,
                          d)) ||
            (st = k->gemm(n, s->h, d, L->qkv.w, L->qkv.b, SR_ACT_NONE, 1.0f, 0.0f, q, lq)) ||
            /* q rotated in place, k rotated into K, v into V: one call */
            (st = k->rope_kv(b, H, H, hd, w->enc_inv, q, lq, kk, lq, v, lq, K, V, l)) ||
            (st = k->attn(&at, b, q, lq, K, V, l, s->a, qw)) ||
            (st = k->gemm(n, s->a, qw, L->o.w, L->o.b, SR_ACT_NONE, 1.0f, 1.0f, x, d)) ||
            (st = k->norm(SR_NORM_RMS, n, d, x, d, L->ffn_norm, NULL, w->enc_eps, NULL, 0, s->h,
                          d)) ||
            (st = k->gemm(n, s->h, d, L->gu.w, NULL, SR_ACT_NONE, 1.0f, 0.0f, s->f, 2 * F)) ||
            (st = k->glu(SR_GLU_SILU, n, F, s->f, 2 * F, s->f + F, 2 * F, s->f, 2 * F)))
            break;
        st = k->gemm(n, s->f, 2 * F, L->down.w, L->down.b, SR_ACT_NONE, 1.0f, 1.0f, x, d);
    }
    if (st) return st;
    return k->norm(SR_NORM_RMS, n, d, x, d, w->enc_norm, NULL, w->enc_eps, NULL, 0, x, d);
}

sr_status vx_adapter(const vx_model *w, vx_scratch *s, const float *enc, int n, float *out)
{
    const sr_kernels *k = s->k;
    int g = n / w->ds, in = w->ds * w->enc_dim; /* [n, enc_dim] is [n / ds, ds enc_dim]: the concat */
    if (n < 0 || n % w->ds || g > s->rows)
        return sr_error(SR_ERR_ARG, "voxtral adapter: %d encoder rows (a multiple of %d, at most "
                        "%d groups)", n, w->ds, s->rows);
    sr_status st = k->gemm(g, enc, in, w->proj1.w, NULL, SR_ACT_GELU, 1.0f, 0.0f, s->f, w->dim);
    if (st) return st;
    return k->gemm(g, s->f, w->dim, w->proj2.w, NULL, SR_ACT_NONE, 1.0f, 0.0f, out, w->dim);
}

sr_status vx_decode(const vx_model *w, vx_scratch *s, sr_kpool *K, sr_kpool *V,
                    const sr_kbatch *b, const float *ada, int ld_ada, float *x, float *logits,
                    int ld_logits)
{
    const sr_kernels *k = s->k;
    int d = w->dim, hd = w->hd, qw = w->n_heads * hd, kw = w->n_kv * hd, F = w->ffn;
    sr_status st = check_batch(b, s->rows, K, "voxtral decoder");
    if (st || (st = check_pool(K, w->n_layers, kw, "voxtral decoder")) ||
        (st = check_pool(V, w->n_layers, kw, "voxtral decoder")) ||
        (st = window_ranges(s, b, w->window, SR_MIN(K->rows, V->rows), "voxtral decoder")))
        return st;
    if (!ada || ld_ada < 0 || (logits && ld_logits < w->vocab))
        return sr_error(SR_ERR_ARG, "voxtral decoder: %s", !ada || ld_ada < 0 ?
                        "adaptive scales missing (ada NULL or ld_ada < 0)" :
                        "ld_logits shorter than the vocabulary");
    int n = b->row0[b->n_seq], lq = qw + 2 * kw; /* q | k | v rows of the fused product */
    float *q = s->qkv, *kk = q + qw, *v = kk + kw;
    sr_kattn at = {.n_head = w->n_heads, .n_kv_head = w->n_kv, .head_dim = hd,
                   .scale = 1.0f / sqrtf((float)hd), .lo = s->lo, .hi = s->hi};
    for (int l = 0; l < w->n_layers && !st; l++) {
        const vx_layer *L = &w->dec[l];
        if ((st = k->norm(SR_NORM_RMS, n, d, x, d, L->attn_norm, NULL, w->eps, NULL, 0, s->h, d)) ||
            (st = k->gemm(n, s->h, d, L->qkv.w, NULL, SR_ACT_NONE, 1.0f, 0.0f, q, lq)) ||
            /* q rotated in place, k rotated into K, v into V: one call */
            (st = k->rope_kv(b, w->n_heads, w->n_kv, hd, w->dec_inv, q, lq, kk, lq, v, lq, K, V, l)) ||
            (st = k->attn(&at, b, q, lq, K, V, l, s->a, qw)) ||
            (st = k->gemm(n, s->a, qw, L->o.w, NULL, SR_ACT_NONE, 1.0f, 1.0f, x, d)) ||
            /* RMSNorm then the row's 1 + ada(t_cond) of this layer */
            (st = k->norm(SR_NORM_RMS, n, d, x, d, L->ffn_norm, NULL, w->eps,
                          ada + (size_t)l * d, ld_ada, s->h, d)) ||
            (st = k->gemm(n, s->h, d, L->gu.w, NULL, SR_ACT_NONE, 1.0f, 0.0f, s->f, 2 * F)) ||
            (st = k->glu(SR_GLU_SILU, n, F, s->f, 2 * F, s->f + F, 2 * F, s->f, 2 * F)))
            break;
        st = k->gemm(n, s->f, 2 * F, L->down.w, NULL, SR_ACT_NONE, 1.0f, 1.0f, x, d);
    }
    if (st || !logits) return st;
    /* the last row of each sequence (gathered by one copy_rows): final norm, then one product
     * for all of them */
    for (int i = 0; i < b->n_seq; i++) s->rp[i] = x + (size_t)(b->row0[i + 1] - 1) * d;
    if ((st = k->copy_rows(b->n_seq, d, s->rp, s->a, d)) ||
        (st = k->norm(SR_NORM_RMS, b->n_seq, d, s->a, d, w->dec_norm, NULL, w->eps, NULL, 0, s->h, d)))
        return st;
    return k->gemm(b->n_seq, s->h, d, w->embed, NULL, SR_ACT_NONE, 1.0f, 0.0f, logits, ld_logits);
}

sr_status vx_ada_scales(const vx_model *w, vx_scratch *s, int delay, float *out)
{
    const sr_kernels *k = s->k;
    int d = w->dim, half = d / 2;
    float *t = sr_malloc((size_t)d * sizeof(float), "voxtral time embedding");
    float *one = sr_malloc((size_t)d * sizeof(float), "voxtral time embedding");
    sr_status st = t && one ? SR_OK : SR_ERR_NOMEM;
    if (!st) {
        float nl = (float)-log((double)w->time_theta);
        for (int i = 0; i < half; i++) {
            float inv = expf(nl * (float)i / (float)half);
            float a = (float)delay * inv;
            t[i] = cosf(a);
            t[i + half] = sinf(a);
        }
        for (int i = 0; i < d; i++) one[i] = 1.0f;
        st = k->upload(s->x, t, (size_t)d * sizeof(float));
    }
    /* out = 1 + linear2(GELU(linear1(t))): the product accumulates onto a row of ones */
    for (int l = 0; l < w->n_layers && !st; l++) {
        float *o = out + (size_t)l * d;
        if (!(st = k->gemm(1, s->x, d, w->dec[l].ada1.w, NULL, SR_ACT_GELU, 1.0f, 0.0f, s->f,
                           VX_ADA_DIM)) &&
            !(st = k->upload(o, one, (size_t)d * sizeof(float))))
            st = k->gemm(1, s->f, VX_ADA_DIM, w->dec[l].ada2.w, NULL, SR_ACT_NONE, 1.0f, 1.0f, o, d);
    }
    free(t);
    free(one);
    return st;
}

/* ---- scratch --------------------------------------------------------------------------------- */

sr_status vx_scratch_init(vx_scratch *s, const sr_kernels *k, const vx_model *w, int rows)
{
    memset(s, 0, sizeof *s);
    s->k = k;
    s->rows = rows;
    size_t width = (size_t)SR_MAX(w->enc_heads * w->enc_hd, w->n_heads * w->hd);
    width = SR_MAX(width, (size_t)SR_MAX(SR_MAX(w->enc_dim, w->dim), VX_ADA_DIM));
    /* the adapter reads ds encoder rows as one: rows / ds groups of ds * enc_dim fit [rows, width] */
    s->width = width;
    s->qkv_width = (size_t)SR_MAX(3 * w->enc_heads * w->enc_hd, (w->n_heads + 2 * w->n_kv) * w->hd);
    /* gate | up of either stack; the adapter's and the time conditioning's rows too */
    s->f_width = SR_MAX((size_t)2 * (size_t)SR_MAX(w->enc_ffn, w->ffn), width);
    size_t r = (size_t)rows, C = (size_t)w->n_mels, E = (size_t)w->enc_dim;
    struct { float **p; size_t n; } bufs[] = {
        {&s->x, r * width}, {&s->h, r * width}, {&s->a, r * width},
        {&s->qkv, r * s->qkv_width}, {&s->f, r * s->f_width},
        {&s->mel, 2 * r * C}, {&s->c1in, 4 * r * C}, {&s->col, 3 * r * SR_MAX(2 * C, E)},
        {&s->c1, 2 * r * E}, {&s->c2in, 3 * r * E},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(bufs); i++) {
        if (!(*bufs[i].p = k->alloc(bufs[i].n * sizeof(float)))) goto fail;
        s->bytes += bufs[i].n * sizeof(float);
    }
    if (!(s->lo = sr_malloc(r * sizeof(int64_t), "voxtral key ranges")) ||
        !(s->hi = sr_malloc(r * sizeof(int64_t), "voxtral key ranges")) ||
        !(s->rp = sr_malloc(6 * r * sizeof *s->rp, "voxtral stem row pointers")) ||
        !(s->srow = sr_malloc((r + 1) * sizeof *s->srow, "voxtral stem state batch")) ||
        !(s->spos = sr_malloc(r * sizeof *s->spos, "voxtral stem state batch")))
        goto fail;
    s->bytes += 3 * r * sizeof(int64_t) + 6 * r * sizeof *s->rp + (r + 1) * sizeof(int);
    return SR_OK;
fail:
    vx_scratch_free(s);
    return sr_error(SR_ERR_NOMEM, "voxtral: out of %s memory for the scratch of %d rows",
                    k->name, rows);
}

void vx_scratch_free(vx_scratch *s)
{
    if (s->k) {
        float *bufs[] = {s->x, s->h, s->a, s->qkv, s->f,
                         s->mel, s->c1in, s->col, s->c1, s->c2in};
        for (size_t i = 0; i < SR_ARRAY_LEN(bufs); i++) s->k->free(bufs[i]);
    }
    free(s->lo);
    free(s->hi);
    free(s->rp);
    free(s->srow);
    free(s->spos);
    memset(s, 0, sizeof *s);
}

size_t vx_scratch_bytes(const vx_scratch *s) { return s->bytes; }

/* ---- loading --------------------------------------------------------------------------------- */

static sr_status cfg_float(const sr_model *m, const char *key, float *out)
{
    sr_status st = sr_cfg_float_def(m, key, NAN, out);
    if (st) return st;
    if (isnan(*out)) return sr_error(SR_ERR_FORMAT, "%s: config.%s: missing", m->path, key);
    return SR_OK;
}

static void vx_free(const sr_kernels *k, vx_model *w)
{
    if (!w) return;
    free(w->enc);
    free(w->dec);
    k->free(w->enc_inv);
    k->free(w->dec_inv);
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

/* A Linear weight [out, in] into the kernel table as the file stores it (vx_load). */
static sr_status mat(sr_model *m, sr_h5 *f, const char *name, int out, int in, vx_lin *L)
{
    return sr_model_weight(m, f, name, SR_AS_STORED, out, in, &L->w);
}

/* A vector (norm gain, bias) as an f32 host tensor. */
static sr_status vec(sr_model *m, sr_h5 *f, const char *name, int n, const float **out)
{
    int64_t shape[1] = {n};
    return sr_model_ftensor(m, f, name, 1, shape, out);
}

static sr_status load_layer(sr_model *m, sr_h5 *f, const vx_model *w, int enc,
                            int l, vx_layer *L)
{
    char n[192];
    const char *pre = enc ? "model.audio_tower.layers" : "model.language_model.layers";
    int d = enc ? w->enc_dim : w->dim, hq = enc ? w->enc_heads : w->n_heads;
    int hk = enc ? w->enc_heads : w->n_kv, hd = enc ? w->enc_hd : w->hd;
    int ffn = enc ? w->enc_ffn : w->ffn;
    sr_status st = SR_OK;
#define NAME(s) (snprintf(n, sizeof n, "%s.%d.%s", pre, l, s), n)
    /* q | k | v and gate | up stacked: one product each (encoder q and v biased) */
    char p[160];
    snprintf(p, sizeof p, "%s.%d", pre, l);
    if (!st) st = sr_model_linear_cat(m, f, p, 3, (const char *[]){"self_attn.q_proj", "self_attn.k_proj",
                                      "self_attn.v_proj"}, (const int[]){hq * hd, hk * hd, hk * hd},
                                      enc ? (const int[]){1, 0, 1} : NULL, SR_AS_STORED, d, &L->qkv.w, &L->qkv.b);
    if (!st) st = mat(m, f, NAME("self_attn.o_proj.weight"), d, hq * hd, &L->o);
    if (!st) st = sr_model_linear_cat(m, f, p, 2, (const char *[]){"mlp.gate_proj", "mlp.up_proj"},
                                      (const int[]){ffn, ffn}, NULL, SR_AS_STORED, d, &L->gu.w, &L->gu.b);
    if (!st) st = mat(m, f, NAME("mlp.down_proj.weight"), d, ffn, &L->down);
    if (enc) {
        if (!st) st = vec(m, f, NAME("self_attn.o_proj.bias"), d, &L->o.b);
        if (!st) st = vec(m, f, NAME("mlp.down_proj.bias"), d, &L->down.b);
        if (!st) st = vec(m, f, NAME("self_attn_layer_norm.weight"), d, &L->attn_norm);
        if (!st) st = vec(m, f, NAME("final_layer_norm.weight"), d, &L->ffn_norm);
    } else {
        if (!st) st = vec(m, f, NAME("input_layernorm.weight"), d, &L->attn_norm);
        if (!st) st = vec(m, f, NAME("post_attention_layernorm.weight"), d, &L->ffn_norm);
        if (!st) st = mat(m, f, NAME("ada_rms_norm.linear1.weight"), VX_ADA_DIM, d, &L->ada1);
        if (!st) st = mat(m, f, NAME("ada_rms_norm.linear2.weight"), d, VX_ADA_DIM, &L->ada2);
    }
#undef NAME
    return st;
}

/* RoPE inverse frequencies [hd / 2] in the table's memory (computed on the host, uploaded). */
static float *inv_freq(const sr_kernels *k, int hd, float theta)
{
    float *inv = sr_malloc((size_t)(hd / 2) * sizeof(float), "voxtral rope frequencies");
    if (!inv) return NULL;
    for (int i = 0; i < hd / 2; i++) /* torch: 1 / theta ** (arange(0, hd, 2).float() / hd) */
        inv[i] = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
    float *d = k->alloc((size_t)(hd / 2) * sizeof(float));
    if (d && k->upload(d, inv, (size_t)(hd / 2) * sizeof(float))) {
        k->free(d);
        d = NULL;
    }
    free(inv);
    return d;
}

sr_status vx_load(sr_model *m, sr_h5 *f)
{
    vx_model *w = sr_calloc(1, sizeof *w, "voxtral model");
    if (!w) return SR_ERR_NOMEM;
    sr_status st = load_config(m, w);
    /* the matrices load as the file stores them (SR_AS_STORED): the converter's f32 or bf16
     * (config.dtype, checked), or what scripts/recast_model.py made of them (int8 with per-row
     * scales: one byte a weight read per product; f16) */
    if (!st) {
        const cJSON *dt = sr_cfg_item(m, "dtype");
        if (!cJSON_IsString(dt) || (strcmp(dt->valuestring, "f32") && strcmp(dt->valuestring, "bf16")))
            st = sr_error(SR_ERR_FORMAT, "%s: config.dtype: expected \"f32\" or \"bf16\"", m->path);
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
        w->enc_inv = inv_freq(m->k, w->enc_hd, w->enc_theta);
        w->dec_inv = inv_freq(m->k, w->hd, w->theta);
        if (!w->enc || !w->dec || !w->enc_inv || !w->dec_inv) st = SR_ERR_NOMEM;
    }
    int E = w->enc_dim;
    /* conv weights [E, C, 3] are the im2col products' [E, C * 3] matrices, kept f32 */
    if (!st) st = sr_model_weight_taps(m, f, "model.audio_tower.embedder.conv1.weight", SR_F32, E, w->n_mels, 3, &w->conv1.w);
    if (!st) st = vec(m, f, "model.audio_tower.embedder.conv1.bias", E, &w->conv1.b);
    if (!st) st = sr_model_weight_taps(m, f, "model.audio_tower.embedder.conv2.weight", SR_F32, E, E, 3, &w->conv2.w);
    if (!st) st = vec(m, f, "model.audio_tower.embedder.conv2.bias", E, &w->conv2.b);
    for (int l = 0; !st && l < w->enc_layers; l++) st = load_layer(m, f, w, 1, l, &w->enc[l]);
    if (!st) st = vec(m, f, "model.audio_tower.norm.weight", E, &w->enc_norm);
    if (!st) st = mat(m, f, "model.multi_modal_projector.linear_1.weight", w->dim, w->ds * E, &w->proj1);
    if (!st) st = mat(m, f, "model.multi_modal_projector.linear_2.weight", w->dim, w->dim, &w->proj2);
    if (!st) st = sr_model_weight(m, f, "model.language_model.embed_tokens.weight", SR_AS_STORED, w->vocab, w->dim, &w->embed);
    for (int l = 0; !st && l < w->n_layers; l++) st = load_layer(m, f, w, 0, l, &w->dec[l]);
    if (!st) st = vec(m, f, "model.language_model.norm.weight", w->dim, &w->dec_norm);
    if (st) {
        vx_free(m->k, w);
        return st;
    }
    m->impl = w;
    return SR_OK;
}

void vx_unload(sr_model *m)
{
    vx_free(m->k, m->impl);
    m->impl = NULL;
}
