#!/usr/bin/env python3
"""gen_convert_fixtures.py — write the tiny CTranslate2 Whisper fixtures of tests/test_convert.c.

Run with Debian's python3 (numpy only):  python3 scripts/gen_convert_fixtures.py
Deterministic (fixed seed), so rerunning gives byte-identical files in tests/fixtures/convert/:

  ct2_f16/   model.bin (float16, like faster-whisper-tiny.en), config.json, vocabulary.json
  ct2_int8/  model.bin (linear weights and the embedding int8 with per-row "_scale", the rest
             float32, like CTranslate2's int8_float32), config.json, vocabulary.txt
  expected.json  the model dimensions, every output tensor's shape, the special-token ids, and
             the values the converter must produce for the split attention projections (the
             rows of the fused CTranslate2 matrices) and for dequantized int8 tensors

The toy model has Whisper's structure at a tiny size: 8 mels (no mel_filters.npz entry, so the
converter computes the Slaney filterbank), width 12, 2 heads, 2 encoder and
2 decoder layers, 24 audio and 12 text positions, and a 277-token vocabulary: the 256
single-byte GPT-2 pieces, <|endoftext|>, <|startoftranscript|>, two languages, the six task
tokens and eleven timestamps.

model.bin is written in CTranslate2's binary format version 6: uint32 version, then strings as
uint16 length (counting a final NUL) + UTF-8 + NUL: spec name "WhisperSpec", uint32 revision
3, uint32 variable count, each variable as name, uint8 rank, uint32 dims, uint8 type id
(0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16), uint32 byte count, data; then
uint32 alias count and (alias, target) name pairs. Variables are in sorted name order, as
CTranslate2 writes them.
"""

import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import convert_whisper as cw  # noqa: E402

OUT = os.path.join(HERE, "..", "tests", "fixtures", "convert")
D, HEADS, N_MELS, ENC_LAYERS, DEC_LAYERS, AUDIO_CTX, TEXT_CTX = 12, 2, 8, 2, 2, 24, 12
TYPE_IDS = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2,
            np.dtype(np.int32): 3, np.dtype(np.float16): 4}


def vocabulary():
    # GPT-2's first 256 ranks are the single bytes in the order of their unicode stand-ins
    pieces = sorted((cw.piece_from_bytes(bytes([b])) for b in range(256)), key=ord)
    return pieces + cw.whisper_special_pieces(256 + 21, 256, False, n_lang=2)


def write_string(f, s):
    b = s.encode("utf-8")
    f.write(struct.pack("<H", len(b) + 1) + b + b"\0")


def write_ct2(path, variables, aliases):
    with open(path, "wb") as f:
        f.write(struct.pack("<I", 6))
        write_string(f, "WhisperSpec")
        f.write(struct.pack("<I", 3))
        f.write(struct.pack("<I", len(variables)))
        for name in sorted(variables):
            a = np.asarray(variables[name])
            write_string(f, name)
            f.write(struct.pack("<B", a.ndim))
            for dim in a.shape:
                f.write(struct.pack("<I", dim))
            f.write(struct.pack("<B", TYPE_IDS[a.dtype]))
            data = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
            f.write(struct.pack("<I", len(data)))
            f.write(data)
        f.write(struct.pack("<I", len(aliases)))
        for alias, target in sorted(aliases.items()):
            write_string(f, alias)
            write_string(f, target)


def toy_variables(rng, n_vocab):
    """CTranslate2 WhisperSpec variables (float32) of the toy model."""
    v = {}

    def lin(name, rows, cols):
        v[name + "/weight"] = (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)
        v[name + "/bias"] = (rng.standard_normal(rows) * 0.1).astype(np.float32)

    def ln(name):
        v[name + "/gamma"] = (1 + rng.standard_normal(D) * 0.1).astype(np.float32)
        v[name + "/beta"] = (rng.standard_normal(D) * 0.1).astype(np.float32)

    def fused(name, parts):
        lin(name, parts * D, D)
        v[name + "/bias"][D:2 * D] = 0  # Whisper's key has no bias; CTranslate2 stores zeros

    v["encoder/conv1/weight"] = (rng.standard_normal((D, N_MELS, 3)) * 0.1).astype(np.float32)
    v["encoder/conv1/bias"] = (rng.standard_normal(D) * 0.1).astype(np.float32)
    v["encoder/conv2/weight"] = (rng.standard_normal((D, D, 3)) * 0.1).astype(np.float32)
    v["encoder/conv2/bias"] = (rng.standard_normal(D) * 0.1).astype(np.float32)
    v["encoder/position_encodings/encodings"] = cw.sinusoids(AUDIO_CTX, D)
    v["encoder/num_heads"] = np.array(HEADS, dtype=np.int16)
    ln("encoder/layer_norm")
    for i in range(ENC_LAYERS):
        p = "encoder/layer_%d/" % i
        ln(p + "self_attention/layer_norm")
        fused(p + "self_attention/linear_0", 3)
        lin(p + "self_attention/linear_1", D, D)
        ln(p + "ffn/layer_norm")
        lin(p + "ffn/linear_0", 4 * D, D)
        lin(p + "ffn/linear_1", D, 4 * D)
    v["decoder/embeddings/weight"] = (rng.standard_normal((n_vocab, D)) * 0.2).astype(np.float32)
    v["decoder/position_encodings/encodings"] = (rng.standard_normal((TEXT_CTX, D)) * 0.05) \
        .astype(np.float32)
    ln("decoder/layer_norm")
    for i in range(DEC_LAYERS):
        p = "decoder/layer_%d/" % i
        ln(p + "self_attention/layer_norm")
        fused(p + "self_attention/linear_0", 3)
        lin(p + "self_attention/linear_1", D, D)
        ln(p + "attention/layer_norm")
        lin(p + "attention/linear_0", D, D)
        lin(p + "attention/linear_1", 2 * D, D)
        v[p + "attention/linear_1/bias"][:D] = 0
        lin(p + "attention/linear_2", D, D)
        ln(p + "ffn/layer_norm")
        lin(p + "ffn/linear_0", 4 * D, D)
        lin(p + "ffn/linear_1", D, 4 * D)
    flags = {"decoder/activation": (3, np.int8), "decoder/alibi": (0, np.int8),
             "decoder/alignment_heads": (1, np.int16), "decoder/alignment_layer": (-1, np.int16),
             "decoder/num_heads": (HEADS, np.int16), "decoder/pre_norm": (1, np.int8),
             "decoder/scale_embeddings": (0, np.int8),
             "decoder/start_from_zero_embedding": (0, np.int8)}
    for k, (val, dt) in flags.items():
        v[k] = np.array(val, dtype=dt)
    return v


def quantize_int8(v):
    """CTranslate2's int8 rule for linear weights and the embedding: scale = 127 / max|row|,
    q = rint(w * scale); the dequantized value is q / scale."""
    out, deq = dict(v), {}
    for name, a in v.items():
        if not (name.endswith("/weight") and a.ndim == 2):
            continue
        amax = np.abs(a).max(axis=1)
        amax[amax == 0] = 127.0
        scale = (np.float32(127.0) / amax).astype(np.float32)
        q = np.rint(a * scale[:, None]).astype(np.int8)
        out[name] = q
        out[name + "_scale"] = scale
        deq[name] = q.astype(np.float32) / scale[:, None]
    return out, deq


def flat(a):
    """float32 values as the shortest decimals that read back (as float32) to the same value."""
    return [float(str(x)) for x in np.asarray(a, dtype=np.float32).reshape(-1)]


def main():
    rng = np.random.default_rng(20240604)
    pieces = vocabulary()
    n_vocab = len(pieces)
    base = toy_variables(rng, n_vocab)
    tokens, _ = cw.special_ids(pieces, "toy")
    suppress = sorted([pieces.index(cw.piece_from_bytes(b'"')), pieces.index(cw.piece_from_bytes(b"#"))]
                      + [tokens[k] for k in ("translate", "transcribe", "sot", "sot_prev", "sot_lm",
                                             "no_speech")])
    ct2_config = {"suppress_ids": suppress, "suppress_ids_begin": [tokens["eot"]],
                  "lang_ids": list(range(tokens["sot"] + 1, tokens["translate"]))}

    f16 = {k: (a.astype(np.float16) if a.dtype == np.float32 else a) for k, a in base.items()}
    i8, deq = quantize_int8(base)
    aliases = {"decoder/projection/weight": "decoder/embeddings/weight"}
    for sub, vars_, vocab_file in (("ct2_f16", f16, "vocabulary.json"),
                                   ("ct2_int8", i8, "vocabulary.txt")):
        d = os.path.join(OUT, sub)
        os.makedirs(d, exist_ok=True)
        write_ct2(os.path.join(d, "model.bin"), vars_, aliases)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(ct2_config, f, indent=2, sort_keys=True)
            f.write("\n")
        with open(os.path.join(d, vocab_file), "w", encoding="utf-8", newline="\n") as f:
            if vocab_file.endswith(".json"):
                json.dump(pieces, f, ensure_ascii=False)
            else:
                f.write("".join(p + "\n" for p in pieces))

    dims = {"n_mels": N_MELS, "n_audio_ctx": AUDIO_CTX, "n_audio_state": D, "n_audio_head": HEADS,
            "n_audio_layer": ENC_LAYERS, "n_vocab": n_vocab, "n_text_ctx": TEXT_CTX,
            "n_text_state": D, "n_text_head": HEADS, "n_text_layer": DEC_LAYERS}
    shapes = cw.expected_shapes(dims)

    def rows(a, j):
        return a[j * D:(j + 1) * D]

    e0 = "encoder/layer_0/self_attention/linear_0/"
    d1 = "decoder/layer_1/self_attention/linear_0/"
    c1 = "decoder/layer_1/attention/linear_1/"
    wf = {k: f16[k].astype(np.float32) for k in (e0 + "weight", e0 + "bias", d1 + "weight",
                                                 d1 + "bias", c1 + "weight", c1 + "bias")}
    values_f16 = {
        "encoder.blocks.0.attn.query.weight": flat(rows(wf[e0 + "weight"], 0)),
        "encoder.blocks.0.attn.query.bias": flat(rows(wf[e0 + "bias"], 0)),
        "encoder.blocks.0.attn.key.weight": flat(rows(wf[e0 + "weight"], 1)),
        "encoder.blocks.0.attn.value.weight": flat(rows(wf[e0 + "weight"], 2)),
        "decoder.blocks.1.attn.key.weight": flat(rows(wf[d1 + "weight"], 1)),
        "decoder.blocks.1.cross_attn.key.weight": flat(rows(wf[c1 + "weight"], 0)),
        "decoder.blocks.1.cross_attn.value.weight": flat(rows(wf[c1 + "weight"], 1)),
        "decoder.blocks.1.cross_attn.value.bias": flat(rows(wf[c1 + "bias"], 1)),
    }
    values_int8 = {
        "encoder.blocks.1.attn.key.weight": flat(rows(deq[
            "encoder/layer_1/self_attention/linear_0/weight"], 1)),
        "decoder.blocks.0.cross_attn.value.weight": flat(rows(deq[
            "decoder/layer_0/attention/linear_1/weight"], 1)),
        "encoder.conv2.bias": flat(base["encoder/conv2/bias"]),
    }
    expected = {
        "dims": dims, "n_tensors": len(shapes),
        "n_params": int(sum(int(np.prod(s)) for s in shapes.values())),
        "tokens": tokens, "suppress_tokens": suppress, "begin_suppress_tokens": [tokens["eot"]],
        "shapes": {k: list(s) for k, s in sorted(shapes.items())},
        "values_f16": values_f16, "values_int8": values_int8,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    total = 0
    for root, _, files in os.walk(OUT):
        for n in files:
            total += os.path.getsize(os.path.join(root, n))
    print("wrote %s (%d bytes in all)" % (os.path.normpath(OUT), total))


if __name__ == "__main__":
    main()
