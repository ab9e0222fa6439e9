/*
 * wh_load.c — loading a Whisper model file (arch "whisper", layout of docs/whisper.md): the config
 * (openai ModelDimensions, special tokens, suppression lists, front-end constants) is checked
 * for consistency, every tensor is loaded with the shape the config implies: weight matrices
 * (Linear layers, the conv stems as [d, c_in * 3], the token embedding) go to the kernel table
 * in their stored precision (f32, f16, bf16 or int8 + scale: the gemm op widens them exactly),
 * vectors (biases, LayerNorm, positions) as f32; the tokenizer must have n_vocab pieces, and
 * the log-mel front-end is built from /frontend/mel_filters.
 */
#include "whisper.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static sr_status cfg_obj_int(const sr_model *m, const cJSON *obj, const char *objname,
                             const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return sr_error(SR_ERR_FORMAT, "%s: config.%s.%s: missing", m->path, objname, key);
    if (!cJSON_IsNumber(v) || !sr_whole_int(v->valuedouble, out))
        return sr_error(SR_ERR_FORMAT, "%s: config.%s.%s: expected an integer", m->path, objname,
                        key);
    return SR_OK;
}

/* Mark every id of the JSON int array config.<key> in mask. */
static sr_status cfg_id_list(const sr_model *m, const char *key, int n_vocab, uint8_t *mask)
{
    const cJSON *a = sr_cfg_item(m, key);
    if (!a) return sr_error(SR_ERR_FORMAT, "%s: config.%s: missing", m->path, key);
    if (!cJSON_IsArray(a))
        return sr_error(SR_ERR_FORMAT, "%s: config.%s: expected an array of token ids", m->path, key);
    int i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        int id = 0;
        if (!cJSON_IsNumber(v) || !sr_whole_int(v->valuedouble, &id))
            return sr_error(SR_ERR_FORMAT, "%s: config.%s[%d]: expected an integer", m->path, key, i);
        if (id < 0 || id >= n_vocab)
            return sr_error(SR_ERR_FORMAT, "%s: config.%s[%d]: token %d outside the vocabulary "
                            "(n_vocab %d)", m->path, key, i, id, n_vocab);
        mask[id] = 1;
    }
    return SR_OK;
}

/* Load one f32 tensor and return its data. */
static sr_status ten(sr_model *m, sr_h5 *f, const char *name, int ndim, int64_t a, int64_t b,
                     int64_t c, const float **out)
{
    int64_t shape[3] = {a, b, c};
    return sr_model_ftensor(m, f, name, ndim, shape, out);
}

static sr_status load_block(sr_model *m, sr_h5 *f, const char *pre, int cross, int d,
                            wh_block *B)
{
    char n[160];
    sr_status st = SR_OK;
#define W2(field, suffix, rows, cols)                                                       \
    if (!st) { snprintf(n, sizeof n, "%s.%s", pre, suffix); st = sr_model_weight(m, f, n, SR_AS_STORED, rows, cols, &B->field); }
#define W1(field, suffix, len)                                                              \
    if (!st) { snprintf(n, sizeof n, "%s.%s", pre, suffix); st = ten(m, f, n, 1, len, 0, 0, &B->field); }
    /* query | key | value (and the cross key | value) stacked: one product each */
    if (!st) st = sr_model_linear_cat(m, f, pre, 3, (const char *[]){"attn.query", "attn.key", "attn.value"},
                                      (const int[]){d, d, d}, (const int[]){1, 0, 1}, SR_AS_STORED, d,
                                      &B->qkv.w, &B->qkv.b);
    W2(o.w, "attn.out.weight", d, d) W1(o.b, "attn.out.bias", d)
    W1(attn_ln.g, "attn_ln.weight", d) W1(attn_ln.b, "attn_ln.bias", d)
    if (cross) {
        W2(cq.w, "cross_attn.query.weight", d, d) W1(cq.b, "cross_attn.query.bias", d)
        if (!st) st = sr_model_linear_cat(m, f, pre, 2, (const char *[]){"cross_attn.key", "cross_attn.value"},
                                          (const int[]){d, d}, (const int[]){0, 1}, SR_AS_STORED, d,
                                          &B->ckv.w, &B->ckv.b);
        W2(co.w, "cross_attn.out.weight", d, d) W1(co.b, "cross_attn.out.bias", d)
        W1(cross_ln.g, "cross_attn_ln.weight", d) W1(cross_ln.b, "cross_attn_ln.bias", d)
    }
    W2(fc1.w, "mlp.0.weight", 4 * d, d) W1(fc1.b, "mlp.0.bias", 4 * d)
    W2(fc2.w, "mlp.2.weight", d, 4 * d) W1(fc2.b, "mlp.2.bias", d)
    W1(mlp_ln.g, "mlp_ln.weight", d) W1(mlp_ln.b, "mlp_ln.bias", d)
#undef W1
#undef W2
    return st;
}

/* config.streaming (optional, docs/whisper.md): whether the weights were trained for
 * WhisperRT's block-causal encoder, the chunk sizes and first chunk they were trained with, and
 * the LoRA provenance. It decides the defaults (wh_defaults), so a malformed block fails the
 * load naming its field instead of quietly leaving the vanilla defaults in force. */
static sr_status load_streaming(sr_model *m, wh_model *w)
{
    /* scripts/convert_whisper.py wrote these top-level keys before the block existed */
    static const char *const legacy[] = {"trained_chunk_ms", "trained_first_chunk_ms"};
    for (size_t i = 0; i < SR_ARRAY_LEN(legacy); i++)
        if (sr_cfg_item(m, legacy[i]))
            return sr_error(SR_ERR_FORMAT, "%s: config.%s: written by an older "
                            "scripts/convert_whisper.py; convert the checkpoint again (the trained "
                            "chunking is now config.streaming.chunk_ms / first_chunk_ms)", m->path,
                            legacy[i]);
    const cJSON *s = sr_cfg_item(m, "streaming");
    if (!s) return SR_OK; /* vanilla weights */
    if (!cJSON_IsObject(s))
        return sr_error(SR_ERR_FORMAT, "%s: config.streaming: expected an object such as "
                        "{\"causal\": true, \"chunk_ms\": [300], \"first_chunk_ms\": 600}", m->path);
    static const char *const keys[] = {"causal", "chunk_ms", "first_chunk_ms", "lora"};
    for (const cJSON *c = s->child; c; c = c->next) {
        size_t i = 0;
        while (i < SR_ARRAY_LEN(keys) && strcmp(keys[i], c->string)) i++;
        if (i == SR_ARRAY_LEN(keys))
            return sr_error(SR_ERR_FORMAT, "%s: config.streaming.%s: not a field of the streaming "
                            "block (causal, chunk_ms, first_chunk_ms, lora)", m->path, c->string);
    }
    const cJSON *causal = cJSON_GetObjectItemCaseSensitive(s, "causal");
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(s, "chunk_ms");
    const cJSON *first = cJSON_GetObjectItemCaseSensitive(s, "first_chunk_ms");
    const cJSON *lora = cJSON_GetObjectItemCaseSensitive(s, "lora");
    if (!causal)
        return sr_error(SR_ERR_FORMAT, "%s: config.streaming.causal: missing (true when the "
                        "weights were trained with the block-causal encoder)", m->path);
    if (!cJSON_IsBool(causal))
        return sr_error(SR_ERR_FORMAT, "%s: config.streaming.causal: expected true or false", m->path);
    if (lora && !cJSON_IsObject(lora))
        return sr_error(SR_ERR_FORMAT, "%s: config.streaming.lora: expected an object (the "
                        "fine-tune's provenance)", m->path);
    w->causal = cJSON_IsTrue(causal);
    if (!w->causal) {
        if (ch || first)
            return sr_error(SR_ERR_FORMAT, "%s: config.streaming.%s: trained chunk sizes describe "
                            "causal weights, but config.streaming.causal is false", m->path,
                            ch ? "chunk_ms" : "first_chunk_ms");
        return SR_OK;
    }
    if (!ch)
        return sr_error(SR_ERR_FORMAT, "%s: config.streaming.chunk_ms: missing (the chunk sizes in "
                        "ms the causal weights were trained with; the first is the default)", m->path);
    int n = cJSON_IsArray(ch) ? cJSON_GetArraySize(ch) : 0;
    if (n < 1 || n > WH_MAX_TRAINED)
        return sr_error(SR_ERR_FORMAT, "%s: config.streaming.chunk_ms: expected an array of 1 to %d "
                        "chunk sizes in ms", m->path, WH_MAX_TRAINED);
    int i = 0, lo = 0;
    for (const cJSON *v = ch->child; v; v = v->next, i++) {
        int ms = 0;
        if (!cJSON_IsNumber(v) || !sr_whole_int(v->valuedouble, &ms))
            return sr_error(SR_ERR_FORMAT, "%s: config.streaming.chunk_ms[%d]: expected an integer "
                            "(ms)", m->path, i);
        /* the sizes stream.chunk_ms accepts for whisperrt (whisper.c check_cfg) */
        if (ms < 40 || ms > 1000 || ms % 20)
            return sr_error(SR_ERR_FORMAT, "%s: config.streaming.chunk_ms[%d]: %d ms; whisperrt "
                            "chunks are 40..1000 ms in steps of 20 ms", m->path, i, ms);
        for (int j = 0; j < i; j++)
            if (w->trained_ms[j] == ms)
                return sr_error(SR_ERR_FORMAT, "%s: config.streaming.chunk_ms[%d]: %d ms is listed "
                                "twice", m->path, i, ms);
        w->trained_ms[i] = ms;
        lo = i ? SR_MIN(lo, ms) : ms;
    }
    w->n_trained = n;
    if (first) {
        int ms = 0, hi = w->n_audio_ctx * 20;
        if (!cJSON_IsNumber(first) || !sr_whole_int(first->valuedouble, &ms))
            return sr_error(SR_ERR_FORMAT, "%s: config.streaming.first_chunk_ms: expected an "
                            "integer (ms)", m->path);
        if (ms < lo || ms > hi || ms % 20)
            return sr_error(SR_ERR_FORMAT, "%s: config.streaming.first_chunk_ms: %d ms; needs %d "
                            "(the smallest trained chunk) .. %d ms in steps of 20 ms", m->path, ms,
                            lo, hi);
        w->trained_first_ms = ms;
    }
    return SR_OK;
}

static void wh_free(wh_model *w)
{
    if (!w) return;
    free(w->enc);
    free(w->dec);
    free(w->suppress);
    free(w->suppress_begin);
    sr_mel_free(w->mel);
    free(w);
}

/* Dimensions, tokens, front-end constants and their consistency. */
static sr_status load_config(sr_model *m, wh_model *w)
{
    sr_status st;
    struct { const char *key; int *dst; } dims[] = {
        {"n_mels", &w->n_mels}, {"n_audio_ctx", &w->n_audio_ctx},
        {"n_audio_state", &w->n_audio_state}, {"n_audio_head", &w->n_audio_head},
        {"n_audio_layer", &w->n_audio_layer}, {"n_vocab", &w->n_vocab},
        {"n_text_ctx", &w->n_text_ctx}, {"n_text_state", &w->n_text_state},
        {"n_text_head", &w->n_text_head}, {"n_text_layer", &w->n_text_layer},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(dims); i++) {
        if ((st = sr_cfg_int(m, dims[i].key, dims[i].dst))) return st;
        if (*dims[i].dst <= 0 || *dims[i].dst > 1000000)
            return sr_error(SR_ERR_FORMAT, "%s: config.%s: %d out of range", m->path, dims[i].key,
                            *dims[i].dst);
    }
    if (w->n_audio_state != w->n_text_state)
        return sr_error(SR_ERR_FORMAT, "%s: config.n_audio_state (%d) differs from "
                        "config.n_text_state (%d): cross-attention needs them equal", m->path,
                        w->n_audio_state, w->n_text_state);
    w->d = w->n_text_state;
    if (w->d % w->n_audio_head || w->d % w->n_text_head || w->d % 2)
        return sr_error(SR_ERR_FORMAT, "%s: config.n_audio_head / n_text_head (%d / %d) must "
                        "divide the even width %d", m->path, w->n_audio_head, w->n_text_head, w->d);
    if (w->n_text_ctx < 16)
        return sr_error(SR_ERR_FORMAT, "%s: config.n_text_ctx: %d, at least 16 needed", m->path,
                        w->n_text_ctx);
    int sr = 0, n_fft = 0, chunk_s = 0;
    if ((st = sr_cfg_int(m, "sample_rate", &sr)) || (st = sr_cfg_int(m, "n_fft", &n_fft)) ||
        (st = sr_cfg_int(m, "hop_length", &w->hop)) ||
        (st = sr_cfg_int(m, "chunk_length_s", &chunk_s)))
        return st;
    if (sr != 16000 || n_fft != 400 || w->hop != 160)
        return sr_error(SR_ERR_FORMAT, "%s: config.sample_rate/n_fft/hop_length: %d/%d/%d, the "
                        "Whisper front-end is 16000/400/160", m->path, sr, n_fft, w->hop);
    w->window_samples = 2 * w->n_audio_ctx * w->hop;
    if ((long)chunk_s * sr != w->window_samples)
        return sr_error(SR_ERR_FORMAT, "%s: config.chunk_length_s: %d s, but n_audio_ctx %d "
                        "encoder frames span %d samples", m->path, chunk_s, w->n_audio_ctx,
                        w->window_samples);
    const cJSON *ml = sr_cfg_item(m, "multilingual");
    if (!cJSON_IsBool(ml))
        return sr_error(SR_ERR_FORMAT, "%s: config.multilingual: expected true or false", m->path);
    w->multilingual = cJSON_IsTrue(ml);

    const cJSON *tk = sr_cfg_item(m, "tokens");
    if (!cJSON_IsObject(tk)) return sr_error(SR_ERR_FORMAT, "%s: config.tokens: expected an object", m->path);
    struct { const char *key; int *dst; } toks[] = {
        {"eot", &w->eot}, {"sot", &w->sot}, {"translate", &w->translate},
        {"transcribe", &w->transcribe}, {"sot_lm", &w->sot_lm}, {"sot_prev", &w->sot_prev},
        {"no_speech", &w->no_speech}, {"no_timestamps", &w->no_timestamps},
        {"timestamp_begin", &w->timestamp_begin},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(toks); i++) {
        if ((st = cfg_obj_int(m, tk, "tokens", toks[i].key, toks[i].dst))) return st;
        if (*toks[i].dst < 0 || *toks[i].dst >= w->n_vocab)
            return sr_error(SR_ERR_FORMAT, "%s: config.tokens.%s: %d outside the vocabulary "
                            "(n_vocab %d)", m->path, toks[i].key, *toks[i].dst, w->n_vocab);
    }
    /* the window-break token "<|30.00|>" (the end of a window) must exist */
    w->brk = w->timestamp_begin + w->n_audio_ctx;
    if (w->brk >= w->n_vocab || w->timestamp_begin <= w->eot)
        return sr_error(SR_ERR_FORMAT, "%s: config.tokens.timestamp_begin: %d, the %d timestamps "
                        "of a window do not fit after EOT %d in n_vocab %d", m->path,
                        w->timestamp_begin, w->n_audio_ctx + 1, w->eot, w->n_vocab);
    w->prompt_len = 0;
    w->prompt[w->prompt_len++] = w->sot;
    w->language_first = -1;
    if (w->multilingual) {
        if ((st = cfg_obj_int(m, tk, "tokens", "language_first", &w->language_first))) return st;
        const cJSON *lc = sr_cfg_item(m, "lang_codes");
        int idx = -1, i = 0;
        if (cJSON_IsArray(lc))
            for (const cJSON *v = lc->child; v; v = v->next, i++)
                if (cJSON_IsString(v) && !strcmp(v->valuestring, "en")) { idx = i; break; }
        if (idx < 0)
            return sr_error(SR_ERR_FORMAT, "%s: config.lang_codes: no \"en\" entry (multilingual "
                            "models transcribe English here)", m->path);
        if (w->language_first <= w->eot || w->language_first >= w->n_vocab || idx >= w->n_vocab - w->language_first)
            return sr_error(SR_ERR_FORMAT, "%s: config.tokens.language_first: %d out of range",
                            m->path, w->language_first);
        w->prompt[w->prompt_len++] = w->language_first + idx;
        w->prompt[w->prompt_len++] = w->transcribe;
    }
    w->prompt[w->prompt_len++] = w->no_timestamps;
    w->text_cap = w->n_text_ctx / 2;

    w->suppress = sr_calloc((size_t)w->n_vocab, 1, "whisper suppress mask");
    w->suppress_begin = sr_calloc((size_t)w->n_vocab, 1, "whisper begin-suppress mask");
    if (!w->suppress || !w->suppress_begin) return SR_ERR_NOMEM;
    if ((st = cfg_id_list(m, "suppress_tokens", w->n_vocab, w->suppress)) ||
        (st = cfg_id_list(m, "begin_suppress_tokens", w->n_vocab, w->suppress_begin)))
        return st;
    /* no-timestamps transcription: every special token but EOT (SOT family, language and
     * task tokens, no_speech, no_timestamps, all timestamps) is suppressed */
    for (int v = w->eot + 1; v < w->n_vocab; v++) w->suppress[v] = 1;
    w->suppress[w->eot] = 0;
    return SR_OK;
}

static sr_status load_frontend(sr_model *m, sr_h5 *f, wh_model *w)
{
    sr_mel_config c;
    sr_mel_config_init(&c, SR_MEL_WHISPER);
    c.n_mels = w->n_mels;
    sr_tensor t;
    memset(&t, 0, sizeof t);
    const char *path = "/frontend/mel_filters";
    int has = 0;
    sr_status st = sr_h5_has_dataset(f, path, &has);
    if (st) return st;
    if (has) {
        if ((st = sr_h5_dataset(f, path, SR_F32, &t))) return st;
        if (t.ndim != 2 || t.shape[0] != w->n_mels || t.shape[1] != 201) {
            st = sr_error(SR_ERR_FORMAT, "%s: %s: shape [%lld, %lld], config wants [%d, 201]",
                          m->path, path, (long long)t.shape[0],
                          (long long)(t.ndim > 1 ? t.shape[1] : 0), w->n_mels);
            sr_tensor_free(&t);
            return st;
        }
        c.filters = t.data;
    }
    st = sr_mel_create(&c, &w->mel);
    sr_tensor_free(&t);
    if (st) return sr_error_prefix(st, "%s: %s", m->path, path);
    return SR_OK;
}

sr_status wh_model_load(sr_model *m, sr_h5 *f)
{
    wh_model *w = sr_calloc(1, sizeof *w, "whisper model");
    if (!w) return SR_ERR_NOMEM;
    w->k = m->k;
    sr_status st = load_config(m, w);
    if (!st) st = load_streaming(m, w);
    if (!st && m->tokenizer && sr_tokenizer_size(m->tokenizer) != w->n_vocab)
        st = sr_error(SR_ERR_FORMAT, "%s: /tokenizer has %d pieces, config.n_vocab is %d",
                      m->path, sr_tokenizer_size(m->tokenizer), w->n_vocab);
    if (!st) st = load_frontend(m, f, w);
    int d = w->d;
    if (!st) {
        w->enc = sr_calloc((size_t)w->n_audio_layer, sizeof *w->enc, "whisper encoder blocks");
        w->dec = sr_calloc((size_t)w->n_text_layer, sizeof *w->dec, "whisper decoder blocks");
        if (!w->enc || !w->dec) st = SR_ERR_NOMEM;
    }
    /* tap-major: the stem's input matrix is three input rows side by side (wh_encoder.c) */
    if (!st) st = sr_model_weight_taps(m, f, "encoder.conv1.weight", SR_AS_STORED, d, w->n_mels, 3, &w->conv1.w);
    if (!st) st = ten(m, f, "encoder.conv1.bias", 1, d, 0, 0, &w->conv1.b);
    if (!st) st = sr_model_weight_taps(m, f, "encoder.conv2.weight", SR_AS_STORED, d, d, 3, &w->conv2.w);
    if (!st) st = ten(m, f, "encoder.conv2.bias", 1, d, 0, 0, &w->conv2.b);
    if (!st) st = ten(m, f, "encoder.positional_embedding", 2, w->n_audio_ctx, d, 0, &w->enc_pos);
    char pre[64];
    for (int l = 0; !st && l < w->n_audio_layer; l++) {
        snprintf(pre, sizeof pre, "encoder.blocks.%d", l);
        st = load_block(m, f, pre, 0, d, &w->enc[l]);
    }
    if (!st) st = ten(m, f, "encoder.ln_post.weight", 1, d, 0, 0, &w->ln_post.g);
    if (!st) st = ten(m, f, "encoder.ln_post.bias", 1, d, 0, 0, &w->ln_post.b);
    if (!st) st = sr_model_weight(m, f, "decoder.token_embedding.weight", SR_AS_STORED, w->n_vocab, d, &w->tok_emb);
    if (!st) st = ten(m, f, "decoder.positional_embedding", 2, w->n_text_ctx, d, 0, &w->dec_pos);
    for (int l = 0; !st && l < w->n_text_layer; l++) {
        snprintf(pre, sizeof pre, "decoder.blocks.%d", l);
        st = load_block(m, f, pre, 1, d, &w->dec[l]);
    }
    if (!st) st = ten(m, f, "decoder.ln.weight", 1, d, 0, 0, &w->dec_ln.g);
    if (!st) st = ten(m, f, "decoder.ln.bias", 1, d, 0, 0, &w->dec_ln.b);
    /* the suppression rules as additive rows, so that logits are masked where they are */
    float *mk = st ? NULL : sr_malloc(2 * (size_t)w->n_vocab * sizeof(float), "whisper logit masks");
    if (!st && !mk) st = SR_ERR_NOMEM;
    if (!st) {
        for (int v = 0; v < w->n_vocab; v++) {
            mk[v] = w->suppress[v] ? -INFINITY : 0.0f;
            mk[w->n_vocab + v] = !w->suppress[v] && w->suppress_begin[v] ? -INFINITY : 0.0f;
        }
        st = sr_model_fconst(m, "whisper logit mask", mk, (size_t)w->n_vocab, &w->mask);
        if (!st) st = sr_model_fconst(m, "whisper first-position logit mask", mk + w->n_vocab, (size_t)w->n_vocab, &w->mask_begin);
        static const float ninf = -INFINITY;
        if (!st) st = sr_model_fconst(m, "whisper -inf", &ninf, 1, &w->ninf);
    }
    free(mk);
    if (st) {
        wh_free(w);
        return st;
    }
    m->impl = w;
    return SR_OK;
}

void wh_model_unload(sr_model *m)
{
    wh_free(m->impl);
    m->impl = NULL;
}
