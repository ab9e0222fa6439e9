#!/usr/bin/env python3
"""gen_test_fixtures.py — write the small HDF5 fixtures of the core tests into tests/fixtures/.

Run from anywhere with Debian's python3 (numpy + h5py):  python3 scripts/gen_test_fixtures.py
(or `make fixtures`). Deterministic: a fixed seed and timestamp-free files, so rerunning gives
byte-identical output.

test_linear*.h5 hold the weights of the built-in "test_linear" backend (models/testlinear):
per 80 ms chunk, 8 log segment energies f (ln(1e-6 + mean x^2), about -13.8 for silence and
-13 .. -3 for speech) go through logits = W f + b. W is random normal (seed 1234) with each
row's mean removed, so that a token's score depends on the energy contour inside the chunk
rather than on loudness, and blank's row shifted by -0.2, so that blank's score rises as the
chunk gets quieter; b is random normal * 0.5 with blank's bias at -12. On LibriSpeech speech
this gives blank on silence and about half the speech frames, and every other token winning
on 5-30 % of frames (measured on 103-1240-0000 and 1089-134686-0000).

bad_*.h5 are each one defect away from test_linear.h5 (see BAD below).
"""

import json
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import srkit_h5  # noqa: E402

OUT = os.path.join(HERE, "..", "tests", "fixtures")

CONFIG = {"sample_rate": 16000, "chunk_ms": 80, "n_bands": 8, "vocab": 6, "blank": 0}
TOKENIZER = {"type": "pieces", "pieces": ["<blank>", "a", "b", "c", "d", " "],
             "special": [1, 0, 0, 0, 0, 0]}
META = {"source": "srkit test fixture", "license": "MIT"}
WRITTEN = []


def test_linear_tensors():
    rng = np.random.default_rng(1234)
    w = rng.standard_normal((6, 8))
    w -= w.mean(axis=1, keepdims=True)
    w[0] -= 0.2
    b = rng.standard_normal(6) * 0.5
    b[0] = -12.0
    return {"proj.weight": w.astype(np.float32), "proj.bias": b.astype(np.float32)}


def write(name, tensors, arch="test_linear", config=CONFIG, **kw):
    args = dict(tokenizer=TOKENIZER, **META)
    args.update(kw)
    path = os.path.join(OUT, name)
    WRITTEN.append(name)
    srkit_h5.write_model(path, arch, config, tensors, **args)
    return path


def main():
    os.makedirs(OUT, exist_ok=True)
    t = test_linear_tensors()
    write("test_linear.h5", t)
    write("test_linear_f16.h5", t, dtype="f16")
    write("test_linear_bf16.h5", t, dtype="bf16")
    write("test_linear_int8.h5", t, dtype="int8")
    # a frontend group, for sr_model_inspect
    write("test_linear_frontend.h5", t, frontend={
        "window": np.hanning(16).astype(np.float32),
        "mel_filters": np.linspace(0, 1, 10, dtype=np.float32).reshape(2, 5)})

    # written as other writers and srkit before the digest wrote files: no user block (loads
    # with a warning)
    write("test_linear_nodigest.h5", t, digest=False)

    # one defect each
    write("bad_format.h5", t, raw_attrs={"format": "not-srkit"})
    write("bad_no_version.h5", t, raw_attrs={"format_version": None})
    write("bad_version.h5", t, raw_attrs={"format_version": np.int64(2)})
    write("bad_no_arch.h5", t, raw_attrs={"arch": None})
    write("bad_unknown_arch.h5", t, arch="no_such_arch")
    # a fixed-length arch string with a NUL inside its text: C would read "test_linear"
    write("bad_arch_nul.h5", t, raw_attrs={"arch": np.bytes_(b"test_linear\x00junk")})
    write("bad_config_json.h5", t, raw_attrs={"config": "{sample_rate: 16000"})
    write("bad_config_array.h5", t, raw_attrs={"config": "[16000, 80]"})
    # a key twice: JSON readers disagree on which wins
    dup = json.dumps(CONFIG)[:-1] + ', "n_bands": 4}'
    write("bad_config_dup.h5", t, raw_attrs={"config": dup})
    shape = dict(t, **{"proj.weight": t["proj.weight"][:, :7].copy()})
    write("bad_shape.h5", shape)
    nan = dict(t, **{"proj.weight": t["proj.weight"].copy()})
    nan["proj.weight"][2, 3] = np.nan  # flat index 19
    write("bad_nan.h5", nan)
    inf = dict(t, **{"proj.weight": t["proj.weight"].copy()})
    inf["proj.weight"][5, 1] = -np.inf  # flat index 41
    write("bad_inf.h5", inf)
    write("bad_missing_tensor.h5", {"proj.weight": t["proj.weight"]})
    # a tensor the backend never asks for (sr_model_load rejects unused tensors)
    write("bad_extra_tensor.h5", dict(t, **{"extra.weight": np.ones((2, 2), np.float32)}))
    # a config value test_linear rejects: 7 bands do not divide the 1280-sample chunk
    write("bad_config_value.h5", t, config=dict(CONFIG, n_bands=7))
    # a key test_linear does not know (a typo): refused rather than ignored
    write("bad_config_unknown.h5", t, config=dict(CONFIG, chunk_msec=40))
    path = write("bad_int8_no_scale.h5", t, dtype="int8")
    with h5py.File(path, "r+") as f:
        del f["weights/proj/weight_scale"]
    srkit_h5.seal(path)  # the defects below are inside sealed files: the digest matches, the
    # loader's own checks must catch them

    # the /tokenizer group's object header made unreadable (its first 4 bytes overwritten):
    # the root still lists the group, but nothing inside it can be looked up (a read error
    # must not pass for "no tokenizer")
    path = write("bad_tokenizer_header.h5", t)
    with h5py.File(path, "r") as f:
        addr = h5py.h5o.get_info(f["tokenizer"].id).addr + f.userblock_size  # relative address
    with open(path, "r+b") as fh:
        fh.seek(addr)
        fh.write(b"XXXX")
    srkit_h5.seal(path)

    # proj.weight's storage never allocated (what a corrupt chunk index looks like to libhdf5,
    # which then reads the fill value, zeros, without an error)
    path = write("bad_unallocated.h5", t)
    with h5py.File(path, "r+") as f:
        old = f["weights/proj/weight"]
        shape, dtype, attrs = old.shape, old.dtype, dict(old.attrs)
        del f["weights/proj/weight"]
        d = f["weights/proj"].create_dataset("weight", shape=shape, dtype=dtype, chunks=shape,
                                             fletcher32=True, track_times=False)
        for k, v in attrs.items():
            d.attrs[k] = v
    srkit_h5.seal(path)

    # a plain HDF5 file (no srkit root), for sr_h5_open_plain / sr_h5_dataset
    WRITTEN.append("plain.h5")
    with h5py.File(os.path.join(OUT, "plain.h5"), "w") as f:
        f.attrs["note"] = "plain h5py file"
        f.create_dataset("f64", data=np.array([[0.5, -1.25, 3.0], [1e-3, 2.0, -7.5]]),
                         track_times=False)
        f.create_dataset("ids", data=np.array([3, -1, 70000, 2**40], dtype=np.int64),
                         track_times=False)
        f.create_dataset("small_ids", data=np.array([1, 2, 3], dtype=np.int32),
                         track_times=False)
        f.create_dataset("bytes", data=np.frombuffer(b"hi\xff", dtype=np.uint8),
                         track_times=False)
        f.create_dataset("half", data=np.array([1.0, 0.1, -65504.0], dtype=np.float16),
                         track_times=False)
        f.create_dataset("bad_half", data=np.array([1.0, np.inf], dtype=np.float16),
                         track_times=False)
        f.create_dataset("text", data="a string", track_times=False)
        f.create_dataset("weights/big", data=np.array([1.0, 1e5], dtype=np.float32),
                         track_times=False)
        d = f.create_dataset("group/nested", data=np.arange(6, dtype=np.float32).reshape(3, 2),
                             track_times=False)
        d.attrs["unit"] = "count"

    for name in WRITTEN:
        print("%-28s %6d bytes" % (name, os.path.getsize(os.path.join(OUT, name))))


if __name__ == "__main__":
    main()
