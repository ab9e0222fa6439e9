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
    int n;        /* its length */
    int gating;   /* the update in progress: 0 search, 1 no-speech gate */
    sr_aed_gall g;
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

static void ab_begin(void *state, const sr_scorer *sc, int final)
{
    ab_state *s = state;
    (void)sc;
    s->gating = 0;
    if (!final) return;
    sr_aed_beams_reset(&s->e);
    sr_aed_beams_begin(&s->e, SR_AED_BEAMS_FINISH, s->e.max_len, 0);
}

static int ab_advance(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    ab_state *s = state;
    int n_calls;
    *st = SR_OK;
    if (!final) { /* offline: nothing until the end */
        *st = sr_aed_write_hyp(h, NULL, 0, 0);
        return 0;
    }
    if (!s->gating) {
        if (res) {
            *st = sr_error_prefix(sr_aed_beams_call_error(&s->e, res), "aed_beam");
            return 0;
        }
        if ((n_calls = sr_aed_beams_next(&s->e, call))) return n_calls;
        h->loop_cuts += s->e.loop_cuts;
        const sr_aed_done *best = s->e.best;
        if (!best) {
            *st = sr_aed_write_hyp(h, NULL, 0, 0);
            return 0;
        }
        s->n = best->n;
        memcpy(s->tok, best->tok, (size_t)s->n * sizeof *s->tok);
        memcpy(s->lp, best->lp, (size_t)s->n * sizeof *s->lp);
        sr_aed_gall_begin(&s->g, s->n, best->end_lp);
        s->gating = 1;
    }
    if (sr_aed_gall_step(&s->g, sc, s->tok, s->lp, &s->n, res, call, st)) return 1;
    *st = *st ? sr_error_prefix(*st, "aed_beam") : sr_aed_write_hyp(h, s->tok, s->n, s->n);
    return 0;
}

/* a round's calls: one per beam */
static int ab_max_calls(const void *state) { return ((const ab_state *)state)->e.b; }

static const sr_stepper ab_stepper = {.begin = ab_begin, .advance = ab_advance, .max_calls = ab_max_calls};

SR_STEPPER_UPDATES(ab, ab_stepper, "aed_beam")

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
    .update_batch = ab_update_batch,
    .reset = ab_reset,
    .close = ab_close,
    .state_bytes = ab_bytes,
};
