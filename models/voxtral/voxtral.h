/*
 * voxtral.h — private header of the voxtral_realtime backend (models/voxtral/): the weights
 * view, the batch context (the caches of all its streams), the per-stream state and the
 * internal entry points the tests call directly. Not installed; only the .c files of
 * models/voxtral/ and tests/test_voxtral.c include it.
 *
 * Names and shapes follow transformers' VoxtralRealtimeForConditionalGeneration: every Linear
 * weight is [out, in] (products are x · W^T), activations are row-major [rows, width]. Every
 * operation on the per-chunk path is a call of the kernel table (kernels/kernels.h): Linear
 * weights are sr_kweight in the file's precision (bf16 stays bf16; the table's gemm reads it
 * directly), caches are sr_kpool. The forward functions take the pools and an sr_kbatch, so the
 * rows of one call may belong to several streams (sequence s: rows row0[s] .. row0[s+1], cache
 * slot slot[s], first position pos[s]); a solo stream is a batch of one through the same code.
 * The streams of a batch context (vx_batch) are stepped together that way: process_batch runs
 * the stem, encoder and adapter once over every stream with rows, sync_step_batch one decoder
 * pass over every request.
 */
#ifndef SR_VOXTRAL_H
#define SR_VOXTRAL_H

#include "../../core/plugin.h"

#include <stdint.h>

#define VX_STEP_SAMPLES 1280 /* 80 ms: one audio embedding, one decoder step */
#define VX_LOOKAHEAD 40      /* samples past a step that complete its last mel frame */
#define VX_MEL_PER_STEP 8
#define VX_ENC_PER_STEP 4    /* encoder frames per step (conv2 stride 2) = downsample_factor */
#define VX_ADA_DIM 32        /* hidden width of the adaptive-norm MLP */
/* 80 ms steps a stream encodes in one forward call when its audio has them (the left padding
 * of the first chunk, the right padding at finish): 8 steps are 32 rows per weight read. */
#define VX_ENC_STEPS_MAX 8

/* A Linear layer: w [out, in] in the table's layout, bias [out] (f32, host = CPU table
 * memory) or NULL. */
typedef struct {
    const sr_kweight *w;
    const float *b;
} vx_lin;

typedef struct {
    const float *attn_norm, *ffn_norm; /* [d] */
    /* q, k, v stacked (sr_model_weight_cat): [Hq hd + 2 Hkv hd, d], one product; encoder: q and v
     * biased, k not (its bias entries -0); decoder: no bias */
    vx_lin qkv, o;                     /* encoder o biased */
    vx_lin gu, down;                   /* SwiGLU: gate and up stacked [2 ffn, d]; encoder down biased */
    vx_lin ada1, ada2;                 /* decoder only: [32, d], [d, 32] */
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
    vx_lin conv1, conv2;               /* tap-major [enc_dim, 3 n_mels], [enc_dim, 3 enc_dim] (f32) */
    vx_layer *enc, *dec;
    const float *enc_norm, *dec_norm;
    vx_lin proj1, proj2;               /* [dim, ds * enc_dim], [dim, dim] */
    const sr_kweight *embed;           /* [vocab, dim]: lookups and the tied output projection */
    float *enc_inv, *dec_inv;          /* RoPE inverse frequencies [hd / 2] (table memory) */
    sr_mel *mel;
} vx_model;

/* Activations of one forward call of up to `rows` rows (table memory unless noted); the stem
 * buffers serve up to `rows` encoder frames in up to `rows` sequences. */
typedef struct {
    const sr_kernels *k;
    int rows;
    size_t width;
    float *x, *h, *a;                        /* [rows, width] each */
    float *qkv;                              /* [rows, qkv_width]: q | k | v of the fused product */
    float *f;                                /* [rows, f_width]: gate | up, the GLU in place */
    size_t qkv_width, f_width;
    float *mel;                              /* [2 rows, n_mels] stem input frames */
    float *c1in;                             /* [4 rows, n_mels] the stem's new conv1 states */
    float *col;                              /* im2col: [2 rows, 3 n_mels] or [rows, 3 enc_dim] */
    float *c1;                               /* [2 rows, enc_dim] conv1 outputs */
    float *c2in;                             /* [3 rows, enc_dim] the stem's new conv2 states */
    int64_t *lo, *hi;                        /* [rows] host: attention key ranges */
    const float **rp;                        /* [6 rows] host: rows gathered by copy_rows */
    int *srow;                               /* [rows + 1] host: the stem states' batch rows */
    int64_t *spos;                           /* [rows] host: their positions (0) */
    size_t bytes;                            /* all of the above */
} vx_scratch;

/* Batch context (model_ops.batch_open): what the streams stepped together share. Every stream
 * lives in one, in its own slot of each pool; a lone stream in a context of one slot. All
 * streams of a context use its stream config (delay, cache dtype). S = max_streams. */
typedef struct vx_batch {
    const sr_model *m;
    const vx_model *w;
    int max_streams;               /* S: slots of every pool */
    int delay, prompt_len;         /* the config's delay; L = 1 + n_left + delay */
    sr_dtype kv;                   /* K/V cache dtype (SR_F32 or SR_BF16) */
    int enc_steps;                 /* 80 ms steps per stream per encoder call (<= VX_ENC_STEPS_MAX) */
    int32_t *prompt;               /* [L] BOS, PAD x (n_left + delay) (host) */
    sr_kpool *c1, *c2;             /* stem state (f32): [1][S][2][n_mels] last two mel frames,
                                      [1][S][1][enc_dim] last conv1 output */
    sr_kpool *ek, *ev;             /* encoder K / V: [enc_layers][S][max(2 enc_window,
                                      enc_window + 3)][enc_heads enc_hd] */
    sr_kpool *dk, *dv;             /* decoder K / V: [n_layers][S][window + L - 2][n_kv hd] */
    sr_kpool *emb;                 /* audio embeddings not yet consumed (f32): [1][S][emb_cap]
                                      [dim], position p in ring row p % emb_cap */
    int emb_cap;                   /* L + n_left + n_right + 4 */
    int max_seconds;               /* stream.max_seconds (0: unbounded) */
    int64_t pos_cap;               /* 0, or the decoder positions a stream of max_seconds
                                      reaches at most (the K/V ring is sized by it) */
    float *zero;                   /* [dim] zeros: the input of rows without audio */
    float *hmel;                   /* [2 s.rows][n_mels] an encoder call's mel frames, staged
                                      for one upload (host) */
    int *erow0;                    /* [S + 1] an encoder call's adapter rows per sequence */
    float *ada;                    /* [n_layers][dim] 1 + AdaRMSNorm MLP(t_cond of the delay) */
    float *logits;                 /* [S][vocab] a decoder pass's logits before download */
    int32_t *tok, *htok;           /* [S] a pass's argmax ids (table) and their host copy */
    float *hlogits;                /* [S][vocab] their host copy (device tables only, else NULL) */
    vx_scratch s;                  /* S x max(4 enc_steps, L) rows: one call over every stream */
    int32_t *ids;                  /* [s.rows] decoder input tokens (host) */
    int *row0, *slot;              /* [S + 1], [S] the sr_kbatch of the call being built (host) */
    int64_t *pos;                  /* [S] */
    int *aux;                      /* [S] encoder call: each sequence's 80 ms steps; decoder
                                      step: the index of each request that computes */
    struct vx_stream **seq;        /* [S] the stream of each sequence of the call being built */
    struct vx_stream **owner;      /* [S] the open stream in each slot (NULL: free) */
    /* The shared prefix (contexts of more than one slot): every stream starts with n_left
     * steps of zeros, and its first pre = n_left - 1 steps (whose mel frames end before the
     * audio) and decoder positions 0 .. pre - 1 (BOS / PAD on their audio embeddings) compute
     * the same in every stream. They are computed once at batch_open and copied into a starting
     * stream's slot instead of computed again (0: none). Pools of one slot: */
    int pre;
    sr_kpool *pc1, *pc2;           /* the stem states after step pre - 1 */
    sr_kpool *pek, *pev;           /* encoder K / V rows 0 .. 4 pre - 1 */
    sr_kpool *pemb;                /* audio embeddings 0 .. pre - 1 */
    sr_kpool *pdk, *pdv;           /* decoder K / V rows 0 .. pre - 1 */
    float *pre_enc, *pre_ada;      /* [4 pre][enc_dim], [pre][dim] (host): for test captures */
    /* The table's records of the two calls every 80 ms step repeats (sr_kgraph_begin: NULL
     * until first recorded, and where the table does not record): the encoder round's ops and
     * the decoder step's pass. */
    sr_kgraph *g_enc, *g_dec;
    size_t bytes;                  /* all of the above: pools, scratch, host arrays */
} vx_batch;

/* Per-stream state: the stream's slot in its batch context's pools, and what is private to it
 * (mel front-end, pending mel frames, unconsumed audio embeddings, positions). */
typedef struct vx_stream {
    const sr_model *m;
    const vx_model *w;
    vx_batch *b;                   /* the context holding the caches */
    int slot;                      /* the stream's slot in b's pools */
    sr_mel_stream *ms;
    float *mel;  int mel_n, mel_cap;   /* pending mel frames [mel_cap][n_mels] (host) */
    int64_t enc_pos, dec_pos;      /* positions written to the encoder / decoder caches */
    int64_t n_emb;                 /* audio embeddings produced (in b->emb's slot) */
    int64_t n_steps;               /* sync steps done */
    int64_t samples;               /* real audio samples consumed */
    int started, final, stopped;
    int flush_avail;               /* flush steps offered after the audio (0 before finish) */
    /* the input of the process call under way: lead zeros (left padding), pcm, tail zeros
     * (right padding), then the mel flush when finishing */
    const float *in; size_t in_n, lead, tail; int finishing;
    int pre;                       /* decoder positions 0 .. pre - 1 taken from the shared prefix */
    int skip_mel;                  /* mel frames still to drop (the prefix's, computed already) */
    /* test capture (NULL = off, host memory): mel frames, encoder output rows, audio embeddings */
    float *cap_enc; int cap_enc_max, cap_enc_n;
    float *cap_ada; int cap_ada_max, cap_ada_n;
    float *cap_mel; int cap_mel_max, cap_mel_n;
} vx_stream;

/* ---- vx_model.c ---- */
sr_status vx_load(sr_model *m, sr_h5 *f);
void vx_unload(sr_model *m);

/* Scratch for calls of up to `rows` rows (encoder, decoder) on table k. */
sr_status vx_scratch_init(vx_scratch *s, const sr_kernels *k, const vx_model *w, int rows);
void vx_scratch_free(vx_scratch *s);
size_t vx_scratch_bytes(const vx_scratch *s);

/* Causal conv stem. Sequence s of b makes the encoder frames (rows) row0[s] .. row0[s+1] of out
 * [rows, enc_dim] (GELU applied) from the mel frames 2 row0[s] .. 2 row0[s+1] of mel (stride
 * n_mels), its left context being slot slot[s] of c1 (2 rows: the last two mel frames, oldest
 * first) and c2 (1 row: the last conv1 output), both updated. */
sr_status vx_stem(const vx_model *w, vx_scratch *s, sr_kpool *c1, sr_kpool *c2,
                  const sr_kbatch *b, const float *mel, float *out);
/* Encoder layers + final norm, in place on x [rows of b, enc_dim] (stem output), sequence s at
 * positions pos[s] ..; its K/V go to slot slot[s] of the pools K / V (enc_layers layers, width
 * enc_heads * enc_hd) and each row attends to the last enc_window positions. */
sr_status vx_encode(const vx_model *w, vx_scratch *s, sr_kpool *K, sr_kpool *V,
                    const sr_kbatch *b, float *x);
/* Adapter: n / ds groups of ds consecutive encoder frames enc [n, enc_dim] -> out [n/ds, dim]
 * (every sequence of a batch holds a multiple of ds rows, so groups never straddle two). */
sr_status vx_adapter(const vx_model *w, vx_scratch *s, const float *enc, int n, float *out);
/* Decoder over x [rows of b, dim] (input embeddings), sequence s at positions pos[s] .. with
 * K/V in slot slot[s] of K / V (n_layers layers, width n_kv * hd). Row r scales its MLP input
 * by the adaptive scales ada + r * ld_ada ([n_layers][dim]; ld_ada = 0: one set for all rows).
 * logits (may be NULL): row s (stride ld_logits) gets the logits of sequence s's last row. */
sr_status vx_decode(const vx_model *w, vx_scratch *s, sr_kpool *K, sr_kpool *V,
                    const sr_kbatch *b, const float *ada, int ld_ada, float *x, float *logits,
                    int ld_logits);
/* 1 + AdaRMSNorm MLP of the sinusoidal embedding of `delay` tokens, per layer [n_layers][dim]
 * (table memory). */
sr_status vx_ada_scales(const vx_model *w, vx_scratch *s, int delay, float *out);

extern const sr_model_ops sr_voxtral_ops;

#endif /* SR_VOXTRAL_H */
