/*
 * wh_encoder.c — Whisper's audio encoder: the convolutional stem (whole-signal and streaming) and
 * the pre-LayerNorm transformer blocks with a per-layer K/V cache.
 *
 *   stem     conv1 (kernel 3, padding 1) + GELU, then conv2 (kernel 3, stride 2, padding 1) +
 *            GELU, each as one GEMM over an im2col matrix: out[u] = W · [in[s u - 1], in[s u],
 *            in[s u + 1]] + b with zero rows outside the signal. L mel frames give ceil(L / 2)
 *            encoder frames.
 *   block    x += Attn(LN(x)); x += MLP(LN(x)), MLP = Linear(4d) -> GELU -> Linear(d);
 *            after the last block ln_post.
 *
 * Streaming stem: conv1 output t reads mel t + 1 and conv2 output u reads conv1 2u + 1, so each
 * conv holds back its newest input until the right neighbour arrives (or, at the end of the
 * signal, uses the zero padding the whole-signal stem uses). The held rows are the only state:
 * at most two mel frames and two conv1 rows.
 *
 * Cached encoder: new frames at positions p0.. compute Q/K/V for themselves only, write K and
 * V into the layer's cache pool and attend over [0, p0 + n) (or a per-row limit, which the
 * one-pass block-causal reference of the tests uses). One pass covers the new frames of several
 * streams (an sr_kbatch, each stream in its own pool slot): one gemm per Linear over all rows,
 * one k->attn per layer. Every step is an op of the kernel table.
 */
#include "whisper.h"

#include <string.h>

/* Input row t of a stream's conv: zero padding outside [0, total) (total < 0: not known, the
 * right edge is not reached), a new row (t >= first_new: new + (t - first_new) rows) or a
 * carried one (its pool row; it must be one of the two carried). */
static const float *conv_src(const wh_scratch *s, int64_t t, int64_t total, int64_t first_new,
                             const float *new_rows, int cin, const sr_kpool *carried, int slot,
                             sr_status *st)
{
    if (t < 0 || (total >= 0 && t >= total)) return s->zero;
    if (t >= first_new) return new_rows + (size_t)(t - first_new) * cin;
    if (t < first_new - 2) {
        *st = sr_error(SR_ERR_ARG, "whisper stem: input row %lld is no longer held", (long long)t);
        return s->zero;
    }
    return sr_kpool_row_f32(carried, 0, slot, t);
}

/* A kernel-3, padding-1 conv (GELU applied) over the rows of `count` streams: output rows
 * [o0[i], o1[i]) of stream i go to out stream after stream. The input matrix (each output row's
 * three input rows side by side, matching the tap-major weight) is gathered by one copy_rows
 * per group of rows that fits the scratch, then one gemm; input rows from conv_src. */
typedef struct {
    int stride, cin;
    const sr_kpool *carried;    /* the rows carried from earlier feeds (NULL: none) */
    const float *new_rows;      /* every stream's new input rows, stream after stream */
    const int64_t *new_off;     /* [count] stream i's first new row in new_rows */
    const int64_t *first_new;   /* [count] its position */
    const int64_t *total;       /* [count] its input length, -1: not known */
    const int64_t *o0, *o1;     /* [count] its output rows */
    wh_lin L;
} stem_conv;

static sr_status conv_streams(const wh_model *w, const wh_scratch *s, const stem_conv *cv,
                              wh_stem_stream *const *st, int count, float *out)
{
    const sr_kernels *k = w->k;
    sr_status e = SR_OK;
    int r = 0; /* output rows gathered, not yet multiplied */
    for (int i = 0; i <= count && !e; i++) {
        int rows_i = i < count ? (int)(cv->o1[i] - cv->o0[i]) : 0;
        if (i < count && rows_i > s->col_rows)
            return sr_error(SR_ERR_ARG, "whisper stem: %d output rows exceed the scratch (%d)",
                            rows_i, s->col_rows);
        if (r && (i == count || r + rows_i > s->col_rows)) { /* the group: one gather, one gemm */
            if ((e = k->copy_rows(3 * r, cv->cin, s->cp, s->col, cv->cin)) ||
                (e = wh_linear(k, s->col, r, cv->L, SR_ACT_GELU, 0.0f, out)))
                return e;
            out += (size_t)r * w->d;
            r = 0;
        }
        if (i == count) break;
        const float *nr = cv->new_rows + (size_t)cv->new_off[i] * cv->cin;
        for (int64_t o = cv->o0[i]; o < cv->o1[i] && !e; o++, r++)
            for (int kk = 0; kk < 3; kk++)
                s->cp[3 * r + kk] = conv_src(s, cv->stride * o - 1 + kk, cv->total[i],
                                             cv->first_new[i], nr, cv->cin, cv->carried,
                                             st[i]->slot, &e);
    }
    return e;
}

sr_status wh_stem(const wh_model *w, wh_scratch *s, const float *mel, int L, float *x)
{
    if (L <= 0) return SR_OK;
    if ((L + 1) / 2 > s->rows)
        return sr_error(SR_ERR_ARG, "whisper stem: %d mel frames exceed the scratch (%d rows)", L,
                        2 * s->rows);
    /* the whole signal as one stream's new rows: nothing carried, both edges zero-padded */
    wh_stem_stream one = {0}, *op = &one;
    const int64_t zero = 0, total = L, n1 = L, n2 = (L + 1) / 2;
    float *c1 = s->mlp; /* [L, d] fits in [rows, 4d] since L <= 2 rows */
    stem_conv cv1 = {.stride = 1, .cin = w->n_mels, .new_rows = mel, .new_off = &zero,
                     .first_new = &zero, .total = &total, .o0 = &zero, .o1 = &n1, .L = w->conv1};
    stem_conv cv2 = {.stride = 2, .cin = w->d, .new_rows = c1, .new_off = &zero,
                     .first_new = &zero, .total = &total, .o0 = &zero, .o1 = &n2, .L = w->conv2};
    sr_status st = conv_streams(w, s, &cv1, &op, 1, c1);
    return st ? st : conv_streams(w, s, &cv2, &op, 1, x);
}

/* int64 entries per stream of wh_stem_ctx.off: each stream's new mel offset, first new mel,
 * output rows lo / hi, input total, conv1 offset and first, carried range */
#define WH_STEM_COLS 9

sr_status wh_stem_ctx_init(wh_stem_ctx *c, const wh_model *w, int slots, int max_in)
{
    memset(c, 0, sizeof *c);
    const sr_kernels *k = w->k;
    size_t S = (size_t)slots, C = (size_t)w->n_mels, d = (size_t)w->d, wmax = C > d ? C : d;
    c->slots = slots;
    c->max_in = max_in;
    sr_status st = sr_kpool_create(k, SR_F32, 1, slots, 2, w->n_mels, &c->mel);
    if (!st) st = sr_kpool_create(k, SR_F32, 1, slots, 2, w->d, &c->c1);
    if (st) {
        wh_stem_ctx_free(c, w);
        return st;
    }
    c->nm = k->alloc(S * (size_t)max_in * C * sizeof(float));
    c->c1new = k->alloc(S * (size_t)(max_in + 1) * d * sizeof(float));
    c->carry = k->alloc(2 * S * wmax * sizeof(float));
    c->hnm = sr_malloc(S * (size_t)max_in * C * sizeof(float), "whisper stem mel staging");
    c->rp = sr_malloc(2 * S * sizeof *c->rp, "whisper stem row pointers");
    c->row0 = sr_malloc((S + 1) * sizeof *c->row0, "whisper stem batch");
    c->slot = sr_malloc(S * sizeof *c->slot, "whisper stem batch");
    c->pos = sr_malloc(S * sizeof *c->pos, "whisper stem batch");
    c->off = sr_malloc(WH_STEM_COLS * S * sizeof *c->off, "whisper stem batch");
    if (!c->nm || !c->c1new || !c->carry || !c->hnm || !c->rp || !c->row0 || !c->slot ||
        !c->pos || !c->off) {
        wh_stem_ctx_free(c, w);
        return sr_error(SR_ERR_NOMEM, "whisper stem of %d streams", slots);
    }
    return SR_OK;
}

void wh_stem_ctx_free(wh_stem_ctx *c, const wh_model *w)
{
    const sr_kernels *k = w->k;
    sr_kpool_free(k, c->mel);
    sr_kpool_free(k, c->c1);
    k->free(c->nm);
    k->free(c->c1new);
    k->free(c->carry);
    free(c->hnm);
    free(c->rp);
    free(c->row0);
    free(c->slot);
    free(c->pos);
    free(c->off);
    memset(c, 0, sizeof *c);
}

size_t wh_stem_ctx_bytes(const wh_stem_ctx *c, const wh_model *w)
{
    if (!c->mel) return 0;
    size_t S = (size_t)c->slots, C = (size_t)w->n_mels, d = (size_t)w->d, wmax = C > d ? C : d;
    return c->mel->bytes + c->c1->bytes +
           (2 * S * (size_t)c->max_in * C + S * (size_t)(c->max_in + 1) * d + 2 * S * wmax) *
               sizeof(float) +
           2 * S * sizeof(const float *) + (2 * S + 1) * sizeof(int) +
           (1 + WH_STEM_COLS) * S * sizeof(int64_t);
}

void wh_stem_stream_reset(wh_stem_stream *st) { st->n_mel = st->n_c1 = st->n_out = 0; }

/* Write each stream's carried rows [from[i], to[i]) that are new (>= first_new[i], at
 * new_rows + new_off[i] rows on) to its slot of pool p: one gather, one kv_write. */
static sr_status carry_rows(const wh_model *w, wh_stem_ctx *c, sr_kpool *p, int cin,
                            wh_stem_stream *const *st, int count, const float *new_rows,
                            const int64_t *new_off, const int64_t *first_new,
                            const int64_t *from, const int64_t *to)
{
    int n = 0, ns = 0;
    c->row0[0] = 0;
    for (int i = 0; i < count; i++) {
        int64_t a = from[i] > first_new[i] ? from[i] : first_new[i];
        if (a < 0) a = 0;
        if (to[i] <= a) continue;
        for (int64_t t = a; t < to[i]; t++)
            c->rp[n++] = new_rows + (size_t)(new_off[i] + t - first_new[i]) * cin;
        c->slot[ns] = st[i]->slot;
        c->pos[ns] = a;
        c->row0[++ns] = n;
    }
    if (!n) return SR_OK;
    sr_kbatch b = {.n_seq = ns, .row0 = c->row0, .slot = c->slot, .pos = c->pos};
    sr_status e = w->k->copy_rows(n, cin, c->rp, c->carry, cin);
    return e ? e : w->k->kv_write(p, 0, &b, c->carry, cin);
}

sr_status wh_stem_feed(const wh_model *w, wh_scratch *s, wh_stem_ctx *c,
                       wh_stem_stream *const *st, const float *const *mel, const int *n,
                       const int *final, int count, float *x, int *n_out)
{
    int C = w->n_mels, d = w->d;
    if (count < 0 || count > c->slots)
        return sr_error(SR_ERR_ARG, "whisper stem: %d streams, the context holds %d", count,
                        c->slots);
    int64_t *noff = c->off, *first = noff + count, *lo = first + count, *hi = lo + count,
            *tot = hi + count, *c1off = tot + count, *c1first = c1off + count,
            *keep_from = c1first + count, *keep_to = keep_from + count;
    /* the new mel frames of every stream: one upload */
    size_t rows = 0;
    for (int i = 0; i < count; i++) {
        if (n[i] < 0 || n[i] > c->max_in)
            return sr_error(SR_ERR_ARG, "whisper stem: %d mel frames in one feed (at most %d)",
                            n[i], c->max_in);
        n_out[i] = 0;
        noff[i] = (int64_t)rows;
        if (n[i]) memcpy(c->hnm + rows * C, mel[i], (size_t)n[i] * C * sizeof(float));
        rows += (size_t)n[i];
    }
    sr_status e = rows ? w->k->upload(c->nm, c->hnm, rows * C * sizeof(float)) : SR_OK;
    if (e) return e;
    /* conv1: outputs t with mel t + 1 present (all of them at the end) */
    int64_t c1rows = 0;
    for (int i = 0; i < count; i++) {
        const wh_stem_stream *q = st[i];
        int64_t total = q->n_mel + n[i];
        first[i] = q->n_mel;
        tot[i] = final[i] ? total : -1;
        lo[i] = q->n_c1;
        hi[i] = final[i] ? total : (total > 0 ? total - 1 : 0);
        if (hi[i] < lo[i]) hi[i] = lo[i];
        c1off[i] = c1rows;
        c1rows += hi[i] - lo[i];
    }
    stem_conv cv1 = {.stride = 1, .cin = C, .carried = c->mel, .new_rows = c->nm,
                     .new_off = noff, .first_new = first, .total = tot, .o0 = lo, .o1 = hi,
                     .L = w->conv1};
    if ((e = conv_streams(w, s, &cv1, st, count, c->c1new))) return e;
    /* carried mel frames: from the left neighbour of the next conv1 output on */
    for (int i = 0; i < count; i++) {
        keep_from[i] = hi[i] - 1;
        keep_to[i] = st[i]->n_mel + n[i];
    }
    if ((e = carry_rows(w, c, c->mel, C, st, count, c->nm, noff, first, keep_from, keep_to)))
        return e;
    for (int i = 0; i < count; i++) {
        wh_stem_stream *q = st[i];
        q->n_mel += n[i];
        c1first[i] = q->n_c1;
        q->n_c1 = hi[i];
    }
    /* conv2 (stride 2): outputs u with conv1 2u + 1 present (at the end ceil(n_c1 / 2)) */
    for (int i = 0; i < count; i++) {
        const wh_stem_stream *q = st[i];
        tot[i] = final[i] ? q->n_c1 : -1;
        lo[i] = q->n_out;
        hi[i] = final[i] ? (q->n_c1 + 1) / 2 : q->n_c1 / 2;
        if (hi[i] < lo[i]) hi[i] = lo[i];
    }
    stem_conv cv2 = {.stride = 2, .cin = d, .carried = c->c1, .new_rows = c->c1new,
                     .new_off = c1off, .first_new = c1first, .total = tot, .o0 = lo, .o1 = hi,
                     .L = w->conv2};
    if ((e = conv_streams(w, s, &cv2, st, count, x))) return e;
    for (int i = 0; i < count; i++) {
        keep_from[i] = 2 * hi[i] - 1; /* the left neighbour of the next conv2 output's centre */
        keep_to[i] = st[i]->n_c1;
    }
    if ((e = carry_rows(w, c, c->c1, d, st, count, c->c1new, c1off, c1first, keep_from, keep_to)))
        return e;
    for (int i = 0; i < count; i++) {
        n_out[i] = (int)(hi[i] - lo[i]);
        st[i]->n_out = hi[i];
    }
    return SR_OK;
}

sr_status wh_encode(const wh_model *w, wh_scratch *s, float *x, const wh_eseq *q, int n_seq,
                    sr_kpool *kc, sr_kpool *vc, const int *klim)
{
    int d = w->d, ctx = w->n_audio_ctx, nb = 0;
    for (int i = 0; i < n_seq; i++) {
        int n = q[i].n, p0 = q[i].p0;
        if (n < 0 || p0 < 0 || p0 + n > ctx)
            return sr_error(SR_ERR_ARG, "whisper encoder: %d frames at position %d exceed the "
                            "context (%d)", n, p0, ctx);
        if (n == 0) continue;
        int r0 = s->row0[nb];
        sr_status st = wh_kbatch_add(s, &nb, n, q[i].slot, q[i].slot, p0);
        if (st) return sr_error_prefix(st, "whisper encoder");
        for (int r = 0; r < n; r++) {
            s->lo[r0 + r] = 0;
            s->hi[r0 + r] = klim ? klim[r0 + r] : p0 + n;
        }
    }
    int n = s->row0[nb];
    if (n <= 0) return SR_OK;
    sr_kbatch b = {.n_seq = nb, .row0 = s->row0, .slot = s->slot, .pos = s->pos};
    const sr_kernels *k = w->k;
    sr_status st = SR_OK;
    for (int l = 0; l < w->n_audio_layer && !st; l++) {
        const wh_block *B = &w->enc[l];
        if ((st = wh_layernorm(k, x, n, d, B->attn_ln, s->h)) ||
            /* q | k | v rows [n, 3d] into the MLP scratch ([rows, 4d], free until fc1) */
            (st = wh_linear(k, s->h, n, B->qkv, SR_ACT_NONE, 0.0f, s->mlp)) ||
            (st = wh_kv_put(k, kc, vc, l, &b, s->mlp + d, s->mlp + 2 * d, 3 * d)) ||
            (st = wh_attend(k, w->n_audio_head, d, s->mlp, 3 * d, &b, s->lo, s->hi, kc, vc, l, s->a)) ||
            (st = wh_linear(k, s->a, n, B->o, SR_ACT_NONE, 1.0f, x)) ||
            (st = wh_layernorm(k, x, n, d, B->mlp_ln, s->h)) ||
            (st = wh_linear(k, s->h, n, B->fc1, SR_ACT_GELU, 0.0f, s->mlp)))
            break;
        st = wh_linear(k, s->mlp, n, B->fc2, SR_ACT_NONE, 1.0f, x);
    }
    if (st) return st;
    return wh_layernorm(k, x, n, d, w->ln_post, x);
}
