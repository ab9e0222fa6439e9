/*
 * cuda_impl.h — what the CUDA table's .cu files (kernels/cuda/) share: the op functions the
 * table in cuda.cu points at, and the error helpers. Every op has the contract of its typedef
 * in kernels/kernels.h; pointers to float data are device memory, the control arrays
 * (sr_kbatch, sr_kattn's ranges, gather's ids) host memory, as the table's contract says. Ops
 * are queued on sr_cuda_stream(): the legacy default stream, in order with the table's upload /
 * download (which therefore wait for them), or while the calling thread records a graph, the
 * recording's capture stream. Included by .cu files only (C++ through nvcc).
 */
#ifndef SR_CUDA_IMPL_H
#define SR_CUDA_IMPL_H

#include <cuda_runtime.h>

#include "setting.h" /* sr_cuda_setting: the table's process-wide switches */

extern "C" {
#include "../kernels.h"
/* core/internal.h's reporter, declared here so that nvcc needs none of the C-only headers. */
sr_status sr_error(sr_status s, const char *fmt, ...);
}

/* SR_ERR_DEVICE "cuda <what>: <runtime message> (<name>)", clearing the sticky last error so
 * later calls report their own failures. */
sr_status sr_cuda_fail(const char *what, cudaError_t e);
/* After a launch: SR_OK, or sr_cuda_fail(what, the launch error). */
sr_status sr_cuda_launched(const char *what);

/* Device memory counted in the table's live and peak bytes (sr_kernels.mem): cudaMalloc (weights)
 * or the stream-ordered pool (the table's alloc and the ops' scratch: cudaMallocAsync on the
 * legacy stream, cudaMalloc where the device has no pools; cuda.cu). sr_cuda_free frees either,
 * stream-ordered for pool blocks; while the calling thread records, a pool block's free waits
 * until graph_end has launched the recording (the recorded ops use it then). */
cudaError_t sr_cuda_malloc(void **p, size_t bytes);
cudaError_t sr_cuda_malloc_pooled(void **p, size_t bytes);
void sr_cuda_free(void *p);

/* The stream every launch of an op goes to: the legacy default stream (0), or while the calling
 * thread records by capture (graph_begin .. graph_end, cuda.cu) the recording's capture stream,
 * so the op is recorded instead of run (a replayed recording keeps its launches instead:
 * sr_cuda_launch). (Pool blocks stay on the legacy stream: see sr_cuda_malloc_pooled.) */
cudaStream_t sr_cuda_stream(void);

/* ---- launches (every kernel of the table goes through sr_cuda_launch) ---- */

/* Whether launches may overlap the kernel before them (programmatic dependent launch,
 * SRKIT_CUDA_PDL=1 or sr_cuda_pdl(1) on a device of compute capability 9.0 or later; off by
 * default). cuda.cu. */
bool sr_cuda_pdl_live(void);
/* The runtime refused a launch with the attribute that it took without: the setting goes off
 * (sr_cuda_pdl(-1) then says 0, and so does srkit bench's cuda_pdl). cuda.cu. */
void sr_cuda_pdl_refused(void);

/* Whether the calling thread's launches are being kept for a replayed recording
 * (SRKIT_CUDA_GRAPH=replay, between graph_begin and graph_end; cuda.cu), and the keeping of one:
 * kernel kern (its host handle), its shape, whether it would overlap the kernel ahead, and its n
 * arguments converted to the parameters' types (args[i] points at sizes[i] bytes; copied). A
 * failure to keep it is reported by graph_end, which then drops the step. */
bool sr_cuda_deferring(void);
void sr_cuda_defer(const void *kern, dim3 grid, dim3 block, size_t smem, bool pdl,
                   const void *const *args, const size_t *sizes, int n);

/* kern<<<grid, block, smem, sr_cuda_stream()>>>(args...), with the programmatic-serialization
 * attribute while sr_cuda_pdl_live(): the kernel's blocks may then start before the kernel
 * queued ahead of it has finished, which is safe because every kernel of the table calls
 * sr_pdl_enter() (below) before it touches memory another kernel writes or reads. Errors as
 * after <<<>>>: sr_cuda_launched reads them. While the thread keeps its launches for a replayed
 * recording (sr_cuda_deferring), the launch is kept instead (sr_cuda_defer), with the same
 * arguments, shape and attribute; graph_end runs it. */
/* A launch's configuration on stream st, with the programmatic-serialization attribute in *at
 * when pdl (sr_cuda_launch, and cuda.cu's capture of a replayed recording's kept launches). */
static inline cudaLaunchConfig_t sr_cuda_config(dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                                bool pdl, cudaLaunchAttribute *at)
{
    at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at->val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = grid;
    c.blockDim = block;
    c.dynamicSmemBytes = smem;
    c.stream = st;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    return c;
}

template <typename... P, typename... A>
static inline void sr_cuda_launch(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, A &&...args)
{
    if (sr_cuda_deferring()) { /* kept for graph_end, converted as cudaLaunchKernelEx would */
        [&](P... c) {
            const void *const ptrs[] = {&c..., nullptr};
            const size_t sizes[] = {sizeof(P)..., 0};
            sr_cuda_defer((const void *)kern, grid, block, smem, sr_cuda_pdl_live(), ptrs, sizes,
                          (int)sizeof...(P));
        }(static_cast<A &&>(args)...);
        return;
    }
    cudaLaunchAttribute at;
    cudaLaunchConfig_t c = sr_cuda_config(grid, block, smem, sr_cuda_stream(), sr_cuda_pdl_live(), &at);
    if (cudaLaunchKernelEx(&c, kern, args...) == cudaSuccess || !c.numAttrs) return;
    /* refused with the attribute: once more without it (its error, if any, stays for
     * sr_cuda_launched); taken so, the setting goes off rather than fail every launch */
    (void)cudaGetLastError();
    c.numAttrs = 0;
    if (cudaLaunchKernelEx(&c, kern, args...) == cudaSuccess) sr_cuda_pdl_refused();
}

/* The first statement of every kernel of the table (before any read or write of memory that
 * another kernel writes or reads: activations, pools, scratch): wait until the kernel queued
 * ahead of this one has finished and its writes are visible (griddepcontrol.wait; immediate
 * when this launch did not overlap it), then let the kernel queued after this one start its
 * blocks (griddepcontrol.launch_dependents): they wait in their own sr_pdl_enter, and a GEMM
 * prefetches its weights meanwhile (gemm.cu). So at most two kernels overlap, and a kernel's
 * work still begins only after everything queued before it is done. Before compute capability
 * 9.0 (and with overlap off) both instructions are no-ops. */
__device__ __forceinline__ void sr_pdl_enter(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* A hint to bring the 128-byte line at p into L2: no value is read (and L2 is where every
 * kernel's writes land), so it may run before sr_pdl_enter whatever wrote the line; p must
 * still lie in allocated memory (scripts/cuda_emu checks each names a weight's byte). */
__device__ __forceinline__ void sr_prefetch_l2(const void *p)
{
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#endif
}

/* Multiprocessors of the current device, queried once (132, an H100's, if the query fails; its
 * error is cleared). For launch shapes only: speed, never results. */
int sr_cuda_sm_count(void);

/* The grid's y and z extents are limited to 65535 blocks; kernels loop past it. */
#define SR_CUDA_GRID_Y(n) ((n) < 65535 ? (n) : 65535)

/* ---- checked.cu ---- */
/* The table `plain` with every op's data pointers checked to be device memory (SR_ERR_ARG
 * naming the op and argument otherwise): what SRKIT_CUDA_CHECK=1 selects. */
sr_kernels sr_cuda_checked_table(const sr_kernels *plain);

/* ---- rowops.cu ---- */
void sr_cuda_zero(void *p, size_t bytes);
sr_status sr_cuda_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy);
sr_status sr_cuda_transpose(int n, int M, int d, const float *x, int ldx, float *y, int ldy);
sr_status sr_cuda_copy_rows(int n, int d, const float *const *src, float *y, int ldy);
sr_status sr_cuda_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                       const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy);
sr_status sr_cuda_act(sr_act act, size_t n, const float *x, float *y);
sr_status sr_cuda_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                      float *y, int ldy);
sr_status sr_cuda_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy);
sr_status sr_cuda_scale(int M, int d, float s, float *y, int ldy);
sr_status sr_cuda_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x,
                       int ldx);
sr_status sr_cuda_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                            size_t in_plane_stride, const float *w, const float *b, int relu,
                            float *out);
sr_status sr_cuda_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                          const float *w, const float *bias, sr_kpool *state, int layer, float *y,
                          int ldy);
sr_status sr_cuda_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                            const float *var, const float *g, const float *bias, float eps,
                            float *y, int ldy);
sr_status sr_cuda_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc,
                            float *h, int ldh);
sr_status sr_cuda_softmax(int M, int N, float *x, int ldx);
sr_status sr_cuda_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy);
sr_status sr_cuda_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val);
sr_status sr_cuda_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx);
sr_status sr_cuda_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd, const float *inv_freq,
                          float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                          sr_kpool *K, sr_kpool *V, int layer);
sr_status sr_cuda_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                            const float *x, int ldx, const float *x2, int ldx2);

/* ---- gemm.cu ---- */
sr_status sr_cuda_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                                sr_kmul mul, sr_kweight **out);
void sr_cuda_weight_free(sr_kweight *w);
sr_status sr_cuda_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                       sr_act act, float alpha, float beta, float *y, int ldy);
sr_status sr_cuda_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy);

/* ---- attn.cu ---- */
sr_status sr_cuda_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                       const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo);

#endif /* SR_CUDA_IMPL_H */
