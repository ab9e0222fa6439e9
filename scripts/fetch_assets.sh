#!/usr/bin/env bash
# Fetch the third-party data files srkit reads at run time but does not ship, into
# ${SRKIT_HOME:-~/.cache/srkit}/assets/. Idempotent: files already present with the expected
# sha256 are kept and nothing is downloaded (works offline then). Used by `make setup`.
#
#   whisper_english.json  British -> American spelling map of openai-whisper's
#                         EnglishTextNormalizer (the `whisper_en` normalizer, eval/normalizer.c),
#                         extracted from the pinned openai-whisper source distribution on PyPI,
#                         whose sha256 is checked before anything is extracted.
#
# Download: `python3 -m pip download --no-deps` with the first python that has pip and succeeds
# (PYTHON, then python3 on PATH, /usr/bin/python3 — Debian package python3-pip —, the reference
# venv). The sdist is cached in $SRKIT_HOME/downloads.
set -euo pipefail

WHISPER_VERSION=20250625
WHISPER_SDIST=openai_whisper-${WHISPER_VERSION}.tar.gz
WHISPER_SDIST_SHA256=37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96
ENGLISH_JSON_MEMBER=openai_whisper-${WHISPER_VERSION}/whisper/normalizers/english.json
ENGLISH_JSON_SHA256=6607f948be9824d2e1b2fa2223cd94c06c45afa4e05ea0e3d5e1f2bdffde2465

SRKIT_HOME=${SRKIT_HOME:-$HOME/.cache/srkit}
ASSETS=$SRKIT_HOME/assets
DOWNLOADS=$SRKIT_HOME/downloads
TARGET=$ASSETS/whisper_english.json

sha_ok() { # FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if sha_ok "$TARGET" "$ENGLISH_JSON_SHA256"; then
  echo "fetch_assets: $TARGET present"
  exit 0
fi

mkdir -p "$ASSETS" "$DOWNLOADS"
SDIST=$DOWNLOADS/$WHISPER_SDIST

if ! sha_ok "$SDIST" "$WHISPER_SDIST_SHA256"; then
  rm -f "$SDIST"
  tmp=$(mktemp -d "$DOWNLOADS/pip.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  got=""
  for py in ${PYTHON:-} python3 /usr/bin/python3 "$SRKIT_HOME/venv-ref/bin/python"; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then
      echo "fetch_assets: $py -m pip download openai-whisper==$WHISPER_VERSION"
      if "$py" -m pip download --quiet --no-deps \
           "openai-whisper==$WHISPER_VERSION" -d "$tmp" && [ -f "$tmp/$WHISPER_SDIST" ]; then
        got="$tmp/$WHISPER_SDIST"
        break
      fi
    fi
  done
  if [ -z "$got" ]; then
    echo "fetch_assets: could not download openai-whisper==$WHISPER_VERSION with pip (tried" \
         "${PYTHON:-} python3 /usr/bin/python3 $SRKIT_HOME/venv-ref/bin/python); Debian's pip is" \
         "the python3-pip package" >&2
    exit 1
  fi
  if ! sha_ok "$got" "$WHISPER_SDIST_SHA256"; then
    echo "fetch_assets: $WHISPER_SDIST: sha256 mismatch (want $WHISPER_SDIST_SHA256)" >&2
    exit 1
  fi
  mv "$got" "$SDIST"
fi

# Extract to a temporary name, check, then rename: the target is either absent or complete.
part=$(mktemp "$ASSETS/.whisper_english.json.XXXXXX")
tar -xzf "$SDIST" -O "$ENGLISH_JSON_MEMBER" >"$part"
if ! sha_ok "$part" "$ENGLISH_JSON_SHA256"; then
  rm -f "$part"
  echo "fetch_assets: $ENGLISH_JSON_MEMBER in $WHISPER_SDIST: sha256 mismatch" >&2
  exit 1
fi
chmod 644 "$part"
mv -f "$part" "$TARGET"
echo "fetch_assets: installed $TARGET"
