/*
 * srkit.c — the command-line tool: one binary, one subcommand per job.
 *
 *   srkit info MODEL.h5 [--json]          what a model file holds
 *   srkit transcribe MODEL AUDIO...       final text per file
 *   srkit stream MODEL AUDIO              partial hypotheses as they change
 *   srkit eval CONFIG                     evaluation runs of an experiment config
 *   srkit score ...                       score hypotheses / timelines of any system
 *   srkit bench [gemm|stream|align|--all] timings (never part of the tests)
 *   srkit compare A.json B.json           regression gate between two results
 *   srkit merge SHARD... -o OUT           combine the shards of a sharded eval
 *
 * The CLI is the only place that prints; it turns statuses into messages and exit codes:
 * 0 ok, 1 failure (or a regression past its tolerance), 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "../core/sr.h"
#include "../eval/run.h"
#include "../kernels/cpu/cpu_impl.h" /* sr_cpu_gemm_bf16_path: the bench names the CPU path */
#include "../kernels/kernels.h"
#include "gitrev.h"

#define EXIT_USAGE 2

static int fail(sr_status st, const char *what)
{
    fprintf(stderr, "srkit: %s: %s: %s\n", what, sr_strerror(st), sr_last_error());
    return 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- shared option parsing for model/stream options ---------------------------------------- */

typedef struct {
    sr_options mo;
    sr_stream_config sc;
    int json;
    int realtime;
} run_opts;

static int parse_int(const char *flag, const char *v, int *out)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < 0) {
        fprintf(stderr, "srkit: %s needs a non-negative integer, got \"%s\"\n", flag, v ? v : "");
        return -1;
    }
    if (x > 1000000) { /* every count or duration option is far below; the library names the exact range */
        fprintf(stderr, "srkit: %s: %s is too large (at most 1000000)\n", flag, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* Consume the option at argv[*i] if it is a model/stream option. 1 = consumed, 0 = not an
 * option of ours, -1 = bad value. */
static int parse_run_opt(int argc, char **argv, int *i, run_opts *o)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
#define TAKE_STR(flag, field)                                                                  \
    if (!strcmp(a, flag)) {                                                                    \
        if (!v) { fprintf(stderr, "srkit: %s needs a value\n", flag); return -1; }             \
        field = v;                                                                             \
        (*i)++;                                                                                \
        return 1;                                                                              \
    }
#define TAKE_INT(flag, field)                                                                  \
    if (!strcmp(a, flag)) {                                                                    \
        if (parse_int(flag, v, &field)) return -1;                                             \
        (*i)++;                                                                                \
        return 1;                                                                              \
    }
    TAKE_STR("--device", o->mo.device)
    TAKE_INT("--threads", o->mo.threads)
    TAKE_STR("--precision", o->mo.precision)
    TAKE_STR("--strategy", o->sc.strategy)
    TAKE_STR("--decoder", o->sc.decoder)
    TAKE_INT("--chunk-ms", o->sc.chunk_ms)
    TAKE_INT("--first-chunk-ms", o->sc.first_chunk_ms)
    TAKE_INT("--stability-n", o->sc.stability_n)
    TAKE_INT("--beam", o->sc.beam)
    TAKE_INT("--max-symbols", o->sc.max_symbols)
    TAKE_INT("--delay-tokens", o->sc.delay_tokens)
    TAKE_INT("--max-seconds", o->sc.max_seconds)
    TAKE_INT("--final-steps", o->sc.final_steps)
    if (!strcmp(a, "--att-context")) {
        if (!v || sscanf(v, "%d,%d", &o->sc.att_context[0], &o->sc.att_context[1]) != 2) {
            fprintf(stderr, "srkit: --att-context needs L,R (e.g. 70,6)\n");
            return -1;
        }
        (*i)++;
        return 1;
    }
    if (!strcmp(a, "--decoder-kv-cache")) { o->sc.decoder_kv_cache = 1; return 1; }
    if (!strcmp(a, "--no-repetition-guard")) { o->sc.repetition_guard = 0; return 1; }
    if (!strcmp(a, "--json")) { o->json = 1; return 1; }
    if (!strcmp(a, "--realtime")) { o->realtime = 1; return 1; }
    return 0;
#undef TAKE_STR
#undef TAKE_INT
}

static const char RUN_OPTS_HELP[] =
    "  --device cpu|cuda       compute device (default cpu)\n"
    "  --threads N             BLAS threads (default: library default)\n"
    "  --precision f32|bf16    Linear products: exact f32 (default) or bf16 weights x bf16\n"
    "                          activations with f32 sums (fast with AVX512_BF16)\n"
    "  --strategy NAME         streaming strategy (default: the model file's choice)\n"
    "  --decoder NAME          decoder (default: the model file's choice)\n"
    "  --chunk-ms N            chunk size in ms\n"
    "  --first-chunk-ms N      first chunk size in ms (WhisperRT tau0)\n"
    "  --stability-n N         tokens re-checked by stable_greedy (default 2)\n"
    "  --beam N                beam size (default 1)\n"
    "  --max-symbols N         transducer symbols per frame\n"
    "  --att-context L,R       FastConformer attention context\n"
    "  --delay-tokens N        Voxtral transcription delay\n"
    "  --max-seconds N         longest audio a stream takes (0: any); Voxtral sizes its\n"
    "                          decoder cache by it\n"
    "  --final-steps N         sync_greedy (Voxtral): at most N decoder steps of a stream's\n"
    "                          final update per engine step (0: all at once)\n"
    "  --decoder-kv-cache      WhisperRT: keep decoder K/V across chunks\n"
    "  --no-repetition-guard   AED decoders: do not cut repetition loops (paper-exact runs)\n";

static void run_opts_init(run_opts *o)
{
    memset(o, 0, sizeof *o);
    sr_options_init(&o->mo);
    sr_stream_config_init(&o->sc);
}

/* ---- info ----------------------------------------------------------------------------------- */

static void print_human_bytes(double b)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB"};
    int i = 0;
    while (b >= 1024 && i < 3) { b /= 1024; i++; }
    printf(i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static int cmd_info(int argc, char **argv)
{
    int json = 0;
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit info MODEL.h5 [--json]\n\n"
                   "Print a model file's arch, config, tensor count, parameter count and bytes by\n"
                   "dtype; --json prints one JSON object (every tensor with dtype and shape).\n");
            return 0;
        } else if (!path) path = argv[i];
        else { fprintf(stderr, "srkit info: unexpected argument %s\n", argv[i]); return EXIT_USAGE; }
    }
    if (!path) { fprintf(stderr, "usage: srkit info MODEL.h5 [--json]\n"); return EXIT_USAGE; }
    char *text = NULL;
    sr_status st = sr_model_inspect(path, &text);
    if (st) return fail(st, path);
    if (json) {
        printf("%s\n", text);
        free(text);
        return 0;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) { fprintf(stderr, "srkit info: internal error: inspect gave bad JSON\n"); return 1; }
    const cJSON *cfg = cJSON_GetObjectItem(j, "config");
    char *cfg_text = cfg ? sr_json_print(cfg, 1) : NULL;
    printf("file:       %s\n", path);
    printf("arch:       %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(j, "arch")));
    const char *src = cJSON_GetStringValue(cJSON_GetObjectItem(j, "source"));
    const char *lic = cJSON_GetStringValue(cJSON_GetObjectItem(j, "license"));
    if (src && *src) printf("source:     %s\n", src);
    if (lic && *lic) printf("license:    %s\n", lic);
    const char *dg = cJSON_GetStringValue(cJSON_GetObjectItem(j, "digest"));
    printf("digest:     %s\n", dg && strcmp(dg, "none") ? dg : "none (integrity not verified; "
                                                               "scripts/srkit_h5.py seal adds one)");
    printf("tensors:    %.0f\n", cJSON_GetNumberValue(cJSON_GetObjectItem(j, "n_tensors")));
    double np = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "n_params"));
    printf("parameters: %.0f (%.2fM)\n", np, np / 1e6);
    const cJSON *by = cJSON_GetObjectItem(j, "bytes_by_dtype");
    const cJSON *e;
    printf("bytes:     ");
    cJSON_ArrayForEach(e, by) {
        printf(" %s ", e->string);
        print_human_bytes(e->valuedouble);
        printf(" (%.0f)", e->valuedouble);
    }
    printf("\n");
    const cJSON *tok = cJSON_GetObjectItem(j, "tokenizer");
    if (cJSON_IsObject(tok))
        printf("tokenizer:  %s, %.0f pieces\n", cJSON_GetStringValue(cJSON_GetObjectItem(tok, "type")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(tok, "size")));
    printf("config:     %s\n", cfg_text ? cfg_text : "{}");
    free(cfg_text);
    cJSON_Delete(j);
    return 0;
}

/* ---- transcribe / stream -------------------------------------------------------------------- */

static int open_model(const char *path, const run_opts *o, sr_model **m)
{
    sr_status st = sr_model_load(path, &o->mo, m);
    if (st) return fail(st, path);
    if (sr_model_warning(*m)) fprintf(stderr, "srkit: warning: %s: %s\n", path, sr_model_warning(*m));
    return 0;
}

/* "strategy S (C ms chunks, first F ms), decoder D" */
static void format_defaults(char *buf, size_t cap, const sr_defaults *d)
{
    char ch[64] = "";
    if (d->chunk_ms > 0)
        snprintf(ch, sizeof ch, " (%d ms chunks, first %d ms)", d->chunk_ms, d->first_chunk_ms);
    snprintf(buf, cap, "strategy %s%s, decoder %s", d->strategy ? d->strategy : "(the arch's one)",
             ch, d->decoder);
}

/* Name the model's defaults for what o->sc leaves unset in o->sc itself (sr_model_defaults is
 * the one place that decides them), so the stream runs what is reported; say them on stderr
 * when the model file decided them (Whisper: its config.streaming). */
static int apply_defaults(const char *path, sr_model *m, sr_use use, run_opts *o)
{
    sr_defaults d;
    sr_status st = sr_model_defaults(m, use, &o->sc, &d);
    if (st) return fail(st, path);
    if ((!o->sc.strategy || !o->sc.decoder) && d.basis) {
        char txt[256];
        format_defaults(txt, sizeof txt, &d);
        fprintf(stderr, "srkit: %s: %s: %s (--strategy / --decoder choose others)\n", path,
                d.basis, txt);
    }
    o->sc.strategy = d.strategy;
    o->sc.decoder = d.decoder;
    return 0;
}

/* `srkit transcribe|stream MODEL --help`: the defaults this model file gets. */
static void help_model_defaults(const char *path, run_opts *o, sr_use use)
{
    sr_model *m = NULL;
    sr_defaults d;
    if (open_model(path, o, &m)) return;
    sr_status st = sr_model_defaults(m, use, &o->sc, &d);
    if (st) fail(st, path);
    else {
        char txt[256];
        format_defaults(txt, sizeof txt, &d);
        printf("\n%s: %s%s%s\n", path, txt, d.basis ? "; " : "", d.basis ? d.basis : "");
    }
    sr_model_free(m);
}

/* The defaults paragraph of `transcribe --help` (use FINAL) and `stream --help` (LIVE); the
 * Whisper choices are models/whisper/whisper.c's defaults_of (suite cli_srkit checks both
 * against what tiny.en gets). */
static const char DEFAULTS_HELP_FINAL[] =
    "\ndefaults: without --strategy / --decoder the model file decides, and srkit names its\n"
    "choice on stderr (`srkit transcribe MODEL --help` prints it for MODEL). Whisper:\n"
    "  offline + aed_greedy for vanilla Whisper weights,\n"
    "  whisperrt + stable_greedy for causal ones (config.streaming.causal; trained chunk size)\n"
    "  (docs/whisper.md, \"Defaults\"). Other archs: their one strategy and default decoder.\n"
    "The repetition guard is on unless --no-repetition-guard.\n";
static const char DEFAULTS_HELP_LIVE[] =
    "\ndefaults: without --strategy / --decoder the model file decides, and srkit names its\n"
    "choice on stderr (`srkit stream MODEL --help` prints it for MODEL). Whisper:\n"
    "  reencode + local_agreement (1000 ms chunks) for vanilla Whisper weights,\n"
    "  whisperrt + stable_greedy for causal ones (config.streaming.causal; trained chunk size)\n"
    "  (docs/whisper.md, \"Defaults\": whisperrt loops on vanilla weights). Other archs: their\n"
    "  one strategy and default decoder. The repetition guard is on unless --no-repetition-guard.\n";

static int cmd_transcribe(int argc, char **argv)
{
    run_opts o;
    run_opts_init(&o);
    const char *model = NULL;
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    int nf = 0;
    for (int i = 0; i < argc; i++) {
        int r = parse_run_opt(argc, argv, &i, &o);
        if (r < 0) { free(files); return EXIT_USAGE; }
        if (r) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit transcribe MODEL.h5 AUDIO... [options]\n\n"
                   "Stream each audio file through the model (whole file fed at once, then\n"
                   "finished) and print its final text; --json prints one JSON object per file\n"
                   "with text, tokens, strategy, decoder, repetition cuts, audio and compute\n"
                   "seconds, RTF.\n\noptions:\n%s"
                   "  --json                  JSON lines output\n%s", RUN_OPTS_HELP,
                   DEFAULTS_HELP_FINAL);
            if (model) help_model_defaults(model, &o, SR_USE_FINAL);
            free(files);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "srkit transcribe: unknown option %s\n", argv[i]);
            free(files);
            return EXIT_USAGE;
        }
        if (!model) model = argv[i];
        else files[nf++] = argv[i];
    }
    if (!model || !nf) {
        fprintf(stderr, "usage: srkit transcribe MODEL.h5 AUDIO... [options] (see --help)\n");
        free(files);
        return EXIT_USAGE;
    }
    sr_model *m = NULL;
    if (open_model(model, &o, &m)) { free(files); return 1; }
    sr_stream *s = NULL;
    sr_status st = SR_OK;
    int rc = 0;
    /* only the final text is printed: the model's defaults for that use (Whisper vanilla:
     * offline, which no live caller could use) */
    if (apply_defaults(model, m, SR_USE_FINAL, &o)) { rc = 1; goto out; }
    if ((st = sr_stream_open(m, &o.sc, &s))) { rc = fail(st, "stream"); goto out; }
    for (int f = 0; f < nf; f++) {
        sr_audio a = {0};
        if ((st = sr_audio_load(files[f], 16000, &a))) { rc = fail(st, files[f]); continue; }
        double t0 = now_s();
        sr_stream_reset(s);
        st = sr_stream_feed(s, a.samples, a.n);
        if (!st) st = sr_stream_finish(s);
        double dt = now_s() - t0;
        if (st) { rc = fail(st, files[f]); sr_audio_free(&a); continue; }
        const sr_hypothesis *h = sr_stream_hypothesis(s);
        double audio_s = (double)a.n / 16000.0;
        if (o.json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "file", files[f]);
            cJSON_AddStringToObject(j, "text", h->text);
            cJSON *toks = cJSON_AddArrayToObject(j, "tokens");
            for (int i = 0; i < h->n_tokens; i++) cJSON_AddItemToArray(toks, cJSON_CreateNumber(h->tokens[i]));
            if (o.sc.strategy) cJSON_AddStringToObject(j, "strategy", o.sc.strategy);
            else cJSON_AddNullToObject(j, "strategy");
            cJSON_AddStringToObject(j, "decoder", o.sc.decoder);
            cJSON_AddNumberToObject(j, "repetition_cuts", h->repetition_cuts);
            cJSON_AddNumberToObject(j, "audio_s", audio_s);
            cJSON_AddNumberToObject(j, "compute_s", dt);
            cJSON_AddNumberToObject(j, "rtf", audio_s > 0 ? dt / audio_s : 0);
            char *txt = sr_json_print(j, 0);
            printf("%s\n", txt);
            free(txt);
            cJSON_Delete(j);
        } else {
            printf(nf > 1 ? "%s\t%s\n" : "%s%s\n", nf > 1 ? files[f] : "", h->text);
        }
        sr_audio_free(&a);
    }
out:
    sr_stream_close(s);
    sr_model_free(m);
    free(files);
    return rc;
}

static int cmd_stream(int argc, char **argv)
{
    run_opts o;
    run_opts_init(&o);
    const char *model = NULL, *audio = NULL;
    int feed_ms = 20;
    for (int i = 0; i < argc; i++) {
        int r = parse_run_opt(argc, argv, &i, &o);
        if (r < 0) return EXIT_USAGE;
        if (r) continue;
        if (!strcmp(argv[i], "--feed-ms")) {
            if (parse_int("--feed-ms", i + 1 < argc ? argv[++i] : NULL, &feed_ms) || !feed_ms) return EXIT_USAGE;
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit stream MODEL.h5 AUDIO [options]\n\n"
                   "Feed the audio in pieces of --feed-ms (default 20 ms) as a live source would,\n"
                   "and print the hypothesis each time it changes: audio time, the stable prefix,\n"
                   "then the part that may still change in [brackets].\n\noptions:\n%s"
                   "  --feed-ms N             samples per feed call, in ms (default 20)\n"
                   "  --realtime              pace the feeding at real time\n"
                   "  --json                  one JSON object per timeline entry\n%s", RUN_OPTS_HELP,
                   DEFAULTS_HELP_LIVE);
            if (model) help_model_defaults(model, &o, SR_USE_LIVE);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "srkit stream: unknown option %s\n", argv[i]);
            return EXIT_USAGE;
        }
        if (!model) model = argv[i];
        else if (!audio) audio = argv[i];
        else { fprintf(stderr, "srkit stream: one audio file only\n"); return EXIT_USAGE; }
    }
    if (!model || !audio) {
        fprintf(stderr, "usage: srkit stream MODEL.h5 AUDIO [options] (see --help)\n");
        return EXIT_USAGE;
    }
    sr_audio a = {0};
    sr_status st = sr_audio_load(audio, 16000, &a);
    if (st) return fail(st, audio);
    sr_model *m = NULL;
    if (open_model(model, &o, &m)) { sr_audio_free(&a); return 1; }
    sr_stream *s = NULL;
    int rc = 0;
    if (apply_defaults(model, m, SR_USE_LIVE, &o)) { rc = 1; goto out; }
    if ((st = sr_stream_open(m, &o.sc, &s))) { rc = fail(st, "stream"); goto out; }
    size_t step = (size_t)feed_ms * 16, printed = 0;
    double t0 = now_s();
    /* pieces of `step` samples, then one more pass that finishes the stream */
    for (size_t i = 0, done = 0; !done; i += step) {
        if (i < a.n) st = sr_stream_feed(s, a.samples + i, a.n - i < step ? a.n - i : step);
        else st = sr_stream_finish(s), done = 1;
        if (st) { rc = fail(st, audio); break; }
        const sr_timeline *tl = sr_stream_timeline(s);
        for (; printed < tl->n; printed++) {
            const sr_timeline_entry *e = &tl->entries[printed];
            if (printed && !e->is_final && !strcmp(e->text, tl->entries[printed - 1].text)) continue;
            if (o.json) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "utt", audio);
                cJSON_AddNumberToObject(j, "t_ms", (double)e->audio_ms);
                cJSON_AddStringToObject(j, "text", e->text);
                cJSON_AddNumberToObject(j, "n_stable", e->n_stable);
                cJSON_AddNumberToObject(j, "compute_ms", e->compute_ns / 1e6);
                if (e->is_final) /* the utterance's loop cuts, once it is done */
                    cJSON_AddNumberToObject(j, "repetition_cuts", sr_stream_hypothesis(s)->repetition_cuts);
                char *txt = sr_json_print(j, 0);
                printf("%s\n", txt);
                free(txt);
                cJSON_Delete(j);
            } else {
                printf("[%7.2f s]%s %s\n", e->audio_ms / 1000.0, e->is_final ? " final" : "", e->text);
            }
        }
        fflush(stdout);
        if (o.realtime && i < a.n) {
            double due = t0 + (double)(i + step) / 16000.0, wait = due - now_s();
            if (wait > 0) nanosleep(&(struct timespec){(time_t)wait, (long)((wait - (time_t)wait) * 1e9)}, NULL);
        }
    }
out:
    sr_stream_close(s);
    sr_model_free(m);
    sr_audio_free(&a);
    return rc;
}

/* ---- eval / merge / score / compare ------------------------------------------------------------ */

static void fmt_hms(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e7) { snprintf(buf, cap, "--:--"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

/* Progress: a redrawn bar on a terminal, a plain line per ~10 % otherwise. */
static void eval_progress(const sr_eval_progress *p, void *user)
{
    int tty = *(int *)user;
    if (p->notice) {
        fprintf(stderr, "%s[%s] %s\n", tty ? "\r\033[K" : "", p->run_name, p->notice);
        return;
    }
    double frac = p->audio_s_total > 0 ? p->audio_s_done / p->audio_s_total : (p->total ? (double)p->done / p->total : 1);
    double eta = frac > 0 ? p->elapsed_s * (1 - frac) / frac : -1;
    char e[32], wer[32];
    fmt_hms(e, sizeof e, eta);
    if (isnan(p->wer)) snprintf(wer, sizeof wer, "-");
    else snprintf(wer, sizeof wer, "%.2f%%", p->wer * 100);
    if (tty) {
        char bar[21];
        int fill = (int)(frac * 20 + 0.5);
        for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
        bar[20] = '\0';
        fprintf(stderr, "\r\033[K[run %zu/%zu %s] [%s] %zu/%zu utts  %.3f/%.3f h audio  WER %s  ETA %s",
                p->run_index + 1, p->n_runs, p->run_name, bar, p->done, p->total, p->audio_s_done / 3600,
                p->audio_s_total / 3600, wer, e);
        if (p->done == p->total) fprintf(stderr, "\n");
    } else {
        size_t step = p->total >= 10 ? p->total / 10 : 1;
        if (p->done % step == 0 || p->done == p->total)
            fprintf(stderr, "[run %zu/%zu %s] %zu/%zu utts, %.3f h audio, WER %s, ETA %s\n", p->run_index + 1,
                    p->n_runs, p->run_name, p->done, p->total, p->audio_s_done / 3600, wer, e);
    }
}

static int cmd_eval(int argc, char **argv)
{
    const char *path = NULL, *output = NULL, *shard = NULL;
    int list = 0, restart = 0, parallel = 1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit eval CONFIG.json [--restart] [--shard K/N] [--parallel N] [--output DIR] [--list-runs]\n\n"
                   "Run an experiment config (docs/config.md): every run of its sweep streams every\n"
                   "utterance of the dataset through the model and is scored (docs/metrics.md).\n"
                   "Writes results.json, report.md and per run hyp.trn, ref.trn, timeline.jsonl,\n"
                   "utts.jsonl into the config's output folder; prints report.md at the end.\n\n"
                   "  --restart      forget completed utterances (a re-run otherwise resumes)\n"
                   "  --shard K/N    only every N-th utterance from K (0-based) into OUTPUT/shards/K-of-N;\n"
                   "                 combine the shards with `srkit merge`\n"
                   "  --parallel N   N utterances at once through one batched engine (the streams'\n"
                   "                 chunks share every step); results equal a sequential run's,\n"
                   "                 timings aside (each chunk's compute time is its step's)\n"
                   "  --output DIR   write here instead of the config's output\n"
                   "  --list-runs    validate the config, read each run's data (path, format, utterances)\n"
                   "                 and print the runs it expands to\n\n"
                   "exit status: 0 ok, 1 error or a baseline tolerance exceeded, 2 usage\n");
            return 0;
        }
        if (!strcmp(argv[i], "--list-runs")) list = 1;
        else if (!strcmp(argv[i], "--restart")) restart = 1;
        else if (!strcmp(argv[i], "--shard") && i + 1 < argc) shard = argv[++i];
        else if (!strcmp(argv[i], "--parallel") && i + 1 < argc) {
            if (parse_int("--parallel", argv[++i], &parallel) || parallel < 1 || parallel > 4096) {
                fprintf(stderr, "srkit eval: --parallel needs an integer in 1..4096\n");
                return EXIT_USAGE;
            }
        }
        else if (!strcmp(argv[i], "--output") && i + 1 < argc) output = argv[++i];
        else if (argv[i][0] == '-') { fprintf(stderr, "srkit eval: unknown option %s\n", argv[i]); return EXIT_USAGE; }
        else if (!path) path = argv[i];
        else { fprintf(stderr, "srkit eval: unexpected argument %s\n", argv[i]); return EXIT_USAGE; }
    }
    if (!path) { fprintf(stderr, "usage: srkit eval CONFIG.json [options] (see --help)\n"); return EXIT_USAGE; }
    sr_eval_options eo = {.restart = restart, .output = output, .config_path = path, .git_rev = SR_GIT_REV,
                          .parallel = parallel};
    if (shard && sr_shard_parse(shard, &eo.shard_k, &eo.shard_n)) {
        fprintf(stderr, "srkit eval: %s\n", sr_last_error());
        return EXIT_USAGE;
    }
    sr_config *c = NULL;
    sr_status st = sr_config_load(path, &c);
    if (st) return fail(st, path);
    for (size_t i = 0; i < sr_config_n_warnings(c); i++) fprintf(stderr, "srkit: warning: %s\n", sr_config_warning(c, i));
    if (list) { /* every run, with its data read (so a wrong path or format shows now) */
        int rc = 0;
        for (size_t i = 0; i < sr_config_n_runs(c) && !rc; i++) {
            const sr_run_config *r = sr_config_run(c, i);
            sr_dataset *d = NULL;
            st = sr_run_dataset(r, &d);
            if (st) {
                rc = fail(st, r->name);
                break;
            }
            printf("%s\tmodel=%s\tdata=%s (%s, %zu utterances%s)\toutput=%s\n", r->name, r->model.path,
                   r->data.path, sr_data_format_name(d->format), d->n,
                   d->n_problems ? ", some without audio" : "", r->output);
            sr_dataset_free(d);
        }
        sr_config_free(c);
        return rc;
    }
    int tty = isatty(2);
    eo.progress = eval_progress;
    eo.user = &tty;
    sr_eval_outcome out;
    st = sr_eval_run(c, &eo, &out);
    sr_config_free(c);
    if (st) {
        if (tty) fprintf(stderr, "\n");
        return fail(st, path);
    }
    char rp[4096];
    snprintf(rp, sizeof rp, "%s/report.md", out.output_dir);
    FILE *f = fopen(rp, "r");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f)) fputs(line, stdout);
        fclose(f);
    }
    fprintf(stderr, "srkit eval: results in %s (results.json, report.md)%s\n", out.output_dir,
            out.n_failed_utts ? "; some utterances failed: see results.json" : "");
    int rc = 0;
    if (out.baseline_report) {
        fprintf(stderr, "baseline: %s\n", out.baseline_report);
        if (out.baseline_failed) {
            fprintf(stderr, "srkit eval: baseline tolerance exceeded\n");
            rc = 1;
        }
    }
    sr_eval_outcome_clear(&out);
    return rc;
}

static int cmd_merge(int argc, char **argv)
{
    const char *out = NULL;
    const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    size_t n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit merge SHARD_DIR... -o OUT_DIR\n\n"
                   "Combine the output folders of `srkit eval --shard K/N` runs of one config into\n"
                   "one result (records concatenated and scored again): equal to an unsharded run\n"
                   "except for timings.\n");
            free(dirs);
            return 0;
        }
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') { fprintf(stderr, "srkit merge: unknown option %s\n", argv[i]); free(dirs); return EXIT_USAGE; }
        else dirs[n++] = argv[i];
    }
    if (!n || !out) {
        fprintf(stderr, "usage: srkit merge SHARD_DIR... -o OUT_DIR\n");
        free(dirs);
        return EXIT_USAGE;
    }
    sr_status st = sr_eval_merge(dirs, n, out, SR_GIT_REV);
    free(dirs);
    if (st) return fail(st, "merge");
    fprintf(stderr, "srkit merge: %zu shard(s) merged into %s\n", n, out);
    return 0;
}

/* Records from a reference set and another system's hyp.trn or timeline.jsonl. */
static sr_status score_records(const sr_dataset *ref, const sr_texts *hyp, const sr_timelines *tl,
                               sr_record **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    sr_strbuf missing = {0}, extra = {0};
    size_t n_missing = 0, n_extra = 0;
    for (size_t i = 0; i < ref->n; i++) {
        const char *id = ref->utts[i].id;
        if (hyp ? !sr_texts_find(hyp, id) : !sr_timelines_find(tl, id))
            if (n_missing++ < 10) sr_strbuf_printf(&missing, " %s", id);
    }
    size_t nh = hyp ? hyp->n : tl->n;
    for (size_t i = 0; i < nh; i++) {
        const char *id = hyp ? hyp->items[i].id : tl->utts[i].id;
        if (!sr_dataset_find(ref, id))
            if (n_extra++ < 10) sr_strbuf_printf(&extra, " %s", id);
    }
    sr_status st = SR_OK;
    if (n_missing || n_extra)
        st = sr_error(SR_ERR_FORMAT, "utterance ids differ: %zu reference id(s) without a hypothesis%s%s; %zu hypothesis id(s) "
                      "without a reference%s%s", n_missing, n_missing ? ":" : "", missing.data ? missing.data : "",
                      n_extra, n_extra ? ":" : "", extra.data ? extra.data : "");
    sr_strbuf_free(&missing);
    sr_strbuf_free(&extra);
    if (st) return st;
    sr_record *r = calloc(ref->n ? ref->n : 1, sizeof *r);
    if (!r) return SR_ERR_NOMEM;
    for (size_t i = 0; i < ref->n; i++) {
        const sr_utt *u = &ref->utts[i];
        r[i].id = strdup(u->id);
        r[i].ref = strdup(u->text);
        r[i].audio_ms = u->duration_s > 0 ? u->duration_s * 1000 : -1;
        if (hyp) {
            r[i].hyp = strdup(sr_texts_find(hyp, u->id)->text);
        } else {
            const sr_utt_timeline *t = sr_timelines_find(tl, u->id);
            r[i].points = calloc(t->n ? t->n : 1, sizeof *r[i].points);
            for (size_t k = 0; k < t->n; k++) {
                r[i].points[k] = t->points[k];
                r[i].points[k].text = strdup(t->points[k].text);
            }
            r[i].n_points = t->n;
            r[i].hyp = strdup(t->n ? t->points[t->n - 1].text : "");
        }
    }
    *out = r;
    *n_out = ref->n;
    return SR_OK;
}

static int cmd_score(int argc, char **argv)
{
    const char *ref = NULL, *hyp = NULL, *tl = NULL, *al = NULL, *norm = "whisper_en";
    int json = 0;
    for (int i = 0; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit score --ref REF (--hyp HYP.trn | --timeline TIMELINE.jsonl)\n"
                   "                   [--alignments A.ctm|DIR] [--normalizer whisper_en|basic|none] [--json]\n\n"
                   "Score another system's output with srkit's metrics (docs/metrics.md). REF is a trn\n"
                   "file, a LibriSpeech folder, a NeMo manifest or a Kaldi data folder. TIMELINE.jsonl\n"
                   "has one object per line: {\"utt\": ID, \"t_ms\": 1200, \"text\": \"...\", \"n_stable\": 3}.\n"
                   "--json prints one JSON object (wer, cer, rwer, arwer, n_utts, n_ref_words, sub, del,\n"
                   "ins, cor, latency, ...); rates are fractions, null when undefined.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--json")) { json = 1; continue; }
        if (!v) { fprintf(stderr, "srkit score: %s needs a value\n", argv[i]); return EXIT_USAGE; }
        if (!strcmp(argv[i], "--ref")) ref = v;
        else if (!strcmp(argv[i], "--hyp")) hyp = v;
        else if (!strcmp(argv[i], "--timeline")) tl = v;
        else if (!strcmp(argv[i], "--alignments")) al = v;
        else if (!strcmp(argv[i], "--normalizer")) norm = v;
        else { fprintf(stderr, "srkit score: unknown option %s\n", argv[i]); return EXIT_USAGE; }
        i++;
    }
    if (!ref || (!hyp == !tl)) {
        fprintf(stderr, "usage: srkit score --ref REF (--hyp HYP.trn | --timeline TIMELINE.jsonl) [options]\n");
        return EXIT_USAGE;
    }
    sr_dataset *d = NULL;
    sr_texts *ht = NULL;
    sr_timelines *tls = NULL;
    sr_alignments *a = NULL;
    sr_normalizer *nz = NULL;
    sr_corpus *corpus = NULL;
    sr_record *rec = NULL;
    size_t n = 0, n_failed = 0;
    int rc = 0;
    sr_status st;
    const char *what = ref;
    if ((st = sr_dataset_load(ref, SR_DATA_AUTO, &d))) goto out;
    what = hyp ? hyp : tl;
    if ((st = hyp ? sr_trn_read(hyp, &ht) : sr_timelines_read(tl, &tls))) goto out;
    what = al;
    if (al && (st = sr_alignments_load(al, &a))) goto out;
    what = "normalizer";
    if ((st = sr_normalizer_create(norm, NULL, &nz))) goto out;
    what = "score";
    if ((st = score_records(d, ht, tls, &rec, &n)) || (st = sr_corpus_create(&corpus))) goto out;
    sr_score_setup setup = {nz, a};
    if ((st = sr_records_score(rec, n, &setup, corpus, &n_failed, NULL))) goto out;
    sr_corpus_metrics cm;
    if ((st = sr_corpus_result(corpus, &cm))) goto out;
    if (json) {
        cJSON *j = sr_corpus_to_json(&cm, n_failed);
        char *txt = sr_json_print(j, 0);
        printf("%s\n", txt);
        free(txt);
        cJSON_Delete(j);
    } else {
        printf("utterances %zu, reference words %lld\n", cm.n_utts, (long long)cm.wer.n_ref);
        printf("WER  %6.2f %%  (sub %lld, del %lld, ins %lld, cor %lld)\n", cm.wer_rate * 100,
               (long long)cm.wer.sub, (long long)cm.wer.del, (long long)cm.wer.ins, (long long)cm.wer.cor);
        printf("CER  %6.2f %%\n", cm.cer_rate * 100);
        if (tl) {
            printf("RWER %6.2f %%   RWER (committed) %6.2f %%\n", cm.rwer_rate * 100, cm.rwer_stable_rate * 100);
            if (a) printf("ARWER %5.2f %%   ARWER (committed) %5.2f %%\n", cm.arwer_rate * 100, cm.arwer_stable_rate * 100);
            printf("revisions per word %.3f\n", cm.revisions_per_word);
        }
    }
out:
    if (st) rc = fail(st, what ? what : "score");
    sr_records_free(rec, n);
    sr_corpus_free(corpus);
    sr_normalizer_free(nz);
    sr_alignments_free(a);
    sr_timelines_free(tls);
    sr_texts_free(ht);
    sr_dataset_free(d);
    return rc;
}

static int cmd_compare(int argc, char **argv)
{
    const char *a = NULL, *b = NULL;
    int json = 0;
    sr_compare_limits lim = {0.2, 0};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: srkit compare BASE/results.json NEW/results.json [--max-wer-increase P]\n"
                   "                     [--max-rtf-ratio R] [--json]\n\n"
                   "Metric deltas run by run (matched by name). Exit 1 when a run's WER rose by more\n"
                   "than P percentage points (default 0.2) or its RTF by more than the ratio R (not\n"
                   "checked unless given, e.g. 1.10); 0 otherwise; 2 on bad input.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--max-wer-increase") && i + 1 < argc) lim.max_wer_increase = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-rtf-ratio") && i + 1 < argc) lim.max_rtf_ratio = atof(argv[++i]);
        else if (argv[i][0] == '-') { fprintf(stderr, "srkit compare: unknown option %s\n", argv[i]); return EXIT_USAGE; }
        else if (!a) a = argv[i];
        else if (!b) b = argv[i];
        else { fprintf(stderr, "srkit compare: unexpected argument %s\n", argv[i]); return EXIT_USAGE; }
    }
    if (!a || !b) { fprintf(stderr, "usage: srkit compare BASE.json NEW.json [options]\n"); return EXIT_USAGE; }
    cJSON *ja = NULL, *jb = NULL, *rep = NULL;
    int failed = 0;
    sr_status st;
    if ((st = sr_results_load(a, &ja)) || (st = sr_results_load(b, &jb)) ||
        (st = sr_compare_results(ja, jb, &lim, &rep, &failed))) {
        fprintf(stderr, "srkit compare: %s: %s\n", sr_strerror(st), sr_last_error());
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        return EXIT_USAGE;
    }
    if (json) {
        char *t = sr_json_print(rep, 0);
        printf("%s\n", t);
        free(t);
    } else {
        const cJSON *run;
        cJSON_ArrayForEach(run, cJSON_GetObjectItem(rep, "runs")) {
            printf("%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(run, "name")));
            const cJSON *m;
            cJSON_ArrayForEach(m, cJSON_GetObjectItem(run, "metrics")) {
                const cJSON *bv = cJSON_GetObjectItem(m, "base"), *nv = cJSON_GetObjectItem(m, "new");
                if (!cJSON_IsNumber(bv) && !cJSON_IsNumber(nv)) continue;
                printf("  %-34s %14.6g -> %-14.6g", m->string, cJSON_IsNumber(bv) ? bv->valuedouble : NAN,
                       cJSON_IsNumber(nv) ? nv->valuedouble : NAN);
                if (cJSON_IsNumber(bv) && cJSON_IsNumber(nv)) printf(" (%+.6g)", nv->valuedouble - bv->valuedouble);
                printf("\n");
            }
            const cJSON *f;
            cJSON_ArrayForEach(f, cJSON_GetObjectItem(run, "failures")) printf("  FAIL: %s\n", f->valuestring);
        }
        printf(failed ? "regression: tolerance exceeded\n" : "ok: within tolerances\n");
    }
    cJSON_Delete(rep);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    return failed ? 1 : 0;
}

static int simple_help(int argc, char **argv, const char *usage)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s", usage);
            return 1;
        }
    return 0;
}

/* ---- bench ---------------------------------------------------------------------------------- */

/* GEMM throughput of a kernel table at shapes typical of batch-1 streaming (M small, weight-
 * bandwidth-bound) and of batched or offline encoding (M large, compute-bound). */
static int bench_sgemm_shapes(const sr_kernels *k)
{
    sr_status st;
    static const int shapes[][3] = {{1, 1024, 1024}, {8, 1024, 4096}, {64, 1024, 1024},
                                    {256, 1024, 4096}, {1024, 1024, 1024}};
    printf("gemm on %s (row-major, B transposed as a Linear weight)\n", k->name);
    printf("%6s %6s %6s %10s %10s %10s\n", "M", "N", "K", "ms", "GFLOP/s", "GB/s(B)");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
        float *h = malloc((na + nb) * sizeof(float));
        float *A = k->alloc(na * sizeof(float)), *B = k->alloc(nb * sizeof(float)), *C = k->alloc(nc * sizeof(float));
        if (!h || !A || !B || !C) { fprintf(stderr, "srkit bench: out of memory\n"); return 1; }
        for (size_t i = 0; i < na + nb; i++) h[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        k->upload(A, h, na * sizeof(float));
        k->upload(B, h + na, nb * sizeof(float));
        double best = 1e30;
        for (int rep = 0; rep < 7; rep++) {
            double t0 = now_s();
            int inner = M < 64 ? 20 : 1;
            for (int r = 0; r < inner; r++)
                if ((st = k->sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N))) return fail(st, "sgemm");
            k->sync();
            double dt = (now_s() - t0) / inner;
            if (dt < best) best = dt;
        }
        printf("%6d %6d %6d %10.3f %10.1f %10.1f\n", M, N, K, best * 1e3, 2.0 * M * N * K / best / 1e9,
               (double)nb * sizeof(float) / best / 1e9);
        k->free(A);
        k->free(B);
        k->free(C);
        free(h);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed product: the op set's gemm (W != NULL, weight copy r % copies on call r) or the
 * table's sgemm with B [N, K] (trans_b = 1). The weights rotate over copies that together
 * exceed the last-level cache, so every call reads its weight from memory, as a model's layers
 * do. */
typedef struct {
    const sr_kernels *k;
    int M, N, K, copies;
    sr_kweight **W; /* [copies] or NULL: sgemm on B */
    float **B;      /* [copies] */
    const float *x;
    float *y;
    int tc_kernel; /* CUDA bf16 products: 0 wmma, 1 mma (sr_cuda_gemm_kernel); -1 as set */
    int burst;     /* calls per timing, back to back, one wait after the last (0 or 1: alone) */
} bench_gemm_case;

/* The CUDA table's bf16-product kernel for one timed call (-1: leave it). */
static void bench_tc_kernel(int v)
{
#ifdef SR_WITH_CUDA
    if (v >= 0) sr_cuda_gemm_kernel(v);
#else
    (void)v;
#endif
}

/* Median seconds per call of each of n cases (into med[]), timed round-robin (case 0, 1, ...,
 * then again) so that a change in machine load hits all of them alike; one untimed warm-up
 * round first. A case with burst b > 1 is timed over b calls issued back to back (the weight
 * copies rotating) and one wait: on an asynchronous table that hides each call's launch and
 * wait behind the previous call, as inside a model's step, where a call timed alone pays both.
 * 0, or -1 when a call failed. */
static int bench_gemm_medians(const bench_gemm_case *c, int n, int reps, double *med)
{
    enum { MAXR = 64, MAXC = 5 };
    double t[MAXC][MAXR];
    reps = reps < 1 ? 1 : reps > MAXR ? MAXR : reps;
    if (n > MAXC) return -1;
    for (int r = -1; r < reps; r++)
        for (int i = 0; i < n; i++) {
            const bench_gemm_case *b = &c[i];
            const int burst = b->burst > 1 ? b->burst : 1;
            bench_tc_kernel(b->tc_kernel);
            double t0 = now_s();
            sr_status st = SR_OK;
            for (int j = 0; j < burst && !st; j++) {
                int w = (int)(((long)(r + 1) * burst + j) % b->copies);
                st = b->W ? b->k->gemm(b->M, b->x, b->K, b->W[w], NULL, SR_ACT_NONE, 1.0f, 0.0f,
                                       b->y, b->N)
                          : b->k->sgemm(0, 1, b->M, b->N, b->K, 1.0f, b->x, b->K, b->B[w], b->K,
                                        0.0f, b->y, b->N);
            }
            b->k->sync();
            if (st) {
                fail(st, b->W ? "gemm" : "sgemm");
                return -1;
            }
            if (r >= 0) t[i][r] = (now_s() - t0) / burst;
        }
    for (int i = 0; i < n; i++) {
        qsort(t[i], (size_t)reps, sizeof t[i][0], cmp_double);
        med[i] = reps % 2 ? t[i][reps / 2] : 0.5 * (t[i][reps / 2 - 1] + t[i][reps / 2]);
    }
    return 0;
}

/* The op set's gemm (packed f32 / bf16 weights) against the table's sgemm (OpenBLAS on the
 * CPU: sgemv at M = 1) on one N x K weight for the row counts of streaming decoding: GB/s of
 * weight bytes read per call (the bound at small M is the memory bandwidth: sgemv's figure at
 * M = 1), then the Whisper encoder's big products (M = 1500) as GFLOP/s. */
static int bench_gemm_op(const sr_kernels *k, int N, int K, const char *threads_note, int tc_only)
{
    if (!k->gemm || !k->weight_create || !k->weight_free) {
        printf("(gemm op: the %s table has none yet)\n", k->name);
        return 0;
    }
    static const int Ms[] = {1, 2, 4, 8, 16, 32, 64};
    enum { MAXM = 64, REPS = 15, TC_BURST = 16 };
    const size_t llc_plus = (size_t)128 << 20; /* more than any last-level cache here */
    const size_t nw = (size_t)N * K;
    int copies = (int)((llc_plus + nw * 2 - 1) / (nw * 2)); /* for the 2-byte weight */
    copies = copies < 1 ? 1 : copies > 16 ? 16 : copies;
    int rc = 1;
    float *hw = malloc(nw * sizeof(float)), *hx = malloc((size_t)MAXM * K * sizeof(float));
    uint16_t *hb = malloc(nw * sizeof(uint16_t));
    sr_kweight *Wf[16] = {0}, *Wb[16] = {0}, *Wd[16] = {0};
    float *B[16] = {0};
    float *x = k->alloc((size_t)MAXM * K * sizeof(float)), *y = k->alloc((size_t)MAXM * N * sizeof(float));
    if (!hw || !hx || !hb || !x || !y) { fprintf(stderr, "srkit bench: out of memory\n"); goto out; }
    for (size_t i = 0; i < nw; i++) {
        hw[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        uint32_t u;
        memcpy(&u, &hw[i], sizeof u);
        hb[i] = (uint16_t)(u >> 16); /* bf16 by truncation: any values do for timing */
    }
    for (size_t i = 0; i < (size_t)MAXM * K; i++) hx[i] = (float)((i * 131) % 997) / 997.0f - 0.5f;
    k->upload(x, hx, (size_t)MAXM * K * sizeof(float));
    /* f32 copies: half as many hold as many bytes as the bf16 ones */
    int copies_f = (copies + 1) / 2;
    sr_status st;
    /* --tensor-cores times the bf16-product weights alone: the others are not made */
    for (int c = 0; c < copies; c++) {
        if ((!tc_only && (st = k->weight_create(hb, SR_BF16, N, K, NULL, SR_KMUL_EXACT, &Wb[c]))) ||
            (st = k->weight_create(hb, SR_BF16, N, K, NULL, SR_KMUL_BF16, &Wd[c]))) {
            fail(st, "weight_create");
            goto out;
        }
        if (c < copies_f && !tc_only) {
            if ((st = k->weight_create(hw, SR_F32, N, K, NULL, SR_KMUL_EXACT, &Wf[c]))) { fail(st, "weight_create"); goto out; }
            if (!(B[c] = k->alloc(nw * sizeof(float)))) { fprintf(stderr, "srkit bench: out of memory\n"); goto out; }
            k->upload(B[c], hw, nw * sizeof(float));
        }
    }
    printf("\ngemm op on %s vs sgemm: weight %d x %d (f32 %.0f MiB, bf16 %.0f MiB; %d / %d copies "
           "rotated so every call reads from memory), %s, median of %d calls taken in turn\n", k->name, N, K,
           nw * 4.0 / 1048576.0, nw * 2.0 / 1048576.0, copies_f, copies, threads_note, REPS);
    if (!tc_only) {
        printf("GB/s = weight bytes / time (f32: 4 bytes per weight, bf16: 2); bf16 widened: exact\n"
               "products (precision f32), bf16 x bf16: activations rounded to bf16 (precision bf16, %s)\n",
               strcmp(k->name, "cpu") ? k->name : sr_cpu_gemm_bf16_path());
        printf("%4s | %10s %8s | %10s %8s | %10s %8s | %10s %8s %-6s\n", "M", "op f32 ms", "GB/s",
               "bf16 wid.", "GB/s", "bf16xbf16", "GB/s", "sgemm ms", "GB/s", "");
    }
    for (size_t i = 0; i < sizeof Ms / sizeof Ms[0] && !tc_only; i++) {
        int M = Ms[i];
        bench_gemm_case c[4] = {{k, M, N, K, copies_f, Wf, NULL, x, y, -1, 1},
                                {k, M, N, K, copies, Wb, NULL, x, y, -1, 1},
                                {k, M, N, K, copies, Wd, NULL, x, y, -1, 1},
                                {k, M, N, K, copies_f, NULL, B, x, y, -1, 1}};
        double med[4];
        if (bench_gemm_medians(c, 4, REPS, med)) goto out;
        double tf = med[0], tb = med[1], td = med[2], ts = med[3];
        printf("%4d | %10.3f %8.2f | %10.3f %8.2f | %10.3f %8.2f | %10.3f %8.2f %-6s\n", M, tf * 1e3,
               nw * 4.0 / tf / 1e9, tb * 1e3, nw * 2.0 / tb / 1e9, td * 1e3, nw * 2.0 / td / 1e9,
               ts * 1e3, nw * 4.0 / ts / 1e9, M == 1 ? "(gemv)" : "");
    }
#ifdef SR_WITH_CUDA
    /* the two tensor-core kernels of bf16 products (kernels/cuda/gemm.cu), timed in turn; the
     * rows past 64 are the batched encoder's and many streams' */
    if (!strcmp(k->name, "cuda")) {
        static const int Mt[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
        const int prev = sr_cuda_gemm_kernel(-1);
        float *xt = k->alloc((size_t)512 * K * sizeof(float)), *yt = k->alloc((size_t)512 * N * sizeof(float));
        float *hxt = malloc((size_t)512 * K * sizeof(float));
        if (!xt || !yt || !hxt) {
            fprintf(stderr, "srkit bench: out of memory\n");
            k->free(xt), k->free(yt), free(hxt);
            goto out;
        }
        for (size_t i = 0; i < (size_t)512 * K; i++) hxt[i] = (float)((i * 131) % 997) / 997.0f - 0.5f;
        k->upload(xt, hxt, (size_t)512 * K * sizeof(float));
        /* the weight as i8 (q = 254 w, scale 1 / 254; one byte a weight: twice the copies) */
        int copies8 = (int)((llc_plus + nw - 1) / nw);
        copies8 = copies8 < 1 ? 1 : copies8 > 32 ? 32 : copies8;
        sr_kweight *Wi[32] = {0};
        int8_t *hq = malloc(nw);
        float *hs = malloc((size_t)N * sizeof(float));
        int bad = !hq || !hs;
        for (size_t i = 0; !bad && i < nw; i++) hq[i] = (int8_t)(hw[i] * 254.0f);
        for (int n = 0; !bad && n < N; n++) hs[n] = 1.0f / 254.0f;
        for (int c = 0; !bad && c < copies8; c++)
            if ((st = k->weight_create(hq, SR_I8, N, K, hs, SR_KMUL_BF16, &Wi[c]))) {
                fail(st, "weight_create (i8)");
                bad = 1;
            }
        if (!bad)
            printf("\nbf16 x bf16 on the tensor cores: the wmma kernel (SRKIT_CUDA_GEMM=wmma) against the "
                   "mma kernel (default), each call timed alone (launch to wait); then the mma kernel\n"
                   "in runs of %d calls back to back (one wait: the launches hidden, as in a step); then the "
                   "same weight as i8 (one byte a weight, widened to bf16 in the mma kernel,\n%d copies), "
                   "alone and in runs; GB/s of the bytes each form reads\n"
                   "%4s | %10s %8s %9s | %10s %8s %9s | %6s | %10s %8s | %10s %8s | %10s %8s\n", TC_BURST,
                   copies8, "M", "wmma ms", "GB/s", "TFLOP/s", "mma ms", "GB/s", "TFLOP/s", "ratio",
                   "mma run ms", "GB/s", "i8 ms", "GB/s", "i8 run ms", "GB/s");
        for (size_t i = 0; i < sizeof Mt / sizeof Mt[0] && !bad; i++) {
            int M = Mt[i];
            bench_gemm_case c[5] = {{k, M, N, K, copies, Wd, NULL, xt, yt, 0, 1},
                                    {k, M, N, K, copies, Wd, NULL, xt, yt, 1, 1},
                                    {k, M, N, K, copies, Wd, NULL, xt, yt, 1, TC_BURST},
                                    {k, M, N, K, copies8, Wi, NULL, xt, yt, 1, 1},
                                    {k, M, N, K, copies8, Wi, NULL, xt, yt, 1, TC_BURST}};
            double med[5];
            if (bench_gemm_medians(c, 5, REPS, med)) { bad = 1; break; }
            double fl = 2.0 * M * (double)nw;
            printf("%4d | %10.3f %8.2f %9.2f | %10.3f %8.2f %9.2f | %6.2f | %10.3f %8.2f | %10.3f %8.2f | "
                   "%10.3f %8.2f\n", M,
                   med[0] * 1e3, nw * 2.0 / med[0] / 1e9, fl / med[0] / 1e12, med[1] * 1e3,
                   nw * 2.0 / med[1] / 1e9, fl / med[1] / 1e12, med[0] / med[1], med[2] * 1e3,
                   nw * 2.0 / med[2] / 1e9, med[3] * 1e3, nw / med[3] / 1e9, med[4] * 1e3, nw / med[4] / 1e9);
        }
        sr_cuda_gemm_kernel(prev);
        for (int c = 0; c < 32; c++)
            if (Wi[c]) k->weight_free(Wi[c]);
        free(hq), free(hs);
        k->free(xt), k->free(yt), free(hxt);
        if (bad) goto out;
    }
#endif
    if (tc_only) {
        rc = 0;
        goto out;
    }
    /* Whisper encoder products (base / small widths at 30 s: 1500 frames): compute-bound */
    static const int big[][3] = {{1500, 1536, 384}, {1500, 384, 1536}, {1500, 2048, 512}, {1500, 512, 2048}};
    printf("\nbig M (Whisper encoder MLP, f32): op vs sgemm\n");
    printf("%5s %5s %5s | %9s %9s | %9s %9s | %6s\n", "M", "N", "K", "op ms", "GFLOP/s", "sgemm ms",
           "GFLOP/s", "ratio");
    for (size_t s = 0; s < sizeof big / sizeof big[0]; s++) {
        int M = big[s][0], n = big[s][1], kk = big[s][2];
        size_t nx = (size_t)M * kk, nbw = (size_t)n * kk;
        float *h = malloc((nx + nbw) * sizeof(float));
        float *bx = k->alloc(nx * sizeof(float)), *by = k->alloc((size_t)M * n * sizeof(float));
        float *bB = k->alloc(nbw * sizeof(float));
        sr_kweight *bW = NULL;
        int ok = h && bx && by && bB;
        if (ok) {
            for (size_t i = 0; i < nx + nbw; i++) h[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
            k->upload(bx, h, nx * sizeof(float));
            k->upload(bB, h + nx, nbw * sizeof(float));
            ok = k->weight_create(h + nx, SR_F32, n, kk, NULL, SR_KMUL_EXACT, &bW) == SR_OK;
        }
        double med[2] = {-1, -1};
        if (ok) {
            bench_gemm_case c[2] = {{k, M, n, kk, 1, &bW, NULL, bx, by, -1, 1},
                                    {k, M, n, kk, 1, NULL, &bB, bx, by, -1, 1}};
            ok = bench_gemm_medians(c, 2, 7, med) == 0;
        }
        double to = med[0], ts = med[1];
        if (bW) k->weight_free(bW);
        k->free(bx);
        k->free(by);
        k->free(bB);
        free(h);
        if (!ok) { fprintf(stderr, "srkit bench: big gemm failed\n"); goto out; }
        double fl = 2.0 * M * n * kk;
        printf("%5d %5d %5d | %9.3f %9.1f | %9.3f %9.1f | %6.2f\n", M, n, kk, to * 1e3, fl / to / 1e9,
               ts * 1e3, fl / ts / 1e9, to / ts);
    }
    rc = 0;
out:
    for (int c = 0; c < 16; c++) {
        if (Wf[c]) k->weight_free(Wf[c]);
        if (Wb[c]) k->weight_free(Wb[c]);
        if (Wd[c]) k->weight_free(Wd[c]);
        k->free(B[c]);
    }
    k->free(x);
    k->free(y);
    free(hw);
    free(hx);
    free(hb);
    return rc;
}

/* `srkit bench gemm`: the table's sgemm at typical shapes, then the op set's gemm against it
 * (weight N x K; 0 = 4096); tc_only (--tensor-cores, CUDA only): just the table of the two
 * tensor-core kernels of bf16 products, for timing a model's own shapes quickly. */
static int bench_gemm(const char *device, int threads, int N, int K, int tc_only)
{
    const sr_kernels *k = NULL;
    sr_status st = sr_kernels_select(device, &k);
    if (st) return fail(st, "bench gemm");
    if (threads > 0) k->set_threads(threads);
    char note[64];
    if (threads > 0) snprintf(note, sizeof note, "%d threads", threads);
    else snprintf(note, sizeof note, "default threads");
    if (tc_only && strcmp(k->name, "cuda")) {
        fprintf(stderr, "srkit bench gemm: --tensor-cores needs --device cuda\n");
        return EXIT_USAGE;
    }
    int rc = tc_only ? 0 : bench_sgemm_shapes(k);
    if (!rc) rc = bench_gemm_op(k, N > 0 ? N : 4096, K > 0 ? K : 4096, note, tc_only);
    return rc;
}

/* ---- attention: the fused cache-indexed op against the unfused path ---------------------------- */

/* `srkit bench attn`: N streams, each with R query rows attending over L cached keys of its own
 * slot of a K and a V pool (f32, H query heads over G K/V heads of D): the op set's attn (one
 * call for all streams, each row reading its stream's keys in place) against the unfused path
 * a framework takes per stream and head: sgemm Q K^T into a score matrix, softmax, sgemm P V
 * (the table's sgemm: cuBLAS / OpenBLAS). Both compute the same function: the largest
 * difference of their outputs is printed with the times (median per call, the two timed in
 * turn after a warm-up). */
typedef struct {
    const sr_kernels *k;
    int N, R, L, H, G, D;
    float *q, *out, *out2, *scores;
    sr_kpool *K, *V;
    int64_t *lo, *hi, *pos;
    int *row0, *slot;
} bench_attn_case;

static sr_status attn_fused(const bench_attn_case *c)
{
    sr_kattn a = {.n_head = c->H, .n_kv_head = c->G, .head_dim = c->D,
                  .scale = 1.0f / sqrtf((float)c->D), .lo = c->lo, .hi = c->hi};
    sr_kbatch b = {.n_seq = c->N, .row0 = c->row0, .slot = c->slot, .pos = c->pos};
    return c->k->attn(&a, &b, c->q, c->H * c->D, c->K, c->V, 0, c->out, c->H * c->D);
}

static sr_status attn_unfused(const bench_attn_case *c)
{
    const sr_kernels *k = c->k;
    int HD = c->H * c->D, GD = c->G * c->D, rep = c->H / c->G;
    float scale = 1.0f / sqrtf((float)c->D);
    sr_status st = SR_OK;
    for (int s = 0; s < c->N && !st; s++) {
        const float *Ks = (const float *)c->K->data + (size_t)s * c->L * GD;
        const float *Vs = (const float *)c->V->data + (size_t)s * c->L * GD;
        const float *qs = c->q + (size_t)s * c->R * HD;
        float *os = c->out2 + (size_t)s * c->R * HD;
        for (int h = 0; h < c->H && !st; h++) {
            int g = h / rep;
            if ((st = k->sgemm(0, 1, c->R, c->L, c->D, scale, qs + h * c->D, HD, Ks + g * c->D, GD,
                               0.0f, c->scores, c->L)) ||
                (st = k->softmax(c->R, c->L, c->scores, c->L)) ||
                (st = k->sgemm(0, 0, c->R, c->D, c->L, 1.0f, c->scores, c->L, Vs + g * c->D, GD, 0.0f,
                               os + h * c->D, HD)))
                break;
        }
    }
    return st;
}

/* The attention forms --forms may name: SRKIT_CUDA_ATTN's values (sr_cuda_attn_form). */
static const char *const attn_form_names[] = {"narrow", "wide", "auto", "grouped", "split", "rows"};
#define ATTN_FORMS 6

/* The index of the len-byte word p among names[n], or -1. */
static int word_index(const char *const *names, int n, const char *p, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && !strncmp(names[i], p, len)) return i;
    return -1;
}

/* Set the CUDA attention form f (-1: leave it as it is). */
static void bench_attn_form(int f)
{
#ifdef SR_WITH_CUDA
    if (f >= 0) sr_cuda_attn_form(f);
#else
    (void)f;
#endif
}

/* One shape at N streams: the fused op in each of the nf forms (forms NULL: nf 1, the form in
 * use) and the unfused path, every rep of each interleaved; a line per form. */
static int bench_attn_one(const sr_kernels *k, int N, int R, int L, int H, int G, int D, int reps,
                          const int *forms, int nf)
{
    bench_attn_case c = {.k = k, .N = N, .R = R, .L = L, .H = H, .G = G, .D = D};
    size_t nq = (size_t)N * R * H * D;
    float *hq = malloc(nq * sizeof(float)), *ho = malloc(nq * sizeof(float)), *ho2 = malloc(nq * sizeof(float));
    float *hk = malloc((size_t)N * L * G * D * sizeof(float));
    c.lo = calloc((size_t)N * R, sizeof(int64_t));
    c.hi = malloc((size_t)N * R * sizeof(int64_t));
    c.pos = calloc((size_t)N, sizeof(int64_t));
    c.row0 = malloc(((size_t)N + 1) * sizeof(int));
    c.slot = malloc((size_t)N * sizeof(int));
    int rc = -1;
    sr_status st = SR_OK;
    if (!hq || !ho || !ho2 || !hk || !c.lo || !c.hi || !c.pos || !c.row0 || !c.slot) {
        fprintf(stderr, "srkit bench attn: out of memory\n");
        goto out;
    }
    uint64_t r = 12345;
    for (size_t i = 0; i < nq; i++) hq[i] = (float)((r = r * 6364136223846793005ULL + 1) >> 40) / (float)(1 << 24) - 0.5f;
    for (int s = 0; s <= N; s++) c.row0[s] = s * R;
    for (int s = 0; s < N; s++) c.slot[s] = s;
    for (size_t i = 0; i < (size_t)N * R; i++) c.hi[i] = L; /* every row: all L keys */
    c.q = k->alloc(nq * sizeof(float));
    c.out = k->alloc(nq * sizeof(float));
    c.out2 = k->alloc(nq * sizeof(float));
    c.scores = k->alloc((size_t)R * L * sizeof(float));
    if ((st = sr_kpool_create(k, SR_F32, 1, N, L, G * D, &c.K)) ||
        (st = sr_kpool_create(k, SR_F32, 1, N, L, G * D, &c.V))) {
        fail(st, "bench attn");
        goto out;
    }
    if (!c.q || !c.out || !c.out2 || !c.scores) {
        fprintf(stderr, "srkit bench attn: out of %s memory\n", k->name);
        goto out;
    }
    for (int kv = 0; kv < 2; kv++) {
        size_t n = (size_t)N * L * G * D;
        for (size_t i = 0; i < n; i++) hk[i] = (float)((r = r * 6364136223846793005ULL + 1) >> 40) / (float)(1 << 24) - 0.5f;
        if ((st = k->upload((kv ? c.V : c.K)->data, hk, n * sizeof(float)))) { fail(st, "bench attn"); goto out; }
    }
    if ((st = k->upload(c.q, hq, nq * sizeof(float)))) { fail(st, "bench attn"); goto out; }
    enum { MAXR = 64 };
    const int nv = (forms ? nf : 1) + 1; /* the fused op in each form, then unfused */
    double t[ATTN_FORMS + 1][MAXR], med[ATTN_FORMS + 1];
    reps = reps < 1 ? 1 : reps > MAXR ? MAXR : reps;
    for (int rr = -1; rr < reps; rr++)
        for (int v = 0; v < nv; v++) {
            const int unf = v == nv - 1;
            if (!unf) bench_attn_form(forms ? forms[v] : -1);
            double t0 = now_s();
            st = unf ? attn_unfused(&c) : attn_fused(&c);
            if (!st) st = k->sync();
            if (st) { fail(st, unf ? "bench attn (unfused)" : "bench attn (fused)"); goto out; }
            if (rr >= 0) t[v][rr] = now_s() - t0;
        }
    for (int v = 0; v < nv; v++) {
        qsort(t[v], (size_t)reps, sizeof t[v][0], cmp_double);
        med[v] = reps % 2 ? t[v][reps / 2] : 0.5 * (t[v][reps / 2 - 1] + t[v][reps / 2]);
    }
    if ((st = k->download(ho2, c.out2, nq * sizeof(float)))) {
        fail(st, "bench attn");
        goto out;
    }
    for (int v = 0; v < nv - 1; v++) {
        /* each form's output once more, against the unfused one */
        bench_attn_form(forms ? forms[v] : -1);
        if ((st = attn_fused(&c)) || (st = k->download(ho, c.out, nq * sizeof(float)))) {
            fail(st, "bench attn");
            goto out;
        }
        double diff = 0;
        for (size_t i = 0; i < nq; i++) diff = fmax(diff, fabs((double)ho[i] - (double)ho2[i]));
        /* the keys and values the fused call must read at least once (f32 pools) */
        double gbs = 2.0 * (double)N * L * G * D * sizeof(float) / med[v] / 1e9;
        printf("%7d %5d %6d %3d/%-3d %4d | %10.3f %10.3f | %7.2fx | %8.1f | %.2e", N, R, L, H, G, D,
               med[v] * 1e3, med[nv - 1] * 1e3, med[nv - 1] / med[v], gbs, diff);
        printf(forms ? " | %s\n" : "\n", forms ? attn_form_names[forms[v]] : "");
    }
    rc = 0;
out:
    sr_kpool_free(k, c.K);
    sr_kpool_free(k, c.V);
    k->free(c.q);
    k->free(c.out);
    k->free(c.out2);
    k->free(c.scores);
    free(hq); free(ho); free(ho2); free(hk);
    free(c.lo); free(c.hi); free(c.pos); free(c.row0); free(c.slot);
    return rc;
}

/* keys > 0: every shape attends over that many keys instead of its own (the forms of the CUDA
 * kernel compared over range lengths) */
static int bench_attn(const char *device, int threads, const int *streams, int n_streams, int keys,
                      const int *forms, int nf)
{
    const sr_kernels *k = NULL;
    sr_status st = sr_kernels_select(device, &k);
    if (st) return fail(st, "bench attn");
    if (threads > 0) k->set_threads(threads);
    /* per family: rows a stream brings per step, keys it attends, heads / K-V heads, head dim,
     * most streams timed (0: any; one 30 s encoder window is 1,500 rows) */
    static const struct { const char *what; int R, L, H, G, D, nmax; } shapes[] = {
        {"FastConformer [70,1] (plain scores; the op adds rel-pos)", 2, 72, 8, 8, 128, 0},
        {"Whisper tiny decoder cross-attention (one token over 1500 frames)", 1, 1500, 6, 6, 64, 0},
        {"Voxtral mini-4b decoder (GQA 32 / 8, one token over 750 keys)", 1, 750, 32, 8, 128, 0},
        {"Voxtral mini-4b encoder (4 rows a chunk over 750 keys; here all over the same 750)", 4, 750,
         32, 32, 64, 0},
        {"Whisper tiny encoder (a 30 s window: 1500 rows over 1500 frames; 1 stream only)", 1500, 1500,
         6, 6, 64, 1},
    };
    printf("attention on %s: the fused op (one call, keys read in place) vs unfused (per stream and\n"
           "head: sgemm Q K^T, softmax, sgemm P V); f32 pools, median ms per call; fused GB/s: the\n"
           "streams' keys and values (read at least once) per fused call time\n", k->name);
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !rc; i++) {
        printf("\n%s\nstreams  rows   keys heads  dim |  fused ms  unfused ms | unfused/fused | "
               "fused GB/s | max |diff|%s\n", shapes[i].what, forms ? " | form" : "");
        for (int j = 0; j < n_streams && !rc; j++)
            if (!shapes[i].nmax || streams[j] <= shapes[i].nmax)
                rc = bench_attn_one(k, streams[j], shapes[i].R, keys > 0 ? keys : shapes[i].L,
                                    shapes[i].H, shapes[i].G, shapes[i].D, 7, forms, nf);
    }
    bench_attn_form(forms ? 2 : -1); /* back to the form by size */
    return rc;
}

/* ---- streaming benchmark: one model, one (possibly concatenated) audio stream ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Appends v to the growing array *a of *n values (capacity *cap): 0, or -1 out of memory. */
static int lat_push(int64_t **a, size_t *n, size_t *cap, int64_t v)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        int64_t *p = realloc(*a, c * sizeof *p);
        if (!p) return -1;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return 0;
}

/* Nearest-rank percentile (q in (0, 1]) of n sorted values: the smallest value with at least
 * q * n values at or below it. */
static int64_t bench_pct(const int64_t *sorted, size_t n, double q)
{
    size_t r = (size_t)ceil(q * (double)n);
    return sorted[(r ? r : 1) - 1];
}

/* p50 and p99 of n latencies in ns (sorted here), in ms; 0 and 0 when there are none. */
static void bench_p50_p99(int64_t *lat, size_t n, double *p50, double *p99)
{
    *p50 = *p99 = 0;
    if (!n) return;
    qsort(lat, n, sizeof *lat, cmp_i64);
    *p50 = bench_pct(lat, n, 0.5) / 1e6;
    *p99 = bench_pct(lat, n, 0.99) / 1e6;
}

/* An engine's steps in --realtime (n wall times in ns, sorted here, and their stream counts):
 * time p50 / p99 / max in ms, streams a step mean and max; all 0 when there are none. */
typedef struct {
    size_t n;
    double p50, p99, max, k_mean;
    int64_t k_max;
} bench_steps;

static bench_steps bench_steps_of(int64_t *ns, const int64_t *k, size_t n)
{
    bench_steps r = {.n = n};
    if (!n) return r;
    double ks = 0;
    for (size_t i = 0; i < n; i++) {
        ks += (double)k[i];
        if (k[i] > r.k_max) r.k_max = k[i];
    }
    r.k_mean = ks / (double)n;
    bench_p50_p99(ns, n, &r.p50, &r.p99);
    r.max = (double)ns[n - 1] / 1e6;
    return r;
}

typedef struct {
    run_opts o;
    const char *model;
    const char **audio; /* [n_audio] files, concatenated in order */
    int n_audio;
    int repeat;         /* runs of the whole stream; the fastest is reported */
    int per_chunk;      /* include every chunk's audio time and compute time */
    int max_ms;         /* > 0: only the first max_ms of the concatenated audio */
    int loop;           /* feed the concatenated audio again and again until max_ms */
    int streams;        /* > 0: that many concurrent streams (bench_multi) */
    int separate;       /* with streams: solo streams on threads instead of one engine */
    sr_config *stream_cfg; /* owns the strings of o.sc when --stream was given */
    const char *variants; /* --cuda-variants: the list as given (bench_variants_parse) */
} bench_args;

/* --cuda-variants: settings of the CUDA table (kernels.h) a one-stream run is repeated under,
 * on the one loaded model, interleaved (run r of every variant before run r + 1 of any). Each
 * variant starts from the defaults (no overlap, no recording, the attention form by size, 16
 * GEMM columns a block, no cp.async staging) and turns on its '+'-joined terms. */
#define BENCH_VARIANTS 12
typedef struct {
    char name[48];
    int pdl, graph, attn, cols, async; /* sr_cuda_pdl, _graphs, _attn_form, _gemm_cols, _gemm_async */
} bench_variant;

/* "plain,pdl+graph,..." into v[] (at most BENCH_VARIANTS); the count, or -1 after a message
 * naming the unknown term. */
static int bench_variants_parse(const char *list, bench_variant *v)
{
    /* besides the attention forms (attn_form_names, each its sr_cuda_attn_form value) */
    static const char *const terms[] = {"plain", "pdl", "graph", "cols8", "replay", "async"};
    int n = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (n == BENCH_VARIANTS || !len || len >= sizeof v[0].name) {
            fprintf(stderr, "srkit bench: --cuda-variants: %s\n", n == BENCH_VARIANTS ?
                    "at most 12 variants" : "an empty or over-long variant");
            return -1;
        }
        bench_variant *x = &v[n++];
        memcpy(x->name, p, len);
        x->name[len] = 0;
        x->pdl = x->graph = x->cols = x->async = 0;
        x->attn = 2;
        for (const char *t = x->name; *t;) {
            const size_t tl = strcspn(t, "+");
            const int form = word_index(attn_form_names, ATTN_FORMS, t, tl),
                      k = word_index(terms, (int)(sizeof terms / sizeof terms[0]), t, tl);
            if (form < 0 && k < 0) {
                fprintf(stderr, "srkit bench: --cuda-variants: \"%.*s\" unknown (known: plain, pdl, "
                        "graph, replay, cols8, async and the attention forms narrow, wide, auto, grouped, "
                        "split, rows, joined by +)\n", (int)tl, t);
                return -1;
            }
            if (form >= 0) x->attn = form;
            x->pdl |= k == 1;
            if (k == 2 || k == 4) x->graph = k == 2 ? 1 : 2; /* sr_cuda_graphs: captured / replayed */
            if (k == 3) x->cols = 3; /* sr_cuda_gemm_cols: 8 columns at up to 16 rows */
            x->async |= k == 5;      /* sr_cuda_gemm_async: staged operands through cp.async */
            t += tl + (t[tl] == '+');
        }
        p += len + (p[len] == ',');
    }
    return n;
}

/* The CUDA table's settings of variant v (no model op runs meanwhile). */
static void bench_variant_apply(const bench_variant *v)
{
    bench_attn_form(v->attn);
#ifdef SR_WITH_CUDA
    sr_cuda_pdl(v->pdl);
    sr_cuda_graphs(v->graph);
    sr_cuda_gemm_cols(v->cols);
    sr_cuda_gemm_async(v->async);
#endif
}

/* --stream '{"strategy": "whisperrt", "chunk_ms": 100, ...}': the "stream" object of an
 * experiment config (docs/config.md), checked by the config parser itself by wrapping it in a
 * minimal config, so the field names, types and ranges are exactly those of `srkit eval`. */
static int bench_parse_stream(const char *text, bench_args *b)
{
    cJSON *j = cJSON_Parse(text);
    if (!cJSON_IsObject(j)) {
        fprintf(stderr, "srkit bench: --stream needs a JSON object such as "
                        "'{\"strategy\": \"whisperrt\", \"chunk_ms\": 100}', got: %s\n", text);
        cJSON_Delete(j);
        return -1;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *mdl = cJSON_AddObjectToObject(root, "model"), *data = cJSON_AddObjectToObject(root, "data");
    cJSON_AddStringToObject(root, "name", "bench");
    cJSON_AddStringToObject(mdl, "path", "-");
    cJSON_AddStringToObject(data, "path", "-");
    cJSON_AddItemToObject(root, "stream", j);
    char *wrapped = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!wrapped) { fprintf(stderr, "srkit bench: out of memory\n"); return -1; }
    sr_config *c = NULL;
    sr_status st = sr_config_parse(wrapped, "--stream", &c);
    free(wrapped);
    if (st) { fail(st, "bench --stream"); return -1; }
    for (size_t i = 0; i < sr_config_n_warnings(c); i++)
        fprintf(stderr, "srkit bench: warning: %s\n", sr_config_warning(c, i));
    sr_config_free(b->stream_cfg);
    b->stream_cfg = c;
    b->o.sc = sr_config_run(c, 0)->stream;
    return 0;
}

/* Threads actually used: the requested count, else OpenBLAS's default (its environment
 * variable, else one per online core). */
static int bench_threads(const run_opts *o)
{
    if (o->mo.threads > 0) return o->mo.threads;
    const char *e = getenv("OPENBLAS_NUM_THREADS");
    if (e && atoi(e) > 0) return atoi(e);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Concatenate the audio files at 16 kHz, cut to --max-ms when given. */
static int bench_load_audio(const bench_args *b, sr_audio *all)
{
    memset(all, 0, sizeof *all);
    all->sample_rate = 16000;
    for (int i = 0; i < b->n_audio; i++) {
        sr_audio a = {0};
        sr_status st = sr_audio_load(b->audio[i], 16000, &a);
        if (st) { sr_audio_free(all); return fail(st, b->audio[i]); }
        float *p = realloc(all->samples, (all->n + a.n) * sizeof(float));
        if (!p) {
            sr_audio_free(&a);
            sr_audio_free(all);
            fprintf(stderr, "srkit bench: out of memory concatenating audio\n");
            return 1;
        }
        memcpy(p + all->n, a.samples, a.n * sizeof(float));
        all->samples = p;
        all->n += a.n;
        sr_audio_free(&a);
    }
    size_t cap = (size_t)b->max_ms * 16;
    if (b->max_ms > 0 && all->n > cap && !b->loop) all->n = cap;
    return 0;
}

/* The run's settings at the head of a benchmark's JSON object: model, device, threads, audio
 * files and the stream config (null / 0: backend default). */
static void bench_json_run(cJSON *j, const bench_args *b, const sr_model *m)
{
    const run_opts *o = &b->o;
    const sr_stream_config *sc = &o->sc;
    cJSON_AddStringToObject(j, "model", b->model);
    cJSON_AddStringToObject(j, "arch", sr_model_arch(m));
    cJSON_AddStringToObject(j, "device", o->mo.device ? o->mo.device : "cpu");
    cJSON_AddNumberToObject(j, "threads", bench_threads(o));
    cJSON_AddStringToObject(j, "precision", o->mo.precision ? o->mo.precision : "f32");
    cJSON *files = cJSON_AddArrayToObject(j, "audio");
    for (int i = 0; i < b->n_audio; i++) cJSON_AddItemToArray(files, cJSON_CreateString(b->audio[i]));
    if (sc->strategy) cJSON_AddStringToObject(j, "strategy", sc->strategy);
    else cJSON_AddNullToObject(j, "strategy");
    if (sc->decoder) cJSON_AddStringToObject(j, "decoder", sc->decoder);
    else cJSON_AddNullToObject(j, "decoder");
    cJSON_AddNumberToObject(j, "chunk_ms", sc->chunk_ms);
    cJSON_AddNumberToObject(j, "first_chunk_ms", sc->first_chunk_ms);
    cJSON_AddNumberToObject(j, "beam", sc->beam);
    cJSON_AddNumberToObject(j, "stability_n", sc->stability_n);
    cJSON_AddBoolToObject(j, "decoder_kv_cache", sc->decoder_kv_cache);
    cJSON_AddBoolToObject(j, "repetition_guard", sc->repetition_guard);
    cJSON_AddNumberToObject(j, "max_seconds", sc->max_seconds);
    cJSON_AddNumberToObject(j, "final_steps", sc->final_steps);
    if (sc->cache_dtype) cJSON_AddStringToObject(j, "cache_dtype", sc->cache_dtype);
    else cJSON_AddNullToObject(j, "cache_dtype");
    cJSON *r = NULL; /* what the unset fields became for this model file */
    if (sr_defaults_json(m, sc, &r) == SR_OK) cJSON_AddItemToObject(j, "resolved", r);
}

/* The same as the first line of the text output. */
static void bench_print_run(const bench_args *b, const sr_model *m)
{
    const sr_stream_config *sc = &b->o.sc;
    sr_defaults d;
    if (sr_model_defaults(m, SR_USE_LIVE, sc, &d) != SR_OK) memset(&d, 0, sizeof d);
    char chunk[32] = "the backend's";
    if (d.chunk_ms > 0) snprintf(chunk, sizeof chunk, "%d ms", d.chunk_ms);
    printf("model %s (%s), strategy %s%s, decoder %s%s, chunk %s%s, %d thread(s)\n", b->model,
           sr_model_arch(m), d.strategy ? d.strategy : "-", sc->strategy ? "" : " (default)",
           d.decoder ? d.decoder : "-", sc->decoder ? "" : " (default)", chunk,
           sc->chunk_ms ? "" : " (default)", bench_threads(&b->o));
}

/* Print j as one line and free it. */
static void bench_print_json(cJSON *j)
{
    char *txt = sr_json_print(j, 0);
    printf("%s\n", txt ? txt : "{}");
    free(txt);
    cJSON_Delete(j);
}

/* SRKIT_PROFILE=1 / sync / device (kernels/profile.c): the op calls of the timed part, per op,
 * to stderr (stdout keeps the results / the JSON object): calls, calls per step (steps: engine
 * steps, or chunks of the one stream), host ms in all, us per call, share of the total (device:
 * the device's ms, us a call and share beside the host's); then the gemm calls by weight shape
 * and row count, with the weight's bytes read a second (sync: the wait's cost included). */
/* The time the profile tables sort and share by: the device's (SRKIT_PROFILE=device), else the
 * host's; set by bench_print_profile before it sorts. */
static int prof_by_device;
#define PROF_TIME(x) (prof_by_device ? (x)->device_seconds : (x)->seconds)
/* qsort comparators of profile entries and classes: the most time first */
#define PROF_CMP(name, type)                                                                   \
    static int name(const void *a, const void *b)                                              \
    {                                                                                          \
        const double x = PROF_TIME((const type *)a), y = PROF_TIME((const type *)b);           \
        return (x < y) - (x > y);                                                              \
    }
PROF_CMP(cmp_prof, sr_kprof_entry)
PROF_CMP(cmp_prof_gemm, sr_kprof_gemm)
PROF_CMP(cmp_prof_attn, sr_kprof_attn)

#define BENCH_PROF_OPS 64
#define BENCH_PROF_GEMMS 128
#define BENCH_PROF_ATTNS 64

/* Profile entries gathered over several spans (the fed chunks of every run, or the finishes),
 * merged by op and by gemm shape class. */
typedef struct {
    sr_kprof_entry e[BENCH_PROF_OPS];
    int n;
    sr_kprof_gemm g[BENCH_PROF_GEMMS];
    int ng;
    sr_kprof_attn a[BENCH_PROF_ATTNS];
    int na;
    double wall; /* seconds of the spans (0: not measured) */
} bench_prof;

/* Adds the calls since the last reset to p and wall seconds to its span, then resets the
 * counters. */
static void bench_prof_take(bench_prof *p, double wall)
{
    p->wall += wall;
    sr_kprof_entry e[BENCH_PROF_OPS];
    int n = SR_MIN(sr_kernels_profile_read(e, BENCH_PROF_OPS), BENCH_PROF_OPS);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < p->n && strcmp(p->e[j].op, e[i].op)) j++;
        if (j == p->n) { /* a new op: taken whole */
            if (p->n < BENCH_PROF_OPS) p->e[p->n++] = e[i];
            continue;
        }
        p->e[j].calls += e[i].calls;
        p->e[j].seconds += e[i].seconds;
        p->e[j].bytes += e[i].bytes;
        p->e[j].timed += e[i].timed;
        p->e[j].device_seconds += e[i].device_seconds;
    }
    static sr_kprof_gemm g[BENCH_PROF_GEMMS];
    n = SR_MIN(sr_kernels_profile_gemm_read(g, BENCH_PROF_GEMMS), BENCH_PROF_GEMMS);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < p->ng && !(p->g[j].n == g[i].n && p->g[j].k == g[i].k && p->g[j].dtype == g[i].dtype &&
                              p->g[j].mul == g[i].mul && p->g[j].m_lo == g[i].m_lo))
            j++;
        if (j == p->ng) { /* a new class: taken whole */
            if (p->ng < BENCH_PROF_GEMMS) p->g[p->ng++] = g[i];
            continue;
        }
        p->g[j].calls += g[i].calls;
        p->g[j].rows += g[i].rows;
        p->g[j].seconds += g[i].seconds;
        p->g[j].timed += g[i].timed;
        p->g[j].device_seconds += g[i].device_seconds;
    }
    static sr_kprof_attn at[BENCH_PROF_ATTNS];
    n = SR_MIN(sr_kernels_profile_attn_read(at, BENCH_PROF_ATTNS), BENCH_PROF_ATTNS);
    for (int i = 0; i < n; i++) {
        const sr_kprof_attn *x = &at[i];
        int j = 0;
        while (j < p->na && !(p->a[j].n_head == x->n_head && p->a[j].n_kv_head == x->n_kv_head &&
                              p->a[j].head_dim == x->head_dim && p->a[j].rel == x->rel &&
                              p->a[j].k_dtype == x->k_dtype && p->a[j].v_dtype == x->v_dtype &&
                              p->a[j].m_lo == x->m_lo && p->a[j].k_lo == x->k_lo))
            j++;
        if (j == p->na) { /* a new class: taken whole */
            if (p->na < BENCH_PROF_ATTNS) p->a[p->na++] = *x;
            continue;
        }
        p->a[j].calls += x->calls;
        p->a[j].rows += x->rows;
        p->a[j].keys += x->keys;
        p->a[j].kv_bytes += x->kv_bytes;
        p->a[j].seconds += x->seconds;
        p->a[j].timed += x->timed;
        p->a[j].device_seconds += x->device_seconds;
    }
    sr_kernels_profile_reset();
}

/* A row- or key-count class [lo, hi] as text: "1", "2-4", "257+" */
static const char *class_text(char *r, size_t n, int lo, int hi)
{
    if (lo == hi) snprintf(r, n, "%d", lo);
    else if (hi == INT_MAX) snprintf(r, n, "%d+", lo);
    else snprintf(r, n, "%d-%d", lo, hi);
    return r;
}

/* A class row's last columns: time a call (t seconds over c calls), the GB read a second
 * (bytes over t; rate: the mode's time includes the device's) and its share of total. */
static void class_tail(double t, double c, double bytes, int rate, double total)
{
    fprintf(stderr, " %9.2f", c > 0 ? t * 1e6 / c : 0.0);
    if (rate && t > 0) fprintf(stderr, " %9.0f", bytes / t * 1e-9);
    else fprintf(stderr, " %9s", "");
    fprintf(stderr, " %5.1f%%\n", total > 0 ? 100.0 * t / total : 0.0);
}

/* The gemm classes of p, the most time first: per step calls, rows a call, time a call, the
 * weight's GB read a second (sync and device), share of the gemm time. */
static void bench_print_gemms(const bench_prof *p, double steps, int dev, int sync)
{
    if (!p->ng) return;
    static sr_kprof_gemm g[BENCH_PROF_GEMMS];
    memcpy(g, p->g, (size_t)p->ng * sizeof g[0]);
    qsort(g, (size_t)p->ng, sizeof g[0], cmp_prof_gemm);
    double total = 0;
    for (int i = 0; i < p->ng; i++) total += PROF_TIME(&g[i]);
    fprintf(stderr, "gemm by weight (n x k, type) and rows: %s\n",
            dev ? "device time" : sync ? "each call waited for" : "host time inside the calls");
    fprintf(stderr, "%-26s %-9s %10s %8s %9s %9s %6s\n", "weight", "rows", "per step", "rows/call", "us/call",
            dev || sync ? "GB/s" : "", "share");
    for (int i = 0; i < p->ng; i++) {
        char w[64], r[24];
        snprintf(w, sizeof w, "%d x %d %s%s", g[i].n, g[i].k, sr_dtype_name(g[i].dtype),
                 g[i].mul == SR_KMUL_BF16 ? "/bf16" : "");
        class_text(r, sizeof r, g[i].m_lo, g[i].m_hi);
        const double c = dev ? (double)g[i].timed : (double)g[i].calls;
        fprintf(stderr, "%-26s %-9s %10.1f %8.1f", w, r, steps > 0 ? (double)g[i].calls / steps : 0.0,
                g[i].calls ? (double)g[i].rows / (double)g[i].calls : 0.0);
        class_tail(PROF_TIME(&g[i]), c, (double)g[i].weight_bytes * c, dev || sync, total);
    }
}

/* The attn classes of p, the most time first: per step calls, rows a call, keys a row, time a
 * call, K and V bytes named by the rows' keys a second (each row reading its keys once: reads
 * shared by rows or heads make the real traffic smaller), share of the attn time. */
static void bench_print_attns(const bench_prof *p, double steps, int dev, int sync)
{
    if (!p->na) return;
    static sr_kprof_attn a[BENCH_PROF_ATTNS];
    memcpy(a, p->a, (size_t)p->na * sizeof a[0]);
    qsort(a, (size_t)p->na, sizeof a[0], cmp_prof_attn);
    double total = 0;
    for (int i = 0; i < p->na; i++) total += PROF_TIME(&a[i]);
    fprintf(stderr, "attn by heads (query / K-V heads x width, pools), rows and keys a row: %s; GB/s of the "
            "K and V rows each row's keys name\n",
            dev ? "device time" : sync ? "each call waited for" : "host time inside the calls");
    fprintf(stderr, "%-30s %-9s %-10s %10s %9s %9s %9s %9s %6s\n", "heads", "rows", "keys", "per step", "rows/call",
            "keys/row", "us/call", dev || sync ? "GB/s" : "", "share");
    for (int i = 0; i < p->na; i++) {
        char h[64], r[24], kr[24];
        snprintf(h, sizeof h, "%d/%d x %d%s %s/%s", a[i].n_head, a[i].n_kv_head, a[i].head_dim,
                 a[i].rel ? " rel" : "", sr_dtype_name(a[i].k_dtype), sr_dtype_name(a[i].v_dtype));
        const double c = dev ? (double)a[i].timed : (double)a[i].calls;
        fprintf(stderr, "%-30s %-9s %-10s %10.1f %9.1f %9.1f", h,
                class_text(r, sizeof r, a[i].m_lo, a[i].m_hi), class_text(kr, sizeof kr, a[i].k_lo, a[i].k_hi),
                steps > 0 ? (double)a[i].calls / steps : 0.0,
                a[i].calls ? (double)a[i].rows / (double)a[i].calls : 0.0,
                a[i].rows ? (double)a[i].keys / (double)a[i].rows : 0.0);
        /* bytes of the timed calls: the calls' mean times the timed count */
        class_tail(PROF_TIME(&a[i]), c, a[i].calls ? a[i].kv_bytes * c / (double)a[i].calls : 0.0, dev || sync,
                   total);
    }
}

/* Prints the op profile p, or the counters since the last reset when p is NULL (over wall
 * seconds); steps: the divisor of "per step", what they are (e.g. "fed chunks"). */
static void bench_print_profile(const bench_prof *p, double steps, const char *what, double wall)
{
    const char *mode = getenv("SRKIT_PROFILE");
    if (!mode || !*mode || !strcmp(mode, "0")) return;
    const int dev = !strcmp(mode, "device"), sync = !strcmp(mode, "sync");
    prof_by_device = dev;
    static bench_prof all;
    if (!p) {
        memset(&all, 0, sizeof all);
        bench_prof_take(&all, wall);
        p = &all;
    }
    sr_kprof_entry e[BENCH_PROF_OPS];
    int n = p->n;
    memcpy(e, p->e, (size_t)n * sizeof e[0]);
    qsort(e, (size_t)n, sizeof e[0], cmp_prof);
    double total = 0, dtotal = 0;
    for (int i = 0; i < n; i++) {
        total += e[i].seconds;
        dtotal += e[i].device_seconds;
    }
    fprintf(stderr, "op profile (SRKIT_PROFILE=%s: %s), %.0f %s\n", mode,
            dev ? "host time inside each call, and the device's time between marks around it (no "
                  "overlap of neighbours, no recording)"
            : sync ? "each call waited for: its device time included"
                   : "host time inside each call; copies wait for queued work",
            steps, what);
    fprintf(stderr, "%-14s %10s %10s %10s %9s %6s", "op", "calls", "per step", "total ms", "us/call", "share");
    if (dev) fprintf(stderr, " %10s %9s %6s", "device ms", "dev us", "share");
    fprintf(stderr, " %12s\n", "bytes/step");
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "%-14s %10llu %10.1f %10.1f %9.2f %5.1f%%", e[i].op, (unsigned long long)e[i].calls,
                steps > 0 ? (double)e[i].calls / steps : 0.0, e[i].seconds * 1e3,
                e[i].seconds * 1e6 / (double)e[i].calls, total > 0 ? 100.0 * e[i].seconds / total : 0.0);
        if (dev && e[i].timed)
            fprintf(stderr, " %10.1f %9.2f %5.1f%%", e[i].device_seconds * 1e3,
                    e[i].device_seconds * 1e6 / (double)e[i].timed,
                    dtotal > 0 ? 100.0 * e[i].device_seconds / dtotal : 0.0);
        else if (dev)
            fprintf(stderr, " %10s %9s %6s", "", "", "");
        if (e[i].bytes) fprintf(stderr, " %12.0f", steps > 0 ? (double)e[i].bytes / steps : 0.0);
        fputc('\n', stderr);
    }
    /* what the ops' times leave of the wall: the host outside the ops (features, decoding
     * rules), or with SRKIT_PROFILE=1 the device's work not yet waited for; device: how much
     * of the wall the device spent in the ops */
    if (p->wall > 0 && steps > 0) {
        fprintf(stderr, "all ops %.3f ms a step of a wall of %.3f ms a step (%.1f %%)\n", total * 1e3 / steps,
                p->wall * 1e3 / steps, 100.0 * total / p->wall);
        if (dev)
            fprintf(stderr, "the device in the ops %.3f ms a step (%.1f %% of the wall)\n", dtotal * 1e3 / steps,
                    100.0 * dtotal / p->wall);
    }
    bench_print_gemms(p, steps, dev, sync);
    bench_print_attns(p, steps, dev, sync);
}

/* The CUDA table's recording counters (kernels.h, sr_cuda_graph_counts; all 0 without CUDA),
 * so that a run reports its own: a snapshot before it and after, the difference added up over
 * a variant's runs. */
typedef struct {
    double updated, built, patched, timed, device_ms;
} bench_graphs;

static bench_graphs bench_graphs_now(void)
{
    bench_graphs g = {0};
#ifdef SR_WITH_CUDA
    sr_cuda_graph_stats gs;
    sr_cuda_graph_counts(&gs);
    g = (bench_graphs){(double)gs.updated, (double)gs.built, (double)gs.patched, (double)gs.timed,
                       gs.device_ms};
#endif
    return g;
}

/* *sum += (after - before) */
static void bench_graphs_add(bench_graphs *sum, const bench_graphs *before, const bench_graphs *after)
{
    sum->updated += after->updated - before->updated;
    sum->built += after->built - before->built;
    sum->patched += after->patched - before->patched;
    sum->timed += after->timed - before->timed;
    sum->device_ms += after->device_ms - before->device_ms;
}

/* The device memory figures: the peak, and what is held at the end split into weights, cache
 * pools and the rest (scratch: batch buffers, stream state); all 0 on the CPU. gr: the
 * recording counters of the runs reported. */
static void bench_json_gpu_mem(cJSON *j, const sr_memstats *ms, const bench_graphs *gr)
{
    cJSON_AddNumberToObject(j, "gpu_peak_bytes", (double)ms->gpu_peak_bytes);
    cJSON_AddNumberToObject(j, "gpu_live_bytes", (double)ms->gpu_live_bytes);
    size_t w, p, scratch;
    sr_memory_gpu_split(ms, &w, &p, &scratch);
    cJSON_AddNumberToObject(j, "gpu_weight_bytes", (double)w);
    cJSON_AddNumberToObject(j, "gpu_pool_bytes", (double)p);
    cJSON_AddNumberToObject(j, "gpu_scratch_bytes", (double)scratch);
#ifdef SR_WITH_CUDA
    /* with SRKIT_CUDA_GRAPH=1 / replay: the runs' recorded steps patched into their graph or
     * instantiated anew (many of the latter mean the recorded shapes keep changing), the
     * launches set anew (replayed), and the graphs' own device time: what a step's recorded
     * part costs the GPU */
    if (ms->gpu_live_bytes && sr_cuda_graphs(-1)) {
        cJSON *g = cJSON_AddObjectToObject(j, "cuda_graphs");
        if (g) {
            cJSON_AddNumberToObject(g, "updated", gr->updated);
            cJSON_AddNumberToObject(g, "built", gr->built);
            if (sr_cuda_graphs(-1) == 2) cJSON_AddNumberToObject(g, "patched_nodes", gr->patched);
            cJSON_AddNumberToObject(g, "timed", gr->timed);
            cJSON_AddNumberToObject(g, "device_ms_mean", gr->timed > 0 ? gr->device_ms / gr->timed : 0.0);
        }
    }
    /* with SRKIT_CUDA_PDL=1: launches overlapping the kernel ahead (so a figure says which) */
    if (ms->gpu_live_bytes) cJSON_AddBoolToObject(j, "cuda_pdl", sr_cuda_pdl(-1) == 1);
#endif
}

/* A one-stream run's fastest pass (bench_run): every chunk's compute, audio and model time. */
typedef struct {
    double best;          /* seconds; INFINITY before the first pass */
    double fed;           /* seconds of best's pass until its audio was fed (the rest: finish) */
    int64_t *c, *at, *mod; /* [n] */
    size_t n;
    char *text;           /* the pass's hypothesis */
    cJSON *runs;          /* every pass's seconds */
    bench_graphs graphs;  /* the recording counters of every pass */
} bench_best;

static void bench_best_free(bench_best *r)
{
    free(r->c);
    free(r->at);
    free(r->mod);
    free(r->text);
    cJSON_Delete(r->runs);
}

/* Keep stream s's just-finished pass of dt seconds (fed of them until its audio was fed) in r
 * if it is the fastest; -1 out of memory. */
static int bench_best_take(bench_best *r, const sr_stream *s, double dt, double fed)
{
    cJSON_AddItemToArray(r->runs, cJSON_CreateNumber(dt));
    if (dt >= r->best) return 0;
    const sr_timeline *tl = sr_stream_timeline(s);
    size_t n = tl->n ? tl->n : 1;
    free(r->c);
    free(r->at);
    free(r->mod);
    free(r->text);
    r->c = malloc(n * sizeof *r->c);
    r->at = malloc(n * sizeof *r->at);
    r->mod = malloc(n * sizeof *r->mod);
    r->text = strdup(sr_stream_hypothesis(s)->text);
    r->n = 0;
    if (!r->c || !r->at || !r->mod || !r->text) return -1;
    for (size_t i = 0; i < tl->n; i++) {
        r->c[i] = tl->entries[i].compute_ns;
        r->at[i] = tl->entries[i].audio_ms;
        r->mod[i] = tl->entries[i].model_ns;
    }
    r->n = tl->n;
    r->best = dt;
    r->fed = fed;
    return 0;
}

/* The report of one variant's fastest pass (vname NULL: no --cuda-variants): JSON or text. */
static int bench_report(const bench_args *b, sr_model *m, sr_stream *s, bench_best *r,
                        double audio_s, double load_s, const char *vname)
{
    const run_opts *o = &b->o;
    const size_t n_best = r->n;
    if (!n_best) { fprintf(stderr, "srkit bench: the stream wrote no timeline entry\n"); return 1; }
    int64_t *c = malloc(n_best * sizeof *c);
    if (!c) { fprintf(stderr, "srkit bench: out of memory\n"); return 1; }
    memcpy(c, r->c, n_best * sizeof *c);
    qsort(c, n_best, sizeof *c, cmp_i64);
    double sum = 0, best = r->best;
    for (size_t i = 0; i < n_best; i++) sum += (double)c[i];
    sr_memstats ms;
    sr_memory(m, s, &ms);
    double p50 = bench_pct(c, n_best, 0.5) / 1e6, p90 = bench_pct(c, n_best, 0.9) / 1e6,
           p99 = bench_pct(c, n_best, 0.99) / 1e6, mx = c[n_best - 1] / 1e6;
    /* Backend vs decoder split over the steady chunks (all but the first and the final when
     * there are three or more): [0] model p50, p90, max, [1] decoder p50, p90, max. */
    double split[2][3];
    {
        size_t lo = n_best >= 3 ? 1 : 0, hi = n_best >= 3 ? n_best - 1 : n_best, ns = hi - lo;
        for (int part = 0; part < 2; part++) {
            for (size_t i = 0; i < ns; i++)
                c[i] = part ? r->c[lo + i] - r->mod[lo + i] : r->mod[lo + i];
            qsort(c, ns, sizeof *c, cmp_i64);
            split[part][0] = bench_pct(c, ns, 0.5) / 1e6;
            split[part][1] = bench_pct(c, ns, 0.9) / 1e6;
            split[part][2] = c[ns - 1] / 1e6;
        }
    }
    free(c);
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        bench_json_run(j, b, m);
        if (vname) cJSON_AddStringToObject(j, "variant", vname);
        cJSON_AddNumberToObject(j, "audio_s", audio_s);
        cJSON_AddNumberToObject(j, "compute_s", best);
        cJSON_AddNumberToObject(j, "rtf", best / audio_s);
        cJSON_AddNumberToObject(j, "rtfx", audio_s / best);
        /* the pass split at the end of the feed: the chunks as the audio came, then the finish
         * (the last partial chunk and the end-of-stream work: Voxtral's right padding and flush
         * steps, which a model that never chooses EOS, as random weights, runs in full) */
        cJSON_AddNumberToObject(j, "fed_s", r->fed);
        cJSON_AddNumberToObject(j, "rtf_fed", r->fed / audio_s);
        cJSON_AddNumberToObject(j, "finish_ms", (best - r->fed) * 1e3);
        cJSON_AddNumberToObject(j, "n_chunks", (double)n_best);
        cJSON_AddNumberToObject(j, "chunk_ms_mean", sum / (double)n_best / 1e6);
        cJSON_AddNumberToObject(j, "chunk_ms_p50", p50);
        cJSON_AddNumberToObject(j, "chunk_ms_p90", p90);
        cJSON_AddNumberToObject(j, "chunk_ms_p99", p99);
        cJSON_AddNumberToObject(j, "chunk_ms_max", mx);
        cJSON_AddNumberToObject(j, "model_ms_p50", split[0][0]);
        cJSON_AddNumberToObject(j, "model_ms_p90", split[0][1]);
        cJSON_AddNumberToObject(j, "model_ms_max", split[0][2]);
        cJSON_AddNumberToObject(j, "decoder_ms_p50", split[1][0]);
        cJSON_AddNumberToObject(j, "decoder_ms_p90", split[1][1]);
        cJSON_AddNumberToObject(j, "decoder_ms_max", split[1][2]);
        cJSON_AddNumberToObject(j, "first_chunk_compute_ms", r->c[0] / 1e6);
        cJSON_AddNumberToObject(j, "final_chunk_compute_ms", r->c[n_best - 1] / 1e6);
        cJSON_AddNumberToObject(j, "load_s", load_s);
        cJSON_AddNumberToObject(j, "repeat", b->repeat);
        cJSON_AddItemToObject(j, "compute_s_runs", r->runs);
        r->runs = NULL;
        cJSON_AddNumberToObject(j, "weights_bytes", (double)ms.weight_bytes);
        cJSON_AddNumberToObject(j, "stream_state_bytes", (double)ms.stream_bytes);
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)ms.peak_rss_bytes);
        bench_json_gpu_mem(j, &ms, &r->graphs);
        cJSON_AddStringToObject(j, "text", r->text ? r->text : "");
        if (b->per_chunk) {
            cJSON *at = cJSON_AddArrayToObject(j, "chunk_audio_ms");
            cJSON *ct = cJSON_AddArrayToObject(j, "chunk_compute_ms");
            cJSON *cm = cJSON_AddArrayToObject(j, "chunk_model_ms");
            for (size_t i = 0; i < n_best; i++) {
                cJSON_AddItemToArray(at, cJSON_CreateNumber((double)r->at[i]));
                cJSON_AddItemToArray(ct, cJSON_CreateNumber(r->c[i] / 1e6));
                cJSON_AddItemToArray(cm, cJSON_CreateNumber(r->mod[i] / 1e6));
            }
        }
        bench_print_json(j);
    } else {
        if (vname) printf("== variant %s\n", vname);
        bench_print_run(b, m);
        printf("audio %.2f s (%d file(s)), %zu chunks, best of %d run(s)\n", audio_s, b->n_audio,
               n_best, b->repeat);
        printf("RTF %.4f (RTFx %.1f; %.4f until the audio was fed, then a finish of %.1f ms); "
               "per-chunk compute ms p50 %.3f p90 %.3f p99 %.3f max %.3f\n",
               best / audio_s, audio_s / best, r->fed / audio_s, (best - r->fed) * 1e3, p50, p90, p99, mx);
        printf("steady chunks: model (backend) ms p50 %.3f p90 %.3f max %.3f; decoder ms p50 "
               "%.3f p90 %.3f max %.3f\n", split[0][0], split[0][1], split[0][2], split[1][0],
               split[1][1], split[1][2]);
        printf("memory: weights %zu B, stream state %zu B, peak RSS %zu B, GPU peak %zu B\n",
               ms.weight_bytes, ms.stream_bytes, ms.peak_rss_bytes, ms.gpu_peak_bytes);
    }
    return 0;
}

/* Run the stream b->repeat times over the concatenated audio (the whole signal fed at once:
 * chunk boundaries depend only on the sample count, so this is the same computation as a live
 * feed, without the waiting) and print the fastest run, as one JSON object (--json) or as text. */
static int bench_run(const bench_args *b)
{
    const run_opts *o = &b->o;
    bench_variant var[BENCH_VARIANTS];
    const int nv = b->variants ? bench_variants_parse(b->variants, var) : 1;
    if (nv < 0) return EXIT_USAGE;
    sr_audio a;
    if (bench_load_audio(b, &a)) return 1;
    if (b->loop && !a.n) {
        fprintf(stderr, "srkit bench: --loop over empty audio\n");
        sr_audio_free(&a);
        return 1;
    }
    sr_model *m = NULL;
    double tl0 = now_s();
    if (open_model(b->model, o, &m)) { sr_audio_free(&a); return 1; }
    double load_s = now_s() - tl0;
    sr_stream *s = NULL;
    int rc = 0;
    /* --loop: max_ms of audio fed as successive copies of the (once loaded) files */
    size_t total = b->loop ? (size_t)b->max_ms * 16 : a.n;
    double audio_s = (double)total / 16000.0;
    bench_best res[BENCH_VARIANTS];
    for (int v = 0; v < nv; v++) res[v] = (bench_best){.best = INFINITY, .runs = cJSON_CreateArray()};
    sr_status st = sr_stream_open(m, &o->sc, &s);
    if (st) { rc = fail(st, "stream"); goto out; }
    /* SRKIT_PROFILE: only the timed runs, their fed chunks apart from their finishes (a
     * Voxtral finish decodes 49 steps: in one table they would swamp a steady chunk's ops) */
    static bench_prof fed_prof, fin_prof; /* (large: not on the stack) */
    memset(&fed_prof, 0, sizeof fed_prof);
    memset(&fin_prof, 0, sizeof fin_prof);
    double fed_chunks = 0;
    for (int r = 0; r < b->repeat; r++)
        for (int v = 0; v < nv; v++) {
            if (b->variants) bench_variant_apply(&var[v]);
            sr_stream_reset(s);
            sr_kernels_profile_reset(); /* the reset's ops are not the run's */
            const bench_graphs g0 = bench_graphs_now();
            double t0 = now_s();
            for (size_t fed = 0; !st && fed < total; fed += SR_MIN(a.n, total - fed))
                st = sr_stream_feed(s, a.samples, SR_MIN(a.n, total - fed));
            const double t_fed = now_s();
            bench_prof_take(&fed_prof, t_fed - t0);
            fed_chunks += (double)sr_stream_timeline(s)->n;
            if (st || (st = sr_stream_finish(s))) {
                rc = fail(st, b->audio[0]);
                goto out;
            }
            const double t_end = now_s(), dt = t_end - t0;
            const bench_graphs g1 = bench_graphs_now();
            bench_graphs_add(&res[v].graphs, &g0, &g1);
            bench_prof_take(&fin_prof, t_end - t_fed);
            if (bench_best_take(&res[v], s, dt, t_fed - t0)) {
                fprintf(stderr, "srkit bench: out of memory\n");
                rc = 1;
                goto out;
            }
        }
    for (int v = 0; v < nv && !rc; v++) {
        if (b->variants) bench_variant_apply(&var[v]); /* what the report's cuda_* fields say */
        rc = bench_report(b, m, s, &res[v], audio_s, load_s, b->variants ? var[v].name : NULL);
    }
    /* every setting is speed only (the same bits): the texts must agree */
    for (int v = 1; v < nv && !rc; v++)
        if (strcmp(res[v].text ? res[v].text : "", res[0].text ? res[0].text : "")) {
            fprintf(stderr, "srkit bench: variant %s's text differs from %s's (the settings "
                    "promise the same results)\n", var[v].name, var[0].name);
            rc = 1;
        }
    if (!rc) {
        bench_print_profile(&fed_prof, fed_chunks, "fed chunks (the steps)", 0);
        bench_print_profile(&fin_prof, (double)b->repeat * nv, "finishes (the steps)", 0);
    }
out:
    for (int v = 0; v < nv; v++) bench_best_free(&res[v]);
    sr_stream_close(s);
    sr_model_free(m);
    sr_audio_free(&a);
    return rc;
}


/* ---- many streams: one batched engine, or separate solo streams ----------------------------- */

/* Stream i of N hears the concatenated audio rotated by i * n / N samples (different content at
 * any moment, so the streams' decoders do not move in lockstep) and, in --realtime, joins
 * i * chunk / N later than stream 0 (desynchronized chunk boundaries). */
static float *bench_rotated(const sr_audio *a, int i, int N)
{
    float *p = malloc((a->n ? a->n : 1) * sizeof *p);
    if (!p) return NULL;
    size_t r = a->n ? (size_t)((double)a->n * i / N) % a->n : 0;
    memcpy(p, a->samples + r, (a->n - r) * sizeof *p);
    memcpy(p + (a->n - r), a->samples, r * sizeof *p);
    return p;
}

typedef struct {
    const sr_model *m;
    const sr_stream_config *sc;
    const float *audio;
    size_t n;
    sr_stream *s;
    sr_status st;
    char msg[512];
} bench_solo_job;

static void *bench_solo_main(void *arg)
{
    bench_solo_job *j = arg;
    j->st = sr_stream_feed(j->s, j->audio, j->n);
    if (!j->st) j->st = sr_stream_finish(j->s);
    if (j->st) snprintf(j->msg, sizeof j->msg, "%s", sr_last_error());
    return NULL;
}

/* One run of N streams (engine or solo streams made for it and freed after) on the loaded model
 * m, stream i hearing aud[i] (ap->n samples), and its report (--json: one object, with
 * "variant" vname when not NULL and "run" when --repeat asks for several); *text: stream 0's
 * final text (malloc'ed) on success. */
static int bench_multi_once(const bench_args *b, sr_model *m, const sr_audio *ap, float *const *aud,
                            const char *vname, int run, char **text)
{
    const run_opts *o = &b->o;
    int N = b->streams;
    const sr_audio a = *ap;
    int rc = 1;
    sr_engine *e = NULL;
    sr_stream **ss = calloc((size_t)N, sizeof *ss);
    bench_solo_job *jobs = calloc((size_t)N, sizeof *jobs);
    pthread_t *th = calloc((size_t)N, sizeof *th);
    double *start = calloc((size_t)N, sizeof *start);  /* join time (s after t0) */
    size_t *fed = calloc((size_t)N, sizeof *fed), *seen = calloc((size_t)N, sizeof *seen);
    int64_t *lat = NULL;  /* per chunk: compute ms (batch) or latency ms (realtime), in ns */
    size_t n_lat = 0;
    /* --realtime: the latencies of the chunks before each stream's final one (whose result
     * waits for the end-of-stream work: right padding, the decoder's flush) */
    int64_t *plat = NULL, *slat = NULL;
    size_t n_plat = 0, plat_cap = 0, n_slat = 0, slat_cap = 0;
    /* --realtime: the engine's steps that ran chunks: their wall times (ns) and stream counts,
     * all of them and those of the steady window (started 1.1 s or more after t0 and ending
     * 1 s or more before the streams' audio ends), and the wall they took together */
    int64_t *step_ns = NULL, *step_k = NULL, *sstep_ns = NULL, *sstep_k = NULL;
    size_t n_step = 0, step_cap = 0, n_stepk = 0, step_kcap = 0;
    size_t n_sstep = 0, sstep_cap = 0, n_sstepk = 0, sstep_kcap = 0;
    double busy = 0;
    char *text0 = NULL;
    sr_status st = SR_OK;
    if (!ss || !jobs || !th || !start || !fed || !seen) { fprintf(stderr, "srkit bench: out of memory\n"); goto out; }
    double audio_s = (double)a.n / 16000.0, t0 = 0, wall = 0;
    double end_lag = 0; /* --realtime: the longest wait for a final hypothesis after the audio ended */
    double topen = now_s(), open_s = 0; /* the engine / streams made and opened: not in wall */
    bench_graphs g0 = {0}, graphs = {0}; /* the recording counters at t0; the run's own */
    if (b->separate) {
        for (int i = 0; i < N; i++)
            if ((st = sr_stream_open(m, &o->sc, &ss[i]))) { rc = fail(st, "stream"); goto out; }
        open_s = now_s() - topen;
        sr_kernels_profile_reset();
        g0 = bench_graphs_now();
        t0 = now_s();
        int made = 0;
        for (int i = 0; i < N; i++) {
            jobs[i] = (bench_solo_job){.m = m, .sc = &o->sc, .audio = aud[i], .n = a.n, .s = ss[i]};
            if (pthread_create(&th[i], NULL, bench_solo_main, &jobs[i])) break;
            made++;
        }
        for (int i = 0; i < made; i++) pthread_join(th[i], NULL);
        wall = now_s() - t0;
        {
            const bench_graphs g1 = bench_graphs_now();
            bench_graphs_add(&graphs, &g0, &g1);
        }
        if (made < N) { fprintf(stderr, "srkit bench: cannot start %d threads\n", N); goto out; }
        for (int i = 0; i < N; i++)
            if (jobs[i].st) { fprintf(stderr, "srkit bench: stream %d: %s\n", i, jobs[i].msg); goto out; }
    } else {
        if ((st = sr_engine_create(m, &o->sc, N, &e))) { rc = fail(st, "engine"); goto out; }
        for (int i = 0; i < N; i++)
            if ((st = sr_engine_open(e, &ss[i]))) { rc = fail(st, "stream"); goto out; }
        open_s = now_s() - topen;
        sr_kernels_profile_reset();
        g0 = bench_graphs_now();
        t0 = now_s();
        if (!b->o.realtime) {
            for (int i = 0; i < N && !st; i++) {
                st = sr_stream_feed(ss[i], aud[i], a.n);
                if (!st) st = sr_stream_finish(ss[i]);
            }
            if (!st) st = sr_engine_drain(e);
        } else {
            /* real time: every stream receives what its clock says has been spoken */
            size_t lat_cap = 0;
            for (int i = 0; i < N; i++) start[i] = 0.1 * i / N; /* within 100 ms */
            int finished = 0;
            while (!st && finished < N) {
                double now = now_s() - t0;
                for (int i = 0; i < N && !st; i++) {
                    if (fed[i] == a.n) continue;
                    double t = now - start[i];
                    size_t want = t <= 0 ? 0 : SR_MIN(a.n, (size_t)(t * 16000.0));
                    if (want > fed[i]) {
                        st = sr_stream_feed(ss[i], aud[i] + fed[i], want - fed[i]);
                        fed[i] = want;
                        if (!st && fed[i] == a.n) st = sr_stream_finish(ss[i]);
                    }
                }
                if (st) break;
                int k = 0;
                const double began = now_s() - t0;
                if ((st = sr_engine_step(e, &k))) break;
                double done = now_s() - t0;
                if (!k) {
                    struct timespec ts = {0, 1000000}; /* 1 ms */
                    nanosleep(&ts, NULL);
                    continue;
                }
                busy += done - began;
                const int steady_step = began >= 1.1 && done + 1.0 <= audio_s;
                if (lat_push(&step_ns, &n_step, &step_cap, (int64_t)((done - began) * 1e9)) ||
                    lat_push(&step_k, &n_stepk, &step_kcap, k) ||
                    (steady_step && (lat_push(&sstep_ns, &n_sstep, &sstep_cap, (int64_t)((done - began) * 1e9)) ||
                                     lat_push(&sstep_k, &n_sstepk, &sstep_kcap, k)))) {
                    fprintf(stderr, "srkit bench: out of memory\n");
                    goto out;
                }
                for (int i = 0; i < N; i++) {
                    const sr_timeline *tl = sr_stream_timeline(ss[i]);
                    for (; seen[i] < tl->n; seen[i]++) {
                        const sr_timeline_entry *en = &tl->entries[seen[i]];
                        /* its audio was all there at start + audio_ms; answered at `done` */
                        double l = done - (start[i] + (double)en->audio_ms / 1000.0);
                        /* steady: away from the streams' starts and ends, which come together
                         * (all start within 100 ms and have the same length) */
                        int steady = !en->is_final && en->audio_ms >= 1000 &&
                                     (double)en->audio_ms + 1000.0 <= audio_s * 1000.0;
                        if (lat_push(&lat, &n_lat, &lat_cap, (int64_t)(l * 1e9)) ||
                            (!en->is_final && lat_push(&plat, &n_plat, &plat_cap, (int64_t)(l * 1e9))) ||
                            (steady && lat_push(&slat, &n_slat, &slat_cap, (int64_t)(l * 1e9)))) {
                            fprintf(stderr, "srkit bench: out of memory\n");
                            goto out;
                        }
                        if (en->is_final) {
                            finished++;
                            if (l > end_lag) end_lag = l;
                        }
                    }
                }
            }
        }
        wall = now_s() - t0;
        {
            const bench_graphs g1 = bench_graphs_now();
            bench_graphs_add(&graphs, &g0, &g1);
        }
        if (st) { rc = fail(st, "engine"); goto out; }
    }
    /* per-chunk figures: compute time of each chunk (its step's wall time for the engine), or
     * in --realtime the latency from the chunk's last sample to its result */
    if (!b->o.realtime) {
        size_t cap = 0;
        for (int i = 0; i < N; i++) cap += sr_stream_timeline(ss[i])->n;
        lat = malloc((cap ? cap : 1) * sizeof *lat);
        if (!lat) { fprintf(stderr, "srkit bench: out of memory\n"); goto out; }
        for (int i = 0; i < N; i++) {
            const sr_timeline *tl = sr_stream_timeline(ss[i]);
            for (size_t k = 0; k < tl->n; k++) lat[n_lat++] = tl->entries[k].compute_ns;
        }
    }
    if (!n_lat) { fprintf(stderr, "srkit bench: no chunk was processed\n"); goto out; }
    qsort(lat, n_lat, sizeof *lat, cmp_i64);
    double p50 = bench_pct(lat, n_lat, 0.5) / 1e6, p90 = bench_pct(lat, n_lat, 0.9) / 1e6,
           p99 = bench_pct(lat, n_lat, 0.99) / 1e6, mx = lat[n_lat - 1] / 1e6;
    /* the chunk duration the streams used (after the first) */
    int chunk_ms = 0;
    {
        const sr_timeline *tl = sr_stream_timeline(ss[0]);
        if (tl->n >= 3) chunk_ms = (int)(tl->entries[2].audio_ms - tl->entries[1].audio_ms);
        else if (tl->n >= 1) chunk_ms = (int)tl->entries[0].audio_ms;
    }
    int rt_ok = b->o.realtime && p99 <= (double)chunk_ms;
    double pp50, pp99, sp50, sp99; /* --realtime: the chunks before the final ones; those 1 s
                                    * or more from their stream's start and end */
    bench_p50_p99(plat, n_plat, &pp50, &pp99);
    bench_p50_p99(slat, n_slat, &sp50, &sp99);
    const bench_steps steps = bench_steps_of(step_ns, step_k, n_step),
                      ssteps = bench_steps_of(sstep_ns, sstep_k, n_sstep);
    sr_memstats ms;
    if (e) sr_engine_memory(e, &ms);
    else {
        sr_memory(m, NULL, &ms);
        for (int i = 0; i < N; i++) {
            sr_memstats one;
            sr_memory(m, ss[i], &one);
            ms.stream_bytes += one.stream_bytes;
        }
    }
    text0 = strdup(sr_stream_hypothesis(ss[0])->text);
    double rtfx = N * audio_s / wall;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        bench_json_run(j, b, m);
        if (vname) cJSON_AddStringToObject(j, "variant", vname);
        if (b->repeat > 1) cJSON_AddNumberToObject(j, "run", run);
        cJSON_AddNumberToObject(j, "streams", N);
        cJSON_AddBoolToObject(j, "batched", !b->separate);
        cJSON_AddBoolToObject(j, "realtime", b->o.realtime);
        cJSON_AddNumberToObject(j, "audio_s", N * audio_s);
        cJSON_AddNumberToObject(j, "stream_audio_s", audio_s);
        cJSON_AddNumberToObject(j, "wall_s", wall);
        cJSON_AddNumberToObject(j, "open_s", open_s);
        cJSON_AddNumberToObject(j, "rtfx", rtfx);
        cJSON_AddNumberToObject(j, "n_chunks", (double)n_lat);
        cJSON_AddNumberToObject(j, "stream_chunk_ms", chunk_ms);
        /* chunk_ms_*: with --realtime the latency from a chunk's audio being there to its
         * hypothesis; otherwise (all audio there at once) each chunk's compute time */
        cJSON_AddNumberToObject(j, "chunk_ms_p50", p50);
        cJSON_AddNumberToObject(j, "chunk_ms_p90", p90);
        cJSON_AddNumberToObject(j, "chunk_ms_p99", p99);
        cJSON_AddNumberToObject(j, "chunk_ms_max", mx);
        if (b->o.realtime) {
            cJSON_AddNumberToObject(j, "latency_ms_p50", p50);
            cJSON_AddNumberToObject(j, "latency_ms_p90", p90);
            cJSON_AddNumberToObject(j, "latency_ms_p99", p99);
            cJSON_AddNumberToObject(j, "latency_ms_max", mx);
            cJSON_AddBoolToObject(j, "realtime_ok", rt_ok);
            /* the same without each stream's final chunk (end-of-stream work, end_lag_ms) */
            cJSON_AddNumberToObject(j, "partial_latency_ms_p50", pp50);
            cJSON_AddNumberToObject(j, "partial_latency_ms_p99", pp99);
            cJSON_AddNumberToObject(j, "end_lag_ms", end_lag * 1e3);
            /* the steady state: chunks ending 1 s or more after their stream's start and 1 s
             * or more before its end (no start or finish of the run's streams in their steps
             * when the streams are longer than 2 s); 0 when there are none */
            cJSON_AddNumberToObject(j, "steady_chunks", (double)n_slat);
            cJSON_AddNumberToObject(j, "steady_latency_ms_p50", sp50);
            cJSON_AddNumberToObject(j, "steady_latency_ms_p99", sp99);
        }
        if (b->o.realtime && e) {
            /* the engine's steps that ran chunks: a chunk's latency is at most the step it
             * arrived during plus its own, so a steady latency p99 near twice the step p99 is
             * the steps' length, a larger one waits or stalls; engine_busy: their share of
             * the wall (near 1: the engine never waits for audio) */
            cJSON_AddNumberToObject(j, "engine_steps", (double)steps.n);
            cJSON_AddNumberToObject(j, "engine_busy", wall > 0 ? busy / wall : 0.0);
            cJSON_AddNumberToObject(j, "step_ms_p50", steps.p50);
            cJSON_AddNumberToObject(j, "step_ms_p99", steps.p99);
            cJSON_AddNumberToObject(j, "step_ms_max", steps.max);
            cJSON_AddNumberToObject(j, "step_streams_mean", steps.k_mean);
            cJSON_AddNumberToObject(j, "step_streams_max", (double)steps.k_max);
            cJSON_AddNumberToObject(j, "steady_steps", (double)ssteps.n);
            cJSON_AddNumberToObject(j, "steady_step_ms_p50", ssteps.p50);
            cJSON_AddNumberToObject(j, "steady_step_ms_p99", ssteps.p99);
            cJSON_AddNumberToObject(j, "steady_step_streams_mean", ssteps.k_mean);
        }
        cJSON_AddNumberToObject(j, "weights_bytes", (double)ms.weight_bytes);
        cJSON_AddNumberToObject(j, "streams_state_bytes", (double)ms.stream_bytes);
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)ms.peak_rss_bytes);
        bench_json_gpu_mem(j, &ms, &graphs);
        cJSON_AddStringToObject(j, "text_stream0", text0 ? text0 : "");
        bench_print_json(j);
    } else {
        bench_print_run(b, m);
        if (vname || b->repeat > 1)
            printf("%s%s%srun %d of %d\n", vname ? "variant " : "", vname ? vname : "", vname ? ", " : "",
                   run + 1, b->repeat);
        printf("%d %s streams of %.2f s%s: wall %.2f s, RTFx %.2f (audio seconds per wall second, all streams)\n",
               N, b->separate ? "separate" : "batched", audio_s, b->o.realtime ? " in real time" : "", wall, rtfx);
        printf("per-chunk %s ms p50 %.3f p90 %.3f p99 %.3f max %.3f%s\n",
               b->o.realtime ? "latency" : "compute", p50, p90, p99, mx,
               b->o.realtime ? (rt_ok ? " (real time kept: p99 <= chunk)" : " (real time NOT kept)") : "");
        if (b->o.realtime) {
            printf("without each stream's final chunk: latency ms p50 %.3f p99 %.3f; final hypotheses at "
                   "most %.0f ms after the end of the audio\n", pp50, pp99, end_lag * 1e3);
            if (n_slat)
                printf("steady state (%zu chunks 1 s or more from each stream's start and end): latency "
                       "ms p50 %.3f p99 %.3f\n", n_slat, sp50, sp99);
        }
        if (b->o.realtime && e && steps.n) {
            printf("engine: %zu steps ran chunks (%.1f %% of the wall), streams a step mean %.1f max %lld; "
                   "step ms p50 %.3f p99 %.3f max %.3f\n", steps.n, wall > 0 ? 100.0 * busy / wall : 0.0,
                   steps.k_mean, (long long)steps.k_max, steps.p50, steps.p99, steps.max);
            if (ssteps.n)
                printf("steady steps (%zu): streams a step mean %.1f; step ms p50 %.3f p99 %.3f\n", ssteps.n,
                       ssteps.k_mean, ssteps.p50, ssteps.p99);
        }
        printf("memory: weights %zu B, streams' state %zu B, peak RSS %zu B, GPU peak %zu B\n",
               ms.weight_bytes, ms.stream_bytes, ms.peak_rss_bytes, ms.gpu_peak_bytes);
    }
    bench_print_profile(NULL, (double)n_lat / N, "steps", wall); /* steps: chunks per stream */
    rc = 0;
    *text = text0;
    text0 = NULL;
out:
    free(text0);
    free(lat);
    free(plat);
    free(slat);
    free(step_ns);
    free(step_k);
    free(sstep_ns);
    free(sstep_k);
    if (e) sr_engine_free(e); /* closes its streams */
    else if (ss)
        for (int i = 0; i < N; i++) sr_stream_close(ss[i]);
    free(ss);
    free(jobs);
    free(th);
    free(start);
    free(fed);
    free(seen);
    return rc;
}

/* --streams N: the audio and the model loaded once, then --repeat runs of each --cuda-variants
 * variant (or of the settings as they are), interleaved (run r of each before run r + 1 of
 * any), each reported; every run's stream 0 must end with the same text (the variants promise
 * the same bits, and a stream's numbers do not depend on its batch). */
static int bench_multi(const bench_args *b)
{
    int N = b->streams;
    bench_variant var[BENCH_VARIANTS];
    const int nv = b->variants ? bench_variants_parse(b->variants, var) : 1;
    if (nv < 0) return EXIT_USAGE;
    sr_audio a;
    if (bench_load_audio(b, &a)) return 1;
    if (!a.n) {
        fprintf(stderr, "srkit bench: empty audio\n");
        sr_audio_free(&a);
        return 1;
    }
    sr_model *m = NULL;
    if (open_model(b->model, &b->o, &m)) { sr_audio_free(&a); return 1; }
    int rc = 1;
    char *text0 = NULL, *text = NULL;
    float **aud = calloc((size_t)N, sizeof *aud);
    if (!aud) { fprintf(stderr, "srkit bench: out of memory\n"); goto out; }
    for (int i = 0; i < N; i++)
        if (!(aud[i] = bench_rotated(&a, i, N))) { fprintf(stderr, "srkit bench: out of memory\n"); goto out; }
    for (int r = 0; r < b->repeat; r++)
        for (int v = 0; v < nv; v++) {
            if (b->variants) bench_variant_apply(&var[v]);
            if ((rc = bench_multi_once(b, m, &a, aud, b->variants ? var[v].name : NULL, r, &text))) goto out;
            if (!text) { fprintf(stderr, "srkit bench: out of memory\n"); rc = 1; goto out; }
            if (!text0) {
                text0 = text;
            } else {
                int same = !strcmp(text, text0);
                free(text);
                if (!same) {
                    fprintf(stderr, "srkit bench: stream 0's text differs between runs (%s, run %d, "
                            "against the first: the settings and batches promise the same results)\n",
                            b->variants ? var[v].name : "-", r + 1);
                    rc = 1;
                    goto out;
                }
            }
            text = NULL;
        }
out:
    free(text0);
    if (aud)
        for (int i = 0; i < N; i++) free(aud[i]);
    free(aud);
    sr_model_free(m);
    sr_audio_free(&a);
    return rc;
}

/* `srkit bench align [--words N] [--seed S]`: one long utterance of N words (default 20,000),
 * sentences drawn at random from the list below, scored by sr_score_utt (WER and CER alignments)
 * against a copy with about 10 % word errors: each word substituted (6 %) or dropped (2 %), and
 * followed by an inserted word (2 %). Prints the time and the process's peak RSS
 * (docs/metrics.md, long utterances). */
static uint64_t bench_lcg(uint64_t *r)
{
    *r = *r * 6364136223846793005ULL + 1442695040888963407ULL;
    return *r >> 33;
}

static int bench_align(int argc, char **argv)
{
    static const char *const sentences[] = {
        "the old man walked slowly down the road toward the little house by the river",
        "she had never seen so many people gathered in one place before that morning",
        "it was late in the evening when the letter finally arrived from his brother",
        "they sat together by the fire and spoke of the years that had passed",
        "the wind came over the hills and the rain began to fall upon the fields",
        "he opened the door and found the room exactly as he had left it",
        "there was nothing more to be said so we went back to our work",
        "her voice was quiet but every word she spoke carried through the hall",
        "in the spring the children would run across the meadow to the school",
        "the captain gave his orders and the men hurried to their places on deck",
        "i do not think that any of us understood what had happened that night",
        "after a long silence the doctor rose from his chair and looked out of the window",
    };
    enum { NS = sizeof sentences / sizeof *sentences };
    int words = 20000, seed = 1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--words") && i + 1 < argc) { if (parse_int("--words", argv[++i], &words)) return EXIT_USAGE; }
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) { if (parse_int("--seed", argv[++i], &seed)) return EXIT_USAGE; }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { printf("usage: srkit bench align [--words N] [--seed S]\n"); return 0; }
        else { fprintf(stderr, "srkit bench align: unknown argument %s\n", argv[i]); return EXIT_USAGE; }
    }
    if (words < 1) { fprintf(stderr, "srkit bench align: --words must be positive\n"); return EXIT_USAGE; }
    sr_words sw[NS] = {{0}};
    /* every word of the list is shorter than 15 bytes: 16 per reference word, 32 per hypothesis word */
    char *ref = malloc((size_t)words * 16 + 1), *hyp = malloc((size_t)words * 32 + 1);
    sr_status st = ref && hyp ? SR_OK : SR_ERR_NOMEM;
    for (int s = 0; s < NS && !st; s++) st = sr_words_split(sentences[s], &sw[s]);
    if (!st) {
        uint64_t r = (uint64_t)seed;
        size_t nr = 0, nh = 0;
        for (int k = 0; k < words;) {
            const sr_words *s = &sw[bench_lcg(&r) % NS];
            for (size_t i = 0; i < s->n && k < words; i++, k++) {
                const sr_words *o = &sw[bench_lcg(&r) % NS];
                const char *w = s->w[i], *other = o->w[bench_lcg(&r) % o->n];
                unsigned u = (unsigned)(bench_lcg(&r) % 100);
                nr += (size_t)sprintf(ref + nr, "%s ", w);
                if (u < 6) nh += (size_t)sprintf(hyp + nh, "%s ", other);
                else if (u >= 8) nh += (size_t)sprintf(hyp + nh, "%s ", w);
                if (bench_lcg(&r) % 100 < 2) nh += (size_t)sprintf(hyp + nh, "%s ", s->w[bench_lcg(&r) % s->n]);
            }
        }
        sr_utt_input in = {.id = "bench-align", .ref = ref, .hyp = hyp, .audio_ms = -1};
        sr_utt_metrics um;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = sr_score_utt(&in, &um);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (!st) {
            sr_memstats ms;
            sr_memory(NULL, NULL, &ms);
            /* ASCII words, one space after each: the CER's units are nr - 1 characters */
            printf("align: %d words (%zu characters), WER %.2f %%, CER %.2f %%: scored in %.2f s, "
                   "peak RSS %.1f MB\n", words, nr - 1, 100 * um.wer_rate, 100 * um.cer_rate,
                   (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
                   (double)ms.peak_rss_bytes / 1e6);
        }
    }
    for (int s = 0; s < NS; s++) sr_words_free(&sw[s]);
    free(ref);
    free(hyp);
    return st ? fail(st, "bench align") : 0;
}

static const char BENCH_USAGE[] =
    "usage: srkit bench gemm [--device cpu|cuda] [--threads N] [--n N] [--k K] [--tensor-cores]\n"
    "       srkit bench attn [--device cpu|cuda] [--threads N] [--streams N ...] [--keys L]\n"
    "                        [--forms narrow,wide,auto,grouped,split,rows] (CUDA: a line per form)\n"
    "       srkit bench --model MODEL.h5 --audio A [--audio B ...] [--stream JSON] [options]\n"
    "       srkit bench stream MODEL.h5 AUDIO... [options]\n"
    "       srkit bench --streams N [--separate] [--realtime] --model MODEL.h5 --audio A [options]\n"
    "       srkit bench --all [--model MODEL.h5 --audio A]   (what `make bench` runs)\n"
    "       srkit bench align [--words N] [--seed S]   (one long utterance scored: WER + CER)\n\n"
    "Timings live here, never in the tests. gemm reports the table's sgemm (GFLOP/s and the\n"
    "bandwidth of reading the weight matrix), then the op set's gemm on an N x K weight\n"
    "(--n, --k; default 4096 x 4096) in f32 and bf16 next to sgemm (sgemv at M = 1) for\n"
    "M = 1..64 rows as GB/s of weight read, and on the Whisper encoder's M = 1500 products\n"
    "(time ratio op / sgemm). attn times the fused cache-indexed attention op (one call for all\n"
    "streams) against the unfused path (per stream and head: sgemm Q K^T, softmax, sgemm P V)\n"
    "at FastConformer, Whisper and Voxtral shapes for --streams N (default 1, 8, 64).\n"
    "The streaming benchmark feeds the audio files, concatenated in order,\n"
    "through one stream and reports RTF, per-chunk compute time (chunk_ms_p50/p90/p99: the\n"
    "wall time of each chunk's model + decoder work, in ms; model_ms_* / decoder_ms_*: the two\n"
    "parts over the steady chunks) and memory; --json prints one JSON\n"
    "object (docs/benchmarks.md lists its fields). --all runs gemm, then, when --model names\n"
    "an existing file, the streaming benchmark for whisperrt (100 and 300 ms), reencode\n"
    "(300 ms) and offline on --audio; without the model it says so and skips them.\n\n"
    "options:\n"
    "  --stream JSON           the \"stream\" object of an experiment config (docs/config.md),\n"
    "                          e.g. '{\"strategy\": \"reencode\", \"chunk_ms\": 100}'; options\n"
    "                          after it override its fields\n"
    "  --repeat N              run the stream N times, report the fastest (default 1); with\n"
    "                          --streams: N runs on the one loaded model, each reported\n"
    "  --max-ms N              use only the first N ms of the concatenated audio\n"
    "  --loop                  with --max-ms: feed the concatenated audio again and again\n"
    "                          until N ms (held in memory once: long-stream memory runs)\n"
    "  --per-chunk             --json also lists every chunk's audio_ms, compute and model ms\n"
    "  --cuda-variants LIST    the stream (or --streams N) on --device cuda under each of up to\n"
    "                          12 settings of the CUDA table, on the one loaded model, runs\n"
    "                          interleaved (run r of each before run r + 1 of any; --repeat N\n"
    "                          runs each): variants split by ',', each terms joined by '+' from\n"
    "                          plain, pdl (overlapping launches), graph (recorded steps),\n"
    "                          replay (recorded steps replayed, only their changed launches\n"
    "                          set anew), async (above 16 rows the GEMM's operands staged\n"
    "                          by cp.async), narrow,\n"
    "                          wide, auto, grouped, split, rows (attention forms), cols8 (8 GEMM columns\n"
    "                          a block at up to 16 rows), each from a base of no overlap, no\n"
    "                          recording, the form by size, 16 columns, no cp.async (outside --cuda-variants\n"
    "                          overlap is on by default); a report (--json: an object with\n"
    "                          \"variant\") each\n"
    "  --streams N             N concurrent streams (stream i hears the audio rotated by i/N of\n"
    "                          its length) on one batched engine: RTFx over all streams and\n"
    "                          per-chunk compute ms (each chunk's step)\n"
    "  --separate              with --streams: N solo streams on N threads instead (no batching)\n"
    "  --realtime              with --streams: feed each stream at the pace of real time\n"
    "                          (joining 0..100 ms apart); latency_ms_* is the time from a chunk's\n"
    "                          last sample to its result, realtime_ok that p99 <= the chunk\n"
    "  --json                  one JSON object\n";

/* Parse the streaming benchmark's arguments; positional arguments (the `bench stream` form)
 * are the model, then audio files. 0 = ok, 1 = help printed, -1 = usage error. */
static int bench_parse(int argc, char **argv, bench_args *b)
{
    memset(b, 0, sizeof *b);
    run_opts_init(&b->o);
    b->repeat = 1;
    b->audio = calloc((size_t)argc + 1, sizeof *b->audio);
    if (!b->audio) { fprintf(stderr, "srkit bench: out of memory\n"); return -1; }
    for (int i = 0; i < argc; i++) {
        int r = parse_run_opt(argc, argv, &i, &b->o);
        if (r < 0) return -1;
        if (r) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { printf("%s%s", BENCH_USAGE, RUN_OPTS_HELP); return 1; }
        if (!strcmp(a, "--per-chunk")) { b->per_chunk = 1; continue; }
        if (!strcmp(a, "--loop")) { b->loop = 1; continue; }
        if (!strcmp(a, "--separate")) { b->separate = 1; continue; }
        if (!strcmp(a, "--model") || !strcmp(a, "--audio") || !strcmp(a, "--stream") ||
            !strcmp(a, "--repeat") || !strcmp(a, "--max-ms") || !strcmp(a, "--streams") ||
            !strcmp(a, "--cuda-variants")) {
            if (!v) { fprintf(stderr, "srkit bench: %s needs a value\n", a); return -1; }
            i++;
            if (!strcmp(a, "--model")) b->model = v;
            else if (!strcmp(a, "--cuda-variants")) {
                bench_variant tmp[BENCH_VARIANTS];
                if (bench_variants_parse(v, tmp) < 0) return -1;
                b->variants = v;
            }
            else if (!strcmp(a, "--audio")) b->audio[b->n_audio++] = v;
            else if (!strcmp(a, "--stream")) { if (bench_parse_stream(v, b)) return -1; }
            else if (!strcmp(a, "--max-ms")) {
                char *end; /* not parse_int: hours of audio exceed its 1000000 cap */
                long x = strtol(v, &end, 10);
                if (!*v || *end || x < 0 || x > INT_MAX) {
                    fprintf(stderr, "srkit bench: --max-ms needs a non-negative integer, got \"%s\"\n", v);
                    return -1;
                }
                b->max_ms = (int)x;
            }
            else if (!strcmp(a, "--streams")) {
                if (parse_int("--streams", v, &b->streams) || b->streams < 1 || b->streams > 4096) {
                    fprintf(stderr, "srkit bench: --streams needs an integer in 1..4096\n");
                    return -1;
                }
            }
            else if (parse_int("--repeat", v, &b->repeat) || b->repeat < 1) {
                fprintf(stderr, "srkit bench: --repeat needs an integer >= 1\n");
                return -1;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) { fprintf(stderr, "srkit bench: unknown option %s\n", a); return -1; }
        if (!b->model) b->model = a;
        else b->audio[b->n_audio++] = a;
    }
    return 0;
}

static void bench_args_free(bench_args *b)
{
    free(b->audio);
    sr_config_free(b->stream_cfg);
    memset(b, 0, sizeof *b);
}

static int bench_stream(int argc, char **argv)
{
    bench_args b;
    int r = bench_parse(argc, argv, &b);
    if (!r && (!b.model || !b.n_audio)) {
        fprintf(stderr, "srkit bench: needs a model and at least one audio file (see --help)\n");
        r = -1;
    }
    if (!r && b.loop && b.max_ms <= 0) {
        fprintf(stderr, "srkit bench: --loop needs --max-ms (how much audio to feed)\n");
        r = -1;
    }
    if (!r && (b.separate || b.o.realtime) && !b.streams) {
        fprintf(stderr, "srkit bench: --separate and --realtime go with --streams N\n");
        r = -1;
    }
    if (!r && b.separate && b.o.realtime) {
        fprintf(stderr, "srkit bench: --realtime runs the batched engine; drop --separate\n");
        r = -1;
    }
    if (!r && b.streams && b.loop) {
        fprintf(stderr, "srkit bench: --loop is for one stream; use --max-ms with --streams\n");
        r = -1;
    }
    if (!r && b.variants && (!b.o.mo.device || strcmp(b.o.mo.device, "cuda"))) {
        fprintf(stderr, "srkit bench: --cuda-variants times streams on --device cuda\n");
        r = -1;
    }
#ifndef SR_WITH_CUDA
    if (!r && b.variants) {
        fprintf(stderr, "srkit bench: --cuda-variants needs a build with make CUDA=1\n");
        r = -1;
    }
#endif
    int rc = r < 0 ? EXIT_USAGE : r > 0 ? 0 : b.streams ? bench_multi(&b) : bench_run(&b);
    bench_args_free(&b);
    return rc;
}

/* `make bench`: GEMM on every device, then the Whisper streaming benchmarks when the model file
 * exists (skipped with a message otherwise, so the target works on a fresh checkout). */
static int bench_all(int argc, char **argv)
{
    bench_args b;
    int r = bench_parse(argc, argv, &b);
    if (r) { bench_args_free(&b); return r < 0 ? EXIT_USAGE : 0; }
    int rc = bench_gemm(b.o.mo.device ? b.o.mo.device : "cpu", b.o.mo.threads, 0, 0, 0);
    const sr_kernels *k;
    if (sr_kernels_cuda(&k) == SR_OK) rc |= bench_gemm("cuda", 0, 0, 0, 0);
    else printf("(cuda gemm skipped: %s)\n", sr_last_error());
    if (!b.model || access(b.model, R_OK) != 0) {
        printf("(streaming benchmarks skipped: model %s not found; `make models` fetches it)\n",
               b.model ? b.model : "(none given: --model)");
    } else if (!b.n_audio || access(b.audio[0], R_OK) != 0) {
        printf("(streaming benchmarks skipped: audio %s not found)\n",
               b.n_audio ? b.audio[0] : "(none given: --audio)");
    } else {
        static const struct { const char *strategy, *decoder; int chunk_ms; } runs[] = {
            {"whisperrt", "stable_greedy", 100}, {"whisperrt", "stable_greedy", 300},
            {"reencode", "stable_greedy", 300}, {"offline", "aed_greedy", 0}};
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            b.o.sc.strategy = runs[i].strategy;
            b.o.sc.decoder = runs[i].decoder;
            b.o.sc.chunk_ms = runs[i].chunk_ms;
            b.o.sc.first_chunk_ms = 0;
            printf("\n");
            fflush(stdout);
            rc |= bench_run(&b);
        }
    }
    bench_args_free(&b);
    return rc;
}

static int cmd_bench(int argc, char **argv)
{
    if (!argc) { fprintf(stderr, "%s", BENCH_USAGE); return EXIT_USAGE; }
    if (simple_help(1, argv, BENCH_USAGE)) {
        printf("%s", RUN_OPTS_HELP);
        return 0;
    }
    if (!strcmp(argv[0], "stream")) return bench_stream(argc - 1, argv + 1);
    if (!strcmp(argv[0], "align")) return bench_align(argc - 1, argv + 1);
    if (!strcmp(argv[0], "--all")) return bench_all(argc - 1, argv + 1);
    if (!strcmp(argv[0], "gemm")) {
        const char *device = "cpu";
        int threads = 0, n = 0, kk = 0, tc_only = 0;
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
            else if (!strcmp(argv[i], "--tensor-cores")) tc_only = 1;
            else if (!strcmp(argv[i], "--threads") && i + 1 < argc) { if (parse_int("--threads", argv[++i], &threads)) return EXIT_USAGE; }
            else if (!strcmp(argv[i], "--n") && i + 1 < argc) { if (parse_int("--n", argv[++i], &n)) return EXIT_USAGE; }
            else if (!strcmp(argv[i], "--k") && i + 1 < argc) { if (parse_int("--k", argv[++i], &kk)) return EXIT_USAGE; }
            else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { printf("%s", BENCH_USAGE); return 0; }
            else { fprintf(stderr, "srkit bench gemm: unknown argument %s\n", argv[i]); return EXIT_USAGE; }
        }
        return bench_gemm(device, threads, n, kk, tc_only);
    }
    if (!strcmp(argv[0], "attn")) {
        const char *device = "cpu";
        int threads = 0, ns = 0, streams[16], keys = 0, forms[ATTN_FORMS], nf = 0;
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
            else if (!strcmp(argv[i], "--threads") && i + 1 < argc) { if (parse_int("--threads", argv[++i], &threads)) return EXIT_USAGE; }
            else if (!strcmp(argv[i], "--forms") && i + 1 < argc) {
                /* comma-separated names of attn_form_names, each at most once */
                for (const char *p = argv[++i]; *p;) {
                    const size_t len = strcspn(p, ",");
                    const int f = word_index(attn_form_names, ATTN_FORMS, p, len);
                    int dup = 0;
                    for (int j = 0; j < nf; j++) dup |= forms[j] == f;
                    if (f < 0 || dup) {
                        fprintf(stderr, "srkit bench attn: --forms: \"%.*s\" %s (forms: narrow, wide, "
                                "auto, grouped, split, rows)\n", (int)len, p, dup ? "twice" : "unknown");
                        return EXIT_USAGE;
                    }
                    forms[nf++] = f;
                    p += len + (p[len] == ',');
                }
            }
            else if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
                if (parse_int("--keys", argv[++i], &keys)) return EXIT_USAGE;
                if (keys < 1 || keys > 8192) {
                    fprintf(stderr, "srkit bench attn: --keys %d out of 1..8192\n", keys);
                    return EXIT_USAGE;
                }
            }
            else if (!strcmp(argv[i], "--streams") && i + 1 < argc) {
                if (ns == 16) { fprintf(stderr, "srkit bench attn: at most 16 --streams\n"); return EXIT_USAGE; }
                if (parse_int("--streams", argv[++i], &streams[ns])) return EXIT_USAGE;
                if (streams[ns] < 1 || streams[ns] > 4096) {
                    fprintf(stderr, "srkit bench attn: --streams %d out of 1..4096\n", streams[ns]);
                    return EXIT_USAGE;
                }
                ns++;
            }
            else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { printf("%s", BENCH_USAGE); return 0; }
            else { fprintf(stderr, "srkit bench attn: unknown argument %s\n", argv[i]); return EXIT_USAGE; }
        }
        if (!ns) {
            streams[ns++] = 1;
            streams[ns++] = 8;
            streams[ns++] = 64;
        }
        if (nf && strcmp(device, "cuda")) {
            fprintf(stderr, "srkit bench attn: --forms are the CUDA kernel's: needs --device cuda\n");
            return EXIT_USAGE;
        }
#ifndef SR_WITH_CUDA
        if (nf) {
            fprintf(stderr, "srkit bench attn: --forms needs a build with make CUDA=1\n");
            return EXIT_USAGE;
        }
#endif
        return bench_attn(device, threads, streams, ns, keys, nf ? forms : NULL, nf);
    }
    if (argv[0][0] == '-') return bench_stream(argc, argv); /* --model M --audio A ... */
    fprintf(stderr, "srkit bench: unknown benchmark %s\n%s", argv[0], BENCH_USAGE);
    return EXIT_USAGE;
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "srkit %s — streaming speech recognition toolkit\n\n"
            "usage: srkit COMMAND [ARGS]   (srkit COMMAND --help for each)\n\n"
            "  info        describe a model file\n"
            "  transcribe  final transcripts of audio files\n"
            "  stream      partial hypotheses as audio streams in\n"
            "  eval        run an experiment config\n"
            "  score       score hypotheses or timelines of any system\n"
            "  bench       timings: GEMM throughput, streaming RTF and latency\n"
            "  compare     regression gate between two results\n"
            "  merge       combine the shards of a sharded eval\n"
            "  version     print the version\n\nbackends:",
            SR_VERSION);
    for (size_t i = 0; i < sr_backend_count(); i++) fprintf(f, " %s", sr_backend_name(i));
    fprintf(f, "\ndecoders:");
    for (size_t i = 0; i < sr_decoder_count(); i++) fprintf(f, " %s", sr_decoder_name(i));
    fprintf(f, "\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return EXIT_USAGE; }
    const char *cmd = argv[1];
    int n = argc - 2;
    char **rest = argv + 2;
    if (!strcmp(cmd, "info")) return cmd_info(n, rest);
    if (!strcmp(cmd, "transcribe")) return cmd_transcribe(n, rest);
    if (!strcmp(cmd, "stream")) return cmd_stream(n, rest);
    if (!strcmp(cmd, "eval")) return cmd_eval(n, rest);
    if (!strcmp(cmd, "score")) return cmd_score(n, rest);
    if (!strcmp(cmd, "bench")) return cmd_bench(n, rest);
    if (!strcmp(cmd, "compare")) return cmd_compare(n, rest);
    if (!strcmp(cmd, "merge")) return cmd_merge(n, rest);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("srkit %s\n", SR_VERSION); return 0; }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
    fprintf(stderr, "srkit: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
