/*
 * stable_beam.c — WhisperRT streaming beam search (paper Algorithm 2, Definition 3), beam
 * size b = stream.beam, re-check window n = stream.stability_n.
 *
 * After every chunk each beam's last n tokens are re-checked under the new audio (one
 * aed_logprobs call per beam on its slot, all beams' in one round): a token stays only if it is still among the b most
 * probable tokens at its position AND its log-prob did not fall below the recorded one; the
 * first failure cuts the beam there, so beams can differ in length. Then beam search resumes:
 * every beam offers its b + 1 best next tokens, the b best candidates by summed log-prob form
 * the new set, and as soon as that set holds an EOT candidate decoding pauses until the next
 * chunk (that beam stays as its prefix without EOT; ranked with EOT's log-prob included). The
 * hypothesis shown is the best-ranked beam.
 *
 * Committed prefix (n_stable): the longest prefix shared by every beam that also lies outside
 * every beam's re-check window, i.e. min over beams of min(LCP(beams), n_i - n); it only grows
 * and re-checks never reach below it. Every later beam descends from a current beam, so no
 * future beam, and so no future hypothesis, can differ in it.
 *
 * Final update: re-check, then finish with the offline rules of aed_beam (EOT candidates
 * finished, b finished end it, ranking by summed log-prob / length); every token is stable.
 * Guards: at most SR_AED_CAP_BASE + SR_AED_CAP_PER_S steps per second of chunk audio per update;
 * a beam that loops is cut to one copy of the loop (never below the committed prefix) and
 * pauses like EOT.
 *
 * No-speech gate: after every update, when the rule (aed_common.h) calls the last window of the
 * best beam silence (its no-speech probability; the beam's recorded log-probs plus EOT's when
 * it paused on EOT), only that beam is kept, cut back to the window's start and never below the
 * committed prefix; the final answer is gated the same way.
 */
#include "aed_common.h"

#include <string.h>

typedef struct {
    sr_stream_config cfg;
    sr_aed_beams e;
    int32_t *tok; /* [max_len] final answer being gated */
    float *lp;    /* [max_len] */
    int committed;
    long k;
    long seen_ms; /* audio seen at the previous update */
    /* the update in progress (a stepper, aed_common.h) */
    int phase, cuts0, ns_start;
    float ns_p;
} sb_state;

enum { SB_CHECK, SB_SEARCH, SB_GATE };

static sr_status sb_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    if (cfg->beam < 1)
        return sr_error(SR_ERR_ARG, "stream.beam: stable_beam needs a beam size >= 1, got %d", cfg->beam);
    if (cfg->stability_n < 0)
        return sr_error(SR_ERR_ARG, "stream.stability_n: must be >= 0, got %d", cfg->stability_n);
    sr_status st = sr_aed_check_scorer(sc, "stable_beam", cfg->beam);
    if (st) return st;
    sb_state *s = sr_calloc(1, sizeof *s, "stable_beam state");
    if (!s) return SR_ERR_NOMEM;
    s->cfg = *cfg;
    if ((st = sr_aed_beams_init(&s->e, sc, cfg->beam, cfg->stability_n, cfg->repetition_guard))) {
        free(s);
        return st;
    }
    size_t L = (size_t)sc->aed_max_len;
    if (!(s->tok = sr_malloc(L * sizeof *s->tok, "stable_beam answer tokens")) ||
        !(s->lp = sr_malloc(L * sizeof *s->lp, "stable_beam answer log-probs"))) {
        free(s->tok);
        sr_aed_beams_free(&s->e);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

/* min over beams of the prefix shared with beam 0 and of n_i - window */
static int committed_len(const sr_aed_beams *e)
{
    const sr_aed_beam *b0 = &e->beam[0];
    int c = b0->n - e->window;
    for (int i = 1; i < e->n_beam; i++) {
        const sr_aed_beam *bi = &e->beam[i];
        int l = 0;
        while (l < b0->n && l < bi->n && b0->tok[l] == bi->tok[l]) l++;
        c = SR_MIN(c, SR_MIN(l, bi->n - e->window));
    }
    return c;
}

static void sb_begin(void *state, const sr_scorer *sc, int final)
{
    sb_state *s = state;
    (void)sc;
    (void)final;
    s->cuts0 = s->e.loop_cuts;
    s->phase = SB_CHECK;
    sr_aed_beams_begin(&s->e, SR_AED_BEAMS_CHECK, 0, s->committed);
}

/* The gated hypothesis: the final answer (s->tok) or the best beam. */
static const int32_t *sb_gate_tok(const sb_state *s, int final, const float **lp, int *n,
                                  double *end_lp)
{
    if (final) {
        *lp = s->lp;
        *n = s->e.best->n;
        *end_lp = s->e.best->end_lp;
        return s->tok;
    }
    const sr_aed_beam *b0 = &s->e.beam[0];
    *lp = b0->lp;
    *n = b0->n;
    *end_lp = b0->end_lp;
    return b0->tok;
}

/* The update's end once the gate decided (keep, silent). */
static sr_status sb_end(sb_state *s, int final, sr_hyp *h, int keep, int silent)
{
    if (final) {
        s->committed = keep;
        return sr_aed_write_hyp(h, s->tok, keep, keep);
    }
    if (silent) sr_aed_beams_keep_best(&s->e, keep);
    s->committed = SR_MAX(s->committed, committed_len(&s->e));
    return sr_aed_write_hyp(h, s->e.beam[0].tok, s->e.beam[0].n, s->committed);
}

static int sb_advance(void *state, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    sb_state *s = state;
    *st = SR_OK;
    if (res) {
        *st = s->phase == SB_GATE
                  ? sr_error_prefix(res, "stable_beam: aed_no_speech at position %d",
                                    call->r.ns.n)
                  : sr_error_prefix(sr_aed_beams_call_error(&s->e, res), "stable_beam");
        return 0;
    }
    const int32_t *tok;
    const float *lp;
    int n, cap, n_calls;
    double end_lp;
    switch (s->phase) {
    case SB_CHECK:
        if ((n_calls = sr_aed_beams_next(&s->e, call))) return n_calls;
        cap = sr_aed_cap_tokens(sr_aed_update_ms(sc, &s->cfg, s->k, &s->seen_ms));
        s->k++;
        s->phase = SB_SEARCH;
        sr_aed_beams_begin(&s->e, final ? SR_AED_BEAMS_FINISH : SR_AED_BEAMS_STREAM, cap,
                           s->committed);
        /* fall through */
    case SB_SEARCH:
        if ((n_calls = sr_aed_beams_next(&s->e, call))) return n_calls;
        h->loop_cuts += s->e.loop_cuts - s->cuts0;
        if (final) {
            if (!s->e.best) {
                *st = sr_aed_write_hyp(h, NULL, 0, 0);
                return 0;
            }
            memcpy(s->tok, s->e.best->tok, (size_t)s->e.best->n * sizeof *s->tok);
            memcpy(s->lp, s->e.best->lp, (size_t)s->e.best->n * sizeof *s->lp);
        }
        tok = sb_gate_tok(s, final, &lp, &n, &end_lp);
        if (!sc->aed_no_speech) {
            *st = sb_end(s, final, h, n, 0);
            return 0;
        }
        s->phase = SB_GATE;
        s->ns_start = 0;
        s->ns_p = 0;
        sr_call_aed_no_speech(call, tok, n, &s->ns_start, &s->ns_p);
        return 1;
    default: { /* SB_GATE: the no-speech query answered */
        sb_gate_tok(s, final, &lp, &n, &end_lp);
        int keep, silent;
        *st = sr_aed_gate_decide(lp, n, end_lp, s->committed, s->ns_start, s->ns_p, &keep,
                                 &silent);
        if (*st) {
            *st = sr_error_prefix(*st, "stable_beam");
            return 0;
        }
        *st = sb_end(s, final, h, keep, silent);
        return 0;
    }
    }
}

/* a round's calls: one per beam */
static int sb_max_calls(const void *state) { return ((const sb_state *)state)->e.b; }

static const sr_stepper sb_stepper = {.begin = sb_begin, .advance = sb_advance, .max_calls = sb_max_calls};

SR_STEPPER_UPDATES(sb, sb_stepper, "stable_beam")

static void sb_reset(void *state)
{
    sb_state *s = state;
    sr_aed_beams_reset(&s->e);
    s->committed = 0;
    s->k = s->seen_ms = 0;
}

static void sb_close(void *state)
{
    sb_state *s = state;
    if (!s) return;
    sr_aed_beams_free(&s->e);
    free(s->tok);
    free(s->lp);
    free(s);
}

static size_t sb_bytes(const void *state)
{
    const sb_state *s = state;
    return sizeof *s + sr_aed_beams_bytes(&s->e) +
           (size_t)s->e.max_len * (sizeof(int32_t) + sizeof(float));
}

const sr_decoder_ops sr_dec_stable_beam = {
    .name = "stable_beam",
    .description = "WhisperRT Algorithm 2: beam search, top-b + non-falling re-check per chunk, EOT pauses",
    .kind = SR_SCORER_AED,
    .open = sb_open,
    .update = sb_update,
    .update_batch = sb_update_batch,
    .reset = sb_reset,
    .close = sb_close,
    .state_bytes = sb_bytes,
};
