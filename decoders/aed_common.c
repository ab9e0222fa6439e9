/*
 * aed_common.c — shared machinery of the AED decoders.
 *
 * Greedy continuation: take the argmax of the next-token log-probabilities, append it, ask the
 * scorer for the next position only (same slot, extended prefix, so the backend's decoder cache
 * computes one new position), until EOT (never stored), the per-update cap, the scorer's
 * aed_max_len, or a repetition loop.
 *
 * Beam engine: beams are text-token prefixes with per-token log-probs; score = their sum.
 * A step gives every beam's b + 1 best next tokens as candidates scored by the summed
 * log-prob and keeps the b best, as openai-whisper's BeamSearchDecoder does. Two ways to use
 * the candidates: offline (openai-whisper: EOT candidates ranked above the b-th live one are
 * finished; b finished end the search; the winner maximizes score / length) and streaming
 * (WhisperRT Algorithm 2: an EOT candidate among the b best pauses until new audio, its beam
 * staying as its prefix). On new audio every beam's last tokens are re-checked: a token stays
 * only while it is in the top b at its position and its log-prob has not fallen.
 *
 * No-speech gate: the scorer's no-speech probability of a window plus the average log-prob of
 * the window's text (EOT term included, as openai-whisper's avg_logprob = sum / (tokens + 1))
 * decide whether that text is silence; offline decoders drop every silent window's text,
 * streaming decoders cut the last window back to its start (never into the stable prefix).
 *
 * Guards: the loop rule looks for a unit of p tokens repeated at the end of a hypothesis
 * (r >= 4 copies covering >= 12 tokens) and keeps one copy; the cap bounds tokens per update in
 * proportion to the chunk's audio. Both are documented in docs/decoders.md.
 */
#include "aed_common.h"

#include <math.h>
#include <string.h>

sr_status sr_aed_check_scorer(const sr_scorer *sc, const char *who, int slots)
{
    if (!sc) return sr_error(SR_ERR_ARG, "%s: scorer is NULL", who);
    if (sc->kind != SR_SCORER_AED)
        return sr_error(SR_ERR_ARG, "%s: scorer kind %d is not AED", who, (int)sc->kind);
    if (!sc->aed_logprobs) return sr_error(SR_ERR_ARG, "%s: scorer has no aed_logprobs", who);
    if (sc->aed_top && !sc->aed_logprobs_batch)
        return sr_error(SR_ERR_ARG, "%s: scorer has aed_top but no aed_logprobs_batch", who);
    if (sc->vocab < 1) return sr_error(SR_ERR_ARG, "%s: scorer vocab %d < 1", who, sc->vocab);
    if (sc->eot < 0 || sc->eot >= sc->vocab)
        return sr_error(SR_ERR_ARG, "%s: scorer eot %d outside the vocabulary [0, %d)", who,
                        sc->eot, sc->vocab);
    if (sc->aed_max_len < 1)
        return sr_error(SR_ERR_ARG, "%s: scorer aed_max_len %d < 1", who, sc->aed_max_len);
    if (sc->aed_max_slots < slots)
        return sr_error(SR_ERR_ARG, "stream.beam: %s needs %d decoder slots, the scorer has "
                        "aed_max_slots %d", who, slots, sc->aed_max_slots);
    return SR_OK;
}

int sr_aed_chunk_ms(const sr_stream_config *cfg, long k)
{
    int chunk = cfg->chunk_ms > 0 ? cfg->chunk_ms : SR_AED_CAP_DEFAULT_MS;
    if (k == 0 && cfg->first_chunk_ms > 0) return cfg->first_chunk_ms;
    return chunk;
}

long sr_aed_update_ms(const sr_scorer *sc, const sr_stream_config *cfg, long k, long *seen_ms)
{
    if (!sc->aed_audio_ms) return sr_aed_chunk_ms(cfg, k);
    long now = (long)sc->aed_audio_ms(sc->ctx), d = now - *seen_ms;
    *seen_ms = now;
    return d > 0 ? d : 0;
}

int sr_aed_cap_tokens(long ms)
{
    if (ms < 0) ms = 0;
    long cap = SR_AED_CAP_BASE + (ms * SR_AED_CAP_PER_S + 999) / 1000;
    return cap > (1L << 30) ? (1 << 30) : (int)cap;
}

int sr_aed_loop_keep(const int32_t *tok, int n, int min_keep)
{
    for (int p = 1; p * SR_AED_LOOP_MIN_REPEATS <= n; p++) {
        const int32_t *unit = tok + n - p;
        int r = 1;
        while ((r + 1) * p <= n && !memcmp(tok + n - (r + 1) * p, unit, (size_t)p * sizeof *tok))
            r++;
        if (r >= SR_AED_LOOP_MIN_REPEATS && r * p >= SR_AED_LOOP_MIN_TOKENS) {
            int keep = n - (r - 1) * p;
            int lo = SR_MIN(min_keep, n);
            return keep < lo ? lo : keep;
        }
    }
    return -1;
}

int sr_aed_silent(double p, double avg_logprob)
{
    return p > SR_AED_NO_SPEECH_THRESHOLD &&
           (!(avg_logprob > SR_AED_LOGPROB_THRESHOLD) || p > SR_AED_NO_SPEECH_ALONE);
}

/* Average log-prob of lp[s, e) plus the end term (NAN: none); 0 for nothing at all. */
static double window_avg(const float *lp, int s, int e, double end_lp)
{
    double sum = 0;
    int cnt = e - s;
    for (int i = s; i < e; i++) sum += lp[i];
    if (!isnan(end_lp)) {
        sum += end_lp;
        cnt++;
    }
    return cnt ? sum / cnt : 0.0;
}

sr_status sr_aed_gate_decide(const float *lp, int n, double end_lp, int min_keep, int start,
                             float p, int *keep, int *silent)
{
    *keep = n;
    *silent = 0;
    if (start < 0 || start > n)
        return sr_error(SR_ERR_ARG, "aed_no_speech: window start %d outside the prefix [0, %d]",
                        start, n);
    if (sr_aed_silent(p, window_avg(lp, start, n, end_lp))) {
        *silent = 1;
        *keep = SR_MIN(n, SR_MAX(min_keep, start));
    }
    return SR_OK;
}

void sr_aed_gall_begin(sr_aed_gall *g, int n, double end_lp)
{
    g->end = n;
    g->end_lp = end_lp;
    g->asked = 0;
}

int sr_aed_gall_step(sr_aed_gall *g, const sr_scorer *sc, int32_t *tok, float *lp, int *n,
                     sr_status res, sr_call *call, sr_status *st)
{
    *st = SR_OK;
    if (!sc->aed_no_speech) return 0;
    if (g->asked) {
        g->asked = 0;
        if (res) {
            *st = sr_error_prefix(res, "aed_no_speech at position %d", g->end);
            return 0;
        }
        int start = g->start, end = g->end;
        if (start < 0 || start > end) {
            *st = sr_error(SR_ERR_ARG, "aed_no_speech: window start %d outside the prefix "
                           "[0, %d]", start, end);
            return 0;
        }
        if (sr_aed_silent(g->p, window_avg(lp, start, end, g->end_lp))) {
            memmove(tok + start, tok + end, (size_t)(*n - end) * sizeof *tok);
            memmove(lp + start, lp + end, (size_t)(*n - end) * sizeof *lp);
            *n -= end - start;
        }
        if (start == 0) return 0;
        g->end = start - 1;       /* the break token that closes the previous window */
        g->end_lp = lp[g->end];
    }
    g->start = 0;
    g->p = 0;
    sr_call_aed_no_speech(call, tok, g->end, &g->start, &g->p);
    g->asked = 1;
    return 1;
}

int sr_aed_greedy_step(const sr_scorer *sc, int32_t *tok, float *lp, int *n, const sr_aed_top *next,
                       int max_new, int *added, int min_keep, int guard, sr_aed_stop *why)
{
    int best = next->best;
    if (best == sc->eot) { *why = SR_AED_EOT; return 0; }
    if (*n >= sc->aed_max_len) { *why = SR_AED_MAXLEN; return 0; }
    if (*added >= max_new) { *why = SR_AED_CAP; return 0; }
    tok[*n] = best;
    if (lp) lp[*n] = next->best_lp;
    (*n)++;
    (*added)++;
    int keep = guard ? sr_aed_loop_keep(tok, *n, min_keep) : -1;
    if (keep >= 0) {
        *n = keep;
        *why = SR_AED_LOOP;
        return 0;
    }
    /* no lookahead past the limits: the next update (new audio) recomputes anyway */
    if (*n >= sc->aed_max_len) { *why = SR_AED_MAXLEN; return 0; }
    if (*added >= max_new) { *why = SR_AED_CAP; return 0; }
    return 1;
}

/* ---- greedy updates as a stepper ---- */

enum { GJ_START = 0, GJ_FIRST, GJ_NEXT, GJ_GATE };

typedef struct {
    const sr_aed_gdec *d;
    void *state;
    sr_aed_gjob job;
} gj_stream;

static void gj_begin(void *w, const sr_scorer *sc, int final)
{
    gj_stream *g = w;
    (void)final;
    g->job = (sr_aed_gjob){.phase = GJ_START};
    g->d->begin(g->state, sc, &g->job);
}

static int gj_advance(void *w, const sr_scorer *sc, int final, sr_hyp *h, sr_status res,
                      sr_call *call, sr_status *st)
{
    gj_stream *g = w;
    sr_aed_gjob *j = &g->job;
    const char *name = g->d->name;
    *st = SR_OK;
    switch (j->phase) {
    case GJ_START:
        j->phase = GJ_FIRST;
        sr_call_aed_top(call, 0, j->tok, *j->n, j->from, j->rows, j->tops);
        return 1;
    case GJ_FIRST:
        if (res) {
            *st = sr_error_prefix(res, "%s: aed_logprobs from %d", name, j->from);
            return 0;
        }
        g->d->after_first(g->state, sc, j);
        j->added = 0;
        break;
    case GJ_NEXT:
        if (res) {
            *st = sr_error_prefix(res, "%s: aed_logprobs at position %d", name, *j->n);
            return 0;
        }
        break;
    default: /* GJ_GATE: the no-speech query answered */
        if (res) {
            *st = sr_error_prefix(res, "%s: aed_no_speech at position %d", name, *j->n);
            return 0;
        }
        j->gated = 1;
        *st = g->d->finish(g->state, sc, j, final, h);
        return 0;
    }
    if (sr_aed_greedy_step(sc, j->tok, j->lp, j->n, j->next, j->cap, &j->added, j->min_keep,
                           j->guard, &j->why)) {
        j->phase = GJ_NEXT;
        sr_call_aed_top(call, 0, j->tok, *j->n, *j->n, j->rows, j->next);
        return 1;
    }
    h->loop_cuts += j->why == SR_AED_LOOP;
    if (!sc->aed_no_speech) {
        *st = g->d->finish(g->state, sc, j, final, h);
        return 0;
    }
    j->phase = GJ_GATE;
    sr_call_aed_no_speech(call, j->tok, *j->n, &j->ns_start, &j->ns_p);
    return 1;
}

static const sr_stepper gj_stepper = {.begin = gj_begin, .advance = gj_advance};

sr_status sr_aed_gjob_gate(const sr_scorer *sc, const sr_aed_gjob *j, int min_keep, int *keep,
                           int *silent)
{
    *keep = *j->n;
    *silent = 0;
    if (!j->gated) return SR_OK;
    return sr_aed_gate_decide(j->lp, *j->n, j->why == SR_AED_EOT ? j->next->eot_lp : NAN,
                              min_keep, j->ns_start, j->ns_p, keep, silent);
}

void sr_aed_greedy_batch(const sr_aed_gdec *d, void *const *states, const sr_scorer *const *scs,
                         const int *final, sr_hyp *const *hs, int count, sr_status *st)
{
    gj_stream one; /* a solo update: nothing to allocate */
    void *wone;
    gj_stream *g = count == 1 ? &one : malloc((size_t)count * sizeof *g);
    void **w = count == 1 ? &wone : malloc((size_t)count * sizeof *w);
    if (g && w) {
        for (int i = 0; i < count; i++) {
            g[i] = (gj_stream){.d = d, .state = states[i]};
            w[i] = &g[i];
        }
        sr_lockstep(&gj_stepper, d->name, w, scs, final, hs, count, st);
    } else {
        for (int i = 0; i < count; i++)
            st[i] = sr_error(SR_ERR_NOMEM, "%s: batch of %d streams", d->name, count);
    }
    if (g != &one) free(g);
    if (w != &wone) free(w);
}

sr_status sr_aed_write_hyp(sr_hyp *h, const int32_t *tok, int n, int n_stable)
{
    sr_hyp_truncate(h, 0);
    for (int i = 0; i < n; i++) {
        sr_status st = sr_hyp_push(h, tok[i]);
        if (st) return st;
    }
    h->n_stable = SR_MIN(n_stable, n);
    return SR_OK;
}

/* ---- beam engine ------------------------------------------------------------------------------ */

static double sum_lp(const float *lp, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += lp[i];
    return s;
}

static int same_tokens(const sr_aed_beam *a, const sr_aed_beam *b)
{
    return a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof *a->tok);
}

/* Stable sort of beams by rank, best first, then drop later duplicates (a re-check cut or a
 * paused beam can equal another beam); the beam structs carry their own buffers, so swapping
 * them is cheap. */
static void beams_sort_dedupe(sr_aed_beam *bm, int *n_beam)
{
    for (int i = 1; i < *n_beam; i++)
        for (int j = i; j > 0 && bm[j].rank > bm[j - 1].rank; j--) {
            sr_aed_beam t = bm[j];
            bm[j] = bm[j - 1];
            bm[j - 1] = t;
        }
    for (int i = 0; i < *n_beam; i++)
        for (int j = i + 1; j < *n_beam;) {
            if (same_tokens(&bm[i], &bm[j])) {
                sr_aed_beam t = bm[j];
                memmove(&bm[j], &bm[j + 1], (size_t)(*n_beam - j - 1) * sizeof *bm);
                bm[--*n_beam] = t; /* keep its buffers for reuse */
            } else {
                j++;
            }
        }
}

sr_status sr_aed_beams_init(sr_aed_beams *e, const sr_scorer *sc, int b, int window, int guard)
{
    memset(e, 0, sizeof *e);
    e->b = b;
    e->guard = guard;
    e->vocab = sc->vocab;
    e->max_len = sc->aed_max_len;
    e->eot = sc->eot;
    e->window = SR_MIN(window, sc->aed_max_len);
    e->k = SR_MIN(b + 1, sc->vocab);
    if (sc->aed_top && e->k > sc->aed_top_k_max)
        return sr_error(SR_ERR_ARG, "stream.beam: beam %d takes the %d best entries of a row, the "
                        "scorer gives at most %d", b, e->k, sc->aed_top_k_max);
    size_t L = (size_t)e->max_len, V = (size_t)e->vocab, B = (size_t)b, K = (size_t)e->k;
    size_t W = (size_t)e->window + 1;
    if (!(e->beam = sr_calloc(B, sizeof *e->beam, "beam set")) ||
        !(e->next = sr_calloc(B, sizeof *e->next, "beam set")) ||
        !(e->done = sr_calloc(B, sizeof *e->done, "finished beams")) ||
        !(e->rtop = sr_malloc(B * W * sizeof *e->rtop, "beam re-check summaries")) ||
        !(e->rid = sr_malloc(B * W * K * sizeof *e->rid, "beam re-check summaries")) ||
        !(e->rlp = sr_malloc(B * W * K * sizeof *e->rlp, "beam re-check summaries")) ||
        !(e->dtop = sr_malloc(B * sizeof *e->dtop, "beam next-token summaries")) ||
        !(e->did = sr_malloc(B * K * sizeof *e->did, "beam next-token summaries")) ||
        !(e->dlp = sr_malloc(B * K * sizeof *e->dlp, "beam next-token summaries")) ||
        (!sc->aed_top && !(e->dist = sr_malloc(B * V * sizeof(float), "beam distributions"))) ||
        (!sc->aed_top && !(e->rows = sr_malloc(B * W * V * sizeof(float), "beam re-check rows"))) ||
        !(e->w0 = sr_malloc(B * sizeof *e->w0, "beam re-check windows")) ||
        !(e->cand = sr_malloc(B * (B + 1) * sizeof *e->cand, "beam candidates")) ||
        !(e->slot_used = sr_calloc(B, sizeof *e->slot_used, "beam slots")) ||
        !(e->parent = sr_calloc(B, sizeof *e->parent, "beam parents")) ||
        !(e->fin = sr_calloc(2 * B, sizeof *e->fin, "finished beam list")))
        goto nomem;
    for (int i = 0; i < b; i++) {
        if (!(e->beam[i].tok = sr_malloc(L * sizeof(int32_t), "beam tokens")) ||
            !(e->beam[i].lp = sr_malloc(L * sizeof(float), "beam log-probs")) ||
            !(e->next[i].tok = sr_malloc(L * sizeof(int32_t), "beam tokens")) ||
            !(e->next[i].lp = sr_malloc(L * sizeof(float), "beam log-probs")) ||
            !(e->done[i].tok = sr_malloc(L * sizeof(int32_t), "finished beam tokens")) ||
            !(e->done[i].lp = sr_malloc(L * sizeof(float), "finished beam log-probs")))
            goto nomem;
    }
    sr_aed_beams_reset(e);
    return SR_OK;
nomem:
    sr_aed_beams_free(e);
    return SR_ERR_NOMEM;
}

void sr_aed_beams_free(sr_aed_beams *e)
{
    for (int i = 0; i < e->b; i++) {
        if (e->beam) { free(e->beam[i].tok); free(e->beam[i].lp); }
        if (e->next) { free(e->next[i].tok); free(e->next[i].lp); }
        if (e->done) { free(e->done[i].tok); free(e->done[i].lp); }
    }
    free(e->beam);
    free(e->next);
    free(e->done);
    free(e->rtop);
    free(e->rid);
    free(e->rlp);
    free(e->dtop);
    free(e->did);
    free(e->dlp);
    free(e->dist);
    free(e->rows);
    free(e->w0);
    free(e->cand);
    free(e->slot_used);
    free(e->parent);
    free(e->fin);
    memset(e, 0, sizeof *e);
}

void sr_aed_beams_reset(sr_aed_beams *e)
{
    e->n_beam = 1;
    sr_aed_beam *z = &e->beam[0];
    z->n = 0;
    z->score = z->rank = 0;
    z->slot = 0;
    z->dist_ok = 0;
    z->end_lp = NAN;
    e->n_done = 0;
    e->loop_cuts = 0;
}

void sr_aed_beams_keep_best(sr_aed_beams *e, int n)
{
    sr_aed_beam *b0 = &e->beam[0];
    if (n < b0->n) {
        b0->n = n;
        b0->dist_ok = 0;
    }
    b0->score = b0->rank = sum_lp(b0->lp, b0->n);
    b0->end_lp = NAN;
    e->n_beam = 1;
}

size_t sr_aed_beams_bytes(const sr_aed_beams *e)
{
    size_t L = (size_t)e->max_len, V = (size_t)e->vocab, B = (size_t)e->b, K = (size_t)e->k;
    size_t W = (size_t)e->window + 1, per_row = sizeof(sr_aed_top) + K * (sizeof(int32_t) + sizeof(float));
    return sizeof *e + 2 * B * (sizeof(sr_aed_beam) + L * (sizeof(int32_t) + sizeof(float))) +
           B * (sizeof(sr_aed_done) + L * (sizeof(int32_t) + sizeof(float))) +
           B * (W + 1) * per_row + (e->dist ? B * V * sizeof(float) : 0) +
           (e->rows ? B * W * V * sizeof(float) : 0) + B * (B + 1) * sizeof *e->cand +
           5 * B * sizeof(int);
}

/* The re-check of beam bm (beam index i) once the summaries of its rows [w0, n] are in: cut at
 * the first token that failed; the row at the cut (or at n) is what the beam continues from. A
 * token is among the b best when fewer than b entries are above it: when the b-th best is not
 * (k = b + 1 >= b entries kept; a vocabulary of at most b has every token among them). */
static void check_take(sr_aed_beams *e, sr_aed_beam *bm, int w0, int i)
{
    size_t W = (size_t)e->window + 1, K = (size_t)e->k;
    const sr_aed_top *t0 = e->rtop + (size_t)i * W;
    const int32_t *id0 = e->rid + (size_t)i * W * K;
    const float *lp0 = e->rlp + (size_t)i * W * K;
    int cut = bm->n;
    for (int j = w0; j < bm->n; j++) {
        float v = t0[j - w0].tok_lp;
        int in_top = e->b >= e->vocab || !(lp0[(size_t)(j - w0) * K + (size_t)e->b - 1] > v);
        if (in_top && v >= bm->lp[j]) {
            bm->lp[j] = v;
        } else {
            cut = j;
            break;
        }
    }
    size_t r = (size_t)(cut - w0), s = (size_t)bm->slot;
    memcpy(e->did + s * K, id0 + r * K, K * sizeof *e->did);
    memcpy(e->dlp + s * K, lp0 + r * K, K * sizeof *e->dlp);
    bm->n = cut;
    bm->score = bm->rank = sum_lp(bm->lp, bm->n);
    bm->dist_ok = 1;
    bm->end_lp = NAN;
}

/* Candidates of every beam (b + 1 best next tokens each; every beam's distribution is ready),
 * sorted by summed log-prob, best first; ties keep generation order (beam order, then token
 * rank). */
static int gen_candidates(sr_aed_beams *e)
{
    int k = e->k, nc = 0;
    for (int i = 0; i < e->n_beam; i++) {
        sr_aed_beam *bm = &e->beam[i];
        const int32_t *id = e->did + (size_t)bm->slot * (size_t)k;
        const float *lp = e->dlp + (size_t)bm->slot * (size_t)k;
        for (int r = 0; r < k; r++) {
            struct sr_aed_cand *c = &e->cand[nc++];
            c->parent = i;
            c->token = id[r];
            c->lp = lp[r];
            c->score = bm->score + c->lp;
        }
    }
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && e->cand[j].score > e->cand[j - 1].score; j--) {
            struct sr_aed_cand t = e->cand[j];
            e->cand[j] = e->cand[j - 1];
            e->cand[j - 1] = t;
        }
    return nc;
}

/* next[slot] = parent's prefix, plus token unless token < 0. */
static void make_child(sr_aed_beams *e, sr_aed_beam *child, const sr_aed_beam *parent,
                       int32_t token, float lp)
{
    memcpy(child->tok, parent->tok, (size_t)parent->n * sizeof *child->tok);
    memcpy(child->lp, parent->lp, (size_t)parent->n * sizeof *child->lp);
    child->n = parent->n;
    child->score = child->rank = parent->score;
    if (token >= 0) {
        child->tok[child->n] = token;
        child->lp[child->n] = lp;
        child->n++;
        child->score = child->rank = parent->score + lp;
    }
    child->dist_ok = 0;
    child->slot = -1;
    child->end_lp = NAN;
}

/* Give every new beam a scorer slot: a beam inherits its parent's slot when free (that cache
 * then only extends), the others take any free slot (the backend recomputes what diverges). */
static void assign_slots(sr_aed_beams *e, const int *parent, int n_next)
{
    memset(e->slot_used, 0, (size_t)e->b * sizeof *e->slot_used);
    for (int i = 0; i < n_next; i++) {
        int s = e->beam[parent[i]].slot;
        if (!e->slot_used[s]) {
            e->next[i].slot = s;
            e->slot_used[s] = 1;
        }
    }
    for (int i = 0, s = 0; i < n_next; i++) {
        if (e->next[i].slot >= 0) continue;
        while (e->slot_used[s]) s++;
        e->next[i].slot = s;
        e->slot_used[s] = 1;
    }
}

static void swap_sets(sr_aed_beams *e, int n_next)
{
    sr_aed_beam *t = e->beam;
    e->beam = e->next;
    e->next = t;
    e->n_beam = n_next;
}

/* One streaming step from the candidates; 1 when it paused (EOT among the b best, or a loop
 * cut). */
static int stream_step(sr_aed_beams *e)
{
    int nc = gen_candidates(e);
    int take = SR_MIN(e->b, nc), paused = 0;
    int *parents = e->parent;
    for (int c = 0; c < take; c++) {
        const struct sr_aed_cand *cd = &e->cand[c];
        sr_aed_beam *child = &e->next[c];
        parents[c] = cd->parent;
        if (cd->token == e->eot) {
            /* Algorithm 2: EOT among the b best pauses until the next chunk; the beam stays
             * without the EOT, ranked with it */
            make_child(e, child, &e->beam[cd->parent], -1, 0);
            child->rank = cd->score;
            child->end_lp = cd->lp;
            paused = 1;
            continue;
        }
        make_child(e, child, &e->beam[cd->parent], cd->token, cd->lp);
        int keep = e->guard ? sr_aed_loop_keep(child->tok, child->n, e->committed) : -1;
        if (keep >= 0) {
            child->n = keep;
            child->score = child->rank = sum_lp(child->lp, keep);
            paused = 1;
            e->loop_cuts++;
        }
    }
    assign_slots(e, parents, take);
    swap_sets(e, take);
    beams_sort_dedupe(e->beam, &e->n_beam);
    return paused;
}

/* Add a finished candidate when there is room (patience 1: at most b). Beams of different
 * lengths (stable_beam) can finish the same sequence twice: it is kept once, with the larger
 * score, as openai-whisper's dictionary of finished sequences keeps one entry per sequence. */
static void add_done(sr_aed_beams *e, const int32_t *tok, const float *lp, int n, double score,
                     double end_lp)
{
    sr_aed_done *d = NULL;
    for (int i = 0; i < e->n_done && !d; i++)
        if (e->done[i].n == n && !memcmp(e->done[i].tok, tok, (size_t)n * sizeof *tok)) {
            if (!(score > e->done[i].score)) return;
            d = &e->done[i];
        }
    if (!d) {
        if (e->n_done >= e->b) return;
        d = &e->done[e->n_done++];
        memcpy(d->tok, tok, (size_t)n * sizeof *tok);
        d->n = n;
    }
    memcpy(d->lp, lp, (size_t)n * sizeof *lp);
    d->score = score;
    d->end_lp = end_lp;
}

/* One offline step from the candidates (openai-whisper's rules). */
static void finish_step(sr_aed_beams *e)
{
    int nc = gen_candidates(e);
    /* newly finished this step, in score order: EOT candidates (index into cand) and loop-cut
     * beams (index into next, encoded as -1 - i) */
    int *fin = e->fin, n_fin = 0, n_next = 0;
    int *parents = e->parent;
    for (int c = 0; c < nc && n_next < e->b; c++) {
        const struct sr_aed_cand *cd = &e->cand[c];
        if (cd->token == e->eot) {
            if (n_fin < 2 * e->b) fin[n_fin++] = c;
            continue;
        }
        sr_aed_beam *child = &e->next[n_next];
        make_child(e, child, &e->beam[cd->parent], cd->token, cd->lp);
        int keep = e->guard ? sr_aed_loop_keep(child->tok, child->n, e->committed) : -1;
        if (keep >= 0) { /* a loop ends this beam: finished at the cut, no EOT term */
            e->loop_cuts++;
            child->n = keep;
            child->score = child->rank = sum_lp(child->lp, keep);
            if (n_fin < 2 * e->b) fin[n_fin++] = -1 - n_next;
            parents[n_next] = cd->parent;
            n_next++;
            continue;
        }
        parents[n_next] = cd->parent;
        n_next++;
    }
    /* sort the newly finished by score (EOT ones already are; loop cuts change scores) */
    for (int i = 1; i < n_fin; i++)
        for (int j = i; j > 0; j--) {
            double sj = fin[j] >= 0 ? e->cand[fin[j]].score : e->next[-1 - fin[j]].score;
            double sp = fin[j - 1] >= 0 ? e->cand[fin[j - 1]].score : e->next[-1 - fin[j - 1]].score;
            if (!(sj > sp)) break;
            int t = fin[j];
            fin[j] = fin[j - 1];
            fin[j - 1] = t;
        }
    for (int i = 0; i < n_fin; i++) {
        if (fin[i] >= 0) {
            const struct sr_aed_cand *cd = &e->cand[fin[i]];
            const sr_aed_beam *p = &e->beam[cd->parent];
            add_done(e, p->tok, p->lp, p->n, cd->score, cd->lp);
        } else {
            const sr_aed_beam *lb = &e->next[-1 - fin[i]];
            add_done(e, lb->tok, lb->lp, lb->n, lb->score, NAN);
        }
    }
    /* drop the loop-cut beams from the live set */
    int w = 0;
    for (int i = 0; i < n_next; i++) {
        int cut = 0;
        for (int f = 0; f < n_fin; f++) cut |= fin[f] == -1 - i;
        if (cut) continue;
        if (w != i) {
            sr_aed_beam t = e->next[w];
            e->next[w] = e->next[i];
            e->next[i] = t;
            parents[w] = parents[i];
        }
        w++;
    }
    assign_slots(e, parents, w);
    swap_sets(e, w);
    beams_sort_dedupe(e->beam, &e->n_beam);
}

/* The end of an offline completion: top up with the live beams by score when fewer than b
 * finished, as openai-whisper does, and pick the answer. */
static void finish_end(sr_aed_beams *e)
{
    for (int i = 0; i < e->n_beam && e->n_done < e->b; i++)
        add_done(e, e->beam[i].tok, e->beam[i].lp, e->beam[i].n, e->beam[i].score, NAN);
    int bi = 0;
    double bs = 0;
    for (int i = 0; i < e->n_done; i++) {
        double s = e->done[i].score / (double)SR_MAX(e->done[i].n, 1);
        if (i == 0 || s > bs) {
            bi = i;
            bs = s;
        }
    }
    e->best = e->n_done ? &e->done[bi] : NULL;
}

void sr_aed_beams_begin(sr_aed_beams *e, int op, int max_steps, int committed)
{
    e->op = op;
    e->max_steps = max_steps;
    e->committed = committed;
    e->step = e->sub = e->pending = 0;
    if (op == SR_AED_BEAMS_FINISH) {
        e->n_done = 0;
        e->best = NULL;
    }
}

/* Whether another step of the operation in progress may start. */
static int step_may_start(const sr_aed_beams *e)
{
    if (e->step >= e->max_steps) return 0;
    if (e->op == SR_AED_BEAMS_FINISH && (e->n_done >= e->b || e->n_beam <= 0)) return 0;
    for (int i = 0; i < e->n_beam; i++)
        if (e->beam[i].n >= e->max_len) return 0;
    return 1;
}

int sr_aed_beams_next(sr_aed_beams *e, sr_call *call)
{
    size_t V = (size_t)e->vocab, W = (size_t)e->window + 1, K = (size_t)e->k;
    if (e->op == SR_AED_BEAMS_CHECK) {
        if (e->pending) { /* every beam's re-check answered: taken in beam order */
            for (int i = 0; i < e->n_beam; i++) check_take(e, &e->beam[i], e->w0[i], i);
            e->pending = 0;
            beams_sort_dedupe(e->beam, &e->n_beam);
            e->op = SR_AED_BEAMS_IDLE;
            return 0;
        }
        if (!e->n_beam) {
            e->op = SR_AED_BEAMS_IDLE;
            return 0;
        }
        /* one call per beam, all in one round (each beam on its own slot and rows) */
        for (int i = 0; i < e->n_beam; i++) {
            sr_aed_beam *bm = &e->beam[i];
            e->w0[i] = SR_MIN(SR_MAX(e->committed, bm->n - e->window), bm->n);
            size_t q = (size_t)i * W;
            sr_call_aed_topk(&call[i], bm->slot, bm->tok, bm->n, e->w0[i], e->rows ? e->rows + q * V : NULL,
                             e->rtop + q, e->k, e->rid + q * K, e->rlp + q * K);
        }
        e->pending = e->n_beam;
        return e->n_beam;
    }
    if (e->op != SR_AED_BEAMS_STREAM && e->op != SR_AED_BEAMS_FINISH) return 0;
    for (;;) {
        if (e->pending) {
            for (int i = 0; i < e->n_beam; i++) e->beam[i].dist_ok = 1;
            e->pending = 0;
        }
        if (!e->sub) { /* a step begins */
            if (!step_may_start(e)) {
                if (e->op == SR_AED_BEAMS_FINISH) finish_end(e);
                e->op = SR_AED_BEAMS_IDLE;
                return 0;
            }
            e->sub = 1;
        }
        /* every beam's next-token summary not yet known, in one round (distinct slots:
         * distinct places in dtop, did, dlp) */
        int n = 0;
        for (int i = 0; i < e->n_beam; i++) {
            sr_aed_beam *bm = &e->beam[i];
            size_t s = (size_t)bm->slot;
            if (bm->dist_ok) continue;
            sr_call_aed_topk(&call[n++], bm->slot, bm->tok, bm->n, bm->n, e->dist ? e->dist + s * V : NULL,
                             &e->dtop[s], e->k, e->did + s * K, e->dlp + s * K);
        }
        if (n) {
            e->pending = n;
            return n;
        }
        e->sub = 0;
        e->step++;
        if (e->op == SR_AED_BEAMS_STREAM) {
            if (stream_step(e)) {
                e->op = SR_AED_BEAMS_IDLE;
                return 0;
            }
        } else {
            finish_step(e);
        }
    }
}

sr_status sr_aed_beams_call_error(const sr_aed_beams *e, sr_status st)
{
    if (e->op == SR_AED_BEAMS_CHECK)
        return sr_error_prefix(st, "aed_logprobs re-checking %d beam(s) (beam 0 from %d)", e->n_beam, e->w0[0]);
    return sr_error_prefix(st, "aed_logprobs for %d beam(s) (beam 0 at position %d)", e->pending, e->beam[0].n);
}
