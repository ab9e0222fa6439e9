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
    sr_aed_top top; /* the next position's summary */
    float *dist;  /* [vocab], only for a scorer without aed_top */
    int max_len, vocab;
    /* the update in progress (a stepper, aed_common.h) */
    int phase, n, added;
    sr_aed_stop why;
    sr_aed_gall g;
} ag_state;

enum { AG_START, AG_DECODE, AG_GATE };

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
        (!sc->aed_top &&
         !(s->dist = sr_malloc((size_t)s->vocab * sizeof *s->dist, "aed_greedy distribution")))) {
        free(s->tok);
        free(s->lp);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

static void ag_begin(void *state, const sr_scorer *sc, int final)
{
    ag_state *s = state;
    (void)sc;
    (void)final;
    s->phase = AG_START;
    s->n = s->added = 0;
}

static int ag_advance(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    ag_state *s = state;
    *st = SR_OK;
    if (!final) { /* offline: nothing until the end */
        *st = sr_aed_write_hyp(h, s->tok, 0, 0);
        return 0;
    }
    switch (s->phase) {
    case AG_START:
        s->phase = AG_DECODE;
        sr_call_aed_top(call, 0, s->tok, 0, 0, s->dist, &s->top);
        return 1;
    case AG_DECODE:
        if (res) {
            *st = sr_error_prefix(res, "aed_greedy: aed_logprobs at position %d", s->n);
            return 0;
        }
        if (sr_aed_greedy_step(sc, s->tok, s->lp, &s->n, &s->top, s->max_len, &s->added, 0,
                               s->guard, &s->why)) {
            sr_call_aed_top(call, 0, s->tok, s->n, s->n, s->dist, &s->top);
            return 1;
        }
        h->loop_cuts += s->why == SR_AED_LOOP;
        sr_aed_gall_begin(&s->g, s->n, s->why == SR_AED_EOT ? s->top.eot_lp : NAN);
        s->phase = AG_GATE;
        res = SR_OK;
        /* fall through */
    default:
        if (sr_aed_gall_step(&s->g, sc, s->tok, s->lp, &s->n, res, call, st)) return 1;
        *st = *st ? sr_error_prefix(*st, "aed_greedy") : sr_aed_write_hyp(h, s->tok, s->n, s->n);
        return 0;
    }
}

static const sr_stepper ag_stepper = {.begin = ag_begin, .advance = ag_advance};

SR_STEPPER_UPDATES(ag, ag_stepper, "aed_greedy")

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
           (s->dist ? (size_t)s->vocab * sizeof(float) : 0);
}

const sr_decoder_ops sr_dec_aed_greedy = {
    .name = "aed_greedy",
    .description = "offline greedy AED decoding at the end of the audio (openai-whisper, temperature 0)",
    .kind = SR_SCORER_AED,
    .open = ag_open,
    .update = ag_update,
    .update_batch = ag_update_batch,
    .reset = ag_reset,
    .close = ag_close,
    .state_bytes = ag_bytes,
};
