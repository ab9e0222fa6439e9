/*
 * fuzz_srkit.h — checks several libFuzzer harnesses share on srkit objects: a model file's
 * load / use / free / inspect cycle, and the invariants every dataset reader promises.
 */
#ifndef SR_FUZZ_SRKIT_H
#define SR_FUZZ_SRKIT_H

#include "fuzz_common.h"

#include "../../core/sr.h"
#include "../../eval/dataset.h"

/* Load path (one BLAS thread); a loaded model names its arch and config, is handed to use
 * (may be NULL) and freed; a refused one leaves the handle NULL. Then sr_model_inspect, which
 * must give JSON whenever it succeeds. Returns 1 when the model loaded. */
static inline int fuzz_load_model(const char *path, void (*use)(sr_model *m))
{
    sr_options opt;
    sr_options_init(&opt);
    opt.threads = 1;
    sr_model *m = NULL;
    int loaded = sr_model_load(path, &opt, &m) == SR_OK;
    if (loaded) {
        FUZZ_CHECK(sr_model_arch(m) && sr_model_config(m));
        if (use) use(m);
        sr_model_free(m);
    } else {
        FUZZ_CHECK(m == NULL);
    }
    char *json = NULL;
    if (sr_model_inspect(path, &json) == SR_OK) FUZZ_CHECK(json != NULL);
    free(json);
    return loaded;
}

/* A loaded dataset has the format asked for (or detected) and every utterance an id, text, a
 * location and a non-negative offset, is found by its id, and the problem count is right. */
static inline void fuzz_check_dataset(const sr_dataset *d, sr_data_format want)
{
    FUZZ_CHECK(d->format == want);
    size_t problems = 0;
    for (size_t i = 0; i < d->n; i++) {
        const sr_utt *u = &d->utts[i];
        FUZZ_CHECK(u->id && u->text && u->where && u->offset_s >= 0);
        FUZZ_CHECK(sr_dataset_find(d, u->id) == u);
        problems += u->problem != NULL;
    }
    FUZZ_CHECK(problems == d->n_problems);
}

#endif /* SR_FUZZ_SRKIT_H */
