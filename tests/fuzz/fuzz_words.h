/*
 * fuzz_words.h — the invariants of one loaded utterance's word alignment (sr_utt_words), which
 * the CTM and TextGrid harnesses check on everything sr_alignments_load accepts: every word
 * non-empty, 0 <= start <= end, words sorted by start.
 */
#ifndef SR_FUZZ_WORDS_H
#define SR_FUZZ_WORDS_H

#include "fuzz_common.h"

#include "../../eval/dataset.h"

static inline void fuzz_check_words(const sr_utt_words *u)
{
    for (size_t k = 0; k < u->n; k++) {
        FUZZ_CHECK(u->words[k].word && u->words[k].word[0]);
        FUZZ_CHECK(u->words[k].start_s >= 0 && u->words[k].start_s <= u->words[k].end_s);
        if (k) FUZZ_CHECK(u->words[k - 1].start_s <= u->words[k].start_s);
    }
}

#endif
