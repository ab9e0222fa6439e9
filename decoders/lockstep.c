/*
 * lockstep.c — the steppers' driver (lockstep.h): rounds of the scorer calls of every stream
 * still updating, each kind of call sent to the backend in as few batched calls as the
 * scorer's limits allow.
 */
#include "lockstep.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void sr_call_aed_logprobs(sr_call *c, int slot, const int32_t *prefix, int n, int from,
                          float *out)
{
    c->kind = SR_CALL_AED_LOGPROBS;
    c->r.lp = (sr_aed_req){.slot = slot, .prefix = prefix, .n = n, .from = from, .out = out};
}

void sr_call_aed_top(sr_call *c, int slot, const int32_t *prefix, int n, int from, float *rows,
                     sr_aed_top *top)
{
    sr_call_aed_topk(c, slot, prefix, n, from, rows, top, 0, NULL, NULL);
}

void sr_call_aed_topk(sr_call *c, int slot, const int32_t *prefix, int n, int from, float *rows,
                      sr_aed_top *top, int k, int32_t *top_id, float *top_lp)
{
    c->kind = SR_CALL_AED_LOGPROBS;
    c->r.lp = (sr_aed_req){.slot = slot, .prefix = prefix, .n = n, .from = from, .out = rows,
                           .top = top, .top_k = k, .top_id = top_id, .top_lp = top_lp};
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

/* The request arrays of one round, one per kind (each holds up to `total` requests). */
typedef struct {
    sr_aed_req *lp;
    sr_aed_ns_req *ns;
    sr_tr_predict_req *pr;
    sr_tr_joint_req *jt;
    sr_sync_req *sy;
    int *idx[SR_CALL_KINDS]; /* stream of each request */
    int *cix[SR_CALL_KINDS]; /* its place among its stream's calls of the round */
} round_bufs;

/* Requests j0 .. j0 + n - 1 of kind k (sc: the first one's scorer): the backend's batched
 * form when it has one, else the solo form request by request, stopping at the first
 * failure. */
static sr_status call_all(const sr_scorer *sc, sr_call_kind k, const round_bufs *b, int j0, int n)
{
    sr_status st = SR_OK;
    switch (k) {
    case SR_CALL_AED_LOGPROBS:
        if (sc->aed_top) return sc->aed_logprobs_batch(b->lp + j0, n);
        if (sc->aed_logprobs_batch) {
            st = sc->aed_logprobs_batch(b->lp + j0, n);
        } else {
            for (int i = j0; i < j0 + n && !st; i++) {
                const sr_aed_req *q = &b->lp[i];
                st = sc->aed_logprobs(q->ctx, q->slot, q->prefix, q->n, q->from, q->out);
            }
        }
        /* summaries asked of a scorer without aed_top: from the rows it wrote */
        for (int i = j0; i < j0 + n && !st; i++) {
            const sr_aed_req *q = &b->lp[i];
            for (int j = q->from; q->top && j <= q->n; j++) {
                const float *row = q->out + (size_t)(j - q->from) * (size_t)sc->vocab;
                sr_aed_top_of_row(row, sc->vocab, j < q->n ? q->prefix[j] : -1, sc->eot,
                                  &q->top[j - q->from]);
                if (q->top_k > 0)
                    sr_aed_row_topk(row, sc->vocab, q->top_k, q->top_id + (size_t)(j - q->from) * q->top_k,
                                    q->top_lp + (size_t)(j - q->from) * q->top_k);
            }
        }
        return st;
    case SR_CALL_AED_NO_SPEECH:
        if (sc->aed_no_speech_batch) return sc->aed_no_speech_batch(b->ns + j0, n);
        for (int i = j0; i < j0 + n && !st; i++) {
            const sr_aed_ns_req *q = &b->ns[i];
            st = sc->aed_no_speech(q->ctx, q->prefix, q->n, q->start, q->p);
        }
        return st;
    case SR_CALL_TR_PREDICT:
        if (sc->tr_predict_batch) return sc->tr_predict_batch(b->pr + j0, n);
        for (int i = j0; i < j0 + n && !st; i++) {
            const sr_tr_predict_req *q = &b->pr[i];
            st = sc->tr_predict(q->ctx, q->state_in, q->token, q->state_out, q->pred_out);
        }
        return st;
    case SR_CALL_TR_JOINT:
        if (sc->tr_joint_batch) return sc->tr_joint_batch(b->jt + j0, n);
        for (int i = j0; i < j0 + n && !st; i++) {
            const sr_tr_joint_req *q = &b->jt[i];
            st = sc->tr_joint(q->ctx, q->t, q->pred_out, q->logits);
        }
        return st;
    default:
        if (sc->sync_step_batch) return sc->sync_step_batch(b->sy + j0, n);
        for (int i = j0; i < j0 + n && !st; i++) {
            const sr_sync_req *q = &b->sy[i];
            st = sc->sync_step(q->ctx, q->t, q->prev, q->logits);
        }
        return st;
    }
}

/* Whether one batched call of kind k may hold several requests of one stream. */
static int multi(const sr_scorer *sc, sr_call_kind k)
{
    return k == SR_CALL_AED_LOGPROBS ? sc->aed_batch_multi
           : k == SR_CALL_TR_PREDICT || k == SR_CALL_TR_JOINT ? sc->tr_batch_multi
                                                                : 0;
}

/* Add stream i's call c (its c-th of the round) to its kind's array. */
static void queue_call(round_bufs *b, int *nk, const sr_call *call, void *ctx, int i, int c)
{
    sr_call_kind k = call->kind;
    int j = nk[k]++;
    switch (k) {
    case SR_CALL_AED_LOGPROBS: b->lp[j] = call->r.lp; b->lp[j].ctx = ctx; break;
    case SR_CALL_AED_NO_SPEECH: b->ns[j] = call->r.ns; b->ns[j].ctx = ctx; break;
    case SR_CALL_TR_PREDICT: b->pr[j] = call->r.pr; b->pr[j].ctx = ctx; break;
    case SR_CALL_TR_JOINT: b->jt[j] = call->r.jt; b->jt[j].ctx = ctx; break;
    default: b->sy[j] = call->r.sy; b->sy[j].ctx = ctx; break;
    }
    b->idx[k][j] = i;
    b->cix[k][j] = c;
}

/* The driver's arrays: per stream its calls (at off[i] .. off[i + 1]), how many it made this
 * round, the round's outcome for it and that outcome's message. */
typedef struct {
    sr_call *call;
    int *off, *need;
    sr_status *res;
    char **msg;
} drive_bufs;

/* Stream i's advance, its count of calls checked against the room it declared. */
static int advance(const sr_stepper *d, void *const *states, const sr_scorer *const *scs, const int *final,
                   sr_hyp *const *hs, sr_status res, drive_bufs *v, int i, sr_status *st)
{
    int n = d->advance(states[i], scs[i], final[i], hs[i], res, v->call + v->off[i], &st[i]);
    /* a stepper that made more calls than its max_calls broke its contract (and has written
     * past its room): its stream fails rather than the round going on with them */
    if (n < 0 || n > v->off[i + 1] - v->off[i]) {
        st[i] = sr_error(SR_ERR_ARG, "decoder: %d scorer calls in one round, at most %d declared", n,
                         v->off[i + 1] - v->off[i]);
        return 0;
    }
    return n;
}

static void run(const sr_stepper *d, void *const *states, const sr_scorer *const *scs,
                const int *final, sr_hyp *const *hs, int count, sr_status *st, drive_bufs *v,
                round_bufs *b)
{
    int maxc = 0;
    for (int i = 0; i < count; i++) {
        st[i] = SR_OK;
        d->begin(states[i], scs[i], final[i]);
        v->need[i] = advance(d, states, scs, final, hs, SR_OK, v, i, st);
        maxc = SR_MAX(maxc, v->off[i + 1] - v->off[i]);
    }
    for (;;) {
        /* the round's calls by kind, ordered by their place in their stream's calls */
        int nk[SR_CALL_KINDS] = {0}, any = 0;
        for (int c = 0; c < maxc; c++)
            for (int i = 0; i < count; i++)
                if (c < v->need[i]) {
                    queue_call(b, nk, &v->call[v->off[i] + c], scs[i]->ctx, i, c);
                    any = 1;
                }
        if (!any) return;
        for (int i = 0; i < count; i++) v->res[i] = SR_OK;
        for (int k = 0; k < SR_CALL_KINDS; k++) {
            const int *idx = b->idx[k], *cix = b->cix[k];
            const sr_scorer *sc = nk[k] ? scs[idx[0]] : NULL;
            /* batched calls of at most batch_max requests, of one place each where the scorer
             * takes one request per stream */
            for (int j0 = 0, n; j0 < nk[k]; j0 += n) {
                n = 1;
                while (j0 + n < nk[k] && (!sc->batch_max || n < sc->batch_max) &&
                       (multi(sc, (sr_call_kind)k) || cix[j0 + n] == cix[j0]))
                    n++;
                sr_status e = call_all(sc, (sr_call_kind)k, b, j0, n);
                if (!e) continue;
                /* a failed call fails each of its streams (the first failure of a stream's
                 * round is the one it sees), each with the call's own message */
                for (int q = j0; q < j0 + n; q++) {
                    int i = idx[q];
                    if (v->res[i]) continue;
                    v->res[i] = e;
                    if (v->msg) v->msg[i] = sr_strdup(sr_last_error());
                }
            }
        }
        for (int i = 0; i < count; i++) {
            if (!v->need[i]) continue;
            if (v->res[i] && v->msg && v->msg[i]) { /* restored: messages do not pile up */
                sr_error(v->res[i], "%s", v->msg[i]);
                free(v->msg[i]);
                v->msg[i] = NULL;
            }
            v->need[i] = advance(d, states, scs, final, hs, v->res[i], v, i, st);
        }
    }
}

void sr_lockstep(const sr_stepper *d, const char *who, void *const *states,
                 const sr_scorer *const *scs, const int *final, sr_hyp *const *hs, int count,
                 sr_status *st)
{
    if (count == 1 && !d->max_calls) { /* a solo update of one call a round: nothing to allocate */
        sr_call call;
        int need, i0 = 0, off[2] = {0, 1};
        sr_status res;
        sr_call_req one;
        round_bufs b = {.lp = &one.lp, .ns = &one.ns, .pr = &one.pr, .jt = &one.jt, .sy = &one.sy};
        for (int k = 0; k < SR_CALL_KINDS; k++) b.idx[k] = b.cix[k] = &i0;
        drive_bufs v = {.call = &call, .off = off, .need = &need, .res = &res, .msg = NULL};
        run(d, states, scs, final, hs, 1, st, &v, &b);
        return;
    }
    size_t n = (size_t)count, total = 0;
    int *off = malloc((n + 1) * sizeof *off), ok = off != NULL;
    for (int i = 0; ok && i < count; i++) {
        off[i] = (int)total;
        int m = d->max_calls ? d->max_calls(states[i]) : 1;
        total += (size_t)SR_MAX(m, 1);
        ok = total <= (size_t)INT_MAX / 2;
    }
    if (ok) off[count] = (int)total;
    drive_bufs v = {.off = off};
    round_bufs b = {0};
    int *idx = NULL;
    if (ok) {
        v.call = malloc(total * sizeof *v.call);
        v.need = malloc(n * sizeof *v.need);
        v.res = malloc(n * sizeof *v.res);
        v.msg = calloc(n, sizeof *v.msg);
        idx = malloc(total * 2 * SR_CALL_KINDS * sizeof *idx);
        b = (round_bufs){.lp = malloc(total * sizeof *b.lp), .ns = malloc(total * sizeof *b.ns),
                         .pr = malloc(total * sizeof *b.pr), .jt = malloc(total * sizeof *b.jt),
                         .sy = malloc(total * sizeof *b.sy)};
        ok = v.call && v.need && v.res && v.msg && idx && b.lp && b.ns && b.pr && b.jt && b.sy;
    }
    if (ok) {
        for (int k = 0; k < SR_CALL_KINDS; k++) {
            b.idx[k] = idx + (size_t)k * total;
            b.cix[k] = idx + (size_t)(SR_CALL_KINDS + k) * total;
        }
        run(d, states, scs, final, hs, count, st, &v, &b);
        for (int i = 0; i < count; i++) free(v.msg[i]);
    } else {
        for (int i = 0; i < count; i++)
            st[i] = sr_error(SR_ERR_NOMEM, "%s: batch of %d streams", who, count);
    }
    free(off);
    free(v.call);
    free(v.need);
    free(v.res);
    free(v.msg);
    free(idx);
    free(b.lp);
    free(b.ns);
    free(b.pr);
    free(b.jt);
    free(b.sy);
}
