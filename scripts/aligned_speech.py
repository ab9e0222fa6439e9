#!/usr/bin/python3
"""aligned_speech.py — synthesize srkit's built-in aligned speech set (called by
make_aligned_speech.sh, which handles the stamp, the temporary folder and FLAC encoding).

Algorithm: every sentence of aligned_speech.txt is spoken WORD BY WORD with espeak-ng, one
process per distinct (speaker, word), so no two words share any audio. Each word's 22050 Hz
output is trimmed to the span where |x| exceeds TRIM_DB below the word's peak (keeping a margin
for the filter), resampled to 16 kHz with a Kaiser-windowed sinc low-pass interpolator (cut-off
7.4 kHz), trimmed again by the same rule at 16 kHz, and placed into an all-zero utterance after a
lead-in silence, with a pause of 120-250 ms (chosen from a SHA-256 of the utterance id and word
index) between words. A word therefore occupies exactly [start, end) samples of the utterance and
everything outside the words is digital silence, which makes the word times in alignments.ctm
exact to the sample. Nothing random or time-dependent enters, so the output is byte-identical
from run to run on the same tool versions.

Writes, under --out: <spk>/<chapter>/<spk>-<chapter>-<utt4>.wav (16-bit PCM, later FLAC-encoded
by the shell script), <spk>/<chapter>/<spk>-<chapter>.trans.txt, alignments.ctm (`utt 1 start
dur WORD`, seconds with 7 decimals, which represent multiples of 1/16000 s exactly) and
utterances.tsv. Runs with Debian's python3 and python3-numpy only.
"""
import argparse
import concurrent.futures
import hashlib
import os
import re
import subprocess
import sys
import wave

import numpy as np

RATE = 16000
ESPEAK_RATE = 22050
LEAD_IN = 4800            # samples of silence before the first word (0.3 s)
TAIL = 4800               # samples of silence after the last word (0.3 s)
PAUSE_MS = (120, 250)     # inclusive range of the pause between words
TRIM_DB = -40.0           # a word spans the samples within 40 dB of its peak
CUTOFF_HZ = 7400.0        # resampler pass band edge (below the 8 kHz Nyquist of 16 kHz)
HALF_TAPS = 48            # resampler half-length in input samples
KAISER_BETA = 8.6         # ~ 85 dB stop-band attenuation
MIN_S, MAX_S = 3.0, 15.0  # allowed utterance duration

# The "speakers": espeak-ng voice+variant, words per minute, pitch (0-99). Chapter k of the text
# is read by speaker k. IDs follow LibriSpeech's <speaker>/<chapter> numbering.
SPEAKERS = [
    ("9001", "101", "en-us+m3", 155, 45),
    ("9002", "102", "en+f3", 165, 60),
    ("9003", "103", "en-gb-scotland+m1", 145, 38),
    ("9004", "104", "en-029+f2", 175, 55),
]


def read_chapters(path):
    """Sentences grouped into chapters (blank-line separated; '#' lines are comments)."""
    chapters, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                continue
            if not line:
                if cur:
                    chapters.append(cur)
                    cur = []
                continue
            cur.append(line)
    if cur:
        chapters.append(cur)
    return chapters


def words_of(sentence):
    """Transcript words: punctuation dropped, apostrophes inside words kept, upper case."""
    words = []
    for tok in sentence.split():
        w = re.sub(r"[^A-Za-z']", "", tok).strip("'")
        if not w:
            continue
        if not re.fullmatch(r"[A-Za-z]+('[A-Za-z]+)*", w):
            sys.exit(f"aligned_speech.py: cannot speak token {tok!r} of: {sentence}")
        words.append(w.upper())
    return words


def espeak(word, voice, wpm, pitch):
    """One word from espeak-ng as float64 samples at ESPEAK_RATE."""
    cmd = ["espeak-ng", "-v", voice, "-s", str(wpm), "-p", str(pitch), "--stdout", word.lower()]
    r = subprocess.run(cmd, capture_output=True, check=False)
    if r.returncode != 0:
        sys.exit(f"aligned_speech.py: {' '.join(cmd)} failed: {r.stderr.decode(errors='replace')}")
    b = r.stdout
    # --stdout writes a streaming header (sizes 0x7fff....), so find the data chunk by hand.
    if b[:4] != b"RIFF" or b[8:12] != b"WAVE":
        sys.exit(f"aligned_speech.py: espeak-ng gave no WAV for {word!r}")
    pos, data = 12, None
    while pos + 8 <= len(b):
        cid, size = b[pos:pos + 4], int.from_bytes(b[pos + 4:pos + 8], "little")
        if cid == b"fmt ":
            rate = int.from_bytes(b[pos + 12:pos + 16], "little")
            if rate != ESPEAK_RATE:
                sys.exit(f"aligned_speech.py: espeak-ng rate {rate}, expected {ESPEAK_RATE}")
        if cid == b"data":
            data = b[pos + 8:]
            break
        pos += 8 + size + (size & 1)
    if data is None:
        sys.exit(f"aligned_speech.py: no data chunk in espeak-ng output for {word!r}")
    data = data[:len(data) // 2 * 2]
    return np.frombuffer(data, dtype="<i2").astype(np.float64) / 32768.0


def active_span(x):
    """[first, last] indices where |x| is within TRIM_DB of the peak."""
    a = np.abs(x)
    peak = a.max() if a.size else 0.0
    if peak <= 0:
        return None
    idx = np.nonzero(a >= peak * 10 ** (TRIM_DB / 20))[0]
    return int(idx[0]), int(idx[-1])


def resample(x, rate_in, rate_out):
    """Band-limited interpolation: y[n] = sum_k x[k] h(n * rate_in / rate_out - k), h a
    Kaiser-windowed sinc with cut-off CUTOFF_HZ, HALF_TAPS input samples either side."""
    n_out = len(x) * rate_out // rate_in
    # Input position of each output sample, as an exact rational split into integer + fraction.
    num = np.arange(n_out, dtype=np.int64) * rate_in
    base = num // rate_out
    frac = (num % rate_out) / rate_out
    offs = np.arange(-HALF_TAPS + 1, HALF_TAPS + 1, dtype=np.int64)
    k = base[:, None] + offs[None, :]
    d = frac[:, None] - offs[None, :]  # distance from the output point to input sample k
    c = 2.0 * CUTOFF_HZ / rate_in
    # Kaiser window I0(beta sqrt(1 - (d/L)^2)) / I0(beta), evaluated at the off-grid distances.
    r = np.clip(d / (HALF_TAPS + 1), -1.0, 1.0)
    h = c * np.sinc(c * d) * np.i0(KAISER_BETA * np.sqrt(1.0 - r * r)) / np.i0(KAISER_BETA)
    xp = np.concatenate([np.zeros(HALF_TAPS), x, np.zeros(HALF_TAPS + 1)])
    return (xp[k + HALF_TAPS] * h).sum(axis=1)


def render_word(word, voice, wpm, pitch):
    """A word at RATE, trimmed so its first and last samples are its active edges."""
    x = espeak(word, voice, wpm, pitch)
    span = active_span(x)
    if span is None:
        sys.exit(f"aligned_speech.py: espeak-ng produced silence for {word!r} ({voice})")
    margin = 2 * HALF_TAPS
    lo, hi = max(span[0] - margin, 0), min(span[1] + margin + 1, len(x))
    y = resample(x[lo:hi], ESPEAK_RATE, RATE)
    span = active_span(y)
    return y[span[0]:span[1] + 1]


def pause_samples(utt_id, k):
    """Deterministic pause after word k of utt_id, in samples."""
    h = int.from_bytes(hashlib.sha256(f"{utt_id}/{k}".encode()).digest()[:4], "big")
    ms = PAUSE_MS[0] + h % (PAUSE_MS[1] - PAUSE_MS[0] + 1)
    return ms * RATE // 1000


def seconds(samples):
    """Exact decimal seconds of a sample count (1/16000 s = 0.0000625 s: 7 decimals)."""
    q = samples * (10 ** 7 // RATE)
    return f"{q // 10 ** 7}.{q % 10 ** 7:07d}"


def write_wav(path, pcm):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.astype("<i2").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    chapters = read_chapters(args.text)
    if len(chapters) != len(SPEAKERS):
        sys.exit(f"aligned_speech.py: {args.text}: {len(chapters)} chapters, "
                 f"expected {len(SPEAKERS)} (one per speaker)")
    utts = []  # (utt_id, speaker index, words)
    for s, sentences in enumerate(chapters):
        spk, chap = SPEAKERS[s][:2]
        for i, sent in enumerate(sentences):
            utts.append((f"{spk}-{chap}-{i:04d}", s, words_of(sent)))

    # Synthesize every distinct (speaker, word) once, in parallel; results are keyed, so the
    # order in which processes finish cannot change the output.
    jobs = sorted({(s, w) for _, s, ws in utts for w in ws})
    print(f"synthesizing {len(jobs)} distinct words for {len(utts)} utterances "
          f"with {args.jobs} jobs", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = {key: ex.submit(render_word, key[1], *SPEAKERS[key[0]][2:]) for key in jobs}
        audio = {key: f.result() for key, f in futs.items()}

    ctm, table, trans = [], [], {}
    for utt_id, s, words in utts:
        spk, chap = SPEAKERS[s][:2]
        pieces, marks, pos = [np.zeros(LEAD_IN)], [], LEAD_IN
        for k, w in enumerate(words):
            if k:
                gap = pause_samples(utt_id, k)
                pieces.append(np.zeros(gap))
                pos += gap
            a = audio[(s, w)]
            pieces.append(a)
            marks.append((pos, pos + len(a), w))
            pos += len(a)
        pieces.append(np.zeros(TAIL))
        x = np.concatenate(pieces)
        dur = len(x) / RATE
        if not MIN_S <= dur <= MAX_S:
            sys.exit(f"aligned_speech.py: {utt_id} lasts {dur:.2f} s, outside "
                     f"[{MIN_S}, {MAX_S}] s: shorten or lengthen its sentence")
        pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)
        # Quantization must not move a word edge: its first and last samples stay non-zero.
        for a, b, w in marks:
            if pcm[a] == 0 or pcm[b - 1] == 0:
                sys.exit(f"aligned_speech.py: {utt_id}: word {w} edge quantized to zero")
        d = os.path.join(args.out, spk, chap)
        os.makedirs(d, exist_ok=True)
        write_wav(os.path.join(d, utt_id + ".wav"), pcm)
        trans.setdefault((spk, chap), []).append(f"{utt_id} {' '.join(words)}")
        for a, b, w in marks:
            ctm.append(f"{utt_id} 1 {seconds(a)} {seconds(b - a)} {w}")
        table.append(f"{utt_id}\t{len(x)}\t{seconds(len(x))}\t{len(words)}\t{SPEAKERS[s][2]}")
        print(f"  {utt_id}  {dur:5.2f} s  {len(words):2d} words  {SPEAKERS[s][2]}", flush=True)

    for (spk, chap), lines in trans.items():
        with open(os.path.join(args.out, spk, chap, f"{spk}-{chap}.trans.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "alignments.ctm"), "w") as f:
        f.write("\n".join(ctm) + "\n")
    with open(os.path.join(args.out, "utterances.tsv"), "w") as f:
        f.write("utt_id\tsamples\tseconds\twords\tvoice\n" + "\n".join(table) + "\n")
    total = sum(int(t.split("\t")[1]) for t in table) / RATE
    print(f"{len(utts)} utterances, {len(ctm)} words, {total:.1f} s of audio", flush=True)


if __name__ == "__main__":
    main()
