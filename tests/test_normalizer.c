/*
 * test_normalizer.c — suite eval_normalizer: the whisper_en / basic / none normalizers against
 * the golden pairs produced by openai-whisper (tests/fixtures/normalizer_golden.jsonl, written by
 * scripts/gen_golden_normalizer.py), plus bad input, the spelling-map loader and concurrent use.
 *
 * The whisper_en goldens need the spelling map (scripts/fetch_assets.sh installs it into
 * $SRKIT_HOME/assets); they are skipped with a message when it is absent. The map mechanism
 * itself is also tested with a small map written here.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "../core/internal.h"
#include "../eval/normalizer.h"
#include "test.h"

typedef struct {
    char *in, *whisper_en, *basic;
} golden;

static golden *goldens;
static size_t n_goldens;
static int goldens_loaded; /* 0 not tried, 1 ok, -1 failed */

static void free_goldens(void)
{
    for (size_t i = 0; i < n_goldens; i++) {
        free(goldens[i].in);
        free(goldens[i].whisper_en);
        free(goldens[i].basic);
    }
    free(goldens);
    goldens = NULL;
    n_goldens = 0;
}

/* Read the golden JSONL once (the first line is a {"meta": ...} header). */
static int load_goldens(void)
{
    if (goldens_loaded) return goldens_loaded > 0;
    goldens_loaded = -1;
    char *data = NULL;
    size_t len = 0;
    const char *path = test_fixture("normalizer_golden.jsonl");
    if (sr_read_file(path, &data, &len) != SR_OK) {
        printf("\n      cannot read %s: %s\n", path, sr_last_error());
        return 0;
    }
    size_t cap = 0;
    char *line = data;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (*line) {
            cJSON *o = cJSON_Parse(line);
            if (!o) {
                printf("\n      %s: bad JSON line\n", path);
                free(data);
                return 0;
            }
            const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "in");
            const cJSON *we = cJSON_GetObjectItemCaseSensitive(o, "whisper_en");
            const cJSON *ba = cJSON_GetObjectItemCaseSensitive(o, "basic");
            if (cJSON_IsString(in) && cJSON_IsString(we) && cJSON_IsString(ba)) {
                if (n_goldens == cap) {
                    cap = cap ? 2 * cap : 512;
                    golden *g = realloc(goldens, cap * sizeof *g);
                    if (!g) abort();
                    goldens = g;
                }
                goldens[n_goldens].in = strdup(in->valuestring);
                goldens[n_goldens].whisper_en = strdup(we->valuestring);
                goldens[n_goldens].basic = strdup(ba->valuestring);
                n_goldens++;
            } else if (!cJSON_GetObjectItemCaseSensitive(o, "meta")) {
                printf("\n      %s: line without in/whisper_en/basic strings\n", path);
                cJSON_Delete(o);
                free(data);
                return 0;
            }
            cJSON_Delete(o);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    atexit(free_goldens);
    goldens_loaded = 1;
    return 1;
}

/* The installed spelling map, or NULL (callers skip). */
static const char *installed_map(void)
{
    static char path[4096];
    if (sr_normalizer_default_map_path(path, sizeof path) != SR_OK) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fclose(f);
    return path;
}

/* Run every golden through n; print each difference; return the number of mismatches. */
static size_t check_goldens(const sr_normalizer *n, int whisper, size_t *checked)
{
    size_t bad = 0;
    *checked = 0;
    for (size_t i = 0; i < n_goldens; i++) {
        const char *want = whisper ? goldens[i].whisper_en : goldens[i].basic;
        char *got = NULL;
        sr_status st = sr_normalize(n, goldens[i].in, &got);
        (*checked)++;
        if (st != SR_OK || strcmp(got, want)) {
            printf("\n      %s mismatch: in \"%s\"\n        want \"%s\"\n        got  \"%s\" %s",
                   sr_normalizer_name(n), goldens[i].in, want, st ? "(error)" : got,
                   st ? sr_last_error() : "");
            bad++;
        }
        free(got);
    }
    return bad;
}

static void test_golden_basic(void)
{
    CU_ASSERT_FATAL(load_goldens());
    CU_ASSERT(n_goldens >= 300);
    sr_normalizer *n = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create("basic", NULL, &n), SR_OK);
    size_t checked = 0, bad = check_goldens(n, 0, &checked);
    printf("\n      basic: %zu/%zu golden cases match\n      ", checked - bad, checked);
    CU_ASSERT_EQUAL(bad, 0);
    sr_normalizer_free(n);
}

static void test_golden_whisper_en(void)
{
    CU_ASSERT_FATAL(load_goldens());
    const char *map = installed_map();
    if (!map) {
        TEST_SKIP("spelling map not installed (run scripts/fetch_assets.sh)");
        return;
    }
    sr_normalizer *n = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create("whisper_en", NULL, &n), SR_OK);
    size_t checked = 0, bad = check_goldens(n, 1, &checked);
    printf("\n      whisper_en: %zu/%zu golden cases match\n      ", checked - bad, checked);
    CU_ASSERT_EQUAL(bad, 0);
    sr_normalizer_free(n);
}

/* Write text to a temporary file and return its path. */
static const char *write_tmp(const char *name, const char *text)
{
    const char *p = test_tmppath(name);
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static void expect(const sr_normalizer *n, const char *in, const char *want)
{
    char *got = NULL;
    CU_ASSERT_EQUAL(sr_normalize(n, in, &got), SR_OK);
    if (!got || strcmp(got, want)) {
        printf("\n      %s(\"%s\"): got \"%s\", want \"%s\"\n", sr_normalizer_name(n), in,
               got ? got : "(null)", want);
        CU_FAIL("normalized text");
    }
    free(got);
}

/* A small hand-written map: spelling applies after numbers, whole words only, last duplicate
 * wins (like json.load), non-ASCII keys work (expected texts checked with openai-whisper given
 * the same map). */
static void test_small_map(void)
{
    const char *p = write_tmp("map_small.json",
                              "{\"colour\": \"color\", \"grey\": \"gray\", \"grey\": \"grAy\","
                              " \"naive\": \"naïf\", \"1st\": \"first!\"}");
    sr_normalizer *n = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create("whisper_en", p, &n), SR_OK);
    CU_ASSERT_STRING_EQUAL(sr_normalizer_name(n), "whisper_en");
    expect(n, "The Colour GREY, colours.", "the color grAy colours");
    expect(n, "Naïve!", "naïf");
    expect(n, "the first one", "the first! one");
    expect(n, "", "");
    sr_normalizer_free(n);
}

static void test_none_identity(void)
{
    sr_normalizer *n = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create("none", NULL, &n), SR_OK);
    CU_ASSERT_STRING_EQUAL(sr_normalizer_name(n), "none");
    expect(n, "  Hello,  World! [x] (y) colour\t\n", "  Hello,  World! [x] (y) colour\t\n");
    expect(n, "", "");
    expect(n, "Ærø – “q”", "Ærø – “q”");
    sr_normalizer_free(n);
}

/* whisper_en facts that hold whatever the map holds (an empty map here); the expected texts
 * are what openai-whisper 20250625 gives with an empty spelling map. */
static void test_whisper_rules(void)
{
    const char *p = write_tmp("map_empty.json", "{}");
    sr_normalizer *n = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create("whisper_en", p, &n), SR_OK);
    expect(n, "Twenty-five dollars and fifty cents.", "$25.50");
    expect(n, "Mr. Smith won't [inaudible] go (laughs) uh now", "mister smith will not go now");
    expect(n, "one hundred and first", "101st");
    expect(n, "1,000,000 people", "1000000 people");
    expect(n, "José Müller ØÆ", "jose muller oae");
    expect(n, "five percent", "5%");
    expect(n, "nineteen ninety", "1990");
    expect(n, "one point five", "one.5"); /* "1" is written "one" again, as in the original */
    /* arbitrary precision: past 2^64 and past 2^128 */
    expect(n, "twenty decillion five", "20000000000000000000000000000000005");
    expect(n, "one two three four five six seven eight nine one two three four five six seven "
              "eight nine one two three four five six seven eight nine decillion",
           "123456789123456789123456789000000000000000000000000000000000");
    sr_normalizer_free(n);
}

static void test_bad_utf8(void)
{
    static const char *const bad[] = {
        "abc\x80",          /* lone continuation byte */
        "ab\xc3",           /* truncated 2-byte sequence */
        "\xc0\xaf",         /* overlong '/' */
        "x\xed\xa0\x80y",   /* UTF-16 surrogate */
        "\xf4\x90\x80\x80", /* past U+10FFFF */
        "\xff",
    };
    const char *p = write_tmp("map_empty2.json", "{}");
    for (size_t k = 0; k < 3; k++) {
        sr_normalizer *n = NULL;
        CU_ASSERT_EQUAL_FATAL(sr_normalizer_create(sr_normalizer_name_at(k), p, &n), SR_OK);
        for (size_t i = 0; i < SR_ARRAY_LEN(bad); i++) {
            char *out = (char *)"sentinel";
            TEST_ASSERT_ERR(sr_normalize(n, bad[i], &out), SR_ERR_ARG, "not valid UTF-8");
            CU_ASSERT_PTR_NULL(out);
        }
        char *out = NULL;
        TEST_ASSERT_ERR(sr_normalize(n, "abc\x80", &out), SR_ERR_ARG, "byte 3");
        TEST_ASSERT_ERR(sr_normalize(n, NULL, &out), SR_ERR_ARG, "text");
        TEST_ASSERT_ERR(sr_normalize(n, "x", NULL), SR_ERR_ARG, "out");
        TEST_ASSERT_ERR(sr_normalize(NULL, "x", &out), SR_ERR_ARG, "normalizer");
        sr_normalizer_free(n);
    }
}

static void test_create_errors(void)
{
    sr_normalizer *n = (sr_normalizer *)1;
    TEST_ASSERT_ERR(sr_normalizer_create("whisper_fr", NULL, &n), SR_ERR_ARG, "whisper_fr");
    CU_ASSERT_PTR_NULL(n);
    CU_ASSERT(strstr(sr_last_error(), "whisper_en, basic, none") != NULL);
    TEST_ASSERT_ERR(sr_normalizer_create("basic", NULL, NULL), SR_ERR_ARG, "out");

    const char *missing = test_tmppath("no_such_map.json");
    TEST_ASSERT_ERR(sr_normalizer_create("whisper_en", missing, &n), SR_ERR_IO, missing);
    CU_ASSERT(strstr(sr_last_error(), "fetch_assets.sh") != NULL);
    CU_ASSERT_PTR_NULL(n);

    const char *notjson = write_tmp("map_bad.json", "{\"colour\": \"color\",");
    TEST_ASSERT_ERR(sr_normalizer_create("whisper_en", notjson, &n), SR_ERR_FORMAT, notjson);
    const char *array = write_tmp("map_array.json", "[\"colour\", \"color\"]");
    TEST_ASSERT_ERR(sr_normalizer_create("whisper_en", array, &n), SR_ERR_FORMAT, "JSON object");
    const char *num = write_tmp("map_num.json", "{\"colour\": \"color\", \"grey\": 7}");
    TEST_ASSERT_ERR(sr_normalizer_create("whisper_en", num, &n), SR_ERR_FORMAT, "\"grey\"");
    const char *surrogate = write_tmp("map_sur.json", "{\"a\\ud800\": \"b\"}");
    TEST_ASSERT_ERR(sr_normalizer_create("whisper_en", surrogate, &n), SR_ERR_FORMAT, surrogate);
    CU_ASSERT_PTR_NULL(n);

    /* basic and none never read a map */
    CU_ASSERT_EQUAL(sr_normalizer_create("basic", missing, &n), SR_OK);
    sr_normalizer_free(n);
    sr_normalizer_free(NULL);
    CU_ASSERT_PTR_NULL(sr_normalizer_name_at(3));
}

static void test_default_path(void)
{
    char buf[256];
    const char *old = getenv("SRKIT_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("SRKIT_HOME", "/opt/srk", 1);
    CU_ASSERT_EQUAL(sr_normalizer_default_map_path(buf, sizeof buf), SR_OK);
    CU_ASSERT_STRING_EQUAL(buf, "/opt/srk/assets/whisper_english.json");
    TEST_ASSERT_ERR(sr_normalizer_default_map_path(buf, 8), SR_ERR_ARG, "longer than 8");
    /* the default path is used when none is given: the error names it */
    sr_normalizer *n = NULL;
    TEST_ASSERT_ERR(sr_normalizer_create(NULL, NULL, &n), SR_ERR_IO,
                    "/opt/srk/assets/whisper_english.json");
    if (saved) {
        setenv("SRKIT_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("SRKIT_HOME");
    }
}

/* One normalizer shared by 4 threads, each running all goldens: results must all match. */
typedef struct {
    const sr_normalizer *n;
    int whisper;
    size_t bad;
} thread_arg;

static void *thread_main(void *p)
{
    thread_arg *a = p;
    for (size_t i = 0; i < n_goldens; i++) {
        const char *want = a->whisper ? goldens[i].whisper_en : goldens[i].basic;
        char *got = NULL;
        if (sr_normalize(a->n, goldens[i].in, &got) != SR_OK || strcmp(got, want)) a->bad++;
        free(got);
    }
    return NULL;
}

static void test_threads(void)
{
    CU_ASSERT_FATAL(load_goldens());
    const char *map = installed_map();
    int whisper = map != NULL;
    sr_normalizer *n = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_normalizer_create(whisper ? "whisper_en" : "basic", map, &n), SR_OK);
    pthread_t th[4];
    thread_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (thread_arg){n, whisper, 0};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, thread_main, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CU_ASSERT_EQUAL(args[t].bad, 0);
    }
    sr_normalizer_free(n);
}

void test_register_eval_norm(void)
{
    TEST_SUITE("eval_normalizer", {"golden_basic", test_golden_basic},
               {"golden_whisper_en", test_golden_whisper_en}, {"small_map", test_small_map},
               {"none_identity", test_none_identity}, {"whisper_rules", test_whisper_rules},
               {"bad_utf8", test_bad_utf8}, {"create_errors", test_create_errors},
               {"default_path", test_default_path}, {"threads", test_threads});
}
