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

#endif /* SR_OPS_H */
