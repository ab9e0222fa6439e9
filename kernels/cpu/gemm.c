/*
 * gemm.c — the CPU table's weights and Linear product (kernels.h: sr_kweight, sr_kgemm_fn,
 * sr_kgather_fn).
 *
 * Layout. weight_create repacks a host [n, k] matrix into column panels of NR = 32 output rows:
 * panel p holds rows [32 p, 32 p + 32) as [k][32] (the last panel padded with zero rows), in
 * the weight's own element type, so a bf16 / f16 weight streams 2 bytes per element and an int8
 * one 1 byte: for the few-row products of streaming decoding the time is that of reading the
 * weight once. Each panel starts on a 64-byte boundary. Within a k row the 32 columns are in
 * order, except bf16: the 32-bit lane l (of 16) holds column l in its low half and column
 * l + 16 in its high half, so one 64-byte load widens to two vectors of 16 floats by a shift
 * and a mask (bf16 is the upper half of an f32) with no lane shuffle.
 *
 * Accumulation. Every output y[m, n] is one f32 accumulator (a lane of a vector register)
 * that starts at +0 and takes exactly one fused multiply-add per k, k = 0, 1, ..., K - 1, with
 * the exactly widened weight. There is no split of k into partial sums and no horizontal
 * reduction (when k is blocked, the accumulator is stored and reloaded between blocks, which
 * is exact), so the result of a row depends only on that row: not on M, the tiling, the thread
 * count, nor the instruction set (the portable path uses fmaf, the same correctly rounded
 * operation). The epilogue is a fixed sequence of correctly rounded operations, each its own
 * statement so no compiler contracts two into an FMA (GCC in ISO C mode does not contract):
 *   t = acc;  t = t * scale[n] (I8);  t = t + bias[n];  t = act(t);
 *   y = alpha * t (beta = 0, y never read)  or  y = (alpha * t) + (beta * y).
 * ReLU is (t > 0 ? t : +0) (NaN and -0 give +0, as the row ops' ReLU), GELU / SiLU are sr_gelu_erf / sr_silu of kernels/ops.h
 * on the same per-row 32-column segments whatever the path.
 *
 * Paths, picked at run time: AVX-512F (register tile of up to 12 rows x 32 columns = 24 zmm
 * accumulators, x broadcast from memory, 2 weight vectors per k), AVX2 + FMA + F16C (up to 2
 * rows x 32 columns, or up to 6 rows x 16 columns in two passes over the panel: 16 ymm
 * registers), and portable C. Widening: f16 by F16C (cvtph), bf16 by shift / mask, int8 by
 * sign extension and an exact int -> float conversion. The weight stream is prefetched
 * PF_BYTES ahead in software (near the end of a panel or k block, in the block read next): at
 * 8-12 rows per k the out-of-order window alone keeps only a few hundred bytes of it in
 * flight, far from the memory bandwidth (with it, 1..8 rows read weights at sgemv's rate).
 *
 * Activations are packed once per call by row tile ([k][rows of the tile]), so a tile's
 * broadcasts come from one sequential stream (rows of x a multiple of 4 KB apart would
 * otherwise share L1 sets and evict each other).
 *
 * bf16 products (SR_KMUL_BF16, kernels.h). The panel is [k / 2][32 columns][2]: the 32-bit
 * lane of column c holds w[c, 2i] low and w[c, 2i + 1] high, the operand of VDPBF16PS and the
 * rows of an AMX B tile, so one k pair of the panel is two 64-byte vectors (K is padded with
 * zero k rows to a multiple of 32, AMX's step; subnormal weights are stored as zero). An i8
 * weight's values q are stored there as the bf16 numbers they are (exact: |q| <= 128), its
 * scale applied in the epilogue as in the exact path. x is
 * rounded to bf16 (subnormals to zero first) as it is packed. Three paths, picked at run time:
 *   AMX (TDPBF16PS; Linux asks the kernel for the tile state once): tiles of up to 32 rows
 *     (two 16-row A tiles) x 32 columns (two B tiles), 32 k per instruction, x packed as
 *     row-major bf16 rows. 16 rows (8 streams of two frames) take the weight-read time, where
 *     the widening path is compute-bound beyond about 8 rows. Intel leaves the order of the
 *     sums inside one instruction open: the tests hold this path to the f32 rounding bound
 *     against the double reference, and to bit-identity across batchings and threads (every
 *     row runs the same instructions whatever its tile holds).
 *   AVX512_BF16 (VDPBF16PS): register tiles of up to 12 rows x 32 columns, two instructions
 *     per row and k pair, x packed as one 32-bit pair per row and k pair.
 *   portable: the same sums as VDPBF16PS (two fmaf per pair, odd k first, each result with a
 *     subnormal flushed), tested bit for bit against it.
 * On a CPU with VDPBF16PS but not AMX the instruction issues on one port, so it reads the
 * weights no faster than widening; AMX is what makes precision bf16 fast.
 *
 * Blocking and threads. The work is cut into parts: a group of consecutive panels times a block
 * of rows. Inside a part the row tiles are the outer loop and the group's panels the inner one:
 * the packed x tile stays in L1 / L2 while the panels (read from memory by the first tile, from
 * L2 by the others) stream past it, so for M up to a few hundred rows every weight byte comes
 * from DRAM once. When K > KC_MAX and the block has several tiles, k is blocked too (BLIS
 * style): for each k block, every tile x panel pair continues its accumulators, kept between
 * blocks in a stack buffer; the x sub-tile then fits L1 and the group's k-block of weights L2.
 * Parts are numbered panel group first, so the row blocks of one group run close together in
 * time (the later ones read the group from cache). The caller and the pool workers (pool.c)
 * take parts from a shared counter.
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* syscall(), for arch_prctl (AMX) */
#endif
#include "../../core/dtype.h"
#include "../../core/internal.h"
#include "../ops.h"
#include "cpu_impl.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define GEMM_X86 1
#else
#define GEMM_X86 0
#endif
#if GEMM_X86 && defined(__linux__)
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#define GEMM_AMX 1 /* AMX needs the kernel's leave to use the tile state (arch_prctl) */
#else
#define GEMM_AMX 0
#endif

#define NR 32                     /* output rows (columns of y) per panel */
#define MR512 12                  /* rows per AVX-512 register tile */
#define MR256 6                   /* rows per AVX2 half-panel tile (2 rows: whole panel) */
#define MRP 4                     /* rows per portable tile */
#define PART_BYTES (256 * 1024)   /* weight bytes per part (per k block when k is blocked) */
#define XBLOCK_BYTES (256 * 1024) /* activation bytes per row block (k not blocked) */
#define KC_MAX 384                /* k per block above which k is blocked (x sub-tile in L1) */
#define ACC_FLOATS 16384          /* accumulators of a k-blocked part (64 KB of stack) */
#define PF_BYTES 4096             /* software prefetch distance in the weight stream */
#define MIN_PAR_BYTES (96 * 1024) /* weights below which, with little work, one thread does it */
#define MIN_PAR_FMA (1L << 21)    /* multiply-adds above which the pool is worth waking */

enum { ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };
/* Paths of bf16 products: the portable tile, VDPBF16PS, AMX (TDPBF16PS) */
enum { BF_PORTABLE = 0, BF_DOT = 1, BF_AMX = 2 };
#define MRAMX 32 /* rows per AMX tile pair (two 16-row A tiles) */
#define KAMX 32  /* k per TDPBF16PS: panels and packed rows of bf16 products pad K to it */

/* Position within a k row of panel column c: bf16 pairs columns c and c + 16 in a 32-bit lane. */
static inline int panel_pos(sr_dtype dt, int c)
{
    return dt == SR_BF16 ? 2 * (c & 15) + (c >> 4) : c;
}

/* Element index of (column c, k) within a panel. */
static inline size_t panel_at(const sr_kweight *W, int c, size_t k)
{
    if (W->mul == SR_KMUL_BF16) return (k >> 1) * (2 * NR) + 2 * (size_t)c + (k & 1);
    return k * NR + (size_t)panel_pos(W->dtype, c);
}

static size_t elt_size(sr_dtype dt)
{
    return dt == SR_F32 ? 4 : dt == SR_I8 ? 1 : 2;
}

/* Bytes of a panel element: the dtype's, or bf16's for bf16 products (an i8 weight's values
 * are stored as the bf16 numbers they are, so every bf16-product path reads one layout). */
static size_t w_elt(const sr_kweight *W)
{
    return W->mul == SR_KMUL_BF16 ? 2 : elt_size(W->dtype);
}

/* k rows a panel holds: K, or K rounded up to KAMX for bf16 products (zero rows). */
static size_t k_rows(const sr_kweight *W)
{
    return W->mul == SR_KMUL_BF16 ? ((size_t)W->k + KAMX - 1) / KAMX * KAMX : (size_t)W->k;
}

static size_t panel_bytes(const sr_kweight *W)
{
    size_t b = k_rows(W) * NR * w_elt(W);
    return (b + 63) & ~(size_t)63;
}

/* bf16 with a subnormal (exponent 0, mantissa not) replaced by zero of its sign. */
static inline uint16_t bf16_daz(uint16_t b)
{
    return (b & 0x7f80u) ? b : (uint16_t)(b & 0x8000u);
}

/* An activation as a bf16 product operand: subnormals to zero, then nearest even. */
static inline uint16_t x_to_bf16(float v)
{
    if (fabsf(v) < FLT_MIN) v = copysignf(0.0f, v);
    return sr_f32_to_bf16(v);
}

/* One addition of a bf16 product: acc + x w (exact product) rounded once, a subnormal result
 * flushed to zero of its sign (VDPBF16PS's FTZ). */
static inline float dbf_add(float x, float w, float acc)
{
    float r = fmaf(x, w, acc);
    return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r;
}

static int n_panels(const sr_kweight *W) { return (W->n + NR - 1) / NR; }

/* ---- weights ---------------------------------------------------------------------------- */

typedef struct {
    const void *host;
    sr_kweight *W;
} repack_job;

/* Panel p of W from the host rows: element (row 32 p + c, k) to panel_at(c, k). */
static void repack_panel(void *ctx, int p)
{
    const repack_job *j = ctx;
    const sr_kweight *W = j->W;
    size_t es = elt_size(W->dtype), K = (size_t)W->k;
    unsigned char *dst = (unsigned char *)W->data + (size_t)p * panel_bytes(W);
    memset(dst, 0, panel_bytes(W));
    for (int c = 0; c < NR; c++) {
        int n = p * NR + c;
        if (n >= W->n) break;
        size_t pos = (size_t)panel_pos(W->dtype, c);
        const unsigned char *src = (const unsigned char *)j->host + (size_t)n * K * es;
        if (W->mul == SR_KMUL_BF16 && W->dtype == SR_I8) { /* q exactly, |q| <= 128 */
            uint16_t *d = (uint16_t *)(void *)dst;
            for (size_t k = 0; k < K; k++)
                d[panel_at(W, c, k)] = sr_f32_to_bf16((float)((const int8_t *)(const void *)src)[k]);
        } else if (W->mul == SR_KMUL_BF16) {
            const uint16_t *s = (const uint16_t *)(const void *)src;
            uint16_t *d = (uint16_t *)(void *)dst;
            for (size_t k = 0; k < K; k++) d[panel_at(W, c, k)] = bf16_daz(s[k]);
        } else if (es == 4) {
            const float *s = (const float *)(const void *)src;
            float *d = (float *)(void *)dst;
            for (size_t k = 0; k < K; k++) d[k * NR + pos] = s[k];
        } else if (es == 2) {
            const uint16_t *s = (const uint16_t *)(const void *)src;
            uint16_t *d = (uint16_t *)(void *)dst;
            for (size_t k = 0; k < K; k++) d[k * NR + pos] = s[k];
        } else {
            for (size_t k = 0; k < K; k++) dst[k * NR + pos] = src[k];
        }
    }
}

sr_status sr_cpu_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                               sr_kmul mul, sr_kweight **out)
{
    sr_status st = sr_kernels_check_weight_create(host, dt, n, k, scale, mul, out);
    if (st) return st;
    sr_kweight *W = calloc(1, sizeof *W);
    if (!W) return sr_error(SR_ERR_NOMEM, "weight_create: %d x %d weight", n, k);
    W->n = n;
    W->k = k;
    W->dtype = dt;
    W->mul = mul;
    int np = n_panels(W);
    size_t data_bytes = (size_t)np * panel_bytes(W);
    size_t scale_bytes = dt == SR_I8 ? (size_t)np * NR * sizeof(float) : 0;
    if (posix_memalign(&W->data, 64, data_bytes) != 0) {
        free(W);
        return sr_error(SR_ERR_NOMEM, "weight_create: %zu bytes for a %d x %d weight", data_bytes,
                        n, k);
    }
    if (dt == SR_I8) {
        void *s = NULL;
        if (posix_memalign(&s, 64, scale_bytes) != 0) {
            free(W->data);
            free(W);
            return sr_error(SR_ERR_NOMEM, "weight_create: i8 scales of a %d x %d weight", n, k);
        }
        W->scale = s;
        memset(W->scale, 0, scale_bytes);
        memcpy(W->scale, scale, (size_t)n * sizeof(float));
    }
    W->bytes = data_bytes + scale_bytes;
    repack_job j = {host, W};
    /* panels are independent: big weights (loading a model) repack on the pool */
    sr_cpu_parallel(data_bytes >= ((size_t)4 << 20) ? 0 : 1, np, repack_panel, &j);
    *out = W;
    return SR_OK;
}

size_t sr_cpu_weight_scale_bytes(const sr_kweight *W)
{
    return W->dtype == SR_I8 ? (size_t)n_panels(W) * NR * sizeof(float) : 0;
}

void sr_cpu_weight_free(sr_kweight *w)
{
    if (!w) return;
    free(w->data);
    free(w->scale);
    free(w);
}

/* ---- the product -------------------------------------------------------------------------- */

#define NR_BYTES(dt) ((size_t)NR * elt_size(dt))

typedef struct {
    int M, K, N, ldx, ldy;
    const float *x;
    const float *xp; /* x packed by row tile (pack_block), or x itself when M = 1 and exact;
                      * bf16 products: uint32 bf16 pairs, [k / 2][mr] per tile */
    int bf;          /* bf16 products (W->mul == SR_KMUL_BF16) */
    int bfpath;      /* BF_*: the tile of bf16 products */
    int K2;          /* k pairs (bf16 products) */
    int Kpad;        /* K padded to KAMX: the row stride of AMX's packed x (bf16 elements) */
    const sr_kweight *W;
    const float *bias;
    sr_act act;
    float alpha, beta;
    float *y;
    int isa;
    int group, n_groups; /* panels per part, panel groups */
    int mc, n_blocks;    /* rows per row block, row blocks */
    int kc, n_kb;        /* k per k block, k blocks (1: k not blocked) */
} gemm_job;

/* Epilogue of rows [m0, m0 + mr) x panel columns [n0, n0 + nv) from the raw sums t (row r at
 * t + r ldt, natural column order): scale, bias, activation, alpha / beta (file comment). */
static void epilogue_portable(const gemm_job *j, float *t, int ldt, int mr, int m0, int n0, int nv)
{
    const float *sc = j->W->dtype == SR_I8 ? j->W->scale + n0 : NULL;
    const float *b = j->bias ? j->bias + n0 : NULL;
    for (int r = 0; r < mr; r++) {
        float *tr = t + (size_t)r * ldt;
        float *yr = j->y + (size_t)(m0 + r) * j->ldy + n0;
        for (int c = 0; c < nv; c++) {
            float v = tr[c];
            if (sc) v = v * sc[c];
            if (b) v = v + b[c];
            if (j->act == SR_ACT_RELU) v = v > 0.0f ? v : 0.0f;
            tr[c] = v;
        }
        if (j->act == SR_ACT_GELU) sr_gelu_erf(tr, (size_t)nv);
        if (j->act == SR_ACT_SILU) sr_silu(tr, (size_t)nv);
        if (j->beta == 0.0f) {
            for (int c = 0; c < nv; c++) yr[c] = j->alpha * tr[c];
        } else {
            for (int c = 0; c < nv; c++) {
                float a = j->alpha * tr[c];
                float by = j->beta * yr[c];
                yr[c] = a + by;
            }
        }
    }
}

/* Every tile function: mr rows packed at xp ([k][mr], from the first k of the block), nk
 * values of k from panel row `panel` on; accumulators start at 0 (load = 0) or at t (row r at
 * t + r ldt), and end in t. next: where the weight stream goes on after these nk rows (the
 * software prefetch, PF_BYTES ahead, continues there near the end). */
typedef void (*tile_fn)(int mr, int nk, const float *xp, const void *panel, float *t, int ldt,
                        int load, const void *next);

/* Portable tile, mr <= MRP. */
static void tile_portable(sr_dtype dt, int mr, int nk, const float *xp, const void *panel,
                          float *t, int ldt, int load, const void *next)
{
    (void)next;
    float acc[MRP][NR];
    float w[NR];
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < NR; c++) acc[r][c] = load ? t[(size_t)r * ldt + c] : 0.0f;
    for (int k = 0; k < nk; k++) {
        for (int c = 0; c < NR; c++) {
            size_t at = (size_t)k * NR + (size_t)panel_pos(dt, c);
            switch (dt) {
            case SR_F32: w[c] = ((const float *)panel)[at]; break;
            case SR_BF16: w[c] = sr_bf16_to_f32(((const uint16_t *)panel)[at]); break;
            case SR_F16: w[c] = sr_f16_to_f32(((const uint16_t *)panel)[at]); break;
            default: w[c] = (float)((const int8_t *)panel)[at]; break;
            }
        }
        for (int r = 0; r < mr; r++) {
            float xv = xp[(size_t)k * mr + r];
            for (int c = 0; c < NR; c++) acc[r][c] = fmaf(xv, w[c], acc[r][c]);
        }
    }
    for (int r = 0; r < mr; r++) memcpy(t + (size_t)r * ldt, acc[r], NR * sizeof(float));
}

#define PORTABLE_FN(name, DT)                                                                  \
    static void name(int mr, int nk, const float *xp, const void *panel, float *t, int ldt,    \
                     int load, const void *next)                                               \
    {                                                                                          \
        tile_portable(DT, mr, nk, xp, panel, t, ldt, load, next);                              \
    }
PORTABLE_FN(tilep_f32, SR_F32)
PORTABLE_FN(tilep_bf16, SR_BF16)
PORTABLE_FN(tilep_f16, SR_F16)
PORTABLE_FN(tilep_i8, SR_I8)

/* Portable tile of bf16 products, mr <= MRP: xp holds [nk / 2][mr] bf16 pairs (an odd nk is
 * the end of K, its pair padded with zeros), the panel [nk / 2][32][2]. */
static void tilep_dbf(int mr, int nk, const float *xpf, const void *panel, float *t, int ldt,
                      int load, const void *next)
{
    (void)next;
    const uint32_t *xp = (const uint32_t *)(const void *)xpf;
    const uint16_t *wp = panel;
    float acc[MRP][NR];
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < NR; c++) acc[r][c] = load ? t[(size_t)r * ldt + c] : 0.0f;
    for (int kp = 0; kp < (nk + 1) / 2; kp++, wp += 2 * NR, xp += mr)
        for (int r = 0; r < mr; r++) {
            float x0 = sr_bf16_to_f32((uint16_t)(xp[r] & 0xffffu));
            float x1 = sr_bf16_to_f32((uint16_t)(xp[r] >> 16));
            for (int c = 0; c < NR; c++) {
                float a = dbf_add(x1, sr_bf16_to_f32(wp[2 * c + 1]), acc[r][c]);
                acc[r][c] = dbf_add(x0, sr_bf16_to_f32(wp[2 * c]), a);
            }
        }
    for (int r = 0; r < mr; r++) memcpy(t + (size_t)r * ldt, acc[r], NR * sizeof(float));
}

#if GEMM_X86
#define T256 __attribute__((target("avx2,fma,f16c")))
#define T512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

/* 8-lane tail mask of the first n (0..8) lanes. */
T256 static inline __m256i mask8(int n)
{
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(const void *)(m + 8 - SR_MAX(0, SR_MIN(n, 8))));
}

/* The same epilogue on 8 lanes at a time (used by both SIMD paths: each operation is the
 * correctly rounded one of the portable epilogue, so the results are identical). */
T256 static void epilogue_avx2(const gemm_job *j, float *t, int ldt, int mr, int m0, int n0, int nv)
{
    const float *sc = j->W->dtype == SR_I8 ? j->W->scale + n0 : NULL; /* padded to the panel */
    const float *b = j->bias ? j->bias + n0 : NULL;
    const __m256 zero = _mm256_setzero_ps(), alpha = _mm256_set1_ps(j->alpha),
                 beta = _mm256_set1_ps(j->beta);
    for (int r = 0; r < mr; r++) {
        float *tr = t + (size_t)r * ldt;
        float *yr = j->y + (size_t)(m0 + r) * j->ldy + n0;
        if (sc || b || j->act == SR_ACT_RELU)
            for (int c = 0; c < nv; c += 8) {
                __m256 v = _mm256_load_ps(tr + c);
                if (sc) v = _mm256_mul_ps(v, _mm256_load_ps(sc + c));
                if (b) v = _mm256_add_ps(v, _mm256_maskload_ps(b + c, mask8(nv - c)));
                if (j->act == SR_ACT_RELU) v = _mm256_max_ps(v, zero); /* t > 0 ? t : +0 */
                _mm256_store_ps(tr + c, v);
            }
        if (j->act == SR_ACT_GELU) sr_gelu_erf(tr, (size_t)nv);
        if (j->act == SR_ACT_SILU) sr_silu(tr, (size_t)nv);
        for (int c = 0; c < nv; c += 8) {
            __m256i m = mask8(nv - c);
            __m256 a = _mm256_mul_ps(alpha, _mm256_load_ps(tr + c));
            if (j->beta != 0.0f) {
                __m256 by = _mm256_mul_ps(beta, _mm256_maskload_ps(yr + c, m));
                a = _mm256_add_ps(a, by);
            }
            if (nv - c >= 8) _mm256_storeu_ps(yr + c, a);
            else _mm256_maskstore_ps(yr + c, m, a);
        }
    }
}

/* Widened weights of panel row k: lo = columns 0..15, hi = columns 16..31. */
INLINE T512 void wload512(sr_dtype dt, const void *panel, size_t k, __m512 *lo, __m512 *hi)
{
    if (dt == SR_F32) {
        const float *p = (const float *)panel + k * NR;
        *lo = _mm512_loadu_ps(p);
        *hi = _mm512_loadu_ps(p + 16);
    } else if (dt == SR_BF16) {
        __m512i v = _mm512_loadu_si512((const uint16_t *)panel + k * NR);
        *lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        *hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
    } else if (dt == SR_F16) {
        const uint16_t *p = (const uint16_t *)panel + k * NR;
        *lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        *hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + 16)));
    } else {
        const int8_t *p = (const int8_t *)panel + k * NR;
        *lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
        *hi = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p + 16))));
    }
}

/* Register tile: mr (a constant after inlining) rows x 32 columns. */
INLINE T512 void tile512(sr_dtype dt, int mr, int nk, const float *xp, const void *panel,
                         float *t, int ldt, int load, const void *next)
{
    __m512 a0[MR512], a1[MR512];
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        a0[r] = load ? _mm512_load_ps(t + (size_t)r * ldt) : _mm512_setzero_ps();
        a1[r] = load ? _mm512_load_ps(t + (size_t)r * ldt + 16) : _mm512_setzero_ps();
    }
    const long rb = (long)NR_BYTES(dt), ks = SR_MAX(0, (nk * rb - PF_BYTES + rb - 1) / rb);
    const char *pf = (const char *)panel + PF_BYTES;
    for (int k = 0; k < nk; k++, xp += mr, pf += rb) {
        if (k == ks) pf = (const char *)next + (ks * rb + PF_BYTES - nk * rb);
        __m512 lo, hi;
        _mm_prefetch(pf, _MM_HINT_T0);
        if (dt == SR_F32) _mm_prefetch(pf + 64, _MM_HINT_T0);
        wload512(dt, panel, (size_t)k, &lo, &hi);
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            __m512 xv = _mm512_set1_ps(xp[r]);
            a0[r] = _mm512_fmadd_ps(xv, lo, a0[r]);
            a1[r] = _mm512_fmadd_ps(xv, hi, a1[r]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        _mm512_store_ps(t + (size_t)r * ldt, a0[r]);
        _mm512_store_ps(t + (size_t)r * ldt + 16, a1[r]);
    }
}

#define TILE512_FN(name, DT)                                                                   \
    T512 static void name(int mr, int nk, const float *xp, const void *panel, float *t,        \
                          int ldt, int load, const void *next)                                 \
    {                                                                                          \
        switch (mr) {                                                                          \
        case 1: tile512(DT, 1, nk, xp, panel, t, ldt, load, next); break;                            \
        case 2: tile512(DT, 2, nk, xp, panel, t, ldt, load, next); break;                            \
        case 3: tile512(DT, 3, nk, xp, panel, t, ldt, load, next); break;                            \
        case 4: tile512(DT, 4, nk, xp, panel, t, ldt, load, next); break;                            \
        case 5: tile512(DT, 5, nk, xp, panel, t, ldt, load, next); break;                            \
        case 6: tile512(DT, 6, nk, xp, panel, t, ldt, load, next); break;                            \
        case 7: tile512(DT, 7, nk, xp, panel, t, ldt, load, next); break;                            \
        case 8: tile512(DT, 8, nk, xp, panel, t, ldt, load, next); break;                            \
        case 9: tile512(DT, 9, nk, xp, panel, t, ldt, load, next); break;                            \
        case 10: tile512(DT, 10, nk, xp, panel, t, ldt, load, next); break;                          \
        case 11: tile512(DT, 11, nk, xp, panel, t, ldt, load, next); break;                          \
        default: tile512(DT, 12, nk, xp, panel, t, ldt, load, next); break;                          \
        }                                                                                      \
    }
TILE512_FN(tile512_f32, SR_F32)
TILE512_FN(tile512_bf16, SR_BF16)
TILE512_FN(tile512_f16, SR_F16)
TILE512_FN(tile512_i8, SR_I8)

#define T512BF __attribute__((target("avx512f,avx512bf16,avx2,fma,f16c")))

/* Register tile of bf16 products: mr rows x 32 columns, two VDPBF16PS per row and k pair
 * (xp and panel as tilep_dbf). */
INLINE T512BF void tile512bf(int mr, int nk, const float *xpf, const void *panel, float *t,
                             int ldt, int load, const void *next)
{
    const uint32_t *xp = (const uint32_t *)(const void *)xpf;
    __m512 a0[MR512], a1[MR512];
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        a0[r] = load ? _mm512_load_ps(t + (size_t)r * ldt) : _mm512_setzero_ps();
        a1[r] = load ? _mm512_load_ps(t + (size_t)r * ldt + 16) : _mm512_setzero_ps();
    }
    const int np = (nk + 1) / 2;
    const long rb = 4 * NR, ks = SR_MAX(0, (np * rb - PF_BYTES + rb - 1) / rb);
    const char *pf = (const char *)panel + PF_BYTES;
    const uint16_t *wp = panel;
    for (int kp = 0; kp < np; kp++, xp += mr, pf += rb, wp += 2 * NR) {
        if (kp == ks) pf = (const char *)next + (ks * rb + PF_BYTES - np * rb);
        _mm_prefetch(pf, _MM_HINT_T0);
        _mm_prefetch(pf + 64, _MM_HINT_T0);
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp);
        __m512bh w1 = (__m512bh)_mm512_loadu_si512(wp + NR);
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            __m512bh xv = (__m512bh)_mm512_set1_epi32((int)xp[r]);
            a0[r] = _mm512_dpbf16_ps(a0[r], xv, w0);
            a1[r] = _mm512_dpbf16_ps(a1[r], xv, w1);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        _mm512_store_ps(t + (size_t)r * ldt, a0[r]);
        _mm512_store_ps(t + (size_t)r * ldt + 16, a1[r]);
    }
}

T512BF static void tile512_dbf(int mr, int nk, const float *xp, const void *panel, float *t,
                               int ldt, int load, const void *next)
{
    switch (mr) {
    case 1: tile512bf(1, nk, xp, panel, t, ldt, load, next); break;
    case 2: tile512bf(2, nk, xp, panel, t, ldt, load, next); break;
    case 3: tile512bf(3, nk, xp, panel, t, ldt, load, next); break;
    case 4: tile512bf(4, nk, xp, panel, t, ldt, load, next); break;
    case 5: tile512bf(5, nk, xp, panel, t, ldt, load, next); break;
    case 6: tile512bf(6, nk, xp, panel, t, ldt, load, next); break;
    case 7: tile512bf(7, nk, xp, panel, t, ldt, load, next); break;
    case 8: tile512bf(8, nk, xp, panel, t, ldt, load, next); break;
    case 9: tile512bf(9, nk, xp, panel, t, ldt, load, next); break;
    case 10: tile512bf(10, nk, xp, panel, t, ldt, load, next); break;
    case 11: tile512bf(11, nk, xp, panel, t, ldt, load, next); break;
    default: tile512bf(12, nk, xp, panel, t, ldt, load, next); break;
    }
}
#endif /* GEMM_X86 (reopened below) */

#if GEMM_AMX
#define TAMX __attribute__((target("amx-tile,amx-bf16,avx512f")))

/* Tile configuration (palette 1): all 8 tiles 16 rows x 64 bytes. tmm0 / tmm3: A (16 rows of
 * x, 32 bf16 each); tmm1 / tmm2: B (16 k pairs x 16 columns, the panel's lanes 0-15 and
 * 16-31); tmm4-5 / tmm6-7: C (16 rows x 16 f32) for the columns 0-15 / 16-31 of rows 0-15 /
 * 16-31. The configuration is per thread (the pool's workers load it on first use). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

static _Thread_local int amx_configured;

TAMX static void amx_configure(void)
{
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = 16;
        c.colsb[i] = 64;
    }
    _tile_loadconfig(&c);
    amx_configured = 1;
}

/* AMX tile of bf16 products: mr <= 32 rows x 32 columns. xp: row-major bf16 rows of stride
 * ldx elements (K padded with zeros to KAMX, rows past mr readable: they only make C rows that
 * are dropped); panel: [k / 2][32][2] from the block's first k; nk rounded up to KAMX (the
 * padding is zeros on both sides). A full 16-row tile always runs: a row's sums never depend
 * on the others. t as the other tiles (rows r < mr at t + r ldt). */
TAMX static void tile_amx(int mr, int nk, const float *xpf, int ldx, const void *panel, float *t,
                          int ldt, int load)
{
    _Alignas(64) float c[MRAMX][NR];
    const uint16_t *xa = (const uint16_t *)(const void *)xpf, *wp = panel;
    const int two = mr > 16;
    const size_t xs = (size_t)ldx * 2;
    if (!amx_configured) amx_configure();
    if (load) {
        for (int r = 0; r < mr; r++) memcpy(c[r], t + (size_t)r * ldt, sizeof c[r]);
        _tile_loadd(4, c[0], sizeof c[0]);
        _tile_loadd(5, c[0] + 16, sizeof c[0]);
        if (two) {
            _tile_loadd(6, c[16], sizeof c[0]);
            _tile_loadd(7, c[16] + 16, sizeof c[0]);
        }
    } else {
        _tile_zero(4);
        _tile_zero(5);
        if (two) {
            _tile_zero(6);
            _tile_zero(7);
        }
    }
    for (int k0 = 0; k0 < nk; k0 += KAMX) {
        _tile_loadd(1, wp + (size_t)k0 * NR, 4 * NR);
        _tile_loadd(2, wp + (size_t)k0 * NR + 2 * 16, 4 * NR);
        _tile_loadd(0, xa + k0, xs);
        _tile_dpbf16ps(4, 0, 1);
        _tile_dpbf16ps(5, 0, 2);
        if (two) {
            _tile_loadd(3, xa + (size_t)16 * ldx + k0, xs);
            _tile_dpbf16ps(6, 3, 1);
            _tile_dpbf16ps(7, 3, 2);
        }
    }
    _tile_stored(4, c[0], sizeof c[0]);
    _tile_stored(5, c[0] + 16, sizeof c[0]);
    if (two) {
        _tile_stored(6, c[16], sizeof c[0]);
        _tile_stored(7, c[16] + 16, sizeof c[0]);
    }
    for (int r = 0; r < mr; r++) memcpy(t + (size_t)r * ldt, c[r], sizeof c[r]);
}

/* AMX-BF16 in the CPU (CPUID 7.0: EDX bits 22, 24) and the kernel's leave to use tile data
 * (Linux 5.16+: ARCH_REQ_XCOMP_PERM for XTILEDATA, feature 18), asked once per process. */
static int amx_ok;
static void amx_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return;
    amx_ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0;
}

static int amx_available(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_probe);
    return amx_ok;
}
#else
static int amx_available(void) { return 0; }
static void tile_amx(int mr, int nk, const float *xpf, int ldx, const void *panel, float *t,
                     int ldt, int load)
{
    (void)mr, (void)nk, (void)xpf, (void)ldx, (void)panel, (void)t, (void)ldt, (void)load;
}
#endif /* GEMM_AMX */

#if GEMM_X86

/* Widened weights of half h of panel row k: lo = columns 8h..8h+7, hi = 16+8h..16+8h+7. */
INLINE T256 void wload256(sr_dtype dt, const void *panel, size_t k, int h, __m256 *lo,
                          __m256 *hi)
{
    if (dt == SR_F32) {
        const float *p = (const float *)panel + k * NR + 8 * h;
        *lo = _mm256_loadu_ps(p);
        *hi = _mm256_loadu_ps(p + 16);
    } else if (dt == SR_BF16) {
        __m256i v = _mm256_loadu_si256(
            (const __m256i *)(const void *)((const uint16_t *)panel + k * NR + 16 * h));
        *lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        *hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
    } else if (dt == SR_F16) {
        const uint16_t *p = (const uint16_t *)panel + k * NR + 8 * h;
        *lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
        *hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
    } else {
        const int8_t *p = (const int8_t *)panel + k * NR + 8 * h;
        *lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
        *hi = _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p + 16))));
    }
}

/* Register tile: mr rows x (nh = 2: all 32 columns; nh = 1: half h0). Vector q of a row
 * covers half h0 + q / 2, lo (q even) or hi (q odd). */
INLINE T256 void tile256(sr_dtype dt, int mr, int nh, int h0, int nk, const float *xp,
                         const void *panel, float *t, int ldt, int load, const void *next)
{
    __m256 acc[MR256][4];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < 2 * nh; q++) {
            float *tq = t + (size_t)r * ldt + 8 * (h0 + q / 2) + 16 * (q & 1);
            acc[r][q] = load ? _mm256_load_ps(tq) : _mm256_setzero_ps();
        }
    const long rb = (long)NR_BYTES(dt), ks = SR_MAX(0, (nk * rb - PF_BYTES + rb - 1) / rb);
    const char *pf = (const char *)panel + PF_BYTES;
    for (int k = 0; k < nk; k++, xp += mr, pf += rb) {
        if (k == ks) pf = (const char *)next + (ks * rb + PF_BYTES - nk * rb);
        __m256 w[4];
        if (h0 == 0) { /* the first pass over the panel fetches it */
            _mm_prefetch(pf, _MM_HINT_T0);
            if (dt == SR_F32) _mm_prefetch(pf + 64, _MM_HINT_T0);
        }
#pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) wload256(dt, panel, (size_t)k, h0 + hh, &w[2 * hh], &w[2 * hh + 1]);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m256 xv = _mm256_broadcast_ss(xp + r);
#pragma GCC unroll 4
            for (int q = 0; q < 2 * nh; q++) acc[r][q] = _mm256_fmadd_ps(xv, w[q], acc[r][q]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < 2 * nh; q++)
            _mm256_store_ps(t + (size_t)r * ldt + 8 * (h0 + q / 2) + 16 * (q & 1), acc[r][q]);
}

#define TILE256_HALVES(DT, MR) \
    for (int h = 0; h < 2; h++) tile256(DT, MR, 1, h, nk, xp, panel, t, ldt, load, next)
#define TILE256_FN(name, DT)                                                                   \
    T256 static void name(int mr, int nk, const float *xp, const void *panel, float *t,        \
                          int ldt, int load, const void *next)                                 \
    {                                                                                          \
        switch (mr) {                                                                          \
        case 1: tile256(DT, 1, 2, 0, nk, xp, panel, t, ldt, load, next); break;                      \
        case 2: tile256(DT, 2, 2, 0, nk, xp, panel, t, ldt, load, next); break;                      \
        case 3: TILE256_HALVES(DT, 3); break;                                                  \
        case 4: TILE256_HALVES(DT, 4); break;                                                  \
        case 5: TILE256_HALVES(DT, 5); break;                                                  \
        default: TILE256_HALVES(DT, 6); break;                                                 \
        }                                                                                      \
    }
TILE256_FN(tile256_f32, SR_F32)
TILE256_FN(tile256_bf16, SR_BF16)
TILE256_FN(tile256_f16, SR_F16)
TILE256_FN(tile256_i8, SR_I8)
#endif /* GEMM_X86 */

static int tile_rows(int isa) { return isa == ISA_AVX512 ? MR512 : isa == ISA_AVX2 ? MR256 : MRP; }

static int job_rows(const gemm_job *j)
{
    if (j->bf) return j->bfpath == BF_AMX ? MRAMX : j->bfpath == BF_DOT ? MR512 : MRP;
    return tile_rows(j->isa);
}

/* Row tiles of block b: rows [*m0, *m1) in the returned number of tiles of nearly equal height
 * (16 rows: 8 + 8, not 12 + 4); tile_height gives the height of tile i starting at row m. */
static int block_tiles(const gemm_job *j, int b, int *m0, int *m1)
{
    *m0 = b * j->mc;
    *m1 = SR_MIN(*m0 + j->mc, j->M);
    int mr_max = job_rows(j);
    return (*m1 - *m0 + mr_max - 1) / mr_max;
}

static int tile_height(int m, int m1, int i, int n_tiles)
{
    int tiles_left = n_tiles - i;
    return (m1 - m + tiles_left - 1) / tiles_left;
}

/* Pack the rows of block b tile by tile: the tile of mr rows starting at row m goes to
 * xp + m K as [k][mr]. */
static void pack_block(void *ctx, int b)
{
    const gemm_job *j = ctx;
    int m0, m1, n_tiles = block_tiles(j, b, &m0, &m1);
    float *xp = (float *)j->xp;
    for (int i = 0, m = m0; i < n_tiles; i++) {
        int mr = tile_height(m, m1, i, n_tiles);
        if (j->bfpath == BF_AMX) { /* row-major bf16 rows of Kpad at xp + m Kpad */
            for (int r = 0; r < mr; r++) {
                const float *src = j->x + (size_t)(m + r) * j->ldx;
                uint16_t *dst = (uint16_t *)(void *)xp + (size_t)(m + r) * j->Kpad;
                for (int k = 0; k < j->K; k++) dst[k] = x_to_bf16(src[k]);
                memset(dst + j->K, 0, (size_t)(j->Kpad - j->K) * sizeof *dst);
            }
            m += mr;
            continue;
        }
        if (j->bf) { /* bf16 pairs, [k / 2][mr] at xp + m K2 (uint32) */
            uint32_t *dst = (uint32_t *)(void *)xp + (size_t)m * j->K2;
            for (int r = 0; r < mr; r++) {
                const float *src = j->x + (size_t)(m + r) * j->ldx;
                for (int kp = 0; kp < j->K2; kp++) {
                    uint32_t lo = x_to_bf16(src[2 * kp]);
                    uint32_t hi = 2 * kp + 1 < j->K ? x_to_bf16(src[2 * kp + 1]) : 0u;
                    dst[(size_t)kp * mr + r] = lo | hi << 16;
                }
            }
            m += mr;
            continue;
        }
        float *dst = xp + (size_t)m * j->K;
        for (int r = 0; r < mr; r++) {
            const float *src = j->x + (size_t)(m + r) * j->ldx;
            for (int k = 0; k < j->K; k++) dst[(size_t)k * mr + r] = src[k];
        }
        m += mr;
    }
}

static tile_fn pick_tile(int isa, sr_dtype dt, int bf)
{
    static const tile_fn tp[4] = {tilep_f32, tilep_f16, tilep_bf16, tilep_i8};
#if GEMM_X86
    if (bf) return bf == 1 + BF_DOT ? tile512_dbf : tilep_dbf;
    static const tile_fn t512[4] = {tile512_f32, tile512_f16, tile512_bf16, tile512_i8};
    static const tile_fn t256[4] = {tile256_f32, tile256_f16, tile256_bf16, tile256_i8};
    if (isa == ISA_AVX512) return t512[dt];
    if (isa == ISA_AVX2) return t256[dt];
#else
    if (bf) return tilep_dbf;
#endif
    return tp[dt];
}

static void epilogue(const gemm_job *j, float *t, int ldt, int mr, int m0, int n0, int nv)
{
#if GEMM_X86
    if (j->isa != ISA_PORTABLE) {
        epilogue_avx2(j, t, ldt, mr, m0, n0, nv);
        return;
    }
#endif
    epilogue_portable(j, t, ldt, mr, m0, n0, nv);
}

/* The packed activations of the tile of rows from m (mr of them) at k0 (even when bf). */
static const float *xp_at(const gemm_job *j, int m, int mr, int k0)
{
    if (j->bfpath == BF_AMX)
        return (const float *)(const void *)((const uint16_t *)(const void *)j->xp +
                                             (size_t)m * j->Kpad + (size_t)k0);
    if (j->bf)
        return (const float *)(const void *)((const uint32_t *)(const void *)j->xp +
                                             (size_t)m * j->K2 + (size_t)(k0 / 2) * mr);
    return j->xp + (size_t)m * j->K + (size_t)k0 * mr;
}

/* One part: panel group g x row block b. */
static void gemm_part(void *ctx, int part)
{
    const gemm_job *j = ctx;
    const sr_kweight *W = j->W;
    const size_t pb = panel_bytes(W), rb = (size_t)NR * w_elt(W);
    const tile_fn tile = pick_tile(j->isa, W->dtype, j->bf ? 1 + j->bfpath : 0);
    int g = part / j->n_blocks, b = part % j->n_blocks;
    int p0 = g * j->group, p1 = SR_MIN(p0 + j->group, n_panels(W));
    int m0, m1, n_tiles = block_tiles(j, b, &m0, &m1);
    const unsigned char *panels = (const unsigned char *)W->data;
    _Alignas(64) float acc[ACC_FLOATS];
    if (j->n_kb > 1 && n_tiles > 1) {
        /* k blocked: the accumulators of every tile x panel of the part live in acc
         * ([rows of the block][32 per panel]) between k blocks */
        const int ldt = (p1 - p0) * NR;
        for (int kb = 0; kb < j->n_kb; kb++) {
            int k0 = kb * j->kc, nk = SR_MIN(j->kc, j->K - k0);
            for (int i = 0, m = m0; i < n_tiles; i++) {
                int mr = tile_height(m, m1, i, n_tiles);
                const float *xp = xp_at(j, m, mr, k0);
                for (int p = p0; p < p1; p++) {
                    float *t = acc + (size_t)(m - m0) * ldt + (size_t)(p - p0) * NR;
                    /* the stream of the first tile: this k block of the next panel, or the
                     * next k block of the group's first panel */
                    const unsigned char *next =
                        p + 1 < p1 ? panels + (size_t)(p + 1) * pb + (size_t)k0 * rb
                                   : panels + (size_t)p0 * pb + (size_t)(k0 + nk) * rb;
                    const unsigned char *pk = panels + (size_t)p * pb + (size_t)k0 * rb;
                    if (j->bfpath == BF_AMX) tile_amx(mr, nk, xp, j->Kpad, pk, t, ldt, kb > 0);
                    else tile(mr, nk, xp, pk, t, ldt, kb > 0, next);
                    if (kb == j->n_kb - 1) epilogue(j, t, ldt, mr, m, p * NR, SR_MIN(NR, W->n - p * NR));
                }
                m += mr;
            }
        }
        return;
    }
    /* row tile outer, panel inner, all of k at once */
    for (int i = 0, m = m0; i < n_tiles; i++) {
        int mr = tile_height(m, m1, i, n_tiles);
        const float *xp = xp_at(j, m, mr, 0);
        for (int p = p0; p < p1; p++) {
            if (j->bfpath == BF_AMX) tile_amx(mr, j->K, xp, j->Kpad, panels + (size_t)p * pb, acc, NR, 0);
            else tile(mr, j->K, xp, panels + (size_t)p * pb, acc, NR, 0, panels + (size_t)(p + 1) * pb);
            epilogue(j, acc, NR, mr, m, p * NR, SR_MIN(NR, W->n - p * NR));
        }
        m += mr;
    }
}

/* Path override for tests and benchmarks (-1: automatic). */
static int force_isa = -1;

static int isa_available(int isa)
{
#if GEMM_X86
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && sr_cpu_f16c();
    if (isa == ISA_AVX512) return avx2 && __builtin_cpu_supports("avx512f");
    if (isa == ISA_AVX2) return avx2;
#endif
    return isa == ISA_PORTABLE;
}

/* VDPBF16PS (AVX512_BF16), used for bf16 products on the AVX-512 path. */
static int bf16_dot_available(void)
{
#if GEMM_X86
    return isa_available(ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

static int gemm_isa(void)
{
    if (force_isa >= 0) return force_isa;
    return isa_available(ISA_AVX512) ? ISA_AVX512 : isa_available(ISA_AVX2) ? ISA_AVX2 : ISA_PORTABLE;
}

static const char *const isa_names[] = {"portable", "avx2", "avx512"};

/* Path hooks (cpu_impl.h). */

int sr_cpu_gemm_force_isa(const char *name)
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

const char *sr_cpu_gemm_isa(void) { return isa_names[gemm_isa()]; }

static int force_bf = -1;
static const char *const bf_names[] = {"portable", "avx512_bf16", "amx"};

static int bf_available(int path)
{
    return path == BF_AMX ? amx_available() : path == BF_DOT ? bf16_dot_available() : 1;
}

static int bf_path(void)
{
    if (force_bf >= 0) return force_bf;
    return amx_available() ? BF_AMX : bf16_dot_available() ? BF_DOT : BF_PORTABLE;
}

int sr_cpu_gemm_force_bf16(const char *name)
{
    if (!name) {
        force_bf = -1;
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, bf_names[i])) {
            if (!bf_available(i)) return -1;
            force_bf = i;
            return 0;
        }
    return -1;
}

const char *sr_cpu_gemm_bf16_path(void) { return bf_names[bf_path()]; }

/* Blocking of a product (file comment): k blocks, panel groups, row blocks. */
static void plan(gemm_job *j, int threads)
{
    const sr_kweight *W = j->W;
    const int np = n_panels(W), mr_max = tile_rows(j->isa), M = j->M, K = j->K;
    const size_t pb = panel_bytes(W);
    int group, mc;
    j->n_kb = 1;
    j->kc = K;
    if (K > KC_MAX && M > mr_max) {
        j->n_kb = (K + KC_MAX - 1) / KC_MAX;
        j->kc = (K + j->n_kb - 1) / j->n_kb;
        if (j->bf && j->kc % KAMX) { /* k blocks of whole AMX steps (and pairs) */
            j->kc += KAMX - j->kc % KAMX;
            j->n_kb = (K + j->kc - 1) / j->kc;
        }
        /* a k block of the group's weights in L2; the accumulators of a part in acc */
        group = (int)SR_MAX((size_t)1, PART_BYTES / ((size_t)j->kc * NR * w_elt(W)));
        group = SR_MIN(group, ACC_FLOATS / (NR * mr_max));
        mc = ACC_FLOATS / (group * NR);
    } else {
        group = (int)SR_MAX((size_t)1, PART_BYTES / pb);
        mc = (int)SR_MAX((size_t)mr_max, XBLOCK_BYTES / ((size_t)K * sizeof(float)));
    }
    j->n_blocks = (M + mc - 1) / mc;
    j->mc = (M + j->n_blocks - 1) / j->n_blocks; /* balanced, never above mc */
    /* at least 4 parts per thread where the panels allow */
    int n_groups = (np + group - 1) / group;
    if (threads > 1)
        n_groups = SR_MAX(n_groups, SR_MIN(np, (4 * threads + j->n_blocks - 1) / j->n_blocks));
    j->group = (np + n_groups - 1) / n_groups;
    j->n_groups = (np + j->group - 1) / j->group;
}

sr_status sr_cpu_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                      sr_act act, float alpha, float beta, float *y, int ldy)
{
    sr_status st = sr_kernels_check_gemm(M, x, ldx, W, act, y, ldy);
    if (st || M == 0) return st;

    gemm_job j = {.M = M, .K = W->k, .N = W->n, .ldx = ldx, .ldy = ldy, .x = x, .W = W,
                  .bias = bias, .act = act, .alpha = alpha, .beta = beta, .y = y,
                  .isa = gemm_isa(), .bf = W->mul == SR_KMUL_BF16, .K2 = (W->k + 1) / 2};
    /* bf16 products: AMX, else the AVX512_BF16 tile, else the portable one (file comment) */
    if (j.bf) {
        j.bfpath = bf_path();
        j.isa = j.bfpath == BF_PORTABLE ? ISA_PORTABLE : ISA_AVX512; /* the epilogue's */
        j.Kpad = (int)k_rows(W);
    }
    int threads = sr_cpu_threads();
    double fma = (double)M * (double)W->n * (double)W->k;
    if ((double)n_panels(W) * (double)panel_bytes(W) < MIN_PAR_BYTES && fma < MIN_PAR_FMA) threads = 1;
    plan(&j, threads);
    /* one row needs no packing: [k][1] is the row itself (not so for bf16 pairs) */
    float *pack = NULL;
    if (M > 1 || j.bf) {
        /* a uint32 pair is a float's size; AMX: bf16 rows of Kpad and MRAMX rows of slack
         * (read by the last tile's full 16-row loads, zeroed) */
        size_t bytes = j.bfpath == BF_AMX ? ((size_t)M + MRAMX) * (size_t)j.Kpad * 2
                       : (size_t)M * (j.bf ? (size_t)j.K2 : (size_t)W->k) * sizeof(float);
        pack = malloc(bytes);
        if (!pack) return sr_error(SR_ERR_NOMEM, "gemm: %d x %d packed activations", M, W->k);
        j.xp = pack;
        if (j.bfpath == BF_AMX)
            memset((uint16_t *)(void *)pack + (size_t)M * j.Kpad, 0, (size_t)MRAMX * j.Kpad * 2);
        sr_cpu_parallel(threads, j.n_blocks, pack_block, &j);
    } else {
        j.xp = x;
    }
    sr_cpu_parallel(threads, j.n_groups * j.n_blocks, gemm_part, &j);
    free(pack);
    return SR_OK;
}

/* ---- gather ------------------------------------------------------------------------------ */

sr_status sr_cpu_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy)
{
    sr_status st = sr_kernels_check_gather(E, ids, n, y, ldy);
    if (st || n == 0) return st;
    const size_t K = (size_t)E->k, pb = panel_bytes(E);
    for (int i = 0; i < n; i++) {
        int r = ids[i];
        const unsigned char *panel = (const unsigned char *)E->data + (size_t)(r / NR) * pb;
        size_t pos = (size_t)panel_pos(E->dtype, r % NR);
        float *yr = y + (size_t)i * ldy;
        if (E->mul == SR_KMUL_BF16) { /* pair layout; an i8 weight's q times its scale */
            const float s = E->dtype == SR_I8 ? E->scale[r] : 1.0f;
            for (size_t k = 0; k < K; k++) {
                float v = sr_bf16_to_f32(((const uint16_t *)(const void *)panel)[panel_at(E, r % NR, k)]);
                yr[k] = E->dtype == SR_I8 ? v * s : v;
            }
            continue;
        }
        switch (E->dtype) {
        case SR_F32:
            for (size_t k = 0; k < K; k++) yr[k] = ((const float *)(const void *)panel)[k * NR + pos];
            break;
        case SR_BF16:
            for (size_t k = 0; k < K; k++)
                yr[k] = sr_bf16_to_f32(((const uint16_t *)(const void *)panel)[k * NR + pos]);
            break;
        case SR_F16:
            for (size_t k = 0; k < K; k++)
                yr[k] = sr_f16_to_f32(((const uint16_t *)(const void *)panel)[k * NR + pos]);
            break;
        default: {
            const float s = E->scale[r];
            for (size_t k = 0; k < K; k++)
                yr[k] = (float)((const int8_t *)(const void *)panel)[k * NR + pos] * s;
            break;
        }
        }
    }
    return SR_OK;
}
