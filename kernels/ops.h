/*
 * ops.h — row-wise and element-wise operations shared by the backends, on host memory: the CPU
 * reference implementations that a device table's kernels are checked against. Accumulations
 * run in double where the references (PyTorch) effectively keep more precision than a naive
 * float loop, so parity tolerances stay small. All are thread-safe and allocation-free.
 */
#ifndef SR_OPS_H
#define SR_OPS_H

#include <stddef.h>

/* y[r] = (x[r] - mean) / sqrt(var + eps) * g + b over n rows of width d (biased variance, as
 * torch.nn.LayerNorm). x and y may alias. */
void sr_layernorm(const float *x, int n, int d, const float *g, const float *b, float eps, float *y);

/* y[r] = g * x[r] / sqrt(mean(x[r]^2) + eps) over n rows of width d (Mistral / Voxtral RMSNorm).
 * x and y may alias. */
void sr_rmsnorm(const float *x, int n, int d, const float *g, float eps, float *y);

/* Exact (erf) GELU in place, as torch.nn.functional.gelu's default. */
void sr_gelu_erf(float *x, size_t n);

/* SiLU / Swish x * sigmoid(x) in place. */
void sr_silu(float *x, size_t n);

/* Softmax of row[0, lim) in place (max subtracted first); row[lim, n) set to 0. lim <= 0 clears
 * the row; lim > n is taken as n. */
void sr_softmax(float *row, int lim, int n);

/* Whether softmax / GELU / SiLU take the AVX2 + FMA path on this CPU (ops.c says how the two
 * paths differ). sr_ops_force_portable(1) selects the portable libm path for every later call:
 * for tests and benchmarks only — it is a process-wide switch, not thread-safe. */
int sr_ops_simd(void);
void sr_ops_force_portable(int on);

#endif /* SR_OPS_H */
