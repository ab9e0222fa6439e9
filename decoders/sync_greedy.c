/*
 * sync_greedy.c — frame-synchronous greedy decoding (Voxtral-style): exactly one step per
 * audio frame after the model's delay; the argmax token is fed back as the next step's
 * previous token whatever it is, and appended to the hypothesis unless it is the scorer's
 * blank ("no token" / streaming pad). Nothing is ever revised, so every token is stable.
 */
#include "../core/plugin.h"

#include <stdlib.h>
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

/* The argmax of the step's logits becomes the next step's previous token; appended unless
 * blank. */
static sr_status sg_take(sg_state *s, const sr_scorer *sc, sr_hyp *h)
{
    int best = 0;
    for (int v = 1; v < s->vocab; v++)
        if (s->logits[v] > s->logits[best]) best = v; /* first maximum wins ties */
    s->prev = best;
    s->next_frame++;
    return best != sc->blank ? sr_hyp_push(h, best) : SR_OK;
}

/* The updates of `count` streams (distinct streams of one batch context, or one) in lockstep:
 * each round every stream with frames left makes its next step, the round's steps as one
 * batched call (sync_step_batch, else the solo form per request); q / qi hold count entries.
 * A stream's sequence of steps is its solo one, so batched == solo. */
static void sg_run(void *const *states, const sr_scorer *const *scs, sr_hyp *const *hs,
                   int count, sr_status *st, sr_sync_req *q, int *qi, int *nf)
{
    for (int i = 0; i < count; i++) {
        st[i] = SR_OK;
        nf[i] = scs[i]->sync_frames(scs[i]->ctx);
    }
    for (;;) {
        int nq = 0;
        for (int i = 0; i < count; i++) {
            sg_state *s = states[i];
            if (st[i] || s->next_frame >= nf[i]) continue;
            q[nq] = (sr_sync_req){.ctx = scs[i]->ctx, .t = s->next_frame, .prev = s->prev,
                                  .logits = s->logits};
            qi[nq++] = i;
        }
        if (!nq) break;
        sr_status e = SR_OK;
        if (scs[qi[0]]->sync_step_batch) {
            e = scs[qi[0]]->sync_step_batch(q, nq);
        } else {
            for (int k = 0; k < nq && !e; k++)
                e = scs[qi[k]]->sync_step(q[k].ctx, q[k].t, q[k].prev, q[k].logits);
        }
        for (int k = 0; k < nq; k++) {
            int i = qi[k];
            st[i] = e ? e : sg_take(states[i], scs[i], hs[i]);
        }
    }
    for (int i = 0; i < count; i++)
        if (!st[i]) hs[i]->n_stable = hs[i]->n;
}

static sr_status sg_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    (void)final;
    sr_status st;
    sr_sync_req q;
    int qi, nf;
    sg_run(&state, &sc, &h, 1, &st, &q, &qi, &nf);
    return st;
}

static void sg_update_batch(void *const *states, const sr_scorer *const *scs, const int *final,
                            sr_hyp *const *hs, int count, sr_status *st)
{
    (void)final;
    sr_sync_req *q = malloc((size_t)count * sizeof *q);
    int *qi = malloc((size_t)count * sizeof *qi), *nf = malloc((size_t)count * sizeof *nf);
    if (q && qi && nf) {
        sg_run(states, scs, hs, count, st, q, qi, nf);
    } else {
        for (int i = 0; i < count; i++)
            st[i] = sr_error(SR_ERR_NOMEM, "sync_greedy: batch of %d streams", count);
    }
    free(q);
    free(qi);
    free(nf);
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
    .update_batch = sg_update_batch,
    .reset = sg_reset,
    .close = sg_close,
    .state_bytes = sg_bytes,
};
