#!/usr/bin/env python3
"""convert_whisper.py — convert a Whisper checkpoint into an srkit model file (arch "whisper").

Reads the three formats users have:
  * CTranslate2 (faster-whisper): a directory with model.bin, config.json and vocabulary.json or
    vocabulary.txt (or model.bin itself, the rest found next to it). model.bin is parsed here
    (no ctranslate2 package needed): uint32 binary version, spec name and revision, then each
    variable as name / rank / dims / type id / byte count / raw little-endian data, then the
    aliases (name -> other variable). Self-attention Q/K/V are stored fused as one [3d, d]
    linear and cross-attention K/V as one [2d, d] linear; they are split row-wise. int8/int16
    quantized weights are dequantized with their "<name>_scale" (CTranslate2 multiplies by the
    scale when quantizing, so w = q / scale).
  * OpenAI .pt checkpoints (openai-whisper's download, or WhisperRT fine-tunes with LoRA layers):
    read with torch.load, dims from ckpt["dims"].
  * Hugging Face transformers directories (model.safetensors + config.json + vocab.json /
    tokenizer.json, optional generation_config.json): safetensors is parsed here (8-byte header
    length, JSON header, raw data), so neither torch nor the safetensors package is needed.
    A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) is merged with --lora.

LoRA merge: a low-rank pair A [r, in], B [out, r] (PEFT and loralib naming) adds
scale * B @ A to the base weight [out, in], scale = lora_alpha / r (lora_alpha / sqrt(r) with
rslora). WhisperRT's own layers store A [in, r], B [r, out] and add scale * (A @ B)^T, with
scale = alpha / rank = 1 unless --lora-scale says otherwise (alpha is not saved in its checkpoints).
A WhisperRT fine-tune (training cfg with gran, streaming_train not false) gets the config block
"streaming": {"causal": true, "chunk_ms": [gran * 20], "first_chunk_ms": (extra_gran_blocks + 1)
* gran * 20, "lora": {provenance}}, from which srkit picks whisperrt + stable_greedy by default;
vanilla weights get none (docs/whisper.md). LoRA merged into a Hugging Face model is recorded as
"lora_merged".

Output (docs/whisper-weights.md): tensors named and shaped exactly as openai-whisper's state
dict (attn.key has no bias: a key bias adds q . b_k, the same for every key of a query, which
softmax cancels, so dropping it is exact), the config JSON with openai's ModelDimensions names,
the special-token ids, suppress lists and front-end constants, the byte-BPE vocabulary with
every id >= eot marked special, and /frontend/mel_filters [n_mels, 201] (Slaney filterbank).

Usage:
  convert_whisper.py SRC OUT.h5 [--dtype keep|f32|f16|bf16|int8] [--lora ADAPTER_DIR]
                     [--lora-scale S] [--tiktoken FILE] [--mel-filters NPZ] [--license TEXT]
Exit status 0 on success, 1 on a bad or unsupported input (one line on stderr naming the file
and the variable or field at fault), 2 when a needed Python package is missing.
Runs with Debian's python3 + numpy + h5py for CTranslate2 and Hugging Face sources; .pt needs torch.
"""

import argparse
import base64
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import srkit_h5  # noqa: E402

CONVERTER_VERSION = "1"

# openai-whisper's language codes, in token order (the first num_languages are in the vocabulary)
LANGUAGE_CODES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th "
    "ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr "
    "pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt "
    "haw ln ha ba jw su yue").split()

# sha256 of OpenAI's published checkpoints (MIT); anything else gets the licence it states
OPENAI_SHA256 = {
    "d3dd57d32accea0b295c96e26691aa14d8822fac7d9d27d5dc00b4ca2826dd03": "tiny.en",
    "65147644a518d12f04e32d6f3b26facc3f8dd46e5390956a9424a650c0ce22b9": "tiny",
    "25a8566e1d0c1e2231d1c762132cd20e0f96a85d16145c3a00adf5d1ac670ead": "base.en",
    "ed3a0b6b1c0edf879ad9b11b1af5a0e6ab5db9205f891f668f8b0e6c6326e34e": "base",
    "f953ad0fd29cacd07d5a9eda5624af0f6bcf2258be67c92b79389873d91e0872": "small.en",
    "9ecf779972d90ba49c06d968637d720dd632c55bbf19d441fb42bf17a411e794": "small",
}

SPECIAL_RENAMES = {"<|nocaptions|>": "<|nospeech|>", "<|iw|>": "<|he|>"}

SAMPLE_RATE, N_FFT, HOP_LENGTH, CHUNK_LENGTH_S = 16000, 400, 160, 30
DIM_KEYS = ("n_mels", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
            "n_vocab", "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer")


class ConvertError(Exception):
    """A bad or unsupported input; the message names the file and the field at fault."""


class MissingPackage(Exception):
    """A Python package the chosen source needs is not installed."""


# ---- Whisper layout ----------------------------------------------------------------------------

def expected_shapes(dims):
    """{openai state-dict key: shape} of a Whisper model with these ModelDimensions."""
    d, dt = dims["n_audio_state"], dims["n_text_state"]
    s = {
        "encoder.conv1.weight": (d, dims["n_mels"], 3), "encoder.conv1.bias": (d,),
        "encoder.conv2.weight": (d, d, 3), "encoder.conv2.bias": (d,),
        "encoder.positional_embedding": (dims["n_audio_ctx"], d),
        "encoder.ln_post.weight": (d,), "encoder.ln_post.bias": (d,),
        "decoder.token_embedding.weight": (dims["n_vocab"], dt),
        "decoder.positional_embedding": (dims["n_text_ctx"], dt),
        "decoder.ln.weight": (dt,), "decoder.ln.bias": (dt,),
    }

    def block(prefix, w, cross):
        attns = ["attn", "cross_attn"] if cross else ["attn"]
        for a in attns:
            for lin in ("query", "value", "out"):
                s["%s.%s.%s.weight" % (prefix, a, lin)] = (w, w)
                s["%s.%s.%s.bias" % (prefix, a, lin)] = (w,)
            s["%s.%s.key.weight" % (prefix, a)] = (w, w)
            s["%s.%s_ln.weight" % (prefix, a)] = (w,)
            s["%s.%s_ln.bias" % (prefix, a)] = (w,)
        s[prefix + ".mlp.0.weight"] = (4 * w, w)
        s[prefix + ".mlp.0.bias"] = (4 * w,)
        s[prefix + ".mlp.2.weight"] = (w, 4 * w)
        s[prefix + ".mlp.2.bias"] = (w,)
        s[prefix + ".mlp_ln.weight"] = (w,)
        s[prefix + ".mlp_ln.bias"] = (w,)

    for i in range(dims["n_audio_layer"]):
        block("encoder.blocks.%d" % i, d, False)
    for i in range(dims["n_text_layer"]):
        block("decoder.blocks.%d" % i, dt, True)
    return s


def validate_state(state, dims, where):
    """Every tensor present with the shape dims imply, nothing else, all values finite."""
    for k in DIM_KEYS:
        v = dims.get(k)
        if not isinstance(v, int) or v <= 0:
            raise ConvertError("%s: model dimension %s is %r; expected a positive integer"
                               % (where, k, v))
    if dims["n_audio_state"] % dims["n_audio_head"] or dims["n_text_state"] % dims["n_text_head"]:
        raise ConvertError("%s: state size not divisible by the head count (%d/%d, %d/%d)"
                           % (where, dims["n_audio_state"], dims["n_audio_head"],
                              dims["n_text_state"], dims["n_text_head"]))
    want = expected_shapes(dims)
    for name, shape in sorted(want.items()):
        if name not in state:
            raise ConvertError("%s: tensor %s is missing" % (where, name))
        got = tuple(np.shape(state[name]))
        if got != shape:
            raise ConvertError("%s: tensor %s has shape %s; the model dimensions imply %s"
                               % (where, name, list(got), list(shape)))
    extra = sorted(set(state) - set(want))
    if extra:
        raise ConvertError("%s: tensor %s is not part of the Whisper layout" % (where, extra[0]))
    for name in sorted(state):
        a = np.asarray(state[name])
        bad = ~np.isfinite(a)
        if bad.any():
            raise ConvertError("%s: tensor %s has a non-finite value at flat index %d"
                               % (where, name, int(np.flatnonzero(bad)[0])))


def sinusoids(length, channels, max_timescale=10000):
    """openai-whisper's encoder positions: [sin(t * inc^i), cos(t * inc^i)], float32 as torch."""
    if channels % 2:
        raise ConvertError("sinusoidal positions need an even width, got %d" % channels)
    inc = np.float32(math.log(max_timescale) / (channels // 2 - 1))
    inv = np.exp(-inc * np.arange(channels // 2, dtype=np.float32)).astype(np.float32)
    t = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


# ---- byte-level BPE vocabulary ------------------------------------------------------------------

def byte_unicode():
    """GPT-2's byte -> printable character table (256 entries, index = byte value)."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


_B2U = byte_unicode()
_U2B = {c: b for b, c in enumerate(_B2U)}


def piece_from_bytes(b):
    return "".join(_B2U[x] for x in b)


def bytes_from_piece(p):
    """GPT-2 unicode piece -> its bytes, or None for a piece outside the map (special tokens)."""
    try:
        return bytes(_U2B[c] for c in p)
    except KeyError:
        return None


def read_tiktoken(path):
    """A tiktoken ranks file ("base64 rank" per line) -> list of token bytes, index = rank."""
    out = []
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ConvertError("%s: line %d is not 'base64 rank'" % (path, lineno))
            try:
                # not validate=True: openai's multilingual.tiktoken lists rank 50256 as "=",
                # the empty token, which only the lenient decoder (as tiktoken uses) accepts
                tok, rank = base64.b64decode(parts[0]), int(parts[1])
            except ValueError:
                raise ConvertError("%s: line %d is not 'base64 rank'" % (path, lineno))
            if rank != len(out):
                raise ConvertError("%s: line %d has rank %d, expected %d"
                                   % (path, lineno, rank, len(out)))
            out.append(tok)
    if not out:
        raise ConvertError("%s: no tokens" % path)
    return out


def whisper_special_pieces(n_vocab, n_ranks, multilingual, n_lang=None):
    """openai-whisper's special tokens after the n_ranks BPE tokens, up to n_vocab: eot, sot,
    n_lang languages (openai's count for the real vocabularies unless given), six task tokens,
    then timestamps <|0.00|>, <|0.02|>, ... filling the rest."""
    if n_lang is None:
        n_lang = n_vocab - 51765 - int(multilingual)
    n_ts = n_vocab - n_ranks - 8 - n_lang
    if n_lang < 0 or n_lang > len(LANGUAGE_CODES) or n_ts < 1:
        raise ConvertError("n_vocab %d does not fit %d BPE tokens plus Whisper's special tokens"
                           % (n_vocab, n_ranks))
    sp = ["<|endoftext|>", "<|startoftranscript|>"]
    sp += ["<|%s|>" % c for c in LANGUAGE_CODES[:n_lang]]
    sp += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
           "<|notimestamps|>"]
    sp += ["<|%.2f|>" % (i * 0.02) for i in range(n_ts)]
    return sp


def bpe_encode(data, ranks):
    """Byte-level BPE of one pre-token: merge the adjacent pair whose concatenation has the
    lowest rank until none is in the vocabulary (tiktoken's rule). ranks: {bytes: id}."""
    parts = [bytes([b]) for b in data]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    try:
        return [ranks[p] for p in parts]
    except KeyError as e:
        raise ConvertError("BPE vocabulary lacks the single byte %r" % (e.args[0],))


def non_speech_tokens(ranks):
    """openai-whisper's set of tokens for symbols that are not speech (its tokenizer's rule):
    each symbol alone or after a space when it encodes to one token, the first token of the
    musical signs whatever their length, and the tokens of " -" and " '"."""
    symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
    symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
    misc = "♩♪♫♬♭♮♯"
    out = {bpe_encode(b" -", ranks)[0], bpe_encode(b" '", ranks)[0]}
    for s in symbols + list(misc):
        for t in (s, " " + s):
            toks = bpe_encode(t.encode("utf-8"), ranks)
            if len(toks) == 1 or s in misc:
                out.add(toks[0])
    return out


def special_ids(pieces, where):
    """Ids of Whisper's special tokens found by their text in the vocabulary."""
    index = {}
    for i, p in enumerate(pieces):
        if p.startswith("<|") and p.endswith("|>"):
            index.setdefault(p, i)

    def find(*names):
        for n in names:
            if n in index:
                return index[n]
        raise ConvertError("%s: the vocabulary has no %s token" % (where, " / ".join(names)))

    t = {"eot": find("<|endoftext|>"), "sot": find("<|startoftranscript|>"),
         "translate": find("<|translate|>"), "transcribe": find("<|transcribe|>"),
         "sot_lm": find("<|startoflm|>"), "sot_prev": find("<|startofprev|>"),
         "no_speech": find("<|nospeech|>", "<|nocaptions|>"),
         "no_timestamps": find("<|notimestamps|>"), "timestamp_begin": find("<|0.00|>")}
    langs = []
    for i in range(t["sot"] + 1, t["translate"]):
        p = pieces[i]
        if not (p.startswith("<|") and p.endswith("|>")):
            raise ConvertError("%s: token %d (%r) between <|startoftranscript|> and "
                               "<|translate|> is not a language token" % (where, i, p))
        langs.append(p[2:-2])
    return t, langs


def default_suppress(pieces, tokens):
    """openai-whisper's default suppress list ("-1"): non-speech symbols + the task tokens."""
    ranks = {}
    for i in range(tokens["eot"]):
        b = bytes_from_piece(pieces[i])
        if b is not None:
            ranks.setdefault(b, i)
    s = non_speech_tokens(ranks)
    s |= {tokens[k] for k in ("translate", "transcribe", "sot", "sot_prev", "sot_lm",
                              "no_speech")}
    return sorted(s)


def tokenizer_and_config(dims, pieces, where, multilingual=None, suppress=None,
                         begin_suppress=None, extra=None):
    """(tokenizer dict for srkit_h5, config dict) from the vocabulary (GPT-2 unicode pieces)."""
    if len(pieces) != dims["n_vocab"]:
        raise ConvertError("%s: the vocabulary has %d tokens but the token embedding has %d rows"
                           % (where, len(pieces), dims["n_vocab"]))
    # Hugging Face (and so CTranslate2) vocabularies spell two special tokens differently from
    # openai-whisper; use openai's spelling so every source gives the same file
    pieces = [SPECIAL_RENAMES.get(p, p) if p.startswith("<|") else p for p in pieces]
    tokens, langs = special_ids(pieces, where)
    if multilingual is None:
        multilingual = dims["n_vocab"] >= 51865  # openai-whisper's own rule
    if multilingual:
        if not langs:
            raise ConvertError("%s: multilingual vocabulary without language tokens" % where)
        tokens["language_first"] = tokens["sot"] + 1
    if suppress is None:
        suppress = default_suppress(pieces, tokens)
    if begin_suppress is None:
        sp = pieces.index("Ġ") if "Ġ" in pieces else None
        begin_suppress = ([sp] if sp is not None else []) + [tokens["eot"]]
    for name, lst in (("suppress_tokens", suppress), ("begin_suppress_tokens", begin_suppress)):
        for v in lst:
            if not isinstance(v, int) or not 0 <= v < dims["n_vocab"]:
                raise ConvertError("%s: %s holds %r, outside the vocabulary" % (where, name, v))
    config = {k: int(dims[k]) for k in DIM_KEYS}
    config.update({"multilingual": bool(multilingual), "tokens": tokens,
                   "suppress_tokens": [int(v) for v in suppress],
                   "begin_suppress_tokens": [int(v) for v in begin_suppress],
                   "sample_rate": SAMPLE_RATE, "n_fft": N_FFT, "hop_length": HOP_LENGTH,
                   "chunk_length_s": CHUNK_LENGTH_S})
    if multilingual:
        config["lang_codes"] = langs
    if extra:
        config.update(extra)
    special = [1 if i >= tokens["eot"] else 0 for i in range(len(pieces))]
    return {"type": "bytebpe", "pieces": pieces, "special": special}, config


# ---- mel filterbank -----------------------------------------------------------------------------

def slaney_mel_filters(n_mels, sr=SAMPLE_RATE, n_fft=N_FFT):
    """Slaney-style mel filterbank [n_mels, n_fft/2+1] (librosa's default, which Whisper's
    mel_filters.npz holds): triangles between mel points equally spaced on Slaney's scale
    (linear below 1 kHz, logarithmic above), each scaled to unit area (2 / bandwidth)."""
    f_sp, min_log_hz, min_log_mel = 200.0 / 3, 1000.0, 15.0
    logstep = math.log(6.4) / 27.0

    def hz_to_mel(f):
        return f / f_sp if f < min_log_hz else min_log_mel + math.log(f / min_log_hz) / logstep

    mels = np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2)
    hz = np.where(mels < min_log_mel, f_sp * mels,
                  min_log_hz * np.exp(logstep * (mels - min_log_mel)))
    fft = np.linspace(0, sr / 2.0, 1 + n_fft // 2)
    fdiff = np.diff(hz)
    ramps = hz[:, None] - fft[None, :]
    w = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    for i in range(n_mels):
        w[i] = np.maximum(0, np.minimum(-ramps[i] / fdiff[i], ramps[i + 2] / fdiff[i + 1]))
    w *= (2.0 / (hz[2:n_mels + 2] - hz[:n_mels]))[:, None]
    return w


def shared_asset(name):
    """Path of whisper-assets/<name> in the shared data folder ($SRKIT_SHARED or
    <repo>/../shared/data), or None."""
    roots = [os.environ.get("SRKIT_SHARED"), os.path.join(HERE, "..", "..", "shared", "data")]
    for r in roots:
        if r:
            p = os.path.join(r, "whisper-assets", name)
            if os.path.isfile(p):
                return os.path.normpath(p)
    return None


def whisper_package_asset(name):
    """Path of openai-whisper's bundled asset when that package is importable, else None."""
    try:
        import whisper  # noqa: F401
    except Exception:
        return None
    p = os.path.join(os.path.dirname(os.path.abspath(whisper.__file__)), "assets", name)
    return p if os.path.isfile(p) else None


def mel_filters(n_mels, npz_path=None):
    """(filters [n_mels, 201] float32, provenance text). Whisper's mel_filters.npz from the
    given path, openai-whisper's package or the shared data folder; computed otherwise."""
    cands = [npz_path] if npz_path else [whisper_package_asset("mel_filters.npz"),
                                         shared_asset("mel_filters.npz")]
    for p in cands:
        if not p:
            continue
        try:
            with np.load(p) as z:
                key = "mel_%d" % n_mels
                if key in z:
                    f = np.asarray(z[key], dtype=np.float32)
                    if f.shape == (n_mels, N_FFT // 2 + 1):
                        return f, "mel_filters.npz[%s]" % key
                if npz_path:
                    raise ConvertError("%s: no %s [%d, %d] array" % (p, key, n_mels,
                                                                     N_FFT // 2 + 1))
        except (OSError, ValueError) as e:
            raise ConvertError("%s: cannot read it as an .npz file (%s)" % (p, e))
    return slaney_mel_filters(n_mels), "Slaney filterbank computed by convert_whisper.py"


# ---- CTranslate2 --------------------------------------------------------------------------------

# CTranslate2's DataType enum: float32, int8, int16, int32, float16, bfloat16
CT2_DTYPES = {0: ("float32", np.float32), 1: ("int8", np.int8), 2: ("int16", np.int16),
              3: ("int32", np.int32), 4: ("float16", np.float16), 5: ("bfloat16", np.uint16)}
CT2_MAX_VERSION = 6
CT2_GELU = 3  # CTranslate2's ActivationType: RELU, GELUTanh, Swish, GELU, ...


class _Reader:
    """Bounds-checked little-endian reader over the bytes of a file."""

    def __init__(self, data, path):
        self.b, self.o, self.path = data, 0, path

    def take(self, n, what):
        if n > len(self.b) - self.o:
            raise ConvertError("%s: truncated at byte %d while reading %s (needs %d bytes, %d "
                               "left)" % (self.path, self.o, what, n, len(self.b) - self.o))
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def u(self, fmt, what):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))[0]

    def string(self, what):
        n = self.u("H", what)
        raw = self.take(n, what)
        if n == 0 or raw[-1] != 0:
            raise ConvertError("%s: %s at byte %d is not a NUL-terminated string"
                               % (self.path, what, self.o - n))
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            raise ConvertError("%s: %s at byte %d is not UTF-8" % (self.path, what, self.o - n))


def read_ct2_bin(path):
    """Parse a CTranslate2 model.bin -> (header dict, {name: (type name, array)}, {alias: name})."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConvertError("%s: cannot read it (%s)" % (path, e.strerror))
    r = _Reader(data, path)
    version = r.u("I", "the binary version")
    if not 1 <= version <= CT2_MAX_VERSION:
        raise ConvertError("%s: binary version %d is not a CTranslate2 model.bin version this "
                           "converter reads (1-%d): not a CTranslate2 model, or a newer one"
                           % (path, version, CT2_MAX_VERSION))
    spec, revision = "", 1
    if version >= 2:
        spec = r.string("the spec name")
        revision = r.u("I", "the spec revision")
    if spec != "WhisperSpec":
        raise ConvertError("%s: model spec is %r; this converter reads WhisperSpec"
                           % (path, spec))
    n = r.u("I", "the variable count")
    variables = {}
    for i in range(n):
        name = r.string("the name of variable %d" % i)
        rank = r.u("B", "the rank of " + name)
        if rank > 8:
            raise ConvertError("%s: variable %s has rank %d" % (path, name, rank))
        shape = tuple(r.u("I", "the shape of " + name) for _ in range(rank))
        count = int(np.prod(shape, dtype=np.int64)) if rank else 1
        if version >= 4:
            tid = r.u("B", "the type of " + name)
            if tid not in CT2_DTYPES:
                raise ConvertError("%s: variable %s has unknown type id %d" % (path, name, tid))
            nbytes = r.u("I", "the byte count of " + name)
        else:  # older files give the item size and count; floats are float32
            size = r.u("B", "the item size of " + name)
            tid = {4: 0, 2: 2, 1: 1}.get(size)
            if tid is None:
                raise ConvertError("%s: variable %s has item size %d" % (path, name, size))
            nbytes = r.u("I", "the item count of " + name) * size
        tname, npdt = CT2_DTYPES[tid]
        if nbytes != count * np.dtype(npdt).itemsize:
            raise ConvertError("%s: variable %s: %d data bytes for shape %s of %s"
                               % (path, name, nbytes, list(shape), tname))
        raw = r.take(nbytes, "the data of " + name)
        if name in variables:
            raise ConvertError("%s: variable %s appears twice" % (path, name))
        variables[name] = (tname, np.frombuffer(raw, dtype=np.dtype(npdt).newbyteorder("<"))
                           .reshape(shape).astype(npdt))
    aliases = {}
    if version >= 3:
        na = r.u("I", "the alias count")
        for i in range(na):
            alias = r.string("alias %d" % i)
            target = r.string("the target of alias " + alias)
            if target not in variables:
                raise ConvertError("%s: alias %s points to missing variable %s"
                                   % (path, alias, target))
            aliases[alias] = target
    if r.o != len(data):
        raise ConvertError("%s: %d unexpected bytes after the last %s"
                           % (path, len(data) - r.o, "alias" if version >= 3 else "variable"))
    return {"version": version, "spec": spec, "revision": revision}, variables, aliases


def ct2_float_vars(path, variables):
    """Dequantize and widen: {name: float32/float16 array} and the dominant source type."""
    out, kinds = {}, set()
    for name, (tname, a) in variables.items():
        if name.endswith("_scale") and name[:-6] in variables:
            continue
        scale = variables.get(name + "_scale")
        if tname in ("int8", "int16") and scale is not None:
            s = scale[1].astype(np.float32)
            if tname == "int8":
                if s.shape != (a.shape[0],):
                    raise ConvertError("%s: %s_scale has shape %s; expected [%d]"
                                       % (path, name, list(s.shape), a.shape[0]))
                s = s.reshape((-1,) + (1,) * (a.ndim - 1))
            if not np.all(np.isfinite(s)) or np.any(s == 0):
                raise ConvertError("%s: %s_scale has a zero or non-finite value" % (path, name))
            out[name] = a.astype(np.float32) / s
            kinds.add(tname)
        elif tname == "bfloat16":
            out[name] = srkit_h5.bf16_bits_to_f32(a)
            kinds.add("bfloat16")
        elif tname in ("float32", "float16"):
            out[name] = a
            if a.ndim >= 2:
                kinds.add(tname)
        else:
            out[name] = a  # integer scalars (flags, head counts)
    return out, kinds


def _scalar(v, path, name):
    a = np.asarray(v)
    if a.size != 1:
        raise ConvertError("%s: variable %s should be a scalar" % (path, name))
    return int(a.reshape(-1)[0])


def ct2_to_openai(path, variables, aliases):
    """CTranslate2 WhisperSpec variables -> (dims, openai state dict, source type set)."""
    v, kinds = ct2_float_vars(path, variables)
    used = set()

    def get(name):
        if name not in v:
            raise ConvertError("%s: variable %s is missing" % (path, name))
        used.add(name)
        return v[name]

    def opt(name):
        if name in v:
            used.add(name)
            return v[name]
        return None

    for flag, want in (("decoder/pre_norm", 1), ("decoder/alibi", 0),
                       ("decoder/scale_embeddings", 0), ("decoder/start_from_zero_embedding", 0),
                       ("decoder/activation", CT2_GELU)):
        x = opt(flag)
        if x is not None and _scalar(x, path, flag) != want:
            raise ConvertError("%s: variable %s is %d; Whisper needs %d"
                               % (path, flag, _scalar(x, path, flag), want))
    for ignored in ("decoder/alignment_heads", "decoder/alignment_layer"):
        opt(ignored)  # word-timing metadata, not weights

    def layers(prefix):
        n = 0
        while any(k.startswith("%s/layer_%d/" % (prefix, n)) for k in v):
            n += 1
        return n

    conv1 = get("encoder/conv1/weight")
    emb = get("decoder/embeddings/weight")
    d, dt = conv1.shape[0], emb.shape[1]
    dims = {"n_mels": conv1.shape[1], "n_audio_state": d, "n_audio_layer": layers("encoder"),
            "n_vocab": emb.shape[0], "n_text_state": dt, "n_text_layer": layers("decoder")}
    epos = opt("encoder/position_encodings/encodings")
    dims["n_audio_ctx"] = epos.shape[0] if epos is not None else 1500
    dims["n_text_ctx"] = get("decoder/position_encodings/encodings").shape[0]
    for side, key, width in (("encoder", "n_audio_head", d), ("decoder", "n_text_head", dt)):
        h = opt(side + "/num_heads")
        # revisions without num_heads: every Whisper size uses 64-wide heads
        dims[key] = _scalar(h, path, side + "/num_heads") if h is not None else width // 64
    dims = {k: int(x) for k, x in dims.items()}

    st = {}

    def lin(src, dst, bias=True):
        st[dst + ".weight"] = get(src + "/weight")
        if bias:
            st[dst + ".bias"] = get(src + "/bias")

    def ln(src, dst):
        st[dst + ".weight"] = get(src + "/gamma")
        st[dst + ".bias"] = get(src + "/beta")

    def split(src, dsts, width):
        w, b = get(src + "/weight"), get(src + "/bias")
        if w.shape[0] != width * len(dsts) or b.shape != (width * len(dsts),):
            raise ConvertError("%s: variable %s/weight has shape %s; expected [%d, %d] fused "
                               "%s" % (path, src, list(w.shape), width * len(dsts), width,
                                       "/".join(x.rsplit(".", 1)[1] for x in dsts)))
        for j, dst in enumerate(dsts):
            st[dst + ".weight"] = w[j * width:(j + 1) * width]
            if dst.endswith(".key"):
                continue  # no key bias in Whisper; a non-zero one is cancelled by softmax
            st[dst + ".bias"] = b[j * width:(j + 1) * width]

    for c in ("conv1", "conv2"):
        lin("encoder/" + c, "encoder." + c)
    st["encoder.positional_embedding"] = (epos if epos is not None
                                          else sinusoids(dims["n_audio_ctx"], d))
    ln("encoder/layer_norm", "encoder.ln_post")
    for i in range(dims["n_audio_layer"]):
        s, o = "encoder/layer_%d/" % i, "encoder.blocks.%d." % i
        ln(s + "self_attention/layer_norm", o + "attn_ln")
        split(s + "self_attention/linear_0", [o + "attn.query", o + "attn.key", o + "attn.value"], d)
        lin(s + "self_attention/linear_1", o + "attn.out")
        ln(s + "ffn/layer_norm", o + "mlp_ln")
        lin(s + "ffn/linear_0", o + "mlp.0")
        lin(s + "ffn/linear_1", o + "mlp.2")
    st["decoder.token_embedding.weight"] = emb
    st["decoder.positional_embedding"] = get("decoder/position_encodings/encodings")
    ln("decoder/layer_norm", "decoder.ln")
    for i in range(dims["n_text_layer"]):
        s, o = "decoder/layer_%d/" % i, "decoder.blocks.%d." % i
        ln(s + "self_attention/layer_norm", o + "attn_ln")
        split(s + "self_attention/linear_0", [o + "attn.query", o + "attn.key", o + "attn.value"],
              dt)
        lin(s + "self_attention/linear_1", o + "attn.out")
        ln(s + "attention/layer_norm", o + "cross_attn_ln")
        lin(s + "attention/linear_0", o + "cross_attn.query")
        split(s + "attention/linear_1", [o + "cross_attn.key", o + "cross_attn.value"], dt)
        lin(s + "attention/linear_2", o + "cross_attn.out")
        ln(s + "ffn/layer_norm", o + "mlp_ln")
        lin(s + "ffn/linear_0", o + "mlp.0")
        lin(s + "ffn/linear_1", o + "mlp.2")
    # the output projection is the token embedding (an alias); an untied one cannot be expressed
    proj = "decoder/projection/weight"
    if proj in v:
        used.add(proj)
        if v[proj].shape != emb.shape or not np.array_equal(v[proj], emb):
            raise ConvertError("%s: variable %s differs from decoder/embeddings/weight; Whisper "
                               "ties the output projection to the embedding" % (path, proj))
    elif proj in aliases and aliases[proj] != "decoder/embeddings/weight":
        raise ConvertError("%s: alias %s points to %s, not decoder/embeddings/weight"
                           % (path, proj, aliases[proj]))
    left = sorted(set(v) - used)
    if left:
        raise ConvertError("%s: variable %s is not part of the Whisper layout this converter "
                           "knows" % (path, left[0]))
    return dims, st, kinds


def read_ct2_vocab(folder):
    """CTranslate2's vocabulary.json (a list) or vocabulary.txt (one token a line)."""
    pj, pt = os.path.join(folder, "vocabulary.json"), os.path.join(folder, "vocabulary.txt")
    if os.path.isfile(pj):
        try:
            with open(pj, encoding="utf-8") as f:
                v = json.load(f)
        except (OSError, ValueError) as e:
            raise ConvertError("%s: cannot read it as JSON (%s)" % (pj, e))
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConvertError("%s: expected a JSON list of token strings" % pj)
        return v, pj
    if os.path.isfile(pt):
        with open(pt, "rb") as f:
            text = f.read()
        try:
            # split on "\n" only: GPT-2 pieces never hold a raw newline but may hold other
            # characters str.splitlines() would cut at
            lines = text.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise ConvertError("%s: not UTF-8" % pt)
        if lines and lines[-1] == "":
            lines.pop()
        return lines, pt
    raise ConvertError("%s: no vocabulary.json or vocabulary.txt next to model.bin" % folder)


def load_ct2(src):
    folder = src if os.path.isdir(src) else os.path.dirname(os.path.abspath(src))
    binpath = os.path.join(src, "model.bin") if os.path.isdir(src) else src
    header, variables, aliases = read_ct2_bin(binpath)
    dims, state, kinds = ct2_to_openai(binpath, variables, aliases)
    pieces, vpath = read_ct2_vocab(folder)
    suppress = begin = None
    cpath = os.path.join(folder, "config.json")
    if os.path.isfile(cpath):
        try:
            with open(cpath, encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            raise ConvertError("%s: cannot read it as JSON (%s)" % (cpath, e))
        if not isinstance(cfg, dict):
            raise ConvertError("%s: expected a JSON object" % cpath)
        suppress = _int_list(cfg, "suppress_ids", cpath)
        begin = _int_list(cfg, "suppress_ids_begin", cpath)
    tok, config = tokenizer_and_config(dims, pieces, vpath, suppress=suppress,
                                       begin_suppress=begin)
    prov = "CTranslate2 %s revision %d (binary version %d) %s sha256 %s" % (
        header["spec"], header["revision"], header["version"], os.path.basename(binpath),
        sha256_file(binpath))
    return dims, state, kinds, tok, config, prov, None


def _int_list(cfg, key, path):
    if cfg.get(key) is None:
        return None
    v = cfg[key]
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                          for x in v):
        raise ConvertError("%s: %s is not a list of integers" % (path, key))
    return v


# ---- LoRA ---------------------------------------------------------------------------------------

def merge_lora(state, where, alpha=None, rank_default=None, scale_override=None, rslora=False):
    """Fold LoRA pairs into their base weights in place and drop them.

    Recognized names, for a module prefix P:
      P.lora_A.weight / P.lora_B.weight (PEFT) or P.lora_A / P.lora_B (loralib):
          A [r, in], B [out, r]; base P.base_layer.weight or P.weight; delta = s * B @ A
      P.lora_layer.lora_A / P.lora_layer.lora_B (WhisperRT): A [in, r], B [r, out];
          base P.base_layer.weight; delta = s * (A @ B)^T
    s = scale_override, else alpha / r (alpha / sqrt(r) with rslora), alpha defaulting to r.
    P.base_layer.bias becomes P.bias. Returns the number of merged pairs."""
    pairs = []
    for k in list(state):
        for a_suf, b_suf, kind in ((".lora_A.weight", ".lora_B.weight", "peft"),
                                   (".lora_layer.lora_A", ".lora_layer.lora_B", "whisperrt"),
                                   (".lora_A", ".lora_B", "peft")):
            if k.endswith(a_suf):
                pairs.append((k[:-len(a_suf)], k, k[:-len(a_suf)] + b_suf, kind))
                break
    for prefix, ka, kb, kind in pairs:
        if kb not in state:
            raise ConvertError("%s: %s has no matching %s" % (where, ka, kb))
        base = prefix + ".base_layer.weight"
        if base not in state:
            base = prefix + ".weight"
        if base not in state:
            raise ConvertError("%s: LoRA %s has no base weight %s.weight" % (where, ka, prefix))
        w = np.asarray(state[base], dtype=np.float32)
        a = np.asarray(state.pop(ka), dtype=np.float32)
        b = np.asarray(state.pop(kb), dtype=np.float32)
        if kind == "whisperrt":
            ok = a.ndim == 2 and b.ndim == 2 and a.shape[0] == w.shape[1] and \
                b.shape[1] == w.shape[0] and a.shape[1] == b.shape[0]
            r = a.shape[1] if a.ndim == 2 else 0
        else:
            ok = a.ndim == 2 and b.ndim == 2 and a.shape[1] == w.shape[1] and \
                b.shape[0] == w.shape[0] and a.shape[0] == b.shape[1]
            r = a.shape[0] if a.ndim == 2 else 0
        if not ok or w.ndim != 2:
            raise ConvertError("%s: LoRA shapes %s (%s) and %s (%s) do not fit %s %s"
                               % (where, ka, list(a.shape), kb, list(b.shape), base,
                                  list(w.shape)))
        if scale_override is not None:
            s = scale_override
        else:
            al = alpha if alpha is not None else (rank_default or r)
            s = al / math.sqrt(r) if rslora else al / r
        delta = (b @ a) if kind == "peft" else (a @ b).T
        merged = (w.astype(np.float64) + s * delta.astype(np.float64)).astype(np.float32)
        del state[base]
        state[prefix + ".weight"] = merged
        bb = prefix + ".base_layer.bias"
        if bb in state:
            state[prefix + ".bias"] = state.pop(bb)
    return len(pairs)


# ---- OpenAI .pt ---------------------------------------------------------------------------------

def whisperrt_streaming(cfg, n_merged, scale_override, dims, where):
    """config.streaming for a WhisperRT (CarelessWhisper) fine-tune, None for anything else.

    Its training config ("cfg" in the checkpoint) has gran, the block size in 20 ms encoder
    frames, and extra_gran_blocks, the blocks added to the first one; streaming_train says the
    weights were trained under the block-causal mask (the trainer builds LoRAStreamedWhisper only
    with it). srkit then defaults to whisperrt + stable_greedy at that chunk (docs/whisper.md).
    Vanilla weights get no block: the loader's defaults for them are the non-causal ones."""
    if "gran" not in cfg or cfg.get("streaming_train") is False:
        return None
    try:
        gran = int(cfg["gran"])
        extra = int(cfg.get("extra_gran_blocks", 0))
    except (TypeError, ValueError):
        raise ConvertError("%s: cfg.gran / cfg.extra_gran_blocks are not integers (%r, %r)"
                           % (where, cfg.get("gran"), cfg.get("extra_gran_blocks")))
    chunk, window = gran * 20, dims["n_audio_ctx"] * 20
    first = (extra + 1) * chunk
    if not 40 <= chunk <= 1000 or extra < 0 or first > window:
        raise ConvertError("%s: cfg.gran %d / extra_gran_blocks %d give %d ms chunks after a %d ms "
                           "first chunk; srkit's whisperrt runs 40..1000 ms chunks within the %d ms "
                           "window" % (where, gran, extra, chunk, first, window))
    lora = {"pairs_merged": int(n_merged), "scale": 1.0 if scale_override is None else
            float(scale_override), "source": "WhisperRT (CarelessWhisper) LoRA fine-tune"}
    if cfg.get("rank") is not None:
        lora["rank"] = int(cfg["rank"])
    return {"causal": True, "chunk_ms": [chunk], "first_chunk_ms": first, "lora": lora}


def import_torch():
    try:
        import torch
    except ImportError:
        raise MissingPackage("reading an OpenAI .pt checkpoint needs PyTorch, which this python "
                             "(%s) lacks: run this script with a python that has torch, e.g. "
                             "the reference venv (make venv-ref; ${SRKIT_HOME:-~/.cache/srkit}/"
                             "venv-ref/bin/python)" % sys.executable)
    return torch


def tensor_to_numpy(t, kinds):
    import torch
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        kinds.add("bfloat16")
        return t.float().numpy()
    if t.dtype == torch.float16:
        kinds.add("float16")
        return t.numpy()
    if t.dtype in (torch.float32, torch.float64):
        kinds.add("float32")
        return t.float().numpy()
    raise ConvertError("tensor of type %s is not floating point" % t.dtype)


def load_pt(src, args):
    torch = import_torch()
    try:
        ckpt = torch.load(src, map_location="cpu", weights_only=not args.unsafe_pickle)
    except FileNotFoundError:
        raise ConvertError("%s: no such file" % src)
    except Exception as e:  # torch raises several types for a bad or non-weights-only pickle
        hint = "" if args.unsafe_pickle else (
            "; if you trust the file and it holds Python objects beyond tensors, pass "
            "--unsafe-pickle")
        raise ConvertError("%s: torch.load failed (%s)%s" % (src, str(e).split("\n")[0], hint))
    if not isinstance(ckpt, dict) or "dims" not in ckpt:
        raise ConvertError("%s: not an openai-whisper checkpoint (no 'dims' entry)" % src)
    sd = ckpt.get("model_state_dict", ckpt.get("state_dict"))
    if not isinstance(sd, dict):
        raise ConvertError("%s: no model_state_dict / state_dict entry" % src)
    dims = dict(ckpt["dims"]) if not hasattr(ckpt["dims"], "__dict__") else vars(ckpt["dims"])
    dims = {k: dims.get(k) for k in DIM_KEYS}
    kinds, state = set(), {}
    prefix = "model." if sd and all(k.startswith("model.") for k in sd) else ""
    for k, t in sd.items():
        if not hasattr(t, "detach"):
            continue
        k = k[len(prefix):]
        if "decoder_advisor" in k:  # WhisperRT's optional advisor head: not used for decoding
            continue
        try:
            state[k] = tensor_to_numpy(t, kinds)
        except ConvertError as e:
            raise ConvertError("%s: %s: %s" % (src, k, e))
    extra = {}
    cfg = ckpt.get("cfg") if isinstance(ckpt.get("cfg"), dict) else {}
    n = merge_lora(state, src, alpha=cfg.get("lora_alpha"), rank_default=cfg.get("rank"),
                   scale_override=args.lora_scale)
    for k in [k for k in state if k.endswith(".attn.key.bias")]:
        del state[k]  # see the module comment: cancelled by softmax
    validate_state(state, dims, src)
    streaming = whisperrt_streaming(cfg, n, args.lora_scale, dims, src)
    if streaming:
        extra["streaming"] = streaming
    elif n:
        extra["lora_merged"] = n
    multilingual = dims["n_vocab"] >= 51865
    name = "multilingual.tiktoken" if multilingual else "gpt2.tiktoken"
    tpath = args.tiktoken or whisper_package_asset(name) or shared_asset(name)
    if not tpath:
        raise ConvertError("%s: cannot find %s (openai-whisper's tokenizer vocabulary): pass "
                           "--tiktoken PATH" % (src, name))
    ranks = read_tiktoken(tpath)
    pieces = [piece_from_bytes(b) for b in ranks]
    pieces += whisper_special_pieces(dims["n_vocab"], len(ranks), multilingual)
    tok, config = tokenizer_and_config(dims, pieces, tpath, multilingual=multilingual,
                                       extra=extra)
    sha = sha256_file(src)
    prov = "OpenAI .pt %s sha256 %s%s" % (
        os.path.basename(src), sha,
        " (openai-whisper %s)" % OPENAI_SHA256[sha] if sha in OPENAI_SHA256 else "")
    if n:
        prov += ", %d LoRA pairs merged" % n
    lic = "MIT" if sha in OPENAI_SHA256 else None
    return dims, state, kinds, tok, config, prov, lic


# ---- Hugging Face -------------------------------------------------------------------------------

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
             "I64": np.int64, "I32": np.int32}


def read_safetensors(path, kinds=None):
    """Parse a .safetensors file -> {name: float32/float16 array} (bf16 widened)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConvertError("%s: cannot read it (%s)" % (path, e.strerror))
    if len(data) < 8:
        raise ConvertError("%s: truncated (no header length)" % path)
    hl = struct.unpack("<Q", data[:8])[0]
    if hl > len(data) - 8:
        raise ConvertError("%s: header length %d exceeds the file" % (path, hl))
    try:
        header = json.loads(data[8:8 + hl].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConvertError("%s: header is not JSON" % path)
    base, out = 8 + hl, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dt, shape, (lo, hi) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ConvertError("%s: tensor %s has a malformed header entry" % (path, name))
        if dt not in ST_DTYPES:
            raise ConvertError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        npdt = np.dtype(ST_DTYPES[dt]).newbyteorder("<")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= lo <= hi <= len(data) - base or hi - lo != count * npdt.itemsize:
            raise ConvertError("%s: tensor %s: data offsets [%d, %d) do not fit shape %s %s in "
                               "the file" % (path, name, lo, hi, list(shape), dt))
        a = np.frombuffer(data, dtype=npdt, count=count, offset=base + lo).reshape(shape)
        if dt == "BF16":
            a = srkit_h5.bf16_bits_to_f32(a)
        elif dt == "F16":
            a = a.astype(np.float16)
        else:
            a = a.astype(np.float32) if dt in ("F32", "F64") else a.astype(npdt.newbyteorder("="))
        if kinds is not None and a.ndim >= 2:
            kinds.add({"BF16": "bfloat16", "F16": "float16"}.get(dt, "float32"))
        out[name] = a
    return out


HF_LAYER = [("self_attn.q_proj", "attn.query"), ("self_attn.k_proj", "attn.key"),
            ("self_attn.v_proj", "attn.value"), ("self_attn.out_proj", "attn.out"),
            ("self_attn_layer_norm", "attn_ln"), ("encoder_attn.q_proj", "cross_attn.query"),
            ("encoder_attn.k_proj", "cross_attn.key"), ("encoder_attn.v_proj", "cross_attn.value"),
            ("encoder_attn.out_proj", "cross_attn.out"),
            ("encoder_attn_layer_norm", "cross_attn_ln"), ("fc1", "mlp.0"), ("fc2", "mlp.2"),
            ("final_layer_norm", "mlp_ln")]
HF_TOP = {"encoder.conv1": "encoder.conv1", "encoder.conv2": "encoder.conv2",
          "encoder.embed_positions.weight": "encoder.positional_embedding",
          "encoder.layer_norm": "encoder.ln_post",
          "decoder.embed_tokens.weight": "decoder.token_embedding.weight",
          "decoder.embed_positions.weight": "decoder.positional_embedding",
          "decoder.layer_norm": "decoder.ln"}


def hf_to_openai(hf, where):
    """transformers Whisper names -> openai-whisper names (proj_out checked tied, dropped)."""
    out = {}
    for k, a in hf.items():
        n = k[len("model."):] if k.startswith("model.") else k
        if n == "proj_out.weight":
            continue
        new = None
        for src, dst in HF_TOP.items():
            if n == src or n.startswith(src + "."):
                new = dst + n[len(src):]
                break
        if new is None:
            parts = n.split(".")
            if len(parts) >= 4 and parts[0] in ("encoder", "decoder") and parts[1] == "layers":
                rest = ".".join(parts[3:])
                for src, dst in HF_LAYER:
                    if rest == src or rest.startswith(src + "."):
                        new = "%s.blocks.%s.%s%s" % (parts[0], parts[2], dst, rest[len(src):])
                        break
        if new is None:
            raise ConvertError("%s: tensor %s is not part of the Whisper layout" % (where, k))
        out[new] = a
    emb = out.get("decoder.token_embedding.weight")
    for k in ("proj_out.weight", "model.proj_out.weight"):
        if k in hf and emb is not None and not np.array_equal(hf[k], emb):
            raise ConvertError("%s: %s differs from the token embedding; Whisper ties them"
                               % (where, k))
    for k in [k for k in out if k.endswith(".attn.key.bias")]:
        del out[k]
    return out


def _load_json(path, required=True):
    if not os.path.isfile(path):
        if required:
            raise ConvertError("%s: missing" % path)
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError("%s: cannot read it as JSON (%s)" % (path, e))


def hf_vocab(folder, n_vocab):
    """Pieces by id from tokenizer.json or vocab.json + added_tokens.json; ids past the listed
    ones that follow <|notimestamps|> are filled with timestamp tokens as Whisper defines them."""
    by_id = {}
    tj = _load_json(os.path.join(folder, "tokenizer.json"), required=False)
    if tj is not None:
        for p, i in tj.get("model", {}).get("vocab", {}).items():
            by_id[i] = p
        for t in tj.get("added_tokens", []):
            by_id[t["id"]] = t["content"]
        where = os.path.join(folder, "tokenizer.json")
    else:
        where = os.path.join(folder, "vocab.json")
        for p, i in _load_json(where).items():
            by_id[i] = p
        added = _load_json(os.path.join(folder, "added_tokens.json"), required=False) or {}
        for p, i in added.items():
            by_id[i] = p
    nts = [i for i, p in by_id.items() if p == "<|notimestamps|>"]
    if nts:
        for i in range(nts[0] + 1, n_vocab):
            by_id.setdefault(i, "<|%.2f|>" % ((i - nts[0] - 1) * 0.02))
    missing = [i for i in range(n_vocab) if i not in by_id]
    if missing or len(by_id) != n_vocab:
        raise ConvertError("%s: the vocabulary has %d tokens%s but the token embedding has %d rows"
                           % (where, len(by_id), " (id %d missing)" % missing[0]
                              if missing else "", n_vocab))
    return [by_id[i] for i in range(n_vocab)], where


def load_hf(src, args):
    folder = src if os.path.isdir(src) else os.path.dirname(os.path.abspath(src))
    files = ([os.path.join(folder, f) for f in sorted(os.listdir(folder))
              if f.endswith(".safetensors") and f.startswith("model")]
             if os.path.isdir(src) else [src])
    if not files:
        raise ConvertError("%s: no model*.safetensors file" % folder)
    kinds, hf = set(), {}
    for p in files:
        hf.update(read_safetensors(p, kinds))
    where = files[0]
    extra = {}
    n = merge_lora(hf, where, scale_override=args.lora_scale)  # unmerged PEFT model saves
    if args.lora:
        n += merge_peft_adapter(hf, args.lora, args.lora_scale)
    if n:
        extra["lora_merged"] = n
    state = hf_to_openai(hf, where)
    cfg = _load_json(os.path.join(folder, "config.json"))
    keys = {"n_mels": "num_mel_bins", "n_audio_ctx": "max_source_positions",
            "n_audio_state": "d_model", "n_audio_head": "encoder_attention_heads",
            "n_audio_layer": "encoder_layers", "n_vocab": "vocab_size",
            "n_text_ctx": "max_target_positions", "n_text_state": "d_model",
            "n_text_head": "decoder_attention_heads", "n_text_layer": "decoder_layers"}
    dims = {k: cfg.get(v) for k, v in keys.items()}
    validate_state(state, dims, where)
    pieces, vwhere = hf_vocab(folder, dims["n_vocab"])
    gen = _load_json(os.path.join(folder, "generation_config.json"), required=False) or {}
    gpath = os.path.join(folder, "generation_config.json")
    cpath = os.path.join(folder, "config.json")
    suppress = _int_list(gen, "suppress_tokens", gpath)
    if suppress is None:
        suppress = _int_list(cfg, "suppress_tokens", cpath)
    begin = _int_list(gen, "begin_suppress_tokens", gpath)
    if begin is None:
        begin = _int_list(cfg, "begin_suppress_tokens", cpath)
    multi = gen.get("is_multilingual")
    tok, config = tokenizer_and_config(dims, pieces, vwhere,
                                       multilingual=multi if isinstance(multi, bool) else None,
                                       suppress=suppress, begin_suppress=begin, extra=extra)
    prov = "Hugging Face transformers %s sha256 %s" % (
        ", ".join(os.path.basename(p) for p in files), sha256_file(files[0]))
    if n:
        prov += ", %d LoRA pairs merged" % n
    lic = None
    readme = os.path.join(folder, "README.md")
    if os.path.isfile(readme):
        with open(readme, encoding="utf-8", errors="replace") as f:
            head = f.read(4096).split("\n")
        if head and head[0].strip() == "---":
            for line in head[1:]:
                if line.strip() == "---":
                    break
                if line.startswith("license:"):
                    lic = line.split(":", 1)[1].strip().strip("'\"")
    return dims, state, kinds, tok, config, prov, lic


def merge_peft_adapter(hf, adapter, scale_override):
    """Merge a PEFT adapter folder (adapter_config.json + adapter_model.safetensors) into hf."""
    folder = adapter if os.path.isdir(adapter) else os.path.dirname(os.path.abspath(adapter))
    cpath = os.path.join(folder, "adapter_config.json")
    acfg = _load_json(cpath)
    if acfg.get("peft_type", "LORA") != "LORA":
        raise ConvertError("%s: peft_type %r; only LORA adapters can be merged"
                           % (cpath, acfg.get("peft_type")))
    if acfg.get("fan_in_fan_out"):
        raise ConvertError("%s: fan_in_fan_out adapters are not used by Whisper" % cpath)
    if acfg.get("rank_pattern") or acfg.get("alpha_pattern"):
        raise ConvertError("%s: per-module rank_pattern / alpha_pattern is not supported" % cpath)
    wpath = os.path.join(folder, "adapter_model.safetensors")
    if not os.path.isfile(wpath):
        raise ConvertError("%s: missing (adapter_model.bin needs torch; save the adapter with "
                           "safe_serialization=True)" % wpath)
    ad = read_safetensors(wpath)
    if not ad:
        raise ConvertError("%s: no tensors" % wpath)
    # PEFT keys: base_model.model.<model key>.lora_A.weight ("model." may or may not follow)
    mapped = {}
    for k, a in ad.items():
        n = k[len("base_model.model."):] if k.startswith("base_model.model.") else k
        target = n.replace(".lora_A.weight", ".weight").replace(".lora_B.weight", ".weight")
        if target not in hf and ("model." + target) in hf:
            n = "model." + n
        mapped[n] = a
    before = set(hf)
    hf.update(mapped)
    r = acfg.get("r")
    n = merge_lora(hf, wpath, alpha=acfg.get("lora_alpha"), rank_default=r,
                   scale_override=scale_override, rslora=bool(acfg.get("use_rslora")))
    left = [k for k in set(hf) - before if "lora_" in k]
    if left:
        raise ConvertError("%s: tensor %s was not merged" % (wpath, sorted(left)[0]))
    return n


# ---- driver -------------------------------------------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def detect(src):
    if os.path.isdir(src):
        if os.path.isfile(os.path.join(src, "model.bin")):
            return "ct2"
        if any(f.endswith(".safetensors") for f in os.listdir(src)):
            return "hf"
        raise ConvertError("%s: no model.bin (CTranslate2) or *.safetensors (Hugging Face) "
                           "inside" % src)
    if not os.path.exists(src):
        raise ConvertError("%s: no such file or directory" % src)
    if src.endswith(".safetensors"):
        return "hf"
    if src.endswith((".pt", ".pth", ".ckpt")):
        return "pt"
    return "ct2"


def output_dtype(arg, kinds):
    """--dtype keep: the source's storage type (int8 -> int8, bf16 -> bf16, f16/f32 kept)."""
    if arg != "keep":
        return arg
    if kinds & {"int8", "int16"}:
        return "int8"
    if "bfloat16" in kinds:
        return "bf16"
    return None


def convert(args):
    kind = args.format if args.format != "auto" else detect(args.src)
    loader = {"ct2": lambda: load_ct2(args.src), "pt": lambda: load_pt(args.src, args),
              "hf": lambda: load_hf(args.src, args)}[kind]
    if args.lora and kind != "hf":
        raise ConvertError("--lora takes a PEFT adapter for a Hugging Face model; .pt "
                           "checkpoints carry their LoRA layers inside")
    dims, state, kinds, tok, config, prov, lic = loader()
    validate_state(state, dims, args.src)
    filters, mel_prov = mel_filters(dims["n_mels"], args.mel_filters)
    source = "%s; converted by srkit scripts/convert_whisper.py %s; mel_filters: %s" % (
        prov, CONVERTER_VERSION, mel_prov)
    license_ = args.license or lic or "unknown (pass --license)"
    dtype = output_dtype(args.dtype, kinds)
    try:
        srkit_h5.write_model(args.out, "whisper", config, state, dtype=dtype, tokenizer=tok,
                             frontend={"mel_filters": filters}, source=source, license=license_,
                             checksum=not args.no_checksum)
    except ValueError as e:
        raise ConvertError("%s: %s" % (args.out, e))
    except OSError as e:
        raise ConvertError("%s: cannot write it (%s)" % (args.out, e))
    n_params = sum(int(np.prod(np.shape(a))) for a in state.values())
    return n_params, dims, dtype


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Convert a Whisper checkpoint (CTranslate2 model.bin, OpenAI .pt, Hugging "
                    "Face safetensors) into an srkit HDF5 model (arch whisper).")
    ap.add_argument("src", help="CTranslate2 folder or model.bin, .pt file, or Hugging Face "
                                "folder / .safetensors file")
    ap.add_argument("out", help="output .h5")
    ap.add_argument("--format", choices=("auto", "ct2", "pt", "hf"), default="auto")
    ap.add_argument("--dtype", choices=("keep", "f32", "f16", "bf16", "int8"), default="keep",
                    help="storage type (keep: the source's)")
    ap.add_argument("--lora", help="PEFT LoRA adapter folder to merge (Hugging Face source)")
    ap.add_argument("--lora-scale", type=float, help="override the LoRA scale (alpha / r)")
    ap.add_argument("--tiktoken", help="openai-whisper vocabulary (.pt source): gpt2.tiktoken or "
                                       "multilingual.tiktoken")
    ap.add_argument("--mel-filters", help="Whisper's mel_filters.npz")
    ap.add_argument("--license", help="licence of the weights, stored in the file")
    ap.add_argument("--unsafe-pickle", action="store_true",
                    help=".pt: allow arbitrary pickled objects (only for files you trust)")
    ap.add_argument("--no-checksum", action="store_true",
                    help="write plain datasets without Fletcher-32 checksums")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        n, dims, dtype = convert(args)
    except ConvertError as e:
        print("convert_whisper.py: error: %s" % e, file=sys.stderr)
        return 1
    except MissingPackage as e:
        print("convert_whisper.py: error: %s" % e, file=sys.stderr)
        return 2
    if not args.quiet:
        print("%s: whisper %d+%d layers, d=%d, n_vocab=%d, %.1fM parameters, dtype %s"
              % (args.out, dims["n_audio_layer"], dims["n_text_layer"], dims["n_audio_state"],
                 dims["n_vocab"], n / 1e6, dtype or "as source"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
