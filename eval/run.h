/*
 * run.h — the evaluation engine behind `srkit eval`, `srkit merge`, `srkit score` and
 * `srkit compare` (DESIGN §8, issue 3).
 *
 * Output folder of an eval (the config's `output`, or OUT/shards/K-of-N with a shard):
 *   results.json   config echoed, machine, git revision, per run: aggregate + per utterance
 *   report.md      one table row per run of the sweep
 *   <run>/         per run (the folder itself when the config has a single run):
 *                  utts.jsonl (one record per finished utterance: the resume log and the merge
 *                  input), hyp.trn, ref.trn (normalized, sclite-ready), timeline.jsonl, run.json
 * Every file but utts.jsonl is written atomically (temp + rename); utts.jsonl is appended and
 * flushed one line per utterance, so a killed run resumes where it stopped.
 */
#ifndef SR_EVAL_RUN_H
#define SR_EVAL_RUN_H

#include "record.h"

#include <cJSON.h>

/* What the engine reports while it works (the CLI draws the progress bar from it). */
typedef struct sr_eval_progress {
    const char *run_name;
    size_t run_index, n_runs;
    size_t done, total;           /* utterances of this run, resumed ones included */
    double audio_s_done, audio_s_total;
    double wer;                   /* running corpus WER of this run (fraction); NAN before any */
    double elapsed_s;             /* since this run started */
    const char *notice;           /* non-NULL: a one-off message (resumed N, missing audio, ...) */
} sr_eval_progress;

typedef void (*sr_eval_progress_fn)(const sr_eval_progress *p, void *user);

/* The data format of run r: data.format, or when it is "auto" / absent the one sr_dataset_detect
 * sees in data.path (SR_ERR_FORMAT / SR_ERR_IO naming data.path when it cannot tell). */
sr_status sr_run_data_format(const sr_run_config *r, sr_data_format *out);
/* Run r's dataset (format as above, data.limit applied); *out owned by the caller
 * (sr_dataset_free). A load error under an explicit format that the path does not look like
 * says so. */
sr_status sr_run_dataset(const sr_run_config *r, sr_dataset **out);

typedef struct sr_eval_options {
    int restart;                  /* drop completed utterances and start over */
    size_t shard_k, shard_n;      /* shard_n == 0: no sharding */
    int parallel;                 /* > 1: that many utterances at once through one batched engine
                                     (results equal a sequential run's, timings aside) */
    const char *output;           /* NULL: the config's output */
    const char *config_path;      /* echoed into results.json */
    const char *git_rev;          /* echoed into results.json */
    sr_eval_progress_fn progress; /* may be NULL */
    void *user;
} sr_eval_options;

typedef struct sr_eval_outcome {
    char *output_dir;             /* malloc'ed */
    size_t n_runs;
    size_t n_failed_utts;         /* over all runs */
    int baseline_failed;          /* 1: a run broke its baseline's tolerances */
    char *baseline_report;        /* malloc'ed text of the baseline comparison, or NULL */
} sr_eval_outcome;

void sr_eval_outcome_clear(sr_eval_outcome *o);

/* Run every run of cfg, write the outputs and apply the baseline gate. Utterances that cannot
 * be run (missing/unreadable audio, a stream error) are recorded with their error and counted;
 * configuration errors (model, dataset, normalizer, output folder holding another config's
 * results) stop the run with a message naming the culprit. */
sr_status sr_eval_run(const sr_config *cfg, const sr_eval_options *opt, sr_eval_outcome *out);

/* Combine shard output folders (each written by sr_eval_run with a shard) into out_dir: the
 * records of each run are concatenated (duplicate ids are an error), scored again and written
 * as one result, equal to an unsharded run but for timings. All shards must come from the same
 * config. */
sr_status sr_eval_merge(const char *const *dirs, size_t n_dirs, const char *out_dir,
                        const char *git_rev);

/* ---- regression gate (eval/compare.c) --------------------------------------------------------- */

typedef struct sr_compare_limits {
    double max_wer_increase; /* WER percentage points (0.2 = +0.2 %); < 0 = not checked */
    double max_rtf_ratio;    /* new RTF / base RTF (1.10 = 10 % slower); <= 0 = not checked */
} sr_compare_limits;

/* Compare every run of new_results with the run of the same name in base_results (results.json
 * objects). *report is a JSON object {runs: [{name, metrics: {wer: {base, new, delta}, ...},
 * failures: [...]}], failed: bool}; *failed = 1 past a limit. A run of new_results without a
 * match in base_results is an SR_ERR_ARG naming it. */
sr_status sr_compare_results(const cJSON *base_results, const cJSON *new_results,
                             const sr_compare_limits *lim, cJSON **report, int *failed);

/* What c's unset fields become for model m as a stream opens (sr_model_defaults, SR_USE_LIVE),
 * as a JSON object {strategy (null: the backend has none), decoder, chunk_ms, first_chunk_ms
 * (0: the backend's own), basis (only when the file decided)}: results.json's stream.resolved
 * and srkit bench's "resolved". *out is the caller's. */
sr_status sr_defaults_json(const sr_model *m, const sr_stream_config *c, cJSON **out);

/* Read a results.json file (SR_ERR_IO / SR_ERR_FORMAT naming it). */
sr_status sr_results_load(const char *path, cJSON **out);

#endif /* SR_EVAL_RUN_H */
