/*
 * whisper.c — the "whisper" backend: streams, the three strategies and the AED scorer
 * (docs/whisper.md has the full description).
 *
 *   offline    buffers the audio; at the end cuts it into consecutive windows of
 *              chunk_length_s (30 s), each zero-padded to the full window, log-mel over the
 *              window, full non-causal encoder, cross-attention K/V of every window kept.
 *   whisperrt  the causal encoder of WhisperRT: audio -> streaming log-mel (running-max
 *              clamp) -> streaming conv stem -> blocks of tau0 (first) then tau encoder frames.
 *              Every frame of a block attends to all frames of its own and earlier blocks (the
 *              block-causal mask of the paper's eq. 37); a block computes Q/K/V for its own
 *              frames only and appends K/V to the per-layer cache; its cross-attention K/V are
 *              appended to the window's. The first audio chunk carries WH_LOOKAHEAD samples
 *              more than tau0, which complete the STFT window of the last mel frame and the
 *              stem's right neighbour, so blocks fall on the eq. 37 boundaries exactly.
 *              When a block would overflow the n_audio_ctx-frame context (30 s), the context is
 *              reset (a new window: encoder cache and positions restart at 0, the text so far
 *              is final), as the reference implementation resets its model after 30 s.
 *   reencode   each chunk re-runs log-mel + the full non-causal encoder over the current
 *              window's audio zero-padded to 30 s (the Ufal / Simul-Whisper baseline).
 *
 * Scorer windows: a hypothesis spans consecutive windows separated by the window-break token
 * brk = "<|30.00|>" (special, never printed). In a window that is not the newest, EOT is
 * presented as brk (EOT's probability moves to brk), so a decoder that runs to EOT decodes
 * window after window; positions of windows whose audio is no longer held (streaming after a
 * reset) are returned as certain (log p = 0 for the token there), and the next position of such
 * a prefix as a certain brk. Each window's text restarts the decoder context (prompt + that
 * window's tokens) and is capped at n_text_ctx / 2 tokens, after which EOT (or brk) is
 * certain.
 *
 * Batching: every stream lives in a batch context (wh_batch) that owns the cache pools of its
 * streams (one slot range per stream) and the scratch they share. aed_logprobs_batch plans each
 * request (of distinct streams, or of distinct slots of one stream: a beam decoder's beams)
 * as the solo call would (windows, slot-cache reuse, audio
 * versions) and computes all their new decoder positions in one pass (one gemm per Linear, one
 * k->attn per attention, one logits gemm while the staged rows fit); process_batch encodes the
 * new whisperrt blocks of all its streams in one encoder pass. That round (record g_enc) and a
 * pass of one decoder group whose logit rows fit one flush, up to its copy to the host (record
 * g_dec), are each marked as one recording (sr_kgraph_begin / end): a table that records (CUDA
 * with SRKIT_CUDA_GRAPH=1) submits each as one graph. The solo forms are these with
 * count = 1. Rows are independent in every op, so a stream's numbers do not depend on its
 * batch.
 */
#include "whisper.h"

#include <math.h>
#include <string.h>

static const char *const strategy_names[] = {"offline", "whisperrt", "reencode"};

static const char *strategy_at(size_t i)
{
    return i < SR_ARRAY_LEN(strategy_names) ? strategy_names[i] : NULL;
}

/* ---- defaults: the one place that decides what a stream config leaves unset ---- */

/* Vanilla weights streamed live: the strategy and decoder that do not loop on them
 * (measured on jfk and librispeech-sample, docs/whisper.md "Defaults"). */
#define WH_LIVE_STRATEGY "reencode"
#define WH_REENCODE_DECODER "local_agreement"
/* Default chunks: whisperrt's block of the paper's main setting; reencode runs one full 30 s
 * encoder pass per chunk whatever its size (~0.4 s on 2 threads), so 300 ms chunks cannot keep
 * up with real time there and 1000 ms (whisper_streaming's default min-chunk-size) can. */
#define WH_DEFAULT_CHUNK_MS 300
#define WH_REENCODE_CHUNK_MS 1000

static void defaults_of(const wh_model *w, sr_use use, const sr_stream_config *cfg,
                        sr_defaults *d)
{
    d->strategy = cfg->strategy;
    d->decoder = cfg->decoder;
    d->chunk_ms = cfg->chunk_ms;
    d->first_chunk_ms = cfg->first_chunk_ms;
    d->basis = w->causal ? "causal Whisper weights (config.streaming.causal)"
                         : "vanilla Whisper weights (no causal config.streaming)";
    if (!d->strategy) {
        /* Vanilla weights were trained on whole 30 s windows: under the block-causal encoder
         * they loop (docs/whisper.md), so they run offline unless hypotheses are wanted while
         * the audio arrives, and offline too for a decoder that decodes only at the end,
         * which gains nothing from a streaming encoder. */
        int at_end = d->decoder && (!strcmp(d->decoder, "aed_greedy") || !strcmp(d->decoder, "aed_beam"));
        d->strategy = w->causal ? "whisperrt"
                                : use == SR_USE_FINAL || at_end ? "offline" : WH_LIVE_STRATEGY;
    }
    int offline = !strcmp(d->strategy, "offline");
    if (!d->decoder)
        d->decoder = offline ? "aed_greedy"
                             : !strcmp(d->strategy, "reencode") ? WH_REENCODE_DECODER : "stable_greedy";
    if (offline) return; /* 30 s windows: no chunk sizes */
    /* the trained sizes are those of the causal encoder's blocks: whisperrt's */
    int trained = w->causal && !strcmp(d->strategy, "whisperrt");
    /* defaults stay inside the window, so that they are valid for small test models too */
    int max_ms = SR_MAX(40, w->n_audio_ctx * 20);
    if (!d->chunk_ms)
        d->chunk_ms = trained ? w->trained_ms[0]
                    : SR_MIN(max_ms, !strcmp(d->strategy, "reencode") ? WH_REENCODE_CHUNK_MS
                                                                     : WH_DEFAULT_CHUNK_MS);
    /* the trained first chunk holds for the chunks it was trained with (tau0 >= tau) */
    if (!d->first_chunk_ms)
        d->first_chunk_ms = trained && w->trained_first_ms >= d->chunk_ms
                                ? w->trained_first_ms
                                : SR_MAX(d->chunk_ms, SR_MIN(max_ms, 2 * d->chunk_ms));
}

void wh_defaults(const sr_model *m, sr_use use, const sr_stream_config *cfg, sr_defaults *out)
{
    defaults_of(m->impl, use, cfg, out);
}

/* ---- stream config (batch_open and stream_open validate it here) ---- */

static sr_status check_cfg(const wh_model *w, const sr_stream_config *cfg, wh_cfg *c)
{
    if (!cfg) return sr_error(SR_ERR_ARG, "whisper: stream config is NULL");
    memset(c, 0, sizeof *c);
    sr_defaults d;
    defaults_of(w, SR_USE_LIVE, cfg, &d);
    size_t i = 0;
    while (strategy_at(i) && strcmp(strategy_at(i), d.strategy)) i++;
    if (!strategy_at(i)) {
        sr_error_unknown("whisper strategy", d.strategy, strategy_at);
        return sr_error_prefix(SR_ERR_ARG, "stream.strategy");
    }
    int strategy = (int)i;
    int chunk_ms = d.chunk_ms ? d.chunk_ms : WH_DEFAULT_CHUNK_MS; /* offline: not used */
    int first_ms = d.first_chunk_ms ? d.first_chunk_ms : 2 * chunk_ms;
    int max_ms = w->n_audio_ctx * 20;
    if (strategy != WH_OFFLINE) {
        if (chunk_ms < 40 || chunk_ms > 1000 || chunk_ms % 20)
            return sr_error(SR_ERR_ARG, "stream.chunk_ms: %d ms; whisper %s needs 40..1000 ms in "
                            "steps of 20 ms (one encoder frame)", cfg->chunk_ms,
                            strategy_names[strategy]);
        if (first_ms < chunk_ms || first_ms > max_ms || first_ms % 20)
            return sr_error(SR_ERR_ARG, "stream.first_chunk_ms: %d ms; needs stream.chunk_ms "
                            "(%d ms) .. %d ms in steps of 20 ms (one encoder frame)", first_ms,
                            chunk_ms, max_ms);
    }
    if (cfg->beam < 0 || cfg->beam > WH_MAX_SLOTS / 2)
        return sr_error(SR_ERR_ARG, "stream.beam: %d; whisper supports 0..%d", cfg->beam,
                        WH_MAX_SLOTS / 2);
    if (cfg->decoder_kv_cache != 0 && cfg->decoder_kv_cache != 1)
        return sr_error(SR_ERR_ARG, "stream.decoder_kv_cache: %d; expected 0 or 1",
                        cfg->decoder_kv_cache);
    c->strategy = strategy;
    c->kv_keep = cfg->decoder_kv_cache;
    c->tau = chunk_ms / 20;
    c->tau0 = first_ms / 20;
    c->n_slots = cfg->beam > 1 ? 2 * cfg->beam : 2;
    if (strategy == WH_WHISPERRT) {
        c->ck.first_chunk = (size_t)c->tau0 * 320 + WH_LOOKAHEAD;
        c->ck.chunk = (size_t)c->tau * 320;
    } else if (strategy == WH_REENCODE) {
        c->ck.first_chunk = (size_t)c->tau0 * 320;
        c->ck.chunk = (size_t)c->tau * 320;
    } else {
        c->ck.first_chunk = c->ck.chunk = (size_t)w->window_samples;
    }
    return SR_OK;
}

/* ---- rows of log-probabilities ---- */

static void one_hot(float *row, int V, int t)
{
    for (int v = 0; v < V; v++) row[v] = -INFINITY;
    row[t] = 0.0f;
}

/* Request r's row j (r->from <= j <= r->n) certain of token t: the row, or its summary (what
 * sr_aed_top_of_row and sr_aed_row_topk give for the one-hot row: t, then the lowest other ids
 * at -inf). */
static void certain_row(const sr_aed_req *r, int V, int32_t eot, int j, int32_t t)
{
    if (!r->top) {
        one_hot(r->out + (size_t)(j - r->from) * V, V, t);
        return;
    }
    sr_aed_top *o = &r->top[j - r->from];
    o->best = t;
    o->best_lp = 0.0f;
    o->tok_lp = j < r->n ? (r->prefix[j] == t ? 0.0f : -INFINITY) : NAN;
    o->eot_lp = eot == t ? 0.0f : -INFINITY;
    int32_t *id = r->top_id + (size_t)(j - r->from) * r->top_k;
    float *lp = r->top_lp + (size_t)(j - r->from) * r->top_k;
    if (r->top_k) {
        id[0] = t;
        lp[0] = 0.0f;
    }
    for (int i = 1, v = 0; i < r->top_k; i++, v++) {
        if (v == t) v++;
        id[i] = v;
        lp[i] = -INFINITY;
    }
}


/* ---- the AED scorer: requests planned per stream, computed as one batch ---- */

/* One request's progress: positions [from, j) are written; the current segment (active) is
 * window wj's local text positions L0..Lmax from its text txt[0..Lmax), written to row.. */
typedef struct {
    wh_stream *s;
    const sr_aed_req *r;
    int j;
    int active, wj, L0, Lmax;
    const int32_t *txt;
    int r0;             /* the request's row of local position L0 (its position r->from + r0) */
    int N, c0, i_from;  /* decoder inputs [0, N), computed from c0, first output row i_from */
} aed_plan;

/* Check a request and map each position of its prefix to (window, local index). */
static sr_status aed_prepare(wh_stream *s, const sr_aed_req *r)
{
    const wh_model *w = s->w;
    int V = w->n_vocab, n = r->n;
    if (r->slot < 0 || r->slot >= s->n_slots)
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: slot %d outside 0..%d", r->slot,
                        s->n_slots - 1);
    if (n < 0 || r->from < 0 || r->from > n)
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: from %d, n %d: need 0 <= from <= n",
                        r->from, n);
    if ((n && !r->prefix) || (!r->out && !r->top))
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: %s is NULL",
                        n && !r->prefix ? "prefix" : "out");
    if (r->top && (r->top_k < 0 || r->top_k > s->b->kcap || r->top_k > V))
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: top_k %d outside 0..%d (stream.beam + 1 "
                        "of the batch context)", r->top_k, SR_MIN(s->b->kcap, V));
    if (r->top && r->top_k && (!r->top_id || !r->top_lp))
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: top_k %d with top_%s NULL", r->top_k,
                        r->top_id ? "lp" : "id");
    wh_slot *sl = &s->slot[r->slot];
    if (n + 1 > sl->pcap) {
        int cap = 2 * (n + 1);
        int *a = realloc(sl->pwin, (size_t)cap * sizeof(int)), *b = NULL;
        if (a) sl->pwin = a;
        if (a) b = realloc(sl->ploc, (size_t)cap * sizeof(int));
        if (!a || !b)
            return sr_error(SR_ERR_NOMEM, "whisper aed_logprobs: out of memory for a %d-token "
                            "prefix", n);
        sl->ploc = b;
        sl->pcap = cap;
    }
    int win = 0, loc = 0;
    for (int j = 0; j <= n; j++) {
        sl->pwin[j] = win;
        sl->ploc[j] = loc;
        if (j == n) break;
        if (r->prefix[j] < 0 || r->prefix[j] >= V)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs: prefix[%d] = %d outside the "
                            "vocabulary (%d)", j, (int)r->prefix[j], V);
        if (r->prefix[j] == w->brk) {
            win++;
            loc = 0;
        } else {
            loc++;
        }
    }
    return SR_OK;
}

/* Advance a request to its next segment that needs the decoder (active = 1), writing the rows
 * that need none (no audio yet, finished windows, a window's capped end) on the way. */
static sr_status aed_next(aed_plan *p)
{
    wh_stream *s = p->s;
    const wh_model *w = s->w;
    const sr_aed_req *r = p->r;
    const wh_slot *sl = &s->slot[r->slot];
    int V = w->n_vocab, n = r->n;
    p->active = 0;
    while (p->j <= n) {
        int j = p->j, wj = sl->pwin[j];
        if (s->n_win == 0 || wj < s->win_first) { /* no audio yet, or a finished window */
            certain_row(r, V, w->eot, j, j < n ? r->prefix[j] : (s->n_win == 0 ? w->eot : w->brk));
            p->j++;
            continue;
        }
        if (wj >= s->n_win)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs: prefix[%d] starts window %d, the "
                            "audio has %d window(s)", j - 1, wj, s->n_win);
        int jb = j;
        while (jb < n && sl->pwin[jb + 1] == wj) jb++;
        int L0 = sl->ploc[j], Lend = sl->ploc[jb];
        if (Lend > w->text_cap)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs: prefix holds %d text tokens in "
                            "window %d, the cap is %d (aed_max_len per window)", Lend, wj,
                            w->text_cap);
        int Lmax = Lend < w->text_cap ? Lend : w->text_cap - 1;
        if (Lend == w->text_cap) /* the row after the computed ones */
            certain_row(r, V, w->eot, jb, wj < s->n_win - 1 ? w->brk : w->eot);
        p->j = jb + 1;
        if (L0 <= Lmax) {
            p->active = 1;
            p->wj = wj;
            p->L0 = L0;
            p->Lmax = Lmax;
            p->txt = r->prefix + (j - L0);
            p->r0 = j - r->from;
            return SR_OK;
        }
    }
    return SR_OK;
}

/* Decoder inputs of an active segment into tok (prompt + window text) and its sequence: the
 * positions its slot already holds for the same window and audio are reused. */
static void aed_seq(aed_plan *p, int32_t *tok, wh_dseq *q)
{
    wh_stream *s = p->s;
    const wh_model *w = s->w;
    int P = w->prompt_len, N = P + p->Lmax;
    memcpy(tok, w->prompt, (size_t)P * sizeof(int32_t));
    memcpy(tok + P, p->txt, (size_t)p->Lmax * sizeof(int32_t));
    int i_from = P - 1 + p->L0; /* the input whose output predicts local position L0 */
    const wh_slot *sl = &s->slot[p->r->slot];
    int common = 0;
    if (sl->win == p->wj && (sl->ver == s->ver || s->kv_keep))
        while (common < sl->n && common < N && sl->tok[common] == tok[common]) common++;
    p->N = N;
    p->c0 = common < i_from ? common : i_from;
    p->i_from = i_from;
    int hw = p->wj - s->win_first;
    q->tok = tok;
    q->c0 = p->c0;
    q->n = N;
    q->sslot = s->bslot * s->b->cfg.n_slots + p->r->slot;
    q->xslot = s->bslot * s->b->win_cap + hw;
    q->enc_len = s->win_len[hw];
}

/* The end of a recording *g (if any; NULL afterwards): submitted when st is SR_OK, dropped
 * otherwise (sr_kgraph_end). */
static sr_status record_end(const sr_kernels *k, sr_kgraph **g, sr_status st)
{
    if (!*g) return st;
    st = sr_kgraph_end(k, *g, st);
    *g = NULL;
    return st;
}

/* Logits of the staged rows (one gemm), the logit rules, and each row (or its summary) to its
 * place. The rules are applied where the logits are: the suppressed tokens get -inf (one add
 * of the mask row to every row; rows at a window's first text position also the
 * first-position mask), then one log-softmax over every staged row (rows are independent: the
 * same bits as per row). In a window that is not the newest, EOT is presented as brk: brk is a
 * timestamp, suppressed, so moving EOT's log-prob to brk's place after the log-softmax is what
 * moving its logit before it would give (the normalizer sums the same terms); two one-entry
 * copies per such row, which only decoding past a 30 s window's end meets.
 * Summaries (sr_aed_req.top) are taken where the rows are too when every staged row asks for
 * one: the argmax and the best entries a beam asks for by the table's topk (k = 1, or the most
 * any row asks), the probed and EOT entries by one copy_rows, and one copy of 16 bytes a row
 * (plus 8 per best entry) to the host instead of the row's n_vocab floats. Otherwise the rows
 * come to the host (one copy on a device) and the summaries are taken there
 * (sr_aed_top_of_row, sr_aed_row_topk: topk's rule).
 * *g: a recording in progress (aed_pass), or NULL: it ends (and is submitted) before the first
 * copy to the host, and *g becomes NULL. */
static sr_status aed_flush(wh_batch *b, int *ln, sr_kgraph **g)
{
    const wh_model *w = b->w;
    int V = w->n_vocab, n = *ln;
    const sr_kernels *k = w->k;
    *ln = 0;
    if (!n) return SR_OK;
    sr_status st = wh_logits(w, b->lh, n, b->logits);
    if (!st) st = k->add(n, V, w->mask, 0, 1.0f, b->logits, V);
    for (int r = 0; r < n && !st; r++)
        if (b->lpos[r] == 0) st = k->add(1, V, w->mask_begin, 0, 1.0f, b->logits + (size_t)r * V, V);
    if (!st) st = k->logsoftmax(n, V, b->logits, V, b->logits, V);
    int all_top = 1;
    for (int r = 0; r < n && !st; r++) {
        float *L = b->logits + (size_t)r * V;
        all_top &= b->ltop[r] != NULL;
        if (b->lclosed[r]) { /* an older window ends with brk where the newest would end with EOT */
            st = k->copy2d(1, 1, L + w->eot, 1, L + w->brk, 1);
            if (!st) st = k->copy2d(1, 1, w->ninf, 1, L + w->eot, 1);
        }
    }
    if (st) return record_end(k, g, st);
    if (all_top) { /* K best of every row (K: the most any row asks, at least 1) */
        int K = 1;
        for (int r = 0; r < n; r++) K = SR_MAX(K, b->lk[r]);
        size_t nk = (size_t)n * K;
        int32_t *ids = b->sum;
        float *vals = (float *)b->sum + nk, *got = (float *)b->sum + 2 * nk;
        for (int r = 0; r < n; r++) {
            const float *L = b->logits + (size_t)r * V;
            b->gsrc[2 * r] = L + (b->lprobe[r] >= 0 ? b->lprobe[r] : w->eot);
            b->gsrc[2 * r + 1] = L + w->eot;
        }
        st = k->topk(n, V, K, b->logits, V, ids, vals);
        if (!st) st = k->copy_rows(2 * n, 1, b->gsrc, got, 1);
        st = record_end(k, g, st);
        if (!st) st = k->download(b->hsum, b->sum, (2 * nk + 2 * (size_t)n) * sizeof(uint32_t));
        if (st) return st;
        const int32_t *hi = (const int32_t *)b->hsum;
        const float *hv = (const float *)b->hsum + nk, *hg = (const float *)b->hsum + 2 * nk;
        for (int r = 0; r < n; r++) {
            sr_aed_top *o = b->ltop[r];
            o->best = hi[(size_t)r * K];
            o->best_lp = hv[(size_t)r * K];
            o->tok_lp = b->lprobe[r] >= 0 ? hg[2 * r] : NAN;
            o->eot_lp = hg[2 * r + 1];
            if (b->lk[r]) {
                memcpy(b->lid[r], hi + (size_t)r * K, (size_t)b->lk[r] * sizeof(int32_t));
                memcpy(b->llp[r], hv + (size_t)r * K, (size_t)b->lk[r] * sizeof(float));
            }
        }
        return SR_OK;
    }
    const float *hl = b->logits;
    if ((st = record_end(k, g, st))) return st;
    if (!k->host_visible) { /* a device: one copy (it waits for the queue), then the rows */
        /* the host copy is made when first needed: the decoders of srkit ask for summaries */
        if (!b->hlog && !(b->hlog = sr_malloc((size_t)b->lrows * V * sizeof(float), "whisper logits (host)")))
            return SR_ERR_NOMEM;
        st = k->download(b->hlog, b->logits, (size_t)n * V * sizeof(float));
        hl = b->hlog;
    }
    for (int r = 0; r < n && !st; r++) {
        const float *row = hl + (size_t)r * V;
        if (b->ltop[r]) {
            sr_aed_top_of_row(row, V, b->lprobe[r], w->eot, b->ltop[r]);
            if (b->lk[r]) sr_aed_row_topk(row, V, b->lk[r], b->lid[r], b->llp[r]);
        } else if (k->host_visible) st = k->download(b->ldst[r], row, (size_t)V * sizeof(float));
        else memcpy(b->ldst[r], row, (size_t)V * sizeof(float));
    }
    return st;
}

/* One decoder pass over the active segments of every request (in groups that fit the
 * scratch), then their logits (in groups of lrows rows). */
/* The hidden rows staged since row `from` (their sources in lsrc) into lh, in one call. */
static sr_status aed_stage(wh_batch *b, int from, int ln)
{
    return ln > from ? b->w->k->copy_rows(ln - from, b->w->d, b->lsrc + from,
                                          b->lh + (size_t)from * b->w->d, b->w->d)
                     : SR_OK;
}

static sr_status aed_pass(wh_batch *b, aed_plan *pl, int count)
{
    const wh_model *w = b->w;
    int nq = 0;
    for (int i = 0; i < count; i++)
        if (pl[i].active) {
            aed_seq(&pl[i], b->tok + (size_t)nq * w->n_text_ctx, &b->dq[nq]);
            b->idx[nq++] = i;
        }
    int ln = 0, staged = 0; /* rows [staged, ln) have their source pointers only */
    sr_status st = SR_OK;
    /* A pass of one decoder group whose logits rows fit one flush (a step of the streams: one
     * row each, or a beam's) is recorded from its first op to the flush's copy to the host
     * (sr_kgraph_begin: one submission on a table that records, CUDA with SRKIT_CUDA_GRAPH=1);
     * nothing in between reads a result. Larger passes run op by op. */
    sr_kgraph *g = NULL;
    int drows = 0, lrows = 0;
    for (int q = 0; q < nq; q++) {
        const aed_plan *p = &pl[b->idx[q]];
        drows += b->dq[q].n - b->dq[q].c0;
        lrows += p->Lmax - p->L0 + 1;
    }
    if (nq && drows <= b->ds.rows && lrows <= b->lrows) {
        if ((st = sr_kgraph_begin(w->k, &b->g_dec))) return st;
        g = b->g_dec;
    }
    for (int g0 = 0, g1; g0 < nq && !st; g0 = g1) {
        int rows = 0;
        for (g1 = g0; g1 < nq && rows + (b->dq[g1].n - b->dq[g1].c0) <= b->ds.rows; g1++)
            rows += b->dq[g1].n - b->dq[g1].c0;
        if (g1 == g0) g1++; /* wh_decode reports a sequence larger than the scratch */
        st = wh_decode(w, &b->ds, b->dq + g0, g1 - g0, b->sk, b->sv, b->xk, b->xv);
        int off = 0;
        for (int q = g0; q < g1; q++) {
            aed_plan *p = &pl[b->idx[q]];
            wh_stream *s = p->s;
            wh_slot *sl = &s->slot[p->r->slot];
            if (st) {
                sl->win = -1;
                continue;
            }
            memcpy(sl->tok, b->dq[q].tok, (size_t)p->N * sizeof(int32_t));
            sl->n = p->N;
            sl->win = p->wj;
            sl->ver = s->ver;
            int closed = p->wj < s->n_win - 1;
            int hr = off + p->i_from - p->c0, nr = p->Lmax - p->L0 + 1;
            off += p->N - p->c0;
            for (int r = 0; r < nr && !st;) {
                int take = SR_MIN(nr - r, b->lrows - ln);
                for (int t = 0; t < take; t++) {
                    const sr_aed_req *rq = p->r;
                    int row = p->r0 + r + t, j = rq->from + row; /* the request's row, position */
                    b->lsrc[ln + t] = b->ds.h + (size_t)(hr + r + t) * w->d;
                    b->ldst[ln + t] = rq->top ? NULL : rq->out + (size_t)row * w->n_vocab;
                    b->ltop[ln + t] = rq->top ? rq->top + row : NULL;
                    b->lk[ln + t] = rq->top ? rq->top_k : 0;
                    b->lid[ln + t] = b->lk[ln + t] ? rq->top_id + (size_t)row * rq->top_k : NULL;
                    b->llp[ln + t] = b->lk[ln + t] ? rq->top_lp + (size_t)row * rq->top_k : NULL;
                    b->lprobe[ln + t] = j < rq->n ? rq->prefix[j] : -1;
                    b->lpos[ln + t] = p->L0 + r + t;
                    b->lclosed[ln + t] = (uint8_t)closed;
                }
                ln += take;
                r += take;
                if (ln == b->lrows) { /* full: stage the rows, their logits */
                    st = aed_stage(b, staged, ln);
                    if (!st) st = aed_flush(b, &ln, &g);
                    staged = 0;
                }
            }
        }
        /* the next group's pass overwrites ds.h: its rows go to lh first */
        if (!st) st = aed_stage(b, staged, ln);
        staged = ln;
    }
    if (!st) st = aed_flush(b, &ln, &g);
    st = record_end(w->k, &g, st);
    for (int q = 0; q < nq && st; q++) { /* recorded ops may not have run: no slot cache kept */
        const aed_plan *p = &pl[b->idx[q]];
        p->s->slot[p->r->slot].win = -1;
    }
    return st;
}

static sr_status wh_aed_logprobs_batch(const sr_aed_req *r, int count)
{
    if (count < 0 || (count && !r))
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs_batch: %d requests at %s", count,
                        r ? "r" : "NULL");
    if (!count) return SR_OK;
    const wh_stream *s0 = r[0].ctx;
    if (!s0) return sr_error(SR_ERR_ARG, "whisper aed_logprobs: request 0: ctx is NULL");
    wh_batch *b = s0->b;
    if (count > b->req_max)
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs_batch: %d requests, the batch context "
                        "holds %d streams of %d slots", count, b->max_streams, b->cfg.n_slots);
    aed_plan *pl = b->plan;
    for (int i = 0; i < count; i++) {
        wh_stream *s = r[i].ctx;
        if (!s || s->b != b)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs_batch: request %d: %s", i,
                            s ? "its stream is not of request 0's batch context" : "ctx is NULL");
        for (int j = 0; j < i; j++)
            if (r[j].ctx == s && r[j].slot == r[i].slot)
                return sr_error(SR_ERR_ARG, "whisper aed_logprobs_batch: requests %d and %d are "
                                "of the same stream and slot", j, i);
        sr_status st = aed_prepare(s, &r[i]);
        if (st) return count > 1 ? sr_error_prefix(st, "request %d", i) : st;
        memset(&pl[i], 0, sizeof pl[i]);
        pl[i].s = s;
        pl[i].r = &r[i];
        pl[i].j = r[i].from;
    }
    for (;;) { /* each round: every request's next segment (windows in order, as solo) */
        int na = 0;
        for (int i = 0; i < count; i++) {
            sr_status st = aed_next(&pl[i]);
            if (st) return count > 1 ? sr_error_prefix(st, "request %d", i) : st;
            na += pl[i].active;
        }
        if (!na) return SR_OK;
        sr_status st = aed_pass(b, pl, count);
        if (st) return sr_error_prefix(st, "whisper aed_logprobs");
    }
}

static sr_status wh_aed_logprobs(void *ctx, int slot, const int32_t *prefix, int n, int from,
                                 float *out)
{
    sr_aed_req r = {.ctx = ctx, .slot = slot, .prefix = prefix, .n = n, .from = from, .out = out};
    return wh_aed_logprobs_batch(&r, 1);
}

/* No-speech probability of the window that position n of prefix falls in: one decoder position
 * (SOT alone: causal attention makes it independent of the rest of the prompt, as openai's
 * logits at sot_index are) over that window's cross K/V, softmax of the raw logits, probability
 * of the no_speech token. Its own one-row K/V keeps the slot caches untouched; the value is
 * cached per (window, audio version). */
/* No-speech probabilities of `count` requests of distinct streams of one batch: each planned
 * (window of its last position, the cached value when that window's audio is unchanged), the
 * SOT position of every window still to compute in one decoder pass (batch scratch, the
 * streams' no-speech pools) and one logits gemm, then each row's softmax at the no-speech
 * token. */
static sr_status wh_aed_no_speech_batch(const sr_aed_ns_req *r, int count)
{
    if (count <= 0) return SR_OK;
    if (!r) return sr_error(SR_ERR_ARG, "whisper aed_no_speech: requests are NULL");
    wh_stream *s0 = r[0].ctx;
    if (!s0) return sr_error(SR_ERR_ARG, "whisper aed_no_speech: request 0: ctx is NULL");
    wh_batch *b = s0->b;
    const wh_model *w = s0->w;
    if (count > b->max_streams)
        return sr_error(SR_ERR_ARG, "whisper aed_no_speech: %d requests, the batch holds %d streams",
                        count, b->max_streams);
    int nq = 0;
    for (int i = 0; i < count; i++) {
        wh_stream *s = r[i].ctx;
        const int32_t *prefix = r[i].prefix;
        int n = r[i].n;
        if (!s || s->b != b)
            return sr_error(SR_ERR_ARG, "whisper aed_no_speech: request %d: %s", i,
                            s ? "a stream of another batch" : "ctx is NULL");
        for (int j = 0; j < i; j++)
            if (r[j].ctx == s)
                return sr_error(SR_ERR_ARG, "whisper aed_no_speech: requests %d and %d are the same stream", j, i);
        if (n < 0 || (n && !prefix) || !r[i].start || !r[i].p)
            return sr_error(SR_ERR_ARG, "whisper aed_no_speech: n %d with prefix %s, start %s, p %s",
                            n, prefix ? "set" : "NULL", r[i].start ? "set" : "NULL", r[i].p ? "set" : "NULL");
        int win = 0, st0 = 0;
        for (int j = 0; j < n; j++) {
            if (prefix[j] < 0 || prefix[j] >= w->n_vocab)
                return sr_error(SR_ERR_ARG, "whisper aed_no_speech: prefix[%d] = %d outside the "
                                "vocabulary (%d)", j, (int)prefix[j], w->n_vocab);
            if (prefix[j] == w->brk) {
                win++;
                st0 = j + 1;
            }
        }
        *r[i].start = st0;
        *r[i].p = 0.0f;
        if (s->n_win == 0 || win < s->win_first) continue; /* no audio of it held */
        if (win >= s->n_win)
            return sr_error(SR_ERR_ARG, "whisper aed_no_speech: prefix[%d] starts window %d, the "
                            "audio has %d window(s)", st0 - 1, win, s->n_win);
        if (s->ns_win == win && s->ns_ver == s->ver) {
            *r[i].p = s->ns_p;
            continue;
        }
        int hw = win - s->win_first;
        b->dq[nq] = (wh_dseq){.tok = w->prompt, .c0 = 0, .n = 1, .sslot = s->bslot,
                              .xslot = s->bslot * b->win_cap + hw, .enc_len = s->win_len[hw]};
        b->idx[nq] = i;
        s->ns_win = win; /* set with its value below */
        nq++;
    }
    if (!nq) return SR_OK;
    /* one row per sequence: the decoder scratch holds max(n_text_ctx, 4 max_streams) rows and
     * the logits buffer 4 max_streams */
    sr_status st = wh_decode(w, &b->ds, b->dq, nq, b->ns_k, b->ns_v, b->xk, b->xv);
    if (!st) st = wh_logits(w, b->ds.h, nq, b->logits);
    /* the softmax where the logits are: each row's log-softmax, its no-speech entry gathered,
     * one float a stream to the host (exp there) */
    const sr_kernels *k = w->k;
    if (!st) st = k->logsoftmax(nq, w->n_vocab, b->logits, w->n_vocab, b->logits, w->n_vocab);
    for (int q = 0; q < nq; q++) b->gsrc[q] = b->logits + (size_t)q * w->n_vocab + w->no_speech;
    float *got = b->sum;
    if (!st) st = k->copy_rows(nq, 1, b->gsrc, got, 1);
    if (!st) st = k->download(b->hsum, got, (size_t)nq * sizeof(float));
    if (st) {
        for (int q = 0; q < nq; q++) ((wh_stream *)r[b->idx[q]].ctx)->ns_win = -1;
        return sr_error_prefix(st, "whisper aed_no_speech");
    }
    for (int q = 0; q < nq; q++) {
        wh_stream *s = r[b->idx[q]].ctx;
        s->ns_p = (float)exp((double)((const float *)b->hsum)[q]);
        s->ns_ver = s->ver;
        *r[b->idx[q]].p = s->ns_p;
    }
    return SR_OK;
}

static sr_status wh_aed_no_speech(void *ctx, const int32_t *prefix, int n, int *start, float *p)
{
    sr_aed_ns_req r = {.ctx = ctx, .prefix = prefix, .n = n, .start = start, .p = p};
    return wh_aed_no_speech_batch(&r, 1);
}

/* ---- encoding ---- */

/* Add the positional embedding of positions p0.. to rows x[0, n). */
static sr_status add_positions(const wh_model *w, float *x, int n, int p0)
{
    return w->k->add(n, w->d, w->enc_pos + (size_t)p0 * w->d, w->d, 1.0f, x, w->d);
}

/* Cross K/V pools of the batch with `cap` window slots per stream (offline streams that end
 * with more windows grow it; the held windows of every stream are copied over). */
static sr_status batch_windows(wh_batch *b, int cap)
{
    if (cap <= b->win_cap) return SR_OK;
    const wh_model *w = b->w;
    const sr_kernels *k = w->k;
    sr_kpool *nk = NULL, *nv = NULL;
    int slots = b->max_streams * cap, tl = w->n_text_layer;
    sr_status st = sr_kpool_create(k, SR_F32, tl, slots, w->n_audio_ctx, w->d, &nk);
    if (!st) st = sr_kpool_create(k, SR_F32, tl, slots, w->n_audio_ctx, w->d, &nv);
    for (int l = 0; l < tl && !st && b->xk; l++)
        for (int i = 0; i < b->max_streams && !st; i++) {
            int M = b->win_cap * w->n_audio_ctx;
            st = k->copy2d(M, w->d, (const float *)b->xk->data + sr_kpool_at(b->xk, l, i * b->win_cap, 0),
                           w->d, (float *)nk->data + sr_kpool_at(nk, l, i * cap, 0), w->d);
            if (!st)
                st = k->copy2d(M, w->d,
                               (const float *)b->xv->data + sr_kpool_at(b->xv, l, i * b->win_cap, 0),
                               w->d, (float *)nv->data + sr_kpool_at(nv, l, i * cap, 0), w->d);
        }
    if (st) {
        sr_kpool_free(k, nk);
        sr_kpool_free(k, nv);
        return st;
    }
    sr_kpool_free(k, b->xk);
    sr_kpool_free(k, b->xv);
    b->xk = nk;
    b->xv = nv;
    b->win_cap = cap;
    return SR_OK;
}

/* Full non-causal encoder of one window of W samples (zero-padded already) into held window hw. */
static sr_status encode_window(wh_stream *s, const float *pcm, int hw)
{
    const wh_model *w = s->w;
    wh_batch *b = s->b;
    float *mel = NULL;
    int L = 0;
    sr_status st = sr_mel_compute(w->mel, pcm, (size_t)w->window_samples, &mel, &L);
    if (st) return st;
    if (L != 2 * w->n_audio_ctx) {
        free(mel);
        return sr_error(SR_ERR_FORMAT, "whisper: %d mel frames in a window, expected %d", L,
                        2 * w->n_audio_ctx);
    }
    /* the host's mel rows into table memory for the stem */
    size_t mb = (size_t)L * w->n_mels * sizeof(float);
    float *dmel = w->k->alloc(mb);
    if (!dmel) st = sr_error(SR_ERR_NOMEM, "whisper: %zu bytes of %s memory for a window's mel", mb,
                             w->k->name);
    if (!st) st = w->k->upload(dmel, mel, mb);
    if (!st) st = wh_stem(w, &b->es, dmel, L, b->x);
    w->k->free(dmel);
    free(mel);
    if (st) return st;
    wh_eseq q = {.n = w->n_audio_ctx, .p0 = 0, .slot = s->bslot};
    int xslot = s->bslot * b->win_cap + hw;
    if ((st = add_positions(w, b->x, w->n_audio_ctx, 0)) ||
        (st = wh_encode(w, &b->es, b->x, &q, 1, b->ek, b->ev, NULL)) ||
        (st = wh_cross_kv(w, &b->es, b->x, &q, &xslot, 1, b->xk, b->xv)))
        return st;
    s->win_len[hw] = w->n_audio_ctx;
    s->ver++;
    return SR_OK;
}

/* whisperrt front-end of one chunk: its log-mel frames in s->mel_new (the stem runs over every
 * stream at once, rt_stem). */
static sr_status rt_frontend(wh_stream *s, const float *pcm, size_t n, int final)
{
    const wh_model *w = s->w;
    int nm = 0, nf = 0, cap = s->b->mel_cap;
    s->mel_new_n = 0;
    if (sr_mel_stream_pending(s->ms, n) > cap)
        return sr_error(SR_ERR_ARG, "whisper: %zu samples in one chunk exceed the mel buffer", n);
    sr_status st = sr_mel_stream_feed(s->ms, pcm, n, s->mel_new, cap, &nm);
    if (!st && final)
        st = sr_mel_stream_finish(s->ms, s->mel_new + (size_t)nm * w->n_mels, cap - nm, &nf);
    if (st) return st;
    s->mel_new_n = nm + nf;
    return SR_OK;
}

/* The streaming stem of `count` whisperrt streams at once (their chunks' mel frames), the new
 * frames to each stream's pending ring: one stem feed, one kv_write. */
static sr_status rt_stem(wh_batch *b, wh_stream *const *ss, const int *final, int count)
{
    const wh_model *w = b->w;
    for (int i = 0; i < count; i++) {
        b->rt_stem[i] = &ss[i]->stem;
        b->rt_mel[i] = ss[i]->mel_new;
        b->rt_n[i] = ss[i]->mel_new_n;
    }
    sr_status st = wh_stem_feed(w, &b->es, &b->stem, b->rt_stem, b->rt_mel, b->rt_n, final, count,
                                b->xnew, b->rt_nout);
    if (st) return st;
    /* stream i's nx new frames are its stem frames n_out - nx .. (the encoder scratch's kbatch
     * arrays are free until rt_blocks) */
    wh_scratch *es = &b->es;
    int ns = 0, rows = 0;
    es->row0[0] = 0;
    for (int i = 0; i < count; i++) {
        wh_stream *s = ss[i];
        int nx = b->rt_nout[i];
        if (s->stem.n_out - s->pend_done > b->pend_cap)
            return sr_error(SR_ERR_ARG, "whisper: pending encoder frames overflow (%lld > %d)",
                            (long long)(s->stem.n_out - s->pend_done), b->pend_cap);
        if (!nx) continue;
        es->slot[ns] = s->bslot;
        es->pos[ns] = s->stem.n_out - nx;
        rows += nx;
        es->row0[++ns] = rows;
    }
    if (!ns) return SR_OK;
    sr_kbatch kb = {.n_seq = ns, .row0 = es->row0, .slot = es->slot, .pos = es->pos};
    return w->k->kv_write(b->pend, 0, &kb, b->xnew, w->d);
}

/* whisperrt: the next block of every stream that has one (tau0 frames first, then tau; the
 * remainder at final) through one encoder pass and one cross K/V pass, repeated until none is
 * left. */
static sr_status rt_blocks(wh_batch *b, wh_stream *const *ss, const int *final, int count)
{
    const wh_model *w = b->w;
    size_t d = (size_t)w->d;
    for (;;) {
        int nq = 0, rows = 0;
        for (int i = 0; i < count; i++) {
            wh_stream *s = ss[i];
            int need = s->n_blocks == 0 ? s->tau0 : s->tau;
            int pend_n = (int)(s->stem.n_out - s->pend_done);
            if (pend_n == 0 || (pend_n < need && !final[i])) continue;
            int bsz = pend_n < need ? pend_n : need;
            if (s->n_win == 0) {
                s->n_win = 1;
                s->win_first = 0;
                s->enc_len = 0;
            } else if (s->enc_len + bsz > w->n_audio_ctx) { /* context full: a new window */
                s->n_win++;
                s->win_first = s->n_win - 1;
                s->enc_len = 0;
            }
            if (rows + bsz > b->es.rows)
                return sr_error(SR_ERR_ARG, "whisper: %d encoder rows exceed the batch scratch "
                                "(%d)", rows + bsz, b->es.rows);
            /* its block's frames (pending ring) and their positional embeddings */
            for (int r = 0; r < bsz; r++) {
                b->es.prow[rows + r] = sr_kpool_row_f32(b->pend, 0, s->bslot, s->pend_done + r);
                b->es.cp[rows + r] = w->enc_pos + (size_t)(s->enc_len + r) * d;
            }
            b->eq[nq] = (wh_eseq){.n = bsz, .p0 = s->enc_len, .slot = s->bslot};
            b->exslot[nq] = s->bslot * b->win_cap;
            b->idx[nq++] = i;
            rows += bsz;
        }
        if (!nq) return SR_OK;
        /* the round's ops, recorded as one (record g_enc): nothing in them reads a result */
        sr_status st = sr_kgraph_begin(w->k, &b->g_enc);
        if (st) return st;
        /* x = frames + positions: two gathers and one add for every block */
        st = w->k->copy_rows(rows, w->d, b->es.prow, b->x, w->d);
        if (!st) st = w->k->copy_rows(rows, w->d, b->es.cp, b->es.h, w->d);
        if (!st) st = w->k->add(rows, w->d, b->es.h, w->d, 1.0f, b->x, w->d);
        if (!st) st = wh_encode(w, &b->es, b->x, b->eq, nq, b->ek, b->ev, NULL);
        if (!st) st = wh_cross_kv(w, &b->es, b->x, b->eq, b->exslot, nq, b->xk, b->xv);
        if ((st = sr_kgraph_end(w->k, b->g_enc, st))) return st;
        for (int q = 0; q < nq; q++) {
            wh_stream *s = ss[b->idx[q]];
            int bsz = b->eq[q].n;
            s->enc_len += bsz;
            s->win_len[0] = s->enc_len;
            s->n_blocks++;
            s->ver++;
            s->pend_done += bsz;
        }
    }
}

static sr_status grow_audio(wh_stream *s, size_t need)
{
    if (need <= s->audio_cap) return SR_OK;
    size_t cap = s->audio_cap ? s->audio_cap : 16000;
    while (cap < need) cap *= 2;
    float *a = realloc(s->audio, cap * sizeof(float));
    if (!a) return sr_error(SR_ERR_NOMEM, "whisper: out of memory buffering %zu samples", need);
    s->audio = a;
    s->audio_cap = cap;
    return SR_OK;
}

static sr_status process_offline(wh_stream *s, const float *pcm, size_t n, int final)
{
    size_t W = (size_t)s->w->window_samples;
    sr_status st = grow_audio(s, s->audio_n + n);
    if (st) return st;
    if (n) memcpy(s->audio + s->audio_n, pcm, n * sizeof(float));
    s->audio_n += n;
    if (!final || !s->audio_n) return SR_OK;
    int nw = (int)((s->audio_n + W - 1) / W);
    if ((st = grow_audio(s, (size_t)nw * W))) return st;
    memset(s->audio + s->audio_n, 0, ((size_t)nw * W - s->audio_n) * sizeof(float));
    if (nw > s->win_cap) { /* one cross K/V slot per window (all are encoded below) */
        int *l = realloc(s->win_len, (size_t)nw * sizeof(int));
        if (!l) return sr_error(SR_ERR_NOMEM, "whisper: out of memory for %d windows", nw);
        s->win_len = l;
        s->win_cap = nw;
    }
    if ((st = batch_windows(s->b, nw))) return st;
    for (int i = 0; i < nw; i++)
        if ((st = encode_window(s, s->audio + (size_t)i * W, i))) return st;
    s->win_first = 0;
    s->n_win = nw;
    return SR_OK;
}

static sr_status process_reencode(wh_stream *s, const float *pcm, size_t n)
{
    size_t W = (size_t)s->w->window_samples;
    if (!n) return SR_OK; /* nothing new: the last encoding stands */
    if (s->n_win == 0) {
        s->n_win = 1;
        s->win_first = 0;
    } else if (s->audio_n + n > W) { /* window full: it is final, a new one starts */
        s->n_win++;
        s->win_first = s->n_win - 1;
        s->audio_n = 0;
    }
    memcpy(s->audio + s->audio_n, pcm, n * sizeof(float));
    s->audio_n += n;
    memset(s->audio + s->audio_n, 0, (W - s->audio_n) * sizeof(float));
    return encode_window(s, s->audio, 0);
}

static int64_t wh_audio_ms(void *ctx) { return ((wh_stream *)ctx)->samples_in * 1000 / 16000; }

static sr_status wh_process_batch(void *batch, void *const *states, const float *const *pcm,
                                  const size_t *n, const int *final, int count)
{
    wh_batch *b = batch;
    if (!b || count < 0 || (count && (!states || !pcm || !n || !final)))
        return sr_error(SR_ERR_ARG, "whisper process_batch: batch, states, pcm, n or final is "
                        "NULL");
    if (count > b->max_streams)
        return sr_error(SR_ERR_ARG, "whisper process_batch: %d streams, the batch context "
                        "holds %d", count, b->max_streams);
    wh_stream *const *ss = (wh_stream *const *)states;
    for (int i = 0; i < count; i++) {
        if (!ss[i] || ss[i]->b != b)
            return sr_error(SR_ERR_ARG, "whisper process_batch: stream %d %s", i,
                            ss[i] ? "is not of this batch context" : "is NULL");
        if (n[i] && !pcm[i])
            return sr_error(SR_ERR_ARG, "whisper process_batch: stream %d: pcm is NULL", i);
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i])
                return sr_error(SR_ERR_ARG, "whisper process_batch: streams %d and %d are the "
                                "same", j, i);
    }
    sr_status st = SR_OK;
    for (int i = 0; i < count && !st; i++) {
        wh_stream *s = ss[i];
        s->samples_in += (int64_t)n[i];
        switch (s->strategy) {
        case WH_OFFLINE: st = process_offline(s, pcm[i], n[i], final[i]); break;
        case WH_REENCODE: st = process_reencode(s, pcm[i], n[i]); break;
        default: st = rt_frontend(s, pcm[i], n[i], final[i]); break;
        }
    }
    if (!st && b->cfg.strategy == WH_WHISPERRT) st = rt_stem(b, ss, final, count);
    if (!st && b->cfg.strategy == WH_WHISPERRT) st = rt_blocks(b, ss, final, count);
    return st;
}

static sr_status wh_process(void *state, const float *pcm, size_t n, int final)
{
    if (!state) return sr_error(SR_ERR_ARG, "whisper process: state is NULL");
    return wh_process_batch(((wh_stream *)state)->b, &state, &pcm, &n, &final, 1);
}

/* ---- stream lifecycle ---- */

/* Zero the stream's slots of every pool of its batch context. */
static sr_status clear_slots(wh_stream *s)
{
    wh_batch *b = s->b;
    const sr_kernels *k = s->w->k;
    int i = s->bslot;
    sr_status st = sr_kpool_clear(k, b->ek, i);
    if (!st) st = sr_kpool_clear(k, b->ev, i);
    if (!st) st = sr_kpool_clear(k, b->ns_k, i);
    if (!st) st = sr_kpool_clear(k, b->ns_v, i);
    for (int j = 0; j < b->win_cap && !st; j++) {
        st = sr_kpool_clear(k, b->xk, i * b->win_cap + j);
        if (!st) st = sr_kpool_clear(k, b->xv, i * b->win_cap + j);
    }
    for (int j = 0; j < b->cfg.n_slots && !st; j++) {
        st = sr_kpool_clear(k, b->sk, i * b->cfg.n_slots + j);
        if (!st) st = sr_kpool_clear(k, b->sv, i * b->cfg.n_slots + j);
    }
    return st;
}

static void wh_reset(void *state)
{
    wh_stream *s = state;
    if (s->ms) sr_mel_stream_reset(s->ms);
    wh_stem_stream_reset(&s->stem);
    s->pend_done = 0;
    s->mel_new_n = 0;
    s->n_blocks = 0;
    s->enc_len = 0;
    s->win_first = s->n_win = 0;
    s->ver = 0;
    s->audio_n = 0;
    s->samples_in = 0;
    s->ns_win = -1;
    for (int i = 0; i < s->n_slots; i++) {
        s->slot[i].n = 0;
        s->slot[i].win = -1;
    }
    (void)clear_slots(s); /* the bookkeeping above already invalidates every cached row */
}

static void wh_stream_close(void *state)
{
    wh_stream *s = state;
    if (!s) return;
    if (s->b && s->b->owner[s->bslot] == s) s->b->owner[s->bslot] = NULL;
    sr_mel_stream_close(s->ms);
    free(s->mel_new);
    free(s->win_len);
    free(s->audio);
    for (int i = 0; i < WH_MAX_SLOTS; i++) {
        free(s->slot[i].tok);
        free(s->slot[i].pwin);
        free(s->slot[i].ploc);
    }
    free(s);
}

static size_t wh_state_bytes(const void *state)
{
    const wh_stream *s = state;
    const wh_model *w = s->w;
    size_t f = sizeof(float);
    size_t b = sizeof *s;
    if (s->mel_new) b += (size_t)s->b->mel_cap * w->n_mels * f;
    b += (size_t)s->win_cap * sizeof(int);
    b += s->audio_cap * f;
    b += (size_t)s->n_slots * (size_t)w->n_text_ctx * sizeof(int32_t);
    for (int i = 0; i < s->n_slots; i++) b += 2 * (size_t)s->slot[i].pcap * sizeof(int);
    return b;
}

static sr_status wh_stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch,
                                int slot, void **state, sr_chunking *ck, sr_scorer *sc)
{
    const wh_model *w = m->impl;
    wh_batch *b = batch;
    if (!b) return sr_error(SR_ERR_ARG, "whisper: stream_open needs a batch context");
    if (!state || !ck || !sc)
        return sr_error(SR_ERR_ARG, "whisper stream_open: state, ck or sc is NULL");
    wh_cfg c;
    sr_status st = check_cfg(w, cfg, &c);
    if (st) return st;
    if (b->w != w)
        return sr_error(SR_ERR_ARG, "whisper stream_open: the batch context is of another model");
    if (c.strategy != b->cfg.strategy || c.kv_keep != b->cfg.kv_keep || c.tau != b->cfg.tau ||
        c.tau0 != b->cfg.tau0 || c.n_slots != b->cfg.n_slots)
        return sr_error(SR_ERR_ARG, "whisper stream_open: stream.%s differs from the batch "
                        "context's config",
                        c.strategy != b->cfg.strategy ? "strategy"
                        : c.kv_keep != b->cfg.kv_keep ? "decoder_kv_cache"
                        : c.n_slots != b->cfg.n_slots ? "beam"
                        : c.tau != b->cfg.tau         ? "chunk_ms"
                                                      : "first_chunk_ms");
    if (slot < 0 || slot >= b->max_streams)
        return sr_error(SR_ERR_ARG, "whisper stream_open: slot %d outside 0..%d of the batch "
                        "context", slot, b->max_streams - 1);
    if (b->owner[slot])
        return sr_error(SR_ERR_ARG, "whisper stream_open: slot %d of the batch context is in use",
                        slot);

    wh_stream *s = sr_calloc(1, sizeof *s, "whisper stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->b = b;
    s->bslot = slot;
    s->strategy = c.strategy;
    s->kv_keep = c.kv_keep;
    s->tau = c.tau;
    s->tau0 = c.tau0;
    s->n_slots = c.n_slots;
    s->win_cap = 1;
    size_t f = sizeof(float);
    st = SR_ERR_NOMEM;
    if (!(s->win_len = sr_calloc(1, sizeof(int), "whisper window lengths"))) goto fail;
    s->ns_win = -1;
    for (int i = 0; i < s->n_slots; i++) {
        wh_slot *sl = &s->slot[i];
        sl->pcap = 4 * w->text_cap;
        if (!(sl->tok = sr_malloc((size_t)w->n_text_ctx * sizeof(int32_t), "whisper slot tokens")) ||
            !(sl->pwin = sr_malloc((size_t)sl->pcap * sizeof(int), "whisper prefix windows")) ||
            !(sl->ploc = sr_malloc((size_t)sl->pcap * sizeof(int), "whisper prefix positions")))
            goto fail;
        sl->win = -1;
    }
    if (c.strategy == WH_WHISPERRT) {
        s->stem.slot = slot;
        if ((st = sr_mel_stream_open(w->mel, &s->ms))) goto fail;
        st = SR_ERR_NOMEM;
        if (!(s->mel_new = sr_malloc((size_t)b->mel_cap * w->n_mels * f, "whisper mel frames")))
            goto fail;
    } else if (c.strategy == WH_REENCODE) {
        if ((st = grow_audio(s, (size_t)w->window_samples))) goto fail;
    }
    if ((st = clear_slots(s))) goto fail;
    *ck = c.ck;
    memset(sc, 0, sizeof *sc);
    sc->kind = SR_SCORER_AED;
    sc->ctx = s;
    sc->vocab = w->n_vocab;
    sc->blank = -1;
    sc->eot = w->eot;
    sc->aed_max_slots = s->n_slots;
    /* per window at most text_cap tokens (+ the break); windows are unbounded in a stream, so
     * the cap on a whole hypothesis is the scorer's forced EOT rather than this number */
    sc->aed_max_len = 1 << 16;
    sc->aed_logprobs = wh_aed_logprobs;
    sc->aed_logprobs_batch = wh_aed_logprobs_batch;
    sc->aed_top = 1;
    sc->aed_top_k_max = b->kcap;
    sc->batch_max = b->req_max;
    sc->aed_batch_multi = 1; /* distinct slots of one stream plan independently (per-slot maps) */
    sc->aed_audio_ms = wh_audio_ms;
    sc->aed_no_speech = wh_aed_no_speech;
    sc->aed_no_speech_batch = wh_aed_no_speech_batch;
    b->owner[slot] = s;
    *state = s;
    return SR_OK;
fail:
    s->b = NULL; /* the slot was never taken */
    wh_stream_close(s);
    return st;
}

/* ---- batch contexts ---- */

static void wh_batch_close(void *batch)
{
    wh_batch *b = batch;
    if (!b) return;
    const sr_kernels *k = b->w->k;
    sr_kpool *pools[] = {b->ek, b->ev, b->xk, b->xv, b->sk, b->sv, b->ns_k, b->ns_v, b->pend};
    for (size_t i = 0; i < SR_ARRAY_LEN(pools); i++) sr_kpool_free(k, pools[i]);
    wh_stem_ctx_free(&b->stem, b->w);
    k->free(b->xnew);
    free(b->rt_stem);
    free(b->rt_mel);
    free(b->rt_n);
    free(b->rt_nout);
    wh_scratch_free(&b->es);
    wh_scratch_free(&b->ds);
    k->free(b->x);
    free(b->eq);
    free(b->exslot);
    k->free(b->lh);
    k->free(b->logits);
    free(b->hlog);
    sr_kgraph_free(k, b->g_dec);
    sr_kgraph_free(k, b->g_enc);
    free(b->ldst);
    free(b->lsrc);
    free(b->lpos);
    free(b->lclosed);
    free(b->ltop);
    free(b->lprobe);
    free(b->lk);
    free(b->lid);
    free(b->llp);
    free(b->gsrc);
    k->free(b->sum);
    free(b->hsum);
    free(b->tok);
    free(b->dq);
    free(b->plan);
    free(b->idx);
    free(b->owner);
    free(b);
}

static size_t wh_batch_bytes(const void *batch)
{
    const wh_batch *b = batch;
    const wh_model *w = b->w;
    size_t ms = (size_t)b->max_streams, d = (size_t)w->d, f = sizeof(float);
    size_t n = sizeof *b;
    const sr_kpool *pools[] = {b->ek, b->ev, b->xk, b->xv, b->sk, b->sv, b->ns_k, b->ns_v, b->pend};
    for (size_t i = 0; i < SR_ARRAY_LEN(pools); i++) n += pools[i] ? pools[i]->bytes : 0;
    if (b->pend) /* the whisperrt front-end */
        n += wh_stem_ctx_bytes(&b->stem, w) +
             ms * ((size_t)(b->mel_cap / 2 + 2) * d * f + 2 * sizeof(void *) + 2 * sizeof(int));
    n += wh_scratch_bytes(&b->es) + wh_scratch_bytes(&b->ds);
    n += (size_t)b->es.rows * d * f;
    n += ms * (sizeof(wh_eseq) + sizeof(int) + sizeof(void *)) +
         (size_t)b->req_max * (sizeof(int) + sizeof(wh_dseq) + sizeof(aed_plan) + (size_t)w->n_text_ctx * sizeof(int32_t));
    /* lh, logits, the host copy of the logits (once made), ldst, lsrc, lpos, lclosed, ltop,
     * lprobe, lk, lid, llp, gsrc, sum and hsum */
    n += (size_t)b->lrows * ((d + (b->hlog ? 2 : 1) * (size_t)w->n_vocab) * f + 2 * sizeof(float *) + sizeof(int) + 1 +
                             sizeof(sr_aed_top *) + sizeof(int32_t) + sizeof(int) + 2 * sizeof(void *) +
                             2 * sizeof(float *) + 2 * (2 * (size_t)b->kcap + 2) * sizeof(uint32_t));
    return n;
}

static sr_status wh_batch_open(const sr_model *m, const sr_stream_config *cfg, int max_streams,
                               void **batch)
{
    if (!m || !batch)
        return sr_error(SR_ERR_ARG, "whisper batch_open: %s is NULL", m ? "batch" : "model");
    const wh_model *w = m->impl;
    wh_cfg c;
    sr_status st = check_cfg(w, cfg, &c);
    if (st) return st;
    if (max_streams < 1)
        return sr_error(SR_ERR_ARG, "whisper batch_open: max_streams = %d; needs >= 1",
                        max_streams);
    wh_batch *b = sr_calloc(1, sizeof *b, "whisper batch context");
    if (!b) return SR_ERR_NOMEM;
    b->m = m;
    b->w = w;
    b->cfg = c;
    b->max_streams = max_streams;
    b->req_max = max_streams * c.n_slots;
    const sr_kernels *k = w->k;
    int tl = w->n_text_layer, al = w->n_audio_layer, ms = max_streams;
    size_t Q = (size_t)b->req_max;
    int erows = c.strategy == WH_WHISPERRT ? ms * SR_MAX(c.tau, c.tau0) : w->n_audio_ctx;
    b->lrows = ms * WH_BATCH_ROWS;
    b->kcap = (cfg->beam > 1 ? cfg->beam : 1) + 1;
    /* decoder rows: a round of requests (one per slot of every stream: a beam decoder's round)
     * in one pass while their new positions fit */
    int drows = SR_MAX(w->n_text_ctx, b->req_max * WH_BATCH_ROWS);
    size_t d = (size_t)w->d, f = sizeof(float), lr = (size_t)b->lrows;
    if ((st = sr_kpool_create(k, SR_F32, al, ms, w->n_audio_ctx, w->d, &b->ek)) ||
        (st = sr_kpool_create(k, SR_F32, al, ms, w->n_audio_ctx, w->d, &b->ev)) ||
        (st = batch_windows(b, 1)) ||
        (st = sr_kpool_create(k, SR_F32, tl, ms * c.n_slots, w->n_text_ctx, w->d, &b->sk)) ||
        (st = sr_kpool_create(k, SR_F32, tl, ms * c.n_slots, w->n_text_ctx, w->d, &b->sv)) ||
        (st = sr_kpool_create(k, SR_F32, tl, ms, 1, w->d, &b->ns_k)) ||
        (st = sr_kpool_create(k, SR_F32, tl, ms, 1, w->d, &b->ns_v)) ||
        (st = wh_scratch_init(&b->es, w, erows, w->n_audio_ctx)) ||
        (st = wh_scratch_init(&b->ds, w, drows, SR_MAX(w->n_text_ctx, w->n_audio_ctx))))
        goto fail;
    st = SR_ERR_NOMEM;
    if (!(b->x = k->alloc((size_t)erows * d * f)) ||
        !(b->eq = sr_malloc((size_t)ms * sizeof(wh_eseq), "whisper encoder sequences")) ||
        !(b->exslot = sr_malloc((size_t)ms * sizeof(int), "whisper encoder sequences")) ||
        !(b->lh = k->alloc(lr * d * f)) ||
        !(b->logits = k->alloc(lr * (size_t)w->n_vocab * f)) ||
        !(b->ldst = sr_malloc(lr * sizeof(float *), "whisper logits rows")) ||
        !(b->lsrc = sr_malloc(lr * sizeof(float *), "whisper logits rows")) ||
        !(b->lpos = sr_malloc(lr * sizeof(int), "whisper logits rows")) ||
        !(b->lclosed = sr_malloc(lr, "whisper logits rows")) ||
        !(b->ltop = sr_malloc(lr * sizeof(sr_aed_top *), "whisper logits rows")) ||
        !(b->lprobe = sr_malloc(lr * sizeof(int32_t), "whisper logits rows")) ||
        !(b->lk = sr_malloc(lr * sizeof(int), "whisper logits rows")) ||
        !(b->lid = sr_malloc(lr * sizeof(int32_t *), "whisper logits rows")) ||
        !(b->llp = sr_malloc(lr * sizeof(float *), "whisper logits rows")) ||
        !(b->gsrc = sr_malloc(2 * lr * sizeof(float *), "whisper logits rows")) ||
        !(b->sum = k->alloc((2 * (size_t)b->kcap + 2) * lr * sizeof(uint32_t))) ||
        !(b->hsum = sr_malloc((2 * (size_t)b->kcap + 2) * lr * sizeof(uint32_t), "whisper row summaries")) ||
        !(b->tok = sr_malloc(Q * w->n_text_ctx * sizeof(int32_t), "whisper decoder tokens")) ||
        !(b->dq = sr_malloc(Q * sizeof(wh_dseq), "whisper decoder sequences")) ||
        !(b->plan = sr_malloc(Q * sizeof(aed_plan), "whisper scorer requests")) ||
        !(b->idx = sr_malloc(Q * sizeof(int), "whisper batch index")) ||
        !(b->owner = sr_calloc((size_t)ms, sizeof(void *), "whisper batch slots")))
        goto fail;
    if (c.strategy == WH_WHISPERRT) { /* the streaming front-end of every stream */
        size_t max_chunk = (size_t)SR_MAX(c.tau0 * 320 + WH_LOOKAHEAD, c.tau * 320);
        b->mel_cap = (int)((max_chunk + 400) / 160) + 8;
        b->pend_cap = c.tau0 + b->mel_cap / 2 + 8;
        size_t S = (size_t)ms;
        if ((st = wh_stem_ctx_init(&b->stem, w, ms, b->mel_cap)) ||
            (st = sr_kpool_create(k, SR_F32, 1, ms, b->pend_cap, w->d, &b->pend)))
            goto fail;
        st = SR_ERR_NOMEM;
        if (!(b->xnew = k->alloc(S * (size_t)(b->mel_cap / 2 + 2) * d * f)) ||
            !(b->rt_stem = sr_malloc(S * sizeof *b->rt_stem, "whisper stem streams")) ||
            !(b->rt_mel = sr_malloc(S * sizeof *b->rt_mel, "whisper stem streams")) ||
            !(b->rt_n = sr_malloc(S * sizeof *b->rt_n, "whisper stem streams")) ||
            !(b->rt_nout = sr_malloc(S * sizeof *b->rt_nout, "whisper stem streams")))
            goto fail;
    }
    *batch = b;
    return SR_OK;
fail:
    wh_batch_close(b);
    return st;
}

/* Provenance the converter records and the backend does not read: LoRA pairs merged into a
 * Hugging Face model (scripts/convert_whisper.py --lora). */
static const char *const wh_config_info[] = {"lora_merged", NULL};

const sr_model_ops sr_whisper_ops = {
    .name = "whisper",
    .description = "OpenAI Whisper encoder-decoder; strategies whisperrt (causal block encoder "
                   "with K/V caches), reencode, offline",
    .default_decoder = NULL, /* per model file: wh_defaults */
    .device_ready = 1, /* every per-chunk access through the table (checked on cpu-guard) */
    .defaults = wh_defaults,
    .load = wh_model_load,
    .unload = wh_model_unload,
    .config_info = wh_config_info,
    .batch_open = wh_batch_open,
    .batch_close = wh_batch_close,
    .batch_bytes = wh_batch_bytes,
    .stream_open = wh_stream_open,
    .process = wh_process,
    .process_batch = wh_process_batch,
    .reset = wh_reset,
    .stream_close = wh_stream_close,
    .state_bytes = wh_state_bytes,
};
