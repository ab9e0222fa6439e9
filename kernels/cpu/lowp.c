/*
 * lowp.c — bf16-weight products on the CPU (kernels/lowp.h).
 *
 * Direct kernel: for a block of MR <= 4 activation rows and NR weight rows, one pass over k
 * loads 8 bf16 weights per row (16 bytes), widens them to f32 by zero-extending to 32 bits and
 * shifting left by 16 (bf16 is the upper half of an f32), and FMAs them with the 8 matching
 * activations of each of the MR rows into MR x NR vector accumulators, reduced horizontally at
 * the end; the k % 8 tail is scalar. NR = 4 for MR <= 2 and 2 for MR = 3, 4 keeps the
 * accumulators plus operands within the 16 AVX2 registers. The activations (<= 4 rows of K
 * floats) stay in L1/L2 while the weights stream from memory once, so the product runs at
 * memory bandwidth. The portable kernel is the same loop nest in scalar C (one f32 sum per
 * output) and is the reference the AVX2 one is tested against.
 *
 * Threads: the N output rows are cut into parts of a few hundred KB of weights; the caller and
 * up to threads - 1 pool workers take parts from an atomic counter until none is left, so a
 * worker delayed by another process leaves its share to the others. Workers are started on
 * first use and sleep on a condition variable between products; one product runs at a time
 * (a busy pool makes a second caller work alone). Once the caller finds every part taken it
 * withdraws the job and waits only for the workers inside a part, never for one that has not
 * woken up yet (on a loaded machine that wait would cost a scheduler slice per product).
 *
 * Tile path (many rows): rows of W are widened into the caller's tile with sr_bf16_to_f32_n
 * and multiplied by the table's sgemm.
 *
 * Values product (x · W, W [K, N] not transposed: a bf16 attention V cache): per output row,
 * blocks of 64 columns keep 8 vector accumulators while k runs over the rows of W, each row
 * contributing broadcast(x[k]) * widen(W[k, block]); 8-column blocks and scalar columns take
 * the rest. Single-threaded: one head's attention over a cache is a small product.
 */
#include "../../core/dtype.h"
#include "../../core/internal.h"
#include "../lowp.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOWP_X86 1
#else
#define LOWP_X86 0
#endif

#define LOWP_MAX_THREADS 64
#define LOWP_PART_BYTES (192 * 1024) /* bf16 weight bytes per part handed to a thread */
#define LOWP_MIN_PAR (64 * 1024)     /* weights (elements) below which one thread does it all */

/* One product: the operands, the kernel, and the part counter the threads share. */
typedef struct lowp_job {
    void (*rows)(const struct lowp_job *j, int n0, int n1); /* output rows [n0, n1) */
    int M, N, K, ldx, ldw, ldy;
    const float *x;
    const uint16_t *w;
    float beta;
    float *y;
    int part;        /* output rows per part */
    atomic_int next; /* next part to take */
} lowp_job;

static inline float store_val(float acc, float beta, const float *y)
{
    return beta == 0.0f ? acc : acc + beta * *y;
}

/* ---- portable kernel ------------------------------------------------------------------------ */

static void rows_portable(const lowp_job *j, int n0, int n1)
{
    for (int m = 0; m < j->M; m++) {
        const float *x = j->x + (size_t)m * j->ldx;
        float *y = j->y + (size_t)m * j->ldy;
        for (int n = n0; n < n1; n++) {
            const uint16_t *w = j->w + (size_t)n * j->ldw;
            float s = 0.0f;
            for (int k = 0; k < j->K; k++) s += x[k] * sr_bf16_to_f32(w[k]);
            y[n] = store_val(s, j->beta, &y[n]);
        }
    }
}

/* ---- AVX2 + FMA kernel ---------------------------------------------------------------------- */

#if LOWP_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

AVX2_INLINE __m256 widen8(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2_INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* MR activation rows x NR weight rows starting at row n; MR, NR compile-time constants at
 * every call, so the loops unroll and the accumulators live in registers. */
AVX2_INLINE void block_avx2(const lowp_job *j, const float *x, float *y, int MR, int NR, int n)
{
    const int K = j->K, K8 = K & ~7;
    const size_t ldx = (size_t)j->ldx, ldw = (size_t)j->ldw, ldy = (size_t)j->ldy;
    const uint16_t *w = j->w + (size_t)n * ldw;
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (int m = 0; m < MR; m++)
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) acc[m][r] = _mm256_setzero_ps();
    for (int k = 0; k < K8; k += 8) {
        __m256 xv[4];
#pragma GCC unroll 4
        for (int m = 0; m < MR; m++) xv[m] = _mm256_loadu_ps(x + m * ldx + k);
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
            __m256 wv = widen8(w + r * ldw + k);
#pragma GCC unroll 4
            for (int m = 0; m < MR; m++) acc[m][r] = _mm256_fmadd_ps(xv[m], wv, acc[m][r]);
        }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MR; m++)
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
            float s = hsum8(acc[m][r]);
            for (int k = K8; k < K; k++) s += x[m * ldx + k] * sr_bf16_to_f32(w[r * ldw + k]);
            float *o = y + m * ldy + n + r;
            *o = store_val(s, j->beta, o);
        }
}

AVX2 static void rows_avx2(const lowp_job *j, int n0, int n1)
{
    for (int m0 = 0; m0 < j->M; m0 += 4) {
        const float *x = j->x + (size_t)m0 * j->ldx;
        float *y = j->y + (size_t)m0 * j->ldy;
        int n = n0;
        switch (SR_MIN(4, j->M - m0)) {
        case 1:
            for (; n + 4 <= n1; n += 4) block_avx2(j, x, y, 1, 4, n);
            for (; n < n1; n++) block_avx2(j, x, y, 1, 1, n);
            break;
        case 2:
            for (; n + 4 <= n1; n += 4) block_avx2(j, x, y, 2, 4, n);
            for (; n < n1; n++) block_avx2(j, x, y, 2, 1, n);
            break;
        case 3:
            for (; n + 2 <= n1; n += 2) block_avx2(j, x, y, 3, 2, n);
            for (; n < n1; n++) block_avx2(j, x, y, 3, 1, n);
            break;
        default:
            for (; n + 2 <= n1; n += 2) block_avx2(j, x, y, 4, 2, n);
            for (; n < n1; n++) block_avx2(j, x, y, 4, 1, n);
            break;
        }
    }
}
#endif

/* ---- values product (w not transposed) ------------------------------------------------------ */

static void nn_portable(int M, int N, int K, const float *x, int ldx, const uint16_t *w, int ldw,
                        float beta, float *y, int ldy)
{
    for (int m = 0; m < M; m++) {
        float *yr = y + (size_t)m * ldy;
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += x[(size_t)m * ldx + k] * sr_bf16_to_f32(w[(size_t)k * ldw + n]);
            yr[n] = store_val(s, beta, &yr[n]);
        }
    }
}

#if LOWP_X86
/* NB vectors of 8 columns from column n: one pass over k keeps NB accumulators. */
AVX2_INLINE void nn_block_avx2(int NB, int K, const float *x, const uint16_t *w, size_t ldw,
                               float beta, float *y, int n)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < NB; i++) acc[i] = _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m256 a = _mm256_broadcast_ss(x + k);
        const uint16_t *wr = w + (size_t)k * ldw + n;
#pragma GCC unroll 8
        for (int i = 0; i < NB; i++) acc[i] = _mm256_fmadd_ps(a, widen8(wr + 8 * i), acc[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < NB; i++) {
        __m256 r = acc[i];
        if (beta != 0.0f)
            r = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(y + n + 8 * i), r);
        _mm256_storeu_ps(y + n + 8 * i, r);
    }
}

AVX2 static void nn_avx2(int M, int N, int K, const float *x, int ldx, const uint16_t *w, int ldw,
                         float beta, float *y, int ldy)
{
    for (int m = 0; m < M; m++) {
        const float *xr = x + (size_t)m * ldx;
        float *yr = y + (size_t)m * ldy;
        int n = 0;
        for (; n + 64 <= N; n += 64) nn_block_avx2(8, K, xr, w, (size_t)ldw, beta, yr, n);
        for (; n + 8 <= N; n += 8) nn_block_avx2(1, K, xr, w, (size_t)ldw, beta, yr, n);
        for (; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += xr[k] * sr_bf16_to_f32(w[(size_t)k * ldw + n]);
            yr[n] = store_val(s, beta, &yr[n]);
        }
    }
}
#endif

int sr_lowp_available(sr_lowp_impl impl)
{
    switch (impl) {
    case SR_LOWP_AUTO:
    case SR_LOWP_PORTABLE: return 1;
    case SR_LOWP_AVX2:
#if LOWP_X86
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        return 0;
#endif
    }
    return 0;
}

const char *sr_lowp_auto_name(void)
{
    return sr_lowp_available(SR_LOWP_AVX2) ? "avx2" : "portable";
}

int sr_lowp_default_threads(void)
{
    const char *e = getenv("OPENBLAS_NUM_THREADS");
    long n = e ? strtol(e, NULL, 10) : 0;
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    return (int)SR_MIN(n, LOWP_MAX_THREADS);
}

/* ---- thread pool ----------------------------------------------------------------------------- */

static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER; /* held by the running product */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* guards the fields below */
static pthread_cond_t pool_go = PTHREAD_COND_INITIALIZER, pool_done = PTHREAD_COND_INITIALIZER;
static int pool_started;           /* workers running */
static unsigned long pool_gen;     /* incremented per product */
static lowp_job *pool_job;
static int pool_want;              /* workers 0 .. want-1 may take part in the current product */
static int pool_inside;            /* workers inside the current product's parts */

static void run_parts(lowp_job *j)
{
    for (;;) {
        int p = atomic_fetch_add(&j->next, 1);
        int n0 = p * j->part;
        if (n0 >= j->N) return;
        j->rows(j, n0, SR_MIN(j->N, n0 + j->part));
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool_mu);
    for (;;) {
        while (pool_gen == seen) pthread_cond_wait(&pool_go, &pool_mu);
        seen = pool_gen;
        lowp_job *j = pool_job;
        if (!j || id >= pool_want) continue; /* none, or the caller already took every part */
        pool_inside++;
        pthread_mutex_unlock(&pool_mu);
        run_parts(j);
        pthread_mutex_lock(&pool_mu);
        if (--pool_inside == 0) pthread_cond_signal(&pool_done);
    }
    return NULL;
}

/* Run j on the caller plus up to helpers pool workers. */
static void run_job(lowp_job *j, int helpers)
{
    if (helpers > 0 && pthread_mutex_trylock(&pool_busy) == 0) {
        pthread_mutex_lock(&pool_mu);
        while (pool_started < helpers) {
            pthread_t t;
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            int rc = pthread_create(&t, &at, worker, (void *)(intptr_t)pool_started);
            pthread_attr_destroy(&at);
            if (rc) break; /* fewer helpers: the parts still all get done */
            pool_started++;
        }
        helpers = SR_MIN(helpers, pool_started);
        pool_job = j;
        pool_want = helpers;
        pool_gen++;
        pthread_cond_broadcast(&pool_go);
        pthread_mutex_unlock(&pool_mu);
        run_parts(j);
        /* every part is taken: withdraw the job so that workers not yet awake skip it, and
         * wait only for those still inside a part (a descheduled worker costs no wait) */
        pthread_mutex_lock(&pool_mu);
        pool_job = NULL;
        while (pool_inside > 0) pthread_cond_wait(&pool_done, &pool_mu);
        pthread_mutex_unlock(&pool_mu);
        pthread_mutex_unlock(&pool_busy);
        return;
    }
    run_parts(j);
}

/* ---- entry points ---------------------------------------------------------------------------- */

static sr_status check_args(const char *fn, int M, int N, int K, const float *x, int ldx,
                            const uint16_t *w, int ldw, const float *y, int ldy)
{
    if (M < 0 || N < 0 || K < 0)
        return sr_error(SR_ERR_ARG, "%s: negative size (M = %d, N = %d, K = %d)", fn, M, N, K);
    if (ldx < SR_MAX(1, K))
        return sr_error(SR_ERR_ARG, "%s: ldx = %d < K = %d", fn, ldx, K);
    if (ldw < SR_MAX(1, K))
        return sr_error(SR_ERR_ARG, "%s: ldw = %d < K = %d", fn, ldw, K);
    if (ldy < SR_MAX(1, N))
        return sr_error(SR_ERR_ARG, "%s: ldy = %d < N = %d", fn, ldy, N);
    if (M > 0 && N > 0 && (!y || (K > 0 && (!x || !w))))
        return sr_error(SR_ERR_ARG, "%s: %s is NULL for a [%d, %d] x [%d, %d]^T product", fn,
                        !y ? "y" : !x ? "x" : "w", M, K, N, K);
    return SR_OK;
}

sr_status sr_bf16_gemm_direct(sr_lowp_impl impl, int threads, int M, int N, int K,
                              const float *x, int ldx, const uint16_t *w, int ldw, float beta,
                              float *y, int ldy)
{
    sr_status st = check_args("sr_bf16_gemm_direct", M, N, K, x, ldx, w, ldw, y, ldy);
    if (st) return st;
    if (impl != SR_LOWP_AUTO && impl != SR_LOWP_PORTABLE && impl != SR_LOWP_AVX2)
        return sr_error(SR_ERR_ARG, "sr_bf16_gemm_direct: implementation %d unknown", (int)impl);
    if (!sr_lowp_available(impl))
        return sr_error(SR_ERR_UNSUPPORTED, "sr_bf16_gemm_direct: this CPU lacks AVX2 + FMA");
    if (M == 0 || N == 0) return SR_OK;
    lowp_job j = {.M = M, .N = N, .K = K, .ldx = ldx, .ldw = ldw, .ldy = ldy, .x = x, .w = w,
                  .beta = beta, .y = y, .rows = rows_portable};
#if LOWP_X86
    if (impl == SR_LOWP_AVX2 || (impl == SR_LOWP_AUTO && sr_lowp_available(SR_LOWP_AVX2)))
        j.rows = rows_avx2;
#endif
    if (threads <= 0) threads = sr_lowp_default_threads();
    threads = SR_MIN(threads, LOWP_MAX_THREADS);
    size_t elems = (size_t)N * (size_t)K;
    if (elems < LOWP_MIN_PAR) threads = 1;
    /* parts of ~LOWP_PART_BYTES of weights, a multiple of 4 rows, at least one per thread */
    size_t part = LOWP_PART_BYTES / (2 * (size_t)SR_MAX(K, 1));
    part = SR_MAX(part, 4);
    part = SR_MIN(part, ((size_t)N + (size_t)threads - 1) / (size_t)threads);
    part = (part + 3) & ~(size_t)3;
    j.part = (int)SR_MAX(part, 1);
    atomic_init(&j.next, 0);
    int parts = (N + j.part - 1) / j.part;
    run_job(&j, SR_MIN(threads, parts) - 1);
    return SR_OK;
}

sr_status sr_bf16_gemm_nn(sr_lowp_impl impl, int M, int N, int K, const float *x, int ldx,
                          const uint16_t *w, int ldw, float beta, float *y, int ldy)
{
    const char *fn = "sr_bf16_gemm_nn";
    if (M < 0 || N < 0 || K < 0)
        return sr_error(SR_ERR_ARG, "%s: negative size (M = %d, N = %d, K = %d)", fn, M, N, K);
    if (ldx < SR_MAX(1, K)) return sr_error(SR_ERR_ARG, "%s: ldx = %d < K = %d", fn, ldx, K);
    if (ldw < SR_MAX(1, N)) return sr_error(SR_ERR_ARG, "%s: ldw = %d < N = %d", fn, ldw, N);
    if (ldy < SR_MAX(1, N)) return sr_error(SR_ERR_ARG, "%s: ldy = %d < N = %d", fn, ldy, N);
    if (M > 0 && N > 0 && (!y || (K > 0 && (!x || !w))))
        return sr_error(SR_ERR_ARG, "%s: %s is NULL for a [%d, %d] x [%d, %d] product", fn,
                        !y ? "y" : !x ? "x" : "w", M, K, K, N);
    if (impl != SR_LOWP_AUTO && impl != SR_LOWP_PORTABLE && impl != SR_LOWP_AVX2)
        return sr_error(SR_ERR_ARG, "%s: implementation %d unknown", fn, (int)impl);
    if (!sr_lowp_available(impl))
        return sr_error(SR_ERR_UNSUPPORTED, "%s: this CPU lacks AVX2 + FMA", fn);
    if (M == 0 || N == 0) return SR_OK;
#if LOWP_X86
    if (impl == SR_LOWP_AVX2 || (impl == SR_LOWP_AUTO && sr_lowp_available(SR_LOWP_AVX2))) {
        nn_avx2(M, N, K, x, ldx, w, ldw, beta, y, ldy);
        return SR_OK;
    }
#endif
    nn_portable(M, N, K, x, ldx, w, ldw, beta, y, ldy);
    return SR_OK;
}

sr_status sr_bf16_gemm(const sr_kernels *k, int threads, int M, int N, int K, const float *x,
                       int ldx, const uint16_t *w, int ldw, float beta, float *y, int ldy,
                       float *tile, size_t tile_floats)
{
    if (k != sr_kernels_cpu())
        return sr_error(SR_ERR_UNSUPPORTED, "sr_bf16_gemm: bf16 weights are multiplied on the "
                        "host; the %s table is not supported", k ? k->name : "(null)");
    if (M <= SR_LOWP_DIRECT_ROWS)
        return sr_bf16_gemm_direct(SR_LOWP_AUTO, threads, M, N, K, x, ldx, w, ldw, beta, y, ldy);
    sr_status st = check_args("sr_bf16_gemm", M, N, K, x, ldx, w, ldw, y, ldy);
    if (st) return st;
    if (M == 0 || N == 0) return SR_OK;
    if (!tile || tile_floats < (size_t)SR_MAX(K, 1))
        return sr_error(SR_ERR_ARG, "sr_bf16_gemm: tile of %zu floats, a row needs %d", tile_floats,
                        K);
    int R = (int)SR_MIN(tile_floats / (size_t)SR_MAX(K, 1), (size_t)N);
    for (int r0 = 0; r0 < N; r0 += R) {
        int rr = SR_MIN(R, N - r0);
        for (int r = 0; r < rr; r++)
            sr_bf16_to_f32_n(w + (size_t)(r0 + r) * ldw, tile + (size_t)r * K, (size_t)K);
        if ((st = k->sgemm(0, 1, M, rr, K, 1.0f, x, ldx, tile, SR_MAX(K, 1), beta, y + r0, ldy)))
            return st;
    }
    return SR_OK;
}
