/*
 * attn.c — the CPU table's attention over cache pools (kernels.h: sr_kattn, sr_kattn_fn): one
 * call covers every sequence of a batch, each query row reading its own stream's slot of the K
 * and V pools where the keys lie (ring row = position % pool rows), over its own key range
 * only — the fused cache-indexed SDPA of Deepgram's Flux kernels, so no cache is ever stacked,
 * copied or masked after the fact.
 *
 * Numbers. Every output element is defined by one fixed sequence of correctly rounded f32
 * operations (doubles for the softmax sum), whatever the path, tiling, batch or thread count:
 *   acc   = +0; acc = fma(q'[d], k_j[d], acc) for d = 0, 1, ..., head_dim - 1
 *           (q' = q, or q + u with rel-pos; k widened exactly from the pool)
 *   rel   bd likewise with q + v and the rel row P(p_r - j); acc = acc + bd
 *   s_j   = scale * acc
 *   m     = max of s_j over the row's range (s > m ? s : m from -inf: a NaN score is skipped)
 *   e_j   = exp(s_j - m) by the Cephes expf polynomial of kernels/cpu/ops.c (<= 2 ulp)
 *   sum   = +0.0; sum = sum + (double)e_j for j ascending (double)
 *   o[d]  = +0; o[d] = fma(e_j, v_j[d], o[d]) for j ascending
 *   out   = o[d] * (float)(1.0 / sum)        (an empty range: out = 0)
 * The AVX-512, AVX2 and portable paths (fmaf, rintf) compute exactly this, so their results
 * are bit-identical, and a row's result depends only on its q row, its range and its slot:
 * every accumulator is a vector lane or a scalar owned by one (row, head, d), and no reduction
 * runs across lanes. Keys a row does not own are never added to it (masked lanes keep their
 * accumulator, so neither a NaN nor a -0 from another row's keys can leak in).
 *
 * Work split. The query rows of one sequence that read the same K/V head (its rows times the
 * n_head / n_kv_head query heads of that KV head, head-major) are cut into blocks of up to 32
 * "lanes" whose key ranges lie close together (the hull of their ranges stays within the
 * longest range + 32 keys); a part is one block and one KV head, numbered KV head first so
 * consecutive parts read the same K / V head (it stays in L2), and parts run on the worker
 * pool (sr_cpu_parallel) with one work area per thread. A block walks its hull once per stage:
 *   scores  lanes-in-vector: S^T[j][lane] for 12 keys at a time (AVX-512: 2 x 16 lanes x 12
 *           keys = 24 zmm accumulators), q packed transposed [d][lane], each key element
 *           broadcast from the pool row where it lies (f16 / bf16 rows are widened into a
 *           12-row scratch first; the next 12 rows are prefetched meanwhile: a head's rows lie
 *           a pool row apart, where the hardware prefetchers do not follow). Rel-pos: the same
 *           kernel over the rows of rel gives (q + v) . P(m) for the block's span of
 *           m = rel_max - p + j; each lane adds its own diagonal.
 *   softmax per lane down S^T; masks only at the hull's edges, where some lane's range does
 *           not reach (in the middle every non-empty lane covers the key).
 *   values  row form: groups of up to 6 lanes x 4 vectors of head_dim (24 zmm), each V row
 *           loaded once per group (widened in registers) and e_j broadcast from S^T; the keys
 *           every lane of the group covers run jointly, each lane's edges alone. Tiles of
 *           ~16 KB of V rows pass through every group before the next tile (L1 reuse).
 * Blocks of up to 8 lanes (a few query rows, as in streaming and decoding) use the 8-lane
 * AVX2 score kernels even on AVX-512 machines: the results are identical and fewer lanes are
 * wasted. The Cephes exp polynomial is repeated here (not taken from ops.c) because the
 * softmax runs down lanes and needs a scalar twin (fmaf, rintf) for the bit-identical
 * portable path.
 */
#include "../../core/dtype.h"
#include "../../core/internal.h"
#include "../exp_poly.h"
#include "cpu_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATTN_X86 1
#else
#define ATTN_X86 0
#endif

#define LB_MAX 32          /* lanes (query row x head) per block */
/* kernels/check.c refuses key ranges longer than INT32_MAX / 32 - 4 * 32 (ATTN_MAX_KEYS) for
 * every table: the work areas below are sized in int from maxlen and LB_MAX, so a change of
 * LB_MAX must change that limit with it. */
_Static_assert(LB_MAX == 32, "kernels/check.c's ATTN_MAX_KEYS assumes 32-lane blocks");
#define KG 12              /* keys per score group (a multiple of the kernels' 12 and 6) */
#define GQ 6               /* lanes per value group */
#define MIN_PAR_FMA (1L << 18) /* multiply-adds below which one thread does it all */

enum { ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

/* ---- exp: kernels/exp_poly.h (sr_exp_poly scalar, sr_exp_poly8 on 8 lanes; exp16 below, lane for lane).
 * Scores only ever pass s - max <= 0 (or NaN). Each step is a separate correctly rounded
 * operation so the scalar and vector versions agree bit for bit. */

/* ---- the job ------------------------------------------------------------------------------ */

typedef struct {
    int seq, lane0, nl; /* lanes [lane0, lane0 + nl) of sequence seq: lane = hh * rows + i */
} attn_block;

typedef struct {
    const sr_kattn *a;
    const sr_kbatch *b;
    const float *q;
    float *out;
    int ldq, ldo;
    const sr_kpool *K, *V;
    int layer, isa, grp, hd, hdp; /* hdp: head_dim rounded up to 16 (row-form stride) */
    const attn_block *blk;
    int n_blocks;
    int capk, capm;             /* most keys / rel rows a block's hull may span */
    char *arena;                /* nslots work areas of slot_bytes */
    size_t slot_bytes;
    int nslots;
    atomic_int *busy;
} attn_job;

/* Per-block view handed to the kernels. */
typedef struct {
    int W;                    /* lane stride of Qt / S^T (8, 16 or 32; portable: nl) */
    int nl, n;                /* lanes, keys in the hull */
    int f0, f1;               /* keys [f0, f1) lie in every non-empty lane's range */
    int32_t lo[LB_MAX], hi[LB_MAX]; /* lane ranges relative to the hull start (empty: 0, 0) */
} blockv;

/* ---- portable kernels --------------------------------------------------------------------- */

/* S^T[t][l] = sum_d Qt[d][l] k_t[d] for t < nk, l < W. */
static void s_keys_portable(int W, int hd, const float *Qt, const float *const *kr, int nk,
                            float *St)
{
    for (int t = 0; t < nk; t++)
        for (int l = 0; l < W; l++) {
            float acc = 0.0f;
            for (int d = 0; d < hd; d++) acc = fmaf(Qt[(size_t)d * W + l], kr[t][d], acc);
            St[(size_t)t * W + l] = acc;
        }
}

static void softmax_portable(const blockv *B, float *St, float scale, double *sum)
{
    int W = B->W;
    for (int l = 0; l < W; l++) {
        float m = -INFINITY;
        for (int j = 0; j < B->n; j++) {
            float *s = St + (size_t)j * W + l;
            *s = scale * *s;
            int in = (j >= B->f0 && j < B->f1) || (j >= B->lo[l] && j < B->hi[l]);
            if (in) m = *s > m ? *s : m;
        }
        double acc = 0.0;
        for (int j = 0; j < B->n; j++) {
            float *s = St + (size_t)j * W + l;
            int in = (j >= B->f0 && j < B->f1) || (j >= B->lo[l] && j < B->hi[l]);
            float e = in ? sr_exp_poly(*s - m) : 0.0f;
            *s = e;
            acc += (double)e;
        }
        sum[l] = acc;
    }
}

/* Rel-pos diagonal: St[j][l] = St[j][l] + BD[off[l] + j][l] for lanes l with sel[l] and
 * lo[l] <= j < hi[l] (lane stride W in both). */
static void rel_add_portable(const blockv *B, float *St, const float *BD, const int32_t *off,
                             const int32_t *sel)
{
    int W = B->W;
    for (int l = 0; l < B->nl; l++) {
        if (!sel[l]) continue;
        for (int j = B->lo[l]; j < B->hi[l]; j++) {
            float *sc = St + (size_t)j * W + l;
            *sc = *sc + BD[(size_t)(off[l] + j) * W + l];
        }
    }
}

static float load_elt(sr_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case SR_F16: return sr_f16_to_f32(((const uint16_t *)p)[i]);
    case SR_BF16: return sr_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* o[q][d] = fma(e[k][q], v_k[d], o[q][d]) for k < nk ascending, q < nq, d in [d0, hd): value
 * rows v + k * ldv (elements of dt), e with lane stride W, o with row stride hdp. */
static void pv_portable(sr_dtype dt, int nq, const float *e, int W, const char *v, size_t ldv,
                        int nk, int d0, int hd, float *o, int hdp)
{
    size_t es = sr_dtype_size(dt);
    for (int k = 0; k < nk; k++) {
        const char *vr = v + (size_t)k * ldv * es;
        for (int q = 0; q < nq; q++) {
            float w = e[(size_t)k * W + q];
            float *oq = o + (size_t)q * hdp;
            for (int d = d0; d < hd; d++) oq[d] = fmaf(w, load_elt(dt, vr, (size_t)d), oq[d]);
        }
    }
}

static void widen_row_portable(sr_dtype dt, const void *src, float *dst, int n)
{
    if (dt == SR_F16)
        sr_f16_to_f32_n(src, dst, (size_t)n);
    else
        sr_bf16_to_f32_n(src, dst, (size_t)n);
}

#if ATTN_X86
#define T256 __attribute__((target("avx2,fma,f16c")))
#define T512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

/* ---- AVX2 + FMA + F16C kernels (8 lanes per vector) --------------------------------------- */

/* Lanes l with lo[l] <= j < hi[l] (all ones / zeros per lane). */
T256 static INLINE __m256 in8(__m256i lo, __m256i hi, int j)
{
    __m256i vj = _mm256_set1_epi32(j);
    __m256i ge = _mm256_cmpgt_epi32(lo, vj); /* lo > j: out */
    __m256i lt = _mm256_cmpgt_epi32(hi, vj); /* hi > j: in */
    return _mm256_castsi256_ps(_mm256_andnot_si256(ge, lt));
}

/* NV vectors of 8 lanes x NK keys. */
T256 static INLINE void s8_tile(const int NV, const int NK, int hd, const float *Qt,
                                const float *const *kr, float *St)
{
    const int W = 8 * NV;
    __m256 acc[12][2];
#pragma GCC unroll 12
    for (int t = 0; t < NK; t++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[t][v] = _mm256_setzero_ps();
    const float *p[12];
#pragma GCC unroll 12
    for (int t = 0; t < NK; t++) p[t] = kr[t];
    for (int d = 0; d < hd; d++) {
        __m256 q0 = _mm256_load_ps(Qt + (size_t)d * W);
        __m256 q1 = NV > 1 ? _mm256_load_ps(Qt + (size_t)d * W + 8) : q0;
#pragma GCC unroll 12
        for (int t = 0; t < NK; t++) {
            __m256 b = _mm256_broadcast_ss(p[t] + d);
            acc[t][0] = _mm256_fmadd_ps(q0, b, acc[t][0]);
            if (NV > 1) acc[t][1] = _mm256_fmadd_ps(q1, b, acc[t][1]);
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < NK; t++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) _mm256_store_ps(St + (size_t)t * W + 8 * v, acc[t][v]);
}

T256 static void s_keys_avx2(int W, int hd, const float *Qt, const float *const *kr, int nk,
                             float *St)
{
    int t = 0;
    if (W == 8) {
        for (; t + 12 <= nk; t += 12) s8_tile(1, 12, hd, Qt, kr + t, St + (size_t)t * W);
        for (; t < nk; t++) s8_tile(1, 1, hd, Qt, kr + t, St + (size_t)t * W);
    } else { /* W == 16 */
        for (; t + 6 <= nk; t += 6) s8_tile(2, 6, hd, Qt, kr + t, St + (size_t)t * W);
        for (; t < nk; t++) s8_tile(2, 1, hd, Qt, kr + t, St + (size_t)t * W);
    }
}

/* Softmax pass over one 8-lane column: scale, max, exp, double sums. */
T256 static void softmax_avx2(const blockv *B, float *St, float scale, double *sum)
{
    const int W = B->W, n = B->n;
    int f0 = B->f0, f1 = B->f1;
    const __m256 sc = _mm256_set1_ps(scale);
    for (int v = 0; v < W; v += 8) {
        float *col = St + v;
        __m256i lo = _mm256_loadu_si256((const __m256i *)(B->lo + v));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(B->hi + v));
        __m256 m = _mm256_set1_ps(-INFINITY);
        for (int j = 0; j < n; j++) {
            __m256 x = _mm256_mul_ps(sc, _mm256_load_ps(col + (size_t)j * W));
            _mm256_store_ps(col + (size_t)j * W, x);
            __m256 mx = _mm256_max_ps(x, m);
            m = (j >= f0 && j < f1) ? mx : _mm256_blendv_ps(m, mx, in8(lo, hi, j));
        }
        __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
        for (int j = 0; j < n; j++) {
            __m256 e = sr_exp_poly8(_mm256_sub_ps(_mm256_load_ps(col + (size_t)j * W), m));
            if (j < f0 || j >= f1) e = _mm256_and_ps(e, in8(lo, hi, j));
            _mm256_store_ps(col + (size_t)j * W, e);
            s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        }
        _mm256_storeu_pd(sum + v, s0);
        _mm256_storeu_pd(sum + v + 4, s1);
    }
}

/* rel_add_portable, 8 lanes per step: the diagonal element of each lane by a masked gather. */
T256 static void rel_add_avx2(const blockv *B, float *St, const float *BD, const int32_t *off,
                              const int32_t *sel)
{
    const int W = B->W;
    for (int v = 0; v < W; v += 8) {
        __m256i lo = _mm256_loadu_si256((const __m256i *)(B->lo + v));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(B->hi + v));
        __m256i on = _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(sel + v)), _mm256_setzero_si256());
        /* element index of lane v + i for key j: (off + j) W + v + i */
        __m256i idx = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(off + v)), _mm256_set1_epi32(W)),
                                       _mm256_add_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        const __m256i step = _mm256_set1_epi32(W);
        for (int j = 0; j < B->n; j++, idx = _mm256_add_epi32(idx, step)) {
            __m256 m = _mm256_and_ps(in8(lo, hi, j), _mm256_castsi256_ps(on));
            if (_mm256_testz_ps(m, m)) continue;
            float *row = St + (size_t)j * W + v;
            __m256 x = _mm256_load_ps(row);
            __m256 g = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), BD, idx, m, 4);
            _mm256_store_ps(row, _mm256_blendv_ps(x, _mm256_add_ps(x, g), m));
        }
    }
}

/* 8 elements of a value row, widened exactly. */
T256 static INLINE __m256 ld8(const int DT, const char *p, int off)
{
    if (DT == SR_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + off)));
    if (DT == SR_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + off))), 16));
    return _mm256_loadu_ps((const float *)p + off);
}

/* NQ lanes x DC vectors of 8 columns starting at column d0. */
T256 static INLINE void pv8_chunk(const int DT, const int NQ, const int DC, const float *e, int W,
                                  const char *v, size_t ldvb, int nk, int d0, float *o, int hdp)
{
    __m256 acc[6][4];
#pragma GCC unroll 6
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
        for (int c = 0; c < DC; c++) acc[q][c] = _mm256_loadu_ps(o + (size_t)q * hdp + d0 + 8 * c);
    for (int k = 0; k < nk; k++) {
        const char *vr = v + (size_t)k * ldvb;
        const float *ek = e + (size_t)k * W;
        __m256 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < DC; c++) vv[c] = ld8(DT, vr, d0 + 8 * c);
#pragma GCC unroll 6
        for (int q = 0; q < NQ; q++) {
            __m256 b = _mm256_broadcast_ss(ek + q);
#pragma GCC unroll 4
            for (int c = 0; c < DC; c++) acc[q][c] = _mm256_fmadd_ps(b, vv[c], acc[q][c]);
        }
    }
#pragma GCC unroll 6
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
        for (int c = 0; c < DC; c++) _mm256_storeu_ps(o + (size_t)q * hdp + d0 + 8 * c, acc[q][c]);
}

#define PV8_NQ(DT, DC)                                                                          \
    switch (nq) {                                                                               \
    case 1: pv8_chunk(DT, 1, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                         \
    case 2: pv8_chunk(DT, 2, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                         \
    case 3: pv8_chunk(DT, 3, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                         \
    case 4: pv8_chunk(DT, 4, DC > 3 ? 3 : DC, e, W, v, ldvb, nk, d0, o, hdp); break;            \
    case 5: pv8_chunk(DT, 5, DC > 2 ? 2 : DC, e, W, v, ldvb, nk, d0, o, hdp); break;            \
    default: pv8_chunk(DT, 6, DC > 2 ? 2 : DC, e, W, v, ldvb, nk, d0, o, hdp); break;           \
    }

/* Row-form values over columns [0, hd8) in 8-column vectors (hd8 a multiple of 8); nq <= 6
 * lanes. At most 12 accumulators: 4 vectors for up to 3 lanes, 2 for up to 6. */
T256 static void pv_dt_avx2(const int DT, int nq, const float *e, int W, const char *v,
                            size_t ldvb, int nk, int hd8, float *o, int hdp)
{
    int d0 = 0;
    int c4 = nq <= 3 ? 4 : nq == 4 ? 3 : 2;
    while (d0 < hd8) {
        int left = (hd8 - d0) / 8, dc = left < c4 ? left : c4;
        if (dc >= 4) { PV8_NQ(DT, 4) }
        else if (dc == 3) { PV8_NQ(DT, 3) }
        else if (dc == 2) { PV8_NQ(DT, 2) }
        else { PV8_NQ(DT, 1) }
        d0 += 8 * (dc >= 4 ? 4 : dc);
    }
}

T256 static void pv_avx2(sr_dtype dt, int nq, const float *e, int W, const char *v, size_t ldv,
                         int nk, int hd, float *o, int hdp)
{
    size_t ldvb = ldv * sr_dtype_size(dt);
    int hd8 = hd & ~7;
    if (hd8) {
        if (dt == SR_F16) pv_dt_avx2(SR_F16, nq, e, W, v, ldvb, nk, hd8, o, hdp);
        else if (dt == SR_BF16) pv_dt_avx2(SR_BF16, nq, e, W, v, ldvb, nk, hd8, o, hdp);
        else pv_dt_avx2(SR_F32, nq, e, W, v, ldvb, nk, hd8, o, hdp);
    }
    if (hd8 < hd) pv_portable(dt, nq, e, W, v, ldv, nk, hd8, hd, o, hdp);
}

T256 static void widen_row_avx2(sr_dtype dt, const void *src, float *dst, int n)
{
    const uint16_t *s = src;
    int i = 0;
    if (dt == SR_F16)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    else
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(
                                          _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))), 16)));
    if (i < n) widen_row_portable(dt, s + i, dst + i, n - i);
}

/* ---- AVX-512F kernels (16 lanes per vector) ----------------------------------------------- */

T512 static INLINE __m512 exp16(__m512 x)
{
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(SR_EXP_LO), _CMP_LT_OQ);
    __m512 c = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(SR_EXP_HI)), _mm512_set1_ps(SR_EXP_LO));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(SR_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SR_EXP_C1), c);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SR_EXP_C2), r);
    __m512 p = _mm512_set1_ps(SR_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SR_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SR_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SR_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SR_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SR_EXP_P5));
    __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    y = _mm512_maskz_mov_ps((__mmask16)~under, y);
    return _mm512_mask_mov_ps(y, nan, x);
}

T512 static INLINE __mmask16 in16(__m512i lo, __m512i hi, int j)
{
    __m512i vj = _mm512_set1_epi32(j);
    return _mm512_cmple_epi32_mask(lo, vj) & _mm512_cmpgt_epi32_mask(hi, vj);
}

T512 static INLINE void s16_tile(const int NV, const int NK, int hd, const float *Qt,
                                 const float *const *kr, float *St)
{
    const int W = 16 * NV;
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int t = 0; t < NK; t++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[t][v] = _mm512_setzero_ps();
    const float *p[12];
#pragma GCC unroll 12
    for (int t = 0; t < NK; t++) p[t] = kr[t];
    for (int d = 0; d < hd; d++) {
        __m512 q0 = _mm512_load_ps(Qt + (size_t)d * W);
        __m512 q1 = NV > 1 ? _mm512_load_ps(Qt + (size_t)d * W + 16) : q0;
#pragma GCC unroll 12
        for (int t = 0; t < NK; t++) {
            __m512 b = _mm512_set1_ps(p[t][d]);
            acc[t][0] = _mm512_fmadd_ps(q0, b, acc[t][0]);
            if (NV > 1) acc[t][1] = _mm512_fmadd_ps(q1, b, acc[t][1]);
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < NK; t++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) _mm512_store_ps(St + (size_t)t * W + 16 * v, acc[t][v]);
}

T512 static void s_keys_avx512(int W, int hd, const float *Qt, const float *const *kr, int nk,
                               float *St)
{
    int t = 0;
    if (W == 16) {
        for (; t + 12 <= nk; t += 12) s16_tile(1, 12, hd, Qt, kr + t, St + (size_t)t * W);
        for (; t < nk; t++) s16_tile(1, 1, hd, Qt, kr + t, St + (size_t)t * W);
    } else { /* W == 32 */
        for (; t + 12 <= nk; t += 12) s16_tile(2, 12, hd, Qt, kr + t, St + (size_t)t * W);
        for (; t < nk; t++) s16_tile(2, 1, hd, Qt, kr + t, St + (size_t)t * W);
    }
}

T512 static void softmax_avx512(const blockv *B, float *St, float scale, double *sum)
{
    const int W = B->W, n = B->n;
    int f0 = B->f0, f1 = B->f1;
    const __m512 sc = _mm512_set1_ps(scale);
    for (int v = 0; v < W; v += 16) {
        float *col = St + v;
        __m512i lo = _mm512_loadu_si512(B->lo + v), hi = _mm512_loadu_si512(B->hi + v);
        __m512 m = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < n; j++) {
            __m512 x = _mm512_mul_ps(sc, _mm512_load_ps(col + (size_t)j * W));
            _mm512_store_ps(col + (size_t)j * W, x);
            if (j >= f0 && j < f1) m = _mm512_max_ps(x, m);
            else m = _mm512_mask_max_ps(m, in16(lo, hi, j), x, m);
        }
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        for (int j = 0; j < n; j++) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(col + (size_t)j * W), m));
            if (j < f0 || j >= f1) e = _mm512_maskz_mov_ps(in16(lo, hi, j), e);
            _mm512_store_ps(col + (size_t)j * W, e);
            s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(
                                       _mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
        }
        _mm512_storeu_pd(sum + v, s0);
        _mm512_storeu_pd(sum + v + 8, s1);
    }
}

T512 static void rel_add_avx512(const blockv *B, float *St, const float *BD, const int32_t *off,
                                const int32_t *sel)
{
    const int W = B->W;
    for (int v = 0; v < W; v += 16) {
        __m512i lo = _mm512_loadu_si512(B->lo + v), hi = _mm512_loadu_si512(B->hi + v);
        __mmask16 on = _mm512_cmpgt_epi32_mask(_mm512_loadu_si512(sel + v), _mm512_setzero_si512());
        __m512i idx = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_loadu_si512(off + v), _mm512_set1_epi32(W)),
                                       _mm512_add_epi32(_mm512_set1_epi32(v),
                                                        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
        const __m512i step = _mm512_set1_epi32(W);
        for (int j = 0; j < B->n; j++, idx = _mm512_add_epi32(idx, step)) {
            __mmask16 m = in16(lo, hi, j) & on;
            if (!m) continue;
            float *row = St + (size_t)j * W + v;
            __m512 x = _mm512_load_ps(row);
            __m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, BD, 4);
            _mm512_store_ps(row, _mm512_mask_add_ps(x, m, x, g));
        }
    }
}

T512 static INLINE __m512 ld16(const int DT, const char *p, int off)
{
    if (DT == SR_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + off)));
    if (DT == SR_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + off))), 16));
    return _mm512_loadu_ps((const float *)p + off);
}

T512 static INLINE void pv16_chunk(const int DT, const int NQ, const int DC, const float *e, int W,
                                   const char *v, size_t ldvb, int nk, int d0, float *o, int hdp)
{
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
        for (int c = 0; c < DC; c++) acc[q][c] = _mm512_loadu_ps(o + (size_t)q * hdp + d0 + 16 * c);
    for (int k = 0; k < nk; k++) {
        const char *vr = v + (size_t)k * ldvb;
        const float *ek = e + (size_t)k * W;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < DC; c++) vv[c] = ld16(DT, vr, d0 + 16 * c);
#pragma GCC unroll 6
        for (int q = 0; q < NQ; q++) {
            __m512 b = _mm512_set1_ps(ek[q]);
#pragma GCC unroll 4
            for (int c = 0; c < DC; c++) acc[q][c] = _mm512_fmadd_ps(b, vv[c], acc[q][c]);
        }
    }
#pragma GCC unroll 6
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
        for (int c = 0; c < DC; c++) _mm512_storeu_ps(o + (size_t)q * hdp + d0 + 16 * c, acc[q][c]);
}

#define PV16_NQ(DT, DC)                                                                         \
    switch (nq) {                                                                               \
    case 1: pv16_chunk(DT, 1, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                        \
    case 2: pv16_chunk(DT, 2, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                        \
    case 3: pv16_chunk(DT, 3, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                        \
    case 4: pv16_chunk(DT, 4, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                        \
    case 5: pv16_chunk(DT, 5, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                        \
    default: pv16_chunk(DT, 6, DC, e, W, v, ldvb, nk, d0, o, hdp); break;                       \
    }

/* Row-form values, head_dim a multiple of 16; nq <= 6 lanes x up to 4 vectors (24 zmm). */
T512 static void pv_dt_avx512(const int DT, int nq, const float *e, int W, const char *v,
                              size_t ldvb, int nk, int hd, float *o, int hdp)
{
    int d0 = 0;
    while (d0 < hd) {
        int left = (hd - d0) / 16;
        if (left >= 4) { PV16_NQ(DT, 4) d0 += 64; }
        else if (left == 3) { PV16_NQ(DT, 3) d0 += 48; }
        else if (left == 2) { PV16_NQ(DT, 2) d0 += 32; }
        else { PV16_NQ(DT, 1) d0 += 16; }
    }
}

T512 static void pv_avx512(sr_dtype dt, int nq, const float *e, int W, const char *v, size_t ldv,
                           int nk, int hd, float *o, int hdp)
{
    size_t ldvb = ldv * sr_dtype_size(dt);
    if (dt == SR_F16) pv_dt_avx512(SR_F16, nq, e, W, v, ldvb, nk, hd, o, hdp);
    else if (dt == SR_BF16) pv_dt_avx512(SR_BF16, nq, e, W, v, ldvb, nk, hd, o, hdp);
    else pv_dt_avx512(SR_F32, nq, e, W, v, ldvb, nk, hd, o, hdp);
}
#endif /* ATTN_X86 */

/* ---- path selection ----------------------------------------------------------------------- */

static int force_isa = -1;


static int isa_available(int isa)
{
#if ATTN_X86
    if (isa == ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma") && sr_cpu_f16c();
    if (isa == ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && sr_cpu_f16c();
#endif
    return isa == ISA_PORTABLE;
}

static int attn_isa(void)
{
    if (force_isa >= 0) return force_isa;
    return isa_available(ISA_AVX512) ? ISA_AVX512 : isa_available(ISA_AVX2) ? ISA_AVX2 : ISA_PORTABLE;
}

static const char *const isa_names[] = {"portable", "avx2", "avx512"};

/* Path hooks (cpu_impl.h). */

int sr_cpu_attn_force_isa(const char *name)
{
    if (!name) {
        force_isa = -1;
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, isa_names[i])) {
            if (!isa_available(i)) return -1;
            force_isa = i;
            return 0;
        }
    return -1;
}

const char *sr_cpu_attn_isa(void) { return isa_names[attn_isa()]; }

/* Most lanes per block on a path. */
static int block_lanes(int isa) { return isa == ISA_AVX512 ? 32 : 16; }

/* Lane stride (and so the score kernels) for a block of nl lanes. */
static int lane_stride(int isa, int nl)
{
    if (isa == ISA_PORTABLE) return nl;
    if (nl <= 8) return 8;
    if (nl <= 16) return 16;
    return 32;
}

static void s_keys(int isa, int W, int hd, const float *Qt, const float *const *kr, int nk, float *St)
{
#if ATTN_X86
    if (isa != ISA_PORTABLE) {
        if (W == 8 || (W == 16 && isa == ISA_AVX2)) s_keys_avx2(W, hd, Qt, kr, nk, St);
        else s_keys_avx512(W, hd, Qt, kr, nk, St);
        return;
    }
#endif
    s_keys_portable(W, hd, Qt, kr, nk, St);
}

static void softmax(int isa, const blockv *B, float *St, float scale, double *sum)
{
#if ATTN_X86
    if (isa != ISA_PORTABLE) {
        if (B->W == 8 || (B->W == 16 && isa == ISA_AVX2)) softmax_avx2(B, St, scale, sum);
        else softmax_avx512(B, St, scale, sum);
        return;
    }
#endif
    softmax_portable(B, St, scale, sum);
}

static void rel_add(int isa, const blockv *B, float *St, const float *BD, const int32_t *off,
                    const int32_t *sel)
{
#if ATTN_X86
    if (isa != ISA_PORTABLE) {
        if (B->W == 8 || (B->W == 16 && isa == ISA_AVX2)) rel_add_avx2(B, St, BD, off, sel);
        else rel_add_avx512(B, St, BD, off, sel);
        return;
    }
#endif
    rel_add_portable(B, St, BD, off, sel);
}

static void pv_run(int isa, sr_dtype dt, int nq, const float *e, int W, const char *v, size_t ldv,
                   int nk, int hd, float *o, int hdp)
{
    if (nk <= 0) return;
#if ATTN_X86
    if (isa == ISA_AVX512 && hd % 16 == 0) {
        pv_avx512(dt, nq, e, W, v, ldv, nk, hd, o, hdp);
        return;
    }
    if (isa != ISA_PORTABLE) {
        pv_avx2(dt, nq, e, W, v, ldv, nk, hd, o, hdp);
        return;
    }
#endif
    pv_portable(dt, nq, e, W, v, ldv, nk, 0, hd, o, hdp);
}

static void widen_row(int isa, sr_dtype dt, const void *src, float *dst, int n)
{
#if ATTN_X86
    if (isa != ISA_PORTABLE) {
        widen_row_avx2(dt, src, dst, n);
        return;
    }
#endif
    widen_row_portable(dt, src, dst, n);
}

/* ---- one block ---------------------------------------------------------------------------- */

/* Work area of one part, in floats (each piece 64-byte aligned). */
typedef struct {
    float *Qt, *Qv, *St, *BD, *Or, *Kc;
    double *sum;
} work;

static size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }

static size_t work_floats(int hd, int hdp, int capk, int capm, int rel)
{
    size_t L = LB_MAX;
    return up16((size_t)hd * L) * (rel ? 2 : 1) + up16((size_t)capk * L) +
           (rel ? up16((size_t)capm * L) : 0) + up16(L * (size_t)hdp) + up16((size_t)KG * hd) +
           up16(2 * L);
}

static work work_at(float *f, int hd, int hdp, int capk, int capm, int rel)
{
    size_t L = LB_MAX;
    work w;
    w.Qt = f; f += up16((size_t)hd * L);
    w.Qv = rel ? f : NULL; f += rel ? up16((size_t)hd * L) : 0;
    w.St = f; f += up16((size_t)capk * L);
    w.BD = rel ? f : NULL; f += rel ? up16((size_t)capm * L) : 0;
    w.Or = f; f += up16(L * (size_t)hdp);
    w.Kc = f; f += up16((size_t)KG * hd);
    w.sum = (double *)(void *)f;
    return w;
}

/* Prefetch n pool rows from ring row rr on (wrapping at rows): the `bytes` of each row that a
 * head reads. A head's rows lie a whole pool row apart (often a page or more), so the hardware
 * prefetchers do not follow them and a single query row would wait on memory for every key. */
static void prefetch_rows(const char *base, size_t ld_bytes, int rr, int rows, int n, size_t bytes)
{
    for (int t = 0; t < n; t++) {
        const char *p = base + (size_t)rr * ld_bytes;
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
        if (++rr == rows) rr = 0;
    }
}

/* Value rows [ja, jb) (hull-relative) for lanes [l0, l0 + nq) of the block, splitting where
 * the ring wraps. */
static void pv_range(const attn_job *J, const blockv *B, const work *w, const char *vbase,
                     int64_t jlo, int l0, int nq, int ja, int jb)
{
    if (jb <= ja) return;
    const sr_kpool *V = J->V;
    size_t es = sr_dtype_size(V->dtype), ldv = (size_t)V->width;
    int rr = (int)((jlo + ja) % V->rows);
    while (ja < jb) {
        int run = SR_MIN(jb - ja, V->rows - rr);
        pv_run(J->isa, V->dtype, nq, w->St + (size_t)ja * B->W + l0, B->W,
               vbase + (size_t)rr * ldv * es, ldv, run, J->hd, w->Or + (size_t)l0 * J->hdp, J->hdp);
        ja += run;
        rr = 0;
    }
}

static void run_block(const attn_job *J, const attn_block *blk, int g, work *w)
{
    const sr_kattn *a = J->a;
    const sr_kbatch *b = J->b;
    const int hd = J->hd, hdp = J->hdp, isa = J->isa, s = blk->seq, nl = blk->nl;
    const int r0 = b->row0[s], ns = b->row0[s + 1] - r0;
    const int H = a->n_head;
    int row[LB_MAX], head[LB_MAX];
    int64_t lo64[LB_MAX], hi64[LB_MAX];
    int64_t jlo = INT64_MAX, jhi = INT64_MIN, lomax = INT64_MIN, himin = INT64_MAX;
    for (int l = 0; l < nl; l++) {
        int L = blk->lane0 + l, i = L % ns;
        row[l] = r0 + i;
        head[l] = g * J->grp + L / ns;
        lo64[l] = a->lo[row[l]];
        hi64[l] = a->hi[row[l]];
        if (hi64[l] > lo64[l]) {
            jlo = SR_MIN(jlo, lo64[l]);
            jhi = SR_MAX(jhi, hi64[l]);
            lomax = SR_MAX(lomax, lo64[l]);
            himin = SR_MIN(himin, hi64[l]);
        }
    }
    if (jlo == INT64_MAX) { /* every range empty */
        for (int l = 0; l < nl; l++)
            memset(J->out + (size_t)row[l] * J->ldo + (size_t)head[l] * hd, 0, (size_t)hd * sizeof(float));
        return;
    }
    blockv B;
    B.nl = nl;
    B.W = lane_stride(isa, nl);
    B.n = (int)(jhi - jlo);
    B.f0 = (int)(lomax - jlo);
    B.f1 = (int)SR_MAX(himin - jlo, lomax - jlo);
    for (int l = 0; l < LB_MAX; l++) {
        int ne = l < nl && hi64[l] > lo64[l];
        B.lo[l] = ne ? (int32_t)(lo64[l] - jlo) : 0;
        B.hi[l] = ne ? (int32_t)(hi64[l] - jlo) : 0;
    }
    const int W = B.W;
    const int rel = a->rel != NULL;

    /* q (+ u) and, for rel-pos, q + v, transposed to [d][lane]; unused lanes 0 */
    for (int l = 0; l < W; l++) {
        const float *qr = l < nl ? J->q + (size_t)row[l] * J->ldq + (size_t)head[l] * hd : NULL;
        for (int d = 0; d < hd; d++) {
            float x = qr ? qr[d] : 0.0f;
            w->Qt[(size_t)d * W + l] = rel && qr ? x + a->pos_u[(size_t)head[l] * hd + d] : x;
            if (rel) w->Qv[(size_t)d * W + l] = qr ? x + a->pos_v[(size_t)head[l] * hd + d] : 0.0f;
        }
    }

    /* scores over the hull, a tile of keys at a time */
    const int slot = b->slot[s];
    const sr_kpool *K = J->K, *V = J->V;
    size_t kes = sr_dtype_size(K->dtype);
    const char *kbase = (const char *)K->data + (sr_kpool_at(K, J->layer, slot, 0) + (size_t)g * hd) * kes;
    const size_t kld = (size_t)K->width * kes;
    int rr = (int)(jlo % K->rows);
    const float *kr[KG];
    prefetch_rows(kbase, kld, rr, K->rows, SR_MIN(KG, B.n), (size_t)hd * kes);
    for (int j0 = 0; j0 < B.n; j0 += KG) {
        int nt = SR_MIN(KG, B.n - j0);
        if (j0 + KG < B.n) /* the next group's rows, fetched while this one is multiplied */
            prefetch_rows(kbase, kld, (int)(((int64_t)rr + nt) % K->rows), K->rows,
                          SR_MIN(KG, B.n - j0 - KG), (size_t)hd * kes);
        for (int t = 0; t < nt; t++) {
            const char *src = kbase + (size_t)rr * kld;
            if (K->dtype == SR_F32) {
                kr[t] = (const float *)(const void *)src;
            } else {
                widen_row(isa, K->dtype, src, w->Kc + (size_t)t * hd, hd);
                kr[t] = w->Kc + (size_t)t * hd;
            }
            if (++rr == K->rows) rr = 0;
        }
        s_keys(isa, W, hd, w->Qt, kr, nt, w->St + (size_t)j0 * W);
    }

    /* rel-pos: (q + v) . P(m) over each head's span of rel rows m = rel_max - p + j, then
     * added to each lane's own keys */
    if (rel) {
        const int64_t p0 = b->pos[s] - r0;  /* position of row r: p0 + r */
        const size_t ldr = (size_t)H * hd;
        unsigned done = 0;
        for (int l = 0; l < nl; l++) {
            if ((done >> l) & 1u) continue;
            int hc = head[l];
            int64_t mlo = INT64_MAX, mhi = INT64_MIN;
            for (int t = l; t < nl; t++)
                if (head[t] == hc && B.hi[t] > B.lo[t]) {
                    int64_t c = (int64_t)a->rel_max - (p0 + row[t]);
                    mlo = SR_MIN(mlo, c + lo64[t]);
                    mhi = SR_MAX(mhi, c + hi64[t]);
                }
            for (int t = l; t < nl; t++)
                if (head[t] == hc) done |= 1u << t;
            if (mlo == INT64_MAX) continue;
            int nm = (int)(mhi - mlo);
            for (int m0 = 0; m0 < nm; m0 += KG) {
                int nt = SR_MIN(KG, nm - m0);
                for (int t = 0; t < nt; t++)
                    kr[t] = a->rel + (size_t)(mlo + m0 + t) * ldr + (size_t)hc * hd;
                s_keys(isa, W, hd, w->Qv, kr, nt, w->BD + (size_t)m0 * W);
            }
            int32_t off[LB_MAX] = {0}, sel[LB_MAX] = {0};
            for (int t = l; t < nl; t++)
                if (head[t] == hc && B.hi[t] > B.lo[t]) {
                    off[t] = (int32_t)((int64_t)a->rel_max - (p0 + row[t]) + jlo - mlo);
                    sel[t] = 1;
                }
            rel_add(isa, &B, w->St, w->BD, off, sel);
        }
    }

    softmax(isa, &B, w->St, a->scale, w->sum);

    /* values, row form: groups of up to GQ lanes; the keys every lane of a group covers run
     * jointly, each lane's edges before and after alone. Tiles of about 16 KB of value rows go
     * through every group before the next tile, so a value row is read from L1 by all but the
     * first group; per lane the keys still come in ascending order. */
    size_t ves = sr_dtype_size(V->dtype);
    const char *vbase = (const char *)V->data + (sr_kpool_at(V, J->layer, slot, 0) + (size_t)g * hd) * ves;
    int gf0[LB_MAX / GQ + 1], gf1[LB_MAX / GQ + 1];
    for (int g0 = 0; g0 < nl; g0 += GQ) {
        int lo_max = INT32_MIN, hi_min = INT32_MAX;
        for (int t = g0; t < SR_MIN(nl, g0 + GQ); t++)
            if (B.hi[t] > B.lo[t]) {
                lo_max = SR_MAX(lo_max, B.lo[t]);
                hi_min = SR_MIN(hi_min, B.hi[t]);
            }
        gf0[g0 / GQ] = lo_max; /* INT32_MIN: no lane of the group has keys */
        gf1[g0 / GQ] = SR_MAX(hi_min, lo_max);
    }
    memset(w->Or, 0, (size_t)nl * hdp * sizeof(float));
    const int pt = SR_MAX(16, SR_MIN(256, 16384 / (int)(hd * sizeof(float))));
    const size_t vld = (size_t)V->width * ves;
    if (B.n > 0) prefetch_rows(vbase, vld, (int)(jlo % V->rows), V->rows, SR_MIN(pt, B.n), (size_t)hd * ves);
    for (int t0 = 0; t0 < B.n; t0 += pt) {
        const int t1 = SR_MIN(B.n, t0 + pt);
        if (t1 < B.n)
            prefetch_rows(vbase, vld, (int)((jlo + t1) % V->rows), V->rows, SR_MIN(pt, B.n - t1),
                          (size_t)hd * ves);
        for (int g0 = 0; g0 < nl; g0 += GQ) {
            const int nq = SR_MIN(GQ, nl - g0), a0 = gf0[g0 / GQ], a1 = gf1[g0 / GQ];
            if (a0 == INT32_MIN) continue;
            for (int t = g0; t < g0 + nq; t++)
                if (B.hi[t] > B.lo[t])
                    pv_range(J, &B, w, vbase, jlo, t, 1, SR_MAX(B.lo[t], t0), SR_MIN(SR_MIN(a0, B.hi[t]), t1));
            pv_range(J, &B, w, vbase, jlo, g0, nq, SR_MAX(a0, t0), SR_MIN(a1, t1));
            for (int t = g0; t < g0 + nq; t++)
                if (B.hi[t] > B.lo[t])
                    pv_range(J, &B, w, vbase, jlo, t, 1, SR_MAX(SR_MAX(a1, B.lo[t]), t0), SR_MIN(B.hi[t], t1));
        }
    }

    for (int l = 0; l < nl; l++) {
        float *o = J->out + (size_t)row[l] * J->ldo + (size_t)head[l] * hd;
        if (B.hi[l] <= B.lo[l]) {
            memset(o, 0, (size_t)hd * sizeof(float));
            continue;
        }
        float inv = (float)(1.0 / w->sum[l]);
        const float *src = w->Or + (size_t)l * hdp;
        for (int d = 0; d < hd; d++) o[d] = src[d] * inv;
    }
}

static void attn_part(void *ctx, int part)
{
    const attn_job *J = ctx;
    int slot = 0;
    /* at most nslots parts run at once: one of the areas is free */
    for (;; slot = (slot + 1) % J->nslots)
        if (!atomic_exchange(&J->busy[slot], 1)) break;
    float *f = (float *)(void *)(J->arena + (size_t)slot * J->slot_bytes);
    work w = work_at(f, J->hd, J->hdp, J->capk, J->capm, J->a->rel != NULL);
    /* parts numbered KV head first: consecutive parts read the same K / V head of a slot,
     * which then stays in L2 */
    run_block(J, &J->blk[part % J->n_blocks], part / J->n_blocks, &w);
    atomic_store(&J->busy[slot], 0);
}

/* ---- the op ------------------------------------------------------------------------------- */

sr_status sr_cpu_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                      const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo)
{
    /* kernels/check.c: the checks every table shares; maxlen sizes the work areas */
    int64_t maxlen, keys;
    sr_status st = sr_kernels_check_attn(a, b, q, ldq, K, V, layer, out, ldo, &maxlen, &keys);
    if (st) return st;
    const int M = b->row0[b->n_seq];
    if (M == 0) return SR_OK;
    const int H = a->n_head, G = a->n_kv_head, hd = a->head_dim, grp = H / G;
    const int rel = a->rel != NULL;
    const double work_fma = (double)keys;

    /* blocks: per sequence, lanes (query head of the group hh, row i) as hh * rows + i, cut
     * into runs of up to block_lanes whose hulls stay within cap keys (and rel rows) */
    const int isa = attn_isa(), lb = block_lanes(isa);
    attn_job J = {.a = a, .b = b, .q = q, .out = out, .ldq = ldq, .ldo = ldo, .K = K, .V = V,
                  .layer = layer, .isa = isa, .grp = grp, .hd = hd, .hdp = (int)up16((size_t)hd)};
    J.capk = (int)maxlen + LB_MAX;
    J.capm = (int)maxlen + 2 * LB_MAX;
    attn_block *blk = sr_malloc((size_t)M * grp * sizeof *blk, "attn blocks");
    if (!blk) return SR_ERR_NOMEM;
    int nb = 0;
    for (int s = 0; s < b->n_seq; s++) {
        int r0 = b->row0[s], ns = b->row0[s + 1] - r0, total = ns * grp;
        int64_t p0 = rel ? b->pos[s] : 0;
        for (int L = 0; L < total;) {
            attn_block *B = &blk[nb++];
            B->seq = s;
            B->lane0 = L;
            B->nl = 0;
            int64_t klo = INT64_MAX, khi = INT64_MIN, mlo = INT64_MAX, mhi = INT64_MIN;
            while (L < total && B->nl < lb) {
                int i = L % ns;
                int64_t lo = a->lo[r0 + i], hi = a->hi[r0 + i];
                if (hi > lo) {
                    int64_t c = rel ? (int64_t)a->rel_max - (p0 + i) : 0;
                    int64_t nklo = SR_MIN(klo, lo), nkhi = SR_MAX(khi, hi);
                    int64_t nmlo = SR_MIN(mlo, c + lo), nmhi = SR_MAX(mhi, c + hi);
                    if (B->nl > 0 && (nkhi - nklo > J.capk || (rel && nmhi - nmlo > J.capm))) break;
                    klo = nklo; khi = nkhi; mlo = nmlo; mhi = nmhi;
                }
                B->nl++;
                L++;
            }
        }
    }
    J.blk = blk;
    J.n_blocks = nb;

    int n_parts = nb * G;
    int threads = work_fma * grp * G * hd * 2 < (double)MIN_PAR_FMA ? 1 : SR_MIN(sr_cpu_threads(), n_parts);
    J.nslots = threads;
    J.slot_bytes = work_floats(hd, J.hdp, J.capk, J.capm, rel) * sizeof(float);
    J.arena = sr_malloc((size_t)threads * J.slot_bytes + 64, "attn work area");
    J.busy = sr_calloc((size_t)threads, sizeof *J.busy, "attn work area flags");
    if (!J.arena || !J.busy) {
        free(J.arena);
        free(J.busy);
        free(blk);
        return SR_ERR_NOMEM;
    }
    char *base = J.arena;
    J.arena = (char *)(((uintptr_t)base + 63) & ~(uintptr_t)63);
    for (int i = 0; i < threads; i++) atomic_init(&J.busy[i], 0);
    sr_cpu_parallel(threads, n_parts, attn_part, &J);
    free(base);
    free(J.busy);
    free(blk);
    return SR_OK;
}
