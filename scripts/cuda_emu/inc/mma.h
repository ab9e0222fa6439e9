/* mma.h (host emulation) — nvcuda::wmma for kernels/cuda/gemm.cu's wmma kernel: every lane holds
 * the whole 16 x 16 tile (a warp-wide load reads the tile; each lane reads all of it), mma_sync
 * sums k in increasing order with fmaf (the device leaves the order open; the tests hold both to
 * the f32 bound), lane 0 of the warp stores. */
#pragma once
#include "cuda_impl.h"
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class L = void> struct fragment {
    static constexpr int num_elements = 256;
    float x[256]; /* the whole tile, [r][c] at 16 r + c */
};
#define V(f, r, c) ((f).x[16 * (r) + (c)])
template <class U, int M, int N, int K, class T, class L>
inline void fill_fragment(fragment<U, M, N, K, T, L> &f, float v)
{
    for (auto &e : f.x) e = v;
}
/* A, row-major bf16: element (r, k) at p[r ld + k] */
inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major> &f,
                             const __nv_bfloat16 *p, unsigned ld)
{
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) V(f, r, k) = __uint_as_float((unsigned)p[(size_t)r * ld + k].b << 16);
}
/* B, col-major bf16: element (k, n) at p[n ld + k] */
inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major> &f,
                             const __nv_bfloat16 *p, unsigned ld)
{
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++) V(f, k, n) = __uint_as_float((unsigned)p[(size_t)n * ld + k].b << 16);
}
template <class L>
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float, L> &f, const float *p,
                             unsigned ld, layout_t)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) V(f, r, c) = p[(size_t)r * ld + c];
}
template <class L>
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float, L> &f,
                              unsigned ld, layout_t)
{
    if ((threadIdx.x + threadIdx.y * blockDim.x) % 32) return;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) p[(size_t)r * ld + c] = V(f, r, c);
}
template <class LA, class LB, class LC>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float, LC> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float, LC> &c)
{
    float out[16][16];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float s = V(c, r, n);
            for (int k = 0; k < 16; k++) s = fmaf(V(a, r, k), V(b, k, n), s);
            out[r][n] = s;
        }
    memcpy(d.x, out, sizeof out);
}
#undef V
} // namespace wmma
} // namespace nvcuda
