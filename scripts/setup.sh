#!/usr/bin/env bash
# Install the Debian packages srkit needs to build, test and generate its default data.
# Idempotent; run as root (or with sudo available). Used by `make setup` and `.ci/run`.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  libopenblas-dev libhdf5-dev libsndfile1-dev libcjson-dev libcunit1-dev
  libfftw3-dev libsamplerate0-dev libunistring-dev libxxhash-dev
  espeak-ng flac sox sctk
  python3 python3-numpy python3-h5py python3-xxhash python3-venv python3-pip
  # make fuzz (tests/fuzz/): clang with libFuzzer + ASan/UBSan runtimes (libclang-rt-14-dev is
  # only a Recommends of clang-14) and llvm-symbolizer for readable stacks (llvm-14)
  clang-14 libclang-rt-14-dev llvm-14
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} Debian packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
