#!/usr/bin/env bash
# bench_streams.sh — how many streams one batched engine keeps in real time: `srkit bench
# --streams N --realtime` for each N, one table row per run (p50 / p90 / p99 latency from a
# chunk's last sample to its result, and whether p99 stays within the chunk).
#
#   scripts/bench_streams.sh MODEL.h5 AUDIO STREAM_JSON MAX_MS "1 2 4 8 16 32" [srkit options]
#
# e.g. scripts/bench_streams.sh ~/.cache/srkit/models/whisper-tiny.en.h5 \
#        ../shared/data/librispeech-sample/1089-134686-0000.flac \
#        '{"strategy": "whisperrt", "chunk_ms": 100, "decoder": "stable_greedy"}' 10000 "1 4 8 12"
set -euo pipefail
if [ $# -lt 5 ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
model=$1 audio=$2 stream=$3 max_ms=$4 ns=$5
shift 5
bin=${SRKIT_BIN:-build/srkit}
printf '| streams | chunk ms | wall s | RTFx (all streams) | latency p50 / p90 / p99 ms | p99 <= chunk |\n'
printf '|---|---|---|---|---|---|\n'
for n in $ns; do
    "$bin" bench --streams "$n" --realtime --model "$model" --audio "$audio" --stream "$stream" \
        --max-ms "$max_ms" --json "$@" | tail -n 1 |
        /usr/bin/python3 -c 'import json, sys
j = json.load(sys.stdin)
print("| %d | %d | %.1f | %.2f | %.0f / %.0f / %.0f | %s |" % (j["streams"], j["stream_chunk_ms"],
      j["wall_s"], j["rtfx"], j["latency_ms_p50"], j["latency_ms_p90"], j["latency_ms_p99"],
      "yes" if j["realtime_ok"] else "no"))'
done
