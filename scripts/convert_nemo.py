#!/usr/bin/env python3
"""convert_nemo.py — convert a NeMo .nemo archive of a cache-aware streaming FastConformer-RNNT
(nemotron-speech-streaming-en-0.6b and models of its family) into an srkit model file (arch
"fastconformer_rnnt", docs/fastconformer.md).

A .nemo file is a tar archive (plain or gzip) holding model_config.yaml (the model's resolved
OmegaConf config), model_weights.ckpt (a torch state dict: encoder.*, decoder.*, joint.*,
preprocessor.* keys) and the tokenizer files the config names as "nemo:<file>". This script:

  * reads the YAML config and maps it to srkit's config keys: the mel front end from
    `preprocessor` (NeMo's AudioToMelSpectrogramPreprocessor defaults where a key is absent),
    the encoder from `encoder` (ConformerEncoder defaults), the prediction network from
    `decoder.prednet`, the joint from `joint.jointnet`, max_symbols from `decoding.greedy`,
    TDT durations from `model_defaults.tdt_durations` / `loss.tdt_kwargs.durations`. Variants
    srkit does not implement (non-causal subsampling, symmetric conv context, other attention
    models, a window other than Hann, ...) are refused naming the config field;
  * loads the state dict with torch (weights_only), keeps the encoder / decoder / joint tensors
    under their NeMo keys (the names fc_load.c reads), checks every one is present with the
    shape the config implies and finite, and refuses unexpected ones (they would mean an
    architecture variant this backend does not compute). Shared attention biases
    (untie_biases: false, encoder.pos_bias_u / _v) are copied into every layer;
  * reads the SentencePiece vocabulary, in id order, from the tokenizer's .model file (the
    ModelProto protobuf is parsed here: field 1 = pieces, each with 1 = piece, 2 = score,
    3 = type; no sentencepiece package needed) or else its .vocab file ("piece<TAB>score" lines),
    into /tokenizer of type "sentencepiece" (control and unknown pieces marked special).

Usage:
  convert_nemo.py MODEL.nemo OUT.h5 [--dtype keep|f32|f16|bf16|int8] [--license TEXT]
                  [--no-checksum] [-q]
Exit status 0 on success, 1 on a bad or unsupported input (one line on stderr naming the file
and the field or tensor at fault), 2 when a needed Python package is missing (reading the .ckpt
needs PyTorch; the YAML needs PyYAML): run it with the reference venv,
${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python.
"""

import argparse
import math
import os
import re
import struct
import sys
import tarfile
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import srkit_h5  # noqa: E402

CONVERTER_VERSION = "1"


class ConvertError(Exception):
    """A bad or unsupported input; the message names the file and the field at fault."""


class MissingPackage(Exception):
    """A Python package the conversion needs is not installed."""


VENV_HINT = ("run this script with a python that has it, e.g. the reference venv "
             "(${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python)")


# ---- archive -----------------------------------------------------------------------------------

def extract(path, tmp):
    """Regular files of the .nemo archive, extracted flat into tmp: {base name: local path}."""
    try:
        t = tarfile.open(path, "r:*")
    except (OSError, tarfile.TarError) as e:
        raise ConvertError("%s: not a readable .nemo (tar) archive (%s)" % (path, e))
    files = {}
    with t:
        for m in t.getmembers():
            if not m.isfile():
                continue
            base = os.path.basename(m.name)
            if not base or base in files:
                continue
            out = os.path.join(tmp, base)
            src = t.extractfile(m)
            with open(out, "wb") as f:
                while True:
                    b = src.read(1 << 24)
                    if not b:
                        break
                    f.write(b)
            files[base] = out
    for need in ("model_config.yaml", "model_weights.ckpt"):
        if need not in files:
            raise ConvertError("%s: the archive has no %s" % (path, need))
    return files


# ---- config ------------------------------------------------------------------------------------

def load_yaml(path):
    try:
        import yaml
    except ImportError:
        raise MissingPackage("reading model_config.yaml needs PyYAML, which this python (%s) "
                             "lacks: %s" % (sys.executable, VENV_HINT))
    with open(path, "r", encoding="utf-8") as f:
        try:
            cfg = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ConvertError("model_config.yaml: not valid YAML (%s)" % e)
    if not isinstance(cfg, dict):
        raise ConvertError("model_config.yaml: expected a mapping at the top level")
    if "encoder" not in cfg and isinstance(cfg.get("model"), dict):
        cfg = cfg["model"]
    return cfg


_INTERP = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")


class Cfg:
    """Field access into the model config with NeMo's defaults and `${a.b}` interpolations
    (saved configs are normally resolved; this covers hand-written ones)."""

    def __init__(self, root):
        self.root = root

    def _resolve(self, v, depth=0):
        if isinstance(v, str):
            m = _INTERP.match(v.strip())
            if m and depth < 16:
                path = m.group(1)
                if path.startswith("model."):
                    path = path[6:]
                return self._resolve(self.get(path, _MISSING), depth + 1)
        return v

    def get(self, path, default):
        node = self.root
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        v = self._resolve(node)
        if v is _MISSING:
            raise ConvertError("model_config.yaml: %s refers to a missing field" % path)
        return v

    def need(self, path):
        v = self.get(path, _MISSING)
        if v is _MISSING or v is None:
            raise ConvertError("model_config.yaml: %s is missing" % path)
        return v

    def int(self, path, default=None, minimum=1):
        v = self.need(path) if default is None else self.get(path, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ConvertError("model_config.yaml: %s is %r; expected an integer >= %d"
                               % (path, v, minimum))
        return v

    def num(self, path, default):
        v = self.get(path, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConvertError("model_config.yaml: %s is %r; expected a number" % (path, v))
        return float(v)


_MISSING = object()


def unsupported(field, value, what):
    raise ConvertError("model_config.yaml: %s is %r; srkit's fastconformer_rnnt %s"
                       % (field, value, what))


def frontend_config(c):
    """srkit front-end keys from `preprocessor` (NeMo AudioToMelSpectrogramPreprocessor)."""
    p = "preprocessor."
    sr = c.int(p + "sample_rate", c.get("sample_rate", 16000))
    if sr != 16000:
        unsupported(p + "sample_rate", sr, "needs 16000")
    win = c.get(p + "n_window_size", None)
    if win is None:
        win = int(c.num(p + "window_size", 0.02) * sr + 0.5)
    hop = c.get(p + "n_window_stride", None)
    if hop is None:
        hop = int(c.num(p + "window_stride", 0.01) * sr + 0.5)
    n_fft = c.get(p + "n_fft", None)
    if n_fft is None:
        n_fft = 2 ** math.ceil(math.log2(win))
    for name, v in (("n_window_size", win), ("n_window_stride", hop), ("n_fft", n_fft)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConvertError("model_config.yaml: %s%s is %r; expected a positive integer"
                               % (p, name, v))
    if win > n_fft:
        raise ConvertError("model_config.yaml: %swindow (%d samples) is longer than n_fft %d"
                           % (p, win, n_fft))
    normalize = c.get(p + "normalize", "per_feature")
    if normalize not in ("NA", None, "none"):
        unsupported(p + "normalize", normalize, "streams NA-normalized mels (per-utterance "
                    "normalization cannot stream)")
    preemph = c.get(p + "preemph", 0.97)
    # the remaining options must be those srkit's NeMo mel computes
    fixed = (("window", "hann"), ("log", True), ("mag_power", 2.0), ("frame_splicing", 1),
             ("lowfreq", 0), ("highfreq", None), ("log_zero_guard_type", "add"),
             ("log_zero_guard_value", 2 ** -24), ("exact_pad", False), ("mel_norm", "slaney"),
             ("nb_augmentation_prob", 0.0))
    for key, want in fixed:
        v = c.get(p + key, want)
        if key == "highfreq" and v is not None and float(v) == sr / 2:
            continue
        if v != want:
            unsupported(p + key, v, "front end computes %s = %r" % (key, want))
    return {"sample_rate": 16000, "n_fft": n_fft, "win_length": win, "hop_length": hop,
            "n_mels": c.int(p + "features", 64), "preemph": float(preemph or 0.0),
            "normalize": "NA"}


def encoder_config(c):
    """srkit encoder keys from `encoder` (NeMo ConformerEncoder, its defaults when absent)."""
    e = "encoder."
    target = c.get(e + "_target_", "")
    if target and not target.endswith("ConformerEncoder"):
        unsupported(e + "_target_", target, "reads ConformerEncoder")
    d = c.int(e + "d_model")
    heads = c.int(e + "n_heads", 4)
    kernel = c.int(e + "conv_kernel_size", 31)
    sub = c.get(e + "subsampling", "striding")
    factor = c.int(e + "subsampling_factor", 4)
    causal = c.get(e + "causal_downsampling", False)
    if sub != "dw_striding" or factor != 8 or not causal:
        raise ConvertError("model_config.yaml: encoder.subsampling %r, subsampling_factor %r, "
                           "causal_downsampling %r; srkit's fastconformer_rnnt implements causal "
                           "dw_striding with factor 8" % (sub, factor, causal))
    attn = c.get(e + "self_attention_model", "rel_pos")
    if attn != "rel_pos":
        unsupported(e + "self_attention_model", attn, "streams rel_pos attention")
    ctx = c.get(e + "att_context_size", None)
    if ctx is None or (isinstance(ctx, list) and ctx and not isinstance(ctx[0], list)):
        ctx = [ctx if ctx is not None else [-1, -1]]
    if (not isinstance(ctx, list) or not ctx or
            not all(isinstance(a, list) and len(a) == 2 and
                    all(isinstance(x, int) and not isinstance(x, bool) for x in a) for a in ctx)):
        unsupported(e + "att_context_size", ctx, "needs a list of [left, right] integer pairs")
    if any(a[0] < 0 or a[1] < 0 for a in ctx):
        unsupported(e + "att_context_size", ctx, "needs limited contexts (a cache-aware "
                    "streaming model; [-1, -1] is unlimited)")
    style = c.get(e + "att_context_style", "regular")
    if style not in ("regular", "chunked_limited"):
        unsupported(e + "att_context_style", style, "knows regular and chunked_limited")
    conv_ctx = c.get(e + "conv_context_size", None)
    if conv_ctx == "causal":
        conv_ctx = [kernel - 1, 0]
    if conv_ctx != [kernel - 1, 0]:
        unsupported(e + "conv_context_size", conv_ctx, "needs a causal depthwise conv "
                    "(\"causal\" or [%d, 0])" % (kernel - 1))
    cnorm = c.get(e + "conv_norm_type", "batch_norm")
    if cnorm not in ("batch_norm", "layer_norm"):
        unsupported(e + "conv_norm_type", cnorm, "knows batch_norm and layer_norm")
    if not c.get(e + "use_bias", True):
        unsupported(e + "use_bias", False, "needs the encoder's Linear and conv biases")
    for key, want in (("reduction", None), ("global_tokens", 0), ("feat_out", -1)):
        v = c.get(e + key, want)
        if v != want:
            unsupported(e + key, v, "implements %s = %r" % (key, want))
    ff = c.num(e + "ff_expansion_factor", 4)
    if ff * d != int(ff * d) or ff <= 0:
        unsupported(e + "ff_expansion_factor", ff, "needs an integer d_model * factor")
    ch = c.get(e + "subsampling_conv_channels", -1)
    if ch == -1:
        ch = d
    feat_in = c.int(e + "feat_in")
    return {
        "d_model": d, "n_layers": c.int(e + "n_layers"), "n_heads": heads, "d_ff": int(ff * d),
        "conv_kernel_size": kernel, "conv_norm_type": cnorm, "conv_context_size": conv_ctx,
        "subsampling": "dw_striding", "subsampling_factor": 8, "subsampling_conv_channels": ch,
        "causal_downsampling": 1, "xscaling": 1 if c.get(e + "xscaling", True) else 0,
        "self_attention_model": "rel_pos", "att_context_style": style, "att_context_size": ctx,
        "pos_emb_max_len": c.get(e + "pos_emb_max_len", 5000),
    }, feat_in, bool(c.get(e + "untie_biases", True))


def decoder_config(c):
    """Prediction network, joint and greedy-decoding keys."""
    target = c.get("decoder._target_", "")
    if target and not target.endswith("RNNTDecoder"):
        unsupported("decoder._target_", target, "reads RNNTDecoder (LSTM prediction network)")
    if not c.get("decoder.blank_as_pad", True):
        unsupported("decoder.blank_as_pad", False, "needs the blank-as-pad embedding (vocab + 1 "
                    "rows)")
    rnn = c.get("decoder.prednet.rnn_type", "lstm")
    if rnn != "lstm":
        unsupported("decoder.prednet.rnn_type", rnn, "implements lstm")
    vocab = c.int("decoder.vocab_size")
    classes = c.get("joint.num_classes", vocab)
    if classes != vocab:
        raise ConvertError("model_config.yaml: joint.num_classes %r differs from "
                           "decoder.vocab_size %d" % (classes, vocab))
    act = c.get("joint.jointnet.activation", "relu")
    if act != "relu":
        unsupported("joint.jointnet.activation", act, "implements relu")
    durations = c.get("model_defaults.tdt_durations", None)
    if durations is None:
        durations = c.get("loss.tdt_kwargs.durations", None)
    durations = list(durations or [])
    extra = c.get("joint.num_extra_outputs", 0) or 0
    if extra != len(durations):
        raise ConvertError("model_config.yaml: joint.num_extra_outputs %r but %d TDT durations "
                           "(model_defaults.tdt_durations / loss.tdt_kwargs.durations)"
                           % (extra, len(durations)))
    max_symbols = c.get("decoding.greedy.max_symbols", None)
    if max_symbols is None:
        max_symbols = c.get("decoding.greedy.max_symbols_per_step", 10)
    if max_symbols is None:
        max_symbols = 10
    return {
        "vocab_size": vocab, "blank": vocab, "pred_hidden": c.int("decoder.prednet.pred_hidden"),
        "pred_rnn_layers": c.int("decoder.prednet.pred_rnn_layers", 1),
        "joint_hidden": c.int("joint.jointnet.joint_hidden"), "joint_activation": "relu",
        "tdt_durations": [int(x) for x in durations], "max_symbols": int(max_symbols),
    }


# ---- tensors -----------------------------------------------------------------------------------

def expected_shapes(cfg, joint_last):
    """{NeMo state-dict key: shape} fc_load.c reads for this config."""
    d, ff, h, K = cfg["d_model"], cfg["d_ff"], cfg["n_heads"], cfg["conv_kernel_size"]
    C, H, J = cfg["subsampling_conv_channels"], cfg["pred_hidden"], cfg["joint_hidden"]
    f = cfg["n_mels"]
    for _ in range(3):
        f = f // 2 + 1
    s = {"encoder.pre_encode.conv.0.weight": (C, 1, 3, 3), "encoder.pre_encode.conv.0.bias": (C,),
         "encoder.pre_encode.conv.2.weight": (C, 1, 3, 3), "encoder.pre_encode.conv.2.bias": (C,),
         "encoder.pre_encode.conv.3.weight": (C, C, 1, 1), "encoder.pre_encode.conv.3.bias": (C,),
         "encoder.pre_encode.conv.5.weight": (C, 1, 3, 3), "encoder.pre_encode.conv.5.bias": (C,),
         "encoder.pre_encode.conv.6.weight": (C, C, 1, 1), "encoder.pre_encode.conv.6.bias": (C,),
         "encoder.pre_encode.out.weight": (d, C * f), "encoder.pre_encode.out.bias": (d,)}
    for i in range(cfg["n_layers"]):
        p = "encoder.layers.%d." % i
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2",
                  "norm_out", "conv.batch_norm"):
            s[p + n + ".weight"] = (d,)
            s[p + n + ".bias"] = (d,)
        if cfg["conv_norm_type"] == "batch_norm":
            s[p + "conv.batch_norm.running_mean"] = (d,)
            s[p + "conv.batch_norm.running_var"] = (d,)
        for n in ("feed_forward1", "feed_forward2"):
            s[p + n + ".linear1.weight"] = (ff, d)
            s[p + n + ".linear1.bias"] = (ff,)
            s[p + n + ".linear2.weight"] = (d, ff)
            s[p + n + ".linear2.bias"] = (d,)
        for n in ("linear_q", "linear_k", "linear_v", "linear_out"):
            s[p + "self_attn." + n + ".weight"] = (d, d)
            s[p + "self_attn." + n + ".bias"] = (d,)
        s[p + "self_attn.linear_pos.weight"] = (d, d)
        s[p + "self_attn.pos_bias_u"] = (h, d // h)
        s[p + "self_attn.pos_bias_v"] = (h, d // h)
        s[p + "conv.pointwise_conv1.weight"] = (2 * d, d, 1)
        s[p + "conv.pointwise_conv1.bias"] = (2 * d,)
        s[p + "conv.depthwise_conv.weight"] = (d, 1, K)
        s[p + "conv.depthwise_conv.bias"] = (d,)
        s[p + "conv.pointwise_conv2.weight"] = (d, d, 1)
        s[p + "conv.pointwise_conv2.bias"] = (d,)
    s["decoder.prediction.embed.weight"] = (cfg["vocab_size"] + 1, H)
    for l in range(cfg["pred_rnn_layers"]):
        p = "decoder.prediction.dec_rnn.lstm."
        s[p + "weight_ih_l%d" % l] = (4 * H, H)
        s[p + "weight_hh_l%d" % l] = (4 * H, H)
        s[p + "bias_ih_l%d" % l] = (4 * H,)
        s[p + "bias_hh_l%d" % l] = (4 * H,)
    n_out = cfg["vocab_size"] + 1 + len(cfg["tdt_durations"])
    s.update({"joint.enc.weight": (J, d), "joint.enc.bias": (J,), "joint.pred.weight": (J, H),
              "joint.pred.bias": (J,), joint_last + ".weight": (n_out, J),
              joint_last + ".bias": (n_out,)})
    return s


# buffers and bookkeeping entries of a NeMo state dict that carry no weights srkit needs
IGNORED = re.compile(r"(^preprocessor\.|num_batches_tracked$|\.pos_enc\.pe$|^encoder\.pos_enc\.)")


def load_state(path):
    try:
        import torch
    except ImportError:
        raise MissingPackage("reading model_weights.ckpt needs PyTorch, which this python (%s) "
                             "lacks: %s" % (sys.executable, VENV_HINT))
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a damaged or foreign file
        raise ConvertError("model_weights.ckpt: torch cannot load it (%s)" % e)
    if isinstance(sd, dict) and isinstance(sd.get("state_dict"), dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise ConvertError("model_weights.ckpt: expected a state dict, got %s" % type(sd).__name__)
    out = {}
    for k, v in sd.items():
        if not isinstance(v, torch.Tensor):
            raise ConvertError("model_weights.ckpt: entry %s is a %s, not a tensor"
                               % (k, type(v).__name__))
        if IGNORED.search(k):
            continue
        v = v.detach().cpu()
        if not v.is_floating_point():
            raise ConvertError("model_weights.ckpt: tensor %s has dtype %s; expected floating "
                               "point" % (k, v.dtype))
        out[k] = v.float().numpy() if v.dtype in (torch.bfloat16, torch.float64) else v.numpy()
    return out


def check_tensors(state, cfg, untie):
    """The tensors of the srkit layout, shapes and finiteness checked."""
    if not untie:
        # shared biases: NeMo keeps one [h, dk] pair on the encoder and hands it to every layer
        for n in ("pos_bias_u", "pos_bias_v"):
            k = "encoder." + n
            if k not in state:
                raise ConvertError("model_weights.ckpt: tensor %s is missing (untie_biases is "
                                   "false)" % k)
            v = state.pop(k)
            for i in range(cfg["n_layers"]):
                state["encoder.layers.%d.self_attn.%s" % (i, n)] = v
    joint_last = "joint.joint_net.2" if "joint.joint_net.2.weight" in state else "joint.joint_net.1"
    shapes = expected_shapes(cfg, joint_last)
    for name, shape in shapes.items():
        if name not in state:
            raise ConvertError("model_weights.ckpt: tensor %s is missing" % name)
        if tuple(state[name].shape) != shape:
            raise ConvertError("model_weights.ckpt: tensor %s has shape %s; the config implies %s"
                               % (name, list(state[name].shape), list(shape)))
    extra = sorted(set(state) - set(shapes))
    if extra:
        raise ConvertError("model_weights.ckpt: tensor %s is not part of the fastconformer_rnnt "
                           "layout (an architecture variant srkit does not implement)" % extra[0])
    for name in shapes:
        a = state[name]
        if not np.isfinite(a).all():
            i = int(np.flatnonzero(~np.isfinite(a.reshape(-1)))[0])
            raise ConvertError("model_weights.ckpt: tensor %s has a non-finite value at flat "
                               "index %d" % (name, i))
    return {k: state[k] for k in shapes}


# ---- tokenizer ---------------------------------------------------------------------------------

def _varint(b, o):
    v, shift = 0, 0
    while True:
        if o >= len(b):
            raise IndexError("truncated varint")
        c = b[o]
        o += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, o


def _fields(b):
    """(field number, wire type, value) of a protobuf message; length-delimited values as bytes."""
    o = 0
    while o < len(b):
        key, o = _varint(b, o)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, o = _varint(b, o)
        elif wt == 1:
            v, o = b[o:o + 8], o + 8
        elif wt == 2:
            n, o = _varint(b, o)
            v, o = b[o:o + n], o + n
        elif wt == 5:
            v, o = b[o:o + 4], o + 4
        else:
            raise IndexError("wire type %d" % wt)
        if o > len(b):
            raise IndexError("truncated field %d" % fn)
        yield fn, wt, v


SPM_CONTROL, SPM_UNKNOWN = 3, 2


def read_spm_model(path):
    """(pieces, scores, special) from a SentencePiece ModelProto file."""
    with open(path, "rb") as f:
        data = f.read()
    pieces, scores, special = [], [], []
    try:
        for fn, wt, v in _fields(data):
            if fn != 1 or wt != 2:
                continue
            piece, score, typ = None, 0.0, 1
            for fn2, wt2, v2 in _fields(v):
                if fn2 == 1 and wt2 == 2:
                    piece = v2.decode("utf-8")
                elif fn2 == 2 and wt2 == 5:
                    score = struct.unpack("<f", v2)[0]
                elif fn2 == 3 and wt2 == 0:
                    typ = v2
            if piece is None:
                raise IndexError("piece %d has no text" % len(pieces))
            pieces.append(piece)
            scores.append(score)
            special.append(1 if typ in (SPM_CONTROL, SPM_UNKNOWN) else 0)
    except (IndexError, UnicodeDecodeError) as e:
        raise ConvertError("%s: not a SentencePiece model (%s)" % (os.path.basename(path), e))
    if not pieces:
        raise ConvertError("%s: a SentencePiece model without pieces" % os.path.basename(path))
    return pieces, scores, special


def read_spm_vocab(path):
    """(pieces, scores, special) from a SentencePiece .vocab file (piece<TAB>score per line)."""
    pieces, scores, special = [], [], []
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            piece, _, score = line.partition("\t")
            pieces.append(piece)
            try:
                scores.append(float(score) if score else 0.0)
            except ValueError:
                raise ConvertError("%s: line %d: score %r is not a number"
                                   % (os.path.basename(path), len(pieces), score))
            special.append(1 if piece in ("<unk>", "<s>", "</s>", "<pad>") else 0)
    return pieces, scores, special


def tokenizer(c, files, vocab_size):
    """/tokenizer from the files the config's `tokenizer` section names (nemo:<file>)."""
    def named(key):
        v = c.get("tokenizer." + key, None)
        if not isinstance(v, str) or not v:
            return None
        base = os.path.basename(v[5:] if v.startswith("nemo:") else v)
        if base not in files:
            raise ConvertError("model_config.yaml: tokenizer.%s names %s, which the archive "
                               "lacks" % (key, base))
        return files[base]

    ttype = c.get("tokenizer.type", "bpe")
    if ttype != "bpe":
        unsupported("tokenizer.type", ttype, "reads SentencePiece (bpe) tokenizers")
    model = named("model_path")
    vocab = named("spe_tokenizer_vocab")
    if vocab is None:
        v = named("vocab_path")
        if v is not None and v.endswith(".vocab"):
            vocab = v
    if model is None and vocab is None:
        # archives written without a tokenizer section: the usual file names
        for base in sorted(files):
            if base.endswith("tokenizer.model"):
                model = files[base]
            elif base.endswith("tokenizer.vocab"):
                vocab = files[base]
    if model:
        pieces, scores, special = read_spm_model(model)
    elif vocab:
        pieces, scores, special = read_spm_vocab(vocab)
    else:
        raise ConvertError("model_config.yaml: tokenizer: no SentencePiece .model or .vocab "
                           "file (model_path / spe_tokenizer_vocab)")
    if len(pieces) != vocab_size:
        raise ConvertError("tokenizer: %d pieces, decoder.vocab_size is %d"
                           % (len(pieces), vocab_size))
    return {"type": "sentencepiece", "pieces": pieces, "scores": scores, "special": special}


# ---- driver ------------------------------------------------------------------------------------

def convert(args):
    if not os.path.isfile(args.src):
        raise ConvertError("%s: no such file" % args.src)
    with tempfile.TemporaryDirectory(prefix="srkit-nemo-") as tmp:
        files = extract(args.src, tmp)
        c = Cfg(load_yaml(files["model_config.yaml"]))
        cfg = frontend_config(c)
        enc, feat_in, untie = encoder_config(c)
        if feat_in != cfg["n_mels"]:
            raise ConvertError("model_config.yaml: encoder.feat_in %d differs from "
                               "preprocessor.features %d" % (feat_in, cfg["n_mels"]))
        cfg.update(enc)
        cfg.update(decoder_config(c))
        # srkit's offline long-audio options (not NeMo fields)
        cfg["local_attn_window"] = [128, 128]
        cfg["local_attn_threshold"] = 8192
        tok = tokenizer(c, files, cfg["vocab_size"])
        state = load_state(files["model_weights.ckpt"])
        tensors = check_tensors(state, cfg, untie)
    dtype = None if args.dtype == "keep" else args.dtype
    srkit_h5.write_model(
        args.out, "fastconformer_rnnt", cfg, tensors, dtype=dtype, tokenizer=tok,
        source="%s (NeMo .nemo), scripts/convert_nemo.py v%s"
               % (os.path.basename(args.src), CONVERTER_VERSION),
        license=args.license or "as the source model's licence", checksum=not args.no_checksum)
    return sum(int(np.prod(a.shape)) for a in tensors.values()), cfg


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Convert a NeMo cache-aware FastConformer-RNNT .nemo archive into an srkit "
                    "HDF5 model (arch fastconformer_rnnt).")
    ap.add_argument("src", help=".nemo archive")
    ap.add_argument("out", help="output .h5")
    ap.add_argument("--dtype", choices=("keep", "f32", "f16", "bf16", "int8"), default="keep",
                    help="storage type of matrices (keep: the checkpoint's)")
    ap.add_argument("--license", help="licence of the weights, stored in the file")
    ap.add_argument("--no-checksum", action="store_true",
                    help="write plain datasets without Fletcher-32 checksums (faster loads)")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        n, cfg = convert(args)
    except ConvertError as e:
        print("convert_nemo.py: error: %s: %s" % (args.src, e), file=sys.stderr)
        return 1
    except MissingPackage as e:
        print("convert_nemo.py: error: %s" % e, file=sys.stderr)
        return 2
    if not args.quiet:
        print("%s: fastconformer_rnnt %d x %d, %d heads, vocab %d, contexts %s, %.1fM parameters,"
              " dtype %s" % (args.out, cfg["n_layers"], cfg["d_model"], cfg["n_heads"],
                             cfg["vocab_size"], cfg["att_context_size"], n / 1e6, args.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
