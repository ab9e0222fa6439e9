/*
 * dataset.h — the evaluation harness's inputs and external results:
 *   - datasets (eval/dataset.c): LibriSpeech folders (also the flat `transcripts.txt` variant),
 *     NeMo JSONL manifests, Kaldi data folders (wav.scp + text, optional segments and utt2dur)
 *     and reference-only trn files, as one sorted list of utterances plus the problems found
 *     (missing audio); limit and K/N sharding;
 *   - trn files `text (utt_id)` (eval/timeline_io.c): read and write, for hyp.trn / ref.trn;
 *   - timeline.jsonl (eval/timeline_io.c): one JSON object per line,
 *     {"utt": "ID", "t_ms": 1200, "text": "...", "n_stable": 3}, read per utterance and written;
 *   - word times (eval/wordtimes.c): CTM and MFA TextGrid "words" tiers, by utterance id.
 * See docs/datasets.md for the formats and the rules.
 *
 * Conventions for everything here: functions return sr_status and record a message naming the
 * file and line (or argument) at fault (sr_last_error()); on error the out-pointer is NULL.
 * Every loaded object is owned by the caller and released with its _free function (NULL is a
 * no-op). Reading and writing are reentrant: any number of threads may load files at once, and
 * a loaded object may be read from many threads; only the functions documented as modifying an
 * object (sr_dataset_limit, _shard, _drop_problems, _probe_durations) need exclusive access.
 * Record arrays are sorted by id (strcmp, byte order), so results are deterministic and
 * lookups use binary search.
 */
#ifndef SR_EVAL_DATASET_H
#define SR_EVAL_DATASET_H

#include <stddef.h>

#include "../core/internal.h"

/* ---- datasets ------------------------------------------------------------------------------ */

typedef enum {
    SR_DATA_AUTO = 0,        /* guess from the path (sr_dataset_detect) */
    SR_DATA_LIBRISPEECH = 1, /* folder searched recursively for *.trans.txt / transcripts.txt */
    SR_DATA_MANIFEST = 2,    /* NeMo JSONL manifest */
    SR_DATA_KALDI = 3,       /* Kaldi data folder (or its wav.scp) */
    SR_DATA_TRN = 4          /* sclite trn: references only, no audio */
} sr_data_format;

/* "auto", "librispeech", "manifest" (also "nemo"), "kaldi", "trn" -> format; other names are
 * SR_ERR_ARG listing the known ones. */
sr_status sr_data_format_parse(const char *name, sr_data_format *out);
const char *sr_data_format_name(sr_data_format f); /* "librispeech", ...; "auto" for AUTO */

/* Guess the format of path: a folder holding wav.scp and text is KALDI, another folder
 * LIBRISPEECH; a file named wav.scp or text is KALDI, *.trans.txt or transcripts.txt
 * LIBRISPEECH, *.json / *.jsonl MANIFEST, *.trn TRN; another file is MANIFEST when its first
 * non-blank line starts with '{', TRN when it ends with ')'. Otherwise SR_ERR_FORMAT
 * (SR_ERR_IO when path does not exist). */
sr_status sr_dataset_detect(const char *path, sr_data_format *out);

typedef struct sr_utt {
    char *id;          /* utterance id: non-empty, no white space, no parentheses */
    char *audio;       /* audio path, relative paths resolved against the dataset file's
                          folder; NULL for reference-only sets (trn) */
    char *text;        /* reference as written (trimmed, not normalized); "" when empty */
    double offset_s;   /* start of the utterance in the audio file (manifest offset, Kaldi
                          segments); 0 otherwise */
    double duration_s; /* seconds of audio from offset_s; <= 0 means unknown */
    char *where;       /* "file:line" of the line that defines it, for messages */
    char *problem;     /* NULL, or why it cannot be evaluated, naming the file and line
                          ("x.trans.txt:3: utterance A: audio file not found: dir/A.flac") */
} sr_utt;

typedef struct sr_dataset {
    sr_data_format format; /* the format actually read (never AUTO) */
    char *path;            /* as given to sr_dataset_load */
    sr_utt *utts;          /* [n], sorted by id, ids unique */
    size_t n;
    size_t n_problems;     /* utterances whose problem is set */
} sr_dataset;

/* Load a dataset. Audio files are checked for existence only (sr_dataset_probe_durations reads
 * their headers): a missing one sets that utterance's problem and counts in n_problems, it is
 * never silently dropped (sr_dataset_drop_problems does that on request). Errors: malformed
 * lines (file:line), duplicate ids (both lines), piped Kaldi commands (line), no transcripts
 * found. *out owned by the caller (sr_dataset_free). Thread-safe. */
sr_status sr_dataset_load(const char *path, sr_data_format format, sr_dataset **out);
void sr_dataset_free(sr_dataset *d);

/* The utterance with this id, or NULL. */
const sr_utt *sr_dataset_find(const sr_dataset *d, const char *id);

/* Keep the first n utterances in id order; n = 0 keeps all. Modifies d. */
void sr_dataset_limit(sr_dataset *d, size_t n);

/* Keep every n-th utterance starting at index k (0 <= k < n, 0-based, in id order), so the
 * shards 0/n ... n-1/n partition the set. Bad k/n: SR_ERR_ARG. Modifies d. */
sr_status sr_dataset_shard(sr_dataset *d, size_t k, size_t n);

/* Parse "K/N" (decimal, 0 <= K < N) as given to --shard; otherwise SR_ERR_ARG naming it. */
sr_status sr_shard_parse(const char *s, size_t *k, size_t *n);

/* Remove the utterances that have a problem; returns how many were removed. Modifies d. */
size_t sr_dataset_drop_problems(sr_dataset *d);

/* Fill unknown durations (<= 0) from the audio files' headers (libsndfile): frames / rate minus
 * offset_s. An unreadable or too short file sets the utterance's problem instead. Returns
 * SR_OK unless memory runs out. Modifies d. */
sr_status sr_dataset_probe_durations(sr_dataset *d);

/* Sum of the known durations in seconds (unknown ones count 0). */
double sr_dataset_total_duration(const sr_dataset *d);

/* ---- trn files (eval/timeline_io.c) -------------------------------------------------------- */

typedef struct sr_text_item {
    char *id;    /* the text inside the final "( )" */
    char *text;  /* the words before it, trimmed */
    char *where; /* "file:line" */
} sr_text_item;

typedef struct sr_texts {
    sr_text_item *items; /* [n], sorted by id, ids unique */
    size_t n;
} sr_texts;

/* Read an sclite trn file: one `text (utt_id)` per line; blank lines skipped; the text may be
 * empty and may itself contain parentheses (only the final group is the id). A line without
 * a final "(id)", an empty id or one with white space, and duplicate ids are SR_ERR_FORMAT
 * naming file:line. Thread-safe. */
sr_status sr_trn_read(const char *path, sr_texts **out);
void sr_texts_free(sr_texts *t);
const sr_text_item *sr_texts_find(const sr_texts *t, const char *id); /* NULL if absent */

/* Append one trn line "text (id)\n". White-space runs in text (newlines, tabs included) become
 * single spaces and the ends are trimmed, so the line always reads back as the same words. An id
 * that is empty or holds white space or parentheses is SR_ERR_ARG naming it. */
sr_status sr_trn_append(sr_strbuf *b, const char *id, const char *text);

/* Write n lines (ids[i], texts[i]) to path atomically (temp file + rename). */
sr_status sr_trn_write(const char *path, const char *const *ids, const char *const *texts,
                       size_t n);

/* ---- timeline.jsonl (eval/timeline_io.c) --------------------------------------------------- */

typedef struct sr_tl_point {
    double t_ms;       /* audio time of the hypothesis in milliseconds (>= 0) */
    char *text;        /* hypothesis text at that time */
    int n_stable;      /* leading words that will not change; -1 when the line has none */
    int is_final;      /* 1 when the line has "final": true */
    double compute_ms; /* "compute_ms" when present (srkit's own timelines), else -1 */
} sr_tl_point;

typedef struct sr_utt_timeline {
    char *id;
    sr_tl_point *points; /* [n] in file order, t_ms non-decreasing */
    size_t n;
    char *where;         /* "file:line" of its first line */
} sr_utt_timeline;

typedef struct sr_timelines {
    sr_utt_timeline *utts; /* [n], sorted by id */
    size_t n;
} sr_timelines;

/* Read timeline.jsonl: one JSON object per line with "utt" (non-empty string), "t_ms" (number
 * >= 0), "text" (string), optional "n_stable" (integer >= 0), "final" (bool), "compute_ms"
 * (number >= 0); other keys are ignored; blank lines skipped. The lines of one utterance must
 * be contiguous and in time order (t_ms never decreasing). Violations, malformed JSON and wrong
 * types are SR_ERR_FORMAT naming file:line (and the field). Thread-safe. */
sr_status sr_timelines_read(const char *path, sr_timelines **out);
void sr_timelines_free(sr_timelines *t);
const sr_utt_timeline *sr_timelines_find(const sr_timelines *t, const char *id);

/* Append one timeline.jsonl line (with "\n"): {"utt": ..., "t_ms": ..., "text": ...} plus
 * "n_stable" when p->n_stable >= 0, "final": true when p->is_final, "compute_ms" when
 * p->compute_ms >= 0. Integral t_ms is written without a fraction. Bad values (empty id,
 * negative or non-finite t_ms) are SR_ERR_ARG. */
sr_status sr_timeline_append(sr_strbuf *b, const char *utt, const sr_tl_point *p);

/* Write every utterance of t to path atomically, one line per point. */
sr_status sr_timelines_write(const char *path, const sr_timelines *t);

/* ---- word times (eval/wordtimes.c) --------------------------------------------------------- */

typedef struct sr_word_time {
    char *word;
    double start_s, end_s; /* seconds from the start of the utterance, start <= end */
} sr_word_time;

typedef struct sr_utt_words {
    char *id;
    sr_word_time *words; /* [n] sorted by start time (stable) */
    size_t n;
    char *where;         /* "file:line" of its first entry (TextGrid: the file) */
} sr_utt_words;

typedef struct sr_alignments {
    sr_utt_words *utts;  /* [n], sorted by id */
    size_t n;
} sr_alignments;

/* Load word times from
 *   - a CTM file (*.ctm, or any file that is not a TextGrid): `utt channel start dur word
 *     [confidence ...]`, ";;" comment lines and blank lines skipped;
 *   - one MFA TextGrid (*.TextGrid, long or short text format): its "words" tier (named
 *     "words" or "<speaker> - words"), utterance id = file name without extension; empty
 *     intervals are silences and are left out;
 *   - a folder: every *.TextGrid below it, recursively.
 * Malformed lines, negative times, intervals ending before they start, a missing or ambiguous
 * words tier, and an utterance defined twice are SR_ERR_FORMAT naming file:line. Thread-safe. */
sr_status sr_alignments_load(const char *path, sr_alignments **out);
void sr_alignments_free(sr_alignments *a);
const sr_utt_words *sr_alignments_find(const sr_alignments *a, const char *id);

/* Look up every utterance of d: per_utt[i] (caller array of d->n) = its word times or NULL;
 * *n_missing = how many are NULL. */
void sr_alignments_for_dataset(const sr_alignments *a, const sr_dataset *d,
                               const sr_utt_words **per_utt, size_t *n_missing);

#endif /* SR_EVAL_DATASET_H */
