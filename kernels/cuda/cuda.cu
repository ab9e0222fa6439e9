/*
 * cuda.cu — the CUDA kernel table: device memory through the CUDA runtime (the stream-ordered
 * pool, cudaMemcpyAsync uploads, cudaMemcpy downloads, all on the legacy default stream, so a
 * download waits for every queued op),
 * sgemm through cuBLAS, and the op set from rowops.cu, gemm.cu and attn.cu (cuda_impl.h).
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
#include <stdlib.h>
#include <string.h>

#include <new>
#include <unordered_map>

#include "cuda_impl.h"

/* Live device bytes by pointer, for sr_kernels.mem (the sizes cudaFree is not told), and
 * whether the block came from the stream-ordered pool. */
struct MemBlock {
    size_t bytes;
    bool pooled;
};
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static std::unordered_map<void *, MemBlock> *mem_sizes;
static size_t mem_live, mem_peak;

/* The table's alloc / free run per chunk in the backends (scratch of a step): plain cudaMalloc
 * costs up to a millisecond and cudaFree waits for the whole device, once per stream and step.
 * So they come from the device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync on the
 * legacy default stream, where every op and copy of the table is ordered), its release
 * threshold raised so freed blocks stay cached for the next step instead of going back to the
 * driver at each synchronization. Devices without pools use cudaMalloc / cudaFree. */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static bool pool_ok;

static void pool_init(void)
{
    int dev = 0, has = 0;
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    pool_ok = cudaGetDevice(&dev) == cudaSuccess &&
              cudaDeviceGetAttribute(&has, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess &&
              has && cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
              cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess;
    (void)cudaGetLastError();
}

static cudaError_t dev_malloc(void **p, size_t bytes, bool pooled)
{
    *p = NULL;
    if (pooled) pthread_once(&pool_once, pool_init);
    pooled = pooled && pool_ok;
    cudaError_t e = pooled ? cudaMallocAsync(p, bytes, 0) : cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return e;
    }
    pthread_mutex_lock(&mem_lock);
    try {
        if (!mem_sizes) mem_sizes = new std::unordered_map<void *, MemBlock>();
        (*mem_sizes)[*p] = MemBlock{bytes, pooled};
        mem_live += bytes;
        if (mem_live > mem_peak) mem_peak = mem_live;
    } catch (const std::bad_alloc &) {
        e = cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&mem_lock);
    if (e != cudaSuccess) {
        if (pooled) (void)cudaFreeAsync(*p, 0);
        else (void)cudaFree(*p);
        *p = NULL;
    }
    return e;
}

cudaError_t sr_cuda_malloc(void **p, size_t bytes) { return dev_malloc(p, bytes, false); }

int sr_cuda_sm_count(void)
{
    static const int count = [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        return v;
    }();
    return count;
}
cudaError_t sr_cuda_malloc_pooled(void **p, size_t bytes) { return dev_malloc(p, bytes, true); }

void sr_cuda_free(void *p)
{
    if (!p) return;
    bool pooled = false;
    pthread_mutex_lock(&mem_lock);
    if (mem_sizes) {
        auto it = mem_sizes->find(p);
        if (it != mem_sizes->end()) {
            mem_live -= it->second.bytes;
            pooled = it->second.pooled;
            mem_sizes->erase(it);
        }
    }
    pthread_mutex_unlock(&mem_lock);
    if (pooled) (void)cudaFreeAsync(p, 0);
    else (void)cudaFree(p);
}

static void cuda_mem(size_t *live, size_t *peak)
{
    pthread_mutex_lock(&mem_lock);
    if (live) *live = mem_live;
    if (peak) *peak = mem_peak;
    pthread_mutex_unlock(&mem_lock);
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

sr_status sr_cuda_fail(const char *what, cudaError_t e)
{
    /* Clear the sticky "last error" so that later calls report their own failure. */
    (void)cudaGetLastError();
    return sr_error(SR_ERR_DEVICE, "cuda %s: %s (%s)", what, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

sr_status sr_cuda_launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SR_OK : sr_cuda_fail(what, e);
}

static void *cuda_alloc(size_t bytes)
{
    void *p = NULL;
    /* a 0-byte block may come back NULL; one byte keeps "NULL = failure" true */
    return dev_malloc(&p, bytes ? bytes : 1, true) == cudaSuccess ? p : NULL;
}

static void cuda_free(void *p) { sr_cuda_free(p); }

static sr_status cuda_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                           const char *what)
{
    if (bytes == 0) return SR_OK;
    if (!dst || !src)
        return sr_error(SR_ERR_ARG, "cuda %s: %s is NULL (%zu bytes)", what, dst ? "src" : "dst",
                        bytes);
    /* An upload is queued on the legacy stream behind the ops before it, without waiting for
     * them: from pageable memory the runtime copies the source into its own staging memory
     * before returning, so the caller may reuse it at once (a synchronous cudaMemcpy would first
     * wait for the whole queue: once per upload, several per step). A download must wait. */
    cudaError_t e = kind == cudaMemcpyHostToDevice ? cudaMemcpyAsync(dst, src, bytes, kind, 0)
                                                   : cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess) return sr_cuda_fail(what, e);
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
    if (e != cudaSuccess) return sr_cuda_fail("sync", e);
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
        if (e != cudaSuccess) return sr_cuda_fail("sgemm beta scaling", e);
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

/* nvcc's C++17 has no designated initializers: the table is filled field by field, once, at
 * static initialization. */
static sr_kernels make_table(void)
{
    sr_kernels t;
    memset(&t, 0, sizeof t);
    t.name = "cuda";
    t.alloc = cuda_alloc;
    t.free = cuda_free;
    t.upload = cuda_upload;
    t.download = cuda_download;
    t.sync = cuda_sync;
    t.mem = cuda_mem;
    t.sgemm = cuda_sgemm;
    t.set_threads = cuda_set_threads;
    t.zero = sr_cuda_zero;
    t.copy2d = sr_cuda_copy2d;
    t.transpose = sr_cuda_transpose;
    t.copy_rows = sr_cuda_copy_rows;
    t.weight_create = sr_cuda_weight_create;
    t.weight_free = sr_cuda_weight_free;
    t.gemm = sr_cuda_gemm;
    t.norm = sr_cuda_norm;
    t.act = sr_cuda_act;
    t.glu = sr_cuda_glu;
    t.add = sr_cuda_add;
    t.scale = sr_cuda_scale;
    t.gather = sr_cuda_gather;
    t.rope = sr_cuda_rope;
    t.conv2d_s2 = sr_cuda_conv2d_s2;
    t.conv_dw = sr_cuda_conv_dw;
    t.batchnorm = sr_cuda_batchnorm;
    t.lstm_cell = sr_cuda_lstm_cell;
    t.softmax = sr_cuda_softmax;
    t.logsoftmax = sr_cuda_logsoftmax;
    t.topk = sr_cuda_topk;
    t.kv_write = sr_cuda_kv_write;
    t.attn = sr_cuda_attn;
    return t;
}
static const sr_kernels cuda_table = make_table();
static const sr_kernels cuda_table_checked = sr_cuda_checked_table(&cuda_table);

extern "C" sr_status sr_cuda_kernels(const sr_kernels **out)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return sr_cuda_fail("cudaGetDeviceCount", e);
    if (n == 0) return sr_error(SR_ERR_DEVICE, "cuda: no CUDA device present");
    const char *check = getenv("SRKIT_CUDA_CHECK"); /* checked.cu: refuse host pointers */
    *out = check && !strcmp(check, "1") ? &cuda_table_checked : &cuda_table;
    return SR_OK;
}
