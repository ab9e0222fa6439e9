#!/usr/bin/env bash
# run.sh — kernels/cuda/attn.cu's attention kernel run on the host (no GPU) against the CPU
# table's attn, bit for bit, over the shapes the backends use (head_dim 16 to 300, f32 / f16 /
# bf16 pools, GQA, rel-pos, wrapped rings, a range longer than shared memory keeps). The
# kernel's own text (extract.py) with CUDA's threads, barriers and warp shuffles emulated by
# host threads (inc/cuda_impl.h, emu.cpp). It checks the kernel's indexing and its order of
# operations on a machine without a GPU, as llm.c's dev/cuda checks kernels against a CPU
# reference; it says nothing of speed, occupancy or device limits (kernels_cuda on a device
# does). A developer tool, not part of make test.
#   bash scripts/cuda_emu/run.sh          (from the repository root; builds build/libsr.a)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
make -s -j"$(nproc)" build/libsr.a
out=${TMPDIR:-/tmp}/srkit-cuda-emu
mkdir -p "$out"
python3 scripts/cuda_emu/extract.py kernels/cuda/attn.cu > "$out/attn_emu.cpp"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -ffp-contract=off -pthread -I scripts/cuda_emu/inc -I kernels -I core \
    "$out/attn_emu.cpp" scripts/cuda_emu/emu.cpp scripts/cuda_emu/driver.cpp build/libsr.a \
    $(pkg-config --libs openblas hdf5 sndfile libcjson fftw3f samplerate 2>/dev/null || true) \
    -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas -L/usr/lib/x86_64-linux-gnu/hdf5/serial \
    -lhdf5 -lsndfile -lcjson -lfftw3f -lsamplerate -lxxhash -lunistring -lm -o "$out/attn_emu"
"$out/attn_emu"
