#!/usr/bin/env python3
"""make_synthetic.py — random-weight srkit models of the exact real shapes, for speed and memory
measurements at sizes whose real weights are not at hand.

  make_synthetic.py --arch whisper --preset tiny|base [--multilingual] [--dtype f32|f16|bf16|int8]
                    [--seed N] OUT.h5
  make_synthetic.py --arch voxtral_realtime --preset mini-4b|tiny [--dtype f32|bf16|int8]
                    [--dec-layers N] [--enc-layers N] [--jobs N] [--no-checksum] OUT.h5

The file has the same layout, config, tokenizer and front end as a converted checkpoint of that
size (scripts/convert_whisper.py builds them; docs/whisper-weights.md), so a backend loads it
exactly like the real one; only the weights are noise and the "source" attribute says so. The
outputs are meaningless text. Deterministic: numpy's PCG64 with a fixed seed (default 0; for
voxtral_realtime one generator per part of a tensor, seeded with the seed and the part's
place, so the file does not depend on --jobs), and timestamp-free HDF5, so the same arguments give a
byte-identical file.

Weights: matrices and embeddings ~ N(0, 0.02^2) (GPT-2-style initialization, which keeps
activations in a realistic range through the layers), biases 0, layer-norm gains 1 and offsets
0, the encoder's sinusoidal positions exact. The vocabulary is openai-whisper's
(whisper-assets/gpt2.tiktoken, or multilingual.tiktoken with --multilingual, from the shared data
folder or --tiktoken) plus its special tokens.

voxtral_realtime (mini-4b: 4.4 B parameters, 8.8 GB in bf16) is written tensor by tensor
(STREAMING_WRITERS), its tensors made in parts by --jobs worker processes a few ahead of the
writer, so generating it needs a few GB of memory; --dec-layers / --enc-layers give the real
widths at a smaller depth. --dtype int8 quantizes each matrix per output row as it is made
(scripts/recast_model.py's rule: 4.4 GB at mini-4b; the largest tensor, the 131072 x 3072
embedding, takes about 5 GB of memory while it is quantized).

New architectures plug in through BUILDERS: arch -> (presets, builder(preset, args) returning
(config, tensors, tokenizer, frontend, license)).
"""

import argparse
import collections
import concurrent.futures
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import convert_nemo as cn  # noqa: E402
import convert_voxtral as cv  # noqa: E402
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
    """Config, tokenizer and {name: shape} of a random voxtral_realtime model (no weights yet:
    voxtral_write makes them one tensor at a time)."""
    if args.dtype not in ("f32", "bf16", "int8"):
        raise cw.ConvertError("voxtral_realtime files are f32, bf16 or int8, not %s" % args.dtype)
    p = VOXTRAL_PRESETS[preset]
    E, el, eh, ehd, eff, ew = p["enc"]
    D, dl, dh, dkv, dhd, dff, dw = p["dec"]
    if args.dec_layers is not None:
        dl = args.dec_layers
    if args.enc_layers is not None:
        el = args.enc_layers
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
        # the converter's precision; an int8 file is what scripts/recast_model.py makes of a
        # bf16 one (its config unchanged)
        "dtype": "bf16" if args.dtype == "int8" else args.dtype,
    }
    return config, cv.expected_shapes(config), tok


VX_PART = 1 << 25  # values a worker task makes at most: whole rows of a matrix (64 MB in bf16)


def voxtral_part(seed, index, part, shape, dtype, norm, r0, r1):
    """Rows [r0, r1) of tensor `index` (of the sorted names) of a random voxtral_realtime model,
    as the writer takes them: a 1-D tensor whole, 1 (norm gains) or 0; a matrix's rows ~
    N(0, 0.02^2) from their own generator (PCG64 seeded with (seed, index, part): a part depends
    only on the seed and its place, not on which worker made it or when), drawn 4M values at a
    time and, for bf16, rounded to bf16 as they come; for int8 quantized per output row here
    (scripts/recast_model.py's rule) into ("I8Q", (q, scale))."""
    if len(shape) == 1:
        return "F32", np.full(shape, 1.0 if norm else 0.0, np.float32)
    rows = (r1 - r0,) + tuple(shape[1:])
    n = int(np.prod(rows))
    rng = np.random.default_rng([seed, index, part])
    block = 1 << 22
    if dtype == "bf16":
        out = np.empty(n, np.uint16)
        for i in range(0, n, block):
            k = min(block, n - i)
            out[i:i + k] = srkit_h5.f32_to_bf16_bits(
                rng.standard_normal(k, dtype=np.float32) * np.float32(0.02))
        return "BF16", out.reshape(rows)
    a = (rng.standard_normal(n, dtype=np.float32) * np.float32(0.02)).reshape(rows)
    if dtype == "int8":
        return "I8Q", srkit_h5.quantize_int8_rows(a)
    return "F32", a


def voxtral_write(preset, args, source):
    """Write the random voxtral_realtime model tensor by tensor (scripts/convert_voxtral.py's
    streaming writer), each matrix made in parts of whole rows (VX_PART values at most) by --jobs
    worker processes (voxtral_part), at most 2 parts a worker ahead of the writer, in order:
    memory holds the tensor being written and the parts in flight (the 131072 x 3072 embedding is
    0.8 GB in bf16), never the 8.8 GB model, and the drawing (about 43 M values a second a core
    here: 100 core-seconds at mini-4b) is spread over the cores. Norm gains 1, biases 0. Returns
    (parameters, config)."""
    config, shapes, tok = voxtral_builder(preset, args)
    names = sorted(shapes)
    tasks = []  # (tensor index, part, r0, r1), in writing order
    for i, name in enumerate(names):
        shape = shapes[name]
        if len(shape) == 1:
            tasks.append((i, 0, 0, shape[0]))
            continue
        cols = int(np.prod(shape[1:]))
        step = max(1, VX_PART // cols)
        for part, r0 in enumerate(range(0, shape[0], step)):
            tasks.append((i, part, r0, min(shape[0], r0 + step)))
    jobs = max(1, args.jobs)
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as ex:
        futs = collections.deque()
        nxt = 0

        def fill():
            nonlocal nxt
            while nxt < len(tasks) and len(futs) < 2 * jobs:
                i, part, r0, r1 = tasks[nxt]
                futs.append(ex.submit(voxtral_part, args.seed, i, part, shapes[names[i]], args.dtype,
                                      names[i].endswith("norm.weight"), r0, r1))
                nxt += 1

        def reader(i):
            def rd():
                parts = []
                while True:
                    fill()
                    r = futs.popleft().result()
                    parts.append(r)
                    done = sum(len(p[1][0] if p[0] == "I8Q" else p[1]) for p in parts)
                    if done >= shapes[names[i]][0]:
                        break
                dt = parts[0][0]
                if len(parts) == 1:
                    return parts[0]
                if dt == "I8Q":
                    return dt, (np.concatenate([p[1][0] for p in parts]),
                                np.concatenate([p[1][1] for p in parts]))
                return dt, np.concatenate([p[1] for p in parts])
            return rd

        plan = [(name, reader(i)) for i, name in enumerate(names)]
        cv.write(args.out, config, plan, tok, args.dtype, source,
                 "random weights (no licence needed)", not args.no_checksum, lambda *a, **k: None)
    return sum(int(np.prod(s)) for s in shapes.values()), config


# NVIDIA nemotron-speech-streaming-en-0.6b (cache-aware FastConformer-RNNT) and the test shape of
# scripts/gen_golden_fastconformer.py; config keys as docs/fastconformer.md
FASTCONFORMER_PRESETS = {
    "nemotron-0.6b": {"n_mels": 128, "d_model": 1024, "n_layers": 24, "n_heads": 8, "d_ff": 4096,
                      "conv_kernel_size": 9, "subsampling_conv_channels": 256,
                      "vocab_size": 1024, "pred_hidden": 640, "pred_rnn_layers": 2,
                      "joint_hidden": 640},
    "small": {"n_mels": 80, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 128,
              "conv_kernel_size": 9, "subsampling_conv_channels": 16, "vocab_size": 63,
              "pred_hidden": 32, "pred_rnn_layers": 2, "joint_hidden": 32},
}

# Blank logit offset of the synthetic joint. With N(0, 0.02^2) weights the joint's logits are
# nearly uniform, so greedy RNN-T would emit max_symbols tokens on almost every frame and the
# decoder would cost far more than with a trained model; raising the blank bias (the largest
# of ~1000 non-blank logits is about 0.7) makes most frames blank, as in real speech.
FC_BLANK_BIAS = 0.75


class LazyTensors:
    """{name: shape} whose arrays are generated one at a time on access, in sorted-name order
    (so each file depends only on the seed): a builder returns it instead of a dict when the
    model is too large to hold twice in memory; main() then writes it tensor by tensor."""

    def __init__(self, shapes, make):
        self.shapes = dict(shapes)
        self.make = make

    def __iter__(self):
        return iter(sorted(self.shapes))

    def __len__(self):
        return len(self.shapes)

    def n_params(self):
        return sum(int(np.prod(s)) for s in self.shapes.values())


def fastconformer_builder(preset, args):
    """Random fastconformer_rnnt weights of the real shapes, generated tensor by tensor: matrices
    N(0, 0.02^2) (pre-encode 3x3 convs N(0, 1/9): they see raw log-mels of one channel), norm
    gains 1, biases and the blank embedding row 0, attention position biases N(0, 0.02^2), the
    joint's blank bias FC_BLANK_BIAS."""
    if args.dtype not in ("f32", "f16", "bf16"):
        raise SystemExit("make_synthetic.py: error: fastconformer_rnnt files are f32, f16 or bf16")
    p = FASTCONFORMER_PRESETS[preset]
    config = {
        "sample_rate": 16000, "n_fft": 512, "win_length": 400, "hop_length": 160,
        "n_mels": p["n_mels"], "preemph": 0.97, "normalize": "NA", "d_model": p["d_model"],
        "n_layers": p["n_layers"], "n_heads": p["n_heads"], "d_ff": p["d_ff"],
        "conv_kernel_size": p["conv_kernel_size"], "conv_norm_type": "layer_norm",
        "conv_context_size": [p["conv_kernel_size"] - 1, 0], "subsampling": "dw_striding",
        "subsampling_factor": 8, "subsampling_conv_channels": p["subsampling_conv_channels"],
        "causal_downsampling": 1, "xscaling": 1, "self_attention_model": "rel_pos",
        "att_context_style": "chunked_limited",
        "att_context_size": [[70, 0], [70, 1], [70, 6], [70, 13]], "pos_emb_max_len": 5000,
        "vocab_size": p["vocab_size"], "blank": p["vocab_size"], "pred_hidden": p["pred_hidden"],
        "pred_rnn_layers": p["pred_rnn_layers"], "joint_hidden": p["joint_hidden"],
        "joint_activation": "relu", "tdt_durations": [], "max_symbols": 10,
        "local_attn_window": [128, 128], "local_attn_threshold": 8192,
    }
    # SentencePiece-style pieces: <unk>, then word starts and continuations of letter strings
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    pieces, i = ["<unk>"], 0
    while len(pieces) < p["vocab_size"]:
        j, w = i, ""
        while True:
            w += letters[j % 26]
            j //= 26
            if not j:
                break
        pieces.append("\u2581" + w if i % 2 == 0 else w)
        i += 1
    tok = {"type": "sentencepiece", "pieces": pieces,
           "special": [1] + [0] * (p["vocab_size"] - 1)}
    rng = np.random.default_rng(args.seed)
    V = p["vocab_size"]

    def make(name, shape):
        if name.endswith(".bias"):
            a = np.zeros(shape, dtype=np.float32)
            if name == "joint.joint_net.2.bias":
                a[V] = FC_BLANK_BIAS
            return a
        if len(shape) == 1:  # LayerNorm gains
            return np.ones(shape, dtype=np.float32)
        std = 1.0 / 3.0 if shape[1:] == (1, 3, 3) and name.endswith("conv.0.weight") else 0.02
        a = rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
        if name == "decoder.prediction.embed.weight":
            a[V] = 0  # blank = padding row
        return a

    return (config, LazyTensors(cn.expected_shapes(config, "joint.joint_net.2"), make), tok, None,
            "random weights (no licence needed)")


def write_streamed(path, arch, config, lazy, dtype, tokenizer, source, license_):
    """srkit_h5.write_model's file, but each tensor generated, converted and written before the
    next exists: peak memory is one tensor (plus h5py's buffers), not the model."""
    with srkit_h5.creating(path, arch, config, source, license_) as f:
        w = srkit_h5._group(f, "weights")
        for name in lazy:
            srkit_h5._check_name(name)
            for dname, data, attrs in srkit_h5._stored(name, lazy.make(name, lazy.shapes[name]),
                                                       dtype):
                srkit_h5._dataset(w, dname, data, attrs, True)
        srkit_h5.write_tokenizer(f, tokenizer)


BUILDERS = {"whisper": (tuple(WHISPER_PRESETS), whisper_builder),
            "voxtral_realtime": (tuple(VOXTRAL_PRESETS), voxtral_builder),
            "fastconformer_rnnt": (tuple(FASTCONFORMER_PRESETS), fastconformer_builder)}
# architectures whose models are too large to hold: written tensor by tensor by their own writer
STREAMING_WRITERS = {"voxtral_realtime": voxtral_write}


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
    ap.add_argument("--dec-layers", type=int, help="voxtral_realtime: decoder depth instead of "
                                                   "the preset's (real widths, fewer layers)")
    ap.add_argument("--enc-layers", type=int, help="voxtral_realtime: encoder depth instead of "
                                                   "the preset's")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="voxtral_realtime: worker processes making the tensors (default: the "
                         "CPUs); the file is the same for any count")
    ap.add_argument("--no-checksum", action="store_true",
                    help="voxtral_realtime: plain datasets without Fletcher-32 (faster loads)")
    args = ap.parse_args(argv)
    presets, build = BUILDERS[args.arch]
    if args.preset not in presets:
        print("make_synthetic.py: error: --arch %s has presets %s, not %r"
              % (args.arch, ", ".join(presets), args.preset), file=sys.stderr)
        return 1
    source = ("synthetic %s %s: random weights, seed %d (scripts/make_synthetic.py); not a "
              "trained model" % (args.arch, args.preset, args.seed))
    if args.arch in STREAMING_WRITERS:
        try:
            n, config = STREAMING_WRITERS[args.arch](args.preset, args, source)
        except (cw.ConvertError, cv.ConvertError) as e:
            print("make_synthetic.py: error: %s" % e, file=sys.stderr)
            return 1
        print("%s: %s %s (%d + %d layers), %.1fM parameters, %s"
              % (args.out, args.arch, args.preset, config["enc_layers"], config["n_layers"],
                 n / 1e6, args.dtype))
        return 0
    try:
        config, tensors, tok, frontend, license_ = build(args.preset, args)
    except cw.ConvertError as e:
        print("make_synthetic.py: error: %s" % e, file=sys.stderr)
        return 1
    if isinstance(tensors, LazyTensors):  # generated and written one tensor at a time
        write_streamed(args.out, args.arch, config, tensors, args.dtype, tok, source, license_)
        n = tensors.n_params()
    else:
        srkit_h5.write_model(args.out, args.arch, config, tensors, dtype=args.dtype,
                             tokenizer=tok, frontend=frontend, source=source, license=license_)
        n = sum(int(np.prod(a.shape)) for a in tensors.values())
    print("%s: %s %s, %.1fM parameters, %s" % (args.out, args.arch, args.preset, n / 1e6,
                                                args.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
