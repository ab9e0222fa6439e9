/*
 * lowp.h — products with low-precision weight matrices on host memory (CPU): a Linear layer
 * y = x · W^T whose weight W [N, K] is stored as bfloat16 and stays so, computed in f32.
 *
 * Two regimes, chosen by the number of activation rows M:
 *   - few rows (M <= SR_LOWP_DIRECT_ROWS: batch-1 decoding, one 80 ms encoder step) — the
 *     direct kernel reads each bf16 weight once, widens it in registers (a 16-bit shift) and
 *     accumulates M dot products in f32; no f32 copy of any weight exists. Work is split over
 *     the output rows N among worker threads (a small persistent pthread pool, the caller
 *     working too). Implementations: portable C (the reference) and AVX2 + FMA, picked at run
 *     time from the CPU's features (SR_LOWP_AUTO).
 *   - many rows (prefill, offline) — a tile of W rows is widened to f32 (vectorisable shift)
 *     and multiplied by the kernel table's sgemm, whose blocking wins once the weights are
 *     reused over enough rows.
 *
 * Accumulation: f32 sums of the products (rounded once per term with FMA, twice without), so
 * each output satisfies |y - y_exact| <= (K + 3) eps (sum_k |x_k w_k| + |beta y|), the bound
 * tests/test_lowp.c checks, as the sgemm test does.
 *
 * Thread-safety: any number of threads may call these at once; the pool runs one product at a
 * time and a caller that finds it busy computes its product alone (concurrent streams then use
 * one core each).
 */
#ifndef SR_LOWP_H
#define SR_LOWP_H

#include "kernels.h"

#include <stddef.h>
#include <stdint.h>

/* Largest M that sr_bf16_gemm sends to the direct kernel. */
#define SR_LOWP_DIRECT_ROWS 4

typedef enum {
    SR_LOWP_AUTO = 0,     /* the fastest available here */
    SR_LOWP_PORTABLE = 1, /* plain C, any CPU */
    SR_LOWP_AVX2 = 2,     /* x86-64 AVX2 + FMA */
} sr_lowp_impl;

/* 1 when impl runs on this CPU (AUTO and PORTABLE always do). */
int sr_lowp_available(sr_lowp_impl impl);

/* What AUTO resolves to here: "avx2" or "portable". */
const char *sr_lowp_auto_name(void);

/* Threads used when a call passes threads <= 0: OPENBLAS_NUM_THREADS when set (> 0), else the
 * online CPUs, at most 64 (the same count the CPU table's OpenBLAS defaults to). */
int sr_lowp_default_threads(void);

/* Direct product, any M >= 0 (rows of x taken SR_LOWP_DIRECT_ROWS at a time, so W is read
 * ceil(M / 4) times): y[m, n] = sum_k x[m, k] w[n, k] + beta y[m, n] for m < M, n < N.
 * x [M, K] f32 with row stride ldx >= K, w [N, K] bf16 with row stride ldw >= K, y [M, N] f32
 * with row stride ldy >= N. beta = 0 overwrites y (NaN there included). threads <= 0: the
 * default; the count actually used also shrinks for small products. SR_ERR_ARG for negative
 * sizes, short strides, NULL operands or impl unknown; SR_ERR_UNSUPPORTED for an impl this CPU
 * lacks. */
sr_status sr_bf16_gemm_direct(sr_lowp_impl impl, int threads, int M, int N, int K,
                              const float *x, int ldx, const uint16_t *w, int ldw, float beta,
                              float *y, int ldy);

/* Values product (attention over a bf16 V cache): y[m, n] = sum_k x[m, k] w[k, n] + beta y[m, n]
 * with w [K, N] bf16 row-major, row stride ldw >= N (not transposed). One thread; f32 sums in k
 * order, the same bound. Arguments as for the direct product (ldw checked against N). */
sr_status sr_bf16_gemm_nn(sr_lowp_impl impl, int M, int N, int K, const float *x, int ldx,
                          const uint16_t *w, int ldw, float beta, float *y, int ldy);

/* The Linear-layer entry on host memory: the direct kernel (AUTO) for M <= SR_LOWP_DIRECT_ROWS,
 * otherwise rows of w widened into tile (tile_floats >= K floats of scratch, as many whole rows
 * at a time as fit) and multiplied by k->sgemm. Same contract as the direct product. k must be
 * the CPU table (the widening runs on the host): any other is SR_ERR_UNSUPPORTED. */
sr_status sr_bf16_gemm(const sr_kernels *k, int threads, int M, int N, int K, const float *x,
                       int ldx, const uint16_t *w, int ldw, float beta, float *y, int ldy,
                       float *tile, size_t tile_floats);

#endif /* SR_LOWP_H */
