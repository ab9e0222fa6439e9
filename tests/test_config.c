/*
 * test_config.c — experiment configs (core/config.c): every schema rule with a good and a bad
 * value, JSON syntax errors with line/column, unknown-key warnings, ${VAR} expansion, sweep
 * expansion (count, order, run names, per-value type checks), defaults, integers written as
 * floats, the JSON echo, and every example file in configs/.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* A minimal valid config with extra members spliced into model, data and the top level. */
static sr_status parse_with(const char *model_extra, const char *data_extra,
                            const char *top_extra, sr_config **out)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"name\": \"n\", \"model\": {\"path\": \"m.h5\"%s}, \"data\": {\"path\": \"d\"%s}%s}",
             model_extra, data_extra, top_extra);
    return sr_config_parse(buf, "t.json", out);
}

static sr_status parse_top(const char *top_extra, sr_config **out)
{
    return parse_with("", "", top_extra, out);
}

/* Save and restore one environment variable around a test. */
typedef struct {
    const char *name;
    char *old;
    int was_set;
} saved_env;

static saved_env env_save(const char *name)
{
    saved_env s = {name, NULL, 0};
    const char *v = getenv(name);
    if (v) {
        s.old = strdup(v);
        s.was_set = 1;
    }
    return s;
}

static void env_restore(saved_env *s)
{
    if (s->was_set)
        setenv(s->name, s->old, 1);
    else
        unsetenv(s->name);
    free(s->old);
    s->old = NULL;
}

/* ---- defaults ----------------------------------------------------------------------------- */

static void test_stream_config_init(void)
{
    sr_stream_config s;
    memset(&s, 0x5a, sizeof s);
    sr_stream_config_init(&s);
    CU_ASSERT_PTR_NULL(s.strategy);
    CU_ASSERT_PTR_NULL(s.decoder);
    CU_ASSERT_EQUAL(s.chunk_ms, 0);
    CU_ASSERT_EQUAL(s.first_chunk_ms, 0);
    CU_ASSERT_EQUAL(s.stability_n, 2);
    CU_ASSERT_EQUAL(s.beam, 1);
    CU_ASSERT_EQUAL(s.max_symbols, 0);
    CU_ASSERT_EQUAL(s.att_context[0], 0);
    CU_ASSERT_EQUAL(s.att_context[1], 0);
    CU_ASSERT_EQUAL(s.decoder_kv_cache, 0);
    CU_ASSERT_EQUAL(s.delay_tokens, 0);
    CU_ASSERT_EQUAL(s.record_timeline, 1);
}

static void test_defaults(void)
{
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(parse_top("", &c), SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_runs(c), 1);
    CU_ASSERT_EQUAL(sr_config_n_warnings(c), 0);
    const sr_run_config *r = sr_config_run(c, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_PTR_NULL(sr_config_run(c, 1));
    CU_ASSERT_STRING_EQUAL(r->name, "n");
    CU_ASSERT_STRING_EQUAL(r->sweep_point, "");
    CU_ASSERT_STRING_EQUAL(r->model.path, "m.h5");
    CU_ASSERT_STRING_EQUAL(r->model.device, "cpu");
    CU_ASSERT_EQUAL(r->model.threads, 0);
    CU_ASSERT_STRING_EQUAL(r->model.precision, "f32");
    sr_stream_config want;
    sr_stream_config_init(&want);
    CU_ASSERT_PTR_NULL(r->stream.strategy);
    CU_ASSERT_PTR_NULL(r->stream.decoder);
    CU_ASSERT_EQUAL(r->stream.chunk_ms, want.chunk_ms);
    CU_ASSERT_EQUAL(r->stream.first_chunk_ms, want.first_chunk_ms);
    CU_ASSERT_EQUAL(r->stream.stability_n, want.stability_n);
    CU_ASSERT_EQUAL(r->stream.beam, want.beam);
    CU_ASSERT_EQUAL(r->stream.max_symbols, want.max_symbols);
    CU_ASSERT_EQUAL(r->stream.att_context[0], 0);
    CU_ASSERT_EQUAL(r->stream.att_context[1], 0);
    CU_ASSERT_EQUAL(r->stream.decoder_kv_cache, 0);
    CU_ASSERT_EQUAL(r->stream.delay_tokens, 0);
    CU_ASSERT_EQUAL(r->stream.record_timeline, 1);
    CU_ASSERT_STRING_EQUAL(r->data.format, "auto");
    CU_ASSERT_STRING_EQUAL(r->data.path, "d");
    CU_ASSERT_EQUAL(r->data.limit, 0);
    CU_ASSERT_PTR_NULL(r->alignments);
    CU_ASSERT_STRING_EQUAL(r->normalizer, "whisper_en");
    CU_ASSERT_STRING_EQUAL(r->output, "results/n");
    CU_ASSERT_PTR_NULL(r->baseline.path);
    CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_wer_increase, 0.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_rtf_increase, 0.0, 0);
    sr_config_free(c);
}

static void test_all_fields(void)
{
    const char *js =
        "{\"name\": \"full\","
        " \"model\": {\"path\": \"x.h5\", \"device\": \"cuda\", \"threads\": 3, \"precision\": \"bf16\"},"
        " \"stream\": {\"strategy\": \"cache_aware\", \"decoder\": \"rnnt_beam\", \"chunk_ms\": 160,"
        "   \"first_chunk_ms\": 320, \"stability_n\": 3, \"beam\": 4, \"max_symbols\": 5,"
        "   \"att_context\": [70, 13], \"decoder_kv_cache\": true, \"delay_tokens\": 6,"
        "   \"record_timeline\": false},"
        " \"data\": {\"format\": \"manifest\", \"path\": \"m.jsonl\", \"limit\": 7},"
        " \"alignments\": \"a.ctm\", \"normalizer\": \"basic\", \"output\": \"out/dir\","
        " \"baseline\": {\"path\": \"b.json\", \"max_wer_increase\": 0.25, \"max_rtf_increase\": 0.2}}";
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(js, "full.json", &c), SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_warnings(c), 0);
    const sr_run_config *r = sr_config_run(c, 0);
    CU_ASSERT_STRING_EQUAL(r->name, "full");
    CU_ASSERT_STRING_EQUAL(r->model.path, "x.h5");
    CU_ASSERT_STRING_EQUAL(r->model.device, "cuda");
    CU_ASSERT_EQUAL(r->model.threads, 3);
    CU_ASSERT_STRING_EQUAL(r->model.precision, "bf16");
    CU_ASSERT_STRING_EQUAL(r->stream.strategy, "cache_aware");
    CU_ASSERT_STRING_EQUAL(r->stream.decoder, "rnnt_beam");
    CU_ASSERT_EQUAL(r->stream.chunk_ms, 160);
    CU_ASSERT_EQUAL(r->stream.first_chunk_ms, 320);
    CU_ASSERT_EQUAL(r->stream.stability_n, 3);
    CU_ASSERT_EQUAL(r->stream.beam, 4);
    CU_ASSERT_EQUAL(r->stream.max_symbols, 5);
    CU_ASSERT_EQUAL(r->stream.att_context[0], 70);
    CU_ASSERT_EQUAL(r->stream.att_context[1], 13);
    CU_ASSERT_EQUAL(r->stream.decoder_kv_cache, 1);
    CU_ASSERT_EQUAL(r->stream.delay_tokens, 6);
    CU_ASSERT_EQUAL(r->stream.record_timeline, 0);
    CU_ASSERT_STRING_EQUAL(r->data.format, "manifest");
    CU_ASSERT_STRING_EQUAL(r->data.path, "m.jsonl");
    CU_ASSERT_EQUAL(r->data.limit, 7);
    CU_ASSERT_STRING_EQUAL(r->alignments, "a.ctm");
    CU_ASSERT_STRING_EQUAL(r->normalizer, "basic");
    CU_ASSERT_STRING_EQUAL(r->output, "out/dir");
    CU_ASSERT_STRING_EQUAL(r->baseline.path, "b.json");
    CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_wer_increase, 0.25, 0);
    CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_rtf_increase, 0.2, 0);
    sr_config_free(c);
}

/* ---- every schema rule: a good and a bad case --------------------------------------------- */

typedef struct {
    const char *model, *data, *top; /* model == NULL: top is the whole document */
    sr_status want;
    const char *needle; /* for errors: the field (and type/value) the message must name */
} schema_case;

static const schema_case SCHEMA[] = {
    /* name */
#define DOC(name, model, data) "{\"name\": " name ", \"model\": " model ", \"data\": " data "}"
#define GOOD_MODEL "{\"path\": \"m\"}"
#define GOOD_DATA "{\"path\": \"d\"}"
    {NULL, NULL, DOC("\"run-1.a_b\"", GOOD_MODEL, GOOD_DATA), SR_OK, NULL},
    {NULL, NULL, DOC("5", GOOD_MODEL, GOOD_DATA), SR_ERR_FORMAT, "t.json: name: expected a string, got number"},
    {NULL, NULL, DOC("\"\"", GOOD_MODEL, GOOD_DATA), SR_ERR_ARG, "t.json: name: must not be empty"},
    {NULL, NULL, DOC("\"a/b\"", GOOD_MODEL, GOOD_DATA), SR_ERR_ARG, "name: \"a/b\""},
    {NULL, NULL, DOC("\"..\"", GOOD_MODEL, GOOD_DATA), SR_ERR_ARG, "name: \"..\""},
    {NULL, NULL, DOC("\"a\\tb\"", GOOD_MODEL, GOOD_DATA), SR_ERR_ARG, "name: \"a"},
    /* model */
    {NULL, NULL, DOC("\"n\"", "\"x.h5\"", GOOD_DATA), SR_ERR_FORMAT, "model: expected an object, got string"},
    {NULL, NULL, DOC("\"n\"", "{\"path\": 3}", GOOD_DATA), SR_ERR_FORMAT, "model.path: expected a string, got number"},
    {NULL, NULL, DOC("\"n\"", "{\"path\": \"\"}", GOOD_DATA), SR_ERR_ARG, "model.path: must not be empty"},
    {", \"device\": \"cuda\"", "", "", SR_OK, NULL},
    {", \"device\": \"gpu\"", "", "", SR_ERR_ARG, "model.device: \"gpu\" is not one of cpu, cuda"},
    {", \"device\": null", "", "", SR_ERR_FORMAT, "model.device: expected a string, got null"},
    {", \"threads\": 4", "", "", SR_OK, NULL},
    {", \"precision\": \"bf16\"", "", "", SR_OK, NULL},
    {", \"precision\": \"f16\"", "", "", SR_ERR_ARG, "model.precision: \"f16\" is not one of f32, bf16"},
    {", \"threads\": -1", "", "", SR_ERR_ARG, "model.threads: must be in 0 .. 1024, got -1"},
    {", \"threads\": \"2\"", "", "", SR_ERR_FORMAT, "model.threads: expected an integer, got string"},
    {", \"threads\": 2.5", "", "", SR_ERR_FORMAT, "model.threads: expected an integer, got 2.5"},
    /* stream */
    {"", "", ", \"stream\": []", SR_ERR_FORMAT, "stream: expected an object, got array"},
    {"", "", ", \"stream\": {\"strategy\": \"reencode\"}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"strategy\": null}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"strategy\": 1}", SR_ERR_FORMAT,
     "stream.strategy: expected a string or null, got number"},
    {"", "", ", \"stream\": {\"strategy\": \"\"}", SR_ERR_ARG, "stream.strategy: must not be empty"},
    {"", "", ", \"stream\": {\"decoder\": \"stable_beam\"}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"decoder\": [\"x\"]}", SR_ERR_FORMAT,
     "stream.decoder: expected a string or null, got array"},
    {"", "", ", \"stream\": {\"chunk_ms\": 1}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"chunk_ms\": 0}", SR_ERR_ARG, "stream.chunk_ms: must be in 1 .. 600000, got 0"},
    /* upper bounds: sizes derived from them (samples, bytes) fit an int */
    {"", "", ", \"stream\": {\"chunk_ms\": 2147483647}", SR_ERR_ARG,
     "stream.chunk_ms: must be in 1 .. 600000, got 2147483647"},
    {"", "", ", \"stream\": {\"chunk_ms\": 600000}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"first_chunk_ms\": 600001}", SR_ERR_ARG, "stream.first_chunk_ms: must be in 0 .. 600000"},
    {"", "", ", \"stream\": {\"max_symbols\": 1000000000}", SR_ERR_ARG, "stream.max_symbols: must be in 0 .. 100"},
    {"", "", ", \"stream\": {\"beam\": 65}", SR_ERR_ARG, "stream.beam: must be in 1 .. 64, got 65"},
    {"", "", ", \"stream\": {\"att_context\": [100001, 0]}", SR_ERR_ARG, "stream.att_context[0]: must be in -1 .. 100000"},
    {"", "", ", \"stream\": {\"chunk_ms\": \"300\"}", SR_ERR_FORMAT,
     "t.json: stream.chunk_ms: expected an integer, got string"},
    {"", "", ", \"stream\": {\"chunk_ms\": 300.5}", SR_ERR_FORMAT,
     "stream.chunk_ms: expected an integer, got 300.5"},
    {"", "", ", \"stream\": {\"chunk_ms\": 1e10}", SR_ERR_ARG, "stream.chunk_ms: 10000000000 is out of range"},
    {"", "", ", \"stream\": {\"chunk_ms\": true}", SR_ERR_FORMAT,
     "stream.chunk_ms: expected an integer, got boolean"},
    {"", "", ", \"stream\": {\"first_chunk_ms\": 0}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"first_chunk_ms\": -600}", SR_ERR_ARG, "stream.first_chunk_ms: must be in 0 .. 600000"},
    {"", "", ", \"stream\": {\"stability_n\": 1}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"stability_n\": 0}", SR_ERR_ARG, "stream.stability_n: must be in 1 .. 1000"},
    {"", "", ", \"stream\": {\"beam\": 8}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"beam\": 0}", SR_ERR_ARG, "stream.beam: must be in 1 .. 64, got 0"},
    {"", "", ", \"stream\": {\"beam\": null}", SR_ERR_FORMAT, "stream.beam: expected an integer, got null"},
    {"", "", ", \"stream\": {\"max_symbols\": 0}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"max_symbols\": -2}", SR_ERR_ARG, "stream.max_symbols: must be in 0 .. 100"},
    {"", "", ", \"stream\": {\"att_context\": [0, 0]}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"att_context\": [70]}", SR_ERR_ARG,
     "stream.att_context: expected 2 integers [left, right], got 1"},
    {"", "", ", \"stream\": {\"att_context\": [70, 13, 1]}", SR_ERR_ARG, "stream.att_context: expected 2"},
    {"", "", ", \"stream\": {\"att_context\": [-1, -1]}", SR_OK, NULL}, /* NeMo's "unlimited" */
    {"", "", ", \"stream\": {\"att_context\": [70, -2]}", SR_ERR_ARG, "stream.att_context[1]: must be in -1 .. 100000"},
    {"", "", ", \"stream\": {\"att_context\": [70, \"13\"]}", SR_ERR_FORMAT,
     "stream.att_context[1]: expected an integer, got string"},
    {"", "", ", \"stream\": {\"att_context\": [70.5, 13]}", SR_ERR_FORMAT,
     "stream.att_context[0]: expected an integer, got 70.5"},
    {"", "", ", \"stream\": {\"att_context\": \"70,13\"}", SR_ERR_FORMAT,
     "stream.att_context: expected an array of 2 integers [left, right], got string"},
    {"", "", ", \"stream\": {\"decoder_kv_cache\": false}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"decoder_kv_cache\": 1}", SR_ERR_FORMAT,
     "stream.decoder_kv_cache: expected a boolean (true or false), got number"},
    {"", "", ", \"stream\": {\"delay_tokens\": 6}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"delay_tokens\": -6}", SR_ERR_ARG, "stream.delay_tokens: must be in 0 .. 10000"},
    {"", "", ", \"stream\": {\"max_seconds\": 40}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"max_seconds\": 86401}", SR_ERR_ARG, "stream.max_seconds: must be in 0 .. 86400"},
    {"", "", ", \"stream\": {\"final_steps\": 4}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"final_steps\": -1}", SR_ERR_ARG, "stream.final_steps: must be in 0 .. 100000"},
    {"", "", ", \"stream\": {\"record_timeline\": true}", SR_OK, NULL},
    {"", "", ", \"stream\": {\"record_timeline\": \"yes\"}", SR_ERR_FORMAT,
     "stream.record_timeline: expected a boolean (true or false), got string"},
    /* data */
    {NULL, NULL, DOC("\"n\"", GOOD_MODEL, "1"), SR_ERR_FORMAT, "data: expected an object, got number"},
    {NULL, NULL, DOC("\"n\"", GOOD_MODEL, "{\"path\": [\"d\"]}"), SR_ERR_FORMAT,
     "data.path: expected a string, got array"},
    {"", ", \"format\": \"kaldi\"", "", SR_OK, NULL},
    {"", ", \"format\": \"trn\"", "", SR_OK, NULL},
    {"", ", \"format\": \"wav\"", "", SR_ERR_ARG,
     "data.format: \"wav\" is not one of auto, librispeech, manifest, kaldi, trn"},
    {NULL, NULL, DOC("\"n\"", GOOD_MODEL, "{\"path\": \"\"}"), SR_ERR_ARG, "data.path: must not be empty"},
    {"", ", \"limit\": 10", "", SR_OK, NULL},
    {"", ", \"limit\": -1", "", SR_ERR_ARG, "data.limit: must be in 0 .. 1000000000, got -1"},
    {"", ", \"limit\": \"all\"", "", SR_ERR_FORMAT, "data.limit: expected an integer, got string"},
    /* top-level scalars */
    {"", "", ", \"alignments\": \"a.ctm\"", SR_OK, NULL},
    {"", "", ", \"alignments\": null", SR_OK, NULL},
    {"", "", ", \"alignments\": 5", SR_ERR_FORMAT, "alignments: expected a string or null, got number"},
    {"", "", ", \"alignments\": \"\"", SR_ERR_ARG, "alignments: must not be empty (use null for none)"},
    {"", "", ", \"normalizer\": \"none\"", SR_OK, NULL},
    {"", "", ", \"normalizer\": \"basic\"", SR_OK, NULL},
    {"", "", ", \"normalizer\": \"fancy\"", SR_ERR_ARG,
     "normalizer: \"fancy\" is not one of whisper_en, basic, none"},
    {"", "", ", \"output\": \"r/x\"", SR_OK, NULL},
    {"", "", ", \"output\": 7", SR_ERR_FORMAT, "output: expected a string, got number"},
    {"", "", ", \"output\": \"\"", SR_ERR_ARG, "output: must not be empty"},
    /* baseline */
    {"", "", ", \"baseline\": null", SR_OK, NULL},
    {"", "", ", \"baseline\": {\"path\": \"b.json\"}", SR_OK, NULL},
    {"", "", ", \"baseline\": \"b.json\"", SR_ERR_FORMAT, "baseline: expected an object or null, got string"},
    {"", "", ", \"baseline\": {}", SR_ERR_FORMAT, "missing required field baseline.path"},
    {"", "", ", \"baseline\": {\"path\": 1}", SR_ERR_FORMAT, "baseline.path: expected a string, got number"},
    {"", "", ", \"baseline\": {\"path\": \"b\", \"max_wer_increase\": 0}", SR_OK, NULL},
    {"", "", ", \"baseline\": {\"path\": \"b\", \"max_wer_increase\": -0.1}", SR_ERR_ARG,
     "baseline.max_wer_increase: must be a number in 0 .. 1000000, got -0.1"},
    {"", "", ", \"baseline\": {\"path\": \"b\", \"max_wer_increase\": \"0.2\"}", SR_ERR_FORMAT,
     "baseline.max_wer_increase: expected a number, got string"},
    {"", "", ", \"baseline\": {\"path\": \"b\", \"max_rtf_increase\": 0.5}", SR_OK, NULL},
    {"", "", ", \"baseline\": {\"path\": \"b\", \"max_rtf_increase\": -1}", SR_ERR_ARG,
     "baseline.max_rtf_increase: must be a number in 0 .. 1000000"},
    /* sweep shape */
    {"", "", ", \"sweep\": null", SR_OK, NULL},
    {"", "", ", \"sweep\": {}", SR_OK, NULL},
    {"", "", ", \"sweep\": [1]", SR_ERR_FORMAT, "sweep: expected an object"},
    {"", "", ", \"sweep\": {\"stream.chunk_ms\": 100}", SR_ERR_FORMAT,
     "sweep.stream.chunk_ms: expected an array of values, got number"},
    {"", "", ", \"sweep\": {\"stream.chunk_ms\": []}", SR_ERR_ARG, "sweep.stream.chunk_ms: empty list"},
    {"", "", ", \"sweep\": {\"stream.chunk_size\": [100]}", SR_ERR_ARG,
     "sweep: unknown field stream.chunk_size; did you mean stream.chunk_ms"},
    {"", "", ", \"sweep\": {\"stream\": [{}]}", SR_ERR_ARG, "sweep: unknown field stream "},
    {"", "", ", \"sweep\": {\"name\": [\"a\", \"b\"]}", SR_ERR_ARG, "sweep.name: name cannot be swept"},
    {"", "", ", \"sweep\": {\"stream.chunk_ms\": [100, 100]}", SR_ERR_ARG,
     "sweep.stream.chunk_ms[1]: value 100 repeats sweep.stream.chunk_ms[0]"},
    /* duplicates */
    {"", "", ", \"stream\": {\"beam\": 1, \"beam\": 2}", SR_ERR_FORMAT, "duplicate key stream.beam"},
    {"", "", ", \"output\": \"a\", \"output\": \"b\"", SR_ERR_FORMAT, "duplicate key output"},
    {"", "", ", \"sweep\": {\"stream.beam\": [1], \"stream.beam\": [2]}", SR_ERR_FORMAT,
     "duplicate key sweep.stream.beam"},
};

static sr_status parse_case(const schema_case *k, sr_config **c)
{
    return k->model ? parse_with(k->model, k->data, k->top, c) : sr_config_parse(k->top, "t.json", c);
}

static void test_schema_rules(void)
{
    for (size_t i = 0; i < sizeof SCHEMA / sizeof SCHEMA[0]; i++) {
        const schema_case *k = &SCHEMA[i];
        sr_config *c = NULL;
        if (k->want == SR_OK) {
            sr_status st = parse_case(k, &c);
            CU_ASSERT_EQUAL(st, SR_OK);
            if (st) printf("\n      case %zu (%s): %s\n", i, k->top, sr_last_error());
            CU_ASSERT_PTR_NOT_NULL(c);
        } else {
            TEST_ASSERT_ERR(parse_case(k, &c), k->want, k->needle);
            CU_ASSERT_PTR_NULL(c); /* *out is NULL on failure */
        }
        sr_config_free(c);
    }
}

static void test_required_fields(void)
{
    sr_config *c = NULL;
    TEST_ASSERT_ERR(sr_config_parse("{\"model\": {\"path\": \"m\"}, \"data\": {\"path\": \"d\"}}",
                                    "t.json", &c),
                    SR_ERR_FORMAT, "t.json: missing required field name");
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"n\", \"data\": {\"path\": \"d\"}}", "t.json", &c),
                    SR_ERR_FORMAT, "t.json: missing required field model.path");
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"n\", \"model\": {\"device\": \"cpu\"}, "
                                    "\"data\": {\"path\": \"d\"}}", "t.json", &c),
                    SR_ERR_FORMAT, "missing required field model.path");
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"n\", \"model\": {\"path\": \"m\"}}", "t.json", &c),
                    SR_ERR_FORMAT, "missing required field data.path");
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"n\", \"model\": {\"path\": \"m\"}, "
                                    "\"data\": {\"limit\": 3}}", "t.json", &c),
                    SR_ERR_FORMAT, "missing required field data.path");
    /* A required field given by the sweep alone is present in every run. */
    CU_ASSERT_EQUAL_FATAL(sr_config_parse("{\"name\": \"n\", \"data\": {\"path\": \"d\"}, "
                                          "\"sweep\": {\"model.path\": [\"a.h5\", \"b.h5\"]}}",
                                          "t.json", &c),
                          SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_runs(c), 2);
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 0)->model.path, "a.h5");
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->model.path, "b.h5");
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->name, "n[model.path=b.h5]");
    sr_config_free(c);
}

static void test_top_level_not_object(void)
{
    sr_config *c = NULL;
    TEST_ASSERT_ERR(sr_config_parse("[1, 2]", "t.json", &c), SR_ERR_FORMAT,
                    "t.json: expected a JSON object at the top level, got array");
    TEST_ASSERT_ERR(sr_config_parse("\"x\"", "t.json", &c), SR_ERR_FORMAT, "got string");
    CU_ASSERT_PTR_NULL(c);
}

/* ---- JSON syntax errors ------------------------------------------------------------------- */

static void test_parse_error_position(void)
{
    sr_config *c = NULL;
    /* Missing comma: line 3, the parser stops at the second key (column 25). */
    TEST_ASSERT_ERR(sr_config_parse("{\n  \"name\": \"x\",\n  \"model\": {\"path\": \"p\" \"device\": 1}\n}",
                                    "bad.json", &c),
                    SR_ERR_FORMAT, "bad.json: line 3, column 25: JSON syntax error near '\"device\": 1}'");
    /* Trailing comma in an array: at the bracket. */
    TEST_ASSERT_ERR(sr_config_parse("{\"a\": [1, 2,\n ]}", "bad.json", &c), SR_ERR_FORMAT,
                    "bad.json: line 2, column 2: JSON syntax error near ']}'");
    /* Bad literal. */
    TEST_ASSERT_ERR(sr_config_parse("{\"a\": tru}", "bad.json", &c), SR_ERR_FORMAT,
                    "bad.json: line 1, column 7");
    /* Garbage after the object. */
    TEST_ASSERT_ERR(sr_config_parse("{}\n x", "bad.json", &c), SR_ERR_FORMAT,
                    "bad.json: line 2, column 2");
    /* Empty text and truncated text: at end of input. */
    TEST_ASSERT_ERR(sr_config_parse("", "empty.json", &c), SR_ERR_FORMAT,
                    "empty.json: line 1, column 1: JSON syntax error at end of input");
    TEST_ASSERT_ERR(sr_config_parse("{\"name\": \"x\",\n", "cut.json", &c), SR_ERR_FORMAT,
                    "cut.json: line 2, column 1: JSON syntax error at end of input");
    /* Columns count characters, not bytes: "é" is one column. */
    TEST_ASSERT_ERR(sr_config_parse("{\"n\u00e9\": 1 2}", "u.json", &c), SR_ERR_FORMAT,
                    "u.json: line 1, column 10");
    /* A UTF-8 byte order mark is skipped and does not shift columns. */
    TEST_ASSERT_ERR(sr_config_parse("\xEF\xBB\xBF{\"a\": tru}", "bom.json", &c), SR_ERR_FORMAT,
                    "bom.json: line 1, column 7");
    CU_ASSERT_PTR_NULL(c);
    char ok[256];
    snprintf(ok, sizeof ok, "\xEF\xBB\xBF{\"name\": \"n\", \"model\": {\"path\": \"m\"}, \"data\": {\"path\": \"d\"}}");
    CU_ASSERT_EQUAL(sr_config_parse(ok, "bom.json", &c), SR_OK);
    sr_config_free(c);
}

static void test_load_file(void)
{
    sr_config *c = NULL;
    const char *missing = test_tmppath("no-such-config.json");
    TEST_ASSERT_ERR(sr_config_load(missing, &c), SR_ERR_IO, missing);

    const char *bad = test_tmppath("bad-config.json");
    FILE *fp = fopen(bad, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fputs("{\n  \"name\": \"x\"\n  \"model\": {}\n}\n", fp);
    fclose(fp);
    char needle[512];
    snprintf(needle, sizeof needle, "%s: line 3, column 3", bad);
    TEST_ASSERT_ERR(sr_config_load(bad, &c), SR_ERR_FORMAT, needle);

    const char *nul = test_tmppath("nul-config.json");
    fp = fopen(nul, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fwrite("{\"name\": \"x\"}\0junk", 1, 18, fp);
    fclose(fp);
    snprintf(needle, sizeof needle, "%s: NUL byte at offset 13", nul);
    TEST_ASSERT_ERR(sr_config_load(nul, &c), SR_ERR_FORMAT, needle);

    const char *good = test_tmppath("good-config.json");
    fp = fopen(good, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fputs("{\"name\": \"g\", \"model\": {\"path\": \"m\"}, \"data\": {\"path\": \"d\"},\n"
          " \"stream\": {\"chunk_size\": 3}}\n", fp);
    fclose(fp);
    CU_ASSERT_EQUAL_FATAL(sr_config_load(good, &c), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_config_n_warnings(c), 1);
    /* Warnings name the file they came from. */
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_config_warning(c, 0), good));
    sr_config_free(c);
}

static void test_null_args(void)
{
    sr_config *c = (sr_config *)&c; /* must be reset to NULL on failure */
    TEST_ASSERT_ERR(sr_config_parse(NULL, "t.json", &c), SR_ERR_ARG, "json is NULL");
    CU_ASSERT_PTR_NULL(c);
    TEST_ASSERT_ERR(sr_config_parse("{}", "t.json", NULL), SR_ERR_ARG, "out is NULL");
    TEST_ASSERT_ERR(sr_config_load(NULL, &c), SR_ERR_ARG, "path is NULL");
    TEST_ASSERT_ERR(sr_config_load("x.json", NULL), SR_ERR_ARG, "out is NULL");
    /* origin NULL still names something. */
    TEST_ASSERT_ERR(sr_config_parse("[]", NULL, &c), SR_ERR_FORMAT, "<string>: expected a JSON object");
    sr_config_free(NULL);
    CU_ASSERT_EQUAL(sr_config_n_runs(NULL), 0);
    CU_ASSERT_PTR_NULL(sr_config_run(NULL, 0));
    CU_ASSERT_EQUAL(sr_config_n_warnings(NULL), 0);
    CU_ASSERT_PTR_NULL(sr_config_warning(NULL, 0));
    CU_ASSERT_PTR_NULL(sr_config_json(NULL));
    sr_stream_config_init(NULL);
}

/* ---- warnings ----------------------------------------------------------------------------- */

static void test_unknown_key_warnings(void)
{
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(parse_top(", \"stream\": {\"chunk_size\": 300, \"beam\": 2},"
                                    " \"chunk_ms\": 100, \"strem\": {}, \"zzzzzzzz\": 1,"
                                    " \"baseline\": {\"path\": \"b\", \"max_wer\": 1}",
                                    &c),
                          SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_config_n_warnings(c), 5);
    CU_ASSERT_STRING_EQUAL(sr_config_warning(c, 0),
                           "t.json: unknown key stream.chunk_size (ignored); did you mean chunk_ms?");
    /* A key that belongs to another section points there. */
    CU_ASSERT_STRING_EQUAL(sr_config_warning(c, 1),
                           "t.json: unknown key chunk_ms (ignored); did you mean stream.chunk_ms?");
    CU_ASSERT_STRING_EQUAL(sr_config_warning(c, 2),
                           "t.json: unknown key strem (ignored); did you mean stream?");
    CU_ASSERT_STRING_EQUAL(sr_config_warning(c, 3), "t.json: unknown key zzzzzzzz (ignored)");
    CU_ASSERT_STRING_EQUAL(sr_config_warning(c, 4), "t.json: unknown key baseline.max_wer (ignored); did you mean max_wer_increase?");
    CU_ASSERT_PTR_NULL(sr_config_warning(c, 5));
    /* The known key next to the unknown one still applies; the unknown one changed nothing. */
    const sr_run_config *r = sr_config_run(c, 0);
    CU_ASSERT_EQUAL(r->stream.beam, 2);
    CU_ASSERT_EQUAL(r->stream.chunk_ms, 0);
    sr_config_free(c);

    /* Case differences are typos too. */
    CU_ASSERT_EQUAL_FATAL(parse_with(", \"Device\": \"cpu\"", "", "", &c), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_config_n_warnings(c), 1);
    CU_ASSERT_STRING_EQUAL(sr_config_warning(c, 0),
                           "t.json: unknown key model.Device (ignored); did you mean device?");
    sr_config_free(c);
}

/* ---- ${VAR} expansion --------------------------------------------------------------------- */

static const char *expand_one(const char *value, sr_config **c)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"name\": \"n\", \"model\": {\"path\": \"%s\"}, \"data\": {\"path\": \"d\"}}", value);
    if (sr_config_parse(buf, "t.json", c) != SR_OK) return NULL;
    return sr_config_run(*c, 0)->model.path;
}

static void test_env_expansion(void)
{
    saved_env home = env_save("HOME"), sk = env_save("SRKIT_HOME");
    setenv("SRKIT_TEST_A", "alpha", 1);
    setenv("SRKIT_TEST_EMPTY", "", 1);
    unsetenv("SRKIT_TEST_UNSET");
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"${SRKIT_TEST_A}/x.h5", "alpha/x.h5"},
        {"pre-${SRKIT_TEST_A}-${SRKIT_TEST_A}", "pre-alpha-alpha"},
        {"${SRKIT_TEST_UNSET:-fallback}/m", "fallback/m"},
        {"${SRKIT_TEST_A:-fallback}", "alpha"},
        {"${SRKIT_TEST_EMPTY:-used-when-empty}", "used-when-empty"},
        {"x${SRKIT_TEST_EMPTY}y", "xy"},
        {"${SRKIT_TEST_UNSET:-${SRKIT_TEST_A}/nested}", "alpha/nested"},
        {"${SRKIT_TEST_UNSET:-${SRKIT_TEST_UNSET:-deep}}", "deep"},
        {"${SRKIT_TEST_UNSET:-}rest", "rest"},
        {"$${SRKIT_TEST_A}", "${SRKIT_TEST_A}"},
        {"$HOME/$x/$", "$HOME/$x/$"},
        {"no variables", "no variables"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sr_config *c = NULL;
        const char *got = expand_one(cases[i].in, &c);
        CU_ASSERT_PTR_NOT_NULL(got);
        if (!got || strcmp(got, cases[i].want)) {
            printf("\n      %s -> %s (%s), wanted %s\n", cases[i].in, got ? got : "(error)",
                   sr_last_error(), cases[i].want);
            CU_FAIL("expansion");
        }
        sr_config_free(c);
    }

    /* SRKIT_HOME: the environment when set, else $HOME/.cache/srkit. */
    sr_config *c = NULL;
    setenv("SRKIT_HOME", "/opt/sk", 1);
    const char *got = expand_one("${SRKIT_HOME}/models/a.h5", &c);
    CU_ASSERT(got && !strcmp(got, "/opt/sk/models/a.h5"));
    sr_config_free(c);
    unsetenv("SRKIT_HOME");
    setenv("HOME", "/home/tester", 1);
    got = expand_one("${SRKIT_HOME}/models/a.h5", &c);
    CU_ASSERT(got && !strcmp(got, "/home/tester/.cache/srkit/models/a.h5"));
    sr_config_free(c);
    setenv("SRKIT_HOME", "", 1);
    got = expand_one("${SRKIT_HOME}", &c);
    CU_ASSERT(got && !strcmp(got, "/home/tester/.cache/srkit"));
    sr_config_free(c);
    unsetenv("SRKIT_HOME");
    unsetenv("HOME");
    c = NULL;
    TEST_ASSERT_ERR(parse_with("", "", ", \"output\": \"${SRKIT_HOME}/r\"", &c), SR_ERR_ARG,
                    "output: ${SRKIT_HOME} is not set and neither is HOME");
    CU_ASSERT_PTR_NULL(c);
    /* ...while an explicit default still applies. */
    got = expand_one("${SRKIT_HOME:-/fallback}/m", &c);
    CU_ASSERT(got && !strcmp(got, "/fallback/m"));
    sr_config_free(c);

    /* Errors name the variable and the field. */
    sr_config *e = NULL;
    TEST_ASSERT_ERR(parse_with("", ", \"format\": \"kaldi\", \"extra\": 1", ", \"alignments\": \"${SRKIT_TEST_UNSET}/a.ctm\"", &e),
                    SR_ERR_ARG, "t.json: alignments: environment variable SRKIT_TEST_UNSET is not set");
    TEST_ASSERT_ERR(parse_top(", \"stream\": {\"decoder\": \"${SRKIT_TEST_UNSET}\"}", &e), SR_ERR_ARG,
                    "stream.decoder: environment variable SRKIT_TEST_UNSET");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"data.path\": [\"a\", \"${SRKIT_TEST_UNSET}\"]}", &e),
                    SR_ERR_ARG, "sweep.data.path[1]: environment variable SRKIT_TEST_UNSET");
    TEST_ASSERT_ERR(parse_top(", \"output\": \"${SRKIT_TEST_A\"", &e), SR_ERR_ARG,
                    "output: bad variable reference \"${SRKIT_TEST_A\"");
    TEST_ASSERT_ERR(parse_top(", \"output\": \"${1X}\"", &e), SR_ERR_ARG, "output: bad variable reference");
    TEST_ASSERT_ERR(parse_top(", \"output\": \"${}\"", &e), SR_ERR_ARG, "output: bad variable reference");
    TEST_ASSERT_ERR(parse_top(", \"output\": \"${A B}\"", &e), SR_ERR_ARG, "output: bad variable reference");
    TEST_ASSERT_ERR(parse_top(", \"output\": \"${SRKIT_TEST_UNSET:-abc\"", &e), SR_ERR_ARG,
                    "output: ${SRKIT_TEST_UNSET:-... has no closing }");
    /* Deep nesting of defaults is refused, not recursed without bound. */
    TEST_ASSERT_ERR(parse_top(", \"output\": \"${U:-${U:-${U:-${U:-${U:-${U:-${U:-${U:-${U:-${U:-x}}}}}}}}}}\"", &e),
                    SR_ERR_ARG, "output: ${...} defaults nested more than");
    CU_ASSERT_PTR_NULL(e);

    env_restore(&home);
    env_restore(&sk);
    unsetenv("SRKIT_TEST_A");
    unsetenv("SRKIT_TEST_EMPTY");
}

static void test_expansion_in_sweep_and_json(void)
{
    setenv("SRKIT_TEST_DEC", "stable_beam", 1);
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(parse_top(", \"sweep\": {\"stream.decoder\": [\"stable_greedy\", \"${SRKIT_TEST_DEC}\"]}", &c),
                          SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_runs(c), 2);
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->stream.decoder, "stable_beam");
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->name, "n[stream.decoder=stable_beam]");
    /* The echo carries the expanded value, not the reference. */
    CU_ASSERT_PTR_NOT_NULL(strstr(sr_config_json(c), "\"stable_beam\""));
    CU_ASSERT_PTR_NULL(strstr(sr_config_json(c), "SRKIT_TEST_DEC"));
    sr_config_free(c);
    /* Two expanded sweep values that become equal are duplicate runs. */
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.decoder\": [\"stable_beam\", \"${SRKIT_TEST_DEC}\"]}", &c),
                    SR_ERR_ARG, "sweep.stream.decoder[1]: value stable_beam repeats");
    unsetenv("SRKIT_TEST_DEC");
}

/* ---- numbers ------------------------------------------------------------------------------ */

static void test_int_as_float(void)
{
    sr_config *c = NULL;
    /* -0.0 is the integer 0, which is below beam's minimum of 1. */
    TEST_ASSERT_ERR(parse_top(", \"stream\": {\"beam\": -0.0e0}", &c), SR_ERR_ARG,
                    "stream.beam: must be in 1 .. 64");
    CU_ASSERT_EQUAL_FATAL(parse_with(", \"threads\": 2.0", ", \"limit\": 1e2",
                                     ", \"stream\": {\"chunk_ms\": 300.0, \"att_context\": [70.0, 13]},"
                                     " \"baseline\": {\"path\": \"b\", \"max_wer_increase\": 1}",
                                     &c),
                          SR_OK);
    const sr_run_config *r = sr_config_run(c, 0);
    CU_ASSERT_EQUAL(r->model.threads, 2);
    CU_ASSERT_EQUAL(r->data.limit, 100);
    CU_ASSERT_EQUAL(r->stream.chunk_ms, 300);
    CU_ASSERT_EQUAL(r->stream.att_context[0], 70);
    CU_ASSERT_EQUAL(r->stream.att_context[1], 13);
    CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_wer_increase, 1.0, 0);
    sr_config_free(c);
    TEST_ASSERT_ERR(parse_top(", \"stream\": {\"chunk_ms\": 300.000001}", &c), SR_ERR_FORMAT,
                    "stream.chunk_ms: expected an integer, got 300.000001");
    TEST_ASSERT_ERR(parse_top(", \"stream\": {\"chunk_ms\": 2147483648}", &c), SR_ERR_ARG,
                    "stream.chunk_ms: 2147483648 is out of range");
    TEST_ASSERT_ERR(parse_with(", \"threads\": 1e400", "", "", &c), SR_ERR_FORMAT,
                    "model.threads: expected an integer");
    /* INT_MAX is an integer, but past the field's range (its samples would overflow an int) */
    TEST_ASSERT_ERR(parse_top(", \"stream\": {\"chunk_ms\": 2147483647}", &c), SR_ERR_ARG,
                    "stream.chunk_ms: must be in 1 .. 600000, got 2147483647");
    CU_ASSERT_EQUAL_FATAL(parse_top(", \"stream\": {\"chunk_ms\": 6e5}", &c), SR_OK);
    CU_ASSERT_EQUAL(sr_config_run(c, 0)->stream.chunk_ms, 600000);
    sr_config_free(c);
}

/* ---- sweeps ------------------------------------------------------------------------------- */

static const char *DESIGN_EXAMPLE =
    "{ \"name\": \"whisper-tiny-en-chunks\",\n"
    "  \"model\": { \"path\": \"${SRKIT_HOME}/models/whisper-tiny.en.h5\", \"device\": \"cpu\", \"threads\": 2 },\n"
    "  \"stream\": { \"strategy\": \"whisperrt\", \"decoder\": \"stable_greedy\", \"chunk_ms\": 300,\n"
    "              \"first_chunk_ms\": 600, \"stability_n\": 2, \"beam\": 1 },\n"
    "  \"sweep\": { \"stream.chunk_ms\": [100, 200, 300], \"stream.decoder\": [\"stable_greedy\", \"stable_beam\"] },\n"
    "  \"data\": { \"format\": \"librispeech\", \"path\": \"../shared/data/librispeech-sample\", \"limit\": 0 },\n"
    "  \"alignments\": null, \"normalizer\": \"whisper_en\",\n"
    "  \"output\": \"results/whisper-tiny-en-chunks\",\n"
    "  \"baseline\": { \"path\": \"configs/baselines/whisper-tiny-en.json\", \"max_wer_increase\": 0.2 } }\n";

static void test_sweep_order_and_names(void)
{
    saved_env sk = env_save("SRKIT_HOME");
    setenv("SRKIT_HOME", "/sk", 1);
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(DESIGN_EXAMPLE, "design.json", &c), SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_warnings(c), 0);
    CU_ASSERT_EQUAL_FATAL(sr_config_n_runs(c), 6);
    static const int chunk[6] = {100, 100, 200, 200, 300, 300};
    static const char *const dec[6] = {"stable_greedy", "stable_beam", "stable_greedy",
                                       "stable_beam", "stable_greedy", "stable_beam"};
    for (size_t i = 0; i < 6; i++) {
        const sr_run_config *r = sr_config_run(c, i);
        CU_ASSERT_EQUAL(r->stream.chunk_ms, chunk[i]);
        CU_ASSERT_STRING_EQUAL(r->stream.decoder, dec[i]);
        char point[128], name[192];
        snprintf(point, sizeof point, "stream.chunk_ms=%d,stream.decoder=%s", chunk[i], dec[i]);
        snprintf(name, sizeof name, "whisper-tiny-en-chunks[%s]", point);
        CU_ASSERT_STRING_EQUAL(r->sweep_point, point);
        CU_ASSERT_STRING_EQUAL(r->name, name);
        /* Everything not swept comes from the base. */
        CU_ASSERT_STRING_EQUAL(r->stream.strategy, "whisperrt");
        CU_ASSERT_EQUAL(r->stream.first_chunk_ms, 600);
        CU_ASSERT_EQUAL(r->model.threads, 2);
        CU_ASSERT_STRING_EQUAL(r->model.path, "/sk/models/whisper-tiny.en.h5");
        CU_ASSERT_STRING_EQUAL(r->output, "results/whisper-tiny-en-chunks");
        CU_ASSERT_STRING_EQUAL(r->baseline.path, "configs/baselines/whisper-tiny-en.json");
        CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_wer_increase, 0.2, 0);
        CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_rtf_increase, 0.0, 0);
    }
    CU_ASSERT_PTR_NULL(sr_config_run(c, 6));
    sr_config_free(c);
    env_restore(&sk);
}

static void test_sweep_three_axes(void)
{
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        parse_top(", \"sweep\": {\"stream.att_context\": [[70, 13], [70, 1]],"
                  " \"stream.decoder_kv_cache\": [false, true],"
                  " \"baseline.max_wer_increase\": [0.25, 1], \"alignments\": [null, \"a.ctm\"]}",
                  &c),
        SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_config_n_runs(c), 16);
    /* Mixed radix, last key fastest: run 13 = 1101b -> att [70,1], kv true, wer 0.25, a.ctm. */
    const sr_run_config *r = sr_config_run(c, 13);
    CU_ASSERT_EQUAL(r->stream.att_context[0], 70);
    CU_ASSERT_EQUAL(r->stream.att_context[1], 1);
    CU_ASSERT_EQUAL(r->stream.decoder_kv_cache, 1);
    CU_ASSERT_DOUBLE_EQUAL(r->baseline.max_wer_increase, 0.25, 0);
    CU_ASSERT_STRING_EQUAL(r->alignments, "a.ctm");
    CU_ASSERT_STRING_EQUAL(r->sweep_point,
                           "stream.att_context=[70,1],stream.decoder_kv_cache=true,"
                           "baseline.max_wer_increase=0.25,alignments=a.ctm");
    r = sr_config_run(c, 2);
    CU_ASSERT_STRING_EQUAL(r->name,
                           "n[stream.att_context=[70,13],stream.decoder_kv_cache=false,"
                           "baseline.max_wer_increase=1,alignments=null]");
    CU_ASSERT_PTR_NULL(r->alignments);
    /* Run names are all distinct. */
    for (size_t i = 0; i < 16; i++)
        for (size_t j = i + 1; j < 16; j++)
            CU_ASSERT(strcmp(sr_config_run(c, i)->name, sr_config_run(c, j)->name) != 0);
    sr_config_free(c);

    /* Sweeping output gives each run its own folder; a single-value sweep is still a sweep. */
    CU_ASSERT_EQUAL_FATAL(parse_top(", \"sweep\": {\"output\": [\"r/a\", \"r/b\"], \"stream.beam\": [4]}", &c),
                          SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_runs(c), 2);
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->output, "r/b");
    CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->name, "n[output=r/b,stream.beam=4]");
    CU_ASSERT_EQUAL(sr_config_run(c, 0)->stream.beam, 4);
    sr_config_free(c);
}

static void test_sweep_value_types(void)
{
    sr_config *c = NULL;
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.chunk_ms\": [100, \"200\"]}", &c), SR_ERR_FORMAT,
                    "t.json: sweep.stream.chunk_ms[1]: expected an integer, got string");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.chunk_ms\": [100, 0]}", &c), SR_ERR_ARG,
                    "sweep.stream.chunk_ms[1]: must be in 1 .. 600000, got 0");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.chunk_ms\": [100.5]}", &c), SR_ERR_FORMAT,
                    "sweep.stream.chunk_ms[0]: expected an integer, got 100.5");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.decoder\": [\"a\", 3]}", &c), SR_ERR_FORMAT,
                    "sweep.stream.decoder[1]: expected a string or null, got number");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"model.device\": [\"cpu\", \"tpu\"]}", &c), SR_ERR_ARG,
                    "sweep.model.device[1]: \"tpu\" is not one of cpu, cuda");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.att_context\": [[70, 13], [70]]}", &c), SR_ERR_ARG,
                    "sweep.stream.att_context[1]: expected 2 integers");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.att_context\": [[70, 13], [70, -2]]}", &c), SR_ERR_ARG,
                    "sweep.stream.att_context[1][1]: must be in -1 .. 100000");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.record_timeline\": [0, 1]}", &c), SR_ERR_FORMAT,
                    "sweep.stream.record_timeline[0]: expected a boolean");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"data.format\": [\"kaldi\", \"trn\", \"csv\"]}", &c), SR_ERR_ARG,
                    "sweep.data.format[2]: \"csv\"");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"baseline.max_rtf_increase\": [-1]}", &c), SR_ERR_ARG,
                    "sweep.baseline.max_rtf_increase[0]: must be a number in 0 .. 1000000");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"stream.beam\": [1, 2], \"stream.bem\": [3]}", &c), SR_ERR_ARG,
                    "sweep: unknown field stream.bem; did you mean stream.beam?");
    TEST_ASSERT_ERR(parse_top(", \"sweep\": {\"totally.unrelated\": [3]}", &c), SR_ERR_ARG,
                    "sweep: unknown field totally.unrelated (");
    CU_ASSERT_PTR_NULL(c);
}

static void test_sweep_limit(void)
{
    /* 100 x 100 = 10000 runs is the most allowed; 22^3 = 10648 is too many. */
    char *buf = malloc(65536);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    for (int pass = 0; pass < 2; pass++) {
        int axes = pass == 0 ? 2 : 3, per = pass == 0 ? 100 : 22;
        static const char *const keys[3] = {"stream.chunk_ms", "stream.first_chunk_ms", "stream.beam"};
        size_t n = (size_t)snprintf(buf, 65536,
                                    "{\"name\": \"big\", \"model\": {\"path\": \"m\"}, "
                                    "\"data\": {\"path\": \"d\"}, \"sweep\": {");
        for (int a = 0; a < axes; a++) {
            n += (size_t)snprintf(buf + n, 65536 - n, "%s\"%s\": [", a ? ", " : "", keys[a]);
            for (int v = 0; v < per; v++) n += (size_t)snprintf(buf + n, 65536 - n, "%s%d", v ? "," : "", v + 1);
            n += (size_t)snprintf(buf + n, 65536 - n, "]");
        }
        snprintf(buf + n, 65536 - n, "}}");
        sr_config *c = NULL;
        if (pass == 0) {
            CU_ASSERT_EQUAL(sr_config_parse(buf, "big.json", &c), SR_OK);
            CU_ASSERT_EQUAL(sr_config_n_runs(c), 10000);
            const sr_run_config *last = sr_config_run(c, 9999);
            CU_ASSERT(last && last->stream.chunk_ms == 100 && last->stream.first_chunk_ms == 100);
            CU_ASSERT(last && !strcmp(last->name, "big[stream.chunk_ms=100,stream.first_chunk_ms=100]"));
            sr_config_free(c);
        } else {
            TEST_ASSERT_ERR(sr_config_parse(buf, "big.json", &c), SR_ERR_ARG,
                            "big.json: sweep: more than 10000 runs");
            CU_ASSERT_PTR_NULL(c);
        }
    }
    free(buf);
}

/* ---- echo ----------------------------------------------------------------------------------- */

static void test_json_echo(void)
{
    saved_env sk = env_save("SRKIT_HOME");
    setenv("SRKIT_HOME", "/sk", 1);
    sr_config *c = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(DESIGN_EXAMPLE, "design.json", &c), SR_OK);
    const char *js = sr_config_json(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    CU_ASSERT_PTR_NULL(strchr(js, '\n')); /* compact */
    CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"sweep\":{\"stream.chunk_ms\":[100,200,300]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"/sk/models/whisper-tiny.en.h5\""));
    CU_ASSERT_PTR_NULL(strstr(js, "${"));
    /* The echo parses back to the same runs. */
    sr_config *again = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_config_parse(js, "echo", &again), SR_OK);
    CU_ASSERT_EQUAL(sr_config_n_runs(again), sr_config_n_runs(c));
    for (size_t i = 0; i < sr_config_n_runs(c); i++) {
        CU_ASSERT_STRING_EQUAL(sr_config_run(again, i)->name, sr_config_run(c, i)->name);
        CU_ASSERT_STRING_EQUAL(sr_config_run(again, i)->model.path, sr_config_run(c, i)->model.path);
    }
    CU_ASSERT_STRING_EQUAL(sr_config_json(again), js);
    sr_config_free(again);
    sr_config_free(c);
    env_restore(&sk);
}

/* ---- concurrency -------------------------------------------------------------------------- */

typedef struct {
    int id;
    int failures;
} thread_arg;

static void *parse_worker(void *p)
{
    thread_arg *a = p;
    for (int it = 0; it < 200; it++) {
        char buf[512];
        sr_config *c = NULL;
        /* Alternate a good config and one whose error names this thread's value. */
        snprintf(buf, sizeof buf,
                 "{\"name\": \"t%d\", \"model\": {\"path\": \"m\"}, \"data\": {\"path\": \"d\"},"
                 " \"stream\": {\"chunk_ms\": %d}, \"sweep\": {\"stream.beam\": [1, 2, 3]}}",
                 a->id, it % 2 ? -(a->id + 1) : a->id + 1);
        sr_status st = sr_config_parse(buf, "mt.json", &c);
        if (it % 2) {
            char want[64];
            snprintf(want, sizeof want, "must be in 1 .. 600000, got %d", -(a->id + 1));
            if (st != SR_ERR_ARG || !strstr(sr_last_error(), want)) a->failures++;
        } else {
            char want[64];
            snprintf(want, sizeof want, "t%d[stream.beam=3]", a->id);
            if (st != SR_OK || sr_config_n_runs(c) != 3 || strcmp(sr_config_run(c, 2)->name, want) ||
                sr_config_run(c, 2)->stream.chunk_ms != a->id + 1)
                a->failures++;
        }
        sr_config_free(c);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].id = i;
        args[i].failures = 0;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, parse_worker, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(args[i].failures, 0);
    }
}

/* ---- the example files -------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_example_configs(void)
{
    saved_env sk = env_save("SRKIT_HOME");
    setenv("SRKIT_HOME", test_tmpdir(), 1);
    DIR *d = opendir("configs");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    CU_ASSERT(n >= 4);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "configs/%s", names[i]);
        sr_config *c = NULL;
        sr_status st = sr_config_load(path, &c);
        CU_ASSERT_EQUAL(st, SR_OK);
        if (st) {
            printf("\n      %s: %s\n", path, sr_last_error());
            free(names[i]);
            continue;
        }
        /* Examples are clean: no warnings, and nothing left unexpanded. */
        CU_ASSERT_EQUAL(sr_config_n_warnings(c), 0);
        for (size_t w = 0; w < sr_config_n_warnings(c); w++) printf("\n      %s\n", sr_config_warning(c, w));
        CU_ASSERT_PTR_NULL(strstr(sr_config_json(c), "${"));
        const sr_run_config *r = sr_config_run(c, 0);
        char want[512];
        if (!strcmp(names[i], "quickstart.json")) {
            found++;
            /* the causal fine-tune and vanilla tiny.en, each whisperrt vs offline */
            CU_ASSERT_EQUAL(sr_config_n_runs(c), 4);
            snprintf(want, sizeof want, "quickstart[model.path=%s/models/whisperrt-tiny.en.h5,"
                     "stream.strategy=whisperrt]", test_tmpdir());
            CU_ASSERT_STRING_EQUAL(r->name, want);
            CU_ASSERT_STRING_EQUAL(sr_config_run(c, 1)->stream.strategy, "offline");
            snprintf(want, sizeof want, "%s/models/whisperrt-tiny.en.h5", test_tmpdir());
            CU_ASSERT_STRING_EQUAL(r->model.path, want);
            snprintf(want, sizeof want, "%s/models/whisper-tiny.en.h5", test_tmpdir());
            CU_ASSERT_STRING_EQUAL(sr_config_run(c, 3)->model.path, want);
            CU_ASSERT_STRING_EQUAL(sr_config_run(c, 3)->stream.strategy, "offline");
            CU_ASSERT_STRING_EQUAL(r->stream.strategy, "whisperrt");
            CU_ASSERT_STRING_EQUAL(r->stream.decoder, "stable_greedy");
            CU_ASSERT_EQUAL(r->stream.chunk_ms, 300);
            CU_ASSERT_EQUAL(r->stream.first_chunk_ms, 600);
            CU_ASSERT_STRING_EQUAL(r->data.format, "librispeech");
            snprintf(want, sizeof want, "%s/data/aligned-speech", test_tmpdir());
            CU_ASSERT_STRING_EQUAL(r->data.path, want);
            snprintf(want, sizeof want, "%s/data/aligned-speech/alignments.ctm", test_tmpdir());
            CU_ASSERT_STRING_EQUAL(r->alignments, want);
            CU_ASSERT_STRING_EQUAL(r->output, "results/quickstart");
            CU_ASSERT_PTR_NULL(r->baseline.path);
        } else if (!strcmp(names[i], "librispeech-sample.json")) {
            found++;
            CU_ASSERT_EQUAL(sr_config_n_runs(c), 1);
            CU_ASSERT_STRING_EQUAL(r->data.format, "librispeech");
            CU_ASSERT_STRING_EQUAL(r->data.path, "../shared/data/librispeech-sample");
        } else if (!strcmp(names[i], "whisper-chunk-sweep.json")) {
            found++;
            CU_ASSERT_EQUAL(sr_config_n_runs(c), 6);
            CU_ASSERT_STRING_EQUAL(sr_config_run(c, 5)->name,
                                   "whisper-tiny-en-chunks[stream.chunk_ms=300,stream.decoder=stable_beam]");
        } else if (!strcmp(names[i], "ci-regression.json")) {
            found++;
            CU_ASSERT_EQUAL(sr_config_n_runs(c), 1);
            CU_ASSERT(r->baseline.path && !strcmp(r->baseline.path, "configs/baselines/whisper-tiny-en.json"));
        }
        sr_config_free(c);
        free(names[i]);
    }
    CU_ASSERT_EQUAL(found, 4);
    env_restore(&sk);
}

void test_register_core_config(void)
{
    TEST_SUITE("core_config", {"stream_config_init", test_stream_config_init},
               {"defaults", test_defaults}, {"all_fields", test_all_fields},
               {"schema_rules", test_schema_rules}, {"required_fields", test_required_fields},
               {"top_level_not_object", test_top_level_not_object},
               {"parse_error_position", test_parse_error_position}, {"load_file", test_load_file},
               {"null_args", test_null_args}, {"unknown_key_warnings", test_unknown_key_warnings},
               {"env_expansion", test_env_expansion},
               {"expansion_in_sweep_and_json", test_expansion_in_sweep_and_json},
               {"int_as_float", test_int_as_float}, {"sweep_order_and_names", test_sweep_order_and_names},
               {"sweep_three_axes", test_sweep_three_axes}, {"sweep_value_types", test_sweep_value_types},
               {"sweep_limit", test_sweep_limit}, {"json_echo", test_json_echo},
               {"threads", test_threads}, {"example_configs", test_example_configs});
}
