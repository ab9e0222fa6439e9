/*
 * registry.c — the static list of decoders, chosen by name in the stream config.
 */
#include "../core/plugin.h"

#include <string.h>

extern const sr_decoder_ops sr_dec_sync_greedy;
extern const sr_decoder_ops sr_dec_aed_greedy;
extern const sr_decoder_ops sr_dec_aed_beam;
extern const sr_decoder_ops sr_dec_stable_greedy;
extern const sr_decoder_ops sr_dec_stable_beam;
extern const sr_decoder_ops sr_dec_local_agreement;
extern const sr_decoder_ops sr_dec_rnnt_greedy;
extern const sr_decoder_ops sr_dec_rnnt_beam;

static const sr_decoder_ops *const decoders[] = {
    &sr_dec_sync_greedy,
    &sr_dec_aed_greedy,
    &sr_dec_aed_beam,
    &sr_dec_stable_greedy,
    &sr_dec_stable_beam,
    &sr_dec_local_agreement,
    &sr_dec_rnnt_greedy,
    &sr_dec_rnnt_beam,
    NULL,
};

size_t sr_decoder_count(void) { return SR_ARRAY_LEN(decoders) - 1; }

const char *sr_decoder_name(size_t i) { return i < sr_decoder_count() ? decoders[i]->name : NULL; }

sr_status sr_decoder_find(const char *name, const sr_decoder_ops **out)
{
    *out = NULL;
    for (size_t i = 0; decoders[i]; i++)
        if (name && !strcmp(decoders[i]->name, name)) {
            *out = decoders[i];
            return SR_OK;
        }
    return sr_error_unknown("decoder", name, sr_decoder_name);
}
