#!/usr/bin/env python3
"""bench_peers.py — srkit's Whisper backend against openai-whisper and faster-whisper, and
srkit's whisperrt strategy against reencode, on one machine at one thread count.

Run it through scripts/bench_peers.sh, which pins the BLAS / OpenMP thread counts. Two modes:

  orchestrator (default; Debian /usr/bin/python3, standard library only)
      1. offline on a LibriSpeech folder (default ../shared/data/librispeech-sample): srkit
         (`srkit transcribe --strategy offline --decoder aed_greedy`), openai-whisper
         (`whisper.decode`, greedy, no timestamps, temperature 0 without fallback, fp32 CPU, on
         the SAME weights, read from srkit's HDF5 file) and faster-whisper (the CTranslate2
         tiny.en folder, beam 1, compute_type float32, plus an int8 row). Each system runs in
         its own process: one untimed warm-up file, then PASSES passes over all files,
         interleaved across the systems (srkit, openai, faster, ..., srkit, ...) so that load
         changes on the machine hit all alike; the total compute of each one's fastest pass
         counts. Timed per file: log-mel + encoder + decoding of
         audio already in memory. WER of each with `srkit score` (whisper_en normalizer).
      2. streaming on a ~60 s stream made by concatenating utterances of a folder (default
         ../shared/data/librispeech-audio-only/librispeech_test-other, name order):
         `srkit bench --json --per-chunk --max-ms` for whisperrt and reencode at each chunk size
         of CHUNKS with aed_greedy (decodes only at the end: the per-chunk times are the
         encoder side alone), and at STABLE_CHUNKS with stable_greedy (encoder + the streaming
         decoder's work on every chunk). With aed_greedy reencode runs on the first REENCODE_S
         seconds only: every reencode chunk encodes a full 30 s window, so its encoder cost does
         not depend on where in the stream it is (and 60 s of it at 40 ms would take half an
         hour). With stable_greedy both strategies run on the same first STABLE_S seconds: the
         decoder's work on a chunk grows with the hypothesis so far, so only the same audio
         compares.
      Prints markdown tables and writes OUT/bench_peers.json (+ the hypotheses as .trn).

  peer (`--peer openai|faster|faster-int8`, run with the reference venv's python)
      a worker process: reads the file list (a JSON line) on stdin, loads its model, runs the
      warm-up, then one timed pass per "run" line, printing {"compute_s", "per_file", "texts"}.

Environment (bench_peers.sh sets the defaults): THREADS, SRKIT, MODEL, CT2, DATA, STREAM_DIR,
STREAM_S, CHUNKS, STABLE_CHUNKS, REENCODE_S, STABLE_S, PASSES, VENV, OUT, SKIP_OFFLINE, SKIP_STREAM,
SKIP_PEERS.
"""

import json
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def env(name, default):
    v = os.environ.get(name)
    return v if v not in (None, "") else default


# ---- audio file durations without third-party packages ----------------------------------------

def duration_s(path):
    """Seconds of a FLAC (STREAMINFO) or PCM WAV file, read from its header."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] == b"fLaC":
            info = head[8:8 + 34]  # first metadata block is STREAMINFO
            bits = int.from_bytes(info[10:18], "big")
            rate = bits >> 44
            total = bits & ((1 << 36) - 1)
            return total / rate
        if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
            f.seek(12)
            rate = channels = width = None
            while True:
                h = f.read(8)
                if len(h) < 8:
                    break
                cid, size = h[:4], struct.unpack("<I", h[4:])[0]
                if cid == b"fmt ":
                    fmt = f.read(size)
                    channels, rate = struct.unpack("<HI", fmt[2:8])
                    width = struct.unpack("<H", fmt[14:16])[0] // 8
                    continue
                if cid == b"data" and rate:
                    return size / (rate * channels * width)
                f.seek(size + (size & 1), 1)
    raise ValueError("%s: not a FLAC or PCM WAV file" % path)


def audio_files(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder)
                  if n.endswith((".flac", ".wav")))


def utt_id(path):
    return os.path.splitext(os.path.basename(path))[0]


# ---- peers (reference venv) -----------------------------------------------------------------------

def peer_main(kind, threads):
    """A worker: reads the file list (one JSON line), loads its model, runs the untimed warm-up,
    prints {"ready": version}, then runs one timed pass per "run" line until "quit"."""
    files = json.loads(sys.stdin.readline())
    import numpy as np
    import soundfile

    def load(p):
        a, sr = soundfile.read(p, dtype="float32")
        if a.ndim > 1:
            a = a.mean(axis=1)
        if sr != 16000:
            raise SystemExit("%s: %d Hz; the benchmark data is 16 kHz" % (p, sr))
        return np.ascontiguousarray(a)

    audio = [load(p) for p in files]
    if kind == "openai":
        import torch
        import whisper
        sys.path.insert(0, HERE)
        import gen_golden_whisper
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        model = gen_golden_whisper.openai_model(env("MODEL", ""))[0]
        opts = gen_golden_whisper.GREEDY

        def run(a):
            with torch.no_grad():
                mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(a)))
                return whisper.decode(model, mel, opts).text
        version = "openai-whisper %s, torch %s" % (whisper.__version__, torch.__version__)
    else:
        # CTranslate2 uses MKL only on GenuineIntel CPUs by default, oneDNN elsewhere. On the AMD
        # development machine MKL is faster for float32 and much slower for int8, so float32
        # forces it and int8 keeps the default: each row is the peer at its best.
        if kind == "faster":
            os.environ.setdefault("CT2_USE_MKL", "1")
        import ctranslate2
        import faster_whisper
        from faster_whisper import WhisperModel
        ctype = "int8" if kind == "faster-int8" else "float32"
        model = WhisperModel(env("CT2", ""), device="cpu", compute_type=ctype,
                             cpu_threads=threads, num_workers=1)

        def run(a):
            segs, _ = model.transcribe(a, language="en", beam_size=1, best_of=1,
                                       temperature=0.0, without_timestamps=True,
                                       condition_on_previous_text=False, vad_filter=False,
                                       word_timestamps=False)
            return "".join(s.text for s in segs)
        version = "faster-whisper %s, ctranslate2 %s, compute_type %s, CT2_USE_MKL=%s" % (
            faster_whisper.__version__, ctranslate2.__version__, ctype, os.environ.get("CT2_USE_MKL", "default"))
    run(audio[0])  # warm-up, untimed
    print(json.dumps({"ready": version}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        per, texts = [], {}
        for path, a in zip(files, audio):
            t0 = time.perf_counter()
            text = run(a)
            per.append(time.perf_counter() - t0)
            texts[utt_id(path)] = text
        print(json.dumps({"compute_s": sum(per), "per_file": per, "texts": texts}), flush=True)


# ---- orchestrator ----------------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def write_trn(path, texts):
    with open(path, "w") as f:
        for u in sorted(texts):
            t = " ".join(texts[u].replace("(", " ").replace(")", " ").split())
            f.write("%s (%s)\n" % (t, u))


def score(srkit, data, trn):
    r = subprocess.run([srkit, "score", "--ref", data, "--hyp", trn, "--json"],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("srkit score failed: %s" % r.stderr.strip())
    return json.loads(r.stdout)


def srkit_pass(cfg, files):
    """One timed pass of srkit: `srkit transcribe` over [warm-up file] + files in one process
    (compute_s per file excludes model loading, as the peers' do)."""
    args = [cfg["srkit"], "transcribe", cfg["model"], files[0]] + files + [
        "--strategy", "offline", "--decoder", "aed_greedy", "--threads", str(cfg["threads"]),
        "--json"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("srkit transcribe failed: %s" % r.stderr.strip())
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()][1:]
    return {"compute_s": sum(x["compute_s"] for x in rows),
            "per_file": [x["compute_s"] for x in rows],
            "texts": {utt_id(x["file"]): x["text"] for x in rows}}


class Peer:
    """A peer worker process in the reference venv (see peer_main)."""

    def __init__(self, cfg, kind, files):
        self.proc, self.status = None, None
        py = os.path.join(cfg["venv"], "bin", "python")
        mod = {"openai": "whisper", "faster": "faster_whisper", "faster-int8": "faster_whisper"}[kind]
        if not os.access(py, os.X_OK):
            self.status = "skipped: no reference venv at %s (make venv-ref)" % cfg["venv"]
        elif subprocess.run([py, "-c", "import %s" % mod], capture_output=True).returncode:
            self.status = "skipped: %s is not installed in %s (pip install it there)" % (
                mod, cfg["venv"])
        elif kind.startswith("faster") and not os.path.isfile(os.path.join(cfg["ct2"], "model.bin")):
            self.status = "skipped: no CTranslate2 model at %s (make models)" % cfg["ct2"]
        if self.status:
            return
        self.proc = subprocess.Popen([py, os.path.abspath(__file__), "--peer", kind],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.proc.stdin.write(json.dumps(files) + "\n")
        self.proc.stdin.flush()
        msg = self._read()
        if msg:
            self.version = msg["ready"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.status = "failed: the %s worker exited (its error is above)" % self.proc.args[-1]
            self.proc.wait()
            self.proc = None
            return None
        return json.loads(line)

    def run_pass(self):
        if not self.proc:
            return None
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        if self.proc:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait()


def offline_section(cfg, res):
    files = audio_files(cfg["data"])
    audio_s = sum(duration_s(f) for f in files)
    log("offline: %d files, %.1f s of audio, %d pass(es) per system, interleaved" % (
        len(files), audio_s, cfg["passes"]))
    systems = [("srkit", "srkit offline, aed_greedy (fp32, OpenBLAS)", None),
               ("openai", "openai-whisper decode, greedy (fp32, torch)", "openai"),
               ("faster", "faster-whisper, beam 1 (CTranslate2 float32)", "faster"),
               ("faster-int8", "faster-whisper, beam 1 (CTranslate2 int8)", "faster-int8")]
    if cfg["skip_peers"]:
        systems = systems[:1]
    peers = {}
    for key, _, kind in systems:
        if kind:
            log("  loading %s ..." % key)
            peers[key] = Peer(cfg, kind, files)
            if peers[key].status:
                log("  %s %s" % (key, peers[key].status))
    passes = {key: [] for key, _, _ in systems}
    # Passes are interleaved (srkit, openai, faster, ... then again) so that a change in the
    # machine's load during the run affects every system alike; the fastest pass counts.
    for p in range(cfg["passes"]):
        for key, _, kind in systems:
            r = srkit_pass(cfg, files) if kind is None else peers[key].run_pass()
            if r:
                passes[key].append(r)
                log("  pass %d %-12s %.2f s" % (p, key, r["compute_s"]))
    out = {"data": cfg["data"], "n_files": len(files), "audio_s": audio_s, "systems": {}}
    for key, label, kind in systems:
        if kind:
            peers[key].close()
        if not passes[key]:
            out["systems"][key] = {"label": label, "status": peers[key].status or "failed"}
            continue
        best = min(passes[key], key=lambda x: x["compute_s"])
        trn = os.path.join(cfg["out"], "offline-%s.trn" % key)
        write_trn(trn, best["texts"])
        sc = score(cfg["srkit"], cfg["data"], trn)
        version = peers[key].version if kind else "srkit " + subprocess.run(
            [cfg["srkit"], "version"], capture_output=True, text=True).stdout.split()[-1]
        out["systems"][key] = {"label": label, "version": version, "status": "ok",
                               "compute_s": best["compute_s"],
                               "compute_s_passes": [x["compute_s"] for x in passes[key]],
                               "per_file_s": best["per_file"], "rtf": best["compute_s"] / audio_s,
                               "wer": sc["wer"], "n_ref_words": sc.get("n_ref_words"),
                               "hyp_trn": trn}
    s = out["systems"]["srkit"]
    for key, v in out["systems"].items():
        if v.get("status") == "ok":
            v["srkit_over_this"] = s["compute_s"] / v["compute_s"]
    res["offline"] = out


def stream_files(folder, seconds):
    files, total = [], 0.0
    for f in audio_files(folder):
        if total >= seconds:
            break
        files.append(f)
        total += duration_s(f)
    return files, total


def bench(cfg, files, seconds, strategy, decoder, chunk):
    stream = json.dumps({"strategy": strategy, "decoder": decoder, "chunk_ms": chunk})
    args = [cfg["srkit"], "bench", "--model", cfg["model"], "--stream", stream, "--threads",
            str(cfg["threads"]), "--json", "--per-chunk", "--max-ms", str(int(seconds * 1000))]
    for f in files:
        args += ["--audio", f]
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("srkit bench failed: %s" % r.stderr.strip())
    j = json.loads(r.stdout)
    log("  %-9s %-13s %4d ms: %.1f s of audio in %.1f s (wall %.0f s)" % (
        strategy, decoder, chunk, j["audio_s"], j["compute_s"], time.time() - t0))
    return j


def chunk_stats(j, drop_final):
    """Per-chunk compute (ms) percentiles and means over [0, 10 s) and the last 10 s of audio.
    drop_final: leave out the final entry (aed_greedy decodes everything there)."""
    at, ct = j["chunk_audio_ms"], j["chunk_compute_ms"]
    if drop_final and len(ct) > 1:
        at, ct = at[:-1], ct[:-1]
    s = sorted(ct)

    def pct(q):
        k = max(1, -(-int(q * 1000) * len(s) // 1000))
        return s[k - 1]
    end = j["audio_s"] * 1000
    first = [c for a, c in zip(at, ct) if a <= 10000]
    last = [c for a, c in zip(at, ct) if a > end - 10000]
    mean = lambda v: sum(v) / len(v) if v else None
    return {"n": len(ct), "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "mean": mean(ct),
            "mean_first10s": mean(first), "mean_last10s": mean(last)}


def stream_section(cfg, res):
    files, _ = stream_files(cfg["stream_dir"], cfg["stream_s"])
    total, rtotal = cfg["stream_s"], min(cfg["reencode_s"], cfg["stream_s"])
    stotal = min(cfg["stable_s"], cfg["stream_s"])
    log("streaming: the first %.1f s of %d files (reencode: the first %.1f s; stable_greedy "
        "pairs: the first %.1f s)" % (total, len(files), rtotal, stotal))
    out = {"files": files, "audio_s": total, "reencode_audio_s": rtotal,
           "stable_audio_s": stotal, "runs": []}
    for decoder in ("aed_greedy", "stable_greedy"):
        for chunk in (cfg["chunks"] if decoder == "aed_greedy" else cfg["stable_chunks"]):
            for strategy in ("whisperrt", "reencode"):
                secs = stotal if decoder == "stable_greedy" else (
                    total if strategy == "whisperrt" else rtotal)
                j = bench(cfg, files, secs, strategy, decoder, chunk)
                st = chunk_stats(j, decoder == "aed_greedy")
                out["runs"].append({"strategy": strategy, "decoder": decoder, "chunk_ms": chunk,
                                    "audio_s": j["audio_s"], "compute_s": j["compute_s"],
                                    "rtf": j["rtf"], "stream_state_bytes": j["stream_state_bytes"],
                                    "peak_rss_bytes": j["peak_rss_bytes"], "per_chunk_ms": st,
                                    "text": j["text"]})
    res["stream"] = out


def run_of(res, strategy, decoder, chunk):
    for r in res["stream"]["runs"]:
        if (r["strategy"], r["decoder"], r["chunk_ms"]) == (strategy, decoder, chunk):
            return r
    return None


def markdown(cfg, res):
    L = []
    if "offline" in res:
        o = res["offline"]
        L += ["### Offline, %d LibriSpeech files (%.1f s), %d threads" % (
            o["n_files"], o["audio_s"], cfg["threads"]), "",
              "| system | compute s | RTF | srkit / system | WER % |", "|---|---|---|---|---|"]
        for key, v in o["systems"].items():
            if v.get("status") != "ok":
                L.append("| %s | %s | | | |" % (v["label"], v["status"]))
                continue
            L.append("| %s | %.2f | %.4f | %.2f | %.2f |" % (
                v["label"], v["compute_s"], v["rtf"], v["srkit_over_this"], 100 * v["wer"]))
        L.append("")
    if "stream" in res:
        s = res["stream"]
        L += ["### Streaming: whisperrt on %.0f s (%d utterances concatenated), reencode on its first %.0f s, %d threads" % (
            s["audio_s"], len(s["files"]), s["reencode_audio_s"], cfg["threads"]), "",
              "Per-chunk compute in ms. `aed_greedy` decodes only at the end, so its chunks are "
              "the encoder side alone (final entry left out); `stable_greedy` adds the streaming "
              "decoder's work on every chunk, and both of its strategies run on the same first "
              "%.0f s (the 'first / last 10 s' column is of that audio)." % s.get("stable_audio_s", 0), "",
              "| decoder | chunk ms | whisperrt p50 / p90 | reencode p50 / p90 | reencode / whisperrt (p50) | whisperrt RTF | whisperrt mean first 10 s / last 10 s |",
              "|---|---|---|---|---|---|---|"]
        for decoder in ("aed_greedy", "stable_greedy"):
            for chunk in sorted(set(cfg["chunks"] + cfg["stable_chunks"])):
                w, r = run_of(res, "whisperrt", decoder, chunk), run_of(res, "reencode", decoder, chunk)
                if not w or not r:
                    continue
                a, b = w["per_chunk_ms"], r["per_chunk_ms"]
                L.append("| %s | %d | %.1f / %.1f | %.1f / %.1f | %.1f | %.3f | %.1f / %.1f |" % (
                    decoder, chunk, a["p50"], a["p90"], b["p50"], b["p90"], b["p50"] / a["p50"],
                    w["rtf"], a["mean_first10s"], a["mean_last10s"]))
        L.append("")
    return "\n".join(L)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--peer":
        peer_main(sys.argv[2], int(env("THREADS", "2")))
        return
    home = env("SRKIT_HOME", os.path.expanduser("~/.cache/srkit"))
    cfg = {"threads": int(env("THREADS", "2")),
           "srkit": env("SRKIT", os.path.join(ROOT, "build", "srkit")),
           "model": env("MODEL", os.path.join(home, "models", "whisper-tiny.en.h5")),
           "ct2": env("CT2", os.path.join(home, "models", "ct2-tiny.en")),
           "venv": env("VENV", os.path.join(home, "venv-ref")),
           "data": env("DATA", os.path.join(ROOT, "..", "shared", "data", "librispeech-sample")),
           "stream_dir": env("STREAM_DIR", os.path.join(ROOT, "..", "shared", "data",
                                                        "librispeech-audio-only",
                                                        "librispeech_test-other")),
           "stream_s": float(env("STREAM_S", "60")),
           "reencode_s": float(env("REENCODE_S", "3")),
           "stable_s": float(env("STABLE_S", "30")),
           "chunks": [int(c) for c in env("CHUNKS", "40 100 200 300").split()],
           "stable_chunks": [int(c) for c in env("STABLE_CHUNKS", "100").split()],
           "passes": int(env("PASSES", "3")),
           "out": env("OUT", os.path.join(ROOT, "results", "bench-peers")),
           "skip_stream": env("SKIP_STREAM", "0") == "1",
           "skip_offline": env("SKIP_OFFLINE", "0") == "1",
           "skip_peers": env("SKIP_PEERS", "0") == "1"}
    for what, path in (("srkit binary (make)", cfg["srkit"]), ("model (make models)", cfg["model"]),
                       ("data", cfg["data"]), ("stream folder", cfg["stream_dir"])):
        if not os.path.exists(path):
            raise SystemExit("bench_peers: %s not found: %s" % (what, path))
    os.makedirs(cfg["out"], exist_ok=True)
    res = {"threads": cfg["threads"], "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
           "config": cfg}
    if not cfg["skip_offline"]:
        offline_section(cfg, res)
    if not cfg["skip_stream"]:
        stream_section(cfg, res)
    md = markdown(cfg, res)
    res["markdown"] = md
    with open(os.path.join(cfg["out"], "bench_peers.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(md)
    log("wrote %s" % os.path.join(cfg["out"], "bench_peers.json"))


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "load_avg_at_start": os.getloadavg()}


if __name__ == "__main__":
    main()
