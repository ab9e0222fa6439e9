/*
 * dataset.c — dataset readers: LibriSpeech folders, NeMo JSONL manifests, Kaldi data folders
 * and trn reference files, all turned into one list of utterances sorted by id (see
 * eval/dataset.h, docs/datasets.md).
 *
 * Every reader appends utterances to a builder with the "file:line" that defined them; the
 * builder resolves relative audio paths against the defining file's folder and checks that the
 * audio file exists, recording a problem (never dropping the utterance) when it does not. The
 * list is then sorted stably by id, which also finds duplicate ids and names both lines.
 */
#include "dataset.h"

#include <cJSON.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <string.h>
#include <stddef.h>

#include "textio.h"

/* ---- formats -------------------------------------------------------------------------------- */

static const char *const format_names[] = {"auto", "librispeech", "manifest", "kaldi", "trn"};

static const char *format_name_at(size_t i)
{
    return i < SR_ARRAY_LEN(format_names) ? format_names[i] : NULL;
}

sr_status sr_data_format_parse(const char *name, sr_data_format *out)
{
    if (name && !strcmp(name, "nemo")) { *out = SR_DATA_MANIFEST; return SR_OK; }
    for (size_t i = 0; name && i < SR_ARRAY_LEN(format_names); i++)
        if (!strcmp(name, format_names[i])) { *out = (sr_data_format)i; return SR_OK; }
    return sr_error_unknown("dataset format", name, format_name_at);
}

const char *sr_data_format_name(sr_data_format f)
{
    const char *n = format_name_at((size_t)f);
    return n ? n : "unknown";
}

/* First non-blank line of a file, trimmed, into buf (empty when none). */
static sr_status first_line(const char *path, char *buf, size_t size)
{
    sr_lines l;
    sr_status st = sr_lines_read(path, &l);
    if (st) return st;
    buf[0] = '\0';
    for (size_t i = 0; i < l.n; i++) {
        char *t = sr_trim(l.line[i]);
        if (*t) { snprintf(buf, size, "%s", t); break; }
    }
    sr_lines_free(&l);
    return SR_OK;
}

sr_status sr_dataset_detect(const char *path, sr_data_format *out)
{
    *out = SR_DATA_AUTO;
    if (!path) return sr_error(SR_ERR_ARG, "dataset path is NULL");
    if (sr_path_is_dir(path)) {
        char *scp = sr_path_join(path, "wav.scp"), *text = sr_path_join(path, "text");
        if (!scp || !text) { free(scp); free(text); return SR_ERR_NOMEM; }
        *out = sr_path_is_file(scp) && sr_path_is_file(text) ? SR_DATA_KALDI : SR_DATA_LIBRISPEECH;
        free(scp);
        free(text);
        return SR_OK;
    }
    if (!sr_path_is_file(path)) return sr_error(SR_ERR_IO, "%s: no such file or folder", path);
    const char *base = sr_path_basename(path);
    if (!strcmp(base, "wav.scp") || !strcmp(base, "text")) *out = SR_DATA_KALDI;
    else if (sr_ends_with_nocase(base, ".trans.txt") || !strcmp(base, "transcripts.txt"))
        *out = SR_DATA_LIBRISPEECH;
    else if (sr_ends_with_nocase(base, ".json") || sr_ends_with_nocase(base, ".jsonl"))
        *out = SR_DATA_MANIFEST;
    else if (sr_ends_with_nocase(base, ".trn")) *out = SR_DATA_TRN;
    if (*out != SR_DATA_AUTO) return SR_OK;
    char line[4096];
    sr_status st = first_line(path, line, sizeof line);
    if (st) return st;
    size_t n = strlen(line);
    if (line[0] == '{') *out = SR_DATA_MANIFEST;
    else if (n && line[n - 1] == ')') *out = SR_DATA_TRN;
    else
        return sr_error(SR_ERR_FORMAT, "%s: cannot tell the dataset format; name it (librispeech, "
                                       "manifest, kaldi or trn)", path);
    return SR_OK;
}

/* ---- the utterance list under construction -------------------------------------------------- */

typedef struct {
    sr_utt *v;
    size_t n, cap;
} builder;

static void utt_clear(sr_utt *u)
{
    free(u->id);
    free(u->audio);
    free(u->text);
    free(u->where);
    free(u->problem);
    memset(u, 0, sizeof *u);
}

static void builder_free(builder *b)
{
    for (size_t i = 0; i < b->n; i++) utt_clear(&b->v[i]);
    free(b->v);
    memset(b, 0, sizeof *b);
}

static char *where_str(const char *path, size_t line)
{
    sr_strbuf w = {0};
    if (sr_strbuf_printf(&w, "%s:%zu", path, line)) return NULL;
    return w.data;
}

/* Ids go into trn lines "(id)" and whitespace-separated files (CTM, Kaldi), so they must be
 * non-empty and free of white space and parentheses. */
static sr_status check_id(const char *id, const char *where)
{
    if (!*id) return sr_error(SR_ERR_FORMAT, "%s: empty utterance id", where);
    for (const char *p = id; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f' ||
            *p == '(' || *p == ')')
            return sr_error(SR_ERR_FORMAT, "%s: utterance id \"%s\" contains white space or a "
                                           "parenthesis", where, id);
    return SR_OK;
}

/* Append one utterance defined at `where` ("file:line", copied). audio_rel: the path as
 * written, resolved against base_dir, or NULL for a reference-only utterance; a missing audio
 * file becomes the utterance's problem. */
static sr_status builder_add(builder *b, const char *where, const char *id, const char *base_dir,
                             const char *audio_rel, const char *text, double offset_s,
                             double duration_s)
{
    sr_status st = check_id(id, where);
    if (st) return st;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        sr_utt *v = realloc(b->v, cap * sizeof *v);
        if (!v) return sr_error(SR_ERR_NOMEM, "%s: out of memory", where);
        b->v = v;
        b->cap = cap;
    }
    sr_utt *u = &b->v[b->n++]; /* owned by the builder from here on, also on error */
    memset(u, 0, sizeof *u);
    u->where = sr_strdup(where);
    u->id = sr_strdup(id);
    u->text = sr_strdup(text);
    u->offset_s = offset_s;
    u->duration_s = duration_s;
    if (audio_rel) u->audio = sr_path_join(base_dir, audio_rel);
    if (!u->where || !u->id || !u->text || (audio_rel && !u->audio)) return SR_ERR_NOMEM;
    if (audio_rel && !sr_path_is_file(u->audio)) {
        sr_strbuf m = {0};
        if ((st = sr_strbuf_printf(&m, "%s: utterance %s: audio file not found: %s", where, id,
                                   u->audio)))
            return st;
        u->problem = m.data;
    }
    return SR_OK;
}

/* builder_add for line `line` (1-based) of path. */
static sr_status builder_add_at(builder *b, const char *path, size_t line, const char *id,
                                const char *base_dir, const char *audio_rel, const char *text,
                                double offset_s, double duration_s)
{
    char *where = where_str(path, line);
    if (!where) return SR_ERR_NOMEM;
    sr_status st = builder_add(b, where, id, base_dir, audio_rel, text, offset_s, duration_s);
    free(where);
    return st;
}

/* Split "ID rest" at the first white space: *id = the first token, *rest = the rest trimmed. */
static void split_id(char *line, char **id, char **rest)
{
    char *p = line;
    while (*p && *p != ' ' && *p != '\t') p++;
    if (*p) *p++ = '\0';
    *id = line;
    *rest = sr_trim(p);
}

/* ---- LibriSpeech -------------------------------------------------------------------------- */

/* One transcript file: "ID TEXT" lines; audio ID.flac (or ID.wav) in the same folder. */
static sr_status load_transcripts(builder *b, const char *path)
{
    sr_lines l;
    sr_status st = sr_lines_read(path, &l);
    if (st) return st;
    char *dir = sr_path_dirname(path);
    if (!dir) { sr_lines_free(&l); return SR_ERR_NOMEM; }
    sr_strbuf audio = {0};
    for (size_t i = 0; !st && i < l.n; i++) {
        char *t = sr_trim(l.line[i]), *id, *text;
        if (!*t) continue;
        split_id(t, &id, &text);
        static const char *const exts[] = {".flac", ".wav"};
        const char *chosen = NULL;
        for (size_t k = 0; !st && !chosen && k < SR_ARRAY_LEN(exts); k++) {
            sr_strbuf_clear(&audio);
            if ((st = sr_strbuf_printf(&audio, "%s/%s%s", dir, id, exts[k]))) break;
            if (sr_path_is_file(audio.data)) chosen = exts[k];
        }
        if (st) break;
        sr_strbuf_clear(&audio);
        /* a missing file is reported under the canonical LibriSpeech name */
        if ((st = sr_strbuf_printf(&audio, "%s%s", id, chosen ? chosen : ".flac"))) break;
        st = builder_add_at(b, path, i + 1, id, dir, audio.data, text, 0, -1);
    }
    sr_strbuf_free(&audio);
    free(dir);
    sr_lines_free(&l);
    return st;
}

static sr_status load_librispeech(builder *b, const char *path)
{
    if (!sr_path_is_dir(path)) return load_transcripts(b, path);
    /* <spk>-<chapter>.trans.txt per chapter folder, or the flat variant: one transcripts.txt
     * next to the audio files */
    static const char *const suffixes[] = {".trans.txt", "transcripts.txt"};
    char **files;
    size_t n;
    sr_status st = sr_find_files(path, suffixes, SR_ARRAY_LEN(suffixes), &files, &n);
    if (st) return st;
    size_t used = 0;
    for (size_t i = 0; !st && i < n; i++)
        if (sr_ends_with_nocase(files[i], ".trans.txt") ||
            !strcmp(sr_path_basename(files[i]), "transcripts.txt")) {
            st = load_transcripts(b, files[i]);
            used++;
        }
    if (!st && !used)
        st = sr_error(SR_ERR_FORMAT, "%s: no *.trans.txt or transcripts.txt file in this folder "
                                     "or below (not a LibriSpeech-style folder)", path);
    sr_paths_free(files, n);
    return st;
}

/* ---- NeMo manifest ------------------------------------------------------------------------ */

/* Optional non-negative finite number field; *v untouched when absent. */
static sr_status json_nonneg(const cJSON *o, const char *key, const char *where, double *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return SR_OK;
    if (!cJSON_IsNumber(x))
        return sr_error(SR_ERR_FORMAT, "%s: field \"%s\": expected a number", where, key);
    if (!isfinite(x->valuedouble) || x->valuedouble < 0)
        return sr_error(SR_ERR_FORMAT, "%s: field \"%s\": expected a finite number >= 0, got %g",
                        where, key, x->valuedouble);
    *v = x->valuedouble;
    return SR_OK;
}

static sr_status load_manifest(builder *b, const char *path)
{
    sr_lines l;
    sr_status st = sr_lines_read(path, &l);
    if (st) return st;
    char *dir = sr_path_dirname(path);
    if (!dir) { sr_lines_free(&l); return SR_ERR_NOMEM; }
    for (size_t i = 0; !st && i < l.n; i++) {
        char *t = sr_trim(l.line[i]);
        if (!*t) continue;
        char where[64 + 4096];
        snprintf(where, sizeof where, "%s:%zu", path, i + 1);
        cJSON *o = cJSON_ParseWithOpts(t, NULL, 1); /* nothing may follow the object */
        if (!o || !cJSON_IsObject(o)) {
            cJSON_Delete(o);
            st = sr_error(SR_ERR_FORMAT, "%s: not a JSON object (one manifest entry per line)",
                          where);
            break;
        }
        const cJSON *audio = cJSON_GetObjectItemCaseSensitive(o, "audio_filepath");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "text");
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "utt_id");
        if (!uid) uid = cJSON_GetObjectItemCaseSensitive(o, "id");
        double offset = 0, duration = -1;
        char *stem = NULL;
        if (!cJSON_IsString(audio) || !audio->valuestring[0])
            st = sr_error(SR_ERR_FORMAT, "%s: field \"audio_filepath\": expected a non-empty string",
                          where);
        else if (!cJSON_IsString(text))
            st = sr_error(SR_ERR_FORMAT, "%s: field \"text\": expected a string", where);
        else if (uid && !cJSON_IsString(uid))
            st = sr_error(SR_ERR_FORMAT, "%s: field \"%s\": expected a string", where, uid->string);
        else if (!(st = json_nonneg(o, "duration", where, &duration)) &&
                 !(st = json_nonneg(o, "offset", where, &offset))) {
            /* without an explicit id the audio file's name is the id (LibriSpeech manifests) */
            const char *id = uid ? uid->valuestring : (stem = sr_path_stem(audio->valuestring));
            char *text_copy = sr_strdup(text->valuestring);
            if (!id || !text_copy) st = SR_ERR_NOMEM;
            else if (!uid && check_id(id, where))
                st = sr_error(SR_ERR_FORMAT, "%s: utterance id \"%s\" (the audio file's name) "
                              "contains white space or a parenthesis; add an \"utt_id\" field",
                              where, id);
            else
                st = builder_add(b, where, id, dir, audio->valuestring, sr_trim(text_copy),
                                 offset, duration);
            free(text_copy);
        }
        free(stem);
        cJSON_Delete(o);
    }
    free(dir);
    sr_lines_free(&l);
    return st;
}

/* ---- Kaldi -------------------------------------------------------------------------------- */

/* A Kaldi table "key rest" line, with where it came from. */
typedef struct {
    char *id;    /* points into the sr_lines buffer */
    char *rest;
    char *where; /* owned */
} kv;

typedef struct {
    sr_lines lines;
    kv *v;
    size_t n;
} kv_table;

static void kv_free(kv_table *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->v[i].where);
    free(t->v);
    sr_lines_free(&t->lines);
    memset(t, 0, sizeof *t);
}

/* Read a Kaldi table; rest_required: lines without a value are malformed. Sorted by key with
 * duplicates rejected, so lookups can bsearch. */
static sr_status kv_read(const char *path, int rest_required, const char *what, kv_table *t)
{
    memset(t, 0, sizeof *t);
    sr_status st = sr_lines_read(path, &t->lines);
    if (st) return st;
    t->v = sr_calloc(t->lines.n + 1, sizeof *t->v, "Kaldi table");
    if (!t->v) { kv_free(t); return SR_ERR_NOMEM; }
    for (size_t i = 0; !st && i < t->lines.n; i++) {
        char *s = sr_trim(t->lines.line[i]);
        if (!*s) continue;
        kv *e = &t->v[t->n];
        split_id(s, &e->id, &e->rest);
        if (!(e->where = where_str(path, i + 1))) { st = SR_ERR_NOMEM; break; }
        t->n++;
        if (rest_required && !*e->rest)
            st = sr_error(SR_ERR_FORMAT, "%s: \"%s\" has no value (expected \"%s\")", e->where,
                          e->id, what);
    }
    if (!st) st = sr_sort_unique(t->v, t->n, sizeof *t->v, offsetof(kv, id), offsetof(kv, where),
                                 "duplicate id");
    if (st) kv_free(t);
    return st;
}

static int cmp_kv_key(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const kv *)e)->id);
}

static const kv *kv_find(const kv_table *t, const char *id)
{
    return t->n ? bsearch(id, t->v, t->n, sizeof *t->v, cmp_kv_key) : NULL;
}

/* Parse a whole string as a finite double. */
static int parse_double(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v);
}

static sr_status load_kaldi(builder *b, const char *path)
{
    char *dir = sr_path_is_dir(path) ? sr_strdup(path) : sr_path_dirname(path);
    if (!dir) return SR_ERR_NOMEM;
    char *p_scp = sr_path_join(dir, "wav.scp"), *p_text = sr_path_join(dir, "text");
    char *p_seg = sr_path_join(dir, "segments"), *p_dur = sr_path_join(dir, "utt2dur");
    kv_table scp = {0}, text = {0}, seg = {0}, dur = {0};
    sr_status st = (!p_scp || !p_text || !p_seg || !p_dur) ? SR_ERR_NOMEM : SR_OK;
    if (!st) st = kv_read(p_scp, 1, "recording-id path", &scp);
    if (!st) st = kv_read(p_text, 0, "utterance-id transcript", &text);
    int have_seg = !st && sr_path_is_file(p_seg);
    if (!st && have_seg) st = kv_read(p_seg, 1, "utterance-id recording-id start end", &seg);
    if (!st && sr_path_is_file(p_dur)) st = kv_read(p_dur, 1, "utterance-id seconds", &dur);

    /* wav.scp: plain paths only; Kaldi pipes ("cmd |") and stdin ("-") need a shell */
    for (size_t i = 0; !st && i < scp.n; i++) {
        const char *r = scp.v[i].rest;
        size_t n = strlen(r);
        if (r[n - 1] == '|')
            st = sr_error(SR_ERR_UNSUPPORTED, "%s: recording %s: piped commands (\"... |\") are not "
                          "supported; give a plain audio path (e.g. convert with the command first)",
                          scp.v[i].where, scp.v[i].id);
        else if (!strcmp(r, "-"))
            st = sr_error(SR_ERR_UNSUPPORTED, "%s: recording %s: reading audio from stdin (\"-\") "
                          "is not supported; give a plain audio path", scp.v[i].where, scp.v[i].id);
    }
    /* every recording (without segments) / segment must have a transcript */
    const kv_table *units = have_seg ? &seg : &scp;
    for (size_t i = 0; !st && i < units->n; i++)
        if (!kv_find(&text, units->v[i].id))
            st = sr_error(SR_ERR_FORMAT, "%s: %s %s has no transcript in %s", units->v[i].where,
                          have_seg ? "utterance" : "recording", units->v[i].id, p_text);

    for (size_t i = 0; !st && i < text.n; i++) {
        const kv *t = &text.v[i];
        const char *audio = NULL;
        double offset = 0, duration = -1;
        const kv *s = have_seg ? kv_find(&seg, t->id) : NULL;
        if (s) {
            /* segments: "utt reco start end", end -1 = to the end of the recording */
            char reco[1024], a[64], z[64], extra[2];
            double t0, t1;
            if (sscanf(s->rest, "%1023s %63s %63s %1s", reco, a, z, extra) != 3 ||
                !parse_double(a, &t0) || !parse_double(z, &t1) || t0 < 0 ||
                (t1 != -1 && t1 <= t0)) {
                st = sr_error(SR_ERR_FORMAT, "%s: expected \"utterance-id recording-id start end\" "
                              "with 0 <= start < end (end -1 = to the end), got \"%s %s\"",
                              s->where, s->id, s->rest);
                break;
            }
            const kv *r = kv_find(&scp, reco);
            if (!r) {
                st = sr_error(SR_ERR_FORMAT, "%s: utterance %s: recording %s is not in %s", s->where,
                              s->id, reco, p_scp);
                break;
            }
            audio = r->rest;
            offset = t0;
            duration = t1 == -1 ? -1 : t1 - t0;
        } else if (!have_seg) {
            const kv *r = kv_find(&scp, t->id);
            if (r) audio = r->rest;
        }
        const kv *d = kv_find(&dur, t->id);
        if (d) {
            double v;
            if (!parse_double(d->rest, &v) || v < 0) {
                st = sr_error(SR_ERR_FORMAT, "%s: expected \"utterance-id seconds\", got \"%s %s\"",
                              d->where, d->id, d->rest);
                break;
            }
            duration = v;
        }
        if ((st = builder_add(b, t->where, t->id, dir, audio, t->rest, offset, duration))) break;
        if (!audio) {
            /* a transcript without audio: reported like a missing file, never dropped */
            sr_utt *u = &b->v[b->n - 1];
            sr_strbuf m = {0};
            if ((st = sr_strbuf_printf(&m, "%s: utterance %s: no entry in %s", u->where, t->id,
                                       have_seg ? p_seg : p_scp)))
                break;
            u->problem = m.data;
        }
    }
    kv_free(&scp);
    kv_free(&text);
    kv_free(&seg);
    kv_free(&dur);
    free(p_scp);
    free(p_text);
    free(p_seg);
    free(p_dur);
    free(dir);
    return st;
}

/* ---- trn ---------------------------------------------------------------------------------- */

static sr_status load_trn(builder *b, const char *path)
{
    sr_texts *t;
    sr_status st = sr_trn_read(path, &t);
    if (st) return st;
    for (size_t i = 0; !st && i < t->n; i++) {
        st = builder_add(b, t->items[i].where, t->items[i].id, NULL, NULL, t->items[i].text, 0, -1);
    }
    sr_texts_free(t);
    return st;
}

/* ---- the dataset object ------------------------------------------------------------------- */

static void count_problems(sr_dataset *d)
{
    d->n_problems = 0;
    for (size_t i = 0; i < d->n; i++) d->n_problems += d->utts[i].problem != NULL;
}

sr_status sr_dataset_load(const char *path, sr_data_format format, sr_dataset **out)
{
    *out = NULL;
    if (!path) return sr_error(SR_ERR_ARG, "dataset path is NULL");
    sr_status st;
    if (format == SR_DATA_AUTO && (st = sr_dataset_detect(path, &format))) return st;
    if (format != SR_DATA_LIBRISPEECH && format != SR_DATA_KALDI && !sr_path_is_file(path))
        return sr_error(SR_ERR_IO, "%s: no such file (%s dataset)", path,
                        sr_data_format_name(format));
    if ((format == SR_DATA_LIBRISPEECH || format == SR_DATA_KALDI) && !sr_path_is_dir(path) &&
        !sr_path_is_file(path))
        return sr_error(SR_ERR_IO, "%s: no such file or folder (%s dataset)", path,
                        sr_data_format_name(format));
    builder b = {0};
    switch (format) {
    case SR_DATA_LIBRISPEECH: st = load_librispeech(&b, path); break;
    case SR_DATA_MANIFEST: st = load_manifest(&b, path); break;
    case SR_DATA_KALDI: st = load_kaldi(&b, path); break;
    case SR_DATA_TRN: st = load_trn(&b, path); break;
    default: st = sr_error(SR_ERR_ARG, "dataset format %d is not valid", (int)format);
    }
    /* ids go into JSON (records, results, timelines), which is UTF-8: an id that is not would
     * come back as another (U+FFFD) and match nothing on a resume or a score */
    for (size_t i = 0; !st && i < b.n; i++) {
        size_t n = strlen(b.v[i].id), ok = sr_utf8_valid_prefix(b.v[i].id, n);
        if (ok < n)
            st = sr_error(SR_ERR_FORMAT, "%s: utterance id is not valid UTF-8 (byte %zu)",
                          b.v[i].where ? b.v[i].where : path, ok);
    }
    if (!st) st = sr_sort_unique(b.v, b.n, sizeof *b.v, offsetof(sr_utt, id),
                                 offsetof(sr_utt, where), "duplicate utterance id");
    sr_dataset *d = st ? NULL : sr_calloc(1, sizeof *d, "dataset");
    if (!d || !(d->path = sr_strdup(path))) {
        free(d);
        builder_free(&b);
        return st ? st : SR_ERR_NOMEM;
    }
    d->format = format;
    d->utts = b.v;
    d->n = b.n;
    count_problems(d);
    *out = d;
    return SR_OK;
}

void sr_dataset_free(sr_dataset *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) utt_clear(&d->utts[i]);
    free(d->utts);
    free(d->path);
    free(d);
}

static int cmp_utt_key(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const sr_utt *)e)->id);
}

const sr_utt *sr_dataset_find(const sr_dataset *d, const char *id)
{
    if (!d || !id || !d->n) return NULL;
    return bsearch(id, d->utts, d->n, sizeof *d->utts, cmp_utt_key);
}

void sr_dataset_limit(sr_dataset *d, size_t n)
{
    if (!d || !n || n >= d->n) return;
    for (size_t i = n; i < d->n; i++) utt_clear(&d->utts[i]);
    d->n = n;
    count_problems(d);
}

sr_status sr_dataset_shard(sr_dataset *d, size_t k, size_t n)
{
    if (!d) return sr_error(SR_ERR_ARG, "shard: dataset is NULL");
    if (n == 0 || k >= n)
        return sr_error(SR_ERR_ARG, "shard %zu/%zu: need 0 <= K < N", k, n);
    size_t kept = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (i % n == k) d->utts[kept++] = d->utts[i];
        else utt_clear(&d->utts[i]);
    }
    d->n = kept;
    count_problems(d);
    return SR_OK;
}

sr_status sr_shard_parse(const char *s, size_t *k, size_t *n)
{
    *k = 0;
    *n = 1;
    unsigned long long a = 0, b = 0;
    const char *p = s;
    int ok = s && *s >= '0' && *s <= '9';
    for (; ok && *p >= '0' && *p <= '9' && a < (1ULL << 40); p++) a = a * 10 + (unsigned)(*p - '0');
    ok = ok && *p == '/' && p[1] >= '0' && p[1] <= '9';
    if (ok) p++;
    for (; ok && *p >= '0' && *p <= '9' && b < (1ULL << 40); p++) b = b * 10 + (unsigned)(*p - '0');
    if (!ok || *p || b == 0 || a >= b)
        return sr_error(SR_ERR_ARG, "--shard \"%s\": expected K/N with 0 <= K < N (e.g. 0/4)",
                        s ? s : "(null)");
    *k = (size_t)a;
    *n = (size_t)b;
    return SR_OK;
}

size_t sr_dataset_drop_problems(sr_dataset *d)
{
    if (!d) return 0;
    size_t kept = 0, dropped = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->utts[i].problem) { utt_clear(&d->utts[i]); dropped++; }
        else d->utts[kept++] = d->utts[i];
    }
    d->n = kept;
    d->n_problems = 0;
    return dropped;
}

sr_status sr_dataset_probe_durations(sr_dataset *d)
{
    if (!d) return sr_error(SR_ERR_ARG, "probe durations: dataset is NULL");
    for (size_t i = 0; i < d->n; i++) {
        sr_utt *u = &d->utts[i];
        if (u->duration_s > 0 || !u->audio || u->problem) continue;
        SF_INFO info;
        memset(&info, 0, sizeof info);
        SNDFILE *f = sf_open(u->audio, SFM_READ, &info);
        sr_strbuf m = {0};
        sr_status st = SR_OK;
        if (!f) {
            /* sf_strerror(NULL) reads libsndfile's process-wide error state: not thread-safe */
            st = sr_strbuf_printf(&m, "%s: utterance %s: cannot read audio %s (not a format "
                                  "libsndfile reads, or unreadable)", u->where, u->id, u->audio);
        } else {
            sf_close(f);
            double total = info.samplerate > 0 ? (double)info.frames / info.samplerate : 0;
            if (total - u->offset_s > 0) u->duration_s = total - u->offset_s;
            else
                st = sr_strbuf_printf(&m, "%s: utterance %s: audio %s lasts %.3f s, not more than "
                                      "the offset %.3f s", u->where, u->id, u->audio, total,
                                      u->offset_s);
        }
        if (st) return st;
        if (m.data) { u->problem = m.data; d->n_problems++; }
    }
    return SR_OK;
}

double sr_dataset_total_duration(const sr_dataset *d)
{
    double s = 0;
    for (size_t i = 0; d && i < d->n; i++)
        if (d->utts[i].duration_s > 0) s += d->utts[i].duration_s;
    return s;
}
