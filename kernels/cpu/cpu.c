/*
 * cpu.c — the CPU kernel table: host memory (64-byte aligned so SIMD loads and BLAS packing
 * never straddle cache lines), copies as memcpy, and GEMM through OpenBLAS's cblas_sgemm in
 * row-major mode, which computes C = alpha * op(A) op(B) + beta * C directly on the row-major
 * operands (no layout conversion here). Thread count goes to openblas_set_num_threads.
 */
#include "../../core/internal.h"
#include "../kernels.h"
#include "cpu_impl.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

/* CPUID once: it is slow (a VM exit under a hypervisor) and the paths ask on every call. */
static int f16c;
static void f16c_probe(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
#endif
}

int sr_cpu_f16c(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, f16c_probe);
    return f16c;
}

#define CPU_ALIGN 64

static void *cpu_alloc(size_t bytes)
{
    /* posix_memalign with size 0 may return NULL; a real block keeps "NULL = failure" true. */
    size_t n = bytes ? bytes : 1;
    void *p = NULL;
    if (posix_memalign(&p, CPU_ALIGN, n) != 0) return NULL;
    return p;
}

static void cpu_free(void *p) { free(p); }

static sr_status cpu_copy(void *dst, const void *src, size_t bytes, const char *what)
{
    if (bytes == 0) return SR_OK;
    if (!dst || !src)
        return sr_error(SR_ERR_ARG, "cpu %s: %s is NULL (%zu bytes)", what, dst ? "src" : "dst",
                        bytes);
    if (dst != src) memcpy(dst, src, bytes);
    return SR_OK;
}

static sr_status cpu_upload(void *dst, const void *src, size_t bytes)
{
    return cpu_copy(dst, src, bytes, "upload");
}

static sr_status cpu_download(void *dst, const void *src, size_t bytes)
{
    return cpu_copy(dst, src, bytes, "download");
}

/* OpenBLAS calls return when their work is done: nothing is ever queued. */
static sr_status cpu_sync(void) { return SR_OK; }

/* Device-time marks: the CPU's ops are done when their calls return, so a mark is the host's
 * monotonic clock at the call (SRKIT_PROFILE=device then reports the time inside the ops). */
static void *cpu_mark(void)
{
    struct timespec *t = malloc(sizeof *t);
    if (t && clock_gettime(CLOCK_MONOTONIC, t)) {
        free(t);
        t = NULL;
    }
    return t;
}
static double cpu_mark_ms(void *a, void *b)
{
    if (!a || !b) return -1.0;
    const struct timespec *x = a, *y = b;
    return (double)(y->tv_sec - x->tv_sec) * 1e3 + (double)(y->tv_nsec - x->tv_nsec) * 1e-6;
}
static void cpu_mark_free(void *m) { free(m); }

static sr_status cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C,
                           int ldc)
{
    sr_status st = sr_kernels_check_sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc);
    if (st) return st;
    if (M == 0 || N == 0) return SR_OK;
    if (K == 0) {
        /* An empty product leaves beta * C. Done here because BLAS implementations differ on
         * whether they touch C for K = 0; beta = 0 overwrites C (NaN there included), as BLAS
         * defines for beta = 0. */
        for (int i = 0; i < M; i++) {
            float *row = C + (size_t)i * (size_t)ldc;
            for (int j = 0; j < N; j++) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
        }
        return SR_OK;
    }
    if (M == 1) {
        /* One-row products (batch-1 decoding, logits): gemv reads the weight matrix once, while
         * OpenBLAS's gemm first copies (packs) all of B — twice the memory traffic. A stored
         * transposed is a column with stride lda. C is cleared for beta = 0 so that NaN there
         * is overwritten whatever the BLAS does with 0 * NaN. */
        const int inc_a = trans_a ? lda : 1;
        if (beta == 0.0f)
            for (int j = 0; j < N; j++) C[j] = 0.0f;
        if (trans_b) /* B [N, K]: C = B · a */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, alpha, B, ldb, A, inc_a, beta, C, 1);
        else /* B [K, N]: C = B^T · a */
            cblas_sgemv(CblasRowMajor, CblasTrans, K, N, alpha, B, ldb, A, inc_a, beta, C, 1);
        return SR_OK;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
    return SR_OK;
}

/* n <= 0 keeps the current count (OpenBLAS's default, or OPENBLAS_NUM_THREADS). The op set's
 * own pool (pool.c) follows the same count. */
static void cpu_set_threads(int n)
{
    if (n > 0) {
        openblas_set_num_threads(n);
        sr_cpu_set_threads(n);
    }
}

static void cpu_zero(void *p, size_t bytes)
{
    if (p && bytes) memset(p, 0, bytes);
}

static sr_status cpu_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy)
{
    sr_status st = sr_kernels_check_copy2d(M, d, x, ldx, y, ldy);
    if (st || M == 0 || d == 0) return st;
    for (int r = 0; r < M; r++)
        memcpy(y + (size_t)r * ldy, x + (size_t)r * ldx, (size_t)d * sizeof(float));
    return SR_OK;
}

static sr_status cpu_copy_rows(int n, int d, const float *const *src, float *y, int ldy)
{
    sr_status st = sr_kernels_check_copy_rows(n, d, src, y, ldy);
    if (st || n == 0 || d == 0) return st;
    for (int i = 0; i < n; i++) memcpy(y + (size_t)i * ldy, src[i], (size_t)d * sizeof(float));
    return SR_OK;
}

/* Blocks of 32 x 32: both sides are read / written in cache-line runs. */
static sr_status cpu_transpose(int n, int M, int d, const float *x, int ldx, float *y, int ldy)
{
    sr_status st = sr_kernels_check_transpose(n, M, d, x, ldx, y, ldy);
    if (st || n == 0 || M == 0 || d == 0) return st;
    for (int b = 0; b < n; b++) {
        const float *xb = x + (size_t)b * M * ldx;
        float *yb = y + (size_t)b * d * ldy;
        for (int i0 = 0; i0 < M; i0 += 32)
            for (int j0 = 0; j0 < d; j0 += 32) {
                int i1 = SR_MIN(M, i0 + 32), j1 = SR_MIN(d, j0 + 32);
                for (int i = i0; i < i1; i++)
                    for (int j = j0; j < j1; j++) yb[(size_t)j * ldy + i] = xb[(size_t)i * ldx + j];
            }
    }
    return SR_OK;
}

static const sr_kernels cpu_table = {
    .name = "cpu",
    .host_visible = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .sync = cpu_sync,
    .sgemm = cpu_sgemm,
    .set_threads = cpu_set_threads,
    .zero = cpu_zero,
    .copy2d = cpu_copy2d,
    .transpose = cpu_transpose,
    .copy_rows = cpu_copy_rows,
    .weight_create = sr_cpu_weight_create,
    .weight_free = sr_cpu_weight_free,
    .gemm = sr_cpu_gemm,
    .norm = sr_cpu_norm,
    .act = sr_cpu_act,
    .glu = sr_cpu_glu,
    .add = sr_cpu_add,
    .scale = sr_cpu_scale,
    .gather = sr_cpu_gather,
    .rope = sr_cpu_rope,
    .conv2d_s2 = sr_cpu_conv2d_s2,
    .conv_dw = sr_cpu_conv_dw,
    .batchnorm = sr_cpu_batchnorm,
    .lstm_cell = sr_cpu_lstm_cell,
    .softmax = sr_cpu_softmax,
    .logsoftmax = sr_cpu_logsoftmax,
    .topk = sr_cpu_topk,
    .kv_write = sr_cpu_kv_write,
    .kv_write2 = sr_cpu_kv_write2,
    .rope_kv = sr_cpu_rope_kv,
    .attn = sr_cpu_attn,
    .mark = cpu_mark,
    .mark_ms = cpu_mark_ms,
    .mark_free = cpu_mark_free,
};

const sr_kernels *sr_kernels_cpu(void) { return &cpu_table; }
