/*
 * rnnt_beam.c — RNN-T beam search over the transducer scorer, carried across chunks.
 *
 * Frame-synchronous search with up to max_symbols emissions per frame (the beam analogue of
 * the greedy loop). For each new frame t, with the beams A (b hypotheses, log-probability
 * scores):
 *   cur = A, ended = {}
 *   repeat max_symbols times while cur is not empty:
 *     for each h in cur: p = log_softmax(joint(t, pred_out(h)));
 *       h + blank goes to `ended` with score(h) + p[blank] (a hypothesis already in `ended`
 *       with the same tokens takes the log-sum of both scores);
 *       the b best non-blank extensions (score(h) + p[k]) are candidates;
 *     cur = the b best candidates (their prediction network advanced on k)
 *   A = the b best of `ended`
 * Hypotheses still in cur after max_symbols emissions continue with their blank extension
 * only through `ended`, as the greedy loop moves on. TDT joints are not searched (rnnt_greedy
 * handles them). The hypothesis shown is A's best; n_stable is the common prefix of all
 * beams, which every future beam extends.
 */
#include "lockstep.h"

#include <math.h>
#include <string.h>

#define RB_MAX_BEAM 64

typedef struct {
    int32_t *tok;
    int n, cap;
    double score;
    float *state, *pred;
} rb_hyp;

typedef struct {
    int beam, ps, pd, V, started;
    int64_t t;
    /* the update in progress (a stepper, lockstep.h) */
    int64_t T;   /* frames available */
    int phase, sym, ncand;
    rb_hyp *A, *cur, *nxt, *end; /* [beam] each ([beam * beam] for nxt candidates) */
    int nA, ncur, nend;
    float *logits; /* [beam, V] the joints of a round, one row per hypothesis of cur */
    double *lp;
} rb_state;

static void hyp_free(rb_hyp *h)
{
    free(h->tok);
    free(h->state);
    memset(h, 0, sizeof *h);
}

static sr_status hyp_alloc(rb_hyp *h, int ps, int pd)
{
    memset(h, 0, sizeof *h);
    h->state = sr_malloc((size_t)(ps + pd) * sizeof(float), "rnnt_beam hypothesis state");
    if (!h->state) return SR_ERR_NOMEM;
    h->pred = h->state + ps;
    return SR_OK;
}

/* dst = src (tokens, score, state); keeps dst's buffers. */
static sr_status hyp_copy(rb_hyp *dst, const rb_hyp *src, int ps, int pd)
{
    if (dst->cap < src->n) {
        int cap = SR_MAX(src->n, 2 * dst->cap + 16);
        int32_t *t = realloc(dst->tok, (size_t)cap * sizeof(int32_t));
        if (!t) return sr_error(SR_ERR_NOMEM, "rnnt_beam: hypothesis of %d tokens", cap);
        dst->tok = t;
        dst->cap = cap;
    }
    if (src->n) memcpy(dst->tok, src->tok, (size_t)src->n * sizeof(int32_t));
    dst->n = src->n;
    dst->score = src->score;
    memcpy(dst->state, src->state, (size_t)(ps + pd) * sizeof(float));
    return SR_OK;
}

static sr_status push_tok(rb_hyp *h, int32_t k)
{
    if (h->n == h->cap) {
        int cap = 2 * h->cap + 16;
        int32_t *t = realloc(h->tok, (size_t)cap * sizeof(int32_t));
        if (!t) return sr_error(SR_ERR_NOMEM, "rnnt_beam: hypothesis of %d tokens", cap);
        h->tok = t;
        h->cap = cap;
    }
    h->tok[h->n++] = k;
    return SR_OK;
}

static void rb_close(void *state)
{
    rb_state *s = state;
    if (!s) return;
    int nb = s->beam;
    for (int i = 0; i < nb; i++) {
        hyp_free(&s->A[i]);
        hyp_free(&s->cur[i]);
        hyp_free(&s->end[i]);
    }
    for (int i = 0; i < nb * nb; i++) hyp_free(&s->nxt[i]);
    free(s->A);
    free(s->logits);
    free(s->lp);
    free(s);
}

static sr_status rb_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    int beam = cfg && cfg->beam > 0 ? cfg->beam : 4;
    if (beam > RB_MAX_BEAM) return sr_error(SR_ERR_ARG, "stream.beam: %d exceeds rnnt_beam's maximum %d", beam, RB_MAX_BEAM);
    if (sc->tr_n_durations > 0)
        return sr_error(SR_ERR_UNSUPPORTED, "rnnt_beam: the model's joint has TDT durations; use rnnt_greedy");
    if (sc->pred_state <= 0 || sc->pred_dim <= 0 || sc->tr_max_symbols <= 0)
        return sr_error(SR_ERR_ARG, "rnnt_beam: scorer has no prediction network");
    rb_state *s = sr_calloc(1, sizeof *s, "rnnt_beam state");
    if (!s) return SR_ERR_NOMEM;
    s->beam = beam;
    s->ps = sc->pred_state;
    s->pd = sc->pred_dim;
    s->V = sc->vocab;
    size_t nh = (size_t)beam * 3 + (size_t)beam * beam;
    s->A = sr_calloc(nh, sizeof(rb_hyp), "rnnt_beam hypotheses");
    s->logits = sr_malloc((size_t)beam * s->V * sizeof(float), "rnnt_beam logits");
    s->lp = sr_malloc((size_t)s->V * sizeof(double), "rnnt_beam log-probabilities");
    if (!s->A || !s->logits || !s->lp) {
        free(s->A);
        s->A = NULL;
        free(s->logits);
        free(s->lp);
        free(s);
        return SR_ERR_NOMEM;
    }
    s->cur = s->A + beam;
    s->end = s->cur + beam;
    s->nxt = s->end + beam;
    sr_status st = SR_OK;
    for (size_t i = 0; i < nh && !st; i++) st = hyp_alloc(&s->A[i], s->ps, s->pd);
    if (st) {
        rb_close(s);
        return st;
    }
    *state = s;
    return SR_OK;
}

static int same_tokens(const rb_hyp *a, const rb_hyp *b)
{
    return a->n == b->n && (!a->n || !memcmp(a->tok, b->tok, (size_t)a->n * sizeof(int32_t)));
}

static double logaddexp(double a, double b)
{
    double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

/* Insert h (with score sc) into the set [*n] of at most cap best, merging equal token
 * sequences; the set's worst is replaced when full. */
static sr_status add_ended(rb_state *s, const rb_hyp *h, double score)
{
    for (int i = 0; i < s->nend; i++)
        if (same_tokens(&s->end[i], h)) {
            s->end[i].score = logaddexp(s->end[i].score, score);
            return SR_OK;
        }
    int slot = s->nend;
    if (s->nend == s->beam) {
        slot = 0;
        for (int i = 1; i < s->nend; i++)
            if (s->end[i].score < s->end[slot].score) slot = i;
        if (s->end[slot].score >= score) return SR_OK;
    } else {
        s->nend++;
    }
    sr_status st = hyp_copy(&s->end[slot], h, s->ps, s->pd);
    s->end[slot].score = score;
    return st;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = ((const rb_hyp *)a)->score, y = ((const rb_hyp *)b)->score;
    return (x < y) - (x > y);
}

enum { RB_START, RB_START_WAIT, RB_FRAME, RB_SYM, RB_JOINTS, RB_JOINT_WAIT, RB_PRED_WAIT };

static void rb_begin(void *state, const sr_scorer *sc, int final)
{
    rb_state *s = state;
    (void)final;
    s->T = sc->tr_frames(sc->ctx);
    s->phase = s->started ? RB_FRAME : RB_START;
}

/* After the joint of cur[i] (its logits): its blank extension to `ended`, its nb best
 * non-blank extensions to the candidates. */
static sr_status rb_after_joint(rb_state *s, const sr_scorer *sc, const rb_hyp *c, const float *logits)
{
    int nb = s->beam, V = s->V;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    for (int v = 0; v < V; v++) sum += exp(logits[v] - mx);
    double lse = mx + log(sum);
    for (int v = 0; v < V; v++) s->lp[v] = logits[v] - lse;
    sr_status st = add_ended(s, c, c->score + s->lp[sc->blank]);
    if (st) return st;
    for (int r = 0; r < nb; r++) {
        int best = -1;
        for (int v = 0; v < V; v++)
            if (v != sc->blank && s->lp[v] > -INFINITY && (best < 0 || s->lp[v] > s->lp[best]))
                best = v;
        if (best < 0) break;
        rb_hyp *nx = &s->nxt[s->ncand++];
        if ((st = hyp_copy(nx, c, s->ps, s->pd)) || (st = push_tok(nx, best))) return st;
        nx->score = c->score + s->lp[best];
        s->lp[best] = -INFINITY;
    }
    return SR_OK;
}

/* The best beam as the hypothesis; stable = the common prefix of every beam. */
static sr_status rb_publish(const rb_state *s, int final, sr_hyp *h)
{
    const rb_hyp *best = &s->A[0];
    int common = best->n;
    for (int i = 1; i < s->nA; i++) {
        int c = 0;
        while (c < common && c < s->A[i].n && s->A[i].tok[c] == best->tok[c]) c++;
        common = c;
    }
    sr_hyp_truncate(h, 0);
    for (int i = 0; i < best->n; i++) {
        sr_status st = sr_hyp_push(h, best->tok[i]);
        if (st) return st;
    }
    h->n_stable = final ? h->n : common;
    return SR_OK;
}

static int rb_advance(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    rb_state *s = state;
    *st = res;
    if (res) return 0;
    for (;;) {
        switch (s->phase) {
        case RB_START: {
            rb_hyp *a = &s->A[0];
            a->n = 0;
            a->score = 0;
            sr_call_tr_predict(call, NULL, -1, a->state, a->pred);
            s->phase = RB_START_WAIT;
            return 1;
        }
        case RB_START_WAIT:
            s->nA = 1;
            s->started = 1;
            s->phase = RB_FRAME;
            break;
        case RB_FRAME: /* frame t: cur = A, ended = {} */
            if (s->t >= s->T) {
                *st = rb_publish(s, final, h);
                return 0;
            }
            s->nend = 0;
            s->ncur = s->nA;
            for (int i = 0; i < s->nA; i++)
                if ((*st = hyp_copy(&s->cur[i], &s->A[i], s->ps, s->pd))) return 0;
            s->sym = 0;
            s->phase = RB_SYM;
            break;
        case RB_SYM:
            if (s->sym >= sc->tr_max_symbols || !s->ncur) { /* the frame ends: A = best ended */
                qsort(s->end, (size_t)s->nend, sizeof(rb_hyp), cmp_desc);
                s->nA = s->nend;
                for (int i = 0; i < s->nA; i++)
                    if ((*st = hyp_copy(&s->A[i], &s->end[i], s->ps, s->pd))) return 0;
                s->t++;
                s->phase = RB_FRAME;
                break;
            }
            s->ncand = 0;
            s->phase = RB_JOINTS;
            break;
        case RB_JOINTS: /* every hypothesis's joint in one round */
            for (int i = 0; i < s->ncur; i++)
                sr_call_tr_joint(&call[i], (int)s->t, s->cur[i].pred, s->logits + (size_t)i * s->V);
            s->phase = RB_JOINT_WAIT;
            return s->ncur;
        case RB_JOINT_WAIT:
            for (int i = 0; i < s->ncur; i++) /* in order: as one joint after the other */
                if ((*st = rb_after_joint(s, sc, &s->cur[i], s->logits + (size_t)i * s->V))) return 0;
            /* keep the nb best candidates, then advance their prediction network */
            qsort(s->nxt, (size_t)s->ncand, sizeof(rb_hyp), cmp_desc);
            s->ncur = SR_MIN(s->ncand, s->beam);
            for (int i = 0; i < s->ncur; i++)
                if ((*st = hyp_copy(&s->cur[i], &s->nxt[i], s->ps, s->pd))) return 0;
            if (!s->ncur) {
                s->sym++;
                s->phase = RB_SYM;
                break;
            }
            for (int i = 0; i < s->ncur; i++) { /* every candidate's prediction step in one round */
                rb_hyp *c = &s->cur[i];
                sr_call_tr_predict(&call[i], c->state, c->tok[c->n - 1], c->state, c->pred);
            }
            s->phase = RB_PRED_WAIT;
            return s->ncur;
        default: /* RB_PRED_WAIT */
            s->sym++;
            s->phase = RB_SYM;
            break;
        }
    }
}

/* a round's joints or prediction steps: one per hypothesis of cur */
static int rb_max_calls(const void *state) { return ((const rb_state *)state)->beam; }

static const sr_stepper rb_stepper = {.begin = rb_begin, .advance = rb_advance, .max_calls = rb_max_calls};

SR_STEPPER_UPDATES(rb, rb_stepper, "rnnt_beam")

static void rb_reset(void *state)
{
    rb_state *s = state;
    s->t = 0;
    s->started = 0;
    s->nA = s->ncur = s->nend = 0;
}

static size_t rb_bytes(const void *state)
{
    const rb_state *s = state;
    size_t nh = (size_t)s->beam * 3 + (size_t)s->beam * s->beam;
    size_t b = sizeof *s + nh * (sizeof(rb_hyp) + (size_t)(s->ps + s->pd) * sizeof(float));
    for (size_t i = 0; i < nh; i++) b += (size_t)s->A[i].cap * sizeof(int32_t);
    return b + (size_t)s->V * ((size_t)s->beam * sizeof(float) + sizeof(double));
}

const sr_decoder_ops sr_dec_rnnt_beam = {
    .name = "rnnt_beam",
    .description = "RNN-T beam search (beam b, max symbols per frame; carried across chunks)",
    .kind = SR_SCORER_TRANSDUCER,
    .open = rb_open,
    .update = rb_update,
    .update_batch = rb_update_batch,
    .reset = rb_reset,
    .close = rb_close,
    .state_bytes = rb_bytes,
};
