/*
 * whisper.h — private header of the Whisper backend (models/whisper/): the weights view, the
 * per-stream state and the internal entry points the tests call directly (encoder over mel
 * frames, streaming conv stem, decoder logits). Not installed; only the .c files of models/whisper/ and
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

/* A Linear layer: w [out, in] in the kernel table's weight layout; b [out] or NULL (attn key). */
typedef struct { const sr_kweight *w; const float *b; } wh_lin;
typedef struct { const float *g, *b; } wh_ln;  /* LayerNorm gain and bias [d] */

typedef struct {
    wh_ln attn_ln;
    wh_lin q, k, v, o;
    wh_ln cross_ln;          /* decoder blocks only */
    wh_lin cq, ck, cv, co;
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
    /* weights (views into m->tensors) */
    wh_lin conv1;                   /* w [d, n_mels * 3] (stored [d, n_mels, 3]), b [d] */
    wh_lin conv2;                   /* w [d, d * 3], b [d] */
    const float *enc_pos;           /* [n_audio_ctx, d] */
    wh_block *enc, *dec;
    wh_ln ln_post, dec_ln;
    const sr_kweight *tok_emb;      /* [n_vocab, d]: embedding lookups and the tied logits */
    const float *dec_pos;           /* [n_text_ctx, d] */
    sr_mel *mel;                    /* front-end with the file's filterbank */
    const sr_kernels *k;
} wh_model;

/* Scratch for one forward pass of up to `rows` query rows over up to `keys` keys. */
typedef struct {
    int rows, keys, d, colw, col_rows;
    float *h, *q, *a, *kv, *mlp; /* [rows, d] x4 (kv: new K/V rows), [rows, 4d] */
    float *col;                  /* [col_rows = 2 rows + 16, 3 max(n_mels, d)] stem im2col */
    float *edge;                 /* [3, max(n_mels, d)] a stem row's inputs with zero padding */
    int64_t *lo, *hi;            /* [rows] key range of each query row (attention) */
    int *klim;                   /* [rows] the decoder's causal key limits */
} wh_scratch;

sr_status wh_scratch_init(wh_scratch *s, const wh_model *w, int rows, int keys);
void wh_scratch_free(wh_scratch *s);
size_t wh_scratch_bytes(const wh_scratch *s);

/* ---- wh_load.c ---- */
/* Parse and check the config, load every tensor (f32), build the mel front-end; m->impl. */
sr_status wh_model_load(sr_model *m, sr_h5 *f);
void wh_model_unload(sr_model *m);

/* ---- wh_ops.c: the backend's calls of the kernel table ---- */
/* LayerNorm with Whisper's eps over n rows of width d (k->norm). */
sr_status wh_layernorm(const sr_kernels *k, const float *x, int n, int d, wh_ln p, float *y);
/* y[n, out] = act(x[n, in] · W^T + b); beta 0 overwrites y, 1 accumulates (k->gemm). */
sr_status wh_linear(const sr_kernels *k, const float *x, int n, wh_lin L, sr_act act, float beta,
                    float *y);
/* Projected K or V rows x [n, d] written to positions p0.. of `slot` in layer l of pool P. */
sr_status wh_kv_put(const sr_kernels *k, sr_kpool *P, int l, int slot, int64_t p0, const float *x,
                    int n);
/* Multi-head attention (k->attn) of q [n, d] at positions p0.. over slot `slot` of layer l of
 * pools K / V: row i attends to key positions [0, klim[i]) (klim NULL: [0, nk)). out [n, d]. */
sr_status wh_attend(const sr_kernels *k, wh_scratch *s, int n_head, int d, const float *q, int n,
                    int64_t p0, const sr_kpool *K, const sr_kpool *V, int l, int slot, int nk,
                    const int *klim, float *out);

/* ---- wh_encoder.c ---- */
/* Whole-signal conv stem: mel [L, n_mels] -> x [ceil(L/2), d] (GELU applied, no positions). */
sr_status wh_stem(const wh_model *w, wh_scratch *s, const float *mel, int L, float *x);

/* Streaming conv stem: mel frames go in as they arrive; encoder-input frames come out as soon as
 * every mel frame they read exists (one mel frame of right context per conv); at final the
 * right edge is zero-padded as the whole-signal stem pads it, so the concatenated output equals
 * wh_stem on the concatenated input. */
typedef struct {
    int n_mels, d;
    float *mel;   int mel_n;  int64_t mel_base;  /* held mel frames [mel_base, mel_base + n) */
    float *c1;    int c1_n;   int64_t c1_base;   /* held conv1 outputs */
    int64_t n_c1, n_out;                         /* conv1 / conv2 outputs produced */
    int cap;                                     /* rows each buffer holds */
} wh_stem_stream;

sr_status wh_stem_stream_init(wh_stem_stream *st, const wh_model *w, int max_in);
void wh_stem_stream_reset(wh_stem_stream *st);
void wh_stem_stream_free(wh_stem_stream *st);
/* Feed n mel frames (at most the max_in given at init); writes the new frames to x (room for
 * max_in / 2 + 2 rows) and their count to *n_out. */
sr_status wh_stem_stream_feed(wh_stem_stream *st, const wh_model *w, wh_scratch *s,
                              const float *mel, int n, int final, float *x, int *n_out);

/* Encoder blocks over n new frames x [n, d] (stem output + positions already added) at
 * positions p0 .. p0 + n - 1 of a context whose K/V for [0, p0) are in slot `slot` of the
 * pools kc / vc ([n_audio_layer] layers of n_audio_ctx rows of width d); the new K/V are
 * written there. klim: per-row key limit (NULL: every row sees [0, p0 + n)). x is overwritten
 * with ln_post(output). */
sr_status wh_encode(const wh_model *w, wh_scratch *s, float *x, int n, int p0, sr_kpool *kc,
                    sr_kpool *vc, int slot, const int *klim);

/* ---- wh_decoder.c ---- */
/* Decoder over tokens tok[c0 .. n) with self-attention K/V for [0, c0) in slot sslot of the
 * pools sk / sv ([n_text_layer] layers of >= n rows: n_text_ctx for a beam slot, 1 for the
 * lone SOT position of the no-speech probability; positions c0.. are written), cross-attention
 * K/V in slot xslot of the pools xk / xv ([n_text_layer] layers of n_audio_ctx rows) over
 * enc_len frames. Hidden rows after the final LayerNorm of positions [c0, n) go to s->h. */
sr_status wh_decode(const wh_model *w, wh_scratch *s, const int32_t *tok, int c0, int n,
                    sr_kpool *sk, sr_kpool *sv, int sslot, const sr_kpool *xk,
                    const sr_kpool *xv, int xslot, int enc_len);
/* logits[r, vocab] = h[r, d] · token_embedding^T for r < rows. */
sr_status wh_logits(const wh_model *w, const float *h, int rows, float *logits);
/* Cross-attention K/V of encoder frames enc [n, d] at positions p0.. of slot xslot of the
 * pools xk / xv (every layer); s->kv is the staging scratch (s->rows >= n). */
sr_status wh_cross_kv(const wh_model *w, wh_scratch *s, const float *enc, int n, int p0,
                      sr_kpool *xk, sr_kpool *xv, int xslot);

/* ---- whisper.c: streams and the AED scorer ---- */
enum { WH_OFFLINE = 0, WH_WHISPERRT = 1, WH_REENCODE = 2 };

typedef struct {
    int32_t *tok;   /* [n_text_ctx] decoder inputs (prompt + window text) whose K/V are held */
    int n;          /* valid cached positions */
    int win;        /* window of the held K/V (-1: none) */
    uint64_t ver;   /* audio version they were computed under */
} wh_slot;       /* its K/V: slot i of the stream's sk / sv pools */

typedef struct wh_stream {
    const sr_model *m;
    const wh_model *w;
    int strategy, kv_keep;
    int64_t samples_in;         /* audio consumed, for the scorer's aed_audio_ms */
    int tau, tau0;              /* whisperrt block sizes in encoder frames */
    /* whisperrt front-end */
    sr_mel_stream *ms;
    float *mel_new; int mel_cap;
    wh_stem_stream stem;
    float *pend; int pend_n, pend_cap; /* stem frames waiting for their block */
    int64_t n_blocks;           /* blocks encoded in the stream */
    /* encoder context of the current window */
    sr_kpool *ek, *ev;          /* [n_audio_layer] x 1 slot x [n_audio_ctx][d] */
    int enc_len;
    float *x;                   /* [rows, d] encoder rows being computed */
    /* windows: cross K/V of the held ones [win_first, n_win) */
    sr_kpool *xk, *xv;          /* [n_text_layer] x win_cap slots x [n_audio_ctx][d] */
    int *win_len;               /* [win_cap] encoder frames of each held window */
    int win_cap, win_first, n_win;
    uint64_t ver;               /* bumped whenever held cross K/V change */
    /* buffered audio (offline: all of it; reencode: the current window) */
    float *audio; size_t audio_n, audio_cap;
    wh_slot slot[WH_MAX_SLOTS];
    int n_slots;
    sr_kpool *sk, *sv;          /* decoder self-attention: [n_text_layer] x n_slots x n_text_ctx */
    wh_scratch es, ds;          /* encoder and decoder scratch */
    int32_t *tok;               /* [n_text_ctx] decoder input being built */
    int *pwin, *ploc;           /* [max prefix + 1] window / local index of each position */
    int pcap;
    /* no-speech probability: SOT's one-row self-attention K/V [n_text_layer][1][d], its logits
     * [n_vocab], and the last value with the window and audio version it was computed for */
    sr_kpool *ns_k, *ns_v;      /* [n_text_layer] x 1 slot x 1 row */
    float *ns_row;
    int ns_win;                 /* -1: none cached */
    uint64_t ns_ver;
    float ns_p;
} wh_stream;

extern const sr_model_ops sr_whisper_ops;

#endif /* SR_WHISPER_H */
