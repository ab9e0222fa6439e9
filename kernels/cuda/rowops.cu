/*
 * rowops.cu — the CUDA table's row-wise, element-wise, convolution, cache and search ops
 * (contracts: the op typedefs of kernels/kernels.h; the CPU references: kernels/cpu/rowops.c
 * and kernels/ops.h). The argument checks are kernels/check.c's, shared with the CPU table so
 * that both refuse the same calls with the same messages.
 *
 * Shapes of the kernels:
 *   element-wise (glu, add, scale, batchnorm, lstm_cell, rope, kv_write, conv_dw)
 *               one thread per (row, column) of a 2-D grid (ew2d below); rows past the grid's
 *               y limit are covered by a loop
 *   act, conv2d_s2
 *               one thread per output element, grid-stride over a flat size_t index
 *   norm, softmax, logsoftmax, topk
 *               one block of ROW_THREADS per row, statistics by a block reduction
 *
 * Same bits as the CPU where the formula allows it. The CPU builds (-std=c11) never contract
 * a * b + c into a fused multiply-add; nvcc does by default, so every product that feeds a sum
 * is written with __fmul_rn / __fadd_rn (which the compiler never fuses). Division and square
 * root are IEEE (nvcc's defaults -prec-div / -prec-sqrt, spelled out as __fdiv_rn / __fsqrt_rn
 * where it matters), subnormals are kept (no -ftz). So add, scale, batchnorm,
 * conv2d_s2, conv_dw, kv_write and topk give the CPU's bits. The rest differ slightly, and the
 * CUDA-vs-CPU test compares them with a tolerance:
 *   - the device's expf / erff / tanhf / cosf / sinf differ from libm (and from ops.c's AVX2
 *     exp / erf) by a few ulp (act GELU / SiLU, glu, lstm_cell, rope, softmax);
 *   - the double sums of norm / softmax / logsoftmax add in a tree, not left to right, so a
 *     statistic may differ in its last double bits (and rarely its float rounding);
 *     logsoftmax's terms take the device's double exp (rowops.c has its own, within 1.2 ulp).
 *
 * Pools (kv_write, the conv_dw state): f16 / bf16 writes use the hardware conversions
 * (__float2half_rn / __float2bfloat16_rn, round to nearest even, overflow to Inf, subnormals
 * exact); a NaN takes core/dtype.c's payload rule instead, which the hardware's canonical NaN
 * would not match. Reads widen exactly (f16 NaN payloads kept, as sr_f16_to_f32).
 *
 * Batches: the sr_kbatch arrays are host memory. An op that needs them (rope, kv_write,
 * conv_dw) passes them as a kernel parameter (pbatch: row0, slot, pos of up to PB_SEQ
 * sequences; a call of more sequences is several launches over consecutive sequences, whose
 * rows are independent), so the op is one launch and nothing else: no device buffer, no
 * host-to-device copy in the stream between two kernels (three per layer of a decoder step
 * before, each a staged pageable copy), and each thread finds its row's sequence by binary
 * search, as rowops.c's seq_of. The parameter is __grid_constant__, so the threads read it in
 * place (constant bank) instead of each copying it to local memory.
 *
 * Aliasing as on the CPU: norm, act, glu, add, batchnorm and logsoftmax may work in place with
 * equal strides (every element is read and written by the same thread, after any reduction);
 * conv_dw's y must not alias x (checked).
 */
#include "cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- temporary device buffers and batch uploads --------------------------------------------- */

typedef struct {
    void *p;
} dev_tmp;

/* bytes of device memory from the table's stream-ordered pool (cuda.cu): a kernel queued after
 * the allocation may use it, and tmp_free after that kernel releases it once the kernel is done
 * (cudaFree, the fallback without pools, waits for the device). */
static sr_status tmp_alloc(const char *what, size_t bytes, dev_tmp *t)
{
    cudaError_t e = sr_cuda_malloc_pooled(&t->p, bytes);
    return e == cudaSuccess ? SR_OK : sr_cuda_fail(what, e);
}

static void tmp_free(dev_tmp *t)
{
    sr_cuda_free(t->p);
    t->p = NULL;
}

/* A batch's control arrays as a kernel parameter: sequences [s0, s0 + n_seq) of an sr_kbatch,
 * their rows [row0[0], row0[n_seq]) (absolute batch rows). 6 KB: far below the 32,764 bytes
 * of parameters CUDA 12.1+ allows on sm_70 and later (attn.cu passes its rows the same way). */
#define PB_SEQ 384
struct pbatch {
    int n_seq;
    int row0[PB_SEQ + 1];
    int slot[PB_SEQ];     /* filled when the op reads a pool */
    long long pos[PB_SEQ]; /* filled when the op needs positions */
};

/* Sequences [s0, s0 + PB_SEQ) of b (fewer at the end) into *p; returns the count. */
static int pbatch_fill(const sr_kbatch *b, int s0, int with_slot, int with_pos, pbatch *p)
{
    int n = b->n_seq - s0 < PB_SEQ ? b->n_seq - s0 : PB_SEQ;
    p->n_seq = n;
    memcpy(p->row0, b->row0 + s0, (size_t)(n + 1) * sizeof(int));
    if (with_slot) memcpy(p->slot, b->slot + s0, (size_t)n * sizeof(int));
    for (int i = 0; with_pos && i < n; i++) p->pos[i] = (long long)b->pos[s0 + i];
    return n;
}

/* The sequence of p holding batch row r (row0[0] <= r < row0[n_seq]): the last s with
 * row0[s] <= r (rowops.c's seq_of). */
__device__ static inline int seq_of(const pbatch &p, int r)
{
    int lo = 0, hi = p.n_seq - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (p.row0[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* A pool as the kernels see it; element offsets as sr_kpool_at. */
typedef struct {
    void *data;
    int dtype, slots, rows, width;
} dpool;

static dpool dpool_of(const sr_kpool *p)
{
    dpool d = {p->data, (int)p->dtype, p->slots, p->rows, p->width};
    return d;
}

__device__ static inline size_t dpool_at(const dpool &p, int layer, int slot, int row)
{
    return (((size_t)layer * (size_t)p.slots + (size_t)slot) * (size_t)p.rows + (size_t)row) *
           (size_t)p.width;
}

/* f16 -> f32 exactly; Inf / NaN by bits so a NaN keeps its payload (sr_f16_to_f32). */
__device__ static inline float f16_widen(unsigned short h)
{
    if ((h & 0x7c00u) == 0x7c00u)
        return __uint_as_float(((unsigned)(h & 0x8000u) << 16) | 0x7f800000u |
                               ((unsigned)(h & 0x3ffu) << 13));
    return __half2float(__ushort_as_half(h));
}

/* f32 -> f16, nearest even; NaN: sign, top payload bits, quiet if they vanish (sr_f32_to_f16). */
__device__ static inline unsigned short f16_narrow(float v)
{
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        unsigned man = (u >> 13) & 0x3ffu;
        return (unsigned short)(((u >> 16) & 0x8000u) | 0x7c00u | (man ? man : 0x200u));
    }
    return __half_as_ushort(__float2half_rn(v));
}

/* f32 -> bf16, nearest even; NaN: upper half made quiet (sr_f32_to_bf16). */
__device__ static inline unsigned short bf16_narrow(float v)
{
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

__device__ static inline float pool_ld(const dpool &p, size_t i)
{
    if (p.dtype == SR_F16) return f16_widen(((const unsigned short *)p.data)[i]);
    if (p.dtype == SR_BF16)
        return __uint_as_float((unsigned)((const unsigned short *)p.data)[i] << 16);
    return ((const float *)p.data)[i];
}

__device__ static inline void pool_st(const dpool &p, size_t i, float v)
{
    if (p.dtype == SR_F16) ((unsigned short *)p.data)[i] = f16_narrow(v);
    else if (p.dtype == SR_BF16) ((unsigned short *)p.data)[i] = bf16_narrow(v);
    else ((float *)p.data)[i] = v;
}

/* Element j to element i of a pool, bits unchanged (the state shift of conv_dw, a memcpy on
 * the CPU). */
__device__ static inline void pool_move(const dpool &p, size_t i, size_t j)
{
    if (p.dtype == SR_F32) ((unsigned *)p.data)[i] = ((const unsigned *)p.data)[j];
    else ((unsigned short *)p.data)[i] = ((const unsigned short *)p.data)[j];
}

/* The scalar formulas of rowops.c / ops.c, every rounding where the CPU has it (the sums
 * spelled __fadd_rn so that ptxas fuses none into the last multiply of an inlined expf). */
__device__ static inline float sigmoid1(float z) { return 1.0f / __fadd_rn(1.0f, expf(-z)); }
__device__ static inline float silu1(float v) { return v / __fadd_rn(1.0f, expf(-v)); }
__device__ static inline float gelu1(float v)
{
    return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(v * 0.70710678118654752440f)));
}
__device__ static inline float relu1(float v) { return v > 0.0f ? v : 0.0f; }

/* ---- launch helpers ------------------------------------------------------------------------- */

/* Threads per block of the row kernels (a multiple of 32: whole warps in the reductions). */
#define ROW_THREADS 256
/* Blocks of the row kernels and of the flat grid-stride kernels (each loops past them). */
#define ROW_BLOCKS_MAX 65535
#define FLAT_BLOCKS_MAX 65535

static unsigned row_blocks(int M) { return (unsigned)(M < ROW_BLOCKS_MAX ? M : ROW_BLOCKS_MAX); }

static unsigned flat_blocks(size_t n)
{
    size_t b = (n - 1) / 256 + 1;
    return (unsigned)(b < FLAT_BLOCKS_MAX ? b : FLAT_BLOCKS_MAX);
}

/* f(r0 + r, c) for r < M, c < d (M, d >= 1): blocks of 256 threads, blockDim.x the row width
 * rounded up to a warp (at most 256), the remaining threads of a block on further rows. f is
 * read in place from the parameter bank (__grid_constant__): a pbatch inside it is not copied
 * per thread. */
template <class F> __global__ static void ew2d_kernel(int M, int d, int r0, const __grid_constant__ F f)
{
    sr_pdl_enter();
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= d) return;
    int64_t step = (int64_t)gridDim.y * blockDim.y;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < M; r += step)
        f((int)(r0 + r), c);
}

template <class F> static sr_status ew2d(const char *what, int M, int d, const F &f, int r0 = 0)
{
    int bx = d >= 256 ? 256 : (d + 31) / 32 * 32, by = 256 / bx;
    int64_t gy = ((int64_t)M + by - 1) / by;
    dim3 grid((unsigned)(((int64_t)d + bx - 1) / bx), (unsigned)SR_CUDA_GRID_Y(gy));
    sr_cuda_launch(ew2d_kernel<F>, grid, dim3((unsigned)bx, (unsigned)by), 0, M, d, r0, f);
    return sr_cuda_launched(what);
}

/* The batch's rows through f, one ew2d launch per PB_SEQ sequences: make(pb) builds the functor
 * for the launch (f(r, c) with r an absolute batch row of pb). Launches without rows are skipped. */
template <class Make>
static sr_status ew2d_batch(const char *what, const sr_kbatch *b, int with_slot, int with_pos,
                            int d, Make make)
{
    pbatch pb;
    sr_status st = SR_OK;
    for (int s0 = 0; s0 < b->n_seq && !st; s0 += PB_SEQ) {
        int n = pbatch_fill(b, s0, with_slot, with_pos, &pb);
        int M = pb.row0[n] - pb.row0[0];
        if (M > 0) st = ew2d(what, M, d, make(pb), pb.row0[0]);
    }
    return st;
}

/* Reduction of v over the block (blockDim.x = ROW_THREADS), the same value returned to every
 * thread. Fixed order for a fixed block size: a row's result does not depend on other rows. */
template <class T, class Op> __device__ static T block_reduce(T v, Op op)
{
    __shared__ T part[ROW_THREADS / 32];
    __shared__ T all;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads(); /* every reader of the previous call's `all` is past it */
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        T t = part[0];
        for (int w = 1; w < ROW_THREADS / 32; w++) t = op(t, part[w]);
        all = t;
    }
    __syncthreads();
    return all;
}

namespace {
struct op_dsum {
    __device__ double operator()(double a, double b) const { return __dadd_rn(a, b); }
};
/* Max that never takes a NaN: the CPU's mx = x > mx ? x : mx from -Inf (partials start at
 * -Inf and never hold a NaN, so the tree gives the sequential loop's maximum). */
struct op_fmax {
    __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};
struct op_umax {
    __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const
    {
        return b > a ? b : a;
    }
};
} // namespace

/* ---- zero, copy2d, transpose ---------------------------------------------------------------- */

/* zero, copy2d and act's copy are kernels, not the runtime's memset / memcpy: a replayed
 * recording keeps kernel launches only (cuda.cu), and one path serves every mode. */

/* bytes [0, n) of p zeroed: the bytes before p's first 16-byte boundary and after the last one
 * singly, the rest 16 at a time. */
__global__ static void zero_kernel(unsigned char *p, size_t n)
{
    sr_pdl_enter();
    const size_t step = (size_t)gridDim.x * blockDim.x, i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t head = min(n, (size_t)((16u - ((uintptr_t)p & 15u)) & 15u)), body = (n - head) / 16;
    uint4 *q = reinterpret_cast<uint4 *>(p + head);
    for (size_t i = i0; i < head; i += step) p[i] = 0;
    for (size_t i = i0; i < body; i += step) q[i] = make_uint4(0u, 0u, 0u, 0u);
    for (size_t i = head + 16 * body + i0; i < n; i += step) p[i] = 0;
}

void sr_cuda_zero(void *p, size_t bytes)
{
    if (!p || !bytes) return;
    sr_cuda_launch(zero_kernel, flat_blocks(bytes / 16 + 1), 256, 0, (unsigned char *)p, bytes);
    /* No status to return: clear the error so that the next checked call reports its own. */
    (void)cudaGetLastError();
}

namespace {
/* y[r, c] = x[r, c], the 4 bytes as they are (a NaN's payload kept). */
struct copy_f {
    const uint32_t *x;
    uint32_t *y;
    int ldx, ldy;
    __device__ void operator()(int r, int c) const { y[(size_t)r * ldy + c] = x[(size_t)r * ldx + c]; }
};
} // namespace

sr_status sr_cuda_copy2d(int M, int d, const float *x, int ldx, float *y, int ldy)
{
    sr_status st = sr_kernels_check_copy2d(M, d, x, ldx, y, ldy);
    if (st || M == 0 || d == 0) return st;
    return ew2d("copy2d", M, d, copy_f{(const uint32_t *)x, (uint32_t *)y, ldx, ldy});
}

/* copy_rows: the source pointers travel as a kernel parameter, ROWS_PER_LAUNCH at a time (no
 * device buffer, no copy); block y = row, threads along the row. */
#define ROWS_PER_LAUNCH 256
struct RowPtrs {
    const float *p[ROWS_PER_LAUNCH];
};

__global__ static void copy_rows_kernel(int n, int d, RowPtrs src, float *__restrict__ y, int ldy)
{
    sr_pdl_enter();
    const int i = (int)blockIdx.y;
    if (i >= n) return;
    const float *s = src.p[i];
    float *yr = y + (size_t)i * (size_t)ldy;
    for (int c = (int)(blockIdx.x * blockDim.x + threadIdx.x); c < d; c += (int)(gridDim.x * blockDim.x))
        yr[c] = s[c];
}

sr_status sr_cuda_copy_rows(int n, int d, const float *const *src, float *y, int ldy)
{
    sr_status st = sr_kernels_check_copy_rows(n, d, src, y, ldy);
    if (st || n == 0 || d == 0) return st;
    const int threads = 256;
    const unsigned gx = (unsigned)((d + threads - 1) / threads < 64 ? (d + threads - 1) / threads : 64);
    for (int i0 = 0; i0 < n; i0 += ROWS_PER_LAUNCH) {
        const int m = n - i0 < ROWS_PER_LAUNCH ? n - i0 : ROWS_PER_LAUNCH;
        RowPtrs r;
        memcpy(r.p, src + i0, (size_t)m * sizeof r.p[0]);
        sr_cuda_launch(copy_rows_kernel, dim3(gx, (unsigned)m), threads, 0, m, d, r,
                       y + (size_t)i0 * ldy, ldy);
        if ((st = sr_cuda_launched("copy_rows"))) return st;
    }
    return SR_OK;
}

/* 32 x 32 tiles through shared memory (one column of padding: no bank conflicts), so both the
 * reads of x and the writes of y are coalesced; grid x over d, y over M (looping past 65535),
 * z over the n matrices. */
__global__ static void transpose_kernel(int M, int d, const float *__restrict__ x, int ldx,
                                        float *__restrict__ y, int ldy)
{
    sr_pdl_enter();
    __shared__ float t[32][33];
    x += (size_t)blockIdx.z * (size_t)M * (size_t)ldx;
    y += (size_t)blockIdx.z * (size_t)d * (size_t)ldy;
    const int j = (int)blockIdx.x * 32 + (int)threadIdx.x;
    for (int i0 = (int)blockIdx.y * 32; i0 < M; i0 += (int)gridDim.y * 32) {
        for (int r = (int)threadIdx.y; r < 32; r += (int)blockDim.y) {
            int i = i0 + r;
            if (i < M && j < d) t[r][threadIdx.x] = x[(size_t)i * (size_t)ldx + j];
        }
        __syncthreads();
        const int i = i0 + (int)threadIdx.x;
        for (int r = (int)threadIdx.y; r < 32; r += (int)blockDim.y) {
            int jj = (int)blockIdx.x * 32 + r;
            if (i < M && jj < d) y[(size_t)jj * (size_t)ldy + i] = t[threadIdx.x][r];
        }
        __syncthreads();
    }
}

sr_status sr_cuda_transpose(int n, int M, int d, const float *x, int ldx, float *y, int ldy)
{
    sr_status st = sr_kernels_check_transpose(n, M, d, x, ldx, y, ldy);
    if (st || n == 0 || M == 0 || d == 0) return st;
    dim3 block(32, 8);
    for (int b0 = 0; b0 < n; b0 += 65535) { /* the grid's z extent */
        int nb = n - b0 < 65535 ? n - b0 : 65535;
        dim3 grid((unsigned)((d + 31) / 32), (unsigned)SR_CUDA_GRID_Y((M + 31) / 32), (unsigned)nb);
        sr_cuda_launch(transpose_kernel, grid, block, 0, M, d, x + (size_t)b0 * M * ldx, ldx,
                       y + (size_t)b0 * d * ldy, ldy);
        if ((st = sr_cuda_launched("transpose"))) return st;
    }
    return SR_OK;
}

/* ---- norm ----------------------------------------------------------------------------------- */

/* One block per row: x [M, d] stride ldx -> y stride ldy, sr_layernorm / sr_rmsnorm's formulas
 * (statistics in double), then y *= mul[r * ld_mul + c]. */
__global__ static void norm_kernel(int kind, int M, int d, const float *x, int ldx,
                                   const float *g, const float *b, float eps, const float *mul,
                                   int ld_mul, float *y, int ldy)
{
    sr_pdl_enter();
    for (int r = (int)blockIdx.x; r < M; r += (int)gridDim.x) {
        const float *xr = x + (size_t)r * ldx;
        float *yr = y + (size_t)r * ldy;
        const float *mr = mul ? mul + (size_t)r * ld_mul : NULL;
        if (kind == SR_NORM_LAYER) {
            double s = 0;
            for (int i = (int)threadIdx.x; i < d; i += ROW_THREADS) s = __dadd_rn(s, (double)xr[i]);
            double mean = block_reduce(s, op_dsum()) / d;
            double v = 0;
            for (int i = (int)threadIdx.x; i < d; i += ROW_THREADS) {
                double t = (double)xr[i] - mean;
                v = __dadd_rn(v, __dmul_rn(t, t));
            }
            double var = block_reduce(v, op_dsum()) / d;
            float inv = (float)__ddiv_rn(1.0, __dsqrt_rn(var + (double)eps));
            float mu = (float)mean;
            for (int i = (int)threadIdx.x; i < d; i += ROW_THREADS) {
                float t = __fadd_rn(__fmul_rn(__fmul_rn(xr[i] - mu, inv), g[i]), b[i]);
                yr[i] = mr ? __fmul_rn(t, mr[i]) : t;
            }
        } else {
            double ss = 0;
            for (int i = (int)threadIdx.x; i < d; i += ROW_THREADS)
                ss = __dadd_rn(ss, __dmul_rn((double)xr[i], (double)xr[i]));
            ss = block_reduce(ss, op_dsum());
            float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn((float)(ss / d), eps)));
            for (int i = (int)threadIdx.x; i < d; i += ROW_THREADS) {
                float t = __fmul_rn(g[i], __fmul_rn(xr[i], inv));
                yr[i] = mr ? __fmul_rn(t, mr[i]) : t;
            }
        }
    }
}

sr_status sr_cuda_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                       const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy)
{
    sr_status st = sr_kernels_check_norm(kind, M, d, x, ldx, g, b, mul, ld_mul, y, ldy);
    if (st || M == 0 || d == 0) return st;
    sr_cuda_launch(norm_kernel, row_blocks(M), ROW_THREADS, 0, (int)kind, M, d, x, ldx, g, b, eps, mul, ld_mul,
                   y, ldy);
    return sr_cuda_launched("norm");
}

/* ---- act ------------------------------------------------------------------------------------ */

__global__ static void act_kernel(int act, size_t n, const float *x, float *y)
{
    sr_pdl_enter();
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        float v = x[i];
        if (act == SR_ACT_NONE) /* a copy: the bits as they are */
            reinterpret_cast<uint32_t *>(y)[i] = reinterpret_cast<const uint32_t *>(x)[i];
        else
            y[i] = act == SR_ACT_GELU ? gelu1(v) : act == SR_ACT_SILU ? silu1(v) : relu1(v);
    }
}

sr_status sr_cuda_act(sr_act act, size_t n, const float *x, float *y)
{
    sr_status st = sr_kernels_check_act(act, n, x, y);
    if (st || n == 0) return st;
    if (act == SR_ACT_NONE && x == y) return SR_OK;
    sr_cuda_launch(act_kernel, flat_blocks(n), 256, 0, (int)act, n, x, y);
    return sr_cuda_launched("act");
}

/* ---- glu, add, scale, batchnorm, lstm_cell: element-wise over rows -------------------------- */

/* The functors of ew2d (here and below) live in anonymous namespaces: internal linkage, so
 * another .cu file's types of the same name cannot clash. */
namespace {

struct glu_f { /* y [M, d] = glu(a, b) */
    int kind, lda, ldb, ldy;
    const float *a, *b;
    float *y;
    __device__ void operator()(int r, int c) const
    {
        float av = a[(size_t)r * lda + c], bv = b[(size_t)r * ldb + c];
        y[(size_t)r * ldy + c] =
            kind == SR_GLU_SIGMOID ? av / __fadd_rn(1.0f, expf(-bv)) : __fmul_rn(silu1(av), bv);
    }
};

struct add_f { /* y [M, d] += alpha * x (ldx = 0: row 0 of x for every row) */
    int ldx, ldy;
    float alpha;
    const float *x;
    float *y;
    __device__ void operator()(int r, int c) const
    {
        float *p = y + (size_t)r * ldy + c;
        *p = __fadd_rn(*p, __fmul_rn(alpha, x[(size_t)r * ldx + c]));
    }
};

struct scale_f { /* y [M, d] *= s */
    int ldy;
    float s;
    float *y;
    __device__ void operator()(int r, int c) const
    {
        float *p = y + (size_t)r * ldy + c;
        *p = __fmul_rn(*p, s);
    }
};

struct bn_f { /* y [M, C] = (x - mean) / sqrtf(var + eps) * g + bias */
    int ldx, ldy;
    float eps;
    const float *x, *mean, *var, *g, *bias;
    float *y;
    __device__ void operator()(int r, int c) const
    {
        float sd = __fsqrt_rn(__fadd_rn(var[c], eps));
        float t = __fdiv_rn(x[(size_t)r * ldx + c] - mean[c], sd);
        y[(size_t)r * ldy + c] = __fadd_rn(__fmul_rn(t, g[c]), bias[c]);
    }
};

struct lstm_f { /* gates [M, 4H] (i, f, g, o) -> c [M, H] in/out, h [M, H] */
    int H, ldg, ldc, ldh;
    const float *gates;
    float *cs, *hs;
    __device__ void operator()(int r, int i) const
    {
        const float *g = gates + (size_t)r * ldg;
        float *c = cs + (size_t)r * ldc + i;
        float gi = sigmoid1(g[i]), gf = sigmoid1(g[H + i]);
        float gg = tanhf(g[2 * H + i]), go = sigmoid1(g[3 * H + i]);
        float cn = __fadd_rn(__fmul_rn(gf, *c), __fmul_rn(gi, gg));
        *c = cn;
        hs[(size_t)r * ldh + i] = __fmul_rn(go, tanhf(cn));
    }
};
} // namespace

sr_status sr_cuda_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                      float *y, int ldy)
{
    sr_status st = sr_kernels_check_glu(kind, M, d, a, lda, b, ldb, y, ldy);
    if (st || M == 0 || d == 0) return st;
    return ew2d("glu", M, d, glu_f{(int)kind, lda, ldb, ldy, a, b, y});
}

sr_status sr_cuda_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy)
{
    sr_status st = sr_kernels_check_add(M, d, x, ldx, y, ldy);
    if (st || M == 0 || d == 0) return st;
    return ew2d("add", M, d, add_f{ldx, ldy, alpha, x, y});
}

sr_status sr_cuda_scale(int M, int d, float s, float *y, int ldy)
{
    sr_status st = sr_kernels_check_scale(M, d, y, ldy);
    if (st || M == 0 || d == 0) return st;
    return ew2d("scale", M, d, scale_f{ldy, s, y});
}

sr_status sr_cuda_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                            const float *var, const float *g, const float *bias, float eps,
                            float *y, int ldy)
{
    sr_status st = sr_kernels_check_batchnorm(M, C, x, ldx, mean, var, g, bias, y, ldy);
    if (st || M == 0 || C == 0) return st;
    return ew2d("batchnorm", M, C, bn_f{ldx, ldy, eps, x, mean, var, g, bias, y});
}

sr_status sr_cuda_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc,
                            float *h, int ldh)
{
    sr_status st = sr_kernels_check_lstm_cell(M, H, gates, ldg, c, ldc, h, ldh);
    if (st || M == 0 || H == 0) return st;
    return ew2d("lstm_cell", M, H, lstm_f{H, ldg, ldc, ldh, gates, c, h});
}

/* ---- rope ----------------------------------------------------------------------------------- */

namespace {
/* The pair (u, w) of batch row r (of sequence s) rotated by its position times inv_i: rope's
 * one formula (rope_f and rope_kv_f both call it, so both give the bits of kernels/cpu's). */
__device__ static inline void rope_pair(const pbatch &b, int s, int r, float inv_i, float u, float w,
                                        float &u2, float &w2)
{
    float p = (float)(b.pos[s] + (long long)(r - b.row0[s]));
    float a = __fmul_rn(p, inv_i);
    float cs = cosf(a), sn = sinf(a);
    u2 = __fsub_rn(__fmul_rn(u, cs), __fmul_rn(w, sn));
    w2 = __fadd_rn(__fmul_rn(w, cs), __fmul_rn(u, sn));
}

struct rope_f { /* batch row r, c = head * hd / 2 + pair of x [rows, n_head * hd] */
    pbatch b;
    int hd, ldx;
    const float *inv;
    float *x;
    /* A thread per (head, pair): a thread per pair looping over the heads ran its dependent
     * loads and stores one head after another (21.6 us a Voxtral batch-1 call with the wait
     * included, against 15 for a LayerNorm row, on an H200). Each head recomputes the pair's
     * angle: the same operations, so the same bits. */
    __device__ void operator()(int r, int c) const
    {
        int s = seq_of(b, r), half = hd / 2, h = c / half, i = c - h * half;
        float *v = x + (size_t)r * ldx + (size_t)h * hd + i;
        rope_pair(b, s, r, inv[i], v[0], v[half], v[0], v[half]);
    }
};
} // namespace

sr_status sr_cuda_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x,
                       int ldx)
{
    int rows;
    sr_status st = sr_kernels_check_rope(b, n_head, hd, inv_freq, x, ldx, &rows);
    if (st || rows == 0 || n_head == 0 || hd == 0) return st;
    return ew2d_batch("rope", b, 0, 1, n_head * (hd / 2), [&](const pbatch &pb) {
        return rope_f{pb, hd, ldx, inv_freq, x};
    });
}

/* ---- conv2d_s2 ------------------------------------------------------------------------------ */

/* out [n][C][To][Fo], a thread per output: the 9-tap sum from +0 in tap order (i, then j; taps
 * outside the plane skipped, as rowops.c's conv3_1), then b + sum, then ReLU. */
__global__ static void conv2d_kernel(size_t total, int C, int T, int F, int To, int Fo,
                                     const float *in, size_t img_stride, size_t in_stride,
                                     const float *w, const float *b, int relu, float *out)
{
    sr_pdl_enter();
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
        int f = (int)(o % (size_t)Fo), t = (int)(o / (size_t)Fo % (size_t)To);
        size_t op = o / ((size_t)Fo * (size_t)To), ch = op % (size_t)C, img = op / (size_t)C;
        const float *plane = in + img * img_stride + ch * in_stride, *w9 = w + ch * 9;
        float s = 0.0f;
        for (int i = 0; i < 3; i++) {
            int ti = 2 * t + i - 2;
            if (ti < 0 || ti >= T) continue;
            const float *row = plane + (size_t)ti * F;
            for (int j = 0; j < 3; j++) {
                int fj = 2 * f + j - 2;
                if (fj < 0 || fj >= F) continue;
                s = __fadd_rn(s, __fmul_rn(w9[i * 3 + j], row[fj]));
            }
        }
        float v = __fadd_rn(b[ch], s);
        out[o] = relu ? relu1(v) : v;
    }
}

sr_status sr_cuda_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                            size_t in_plane_stride, const float *w, const float *b, int relu,
                            float *out)
{
    sr_status st = sr_kernels_check_conv2d_s2(n, C, T, F, in, in_img_stride, in_plane_stride, w, b, out);
    if (st || n == 0 || C == 0) return st;
    int To = T / 2 + 1, Fo = F / 2 + 1;
    size_t total = (size_t)n * (size_t)C * (size_t)To * (size_t)Fo;
    sr_cuda_launch(conv2d_kernel, flat_blocks(total), 256, 0, total, C, T, F, To, Fo, in, in_img_stride,
                   in_plane_stride, w, b, relu != 0, out);
    return sr_cuda_launched("conv2d_s2");
}

/* ---- conv_dw -------------------------------------------------------------------------------- */

namespace {
/* y[r, c] of batch row r: its sequence's input is [state (K - 1 rows) ; x rows]; s = bias,
 * then s += w * in over j (zero state rows included as products, as rowops.c's dw_1). */
struct dw_f {
    pbatch b;
    int K, ldx, ldy, layer;
    const float *x, *w, *bias;
    dpool st; /* st.data NULL: no state (zeros) */
    float *y;
    __device__ void operator()(int r, int c) const
    {
        int s = seq_of(b, r);
        int64_t t = r - b.row0[s];
        size_t st0 = st.data ? dpool_at(st, layer, b.slot[s], 0) + (size_t)c : 0;
        const float *wc = w + (size_t)c * K;
        float acc = bias[c];
        for (int j = 0; j < K; j++) {
            int64_t q = t + j; /* row of [state ; x] */
            float v;
            if (q < K - 1) v = st.data ? pool_ld(st, st0 + (size_t)q * st.width) : 0.0f;
            else v = x[(size_t)(r + j - (K - 1)) * ldx + c];
            acc = __fadd_rn(acc, __fmul_rn(wc[j], v));
        }
        y[(size_t)r * ldy + c] = acc;
    }
};

/* Sequence s of the launch's pbatch, channel c: the state becomes the last K - 1 rows of
 * [state ; x] (run after every dw_f of those sequences has read the old state; one thread
 * owns a column, so the upward shift of kept rows reads each row before overwriting it). */
struct dw_state_f {
    pbatch b;
    int K, ldx, layer;
    const float *x;
    dpool st;
    __device__ void operator()(int s, int c) const
    {
        int r0 = b.row0[s], n = b.row0[s + 1] - r0, Ks = K - 1;
        if (n == 0) return;
        int keep = n >= Ks ? 0 : Ks - n;
        size_t base = dpool_at(st, layer, b.slot[s], 0) + (size_t)c, ld = (size_t)st.width;
        for (int r = 0; r < keep; r++) pool_move(st, base + r * ld, base + (size_t)(r + n) * ld);
        for (int r = keep; r < Ks; r++)
            pool_st(st, base + r * ld, x[(size_t)(r0 + n - Ks + r) * ldx + c]);
    }
};
} // namespace

sr_status sr_cuda_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                          const float *w, const float *bias, sr_kpool *state, int layer, float *y,
                          int ldy)
{
    int rows;
    sr_status st = sr_kernels_check_conv_dw(b, C, K, x, ldx, w, bias, state, layer, y, ldy, &rows);
    if (st || rows == 0 || C == 0) return st;
    dpool P = {NULL, (int)SR_F32, 0, 0, 0};
    if (state) P = dpool_of(state);
    /* per PB_SEQ sequences: their outputs, then their states (the groups' slots are disjoint) */
    pbatch pb;
    for (int s0 = 0; s0 < b->n_seq && !st; s0 += PB_SEQ) {
        int n = pbatch_fill(b, s0, state != NULL, 0, &pb);
        int M = pb.row0[n] - pb.row0[0];
        if (M == 0) continue;
        st = ew2d("conv_dw", M, C, dw_f{pb, K, ldx, ldy, layer, x, w, bias, P, y}, pb.row0[0]);
        if (!st && state && K > 1) st = ew2d("conv_dw state", n, C, dw_state_f{pb, K, ldx, layer, x, P});
    }
    return st;
}

/* ---- softmax, logsoftmax -------------------------------------------------------------------- */

/* One block per row of x [M, N], in place: max, e = expf(x - max) stored, sum of e in double,
 * x = e * (float)(1 / sum) (sr_softmax). */
__global__ static void softmax_kernel(int M, int N, float *x, int ldx)
{
    sr_pdl_enter();
    for (int r = (int)blockIdx.x; r < M; r += (int)gridDim.x) {
        float *row = x + (size_t)r * ldx;
        float mx = -INFINITY;
        for (int j = (int)threadIdx.x; j < N; j += ROW_THREADS) mx = row[j] > mx ? row[j] : mx;
        mx = block_reduce(mx, op_fmax());
        double sum = 0;
        for (int j = (int)threadIdx.x; j < N; j += ROW_THREADS) {
            float e = expf(row[j] - mx);
            row[j] = e;
            sum = __dadd_rn(sum, (double)e);
        }
        sum = block_reduce(sum, op_dsum());
        float inv = (float)__ddiv_rn(1.0, sum);
        for (int j = (int)threadIdx.x; j < N; j += ROW_THREADS) row[j] = __fmul_rn(row[j], inv);
    }
}

/* One block per row: max in f32, sum of exp((double)x - max) in double (-Inf terms skipped),
 * lse = (float)(max + log(sum)), y = x - lse (rowops.c's logsoftmax_1, with the device's exp). */
__global__ static void logsoftmax_kernel(int M, int N, const float *x, int ldx, float *y, int ldy)
{
    sr_pdl_enter();
    for (int r = (int)blockIdx.x; r < M; r += (int)gridDim.x) {
        const float *xr = x + (size_t)r * ldx;
        float *yr = y + (size_t)r * ldy;
        float mx = -INFINITY;
        for (int j = (int)threadIdx.x; j < N; j += ROW_THREADS) mx = xr[j] > mx ? xr[j] : mx;
        mx = block_reduce(mx, op_fmax());
        double sum = 0;
        for (int j = (int)threadIdx.x; j < N; j += ROW_THREADS)
            sum = __dadd_rn(sum, xr[j] == -INFINITY ? 0.0 : exp((double)xr[j] - mx));
        sum = block_reduce(sum, op_dsum());
        float lse = (float)__dadd_rn((double)mx, log(sum));
        for (int j = (int)threadIdx.x; j < N; j += ROW_THREADS) yr[j] = xr[j] - lse;
    }
}

sr_status sr_cuda_softmax(int M, int N, float *x, int ldx)
{
    sr_status st = sr_kernels_check_softmax(M, N, x, ldx);
    if (st || M == 0 || N == 0) return st;
    sr_cuda_launch(softmax_kernel, row_blocks(M), ROW_THREADS, 0, M, N, x, ldx);
    return sr_cuda_launched("softmax");
}

sr_status sr_cuda_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy)
{
    sr_status st = sr_kernels_check_logsoftmax(M, N, x, ldx, y, ldy);
    if (st || M == 0 || N == 0) return st;
    sr_cuda_launch(logsoftmax_kernel, row_blocks(M), ROW_THREADS, 0, M, N, x, ldx, y, ldy);
    return sr_cuda_launched("logsoftmax");
}

/* ---- topk ----------------------------------------------------------------------------------- */

/* rowops.c's ranking as one 64-bit key per column, larger = ranks higher: the value's bits
 * made order-preserving in the high half (NaN lowest of all, -0 equal to +0), the column's
 * complement in the low half (equal values: the lower column ranks higher). Keys of distinct
 * columns differ, every key is > 0 (the low half of a column < 2^31 is >= 2^31) and below
 * ~0 (no value maps to 0xffffffff). */
__device__ static inline unsigned long long topk_key(float v, int col)
{
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) u = 0; /* NaN */
    else {
        if ((u << 1) == 0) u = 0; /* -0 -> +0 */
        u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    }
    return ((unsigned long long)u << 32) | (unsigned)~(unsigned)col;
}

__device__ static inline int topk_col(unsigned long long key) { return (int)~(unsigned)key; }

/* One round of the k-rounds argmax: the block's largest key(j) below prev for j in [j0, j1)
 * (0 when none), every thread of the block returning it. */
template <class Key>
__device__ static unsigned long long best_below(int j0, int j1, unsigned long long prev, const Key &key)
{
    unsigned long long best = 0;
    for (int j = j0 + (int)threadIdx.x; j < j1; j += ROW_THREADS) {
        const unsigned long long kj = key(j);
        if (kj < prev && kj > best) best = kj;
    }
    return block_reduce(best, op_umax());
}

/* k at most this: k rounds of a block-wide argmax, each over the keys below the last pick. */
#define TOPK_ITER_MAX 64
/* Rows of up to this many keys (padded to a power of two) are sorted in shared memory (32 KB);
 * longer ones in a global scratch of at most TOPK_SCRATCH bytes (fewer blocks, each looping). */
#define TOPK_SMEM_KEYS 4096
#define TOPK_SCRATCH ((size_t)64 << 20)

__global__ static void topk_iter_kernel(int M, int N, int k, const float *x, int ldx,
                                        int32_t *idx, float *val)
{
    sr_pdl_enter();
    for (int r = (int)blockIdx.x; r < M; r += (int)gridDim.x) {
        const float *xr = x + (size_t)r * ldx;
        unsigned long long prev = ~0ull;
        for (int i = 0; i < k; i++) {
            const unsigned long long best = best_below(0, N, prev, [&](int j) { return topk_key(xr[j], j); });
            if (threadIdx.x == 0) {
                int col = topk_col(best);
                idx[(size_t)r * k + i] = col;
                if (val) val[(size_t)r * k + i] = xr[col];
            }
            prev = best;
        }
    }
}

/* The split form of the k-rounds argmax, for few rows over many columns (one stream's argmax
 * over a vocabulary: one block walking 131,072 columns took about 65 us on an H200, the logits'
 * product 270). Each row is cut into `parts` column ranges; block (part, row) runs the k rounds
 * over its range alone and stores the k best keys it found into part_keys [M][parts][k] (0,
 * below every key, where the range holds fewer than k columns). Then one block a row runs the k
 * rounds over its parts' parts * k keys. Keys are distinct and totally ordered, so the k best of
 * the parts' k best are the row's k best in the same order: topk_iter_kernel's bits. */
__global__ static void topk_part_kernel(int M, int N, int k, int parts, const float *x, int ldx,
                                        unsigned long long *part_keys)
{
    sr_pdl_enter();
    const int p = (int)blockIdx.x;
    const int c0 = (int)((long long)N * p / parts), c1 = (int)((long long)N * (p + 1) / parts);
    for (int r = (int)blockIdx.y; r < M; r += (int)gridDim.y) {
        const float *xr = x + (size_t)r * ldx;
        unsigned long long prev = ~0ull;
        for (int i = 0; i < k; i++) {
            const unsigned long long best = best_below(c0, c1, prev, [&](int j) { return topk_key(xr[j], j); });
            if (threadIdx.x == 0) part_keys[((size_t)r * parts + p) * k + i] = best;
            prev = best;
        }
    }
}

__global__ static void topk_merge_kernel(int M, int k, int parts, const unsigned long long *part_keys,
                                         const float *x, int ldx, int32_t *idx, float *val)
{
    sr_pdl_enter();
    const int n = parts * k;
    for (int r = (int)blockIdx.x; r < M; r += (int)gridDim.x) {
        const unsigned long long *kr = part_keys + (size_t)r * n;
        unsigned long long prev = ~0ull;
        for (int i = 0; i < k; i++) {
            const unsigned long long best = best_below(0, n, prev, [&](int j) { return kr[j]; });
            if (threadIdx.x == 0) {
                const int col = topk_col(best);
                idx[(size_t)r * k + i] = col;
                if (val) val[(size_t)r * k + i] = x[(size_t)r * ldx + col];
            }
            prev = best;
        }
    }
}

/* Columns a part of the split form holds at least (8 a thread), and how many parts a row gets:
 * enough blocks for two a multiprocessor over all rows, never below TOPK_PART columns a part
 * (1: the single-block form). Speed only: every split gives the same result. */
#define TOPK_PART 2048
static int topk_parts(int M, int N)
{
    const long long want = (2LL * sr_cuda_sm_count() + M - 1) / M, most = N / TOPK_PART;
    const long long p = want < most ? want : most;
    return p < 2 ? 1 : p > 1024 ? 1024 : (int)p;
}

/* Large k: the row's keys, padded with 0 to n2 (a power of two), bitonic-sorted descending in
 * keys (shared memory when NULL, else n2 keys per block of global scratch); the first k give
 * idx / val. */
__global__ static void topk_sort_kernel(int M, int N, int k, const float *x, int ldx,
                                        int32_t *idx, float *val, unsigned long long *scratch,
                                        unsigned n2)
{
    sr_pdl_enter();
    extern __shared__ unsigned long long sh_keys[];
    unsigned long long *kk = scratch ? scratch + (size_t)blockIdx.x * n2 : sh_keys;
    for (int r = (int)blockIdx.x; r < M; r += (int)gridDim.x) {
        const float *xr = x + (size_t)r * ldx;
        for (unsigned j = threadIdx.x; j < n2; j += ROW_THREADS)
            kk[j] = j < (unsigned)N ? topk_key(xr[j], (int)j) : 0ull;
        __syncthreads();
        for (uint64_t size = 2; size <= n2; size <<= 1)
            for (unsigned stride = (unsigned)(size >> 1); stride > 0; stride >>= 1) {
                for (unsigned i = threadIdx.x; i < n2 / 2; i += ROW_THREADS) {
                    unsigned lo = ((i & ~(stride - 1)) << 1) | (i & (stride - 1)), hi = lo + stride;
                    unsigned long long a = kk[lo], b = kk[hi];
                    int desc = (lo & size) == 0; /* this run's direction; the last is desc */
                    if (desc ? a < b : a > b) kk[lo] = b, kk[hi] = a;
                }
                __syncthreads();
            }
        for (int i = (int)threadIdx.x; i < k; i += ROW_THREADS) {
            int col = topk_col(kk[i]);
            idx[(size_t)r * k + i] = col;
            if (val) val[(size_t)r * k + i] = xr[col];
        }
        __syncthreads(); /* kk is refilled for the next row */
    }
}

sr_status sr_cuda_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val)
{
    sr_status st = sr_kernels_check_topk(M, N, k, x, ldx, idx);
    if (st || M == 0) return st;
    if (k <= TOPK_ITER_MAX) {
        const int parts = topk_parts(M, N);
        if (parts == 1) {
            sr_cuda_launch(topk_iter_kernel, row_blocks(M), ROW_THREADS, 0, M, N, k, x, ldx, idx, val);
            return sr_cuda_launched("topk");
        }
        dev_tmp t; /* parts > 1 only where M <= 2 sms: the grid's y fits */
        st = tmp_alloc("topk: the parts' keys", (size_t)M * parts * k * sizeof(unsigned long long), &t);
        if (st) return st;
        unsigned long long *pk = (unsigned long long *)t.p;
        sr_cuda_launch(topk_part_kernel, dim3((unsigned)parts, (unsigned)M), ROW_THREADS, 0, M, N, k, parts, x,
                       ldx, pk);
        if (!(st = sr_cuda_launched("topk (parts)")))
            sr_cuda_launch(topk_merge_kernel, row_blocks(M), ROW_THREADS, 0, M, k, parts,
                           (const unsigned long long *)pk, x, ldx, idx, val);
        if (!st) st = sr_cuda_launched("topk");
        tmp_free(&t);
        return st;
    }
    unsigned n2 = 1;
    while (n2 < (unsigned)N) n2 <<= 1; /* N <= INT_MAX: n2 <= 2^31 */
    if (n2 <= TOPK_SMEM_KEYS) {
        sr_cuda_launch(topk_sort_kernel, row_blocks(M), ROW_THREADS, n2 * sizeof(unsigned long long),
                       M, N, k, x, ldx, idx, val, nullptr, n2);
        return sr_cuda_launched("topk");
    }
    size_t per_row = (size_t)n2 * sizeof(unsigned long long), fit = TOPK_SCRATCH / per_row;
    unsigned blocks = row_blocks(M);
    if (fit < 1) fit = 1;
    if (blocks > fit) blocks = (unsigned)fit;
    dev_tmp t;
    st = tmp_alloc("topk scratch", (size_t)blocks * per_row, &t);
    if (st) return st;
    sr_cuda_launch(topk_sort_kernel, blocks, ROW_THREADS, 0, M, N, k, x, ldx, idx, val,
                   (unsigned long long *)t.p, n2);
    st = sr_cuda_launched("topk");
    tmp_free(&t);
    return st;
}

/* ---- kv_write ------------------------------------------------------------------------------- */

namespace {
/* v as element c of batch row r (of sequence s) in layer `layer` of pool p: slot slot[s], ring
 * row (pos[s] + i) % rows, unless a later row of the same sequence in this call lands on that
 * ring row (only the last `rows` rows are written, so no two threads store one element). The
 * one rule of kv_write, kv_write2 and rope_kv. */
__device__ static inline void kv_put(const pbatch &b, int s, int r, const dpool &p, int layer, int c,
                                     float v)
{
    int i = r - b.row0[s], n = b.row0[s + 1] - b.row0[s];
    if (n - i > p.rows) return;
    pool_st(p, dpool_at(p, layer, b.slot[s], (int)((b.pos[s] + i) % p.rows)) + (size_t)c, v);
}

struct kv_f { /* batch row r, column c of x into p */
    pbatch b;
    int layer, ldx;
    const float *x;
    dpool p;
    __device__ void operator()(int r, int c) const
    {
        kv_put(b, seq_of(b, r), r, p, layer, c, x[(size_t)r * ldx + c]);
    }
};
} // namespace

sr_status sr_cuda_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx)
{
    int rows;
    sr_status st = sr_kernels_check_kv_write(p, layer, b, x, ldx, &rows);
    if (st || rows == 0) return st;
    const dpool P = dpool_of(p);
    return ew2d_batch("kv_write", b, 1, 1, p->width, [&](const pbatch &pb) {
        return kv_f{pb, layer, ldx, x, P};
    });
}

namespace {
/* kv_write2's columns: c < p.width from x into p (kv_f's element), the rest from x2 into p2. */
struct kv2_f {
    kv_f a;
    int ldx2;
    const float *x2;
    dpool p2;
    __device__ void operator()(int r, int c) const
    {
        if (c < a.p.width) {
            a(r, c);
            return;
        }
        c -= a.p.width;
        kv_put(a.b, seq_of(a.b, r), r, p2, a.layer, c, x2[(size_t)r * ldx2 + c]);
    }
};
} // namespace

namespace {
/* rope_kv's columns of batch row r: c < nq (n_head hd / 2) a pair of q rotated in place (as
 * rope_f), then nk (n_kv_head hd / 2) pairs of k rotated into K (k unchanged), then V's width
 * of v into V, each by kv_put. */
struct rope_kv_f {
    pbatch b;
    int hd, nq, nk, layer, ldq, ldk, ldv;
    const float *inv, *k, *v;
    float *q;
    dpool K, V;
    __device__ void operator()(int r, int c) const
    {
        int s = seq_of(b, r), half = hd / 2;
        if (c < nq) {
            int h = c / half, i = c - h * half;
            float *e = q + (size_t)r * ldq + (size_t)h * hd + i;
            rope_pair(b, s, r, inv[i], e[0], e[half], e[0], e[half]);
            return;
        }
        if (c < nq + nk) {
            c -= nq;
            int h = c / half, j = c - h * half;
            const float *e = k + (size_t)r * ldk + (size_t)h * hd + j;
            float u2, w2;
            rope_pair(b, s, r, inv[j], e[0], e[half], u2, w2);
            kv_put(b, s, r, K, layer, h * hd + j, u2);
            kv_put(b, s, r, K, layer, h * hd + j + half, w2);
            return;
        }
        c -= nq + nk;
        kv_put(b, s, r, V, layer, c, v[(size_t)r * ldv + c]);
    }
};
} // namespace

sr_status sr_cuda_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd, const float *inv_freq,
                          float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                          sr_kpool *K, sr_kpool *V, int layer)
{
    int rows;
    sr_status st = sr_kernels_check_rope_kv(b, n_head, n_kv_head, hd, inv_freq, q, ldq, k, ldk, v,
                                            ldv, K, V, layer, &rows);
    if (st || rows == 0) return st;
    const int nq = n_head * (hd / 2), nk = n_kv_head * (hd / 2);
    const dpool PK = dpool_of(K), PV = dpool_of(V);
    return ew2d_batch("rope_kv", b, 1, 1, nq + nk + V->width, [&](const pbatch &pb) {
        return rope_kv_f{pb, hd, nq, nk, layer, ldq, ldk, ldv, inv_freq, k, v, q, PK, PV};
    });
}

/* One launch over both pools' columns: each element the kv_write of its pool would store. */
sr_status sr_cuda_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                            const float *x, int ldx, const float *x2, int ldx2)
{
    int rows;
    sr_status st = sr_kernels_check_kv_write2(p, p2, layer, b, x, ldx, x2, ldx2, &rows);
    if (st || rows == 0) return st;
    const dpool P = dpool_of(p), P2 = dpool_of(p2);
    return ew2d_batch("kv_write2", b, 1, 1, p->width + p2->width, [&](const pbatch &pb) {
        return kv2_f{kv_f{pb, layer, ldx, x, P}, ldx2, x2, P2};
    });
}
