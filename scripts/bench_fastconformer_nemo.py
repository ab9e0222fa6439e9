#!/usr/bin/env python3
"""bench_fastconformer_nemo.py — NeMo's own cache-aware streaming on the weights of an srkit
fastconformer_rnnt file, for comparison with `srkit bench` on the same machine (a benchmark,
never a test; docs/fastconformer.md has the numbers and commands).

Run with the reference venv (nemo_toolkit 3.0.0, torch):
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/bench_fastconformer_nemo.py \\
        MODEL.h5 --att-context 70,13 --max-ms 60000 --threads 2 AUDIO...

It builds NeMo's ConformerEncoder / RNNTDecoder / RNNTJoint at the file's config, copies the
file's tensors into them one at a time (f16 / bf16 widened to f32, as srkit loads them), then
runs the workload of scripts/gen_golden_fastconformer.py at scale: the audio files concatenated
(and cut to --max-ms), NeMo's mel over the whole signal (as its CacheAwareStreamingAudioBuffer
does; timed separately), then chunk after chunk exactly as that buffer feeds
cache_aware_stream_step (first chunk 1 + 8R frames, later 9 cached + 8(R + 1) new, drop 2),
each followed by greedy RNN-T (GreedyRNNTInfer, max_symbols from the config) carried across
chunks. Each chunk's step + decode is timed under torch.inference_mode().

Prints one JSON object with the fields `srkit bench --json` uses where they apply: audio_s,
compute_s (all chunks, without the mel), mel_s, rtf (compute_s + mel_s over audio_s), n_chunks,
chunk_ms_p50/p90/p99/max (nearest rank, as srkit), load_s, peak_rss_bytes (ru_maxrss), threads,
text (the token ids' pieces joined), torch and nemo versions.
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def pct(sorted_ms, q):
    """Nearest-rank percentile: the smallest value with at least q * n values at or below it."""
    r = int(math.ceil(q * len(sorted_ms)))
    return sorted_ms[max(r, 1) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="srkit fastconformer_rnnt .h5")
    ap.add_argument("audio", nargs="+", help="audio files, concatenated in order (16 kHz)")
    ap.add_argument("--att-context", default="70,13", help="L,R (one the model lists)")
    ap.add_argument("--max-ms", type=int, default=0, help="use only the first N ms")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = ap.parse_args()

    import h5py
    import soundfile
    import torch
    import nemo
    from nemo.collections.asr.modules import (AudioToMelSpectrogramPreprocessor,
                                              ConformerEncoder, RNNTDecoder, RNNTJoint)
    from nemo.collections.asr.parts.submodules.rnnt_greedy_decoding import GreedyRNNTInfer

    torch.set_num_threads(args.threads)
    ctx = [int(x) for x in args.att_context.split(",")]
    t0 = time.perf_counter()
    with h5py.File(args.model, "r") as f:
        cfg = json.loads(f.attrs["config"])
        if ctx not in cfg["att_context_size"]:
            sys.exit("bench_fastconformer_nemo.py: att_context %s is not in the model's %s"
                     % (ctx, cfg["att_context_size"]))
        pieces = []
        if "tokenizer" in f:
            data = bytes(f["tokenizer/pieces_data"][()])
            off = f["tokenizer/pieces_offsets"][()]
            pieces = [data[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]
        enc = ConformerEncoder(
            feat_in=cfg["n_mels"], n_layers=cfg["n_layers"], d_model=cfg["d_model"], feat_out=-1,
            causal_downsampling=True, subsampling="dw_striding", subsampling_factor=8,
            subsampling_conv_channels=cfg["subsampling_conv_channels"],
            ff_expansion_factor=cfg["d_ff"] // cfg["d_model"], self_attention_model="rel_pos",
            n_heads=cfg["n_heads"], att_context_size=cfg["att_context_size"],
            att_context_style=cfg["att_context_style"], xscaling=bool(cfg["xscaling"]),
            untie_biases=True, pos_emb_max_len=cfg.get("pos_emb_max_len", 5000),
            conv_kernel_size=cfg["conv_kernel_size"], conv_norm_type=cfg["conv_norm_type"],
            conv_context_size="causal", dropout=0.0, dropout_pre_encoder=0.0, dropout_emb=0.0,
            dropout_att=0.0)
        V = cfg["vocab_size"]
        dec = RNNTDecoder(prednet={"pred_hidden": cfg["pred_hidden"],
                                   "pred_rnn_layers": cfg["pred_rnn_layers"], "dropout": 0.2},
                          vocab_size=V, blank_as_pad=True)
        # the joint's output Linear is joint_net.2 when it was built with dropout, else .1
        has_dropout = "2" in f["weights/joint/joint_net"]
        joint = RNNTJoint(jointnet={"encoder_hidden": cfg["d_model"],
                                    "pred_hidden": cfg["pred_hidden"],
                                    "joint_hidden": cfg["joint_hidden"], "activation": "relu",
                                    "dropout": 0.2 if has_dropout else 0.0},
                          num_classes=V)
        # tensors copied one at a time: peak memory is the model plus one tensor
        with torch.no_grad():
            for prefix, m in (("encoder", enc), ("decoder", dec), ("joint", joint)):
                for name, t in m.state_dict(keep_vars=True).items():
                    if name.endswith("num_batches_tracked"):
                        continue
                    path = "weights/" + ("%s.%s" % (prefix, name)).replace(".", "/")
                    if path not in f:
                        sys.exit("bench_fastconformer_nemo.py: %s: no tensor %s" % (args.model, path))
                    a = f[path][()]
                    if f[path].attrs.get("dtype") in ("bf16", b"bf16"):
                        a = (a.astype(np.uint32) << 16).view(np.float32)
                    t.copy_(torch.from_numpy(np.asarray(a, dtype=np.float32)).reshape(t.shape))
                    del a
    for m in (enc, dec, joint):
        m.eval()
    pre = AudioToMelSpectrogramPreprocessor(
        sample_rate=16000, window_size=cfg["win_length"] / 16000,
        window_stride=cfg["hop_length"] / 16000, window="hann", normalize="NA",
        n_fft=cfg["n_fft"], features=cfg["n_mels"], dither=0.0, pad_to=0,
        preemph=cfg["preemph"])
    pre.eval()
    load_s = time.perf_counter() - t0

    parts = []
    for p in args.audio:
        a, sr = soundfile.read(p, dtype="float32")
        if sr != 16000:
            sys.exit("bench_fastconformer_nemo.py: %s: %d Hz, expected 16000" % (p, sr))
        parts.append(a if a.ndim == 1 else a.mean(axis=1))
    audio = np.concatenate(parts)
    if args.max_ms > 0:
        audio = audio[:args.max_ms * 16]
    audio_s = len(audio) / 16000.0

    with torch.inference_mode():
        t0 = time.perf_counter()
        x = torch.from_numpy(audio)[None]
        mel, _ = pre(input_signal=x, length=torch.tensor([x.shape[1]]))
        mel_s = time.perf_counter() - t0
        T = mel.shape[-1]
        enc.set_default_att_context_size(ctx)
        enc.setup_streaming_params()
        scfg = enc.streaming_cfg
        cch, ctime, clen = enc.get_initial_cache_state(batch_size=1)
        greedy = GreedyRNNTInfer(dec, joint, blank_index=V,
                                 max_symbols_per_step=cfg.get("max_symbols", 10))
        idx, hyp, times = 0, None, []
        while idx < T:
            first = idx == 0
            size = scfg.chunk_size[0] if first else scfg.chunk_size[1]
            shift = scfg.shift_size[0] if first else scfg.shift_size[1]
            chunk = mel[:, :, idx:idx + size]
            if chunk.shape[-1] < (1 if first else enc.subsampling_factor):
                break
            t1 = time.perf_counter()
            if first:
                zpad, cache_pre = 0, mel[:, :, :0]
            else:
                pc = scfg.pre_encode_cache_size[1]
                cache_pre = mel[:, :, max(0, idx - pc):idx]
                zpad = pc - cache_pre.shape[-1]
            chunk = torch.cat([torch.zeros(1, mel.shape[1], zpad), cache_pre, chunk], -1)
            idx += shift
            o, ol, cch, ctime, clen = enc.cache_aware_stream_step(
                processed_signal=chunk, processed_signal_length=torch.tensor([chunk.shape[-1]]),
                cache_last_channel=cch, cache_last_time=ctime, cache_last_channel_len=clen,
                keep_all_outputs=idx >= T, drop_extra_pre_encoded=0 if first else None)
            o = o[:, :, :int(ol[0])]
            (hs,) = greedy(encoder_output=o, encoded_lengths=torch.tensor([o.shape[-1]]),
                           partial_hypotheses=[hyp] if hyp is not None else None)
            hyp = hs[0]
            times.append((time.perf_counter() - t1) * 1e3)
    ms = sorted(times)
    compute_s = sum(times) / 1e3
    toks = [int(t) for t in hyp.y_sequence] if hyp is not None else []
    text = "".join(pieces[t] if t < len(pieces) else "<%d>" % t for t in toks)
    text = text.replace("\u2581", " ").strip()
    print(json.dumps({
        "model": args.model, "runner": "nemo cache_aware_stream_step + GreedyRNNTInfer",
        "att_context": ctx, "threads": args.threads, "audio_s": audio_s,
        "compute_s": compute_s, "mel_s": mel_s, "rtf": (compute_s + mel_s) / audio_s,
        "n_chunks": len(times), "chunk_ms_mean": compute_s * 1e3 / max(len(times), 1),
        "chunk_ms_p50": pct(ms, 0.5), "chunk_ms_p90": pct(ms, 0.9), "chunk_ms_p99": pct(ms, 0.99),
        "chunk_ms_max": ms[-1], "load_s": load_s,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "n_tokens": len(toks), "text": text, "torch": torch.__version__,
        "nemo": nemo.__version__}))


if __name__ == "__main__":
    main()
