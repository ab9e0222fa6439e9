#!/usr/bin/env bash
# run.sh — CUDA kernels run on the host (no GPU) against the CPU table's ops: kernels/cuda/attn.cu's
# attention bit for bit over the shapes the backends use (head_dim 16 to 300, f32 / f16 / bf16
# pools, GQA, rel-pos, wrapped rings, a range longer than shared memory keeps, a call of two
# launches, groups of rows cut at the rows form's shared memory, in each kernel form: narrow, wide,
# grouped, split, rows; driver_attn.cpp), rowops.cu's rope, kv_write, kv_write2, rope_kv and
# conv_dw over batches of 1,000 sequences and topk in its single-block and split forms
# (driver_rowops.cpp), and gemm.cu's two tensor-core forms of bf16 products, wmma and the
# register-direct mma, for bf16 and i8 weights, within the f32 bound of the double reference and
# a row alone equal to the row in a batch (driver_gemm.cpp, x at odd and 16-byte strides;
# SR_EMU_DUMP=file keeps its results to compare two versions of gemm.cu), run twice: the second
# time with the staged products' operands through cp.async (SRKIT_CUDA_GEMM_ASYNC=1), whose bytes
# must equal the first's; rowops' zero, copy2d and act's copy against memset / memcpy; about 18
# minutes. The files' own text
# (extract.py) with CUDA's threads, barriers, shared memory, warp shuffles, wmma and mma.sync
# emulated on host threads (inc/, emu.cpp; cp.async copies at once and __syncwarp is the warp's
# barrier, so a cp.async ring's ordering is reasoned, not tested, here). mma.sync follows the PTX ISA's m16n8k16 fragment
# layout as written there: the kernel is checked against that reading of it, not against the
# hardware. It checks the kernel's indexing and its order of
# operations on a machine without a GPU, as llm.c's dev/cuda checks kernels against a CPU
# reference; it says nothing of speed, occupancy or device limits (kernels_cuda on a device
# does). Every kernel must begin with sr_pdl_enter() (extract.py checks the text, emu.cpp that every
# thread of every launched block called it), and a weight prefetch must name a weight's byte.
# A developer tool, not part of make test.
#   bash scripts/cuda_emu/run.sh          (from the repository root; builds build/libsr.a)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
make -s -j"$(nproc)" build/libsr.a
out=${TMPDIR:-/tmp}/srkit-cuda-emu
mkdir -p "$out"
libs="-L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas -L/usr/lib/x86_64-linux-gnu/hdf5/serial \
      -lhdf5 -lsndfile -lcjson -lfftw3f -lsamplerate -lxxhash -lunistring -lm"
rc=0
# the table's kernels outside the three units: only held to the rule of overlapping launches
python3 scripts/cuda_emu/extract.py kernels/cuda/cuda.cu > /dev/null || rc=1
for unit in attn rowops gemm; do
    python3 scripts/cuda_emu/extract.py kernels/cuda/$unit.cu > "$out/${unit}_emu.cpp"
    drv=scripts/cuda_emu/driver_$unit.cpp
    # shellcheck disable=SC2086
    g++ -std=c++20 -O1 -ffp-contract=off -pthread -I scripts/cuda_emu/inc -I kernels -I core \
        "$out/${unit}_emu.cpp" scripts/cuda_emu/emu.cpp $drv build/libsr.a $libs -o "$out/${unit}_emu"
    echo "== kernels/cuda/$unit.cu on host threads against the CPU table"
    if [ "$unit" = gemm ]; then
        # and again with the staged products' operands through cp.async (SRKIT_CUDA_GEMM_ASYNC=1):
        # the same bytes as the register form
        SR_EMU_DUMP="$out/gemm_regs.bin" "$out/gemm_emu" || rc=1
        echo "== the same with SRKIT_CUDA_GEMM_ASYNC=1 (the cp.async form above 16 rows)"
        SRKIT_CUDA_GEMM_ASYNC=1 SR_EMU_DUMP="$out/gemm_async.bin" "$out/gemm_emu" > /dev/null || rc=1
        if cmp -s "$out/gemm_regs.bin" "$out/gemm_async.bin"; then echo "cp.async form: the same bytes"
        else echo "cp.async form: DIFFERENT bytes"; rc=1; fi
    else
        "$out/${unit}_emu" || rc=1
    fi
done
exit $rc
