#!/usr/bin/env python3
"""Write the tokenizer test fixtures tests/fixtures/tokenizer_*.h5 (tests/test_tokenizer.c).

One tiny vocabulary per tokenizer type, a byte-level BPE vocabulary cut from GPT-2's
gpt2.tiktoken (the first 300 ranks plus a few multi-byte ranks and <|endoftext|>), and
malformed files for the error paths. Runs with Debian's python3 + numpy + h5py only:

    python3 scripts/gen_tokenizer_fixtures.py [--tiktoken PATH] [--out DIR]

tiktoken stores each token as raw bytes (base64) with its rank; srkit's bytebpe pieces are
written in GPT-2's printable form, where every byte becomes one character: the printable bytes
33-126, 161-172 and 174-255 stand for themselves and the remaining 68 bytes, in increasing
order, for U+0100 + i. The C side inverts that map when decoding.
"""
import argparse
import base64
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402  (the shared writer of srkit HDF5 files)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpt2_byte_to_unicode():
    """GPT-2's byte -> character map, built from its definition (see the module docstring)."""
    printable = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def to_gpt2_form(raw):
    table = gpt2_byte_to_unicode()
    return "".join(table[b] for b in raw)


def read_tiktoken(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            tok, rank = line.split()
            ranks[int(rank)] = base64.b64decode(tok)
    return ranks


def write(path, tok):
    with h5py.File(path, "w") as f:
        srkit_h5.write_tokenizer(f, tok)


def replace_dataset(path, name, data):
    with h5py.File(path, "a") as f:
        del f[name]
        f.create_dataset(name, data=data, track_times=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiktoken", default=os.path.join(
        REPO, "..", "shared", "data", "whisper-assets", "gpt2.tiktoken"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    out = lambda name: os.path.join(args.out, name)  # noqa: E731

    # "pieces": plain UTF-8, concatenated as is.
    write(out("tokenizer_pieces.h5"), {
        "type": "pieces",
        "pieces": ["<blank>", "hel", "lo", " wor", "ld", "\u00e9", "<eos>"],
        "special": [1, 0, 0, 0, 0, 0, 1],
    })

    # "sentencepiece": word marks, byte fallback (upper and lower case hex), controls.
    sp = ["<unk>", "<s>", "</s>", "\u2581hello", "\u2581world", "s", "<0x41>", "<0xC3>",
          "<0xA9>", "\u2581", "ab\u2581c", "<0x0a>", "<0xZZ>"]
    write(out("tokenizer_sentencepiece.h5"), {
        "type": "sentencepiece",
        "pieces": sp,
        "special": [1, 1, 1] + [0] * (len(sp) - 3),
        "scores": [0.0, 0.0, 0.0] + [-float(i) for i in range(3, len(sp))],
    })

    # "tekken": raw bytes, including a character split over two pieces and a lone 0xFF.
    write(out("tokenizer_tekken.h5"), {
        "type": "tekken",
        "pieces": [b"<unk>", b"<s>", b"Hi", b" there", b"\xe2\x82", b"\xac", b"\xff"],
        "special": [1, 1, 0, 0, 0, 0, 0],
    })

    # "bytebpe", hand-made: pieces already in GPT-2 form. U+0120 is the space (byte 32),
    # U+010A the newline (10), U+0143 byte 0xAD (the last of the 68 remapped bytes); "Ã" and
    # "©" are the two bytes of "é" (C3 A9).
    write(out("tokenizer_bytebpe.h5"), {
        "type": "bytebpe",
        "pieces": ["<|endoftext|>", "Hello", "\u0120world", "\u010a", "\u00c3", "\u00a9",
                   "\u0143", "!"],
        "special": [1, 0, 0, 0, 0, 0, 0, 0],
    })

    # "bytebpe" from gpt2.tiktoken: ranks 0-299, then multi-byte ranks (some are the leading
    # bytes of a character whose last byte is another token), then <|endoftext|>.
    ranks = read_tiktoken(args.tiktoken)
    raw = [ranks[r] for r in range(300)]
    for want in [b"\xe2\x80", b" \xe2\x80", b" \xe2\x80\x94", b"\xc3\xa9", b" \xc3\xa9",
                 b"\xe6\x97"]:
        raw.append(next(v for v in ranks.values() if v == want))
    pieces = [to_gpt2_form(r) for r in raw] + ["<|endoftext|>"]
    write(out("tokenizer_gpt2.h5"), {
        "type": "bytebpe",
        "pieces": pieces,
        "special": [0] * (len(pieces) - 1) + [1],
    })

    # Malformed files: each starts as a valid one and breaks one thing.
    base = {"type": "pieces", "pieces": ["a", "bc", "def"], "special": [0, 0, 0]}
    write(out("tokenizer_bad_past.h5"), base)
    replace_dataset(out("tokenizer_bad_past.h5"), "tokenizer/pieces_offsets",
                    np.array([0, 1, 3, 9], dtype=np.int64))
    write(out("tokenizer_bad_order.h5"), base)
    replace_dataset(out("tokenizer_bad_order.h5"), "tokenizer/pieces_offsets",
                    np.array([0, 3, 1, 6], dtype=np.int64))
    write(out("tokenizer_bad_type.h5"), base)  # the writer refuses unknown types itself
    with h5py.File(out("tokenizer_bad_type.h5"), "a") as f:
        f["tokenizer"].attrs["type"] = "wordpiece"
    write(out("tokenizer_bad_missing.h5"), base)
    with h5py.File(out("tokenizer_bad_missing.h5"), "a") as f:
        del f["tokenizer/pieces_offsets"]
    write(out("tokenizer_bad_special.h5"), base)
    replace_dataset(out("tokenizer_bad_special.h5"), "tokenizer/special",
                    np.array([0, 1], dtype=np.uint8))
    # A non-special bytebpe piece that no byte sequence spells (U+65E5 is outside GPT-2's map).
    write(out("tokenizer_bad_bytebpe.h5"), {
        "type": "bytebpe", "pieces": ["ok", "\u65e5"], "special": [0, 0]})
    # No /tokenizer group at all.
    with h5py.File(out("tokenizer_bad_nogroup.h5"), "w") as f:
        f.create_group("frontend")
    write_utf8_cases(out("utf8_replace.txt"))


def write_utf8_cases(path):
    """tests/fixtures/utf8_replace.txt: byte strings and CPython's bytes.decode("utf-8",
    "replace") of them, re-encoded (what tiktoken's decode prints for Whisper's byte tokens):
    one "IN OUT" line of hex each; '-' for an empty OUT. Unicode's own example (table 3-8),
    every byte alone, every possible first byte before the edges of the second byte's ranges
    (cut there, and followed by 80 BF 41), and 1000 random strings over those edge bytes."""
    import random
    rng = random.Random(2026)
    cases = [bytes.fromhex("61F18080E180C2628063 80BF64".replace(" ", ""))]
    cases += [bytes([b]) for b in range(256)]
    edges = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
             0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
    for lead in range(0xC0, 0x100):
        for second in edges:
            for tail in (b"", b"\x80\xbf\x41"):
                cases.append(bytes([lead, second]) + tail)
    for _ in range(1000):
        cases.append(bytes(rng.choice(edges) for _ in range(rng.randint(1, 10))))
    with open(path, "w") as f:
        for c in cases:
            out = c.decode("utf-8", "replace").encode("utf-8")
            f.write("%s %s\n" % (c.hex(), out.hex() or "-"))


if __name__ == "__main__":
    main()
