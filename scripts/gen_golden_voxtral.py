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

  ckpt_mistral/   the weights of model.h5 as Mistral publishes the model: params.json,
                  consolidated.safetensors (bf16, Mistral's tensor names, wq / wk rows and the
                  encoder's q bias in Mistral's interleaved-pair RoPE order) and tekken.json
                  (named special tokens only, the rest filled by rank; audio section with
                  streaming_n_left_pad_tokens 2 and transcription_delay_ms 240 = 3 tokens)
  ckpt_hf/        the same model as transformers saves it (save_pretrained in bf16, two shards
                  + index), tekken.json and preprocessor_config.json
                  scripts/convert_voxtral.py must turn both into model.h5's tensors bit for bit
                  (tests/test_voxtral.c, suite voxtral_convert). The interleaved layout is
                  checked numerically here: interleaved RoPE on the Mistral rows gives the same
                  attention scores as transformers' rotate-half RoPE on its rows.
  ckpt_bad_missing/  micro.h5's weights in the Mistral layout without norm.weight
  ckpt_bad_vocab/    micro.h5's weights in the Mistral layout, tekken.json one token short
With --checkpoints-only, only the ckpt_* folders are (re)written.

Protocol (what the backend does, docs/voxtral.md): the signal is n_left * 1280 zeros, the audio,
zeros up to a multiple of 1280, n_right * 1280 zeros. Its offline mel has 8 frames per 80 ms,
the encoder 4, the adapter 1 (audio embedding a[p], p = 0 .. P-1). The decoder input at
position p is embed(x[p]) + a[p] with x = [BOS] + [STREAMING_PAD] * (n_left + delay) for the
prompt (L tokens) and the previous argmax after it. Sync step t (t = 0 ..) is the decoder at
position L - 1 + t; audio steps run while a[p] exists, then flush steps feed embed(prev) alone
until EOS is chosen or flush_tokens steps ran. Deterministic (fixed seeds).
"""

import base64
import json
import math
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402

import h5py  # noqa: E402
import soundfile  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
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


def micro_config():
    cfg = hf_config(16, 20)
    cfg.audio_config.hidden_size = cfg.audio_config.intermediate_size = 8
    cfg.audio_config.num_hidden_layers = 1
    cfg.audio_config.head_dim = 4
    t = cfg.text_config
    t.hidden_size, t.intermediate_size, t.num_hidden_layers = 8, 8, 1
    t.num_attention_heads, t.num_key_value_heads, t.head_dim = 2, 1, 4
    cfg.hidden_size = 8
    return cfg


def write_micro(tok):
    """A tiny valid model (encoder and decoder 1 layer x 8) and malformed variants."""
    cfg = micro_config()
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


# ---- the checkpoint layouts the converter reads ------------------------------------------------

MM = "mm_streams_embeddings.embedding_module."
WE = MM + "whisper_encoder."


def mistral_key(k):
    """transformers state-dict key -> Mistral consolidated.safetensors key (facts: transformers'
    convert_voxtral_realtime_weights_to_hf.py mapping, read in the other direction)."""
    enc_tail = {"self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk",
                "self_attn.v_proj": "attention.wv", "self_attn.o_proj": "attention.wo",
                "mlp.gate_proj": "feed_forward.w1", "mlp.down_proj": "feed_forward.w2",
                "mlp.up_proj": "feed_forward.w3", "self_attn_layer_norm": "attention_norm",
                "final_layer_norm": "ffn_norm", "input_layernorm": "attention_norm",
                "post_attention_layernorm": "ffn_norm",
                "ada_rms_norm.linear1": "ada_rms_norm_t_cond.0",
                "ada_rms_norm.linear2": "ada_rms_norm_t_cond.2"}
    top = {"model.audio_tower.embedder.conv1": WE + "conv_layers.0.conv",
           "model.audio_tower.embedder.conv2": WE + "conv_layers.1.conv",
           "model.audio_tower.norm": WE + "transformer.norm",
           "model.multi_modal_projector.linear_1": MM + "audio_language_projection.0",
           "model.multi_modal_projector.linear_2": MM + "audio_language_projection.2",
           "model.language_model.embed_tokens": MM + "tok_embeddings",
           "model.language_model.norm": "norm"}
    stem, leaf = k.rsplit(".", 1)
    if stem in top:
        return top[stem] + "." + leaf
    for pre, base in (("model.audio_tower.layers.", WE + "transformer.layers."),
                      ("model.language_model.layers.", "layers.")):
        if k.startswith(pre):
            l, rest = stem[len(pre):].split(".", 1)
            return "%s%s.%s.%s" % (base, l, enc_tail[rest], leaf)
    raise KeyError(k)


def to_interleaved(t, heads):
    """Rotate-half rows -> Mistral's interleaved-pair rows, per head: [H, 2, hd/2] -> [H, hd/2, 2]."""
    shape = t.shape
    hd = shape[0] // heads
    return t.reshape((heads, 2, hd // 2) + shape[1:]).transpose(1, 2).reshape(shape).contiguous()


def check_rope_layouts(q_hf, k_hf, q_mi, k_mi, hd, theta):
    """Scores q(p) . k(s) per head: rotate-half RoPE on transformers' rows against interleaved
    RoPE (complex pairs x[2i] + j x[2i+1] times e^(j pos inv_i)) on the Mistral rows."""
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    pos = torch.arange(q_hf.shape[0], dtype=torch.float64)
    ang = pos[:, None] * inv[None]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

    def half(x):
        x = x.double().reshape(x.shape[0], -1, hd)
        rot = torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos[:, None] + rot * sin[:, None]

    def inter(x):
        x = x.double().reshape(x.shape[0], -1, hd // 2, 2)
        z = torch.view_as_complex(x.contiguous()) * torch.polar(torch.ones_like(ang), ang)[:, None]
        return torch.view_as_real(z).reshape(x.shape[0], -1, hd)

    group = q_hf.shape[1] // k_hf.shape[1]
    s_hf = torch.einsum("phd,shd->hps", half(q_hf), half(k_hf).repeat_interleave(group, 1))
    s_mi = torch.einsum("phd,shd->hps", inter(q_mi), inter(k_mi).repeat_interleave(group, 1))
    d = float((s_hf - s_mi).abs().max())
    assert d < 1e-9, d
    return d


def tekken_json(tok, vocab_size, n_left, delay_ms):
    pieces, n_special = tok["pieces"], sum(tok["special"])
    named = {i: pieces[i].decode() for i in (0, 1, 2, 32, 33)}
    return {
        "config": {"pattern": ".+", "num_vocab_tokens": len(pieces) - n_special,
                   "default_vocab_size": vocab_size, "default_num_special_tokens": n_special,
                   "version": "v13"},
        "vocab": [{"rank": i, "token_bytes": base64.b64encode(p).decode(),
                   "token_str": p.decode("utf-8", "replace")}
                  for i, p in enumerate(pieces[n_special:])],
        "special_tokens": [{"rank": r, "token_str": t, "is_control": True}
                           for r, t in sorted(named.items())],
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160,
                                            "window_size": 400},
                  "transcription_delay_ms": delay_ms, "streaming_look_ahead_ms": 2.5,
                  "streaming_look_back_ms": 52.5, "streaming_n_left_pad_tokens": n_left,
                  "transcription_format": "streaming"},
    }


def params_json(cfg):
    a, t = cfg.audio_config, cfg.text_config
    return {
        "dim": t.hidden_size, "n_layers": t.num_hidden_layers, "head_dim": t.head_dim,
        "hidden_dim": t.intermediate_size, "n_heads": t.num_attention_heads,
        "n_kv_heads": t.num_key_value_heads, "use_biases": False, "causal": True,
        "rope_theta": t.rope_parameters["rope_theta"], "norm_eps": t.rms_norm_eps,
        "vocab_size": t.vocab_size, "model_parallel": 1, "tied_embeddings": True,
        "sliding_window": t.sliding_window, "model_max_length": 131072,
        "multimodal": {"whisper_model_args": {
            "encoder_args": {
                "audio_encoding_args": {"sampling_rate": 16000, "frame_rate": 12.5,
                                        "num_mel_bins": a.num_mel_bins, "hop_length": 160,
                                        "window_size": 400, "chunk_length_s": None,
                                        "global_log_mel_max": GLOBAL_LOG_MEL_MAX,
                                        "transcription_format": "streaming"},
                "dim": a.hidden_size, "n_layers": a.num_hidden_layers, "head_dim": a.head_dim,
                "hidden_dim": a.intermediate_size, "n_heads": a.num_attention_heads,
                "vocab_size": t.vocab_size, "n_kv_heads": a.num_attention_heads,
                "use_biases": True, "use_cache": False,
                "rope_theta": a.rope_parameters["rope_theta"], "causal": True,
                "norm_eps": a.rms_norm_eps, "pos_embed": "rope", "max_source_positions": None,
                "ffn_type": "swiglu", "norm_type": "rms_norm", "sliding_window": a.sliding_window},
            "downsample_args": {"downsample_factor": cfg.downsample_factor}}},
        "ada_rms_norm_t_cond": True, "ada_rms_norm_t_cond_dim": 32,
    }


def write_mistral(folder, cfg, sd, tok, drop=(), vocab_cut=0, check=False):
    """Mistral layout of state dict sd (torch tensors, transformers names) under folder."""
    a, t = cfg.audio_config, cfg.text_config
    out = {}
    for k, v in sd.items():
        if k == "lm_head.weight":
            continue
        v = v.detach().float()
        if k.startswith("model.audio_tower.layers.") and (k.endswith("q_proj.weight") or
                                                          k.endswith("q_proj.bias") or
                                                          k.endswith("k_proj.weight")):
            v = to_interleaved(v, a.num_attention_heads)
        elif k.startswith("model.language_model.layers.") and k.endswith(("q_proj.weight", "k_proj.weight")):
            v = to_interleaved(v, t.num_attention_heads if "q_proj" in k else t.num_key_value_heads)
        out[mistral_key(k)] = v.bfloat16().contiguous()
    if check:  # the layout fact, numerically, on encoder layer 0 and decoder layer 0
        g = torch.Generator().manual_seed(5)
        for pre, mpre, H, Hk, hd, theta, bias in (
                ("model.audio_tower.layers.0.", WE + "transformer.layers.0.", a.num_attention_heads,
                 a.num_attention_heads, a.head_dim, a.rope_parameters["rope_theta"], True),
                ("model.language_model.layers.0.", "layers.0.", t.num_attention_heads,
                 t.num_key_value_heads, t.head_dim, t.rope_parameters["rope_theta"], False)):
            x = torch.randn(40, sd[pre + "self_attn.q_proj.weight"].shape[1], generator=g).double()
            qb = sd[pre + "self_attn.q_proj.bias"].double() if bias else 0
            qbm = out[mpre + "attention.wq.bias"].double() if bias else 0
            d = check_rope_layouts(x @ sd[pre + "self_attn.q_proj.weight"].double().T + qb,
                                   x @ sd[pre + "self_attn.k_proj.weight"].double().T,
                                   x @ out[mpre + "attention.wq.weight"].double().T + qbm,
                                   x @ out[mpre + "attention.wk.weight"].double().T, hd, theta)
            print("  RoPE layouts, %s: max |score diff| %.2g" % (pre, d))
    for k in drop:
        del out[k]
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    save_file(out, os.path.join(folder, "consolidated.safetensors"))
    with open(os.path.join(folder, "params.json"), "w") as f:
        json.dump(params_json(cfg), f, indent=2)
    tk = tekken_json(tok, t.vocab_size - vocab_cut, N_LEFT, DELAY * 80)
    if vocab_cut:
        tk["vocab"] = tk["vocab"][:-vocab_cut]
    with open(os.path.join(folder, "tekken.json"), "w") as f:
        json.dump(tk, f)


def write_hf(folder, model, tok):
    """transformers' own save_pretrained (bf16, sharded) + tekken.json + preprocessor config."""
    shutil.rmtree(folder, ignore_errors=True)
    m = VoxtralRealtimeForConditionalGeneration(model.config)
    m.load_state_dict(model.state_dict())
    m = m.to(torch.bfloat16)
    m.save_pretrained(folder, max_shard_size="100KB")
    VoxtralRealtimeFeatureExtractor(feature_size=128, global_log_mel_max=GLOBAL_LOG_MEL_MAX) \
        .save_pretrained(folder)
    with open(os.path.join(folder, "tekken.json"), "w") as f:
        json.dump(tekken_json(tok, model.config.text_config.vocab_size, N_LEFT, DELAY * 80), f)
    for extra in ("generation_config.json",):  # not read by the converter
        p = os.path.join(folder, extra)
        if os.path.exists(p):
            os.remove(p)


def write_checkpoints(base, tok):
    cfg = base.config
    sd = base.state_dict()
    write_mistral(os.path.join(OUT, "ckpt_mistral"), cfg, sd, tok, check=True)
    write_hf(os.path.join(OUT, "ckpt_hf"), base, tok)
    mcfg = micro_config()
    torch.manual_seed(7)
    msd = VoxtralRealtimeForConditionalGeneration(mcfg).state_dict()
    write_mistral(os.path.join(OUT, "ckpt_bad_missing"), mcfg, msd, tok, drop=("norm.weight",))
    write_mistral(os.path.join(OUT, "ckpt_bad_vocab"), mcfg, msd, tok, vocab_cut=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    pieces, special = tekken_vocab()
    tok = {"type": "tekken", "pieces": pieces, "special": special}
    base = random_model(hf_config(16, 20), 1234)
    if "--checkpoints-only" in sys.argv[1:]:
        write_checkpoints(base, tok)
        return
    write_micro(tok)
    audio = load_audio()
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
    write_checkpoints(base, tok)


if __name__ == "__main__":
    main()
