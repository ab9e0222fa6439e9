#!/usr/bin/env python3
"""recast_model.py — an srkit model file with its weight matrices stored in another element type.

    python3 scripts/recast_model.py IN.h5 OUT.h5 --dtype int8|f16|bf16|f32
    python3 scripts/recast_model.py IN.h5 OUT.h5 --dtype f16 --keep-f32 TEXT [--keep-f32 ...]
        (f16, but matrices whose name contains a TEXT stay f32: a file of mixed element types)

Every weight is read as float32 (scripts/srkit_h5.py read_model: bf16 / f16 widened, int8
dequantized) and written back with write_model's rules for --dtype (int8: symmetric per-output-
row quantization of the tensors of two or more dimensions, 1-D biases and norms kept f32); the
config, the front-end arrays, the tokenizer group and the provenance attributes are copied
unchanged, and the file is sealed again. The use here: the real tiny.en models in int8 are
small enough (with xz) to travel to a lent GPU machine, whose transfers are limited to 64 MiB,
so WhisperRT's GPU figures can be taken on real weights. int8 changes the weights: what such a
file transcribes is close to, not the same as, the original's (say which file a figure used).
"""

import argparse
import os
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402

STANDARD = ("arch", "config", "format", "format_version", "source", "license")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--dtype", required=True, choices=("int8", "f16", "bf16", "f32"))
    ap.add_argument("--keep-f32", metavar="TEXT", action="append", default=[],
                    help="with --dtype f16: matrices whose name contains TEXT stay f32 (a file of "
                         "mixed element types, as tests/fixtures/whisper/rand_mixed.h5)")
    a = ap.parse_args()
    if a.keep_f32 and a.dtype != "f16":
        sys.exit("recast_model: --keep-f32 goes with --dtype f16")
    if os.path.abspath(a.src) == os.path.abspath(a.dst):
        sys.exit("recast_model: the output must be another file")
    attrs, config, tensors = srkit_h5.read_model(a.src)
    with h5py.File(a.src, "r") as f:
        frontend = {k: f["frontend"][k][()] for k in f["frontend"]} if "frontend" in f else None
        extra = {k: attrs[k] for k in attrs if k not in STANDARD}
    dtype = a.dtype
    if a.keep_f32:  # each array's own type: f16 matrices but the kept ones, f32 vectors
        import numpy as np
        tensors = {n: (v.astype(np.float32) if v.ndim < 2 or any(t in n for t in a.keep_f32)
                       else v.astype(np.float16)) for n, v in tensors.items()}
        dtype = None
    srkit_h5.write_model(a.dst, attrs["arch"], config, tensors, dtype=dtype, frontend=frontend,
                         source=attrs.get("source", ""), license=attrs.get("license", ""),
                         raw_attrs=extra)
    with h5py.File(a.src, "r") as f, h5py.File(a.dst, "a") as g:
        if "tokenizer" in f:
            f.copy(f["tokenizer"], g, "tokenizer")
    if not srkit_h5.seal(a.dst):
        sys.exit("recast_model: sealing %s failed" % a.dst)
    print("%s: %s, %d tensors, %d bytes" % (a.dst, a.dtype, len(tensors), os.path.getsize(a.dst)))


if __name__ == "__main__":
    main()
