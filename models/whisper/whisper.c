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
 */
#include "whisper.h"

#include <math.h>
#include <string.h>

static const char *const strategy_names[] = {"offline", "whisperrt", "reencode"};

static const char *strategy_at(size_t i)
{
    return i < SR_ARRAY_LEN(strategy_names) ? strategy_names[i] : NULL;
}

/* Cross-attention K/V pools with one slot per held window (win_cap = n). */
static sr_status cross_pools(wh_stream *s, int n)
{
    const wh_model *w = s->w;
    sr_status st = sr_kpool_create(w->k, SR_F32, w->n_text_layer, n, w->n_audio_ctx, w->d, &s->xk);
    if (!st) st = sr_kpool_create(w->k, SR_F32, w->n_text_layer, n, w->n_audio_ctx, w->d, &s->xv);
    if (!st) s->win_cap = n;
    return st;
}

/* ---- rows of log-probabilities ---- */

static void one_hot(float *row, int V, int t)
{
    for (int v = 0; v < V; v++) row[v] = -INFINITY;
    row[t] = 0.0f;
}

/* Logit rules at window-local text position L, then log-softmax in place (k->logsoftmax). */
static sr_status apply_rules(const wh_model *w, float *row, int L, int closed)
{
    int V = w->n_vocab;
    for (int v = 0; v < V; v++)
        if (w->suppress[v] || (L == 0 && w->suppress_begin[v])) row[v] = -INFINITY;
    if (closed) { /* an older window ends with brk where the newest would end with EOT */
        row[w->brk] = row[w->eot];
        row[w->eot] = -INFINITY;
    }
    return w->k->logsoftmax(1, V, row, V, row, V);
}

/* Decoder rows for window wj, local text positions L0..Lmax, from window text txt[0..Lmax). */
static sr_status window_rows(wh_stream *s, int slot, int wj, const int32_t *txt, int L0, int Lmax,
                             float *out)
{
    const wh_model *w = s->w;
    int P = w->prompt_len, N = P + Lmax;
    memcpy(s->tok, w->prompt, (size_t)P * sizeof(int32_t));
    memcpy(s->tok + P, txt, (size_t)Lmax * sizeof(int32_t));
    int i_from = P - 1 + L0; /* the input whose output predicts local position L0 */
    wh_slot *sl = &s->slot[slot];
    int common = 0;
    if (sl->win == wj && (sl->ver == s->ver || s->kv_keep))
        while (common < sl->n && common < N && sl->tok[common] == s->tok[common]) common++;
    int c0 = common < i_from ? common : i_from;
    int hw = wj - s->win_first;
    sr_status st = wh_decode(w, &s->ds, s->tok, c0, N, s->sk, s->sv, slot, s->xk, s->xv, hw,
                             s->win_len[hw]);
    if (st) {
        sl->win = -1;
        return st;
    }
    memcpy(sl->tok, s->tok, (size_t)N * sizeof(int32_t));
    sl->n = N;
    sl->win = wj;
    sl->ver = s->ver;
    int rows = Lmax - L0 + 1;
    if ((st = wh_logits(w, s->ds.h + (size_t)(i_from - c0) * w->d, rows, out))) return st;
    int closed = wj < s->n_win - 1;
    for (int r = 0; r < rows && !st; r++)
        st = apply_rules(w, out + (size_t)r * w->n_vocab, L0 + r, closed);
    return st;
}

static sr_status wh_aed_logprobs(void *ctx, int slot, const int32_t *prefix, int n, int from,
                                 float *out)
{
    wh_stream *s = ctx;
    const wh_model *w = s->w;
    int V = w->n_vocab;
    if (slot < 0 || slot >= s->n_slots)
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: slot %d outside 0..%d", slot,
                        s->n_slots - 1);
    if (n < 0 || from < 0 || from > n)
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: from %d, n %d: need 0 <= from <= n",
                        from, n);
    if ((n && !prefix) || !out)
        return sr_error(SR_ERR_ARG, "whisper aed_logprobs: %s is NULL", out ? "prefix" : "out");
    if (n + 1 > s->pcap) {
        int cap = 2 * (n + 1);
        int *a = realloc(s->pwin, (size_t)cap * sizeof(int)), *b = NULL;
        if (a) s->pwin = a;
        if (a) b = realloc(s->ploc, (size_t)cap * sizeof(int));
        if (!a || !b)
            return sr_error(SR_ERR_NOMEM, "whisper aed_logprobs: out of memory for a %d-token "
                            "prefix", n);
        s->ploc = b;
        s->pcap = cap;
    }
    int win = 0, loc = 0;
    for (int j = 0; j <= n; j++) {
        s->pwin[j] = win;
        s->ploc[j] = loc;
        if (j == n) break;
        if (prefix[j] < 0 || prefix[j] >= V)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs: prefix[%d] = %d outside the "
                            "vocabulary (%d)", j, (int)prefix[j], V);
        if (prefix[j] == w->brk) {
            win++;
            loc = 0;
        } else {
            loc++;
        }
    }
    for (int j = from; j <= n;) {
        int wj = s->pwin[j];
        float *row = out + (size_t)(j - from) * V;
        if (s->n_win == 0 || wj < s->win_first) { /* no audio yet, or a finished window */
            one_hot(row, V, j < n ? prefix[j] : (s->n_win == 0 ? w->eot : w->brk));
            j++;
            continue;
        }
        if (wj >= s->n_win)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs: prefix[%d] starts window %d, the "
                            "audio has %d window(s)", j - 1, wj, s->n_win);
        int jb = j;
        while (jb < n && s->pwin[jb + 1] == wj) jb++;
        int L0 = s->ploc[j], Lend = s->ploc[jb];
        if (Lend > w->text_cap)
            return sr_error(SR_ERR_ARG, "whisper aed_logprobs: prefix holds %d text tokens in "
                            "window %d, the cap is %d (aed_max_len per window)", Lend, wj,
                            w->text_cap);
        int Lmax = Lend < w->text_cap ? Lend : w->text_cap - 1;
        if (L0 <= Lmax) {
            sr_status st = window_rows(s, slot, wj, prefix + (j - L0), L0, Lmax, row);
            if (st) return st;
        }
        if (Lend == w->text_cap)
            one_hot(out + (size_t)(jb - from) * V, V, wj < s->n_win - 1 ? w->brk : w->eot);
        j = jb + 1;
    }
    return SR_OK;
}

/* No-speech probability of the window that position n of prefix falls in: one decoder position
 * (SOT alone: causal attention makes it independent of the rest of the prompt, as openai's
 * logits at sot_index are) over that window's cross K/V, softmax of the raw logits, probability
 * of the no_speech token. Its own one-row K/V keeps the slot caches untouched; the value is
 * cached per (window, audio version). */
static sr_status wh_aed_no_speech(void *ctx, const int32_t *prefix, int n, int *start, float *p)
{
    wh_stream *s = ctx;
    const wh_model *w = s->w;
    if (n < 0 || (n && !prefix) || !start || !p)
        return sr_error(SR_ERR_ARG, "whisper aed_no_speech: n %d with prefix %s, start %s, p %s",
                        n, prefix ? "set" : "NULL", start ? "set" : "NULL", p ? "set" : "NULL");
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
    *start = st0;
    *p = 0.0f;
    if (s->n_win == 0 || win < s->win_first) return SR_OK; /* no audio of it held */
    if (win >= s->n_win)
        return sr_error(SR_ERR_ARG, "whisper aed_no_speech: prefix[%d] starts window %d, the "
                        "audio has %d window(s)", st0 - 1, win, s->n_win);
    if (s->ns_win == win && s->ns_ver == s->ver) {
        *p = s->ns_p;
        return SR_OK;
    }
    int hw = win - s->win_first;
    sr_status st = wh_decode(w, &s->ds, w->prompt, 0, 1, s->ns_k, s->ns_v, 0, s->xk, s->xv, hw,
                             s->win_len[hw]);
    if (!st) st = wh_logits(w, s->ds.h, 1, s->ns_row);
    if (st) return sr_error_prefix(st, "whisper aed_no_speech");
    const float *r = s->ns_row;
    float mx = r[0];
    for (int v = 1; v < w->n_vocab; v++) mx = r[v] > mx ? r[v] : mx;
    double sum = 0;
    for (int v = 0; v < w->n_vocab; v++) sum += exp((double)r[v] - mx);
    s->ns_p = (float)(exp((double)r[w->no_speech] - mx) / sum);
    s->ns_win = win;
    s->ns_ver = s->ver;
    *p = s->ns_p;
    return SR_OK;
}

/* ---- encoding ---- */

/* Add the positional embedding of positions p0.. to rows x[0, n). */
static sr_status add_positions(const wh_model *w, float *x, int n, int p0)
{
    return w->k->add(n, w->d, w->enc_pos + (size_t)p0 * w->d, w->d, 1.0f, x, w->d);
}

/* Full non-causal encoder of one window of W samples (zero-padded already) into held window hw. */
static sr_status encode_window(wh_stream *s, const float *pcm, int hw)
{
    const wh_model *w = s->w;
    float *mel = NULL;
    int L = 0;
    sr_status st = sr_mel_compute(w->mel, pcm, (size_t)w->window_samples, &mel, &L);
    if (st) return st;
    if (L != 2 * w->n_audio_ctx) {
        free(mel);
        return sr_error(SR_ERR_FORMAT, "whisper: %d mel frames in a window, expected %d", L,
                        2 * w->n_audio_ctx);
    }
    st = wh_stem(w, &s->es, mel, L, s->x);
    free(mel);
    if (st) return st;
    if ((st = add_positions(w, s->x, w->n_audio_ctx, 0)) ||
        (st = wh_encode(w, &s->es, s->x, w->n_audio_ctx, 0, s->ek, s->ev, 0, NULL)))
        return st;
    st = wh_cross_kv(w, &s->es, s->x, w->n_audio_ctx, 0, s->xk, s->xv, hw);
    if (st) return st;
    s->win_len[hw] = w->n_audio_ctx;
    s->ver++;
    return SR_OK;
}

/* whisperrt: encode the first b pending stem frames as one block. */
static sr_status encode_block(wh_stream *s, int b)
{
    const wh_model *w = s->w;
    if (s->n_win == 0) {
        s->n_win = 1;
        s->win_first = 0;
        s->enc_len = 0;
    } else if (s->enc_len + b > w->n_audio_ctx) { /* context full: a new window */
        s->n_win++;
        s->win_first = s->n_win - 1;
        s->enc_len = 0;
    }
    sr_status st = w->k->copy2d(b, w->d, s->pend, w->d, s->x, w->d);
    if (!st) st = add_positions(w, s->x, b, s->enc_len);
    if (!st) st = wh_encode(w, &s->es, s->x, b, s->enc_len, s->ek, s->ev, 0, NULL);
    if (!st) st = wh_cross_kv(w, &s->es, s->x, b, s->enc_len, s->xk, s->xv, 0);
    if (st) return st;
    s->enc_len += b;
    s->win_len[0] = s->enc_len;
    s->n_blocks++;
    s->ver++;
    s->pend_n -= b;
    memmove(s->pend, s->pend + (size_t)b * w->d, (size_t)s->pend_n * w->d * sizeof(float));
    return SR_OK;
}

static sr_status process_rt(wh_stream *s, const float *pcm, size_t n, int final)
{
    const wh_model *w = s->w;
    int nm = 0, nf = 0, nx = 0;
    if (sr_mel_stream_pending(s->ms, n) > s->mel_cap)
        return sr_error(SR_ERR_ARG, "whisper: %zu samples in one chunk exceed the mel buffer", n);
    sr_status st = sr_mel_stream_feed(s->ms, pcm, n, s->mel_new, s->mel_cap, &nm);
    if (!st && final)
        st = sr_mel_stream_finish(s->ms, s->mel_new + (size_t)nm * w->n_mels, s->mel_cap - nm, &nf);
    if (st) return st;
    nm += nf;
    if (s->pend_n + nm / 2 + 2 > s->pend_cap)
        return sr_error(SR_ERR_ARG, "whisper: pending encoder frames overflow");
    st = wh_stem_stream_feed(&s->stem, w, &s->es, s->mel_new, nm, final,
                             s->pend + (size_t)s->pend_n * w->d, &nx);
    if (st) return st;
    s->pend_n += nx;
    while (s->pend_n > 0) {
        int need = s->n_blocks == 0 ? s->tau0 : s->tau;
        if (s->pend_n < need && !final) break;
        if ((st = encode_block(s, s->pend_n < need ? s->pend_n : need))) return st;
    }
    return SR_OK;
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
    const wh_model *w = s->w;
    size_t W = (size_t)w->window_samples;
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
        sr_kpool_free(w->k, s->xk);
        sr_kpool_free(w->k, s->xv);
        s->xk = s->xv = NULL;
        s->win_cap = 0;
        if ((st = cross_pools(s, nw))) return st;
    }
    for (int i = 0; i < nw; i++)
        if ((st = encode_window(s, s->audio + (size_t)i * W, i))) return st;
    s->win_first = 0;
    s->n_win = nw;
    return SR_OK;
}

static sr_status process_reencode(wh_stream *s, const float *pcm, size_t n, int final)
{
    const wh_model *w = s->w;
    size_t W = (size_t)w->window_samples;
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

static sr_status wh_process(void *state, const float *pcm, size_t n, int final)
{
    wh_stream *s = state;
    s->samples_in += (int64_t)n;
    switch (s->strategy) {
    case WH_OFFLINE: return process_offline(s, pcm, n, final);
    case WH_REENCODE: return process_reencode(s, pcm, n, final);
    default: return process_rt(s, pcm, n, final);
    }
}

/* ---- stream lifecycle ---- */

static void wh_reset(void *state)
{
    wh_stream *s = state;
    if (s->ms) sr_mel_stream_reset(s->ms);
    wh_stem_stream_reset(&s->stem);
    s->pend_n = 0;
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
}

static void wh_stream_close(void *state)
{
    wh_stream *s = state;
    if (!s) return;
    sr_mel_stream_close(s->ms);
    free(s->mel_new);
    wh_stem_stream_free(&s->stem);
    free(s->pend);
    const sr_kernels *k = s->w->k;
    sr_kpool_free(k, s->ek);
    sr_kpool_free(k, s->ev);
    free(s->x);
    sr_kpool_free(k, s->xk);
    sr_kpool_free(k, s->xv);
    free(s->win_len);
    free(s->audio);
    for (int i = 0; i < WH_MAX_SLOTS; i++) free(s->slot[i].tok);
    sr_kpool_free(k, s->sk);
    sr_kpool_free(k, s->sv);
    wh_scratch_free(&s->es);
    wh_scratch_free(&s->ds);
    free(s->tok);
    free(s->pwin);
    free(s->ploc);
    sr_kpool_free(k, s->ns_k);
    sr_kpool_free(k, s->ns_v);
    free(s->ns_row);
    free(s);
}

static size_t wh_state_bytes(const void *state)
{
    const wh_stream *s = state;
    const wh_model *w = s->w;
    size_t d = (size_t)w->d, f = sizeof(float);
    size_t b = sizeof *s;
    b += (size_t)s->mel_cap * w->n_mels * f;
    if (s->stem.mel) b += (size_t)s->stem.cap * (w->n_mels + d) * f;
    b += (size_t)s->pend_cap * d * f;
    const sr_kpool *pools[] = {s->ek, s->ev, s->xk, s->xv, s->sk, s->sv, s->ns_k, s->ns_v};
    for (size_t i = 0; i < SR_ARRAY_LEN(pools); i++) b += pools[i] ? pools[i]->bytes : 0;
    b += (size_t)s->es.rows * d * f;
    b += (size_t)s->win_cap * sizeof(int);
    b += s->audio_cap * f;
    b += (size_t)s->n_slots * (size_t)w->n_text_ctx * sizeof(int32_t);
    b += wh_scratch_bytes(&s->es) + wh_scratch_bytes(&s->ds);
    b += (size_t)w->n_text_ctx * sizeof(int32_t) + 2 * (size_t)s->pcap * sizeof(int);
    b += (size_t)w->n_vocab * f; /* no-speech row */
    return b;
}

static sr_status wh_stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch,
                                int slot, void **state,
                                sr_chunking *ck, sr_scorer *sc)
{
    (void)batch;
    (void)slot;
    const wh_model *w = m->impl;
    int strategy = WH_WHISPERRT;
    if (cfg->strategy) {
        size_t i = 0;
        while (strategy_at(i) && strcmp(strategy_at(i), cfg->strategy)) i++;
        if (!strategy_at(i)) {
            sr_error_unknown("whisper strategy", cfg->strategy, strategy_at);
            return sr_error_prefix(SR_ERR_ARG, "stream.strategy");
        }
        strategy = (int)i;
    }
    int chunk_ms = cfg->chunk_ms ? cfg->chunk_ms : 300;
    int first_ms = cfg->first_chunk_ms ? cfg->first_chunk_ms : 2 * chunk_ms;
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

    wh_stream *s = sr_calloc(1, sizeof *s, "whisper stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->strategy = strategy;
    s->kv_keep = cfg->decoder_kv_cache;
    s->tau = chunk_ms / 20;
    s->tau0 = first_ms / 20;
    size_t d = (size_t)w->d, f = sizeof(float);
    int rows = strategy == WH_WHISPERRT ? SR_MAX(s->tau, s->tau0) : w->n_audio_ctx;
    sr_status st = wh_scratch_init(&s->es, w, rows, w->n_audio_ctx);
    if (!st) st = wh_scratch_init(&s->ds, w, w->n_text_ctx, SR_MAX(w->n_text_ctx, w->n_audio_ctx));
    if (st) goto fail;
    st = SR_ERR_NOMEM;
    s->n_slots = cfg->beam > 1 ? 2 * cfg->beam : 2;
    s->pcap = 4 * w->text_cap;
    const sr_kernels *k = w->k;
    int tl = w->n_text_layer;
    if ((st = sr_kpool_create(k, SR_F32, w->n_audio_layer, 1, w->n_audio_ctx, w->d, &s->ek)) ||
        (st = sr_kpool_create(k, SR_F32, w->n_audio_layer, 1, w->n_audio_ctx, w->d, &s->ev)) ||
        (st = cross_pools(s, 1)) ||
        (st = sr_kpool_create(k, SR_F32, tl, s->n_slots, w->n_text_ctx, w->d, &s->sk)) ||
        (st = sr_kpool_create(k, SR_F32, tl, s->n_slots, w->n_text_ctx, w->d, &s->sv)) ||
        (st = sr_kpool_create(k, SR_F32, tl, 1, 1, w->d, &s->ns_k)) ||
        (st = sr_kpool_create(k, SR_F32, tl, 1, 1, w->d, &s->ns_v)))
        goto fail;
    st = SR_ERR_NOMEM;
    if (!(s->x = sr_malloc((size_t)rows * d * f, "whisper encoder rows")) ||
        !(s->win_len = sr_calloc(1, sizeof(int), "whisper window lengths")) ||
        !(s->tok = sr_malloc((size_t)w->n_text_ctx * sizeof(int32_t), "whisper decoder tokens")) ||
        !(s->pwin = sr_malloc((size_t)s->pcap * sizeof(int), "whisper prefix windows")) ||
        !(s->ploc = sr_malloc((size_t)s->pcap * sizeof(int), "whisper prefix positions")) ||
        !(s->ns_row = sr_malloc((size_t)w->n_vocab * f, "whisper no-speech logits")))
        goto fail;
    s->ns_win = -1;
    for (int i = 0; i < s->n_slots; i++) {
        if (!(s->slot[i].tok = sr_malloc((size_t)w->n_text_ctx * sizeof(int32_t), "whisper slot tokens")))
            goto fail;
        s->slot[i].win = -1;
    }
    if (strategy == WH_WHISPERRT) {
        size_t max_chunk = (size_t)SR_MAX(s->tau0 * 320 + WH_LOOKAHEAD, s->tau * 320);
        s->mel_cap = (int)((max_chunk + 400) / 160) + 8;
        s->pend_cap = s->tau0 + s->mel_cap / 2 + 8;
        if ((st = sr_mel_stream_open(w->mel, &s->ms)) ||
            (st = wh_stem_stream_init(&s->stem, w, s->mel_cap)))
            goto fail;
        st = SR_ERR_NOMEM;
        if (!(s->mel_new = sr_malloc((size_t)s->mel_cap * w->n_mels * f, "whisper mel frames")) ||
            !(s->pend = sr_malloc((size_t)s->pend_cap * d * f, "whisper pending frames")))
            goto fail;
        ck->first_chunk = (size_t)s->tau0 * 320 + WH_LOOKAHEAD;
        ck->chunk = (size_t)s->tau * 320;
    } else if (strategy == WH_REENCODE) {
        if ((st = grow_audio(s, (size_t)w->window_samples))) goto fail;
        ck->first_chunk = (size_t)s->tau0 * 320;
        ck->chunk = (size_t)s->tau * 320;
    } else {
        ck->first_chunk = ck->chunk = (size_t)w->window_samples;
    }
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
    sc->aed_audio_ms = wh_audio_ms;
    sc->aed_no_speech = wh_aed_no_speech;
    *state = s;
    return SR_OK;
fail:
    wh_stream_close(s);
    return st;
}

const sr_model_ops sr_whisper_ops = {
    .name = "whisper",
    .description = "OpenAI Whisper encoder-decoder; strategies whisperrt (causal block encoder "
                   "with K/V caches), reencode, offline",
    .default_decoder = "stable_greedy",
    .load = wh_model_load,
    .unload = wh_model_unload,
    .stream_open = wh_stream_open,
    .process = wh_process,
    .reset = wh_reset,
    .stream_close = wh_stream_close,
    .state_bytes = wh_state_bytes,
};
