/*
 * cuda.cu — the CUDA kernel table: device memory through the CUDA runtime (the stream-ordered
 * pool, cudaMemcpyAsync uploads, cudaMemcpy downloads, all on the legacy default stream, so a
 * download waits for every queued op),
 * sgemm through cuBLAS, the op set from rowops.cu, gemm.cu and attn.cu (cuda_impl.h), and
 * recording (graph_begin / graph_end, below).
 *
 * Recording, as CUDA graphs (SRKIT_CUDA_GRAPH=1 or sr_cuda_graphs(1); off by default). A
 * record (sr_kgraph) owns a non-blocking capture stream and the executable graph of its last
 * recording. graph_begin starts a capture of that stream (thread-local capture mode) and points
 * the calling thread's sr_cuda_stream() at it, so the ops' launches, device copies and pool
 * blocks land in the capture; other threads keep queueing on the legacy stream, untouched.
 * graph_end ends the capture and runs the graph on the legacy stream (in order with what came
 * before and after, as an op would be). An op's scratch block is allocated from the pool on the
 * legacy stream at recording time and freed there after the launch, so a recording has only
 * kernel and copy nodes. The kernel arguments of a recording are its own (every
 * op passes its control arrays by value), so each step is recorded anew and, where its graph
 * has the shape (node count) of one of the call site's last REC_SHAPES, patched into that
 * executable graph with cudaGraphExecUpdate (cheap) instead of instantiated again.
 * A step then costs the host its op calls (recorded, not launched) plus one update and one
 * launch, and the device runs the kernels back to back without a launch between them.
 *
 * Replayed recording (SRKIT_CUDA_GRAPH=replay or sr_cuda_graphs(2)). A captured step costs the
 * host about as much as launching its ops, and the update of a graph of hundreds of nodes about
 * 0.8 ms more (an H200, Voxtral batch 1), while the device waits: recording did not pay at
 * batch 1 (docs/benchmarks.md). In this form nothing is captured while the ops are called:
 * sr_cuda_launch keeps each launch (kernel, shape, PDL, a copy of its arguments) in the
 * record's launch log (kernels/launch_log.h) instead of launching it. graph_end compares the log
 * with those its executable graphs were made from: of the same shape (the same kernels in the
 * same order, arguments of the same sizes), only the launches whose grid, block, shared memory or
 * argument bytes differ are set anew in that graph (cudaGraphExecKernelNodeSetParams: at batch
 * 1, the few whose positions or ring rows moved); of a new shape, the log is captured into a
 * graph (each launch as it was kept, its node taken from the capture) and instantiated. Then the
 * graph is launched. The kernels and their arguments are those the ops would have launched, in
 * the same order: the same results. Inside such a recording zero, copy2d and act without an
 * activation are kernels too (rowops.cu), so every node is a kernel node.
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

#include <atomic>
#include <new>
#include <unordered_map>
#include <vector>

#include "cuda_impl.h"
extern "C" {
#include "../launch_log.h"
}

/* ---- the stream of this thread's ops ---------------------------------------------------------- */

/* A call site's record: the stream its recordings capture and the executable graphs of its last
 * shapes (a shape: the recording's node count; a batched step alternates between a few, e.g.
 * 16 rows or fewer and more), each reused for the next recording of its node count. */
#define REC_SHAPES 4
#define REC_ARGS 64 /* arguments a kernel of a replayed recording may take (the table's have < 32) */
struct sr_kgraph {
    cudaStream_t cap = NULL; /* non-blocking: legacy-stream work of other threads never joins it */
    struct {
        size_t nodes = 0;
        cudaGraphExec_t exec = NULL;
        unsigned long long used = 0; /* the record's clock at its last launch */
        /* replayed recording: the graph exec was instantiated from (its nodes name exec's), the
         * node of each launch, and the launches exec's nodes now hold (empty: made by capture) */
        cudaGraph_t graph = NULL;
        std::vector<cudaGraphNode_t> node;
        sr_klog log = {};
    } shape[REC_SHAPES];
    unsigned long long clock = 0;
    std::vector<void *> later; /* pool blocks freed while recording: freed after the launch */
    bool lost = false;         /* one of them could not be kept in later (no host memory) */
    bool defer = false;        /* this recording keeps its launches in cur (replayed) */
    sr_klog cur = {};          /* the launches of the step being recorded (replayed) */
    const char *unkept = NULL; /* why a launch could not be kept in cur (graph_end reports it) */
    cudaEvent_t ev[2] = {NULL, NULL}; /* around the last launch: its device time */
    bool ev_pending = false;          /* ev holds a launch not yet read */
};

/* The record this thread is recording into (NULL: none), and what it was refused meanwhile
 * (an alloc / free / weight_free, which have no status to return it through; graph_end does). */
static thread_local sr_kgraph *tls_rec;
static thread_local const char *tls_refused;

cudaStream_t sr_cuda_stream(void) { return tls_rec && !tls_rec->defer ? tls_rec->cap : (cudaStream_t)0; }

bool sr_cuda_deferring(void) { return tls_rec && tls_rec->defer; }

void sr_cuda_defer(const void *kern, dim3 grid, dim3 block, size_t smem, bool pdl,
                   const void *const *args, const size_t *sizes, int n)
{
    sr_kgraph *r = tls_rec;
    if (!r || r->unkept) return;
    const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
    if (n > REC_ARGS) r->unkept = "a kernel of more than 64 arguments";
    else if (sr_klog_add(&r->cur, kern, g, b, smem, pdl, args, sizes, n))
        r->unkept = "a launch not kept (no host memory, or a grid or block of 0)";
}

/* A status-less call refused while recording: graph_end reports the first one, by name. */
static void refuse_later(const char *what)
{
    if (!tls_refused) tls_refused = what;
}

static sr_status refuse_recording(const char *what)
{
    return sr_error(SR_ERR_ARG, "cuda %s: called while recording a graph (between graph_begin "
                    "and graph_end only ops may be called)", what);
}

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
    /* Pool blocks always on the legacy stream, also while this thread records (allowed: the
     * capture stream is non-blocking): an op's scratch block is then allocated in order before
     * the graph's launch, and its free is deferred to after it (sr_cuda_free), so a recording
     * holds no allocation node, which cudaGraphExecUpdate could not patch. The thread's capture
     * mode is relaxed for that one call: thread-local mode refuses any allocation while the
     * thread captures (cudaErrorStreamCaptureUnsupported, on an H200) and the refusal breaks the
     * capture. */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const bool relax = pooled && tls_rec;
    if (relax) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = pooled ? cudaMallocAsync(p, bytes, 0) : cudaMalloc(p, bytes);
    if (relax) (void)cudaThreadExchangeStreamCaptureMode(&mode);
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

/* An attribute of the current device, or 0 if the query fails (its error cleared). */
static int dev_attr(cudaDeviceAttr a)
{
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v;
}

int sr_cuda_sm_count(void)
{
    static const int count = dev_attr(cudaDevAttrMultiProcessorCount);
    return count > 0 ? count : 132;
}
cudaError_t sr_cuda_malloc_pooled(void **p, size_t bytes) { return dev_malloc(p, bytes, true); }

/* ---- overlapping launches (cuda_impl.h: sr_cuda_launch, sr_pdl_enter) ----------------------- */

/* on by default: an H200 ran Nemotron's batch-1 step 1.2x, Voxtral's 1.06x and tiny.en's
 * offline decoding 1.06x faster with it (docs/benchmarks.md, the fifth device session) */
static sr_cuda_setting pdl_setting = {"SRKIT_CUDA_PDL", {"0", "1", NULL}, 1, {-1}, {-2}};

extern "C" int sr_cuda_pdl(int v) { return sr_cuda_setting_use(pdl_setting, v); }

void sr_cuda_pdl_refused(void) { sr_cuda_pdl(0); }

bool sr_cuda_pdl_live(void)
{
    /* the attribute needs compute capability 9.0 (earlier devices: plain launches) */
    static const bool able = dev_attr(cudaDevAttrComputeCapabilityMajor) >= 9;
    return able && sr_cuda_pdl(-1) == 1;
}

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
    if (pooled && tls_rec) { /* the recorded ops using it run at graph_end's launch */
        try {
            tls_rec->later.push_back(p);
        } catch (const std::bad_alloc &) {
            /* freed now, so graph_end must drop the recording (whose ops would still use it) */
            tls_rec->lost = true;
            (void)cudaFreeAsync(p, 0);
        }
        return;
    }
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
    if (tls_rec) {
        refuse_later("alloc");
        return NULL;
    }
    void *p = NULL;
    /* a 0-byte block may come back NULL; one byte keeps "NULL = failure" true */
    return dev_malloc(&p, bytes ? bytes : 1, true) == cudaSuccess ? p : NULL;
}

static void cuda_free(void *p)
{
    if (tls_rec && p) {
        refuse_later("free");
        return;
    }
    sr_cuda_free(p);
}

static sr_status cuda_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                           const char *what)
{
    if (tls_rec) return refuse_recording(what);
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
    if (tls_rec) return refuse_recording("sync");
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return sr_cuda_fail("sync", e);
    return SR_OK;
}

/* Device-time marks (SRKIT_PROFILE=device): events recorded on the legacy stream, where every op
 * of the table runs when the thread does not record. Given-back events are kept for reuse (up
 * to 16,384): no create / destroy pair per op. */
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static std::vector<cudaEvent_t> *mark_spare;

static void *cuda_mark(void)
{
    if (tls_rec) return NULL; /* a recording's events would time its capture, not its run */
    cudaEvent_t ev = NULL;
    pthread_mutex_lock(&mark_lock);
    if (mark_spare && !mark_spare->empty()) {
        ev = mark_spare->back();
        mark_spare->pop_back();
    }
    pthread_mutex_unlock(&mark_lock);
    if (!ev && cudaEventCreate(&ev) != cudaSuccess) ev = NULL;
    if (ev && cudaEventRecord(ev, 0) != cudaSuccess) {
        (void)cudaEventDestroy(ev);
        ev = NULL;
    }
    (void)cudaGetLastError();
    return ev;
}

static double cuda_mark_ms(void *a, void *b)
{
    float ms = 0.0f;
    const bool ok = a && b && cudaEventSynchronize((cudaEvent_t)b) == cudaSuccess &&
                    cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b) == cudaSuccess;
    (void)cudaGetLastError();
    return ok ? (double)ms : -1.0;
}

static void cuda_mark_free(void *m)
{
    if (!m) return;
    pthread_mutex_lock(&mark_lock);
    bool kept = false;
    try {
        if (!mark_spare) mark_spare = new std::vector<cudaEvent_t>();
        if (mark_spare->size() < 16384) {
            mark_spare->push_back((cudaEvent_t)m);
            kept = true;
        }
    } catch (const std::bad_alloc &) {
    }
    pthread_mutex_unlock(&mark_lock);
    if (!kept) (void)cudaEventDestroy((cudaEvent_t)m);
}

/* The grid's y extent is limited to 65535 blocks; rows past it are covered by the loop. */
#define GRID_Y(n) ((n) < 65535 ? (n) : 65535)

/* C[i, j] = beta * C[i, j] over an M x N block with row stride ldc; beta = 0 stores zeros so
 * that NaN in an uninitialized C does not survive (BLAS semantics). */
__global__ static void scale_rows(float *C, int M, int N, int ldc, float beta)
{
    sr_pdl_enter();
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
    if (tls_rec) return refuse_recording("sgemm"); /* cuBLAS's handle queues on the legacy stream */
    sr_status st = sr_kernels_check_sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc);
    if (st) return st;
    if (M == 0 || N == 0) return SR_OK;
    if (K == 0) {
        /* An empty product leaves beta * C. Done here, as in the CPU table, rather than
         * relying on how a GEMM library treats k = 0. */
        dim3 block(32, 8);
        dim3 grid((unsigned)((N + 31) / 32), (unsigned)GRID_Y((M + 7) / 8));
        sr_cuda_launch(scale_rows, grid, block, 0, C, M, N, ldc, beta);
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

/* Weights are made and freed at load and unload, never inside a recording. */
static sr_status cuda_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                                    sr_kmul mul, sr_kweight **out)
{
    if (tls_rec) {
        if (out) *out = NULL;
        return refuse_recording("weight_create");
    }
    return sr_cuda_weight_create(host, dt, n, k, scale, mul, out);
}

static void cuda_weight_free(sr_kweight *w)
{
    if (tls_rec && w) {
        refuse_later("weight_free");
        return;
    }
    sr_cuda_weight_free(w);
}

/* ---- recording (graph_begin / graph_end, see the top of the file) -------------------------- */

static sr_cuda_setting graphs_setting = {"SRKIT_CUDA_GRAPH", {"0", "1", "replay", NULL}, 0, {-1}, {-2}};
static std::atomic<unsigned long long> graphs_updated{0}, graphs_built{0}, graphs_patched{0},
    graphs_timed{0}, graphs_device_us{0};

extern "C" int sr_cuda_graphs(int v) { return sr_cuda_setting_use(graphs_setting, v); }

extern "C" void sr_cuda_graph_counts(sr_cuda_graph_stats *out)
{
    out->updated = graphs_updated.load();
    out->built = graphs_built.load();
    out->patched = graphs_patched.load();
    out->timed = graphs_timed.load();
    out->device_ms = (double)graphs_device_us.load() / 1000.0;
}

/* The device time of the record's last timed launch, if its end event has completed (never
 * waited for: a sample not complete is dropped). */
static void graph_time_read(sr_kgraph *r)
{
    if (!r->ev_pending) return;
    r->ev_pending = false;
    float ms = 0.0f;
    if (cudaEventQuery(r->ev[1]) == cudaSuccess && cudaEventElapsedTime(&ms, r->ev[0], r->ev[1]) == cudaSuccess) {
        graphs_timed.fetch_add(1);
        graphs_device_us.fetch_add((unsigned long long)(ms * 1000.0f + 0.5f));
    }
    (void)cudaGetLastError(); /* cudaErrorNotReady */
}

/* exec launched on the legacy stream between two events of the record (its device time, read
 * at the record's next graph_end); without events (their creation failed) launched alone. */
static cudaError_t graph_launch(sr_kgraph *r, cudaGraphExec_t exec)
{
    graph_time_read(r);
    if (!r->ev[0] && (cudaEventCreate(&r->ev[0]) != cudaSuccess || cudaEventCreate(&r->ev[1]) != cudaSuccess)) {
        (void)cudaGetLastError();
        if (r->ev[0]) (void)cudaEventDestroy(r->ev[0]);
        r->ev[0] = r->ev[1] = NULL;
    }
    const bool timed = r->ev[1] && cudaEventRecord(r->ev[0], 0) == cudaSuccess;
    const cudaError_t e = cudaGraphLaunch(exec, 0);
    if (timed && e == cudaSuccess && cudaEventRecord(r->ev[1], 0) == cudaSuccess) r->ev_pending = true;
    (void)cudaGetLastError(); /* an event's failure is no launch's: only the count misses it */
    return e;
}

/* A shape place's replay data dropped (the graph its executable graph came from, the nodes, the
 * launches they hold): what a capture-mode update of the place makes stale. */
static void shape_forget_replay(sr_kgraph *r, int i)
{
    if (r->shape[i].graph) (void)cudaGraphDestroy(r->shape[i].graph);
    r->shape[i].graph = NULL;
    r->shape[i].node.clear();
    sr_klog_clear(&r->shape[i].log);
}

/* A shape place emptied: its executable graph and its replay data. */
static void shape_drop(sr_kgraph *r, int i)
{
    if (r->shape[i].exec) (void)cudaGraphExecDestroy(r->shape[i].exec);
    r->shape[i].exec = NULL;
    r->shape[i].nodes = 0;
    shape_forget_replay(r, i);
}

static sr_status cuda_graph_begin(sr_kgraph **g)
{
    if (!g) return sr_error(SR_ERR_ARG, "cuda graph_begin: g is NULL");
    if (tls_rec) return sr_error(SR_ERR_ARG, "cuda graph_begin: this thread is recording already "
                                 "(one recording at a time: graph_end first)");
    const int mode = sr_cuda_graphs(-1);
    if (!mode) return SR_OK; /* not asked for: the ops run as they are called */
    if (!*g) {
        sr_kgraph *r = new (std::nothrow) sr_kgraph();
        if (!r) return sr_error(SR_ERR_NOMEM, "cuda graph_begin: a record of %zu bytes", sizeof *r);
        cudaError_t e = cudaStreamCreateWithFlags(&r->cap, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            delete r;
            return sr_cuda_fail("graph_begin: its capture stream", e);
        }
        *g = r;
    }
    sr_kgraph *r = *g;
    r->defer = mode == 2;
    r->unkept = NULL;
    sr_klog_clear(&r->cur);
    if (!r->defer) {
        /* thread-local mode: only this thread's unsafe calls (a synchronous copy, cudaMalloc)
         * break the capture; the table refuses them above before they reach the runtime */
        cudaError_t e = cudaStreamBeginCapture(r->cap, cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess) return sr_cuda_fail("graph_begin: cudaStreamBeginCapture", e);
    }
    tls_rec = r;
    tls_refused = NULL;
    return SR_OK;
}

/* Launch i of log as a kernel node's parameters (args: room for its argument pointers). */
static cudaKernelNodeParams launch_params(const sr_klog *log, size_t i, void **args)
{
    const sr_klaunch *L = &log->l[i];
    sr_klog_args(log, i, args);
    cudaKernelNodeParams p = {};
    p.func = const_cast<void *>(L->func);
    p.gridDim = dim3(L->grid[0], L->grid[1], L->grid[2]);
    p.blockDim = dim3(L->block[0], L->block[1], L->block[2]);
    p.sharedMemBytes = (unsigned)L->smem;
    p.kernelParams = args;
    p.extra = NULL;
    return p;
}

/* The launches of log captured into shape place sh (empty) as a new graph, instantiated, with
 * the node of each launch: each launched as sr_cuda_launch would have (its PDL attribute
 * included) on the record's capture stream, its node the capture's one dependency after it. */
static cudaError_t replay_build(sr_kgraph *r, int sh, const sr_klog *log)
{
    auto &S = r->shape[sh];
    try {
        S.node.assign(log->n, (cudaGraphNode_t)NULL);
    } catch (const std::bad_alloc &) {
        return cudaErrorMemoryAllocation;
    }
    cudaError_t e = cudaStreamBeginCapture(r->cap, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return e;
    for (size_t i = 0; i < log->n && e == cudaSuccess; i++) {
        void *args[REC_ARGS];
        const cudaKernelNodeParams p = launch_params(log, i, args);
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t c = sr_cuda_config(p.gridDim, p.blockDim, p.sharedMemBytes, r->cap,
                                                    log->l[i].pdl != 0, &at);
        e = cudaLaunchKernelExC(&c, p.func, args);
        if (e != cudaSuccess) break;
        cudaStreamCaptureStatus cs;
        const cudaGraphNode_t *deps = NULL;
        size_t nd = 0;
        /* the edge data asked for too (and not used): where a current dependency has non-zero
         * edge data (a programmatic edge's type is such data: overlapping launches), the query
         * without it fails with cudaErrorLossyQuery instead of listing the node */
#if CUDART_VERSION >= 13000
        const cudaGraphEdgeData *edges = NULL;
        e = cudaStreamGetCaptureInfo(r->cap, &cs, NULL, NULL, &deps, &edges, &nd);
#elif CUDART_VERSION >= 12030
        const cudaGraphEdgeData *edges = NULL;
        e = cudaStreamGetCaptureInfo_v3(r->cap, &cs, NULL, NULL, &deps, &edges, &nd);
#else
        e = cudaStreamGetCaptureInfo_v2(r->cap, &cs, NULL, NULL, &deps, &nd);
#endif
        /* the capture's dependencies after a launch: its node (once per edge port, if the
         * runtime lists a programmatic edge's ports apart) */
        bool one = e == cudaSuccess && nd >= 1 && deps && cs == cudaStreamCaptureStatusActive;
        for (size_t j = 1; one && j < nd; j++) one = deps[j] == deps[0];
        if (e == cudaSuccess && !one) e = cudaErrorStreamCaptureUnmatched; /* not a chain */
        if (e == cudaSuccess) S.node[i] = deps[0];
    }
    cudaGraph_t graph = NULL;
    const cudaError_t ee = cudaStreamEndCapture(r->cap, &graph);
    if (e == cudaSuccess) e = ee;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&S.exec, graph, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        S.exec = NULL;
        if (graph) (void)cudaGraphDestroy(graph);
        S.node.clear();
        return e;
    }
    S.graph = graph; /* kept: its nodes name exec's in cudaGraphExecKernelNodeSetParams */
    S.nodes = log->n;
    return cudaSuccess;
}

/* graph_end of a replayed recording (the top of the file): the step's launches in r->cur into
 * the executable graph of their shape, set anew where they differ, or into a new one; then run. */
static sr_status replay_end(sr_kgraph *r)
{
    sr_klog *cur = &r->cur;
    if (cur->n == 0) return SR_OK; /* nothing was launched */
    int at = -1, lru = 0;
    for (int i = 0; i < REC_SHAPES; i++) {
        /* a place made by capture has an empty log: never the same shape as cur (n > 0) */
        if (r->shape[i].exec && sr_klog_same_shape(&r->shape[i].log, cur)) at = i;
        if (r->shape[i].used < r->shape[lru].used) lru = i; /* unused places have 0 */
    }
    if (at >= 0) {
        auto &S = r->shape[at];
        unsigned long long set = 0;
        for (size_t i = 0; i < cur->n; i++) {
            if (sr_klog_same_launch(&S.log, cur, i)) continue;
            void *args[REC_ARGS];
            const cudaKernelNodeParams p = launch_params(cur, i, args);
            if (cudaGraphExecKernelNodeSetParams(S.exec, S.node[i], &p) != cudaSuccess) {
                /* exec now holds some of cur's launches and some of its log's: remade */
                (void)cudaGetLastError();
                shape_drop(r, at);
                lru = at; /* its place takes the new graph */
                at = -1;
                break;
            }
            set++;
        }
        if (at >= 0) {
            graphs_updated.fetch_add(1);
            graphs_patched.fetch_add(set);
        }
    }
    if (at < 0) {
        at = lru;
        shape_drop(r, at);
        cudaError_t e = replay_build(r, at, cur);
        if (e != cudaSuccess) return sr_cuda_fail("graph_end: a replayed recording's graph (capture "
                                                  "of its launches, instantiation)", e);
        graphs_built.fetch_add(1);
    }
    /* the place's log is now what its graph holds; the old one is the next step's to fill */
    sr_klog t = r->shape[at].log;
    r->shape[at].log = *cur;
    *cur = t;
    r->shape[at].used = ++r->clock;
    cudaError_t e = graph_launch(r, r->shape[at].exec);
    if (e != cudaSuccess) return sr_cuda_fail("graph_end: cudaGraphLaunch", e);
    return SR_OK;
}

static sr_status cuda_graph_end(sr_kgraph *g, int run)
{
    sr_kgraph *r = tls_rec;
    if (!r) return SR_OK; /* graph_begin recorded nothing (recording off): the ops ran */
    const char *refused = tls_refused;
    tls_rec = NULL;
    tls_refused = NULL;
    cudaGraph_t graph = NULL;
    cudaError_t e = r->defer ? cudaSuccess : cudaStreamEndCapture(r->cap, &graph);
    /* the blocks the recorded ops freed, once what they recorded has run (or was dropped) */
    struct free_later {
        sr_kgraph *r;
        ~free_later()
        {
            for (void *p : r->later) (void)cudaFreeAsync(p, 0);
            r->later.clear();
        }
    } fl{r};
    const bool lost = r->lost;
    r->lost = false;
    if (!run || g != r || refused || lost || e != cudaSuccess) {
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        if (!run) return SR_OK;
        if (lost) return sr_error(SR_ERR_NOMEM, "cuda graph_end: no host memory to keep a pool "
                                  "block's free until the recording has run (the recording is "
                                  "dropped)");
        if (g != r) return sr_error(SR_ERR_ARG, "cuda graph_end: g is not the record this "
                                    "thread's graph_begin started (the recording is dropped)");
        if (refused) return refuse_recording(refused);
        return sr_cuda_fail("graph_end: cudaStreamEndCapture (an op called the runtime in a way "
                            "a capture cannot record)", e);
    }
    if (r->defer) {
        if (r->unkept)
            return sr_error(SR_ERR_NOMEM, "cuda graph_end: %s (the replayed recording is "
                            "dropped)", r->unkept);
        return replay_end(r);
    }
    /* the executable graph of this node count, else the least recently launched one's place */
    size_t nodes = 0;
    if ((e = cudaGraphGetNodes(graph, NULL, &nodes)) != cudaSuccess) {
        (void)cudaGraphDestroy(graph);
        return sr_cuda_fail("graph_end: cudaGraphGetNodes", e);
    }
    int at = -1, lru = 0;
    for (int i = 0; i < REC_SHAPES; i++) {
        if (r->shape[i].exec && r->shape[i].nodes == nodes) at = i;
        if (r->shape[i].used < r->shape[lru].used) lru = i; /* unused places have 0 */
    }
    if (at >= 0) { /* a shape seen before: patch the arguments in */
        shape_forget_replay(r, at); /* no longer what a replayed recording's log says */
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(r->shape[at].exec, graph, &info) == cudaSuccess) {
            graphs_updated.fetch_add(1);
        } else { /* the same count, another topology */
            (void)cudaGetLastError();
            (void)cudaGraphExecDestroy(r->shape[at].exec);
            r->shape[at].exec = NULL;
        }
    } else {
        at = lru;
        shape_drop(r, at);
    }
    if (!r->shape[at].exec) {
        e = cudaGraphInstantiate(&r->shape[at].exec, graph, 0);
        if (e != cudaSuccess) r->shape[at].exec = NULL;
        else graphs_built.fetch_add(1);
        r->shape[at].nodes = nodes;
    }
    (void)cudaGraphDestroy(graph);
    if (e != cudaSuccess) return sr_cuda_fail("graph_end: cudaGraphInstantiate", e);
    r->shape[at].used = ++r->clock;
    e = graph_launch(r, r->shape[at].exec);
    if (e != cudaSuccess) return sr_cuda_fail("graph_end: cudaGraphLaunch", e);
    return SR_OK;
}

static void cuda_graph_free(sr_kgraph *g)
{
    if (!g) return;
    /* its last launch may still run on the legacy stream */
    (void)cudaStreamSynchronize(0);
    for (int i = 0; i < REC_SHAPES; i++) {
        shape_drop(g, i);
        sr_klog_free(&g->shape[i].log);
    }
    sr_klog_free(&g->cur);
    graph_time_read(g);
    for (cudaEvent_t ev : g->ev)
        if (ev) (void)cudaEventDestroy(ev);
    if (g->cap) (void)cudaStreamDestroy(g->cap);
    (void)cudaGetLastError();
    delete g;
}

/* nvcc's C++17 has no designated initializers: the table is filled field by field, once, at
 * static initialization. */
static sr_kernels make_table(void)
{
    sr_kernels t;
    memset(&t, 0, sizeof t);
    t.name = "cuda";
    t.i8_fast_mul = SR_KMUL_BF16; /* one byte a weight into the mma kernel */
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
    t.weight_create = cuda_weight_create;
    t.weight_free = cuda_weight_free;
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
    t.kv_write2 = sr_cuda_kv_write2;
    t.rope_kv = sr_cuda_rope_kv;
    t.attn = sr_cuda_attn;
    t.graph_begin = cuda_graph_begin;
    t.graph_end = cuda_graph_end;
    t.graph_free = cuda_graph_free;
    t.mark = cuda_mark;
    t.mark_ms = cuda_mark_ms;
    t.mark_free = cuda_mark_free;
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
