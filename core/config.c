/*
 * config.c — experiment configs: one JSON file describes one experiment (DESIGN §8).
 *
 * Steps of sr_config_parse:
 *   1. cJSON parses the text; a syntax error is reported as "file: line L, column C" computed
 *      from the parse-end offset cJSON hands back (the per-call pointer, not the global
 *      cJSON_GetErrorPtr, so concurrent parses do not read each other's positions).
 *   2. Every string value in the tree is expanded in place: ${VAR} and ${VAR:-default} (the
 *      default used when VAR is unset or empty; defaults may nest), "$${" is a literal "${".
 *      SRKIT_HOME counts as set to $HOME/.cache/srkit when the environment lacks it.
 *   3. The tree is checked against a table of known fields (section, key, kind, lower bound)
 *      and written into a base sr_run_config that starts from the defaults. Wrong JSON types
 *      are SR_ERR_FORMAT, out-of-range values SR_ERR_ARG, unknown keys warnings (with an edit-
 *      distance "did you mean" hint), duplicate keys errors.
 *   4. "sweep" maps dotted field names to value lists. Every value is checked by the same
 *      setter as a value written in place. Run i of the cartesian product is decoded as a
 *      mixed-radix number with the last sweep key as the fastest digit, so runs come out in
 *      file order, last key varying fastest.
 * Every string a run points at lives in the expanded cJSON tree or in the config's own string
 * pool, both released by sr_config_free. No global state: the config is thread-safe to build
 * and read-only afterwards (the environment is only read).
 */
#include "internal.h"

#include <cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CONFIG_MAX_RUNS 10000
#define CONFIG_MAX_EXPAND_DEPTH 8

void sr_stream_config_init(sr_stream_config *c)
{
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->strategy = NULL;
    c->decoder = NULL;
    c->chunk_ms = 0;
    c->first_chunk_ms = 0;
    c->stability_n = 2;
    c->beam = 1;
    c->max_symbols = 0;
    c->att_context[0] = 0;
    c->att_context[1] = 0;
    c->decoder_kv_cache = 0;
    c->delay_tokens = 0;
    c->record_timeline = 1;
    c->repetition_guard = 1;
    c->cache_dtype = NULL;
    c->max_seconds = 0;
    c->final_steps = 0;
}

/* ---- the schema --------------------------------------------------------------------------- */

typedef enum {
    K_NAME,     /* non-empty string usable as a folder name */
    K_STR,      /* non-empty string */
    K_STR_NULL, /* null or a non-empty string */
    K_ENUM,     /* one of a fixed list of strings */
    K_INT,      /* integer >= min (300.0 accepted, 300.5 not) */
    K_BOOL,     /* true / false */
    K_PAIR,     /* [int >= min, int >= min] */
    K_NUM       /* finite number >= 0 */
} field_kind;

typedef struct field_def {
    const char *section; /* "" for top-level keys */
    const char *key;
    const char *path;    /* dotted name used in messages and sweep keys */
    field_kind kind;
    int min;
    const char *const *choices; /* K_ENUM: NULL-terminated */
    size_t offset;              /* into sr_run_config */
    double max;                 /* K_INT / K_PAIR / K_NUM: the largest value (docs/config.md);
                                   sizes derived from it (chunk_ms x 16 samples) fit an int */
} field_def;

static const char *const DEVICES[] = {"cpu", "cuda", NULL};
static const char *const FORMATS[] = {"auto", "librispeech", "manifest", "kaldi", "trn", NULL};
static const char *const NORMALIZERS[] = {"whisper_en", "basic", "none", NULL};
static const char *const CACHE_DTYPES[] = {"f32", "f16", "bf16", NULL};
static const char *const PRECISIONS[] = {"f32", "bf16", NULL};

#define OFF(m) offsetof(sr_run_config, m)
static const field_def FIELDS[] = {
    {"", "name", "name", K_NAME, 0, NULL, OFF(name), 0},
    {"model", "path", "model.path", K_STR, 0, NULL, OFF(model.path), 0},
    {"model", "device", "model.device", K_ENUM, 0, DEVICES, OFF(model.device), 0},
    {"model", "threads", "model.threads", K_INT, 0, NULL, OFF(model.threads), 1024},
    {"model", "precision", "model.precision", K_ENUM, 0, PRECISIONS, OFF(model.precision), 0},
    {"stream", "strategy", "stream.strategy", K_STR_NULL, 0, NULL, OFF(stream.strategy), 0},
    {"stream", "decoder", "stream.decoder", K_STR_NULL, 0, NULL, OFF(stream.decoder), 0},
    {"stream", "chunk_ms", "stream.chunk_ms", K_INT, 1, NULL, OFF(stream.chunk_ms), SR_CHUNK_MS_MAX},
    {"stream", "first_chunk_ms", "stream.first_chunk_ms", K_INT, 0, NULL, OFF(stream.first_chunk_ms), SR_CHUNK_MS_MAX},
    {"stream", "stability_n", "stream.stability_n", K_INT, 1, NULL, OFF(stream.stability_n), SR_STABILITY_N_MAX},
    {"stream", "beam", "stream.beam", K_INT, 1, NULL, OFF(stream.beam), SR_BEAM_MAX},
    {"stream", "max_symbols", "stream.max_symbols", K_INT, 0, NULL, OFF(stream.max_symbols), SR_MAX_SYMBOLS_MAX},
    {"stream", "att_context", "stream.att_context", K_PAIR, -1, NULL, OFF(stream.att_context), SR_ATT_CONTEXT_MAX},
    {"stream", "decoder_kv_cache", "stream.decoder_kv_cache", K_BOOL, 0, NULL,
     OFF(stream.decoder_kv_cache), 0},
    {"stream", "delay_tokens", "stream.delay_tokens", K_INT, 0, NULL, OFF(stream.delay_tokens), SR_DELAY_TOKENS_MAX},
    {"stream", "record_timeline", "stream.record_timeline", K_BOOL, 0, NULL,
     OFF(stream.record_timeline), 0},
    {"stream", "cache_dtype", "stream.cache_dtype", K_ENUM, 0, CACHE_DTYPES, OFF(stream.cache_dtype), 0},
    {"stream", "repetition_guard", "stream.repetition_guard", K_BOOL, 0, NULL,
     OFF(stream.repetition_guard), 0},
    {"stream", "max_seconds", "stream.max_seconds", K_INT, 0, NULL, OFF(stream.max_seconds), SR_MAX_SECONDS_MAX},
    {"stream", "final_steps", "stream.final_steps", K_INT, 0, NULL, OFF(stream.final_steps), SR_FINAL_STEPS_MAX},
    {"data", "format", "data.format", K_ENUM, 0, FORMATS, OFF(data.format), 0},
    {"data", "path", "data.path", K_STR, 0, NULL, OFF(data.path), 0},
    {"data", "limit", "data.limit", K_INT, 0, NULL, OFF(data.limit), 1e9},
    {"", "alignments", "alignments", K_STR_NULL, 0, NULL, OFF(alignments), 0},
    {"", "normalizer", "normalizer", K_ENUM, 0, NORMALIZERS, OFF(normalizer), 0},
    {"", "output", "output", K_STR, 0, NULL, OFF(output), 0},
    {"baseline", "path", "baseline.path", K_STR, 0, NULL, OFF(baseline.path), 0},
    {"baseline", "max_wer_increase", "baseline.max_wer_increase", K_NUM, 0, NULL,
     OFF(baseline.max_wer_increase), 1e6},
    {"baseline", "max_rtf_increase", "baseline.max_rtf_increase", K_NUM, 0, NULL,
     OFF(baseline.max_rtf_increase), 1e6},
};
#undef OFF
#define N_FIELDS SR_ARRAY_LEN(FIELDS)

/* Objects that group fields; model and data are required because their paths are. */
static const char *const SECTIONS[] = {"model", "stream", "data", "baseline"};

static const field_def *field_by_key(const char *section, const char *key)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(FIELDS[i].section, section) && !strcmp(FIELDS[i].key, key)) return &FIELDS[i];
    return NULL;
}

static const field_def *field_by_path(const char *path)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(FIELDS[i].path, path)) return &FIELDS[i];
    return NULL;
}

static int is_section(const char *key)
{
    for (size_t i = 0; i < SR_ARRAY_LEN(SECTIONS); i++)
        if (!strcmp(SECTIONS[i], key)) return 1;
    return 0;
}

/* ---- the config object -------------------------------------------------------------------- */

struct sr_config {
    char *origin;         /* file name or caller's label, prefixed to every message */
    cJSON *root;          /* the expanded tree; run strings point into it */
    char *json;           /* compact print of root (cJSON allocation) */
    sr_run_config *runs;
    size_t n_runs;
    char **warnings;
    size_t n_warnings, cap_warnings;
    char **pool; /* strings built here (run names, sweep points, default output) */
    size_t n_pool, cap_pool;
};

/* Keep s (malloc'ed) alive until sr_config_free; frees it and fails when the pool can't grow. */
static sr_status pool_keep(sr_config *c, char *s)
{
    if (c->n_pool == c->cap_pool) {
        size_t cap = c->cap_pool ? 2 * c->cap_pool : 16;
        char **p = realloc(c->pool, cap * sizeof *p);
        if (!p) {
            free(s);
            return sr_error(SR_ERR_NOMEM, "%s: out of memory growing the string pool", c->origin);
        }
        c->pool = p;
        c->cap_pool = cap;
    }
    c->pool[c->n_pool++] = s;
    return SR_OK;
}

static sr_status add_warning(sr_config *c, const char *fmt, ...) SR_PRINTF(2, 3);
static sr_status add_warning(sr_config *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return sr_error(SR_ERR_ARG, "%s: bad warning format", c->origin);
    char *s = sr_malloc((size_t)n + 1, "config warning");
    if (!s) return SR_ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (c->n_warnings == c->cap_warnings) {
        size_t cap = c->cap_warnings ? 2 * c->cap_warnings : 8;
        char **p = realloc(c->warnings, cap * sizeof *p);
        if (!p) {
            free(s);
            return sr_error(SR_ERR_NOMEM, "%s: out of memory storing a warning", c->origin);
        }
        c->warnings = p;
        c->cap_warnings = cap;
    }
    c->warnings[c->n_warnings++] = s;
    return SR_OK;
}

void sr_config_free(sr_config *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_warnings; i++) free(c->warnings[i]);
    for (size_t i = 0; i < c->n_pool; i++) free(c->pool[i]);
    free(c->warnings);
    free(c->pool);
    free(c->runs);
    if (c->json) cJSON_free(c->json);
    cJSON_Delete(c->root);
    free(c->origin);
    free(c);
}

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "boolean";
    if (cJSON_IsNumber(v)) return "number";
    if (cJSON_IsString(v)) return "string";
    if (cJSON_IsArray(v)) return "array";
    if (cJSON_IsObject(v)) return "object";
    return "invalid value";
}

/* Case-insensitive Levenshtein distance, capped: names longer than 63 bytes never match. */
static int edit_distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return INT_MAX;
    int row[64];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* Length of a name's first word: up to the first '_' or the end. */
static size_t stem_len(const char *s)
{
    const char *u = strchr(s, '_');
    return u ? (size_t)(u - s) : strlen(s);
}

/* The candidate a misspelt name most likely meant, or NULL: the nearest one within edit
 * distance 2 (and closer than the name's own length, so "x" is not "corrected" to "n");
 * failing that, the only candidate that shares the name's first word ("chunk_size" ->
 * "chunk_ms") or of which the name is a prefix ("max_wer" -> "max_wer_increase"), where that
 * shared part has at least 4 characters. */
static const char *closest(const char *name, const char *const *cand, size_t n)
{
    const char *best = NULL;
    int best_d = 3;
    int len = (int)strlen(name);
    for (size_t i = 0; i < n; i++) {
        int d = edit_distance(name, cand[i]);
        if (d < best_d && d < len) {
            best = cand[i];
            best_d = d;
        }
    }
    if (best) return best;
    size_t stem = stem_len(name), hits = 0;
    for (size_t i = 0; i < n; i++) {
        int same_stem = stem >= 4 && stem_len(cand[i]) == stem && !strncmp(name, cand[i], stem);
        int prefix = len >= 4 && !strncmp(name, cand[i], (size_t)len);
        if (same_stem || prefix) {
            best = cand[i];
            hits++;
        }
    }
    return hits == 1 ? best : NULL;
}

/* Hint for an unknown key found in `section` ("" = top level): a near key at the same level,
 * else an exact key name that belongs to another section. Returns "" when nothing fits. */
static void unknown_key_hint(const char *section, const char *key, char *hint, size_t cap)
{
    const char *cand[N_FIELDS + SR_ARRAY_LEN(SECTIONS) + 1];
    size_t n = 0;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(FIELDS[i].section, section)) cand[n++] = FIELDS[i].key;
    if (!*section) {
        for (size_t i = 0; i < SR_ARRAY_LEN(SECTIONS); i++) cand[n++] = SECTIONS[i];
        cand[n++] = "sweep";
    }
    const char *near = closest(key, cand, n);
    hint[0] = '\0';
    if (near) {
        snprintf(hint, cap, "; did you mean %s?", near);
        return;
    }
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(FIELDS[i].key, key) && strcmp(FIELDS[i].section, section)) {
            snprintf(hint, cap, "; did you mean %s?", FIELDS[i].path);
            return;
        }
}

/* A key that appears twice in one object is ambiguous (cJSON keeps both): reject it. */
static sr_status check_duplicate(const sr_config *c, const cJSON *parent, const cJSON *item,
                                 const char *where)
{
    for (const cJSON *p = parent->child; p && p != item; p = p->next)
        if (p->string && !strcmp(p->string, item->string))
            return sr_error(SR_ERR_FORMAT, "%s: duplicate key %s%s%s", c->origin, where,
                            *where ? "." : "", item->string);
    return SR_OK;
}

/* ---- ${VAR} expansion --------------------------------------------------------------------- */

/* Value of an environment variable for expansion (*v NULL when unset). SRKIT_HOME falls back
 * to $HOME/.cache/srkit, built in *tmp, which the caller frees. */
static sr_status env_value(const sr_config *c, const char *name, const char **v, char **tmp)
{
    *tmp = NULL;
    *v = getenv(name);
    if (strcmp(name, "SRKIT_HOME") || (*v && **v)) return SR_OK;
    *v = NULL;
    const char *home = getenv("HOME");
    if (!home || !*home) return SR_OK;
    size_t n = strlen(home) + sizeof "/.cache/srkit";
    *tmp = malloc(n);
    if (!*tmp) return sr_error(SR_ERR_NOMEM, "%s: out of memory expanding SRKIT_HOME", c->origin);
    snprintf(*tmp, n, "%s/.cache/srkit", home);
    *v = *tmp;
    return SR_OK;
}

static sr_status expand_string(const sr_config *c, const char *field, const char *in, size_t n,
                               int depth, sr_strbuf *out)
{
    if (depth > CONFIG_MAX_EXPAND_DEPTH)
        return sr_error(SR_ERR_ARG, "%s: %s: ${...} defaults nested more than %d deep", c->origin,
                        field, CONFIG_MAX_EXPAND_DEPTH);
    sr_status st = SR_OK;
    size_t i = 0;
    while (i < n && !st) {
        if (in[i] == '$' && i + 2 < n && in[i + 1] == '$' && in[i + 2] == '{') {
            st = sr_strbuf_append(out, "${", 2); /* "$${" escapes a literal "${" */
            i += 3;
            continue;
        }
        if (!(in[i] == '$' && i + 1 < n && in[i + 1] == '{')) {
            size_t j = i + 1;
            while (j < n && in[j] != '$') j++;
            st = sr_strbuf_append(out, in + i, j - i);
            i = j;
            continue;
        }
        size_t name0 = i + 2, j = name0;
        if (j < n && (isalpha((unsigned char)in[j]) || in[j] == '_'))
            while (j < n && (isalnum((unsigned char)in[j]) || in[j] == '_')) j++;
        size_t name_len = j - name0;
        int has_default = j + 1 < n && in[j] == ':' && in[j + 1] == '-';
        if (!name_len || (j >= n) || (in[j] != '}' && !has_default)) {
            int show = (int)SR_MIN(n - i, (size_t)24);
            return sr_error(SR_ERR_ARG,
                            "%s: %s: bad variable reference \"%.*s\": write ${NAME} or "
                            "${NAME:-default} (NAME of letters, digits and _; $${ for a "
                            "literal ${)",
                            c->origin, field, show, in + i);
        }
        char name[256];
        if (name_len >= sizeof name)
            return sr_error(SR_ERR_ARG, "%s: %s: variable name longer than %zu characters",
                            c->origin, field, sizeof name - 1);
        memcpy(name, in + name0, name_len);
        name[name_len] = '\0';
        size_t end; /* index of the closing brace */
        size_t def0 = j + 2;
        if (has_default) {
            int open = 1;
            size_t k = def0;
            while (k < n) {
                if (in[k] == '$' && k + 2 < n && in[k + 1] == '$' && in[k + 2] == '{') {
                    k += 3;
                } else if (in[k] == '$' && k + 1 < n && in[k + 1] == '{') {
                    open++;
                    k += 2;
                } else if (in[k] == '}') {
                    if (--open == 0) break;
                    k++;
                } else {
                    k++;
                }
            }
            if (k >= n)
                return sr_error(SR_ERR_ARG, "%s: %s: ${%s:-... has no closing }", c->origin,
                                field, name);
            end = k;
        } else {
            end = j;
        }
        char *tmp;
        const char *v;
        if ((st = env_value(c, name, &v, &tmp))) return st;
        if (v && (*v || !has_default)) {
            st = sr_strbuf_append(out, v, strlen(v));
        } else if (has_default) {
            st = expand_string(c, field, in + def0, end - def0, depth + 1, out);
        } else if (!strcmp(name, "SRKIT_HOME")) {
            st = sr_error(SR_ERR_ARG,
                          "%s: %s: ${SRKIT_HOME} is not set and neither is HOME, which it "
                          "defaults from",
                          c->origin, field);
        } else {
            st = sr_error(SR_ERR_ARG,
                          "%s: %s: environment variable %s is not set (write ${%s:-default} "
                          "to give a default)",
                          c->origin, field, name, name);
        }
        free(tmp);
        i = end + 1;
    }
    return st;
}

/* Expand every string value of the tree in place; path is the dotted field name so far. */
static sr_status expand_tree(const sr_config *c, cJSON *node, sr_strbuf *path, sr_strbuf *scratch)
{
    if (cJSON_IsString(node)) {
        if (!strchr(node->valuestring, '$')) return SR_OK;
        sr_strbuf_clear(scratch);
        sr_status st = sr_strbuf_append(scratch, "", 0);
        if (!st)
            st = expand_string(c, path->data ? path->data : "", node->valuestring,
                               strlen(node->valuestring), 0, scratch);
        if (st) return st;
        if (!cJSON_SetValuestring(node, scratch->data))
            return sr_error(SR_ERR_NOMEM, "%s: %s: out of memory expanding", c->origin,
                            path->data ? path->data : "");
        return SR_OK;
    }
    if (!cJSON_IsArray(node) && !cJSON_IsObject(node)) return SR_OK;
    size_t keep = path->len;
    int idx = 0;
    for (cJSON *ch = node->child; ch; ch = ch->next, idx++) {
        sr_status st;
        if (cJSON_IsObject(node))
            st = sr_strbuf_printf(path, "%s%s", keep ? "." : "", ch->string ? ch->string : "");
        else
            st = sr_strbuf_printf(path, "[%d]", idx);
        if (!st) st = expand_tree(c, ch, path, scratch);
        path->len = keep;
        if (path->data) path->data[keep] = '\0';
        if (st) return st;
    }
    return SR_OK;
}

/* ---- typed setters ------------------------------------------------------------------------ */

static sr_status get_int(const sr_config *c, const cJSON *v, const char *where, int min, double max,
                         int *out)
{
    if (!cJSON_IsNumber(v))
        return sr_error(SR_ERR_FORMAT, "%s: %s: expected an integer, got %s", c->origin, where,
                        type_name(v));
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return sr_error(SR_ERR_FORMAT, "%s: %s: expected an integer, got %.15g", c->origin, where,
                        d);
    if (d < (double)INT_MIN || d > (double)INT_MAX)
        return sr_error(SR_ERR_ARG, "%s: %s: %.15g is out of range for an integer", c->origin,
                        where, d);
    if (d < (double)min || (max > 0 && d > max))
        return sr_error(SR_ERR_ARG, "%s: %s: must be in %d .. %.15g, got %.15g", c->origin, where, min,
                        max, d);
    *out = (int)d;
    return SR_OK;
}

/* Check v against f and store it into rc. `where` names the value in messages (the field path,
 * or "sweep.<path>[i]" for a sweep value). Never allocates: strings stay in the tree. */
static sr_status set_field(const sr_config *c, const field_def *f, const cJSON *v,
                           const char *where, sr_run_config *rc)
{
    char *dst = (char *)rc + f->offset;
    switch (f->kind) {
    case K_NAME:
    case K_STR:
    case K_STR_NULL: {
        if (f->kind == K_STR_NULL && cJSON_IsNull(v)) {
            *(const char **)dst = NULL;
            return SR_OK;
        }
        if (!cJSON_IsString(v))
            return sr_error(SR_ERR_FORMAT, "%s: %s: expected a string%s, got %s", c->origin,
                            where, f->kind == K_STR_NULL ? " or null" : "", type_name(v));
        const char *s = v->valuestring;
        if (!*s)
            return sr_error(SR_ERR_ARG, "%s: %s: must not be empty%s", c->origin, where,
                            f->kind == K_STR_NULL ? " (use null for none)" : "");
        if (f->kind == K_NAME) {
            /* The name becomes a folder (results/<name>) and prefixes run names. */
            int bad = !strcmp(s, ".") || !strcmp(s, "..") || strchr(s, '/') || strchr(s, '\\');
            for (const char *p = s; *p && !bad; p++) bad = (unsigned char)*p < 0x20;
            if (bad)
                return sr_error(SR_ERR_ARG,
                                "%s: %s: \"%s\" is not usable as a folder name (no '/', '\\', "
                                "control characters, \".\" or \"..\")",
                                c->origin, where, s);
        }
        *(const char **)dst = s;
        return SR_OK;
    }
    case K_ENUM: {
        if (!cJSON_IsString(v))
            return sr_error(SR_ERR_FORMAT, "%s: %s: expected a string, got %s", c->origin, where,
                            type_name(v));
        for (const char *const *ch = f->choices; *ch; ch++)
            if (!strcmp(*ch, v->valuestring)) {
                *(const char **)dst = *ch;
                return SR_OK;
            }
        char list[128] = "";
        for (const char *const *ch = f->choices; *ch; ch++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     ch == f->choices ? "" : ", ", *ch);
        return sr_error(SR_ERR_ARG, "%s: %s: \"%s\" is not one of %s", c->origin, where,
                        v->valuestring, list);
    }
    case K_INT:
        return get_int(c, v, where, f->min, f->max, (int *)dst);
    case K_BOOL:
        if (!cJSON_IsBool(v))
            return sr_error(SR_ERR_FORMAT, "%s: %s: expected a boolean (true or false), got %s",
                            c->origin, where, type_name(v));
        *(int *)dst = cJSON_IsTrue(v) ? 1 : 0;
        return SR_OK;
    case K_PAIR: {
        if (!cJSON_IsArray(v))
            return sr_error(SR_ERR_FORMAT,
                            "%s: %s: expected an array of 2 integers [left, right], got %s",
                            c->origin, where, type_name(v));
        int n = cJSON_GetArraySize(v);
        if (n != 2)
            return sr_error(SR_ERR_ARG, "%s: %s: expected 2 integers [left, right], got %d",
                            c->origin, where, n);
        int pair[2];
        for (int k = 0; k < 2; k++) {
            char sub[320];
            snprintf(sub, sizeof sub, "%s[%d]", where, k);
            sr_status st = get_int(c, cJSON_GetArrayItem(v, k), sub, f->min, f->max, &pair[k]);
            if (st) return st;
        }
        memcpy(dst, pair, sizeof pair);
        return SR_OK;
    }
    case K_NUM: {
        if (!cJSON_IsNumber(v))
            return sr_error(SR_ERR_FORMAT, "%s: %s: expected a number, got %s", c->origin, where,
                            type_name(v));
        double d = v->valuedouble;
        if (!isfinite(d) || d < 0 || d > f->max)
            return sr_error(SR_ERR_ARG, "%s: %s: must be a number in 0 .. %.15g, got %.15g",
                            c->origin, where, f->max, d);
        *(double *)dst = d;
        return SR_OK;
    }
    }
    return sr_error(SR_ERR_ARG, "%s: %s: unhandled field kind", c->origin, where);
}

/* ---- parsing ------------------------------------------------------------------------------ */

/* "line L, column C near '...'" for a byte offset; columns count UTF-8 characters. */
static sr_status syntax_error(const sr_config *c, const char *text, size_t off)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            col++;
        }
    }
    const char *at = text + off;
    if (!*at)
        return sr_error(SR_ERR_FORMAT, "%s: line %zu, column %zu: JSON syntax error at end of input",
                        c->origin, line, col);
    char near[32];
    size_t k = 0;
    while (k < 24 && at[k] && at[k] != '\n' && at[k] != '\r') {
        unsigned char b = (unsigned char)at[k];
        near[k] = b < 0x20 || b == 0x7F ? '?' : (char)b; /* keep the message printable */
        k++;
    }
    /* Do not cut a UTF-8 sequence in half at the end of the excerpt. */
    size_t lead = k;
    while (lead > 0 && ((unsigned char)near[lead - 1] & 0xC0) == 0x80) lead--;
    if (lead > 0 && ((unsigned char)near[lead - 1] & 0x80)) {
        unsigned char b = (unsigned char)near[lead - 1];
        size_t want = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        if (lead - 1 + want > k) k = lead - 1;
    }
    near[k] = '\0';
    return sr_error(SR_ERR_FORMAT, "%s: line %zu, column %zu: JSON syntax error near '%s'",
                    c->origin, line, col, near);
}

typedef struct sweep_axis {
    const field_def *f;
    const cJSON *values; /* the array */
    int n;
} sweep_axis;

/* Validate one section object (or the top level when section is "") into rc. */
static sr_status read_section(sr_config *c, const cJSON *obj, const char *section,
                              sr_run_config *rc, unsigned char *seen)
{
    for (const cJSON *m = obj->child; m; m = m->next) {
        sr_status st = check_duplicate(c, obj, m, section);
        if (st) return st;
        const field_def *f = field_by_key(section, m->string);
        if (!f) {
            char hint[96];
            unknown_key_hint(section, m->string, hint, sizeof hint);
            st = add_warning(c, "%s: unknown key %s%s%s (ignored)%s", c->origin, section,
                             *section ? "." : "", m->string, hint);
            if (st) return st;
            continue;
        }
        if ((st = set_field(c, f, m, f->path, rc))) return st;
        seen[f - FIELDS] = 1;
    }
    return SR_OK;
}

/* "value" text of a sweep point: strings raw, everything else as compact JSON. */
static char *point_value(const cJSON *v)
{
    if (cJSON_IsString(v)) return sr_strdup(v->valuestring);
    char *p = cJSON_PrintUnformatted(v);
    if (!p) {
        sr_error(SR_ERR_NOMEM, "out of memory printing a sweep value");
        return NULL;
    }
    char *s = sr_strdup(p);
    cJSON_free(p);
    return s;
}

static sr_status read_sweep(sr_config *c, const cJSON *sweep, sweep_axis *axes, size_t *n_axes,
                            unsigned char *seen, size_t *n_runs)
{
    *n_axes = 0;
    *n_runs = 1;
    if (!sweep || cJSON_IsNull(sweep)) return SR_OK;
    if (!cJSON_IsObject(sweep))
        return sr_error(SR_ERR_FORMAT,
                        "%s: sweep: expected an object {\"field\": [values], ...}, got %s",
                        c->origin, type_name(sweep));
    for (const cJSON *m = sweep->child; m; m = m->next) {
        sr_status st = check_duplicate(c, sweep, m, "sweep");
        if (st) return st;
        if (!strcmp(m->string, "name"))
            return sr_error(SR_ERR_ARG, "%s: sweep.name: name cannot be swept (it names the runs)",
                            c->origin);
        const field_def *f = field_by_path(m->string);
        if (!f) {
            const char *paths[N_FIELDS];
            for (size_t i = 0; i < N_FIELDS; i++) paths[i] = FIELDS[i].path;
            const char *near = closest(m->string, paths, N_FIELDS);
            if (near)
                return sr_error(SR_ERR_ARG, "%s: sweep: unknown field %s; did you mean %s?",
                                c->origin, m->string, near);
            return sr_error(SR_ERR_ARG,
                            "%s: sweep: unknown field %s (sweep keys are dotted field names "
                            "such as stream.chunk_ms)",
                            c->origin, m->string);
        }
        if (!cJSON_IsArray(m))
            return sr_error(SR_ERR_FORMAT, "%s: sweep.%s: expected an array of values, got %s",
                            c->origin, m->string, type_name(m));
        int n = cJSON_GetArraySize(m);
        if (n == 0)
            return sr_error(SR_ERR_ARG, "%s: sweep.%s: empty list of values", c->origin,
                            m->string);
        int idx = 0;
        for (const cJSON *v = m->child; v; v = v->next, idx++) {
            char where[320];
            snprintf(where, sizeof where, "sweep.%s[%d]", m->string, idx);
            sr_run_config scratch;
            memset(&scratch, 0, sizeof scratch);
            if ((st = set_field(c, f, v, where, &scratch))) return st;
            /* Equal values would give two runs with one name. */
            int prev_idx = 0;
            for (const cJSON *p = m->child; p != v; p = p->next, prev_idx++)
                if (cJSON_Compare(p, v, 1)) {
                    char *txt = point_value(v);
                    st = sr_error(SR_ERR_ARG, "%s: %s: value %s repeats sweep.%s[%d]", c->origin,
                                  where, txt ? txt : "?", m->string, prev_idx);
                    free(txt);
                    return st;
                }
        }
        if (*n_runs > CONFIG_MAX_RUNS / (size_t)n)
            return sr_error(SR_ERR_ARG, "%s: sweep: more than %d runs (the product of the list "
                            "lengths up to sweep.%s already exceeds it)",
                            c->origin, CONFIG_MAX_RUNS, m->string);
        *n_runs *= (size_t)n;
        axes[*n_axes].f = f;
        axes[*n_axes].values = m;
        axes[*n_axes].n = n;
        (*n_axes)++;
        seen[f - FIELDS] = 1;
    }
    return SR_OK;
}

static sr_status build_runs(sr_config *c, const sr_run_config *base, const sweep_axis *axes,
                            size_t n_axes, size_t n_runs)
{
    c->runs = sr_calloc(n_runs, sizeof *c->runs, "config runs");
    if (!c->runs) return SR_ERR_NOMEM;
    c->n_runs = n_runs;
    sr_strbuf point = {0}, name = {0};
    sr_status st = SR_OK;
    for (size_t i = 0; i < n_runs && !st; i++) {
        sr_run_config *rc = &c->runs[i];
        *rc = *base;
        if (!n_axes) {
            rc->sweep_point = "";
            continue;
        }
        int idx[N_FIELDS];
        size_t rest = i;
        for (size_t k = n_axes; k-- > 0;) {
            idx[k] = (int)(rest % (size_t)axes[k].n);
            rest /= (size_t)axes[k].n;
        }
        sr_strbuf_clear(&point);
        for (size_t k = 0; k < n_axes && !st; k++) {
            const cJSON *v = cJSON_GetArrayItem(axes[k].values, idx[k]);
            char where[320];
            snprintf(where, sizeof where, "sweep.%s[%d]", axes[k].f->path, idx[k]);
            if ((st = set_field(c, axes[k].f, v, where, rc))) break;
            char *txt = point_value(v);
            if (!txt) {
                st = SR_ERR_NOMEM;
                break;
            }
            st = sr_strbuf_printf(&point, "%s%s=%s", k ? "," : "", axes[k].f->path, txt);
            free(txt);
        }
        if (st) break;
        sr_strbuf_clear(&name);
        if ((st = sr_strbuf_printf(&name, "%s[%s]", base->name, point.data))) break;
        char *p = sr_strdup(point.data), *nm = sr_strdup(name.data);
        if (!p || !nm) {
            free(p);
            free(nm);
            st = SR_ERR_NOMEM;
            break;
        }
        if ((st = pool_keep(c, p))) {
            free(nm);
            break;
        }
        if ((st = pool_keep(c, nm))) break;
        rc->sweep_point = p;
        rc->name = nm;
    }
    sr_strbuf_free(&point);
    sr_strbuf_free(&name);
    return st;
}

static sr_status parse_into(sr_config *c, const char *json)
{
    const char *text = json;
    /* Editors on some systems write a UTF-8 byte order mark; JSON parsers must not see it. */
    size_t bom = (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
                         (unsigned char)text[2] == 0xBF
                     ? 3
                     : 0;
    text += bom;
    const char *end = NULL;
    c->root = cJSON_ParseWithOpts(text, &end, 1);
    if (!c->root) return syntax_error(c, text, end && end >= text ? (size_t)(end - text) : 0);
    if (!cJSON_IsObject(c->root))
        return sr_error(SR_ERR_FORMAT, "%s: expected a JSON object at the top level, got %s",
                        c->origin, type_name(c->root));

    sr_strbuf path = {0}, scratch = {0};
    sr_status st = expand_tree(c, c->root, &path, &scratch);
    sr_strbuf_free(&path);
    sr_strbuf_free(&scratch);
    if (st) return st;

    sr_run_config base;
    memset(&base, 0, sizeof base);
    base.sweep_point = "";
    base.model.device = "cpu";
    base.model.threads = 0;
    base.model.precision = "f32";
    sr_stream_config_init(&base.stream);
    base.data.format = "auto";
    base.data.limit = 0;
    base.alignments = NULL;
    base.normalizer = "whisper_en";
    base.baseline.path = NULL;
    base.baseline.max_wer_increase = 0.5;
    base.baseline.max_rtf_increase = 0;

    unsigned char seen[N_FIELDS] = {0};
    const cJSON *sweep = NULL;
    int baseline_given = 0;
    for (const cJSON *m = c->root->child; m; m = m->next) {
        if ((st = check_duplicate(c, c->root, m, ""))) return st;
        if (!strcmp(m->string, "sweep")) {
            sweep = m;
        } else if (is_section(m->string)) {
            int is_baseline = !strcmp(m->string, "baseline");
            if (is_baseline && cJSON_IsNull(m)) continue;
            if (!cJSON_IsObject(m))
                return sr_error(SR_ERR_FORMAT, "%s: %s: expected an object%s, got %s", c->origin,
                                m->string, is_baseline ? " or null" : "", type_name(m));
            if (is_baseline) baseline_given = 1;
            if ((st = read_section(c, m, m->string, &base, seen))) return st;
        } else {
            const field_def *f = field_by_key("", m->string);
            if (f) {
                if ((st = set_field(c, f, m, f->path, &base))) return st;
                seen[f - FIELDS] = 1;
            } else {
                char hint[96];
                unknown_key_hint("", m->string, hint, sizeof hint);
                if ((st = add_warning(c, "%s: unknown key %s (ignored)%s", c->origin, m->string,
                                      hint)))
                    return st;
            }
        }
    }

    sweep_axis axes[N_FIELDS];
    size_t n_axes = 0, n_runs = 1;
    if ((st = read_sweep(c, sweep, axes, &n_axes, seen, &n_runs))) return st;

    static const char *const REQUIRED[] = {"name", "model.path", "data.path"};
    for (size_t i = 0; i < SR_ARRAY_LEN(REQUIRED); i++)
        if (!seen[field_by_path(REQUIRED[i]) - FIELDS])
            return sr_error(SR_ERR_FORMAT, "%s: missing required field %s", c->origin,
                            REQUIRED[i]);
    if (baseline_given && !seen[field_by_path("baseline.path") - FIELDS])
        return sr_error(SR_ERR_FORMAT, "%s: missing required field baseline.path (or write "
                        "\"baseline\": null for no regression gate)", c->origin);

    if (!seen[field_by_path("output") - FIELDS]) {
        size_t n = strlen(base.name) + sizeof "results/";
        char *out = sr_malloc(n, "config output path");
        if (!out) return SR_ERR_NOMEM;
        snprintf(out, n, "results/%s", base.name);
        if ((st = pool_keep(c, out))) return st;
        base.output = out;
    }

    if ((st = build_runs(c, &base, axes, n_axes, n_runs))) return st;

    c->json = cJSON_PrintUnformatted(c->root);
    if (!c->json) return sr_error(SR_ERR_NOMEM, "%s: out of memory printing the config", c->origin);
    return SR_OK;
}

/* ---- public API --------------------------------------------------------------------------- */

sr_status sr_config_parse(const char *json, const char *origin, sr_config **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_config_parse: out is NULL");
    *out = NULL;
    if (!origin) origin = "<string>";
    if (!json) return sr_error(SR_ERR_ARG, "%s: sr_config_parse: json is NULL", origin);
    sr_config *c = sr_calloc(1, sizeof *c, "config");
    if (!c) return SR_ERR_NOMEM;
    c->origin = sr_strdup(origin);
    if (!c->origin) {
        free(c);
        return SR_ERR_NOMEM;
    }
    sr_status st = parse_into(c, json);
    if (st) {
        sr_config_free(c);
        return st;
    }
    sr_error_clear();
    *out = c;
    return SR_OK;
}

sr_status sr_config_load(const char *path, sr_config **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_config_load: out is NULL");
    *out = NULL;
    if (!path) return sr_error(SR_ERR_ARG, "sr_config_load: path is NULL");
    char *text;
    size_t len;
    sr_status st = sr_read_file(path, &text, &len);
    if (st) return st;
    if (strlen(text) != len) {
        size_t at = strlen(text);
        free(text);
        return sr_error(SR_ERR_FORMAT, "%s: NUL byte at offset %zu (not a JSON text file)", path,
                        at);
    }
    st = sr_config_parse(text, path, out);
    free(text);
    return st;
}

size_t sr_config_n_runs(const sr_config *c) { return c ? c->n_runs : 0; }

const sr_run_config *sr_config_run(const sr_config *c, size_t i)
{
    return c && i < c->n_runs ? &c->runs[i] : NULL;
}

size_t sr_config_n_warnings(const sr_config *c) { return c ? c->n_warnings : 0; }

const char *sr_config_warning(const sr_config *c, size_t i)
{
    return c && i < c->n_warnings ? c->warnings[i] : NULL;
}

const char *sr_config_json(const sr_config *c) { return c ? c->json : NULL; }
