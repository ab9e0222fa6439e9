/*
 * sync_greedy.c — frame-synchronous greedy decoding (Voxtral-style): exactly one step per
 * audio frame after the model's delay; the argmax token is fed back as the next step's
 * previous token whatever it is, and appended to the hypothesis unless it is the scorer's
 * blank ("no token" / streaming pad). Nothing is ever revised, so every token is stable.
 * Where the scorer offers it (sr_scorer.sync_token) the argmax is taken where the logits are
 * and only the id comes back; else here, by the same rule (ties to the lower id, NaN never
 * chosen while a number is left).
 *
 * stream.final_steps = N > 0: a final update stops after N steps with frames left (pending);
 * the engine calls it again in its next steps, each going on from the first frame not yet
 * decoded, so the steps and tokens are those of one whole update.
 */
#include "lockstep.h"

#include <math.h>
#include <string.h>

typedef struct {
    int next_frame; /* first frame not yet decoded */
    int n_frames;   /* frames available in the update in progress */
    int asked;      /* a step of next_frame is in flight */
    int32_t prev;   /* token chosen at the previous step, -1 before the first */
    int32_t token;  /* the step's argmax (sync_token scorers) */
    float *logits;  /* [vocab] the step's logits (other scorers; NULL with sync_token) */
    int vocab;
    int final_steps; /* stream.final_steps: steps a final update runs per call (0: all) */
    int steps;       /* steps asked in the update in progress */
    int more;        /* the last update was final and stopped at final_steps with frames left */
} sg_state;

static sr_status sg_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    if (cfg->beam > 1)
        return sr_error(SR_ERR_ARG, "stream.beam: sync_greedy is greedy, beam %d not supported", cfg->beam);
    sg_state *s = sr_calloc(1, sizeof *s, "sync_greedy state");
    if (!s) return SR_ERR_NOMEM;
    s->vocab = sc->vocab;
    s->prev = -1;
    s->final_steps = cfg->final_steps;
    if (!(sc->sync_token && sc->sync_step_batch) &&
        !(s->logits = sr_calloc((size_t)sc->vocab, sizeof(float), "sync_greedy logits"))) {
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

static void sg_begin(void *state, const sr_scorer *sc, int final)
{
    sg_state *s = state;
    (void)final;
    s->n_frames = sc->sync_frames(sc->ctx);
    s->asked = 0;
    s->steps = 0;
    s->more = 0;
}

/* One step per frame not yet decoded; the argmax of a step's logits becomes the next step's
 * previous token and is appended unless blank. */
static int sg_advance(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    sg_state *s = state;
    *st = res;
    if (res) return 0;
    if (s->asked) {
        s->asked = 0;
        int best = s->token;
        if (s->logits) {
            best = -1;
            for (int v = 0; v < s->vocab; v++) /* the first maximum; NaN only if all are */
                if (!isnan(s->logits[v]) && (best < 0 || s->logits[v] > s->logits[best])) best = v;
            if (best < 0) best = 0;
        }
        if (best < 0 || best >= s->vocab) {
            *st = sr_error(SR_ERR_ARG, "sync_greedy: the scorer answered token %d (vocabulary %d)", best, s->vocab);
            return 0;
        }
        s->prev = best;
        s->next_frame++;
        if (best != sc->blank && (*st = sr_hyp_push(h, best))) return 0;
    }
    if (s->next_frame < s->n_frames) {
        if (final && s->final_steps > 0 && s->steps == s->final_steps) {
            s->more = 1; /* the rest in the next updates (final_steps) */
            h->n_stable = h->n;
            return 0;
        }
        sr_call_sync_step(call, s->next_frame, s->prev, s->logits);
        call->r.sy.token = &s->token;
        s->asked = 1;
        s->steps++;
        return 1;
    }
    h->n_stable = h->n;
    return 0;
}

static int sg_pending(const void *state) { return ((const sg_state *)state)->more; }

static const sr_stepper sg_stepper = {.begin = sg_begin, .advance = sg_advance};

SR_STEPPER_UPDATES(sg, sg_stepper, "sync_greedy")

static void sg_reset(void *state)
{
    sg_state *s = state;
    s->next_frame = 0;
    s->prev = -1;
    s->asked = 0;
    s->more = 0;
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
    return sizeof *s + (s->logits ? (size_t)s->vocab * sizeof(float) : 0);
}

const sr_decoder_ops sr_dec_sync_greedy = {
    .name = "sync_greedy",
    .description = "one token per audio frame, argmax fed back (Voxtral-style)",
    .kind = SR_SCORER_SYNC,
    .open = sg_open,
    .update = sg_update,
    .update_batch = sg_update_batch,
    .pending = sg_pending,
    .reset = sg_reset,
    .close = sg_close,
    .state_bytes = sg_bytes,
};
