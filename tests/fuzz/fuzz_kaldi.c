/*
 * fuzz_kaldi.c — Kaldi data folders (eval/dataset.c: wav.scp, text, optional segments and
 * utt2dur). The input is split at NUL bytes (which no Kaldi table may hold) into up to four
 * files, in this order: wav.scp, text, segments, utt2dur (wav.scp and text always exist, empty
 * when the input ends before them; segments and utt2dur exist when their part is not empty, so
 * "a\0b\0\0c" is wav.scp a, text b, no segments, utt2dur c). The
 * folder is then loaded with format detection (SR_DATA_AUTO, which must tell Kaldi) and
 * explicitly; every utterance must have audio or a problem, and the problem count must agree.
 */
#include "fuzz_srkit.h"

static const char *const FILES[] = {"wav.scp", "text", "segments", "utt2dur"};
#define N_FILES (sizeof FILES / sizeof FILES[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    size_t off = 0;
    for (size_t k = 0; k < N_FILES; k++) {
        if (off > size) { /* no NUL before this part: wav.scp / text empty, the others absent */
            if (k < 2) fuzz_write(path, sizeof path, FILES[k], "", 0);
            else unlink(fuzz_path(path, sizeof path, FILES[k]));
            continue;
        }
        const uint8_t *nul = memchr(data + off, 0, size - off);
        size_t len = nul ? (size_t)(nul - (data + off)) : size - off;
        if (k >= 2 && len == 0) unlink(fuzz_path(path, sizeof path, FILES[k]));
        else fuzz_write(path, sizeof path, FILES[k], data + off, len);
        off += len + 1; /* past the NUL; past the end when there was none */
    }
    const char *dir = fuzz_dir();

    sr_data_format f;
    if (sr_dataset_detect(dir, &f) == SR_OK) FUZZ_CHECK(f == SR_DATA_KALDI);
    for (int pass = 0; pass < 2; pass++) {
        sr_dataset *d = NULL;
        sr_status st = sr_dataset_load(dir, pass ? SR_DATA_KALDI : SR_DATA_AUTO, &d);
        if (st == SR_OK) {
            fuzz_check_dataset(d, SR_DATA_KALDI);
            for (size_t i = 0; i < d->n; i++) FUZZ_CHECK(d->utts[i].audio || d->utts[i].problem);
            size_t problems = d->n_problems;
            FUZZ_CHECK(sr_dataset_drop_problems(d) == problems);
            FUZZ_CHECK(d->n_problems == 0);
        } else {
            FUZZ_CHECK(d == NULL);
        }
        sr_dataset_free(d);
    }
    return 0;
}
