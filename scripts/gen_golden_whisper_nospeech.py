#!/usr/bin/env python3
"""gen_golden_whisper_nospeech.py — no-speech goldens for the Whisper backend's silence gate
(tests/test_whisper.c, suite whisper_silence). Run with the reference venv:
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/gen_golden_whisper_nospeech.py
Needs ${SRKIT_HOME}/models/whisper-tiny.en.h5 (make models) and ../shared/data.
Writes tests/fixtures/whisper/tiny_en_nospeech.h5 with one group per input:
  jfk         speech-samples/jfk.wav
  zero_3s     3 s of digital silence
  noise_3s    3 s of uniform noise, amplitude 1e-3 (about -60 dBFS)
  noise10_3s  the same noise times 10 (about -40 dBFS)
each holding what openai-whisper's decode() (temperature 0, without timestamps, on the audio
padded to 30 s, the same weights read from the srkit file) reports: no_speech_prob [1],
avg_logprob [1] (float32) and tokens (int64); and avg_logprob_srkit_rules [1]: the same tokens'
average log-prob (final EOT included, over tokens + 1) under srkit's logit rules (every special
token but EOT suppressed, timestamps included, which decode(without_timestamps=True) leaves
open), computed with openai's modules. The noise is a 32-bit LCG the C test reproduces:
s = s * 1664525 + 1013904223 (mod 2^32) from s = 1, sample = ((s >> 8) / 2^23 - 1) * amplitude,
computed in float32.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_golden_whisper  # noqa: E402
import whisper  # noqa: E402
import h5py  # noqa: E402
import soundfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper", "tiny_en_nospeech.h5")
SHARED = os.environ.get("SRKIT_SHARED", os.path.join(ROOT, "..", "shared", "data"))
HOME = os.environ.get("SRKIT_HOME", os.path.expanduser("~/.cache/srkit"))
REAL = os.path.join(HOME, "models", "whisper-tiny.en.h5")


def lcg_noise(n, amplitude):
    """The C test's noise: float32 arithmetic step by step."""
    out = np.empty(n, np.float32)
    s = 1
    amp = np.float32(amplitude)
    for i in range(n):
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        x = np.float32(np.float32(s >> 8) / np.float32(8388608.0)) - np.float32(1.0)
        out[i] = np.float32(x * amp)
    return out


def srkit_rules_avg(model, cfg, mel, toks):
    """Average log-prob of toks + EOT under srkit's rules: suppress_tokens and every id above
    EOT at each step, begin_suppress_tokens too at the first."""
    t = cfg["tokens"]
    prompt = [t["sot"], t["no_timestamps"]]
    with torch.no_grad():
        enc = model.encoder(mel[None])
        lg = model.decoder(torch.tensor([prompt + toks]), enc)[0, len(prompt) - 1:].double()
    sup = sorted(set(cfg["suppress_tokens"]) | set(range(t["eot"] + 1, cfg["n_vocab"])))
    lg[:, sup] = -np.inf
    lg[0, cfg["begin_suppress_tokens"]] = -np.inf
    lp = torch.log_softmax(lg, dim=-1)
    total = sum(float(lp[i, k]) for i, k in enumerate(toks)) + float(lp[len(toks), t["eot"]])
    return total / (len(toks) + 1)


def main():
    if not os.path.exists(REAL):
        sys.exit("%s absent (make models)" % REAL)
    torch.set_num_threads(2)
    model, attrs, cfg = gen_golden_whisper.openai_model(REAL)
    opts = gen_golden_whisper.GREEDY
    jfk, sr = soundfile.read(os.path.join(SHARED, "speech-samples", "jfk.wav"), dtype="float32")
    assert sr == 16000
    noise = lcg_noise(3 * 16000, 1e-3)
    inputs = [("jfk", jfk), ("zero_3s", np.zeros(3 * 16000, np.float32)),
              ("noise_3s", noise), ("noise10_3s", lcg_noise(3 * 16000, 1e-2))]
    with h5py.File(OUT, "w") as f:
        for name, audio in inputs:
            mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(audio)))
            r = whisper.decode(model, mel, opts)
            avg_srkit = srkit_rules_avg(model, cfg, mel, list(r.tokens))
            g = f.create_group(name)
            g["no_speech_prob"] = np.array([r.no_speech_prob], np.float32)
            g["avg_logprob"] = np.array([r.avg_logprob], np.float32)
            g["avg_logprob_srkit_rules"] = np.array([avg_srkit], np.float32)
            g["tokens"] = np.array(r.tokens, np.int64)
            print("%-10s no_speech_prob %.6f avg_logprob %.6f (srkit rules %.6f) %r" % (
                name, r.no_speech_prob, r.avg_logprob, avg_srkit, r.text))
        f.attrs["source"] = "openai-whisper %s on %s (%s)" % (whisper.__version__, REAL,
                                                             attrs.get("source", ""))


if __name__ == "__main__":
    main()
