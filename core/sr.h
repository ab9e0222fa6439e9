/*
 * sr.h — the one public header of srkit, a C11 toolkit for streaming speech recognition.
 *
 * A model (weights + hyper-parameters, read-only after load) is loaded from one HDF5 file and
 * shared by any number of streams; a stream holds ALL per-utterance state (caches, decoder state,
 * timeline). Audio is 16 kHz mono float in [-1, 1]. Every call that can fail returns an
 * sr_status; sr_last_error() gives the detail text (naming the file, tensor or field) of the
 * last failure on the calling thread. Library code never prints and never exits.
 *
 * Thread-safety: distinct solo streams (sr_stream_open) may be used from distinct threads at
 * once, also when they share one model. One stream must not be used from two threads at once.
 * Streams of one engine share its batch: see sr_engine_create for what may run concurrently.
 *
 * Matrix layout convention: row-major, time-major features ([T, n_mels]) throughout.
 */
#ifndef SR_H
#define SR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SR_VERSION "0.1.0"

/* ---- status ------------------------------------------------------------------------------ */

typedef enum {
    SR_OK = 0,
    SR_ERR_NOMEM = -1,        /* allocation failed */
    SR_ERR_IO = -2,           /* file missing, unreadable, write failed */
    SR_ERR_FORMAT = -3,       /* file readable but malformed: HDF5 layout, JSON, audio format */
    SR_ERR_ARG = -4,          /* caller passed an invalid argument or config value */
    SR_ERR_UNSUPPORTED = -5,  /* valid request this build or backend cannot do */
    SR_ERR_DEVICE = -6        /* CUDA / device failure or no device present */
} sr_status;

/* Short fixed text for a status ("invalid argument"). Never NULL. Thread-safe. */
const char *sr_strerror(sr_status s);

/* Detail of the last failing call on this thread ("weights.h5: tensor /weights/x: shape
 * [3, 4], config wants [3, 5]"). Empty string when none. Valid until the next srkit call on
 * the same thread. Thread-safe (thread-local). */
const char *sr_last_error(void);

/* ---- element types ------------------------------------------------------------------------ */

typedef enum { SR_F32 = 0, SR_F16 = 1, SR_BF16 = 2, SR_I8 = 3, SR_I32 = 4, SR_I64 = 5 } sr_dtype;

const char *sr_dtype_name(sr_dtype t); /* "f32", "f16", "bf16", "i8", "i32", "i64" */
size_t sr_dtype_size(sr_dtype t);      /* bytes per element */

/* ---- audio (core/audio.c) ------------------------------------------------------------------ */

typedef struct sr_audio {
    float *samples;  /* [n] mono, float in [-1, 1], owned: release with sr_audio_free */
    size_t n;        /* number of samples */
    int sample_rate; /* Hz */
} sr_audio;

/* Read any format libsndfile reads (WAV, FLAC, OGG, MP3 where supported), downmix to mono by
 * averaging channels and resample to target_rate (0 = keep the file's rate) with libsamplerate
 * (SRC_SINC_BEST_QUALITY). Empty or zero-length audio is SR_ERR_FORMAT; unreadable path
 * SR_ERR_IO; unknown format SR_ERR_FORMAT. On error *out is zeroed. Thread-safe. */
sr_status sr_audio_load(const char *path, int target_rate, sr_audio *out);

/* Resample n mono samples from rate_in to rate_out. *out is malloc'ed (free with free()).
 * rate_in == rate_out copies. Thread-safe. */
sr_status sr_audio_resample(const float *in, size_t n, int rate_in, int rate_out, float **out,
                            size_t *n_out);

/* Write mono float samples as 16-bit PCM WAV (for tools and tests). Thread-safe. */
sr_status sr_audio_write_wav(const char *path, const float *samples, size_t n, int sample_rate);

/* Release the samples; the struct is zeroed. NULL and zeroed structs are no-ops. */
void sr_audio_free(sr_audio *a);

/* ---- feature front-ends (core/mel_*.c) ----------------------------------------------------- */

typedef enum {
    SR_MEL_WHISPER = 0, /* openai-whisper log_mel_spectrogram */
    SR_MEL_NEMO = 1     /* NeMo FilterbankFeatures (AudioToMelSpectrogramPreprocessor) */
} sr_mel_kind;

typedef enum { SR_NORM_NONE = 0, SR_NORM_PER_FEATURE = 1 } sr_mel_norm;

typedef struct sr_mel_config {
    sr_mel_kind kind;
    int sample_rate;     /* 16000 */
    int n_fft;           /* whisper 400, nemo 512 */
    int win_length;      /* 400 */
    int hop_length;      /* 160 */
    int n_mels;          /* 80 or 128 */
    float preemph;       /* nemo: 0.97 (0 = off); whisper: unused */
    sr_mel_norm normalize; /* nemo: NA or per_feature; whisper: unused */
    const float *filters;  /* optional [n_mels, n_fft/2 + 1]; NULL = computed (Slaney); copied */
    /* Whisper streaming policy for the utterance-global clamp log10 >= max - 8:
     * if > -1e30 the stream uses this fixed ceiling (Voxtral's global_log_mel_max); otherwise a
     * running maximum over the frames seen so far. Offline ignores it unless fixed_max is set. */
    float log_mel_max;
    int fixed_max;       /* 1 = offline also uses log_mel_max instead of the utterance max */
} sr_mel_config;

/* Fill defaults for a kind: whisper (400/400/160/80) or nemo (512/400/160/80, preemph 0.97,
 * per_feature). */
void sr_mel_config_init(sr_mel_config *c, sr_mel_kind kind);

typedef struct sr_mel sr_mel; /* filterbank + window + FFT plan; read-only after create */

sr_status sr_mel_create(const sr_mel_config *c, sr_mel **out);
void sr_mel_free(sr_mel *m);
int sr_mel_n_mels(const sr_mel *m);
const float *sr_mel_filters(const sr_mel *m); /* [n_mels, n_fft/2 + 1] */

/* Offline features with the reference's exact behaviour (utterance-global clamp /
 * normalization included). *out is malloc'ed [*n_frames, n_mels]; free with free().
 * Whisper: n_frames = n / hop (last STFT frame dropped); NeMo: n / hop + 1 frames, of which
 * floor(n / hop) are valid (the rest zeroed, as the reference masks them).
 * Thread-safe (m is read-only). */
sr_status sr_mel_compute(const sr_mel *m, const float *pcm, size_t n, float **out, int *n_frames);

typedef struct sr_mel_stream sr_mel_stream; /* per-stream STFT overlap state */

sr_status sr_mel_stream_open(const sr_mel *m, sr_mel_stream **out);
/* Feed n samples; writes every frame that is now complete to out ([n_out, n_mels], at most
 * max_frames; SR_ERR_ARG if more would be produced — size it with sr_mel_stream_pending). */
sr_status sr_mel_stream_feed(sr_mel_stream *s, const float *pcm, size_t n, float *out,
                             int max_frames, int *n_out);
/* Upper bound on frames a feed of n more samples can produce; it also bounds what
 * sr_mel_stream_finish emits right after that feed (pending(s, 0) sizes the finish buffer). */
int sr_mel_stream_pending(const sr_mel_stream *s, size_t n);
/* End of audio: emit the remaining frames (right padding as the reference does). */
sr_status sr_mel_stream_finish(sr_mel_stream *s, float *out, int max_frames, int *n_out);
void sr_mel_stream_reset(sr_mel_stream *s);
void sr_mel_stream_close(sr_mel_stream *s);

/* ---- models and streams -------------------------------------------------------------------- */

typedef struct sr_model sr_model;   /* weights + config; read-only after load; shared */
typedef struct sr_stream sr_stream; /* all per-stream state */

typedef struct sr_options {
    const char *device;    /* "cpu" (default) or "cuda" */
    int threads;           /* BLAS threads; 0 = library default */
    /* How the weight products multiply (docs/config.md "model"): "f32" (default; NULL too):
     * every weight widened exactly, f32 activations (the parity mode); "bf16": the matrices of
     * the products (Linear, embedding, conv weights) are held in bf16 (f32 / f16 ones rounded
     * at load; i8 kept) and multiply activations rounded to bf16 with f32 sums, as torch runs
     * a bf16 model (fast with AMX or AVX512_BF16). Attention, norms and caches stay f32. */
    const char *precision;
} sr_options;

void sr_options_init(sr_options *o);

/* Load an srkit HDF5 model (DESIGN §5). Validates root attributes, the arch against the
 * registry, every tensor's shape against the config, and rejects NaN/Inf weights; the message
 * names the file and the tensor or attribute. opt may be NULL (defaults). *out is owned by the
 * caller: release with sr_model_free. */
sr_status sr_model_load(const char *h5_path, const sr_options *opt, sr_model **out);
void sr_model_free(sr_model *m); /* NULL is a no-op; no stream of m may be open */

const char *sr_model_arch(const sr_model *m);   /* "whisper", "fastconformer_rnnt", ... */
const char *sr_model_config(const sr_model *m); /* the config JSON text from the file */
/* A warning about the loaded file, or NULL: today only "no srkit digest ... integrity not
 * verified" (docs/model-format.md, "Digest"). Static text; callers print it. */
const char *sr_model_warning(const sr_model *m);

/* Text of tokens[0..n) as the model's tokenizer prints it (special tokens skipped), always
 * well-formed UTF-8 (bytes forming no character, such as a prefix ending inside one, print as
 * U+FFFD, as the references' decoders do); *out is malloc'ed (free with free()). Used to map a
 * committed token prefix to words. Thread-safe. */
sr_status sr_model_detokenize(const sr_model *m, const int32_t *tokens, int n, char **out);

/* Describe an srkit HDF5 file without loading it into a backend: arch, config, tensor count,
 * parameter count, bytes by dtype, every tensor with dtype and shape. *json_out is a
 * malloc'ed JSON object text (free with free()). Thread-safe. */
sr_status sr_model_inspect(const char *h5_path, char **json_out);

typedef struct sr_stream_config {
    const char *strategy;  /* backend-specific ("whisperrt", "reencode", "offline", "cache_aware",
                              ...); NULL = the model's default (sr_model_defaults) */
    const char *decoder;   /* decoder name; NULL = the model's default (sr_model_defaults) */
    int chunk_ms;          /* chunk size; 0 = the model's default (sr_model_defaults) */
    int first_chunk_ms;    /* first chunk (tau0); 0 = the model's default (WhisperRT: 2 x
                              chunk_ms, or the trained one of causal weights) */
    int stability_n;       /* stable_greedy: tokens re-checked (n); default 2 */
    int beam;              /* beam size (b); default 1 */
    int max_symbols;       /* transducer: max symbols per frame; 0 = model config */
    int att_context[2];    /* FastConformer [left, right]; {0, 0} = model default */
    int decoder_kv_cache;  /* WhisperRT: keep decoder self-attention K/V across chunks */
    int delay_tokens;      /* Voxtral transcription delay; 0 = model default */
    int record_timeline;   /* 1 (default) keeps every timeline entry; 0 keeps only the last */
    const char *cache_dtype; /* per-stream caches: NULL / "f32" (default), "f16" (FastConformer
                                cache-aware caches) or "bf16" (Voxtral K/V caches); a backend
                                rejects a type it lacks; read when the stream opens */
    int repetition_guard;  /* 1 (default): the AED decoders cut a repetition loop at the end of a
                              hypothesis (docs/decoders.md); 0: off, for paper-exact runs */
    int max_seconds;       /* 0 (default): streams of any length. N: a stream holds at most N s
                              of audio (a feed past it fails with SR_ERR_ARG naming the field),
                              and a backend may size per-stream caches by it (Voxtral's decoder
                              K/V: the positions of N s instead of the model's whole window) */
    int final_steps;       /* 0 (default): a stream's final decoder update runs whole in the
                              engine step of its last chunk. N: at most N decoder steps of it per
                              engine step (sync_greedy: Voxtral's flush, one step a frame); the
                              rest runs in the following steps beside the other streams' chunks,
                              which then wait for N steps instead of all of them. The tokens are
                              the same; the final result comes later (sync_greedy only: the
                              other decoders run their final update whole) */
} sr_stream_config;

void sr_stream_config_init(sr_stream_config *c);

/* What the caller of a stream reads: hypotheses while the audio arrives (srkit stream, eval,
 * sr_stream_open) or only the final text (srkit transcribe). A model may pick different
 * defaults for the two: vanilla Whisper weights transcribe best offline, which a live caller
 * cannot use. */
typedef enum { SR_USE_LIVE = 0, SR_USE_FINAL = 1 } sr_use;

/* What a stream config's unset fields become for one model file. */
typedef struct sr_defaults {
    const char *strategy;  /* NULL: the backend has one way to run (no strategy names) */
    const char *decoder;
    int chunk_ms;          /* 0: the backend's own (or not applicable: offline) */
    int first_chunk_ms;    /* 0: the backend's own (or not applicable) */
    const char *basis;     /* why, in words ("causal Whisper weights (config.streaming.causal)");
                              NULL when the arch has one default for every file */
} sr_defaults;

/* The defaults of model m for a stream config cfg (NULL: all unset) and a use: fields cfg sets
 * are kept, the rest chosen to fit them (Whisper: a decoder that decodes only at the end
 * leaves vanilla weights offline). Strings are static or owned by m. sr_stream_open and
 * sr_engine_create apply this with SR_USE_LIVE; the one place defaults are decided. */
sr_status sr_model_defaults(const sr_model *m, sr_use use, const sr_stream_config *cfg,
                            sr_defaults *out);

typedef struct sr_hypothesis {
    const int32_t *tokens; /* [n_tokens] */
    int n_tokens;
    const char *text;      /* detokenized tokens */
    int n_stable;          /* tokens[0, n_stable) will never change */
    int repetition_cuts;   /* times the repetition guard cut a loop since open / reset */
} sr_hypothesis;

typedef struct sr_timeline_entry {
    int64_t audio_ms;       /* audio consumed when this chunk was processed */
    const int32_t *tokens;  /* [n_tokens] hypothesis after this chunk */
    int n_tokens;
    const char *text;       /* hypothesis text after this chunk */
    int n_stable;
    int64_t compute_ns;     /* wall time spent on this chunk (model + decoder) */
    int64_t model_ns;       /* of compute_ns: the backend's part (the rest is the decoder's) */
    int is_final;           /* 1 for the entry written by sr_stream_finish */
} sr_timeline_entry;

typedef struct sr_timeline {
    const sr_timeline_entry *entries; /* [n] */
    size_t n;
} sr_timeline;

/* Open a stream on m. cfg may be NULL (backend defaults). Unknown decoder/strategy names are
 * SR_ERR_ARG with the known names listed. The stream keeps a pointer to m: m must outlive it.
 * Thread-safe with respect to other streams of m. */
sr_status sr_stream_open(const sr_model *m, const sr_stream_config *cfg, sr_stream **out);

/* Feed n samples (any n, 0 allowed; copied). Every complete chunk is processed now and appends
 * one timeline entry; the same audio fed in any split gives the same timeline (compute times
 * aside). NaN/Inf samples are SR_ERR_ARG. After finish, feed is SR_ERR_ARG until reset. */
sr_status sr_stream_feed(sr_stream *s, const float *pcm16k, size_t n);

/* End of audio: process the buffered remainder (padded as the backend requires), flush right
 * context and tail decoding; appends one final timeline entry. */
sr_status sr_stream_finish(sr_stream *s);

/* Current hypothesis / timeline; pointers valid until the next feed/finish/reset/close. */
const sr_hypothesis *sr_stream_hypothesis(const sr_stream *s);
const sr_timeline *sr_stream_timeline(const sr_stream *s);

/* Return to the state of a freshly opened stream, without reallocating caches. */
void sr_stream_reset(sr_stream *s);
void sr_stream_close(sr_stream *s); /* NULL is a no-op */

typedef struct sr_memstats {
    size_t weight_bytes;   /* bytes of model tensors in memory */
    size_t stream_bytes;   /* bytes of per-stream state (caches, buffers, decoder), 0 if no s */
    size_t peak_rss_bytes; /* process peak resident set size (getrusage) */
    size_t gpu_peak_bytes; /* most device bytes ever held through the model's op table (weights,
                            * pools, scratch; every model of the process), 0 on CPU */
    /* device bytes held now, 0 on CPU: in all, and of it the cache pools (every device pool
     * of the process); the rest is weights (weight_bytes) and scratch */
    size_t gpu_live_bytes, gpu_pool_bytes;
} sr_memstats;

/* The device bytes of ms (held at its measurement) by what holds them: the model's weights
 * (weight_bytes when anything is on a device, else 0), the cache pools, and the rest (scratch:
 * batch buffers, stream state; never below 0). Thread-safe; any pointer may be NULL. */
void sr_memory_gpu_split(const sr_memstats *ms, size_t *weights, size_t *pools, size_t *scratch);

/* Memory figures for a model and optionally one of its streams (s may be NULL). A stream's
 * stream_bytes include its share of the pools it uses: all of them for a solo stream, 1 /
 * max_streams of its engine's for an engine stream. */
void sr_memory(const sr_model *m, const sr_stream *s, sr_memstats *out);

/* ---- batched engine (core/stream.c) --------------------------------------------------------- */

/* An engine steps up to max_streams streams of one model and one stream config together. Each
 * stream is fed on its own (any start time, any feed sizes, finish, reset and close at any
 * time); sr_engine_step gathers the ready chunk of every stream into one batch — one GEMM per
 * Linear over the rows of all of them, one attention call per layer, and the decoder calls of
 * all streams (AED decoder steps, transducer predict / joint, Voxtral decoder steps) batched —
 * so the weights are read once per step instead of once per stream. Every stream's tokens and
 * timeline equal, bit for bit, what the same audio gives in a solo stream (a solo stream is an
 * engine of one inside: there is no second implementation). Cache pools belong to the engine,
 * one slot per stream: opening and closing streams reuses slots without reallocating.
 * Decoder searches run on engine-owned threads (one per stream slot that is in a batched step),
 * each blocking in its scorer calls until the step's batcher has computed them all together;
 * a decoder that can step many streams itself (rnnt_greedy) runs them all on the stepping
 * thread instead.
 * cfg may be NULL (backend defaults); it is copied. max_streams 1..65536. Thread-safety:
 * sr_stream_feed and sr_stream_finish of an engine's streams may be called from any threads,
 * also while another thread steps the engine (each stream from one thread at a time); every
 * other call on the engine or its streams (open, step, drain, ready, reset, close,
 * hypothesis, timeline, memory) comes from one thread at a time, the stepping thread. Free
 * with sr_engine_free. */
typedef struct sr_engine sr_engine;

sr_status sr_engine_create(const sr_model *m, const sr_stream_config *cfg, int max_streams,
                           sr_engine **out);
/* Closes the streams still open on e; NULL is a no-op. */
void sr_engine_free(sr_engine *e);

/* A new stream on a free slot of e (SR_ERR_ARG when max_streams are open). On such a stream
 * sr_stream_feed and sr_stream_finish only queue audio (copied; the queue grows until steps
 * consume it) and the chunks run in sr_engine_step; hypothesis, timeline, reset, close and
 * sr_memory work as for a solo stream. sr_stream_close frees the slot. */
sr_status sr_engine_open(sr_engine *e, sr_stream **out);

/* One step: the next chunk of every stream that has one ready (a whole chunk queued, or after
 * finish the remainder), as one batch, and the next stream.final_steps decoder steps of every
 * stream whose final update is still going on (it takes no chunk until done); *n_chunks (may
 * be NULL) gets the number of streams stepped (0: none was ready). A failure inside the step marks the streams it concerns failed (a
 * backend failure: every stream of the batch; a decoder failure: that stream), returns the
 * first failure naming the stream's slot, and the other streams' chunks still complete. A
 * failed stream answers feed / finish with its error until reset. */
sr_status sr_engine_step(sr_engine *e, int *n_chunks);
/* Whether stream s has failed in a step (SR_OK: not failed); *msg (may be NULL) gets the
 * detail, valid until the stream's next reset or close. */
sr_status sr_stream_failed(const sr_stream *s, const char **msg);
/* Whether stream s has run its final chunk and its whole final decoder update (its timeline's
 * last entry is final). */
int sr_stream_done(const sr_stream *s);
/* Steps until no stream has a ready chunk or final update going on (stops at the first failing
 * step). */
sr_status sr_engine_drain(sr_engine *e);
/* Streams a step would run now: a chunk ready, or a final update going on. */
int sr_engine_ready(const sr_engine *e);
/* Open streams; the most the engine takes. */
int sr_engine_streams(const sr_engine *e);
int sr_engine_max_streams(const sr_engine *e);
/* Memory of the engine: weight_bytes of its model; stream_bytes: every open stream's own state
 * plus the engine's shared pools and batch scratch; peak RSS. */
void sr_engine_memory(const sr_engine *e, sr_memstats *out);

/* ---- registry (models/registry.c, decoders/registry.c) -------------------------------------- */

size_t sr_backend_count(void);
const char *sr_backend_name(size_t i); /* NULL past the end */
size_t sr_decoder_count(void);
const char *sr_decoder_name(size_t i); /* NULL past the end */

/* ---- experiment configs (core/config.c) ------------------------------------------------------ */

/* One run of an experiment: the config with one point of its sweep applied. All strings are
 * owned by the sr_config they came from. */
typedef struct sr_run_config {
    const char *name;        /* config "name", plus the sweep point: "name[stream.chunk_ms=100]" */
    const char *sweep_point; /* "stream.chunk_ms=100,stream.decoder=stable_beam" or "" */
    struct {
        const char *path;    /* ${VAR} expanded */
        const char *device;  /* "cpu" | "cuda" */
        int threads;
        const char *precision; /* "f32" | "bf16" (sr_options) */
    } model;
    sr_stream_config stream;
    struct {
        const char *format;  /* "auto" (default: told from the path) | "librispeech" | "manifest" |
                                "kaldi" | "trn" */
        const char *path;
        int limit;           /* 0 = all */
    } data;
    const char *alignments;  /* NULL or a CTM / TextGrid folder path */
    const char *normalizer;  /* "whisper_en" (default) | "basic" | "none" */
    const char *output;      /* results folder */
    struct {
        const char *path;    /* NULL = no regression gate */
        double max_wer_increase;  /* absolute WER points */
        double max_rtf_increase;  /* relative, 0.2 = 20 % slower; 0 = not gated */
    } baseline;
} sr_run_config;

typedef struct sr_config sr_config;

/* Parse an experiment config file: JSON (cJSON) with the schema of DESIGN §8, ${VAR} and
 * ${VAR:-default} expanded from the environment in every string (SRKIT_HOME defaults to
 * ~/.cache/srkit), relative paths kept as written. Wrong types, bad values, malformed JSON:
 * SR_ERR_FORMAT / SR_ERR_ARG with a message naming the file and the field ("cfg.json:
 * stream.chunk_ms: expected an integer, got string"). Unknown keys are warnings, not errors.
 * *out owned by the caller (sr_config_free). Thread-safe. */
sr_status sr_config_load(const char *path, sr_config **out);
/* Same from a string; origin names it in messages. */
sr_status sr_config_parse(const char *json, const char *origin, sr_config **out);
void sr_config_free(sr_config *c);

size_t sr_config_n_runs(const sr_config *c);                       /* sweep expansion, >= 1 */
const sr_run_config *sr_config_run(const sr_config *c, size_t i);  /* NULL past the end */
size_t sr_config_n_warnings(const sr_config *c);
const char *sr_config_warning(const sr_config *c, size_t i);       /* "cfg.json: unknown key x" */
/* The config as parsed (after expansion) as JSON text, for echoing in results; owned by c. */
const char *sr_config_json(const sr_config *c);

#ifdef __cplusplus
}
#endif
#endif /* SR_H */
