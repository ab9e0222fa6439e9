/*
 * fuzz_normalizer.c — the text normalizers (eval/normalizer.c): the input, as a NUL-terminated
 * string, through whisper_en (with a small spelling map written at start-up, so the result does
 * not depend on an installed asset), basic and none. Checks: success exactly when the input is
 * valid UTF-8 (sr_normalize's contract), outputs are valid UTF-8, none is the identity.
 */
#include "fuzz_common.h"

#include <unistr.h>

#include "../../eval/normalizer.h"

static sr_normalizer *norm[3];

/* A sample of openai-whisper's english.json (British -> American), plus multi-byte entries. */
static const char MAP[] =
    "{\"accessorise\": \"accessorize\", \"anaesthesia\": \"anesthesia\", \"behoves\": "
    "\"behooves\", \"cancelled\": \"canceled\", \"colour\": \"color\", \"colours\": \"colors\", "
    "\"cypher\": \"cipher\", \"discs\": \"disks\", \"favourably\": \"favorably\", \"gaoled\": "
    "\"jailed\", \"grey\": \"gray\", \"honouring\": \"honoring\", \"labour\": \"labor\", "
    "\"meagre\": \"meager\", \"metre\": \"meter\", \"mould\": \"mold\", \"programme\": "
    "\"program\", \"rancour\": \"rancor\", \"sepulchre\": \"sepulcher\", \"towelled\": "
    "\"toweled\", \"tyres\": \"tires\", \"vapour\": \"vapor\", \"caf\\u00e9s\": \"cafes\", "
    "\"na\\u00efve\": \"naive\"}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char path[512];
    fuzz_write(path, sizeof path, "map.json", MAP, sizeof MAP - 1);
    static const char *const names[3] = {"whisper_en", "basic", "none"};
    for (int i = 0; i < 3; i++)
        if (sr_normalizer_create(names[i], path, &norm[i]) != SR_OK) {
            fprintf(stderr, "fuzz_normalizer: %s: %s\n", names[i], sr_last_error());
            abort();
        }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    size_t len = strlen(text);
    int valid = u8_check((const uint8_t *)text, len) == NULL;
    for (int i = 0; i < 3; i++) {
        char *out = NULL;
        sr_status st = sr_normalize(norm[i], text, &out);
        FUZZ_CHECK((st == SR_OK) == valid);
        if (st == SR_OK) {
            FUZZ_CHECK(out && u8_check((const uint8_t *)out, strlen(out)) == NULL);
            if (i == 2) FUZZ_CHECK(!strcmp(out, text));
        } else {
            FUZZ_CHECK(out == NULL);
        }
        free(out);
    }
    free(text);
    return 0;
}
