/*
 * run.c — `srkit eval` and `srkit merge`: expand the config's runs, stream every utterance
 * through the model (whole utterance fed at once: the engine still cuts it into the model's
 * chunks and times each one), append one record per utterance to the run's utts.jsonl, then
 * score the records and write results.json, report.md, hyp/ref.trn and timeline.jsonl.
 * A re-run of the same config skips the utterances already in utts.jsonl (resume); a different
 * config (or another model file at the same path: its recorded digest is part of the run's
 * identity) in the same folder is refused rather than mixed.
 */
#define _DEFAULT_SOURCE /* gethostname, sysconf(_SC_NPROCESSORS_ONLN) */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "textio.h"
#include "../core/weights.h"

void sr_eval_outcome_clear(sr_eval_outcome *o)
{
    if (!o) return;
    free(o->output_dir);
    free(o->baseline_report);
    memset(o, 0, sizeof *o);
}

/* ---- small helpers ---------------------------------------------------------------------------- */

static sr_status mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) return sr_error(SR_ERR_ARG, "%s: path too long", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return sr_error(SR_ERR_IO, "%s: cannot create folder: %s", buf, strerror(errno));
        buf[i] = c;
    }
    if (!sr_path_is_dir(path)) return sr_error(SR_ERR_IO, "%s: not a folder", path);
    return SR_OK;
}

/* A folder name for a sweep point: letters, digits, '.', '-', '_' kept, the rest '_'. */
static char *run_dirname(const sr_run_config *r, size_t i)
{
    const char *p = r->sweep_point && *r->sweep_point ? r->sweep_point : NULL;
    char buf[256];
    if (!p) snprintf(buf, sizeof buf, "run%03zu", i);
    else {
        size_t k = 0;
        for (; *p && k + 1 < sizeof buf; p++) {
            char c = *p;
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '-' || c == '_';
            buf[k++] = c == '=' ? '-' : c == ',' ? '+' : ok ? c : '_';
        }
        buf[k] = '\0';
    }
    return sr_strdup(buf);
}

static double now_s(void) { return (double)sr_now_ns() * 1e-9; }

static cJSON *machine_json(void)
{
    cJSON *m = cJSON_CreateObject();
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(m, "hostname", host);
    char cpu[256] = "unknown", line[1024];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) snprintf(cpu, sizeof cpu, "%s", sr_trim(c + 1));
            break;
        }
    if (f) fclose(f);
    cJSON_AddStringToObject(m, "cpu_model", cpu);
    cJSON_AddNumberToObject(m, "n_cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
    return m;
}

static void utc_now(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static sr_status write_json_file(const char *dir, const char *name, const cJSON *j)
{
    char *txt = sr_json_print(j, 1);
    char *p = sr_path_join(dir, name);
    sr_status st = (!txt || !p) ? sr_error(SR_ERR_NOMEM, "out of memory writing %s", name) : SR_OK;
    if (!st) {
        size_t n = strlen(txt);
        txt[n] = '\0';
        sr_strbuf b = {0};
        if (!(st = sr_strbuf_append(&b, txt, n)) && !(st = sr_strbuf_append(&b, "\n", 1)))
            st = sr_write_file_atomic(p, b.data, b.len);
        sr_strbuf_free(&b);
    }
    free(txt);
    free(p);
    return st;
}

sr_status sr_results_load(const char *path, cJSON **out)
{
    *out = NULL;
    char *txt = NULL;
    sr_status st = sr_read_file(path, &txt, NULL);
    if (st) return st;
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    if (!j || !cJSON_IsObject(j) || !cJSON_IsArray(cJSON_GetObjectItem(j, "runs"))) {
        cJSON_Delete(j);
        return sr_error(SR_ERR_FORMAT, "%s: not an srkit results.json (no \"runs\" array)", path);
    }
    *out = j;
    return SR_OK;
}

/* ---- per-run identity: a resumed run must be the same run --------------------------------------- */

/* The part of a run's config that decides its records (not output or baseline). */
static char *run_identity(const sr_run_config *r, const char *format)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", r->model.path ? r->model.path : "");
    /* the file's recorded digest: another file at the same path (a re-merged fine-tune, a new
     * conversion) is another run, not one to resume (files without a digest: the path alone) */
    char digest[33];
    if (sr_h5_recorded_digest(r->model.path, digest)) cJSON_AddStringToObject(j, "model_digest", digest);
    cJSON_AddStringToObject(j, "device", r->model.device ? r->model.device : "cpu");
    if (r->model.precision && strcmp(r->model.precision, "f32")) /* older runs: no key */
        cJSON_AddStringToObject(j, "precision", r->model.precision);
    cJSON *s = cJSON_AddObjectToObject(j, "stream");
    const sr_stream_config *c = &r->stream;
    cJSON_AddStringToObject(s, "strategy", c->strategy ? c->strategy : "");
    cJSON_AddStringToObject(s, "decoder", c->decoder ? c->decoder : "");
    cJSON_AddNumberToObject(s, "chunk_ms", c->chunk_ms);
    cJSON_AddNumberToObject(s, "first_chunk_ms", c->first_chunk_ms);
    cJSON_AddNumberToObject(s, "stability_n", c->stability_n);
    cJSON_AddNumberToObject(s, "beam", c->beam);
    cJSON_AddNumberToObject(s, "max_symbols", c->max_symbols);
    cJSON_AddNumberToObject(s, "att_left", c->att_context[0]);
    cJSON_AddNumberToObject(s, "att_right", c->att_context[1]);
    cJSON_AddNumberToObject(s, "decoder_kv_cache", c->decoder_kv_cache);
    cJSON_AddNumberToObject(s, "delay_tokens", c->delay_tokens);
    /* only when set, so that runs recorded before the key existed keep their identity */
    if (c->cache_dtype && strcmp(c->cache_dtype, "f32"))
        cJSON_AddStringToObject(s, "cache_dtype", c->cache_dtype);
    if (!c->repetition_guard) cJSON_AddBoolToObject(s, "repetition_guard", 0); /* likewise */
    if (c->final_steps) cJSON_AddNumberToObject(s, "final_steps", c->final_steps); /* likewise */
    cJSON_AddStringToObject(j, "data", r->data.path ? r->data.path : "");
    cJSON_AddStringToObject(j, "format", format);
    char *txt = sr_json_print(j, 0);
    cJSON_Delete(j);
    return txt;
}

static cJSON *stream_json(const sr_stream_config *c)
{
    cJSON *s = cJSON_CreateObject();
    if (c->strategy) cJSON_AddStringToObject(s, "strategy", c->strategy);
    else cJSON_AddNullToObject(s, "strategy");
    if (c->decoder) cJSON_AddStringToObject(s, "decoder", c->decoder);
    else cJSON_AddNullToObject(s, "decoder");
    cJSON_AddNumberToObject(s, "chunk_ms", c->chunk_ms);
    cJSON_AddNumberToObject(s, "first_chunk_ms", c->first_chunk_ms);
    cJSON_AddNumberToObject(s, "stability_n", c->stability_n);
    cJSON_AddNumberToObject(s, "beam", c->beam);
    cJSON *a = cJSON_AddArrayToObject(s, "att_context");
    cJSON_AddItemToArray(a, cJSON_CreateNumber(c->att_context[0]));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(c->att_context[1]));
    cJSON_AddBoolToObject(s, "decoder_kv_cache", c->decoder_kv_cache);
    cJSON_AddNumberToObject(s, "delay_tokens", c->delay_tokens);
    cJSON_AddStringToObject(s, "cache_dtype", c->cache_dtype ? c->cache_dtype : "f32");
    cJSON_AddBoolToObject(s, "repetition_guard", c->repetition_guard);
    cJSON_AddNumberToObject(s, "final_steps", c->final_steps);
    return s;
}

sr_status sr_defaults_json(const sr_model *m, const sr_stream_config *c, cJSON **out)
{
    *out = NULL;
    sr_defaults d;
    sr_status st = sr_model_defaults(m, SR_USE_LIVE, c, &d);
    if (st) return st;
    cJSON *o = cJSON_CreateObject();
    if (!o) return sr_error(SR_ERR_NOMEM, "out of memory");
    if (d.strategy) cJSON_AddStringToObject(o, "strategy", d.strategy);
    else cJSON_AddNullToObject(o, "strategy");
    cJSON_AddStringToObject(o, "decoder", d.decoder);
    cJSON_AddNumberToObject(o, "chunk_ms", d.chunk_ms);
    cJSON_AddNumberToObject(o, "first_chunk_ms", d.first_chunk_ms);
    if (d.basis) cJSON_AddStringToObject(o, "basis", d.basis);
    *out = o;
    return SR_OK;
}

/* stream.resolved of a run object, so a config that leaves the strategy to the model still
 * says what ran. */
/* The stream.max_seconds a run's streams get when its config leaves it 0: the longest
 * utterance's duration rounded up, plus 1 s, when every runnable utterance's duration is known
 * (else 0, unbounded). The text is the same; a backend that sizes per-stream caches by it
 * (Voxtral's decoder K/V) holds a fraction of the state it would reserve for any length. */
static int run_max_seconds(const sr_dataset *d)
{
    double longest = 0;
    for (size_t i = 0; i < d->n; i++) {
        const sr_utt *u = &d->utts[i];
        if (u->problem) continue;
        if (!(u->duration_s > 0)) return 0;
        longest = SR_MAX(longest, u->duration_s);
    }
    double s = ceil(longest) + 1;
    return s <= SR_MAX_SECONDS_MAX ? (int)s : 0;
}

static sr_status add_resolved(const sr_model *m, const sr_stream_config *c, cJSON *run_obj)
{
    cJSON *o = NULL;
    sr_status st = sr_defaults_json(m, c, &o);
    if (!st) cJSON_AddItemToObject(cJSON_GetObjectItem(run_obj, "stream"), "resolved", o);
    return st;
}

/* ---- scoring a run's records into its results object ------------------------------------------- */

static int cmp_record(const void *a, const void *b)
{
    return strcmp(((const sr_record *)a)->id, ((const sr_record *)b)->id);
}

/* Score the records of one run, write its trn/timeline files into run_dir and return the run
 * object of results.json. */
static sr_status finish_run(const sr_run_config *r, sr_record *rec, size_t n, const char *run_dir,
                            const char *arch, cJSON **run_obj)
{
    *run_obj = NULL;
    sr_normalizer *norm = NULL;
    sr_alignments *al = NULL;
    sr_corpus *corpus = NULL;
    cJSON *per_utt = NULL, *o = NULL;
    size_t n_failed = 0;
    sr_status st;
    qsort(rec, n, sizeof *rec, cmp_record);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(rec[i].id, rec[i - 1].id))
            return sr_error(SR_ERR_FORMAT, "run %s: utterance %s recorded twice", r->name, rec[i].id);
    if ((st = sr_normalizer_create(r->normalizer, NULL, &norm))) goto out;
    if (r->alignments && (st = sr_alignments_load(r->alignments, &al))) goto out;
    if ((st = sr_corpus_create(&corpus))) goto out;
    sr_score_setup setup = {norm, al};
    if ((st = sr_records_score(rec, n, &setup, corpus, &n_failed, &per_utt))) goto out;
    sr_corpus_metrics cm;
    if ((st = sr_corpus_result(corpus, &cm))) goto out;
    if ((st = sr_records_write_outputs(rec, n, norm, run_dir))) goto out;
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddStringToObject(o, "sweep_point", r->sweep_point ? r->sweep_point : "");
    cJSON_AddStringToObject(o, "output_dir", run_dir);
    cJSON *mo = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(mo, "path", r->model.path);
    cJSON_AddStringToObject(mo, "arch", arch ? arch : "");
    cJSON_AddStringToObject(mo, "device", r->model.device ? r->model.device : "cpu");
    cJSON_AddNumberToObject(mo, "threads", r->model.threads);
    cJSON_AddStringToObject(mo, "precision", r->model.precision ? r->model.precision : "f32");
    cJSON_AddItemToObject(o, "stream", stream_json(&r->stream));
    cJSON *da = cJSON_AddObjectToObject(o, "data");
    cJSON_AddStringToObject(da, "path", r->data.path);
    cJSON_AddStringToObject(da, "format", r->data.format ? r->data.format : "librispeech");
    cJSON_AddNumberToObject(da, "limit", r->data.limit);
    cJSON_AddStringToObject(o, "normalizer", sr_normalizer_name(norm));
    if (r->alignments) cJSON_AddStringToObject(o, "alignments", r->alignments);
    else cJSON_AddNullToObject(o, "alignments");
    cJSON *agg = sr_corpus_to_json(&cm, n_failed);
    if (!agg) { st = sr_error(SR_ERR_NOMEM, "out of memory"); goto out; }
    /* the repetition guard's work: utterances it cut a loop in, and its cuts in all */
    double cut_utts = 0, cuts = 0;
    for (size_t i = 0; i < n; i++) {
        cut_utts += rec[i].repetition_cuts > 0;
        cuts += rec[i].repetition_cuts;
    }
    cJSON_AddNumberToObject(agg, "repetition_guard_utts", cut_utts);
    cJSON_AddNumberToObject(agg, "repetition_cuts", cuts);
    cJSON_AddItemToObject(o, "aggregate", agg);
    cJSON_AddItemToObject(o, "utterances", per_utt);
    per_utt = NULL;
    *run_obj = o;
    o = NULL;
out:
    cJSON_Delete(o);
    cJSON_Delete(per_utt);
    sr_corpus_free(corpus);
    sr_alignments_free(al);
    sr_normalizer_free(norm);
    return st;
}

/* ---- report.md ---------------------------------------------------------------------------------- */

static void fmt_rate(char *buf, size_t cap, const cJSON *agg, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(agg, k);
    if (cJSON_IsNumber(v)) snprintf(buf, cap, "%.2f", v->valuedouble * 100.0);
    else snprintf(buf, cap, "–");
}

static void fmt_num(char *buf, size_t cap, const cJSON *o, const char *k, const char *fmt, double scale)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (cJSON_IsNumber(v)) snprintf(buf, cap, fmt, v->valuedouble * scale);
    else snprintf(buf, cap, "–");
}

static sr_status write_report(const char *dir, const cJSON *results)
{
    sr_strbuf b = {0};
    const cJSON *cfg = cJSON_GetObjectItem(results, "config");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(cfg, "name"));
    sr_status st = sr_strbuf_printf(&b, "# %s\n\nsrkit %s, git %s, %s, %s\n\n", name ? name : "results",
                                    cJSON_GetStringValue(cJSON_GetObjectItem(results, "srkit_version")),
                                    cJSON_GetStringValue(cJSON_GetObjectItem(results, "git_revision")),
                                    cJSON_GetStringValue(cJSON_GetObjectItem(results, "created_utc")),
                                    cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(results, "machine"), "cpu_model")));
    if (!st)
        st = sr_strbuf_printf(&b, "| run | strategy | chunk ms | decoder | utts | WER %% | RWER %% | ARWER %% | "
                                  "chunk p50 ms | chunk p90 ms | first hyp mean ms | RTF | stream bytes |\n"
                                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(results, "runs")) {
        const cJSON *s = cJSON_GetObjectItem(run, "stream"), *agg = cJSON_GetObjectItem(run, "aggregate");
        const cJSON *lat = cJSON_GetObjectItem(agg, "latency");
        char wer[32], rwer[32], arwer[32], p50[32], p90[32], fh[32], rtf[32], mem[32], utts[32];
        fmt_rate(wer, sizeof wer, agg, "wer");
        fmt_rate(rwer, sizeof rwer, agg, "rwer");
        fmt_rate(arwer, sizeof arwer, agg, "arwer");
        fmt_num(p50, sizeof p50, cJSON_GetObjectItem(lat, "chunk_compute_ms"), "p50", "%.2f", 1);
        fmt_num(p90, sizeof p90, cJSON_GetObjectItem(lat, "chunk_compute_ms"), "p90", "%.2f", 1);
        fmt_num(fh, sizeof fh, cJSON_GetObjectItem(lat, "first_hyp_ms"), "mean", "%.0f", 1);
        fmt_num(rtf, sizeof rtf, agg, "rtf", "%.4f", 1);
        fmt_num(mem, sizeof mem, cJSON_GetObjectItem(agg, "memory"), "stream_bytes", "%.0f", 1);
        snprintf(utts, sizeof utts, "%.0f", cJSON_GetNumberValue(cJSON_GetObjectItem(agg, "n_utts")));
        /* an unset strategy / decoder: the model's choice (stream.resolved) */
        const cJSON *res = cJSON_GetObjectItem(s, "resolved");
        const char *strat = cJSON_GetStringValue(cJSON_GetObjectItem(s, "strategy"));
        const char *dec = cJSON_GetStringValue(cJSON_GetObjectItem(s, "decoder"));
        if (!strat) strat = cJSON_GetStringValue(cJSON_GetObjectItem(res, "strategy"));
        if (!dec) dec = cJSON_GetStringValue(cJSON_GetObjectItem(res, "decoder"));
        char chunk[32];
        double cms = cJSON_GetNumberValue(cJSON_GetObjectItem(s, "chunk_ms"));
        if (!(cms > 0) && cJSON_IsNumber(cJSON_GetObjectItem(res, "chunk_ms")))
            cms = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "chunk_ms"));
        /* offline strategies read the whole audio: a chunk size means nothing there */
        if (strat && !strncmp(strat, "offline", 7)) snprintf(chunk, sizeof chunk, "–");
        else if (cms > 0) snprintf(chunk, sizeof chunk, "%.0f", cms);
        else snprintf(chunk, sizeof chunk, "default");
        if (!st)
            st = sr_strbuf_printf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                                  cJSON_GetStringValue(cJSON_GetObjectItem(run, "name")), strat ? strat : "default",
                                  chunk, dec ? dec : "default",
                                  utts, wer, rwer, arwer, p50, p90, fh, rtf, mem);
    }
    if (!st)
        st = sr_strbuf_printf(&b, "\nWER/RWER/ARWER in %% after normalization; ARWER needs word alignments (– "
                                  "without). Chunk latency is the compute time per chunk (p50, p90 over all chunks), first hyp the "
                                  "audio time of the first non-empty hypothesis (mean over utterances); RTF = compute / "
                                  "audio; chunk ms – for offline runs (the whole audio at once).\n");
    /* the repetition guard changed these hypotheses (docs/decoders.md): say where */
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(results, "runs")) {
        const cJSON *agg = cJSON_GetObjectItem(run, "aggregate");
        double u = cJSON_GetNumberValue(cJSON_GetObjectItem(agg, "repetition_guard_utts"));
        if (!st && u > 0)
            st = sr_strbuf_printf(&b, "\n%s: the repetition guard cut loops in %.0f of %.0f utterances "
                                      "(%.0f cuts).\n", cJSON_GetStringValue(cJSON_GetObjectItem(run, "name")),
                                  u, cJSON_GetNumberValue(cJSON_GetObjectItem(agg, "n_utts")),
                                  cJSON_GetNumberValue(cJSON_GetObjectItem(agg, "repetition_cuts")));
    }
    char *p = st ? NULL : sr_path_join(dir, "report.md");
    if (!st && !p) st = sr_error(SR_ERR_NOMEM, "out of memory");
    if (!st) st = sr_write_file_atomic(p, b.data, b.len);
    free(p);
    sr_strbuf_free(&b);
    return st;
}

static cJSON *results_skeleton(const char *config_json, const char *config_path, const char *git_rev)
{
    cJSON *res = cJSON_CreateObject();
    char when[64];
    utc_now(when, sizeof when);
    cJSON_AddStringToObject(res, "srkit_version", SR_VERSION);
    cJSON_AddStringToObject(res, "git_revision", git_rev ? git_rev : "unknown");
    cJSON_AddStringToObject(res, "created_utc", when);
    cJSON_AddItemToObject(res, "machine", machine_json());
    if (config_path) cJSON_AddStringToObject(res, "config_file", config_path);
    cJSON *cfg = cJSON_Parse(config_json);
    cJSON_AddItemToObject(res, "config", cfg ? cfg : cJSON_CreateNull());
    cJSON_AddArrayToObject(res, "runs");
    return res;
}

/* ---- running one config ------------------------------------------------------------------------- */

typedef struct {
    const sr_eval_options *opt;
    sr_eval_progress p;
    double t0;
} progress_ctx;

static void notify(progress_ctx *pc, const char *notice)
{
    if (!pc->opt->progress) return;
    pc->p.notice = notice;
    pc->p.elapsed_s = now_s() - pc->t0;
    pc->opt->progress(&pc->p, pc->opt->user);
    pc->p.notice = NULL;
}

/* The audio of utterance u (its segment) in *a / [*b, *e): 1 when it is there; 0 with r->error
 * set when it cannot be run (missing audio, unreadable file). Memory errors are returned in *st. */
static int utt_audio(const sr_utt *u, sr_record *r, sr_audio *a, size_t *b, size_t *e, sr_status *st)
{
    char msg[1200];
    *st = SR_OK;
    memset(a, 0, sizeof *a);
    if (u->problem) {
        if (!(r->error = sr_strdup(u->problem))) *st = SR_ERR_NOMEM;
        return 0;
    }
    sr_status ls = sr_audio_load(u->audio, 16000, a);
    if (ls) {
        snprintf(msg, sizeof msg, "%s: %s", u->where, sr_last_error());
        if (!(r->error = sr_strdup(msg))) *st = SR_ERR_NOMEM;
        return 0;
    }
    *b = (size_t)llround(u->offset_s * 16000.0);
    *e = a->n;
    if (u->duration_s > 0) *e = SR_MIN(a->n, *b + (size_t)llround(u->duration_s * 16000.0));
    if (*b > a->n) *b = a->n;
    r->audio_ms = (double)(*e - *b) * 1000.0 / 16000.0;
    return 1;
}

/* r from the finished stream s: final text, timeline points with committed word counts, memory.
 * Only memory errors are returned. */
static sr_status utt_result(const sr_model *m, sr_stream *s, sr_record *r)
{
    sr_status st;
    const sr_timeline *tl = sr_stream_timeline(s);
    const sr_hypothesis *h = sr_stream_hypothesis(s);
    if (!(r->hyp = sr_strdup(h->text))) return SR_ERR_NOMEM;
    r->repetition_cuts = h->repetition_cuts;
    if (tl->n && !(r->points = sr_calloc(tl->n, sizeof *r->points, "record points"))) return SR_ERR_NOMEM;
    for (size_t k = 0; k < tl->n; k++) {
        const sr_timeline_entry *te = &tl->entries[k];
        sr_tl_point *p = &r->points[k];
        char *stable = NULL;
        if (!(p->text = sr_strdup(te->text))) return SR_ERR_NOMEM;
        r->n_points++;
        p->t_ms = (double)te->audio_ms;
        p->compute_ms = (double)te->compute_ns / 1e6;
        p->is_final = te->is_final;
        /* committed tokens -> committed words of the entry's text */
        if ((st = sr_model_detokenize(m, te->tokens, te->n_stable, &stable))) return st;
        p->n_stable = (int)sr_words_complete_prefix(te->text, strlen(stable));
        if (te->n_stable == te->n_tokens) { /* all committed: every word counts */
            sr_words w = {0};
            if ((st = sr_words_split(te->text, &w))) { free(stable); return st; }
            p->n_stable = (int)w.n;
            sr_words_free(&w);
        }
        free(stable);
    }
    sr_memory(m, s, &r->mem);
    return SR_OK;
}

/* r->error = "<where>: <msg>" (msg NULL: this thread's last error). Only memory errors return. */
static sr_status stream_error_record(const sr_utt *u, const char *msg, sr_record *r)
{
    char line[1200];
    snprintf(line, sizeof line, "%s: %s", u->where, msg ? msg : sr_last_error());
    return (r->error = sr_strdup(line)) ? SR_OK : SR_ERR_NOMEM;
}

/* A new record for utterance u: its id and reference; audio length unknown until read. */
static sr_status record_start(const sr_utt *u, sr_record *r)
{
    memset(r, 0, sizeof *r);
    r->audio_ms = -1;
    return (r->id = sr_strdup(u->id)) && (r->ref = sr_strdup(u->text)) ? SR_OK : SR_ERR_NOMEM;
}

/* Stream one utterance; fills r (id and ref set by the caller). Audio and stream errors go
 * into r->error; only memory errors are returned. */
static sr_status run_utt(const sr_model *m, sr_stream *s, const sr_utt *u, sr_record *r)
{
    sr_audio a;
    size_t b = 0, e = 0;
    sr_status st;
    if (!utt_audio(u, r, &a, &b, &e, &st)) return st;
    sr_stream_reset(s);
    st = sr_stream_feed(s, a.samples + b, e - b);
    if (!st) st = sr_stream_finish(s);
    sr_audio_free(&a);
    if (st) return stream_error_record(u, NULL, r);
    return utt_result(m, s, r);
}

static sr_status append_record(const char *path, const sr_record *r)
{
    sr_strbuf b = {0};
    sr_status st = sr_record_to_jsonl(r, &b);
    if (st) return st;
    FILE *f = fopen(path, "a");
    if (!f) st = sr_error(SR_ERR_IO, "%s: cannot append: %s", path, strerror(errno));
    else {
        if (fwrite(b.data, 1, b.len, f) != b.len || fflush(f) != 0 || fsync(fileno(f)) != 0)
            st = sr_error(SR_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        if (fclose(f) != 0 && !st) st = sr_error(SR_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    }
    sr_strbuf_free(&b);
    return st;
}

/* Utterance i of d is through: its new record (rec[*n_rec], filled; none when it was resumed,
 * done[i]) goes to utts.jsonl and the running score, and the progress moves past it. */
static sr_status record_done(const sr_dataset *d, size_t i, const uint8_t *done, sr_record *rec,
                             size_t *n_rec, const char *utts_path, const sr_score_setup *setup,
                             sr_corpus *running, progress_ctx *pc)
{
    const sr_utt *u = &d->utts[i];
    if (!done[i]) {
        sr_record *nr = &rec[*n_rec];
        if (!nr->hyp && !(nr->hyp = sr_strdup(""))) return SR_ERR_NOMEM;
        (*n_rec)++;
        sr_status st = append_record(utts_path, nr);
        if (st) return st;
        if (nr->error) notify(pc, nr->error);
        size_t nf;
        if ((st = sr_records_score(nr, 1, setup, running, &nf, NULL))) return st;
    }
    pc->p.done = i + 1;
    pc->p.audio_s_done += u->duration_s > 0 ? u->duration_s : 0;
    sr_corpus_metrics cm;
    if (!sr_corpus_result(running, &cm)) pc->p.wer = cm.wer_rate;
    notify(pc, NULL);
    return SR_OK;
}

/* The utterances of d not in rec[0, *n_rec) (done[i] = 1 for those), P at a time through one
 * engine on m: each is opened on a free slot with all its audio queued, the engine steps them
 * together, and a finished stream's record goes out (utts.jsonl, running score, progress) in
 * dataset order, as soon as it and every utterance before it are complete — the same files a
 * sequential run writes, timings aside. */
static sr_status run_parallel(const sr_model *m, const sr_run_config *r, int P, const sr_dataset *d,
                              const uint8_t *done, sr_record *rec, size_t *n_rec, const char *utts_path,
                              const sr_score_setup *setup, sr_corpus *running, progress_ctx *pc)
{
    sr_engine *e = NULL;
    sr_status st = sr_engine_create(m, &r->stream, P, &e);
    if (st) return st;
    size_t n = d->n;
    sr_record *res = sr_calloc(n ? n : 1, sizeof *res, "parallel records");
    uint8_t *ready = sr_calloc(n ? n : 1, 1, "parallel records");  /* 1: res[i] complete */
    sr_stream **act = sr_calloc((size_t)P, sizeof *act, "parallel streams");
    size_t *act_i = sr_calloc((size_t)P, sizeof *act_i, "parallel streams");
    if (!res || !ready || !act || !act_i) {
        st = SR_ERR_NOMEM;
        goto out;
    }
    size_t next = 0, flushed = 0;
    int n_act = 0;
    while (!st && flushed < n) {
        /* start utterances on free slots */
        while (!st && next < n && n_act < P) {
            size_t i = next++;
            if (done[i]) continue;
            const sr_utt *u = &d->utts[i];
            sr_record *nr = &res[i];
            if ((st = record_start(u, nr))) break;
            sr_audio a;
            size_t b = 0, en = 0;
            if (!utt_audio(u, nr, &a, &b, &en, &st)) {
                ready[i] = 1;
                continue;
            }
            sr_stream *s = NULL;
            if ((st = sr_engine_open(e, &s))) {
                sr_audio_free(&a);
                break;
            }
            sr_status fs = sr_stream_feed(s, a.samples + b, en - b);
            if (!fs) fs = sr_stream_finish(s);
            sr_audio_free(&a);
            if (fs) {
                st = stream_error_record(u, NULL, nr);
                sr_stream_close(s);
                ready[i] = 1;
                continue;
            }
            act[n_act] = s;
            act_i[n_act] = i;
            n_act++;
        }
        if (st) break;
        /* one step of every running utterance (a stream's failure is its record's error) */
        if (n_act) sr_engine_step(e, NULL);
        for (int k = 0; k < n_act && !st;) {
            sr_stream *s = act[k];
            size_t i = act_i[k];
            const char *msg;
            if (sr_stream_failed(s, &msg)) {
                st = stream_error_record(&d->utts[i], msg, &res[i]);
            } else if (sr_stream_done(s)) {
                st = utt_result(m, s, &res[i]);
            } else {
                k++;
                continue;
            }
            sr_stream_close(s);
            ready[i] = 1;
            act[k] = act[n_act - 1];
            act_i[k] = act_i[n_act - 1];
            n_act--;
        }
        /* records out in dataset order */
        while (!st && flushed < n && (done[flushed] || ready[flushed])) {
            size_t i = flushed++;
            if (!done[i]) { /* the record moves into rec */
                rec[*n_rec] = res[i];
                memset(&res[i], 0, sizeof res[i]);
            }
            st = record_done(d, i, done, rec, n_rec, utts_path, setup, running, pc);
        }
    }
out:
    sr_engine_free(e); /* closes the streams still running after an error */
    if (res)
        for (size_t i = 0; i < n; i++) sr_record_clear(&res[i]);
    free(res);
    free(ready);
    free(act);
    free(act_i);
    return st;
}

sr_status sr_run_data_format(const sr_run_config *r, sr_data_format *out)
{
    sr_status st = sr_data_format_parse(r->data.format ? r->data.format : "auto", out);
    if (!st && *out == SR_DATA_AUTO && (st = sr_dataset_detect(r->data.path, out)))
        sr_error_prefix(st, "data.format is auto (not given) and the format of data.path cannot be told");
    return st;
}

sr_status sr_run_dataset(const sr_run_config *r, sr_dataset **out)
{
    *out = NULL;
    sr_data_format fmt;
    sr_status st = sr_run_data_format(r, &fmt);
    if (st) return st;
    if ((st = sr_dataset_load(r->data.path, fmt, out))) {
        /* an explicit format the path does not look like: say so, the reader's own message
         * ("duplicate utterance id") would not */
        sr_data_format seen;
        int explicit_fmt = r->data.format && strcmp(r->data.format, "auto");
        char *msg = sr_strdup(sr_last_error());
        if (explicit_fmt && !sr_dataset_detect(r->data.path, &seen) && seen != fmt)
            st = sr_error(st, "%s (data.format is \"%s\", but %s looks like %s data: is the format right?)",
                          msg ? msg : sr_strerror(st), r->data.format, r->data.path, sr_data_format_name(seen));
        else if (msg)
            sr_error(st, "%s", msg);
        free(msg);
        return st;
    }
    sr_dataset_limit(*out, (size_t)r->data.limit);
    return SR_OK;
}

/* The record set of one run: resumed records plus the ones streamed now. */
static sr_status eval_one(const sr_run_config *r, size_t ri, size_t n_runs, const char *run_dir,
                          sr_model **model, char **model_key, progress_ctx *pc, cJSON **run_obj,
                          size_t *n_failed)
{
    sr_dataset *d = NULL;
    sr_record *rec = NULL;
    size_t n_rec = 0, n_dropped = 0;
    sr_stream *s = NULL;
    uint8_t *done = NULL; /* [d->n] 1 = resumed */
    sr_corpus *running = NULL;
    sr_normalizer *norm = NULL;
    char *utts_path = sr_path_join(run_dir, "utts.jsonl"), *id_path = sr_path_join(run_dir, "run.json");
    sr_data_format fmt;
    char *ident = NULL;
    sr_status st = sr_run_data_format(r, &fmt);
    if (st) goto out;
    ident = run_identity(r, sr_data_format_name(fmt));
    st = (!utts_path || !id_path || !ident) ? sr_error(SR_ERR_NOMEM, "out of memory") : SR_OK;
    if (st) goto out;
    /* identity: refuse to mix another config's records into this folder */
    if (pc->opt->restart) {
        remove(utts_path);
    } else if (sr_path_is_file(id_path)) {
        char *old = NULL;
        if ((st = sr_read_file(id_path, &old, NULL))) goto out;
        int same = !strcmp(sr_trim(old), ident);
        free(old);
        if (!same && sr_path_is_file(utts_path)) {
            st = sr_error(SR_ERR_ARG, "%s holds results of a different run config; use --restart or another output", run_dir);
            goto out;
        }
    }
    if ((st = sr_write_file_atomic(id_path, ident, strlen(ident)))) goto out;
    /* dataset */
    if ((st = sr_run_dataset(r, &d))) goto out;
    if (pc->opt->shard_n && (st = sr_dataset_shard(d, pc->opt->shard_k, pc->opt->shard_n))) goto out;
    if ((st = sr_dataset_probe_durations(d))) goto out;
    /* resume */
    if ((st = sr_records_read(utts_path, &rec, &n_rec, &n_dropped))) goto out;
    if (n_dropped) { /* drop the cut-off last line before appending after it */
        sr_strbuf b = {0};
        for (size_t k = 0; !st && k < n_rec; k++) st = sr_record_to_jsonl(&rec[k], &b);
        if (!st) st = sr_write_file_atomic(utts_path, b.data ? b.data : "", b.len);
        sr_strbuf_free(&b);
        if (st) goto out;
    }
    { /* keep only records of utterances in this (limited, sharded) dataset; room for the rest */
        size_t keep = 0;
        for (size_t k = 0; k < n_rec; k++) {
            if (sr_dataset_find(d, rec[k].id)) rec[keep++] = rec[k];
            else sr_record_clear(&rec[k]);
        }
        n_rec = keep;
        sr_record *grown = realloc(rec, (n_rec + d->n + 1) * sizeof *grown);
        if (!grown) { st = sr_error(SR_ERR_NOMEM, "out of memory"); goto out; }
        rec = grown;
    }
    /* model: reuse across runs of the sweep when path/device/threads agree */
    char key[2048];
    snprintf(key, sizeof key, "%s|%s|%d|%s", r->model.path, r->model.device ? r->model.device : "cpu",
             r->model.threads, r->model.precision ? r->model.precision : "f32");
    if (!*model || !*model_key || strcmp(*model_key, key)) {
        sr_model_free(*model);
        *model = NULL;
        free(*model_key);
        *model_key = NULL;
        sr_options o;
        sr_options_init(&o);
        o.device = r->model.device;
        o.threads = r->model.threads;
        o.precision = r->model.precision;
        if ((st = sr_model_load(r->model.path, &o, model))) goto out;
        if (!(*model_key = sr_strdup(key))) { st = SR_ERR_NOMEM; goto out; }
    }
    int P = pc->opt->parallel > 1 ? pc->opt->parallel : 1;
    sr_run_config rs = *r; /* the run as its streams see it: stream.max_seconds filled in */
    if (!rs.stream.max_seconds) rs.stream.max_seconds = run_max_seconds(d);
    if (P == 1 && (st = sr_stream_open(*model, &rs.stream, &s))) goto out;
    if ((st = sr_normalizer_create(r->normalizer, NULL, &norm)) || (st = sr_corpus_create(&running))) goto out;

    pc->p = (sr_eval_progress){.run_name = r->name, .run_index = ri, .n_runs = n_runs, .total = d->n,
                               .audio_s_total = sr_dataset_total_duration(d), .wer = NAN};
    pc->t0 = now_s();
    char note[512];
    if (n_rec) {
        snprintf(note, sizeof note, "resuming: %zu utterance(s) already done%s", n_rec,
                 n_dropped ? " (one cut-off record redone)" : "");
        notify(pc, note);
    }
    if (d->n_problems) {
        snprintf(note, sizeof note, "%zu utterance(s) cannot be run (missing audio); they are counted as failed", d->n_problems);
        notify(pc, note);
    }
    sr_score_setup setup = {norm, NULL};
    if (!(done = sr_calloc(d->n ? d->n : 1, 1, "done utterances"))) { st = SR_ERR_NOMEM; goto out; }
    for (size_t i = 0; i < d->n; i++)
        for (size_t k = 0; k < n_rec && !done[i]; k++) done[i] = !strcmp(rec[k].id, d->utts[i].id);
    if (P > 1 && (st = run_parallel(*model, &rs, P, d, done, rec, &n_rec, utts_path, &setup, running, pc)))
        goto out;
    for (size_t i = 0; P == 1 && i < d->n; i++) {
        if (!done[i] && ((st = record_start(&d->utts[i], &rec[n_rec])) ||
                         (st = run_utt(*model, s, &d->utts[i], &rec[n_rec]))))
            goto out;
        if ((st = record_done(d, i, done, rec, &n_rec, utts_path, &setup, running, pc))) goto out;
    }
    if ((st = finish_run(r, rec, n_rec, run_dir, sr_model_arch(*model), run_obj))) goto out;
    if ((st = add_resolved(*model, &r->stream, *run_obj))) goto out;
    cJSON_AddNumberToObject(cJSON_GetObjectItem(*run_obj, "stream"), "max_seconds_used", rs.stream.max_seconds);
    cJSON_AddNumberToObject(*run_obj, "parallel", P);
    /* wall time of this invocation's utterances (a resumed run counts only the new ones): with
     * --parallel the per-chunk compute times overlap, so this is the run's real speed */
    cJSON_AddNumberToObject(*run_obj, "wall_s", now_s() - pc->t0);
    cJSON *agg = cJSON_GetObjectItem(*run_obj, "aggregate");
    *n_failed += (size_t)cJSON_GetNumberValue(cJSON_GetObjectItem(agg, "n_failed"));
    cJSON *da = cJSON_GetObjectItem(*run_obj, "data");
    cJSON_AddNumberToObject(da, "n_utts", (double)d->n);
    cJSON_AddNumberToObject(da, "n_problems", (double)d->n_problems);
    cJSON_AddNumberToObject(da, "audio_s", sr_dataset_total_duration(d));
    if (pc->opt->shard_n) {
        char sh[64];
        snprintf(sh, sizeof sh, "%zu/%zu", pc->opt->shard_k, pc->opt->shard_n);
        cJSON_AddStringToObject(da, "shard", sh);
    }
out:
    if (st) sr_error_prefix(st, "run %s", r->name);
    sr_normalizer_free(norm);
    sr_corpus_free(running);
    sr_stream_close(s);
    free(done);
    sr_records_free(rec, n_rec);
    sr_dataset_free(d);
    free(ident);
    free(utts_path);
    free(id_path);
    return st;
}

/* Apply each run's baseline block: compare with the run of the same name in its baseline. */
static sr_status apply_baselines(const sr_config *cfg, const cJSON *results, sr_eval_outcome *out)
{
    sr_strbuf b = {0};
    sr_status st = SR_OK;
    for (size_t i = 0; !st && i < sr_config_n_runs(cfg); i++) {
        const sr_run_config *r = sr_config_run(cfg, i);
        if (!r->baseline.path) continue;
        cJSON *base = NULL, *rep = NULL, *mine = cJSON_CreateObject(), *runs = cJSON_AddArrayToObject(mine, "runs");
        cJSON_AddItemToArray(runs, cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(results, "runs"), (int)i), 1));
        sr_compare_limits lim = {r->baseline.max_wer_increase,
                                 r->baseline.max_rtf_increase > 0 ? 1.0 + r->baseline.max_rtf_increase : 0};
        int failed = 0;
        if (!(st = sr_results_load(r->baseline.path, &base)) &&
            !(st = sr_compare_results(base, mine, &lim, &rep, &failed))) {
            char *txt = sr_json_print(rep, 0);
            st = sr_strbuf_printf(&b, "%s%s", b.len ? "\n" : "", txt ? txt : "");
            free(txt);
            if (failed) out->baseline_failed = 1;
        }
        cJSON_Delete(base);
        cJSON_Delete(rep);
        cJSON_Delete(mine);
    }
    if (!st && b.len) out->baseline_report = b.data;
    else sr_strbuf_free(&b);
    return st;
}

sr_status sr_eval_run(const sr_config *cfg, const sr_eval_options *opt, sr_eval_outcome *out)
{
    memset(out, 0, sizeof *out);
    if (!cfg || !opt) return sr_error(SR_ERR_ARG, "sr_eval_run: NULL argument");
    size_t n_runs = sr_config_n_runs(cfg);
    const char *base = opt->output ? opt->output : sr_config_run(cfg, 0)->output;
    char *dir = NULL;
    if (opt->shard_n) {
        char sub[128];
        snprintf(sub, sizeof sub, "shards/%zu-of-%zu", opt->shard_k, opt->shard_n);
        dir = sr_path_join(base, sub);
    } else {
        dir = sr_strdup(base);
    }
    if (!dir) return sr_error(SR_ERR_NOMEM, "out of memory");
    sr_status st = mkdir_p(dir);
    cJSON *results = st ? NULL : results_skeleton(sr_config_json(cfg), opt->config_path, opt->git_rev);
    if (results && opt->shard_n) {
        char sh[64];
        snprintf(sh, sizeof sh, "%zu/%zu", opt->shard_k, opt->shard_n);
        cJSON_AddStringToObject(results, "shard", sh);
    }
    sr_model *model = NULL;
    char *model_key = NULL;
    progress_ctx pc = {.opt = opt};
    for (size_t i = 0; !st && i < n_runs; i++) {
        const sr_run_config *r = sr_config_run(cfg, i);
        char *sub = n_runs > 1 ? run_dirname(r, i) : sr_strdup(".");
        char *run_dir = sub ? (n_runs > 1 ? sr_path_join(dir, sub) : sr_strdup(dir)) : NULL;
        cJSON *ro = NULL;
        if (!run_dir) st = sr_error(SR_ERR_NOMEM, "out of memory");
        if (!st) st = mkdir_p(run_dir);
        if (!st) st = eval_one(r, i, n_runs, run_dir, &model, &model_key, &pc, &ro, &out->n_failed_utts);
        if (!st) cJSON_AddItemToArray(cJSON_GetObjectItem(results, "runs"), ro);
        free(sub);
        free(run_dir);
    }
    sr_model_free(model);
    free(model_key);
    if (!st) st = write_json_file(dir, "results.json", results);
    if (!st) st = write_report(dir, results);
    if (!st && !opt->shard_n) st = apply_baselines(cfg, results, out);
    cJSON_Delete(results);
    if (st) { free(dir); return st; }
    out->output_dir = dir;
    out->n_runs = n_runs;
    return SR_OK;
}

/* ---- merge -------------------------------------------------------------------------------------- */

sr_status sr_eval_merge(const char *const *dirs, size_t n_dirs, const char *out_dir, const char *git_rev)
{
    if (!n_dirs) return sr_error(SR_ERR_ARG, "merge: no shard folders given");
    cJSON *first = NULL, *results = NULL;
    sr_config *cfg = NULL;
    char *cfg_text = NULL;
    sr_status st;
    char *p = sr_path_join(dirs[0], "results.json");
    st = p ? sr_results_load(p, &first) : sr_error(SR_ERR_NOMEM, "out of memory");
    free(p);
    if (st) return st;
    cfg_text = cJSON_PrintUnformatted(cJSON_GetObjectItem(first, "config"));
    if (!cfg_text || (st = sr_config_parse(cfg_text, dirs[0], &cfg))) goto out;
    for (size_t k = 1; k < n_dirs; k++) { /* every shard must come from the same config */
        cJSON *other = NULL;
        char *q = sr_path_join(dirs[k], "results.json");
        st = q ? sr_results_load(q, &other) : sr_error(SR_ERR_NOMEM, "out of memory");
        free(q);
        if (st) goto out;
        char *t = cJSON_PrintUnformatted(cJSON_GetObjectItem(other, "config"));
        int same = t && !strcmp(t, cfg_text);
        free(t);
        cJSON_Delete(other);
        if (!same) { st = sr_error(SR_ERR_ARG, "merge: %s comes from another config than %s", dirs[k], dirs[0]); goto out; }
    }
    if ((st = mkdir_p(out_dir))) goto out;
    results = results_skeleton(cfg_text, cJSON_GetStringValue(cJSON_GetObjectItem(first, "config_file")), git_rev);
    size_t n_runs = sr_config_n_runs(cfg);
    for (size_t i = 0; !st && i < n_runs; i++) {
        const sr_run_config *r = sr_config_run(cfg, i);
        char *sub = n_runs > 1 ? run_dirname(r, i) : sr_strdup(".");
        char *run_dir = sub ? sr_path_join(out_dir, sub) : NULL;
        sr_record *all = NULL;
        size_t n_all = 0;
        for (size_t k = 0; !st && k < n_dirs; k++) {
            char *sd = sub ? sr_path_join(dirs[k], sub) : NULL, *up = sd ? sr_path_join(sd, "utts.jsonl") : NULL;
            sr_record *rec = NULL;
            size_t n = 0, dropped = 0;
            if (!up) st = sr_error(SR_ERR_NOMEM, "out of memory");
            else if (!sr_path_is_file(up)) st = sr_error(SR_ERR_IO, "%s: missing (not a finished shard?)", up);
            else st = sr_records_read(up, &rec, &n, &dropped);
            if (!st && dropped) st = sr_error(SR_ERR_FORMAT, "%s: last record cut off: finish that shard first", up);
            if (!st) {
                sr_record *g = realloc(all, (n_all + n) * sizeof *g);
                if (!g) st = sr_error(SR_ERR_NOMEM, "out of memory");
                else {
                    all = g;
                    memcpy(all + n_all, rec, n * sizeof *rec);
                    n_all += n;
                    free(rec);
                    rec = NULL;
                    n = 0;
                }
            }
            sr_records_free(rec, n);
            free(up);
            free(sd);
        }
        cJSON *ro = NULL;
        if (!st && !run_dir) st = sr_error(SR_ERR_NOMEM, "out of memory");
        if (!st) st = mkdir_p(run_dir);
        if (!st) { /* the merged record log, so a merged folder is itself complete */
            sr_strbuf b = {0};
            for (size_t k = 0; !st && k < n_all; k++) st = sr_record_to_jsonl(&all[k], &b);
            char *up = st ? NULL : sr_path_join(run_dir, "utts.jsonl");
            if (!st) st = up ? sr_write_file_atomic(up, b.data ? b.data : "", b.len) : SR_ERR_NOMEM;
            free(up);
            sr_strbuf_free(&b);
        }
        const char *arch = NULL;
        const cJSON *fr = cJSON_GetArrayItem(cJSON_GetObjectItem(first, "runs"), (int)i);
        arch = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(fr, "model"), "arch"));
        if (!st) st = finish_run(r, all, n_all, run_dir, arch, &ro);
        const cJSON *res = cJSON_GetObjectItem(cJSON_GetObjectItem(fr, "stream"), "resolved");
        if (!st && res) /* the shards ran one model file: the first one's resolution holds */
            cJSON_AddItemToObject(cJSON_GetObjectItem(ro, "stream"), "resolved", cJSON_Duplicate(res, 1));
        if (!st) cJSON_AddItemToArray(cJSON_GetObjectItem(results, "runs"), ro);
        sr_records_free(all, n_all);
        free(sub);
        free(run_dir);
    }
    if (!st) st = write_json_file(out_dir, "results.json", results);
    if (!st) st = write_report(out_dir, results);
out:
    cJSON_Delete(results);
    cJSON_Delete(first);
    sr_config_free(cfg);
    free(cfg_text);
    return st;
}
