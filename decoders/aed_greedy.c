/*
 * aed_greedy.c — offline greedy decoding for encoder-decoder (AED) models, openai-whisper's
 * temperature-0 decoding: nothing happens until the final update; then, over the whole audio,
 * repeatedly take the most probable next token (the first one on ties) until EOT (not stored)
 * or the scorer's aed_max_len. Each step asks the scorer only for the new position on slot 0.
 * The repetition-loop guard (aed_common.h; stream.repetition_guard, on by default) cuts a
 * hallucination loop to one copy and stops.
 * Then the no-speech gate drops the text of every window the rule calls silence (openai-whisper's
 * transcribe() skips such segments). At the final update every token is stable.
 */
#include "aed_common.h"

#include <math.h>

typedef struct {
    int guard;    /* stream.repetition_guard */
    int32_t *tok; /* [max_len] */
    float *lp;    /* [max_len] log-prob of each token */
    float *dist;  /* [vocab] */
    int max_len, vocab;
} ag_state;

static sr_status ag_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    sr_status st = sr_aed_check_scorer(sc, "aed_greedy", 1);
    if (st) return st;
    if (cfg->beam > 1)
        return sr_error(SR_ERR_ARG, "stream.beam: aed_greedy is greedy, beam %d not supported "
                        "(use aed_beam)", cfg->beam);
    ag_state *s = sr_calloc(1, sizeof *s, "aed_greedy state");
    if (!s) return SR_ERR_NOMEM;
    s->guard = cfg->repetition_guard;
    s->max_len = sc->aed_max_len;
    s->vocab = sc->vocab;
    if (!(s->tok = sr_malloc((size_t)s->max_len * sizeof *s->tok, "aed_greedy tokens")) ||
        !(s->lp = sr_malloc((size_t)s->max_len * sizeof *s->lp, "aed_greedy log-probs")) ||
        !(s->dist = sr_malloc((size_t)s->vocab * sizeof *s->dist, "aed_greedy distribution"))) {
        free(s->tok);
        free(s->lp);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

static sr_status ag_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    ag_state *s = state;
    if (!final) return sr_aed_write_hyp(h, s->tok, 0, 0); /* offline: nothing until the end */
    int n = 0;
    sr_status st = sc->aed_logprobs(sc->ctx, 0, s->tok, 0, 0, s->dist);
    if (st) return sr_error_prefix(st, "aed_greedy: aed_logprobs at position 0");
    sr_aed_stop why;
    if ((st = sr_aed_greedy(sc, 0, s->tok, s->lp, &n, s->dist, s->max_len, 0, s->guard, &why)))
        return st;
    h->loop_cuts += why == SR_AED_LOOP;
    if ((st = sr_aed_gate_all(sc, s->tok, s->lp, &n, why == SR_AED_EOT ? s->dist[sc->eot] : NAN)))
        return sr_error_prefix(st, "aed_greedy");
    return sr_aed_write_hyp(h, s->tok, n, n);
}

static void ag_reset(void *state) { (void)state; }

static void ag_close(void *state)
{
    ag_state *s = state;
    if (!s) return;
    free(s->tok);
    free(s->lp);
    free(s->dist);
    free(s);
}

static size_t ag_bytes(const void *state)
{
    const ag_state *s = state;
    return sizeof *s + (size_t)s->max_len * (sizeof(int32_t) + sizeof(float)) +
           (size_t)s->vocab * sizeof(float);
}

const sr_decoder_ops sr_dec_aed_greedy = {
    .name = "aed_greedy",
    .description = "offline greedy AED decoding at the end of the audio (openai-whisper, temperature 0)",
    .kind = SR_SCORER_AED,
    .open = ag_open,
    .update = ag_update,
    .reset = ag_reset,
    .close = ag_close,
    .state_bytes = ag_bytes,
};
