/*
 * fuzz_trn.c — sclite trn files and the other "id text" line format:
 *   - sr_trn_read (eval/timeline_io.c), then every item written back with sr_trn_append and
 *     read again: the same ids, and the same words in each text;
 *   - sr_dataset_load as a trn dataset and as a LibriSpeech transcript file (eval/dataset.c);
 *   - sr_dataset_detect on the file (format guessing from its first line).
 * The shared line splitter (eval/textio.c: BOM, UTF-16 and NUL rejection, CRLF) runs on all.
 */
#include "fuzz_common.h"

#include <ctype.h>

#include "../../eval/dataset.h"

/* Whether a and b hold the same words (runs of non-white-space). */
static int same_words(const char *a, const char *b)
{
    for (;;) {
        while (*a && isspace((unsigned char)*a)) a++;
        while (*b && isspace((unsigned char)*b)) b++;
        if (!*a || !*b) return !*a && !*b;
        while (*a && !isspace((unsigned char)*a) && *a == *b) a++, b++;
        int ea = !*a || isspace((unsigned char)*a), eb = !*b || isspace((unsigned char)*b);
        if (!ea || !eb) return 0;
    }
}

static void exercise_dataset(sr_dataset *d)
{
    for (size_t i = 0; i < d->n; i++) {
        FUZZ_CHECK(d->utts[i].id && d->utts[i].text && d->utts[i].where);
        FUZZ_CHECK(sr_dataset_find(d, d->utts[i].id) == &d->utts[i]);
        if (i) FUZZ_CHECK(strcmp(d->utts[i - 1].id, d->utts[i].id) < 0);
    }
    (void)sr_dataset_total_duration(d);
    if (d->n > 2) FUZZ_CHECK(sr_dataset_shard(d, 1, 2) == SR_OK);
    sr_dataset_limit(d, 1);
    (void)sr_dataset_drop_problems(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], back[512];
    fuzz_write(path, sizeof path, "in.trans.txt", data, size);

    sr_texts *t = NULL;
    if (sr_trn_read(path, &t) == SR_OK) {
        /* A blank first line: a text that starts with U+FEFF would otherwise lose it to the
         * reader's byte-order-mark skipping when it lands at the start of the file. */
        sr_strbuf b = {0};
        int ok = sr_strbuf_append(&b, "\n", 1) == SR_OK;
        for (size_t i = 0; i < t->n && ok; i++) {
            FUZZ_CHECK(sr_texts_find(t, t->items[i].id) == &t->items[i]);
            ok = sr_trn_append(&b, t->items[i].id, t->items[i].text) == SR_OK;
        }
        FUZZ_CHECK(ok); /* every id read is one trn_append accepts */
        fuzz_write(back, sizeof back, "back.trn", b.data ? b.data : "", b.len);
        sr_texts *u = NULL;
        FUZZ_CHECK(sr_trn_read(back, &u) == SR_OK);
        FUZZ_CHECK(u->n == t->n);
        for (size_t i = 0; i < t->n; i++) {
            FUZZ_CHECK(!strcmp(u->items[i].id, t->items[i].id));
            FUZZ_CHECK(same_words(u->items[i].text, t->items[i].text));
        }
        sr_texts_free(u);
        sr_strbuf_free(&b);
    } else {
        FUZZ_CHECK(t == NULL);
    }
    sr_texts_free(t);

    sr_dataset *d = NULL;
    if (sr_dataset_load(path, SR_DATA_TRN, &d) == SR_OK) exercise_dataset(d);
    sr_dataset_free(d);
    d = NULL;
    if (sr_dataset_load(path, SR_DATA_LIBRISPEECH, &d) == SR_OK) exercise_dataset(d);
    sr_dataset_free(d);

    fuzz_write(path, sizeof path, "noext", data, size);
    sr_data_format f;
    (void)sr_dataset_detect(path, &f);
    return 0;
}
