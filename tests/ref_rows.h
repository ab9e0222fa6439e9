/*
 * ref_rows.h — plain double-precision references of the row ops of the kernel table
 * (kernels/kernels.h: norm ... kv_write), used only by tests/test_ops_rows.c. Each evaluates the
 * op's mathematical definition in double on the float inputs, with no attempt at speed, so a
 * table's result can be checked against it with a stated error bound. Where the contract itself
 * fixes a float rounding (rope's f32 angle, a pool's element type), the reference applies that
 * rounding too.
 */
#ifndef SR_REF_ROWS_H
#define SR_REF_ROWS_H

#include "../kernels/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* One row of width d: LayerNorm / RMSNorm in double, times mul[c] when mul != NULL. mag[c]
 * (may be NULL) receives the magnitude the rounding errors scale with: LayerNorm
 * (|x - mean| + |mean|) |g| / sqrt(var + eps) + |b|, RMSNorm |y| (times |mul| when given). */
void ref_norm_row(sr_norm_kind kind, int d, const float *x, const float *g, const float *b,
                  float eps, const float *mul, double *y, double *mag);

/* act(x): GELU 0.5 x (1 + erf(x / sqrt 2)), SiLU x / (1 + e^-x), ReLU max(x, 0) (NaN -> 0, the
 * table's x > 0 ? x : 0), NONE x. */
double ref_rows_act(sr_act act, double x);

/* glu(a, b): SIGMOID a / (1 + e^-b), SILU a / (1 + e^-a) * b. */
double ref_glu(sr_glu kind, double a, double b);

/* One row of rotary embedding at position pos: angle (double)((float)pos * inv[i]) (the f32
 * product the contract fixes), cos / sin in double. mag[j] = |x_j cos| + |x_partner sin|. */
void ref_rope_row(int n_head, int hd, const float *inv, int64_t pos, const float *x, double *y,
                  double *mag);


/* The stride-2 causal 3x3 conv of kernels.h, out and mag [C][T/2+1][F/2+1] in double; mag is
 * |b| + sum |w in| over the taps inside the plane. */
void ref_conv2d_s2(int C, int T, int F, const float *in, size_t in_plane_stride, const float *w,
                   const float *b, int relu, double *out, double *mag);

/* The depthwise conv of one sequence of n rows: state [K - 1][C] (float values as the pool
 * holds them; NULL: zeros, no update) is read and then replaced by the last K - 1 rows of
 * [state ; x], each rounded to dt (SR_F32, SR_F16, SR_BF16) as the pool stores it. y, mag
 * [n][C] dense; mag = |bias| + sum |w in|. */
void ref_conv_dw_seq(int n, int C, int K, const float *x, int ldx, const float *w,
                     const float *bias, float *state, sr_dtype dt, double *y, double *mag);

/* BatchNorm of one row of C channels; mag = |(x - mean) g / sqrt(var + eps)| + |bias|. */
void ref_batchnorm_row(int C, const float *x, const float *mean, const float *var,
                       const float *g, const float *bias, float eps, double *y, double *mag);

/* One LSTM cell row: gates [4H] (i, f, g, o), c0 [H] in; c, h [H] out; magc = |f c0| + |i g|. */
void ref_lstm_row(int H, const float *gates, const float *c0, double *c, double *h, double *magc);

/* Softmax of one row in double (x - max exact in double). */
void ref_softmax_row(int N, const float *x, double *y);

/* log softmax of one row in double; returns max + log sum exp. */
double ref_logsoftmax_row(int N, const float *x, double *y);

/* The k best columns of one row by repeated selection: larger value first, equal values by
 * lower column, NaN after every number (NaNs by lower column). */
void ref_topk_row(int N, int k, const float *x, int32_t *idx);

/* kv_write on a host copy of a pool's data ([layers][slots][rows][width] of dt), row after row
 * in batch order (later rows overwrite earlier ones on the same ring row), elements converted
 * one by one with core/dtype.h. */
void ref_kv_write(void *data, sr_dtype dt, int slots, int rows, int width, int layer,
                  const sr_kbatch *b, const float *x, int ldx);

/* A float stored in dt and read back (f16 / bf16: round to nearest even, then widen). */
float ref_rows_round(float v, sr_dtype dt);

#endif /* SR_REF_ROWS_H */
