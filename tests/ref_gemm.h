/*
 * ref_gemm.h — plain double-precision references of the Linear op set (kernels.h: weight_create,
 * gemm, gather), used only by the tests (tests/test_ops_gemm.c). They read the host [n, k]
 * weight as given to weight_create, never the table's packed layout, so a layout mistake
 * cannot cancel out.
 */
#ifndef SR_REF_GEMM_H
#define SR_REF_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/kernels.h"

/* w[r * k + c] = the exact value of host element (r, c) of a [n, k] weight of dtype dt:
 * f32 as is, bf16 / f16 (uint16 bits) widened, i8 q * scale[r] (exact in double). */
void ref_weight_widen(const void *host, sr_dtype dt, int n, int k, const float *scale, double *w);

/* Exact-formula activation in double: GELU 0.5 t (1 + erf(t / sqrt 2)), SiLU t / (1 + e^-t),
 * ReLU max(t, 0), NONE t. */
double ref_act(sr_act act, double t);

/* The gemm contract in double for m < M, n < N (outputs [M, N], dense):
 *   pre[m, n] = sum_k x[m, k] w[n, k] + bias[n]      (bias NULL: 0)
 *   mag[m, n] = sum_k |x[m, k] w[n, k]| + |bias[n]|   (the scale of the rounding error)
 *   act[m, n] = ref_act(act, pre)
 *   y[m, n]   = alpha act + beta y0[m, n]           (beta = 0: alpha act, y0 not read)
 * x stride ldx, y0 stride ldy; w as from ref_weight_widen. Any of pre / mag / actv may be NULL. */
void ref_gemm(int M, int N, int K, const float *x, int ldx, const double *w, const float *bias,
              sr_act act, double alpha, double beta, const float *y0, int ldy, double *y,
              double *pre, double *mag, double *actv);

/* bf16 products (SR_KMUL_BF16): w[i] with |w| < FLT_MIN set to zero (subnormal weights
 * count as zero); x[m, k] (m < M, k < K, stride ldx) replaced in place by the bf16 operand
 * the contract multiplies: subnormals to zero, then rounded to nearest even (NaN stays NaN). */
void ref_daz(double *w, size_t n);
void ref_x_bf16(int M, int K, float *x, int ldx);

/* y[i * k + c] = w[ids[i] * k + c] for i < cnt (ids assumed in range). */
void ref_gather(const double *w, int k, const int32_t *ids, int cnt, double *y);

#include "../kernels/cpu/cpu_impl.h" /* the path hooks: sr_cpu_gemm_force_isa / sr_cpu_gemm_isa */

#endif /* SR_REF_GEMM_H */
