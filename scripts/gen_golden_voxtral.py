#!/usr/bin/env python3
"""gen_golden_voxtral.py — golden fixtures for the voxtral_realtime backend (tests/test_voxtral.c).

Run with the reference venv (transformers >= 5 with VoxtralRealtimeForConditionalGeneration,
torch, soundfile):
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/gen_golden_voxtral.py

The reference is transformers' VoxtralRealtimeForConditionalGeneration, built from a small
random config (no hub access). Its weights are rounded to bfloat16 before anything runs, so the
model file stores them exactly in bf16 (half the bytes) while every reference computation is
float32: srkit must match it with bf16 weights computed in f32.

Writes under tests/fixtures/voxtral/:
  model.h5        encoder 2 x 32 (2 heads of 16, FFN 64, sliding window 16 frames), adapter
                  4 x 32 -> 32, decoder 2 x 32 (4 query / 2 KV heads of 8, FFN 64, sliding
                  window 20 positions), a 360-token tekken-style vocabulary (40 specials, 256
                  bytes, 64 merges), 2 left-pad tokens, 2 right-pad tokens, delay 3 tokens.
                  Both windows are shorter than the test audio, so every ring buffer wraps.
  model_full.h5   the same weights with the real model's windows (750 / 8192): nothing wraps.
  golden.h5       /audio (int16, x / 32768; 2 s of ../shared/data speech, 16 kHz) and for each model
                  /<name>/{mel_head, mel_tail, encoder, adapter, logits, steps, tokens}:
                    mel_head / mel_tail  first 48 / last 16 rows of the offline log-mel
                                         [T, 128] of the padded signal (HF feature extractor)
                    encoder              audio_tower output [T/2, 32] (its sliding-window mask)
                    adapter              audio embeddings [T/8, 32] (frame concat + projector)
                    logits               decoder logits [K, 360] of the first K sync steps
                    steps                argmax of every sync step (audio steps, then flush)
                    tokens               the hypothesis: steps without the streaming pad
                  attributes: n_left, n_right, delay, prompt_len, n_audio_steps, min_margin
                  (smallest top-1 / top-2 logit gap over all steps: argmax is not fragile).
  micro.h5        a tiny valid model (1 + 1 layers of width 8) and its malformed variants
                  bad_missing.h5 (no model.language_model.norm.weight), bad_tokenizer.h5 (359
                  pieces for vocab 360), bad_delay.h5 (delay_tokens 40 > max 30), bad_shape.h5
                  (conv1 weight for 80 mel bins) for the bad-input tests.

Protocol (what the backend does, docs/voxtral.md): the signal is n_left * 1280 zeros, the audio,
zeros up to a multiple of 1280, n_right * 1280 zeros. Its offline mel has 8 frames per 80 ms,
the encoder 4, the adapter 1 (audio embedding a[p], p = 0 .. P-1). The decoder input at
position p is embed(x[p]) + a[p] with x = [BOS] + [STREAMING_PAD] * (n_left + delay) for the
prompt (L tokens) and the previous argmax after it. Sync step t (t = 0 ..) is the decoder at
position L - 1 + t; audio steps run while a[p] exists, then flush steps feed embed(prev) alone
until EOS is chosen or flush_tokens steps ran. Deterministic (fixed seeds).
"""

import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402

import h5py  # noqa: E402
import soundfile  # noqa: E402
from transformers import (  # noqa: E402
    VoxtralRealtimeConfig,
    VoxtralRealtimeForConditionalGeneration,
)
from transformers.models.voxtral_realtime.feature_extraction_voxtral_realtime import (  # noqa: E402
    VoxtralRealtimeFeatureExtractor,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "voxtral")
SHARED = os.environ.get("SRKIT_SHARED", os.path.join(ROOT, "..", "shared", "data"))
AUDIO = os.path.join(SHARED, "librispeech-sample", "1089-134686-0000.flac")

N_SPECIAL, N_MERGES = 40, 64
BOS, EOS, PAD, WORD = 1, 2, 32, 33
VOCAB = N_SPECIAL + 256 + N_MERGES
N_LEFT, N_RIGHT, DELAY, FLUSH = 2, 2, 3, 8
K_LOGITS = 8
GLOBAL_LOG_MEL_MAX = 1.5


def tekken_vocab():
    """Pieces (bytes) and special flags of the small tekken-style vocabulary: ids 0..39 control
    tokens, then the 256 single bytes, then 64 frequent English byte pairs."""
    names = {0: "<unk>", 1: "<s>", 2: "</s>", 32: "[STREAMING_PAD]", 33: "[STREAMING_WORD]"}
    pieces = [names.get(i, "<SPECIAL_%d>" % i).encode() for i in range(N_SPECIAL)]
    pieces += [bytes([b]) for b in range(256)]
    merges = ("th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as "
              "ou io le ve co me de hi ri ro ic ne ea ra ce li ch ll be ma si om ur ca el ta la "
              "ns di fo ho pe ec pr no ct us ac ot il tr ly").split()
    pieces += [(" " + m if i % 2 else m).encode() for i, m in enumerate(merges[:N_MERGES])]
    assert len(pieces) == VOCAB
    special = [1] * N_SPECIAL + [0] * (VOCAB - N_SPECIAL)
    return pieces, special


def hf_config(enc_window, dec_window):
    return VoxtralRealtimeConfig(
        audio_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, head_dim=16, num_mel_bins=128,
                          rms_norm_eps=1e-5, sliding_window=enc_window,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                          initializer_range=0.1, max_position_embeddings=4096),
        text_config=dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, rms_norm_eps=1e-5, sliding_window=dec_window,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                         initializer_range=0.1, tie_word_embeddings=True,
                         bos_token_id=BOS, eos_token_id=EOS),
        default_num_delay_tokens=DELAY, downsample_factor=4, tie_word_embeddings=True,
    )


def srkit_config(cfg, dtype):
    """The HDF5 config: every hyper-parameter the backend reads (docs/voxtral.md)."""
    a, t = cfg.audio_config, cfg.text_config
    return {
        "sample_rate": 16000, "n_fft": 400, "hop_length": 160, "n_mels": a.num_mel_bins,
        "global_log_mel_max": GLOBAL_LOG_MEL_MAX,
        "enc_dim": a.hidden_size, "enc_layers": a.num_hidden_layers,
        "enc_heads": a.num_attention_heads, "enc_head_dim": a.head_dim,
        "enc_ffn": a.intermediate_size, "enc_rope_theta": a.rope_parameters["rope_theta"],
        "enc_norm_eps": a.rms_norm_eps, "enc_sliding_window": a.sliding_window,
        "downsample_factor": cfg.downsample_factor,
        "dim": t.hidden_size, "n_layers": t.num_hidden_layers, "n_heads": t.num_attention_heads,
        "n_kv_heads": t.num_key_value_heads, "head_dim": t.head_dim,
        "ffn": t.intermediate_size, "rope_theta": t.rope_parameters["rope_theta"],
        "norm_eps": t.rms_norm_eps, "vocab": t.vocab_size, "sliding_window": t.sliding_window,
        "ada_dim": 32, "time_theta": 10000.0,
        "bos_id": BOS, "eos_id": EOS, "pad_id": PAD,
        "n_left_pad_tokens": N_LEFT, "n_right_pad_tokens": N_RIGHT,
        "delay_tokens": DELAY, "min_delay_tokens": 1, "max_delay_tokens": 30,
        "flush_tokens": FLUSH, "dtype": dtype,
    }


def random_model(cfg, seed):
    torch.manual_seed(seed)
    model = VoxtralRealtimeForConditionalGeneration(cfg)
    model.eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name or "layer_norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))  # non-trivial norm gains
            p.copy_(p.bfloat16().float())
    return model


def state_dict(model):
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    emb = "model.language_model.embed_tokens.weight"
    assert np.array_equal(sd["lm_head.weight"], sd[emb])
    del sd["lm_head.weight"]  # tied: the file holds the embedding once
    return sd


def load_audio():
    x, sr = soundfile.read(AUDIO, dtype="float32")
    assert sr == 16000, sr
    x = x[8000:8000 + 32000]  # 2 s from 0.5 s on
    return np.round(x * 32768.0).astype(np.int16)


def padded_signal(audio):
    a = audio.astype(np.float32) / np.float32(32768.0)
    n = len(a)
    body = int(math.ceil(n / 1280.0)) * 1280
    return np.concatenate([np.zeros(N_LEFT * 1280, np.float32), a,
                           np.zeros(body - n + N_RIGHT * 1280, np.float32)])


def streaming_mel(fe, sig):
    """The seed's STFT overlap scheme: per 80 ms step, a 1640-sample window (320 left overlap,
    zero for the first step, 1280 new samples, 40 look-ahead, zero past the end), centred
    STFT of the window (its own edge padding is never read by frames 2..9), frames 2..9."""
    out = []
    n_steps = len(sig) // 1280
    ext = np.concatenate([np.zeros(320, np.float32), sig, np.zeros(40, np.float32)])
    for s in range(n_steps):
        w = torch.from_numpy(ext[s * 1280: s * 1280 + 1640].copy())[None]
        m = fe._torch_extract_fbank_features(w, "cpu", center=True)[0]  # [128, 10]
        out.append(m[:, 2:10])
    return torch.cat(out, dim=1)


@torch.no_grad()
def run(model, cfg, audio):
    fe = VoxtralRealtimeFeatureExtractor(feature_size=128, global_log_mel_max=GLOBAL_LOG_MEL_MAX)
    sig = padded_signal(audio)
    mel = fe(sig, sampling_rate=16000, return_tensors="pt").input_features  # [1, 128, T]
    T = mel.shape[-1]
    assert T == len(sig) // 160 and T % 8 == 0, (T, len(sig))
    smel = streaming_mel(fe, sig)
    mel_stream_diff = float((smel - mel[0]).abs().max())
    assert mel_stream_diff < 1e-5, mel_stream_diff

    enc = model.model.audio_tower(input_features=mel).last_hidden_state[0]  # [T/2, d]
    ada = model.model.get_audio_features(input_features=mel).pooler_output[0]  # [P, D]
    P = ada.shape[0]
    emb = model.model.language_model.embed_tokens
    prompt = [BOS] + [PAD] * (N_LEFT + DELAY)
    L = len(prompt)

    ids = list(prompt)
    # the time conditioning exactly as VoxtralRealtimeModel.forward builds it
    t_cond = model.model.time_embedding(torch.full((1,), DELAY, dtype=torch.float32))[None]
    embeds = []
    for p in range(L):
        embeds.append(emb.weight[ids[p]] + ada[p])
    steps, logits_rec, margins = [], [], []
    t = 0
    while True:
        p = L - 1 + t
        x = torch.stack(embeds)[None]
        lg = model.lm_head(model.model.language_model(inputs_embeds=x, t_cond=t_cond)
                           .last_hidden_state)[0, -1]
        if t < K_LOGITS:
            logits_rec.append(lg.numpy().copy())
        top = torch.topk(lg, 2).values
        margins.append(float(top[0] - top[1]))
        tok = int(torch.argmax(lg))
        steps.append(tok)
        t += 1
        nxt = p + 1
        if nxt < P:
            embeds.append(emb.weight[tok] + ada[nxt])
        else:
            flush_done = t - (P - L + 1)
            if nxt >= P and (tok == EOS and flush_done > 0 or flush_done >= FLUSH):
                break
            embeds.append(emb.weight[tok].clone())
    n_audio = P - L + 1

    # cross-check the audio phase against transformers' own generate() (same prompt, audio)
    gen = model.generate(input_ids=torch.tensor([prompt]), input_features=mel,
                         num_delay_tokens=DELAY, do_sample=False, eos_token_id=None,
                         pad_token_id=0)
    gen_steps = gen[0, L:].tolist()
    assert gen_steps == steps[:len(gen_steps)], (gen_steps, steps)
    assert len(gen_steps) == n_audio - 1, (len(gen_steps), n_audio)

    return {
        "mel_head": mel[0, :, :48].T.numpy(), "mel_tail": mel[0, :, -16:].T.numpy(),
        "encoder": enc.numpy(), "adapter": ada.numpy(),
        "logits": np.stack(logits_rec), "steps": np.array(steps, np.int32),
        "tokens": np.array([s for s in steps if s != PAD], np.int32),
    }, {"n_left": N_LEFT, "n_right": N_RIGHT, "delay": DELAY, "prompt_len": L,
        "n_audio_steps": n_audio, "n_frames_mel": T, "min_margin": min(margins),
        "mel_stream_max_diff": mel_stream_diff}


def write_micro(tok):
    """A tiny valid model (encoder and decoder 1 layer x 8) and malformed variants."""
    cfg = hf_config(16, 20)
    cfg.audio_config.hidden_size = cfg.audio_config.intermediate_size = 8
    cfg.audio_config.num_hidden_layers = 1
    cfg.audio_config.head_dim = 4
    t = cfg.text_config
    t.hidden_size, t.intermediate_size, t.num_hidden_layers = 8, 8, 1
    t.num_attention_heads, t.num_key_value_heads, t.head_dim = 2, 1, 4
    cfg.hidden_size = 8
    torch.manual_seed(7)
    sd = state_dict(VoxtralRealtimeForConditionalGeneration(cfg))
    good = srkit_config(cfg, "bf16")

    def w(name, c, tensors, tk=tok):
        srkit_h5.write_model(os.path.join(OUT, name), "voxtral_realtime", c, tensors,
                             dtype="bf16", tokenizer=tk, source="test fixture", license="MIT",
                             checksum=False)

    w("micro.h5", good, sd)
    w("bad_missing.h5", good, {k: v for k, v in sd.items() if k != "model.language_model.norm.weight"})
    w("bad_tokenizer.h5", good, sd, dict(tok, pieces=tok["pieces"][:-1], special=tok["special"][:-1]))
    w("bad_delay.h5", dict(good, delay_tokens=40), sd)
    shape = dict(sd)
    shape["model.audio_tower.embedder.conv1.weight"] = np.zeros((8, 80, 3), np.float32)
    w("bad_shape.h5", good, shape)


def main():
    os.makedirs(OUT, exist_ok=True)
    pieces, special = tekken_vocab()
    tok = {"type": "tekken", "pieces": pieces, "special": special}
    write_micro(tok)
    audio = load_audio()
    base = random_model(hf_config(16, 20), 1234)
    sd_t = base.state_dict()
    results = {}
    for name, fname, (ew, dw) in (("small", "model.h5", (16, 20)),
                                  ("full", "model_full.h5", (750, 8192))):
        cfg = hf_config(ew, dw)
        cfg._attn_implementation = "eager"
        model = VoxtralRealtimeForConditionalGeneration(cfg)
        model.load_state_dict(sd_t)
        model.eval()
        model.config._attn_implementation = "eager"
        for sub in (model.model.audio_tower, model.model.language_model):
            sub.config._attn_implementation = "eager"
        srkit_h5.write_model(os.path.join(OUT, fname), "voxtral_realtime",
                             srkit_config(cfg, "bf16"), state_dict(model), dtype="bf16",
                             tokenizer=tok, source="random init (gen_golden_voxtral.py, seed 1234)",
                             license="MIT", checksum=False)
        results[name] = run(model, cfg, audio)
        print(name, {k: v.shape for k, v in results[name][0].items()}, results[name][1])
        print("  steps", results[name][0]["steps"].tolist())
    with h5py.File(os.path.join(OUT, "golden.h5"), "w") as f:
        f.create_dataset("audio", data=audio)
        f.attrs["source"] = "1089-134686-0000.flac samples 8000..40000 as int16 (x / 32768)"
        for name, (data, attrs) in results.items():
            g = f.create_group(name)
            for k, v in data.items():
                g.create_dataset(k, data=v, compression="gzip", compression_opts=9)
            for k, v in attrs.items():
                g.attrs[k] = v


if __name__ == "__main__":
    main()
