/*
 * metrics.h — scoring of normalized transcripts and streaming timelines (issue 3, DESIGN §8):
 * word alignment with NIST sclite's costs and tie-breaking, WER/CER, RWER/ARWER and their
 * committed-prefix variants, latency (per-chunk compute, first hypothesis, finalization, per-word
 * emission delay, revisions), RTF/RTFx and memory aggregation. Internal to srkit (eval/), used
 * by `srkit eval` / `srkit score` / `srkit compare`; definitions are spelled out in
 * docs/metrics.md.
 *
 * Input text is ALREADY NORMALIZED (eval's normalizer runs first); words are the maximal runs of
 * non-whitespace bytes, whitespace being ASCII space, \t, \n, \v, \f, \r. Words compare byte for
 * byte (sclite folds case by default; normalized text is already case-folded when that matters).
 *
 * Conventions: times are milliseconds of audio from the start of the utterance; a rate that is
 * undefined (errors over 0 reference words, no samples, no alignments, no compute times) is NAN, written
 * as JSON null by callers. Every function is thread-safe: there are no globals; an sr_corpus must
 * not be used from two threads at once (give each worker its own and combine with
 * sr_corpus_merge).
 */
#ifndef SR_EVAL_METRICS_H
#define SR_EVAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/sr.h"

/* ---- words ------------------------------------------------------------------------------- */

typedef struct sr_words {
    char **w;  /* [n] NUL-terminated words pointing into buf; NULL when n == 0 */
    size_t n;
    char *buf; /* owned copy of the text with NULs written over the separators */
} sr_words;

/* Split text (NULL = empty) on ASCII whitespace into *out (owned: sr_words_free). */
sr_status sr_words_split(const char *text, sr_words *out);
void sr_words_free(sr_words *w); /* NULL and zeroed structs are no-ops; *w is zeroed */

/* Number of words of text[0, stable_bytes) that are complete, i.e. end before stable_bytes and
 * are followed in text by whitespace or the end of text. Maps a committed token prefix to words:
 * stable_bytes = length of the detokenized committed tokens, text = detokenized full hypothesis
 * (a word cut by the stable boundary does not count). stable_bytes > strlen(text) is clamped. */
size_t sr_words_complete_prefix(const char *text, size_t stable_bytes);

/* ---- alignment, WER, CER (eval/align.c) ---------------------------------------------------- */

typedef enum { SR_EDIT_COR = 0, SR_EDIT_SUB = 1, SR_EDIT_DEL = 2, SR_EDIT_INS = 3 } sr_edit;

typedef struct sr_align_step {
    sr_edit op;
    int64_t ref; /* reference index, -1 for an insertion */
    int64_t hyp; /* hypothesis index, -1 for a deletion */
} sr_align_step;

typedef struct sr_edit_counts {
    int64_t cor, sub, del, ins;
    int64_t n_ref; /* cor + sub + del */
    int64_t n_hyp; /* cor + sub + ins */
} sr_edit_counts;

/* Align hypothesis to reference by weighted Levenshtein with sclite's costs (correct 0,
 * substitution 4, deletion 3, insertion 3) and sclite's choice among equal-cost predecessors
 * (diagonal first, then deletion if strictly cheaper than insertion, else insertion), traced
 * back from the end. Fills *counts; when path is non-NULL, *path is a malloc'ed array (free with
 * free(); NULL when empty) of *n_path steps in order. Memory (n_ref+1)*(n_hyp+1) bytes up to 4 M
 * cells; beyond, linear in n_ref + n_hyp (the same path through a region around it, time
 * proportional to the region: small for similar texts, up to the whole matrix for unrelated
 * ones; eval/align.c). */
sr_status sr_align(const char *const *ref, size_t n_ref, const char *const *hyp, size_t n_hyp,
                   sr_edit_counts *counts, sr_align_step **path, size_t *n_path);
/* Test hook: align with the whole back-pointer matrix up to `cells` (n_ref+1)(n_hyp+1) cells and
 * with the region method beyond, whose blocks also keep back pointers up to `cells` cells (1: every
 * problem split down to two rows; 0 restores the default, 4 M). Not thread-safe; tests only. */
void sr_align_set_full_limit(size_t cells);

/* Word counts of normalized texts (NULL = empty). */
sr_status sr_wer_counts(const char *ref, const char *hyp, sr_edit_counts *out);

/* Character counts: the units are Unicode code points of the words joined by ONE space (runs of
 * whitespace collapse, ends are stripped), so spaces between words count, as in jiwer / HF
 * evaluate's CER; a byte that is not valid UTF-8 counts as one unit. Aligned with the same
 * sclite costs as words. */
sr_status sr_cer_counts(const char *ref, const char *hyp, sr_edit_counts *out);

/* (sub + del + ins) / n_ref. With n_ref == 0: 0 when there are no errors, NAN otherwise (an
 * empty reference with hypothesis words is all insertions and has no defined rate). */
double sr_edit_rate(const sr_edit_counts *c);
void sr_edit_counts_add(sr_edit_counts *acc, const sr_edit_counts *x);

/* ---- timelines ------------------------------------------------------------------------------ */

/* One hypothesis of a streaming run: srkit's own sr_timeline_entry (after normalizing its text
 * and mapping n_stable to words) and a timeline.jsonl line from any system map onto this. */
typedef struct sr_tl_entry {
    int64_t t_ms;       /* audio consumed when the hypothesis was produced (>= 0, non-decreasing) */
    const char *text;   /* normalized hypothesis (NULL = empty) */
    int64_t n_stable;   /* leading WORDS of text that are committed; -1 = unknown */
    int64_t compute_ns; /* compute spent on this chunk; -1 = unknown */
} sr_tl_entry;

/* End times of the reference words (normalized words, one per word, non-decreasing, >= 0).
 * Passed by pointer: NULL means "no word alignments" (ARWER and emission delays unavailable),
 * which is distinct from an aligned empty reference (n == 0, end_ms may be NULL). */
typedef struct sr_word_times {
    const int64_t *end_ms; /* [n] */
    size_t n;
} sr_word_times;

/* ---- RWER / ARWER (eval/rwer.c) ----------------------------------------------------------- */

typedef struct sr_rwer_sums {
    int64_t err;       /* sum over entries of S + D + I */
    int64_t ref;       /* sum over entries of the reference prefix lengths (C + S + D) */
    int64_t n_entries; /* entries scored */
    int valid;         /* 0: not computable (no timeline, no n_stable, no word times) */
} sr_rwer_sums;

typedef struct sr_rwer_result {
    sr_rwer_sums rwer;         /* h_k vs the first min(|h_k|, N) reference words */
    sr_rwer_sums rwer_stable;  /* first n_stable words of h_k vs the first min(n_stable, N) */
    sr_rwer_sums arwer;        /* h_k vs the reference words whose end time <= t_k */
    sr_rwer_sums arwer_stable; /* first n_stable words of h_k vs the same prefix as ARWER */
} sr_rwer_result;

/* RWER/ARWER sums of one utterance. times: the reference words' end times (times->n must equal
 * the word count of ref), or NULL (ARWER sums invalid). The *_stable sums are valid only when
 * every entry has n_stable >= 0. n_entries == 0: all invalid. Entries out of time order, n_stable
 * above the entry's word count, word times of the wrong count or order are SR_ERR_ARG naming the
 * entry / word. Each entry is an sr_align of the two word lists. */
sr_status sr_rwer_utt(const char *ref, const sr_word_times *times, const sr_tl_entry *e,
                      size_t n_entries, sr_rwer_result *out);

/* err / ref; NAN when !valid; ref == 0: 0 when err == 0, NAN otherwise. */
double sr_rwer_rate(const sr_rwer_sums *s);
/* Add x to acc when x is valid (an invalid x is skipped); acc becomes valid with its first. */
void sr_rwer_sums_add(sr_rwer_sums *acc, const sr_rwer_sums *x);

/* ---- latency (eval/latency.c) -------------------------------------------------------------- */

/* Nearest-rank percentile of n ascending values: the smallest value with at least p percent of
 * the values <= it, sorted[ceil(p/100 * n) - 1] (p <= 0 gives sorted[0]). NAN when n == 0. */
double sr_percentile_sorted(const double *sorted, size_t n, double p);

typedef struct sr_stat {
    size_t n;
    double mean, p50, p90, p99, max; /* NAN when n == 0 */
} sr_stat;

/* Summary of n values (any order; x is not modified). */
sr_status sr_stat_compute(const double *x, size_t n, sr_stat *out);

/* Per-word emission delay: for every step of path (sr_align of reference vs final hypothesis)
 * that is correct, the first entry time t_k from which on every entry has that word at the same
 * word position, minus the reference word's end time. Words that the last entry does not hold
 * at their position (final text given separately) have no delay. *delays_ms is malloc'ed (free
 * with free(); NULL when *n_delays == 0), in final-hypothesis word order. */
sr_status sr_emission_delays(const sr_words *final_hyp, const sr_align_step *path, size_t n_path,
                             const sr_word_times *times, const sr_tl_entry *e, size_t n_entries,
                             double **delays_ms, size_t *n_delays);

/* Words retracted over a timeline: sum over k >= 1 of |h_{k-1}| - lcp(h_{k-1}, h_k), lcp being
 * the longest common word prefix (a changed word retracts it and every word after it). */
sr_status sr_retracted_words(const sr_tl_entry *e, size_t n_entries, int64_t *out);

/* ---- one utterance, a corpus (eval/score.c) --------------------------------------------------- */

typedef struct sr_utt_input {
    const char *id;            /* utterance id, for messages */
    const char *ref;           /* normalized reference */
    const sr_word_times *times; /* end times of ref's words, or NULL (no alignments) */
    const sr_tl_entry *entries; /* [n_entries] timeline in time order, or NULL/0 (hyp only) */
    size_t n_entries;
    const char *hyp;           /* final hypothesis; NULL = the text of the last entry */
    int64_t audio_ms;          /* utterance duration; < 0 = unknown (last entry's t_ms) */
} sr_utt_input;

typedef struct sr_utt_metrics {
    sr_edit_counts wer, cer;
    double wer_rate, cer_rate;  /* sr_edit_rate */
    sr_rwer_result rwer;
    double rwer_rate, rwer_stable_rate, arwer_rate, arwer_stable_rate; /* sr_rwer_rate */
    int64_t first_hyp_ms;       /* t_k of the first entry with a word; -1 = none */
    double finalization_ms;     /* compute of the last entry; NAN unknown */
    double emission_delay_mean_ms; /* NAN without word times or correct words */
    size_t n_emission_words;
    int64_t retracted_words;
    double revisions_per_word;  /* retracted / final words; NAN when the final hyp is empty */
    double audio_ms;            /* input audio_ms, or the last entry's t_ms; NAN unknown */
    double compute_ms;          /* sum over entries; NAN if any entry lacks compute */
    double rtf;                 /* compute_ms / audio_ms; NAN unknown */
} sr_utt_metrics;

typedef struct sr_corpus_metrics {
    size_t n_utts;
    sr_edit_counts wer, cer;
    double wer_rate, cer_rate;
    sr_rwer_result rwer;        /* sums over the utterances where each is valid */
    double rwer_rate, rwer_stable_rate, arwer_rate, arwer_stable_rate;
    size_t n_utts_timeline, n_utts_stable, n_utts_aligned; /* utterances behind each sum */
    sr_stat chunk_compute_ms;   /* every entry with a compute time (final entries included) */
    sr_stat first_hyp_ms;       /* over utterances with a non-empty hypothesis */
    sr_stat finalization_ms;    /* compute of the final entries */
    sr_stat emission_delay_ms;  /* over words (all utterances pooled) */
    int64_t retracted_words, final_words;
    double revisions_per_word;  /* retracted_words / final_words (utterances with a timeline) */
    double audio_s, compute_s;  /* over utterances with a complete compute record; NaN when
                                   there is none */
    double rtf;                 /* compute_s / audio_s */
    double rtf_chunk_mean;      /* mean over chunks of compute / chunk audio (t_k - t_{k-1} > 0) */
    double rtfx;                /* 1 / rtf */
    sr_memstats memory;         /* maxima of what sr_corpus_add_memory saw (0 = never given;
                                   all 0: unknown, null in JSON) */
} sr_corpus_metrics;

/* Score one utterance without accumulating. Errors name in->id. */
sr_status sr_score_utt(const sr_utt_input *in, sr_utt_metrics *out);

typedef struct sr_corpus sr_corpus; /* corpus accumulator: sums and pooled samples */

sr_status sr_corpus_create(sr_corpus **out);
void sr_corpus_free(sr_corpus *sc); /* NULL is a no-op */

/* Score one utterance, add it to the corpus, and fill *out when non-NULL. On error the scorer
 * is unchanged. */
sr_status sr_corpus_add(sr_corpus *sc, const sr_utt_input *in, sr_utt_metrics *out);

/* Add src's utterances to dst (shards or worker threads); src is unchanged. */
sr_status sr_corpus_merge(sr_corpus *dst, const sr_corpus *src);

/* Keep the maxima of memory figures (e.g. sr_memory after each utterance). */
void sr_corpus_add_memory(sr_corpus *sc, const sr_memstats *m);

/* Corpus figures so far (no utterance: counts 0, rates NAN). */
sr_status sr_corpus_result(const sr_corpus *sc, sr_corpus_metrics *out);

#endif /* SR_EVAL_METRICS_H */
