/*
 * check.c — the argument checks of the op set (kernels.h: weight_create, gemm, gather, copy2d,
 * norm, act, glu, add, scale, rope, conv2d_s2, conv_dw, batchnorm, lstm_cell,
 * softmax, logsoftmax, topk, kv_write, attn), shared by every table (sgemm's is in select.c).
 *
 * Why here: the CPU table (kernels/cpu/) and the CUDA table (kernels/cuda/) must refuse exactly
 * the same calls with the same SR_ERR_ARG messages, so that a backend's behaviour does not
 * depend on the device. One copy of each check keeps them from drifting apart.
 *
 * Contract of every sr_kernels_check_<op>: it takes the op's arguments (those it checks) and
 * returns SR_OK or sr_error(SR_ERR_ARG, "<op>: ..."), in the order the ops have always checked.
 * SR_OK also covers the op's no-op cases (an empty size or batch): those return before the
 * pointers are looked at, and the caller then returns SR_OK without work. Ops over a batch
 * get its row count back (*rows; 0 on any failure) because an empty batch may carry no row0.
 * Pointers are compared as numbers only, so device addresses are checked like host ones; the
 * control arrays (sr_kbatch, sr_kattn's ranges) are host memory on every table and are read.
 * Checks of one implementation's own limits stay with that implementation.
 */
#include "../core/internal.h"
#include "kernels.h"

#include <stdint.h>

#define ARG(cond, ...)                                                                        \
    do {                                                                                      \
        if (cond) return sr_error(SR_ERR_ARG, __VA_ARGS__);                                   \
    } while (0)

/* ---- helpers -------------------------------------------------------------------------------- */

/* Validate the batch b of op: sequences, row ranges, positions (need_pos) and, when slots > 0,
 * slot ids in [0, slots), pairwise distinct (two sequences writing one cache slot would race).
 * *rows = the batch's row count. */
static sr_status check_batch(const char *op, const sr_kbatch *b, int need_pos, int slots, int *rows)
{
    *rows = 0;
    ARG(!b, "%s: batch b is NULL", op);
    ARG(b->n_seq < 0, "%s: b->n_seq = %d < 0", op, b->n_seq);
    if (b->n_seq == 0) return SR_OK;
    ARG(!b->row0, "%s: b->row0 is NULL", op);
    ARG(b->row0[0] != 0, "%s: b->row0[0] = %d (must be 0)", op, b->row0[0]);
    for (int s = 0; s < b->n_seq; s++) {
        ARG(b->row0[s + 1] < b->row0[s], "%s: b->row0 decreases at sequence %d (%d after %d)", op,
            s, b->row0[s + 1], b->row0[s]);
        if (need_pos) {
            ARG(!b->pos, "%s: b->pos is NULL", op);
            ARG(b->pos[s] < 0 || b->pos[s] > INT64_MAX - (b->row0[s + 1] - b->row0[s]),
                "%s: b->pos[%d] = %lld out of range", op, s, (long long)b->pos[s]);
        }
        if (slots > 0) {
            ARG(!b->slot, "%s: b->slot is NULL", op);
            ARG(b->slot[s] < 0 || b->slot[s] >= slots,
                "%s: b->slot[%d] = %d out of range (%d slots)", op, s, b->slot[s], slots);
            for (int q = 0; q < s; q++)
                ARG(b->slot[q] == b->slot[s], "%s: slot %d used by sequences %d and %d", op,
                    b->slot[s], q, s);
        }
    }
    *rows = b->row0[b->n_seq];
    return SR_OK;
}

/* A cache pool p (named name in the messages) of the row ops, and its layer. */
static sr_status check_pool(const char *op, const char *name, const sr_kpool *p, int layer)
{
    ARG(!p->data, "%s: %s->data is NULL", op, name);
    ARG(p->dtype != SR_F32 && p->dtype != SR_F16 && p->dtype != SR_BF16,
        "%s: %s element type %s (f32, f16 or bf16)", op, name, sr_dtype_name(p->dtype));
    ARG(p->layers < 1 || p->slots < 1 || p->rows < 1 || p->width < 1,
        "%s: %s shape %d x %d x %d x %d (each >= 1)", op, name, p->layers, p->slots, p->rows,
        p->width);
    ARG(layer < 0 || layer >= p->layers, "%s: layer %d out of range (%s has %d)", op, layer, name,
        p->layers);
    return SR_OK;
}

/* The K or V pool of attn (name "K" / "V"): attn's own wording, and the width its heads need. */
static sr_status check_attn_pool(const char *name, const sr_kpool *P, int layer, int width)
{
    ARG(!P, "attn: %s is NULL", name);
    ARG(P->dtype != SR_F32 && P->dtype != SR_F16 && P->dtype != SR_BF16,
        "attn: %s pool dtype %s (f32, f16 or bf16)", name, sr_dtype_name(P->dtype));
    ARG(!P->data || P->layers < 1 || P->slots < 1 || P->rows < 1,
        "attn: %s is not a pool from sr_kpool_create", name);
    ARG(P->width != width, "attn: %s pool width %d != n_kv_head * head_dim = %d", name, P->width,
        width);
    ARG(layer < 0 || layer >= P->layers, "attn: layer %d out of [0, %d) of %s", layer, P->layers,
        name);
    return SR_OK;
}

/* ---- copy, row-wise and element-wise ops ---------------------------------------------------- */

sr_status sr_kernels_check_copy2d(int M, int d, const float *x, int ldx, const float *y, int ldy)
{
    ARG(M < 0 || d < 0, "copy2d: negative size (M = %d, d = %d)", M, d);
    if (M == 0 || d == 0) return SR_OK;
    ARG(!x || !y, "copy2d: %s is NULL", x ? "y" : "x");
    ARG(ldx < d || ldy < d, "copy2d: %s = %d < d = %d", ldx < d ? "ldx" : "ldy",
        ldx < d ? ldx : ldy, d);
    return SR_OK;
}

sr_status sr_kernels_check_copy_rows(int n, int d, const float *const *src, const float *y, int ldy)
{
    ARG(n < 0 || d < 0, "copy_rows: negative size (n = %d, d = %d)", n, d);
    if (n == 0 || d == 0) return SR_OK;
    ARG(!src || !y, "copy_rows: %s is NULL", src ? "y" : "src");
    ARG(ldy < d, "copy_rows: ldy = %d < d = %d", ldy, d);
    for (int i = 0; i < n; i++) ARG(!src[i], "copy_rows: src[%d] is NULL", i);
    return SR_OK;
}

sr_status sr_kernels_check_transpose(int n, int M, int d, const float *x, int ldx, const float *y,
                                     int ldy)
{
    ARG(n < 0 || M < 0 || d < 0, "transpose: negative size (n = %d, M = %d, d = %d)", n, M, d);
    if (n == 0 || M == 0 || d == 0) return SR_OK;
    ARG(!x || !y, "transpose: %s is NULL", x ? "y" : "x");
    ARG(ldx < d, "transpose: ldx = %d < d = %d", ldx, d);
    ARG(ldy < M, "transpose: ldy = %d < M = %d", ldy, M);
    return SR_OK;
}

sr_status sr_kernels_check_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx,
                                const float *g, const float *b, const float *mul, int ld_mul,
                                const float *y, int ldy)
{
    ARG(kind != SR_NORM_LAYER && kind != SR_NORM_RMS, "norm: kind %d unknown (LAYER 0, RMS 1)",
        (int)kind);
    ARG(M < 0 || d < 0, "norm: negative size (M = %d, d = %d)", M, d);
    if (M == 0 || d == 0) return SR_OK;
    ARG(!x || !y, "norm: %s is NULL", x ? "y" : "x");
    ARG(!g, "norm: g is NULL");
    ARG(kind == SR_NORM_LAYER && !b, "norm: b is NULL (LayerNorm needs a bias)");
    ARG(ldx < d || ldy < d, "norm: %s = %d < d = %d", ldx < d ? "ldx" : "ldy", ldx < d ? ldx : ldy,
        d);
    ARG(x == y && ldx != ldy, "norm: x and y alias with ldx = %d != ldy = %d", ldx, ldy);
    ARG(mul && ld_mul != 0 && ld_mul < d, "norm: ld_mul = %d < d = %d (0 broadcasts one row)",
        ld_mul, d);
    ARG(mul && ld_mul < 0, "norm: ld_mul = %d < 0", ld_mul);
    return SR_OK;
}

sr_status sr_kernels_check_act(sr_act act, size_t n, const float *x, const float *y)
{
    ARG(act != SR_ACT_NONE && act != SR_ACT_GELU && act != SR_ACT_SILU && act != SR_ACT_RELU,
        "act: activation %d unknown", (int)act);
    if (n == 0) return SR_OK;
    ARG(!x || !y, "act: %s is NULL", x ? "y" : "x");
    /* the CPU splits [0, n) in int64_t ranges */
    ARG(n > (size_t)INT64_MAX, "act: n = %zu too large", n);
    return SR_OK;
}

sr_status sr_kernels_check_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b,
                               int ldb, const float *y, int ldy)
{
    ARG(kind != SR_GLU_SIGMOID && kind != SR_GLU_SILU, "glu: kind %d unknown (SIGMOID 0, SILU 1)",
        (int)kind);
    ARG(M < 0 || d < 0, "glu: negative size (M = %d, d = %d)", M, d);
    if (M == 0 || d == 0) return SR_OK;
    ARG(!a || !b || !y, "glu: %s is NULL", !a ? "a" : !b ? "b" : "y");
    ARG(lda < d || ldb < d || ldy < d, "glu: %s = %d < d = %d",
        lda < d ? "lda" : ldb < d ? "ldb" : "ldy", lda < d ? lda : ldb < d ? ldb : ldy, d);
    ARG(y == a && ldy != lda, "glu: y and a alias with ldy = %d != lda = %d", ldy, lda);
    ARG(y == b && ldy != ldb, "glu: y and b alias with ldy = %d != ldb = %d", ldy, ldb);
    return SR_OK;
}

sr_status sr_kernels_check_add(int M, int d, const float *x, int ldx, const float *y, int ldy)
{
    ARG(M < 0 || d < 0, "add: negative size (M = %d, d = %d)", M, d);
    if (M == 0 || d == 0) return SR_OK;
    ARG(!x || !y, "add: %s is NULL", x ? "y" : "x");
    ARG(ldx != 0 && ldx < d, "add: ldx = %d < d = %d (0 broadcasts row 0)", ldx, d);
    ARG(ldx < 0, "add: ldx = %d < 0", ldx);
    ARG(ldy < d, "add: ldy = %d < d = %d", ldy, d);
    return SR_OK;
}

sr_status sr_kernels_check_scale(int M, int d, const float *y, int ldy)
{
    ARG(M < 0 || d < 0, "scale: negative size (M = %d, d = %d)", M, d);
    if (M == 0 || d == 0) return SR_OK;
    ARG(!y, "scale: y is NULL");
    ARG(ldy < d, "scale: ldy = %d < d = %d", ldy, d);
    return SR_OK;
}

sr_status sr_kernels_check_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq,
                                const float *x, int ldx, int *rows)
{
    sr_status st = check_batch("rope", b, 1, 0, rows);
    if (st) return st;
    ARG(n_head < 0 || hd < 0, "rope: negative size (n_head = %d, hd = %d)", n_head, hd);
    ARG(hd % 2, "rope: head width hd = %d is odd", hd);
    if (*rows == 0 || n_head == 0 || hd == 0) return SR_OK;
    ARG(!x || !inv_freq, "rope: %s is NULL", x ? "inv_freq" : "x");
    ARG((int64_t)ldx < (int64_t)n_head * hd, "rope: ldx = %d < n_head * hd = %lld", ldx,
        (long long)n_head * hd);
    return SR_OK;
}

/* ---- convolutions, batchnorm, lstm_cell ----------------------------------------------------- */

sr_status sr_kernels_check_conv2d_s2(int n, int C, int T, int F, const float *in,
                                     size_t in_img_stride, size_t in_plane_stride, const float *w,
                                     const float *b, const float *out)
{
    ARG(n < 0 || C < 0 || T < 0 || F < 0,
        "conv2d_s2: negative size (n = %d, C = %d, T = %d, F = %d)", n, C, T, F);
    if (n == 0 || C == 0) return SR_OK;
    ARG(!in || !w || !b || !out, "conv2d_s2: %s is NULL", !in ? "in" : !w ? "w" : !b ? "b" : "out");
    size_t plane = (size_t)T * (size_t)F;
    ARG(in_plane_stride != 0 && in_plane_stride < plane,
        "conv2d_s2: in_plane_stride = %zu < T * F = %zu (0 reads one plane)", in_plane_stride, plane);
    size_t img = in_plane_stride ? (size_t)(C - 1) * in_plane_stride + plane : plane;
    ARG(n > 1 && in_img_stride < img, "conv2d_s2: in_img_stride = %zu < %zu (an image's planes)",
        in_img_stride, img);
    return SR_OK;
}

sr_status sr_kernels_check_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                                   const float *w, const float *bias, const sr_kpool *state,
                                   int layer, const float *y, int ldy, int *rows)
{
    sr_status st;
    *rows = 0;
    ARG(C < 0, "conv_dw: negative size (C = %d)", C);
    ARG(K < 1, "conv_dw: kernel size K = %d < 1", K);
    if (state) {
        if ((st = check_pool("conv_dw", "state", state, layer))) return st;
        ARG(state->width != C, "conv_dw: state width %d != C = %d", state->width, C);
        ARG(state->rows < K - 1, "conv_dw: state has %d rows < K - 1 = %d", state->rows, K - 1);
    }
    if ((st = check_batch("conv_dw", b, 0, state ? state->slots : 0, rows))) return st;
    if (*rows == 0 || C == 0) return SR_OK;
    ARG(!x || !w || !bias || !y, "conv_dw: %s is NULL", !x ? "x" : !w ? "w" : !bias ? "bias" : "y");
    ARG(ldx < C || ldy < C, "conv_dw: %s = %d < C = %d", ldx < C ? "ldx" : "ldy",
        ldx < C ? ldx : ldy, C);
    /* the window of row t reads input rows that y's earlier rows would have overwritten */
    ARG(x == y, "conv_dw: y must not alias x");
    return SR_OK;
}

sr_status sr_kernels_check_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                                     const float *var, const float *g, const float *bias,
                                     const float *y, int ldy)
{
    ARG(M < 0 || C < 0, "batchnorm: negative size (M = %d, C = %d)", M, C);
    if (M == 0 || C == 0) return SR_OK;
    ARG(!x || !y, "batchnorm: %s is NULL", x ? "y" : "x");
    ARG(!mean || !var || !g || !bias, "batchnorm: %s is NULL",
        !mean ? "mean" : !var ? "var" : !g ? "g" : "bias");
    ARG(ldx < C || ldy < C, "batchnorm: %s = %d < C = %d", ldx < C ? "ldx" : "ldy",
        ldx < C ? ldx : ldy, C);
    ARG(x == y && ldx != ldy, "batchnorm: x and y alias with ldx = %d != ldy = %d", ldx, ldy);
    return SR_OK;
}

sr_status sr_kernels_check_lstm_cell(int M, int H, const float *gates, int ldg, const float *c,
                                     int ldc, const float *h, int ldh)
{
    ARG(M < 0 || H < 0, "lstm_cell: negative size (M = %d, H = %d)", M, H);
    if (M == 0 || H == 0) return SR_OK;
    ARG(!gates || !c || !h, "lstm_cell: %s is NULL", !gates ? "gates" : !c ? "c" : "h");
    ARG((int64_t)ldg < 4 * (int64_t)H, "lstm_cell: ldg = %d < 4 H = %lld", ldg, 4 * (long long)H);
    ARG(ldc < H || ldh < H, "lstm_cell: %s = %d < H = %d", ldc < H ? "ldc" : "ldh",
        ldc < H ? ldc : ldh, H);
    return SR_OK;
}

/* ---- softmax, logsoftmax, topk -------------------------------------------------------------- */

sr_status sr_kernels_check_softmax(int M, int N, const float *x, int ldx)
{
    ARG(M < 0 || N < 0, "softmax: negative size (M = %d, N = %d)", M, N);
    if (M == 0 || N == 0) return SR_OK;
    ARG(!x, "softmax: x is NULL");
    ARG(ldx < N, "softmax: ldx = %d < N = %d", ldx, N);
    return SR_OK;
}

sr_status sr_kernels_check_logsoftmax(int M, int N, const float *x, int ldx, const float *y,
                                      int ldy)
{
    ARG(M < 0 || N < 0, "logsoftmax: negative size (M = %d, N = %d)", M, N);
    if (M == 0 || N == 0) return SR_OK;
    ARG(!x || !y, "logsoftmax: %s is NULL", x ? "y" : "x");
    ARG(ldx < N || ldy < N, "logsoftmax: %s = %d < N = %d", ldx < N ? "ldx" : "ldy",
        ldx < N ? ldx : ldy, N);
    ARG(x == y && ldx != ldy, "logsoftmax: x and y alias with ldx = %d != ldy = %d", ldx, ldy);
    return SR_OK;
}

sr_status sr_kernels_check_topk(int M, int N, int k, const float *x, int ldx, const int32_t *idx)
{
    ARG(M < 0 || N < 0, "topk: negative size (M = %d, N = %d)", M, N);
    if (M == 0) return SR_OK;
    ARG(k < 1 || k > N, "topk: k = %d out of range (1 .. N = %d)", k, N);
    ARG(!x || !idx, "topk: %s is NULL", x ? "idx" : "x");
    ARG(ldx < N, "topk: ldx = %d < N = %d", ldx, N);
    return SR_OK;
}

/* ---- cache ops ------------------------------------------------------------------------------ */

sr_status sr_kernels_check_kv_write(const sr_kpool *p, int layer, const sr_kbatch *b,
                                    const float *x, int ldx, int *rows)
{
    sr_status st;
    *rows = 0;
    ARG(!p, "kv_write: pool p is NULL");
    if ((st = check_pool("kv_write", "p", p, layer))) return st;
    if ((st = check_batch("kv_write", b, 1, p->slots, rows))) return st;
    if (*rows == 0) return SR_OK;
    ARG(!x, "kv_write: x is NULL");
    ARG(ldx < p->width, "kv_write: ldx = %d < pool width %d", ldx, p->width);
    return SR_OK;
}

sr_status sr_kernels_check_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd,
                                   const float *inv_freq, const float *q, int ldq, const float *k,
                                   int ldk, const float *v, int ldv, const sr_kpool *K,
                                   const sr_kpool *V, int layer, int *rows)
{
    sr_status st;
    if ((st = sr_kernels_check_rope(b, n_head, hd, inv_freq, q, ldq, rows))) return st;
    if ((st = sr_kernels_check_rope(b, n_kv_head, hd, inv_freq, k, ldk, rows))) return st;
    if ((st = sr_kernels_check_kv_write2(K, V, layer, b, k, ldk, v, ldv, rows))) return st;
    ARG((int64_t)K->width != (int64_t)n_kv_head * hd, "rope_kv: K's width %d is not n_kv_head * hd = %lld",
        K->width, (long long)n_kv_head * hd);
    return SR_OK;
}

sr_status sr_kernels_check_kv_write2(const sr_kpool *p, const sr_kpool *p2, int layer,
                                     const sr_kbatch *b, const float *x, int ldx, const float *x2,
                                     int ldx2, int *rows)
{
    sr_status st;
    *rows = 0;
    ARG(p && p == p2, "kv_write2: p2 is p (two distinct pools)");
    if ((st = sr_kernels_check_kv_write(p, layer, b, x, ldx, rows))) return st;
    ARG(!p2, "kv_write2: pool p2 is NULL");
    if ((st = check_pool("kv_write2", "p2", p2, layer))) return st;
    if ((st = check_batch("kv_write2", b, 1, p2->slots, rows))) return st;
    if (*rows == 0) return SR_OK;
    ARG(!x2, "kv_write2: x2 is NULL");
    ARG(ldx2 < p2->width, "kv_write2: ldx2 = %d < pool p2's width %d", ldx2, p2->width);
    return SR_OK;
}

/* Longest key range attn accepts. The CPU table's blocks of 32 lanes (kernels/cpu/attn.c's
 * LB_MAX, asserted there) size their work areas in int from it; every table refuses the same
 * ranges so that a model runs on every table or on none. */
#define ATTN_MAX_KEYS ((int64_t)INT32_MAX / 32 - 4 * 32)

sr_status sr_kernels_check_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                                const sr_kpool *K, const sr_kpool *V, int layer, const float *out,
                                int ldo, int64_t *maxlen, int64_t *keys)
{
    if (maxlen) *maxlen = 0;
    if (keys) *keys = 0;
    ARG(!a, "attn: a is NULL");
    ARG(!b, "attn: b is NULL");
    ARG(a->n_head < 1 || a->n_kv_head < 1 || a->head_dim < 1,
        "attn: n_head %d, n_kv_head %d, head_dim %d (each >= 1)", a->n_head, a->n_kv_head,
        a->head_dim);
    ARG(a->n_head % a->n_kv_head, "attn: n_head %d is not a multiple of n_kv_head %d", a->n_head,
        a->n_kv_head);
    ARG((int64_t)a->n_head * a->head_dim > INT32_MAX / 2, "attn: n_head %d x head_dim %d too large",
        a->n_head, a->head_dim);
    ARG(b->n_seq < 0, "attn: n_seq = %d < 0", b->n_seq);
    ARG(!b->row0, "attn: b->row0 is NULL");
    ARG(b->row0[0] != 0, "attn: row0[0] = %d (must be 0)", b->row0[0]);
    for (int s = 0; s < b->n_seq; s++)
        ARG(b->row0[s + 1] < b->row0[s], "attn: row0[%d] = %d < row0[%d] = %d", s + 1,
            b->row0[s + 1], s, b->row0[s]);
    const int H = a->n_head, G = a->n_kv_head, hd = a->head_dim;
    sr_status st;
    if ((st = check_attn_pool("K", K, layer, G * hd)) ||
        (st = check_attn_pool("V", V, layer, G * hd)))
        return st;
    const int M = b->row0[b->n_seq];
    if (M == 0) return SR_OK;
    ARG(!q || !out, "attn: %s is NULL", q ? "out" : "q");
    ARG(ldq < H * hd, "attn: ldq = %d < n_head * head_dim = %d", ldq, H * hd);
    ARG(ldo < H * hd, "attn: ldo = %d < n_head * head_dim = %d", ldo, H * hd);
    {
        /* addresses compared as numbers (device ones too): [first element, last row's end) */
        const char *qb = (const char *)q, *ob = (const char *)out;
        const char *qe = (const char *)(q + (size_t)(M - 1) * ldq + (size_t)H * hd);
        const char *oe = (const char *)(out + (size_t)(M - 1) * ldo + (size_t)H * hd);
        ARG(qb < oe && ob < qe, "attn: q and out overlap");
    }
    ARG(!b->slot, "attn: b->slot is NULL");
    ARG(!a->lo || !a->hi, "attn: %s is NULL", a->lo ? "hi" : "lo");
    const int rel = a->rel != NULL;
    if (rel) {
        ARG(!a->pos_u || !a->pos_v, "attn: rel-pos without %s", a->pos_u ? "pos_v" : "pos_u");
        ARG(!b->pos, "attn: rel-pos needs b->pos (NULL)");
        ARG(a->rel_max < a->rel_min, "attn: rel_max %d < rel_min %d", a->rel_max, a->rel_min);
    }
    /* every key of a range must still be held by both pools */
    const int prow = SR_MIN(K->rows, V->rows);
    int64_t longest = 0, total = 0;
    for (int s = 0; s < b->n_seq; s++) {
        if (b->row0[s + 1] == b->row0[s]) continue;
        int sl = b->slot[s];
        ARG(sl < 0 || sl >= K->slots || sl >= V->slots, "attn: slot[%d] = %d out of [0, %d)", s, sl,
            SR_MIN(K->slots, V->slots));
        ARG(rel && b->pos[s] < 0, "attn: pos[%d] = %lld < 0", s, (long long)b->pos[s]);
        for (int r = b->row0[s]; r < b->row0[s + 1]; r++) {
            int64_t lo = a->lo[r], hi = a->hi[r];
            ARG(lo < 0 || hi < lo,
                "attn: row %d: key range [lo = %lld, hi = %lld) (need 0 <= lo <= hi)", r,
                (long long)lo, (long long)hi);
            ARG(hi - lo > prow,
                "attn: row %d: key range [%lld, %lld) holds %lld keys, more than the pool's %d rows",
                r, (long long)lo, (long long)hi, (long long)(hi - lo), prow);
            if (rel && hi > lo) {
                int64_t p = b->pos[s] + (r - b->row0[s]);
                ARG(p - lo > a->rel_max || p - (hi - 1) < a->rel_min,
                    "attn: row %d (position %lld): distances %lld .. %lld outside rel [rel_min = %d, rel_max = %d]",
                    r, (long long)p, (long long)(p - lo), (long long)(p - (hi - 1)), a->rel_min,
                    a->rel_max);
            }
            longest = SR_MAX(longest, hi - lo);
            total += hi - lo;
        }
    }
    ARG(longest > ATTN_MAX_KEYS, "attn: key ranges of %lld keys are too long", (long long)longest);
    if (maxlen) *maxlen = longest;
    if (keys) *keys = total;
    return SR_OK;
}

/* ---- the Linear ops' argument checks, shared by every table ------------------------------- */

static int valid_weight(const sr_kweight *W)
{
    return W->n >= 1 && W->k >= 1 && W->data &&
           (W->dtype == SR_F32 || W->dtype == SR_BF16 || W->dtype == SR_F16 ||
            (W->dtype == SR_I8 && W->scale)) &&
           (W->mul == SR_KMUL_EXACT ||
            (W->mul == SR_KMUL_BF16 && (W->dtype == SR_BF16 || W->dtype == SR_I8)));
}

sr_status sr_kernels_check_weight_create(const void *host, sr_dtype dt, int n, int k,
                                         const float *scale, sr_kmul mul, sr_kweight **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "weight_create: out is NULL");
    *out = NULL;
    if (n < 1 || k < 1)
        return sr_error(SR_ERR_ARG, "weight_create: shape [n = %d, k = %d] (both must be >= 1)", n, k);
    if (dt != SR_F32 && dt != SR_BF16 && dt != SR_F16 && dt != SR_I8)
        return sr_error(SR_ERR_ARG, "weight_create: dtype %d is not f32, bf16, f16 or i8", (int)dt);
    if (!host) return sr_error(SR_ERR_ARG, "weight_create: host is NULL");
    if (dt == SR_I8 && !scale) return sr_error(SR_ERR_ARG, "weight_create: i8 weight without scale");
    if (mul != SR_KMUL_EXACT && mul != SR_KMUL_BF16)
        return sr_error(SR_ERR_ARG, "weight_create: mul %d is not exact or bf16", (int)mul);
    if (mul == SR_KMUL_BF16 && dt != SR_BF16 && dt != SR_I8)
        return sr_error(SR_ERR_ARG, "weight_create: bf16 products need a bf16 or i8 weight "
                        "(dtype %s)", sr_dtype_name(dt));
    return SR_OK;
}

sr_status sr_kernels_check_gemm(int M, const float *x, int ldx, const sr_kweight *W, sr_act act,
                                const float *y, int ldy)
{
    if (M < 0) return sr_error(SR_ERR_ARG, "gemm: M = %d < 0", M);
    if (!W) return sr_error(SR_ERR_ARG, "gemm: W is NULL");
    if (!valid_weight(W)) return sr_error(SR_ERR_ARG, "gemm: W is not a weight from weight_create");
    if (act != SR_ACT_NONE && act != SR_ACT_GELU && act != SR_ACT_SILU && act != SR_ACT_RELU)
        return sr_error(SR_ERR_ARG, "gemm: act = %d is not a known activation", (int)act);
    if (M == 0) return SR_OK;
    if (!x || !y) return sr_error(SR_ERR_ARG, "gemm: %s is NULL", x ? "y" : "x");
    if (ldx < W->k) return sr_error(SR_ERR_ARG, "gemm: ldx = %d < k = %d", ldx, W->k);
    if (ldy < W->n) return sr_error(SR_ERR_ARG, "gemm: ldy = %d < n = %d", ldy, W->n);
    /* addresses compared as numbers (device ones too): [first element, last row's end) */
    uintptr_t xb = (uintptr_t)x, yb = (uintptr_t)y;
    uintptr_t xe = (uintptr_t)(x + (size_t)(M - 1) * ldx + W->k);
    uintptr_t ye = (uintptr_t)(y + (size_t)(M - 1) * ldy + W->n);
    if (xb < ye && yb < xe) return sr_error(SR_ERR_ARG, "gemm: x and y overlap");
    return SR_OK;
}

sr_status sr_kernels_check_gather(const sr_kweight *E, const int32_t *ids, int n, const float *y,
                                  int ldy)
{
    if (n < 0) return sr_error(SR_ERR_ARG, "gather: n = %d < 0", n);
    if (!E) return sr_error(SR_ERR_ARG, "gather: E is NULL");
    if (!valid_weight(E)) return sr_error(SR_ERR_ARG, "gather: E is not a weight from weight_create");
    if (n == 0) return SR_OK;
    if (!ids || !y) return sr_error(SR_ERR_ARG, "gather: %s is NULL", ids ? "y" : "ids");
    if (ldy < E->k) return sr_error(SR_ERR_ARG, "gather: ldy = %d < k = %d", ldy, E->k);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= E->n)
            return sr_error(SR_ERR_ARG, "gather: ids[%d] = %d out of [0, %d)", i, (int)ids[i], E->n);
    return SR_OK;
}
