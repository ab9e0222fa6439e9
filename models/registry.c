/*
 * registry.c — the static list of backends, keyed by the HDF5 `arch` attribute. A new model
 * family adds its ops table here and nothing else outside its folder.
 */
#include "../core/plugin.h"

#include <string.h>

extern const sr_model_ops sr_test_linear_ops;
extern const sr_model_ops sr_whisper_ops;
extern const sr_model_ops sr_voxtral_ops;
extern const sr_model_ops sr_fastconformer_rnnt_ops;

static const sr_model_ops *const backends[] = {
    &sr_test_linear_ops,
    &sr_whisper_ops,
    &sr_voxtral_ops,
    &sr_fastconformer_rnnt_ops,
    NULL,
};

size_t sr_backend_count(void) { return SR_ARRAY_LEN(backends) - 1; }

const char *sr_backend_name(size_t i) { return i < sr_backend_count() ? backends[i]->name : NULL; }

sr_status sr_backend_find(const char *arch, const sr_model_ops **out)
{
    *out = NULL;
    for (size_t i = 0; backends[i]; i++)
        if (arch && !strcmp(backends[i]->name, arch)) {
            *out = backends[i];
            return SR_OK;
        }
    return sr_error_unknown("arch", arch, sr_backend_name);
}
