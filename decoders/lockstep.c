/*
 * lockstep.c — the steppers' driver (lockstep.h): rounds of one scorer call per stream still
 * updating, each kind of call sent to the backend as one batched call.
 */
#include "lockstep.h"

#include <stdlib.h>
#include <string.h>

void sr_call_aed_logprobs(sr_call *c, int slot, const int32_t *prefix, int n, int from,
                          float *out)
{
    c->kind = SR_CALL_AED_LOGPROBS;
    c->r.lp = (sr_aed_req){.slot = slot, .prefix = prefix, .n = n, .from = from, .out = out};
}

void sr_call_aed_no_speech(sr_call *c, const int32_t *prefix, int n, int *start, float *p)
{
    c->kind = SR_CALL_AED_NO_SPEECH;
    c->r.ns = (sr_aed_ns_req){.prefix = prefix, .n = n, .start = start, .p = p};
}

void sr_call_tr_predict(sr_call *c, const float *state_in, int32_t token, float *state_out,
                        float *pred_out)
{
    c->kind = SR_CALL_TR_PREDICT;
    c->r.pr = (sr_tr_predict_req){.state_in = state_in, .token = token, .state_out = state_out,
                                  .pred_out = pred_out};
}

void sr_call_tr_joint(sr_call *c, int t, const float *pred_out, float *logits)
{
    c->kind = SR_CALL_TR_JOINT;
    c->r.jt = (sr_tr_joint_req){.t = t, .pred_out = pred_out, .logits = logits};
}

void sr_call_sync_step(sr_call *c, int t, int32_t prev, float *logits)
{
    c->kind = SR_CALL_SYNC_STEP;
    c->r.sy = (sr_sync_req){.t = t, .prev = prev, .logits = logits};
}

/* The request arrays of one round, one per kind (each holds up to count requests). */
typedef struct {
    sr_aed_req *lp;
    sr_aed_ns_req *ns;
    sr_tr_predict_req *pr;
    sr_tr_joint_req *jt;
    sr_sync_req *sy;
    int *idx[SR_CALL_KINDS]; /* stream of each request */
} round_bufs;

/* A round's n requests of kind k (of distinct streams; sc: the first one's scorer): the
 * backend's batched form when it has one, else the solo form request by request, stopping at
 * the first failure. */
static sr_status call_all(const sr_scorer *sc, sr_call_kind k, const round_bufs *b, int n)
{
    sr_status st = SR_OK;
    switch (k) {
    case SR_CALL_AED_LOGPROBS:
        if (sc->aed_logprobs_batch) return sc->aed_logprobs_batch(b->lp, n);
        for (int i = 0; i < n && !st; i++) {
            const sr_aed_req *q = &b->lp[i];
            st = sc->aed_logprobs(q->ctx, q->slot, q->prefix, q->n, q->from, q->out);
        }
        return st;
    case SR_CALL_AED_NO_SPEECH:
        if (sc->aed_no_speech_batch) return sc->aed_no_speech_batch(b->ns, n);
        for (int i = 0; i < n && !st; i++) {
            const sr_aed_ns_req *q = &b->ns[i];
            st = sc->aed_no_speech(q->ctx, q->prefix, q->n, q->start, q->p);
        }
        return st;
    case SR_CALL_TR_PREDICT:
        if (sc->tr_predict_batch) return sc->tr_predict_batch(b->pr, n);
        for (int i = 0; i < n && !st; i++) {
            const sr_tr_predict_req *q = &b->pr[i];
            st = sc->tr_predict(q->ctx, q->state_in, q->token, q->state_out, q->pred_out);
        }
        return st;
    case SR_CALL_TR_JOINT:
        if (sc->tr_joint_batch) return sc->tr_joint_batch(b->jt, n);
        for (int i = 0; i < n && !st; i++) {
            const sr_tr_joint_req *q = &b->jt[i];
            st = sc->tr_joint(q->ctx, q->t, q->pred_out, q->logits);
        }
        return st;
    default:
        if (sc->sync_step_batch) return sc->sync_step_batch(b->sy, n);
        for (int i = 0; i < n && !st; i++) {
            const sr_sync_req *q = &b->sy[i];
            st = sc->sync_step(q->ctx, q->t, q->prev, q->logits);
        }
        return st;
    }
}

/* Add stream i's call to its kind's array. */
static void queue_call(round_bufs *b, int *nk, const sr_call *c, void *ctx, int i)
{
    sr_call_kind k = c->kind;
    int j = nk[k]++;
    switch (k) {
    case SR_CALL_AED_LOGPROBS: b->lp[j] = c->r.lp; b->lp[j].ctx = ctx; break;
    case SR_CALL_AED_NO_SPEECH: b->ns[j] = c->r.ns; b->ns[j].ctx = ctx; break;
    case SR_CALL_TR_PREDICT: b->pr[j] = c->r.pr; b->pr[j].ctx = ctx; break;
    case SR_CALL_TR_JOINT: b->jt[j] = c->r.jt; b->jt[j].ctx = ctx; break;
    default: b->sy[j] = c->r.sy; b->sy[j].ctx = ctx; break;
    }
    b->idx[k][j] = i;
}

static void run(const sr_stepper *d, void *const *states, const sr_scorer *const *scs,
                const int *final, sr_hyp *const *hs, int count, sr_status *st, sr_call *call,
                int *need, round_bufs *b)
{
    for (int i = 0; i < count; i++) {
        st[i] = SR_OK;
        d->begin(states[i], scs[i], final[i]);
        need[i] = d->advance(states[i], scs[i], final[i], hs[i], SR_OK, &call[i], &st[i]);
    }
    for (;;) {
        int nk[SR_CALL_KINDS] = {0}, any = 0;
        for (int i = 0; i < count; i++)
            if (need[i]) {
                queue_call(b, nk, &call[i], scs[i]->ctx, i);
                any = 1;
            }
        if (!any) return;
        for (int k = 0; k < SR_CALL_KINDS; k++) {
            int n = nk[k];
            if (!n) continue;
            const int *idx = b->idx[k];
            sr_status e = call_all(scs[idx[0]], (sr_call_kind)k, b, n);
            /* a failed call fails each of its streams: each prefixes the call's own message,
             * restored before each so that the messages do not pile up */
            char *msg = e && n > 1 ? sr_strdup(sr_last_error()) : NULL;
            for (int q = 0; q < n; q++) {
                int i = idx[q];
                if (msg && q) sr_error(e, "%s", msg);
                need[i] = d->advance(states[i], scs[i], final[i], hs[i], e, &call[i], &st[i]);
            }
            free(msg);
        }
    }
}

void sr_lockstep(const sr_stepper *d, const char *who, void *const *states,
                 const sr_scorer *const *scs, const int *final, sr_hyp *const *hs, int count,
                 sr_status *st)
{
    if (count == 1) { /* a solo update: nothing to allocate */
        sr_call call;
        int need, i0 = 0;
        sr_call_req one;
        round_bufs b = {.lp = &one.lp, .ns = &one.ns, .pr = &one.pr, .jt = &one.jt, .sy = &one.sy};
        for (int k = 0; k < SR_CALL_KINDS; k++) b.idx[k] = &i0;
        run(d, states, scs, final, hs, 1, st, &call, &need, &b);
        return;
    }
    size_t n = (size_t)count;
    sr_call *call = malloc(n * sizeof *call);
    int *need = malloc(n * sizeof *need);
    int *idx = malloc(n * SR_CALL_KINDS * sizeof *idx);
    round_bufs b = {.lp = malloc(n * sizeof *b.lp), .ns = malloc(n * sizeof *b.ns),
                    .pr = malloc(n * sizeof *b.pr), .jt = malloc(n * sizeof *b.jt),
                    .sy = malloc(n * sizeof *b.sy)};
    if (call && need && idx && b.lp && b.ns && b.pr && b.jt && b.sy) {
        for (int k = 0; k < SR_CALL_KINDS; k++) b.idx[k] = idx + (size_t)k * n;
        run(d, states, scs, final, hs, count, st, call, need, &b);
    } else {
        for (int i = 0; i < count; i++)
            st[i] = sr_error(SR_ERR_NOMEM, "%s: batch of %d streams", who, count);
    }
    free(call);
    free(need);
    free(idx);
    free(b.lp);
    free(b.ns);
    free(b.pr);
    free(b.jt);
    free(b.sy);
}
