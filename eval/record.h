/*
 * record.h — what one utterance of a run produced, before any scoring, and how a set of them
 * becomes metrics and output files. Records are the unit of everything the harness keeps:
 * `srkit eval` appends one per finished utterance to utts.jsonl (which is also what a resumed
 * run skips and what `srkit merge` combines), and `srkit score` builds them from another
 * system's trn or timeline.jsonl. Scoring is a pure function of the records, the references,
 * the normalizer and the word times, so shards merged equal one run.
 *
 * Text in records is raw (as the system printed it); normalization happens when scoring.
 */
#ifndef SR_EVAL_RECORD_H
#define SR_EVAL_RECORD_H

#include "dataset.h"
#include "metrics.h"
#include "normalizer.h"

#include <cJSON.h>

typedef struct sr_record {
    char *id;
    char *ref;             /* raw reference text ("" when empty) */
    char *hyp;             /* raw final hypothesis */
    double audio_ms;       /* utterance duration; < 0 unknown */
    sr_tl_point *points;   /* [n_points] timeline, raw texts; n_stable in raw words (-1 unknown) */
    size_t n_points;
    sr_memstats mem;       /* after the utterance (0 = not measured) */
    char *error;           /* NULL, or why the utterance could not be run (counted, not scored) */
    int repetition_cuts;   /* times the decoder's repetition guard cut a loop (0 in records
                              written before it was recorded) */
} sr_record;

void sr_record_clear(sr_record *r); /* frees the members and zeroes r; NULL is a no-op */

/* One utts.jsonl line (with "\n") for r. */
sr_status sr_record_to_jsonl(const sr_record *r, sr_strbuf *out);

/* Parse one utts.jsonl line into *r (zeroed first). Errors name `where` ("file:line"). */
sr_status sr_record_from_json(const cJSON *j, const char *where, sr_record *r);

/* Read every record of a utts.jsonl file. A truncated LAST line (a run killed while writing)
 * is ignored and counted in *n_dropped; anything else malformed is SR_ERR_FORMAT naming the
 * line. A missing file gives zero records. Records come back in file order. */
sr_status sr_records_read(const char *path, sr_record **out, size_t *n, size_t *n_dropped);
void sr_records_free(sr_record *r, size_t n);

/* How records are scored. */
typedef struct sr_score_setup {
    const sr_normalizer *norm;        /* required */
    const sr_alignments *alignments;  /* word times of the references, or NULL */
} sr_score_setup;

/* Score records (those with an error are counted in n_failed, not scored) into a corpus
 * accumulator; *per_utt (optional) receives a JSON array with one object per record (id, raw
 * and normalized texts, counts and rates, latency and speed figures, error). Thread-safe. */
sr_status sr_records_score(const sr_record *r, size_t n, const sr_score_setup *setup,
                           sr_corpus *corpus, size_t *n_failed, cJSON **per_utt);

/* The aggregate object written into results.json and printed by `srkit score --json`: wer,
 * cer, rwer, rwer_stable, arwer, arwer_stable (null when undefined), n_utts, n_failed,
 * n_ref_words, sub, del, ins, cor, latency {...}, rtf, rtfx, audio_s, compute_s, memory {...}. */
cJSON *sr_corpus_to_json(const sr_corpus_metrics *m, size_t n_failed);

/* End times (ms) of the normalized reference words from raw word times. Normalized word j ends
 * at the end of the shortest raw-word prefix from which on every longer prefix normalizes to
 * text whose first j + 1 words equal those of the whole reference (so "twenty five" -> "25"
 * ends with "five"). *end_ms malloc'ed [n_norm_words]. Raw words that do not spell the
 * reference (after normalization) are SR_ERR_ARG naming the utterance. */
sr_status sr_map_word_times(const sr_normalizer *norm, const sr_utt_words *raw,
                            const char *ref_norm, int64_t **end_ms, size_t *n);

/* Write hyp.trn, ref.trn (normalized text, sclite-ready) and timeline.jsonl (raw text) of the
 * records into dir, atomically. */
sr_status sr_records_write_outputs(const sr_record *r, size_t n, const sr_normalizer *norm,
                                   const char *dir);

#endif /* SR_EVAL_RECORD_H */
