/*
 * lockstep.h — one driver for every decoder's update, solo or batched (internal to decoders/).
 *
 * A decoder's update is written as a per-stream state machine, a stepper, that stops where it
 * needs scorer calls: advance() runs the update's host work up to its next calls, describes
 * them in call[0 .. n) (n at most max_calls; calls that do not depend on each other, e.g. one
 * per beam) and returns n, or finishes the update (*st its outcome) and returns 0; the driver
 * makes the calls and advances again with their status in res (the first failure among them;
 * SR_OK on the first advance of an update). Many streams step in lockstep
 * (sr_decoder_ops.update_batch): each round every stream still updating makes exactly the
 * next calls its update needs, and the round's calls of each kind go to the backend as few
 * batched calls as the scorer's limits allow (sr_scorer.batch_max, aed_batch_multi,
 * tr_batch_multi: a scorer without multi gets each stream's j-th call of the round in its
 * j-th batched call), the solo form request by request where there is no batched form. Rows
 * are independent of the batch (scorer contract), so each stream makes its solo sequence of
 * calls and gets its solo result; the solo update is the driver with one stream (one
 * implementation). A call's buffers (prefix, outputs, states) belong to the stream's decoder
 * state and must stay valid until the next advance.
 */
#ifndef SR_LOCKSTEP_H
#define SR_LOCKSTEP_H

#include "../core/plugin.h"

typedef enum {
    SR_CALL_AED_LOGPROBS = 0, /* r.lp: aed_logprobs */
    SR_CALL_AED_NO_SPEECH,    /* r.ns: aed_no_speech */
    SR_CALL_TR_PREDICT,       /* r.pr: tr_predict */
    SR_CALL_TR_JOINT,         /* r.jt: tr_joint */
    SR_CALL_SYNC_STEP,        /* r.sy: sync_step */
    SR_CALL_KINDS
} sr_call_kind;

/* The request of one scorer call, by kind. */
typedef union sr_call_req {
    sr_aed_req lp;
    sr_aed_ns_req ns;
    sr_tr_predict_req pr;
    sr_tr_joint_req jt;
    sr_sync_req sy;
} sr_call_req;

/* One scorer call; ctx is set by the driver. */
typedef struct sr_call {
    sr_call_kind kind;
    sr_call_req r;
} sr_call;

typedef struct sr_stepper {
    /* Start an update (nothing may fail here). */
    void (*begin)(void *state, const sr_scorer *sc, int final);
    /* Calls written to call[0 .. n), n <= max_calls(state); 0 when the update is done. */
    int (*advance)(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                   sr_call *call, sr_status *st);
    /* The most calls one advance of this state makes (NULL: 1); fixed while the state lives. */
    int (*max_calls)(const void *state);
} sr_stepper;

/* Run the updates of `count` streams (distinct streams of one batch context, or one) through
 * stepper d; st[i] gets stream i's outcome (a failing batched call fails every stream in it;
 * the thread's last error message is then the last such stream's). `who` names the decoder in
 * an out-of-memory error. */
void sr_lockstep(const sr_stepper *d, const char *who, void *const *states,
                 const sr_scorer *const *scs, const int *final, sr_hyp *const *hs, int count,
                 sr_status *st);

/* A decoder's update and update_batch as stepper d (prefix_update, prefix_update_batch; who
 * names the decoder in an out-of-memory error). */
#define SR_STEPPER_UPDATES(prefix, d, who)                                                     \
    static sr_status prefix##_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)  \
    {                                                                                        \
        sr_status st_;                                                                       \
        sr_lockstep(&(d), who, &state, &sc, &final, &h, 1, &st_);                            \
        return st_;                                                                          \
    }                                                                                        \
    static void prefix##_update_batch(void *const *states, const sr_scorer *const *scs,      \
                                      const int *final, sr_hyp *const *hs, int count,        \
                                      sr_status *st)                                         \
    {                                                                                        \
        sr_lockstep(&(d), who, states, scs, final, hs, count, st);                           \
    }

/* Call shorthands for steppers. */
void sr_call_aed_logprobs(sr_call *c, int slot, const int32_t *prefix, int n, int from,
                          float *out);
/* The same call asking for the rows' summaries in top [n - from + 1]: rows [(n - from + 1),
 * vocab] is scratch for a scorer without aed_top (the driver summarizes what it writes there). */
void sr_call_aed_top(sr_call *c, int slot, const int32_t *prefix, int n, int from, float *rows,
                     sr_aed_top *top);
/* ... and each row's k best entries to top_id / top_lp [n - from + 1, k] (beam decoders). */
void sr_call_aed_topk(sr_call *c, int slot, const int32_t *prefix, int n, int from, float *rows,
                      sr_aed_top *top, int k, int32_t *top_id, float *top_lp);
void sr_call_aed_no_speech(sr_call *c, const int32_t *prefix, int n, int *start, float *p);
void sr_call_tr_predict(sr_call *c, const float *state_in, int32_t token, float *state_out,
                        float *pred_out);
void sr_call_tr_joint(sr_call *c, int t, const float *pred_out, float *logits);
void sr_call_sync_step(sr_call *c, int t, int32_t prev, float *logits);

#endif /* SR_LOCKSTEP_H */
