#!/usr/bin/env python3
"""make_synthetic.py — random-weight srkit models of the exact real shapes, for speed and memory
measurements at sizes whose real weights are not at hand.

  make_synthetic.py --arch whisper --preset tiny|base [--multilingual] [--dtype f32|f16|bf16|int8]
                    [--seed N] OUT.h5

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


BUILDERS = {"whisper": (tuple(WHISPER_PRESETS), whisper_builder)}


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
