/*
 * gemm.cu — the CUDA table's weights and Linear product (kernels.h: sr_kweight, sr_kgemm_fn,
 * sr_kgather_fn), computing bit for bit what the CPU table (kernels/cpu/gemm.c) computes.
 *
 * Layout. weight_create uploads a host [n, k] matrix once as [n][kpad] row-major in the
 * weight's own element type (f32, bf16, f16 or int8: a bf16 weight streams 2 bytes per element,
 * an int8 one 1 byte), kpad = k rounded up to KPAD_ALIGN = 16 with zero elements, so every row
 * starts on a 16-byte boundary and the kernels read it with 16-byte vector loads and no bounds
 * check inside a row. SR_I8 keeps its scale [n] on the device too. SR_KMUL_BF16 weights are
 * stored with their subnormals replaced by zero of their sign (as the CPU's panels), so gather
 * of such a weight returns the same flushed values as the CPU's.
 *
 * Accumulation (the CPU's contract, kernels/cpu/gemm.c). Every output y[m, n] is ONE f32
 * accumulator held by ONE thread: it starts at +0 and takes exactly one fused multiply-add
 * (__fmaf_rn, correctly rounded, subnormals kept) per k, k = 0, 1, ..., K - 1, with the exactly
 * widened weight. There is no split of k and no reduction across threads (so no cuBLAS: its k
 * splitting would change the bits and make a row's result depend on M); tiles and chunks only
 * decide where the operands come from, never the order of the operations, so the result of a
 * row depends only on that row (not on M, the tiling or the kernel picked) and equals the
 * CPU's. The loop stops at K exactly: a padded step would turn an accumulator of -0 (a product
 * underflowing to -0) into +0. The epilogue is the CPU's fixed sequence of correctly rounded
 * operations, written with __fmul_rn / __fadd_rn so nvcc cannot contract two into an FMA:
 *   t = acc;  t = t * scale[n] (I8);  t = t + bias[n];  t = act(t);
 *   y = alpha * t (beta = 0, y never read)  or  y = (alpha * t) + (beta * y).
 * ReLU is (t > 0 ? t : +0), bit-identical. GELU and SiLU follow the CPU's portable formulas
 * operation by operation (0.5 x (1 + erf(x / sqrt 2)), x / (1 + e^-x)) but call the device
 * erff / expf (max error 2 ulp) instead of glibc's, and the CPU's AVX2 path uses its own
 * polynomial: with them the results agree to a few ulps, not bit for bit. A NaN output is NaN
 * on both tables, but its sign and payload are the hardware's (the GPU returns the canonical
 * NaN; the CPU's own paths differ there too).
 *
 * bf16 products (SR_KMUL_BF16): the fast mode, on the tensor cores (mma.sync through WMMA,
 * bf16 x bf16 -> f32, m16n16k16). The weight is stored as above with its subnormals flushed
 * and, for these weights only, n rounded up to a multiple of 16 with zero rows. Each activation
 * is rounded to bf16 as it is staged (x_to_bf16: subnormal to zero of its sign, then nearest
 * even; the CPU's operands exactly), so only the order of the f32 sums differs from the CPU:
 * as on the CPU's AMX path, the result agrees with the other paths within the f32 rounding
 * bound, not bit for bit. What stays exact is the independence of rows: k is cut into 16-wide
 * tiles and k tile t belongs to warp (t / TC_U) % TC_WARPS of every block, whatever M, N or the
 * block's tile shape; each warp accumulates its tiles in increasing t in its fragments, and the
 * warps' partial sums are added in warp order 0, 1, ..., TC_WARPS - 1. So an output depends
 * only on its row of x and column of w (a mma output element reads nothing else), and a row
 * alone gives the bits it has in any batch: batched == solo holds on the device as on the CPU.
 * The epilogue is the one below. An SR_I8 weight with bf16 products keeps its q in one byte
 * each ([tc_rows(n)][kpad] int8: half a bf16 weight's bytes to stream) and runs on the mma
 * form only (below), which widens each 8-byte load of q to the bf16 numbers they are (exact)
 * in registers; the row's scale multiplies the sum in the epilogue, as in the exact path.
 *
 * Kernel. One templated tiled kernel, two shapes. A block computes a BM x BN tile of y (rows m,
 * columns n) with THREADS = (BM / TM) (BN / TN) threads, each owning a contiguous TM x TN block
 * of outputs in registers. k runs in chunks of BK: the chunk's x rows (rounded to bf16 values
 * for bf16 products) and weight rows (widened to f32) are staged in shared memory k-major
 * (xs [BK][BM + pad], ws [BK][BN]), so a thread reads its TM x values and TN weights of one k
 * as one vector load each (the x one a broadcast within the warp). Staging is double-buffered:
 * the next chunk's global loads (x coalesced along k, the weight as 16-byte vectors) are issued
 * into registers before the current chunk is consumed, so one __syncthreads per chunk
 * suffices. Each thread runs its accumulators over the chunk's k in increasing order; threads
 * whose rows are all >= M skip the arithmetic (they still stage).
 *   wide   64 x 64 tile, BK 16, 256 threads of 4 x 4 outputs: many rows (compute-bound).
 *   skinny 16 x 32 tile, BK 64, 128 threads of 2 x 2 outputs: the few-row products of
 *          streaming decoding, bound by reading the weight once; narrow tiles give enough
 *          blocks (N / 32) to keep every multiprocessor's loads in flight.
 * Both compute identical bits; the choice only depends on speed (gemm_pick_wide). Rows past
 * the grid's y limit are covered by blocks looping over row tiles.
 *
 * Tensor-core kernel (bf16 products). x is first staged as bf16 operands [M rounded up to 16]
 * [kpad] (tc_stage_x, a stream-ordered block). A block of TC_WARPS warps computes a (16 MT) x
 * (16 NT) tile of y; warp w takes the k tiles t with (t / TC_U) % TC_WARPS = w, TC_U at a time,
 * loading its A fragments from the staged x and its B fragments from the weight rows, both
 * straight from global memory with no barrier in the k loop; at the end the warps' fragments
 * are summed in warp order through shared memory, where the epilogue reads them. MT = 1, 2 or
 * 4 by M, NT = 1 for few rows (more blocks to stream the weight), 2 otherwise: the choice is
 * speed only, the bits are the same. A second form of it, with mma.sync operands loaded as
 * vectors straight into registers (the default since it ran on a device; SRKIT_CUDA_GEMM=wmma
 * selects the first; its own comment below), keeps the same independence of rows with its own
 * order of sums; above 16 rows that form may take its operands through shared memory filled by
 * cp.async instead (SRKIT_CUDA_GEMM_ASYNC=1, gemm_mma_async_kernel): the same bits.
 */
#include "cuda_impl.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cfloat>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define KPAD_ALIGN 16  /* k elements per row padded to this: 16-byte rows for every dtype */
#define GATHER_IDS 512 /* ids passed by value per gather launch (2 KB of kernel parameters) */

/* Weight element kinds of the scalar kernel, one instantiation each. */
enum { WK_F32 = 0, WK_BF16 = 1, WK_F16 = 2, WK_I8 = 3 };

static size_t elt_size(sr_dtype dt)
{
    return dt == SR_F32 ? 4 : dt == SR_I8 ? 1 : 2;
}

/* Row stride of the device layout, in elements. */
static size_t k_pad(int k)
{
    return ((size_t)k + KPAD_ALIGN - 1) / KPAD_ALIGN * KPAD_ALIGN;
}

/* ---- element helpers ---------------------------------------------------------------------- */

__device__ __forceinline__ float bf16_to_f32(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

/* An activation as a bf16 product operand (the CPU's x_to_bf16 then sr_f32_to_bf16):
 * subnormals to zero of their sign, then nearest even; NaN stays NaN (quiet, sign kept), the
 * NaN test first so the carry cannot turn it into Inf. Returned widened back to f32. */
__device__ __forceinline__ float x_to_bf16(float v)
{
    if (fabsf(v) < FLT_MIN) v = copysignf(0.0f, v);
    uint32_t x = __float_as_uint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((x >> 16) | 0x0040u) << 16);
    x += 0x7fffu + ((x >> 16) & 1u);
    return __uint_as_float(x & 0xffff0000u);
}

/* Per weight kind: element type, elements per 16-byte vector, exact widening to f32. */
template <int WK> struct WTraits;
template <> struct WTraits<WK_F32> {
    typedef float T;
    static constexpr int VEC = 4;
    __device__ static float widen(float v) { return v; }
};
template <> struct WTraits<WK_BF16> {
    typedef uint16_t T;
    static constexpr int VEC = 8;
    __device__ static float widen(uint16_t v) { return bf16_to_f32(v); }
};
template <> struct WTraits<WK_F16> {
    typedef uint16_t T;
    static constexpr int VEC = 8;
    __device__ static float widen(uint16_t v) { return __half2float(__ushort_as_half(v)); }
};
template <> struct WTraits<WK_I8> {
    typedef int8_t T;
    static constexpr int VEC = 16;
    __device__ static float widen(int8_t v) { return __int2float_rn((int)v); } /* exact */
};

/* ---- epilogue ----------------------------------------------------------------------------- */

/* act(t) as the CPU epilogue computes it: each operation correctly rounded, none contracted. */
__device__ __forceinline__ float apply_act(sr_act act, float v)
{
    switch (act) {
    case SR_ACT_RELU: return v > 0.0f ? v : 0.0f; /* NaN and -0 give +0 */
    case SR_ACT_GELU: {
        /* 0.5f * x * (1.0f + erff(x * 0.70710678f)), left to right (sr_gelu_erf, portable) */
        float e = erff(__fmul_rn(v, 0.70710678118654752440f));
        return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, e));
    }
    case SR_ACT_SILU: /* x / (1.0f + expf(-x)) (sr_silu, portable) */
        return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v)));
    default: return v;
    }
}

/* ---- the product -------------------------------------------------------------------------- */

template <int BM_, int BN_, int BK_, int TM_, int TN_, int XPAD_, int MINB_> struct Tile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_, XPAD = XPAD_;
    static constexpr int MINB = MINB_; /* blocks per multiprocessor the registers must allow */
    static constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
    static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide into thread outputs");
    static_assert(BK % KPAD_ALIGN == 0 && BK % 2 == 0, "chunks of whole vectors and k pairs");
    static_assert((BM * BK) % THREADS == 0, "x tile must split evenly over the threads");
    /* a warp's weight stores cover 32 consecutive n of one k: no bank conflict unpadded */
    static_assert(BN >= 32, "weight tile narrower than a warp");
    static_assert((BM + XPAD) % TM == 0, "x rows of a thread must stay vector-aligned");
};
/* XPAD keeps the transposed x stores (lanes along k of one row) within 2-way bank conflicts.
 * MINB: the skinny tile is bound by weight reads, so it keeps several blocks' loads in flight
 * per multiprocessor (at most 128 registers a thread). */
typedef Tile<64, 64, 16, 4, 4, 4, 2> TileWide;  /* 256 threads, 4 x 4 outputs each */
typedef Tile<16, 32, 64, 2, 2, 2, 4> TileSkinny; /* 128 threads, 2 x 2 outputs each */

/* d[0 .. N) = p[0 .. N) from shared memory in one vector load (p aligned to N floats). */
template <int N> __device__ __forceinline__ void lds(float (&d)[N], const float *p)
{
    if constexpr (N == 4) {
        float4 v = *reinterpret_cast<const float4 *>(p);
        d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
    } else if constexpr (N == 2) {
        float2 v = *reinterpret_cast<const float2 *>(p);
        d[0] = v.x, d[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) d[i] = p[i];
    }
}

/* y[M, N] (stride ldy) from x[M, K] (stride ldx) and the device weight w [N][kpad]: every
 * output one accumulator of one thread (file comment). Blocks loop over row tiles past the
 * grid's y limit. */
template <class TL, int WK>
__global__ void __launch_bounds__(TL::THREADS, TL::MINB)
gemm_kernel(int M, int N, int K, int kpad, const float *__restrict__ x, int ldx,
            const typename WTraits<WK>::T *__restrict__ w, const float *__restrict__ scale,
            const float *__restrict__ bias, sr_act act, float alpha, float beta,
            float *__restrict__ y, int ldy)
{
    sr_pdl_enter();
    typedef WTraits<WK> WT;
    typedef typename WT::T T;
    constexpr int BM = TL::BM, BN = TL::BN, BK = TL::BK, TM = TL::TM, TN = TL::TN;
    constexpr int TX = TL::TX, THREADS = TL::THREADS;
    constexpr int VEC = WT::VEC;
    constexpr int KV = BK / VEC;                        /* vectors per weight row per chunk */
    constexpr int WVECS = BN * KV;                      /* vectors per weight chunk */
    constexpr int WSTEPS = (WVECS + THREADS - 1) / THREADS;
    constexpr int XSTEPS = BM * BK / THREADS;
    constexpr int XP = TL::XPAD;

    __shared__ float xs[2][BK][BM + XP]; /* [buf][k][m]: x */
    __shared__ float ws[2][BK][BN];      /* [buf][k][n]: weight widened to f32 */

    const int tid = (int)threadIdx.x;
    /* this thread's outputs: rows ty TM + i, columns tx TN + j of the tile (contiguous, so
     * its operands of one k are one vector load each: the x one a broadcast in the warp) */
    const int tx = tid % TX, ty = tid / TX;
    const int n0 = (int)blockIdx.x * BN;
    const int n_chunks = (K + BK - 1) / BK;
    const int m_tiles = (M + BM - 1) / BM;

    for (int mt = (int)blockIdx.y; mt < m_tiles; mt += (int)gridDim.y) {
        const int m0 = mt * BM;
        const bool live = m0 + ty * TM < M; /* a thread with no row < M skips the arithmetic */
        float acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

        uint4 wreg[WSTEPS]; /* the next chunk's weight vectors, raw */
        float xreg[XSTEPS]; /* the next chunk's x elements */

        /* Global loads of chunk c into registers. x: consecutive threads along k of one row
         * (coalesced); rows >= M and k >= K read as 0 and never past a row. Weight: vector v is
         * row n0 + v % BN, k vector v / BN; rows >= N and vectors past kpad are 0 (kpad is a
         * multiple of VEC, so a vector is entirely inside or outside). */
        auto load = [&](int c) {
            const int k0 = c * BK;
#pragma unroll
            for (int s = 0; s < XSTEPS; s++) {
                int e = tid + s * THREADS, kk = e % BK, r = e / BK;
                int m = m0 + r, k = k0 + kk;
                xreg[s] = (m < M && k < K) ? __ldg(x + (size_t)m * (size_t)ldx + k) : 0.0f;
            }
#pragma unroll
            for (int s = 0; s < WSTEPS; s++) {
                int v = tid + s * THREADS;
                int n = n0 + v % BN, k = k0 + (v / BN) * VEC;
                uint4 z = make_uint4(0u, 0u, 0u, 0u);
                if (v < WVECS && n < N && k < kpad)
                    z = __ldg(reinterpret_cast<const uint4 *>(w + (size_t)n * (size_t)kpad + k));
                wreg[s] = z;
            }
        };
        /* The registers into shared buffer b, transposed to k-major, widened. */
        auto store = [&](int b) {
#pragma unroll
            for (int s = 0; s < XSTEPS; s++) {
                int e = tid + s * THREADS;
                float v = xreg[s];
                xs[b][e % BK][e / BK] = v;
            }
#pragma unroll
            for (int s = 0; s < WSTEPS; s++) {
                int v = tid + s * THREADS;
                if (WVECS % THREADS != 0 && v >= WVECS) break;
                T el[VEC];
                memcpy(el, &wreg[s], sizeof el);
                int n = v % BN, kb = (v / BN) * VEC;
#pragma unroll
                for (int i = 0; i < VEC; i++) ws[b][kb + i][n] = WT::widen(el[i]);
            }
        };

        load(0);
        store(0);
        __syncthreads();
        for (int c = 0; c < n_chunks; c++) {
            const int b = c & 1;
            if (c + 1 < n_chunks) load(c + 1); /* in flight while this chunk is consumed */
            if (live) {
                /* exactly the k < K of this chunk: no padded step (file comment) */
                const int kn = min(BK, K - c * BK);
                auto step = [&](int kk) {
                    float a[TM], wv[TN];
                    lds(a, &xs[b][kk][ty * TM]);
                    lds(wv, &ws[b][kk][tx * TN]);
#pragma unroll
                    for (int i = 0; i < TM; i++)
#pragma unroll
                        for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i], wv[j], acc[i][j]);
                };
                if (kn == BK) {
#pragma unroll
                    for (int kk = 0; kk < BK; kk++) step(kk);
                } else {
                    for (int kk = 0; kk < kn; kk++) step(kk);
                }
            }
            /* buffer b ^ 1 was last read in chunk c - 1, before the previous barrier */
            if (c + 1 < n_chunks) store(b ^ 1);
            __syncthreads();
        }

        /* Epilogue: the CPU's sequence, each operation correctly rounded (file comment). */
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int m = m0 + ty * TM + i;
            if (m >= M) continue;
            float *yr = y + (size_t)m * (size_t)ldy;
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const int n = n0 + tx * TN + j;
                if (n >= N) continue;
                float t = acc[i][j];
                if (WK == WK_I8) t = __fmul_rn(t, scale[n]);
                if (bias) t = __fadd_rn(t, bias[n]);
                t = apply_act(act, t);
                if (beta == 0.0f)
                    yr[n] = __fmul_rn(alpha, t); /* y never read: NaN there is overwritten */
                else
                    yr[n] = __fadd_rn(__fmul_rn(alpha, t), __fmul_rn(beta, yr[n]));
            }
        }
    }
}

/* ---- tensor-core kernel (bf16 products) ------------------------------------------------------ */

/* The tensor-core kernels' epilogue: the warps' sum of the tile at (m0, n0) through the scalar
 * kernel's sequence into y, THREADS threads (tid) striding over the tile. red holds PARTS
 * [BM][BN] tiles: the sum itself (1), or each warp's partial sums, added here in warp order
 * (((red[0] + red[1]) + red[2]) + ...: the additions of the serial loop that makes the sum),
 * only for the outputs inside M x N. */
template <int BM, int BN, int THREADS, int PARTS = 1>
__device__ __forceinline__ void tile_epilogue(const float *red, int tid, int m0, int n0, int M, int N,
                                              const float *__restrict__ scale,
                                              const float *__restrict__ bias, sr_act act, float alpha,
                                              float beta, float *__restrict__ y, int ldy)
{
    for (int e = tid; e < BM * BN; e += THREADS) {
        const int m = m0 + e / BN, n = n0 + e % BN;
        if (m >= M || n >= N) continue;
        float v = red[e];
#pragma unroll
        for (int p = 1; p < PARTS; p++) v = __fadd_rn(v, red[p * BM * BN + e]);
        if (scale) v = __fmul_rn(v, scale[n]); /* an i8 weight's row scale, after the sum */
        if (bias) v = __fadd_rn(v, bias[n]);
        v = apply_act(act, v);
        float *yp = y + (size_t)m * (size_t)ldy + n;
        *yp = beta == 0.0f ? __fmul_rn(alpha, v) : __fadd_rn(__fmul_rn(alpha, v), __fmul_rn(beta, *yp));
    }
}

#define TC_WARPS 8                      /* warps of a block; k tiles dealt among them */
#define TC_U 2                          /* consecutive k tiles of a warp per round */

/* Rows of a SR_KMUL_BF16 weight on the device: n rounded up to whole 16-column fragments. */
__host__ __device__ static inline size_t tc_rows(int n) { return ((size_t)n + 15) / 16 * 16; }

/* xb [Mp][kpad] = the bf16 operands of x (x_to_bf16: the CPU's), zero past M rows and K
 * columns, Mp = M rounded up to 16: what the A fragments are loaded from. */
__global__ static void tc_stage_x(int M, int K, int kpad, int Mp, const float *__restrict__ x,
                                  int ldx, __nv_bfloat16 *__restrict__ xb)
{
    sr_pdl_enter();
    size_t n = (size_t)Mp * (size_t)kpad;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int m = (int)(i / (size_t)kpad), k = (int)(i % (size_t)kpad);
        float v = (m < M && k < K) ? __ldg(x + (size_t)m * (size_t)ldx + k) : 0.0f;
        xb[i] = __float2bfloat16_rn(x_to_bf16(v)); /* exact: x_to_bf16 already rounded */
    }
}

/* y[M, N] from the staged operands xb [Mp][kpad] and the bf16 weight w [tc_rows(N)][kpad]
 * (file comment: k tile t of every output is summed by warp (t / TC_U) % TC_WARPS in increasing
 * t, the warps' sums added in warp order). A and B fragments come straight from global memory
 * (xb is small and stays in L2), D tiles' worth loaded before they are multiplied: no barrier
 * inside the k loop, D loads in flight per warp. */
template <int MT, int NT>
__global__ void __launch_bounds__(32 * TC_WARPS)
gemm_tc_kernel(int M, int N, int kpad, const __nv_bfloat16 *__restrict__ xb,
               const __nv_bfloat16 *__restrict__ w, const float *__restrict__ bias, sr_act act,
               float alpha, float beta, float *__restrict__ y, int ldy)
{
    sr_pdl_enter();
    using namespace nvcuda;
    constexpr int BM = 16 * MT, BN = 16 * NT;
    __shared__ __align__(32) float red[BM * BN]; /* the warps' sum, [m][n] */

    const int tid = (int)threadIdx.x, warp = tid / 32;
    const int n0 = (int)blockIdx.x * BN;
    const int kt_all = kpad / 16;                    /* k tiles (kpad: zero padded) */
    const int rounds = (kt_all + TC_U * TC_WARPS - 1) / (TC_U * TC_WARPS);
    const int nt_live = min(NT, (int)((tc_rows(N) - (size_t)n0) / 16)); /* fragments inside */
    const int m_tiles = (M + BM - 1) / BM;

    for (int mb = (int)blockIdx.y; mb < m_tiles; mb += (int)gridDim.y) {
        const int m0 = mb * BM;
        const int mt_live = min(MT, (M - m0 + 15) / 16);
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[MT][NT];
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++) wmma::fill_fragment(acc[i][j], 0.0f);

        /* this warp's tiles in increasing t, D at a time: all D tiles' fragments are loaded
         * first (D loads in flight per warp), then multiplied in order */
        constexpr int D = MT == 1 ? 8 : MT == 2 ? 4 : 2;
        const int mine = rounds * TC_U;
        for (int i0 = 0; i0 < mine; i0 += D) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bf[D][NT];
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af[D][MT];
            int tt[D];
#pragma unroll
            for (int d = 0; d < D; d++) {
                const int i = i0 + d;
                const int t = ((i / TC_U) * TC_WARPS + warp) * TC_U + i % TC_U; /* the k tile */
                tt[d] = i < mine && t < kt_all ? t : -1;
                if (tt[d] < 0) continue;
#pragma unroll
                for (int j = 0; j < NT; j++)
                    if (j < nt_live)
                        wmma::load_matrix_sync(bf[d][j], w + (size_t)(n0 + 16 * j) * (size_t)kpad + 16 * t,
                                               (unsigned)kpad);
#pragma unroll
                for (int m = 0; m < MT; m++)
                    if (m < mt_live)
                        wmma::load_matrix_sync(af[d][m], xb + (size_t)(m0 + 16 * m) * (size_t)kpad + 16 * t,
                                               (unsigned)kpad);
            }
#pragma unroll
            for (int d = 0; d < D; d++) {
                if (tt[d] < 0) continue;
#pragma unroll
                for (int m = 0; m < MT; m++)
                    if (m < mt_live)
#pragma unroll
                        for (int j = 0; j < NT; j++)
                            if (j < nt_live) wmma::mma_sync(acc[m][j], af[d][m], bf[d][j], acc[m][j]);
            }
        }

        /* the warps' partial sums added in warp order through red */
        for (int w8 = 0; w8 < TC_WARPS; w8++) {
            if (warp == w8) {
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        float *r = red + (16 * i) * BN + 16 * j;
                        if (w8 > 0) {
                            wmma::fragment<wmma::accumulator, 16, 16, 16, float> t;
                            wmma::load_matrix_sync(t, r, BN, wmma::mem_row_major);
#pragma unroll
                            for (int e = 0; e < t.num_elements; e++)
                                acc[i][j].x[e] = __fadd_rn(t.x[e], acc[i][j].x[e]);
                        }
                        wmma::store_matrix_sync(r, acc[i][j], BN, wmma::mem_row_major);
                    }
            }
            __syncthreads();
        }
        tile_epilogue<BM, BN, 32 * TC_WARPS>(red, tid, m0, n0, M, N, NULL, bias, act, alpha, beta, y, ldy);
        __syncthreads(); /* red is reused by the next row tile */
    }
}

template <int MT, int NT>
static void gemm_tc_launch(int M, const __nv_bfloat16 *xb, const sr_kweight *W, const float *bias,
                           sr_act act, float alpha, float beta, float *y, int ldy)
{
    unsigned m_tiles = (unsigned)((M + 16 * MT - 1) / (16 * MT));
    dim3 grid((unsigned)((W->n + 16 * NT - 1) / (16 * NT)), (unsigned)SR_CUDA_GRID_Y(m_tiles));
    sr_cuda_launch(gemm_tc_kernel<MT, NT>, grid, 32 * TC_WARPS, 0, M, W->n, (int)k_pad(W->k), xb,
                   (const __nv_bfloat16 *)W->data, bias, act,
                   alpha, beta, y, ldy);
}

/* ---- register-direct mma kernel (bf16 products, second form) -------------------------------- */

/* The wmma kernel above loads its fragments with load_matrix_sync straight from global memory:
 * 32-byte pieces of 16 weight rows and as many of x's rows, padded to 16 even for one stream
 * (at M = 1 half of what a warp reads is x's zero rows); ncu on an H100 found it L1-bound at
 * 45 % of DRAM bandwidth. This form issues mma.sync.m16n8k16 directly, its operands loaded as
 * 16-byte vectors into the registers the instruction reads (PTX ISA, "Matrix fragments for
 * mma.m16n8k16": lane l = 4 g + q holds A rows g and g + 8, B column g, at k = 2 q, 2 q + 1 and
 * 2 q + 8, 2 q + 9). A lane loads 8 consecutive k of its row (k0 + 8 q .. k0 + 8 q + 7) and feeds
 * them to two mma: elements 0-3 to the first, 4-7 to the second, the same way for A and B, so
 * a 32-wide k block is summed as two 16-wide products over a fixed permutation of its k. A
 * warp's load of one B fragment is then 8 weight rows x 64 contiguous bytes, and x rows >= M
 * are never read.
 *
 * Rows stay independent as in the wmma kernel: 32-wide k block b belongs to warp
 * (b / MMA_G) % MMA_WARPS of every block whatever M, N or the tile shape; a warp runs its blocks
 * in increasing b, each as the same two mma; the warps' sums are added in warp order. So a row
 * alone gives the bits it has in any batch (and the bits differ from the wmma kernel's, which
 * sums in another order: each is checked against the double reference within the f32 bound).
 * kpad is a multiple of 16, so the last block may be half padding: its vectors past kpad read
 * as zero. Up to 16 rows, the kernel reads x's f32 rows itself and rounds them as tc_stage_x
 * would (the same operand bits): no staging launch and no scratch block per product, which at
 * one stream is most of the launches of a step. The default; SRKIT_CUDA_GEMM=wmma or
 * sr_cuda_gemm_kernel (kernels.h) selects the wmma form instead. */
#define MMA_WARPS 8 /* warps of a block; 32-wide k blocks dealt among them */
#define MMA_G 2     /* consecutive k blocks of a warp per round: 128 bytes of each weight row */

/* d += a b over one 16 x 8 x 16 product, bf16 operands, f32 accumulator. */
__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Two activations as the packed bf16 operands x_to_bf16 makes of them (lo in the low half, as
 * the staged array lies in memory): a multiply by 1 flushing subnormal inputs to zero of their
 * sign (mul.ftz: every other value comes out unchanged), then one conversion of the pair to
 * nearest even (cvt.rn.bf16x2.f32, sm_80): 3 instructions for two operands, where x_to_bf16's
 * tests and integer rounding compiled to about 14 each. At one row those were most of the mma
 * kernel's loop: with this, the vector loads below and the i8 widening of w_bf16x8, its
 * compiled loop (sm_90, x read by the kernel) went from 585 to 364 instructions per two k blocks
 * (bf16 weights) and from 1,339 to 877 per four (i8), for the same weight bytes. The same bits
 * for every number; a NaN stays a NaN (its payload the hardware's: the product is NaN either
 * way). The host emulation (scripts/cuda_emu) runs x_to_bf16 itself. */
__device__ __forceinline__ uint32_t x_bf16x2(float lo, float hi)
{
#if defined(__CUDA_ARCH__)
    uint32_t r;
    asm("{\n\t.reg .f32 a, b;\n\t"
        "mul.ftz.f32 a, %1, 0f3F800000;\n\t"
        "mul.ftz.f32 b, %2, 0f3F800000;\n\t"
        "cvt.rn.bf16x2.f32 %0, b, a;\n\t}" /* a (lo) to the low half */
        : "=r"(r)
        : "f"(lo), "f"(hi));
    return r;
#else
    return __float_as_uint(x_to_bf16(lo)) >> 16 | (__float_as_uint(x_to_bf16(hi)) & 0xffff0000u);
#endif
}

/* 8 activations x[k0 .. k0 + 8) of one row (columns >= K read as 0) as the bf16 operands
 * tc_stage_x makes of them, packed two to a register in k order. vec: the row starts on a
 * 16-byte boundary, so a whole group of 8 is two 16-byte loads (else one load each). */
__device__ __forceinline__ uint4 x_bf16x8(const float *__restrict__ xr, int k0, int K, bool vec)
{
    float v[8];
    if (vec && k0 + 8 <= K) {
        const float4 a = __ldg(reinterpret_cast<const float4 *>(xr + k0));
        const float4 b = __ldg(reinterpret_cast<const float4 *>(xr + k0 + 4));
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = k0 + j < K ? __ldg(xr + k0 + j) : 0.0f;
    }
    return make_uint4(x_bf16x2(v[0], v[1]), x_bf16x2(v[2], v[3]), x_bf16x2(v[4], v[5]),
                      x_bf16x2(v[6], v[7]));
}

/* 8 weights from element e of a weight's rows as loaded: bf16 as stored (one 16-byte load), or
 * (WI8) i8 (one 8-byte load), kept so until w_bf16x8 widens them where the mma takes them: a
 * load in flight holds half the registers of its widened form, so the i8 kernel keeps twice the
 * loads in flight (DEPTH) for the registers of the bf16 one. */
template <bool WI8> struct WRaw { typedef uint4 T; };
template <> struct WRaw<true> { typedef uint2 T; };

template <bool WI8>
__device__ __forceinline__ typename WRaw<WI8>::T w_load8(const void *__restrict__ w, size_t e)
{
    return __ldg(reinterpret_cast<const typename WRaw<WI8>::T *>(static_cast<const char *>(w) +
                                                                   e * (WI8 ? 1 : 2)));
}

/* The 8 weights of a w_load8 as bf16 operands: bf16 as they are, i8 values q widened to the bf16
 * numbers they are (exact, |q| <= 128: at most 8 significant bits, so the f32's low half is
 * zero), packed as a bf16 load is (lower k in the low half). The widening without int-to-float
 * conversions (a quarter-rate pipe): byte q + 128 (q xor 0x80) placed as the low mantissa byte
 * of 2^23 (one byte permute) is the float 2^23 + q + 128, and subtracting 2^23 + 128 leaves q
 * exactly; a byte permute then packs two results' upper halves. */
__device__ __forceinline__ uint4 w_bf16x8(uint4 v) { return v; }
__device__ __forceinline__ uint4 w_bf16x8(uint2 v)
{
    const uint32_t lo = v.x ^ 0x80808080u, hi = v.y ^ 0x80808080u;
    uint32_t h[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        /* bytes (q_j + 128, 0, 0, 0x4b): the float 2^23 + q_j + 128 */
        const uint32_t u = __byte_perm(j < 4 ? lo : hi, 0x4b000000u, 0x7540u | (unsigned)(j % 4));
        h[j] = __float_as_uint(__fsub_rn(__uint_as_float(u), 8388736.0f)); /* q_j, exact */
    }
    return make_uint4(__byte_perm(h[0], h[1], 0x7632u), __byte_perm(h[2], h[3], 0x7632u),
                      __byte_perm(h[4], h[5], 0x7632u), __byte_perm(h[6], h[7], 0x7632u));
}

/* The 32-wide k block of a warp's i-th turn: rounds of MMA_G consecutive blocks dealt to the
 * warps in order (the assignment every output's bits depend on: the file comment). */
__device__ __forceinline__ int mma_kb(int i, int warp)
{
    return ((i / MMA_G) * MMA_WARPS + warp) * MMA_G + i % MMA_G;
}

template <int MT, int NJ> __device__ __forceinline__ void mma_acc_zero(float (&acc)[MT][NJ][4])
{
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
}

/* A warp's partial sums into its own [BM][BN] slice of part ([warp][m][n]): D element e of tile
 * (i, j) is row 16 i + g + 8 (e / 2), column 8 j + 2 q + e % 2. tile_epilogue<..., MMA_WARPS>
 * adds the slices in warp order after a barrier. */
template <int MT, int NJ>
__device__ __forceinline__ void mma_store_part(float *part, int warp, int g, int q,
                                               const float (&acc)[MT][NJ][4])
{
    constexpr int BM = 16 * MT, BN = 8 * NJ;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                part[warp * BM * BN + (16 * i + g + 8 * (e / 2)) * BN + 8 * j + 2 * q + e % 2] = acc[i][j][e];
}

/* Overlapping launches (sr_pdl_enter, cuda_impl.h): before its block waits for the kernel
 * queued ahead, the first pf_k elements of each of its weight rows are asked into L2
 * (weights are not what that kernel writes, and a prefetch reads no value), so the weight's
 * stream from memory starts while the previous kernel still runs. k blocks are dealt to the
 * warps a round at a time in increasing k, so that prefix is what the first rounds read. The
 * blocks of the first row tile only (the others read the same rows); pf_k = 0: none. */
template <int BN, bool WI8>
__device__ __forceinline__ void mma_prefetch_w(const void *__restrict__ w, int N, int kpad, int pf_k)
{
    const int n0 = (int)blockIdx.x * BN;
    if (pf_k <= 0 || blockIdx.y != 0) return;
    const int rows = (int)min((size_t)BN, tc_rows(N) - (size_t)n0);
    const size_t esz = WI8 ? 1 : 2, row_bytes = (size_t)kpad * esz;
    const int lines = (int)(((size_t)pf_k * esz + 127) / 128);
    for (int i = (int)threadIdx.x; i < rows * lines; i += (int)blockDim.x)
        sr_prefetch_l2(static_cast<const char *>(w) + (size_t)(n0 + i / lines) * row_bytes +
                       (size_t)(i % lines) * 128);
}

/* y[M, N] from the weight w [tc_rows(N)][kpad] (bf16, or WI8: i8 with its row scales, applied
 * after the sum) and x's operands: the staged xb [Mp][kpad]
 * (XF false), or for few rows (XF true, MT 1) x [M, K] itself (row stride ldx), rounded as it
 * is read: the same operand bits, so the same results, without the staging launch and its
 * buffer. A block computes (16 MT) rows x (8 NJ) columns (NJ 8-column mma tiles: each x
 * fragment loaded once serves them all, so NJ 4 halves the x bytes read per weight byte of NJ
 * 2 at many rows, and NJ 1 makes twice the blocks of NJ 2 for a few rows' small grids), DEPTH
 * k blocks of a warp loaded before they are multiplied. MT, NJ and DEPTH are
 * speed only: each output's products, their order and the warps' sum are the same. */
template <int MT, int DEPTH, bool XF, bool WI8, int NJ = 2>
__global__ void __launch_bounds__(32 * MMA_WARPS)
gemm_mma_kernel(int M, int N, int kpad, const __nv_bfloat16 *__restrict__ xb,
                const float *__restrict__ xf, int ldx, int K, const void *__restrict__ w,
                const float *__restrict__ scale, const float *__restrict__ bias, sr_act act,
                float alpha, float beta, float *__restrict__ y, int ldy, int pf_k)
{
    mma_prefetch_w<8 * NJ, WI8>(w, N, kpad, pf_k);
    sr_pdl_enter();
    static_assert(!XF || MT == 1, "direct activations only for one row tile");
    constexpr int BM = 16 * MT, BN = 8 * NJ;
    /* the warps' sum [m][n]; for one row tile (MT 1: at most 8 KB), each warp's partial sums
     * [warp][m][n] instead, added by the epilogue after one barrier (8 barriers otherwise) */
    constexpr int PARTS = MT == 1 ? MMA_WARPS : 1;
    __shared__ float red[PARTS * BM * BN];

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, q = lane % 4;
    const int n0 = (int)blockIdx.x * BN;
    const int kb_all = (kpad + 31) / 32; /* 32-wide k blocks, the last maybe half */
    const int rounds = (kb_all + MMA_G * MMA_WARPS - 1) / (MMA_G * MMA_WARPS);
    const int mine = rounds * MMA_G;
    const int m_tiles = (M + BM - 1) / BM;
    /* this lane's weight rows n0 + 8 j + g, j < NJ, as element offsets of their first vector;
     * the rows past tc_rows(N) (a multiple of 16: the last block's second pair, NJ 4) are not
     * read (zero operands, their outputs discarded) */
    const size_t w0 = (size_t)(n0 + g) * (size_t)kpad + 8 * q;
    bool jlive[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++) jlive[j] = (size_t)(n0 + 8 * j) < tc_rows(N);

    for (int mb = (int)blockIdx.y; mb < m_tiles; mb += (int)gridDim.y) {
        const int m0 = mb * BM;
        float acc[MT][NJ][4];
        mma_acc_zero(acc);
        /* this lane's x rows m0 + 16 i + g (h = 0) and + 8 (h = 1), or NULL past M */
        const __nv_bfloat16 *xr[MT][2];
        const float *xfr[2];
        bool xv[2] = {false, false}; /* the row starts on 16 bytes: x_bf16x8's vector loads */
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = m0 + 16 * i + 8 * h + g;
                if (XF) {
                    xfr[h] = m < M ? xf + (size_t)m * (size_t)ldx : NULL;
                    xv[h] = ((uintptr_t)xfr[h] & 15u) == 0;
                }
                else xr[i][h] = m < M ? xb + (size_t)m * (size_t)kpad + 8 * q : NULL;
            }

        for (int i0 = 0; i0 < mine; i0 += DEPTH) {
            typename WRaw<WI8>::T bv[DEPTH][NJ];
            uint4 av[DEPTH][MT][2];
            bool live[DEPTH];
#pragma unroll
            for (int d = 0; d < DEPTH; d++) {
                const int i = i0 + d;
                const int kb = mma_kb(i, warp);
                live[d] = i < mine && kb < kb_all; /* warp-uniform */
                const size_t k = (size_t)kb * 32;
                /* the vector at k + 8 q is wholly inside kpad or wholly past it */
                const bool in = live[d] && k + 8 * (size_t)q < (size_t)kpad;
                const uint4 z = make_uint4(0u, 0u, 0u, 0u);
                const typename WRaw<WI8>::T zw = {};
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    bv[d][j] = in && jlive[j] ? w_load8<WI8>(w, w0 + (size_t)(8 * j) * (size_t)kpad + k) : zw;
#pragma unroll
                for (int mi = 0; mi < MT; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        if (XF)
                            av[d][mi][h] = in && xfr[h] ? x_bf16x8(xfr[h], (int)k + 8 * q, K, xv[h]) : z;
                        else
                            av[d][mi][h] = in && xr[mi][h] ? __ldg(reinterpret_cast<const uint4 *>(xr[mi][h] + k)) : z;
                    }
            }
#pragma unroll
            for (int d = 0; d < DEPTH; d++) {
                if (!live[d]) continue;
#pragma unroll
                for (int mi = 0; mi < MT; mi++)
#pragma unroll
                    for (int j = 0; j < NJ; j++) {
                        const uint4 &a0 = av[d][mi][0], &a1 = av[d][mi][1], b = w_bf16x8(bv[d][j]);
                        mma_16816(acc[mi][j], a0.x, a1.x, a0.y, a1.y, b.x, b.y); /* k +0..3 */
                        mma_16816(acc[mi][j], a0.z, a1.z, a0.w, a1.w, b.z, b.w); /* k +4..7 */
                    }
            }
        }

        /* the warps' partial sums added in warp order: D element e of tile (i, j) is row
         * 16 i + g + 8 (e / 2), column 8 j + 2 q + e % 2 */
        if constexpr (PARTS > 1) { /* each warp's own, summed in the epilogue */
            mma_store_part(red, warp, g, q, acc);
            __syncthreads();
        } else {
            for (int w8 = 0; w8 < MMA_WARPS; w8++) {
                if (warp == w8) {
#pragma unroll
                    for (int i = 0; i < MT; i++)
#pragma unroll
                        for (int j = 0; j < NJ; j++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                float *r = red + (16 * i + g + 8 * (e / 2)) * BN + 8 * j + 2 * q + e % 2;
                                *r = w8 > 0 ? __fadd_rn(*r, acc[i][j][e]) : acc[i][j][e];
                            }
                }
                __syncthreads();
            }
        }
        tile_epilogue<BM, BN, 32 * MMA_WARPS, PARTS>(red, tid, m0, n0, M, N, WI8 ? scale : NULL, bias,
                                                     act, alpha, beta, y, ldy);
        __syncthreads(); /* red is reused by the next row tile */
    }
}

/* ---- the mma kernel with its operands staged by cp.async (staged x only) ------------------ */

/* The staged mma kernel above loads each k block's operands straight into registers, DEPTH
 * (1 at 64 rows) blocks ahead: at 64 rows its products ran at 0.5-0.9 TB/s of weight bytes on
 * the H200 and at 256 rows at about 66 TFLOP/s (7 % of the tensor cores): neither limit, so
 * likely the loads' latency (not yet profiled). This form gives each warp a ring of STAGES
 * shared-memory buffers and fills them with cp.async (asynchronous copies into shared memory
 * that hold no registers while in flight), STAGES - 1 k blocks
 * ahead of the one multiplied; the mma operands are then read from shared memory as 16-byte
 * vectors, lane (g, q) taking row g's (and g + 8's) 16 bytes at k + 8 q: the vectors, fragments,
 * mma sequence of each warp and warp-order sum of gemm_mma_kernel, so the same bits (rows
 * independent; a row alone as in any batch). Rows past M, weight rows past tc_rows(N) and
 * vectors past kpad are copied as zeros (cp.async's source size 0), the zeros the other form
 * gives them. Each warp uses only its own buffers, so the ring needs warp barriers only; the
 * warps' partial sums go to shared memory (reusing the ring) and the epilogue adds them in warp
 * order after one block barrier. Selected by SRKIT_CUDA_GEMM_ASYNC=1 (sr_cuda_gemm_async;
 * off by default until it has run on a device). */

/* 16 (or WI8: 8) bytes from global src to shared dst, asynchronously; n < the size: zeros. The
 * host emulation copies at once. */
template <int BYTES>
__device__ __forceinline__ void cp_async(void *dst, const void *src, bool full)
{
#if defined(__CUDA_ARCH__)
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    const int n = full ? BYTES : 0;
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(BYTES), "r"(n));
#else
    if (full) memcpy(dst, src, BYTES);
    else memset(dst, 0, BYTES);
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* wait until at most N of this thread's most recent groups are pending */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* Bytes of one stage of one warp: 16 MT x rows and 8 NJ weight rows of a 32-wide k block. */
template <int MT, int NJ, bool WI8> struct AsyncStage {
    static constexpr int XB = 16 * MT * 64;             /* x rows, 64 bytes each */
    static constexpr int WROW = WI8 ? 32 : 64;           /* a weight row's bytes of the block */
    static constexpr int BYTES = XB + 8 * NJ * WROW;
};

template <int MT, int NJ, bool WI8, int STAGES>
static constexpr size_t async_smem()
{
    return (size_t)MMA_WARPS * STAGES * AsyncStage<MT, NJ, WI8>::BYTES;
}

template <int MT, bool WI8, int NJ, int STAGES>
__global__ void __launch_bounds__(32 * MMA_WARPS)
gemm_mma_async_kernel(int M, int N, int kpad, const __nv_bfloat16 *__restrict__ xb,
                      const void *__restrict__ w, const float *__restrict__ scale,
                      const float *__restrict__ bias, sr_act act, float alpha, float beta,
                      float *__restrict__ y, int ldy, int pf_k)
{
    mma_prefetch_w<8 * NJ, WI8>(w, N, kpad, pf_k);
    sr_pdl_enter();
    typedef AsyncStage<MT, NJ, WI8> SG;
    constexpr int BM = 16 * MT, BN = 8 * NJ, ESZ = WI8 ? 1 : 2;
    static_assert(MMA_WARPS * BM * BN * 4 <= MMA_WARPS * STAGES * SG::BYTES,
                  "the warps' partial sums fit the ring");
    extern __shared__ float4 async_smem_v[]; /* 16-byte aligned */
    unsigned char *smem = reinterpret_cast<unsigned char *>(async_smem_v);
    float *part = reinterpret_cast<float *>(smem); /* after the loop: [warp][BM][BN] */

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, q = lane % 4;
    const int n0 = (int)blockIdx.x * BN;
    const int kb_all = (kpad + 31) / 32;
    const int rounds = (kb_all + MMA_G * MMA_WARPS - 1) / (MMA_G * MMA_WARPS);
    const int mine = rounds * MMA_G;
    const size_t wrows = tc_rows(N);
    const char *wb = static_cast<const char *>(w);
    unsigned char *ring = smem + (size_t)warp * STAGES * SG::BYTES;
    const int m_tiles = (M + BM - 1) / BM;

    for (int mb = (int)blockIdx.y; mb < m_tiles; mb += (int)gridDim.y) {
        const int m0 = mb * BM;
        /* this warp's i-th k block into stage i % STAGES (nothing past its last: an empty group) */
        auto load = [&](int i) {
            if (i >= mine) return;
            const int kb = mma_kb(i, warp);
            if (kb >= kb_all) return; /* warp-uniform: a block no warp multiplies */
            unsigned char *st = ring + (size_t)(i % STAGES) * SG::BYTES;
            const size_t k = (size_t)kb * 32;
#pragma unroll
            for (int t = 0; t < 2 * MT; t++) { /* 16 MT rows x 4 vectors, 2 MT a lane */
                const int c = lane + 32 * t, r = c / 4, cq = c % 4, m = m0 + r;
                const bool in = m < M && k + 8 * (size_t)cq < (size_t)kpad;
                cp_async<16>(st + r * 64 + cq * 16, in ? xb + (size_t)m * (size_t)kpad + k + 8 * cq : xb, in);
            }
#pragma unroll
            for (int t = 0; t < NJ; t++) { /* 8 NJ weight rows x 4 vectors, NJ a lane */
                const int c = lane + 32 * t, r = c / 4, cq = c % 4;
                const size_t n = (size_t)(n0 + r);
                const bool in = n < wrows && k + 8 * (size_t)cq < (size_t)kpad;
                cp_async<8 * ESZ>(st + SG::XB + r * SG::WROW + cq * 8 * ESZ,
                                  in ? wb + (n * (size_t)kpad + k + 8 * cq) * ESZ : wb, in);
            }
        };

        float acc[MT][NJ][4];
        mma_acc_zero(acc);
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            load(s);
            cp_async_commit();
        }
        for (int i = 0; i < mine; i++) {
            cp_async_wait<STAGES - 2>(); /* this lane's copies of block i are done */
            __syncwarp();                /* and every lane's, and every lane is past block i - 1 */
            load(i + STAGES - 1);        /* into block i - 1's stage */
            cp_async_commit();
            if (mma_kb(i, warp) >= kb_all) continue; /* warp-uniform */
            const unsigned char *st = ring + (size_t)(i % STAGES) * SG::BYTES;
#pragma unroll
            for (int mi = 0; mi < MT; mi++) {
                const uint4 a0 = *reinterpret_cast<const uint4 *>(st + (16 * mi + g) * 64 + q * 16);
                const uint4 a1 = *reinterpret_cast<const uint4 *>(st + (16 * mi + 8 + g) * 64 + q * 16);
#pragma unroll
                for (int j = 0; j < NJ; j++) {
                    const unsigned char *wp = st + SG::XB + (8 * j + g) * SG::WROW + q * 8 * ESZ;
                    const uint4 b = w_bf16x8(*reinterpret_cast<const typename WRaw<WI8>::T *>(wp));
                    mma_16816(acc[mi][j], a0.x, a1.x, a0.y, a1.y, b.x, b.y); /* k +0..3 */
                    mma_16816(acc[mi][j], a0.z, a1.z, a0.w, a1.w, b.z, b.w); /* k +4..7 */
                }
            }
        }
        cp_async_wait<0>();
        __syncthreads(); /* every warp is done with its ring: it holds the partial sums now */
        mma_store_part(part, warp, g, q, acc);
        __syncthreads();
        tile_epilogue<BM, BN, 32 * MMA_WARPS, MMA_WARPS>(part, tid, m0, n0, M, N, WI8 ? scale : NULL,
                                                         bias, act, alpha, beta, y, ldy);
        __syncthreads(); /* the ring is refilled by the next row tile */
    }
}

/* The launch shape of an mma kernel of (16 MT) x (8 NJ) tiles over W at M rows: its grid, W's
 * kpad, and pf_k, the weight prefix each row asks into L2 (mma_prefetch_w) while the launch
 * overlaps the one ahead: 16 MB in all, a third of an H100's L2 (0 without overlap). */
struct MmaShape {
    dim3 grid;
    int kpad, pf_k;
};
template <int MT, int NJ> static MmaShape mma_shape(int M, const sr_kweight *W)
{
    const unsigned m_tiles = (unsigned)((M + 16 * MT - 1) / (16 * MT));
    MmaShape sh;
    sh.grid = dim3((unsigned)((tc_rows(W->n) / 8 + NJ - 1) / NJ), (unsigned)SR_CUDA_GRID_Y(m_tiles));
    sh.kpad = (int)k_pad(W->k);
    const size_t esz = W->dtype == SR_I8 ? 1 : 2, budget = (size_t)16 << 20;
    const size_t per_row = budget / (tc_rows(W->n) * esz);
    sh.pf_k = !sr_cuda_pdl_live() ? 0 : per_row >= (size_t)sh.kpad ? sh.kpad : (int)per_row;
    return sh;
}

template <int MT, int DEPTH, bool XF, int NJ = 2>
static void gemm_mma_launch(int M, const __nv_bfloat16 *xb, const float *x, int ldx,
                            const sr_kweight *W, const float *bias, sr_act act, float alpha,
                            float beta, float *y, int ldy)
{
    const MmaShape sh = mma_shape<MT, NJ>(M, W);
    const dim3 grid = sh.grid;
    const int kpad = sh.kpad, pf_k = sh.pf_k;
    /* i8 reading x itself (up to 16 rows: one stream's step): twice the k blocks in flight, for
     * the bytes in flight of bf16 (w_load8; 97 registers against bf16's 75 on sm_90, while such
     * grids have about 2 blocks a multiprocessor); the staged shapes keep DEPTH (twice would
     * take them from 96-128 to 142-192 registers) */
    constexpr int DI8 = XF ? 2 * DEPTH : DEPTH;
    if (W->dtype == SR_I8)
        sr_cuda_launch(gemm_mma_kernel<MT, DI8, XF, true, NJ>, grid, 32 * MMA_WARPS, 0, M, W->n,
                       kpad, xb, x, ldx, W->k, W->data, W->scale, bias, act, alpha, beta, y, ldy,
                       pf_k);
    else
        sr_cuda_launch(gemm_mma_kernel<MT, DEPTH, XF, false, NJ>, grid, 32 * MMA_WARPS, 0, M, W->n,
                       kpad, xb, x, ldx, W->k, W->data, nullptr, bias, act, alpha, beta, y, ldy, pf_k);
}

/* The mma kernel's columns a block: 0 always 16 (the default until the others are timed on a
 * device); above 16 rows (staged x) 1 always 32, 2 32 where that still gives two blocks a
 * multiprocessor, else 16; 3 8 at up to 16 rows (x read by the kernel: one stream's step), 16
 * above. At many rows each block reads its rows of x once for all its columns: 32 columns read
 * half the x bytes per weight byte of 16, but make half the blocks. At a few rows a weight of
 * 3,072 or 4,096 rows makes 192-256 blocks of 16 on 132 multiprocessors (one or two each: the
 * twos finish last); 8 columns make twice the blocks, spread more evenly. Speed only: the same
 * bits (gemm_mma_kernel). SRKIT_CUDA_GEMM_COLS=16 / 32 / auto / 8; sr_cuda_gemm_cols overrides
 * it (tests, bench). */
static sr_cuda_setting gemm_cols_setting = {"SRKIT_CUDA_GEMM_COLS", {"16", "32", "auto", "8"}, 0, {-1}, {-2}};

extern "C" int sr_cuda_gemm_cols(int v) { return sr_cuda_setting_use(gemm_cols_setting, v); }

static bool gemm_wide_cols(const sr_kweight *W)
{
    const int v = sr_cuda_gemm_cols(-1);
    if (v != 2) return v == 1;
    return (long)(tc_rows(W->n) / 32) >= 2L * sr_cuda_sm_count();
}

/* The bf16-product kernel in use: 0 the wmma form, 1 the mma form (the default: 1.1-1.8x the
 * wmma form's speed at M 1-512 on an H200, docs/benchmarks.md). SRKIT_CUDA_GEMM=wmma selects the
 * first; sr_cuda_gemm_kernel overrides it (tests, bench). */
static sr_cuda_setting gemm_kernel_setting = {"SRKIT_CUDA_GEMM", {"wmma", "mma", NULL}, 1, {-1}, {-2}};

extern "C" int sr_cuda_gemm_kernel(int v) { return sr_cuda_setting_use(gemm_kernel_setting, v); }

/* The cp.async form of the staged mma kernel in use: 0 no (the default until it has run on a
 * device), 1 yes; SRKIT_CUDA_GEMM_ASYNC=1 selects it, sr_cuda_gemm_async overrides (tests,
 * bench). Speed only: the same bits. */
static sr_cuda_setting gemm_async_setting = {"SRKIT_CUDA_GEMM_ASYNC", {"0", "1", NULL}, 0, {-1}, {-2}};

extern "C" int sr_cuda_gemm_async(int v) { return sr_cuda_setting_use(gemm_async_setting, v); }

/* One kernel instantiation's launch with its dynamic shared memory (the opt-in above 48 KB set
 * once per instantiation; a refusal shows as the launch's error). */
template <int MT, bool WI8, int NJ, int STAGES>
static void gemm_async_kernel_launch(dim3 grid, int M, int kpad, const __nv_bfloat16 *xb,
                                     const sr_kweight *W, const float *bias, sr_act act,
                                     float alpha, float beta, float *y, int ldy, int pf_k)
{
    constexpr size_t smem = async_smem<MT, NJ, WI8, STAGES>();
    static const bool opted = cudaFuncSetAttribute(gemm_mma_async_kernel<MT, WI8, NJ, STAGES>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem) == cudaSuccess;
    (void)opted;
    sr_cuda_launch(gemm_mma_async_kernel<MT, WI8, NJ, STAGES>, grid, 32 * MMA_WARPS, smem, M, W->n,
                   kpad, xb, W->data, WI8 ? W->scale : nullptr, bias, act, alpha, beta, y, ldy, pf_k);
}

/* The cp.async form (staged x) with gemm_mma_launch's shape. */
template <int MT, int NJ, int STAGES>
static void gemm_mma_async_launch(int M, const __nv_bfloat16 *xb, const sr_kweight *W,
                                  const float *bias, sr_act act, float alpha, float beta, float *y,
                                  int ldy)
{
    const MmaShape sh = mma_shape<MT, NJ>(M, W);
    if (W->dtype == SR_I8)
        gemm_async_kernel_launch<MT, true, NJ, STAGES>(sh.grid, M, sh.kpad, xb, W, bias, act, alpha,
                                                       beta, y, ldy, sh.pf_k);
    else
        gemm_async_kernel_launch<MT, false, NJ, STAGES>(sh.grid, M, sh.kpad, xb, W, bias, act, alpha,
                                                        beta, y, ldy, sh.pf_k);
}

/* The mma kernel over the staged operands xb, NJ 8-column tiles a block: row tiles of 32 up to
 * 32 rows, of 64 above (speed only); with SRKIT_CUDA_GEMM_ASYNC=1 its cp.async form (3 stages a
 * warp: 72 to 147 KB of shared memory a block). */
template <int NJ>
static void gemm_mma_staged(int M, const __nv_bfloat16 *xb, const sr_kweight *W, const float *bias,
                            sr_act act, float alpha, float beta, float *y, int ldy)
{
    if (sr_cuda_gemm_async(-1) == 1) {
        if (M <= 32) gemm_mma_async_launch<2, NJ, 3>(M, xb, W, bias, act, alpha, beta, y, ldy);
        else gemm_mma_async_launch<4, NJ, 3>(M, xb, W, bias, act, alpha, beta, y, ldy);
        return;
    }
    if (M <= 32) gemm_mma_launch<2, 2, false, NJ>(M, xb, NULL, 0, W, bias, act, alpha, beta, y, ldy);
    else gemm_mma_launch<4, 1, false, NJ>(M, xb, NULL, 0, W, bias, act, alpha, beta, y, ldy);
}

/* x staged as bf16 operands in a block of the table's pool (freed after the launch, in order), then
 * the tile shape by M (speed only: every shape gives the same bits). */
static sr_status gemm_tc(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                         sr_act act, float alpha, float beta, float *y, int ldy)
{
    /* the mma kernel reads up to 16 rows of x itself: no staging launch, no buffer. Two k blocks
     * loaded ahead (DEPTH): 4 and 8 were no faster on an H200 (registers bound the bytes in
     * flight; Voxtral mini-4b batch 1 RTF 0.145 / 0.152 / 0.188 at 2 / 4 / 8; an i8 weight 4,
     * see gemm_mma_launch). An i8 weight has only the mma form (its bytes widened in
     * registers), whichever form is selected. */
    const int mma = sr_cuda_gemm_kernel(-1) == 1 || W->dtype == SR_I8;
    if (M <= 16 && mma) {
        if (sr_cuda_gemm_cols(-1) == 3)
            gemm_mma_launch<1, 2, true, 1>(M, NULL, x, ldx, W, bias, act, alpha, beta, y, ldy);
        else
            gemm_mma_launch<1, 2, true>(M, NULL, x, ldx, W, bias, act, alpha, beta, y, ldy);
        return sr_cuda_launched("gemm (bf16 products)");
    }
    const int kpad = (int)k_pad(W->k), Mp = (M + 15) / 16 * 16;
    size_t n = (size_t)Mp * (size_t)kpad;
    void *xbv = NULL;
    cudaError_t e = sr_cuda_malloc_pooled(&xbv, n * sizeof(__nv_bfloat16));
    if (e != cudaSuccess) return sr_cuda_fail("gemm: bf16 operands of x", e);
    __nv_bfloat16 *xb = (__nv_bfloat16 *)xbv;
    size_t blocks = (n + 255) / 256;
    sr_cuda_launch(tc_stage_x, (unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, M, W->k, kpad, Mp, x, ldx, xb);
    if (mma && gemm_wide_cols(W)) gemm_mma_staged<4>(M, xb, W, bias, act, alpha, beta, y, ldy);
    else if (mma) gemm_mma_staged<2>(M, xb, W, bias, act, alpha, beta, y, ldy);
    else if (M <= 16) gemm_tc_launch<1, 1>(M, xb, W, bias, act, alpha, beta, y, ldy);
    else if (M <= 32) gemm_tc_launch<2, 1>(M, xb, W, bias, act, alpha, beta, y, ldy);
    else gemm_tc_launch<4, 2>(M, xb, W, bias, act, alpha, beta, y, ldy);
    sr_status st = sr_cuda_launched("gemm (bf16 products)");
    sr_cuda_free(xb);
    return st;
}

/* The wide tile once its blocks occupy a third of the multiprocessors: it does 16 fused
 * multiply-adds per two shared loads, the skinny one 4, so even a partly filled device runs it
 * faster; below that (and always for M <= 16) the skinny tile's many small blocks. Speed only
 * (not yet tuned on a device): both compute the same bits. */
static bool gemm_pick_wide(int M, int N)
{
    if (M <= TileSkinny::BM) return false;
    long tiles = (long)((M + TileWide::BM - 1) / TileWide::BM) *
                 (long)((N + TileWide::BN - 1) / TileWide::BN);
    return 3 * tiles >= sr_cuda_sm_count();
}

template <class TL, int WK>
static void gemm_launch(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                        sr_act act, float alpha, float beta, float *y, int ldy)
{
    typedef typename WTraits<WK>::T T;
    unsigned m_tiles = (unsigned)((M + TL::BM - 1) / TL::BM);
    dim3 grid((unsigned)((W->n + TL::BN - 1) / TL::BN), (unsigned)SR_CUDA_GRID_Y(m_tiles));
    sr_cuda_launch(gemm_kernel<TL, WK>, grid, TL::THREADS, 0, M, W->n, W->k, (int)k_pad(W->k), x, ldx,
                   (const T *)W->data, W->scale, bias, act, alpha,
                   beta, y, ldy);
}

template <class TL>
static void gemm_dispatch(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                          sr_act act, float alpha, float beta, float *y, int ldy)
{
    switch (W->dtype) {
    case SR_F32: gemm_launch<TL, WK_F32>(M, x, ldx, W, bias, act, alpha, beta, y, ldy); break;
    case SR_BF16: gemm_launch<TL, WK_BF16>(M, x, ldx, W, bias, act, alpha, beta, y, ldy); break;
    case SR_F16: gemm_launch<TL, WK_F16>(M, x, ldx, W, bias, act, alpha, beta, y, ldy); break;
    default: gemm_launch<TL, WK_I8>(M, x, ldx, W, bias, act, alpha, beta, y, ldy); break;
    }
}

sr_status sr_cuda_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                       sr_act act, float alpha, float beta, float *y, int ldy)
{
    sr_status st = sr_kernels_check_gemm(M, x, ldx, W, act, y, ldy);
    if (st || M == 0) return st;

    if (W->mul == SR_KMUL_BF16) return gemm_tc(M, x, ldx, W, bias, act, alpha, beta, y, ldy);
    if (gemm_pick_wide(M, W->n))
        gemm_dispatch<TileWide>(M, x, ldx, W, bias, act, alpha, beta, y, ldy);
    else
        gemm_dispatch<TileSkinny>(M, x, ldx, W, bias, act, alpha, beta, y, ldy);
    return sr_cuda_launched("gemm");
}

/* ---- weights ---------------------------------------------------------------------------- */

/* bf16 subnormals (exponent 0, mantissa not) to zero of their sign, in place over n elements:
 * the stored form of a weight with bf16 products (the CPU's bf16_daz). */
__global__ static void bf16_daz_kernel(uint16_t *w, size_t n)
{
    sr_pdl_enter();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint16_t b = w[i];
        if (!(b & 0x7f80u)) w[i] = (uint16_t)(b & 0x8000u);
    }
}

sr_status sr_cuda_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                                sr_kmul mul, sr_kweight **out)
{
    sr_status st = sr_kernels_check_weight_create(host, dt, n, k, scale, mul, out);
    if (st) return st;
    sr_kweight *W = (sr_kweight *)calloc(1, sizeof *W);
    if (!W) return sr_error(SR_ERR_NOMEM, "weight_create: %d x %d weight", n, k);
    W->n = n;
    W->k = k;
    W->dtype = dt;
    W->mul = mul;
    const size_t es = elt_size(dt), kp = k_pad(k);
    const size_t row = (size_t)k * es, prow = kp * es; /* host and device row bytes */
    /* bf16-product weights: whole 16-row fragments for the tensor-core kernel, the extra rows 0 */
    const size_t rows = mul == SR_KMUL_BF16 ? tc_rows(n) : (size_t)n;
    const size_t data_bytes = rows * prow;
    const size_t scale_bytes = dt == SR_I8 ? (size_t)n * sizeof(float) : 0;
    cudaError_t e = sr_cuda_malloc(&W->data, data_bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        W->data = NULL;
        free(W);
        return sr_error(SR_ERR_NOMEM, "weight_create: %zu bytes of device memory for a %d x %d "
                        "weight (%s)", data_bytes, n, k, cudaGetErrorString(e));
    }
    if (dt == SR_I8) {
        e = sr_cuda_malloc((void **)&W->scale, scale_bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            W->scale = NULL;
            sr_cuda_weight_free(W);
            return sr_error(SR_ERR_NOMEM, "weight_create: %zu bytes of device memory for the i8 "
                            "scales of a %d x %d weight (%s)", scale_bytes, n, k,
                            cudaGetErrorString(e));
        }
    }
    W->bytes = data_bytes + scale_bytes;
    /* [n][k] host rows into [n][kpad] device rows, the padding zero */
    if (kp == (size_t)k && rows == (size_t)n) {
        e = cudaMemcpy(W->data, host, data_bytes, cudaMemcpyHostToDevice);
    } else {
        e = cudaMemset(W->data, 0, data_bytes);
        if (e == cudaSuccess)
            e = cudaMemcpy2D(W->data, prow, host, row, row, (size_t)n, cudaMemcpyHostToDevice);
    }
    if (e == cudaSuccess && dt == SR_I8)
        e = cudaMemcpy(W->scale, scale, scale_bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        sr_cuda_weight_free(W);
        return sr_cuda_fail("weight_create upload", e);
    }
    if (mul == SR_KMUL_BF16 && dt == SR_BF16) { /* i8 values are integers: nothing to flush */
        size_t cnt = (size_t)n * kp;
        size_t blocks = (cnt + 255) / 256;
        sr_cuda_launch(bf16_daz_kernel, (unsigned)(blocks < 65535 ? blocks : 65535), 256, 0,
                       (uint16_t *)W->data, cnt);
        sr_status st = sr_cuda_launched("weight_create");
        if (st) {
            sr_cuda_weight_free(W);
            return st;
        }
    }
    *out = W;
    return SR_OK;
}

void sr_cuda_weight_free(sr_kweight *w)
{
    if (!w) return;
    sr_cuda_free(w->data);
    sr_cuda_free(w->scale);
    free(w);
}

/* ---- gather ------------------------------------------------------------------------------ */

/* A launch's ids, passed by value: the kernel parameters are copied at launch, so the host
 * array is "uploaded" with no allocation and no synchronization. */
struct GatherIds {
    int32_t v[GATHER_IDS];
};

/* y[i, k] = E[ids[i], k] widened exactly (I8: q * scale[row], one f32 product) for i < count,
 * k < K; rows in blockIdx.y, k over the x grid (looping past it). */
__global__ static void gather_kernel(const void *__restrict__ data, const float *__restrict__ scale,
                                     sr_dtype dt, int K, size_t kpad, GatherIds ids, int count,
                                     float *__restrict__ y, int ldy)
{
    sr_pdl_enter();
    const int i = (int)blockIdx.y;
    if (i >= count) return;
    const int r = ids.v[i];
    float *yr = y + (size_t)i * (size_t)ldy;
    const size_t base = (size_t)r * kpad;
    for (int k = (int)(blockIdx.x * blockDim.x + threadIdx.x); k < K;
         k += (int)(gridDim.x * blockDim.x)) {
        float v;
        switch (dt) {
        case SR_F32: v = ((const float *)data)[base + k]; break;
        case SR_BF16: v = bf16_to_f32(((const uint16_t *)data)[base + k]); break;
        case SR_F16: v = __half2float(__ushort_as_half(((const uint16_t *)data)[base + k])); break;
        default: v = __fmul_rn(__int2float_rn(((const int8_t *)data)[base + k]), scale[r]); break;
        }
        yr[k] = v;
    }
}

sr_status sr_cuda_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy)
{
    sr_status st = sr_kernels_check_gather(E, ids, n, y, ldy);
    if (st || n == 0) return st;
    const int threads = 256;
    const unsigned gx = (unsigned)((E->k + threads - 1) / threads);
    for (int i0 = 0; i0 < n; i0 += GATHER_IDS) {
        const int count = n - i0 < GATHER_IDS ? n - i0 : GATHER_IDS;
        GatherIds g;
        memcpy(g.v, ids + i0, (size_t)count * sizeof(int32_t));
        dim3 grid(gx, (unsigned)count);
        sr_cuda_launch(gather_kernel, grid, threads, 0, E->data, E->scale, E->dtype, E->k, k_pad(E->k), g, count,
                       y + (size_t)i0 * (size_t)ldy, ldy);
        sr_status st = sr_cuda_launched("gather");
        if (st) return st;
    }
    return SR_OK;
}
