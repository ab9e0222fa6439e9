#!/usr/bin/env python3
"""Regenerate the golden fixtures for the feature front-ends (tests/test_features.c).

Runs the reference implementations on two inputs and stores inputs and outputs:
  - openai-whisper's log_mel_spectrogram (80 and 128 mels)
      -> tests/fixtures/features_whisper.h5
  - NeMo's FilterbankFeatures: the cache-aware streaming model config (128 mels, n_fft 512,
    window 0.025 s, stride 0.01 s, normalize NA, dither 0, pad_to 0) and one per_feature
    80-mel config -> tests/fixtures/features_nemo.h5
Inputs: the first CROP_S seconds of shared/data/speech-samples/jfk.wav and a synthetic
exponential chirp, both stored as float32 PCM (/input/jfk, /input/chirp) so the C test reads
the exact samples. Outputs are float32, time-major [T, n_mels] (the references give
[n_mels, T]; transposed here). Each output dataset carries its config as string attributes;
the root carries the package versions. The reference filterbanks are stored too, gzip'ed
(they are mostly zeros).

Run with the reference venv (scripts/venv_ref.sh):
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/gen_golden_features.py
"""
import argparse
import importlib.metadata as md
import os
import sys

import h5py
import numpy as np
import soundfile as sf
import torch

CROP_S = 1.6
CHIRP_S = 0.8
SR = 16000
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chirp(n):
    """Exponential sweep 60 Hz -> 7.5 kHz at amplitude 0.5, with 10 ms raised-cosine fades."""
    t = np.arange(n, dtype=np.float64) / SR
    f0, f1, dur = 60.0, 7500.0, n / SR
    k = np.log(f1 / f0) / dur
    x = 0.5 * np.sin(2 * np.pi * f0 * (np.exp(k * t) - 1.0) / k)
    fade = int(0.01 * SR)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
    x[:fade] *= ramp
    x[-fade:] *= ramp[::-1]
    return x.astype(np.float32)


def load_inputs(shared):
    jfk, sr = sf.read(os.path.join(shared, "speech-samples", "jfk.wav"), dtype="float32")
    if jfk.ndim > 1:
        jfk = jfk.mean(axis=1).astype(np.float32)
    assert sr == SR, f"jfk.wav sample rate {sr}"
    return {"jfk": np.ascontiguousarray(jfk[: int(CROP_S * SR)]), "chirp": chirp(int(CHIRP_S * SR))}


def versions():
    out = {}
    for p in ("torch", "openai-whisper", "nemo_toolkit", "librosa", "numpy"):
        out["version_" + p.replace("-", "_")] = md.version(p)
    return out


def put(grp, name, arr, attrs=None):
    d = grp.create_dataset(name, data=np.ascontiguousarray(arr, dtype=np.float32),
                           compression="gzip", compression_opts=9, shuffle=True)
    for k, v in (attrs or {}).items():
        d.attrs[k] = str(v)
    return d


def write_common(f, inputs, generator):
    f.attrs["generator"] = generator
    f.attrs["source_jfk"] = f"speech-samples/jfk.wav, first {CROP_S} s"
    f.attrs["source_chirp"] = "exponential chirp 60 Hz - 7.5 kHz, amplitude 0.5, 10 ms fades"
    for k, v in versions().items():
        f.attrs[k] = v
    g = f.create_group("input")
    for k, v in inputs.items():
        put(g, k, v, {"sample_rate": SR})


def gen_whisper(inputs, path):
    import whisper.audio as wa
    with h5py.File(path, "w") as f:
        write_common(f, inputs, "scripts/gen_golden_features.py (openai-whisper log_mel_spectrogram)")
        fg = f.create_group("filters")
        out = f.create_group("output")
        for n_mels in (80, 128):
            put(fg, f"mel_{n_mels}", wa.mel_filters("cpu", n_mels).numpy())
            cfg = {"kind": "whisper", "n_fft": wa.N_FFT, "win_length": wa.N_FFT,
                   "hop_length": wa.HOP_LENGTH, "n_mels": n_mels, "sample_rate": SR}
            for name, x in inputs.items():
                y = wa.log_mel_spectrogram(torch.from_numpy(x), n_mels=n_mels).numpy().T
                put(out, f"{name}_{n_mels}", y, dict(cfg, input=name))
                print(f"whisper {name} {n_mels}: {y.shape}")


def gen_nemo(inputs, path):
    from nemo.collections.asr.parts.preprocessing.features import FilterbankFeatures
    configs = {
        # Cache-aware streaming FastConformer preprocessor (Nemotron: 128 mels).
        "na_128": dict(n_mels=128, normalize="NA"),
        # Offline-model style preprocessor: per-feature normalization, 80 mels.
        "pf_80": dict(n_mels=80, normalize="per_feature"),
    }
    with h5py.File(path, "w") as f:
        write_common(f, inputs, "scripts/gen_golden_features.py (nemo FilterbankFeatures)")
        fg = f.create_group("filters")
        out = f.create_group("output")
        for cname, c in configs.items():
            fb = FilterbankFeatures(sample_rate=SR, n_window_size=int(0.025 * SR),
                                    n_window_stride=int(0.01 * SR), window="hann",
                                    normalize=c["normalize"], n_fft=512, preemph=0.97,
                                    nfilt=c["n_mels"], dither=0.0, pad_to=0, log=True,
                                    log_zero_guard_type="add", log_zero_guard_value=2 ** -24,
                                    mag_power=2.0, mel_norm="slaney")
            fb.eval()
            put(fg, f"mel_{c['n_mels']}", fb.fb[0].numpy())
            cfg = {"kind": "nemo", "n_fft": 512, "win_length": 400, "hop_length": 160,
                   "n_mels": c["n_mels"], "preemph": 0.97, "normalize": c["normalize"],
                   "dither": 0.0, "pad_to": 0, "sample_rate": SR}
            for name, x in inputs.items():
                with torch.no_grad():
                    y, n = fb(torch.from_numpy(x)[None], torch.tensor([len(x)]))
                y = y[0].numpy().T
                put(out, f"{name}_{cname}", y, dict(cfg, input=name, valid_frames=int(n[0])))
                print(f"nemo {name} {cname}: {y.shape}, valid {int(n[0])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(REPO, "..", "shared", "data"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    a = ap.parse_args()
    torch.set_num_threads(1)  # deterministic reductions
    inputs = load_inputs(a.shared)
    os.makedirs(a.out, exist_ok=True)
    gen_whisper(inputs, os.path.join(a.out, "features_whisper.h5"))
    gen_nemo(inputs, os.path.join(a.out, "features_nemo.h5"))
    for n in ("features_whisper.h5", "features_nemo.h5"):
        print(n, os.path.getsize(os.path.join(a.out, n)), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
