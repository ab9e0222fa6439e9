/*
 * fc.h — private header of the fastconformer_rnnt backend (models/fastconformer/): NVIDIA
 * NeMo's cache-aware streaming FastConformer encoder with an RNN-T / TDT prediction network and
 * joint (nemotron-speech-streaming). Weights view, per-stream state and the internal entry
 * points tests/test_fastconformer.c calls directly. Not installed.
 *
 * Layout conventions: every Linear weight is [out, in] (products are x · W^T); activations are
 * row-major time-major [T, d]; the conv cache is kept time-major [kernel - 1, d] (NeMo holds
 * it as [d, kernel - 1]); the attention cache is [cache_size, d] with the newest row last.
 */
#ifndef SR_FC_H
#define SR_FC_H

#include "../../core/plugin.h"

#include <stdint.h>

#define FC_LN_EPS 1e-5f
#define FC_MAX_CTX 16        /* att_context_size entries a model may list */
#define FC_MASK_VALUE -10000.0f /* NeMo's INF_VAL for masked scores */
#define FC_LOCAL_BLOCK 64    /* query rows per block of the banded (local) attention */
#define FC_SUB_PIECE 128     /* encoder rows per piece of the offline subsampling */

typedef struct { const float *w, *b; } fc_lin; /* w [out, in]; b [out] or NULL */
typedef struct { const float *g, *b; } fc_ln;  /* LayerNorm gain / bias [d] */

typedef struct {
    fc_ln ff1_ln, att_ln, conv_ln, ff2_ln, out_ln;
    fc_lin ff1a, ff1b, ff2a, ff2b;        /* [d_ff, d], [d, d_ff] */
    fc_lin q, k, v, o;                    /* [d, d] */
    const float *pos_w;                   /* linear_pos [d, d], no bias */
    const float *pos_u, *pos_v;           /* [h, dk] */
    fc_lin pw1;                           /* pointwise_conv1 [2d, d] */
    const float *dw_w, *dw_b;             /* depthwise [d, K] (stored [d, 1, K]), [d] */
    fc_ln cnorm;                          /* conv LayerNorm, or BatchNorm gain / bias */
    const float *bn_mean, *bn_var;        /* BatchNorm running statistics (NULL for LN) */
    fc_lin pw2;                           /* pointwise_conv2 [d, d] */
} fc_layer;

enum { FC_STYLE_CHUNKED = 0, FC_STYLE_REGULAR = 1 };

typedef struct fc_model {
    /* front end */
    sr_mel *mel;
    int n_mels, hop;
    /* encoder */
    int d, n_layers, n_heads, dk, d_ff, kernel;
    int sub_ch, sub_f3;                   /* subsampling channels; frequency bins after 3 convs */
    int xscaling;
    float xscale;                         /* sqrt(d) or 1 */
    int att_style;
    int n_ctx, ctx[FC_MAX_CTX][2];        /* att_context_size list; ctx[0] is the default */
    int local_w[2], local_threshold;      /* banded offline attention window, auto threshold */
    /* prediction network and joint */
    int vocab, blank, pred_hidden, pred_layers, joint_hidden, n_out;
    int n_durations, durations[16], max_symbols;
    /* weights (views into m->tensors) */
    const float *c0_w, *c0_b;             /* conv.0 [C, 1, 3, 3] */
    const float *dw1_w, *dw1_b, *pw1_w, *pw1_b; /* conv.2 [C,1,3,3], conv.3 [C,C,1,1] */
    const float *dw2_w, *dw2_b, *pw2_w, *pw2_b; /* conv.5, conv.6 */
    fc_lin sub_out;                       /* [d, C * F3] */
    fc_layer *L;
    const float *embed;                   /* [vocab + 1, H] */
    const float **lstm_wih, **lstm_whh, **lstm_bih, **lstm_bhh; /* per layer [4H, in], [4H, H], [4H] */
    fc_lin j_enc, j_pred, j_out;          /* [J, d], [J, H], [n_out, J] */
    /* linear_pos applied to the sinusoidal table once per model: per layer, rows for relative
     * positions -pos_neg .. pos_pos (the span every streaming context can ask for) */
    float *pos_tab;                       /* [n_layers][pos_rows][d] */
    int pos_neg, pos_pos, pos_rows;
    const sr_kernels *k;
} fc_model;

/* ---- fc_load.c ---- */
sr_status fc_model_load(sr_model *m, sr_h5 *f);
void fc_model_unload(sr_model *m);
/* Sinusoidal rows of NeMo's RelPositionalEncoding for positions p0, p0 - 1, ..., p0 - n + 1
 * (torch's float32 arithmetic: div_term and the product in float32). out [n, d]. */
void fc_sinusoids(int d, int p0, int n, float *out);

/* ---- fc_encoder.c ---- */
/* Which keys a query may see. Index space: keys 0 .. n_keys - 1 where the first `cache` keys
 * are the attention cache; query i sits at index cache + i. lim_left / lim_right: the
 * att_context_size pair ([-1, -1] = unlimited), style chunked_limited or regular; keys below
 * `first_valid` are unfilled cache rows (always masked). */
typedef struct {
    int left, right, style, cache, first_valid;
    int band;            /* 1: banded local attention (|i - j| window [left, right]) */
} fc_mask;

/* Causal dw_striding subsampling of mel [T, n_mels] -> x [*n_out, d] (before xscaling), as
 * NeMo's ConvSubsampling (is_causal) on a fully valid input: *n_out = T/2+1 applied 3 times.
 * Computed in pieces of FC_SUB_PIECE rows (scratch independent of T), equal to one pass. */
sr_status fc_subsample(const fc_model *w, const float *mel, int T, float *x, int *n_out);
/* The same with caller-owned scratch of fc_subsample_scratch(w, T) floats (streams keep one,
 * so a step allocates nothing). */
sr_status fc_subsample_into(const fc_model *w, const float *mel, int T, float *x, int *n_out,
                            float *scratch);
size_t fc_subsample_scratch(const fc_model *w, int T);
int fc_subsample_len(int T);

/* Workspace of one encoder call: up to `rows` query rows, `keys` key rows (cache + rows),
 * `kb` keys per block of FC_LOCAL_BLOCK queries (keys for full attention, about block +
 * window for banded attention) and `npos` relative positions. `bytes` is what it holds. */
typedef struct {
    int rows, keys, kb, npos;
    float *xn, *t1, *q, *att, *big;       /* [rows, d] x4, [rows, max(d_ff, 2d)] */
    float *kk, *vv;                       /* [keys, d] x2 */
    float *ac, *bd, *pos, *sin;           /* [B, kb], [B, B + kb], [npos, d] x2 */
    float *qu, *qv;                       /* [B, dk] x2 */
    float *conv;                          /* [K - 1 + rows, d] */
    unsigned char *ok;                    /* [kb] mask row */
    size_t bytes;
} fc_work;

sr_status fc_work_init(fc_work *ws, const fc_model *w, int rows, int keys, int kb, int npos);
void fc_work_free(fc_work *ws);

/* Offline encoder over mel [T, n_mels]: out [*n_out, d]. ctx = [left, right] (chunked_limited
 * mask of the model's style; [-1, -1] full attention); local = 1 banded attention with window
 * ctx (NeMo rel_pos_local_attn), memory O(T * window). *work_bytes (may be NULL): peak
 * workspace bytes of the attention / layer computations. */
sr_status fc_encode_offline(const fc_model *w, const float *mel, int T, const int ctx[2],
                            int local, float **out, int *n_out, size_t *work_bytes);

/* Per-layer caches of a cache-aware stream: the attention cache [n_layers][csize][d] (the last
 * csize LayerNorm'd attention inputs, newest last, chan_len of them valid) and the conv cache
 * [n_layers][K-1][d] (the last K-1 GLU outputs). Stored either as f32 (chan, conv) or as IEEE
 * f16 (chan16, conv16; rounded to nearest even when written, widened to f32 when read, with
 * tmp a [csize, d] f32 scratch for one layer's attention cache); the layers compute in f32. */
typedef struct {
    int csize, chan_len;
    float *chan, *conv;
    uint16_t *chan16, *conv16;
    float *tmp;
} fc_cache;

/* Conformer layers over x [T, d] (pre-encode output, xscaled) with the caches c (NULL
 * offline: no attention cache, zero left padding for the conv). Updates the caches as
 * cache_aware_stream_step (chan_len is the caller's to advance). The projected positional rows
 * come from the model's table when the relative positions needed fit in it, else they are
 * computed into ws->pos per layer. */
sr_status fc_layers(const fc_model *w, fc_work *ws, float *x, int T, const fc_mask *mk, fc_cache *c);

/* ---- fastconformer.c ---- */
typedef struct fc_stream {
    const sr_model *m;
    const fc_model *w;
    int offline;                /* strategy */
    int ctx[2];                 /* att_context_size in use */
    int local;                  /* offline: banded attention (-1 auto) */
    /* cache-aware streaming */
    sr_mel_stream *ms;
    float *mel_new; int mel_new_cap;     /* frames of the last feed */
    float *mel; int mel_n, mel_cap;      /* [9 cached + pending new] mel frames */
    int mel_hist;               /* cached (pre-encode) frames at the front of mel */
    int64_t steps;              /* encoder steps done */
    float *sub_in; float *x; int x_cap;  /* subsampling input, encoder rows */
    float *sub_scratch; size_t sub_scratch_n; /* fc_subsample_into scratch of one step */
    float *chan;                /* [n_layers][csize][d] attention cache (f32 caches) */
    int csize, chan_len;
    float *convc;               /* [n_layers][K-1][d] (f32 caches) */
    int cache_f16;              /* stream.cache_dtype "f16": the caches below instead */
    uint16_t *chan16, *conv16;  /* the same layouts in f16 */
    float *chan_tmp;            /* [csize, d] f32 copy of one layer's attention cache (f16) */
    fc_work ws;
    /* offline */
    float *audio; size_t audio_n, audio_cap;
    /* encoder frames of the latest process call, joint-projected: [frames_n, J] */
    float *encp; int encp_n, encp_cap;
    float *enc_raw; int enc_raw_cap;      /* unprojected rows of the latest call (tests) */
    int64_t frames_base, frames_total;
    int64_t samples_in;
    float *jh;                  /* [J] joint hidden scratch */
    float *gates;               /* [4H] */
    float *lstm_in;             /* [H] */
} fc_stream;

/* The stream from mel frames instead of audio (tests feed NeMo's own mel): appends n frames
 * [n, n_mels]; cache-aware: runs every step they complete (final: the last, shorter step);
 * offline strategies: at final, the whole mel through the encoder. The new encoder rows are
 * s->enc_raw[0 .. s->encp_n). */
sr_status fc_stream_feed_mel(fc_stream *s, const float *mel, int n, int final);

extern const sr_model_ops sr_fastconformer_rnnt_ops;

#endif /* SR_FC_H */
