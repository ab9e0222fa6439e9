/*
 * cuda_impl.h (host emulation) — what kernels/cuda/attn.cu's kernel uses of CUDA, on the host:
 * threadIdx / blockIdx per host thread, __syncthreads as a std::barrier of the block's threads,
 * __shfl_xor_sync through a shared array between two barriers, and the correctly rounded
 * intrinsics as plain float / double operations (compiled with -ffp-contract=off, so nothing is
 * fused that the device would not fuse; fmaf is libm's, correctly rounded as the device's).
 * Only for scripts/cuda_emu/run.sh: the kernel's arithmetic and indexing checked against the
 * CPU table on a machine without a GPU. Not the device: no timing, no occupancy, no limits.
 */
#pragma once
#include "cuda/setting.h" /* kernels/cuda/setting.h, as the table's own cuda_impl.h includes it */
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
extern "C" {
#include "kernels.h"
#include "dtype.h"
#include "internal.h"
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __restrict__ __restrict
struct emu_dim {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern thread_local emu_dim threadIdx, blockIdx;
extern emu_dim gridDim, blockDim;
extern std::barrier<> *emu_bar;
extern unsigned long long *emu_shfl;
extern thread_local float *emu_smem;
inline void __syncthreads() { emu_bar->arrive_and_wait(); }
/* the calling thread's warp meets at its barrier (emu.cpp) */
void __syncwarp(unsigned mask = 0xffffffffu);
/* every thread of the block takes part (as in the kernels here); partner = linear id ^ off */
template <class T> inline T __shfl_xor_sync(unsigned, T v, int off)
{
    unsigned id = threadIdx.x + threadIdx.y * blockDim.x;
    memcpy(&emu_shfl[id], &v, sizeof v);
    emu_bar->arrive_and_wait();
    T r;
    memcpy(&r, &emu_shfl[id ^ (unsigned)off], sizeof r);
    emu_bar->arrive_and_wait();
    return r;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }
inline float __double2float_rn(double a) { return (float)a; }
inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
/* prmt's default mode: byte i of the result is byte (s >> 4 i) & 7 of y:x (x the low word) */
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const unsigned long long v = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(v >> (8 * ((s >> (4 * i)) & 7u)) & 0xffu) << (8 * i);
    return r;
}
inline float __int_as_float(int u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* f16 / bf16: the host's round to nearest even (core/dtype.h); the kernels treat NaN first */
struct __half {
    unsigned short b;
};
struct __nv_bfloat16 {
    unsigned short b;
};
inline __half __ushort_as_half(unsigned short b) { return __half{b}; }
inline unsigned short __half_as_ushort(__half h) { return h.b; }
inline float __half2float(__half h) { return sr_f16_to_f32(h.b); }
inline __half __float2half_rn(float v) { return __half{sr_f32_to_f16(v)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float v) { return __nv_bfloat16{sr_f32_to_bf16(v)}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.b; }
inline float __int2float_rn(int v) { return (float)v; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
#define __host__
struct uint4 {
    unsigned x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
template <class T> inline T __ldg(const T *p) { return *p; }
struct float4 {
    float x, y, z, w;
};
struct float2 {
    float x, y;
};
#define __align__(n) __attribute__((aligned(n)))
void sr_cuda_weight_free(sr_kweight *W);
/* mma.sync m16n8k16 bf16 -> f32, the PTX ISA's fragment layout: lane 4 g + q holds A rows g and
 * g + 8 at k 2q, 2q + 1 (a0: row g, a1: row g + 8) and 2q + 8, 2q + 9 (a2, a3), B column g at
 * the same k (b0, b1), D rows g and g + 8 at columns 2q, 2q + 1 (d0 d1, d2 d3); the lower k in a
 * register's low half. The warp's lanes meet at their warp's barrier to exchange fragments. */
void emu_mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                   unsigned b1);
using std::max;
using std::min;

/* the runtime calls the ops make, on host memory */
typedef int cudaError_t;
typedef int cudaStream_t;
inline cudaStream_t sr_cuda_stream(void) { return 0; }
enum { cudaSuccess = 0, cudaMemcpyDeviceToDevice = 3, cudaMemcpyHostToDevice = 1 };
inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t) { return "emulated"; }
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, int) { memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, int, int) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int, int)
{
    for (size_t r = 0; r < h; r++) memcpy((char *)d + r * dp, (const char *)s + r * sp, w);
    return cudaSuccess;
}
void sr_cuda_free(void *p);
inline cudaError_t cudaFree(void *p) { sr_cuda_free(p); return cudaSuccess; }
inline cudaError_t sr_cuda_malloc_pooled(void **p, size_t n) { *p = malloc(n ? n : 1); return cudaSuccess; }
/* weights: their ranges kept, so that sr_prefetch_l2 can check what it names */
cudaError_t sr_cuda_malloc(void **p, size_t n);
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, int) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int)
{
    for (size_t r = 0; r < h; r++) memcpy((char *)d + r * dp, (const char *)s + r * sp, w);
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <class K> inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int) { return cudaSuccess; }
enum { cudaDevAttrMultiProcessorCount = 16 };
inline cudaError_t cudaDeviceGetAttribute(int *v, int, int) { *v = 132; return cudaSuccess; }
inline int sr_cuda_sm_count(void) { int v = 0; cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0); return v; }
inline sr_status sr_cuda_fail(const char *what, cudaError_t) { return sr_error(SR_ERR_DEVICE, "%s: emulated failure", what); }
inline sr_status sr_cuda_launched(const char *) { return SR_OK; }
#define SR_CUDA_GRID_Y(n) ((n) < 65535 ? (n) : 65535)

/* a launch: every block of grid, each as its block's host threads around one barrier */
void emu_launch_blocks(dim3 grid, dim3 block, size_t smem_bytes, void (*body)(void *), void *ctx);
template <class F> void emu_launch(dim3 grid, dim3 block, size_t smem_bytes, F f)
{
    emu_launch_blocks(grid, block, smem_bytes, [](void *c) { (*(F *)c)(); }, &f);
}

/* Overlapping launches (the table's cuda_impl.h): a launch is a launch here, in order. Every
 * thread of every launched block must call sr_pdl_enter (emu_launch_blocks counts the threads
 * that did not: the device would let such a kernel read its inputs before they are written);
 * sr_prefetch_l2 must name a byte of a weight (sr_cuda_malloc's blocks; the run stops
 * otherwise). sr_cuda_pdl_live is emu_pdl: on, so the prefetching paths run. */
extern bool emu_pdl;
inline bool sr_cuda_pdl_live(void) { return emu_pdl; }
void sr_pdl_enter(void);
void sr_prefetch_l2(const void *p);
inline void sr_cuda_pdl_refused(void) {}
template <typename... P, typename... A>
void sr_cuda_launch(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, A &&...args)
{
    /* the arguments converted to the parameters' types, as cudaLaunchKernelEx does */
    [&](P... c) { emu_launch(grid, block, smem, [&] { kern(c...); }); }(static_cast<A &&>(args)...);
}
