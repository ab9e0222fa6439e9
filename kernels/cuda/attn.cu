/*
 * attn.cu — the CUDA table's attention over cache pools (kernels.h: sr_kattn, sr_kattn_fn),
 * the device twin of kernels/cpu/attn.c: one launch covers every query row of every sequence
 * of a batch, each row reading its own stream's slot of the K and V pools where the keys lie
 * (ring row = position % pool rows), over its own key range [lo, hi) only. No cache is
 * stacked, copied or masked after the fact ("Flux" fused cache-indexed attention).
 *
 * Numbers: the CPU's sequence of operations, bit for bit. kernels/cpu/attn.c defines every
 * output element by one fixed sequence of correctly rounded operations, and this kernel
 * performs exactly that sequence, so the CUDA table returns the CPU table's bits (NaN
 * payloads aside, see pool_widen):
 *   acc  = +0; acc = fma(q'[d], k_j[d], acc) for d ascending   (q' = q, or q + u with rel-pos)
 *   rel  bd likewise with q + v and the rel row P(p_r - j); acc = acc + bd
 *   s_j  = scale * acc
 *   m    = max of s_j over the range (a NaN score is skipped; -inf when every score is NaN)
 *   e_j  = exp(s_j - m) by the CPU's Cephes polynomial (sr_exp_poly, kernels/exp_poly.h: one
 *          definition for both)
 *   sum  = +0.0; sum = sum + (double)e_j for j ascending, in double
 *   o[d] = +0; o[d] = fma(e_j, v_j[d], o[d]) for j ascending
 *   out  = o[d] * (float)(1.0 / sum)                        (an empty range: out = +0)
 * That is why the dot products and the value sums are sequential chains owned by one thread
 * (a tree reduction over d or j would round differently), and why every product and sum that
 * is not an explicit fma is written with the __f*_rn intrinsics: nvcc contracts a * b + c
 * into an fma by default, which the CPU (-std=c11, no contraction) never does. Denormals are
 * kept (no -ftz), as on the CPU.
 *
 * Launch layout (the narrow and wide forms; the grouped form, SRKIT_CUDA_ATTN=grouped, takes a
 * K/V head's query heads in one block: attn_grouped_kernel; the split form,
 * SRKIT_CUDA_ATTN=split, cuts a few rows' work into key tiles and column groups:
 * attn_split_scores / attn_split_values; the rows form, SRKIT_CUDA_ATTN=rows, takes up to 4
 * rows of a sequence in one block: attn_rows_kernel):
 * grid (n_head, rows) with one block of NT = 128 threads per (query row, head);
 * the row index loops past the grid's y limit. A block reads its row's control record (its
 * key count, slot, ring rows of the first key, first rel row), so sequences of any length and
 * any slot mix freely in one launch, and the query heads of a K/V head (GQA, consecutive in x)
 * run side by side and share that head's rows in L2.
 *   scores   tiles of TK = 128 keys, one key per thread: the keys' columns are staged
 *            TD = 32 at a time into shared memory, transposed [d][key] with a padded stride
 *            (coalesced reads: a warp reads 32 consecutive columns of one key row; no bank
 *            conflicts either way), together with the matching 32 elements of q'; each thread
 *            then runs its key's fma chain on. Rel-pos runs the same tiles over the rel rows
 *            m = rel_max - p_r + j (consecutive for consecutive keys).
 *   softmax  two passes, so the scores need no rescaling (an online softmax would round
 *            differently): the scores go to shared memory when the row's range fits (up to
 *            CAP_MAX = 8064 keys under the default 48 KB), else the first pass keeps only the
 *            maximum and the second recomputes the scores chunk by chunk (twice the QK work
 *            for such long ranges, the same bits).
 *   values   thread d owns output column d and runs its fma chain over the keys in order; the
 *            threads of the first column pass also carry the double sum alongside, so each has
 *            the normalizer without a broadcast. The value rows are staged in tiles through the
 *            score sub-tile's area (as the pool stores them: 64 rows of 128 bf16 columns a
 *            tile), all threads loading a tile together (coalesced along the rows) before the
 *            chains run over it; head_dim above 2 NT keeps the direct per-column reads.
 *            Partial sums of a chunked row wait in the row's own output columns. (The narrow
 *            form reads each column's values directly instead, see attn_kernel.)
 *   staging  global loads in rounds (stage): each thread issues 16 (the narrow form 4)
 *            independent loads before storing any (a plain load-store loop keeps one).
 *
 * The per-row control records (computed on the host from sr_kbatch and the key ranges) travel
 * as kernel parameters, ATTN_ROWS rows per launch (a call of more rows is several launches of
 * consecutive rows: rows are independent): the parameters are copied at launch, so there is
 * no device buffer, no copy and no wait for queued work (a synchronous cudaMemcpy from
 * pageable memory would first wait for the whole queue, once per layer).
 */
#include "cuda_impl.h"
#include "../exp_poly.h" /* sr_exp_poly: the CPU attention's exp, the same bits */

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <type_traits>

namespace {

constexpr int NT = 128;                    /* threads per block */
constexpr int TK = NT;                     /* keys per score tile: one per thread */
constexpr int TD = 32;                     /* head_dim columns staged per sub-tile */
constexpr int KT_LD = TK + 1;              /* padded stride of the transposed sub-tile */
constexpr int SMEM_FIXED = TD * KT_LD + TD + NT / 32; /* floats: sub-tile, q' slice, maxima */
constexpr int SMEM_LIMIT = 48 * 1024;      /* dynamic shared memory without an opt-in */
/* Most scores kept in shared memory (a multiple of TK, so recomputed chunks start on tiles). */
constexpr int CAP_MAX = ((SMEM_LIMIT / (int)sizeof(float) - SMEM_FIXED) / TK) * TK;
static_assert(CAP_MAX >= TK, "shared memory too small for one score tile");
constexpr int LD_UK = 16, LD_UV = 16;     /* loads a thread issues before their stores (K, V) */
constexpr int LD_NARROW = 4;               /* the same in the narrow form (attn_kernel) */
constexpr int VT_BYTES = TD * KT_LD * (int)sizeof(float); /* the sub-tile's area, reused for V */

/* One query row's control record (host-computed, a kernel parameter). */
struct attn_row {
    long long m0;      /* rel row of the range's first key: rel_max - p_r + lo (rel-pos) */
    int n;             /* keys in the range, hi - lo (0: a zero output row) */
    int slot;          /* cache slot of the row's sequence */
    int krow0, vrow0;  /* ring rows of key lo: lo % K->rows, lo % V->rows */
};

/* Everything a block needs besides its row's record; passed by value. */
struct attn_args {
    const float *q;            /* [M, n_head * head_dim], row stride ldq */
    float *out;                /* [M, n_head * head_dim], row stride ldo */
    int ldq, ldo;
    const void *K, *V;         /* pool data, [layers][slots][rows][width] */
    size_t k_base, v_base;     /* element offset of (layer, slot 0, ring row 0) */
    size_t k_slot, v_slot;     /* elements per slot: rows * width */
    int k_rows, v_rows;        /* ring rows */
    int k_ld, v_ld;            /* pool widths: n_kv_head * head_dim */
    const float *rel;          /* [rel_max - rel_min + 1, n_head * head_dim] or NULL */
    const float *pos_u, *pos_v; /* [n_head * head_dim] each, with rel */
    int ldr;                   /* n_head * head_dim */
    int M, grp, hd;            /* rows, query heads per K/V head, head_dim */
    float scale;
    int cap;                   /* scores kept in shared memory (a multiple of TK) */
};

/* Rows per launch: 256 records (6 KB) with the arguments stay far below the 32,764 bytes of
 * kernel parameters that CUDA 12.1+ allows on sm_70 and later. */
constexpr int ATTN_ROWS = 256;
struct attn_ctl {
    attn_row rows[ATTN_ROWS]; /* [M] of this launch, M <= ATTN_ROWS */
};

/* Pool element types: f32 as is, f16 and bf16 as their 16 bits. */
template <int DT>
using pool_t = typename std::conditional<DT == SR_F32, float, unsigned short>::type;

/* Exact widening to f32. A NaN's payload may come out differently from the CPU's for f16
 * (the hardware conversion); every other value, subnormals included, is exact. */
template <int DT>
__device__ __forceinline__ float pool_widen(pool_t<DT> x)
{
    if constexpr (DT == SR_F32)
        return x;
    else if constexpr (DT == SR_F16)
        return __half2float(__ushort_as_half(x));
    else
        return __uint_as_float((unsigned)x << 16);
}

/* The slot's K and V rows of a row's sequence at K/V head g's columns: element [ring row][d]
 * at [ring row * k_ld / v_ld + d]. */
template <int KD>
__device__ __forceinline__ const pool_t<KD> *k_head(const attn_args &A, const attn_row &R, int g)
{
    return (const pool_t<KD> *)A.K + A.k_base + (size_t)R.slot * A.k_slot + (size_t)g * A.hd;
}
template <int VD>
__device__ __forceinline__ const pool_t<VD> *v_head(const attn_args &A, const attn_row &R, int g)
{
    return (const pool_t<VD> *)A.V + A.v_base + (size_t)R.slot * A.v_slot + (size_t)g * A.hd;
}

/* Staging from global into shared memory: st(i, ld(i)) for i = tid, tid + NT, ... < n, in
 * rounds of U loads issued before any of their stores, so that a thread has U loads in flight.
 * A plain load-store loop keeps one (each store waits for its load before the next load
 * issues; nvcc does not unroll a loop of unknown trip count), and a block of a batch-1 step is
 * nearly alone on its multiprocessor, so the number of such latency rounds, not bandwidth, is
 * its time: 32 rounds per 32-column sub-tile of keys before, 2 now. */
template <class T, int U, class Ld, class St>
__device__ __forceinline__ void stage(int n, const Ld &ld, const St &st)
{
    for (int i0 = threadIdx.x; i0 < n; i0 += U * NT) {
        T v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i0 + u * NT < n) v[u] = ld(i0 + u * NT);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i0 + u * NT < n) st(i0 + u * NT, v[u]);
    }
}

/* acc = fma(qt[d], kt[d][tid], acc) over the dn staged columns, d ascending. */
__device__ __forceinline__ float dot_staged(const float *qt, const float *kt, int dn, float acc)
{
    const int tid = threadIdx.x;
    if (dn == TD) {
#pragma unroll
        for (int dd = 0; dd < TD; dd++) acc = fmaf(qt[dd], kt[dd * KT_LD + tid], acc);
    } else {
        for (int dd = 0; dd < dn; dd++) acc = fmaf(qt[dd], kt[dd * KT_LD + tid], acc);
    }
    return acc;
}

/* The K sub-tile of keys [t0, min(t0 + TK, tend)) of the row's range at columns [d0, d0 + dn)
 * of the slot's rows kb (ring rows from R.krow0), widened and transposed into kt [TD][KT_LD]:
 * element i is key t0 + i / TD, column i % TD (= the staging thread's lane_d: NT is a multiple
 * of TD); LD loads in flight a thread. No barrier: the caller's come before and after. */
template <int KD, int LD>
__device__ __forceinline__ void stage_k(const attn_args &A, const attn_row &R, const pool_t<KD> *kb,
                                        int t0, int tend, int d0, int dn, float *kt)
{
    const int lane_d = threadIdx.x % TD;
    if (lane_d < dn)
        stage<float, LD>(
            min(TK, tend - t0) * TD,
            [&](int i) {
                long long rr = (long long)R.krow0 + t0 + i / TD; /* < 2 rows: range <= rows */
                if (rr >= A.k_rows) rr -= A.k_rows;
                return pool_widen<KD>(kb[rr * A.k_ld + d0 + lane_d]);
            },
            [&](int i, float v) { kt[lane_d * KT_LD + i / TD] = v; });
}

/* The block's maximum of every thread's m, in two halves around the caller's barrier: each
 * warp's by shuffles into red[warp] (warp_max_store), then red[0], red[1], ... in order
 * (red_max). Every form reduces this way, so its maxima are the same bits. */
__device__ __forceinline__ void warp_max_store(float m, float *red)
{
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
}
__device__ __forceinline__ float red_max(const float *red)
{
    float m = red[0];
    for (int w = 1; w < NT / 32; w++) m = fmaxf(m, red[w]);
    return m;
}

/* Score of key t0 + threadIdx.x of the row's range (meaningful when below tend; every thread
 * of the block must call it, it synchronizes). qh: the row's q for head h, [head_dim]; kb: the
 * slot's K rows at head g's columns. */
template <int KD, bool REL, int LD>
__device__ __forceinline__ float tile_score(const attn_args &A, const attn_row &R, int h,
                                            const float *qh, const pool_t<KD> *kb, int t0,
                                            int tend, float *kt, float *qt)
{
    const int tid = threadIdx.x, hd = A.hd;
    const int lane_d = tid % TD;         /* column this thread stages */
    const bool own = t0 + tid < tend;
    float acc = 0.0f;
    for (int d0 = 0; d0 < hd; d0 += TD) {
        const int dn = min(TD, hd - d0);
        __syncthreads(); /* every thread is done with the previous sub-tile */
        if (tid < dn) {
            float x = qh[d0 + tid];
            qt[tid] = REL ? __fadd_rn(x, A.pos_u[(size_t)h * hd + d0 + tid]) : x;
        }
        stage_k<KD, LD>(A, R, kb, t0, tend, d0, dn, kt);
        __syncthreads();
        if (own) acc = dot_staged(qt, kt, dn, acc);
    }
    if constexpr (REL) {
        /* (q + v) . P(p_r - j): rel row m0 + j, this head's columns */
        const float *pb = A.rel + (size_t)h * hd;
        float bd = 0.0f;
        for (int d0 = 0; d0 < hd; d0 += TD) {
            const int dn = min(TD, hd - d0);
            __syncthreads();
            if (tid < dn) qt[tid] = __fadd_rn(qh[d0 + tid], A.pos_v[(size_t)h * hd + d0 + tid]);
            if (lane_d < dn)
                stage<float, LD>(
                    min(TK, tend - t0) * TD,
                    [&](int i) { return pb[(size_t)(R.m0 + t0 + i / TD) * (size_t)A.ldr + d0 + lane_d]; },
                    [&](int i, float v) { kt[lane_d * KT_LD + i / TD] = v; });
            __syncthreads();
            if (own) bd = dot_staged(qt, kt, dn, bd);
        }
        acc = __fadd_rn(acc, bd);
    }
    return __fmul_rn(A.scale, acc);
}

/* o = fma(e_i, v(c0 + i)[d], o) for i < cn ascending, and with SUM also sum = sum + (double)e_i,
 * walking the ring in runs between wraps. vb: the slot's V rows at column g * hd + d. */
template <int VD, bool SUM>
__device__ __forceinline__ float values_chunk(const attn_args &A, const attn_row &R,
                                              const pool_t<VD> *vb, const float *sc, int c0,
                                              int cn, float o, double &sum)
{
    long long rr = (long long)R.vrow0 + c0; /* < 2 rows: c0 < range <= rows */
    if (rr >= A.v_rows) rr -= A.v_rows;
    for (int i = 0; i < cn;) {
        const int run = (int)min((long long)(cn - i), (long long)A.v_rows - rr);
        const pool_t<VD> *vp = vb + (size_t)rr * A.v_ld;
#pragma unroll 4
        for (int k = 0; k < run; k++) {
            const float e = sc[i + k];
            o = fmaf(e, pool_widen<VD>(vp[(size_t)k * A.v_ld]), o);
            if constexpr (SUM) sum = __dadd_rn(sum, (double)e);
        }
        i += run;
        rr = 0;
    }
    return o;
}

/* The values of keys [c0, c0 + cn) for the thread's columns tid and tid + NT (hd <= 2 NT), V
 * staged in tiles of tv rows through the sub-tile's area (vt, the pool's own elements: 2-byte
 * pools give twice the rows): o_j = fma(e_i, v(c0 + i)[d_j], o_j) for i ascending, and for the
 * threads of the first column (tid < hd) also sum = sum + (double)e_i, the same chains as
 * values_chunk, in the same order. Every thread of the block must call it (it synchronizes). */
template <int VD>
__device__ __forceinline__ void values_staged(const attn_args &A, const attn_row &R,
                                              const pool_t<VD> *vb, const float *sc, int c0,
                                              int cn, pool_t<VD> *vt, float &o0, float &o1,
                                              double &sum)
{
    const int tid = threadIdx.x, hd = A.hd, tv = VT_BYTES / (int)sizeof(pool_t<VD>) / hd;
    const bool c0_own = tid < hd, c1_own = tid + NT < hd;
    for (int k0 = 0; k0 < cn; k0 += tv) {
        const int kn = min(tv, cn - k0);
        __syncthreads(); /* the previous tile (or the sub-tile's scores) is consumed */
        stage<pool_t<VD>, LD_UV>(
            kn * hd,
            [&](int i) {
                long long rr = (long long)R.vrow0 + c0 + k0 + i / hd; /* < 2 rows: range <= rows */
                if (rr >= A.v_rows) rr -= A.v_rows;
                return vb[rr * A.v_ld + i % hd];
            },
            [&](int i, pool_t<VD> v) { vt[i] = v; });
        __syncthreads();
        if (c0_own)
            for (int k = 0; k < kn; k++) {
                const float e = sc[k0 + k];
                o0 = fmaf(e, pool_widen<VD>(vt[k * hd + tid]), o0);
                if (c1_own) o1 = fmaf(e, pool_widen<VD>(vt[k * hd + tid + NT]), o1);
                sum = __dadd_rn(sum, (double)e);
            }
    }
}

/* One block per (query row, head): blockIdx.x = head h, rows blockIdx.y, + gridDim.y, ...
 * Dynamic shared memory: kt [TD][TK + 1], qt [TD], red [NT / 32], sc [cap] (floats).
 * Two forms, the same operations in the same order (so the same bits), chosen per launch by
 * its block count (attn_wide):
 *   WIDE    __launch_bounds__(NT, 4): up to 128 registers a thread, room for the staging
 *           rounds' 16 values (ptxas, sm_80 / sm_90: 108-128 registers, no spills; (NT, 6)
 *           spilled 16-32 bytes and (NT, 8) up to 52). Four blocks a multiprocessor, each
 *           thread with 16 loads in flight, values staged in tiles through shared memory.
 *   narrow  __launch_bounds__(NT, 8): 64 registers (sm_90 without spills; sm_80 spills 24-48
 *           bytes, as the single form before did), 4 loads in flight, values read directly
 *           by each column's thread, no barrier between value tiles.
 * The wide form was written for a batch-1 step's few blocks, but the device (H200) found the
 * narrow one faster there too and at full launches, the wide one only in between (attn_wide). */
template <int KD, int VD, bool REL, bool WIDE>
__global__ void __launch_bounds__(NT, WIDE ? 4 : 8) attn_kernel(const attn_args A, const attn_ctl C)
{
    sr_pdl_enter();
    extern __shared__ float smem[];
    float *kt = smem;
    float *qt = kt + TD * KT_LD;
    float *red = qt + TD;
    float *sc = red + NT / 32;
    const int tid = threadIdx.x, h = blockIdx.x, hd = A.hd;
    const int g = h / A.grp; /* the K/V head this query head reads */
    constexpr int LD = WIDE ? LD_UK : LD_NARROW;

    for (int r = blockIdx.y; r < A.M; r += gridDim.y) {
        const attn_row R = C.rows[r];
        float *o = A.out + (size_t)r * A.ldo + (size_t)h * hd; /* [head_dim] */
        if (R.n == 0) { /* empty range: a zero row (uniform over the block: no barrier) */
            for (int d = tid; d < hd; d += NT) o[d] = 0.0f;
            continue;
        }
        const float *qh = A.q + (size_t)r * A.ldq + (size_t)h * hd; /* [head_dim] */
        const pool_t<KD> *kb = k_head<KD>(A, R, g);
        const pool_t<VD> *vb = v_head<VD>(A, R, g);
        const int n = R.n;
        const bool keep = n <= A.cap; /* scores stay in sc between the passes */

        /* pass 1: the maximum (and the scores, when they fit) */
        float m = -INFINITY;
        for (int t0 = 0; t0 < n; t0 += TK) {
            float s = tile_score<KD, REL, LD>(A, R, h, qh, kb, t0, n, kt, qt);
            if (t0 + tid < n) {
                m = fmaxf(m, s); /* NaN skipped, as the CPU's s > m ? s : m */
                if (keep) sc[t0 + tid] = s;
            }
        }
        warp_max_store(m, red);
        __syncthreads();
        m = red_max(red);

        /* pass 2, chunks of cap keys (one chunk when the scores were kept) */
        double sum = 0.0;
        float inv = 0.0f;
        for (int c0 = 0; c0 < n; c0 += A.cap) {
            const int cn = min(A.cap, n - c0);
            const bool last = c0 + cn == n;
            if (!keep)
                for (int t0 = c0; t0 < c0 + cn; t0 += TK) {
                    float s = tile_score<KD, REL, LD>(A, R, h, qh, kb, t0, c0 + cn, kt, qt);
                    if (t0 + tid < c0 + cn) sc[t0 - c0 + tid] = s;
                }
            __syncthreads(); /* scores of the chunk complete */
            for (int i = tid; i < cn; i += NT) sc[i] = sr_exp_poly(__fsub_rn(sc[i], m));
            __syncthreads(); /* weights of the chunk complete */
            if (WIDE && hd <= 2 * NT && VT_BYTES / (int)sizeof(pool_t<VD>) >= hd) { /* uniform */
                float o0 = 0.0f, o1 = 0.0f; /* columns tid and tid + NT; earlier chunks' sums */
                if (c0 > 0 && tid < hd) o0 = o[tid];
                if (c0 > 0 && tid + NT < hd) o1 = o[tid + NT];
                values_staged<VD>(A, R, vb, sc, c0, cn, (pool_t<VD> *)kt, o0, o1, sum);
                if (last && tid < hd) inv = __double2float_rn(__ddiv_rn(1.0, sum));
                if (tid < hd) o[tid] = last ? __fmul_rn(o0, inv) : o0;
                if (tid + NT < hd) o[tid + NT] = last ? __fmul_rn(o1, inv) : o1;
                __syncthreads(); /* sc and the sub-tile's area free for the next chunk / row */
                continue;
            }
            for (int d = tid; d < hd; d += NT) {
                float acc = c0 == 0 ? 0.0f : o[d]; /* earlier chunks' partial sum */
                if (d == tid) { /* first column pass: carry the normalizer too */
                    acc = values_chunk<VD, true>(A, R, vb + d, sc, c0, cn, acc, sum);
                    if (last) inv = __double2float_rn(__ddiv_rn(1.0, sum));
                } else {
                    acc = values_chunk<VD, false>(A, R, vb + d, sc, c0, cn, acc, sum);
                }
                o[d] = last ? __fmul_rn(acc, inv) : acc;
            }
            __syncthreads(); /* sc free for the next chunk, red for the next row */
        }
    }
}

/* Pass 1 of the forms that compute G members (query heads of a row, or rows of a head) over
 * one staging of each K sub-tile: member j's query qof(j) [head_dim] (NULL: no member j), its
 * keys the t of [0, n) with takes(j, t). Each thread runs, for its key of a tile, each member's
 * tile_score chain over the staged sub-tiles, and keeps s = scale * acc in sc [j * A.cap + t]
 * and its maximum in m[j] (the block's maximum: members_max after). Every thread of the block
 * must call it (it synchronizes). */
template <int KD, int G, class QOf, class Takes>
__device__ __forceinline__ void members_scores(const attn_args &A, const attn_row &R, const pool_t<KD> *kb,
                                               int n, const QOf &qof, const Takes &takes, float *kt,
                                               float *qt, float *sc, float (&m)[G])
{
    const int tid = threadIdx.x, hd = A.hd, cap = A.cap;
#pragma unroll
    for (int j = 0; j < G; j++) m[j] = -INFINITY;
    for (int t0 = 0; t0 < n; t0 += TK) {
        const int t = t0 + tid;
        float acc[G];
#pragma unroll
        for (int j = 0; j < G; j++) acc[j] = 0.0f;
        for (int d0 = 0; d0 < hd; d0 += TD) {
            const int dn = min(TD, hd - d0);
            __syncthreads(); /* every thread is done with the previous sub-tile */
            for (int i = tid; i < G * TD; i += NT) {
                const float *qj = qof(i / TD);
                if (qj && i % TD < dn) qt[i] = qj[d0 + i % TD];
            }
            stage_k<KD, LD_NARROW>(A, R, kb, t0, n, d0, dn, kt);
            __syncthreads();
            if (t < n)
#pragma unroll
                for (int j = 0; j < G; j++)
                    if (takes(j, t)) acc[j] = dot_staged(qt + j * TD, kt, dn, acc[j]);
        }
        if (t < n)
#pragma unroll
            for (int j = 0; j < G; j++)
                if (takes(j, t)) {
                    const float sj = __fmul_rn(A.scale, acc[j]);
                    m[j] = fmaxf(m[j], sj); /* NaN skipped, as the CPU's s > m ? s : m */
                    sc[j * cap + t] = sj;
                }
    }
}

/* Each of G members' block maximum (warp_max_store / red_max on its own red [NT / 32]), around
 * one barrier: the maxima every form takes. */
template <int G>
__device__ __forceinline__ void members_max(float (&m)[G], float *red)
{
#pragma unroll
    for (int j = 0; j < G; j++) warp_max_store(m[j], red + j * (NT / 32));
    __syncthreads();
#pragma unroll
    for (int j = 0; j < G; j++) m[j] = red_max(red + j * (NT / 32));
}

/* Each member's weights in place of its scores: sc [j * cap + t] = exp(s - m[j]) for the keys
 * t of [0, n) it takes, then a barrier (the weights complete). */
template <int G, class Takes>
__device__ __forceinline__ void members_weights(int n, const Takes &takes, const float (&m)[G], float *sc,
                                                int cap)
{
#pragma unroll
    for (int j = 0; j < G; j++)
        for (int i = (int)threadIdx.x; i < n; i += NT)
            if (takes(j, i)) sc[j * cap + i] = sr_exp_poly(__fsub_rn(sc[j * cap + i], m[j]));
    __syncthreads();
}

/* The value chains of G members (query heads of a row, or rows of a head) in one value column:
 * vb at the slot's V rows and the column, the keys [0, n) of the ring from row vrow0, walked in
 * runs between wraps. For each key t in order and each member j that takes it (takes(j, t)):
 * acc[j] = fma(e, v, acc[j]) with e = sc[j * cap + t], and with first also sum[j] = sum[j] +
 * (double)e: the chains values_chunk runs for one row, over one read of each V element. */
template <int VD, int G, class Takes>
__device__ __forceinline__ void values_members(const attn_args &A, const pool_t<VD> *vb, int vrow0, int n,
                                               const float *sc, int cap, bool first, const Takes &takes,
                                               float (&acc)[G], double (&sum)[G])
{
#pragma unroll
    for (int j = 0; j < G; j++) {
        acc[j] = 0.0f;
        sum[j] = 0.0;
    }
    long long rr = (long long)vrow0;
    for (int i = 0; i < n;) {
        const int run = (int)min((long long)(n - i), (long long)A.v_rows - rr);
        const pool_t<VD> *vp = vb + (size_t)rr * A.v_ld;
        /* 4 keys' V loads in flight (values_chunk's unroll): one at a time, each key would wait
         * for its load */
#pragma unroll 4
        for (int k = 0; k < run; k++) {
            const float v = pool_widen<VD>(vp[(size_t)k * A.v_ld]);
#pragma unroll
            for (int j = 0; j < G; j++)
                if (takes(j, i + k)) {
                    const float e = sc[j * cap + i + k];
                    acc[j] = fmaf(e, v, acc[j]);
                    if (first) sum[j] = __dadd_rn(sum[j], (double)e);
                }
        }
        i += run;
        rr = 0;
    }
}

/* The grouped form (SRKIT_CUDA_ATTN=grouped, and by size above four blocks a multiprocessor; GQA
 * without rel-pos, when every row's scores of the group fit in shared memory): one
 * block per (query row, K/V head g) computes the G = grp query heads h = g G .. g G + G - 1
 * that read head g. Each 32-column sub-tile of keys is staged once for all G heads, each
 * thread runs its key's G dot-product chains over it, and each value column's thread its G
 * value chains (and, in its first column pass, the G normalizers) over one read of the V
 * element: K and V are read once a row instead of G times. Every chain, the maxima's
 * reduction (per thread in tile order, the warp's shuffles, the warps in order) and the
 * epilogue are attn_kernel's, in its order, per head: the same bits as the other two forms.
 * Dynamic shared memory: kt [TD][TK + 1], qt [G][TD], red [G][NT / 32], sc [G][cap]. */
template <int KD, int VD, int G>
__global__ void __launch_bounds__(NT, 4) attn_grouped_kernel(const attn_args A, const attn_ctl C)
{
    sr_pdl_enter();
    extern __shared__ float smem[];
    float *kt = smem;
    float *qt = kt + TD * KT_LD;
    float *red = qt + G * TD;
    float *sc = red + G * (NT / 32);
    const int tid = threadIdx.x, g = blockIdx.x, hd = A.hd, cap = A.cap;

    for (int r = blockIdx.y; r < A.M; r += gridDim.y) {
        const attn_row R = C.rows[r];
        float *o = A.out + (size_t)r * A.ldo + (size_t)g * G * hd; /* head g G + j at o + j hd */
        if (R.n == 0) { /* empty range: zero rows (uniform over the block: no barrier) */
            for (int i = tid; i < G * hd; i += NT) o[i] = 0.0f;
            continue;
        }
        const float *q = A.q + (size_t)r * A.ldq + (size_t)g * G * hd;
        const pool_t<KD> *kb = k_head<KD>(A, R, g);
        const pool_t<VD> *vb = v_head<VD>(A, R, g);
        const int n = R.n;

        /* pass 1: every head's scores (kept) and maxima */
        float m[G];
        members_scores<KD, G>(A, R, kb, n, [&](int j) { return q + (size_t)j * hd; },
                              [](int, int) { return true; }, kt, qt, sc, m);
        members_max<G>(m, red);

        /* pass 2: the weights, then each column's G value chains over one read of V */
        members_weights<G>(n, [](int, int) { return true; }, m, sc, cap);
        float inv[G];
        for (int d = tid; d < hd; d += NT) {
            float acc[G];
            double sum[G];
            const bool first = d == tid; /* the first column pass carries the normalizers */
            values_members<VD, G>(A, vb + d, R.vrow0, n, sc, cap, first, [](int, int) { return true; },
                                  acc, sum);
#pragma unroll
            for (int j = 0; j < G; j++) {
                if (first) inv[j] = __double2float_rn(__ddiv_rn(1.0, sum[j]));
                o[(size_t)j * hd + d] = __fmul_rn(acc[j], inv[j]);
            }
        }
        __syncthreads(); /* sc, qt and red free for the next row */
    }
}

/* The rows form (SRKIT_CUDA_ATTN=rows; no rel-pos, K and V of one type; not measured on a device
 * yet, so never picked by itself): one block per (head h, group of up to ROWS_G consecutive
 * query rows of one sequence) reads each K and V element of the rows' key ranges once for all of
 * them. The narrow and wide forms read a sequence's keys once per row: Whisper's encoder over a
 * 30 s window is 1,500 rows each reading all 1,500 keys, Voxtral's encoder 4 rows a stream a
 * chunk over windows of 750 keys that differ by a key. The group's keys are the union of its
 * rows' ranges, [L0, L0 + n) (the host cuts a group where the union would outgrow the ring or
 * the scores' shared memory); member j's range is [off_j, off_j + len_j) in it. Each thread
 * runs, for its key of a tile, member j's dot-product chain over the staged sub-tiles (the
 * same chain whichever row asks), keeps the score and the maximum where the key is in j's range;
 * each value column's thread walks the union's keys in order and runs member j's value chain
 * (and in its first column pass the double normalizer) over exactly j's keys, ascending: the
 * sequence of operations attn_kernel performs for each row, so the same bits.
 * Dynamic shared memory: kt [TD][TK + 1], qt [G][TD], red [G][NT / 32], sc [G][cap]. */
constexpr int ROWS_G = 4; /* rows a block at most */

struct attn_rgrp {
    int r0, nr;              /* the group's first row (in this launch) and its row count */
    int n;                   /* keys in the union of the rows' ranges (0: every row empty) */
    int slot;                /* the sequence's cache slot */
    int krow0, vrow0;        /* ring rows of the union's first key */
    int off[ROWS_G], len[ROWS_G]; /* member j's range: [off, off + len) of the union */
};
struct attn_gctl {
    attn_rgrp g[ATTN_ROWS]; /* the launch's groups, at most one a row */
};

template <int KD, int VD>
__global__ void __launch_bounds__(NT, 4) attn_rows_kernel(const attn_args A, const attn_gctl C)
{
    sr_pdl_enter();
    extern __shared__ float smem[];
    constexpr int G = ROWS_G;
    float *kt = smem;
    float *qt = kt + TD * KT_LD;
    float *red = qt + G * TD;
    float *sc = red + G * (NT / 32);
    const int tid = threadIdx.x, h = blockIdx.x, hd = A.hd, cap = A.cap;
    const int g = h / A.grp; /* the K/V head this query head reads */

    for (int gi = blockIdx.y; gi < A.M; gi += gridDim.y) {
        const attn_rgrp Q = C.g[gi];
        const int nr = Q.nr, n = Q.n;
        /* the union's record, as attn_row: kb / vb and the ring walk start at its first key */
        attn_row R;
        R.m0 = 0;
        R.n = n;
        R.slot = Q.slot;
        R.krow0 = Q.krow0;
        R.vrow0 = Q.vrow0;
        const pool_t<KD> *kb = k_head<KD>(A, R, g);
        const pool_t<VD> *vb = v_head<VD>(A, R, g);

        /* pass 1: each member's scores over its own keys (kept) and its maximum */
        const auto takes = [&](int j, int t) {
            return j < nr && (unsigned)(t - Q.off[j]) < (unsigned)Q.len[j];
        };
        float m[G];
        members_scores<KD, G>(
            A, R, kb, n,
            [&](int j) { return j < nr ? A.q + (size_t)(Q.r0 + j) * A.ldq + (size_t)h * hd : nullptr; },
            takes, kt, qt, sc, m);
        members_max<G>(m, red);

        /* pass 2: the weights, then each column's member value chains over one read of V */
        members_weights<G>(n, takes, m, sc, cap);
        float inv[G];
        for (int d = tid; d < hd; d += NT) {
            float acc[G];
            double sum[G];
            const bool first = d == tid; /* the first column pass carries the normalizers */
            values_members<VD, G>(A, vb + d, R.vrow0, n, sc, cap, first, takes, acc, sum);
#pragma unroll
            for (int j = 0; j < G; j++)
                if (j < nr) {
                    float *o = A.out + (size_t)(Q.r0 + j) * A.ldo + (size_t)h * hd;
                    if (Q.len[j] == 0) { /* an empty range: a zero row */
                        o[d] = 0.0f;
                        continue;
                    }
                    if (first) inv[j] = __double2float_rn(__ddiv_rn(1.0, sum[j]));
                    o[d] = __fmul_rn(acc[j], inv[j]);
                }
        }
        __syncthreads(); /* sc, qt and red free for the next group */
    }
}

/* The split form (SRKIT_CUDA_ATTN=split, and by size up to one block a multiprocessor over more
 * than one key tile): a launch of few rows (one stream's step: 32 blocks, one per head, each walking its
 * range alone on one multiprocessor) cut into many blocks without changing a single operation.
 * First kernel: block (head h, row r, tile t) computes the scores of the tile's TK keys by
 * tile_score (the same chains) into a scratch row S [r][h][ld_s]. Second kernel: block (h, r,
 * column group c) takes the maximum of the row's scores (warp_max_store / red_max, as every
 * form), then, SPLIT_SC keys at a time, their weights e_j = exp(s_j - m) into shared memory and
 * the value chains of its SPLIT_CW columns over them in order from V rows staged in shared
 * memory (16 loads in flight a thread), while a thread of another warp runs the double
 * normalizer's chain over the same weights in order; out = o * (float)(1 / sum). Each output
 * is the sequence of operations attn_kernel performs for it: the same bits, from H x tiles and
 * H x hd / SPLIT_CW blocks instead of H. */
constexpr int SPLIT_SC = 2048; /* weights held in shared memory at a time */
constexpr int SPLIT_CW = 8;    /* value columns a block of the second kernel */
constexpr int SPLIT_VT = 1024; /* V rows staged at a time ([SPLIT_VT][SPLIT_CW] elements) */
/* The normalizer's thread: the first of the second warp, so that its chain runs beside the
 * value chains of warp 0's SPLIT_CW threads instead of after them (one warp runs the two
 * sides of a branch one after the other). */
constexpr int SPLIT_SUM_T = 32;
static_assert(SPLIT_CW <= 32 && SPLIT_SUM_T >= 32 && SPLIT_SUM_T < NT, "split form's threads");

template <int KD, bool REL>
__global__ void __launch_bounds__(NT, 4) attn_split_scores(const attn_args A, const attn_ctl C,
                                                           float *S, int ld_s)
{
    sr_pdl_enter();
    extern __shared__ float smem[];
    float *kt = smem;
    float *qt = kt + TD * KT_LD;
    const int h = blockIdx.x, r = blockIdx.y, t0 = (int)blockIdx.z * TK, hd = A.hd;
    const attn_row R = C.rows[r];
    if (t0 >= R.n) return; /* past the row's range (uniform over the block) */
    const float *qh = A.q + (size_t)r * A.ldq + (size_t)h * hd;
    const pool_t<KD> *kb = k_head<KD>(A, R, h / A.grp);
    const float s = tile_score<KD, REL, LD_UK>(A, R, h, qh, kb, t0, R.n, kt, qt);
    if (t0 + (int)threadIdx.x < R.n)
        S[((size_t)r * gridDim.x + h) * (size_t)ld_s + t0 + threadIdx.x] = s;
}

template <int VD>
__global__ void __launch_bounds__(NT, 8) attn_split_values(const attn_args A, const attn_ctl C,
                                                           const float *S, int ld_s)
{
    sr_pdl_enter();
    extern __shared__ float smem[];
    float *red = smem;                                  /* [NT / 32] */
    float *sc = red + NT / 32;                          /* [SPLIT_SC] */
    pool_t<VD> *vt = reinterpret_cast<pool_t<VD> *>(sc + SPLIT_SC); /* [SPLIT_VT][SPLIT_CW] */
    const int tid = threadIdx.x, h = blockIdx.x, r = blockIdx.y, hd = A.hd;
    const int d0 = (int)blockIdx.z * SPLIT_CW, dn = min(SPLIT_CW, hd - d0);
    const attn_row R = C.rows[r];
    float *o = A.out + (size_t)r * A.ldo + (size_t)h * hd + d0; /* [dn] */
    const int n = R.n;
    if (n == 0) { /* empty range: zeros (uniform over the block) */
        if (tid < dn) o[tid] = 0.0f;
        return;
    }
    const float *srow = S + ((size_t)r * gridDim.x + h) * (size_t)ld_s;
    float m = -INFINITY;
    for (int i = tid; i < n; i += NT) m = fmaxf(m, srow[i]); /* NaN skipped, as the CPU's */
    warp_max_store(m, red);
    __syncthreads();
    m = red_max(red);
    const pool_t<VD> *vb = v_head<VD>(A, R, h / A.grp) + d0;
    float acc = 0.0f;
    double sum = 0.0;
    for (int s0 = 0; s0 < n; s0 += SPLIT_SC) {
        const int sn = min(SPLIT_SC, n - s0);
        __syncthreads(); /* the previous weights consumed (and red read) */
        for (int i = tid; i < sn; i += NT) sc[i] = sr_exp_poly(__fsub_rn(srow[s0 + i], m));
        for (int c0 = 0; c0 < sn; c0 += SPLIT_VT) {
            const int cn = min(SPLIT_VT, sn - c0);
            __syncthreads(); /* the weights complete; the previous V rows consumed */
            stage<pool_t<VD>, LD_UV>(
                cn * SPLIT_CW,
                [&](int i) {
                    long long rr = (long long)R.vrow0 + s0 + c0 + i / SPLIT_CW; /* < 2 rows: n <= rows */
                    if (rr >= A.v_rows) rr -= A.v_rows;
                    return i % SPLIT_CW < dn ? vb[rr * A.v_ld + i % SPLIT_CW] : (pool_t<VD>)0;
                },
                [&](int i, pool_t<VD> v) { vt[i] = v; });
            __syncthreads();
            if (tid < dn)
                for (int k = 0; k < cn; k++)
                    acc = fmaf(sc[c0 + k], pool_widen<VD>(vt[k * SPLIT_CW + tid]), acc);
            else if (tid == SPLIT_SUM_T)
                for (int k = 0; k < cn; k++) sum = __dadd_rn(sum, (double)sc[c0 + k]);
        }
    }
    __syncthreads(); /* red free */
    if (tid == SPLIT_SUM_T) red[0] = __double2float_rn(__ddiv_rn(1.0, sum));
    __syncthreads();
    if (tid < dn) o[tid] = __fmul_rn(acc, red[0]);
}

/* Dynamic shared memory of the split form's second kernel, in bytes (under 48 KB). */
template <int VD>
constexpr size_t split_values_smem()
{
    return (size_t)(NT / 32 + SPLIT_SC) * sizeof(float) + (size_t)SPLIT_VT * SPLIT_CW * sizeof(pool_t<VD>);
}
static_assert(split_values_smem<SR_F32>() <= (size_t)SMEM_LIMIT, "the split form's shared memory");

template <int KD, int VD, bool REL>
void launch_split_t(int H, int m, int tiles, const attn_args &A, const attn_ctl &C, float *S)
{
    const int ld_s = tiles * TK, groups = (A.hd + SPLIT_CW - 1) / SPLIT_CW;
    sr_cuda_launch(attn_split_scores<KD, REL>, dim3((unsigned)H, (unsigned)m, (unsigned)tiles), NT,
                   (size_t)SMEM_FIXED * sizeof(float), A, C, S, ld_s);
    sr_cuda_launch(attn_split_values<VD>, dim3((unsigned)H, (unsigned)m, (unsigned)groups), NT,
                   split_values_smem<VD>(), A, C, (const float *)S, ld_s);
}

template <int D>
void launch_split_d(bool rel, int H, int m, int tiles, const attn_args &A, const attn_ctl &C, float *S)
{
    if (rel)
        launch_split_t<D, D, true>(H, m, tiles, A, C, S);
    else
        launch_split_t<D, D, false>(H, m, tiles, A, C, S);
}

/* The split form's two launches, K and V pools of one element type. */
void launch_split(sr_dtype dt, bool rel, int H, int m, int tiles, const attn_args &A,
                  const attn_ctl &C, float *S)
{
    switch (dt) {
    case SR_F16: launch_split_d<SR_F16>(rel, H, m, tiles, A, C, S); break;
    case SR_BF16: launch_split_d<SR_BF16>(rel, H, m, tiles, A, C, S); break;
    default: launch_split_d<SR_F32>(rel, H, m, tiles, A, C, S); break;
    }
}

/* Dynamic shared memory of the rows form for cap scores a row, in floats. */
constexpr int rows_smem_floats(int cap) { return TD * KT_LD + ROWS_G * TD + ROWS_G * (NT / 32) + ROWS_G * cap; }
/* Most union keys a group of the rows form may have (a multiple of TK). */
constexpr int ROWS_CAP = ((SMEM_LIMIT / (int)sizeof(float) - rows_smem_floats(0)) / ROWS_G / TK) * TK;
static_assert(ROWS_CAP >= TK, "shared memory too small for the rows form");

/* The rows form's launch, K and V pools of one element type. */
void launch_rows(sr_dtype dt, dim3 grid, size_t smem, const attn_args &A, const attn_gctl &C)
{
    switch (dt) {
    case SR_F16: sr_cuda_launch(attn_rows_kernel<SR_F16, SR_F16>, grid, NT, smem, A, C); break;
    case SR_BF16: sr_cuda_launch(attn_rows_kernel<SR_BF16, SR_BF16>, grid, NT, smem, A, C); break;
    default: sr_cuda_launch(attn_rows_kernel<SR_F32, SR_F32>, grid, NT, smem, A, C); break;
    }
}

/* Dynamic shared memory of the grouped form for G heads and cap scores a head, in floats. */
constexpr int grouped_smem_floats(int G, int cap) { return TD * KT_LD + G * TD + G * (NT / 32) + G * cap; }

template <int KD, int VD>
void launch_grouped_v(int G, dim3 grid, size_t smem, const attn_args &A, const attn_ctl &C)
{
    switch (G) {
    case 2: sr_cuda_launch(attn_grouped_kernel<KD, VD, 2>, grid, NT, smem, A, C); break;
    case 4: sr_cuda_launch(attn_grouped_kernel<KD, VD, 4>, grid, NT, smem, A, C); break;
    default: sr_cuda_launch(attn_grouped_kernel<KD, VD, 8>, grid, NT, smem, A, C); break;
    }
}

/* The grouped form's launch, K and V pools of one element type (what every backend makes). */
void launch_grouped(sr_dtype dt, int G, dim3 grid, size_t smem, const attn_args &A, const attn_ctl &C)
{
    switch (dt) {
    case SR_F16: launch_grouped_v<SR_F16, SR_F16>(G, grid, smem, A, C); break;
    case SR_BF16: launch_grouped_v<SR_BF16, SR_BF16>(G, grid, smem, A, C); break;
    default: launch_grouped_v<SR_F32, SR_F32>(G, grid, smem, A, C); break;
    }
}

template <int KD, int VD, bool REL>
void launch_form(bool wide, dim3 grid, size_t smem, const attn_args &A, const attn_ctl &C)
{
    if (wide)
        sr_cuda_launch(attn_kernel<KD, VD, REL, true>, grid, NT, smem, A, C);
    else
        sr_cuda_launch(attn_kernel<KD, VD, REL, false>, grid, NT, smem, A, C);
}

template <int KD, int VD>
void launch_rel(bool rel, bool wide, dim3 grid, size_t smem, const attn_args &A, const attn_ctl &C)
{
    if (rel)
        launch_form<KD, VD, true>(wide, grid, smem, A, C);
    else
        launch_form<KD, VD, false>(wide, grid, smem, A, C);
}

template <int KD>
void launch_v(sr_dtype vd, bool rel, bool wide, dim3 grid, size_t smem, const attn_args &A,
              const attn_ctl &C)
{
    switch (vd) {
    case SR_F16: launch_rel<KD, SR_F16>(rel, wide, grid, smem, A, C); break;
    case SR_BF16: launch_rel<KD, SR_BF16>(rel, wide, grid, smem, A, C); break;
    default: launch_rel<KD, SR_F32>(rel, wide, grid, smem, A, C); break;
    }
}

void launch(sr_dtype kd, sr_dtype vd, bool rel, bool wide, dim3 grid, size_t smem,
            const attn_args &A, const attn_ctl &C)
{
    switch (kd) {
    case SR_F16: launch_v<SR_F16>(vd, rel, wide, grid, smem, A, C); break;
    case SR_BF16: launch_v<SR_BF16>(vd, rel, wide, grid, smem, A, C); break;
    default: launch_v<SR_F32>(vd, rel, wide, grid, smem, A, C); break;
    }
}

} /* namespace */

/* The forms in use: 0 narrow, 1 wide, 2 by launch size (the default: split, narrow, wide or
 * grouped, below), 3 grouped where it applies (else narrow), 4 split where it applies (else
 * narrow), 5 rows where it applies (else narrow); the environment's SRKIT_CUDA_ATTN=narrow /
 * wide / auto / grouped / split / rows is read once, a call overrides it. */
static sr_cuda_setting attn_form_setting = {"SRKIT_CUDA_ATTN",
                                            {"narrow", "wide", "auto", "grouped", "split", "rows"}, 2,
                                            {-1}, {-2}};

extern "C" int sr_cuda_attn_form(int v) { return sr_cuda_setting_use(attn_form_setting, v); }

/* The form of a launch of `blocks` blocks: wide from more than one block a multiprocessor up to
 * the four a multiprocessor it keeps resident, narrow below and above. Measured (H200, srkit
 * bench attn, docs/benchmarks.md): narrow is faster at one stream (Voxtral decoder 0.126
 * against 0.175 ms, Whisper cross-attention 0.152 / 0.179, FastConformer 0.027 / 0.033) and at
 * 64-256 streams of Voxtral and FastConformer (1,024-8,192 blocks: 0.558 / 1.010 ms at 64
 * Voxtral streams), wide only in between (Whisper cross-attention at 64 streams, 384 blocks:
 * 0.258 / 0.316 ms). Speed only: both forms give the same bits. */
static bool attn_wide(long long blocks)
{
    const int form = sr_cuda_attn_form(-1);
    if (form != 2) return form == 1;
    const long long sms = sr_cuda_sm_count();
    return blocks > sms && blocks <= 4 * sms;
}

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

} /* namespace */

/* The rows form's groups of the launch's rows r0 .. r0 + m - 1 (seq: each row's sequence,
 * indexed from r0) into G: consecutive rows of one sequence, at most ROWS_G, cut where the union
 * of their key ranges would pass lim keys (the ring's rows and the scores' shared memory; a
 * row's own range is within it). Returns the group count; *cap: the longest union in whole
 * tiles (the scores' stride). */
static int rows_groups(const sr_kattn *a, const sr_kbatch *b, const sr_kpool *K, const sr_kpool *V,
                       int r0, int m, const int *seq, int64_t lim, attn_gctl *G, int *cap)
{
    int ng = 0;
    int64_t widest = 0;
    for (int i = 0; i < m;) {
        attn_rgrp &Q = G->g[ng++];
        int64_t L0 = 0, L1 = 0; /* the union of the non-empty ranges so far; none yet */
        bool any = false;
        int j = i;
        for (; j < m && j - i < ROWS_G && seq[j] == seq[i]; j++) {
            const int64_t lo = a->lo[r0 + j], hi = a->hi[r0 + j];
            if (hi <= lo) continue; /* an empty range joins any group */
            const int64_t n0 = any ? min64(L0, lo) : lo, n1 = any ? max64(L1, hi) : hi;
            if (any && n1 - n0 > lim) break;
            L0 = n0;
            L1 = n1;
            any = true;
        }
        Q.r0 = i;
        Q.nr = j - i;
        Q.n = (int)(L1 - L0);
        Q.slot = b->slot[seq[i]];
        Q.krow0 = any ? (int)(L0 % K->rows) : 0;
        Q.vrow0 = any ? (int)(L0 % V->rows) : 0;
        for (int k = 0; k < ROWS_G; k++) {
            const int64_t lo = k < Q.nr ? a->lo[r0 + i + k] : 0, hi = k < Q.nr ? a->hi[r0 + i + k] : 0;
            Q.off[k] = hi > lo ? (int)(lo - L0) : 0;
            Q.len[k] = hi > lo ? (int)(hi - lo) : 0;
        }
        widest = max64(widest, Q.n);
        i = j;
    }
    *cap = (int)max64((widest + TK - 1) / TK * TK, TK);
    return ng;
}

sr_status sr_cuda_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                       const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo)
{
    /* ---- argument checks: kernels/check.c's, shared with the CPU table ---- */
    int64_t maxlen;
    sr_status st = sr_kernels_check_attn(a, b, q, ldq, K, V, layer, out, ldo, &maxlen, NULL);
    if (st) return st;
    const int M = b->row0[b->n_seq];
    if (M == 0) return SR_OK;
    const int H = a->n_head, hd = a->head_dim, grp = H / a->n_kv_head;
    const bool rel = a->rel != NULL;

    /* ---- the arguments every launch shares ---- */
    attn_args A;
    A.ldq = ldq;
    A.ldo = ldo;
    A.K = K->data;
    A.V = V->data;
    A.k_base = sr_kpool_at(K, layer, 0, 0);
    A.v_base = sr_kpool_at(V, layer, 0, 0);
    A.k_slot = (size_t)K->rows * (size_t)K->width;
    A.v_slot = (size_t)V->rows * (size_t)V->width;
    A.k_rows = K->rows;
    A.v_rows = V->rows;
    A.k_ld = K->width;
    A.v_ld = V->width;
    A.rel = a->rel;
    A.pos_u = a->pos_u;
    A.pos_v = a->pos_v;
    A.ldr = H * hd;
    A.grp = grp;
    A.hd = hd;
    A.scale = a->scale;
    /* shared memory for the longest range's scores, in whole tiles, up to CAP_MAX */
    const int64_t tiles = max64((maxlen + TK - 1) / TK * TK, TK);
    A.cap = (int)min64(tiles, CAP_MAX);
    const size_t smem = (size_t)(SMEM_FIXED + A.cap) * sizeof(float);
    /* the grouped form where asked and it applies: GQA of 2, 4 or 8 query heads a K/V head, no
     * rel-pos, K and V of one type, every head's scores of the longest range in shared memory */
    const int cap_g = (int)tiles;
    const size_t smem_g = (size_t)grouped_smem_floats(grp, cap_g) * sizeof(float);
    const int form = sr_cuda_attn_form(-1);
    const bool auto_form = form == 2;
    const long long blocks = (long long)H * (M < ATTN_ROWS ? M : ATTN_ROWS), sms = sr_cuda_sm_count();
    /* by size (auto), measured on an H200 (srkit bench attn, docs/benchmarks.md): grouped above
     * four blocks a multiprocessor (64 Voxtral streams, 2,048 blocks: 0.274 against 0.573 ms;
     * 256 streams 1.027 / 1.952), split at most one block a multiprocessor over more than one
     * tile of keys (one stream: Voxtral's decoder 0.040 / 0.124 ms, Whisper's cross-attention
     * 0.043 / 0.161; at 72 keys 0.028 / 0.025, so not for one tile) */
    const bool grouped = (form == 3 || (auto_form && blocks > 4 * sms)) && !rel &&
                         (grp == 2 || grp == 4 || grp == 8) && K->dtype == V->dtype &&
                         smem_g <= (size_t)SMEM_LIMIT;
    if (grouped) A.cap = cap_g;
    /* the split form where chosen and it applies (K and V of one type); a scratch block of the
     * call's scores from the table's pool, freed in order after the launches */
    const bool split = (form == 4 || (auto_form && !grouped && blocks <= sms && tiles > TK)) &&
                       K->dtype == V->dtype && tiles / TK <= 65535;
    /* the rows form where asked and it applies (no rel-pos, K and V of one type, every row's
     * range within its scores' shared memory); a group's keys never outgrow the ring */
    const bool rows_form = form == 5 && !rel && K->dtype == V->dtype && maxlen <= ROWS_CAP;
    const int64_t rows_lim = min64(min64(ROWS_CAP, K->rows), V->rows);
    float *S = NULL;
    if (split) {
        const int rows = M < ATTN_ROWS ? M : ATTN_ROWS;
        cudaError_t e = sr_cuda_malloc_pooled((void **)&S, (size_t)rows * H * tiles * sizeof(float));
        if (e != cudaSuccess) return sr_cuda_fail("attn: the split form's scores", e);
    }

    /* ---- ATTN_ROWS rows per launch, their control records as parameters ---- */
    static thread_local attn_gctl G; /* 14 KB: off the stack */
    attn_ctl C;
    int seq[ATTN_ROWS]; /* each row's sequence (the rows form's groups) */
    int s = 0; /* the sequence of row r0 */
    for (int r0 = 0; r0 < M; r0 += ATTN_ROWS) {
        const int m = M - r0 < ATTN_ROWS ? M - r0 : ATTN_ROWS;
        for (int i = 0; i < m; i++) {
            const int r = r0 + i;
            while (r >= b->row0[s + 1]) s++;
            seq[i] = s;
            const int64_t lo = a->lo[r], n = a->hi[r] - lo;
            attn_row *R = &C.rows[i];
            R->n = (int)n;
            R->slot = b->slot[s];
            R->krow0 = n > 0 ? (int)(lo % K->rows) : 0;
            R->vrow0 = n > 0 ? (int)(lo % V->rows) : 0;
            /* rel row of key j: rel_max - (p_r - j), in range by sr_kernels_check_attn */
            R->m0 = rel && n > 0 ? (long long)a->rel_max - (b->pos[s] + (r - b->row0[s])) + lo : 0;
        }
        A.q = q + (size_t)r0 * (size_t)ldq;
        A.out = out + (size_t)r0 * (size_t)ldo;
        A.M = m;
        if (rows_form) {
            A.M = rows_groups(a, b, K, V, r0, m, seq, rows_lim, &G, &A.cap);
            launch_rows(K->dtype, dim3((unsigned)H, (unsigned)A.M), (size_t)rows_smem_floats(A.cap) * sizeof(float),
                        A, G);
        } else if (split) {
            launch_split(K->dtype, rel, H, m, (int)(tiles / TK), A, C, S);
        } else if (grouped) {
            dim3 grid((unsigned)(H / grp), (unsigned)m);
            launch_grouped(K->dtype, grp, grid, smem_g, A, C);
        } else {
            dim3 grid((unsigned)H, (unsigned)m); /* m <= ATTN_ROWS: within the grid's y limit */
            launch(K->dtype, V->dtype, rel, attn_wide((long long)H * m), grid, smem, A, C);
        }
        if ((st = sr_cuda_launched("attn"))) break;
    }
    sr_cuda_free(S);
    return st;
}
