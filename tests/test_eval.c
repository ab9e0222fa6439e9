/*
 * test_eval.c — the evaluation engine end to end on the test_linear backend: a sweep writes
 * results.json/report.md/trn/timeline; a killed run resumes to the same result; another config
 * in the same folder is refused; shards merged equal one run; the baseline gate and compare
 * fire; missing audio is counted; word times map onto normalized words; `srkit score` agrees
 * with sclite's numbers on external trn files and scores timelines by hand-worked RWER.
 */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../eval/run.h"
#include "test.h"

#define RATE 16000

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    char *d = NULL;
    size_t n;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    d = calloc(n + 1, 1);
    if (fread(d, 1, n, f) != n) { free(d); d = NULL; }
    fclose(f);
    return d;
}

/* A 6-utterance LibriSpeech-layout set with loud/quiet segments (test_linear emits tokens),
 * a CTM, and the config text for it. Built once. */
static const char *dataset_dir(void)
{
    static char dir[1024];
    if (*dir) return dir;
    snprintf(dir, sizeof dir, "%s/ds", test_tmpdir());
    char p[2048];
    snprintf(p, sizeof p, "%s/7/1", dir);
    char cmd[2100];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", p);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    static const char *texts[6] = {"ONE TWO THREE", "TWENTY FIVE APPLES", "HELLO WORLD", "A B C D",
                                   "MISTER SMITH WENT HOME", "THE END"};
    char trans[2048] = "", ctm[8192] = "";
    for (int u = 0; u < 6; u++) {
        size_t n = RATE * (2 + u % 3) / 2 + 333 * (size_t)u;
        float *x = malloc(n * sizeof *x);
        unsigned s = 17u + (unsigned)u;
        for (size_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            double amp = ((i / (900 + 50 * u)) % 3) == 0 ? 0.01 : 0.4;
            x[i] = (float)(amp * ((s >> 8) / 16777216.0 - 0.5));
        }
        snprintf(p, sizeof p, "%s/7/1/7-1-%04d.wav", dir, u);
        CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(p, x, n, RATE), SR_OK);
        free(x);
        char line[256];
        snprintf(line, sizeof line, "7-1-%04d %s\n", u, texts[u]);
        strcat(trans, line);
        /* CTM: words evenly over the utterance */
        char buf[512];
        snprintf(buf, sizeof buf, "%s", texts[u]);
        int nw = 1;
        for (char *c = buf; *c; c++) nw += *c == ' ';
        double dur = (double)n / RATE, t = 0;
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
            snprintf(line, sizeof line, "7-1-%04d 1 %.4f %.4f %s\n", u, t, dur / nw * 0.8, w);
            strcat(ctm, line);
            t += dur / nw;
        }
    }
    snprintf(p, sizeof p, "%s/7/1/7-1.trans.txt", dir);
    write_text(p, trans);
    snprintf(p, sizeof p, "%s/words.ctm", dir);
    write_text(p, ctm);
    return dir;
}

static sr_config *make_config(const char *out, const char *extra_sweep, int limit)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{\"name\": \"t\", \"model\": {\"path\": \"%s\"}, \"stream\": {\"decoder\": \"sync_greedy\"},"
             " %s \"data\": {\"format\": \"librispeech\", \"path\": \"%s\", \"limit\": %d},"
             " \"alignments\": \"%s/words.ctm\", \"normalizer\": \"basic\", \"output\": \"%s\"}",
             test_fixture("test_linear.h5"), extra_sweep ? extra_sweep : "", dataset_dir(), limit, dataset_dir(), out);
    sr_config *c = NULL;
    sr_status st = sr_config_parse(json, "test-config", &c);
    if (st) printf("\n      config: %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    return c;
}

static cJSON *load_results(const char *dir)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/results.json", dir);
    cJSON *j = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_results_load(p, &j), SR_OK);
    return j;
}

static double agg(const cJSON *res, int run, const char *k)
{
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "runs"), run), "aggregate");
    const cJSON *v = cJSON_GetObjectItem(a, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int notices;
static void count_notices(const sr_eval_progress *p, void *u)
{
    (void)u;
    if (p->notice) notices++;
}

static sr_status run_cfg(sr_config *c, int restart, size_t k, size_t n, sr_eval_outcome *o)
{
    sr_eval_options opt = {.restart = restart, .shard_k = k, .shard_n = n, .git_rev = "test",
                           .progress = count_notices};
    return sr_eval_run(c, &opt, o);
}

/* --parallel N: the same records, files and scores as a sequential run (timings aside), also
 * when it resumes a cut-off log. */
static void test_parallel(void)
{
    char seq[1024], par[1024], p[2048];
    snprintf(seq, sizeof seq, "%s/seq", test_tmpdir());
    snprintf(par, sizeof par, "%s/par", test_tmpdir());
    sr_config *cs = make_config(seq, NULL, 0), *cp = make_config(par, NULL, 0);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(cs, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    for (int pass = 0; pass < 2; pass++) {
        sr_eval_options opt = {.parallel = 3, .git_rev = "test", .progress = count_notices};
        if (pass == 1) { /* cut the log after two records and resume in parallel */
            snprintf(p, sizeof p, "%s/utts.jsonl", par);
            char *log = slurp(p);
            CU_ASSERT_PTR_NOT_NULL_FATAL(log);
            char *cut = log;
            for (int i = 0; i < 2; i++) cut = strchr(cut, '\n') + 1;
            FILE *f = fopen(p, "w");
            fwrite(log, 1, (size_t)(cut - log), f);
            fclose(f);
            free(log);
        }
        CU_ASSERT_EQUAL_FATAL(sr_eval_run(cp, &opt, &o), SR_OK);
        sr_eval_outcome_clear(&o);
        const char *files[] = {"hyp.trn", "ref.trn"};
        for (int k = 0; k < 2; k++) {
            char a[2048], b[2048];
            snprintf(a, sizeof a, "%s/%s", seq, files[k]);
            snprintf(b, sizeof b, "%s/%s", par, files[k]);
            char *ha = slurp(a), *hb = slurp(b);
            CU_ASSERT(ha && hb && !strcmp(ha, hb));
            free(ha);
            free(hb);
        }
        cJSON *ra = load_results(seq), *rb = load_results(par);
        const char *keys[] = {"wer", "cer", "rwer", "arwer", "rwer_stable", "n_utts"};
        for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(agg(ra, 0, keys[i]), agg(rb, 0, keys[i]), 1e-12);
        const cJSON *run_b = cJSON_GetArrayItem(cJSON_GetObjectItem(rb, "runs"), 0);
        CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(run_b, "parallel")), 3);
        /* streams sized for the longest utterance (2.10 s): ceil + 1 s, as the config sets none */
        for (int k = 0; k < 2; k++) {
            const cJSON *run = cJSON_GetArrayItem(cJSON_GetObjectItem(k ? rb : ra, "runs"), 0);
            CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(run, "stream"),
                                                                     "max_seconds_used")), 4);
            /* the config's final_steps recorded (0: final updates whole) */
            const cJSON *fs = cJSON_GetObjectItem(cJSON_GetObjectItem(run, "stream"), "final_steps");
            CU_ASSERT(cJSON_IsNumber(fs) && cJSON_GetNumberValue(fs) == 0);
        }
        cJSON_Delete(ra);
        cJSON_Delete(rb);
        /* every record equal but for compute times and memory */
        sr_record *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0, dx = 0, dy = 0;
        snprintf(p, sizeof p, "%s/utts.jsonl", seq);
        CU_ASSERT_EQUAL_FATAL(sr_records_read(p, &x, &nx, &dx), SR_OK);
        snprintf(p, sizeof p, "%s/utts.jsonl", par);
        CU_ASSERT_EQUAL_FATAL(sr_records_read(p, &y, &ny, &dy), SR_OK);
        CU_ASSERT_EQUAL(nx, ny);
        CU_ASSERT(nx >= 4);
        for (size_t i = 0; i < nx && i < ny; i++) {
            CU_ASSERT_STRING_EQUAL(x[i].id, y[i].id);
            CU_ASSERT_STRING_EQUAL(x[i].hyp, y[i].hyp);
            CU_ASSERT_DOUBLE_EQUAL(x[i].audio_ms, y[i].audio_ms, 0);
            CU_ASSERT_EQUAL_FATAL(x[i].n_points, y[i].n_points);
            for (size_t k = 0; k < x[i].n_points; k++) {
                CU_ASSERT_DOUBLE_EQUAL(x[i].points[k].t_ms, y[i].points[k].t_ms, 0);
                CU_ASSERT_STRING_EQUAL(x[i].points[k].text, y[i].points[k].text);
                CU_ASSERT_EQUAL(x[i].points[k].n_stable, y[i].points[k].n_stable);
                CU_ASSERT_EQUAL(x[i].points[k].is_final, y[i].points[k].is_final);
            }
        }
        sr_records_free(x, nx);
        sr_records_free(y, ny);
    }
    sr_config_free(cs);
    sr_config_free(cp);
}

/* report.md: an offline run has no chunk size ("–"), whatever chunk_ms the config carries. */
static void test_report_offline(void)
{
    char outd[1024], json[4096], p[2048];
    snprintf(outd, sizeof outd, "%s/offline", test_tmpdir());
    snprintf(json, sizeof json,
             "{\"name\": \"o\", \"model\": {\"path\": \"%s\"}, \"stream\": {\"strategy\": \"offline\","
             " \"chunk_ms\": 300}, \"data\": {\"path\": \"%s\", \"limit\": 1}, \"normalizer\": \"basic\","
             " \"output\": \"%s\"}", test_fixture("whisper/rand.h5"), dataset_dir(), outd);
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(json, "offline", &c), SR_OK);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(c, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    snprintf(p, sizeof p, "%s/report.md", outd);
    char *rep = slurp(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "| o | offline | – |"));
    free(rep);
    sr_config_free(c);
}

static void test_sweep_outputs(void)
{
    char out[1024];
    snprintf(out, sizeof out, "%s/sweep", test_tmpdir());
    sr_config *c = make_config(out, "\"sweep\": {\"stream.record_timeline\": [true, false]},", 0);
    sr_eval_outcome o;
    sr_status st = run_cfg(c, 0, 0, 0, &o);
    if (st) printf("\n      %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    CU_ASSERT_EQUAL(o.n_runs, 2);
    cJSON *r = load_results(out);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(r, "runs")), 2);
    CU_ASSERT_EQUAL(agg(r, 0, "n_utts"), 6);
    CU_ASSERT_EQUAL(agg(r, 0, "n_ref_words"), 3 + 3 + 2 + 4 + 4 + 2);
    CU_ASSERT(isfinite(agg(r, 0, "wer")) && isfinite(agg(r, 0, "arwer")) && isfinite(agg(r, 0, "rwer")));
    /* the final hypothesis does not depend on record_timeline: same WER */
    CU_ASSERT_DOUBLE_EQUAL(agg(r, 0, "wer"), agg(r, 1, "wer"), 1e-12);
    CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(r, "machine"));
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(r, "git_revision")), "test");
    /* each run's stream settings are recorded, the cache element type included */
    cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "runs"), 0);
    cJSON *stream0 = cJSON_GetObjectItem(run0, "stream");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(stream0, "cache_dtype")), "f32");
    char p[2048];
    snprintf(p, sizeof p, "%s/report.md", out);
    char *rep = slurp(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "t[stream.record_timeline=true]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "t[stream.record_timeline=false]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "| first hyp mean ms |")); /* the statistic is named */
    free(rep);
    const char *files[] = {"hyp.trn", "ref.trn", "timeline.jsonl", "utts.jsonl"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/stream.record_timeline-true/%s", out, files[i]);
        struct stat sb;
        CU_ASSERT_EQUAL(stat(p, &sb), 0);
    }
    /* the trn files are sclite input: re-scoring them gives the run's WER */
    sr_texts *h = NULL;
    snprintf(p, sizeof p, "%s/stream.record_timeline-true/hyp.trn", out);
    CU_ASSERT_EQUAL(sr_trn_read(p, &h), SR_OK);
    CU_ASSERT_EQUAL(h ? h->n : 0, 6);
    sr_texts_free(h);
    cJSON_Delete(r);
    sr_eval_outcome_clear(&o);
    sr_config_free(c);
}

/* Kill simulation: keep 2 records and half of the third, resume, compare with a full run. */
static void test_resume(void)
{
    char full[1024], part[1024], p[2048];
    snprintf(full, sizeof full, "%s/full", test_tmpdir());
    snprintf(part, sizeof part, "%s/part", test_tmpdir());
    sr_config *cf = make_config(full, NULL, 0), *cp = make_config(part, NULL, 0);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(cf, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    CU_ASSERT_EQUAL_FATAL(run_cfg(cp, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    snprintf(p, sizeof p, "%s/utts.jsonl", part);
    char *log = slurp(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    char *cut = log;
    for (int i = 0; i < 2; i++) cut = strchr(cut, '\n') + 1;
    size_t keep = (size_t)(cut - log) + (strchr(cut, '\n') - cut) / 2; /* half of the third line */
    FILE *f = fopen(p, "w");
    fwrite(log, 1, keep, f);
    fclose(f);
    free(log);
    notices = 0;
    CU_ASSERT_EQUAL_FATAL(run_cfg(cp, 0, 0, 0, &o), SR_OK);
    CU_ASSERT(notices >= 1); /* "resuming: 2 utterance(s) already done (one cut-off record redone)" */
    sr_eval_outcome_clear(&o);
    char a[2048], b[2048];
    snprintf(a, sizeof a, "%s/hyp.trn", full);
    snprintf(b, sizeof b, "%s/hyp.trn", part);
    char *ha = slurp(a), *hb = slurp(b);
    CU_ASSERT(ha && hb && !strcmp(ha, hb));
    free(ha);
    free(hb);
    cJSON *ra = load_results(full), *rb = load_results(part);
    const char *keys[] = {"wer", "cer", "rwer", "arwer", "rwer_stable", "n_utts"};
    for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(agg(ra, 0, keys[i]), agg(rb, 0, keys[i]), 1e-12);
    cJSON_Delete(ra);
    cJSON_Delete(rb);
    /* the resumed log now has exactly 6 complete records */
    sr_record *rec = NULL;
    size_t n = 0, dropped = 0;
    CU_ASSERT_EQUAL(sr_records_read(p, &rec, &n, &dropped), SR_OK);
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT_EQUAL(dropped, 0);
    sr_records_free(rec, n);
    /* another config into the same folder is refused, --restart accepts it */
    sr_config *other = make_config(part, NULL, 3);
    char json[4096];
    snprintf(json, sizeof json, "{\"name\": \"t\", \"model\": {\"path\": \"%s\"}, \"stream\": {\"beam\": 1, \"decoder\": \"sync_greedy\", \"stability_n\": 5},"
             " \"data\": {\"path\": \"%s\"}, \"output\": \"%s\"}", test_fixture("test_linear.h5"), dataset_dir(), part);
    sr_config *diff = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(json, "diff", &diff), SR_OK);
    TEST_ASSERT_ERR(run_cfg(diff, 0, 0, 0, &o), SR_ERR_ARG, "--restart");
    CU_ASSERT_EQUAL(run_cfg(diff, 1, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    /* the cache element type is part of a run's identity too */
    snprintf(json, sizeof json, "{\"name\": \"t\", \"model\": {\"path\": \"%s\"}, \"stream\": {\"beam\": 1, \"decoder\": \"sync_greedy\", \"stability_n\": 5, \"cache_dtype\": \"f16\"},"
             " \"data\": {\"path\": \"%s\"}, \"output\": \"%s\"}", test_fixture("test_linear.h5"), dataset_dir(), part);
    sr_config *f16 = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(json, "f16", &f16), SR_OK);
    TEST_ASSERT_ERR(run_cfg(f16, 0, 0, 0, &o), SR_ERR_ARG, "different run config");
    sr_config_free(f16);
    sr_config_free(diff);
    sr_config_free(other);
    sr_config_free(cf);
    sr_config_free(cp);
}

/* Another model file at the same path (a re-merged fine-tune, a new conversion) is another run:
 * its recorded digest is part of the run's identity, so the old records are refused, not
 * resumed as if they were this file's. */
static void test_resume_model_changed(void)
{
    char dir[1024], model[1024], json[4096];
    snprintf(dir, sizeof dir, "%s/modelchange", test_tmpdir());
    snprintf(model, sizeof model, "%s/model.h5", test_tmpdir());
    size_t n = 0;
    char *bytes = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(test_fixture("test_linear.h5"), &bytes, &n), SR_OK);
    CU_ASSERT_FATAL(n > 512 && !memcmp(bytes, "srkit-digest 1\n", 15));
    FILE *f = fopen(model, "wb");
    CU_ASSERT_FATAL(f && fwrite(bytes, 1, n, f) == n);
    fclose(f);
    snprintf(json, sizeof json, "{\"name\": \"t\", \"model\": {\"path\": \"%s\"}, \"stream\": {\"decoder\": "
             "\"sync_greedy\"}, \"data\": {\"path\": \"%s\", \"limit\": 2}, \"output\": \"%s\"}",
             model, dataset_dir(), dir);
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(json, "model-change", &c), SR_OK);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(c, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    /* the same file again: resumed */
    notices = 0;
    CU_ASSERT_EQUAL(run_cfg(c, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    CU_ASSERT(notices >= 1);
    /* a file whose header records another digest (one hex digit changed: still a valid header) */
    char *d = strstr(bytes, "\ndigest ");
    CU_ASSERT_FATAL(d && d < bytes + 512);
    d[8] = d[8] == '0' ? '1' : '0';
    f = fopen(model, "wb");
    CU_ASSERT_FATAL(f && fwrite(bytes, 1, n, f) == n);
    fclose(f);
    TEST_ASSERT_ERR(run_cfg(c, 0, 0, 0, &o), SR_ERR_ARG, "different run config");
    free(bytes);
    sr_config_free(c);
}

static void test_shard_merge(void)
{
    char single[1024], sh[1024], merged[1024];
    snprintf(single, sizeof single, "%s/single", test_tmpdir());
    snprintf(sh, sizeof sh, "%s/sharded", test_tmpdir());
    snprintf(merged, sizeof merged, "%s/merged", test_tmpdir());
    const char *sweep = "\"sweep\": {\"stream.record_timeline\": [true, false]},";
    sr_config *c1 = make_config(single, sweep, 0), *c2 = make_config(sh, sweep, 0);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(c1, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    for (size_t k = 0; k < 3; k++) {
        CU_ASSERT_EQUAL_FATAL(run_cfg(c2, 0, k, 3, &o), SR_OK);
        sr_eval_outcome_clear(&o);
    }
    char d0[1100], d1[1100], d2[1100];
    snprintf(d0, sizeof d0, "%s/shards/0-of-3", sh);
    snprintf(d1, sizeof d1, "%s/shards/1-of-3", sh);
    snprintf(d2, sizeof d2, "%s/shards/2-of-3", sh);
    cJSON *s0 = load_results(d0);
    CU_ASSERT_EQUAL(agg(s0, 0, "n_utts"), 2);
    cJSON_Delete(s0);
    const char *dirs[3] = {d0, d1, d2};
    sr_status st = sr_eval_merge(dirs, 3, merged, "test");
    if (st) printf("\n      %s\n", sr_last_error());
    CU_ASSERT_EQUAL_FATAL(st, SR_OK);
    cJSON *ra = load_results(single), *rb = load_results(merged);
    const char *keys[] = {"wer", "cer", "rwer", "rwer_stable", "arwer", "arwer_stable", "n_utts", "n_ref_words", "sub", "del", "ins"};
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 11; i++) {
            double x = agg(ra, run, keys[i]), y = agg(rb, run, keys[i]);
            CU_ASSERT(x == y || (isnan(x) && isnan(y)));
        }
    cJSON_Delete(ra);
    cJSON_Delete(rb);
    char a[2048], b[2048];
    snprintf(a, sizeof a, "%s/stream.record_timeline-false/hyp.trn", single);
    snprintf(b, sizeof b, "%s/stream.record_timeline-false/hyp.trn", merged);
    char *ha = slurp(a), *hb = slurp(b);
    CU_ASSERT(ha && hb && !strcmp(ha, hb));
    free(ha);
    free(hb);
    /* a shard given twice duplicates its utterances */
    const char *twice[2] = {d0, d0};
    char m2[1100];
    snprintf(m2, sizeof m2, "%s/merged-twice", test_tmpdir());
    TEST_ASSERT_ERR(sr_eval_merge(twice, 2, m2, "test"), SR_ERR_FORMAT, "recorded twice");
    sr_config_free(c1);
    sr_config_free(c2);
}

static void test_baseline_and_compare(void)
{
    char out[1024], p[2048];
    snprintf(out, sizeof out, "%s/base", test_tmpdir());
    sr_config *c = make_config(out, NULL, 0);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(c, 0, 0, 0, &o), SR_OK);
    sr_eval_outcome_clear(&o);
    cJSON *base = load_results(out), *rep = NULL;
    int failed = -1;
    sr_compare_limits lim = {0.2, 1.10};
    CU_ASSERT_EQUAL(sr_compare_results(base, base, &lim, &rep, &failed), SR_OK);
    CU_ASSERT_EQUAL(failed, 0);
    cJSON_Delete(rep);
    /* a worse copy: WER + 1 point breaks the gate; within 2 points it passes */
    cJSON *worse = cJSON_Duplicate(base, 1);
    cJSON *a = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(worse, "runs"), 0), "aggregate");
    double w = cJSON_GetNumberValue(cJSON_GetObjectItem(a, "wer"));
    cJSON_SetNumberValue(cJSON_GetObjectItem(a, "wer"), w + 0.01);
    CU_ASSERT_EQUAL(sr_compare_results(base, worse, &lim, &rep, &failed), SR_OK);
    CU_ASSERT_EQUAL(failed, 1);
    char *rt = cJSON_PrintUnformatted(rep);
    CU_ASSERT_PTR_NOT_NULL(rt && strstr(rt, "WER rose 1.00 points") ? rt : NULL);
    free(rt);
    cJSON_Delete(rep);
    lim.max_wer_increase = 2;
    CU_ASSERT_EQUAL(sr_compare_results(base, worse, &lim, &rep, &failed), SR_OK);
    CU_ASSERT_EQUAL(failed, 0);
    cJSON_Delete(rep);
    /* the config's baseline block applies the same gate at the end of the eval */
    snprintf(p, sizeof p, "%s/worse.json", test_tmpdir());
    char *txt = cJSON_Print(worse);
    write_text(p, txt);
    free(txt);
    char json[8192], out2[1100];
    snprintf(out2, sizeof out2, "%s/gated", test_tmpdir());
    snprintf(json, sizeof json, "{\"name\": \"t\", \"model\": {\"path\": \"%s\"}, \"data\": {\"path\": \"%s\"},"
             " \"normalizer\": \"basic\", \"alignments\": \"%s/words.ctm\", \"output\": \"%s\", \"baseline\": {\"path\": \"%s\", \"max_wer_increase\": 0.2}}",
             test_fixture("test_linear.h5"), dataset_dir(), dataset_dir(), out2, p);
    sr_config *g = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(json, "gated", &g), SR_OK);
    CU_ASSERT_EQUAL(run_cfg(g, 0, 0, 0, &o), SR_OK);
    CU_ASSERT_EQUAL(o.baseline_failed, 0); /* better than the (worse) baseline: passes */
    sr_eval_outcome_clear(&o);
    /* unmatched run names are an error */
    cJSON_SetValuestring(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(worse, "runs"), 0), "name"), "other");
    TEST_ASSERT_ERR(sr_compare_results(base, worse, &lim, &rep, &failed), SR_ERR_ARG, "other");
    cJSON_Delete(worse);
    cJSON_Delete(base);
    sr_config_free(g);
    sr_config_free(c);
}

static void test_missing_audio_counted(void)
{
    char dir[1024], p[2048], out[1024];
    snprintf(dir, sizeof dir, "%s/missing/1/2", test_tmpdir());
    snprintf(p, sizeof p, "mkdir -p %s", dir);
    CU_ASSERT_EQUAL_FATAL(system(p), 0);
    float x[8000] = {0};
    snprintf(p, sizeof p, "%s/1-2-0000.wav", dir);
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(p, x, 8000, RATE), SR_OK);
    snprintf(p, sizeof p, "%s/1-2.trans.txt", dir);
    write_text(p, "1-2-0000 HELLO\n1-2-0001 GONE\n");
    snprintf(out, sizeof out, "%s/missing-out", test_tmpdir());
    char json[4096];
    snprintf(json, sizeof json, "{\"name\": \"m\", \"model\": {\"path\": \"%s\"}, \"data\": {\"path\": \"%s/missing\"},"
             " \"normalizer\": \"basic\", \"output\": \"%s\"}", test_fixture("test_linear.h5"), test_tmpdir(), out);
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(json, "m", &c), SR_OK);
    sr_eval_outcome o;
    CU_ASSERT_EQUAL_FATAL(run_cfg(c, 0, 0, 0, &o), SR_OK);
    CU_ASSERT_EQUAL(o.n_failed_utts, 1);
    sr_eval_outcome_clear(&o);
    cJSON *r = load_results(out);
    CU_ASSERT_EQUAL(agg(r, 0, "n_failed"), 1);
    CU_ASSERT_EQUAL(agg(r, 0, "n_utts"), 1);
    char *t = cJSON_PrintUnformatted(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "1-2-0001.flac")); /* the error names the file looked for */
    free(t);
    cJSON_Delete(r);
    sr_config_free(c);
}

static void test_word_time_mapping(void)
{
    sr_normalizer *n = NULL;
    char mp[2048];
    if (sr_normalizer_default_map_path(mp, sizeof mp) || !test_shared("") ) { /* map path only */ }
    sr_status st = sr_normalizer_create("whisper_en", NULL, &n);
    if (st) { TEST_SKIP("whisper_en spelling map not installed (make setup)"); return; }
    sr_word_time w[6] = {{"I", 0.0, 0.2}, {"HAVE", 0.3, 0.5}, {"TWENTY", 0.6, 0.9}, {"FIVE", 1.0, 1.3},
                         {"APPLES", 1.4, 1.8}, {"MISTER", 2.0, 2.4}};
    sr_utt_words uw = {"u", w, 6, "test"};
    char *ref = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalize(n, "I have twenty five apples mister", &ref), SR_OK);
    int64_t *ends = NULL;
    size_t k = 0;
    CU_ASSERT_EQUAL_FATAL(sr_map_word_times(n, &uw, ref, &ends, &k), SR_OK);
    /* "i have 25 apples mister": 25 ends with FIVE */
    CU_ASSERT_EQUAL_FATAL(k, 5);
    const int64_t want[5] = {200, 500, 1300, 1800, 2400};
    for (size_t i = 0; i < 5; i++) CU_ASSERT_EQUAL(ends[i], want[i]);
    free(ends);
    TEST_ASSERT_ERR(sr_map_word_times(n, &uw, "something else", &ends, &k), SR_ERR_ARG, "do not spell");
    free(ref);
    sr_normalizer_free(n);
}

static int run_cli(const char *args, char *out, size_t cap)
{
    const char *bin = getenv("SRKIT_BIN") ? getenv("SRKIT_BIN") : "build/srkit";
    return test_run(out, cap, "%s %s", bin, args);
}

/* srkit score on files from outside srkit: sclite's corpus numbers for the sclite fixture. */
static void test_score_external(void)
{
    static char out[1 << 16];
    char a[4096];
    snprintf(a, sizeof a, "score --ref %s --hyp %s --normalizer none --json", test_fixture("sclite/ref.trn"),
             test_fixture("sclite/hyp.trn"));
    CU_ASSERT_EQUAL_FATAL(run_cli(a, out, sizeof out), 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    /* sclite 2.10 on these files: C66 S24 D34 I34 (tests/fixtures/sclite/expected.txt) */
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "cor")), 66);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "sub")), 24);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "del")), 34);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "ins")), 34);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "n_ref_words")), 124);
    CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "wer")), 92.0 / 124, 1e-12);
    CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "arwer")));
    CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(j, "rwer"));
    /* what a trn cannot tell is unknown (null), not 0 */
    const char *unknown[] = {"audio_s", "compute_s", "rtf", "rtfx"};
    for (int i = 0; i < 4; i++) CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, unknown[i])));
    const char *memk[] = {"weight_bytes", "stream_bytes", "peak_rss_bytes", "gpu_peak_bytes",
                          "gpu_weight_bytes", "gpu_pool_bytes", "gpu_scratch_bytes"};
    for (int i = 0; i < 7; i++)
        CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "memory"), memk[i])));
    cJSON_Delete(j);
    /* a timeline: RWER worked by hand. ref "a b c d"; entries "a" (0 err / 1), "a x" (1 / 2),
     * "a b c d" (0 / 4): RWER = 1 / 7; n_stable 0,1,4 -> committed: "" (0/0), "a" (0/1), all */
    char ref[1100], tl[1100], ctm[1100];
    snprintf(ref, sizeof ref, "%s/r.trn", test_tmpdir());
    snprintf(tl, sizeof tl, "%s/t.jsonl", test_tmpdir());
    snprintf(ctm, sizeof ctm, "%s/t.ctm", test_tmpdir());
    write_text(ref, "a b c d (u1)\n");
    write_text(tl, "{\"utt\": \"u1\", \"t_ms\": 500, \"text\": \"a\", \"n_stable\": 0}\n"
                   "{\"utt\": \"u1\", \"t_ms\": 1000, \"text\": \"a x\", \"n_stable\": 1}\n"
                   "{\"utt\": \"u1\", \"t_ms\": 2000, \"text\": \"a b c d\", \"n_stable\": 4}\n");
    /* word ends 400, 900, 1500, 1900 ms: ARWER prefixes 1, 2, 4 words:
     * "a"|"a" 0/1, "a x"|"a b" 1/2, "a b c d"|all 0/4 -> 1/7 */
    write_text(ctm, "u1 1 0.1 0.3 a\nu1 1 0.5 0.4 b\nu1 1 1.0 0.5 c\nu1 1 1.6 0.3 d\n");
    snprintf(a, sizeof a, "score --ref %s --timeline %s --alignments %s --normalizer none --json", ref, tl, ctm);
    CU_ASSERT_EQUAL_FATAL(run_cli(a, out, sizeof out), 0);
    j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "rwer")), 1.0 / 7, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "arwer")), 1.0 / 7, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "wer")), 0, 1e-12);
    cJSON_Delete(j);
    /* mismatched ids are listed */
    char hyp[1100];
    snprintf(hyp, sizeof hyp, "%s/h.trn", test_tmpdir());
    write_text(hyp, "a b (u2)\n");
    snprintf(a, sizeof a, "score --ref %s --hyp %s", ref, hyp);
    CU_ASSERT_EQUAL(run_cli(a, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "u1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "u2"));
    /* compare exit codes */
    CU_ASSERT_EQUAL(run_cli("compare /nonexistent/a.json /nonexistent/b.json", out, sizeof out), 2);
}

static void test_records_bad_input(void)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/bad-utts.jsonl", test_tmpdir());
    write_text(p, "{\"id\": \"a\", \"ref\": \"x\", \"hyp\": \"x\", \"audio_ms\": 1, \"points\": []}\n"
                  "not json\n"
                  "{\"id\": \"b\", \"ref\": \"x\", \"hyp\": \"x\", \"audio_ms\": 1, \"points\": []}\n");
    sr_record *r = NULL;
    size_t n = 0, d = 0;
    TEST_ASSERT_ERR(sr_records_read(p, &r, &n, &d), SR_ERR_FORMAT, "bad-utts.jsonl:2");
    write_text(p, "{\"id\": \"a\", \"ref\": \"x\", \"audio_ms\": 1}\n{\"id\": \"b\"}\n");
    TEST_ASSERT_ERR(sr_records_read(p, &r, &n, &d), SR_ERR_FORMAT, "bad-utts.jsonl:1");
}

/* A record's memory figures survive utts.jsonl (resume, merge): the device bytes included;
 * the run's aggregate splits them into weights, pools and scratch (sr_memory_gpu_split). */
static void test_record_memory(void)
{
    sr_record r = {.id = "u", .ref = "a", .hyp = "a", .audio_ms = 1000,
                   .mem = {.weight_bytes = 70, .stream_bytes = 10, .peak_rss_bytes = 900,
                           .gpu_peak_bytes = 1200, .gpu_live_bytes = 1000, .gpu_pool_bytes = 300}};
    sr_strbuf b = {0};
    CU_ASSERT_EQUAL_FATAL(sr_record_to_jsonl(&r, &b), SR_OK);
    cJSON *j = cJSON_Parse(b.data);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    sr_record back = {0};
    CU_ASSERT_EQUAL(sr_record_from_json(j, "test", &back), SR_OK);
    CU_ASSERT(memcmp(&back.mem, &r.mem, sizeof r.mem) == 0);
    size_t w = 1, p = 1, sc = 1;
    sr_memory_gpu_split(&back.mem, &w, &p, &sc);
    CU_ASSERT(w == 70 && p == 300 && sc == 630);
    /* on the CPU nothing is on a device: no device weights whatever weight_bytes says */
    sr_memstats cpu = {.weight_bytes = 70};
    sr_memory_gpu_split(&cpu, &w, &p, &sc);
    CU_ASSERT(w == 0 && p == 0 && sc == 0);
    sr_memory_gpu_split(NULL, &w, NULL, &sc);
    CU_ASSERT(w == 0 && sc == 0);
    /* pools and weights above what is held (figures of different moments): no negative scratch */
    sr_memstats odd = {.weight_bytes = 70, .gpu_live_bytes = 100, .gpu_pool_bytes = 300};
    sr_memory_gpu_split(&odd, NULL, NULL, &sc);
    CU_ASSERT_EQUAL(sc, 0);
    sr_record_clear(&back);
    cJSON_Delete(j);
    free(b.data);
}

void test_register_eval_run(void)
{
    TEST_SUITE("eval_run",
               {"sweep writes results, report, trn, timeline", test_sweep_outputs},
               {"a killed run resumes to the same result", test_resume},
               {"another model file at the same path is another run", test_resume_model_changed},
               {"--parallel equals a sequential run (and resumes)", test_parallel},
               {"report.md: offline runs have no chunk size", test_report_offline},
               {"shards merged equal one run", test_shard_merge},
               {"baseline gate and compare", test_baseline_and_compare},
               {"missing audio is counted, named", test_missing_audio_counted},
               {"word times map onto normalized words", test_word_time_mapping},
               {"srkit score on external trn and timeline files", test_score_external},
               {"malformed record logs name the line", test_records_bad_input},
               {"a record's memory figures survive utts.jsonl", test_record_memory});
}
