#!/usr/bin/env python3
"""convert_voxtral.py — convert a Voxtral Realtime checkpoint into an srkit model file
(arch "voxtral_realtime", the layout models/voxtral reads: docs/voxtral.md).

Reads the two layouts the model is published in:
  * Mistral (mistralai/Voxtral-Mini-4B-Realtime-2602 as released): a folder with params.json,
    consolidated.safetensors and tekken.json. Tensor names are Mistral's (layers.N.attention.wq,
    mm_streams_embeddings.embedding_module.whisper_encoder..., ...). Mistral applies RoPE to
    interleaved pairs (x[2i], x[2i+1]); srkit, like transformers, rotates halves
    (x[i], x[i + hd/2]). Scores q.k are unchanged when the rows of wq and wk (and the q bias)
    are permuted within each head so that output 2i goes to i and 2i+1 to i + hd/2: per head,
    rows viewed as [hd/2, 2] are transposed to [2, hd/2]. That is the only numeric change.
  * Hugging Face transformers (VoxtralRealtimeForConditionalGeneration.save_pretrained): a folder
    with config.json, model.safetensors or model-XXXXX-of-YYYYY.safetensors shards (optional
    model.safetensors.index.json), tekken.json (the tokenizer transformers' MistralCommonBackend
    reads) and optional preprocessor_config.json (global_log_mel_max). Names are the state-dict
    keys srkit stores (older "language_model.model." / "audio_tower." prefixes are normalised);
    RoPE is already rotate-half.

safetensors is parsed here: an 8-byte little-endian header length, a JSON header (dtype, shape,
data_offsets per tensor), raw little-endian data. Tensors are read, converted and written one at a
time (seek + read of that tensor only), so memory holds at most one tensor and its converted
copy (the 131072 x 3072 embedding: 0.8 GB in bf16) — never the checkpoint. bf16 stays bf16
(uint16 bit patterns copied, no rounding); --dtype f32 widens exactly.

Tokenizer (tekken.json): ids 0 .. n_special-1 are the special tokens (special_tokens[].rank;
ranks without an entry become "<SPECIAL_id>"), then vocab[i] (base64 token_bytes) is id
n_special + i, up to config.default_vocab_size; the count must equal the model's vocab size.
bos / eos / pad ids are those of "<s>", "</s>" and "[STREAMING_PAD]".

Streaming constants: n_left_pad_tokens = tekken audio.streaming_n_left_pad_tokens (or
--left-pad-tokens), delay = audio.transcription_delay_ms / (1000 / frame_rate) for Mistral,
config.default_num_delay_tokens for Hugging Face (or --delay-tokens), n_right_pad_tokens =
delay + 1 + 10 (mistral_common's offline rule: the delayed text plus a 10-token buffer for the
last word; or --right-pad-tokens), flush_tokens 32 (--flush-tokens), delays 1..30 accepted
(80 ms .. 2.4 s).

Usage:
  convert_voxtral.py SRC_DIR OUT.h5 [--format auto|mistral|hf] [--dtype keep|f32|bf16]
                     [--left-pad-tokens N] [--right-pad-tokens N] [--delay-tokens N]
                     [--flush-tokens N] [--license TEXT] [--no-checksum] [-q]
Exit status 0 on success, 1 on a bad or unsupported input (one line on stderr naming the file and
the tensor or field at fault; no output file is left). Runs with Debian's python3 + numpy + h5py.
"""

import argparse
import base64
import json
import os
import re
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import srkit_h5  # noqa: E402


ARCH = "voxtral_realtime"
ADA_DIM = 32
ENC = "model.audio_tower."
DEC = "model.language_model."
MM = "mm_streams_embeddings.embedding_module."
WE = MM + "whisper_encoder."


class ConvertError(Exception):
    pass


# ---- safetensors ------------------------------------------------------------------------------

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


class SafeTensors:
    """Header of one .safetensors file; tensors are read on demand, one at a time."""

    def __init__(self, path):
        self.path = path
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise ConvertError("%s: truncated (no header length)" % path)
                hl = struct.unpack("<Q", head)[0]
                if hl > size - 8:
                    raise ConvertError("%s: header length %d exceeds the file" % (path, hl))
                raw = f.read(hl)
        except OSError as e:
            raise ConvertError("%s: cannot read it (%s)" % (path, e.strerror))
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ConvertError("%s: header is not JSON" % path)
        if not isinstance(header, dict):
            raise ConvertError("%s: header is not a JSON object" % path)
        self.base = 8 + hl
        self.info = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            try:
                dt, shape, (lo, hi) = e["dtype"], tuple(int(d) for d in e["shape"]), e["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise ConvertError("%s: tensor %s has a malformed header entry" % (path, name))
            if dt not in ST_DTYPES:
                raise ConvertError("%s: tensor %s has dtype %s (expected BF16, F16 or F32)"
                                   % (path, name, dt))
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if not 0 <= lo <= hi <= size - self.base or hi - lo != count * np.dtype(ST_DTYPES[dt]).itemsize:
                raise ConvertError("%s: tensor %s: data offsets [%d, %d) do not fit shape %s %s in "
                                   "the file" % (path, name, lo, hi, list(shape), dt))
            self.info[name] = (dt, shape, self.base + lo, count)

    def read(self, name):
        """(safetensors dtype, array): BF16 as uint16 bit patterns, F16/F32 as such."""
        dt, shape, off, count = self.info[name]
        with open(self.path, "rb") as f:
            f.seek(off)
            a = np.fromfile(f, dtype=np.dtype(ST_DTYPES[dt]).newbyteorder("<"), count=count)
        if a.size != count:
            raise ConvertError("%s: tensor %s: data truncated" % (self.path, name))
        return dt, a.astype(a.dtype.newbyteorder("="), copy=False).reshape(shape)


# ---- reading the two layouts ------------------------------------------------------------------

def read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ConvertError("%s: cannot read %s (%s)" % (path, what, e.strerror))
    except ValueError as e:
        raise ConvertError("%s: %s is not valid JSON (%s)" % (path, what, e))


def field(d, key, where, kind=float):
    """d[key] converted with kind; a missing or ill-typed value names where.key."""
    if not isinstance(d, dict) or key not in d or d[key] is None:
        raise ConvertError("%s: %s missing" % (where, key))
    try:
        return kind(d[key])
    except (TypeError, ValueError):
        raise ConvertError("%s: %s: %r is not a number" % (where, key, d[key]))


def rope_theta(d, where):
    """rope_theta, or rope_parameters.rope_theta (transformers >= 5)."""
    if isinstance(d.get("rope_parameters"), dict) and "rope_theta" in d["rope_parameters"]:
        return field(d["rope_parameters"], "rope_theta", where + ".rope_parameters")
    return field(d, "rope_theta", where)


def read_tekken(path):
    """tekken.json -> (tokenizer dict for srkit_h5, {token string: id}, audio section)."""
    tk = read_json(path, "the tokenizer")
    cfg = tk.get("config") if isinstance(tk, dict) else None
    if not isinstance(cfg, dict) or not isinstance(tk.get("vocab"), list):
        raise ConvertError("%s: not a tekken tokenizer (no config / vocab)" % path)
    specials = tk.get("special_tokens") or []
    n_special = int(cfg.get("default_num_special_tokens", len(specials)))
    n_vocab = int(cfg.get("default_vocab_size", n_special + len(tk["vocab"])))
    if n_special < 0 or n_vocab < n_special or n_vocab - n_special > len(tk["vocab"]):
        raise ConvertError("%s: config.default_vocab_size %d with %d special tokens needs %d "
                           "vocab entries, the file has %d" % (path, n_vocab, n_special,
                                                               n_vocab - n_special, len(tk["vocab"])))
    pieces = [("<SPECIAL_%d>" % i).encode() for i in range(n_special)]
    ids = {}
    for s in specials:
        try:
            r, text = int(s["rank"]), str(s["token_str"])
        except (KeyError, TypeError, ValueError):
            raise ConvertError("%s: special_tokens entry %r lacks rank / token_str" % (path, s))
        if not 0 <= r < n_special:
            raise ConvertError("%s: special token %s has rank %d outside 0..%d" % (path, text, r,
                                                                                   n_special - 1))
        pieces[r] = text.encode("utf-8")
        ids[text] = r
    for i, e in enumerate(tk["vocab"][:n_vocab - n_special]):
        try:
            pieces.append(base64.b64decode(e["token_bytes"], validate=True))
        except (KeyError, TypeError, ValueError):
            raise ConvertError("%s: vocab[%d] has no valid base64 token_bytes" % (path, i))
    tok = {"type": "tekken", "pieces": pieces, "special": [1] * n_special + [0] * (n_vocab - n_special)}
    audio = tk.get("audio") if isinstance(tk.get("audio"), dict) else {}
    return tok, ids, audio


def mistral_config(src, params):
    """srkit config fields from Mistral's params.json (without the streaming constants)."""
    p = "%s/params.json" % src
    try:
        wm = params["multimodal"]["whisper_model_args"]
        enc = wm["encoder_args"]
    except (KeyError, TypeError):
        raise ConvertError("%s: multimodal.whisper_model_args.encoder_args missing" % p)
    pe = p + ": multimodal.whisper_model_args.encoder_args"
    aud = enc.get("audio_encoding_args") or {}
    pa = pe + ".audio_encoding_args"
    ds = (wm.get("downsample_args") or {}).get("downsample_factor", enc.get("downsample_factor"))
    if params.get("ada_rms_norm_t_cond") is not True:
        raise ConvertError("%s: ada_rms_norm_t_cond is not true: not a Voxtral Realtime model" % p)
    if int(params.get("ada_rms_norm_t_cond_dim", ADA_DIM)) != ADA_DIM:
        raise ConvertError("%s: ada_rms_norm_t_cond_dim %s, srkit supports %d"
                           % (p, params.get("ada_rms_norm_t_cond_dim"), ADA_DIM))
    if params.get("tied_embeddings", True) is not True:
        raise ConvertError("%s: tied_embeddings false: srkit's decoder ties the output to the "
                           "token embedding" % p)
    if int(enc.get("n_kv_heads", enc.get("n_heads", 0))) != int(enc.get("n_heads", -1)):
        raise ConvertError("%s: n_kv_heads %s != n_heads %s: the encoder has no GQA"
                           % (pe, enc.get("n_kv_heads"), enc.get("n_heads")))
    if "sliding_window" not in params:
        raise ConvertError("%s: sliding_window missing (the decoder's attention window)" % p)
    c = {
        "sample_rate": field(aud, "sampling_rate", pa, int),
        "n_fft": field(aud, "window_size", pa, int), "hop_length": field(aud, "hop_length", pa, int),
        "n_mels": field(aud, "num_mel_bins", pa, int),
        "global_log_mel_max": field(aud, "global_log_mel_max", pa),
        "enc_dim": field(enc, "dim", pe, int), "enc_layers": field(enc, "n_layers", pe, int),
        "enc_heads": field(enc, "n_heads", pe, int), "enc_head_dim": field(enc, "head_dim", pe, int),
        "enc_ffn": field(enc, "hidden_dim", pe, int), "enc_rope_theta": rope_theta(enc, pe),
        "enc_norm_eps": field(enc, "norm_eps", pe), "enc_sliding_window": field(enc, "sliding_window", pe, int),
        "downsample_factor": int(ds) if ds is not None else 0,
        "dim": field(params, "dim", p, int), "n_layers": field(params, "n_layers", p, int),
        "n_heads": field(params, "n_heads", p, int), "n_kv_heads": field(params, "n_kv_heads", p, int),
        "head_dim": field(params, "head_dim", p, int), "ffn": field(params, "hidden_dim", p, int),
        "rope_theta": rope_theta(params, p), "norm_eps": field(params, "norm_eps", p),
        "vocab": field(params, "vocab_size", p, int),
        "sliding_window": field(params, "sliding_window", p, int),
    }
    return c


def hf_config(src):
    """srkit config fields from a transformers config.json (+ preprocessor_config.json)."""
    p = "%s/config.json" % src
    cfg = read_json(p, "the model config")
    a, t = cfg.get("audio_config"), cfg.get("text_config")
    if not isinstance(a, dict) or not isinstance(t, dict):
        raise ConvertError("%s: audio_config / text_config missing: not a VoxtralRealtime config" % p)
    pa, pt = p + ": audio_config", p + ": text_config"
    if not (cfg.get("tie_word_embeddings", True) and t.get("tie_word_embeddings", True)):
        raise ConvertError("%s: tie_word_embeddings false: srkit's decoder ties the output to the "
                           "token embedding" % p)
    if int(a.get("num_key_value_heads", a.get("num_attention_heads", 0))) != int(a.get("num_attention_heads", -1)):
        raise ConvertError("%s: num_key_value_heads differs from num_attention_heads: the encoder "
                           "has no GQA" % pa)
    mel_max = None
    pp = os.path.join(src, "preprocessor_config.json")
    if os.path.exists(pp):
        mel_max = read_json(pp, "the feature extractor config").get("global_log_mel_max")
    c = {
        "n_mels": field(a, "num_mel_bins", pa, int),
        "enc_dim": field(a, "hidden_size", pa, int), "enc_layers": field(a, "num_hidden_layers", pa, int),
        "enc_heads": field(a, "num_attention_heads", pa, int), "enc_head_dim": field(a, "head_dim", pa, int),
        "enc_ffn": field(a, "intermediate_size", pa, int), "enc_rope_theta": rope_theta(a, pa),
        "enc_norm_eps": field(a, "rms_norm_eps", pa), "enc_sliding_window": field(a, "sliding_window", pa, int),
        "downsample_factor": int(cfg.get("downsample_factor", 4)),
        "dim": field(t, "hidden_size", pt, int), "n_layers": field(t, "num_hidden_layers", pt, int),
        "n_heads": field(t, "num_attention_heads", pt, int),
        "n_kv_heads": field(t, "num_key_value_heads", pt, int),
        "head_dim": field(t, "head_dim", pt, int), "ffn": field(t, "intermediate_size", pt, int),
        "rope_theta": rope_theta(t, pt), "norm_eps": field(t, "rms_norm_eps", pt),
        "vocab": field(t, "vocab_size", pt, int),
        "sliding_window": field(t, "sliding_window", pt, int),
    }
    if mel_max is not None:
        c["global_log_mel_max"] = float(mel_max)
    return c, cfg


# ---- tensor names ----------------------------------------------------------------------------

def expected_shapes(c):
    """{srkit tensor name: shape} the backend loads (models/voxtral/vx_model.c)."""
    E, D, V, C = c["enc_dim"], c["dim"], c["vocab"], c["n_mels"]
    eq, dq, dk = c["enc_heads"] * c["enc_head_dim"], c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
    s = {ENC + "embedder.conv1.weight": (E, C, 3), ENC + "embedder.conv1.bias": (E,),
         ENC + "embedder.conv2.weight": (E, E, 3), ENC + "embedder.conv2.bias": (E,),
         ENC + "norm.weight": (E,),
         "model.multi_modal_projector.linear_1.weight": (D, c["downsample_factor"] * E),
         "model.multi_modal_projector.linear_2.weight": (D, D),
         DEC + "embed_tokens.weight": (V, D), DEC + "norm.weight": (D,)}
    for l in range(c["enc_layers"]):
        a, F = "%slayers.%d." % (ENC, l), c["enc_ffn"]
        s.update({a + "self_attn.q_proj.weight": (eq, E), a + "self_attn.q_proj.bias": (eq,),
                  a + "self_attn.k_proj.weight": (eq, E),
                  a + "self_attn.v_proj.weight": (eq, E), a + "self_attn.v_proj.bias": (eq,),
                  a + "self_attn.o_proj.weight": (E, eq), a + "self_attn.o_proj.bias": (E,),
                  a + "mlp.gate_proj.weight": (F, E), a + "mlp.up_proj.weight": (F, E),
                  a + "mlp.down_proj.weight": (E, F), a + "mlp.down_proj.bias": (E,),
                  a + "self_attn_layer_norm.weight": (E,), a + "final_layer_norm.weight": (E,)})
    for l in range(c["n_layers"]):
        a, F = "%slayers.%d." % (DEC, l), c["ffn"]
        s.update({a + "self_attn.q_proj.weight": (dq, D), a + "self_attn.k_proj.weight": (dk, D),
                  a + "self_attn.v_proj.weight": (dk, D), a + "self_attn.o_proj.weight": (D, dq),
                  a + "mlp.gate_proj.weight": (F, D), a + "mlp.up_proj.weight": (F, D),
                  a + "mlp.down_proj.weight": (D, F),
                  a + "ada_rms_norm.linear1.weight": (ADA_DIM, D),
                  a + "ada_rms_norm.linear2.weight": (D, ADA_DIM),
                  a + "input_layernorm.weight": (D,), a + "post_attention_layernorm.weight": (D,)})
    return s


# Mistral name patterns -> srkit names (regex, replacement)
_MISTRAL = [
    (r"^%sconv_layers\.0\.conv\.(weight|bias)$" % re.escape(WE), ENC + r"embedder.conv1.\1"),
    (r"^%sconv_layers\.1\.conv\.(weight|bias)$" % re.escape(WE), ENC + r"embedder.conv2.\1"),
    (r"^%stransformer\.norm\.weight$" % re.escape(WE), ENC + "norm.weight"),
    (r"^%stransformer\.layers\.(\d+)\.attention\.w([qkvo])\.(weight|bias)$" % re.escape(WE),
     ENC + r"layers.\1.self_attn.\2_proj.\3"),
    (r"^%stransformer\.layers\.(\d+)\.attention_norm\.weight$" % re.escape(WE),
     ENC + r"layers.\1.self_attn_layer_norm.weight"),
    (r"^%stransformer\.layers\.(\d+)\.ffn_norm\.weight$" % re.escape(WE),
     ENC + r"layers.\1.final_layer_norm.weight"),
    (r"^%stransformer\.layers\.(\d+)\.feed_forward\.w1\.(weight|bias)$" % re.escape(WE),
     ENC + r"layers.\1.mlp.gate_proj.\2"),
    (r"^%stransformer\.layers\.(\d+)\.feed_forward\.w2\.(weight|bias)$" % re.escape(WE),
     ENC + r"layers.\1.mlp.down_proj.\2"),
    (r"^%stransformer\.layers\.(\d+)\.feed_forward\.w3\.(weight|bias)$" % re.escape(WE),
     ENC + r"layers.\1.mlp.up_proj.\2"),
    (r"^%saudio_language_projection\.0\.weight$" % re.escape(MM), "model.multi_modal_projector.linear_1.weight"),
    (r"^%saudio_language_projection\.2\.weight$" % re.escape(MM), "model.multi_modal_projector.linear_2.weight"),
    (r"^(%s)?tok_embeddings\.weight$" % re.escape(MM), DEC + "embed_tokens.weight"),
    (r"^norm\.weight$", DEC + "norm.weight"),
    (r"^layers\.(\d+)\.attention\.w([qkvo])\.weight$", DEC + r"layers.\1.self_attn.\2_proj.weight"),
    (r"^layers\.(\d+)\.attention_norm\.weight$", DEC + r"layers.\1.input_layernorm.weight"),
    (r"^layers\.(\d+)\.ffn_norm\.weight$", DEC + r"layers.\1.post_attention_layernorm.weight"),
    (r"^layers\.(\d+)\.feed_forward\.w1\.weight$", DEC + r"layers.\1.mlp.gate_proj.weight"),
    (r"^layers\.(\d+)\.feed_forward\.w2\.weight$", DEC + r"layers.\1.mlp.down_proj.weight"),
    (r"^layers\.(\d+)\.feed_forward\.w3\.weight$", DEC + r"layers.\1.mlp.up_proj.weight"),
    (r"^layers\.(\d+)\.ada_rms_norm_t_cond\.0\.weight$", DEC + r"layers.\1.ada_rms_norm.linear1.weight"),
    (r"^layers\.(\d+)\.ada_rms_norm_t_cond\.2\.weight$", DEC + r"layers.\1.ada_rms_norm.linear2.weight"),
]
_MISTRAL = [(re.compile(p), r) for p, r in _MISTRAL]

# transformers prefixes of other versions -> the current state-dict keys
_HF = [(re.compile(r"^language_model\.model\."), DEC), (re.compile(r"^language_model\.lm_head\."), "lm_head."),
       (re.compile(r"^(audio_tower|multi_modal_projector|language_model)\."), r"model.\1.")]


def mistral_name(n):
    for pat, rep in _MISTRAL:
        out, k = pat.subn(rep, n)
        if k:
            return out
    return None


def hf_name(n):
    for pat, rep in _HF:
        out, k = pat.subn(rep, n)
        if k:
            return out
    return n


def rope_rows(a, heads):
    """Interleaved-pair rows -> rotate-half rows, per head: [H, hd/2, 2, ...] -> [H, 2, hd/2, ...]."""
    rest = a.shape[1:]
    hd = a.shape[0] // heads
    return np.ascontiguousarray(a.reshape((heads, hd // 2, 2) + rest).swapaxes(1, 2).reshape(a.shape))


# ---- writing, one tensor at a time -------------------------------------------------------------

def stored(dt, a, want):
    """(array, attrs) as srkit_h5 stores the tensor: bf16 as uint16 bits + dtype attr, else f32."""
    if want == "bf16":
        if dt == "BF16":
            return a, {"dtype": "bf16"}
        return srkit_h5.f32_to_bf16_bits(a.astype(np.float32)), {"dtype": "bf16"}
    if dt == "BF16":
        return srkit_h5.bf16_bits_to_f32(a), None
    return a.astype(np.float32), None


def write(out, config, plan, tok, dtype, source, license_, checksum, log):
    """Write the srkit file (srkit_h5's layout: docs/model-format.md) tensor by tensor from plan
    [(srkit name, reader() -> (dtype, array))] in sorted name order (srkit_h5.creating: temporary
    name, digest, rename). dtype "int8" (scripts/make_synthetic.py only): the matrices quantized
    per output row as scripts/recast_model.py does (q and its "<name>_scale" sibling; a reader
    returning ("I8Q", (q, scale)) has done it), the rest f32."""
    try:
        with srkit_h5.creating(out, ARCH, config, source, license_) as f:
            w = srkit_h5._group(f, "weights")
            for i, (name, reader) in enumerate(plan):
                dt, a = reader()
                if dt == "I8Q":  # quantized by the reader already: (q, scale)
                    items = [(name, a[0], None), (name + "_scale", a[1], None)]
                elif dtype == "int8" and a.ndim >= 2:
                    q, scale = srkit_h5.quantize_int8_rows(
                        srkit_h5.bf16_bits_to_f32(a) if dt == "BF16" else a.astype(np.float32))
                    items = [(name, q, None), (name + "_scale", scale, None)]
                else:
                    data, attrs = stored(dt, a, "f32" if dtype == "int8" else dtype)
                    items = [(name, data, attrs)]
                for nm, data, attrs in items:
                    srkit_h5._dataset(w, nm.replace(".", "/"), data, attrs, checksum)
                del a, items
                log("  [%d/%d] %s" % (i + 1, len(plan), name))
            srkit_h5.write_tokenizer(f, tok, checksum)
    except OSError as e:
        raise ConvertError("%s: cannot write it (%s)" % (out, e))


# ---- conversion -------------------------------------------------------------------------------

def detect(src, fmt):
    if not os.path.isdir(src):
        raise ConvertError("%s: not a folder (expected a Mistral or Hugging Face checkpoint folder)" % src)
    if fmt != "auto":
        return fmt
    if os.path.exists(os.path.join(src, "params.json")):
        return "mistral"
    if os.path.exists(os.path.join(src, "config.json")):
        return "hf"
    raise ConvertError("%s: neither params.json (Mistral layout) nor config.json (Hugging Face "
                       "layout)" % src)


def hf_files(src):
    idx = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(idx):
        wm = read_json(idx, "the shard index").get("weight_map")
        if not isinstance(wm, dict):
            raise ConvertError("%s: weight_map missing" % idx)
        names = sorted(set(wm.values()))
    else:
        names = sorted(n for n in os.listdir(src)
                       if n.endswith(".safetensors") and n.startswith("model"))
    if not names:
        raise ConvertError("%s: no model*.safetensors file" % src)
    return [os.path.join(src, n) for n in names]


def convert(args, log):
    src = args.src.rstrip("/") or "/"
    fmt = detect(src, args.format)
    tok_path = os.path.join(src, "tekken.json")
    tok, tok_ids, audio = read_tekken(tok_path)
    if fmt == "mistral":
        params = read_json(os.path.join(src, "params.json"), "the model parameters")
        c = mistral_config(src, params)
        files = [os.path.join(src, "consolidated.safetensors")]
    else:
        c, hfcfg = hf_config(src)
        enc_aud = (audio.get("audio_encoding_config") or audio.get("audio_encoding_args") or {})
        c.setdefault("global_log_mel_max", enc_aud.get("global_log_mel_max"))
        if c["global_log_mel_max"] is None:
            raise ConvertError("%s: global_log_mel_max in neither preprocessor_config.json nor "
                               "%s audio.audio_encoding_config" % (src, tok_path))
        c.update({"sample_rate": int(audio.get("sampling_rate", 16000)), "n_fft": 400, "hop_length": 160})
        files = hf_files(src)
    if c["downsample_factor"] != 4:
        raise ConvertError("%s: downsample factor %d, voxtral_realtime needs 4" % (src, c["downsample_factor"]))

    # tokenizer against the model
    if len(tok["pieces"]) != c["vocab"]:
        raise ConvertError("%s: %d tokens, the model's vocab size is %d (%s)"
                           % (tok_path, len(tok["pieces"]), c["vocab"],
                              "params.json vocab_size" if fmt == "mistral" else "config.json text_config.vocab_size"))
    for key, text in (("bos_id", "<s>"), ("eos_id", "</s>"), ("pad_id", "[STREAMING_PAD]")):
        if text not in tok_ids:
            raise ConvertError("%s: special token %s missing" % (tok_path, text))
        c[key] = tok_ids[text]

    # streaming constants
    def opt(v, default, what):
        if v is not None:
            return v
        if default is None:
            raise ConvertError("%s: %s missing (or pass it on the command line)" % (tok_path, what))
        return int(default)
    n_left = opt(args.left_pad_tokens, audio.get("streaming_n_left_pad_tokens"),
                 "audio.streaming_n_left_pad_tokens (--left-pad-tokens)")
    if fmt == "hf":
        delay_def = hfcfg.get("default_num_delay_tokens")
    else:
        ms, fr = audio.get("transcription_delay_ms"), audio.get("frame_rate")
        delay_def = None if ms is None or not fr else round(float(ms) * float(fr) / 1000.0)
    delay = opt(args.delay_tokens, delay_def, "audio.transcription_delay_ms / frame_rate (--delay-tokens)")
    if not 1 <= delay <= 30:
        raise ConvertError("%s: delay of %d tokens outside 1..30 (80 ms .. 2.4 s)" % (src, delay))
    n_right = args.right_pad_tokens if args.right_pad_tokens is not None else delay + 1 + 10
    c.update({"downsample_factor": 4, "ada_dim": ADA_DIM, "time_theta": 10000.0,
              "n_left_pad_tokens": n_left, "n_right_pad_tokens": n_right, "delay_tokens": delay,
              "min_delay_tokens": 1, "max_delay_tokens": 30, "flush_tokens": args.flush_tokens})

    # the tensors: every expected one exactly once, nothing unknown
    shapes = expected_shapes(c)
    found = {}  # srkit name -> (file, source name)
    for path in files:
        st = SafeTensors(path)
        for n in st.info:
            if fmt == "mistral":
                m = mistral_name(n)
                if m is None and n == "output.weight":
                    raise ConvertError("%s: output.weight present: srkit's decoder ties the output "
                                       "to the token embedding" % path)
            else:
                m = hf_name(n)
                if m == "lm_head.weight" or n.endswith("rotary_emb.inv_freq"):
                    continue  # tied to embed_tokens / recomputed from rope_theta
            if m is None or m not in shapes:
                raise ConvertError("%s: tensor %s is not part of a voxtral_realtime model "
                                   "(unknown name, or a bias the model does not have)" % (path, n))
            if m in found:
                raise ConvertError("%s: tensor %s appears twice (also %s in %s)"
                                   % (path, n, found[m][1], found[m][0].path))
            if st.info[n][1] != shapes[m]:
                raise ConvertError("%s: tensor %s: shape %s, expected %s from the config"
                                   % (path, n, list(st.info[n][1]), list(shapes[m])))
            found[m] = (st, n)
    missing = sorted(set(shapes) - set(found))
    if missing:
        ex = missing[0]
        raise ConvertError("%s: tensor %s missing%s" % (files[0], ex if fmt == "hf" else "%s (%s)" % (
            mistral_source_name(ex), ex), "" if len(missing) == 1 else " (and %d more)" % (len(missing) - 1)))

    kinds = {found[m][0].info[found[m][1]][0] for m in found}
    dtype = args.dtype
    if dtype == "keep":
        dtype = "bf16" if kinds == {"BF16"} else ("bf16" if "BF16" in kinds else "f32")
    c["dtype"] = dtype

    def reader(m):
        st, n = found[m]

        def rd():
            dt, a = st.read(n)
            if fmt == "mistral":  # interleaved RoPE pairs -> rotate-half
                if m.startswith(ENC) and (m.endswith("q_proj.weight") or m.endswith("q_proj.bias")
                                          or m.endswith("k_proj.weight")):
                    a = rope_rows(a, c["enc_heads"])
                elif m.startswith(DEC) and m.endswith(("q_proj.weight", "k_proj.weight")):
                    a = rope_rows(a, c["n_heads"] if "q_proj" in m else c["n_kv_heads"])
            return dt, a
        return rd

    plan = [(m, reader(m)) for m in sorted(shapes)]
    source = "%s (%s layout, scripts/convert_voxtral.py)" % (os.path.basename(os.path.abspath(src)), fmt)
    write(args.out, c, plan, tok, dtype, source, args.license or "", not args.no_checksum, log)
    n_params = sum(int(np.prod(s)) for s in shapes.values())
    return c, n_params, fmt


def mistral_source_name(m):
    """The Mistral checkpoint name of an srkit tensor (for messages)."""
    for n in mistral_candidates(m):
        if mistral_name(n) == m:
            return n
    return m


def mistral_candidates(m):
    """Candidate Mistral names for srkit name m (inverse of the table, for error messages)."""
    g = re.match(r"^model\.(audio_tower|language_model)\.layers\.(\d+)\.(.*)$", m)
    out = []
    if g:
        part, l, rest = g.groups()
        base = "%stransformer.layers.%s." % (WE, l) if part == "audio_tower" else "layers.%s." % l
        tails = {"self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk",
                 "self_attn.v_proj": "attention.wv", "self_attn.o_proj": "attention.wo",
                 "mlp.gate_proj": "feed_forward.w1", "mlp.down_proj": "feed_forward.w2",
                 "mlp.up_proj": "feed_forward.w3", "self_attn_layer_norm": "attention_norm",
                 "final_layer_norm": "ffn_norm", "input_layernorm": "attention_norm",
                 "post_attention_layernorm": "ffn_norm", "ada_rms_norm.linear1": "ada_rms_norm_t_cond.0",
                 "ada_rms_norm.linear2": "ada_rms_norm_t_cond.2"}
        for k, v in tails.items():
            if rest.startswith(k + "."):
                out.append(base + v + rest[len(k):])
    out += [WE + "conv_layers.0.conv.weight", WE + "conv_layers.0.conv.bias",
            WE + "conv_layers.1.conv.weight", WE + "conv_layers.1.conv.bias",
            WE + "transformer.norm.weight", MM + "audio_language_projection.0.weight",
            MM + "audio_language_projection.2.weight", MM + "tok_embeddings.weight", "norm.weight"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Convert a Voxtral Realtime checkpoint (Mistral params.json + "
                    "consolidated.safetensors + tekken.json, or Hugging Face config.json + "
                    "model*.safetensors + tekken.json) into an srkit HDF5 model.")
    ap.add_argument("src", help="checkpoint folder")
    ap.add_argument("out", help="output .h5")
    ap.add_argument("--format", choices=("auto", "mistral", "hf"), default="auto")
    ap.add_argument("--dtype", choices=("keep", "f32", "bf16"), default="keep",
                    help="storage type of every tensor (keep: bf16 for a bf16 checkpoint)")
    ap.add_argument("--left-pad-tokens", type=int, help="default: tekken.json audio."
                                                        "streaming_n_left_pad_tokens")
    ap.add_argument("--right-pad-tokens", type=int, help="default: delay + 11")
    ap.add_argument("--delay-tokens", type=int, help="default delay (80 ms tokens)")
    ap.add_argument("--flush-tokens", type=int, default=32,
                    help="text-only steps after the audio (default 32)")
    ap.add_argument("--license", help="licence of the weights, stored in the file")
    ap.add_argument("--no-checksum", action="store_true",
                    help="write plain datasets without Fletcher-32 checksums (faster loads)")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    def log(msg, end="\n"):
        if not args.quiet:
            print(msg, end=end, file=sys.stderr)
    try:
        for k in ("left_pad_tokens", "right_pad_tokens", "flush_tokens"):
            v = getattr(args, k)
            if v is not None and v < 0:
                raise ConvertError("--%s: %d is negative" % (k.replace("_", "-"), v))
        c, n, fmt = convert(args, log)
    except ConvertError as e:
        print("convert_voxtral.py: error: %s" % e, file=sys.stderr)
        return 1
    if not args.quiet:
        print("%s: voxtral_realtime from the %s layout, encoder %d x %d, decoder %d x %d, vocab %d, "
              "%.1fM parameters, %s" % (args.out, fmt, c["enc_layers"], c["enc_dim"], c["n_layers"],
                                        c["dim"], c["vocab"], n / 1e6, c["dtype"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
