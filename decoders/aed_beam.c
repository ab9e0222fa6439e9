/*
 * aed_beam.c — offline beam search for AED models with openai-whisper's rules (beam size b =
 * stream.beam, patience 1, no length penalty): nothing happens until the final update; then
 * every live beam offers its b + 1 most probable next tokens, candidates are ranked by summed
 * log-probability, EOT candidates ranked above the b-th live candidate are finished, and the b
 * best others live on; the search ends when b candidates are finished (or at aed_max_len, when
 * the live beams are added by score to fill b). The answer is the finished candidate with the
 * best summed log-prob divided by its text length (MaximumLikelihoodRanker, length_penalty
 * None). Beam i uses scorer slot i (a child inherits its parent's slot when free), one
 * aed_logprobs call per beam and step. The repetition guard finishes a looping beam at its cut.
 * The no-speech gate then drops the text of every window of the answer that the rule calls
 * silence (average log-prob = the answer's own per-token log-probs, EOT included).
 */
#include "aed_common.h"

#include <string.h>

typedef struct {
    sr_aed_beams e;
    int32_t *tok; /* [max_len] the answer being gated */
    float *lp;    /* [max_len] */
} ab_state;

static sr_status ab_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    if (cfg->beam < 1)
        return sr_error(SR_ERR_ARG, "stream.beam: aed_beam needs a beam size >= 1, got %d", cfg->beam);
    sr_status st = sr_aed_check_scorer(sc, "aed_beam", cfg->beam);
    if (st) return st;
    ab_state *s = sr_calloc(1, sizeof *s, "aed_beam state");
    if (!s) return SR_ERR_NOMEM;
    if ((st = sr_aed_beams_init(&s->e, sc, cfg->beam, 0, cfg->repetition_guard))) {
        free(s);
        return st;
    }
    size_t L = (size_t)sc->aed_max_len;
    if (!(s->tok = sr_malloc(L * sizeof *s->tok, "aed_beam answer tokens")) ||
        !(s->lp = sr_malloc(L * sizeof *s->lp, "aed_beam answer log-probs"))) {
        free(s->tok);
        sr_aed_beams_free(&s->e);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

static sr_status ab_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    ab_state *s = state;
    if (!final) return sr_aed_write_hyp(h, NULL, 0, 0); /* offline: nothing until the end */
    sr_aed_beams_reset(&s->e);
    const sr_aed_done *best;
    sr_status st = sr_aed_beams_finish(&s->e, sc, s->e.max_len, 0, &best);
    if (st) return sr_error_prefix(st, "aed_beam");
    h->loop_cuts += s->e.loop_cuts;
    if (!best) return sr_aed_write_hyp(h, NULL, 0, 0);
    int n = best->n;
    memcpy(s->tok, best->tok, (size_t)n * sizeof *s->tok);
    memcpy(s->lp, best->lp, (size_t)n * sizeof *s->lp);
    if ((st = sr_aed_gate_all(sc, s->tok, s->lp, &n, best->end_lp)))
        return sr_error_prefix(st, "aed_beam");
    return sr_aed_write_hyp(h, s->tok, n, n);
}

static void ab_reset(void *state) { sr_aed_beams_reset(&((ab_state *)state)->e); }

static void ab_close(void *state)
{
    ab_state *s = state;
    if (!s) return;
    sr_aed_beams_free(&s->e);
    free(s->tok);
    free(s->lp);
    free(s);
}

static size_t ab_bytes(const void *state)
{
    const ab_state *s = state;
    return sizeof *s + sr_aed_beams_bytes(&s->e) +
           (size_t)s->e.max_len * (sizeof(int32_t) + sizeof(float));
}

const sr_decoder_ops sr_dec_aed_beam = {
    .name = "aed_beam",
    .description = "offline AED beam search at the end of the audio (openai-whisper scoring, patience 1)",
    .kind = SR_SCORER_AED,
    .open = ab_open,
    .update = ab_update,
    .reset = ab_reset,
    .close = ab_close,
    .state_bytes = ab_bytes,
};
