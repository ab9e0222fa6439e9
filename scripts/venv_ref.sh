#!/usr/bin/env bash
# Create (or refresh) the reference-implementation virtualenv used ONLY to regenerate golden
# fixtures: ${SRKIT_HOME:-$HOME/.cache/srkit}/venv-ref, outside the repository, never in git.
# It holds torch (CPU use only), openai-whisper, nemo_toolkit[asr], transformers, h5py, numpy,
# librosa and soundfile, which together cover every scripts/gen_golden_*.py generator.
# Idempotent: when every package already imports, it exits at once; rerun with FORCE=1 to upgrade.
# If the full nemo_toolkit[asr] extra cannot be installed, it falls back to nemo_toolkit itself plus
# the minimum set that `nemo.collections.asr.parts.preprocessing.features` needs to import, and says so.
set -euo pipefail

HOME_DIR="${SRKIT_HOME:-$HOME/.cache/srkit}"
VENV="$HOME_DIR/venv-ref"
PY_BASE="${PYTHON:-}"

# Pick a base interpreter that can create venvs: $PYTHON, then python3 on PATH, then Debian's.
if [ -z "$PY_BASE" ]; then
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import venv, ensurepip' >/dev/null 2>&1; then
      PY_BASE="$cand"; break
    fi
  done
fi
if [ -z "$PY_BASE" ]; then
  echo "venv_ref: no python3 with the venv and ensurepip modules (apt-get install python3-venv)" >&2
  exit 1
fi

CHECK='import torch, whisper, transformers, h5py, numpy, xxhash, librosa, soundfile
import nemo.collections.asr.parts.preprocessing.features'

if [ -x "$VENV/bin/python" ] && [ "${FORCE:-0}" != "1" ] && "$VENV/bin/python" -c "$CHECK" >/dev/null 2>&1; then
  echo "venv_ref: $VENV already complete"
  exit 0
fi

mkdir -p "$HOME_DIR"
[ -x "$VENV/bin/python" ] || "$PY_BASE" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --upgrade)
"${PIP[@]}" pip setuptools wheel

# torch first so the other packages do not pull a different build.
"${PIP[@]}" torch
"${PIP[@]}" numpy h5py xxhash soundfile librosa transformers openai-whisper

if ! "${PIP[@]}" 'nemo_toolkit[asr]'; then
  echo "venv_ref: nemo_toolkit[asr] failed to install; falling back to nemo_toolkit + minimal deps" >&2
  "${PIP[@]}" nemo_toolkit
  # What the preprocessing features module imports (directly or through nemo.collections.asr).
  "${PIP[@]}" lightning omegaconf hydra-core editdistance jiwer lhotse pyannote.core \
    sentencepiece webdataset braceexpand kaldi-python-io ruamel.yaml scipy pandas \
    wrapt wget text-unidecode || true
fi

"$VENV/bin/python" -c "$CHECK"
"$VENV/bin/python" - <<'PYEOF'
import importlib.metadata as md
for p in ("torch", "openai-whisper", "nemo_toolkit", "transformers", "librosa", "numpy", "h5py"):
    print(f"venv_ref: {p} {md.version(p)}")
PYEOF
echo "venv_ref: ready at $VENV"
