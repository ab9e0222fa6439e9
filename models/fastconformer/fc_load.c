/*
 * fc_load.c — loading a fastconformer_rnnt model file (docs/fastconformer.md): the config (every
 * hyper-parameter of NeMo's ConformerEncoder / RNNTDecoder / RNNTJoint that inference needs) is
 * checked for the variants this backend implements (causal dw_striding 8x subsampling, rel_pos
 * attention, chunked_limited or regular context style, causal depthwise conv, LayerNorm or
 * BatchNorm conv norm, LSTM prediction network, ReLU joint, optional TDT durations); every
 * tensor is loaded with the shape the config implies under its NeMo state-dict key: matrices
 * (Linear layers, the 1x1 convs, linear_pos, the LSTM's, the embedding) go to the kernel table
 * as sr_kweight in their stored precision (f32, f16, bf16 or int8 + scale; the gemm widens
 * exactly), vectors and conv taps as f32 host tensors.
 *
 * Derived at load: the NeMo mel front-end; pre_encode.out with its columns reordered (f, c) for
 * the position-major rows the subsampling ends with (fc_encoder.c); and linear_pos applied to
 * the sinusoidal relative position table once per layer for every relative position a
 * streaming context can ask for (-R_max .. L_max + R_max), so streams never recompute it.
 */
#include "fc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void fc_sinusoids(int d, int p0, int n, float *out)
{
    /* NeMo create_pe: div_term = exp(arange(0, d, 2) * -(ln 10000 / d)) in float32, the
     * product position * div_term in float32, then sin / cos */
    for (int r = 0; r < n; r++) {
        float pos = (float)(p0 - r);
        float *o = out + (size_t)r * d;
        for (int i = 0; i < d; i += 2) {
            float div = expf((float)i * -(logf(10000.0f) / (float)d));
            float a = pos * div;
            o[i] = (float)sin((double)a);
            if (i + 1 < d) o[i + 1] = (float)cos((double)a);
        }
    }
}

static sr_status ten(sr_model *m, sr_h5 *f, const char *name, int ndim, const int64_t *shape,
                     const float **out)
{
    return sr_model_ftensor(m, f, name, ndim, shape, out);
}

static const cJSON *cfg_item(const sr_model *m, const char *key)
{
    return sr_cfg_item(m, key);
}

static sr_status cfg_str(const sr_model *m, const char *key, const char *def, const char **out)
{
    const cJSON *v = cfg_item(m, key);
    if (!v) {
        if (!def) return sr_error(SR_ERR_FORMAT, "%s: config.%s: missing", m->path, key);
        *out = def;
        return SR_OK;
    }
    if (!cJSON_IsString(v)) return sr_error(SR_ERR_FORMAT, "%s: config.%s: expected a string", m->path, key);
    *out = v->valuestring;
    return SR_OK;
}

/* JSON array of n ints (n = -1: any length up to cap) into out; *n_out its length. */
static sr_status cfg_ints(const sr_model *m, const cJSON *a, const char *what, int cap, int *out,
                          int *n_out)
{
    if (!cJSON_IsArray(a)) return sr_error(SR_ERR_FORMAT, "%s: config.%s: expected an array", m->path, what);
    int n = 0;
    for (const cJSON *v = a->child; v; v = v->next, n++) {
        if (n >= cap) return sr_error(SR_ERR_FORMAT, "%s: config.%s: more than %d entries", m->path, what, cap);
        if (!cJSON_IsNumber(v) || !sr_whole_int(v->valuedouble, &out[n]))
            return sr_error(SR_ERR_FORMAT, "%s: config.%s[%d]: expected an integer", m->path, what, n);
    }
    *n_out = n;
    return SR_OK;
}

static sr_status parse_config(sr_model *m, fc_model *w)
{
    sr_status st;
    int sr = 0, n_fft = 0, win = 0, factor = 0, causal = 0, pred_hidden = 0;
    const char *norm = NULL, *sub = NULL, *attn = NULL, *style = NULL, *cnorm = NULL, *act = NULL;
    float preemph = 0;
    if ((st = sr_cfg_int(m, "sample_rate", &sr)) || (st = sr_cfg_int(m, "n_fft", &n_fft)) ||
        (st = sr_cfg_int(m, "win_length", &win)) || (st = sr_cfg_int(m, "hop_length", &w->hop)) ||
        (st = sr_cfg_int(m, "n_mels", &w->n_mels)) ||
        (st = sr_cfg_float_def(m, "preemph", 0.97f, &preemph)) ||
        (st = cfg_str(m, "normalize", "NA", &norm)) ||
        (st = sr_cfg_int(m, "d_model", &w->d)) || (st = sr_cfg_int(m, "n_layers", &w->n_layers)) ||
        (st = sr_cfg_int(m, "n_heads", &w->n_heads)) || (st = sr_cfg_int(m, "d_ff", &w->d_ff)) ||
        (st = sr_cfg_int(m, "conv_kernel_size", &w->kernel)) ||
        (st = cfg_str(m, "conv_norm_type", NULL, &cnorm)) ||
        (st = cfg_str(m, "subsampling", NULL, &sub)) ||
        (st = sr_cfg_int(m, "subsampling_factor", &factor)) ||
        (st = sr_cfg_int(m, "subsampling_conv_channels", &w->sub_ch)) ||
        (st = sr_cfg_int(m, "causal_downsampling", &causal)) ||
        (st = sr_cfg_int(m, "xscaling", &w->xscaling)) ||
        (st = cfg_str(m, "self_attention_model", NULL, &attn)) ||
        (st = cfg_str(m, "att_context_style", NULL, &style)) ||
        (st = sr_cfg_int(m, "vocab_size", &w->vocab)) || (st = sr_cfg_int(m, "blank", &w->blank)) ||
        (st = sr_cfg_int(m, "pred_hidden", &pred_hidden)) ||
        (st = sr_cfg_int(m, "pred_rnn_layers", &w->pred_layers)) ||
        (st = sr_cfg_int(m, "joint_hidden", &w->joint_hidden)) ||
        (st = cfg_str(m, "joint_activation", "relu", &act)) ||
        (st = sr_cfg_int_def(m, "max_symbols", 10, &w->max_symbols)) ||
        (st = sr_cfg_int_def(m, "local_attn_threshold", 8192, &w->local_threshold)))
        return st;
    w->pred_hidden = pred_hidden;
    const char *p = m->path;
    /* bounds first, so that no product of config values below can overflow an int; the
     * tensors' shapes then tie every width to the bytes actually in the file */
    const struct { const char *key; int v, lo, hi; } range[] = {
        {"n_fft", n_fft, 16, 8192}, {"win_length", win, 1, n_fft}, {"hop_length", w->hop, 1, 8192},
        {"n_mels", w->n_mels, 1, 1024}, {"d_model", w->d, 2, 65536}, {"n_layers", w->n_layers, 1, 1024},
        {"n_heads", w->n_heads, 1, 1024}, {"d_ff", w->d_ff, 1, 1 << 20},
        {"conv_kernel_size", w->kernel, 1, 1023}, {"subsampling_conv_channels", w->sub_ch, 1, 65536},
        {"xscaling", w->xscaling, 0, 1}, {"vocab_size", w->vocab, 1, 1 << 20},
        {"pred_hidden", pred_hidden, 1, 65536}, {"pred_rnn_layers", w->pred_layers, 1, 64},
        {"joint_hidden", w->joint_hidden, 1, 65536},
        {"local_attn_threshold", w->local_threshold, 1, 1 << 24},
    };
    for (size_t i = 0; i < SR_ARRAY_LEN(range); i++)
        if (range[i].v < range[i].lo || range[i].v > range[i].hi)
            return sr_error(SR_ERR_FORMAT, "%s: config.%s: %d is outside %d .. %d", p, range[i].key,
                            range[i].v, range[i].lo, range[i].hi);
    if (!(preemph >= 0.0f && preemph < 1.0f))
        return sr_error(SR_ERR_FORMAT, "%s: config.preemph: %g is outside [0, 1)", p, (double)preemph);
    st = SR_ERR_FORMAT;
    if (sr != 16000) return sr_error(st, "%s: config.sample_rate: %d, this backend needs 16000", p, sr);
    if (strcmp(norm, "NA")) return sr_error(st, "%s: config.normalize: \"%s\" unsupported (streaming models use NA)", p, norm);
    if (strcmp(sub, "dw_striding") || factor != 8 || !causal)
        return sr_error(st, "%s: config.subsampling: only causal dw_striding with factor 8 is implemented (got %s, factor %d, causal %d)", p, sub, factor, causal);
    if (strcmp(attn, "rel_pos")) return sr_error(st, "%s: config.self_attention_model: \"%s\" unsupported (rel_pos)", p, attn);
    if (!strcmp(style, "chunked_limited")) w->att_style = FC_STYLE_CHUNKED;
    else if (!strcmp(style, "regular")) w->att_style = FC_STYLE_REGULAR;
    else return sr_error(st, "%s: config.att_context_style: \"%s\" unsupported (chunked_limited, regular)", p, style);
    if (strcmp(act, "relu")) return sr_error(st, "%s: config.joint_activation: \"%s\" unsupported (relu)", p, act);
    if (w->d <= 0 || w->n_layers <= 0 || w->n_heads <= 0 || w->d % w->n_heads || w->d % 2)
        return sr_error(st, "%s: config.d_model %d / n_heads %d: need an even d_model divisible by n_heads", p, w->d, w->n_heads);
    if (w->d_ff <= 0) return sr_error(st, "%s: config.d_ff: %d must be positive", p, w->d_ff);
    if (w->kernel < 1 || w->kernel % 2 == 0) return sr_error(st, "%s: config.conv_kernel_size: %d must be odd", p, w->kernel);
    if (w->sub_ch <= 0 || w->n_mels <= 0) return sr_error(st, "%s: config.subsampling_conv_channels / n_mels must be positive", p);
    if (w->vocab <= 0 || w->blank != w->vocab)
        return sr_error(st, "%s: config.blank: %d, NeMo's blank is vocab_size (%d)", p, w->blank, w->vocab);
    if (pred_hidden <= 0 || w->pred_layers <= 0 || w->joint_hidden <= 0)
        return sr_error(st, "%s: config.pred_hidden / pred_rnn_layers / joint_hidden must be positive", p);
    if (w->max_symbols <= 0 || w->max_symbols > SR_MAX_SYMBOLS_MAX)
        return sr_error(st, "%s: config.max_symbols: %d is outside 1 .. %d", p, w->max_symbols, SR_MAX_SYMBOLS_MAX);
    if (strcmp(cnorm, "layer_norm") && strcmp(cnorm, "batch_norm"))
        return sr_error(st, "%s: config.conv_norm_type: \"%s\" unsupported (layer_norm, batch_norm)", p, cnorm);

    int cc[2], n;
    const cJSON *a = cfg_item(m, "conv_context_size");
    if (!a) return sr_error(st, "%s: config.conv_context_size: missing", p);
    if ((st = cfg_ints(m, a, "conv_context_size", 2, cc, &n))) return st;
    if (n != 2 || cc[0] != w->kernel - 1 || cc[1] != 0)
        return sr_error(SR_ERR_FORMAT, "%s: config.conv_context_size: only causal [%d, 0] is implemented", p, w->kernel - 1);

    a = cfg_item(m, "att_context_size");
    if (!a || !cJSON_IsArray(a) || !a->child)
        return sr_error(SR_ERR_FORMAT, "%s: config.att_context_size: expected a non-empty list of [left, right]", p);
    w->n_ctx = 0;
    for (const cJSON *e = a->child; e; e = e->next) {
        char what[64];
        snprintf(what, sizeof what, "att_context_size[%d]", w->n_ctx);
        if (w->n_ctx == FC_MAX_CTX) return sr_error(SR_ERR_FORMAT, "%s: config.att_context_size: more than %d entries", p, FC_MAX_CTX);
        int *c = w->ctx[w->n_ctx];
        if ((st = cfg_ints(m, e, what, 2, c, &n))) return st;
        if (n != 2 || c[0] < 0 || c[1] < 0 || c[0] > SR_ATT_CONTEXT_MAX || c[1] > SR_ATT_CONTEXT_MAX)
            return sr_error(SR_ERR_FORMAT, "%s: config.%s: expected [left, right], each 0 .. %d", p,
                            what, SR_ATT_CONTEXT_MAX);
        if (w->att_style == FC_STYLE_CHUNKED && c[0] % (c[1] + 1))
            return sr_error(SR_ERR_FORMAT, "%s: config.%s: left %d not divisible by right + 1 = %d", p, what, c[0], c[1] + 1);
        w->n_ctx++;
    }
    w->local_w[0] = w->local_w[1] = 128;
    a = cfg_item(m, "local_attn_window");
    if (a) {
        if ((st = cfg_ints(m, a, "local_attn_window", 2, w->local_w, &n))) return st;
        if (n != 2 || w->local_w[0] < 1 || w->local_w[1] < 1 || w->local_w[0] > SR_ATT_CONTEXT_MAX ||
            w->local_w[1] > SR_ATT_CONTEXT_MAX)
            return sr_error(SR_ERR_FORMAT, "%s: config.local_attn_window: expected [left, right], each 1 .. %d",
                            p, SR_ATT_CONTEXT_MAX);
    }
    w->n_durations = 0;
    a = cfg_item(m, "tdt_durations");
    if (a && (st = cfg_ints(m, a, "tdt_durations", 16, w->durations, &w->n_durations))) return st;
    for (int i = 0; i < w->n_durations; i++)
        if (w->durations[i] < 0 || w->durations[i] > 1000)
            return sr_error(SR_ERR_FORMAT, "%s: config.tdt_durations[%d]: %d is outside 0 .. 1000", p, i,
                            w->durations[i]);
    if (w->n_durations == 1)
        return sr_error(SR_ERR_FORMAT, "%s: config.tdt_durations: a TDT joint needs at least 2 durations", p);

    sr_mel_config mc;
    sr_mel_config_init(&mc, SR_MEL_NEMO);
    mc.n_fft = n_fft;
    mc.win_length = win;
    mc.hop_length = w->hop;
    mc.n_mels = w->n_mels;
    mc.preemph = preemph;
    mc.normalize = SR_NORM_NONE;
    if ((st = sr_mel_create(&mc, &w->mel))) return sr_error_prefix(st, "%s: front end", p);

    w->dk = w->d / w->n_heads;
    w->xscale = w->xscaling ? sqrtf((float)w->d) : 1.0f;
    int f = w->n_mels;
    for (int i = 0; i < 3; i++) f = f / 2 + 1; /* causal padding 2 + 1, kernel 3, stride 2 */
    w->sub_f3 = f;
    w->n_out = w->vocab + 1 + w->n_durations;
    return SR_OK;
}

static sr_status load_layer(sr_model *m, sr_h5 *f, int i, fc_model *w, int batch_norm)
{
    char n[160];
    sr_status st = SR_OK;
    fc_layer *L = &w->L[i];
    int64_t d = w->d, ff = w->d_ff, h = w->n_heads, dk = w->dk, K = w->kernel;
#define T1(field, suffix, a) \
    if (!st) { snprintf(n, sizeof n, "encoder.layers.%d.%s", i, suffix); st = ten(m, f, n, 1, (int64_t[]){a}, &L->field); }
#define T2(field, suffix, a, b) \
    if (!st) { snprintf(n, sizeof n, "encoder.layers.%d.%s", i, suffix); st = ten(m, f, n, 2, (int64_t[]){a, b}, &L->field); }
#define T3(field, suffix, a, b, c) \
    if (!st) { snprintf(n, sizeof n, "encoder.layers.%d.%s", i, suffix); st = ten(m, f, n, 3, (int64_t[]){a, b, c}, &L->field); }
#define M2(field, suffix, a, b) \
    if (!st) { snprintf(n, sizeof n, "encoder.layers.%d.%s", i, suffix); st = sr_model_weight(m, f, n, SR_AS_STORED, (int)(a), (int)(b), &L->field); }
#define M3(field, suffix, a, b, c) \
    if (!st) { snprintf(n, sizeof n, "encoder.layers.%d.%s", i, suffix); st = sr_model_weight_nd(m, f, n, SR_AS_STORED, 3, (int64_t[]){a, b, c}, &L->field); }
    T1(ff1_ln.g, "norm_feed_forward1.weight", d) T1(ff1_ln.b, "norm_feed_forward1.bias", d)
    M2(ff1a.w, "feed_forward1.linear1.weight", ff, d) T1(ff1a.b, "feed_forward1.linear1.bias", ff)
    M2(ff1b.w, "feed_forward1.linear2.weight", d, ff) T1(ff1b.b, "feed_forward1.linear2.bias", d)
    T1(att_ln.g, "norm_self_att.weight", d) T1(att_ln.b, "norm_self_att.bias", d)
    /* linear_q | k | v stacked: one product */
    if (!st) {
        snprintf(n, sizeof n, "encoder.layers.%d.self_attn", i);
        st = sr_model_linear_cat(m, f, n, 3, (const char *[]){"linear_q", "linear_k", "linear_v"},
                                 (const int[]){(int)d, (int)d, (int)d}, (const int[]){1, 1, 1},
                                 SR_AS_STORED, (int)d, &L->qkv.w, &L->qkv.b);
    }
    M2(o.w, "self_attn.linear_out.weight", d, d) T1(o.b, "self_attn.linear_out.bias", d)
    M2(pos_w, "self_attn.linear_pos.weight", d, d)
    T2(pos_u, "self_attn.pos_bias_u", h, dk) T2(pos_v, "self_attn.pos_bias_v", h, dk)
    T1(conv_ln.g, "norm_conv.weight", d) T1(conv_ln.b, "norm_conv.bias", d)
    M3(pw1.w, "conv.pointwise_conv1.weight", 2 * d, d, 1) T1(pw1.b, "conv.pointwise_conv1.bias", 2 * d)
    T3(dw_w, "conv.depthwise_conv.weight", d, 1, K) T1(dw_b, "conv.depthwise_conv.bias", d)
    T1(cnorm.g, "conv.batch_norm.weight", d) T1(cnorm.b, "conv.batch_norm.bias", d)
    if (batch_norm) {
        T1(bn_mean, "conv.batch_norm.running_mean", d) T1(bn_var, "conv.batch_norm.running_var", d)
    }
    M3(pw2.w, "conv.pointwise_conv2.weight", d, d, 1) T1(pw2.b, "conv.pointwise_conv2.bias", d)
    T1(ff2_ln.g, "norm_feed_forward2.weight", d) T1(ff2_ln.b, "norm_feed_forward2.bias", d)
    M2(ff2a.w, "feed_forward2.linear1.weight", ff, d) T1(ff2a.b, "feed_forward2.linear1.bias", ff)
    M2(ff2b.w, "feed_forward2.linear2.weight", d, ff) T1(ff2b.b, "feed_forward2.linear2.bias", d)
    T1(out_ln.g, "norm_out.weight", d) T1(out_ln.b, "norm_out.bias", d)
#undef T1
#undef T2
#undef T3
#undef M2
#undef M3
    return st;
}

/* linear_pos over the sinusoids of relative positions pos_pos .. -pos_neg, for every layer, into
 * table memory. */
static sr_status build_pos_table(fc_model *w)
{
    const sr_kernels *k = w->k;
    int rmax = 0, lmax = 0;
    for (int i = 0; i < w->n_ctx; i++) {
        lmax = SR_MAX(lmax, w->ctx[i][0]);
        rmax = SR_MAX(rmax, w->ctx[i][1]);
    }
    /* a streaming step has T <= R + 1 queries at positions p0 .. p0 + T - 1 over keys from
     * p0 - L on: distances p - j span -(T - 1) .. L + T - 1 */
    w->pos_neg = rmax;
    w->pos_pos = lmax + rmax;
    w->pos_rows = w->pos_neg + w->pos_pos + 1;
    size_t n = (size_t)w->pos_rows * w->d;
    float *sin_host = sr_malloc(n * sizeof(float), "fastconformer position table");
    float *sin_tab = k->alloc(n * sizeof(float));
    w->pos_tab = k->alloc(n * w->n_layers * sizeof(float));
    sr_status st = SR_OK;
    if (!sin_host || !sin_tab || !w->pos_tab)
        st = sr_error(SR_ERR_NOMEM, "fastconformer: position table of %d rows", w->pos_rows);
    if (!st) {
        fc_sinusoids(w->d, w->pos_pos, w->pos_rows, sin_host);
        st = k->upload(sin_tab, sin_host, n * sizeof(float));
    }
    for (int l = 0; l < w->n_layers && !st; l++)
        st = k->gemm(w->pos_rows, sin_tab, w->d, w->L[l].pos_w, NULL, SR_ACT_NONE, 1.0f, 0.0f,
                     w->pos_tab + (size_t)l * n, w->d);
    free(sin_host);
    k->free(sin_tab);
    return st;
}

/* pre_encode.out [d, C F3] with column c F3 + f (NeMo's channel-major flattening of
 * (T, C, F)) moved to f C + c, in its stored precision (an int8 row keeps its scale). */
static sr_status load_sub_out(sr_model *m, sr_h5 *f, fc_model *w)
{
    int C = w->sub_ch, F3 = w->sub_f3, d = w->d;
    int64_t shape[2] = {d, (int64_t)C * F3};
    sr_tensor t;
    sr_status st = sr_h5_tensor(f, "encoder.pre_encode.out.weight", SR_AS_STORED, 2, shape, &t);
    if (st) return st;
    size_t es = sr_dtype_size(t.dtype), row = (size_t)C * F3 * es;
    char *p = sr_malloc((size_t)d * row, "fastconformer pre_encode.out");
    if (!p) {
        sr_tensor_free(&t);
        return SR_ERR_NOMEM;
    }
    const char *src = t.data;
    for (int o = 0; o < d; o++)
        for (int c = 0; c < C; c++)
            for (int fr = 0; fr < F3; fr++)
                memcpy(p + o * row + ((size_t)fr * C + c) * es, src + o * row + ((size_t)c * F3 + fr) * es, es);
    st = sr_model_kweight(m, "encoder.pre_encode.out.weight", p, t.dtype, t.scale, d, C * F3,
                          &w->sub_out_own);
    free(p);
    sr_tensor_free(&t);
    if (st) return st;
    w->sub_out.w = w->sub_out_own;
    m->weight_bytes += w->sub_out_own->bytes;
    return SR_OK;
}

void fc_model_unload(sr_model *m)
{
    fc_model *w = m->impl;
    if (!w) return;
    sr_mel_free(w->mel);
    free(w->L);
    free(w->lstm_wih);
    free(w->lstm_bih);
    if (w->pos_tab) w->k->free(w->pos_tab);
    if (w->sub_out_own) w->k->weight_free(w->sub_out_own);
    free(w);
    m->impl = NULL;
}

sr_status fc_model_load(sr_model *m, sr_h5 *f)
{
    fc_model *w = sr_calloc(1, sizeof *w, "fastconformer model");
    if (!w) return SR_ERR_NOMEM;
    m->impl = w;
    w->k = m->k;
    sr_status st = sr_kernels_require(m->k, m->path);
    if (!st) st = parse_config(m, w);
    if (st) goto fail;
    const char *cnorm = sr_cfg_item(m, "conv_norm_type")->valuestring;
    int batch_norm = !strcmp(cnorm, "batch_norm");
    if (m->tokenizer && sr_tokenizer_size(m->tokenizer) != w->vocab) {
        st = sr_error(SR_ERR_FORMAT, "%s: /tokenizer has %d pieces, config.vocab_size is %d", m->path,
                      sr_tokenizer_size(m->tokenizer), w->vocab);
        goto fail;
    }
    w->L = sr_calloc((size_t)w->n_layers, sizeof *w->L, "fastconformer layers");
    w->lstm_wih = sr_calloc(2 * (size_t)w->pred_layers, sizeof *w->lstm_wih, "fastconformer lstm");
    w->lstm_bih = sr_calloc(2 * (size_t)w->pred_layers, sizeof *w->lstm_bih, "fastconformer lstm");
    if (!w->L || !w->lstm_wih || !w->lstm_bih) { st = SR_ERR_NOMEM; goto fail; }
    w->lstm_whh = w->lstm_wih + w->pred_layers;
    w->lstm_bhh = w->lstm_bih + w->pred_layers;

    int64_t C = w->sub_ch, d = w->d, H = w->pred_hidden, J = w->joint_hidden;
#define W(ptr, name, nd, ...) \
    if (!st) st = ten(m, f, name, nd, (int64_t[]){__VA_ARGS__}, &(ptr));
#define MW(ptr, name, a, b) \
    if (!st) st = sr_model_weight(m, f, name, SR_AS_STORED, (int)(a), (int)(b), &(ptr));
#define MW4(ptr, name, a, b, c, e) \
    if (!st) st = sr_model_weight_nd(m, f, name, SR_AS_STORED, 4, (int64_t[]){a, b, c, e}, &(ptr));
    W(w->c0_w, "encoder.pre_encode.conv.0.weight", 4, C, 1, 3, 3)
    W(w->c0_b, "encoder.pre_encode.conv.0.bias", 1, C)
    W(w->dw1_w, "encoder.pre_encode.conv.2.weight", 4, C, 1, 3, 3)
    W(w->dw1_b, "encoder.pre_encode.conv.2.bias", 1, C)
    MW4(w->sub_pw1.w, "encoder.pre_encode.conv.3.weight", C, C, 1, 1)
    W(w->sub_pw1.b, "encoder.pre_encode.conv.3.bias", 1, C)
    W(w->dw2_w, "encoder.pre_encode.conv.5.weight", 4, C, 1, 3, 3)
    W(w->dw2_b, "encoder.pre_encode.conv.5.bias", 1, C)
    MW4(w->sub_pw2.w, "encoder.pre_encode.conv.6.weight", C, C, 1, 1)
    W(w->sub_pw2.b, "encoder.pre_encode.conv.6.bias", 1, C)
    if (!st) st = load_sub_out(m, f, w);
    W(w->sub_out.b, "encoder.pre_encode.out.bias", 1, d)
    for (int i = 0; i < w->n_layers && !st; i++) st = load_layer(m, f, i, w, batch_norm);
    MW(w->embed, "decoder.prediction.embed.weight", (int64_t)w->vocab + 1, H)
    for (int l = 0; l < w->pred_layers && !st; l++) {
        char n[128];
        snprintf(n, sizeof n, "decoder.prediction.dec_rnn.lstm.weight_ih_l%d", l);
        MW(w->lstm_wih[l], n, 4 * H, H)
        snprintf(n, sizeof n, "decoder.prediction.dec_rnn.lstm.weight_hh_l%d", l);
        MW(w->lstm_whh[l], n, 4 * H, H)
        snprintf(n, sizeof n, "decoder.prediction.dec_rnn.lstm.bias_ih_l%d", l);
        W(w->lstm_bih[l], n, 1, 4 * H)
        snprintf(n, sizeof n, "decoder.prediction.dec_rnn.lstm.bias_hh_l%d", l);
        W(w->lstm_bhh[l], n, 1, 4 * H)
    }
    MW(w->j_enc.w, "joint.enc.weight", J, d)
    W(w->j_enc.b, "joint.enc.bias", 1, J)
    MW(w->j_pred.w, "joint.pred.weight", J, H)
    W(w->j_pred.b, "joint.pred.bias", 1, J)
    /* the joint's last Linear is joint_net.2 when the trained config had dropout, else .1 */
    const char *jo = sr_h5_has_tensor(f, "joint.joint_net.1.weight") ? "joint.joint_net.1" : "joint.joint_net.2";
    char jn[64];
    snprintf(jn, sizeof jn, "%s.weight", jo);
    MW(w->j_out.w, jn, w->n_out, J)
    snprintf(jn, sizeof jn, "%s.bias", jo);
    W(w->j_out.b, jn, 1, (int64_t)w->n_out)
#undef W
#undef MW
#undef MW4
    if (st) goto fail;
    if ((st = build_pos_table(w))) goto fail;
    return SR_OK;
fail:
    fc_model_unload(m);
    return st;
}
