/*
 * cuda.cu — the CUDA kernel table: device memory through the CUDA runtime (cudaMalloc /
 * cudaMemcpy, all on the legacy default stream, so a download waits for every queued GEMM)
 * and GEMM through cuBLAS.
 *
 * cuBLAS is column-major, the library row-major. A row-major [R, C] matrix with row stride ld
 * is, read column-major, its transpose [C, R] with the same leading dimension. So the
 * row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: call
 * cublasSgemm with the operands swapped (B first), the same transpose flags, m = N, n = M,
 * and the row strides passed unchanged as leading dimensions.
 *
 * One cuBLAS handle serves the process. It is created on first use under pthread_once and its
 * configuration is set once there and never changed afterwards, which is what cuBLAS requires
 * for sharing a handle between host threads. Built only with make CUDA=1.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>

extern "C" {
#include "../kernels.h"
/* core/internal.h's reporter, declared here so that nvcc needs none of the C-only headers. */
sr_status sr_error(sr_status s, const char *fmt, ...);
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static cublasHandle_t blas_handle;
static cublasStatus_t blas_init_status = CUBLAS_STATUS_NOT_INITIALIZED;

static void blas_init(void)
{
    blas_init_status = cublasCreate(&blas_handle);
    /* Full FP32 arithmetic: no TF32 tensor-core rounding, so results match the CPU table
     * within single-precision rounding error. */
    if (blas_init_status == CUBLAS_STATUS_SUCCESS)
        blas_init_status = cublasSetMathMode(blas_handle, CUBLAS_DEFAULT_MATH);
}

static sr_status cuda_fail(const char *what, cudaError_t e)
{
    /* Clear the sticky "last error" so that later calls report their own failure. */
    (void)cudaGetLastError();
    return sr_error(SR_ERR_DEVICE, "cuda %s: %s (%s)", what, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

static void *cuda_alloc(size_t bytes)
{
    void *p = NULL;
    /* cudaMalloc(0) may succeed with NULL; one byte keeps "NULL = failure" true. */
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cuda_free(void *p)
{
    if (p) (void)cudaFree(p);
}

static sr_status cuda_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                           const char *what)
{
    if (bytes == 0) return SR_OK;
    if (!dst || !src)
        return sr_error(SR_ERR_ARG, "cuda %s: %s is NULL (%zu bytes)", what, dst ? "src" : "dst",
                        bytes);
    cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess) return cuda_fail(what, e);
    return SR_OK;
}

static sr_status cuda_upload(void *dst, const void *src, size_t bytes)
{
    return cuda_copy(dst, src, bytes, cudaMemcpyHostToDevice, "upload");
}

static sr_status cuda_download(void *dst, const void *src, size_t bytes)
{
    return cuda_copy(dst, src, bytes, cudaMemcpyDeviceToHost, "download");
}

static sr_status cuda_sync(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_fail("sync", e);
    return SR_OK;
}

/* The grid's y extent is limited to 65535 blocks; rows past it are covered by the loop. */
#define GRID_Y(n) ((n) < 65535 ? (n) : 65535)

/* C[i, j] = beta * C[i, j] over an M x N block with row stride ldc; beta = 0 stores zeros so
 * that NaN in an uninitialized C does not survive (BLAS semantics). */
__global__ static void scale_rows(float *C, int M, int N, int ldc, float beta)
{
    int j = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= N) return;
    for (int i = (int)(blockIdx.y * blockDim.y + threadIdx.y); i < M;
         i += (int)(gridDim.y * blockDim.y)) {
        float *c = C + (size_t)i * (size_t)ldc + j;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

static sr_status blas_handle_get(cublasHandle_t *h)
{
    if (pthread_once(&blas_once, blas_init) != 0)
        return sr_error(SR_ERR_DEVICE, "cuBLAS: pthread_once failed");
    if (blas_init_status != CUBLAS_STATUS_SUCCESS)
        return sr_error(SR_ERR_DEVICE, "cuBLAS init: %s (%s)",
                        cublasGetStatusString(blas_init_status),
                        cublasGetStatusName(blas_init_status));
    *h = blas_handle;
    return SR_OK;
}

static sr_status cuda_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta, float *C,
                            int ldc)
{
    sr_status st = sr_kernels_check_sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc);
    if (st) return st;
    if (M == 0 || N == 0) return SR_OK;
    if (K == 0) {
        /* An empty product leaves beta * C. Done here, as in the CPU table, rather than
         * relying on how a GEMM library treats k = 0. */
        dim3 block(32, 8);
        dim3 grid((unsigned)((N + 31) / 32), (unsigned)GRID_Y((M + 7) / 8));
        scale_rows<<<grid, block>>>(C, M, N, ldc, beta);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return cuda_fail("sgemm beta scaling", e);
        return SR_OK;
    }
    cublasHandle_t h = NULL;
    if ((st = blas_handle_get(&h))) return st;
    cublasStatus_t s = cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb,
                                   A, lda, &beta, C, ldc);
    if (s != CUBLAS_STATUS_SUCCESS)
        return sr_error(SR_ERR_DEVICE, "cuBLAS sgemm (M = %d, N = %d, K = %d): %s (%s)", M, N, K,
                        cublasGetStatusString(s), cublasGetStatusName(s));
    return SR_OK;
}

/* cuBLAS chooses its own parallelism. */
static void cuda_set_threads(int n) { (void)n; }

static const sr_kernels cuda_table = {
    "cuda", cuda_alloc, cuda_free, cuda_upload, cuda_download, cuda_sync, cuda_sgemm,
    cuda_set_threads,
};

extern "C" sr_status sr_cuda_kernels(const sr_kernels **out)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return cuda_fail("cudaGetDeviceCount", e);
    if (n == 0) return sr_error(SR_ERR_DEVICE, "cuda: no CUDA device present");
    *out = &cuda_table;
    return SR_OK;
}
