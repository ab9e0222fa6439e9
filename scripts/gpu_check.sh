#!/usr/bin/env bash
# gpu_check.sh — the whole device check of the CUDA op set in one call of a lent GPU machine
# (issue 11): the CUDA suites, compute-sanitizer memcheck over them, then the figures of
# docs/benchmarks.md "On an NVIDIA H200/H100" on synthetic full-size models made there.
#
# Here (no GPU):  python3 scripts/recast_model.py ~/.cache/srkit/models/whisperrt-tiny.en.h5 \
#                     /tmp/whisperrt-tiny.en-i8.h5 --dtype int8     # real weights, 40 MB (xz: 28)
#                 ../shared/tools/gpu-bundle ../shared/data/librispeech-sample/1089-134686-0000.flac \
#                     ../shared/data/whisper-assets/gpt2.tiktoken /tmp/whisperrt-tiny.en-i8.h5
# Device call:    command "bash scripts/gpu_check.sh", carry [".gpu"], timeout_s 580
#                 (PEERS=1 bash scripts/gpu_check.sh also times transformers on the same weights)
# Everything goes to $OUT (log.txt, bench.jsonl, the suites' logs) and the log to stdout; each
# step has its own time limit so that one hang cannot eat the call (at most about 9.5 minutes,
# usually less: the limits are reached only by runs that do not keep up).
set -u
source .gpu/env.sh
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" /tmp/m
export OPENBLAS_NUM_THREADS=8 SRKIT_HOME=/tmp/srk
X=$SRKIT_GPU_EXTRA
A=$X/1089-134686-0000.flac
exec > >(tee "$OUT/log.txt") 2>&1
( python3 scripts/make_synthetic.py --arch fastconformer_rnnt --preset nemotron-0.6b --dtype bf16 /tmp/m/nemo.h5
  python3 scripts/make_synthetic.py --arch whisper --preset tiny --tiktoken "$X/gpt2.tiktoken" /tmp/m/wt.h5 ) \
    > "$OUT/synth.log" 2>&1 &
J1=$!
( python3 scripts/make_synthetic.py --arch voxtral_realtime --preset mini-4b --dtype bf16 --no-checksum /tmp/m/vx.h5 \
    && touch /tmp/m/vx.done ) > "$OUT/synthvx.log" 2>&1 &

echo "== suites"
timeout 60 test_srkit kernels_cuda engine_equals_solo/cuda > "$OUT/suites.log" 2>&1
echo "rc=$?"; grep -E "Test:.*FAIL|^ *[0-9]+\. |tests |asserts" "$OUT/suites.log"
# the second tensor-core kernel (SRKIT_CUDA_GEMM=mma, kernels/cuda/gemm.cu): kernels_cuda above
# checks it against the double reference; here batched == solo and the bf16 goldens with it
echo "== the mma kernel: batched == solo, bf16 goldens"
SRKIT_CUDA_GEMM=mma timeout 60 test_srkit engine_equals_solo/cuda > "$OUT/mma.log" 2>&1
echo "rc=$?"; grep -E "Test:.*FAIL|^ *[0-9]+\. |tests |asserts" "$OUT/mma.log"
SRKIT_CUDA_GEMM=mma SRKIT_TEST_DEVICE=cuda timeout 60 test_srkit whisper_parity fastconformer_parity \
    voxtral_parity > "$OUT/mma-parity.log" 2>&1
echo "rc=$?"; grep -E "Test:.*FAIL|^ *[0-9]+\. |bf16.*max abs diff|tests |asserts" "$OUT/mma-parity.log" | cut -c1-200
echo "== golden parity on the device (the CPU's tolerances)"
SRKIT_TEST_DEVICE=cuda timeout 60 test_srkit whisper_parity fastconformer_parity voxtral_parity \
    > "$OUT/parity.log" 2>&1
echo "rc=$?"; grep -E "Test:.*FAIL|^ *[0-9]+\. |max abs diff|tests |asserts" "$OUT/parity.log" | cut -c1-200
# the suites that reach the backends through their ops and the public API (others read host
# tensors of a loaded model directly and are CPU-only), each in its own process and time limit
echo "== API suites on the device"
for s in whisper_batch fastconformer_batch voxtral_batch voxtral_stream whisper_stream \
         whisper_silence fastconformer_tdt decoders_stable decoders_aed engine_api engine_equals_solo; do
    [ $SECONDS -gt 270 ] && { echo "$s: not run (the call's first 270 s are spent)"; continue; }
    SRKIT_TEST_DEVICE=cuda timeout 40 test_srkit $s > "/tmp/s-$s.log" 2>&1
    r=$?; cat "/tmp/s-$s.log" >> "$OUT/api.log"
    echo "$s rc=$r $(grep -E '^ +tests ' /tmp/s-$s.log | tr -s ' ')"; grep -E "Test:.*FAIL|^ *[0-9]+\. " "/tmp/s-$s.log" | cut -c1-200 | head -6
done
echo "== memcheck"
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 10 \
    test_srkit kernels_cuda > "$OUT/memcheck.log" 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|tests " "$OUT/memcheck.log"
SRKIT_TEST_DEVICE=cuda timeout 80 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 10 \
    test_srkit whisper_parity fastconformer_parity voxtral_parity >> "$OUT/memcheck.log" 2>&1
echo "rc=$? (parity suites on the device)"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -n 1

echo "== bench gemm (wmma against mma)"; timeout 45 srkit bench gemm --device cuda | tail -n 36

# one bench run: its JSON line to bench.jsonl, a short summary to the log
B() {
    local t=$1; shift
    echo "== $*"
    timeout "$t" srkit bench "$@" --json 2>&1 | tail -n 1 | tee -a "$OUT/bench.jsonl" | python3 -c '
import json, sys
t = sys.stdin.read()
try: j = json.loads(t)
except Exception: print("  (no result)", t[-300:]); sys.exit()
ks = ["precision", "streams", "stream_chunk_ms", "rtf", "rtfx", "chunk_ms_p50", "chunk_ms_p99", "model_ms_p50",
      "decoder_ms_p50", "latency_ms_p50", "latency_ms_p99", "realtime_ok", "streams_state_bytes", "gpu_peak_bytes"]
print("  ", {k: (round(j[k], 3) if isinstance(j[k], float) else j[k]) for k in ks if k in j})'
}
echo "== bench attn"; timeout 40 srkit bench attn --device cuda --streams 1 --streams 64 --streams 256
wait $J1; tail -n 2 "$OUT/synth.log"
N=/tmp/m/nemo.h5 C='--device cuda --precision bf16'
B 20 $C --model $N --audio $A --stream '{"att_context": [70,0]}' --max-ms 6000
B 20 $C --model $N --audio $A --stream '{"att_context": [70,1]}' --max-ms 6000
for ctx in "[70,0]" "[70,1]"; do
    for n in 64 256 512; do
        B 25 $C --streams $n --realtime --model $N --audio $A --stream "{\"att_context\": $ctx}" --max-ms 4000
    done
done
SRKIT_CUDA_GEMM=mma B 25 $C --streams 512 --realtime --model $N --audio $A --stream '{"att_context": [70,0]}' --max-ms 4000
# where a 64-stream step goes: each op waited for (device time)
for mode in sync; do
    echo "== SRKIT_PROFILE=$mode, Nemotron [70,1], 64 streams"
    SRKIT_PROFILE=$mode timeout 40 srkit bench $C --streams 64 --model $N --audio $A \
        --stream '{"att_context": [70,1]}' --max-ms 2000 2>&1 | tail -n 28
done
W=/tmp/m/wt.h5
B 25 $C --streams 64 --realtime --model $W --audio $A \
    --stream '{"strategy": "whisperrt", "chunk_ms": 100, "decoder": "stable_greedy"}' --max-ms 4000
B 20 --device cuda --model $W --audio $A --stream '{"strategy": "offline"}'
# where a 64-stream Whisper step goes (the decoder's passes, the logits' one copy a pass)
for mode in 1 sync; do
    echo "== SRKIT_PROFILE=$mode, Whisper tiny shape whisperrt 100 ms, 64 streams"
    SRKIT_PROFILE=$mode timeout 30 srkit bench --device cuda --streams 64 --model $W --audio $A \
        --stream '{"strategy": "whisperrt", "chunk_ms": 100, "decoder": "stable_greedy"}' --max-ms 2000 2>&1 | tail -n 28
done
# the causal tiny.en fine-tune (int8 copy: the f16 file does not fit the transfer), real speech
R=$X/whisperrt-tiny.en-i8.h5
if [ -f "$R" ]; then
    for run in "100 64" "100 256" "300 64" "300 256"; do
        set -- $run
        B 25 --device cuda --streams $2 --realtime --model $R --audio $A \
            --stream "{\"strategy\": \"whisperrt\", \"chunk_ms\": $1, \"decoder\": \"stable_greedy\"}" --max-ms 6000
    done
    B 25 --device cuda --streams 64 --realtime --model $R --audio $A \
        --stream '{"strategy": "whisperrt", "chunk_ms": 300, "decoder": "stable_beam", "beam": 3}' --max-ms 6000
    B 20 --device cuda --model $R --audio $A --stream '{"strategy": "offline"}'
    B 20 --device cuda --model $R --audio $A
fi
if [ -f /tmp/m/vx.done ]; then
    V=/tmp/m/vx.h5
    B 40 $C --model $V --audio $A --max-ms 10000
    SRKIT_CUDA_GEMM=mma B 40 $C --model $V --audio $A --max-ms 10000
    # max_seconds: each stream's decoder ring for 30 s of audio instead of 8,192 positions
    # (64 whole-window streams need 82 GB of state: more than an H100 holds)
    VS='{"cache_dtype": "bf16", "max_seconds": 30}'
    B 40 $C --streams 64 --realtime --model $V --audio $A --stream "$VS" --max-ms 3000
    SRKIT_CUDA_GEMM=mma B 40 $C --streams 64 --realtime --model $V --audio $A --stream "$VS" --max-ms 3000
    echo "== SRKIT_PROFILE=sync, Voxtral mini-4b shape, 64 streams"
    SRKIT_PROFILE=sync timeout 40 srkit bench $C --streams 64 --model $V --audio $A --stream "$VS" \
        --max-ms 1500 2>&1 | tail -n 24
else
    echo "== voxtral model not ready: $(tail -n 1 "$OUT/synthvx.log")"
fi
# the peer on the same weights and GPU: transformers (docs/benchmarks.md; measured in the second
# device session, so only with PEERS=1: the rest of the script fills most of a call)
[ "${PEERS:-0}" = 1 ] || { nvidia-smi --query-gpu=name,memory.used --format=csv,noheader; exit 0; }
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
