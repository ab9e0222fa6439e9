#!/usr/bin/env bash
# bench_peers.sh — srkit's Whisper backend against openai-whisper and faster-whisper (offline,
# librispeech-sample) and whisperrt against reencode per chunk size (a ~60 s stream), in one run
# on this machine at one thread count. Prints markdown tables; writes $OUT/bench_peers.json and
# the hypotheses as .trn files. docs/benchmarks.md has the results and how to read them.
#
#   bash scripts/bench_peers.sh                 # everything, 2 threads
#   THREADS=4 PASSES=5 bash scripts/bench_peers.sh
#   SKIP_STREAM=1 bash scripts/bench_peers.sh   # offline comparison only
#   SKIP_PEERS=1 bash scripts/bench_peers.sh    # srkit only (no reference venv needed)
#
# The peers run from the reference venv ($VENV, default $SRKIT_HOME/venv-ref: `make venv-ref`,
# then `$VENV/bin/pip install faster-whisper`); a missing venv or package skips that row with a
# message. The orchestration needs only Debian's python3.
set -euo pipefail
cd "$(dirname "$0")/.."

export THREADS="${THREADS:-2}"
# Every BLAS / OpenMP runtime the three systems use gets the same count (torch also gets
# torch.set_num_threads, CTranslate2 cpu_threads, srkit --threads).
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
export SRKIT_HOME="${SRKIT_HOME:-$HOME/.cache/srkit}"
export MODEL="${MODEL:-$SRKIT_HOME/models/whisper-tiny.en.h5}"
export CT2="${CT2:-$SRKIT_HOME/models/ct2-tiny.en}"
export VENV="${VENV:-$SRKIT_HOME/venv-ref}"
PY="${PYTHON:-/usr/bin/python3}"
command -v "$PY" >/dev/null || PY=python3

if [ ! -x build/srkit ]; then
    echo "bench_peers: build/srkit missing; building it (make)" >&2
    make -s build/srkit
fi
if [ ! -f "$MODEL" ]; then
    echo "bench_peers: model $MODEL not found; run \`make models\` first" >&2
    exit 1
fi
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk -v l="$load" -v t="$THREADS" 'BEGIN { exit !(l > 0.5) }'; then
    echo "bench_peers: note: load average $load before starting; timings of a busy machine are slower" >&2
fi
exec "$PY" scripts/bench_peers.py "$@"
