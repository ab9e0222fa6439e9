/*
 * plugin.h — how backends and decoders plug into the core (DESIGN §3). Internal.
 *
 * A backend is one `const sr_model_ops` table named after the HDF5 `arch` attribute and listed
 * in models/registry.c. It owns the weights (impl) and, per stream, its caches (state). Each
 * stream turns audio into "frames" (encoder outputs) one chunk at a time; a decoder, chosen by
 * name, turns frames into tokens through the backend's scorer, which is one of three shapes:
 *
 *   AED          next_logprobs(prefix) over all audio seen so far          (Whisper)
 *   TRANSDUCER   predict(state, token) + joint(frame, pred_out)             (FastConformer-RNNT)
 *   SYNC         one step per audio frame: logits given the previous token  (Voxtral, test_linear)
 *
 * The core (core/stream.c) buffers audio into chunks, times them, calls the backend then the
 * decoder, detokenizes, and records the timeline. Adding a family touches only its folder plus
 * one line in models/registry.c.
 */
#ifndef SR_PLUGIN_H
#define SR_PLUGIN_H

#include "internal.h"
#include "tokenizer.h"
#include "weights.h"
#include "../kernels/kernels.h"

#include <cJSON.h>

/* ---- scorers ------------------------------------------------------------------------------ */

typedef enum { SR_SCORER_AED = 1, SR_SCORER_TRANSDUCER = 2, SR_SCORER_SYNC = 3 } sr_scorer_kind;

/* What a greedy AED decoder reads of one log-prob row (sr_scorer.aed_top): 16 bytes instead of
 * the vocabulary's row, so that a backend on a device copies a summary per row. */
typedef struct sr_aed_top {
    int32_t best;  /* the row's argmax: ties to the lower id, NaN never chosen while a number is
                    * left (the op table's topk with k = 1) */
    float best_lp; /* row[best] */
    float tok_lp;  /* row j < n: row[prefix[j]] (the prefix's own token); row j = n: NaN */
    float eot_lp;  /* row[eot] */
} sr_aed_top;

/* The summary of one log-prob row (what sr_aed_top says), on the host: probe is the prefix's
 * token at the row's position, or -1 for the next position. */
void sr_aed_top_of_row(const float *row, int vocab, int32_t probe, int32_t eot, sr_aed_top *t);
/* The k best entries of one row on the host, best first: ids to id[0, k), log-probs to lp[0, k)
 * (the op table's topk: ties to the lower id, NaN never chosen while a number is left). */
void sr_aed_row_topk(const float *row, int vocab, int k, int32_t *id, float *lp);

/* One request of a batched scorer call: ctx is the stream's scorer ctx, the rest are the
 * arguments of the solo form of the same name; top, where the scorer has aed_top, asks for
 * the rows' summaries instead of the rows (below). */
typedef struct sr_aed_req {
    void *ctx;
    int slot;
    const int32_t *prefix;
    int n, from;
    float *out;
    sr_aed_top *top; /* [n - from + 1] or NULL */
    int top_k;       /* with top: also each row's top_k best entries (0: none; beam decoders) */
    int32_t *top_id; /* [n - from + 1, top_k] their ids, best first (sr_aed_row_topk) */
    float *top_lp;   /* [n - from + 1, top_k] their log-probs */
} sr_aed_req;
typedef struct sr_tr_predict_req {
    void *ctx;
    const float *state_in;
    int32_t token;
    float *state_out, *pred_out;
} sr_tr_predict_req;
typedef struct sr_tr_joint_req {
    void *ctx;
    int t;
    const float *pred_out;
    float *logits;
} sr_tr_joint_req;
typedef struct sr_aed_ns_req {
    void *ctx;
    const int32_t *prefix;
    int n;
    int *start;
    float *p;
} sr_aed_ns_req;
typedef struct sr_sync_req {
    void *ctx;
    int t;
    int32_t prev;
    float *logits;  /* [vocab], or NULL with token (sr_scorer.sync_token) */
    int32_t *token; /* where logits is NULL: the step's argmax */
} sr_sync_req;

typedef struct sr_scorer {
    sr_scorer_kind kind;
    void *ctx;   /* the backend's stream state */
    int vocab;   /* size of the logit vectors */
    int blank;   /* transducer blank / sync "no token" id; -1 when none */
    int eot;     /* AED end-of-text id; -1 when none */

    /* SYNC: frames produced so far by the stream, and one step over frame t (t = 0, 1, ... in
     * order) given the previously chosen token (-1 before the first). logits: [vocab]. */
    int (*sync_frames)(void *ctx);
    sr_status (*sync_step)(void *ctx, int t, int32_t prev, float *logits);

    /* AED (Whisper-style encoder-decoder). Prefixes hold text tokens only: the backend prepends
     * its own prompt (SOT sequence) and applies its fixed logit rules (suppressed tokens, the
     * first-step blank suppression, no timestamps), so decoders see plain distributions.
     * aed_logprobs writes log-probabilities for positions from..n of prefix[0..n):
     * out[(j - from) * vocab + v] = log p(token j = v | prefix[0..j), audio so far), j = n being
     * the next token. `slot` (0 <= slot < aed_max_slots) names a per-stream decoder cache: calls
     * on a slot that extend its previous prefix under the same audio compute only the new
     * positions; anything else (new audio, a diverging prefix) recomputes what it must. Beam
     * decoders use one slot per beam. aed_max_len caps the text tokens of a hypothesis. */
    int aed_max_slots;
    int aed_max_len;
    /* Audio the stream has consumed so far in ms (may be NULL): decoders bound the tokens they
     * add per update by the audio that arrived since the last one. */
    int64_t (*aed_audio_ms)(void *ctx);
    sr_status (*aed_logprobs)(void *ctx, int slot, const int32_t *prefix, int n, int from,
                              float *out);
    /* No-speech probability (may be NULL: the model makes no such claim and decoders never
     * gate on it). A backend whose audio is cut into windows (Whisper: 30 s) decodes each
     * window's text separately; for the window that position n of prefix[0..n) falls in, this
     * writes *start, the index in prefix of that window's first text token, and *p, the
     * probability of the model's no-speech token at the start of that window's decoding
     * (openai-whisper: softmax over the raw logits at the SOT position, before any logit rule)
     * under the audio held for the window now. *p = 0 when that window's audio is not held
     * (no audio yet, or a window already finished). Decoders apply the silence rule of
     * docs/decoders.md with it; it does not touch the aed_logprobs slot caches. */
    sr_status (*aed_no_speech)(void *ctx, const int32_t *prefix, int n, int *start, float *p);

    /* TRANSDUCER: frames so far; prediction network step (state_in may be NULL = start state;
     * token -1 = start symbol) writing state_out [pred_state] and pred_out [pred_dim]; joint of
     * encoder frame t with pred_out writing logits [vocab]. */
    int (*tr_frames)(void *ctx);
    int pred_state;  /* floats in a prediction-network state */
    int pred_dim;    /* floats in a prediction output */
    sr_status (*tr_predict)(void *ctx, const float *state_in, int32_t token, float *state_out,
                            float *pred_out);
    /* Frames t are numbered from 0 over the stream; only the frames added by the latest
     * process call are held (decoders consume every new frame in their update). state_out may
     * alias state_in. With TDT (tr_n_durations > 0) logits has vocab + tr_n_durations entries:
     * token logits, then one per duration tr_durations[i] (frames to advance). tr_max_symbols:
     * symbols a decoder may emit on one frame (stream config, else the model's). */
    sr_status (*tr_joint)(void *ctx, int t, const float *pred_out, float *logits);
    int tr_max_symbols;
    int tr_n_durations;
    const int *tr_durations;

    /* Batched forms (engine; each may be NULL, then the engine calls the solo form once per
     * request). One call computes `count` requests of DISTINCT streams of one batch context
     * (model_ops.batch_open) as one batch — one gemm per Linear over all their rows — and each
     * request's outputs equal, bit for bit, what the solo call gives for it. Arguments and
     * errors as the solo forms; a failure may leave any request's outputs written or not.
     * A solo call is the batched form with count = 1 (one implementation). Limits (the
     * decoders' driver splits larger rounds): batch_max requests per call (0: no limit);
     * aed_batch_multi 1: aed_logprobs_batch also takes several requests of one stream on
     * distinct slots; tr_batch_multi 1: tr_predict_batch / tr_joint_batch also take several
     * requests of one stream (their requests are independent). */
    int batch_max;
    int aed_batch_multi;
    int tr_batch_multi;
    sr_status (*aed_logprobs_batch)(const sr_aed_req *r, int count);
    sr_status (*aed_no_speech_batch)(const sr_aed_ns_req *r, int count);
    sr_status (*tr_predict_batch)(const sr_tr_predict_req *r, int count);
    sr_status (*tr_joint_batch)(const sr_tr_joint_req *r, int count);
    sr_status (*sync_step_batch)(const sr_sync_req *r, int count);
    /* SYNC: 1 when sync_step_batch answers a request whose logits is NULL with the argmax of
     * the step's logits in *token (ties to the lower id, NaN never chosen while a number is
     * left: the op table's topk with k = 1), computed where the logits are, so that a greedy
     * decoder on a device copies one id per step instead of the vocabulary's row. */
    int sync_token;
    /* AED: 1 when aed_logprobs_batch answers a request whose top is set with each row's
     * summary in top[j - from] (sr_aed_top; the same values sr_aed_top_of_row gives for the
     * row the request would have written), with top_k > 0 also its top_k best entries
     * (sr_aed_row_topk's), and leaves out untouched (it may be NULL). aed_top_k_max bounds
     * top_k (a larger one is SR_ERR_ARG). A scorer without aed_top gets such requests with out
     * set, and the decoders' driver summarizes the rows itself. */
    int aed_top;
    int aed_top_k_max;
} sr_scorer;


/* ---- hypothesis buffer (owned by the stream, written by the decoder) ----------------------- */

typedef struct sr_hyp {
    int32_t *tokens; /* [cap] */
    int n;
    int cap;
    int n_stable;    /* decoder promise: tokens[0, n_stable) never change */
    int loop_cuts;   /* the decoder adds one each time its repetition guard cuts a loop; the
                        stream zeroes it at reset (sr_hypothesis.repetition_cuts) */
} sr_hyp;

sr_status sr_hyp_push(sr_hyp *h, int32_t token);
void sr_hyp_truncate(sr_hyp *h, int n); /* also clamps n_stable */

/* ---- decoders ----------------------------------------------------------------------------- */

typedef struct sr_decoder_ops {
    const char *name;
    const char *description;
    sr_scorer_kind kind;  /* the scorer shape it needs */
    /* Per-stream state from the stream config; *state may stay NULL for stateless decoders. */
    sr_status (*open)(const sr_stream_config *cfg, const sr_scorer *sc, void **state);
    /* After each processed chunk (final = 1 after the last): consume the new frames / audio and
     * update h. */
    sr_status (*update)(void *state, const sr_scorer *sc, int final, sr_hyp *h);
    /* Optional: update of `count` streams of one batch context at once, on the calling thread,
     * through the backend scorers' batched calls where they have them (sc[i]: stream i's
     * backend scorer). Every stream's calls and results are those of its solo update, in
     * the same order, so batched == solo holds; st[i] gets stream i's outcome (a failing
     * batched call fails every stream in it). The engine uses it instead of a thread per
     * stream: no thread hand-off per scorer call. */
    void (*update_batch)(void *const *state, const sr_scorer *const *sc, const int *final,
                         sr_hyp *const *h, int count, sr_status *st);
    /* Optional: nonzero when the last update was final and stopped at stream.final_steps with
     * steps left; the engine then calls update (final = 1, no new audio) again in each later
     * step until this is 0. NULL: a final update always runs whole. */
    int (*pending)(const void *state);
    void (*reset)(void *state);
    void (*close)(void *state);
    size_t (*state_bytes)(const void *state);
} sr_decoder_ops;

/* Look up a decoder by name; unknown names: SR_ERR_ARG listing every known decoder. */
sr_status sr_decoder_find(const char *name, const sr_decoder_ops **out);

/* ---- backends ----------------------------------------------------------------------------- */

/* Chunking the core applies for one stream. */
typedef struct sr_chunking {
    size_t first_chunk; /* samples in the first chunk */
    size_t chunk;       /* samples in every later chunk */
} sr_chunking;

typedef struct sr_model_ops {
    const char *name;        /* == HDF5 arch */
    const char *description;
    const char *default_decoder; /* when `defaults` is NULL or leaves the decoder unset */
    /* 1 when every per-chunk access of the backend to activations, caches and weights goes
     * through the table (uploads / downloads at the host boundary), so it runs on a device
     * table; 0: CPU only, sr_model_load refuses other devices (no silent host access to device
     * memory, no silent CPU fallback). */
    int device_ready;
    /* Per-model defaults (may be NULL: strategy left to stream_open, decoder default_decoder):
     * fill what cfg leaves unset in *out, which sr_model_defaults (core/stream.c) has preset
     * from cfg; fields cfg sets stay as they are. Reads m->impl, so it runs after load. */
    void (*defaults)(const sr_model *m, sr_use use, const sr_stream_config *cfg, sr_defaults *out);

    /* Parse m->config, load every tensor through sr_model_tensor (shape-checked against the
     * config), set m->impl. On failure release what was loaded (unload is not called). */
    sr_status (*load)(sr_model *m, sr_h5 *f);
    void (*unload)(sr_model *m);
    /* NULL-terminated top-level config keys the backend accepts without reading them: the
     * provenance converters record (docs/model-format.md lists them per arch). May be NULL. */
    const char *const *config_info;

    /* Batch context (may be NULL: the backend batches nothing and its streams own all their
     * state): what the streams stepped together share — cache pools with one slot per stream,
     * scratch sized for a whole batch. Every stream of such a backend lives in a batch
     * context; a lone stream (sr_stream_open) in one of max_streams = 1. All streams of a
     * context use cfg (validated here as stream_open validates it: SR_ERR_ARG naming the
     * field). batch_bytes: what the context holds (the pools' and scratch bytes). */
    sr_status (*batch_open)(const sr_model *m, const sr_stream_config *cfg, int max_streams,
                            void **batch);
    void (*batch_close)(void *batch);
    size_t (*batch_bytes)(const void *batch);

    /* Per-stream state; fill *ck with the chunking for this config; *sc with the scorer (ctx =
     * the new state). batch / slot: the stream's context and its slot there (0 <= slot <
     * max_streams; the slot's caches are cleared here, so a slot freed by stream_close is
     * reused without reallocating); NULL / 0 for backends without batch_open. Invalid /
     * unsupported cfg values: SR_ERR_ARG naming the field. */
    sr_status (*stream_open)(const sr_model *m, const sr_stream_config *cfg, void *batch, int slot,
                             void **state, sr_chunking *ck, sr_scorer *sc);
    /* Process one chunk: n == the chunk size, except with final = 1 where n may be shorter
     * (the remainder, possibly 0) and the backend flushes. */
    sr_status (*process)(void *state, const float *pcm, size_t n, int final);
    /* One chunk for each of `count` distinct streams of one batch context, as one batch (may be
     * NULL: the core calls process per stream). Stream i's arguments are pcm[i], n[i],
     * final[i] as for process, and its results equal process's bit for bit. process is this
     * with count = 1 where both exist. */
    sr_status (*process_batch)(void *batch, void *const *states, const float *const *pcm,
                               const size_t *n, const int *final, int count);
    void (*reset)(void *state);
    void (*stream_close)(void *state);
    size_t (*state_bytes)(const void *state);
} sr_model_ops;

/* Look up a backend by arch; unknown: SR_ERR_ARG listing every known arch. */
sr_status sr_backend_find(const char *arch, const sr_model_ops **out);

/* ---- the model object shared by backends ---------------------------------------------------- */

struct sr_model {
    const sr_model_ops *ops;
    char *path;
    char *arch;
    char *config_text;       /* JSON text from the file */
    cJSON *config;           /* parsed; read-only */
    sr_tokenizer *tokenizer; /* NULL when the file has none */
    const sr_kernels *k;     /* compute table chosen at load */
    sr_options opt;
    sr_tensor *tensors;      /* every tensor loaded, freed at sr_model_free */
    void **tmem;             /* table-memory copies made by sr_model_ftensor (off the CPU) */
    size_t n_tmem, cap_tmem;
    size_t n_tensors, cap_tensors;
    size_t weight_bytes;
    int bf16_products;       /* options precision "bf16" (sr_model_kweight) */
    sr_kweight **kweights;   /* table weights made by sr_model_weight, freed at sr_model_free */
    size_t n_kweights, cap_kweights;
    void *impl;              /* backend weights view and derived constants */
    const char *warning;     /* static text about the file (no digest), or NULL */
    unsigned char *cfg_read; /* [top-level config keys, in order]: 1 once the backend read it */
};

/* Load /weights/<name> with the exact expected shape into the model's tensor list and return a
 * pointer to it (valid for the model's life). See sr_h5_tensor for conversion and checks. */
sr_status sr_model_tensor(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                          const int64_t *shape, const sr_tensor **out);

/* The same as f32 in the model's table memory (*out valid for the model's life): the host
 * tensor itself where the host sees table memory (host_visible), a copy uploaded once on any
 * other table (freed at sr_model_free).
 * For the small parameters ops read (biases, norm gains, conv kernels). */
sr_status sr_model_ftensor(sr_model *m, sr_h5 *f, const char *name, int ndim,
                           const int64_t *shape, const float **out);
/* n floats a backend computes at load (not in the file: e.g. a logit mask) copied into the
 * model's table memory, valid for the model's life and counted in weight_bytes; `what` names
 * them in errors. */
sr_status sr_model_fconst(sr_model *m, const char *what, const float *host, size_t n, const float **out);

/* Load /weights/<name> as an [n, k] matrix (a Linear weight [out, in], or an embedding
 * [vocab, dim]) into the model's kernel table as an sr_kweight (the gemm / gather layout),
 * converted to `want` as sr_h5_tensor converts (SR_F32, SR_BF16, SR_F16, or SR_I8 with its
 * scale). The host copy is dropped once the table holds it, so no matrix is kept twice; the
 * weight is freed by sr_model_free and counted in weight_bytes. Errors as sr_h5_tensor, plus
 * the table's (SR_ERR_NOMEM, SR_ERR_UNSUPPORTED when the table has no op set). */
sr_status sr_model_weight(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int n, int k,
                          const sr_kweight **out);
/* The same for a tensor stored with ndim >= 2 dimensions (a conv weight [out, in, width]):
 * the shape is checked exactly, the matrix is [shape[0], product of the rest]. */
sr_status sr_model_weight_nd(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                             const int64_t *shape, const sr_kweight **out);
/* A conv1d weight [n_out, n_in, width] stored tap-major: the matrix [n_out, width * n_in] with
 * column t * n_in + c = weight[o][c][t], so that its input matrix is `width` input rows side by
 * side (gathered by copy_rows) rather than a channel-major im2col interleave. */
sr_status sr_model_weight_taps(sr_model *m, sr_h5 *f, const char *name, sr_dtype want,
                               int64_t n_out, int64_t n_in, int64_t width, const sr_kweight **out);

/* Several Linear weights over the same input as one table weight: the blocks names[0 ..
 * count) ([rows[i], k] each, count <= SR_WEIGHT_CAT_MAX) stacked in that order into [sum rows,
 * k], so that one gemm computes them all (one launch, and a wide enough product to keep a
 * device busy at one row: q / k / v, gate / up). Each output column is computed exactly as
 * with its block alone (a gemm's column depends only on its weight row), so the fused product
 * equals the separate ones bit for bit. Blocks stored in different element types are all
 * widened to f32 first (i8 dequantized: then close to, not the same as, the separate i8
 * products). Registered, counted and freed as sr_model_weight's; errors name the block. */
#define SR_WEIGHT_CAT_MAX 4
sr_status sr_model_weight_cat(sr_model *m, sr_h5 *f, int count, const char *const *names,
                              const int *rows, sr_dtype want, int k, const sr_kweight **out);
/* The usual case of it: the Linears PREFIX.<names[i]>.weight ([rows[i], k] each) stacked into
 * *w, and their biases PREFIX.<names[i]>.bias where has_bias[i] (has_bias NULL: none) as one
 * f32 vector [sum rows] in the model's table memory into *b (NULL when no block has one). A
 * block without bias gets -0.0f entries: t + -0 = t for every t, -0 included, so the fused
 * epilogue keeps every bit of the unbiased block. */
sr_status sr_model_linear_cat(sr_model *m, sr_h5 *f, const char *prefix, int count,
                              const char *const *names, const int *rows, const int *has_bias,
                              sr_dtype want, int k, const sr_kweight **w, const float **b);

/* Make a table weight from a host [n, k] matrix of dtype dt (scale: SR_I8's) as the model's
 * options want it: under precision "bf16" rounded to bf16 (unless i8) with bf16 products
 * (SR_KMUL_BF16); otherwise exact. *out is the caller's (weight_free); errors name the file
 * and `name`. sr_model_weight / _nd use it: every matrix of the op set's gemm goes through
 * here. */
sr_status sr_model_kweight(sr_model *m, const char *name, const void *host, sr_dtype dt,
                           const float *scale, int n, int k, sr_kweight **out);

/* Append the text of tokens[0..n) to b (tokenizer rules; ids when the model has none). */
sr_status sr_detokenize_into(const sr_model *m, const int32_t *tokens, int n, sr_strbuf *b);

/* Typed config getters for backends: read key from m->config; missing or wrong type:
 * SR_ERR_FORMAT "<file>: config.<key>: ..."; `def` variants return the default when absent.
 * Backends read the config only through these and sr_cfg_item: after load, a top-level key
 * nothing read (and not in the backend's config_info) is an error, so that a misspelt or
 * foreign key never passes silently for a default. */
const cJSON *sr_cfg_item(const sr_model *m, const char *key); /* NULL when absent */
sr_status sr_cfg_int(const sr_model *m, const char *key, int *out);
sr_status sr_cfg_int_def(const sr_model *m, const char *key, int def, int *out);
sr_status sr_cfg_float_def(const sr_model *m, const char *key, float def, float *out);

#endif /* SR_PLUGIN_H */
