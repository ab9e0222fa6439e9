#!/usr/bin/env python3
"""train_whisperrt.py — srkit's WhisperRT recipe: a causal LoRA fine-tune of a Whisper model
(WhisperRT / CarelessWhisper, Section V, Algorithm 3), the data it is trained on, and the merge
of the adapter into an srkit model file.

Subcommands (each prints progress; bad input exits 1 with one line naming the file or field,
a missing package exits 2):

  label  --model M.h5 --out labels.jsonl DIR...
      Pseudo-labels: openai-whisper's transcribe() with word timestamps (cross-attention DTW over
      the model's alignment heads), run on the srkit file's own weights, greedy, no fallback
      prompts. Refuses evaluation data (librispeech-sample IDs, test-* folders).
  check-times --model M.h5 --aligned DIR
      The same labelling on generated speech whose word times are exact (make data): prints how
      far the DTW word ends are from the true ones, which sets --label-margin-ms.
  synth  --labels labels.jsonl --out DIR
      Generated aligned speech for training: sentences of the pseudo-labels spoken word by word
      by espeak-ng voices that the evaluation set (scripts/aligned_speech.py) does not use, with
      the same exact-time construction; writes DIR/labels.jsonl in the label format.
  train  --model M.h5 --data A.jsonl[,B.jsonl] --run DIR [--steps N] [--seed S]
      The fine-tune. Model: the Whisper encoder / decoder written here in torch from the srkit
      file's weights (frozen, f16 values widened to f32) with LoRA pairs (A [r, in], B [out, r],
      scale alpha / r) on the encoder self-attention and the decoder self- and cross-attention
      (query, key, value, out). Per step: utterances, one chunk size tau (from {40, 100, 200,
      300} ms, or uniform on the 20 ms grid in 100 - 1000 ms) and the first block tau0 (600 ms,
      or 2 tau above 600 ms: srkit's default); the encoder runs once under the block-causal
      mask (frame i sees frame j iff block(j) <= block(i)) with the streaming log-mel (running
      maximum clamp); each sampled cut at a block boundary t gives one decoder sequence that
      cross-attends only to frames < t and is trained on the words whose end lies within the
      audio a stream has at that cut (t * 20 ms + 12.5 ms lookahead, minus the label margin),
      then EOT; the end of the utterance is always one of the cuts. AdamW, linear warm-up then
      cosine decay, gradient clipping, fixed seed; every random draw comes from (seed, step), so
      --resume continues exactly. Checkpoints DIR/ckpt.pt; DIR/adapter/ at the end.
  export --run DIR [--out ADAPTER_DIR] [--best]
      The adapter of the run's latest checkpoint, or of the one with the lowest held-out loss.
  confidence --model CAUSAL.h5 --ctm ALIGNED/alignments.ctm --utt ID
      The probability of each word's first token, given the right prefix, as more audio past
      the word's end arrives (the paper's observation that confidence grows with context).
  merge  BASE.h5 ADAPTER_DIR [ADAPTER_DIR...] OUT.h5
      Folds the adapters into the base file (numpy + h5py only; no torch): W += the mean over
      adapters of s * B @ A (several runs averaged: a "model soup"; the shipped model averages
      two), stored in the base tensor's dtype; config gains the adapter's "streaming" block (causal weights:
      srkit defaults to whisperrt + stable_greedy); provenance and licence recorded.
  selftest --model tiny.h5 --out DIR
      For tests/test_whisper.c: trains a random srkit Whisper model on generated tones for a few
      steps, checks the loss decreases, exports and merges the adapter.

Adapter format (ADAPTER_DIR): adapter_config.json (PEFT's keys: peft_type LORA, r, lora_alpha,
target_modules; plus "srkit": the streaming block, training settings, data hours, provenance)
and adapter_model.safetensors with f16 tensors named
base_model.model.<openai-whisper module>.lora_A.weight / .lora_B.weight, the layout
scripts/convert_whisper.py --lora also reads.
"""

import argparse
import json
import math
import os
import random
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import srkit_h5  # noqa: E402

RATE = 16000
HOP = 160
FRAME_MS = 20
LOOKAHEAD_S = 0.0125          # a block boundary t has audio up to t * 20 ms + 12.5 ms
FIXED_CHUNKS_MS = (40, 100, 200, 300)
FIRST_MS = 600
TARGETS = {"encoder": ("attn",), "decoder": ("attn", "cross_attn")}
PROJ = ("query", "key", "value", "out")


class Fail(Exception):
    pass


class Missing(Exception):
    pass


def need_torch():
    try:
        import torch
    except ImportError:
        raise Missing("torch is not installed (make venv-ref, or pip install torch)")
    return torch


def log(msg):
    print("train_whisperrt: " + msg, flush=True)


# ---- data ---------------------------------------------------------------------------------------

def read_audio(path):
    try:
        import soundfile as sf
    except ImportError:
        raise Missing("soundfile is not installed (pip install soundfile)")
    try:
        x, sr = sf.read(path, dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises its own types
        raise Fail("%s: cannot read audio (%s)" % (path, e))
    if sr != RATE:
        raise Fail("%s: sample rate %d, expected %d" % (path, sr, RATE))
    if x.shape[0] == 0:
        raise Fail("%s: no samples" % path)
    return x.mean(axis=1)


def eval_ids():
    """Utterance IDs of librispeech-sample (the evaluation set), never trained on."""
    p = os.path.join(HERE, "..", "..", "shared", "data", "librispeech-sample", "transcripts.txt")
    ids = set()
    if os.path.exists(p):
        with open(p, encoding="utf-8") as f:
            ids = {ln.split()[0] for ln in f if ln.strip()}
    return ids


def audio_files(dirs):
    out = []
    for d in dirs:
        if not os.path.isdir(d):
            raise Fail("%s: not a folder" % d)
        for root, _, files in os.walk(d):
            for fn in sorted(files):
                if fn.endswith((".flac", ".wav")):
                    out.append(os.path.join(root, fn))
    return sorted(out)


def read_labels(paths):
    items = []
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                for n, ln in enumerate(f, 1):
                    if not ln.strip():
                        continue
                    try:
                        it = json.loads(ln)
                        ok = isinstance(it["audio"], str) and isinstance(it["words"], list) and \
                            all(len(w) == 3 and isinstance(w[0], str) and
                                0 <= float(w[1]) <= float(w[2]) for w in it["words"])
                    except (ValueError, KeyError, TypeError):
                        ok = False
                    if not ok:
                        raise Fail("%s:%d: not a label line {audio, words: [[word, start, end]]}"
                                   % (p, n))
                    if not os.path.isabs(it["audio"]):
                        it["audio"] = os.path.normpath(os.path.join(os.path.dirname(p),
                                                                    it["audio"]))
                    items.append(it)
        except OSError as e:
            raise Fail("%s: %s" % (p, e.strerror))
    if not items:
        raise Fail("%s: no labelled utterances" % ",".join(paths))
    return items


def openai_whisper_model(path):
    torch = need_torch()
    try:
        import whisper
        from whisper.model import ModelDimensions, Whisper
    except ImportError:
        raise Missing("openai-whisper is not installed (make venv-ref)")
    _, cfg, tensors = srkit_h5.read_model(path)
    dims = ModelDimensions(**{k: cfg[k] for k in ModelDimensions.__dataclass_fields__})
    model = Whisper(dims)
    sd = {k: torch.from_numpy(v) for k, v in tensors.items()}
    model.load_state_dict(sd)
    model.eval()
    name = "tiny.en" if (not cfg["multilingual"] and dims.n_audio_state == 384 and
                         dims.n_audio_layer == 4) else None
    if name:
        model.set_alignment_heads(whisper._ALIGNMENT_HEADS[name])
    return whisper, model


def transcribe_words(whisper, model, x):
    r = whisper.transcribe(model, x, language="en", word_timestamps=True, temperature=0.0,
                           condition_on_previous_text=False, fp16=False, verbose=None)
    words = []
    for seg in r["segments"]:
        for w in seg.get("words", []):
            words.append([w["word"], round(float(w["start"]), 3), round(float(w["end"]), 3)])
    return r["text"], words


def cmd_label(a):
    whisper, model = openai_whisper_model(a.model)
    banned = eval_ids()
    files = audio_files(a.dirs)
    if not files:
        raise Fail("%s: no .flac / .wav files" % ", ".join(a.dirs))
    t0, n_out, secs = time.time(), 0, 0.0
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i, p in enumerate(files):
            uid = os.path.splitext(os.path.basename(p))[0]
            if uid in banned or "test" in os.path.basename(os.path.dirname(p)).lower():
                log("skip %s (evaluation data)" % p)
                continue
            x = read_audio(p)
            if len(x) > 30 * RATE:
                log("skip %s (%.1f s: longer than one 30 s window)" % (p, len(x) / RATE))
                continue
            text, words = transcribe_words(whisper, model, x)
            rel = os.path.relpath(os.path.abspath(p), os.path.dirname(os.path.abspath(a.out)))
            f.write(json.dumps({"id": uid, "audio": rel, "seconds": round(len(x) / RATE, 4),
                                "text": text, "words": words}) + "\n")
            n_out += 1
            secs += len(x) / RATE
            if (i + 1) % 10 == 0 or i + 1 == len(files):
                log("label %d/%d files, %.0f s audio, %.0f s elapsed"
                    % (i + 1, len(files), secs, time.time() - t0))
    os.replace(tmp, a.out)
    log("%s: %d utterances, %.2f h" % (a.out, n_out, secs / 3600))


def read_ctm(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for ln in f:
            p = ln.split()
            if len(p) >= 5:
                out.setdefault(p[0], []).append((p[4], float(p[2]), float(p[2]) + float(p[3])))
    return out


def norm_word(w):
    return "".join(c for c in w.lower() if c.isalnum())


def cmd_check_times(a):
    whisper, model = openai_whisper_model(a.model)
    ctm = read_ctm(os.path.join(a.aligned, "alignments.ctm"))
    files = {os.path.splitext(os.path.basename(p))[0]: p for p in audio_files([a.aligned])}
    d_end, d_start, n_ref, n_match = [], [], 0, 0
    for uid in sorted(ctm):
        if uid not in files:
            continue
        _, words = transcribe_words(whisper, model, read_audio(files[uid]))
        ref = ctm[uid]
        n_ref += len(ref)
        # match in order by normalized spelling (greedy: an LCS is not needed for the few
        # differences tiny.en makes on this set)
        j = 0
        for w, s, e in words:
            k = j
            while k < len(ref) and norm_word(ref[k][0]) != norm_word(w):
                k += 1
            if k < len(ref):
                d_end.append(e - ref[k][2])
                d_start.append(s - ref[k][1])
                n_match += 1
                j = k + 1
    if not d_end:
        raise Fail("%s: no word matched" % a.aligned)
    de, ds = np.array(d_end), np.array(d_start)
    q = lambda v, p: float(np.percentile(v, p))  # noqa: E731
    print("words: %d reference, %d matched" % (n_ref, n_match))
    print("end   error (DTW - exact) s: mean %+.3f, |mean| %.3f, p5 %+.3f, p50 %+.3f, p95 %+.3f, "
          "early by > 0.1 s: %.1f %%" % (de.mean(), np.abs(de).mean(), q(de, 5), q(de, 50),
                                          q(de, 95), 100.0 * (de < -0.1).mean()))
    print("start error (DTW - exact) s: mean %+.3f, |mean| %.3f, p5 %+.3f, p50 %+.3f, p95 %+.3f"
          % (ds.mean(), np.abs(ds).mean(), q(ds, 5), q(ds, 50), q(ds, 95)))


# ---- generated speech ---------------------------------------------------------------------------

# espeak-ng voice+variant, words per minute, pitch: none of them is one of aligned_speech.py's
# evaluation speakers (en-us+m3, en+f3, en-gb-scotland+m1, en-029+f2)
SYNTH_VOICES = [("en-us+m1", 160, 40), ("en+f1", 170, 65), ("en-gb+m2", 150, 50),
                ("en-us+f4", 165, 58), ("en+m4", 175, 35), ("en-gb-x-rp+f2", 155, 62),
                ("en-us+m6", 145, 45), ("en+f5", 180, 52)]


def cmd_synth(a):
    import aligned_speech as al
    import concurrent.futures
    items = read_labels([a.labels])
    rng = random.Random(a.seed)
    sents = []
    for it in items:
        # sentence-sized pieces of the pseudo-label: cut after . ? ! (or every 24 words)
        cur = []
        for w, _, _ in it["words"]:
            cur.append(w)
            if w.rstrip().endswith((".", "?", "!")) or len(cur) == 24:
                sents.append(cur)
                cur = []
        if cur:
            sents.append(cur)
    sents = [s for s in sents if 4 <= len(s) and all(norm_word(w) for w in s) and
             not any(c.isdigit() for w in s for c in w)]
    rng.shuffle(sents)
    sents = sents[:a.count]
    os.makedirs(a.out, exist_ok=True)
    jobs = {}
    plan = []
    for i, s in enumerate(sents):
        v = SYNTH_VOICES[i % len(SYNTH_VOICES)]
        plan.append((i, v, s))
        for w in s:
            jobs[(v, norm_word(w))] = None
    log("synth: %d sentences, %d distinct (voice, word) renderings" % (len(plan), len(jobs)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = {k: ex.submit(al.render_word, k[1], *k[0]) for k in jobs}
        for k, fu in futs.items():
            jobs[k] = fu.result()
    lines = []
    for i, v, s in plan:
        uid = "synth-%04d" % i
        pieces, marks, pos = [np.zeros(al.LEAD_IN)], [], al.LEAD_IN
        for k, w in enumerate(s):
            if k:
                g = al.pause_samples(uid, k)
                pieces.append(np.zeros(g))
                pos += g
            x = jobs[(v, norm_word(w))]
            pieces.append(x)
            marks.append([w, round(pos / RATE, 4), round((pos + len(x)) / RATE, 4)])
            pos += len(x)
        pieces.append(np.zeros(al.TAIL))
        x = np.concatenate(pieces)
        if len(x) > 30 * RATE:
            continue
        pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)
        al.write_wav(os.path.join(a.out, uid + ".wav"), pcm)
        lines.append(json.dumps({"id": uid, "audio": uid + ".wav", "seconds": len(x) / RATE,
                                 "voice": v[0], "text": "".join(s), "words": marks}))
    with open(os.path.join(a.out, "labels.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    secs = sum(json.loads(ln)["seconds"] for ln in lines)
    log("%s: %d utterances, %.2f h" % (a.out, len(lines), secs / 3600))


# ---- the model (torch) --------------------------------------------------------------------------

def build_torch(torch):
    nn, F = torch.nn, torch.nn.functional

    class Lin(nn.Module):
        """Frozen Linear with an optional LoRA pair."""

        def __init__(self, w, b, rank=0, alpha=1.0, dropout=0.0):
            super().__init__()
            self.register_buffer("w", w)
            self.register_buffer("b", b if b is not None else None)
            self.rank = rank
            if rank:
                self.lora_A = nn.Parameter(torch.empty(rank, w.shape[1]))
                self.lora_B = nn.Parameter(torch.zeros(w.shape[0], rank))
                nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
                self.scale = alpha / rank
                self.drop = nn.Dropout(dropout)

        def forward(self, x):
            y = F.linear(x, self.w, self.b)
            if self.rank:
                y = y + F.linear(F.linear(self.drop(x), self.lora_A), self.lora_B) * self.scale
            return y

    class Attn(nn.Module):
        def __init__(self, t, p, heads, lora):
            super().__init__()
            r, al, dr = lora
            self.h = heads
            self.q = Lin(t[p + ".query.weight"], t[p + ".query.bias"], r, al, dr)
            self.k = Lin(t[p + ".key.weight"], None, r, al, dr)
            self.v = Lin(t[p + ".value.weight"], t[p + ".value.bias"], r, al, dr)
            self.o = Lin(t[p + ".out.weight"], t[p + ".out.bias"], r, al, dr)

        def split(self, x):
            b, n, d = x.shape
            return x.view(b, n, self.h, d // self.h).transpose(1, 2)

        def forward(self, x, kv=None, mask=None, kv_cached=None):
            q = self.split(self.q(x))
            if kv_cached is not None:
                k, v = kv_cached
            else:
                src = x if kv is None else kv
                k, v = self.split(self.k(src)), self.split(self.v(src))
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            b, h, n, dh = o.shape
            return self.o(o.transpose(1, 2).reshape(b, n, h * dh))

        def kv(self, src):
            return self.split(self.k(src)), self.split(self.v(src))

    def ln(t, p, x):
        return F.layer_norm(x, (x.shape[-1],), t[p + ".weight"], t[p + ".bias"], 1e-5)

    class Model(nn.Module):
        def __init__(self, t, cfg, rank, alpha, dropout):
            super().__init__()
            self.t = t
            self.cfg = cfg
            la = (rank, alpha, dropout)
            self.enc = nn.ModuleList([Attn(t, "encoder.blocks.%d.attn" % i, cfg["n_audio_head"], la)
                                      for i in range(cfg["n_audio_layer"])])
            self.dec_self = nn.ModuleList([Attn(t, "decoder.blocks.%d.attn" % i,
                                                cfg["n_text_head"], la)
                                           for i in range(cfg["n_text_layer"])])
            self.dec_cross = nn.ModuleList([Attn(t, "decoder.blocks.%d.cross_attn" % i,
                                                 cfg["n_text_head"], la)
                                            for i in range(cfg["n_text_layer"])])

        def mlp(self, p, x):
            t = self.t
            h = F.gelu(F.linear(ln(t, p + ".mlp_ln", x), t[p + ".mlp.0.weight"],
                                t[p + ".mlp.0.bias"]))
            return F.linear(h, t[p + ".mlp.2.weight"], t[p + ".mlp.2.bias"])

        def encode(self, mel, mask):
            """mel [B, n_mels, Tm] -> [B, T, d]; mask [B, 1, T, T] bool (True: may attend)."""
            t = self.t
            x = F.gelu(F.conv1d(mel, t["encoder.conv1.weight"], t["encoder.conv1.bias"], padding=1))
            x = F.gelu(F.conv1d(x, t["encoder.conv2.weight"], t["encoder.conv2.bias"], stride=2,
                                padding=1))
            x = x.transpose(1, 2)
            x = x + t["encoder.positional_embedding"][:x.shape[1]]
            for i, at in enumerate(self.enc):
                p = "encoder.blocks.%d" % i
                x = x + at(ln(t, p + ".attn_ln", x), mask=mask)
                x = x + self.mlp(p, x)
            return ln(t, "encoder.ln_post", x)

        def decode(self, tokens, enc, enc_index, key_mask):
            """tokens [K, L]; enc [U, T, d]; enc_index [K] (which utterance); key_mask [K, T]
            bool. Returns logits [K, L, n_vocab]."""
            t = self.t
            L = tokens.shape[1]
            x = F.embedding(tokens, t["decoder.token_embedding.weight"]) + \
                t["decoder.positional_embedding"][:L]
            causal = torch.ones(L, L, dtype=torch.bool).tril()
            cm = key_mask[:, None, None, :]
            for i in range(len(self.dec_self)):
                p = "decoder.blocks.%d" % i
                x = x + self.dec_self[i](ln(t, p + ".attn_ln", x), mask=causal)
                k, v = self.dec_cross[i].kv(enc)
                kv = (k.index_select(0, enc_index), v.index_select(0, enc_index))
                x = x + self.dec_cross[i](ln(t, p + ".cross_attn_ln", x), mask=cm, kv_cached=kv)
                x = x + self.mlp(p, x)
            x = ln(t, "decoder.ln", x)
            return x @ t["decoder.token_embedding.weight"].T

        def lora_state(self):
            """{openai module name: (A, B)} of every LoRA pair."""
            out = {}
            for kind, mods in (("encoder.blocks.%d.attn", self.enc),
                               ("decoder.blocks.%d.attn", self.dec_self),
                               ("decoder.blocks.%d.cross_attn", self.dec_cross)):
                for i, at in enumerate(mods):
                    for nm, lin in (("query", at.q), ("key", at.k), ("value", at.v),
                                    ("out", at.o)):
                        out["%s.%s" % (kind % i, nm)] = (lin.lora_A, lin.lora_B)
            return out

    return Model


def mel_filters_of(path):
    import h5py
    with h5py.File(path, "r") as f:
        if "frontend/mel_filters" in f:
            return np.asarray(f["frontend/mel_filters"][()], dtype=np.float32)
        n_mels = json.loads(f.attrs["config"])["n_mels"]
    # what srkit computes when the file has none (docs/whisper.md)
    import convert_whisper
    return np.asarray(convert_whisper.slaney_mel_filters(n_mels), dtype=np.float32)


def streaming_log_mel(torch, x, filters):
    """srkit's streaming Whisper log-mel (docs/features.md): STFT 400 / hop 160, Hann, reflect
    centre padding, last frame dropped, Slaney mel, log10 clamped at 1e-10, then each frame t
    clamped at (max over frames 0..t) - 8, (v + 4) / 4. [n_mels, len(x) // 160]."""
    win = torch.hann_window(400)
    st = torch.stft(x, 400, HOP, window=win, return_complex=True)
    mag = st[..., :-1].abs() ** 2
    v = torch.clamp(filters @ mag, min=1e-10).log10()
    run = torch.cummax(v.max(dim=0).values, dim=0).values
    v = torch.maximum(v, run[None, :] - 8.0)
    return (v + 4.0) / 4.0


def block_mask(torch, T, tau, tau0):
    idx = torch.arange(T)
    blk = torch.where(idx < tau0, torch.zeros_like(idx), (idx - tau0) // tau + 1)
    return blk[None, :] <= blk[:, None]


class Tokenizer:
    """Byte-BPE encoder of the srkit file's own /tokenizer (GPT-2 pre-tokenizer + ranks)."""

    def __init__(self, path):
        import h5py
        import regex  # shipped with openai-whisper's tiktoken dependency chain
        with h5py.File(path, "r") as f:
            data = bytes(f["tokenizer/pieces_data"][()])
            off = f["tokenizer/pieces_offsets"][()]
            special = f["tokenizer/special"][()]
            ttype = f["tokenizer"].attrs.get("type", b"bytebpe")
        ttype = ttype.decode() if isinstance(ttype, bytes) else str(ttype)
        import convert_whisper
        self.ranks = {}
        for i in range(len(off) - 1):
            if special[i]:
                continue
            piece = data[off[i]:off[i + 1]]
            if ttype == "bytebpe":   # pieces are written with GPT-2's byte-to-unicode map
                piece = convert_whisper.bytes_from_piece(piece.decode("utf-8"))
                if piece is None:
                    continue
            self.ranks[piece] = i
        self.pat = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|"""
                                 r"""\s+(?!\S)|\s+""")

    def _bpe(self, b):
        parts = [b[i:i + 1] for i in range(len(b))]
        while len(parts) > 1:
            best, bi = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            parts[bi:bi + 2] = [parts[bi] + parts[bi + 1]]
        out = []
        for p in parts:
            if p not in self.ranks:
                raise Fail("tokenizer: byte sequence %r has no token" % p)
            out.append(self.ranks[p])
        return out

    def encode(self, text):
        ids = []
        for m in self.pat.findall(text):
            ids.extend(self._bpe(m.encode("utf-8")))
        return ids


# ---- training -----------------------------------------------------------------------------------

def sample_chunk(rng):
    if rng.random() < 0.5:
        tau_ms = int(rng.choice(FIXED_CHUNKS_MS))
    else:
        tau_ms = int(rng.integers(5, 51)) * FRAME_MS          # 100 .. 1000 ms
    first_ms = FIRST_MS if FIRST_MS >= tau_ms else 2 * tau_ms
    return tau_ms, first_ms


def prepare(items, tok, cfg, torch):
    """Audio and tokenized word lists, loaded once; utterances longer than the model's window
    (n_audio_ctx frames) or shorter than 0.5 s are left out."""
    out = []
    for it in items:
        x = read_audio(it["audio"])
        if len(x) > cfg["n_audio_ctx"] * 2 * HOP or len(x) < RATE // 2:
            continue
        ends = np.array([float(w[2]) for w in it["words"]], dtype=np.float64)
        toks = [tok.encode(w[0]) for w in it["words"]]
        out.append({"id": it.get("id", it["audio"]), "x": torch.from_numpy(x.copy()),
                    "ends": ends, "toks": toks})
    return out


# SpecAugment (Park et al. 2019, LibriSpeech "LD" policy scaled to Whisper's 10 ms frames):
# two frequency masks of up to 27 mel bins, two time masks of up to 40 frames each and at most
# 5 % of the utterance, filled with the utterance's mean log-mel.
SPECAUG_F, SPECAUG_NF, SPECAUG_T, SPECAUG_NT, SPECAUG_PT = 27, 2, 40, 2, 0.05


def spec_augment(m, rng):
    m = m.clone()
    fill = float(m.mean())
    n_mels, T = m.shape
    for _ in range(SPECAUG_NF):
        f = int(rng.integers(0, SPECAUG_F + 1))
        f0 = int(rng.integers(0, n_mels - f + 1))
        m[f0:f0 + f, :] = fill
    tmax = min(SPECAUG_T, int(SPECAUG_PT * T))
    for _ in range(SPECAUG_NT):
        t = int(rng.integers(0, tmax + 1))
        t0 = int(rng.integers(0, T - t + 1))
        m[:, t0:t0 + t] = fill
    return m


def make_batch(torch, utts, rng, cfg, filters, args, augment):
    """Inputs of one step: mel [U, n_mels, Tm], encoder mask, decoder tokens / targets."""
    tau_ms, first_ms = sample_chunk(rng)
    tau, tau0 = tau_ms // FRAME_MS, first_ms // FRAME_MS
    mels, lens, ends = [], [], []
    for u in utts:
        x, e = u["x"], u["ends"]
        if augment and rng.random() < args.speed_p:
            # speed perturbation (pitch changes too, as in Kaldi's): linear resampling by f,
            # word times divided by f
            f = float(rng.choice([0.9, 1.1]))
            n = max(2, int(round(len(x) / f)))
            x = torch.nn.functional.interpolate(x[None, None], size=n, mode="linear",
                                                align_corners=True)[0, 0]
            e = e / f
        ends.append(e)
        if augment:
            x = x * float(10 ** (rng.uniform(-6, 6) / 20))
            if rng.random() < args.noise_p:
                rms = float(x.pow(2).mean().sqrt()) + 1e-8
                snr = rng.uniform(10, 40)
                g = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
                x = x + torch.randn(x.shape, generator=g) * (rms / 10 ** (snr / 20))
        m = streaming_log_mel(torch, x, filters)
        if augment and rng.random() < args.specaug_p:
            m = spec_augment(m, rng)
        mels.append(m)
        lens.append((m.shape[1] + 1) // 2)
    Tm = max(m.shape[1] for m in mels)
    mel = torch.stack([torch.nn.functional.pad(m, (0, Tm - m.shape[1])) for m in mels])
    T = (Tm + 1) // 2
    bm = block_mask(torch, T, tau, tau0)
    keyok = torch.arange(T)[None, :] < torch.tensor(lens)[:, None]          # [U, T]
    enc_mask = (bm[None] & keyok[:, None, :])[:, None]                      # [U, 1, T, T]
    sot, nots, eot = cfg["tokens"]["sot"], cfg["tokens"]["no_timestamps"], cfg["tokens"]["eot"]
    seqs, idx, kmask = [], [], []
    margin = args.label_margin_ms / 1000.0
    for ui, u in enumerate(utts):
        n = lens[ui]
        bounds = list(range(tau0, n, tau))
        cuts = list(rng.choice(bounds, size=min(args.cuts - 1, len(bounds)), replace=False)) \
            if bounds else []
        cuts = sorted(int(c) for c in cuts) + [n]
        for c in cuts:
            if c == n:
                k = len(u["toks"])
            else:
                avail = c * FRAME_MS / 1000.0 + LOOKAHEAD_S - margin
                k = int(np.searchsorted(ends[ui], avail, side="right"))
                # words are in time order: a word counts only if every earlier word does
            text = [t for w in u["toks"][:k] for t in w]
            cap = cfg["n_text_ctx"] // 2 - 1
            text = text[:cap]
            seqs.append([sot, nots] + text + [eot])
            idx.append(ui)
            kmask.append(torch.arange(T) < c)
    L = max(len(s) for s in seqs) - 1
    inp = torch.full((len(seqs), L), eot, dtype=torch.long)
    tgt = torch.full((len(seqs), L), -100, dtype=torch.long)
    for i, s in enumerate(seqs):
        inp[i, :len(s) - 1] = torch.tensor(s[:-1])
        tgt[i, 1:len(s) - 1] = torch.tensor(s[2:])       # position 0 (SOT) predicts nothing
    return {"mel": mel, "enc_mask": enc_mask, "inp": inp, "tgt": tgt,
            "idx": torch.tensor(idx), "kmask": torch.stack(kmask), "tau_ms": tau_ms,
            "first_ms": first_ms}


def step_loss(torch, model, b):
    enc = model.encode(b["mel"], b["enc_mask"])
    logits = model.decode(b["inp"], enc, b["idx"], b["kmask"])
    tgt = b["tgt"]
    n = int((tgt != -100).sum())
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             tgt.reshape(-1), ignore_index=-100, reduction="sum")
    return loss / max(n, 1), n


def load_base(torch, path):
    attrs, cfg, tensors = srkit_h5.read_model(path)
    if attrs.get("arch") != "whisper":
        raise Fail("%s: arch %r, expected whisper" % (path, attrs.get("arch")))
    t = {k: torch.from_numpy(v) for k, v in tensors.items()}
    return cfg, t


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def save_atomic(torch, obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def train(a, items=None, quiet=False):
    torch = need_torch()
    torch.set_num_threads(a.threads)
    cfg, t = load_base(torch, a.model)
    Model = build_torch(torch)
    torch.manual_seed(a.seed)
    model = Model(t, cfg, a.rank, a.alpha, a.dropout)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=a.weight_decay)
    tok = Tokenizer(a.model)
    filters = torch.from_numpy(mel_filters_of(a.model))
    if items is None:
        items = read_labels(a.data.split(","))
    data = prepare(items, tok, cfg, torch)
    if not data:
        raise Fail("no usable utterance (0.5 - 30 s) in %s" % a.data)
    hours = sum(len(u["x"]) for u in data) / RATE / 3600
    # a fixed held-out set (every 25th utterance) for the validation loss
    val = data[::25] if len(data) >= 50 else []
    trainset = [u for i, u in enumerate(data) if not (len(data) >= 50 and i % 25 == 0)]
    os.makedirs(a.run, exist_ok=True)
    ck = os.path.join(a.run, "ckpt.pt")
    step, hist, best = 0, [], float("inf")
    bp = os.path.join(a.run, "best.pt")
    if a.resume and os.path.exists(bp):
        best = torch.load(bp, weights_only=False)["held_out"]
    if a.resume and os.path.exists(ck):
        st = torch.load(ck, weights_only=False)
        model.load_state_dict(st["model"], strict=False)
        opt.load_state_dict(st["opt"])
        step, hist = st["step"], st.get("hist", [])
        log("resumed %s at step %d" % (ck, step))
    if not quiet:
        log("%d trainable LoRA parameters (rank %d, alpha %g); %d train / %d held-out "
            "utterances, %.2f h; %d steps of %d utterances x %d cuts"
            % (sum(p.numel() for p in params), a.rank, a.alpha, len(trainset), len(val), hours,
               a.steps, a.batch, a.cuts))
    t0, run_loss, run_n = time.time(), 0.0, 0
    first_step = step
    while step < a.steps:
        rng = np.random.default_rng([a.seed, step])
        torch.manual_seed(a.seed * 1000003 + step)
        epoch_len = max(1, len(trainset) // a.batch)
        perm = np.random.default_rng([a.seed, step // epoch_len, 7]).permutation(len(trainset))
        j = (step % epoch_len) * a.batch
        utts = [trainset[perm[(j + i) % len(trainset)]] for i in range(a.batch)]
        b = make_batch(torch, utts, rng, cfg, filters, a, augment=True)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        model.train()
        loss, n = step_loss(torch, model, b)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        step += 1
        hist.append(float(loss.detach()))
        run_loss += float(loss.detach())
        run_n += 1
        if not quiet and (step % a.log_every == 0 or step == a.steps):
            el = time.time() - t0
            eta = el / (step - first_step) * (a.steps - step)
            log("step %d/%d  epoch %.2f  loss %.4f  lr %.2e  tau %d ms  %.2f s/step  eta %.0f s"
                % (step, a.steps, step / epoch_len, run_loss / run_n, lr_at(step - 1, a),
                   b["tau_ms"], el / (step - first_step), eta))
            run_loss, run_n = 0.0, 0
        if val and (step % a.val_every == 0 or step == a.steps):
            model.eval()
            with torch.no_grad():
                vl = []
                for i in range(0, len(val), a.batch):
                    vb = make_batch(torch, val[i:i + a.batch], np.random.default_rng([a.seed, i, 9]),
                                    cfg, filters, a, augment=False)
                    vl.append(float(step_loss(torch, model, vb)[0]))
            v = sum(vl) / len(vl)
            log("step %d  held-out loss %.4f" % (step, v))
            if v < best:
                best = v
                save_atomic(torch, {"model": {k: t.detach().clone() for k, t in
                                              model.state_dict().items() if "lora_" in k},
                                    "step": step, "held_out": v, "args": vars(a)},
                            os.path.join(a.run, "best.pt"))
        if step % a.save_every == 0 or step == a.steps:
            save_atomic(torch, {"model": {k: v for k, v in model.state_dict().items()
                                          if "lora_" in k},
                                "opt": opt.state_dict(), "step": step, "hist": hist,
                                "args": vars(a)}, ck)
    model.eval()
    export_adapter(model, a, hours, os.path.join(a.run, "adapter"))
    return hist


def write_safetensors(path, tensors, metadata):
    header, off, blobs = {}, 0, []
    for k in sorted(tensors):
        b = np.ascontiguousarray(tensors[k], dtype=np.float16).tobytes()
        header[k] = {"dtype": "F16", "shape": list(tensors[k].shape),
                     "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def export_adapter(model, a, hours, folder):
    os.makedirs(folder, exist_ok=True)
    tensors = {}
    for name, (A, B) in model.lora_state().items():
        tensors["base_model.model.%s.lora_A.weight" % name] = A.detach().numpy()
        tensors["base_model.model.%s.lora_B.weight" % name] = B.detach().numpy()
    write_safetensors(os.path.join(folder, "adapter_model.safetensors"), tensors,
                      {"format": "pt"})
    chunks = [300] + [c for c in FIXED_CHUNKS_MS if c != 300]
    conf = {
        "peft_type": "LORA", "r": a.rank, "lora_alpha": a.alpha, "lora_dropout": a.dropout,
        "target_modules": ["query", "key", "value", "out"], "bias": "none",
        "fan_in_fan_out": False, "use_rslora": False,
        "base_model_name_or_path": os.path.basename(a.model),
        "srkit": {
            "streaming": {"causal": True, "chunk_ms": chunks, "first_chunk_ms": FIRST_MS},
            "recipe": "scripts/train_whisperrt.py train",
            "training": {k: getattr(a, k, 0.0 if k in ("speed_p", "specaug_p") else None) for k in
                         ("seed", "steps", "batch", "cuts", "lr", "min_lr_frac", "warmup",
                          "weight_decay", "clip", "rank", "alpha", "dropout", "noise_p", "speed_p",
                          "specaug_p", "label_margin_ms", "threads")},
            "chunk_sampling": "p 0.5 from {40, 100, 200, 300} ms, else uniform 100-1000 ms "
                              "on the 20 ms grid; first block 600 ms (2 tau above 600 ms)",
            "data_hours": round(hours, 3),
            "checkpoint": getattr(a, "selected", "the last step"),
            "data": [os.path.basename(x) for x in a.data.split(",")],
        },
    }
    with open(os.path.join(folder, "adapter_config.json"), "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=1)
        f.write("\n")
    log("adapter written to %s (%d tensors)" % (folder, len(tensors)))


def cmd_export(a):
    """The adapter of a run's checkpoint (what train writes at its end), e.g. mid-run."""
    torch = need_torch()
    ck = os.path.join(a.run, "best.pt" if a.best else "ckpt.pt")
    if not os.path.exists(ck):
        raise Fail("%s: no checkpoint" % ck)
    st = torch.load(ck, weights_only=False)
    ta = argparse.Namespace(**st["args"])
    if a.best:
        ta.selected = "step %d of %d, lowest held-out loss %.4f" % (st["step"], ta.steps,
                                                                   st["held_out"])
    cfg, t = load_base(torch, ta.model)
    model = build_torch(torch)(t, cfg, ta.rank, ta.alpha, ta.dropout)
    model.load_state_dict(st["model"], strict=False)
    model.eval()
    items = read_labels(ta.data.split(","))
    lim = cfg["n_audio_ctx"] * 2 * HOP / RATE
    hours = sum(float(it.get("seconds", 0)) for it in items
                if 0.5 <= float(it.get("seconds", 0)) <= lim) / 3600
    export_adapter(model, ta, hours, a.out or os.path.join(a.run, "adapter"))
    log("exported step %d of %s" % (st["step"], a.run))


def word_probs(torch, model, cfg, tok, mel, words, tau, tau0, after):
    """[(word, end s, [p at each offset of `after` or None past the audio])]: p is the
    probability of the word's first token given the right prefix (summed over the lower-case,
    capitalized and upper-case spellings, whose first tokens differ), with the encoder's
    blocks up to the first boundary whose audio reaches the word's end + offset."""
    T = (mel.shape[1] + 1) // 2
    sot, nots = cfg["tokens"]["sot"], cfg["tokens"]["no_timestamps"]
    spell = [[" " + w.lower(), " " + w.capitalize(), " " + w.upper()] for w, _, _ in words]
    toks = [tok.encode(v[0]) for v in spell]
    firsts = [sorted({tok.encode(x)[0] for x in v}) for v in spell]
    enc = model.encode(mel[None], block_mask(torch, T, tau, tau0)[None, None])
    rows = []
    for k, (w, s0, e0) in enumerate(words):
        prefix = [sot, nots] + [i for tw in toks[:k] for i in tw]
        ps = []
        for ms in after:
            need = e0 + ms / 1000.0 - LOOKAHEAD_S
            c = max(tau0, tau0 + tau * max(0, math.ceil((need * 1000 / FRAME_MS - tau0) / tau)))
            if c > T:
                ps.append(None)
                continue
            lg = model.decode(torch.tensor([prefix]), enc, torch.tensor([0]),
                              (torch.arange(T) < c)[None])
            p = torch.softmax(lg[0, -1], dim=-1)[firsts[k]].sum()
            ps.append(float(p))
        rows.append((w, e0, ps))
    return rows


def cmd_confidence(a):
    """The paper's observation (Section VI): the probability of the right next token grows as
    the stream sees more of the word and the audio after it. Words with exact times (generated
    speech): for one utterance a per-word markdown table, then the mean over every utterance of
    the CTM."""
    torch = need_torch()
    torch.set_num_threads(a.threads)
    cfg, t = load_base(torch, a.model)
    model = build_torch(torch)(t, cfg, 0, 1.0, 0.0)
    model.eval()
    tok = Tokenizer(a.model)
    ctm = read_ctm(a.ctm)
    if a.utt not in ctm:
        raise Fail("%s: no words for %s" % (a.ctm, a.utt))
    files = {os.path.splitext(os.path.basename(p))[0]: p
             for p in audio_files([os.path.dirname(os.path.abspath(a.ctm))])}
    filt = torch.from_numpy(mel_filters_of(a.model))
    tau, tau0 = a.chunk_ms // FRAME_MS, a.first_chunk_ms // FRAME_MS
    after = [int(v) for v in a.after_ms.split(",")]
    head = "| word | ends s | " + " | ".join("%+d ms" % v for v in after) + " |"
    cols = [[] for _ in after]
    with torch.no_grad():
        for uid in [a.utt] + sorted(u for u in ctm if u != a.utt and u in files):
            mel = streaming_log_mel(torch, torch.from_numpy(read_audio(files[uid]).copy()), filt)
            rows = word_probs(torch, model, cfg, tok, mel, ctm[uid], tau, tau0, after)
            for _, _, ps in rows:
                for i, p in enumerate(ps):
                    if p is not None:
                        cols[i].append(p)
            if uid == a.utt:
                print("%s (%d ms chunks, first %d ms)\n" % (uid, a.chunk_ms, a.first_chunk_ms))
                print(head)
                print("|---|---|" + "---|" * len(after))
                for w, e0, ps in rows:
                    print("| %s | %.2f | %s |" % (w, e0, " | ".join(
                        "–" if p is None else "%.3f" % p for p in ps)))
    print("\nmean over %d words of %d utterances: %s" % (
        len(cols[0]), len([u for u in ctm if u in files]),
        ", ".join("%+d ms %.3f" % (v, sum(c) / len(c)) for v, c in zip(after, cols) if c)))


# ---- merge (numpy + h5py) -----------------------------------------------------------------------

def read_adapter(folder, cw):
    """(config, scale alpha / r, {module: [A, B]}, weights path) of one adapter folder."""
    cpath = os.path.join(folder, "adapter_config.json")
    wpath = os.path.join(folder, "adapter_model.safetensors")
    try:
        with open(cpath, encoding="utf-8") as f:
            conf = json.load(f)
    except OSError as e:
        raise Fail("%s: %s" % (cpath, e.strerror))
    except ValueError:
        raise Fail("%s: not JSON" % cpath)
    if conf.get("peft_type") != "LORA" or not isinstance(conf.get("r"), int) or conf["r"] < 1:
        raise Fail("%s: peft_type LORA and a positive integer r expected" % cpath)
    if not isinstance(conf.get("srkit", {}).get("streaming"), dict):
        raise Fail("%s: srkit.streaming missing (the streaming block for the merged file)" % cpath)
    try:
        ad = cw.read_safetensors(wpath)
    except cw.ConvertError as e:
        raise Fail(str(e))
    pairs = {}
    for k, v in ad.items():
        for suf, slot in ((".lora_A.weight", 0), (".lora_B.weight", 1)):
            if k.startswith("base_model.model.") and k.endswith(suf):
                pairs.setdefault(k[len("base_model.model."):-len(suf)], [None, None])[slot] = v
                break
        else:
            raise Fail("%s: tensor %s is not base_model.model.<module>.lora_A/B.weight"
                       % (wpath, k))
    for mod, (A, B) in pairs.items():
        if A is None or B is None:
            raise Fail("%s: %s has only one of lora_A / lora_B" % (wpath, mod))
    return conf, float(conf.get("lora_alpha", conf["r"])) / conf["r"], pairs, wpath


def merge(base, adapters, out):
    """Fold the mean of the adapters' deltas, (1/n) sum_i (alpha_i / r_i) B_i A_i (a "model
    soup" of runs from the same base when n > 1), into the base weights."""
    import h5py
    import convert_whisper as cw  # its safetensors reader and sha256, numpy + h5py only
    if isinstance(adapters, str):
        adapters = [adapters]
    ads = [read_adapter(d, cw) for d in adapters]
    st = ads[0][0]["srkit"]["streaming"]
    for (conf, _, pairs, wpath), d in zip(ads[1:], adapters[1:]):
        if conf["srkit"]["streaming"] != st or sorted(pairs) != sorted(ads[0][2]):
            raise Fail("%s: its streaming block or modules differ from %s's" % (d, adapters[0]))
    n = len(ads)
    with h5py.File(base, "r") as src:
        cfg = json.loads(src.attrs["config"])
        if src.attrs["arch"] not in ("whisper", b"whisper"):
            raise Fail("%s: not a whisper model" % base)
        if "streaming" in cfg:
            raise Fail("%s: already has config.streaming (merge into vanilla weights)" % base)
        merged = {}
        for mod in sorted(ads[0][2]):
            dname = "weights/" + mod.replace(".", "/") + "/weight"
            if dname not in src:
                raise Fail("%s: adapter module %s has no base tensor %s in %s"
                           % (ads[0][3], mod, dname, base))
            w = src[dname][()]
            m = w.astype(np.float64)
            for _, scale, pairs, wpath in ads:
                A, B = pairs[mod]
                if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[1] or \
                        (B.shape[0], A.shape[1]) != w.shape:
                    raise Fail("%s: %s: A %s, B %s do not fit %s %s" % (
                        wpath, mod, list(A.shape), list(B.shape), dname, list(w.shape)))
                m += scale / n * (B.astype(np.float64) @ A.astype(np.float64))
            merged[dname] = m.astype(w.dtype)
        shas = [cw.sha256_file(a[3]) for a in ads]
        lora = {"pairs_merged": len(merged), "rank": sum(a[0]["r"] for a in ads),
                "source": "srkit scripts/train_whisperrt.py",
                "adapters": [{"sha256": h, "rank": a[0]["r"], "scale": a[1], "weight": 1.0 / n}
                             for h, a in zip(shas, ads)]}
        if "data_hours" in ads[0][0]["srkit"]:
            lora["data_hours"] = ads[0][0]["srkit"]["data_hours"]
        cfg["streaming"] = dict(st, lora=lora)
        get = lambda k: (src.attrs[k].decode() if isinstance(src.attrs[k], bytes)  # noqa: E731
                         else str(src.attrs[k]))
        source = "%s; + srkit WhisperRT causal LoRA (%s), merged by scripts/train_whisperrt.py " \
                 "merge" % (get("source"), ", ".join("sha256 " + h for h in shas))
        lic = get("license") + "; LoRA adapter: trained on LibriSpeech train-clean-100 " \
            "(CC BY 4.0) pseudo-labels and espeak-ng speech"
        with srkit_h5.creating(out, "whisper", cfg, source, lic) as dst:
            def copy(name, obj):
                if isinstance(obj, h5py.Group):
                    g = srkit_h5._group(dst, name)
                    for k, v in obj.attrs.items():
                        if isinstance(v, (bytes, np.bytes_)):
                            v = v.decode("utf-8")
                        srkit_h5.set_attr(g, k, v)
                    return
                parent = srkit_h5._group(dst, os.path.dirname(name)) if "/" in name else dst
                if name in merged:
                    srkit_h5._dataset(parent, os.path.basename(name), merged[name],
                                      dict(obj.attrs), checksum=obj.fletcher32)
                else:
                    src.copy(obj, parent, os.path.basename(name))
            src.visititems(copy)
    log("%s: %d LoRA pairs of %d adapter(s) merged into %s" % (out, len(merged), n, base))
    return len(merged)


def cmd_merge(a):
    merge(a.base, a.adapters, a.out)


# ---- selftest -----------------------------------------------------------------------------------

def cmd_selftest(a):
    """A few steps on a random srkit model with tones as 'words': the loss must fall."""
    os.makedirs(a.out, exist_ok=True)
    import wave
    items = []
    for i in range(4):
        n = int(RATE * (1.5 + 0.5 * i))
        tt = np.arange(n) / RATE
        x = 0.3 * np.sin(2 * np.pi * (200 + 100 * i) * tt) * (np.sin(2 * np.pi * 2 * tt) > 0)
        p = os.path.join(a.out, "u%d.wav" % i)
        with wave.open(p, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes((x * 32767).astype("<i2").tobytes())
        # no leading spaces: the random model's vocabulary has no space byte
        words = [["hello", 0.25, 0.5], ["world", 0.75, 1.0], ["again", 1.25, 1.4]]
        items.append({"id": "u%d" % i, "audio": p, "words": words})
    ns = argparse.Namespace(model=a.model, data="selftest", run=os.path.join(a.out, "run"),
                            steps=a.steps, seed=1, batch=2, cuts=3, lr=3e-2, min_lr_frac=1.0,
                            warmup=1, weight_decay=0.0, clip=10.0, rank=4, alpha=8.0,
                            dropout=0.0, noise_p=0.0, speed_p=0.0, specaug_p=0.0, label_margin_ms=0, threads=1,
                            resume=False, log_every=1, val_every=10 ** 9, save_every=10 ** 9)
    hist = train(ns, items=items, quiet=True)
    first, last = hist[0], sum(hist[-2:]) / 2
    print("selftest: loss %.4f -> %.4f over %d steps" % (first, last, len(hist)))
    if not (last < first * 0.9):
        raise Fail("selftest: the loss did not decrease (%.4f -> %.4f)" % (first, last))
    out = os.path.join(a.out, "merged.h5")
    merge(a.model, os.path.join(ns.run, "adapter"), out)
    print("selftest: merged %s" % out)


# ---- driver -------------------------------------------------------------------------------------

def add_train_args(p):
    p.add_argument("--model", required=True, help="vanilla srkit Whisper file (the base)")
    p.add_argument("--data", required=True, help="label .jsonl files, comma-separated")
    p.add_argument("--run", required=True, help="run folder (checkpoint, adapter)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--seed", type=int, default=20261125)
    p.add_argument("--batch", type=int, default=2, help="utterances per step")
    p.add_argument("--cuts", type=int, default=4, help="decoder cuts per utterance (incl. end)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--noise-p", type=float, default=0.3, help="probability of added noise")
    p.add_argument("--speed-p", type=float, default=0.0,
                   help="probability of speed perturbation by 0.9 or 1.1")
    p.add_argument("--specaug-p", type=float, default=0.0,
                   help="probability of SpecAugment masks (2 frequency, 2 time) per utterance")
    p.add_argument("--label-margin-ms", type=int, default=0,
                   help="a word counts at a cut only if it ends this long before the audio end")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--val-every", type=int, default=250)
    p.add_argument("--save-every", type=int, default=100)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("label")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("dirs", nargs="+")
    p = sub.add_parser("check-times")
    p.add_argument("--model", required=True)
    p.add_argument("--aligned", required=True)
    p = sub.add_parser("synth")
    p.add_argument("--labels", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p = sub.add_parser("train")
    add_train_args(p)
    p = sub.add_parser("export")
    p.add_argument("--run", required=True)
    p.add_argument("--out", help="adapter folder (default RUN/adapter)")
    p.add_argument("--best", action="store_true",
                   help="the checkpoint with the lowest held-out loss (RUN/best.pt)")
    p = sub.add_parser("confidence")
    p.add_argument("--model", required=True, help="merged causal model (.h5)")
    p.add_argument("--ctm", required=True, help="exact word times (alignments.ctm; the audio "
                                                "files are found below its folder)")
    p.add_argument("--utt", required=True)
    p.add_argument("--chunk-ms", type=int, default=300)
    p.add_argument("--first-chunk-ms", type=int, default=FIRST_MS)
    p.add_argument("--after-ms", default="-300,-150,0,150,300,600",
                   help="audio past each word's end at which to read the probability")
    p.add_argument("--threads", type=int, default=2)
    p = sub.add_parser("merge")
    p.add_argument("base")
    p.add_argument("adapters", nargs="+", metavar="ADAPTER_DIR")
    p.add_argument("out")
    p = sub.add_parser("selftest")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    a = ap.parse_args(argv)
    try:
        {"label": cmd_label, "check-times": cmd_check_times, "synth": cmd_synth,
         "train": train, "export": cmd_export, "confidence": cmd_confidence,
         "merge": cmd_merge, "selftest": cmd_selftest}[a.cmd](a)
    except Fail as e:
        print("train_whisperrt.py: error: %s" % e, file=sys.stderr)
        return 1
    except Missing as e:
        print("train_whisperrt.py: error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
