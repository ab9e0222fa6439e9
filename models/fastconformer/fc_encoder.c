/*
 * fc_encoder.c — the FastConformer encoder as NeMo's ConformerEncoder computes it at inference,
 * written as calls of the kernel table (kernels/kernels.h); the host only computes the key
 * ranges of the attention masks and drives the loops:
 *
 *   subsampling  causal dw_striding 8x on mel [T, F] as one channel: Conv2d(1 -> C, 3x3,
 *                stride 2) -> ReLU -> 2 x [depthwise Conv2d(C, 3x3, stride 2) -> pointwise
 *                Conv2d(C -> C, 1x1) -> ReLU]; every 3x3 conv is causal (CausalConv2D: 2 zero
 *                rows/columns before, 1 after, on time AND frequency), so each stage maps
 *                L -> L/2 + 1; then (T', C, F') flattened channel-major and Linear(C F' -> d).
 *                The 3x3 convs are k->conv2d_s2 on channel-major planes [C][T][F]; a pointwise
 *                conv is a gemm over positions, so its input planes are transposed to rows
 *                [T F][C] (k->transpose) and the gemm fuses bias
 *                and ReLU; stage 2's output goes back to planes for stage 3's conv, stage 3's
 *                stays as rows [T'][F'][C], which the Linear reads with its columns reordered
 *                at load (fc_load.c) — no flattening copy.
 *   x-scaling    x * sqrt(d) when configured (NeMo does it inside the positional encoding)
 *   layer        r = x + 1/2 FF1(LN x); r += MHSA(LN r); r += Conv(LN r); r += 1/2 FF2(LN r);
 *                out = LN r.   FF = Linear(d -> d_ff), Swish, Linear(d_ff -> d); each residual
 *                is the last gemm's beta = 1 (alpha 1/2 for the FFs)
 *   MHSA         Transformer-XL relative positions: the layer's K / V projections of every row
 *                are written to its cache pools (k->kv_write2, ring row = absolute position), then
 *                k->attn over the pools: query at position p, key at position j,
 *                scores = [(q + u) . k_j + (q + v) . P(p - j)] / sqrt(dk) with
 *                P(n) = linear_pos(sinusoid(n)) (NeMo's rel_shift picks exactly that position
 *                for every pair), softmax over the key range [lo, hi) of the row.
 *   masks        as key ranges in absolute positions (fc_ranges): chunked_limited [L, R]:
 *                chunk = R + 1, query p sees key j iff 0 <= p/chunk - j/chunk <= L/chunk;
 *                regular: p - L <= j <= p + R; banded local attention (rel_pos_local_attn):
 *                p - W0 <= j <= p + W1; keys are only the sequence's positions >= 0 that its
 *                pool holds up to its last row (an unfilled cache is never in range: NeMo's
 *                valid-length masking, no warm-up). Streams step on chunk boundaries, so the
 *                chunk index of a position is that of NeMo's cache-relative index.
 *   Conv         pointwise Conv1d(d -> 2d) -> GLU -> causal depthwise Conv1d(k) over
 *                [conv state ; input] (k->conv_dw, the state a pool) -> LayerNorm (or
 *                BatchNorm with running stats) -> Swish -> pointwise Conv1d(d -> d)
 *
 * Offline, the K / V pool of a layer holds the whole utterance (O(T d), as the [T, d] rows);
 * k->attn reads only each row's key range, so full attention costs time, not a T x T matrix.
 * fc_layers may record a round's layers as one (fc_seqs.rec: one CUDA graph with
 * SRKIT_CUDA_GRAPH=1) when nothing in them is uploaded (the model's relative-position table).
 *
 * Streams' batch contexts hold pools (one slot per stream: fc_seqs, sr_kbatch) of the last L
 * positions plus the step's own rows for every layer, in f32 or f16 (stream.cache_dtype): keys
 * and values are rounded once, when written; one call steps the rows of all of a batch's
 * streams.
 */
#include "fc.h"

#include <math.h>
#include <string.h>

int fc_subsample_len(int T)
{
    for (int i = 0; i < 3; i++) T = T / 2 + 1;
    return T;
}

size_t fc_subsample_scratch(const fc_model *w, int T)
{
    /* planes of stage 1 and of stage 2; every later buffer fits in one of them */
    int C = w->sub_ch, F0 = w->n_mels;
    int T1 = T / 2 + 1, F1 = F0 / 2 + 1, T2 = T1 / 2 + 1, F2 = F1 / 2 + 1;
    return (size_t)C * T1 * F1 + (size_t)C * T2 * F2;
}

sr_status fc_gemm_rows(const sr_kernels *k, int M, const float *x, int ldx, const sr_kweight *W,
                           const float *bias, sr_act act, float alpha, float beta, float *y, int ldy)
{
    sr_status st = SR_OK;
    for (int r = 0; r < M && !st; r += FC_GEMM_ROWS)
        st = k->gemm(SR_MIN(FC_GEMM_ROWS, M - r), x + (size_t)r * ldx, ldx, W, bias, act, alpha, beta,
                     y + (size_t)r * ldy, ldy);
    return st;
}

/* planes [C][P] -> rows [P][C] and back: one transpose each (a copy per channel was C launches
 * per stream and chunk on a device) */
static sr_status to_rows(const sr_kernels *k, int n, int C, int P, const float *planes, float *rows)
{
    return k->transpose(n, C, P, planes, P, rows, C);
}

static sr_status to_planes(const sr_kernels *k, int n, int C, int P, const float *rows, float *planes)
{
    return k->transpose(n, P, C, rows, C, planes, P);
}

sr_status fc_subsample(const fc_model *w, const float *mel, int T, float *x, int *n_out)
{
    /* In pieces of FC_SUB_PIECE output rows, as the cache-aware steps cut the mel: the first
     * piece is 1 + 8P frames, each later one the 8P next frames after the 9 before them, whose
     * first 2 output rows (which saw zero padding instead of those frames) are dropped. Pieces
     * start at mel frames 8Pj - 8 (even at every stage) and every stage sees odd lengths
     * except in the last piece, whose end is the true end: the rows are those of one pass over
     * the whole mel (every op is row-independent: bit for bit), with the scratch of one piece
     * (a 17-minute input at 256 channels would otherwise need GBs of conv planes). */
    const sr_kernels *k = w->k;
    const int P = FC_SUB_PIECE, first = 1 + 8 * P, F = w->n_mels;
    int nin = T <= first ? T : 9 + 8 * P;
    float *a = k->alloc(fc_subsample_scratch(w, nin) * sizeof(float));
    float *in = k->alloc((size_t)nin * F * sizeof(float));
    float *rows = T <= first ? NULL : k->alloc((size_t)(P + 2) * w->d * sizeof(float));
    *n_out = 0;
    if (!a || !in || (T > first && !rows)) {
        k->free(a);
        k->free(in);
        k->free(rows);
        return sr_error(SR_ERR_NOMEM, "fastconformer: subsampling scratch for %d mel frames", nin);
    }
    int n = 0, r = 0, n1 = SR_MIN(T, first);
    sr_status st = k->upload(in, mel, (size_t)n1 * F * sizeof(float));
    if (!st) st = fc_subsample_into(w, 1, in, n1, x, &n, a);
    for (int pos = first; !st && pos < T;) {
        int nnew = SR_MIN(8 * P, T - pos);
        if ((st = k->upload(in, mel + (size_t)(pos - 9) * F, (size_t)(9 + nnew) * F * sizeof(float))) ||
            (st = fc_subsample_into(w, 1, in, 9 + nnew, rows, &r, a)) ||
            (st = k->copy2d(r - 2, w->d, rows + (size_t)2 * w->d, w->d, x + (size_t)n * w->d, w->d)))
            break;
        n += r - 2;
        pos += nnew;
    }
    k->free(a);
    k->free(in);
    k->free(rows);
    *n_out = st ? 0 : n;
    return st;
}

sr_status fc_subsample_into(const fc_model *w, int n, const float *mel, int T, float *x,
                            int *n_out, float *scratch)
{
    const sr_kernels *k = w->k;
    int C = w->sub_ch, F0 = w->n_mels;
    int T1 = T / 2 + 1, F1 = F0 / 2 + 1, T2 = T1 / 2 + 1, F2 = F1 / 2 + 1, T3 = T2 / 2 + 1,
        F3 = F2 / 2 + 1;
    size_t P1 = (size_t)T1 * F1, P2 = (size_t)T2 * F2, P3 = (size_t)T3 * F3;
    /* s1: stage-1 planes, then stage 2's rows, its planes, stage 3's rows; a: the rest (each
     * of them n images back to back) */
    float *s1 = scratch, *a = s1 + (size_t)n * C * P1;
    sr_status st;
    *n_out = 0;
    if (T < 1 || n < 1) return sr_error(SR_ERR_ARG, "fastconformer: subsampling of %d x %d mel frames", n, T);
    if ((st = k->conv2d_s2(n, C, T, F0, mel, (size_t)T * F0, 0, w->c0_w, w->c0_b, 1, s1)) ||
        /* stage 2: depthwise 3x3, pointwise as a gemm over the n T2 F2 positions, ReLU */
        (st = k->conv2d_s2(n, C, T1, F1, s1, (size_t)C * P1, P1, w->dw1_w, w->dw1_b, 0, a)) ||
        (st = to_rows(k, n, C, (int)P2, a, s1)) ||
        (st = fc_gemm_rows(k, n * (int)P2, s1, C, w->sub_pw1.w, w->sub_pw1.b, SR_ACT_RELU, 1.0f, 0.0f, a, C)) ||
        (st = to_planes(k, n, C, (int)P2, a, s1)) ||
        /* stage 3, its output left as rows [n][T3][F3][C] */
        (st = k->conv2d_s2(n, C, T2, F2, s1, (size_t)C * P2, P2, w->dw2_w, w->dw2_b, 0, a)) ||
        (st = to_rows(k, n, C, (int)P3, a, s1)) ||
        (st = fc_gemm_rows(k, n * (int)P3, s1, C, w->sub_pw2.w, w->sub_pw2.b, SR_ACT_RELU, 1.0f, 0.0f, a, C)) ||
        /* Linear(C F3 -> d) over the rows [n T3][F3 C] (columns reordered at load) */
        (st = fc_gemm_rows(k, n * T3, a, F3 * C, w->sub_out.w, w->sub_out.b, SR_ACT_NONE, 1.0f, 0.0f, x, w->d)))
        return st;
    *n_out = T3;
    return SR_OK;
}

/* ---- workspace and masks ---- */

sr_status fc_work_init(fc_work *ws, const fc_model *w, int rows, int npos, int grows)
{
    const sr_kernels *k = w->k;
    memset(ws, 0, sizeof *ws);
    ws->rows = rows;
    ws->npos = npos;
    ws->grows = grows;
    size_t r = (size_t)rows, d = (size_t)w->d, np = (size_t)npos, g = (size_t)grows;
    size_t bigw = (size_t)SR_MAX(w->d_ff, 3 * w->d);
    size_t tab = r * d * 3 + r * bigw + np * d + 2 * g * d;
    /* host int64: lo, hi [r + 1] each, glo, ghi [g + 1] each, the staging batch's positions
     * [r + 1] and row starts ([r + 1] ints, in r + 1 int64 slots) */
    size_t host = 4 * (r + 1) + 2 * (g + 1);
    float *a = k->alloc(tab * sizeof(float));
    ws->sin = np ? sr_malloc(np * d * sizeof(float), "fastconformer sinusoids") : NULL;
    ws->lo = sr_malloc(host * sizeof(int64_t), "fastconformer key ranges");
    if (!a || (np && !ws->sin) || !ws->lo) {
        if (a) k->free(a);
        free(ws->sin);
        free(ws->lo);
        memset(ws, 0, sizeof *ws);
        return sr_error(SR_ERR_NOMEM, "fastconformer: encoder workspace of %d rows", rows);
    }
    ws->hi = ws->lo + r + 1;
    ws->glo = ws->hi + r + 1;
    ws->ghi = ws->glo + g + 1;
    ws->xn = a; a += r * d;
    ws->t1 = a; a += r * d;
    ws->att = a; a += r * d;
    ws->big = a; a += r * bigw;
    ws->pos = np ? a : NULL; a += np * d;
    ws->gq = g ? a : NULL; a += g * d;
    ws->gout = g ? a : NULL;
    if (g) k->zero(ws->gq, g * d * sizeof(float)); /* zero queries: every score 0, p = 1 */
    ws->bytes = tab * sizeof(float) + np * d * sizeof(float) + host * sizeof(int64_t);
    return SR_OK;
}

void fc_work_free(const fc_model *w, fc_work *ws)
{
    if (ws->xn) w->k->free(ws->xn);
    free(ws->sin);
    free(ws->lo);
    memset(ws, 0, sizeof *ws);
}

/* Key range [*lo, *hi) of the query at position p under mask mk, within the keys [kmin, kmax)
 * the sequence has. */
static void key_range(const fc_mask *mk, int64_t p, int64_t kmin, int64_t kmax, int64_t *lo,
                      int64_t *hi)
{
    int64_t a = kmin, b = kmax;
    if (mk->band || mk->style == FC_STYLE_REGULAR) {
        if (mk->left >= 0) a = SR_MAX(a, p - mk->left);
        if (mk->right >= 0) b = SR_MIN(b, p + mk->right + 1);
    } else if (mk->right < 0) {
        if (mk->left >= 0) a = SR_MAX(a, p - mk->left);
    } else {
        /* chunked_limited: chunks of right + 1, left / chunk chunks back (NeMo: 10000 when
         * unlimited) */
        int64_t chunk = mk->right + 1, lc = mk->left >= 0 ? mk->left / chunk : 10000;
        int64_t c0 = p / chunk * chunk;
        a = SR_MAX(a, c0 - lc * chunk);
        b = SR_MIN(b, c0 + chunk);
    }
    *lo = a;
    *hi = SR_MAX(a, b);
}

sr_status fc_ranges(const fc_model *w, fc_work *ws, const fc_seqs *sq)
{
    (void)w;
    const sr_kbatch *b = sq->b;
    int64_t dmin = INT64_MAX, dmax = INT64_MIN;
    for (int s = 0; s < b->n_seq; s++) {
        int r0 = b->row0[s], n = b->row0[s + 1] - r0;
        if (r0 + n > ws->rows)
            return sr_error(SR_ERR_ARG, "fastconformer: %d rows exceed the workspace (%d)", r0 + n, ws->rows);
        int64_t p0 = b->pos[s], kmax = p0 + n, kmin = SR_MAX(0, kmax - (sq->kw ? sq->kw : sq->kc)->rows);
        if (p0 < 0) return sr_error(SR_ERR_ARG, "fastconformer: sequence %d at position %lld", s, (long long)p0);
        for (int i = 0; i < n; i++) {
            int64_t p = p0 + i, *lo = ws->lo + r0 + i, *hi = ws->hi + r0 + i;
            key_range(&sq->mk[s], p, kmin, kmax, lo, hi);
            if (*hi > *lo) {
                dmax = SR_MAX(dmax, p - *lo);
                dmin = SR_MIN(dmin, p - (*hi - 1));
            }
        }
    }
    if (dmin > dmax) dmin = dmax = 0;
    if (dmax > INT32_MAX || dmin < -INT32_MAX)
        return sr_error(SR_ERR_ARG, "fastconformer: relative positions %lld .. %lld", (long long)dmin, (long long)dmax);
    ws->dmin = (int)dmin;
    ws->dmax = (int)dmax;
    return SR_OK;
}

/* ---- layers ---- */

static sr_status feed_forward(const fc_model *w, fc_work *ws, float *x, int M, fc_ln ln, fc_lin a,
                              fc_lin b)
{
    const sr_kernels *k = w->k;
    int d = w->d;
    sr_status st;
    if ((st = k->norm(SR_NORM_LAYER, M, d, x, d, ln.g, ln.b, FC_LN_EPS, NULL, 0, ws->xn, d)) ||
        (st = fc_gemm_rows(k, M, ws->xn, d, a.w, a.b, SR_ACT_SILU, 1.0f, 0.0f, ws->big, w->d_ff)))
        return st;
    return fc_gemm_rows(k, M, ws->big, w->d_ff, b.w, b.b, SR_ACT_NONE, 0.5f, 1.0f, x, d);
}

/* Staging (fc_seqs.kw): the cached positions the rows of each sequence reach, from its lowest
 * key to its first row, are widened from the stores kc / vc (layer l) into kw / vw. The
 * widening is an attention of zero queries over one key each: every score is 0 and its weight
 * exactly 1, so each output row is the stored row widened exactly (kernels.h: the output is
 * fma(e, v, 0) * (1 / sum) with e = sum = 1). */
static sr_status stage_cached(const fc_model *w, fc_work *ws, const fc_seqs *sq, int l)
{
    const sr_kernels *k = w->k;
    const sr_kbatch *b = sq->b;
    int d = w->d, n = 0;
    if (b->n_seq > ws->rows)
        return sr_error(SR_ERR_ARG, "fastconformer: %d sequences exceed the workspace (%d)", b->n_seq, ws->rows);
    /* the gather batch: sequence s, rows [grow0[s], grow0[s + 1]) at positions gpos[s] .. */
    int64_t *gpos = ws->ghi + ws->grows + 1;
    int *grow0 = (int *)(gpos + ws->rows + 1);
    grow0[0] = 0;
    for (int s = 0; s < b->n_seq; s++) {
        int64_t p0 = b->pos[s], need = p0;
        for (int r = b->row0[s]; r < b->row0[s + 1]; r++)
            if (ws->hi[r] > ws->lo[r]) need = SR_MIN(need, ws->lo[r]);
        int c = (int)(p0 - need);
        if (c > sq->kc->rows || n + c > ws->grows)
            return sr_error(SR_ERR_ARG, "fastconformer: %d cached positions to stage (store %d rows, workspace %d)",
                            n + c, sq->kc->rows, ws->grows);
        gpos[s] = need;
        for (int i = 0; i < c; i++) {
            ws->glo[n + i] = need + i;
            ws->ghi[n + i] = need + i + 1;
        }
        n += c;
        grow0[s + 1] = n;
    }
    if (n == 0) return SR_OK;
    sr_kbatch gb = {.n_seq = b->n_seq, .row0 = grow0, .slot = b->slot, .pos = gpos};
    sr_kattn ga = {.n_head = 1, .n_kv_head = 1, .head_dim = d, .scale = 1.0f, .lo = ws->glo, .hi = ws->ghi};
    sr_status st;
    if ((st = k->attn(&ga, &gb, ws->gq, d, sq->kc, sq->kc, l, ws->gout, d)) ||
        (st = k->kv_write(sq->kw, 0, &gb, ws->gout, d)) ||
        (st = k->attn(&ga, &gb, ws->gq, d, sq->vc, sq->vc, l, ws->gout, d)))
        return st;
    return k->kv_write(sq->vw, 0, &gb, ws->gout, d);
}

/* The layers' ops over the M rows of sq (fc_layers has checked the pools and set the ranges;
 * table: the relative positions come from the model's table, else from ws->sin, uploaded and
 * projected per layer). */
static sr_status layers_run(const fc_model *w, fc_work *ws, float *x, const fc_seqs *sq, int table,
                            int npos)
{
    const sr_kernels *k = w->k;
    const sr_kbatch *b = sq->b;
    int M = b->row0[b->n_seq], d = w->d, K = w->kernel;
    int staged = sq->kw != NULL;
    sr_kpool *ka = staged ? sq->kw : sq->kc, *va = staged ? sq->vw : sq->vc; /* attended */
    sr_status st;
    sr_kattn at = {.n_head = w->n_heads, .n_kv_head = w->n_heads, .head_dim = w->dk,
                   .scale = 1.0f / sqrtf((float)w->dk), .lo = ws->lo, .hi = ws->hi};
    /* the new rows' queries, keys and values: ws->big as [M][Q d | K d | V d] (one product;
     * free during attention) */
    float *qn = ws->big, *kn = qn + d, *vn = kn + d;
    const int lq = 3 * d;
    for (int l = 0; l < w->n_layers; l++) {
        const fc_layer *L = &w->L[l];
        /* attended layer: streams' pools hold every layer, offline ones one at a time, working
         * pools one */
        int kl = staged || sq->kc->layers == 1 ? 0 : l;
        if ((st = feed_forward(w, ws, x, M, L->ff1_ln, L->ff1a, L->ff1b))) return st;
        /* self-attention: K / V of the new rows into the pools, then the rows over their ranges */
        if ((st = k->norm(SR_NORM_LAYER, M, d, x, d, L->att_ln.g, L->att_ln.b, FC_LN_EPS, NULL, 0, ws->xn, d)))
            return st;
        if (table) {
            at.rel = w->pos_tab + (size_t)l * w->pos_rows * d;
            at.rel_max = w->pos_pos;
            at.rel_min = -w->pos_neg;
        } else {
            /* the sinusoids go through ws->big before it holds K / V */
            if ((st = k->upload(ws->big, ws->sin, (size_t)npos * d * sizeof(float))) ||
                (st = fc_gemm_rows(k, npos, ws->big, d, L->pos_w, NULL, SR_ACT_NONE, 1.0f, 0.0f, ws->pos, d)))
                return st;
            at.rel = ws->pos;
            at.rel_max = ws->dmax;
            at.rel_min = ws->dmin;
        }
        at.pos_u = L->pos_u;
        at.pos_v = L->pos_v;
        if ((st = fc_gemm_rows(k, M, ws->xn, d, L->qkv.w, L->qkv.b, SR_ACT_NONE, 1.0f, 0.0f, qn, lq)) ||
            (staged && (st = stage_cached(w, ws, sq, l))) ||
            (st = k->kv_write2(ka, va, kl, b, kn, lq, vn, lq)) ||
            (st = k->attn(&at, b, qn, lq, ka, va, kl, ws->att, d)) ||
            /* staged: the new rows are stored (rounded) once every row has attended */
            (staged && (st = k->kv_write2(sq->kc, sq->vc, l, b, kn, lq, vn, lq))) ||
            (st = fc_gemm_rows(k, M, ws->att, d, L->o.w, L->o.b, SR_ACT_NONE, 1.0f, 1.0f, x, d)))
            return st;
        /* convolution module */
        if ((st = k->norm(SR_NORM_LAYER, M, d, x, d, L->conv_ln.g, L->conv_ln.b, FC_LN_EPS, NULL, 0, ws->xn, d)) ||
            (st = fc_gemm_rows(k, M, ws->xn, d, L->pw1.w, L->pw1.b, SR_ACT_NONE, 1.0f, 0.0f, ws->big, 2 * d)) ||
            (st = k->glu(SR_GLU_SIGMOID, M, d, ws->big, 2 * d, ws->big + d, 2 * d, ws->xn, d)) ||
            (st = k->conv_dw(b, d, K, ws->xn, d, L->dw_w, L->dw_b, sq->conv, l, ws->t1, d)))
            return st;
        if (L->bn_mean)
            st = k->batchnorm(M, d, ws->t1, d, L->bn_mean, L->bn_var, L->cnorm.g, L->cnorm.b, FC_LN_EPS, ws->t1, d);
        else
            st = k->norm(SR_NORM_LAYER, M, d, ws->t1, d, L->cnorm.g, L->cnorm.b, FC_LN_EPS, NULL, 0, ws->t1, d);
        if (st || (st = k->act(SR_ACT_SILU, (size_t)M * d, ws->t1, ws->t1)) ||
            (st = fc_gemm_rows(k, M, ws->t1, d, L->pw2.w, L->pw2.b, SR_ACT_NONE, 1.0f, 1.0f, x, d)) ||
            (st = feed_forward(w, ws, x, M, L->ff2_ln, L->ff2a, L->ff2b)) ||
            (st = k->norm(SR_NORM_LAYER, M, d, x, d, L->out_ln.g, L->out_ln.b, FC_LN_EPS, NULL, 0, x, d)))
            return st;
    }
    return SR_OK;
}

sr_status fc_layers(const fc_model *w, fc_work *ws, float *x, const fc_seqs *sq)
{
    const sr_kbatch *b = sq->b;
    int M = b->row0[b->n_seq], d = w->d;
    if (M == 0) return SR_OK;
    const sr_kpool *ka = sq->kw ? sq->kw : sq->kc, *va = sq->kw ? sq->vw : sq->vc; /* attended */
    if (ka->width != d || va->width != d || ka->rows != va->rows || sq->kc->width != d ||
        sq->vc->width != d || sq->kc->rows != sq->vc->rows)
        return sr_error(SR_ERR_ARG, "fastconformer: K / V pools of width %d / %d, %d / %d rows (d = %d)",
                        ka->width, va->width, ka->rows, va->rows, d);
    sr_status st = fc_ranges(w, ws, sq);
    if (st) return st;
    /* relative positions: the model's table when it spans the distances (streams), else the
     * rows dmax .. dmin projected per layer into the workspace */
    int table = ws->dmax <= w->pos_pos && -ws->dmin <= w->pos_neg;
    int npos = ws->dmax - ws->dmin + 1;
    size_t bigw = (size_t)SR_MAX(w->d_ff, 3 * d);
    if (!table) {
        if (npos > ws->npos || (size_t)npos * d > (size_t)ws->rows * bigw)
            return sr_error(SR_ERR_ARG, "fastconformer: %d relative positions exceed the workspace (%d)", npos, ws->npos);
        fc_sinusoids(d, ws->dmax, npos, ws->sin);
    }
    /* a recording when asked for and nothing in the layers is uploaded (the model's table) */
    if (!sq->rec || !table) return layers_run(w, ws, x, sq, table, npos);
    if ((st = sr_kgraph_begin(w->k, sq->rec))) return st;
    return sr_kgraph_end(w->k, *sq->rec, layers_run(w, ws, x, sq, table, npos));
}

sr_status fc_encode_offline(const fc_model *w, const float *mel, int T, const int ctx[2],
                            int local, float **out, int *n_out, size_t *work_bytes)
{
    const sr_kernels *k = w->k;
    *out = NULL;
    *n_out = 0;
    if (T <= 0) return sr_error(SR_ERR_ARG, "fastconformer: offline encoder over %d mel frames", T);
    int Tp = fc_subsample_len(T), n = 0, d = w->d;
    float *x = k->alloc((size_t)Tp * d * sizeof(float));
    if (!x) return sr_error(SR_ERR_NOMEM, "fastconformer: encoder output of %d rows", Tp);
    sr_kpool *kc = NULL, *vc = NULL;
    fc_work ws = {0};
    sr_status st = fc_subsample(w, mel, T, x, &n);
    if (!st) st = k->scale(n, d, w->xscale, x, d);
    if (!st) st = sr_kpool_create(k, SR_F32, 1, 1, n, d, &kc);
    if (!st) st = sr_kpool_create(k, SR_F32, 1, 1, n, d, &vc);
    fc_mask mk = {.left = ctx[0], .right = ctx[1], .style = w->att_style, .band = local};
    int row0[2] = {0, n}, slot[1] = {0};
    int64_t pos[1] = {0};
    sr_kbatch b = {.n_seq = 1, .row0 = row0, .slot = slot, .pos = pos};
    fc_seqs sq = {.b = &b, .mk = &mk, .kc = kc, .vc = vc};
    /* the relative positions the masks reach decide whether the layers need their own rows */
    if (!st) st = fc_work_init(&ws, w, n, 0, 0);
    if (!st) st = fc_ranges(w, &ws, &sq);
    if (!st && (ws.dmax > w->pos_pos || -ws.dmin > w->pos_neg)) {
        int npos = ws.dmax - ws.dmin + 1;
        fc_work_free(w, &ws);
        st = fc_work_init(&ws, w, n, npos, 0);
    }
    if (!st) st = fc_layers(w, &ws, x, &sq);
    if (work_bytes) *work_bytes = ws.bytes + (kc ? kc->bytes : 0) + (vc ? vc->bytes : 0) + (size_t)n * d * sizeof(float);
    fc_work_free(w, &ws);
    sr_kpool_free(k, kc);
    sr_kpool_free(k, vc);
    if (st) {
        k->free(x);
        return st;
    }
    *out = x;
    *n_out = n;
    return SR_OK;
}
