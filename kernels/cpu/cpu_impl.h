/*
 * cpu_impl.h — internal to kernels/cpu/: the CPU table's op functions, one file per group
 * (gemm.c: weights and the Linear product; rowops.c: the row-wise, element-wise, conv, cache
 * and search ops; attn.c: attention over pools), and the worker pool they share (pool.c).
 * Contracts are those of the op typedefs in kernels/kernels.h.
 */
#ifndef SR_CPU_IMPL_H
#define SR_CPU_IMPL_H

#include "../kernels.h"

/* ---- pool.c: the CPU worker pool ---------------------------------------------------------- */

/* Threads the op set uses (set by the table's set_threads; default OPENBLAS_NUM_THREADS when
 * set, else the online CPUs, at most 64). */
/* 1 when the CPU has F16C (CPUID leaf 1, ECX), which the f16 paths need: read from CPUID
 * because some compilers' __builtin_cpu_supports know no "f16c" (clang 14 rejects it). */
int sr_cpu_f16c(void);

int sr_cpu_threads(void);
void sr_cpu_set_threads(int n);

/* Run fn(ctx, part) for every part in [0, n_parts) on the caller plus up to threads - 1 pool
 * workers (threads <= 0: sr_cpu_threads()); returns when every part is done. Parts are taken
 * from an atomic counter, so their order is unspecified: each part must write its own outputs.
 * One job runs on the pool at a time; a caller that finds it busy runs its parts alone (so
 * concurrent streams on separate threads each keep one core). Thread-safe. */
void sr_cpu_parallel(int threads, int n_parts, void (*fn)(void *ctx, int part), void *ctx);

/* ---- gemm.c ------------------------------------------------------------------------------- */
sr_status sr_cpu_weight_create(const void *host, sr_dtype dt, int n, int k, const float *scale,
                               sr_kmul mul, sr_kweight **out);
void sr_cpu_weight_free(sr_kweight *w);
/* Bytes of W->scale (SR_I8's scales, padded to the panels; 0 otherwise); W->data holds the
 * rest of W->bytes. Both are posix_memalign blocks (guard.c moves them). */
size_t sr_cpu_weight_scale_bytes(const sr_kweight *W);
sr_status sr_cpu_gemm(int M, const float *x, int ldx, const sr_kweight *W, const float *bias,
                      sr_act act, float alpha, float beta, float *y, int ldy);
sr_status sr_cpu_gather(const sr_kweight *E, const int32_t *ids, int n, float *y, int ldy);

/* ---- rowops.c ----------------------------------------------------------------------------- */
sr_status sr_cpu_norm(sr_norm_kind kind, int M, int d, const float *x, int ldx, const float *g,
                      const float *b, float eps, const float *mul, int ld_mul, float *y, int ldy);
sr_status sr_cpu_act(sr_act act, size_t n, const float *x, float *y);
sr_status sr_cpu_glu(sr_glu kind, int M, int d, const float *a, int lda, const float *b, int ldb,
                     float *y, int ldy);
sr_status sr_cpu_add(int M, int d, const float *x, int ldx, float alpha, float *y, int ldy);
sr_status sr_cpu_scale(int M, int d, float s, float *y, int ldy);
sr_status sr_cpu_rope(const sr_kbatch *b, int n_head, int hd, const float *inv_freq, float *x,
                      int ldx);
sr_status sr_cpu_conv2d_s2(int n, int C, int T, int F, const float *in, size_t in_img_stride,
                           size_t in_plane_stride, const float *w, const float *b, int relu,
                           float *out);
sr_status sr_cpu_conv_dw(const sr_kbatch *b, int C, int K, const float *x, int ldx,
                         const float *w, const float *bias, sr_kpool *state, int layer, float *y,
                         int ldy);
sr_status sr_cpu_batchnorm(int M, int C, const float *x, int ldx, const float *mean,
                           const float *var, const float *g, const float *bias, float eps,
                           float *y, int ldy);
sr_status sr_cpu_lstm_cell(int M, int H, const float *gates, int ldg, float *c, int ldc, float *h,
                           int ldh);
sr_status sr_cpu_softmax(int M, int N, float *x, int ldx);
sr_status sr_cpu_logsoftmax(int M, int N, const float *x, int ldx, float *y, int ldy);
sr_status sr_cpu_topk(int M, int N, int k, const float *x, int ldx, int32_t *idx, float *val);
sr_status sr_cpu_kv_write(sr_kpool *p, int layer, const sr_kbatch *b, const float *x, int ldx);
sr_status sr_cpu_rope_kv(const sr_kbatch *b, int n_head, int n_kv_head, int hd, const float *inv_freq,
                         float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                         sr_kpool *K, sr_kpool *V, int layer);
sr_status sr_cpu_kv_write2(sr_kpool *p, sr_kpool *p2, int layer, const sr_kbatch *b,
                           const float *x, int ldx, const float *x2, int ldx2);
/* Tests only (process-wide, not thread-safe): force the row ops' instruction set, 0 auto,
 * 1 portable, 2 AVX2, 3 AVX-512; returns the path's name, NULL when this CPU lacks it. */
const char *sr_cpu_rowops_force(int isa);
/* Test hook: logsoftmax's exp of one d <= 0 (rowops.c ls_exp_1, the formula every path's
 * lanes compute). */
double sr_cpu_logsoftmax_exp(double d);
/* Test hook: logsoftmax of one row of n > 0 on the forced path (y [n]), returning the double sum
 * of its terms, which every path must compute bit for bit. */
double sr_cpu_logsoftmax_sum(int n, const float *x, float *y);

/* ---- attn.c ------------------------------------------------------------------------------- */
sr_status sr_cpu_attn(const sr_kattn *a, const sr_kbatch *b, const float *q, int ldq,
                      const sr_kpool *K, const sr_kpool *V, int layer, float *out, int ldo);

/* ---- guard.c: the "cpu-guard" table ---------------------------------------------------------- */
/* The CPU ops over memory the host cannot read outside them (see guard.c). Never NULL. */
const sr_kernels *sr_kernels_cpu_guard(void);
/* Recordings the guard table has run (graph_end with run != 0 that succeeded), process-wide:
 * for tests that a backend records its step. */
unsigned long long sr_kernels_cpu_guard_recordings(void);

/* ---- path hooks, for tests and benchmarks only (process-wide, not thread-safe) ------------
 * Every path of an op gives the same bits; the tests prove it by forcing each. gemm / attn:
 * "avx512", "avx2", "portable" or NULL (automatic); -1 when this CPU lacks the path (nothing
 * changes), else 0; *_isa names the path in use. */
int sr_cpu_gemm_force_isa(const char *name);
/* The path of bf16 products (SR_KMUL_BF16): "amx", "avx512_bf16" or "portable" (NULL:
 * automatic, the first this CPU has). The AVX512_BF16 and portable paths give the same bits;
 * AMX sums each 32-k step in an order Intel leaves open, so it agrees with them within the
 * f32 rounding bound only (rows stay independent). */
int sr_cpu_gemm_force_bf16(const char *name);
const char *sr_cpu_gemm_bf16_path(void);
const char *sr_cpu_gemm_isa(void);
int sr_cpu_attn_force_isa(const char *name);
const char *sr_cpu_attn_isa(void);

#endif /* SR_CPU_IMPL_H */
