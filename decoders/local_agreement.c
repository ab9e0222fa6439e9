/*
 * local_agreement.c — LocalAgreement-2 (Ufal whisper_streaming, Polák et al.), the baseline
 * for models without a streaming fine-tune (the `reencode` strategy, which gives a fresh
 * encoder pass over all audio so far at every chunk).
 *
 * Every update decodes a greedy hypothesis over all audio seen so far, forced to start with
 * the committed tokens (as whisper_streaming keeps its committed text and only decodes what
 * follows): one aed_logprobs call on slot 0 for the committed prefix, then one per new token,
 * until EOT. The longest common prefix of this hypothesis and the previous update's is
 * committed (n_stable); since both start with the committed tokens, the committed prefix only
 * grows. The hypothesis shown is committed + the current tail. At the final update the whole
 * last hypothesis is stable.
 *
 * Guards: the hypothesis is capped at SR_AED_CAP_BASE + SR_AED_CAP_PER_S tokens per second of
 * audio so far, and the repetition-loop rule cuts a loop to one copy (never into the
 * committed prefix).
 *
 * No-speech gate: when the rule (aed_common.h) calls the last window of an update's hypothesis
 * silence (its no-speech probability; the tokens' log-probs from the update that decoded them,
 * plus EOT's when decoding ended on EOT), that hypothesis is cut back to the window's start,
 * never into the committed prefix, before the agreement step: silent text is neither shown nor
 * committed.
 */
#include "aed_common.h"

#include <math.h>
#include <string.h>

typedef struct {
    sr_stream_config cfg;
    int max_len, vocab;
    int32_t *tok, *prev; /* [max_len] current and previous hypotheses */
    float *lp;           /* [max_len] log-prob of each token of tok */
    int n, n_prev, have_prev, committed;
    long k, audio_ms, seen_ms;
    sr_aed_top top;      /* the next position's summary */
    float *dist;         /* [vocab], only for a scorer without aed_top */
} la_state;

static sr_status la_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    sr_status st = sr_aed_check_scorer(sc, "local_agreement", 1);
    if (st) return st;
    if (cfg->beam > 1)
        return sr_error(SR_ERR_ARG, "stream.beam: local_agreement decodes greedily, beam %d not "
                        "supported", cfg->beam);
    la_state *s = sr_calloc(1, sizeof *s, "local_agreement state");
    if (!s) return SR_ERR_NOMEM;
    s->cfg = *cfg;
    s->max_len = sc->aed_max_len;
    s->vocab = sc->vocab;
    size_t L = (size_t)s->max_len;
    if (!(s->tok = sr_malloc(L * sizeof *s->tok, "local_agreement tokens")) ||
        !(s->prev = sr_malloc(L * sizeof *s->prev, "local_agreement tokens")) ||
        !(s->lp = sr_malloc(L * sizeof *s->lp, "local_agreement log-probs")) ||
        (!sc->aed_top &&
         !(s->dist = sr_malloc((size_t)s->vocab * sizeof *s->dist, "local_agreement distribution")))) {
        free(s->tok);
        free(s->prev);
        free(s->lp);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

/* The update in sr_aed_greedy_batch's phases (aed_common.h): the first call scores the position
 * after the committed prefix. */
static void la_begin(void *state, const sr_scorer *sc, sr_aed_gjob *j)
{
    la_state *s = state;
    s->audio_ms += sr_aed_update_ms(sc, &s->cfg, s->k++, &s->seen_ms);
    /* tok[0, committed) already holds the committed tokens: the previous hypothesis began so */
    s->n = s->committed;
    j->tok = s->tok;
    j->lp = s->lp;
    j->n = &s->n;
    j->from = s->n;
    j->tops = &s->top;
    j->rows = s->dist;
}

static void la_after_first(void *state, const sr_scorer *sc, sr_aed_gjob *j)
{
    la_state *s = state;
    (void)sc;
    j->next = &s->top;
    j->cap = SR_MAX(0, sr_aed_cap_tokens(s->audio_ms) - s->committed);
    j->min_keep = s->committed;
    j->guard = s->cfg.repetition_guard;
}

static sr_status la_finish(void *state, const sr_scorer *sc, sr_aed_gjob *j, int final, sr_hyp *h)
{
    la_state *s = state;
    int silent;
    sr_status st = sr_aed_gjob_gate(sc, j, s->committed, &s->n, &silent);
    if (st) return sr_error_prefix(st, "local_agreement");
    if (final) {
        s->committed = s->n;
    } else {
        if (s->have_prev) {
            int l = 0;
            while (l < s->n && l < s->n_prev && s->tok[l] == s->prev[l]) l++;
            s->committed = SR_MAX(s->committed, l);
        }
        memcpy(s->prev, s->tok, (size_t)s->n * sizeof *s->tok);
        s->n_prev = s->n;
        s->have_prev = 1;
    }
    return sr_aed_write_hyp(h, s->tok, s->n, s->committed);
}

static const sr_aed_gdec la_dec = {
    .name = "local_agreement", .begin = la_begin, .after_first = la_after_first, .finish = la_finish,
};

static sr_status la_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    sr_status st;
    sr_aed_greedy_batch(&la_dec, &state, &sc, &final, &h, 1, &st);
    return st;
}

static void la_update_batch(void *const *states, const sr_scorer *const *scs, const int *final,
                            sr_hyp *const *hs, int count, sr_status *st)
{
    sr_aed_greedy_batch(&la_dec, states, scs, final, hs, count, st);
}

static void la_reset(void *state)
{
    la_state *s = state;
    s->n = s->n_prev = s->have_prev = s->committed = 0;
    s->k = s->audio_ms = s->seen_ms = 0;
}

static void la_close(void *state)
{
    la_state *s = state;
    if (!s) return;
    free(s->tok);
    free(s->prev);
    free(s->lp);
    free(s->dist);
    free(s);
}

static size_t la_bytes(const void *state)
{
    const la_state *s = state;
    return sizeof *s + (size_t)s->max_len * (2 * sizeof(int32_t) + sizeof(float)) +
           (s->dist ? (size_t)s->vocab * sizeof(float) : 0);
}

const sr_decoder_ops sr_dec_local_agreement = {
    .name = "local_agreement",
    .description = "LocalAgreement-2: commit the common prefix of the last two greedy hypotheses",
    .kind = SR_SCORER_AED,
    .open = la_open,
    .update = la_update,
    .update_batch = la_update_batch,
    .reset = la_reset,
    .close = la_close,
    .state_bytes = la_bytes,
};
