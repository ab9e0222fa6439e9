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

typedef struct sr_kernels {
    const char *name; /* "cpu" | "cuda" */

    /* memory of this table's device */
    void *(*alloc)(size_t bytes);                       /* NULL on failure */
    void (*free)(void *p);                              /* NULL is a no-op */
    sr_status (*upload)(void *dst, const void *src, size_t bytes);   /* host -> table */
    sr_status (*download)(void *dst, const void *src, size_t bytes); /* table -> host */
    sr_status (*sync)(void);                            /* wait for queued work */

    /* Row-major single-precision GEMM: C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C.
     * trans_a / trans_b: 0 = as stored, 1 = transposed (B as a PyTorch Linear weight [N, K]
     * is trans_b = 1). lda/ldb/ldc are row strides of the stored matrices. */
    sr_status (*sgemm)(int trans_a, int trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc);

    /* Set the number of worker threads (CPU BLAS); ignored where meaningless. */
    void (*set_threads)(int n);
} sr_kernels;

/* The CPU table (OpenBLAS + plain C). Never NULL. */
const sr_kernels *sr_kernels_cpu(void);

/* The CUDA table: SR_ERR_UNSUPPORTED when built without CUDA=1, SR_ERR_DEVICE (message from
 * the runtime) when no device is usable. */
sr_status sr_kernels_cuda(const sr_kernels **out);

/* "cpu" / "cuda" / NULL (= cpu). Unknown names: SR_ERR_ARG listing the known ones. */
sr_status sr_kernels_select(const char *device, const sr_kernels **out);

/* ---- shared by the table implementations (kernels/) ---- */

/* Validate sgemm arguments exactly as every table's sgemm does: trans flags 0/1, M, N, K >= 0,
 * each leading dimension >= max(1, row length of the stored matrix), pointers non-NULL where
 * the product reads or writes them. SR_ERR_ARG naming the argument ("sgemm: lda = 4 < 5 ..."). */
sr_status sr_kernels_check_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A,
                                 int lda, const float *B, int ldb, const float *C, int ldc);

#ifdef SR_WITH_CUDA
/* kernels/cuda/cuda.cu (extern "C"): the cuBLAS table after checking that a device exists. */
sr_status sr_cuda_kernels(const sr_kernels **out);
#endif

#endif /* SR_KERNELS_H */
