/*
 * fuzz_config.c — experiment configs: sr_config_parse (core/config.c) on arbitrary text:
 * cJSON parsing and the syntax-error position, ${VAR} / ${VAR:-default} expansion, the field
 * table, duplicate keys, unknown-key hints (edit distance), sweeps and their cartesian product.
 * Every run, warning and the echoed JSON of a parsed config are walked.
 */
#include "fuzz_common.h"

#include "../../core/sr.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* Fixed values for the variables the seeds and the dictionary name, so that expansion is
     * exercised the same way wherever the fuzzer runs. */
    setenv("SRKIT_HOME", "/nonexistent/srkit-home", 1);
    setenv("SRKIT_FUZZ", "x", 1);
    setenv("SRKIT_FUZZ_EMPTY", "", 1);
    unsetenv("SRKIT_FUZZ_UNSET");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    sr_config *c = NULL;
    sr_status st = sr_config_parse(text, "fuzz.json", &c);
    if (st == SR_OK) {
        size_t n = sr_config_n_runs(c);
        FUZZ_CHECK(n >= 1);
        for (size_t i = 0; i < n; i++) {
            const sr_run_config *r = sr_config_run(c, i);
            FUZZ_CHECK(r && r->name && r->sweep_point && r->model.path && r->data.path &&
                       r->output && r->normalizer);
            volatile size_t sink = strlen(r->name) + strlen(r->sweep_point) +
                                   strlen(r->model.path) + strlen(r->data.path) +
                                   strlen(r->output);
            (void)sink;
        }
        FUZZ_CHECK(sr_config_run(c, n) == NULL);
        for (size_t i = 0; i < sr_config_n_warnings(c); i++)
            FUZZ_CHECK(sr_config_warning(c, i) != NULL);
        FUZZ_CHECK(sr_config_json(c) != NULL);
    } else {
        FUZZ_CHECK(c == NULL);
    }
    sr_config_free(c);
    free(text);
    return 0;
}
