/*
 * test_cli.c — the srkit binary as a user runs it: exit codes, --help for every subcommand,
 * `info` on fixtures and on a model written just now by the Python writer, `transcribe` and
 * `stream` through the test backend, honest "not built yet" answers, and error messages.
 * The binary comes from $SRKIT_BIN (make test sets it to build/srkit).
 */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"
#include "../core/internal.h"
#include "../eval/normalizer.h"

static const char *bin(void)
{
    const char *b = getenv("SRKIT_BIN");
    return b ? b : "build/srkit";
}

/* Run a shell command line, capture stdout+stderr (up to cap), return the exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
    return test_run(out, cap, "%s", cmd);
}

static char out[1 << 16];

static int runv(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return run(cmd, out, sizeof out);
}

static int runf(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", bin(), args);
    return run(cmd, out, sizeof out);
}

static void expect(int rc, int want, const char *needle, const char *what)
{
    CU_ASSERT_EQUAL(rc, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, needle));
    if (rc != want || !strstr(out, needle))
        printf("\n      %s: exit %d (wanted %d), output lacks \"%s\":\n%s\n", what, rc, want, needle, out);
}

static void test_help_and_usage(void)
{
    const char *cmds[] = {"info", "transcribe", "stream", "eval", "score", "bench", "compare"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char a[64];
        snprintf(a, sizeof a, "%s --help", cmds[i]);
        expect(runf(a), 0, "usage: srkit", cmds[i]);
    }
    expect(runf("--help"), 0, "test_linear", "--help lists backends");
    expect(runf(""), 2, "usage", "no command");
    expect(runf("frobnicate"), 2, "unknown command", "unknown command");
    expect(runf("version"), 0, SR_VERSION, "version");
    expect(runf("info"), 2, "usage", "info without a file");
}

static void test_usage_errors(void)
{
    expect(runf("score --ref a"), 2, "usage", "score without a hypothesis");
    expect(runf("compare a.json"), 2, "usage", "compare with one file");
    expect(runf("merge"), 2, "usage", "merge without folders");
    expect(runf("eval"), 2, "usage", "eval without a config");
}

static void test_info(void)
{
    char a[1024];
    snprintf(a, sizeof a, "info %s", test_fixture("test_linear.h5"));
    expect(runf(a), 0, "arch:       test_linear", "info human");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "parameters: 54"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "f32 216 B"));
    snprintf(a, sizeof a, "info --json %s", test_fixture("test_linear_bf16.h5"));
    CU_ASSERT_EQUAL(runf(a), 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "arch")), "test_linear");
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "n_params")), 54);
    CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "bytes_by_dtype"), "bf16"));
    cJSON_Delete(j);
    snprintf(a, sizeof a, "info %s", test_fixture("bad_format.h5"));
    expect(runf(a), 1, "bad_format.h5", "info on a bad file names it");
    expect(runf("info /nonexistent.h5"), 1, "/nonexistent.h5", "info on a missing file");
}

/* The Python writer and the C reader agree: write a model now, inspect it with srkit. */
static void test_python_writer_roundtrip(void)
{
    if (system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
        TEST_SKIP("/usr/bin/python3 lacks h5py/numpy (make setup installs them)");
        return;
    }
    const char *path = test_tmppath("written.h5");
    int rc = runv("/usr/bin/python3 -c 'import sys; sys.path.insert(0, \"scripts\"); import numpy as np, srkit_h5 as w; "
                 "w.write_model(\"%s\", \"test_linear\", {\"sample_rate\": 16000, \"chunk_ms\": 40, \"n_bands\": 4, \"vocab\": 3}, "
                 "{\"proj.weight\": np.arange(12, dtype=np.float32).reshape(3, 4) / 10, \"proj.bias\": np.zeros(3, np.float32)}, "
                 "dtype=\"f16\", tokenizer={\"type\": \"pieces\", \"pieces\": [\"_\", \"x\", \"y\"], \"special\": [1, 0, 0]}, "
                 "source=\"cli test\", license=\"MIT\")'",
                 path);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char a[1024];
    snprintf(a, sizeof a, "info %s", path);
    expect(runf(a), 0, "parameters: 15", "info on a freshly written model");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "f16"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "source:     cli test"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "pieces, 3 pieces"));
}

static void test_transcribe_and_stream(void)
{
    const char *wav = test_tmppath("cli.wav");
    float *x = malloc(16000 * 2 * sizeof *x);
    for (int i = 0; i < 32000; i++) x[i] = (float)(((i / 400) % 3) * 0.2 * ((i * 7919 % 200) / 100.0 - 1.0));
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(wav, x, 32000, 16000), SR_OK);
    free(x);
    char a[2048];
    snprintf(a, sizeof a, "transcribe %s %s --json", test_fixture("test_linear.h5"), wav);
    CU_ASSERT_EQUAL(runf(a), 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "audio_s")), 2.0, 1e-9);
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(j, "text"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    char want[256];
    snprintf(want, sizeof want, "%s", text);
    cJSON_Delete(j);
    /* a file name that is not UTF-8 (any byte but '/' and NUL is allowed): the JSON line stays
     * UTF-8, the name's ill-formed bytes U+FFFD (before, raw: no JSON parser read the line) */
    const char *odd = test_tmppath("cli_\xff\xe9.wav");
    x = malloc(16000 * sizeof *x);
    for (int i = 0; x && i < 16000; i++) x[i] = 0.1f * (float)((i % 50) - 25) / 25.0f;
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(odd, x, 16000, 16000), SR_OK);
    free(x);
    snprintf(a, sizeof a, "transcribe %s '%s' --json", test_fixture("test_linear.h5"), odd);
    CU_ASSERT_EQUAL(runf(a), 0);
    j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(j, "file"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(file);
    CU_ASSERT_PTR_NOT_NULL(strstr(file, "cli_\xef\xbf\xbd\xef\xbf\xbd.wav"));
    cJSON_Delete(j);
    remove(odd);
    /* stream's final line carries the same text as transcribe */
    snprintf(a, sizeof a, "stream %s %s --feed-ms 30", test_fixture("test_linear.h5"), wav);
    CU_ASSERT_EQUAL(runf(a), 0);
    char *fin = strstr(out, "final ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fin);
    fin += 6;
    char *nl = strchr(fin, '\n');
    if (nl) *nl = '\0';
    CU_ASSERT_STRING_EQUAL(fin, want);
    snprintf(a, sizeof a, "transcribe %s %s --decoder nope", test_fixture("test_linear.h5"), wav);
    expect(runf(a), 1, "sync_greedy", "unknown decoder lists the known ones");
    snprintf(a, sizeof a, "transcribe %s /nonexistent.wav", test_fixture("test_linear.h5"));
    expect(runf(a), 1, "/nonexistent.wav", "missing audio named");
    snprintf(a, sizeof a, "transcribe %s %s --beam x", test_fixture("test_linear.h5"), wav);
    expect(runf(a), 2, "--beam", "bad option value");
    /* a model without a digest runs, with the warning on stderr; a damaged one stops */
    snprintf(a, sizeof a, "transcribe %s %s", test_fixture("test_linear_nodigest.h5"), wav);
    expect(runf(a), 0, "warning: ", "missing digest warned");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no srkit digest"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    const char *bad = test_tmppath("cli_flipped.h5");
    char *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(test_fixture("test_linear.h5"), &buf, &len), SR_OK);
    buf[len / 2] ^= 0x04;
    FILE *fp = fopen(bad, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    CU_ASSERT_EQUAL(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    free(buf);
    snprintf(a, sizeof a, "transcribe %s %s", bad, wav);
    expect(runf(a), 1, "cli_flipped.h5: corrupt", "damaged model refused");
    snprintf(a, sizeof a, "info %s", bad);
    expect(runf(a), 1, "corrupt", "info on a damaged model");
    /* Voxtral's random-weight fixture picks lone byte tokens (tekken 0x80-0xFF): the JSON text
     * is UTF-8 all the same, those bytes printed as U+FFFD (before, the raw bytes made the
     * line unreadable to any JSON parser) */
    snprintf(a, sizeof a, "transcribe %s %s --json", test_fixture("voxtral/micro.h5"), wav);
    CU_ASSERT_EQUAL(runf(a), 0);
    j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    text = cJSON_GetStringValue(cJSON_GetObjectItem(j, "text"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    sr_strbuf u = {0};
    CU_ASSERT_EQUAL(sr_strbuf_append(&u, text, strlen(text)), SR_OK);
    CU_ASSERT_EQUAL(sr_strbuf_utf8_repair(&u, 0), SR_OK);
    CU_ASSERT(u.len == strlen(text) && !memcmp(u.data, text, u.len)); /* nothing to repair */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\xef\xbf\xbd"));
    sr_strbuf_free(&u);
    cJSON_Delete(j);
}

static void test_eval_list_runs(void)
{
    char a[1024];
    snprintf(a, sizeof a, "SRKIT_HOME=/tmp/srkit-home %s eval configs/whisper-chunk-sweep.json --list-runs", bin());
    int rc = run(a, out, sizeof out);
    if (test_shared("librispeech-sample")) { /* the data block is read: its size is listed */
        CU_ASSERT_EQUAL(rc, 0);
        int lines = 0;
        for (char *p = out; (p = strchr(p, '\n')); p++) lines++;
        CU_ASSERT_EQUAL(lines, 6);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "(librispeech, 10 utterances)"));
    } else { /* and a missing one is an error naming it */
        CU_ASSERT_EQUAL(rc, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "librispeech-sample"));
    }
    /* --list-runs reads the data: a wrong path, or a format the path does not look like */
    const char *cfg = test_tmppath("list.json");
    FILE *cf = fopen(cfg, "w");
    fprintf(cf, "{\"name\": \"x\", \"model\": {\"path\": \"m.h5\"}, \"data\": {\"path\": \"%s\"}}",
            test_tmppath("no-such-data"));
    fclose(cf);
    snprintf(a, sizeof a, "eval %s --list-runs", cfg);
    expect(runf(a), 1, "no-such-data", "--list-runs on a missing data path");
    cf = fopen(cfg, "w");
    fprintf(cf, "{\"name\": \"x\", \"model\": {\"path\": \"m.h5\"}, \"data\": {\"format\": \"manifest\", \"path\": \"%s\"}}",
            test_fixture("eval/kaldi/segments"));
    fclose(cf);
    snprintf(a, sizeof a, "eval %s --list-runs", cfg);
    expect(runf(a), 1, "looks like kaldi data", "--list-runs with a wrong explicit format");
    cf = fopen(cfg, "w"); /* format left out: told from the path */
    fprintf(cf, "{\"name\": \"x\", \"model\": {\"path\": \"m.h5\"}, \"data\": {\"path\": \"%s\"}}",
            test_fixture("eval/kaldi/segments"));
    fclose(cf);
    snprintf(a, sizeof a, "eval %s --list-runs", cfg);
    expect(runf(a), 0, "(kaldi, ", "--list-runs detects the format");
    snprintf(a, sizeof a, "SRKIT_HOME=/nonexistent/srkit-home %s eval configs/quickstart.json --output %s", bin(),
             test_tmppath("qs-missing"));
    CU_ASSERT_EQUAL(run(a, out, sizeof out), 1); /* no data there: a clear error, not a crash */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "/nonexistent/srkit-home"));
    const char *bad = test_tmppath("bad.json");
    FILE *f = fopen(bad, "w");
    fputs("{\"name\": \"x\", \"model\": {\"path\": 3}}", f);
    fclose(f);
    snprintf(a, sizeof a, "eval %s --list-runs", bad);
    expect(runf(a), 1, "model.path", "config type error names the field");
}

static void test_bench_gemm(void)
{
    expect(runf("bench gemm --threads 1"), 0, "GFLOP/s", "bench gemm");
    expect(runf("bench gemm --device tpu"), 1, "tpu", "bench on an unknown device");
    /* the tensor-core table alone is the CUDA table's: on the CPU a usage error naming it */
    expect(runf("bench gemm --tensor-cores"), 2, "--tensor-cores needs --device cuda", "bench gemm --tensor-cores on cpu");
    /* --keys: every shape over that many keys; out of range a usage error */
    CU_ASSERT_EQUAL(runf("bench attn --threads 1 --streams 1 --keys 40"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "      1     1     40  32/8    128 |"));
    expect(runf("bench attn --keys 0"), 2, "--keys 0 out of 1..8192", "bench attn --keys 0");
    /* attn: fused vs unfused at the families' shapes (decoders, encoders); their outputs agree */
    int rc = runf("bench attn --threads 1 --streams 2");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Voxtral mini-4b"));
    int rows = 0;
    for (const char *p = out; (p = strstr(p, "x | ")); p += 4) {
        /* "ratio x | GB/s | max |diff|" */
        double gbs = atof(p + 4);
        const char *d = strstr(p + 4, "| ");
        CU_ASSERT_FATAL(d != NULL);
        double diff = atof(d + 2);
        CU_ASSERT(gbs > 0);
        CU_ASSERT(diff >= 0 && diff < 1e-5);
        rows++;
    }
    CU_ASSERT_EQUAL(rows, 4); /* the 1,500-row Whisper encoder: timed at one stream only */
    expect(runf("bench attn --streams 0"), 2, "--streams 0 out of 1..4096", "bench attn bad --streams");
    /* --forms: the CUDA kernel's forms, each once, on the CUDA table only */
    expect(runf("bench attn --device cuda --forms auto,fast"), 2, "\"fast\" unknown (forms: narrow",
           "bench attn --forms fast");
    expect(runf("bench attn --device cuda --forms split,auto,split"), 2, "\"split\" twice",
           "bench attn --forms twice");
    expect(runf("bench attn --forms auto,split"), 2, "needs --device cuda", "bench attn --forms on the CPU");
}

/* bench --streams: the batched engine's figures as JSON, and its usage errors. */
static void test_bench_streams(void)
{
    const char *wav = test_tmppath("bench.wav");
    float *x = malloc(16000 * sizeof *x);
    for (int i = 0; i < 16000; i++) x[i] = (float)(0.3 * ((i * 7919 % 200) / 100.0 - 1.0));
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(wav, x, 16000, 16000), SR_OK);
    free(x);
    const char *mdl = test_fixture("test_linear.h5");
    char a[2048];
    const char *modes[2] = {"", "--separate"};
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "bench --streams 3 %s --model %s --audio %s --json", modes[k], mdl, wav);
        CU_ASSERT_EQUAL(runf(a), 0);
        cJSON *j = cJSON_Parse(out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "streams")), 3);
        CU_ASSERT_EQUAL(cJSON_IsTrue(cJSON_GetObjectItem(j, "batched")), k == 0);
        CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "audio_s")), 3.0, 1e-9);
        double wall = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "wall_s"));
        CU_ASSERT(wall > 0);
        CU_ASSERT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "open_s")) > 0);
        CU_ASSERT_DOUBLE_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "rtfx")), 3.0 / wall, 1e-6 * 3.0 / wall);
        CU_ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(j, "chunk_ms_p99")));
        CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(j, "realtime_ok"));
        /* the unset fields as the stream resolved them: test_linear's own decoder */
        const cJSON *r = cJSON_GetObjectItem(j, "resolved");
        CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(j, "decoder")));
        CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(r, "decoder")), "sync_greedy");
        cJSON_Delete(j);
    }
    /* real time: 2.5 s of audio at its own pace */
    const char *wav25 = test_tmppath("bench25.wav");
    x = malloc(40000 * sizeof *x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    for (int i = 0; i < 40000; i++) x[i] = (float)(0.3 * ((i * 7919 % 200) / 100.0 - 1.0));
    CU_ASSERT_EQUAL_FATAL(sr_audio_write_wav(wav25, x, 40000, 16000), SR_OK);
    free(x);
    snprintf(a, sizeof a, "bench --streams 2 --realtime --model %s --audio %s --json", mdl, wav25);
    CU_ASSERT_EQUAL(runf(a), 0);
    cJSON *j = cJSON_Parse(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "wall_s")) >= 2.5);
    /* the steady state: the chunks ending in [1 s, 1.5 s] of each stream, fewer than all */
    double steady = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "steady_chunks"));
    CU_ASSERT(steady >= 2 && steady < cJSON_GetNumberValue(cJSON_GetObjectItem(j, "n_chunks")));
    CU_ASSERT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "steady_latency_ms_p99")) > 0.0);
    CU_ASSERT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "steady_latency_ms_p99")) <=
              cJSON_GetNumberValue(cJSON_GetObjectItem(j, "latency_ms_max")));
    CU_ASSERT(cJSON_IsBool(cJSON_GetObjectItem(j, "realtime_ok")));
    CU_ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(j, "latency_ms_p90")));
    /* the chunks before the final ones: a subset, so no higher a p99 than all chunks' */
    double pp99 = cJSON_GetNumberValue(cJSON_GetObjectItem(j, "partial_latency_ms_p99"));
    CU_ASSERT(pp99 > 0.0);
    CU_ASSERT(pp99 <= cJSON_GetNumberValue(cJSON_GetObjectItem(j, "latency_ms_max")));
    /* the engine's steps: each stream's chunk in exactly one step of at most the 2 streams, a
     * share of the wall, ordered percentiles, the steady ones among them */
    {
#define JN(k) cJSON_GetNumberValue(cJSON_GetObjectItem(j, k))
        const double n = JN("engine_steps"), busy = JN("engine_busy");
        CU_ASSERT(n >= 1);
        CU_ASSERT_DOUBLE_EQUAL(JN("step_streams_mean") * n, JN("n_chunks"), 1e-6);
        CU_ASSERT(JN("step_streams_max") >= 1 && JN("step_streams_max") <= 2);
        CU_ASSERT(busy > 0 && busy <= 1);
        CU_ASSERT(JN("step_ms_p50") > 0 && JN("step_ms_p50") <= JN("step_ms_p99") &&
                  JN("step_ms_p99") <= JN("step_ms_max"));
        CU_ASSERT(JN("steady_steps") <= n && JN("steady_step_ms_p99") <= JN("step_ms_max"));
#undef JN
    }
    cJSON_Delete(j);
    /* --repeat with --streams: each run of the one loaded model reported, the same text */
    snprintf(a, sizeof a, "bench --streams 2 --repeat 2 --model %s --audio %s --json", mdl, wav);
    CU_ASSERT_EQUAL(runf(a), 0);
    {
        char *second = strchr(out, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(second);
        *second++ = '\0';
        cJSON *r0 = cJSON_Parse(out), *r1 = cJSON_Parse(second);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
        CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(r0, "run")), 0);
        CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(r1, "run")), 1);
        CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(r1, "streams")), 2);
        CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(r0, "text_stream0")),
                               cJSON_GetStringValue(cJSON_GetObjectItem(r1, "text_stream0")));
        CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(r0, "variant"));
        cJSON_Delete(r0);
        cJSON_Delete(r1);
    }
    /* one stream's pass split at the end of the feed: fed_s + finish_ms make compute_s, rtf_fed
     * is fed_s over the audio */
    snprintf(a, sizeof a, "bench --repeat 2 --model %s --audio %s --json", mdl, wav);
    CU_ASSERT_EQUAL(runf(a), 0);
    {
        cJSON *r = cJSON_Parse(out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
#define JN(k) cJSON_GetNumberValue(cJSON_GetObjectItem(r, k))
        const double fed = JN("fed_s"), fin = JN("finish_ms"), all = JN("compute_s");
        CU_ASSERT(fed > 0 && fin >= 0 && fed <= all);
        CU_ASSERT_DOUBLE_EQUAL(fed + fin / 1e3, all, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(JN("rtf_fed"), fed / JN("audio_s"), 1e-12);
#undef JN
        cJSON_Delete(r);
    }
    /* SRKIT_PROFILE: one stream's fed chunks and finishes in tables of their own (test_linear:
     * one product a chunk; 1 s is 12 chunks fed and one more at the finish, each run), each with
     * the ops' time against the wall */
    CU_ASSERT_EQUAL(runv("SRKIT_PROFILE=1 %s bench --repeat 2 --model %s --audio %s", bin(), mdl, wav), 0);
    {
        const char *fed = strstr(out, "24 fed chunks (the steps)"), *fin = strstr(out, "2 finishes (the steps)");
        CU_ASSERT(fed && fin && fed < fin);
        if (fed && fin && fed < fin) {
            CU_ASSERT(strncmp(strstr(fed, "\ngemm") + 1, "gemm                   24        1.0", 36) == 0);
            CU_ASSERT(strncmp(strstr(fin, "\ngemm") + 1, "gemm                    2        1.0", 36) == 0);
            /* each table closes with the ops' share of its span's wall time */
            const char *w1 = strstr(fed, "\nall ops "), *w2 = strstr(fin, "\nall ops ");
            CU_ASSERT(w1 && w1 < fin && w2);
            double ops = 0, wall = 0;
            const int got = w2 ? sscanf(w2 + 9, "%lf ms a step of a wall of %lf", &ops, &wall) : 0;
            /* (printed to 1 us: a test_linear finish's one product takes less) */
            const int ok = got == 2 && wall > 0 && ops >= 0 && ops <= wall + 0.0015;
            CU_ASSERT(ok);
            if (!ok) printf("\n      the finishes' wall line: %.60s\n", w2 ? w2 + 1 : "(none)");
        } else {
            printf("\n      SRKIT_PROFILE=1 srkit bench --repeat 2:\n%s\n", out);
        }
    }
    /* usage errors, each named (--cuda-variants: a term it does not know, an empty variant, a
     * stream not on the CUDA table) */
    static const struct { const char *opts, *said, *what; } bad[] = {
        {"--separate", "--streams", "--separate without --streams"},
        {"--streams 2 --separate --realtime", "drop --separate", "--separate with --realtime"},
        {"--streams 0", "1..4096", "--streams 0"},
        {"--cuda-variants plain,pdl+fast --device cuda", "\"fast\" unknown (known: plain, pdl, graph",
         "--cuda-variants fast"},
        {"--cuda-variants plain,,pdl --device cuda", "an empty or over-long variant",
         "--cuda-variants with an empty variant"},
        {"--cuda-variants plain,pdl", "times streams on --device cuda", "--cuda-variants on the CPU"},
        {"--cuda-variants split --streams 2", "times streams on --device cuda",
         "--cuda-variants with --streams on the CPU"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(a, sizeof a, "bench %s --model %s --audio %s", bad[i].opts, mdl, wav);
        expect(runf(a), 2, bad[i].said, bad[i].what);
    }
}

/* The defaults each command documents, and what they are for real tiny.en (vanilla weights):
 * `transcribe MODEL jfk.wav` without options prints openai's text (offline + aed_greedy), says
 * so on stderr and in --json; `stream MODEL --help` names the live defaults. */
static void test_defaults(void)
{
    expect(runf("transcribe --help"), 0, "offline + aed_greedy for vanilla Whisper weights", "transcribe --help");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "whisperrt + stable_greedy for causal ones"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--no-repetition-guard"));
    expect(runf("stream --help"), 0, "reencode + local_agreement (1000 ms chunks) for vanilla Whisper weights",
           "stream --help");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "whisperrt + stable_greedy for causal ones"));
    const char *model = test_tiny_en_path(), *jfk = test_shared("speech-samples/jfk.wav");
    const char *ref = test_shared("speech-samples/jfk.reference.txt");
    if (!model || !jfk || !ref) {
        TEST_SKIP("~/.cache/srkit/models/whisper-tiny.en.h5 or ../shared/data absent (make models)");
        return;
    }
    char a[2048];
    snprintf(a, sizeof a, "stream %s --help", model);
    expect(runf(a), 0, "strategy reencode (1000 ms chunks, first 2000 ms), decoder local_agreement",
           "stream MODEL --help");
    snprintf(a, sizeof a, "transcribe %s --help", model);
    expect(runf(a), 0, "strategy offline, decoder aed_greedy; vanilla Whisper weights", "transcribe MODEL --help");
    /* no options: the text (stdout) and the choice (stderr) */
    snprintf(a, sizeof a, "OPENBLAS_NUM_THREADS=2 %s transcribe %s %s", bin(), model, jfk);
    CU_ASSERT_EQUAL(run(a, out, sizeof out), 0);
    const char *want = " And so my fellow Americans ask not what your country can do for you, ask what you can do for your country.\n";
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "vanilla Whisper weights (no causal config.streaming): strategy offline, decoder aed_greedy"));
    /* the same text as the reference, after the normalizer eval scores with */
    char *rtext = NULL, *rn = NULL, *hn = NULL;
    sr_normalizer *nz = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_read_file(ref, &rtext, NULL), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create("whisper_en", NULL, &nz), SR_OK);
    CU_ASSERT_EQUAL(sr_normalize(nz, rtext, &rn), SR_OK);
    CU_ASSERT_EQUAL(sr_normalize(nz, want, &hn), SR_OK);
    CU_ASSERT(rn && hn && !strcmp(rn, hn));
    if (rn && hn && strcmp(rn, hn)) printf("\n      reference \"%s\", got \"%s\"\n", rn, hn);
    free(rtext);
    free(rn);
    free(hn);
    sr_normalizer_free(nz);
    snprintf(a, sizeof a, "OPENBLAS_NUM_THREADS=2 %s transcribe %s %s --json", bin(), model, jfk);
    CU_ASSERT_EQUAL(run(a, out, sizeof out), 0);
    const char *brace = strchr(out, '{');
    cJSON *j = brace ? cJSON_Parse(brace) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "strategy")), "offline");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "decoder")), "aed_greedy");
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "repetition_cuts")), 0);
    cJSON_Delete(j);
    /* options still choose: whisperrt loops on these weights and the guard cuts it */
    snprintf(a, sizeof a, "OPENBLAS_NUM_THREADS=2 %s transcribe %s %s --strategy whisperrt --json",
             bin(), model, jfk);
    CU_ASSERT_EQUAL(run(a, out, sizeof out), 0);
    brace = strchr(out, '{');
    j = brace ? cJSON_Parse(brace) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "decoder")), "stable_greedy");
    CU_ASSERT(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "repetition_cuts")) > 0);
    cJSON_Delete(j);
}

void test_register_cli(void)
{
    TEST_SUITE("cli_srkit",
               {"help, usage and exit codes", test_help_and_usage},
               {"usage errors exit 2", test_usage_errors},
               {"info (human and JSON) and bad files", test_info},
               {"Python writer -> srkit info", test_python_writer_roundtrip},
               {"transcribe and stream agree", test_transcribe_and_stream},
               {"eval --list-runs expands sweeps", test_eval_list_runs},
               {"bench gemm runs", test_bench_gemm},
               {"bench --streams (batched, separate, real time)", test_bench_streams},
               {"model defaults (help, tiny.en jfk)", test_defaults});
}
