/*
 * select.c — picks a kernel table by device name and holds the argument checks every table's
 * sgemm shares, so CPU and CUDA reject exactly the same calls with the same messages.
 * The CUDA table itself lives in kernels/cuda/cuda.cu and is linked only with make CUDA=1.
 */
#include "../core/internal.h"
#include "cpu/cpu_impl.h" /* sr_kernels_cpu_guard */
#include "kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

sr_status sr_kernels_check_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A,
                                 int lda, const float *B, int ldb, const float *C, int ldc)
{
    if (trans_a != 0 && trans_a != 1)
        return sr_error(SR_ERR_ARG, "sgemm: trans_a = %d, must be 0 or 1", trans_a);
    if (trans_b != 0 && trans_b != 1)
        return sr_error(SR_ERR_ARG, "sgemm: trans_b = %d, must be 0 or 1", trans_b);
    if (M < 0) return sr_error(SR_ERR_ARG, "sgemm: M = %d is negative", M);
    if (N < 0) return sr_error(SR_ERR_ARG, "sgemm: N = %d is negative", N);
    if (K < 0) return sr_error(SR_ERR_ARG, "sgemm: K = %d is negative", K);
    /* Row length of each stored matrix: A is [M, K] or, transposed, [K, M]; B is [K, N] or
     * [N, K]; C is [M, N]. BLAS requires ld >= max(1, row length) even for empty matrices. */
    int a_row = trans_a ? M : K;
    int b_row = trans_b ? K : N;
    if (lda < SR_MAX(1, a_row))
        return sr_error(SR_ERR_ARG, "sgemm: lda = %d < %d, the row length of A stored as [%d, %d]",
                        lda, SR_MAX(1, a_row), trans_a ? K : M, a_row);
    if (ldb < SR_MAX(1, b_row))
        return sr_error(SR_ERR_ARG, "sgemm: ldb = %d < %d, the row length of B stored as [%d, %d]",
                        ldb, SR_MAX(1, b_row), trans_b ? N : K, b_row);
    if (ldc < SR_MAX(1, N))
        return sr_error(SR_ERR_ARG, "sgemm: ldc = %d < %d, the row length of C [%d, %d]", ldc,
                        SR_MAX(1, N), M, N);
    if (M > 0 && N > 0) {
        if (!C) return sr_error(SR_ERR_ARG, "sgemm: C is NULL for a [%d, %d] result", M, N);
        if (K > 0 && !A) return sr_error(SR_ERR_ARG, "sgemm: A is NULL (M = %d, K = %d)", M, K);
        if (K > 0 && !B) return sr_error(SR_ERR_ARG, "sgemm: B is NULL (K = %d, N = %d)", K, N);
    }
    return SR_OK;
}

sr_status sr_kernels_cuda(const sr_kernels **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_kernels_cuda: out is NULL");
    *out = NULL;
#ifdef SR_WITH_CUDA
    return sr_cuda_kernels(out);
#else
    return sr_error(SR_ERR_UNSUPPORTED, "built without CUDA: rebuild with make CUDA=1");
#endif
}

static sr_status select_base(const char *device, const sr_kernels **out)
{
    if (!device || strcmp(device, "cpu") == 0) {
        *out = sr_kernels_cpu();
        return SR_OK;
    }
    if (strcmp(device, "cuda") == 0) return sr_kernels_cuda(out);
    if (strcmp(device, "cpu-guard") == 0) { /* kernels/cpu/guard.c: for tests and porting */
        *out = sr_kernels_cpu_guard();
        return SR_OK;
    }
    return sr_error(SR_ERR_ARG, "device \"%s\": unknown; known devices: cpu, cuda, cpu-guard", device);
}

/* SRKIT_PROFILE=1 / sync / device: the device's table wrapped by the profiling table (profile.c). */
sr_status sr_kernels_select(const char *device, const sr_kernels **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_kernels_select: out is NULL");
    *out = NULL;
    const sr_kernels *k = NULL;
    sr_status st = select_base(device, &k);
    if (st) return st;
    const char *prof = getenv("SRKIT_PROFILE");
    if (!prof || !*prof || !strcmp(prof, "0")) {
        *out = k;
        return SR_OK;
    }
    const int mode = !strcmp(prof, "1") ? SR_KPROF_HOST : !strcmp(prof, "sync") ? SR_KPROF_SYNC
                     : !strcmp(prof, "device") ? SR_KPROF_DEVICE : -1;
    if (mode < 0)
        return sr_error(SR_ERR_ARG, "SRKIT_PROFILE=%s: 1 (time each op's call), sync (each op "
                        "waited for) or device (each op's device time), or unset", prof);
    return sr_kernels_profiled(k, mode, out);
}

sr_status sr_kernels_require(const sr_kernels *k, const char *what)
{
    if (!k) return sr_error(SR_ERR_ARG, "%s: no kernel table", what);
    const struct { const char *name; const void *fn; } ops[] = {
#define OP(f) {#f, (const void *)k->f}
        OP(zero), OP(copy2d), OP(transpose), OP(copy_rows), OP(weight_create), OP(weight_free), OP(gemm), OP(norm), OP(act),
        OP(glu), OP(add), OP(scale), OP(gather), OP(rope), OP(conv2d_s2),
        OP(conv_dw), OP(batchnorm), OP(lstm_cell), OP(softmax), OP(logsoftmax), OP(topk),
        OP(kv_write), OP(kv_write2), OP(rope_kv), OP(attn),
#undef OP
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!ops[i].fn)
            return sr_error(SR_ERR_UNSUPPORTED, "%s: the %s table has no op %s yet", what,
                            k->name, ops[i].name);
    return SR_OK;
}
