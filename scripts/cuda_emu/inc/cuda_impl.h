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
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
extern "C" {
#include "kernels.h"
#include "dtype.h"
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(a, b)
#define __grid_constant__
struct emu_dim {
    unsigned x, y, z;
};
extern thread_local emu_dim threadIdx, blockIdx;
extern emu_dim gridDim;
extern std::barrier<> *emu_bar;
extern float *emu_shfl;
extern thread_local float *emu_smem;
inline void __syncthreads() { emu_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int off)
{
    emu_shfl[threadIdx.x] = v;
    emu_bar->arrive_and_wait();
    float r = emu_shfl[threadIdx.x ^ (unsigned)off];
    emu_bar->arrive_and_wait();
    return r;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float __double2float_rn(double a) { return (float)a; }
inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline float __int_as_float(int u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct __half {
    unsigned short b;
};
inline __half __ushort_as_half(unsigned short b) { return __half{b}; }
inline float __half2float(__half h) { return sr_f16_to_f32(h.b); }
using std::max;
using std::min;

/* a launch: every block of grid, each as blockDim host threads around one barrier */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
void emu_launch_blocks(dim3 grid, unsigned threads, size_t smem_bytes, void (*body)(void *), void *ctx);
template <class F> void emu_launch(dim3 grid, unsigned threads, size_t smem_bytes, F f)
{
    emu_launch_blocks(grid, threads, smem_bytes, [](void *c) { (*(F *)c)(); }, &f);
}
inline sr_status sr_cuda_launched(const char *) { return SR_OK; }
