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
#include "../core/plugin.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t t;          /* next frame to decode */
    int started;
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

static sr_status rg_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    rg_state *s = state;
    sr_status st;
    if (!s->started) {
        if ((st = sc->tr_predict(sc->ctx, NULL, -1, s->state, s->pred))) return st;
        s->started = 1;
    }
    int64_t T = sc->tr_frames(sc->ctx);
    int V = sc->vocab, nd = sc->tr_n_durations, maxs = sc->tr_max_symbols;
    while (s->t < T) {
        int sym = 0, need = 1;
        while (need && sym < maxs) {
            if ((st = sc->tr_joint(sc->ctx, (int)s->t, s->pred, s->logits))) return st;
            int k = argmax(s->logits, V);
            int skip = nd ? sc->tr_durations[argmax(s->logits + V, nd)] : 0;
            if (k != sc->blank) {
                if ((st = sr_hyp_push(h, k))) return st;
                if ((st = sc->tr_predict(sc->ctx, s->state, k, s->state, s->pred))) return st;
            }
            sym++;
            if (nd) {
                s->t += skip;
                need = skip == 0;
            } else {
                need = k != sc->blank;
            }
        }
        if (nd) {
            if (sym == maxs) s->t++;
        } else {
            s->t++;
        }
    }
    h->n_stable = h->n;
    return SR_OK;
}

/* The solo update as a per-stream state machine stepped in lockstep: each round every stream
 * still decoding makes exactly the next call its solo update would make (the start predict, a
 * joint, or the predict after an emitted token), and the round's calls of each kind go to the
 * backend as one batched call. Results per row are independent of the batch (scorer contract),
 * so every stream computes exactly its solo sequence. */
enum { RG_JOINT = 0, RG_PREDICT = 1, RG_DONE = 2 };

typedef struct {
    int phase, sym, need, k;
    int64_t T;
} rg_run;

/* After a joint: the solo loop's bookkeeping for stream s (phase of its next call). */
static sr_status rg_after_joint(rg_state *s, const sr_scorer *sc, rg_run *r, sr_hyp *h)
{
    int V = sc->vocab, nd = sc->tr_n_durations;
    int k = argmax(s->logits, V);
    int skip = nd ? sc->tr_durations[argmax(s->logits + V, nd)] : 0;
    r->k = k;
    if (k != sc->blank) {
        sr_status st = sr_hyp_push(h, k);
        if (st) return st;
    }
    r->sym++;
    if (nd) {
        s->t += skip;
        r->need = skip == 0;
    } else {
        r->need = k != sc->blank;
    }
    if (k != sc->blank) { /* the predict comes first; the frame loop resumes after it */
        r->phase = RG_PREDICT;
        return SR_OK;
    }
    r->phase = RG_JOINT;
    return SR_OK;
}

/* The frame loop's test before a joint: next frame / next symbol / done. */
static void rg_next(rg_state *s, const sr_scorer *sc, rg_run *r)
{
    int nd = sc->tr_n_durations, maxs = sc->tr_max_symbols;
    for (;;) {
        if (r->need && r->sym < maxs && r->sym > 0) return; /* another symbol on this frame */
        if (r->sym > 0) {                                   /* the frame is over */
            if (nd) {
                if (r->sym == maxs) s->t++;
            } else {
                s->t++;
            }
        }
        if (s->t >= r->T) {
            r->phase = RG_DONE;
            return;
        }
        r->sym = 0; /* a new frame: its first joint */
        r->need = 1;
        return;
    }
}

/* A round's calls of one kind: the backend's batched form, else request by request. */
static sr_status predict_all(const sr_scorer *sc, const sr_tr_predict_req *q, int n)
{
    if (sc->tr_predict_batch) return sc->tr_predict_batch(q, n);
    sr_status st = SR_OK;
    for (int i = 0; i < n && !st; i++)
        st = sc->tr_predict(q[i].ctx, q[i].state_in, q[i].token, q[i].state_out, q[i].pred_out);
    return st;
}

static sr_status joint_all(const sr_scorer *sc, const sr_tr_joint_req *q, int n)
{
    if (sc->tr_joint_batch) return sc->tr_joint_batch(q, n);
    sr_status st = SR_OK;
    for (int i = 0; i < n && !st; i++) st = sc->tr_joint(q[i].ctx, q[i].t, q[i].pred_out, q[i].logits);
    return st;
}

static void rg_update_batch(void *const *states, const sr_scorer *const *scs, const int *final,
                            sr_hyp *const *hs, int count, sr_status *st)
{
    (void)final;
    rg_run *run = malloc((size_t)count * sizeof *run);
    sr_tr_predict_req *pq = malloc((size_t)count * sizeof *pq);
    sr_tr_joint_req *jq = malloc((size_t)count * sizeof *jq);
    int *pi = malloc((size_t)count * sizeof *pi), *ji = malloc((size_t)count * sizeof *ji);
    if (!run || !pq || !jq || !pi || !ji) {
        for (int i = 0; i < count; i++) st[i] = sr_error(SR_ERR_NOMEM, "rnnt_greedy: batch of %d streams", count);
        goto out;
    }
    for (int i = 0; i < count; i++) {
        rg_state *s = states[i];
        st[i] = SR_OK;
        run[i] = (rg_run){.phase = s->started ? RG_JOINT : RG_PREDICT, .k = -1};
        run[i].T = scs[i]->tr_frames(scs[i]->ctx);
        if (s->started) rg_next(s, scs[i], &run[i]);
    }
    for (;;) {
        int np = 0, nj = 0;
        for (int i = 0; i < count; i++) {
            rg_state *s = states[i];
            if (st[i] || run[i].phase == RG_DONE) continue;
            if (run[i].phase == RG_PREDICT) {
                int start = !s->started;
                pq[np] = (sr_tr_predict_req){.ctx = scs[i]->ctx, .state_in = start ? NULL : s->state,
                                             .token = start ? -1 : run[i].k, .state_out = s->state,
                                             .pred_out = s->pred};
                pi[np++] = i;
            } else {
                jq[nj] = (sr_tr_joint_req){.ctx = scs[i]->ctx, .t = (int)s->t, .pred_out = s->pred,
                                           .logits = s->logits};
                ji[nj++] = i;
            }
        }
        if (!np && !nj) break;
        if (np) {
            sr_status e = predict_all(scs[pi[0]], pq, np);
            for (int q = 0; q < np; q++) {
                int i = pi[q];
                rg_state *s = states[i];
                if (e) {
                    st[i] = e;
                    continue;
                }
                if (!s->started) s->started = 1;
                run[i].phase = RG_JOINT;
                rg_next(s, scs[i], &run[i]);
            }
        }
        if (nj) {
            sr_status e = joint_all(scs[ji[0]], jq, nj);
            for (int q = 0; q < nj; q++) {
                int i = ji[q];
                rg_state *s = states[i];
                if (e) {
                    st[i] = e;
                    continue;
                }
                if ((st[i] = rg_after_joint(s, scs[i], &run[i], hs[i]))) continue;
                if (run[i].phase == RG_JOINT) rg_next(s, scs[i], &run[i]);
            }
        }
    }
    for (int i = 0; i < count; i++)
        if (!st[i]) hs[i]->n_stable = hs[i]->n;
out:
    free(run);
    free(pq);
    free(jq);
    free(pi);
    free(ji);
}

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
