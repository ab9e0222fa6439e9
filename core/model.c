/*
 * model.c — loading a model: open the HDF5 file, find the backend for its arch, pick the
 * kernel table, load the tokenizer, let the backend load its shape-checked tensors, and reject
 * files carrying tensors the backend did not use (a sign the config does not describe them).
 */
#include "dtype.h"
#include "plugin.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sr_options_init(sr_options *o)
{
    o->device = "cpu";
    o->threads = 0;
    o->precision = "f32";
}

const char *sr_model_arch(const sr_model *m) { return m ? m->arch : NULL; }
const char *sr_model_config(const sr_model *m) { return m ? m->config_text : NULL; }
const char *sr_model_warning(const sr_model *m) { return m ? m->warning : NULL; }

sr_status sr_detokenize_into(const sr_model *m, const int32_t *tokens, int n, sr_strbuf *b)
{
    sr_status st = sr_strbuf_append(b, "", 0); /* never a NULL text */
    if (!st && m->tokenizer) return sr_tokenizer_decode(m->tokenizer, tokens, n, b);
    for (int i = 0; !st && i < n; i++) /* a model without a tokenizer shows ids */
        st = sr_strbuf_printf(b, "%s<%d>", i ? " " : "", (int)tokens[i]);
    return st;
}

sr_status sr_model_detokenize(const sr_model *m, const int32_t *tokens, int n, char **out)
{
    *out = NULL;
    if (!m || n < 0 || (n && !tokens)) return sr_error(SR_ERR_ARG, "sr_model_detokenize: bad arguments");
    sr_strbuf b = {0};
    sr_status st = sr_detokenize_into(m, tokens, n, &b);
    if (st) { sr_strbuf_free(&b); return st; }
    *out = b.data;
    return SR_OK;
}

sr_status sr_model_tensor(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                          const int64_t *shape, const sr_tensor **out)
{
    *out = NULL;
    if (m->n_tensors == m->cap_tensors) {
        size_t cap = m->cap_tensors ? 2 * m->cap_tensors : 64;
        sr_tensor *t = realloc(m->tensors, cap * sizeof *t);
        if (!t) return sr_error(SR_ERR_NOMEM, "%s: out of memory for the tensor list", m->path);
        m->tensors = t;
        m->cap_tensors = cap;
    }
    sr_tensor *t = &m->tensors[m->n_tensors];
    sr_status st = sr_h5_tensor(f, name, want, ndim, shape, t);
    if (st) return st;
    m->n_tensors++;
    m->weight_bytes += t->nbytes;
    *out = t;
    return SR_OK;
}

/* A copy of `bytes` of host data in the model's table memory, freed at sr_model_free and
 * counted in weight_bytes (what: the tensor's name for errors). */
static sr_status table_copy(sr_model *m, const char *what, const void *host, size_t bytes, const float **out)
{
    if (m->n_tmem == m->cap_tmem) {
        size_t cap = m->cap_tmem ? 2 * m->cap_tmem : 64;
        void **g = realloc(m->tmem, cap * sizeof *g);
        if (!g) return sr_error(SR_ERR_NOMEM, "%s: out of memory for the table copies", m->path);
        m->tmem = g;
        m->cap_tmem = cap;
    }
    float *d = m->k->alloc(bytes);
    if (!d) return sr_error(SR_ERR_NOMEM, "%s: %s: %zu bytes of %s memory", m->path, what, bytes, m->k->name);
    m->tmem[m->n_tmem++] = d;
    sr_status st = m->k->upload(d, host, bytes);
    if (st) return sr_error_prefix(st, "%s: %s", m->path, what);
    m->weight_bytes += bytes;
    *out = d;
    return SR_OK;
}

sr_status sr_model_ftensor(sr_model *m, sr_h5 *f, const char *name, int ndim,
                           const int64_t *shape, const float **out)
{
    *out = NULL;
    const sr_tensor *t;
    sr_status st = sr_model_tensor(m, f, name, SR_F32, ndim, shape, &t);
    if (st) return st;
    if (m->k->host_visible) { /* host memory is the table's */
        *out = t->data;
        return SR_OK;
    }
    return table_copy(m, name, t->data, t->nbytes, out);
}

sr_status sr_model_fconst(sr_model *m, const char *what, const float *host, size_t n, const float **out)
{
    *out = NULL;
    return table_copy(m, what, host, n * sizeof(float), out);
}

sr_status sr_model_kweight(sr_model *m, const char *name, const void *host, sr_dtype dt,
                           const float *scale, int n, int k, sr_kweight **out)
{
    *out = NULL;
    /* precision bf16: bf16 products; i8 weights as the table prefers (their values are exact in
     * bf16, so either way the products are of the stored values) */
    int bf = m->bf16_products && (dt != SR_I8 || m->k->i8_fast_mul == SR_KMUL_BF16);
    uint16_t *b = NULL;
    if (bf && dt != SR_BF16 && dt != SR_I8) { /* precision bf16: f32 / f16 rounded to nearest even */
        size_t cnt = (size_t)n * (size_t)k;
        if (!(b = sr_malloc(cnt * sizeof *b, "bf16 weight"))) return SR_ERR_NOMEM;
        for (size_t i = 0; i < cnt; i++) {
            float v = dt == SR_F32 ? ((const float *)host)[i] : sr_f16_to_f32(((const uint16_t *)host)[i]);
            b[i] = sr_f32_to_bf16(v);
            if ((b[i] & 0x7f80u) == 0x7f80u) {
                free(b);
                return sr_error(SR_ERR_FORMAT, "%s: tensor %s: element %zu (%g) is beyond bf16's "
                                "range (precision bf16)", m->path, name, i, (double)v);
            }
        }
        host = b;
        dt = SR_BF16;
    }
    sr_status st = m->k->weight_create(host, dt, n, k, scale, bf ? SR_KMUL_BF16 : SR_KMUL_EXACT, out);
    free(b);
    if (st) return sr_error_prefix(st, "%s: tensor %s", m->path, name);
    return SR_OK;
}

sr_status sr_model_weight(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int n, int k,
                          const sr_kweight **out)
{
    int64_t shape[2] = {n, k};
    return sr_model_weight_nd(m, f, name, want, 2, shape, out);
}

/* Row r of a conv weight [out, in, width] from (in, width) order to (width, in) order: each
 * row is the in x width matrix transposed, element size z. tmp holds one row. */
static void taps_major(void *data, int64_t rows, int64_t in, int64_t width, size_t z, char *tmp)
{
    size_t rb = (size_t)(in * width) * z;
    for (int64_t r = 0; r < rows; r++) {
        char *row = (char *)data + (size_t)r * rb;
        for (int64_t c = 0; c < in; c++)
            for (int64_t t = 0; t < width; t++)
                memcpy(tmp + (size_t)(t * in + c) * z, row + (size_t)(c * width + t) * z, z);
        memcpy(row, tmp, rb);
    }
}

static sr_status weight_nd(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                           const int64_t *shape, int taps, const sr_kweight **out);

/* Room for one more entry in the model's weight list. */
static sr_status kweights_room(sr_model *m)
{
    if (m->n_kweights < m->cap_kweights) return SR_OK;
    size_t cap = m->cap_kweights ? 2 * m->cap_kweights : 64;
    sr_kweight **t = realloc(m->kweights, cap * sizeof *t);
    if (!t) return sr_error(SR_ERR_NOMEM, "%s: out of memory for the weight list", m->path);
    m->kweights = t;
    m->cap_kweights = cap;
    return SR_OK;
}

sr_status sr_model_weight_nd(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                             const int64_t *shape, const sr_kweight **out)
{
    return weight_nd(m, f, name, want, ndim, shape, 0, out);
}

sr_status sr_model_weight_taps(sr_model *m, sr_h5 *f, const char *name, sr_dtype want,
                               int64_t n_out, int64_t n_in, int64_t width, const sr_kweight **out)
{
    return weight_nd(m, f, name, want, 3, (const int64_t[]){n_out, n_in, width}, 1, out);
}

static sr_status weight_nd(sr_model *m, sr_h5 *f, const char *name, sr_dtype want, int ndim,
                           const int64_t *shape, int taps, const sr_kweight **out)
{
    *out = NULL;
    int64_t cols = 1;
    for (int i = 1; i < ndim; i++) cols *= shape[i];
    if (ndim < 2 || ndim > SR_MAX_DIMS || shape[0] < 1 || shape[0] > INT_MAX || cols < 1 ||
        cols > INT_MAX)
        return sr_error(SR_ERR_ARG, "%s: tensor %s: not a matrix shape for a weight", m->path, name);
    int n = (int)shape[0], k = (int)cols;
    sr_status st = sr_kernels_require(m->k, m->path);

    if (st || (st = kweights_room(m))) return st;
    sr_tensor t;
    if ((st = sr_h5_tensor(f, name, want, ndim, shape, &t))) return st;
    if (taps) {
        size_t z = sr_dtype_size(t.dtype);
        char *tmp = sr_malloc((size_t)k * z, "a weight row");
        if (!tmp) {
            sr_tensor_free(&t);
            return sr_error(SR_ERR_NOMEM, "%s: tensor %s: out of memory", m->path, name);
        }
        taps_major(t.data, n, shape[1], shape[2], z, tmp);
        free(tmp);
    }
    sr_kweight *w = NULL;
    st = sr_model_kweight(m, name, t.data, t.dtype, t.scale, n, k, &w);
    sr_tensor_free(&t);
    if (st) return st;
    m->kweights[m->n_kweights++] = w;
    m->weight_bytes += w->bytes;
    *out = w;
    return SR_OK;
}

sr_status sr_model_weight_cat(sr_model *m, sr_h5 *f, int count, const char *const *names,
                              const int *rows, sr_dtype want, int k, const sr_kweight **out)
{
    *out = NULL;
    if (count < 1 || count > SR_WEIGHT_CAT_MAX || k < 1)
        return sr_error(SR_ERR_ARG, "%s: fused weight of %d blocks (1..%d) and %d columns", m->path,
                        count, SR_WEIGHT_CAT_MAX, k);
    int64_t n = 0;
    for (int i = 0; i < count; i++) {
        if (rows[i] < 1) return sr_error(SR_ERR_ARG, "%s: tensor %s: %d rows", m->path, names[i], rows[i]);
        n += rows[i];
    }
    if (n > INT_MAX) return sr_error(SR_ERR_ARG, "%s: tensor %s and the rest: %lld rows in all",
                                     m->path, names[0], (long long)n);
    sr_status st = sr_kernels_require(m->k, m->path);
    if (st || (st = kweights_room(m))) return st;
    sr_tensor t[SR_WEIGHT_CAT_MAX];
    memset(t, 0, sizeof t);
    int got = 0, same = 1;
    for (; got < count; got++) {
        if ((st = sr_h5_tensor(f, names[got], want, 2, (const int64_t[]){rows[got], k}, &t[got]))) break;
        same &= t[got].dtype == t[0].dtype;
    }
    /* blocks stored in different element types: all widened to f32 (exact for f16 / bf16, i8
     * dequantized row by row), the products then as those of an f32 file */
    if (!st && !same) {
        for (int i = 0; i < count; i++) sr_tensor_free(&t[i]);
        for (got = 0; got < count; got++)
            if ((st = sr_h5_tensor(f, names[got], SR_F32, 2, (const int64_t[]){rows[got], k}, &t[got]))) break;
    }
    char *data = NULL;
    float *scale = NULL;
    const sr_dtype dt = st ? SR_F32 : t[0].dtype;
    if (!st) {
        size_t z = sr_dtype_size(dt), at = 0;
        data = sr_malloc((size_t)n * (size_t)k * z, "a fused weight");
        if (dt == SR_I8) scale = sr_malloc((size_t)n * sizeof(float), "a fused weight's scales");
        if (!data || (dt == SR_I8 && !scale)) {
            st = sr_error(SR_ERR_NOMEM, "%s: tensor %s and the rest: out of memory", m->path, names[0]);
        } else {
            for (int i = 0; i < count; i++) {
                memcpy(data + at * (size_t)k * z, t[i].data, (size_t)rows[i] * (size_t)k * z);
                if (scale) memcpy(scale + at, t[i].scale, (size_t)rows[i] * sizeof(float));
                at += (size_t)rows[i];
            }
        }
    }
    for (int i = 0; i < count; i++) sr_tensor_free(&t[i]); /* zeroed or read: both free */
    sr_kweight *w = NULL;
    if (!st) st = sr_model_kweight(m, names[0], data, dt, scale, (int)n, k, &w);
    free(data);
    free(scale);
    if (st) return st;
    m->kweights[m->n_kweights++] = w;
    m->weight_bytes += w->bytes;
    *out = w;
    return SR_OK;
}

/* The blocks' biases as one f32 vector [sum rows] in table memory: names[i] NULL for a block
 * without one (its entries -0.0f: t + -0 = t for every t, -0 included); *out NULL when no
 * block has a bias. */
static sr_status bias_cat(sr_model *m, sr_h5 *f, int count, const char *const *names,
                          const int *rows, const float **out)
{
    *out = NULL;
    size_t n = 0; /* the rows are sr_model_weight_cat's, checked there */
    int any = 0;
    for (int i = 0; i < count; i++) {
        n += (size_t)rows[i];
        any |= names[i] != NULL;
    }
    if (!any) return SR_OK;
    float *b = sr_malloc(n * sizeof(float), "a fused bias");
    if (!b) return sr_error(SR_ERR_NOMEM, "%s: out of memory for a fused bias", m->path);
    sr_status st = SR_OK;
    const char *first = NULL;
    for (size_t i = 0, at = 0; i < (size_t)count && !st; at += (size_t)rows[i], i++) {
        if (!names[i]) {
            for (int r = 0; r < rows[i]; r++) b[at + r] = -0.0f;
            continue;
        }
        if (!first) first = names[i];
        sr_tensor t;
        if ((st = sr_h5_tensor(f, names[i], SR_F32, 1, (const int64_t[]){rows[i]}, &t))) break;
        memcpy(b + at, t.data, (size_t)rows[i] * sizeof(float));
        sr_tensor_free(&t);
    }
    if (!st) st = sr_model_fconst(m, first, b, n, out);
    free(b);
    return st;
}

sr_status sr_model_linear_cat(sr_model *m, sr_h5 *f, const char *prefix, int count,
                              const char *const *names, const int *rows, const int *has_bias,
                              sr_dtype want, int k, const sr_kweight **w, const float **b)
{
    *w = NULL;
    *b = NULL;
    if (count < 1 || count > SR_WEIGHT_CAT_MAX)
        return sr_error(SR_ERR_ARG, "%s: %s: fused Linear of %d blocks (1..%d)", m->path, prefix,
                        count, SR_WEIGHT_CAT_MAX);
    char wn[SR_WEIGHT_CAT_MAX][256], bn[SR_WEIGHT_CAT_MAX][256];
    const char *wp[SR_WEIGHT_CAT_MAX], *bp[SR_WEIGHT_CAT_MAX];
    for (int i = 0; i < count; i++) {
        snprintf(wn[i], sizeof wn[i], "%s.%s.weight", prefix, names[i]);
        snprintf(bn[i], sizeof bn[i], "%s.%s.bias", prefix, names[i]);
        wp[i] = wn[i];
        bp[i] = has_bias && has_bias[i] ? bn[i] : NULL;
    }
    sr_status st = sr_model_weight_cat(m, f, count, wp, rows, want, k, w);
    return st ? st : bias_cat(m, f, count, bp, rows, b);
}

const cJSON *sr_cfg_item(const sr_model *m, const char *key)
{
    if (!m || !m->config || !key) return NULL;
    size_t i = 0;
    for (const cJSON *c = m->config->child; c; c = c->next, i++)
        if (c->string && !strcmp(c->string, key)) {
            if (m->cfg_read) m->cfg_read[i] = 1;
            return c;
        }
    return NULL;
}

static sr_status cfg_number(const sr_model *m, const char *key, int required, double *out)
{
    const cJSON *v = sr_cfg_item(m, key);
    if (!v) {
        if (required) return sr_error(SR_ERR_FORMAT, "%s: config.%s: missing", m->path, key);
        return SR_ERR_ARG; /* absent, caller uses its default; no message needed */
    }
    if (!cJSON_IsNumber(v))
        return sr_error(SR_ERR_FORMAT, "%s: config.%s: expected a number", m->path, key);
    *out = v->valuedouble;
    return SR_OK;
}

static sr_status cfg_int(const sr_model *m, const char *key, int required, int *out)
{
    double d = 0;
    sr_status st = cfg_number(m, key, required, &d);
    if (st) return st;
    if (!sr_whole_int(d, out))
        return sr_error(SR_ERR_FORMAT, "%s: config.%s: expected an integer, got %g", m->path, key, d);
    return SR_OK;
}

sr_status sr_cfg_int(const sr_model *m, const char *key, int *out) { return cfg_int(m, key, 1, out); }

sr_status sr_cfg_int_def(const sr_model *m, const char *key, int def, int *out)
{
    sr_status st = cfg_int(m, key, 0, out);
    if (st == SR_ERR_ARG) { *out = def; return SR_OK; }
    return st;
}

sr_status sr_cfg_float_def(const sr_model *m, const char *key, float def, float *out)
{
    double d = 0;
    sr_status st = cfg_number(m, key, 0, &d);
    if (st == SR_ERR_ARG) { *out = def; return SR_OK; }
    if (st) return st;
    float f = (float)d;
    if (!isfinite(f))
        return sr_error(SR_ERR_FORMAT, "%s: config.%s: %g is not a finite float", m->path, key, d);
    *out = f;
    return SR_OK;
}

static sr_status check_unused(const sr_model *m, sr_h5 *f)
{
    char **names = NULL;
    size_t n = 0;
    sr_status st = sr_h5_unused(f, &names, &n);
    if (st) return st;
    if (n)
        st = sr_error(SR_ERR_FORMAT,
                      "%s: tensor %s (and %zu more) is not used by arch %s with this config: the "
                      "config does not describe the file's weights",
                      m->path, names[0], n - 1, m->arch);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

/* SR_ERR_FORMAT for a top-level config key the backend neither read nor lists as information:
 * a typo ("max_symbol") or a key of another arch would otherwise leave a default in force. */
static sr_status check_config_keys(const sr_model *m)
{
    sr_strbuf b = {0};
    size_t i = 0, n = 0;
    sr_status st = SR_OK;
    for (const cJSON *c = m->config->child; c && !st; c = c->next, i++) {
        if (m->cfg_read[i]) continue;
        int info = 0;
        for (const char *const *k = m->ops->config_info; k && *k && !info; k++) info = !strcmp(*k, c->string);
        if (!info) st = sr_strbuf_printf(&b, "%sconfig.%s", n++ ? ", " : "", c->string);
    }
    if (!st && n)
        st = sr_error(SR_ERR_FORMAT, "%s: %s: not %s of arch %s (docs/model-format.md lists each "
                      "arch's keys)", m->path, b.data, n > 1 ? "keys" : "a key", m->arch);
    sr_strbuf_free(&b);
    return st;
}

/* SR_ERR_FORMAT when an object of the config (at any depth) has a key twice: JSON readers
 * disagree on which one wins, so the file does not say what the model is. */
static sr_status check_duplicates(const cJSON *o, const char *path, const char *where)
{
    if (cJSON_IsArray(o)) {
        int i = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, o) {
            char w[512];
            snprintf(w, sizeof w, "%s[%d]", where, i++);
            sr_status st = check_duplicates(c, path, w);
            if (st) return st;
        }
        return SR_OK;
    }
    if (!cJSON_IsObject(o)) return SR_OK;
    for (const cJSON *a = o->child; a; a = a->next) {
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && !strcmp(a->string, b->string))
                return sr_error(SR_ERR_FORMAT, "%s: %s.%s: the key appears more than once", path, where, a->string);
        char w[512];
        snprintf(w, sizeof w, "%s.%s", where, a->string ? a->string : "?");
        sr_status st = check_duplicates(a, path, w);
        if (st) return st;
    }
    return SR_OK;
}

sr_status sr_model_load(const char *h5_path, const sr_options *opt, sr_model **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_model_load: out is NULL");
    *out = NULL;
    if (!h5_path) return sr_error(SR_ERR_ARG, "sr_model_load: path is NULL");
    sr_model *m = sr_calloc(1, sizeof *m, "model");
    if (!m) return SR_ERR_NOMEM;
    if (opt) m->opt = *opt;
    else sr_options_init(&m->opt);
    if (!m->opt.device) m->opt.device = "cpu";
    if (!m->opt.precision) m->opt.precision = "f32";
    if (strcmp(m->opt.precision, "f32") && strcmp(m->opt.precision, "bf16")) {
        sr_status e = sr_error(SR_ERR_ARG, "%s: model option precision \"%s\" is not \"f32\" or \"bf16\"",
                               h5_path, m->opt.precision);
        free(m);
        return e;
    }
    m->bf16_products = !strcmp(m->opt.precision, "bf16");

    sr_h5 *f = NULL;
    sr_status st = sr_h5_open(h5_path, &f);
    if (st) goto fail;
    st = SR_ERR_NOMEM;
    if (!(m->path = sr_strdup(h5_path)) || !(m->arch = sr_strdup(sr_h5_arch(f))) ||
        !(m->config_text = sr_strdup(sr_h5_config(f))))
        goto fail;
    if ((st = sr_backend_find(m->arch, &m->ops))) {
        sr_error_prefix(st, "%s", h5_path);
        goto fail;
    }
    m->config = cJSON_Parse(m->config_text);
    if (!m->config || !cJSON_IsObject(m->config)) {
        st = sr_error(SR_ERR_FORMAT, "%s: attribute config is not a JSON object", h5_path);
        goto fail;
    }
    if ((st = check_duplicates(m->config, h5_path, "config"))) goto fail;
    if (!(m->cfg_read = sr_calloc((size_t)cJSON_GetArraySize(m->config) + 1, 1, "config keys"))) {
        st = SR_ERR_NOMEM;
        goto fail;
    }
    m->warning = sr_h5_warning(f);
    if ((st = sr_kernels_select(m->opt.device, &m->k))) goto fail;
    /* SRKIT_ALLOW_UNPORTED=1: run it anyway (porting a backend on "cpu-guard", which faults at
     * each host access to table memory) */
    const char *unported = getenv("SRKIT_ALLOW_UNPORTED");
    if (!m->k->host_visible && !m->ops->device_ready && !(unported && !strcmp(unported, "1"))) {
        st = sr_error(SR_ERR_UNSUPPORTED, "%s: the %s backend does not run on %s yet (its per-chunk "
                      "path still reads host memory); use device cpu", h5_path, m->arch, m->k->name);
        goto fail;
    }
    if (m->opt.threads > 0) m->k->set_threads(m->opt.threads);
    int has_tok = 0;
    if ((st = sr_h5_has_dataset(f, "/tokenizer/pieces_data", &has_tok)) ||
        (has_tok && (st = sr_tokenizer_load(f, &m->tokenizer))))
        goto fail;
    if ((st = m->ops->load(m, f))) goto fail;
    if ((st = check_unused(m, f)) || (st = check_config_keys(m))) {
        m->ops->unload(m);
        goto fail;
    }
    sr_h5_close(f);
    *out = m;
    return SR_OK;
fail:
    sr_h5_close(f);
    m->ops = NULL; /* unload already ran or was never due */
    sr_model_free(m);
    return st;
}

void sr_model_free(sr_model *m)
{
    if (!m) return;
    if (m->ops && m->impl) m->ops->unload(m);
    for (size_t i = 0; i < m->n_tensors; i++) sr_tensor_free(&m->tensors[i]);
    free(m->tensors);
    for (size_t i = 0; i < m->n_tmem; i++) m->k->free(m->tmem[i]);
    free(m->tmem);
    for (size_t i = 0; i < m->n_kweights; i++) m->k->weight_free(m->kweights[i]);
    free(m->kweights);
    sr_tokenizer_free(m->tokenizer);
    cJSON_Delete(m->config);
    free(m->cfg_read);
    free(m->config_text);
    free(m->arch);
    free(m->path);
    free(m);
}

/* The CPU table's op itself (host memory is its memory): one rule for every table. 1 <= k <=
 * vocab is the callers' (the beam engine's k = min(b + 1, vocab), a backend's checked top_k). */
void sr_aed_row_topk(const float *row, int vocab, int k, int32_t *id, float *lp)
{
    (void)sr_kernels_cpu()->topk(1, vocab, k, row, vocab, id, lp);
}

/* The argmax rule of the op table's topk (k = 1): a later column replaces the best one only if
 * it is larger, or the best is NaN and it is a number; so ties keep the lower id. */
void sr_aed_top_of_row(const float *row, int vocab, int32_t probe, int32_t eot, sr_aed_top *t)
{
    int32_t best = 0;
    float bv = row[0];
    for (int32_t v = 1; v < vocab; v++)
        if (row[v] > bv || (bv != bv && row[v] == row[v])) best = v, bv = row[v];
    t->best = best;
    t->best_lp = bv;
    t->tok_lp = probe >= 0 ? row[probe] : NAN;
    t->eot_lp = eot >= 0 ? row[eot] : NAN;
}
