/*
 * fc.h — private header of the fastconformer_rnnt backend (models/fastconformer/): NVIDIA
 * NeMo's cache-aware streaming FastConformer encoder with an RNN-T / TDT prediction network and
 * joint (nemotron-speech-streaming). Weights view, the batch context (cache pools with one
 * slot per stream, scratch for a batch), the per-stream state and the internal entry points
 * tests/test_fastconformer.c calls directly. Not installed.
 *
 * Every computation goes through the model's kernel table (w->k, kernels/kernels.h): Linear
 * weights are sr_kweight handles in the table ([out, in], products x · W^T by k->gemm), vectors
 * (biases, norm gains, BatchNorm statistics, pos_bias_u/v, the 3x3 and depthwise conv taps)
 * stay host tensors (the CPU table's memory). Activations are row-major time-major [T, d] in
 * table memory. The attention caches are cache pools (sr_kpool) of PROJECTED keys and values,
 * one row per absolute encoder position (ring row = position % rows); the conv cache is a pool
 * of the K - 1 previous GLU outputs per layer, oldest first (NeMo holds it as [d, K - 1]).
 */
#ifndef SR_FC_H
#define SR_FC_H

#include "../../core/plugin.h"

#include <stdint.h>

#define FC_LN_EPS 1e-5f
#define FC_MAX_CTX 16        /* att_context_size entries a model may list */
#define FC_SUB_PIECE 128     /* encoder rows per piece of the offline subsampling */
#define FC_GEMM_ROWS 1024    /* rows per gemm call (fc_gemm_rows) */

typedef struct { const sr_kweight *w; const float *b; } fc_lin; /* w [out, in]; b [out] or NULL */
typedef struct { const float *g, *b; } fc_ln;  /* LayerNorm gain / bias [d] */

typedef struct {
    fc_ln ff1_ln, att_ln, conv_ln, ff2_ln, out_ln;
    fc_lin ff1a, ff1b, ff2a, ff2b;        /* [d_ff, d], [d, d_ff] */
    fc_lin qkv, o;                        /* linear_q | k | v stacked [3d, d] (one product), [d, d] */
    const sr_kweight *pos_w;              /* linear_pos [d, d], no bias */
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
    /* weights */
    const float *c0_w, *c0_b;             /* conv.0 [C, 1, 3, 3] (host taps) */
    const float *dw1_w, *dw1_b;           /* conv.2 depthwise [C, 1, 3, 3] */
    fc_lin sub_pw1;                       /* conv.3 pointwise [C, C, 1, 1] as a Linear [C, C] */
    const float *dw2_w, *dw2_b;           /* conv.5 */
    fc_lin sub_pw2;                       /* conv.6 */
    /* pre_encode.out [d, C * F3] with its columns reordered from NeMo's (c, f) flattening to
     * (f, c), so that it reads the position-major rows [T3][F3][C] the last pointwise conv
     * writes without a transpose (made at load, freed at unload: sub_out_own) */
    fc_lin sub_out;
    sr_kweight *sub_out_own;
    fc_layer *L;
    const sr_kweight *embed;              /* [vocab + 1, H] */
    const sr_kweight **lstm_wih, **lstm_whh; /* per layer [4H, in], [4H, H] */
    const float **lstm_bih, **lstm_bhh;   /* per layer [4H] */
    fc_lin j_enc, j_pred, j_out;          /* [J, d], [J, H], [n_out, J] */
    /* linear_pos applied to the sinusoidal table once per model (table memory): per layer,
     * rows for relative positions pos_pos down to -pos_neg (the span every streaming context
     * can ask for); row r is distance pos_pos - r */
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
/* k->gemm over blocks of at most FC_GEMM_ROWS rows. The CPU table's gemm packs a copy of its
 * x ([M, k]), so one call over a 17-minute utterance would hold another [T, d_ff] (200 MB at
 * the Nemotron shape); rows are independent, so the blocks compute exactly the rows of one
 * call, and a stream's step (M <= R + 1) is one call. */
sr_status fc_gemm_rows(const sr_kernels *k, int M, const float *x, int ldx, const sr_kweight *W,
                       const float *bias, sr_act act, float alpha, float beta, float *y, int ldy);

/* Which keys a query may see, in absolute positions (query at position p; keys are positions
 * 0 .. of the same sequence, never negative: an unfilled cache is simply not there).
 * [left, right] is the att_context pair ([-1, -1] = unlimited) of style chunked_limited
 * (chunk = right + 1; p sees k iff 0 <= p/chunk - k/chunk <= left/chunk) or regular
 * (p - left <= k <= p + right); band = 1: banded local attention (rel_pos_local_attn), window
 * p - left <= k <= p + right. */
typedef struct {
    int left, right, style;
    int band;
} fc_mask;

/* The sequences of one encoder call (streams, or one offline utterance) and their caches.
 * Rows of sequence s are [b->row0[s], b->row0[s + 1]) at positions b->pos[s] + i, cache slot
 * b->slot[s], mask mk[s]. kc / vc hold projected keys / values (width d, n_layers layers for
 * streams; offline: 1 layer holding the whole utterance, rewritten by every layer); the keys of
 * a sequence are the positions the attended pool holds for it, up to its last row. conv: the
 * depthwise conv states (n_layers layers, K - 1 rows), or NULL for zero left context (offline).
 *
 * kw / vw (NULL: none): f32 working pools of one layer for streams whose kc / vc store a
 * narrower type (f16). Keys and values are then rounded only when stored for later steps, as a
 * cache should be: each layer widens the cached positions its rows need from kc / vc into
 * kw / vw, writes the new rows there exactly, attends over kw / vw, and only then stores the
 * new rows (rounded) into kc / vc. (A stopgap until attn can read a batch's own new rows in f32
 * beside the pool; then kc / vc need only the left-context rows and no staging.) */
typedef struct {
    const sr_kbatch *b;
    const fc_mask *mk;
    sr_kpool *kc, *vc, *conv;
    sr_kpool *kw, *vw;
    /* where the layers' ops are recorded as one (sr_kgraph_begin: a table that records submits
     * them as one graph), when they upload nothing (the model's relative-position table spans
     * the distances); NULL: never recorded */
    sr_kgraph **rec;
} fc_seqs;

/* Causal dw_striding subsampling of mel [T, n_mels] (host memory) -> x [*n_out, d] (table
 * memory; before xscaling), as NeMo's ConvSubsampling (is_causal) on a fully valid input:
 * *n_out = T/2+1 applied 3 times. Computed in pieces of FC_SUB_PIECE rows (scratch independent
 * of T), equal to one pass. */
sr_status fc_subsample(const fc_model *w, const float *mel, int T, float *x, int *n_out);
/* The same on n images of mel in table memory ([n][T][n_mels], back to back: the steps of n
 * streams at once, each image's rows as if alone) into x [n][*n_out][d], with caller-owned
 * table scratch of n fc_subsample_scratch(w, T) floats (batches keep one, so a step allocates
 * nothing). */
sr_status fc_subsample_into(const fc_model *w, int n, const float *mel, int T, float *x,
                            int *n_out, float *scratch);
size_t fc_subsample_scratch(const fc_model *w, int T);
int fc_subsample_len(int T);

/* Workspace of one encoder call of up to `rows` rows, `npos` computed relative positions (0
 * when every distance lies in the model's pos_tab: streams) and `grows` cached rows widened per
 * layer (fc_seqs.kw; 0 without). Activations in table memory, the key ranges and sinusoids in
 * host memory. `bytes` is what it holds. */
typedef struct {
    int rows, npos, grows;
    float *xn, *t1, *att, *big;           /* [rows, d] x3, [rows, max(d_ff, 3d)]: big holds the
                                             feed-forward's hidden rows, q | k | v, the GLU's */
    float *pos;                           /* [npos, d] projected positions (table) */
    float *gq, *gout;                     /* [grows, d] zero queries, widened rows (table) */
    float *sin;                           /* [npos, d] sinusoids (host) */
    int64_t *lo, *hi;                     /* [rows] key range of each row (host) */
    int64_t *glo, *ghi;                   /* [grows] one-key ranges of the widening (host) */
    int dmin, dmax;                       /* relative distances the ranges span */
    size_t bytes;
} fc_work;

sr_status fc_work_init(fc_work *ws, const fc_model *w, int rows, int npos, int grows);
void fc_work_free(const fc_model *w, fc_work *ws);

/* Key ranges [ws->lo, ws->hi) of every row of sq (absolute positions) and the span of
 * distances p - k they contain (ws->dmin, ws->dmax). */
sr_status fc_ranges(const fc_model *w, fc_work *ws, const fc_seqs *sq);

/* Conformer layers over the rows x [rows, d] of the sequences sq (pre-encode output, xscaled;
 * table memory), in place. Writes every row's projected K / V into the pools and advances the
 * conv states (the positions' bookkeeping is the caller's). Rows never influence each other
 * except through their own sequence's keys. */
sr_status fc_layers(const fc_model *w, fc_work *ws, float *x, const fc_seqs *sq);

/* Offline encoder over mel [T, n_mels] (host): out [*n_out, d] in table memory (free with
 * w->k->free). ctx = [left, right] (mask of the model's style; [-1, -1] full attention);
 * local = 1 banded attention with window ctx (NeMo rel_pos_local_attn). The keys and values
 * of one layer over the whole utterance are one pool (O(T d)); *work_bytes (may be NULL): peak
 * bytes of the workspace, the pools and the rows. */
sr_status fc_encode_offline(const fc_model *w, const float *mel, int T, const int ctx[2],
                            int local, float **out, int *n_out, size_t *work_bytes);

/* ---- fastconformer.c ---- */
enum { FC_CACHE_AWARE = 0, FC_OFFLINE = 1, FC_OFFLINE_LOCAL = 2, FC_OFFLINE_FULL = 3 };

/* A stream config as validated (fc_config; the same checks and SR_ERR_ARG messages for
 * batch_open and stream_open): every stream of a batch context runs with its batch's. */
typedef struct {
    int strategy;               /* FC_CACHE_AWARE, FC_OFFLINE, FC_OFFLINE_LOCAL, FC_OFFLINE_FULL */
    int offline;                /* strategy != FC_CACHE_AWARE */
    int local;                  /* offline: banded attention 1, never 0, by length -1 */
    int ctx[2];                 /* att_context_size in use */
    int f16;                    /* stream.cache_dtype "f16" */
} fc_cfg;

struct fc_stream;

/* The scorer's frames of one slot: rows of the batch's joint window (fc_batch.jw). */
typedef struct fc_win {
    int *row;                   /* [cap] window row of the slot's frame j (host) */
    int n, cap;                 /* n: frames of the slot's latest process call */
} fc_win;

/* The batch context (model_ops.batch_open): what the streams stepped together share. Pools
 * have ONE SLOT PER STREAM (a stream owns slot fc_stream.slot from stream_open to
 * stream_close; a freed slot is cleared and reused by the next stream opened on it); scratch
 * is sized for a round of max_streams steps of R + 1 rows each. Cache-aware only (offline
 * strategies have no pools, workspace or step buffers: NULL / 0): */
typedef struct fc_batch {
    const sr_model *m;
    const fc_model *w;
    fc_cfg cfg;
    int max_streams;
    int csize;                  /* left context L: cached positions per stream */
    /* cache pools in the stream's cache dtype: projected K / V kc, vc and the conv states cc
     * ([n_layers][max_streams][K - 1][d]). f32: K / V of the last L positions plus a step's
     * own rows, which attend together in place ([n_layers][max_streams][L + R + 1][d]). f16:
     * K / V stores of max(L, R + 1) positions ([n_layers][max_streams][max(L, R + 1)][d]) and
     * f32 working pools kw, vw of one layer ([1][max_streams][L + R + 1][d], fc_seqs) */
    sr_kpool *kc, *vc, *cc, *kw, *vw;
    fc_work ws;                 /* max_streams (R + 1) rows; f16: max_streams L staged rows */
    int nin;                    /* mel frames of the largest step: 9 + 8 (R + 1) */
    float *sub_in;              /* [max_streams, nin, n_mels] a round's step inputs (table) */
    float *hmel;                /* the same, staged on the host (one upload a round) */
    float *sub_x; int sub_rows; /* [max_streams, sub_rows = fc_subsample_len(nin), d] their
                                 * subsampled rows */
    float *sub_scratch; size_t sub_scratch_n; /* fc_subsample_into scratch: max_streams times
                                 * sub_scratch_n floats (one step's), table */
    float *x;                   /* [max_streams (R + 1), d] a round's encoder rows (table) */
    float *hx;                  /* the same downloaded (host), one copy a round */
    /* a call's bookkeeping (host): its streams, the round's sequences (sr_kbatch arrays, masks,
     * index of each in the call), slots seen (distinct streams), predict tokens */
    struct fc_stream **call;    /* [max_streams] */
    int *row0, *slot, *seq;     /* [max_streams + 1], [max_streams], [max_streams] */
    int *nnew;                  /* [max_streams] a round's step of each stream (mel frames) */
    int64_t *pos;               /* [max_streams] */
    fc_mask *mk;                /* [max_streams] */
    unsigned char *seen;        /* [max_streams] */
    int32_t *ids;               /* [req_max] predict tokens */
    int req_max;                /* scorer requests per batched call: max_streams x stream.beam */
    /* scorer scratch (table), one row per request of a batched call: joint hidden jh, its pred
     * input jp, prediction outputs pout [req_max, J]; logits [req_max, n_out]; LSTM states
     * pstate [req_max, 2 layers H] (per layer h then c), input lstm_in [req_max, H], gates
     * [req_max, 4H] */
    float *jh, *jp, *pout, *logits, *pstate, *lstm_in, *gates;
    /* their host staging (one upload / download per call): states [req_max, 2 layers H],
     * pred rows [req_max, J], logits [req_max, n_out]; one block from hstate */
    float *hstate, *hpred, *hlogits;
    const float **jsrc;         /* [req_max] a joint call's frame rows (table pointers) */
    float *zrow;                /* [H] zeros (table): the start symbol's LSTM input */
    /* the scorer's frame window, shared by the streams so that no step copies rows per
     * stream: the encoder rows of every slot's latest process call, joint-projected, are rows
     * win[slot].row[0 .. n) of jw ([jw_cap, J], table). Each round's (and each offline
     * encode's) projection gemm writes its rows at jw_n. When the window is full, the live
     * rows (every slot's) are gathered into jw_alt by one copy_rows and the two swap, so a
     * slot's frames stay held until its stream's next process call, whatever other streams
     * are processed meanwhile (the TRANSDUCER contract); jw grows only when the live rows and
     * the new ones would not fit (win_reserve). Cache-aware batches size it at batch_open for
     * the config's chunks (nothing grows while streams are fed chunk by chunk). */
    float *jw, *jw_alt;
    int jw_n, jw_cap, jw_alt_cap;
    fc_win *win;                /* [max_streams] */
    const float **wsrc;         /* [wsrc_cap] a compaction's source rows (host) */
    size_t wsrc_cap;
    /* the table's record of a round's layers (fc_seqs.rec; NULL until first recorded, and
     * where the table does not record) */
    sr_kgraph *g_layers;
    size_t bytes;               /* everything above (batch_bytes) */
} fc_batch;

/* A stream: its batch context and slot there, and only its private state (front end, mel,
 * positions, the scorer's frame window). stream_close frees only that (never touches the
 * batch, so streams and their batch may be closed in either order). */
typedef struct fc_stream {
    const sr_model *m;
    const fc_model *w;
    fc_batch *b;                /* the batch context (shared) */
    int slot;                   /* this stream's slot of b's pools */
    /* cache-aware streaming */
    sr_mel_stream *ms;
    float *mel_new; int mel_new_cap;     /* frames of the last feed (host) */
    float *mel; int mel_n, mel_cap;      /* [9 cached + pending new] mel frames (host) */
    int mel_hist;               /* cached (pre-encode) frames at the front of mel */
    int64_t steps;              /* encoder steps done */
    int chan_len;               /* valid cached positions (NeMo's cache length) */
    int64_t enc_pos;            /* absolute position of the next encoder row */
    /* offline */
    float *audio; size_t audio_n, audio_cap;
    /* encoder frames of the latest process call (fc_frames_held of them): joint-projected in
     * the batch's window (fc_batch.win[slot]), unprojected in enc_raw (host; tests) */
    float *enc_raw; int enc_raw_cap;
    int64_t frames_base, frames_total;
    int64_t samples_in;
} fc_stream;

/* Encoder frames of stream s's latest process call (the scorer holds them; rows of enc_raw). */
static inline int fc_frames_held(const fc_stream *s) { return s->b->win[s->slot].n; }

/* The stream from mel frames instead of audio (tests feed NeMo's own mel): appends n frames
 * [n, n_mels]; cache-aware: runs every step they complete (final: the last, shorter step),
 * through the same rounds as process_batch with the stream alone; offline strategies: at
 * final, the whole mel through the encoder. The new encoder rows are s->enc_raw[0 ..
 * fc_frames_held(s)). */
sr_status fc_stream_feed_mel(fc_stream *s, const float *mel, int n, int final);

extern const sr_model_ops sr_fastconformer_rnnt_ops;

#endif /* SR_FC_H */
