#!/usr/bin/env python3
"""gen_golden_fastconformer.py — golden fixtures for the fastconformer_rnnt backend
(tests/test_fastconformer.c), computed by NeMo's own modules.

Run with the reference venv (nemo_toolkit 3.0.0, torch):
    ${SRKIT_HOME:-~/.cache/srkit}/venv-ref/bin/python scripts/gen_golden_fastconformer.py

It builds, with a fixed seed and random weights, the NeMo modules of a cache-aware streaming
FastConformer-RNNT at a small shape — ConformerEncoder (causal dw_striding 8x, rel_pos,
chunked_limited att_context_size [[70,0],[70,1],[70,6],[70,13],[4,0],[6,1]], causal conv context,
LayerNorm conv norm, xscaling), RNNTDecoder (2-layer LSTM) and RNNTJoint — and writes under
tests/fixtures/fastconformer/:

  rand.h5      the model in srkit's layout (tensor names = NeMo state-dict keys, f16 matrices;
               the NeMo modules run on the same f16-rounded weights), config JSON with every
               hyper-parameter, a "sentencepiece" /tokenizer of 63 pieces
  golden.h5    /audio int16 (2 s of speech-samples/jfk.wav), /mel [T, 80] (NeMo's
               AudioToMelSpectrogramPreprocessor, NA), /pre_encode [T', d] (subsampling output
               before xscaling), /offline/<ctx>/encoder [T', d] for the model's forward with
               that att_context_size as default (ctx "full" = [-1,-1]), /offline/tokens (greedy
               RNN-T over the [70,0] offline output), and per streaming context
               /stream/<L>_<R>/{enc (all valid chunk outputs concatenated), chunk_frames (encoder
               frames per step), channel_len (cache length after each step), cache_channel_1
               and cache_time_1 (the caches after step 1; of the attention cache only its
               channel_len valid rows, the newest last), cache_channel_last / cache_time_last
               (after the last step), tokens (greedy RNN-T carried across the chunks, as
               conformer_stream_step does), tokens_per_step}
               — the chunks come from NeMo's CacheAwareStreamingAudioBuffer logic over the
               offline mel (first chunk 1 + 8R frames, later 9 cached + 8(R+1) new, drop 2).
  rand.nemo    (with --nemo) the same model as a .nemo archive (model_config.yaml, f32
               model_weights.ckpt, SentencePiece .model + .vocab) for scripts/convert_nemo.py
  rand_tdt.h5  the same encoder and prediction network with a TDT joint (NeMo's RNNTJoint with
               num_extra_outputs = 5, config tdt_durations [0, 1, 2, 3, 4]), random weights of
               its own (seed TDT_SEED), arranged so that greedy TDT on the 2 s emits blanks,
               tokens, every duration and tokens of duration 0 (see tune_tdt)
  golden_tdt.h5  TDT decoding of golden.h5's mel by NeMo's decoders (the joint's raw logits,
               log_softmax off; argmaxes are the same either way):
               /offline/{steps_t, steps_logits [S, V+1+5]}: every joint evaluation of
               GreedyTDTInfer over the [70,0] offline encoder output (frame index, logits), and
               its /offline/{tokens, timestamps, durations}; the label-looping decoder
               (GreedyBatchedTDTInfer, NeMo's default greedy_batch) is checked to give the same.
               Per streaming context /stream/<L>_<R>/{tokens, timestamps, durations} from the
               label-looping decoder fed chunk after chunk with its state (NeMo's
               conformer_stream_step with greedy_batch: a duration jumping past a chunk's end is
               carried into the next chunk, /stream/<L>_<R>/time_jump after each chunk), its
               joint evaluations /stream/<L>_<R>/{steps_t, steps_logits} (frames over the
               stream; the label-looping decoder evaluates a blank of duration 0 once and
               moves on where GreedyTDTInfer repeats it up to max_symbols times), and
               tokens_restart: GreedyTDTInfer fed the same chunks with partial hypotheses, which
               restarts every chunk at its frame 0 (drops the carried jump)
Options: --out DIR writes the files elsewhere (to compare a re-run with the committed ones).
Deterministic: fixed seeds.
"""

import argparse
import io
import json
import os
import sys
import tarfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srkit_h5  # noqa: E402

import h5py  # noqa: E402
import soundfile  # noqa: E402
from nemo.collections.asr.modules import (AudioToMelSpectrogramPreprocessor,  # noqa: E402
                                          ConformerEncoder, RNNTDecoder, RNNTJoint)
from nemo.collections.asr.parts.submodules.rnnt_greedy_decoding import (  # noqa: E402
    GreedyBatchedTDTInfer, GreedyRNNTInfer, GreedyTDTInfer)
from nemo.collections.asr.parts.utils import rnnt_utils  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "fastconformer")
SHARED = os.environ.get("SRKIT_SHARED", os.path.join(ROOT, "..", "shared", "data"))

CONTEXTS = [[70, 0], [70, 1], [70, 6], [70, 13], [4, 0], [6, 1]]
TDT_DURATIONS = [0, 1, 2, 3, 4]
TDT_SEED = 7
SHAPE = dict(n_mels=80, d_model=32, n_layers=2, n_heads=4, ff_expansion_factor=4,
             conv_kernel_size=9, subsampling_conv_channels=16, vocab_size=63, pred_hidden=32,
             pred_rnn_layers=2, joint_hidden=32)


def build(shape):
    enc = ConformerEncoder(
        feat_in=shape["n_mels"], n_layers=shape["n_layers"], d_model=shape["d_model"],
        feat_out=-1, causal_downsampling=True, subsampling="dw_striding", subsampling_factor=8,
        subsampling_conv_channels=shape["subsampling_conv_channels"],
        ff_expansion_factor=shape["ff_expansion_factor"], self_attention_model="rel_pos",
        n_heads=shape["n_heads"], att_context_size=CONTEXTS, att_context_style="chunked_limited",
        xscaling=True, untie_biases=True, pos_emb_max_len=5000,
        conv_kernel_size=shape["conv_kernel_size"], conv_norm_type="layer_norm",
        conv_context_size="causal", dropout=0.0, dropout_pre_encoder=0.0, dropout_emb=0.0,
        dropout_att=0.0)
    dec = RNNTDecoder(prednet={"pred_hidden": shape["pred_hidden"],
                               "pred_rnn_layers": shape["pred_rnn_layers"], "dropout": 0.2},
                      vocab_size=shape["vocab_size"], blank_as_pad=True)
    joint = RNNTJoint(jointnet={"encoder_hidden": shape["d_model"],
                                "pred_hidden": shape["pred_hidden"],
                                "joint_hidden": shape["joint_hidden"], "activation": "relu",
                                "dropout": 0.2},
                      num_classes=shape["vocab_size"])
    for m in (enc, dec, joint):
        m.eval()
    return enc, dec, joint


def randomize(modules, seed):
    """Random weights of a realistic scale, rounded to f16 (the stored precision)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for prefix, m in modules.items():
            for name, p in sorted(m.named_parameters()):
                if "norm" in name and name.endswith("weight"):
                    v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
                elif p.dim() == 1 or "pos_bias" in name:
                    v = 0.1 * torch.randn(p.shape, generator=g)
                elif name.endswith("embed.weight"):
                    v = 0.5 * torch.randn(p.shape, generator=g)
                    v[-1] = 0  # blank = padding_idx row stays zero
                else:
                    fan_in = p[0].numel()
                    v = torch.randn(p.shape, generator=g) / np.sqrt(fan_in)
                p.copy_(v.half().float())


def tune_blank(enc, dec, joint, blank):
    """Random joints emit a token on every step; shrink the prediction network's share of the
    joint (so the choice depends mostly on the audio frame) and raise the blank logit so that
    about 75 % of the frames are blank at the start state: a sparse, varied token sequence."""
    audio, _ = soundfile.read(os.path.join(SHARED, "speech-samples", "jfk.wav"), dtype="float32")
    tone = torch.from_numpy(audio[32000:64000])[None]
    pre = AudioToMelSpectrogramPreprocessor(normalize="NA", window_size=0.025, features=80,
                                            n_fft=512, dither=0.0, pad_to=0)
    pre.eval()
    with torch.no_grad():
        joint.pred.weight.mul_(0.25)
        joint.pred.weight.copy_(joint.pred.weight.half().float())
        joint.enc.weight.mul_(4.0)  # frame-to-frame differences, not the shared offset, decide
        for layer in enc.layers:
            layer.norm_out.bias.zero_()
        mel, ml = pre(input_signal=tone, length=torch.tensor([32000]))
        o, _ = enc(audio_signal=mel, length=ml)
        gp, _ = dec.predict(None, None, add_sos=False, batch_size=1)
        lg = joint.joint(o.transpose(1, 2), gp)[0, :, 0]
        margin = lg[:, :blank].max(-1).values - lg[:, blank]
        b = joint.joint_net[-1].bias
        b[blank] = (b[blank] + torch.quantile(margin, 0.75)).half().float()


def config_of(shape):
    return {
        "sample_rate": 16000, "n_fft": 512, "win_length": 400, "hop_length": 160,
        "n_mels": shape["n_mels"], "preemph": 0.97, "normalize": "NA",
        "d_model": shape["d_model"], "n_layers": shape["n_layers"], "n_heads": shape["n_heads"],
        "d_ff": shape["d_model"] * shape["ff_expansion_factor"],
        "conv_kernel_size": shape["conv_kernel_size"], "conv_norm_type": "layer_norm",
        "conv_context_size": [shape["conv_kernel_size"] - 1, 0],
        "subsampling": "dw_striding", "subsampling_factor": 8,
        "subsampling_conv_channels": shape["subsampling_conv_channels"],
        "causal_downsampling": 1, "xscaling": 1, "self_attention_model": "rel_pos",
        "att_context_style": "chunked_limited", "att_context_size": CONTEXTS,
        "pos_emb_max_len": 5000, "vocab_size": shape["vocab_size"],
        "blank": shape["vocab_size"], "pred_hidden": shape["pred_hidden"],
        "pred_rnn_layers": shape["pred_rnn_layers"], "joint_hidden": shape["joint_hidden"],
        "joint_activation": "relu", "tdt_durations": [], "max_symbols": 10,
        "local_attn_window": [128, 128], "local_attn_threshold": 8192,
    }


def pieces(v):
    """63 distinct SentencePiece-style pieces (a real .model cannot repeat one): <unk>, word
    starts (U+2581) and letters."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = ["<unk>"] + ["\u2581" + c for c in letters] + list(letters)
    out += ["\u2581the", "\u2581and", "ing", "ed", "'s", "er", "\u2581to", "\u2581of", "th",
            "\u2581in"]
    return out[:v]


def greedy(dec, joint, enc_bdt, partial=None, blank=None):
    g = GreedyRNNTInfer(dec, joint, blank_index=blank, max_symbols_per_step=10)
    lens = torch.tensor([enc_bdt.shape[-1]], dtype=torch.int64)
    (hyps,) = g(encoder_output=enc_bdt, encoded_lengths=lens,
                partial_hypotheses=[partial] if partial is not None else None)
    return hyps[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nemo", action="store_true", help="also write rand.nemo")
    ap.add_argument("--out", default=OUT, help="output directory (default %(default)s)")
    args = ap.parse_args()
    out_dir = args.out
    torch.manual_seed(0)
    os.makedirs(out_dir, exist_ok=True)
    enc, dec, joint = build(SHAPE)
    randomize({"encoder": enc, "decoder": dec, "joint": joint}, 1234)
    cfg = config_of(SHAPE)
    blank = SHAPE["vocab_size"]
    tune_blank(enc, dec, joint, blank)

    tensors = {}
    for prefix, m in (("encoder", enc), ("decoder", dec), ("joint", joint)):
        for k, v in m.state_dict().items():
            if k.endswith("num_batches_tracked"):
                continue
            tensors["%s.%s" % (prefix, k)] = v.detach().numpy().astype(np.float32)
    tok = {"type": "sentencepiece", "pieces": pieces(SHAPE["vocab_size"])}
    srkit_h5.write_model(os.path.join(out_dir, "rand.h5"), "fastconformer_rnnt", cfg, tensors,
                         dtype="f16", tokenizer=tok,
                         source="random-init NeMo 3.0.0 modules, seed 1234 "
                                "(scripts/gen_golden_fastconformer.py)",
                         license="random weights (no licence needed)", checksum=False)

    audio, sr = soundfile.read(os.path.join(SHARED, "speech-samples", "jfk.wav"), dtype="int16")
    assert sr == 16000
    audio = audio[:32000]
    pre = AudioToMelSpectrogramPreprocessor(
        sample_rate=16000, window_size=0.025, window_stride=0.01, n_window_size=None,
        window="hann", normalize="NA", n_fft=512, features=SHAPE["n_mels"], dither=0.0,
        pad_to=0, preemph=0.97)
    pre.eval()
    x = torch.from_numpy(audio.astype(np.float32) / 32768.0)[None]
    with torch.no_grad():
        mel, mel_len = pre(input_signal=x, length=torch.tensor([x.shape[1]]))
    # the streaming buffer treats every returned frame as valid
    T = mel.shape[-1]
    g = {"audio": audio, "mel": mel[0].T.numpy()}

    with torch.no_grad():
        pe, pe_len = enc.pre_encode(x=mel.transpose(1, 2), lengths=torch.tensor([T]))
        g["pre_encode"] = pe[0].numpy()
        for ctx in CONTEXTS + [[-1, -1]]:
            enc.att_context_size = ctx
            o, ol = enc(audio_signal=mel, length=torch.tensor([T]))
            name = "full" if ctx[0] < 0 else "%d_%d" % tuple(ctx)
            g["offline/%s/encoder" % name] = o[0].T.numpy()
        enc.att_context_size = CONTEXTS[0]
        o, _ = enc(audio_signal=mel, length=torch.tensor([T]))
        h = greedy(dec, joint, o, blank=blank)
        g["offline/tokens"] = np.array(h.y_sequence, dtype=np.int32).reshape(-1)

        chunks = {}  # streaming encoder output [1, d, t] of every step, per context
        for ctx in CONTEXTS:
            enc.set_default_att_context_size(ctx)
            enc.setup_streaming_params()
            scfg = enc.streaming_cfg
            cch, ctime, clen = enc.get_initial_cache_state(batch_size=1)
            idx, step, outs, frames, lens, ntok = 0, 0, [], [], [], []
            hyp = None
            key = "stream/%d_%d/" % tuple(ctx)
            while idx < T:
                first = idx == 0
                size = scfg.chunk_size[0] if first else scfg.chunk_size[1]
                shift = scfg.shift_size[0] if first else scfg.shift_size[1]
                chunk = mel[:, :, idx:idx + size]
                if chunk.shape[-1] < (1 if first else enc.subsampling_factor):
                    break
                if first:
                    cache_pre = mel[:, :, :0]
                    zpad = 0
                else:
                    pc = scfg.pre_encode_cache_size[1]
                    cache_pre = mel[:, :, max(0, idx - pc):idx]
                    zpad = pc - cache_pre.shape[-1]
                chunk = torch.cat([torch.zeros(1, mel.shape[1], zpad), cache_pre, chunk], -1)
                idx += shift
                last = idx >= T
                ret = enc.cache_aware_stream_step(
                    processed_signal=chunk,
                    processed_signal_length=torch.tensor([chunk.shape[-1]]),
                    cache_last_channel=cch, cache_last_time=ctime, cache_last_channel_len=clen,
                    keep_all_outputs=last, drop_extra_pre_encoded=0 if first else None)
                o, ol, cch, ctime, clen = ret
                o = o[:, :, :int(ol[0])]
                outs.append(o[0].T.numpy())
                chunks.setdefault(tuple(ctx), []).append(o.clone())
                frames.append(o.shape[-1])
                lens.append(int(clen[0]))
                hyp = greedy(dec, joint, o, partial=hyp, blank=blank)
                ntok.append(len(hyp.y_sequence))
                step += 1
                if step == 1:  # the caches' valid rows only (the rest is zeros)
                    g[key + "cache_channel_1"] = cch[:, 0, cch.shape[2] - lens[0]:].numpy()
                    g[key + "cache_time_1"] = ctime[:, 0].numpy()
            g[key + "enc"] = np.concatenate(outs, 0)
            g[key + "chunk_frames"] = np.array(frames, dtype=np.int32)
            g[key + "channel_len"] = np.array(lens, dtype=np.int32)
            g[key + "cache_channel_last"] = cch[:, 0, cch.shape[2] - lens[-1]:].numpy()
            g[key + "cache_time_last"] = ctime[:, 0].numpy()
            g[key + "tokens"] = np.array(hyp.y_sequence, dtype=np.int32).reshape(-1)
            g[key + "tokens_per_step"] = np.array(ntok, dtype=np.int32)
            print("%s: %d steps, %d frames, tokens %s" % (key, step, sum(frames),
                                                           [int(t) for t in hyp.y_sequence]))

        # one prediction-network step and joint for the scorer test
        gp, st = dec.predict(None, None, add_sos=False, batch_size=1)
        g["pred/start_out"] = gp[0, 0].numpy()
        tk = torch.tensor([[5]])
        gp2, st2 = dec.predict(tk, st, add_sos=False, batch_size=1)
        g["pred/tok5_out"] = gp2[0, 0].numpy()
        g["pred/tok5_h"] = st2[0][:, 0].numpy()
        g["pred/tok5_c"] = st2[1][:, 0].numpy()
        f = torch.from_numpy(g["offline/70_0/encoder"][:1])[None]
        g["pred/joint_f0_tok5"] = joint.joint(f, gp2)[0, 0, 0].numpy()

    with h5py.File(os.path.join(out_dir, "golden.h5"), "w") as f:
        for k in sorted(g):
            a = np.asarray(g[k])
            if a.dtype == np.float64:
                a = a.astype(np.float32)
            f.create_dataset(k, data=a)
    print("offline tokens", [int(t) for t in g["offline/tokens"]])

    if args.nemo:
        write_nemo(os.path.join(out_dir, "rand.nemo"), enc, dec, joint, cfg)

    tdt_goldens(out_dir, tensors, cfg, dec, torch.from_numpy(g["offline/70_0/encoder"]), chunks,
                blank)


def tune_tdt(tj, dec, enc_out, blank):
    """Random TDT joints are degenerate: the encoder frame decides both the token and the
    duration, so a token of duration 0 is emitted again and again on its frame (max_symbols
    times). Split the joint's hidden units: the first half is driven by the encoder frame and
    feeds the token / blank logits, the second half by the prediction network and feeds the
    duration logits (so emitting a token changes the next duration); centre the duration logits
    over the frames and put the blank logit at the 30th percentile of the token margin at the
    start state. Weights rounded to f16 afterwards (the stored precision)."""
    h2 = tj.enc.weight.shape[0] // 2
    with torch.no_grad():
        tj.enc.weight[:h2] *= 4.0
        tj.pred.weight[:h2] *= 0.25
        tj.pred.weight[h2:] *= 2.0
        w = tj.joint_net[-1].weight
        w[:blank + 1, h2:] *= 0.2
        w[blank + 1:, :h2] *= 0.2
        gp, _ = dec.predict(None, None, add_sos=False, batch_size=1)
        lg = tj.joint(enc_out[None], gp)[0, :, 0]
        margin = lg[:, :blank].max(-1).values - lg[:, blank]
        b = tj.joint_net[-1].bias
        b[blank] += torch.quantile(margin, 0.3)
        b[blank + 1:] -= lg[:, blank + 1:].mean(0)
        for p in tj.parameters():
            p.copy_(p.half().float())


def tdt_goldens(out_dir, tensors, cfg, dec, enc_out, chunks, blank):
    """rand_tdt.h5 and golden_tdt.h5 (see the module docstring). enc_out [T, d]: the offline
    [70,0] encoder output; chunks: per context the streaming steps' outputs [1, d, t]."""
    nd = len(TDT_DURATIONS)
    tj = RNNTJoint(jointnet={"encoder_hidden": SHAPE["d_model"], "pred_hidden": SHAPE["pred_hidden"],
                             "joint_hidden": SHAPE["joint_hidden"], "activation": "relu",
                             "dropout": 0.2},
                   num_classes=SHAPE["vocab_size"], num_extra_outputs=nd)
    tj.eval()
    tj.log_softmax = False  # raw logits (NeMo's CPU default would log_softmax all V+1+5 jointly)
    randomize({"joint": tj}, TDT_SEED)
    tune_tdt(tj, dec, enc_out, blank)
    t_tensors = {k: v for k, v in tensors.items() if not k.startswith("joint.")}
    for k, v in tj.state_dict().items():
        t_tensors["joint." + k] = v.detach().numpy().astype(np.float32)
    t_cfg = dict(cfg, tdt_durations=TDT_DURATIONS)
    tok = {"type": "sentencepiece", "pieces": pieces(SHAPE["vocab_size"])}
    srkit_h5.write_model(os.path.join(out_dir, "rand_tdt.h5"), "fastconformer_rnnt", t_cfg, t_tensors,
                         dtype="f16", tokenizer=tok,
                         source="random-init NeMo 3.0.0 modules, seeds 1234 and %d (TDT joint; "
                                "scripts/gen_golden_fastconformer.py)" % TDT_SEED,
                         license="random weights (no licence needed)", checksum=False)
    g = {}
    with torch.no_grad():
        # offline: GreedyTDTInfer, every joint evaluation recorded
        greedy = GreedyTDTInfer(dec, tj, blank_index=blank, durations=TDT_DURATIONS,
                                max_symbols_per_step=10, include_duration=True)
        steps_t, steps_l = [], []
        joint_step = greedy._joint_step

        def record(f, gg, log_normalize=None):
            r = joint_step(f, gg, log_normalize)
            hit = (enc_out == f.reshape(1, -1)).all(1).nonzero()
            steps_t.append(int(hit[0, 0]))
            steps_l.append(r.reshape(-1).numpy().copy())
            return r
        greedy._joint_step = record
        x = enc_out.T[None].contiguous()
        lens = torch.tensor([enc_out.shape[0]])
        (hyps,) = greedy(encoder_output=x, encoded_lengths=lens)
        greedy._joint_step = joint_step
        h = hyps[0]
        g["offline/steps_t"] = np.array(steps_t, dtype=np.int32)
        g["offline/steps_logits"] = np.stack(steps_l).astype(np.float32)
        g["offline/tokens"] = np.array([int(t) for t in h.y_sequence], dtype=np.int32)
        g["offline/timestamps"] = np.array([int(t) for t in h.timestamp], dtype=np.int32)
        g["offline/durations"] = np.array([int(t) for t in h.token_duration], dtype=np.int32)
        ll = GreedyBatchedTDTInfer(dec, tj, blank_index=blank, durations=TDT_DURATIONS,
                                   max_symbols_per_step=10, include_duration=True,
                                   use_cuda_graph_decoder=False)
        (lh,) = ll(encoder_output=x, encoded_lengths=lens)
        for name, a in (("tokens", lh[0].y_sequence), ("timestamps", lh[0].timestamp),
                        ("durations", lh[0].token_duration)):
            assert [int(t) for t in a] == g["offline/" + name].tolist(), "label looping differs: " + name
        L = g["offline/steps_logits"]
        k = L[:, :blank + 1].argmax(1)
        d = np.array(TDT_DURATIONS)[L[:, blank + 1:].argmax(1)]
        print("TDT offline: %d joint steps, %d blank, %d token (%d of duration 0), durations %s; "
              "tokens %s" % (len(L), (k == blank).sum(), (k != blank).sum(),
                             ((k != blank) & (d == 0)).sum(), np.bincount(d, minlength=nd).tolist(),
                             g["offline/tokens"].tolist()))
        # streaming: the label-looping computer with its state carried from chunk to chunk (what
        # GreedyBatchedTDTInfer does under conformer_stream_step, without the hypothesis merge
        # that drops token durations), and GreedyTDTInfer with partial hypotheses
        comp = ll.decoding_computer
        after_projection = tj.joint_after_projection
        for ctx in CONTEXTS:
            key = "stream/%d_%d/" % tuple(ctx)
            state, toks, ts, durs, jumps = None, [], [], [], []
            restart = None
            steps_t, steps_l, base = [], [], 0
            for o in chunks[tuple(ctx)]:
                n = torch.tensor([o.shape[-1]])
                prev = comp.merge_to_batched_state([state]) if state is not None else None
                proj = tj.project_encoder(o.transpose(1, 2))[0]

                def record_ll(f, gg, proj=proj, base=base):
                    r = after_projection(f, gg)
                    hit = (proj == f.reshape(1, -1)).all(1).nonzero()
                    steps_t.append(base + int(hit[0, 0]))
                    steps_l.append(r.reshape(-1).numpy().copy())
                    return r
                tj.joint_after_projection = record_ll
                bh, bs = comp(x=o.transpose(1, 2), out_len=n, prev_batched_state=prev)
                tj.joint_after_projection = after_projection
                base += o.shape[-1]
                hyp = rnnt_utils.batched_hyps_to_hypotheses(bh, batch_size=1)[0]
                state = comp.split_batched_state(bs)[0]
                toks += [int(t) for t in hyp.y_sequence]
                ts += [int(t) for t in hyp.timestamp]
                durs += [int(t) for t in hyp.token_duration]
                jumps.append(int(state.time_jump))
                (rh,) = greedy(encoder_output=o, encoded_lengths=n,
                               partial_hypotheses=[restart] if restart is not None else None)
                restart = rh[0]
            g[key + "tokens"] = np.array(toks, dtype=np.int32)
            g[key + "timestamps"] = np.array(ts, dtype=np.int32)
            g[key + "durations"] = np.array(durs, dtype=np.int32)
            g[key + "time_jump"] = np.array(jumps, dtype=np.int32)
            g[key + "steps_t"] = np.array(steps_t, dtype=np.int32)
            g[key + "steps_logits"] = np.stack(steps_l).astype(np.float32)
            g[key + "tokens_restart"] = np.array([int(t) for t in restart.y_sequence], dtype=np.int32)
            print("TDT %s%d tokens, carried jumps %d, restart-per-chunk decode %s" % (
                key, len(toks), sum(j > 0 for j in jumps[:-1]),
                "same" if g[key + "tokens_restart"].tolist() == toks else
                "differs (%d tokens)" % len(g[key + "tokens_restart"])))
    with h5py.File(os.path.join(out_dir, "golden_tdt.h5"), "w") as f:
        for k in sorted(g):
            f.create_dataset(k, data=np.asarray(g[k]))


def write_nemo(path, enc, dec, joint, cfg):
    """A .nemo archive as NeMo saves one: model_config.yaml, model_weights.ckpt (torch state
    dict with encoder./decoder./joint. prefixes) and the tokenizer as a SentencePiece
    ModelProto (built with sentencepiece's own protobuf module, checked by loading it with
    SentencePieceProcessor) plus its .vocab text. Byte-reproducible: tar and gzip without
    timestamps."""
    import gzip
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as spm_pb2
    sd = {}
    for prefix, m in (("encoder", enc), ("decoder", dec), ("joint", joint)):
        for k, v in m.state_dict().items():
            sd["%s.%s" % (prefix, k)] = v.detach().clone()
    buf = io.BytesIO()
    torch.save(sd, buf)
    ps = pieces(cfg["vocab_size"])
    mp = spm_pb2.ModelProto()
    for i, p in enumerate(ps):
        sp = mp.pieces.add()
        sp.piece = p
        sp.score = 0.0 if i == 0 else -float(i)
        sp.type = sp.UNKNOWN if p == "<unk>" else sp.NORMAL
    mp.trainer_spec.model_type = mp.trainer_spec.BPE
    mp.trainer_spec.vocab_size = len(ps)
    mp.trainer_spec.unk_id = 0
    mp.trainer_spec.bos_id = -1
    mp.trainer_spec.eos_id = -1
    mp.trainer_spec.pad_id = -1
    mp.normalizer_spec.name = "identity"
    model = mp.SerializeToString()
    check = sentencepiece.SentencePieceProcessor(model_proto=model)
    assert [check.id_to_piece(i) for i in range(check.get_piece_size())] == ps
    vocab = "".join("%s\t%d\n" % (p, 0 if i == 0 else -i) for i, p in enumerate(ps))
    yaml = nemo_yaml(cfg)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in (("model_config.yaml", yaml.encode()),
                           ("model_weights.ckpt", buf.getvalue()),
                           ("0123abcd_tokenizer.model", model),
                           ("0123abcd_tokenizer.vocab", vocab.encode())):
            ti = tarfile.TarInfo("./" + name)
            ti.size = len(data)
            ti.mtime = 0
            t.addfile(ti, io.BytesIO(data))
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
        g.write(raw.getvalue())


def nemo_yaml(c):
    ctx = "[" + ", ".join("[%d, %d]" % tuple(a) for a in CONTEXTS) + "]"
    return """sample_rate: 16000
tokenizer:
  dir: null
  type: bpe
  model_path: nemo:0123abcd_tokenizer.model
  spe_tokenizer_vocab: nemo:0123abcd_tokenizer.vocab
preprocessor:
  _target_: nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor
  sample_rate: 16000
  normalize: NA
  window_size: 0.025
  window_stride: 0.01
  window: hann
  features: %d
  n_fft: 512
  dither: 1.0e-05
  pad_to: 0
encoder:
  _target_: nemo.collections.asr.modules.ConformerEncoder
  feat_in: %d
  feat_out: -1
  n_layers: %d
  d_model: %d
  subsampling: dw_striding
  subsampling_factor: 8
  subsampling_conv_channels: %d
  causal_downsampling: true
  ff_expansion_factor: %d
  self_attention_model: rel_pos
  n_heads: %d
  att_context_size: %s
  att_context_style: chunked_limited
  xscaling: true
  untie_biases: true
  pos_emb_max_len: 5000
  conv_kernel_size: %d
  conv_norm_type: layer_norm
  conv_context_size: causal
decoder:
  _target_: nemo.collections.asr.modules.RNNTDecoder
  vocab_size: %d
  blank_as_pad: true
  prednet:
    pred_hidden: %d
    pred_rnn_layers: %d
joint:
  _target_: nemo.collections.asr.modules.RNNTJoint
  num_classes: %d
  jointnet:
    joint_hidden: %d
    activation: relu
    dropout: 0.2
decoding:
  strategy: greedy_batch
  greedy:
    max_symbols: 10
""" % (c["n_mels"], c["n_mels"], c["n_layers"], c["d_model"], c["subsampling_conv_channels"],
       c["d_ff"] // c["d_model"], c["n_heads"], ctx, c["conv_kernel_size"], c["vocab_size"],
       c["pred_hidden"], c["pred_rnn_layers"], c["vocab_size"], c["joint_hidden"])


if __name__ == "__main__":
    main()
