/* emu.cpp — the host emulation's runtime (scripts/cuda_emu/run.sh): blocks run one after
 * another, each as its threads on host threads meeting at one std::barrier. */
#include "cuda_impl.h"

#include <thread>
#include <vector>

thread_local emu_dim threadIdx, blockIdx;
emu_dim gridDim, blockDim;
std::barrier<> *emu_bar;
unsigned long long *emu_shfl;
thread_local float *emu_smem;

void emu_launch_blocks(dim3 grid, dim3 block, size_t smem_bytes, void (*body)(void *), void *ctx)
{
    gridDim = {grid.x, grid.y, grid.z};
    blockDim = {block.x, block.y, 1};
    const unsigned threads = block.x * block.y;
    std::vector<float> sm(smem_bytes / sizeof(float) + 1);
    std::vector<unsigned long long> sh(threads);
    emu_shfl = sh.data();
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            std::barrier<> bar((std::ptrdiff_t)threads);
            emu_bar = &bar;
            std::vector<std::thread> th;
            for (unsigned t = 0; t < threads; t++)
                th.emplace_back([&, t] {
                    threadIdx = {t % block.x, t / block.x, 0};
                    blockIdx = {bx, by, 0};
                    emu_smem = sm.data();
                    body(ctx);
                });
            for (auto &x : th) x.join();
        }
}
