/*
 * kernels.h — the compute dispatch table. A model picks one table at load (CPU, or CUDA when
 * built with CUDA=1 and a device is present) and calls every heavy operation through it, so
 * only kernels/ knows where the numbers live. Pointers passed to a table's compute functions
 * are that table's memory (host memory for CPU, device memory for CUDA): move data with
 * alloc/upload/download of the same table.
 *
 * Every CUDA kernel has a CPU reference here and a test comparing the two (tests/test_kernels.c).
 */
#ifndef SR_KERNELS_H
#define SR_KERNELS_H

#include "../core/sr.h"

#include <stddef.h>
#include <stdint.h>

/* ---- op-set types ------------------------------------------------------------------------- */

/* Activations (fused into gemm, or applied by act). GELU is the exact erf form (torch's
 * default), SiLU x * sigmoid(x), ReLU x > 0 ? x : +0 (NaN and -0 give +0, as the loops it
 * replaced did; every path of every op gives the same bits). */
typedef enum { SR_ACT_NONE = 0, SR_ACT_GELU = 1, SR_ACT_SILU = 2, SR_ACT_RELU = 3 } sr_act;

/* Gated units: SIGMOID  y = a * sigmoid(b)  (torch GLU over [a ; b], computed a / (1 + e^-b));
 *              SILU     y = silu(a) * b      (SwiGLU / the Mistral MLP). */
typedef enum { SR_GLU_SIGMOID = 0, SR_GLU_SILU = 1 } sr_glu;

typedef enum { SR_NORM_LAYER = 0, SR_NORM_RMS = 1 } sr_norm_kind;

/* How a weight's products multiply (chosen at weight_create, fixed for the weight):
 *   SR_KMUL_EXACT  the weight is widened exactly to f32 and multiplies the f32 activations
 *                  (every dtype; the parity mode).
 *   SR_KMUL_BF16   SR_BF16 and SR_I8 weights: each activation is rounded to bf16 (nearest even,
 *                  subnormals to zero) and the exact products of bf16 pairs accumulate in f32,
 *                  as torch's bf16 inference, bf16 tensor cores and the AVX512_BF16
 *                  dot-product instruction compute: half the arithmetic per weight of the exact
 *                  path, the few-row products of batched streams then run at the weight-read
 *                  bound. An SR_I8 weight's values q are integers of at most 8 bits, exact in
 *                  bf16: the sum is over q x bf16(x) and its row's scale multiplies the sum in
 *                  the epilogue, as in the exact path (a table may keep q in one byte: half a
 *                  bf16 weight's bytes to read). The sum's order and roundings are fixed (gemm
 *                  below), so rows stay independent and every path of a table computes the
 *                  same bits. */
typedef enum { SR_KMUL_EXACT = 0, SR_KMUL_BF16 = 1 } sr_kmul;

/* A table's record of one recorded call site (graph_begin / graph_end below); opaque. */
typedef struct sr_kgraph sr_kgraph;

/* A weight matrix in table memory: logically [n, k] (a PyTorch Linear weight [out, in]), laid
 * out however the table's gemm reads it fastest (the CPU table: column panels; CUDA: as
 * stored). Made once at load by weight_create, never changed, freed by weight_free. Element
 * types: SR_F32, SR_BF16, SR_F16 (widened exactly to f32 in the product) and SR_I8 with one f32
 * scale per row n (w[n, k] = q[n, k] * scale[n]). */
typedef struct sr_kweight {
    int n, k;          /* logical shape [n, k] */
    sr_dtype dtype;
    sr_kmul mul;       /* how its products multiply */
    size_t bytes;      /* table memory held */
    void *data;        /* the table's layout; opaque to callers */
    float *scale;      /* [n] for SR_I8 (table memory), else NULL */
} sr_kweight;

/* A cache pool: `slots` caches of `rows` rows of `width` elements for each of `layers` layers,
 * [layers][slots][rows][width] in table memory, elements SR_F32, SR_F16 or SR_BF16 (written by
 * rounding to nearest even, read by exact widening). Positions are absolute (0, 1, 2, ... since
 * the stream's start): position p of a slot lives in ring row p % rows, so a pool holds the
 * last `rows` positions of each stream. Made by sr_kpool_create (kernels/pool.c). */
typedef struct sr_kpool {
    void *data;
    sr_dtype dtype;
    int layers, slots, rows, width;
    size_t bytes;
} sr_kpool;

/* A batch of sequences (streams, or beams of one stream) whose rows sit one after another in
 * the activations: sequence s owns rows [row0[s], row0[s+1]) and cache slot slot[s]; its row
 * row0[s] + i has absolute position pos[s] + i. Host memory. */
typedef struct sr_kbatch {
    int n_seq;
    const int *row0;      /* [n_seq + 1], non-decreasing, row0[0] = 0 */
    const int *slot;      /* [n_seq] (may be NULL for ops that read no pool) */
    const int64_t *pos;   /* [n_seq] */
} sr_kbatch;

/* Attention of the batch's query rows over their own slots of a K and a V pool.
 * Query row r (of sequence s, absolute position p_r) attends to the key positions
 * [lo[r], hi[r]) of slot slot[s] (an empty range gives a zero output row); these positions
 * must be held by the pool (hi - lo <= rows, written by kv_write). Heads: query head h reads
 * K/V head h / (n_head / n_kv_head) (GQA; n_head a multiple of n_kv_head); the K and V pool
 * width is n_kv_head * head_dim, q's and out's row width n_head * head_dim.
 *   score(r, j) = scale * (q_r,h . k_j,h)                                    (plain)
 *   score(r, j) = scale * ((q_r,h + u_h) . k_j,h + (q_r,h + v_h) . P_h(p_r - j))  (rel-pos,
 *                 Transformer-XL, FastConformer: rel != NULL)
 * with P(d) the row rel_max - d of rel (rows for d = rel_max down to rel_min; every distance
 * that occurs must lie in that range). Softmax over the range (max subtracted, sum in double),
 * out_r,h = sum_j p_j v_j,h. Keys are read where they lie in the pool: nothing is copied.
 * q and out must not overlap; b->pos is read only with rel-pos; the K and V pools may differ in
 * dtype and rows (ranges are checked against the smaller). */
typedef struct sr_kattn {
    int n_head, n_kv_head, head_dim;
    float scale;
    const int64_t *lo, *hi;    /* [rows of the batch], host memory */
    const float *rel;          /* [rel_max - rel_min + 1, n_head * head_dim] or NULL */
    int rel_max, rel_min;
    const float *pos_u, *pos_v; /* [n_head * head_dim] each, with rel */
} sr_kattn;

typedef void (*sr_kzero_fn)(void *p, size_t bytes);
/* y[r, :d] = x[r, :d] for r < M (strided 2-D copy within table memory; no overlap). */
typedef sr_status (*sr_kcopy2d_fn)(int M, int d, const float *x, int ldx, float *y, int ldy);
/* n matrices transposed, the bits copied: for b < n, y_b[j, i] = x_b[i, j] (i < M, j < d) with
 * x_b = x + b M ldx ([M, d], stride ldx) and y_b = y + b d ldy ([d, M], stride ldy): channel
 * planes <-> position rows of a batch of images in one call; no overlap. */
typedef sr_status (*sr_ktranspose_fn)(int n, int M, int d, const float *x, int ldx, float *y,
                                      int ldy);
/* y[i, :d] = src[i][:d] for i < n: rows scattered in table memory (src: a host array of table
 * pointers, e.g. one row of each stream's own buffer) gathered into y (stride ldy) in one call;
 * no overlap. */
typedef sr_status (*sr_kcopy_rows_fn)(int n, int d, const float *const *src, float *y, int ldy);
/* Make a weight from a host [n, k] matrix of dtype dt (row stride k) and, for SR_I8, a host
 * scale [n], whose products multiply as `mul` says (SR_KMUL_BF16 needs dt = SR_BF16; its
 * subnormal weights count as zero). SR_ERR_NOMEM, SR_ERR_ARG (shape, dtype, mul). */
typedef sr_status (*sr_kweight_create_fn)(const void *host, sr_dtype dt, int n, int k,
                                      const float *scale, sr_kmul mul, sr_kweight **out);
typedef void (*sr_kweight_free_fn)(sr_kweight *w);
/* Linear layer: for m < M, n < W->n:
 *   t = sum_k x[m, k] w[n, k]   (f32, one fused multiply-add per k in increasing k, from 0;
 *                                SR_KMUL_BF16: x rounded to bf16, k taken in pairs
 *                                (2i, 2i + 1) (an odd K padded with a zero product), each pair
 *                                adding its odd product then its even one, every addition
 *                                rounded once to nearest even with a subnormal result
 *                                flushed to zero: VDPBF16PS's order)
 *   t = act(t + bias[n])        (bias may be NULL)
 *   y[m, n] = alpha * t + beta * y[m, n]   (beta = 0 overwrites y, NaN included; alpha = 1,
 *                                            beta = 1 is exactly y + t)
 * x [M, W->k] stride ldx; y stride ldy >= W->n; x and y must not overlap. For SR_I8 the sum
 * runs over q and is multiplied by scale[n] once. Threads: the table's set_threads count. */
typedef sr_status (*sr_kgemm_fn)(int M, const float *x, int ldx, const sr_kweight *W,
                             const float *bias, sr_act act, float alpha, float beta, float *y,
                             int ldy);
/* Per row r < M of width d: LAYER  y = (x - mean) / sqrt(var + eps) * g + b (biased variance);
 * RMS  y = x / sqrt(mean(x^2) + eps) * g (b ignored; may be NULL). Statistics in double, as
 * kernels/ops.h. Then, when mul != NULL, y *= mul[r * ld_mul + c] (Voxtral's adaptive scale
 * 1 + ada(t_cond); ld_mul = 0: one row for all). x and y may alias. */
typedef sr_status (*sr_knorm_fn)(sr_norm_kind kind, int M, int d, const float *x, int ldx,
                             const float *g, const float *b, float eps, const float *mul,
                             int ld_mul, float *y, int ldy);
/* y[i] = act(x[i]) for i < n; x and y may alias. */
typedef sr_status (*sr_kact_fn)(sr_act act, size_t n, const float *x, float *y);
/* y[r, c] = glu(a[r, c], b[r, c]) for r < M, c < d (see sr_glu); y may alias a or b. */
typedef sr_status (*sr_kglu_fn)(sr_glu kind, int M, int d, const float *a, int lda, const float *b,
                            int ldb, float *y, int ldy);
/* y[r, c] += alpha * x[r, c] (alpha = 1: exactly y + x); ldx = 0 adds row 0 of x to every row
 * (a bias or a positional row). */
typedef sr_status (*sr_kadd_fn)(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy);
/* y[r, c] *= s. */
typedef sr_status (*sr_kscale_fn)(int M, int d, float s, float *y, int ldy);
/* y[i, :] = E[ids[i], :] (widened exactly to f32) for i < n: embedding lookup from a weight
 * (the same handle serves a tied output projection). ids: host memory, each in [0, E->n). */
typedef sr_status (*sr_kgather_fn)(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy);
/* Rotary embedding in place, rotate-half layout (transformers' Llama/Mistral): every row of
 * the batch (position p from b) holds n_head heads of width hd (row stride ldx); for i < hd/2
 * the pair (x_i, x_{i+hd/2}) is rotated by a = (float)p * inv_freq[i] (f32 product, then
 * cosf/sinf): x_i' = x_i cos a - x_{i+hd/2} sin a, x_{i+hd/2}' = x_{i+hd/2} cos a + x_i sin a. */
typedef sr_status (*sr_krope_fn)(const sr_kbatch *b, int n_head, int hd, const float *inv_freq,
                             float *x, int ldx);
/* Causal 3x3 stride-2 2-D convolution per channel (NeMo's CausalConv2D in dw_striding
 * subsampling: 2 zero rows/columns before, 1 after, on time and frequency) over n images: for
 * image m < n and channel c < C,
 *   out[m][c][t][f] = b[c] + sum_{i,j < 3} w[c][3 i + j] in_mc[2t + i - 2][2f + j - 2]
 * (taps outside the plane are 0; the 9-tap sum is formed first, then added to b[c]), with
 * t < T/2 + 1, f < F/2 + 1, out images back to back [n][C][T/2 + 1][F/2 + 1]; input plane
 * in_mc = in + m * in_img_stride + c * in_plane_stride ([T][F]; plane stride 0 reads one
 * plane for every channel: the first, 1 -> C stage); relu != 0 applies ReLU. An image's
 * outputs do not depend on n (the streams of a batch convolve in one call). */
typedef sr_status (*sr_kconv2d_s2_fn)(int n, int C, int T, int F, const float *in,
                                      size_t in_img_stride, size_t in_plane_stride,
                                      const float *w, const float *b, int relu, float *out);
/* Causal depthwise 1-D conv with a carried state, per sequence of the batch: its input is
 * [state ; x rows] where state holds the K - 1 previous input rows of that sequence (slot
 * slot[s] of `state`, layer `layer`, ring rows 0 .. K-2 oldest first; all zero when the pool is
 * NULL: offline), y_t,c = bias[c] + sum_{j<K} w[c * K + j] in[t + j, c]; afterwards the state
 * holds the last K - 1 rows of [state ; x]. x [rows, C] stride ldx; y stride ldy. */
typedef sr_status (*sr_kconv_dw_fn)(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                                const float *w, const float *bias, sr_kpool *state, int layer,
                                float *y, int ldy);
/* Inference BatchNorm: y[r, c] = (x[r, c] - mean[c]) / sqrtf(var[c] + eps) * g[c] + bias[c]. */
typedef sr_status (*sr_kbatchnorm_fn)(int M, int C, const float *x, int ldx, const float *mean,
                                  const float *var, const float *g, const float *bias, float eps,
                                  float *y, int ldy);
/* LSTM cell (PyTorch gate order i, f, g, o): gates [M, 4H] already hold
 * x W_ih^T + b_ih + h W_hh^T + b_hh; c [M, H] in/out: c = sigmoid(f) c + sigmoid(i) tanh(g);
 * h [M, H] out = sigmoid(o) tanh(c). Row strides ldg, ldc, ldh. */
typedef sr_status (*sr_klstm_cell_fn)(int M, int H, const float *gates, int ldg, float *c, int ldc,
                                  float *h, int ldh);
/* Softmax of each row r < M over columns [0, N) in place (max subtracted, sum in double). */
typedef sr_status (*sr_ksoftmax_fn)(int M, int N, float *x, int ldx);
/* y[r, :] = log softmax(x[r, :]) over N columns (x - max - log sum exp, sum in double); y may
 * alias x. */
typedef sr_status (*sr_klogsoftmax_fn)(int M, int N, const float *x, int ldx, float *y, int ldy);
/* The k largest entries of each row r < M of x [M, N]: idx[r * k + i], val[r * k + i] in
 * descending value order, ties to the lower column; NaN never chosen while a number is left.
 * k = 1 is argmax. idx / val are table memory (val may be NULL); 1 <= k <= N. */
typedef sr_status (*sr_ktopk_fn)(int M, int N, int k, const float *x, int ldx, int32_t *idx,
                             float *val);
/* Write the batch's rows into layer `layer` of pool p: row row0[s] + i of x (width p->width,
 * stride ldx) goes to slot slot[s], ring row (pos[s] + i) % p->rows, converted to p->dtype. */
typedef sr_status (*sr_kkv_write_fn)(sr_kpool *p, int layer, const sr_kbatch *b, const float *x,
                                 int ldx);
/* kv_write into two distinct pools at once (a layer's K and V rows): the same as kv_write(p,
 * layer, b, x, ldx) then kv_write(p2, layer, b, x2, ldx2), each pool with its own width, ring
 * rows and element type; the same bits, in one launch on a device (one fewer a layer). Both
 * calls are checked before either pool is written. */
typedef sr_status (*sr_kkv_write2_fn)(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                                      const float *x, int ldx, const float *x2, int ldx2);
/* RoPE and the cache write of an attention layer's new rows in one call: the same as rope(b,
 * n_head, hd, inv_freq, q, ldq) (q rotated in place), rope(b, n_kv_head, hd, inv_freq, k, ldk),
 * then kv_write2(K, V, layer, b, k, ldk, v, ldv), bit for bit, except that k is left as it was
 * (its rotation goes to K only): one launch on a device instead of two. K's width is
 * n_kv_head * hd; q's elements must not be k's or v's (they may share rows: a q | k | v row). */
typedef sr_status (*sr_krope_kv_fn)(const sr_kbatch *b, int n_head, int n_kv_head, int hd,
                                    const float *inv_freq, float *q, int ldq, const float *k,
                                    int ldk, const float *v, int ldv, sr_kpool *K, sr_kpool *V,
                                    int layer);
/* Attention over pools (sr_kattn): q [rows, n_head * head_dim] stride ldq, out stride ldo. */
typedef sr_status (*sr_kattn_fn)(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                             const sr_kpool *K, const sr_kpool *V, int layer, float *out,
                             int ldo);

typedef struct sr_kernels {
    const char *name; /* "cpu" | "cuda" | "cpu-guard" */
    /* 1 when the host may read and write this table's memory directly (the CPU table): a
     * backend may then skip a download / upload round trip for host-side work on a buffer.
     * Results must be the same either way. */
    int host_visible;
    /* The products an SR_I8 weight gets in the fast mode (precision bf16, sr_model_kweight):
     * SR_KMUL_BF16 where the table keeps its bytes and multiplies them on bf16 units (CUDA: half
     * a bf16 weight's bytes a product), SR_KMUL_EXACT (0) where the exact int8 path is the faster
     * (the CPU's bf16 products would read the values as bf16 panels, twice the bytes: a decoder
     * step of Voxtral mini-4b's widths took 15.8 ms that way against 10.2 exact, no AMX). */
    sr_kmul i8_fast_mul;

    /* memory of this table's device */
    void *(*alloc)(size_t bytes);                       /* NULL on failure */
    void (*free)(void *p);                              /* NULL is a no-op */
    sr_status (*upload)(void *dst, const void *src, size_t bytes);   /* host -> table */
    sr_status (*download)(void *dst, const void *src, size_t bytes); /* table -> host */
    sr_status (*sync)(void);                            /* wait for queued work */
    /* Device memory held through this table (alloc and weight_create, all models of the
     * process): bytes live now and the most ever live. NULL where the memory is the host's
     * (CPU tables: peak RSS covers it). Thread-safe. */
    void (*mem)(size_t *live, size_t *peak);

    /* Row-major single-precision GEMM: C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C.
     * trans_a / trans_b: 0 = as stored, 1 = transposed (B as a PyTorch Linear weight [N, K]
     * is trans_b = 1). lda/ldb/ldc are row strides of the stored matrices. */
    sr_status (*sgemm)(int trans_a, int trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc);

    /* Set the number of worker threads (CPU BLAS and the op set's own pool); ignored where
     * meaningless. */
    void (*set_threads)(int n);

    /* ==== the op set (device-neutral) ==========================================================
     * Every operation on the per-chunk path of the backends. Pointers to float data are this
     * table's memory; the small control arrays (sr_kbatch, the key ranges of sr_kattn, token ids
     * of gather) are host memory. Rows are independent: an op's result for one row (or for one
     * sequence of a batch) depends only on that row's inputs and its own cache slot, never on
     * how many other rows or sequences share the call, so a stream batched with others computes
     * bit for bit what it computes alone. Every op returns SR_ERR_ARG (naming the op and the
     * argument) for negative sizes, short strides or NULL operands it needs; M = 0 (or n = 0)
     * is a no-op. A table may leave an op NULL when it lacks it: callers get
     * SR_ERR_UNSUPPORTED through sr_kernels_require(). The CPU table has all of them, and a
     * double-precision reference of each lives in tests/ref_*.c. */
    sr_kzero_fn zero;
    sr_kcopy2d_fn copy2d;
    sr_ktranspose_fn transpose;
    sr_kcopy_rows_fn copy_rows;
    sr_kweight_create_fn weight_create;
    sr_kweight_free_fn weight_free;
    sr_kgemm_fn gemm;
    sr_knorm_fn norm;
    sr_kact_fn act;
    sr_kglu_fn glu;
    sr_kadd_fn add;
    sr_kscale_fn scale;
    sr_kgather_fn gather;
    sr_krope_fn rope;
    sr_kconv2d_s2_fn conv2d_s2;
    sr_kconv_dw_fn conv_dw;
    sr_kbatchnorm_fn batchnorm;
    sr_klstm_cell_fn lstm_cell;
    sr_ksoftmax_fn softmax;
    sr_klogsoftmax_fn logsoftmax;
    sr_ktopk_fn topk;
    sr_kkv_write_fn kv_write;
    sr_kkv_write2_fn kv_write2;
    sr_krope_kv_fn rope_kv;
    sr_kattn_fn attn;

    /* ==== recording a step (optional: NULL where the table has none, the CPU's) ===============
     * A sequence of op calls a model repeats (a decoder pass, an encoder round) may be recorded
     * and then run as one submission, saving the device one launch per op: graph_begin(g)
     * starts recording this thread's op calls, graph_end(g, run) stops and, with run != 0,
     * submits what was recorded (queued in order with the ops before and after, like an op).
     * Between the two only ops of the op set may be called: alloc, free, upload, download, sync,
     * sgemm, weight_create and weight_free are refused with SR_ERR_ARG, and no op's result may be
     * read before graph_end (the recorded ops run then). The results are those of the same ops
     * called one by one, bit for bit. run = 0 (after an op failed) drops the recording without
     * setting an error message. *g is the table's record of one call site, made at its first
     * graph_begin and reused while the recorded sequence keeps its shape (only arguments change);
     * graph_free(g) frees it (NULL is a no-op). A table may record only when asked to (CUDA:
     * SRKIT_CUDA_GRAPH=1): then graph_begin and graph_end return SR_OK and the ops run as called.
     * One recording per thread at a time; a g is used by one thread at a time. */
    sr_status (*graph_begin)(sr_kgraph **g);
    sr_status (*graph_end)(sr_kgraph *g, int run);
    void (*graph_free)(sr_kgraph *g);

    /* ==== device time (optional: NULL where the table has none; SRKIT_PROFILE=device) =========
     * mark() queues a time stamp in order with the ops called before and after it (CUDA: an
     * event recorded on the op stream; the CPU table, whose ops run inside their calls: the
     * host clock) and returns its handle, NULL when none can be made (CUDA: while the thread
     * records). mark_ms(a, b) waits until b is reached and returns the milliseconds of the
     * table's own work between a and b (a negative value when they cannot be read: the error
     * is cleared, not reported). mark_free gives a mark back (NULL is a no-op). Thread-safe. */
    void *(*mark)(void);
    double (*mark_ms)(void *a, void *b);
    void (*mark_free)(void *m);
} sr_kernels;

/* The recording helpers the models call (tables without recording: nothing happens).
 * sr_kgraph_end(k, g, st): st is the outcome of the ops since sr_kgraph_begin; SR_OK submits
 * the recording and returns graph_end's status, an error drops it and returns st. */
static inline sr_status sr_kgraph_begin(const sr_kernels *k, sr_kgraph **g)
{
    return k->graph_begin ? k->graph_begin(g) : SR_OK;
}
static inline sr_status sr_kgraph_end(const sr_kernels *k, sr_kgraph *g, sr_status st)
{
    if (!k->graph_end) return st;
    sr_status e = k->graph_end(g, st == SR_OK);
    return st ? st : e;
}
static inline void sr_kgraph_free(const sr_kernels *k, sr_kgraph *g)
{
    if (k->graph_free) k->graph_free(g);
}

/* SR_ERR_UNSUPPORTED naming the table and `what` unless every op of the op set is present in
 * k (a table built before its device kernels exist leaves them NULL). */
sr_status sr_kernels_require(const sr_kernels *k, const char *what);

/* A zeroed pool in k's memory (see sr_kpool); dtype SR_F32, SR_F16 or SR_BF16, every count
 * >= 1. *out NULL on failure. Free with sr_kpool_free (NULL is a no-op). */
sr_status sr_kpool_create(const sr_kernels *k, sr_dtype dtype, int layers, int slots, int rows,
                          int width, sr_kpool **out);
void sr_kpool_free(const sr_kernels *k, sr_kpool *p);
/* Bytes of all pools live on device tables (tables with sr_kernels.mem) in the process. */
size_t sr_kpool_device_bytes(void);
/* Element offset of (layer, slot, ring row) in p->data. */
static inline size_t sr_kpool_at(const sr_kpool *p, int layer, int slot, int row)
{
    return (((size_t)layer * (size_t)p->slots + (size_t)slot) * (size_t)p->rows + (size_t)row) *
           (size_t)p->width;
}
/* The row holding absolute position pos of (layer, slot) in an f32 pool (ring row pos % rows):
 * a table-memory pointer for copy_rows' sources. */
static inline float *sr_kpool_row_f32(const sr_kpool *p, int layer, int slot, int64_t pos)
{
    return (float *)p->data + sr_kpool_at(p, layer, slot, (int)(pos % p->rows));
}
/* Zero one slot of every layer (a stream opening or resetting it). */
sr_status sr_kpool_clear(const sr_kernels *k, sr_kpool *p, int slot);
/* Ring rows [0, rows) of every layer of src's slot src_slot into dst's slot dst_slot, bit for
 * bit (through the table's copy2d: a memcpy on the host, a device copy on a device): a stream
 * taking a cached prefix. The pools share dtype, layers and width and hold `rows` rows each;
 * the rows copied and every slot of both pools are whole 4-byte words. SR_ERR_ARG otherwise. */
sr_status sr_kpool_copy_rows(const sr_kernels *k, sr_kpool *dst, int dst_slot, const sr_kpool *src,
                             int src_slot, int rows);

/* The CPU table (OpenBLAS + plain C). Never NULL. */
const sr_kernels *sr_kernels_cpu(void);

/* The CUDA table: SR_ERR_UNSUPPORTED when built without CUDA=1, SR_ERR_DEVICE (message from
 * the runtime) when no device is usable. */
sr_status sr_kernels_cuda(const sr_kernels **out);

/* Profiling (kernels/profile.c): a table that forwards every call to b and counts it and its
 * host wall time per op. Modes: SR_KPROF_HOST only that; SR_KPROF_SYNC also waits for the
 * device after each op, so that the time includes the op's device time (and the wait's own
 * cost, about 10 us a call on an H200); SR_KPROF_DEVICE puts one of b's marks before and one
 * after each op that queues device work and adds the device time between them to the op's
 * (b must have marks; read when a download or sync has waited for them anyway, or when many
 * are pending: a step's pipelining is kept, but no op overlaps its neighbours, as
 * programmatic dependent launches otherwise let them). Under SYNC and DEVICE graph_begin /
 * graph_end record nothing (the ops run as called). One base table per process
 * (SR_ERR_UNSUPPORTED for a second); the mode is process-wide, the last call's (tests switch
 * it while no op runs); the counters are process-wide and thread-safe (with several
 * threads queueing ops on one device at once, an op's device time includes what ran between
 * its marks). sr_kernels_select returns it when the environment has SRKIT_PROFILE=1, sync or
 * device. */
enum { SR_KPROF_HOST = 0, SR_KPROF_SYNC = 1, SR_KPROF_DEVICE = 2 };
typedef struct sr_kprof_entry {
    const char *op;        /* the op's field name in sr_kernels */
    uint64_t calls;
    double seconds;        /* host wall time inside the calls */
    uint64_t bytes;        /* upload / download: bytes copied (0 for the other ops) */
    uint64_t timed;        /* SR_KPROF_DEVICE: calls whose device time was read */
    double device_seconds; /* ... and that time, summed (0 in the other modes) */
} sr_kprof_entry;
/* The gemm calls of one weight shape and row-count class: the weight's shape, element type and
 * products, the classes of M being 1, 2-4, 5-16, 17-64, 65-256 and 257 up (m_hi INT_MAX). */
typedef struct sr_kprof_gemm {
    int n, k;
    sr_dtype dtype;
    sr_kmul mul;
    int m_lo, m_hi;
    uint64_t calls, rows;  /* calls, and their M summed */
    size_t weight_bytes;   /* the weight's table memory (sr_kweight.bytes), read by every call */
    double seconds;        /* host time inside the calls (SR_KPROF_SYNC: with their device time) */
    uint64_t timed;        /* SR_KPROF_DEVICE: calls whose device time was read, and that time */
    double device_seconds;
} sr_kprof_gemm;
/* The attn calls of one head layout, row-count class (the classes of gemm's) and key-count
 * class (a call's keys a row on average: 1-128, 129-512, 513-2048, 2049 up; k_hi INT_MAX): heads,
 * head width, rel-pos or not, the pools' element types; keys is the number of (row, key) pairs
 * summed over the calls, kv_bytes the bytes of K and V those pairs name (keys x n_kv_head x
 * head_dim x the two element sizes): what the calls read if each row read its own keys once. */
typedef struct sr_kprof_attn {
    int n_head, n_kv_head, head_dim, rel;
    sr_dtype k_dtype, v_dtype;
    int m_lo, m_hi, k_lo, k_hi;
    uint64_t calls, rows, keys;
    double kv_bytes;
    double seconds, device_seconds; /* as sr_kprof_gemm's */
    uint64_t timed;
} sr_kprof_attn;
sr_status sr_kernels_profiled(const sr_kernels *b, int mode, const sr_kernels **out);
/* The ops called so far (in table order) into out[0 .. cap); returns how many there are. In
 * device mode the marks still pending are read first (waiting for the device). */
int sr_kernels_profile_read(sr_kprof_entry *out, int cap);
/* The gemm calls so far by shape class (in order of first call) into out[0 .. cap); returns how
 * many classes there are (at most 128 are kept: later shapes count under the ops only). */
int sr_kernels_profile_gemm_read(sr_kprof_gemm *out, int cap);
/* The same for the attn calls by head layout, row-count and key-count class (at most 64 kept). */
int sr_kernels_profile_attn_read(sr_kprof_attn *out, int cap);
void sr_kernels_profile_reset(void);
/* For tests: forget the base table (the next sr_kernels_profiled binds anew), the mode back to
 * host time, the counters reset. Only while no op runs and no table from before is used. */
void sr_kernels_profile_unbind(void);

/* "cpu" / "cuda" / NULL (= cpu), or "cpu-guard" (kernels/cpu/guard.c: the CPU ops over memory
 * the host cannot touch outside them; for tests and porting backends). Unknown names:
 * SR_ERR_ARG listing the known ones. */
sr_status sr_kernels_select(const char *device, const sr_kernels **out);

/* ---- shared by the table implementations (kernels/) ---- */

/* Validate sgemm arguments exactly as every table's sgemm does: trans flags 0/1, M, N, K >= 0,
 * each leading dimension >= max(1, row length of the stored matrix), pointers non-NULL where
 * the product reads or writes them. SR_ERR_ARG naming the argument ("sgemm: lda = 4 < 5 ..."). */
sr_status sr_kernels_check_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A,
                                 int lda, const float *B, int ldb, const float *C, int ldc);

/* The same for the Linear ops (kernels/check.c), so every table refuses the same arguments
 * with the same messages: weight_create (also sets *out = NULL), gemm (M = 0 passes: a no-op)
 * and gather (n = 0 passes; every id in [0, E->n)). The weight handle is checked for a valid
 * shape, dtype, mul and data; its layout is the table's own. */
sr_status sr_kernels_check_weight_create(const void *host, sr_dtype dt, int n, int k,
                                         const float *scale, sr_kmul mul, sr_kweight **out);
sr_status sr_kernels_check_gemm(int M, const float *x, int ldx, const sr_kweight *W, sr_act act,
                                const float *y, int ldy);
sr_status sr_kernels_check_gather(const sr_kweight *E, const int32_t *ids, int n, const float *y,
                                  int ldy);

/* The same for the other ops (kernels/check.c): SR_OK or SR_ERR_ARG "<op>: ..."; SR_OK also
 * for the op's no-op cases (empty sizes: the caller then returns SR_OK). Batch ops give back
 * the batch's row count (*rows, 0 on failure). */
/* copy2d: sizes, pointers, ld >= d (M = 0 or d = 0 passes). */
sr_status sr_kernels_check_copy2d(int M, int d, const float *x, int ldx, const float *y, int ldy);
/* copy_rows: sizes, src and each src[i], y, ldy >= d (n or d = 0 passes). */
sr_status sr_kernels_check_copy_rows(int n, int d, const float *const *src, const float *y, int ldy);
/* transpose: sizes, pointers, ldx >= d, ldy >= M (n, M or d = 0 passes). */
sr_status sr_kernels_check_transpose(int n, int M, int d, const float *x, int ldx, const float *y,
                                     int ldy);
/* norm: kind, sizes, pointers (b for LAYER), lds, in-place with equal lds, ld_mul. */
sr_status sr_kernels_check_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx,
                                const float *g, const float *b, const float *mul, int ld_mul,
                                const float *y, int ldy);
/* act: the activation, pointers, n <= INT64_MAX (n = 0 passes). */
sr_status sr_kernels_check_act(sr_act act, size_t n, const float *x, const float *y);
/* glu: kind, sizes, pointers, lds, y aliasing a or b only with the same ld. */
sr_status sr_kernels_check_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b,
                               int ldb, const float *y, int ldy);
/* add: sizes, pointers, ldx >= d or 0 (broadcast), ldy >= d. */
sr_status sr_kernels_check_add(int M, int d, const float *x, int ldx, const float *y, int ldy);
/* scale: sizes, y, ldy >= d. */
sr_status sr_kernels_check_scale(int M, int d, const float *y, int ldy);
/* rope: the batch (with positions), sizes, even hd, pointers, ldx >= n_head * hd. */
sr_status sr_kernels_check_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq,
                                const float *x, int ldx, int *rows);
/* conv2d_s2: sizes, pointers, in_plane_stride 0 or >= T * F, in_img_stride past an image's
 * planes when n > 1 (n or C = 0 passes). */
sr_status sr_kernels_check_conv2d_s2(int n, int C, int T, int F, const float *in,
                                     size_t in_img_stride, size_t in_plane_stride, const float *w,
                                     const float *b, const float *out);
/* conv_dw: sizes, the state pool (width C, >= K - 1 rows) and the batch's slots in it, pointers,
 * lds, y not aliasing x (*rows = 0 or C = 0 passes). */
sr_status sr_kernels_check_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                                   const float *w, const float *bias, const sr_kpool *state,
                                   int layer, const float *y, int ldy, int *rows);
/* batchnorm: sizes, pointers, lds, in-place with equal lds. */
sr_status sr_kernels_check_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                                     const float *var, const float *g, const float *bias,
                                     const float *y, int ldy);
/* lstm_cell: sizes, pointers, ldg >= 4 H, ldc and ldh >= H. */
sr_status sr_kernels_check_lstm_cell(int M, int H, const float *gates, int ldg, const float *c,
                                     int ldc, const float *h, int ldh);
/* softmax: sizes, x, ldx >= N. */
sr_status sr_kernels_check_softmax(int M, int N, const float *x, int ldx);
/* logsoftmax: sizes, pointers, lds >= N, in-place with equal lds. */
sr_status sr_kernels_check_logsoftmax(int M, int N, const float *x, int ldx, const float *y,
                                      int ldy);
/* topk: sizes, 1 <= k <= N, x and idx, ldx >= N (M = 0 passes; val may be NULL). */
sr_status sr_kernels_check_topk(int M, int N, int k, const float *x, int ldx, const int32_t *idx);
/* kv_write: the pool and layer, the batch (positions, distinct slots), x, ldx >= width. */
sr_status sr_kernels_check_kv_write(const sr_kpool *p, int layer, const sr_kbatch *b,
                                    const float *x, int ldx, int *rows);
/* rope_kv: rope's checks for q and for k, kv_write2's, K's width n_kv_head * hd. */
sr_status sr_kernels_check_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd,
                                   const float *inv_freq, const float *q, int ldq, const float *k,
                                   int ldk, const float *v, int ldv, const sr_kpool *K,
                                   const sr_kpool *V, int layer, int *rows);
/* kv_write2: both kv_writes' checks, and p2 not p. */
sr_status sr_kernels_check_kv_write2(const sr_kpool *p, const sr_kpool *p2, int layer,
                                     const sr_kbatch *b, const float *x, int ldx, const float *x2,
                                     int ldx2, int *rows);
/* attn: heads, batch, K / V pools, q / out (no overlap), ranges held by the pools, rel-pos
 * distances; *maxlen the longest range, *keys the ranges' total (either may be NULL; 0 for
 * an empty batch, whose row count b->row0[b->n_seq] is then 0). */
sr_status sr_kernels_check_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                                const sr_kpool *K, const sr_kpool *V, int layer, const float *out,
                                int ldo, int64_t *maxlen, int64_t *keys);

#ifdef SR_WITH_CUDA
/* kernels/cuda/cuda.cu (extern "C"): the cuBLAS table after checking that a device exists. */
sr_status sr_cuda_kernels(const sr_kernels **out);
/* kernels/cuda/gemm.cu: which kernel computes the CUDA table's bf16-product gemm, process-wide:
 * 0 the wmma form, 1 the mma form (register-direct operands, the default); v = 0 or 1 sets it,
 * any other v only asks. Returns the kernel in use before the call. The environment's
 * SRKIT_CUDA_GEMM=wmma selects 0 until a call sets it. For tests and `srkit bench gemm`: set it
 * while no gemm runs (a gemm reads it once per call). */
int sr_cuda_gemm_kernel(int v);
/* kernels/cuda/gemm.cu: the mma kernel's columns a block, process-wide: 0 always 16 (the
 * default); above 16 rows 1 always 32, 2 by the weight's size; 3 8 at up to 16 rows (16 above);
 * v = 0 .. 3 sets it, any other v only asks. Returns the setting before the call.
 * SRKIT_CUDA_GEMM_COLS=16 / 32 / auto / 8 selects it until a call sets it. Speed only: every
 * choice gives the same bits. */
int sr_cuda_gemm_cols(int v);
/* kernels/cuda/gemm.cu: whether the mma kernel over staged x (above 16 rows) stages its operands
 * in shared memory with cp.async, STAGES - 1 k blocks ahead of each warp's products (1), or
 * loads them into registers (0, the default); v = 0 / 1 sets it, any other v only asks. Returns
 * the setting before the call. SRKIT_CUDA_GEMM_ASYNC=1 selects it until a call sets it. Speed
 * only: the same bits. */
int sr_cuda_gemm_async(int v);
/* kernels/cuda/attn.cu: the attention kernel's form, process-wide: 0 narrow (8 blocks a
 * multiprocessor), 1 wide (16 loads in flight a thread, 4 blocks), 2 by each launch's size (the
 * default: split for a launch of at most one block a multiprocessor over more than 128 keys,
 * grouped above four where it applies, else narrow or wide), 3 grouped (a K/V head's 2, 4 or 8
 * query heads in one block where GQA without rel-pos allows, else narrow), 4 split (scores by
 * key tile, values by column group: two launches of many blocks), 5 rows (up to 4 consecutive
 * rows of a sequence in one block, each K and V element read once for them, where no rel-pos
 * allows, else narrow); v = 0 .. 5 sets it, any other v only asks. Returns the form in use
 * before the call. SRKIT_CUDA_ATTN=narrow / wide / auto / grouped / split / rows selects it
 * until a call sets it. Speed only: every form gives the CPU's bits. For tests and bench: set
 * it while no attention runs. */
int sr_cuda_attn_form(int v);
/* kernels/cuda/cuda.cu: whether the CUDA table records steps (graph_begin / graph_end as CUDA
 * graphs), process-wide: 0 no, 1 each step captured and patched into its graph, 2 replayed (each
 * step's launches kept without capture, only those that changed set anew in its graph; cuda.cu).
 * v = 0 / 1 / 2 sets it, any other v only asks; returns the setting before the call.
 * SRKIT_CUDA_GRAPH=1 / replay turns it on until a call sets it (off by default). Speed only: the
 * results are the same. For tests and bench: set it while no recording runs. */
int sr_cuda_graphs(int v);
/* kernels/cuda/cuda.cu: whether the CUDA table's kernels overlap their neighbours
 * (programmatic dependent launch, compute capability 9.0 or later; ignored before), process-wide:
 * each kernel's blocks may start while the kernel queued ahead still runs and wait in place for
 * its results, and a bf16-product GEMM asks the first part of its weight into L2 meanwhile.
 * v = 0 / 1 sets it, any other v only asks; returns the setting before the call.
 * On by default; SRKIT_CUDA_PDL=0 turns it off until a call sets it. Speed only: the results
 * are the same. For tests and bench: set it while no op runs. */
int sr_cuda_pdl(int v);
/* Recordings run so far (process-wide, sr_cuda_graph_counts). */
typedef struct sr_cuda_graph_stats {
    unsigned long long updated; /* patched into the call site's executable graph */
    unsigned long long built;   /* instantiated anew: a first recording, or one of another shape */
    unsigned long long patched; /* replayed: kernel nodes set anew (launches that differed) */
    unsigned long long timed;   /* graph launches whose device time was read */
    double device_ms;           /* their device time summed: CUDA events recorded around each
                                 * launch on the stream, read at the call site's next graph_end
                                 * if complete by then (never waited for; a sample not complete
                                 * is dropped) */
} sr_cuda_graph_stats;
void sr_cuda_graph_counts(sr_cuda_graph_stats *out);
#endif

#endif /* SR_KERNELS_H */
