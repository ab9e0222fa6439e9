/*
 * whisper.h — private header of the Whisper backend (models/whisper/): the weights view, the
 * batch context (cache pools and scratch shared by the streams stepped together), the per-stream
 * state and the internal entry points the tests call directly (encoder over mel frames,
 * streaming conv stem, decoder logits, all over batches of sequences). Not installed; only the .c files of models/whisper/ and
 * tests/test_whisper.c include it.
 *
 * Shapes follow openai-whisper: every Linear weight is [out, in] (so products are x · W^T),
 * activations are row-major [rows, d].
 */
#ifndef SR_WHISPER_H
#define SR_WHISPER_H

#include "../../core/plugin.h"
#include "../../kernels/ops.h"

#include <stdint.h>

#define WH_MAX_SLOTS 16    /* AED decoder caches per stream */
#define WH_LN_EPS 1e-5f
#define WH_LOOKAHEAD 200   /* samples beyond a chunk that complete its last encoder frame */
#define WH_MAX_TRAINED 16  /* entries of config.streaming.chunk_ms */

/* A Linear layer: w [out, in] in the kernel table's weight layout; b [out] or NULL (attn key). */
typedef struct { const sr_kweight *w; const float *b; } wh_lin;
typedef struct { const float *g, *b; } wh_ln;  /* LayerNorm gain and bias [d] */

typedef struct {
    wh_ln attn_ln;
    wh_lin qkv, o;           /* qkv: query | key | value stacked [3d, d] (sr_model_weight_cat),
                                one product; the key's bias entries -0 (it has none) */
    wh_ln cross_ln;          /* decoder blocks only */
    wh_lin cq, ckv, co;      /* ckv: key | value stacked [2d, d], over the encoder output */
    wh_ln mlp_ln;
    wh_lin fc1, fc2;         /* [4d, d], [d, 4d] */
} wh_block;

typedef struct wh_model {
    /* openai ModelDimensions */
    int n_mels, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
    int n_vocab, n_text_ctx, n_text_state, n_text_head, n_text_layer;
    int d;                    /* == n_audio_state == n_text_state */
    int multilingual;
    /* special tokens */
    int eot, sot, transcribe, translate, sot_lm, sot_prev, no_speech, no_timestamps;
    int timestamp_begin, language_first;
    int32_t prompt[4];        /* SOT [, language, transcribe], no_timestamps */
    int prompt_len;
    int brk;                  /* window-break token: "<|W.00|>" = timestamp_begin + n_audio_ctx */
    int text_cap;             /* text tokens per window: n_text_ctx / 2 (openai's sample_len) */
    int hop, window_samples;  /* window = 2 * n_audio_ctx mel frames of `hop` samples */
    uint8_t *suppress;        /* [n_vocab] 1 = -inf at every step */
    uint8_t *suppress_begin;  /* [n_vocab] 1 = also -inf at a window's first text position */
    const float *mask;        /* [n_vocab] table: -inf where suppress, else 0 (added to logits) */
    const float *mask_begin;  /* [n_vocab] table: -inf where only suppress_begin, else 0 */
    const float *ninf;        /* [1] table: -inf (EOT's place in a closed window's row) */
    /* config.streaming (docs/whisper.md): weights trained for the block-causal encoder
     * (WhisperRT) pick whisperrt + stable_greedy at a trained chunk size by default */
    int causal;               /* streaming.causal; 0 without the block */
    int trained_ms[WH_MAX_TRAINED]; /* streaming.chunk_ms (causal only); [0] is the default */
    int n_trained;
    int trained_first_ms;     /* streaming.first_chunk_ms, 0 when absent */
    /* weights (views into m->tensors) */
    wh_lin conv1;                   /* w [d, 3 n_mels] tap-major (stored [d, n_mels, 3]), b [d] */
    wh_lin conv2;                   /* w [d, 3 d] tap-major, b [d] */
    const float *enc_pos;           /* [n_audio_ctx, d] */
    wh_block *enc, *dec;
    wh_ln ln_post, dec_ln;
    const sr_kweight *tok_emb;      /* [n_vocab, d]: embedding lookups and the tied logits */
    const float *dec_pos;           /* [n_text_ctx, d] */
    sr_mel *mel;                    /* front-end with the file's filterbank */
    const sr_kernels *k;
} wh_model;

/* Scratch for one forward pass of up to `rows` query rows (of all sequences together) over up
 * to `keys` keys, with the sr_kbatch arrays of up to `rows` sequences. */
typedef struct {
    const sr_kernels *k;         /* the table whose memory the float buffers are */
    int rows, keys, d, colw, col_rows;
    float *h, *q, *a, *x, *mlp;  /* [rows, d] x4 (x: the decoder's hidden rows), [rows, 4d] (table) */
    float *col;                  /* [col_rows = 2 rows + 16, 3 max(n_mels, d)] stem input
                                    matrix: each row three input rows side by side (table) */
    float *zero;                 /* [max(n_mels, d)] zeros: the stem's padding rows (table) */
    const float **cp;            /* [3 col_rows] the stem's input row pointers (host) */
    int64_t *lo, *hi, *hi2;      /* [rows] key ranges of each query row (attention) */
    int *row0;                   /* [rows + 1] first row of each sequence (sr_kbatch) */
    int *slot, *slot2;           /* [rows] each sequence's slot in two pools (self, cross) */
    int32_t *ids;                /* [rows] the decoder rows' tokens (one gather for all) */
    const float **prow;          /* [rows] table row pointers (one copy_rows for all) */
    int64_t *pos;                /* [rows] each sequence's first position */
} wh_scratch;

sr_status wh_scratch_init(wh_scratch *s, const wh_model *w, int rows, int keys);
void wh_scratch_free(wh_scratch *s);
size_t wh_scratch_bytes(const wh_scratch *s);

/* ---- wh_load.c ---- */
/* Parse and check the config, load every tensor (f32), build the mel front-end; m->impl. */
sr_status wh_model_load(sr_model *m, sr_h5 *f);
void wh_model_unload(sr_model *m);
/* The ops table's `defaults` (whisper.c): strategy, decoder and chunk sizes for what cfg leaves
 * unset, from config.streaming; stream_open resolves its own unset fields through it too. */
void wh_defaults(const sr_model *m, sr_use use, const sr_stream_config *cfg, sr_defaults *out);

/* ---- wh_ops.c: the backend's calls of the kernel table ---- */
/* LayerNorm with Whisper's eps over n rows of width d (k->norm). */
sr_status wh_layernorm(const sr_kernels *k, const float *x, int n, int d, wh_ln p, float *y);
/* y[n, out] = act(x[n, in] · W^T + b); beta 0 overwrites y, 1 accumulates (k->gemm). */
sr_status wh_linear(const sr_kernels *k, const float *x, int n, wh_lin L, sr_act act, float beta,
                    float *y);
/* Projected K and V rows xk, xv [rows of b, d] (row stride ldx) written to layer l of pools K
 * and V: sequence s's rows go to slot b->slot[s] at positions b->pos[s].. (one k->kv_write2). */
sr_status wh_kv_put(const sr_kernels *k, sr_kpool *K, sr_kpool *V, int l, const sr_kbatch *b,
                    const float *xk, const float *xv, int ldx);
/* Multi-head attention (one k->attn for every sequence of b) of q [rows of b, d] (row stride
 * ldq) over layer l of pools K / V: query row r of sequence s attends to key positions
 * [lo[r], hi[r]) of slot b->slot[s]. out [rows of b, d]. */
sr_status wh_attend(const sr_kernels *k, int n_head, int d, const float *q, int ldq,
                    const sr_kbatch *b, const int64_t *lo, const int64_t *hi, const sr_kpool *K,
                    const sr_kpool *V, int l, float *out);
/* Append a sequence of `rows` rows to the scratch's sr_kbatch arrays (*n_seq sequences so far,
 * row0[0] = 0 always): slot / slot2 its slots in two pools, pos its first position.
 * SR_ERR_ARG when the rows or sequences exceed the scratch. */
sr_status wh_kbatch_add(wh_scratch *s, int *n_seq, int rows, int slot, int slot2, int64_t pos);

/* ---- wh_encoder.c ---- */
/* Whole-signal conv stem: mel [L, n_mels] -> x [ceil(L/2), d] (GELU applied, no positions). */
sr_status wh_stem(const wh_model *w, wh_scratch *s, const float *mel, int L, float *x);

/* Streaming conv stem: mel frames go in as they arrive; encoder-input frames come out as soon as
 * every mel frame they read exists (one mel frame of right context per conv); at final the
 * right edge is zero-padded as the whole-signal stem pads it, so the concatenated output equals
 * wh_stem on the concatenated input. Many streams go through at once: the new mel frames of all
 * of them in one upload, each conv as one row gather (copy_rows) and one gemm over all their
 * rows, the rows each stream carries to its next feed (at most two mel frames and two conv1
 * outputs, position p in ring row p % 2 of its slot) written by one kv_write each. So the op
 * calls of a feed do not grow with the number of streams. */
typedef struct {
    sr_kpool *mel, *c1;  /* carried rows: [1][slots][2][n_mels], [1][slots][2][d] (f32) */
    int slots, max_in;   /* streams; mel frames one stream may feed at once */
    float *nm;           /* [slots * max_in, n_mels] the feed's new mel frames (table) */
    float *hnm;          /* the same, staged on the host */
    float *c1new;        /* [slots * (max_in + 1), d] the feed's conv1 outputs (table) */
    float *carry;        /* [2 slots, max(n_mels, d)] carried rows being written (table) */
    const float **rp;    /* [2 slots] their sources (host) */
    int *row0;           /* [slots + 1] host: a kv_write's rows per stream */
    int *slot;           /* [slots] */
    int64_t *pos;        /* [slots] */
    int64_t *off;        /* [9 slots] host: a feed's per-stream offsets, row ranges, totals */
} wh_stem_ctx;

/* One stream's position in the stem: it owns slot `slot` of a context's pools. */
typedef struct {
    int slot;
    int64_t n_mel, n_c1, n_out; /* mel frames fed, conv1 / conv2 outputs produced */
} wh_stem_stream;

sr_status wh_stem_ctx_init(wh_stem_ctx *c, const wh_model *w, int slots, int max_in);
void wh_stem_ctx_free(wh_stem_ctx *c, const wh_model *w);
size_t wh_stem_ctx_bytes(const wh_stem_ctx *c, const wh_model *w);
/* Back to the start of a stream (its carried rows are never read before being written). */
void wh_stem_stream_reset(wh_stem_stream *st);
/* Feed n[i] host mel frames (at most max_in) mel[i] to each of `count` streams of distinct
 * slots: their new encoder-input frames go to x stream after stream (room for the sum of
 * n[i] / 2 + 2 rows), n_out[i] of stream i. final[i]: the stream's last frames (right edge
 * padded). */
sr_status wh_stem_feed(const wh_model *w, wh_scratch *s, wh_stem_ctx *c,
                       wh_stem_stream *const *st, const float *const *mel, const int *n,
                       const int *final, int count, float *x, int *n_out);

/* One sequence of new encoder frames: n frames at positions p0 .. p0 + n - 1 of the context
 * held in slot `slot` of the encoder pools (its K/V for [0, p0) already there). */
typedef struct { int n, p0, slot; } wh_eseq;

/* Encoder blocks over the new frames of n_seq sequences, x [sum of n, d] (sequence after
 * sequence; stem output + positions already added), one gemm per Linear and one k->attn per
 * layer over all of them. K/V pools kc / vc: [n_audio_layer] layers of slots of n_audio_ctx
 * rows of width d; each sequence's new K/V are written to its slot. klim: per-row absolute
 * key limit (NULL: every row of a sequence sees [0, p0 + n)). x is overwritten with
 * ln_post(output). */
sr_status wh_encode(const wh_model *w, wh_scratch *s, float *x, const wh_eseq *q, int n_seq,
                    sr_kpool *kc, sr_kpool *vc, const int *klim);

/* ---- wh_decoder.c ---- */
/* One decoder sequence: inputs tok[c0 .. n) at positions c0.., its self-attention K/V for
 * [0, c0) held in slot sslot of the self pools (positions c0.. are written there), its
 * cross-attention K/V in slot xslot of the cross pools over enc_len encoder frames. */
typedef struct {
    const int32_t *tok;
    int c0, n;
    int sslot, xslot, enc_len;
} wh_dseq;

/* Decoder over n_seq sequences at once: one gemm per Linear over the rows of all of them, one
 * k->attn per attention. Self pools sk / sv: [n_text_layer] layers of >= n rows (n_text_ctx
 * for a beam slot, 1 for the lone SOT position of the no-speech probability); cross pools
 * xk / xv: [n_text_layer] layers of n_audio_ctx rows. Hidden rows after the final LayerNorm of
 * positions [c0, n) of each sequence, sequence after sequence, go to s->h (sequences with
 * c0 == n contribute none). */
sr_status wh_decode(const wh_model *w, wh_scratch *s, const wh_dseq *q, int n_seq, sr_kpool *sk,
                    sr_kpool *sv, const sr_kpool *xk, const sr_kpool *xv);
/* logits[r, vocab] = h[r, d] · token_embedding^T for r < rows (one gemm). */
sr_status wh_logits(const wh_model *w, const float *h, int rows, float *logits);
/* Cross-attention K/V of the encoder frames of n_seq sequences, enc [sum of n, d]: sequence i's
 * frames go to positions q[i].p0.. of slot xslot[i] of the pools xk / xv (every layer; one gemm
 * stacked projection over all rows); s->mlp is the staging scratch (s->rows >= the rows). */
sr_status wh_cross_kv(const wh_model *w, wh_scratch *s, const float *enc, const wh_eseq *q,
                      const int *xslot, int n_seq, sr_kpool *xk, sr_kpool *xv);

/* ---- whisper.c: batch contexts, streams and the AED scorer ---- */
enum { WH_OFFLINE = 0, WH_WHISPERRT = 1, WH_REENCODE = 2 };

#define WH_BATCH_ROWS 4    /* decoder / logits rows per stream the batch scratch holds at once */

/* A validated stream config (one per batch context; every stream of it uses the same). */
typedef struct {
    int strategy, kv_keep;
    int tau, tau0;          /* whisperrt / reencode block sizes in encoder frames */
    int n_slots;            /* AED decoder caches per stream */
    sr_chunking ck;
} wh_cfg;

/* Batch context: the cache pools of up to max_streams streams (stream slot i owns pool slots
 * i * per-stream count + j) and the scratch they share. Calls that use the shared scratch
 * (process / process_batch, aed_logprobs / aed_logprobs_batch, reset, stream_open) on streams of
 * one context must not overlap; aed_no_speech and aed_audio_ms use only the stream's own state
 * and its own pool slots. Streams are closed before their context. */
typedef struct wh_batch {
    const sr_model *m;
    const wh_model *w;
    wh_cfg cfg;
    int max_streams;
    /* encoder context of each stream's current window: slot i */
    sr_kpool *ek, *ev;          /* [n_audio_layer] x max_streams x [n_audio_ctx][d] */
    /* cross K/V of the held windows: stream i's window hw in slot i * win_cap + hw */
    sr_kpool *xk, *xv;          /* [n_text_layer] x max_streams * win_cap x [n_audio_ctx][d] */
    int win_cap;                /* 1, grown by offline streams that end with more windows */
    /* decoder self-attention: stream i's scorer slot j in pool slot i * n_slots + j */
    sr_kpool *sk, *sv;          /* [n_text_layer] x max_streams * n_slots x [n_text_ctx][d] */
    /* no-speech: SOT's one-row self-attention K/V of stream i in slot i */
    sr_kpool *ns_k, *ns_v;      /* [n_text_layer] x max_streams x 1 row x d */
    /* encoder scratch: whisperrt max_streams * max(tau, tau0) rows (all streams' blocks),
     * offline / reencode n_audio_ctx rows (one window at a time) */
    wh_scratch es;
    float *x;                   /* [es.rows, d] encoder rows being computed (table memory) */
    wh_eseq *eq;                /* [max_streams] blocks of one encoder pass */
    int *exslot;                /* [max_streams] their cross K/V slots */
    /* decoder scratch: max(n_text_ctx, req_max * WH_BATCH_ROWS) rows of all sequences */
    wh_scratch ds;
    int lrows;                  /* max_streams * WH_BATCH_ROWS: logits rows of one gemm */
    float *lh;                  /* [lrows, d] hidden rows staged for the logits gemm (table) */
    float *logits;              /* [lrows, n_vocab] (table memory) */
    float *hlog;                /* [lrows, n_vocab] host copy of the rows on a device, made
                                   when a request first asks for rows (NULL until then) */
    sr_kgraph *g_dec;           /* the record of a decoder pass (aed_pass), NULL until one */
    sr_kgraph *g_enc;           /* the record of a whisperrt encoder round (rt_blocks) */
    float **ldst;               /* [lrows] where each staged row's log-probabilities go */
    const float **lsrc;         /* [lrows] its hidden row in the decoder scratch (table) */
    int *lpos;                  /* [lrows] its window-local text position */
    uint8_t *lclosed;           /* [lrows] 1: its window is not the newest */
    sr_aed_top **ltop;          /* [lrows] where its summary goes (sr_aed_req.top), or NULL */
    int32_t *lprobe;            /* [lrows] the prefix's token at its position, -1 past the end */
    int *lk;                    /* [lrows] its best entries asked for (sr_aed_req.top_k) */
    int32_t **lid;              /* [lrows] where they go (top_id, top_lp rows) */
    float **llp;
    int kcap;                   /* top_k at most: stream.beam + 1 (sr_scorer.aed_top_k_max) */
    const float **gsrc;         /* [2 lrows] the entries each summary gathers (table) */
    void *sum;                  /* [(2 kcap + 2) lrows] words: the summaries' best ids, their
                                   log-probs, the gathered entries (table) */
    uint32_t *hsum;             /* the same, host copy */
    int32_t *tok;               /* [req_max, n_text_ctx] decoder inputs being built */
    wh_dseq *dq;                /* [req_max] sequences of one decoder pass */
    void *plan;                 /* [req_max] per-request plans (whisper.c) */
    int *idx;                   /* [req_max] the request of each sequence of a pass */
    int req_max;                /* aed_logprobs requests per batched call: max_streams x n_slots */
    void **owner;               /* [max_streams] the stream in each slot (NULL: free) */
    /* whisperrt front-end: every stream's streaming stem, and the stem frames that wait for
     * their encoder block (stream i's frame f in ring row f % pend_cap of slot i) */
    int mel_cap, pend_cap;      /* mel frames of one chunk; frames waiting at most */
    wh_stem_ctx stem;
    sr_kpool *pend;             /* [1][max_streams][pend_cap][d] */
    float *xnew;                /* [max_streams * (mel_cap / 2 + 2), d] a feed's new frames (table) */
    wh_stem_stream **rt_stem;   /* [max_streams] the stems of one feed's streams */
    const float **rt_mel;       /* [max_streams] their new mel frames (host) */
    int *rt_n, *rt_nout;        /* [max_streams] mel frames in, stem frames out */
} wh_batch;

typedef struct {
    int32_t *tok;   /* [n_text_ctx] decoder inputs (prompt + window text) whose K/V are held */
    int n;          /* valid cached positions */
    int win;        /* window of the held K/V (-1: none) */
    uint64_t ver;   /* audio version they were computed under */
    int *pwin, *ploc; /* [pcap] window / local index of each position of the slot's request
                       * being planned (aed_prepare): per slot, so that one batched call may
                       * hold requests of one stream on several slots */
    int pcap;
} wh_slot;       /* its K/V: pool slot bslot * n_slots + i of the batch's sk / sv */

/* A stream: its private state; its caches are slot `bslot` of batch context b. */
typedef struct wh_stream {
    const sr_model *m;
    const wh_model *w;
    wh_batch *b;
    int bslot;
    int strategy, kv_keep;
    int64_t samples_in;         /* audio consumed, for the scorer's aed_audio_ms */
    int tau, tau0;              /* whisperrt block sizes in encoder frames */
    /* whisperrt front-end */
    sr_mel_stream *ms;
    float *mel_new; int mel_new_n; /* [b->mel_cap, n_mels] the chunk's mel frames (host) */
    wh_stem_stream stem;        /* in b->stem's slot bslot */
    int64_t pend_done;          /* stem frames encoded (stem.n_out - pend_done wait in b->pend) */
    int64_t n_blocks;           /* blocks encoded in the stream */
    int enc_len;                /* encoder frames of the current window (in b->ek / b->ev) */
    /* windows: cross K/V of the held ones [win_first, n_win) in b->xk / b->xv */
    int *win_len;               /* [win_cap] encoder frames of each held window */
    int win_cap, win_first, n_win;
    uint64_t ver;               /* bumped whenever held cross K/V change */
    /* buffered audio (offline: all of it; reencode: the current window) */
    float *audio; size_t audio_n, audio_cap;
    wh_slot slot[WH_MAX_SLOTS];
    int n_slots;
    /* no-speech probability (computed on the batch's decoder scratch, like every scorer
     * call: one thread at a time per batch): SOT's K/V in slot bslot of b->ns_k / b->ns_v,
     * and the last value with the window and audio version it was computed for */
    int ns_win;                 /* -1: none cached */
    uint64_t ns_ver;
    float ns_p;
} wh_stream;

extern const sr_model_ops sr_whisper_ops;

#endif /* SR_WHISPER_H */
