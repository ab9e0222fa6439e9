/*
 * stable_greedy.c — WhisperRT streaming greedy decoding (paper Algorithm 1, Definition 1).
 *
 * After every chunk the hypothesis is re-scored under the audio seen so far with one
 * aed_logprobs call on slot 0 covering the re-check window (the last n = stream.stability_n
 * tokens) and the next position. Walking the window in order, token y_i = v stays if
 * log p(v | y_<i, audio) did not fall below the value recorded when it was emitted or last
 * checked (then the record is updated), or if v is still the argmax; the first token that
 * fails is cut with everything after it. Decoding then continues greedily from the cut (or
 * the end) until the most probable next token is EOT, which is not stored and pauses decoding
 * until the next chunk. The final update does the same and declares everything stable.
 *
 * Stability: tokens before the window can no longer change, so n_stable = n - n_window. The
 * window never reaches back below n_stable: after a cut, tokens that had left the window do not
 * re-enter it (the paper's window is relative to the current end; this keeps the n_stable
 * promise). Guards: at most SR_AED_CAP_BASE + SR_AED_CAP_PER_S tokens per second of the chunk
 * per update, and the repetition-loop rule (aed_common.h; stream.repetition_guard), which
 * cuts a loop to one copy and pauses like EOT.
 *
 * No-speech gate: after decoding, when the rule (aed_common.h) calls the hypothesis's last
 * window silence (its no-speech probability under the audio so far; its tokens' recorded
 * log-probs plus EOT's when decoding paused on EOT), the hypothesis is cut back to that
 * window's start, never below n_stable: nothing is emitted while the audio looks silent, and
 * the next update decodes that window afresh.
 */
#include "aed_common.h"

#include <math.h>

typedef struct {
    sr_stream_config cfg; /* chunk sizes for the cap (strings not used) */
    int window;           /* stability_n, clamped to aed_max_len */
    int max_len, vocab;
    int32_t *tok;         /* [max_len] hypothesis */
    float *lp;            /* [max_len] recorded log-prob per token */
    int n, stable;
    long k;               /* updates so far */
    long seen_ms;         /* audio seen at the previous update */
    sr_aed_top *tops;     /* [window + 1] the re-check rows' summaries */
    float *rows;          /* [(window + 1), vocab], only for a scorer without aed_top */
} sgr_state;

static sr_status sgr_open(const sr_stream_config *cfg, const sr_scorer *sc, void **state)
{
    sr_status st = sr_aed_check_scorer(sc, "stable_greedy", 1);
    if (st) return st;
    if (cfg->beam > 1)
        return sr_error(SR_ERR_ARG, "stream.beam: stable_greedy is greedy, beam %d not supported "
                        "(use stable_beam)", cfg->beam);
    if (cfg->stability_n < 0)
        return sr_error(SR_ERR_ARG, "stream.stability_n: must be >= 0, got %d", cfg->stability_n);
    sgr_state *s = sr_calloc(1, sizeof *s, "stable_greedy state");
    if (!s) return SR_ERR_NOMEM;
    s->cfg = *cfg;
    s->max_len = sc->aed_max_len;
    s->vocab = sc->vocab;
    s->window = SR_MIN(cfg->stability_n, s->max_len);
    size_t L = (size_t)s->max_len, W = (size_t)s->window + 1;
    if (!(s->tok = sr_malloc(L * sizeof *s->tok, "stable_greedy tokens")) ||
        !(s->lp = sr_malloc(L * sizeof *s->lp, "stable_greedy log-probs")) ||
        !(s->tops = sr_malloc(W * sizeof *s->tops, "stable_greedy re-check summaries")) ||
        (!sc->aed_top &&
         !(s->rows = sr_malloc(W * (size_t)s->vocab * sizeof *s->rows, "stable_greedy re-check rows")))) {
        free(s->tok);
        free(s->lp);
        free(s->tops);
        free(s);
        return SR_ERR_NOMEM;
    }
    *state = s;
    return SR_OK;
}

/* The update in sr_aed_greedy_batch's phases (aed_common.h): the re-check is the first call. */
static void sg_begin(void *state, const sr_scorer *sc, sr_aed_gjob *j)
{
    sgr_state *s = state;
    (void)sc;
    j->tok = s->tok;
    j->lp = s->lp;
    j->n = &s->n;
    j->from = SR_MAX(s->stable, s->n - s->window);
    j->tops = s->tops;
    j->rows = s->rows;
}

/* The re-check: cut at the first token that failed; the greedy continuation goes on from the
 * cut under the update's token cap. */
static void sg_after_check(void *state, const sr_scorer *sc, sr_aed_gjob *j)
{
    sgr_state *s = state;
    int cut = s->n;
    for (int i = j->from; i < s->n; i++) {
        const sr_aed_top *t = &s->tops[i - j->from];
        /* kept if its log-prob did not fall, or if it is still an argmax (nothing above it) */
        if (t->tok_lp >= s->lp[i] || !(t->best_lp > t->tok_lp)) {
            s->lp[i] = t->tok_lp; /* kept: its newest probability is the next reference */
        } else {
            cut = i;
            break;
        }
    }
    s->n = cut;
    j->next = &s->tops[cut - j->from];
    j->cap = sr_aed_cap_tokens(sr_aed_update_ms(sc, &s->cfg, s->k, &s->seen_ms));
    j->min_keep = s->stable;
    j->guard = s->cfg.repetition_guard;
}

static sr_status sg_finish(void *state, const sr_scorer *sc, sr_aed_gjob *j, int final, sr_hyp *h)
{
    sgr_state *s = state;
    int silent;
    sr_status st = sr_aed_gjob_gate(sc, j, s->stable, &s->n, &silent);
    if (st) return sr_error_prefix(st, "stable_greedy");
    s->k++;
    s->stable = final ? s->n : SR_MAX(s->stable, s->n - s->window);
    return sr_aed_write_hyp(h, s->tok, s->n, s->stable);
}

static const sr_aed_gdec sg_dec = {
    .name = "stable_greedy", .begin = sg_begin, .after_first = sg_after_check, .finish = sg_finish,
};

static sr_status sgr_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    sr_status st;
    sr_aed_greedy_batch(&sg_dec, &state, &sc, &final, &h, 1, &st);
    return st;
}

static void sgr_update_batch(void *const *states, const sr_scorer *const *scs, const int *final,
                             sr_hyp *const *hs, int count, sr_status *st)
{
    sr_aed_greedy_batch(&sg_dec, states, scs, final, hs, count, st);
}

static void sgr_reset(void *state)
{
    sgr_state *s = state;
    s->n = s->stable = 0;
    s->k = s->seen_ms = 0;
}

static void sgr_close(void *state)
{
    sgr_state *s = state;
    if (!s) return;
    free(s->tok);
    free(s->lp);
    free(s->tops);
    free(s->rows);
    free(s);
}

static size_t sgr_bytes(const void *state)
{
    const sgr_state *s = state;
    return sizeof *s + (size_t)s->max_len * (sizeof(int32_t) + sizeof(float)) +
           ((size_t)s->window + 1) * (sizeof(sr_aed_top) + (s->rows ? (size_t)s->vocab * sizeof(float) : 0));
}

const sr_decoder_ops sr_dec_stable_greedy = {
    .name = "stable_greedy",
    .description = "WhisperRT Algorithm 1: greedy, last n tokens re-checked per chunk, EOT pauses",
    .kind = SR_SCORER_AED,
    .open = sgr_open,
    .update = sgr_update,
    .update_batch = sgr_update_batch,
    .reset = sgr_reset,
    .close = sgr_close,
    .state_bytes = sgr_bytes,
};
