/*
 * sync_greedy.c — frame-synchronous greedy decoding (Voxtral-style): exactly one step per
 * audio frame after the model's delay; the argmax token is fed back as the next step's
 * previous token whatever it is, and appended to the hypothesis unless it is the scorer's
 * blank ("no token" / streaming pad). Nothing is ever revised, so every token is stable.
 */
#include "../core/plugin.h"

#include <string.h>

typedef struct {
    int next_frame; /* first frame not yet decoded */
    int32_t prev;   /* token chosen at the previous step, -1 before the first */
    float *logits;  /* [vocab] */
    int vocab;
} sg_state;

static sr_status sg_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    if (cfg->beam > 1)
        return sr_error(SR_ERR_ARG, "stream.beam: sync_greedy is greedy, beam %d not supported", cfg->beam);
    sg_state *s = sr_calloc(1, sizeof *s, "sync_greedy state");
    if (!s) return SR_ERR_NOMEM;
    s->vocab = sc->vocab;
    s->prev = -1;
    if (!(s->logits = sr_calloc((size_t)sc->vocab, sizeof(float), "sync_greedy logits"))) {
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

static sr_status sg_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    sg_state *s = state;
    int n = sc->sync_frames(sc->ctx);
    for (; s->next_frame < n; s->next_frame++) {
        sr_status st = sc->sync_step(sc->ctx, s->next_frame, s->prev, s->logits);
        if (st) return st;
        int best = 0;
        for (int v = 1; v < s->vocab; v++)
            if (s->logits[v] > s->logits[best]) best = v; /* first maximum wins ties */
        s->prev = best;
        if (best != sc->blank && (st = sr_hyp_push(h, best))) return st;
    }
    h->n_stable = h->n;
    return SR_OK;
}

static void sg_reset(void *state)
{
    sg_state *s = state;
    s->next_frame = 0;
    s->prev = -1;
}

static void sg_close(void *state)
{
    sg_state *s = state;
    if (!s) return;
    free(s->logits);
    free(s);
}

static size_t sg_bytes(const void *state)
{
    const sg_state *s = state;
    return sizeof *s + (size_t)s->vocab * sizeof(float);
}

const sr_decoder_ops sr_dec_sync_greedy = {
    .name = "sync_greedy",
    .description = "one token per audio frame, argmax fed back (Voxtral-style)",
    .kind = SR_SCORER_SYNC,
    .open = sg_open,
    .update = sg_update,
    .reset = sg_reset,
    .close = sg_close,
    .state_bytes = sg_bytes,
};
