/*
 * stable_beam.c — WhisperRT streaming beam search (paper Algorithm 2, Definition 3), beam
 * size b = stream.beam, re-check window n = stream.stability_n.
 *
 * After every chunk each beam's last n tokens are re-checked under the new audio (one
 * aed_logprobs call per beam on its slot): a token stays only if it is still among the b most
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
 */
#include "aed_common.h"

typedef struct {
    sr_stream_config cfg;
    sr_aed_beams e;
    int committed;
    long k;
    long seen_ms; /* audio seen at the previous update */
} sb_state;

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
    if ((st = sr_aed_beams_init(&s->e, sc, cfg->beam, cfg->stability_n))) {
        free(s);
        return st;
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

static sr_status sb_update(void *state, const sr_scorer *sc, int final, sr_hyp *h)
{
    sb_state *s = state;
    sr_status st = sr_aed_beams_check(&s->e, sc, s->committed);
    if (st) return sr_error_prefix(st, "stable_beam");
    int cap = sr_aed_cap_tokens(sr_aed_update_ms(sc, &s->cfg, s->k, &s->seen_ms));
    s->k++;
    if (final) {
        const sr_aed_done *best;
        if ((st = sr_aed_beams_finish(&s->e, sc, cap, s->committed, &best)))
            return sr_error_prefix(st, "stable_beam");
        if (!best) return sr_aed_write_hyp(h, NULL, 0, 0);
        s->committed = best->n;
        return sr_aed_write_hyp(h, best->tok, best->n, best->n);
    }
    if ((st = sr_aed_beams_stream(&s->e, sc, cap, s->committed))) return sr_error_prefix(st, "stable_beam");
    s->committed = SR_MAX(s->committed, committed_len(&s->e));
    return sr_aed_write_hyp(h, s->e.beam[0].tok, s->e.beam[0].n, s->committed);
}

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
    free(s);
}

static size_t sb_bytes(const void *state)
{
    const sb_state *s = state;
    return sizeof *s + sr_aed_beams_bytes(&s->e);
}

const sr_decoder_ops sr_dec_stable_beam = {
    .name = "stable_beam",
    .description = "WhisperRT Algorithm 2: beam search, top-b + non-falling re-check per chunk, EOT pauses",
    .kind = SR_SCORER_AED,
    .open = sb_open,
    .update = sb_update,
    .reset = sb_reset,
    .close = sb_close,
    .state_bytes = sb_bytes,
};
