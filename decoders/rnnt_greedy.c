/*
 * rnnt_greedy.c — greedy transducer decoding (RNN-T and TDT), NeMo's GreedyRNNTInfer /
 * GreedyTDTInfer carried across chunks.
 *
 * RNN-T: for each new encoder frame t, up to max_symbols times: logits = joint(t, pred_out);
 * k = argmax over the vocabulary (blank included); blank ends the frame; any other token is
 * emitted and the prediction network advances on it (its state changes only on non-blank
 * tokens). The prediction output of the last emitted token (or of the start symbol) is kept, so
 * it is computed once per emitted token.
 *
 * TDT (scorer with durations): k = argmax over the token logits, duration = durations[argmax
 * over the duration logits]; a non-blank k is emitted; the frame index advances by the
 * duration and the loop on one frame continues only while the duration is 0; after
 * max_symbols steps on one frame the index advances by 1 more (NeMo's rule). A jump past the
 * frames available so far is carried into the next update, so chunking never loses frames.
 *
 * Every emitted token is final (n_stable = n).
 */
#include "lockstep.h"

#include <string.h>

typedef struct {
    int64_t t;          /* next frame to decode */
    int started;
    /* the update in progress (a stepper, lockstep.h) */
    int64_t T;          /* frames available */
    int phase, sym, need;
    float *state, *pred, *logits;
    int pred_state, pred_dim, n_logits;
} rg_state;

static sr_status rg_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    if (sc->pred_state <= 0 || sc->pred_dim <= 0 || sc->tr_max_symbols <= 0)
        return sr_error(SR_ERR_ARG, "rnnt_greedy: scorer has no prediction network (pred_state %d, pred_dim %d, max_symbols %d)",
                        sc->pred_state, sc->pred_dim, sc->tr_max_symbols);
    rg_state *s = sr_calloc(1, sizeof *s, "rnnt_greedy state");
    if (!s) return SR_ERR_NOMEM;
    s->pred_state = sc->pred_state;
    s->pred_dim = sc->pred_dim;
    s->n_logits = sc->vocab + sc->tr_n_durations;
    s->state = sr_malloc((size_t)s->pred_state * sizeof(float), "rnnt_greedy prediction state");
    s->pred = sr_malloc((size_t)s->pred_dim * sizeof(float), "rnnt_greedy prediction output");
    s->logits = sr_malloc((size_t)s->n_logits * sizeof(float), "rnnt_greedy logits");
    if (!s->state || !s->pred || !s->logits) {
        free(s->state);
        free(s->pred);
        free(s->logits);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

enum { RG_START, RG_START_WAIT, RG_FRAME, RG_JOINT_WAIT, RG_PRED_WAIT };

static void rg_begin(void *state, const sr_scorer *sc, int final)
{
    rg_state *s = state;
    (void)final;
    s->T = sc->tr_frames(sc->ctx);
    s->sym = 0; /* every update starts a frame */
    s->need = 1;
    s->phase = s->started ? RG_FRAME : RG_START;
}

static int rg_advance(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    rg_state *s = state;
    int V = sc->vocab, nd = sc->tr_n_durations, maxs = sc->tr_max_symbols;
    (void)final;
    *st = res;
    if (res) return 0;
    switch (s->phase) {
    case RG_START: /* the start symbol's prediction */
        sr_call_tr_predict(call, NULL, -1, s->state, s->pred);
        s->phase = RG_START_WAIT;
        return 1;
    case RG_START_WAIT:
        s->started = 1;
        break;
    case RG_JOINT_WAIT: {
        int k = argmax(s->logits, V);
        int skip = nd ? sc->tr_durations[argmax(s->logits + V, nd)] : 0;
        if (k != sc->blank && (*st = sr_hyp_push(h, k))) return 0;
        s->sym++;
        if (nd) {
            s->t += skip;
            s->need = skip == 0;
        } else {
            s->need = k != sc->blank;
        }
        if (k != sc->blank) { /* the prediction network advances on it */
            sr_call_tr_predict(call, s->state, k, s->state, s->pred);
            s->phase = RG_PRED_WAIT;
            return 1;
        }
        break;
    }
    default: /* RG_FRAME, RG_PRED_WAIT */
        break;
    }
    /* the frame loop: another symbol on this frame, or the frame is over */
    if (s->sym > 0 && !(s->need && s->sym < maxs)) {
        if (!nd || s->sym == maxs) s->t++; /* TDT moved by its durations already */
        s->sym = 0;
        s->need = 1;
    }
    if (s->sym == 0 && s->t >= s->T) {
        h->n_stable = h->n;
        return 0;
    }
    sr_call_tr_joint(call, (int)s->t, s->pred, s->logits);
    s->phase = RG_JOINT_WAIT;
    return 1;
}

static const sr_stepper rg_stepper = {.begin = rg_begin, .advance = rg_advance};

SR_STEPPER_UPDATES(rg, rg_stepper, "rnnt_greedy")

static void rg_reset(void *state)
{
    rg_state *s = state;
    s->t = 0;
    s->started = 0;
}

static void rg_close(void *state)
{
    rg_state *s = state;
    if (!s) return;
    free(s->state);
    free(s->pred);
    free(s->logits);
    free(s);
}

static size_t rg_bytes(const void *state)
{
    const rg_state *s = state;
    return sizeof *s + ((size_t)s->pred_state + s->pred_dim + s->n_logits) * sizeof(float);
}

const sr_decoder_ops sr_dec_rnnt_greedy = {
    .name = "rnnt_greedy",
    .description = "greedy RNN-T / TDT decoding (max symbols per frame; state carried across chunks)",
    .kind = SR_SCORER_TRANSDUCER,
    .open = rg_open,
    .update = rg_update,
    .update_batch = rg_update_batch,
    .reset = rg_reset,
    .close = rg_close,
    .state_bytes = rg_bytes,
};
