/*
 * checked.cu — the CUDA table with its pointers checked (SRKIT_CUDA_CHECK=1): every op first
 * asks the runtime (cudaPointerGetAttributes) whether each data pointer it was given is device
 * memory, and refuses a host pointer with SR_ERR_ARG naming the op and the argument, instead
 * of letting the kernel fault (or, on a system with unified addressing of pageable memory,
 * silently read host memory over the bus). It is the tool for porting a backend to the device:
 * run its suites with the variable set and every place still handing the table host memory
 * shows up by name. The checks cost a runtime call per pointer, so the plain table is the
 * default. Control arrays the contract puts in host memory (sr_kbatch, attention ranges,
 * gather ids, topk's k) are not checked.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

/* SR_OK when p is NULL (the op's own checks decide) or device / managed memory. */
static sr_status dev(const void *p, const char *op, const char *arg)
{
    if (!p) return SR_OK;
    cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return sr_error(SR_ERR_ARG, "cuda %s: %s (%p) is not memory the CUDA runtime knows (%s)", op,
                        arg, p, cudaGetErrorName(e));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return sr_error(SR_ERR_ARG, "cuda %s: %s (%p) is host memory, not device memory", op, arg, p);
    return SR_OK;
}

#define DEV(p, op, arg)                                                                        \
    do {                                                                                       \
        sr_status st_ = dev((const void *)(p), op, arg);                                       \
        if (st_) return st_;                                                                   \
    } while (0)

static sr_status c_copy_rows(int n, int d, const float *const *src, float *y, int ldy)
{
    if (src && y && n > 0 && d > 0) { /* (bad arguments: the op's checks say which) */
        for (int i = 0; i < n; i++)
            if (src[i]) DEV(src[i], "copy_rows", "src[i]");
        DEV(y, "copy_rows", "y");
    }
    return sr_cuda_copy_rows(n, d, src, y, ldy);
}

static sr_status c_transpose(int n, int M, int d, const float *x, int ldx, float *y, int ldy)
{
    DEV(x, "transpose", "x");
    DEV(y, "transpose", "y");
    return sr_cuda_transpose(n, M, d, x, ldx, y, ldy);
}

static sr_status c_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy)
{
    DEV(x, "copy2d", "x");
    DEV(y, "copy2d", "y");
    return sr_cuda_copy2d(M, d, x, ldx, y, ldy);
}

static sr_status c_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                        sr_act act, float alpha, float beta, float *y, int ldy)
{
    DEV(x, "gemm", "x");
    DEV(bias, "gemm", "bias");
    DEV(y, "gemm", "y");
    if (W) DEV(W->data, "gemm", "W->data");
    return sr_cuda_gemm(M, x, ldx, W, bias, act, alpha, beta, y, ldy);
}

static sr_status c_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                        const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy)
{
    DEV(x, "norm", "x");
    DEV(g, "norm", "g");
    DEV(b, "norm", "b");
    DEV(mul, "norm", "mul");
    DEV(y, "norm", "y");
    return sr_cuda_norm(kind, M, d, x, ldx, g, b, eps, mul, ld_mul, y, ldy);
}

static sr_status c_act(sr_act act, size_t n, const float *x, float *y)
{
    DEV(x, "act", "x");
    DEV(y, "act", "y");
    return sr_cuda_act(act, n, x, y);
}

static sr_status c_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                       float *y, int ldy)
{
    DEV(a, "glu", "a");
    DEV(b, "glu", "b");
    DEV(y, "glu", "y");
    return sr_cuda_glu(kind, M, d, a, lda, b, ldb, y, ldy);
}

static sr_status c_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy)
{
    DEV(x, "add", "x");
    DEV(y, "add", "y");
    return sr_cuda_add(M, d, x, ldx, alpha, y, ldy);
}

static sr_status c_scale(int M, int d, float s, float *y, int ldy)
{
    DEV(y, "scale", "y");
    return sr_cuda_scale(M, d, s, y, ldy);
}

static sr_status c_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy)
{
    DEV(y, "gather", "y");
    if (E) DEV(E->data, "gather", "E->data");
    return sr_cuda_gather(E, ids, n, y, ldy);
}

static sr_status c_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x,
                        int ldx)
{
    DEV(inv_freq, "rope", "inv_freq");
    DEV(x, "rope", "x");
    return sr_cuda_rope(b, n_head, hd, inv_freq, x, ldx);
}

static sr_status c_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                             size_t in_plane_stride, const float *w, const float *b, int relu,
                             float *out)
{
    DEV(in, "conv2d_s2", "in");
    DEV(w, "conv2d_s2", "w");
    DEV(b, "conv2d_s2", "b");
    DEV(out, "conv2d_s2", "out");
    return sr_cuda_conv2d_s2(n, C, T, F, in, in_img_stride, in_plane_stride, w, b, relu, out);
}

static sr_status c_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                           const float *w, const float *bias, sr_kpool *state, int layer, float *y,
                           int ldy)
{
    DEV(x, "conv_dw", "x");
    DEV(w, "conv_dw", "w");
    DEV(bias, "conv_dw", "bias");
    DEV(y, "conv_dw", "y");
    if (state) DEV(state->data, "conv_dw", "state->data");
    return sr_cuda_conv_dw(b, C, K, x, ldx, w, bias, state, layer, y, ldy);
}

static sr_status c_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                             const float *var, const float *g, const float *bias, float eps,
                             float *y, int ldy)
{
    DEV(x, "batchnorm", "x");
    DEV(mean, "batchnorm", "mean");
    DEV(var, "batchnorm", "var");
    DEV(g, "batchnorm", "g");
    DEV(bias, "batchnorm", "bias");
    DEV(y, "batchnorm", "y");
    return sr_cuda_batchnorm(M, C, x, ldx, mean, var, g, bias, eps, y, ldy);
}

static sr_status c_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc, float *h,
                             int ldh)
{
    DEV(gates, "lstm_cell", "gates");
    DEV(c, "lstm_cell", "c");
    DEV(h, "lstm_cell", "h");
    return sr_cuda_lstm_cell(M, H, gates, ldg, c, ldc, h, ldh);
}

static sr_status c_softmax(int M, int N, float *x, int ldx)
{
    DEV(x, "softmax", "x");
    return sr_cuda_softmax(M, N, x, ldx);
}

static sr_status c_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy)
{
    DEV(x, "logsoftmax", "x");
    DEV(y, "logsoftmax", "y");
    return sr_cuda_logsoftmax(M, N, x, ldx, y, ldy);
}

static sr_status c_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val)
{
    DEV(x, "topk", "x");
    DEV(idx, "topk", "idx");
    DEV(val, "topk", "val");
    return sr_cuda_topk(M, N, k, x, ldx, idx, val);
}

static sr_status c_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx)
{
    DEV(x, "kv_write", "x");
    if (p) DEV(p->data, "kv_write", "p->data");
    return sr_cuda_kv_write(p, layer, b, x, ldx);
}

static sr_status c_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd,
                           const float *inv_freq, float *q, int ldq, const float *k, int ldk,
                           const float *v, int ldv, sr_kpool *K, sr_kpool *V, int layer)
{
    DEV(inv_freq, "rope_kv", "inv_freq");
    DEV(q, "rope_kv", "q");
    DEV(k, "rope_kv", "k");
    DEV(v, "rope_kv", "v");
    if (K) DEV(K->data, "rope_kv", "K->data");
    if (V) DEV(V->data, "rope_kv", "V->data");
    return sr_cuda_rope_kv(b, n_head, n_kv_head, hd, inv_freq, q, ldq, k, ldk, v, ldv, K, V, layer);
}

static sr_status c_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                             const float *x, int ldx, const float *x2, int ldx2)
{
    DEV(x, "kv_write2", "x");
    DEV(x2, "kv_write2", "x2");
    if (p) DEV(p->data, "kv_write2", "p->data");
    if (p2) DEV(p2->data, "kv_write2", "p2->data");
    return sr_cuda_kv_write2(p, p2, layer, b, x, ldx, x2, ldx2);
}

static sr_status c_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                        const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo)
{
    DEV(q, "attn", "q");
    DEV(out, "attn", "out");
    if (K) DEV(K->data, "attn", "K->data");
    if (V) DEV(V->data, "attn", "V->data");
    if (a) {
        DEV(a->rel, "attn", "rel");
        DEV(a->pos_u, "attn", "pos_u");
        DEV(a->pos_v, "attn", "pos_v");
    }
    return sr_cuda_attn(a, b, q, ldq, K, V, layer, out, ldo);
}

static sr_status (*plain_sgemm)(int, int, int, int, int, float, const float *, int, const float *, int,
                                float, float *, int);

static sr_status c_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    DEV(A, "sgemm", "A");
    DEV(B, "sgemm", "B");
    DEV(C, "sgemm", "C");
    return plain_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The plain table with every op that takes device data replaced by its checked form. */
sr_kernels sr_cuda_checked_table(const sr_kernels *plain)
{
    sr_kernels t = *plain;
    plain_sgemm = plain->sgemm;
    t.sgemm = c_sgemm;
    t.copy2d = c_copy2d;
    t.transpose = c_transpose;
    t.copy_rows = c_copy_rows;
    t.gemm = c_gemm;
    t.norm = c_norm;
    t.act = c_act;
    t.glu = c_glu;
    t.add = c_add;
    t.scale = c_scale;
    t.gather = c_gather;
    t.rope = c_rope;
    t.conv2d_s2 = c_conv2d_s2;
    t.conv_dw = c_conv_dw;
    t.batchnorm = c_batchnorm;
    t.lstm_cell = c_lstm_cell;
    t.softmax = c_softmax;
    t.logsoftmax = c_logsoftmax;
    t.topk = c_topk;
    t.kv_write = c_kv_write;
    t.kv_write2 = c_kv_write2;
    t.rope_kv = c_rope_kv;
    t.attn = c_attn;
    return t;
}
