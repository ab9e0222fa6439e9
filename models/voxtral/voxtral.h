/*
 * voxtral.h — private header of the voxtral_realtime backend (models/voxtral/): the weights
 * view, the per-stream state and the internal entry points the tests call directly. Not
 * installed; only the .c files of models/voxtral/ and tests/test_voxtral.c include it.
 *
 * Names and shapes follow transformers' VoxtralRealtimeForConditionalGeneration: every Linear
 * weight is [out, in] (products are x · W^T), activations are row-major [rows, width]. Large
 * matrices may stay bf16 in memory (config "dtype": "bf16"); products read them directly (few
 * rows) or convert a tile of rows at a time into per-stream scratch (many rows), so no second
 * f32 copy of a tensor exists.
 */
#ifndef SR_VOXTRAL_H
#define SR_VOXTRAL_H

#include "../../core/plugin.h"
#include "../../kernels/ops.h"

#include <stdint.h>

#define VX_STEP_SAMPLES 1280 /* 80 ms: one audio embedding, one decoder step */
#define VX_LOOKAHEAD 40      /* samples past a step that complete its last mel frame */
#define VX_MEL_PER_STEP 8
#define VX_ADA_DIM 32        /* hidden width of the adaptive-norm MLP */
/* Converted weight rows per many-row product (prefill): 4 MB, capped at the largest matrix.
 * Fewer, larger sgemm calls: a [37, 3072] x [9216, 3072]^T product took 180 ms with 256 KB
 * tiles and 52 ms with 4 MB on the 2-core development machine. */
#define VX_TILE_FLOATS (1 << 20)

/* A Linear weight [out, in]: f32 or bf16 data. */
typedef struct {
    const void *w;
    int bf16;
    int out, in;
} vx_mat;

typedef struct {
    const float *attn_norm, *ffn_norm; /* [d] */
    vx_mat q, k, v, o;                 /* encoder: q/v/o biased, k not; decoder: no bias */
    const float *bq, *bv, *bo;         /* encoder only */
    vx_mat gate, up, down;             /* SwiGLU */
    const float *bdown;                /* encoder only */
    vx_mat ada1, ada2;                 /* decoder only: [32, d], [d, 32] */
} vx_layer;

typedef struct vx_model {
    /* config */
    int n_mels;
    float log_mel_max;
    int enc_dim, enc_layers, enc_heads, enc_hd, enc_ffn, enc_window;
    float enc_theta, enc_eps;
    int ds;                            /* downsample factor (frames concatenated) */
    int dim, n_layers, n_heads, n_kv, hd, ffn, vocab, window;
    float theta, eps, time_theta;
    int bos, eos, pad;
    int n_left, n_right, delay_def, delay_min, delay_max, flush_tokens;
    /* weights */
    const float *conv1_w, *conv1_b;    /* [enc_dim, n_mels, 3] */
    const float *conv2_w, *conv2_b;    /* [enc_dim, enc_dim, 3] */
    vx_layer *enc, *dec;
    const float *enc_norm, *dec_norm;
    vx_mat proj1, proj2;               /* [dim, ds * enc_dim], [dim, dim] */
    vx_mat embed;                      /* [vocab, dim], also the output projection */
    float *enc_inv, *dec_inv;          /* RoPE inverse frequencies [hd / 2] */
    sr_mel *mel;
} vx_model;

/* Scratch of one stream: rows of activations and the bf16 -> f32 weight tile. */
typedef struct {
    int rows;
    float *x, *h, *q, *k, *v, *a, *f1, *f2; /* [rows, max width] each */
    float *scores;                           /* [rows, max slots] */
    float *tile;                             /* [tile_floats] */
    size_t width, slots, tile_floats;
    int threads;                             /* bf16 product threads (0 = kernels' default) */
} vx_scratch;

/* A ring K/V cache of `slots` positions for `layers` layers of width w; written rows go to
 * slot pos % slots; positions are analytic (seed: abs[j] = j + ((written-1-j) div slots) slots).
 * Elements are f32, or bf16 (stream config cache_dtype "bf16": rows rounded to nearest even when
 * written, read by the bf16 kernels of kernels/lowp.h). */
typedef struct {
    void *k, *v;    /* [layers][slots][w] of f32 or uint16_t (bf16) */
    int layers, slots, w;
    int bf16;
    int64_t written;
} vx_ring;

typedef struct vx_stream {
    const sr_model *m;
    const vx_model *w;
    int delay, prompt_len;
    int32_t *prompt;               /* [prompt_len] BOS, PAD x (n_left + delay) */
    float *ada;                    /* [n_layers][dim] 1 + AdaRMSNorm MLP(t_cond) */
    sr_mel_stream *ms;
    float *mel;  int mel_n, mel_cap;   /* pending mel frames [mel_cap][n_mels] */
    float *c1_state;               /* [2][n_mels]: last two mel frames (conv1 left context) */
    float *c2_state;               /* [enc_dim]: last conv1 output (conv2 left context) */
    float *c1_out;                 /* [VX_MEL_PER_STEP][enc_dim] */
    float *col;                    /* im2col [VX_MEL_PER_STEP][3 max(n_mels, enc_dim)] */
    vx_ring er, dr;                /* encoder ring (2 windows), decoder ring (window + prompt) */
    float *emb; int emb_cap;       /* audio embeddings not yet consumed, ring [emb_cap][dim] */
    int64_t n_emb;                 /* audio embeddings produced */
    int64_t n_steps;               /* sync steps done */
    int64_t samples;               /* real audio samples consumed */
    int started, final, stopped;
    int flush_avail;               /* flush steps offered after the audio (0 before finish) */
    vx_scratch s;
    /* test capture (NULL = off): encoder output rows and audio embeddings as produced */
    float *cap_enc; int cap_enc_max, cap_enc_n;
    float *cap_ada; int cap_ada_max, cap_ada_n;
    float *cap_mel; int cap_mel_max, cap_mel_n;
} vx_stream;

/* ---- vx_model.c ---- */
sr_status vx_load(sr_model *m, sr_h5 *f);
void vx_unload(sr_model *m);

/* y[n, L.out] = x[n, L.in] · W^T (+ b); beta 0 overwrites y, 1 accumulates. bf16 weights go
 * through sr_bf16_gemm (direct kernel for n <= 4 rows on s->threads threads, else tiles of rows
 * converted into s->tile). */
sr_status vx_linear(const sr_kernels *k, vx_scratch *s, const float *x, int n, vx_mat L,
                    const float *b, float beta, float *y);
/* tile: floats of the bf16 -> f32 weight tile, at least the longest matrix row. */
sr_status vx_scratch_init(vx_scratch *s, int rows, size_t width, size_t slots, size_t tile);
void vx_scratch_free(vx_scratch *s);
size_t vx_scratch_bytes(const vx_scratch *s);
sr_status vx_ring_init(vx_ring *r, int layers, int slots, int w, int bf16, const char *what);
size_t vx_ring_bytes(const vx_ring *r); /* K and V */
void vx_ring_free(vx_ring *r);

/* Encoder layers + final norm over n frames x [n, enc_dim] (stem output) at absolute positions
 * er->written .. + n - 1, with the sliding-window mask; n <= slots - enc_window + 1. */
sr_status vx_encode(const vx_model *w, const sr_kernels *k, vx_scratch *s, vx_ring *er,
                    float *x, int n);
/* Adapter: n / ds groups of ds consecutive encoder frames enc [n, enc_dim] -> out [n/ds, dim]. */
sr_status vx_adapter(const vx_model *w, const sr_kernels *k, vx_scratch *s, const float *enc,
                     int n, float *out);
/* Decoder over n input embeddings x [n, dim] at positions dr->written .. + n - 1, with the
 * per-layer adaptive scales ada [n_layers][dim]; logits of the last row (may be NULL) [vocab]. */
sr_status vx_decode(const vx_model *w, const sr_kernels *k, vx_scratch *s, vx_ring *dr,
                    const float *ada, float *x, int n, float *logits);
/* Token embedding row id -> out [dim] (f32). */
void vx_embed(const vx_model *w, int32_t id, float *out);
/* 1 + AdaRMSNorm MLP of the sinusoidal embedding of `delay` tokens, per layer [n_layers][dim]. */
sr_status vx_ada_scales(const vx_model *w, const sr_kernels *k, vx_scratch *s, int delay,
                        float *out);

extern const sr_model_ops sr_voxtral_ops;

#endif /* SR_VOXTRAL_H */
