#!/usr/bin/env python3
"""make_synthetic.py — random-weight srkit models of the exact real shapes, for speed and memory
measurements at sizes whose real weights are not at hand.

  make_synthetic.py --arch whisper --preset tiny|base [--multilingual] [--dtype f32|f16|bf16|int8]
                    [--seed N] OUT.h5
  make_synthetic.py --arch voxtral_realtime --preset mini-4b|tiny [--dtype f32|bf16] OUT.h5

The file has the same layout, config, tokenizer and front end as a converted checkpoint of that
size (scripts/convert_whisper.py builds them; docs/whisper-weights.md), so a backend loads it
exactly like the real one; only the weights are noise and the "source" attribute says so. The
outputs are meaningless text. Deterministic: numpy's PCG64 with a fixed seed (default 0), and
timestamp-free HDF5, so the same arguments give a byte-identical file.

Weights: matrices and embeddings ~ N(0, 0.02^2) (GPT-2-style initialization, which keeps
activations in a realistic range through the layers), biases 0, layer-norm gains 1 and offsets
0, the encoder's sinusoidal positions exact. The vocabulary is openai-whisper's
(whisper-assets/gpt2.tiktoken, or multilingual.tiktoken with --multilingual, from the shared data
folder or --tiktoken) plus its special tokens.

New architectures plug in through BUILDERS: arch -> (presets, builder(preset, args) returning
(config, tensors, tokenizer, frontend, license)).
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import convert_whisper as cw  # noqa: E402
import srkit_h5  # noqa: E402

# openai-whisper's ModelDimensions of the English-only (.en) checkpoints; --multilingual adds
# one token (51865), as the multilingual checkpoints have
WHISPER_PRESETS = {
    "tiny": {"n_mels": 80, "n_audio_ctx": 1500, "n_audio_state": 384, "n_audio_head": 6,
             "n_audio_layer": 4, "n_vocab": 51864, "n_text_ctx": 448, "n_text_state": 384,
             "n_text_head": 6, "n_text_layer": 4},
    "base": {"n_mels": 80, "n_audio_ctx": 1500, "n_audio_state": 512, "n_audio_head": 8,
             "n_audio_layer": 6, "n_vocab": 51864, "n_text_ctx": 448, "n_text_state": 512,
             "n_text_head": 8, "n_text_layer": 6},
}


def whisper_builder(preset, args):
    dims = dict(WHISPER_PRESETS[preset])
    if args.multilingual:
        dims["n_vocab"] = 51865
    name = "multilingual.tiktoken" if args.multilingual else "gpt2.tiktoken"
    tpath = args.tiktoken or cw.whisper_package_asset(name) or cw.shared_asset(name)
    if not tpath:
        raise cw.ConvertError("cannot find %s (openai-whisper's vocabulary): pass --tiktoken "
                              "PATH or set SRKIT_SHARED" % name)
    ranks = cw.read_tiktoken(tpath)
    pieces = [cw.piece_from_bytes(b) for b in ranks]
    pieces += cw.whisper_special_pieces(dims["n_vocab"], len(ranks), args.multilingual)
    tok, config = cw.tokenizer_and_config(dims, pieces, tpath, multilingual=args.multilingual)

    rng = np.random.default_rng(args.seed)
    tensors = {}
    # sorted names so the random stream, and so the file, depends only on the seed
    for name, shape in sorted(cw.expected_shapes(dims).items()):
        if name == "encoder.positional_embedding":
            tensors[name] = cw.sinusoids(dims["n_audio_ctx"], dims["n_audio_state"])
        elif name.endswith("_ln.weight") or name.endswith(("ln_post.weight", "decoder.ln.weight")):
            tensors[name] = np.ones(shape, dtype=np.float32)
        elif len(shape) == 1:
            tensors[name] = np.zeros(shape, dtype=np.float32)
        else:
            tensors[name] = (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02))
    filters, _ = cw.mel_filters(dims["n_mels"])
    return config, tensors, tok, {"mel_filters": filters}, "random weights (no licence needed)"


# Voxtral Mini 4B Realtime (mistralai/Voxtral-Mini-4B-Realtime-2602) and a small shape for tests;
# config keys as docs/voxtral.md, tensor names as transformers' state dict
VOXTRAL_PRESETS = {
    "mini-4b": {"enc": (1280, 32, 32, 64, 5120, 750), "dec": (3072, 26, 32, 8, 128, 9216, 8192),
                "vocab": 131072},
    "tiny": {"enc": (64, 2, 4, 16, 128, 750), "dec": (64, 2, 4, 2, 16, 128, 8192),
             "vocab": 1512},
}


def voxtral_builder(preset, args):
    """Random voxtral_realtime weights. Tensors are made float16 (bf16 rounding happens in
    srkit_h5), which halves what the builder holds; mini-4b (4.4 B parameters) still needs tens of
    GB of RAM while srkit_h5 converts, so it was not generated on the 2-core development machine."""
    if args.dtype not in ("f32", "bf16"):
        raise SystemExit("make_synthetic.py: error: voxtral_realtime files are f32 or bf16")
    p = VOXTRAL_PRESETS[preset]
    E, el, eh, ehd, eff, ew = p["enc"]
    D, dl, dh, dkv, dhd, dff, dw = p["dec"]
    V = p["vocab"]
    n_special = 1000
    pieces = [("<SPECIAL_%d>" % i).encode() for i in range(n_special)]
    for i, name in ((0, b"<unk>"), (1, b"<s>"), (2, b"</s>"), (32, b"[STREAMING_PAD]"),
                    (33, b"[STREAMING_WORD]")):
        pieces[i] = name
    pieces += [bytes([b]) for b in range(256)]
    letters = b"etaoinshrdlucmfwypvbgkqjxz"
    i = 0
    while len(pieces) < V:  # filler merges: distinct letter sequences
        j, w = i, b""
        while True:
            w += letters[j % 26:j % 26 + 1]
            j //= 26
            if not j:
                break
        pieces.append(b" " + w if i % 2 else w)
        i += 1
    tok = {"type": "tekken", "pieces": pieces, "special": [1] * n_special + [0] * (V - n_special)}
    config = {
        "sample_rate": 16000, "n_fft": 400, "hop_length": 160, "n_mels": 128,
        "global_log_mel_max": 1.5, "enc_dim": E, "enc_layers": el, "enc_heads": eh,
        "enc_head_dim": ehd, "enc_ffn": eff, "enc_rope_theta": 1e6, "enc_norm_eps": 1e-5,
        "enc_sliding_window": ew, "downsample_factor": 4, "dim": D, "n_layers": dl,
        "n_heads": dh, "n_kv_heads": dkv, "head_dim": dhd, "ffn": dff, "rope_theta": 1e6,
        "norm_eps": 1e-5, "vocab": V, "sliding_window": dw, "ada_dim": 32, "time_theta": 10000.0,
        "bos_id": 1, "eos_id": 2, "pad_id": 32, "n_left_pad_tokens": 32, "n_right_pad_tokens": 17,
        "delay_tokens": 6, "min_delay_tokens": 1, "max_delay_tokens": 30, "flush_tokens": 32,
        "dtype": "bf16" if args.dtype == "bf16" else "f32",
    }
    shapes = {"model.audio_tower.embedder.conv1.weight": (E, 128, 3),
              "model.audio_tower.embedder.conv1.bias": (E,),
              "model.audio_tower.embedder.conv2.weight": (E, E, 3),
              "model.audio_tower.embedder.conv2.bias": (E,),
              "model.audio_tower.norm.weight": (E,),
              "model.multi_modal_projector.linear_1.weight": (D, 4 * E),
              "model.multi_modal_projector.linear_2.weight": (D, D),
              "model.language_model.embed_tokens.weight": (V, D),
              "model.language_model.norm.weight": (D,)}
    for l in range(el):
        a = "model.audio_tower.layers.%d." % l
        shapes.update({a + "self_attn.q_proj.weight": (eh * ehd, E), a + "self_attn.q_proj.bias": (eh * ehd,),
                       a + "self_attn.k_proj.weight": (eh * ehd, E),
                       a + "self_attn.v_proj.weight": (eh * ehd, E), a + "self_attn.v_proj.bias": (eh * ehd,),
                       a + "self_attn.o_proj.weight": (E, eh * ehd), a + "self_attn.o_proj.bias": (E,),
                       a + "mlp.gate_proj.weight": (eff, E), a + "mlp.up_proj.weight": (eff, E),
                       a + "mlp.down_proj.weight": (E, eff), a + "mlp.down_proj.bias": (E,),
                       a + "self_attn_layer_norm.weight": (E,), a + "final_layer_norm.weight": (E,)})
    for l in range(dl):
        a = "model.language_model.layers.%d." % l
        shapes.update({a + "self_attn.q_proj.weight": (dh * dhd, D),
                       a + "self_attn.k_proj.weight": (dkv * dhd, D),
                       a + "self_attn.v_proj.weight": (dkv * dhd, D),
                       a + "self_attn.o_proj.weight": (D, dh * dhd),
                       a + "mlp.gate_proj.weight": (dff, D), a + "mlp.up_proj.weight": (dff, D),
                       a + "mlp.down_proj.weight": (D, dff),
                       a + "ada_rms_norm.linear1.weight": (32, D), a + "ada_rms_norm.linear2.weight": (D, 32),
                       a + "input_layernorm.weight": (D,), a + "post_attention_layernorm.weight": (D,)})
    rng = np.random.default_rng(args.seed)
    tensors = {}
    for name, shape in sorted(shapes.items()):
        if name.endswith("norm.weight"):
            tensors[name] = np.ones(shape, dtype=np.float32)
        elif len(shape) == 1:
            tensors[name] = np.zeros(shape, dtype=np.float32)
        else:
            tensors[name] = (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).astype(np.float16)
    return config, tensors, tok, None, "random weights (no licence needed)"


BUILDERS = {"whisper": (tuple(WHISPER_PRESETS), whisper_builder),
            "voxtral_realtime": (tuple(VOXTRAL_PRESETS), voxtral_builder)}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a random-weight srkit model of a real size.")
    ap.add_argument("out", help="output .h5")
    ap.add_argument("--arch", required=True, choices=sorted(BUILDERS))
    ap.add_argument("--preset", required=True)
    ap.add_argument("--dtype", choices=("f32", "f16", "bf16", "int8"), default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--multilingual", action="store_true",
                    help="whisper: the multilingual vocabulary (51865 tokens)")
    ap.add_argument("--tiktoken", help="whisper: openai-whisper vocabulary file")
    args = ap.parse_args(argv)
    presets, build = BUILDERS[args.arch]
    if args.preset not in presets:
        print("make_synthetic.py: error: --arch %s has presets %s, not %r"
              % (args.arch, ", ".join(presets), args.preset), file=sys.stderr)
        return 1
    try:
        config, tensors, tok, frontend, license_ = build(args.preset, args)
    except cw.ConvertError as e:
        print("make_synthetic.py: error: %s" % e, file=sys.stderr)
        return 1
    source = ("synthetic %s %s: random weights, seed %d (scripts/make_synthetic.py); not a "
              "trained model" % (args.arch, args.preset, args.seed))
    srkit_h5.write_model(args.out, args.arch, config, tensors, dtype=args.dtype, tokenizer=tok,
                         frontend=frontend, source=source, license=license_)
    n = sum(int(np.prod(a.shape)) for a in tensors.values())
    print("%s: %s %s, %.1fM parameters, %s" % (args.out, args.arch, args.preset, n / 1e6,
                                                args.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
