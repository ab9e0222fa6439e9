/*
 * fuzz_ctm.c — CTM word alignments: sr_alignments_load (eval/wordtimes.c) on a *.ctm file:
 * fields, ";;" comments, number parsing, the sort by utterance and time, grouping into
 * utterances. Loaded alignments must be sorted by id, each word with 0 <= start <= end.
 */
#include "fuzz_words.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(path, sizeof path, "in.ctm", data, size);
    sr_alignments *a = NULL;
    if (sr_alignments_load(path, &a) == SR_OK) {
        for (size_t i = 0; i < a->n; i++) {
            const sr_utt_words *u = &a->utts[i];
            FUZZ_CHECK(u->id && u->where && u->n > 0);
            if (i) FUZZ_CHECK(strcmp(a->utts[i - 1].id, u->id) < 0);
            FUZZ_CHECK(sr_alignments_find(a, u->id) == u);
            fuzz_check_words(u);
        }
    } else {
        FUZZ_CHECK(a == NULL);
    }
    sr_alignments_free(a);
    return 0;
}
