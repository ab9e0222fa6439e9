/*
 * voxtral.c — the voxtral_realtime backend's streams (arch "voxtral_realtime", docs/voxtral.md):
 * audio in 80 ms steps through the streaming log-mel, the causal conv stem with carried
 * state, the encoder with per-layer ring K/V caches, the adapter, and a SYNC scorer that runs
 * one decoder step per audio embedding.
 *
 * Batch context (vx_batch, batch_open): every stream lives in one, on a slot. The context owns
 * the caches of all its streams as kernel-table pools with one slot per stream (stem states,
 * encoder and decoder K/V rings in the config's cache dtype), the scratch of one forward call
 * over all of them, and what depends only on the config (prompt, adaptive scales). A stream
 * keeps only its private state: mel front-end and pending mel frames, the ring of audio
 * embeddings the decoder has not consumed, positions and counters. process_batch runs the
 * streams' mel front-ends on the host, then rounds of ONE stem + encoder + adapter call over
 * every stream holding a whole step of mel frames (each stream's rows at its own positions in
 * its own slot); sync_step_batch runs the decoder steps of several streams as ONE decoder
 * pass. Every op is row-independent (kernels/kernels.h), and how a stream's work is cut into
 * calls depends only on that stream, so each stream computes bit for bit what it computes
 * alone. process and sync_step are the batched forms with one stream. The encoder round (stem
 * to the embedding ring's write) and the decoder step's pass are each marked as one recording
 * (sr_kgraph_begin / end, records g_enc / g_dec): a table that records (CUDA with
 * SRKIT_CUDA_GRAPH=1) submits each as one graph; nothing between begin and end reads a result.
 *
 * Signal: n_left_pad_tokens * 1280 zero samples, the audio, and at finish zeros up to a whole
 * 80 ms step plus n_right_pad_tokens * 1280 zeros. Mel frame f (centre f * 160) is complete
 * when 200 samples past its centre exist, so the engine's first chunk is 1280 + 40 samples and
 * every later chunk 1280: each chunk completes exactly 8 mel frames (the seed's 40-sample
 * look-ahead), i.e. 4 encoder frames and 1 audio embedding a[p]. Where several steps are
 * complete at once (the left padding, the right padding at finish) up to enc_steps of them go
 * through the stem, encoder and adapter in one call: rows are independent in every op, so the
 * result is bit for bit that of one step at a time, with fewer passes over the weights.
 *
 * Stem (transformers' causal convs, zero left padding): conv1 (k 3, s 1) output t reads mel
 * t-2..t; conv2 (k 3, s 2) output j reads conv1 outputs 2j-1..2j+1. The stream's slot carries
 * the last two mel frames and the last conv1 output (pools c1, c2), so 8 mel frames always
 * give 4 outputs.
 *
 * Shared prefix (contexts of several slots): the first n_left - 1 steps of every stream (zeros
 * to 40 samples before the audio) and its decoder positions 0 .. n_left - 2 compute the same in
 * every stream; batch_open computes them once (prefix_make) and each opening stream copies
 * them into its slot (prefix_load) and starts past them.
 *
 * Decoder: the prompt x = [BOS] + [PAD] * (n_left + delay) (L tokens) fills positions 0..L-2
 * with embed(x[p]) + a[p], in the same call as the first sync step (position L - 1) when the
 * cache ring holds L rows; sync step t runs position L - 1 + t on embed(token) + a[p], token =
 * x[L-1] at t = 0 and the previous argmax after. Positions without an audio embedding (flush
 * steps after finish; prompt positions when the padded audio is shorter than the prompt) run
 * on embed(token) alone. Once a flush step has chosen EOS the remaining ones (up to
 * flush_tokens in all) return the streaming pad without computing.
 */
#include "voxtral.h"

#include <math.h>
#include <string.h>

static sr_status load(sr_model *m, sr_h5 *f) { return vx_load(m, f); }

/* The stream config of a context and of each of its streams (one rule for both): strategy
 * "realtime", 80 ms chunks, a delay in the model's range, f32 or bf16 caches. SR_ERR_ARG
 * naming the field. */
static sr_status check_config(const vx_model *w, const sr_stream_config *cfg, int *delay,
                              sr_dtype *kv)
{
    if (!cfg) return sr_error(SR_ERR_ARG, "voxtral: stream config missing");
    if (cfg->strategy && strcmp(cfg->strategy, "realtime"))
        return sr_error(SR_ERR_ARG, "stream.strategy: \"%s\" unknown for voxtral_realtime "
                        "(known: realtime)", cfg->strategy);
    if (cfg->chunk_ms && cfg->chunk_ms != 80)
        return sr_error(SR_ERR_ARG, "stream.chunk_ms: %d, voxtral_realtime steps 80 ms at a time",
                        cfg->chunk_ms);
    if (cfg->first_chunk_ms && cfg->first_chunk_ms != 80)
        return sr_error(SR_ERR_ARG, "stream.first_chunk_ms: %d, voxtral_realtime steps 80 ms at "
                        "a time", cfg->first_chunk_ms);
    *delay = cfg->delay_tokens ? cfg->delay_tokens : w->delay_def;
    if (*delay < w->delay_min || *delay > w->delay_max)
        return sr_error(SR_ERR_ARG, "stream.delay_tokens: %d outside the model's supported range "
                        "%d..%d (80 ms each)", *delay, w->delay_min, w->delay_max);
    *kv = SR_F32;
    if (cfg->cache_dtype && strcmp(cfg->cache_dtype, "f32")) {
        if (strcmp(cfg->cache_dtype, "bf16"))
            return sr_error(SR_ERR_ARG, "stream.cache_dtype: \"%s\" unknown for voxtral_realtime "
                            "(known: f32, bf16)", cfg->cache_dtype);
        *kv = SR_BF16;
    }
    return SR_OK;
}

static int vx_frames(void *ctx)
{
    const vx_stream *s = ctx;
    int64_t audio = s->n_emb - (s->b->prompt_len - 1);
    if (audio < 0) audio = 0;
    return (int)(audio + s->flush_avail);
}

/* Zero a stream's slot in every pool of its context (opening, reset). The conv states are read
 * as left context; the K/V rows are cleared so that a reused slot holds nothing of the stream
 * before (a query reads only positions written since, either way). */
static sr_status slot_clear(vx_batch *B, int slot)
{
    sr_kpool *pools[] = {B->c1, B->c2, B->ek, B->ev, B->dk, B->dv};
    sr_status st = SR_OK;
    for (size_t i = 0; i < SR_ARRAY_LEN(pools) && !st; i++)
        st = sr_kpool_clear(B->m->k, pools[i], slot);
    return st;
}

/* ---- decoder ------------------------------------------------------------------------------- */

/* One decoder pass over the sequences B->seq[0 .. n_seq) of the kbatch in B->row0 / slot / pos
 * with the tokens B->ids[0 .. rows): each row's input is embed(token) + a[p] where the stream's
 * audio embedding a[p] exists (the prompt and audio steps; flush steps have none). logits != 0:
 * sequence i's last row's logits go to row i of B->logits. Each stream's dec_pos advances.
 * g != NULL: the pass's ops are recorded in *g and submitted as one (sr_kgraph_begin). */
static sr_status decode_pass(vx_batch *B, int n_seq, int logits, sr_kgraph **g)
{
    const vx_model *w = B->w;
    const sr_kernels *k = B->m->k;
    int d = w->dim;
    float *x = B->s.x;
    sr_kbatch kb = {.n_seq = n_seq, .row0 = B->row0, .slot = B->slot, .pos = B->pos};
    int n = B->row0[n_seq];
    for (int i = 0; i < n_seq && B->pos_cap; i++) /* never past what the ring was sized for */
        if (B->pos[i] + (B->row0[i + 1] - B->row0[i]) > B->pos_cap)
            return sr_error(SR_ERR_ARG, "voxtral: stream.max_seconds %d: decoder position %lld is "
                            "past the %lld its caches hold", B->max_seconds,
                            (long long)(B->pos[i] + (B->row0[i + 1] - B->row0[i]) - 1),
                            (long long)B->pos_cap);
    sr_status st = g ? sr_kgraph_begin(k, g) : SR_OK;
    if (st) return st;
    st = k->gather(w->embed, B->ids, n, x, d);
    /* every row's audio embedding (its position's ring row, or zeros), gathered in one call
     * and added in one */
    for (int i = 0; i < n_seq; i++) {
        const vx_stream *s = B->seq[i];
        for (int r = B->row0[i]; r < B->row0[i + 1]; r++) {
            int64_t p = B->pos[i] + (r - B->row0[i]);
            B->s.rp[r] = p < s->n_emb ? sr_kpool_row_f32(B->emb, 0, s->slot, p) : B->zero;
        }
    }
    if (!st) st = k->copy_rows(n, d, B->s.rp, B->s.h, d);
    if (!st) st = k->add(n, d, B->s.h, d, 1.0f, x, d);
    if (!st) st = vx_decode(w, &B->s, B->dk, B->dv, &kb, B->ada, 0, x, logits ? B->logits : NULL,
                            w->vocab);
    if (g) st = sr_kgraph_end(k, *g, st);
    if (st) return st;
    for (int i = 0; i < n_seq; i++) B->seq[i]->dec_pos = B->pos[i] + (B->row0[i + 1] - B->row0[i]);
    return SR_OK;
}

/* Sequence i of the call being built in B (row0[0 .. i] set): stream s's n rows from position
 * p0 in its slot. */
static void add_seq(vx_batch *B, int i, vx_stream *s, int64_t p0, int n)
{
    B->seq[i] = s;
    B->slot[i] = s->slot;
    B->pos[i] = p0;
    B->row0[i + 1] = B->row0[i] + n;
}

/* Steps of `count` distinct streams of one context as one decoder pass (plus one prefill pass
 * for streams at step 0 whose prompt does not fit the cache ring in one call). */
static sr_status sync_step_batch(const sr_sync_req *r, int count)
{
    if (!r || count < 1)
        return sr_error(SR_ERR_ARG, "voxtral sync_step_batch: %d requests%s", count,
                        r ? "" : " (NULL)");
    vx_batch *B = NULL;
    for (int i = 0; i < count; i++) {
        vx_stream *s = r[i].ctx;
        if (!s || (!r[i].logits && !r[i].token))
            return sr_error(SR_ERR_ARG, "voxtral sync_step: request %d: %s is NULL", i,
                            s ? "logits (and token)" : "ctx");
        if (!B) B = s->b;
        if (s->b != B)
            return sr_error(SR_ERR_ARG, "voxtral sync_step_batch: request %d's stream is in "
                            "another batch context than request 0's", i);
        for (int j = 0; j < i; j++)
            if (r[j].ctx == s)
                return sr_error(SR_ERR_ARG, "voxtral sync_step_batch: requests %d and %d are "
                                "the same stream", j, i);
        int t = r[i].t;
        if (t != s->n_steps || t >= vx_frames(s))
            return sr_error(SR_ERR_ARG, "voxtral sync_step: step %d requested, next is %lld of "
                            "%d available", t, (long long)s->n_steps, vx_frames(s));
        if (r[i].prev < -1 || r[i].prev >= s->w->vocab)
            return sr_error(SR_ERR_ARG, "voxtral sync_step: prev token %d outside the "
                            "vocabulary (%d)", (int)r[i].prev, s->w->vocab);
    }
    const vx_model *w = B->w;
    const sr_kernels *k = B->m->k;
    int L = B->prompt_len, V = w->vocab, n_act = 0, n_pre = 0;
    /* requests that compute (their indices in B->aux); ended streams answer the pad */
    for (int i = 0; i < count; i++) {
        vx_stream *s = r[i].ctx;
        int64_t p = L - 1 + (int64_t)r[i].t;
        if (p >= s->n_emb && p - s->n_emb >= 1 && r[i].prev == w->eos) s->stopped = 1;
        if (s->stopped) { /* text ended: nothing more to compute */
            if (r[i].logits) {
                for (int v = 0; v < V; v++) r[i].logits[v] = -INFINITY;
                r[i].logits[w->pad] = 0.0f;
            } else {
                *r[i].token = w->pad;
            }
            continue;
        }
        B->aux[n_act++] = i;
        n_pre += r[i].t == 0 && L > B->dk->rows;
    }
    sr_status st = SR_OK;
    if (n_pre) { /* the prompt's positions 0 .. L-2 first where all L rows do not fit at once */
        int n = 0;
        B->row0[0] = 0;
        for (int a = 0; a < n_act; a++) {
            const sr_sync_req *q = &r[B->aux[a]];
            vx_stream *s = q->ctx;
            if (q->t != 0 || L - 1 - s->pre <= 0) continue;
            add_seq(B, n, s, s->pre, L - 1 - s->pre);
            memcpy(B->ids + B->row0[n], B->prompt + s->pre, (size_t)(L - 1 - s->pre) * sizeof(int32_t));
            n++;
        }
        if (n) st = decode_pass(B, n, 0, NULL);
    }
    if (!st && n_act) {
        /* step t at position L - 1 + t: the whole prompt at t = 0 when it fits, else one row */
        B->row0[0] = 0;
        for (int a = 0; a < n_act; a++) {
            const sr_sync_req *q = &r[B->aux[a]];
            int32_t *ids = B->ids + B->row0[a];
            if (q->t == 0 && L <= B->dk->rows) { /* from the shared prefix's end, or 0 */
                int p0 = ((vx_stream *)q->ctx)->pre;
                add_seq(B, a, q->ctx, p0, L - p0);
                memcpy(ids, B->prompt + p0, (size_t)(L - p0) * sizeof(int32_t));
            } else {
                add_seq(B, a, q->ctx, L - 1 + (int64_t)q->t, 1);
                ids[0] = q->t == 0 ? B->prompt[L - 1] : q->prev < 0 ? w->pad : q->prev;
            }
        }
        st = decode_pass(B, n_act, 1, &B->g_dec);
        int rows = 0, toks = 0;
        for (int a = 0; a < n_act; a++) {
            rows += r[B->aux[a]].logits != NULL;
            toks += r[B->aux[a]].logits == NULL;
        }
        if (!st && toks) { /* argmax where the logits are: one id per row comes down */
            st = k->topk(n_act, V, 1, B->logits, V, B->tok, NULL);
            if (!st) st = k->download(B->htok, B->tok, (size_t)n_act * sizeof(int32_t));
            for (int a = 0; a < n_act && !st; a++)
                if (!r[B->aux[a]].logits) *r[B->aux[a]].token = B->htok[a];
        }
        if (rows && B->hlogits) { /* a device: one copy, then the rows */
            if (!st) st = k->download(B->hlogits, B->logits, (size_t)n_act * V * sizeof(float));
            for (int a = 0; a < n_act && !st; a++)
                if (r[B->aux[a]].logits)
                    memcpy(r[B->aux[a]].logits, B->hlogits + (size_t)a * V, (size_t)V * sizeof(float));
        } else if (rows) {
            for (int a = 0; a < n_act && !st; a++)
                if (r[B->aux[a]].logits)
                    st = k->download(r[B->aux[a]].logits, B->logits + (size_t)a * V, (size_t)V * sizeof(float));
        }
    }
    if (st) return st;
    for (int i = 0; i < count; i++) ((vx_stream *)r[i].ctx)->n_steps++;
    return SR_OK;
}

static sr_status sync_step(void *ctx, int t, int32_t prev, float *logits)
{
    sr_sync_req r = {.ctx = ctx, .t = t, .prev = prev, .logits = logits};
    return sync_step_batch(&r, 1);
}

/* ---- encoder ------------------------------------------------------------------------------- */

static int has_input(const vx_stream *s) { return s->lead || s->in_n || s->tail || s->finishing; }

/* The next piece of a stream's input into its pending mel frames: up to enc_steps steps of
 * samples of the current part (lead zeros, pcm, tail zeros), or, once those are fed and the
 * stream is finishing, the mel front-end's flush. */
static sr_status feed_piece(vx_stream *s)
{
    static const float zeros[VX_ENC_STEPS_MAX * VX_STEP_SAMPLES];
    int C = s->w->n_mels, room = s->mel_cap - s->mel_n, got = 0;
    float *dst = s->mel + (size_t)s->mel_n * C;
    sr_status st;
    if (s->lead || s->in_n || s->tail) {
        size_t *left = s->lead ? &s->lead : s->in_n ? &s->in_n : &s->tail;
        size_t most = (size_t)s->b->enc_steps * VX_STEP_SAMPLES, take = SR_MIN(*left, most);
        if (sr_mel_stream_pending(s->ms, take) > room)
            return sr_error(SR_ERR_ARG, "voxtral: mel buffer of %d frames too small", s->mel_cap);
        st = sr_mel_stream_feed(s->ms, left == &s->in_n ? s->in : zeros, take, dst, room, &got);
        if (left == &s->in_n) s->in += take;
        *left -= take;
    } else {
        if (sr_mel_stream_pending(s->ms, 0) > room)
            return sr_error(SR_ERR_ARG, "voxtral: mel buffer of %d frames too small", s->mel_cap);
        st = sr_mel_stream_finish(s->ms, dst, room, &got);
        s->finishing = 0;
    }
    if (st) return st;
    if (s->cap_mel)
        for (int i = 0; i < got && s->cap_mel_n < s->cap_mel_max; i++, s->cap_mel_n++)
            memcpy(s->cap_mel + (size_t)s->cap_mel_n * C, dst + (size_t)i * C,
                   (size_t)C * sizeof(float));
    if (s->skip_mel) { /* frames of the shared prefix, already in the stream's caches */
        int drop = SR_MIN(s->skip_mel, got);
        memmove(dst, dst + (size_t)drop * C, (size_t)(got - drop) * C * sizeof(float));
        got -= drop;
        s->skip_mel -= drop;
    }
    s->mel_n += got;
    return SR_OK;
}

/* One encoder call over every stream of states[0 .. count) holding a whole step of mel frames:
 * up to enc_steps steps each (no more than its embedding ring has room for) through the stem,
 * the encoder and the adapter, each called once over all of them; each stream's embeddings go
 * to its ring and its mel frames are consumed. *ran = 0 when no stream had a step. */
static sr_status encode_round(vx_batch *B, void *const *states, int count, int *ran)
{
    const vx_model *w = B->w;
    const sr_kernels *k = B->m->k;
    vx_scratch *sc = &B->s;
    int C = w->n_mels, E = w->enc_dim, d = w->dim, n_seq = 0;
    sr_status st = SR_OK;
    B->row0[0] = 0;
    for (int i = 0; i < count; i++) {
        vx_stream *s = states[i];
        if (s->mel_n < VX_MEL_PER_STEP) continue;
        /* the decoder consumes a[p] at position p; an unconsumed ring entry must not be
         * overwritten */
        int64_t room = B->emb_cap - (s->n_emb - s->dec_pos);
        if (room <= 0)
            return sr_error(SR_ERR_ARG, "voxtral: %lld audio embeddings wait for the decoder "
                            "(ring of %d): sync_step is not being called",
                            (long long)(s->n_emb - s->dec_pos), B->emb_cap);
        int steps = SR_MIN(s->mel_n / VX_MEL_PER_STEP, B->enc_steps);
        steps = (int)SR_MIN((int64_t)steps, room);
        B->aux[n_seq] = steps;
        add_seq(B, n_seq, s, s->enc_pos, steps * VX_ENC_PER_STEP);
        /* 2 mel frames per encoder row: the sequence's frames start at mel row 2 row0 */
        memcpy(B->hmel + (size_t)2 * B->row0[n_seq] * C, s->mel,
               (size_t)steps * VX_MEL_PER_STEP * C * sizeof(float));
        n_seq++;
    }
    *ran = n_seq > 0;
    if (!n_seq) return SR_OK;
    int n = B->row0[n_seq], cap = 0;
    /* every sequence's mel frames in one copy (2 frames per encoder row) */
    if ((st = k->upload(sc->mel, B->hmel, (size_t)2 * n * C * sizeof(float)))) return st;
    /* stem, encoder, adapter and the rings' write recorded as one submission, unless a test
     * captures encoder rows (downloads in between) */
    for (int i = 0; i < n_seq; i++) cap |= B->seq[i]->cap_enc != NULL;
    if (!cap && (st = sr_kgraph_begin(k, &B->g_enc))) return st;
    sr_kbatch kb = {.n_seq = n_seq, .row0 = B->row0, .slot = B->slot, .pos = B->pos};
    if (!(st = vx_stem(w, sc, B->c1, B->c2, &kb, sc->mel, sc->x)))
        st = vx_encode(w, sc, B->ek, B->ev, &kb, sc->x);
    for (int i = 0; i < n_seq && !st; i++) {
        vx_stream *s = B->seq[i];
        int rows = B->row0[i + 1] - B->row0[i];
        s->enc_pos += rows;
        if (s->cap_enc) {
            int c = SR_MIN(rows, s->cap_enc_max - s->cap_enc_n);
            if ((st = k->download(s->cap_enc + (size_t)s->cap_enc_n * E,
                                  sc->x + (size_t)B->row0[i] * E, (size_t)c * E * sizeof(float))))
                break;
            s->cap_enc_n += c;
        }
    }
    if (!st) st = vx_adapter(w, sc, sc->x, n, sc->h);
    /* the audio embeddings (sequence i's steps rows at row row0[i] / 4) into each stream's
     * ring at positions n_emb.., one call */
    for (int i = 0; i < n_seq; i++) {
        B->erow0[i] = B->row0[i] / VX_ENC_PER_STEP;
        B->pos[i] = B->seq[i]->n_emb;
    }
    B->erow0[n_seq] = B->row0[n_seq] / VX_ENC_PER_STEP;
    sr_kbatch eb = {.n_seq = n_seq, .row0 = B->erow0, .slot = B->slot, .pos = B->pos};
    if (!st) st = k->kv_write(B->emb, 0, &eb, sc->h, d);
    if (!cap) st = sr_kgraph_end(k, B->g_enc, st);
    if (st) return st;
    for (int i = 0; i < n_seq; i++) {
        vx_stream *s = B->seq[i];
        int steps = B->aux[i];
        for (int j = 0; j < steps && s->cap_ada && s->cap_ada_n < s->cap_ada_max; j++)
            if ((st = k->download(s->cap_ada + (size_t)s->cap_ada_n++ * d,
                                  sr_kpool_row_f32(B->emb, 0, s->slot, s->n_emb + j), (size_t)d * sizeof(float))))
                return st;
        s->n_emb += steps;
        int used = steps * VX_MEL_PER_STEP;
        memmove(s->mel, s->mel + (size_t)used * C, (size_t)(s->mel_n - used) * C * sizeof(float));
        s->mel_n -= used;
    }
    return SR_OK;
}

/* ---- the shared prefix ------------------------------------------------------------------- */

/* Each cache a stream holds: its context pool, its prefix pool and the prefix's rows in it. */
typedef struct {
    sr_kpool **ctx, **pre;
    int rows;
} vx_prefix_pool;
enum { VX_PREFIX_POOLS = 7 };

static void prefix_pools(vx_batch *B, vx_prefix_pool p[VX_PREFIX_POOLS])
{
    const int P = B->pre, E = VX_ENC_PER_STEP * P;
    const vx_prefix_pool t[VX_PREFIX_POOLS] = {
        {&B->c1, &B->pc1, 2}, {&B->c2, &B->pc2, 1}, {&B->ek, &B->pek, E}, {&B->ev, &B->pev, E},
        {&B->emb, &B->pemb, P}, {&B->dk, &B->pdk, P}, {&B->dv, &B->pdv, P}};
    memcpy(p, t, sizeof t);
}

/* Computes the prefix (B->pre > 0 set by the caller) in slot 0 of the context, no stream open:
 * a stream of lead zeros through the same calls a stream makes (feed_piece, encode_round,
 * decode_pass), its rows then copied into the prefix pools and the slot cleared. The mel
 * frames of steps 0 .. pre - 1 need pre 80 ms steps and 40 samples of zeros; n_left >= pre + 1
 * steps of zeros lie before any audio. Encoder outputs and embeddings are kept on the host for
 * test captures. On failure the context keeps no prefix (pre = 0) and the error is returned. */
static sr_status prefix_make(vx_batch *B)
{
    const vx_model *w = B->w;
    const sr_kernels *k = B->m->k;
    const int P = B->pre, C = w->n_mels;
    vx_stream t = {.m = B->m, .w = w, .b = B, .slot = 0, .started = 1};
    t.mel_cap = (B->enc_steps + 2) * VX_MEL_PER_STEP;
    t.lead = (size_t)P * VX_STEP_SAMPLES + VX_LOOKAHEAD;
    t.cap_enc_max = VX_ENC_PER_STEP * P;
    t.cap_ada_max = P;
    sr_status st = SR_ERR_NOMEM;
    if (!(t.mel = sr_malloc((size_t)t.mel_cap * C * sizeof(float), "voxtral prefix mel")) ||
        !(t.cap_enc = B->pre_enc = sr_malloc((size_t)t.cap_enc_max * w->enc_dim * sizeof(float),
                                             "voxtral prefix encoder rows")) ||
        !(t.cap_ada = B->pre_ada = sr_malloc((size_t)P * w->dim * sizeof(float),
                                             "voxtral prefix embeddings")))
        goto out;
    if ((st = sr_mel_stream_open(w->mel, &t.ms))) goto out;
    void *states[1] = {&t};
    for (int ran = 1, more = 1; !st && (ran || more);) {
        if (t.mel_n < VX_MEL_PER_STEP && has_input(&t)) st = feed_piece(&t);
        more = has_input(&t);
        if (!st) st = encode_round(B, states, 1, &ran);
    }
    /* a front end that does not give exactly P steps from these zeros (another hop or
     * look-ahead than VX_LOOKAHEAD assumes): no prefix, every stream computes its own */
    int whole = t.n_emb == P && !t.mel_n; /* (the captures filled with the steps) */
    if (!st && !whole) {
        st = slot_clear(B, 0);
        B->pre = 0;
        goto out;
    }
    if (!st) { /* decoder positions 0 .. P - 1 */
        B->row0[0] = 0;
        add_seq(B, 0, &t, 0, P);
        memcpy(B->ids, B->prompt, (size_t)P * sizeof(int32_t));
        st = decode_pass(B, 1, 0, NULL);
    }
    vx_prefix_pool pp[VX_PREFIX_POOLS];
    prefix_pools(B, pp);
    for (int i = 0; i < VX_PREFIX_POOLS && !st; i++) {
        const sr_kpool *c = *pp[i].ctx;
        if (!(st = sr_kpool_create(k, c->dtype, c->layers, 1, pp[i].rows, c->width, pp[i].pre)))
            st = sr_kpool_copy_rows(k, *pp[i].pre, 0, c, 0, pp[i].rows);
        if (!st) B->bytes += (*pp[i].pre)->bytes;
    }
    if (!st) st = slot_clear(B, 0);
    if (!st)
        B->bytes += ((size_t)t.cap_enc_max * w->enc_dim + (size_t)P * w->dim) * sizeof(float);
out:
    sr_mel_stream_close(t.ms);
    free(t.mel);
    if (st || !B->pre) { /* batch_close frees what was made */
        B->pre = 0;
        free(B->pre_enc);
        free(B->pre_ada);
        B->pre_enc = B->pre_ada = NULL;
    }
    return st;
}

/* A stream opening (or reset) takes the prefix: its cleared slot's rows from the prefix pools,
 * its positions past them, its mel front-end told to drop the frames they came from (it still
 * reads every sample, so its state is the stream's own). Like the clearing, this is per stream
 * at open, not per step. Test captures get the prefix's rows at the first process call
 * (prefix_capture), as they are set after opening. */
static sr_status prefix_load(vx_stream *s)
{
    vx_batch *B = s->b;
    const int P = B->pre;
    vx_prefix_pool pp[VX_PREFIX_POOLS];
    prefix_pools(B, pp);
    sr_status st = SR_OK;
    for (int i = 0; i < VX_PREFIX_POOLS && !st; i++)
        st = sr_kpool_copy_rows(B->m->k, *pp[i].ctx, s->slot, *pp[i].pre, 0, pp[i].rows);
    if (st) return st;
    s->enc_pos = (int64_t)VX_ENC_PER_STEP * P;
    s->n_emb = s->dec_pos = P;
    s->pre = P;
    s->skip_mel = VX_MEL_PER_STEP * P;
    return SR_OK;
}

static void prefix_capture(vx_stream *s)
{
    const vx_batch *B = s->b;
    const vx_model *w = s->w;
    const int P = s->pre;
    if (s->cap_enc) {
        int c = SR_MIN(VX_ENC_PER_STEP * P, s->cap_enc_max - s->cap_enc_n);
        memcpy(s->cap_enc + (size_t)s->cap_enc_n * w->enc_dim, B->pre_enc, (size_t)c * w->enc_dim * sizeof(float));
        s->cap_enc_n += c;
    }
    if (s->cap_ada) {
        int c = SR_MIN(P, s->cap_ada_max - s->cap_ada_n);
        memcpy(s->cap_ada + (size_t)s->cap_ada_n * w->dim, B->pre_ada, (size_t)c * w->dim * sizeof(float));
        s->cap_ada_n += c;
    }
}

/* One chunk of each of `count` distinct streams of context `batch`: each stream's input (left
 * padding on its first chunk, its pcm, the right padding and the mel flush when final) goes
 * piece by piece through its mel front-end; rounds of encode_round run every whole step. A
 * stream feeds its next piece only when it holds less than a step, so its pieces and encoder
 * calls are the same whichever streams share the call. */
static sr_status process_batch(void *batch, void *const *states, const float *const *pcm,
                               const size_t *n, const int *final, int count)
{
    vx_batch *B = batch;
    if (!B || !states || !pcm || !n || !final || count < 1)
        return sr_error(SR_ERR_ARG, "voxtral process_batch: %s", count < 1 ? "no streams" :
                        "batch context, states, pcm, n or final is NULL");
    const vx_model *w = B->w;
    for (int i = 0; i < count; i++) {
        const vx_stream *s = states[i];
        if (!s || s->b != B)
            return sr_error(SR_ERR_ARG, "voxtral process_batch: stream %d is %s", i,
                            s ? "in another batch context" : "NULL");
        for (int j = 0; j < i; j++)
            if (states[j] == s)
                return sr_error(SR_ERR_ARG, "voxtral process_batch: streams %d and %d are the "
                                "same", j, i);
        if (s->final) return sr_error(SR_ERR_ARG, "voxtral: stream already flushed (reset it)");
        if (!pcm[i] && n[i])
            return sr_error(SR_ERR_ARG, "voxtral process: pcm is NULL with n = %zu", n[i]);
    }
    for (int i = 0; i < count; i++) {
        vx_stream *s = states[i];
        if (!s->started && s->pre) prefix_capture(s);
        s->lead = s->started ? 0 : (size_t)w->n_left * VX_STEP_SAMPLES;
        s->started = 1;
        s->in = pcm[i];
        s->in_n = n[i];
        s->samples += (int64_t)n[i];
        s->tail = 0;
        s->finishing = final[i] != 0;
        if (final[i]) {
            int64_t rem = s->samples % VX_STEP_SAMPLES;
            s->tail = (size_t)(rem ? VX_STEP_SAMPLES - rem : 0) + (size_t)w->n_right * VX_STEP_SAMPLES;
        }
    }
    sr_status st = SR_OK;
    for (int ran = 1, more = 1; !st && (ran || more);) {
        more = 0;
        for (int i = 0; i < count && !st; i++) {
            vx_stream *s = states[i];
            if (s->mel_n < VX_MEL_PER_STEP && has_input(s)) st = feed_piece(s);
            more |= has_input(s);
        }
        if (!st) st = encode_round(B, states, count, &ran);
    }
    for (int i = 0; i < count; i++) { /* no input is kept past the call */
        vx_stream *s = states[i];
        s->in = NULL;
        s->lead = s->in_n = s->tail = 0;
        s->finishing = 0;
        if (!st && final[i]) {
            s->mel_n = 0; /* the padded signal is whole steps: nothing is left over */
            s->final = 1;
            s->flush_avail = w->flush_tokens;
        }
    }
    return st;
}

static sr_status process(void *state, const float *pcm, size_t n, int final)
{
    vx_stream *s = state;
    void *states[1] = {state};
    const float *p[1] = {pcm};
    size_t nn[1] = {n};
    int f[1] = {final};
    return process_batch(s->b, states, p, nn, f, 1);
}

/* ---- batch context ------------------------------------------------------------------------- */

/* Frees the context: its streams are closed first (they point into it). */
static void batch_close(void *batch)
{
    vx_batch *B = batch;
    if (!B) return;
    const sr_kernels *k = B->m->k;
    sr_kpool *pools[] = {B->c1, B->c2, B->ek, B->ev, B->dk, B->dv, B->emb,
                         B->pc1, B->pc2, B->pek, B->pev, B->pemb, B->pdk, B->pdv};
    for (size_t i = 0; i < SR_ARRAY_LEN(pools); i++) sr_kpool_free(k, pools[i]);
    k->free(B->ada);
    k->free(B->zero);
    free(B->hmel);
    free(B->erow0);
    k->free(B->logits);
    free(B->hlogits);
    if (B->tok) k->free(B->tok);
    free(B->htok);
    vx_scratch_free(&B->s);
    free(B->prompt);
    free(B->ids);
    free(B->row0);
    free(B->slot);
    free(B->pos);
    free(B->aux);
    free(B->seq);
    free(B->owner);
    free(B->pre_enc);
    free(B->pre_ada);
    sr_kgraph_free(k, B->g_enc);
    sr_kgraph_free(k, B->g_dec);
    free(B);
}

/* A context of max_streams slots for streams of config cfg (checked by check_config, as each
 * stream's is): pools, scratch of max_streams streams' rows, prompt and adaptive scales. */
static sr_status batch_open(const sr_model *m, const sr_stream_config *cfg, int max_streams,
                            void **batch)
{
    if (!m || !batch) return sr_error(SR_ERR_ARG, "voxtral batch_open: model or batch is NULL");
    *batch = NULL;
    const vx_model *w = m->impl;
    const sr_kernels *k = m->k;
    int delay;
    sr_dtype kv;
    sr_status st = check_config(w, cfg, &delay, &kv);
    if (st) return st;
    if (max_streams < 1 || max_streams > 65536)
        return sr_error(SR_ERR_ARG, "voxtral batch_open: max_streams %d outside 1..65536",
                        max_streams);
    vx_batch *B = sr_calloc(1, sizeof *B, "voxtral batch context");
    if (!B) return SR_ERR_NOMEM;
    int S = max_streams;
    B->m = m;
    B->w = w;
    B->max_streams = S;
    B->delay = delay;
    B->kv = kv;
    B->prompt_len = 1 + w->n_left + delay;
    int L = B->prompt_len;
    /* encoder ring: a call of n rows needs window + n - 1 of them; enough for VX_ENC_STEPS_MAX
     * steps, or for as many as two windows hold when that is less (small windows), never under
     * one step (mini-4b: 781 rows where two windows, 1,500, held nothing more a call could use) */
    int er_rows = SR_MAX(SR_MIN(2 * w->enc_window, w->enc_window + VX_ENC_STEPS_MAX * VX_ENC_PER_STEP - 1),
                         w->enc_window + VX_ENC_PER_STEP - 1);
    B->enc_steps = SR_MIN(VX_ENC_STEPS_MAX, (er_rows - w->enc_window + 1) / VX_ENC_PER_STEP);
    /* decoder ring: a window (a call of n rows needs window + n - 1 rows); with
     * stream.max_seconds, the positions such a stream reaches when fewer: the left padding, its
     * 80 ms steps (one more for the partial last), the right padding, the flush steps and the
     * delay (a prompt longer than the padded audio), and 2 spare */
    int dr_win = w->window;
    B->max_seconds = cfg->max_seconds;
    if (cfg->max_seconds) {
        int64_t steps = ((int64_t)cfg->max_seconds * 16000 + 1279) / 1280 + 1;
        B->pos_cap = w->n_left + steps + w->n_right + w->flush_tokens + delay + 2;
        if (B->pos_cap < dr_win) dr_win = (int)B->pos_cap;
    }
    int dr_rows = dr_win + SR_MAX(L - 1, 1) - 1;
    /* one call's rows per stream: its encoder steps, or its prompt */
    int rows = SR_MAX(B->enc_steps * VX_ENC_PER_STEP, L);
    size_t s1 = (size_t)S + 1, all = (size_t)S * rows;
    st = SR_ERR_NOMEM;
    if (!(B->prompt = sr_malloc((size_t)L * sizeof(int32_t), "voxtral prompt")) ||
        !(B->ids = sr_malloc(all * sizeof(int32_t), "voxtral decoder tokens")) ||
        !(B->row0 = sr_calloc(s1, sizeof(int), "voxtral batch rows")) ||
        !(B->slot = sr_calloc((size_t)S, sizeof(int), "voxtral batch slots")) ||
        !(B->pos = sr_calloc((size_t)S, sizeof(int64_t), "voxtral batch positions")) ||
        !(B->aux = sr_calloc((size_t)S, sizeof(int), "voxtral batch steps")) ||
        !(B->seq = sr_calloc((size_t)S, sizeof *B->seq, "voxtral batch streams")) ||
        !(B->owner = sr_calloc((size_t)S, sizeof *B->owner, "voxtral batch slots")) ||
        !(B->hmel = sr_malloc(2 * all * w->n_mels * sizeof(float), "voxtral mel staging")) ||
        !(B->erow0 = sr_calloc(s1, sizeof(int), "voxtral batch rows")))
        goto fail;
    B->bytes = sizeof *B + ((size_t)L + all) * sizeof(int32_t) +
               (2 * s1 + 2 * (size_t)S) * sizeof(int) + (size_t)S * sizeof(int64_t) +
               2 * (size_t)S * sizeof(vx_stream *) + 2 * all * w->n_mels * sizeof(float);
    B->emb_cap = L + w->n_left + w->n_right + 4;
    if (!(B->ada = k->alloc((size_t)w->n_layers * w->dim * sizeof(float))) ||
        !(B->logits = k->alloc((size_t)S * w->vocab * sizeof(float))) ||
        !(B->zero = k->alloc((size_t)w->dim * sizeof(float))) ||
        !(B->tok = k->alloc((size_t)S * sizeof(int32_t))) ||
        !(B->htok = sr_malloc((size_t)S * sizeof(int32_t), "voxtral argmax ids"))) {
        st = sr_error(SR_ERR_NOMEM, "voxtral batch context: out of %s memory", k->name);
        goto fail;
    }
    k->zero(B->zero, (size_t)w->dim * sizeof(float));
    B->bytes += ((size_t)w->n_layers * w->dim + (size_t)S * w->vocab + w->dim) * sizeof(float) +
                2 * (size_t)S * sizeof(int32_t);
    /* a device's logits come down in one copy per pass (each copy waits for the queue) */
    if (!k->host_visible) {
        if (!(B->hlogits = sr_malloc((size_t)S * w->vocab * sizeof(float), "voxtral logits (host)"))) {
            st = SR_ERR_NOMEM;
            goto fail;
        }
        B->bytes += (size_t)S * w->vocab * sizeof(float);
    }
    if ((st = sr_kpool_create(k, SR_F32, 1, S, 2, w->n_mels, &B->c1)) ||
        (st = sr_kpool_create(k, SR_F32, 1, S, 1, w->enc_dim, &B->c2)) ||
        (st = sr_kpool_create(k, kv, w->enc_layers, S, er_rows, w->enc_heads * w->enc_hd, &B->ek)) ||
        (st = sr_kpool_create(k, kv, w->enc_layers, S, er_rows, w->enc_heads * w->enc_hd, &B->ev)) ||
        (st = sr_kpool_create(k, kv, w->n_layers, S, dr_rows, w->n_kv * w->hd, &B->dk)) ||
        (st = sr_kpool_create(k, kv, w->n_layers, S, dr_rows, w->n_kv * w->hd, &B->dv)) ||
        (st = sr_kpool_create(k, SR_F32, 1, S, B->emb_cap, w->dim, &B->emb)) ||
        (st = vx_scratch_init(&B->s, k, w, (int)all)))
        goto fail;
    B->bytes += B->c1->bytes + B->c2->bytes + B->ek->bytes + B->ev->bytes + B->dk->bytes +
                B->dv->bytes + B->emb->bytes + vx_scratch_bytes(&B->s);
    B->prompt[0] = w->bos;
    for (int i = 1; i < L; i++) B->prompt[i] = w->pad;
    if ((st = vx_ada_scales(w, &B->s, delay, B->ada))) goto fail;
    /* the shared prefix, where streams share the context (a lone stream computes it itself):
     * it must fit the rings without wrapping, and a layer's rows and every slot must copy as
     * 4-byte words (sr_kpool_copy_rows) */
    if (S > 1 && w->n_left >= 2) {
        int P = w->n_left - 1;
        size_t ke = sr_dtype_size(kv);
        if (VX_ENC_PER_STEP * P <= B->ek->rows && P <= B->dk->rows && P <= B->emb_cap &&
            (size_t)VX_ENC_PER_STEP * P * B->ek->width * ke % 4 == 0 &&
            (size_t)P * B->dk->width * ke % 4 == 0 && (size_t)B->ek->rows * B->ek->width * ke % 4 == 0 &&
            (size_t)B->dk->rows * B->dk->width * ke % 4 == 0) {
            B->pre = P;
            if ((st = prefix_make(B))) goto fail;
        }
    }
    *batch = B;
    return SR_OK;
fail:
    batch_close(B);
    return st;
}

static size_t batch_bytes(const void *batch) { return ((const vx_batch *)batch)->bytes; }

/* ---- streams ------------------------------------------------------------------------------- */

static void reset(void *state)
{
    vx_stream *s = state;
    sr_mel_stream_reset(s->ms);
    s->mel_n = 0;
    (void)slot_clear(s->b, s->slot); /* valid slot: cannot fail */
    s->enc_pos = s->dec_pos = 0;
    s->n_emb = s->n_steps = s->samples = 0;
    s->started = s->final = s->stopped = s->flush_avail = 0;
    s->pre = s->skip_mel = 0;
    s->in = NULL;
    s->lead = s->in_n = s->tail = 0;
    s->finishing = 0;
    s->cap_enc_n = s->cap_ada_n = s->cap_mel_n = 0;
    /* the prefix again; if a copy fails the stream computes it itself (positions from 0: the
     * rows copied so far are overwritten before any query reads them) */
    if (s->b->pre && prefix_load(s)) {
        s->enc_pos = s->dec_pos = s->n_emb = 0;
        s->pre = s->skip_mel = 0;
        sr_error_clear(); /* handled: the stream is whole either way */
    }
}

static void stream_close(void *state)
{
    vx_stream *s = state;
    if (!s) return;
    if (s->b->owner[s->slot] == s) s->b->owner[s->slot] = NULL; /* the slot is free again */
    free(s->mel);
    sr_mel_stream_close(s->ms);
    free(s);
}

/* A stream on a free slot of its context (cleared here); its config must be the context's. */
static sr_status stream_open(const sr_model *m, const sr_stream_config *cfg, void *batch, int slot,
                             void **state, sr_chunking *ck, sr_scorer *sc)
{
    const vx_model *w = m->impl;
    int delay;
    sr_dtype kv;
    sr_status st = check_config(w, cfg, &delay, &kv);
    if (st) return st;
    vx_batch *B = batch;
    if (!B) return sr_error(SR_ERR_ARG, "voxtral: stream_open needs a batch context");
    if (B->m != m)
        return sr_error(SR_ERR_ARG, "voxtral stream_open: the batch context is another model's");
    if (slot < 0 || slot >= B->max_streams)
        return sr_error(SR_ERR_ARG, "voxtral stream_open: slot %d outside the batch context's "
                        "%d", slot, B->max_streams);
    if (B->owner[slot])
        return sr_error(SR_ERR_ARG, "voxtral stream_open: slot %d of the batch context holds "
                        "an open stream", slot);
    if (delay != B->delay)
        return sr_error(SR_ERR_ARG, "stream.delay_tokens: %d, the batch context's streams use %d",
                        delay, B->delay);
    if (kv != B->kv)
        return sr_error(SR_ERR_ARG, "stream.cache_dtype: %s, the batch context's caches are %s",
                        sr_dtype_name(kv), sr_dtype_name(B->kv));
    vx_stream *s = sr_calloc(1, sizeof *s, "voxtral stream");
    if (!s) return SR_ERR_NOMEM;
    s->m = m;
    s->w = w;
    s->b = B;
    s->slot = slot;
    s->mel_cap = (B->enc_steps + 2) * VX_MEL_PER_STEP;
    st = SR_ERR_NOMEM;
    if (!(s->mel = sr_malloc((size_t)s->mel_cap * w->n_mels * sizeof(float), "voxtral mel")))
        goto fail;
    if ((st = sr_mel_stream_open(w->mel, &s->ms)) || (st = slot_clear(B, slot)) ||
        (B->pre && (st = prefix_load(s))))
        goto fail;
    B->owner[slot] = s;
    ck->first_chunk = VX_STEP_SAMPLES + VX_LOOKAHEAD;
    ck->chunk = VX_STEP_SAMPLES;
    memset(sc, 0, sizeof *sc);
    sc->kind = SR_SCORER_SYNC;
    sc->ctx = s;
    sc->vocab = w->vocab;
    sc->blank = w->pad;
    sc->eot = -1;
    sc->sync_frames = vx_frames;
    sc->sync_step = sync_step;
    sc->sync_step_batch = sync_step_batch;
    sc->sync_token = 1;
    *state = s;
    return SR_OK;
fail:
    stream_close(s);
    return st;
}

/* The stream's own bytes; the caches it uses are its context's (batch_bytes). */
static size_t state_bytes(const void *state)
{
    const vx_stream *s = state;
    const vx_model *w = s->w;
    return sizeof *s + (size_t)s->mel_cap * w->n_mels * sizeof(float);
}

const sr_model_ops sr_voxtral_ops = {
    .name = "voxtral_realtime",
    .description = "Voxtral Realtime: causal RoPE audio encoder with ring K/V caches, frame-"
                   "concat adapter, Mistral decoder with delay-conditioned norms (sync scorer)",
    .default_decoder = "sync_greedy",
    .device_ready = 1, /* every per-chunk access through the table (checked on cpu-guard) */
    .load = load,
    .unload = vx_unload,
    .batch_open = batch_open,
    .batch_close = batch_close,
    .batch_bytes = batch_bytes,
    .stream_open = stream_open,
    .process = process,
    .process_batch = process_batch,
    .reset = reset,
    .stream_close = stream_close,
    .state_bytes = state_bytes,
};
