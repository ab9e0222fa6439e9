#!/usr/bin/env python3
"""bench_voxtral_transformers.py — per-step timings of transformers' VoxtralRealtimeForConditionalGeneration
on the weights of an srkit voxtral_realtime HDF5 file, for comparison with `srkit bench --json`
(model_ms_* = one 80 ms encoder step, decoder_ms_* = one decoder step) on the same weights.

On a GPU (the lent machine has torch and transformers; --audio noise needs no soundfile):
    python3 scripts/bench_voxtral_transformers.py vx.h5 --device cuda --audio noise --seconds 3

Run with the reference venv (torch, transformers >= 5, h5py, soundfile):
    OMP_NUM_THREADS=2 ~/.cache/srkit/venv-ref/bin/python scripts/bench_voxtral_transformers.py \\
        ~/.cache/srkit/models/voxtral-mini-4b-synthetic.h5 \\
        --audio ../shared/data/librispeech-sample/103-1240-0000.flac --seconds 3 --threads 2

What runs (no hub access): the config object is built from the file's config (the inverse of
scripts/gen_golden_voxtral.py's srkit_config), the model is instantiated in --dtype (bf16 by
default, as the checkpoint is published; f32 doubles the memory) and every tensor is copied in
from the HDF5 file one at a time (bf16 bit patterns reinterpreted, not rounded), the output
head tied to the embedding. Then, as the streaming protocol of docs/voxtral.md runs it:
  encoder step   get_audio_features on 8 new mel frames with the encoder's own streaming state
                 (conv padding cache + sliding-window K/V cache): mel frames -> stem -> encoder
                 -> adapter, one audio embedding per 80 ms
  prefill        the prompt's first L - 1 positions in one call of the text model
  decoder step   one position of the text model with its K/V cache (embed(prev) + a[p], the
                 delay's time conditioning) plus the tied output projection; greedy prev
The mel comes from VoxtralRealtimeFeatureExtractor on n_left * 1280 zeros + the audio. Every
call runs under torch.inference_mode with torch.set_num_threads(--threads); steps are timed
with time.perf_counter and reported as nearest-rank p50 / p90 (ms), as srkit bench does. The
first encoder step (left padding) is not counted.
Prints one JSON object (with every step's argmax: in f32 on the golden model,
tests/fixtures/voxtral/model_full.h5, they are golden.h5's first steps).
"""

import argparse
import json
import math
import resource
import sys
import time

import h5py
import numpy as np
import torch
from transformers import VoxtralRealtimeConfig, VoxtralRealtimeForConditionalGeneration
from transformers.models.voxtral_realtime.feature_extraction_voxtral_realtime import (
    VoxtralRealtimeFeatureExtractor,
)


def hf_config(c):
    """VoxtralRealtimeConfig from an srkit voxtral_realtime config dict."""
    return VoxtralRealtimeConfig(
        audio_config=dict(hidden_size=c["enc_dim"], intermediate_size=c["enc_ffn"],
                          num_hidden_layers=c["enc_layers"], num_attention_heads=c["enc_heads"],
                          head_dim=c["enc_head_dim"], num_mel_bins=c["n_mels"],
                          rms_norm_eps=c["enc_norm_eps"], sliding_window=c["enc_sliding_window"],
                          rope_parameters={"rope_type": "default",
                                           "rope_theta": c["enc_rope_theta"]}),
        text_config=dict(vocab_size=c["vocab"], hidden_size=c["dim"], intermediate_size=c["ffn"],
                         num_hidden_layers=c["n_layers"], num_attention_heads=c["n_heads"],
                         num_key_value_heads=c["n_kv_heads"], head_dim=c["head_dim"],
                         rms_norm_eps=c["norm_eps"], sliding_window=c["sliding_window"],
                         rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"]},
                         tie_word_embeddings=True, bos_token_id=c["bos_id"],
                         eos_token_id=c["eos_id"]),
        default_num_delay_tokens=c["delay_tokens"], downsample_factor=c["downsample_factor"],
        tie_word_embeddings=True,
    )


def load(path, dtype, device):
    with h5py.File(path, "r") as f:
        cfg = json.loads(f.attrs["config"])
        torch.set_default_dtype(dtype)
        try:
            # built on the target device: the random initialisation of 4.4 G parameters (then
            # overwritten) takes minutes on a CPU and seconds on a GPU
            with torch.device(device):
                model = VoxtralRealtimeForConditionalGeneration(hf_config(cfg))
        finally:
            torch.set_default_dtype(torch.float32)
        model.eval()
        params = dict(model.named_parameters())
        seen = set()

        def visit(name, d):
            if not isinstance(d, h5py.Dataset):
                return
            key = name.replace("/", ".")
            if key not in params:
                raise SystemExit("%s: tensor %s is not a parameter of transformers' model"
                                 % (path, key))
            a = d[()]
            dt = d.attrs.get("dtype")
            dt = dt.decode() if isinstance(dt, bytes) else dt
            if dt == "bf16":  # bit patterns: reinterpret, no rounding
                t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
            else:
                t = torch.from_numpy(np.asarray(a, dtype=np.float32))
            p = params[key]
            if tuple(p.shape) != tuple(t.shape):
                raise SystemExit("%s: %s has shape %s, transformers wants %s"
                                 % (path, key, tuple(t.shape), tuple(p.shape)))
            with torch.no_grad():
                p.copy_(t.to(p.dtype))
            seen.add(key)

        f["weights"].visititems(visit)
    model.tie_weights()
    missing = [k for k in params if k not in seen and k != "lm_head.weight"]
    if missing:
        raise SystemExit("%s: missing %s" % (path, ", ".join(missing[:5])))
    emb = model.model.language_model.embed_tokens.weight
    assert model.lm_head.weight.data_ptr() == emb.data_ptr(), "output head not tied"
    return model, cfg


def pct(v, q):
    s = sorted(v)
    r = int(math.ceil(q * len(s)))
    return s[max(r, 1) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--audio", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--start-s", type=float, default=0.0, help="skip this much of the audio")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (every timed call synchronized)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    dev = args.device

    def now():  # a GPU's queued work finished before the clock is read
        if dev == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    t0 = time.perf_counter()
    model, c = load(args.model, dtype, dev)
    load_s = time.perf_counter() - t0

    if args.audio == "noise":  # no audio library needed (the GPU image may lack soundfile)
        x = (np.random.default_rng(1).standard_normal(int(args.seconds * 16000)) * 0.05).astype(np.float32)
    else:
        import soundfile
        x, sr = soundfile.read(args.audio, dtype="float32")
        assert sr == 16000, sr
        x = x[int(args.start_s * 16000): int((args.start_s + args.seconds) * 16000)]
    n_left, delay = c["n_left_pad_tokens"], c["delay_tokens"]
    sig = np.concatenate([np.zeros(n_left * 1280, np.float32), x])
    sig = sig[: len(sig) // 1280 * 1280]
    fe = VoxtralRealtimeFeatureExtractor(feature_size=c["n_mels"],
                                         global_log_mel_max=c["global_log_mel_max"])
    mel = fe(sig, sampling_rate=16000, return_tensors="pt").input_features.to(dev, dtype)  # [1, M, T]
    n_steps = mel.shape[-1] // 8

    lm = model.model.language_model
    emb = lm.embed_tokens
    prompt = [c["bos_id"]] + [c["pad_id"]] * (n_left + delay)
    L = len(prompt)
    enc_ms, dec_ms, ada, steps = [], [], [], []
    prefill_ms = None
    with torch.inference_mode():
        t_cond = model.model.time_embedding(torch.full((1,), delay, dtype=torch.float32, device=dev))[None]
        t_cond = t_cond.to(dtype)
        pc = None
        enc_cache = None
        dec_cache = None
        prev = None
        t = 0
        for s in range(n_steps):
            ts = now()
            out = model.model.get_audio_features(input_features=mel[:, :, 8 * s: 8 * s + 8],
                                                 padding_cache=pc, past_key_values=enc_cache,
                                                 use_cache=True)
            a = out.pooler_output[0, 0]
            te = now()
            pc, enc_cache = out.padding_cache, out.past_key_values
            if s:
                enc_ms.append((te - ts) * 1e3)
            ada.append(a)
            # sync steps: position L - 1 + t needs a[L - 1 + t]
            while L - 1 + t < len(ada):
                if t == 0:
                    xs = torch.stack([emb.weight[prompt[p]] + ada[p] for p in range(L - 1)])[None]
                    tp = now()
                    o = lm(inputs_embeds=xs, t_cond=t_cond, use_cache=True)
                    prefill_ms = (now() - tp) * 1e3
                    dec_cache = o.past_key_values
                    prev = prompt[L - 1]
                p = L - 1 + t
                xi = (emb.weight[prev] + ada[p])[None, None]
                td = now()
                o = lm(inputs_embeds=xi, t_cond=t_cond, past_key_values=dec_cache, use_cache=True)
                logits = model.lm_head(o.last_hidden_state[:, -1])
                prev = int(torch.argmax(logits))
                steps.append(prev)
                dec_ms.append((now() - td) * 1e3)
                dec_cache = o.past_key_values
                t += 1
    n_params = sum(p.numel() for p in model.parameters())
    print(json.dumps({
        "impl": "transformers", "torch": torch.__version__,
        "transformers": sys.modules["transformers"].__version__, "dtype": args.dtype,
        "threads": args.threads, "device": dev, "model": args.model, "audio": args.audio,
        "audio_s": len(x) / 16000.0, "load_s": load_s, "parameters": n_params,
        "enc_steps": len(enc_ms), "enc_step_ms_p50": pct(enc_ms, 0.5),
        "enc_step_ms_p90": pct(enc_ms, 0.9), "dec_steps": len(dec_ms),
        "dec_step_ms_p50": pct(dec_ms, 0.5) if dec_ms else None,
        "dec_step_ms_p90": pct(dec_ms, 0.9) if dec_ms else None,
        "prefill_ms": prefill_ms, "prompt_positions": L - 1,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "steps": steps,
    }))


if __name__ == "__main__":
    main()
