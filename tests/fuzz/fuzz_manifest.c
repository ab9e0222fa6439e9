/*
 * fuzz_manifest.c — NeMo JSONL manifests: sr_dataset_load (eval/dataset.c) as a manifest (one
 * JSON object per line: audio_filepath, text, utt_id / id, duration, offset), also through
 * format detection by extension, then the dataset operations (find, shard, limit, drop).
 */
#include "fuzz_srkit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(path, sizeof path, "in.jsonl", data, size);
    for (int pass = 0; pass < 2; pass++) {
        sr_dataset *d = NULL;
        sr_status st = sr_dataset_load(path, pass ? SR_DATA_MANIFEST : SR_DATA_AUTO, &d);
        if (st == SR_OK) {
            fuzz_check_dataset(d, SR_DATA_MANIFEST);
            for (size_t i = 0; i < d->n; i++) {
                const sr_utt *u = &d->utts[i];
                FUZZ_CHECK(u->id[0] && u->audio);
                if (i) FUZZ_CHECK(strcmp(d->utts[i - 1].id, u->id) < 0);
            }
            (void)sr_dataset_total_duration(d);
            if (d->n >= 3) {
                size_t n = d->n;
                FUZZ_CHECK(sr_dataset_shard(d, 2, 3) == SR_OK);
                FUZZ_CHECK(d->n == n / 3);
            }
            sr_dataset_limit(d, 1);
            FUZZ_CHECK(d->n <= 1);
        } else {
            FUZZ_CHECK(d == NULL);
        }
        sr_dataset_free(d);
    }
    return 0;
}
