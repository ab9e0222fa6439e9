/*
 * exp_poly.h — the constants of the attention softmax's exp (Cephes' expf: x = n ln2 + r with
 * ln2 in two parts so r is exact, e^r by a degree-7 polynomial, times 2^n), shared by the CPU
 * (kernels/cpu/attn.c) and CUDA (kernels/cuda/attn.cu) attention so both compute the same
 * bits: one set of literals, one set of floats.
 */
#ifndef SR_EXP_POLY_H
#define SR_EXP_POLY_H

#define SR_EXP_LO (-87.3365447505531f) /* below: 0 */
#define SR_EXP_HI 88.0f                /* above: clamped */
#define SR_EXP_LOG2E 1.44269504088896341f
#define SR_EXP_C1 0.693359375f         /* ln2, high part */
#define SR_EXP_C2 (-2.12194440e-4f)    /* ln2, low part */
#define SR_EXP_P0 1.9875691500e-4f
#define SR_EXP_P1 1.3981999507e-3f
#define SR_EXP_P2 8.3334519073e-3f
#define SR_EXP_P3 4.1665795894e-2f
#define SR_EXP_P4 1.6666665459e-1f
#define SR_EXP_P5 5.0000001201e-1f

#endif /* SR_EXP_POLY_H */
