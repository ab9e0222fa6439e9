/*
 * fuzz_textgrid.c — Praat/MFA TextGrids: sr_alignments_load (eval/wordtimes.c) on a
 * *.TextGrid file: the tokenizer (strings with "" escapes, <flags>, [index] labels, ! comments,
 * numbers), long and short text formats, tier classes, the words tier and its intervals. A
 * loaded TextGrid is one utterance named after the file, words sorted by start, start <= end.
 */
#include "fuzz_words.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(path, sizeof path, "utt1.TextGrid", data, size);
    sr_alignments *a = NULL;
    if (sr_alignments_load(path, &a) == SR_OK) {
        FUZZ_CHECK(a->n == 1 && !strcmp(a->utts[0].id, "utt1"));
        fuzz_check_words(&a->utts[0]);
    } else {
        FUZZ_CHECK(a == NULL);
    }
    sr_alignments_free(a);
    return 0;
}
