/*
 * aed_common.h — helpers shared by the AED decoders (aed_greedy, aed_beam, stable_greedy,
 * stable_beam, local_agreement): scorer validation, argmax / top-k membership, the per-update
 * token cap and repetition-loop guard (the hallucination guards), greedy continuation and a
 * beam-search engine with openai-whisper's scoring plus WhisperRT's streaming stability check.
 * Internal to decoders/.
 */
#ifndef SR_AED_COMMON_H
#define SR_AED_COMMON_H

#include "lockstep.h"

/* Hallucination guard constants (docs/decoders.md). An update may add at most
 * SR_AED_CAP_BASE + SR_AED_CAP_PER_S * (seconds of audio in the chunk) tokens; an unknown chunk
 * size (stream.chunk_ms = 0, the backend's default) counts as SR_AED_CAP_DEFAULT_MS. */
#define SR_AED_CAP_BASE 8
#define SR_AED_CAP_PER_S 20
#define SR_AED_CAP_DEFAULT_MS 1000

/* Loop rule (the repetition guard, stream.repetition_guard): the hypothesis ends with a unit
 * of p tokens repeated r times in a row with r >= SR_AED_LOOP_MIN_REPEATS and
 * r * p >= SR_AED_LOOP_MIN_TOKENS. */
#define SR_AED_LOOP_MIN_REPEATS 4
#define SR_AED_LOOP_MIN_TOKENS 12

/* No-speech rule (docs/decoders.md): the text of a window is silence when the scorer's
 * no-speech probability p > SR_AED_NO_SPEECH_THRESHOLD and either the average log-probability
 * of its tokens (the EOT that ends it included) is <= SR_AED_LOGPROB_THRESHOLD (openai-whisper's
 * transcribe() skip rule) or p > SR_AED_NO_SPEECH_ALONE (whisper_streaming's rule: openai's
 * alone keeps tiny.en's " you" on digital silence, whose average log-prob is -0.38). */
#define SR_AED_NO_SPEECH_THRESHOLD 0.6
#define SR_AED_LOGPROB_THRESHOLD (-1.0)
#define SR_AED_NO_SPEECH_ALONE 0.9

/* Check that sc is a usable AED scorer for decoder `who` needing `slots` slots: kind, vocab,
 * eot in [0, vocab), aed_max_len >= 1, aed_max_slots >= slots, aed_logprobs set. SR_ERR_ARG
 * naming the field otherwise. */
sr_status sr_aed_check_scorer(const sr_scorer *sc, const char *who, int slots);


/* Audio in update number k (0 = the first chunk), in ms, from the stream config: the first
 * chunk is first_chunk_ms (or chunk_ms when 0); an unset chunk_ms counts as
 * SR_AED_CAP_DEFAULT_MS. A final update is bounded by one chunk (the remainder). */
int sr_aed_chunk_ms(const sr_stream_config *cfg, long k);

/* Tokens one update may add when it covers `ms` of audio. */
/* Audio (ms) that arrived since the previous update, from the scorer's aed_audio_ms when it
 * has one (seen_ms keeps the last reading; reset it to 0 with the stream), else the configured
 * chunk size of update k (sr_aed_chunk_ms). */
long sr_aed_update_ms(const sr_scorer *sc, const sr_stream_config *cfg, long k, long *seen_ms);

int sr_aed_cap_tokens(long ms);

/* Loop guard: when tok[0, n) ends with a repetition loop (the rule above, the smallest unit
 * length p that satisfies it), the length that keeps exactly one copy of the unit, clamped to
 * [min(min_keep, n), n]; -1 when there is no loop. */
int sr_aed_loop_keep(const int32_t *tok, int n, int min_keep);

/* 1 when the rule above calls a window with no-speech probability p and average log-prob
 * avg_logprob silence, else 0. */
int sr_aed_silent(double p, double avg_logprob);

/* Streaming no-speech gate on the last window of tok[0, n), once the scorer's aed_no_speech
 * answered (start, p) for tok[0, n) (the window position n falls in). lp[i] is the log-prob
 * recorded for tok[i]; end_lp the log-prob of the EOT that ended the decoding, NAN when it
 * stopped otherwise (cap, loop, aed_max_len). When the rule says silence, *silent = 1 and
 * *keep = max(min_keep, start) (never below min_keep, the tokens already promised stable); else
 * *silent = 0 and *keep = n. SR_ERR_ARG when start is outside [0, n]. A scorer without
 * aed_no_speech never gates (the decoders then skip the query: keep = n). */
sr_status sr_aed_gate_decide(const float *lp, int n, double end_lp, int min_keep, int start,
                             float p, int *keep, int *silent);

/* Why a greedy continuation stopped. */
typedef enum { SR_AED_EOT = 1, SR_AED_CAP = 2, SR_AED_MAXLEN = 3, SR_AED_LOOP = 4 } sr_aed_stop;

/* One step of a greedy continuation: next summarizes log p(next | tok[0, *n)) under the current
 * audio (sr_aed_top); take its argmax (the first one on ties). EOT stops (never stored);
 * otherwise append the token and its log-prob (lp[*n], may be NULL). Stops as well after max_new appended tokens
 * (*added counts them, start it at 0), at the scorer's aed_max_len, or, when guard is 1, when
 * the loop rule fires (the loop is then cut, never below min_keep; *why = SR_AED_LOOP).
 * Returns 1 when the continuation goes on and needs the summary of position *n in next (one
 * aed_logprobs call computing only position *n, same slot), 0 when it stopped (*why set).
 * tok and lp hold aed_max_len entries. */
int sr_aed_greedy_step(const sr_scorer *sc, int32_t *tok, float *lp, int *n, const sr_aed_top *next,
                       int max_new, int *added, int min_keep, int guard, sr_aed_stop *why);

/* Offline no-speech gate as a stepper part (openai-whisper's transcribe() skips such segments):
 * every window of tok[0, *n) that the rule calls silence loses its text (its break token, if
 * any, stays, so later windows keep their place); lp is compacted alongside. A closed window's
 * text ends with its break token (its log-prob stands for the EOT term); the last window ends
 * with end_lp (NAN: no EOT term). Windows are queried from the last to the first (removing a
 * window's text never moves earlier ones), one aed_no_speech call each. begin, then step after
 * each answered call (and once after begin): 1 = *call to make, 0 = done (*st). A scorer
 * without aed_no_speech gates nothing. */
typedef struct sr_aed_gall {
    int end, start, asked;
    float p;
    double end_lp;
} sr_aed_gall;
void sr_aed_gall_begin(sr_aed_gall *g, int n, double end_lp);
int sr_aed_gall_step(sr_aed_gall *g, const sr_scorer *sc, int32_t *tok, float *lp, int *n,
                     sr_status res, sr_call *call, sr_status *st);

/* ---- greedy updates (stable_greedy, local_agreement) ----------------------------------------
 * An update of these decoders is: one aed_logprobs call on slot 0 over tok[from, n) and the
 * next position (the decoder's first call: a re-check window, or just the next position), the
 * decoder's host work on the rows' summaries (sr_aed_top: all a greedy decoder reads of a row), a greedy continuation (sr_aed_greedy_step, one position per
 * call), the no-speech query on the result (when the scorer has one), the decoder's finish,
 * run as a stepper (lockstep.h) by sr_aed_greedy_batch. */
typedef struct sr_aed_gjob {
    int phase;             /* the driver's */
    /* begin() sets: */
    int32_t *tok;          /* [aed_max_len] the hypothesis, tok[0, *n) */
    float *lp;             /* [aed_max_len] its recorded log-probs */
    int *n;
    int from;              /* first call: aed_logprobs(slot 0, tok, *n, from) as summaries */
    sr_aed_top *tops;      /* [(*n - from + 1)] the first call's row summaries */
    float *rows;           /* [(*n - from + 1), vocab]: the rows, for a scorer without aed_top */
    /* after_first() sets (it may change *n): */
    sr_aed_top *next;      /* the summary continuing from *n: the greedy steps overwrite it */
    int cap, min_keep, guard; /* sr_aed_greedy_step's max_new, min_keep, guard */
    /* the driver's results for finish(): */
    int added;
    sr_aed_stop why;
    int gated, ns_start;   /* gated: the scorer answered the no-speech query (ns_start, ns_p) */
    float ns_p;
} sr_aed_gjob;

typedef struct sr_aed_gdec {
    const char *name; /* prefixes the errors */
    void (*begin)(void *state, const sr_scorer *sc, sr_aed_gjob *j);
    void (*after_first)(void *state, const sr_scorer *sc, sr_aed_gjob *j);
    /* the gate is the decoder's: sr_aed_gjob_gate gives the cut */
    sr_status (*finish)(void *state, const sr_scorer *sc, sr_aed_gjob *j, int final, sr_hyp *h);
} sr_aed_gdec;

/* sr_lockstep over decoder d's greedy updates (its solo update is count = 1). */
void sr_aed_greedy_batch(const sr_aed_gdec *d, void *const *states, const sr_scorer *const *scs,
                         const int *final, sr_hyp *const *hs, int count, sr_status *st);

/* In finish(): the no-speech gate's cut of the job's hypothesis (sr_aed_gate_decide with
 * end_lp = EOT's log-prob when the continuation stopped on EOT), *keep = *n when not gated. */
sr_status sr_aed_gjob_gate(const sr_scorer *sc, const sr_aed_gjob *j, int min_keep, int *keep,
                           int *silent);

/* Replace h's tokens with tok[0, n) and set n_stable. */
sr_status sr_aed_write_hyp(sr_hyp *h, const int32_t *tok, int n, int n_stable);

/* ---- beam engine (aed_beam, stable_beam) ---------------------------------------------------- */

typedef struct sr_aed_beam {
    int32_t *tok;  /* [max_len] */
    float *lp;     /* [max_len] log-prob of each token when emitted or last re-checked */
    int n;
    double score;  /* sum of lp[0, n) */
    double rank;   /* ordering key: score, plus the EOT log-prob when it paused on EOT */
    int slot;      /* scorer cache slot it uses */
    int dist_ok;   /* the engine's next-token best entries of its slot (did, dlp) are ready */
    double end_lp; /* EOT's log-prob when the beam paused on EOT, else NAN */
} sr_aed_beam;

typedef struct sr_aed_done {
    int32_t *tok; /* [max_len] text tokens (no EOT) */
    float *lp;    /* [max_len] their log-probs */
    int n;
    double score; /* sum of log-probs, EOT's included when it ended on EOT */
    double end_lp; /* EOT's log-prob when it ended on EOT, else NAN */
} sr_aed_done;

typedef struct sr_aed_beams {
    int b, vocab, max_len, eot;
    sr_aed_beam *beam, *next; /* [b] each: current beams and the next step's (swapped) */
    int n_beam;
    int k;                    /* b + 1 (at most vocab): the best entries a row contributes */
    sr_aed_top *rtop;         /* [b, window + 1] the re-check rows' summaries, per beam index */
    int32_t *rid;             /* [b, window + 1, k] their k best entries, per beam index */
    float *rlp;
    sr_aed_top *dtop;         /* [b] next-token summary, per slot (where the calls write it;
                                 the candidates read did, dlp) */
    int32_t *did;             /* [b, k] its k best entries, per slot */
    float *dlp;
    float *dist;              /* [b, vocab] rows, per slot, only for a scorer without aed_top */
    float *rows;              /* [b, window + 1, vocab] the same for the re-check, per beam index */
    int *w0;                  /* [b] first re-checked position, per beam index */
    int window;               /* tokens re-checked (stability n) */
    sr_aed_done *done;        /* [b] finished candidates (offline rules) */
    int n_done;
    struct sr_aed_cand { int parent; int32_t token; float lp; double score; } *cand; /* [b(b+1)] */
    int guard;                /* 1: the loop rule cuts looping beams (sr_aed_beams_init) */
    int loop_cuts;            /* loop cuts since init / reset (any beam, winning or not) */
    int *slot_used;           /* [b] */
    int *parent;              /* [b] parent of each next beam */
    int *fin;                 /* [2b] candidates finished in one step */
    /* the operation in progress (sr_aed_beams_begin / _next) */
    int op, max_steps, committed, step, sub, pending; /* pending: calls of the round */
    const sr_aed_done *best;  /* SR_AED_BEAMS_FINISH's answer (NULL: none) */
} sr_aed_beams;

/* The engine's operations; each runs as rounds of aed_logprobs calls, one per beam (on its
 * slot) in each round, driven by sr_aed_beams_next. */
enum {
    SR_AED_BEAMS_IDLE = 0,
    /* WhisperRT's stability check on new audio (Algorithm 2): in every beam, re-check the tokens
     * at positions [max(committed, n - window), n) in order with one aed_logprobs call; a token
     * stays only if it is still among the b best at its position and its log-prob did not fall
     * below the recorded one (which is then updated); the first one that fails is cut with all
     * after it. Leaves every beam's next-token distribution ready, drops duplicate beams and
     * sorts the beams by score. */
    SR_AED_BEAMS_CHECK,
    /* Streaming expansion (Algorithm 2): steps of beam search where each beam offers its b + 1
     * best next tokens, and the b best candidates by summed log-prob (EOT candidates included)
     * form the next beam set. A step whose set holds an EOT candidate pauses: that beam stays as
     * its prefix (beams then differ in length). Also stops after max_steps steps, when a beam
     * hits aed_max_len, or when a beam loops (cut by the loop guard, never below committed). */
    SR_AED_BEAMS_STREAM,
    /* Offline completion with openai-whisper's rules (patience 1): EOT candidates ranked above
     * the b-th live one are finished; stop when b are finished, after max_steps steps, or when
     * no beam can grow (aed_max_len); then top up with unfinished beams by score; e->best is the
     * finished candidate with the best score / length (length 0 counts as 1; the first best
     * wins). A beam whose tail loops is finished at its loop-guard cut without an EOT term. */
    SR_AED_BEAMS_FINISH,
};

/* Allocate for beam size b and re-check window `window` (0 = no stability check); guard 1
 * applies the loop rule to every beam. */
sr_status sr_aed_beams_init(sr_aed_beams *e, const sr_scorer *sc, int b, int window, int guard);
void sr_aed_beams_free(sr_aed_beams *e);
/* Back to one empty beam (score 0) on slot 0, no finished candidates, loop_cuts 0. */
void sr_aed_beams_reset(sr_aed_beams *e);
/* Keep only the best beam (beam 0), cut to its first n tokens (the no-speech gate). */
void sr_aed_beams_keep_best(sr_aed_beams *e, int n);
size_t sr_aed_beams_bytes(const sr_aed_beams *e);

/* Start operation op (SR_AED_BEAMS_CHECK / _STREAM / _FINISH; max_steps is not used by CHECK). */
void sr_aed_beams_begin(sr_aed_beams *e, int op, int max_steps, int committed);

/* Run the operation up to its next scorer calls: n > 0 = call[0 .. n) holds them (at most b,
 * independent of each other: make them, then call this again), 0 = the operation is
 * complete. A failed call ends the operation: report it with sr_aed_beams_call_error and do
 * not call this again before the next begin. */
int sr_aed_beams_next(sr_aed_beams *e, sr_call *call);

/* st prefixed with what the pending call was for (beam, position). */
sr_status sr_aed_beams_call_error(const sr_aed_beams *e, sr_status st);

#endif /* SR_AED_COMMON_H */
