/*
 * lockstep.h — one driver for every decoder's update, solo or batched (internal to decoders/).
 *
 * A decoder's update is written as a per-stream state machine, a stepper, that stops at each
 * scorer call it needs: advance() runs the update's host work up to its next call, describes
 * the call in *call and returns 1, or finishes the update (*st its outcome) and returns 0; the
 * driver makes the call and advances again with the call's status in res (SR_OK on the first
 * advance of an update). Many streams step in lockstep (sr_decoder_ops.update_batch): each
 * round every stream still updating makes exactly the next call its update needs, and the
 * round's calls of each kind go to the backend as one batched call (the scorer's *_batch form,
 * else the solo form request by request). Rows are independent of the batch (scorer
 * contract), so each stream makes its solo sequence of calls and gets its solo result; the
 * solo update is the driver with one stream (one implementation). A call's buffers (prefix,
 * outputs, states) belong to the stream's decoder state and must stay valid until the next
 * advance.
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
    int (*advance)(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                   sr_call *call, sr_status *st);
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
void sr_call_aed_no_speech(sr_call *c, const int32_t *prefix, int n, int *start, float *p);
void sr_call_tr_predict(sr_call *c, const float *state_in, int32_t token, float *state_out,
                        float *pred_out);
void sr_call_tr_joint(sr_call *c, int t, const float *pred_out, float *logits);
void sr_call_sync_step(sr_call *c, int t, int32_t prev, float *logits);

#endif /* SR_LOCKSTEP_H */
