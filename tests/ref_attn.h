/*
 * ref_attn.h — plain double-precision reference of the attention op (kernels.h: sr_kattn,
 * sr_kattn_fn), used only by the tests (tests/test_ops_attn.c), with a sound bound on the
 * error an f32 implementation of the contract may make. It reads the pools element by element
 * (ring row = position % rows, widened exactly), never through the CPU table's code.
 */
#ifndef SR_REF_ATTN_H
#define SR_REF_ATTN_H

#include "../kernels/kernels.h"

/* The attention contract in double for every row of the batch: out[r * ldr + h * hd + d]
 * (dense, ldr = n_head * head_dim); an empty range gives 0. Scores, softmax and the weighted
 * sum are formed in double from the f32 inputs (q + u and q + v exactly, not rounded to f32).
 * bound (same layout, may be NULL) receives the error allowed for an f32 computation:
 *   u = 2^-24, n = keys in the range, A_j = sum_d |q + u| |k_j| (+ sum_d |q + v| |P(p - j)|)
 *   delta_j = 1.01 u ((hd + 1) |scale| A_j + 2 |s_j|)         score error (f32 dot, q + u,
 *                                                               the rel add, the scale)
 *   Theta   = max_j delta_j + u (|s_j - m| + 2 max delta) + 4.1 u   per-weight log error
 *             (the rounded s - max and exp's <= 2 ulp)
 *   bound_d = ((e^(2 Theta) - 1) + 1.01 (n + 3) u e^(2 Theta)) sum_j p_j |v_jd|
 *             + n 1e-37 max_j |v_jd|                           (f32 sum of n products, the
 *                                                               1 / sum, the final product;
 *                                                               exp's underflow to 0)
 * Every weight's relative error is within e^(+-2 Theta) after normalisation, so the weighted
 * sum errs by at most (e^(2 Theta) - 1) sum p |v|; the f32 accumulation adds gamma_n of the
 * perturbed sum. Rows must satisfy the op's argument rules (not checked here). */
void ref_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq, const sr_kpool *K,
              const sr_kpool *V, int layer, double *out, double *bound);

/* Exact value of element (layer, slot, ring row, column) of a pool. */
double ref_pool_at(const sr_kpool *p, int layer, int slot, int row, int col);

#include "../kernels/cpu/cpu_impl.h" /* the path hooks: sr_cpu_attn_force_isa / sr_cpu_attn_isa */

#endif /* SR_REF_ATTN_H */
