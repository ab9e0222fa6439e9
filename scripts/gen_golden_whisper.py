#!/usr/bin/env python3
"""gen_golden_whisper.py — golden fixtures for the Whisper backend (tests/test_whisper.c).

Run with the reference venv (openai-whisper, torch, soundfile):
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/gen_golden_whisper.py [--no-real]

Writes under tests/fixtures/whisper/:
  rand.h5          a small random-init Whisper (d 32, 4 heads, 2 + 2 layers, n_audio_ctx 150 = 3 s
                   windows, n_text_ctx 64, a 259-token vocabulary: 100 GPT-2 pieces, the specials
                   and 151 timestamps) in srkit's layout, f16 matrices, no /frontend (the backend computes the same Slaney filterbank)
  rand_golden.h5   for it, computed by openai-whisper's modules on the same (f16-rounded) weights:
                   /audio (int16, the first 1 s of jfk.wav), /offline/{mel_rows, mel, encoder,
                   logits, tokens} for the audio zero-padded to the 3 s window, and
                   /causal/{mel, encoder} — the encoder over the unpadded audio's mel with the
                   block-causal mask of WhisperRT (tau 5 frames, tau0 10 frames), eq. 37
  micro*.h5        a tiny valid model (d 8, 1 + 1 layers, 1 s windows, no /frontend) and
                   malformed variants for the bad-input tests
  tiny_en_golden.h5  (when ${SRKIT_HOME}/models/whisper-tiny.en.h5 exists) openai-whisper on the
                   SAME weights read from that file: jfk encoder rows and first-step logits
                   (subsets), and greedy tokens of whisper.decode (without timestamps) for jfk,
                   each librispeech-sample utterance, 5 s of silence and both 30 s windows of a
                   40 s concatenation
Deterministic: fixed seeds; rerunning gives the same numbers.
"""

import base64
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402

import whisper  # noqa: E402
from whisper.model import ModelDimensions, Whisper  # noqa: E402

import h5py  # noqa: E402
import soundfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper")
SHARED = os.environ.get("SRKIT_SHARED", os.path.join(ROOT, "..", "shared", "data"))
HOME = os.environ.get("SRKIT_HOME", os.path.expanduser("~/.cache/srkit"))
REAL = os.path.join(HOME, "models", "whisper-tiny.en.h5")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def gpt2_pieces(n):
    """The first n GPT-2 ranks as byte-unicode strings."""
    m = bytes_to_unicode()
    out = []
    with open(os.path.join(SHARED, "whisper-assets", "gpt2.tiktoken")) as f:
        for line in f:
            tok, rank = line.split()
            if int(rank) >= n:
                break
            out.append("".join(m[b] for b in base64.b64decode(tok)))
    return out


def synthetic_vocab(n_text, n_audio_ctx):
    """Pieces, special flags and token ids: n_text GPT-2 pieces, then Whisper's specials and
    the n_audio_ctx + 1 timestamps of one window."""
    pieces = gpt2_pieces(n_text)
    names = ["eot", "sot", "translate", "transcribe", "sot_lm", "sot_prev", "no_speech",
             "no_timestamps"]
    spec = {k: n_text + i for i, k in enumerate(names)}
    pieces += ["<|endoftext|>", "<|startoftranscript|>", "<|translate|>", "<|transcribe|>",
               "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    spec["timestamp_begin"] = len(pieces)
    pieces += ["<|%.2f|>" % (i * 0.02) for i in range(n_audio_ctx + 1)]
    special = [0] * n_text + [1] * (len(pieces) - n_text)
    return pieces, special, spec


def make_config(dims, spec, suppress, begin):
    c = dict(dims.__dict__)
    c.update({"multilingual": False, "tokens": spec, "suppress_tokens": suppress,
              "begin_suppress_tokens": begin, "sample_rate": 16000, "n_fft": 400,
              "hop_length": 160, "chunk_length_s": dims.n_audio_ctx * 2 * 160 // 16000})
    return c


def random_model(dims, seed):
    """openai Whisper with deterministic N(0, s) weights, matrices rounded through f16 (what the
    fixture stores), so torch and srkit run the same numbers."""
    torch.manual_seed(seed)
    model = Whisper(dims)
    sd = model.state_dict()
    g = torch.Generator().manual_seed(seed)
    for k, v in sd.items():
        if k == "encoder.positional_embedding":
            new = v.clone()  # openai's sinusoids (rounded through f16 below like every matrix)
        elif k.endswith("ln.weight") or k.endswith("ln_post.weight"):
            new = 1 + 0.1 * torch.randn(v.shape, generator=g)
        elif v.ndim == 1:
            new = 0.05 * torch.randn(v.shape, generator=g)
        elif k == "decoder.token_embedding.weight":
            new = 0.5 * torch.randn(v.shape, generator=g)
        elif k == "decoder.positional_embedding":
            new = 0.1 * torch.randn(v.shape, generator=g)
        else:
            fan_in = int(np.prod(v.shape[1:]))
            new = torch.randn(v.shape, generator=g) / np.sqrt(fan_in)
        if new.ndim >= 2:
            new = new.half().float()
        sd[k] = new
    model.load_state_dict(sd)
    model.eval()
    return model


def numpy_state(model):
    return {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}


def greedy(model, enc, prompt, suppress, begin, eot, cap):
    """Greedy decoding with srkit's logit rules, recomputing the whole sequence each step."""
    toks, out, raw, margin = list(prompt), [], [], np.inf
    for i in range(cap):
        with torch.no_grad():
            lg = model.decoder(torch.tensor([toks]), enc)[0, -1].float()
        raw.append(lg.numpy().copy())
        lg = lg.clone()
        lg[suppress] = -np.inf
        if i == 0:
            lg[begin] = -np.inf
        top = torch.topk(lg, 2).values
        margin = min(margin, float(top[0] - top[1]))
        t = int(lg.argmax())
        if t == eot:
            break
        out.append(t)
        toks.append(t)
    return out, np.stack(raw), margin


def block_mask(n, tau, tau0):
    """eq. 37 with 0-based frames: frame i sees frame j iff block(j) <= block(i), blocks being
    [0, tau0) then tau frames each."""
    blk = np.array([0 if i < tau0 else 1 + (i - tau0) // tau for i in range(n)])
    m = np.where(blk[None, :] <= blk[:, None], 0.0, -np.inf).astype(np.float32)
    return torch.from_numpy(m)


def encoder_masked(model, mel, mask):
    """openai's encoder modules with an attention mask (SDPA off so the mask is applied)."""
    e = model.encoder
    with torch.no_grad(), whisper.model.disable_sdpa():
        x = torch.nn.functional.gelu(e.conv1(mel[None]))
        x = torch.nn.functional.gelu(e.conv2(x)).permute(0, 2, 1)
        x = x + e.positional_embedding[: x.shape[1]]
        for b in e.blocks:
            x = x + b.attn(b.attn_ln(x), mask=mask)[0]
            x = x + b.mlp(b.mlp_ln(x))
        return e.ln_post(x)[0].numpy()


def load_audio(path):
    a, sr = soundfile.read(path, dtype="float32")
    if a.ndim > 1:
        a = a.mean(axis=1)
    assert sr == 16000, path
    return a


def write_rand():
    dims = ModelDimensions(n_mels=80, n_audio_ctx=150, n_audio_state=32, n_audio_head=4,
                           n_audio_layer=2, n_vocab=0, n_text_ctx=64, n_text_state=32,
                           n_text_head=4, n_text_layer=2)
    pieces, special, spec = synthetic_vocab(100, dims.n_audio_ctx)
    dims.n_vocab = len(pieces)
    suppress = [1, 2, 7, 8, 9] + [spec[k] for k in ("sot", "translate", "transcribe", "sot_lm",
                                                     "sot_prev", "no_speech")]
    begin = [5, spec["eot"]]
    cfg = make_config(dims, spec, suppress, begin)
    model = random_model(dims, 1234)
    srkit_h5.write_model(os.path.join(OUT, "rand.h5"), "whisper", cfg, numpy_state(model),
                         dtype="f16", tokenizer={"type": "bytebpe", "pieces": pieces,
                                                 "special": special},
                         source="scripts/gen_golden_whisper.py: random init, seed 1234",
                         license="MIT", checksum=False)

    pcm16 = (load_audio(os.path.join(SHARED, "speech-samples", "jfk.wav"))[:16000] * 32768)
    pcm16 = np.clip(np.round(pcm16), -32768, 32767).astype(np.int16)
    audio = pcm16.astype(np.float32) / 32768
    win = dims.n_audio_ctx * 320
    mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(audio), win))
    with torch.no_grad():
        enc = model.encoder(mel[None])
    rules = sorted(set(suppress) | set(range(spec["eot"] + 1, dims.n_vocab)))
    toks, raw, margin = greedy(model, enc, [spec["sot"], spec["no_timestamps"]], rules, begin,
                               spec["eot"], dims.n_text_ctx // 2)
    print("rand: %d greedy tokens, min top-2 margin %.4f" % (len(toks), margin))

    tau, tau0 = 5, 10
    mel_c = whisper.log_mel_spectrogram(torch.from_numpy(audio))
    n_enc = (mel_c.shape[1] + 1) // 2
    enc_c = encoder_masked(model, mel_c, block_mask(n_enc, tau, tau0))

    rows = np.arange(0, mel.shape[1], 7)
    with h5py.File(os.path.join(OUT, "rand_golden.h5"), "w") as f:
        f["audio"] = pcm16
        g = f.create_group("offline")
        g["mel_rows"] = rows.astype(np.int64)
        g["mel"] = mel.numpy().T[rows].astype(np.float32)
        g["encoder"] = enc[0].numpy().astype(np.float32)
        g["logits"] = raw[:6].astype(np.float32)
        g["tokens"] = np.array(toks, dtype=np.int64)
        c = f.create_group("causal")
        c.attrs["tau"] = tau
        c.attrs["tau0"] = tau0
        c["mel"] = mel_c.numpy().T.astype(np.float32)
        c["encoder"] = enc_c.astype(np.float32)


def write_micro():
    """A tiny valid model and malformed variants (each names its culprit in the C test)."""
    # n_audio_ctx 50: a 1 s window (the config's chunk_length_s counts whole seconds)
    dims = ModelDimensions(n_mels=80, n_audio_ctx=50, n_audio_state=8, n_audio_head=2,
                           n_audio_layer=1, n_vocab=0, n_text_ctx=16, n_text_state=8,
                           n_text_head=2, n_text_layer=1)
    pieces, special, spec = synthetic_vocab(20, dims.n_audio_ctx)
    dims.n_vocab = len(pieces)
    cfg = make_config(dims, spec, [1, spec["sot"]], [5, spec["eot"]])
    sd = numpy_state(random_model(dims, 7))
    tok = {"type": "bytebpe", "pieces": pieces, "special": special}

    # no /frontend: the backend then computes the (identical) Slaney filterbank itself
    def w(name, c, tensors, tokenizer=tok):
        srkit_h5.write_model(os.path.join(OUT, name), "whisper", c, tensors, dtype="f16",
                             tokenizer=tokenizer, source="gen_golden_whisper.py",
                             license="MIT", checksum=False)

    w("micro.h5", cfg, sd)
    bad = dict(sd)
    del bad["decoder.blocks.0.cross_attn.key.weight"]
    w("micro_missing.h5", cfg, bad)
    bad = dict(sd)
    bad["encoder.conv1.weight"] = sd["encoder.conv1.weight"][:, :, :2].copy()
    w("micro_shape.h5", cfg, bad)
    bad = dict(sd)
    bad["decoder.token_embedding.weight"] = np.concatenate(
        [sd["decoder.token_embedding.weight"], np.zeros((1, 8), np.float32)])
    w("micro_embed.h5", cfg, bad)
    short = dict(tok, pieces=pieces[:-1], special=special[:-1])
    w("micro_tokenizer.h5", cfg, sd, short)
    c2 = dict(cfg, chunk_length_s=30)
    w("micro_window.h5", c2, sd)


def openai_model(path):
    """openai-whisper's Whisper module holding the weights of srkit file `path` (eval mode),
    with the file's attributes and config; also used by gen_golden_whisper_nospeech.py and
    bench_peers.py."""
    attrs, cfg, tensors = srkit_h5.read_model(path)
    dims = ModelDimensions(**{k: cfg[k] for k in ModelDimensions.__dataclass_fields__})
    model = Whisper(dims)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
    model.eval()
    return model, attrs, cfg


# Greedy decoding as srkit's offline aed_greedy: English, no timestamps, fp32, no fallback.
GREEDY = whisper.DecodingOptions(language="en", without_timestamps=True, fp16=False,
                                 temperature=0.0)


def write_real():
    if not os.path.exists(REAL):
        print("skip real goldens: %s absent" % REAL)
        return
    model, attrs, cfg = openai_model(REAL)
    opts = GREEDY

    def decode(audio):
        mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(audio)))
        r = whisper.decode(model, mel, opts)
        assert all(t < cfg["tokens"]["eot"] for t in r.tokens), r.tokens
        return mel, r

    f = h5py.File(os.path.join(OUT, "tiny_en_golden.h5"), "w")
    jfk = load_audio(os.path.join(SHARED, "speech-samples", "jfk.wav"))
    mel, r = decode(jfk)
    with torch.no_grad():
        enc = model.encoder(mel[None])
    rows = np.array(list(range(8)) + list(range(100, 1500, 100)), dtype=np.int64)
    g = f.create_group("jfk")
    g["encoder_rows"] = rows
    g["encoder"] = enc[0].numpy()[rows]
    prompt = [cfg["tokens"]["sot"], cfg["tokens"]["no_timestamps"]]
    steps = 4
    with torch.no_grad():
        lg = model.decoder(torch.tensor([prompt + list(r.tokens[:steps - 1])]), enc)[0].numpy()
    lg = lg[len(prompt) - 1:len(prompt) - 1 + steps]
    rng = np.random.default_rng(5)
    idx = set(rng.choice(dims.n_vocab, 1000, replace=False).tolist())
    for s in range(steps):
        idx |= set(np.argsort(-lg[s])[:100].tolist())
    idx = np.array(sorted(idx), dtype=np.int64)
    g["logit_index"] = idx
    g["logits"] = lg[:, idx].astype(np.float32)
    g["logsumexp"] = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
    g["tokens"] = np.array(r.tokens, dtype=np.int64)
    print("jfk:", r.text)

    t = f.create_group("tokens")
    d = os.path.join(SHARED, "librispeech-sample")
    names = sorted(n for n in os.listdir(d) if n.endswith((".flac", ".wav")))
    for n in names:
        _, r = decode(load_audio(os.path.join(d, n)))
        t[n] = np.array(r.tokens, dtype=np.int64)
        print(n, r.text)
    _, r = decode(np.zeros(5 * 16000, np.float32))
    f["silence_5s"] = np.array(r.tokens, dtype=np.int64)
    print("silence:", repr(r.text))

    # 40 s: jfk + the librispeech files in name order, cut at 40 s; two windows
    long = np.concatenate([jfk] + [load_audio(os.path.join(d, n)) for n in names])[:40 * 16000]
    lg = f.create_group("long40")
    lg.attrs["files"] = json.dumps(["speech-samples/jfk.wav"] +
                                   ["librispeech-sample/" + n for n in names])
    for w in range(2):
        _, r = decode(long[w * 480000:(w + 1) * 480000].copy())
        lg["window%d" % w] = np.array(r.tokens, dtype=np.int64)
        print("long window", w, r.text)
    f.attrs["source"] = "openai-whisper %s on %s (%s)" % (whisper.__version__, REAL,
                                                         attrs.get("source", ""))
    f.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(2)
    write_rand()
    write_micro()
    if "--no-real" not in sys.argv[1:]:
        write_real()


if __name__ == "__main__":
    main()
