#!/usr/bin/env python3
"""bench_whisper_transformers.py — per-step timings of transformers' WhisperForConditionalGeneration
on the weights of an srkit whisper HDF5 file, for comparison with `srkit bench --json` on the same
weights and device (docs/benchmarks.md, "On an NVIDIA H200").

    python3 scripts/bench_whisper_transformers.py MODEL.h5 [--device cuda|cpu] [--dtype f32|bf16]
        [--streams 1 64 ...] [--steps 24] [--reps 9] [--threads N]

No hub access: the WhisperConfig is built from the file's config and every tensor is copied in
from the HDF5 file by name (scripts/srkit_h5.py read_model: any stored dtype as float32, int8
dequantized; openai-whisper's names, as srkit stores them, mapped to transformers' modules; the
output projection tied to the token embedding). Timed, under torch.inference_mode,
with torch.cuda.synchronize() around every timed call on a GPU, for each batch size B of
--streams (B independent utterances, as srkit's engine batches streams):
  encoder        one 30 s window per stream: model.model.encoder on [B, n_mels, 3000] random mel
                 (Whisper's encoder always sees the whole window; srkit's whisperrt encodes only
                 the new frames of a chunk, so the two are not the same work: both are printed)
  decoder_step   one token per stream with the self-attention K/V cache and the cross K/V of the
                 encoder output (past_key_values), the tied output projection included; the
                 median over --steps steps after a 4-token prompt
Reported as the median of --reps runs (ms), one JSON object per line.
"""

import argparse
import json
import statistics
import sys
import time

import os

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402


def load(path, device, dtype):
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    _, c, tensors = srkit_h5.read_model(path)  # every stored dtype as float32
    cfg = WhisperConfig(
        vocab_size=c["n_vocab"], num_mel_bins=c["n_mels"], d_model=c["n_audio_state"],
        encoder_layers=c["n_audio_layer"], encoder_attention_heads=c["n_audio_head"],
        decoder_layers=c["n_text_layer"], decoder_attention_heads=c["n_text_head"],
        encoder_ffn_dim=4 * c["n_audio_state"], decoder_ffn_dim=4 * c["n_text_state"],
        max_source_positions=c["n_audio_ctx"], max_target_positions=c["n_text_ctx"],
        pad_token_id=c["tokens"]["eot"], bos_token_id=c["tokens"]["sot"],
        eos_token_id=c["tokens"]["eot"], decoder_start_token_id=c["tokens"]["sot"],
        activation_function="gelu", scale_embedding=False, tie_word_embeddings=True)
    model = WhisperForConditionalGeneration(cfg)

    def t(name):
        return torch.from_numpy(np.ascontiguousarray(tensors[name.replace("/", ".")]))

    sd = {}
    for side, hf in (("encoder", "model.encoder"), ("decoder", "model.decoder")):
        n_layer = c["n_audio_layer"] if side == "encoder" else c["n_text_layer"]
        for i in range(n_layer):
            src, dst = f"{side}/blocks/{i}", f"{hf}.layers.{i}"
            attns = [("attn", "self_attn")] + ([("cross_attn", "encoder_attn")] if side == "decoder" else [])
            for a, b in attns:
                for p, q in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj"), ("out", "out_proj")):
                    sd[f"{dst}.{b}.{q}.weight"] = t(f"{src}/{a}/{p}/weight")
                    if p != "key":
                        sd[f"{dst}.{b}.{q}.bias"] = t(f"{src}/{a}/{p}/bias")
                sd[f"{dst}.{b}_layer_norm.weight"] = t(f"{src}/{a}_ln/weight")
                sd[f"{dst}.{b}_layer_norm.bias"] = t(f"{src}/{a}_ln/bias")
            sd[f"{dst}.fc1.weight"] = t(f"{src}/mlp/0/weight")
            sd[f"{dst}.fc1.bias"] = t(f"{src}/mlp/0/bias")
            sd[f"{dst}.fc2.weight"] = t(f"{src}/mlp/2/weight")
            sd[f"{dst}.fc2.bias"] = t(f"{src}/mlp/2/bias")
            sd[f"{dst}.final_layer_norm.weight"] = t(f"{src}/mlp_ln/weight")
            sd[f"{dst}.final_layer_norm.bias"] = t(f"{src}/mlp_ln/bias")
    for k in ("conv1", "conv2"):
        sd[f"model.encoder.{k}.weight"] = t(f"encoder/{k}/weight")
        sd[f"model.encoder.{k}.bias"] = t(f"encoder/{k}/bias")
    sd["model.encoder.embed_positions.weight"] = t("encoder/positional_embedding")
    sd["model.encoder.layer_norm.weight"] = t("encoder/ln_post/weight")
    sd["model.encoder.layer_norm.bias"] = t("encoder/ln_post/bias")
    sd["model.decoder.embed_tokens.weight"] = t("decoder/token_embedding/weight")
    sd["model.decoder.embed_positions.weight"] = t("decoder/positional_embedding")
    sd["model.decoder.layer_norm.weight"] = t("decoder/ln/weight")
    sd["model.decoder.layer_norm.bias"] = t("decoder/ln/bias")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "proj_out.weight"]  # tied to embed_tokens
    if missing or unexpected:
        sys.exit(f"bench_whisper_transformers: weights not mapped: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    return model.to(device=device, dtype=dtype).eval(), c


def timed(fn, device, reps):
    out = []
    for r in range(reps + 1):  # one warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        if r:
            out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # f32 as srkit's exact products
        torch.backends.cudnn.allow_tf32 = False
    dtype = torch.float32 if a.dtype == "f32" else torch.bfloat16
    model, c = load(a.model, a.device, dtype)
    tok = c["tokens"]
    prompt = [tok["sot"], tok["no_timestamps"]]
    gen = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for B in a.streams:
            mel = torch.randn(B, c["n_mels"], 2 * c["n_audio_ctx"], generator=gen).to(a.device, dtype)
            enc_ms = timed(lambda: model.model.encoder(mel), a.device, a.reps)
            enc = model.model.encoder(mel).last_hidden_state

            def decode():
                ids = torch.tensor([prompt] * B, device=a.device)
                o = model(encoder_outputs=(enc,), decoder_input_ids=ids, use_cache=True)
                past, nxt = o.past_key_values, o.logits[:, -1].argmax(-1, keepdim=True)
                times = []
                for _ in range(a.steps):
                    if a.device == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    o = model(encoder_outputs=(enc,), decoder_input_ids=nxt, past_key_values=past, use_cache=True)
                    past, nxt = o.past_key_values, o.logits[:, -1].argmax(-1, keepdim=True)
                    if a.device == "cuda":
                        torch.cuda.synchronize()
                    times.append((time.perf_counter() - t0) * 1e3)
                return statistics.median(times)

            decode()  # warm-up
            dec_ms = statistics.median(decode() for _ in range(max(1, a.reps // 3)))
            print(json.dumps({"peer": "transformers", "model": a.model, "device": a.device,
                              "dtype": a.dtype, "streams": B, "encoder_window_ms": round(enc_ms, 3),
                              "decoder_step_ms": round(dec_ms, 3), "decoder_steps": a.steps}), flush=True)


if __name__ == "__main__":
    main()
