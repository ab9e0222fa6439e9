/* emu.cpp — the host emulation's runtime (scripts/cuda_emu/run.sh): blocks run one after
 * another, each as its threads on host threads meeting at one std::barrier. */
#include "cuda_impl.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

thread_local emu_dim threadIdx, blockIdx;
emu_dim gridDim, blockDim;
std::barrier<> *emu_bar;
unsigned long long *emu_shfl;
thread_local float *emu_smem;
static std::vector<std::barrier<> *> emu_wbar; /* each warp's barrier (emu_mma_16816) */
static unsigned emu_regs[1024][6];              /* each thread's mma operands, by linear id */

void emu_mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                   unsigned b1)
{
    const unsigned id = threadIdx.x + threadIdx.y * blockDim.x, w = id / 32, lane = id % 32;
    unsigned *r = emu_regs[id];
    r[0] = a0, r[1] = a1, r[2] = a2, r[3] = a3, r[4] = b0, r[5] = b1;
    emu_wbar[w]->arrive_and_wait();
    float A[16][16], B[16][8];
    auto lo = [](unsigned v) { return __uint_as_float((v & 0xffffu) << 16); };
    auto hi = [](unsigned v) { return __uint_as_float(v & 0xffff0000u); };
    for (unsigned L = 0; L < 32; L++) {
        const unsigned *x = emu_regs[w * 32 + L];
        unsigned g = L / 4, q = L % 4;
        A[g][2 * q] = lo(x[0]), A[g][2 * q + 1] = hi(x[0]);
        A[g + 8][2 * q] = lo(x[1]), A[g + 8][2 * q + 1] = hi(x[1]);
        A[g][2 * q + 8] = lo(x[2]), A[g][2 * q + 9] = hi(x[2]);
        A[g + 8][2 * q + 8] = lo(x[3]), A[g + 8][2 * q + 9] = hi(x[3]);
        B[2 * q][g] = lo(x[4]), B[2 * q + 1][g] = hi(x[4]);
        B[2 * q + 8][g] = lo(x[5]), B[2 * q + 9][g] = hi(x[5]);
    }
    emu_wbar[w]->arrive_and_wait(); /* every lane has read the others' operands */
    const unsigned g = lane / 4, q = lane % 4;
    const unsigned rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * q, 2 * q + 1, 2 * q, 2 * q + 1};
    for (int e = 0; e < 4; e++) {
        float s = d[e];
        for (int k = 0; k < 16; k++) s = fmaf(A[rows[e]][k], B[k][cols[e]], s);
        d[e] = s;
    }
}

void __syncwarp(unsigned)
{
    const unsigned id = threadIdx.x + threadIdx.y * blockDim.x;
    emu_wbar[id / 32]->arrive_and_wait();
}

bool emu_pdl = true;
static thread_local bool emu_entered;      /* this thread called sr_pdl_enter */
static std::atomic<unsigned long long> emu_unentered{0};
static std::mutex emu_mem_mu;
static std::map<const char *, size_t> emu_mem; /* sr_cuda_malloc's blocks: start -> bytes */

void sr_pdl_enter(void) { emu_entered = true; }

cudaError_t sr_cuda_malloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    std::lock_guard<std::mutex> l(emu_mem_mu);
    if (*p) emu_mem[(const char *)*p] = n;
    return cudaSuccess;
}

void sr_cuda_free(void *p)
{
    {
        std::lock_guard<std::mutex> l(emu_mem_mu);
        emu_mem.erase((const char *)p);
    }
    free(p);
}

void sr_prefetch_l2(const void *p)
{
    const char *c = (const char *)p;
    std::lock_guard<std::mutex> l(emu_mem_mu);
    auto it = emu_mem.upper_bound(c);
    if (it == emu_mem.begin() || c >= std::prev(it)->first + std::prev(it)->second) {
        fprintf(stderr, "emu: sr_prefetch_l2(%p) outside every weight block\n", p);
        abort();
    }
}

void emu_launch_blocks(dim3 grid, dim3 block, size_t smem_bytes, void (*body)(void *), void *ctx)
{
    gridDim = {grid.x, grid.y, grid.z};
    blockDim = {block.x, block.y, 1};
    const unsigned threads = block.x * block.y;
    std::vector<float> sm(smem_bytes / sizeof(float) + 1);
    std::vector<unsigned long long> sh(threads);
    emu_shfl = sh.data();
    const size_t blocks = (size_t)grid.x * grid.y * grid.z;
    for (size_t bi = 0; bi < blocks; bi++) { /* x fastest, then y, then z */
        const unsigned bx = (unsigned)(bi % grid.x), by = (unsigned)(bi / grid.x % grid.y),
                       bz = (unsigned)(bi / grid.x / grid.y);
        std::barrier<> bar((std::ptrdiff_t)threads);
        emu_bar = &bar;
        std::vector<std::barrier<> *> wb;
        for (unsigned i = 0; i < (threads + 31) / 32; i++)
            wb.push_back(new std::barrier<>((std::ptrdiff_t)std::min(32u, threads - 32 * i)));
        emu_wbar = wb;
        std::vector<std::thread> th;
        for (unsigned t = 0; t < threads; t++)
            th.emplace_back([&, t] {
                threadIdx = {t % block.x, t / block.x, 0};
                blockIdx = {bx, by, bz};
                emu_smem = sm.data();
                emu_entered = false;
                body(ctx);
                if (!emu_entered) emu_unentered++;
            });
        for (auto &x : th) x.join();
        for (auto *b : wb) delete b;
    }
    if (emu_unentered.load()) {
        fprintf(stderr, "emu: %llu threads of a launch never called sr_pdl_enter\n",
                emu_unentered.load());
        abort();
    }
}
