"""srkit_h5 — write and read srkit HDF5 model files (the format of docs/model-format.md).

Needs only numpy and h5py (Debian's python3-numpy / python3-h5py), so converters and test
fixture generators run with /usr/bin/python3. Import it from a script next to it:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import srkit_h5
    srkit_h5.write_model("m.h5", "whisper", config, state_dict_as_numpy, dtype="f16",
                         tokenizer={"type": "bytebpe", "pieces": [...]}, source="...", license="MIT")

Files are written deterministically: no timestamps in object headers, no compression, fixed
creation order, so the same input gives byte-identical files. By default every non-empty
dataset is one chunk with HDF5's Fletcher-32 checksum filter, so damaged bytes are detected
when read (checksum=False writes plain contiguous datasets, which load faster).

Storage rules:
  f32 / f16            stored as IEEE float32 / float16
  bf16                 uint16 bit patterns (upper half of the float32, rounded to nearest even)
                       with the dataset attribute dtype="bf16"
  int8                 symmetric per-output-row quantization: scale[r] = max|w[r]| / 127
                       (1 for an all-zero row), q = rint(w / scale) clipped to [-127, 127],
                       scale stored as the float32 sibling dataset "<name>_scale" [shape[0]]
"""

import json
import os

import h5py
import numpy as np

FORMAT = "srkit-model"
FORMAT_VERSION = 1
DTYPES = (None, "f32", "f16", "bf16", "int8")
TOKENIZER_TYPES = ("pieces", "sentencepiece", "bytebpe", "tekken")


# ---- element conversions ------------------------------------------------------------------

def f32_to_bf16_bits(a):
    """float32 array -> uint16 bfloat16 bit patterns, round to nearest even (NaN stays NaN)."""
    u = np.array(a, dtype=np.float32, order="C").view(np.uint32).astype(np.uint64)
    c = np.uint64  # typed constants: numpy will not mix uint64 with Python ints on 0-d arrays
    nan = (u & c(0x7FFFFFFF)) > c(0x7F800000)
    rounded = (u + c(0x7FFF) + ((u >> c(16)) & c(1))) >> c(16)
    quiet = (u >> c(16)) | c(0x40)
    return np.asarray(np.where(nan, quiet, rounded)).astype(np.uint16)


def bf16_bits_to_f32(b):
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def quantize_int8_rows(w):
    """Symmetric per-output-row int8 quantization of w [rows, ...] -> (q int8, scale f32 [rows]).

    Done in float32 arithmetic, like the C loader's sr_i8_quant_rows, so both agree bit for bit.
    """
    w = np.asarray(w, dtype=np.float32)
    if w.ndim < 1:
        raise ValueError("int8 quantization needs at least one dimension")
    rows = w.reshape(w.shape[0], -1)
    amax = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(w.shape[0], np.float32)
    scale = np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
    return q.reshape(w.shape), scale


# ---- writing ------------------------------------------------------------------------------

def _group(parent, name):
    """Child group created without timestamps (determinism), or the existing one."""
    if name in parent:
        return parent[name]
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    gid = h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl)
    return h5py.Group(gid)


def _dataset(parent, name, data, attrs=None, checksum=True):
    """Uncompressed dataset without timestamps at parent/<name> (slashes make groups);
    checksummed unless checksum is False."""
    parts = name.split("/")
    for p in parts[:-1]:
        parent = _group(parent, p)
    if parts[-1] in parent:
        raise ValueError("dataset %s/%s written twice" % (parent.name, name))
    data = np.asarray(data)
    if checksum and data.ndim >= 1 and data.size > 0:
        # one chunk holding the whole tensor, with HDF5's Fletcher-32 checksum: a reader gets an
        # error instead of silently wrong weights when the file's bytes are damaged
        d = parent.create_dataset(parts[-1], data=data, chunks=data.shape, fletcher32=True,
                                  track_times=False)
    else:
        d = parent.create_dataset(parts[-1], data=data, track_times=False)
    for k, v in (attrs or {}).items():
        d.attrs[k] = v
    return d


def _check_name(name):
    if not name or name.startswith(".") or name.endswith(".") or ".." in name or "/" in name:
        raise ValueError("tensor name %r is not a dotted state-dict key" % (name,))


def _stored(name, arr, dtype):
    """[(dataset name below /weights, array, attrs)] for one tensor under the dtype rule."""
    a = np.asarray(arr)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    if a.dtype not in (np.float32, np.float16):
        raise ValueError("tensor %s: dtype %s; srkit tensors are floating point" % (name, a.dtype))
    path = name.replace(".", "/")
    # np.array(..., order="C") rather than np.ascontiguousarray, which turns scalars into [1]
    if dtype is None:
        return [(path, np.array(a, order="C"), None)]
    if dtype == "f32" or (dtype in ("f16", "int8") and a.ndim < 2):
        return [(path, np.array(a, dtype=np.float32, order="C"), None)]
    if dtype == "f16":
        with np.errstate(over="ignore"):
            h = a.astype(np.float16)
        bad = ~np.isfinite(h) & np.isfinite(a)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError("tensor %s: value %g at flat index %d overflows f16"
                             % (name, a.reshape(-1)[i], i))
        return [(path, np.array(h, order="C"), None)]
    if dtype == "bf16":
        return [(path, f32_to_bf16_bits(a), {"dtype": "bf16"})]
    if dtype == "int8":
        q, scale = quantize_int8_rows(a)
        return [(path, q, None), (path + "_scale", scale, None)]
    raise ValueError("dtype %r: expected one of %s" % (dtype, DTYPES))


def write_tokenizer(h5file, tok, checksum=True):
    """Write /tokenizer from tok = {"type", "pieces" (str or bytes each), optional "special"
    (0/1 each), optional "scores" (float each)}."""
    ttype = tok.get("type")
    if ttype not in TOKENIZER_TYPES:
        raise ValueError("tokenizer type %r: expected one of %s" % (ttype, TOKENIZER_TYPES))
    pieces = [p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in tok["pieces"]]
    n = len(pieces)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in pieces], dtype=np.int64)
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    g = _group(h5file, "tokenizer")
    g.attrs["type"] = ttype
    _dataset(g, "pieces_data", data, checksum=checksum)
    _dataset(g, "pieces_offsets", offsets, checksum=checksum)
    if tok.get("special") is not None:
        special = np.asarray(tok["special"], dtype=np.uint8)
        if special.shape != (n,) or (special > 1).any():
            raise ValueError("tokenizer special: expected %d values of 0 or 1" % n)
        _dataset(g, "special", special, checksum=checksum)
    if tok.get("scores") is not None:
        scores = np.asarray(tok["scores"], dtype=np.float32)
        if scores.shape != (n,):
            raise ValueError("tokenizer scores: expected %d values" % n)
        _dataset(g, "scores", scores, checksum=checksum)


def write_model(path, arch, config, tensors, *, dtype=None, tokenizer=None, frontend=None,
                source="", license="", raw_attrs=None, checksum=True):
    """Write an srkit model file.

    path       output file (overwritten)
    arch       backend name ("whisper", "fastconformer_rnnt", "voxtral_realtime", ...)
    config     dict of every hyper-parameter the backend needs (stored as compact JSON text)
    tensors    {dotted state-dict key: numpy array}, written in sorted key order
    dtype      None keeps each array's dtype (float32/float16; float64 becomes float32);
               "f32" | "f16" | "bf16" | "int8" converts floating tensors; f16 and int8 apply to
               tensors of ndim >= 2 (1-D biases and norms stay f32), f32 and bf16 to all
    tokenizer  dict for write_tokenizer, or None
    frontend   {name: array} stored as float32 under /frontend, or None
    source, license   provenance root attributes
    raw_attrs  {root attribute: value} written last, overriding the standard ones; None as a
               value deletes the attribute (tests use it to build malformed files)
    checksum   store each dataset as one chunk with HDF5's Fletcher-32 checksum, so damaged
               bytes fail the load instead of giving wrong weights. Verifying runs at about
               0.75 GB/s (a 128 MB model loads in 0.20 s instead of 0.04 s); converters of
               multi-GB models may prefer False
    """
    if dtype not in DTYPES:
        raise ValueError("dtype %r: expected one of %s" % (dtype, DTYPES))
    # convert and check everything before touching the file system
    stored = []
    for name in sorted(tensors):
        _check_name(name)
        stored.extend(_stored(name, tensors[name], dtype))
    config_text = json.dumps(config, separators=(",", ":"))
    # written under a temporary name and renamed, so a failure never leaves a partial model
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        _write(tmp, arch, config_text, stored, tokenizer, frontend, source, license, raw_attrs,
               checksum)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _write(path, arch, config_text, stored, tokenizer, frontend, source, license, raw_attrs,
           checksum):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = np.int64(FORMAT_VERSION)
        f.attrs["arch"] = arch
        f.attrs["config"] = config_text
        f.attrs["source"] = source
        f.attrs["license"] = license
        w = _group(f, "weights")
        for dname, data, attrs in stored:
            _dataset(w, dname, data, attrs, checksum)
        if tokenizer is not None:
            write_tokenizer(f, tokenizer, checksum)
        if frontend:
            g = _group(f, "frontend")
            for name in sorted(frontend):
                _dataset(g, name, np.array(frontend[name], dtype=np.float32, order="C"),
                         checksum=checksum)
        for k, v in (raw_attrs or {}).items():
            if v is None:
                if k in f.attrs:
                    del f.attrs[k]
            else:
                f.attrs[k] = v


# ---- reading ------------------------------------------------------------------------------

def read_model(path):
    """(root attrs dict, config dict, {dotted name: float32 array}) of an srkit file; bf16 and
    f16 are widened, int8 is dequantized with its scale (scale datasets are not listed)."""
    with h5py.File(path, "r") as f:
        attrs = {}
        for k, v in f.attrs.items():
            attrs[k] = v.decode("utf-8") if isinstance(v, bytes) else v
        config = json.loads(attrs["config"])
        datasets = {}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                datasets[name] = obj

        f["weights"].visititems(visit)
        tensors = {}
        for name, d in datasets.items():
            if name.endswith("_scale") and name[:-6] in datasets:
                continue
            a = d[()]
            dt = d.attrs.get("dtype")
            if isinstance(dt, bytes):
                dt = dt.decode()
            if dt == "bf16":
                a = bf16_bits_to_f32(a)
            elif a.dtype == np.int8:
                scale = datasets[name + "_scale"][()].astype(np.float32)
                a = a.astype(np.float32) * scale.reshape((-1,) + (1,) * (a.ndim - 1))
            tensors[name.replace("/", ".")] = np.asarray(a, dtype=np.float32)
        return attrs, config, tensors
