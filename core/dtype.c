/*
 * dtype.c — element-type names and sizes, f16/bf16 <-> f32 conversions, int8 row scaling.
 *
 * f16 -> f32: rebias the 5-bit exponent (15) to the 8-bit one (127) and widen the 10-bit
 * mantissa by 13 bits; f16 subnormals (exponent 0) are normalized by shifting the mantissa up
 * until its leading 1 reaches the implicit-bit position, lowering the exponent once per shift.
 * f32 -> f16: NaN/Inf map directly; magnitudes >= 65520 (halfway between the largest f16,
 * 65504, and 2^16) round to Inf; normal results drop 13 mantissa bits with round-half-even by
 * adding 0xFFF plus the lowest kept bit before shifting (a carry into the exponent is the
 * correct rounding up to the next binade); results below 2^-14 become subnormals
 * m * 2^-24: the 24-bit significand is shifted right by (126 - e) with half-even rounding.
 * bf16 is the upper half of an f32: widening is a shift; narrowing adds 0x7FFF plus the lowest
 * kept bit (half-even) and keeps the upper 16 bits, with NaN handled first so that the carry
 * cannot turn a NaN into Inf.
 */
#include "dtype.h"

#include <math.h>
#include <string.h>

const char *sr_dtype_name(sr_dtype t)
{
    switch (t) {
    case SR_F32: return "f32";
    case SR_F16: return "f16";
    case SR_BF16: return "bf16";
    case SR_I8: return "i8";
    case SR_I32: return "i32";
    case SR_I64: return "i64";
    }
    return "unknown";
}

size_t sr_dtype_size(sr_dtype t)
{
    switch (t) {
    case SR_F32: return 4;
    case SR_F16: return 2;
    case SR_BF16: return 2;
    case SR_I8: return 1;
    case SR_I32: return 4;
    case SR_I64: return 8;
    }
    return 0;
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float sr_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* Inf / NaN: keep the payload */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal man * 2^-24: normalize so that bit 10 is the implicit 1 */
        int e = -14;
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        man &= 0x3ffu;
        return bits_f32(sign | ((uint32_t)(e + 127) << 23) | (man << 13));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t sr_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) { /* NaN: keep the top payload bits, force quiet if they vanish */
        uint16_t man = (uint16_t)((ax >> 13) & 0x3ffu);
        if (!man) man = 0x200u;
        return (uint16_t)(sign | 0x7c00u | man);
    }
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (or Inf) -> Inf */
    if (ax >= 0x38800000u) { /* normal f16 (>= 2^-14) */
        ax += 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
    }
    uint32_t e = ax >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero (2^-25 itself ties to even 0) */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14 .. 24 */
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) r++; /* r may reach 0x400: smallest normal */
    return (uint16_t)(sign | r);
}

float sr_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t sr_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

void sr_f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sr_f16_to_f32(in[i]);
}

void sr_f32_to_f16_n(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sr_f32_to_f16(in[i]);
}

void sr_bf16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    /* blocks of 8 with a fixed-count inner loop: compilers turn it into vector
     * zero-extend + shift (SSE2 at -O2 already), the scalar tail takes the rest */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t u[8];
        for (int j = 0; j < 8; j++) u[j] = (uint32_t)in[i + j] << 16;
        memcpy(out + i, u, sizeof u);
    }
    for (; i < n; i++) out[i] = sr_bf16_to_f32(in[i]);
}

void sr_f32_to_bf16_n(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sr_f32_to_bf16(in[i]);
}

void sr_i8_dequant_rows(const int8_t *q, const float *scale, size_t rows, size_t cols, float *out)
{
    for (size_t r = 0; r < rows; r++) {
        float s = scale[r];
        for (size_t c = 0; c < cols; c++) out[r * cols + c] = (float)q[r * cols + c] * s;
    }
}

void sr_i8_quant_rows(const float *x, size_t rows, size_t cols, int8_t *q, float *scale)
{
    for (size_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        float amax = 0.0f;
        for (size_t c = 0; c < cols; c++) amax = fmaxf(amax, fabsf(row[c]));
        /* float division, as numpy does on float32 arrays, so both writers agree bit for bit */
        float s = amax > 0.0f ? amax / 127.0f : 1.0f;
        scale[r] = s;
        for (size_t c = 0; c < cols; c++) {
            float v = nearbyintf(row[c] / s); /* default rounding mode: half to even */
            if (v > 127.0f) v = 127.0f;
            if (v < -127.0f) v = -127.0f;
            q[r * cols + c] = (int8_t)v;
        }
    }
}
