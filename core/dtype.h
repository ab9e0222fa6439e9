/*
 * dtype.h — element-type helpers (internal): IEEE binary16 (f16) and bfloat16 (bf16)
 * conversions to and from f32, one value or whole arrays, and per-row int8 dequantization.
 * Used by the HDF5 loader (core/weights.c) and by the kernels. sr_dtype_name / sr_dtype_size
 * are public (core/sr.h) and implemented in core/dtype.c as well.
 *
 * Rounding: f32 -> f16 and f32 -> bf16 round to nearest, ties to even (what numpy's
 * astype(float16) and torch's .to(bfloat16) do). Values beyond the target range become
 * +-Inf; f16 subnormals are produced and read exactly; NaN stays NaN (quiet, sign kept, payload
 * kept where it fits). f16 -> f32 and bf16 -> f32 are exact.
 */
#ifndef SR_DTYPE_H
#define SR_DTYPE_H

#include "sr.h"

#include <stddef.h>
#include <stdint.h>

float sr_f16_to_f32(uint16_t h);
uint16_t sr_f32_to_f16(float f);
float sr_bf16_to_f32(uint16_t b);
uint16_t sr_f32_to_bf16(float f);

/* Bulk versions over n elements; in and out must not overlap. */
void sr_f16_to_f32_n(const uint16_t *in, float *out, size_t n);
void sr_f32_to_f16_n(const float *in, uint16_t *out, size_t n);
void sr_bf16_to_f32_n(const uint16_t *in, float *out, size_t n);
void sr_f32_to_bf16_n(const float *in, uint16_t *out, size_t n);

/* out[r, c] = q[r, c] * scale[r] for a [rows, cols] int8 matrix with one scale per row
 * (symmetric per-output-row quantization, the srkit file format's int8 scheme). */
void sr_i8_dequant_rows(const int8_t *q, const float *scale, size_t rows, size_t cols, float *out);

/* Quantize a [rows, cols] f32 matrix to that scheme: scale[r] = max|x[r, :]| / 127 (1 for an
 * all-zero row), q = round-half-even(x / scale) clamped to [-127, 127]. x must be finite. */
void sr_i8_quant_rows(const float *x, size_t rows, size_t cols, int8_t *q, float *scale);

#endif /* SR_DTYPE_H */
