/*
 * timeline_io.c — external results in and out: sclite trn files (`text (utt_id)` per line) and
 * timeline.jsonl (one JSON object per line: utterance id, audio time in ms, hypothesis text,
 * optional number of stable words). srkit writes its own hyp.trn / ref.trn / timeline.jsonl
 * with the same functions it uses to read other systems' files, so a run can be re-scored.
 *
 * Reading keeps "file:line" for each record so that every error and every later mismatch
 * (an id missing from the reference, a duplicate) names the line at fault.
 */
#include "dataset.h"

#include <cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "textio.h"

/* ---- trn ---------------------------------------------------------------------------------- */

static void texts_clear(sr_text_item *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].id);
        free(v[i].text);
        free(v[i].where);
    }
}

void sr_texts_free(sr_texts *t)
{
    if (!t) return;
    texts_clear(t->items, t->n);
    free(t->items);
    free(t);
}

static int has_space(const char *s)
{
    for (; *s; s++)
        if (isspace((unsigned char)*s)) return 1;
    return 0;
}

sr_status sr_trn_read(const char *path, sr_texts **out)
{
    *out = NULL;
    if (!path) return sr_error(SR_ERR_ARG, "trn path is NULL");
    sr_lines l;
    sr_status st = sr_lines_read(path, &l);
    if (st) return st;
    sr_texts *t = sr_calloc(1, sizeof *t, "trn");
    if (t) t->items = sr_calloc(l.n + 1, sizeof *t->items, "trn lines");
    if (!t || !t->items) { free(t); sr_lines_free(&l); return SR_ERR_NOMEM; }
    for (size_t i = 0; !st && i < l.n; i++) {
        char *s = sr_trim(l.line[i]);
        if (!*s) continue;
        size_t n = strlen(s);
        char *open = strrchr(s, '(');
        if (s[n - 1] != ')' || !open) {
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: expected \"text (utt_id)\": no final \"(utt_id)\"",
                          path, i + 1);
            break;
        }
        s[n - 1] = '\0';
        *open = '\0';
        char *id = open + 1;
        if (!*id || has_space(id) || strchr(id, ')')) {
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: utterance id \"%s\" is empty or holds white space "
                          "or a parenthesis", path, i + 1, id);
            break;
        }
        sr_text_item *it = &t->items[t->n++];
        it->id = sr_strdup(id);
        it->text = sr_strdup(sr_trim(s));
        sr_strbuf w = {0};
        if (!it->id || !it->text || sr_strbuf_printf(&w, "%s:%zu", path, i + 1)) st = SR_ERR_NOMEM;
        it->where = w.data;
    }
    if (!st) st = sr_sort_unique(t->items, t->n, sizeof *t->items, offsetof(sr_text_item, id),
                                 offsetof(sr_text_item, where), "duplicate utterance id");
    sr_lines_free(&l);
    if (st) { sr_texts_free(t); return st; }
    *out = t;
    return SR_OK;
}

static int cmp_text_key(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const sr_text_item *)e)->id);
}

const sr_text_item *sr_texts_find(const sr_texts *t, const char *id)
{
    if (!t || !id || !t->n) return NULL;
    return bsearch(id, t->items, t->n, sizeof *t->items, cmp_text_key);
}

sr_status sr_trn_append(sr_strbuf *b, const char *id, const char *text)
{
    if (!id || !*id || has_space(id) || strpbrk(id, "()"))
        return sr_error(SR_ERR_ARG, "trn: utterance id \"%s\" is empty or holds white space or a "
                                    "parenthesis", id ? id : "(null)");
    sr_status st = SR_OK;
    int words = 0;
    const char *p = text ? text : "";
    while (!st && *p) {
        while (*p && isspace((unsigned char)*p)) p++;
        const char *w = p;
        while (*p && !isspace((unsigned char)*p)) p++;
        if (p > w) {
            if (words++) st = sr_strbuf_append(b, " ", 1);
            if (!st) st = sr_strbuf_append(b, w, (size_t)(p - w));
        }
    }
    if (!st) st = sr_strbuf_printf(b, "%s(%s)\n", words ? " " : "", id);
    return st;
}

sr_status sr_trn_write(const char *path, const char *const *ids, const char *const *texts,
                       size_t n)
{
    if (!path) return sr_error(SR_ERR_ARG, "trn path is NULL");
    sr_strbuf b = {0};
    sr_status st = sr_strbuf_append(&b, "", 0);
    for (size_t i = 0; !st && i < n; i++) st = sr_trn_append(&b, ids[i], texts[i]);
    if (st) st = sr_error_prefix(st, "%s", path);
    else st = sr_write_file_atomic(path, b.data, b.len);
    sr_strbuf_free(&b);
    return st;
}

/* ---- timeline.jsonl ----------------------------------------------------------------------- */

static void utt_timeline_clear(sr_utt_timeline *u)
{
    for (size_t i = 0; i < u->n; i++) free(u->points[i].text);
    free(u->points);
    free(u->id);
    free(u->where);
    memset(u, 0, sizeof *u);
}

void sr_timelines_free(sr_timelines *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) utt_timeline_clear(&t->utts[i]);
    free(t->utts);
    free(t);
}

/* Grow *v (elements of size bytes) to hold at least need; *cap tracks its capacity. */
static sr_status grow(void **v, size_t *cap, size_t need, size_t size, const char *what)
{
    if (need <= *cap) return SR_OK;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *p = realloc(*v, c * size);
    if (!p) return sr_error(SR_ERR_NOMEM, "out of memory growing %s", what);
    *v = p;
    *cap = c;
    return SR_OK;
}

/* SR_ERR_FORMAT naming the field and the first byte of s that is not well-formed UTF-8. */
static sr_status utf8_field(const char *s, const char *field, const char *where)
{
    size_t n = strlen(s), ok = sr_utf8_valid_prefix(s, n);
    if (ok == n) return SR_OK;
    return sr_error(SR_ERR_FORMAT, "%s: field \"%s\" is not valid UTF-8 (byte %zu)", where, field, ok);
}

/* Parse one timeline line into (id, point); where = "file:line". */
static sr_status parse_point(const char *line, const char *where, char **id, sr_tl_point *p)
{
    *id = NULL;
    memset(p, 0, sizeof *p);
    p->n_stable = -1;
    p->compute_ms = -1;
    cJSON *o = cJSON_ParseWithOpts(line, NULL, 1); /* nothing may follow the object */
    sr_status st = SR_OK;
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return sr_error(SR_ERR_FORMAT, "%s: not a JSON object (one timeline entry per line)", where);
    }
    const cJSON *utt = cJSON_GetObjectItemCaseSensitive(o, "utt");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "t_ms");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "text");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(o, "n_stable");
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(o, "final");
    const cJSON *cm = cJSON_GetObjectItemCaseSensitive(o, "compute_ms");
    if (!cJSON_IsString(utt) || !utt->valuestring[0])
        st = sr_error(SR_ERR_FORMAT, "%s: field \"utt\": expected a non-empty string", where);
    else if (!cJSON_IsNumber(t) || !isfinite(t->valuedouble) || t->valuedouble < 0)
        st = sr_error(SR_ERR_FORMAT, "%s: field \"t_ms\": expected a number >= 0", where);
    else if (!cJSON_IsString(text))
        st = sr_error(SR_ERR_FORMAT, "%s: field \"text\": expected a string", where);
    else if (ns && !cJSON_IsNull(ns) &&
             (!cJSON_IsNumber(ns) || ns->valuedouble < 0 || ns->valuedouble > INT_MAX ||
              ns->valuedouble != floor(ns->valuedouble)))
        st = sr_error(SR_ERR_FORMAT, "%s: field \"n_stable\": expected an integer >= 0", where);
    else if (fin && !cJSON_IsBool(fin))
        st = sr_error(SR_ERR_FORMAT, "%s: field \"final\": expected true or false", where);
    else if (cm && !cJSON_IsNull(cm) &&
             (!cJSON_IsNumber(cm) || !isfinite(cm->valuedouble) || cm->valuedouble < 0))
        st = sr_error(SR_ERR_FORMAT, "%s: field \"compute_ms\": expected a number >= 0", where);
    /* JSON text is UTF-8 (what srkit writes always is, sr_json_append_string): a string that
     * is not would not survive a write and a read */
    if (!st) st = utf8_field(utt->valuestring, "utt", where);
    if (!st) st = utf8_field(text->valuestring, "text", where);
    if (!st) {
        p->t_ms = t->valuedouble;
        if (ns && cJSON_IsNumber(ns)) p->n_stable = (int)ns->valuedouble;
        p->is_final = fin && cJSON_IsTrue(fin);
        if (cm && cJSON_IsNumber(cm)) p->compute_ms = cm->valuedouble;
        *id = sr_strdup(utt->valuestring);
        p->text = sr_strdup(text->valuestring);
        if (!*id || !p->text) {
            free(*id);
            free(p->text);
            *id = NULL;
            p->text = NULL;
            st = SR_ERR_NOMEM;
        }
    }
    cJSON_Delete(o);
    return st;
}

sr_status sr_timelines_read(const char *path, sr_timelines **out)
{
    *out = NULL;
    if (!path) return sr_error(SR_ERR_ARG, "timeline path is NULL");
    sr_lines l;
    sr_status st = sr_lines_read(path, &l);
    if (st) return st;
    sr_timelines *t = sr_calloc(1, sizeof *t, "timelines");
    if (!t) { sr_lines_free(&l); return SR_ERR_NOMEM; }
    size_t cap_utts = 0, cap_points = 0;
    size_t prev_line = 0; /* line of the previous point of the current utterance */
    char where[4200];
    for (size_t i = 0; !st && i < l.n; i++) {
        char *s = sr_trim(l.line[i]);
        if (!*s) continue;
        snprintf(where, sizeof where, "%s:%zu", path, i + 1);
        char *id;
        sr_tl_point p;
        if ((st = parse_point(s, where, &id, &p))) break;
        sr_utt_timeline *cur = t->n ? &t->utts[t->n - 1] : NULL;
        if (!cur || strcmp(cur->id, id)) {
            /* a new block; a repeated id is caught by the sort below, naming both blocks */
            if ((st = grow((void **)&t->utts, &cap_utts, t->n + 1, sizeof *t->utts, "timelines"))) {
                free(id);
                free(p.text);
                break;
            }
            cur = &t->utts[t->n++];
            memset(cur, 0, sizeof *cur);
            cur->id = id;
            cur->where = sr_strdup(where);
            cap_points = 0;
            if (!cur->where) { free(p.text); st = SR_ERR_NOMEM; break; }
        } else {
            free(id);
            const sr_tl_point *last = &cur->points[cur->n - 1];
            if (p.t_ms < last->t_ms) {
                st = sr_error(SR_ERR_FORMAT, "%s: utterance %s: t_ms %g is earlier than %g on line "
                              "%zu (entries of one utterance must be in time order)", where,
                              cur->id, p.t_ms, last->t_ms, prev_line);
                free(p.text);
                break;
            }
        }
        if ((st = grow((void **)&cur->points, &cap_points, cur->n + 1, sizeof *cur->points,
                       "timeline points"))) {
            free(p.text);
            break;
        }
        cur->points[cur->n++] = p;
        prev_line = i + 1;
    }
    if (!st)
        st = sr_sort_unique(t->utts, t->n, sizeof *t->utts, offsetof(sr_utt_timeline, id),
                            offsetof(sr_utt_timeline, where),
                            "entries of one utterance must be contiguous; two separate blocks for");
    sr_lines_free(&l);
    if (st) { sr_timelines_free(t); return st; }
    *out = t;
    return SR_OK;
}

static int cmp_tl_key(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const sr_utt_timeline *)e)->id);
}

const sr_utt_timeline *sr_timelines_find(const sr_timelines *t, const char *id)
{
    if (!t || !id || !t->n) return NULL;
    return bsearch(id, t->utts, t->n, sizeof *t->utts, cmp_tl_key);
}

/* Shortest of %.15g / %.17g that reads back as v; integral values without a fraction. */
static sr_status append_number(sr_strbuf *b, double v)
{
    if (v == floor(v) && fabs(v) < 9e15) return sr_strbuf_printf(b, "%.0f", v);
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.15g", v);
    if (strtod(tmp, NULL) != v) snprintf(tmp, sizeof tmp, "%.17g", v);
    return sr_strbuf_append(b, tmp, strlen(tmp));
}

sr_status sr_timeline_append(sr_strbuf *b, const char *utt, const sr_tl_point *p)
{
    if (!utt || !*utt) return sr_error(SR_ERR_ARG, "timeline: utterance id is empty");
    if (!p || !isfinite(p->t_ms) || p->t_ms < 0)
        return sr_error(SR_ERR_ARG, "timeline: utterance %s: t_ms must be a finite number >= 0",
                        utt);
    sr_status st = sr_strbuf_append(b, "{\"utt\": ", 8);
    if (!st) st = sr_json_append_string(b, utt);
    if (!st) st = sr_strbuf_append(b, ", \"t_ms\": ", 10);
    if (!st) st = append_number(b, p->t_ms);
    if (!st) st = sr_strbuf_append(b, ", \"text\": ", 10);
    if (!st) st = sr_json_append_string(b, p->text ? p->text : "");
    if (!st && p->n_stable >= 0) st = sr_strbuf_printf(b, ", \"n_stable\": %d", p->n_stable);
    if (!st && p->is_final) st = sr_strbuf_append(b, ", \"final\": true", 15);
    if (!st && p->compute_ms >= 0 && isfinite(p->compute_ms)) {
        st = sr_strbuf_append(b, ", \"compute_ms\": ", 16);
        if (!st) st = append_number(b, p->compute_ms);
    }
    if (!st) st = sr_strbuf_append(b, "}\n", 2);
    return st;
}

sr_status sr_timelines_write(const char *path, const sr_timelines *t)
{
    if (!path || !t) return sr_error(SR_ERR_ARG, "timeline write: path or timelines is NULL");
    sr_strbuf b = {0};
    sr_status st = sr_strbuf_append(&b, "", 0);
    for (size_t i = 0; !st && i < t->n; i++)
        for (size_t k = 0; !st && k < t->utts[i].n; k++)
            st = sr_timeline_append(&b, t->utts[i].id, &t->utts[i].points[k]);
    if (st) st = sr_error_prefix(st, "%s", path);
    else st = sr_write_file_atomic(path, b.data, b.len);
    sr_strbuf_free(&b);
    return st;
}
