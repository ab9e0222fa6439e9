"""srkit_h5 — write and read srkit HDF5 model files (the format of docs/model-format.md).

Needs numpy, h5py and xxhash (Debian's python3-numpy / python3-h5py / python3-xxhash), so
converters and test fixture generators run with /usr/bin/python3. Import it from a script next to it:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import srkit_h5
    srkit_h5.write_model("m.h5", "whisper", config, state_dict_as_numpy, dtype="f16",
                         tokenizer={"type": "bytebpe", "pieces": [...]}, source="...", license="MIT")

Files are written deterministically: no timestamps in object headers, no compression, fixed
creation order, so the same input gives byte-identical files. By default every non-empty
dataset is one chunk with HDF5's Fletcher-32 checksum filter, so damaged bytes are detected
when read (checksum=False writes plain contiguous datasets, which load faster).

Digest: every file gets HDF5's 512-byte user block (which libhdf5 skips) holding, as NUL-padded
ASCII, "srkit-digest 1", "algorithm xxh3-128", "length <file size>" and "digest <XXH3-128 of
bytes 512..end, hex>" (one line each). srkit checks it before libhdf5 parses the file, so a
damaged file is refused as corrupt instead of crashing libhdf5. Needs the xxhash module
(Debian's python3-xxhash); without it the block stays zeroed and srkit warns "no digest".
`python3 srkit_h5.py seal FILE...` adds or renews the digest of existing files (e.g. after
editing one with h5py, or files of an older srkit).

Storage rules:
  f32 / f16            stored as IEEE float32 / float16
  bf16                 uint16 bit patterns (upper half of the float32, rounded to nearest even)
                       with the dataset attribute dtype="bf16"
  int8                 symmetric per-output-row quantization: scale[r] = max|w[r]| / 127
                       (1 for an all-zero row), q = rint(w / scale) clipped to [-127, 127],
                       scale stored as the float32 sibling dataset "<name>_scale" [shape[0]]
"""

import contextlib
import json
import os
import sys

import h5py
import numpy as np

try:
    import xxhash
except ImportError:  # files are then written unsealed (zeroed user block); see seal()
    xxhash = None

FORMAT = "srkit-model"
FORMAT_VERSION = 1
USERBLOCK = 512
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
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
        set_attr(d, k, v)
    return d


def set_attr(obj, name, value):
    """Attribute name = value; a str is stored as a fixed-length UTF-8 string (NUL-padded, at
    least one byte) rather than h5py's default variable-length one, so that reading it never
    goes through HDF5's global heap, the part of libhdf5 that damaged files crashed."""
    if isinstance(value, str):
        b = value.encode("utf-8")
        obj.attrs.create(name, np.array(b, dtype=h5py.string_dtype("utf-8", max(1, len(b)))))
    else:
        obj.attrs[name] = value


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
    set_attr(g, "type", ttype)
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


# ---- digest -------------------------------------------------------------------------------

def digest_header(length, digest_hex):
    """The user block's text (core/digest.c checks exactly this), NUL-padded to 512 bytes."""
    text = ("srkit-digest 1\nalgorithm xxh3-128\nlength %d\ndigest %s\n"
            % (length, digest_hex)).encode("ascii")
    return text + b"\0" * (USERBLOCK - len(text))


def seal(path):
    """Write the digest of an srkit file into its user block. A file without a user block (HDF5
    signature at byte 0: another writer, or srkit before the digest) first gets one in front:
    HDF5 finds its superblock at 512 and its addresses are relative to it, so nothing else
    changes. Returns False (file left unsealed, message on stderr) without the xxhash module."""
    with open(path, "rb") as fh:
        head = fh.read(USERBLOCK + len(HDF5_SIGNATURE))
    if head.startswith(HDF5_SIGNATURE):
        # superblock version 0 or 1 (h5py's default): 8-byte base and end-of-file addresses at
        # 24 and 40 (28 and 44 for version 1), both moved by the block as libhdf5 itself writes
        # them for a file created with a user block; later versions carry a checksum
        sb = head[8]
        if sb not in (0, 1) or head[13] != 8:
            raise ValueError("%s: superblock version %d with %d-byte offsets: rewrite the file "
                             "with srkit_h5 instead of sealing it" % (path, sb, head[13]))
        at = 24 if sb == 0 else 28
        sup = bytearray(head[:at + 24])
        for off in (at, at + 16):
            v = int.from_bytes(sup[off:off + 8], "little")
            sup[off:off + 8] = (v + USERBLOCK).to_bytes(8, "little")
        tmp = "%s.seal%d" % (path, os.getpid())
        try:
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                dst.write(b"\0" * USERBLOCK)
                dst.write(bytes(sup))
                src.seek(len(sup))
                while True:
                    b = src.read(1 << 24)
                    if not b:
                        break
                    dst.write(b)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    elif head[USERBLOCK:] != HDF5_SIGNATURE:
        raise ValueError("%s: not an HDF5 file with a %d-byte user block" % (path, USERBLOCK))
    if xxhash is None:
        print("srkit_h5: %s written without a digest: the xxhash module is missing (apt-get "
              "install python3-xxhash, or pip install xxhash; then `python3 %s seal FILE`)"
              % (path, os.path.abspath(__file__)), file=sys.stderr)
        return False
    h = xxhash.xxh3_128()
    with open(path, "r+b") as fh:
        fh.seek(USERBLOCK)
        while True:
            b = fh.read(1 << 24)
            if not b:
                break
            h.update(b)
        length = fh.seek(0, os.SEEK_END)
        fh.seek(0)
        fh.write(digest_header(length, h.hexdigest()))
    return True


@contextlib.contextmanager
def creating(path, arch, config, source="", license="", digest=True):
    """An h5py.File for a new srkit model: user block reserved, root attributes written; the
    caller adds /weights, /tokenizer, /frontend. Written under a temporary name, sealed and
    renamed when the block ends, so a failure never leaves a partial model. Every writer of
    model files (write_model, make_synthetic.py, convert_voxtral.py) goes through here.
    digest=False writes no user block, as other writers and srkit before the digest did (for
    tests of that case)."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        with h5py.File(tmp, "w", userblock_size=USERBLOCK if digest else 0) as f:
            set_attr(f, "format", FORMAT)
            set_attr(f, "format_version", np.int64(FORMAT_VERSION))
            set_attr(f, "arch", arch)
            set_attr(f, "config", config if isinstance(config, str) else
                     json.dumps(config, separators=(",", ":")))
            set_attr(f, "source", source)
            set_attr(f, "license", license)
            yield f
        if digest:
            seal(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_model(path, arch, config, tensors, *, dtype=None, tokenizer=None, frontend=None,
                source="", license="", raw_attrs=None, checksum=True, digest=True):
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
    digest     reserve the user block and write the whole-file digest (module docstring);
               False only to make files like other writers' (tests)
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
    with creating(path, arch, config, source, license, digest) as f:
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
                set_attr(f, k, v)


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


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "seal":
        print("usage: python3 srkit_h5.py seal FILE...   add or renew the digest of srkit model "
              "files", file=sys.stderr)
        sys.exit(2)
    ok = True
    for p in sys.argv[2:]:
        try:
            ok = seal(p) and ok
        except (OSError, ValueError) as e:
            print("srkit_h5: %s" % e, file=sys.stderr)
            ok = False
    sys.exit(0 if ok else 1)
