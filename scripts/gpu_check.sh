#!/usr/bin/env bash
# gpu_check.sh — the whole device check of the CUDA op set in one call of a lent GPU machine
# (issue 11): the CUDA suites, compute-sanitizer memcheck, then the figures of
# docs/benchmarks.md "On an NVIDIA H200/H100" on synthetic full-size models made there.
#
# Here (no GPU):  python3 scripts/recast_model.py ~/.cache/srkit/models/whisperrt-tiny.en.h5 \
#                     /tmp/whisperrt-tiny.en-i8.h5 --dtype int8     # real weights, 40 MB (xz: 28)
#                 git worktree add /tmp/base BASE && make -C /tmp/base CUDA=1 -j2 all \
#                     && cp /tmp/base/build/srkit /tmp/srkit-base  # optional: the A/B baseline
#                 ../shared/tools/gpu-bundle ../shared/data/librispeech-sample/1089-134686-0000.flac \
#                     ../shared/data/whisper-assets/gpt2.tiktoken /tmp/whisperrt-tiny.en-i8.h5 \
#                     /tmp/srkit-base
# Device call:    command "BUDGET=B bash scripts/gpu_check.sh", carry [".gpu"], timeout_s B + 30
#                 (the fourth session's H100 ran it in 299 s). PART=check runs only the
#                 correctness half (suites, parity, API suites, recording, overlapping
#                 launches, memchecks; no model is made) and PART=figures only the benches: two
#                 calls when one would not fit. The check part's suites run JOBS=4 at a time
#                 (before 2026-11-27 one at a time: about 420 s of a call), while the figures'
#                 synthetic models are written in the background (PART=all). FIGS="vx64 nemo
#                 ..." runs only the figures' sections named (the list is at the figures part):
#                 a second call on the still-warm machine takes what the first had no time
#                 for, on the models the first made (never rewritten: /tmp/m/*.done).
# Switches for what earlier sessions measured (off by default, to keep the call short):
#   PEERS=1 transformers on the same weights; WMMA=1 batched == solo and the goldens with the
#   wmma kernel; FORMS=1 bench attn per attention form (and the base build); GEMMALL=1 the whole
#   bench gemm table; GEMMCOLS=1 the GEMM column settings and overlapping runs; WALL=1
#   WhisperRT 300 ms and offline, Voxtral 64 streams without final_steps; WPROF=1 the Whisper
#   op profile; NEMO=1 Nemotron 640 streams and [70,1] (only 512 streams at [70,0] otherwise).
# Everything goes to $OUT (log.txt, bench.jsonl, the suites' logs) and the log to stdout. The
# steps run in order of importance (correctness, then the figures the open goals need), each
# with its own time limit, and a step whose limit would end past BUDGET seconds (default 560)
# is skipped with a line saying so: one slow step cannot eat the call, and the log says what
# did not run. With $SRKIT_GPU_EXTRA/srkit-base present (a build of an earlier commit), the
# attention and Voxtral figures are also taken with it, interleaved, on the same device.
set -u
source .gpu/env.sh
OUT=${OUT:-/tmp/gpu-out}
BUDGET=${BUDGET:-560}
PART=${PART:-all} # check (suites, parity, memchecks), figures (benches on synthetic models), all
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
FIGS=${FIGS:-} # the figures' sections to run (empty: all; see the figures part)
fig() { [ -z "$FIGS" ] || [[ " $FIGS " == *" $1 "* ]]; }
mkdir -p "$OUT" /tmp/m
export OPENBLAS_NUM_THREADS=8 SRKIT_HOME=/tmp/srk
X=$SRKIT_GPU_EXTRA
A=$X/1089-134686-0000.flac
BASE=$X/srkit-base
[ -x "$BASE" ] || BASE=
exec > >(tee "$OUT/log.txt") 2>&1
# the synthetic models, in the background (each once: a second call on the still-warm machine
# finds the first call's files done and must not rewrite them under its benches)
J1=
if want figures && [ ! -f /tmp/m/fw.done ]; then
    ( python3 scripts/make_synthetic.py --arch fastconformer_rnnt --preset nemotron-0.6b --dtype bf16 /tmp/m/nemo.h5 &&
      python3 scripts/make_synthetic.py --arch whisper --preset tiny --tiktoken "$X/gpt2.tiktoken" /tmp/m/wt.h5 &&
      touch /tmp/m/fw.done ) > "$OUT/synth.log" 2>&1 &
    J1=$!
fi
want figures && [ ! -f /tmp/m/vx.done ] && ( python3 scripts/make_synthetic.py --arch voxtral_realtime --preset mini-4b --dtype bf16 --jobs 8 --no-checksum /tmp/m/vx.h5 \
    && touch /tmp/m/vx.done ) > "$OUT/synthvx.log" 2>&1 &
# the same shape in int8 (4.4 GB: bf16 products over one byte a weight), made alongside
want figures && [ ! -f /tmp/m/vx8.done ] && ( python3 scripts/make_synthetic.py --arch voxtral_realtime --preset mini-4b --dtype int8 --jobs 8 --no-checksum /tmp/m/vx8.h5 \
    && touch /tmp/m/vx8.done ) > "$OUT/synthvx8.log" 2>&1 &

# fits LIMIT: 0 when a step of LIMIT seconds still ends within the budget, else says so
fits() {
    [ $((SECONDS + $1)) -le "$BUDGET" ] && return 0
    echo "   (skipped: ${1} s would end past the ${BUDGET} s budget at ${SECONDS} s)"
    return 1
}
# a suite run in the background: P LIMIT LOG [ENV=...] COMMAND ARGS, at most $JOBS at once (the
# check part's suites and memchecks: one GPU shared by several test processes changes no
# result, only their pace); Pwait waits for them and prints each one's rc, its time span and
# its failures and counts, in the order they were queued
JOBS=${JOBS:-4}
PTH=$(( $(nproc) / JOBS )); [ "$PTH" -ge 1 ] || PTH=1 # their OpenBLAS threads: the cores shared
PJ_LOG=() PJ_PID=() PJ_T0=()
P() {
    local t=$1 log=$2 pid n; shift 2
    fits "$t" || { PJ_LOG+=("$log"); PJ_PID+=(0); PJ_T0+=("$SECONDS"); return 0; }
    while :; do
        n=0
        for pid in "${PJ_PID[@]}"; do [ "$pid" != 0 ] && kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done
        [ "$n" -lt "$JOBS" ] && break
        sleep 0.2
    done
    ( timeout "$t" env OPENBLAS_NUM_THREADS=$PTH "$@" > "$OUT/$log" 2>&1; echo "$? $SECONDS" > "$OUT/$log.rc" ) &
    PJ_LOG+=("$log"); PJ_PID+=($!); PJ_T0+=("$SECONDS")
}
Pwait() {
    local i log
    for i in "${!PJ_LOG[@]}"; do
        log=${PJ_LOG[$i]}
        [ "${PJ_PID[$i]}" = 0 ] && { echo "$log: skipped (budget)"; continue; }
        wait "${PJ_PID[$i]}"
        read -r rc end < "$OUT/$log.rc"
        echo "rc=$rc ($log, ${PJ_T0[$i]}-${end} s)"
        grep -E "Test:.*FAIL|^ *[0-9]+\. |bf16.*max abs diff|tests |asserts|ERROR SUMMARY" "$OUT/$log" | cut -c1-200 | head -n 12
        [ "$rc" = 0 ] || tail -n 3 "$OUT/$log" | cut -c1-200 # a crash, a timeout, a missing tool
    done
    PJ_LOG=() PJ_PID=() PJ_T0=()
}
# one bench run: LIMIT [ENV=...] srkit bench ARGS; its JSON lines (one, or one per
# --cuda-variants variant) to bench.jsonl, a summary of each here, and srkit's own error lines
B() {
    local t=$1; shift
    echo "== $*"
    fits "$t" || return 0
    timeout "$t" env "$@" --json 2>&1 | tee /tmp/b.out | grep -E "^[{]|^srkit" | tee -a "$OUT/bench.jsonl" | python3 -c '
import json, sys
run = ["precision", "streams", "stream_chunk_ms", "rtf", "rtfx", "chunk_ms_p50", "chunk_ms_p99", "model_ms_p50",
       "decoder_ms_p50", "latency_ms_p50", "latency_ms_p99", "realtime_ok", "partial_latency_ms_p99", "end_lag_ms",
       "steady_latency_ms_p99", "steady_step_ms_p50", "steady_step_ms_p99", "steady_step_streams_mean",
       "engine_busy", "final_chunk_compute_ms", "streams_state_bytes", "gpu_peak_bytes", "cuda_graphs", "cuda_pdl"]
variant = ["variant", "rtf", "rtf_fed", "finish_ms", "chunk_ms_p50", "model_ms_p50", "decoder_ms_p50", "final_chunk_compute_ms",
           "cuda_graphs", "cuda_pdl", "text"]
seen = 0
for t in sys.stdin:
    if not t.startswith("{"): print("  ", t.strip()); continue
    j = json.loads(t)
    seen += 1
    if "text" in j: j["text"] = j["text"][:24]
    # a one-stream variant: the batch-1 figures; a --streams run (variant or not): the figures of runs
    ks = variant if "variant" in j and "streams" not in j else (["variant"] if "variant" in j else []) + run
    print("  ", {k: (round(j[k], 3) if isinstance(j[k], float) else j[k]) for k in ks if k in j})
if not seen: print("  (no result)", open("/tmp/b.out").read()[-300:])'
}

# the tensor-core GEMM table's ROWS (an alternation: "32|64|256") at each "N K" shape, once per
# VALUE of the CUDA table's setting VAR: G VAR "VALUES" ROWS SHAPE...
G() {
    local var=$1 vals=$2 rows=$3 nk v; shift 3
    for nk in "$@"; do
        for v in $vals; do
            echo "-- N ${nk% *} K ${nk#* }, $var=$v"
            fits 20 && env "$var=$v" timeout 20 srkit bench gemm --device cuda --tensor-cores \
                --n "${nk% *}" --k "${nk#* }" | grep -E "^ +($rows) \|"
        done
    done
}

if want check; then
# the suites (every CUDA op against the CPU op, every attention form; batched == solo on the
# device), queued here and reported by Pwait below
P 90 suites.log test_srkit kernels_cuda engine_equals_solo/cuda
# memcheck of the op suite (the split attention form, overlapping launches, i8 products) and of
# batched == solo at 1 and 8 streams, early: the longest jobs
P 150 memcheck.log /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 10 test_srkit kernels_cuda
P 180 memcheck-engine.log SRKIT_TEST_CUDA_MAX_STREAMS=8 /usr/local/cuda/bin/compute-sanitizer --tool memcheck \
    --print-limit 10 test_srkit engine_equals_solo/cuda
# engine_equals_solo's larger batches pick the narrow attention form by size: here every launch wide
P 90 wide.log SRKIT_CUDA_ATTN=wide test_srkit engine_equals_solo/cuda
# and the grouped form wherever it applies (GQA: Voxtral's decoder; the rest falls back to narrow)
P 90 grouped.log SRKIT_CUDA_ATTN=grouped test_srkit engine_equals_solo/cuda
# and the split form (K and V pools of one type: all of them), with the three goldens
P 90 split.log SRKIT_CUDA_ATTN=split test_srkit engine_equals_solo/cuda
P 90 split-vx.log SRKIT_CUDA_ATTN=split SRKIT_TEST_DEVICE=cuda test_srkit voxtral_parity whisper_parity fastconformer_parity
# and the rows form (up to 4 rows of a sequence a block: every encoder, the prompts), not yet
# run on a device: batched == solo and the goldens with every launch it applies to in it
P 90 rows.log SRKIT_CUDA_ATTN=rows test_srkit engine_equals_solo/cuda
P 90 rows-vx.log SRKIT_CUDA_ATTN=rows SRKIT_TEST_DEVICE=cuda test_srkit voxtral_parity whisper_parity fastconformer_parity
# recording (SRKIT_CUDA_GRAPH=1: Voxtral's encoder round and decoder pass each submitted as one
# CUDA graph, patched with each step's arguments): kernels_cuda/recording above checks the
# recorded ops' bits; here batched == solo, Voxtral's goldens and its stream suites with it
P 90 graph.log SRKIT_CUDA_GRAPH=1 test_srkit engine_equals_solo/cuda
P 90 graph-vx.log SRKIT_CUDA_GRAPH=1 SRKIT_TEST_DEVICE=cuda test_srkit voxtral_parity voxtral_stream voxtral_batch
# Whisper records its decoder passes too (a pass of one group, up to its copy to the host),
# FastConformer each round's layers
P 90 graph-wh.log SRKIT_CUDA_GRAPH=1 SRKIT_TEST_DEVICE=cuda test_srkit whisper_parity whisper_batch whisper_stream \
    fastconformer_parity fastconformer_batch fastconformer_tdt
# replayed recording (SRKIT_CUDA_GRAPH=replay, never run on a device yet): a step's launches kept
# without capture and only the changed ones set anew in its graph (kernels_cuda/
# replayed_recording and overlapping_launches above check the bits of a chain); here the same
# suites as recording's
P 90 replay.log SRKIT_CUDA_GRAPH=replay test_srkit engine_equals_solo/cuda
P 90 replay-vx.log SRKIT_CUDA_GRAPH=replay SRKIT_TEST_DEVICE=cuda test_srkit voxtral_parity voxtral_stream voxtral_batch
P 90 replay-wh.log SRKIT_CUDA_GRAPH=replay SRKIT_TEST_DEVICE=cuda test_srkit whisper_parity whisper_batch whisper_stream \
    fastconformer_parity fastconformer_batch fastconformer_tdt
# the staged mma GEMM (above 16 rows) with its operands through cp.async (SRKIT_CUDA_GEMM_ASYNC=1,
# never run on a device): kernels_cuda's gemm test compares its bits with the register form
# above; here batched == solo and the goldens (every encoder's rows) with it
P 90 async.log SRKIT_CUDA_GEMM_ASYNC=1 test_srkit engine_equals_solo/cuda
P 90 async-parity.log SRKIT_CUDA_GEMM_ASYNC=1 SRKIT_TEST_DEVICE=cuda test_srkit voxtral_parity whisper_parity \
    fastconformer_parity voxtral_batch
# overlapping launches are the default since the fifth session (each kernel's blocks start while
# the one ahead runs and wait for it in sr_pdl_enter; the mma GEMM prefetches its weight
# meanwhile), so every suite above ran with them: here the plain launches, alone and recorded
# (kernels_cuda/overlapping_launches checks a dependent chain's bits both ways)
P 90 pdl.log SRKIT_CUDA_PDL=0 test_srkit engine_equals_solo/cuda
P 90 pdl-vx.log SRKIT_CUDA_PDL=0 SRKIT_CUDA_GRAPH=1 SRKIT_TEST_DEVICE=cuda test_srkit voxtral_parity voxtral_stream \
    engine_equals_solo/cuda
# the first tensor-core kernel (SRKIT_CUDA_GEMM=wmma, unchanged since the third device session,
# where batched == solo and the bf16 goldens passed with it): kernels_cuda above checks it
# against the double reference; WMMA=1 runs those suites with it again
if [ "${WMMA:-0}" = 1 ]; then
    P 90 wmma.log SRKIT_CUDA_GEMM=wmma test_srkit engine_equals_solo/cuda
    P 90 wmma-parity.log SRKIT_CUDA_GEMM=wmma SRKIT_TEST_DEVICE=cuda test_srkit whisper_parity \
        fastconformer_parity voxtral_parity
fi
# (voxtral_parity/int8_bf16_products: the i8 weights' bf16 products, the mma kernel's i8 form)
P 90 parity.log SRKIT_TEST_DEVICE=cuda test_srkit whisper_parity fastconformer_parity voxtral_parity
# the suites that reach the backends through their ops and the public API (others read host
# tensors of a loaded model directly and are CPU-only), each in its own process and time limit
for s in whisper_batch fastconformer_batch voxtral_batch voxtral_stream whisper_stream \
         whisper_silence fastconformer_tdt decoders_stable decoders_aed engine_api engine_equals_solo; do
    P 60 "api-$s.log" SRKIT_TEST_DEVICE=cuda test_srkit $s
done
echo "== suites, memchecks and API suites on the device ($JOBS at a time; in the order queued)"
Pwait
# SRKIT_PROFILE=device (CUDA events around each op) on real weights: each op's device time, the
# device's share of the wall, the gemm weights' GB/s (the figures part takes it on Voxtral)
echo "== SRKIT_PROFILE=device, causal tiny.en int8, 3 s"
fits 20 && SRKIT_PROFILE=device timeout 20 srkit bench --device cuda --model "$X/whisperrt-tiny.en-i8.h5" \
    --audio $A --max-ms 3000 2>&1 | grep -E "^op|^[a-z_]+ +[0-9]|^all ops|^the device|^gemm by|^[0-9]+ x " | head -n 30

fi
if want figures; then
# the open goals' figures first (Voxtral mini-4b batch 1 and 64 streams: its model is made
# in the background meanwhile, the GEMM table of the decoder's shapes filling the wait), then
# the cp.async GEMM table, bench attn, and the goals already met (Nemotron, Whisper). FIGS
# (e.g. "vx64 vx8 nemo") runs only the sections named (below: gemm vx1 vxdev vx64 vxbf16 vx8
# vxhost vxbase async attn nemo whisper), so that a second call takes what the first had no
# time for; empty: all of them, in this order.
if fig gemm; then
echo "== bench gemm (wmma against mma; GEMMALL=1: the whole table with the f32 products)"
if [ "${GEMMALL:-0}" = 1 ] && fits 45; then timeout 45 srkit bench gemm --device cuda | tail -n 36; fi
# 4096 x 4096, then Voxtral mini-4b's decoder products (qkv, o, gate|up, down, the logits)
for nk in "4096 4096" "6144 3072" "3072 4096" "18432 3072" "3072 9216" "131072 3072"; do
    set -- $nk
    echo "-- N $1 K $2"
    fits 20 && timeout 20 srkit bench gemm --device cuda --tensor-cores --n $1 --k $2 | grep -E "^ +(1|4|8|64) \|"
    # the base build right after (the one-row kernel's x operands and i8 widening changed
    # after the fifth session: its bf16 and i8 columns against the same kernel before)
    if [ -n "$BASE" ] && fits 20; then
        echo "   base:"; timeout 20 "$BASE" bench gemm --device cuda --tensor-cores --n $1 --k $2 | grep -E "^ +(1|4|8|64) \|"
    fi
done
fi
C='--device cuda --precision bf16'
# max_seconds: each stream's decoder ring for 30 s of audio instead of 8,192 positions
# (64 whole-window streams need 82 GB of state: more than an H100 holds)
VS='{"cache_dtype": "bf16", "max_seconds": 30}'
# the finish spread over steps (stream.final_steps: 4 of its 49 decoder steps an engine step)
VF='{"cache_dtype": "bf16", "max_seconds": 30, "final_steps": 4}'
# the 8.8 GB file took the device 2-4 minutes to write with one process (the first call of the
# fourth session had not finished it after 200 s of suites and benches); it is made by 8 worker
# processes now (make_synthetic.py --jobs), not yet timed there
if ! { fig vx1 || fig vxdev || fig vx64 || fig vxbf16 || fig vx8 || fig vxhost || fig vxbase; }; then
    :
elif [ -f /tmp/m/vx.done ] || { fits 200 && { for i in $(seq 200); do [ -f /tmp/m/vx.done ] && break; sleep 1; done; [ -f /tmp/m/vx.done ]; }; }; then
    V=/tmp/m/vx.h5
    # batch 1 under the CUDA table's settings, on one load of the model, runs interleaved (two
    # of each): the defaults (pdl: overlap, the form by size), plain (no overlap), recorded with
    # overlap, the narrow form (the rule before the fifth session), the rows form for the
    # encoder's 4 rows a chunk (the decoder's 1 row: groups of one), replayed (no capture a step:
    # only the launches whose arguments moved set anew), replayed with the split form
    fig vx1 && B 150 srkit bench $C --model $V --audio $A --max-ms 10000 --repeat 2 --cuda-variants \
        pdl,plain,pdl+graph,pdl+narrow,pdl+rows,pdl+replay,pdl+replay+split
    # where the device time of a batch-1 step and of a 64-stream step goes (never measured
    # without a wait after each op; a 64-stream step never at all: its p50 was 43 ms of an 80 ms
    # chunk): each op's device time between events, the gemm weights' GB/s at their rows, the
    # attention classes', and the device's share of the wall (near 100 %: the kernels bound it)
    if fig vxdev; then
        echo "== SRKIT_PROFILE=device, Voxtral mini-4b shape, batch 1"
        fits 40 && SRKIT_PROFILE=device timeout 40 srkit bench $C --model $V --audio $A --max-ms 3000 2>&1 | tail -n 130
        echo "== SRKIT_PROFILE=device, Voxtral mini-4b shape, 64 streams, 3 s"
        fits 45 && SRKIT_PROFILE=device timeout 45 srkit bench $C --streams 64 --model $V --audio $A --stream "$VF" \
            --max-ms 3000 2>&1 | grep -E "^op|^[a-z_]+ +[0-9]|^all ops|^the device|^gemm by|^weight|^[0-9]+ x |^attn by|^heads|^[0-9]+/[0-9]+ x " | head -n 50
    fi
    # on one load of the model: the defaults (overlap; the form by size: grouped for the
    # decoder's 64 rows), the encoder's 256 rows in the rows form, replayed, the products above
    # 16 rows through cp.async, both
    if fig vx64; then
        B 170 srkit bench $C --streams 64 --realtime --model $V --audio $A --stream "$VF" --max-ms 10000 \
            --cuda-variants pdl,pdl+rows,pdl+replay,pdl+async,pdl+replay+async
        [ "${WALL:-0}" = 1 ] && B 60 srkit bench $C --streams 64 --realtime --model $V --audio $A --stream "$VS" --max-ms 10000
    fi
    # bf16 K/V caches at batch 1 (as the 64-stream runs and torch's bf16 inference keep them):
    # half the bytes each attention call reads (the encoder's 4 rows a chunk over 750 keys, the
    # decoder's ring), with the rows form for the encoder's rows
    fig vxbf16 && B 60 srkit bench $C --model $V --audio $A --max-ms 10000 --repeat 2 --stream '{"cache_dtype": "bf16"}' \
        --cuda-variants pdl,pdl+rows,pdl+replay
    # the int8 file: half the weight bytes a step (made alongside; waits at most 60 s more)
    if ! fig vx8; then
        :
    elif [ -f /tmp/m/vx8.done ] || { fits 100 && { for i in $(seq 60); do [ -f /tmp/m/vx8.done ] && break; sleep 1; done; [ -f /tmp/m/vx8.done ]; }; }; then
        B 80 srkit bench $C --model /tmp/m/vx8.h5 --audio $A --max-ms 10000 --repeat 2 \
            --cuda-variants pdl,pdl+rows,pdl+replay
        [ -n "$BASE" ] && B 40 "$BASE" bench $C --model /tmp/m/vx8.h5 --audio $A --max-ms 10000
    else
        echo "== int8 voxtral not ready: $(tail -n 1 "$OUT/synthvx8.log")"
    fi
    if fig vxhost; then
        # the host's time inside each op at 64 streams (plain: no waits)
        echo "== SRKIT_PROFILE=1, Voxtral mini-4b shape, 64 streams, 3 s"
        fits 45 && SRKIT_PROFILE=1 timeout 45 srkit bench $C --streams 64 --model $V --audio $A --stream "$VF" \
            --max-ms 3000 2>&1 | grep -E "^op|^[a-z_]+ +[0-9]|^all ops" | head -n 20
        # where a batch-1 step goes without waiting after each op: the GPU's kernel time against
        # the wall, and the host's launch calls (Nsight Systems, where the image has it)
        NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1)
        echo "== nsys, Voxtral mini-4b shape, batch 1, 3 s (${NSYS:-no nsys on this machine})"
        if [ -n "$NSYS" ] && fits 90; then
            timeout 60 "$NSYS" profile -t cuda -o /tmp/vxp --force-overwrite true srkit bench $C --model $V \
                --audio $A --max-ms 3000 > "$OUT/nsys-run.log" 2>&1
            for r in cuda_gpu_kern_sum cuda_api_sum; do
                timeout 30 "$NSYS" stats -q --report $r --format csv /tmp/vxp.nsys-rep 2>/dev/null > "$OUT/nsys-$r.csv"
                head -n 14 "$OUT/nsys-$r.csv" | cut -d, -f1-6,9 | cut -c1-160
            done
            grep -E "wall|RTF|per-chunk" "$OUT/nsys-run.log" | head -n 4
        fi
        # the host's time inside each op at batch 1 (plain: no waits, so a step's ops summing to
        # its wall means the host's launches bound it), and replayed (1r: each op's time is its
        # launch kept, graph_end's the comparison, the launches set anew and the graph's launch)
        for mode in 1 1r; do
            echo "== SRKIT_PROFILE=$mode, Voxtral mini-4b shape, batch 1"
            if [ -z "$NSYS" ] && fits 40; then
                g=0; [ $mode = 1r ] && g=replay
                SRKIT_CUDA_GRAPH=$g SRKIT_PROFILE=1 timeout 40 srkit bench $C --model $V --audio $A --max-ms 3000 2>&1 | tail -n 90
            fi
        done
    fi
    # the base build at one stream, 3 s streams
    if fig vxbase; then
        [ -n "$BASE" ] && B 40 "$BASE" bench $C --model $V --audio $A --max-ms 10000
        B 45 srkit bench $C --streams 64 --realtime --model $V --audio $A --stream "$VF" --max-ms 3000
    fi
else
    echo "== voxtral model not ready: $(tail -n 1 "$OUT/synthvx.log")"
fi

# above 16 rows, the staged mma kernel's operands through cp.async against registers (the 64
# streams' decoder products at 32 / 64 rows, their encoder's at 256; Voxtral's encoder shapes too)
fig async && G SRKIT_CUDA_GEMM_ASYNC "0 1" "32|64|256" "6144 3072" "18432 3072" "3072 9216" "131072 3072" \
    "3840 1280" "10240 1280"

if fig attn; then
echo "== bench attn (fused vs unfused): the form by size, the grouped, split and rows forms interleaved (FORMS=1: all six, and the base build)"
forms="auto,grouped,split,rows,narrow"; [ "${FORMS:-0}" = 1 ] && forms="auto,grouped,split,rows,wide,narrow"
fits 60 && timeout 60 srkit bench attn --device cuda --streams 1 --streams 64 --streams 256 --forms $forms | grep -E "^ +[0-9]"
if [ "${FORMS:-0}" = 1 ] && [ -n "$BASE" ] && fits 40; then timeout 40 "$BASE" bench attn --device cuda --streams 1 --streams 64 --streams 256 | grep -E "^ +[0-9]"; fi
fi
[ -n "$J1" ] && { wait $J1; tail -n 2 "$OUT/synth.log"; }
N=/tmp/m/nemo.h5
if fig nemo; then
B 25 srkit bench $C --streams 512 --realtime --model $N --audio $A --stream '{"att_context": [70,0]}' --max-ms 4000
# each round's 24 layers recorded (480 launches as one graph), at 512 streams and at batch 1
B 25 SRKIT_CUDA_GRAPH=1 srkit bench $C --streams 512 --realtime --model $N --audio $A --stream '{"att_context": [70,0]}' --max-ms 4000
B 40 srkit bench $C --model $N --audio $A --stream '{"att_context": [70,0]}' --max-ms 6000 --repeat 2 \
    --cuda-variants plain,graph,pdl,pdl+graph,pdl+replay
if [ "${NEMO:-0}" = 1 ]; then # the rest of the goal's figures (met in the fourth session)
    B 25 srkit bench $C --streams 640 --realtime --model $N --audio $A --stream '{"att_context": [70,0]}' --max-ms 4000
    B 25 srkit bench $C --streams 512 --realtime --model $N --audio $A --stream '{"att_context": [70,1]}' --max-ms 4000
fi
fi
# the causal tiny.en fine-tune (int8 copy: the f16 file does not fit the transfer), real speech
R=$X/whisperrt-tiny.en-i8.h5
if [ -f "$R" ] && fig whisper; then
    for ms in 100 ${WALL:+300}; do
        B 25 srkit bench --device cuda --streams 64 --realtime --model $R --audio $A \
            --stream "{\"strategy\": \"whisperrt\", \"chunk_ms\": $ms, \"decoder\": \"stable_greedy\"}" --max-ms 6000
    done
    # the same with the decoder passes recorded (one graph a pass instead of about 65 launches)
    B 25 SRKIT_CUDA_GRAPH=1 srkit bench --device cuda --streams 64 --realtime --model $R --audio $A \
        --stream '{"strategy": "whisperrt", "chunk_ms": 100, "decoder": "stable_greedy"}' --max-ms 6000
    [ -n "${WALL:-}" ] && B 20 srkit bench --device cuda --model $R --audio $A --stream '{"strategy": "offline"}'
    # one 30 s window offline: the defaults (pdl: overlap, the form by size, which takes split
    # for the decoder's cross-attention: 2.1x the fifth session's decoding), plain (no overlap),
    # the narrow form, and the rows form everywhere (its encoder: 1,500 rows, each block 4 of
    # them over one read of the keys; model_ms is the encoder, decoder_ms the decoding), recorded
    B 30 srkit bench --device cuda --model $R --audio $A --stream '{"strategy": "offline"}' --repeat 3 \
        --cuda-variants pdl,plain,pdl+narrow,pdl+rows,pdl+graph,pdl+replay
fi
# the GEMM column settings and overlapping runs (measured in the fifth session: both column
# settings stay off; GEMMCOLS=1 takes them again)
if [ "${GEMMCOLS:-0}" = 1 ]; then
# above 16 rows: 16 (the default) against 32 columns a block (auto would pick 32 here)
G SRKIT_CUDA_GEMM_COLS "16 32" "32|64|256" "6144 3072" "18432 3072" "131072 3072"
# up to 16 rows: 8 columns a block against the table above's 16 (the weights of 192 and 256
# blocks of 16: o, down, 4096 x 4096)
G SRKIT_CUDA_GEMM_COLS 8 "1|4|8|16" "3072 4096" "3072 9216" "4096 4096"
# runs of 16 products with plain launches against the table above's overlapping ones (the
# default: each call's weight prefetched while the one ahead runs)
G SRKIT_CUDA_PDL 0 "1|4|8|64" "6144 3072" "3072 4096"
fi

fi
if want figures && fig whisper; then
W=/tmp/m/wt.h5
echo "== SRKIT_PROFILE=sync, Whisper tiny shape whisperrt 100 ms, 64 streams (WPROF=1)"
if [ "${WPROF:-0}" = 1 ] && fits 30; then
    SRKIT_PROFILE=sync timeout 30 srkit bench --device cuda --streams 64 --model $W --audio $A \
        --stream '{"strategy": "whisperrt", "chunk_ms": 100, "decoder": "stable_greedy"}' --max-ms 2000 2>&1 | tail -n 28
fi
# Whisper offline on the device: one 30 s window's exact (f32) encoder took 15.4 ms on the H200
# against transformers' 2.6 ms (f32, cuBLAS), and greedy decoding about 2.7 ms a token (109 ms
# for the 10.4 s file), where transformers' eager step took 2.4-2.8: which ops hold either was
# never measured. The causal fine-tune on a 10.4 s file, each op's device time between events
# (device: also the gemm weights' GB/s), then the host's time in each op (1; a long download
# there is the host waiting for the queue)
for mode in device 1; do
    echo "== SRKIT_PROFILE=$mode, tiny.en offline (one 30 s window, greedy)"
    if [ -f "$R" ] && fits 25; then
        SRKIT_PROFILE=$mode timeout 25 srkit bench --device cuda --model $R --audio $A --stream '{"strategy": "offline"}' 2>&1 | grep -v "^model\|^audio"
    fi
done
fi
# the peer on the same weights and GPU: transformers (docs/benchmarks.md; measured in the second
# device session, so only with PEERS=1: the rest of the script fills most of a call)
{ [ "${PEERS:-0}" = 1 ] && want figures; } || { nvidia-smi --query-gpu=name,memory.used --format=csv,noheader; exit 0; }
echo "== transformers Whisper (f32, then bf16), streams 1 and 64"
[ -f "$R" ] && WP=$R || WP=$W
for dt in f32 bf16; do
    timeout 60 python3 scripts/bench_whisper_transformers.py $WP --device cuda --dtype $dt --streams 1 64 2>/dev/null
done
if [ -f /tmp/m/vx.done ]; then
    echo "== transformers Voxtral (bf16, batch 1)"
    timeout 120 python3 scripts/bench_voxtral_transformers.py /tmp/m/vx.h5 --device cuda --audio noise \
        --seconds 3 2>/tmp/tv.err | python3 -c 'import json, sys
j = json.load(sys.stdin); j.pop("steps", None); print(j)' || tail -n 3 /tmp/tv.err
fi
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
