/*
 * wordtimes.c — word-level alignments: NIST CTM files and Montreal Forced Aligner TextGrids
 * (Praat text format, long or short), turned into per-utterance word lists {word, start, end}
 * sorted by utterance id (see eval/dataset.h).
 *
 * CTM: every non-comment line is `utt channel start duration word [more fields]`; lines of one
 * utterance may be scattered, so all lines are collected, then sorted by (utterance, start,
 * line) and grouped.
 *
 * TextGrid: Praat's text reader ignores everything except numbers, "strings" and <flags>, which
 * is what makes the long format ("xmin = 0", "intervals [1]:") and the short format (bare
 * values) the same token stream. We do the same: labels, "=", ":" and bracketed indices are
 * skipped, "!" starts a comment, "" inside a string is a quote. The stream is then
 *   "ooTextFile" "TextGrid" xmin xmax <exists> n_tiers
 *   per tier: class name xmin xmax n  then n x (xmin xmax "text") for an "IntervalTier"
 *                                      or n x (time "mark") for a "TextTier".
 * The words tier (named "words", or "<speaker> - words" as MFA names it for several speakers)
 * gives the words; intervals with empty text are silences and are left out.
 */
#include "dataset.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "textio.h"

static void utt_words_clear(sr_utt_words *u)
{
    for (size_t i = 0; i < u->n; i++) free(u->words[i].word);
    free(u->words);
    free(u->id);
    free(u->where);
    memset(u, 0, sizeof *u);
}

void sr_alignments_free(sr_alignments *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n; i++) utt_words_clear(&a->utts[i]);
    free(a->utts);
    free(a);
}

static int cmp_words_key(const void *key, const void *e)
{
    return strcmp((const char *)key, ((const sr_utt_words *)e)->id);
}

const sr_utt_words *sr_alignments_find(const sr_alignments *a, const char *id)
{
    if (!a || !id || !a->n) return NULL;
    return bsearch(id, a->utts, a->n, sizeof *a->utts, cmp_words_key);
}

void sr_alignments_for_dataset(const sr_alignments *a, const sr_dataset *d,
                               const sr_utt_words **per_utt, size_t *n_missing)
{
    size_t missing = 0;
    for (size_t i = 0; d && i < d->n; i++) {
        per_utt[i] = sr_alignments_find(a, d->utts[i].id);
        missing += per_utt[i] == NULL;
    }
    if (n_missing) *n_missing = missing;
}

/* Append a word to u (capacity *cap). */
static sr_status push_word(sr_utt_words *u, size_t *cap, const char *word, size_t len,
                           double start, double end)
{
    if (u->n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        sr_word_time *w = realloc(u->words, c * sizeof *w);
        if (!w) return sr_error(SR_ERR_NOMEM, "out of memory reading word times");
        u->words = w;
        *cap = c;
    }
    char *s = sr_malloc(len + 1, "word");
    if (!s) return SR_ERR_NOMEM;
    memcpy(s, word, len);
    s[len] = '\0';
    u->words[u->n++] = (sr_word_time){s, start, end};
    return SR_OK;
}

/* ---- CTM ---------------------------------------------------------------------------------- */

typedef struct {
    char *utt, *word; /* point into the line buffer */
    double start, end;
    size_t line;      /* 1-based */
} ctm_rec;

static int cmp_ctm(const void *a, const void *b)
{
    const ctm_rec *x = a, *y = b;
    int c = strcmp(x->utt, y->utt);
    if (c) return c;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* Parse a whole token as a finite double. */
static int parse_double(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v);
}

static sr_status load_ctm(const char *path, sr_alignments *a)
{
    sr_lines l;
    sr_status st = sr_lines_read(path, &l);
    if (st) return st;
    ctm_rec *r = sr_calloc(l.n + 1, sizeof *r, "CTM lines");
    if (!r) { sr_lines_free(&l); return SR_ERR_NOMEM; }
    size_t n = 0;
    for (size_t i = 0; !st && i < l.n; i++) {
        char *s = sr_trim(l.line[i]);
        if (!*s || !strncmp(s, ";;", 2)) continue;
        char *tok[5], *save = NULL;
        int nt = 0;
        for (char *t = strtok_r(s, " \t", &save); t && nt < 5; t = strtok_r(NULL, " \t", &save))
            tok[nt++] = t;
        double start, dur;
        if (nt < 5)
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: expected \"utt channel start duration word\", "
                          "got %d field%s", path, i + 1, nt, nt == 1 ? "" : "s");
        else if (!parse_double(tok[2], &start) || start < 0)
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: start \"%s\" is not a number >= 0", path, i + 1,
                          tok[2]);
        else if (!parse_double(tok[3], &dur) || dur < 0)
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: duration \"%s\" is not a number >= 0", path,
                          i + 1, tok[3]);
        else
            r[n++] = (ctm_rec){tok[0], tok[4], start, start + dur, i + 1};
    }
    if (!st) qsort(r, n, sizeof *r, cmp_ctm);
    size_t cap_utts = 0, cap_words = 0;
    for (size_t i = 0; !st && i < n; i++) {
        if (!a->n || strcmp(a->utts[a->n - 1].id, r[i].utt)) {
            if (a->n == cap_utts) {
                size_t c = cap_utts ? cap_utts * 2 : 16;
                sr_utt_words *u = realloc(a->utts, c * sizeof *u);
                if (!u) { st = sr_error(SR_ERR_NOMEM, "%s: out of memory", path); break; }
                a->utts = u;
                cap_utts = c;
            }
            sr_utt_words *u = &a->utts[a->n++];
            memset(u, 0, sizeof *u);
            cap_words = 0;
            sr_strbuf w = {0};
            u->id = sr_strdup(r[i].utt);
            /* the utterance's first line in the file, not its earliest word */
            size_t first = r[i].line;
            for (size_t k = i; k < n && !strcmp(r[k].utt, r[i].utt); k++)
                if (r[k].line < first) first = r[k].line;
            if (!u->id || sr_strbuf_printf(&w, "%s:%zu", path, first)) { st = SR_ERR_NOMEM; break; }
            u->where = w.data;
        }
        st = push_word(&a->utts[a->n - 1], &cap_words, r[i].word, strlen(r[i].word), r[i].start,
                       r[i].end);
    }
    free(r);
    sr_lines_free(&l);
    return st;
}

/* ---- TextGrid ----------------------------------------------------------------------------- */

typedef enum { TG_EOF, TG_NUM, TG_STR, TG_FLAG } tg_kind;

typedef struct {
    const char *path;
    const char *p, *end;
    size_t line;       /* current line (1-based) */
    /* the last token */
    tg_kind kind;
    size_t tok_line;
    double num;
    sr_strbuf str;     /* string contents (quotes removed, "" unescaped) or flag text */
} tg_lex;

static sr_status tg_next(tg_lex *x)
{
    for (;;) {
        while (x->p < x->end && isspace((unsigned char)*x->p))
            if (*x->p++ == '\n') x->line++;
        x->tok_line = x->line;
        if (x->p >= x->end) { x->kind = TG_EOF; return SR_OK; }
        char c = *x->p;
        if (c == '!') { /* comment to the end of the line */
            while (x->p < x->end && *x->p != '\n') x->p++;
            continue;
        }
        if (c == '[') { /* "item [1]:" — an index label, not a value */
            while (x->p < x->end && *x->p != ']')
                if (*x->p++ == '\n') x->line++;
            if (x->p < x->end) x->p++;
            continue;
        }
        if (c == '"') {
            sr_strbuf_clear(&x->str);
            x->p++;
            for (;;) {
                if (x->p >= x->end)
                    return sr_error(SR_ERR_FORMAT, "%s:%zu: string not terminated", x->path,
                                    x->tok_line);
                const char *q = memchr(x->p, '"', (size_t)(x->end - x->p));
                if (!q)
                    return sr_error(SR_ERR_FORMAT, "%s:%zu: string not terminated", x->path,
                                    x->tok_line);
                for (const char *k = x->p; k < q; k++) x->line += *k == '\n';
                sr_status st = sr_strbuf_append(&x->str, x->p, (size_t)(q - x->p));
                if (st) return st;
                x->p = q + 1;
                if (x->p < x->end && *x->p == '"') { /* "" is an escaped quote */
                    if ((st = sr_strbuf_append(&x->str, "\"", 1))) return st;
                    x->p++;
                    continue;
                }
                break;
            }
            if (!x->str.data && sr_strbuf_append(&x->str, "", 0)) return SR_ERR_NOMEM;
            x->kind = TG_STR;
            return SR_OK;
        }
        if (c == '<') {
            const char *q = x->p;
            while (q < x->end && *q != '>' && *q != '\n') q++;
            if (q >= x->end || *q != '>')
                return sr_error(SR_ERR_FORMAT, "%s:%zu: flag \"<...>\" not terminated", x->path,
                                x->tok_line);
            sr_strbuf_clear(&x->str);
            sr_status st = sr_strbuf_append(&x->str, x->p, (size_t)(q + 1 - x->p));
            if (st) return st;
            x->p = q + 1;
            x->kind = TG_FLAG;
            return SR_OK;
        }
        const char *w = x->p;
        while (x->p < x->end && !isspace((unsigned char)*x->p)) x->p++;
        if (isdigit((unsigned char)c) || c == '-' || c == '+' || c == '.') {
            /* the buffer is NUL-terminated, so strtod stops at the end at the latest */
            char *e;
            double v = strtod(w, &e);
            if (e == x->p) {
                if (!isfinite(v))
                    return sr_error(SR_ERR_FORMAT, "%s:%zu: number \"%.*s\" is not finite",
                                    x->path, x->tok_line, (int)(x->p - w), w);
                x->num = v;
                x->kind = TG_NUM;
                return SR_OK;
            }
            return sr_error(SR_ERR_FORMAT, "%s:%zu: \"%.*s\" is not a number", x->path,
                            x->tok_line, (int)SR_MIN(x->p - w, 40), w);
        }
        /* a label such as "xmin", "=", "intervals:" — skipped, as Praat does */
    }
}

static const char *tg_kind_name(tg_kind k)
{
    switch (k) {
    case TG_EOF: return "end of file";
    case TG_NUM: return "a number";
    case TG_STR: return "a string";
    case TG_FLAG: return "a <flag>";
    }
    return "?";
}

/* Next token must be of kind k; what names the expected value in the message. */
static sr_status tg_expect(tg_lex *x, tg_kind k, const char *what)
{
    sr_status st = tg_next(x);
    if (st) return st;
    if (x->kind != k)
        return sr_error(SR_ERR_FORMAT, "%s:%zu: expected %s (%s), found %s", x->path, x->tok_line,
                        what, tg_kind_name(k), tg_kind_name(x->kind));
    return SR_OK;
}

/* A tier/interval count: a whole number in [0, 1e8]. */
static sr_status tg_count(tg_lex *x, const char *what, size_t *n)
{
    sr_status st = tg_expect(x, TG_NUM, what);
    if (st) return st;
    if (x->num < 0 || x->num > 1e8 || x->num != floor(x->num))
        return sr_error(SR_ERR_FORMAT, "%s:%zu: %s %g is not a whole number >= 0", x->path,
                        x->tok_line, what, x->num);
    *n = (size_t)x->num;
    return SR_OK;
}

static int is_words_tier(const char *name)
{
    size_t n = strlen(name);
    return !strcmp(name, "words") || !strcmp(name, "Words") ||
           (n > 8 && !strcmp(name + n - 8, " - words"));
}

/* Parse one TextGrid text into u (id and where set by the caller). */
static sr_status tg_parse(tg_lex *x, sr_utt_words *u)
{
    sr_status st = tg_expect(x, TG_STR, "File type");
    if (st) return st;
    if (strcmp(x->str.data, "ooTextFile"))
        return sr_error(SR_ERR_FORMAT, "%s:%zu: file type \"%s\" is not supported (want a Praat "
                        "text file, \"ooTextFile\")", x->path, x->tok_line, x->str.data);
    if ((st = tg_expect(x, TG_STR, "Object class"))) return st;
    if (strcmp(x->str.data, "TextGrid"))
        return sr_error(SR_ERR_FORMAT, "%s:%zu: object class \"%s\" is not a TextGrid", x->path,
                        x->tok_line, x->str.data);
    double g0, g1;
    if ((st = tg_expect(x, TG_NUM, "xmin"))) return st;
    g0 = x->num;
    if ((st = tg_expect(x, TG_NUM, "xmax"))) return st;
    g1 = x->num;
    if (g1 < g0)
        return sr_error(SR_ERR_FORMAT, "%s:%zu: TextGrid xmax %g is before xmin %g", x->path,
                        x->tok_line, g1, g0);
    if ((st = tg_expect(x, TG_FLAG, "tiers? <exists>"))) return st;
    size_t n_tiers = 0;
    if (!strcmp(x->str.data, "<exists>")) {
        if ((st = tg_count(x, "tier count", &n_tiers))) return st;
    } else if (strcmp(x->str.data, "<absent>")) {
        return sr_error(SR_ERR_FORMAT, "%s:%zu: expected <exists> or <absent>, found %s", x->path,
                        x->tok_line, x->str.data);
    }
    int found = 0;
    size_t found_line = 0, cap = 0;
    sr_strbuf cls = {0};
    for (size_t t = 0; !st && t < n_tiers; t++) {
        if ((st = tg_expect(x, TG_STR, "tier class"))) break;
        size_t tier_line = x->tok_line;
        sr_strbuf_clear(&cls);
        if ((st = sr_strbuf_append(&cls, x->str.data, x->str.len))) break;
        int interval = !strcmp(cls.data, "IntervalTier");
        if (!interval && strcmp(cls.data, "TextTier")) {
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: tier class \"%s\" is not IntervalTier or TextTier",
                          x->path, tier_line, cls.data);
            break;
        }
        if ((st = tg_expect(x, TG_STR, "tier name"))) break;
        int words = interval && is_words_tier(x->str.data);
        if (words && found) {
            st = sr_error(SR_ERR_FORMAT, "%s:%zu: a second words tier (\"%s\"; the first is on line "
                          "%zu): which speaker's words to use is ambiguous", x->path, x->tok_line,
                          x->str.data, found_line);
            break;
        }
        if (words) { found = 1; found_line = x->tok_line; }
        size_t n;
        if ((st = tg_expect(x, TG_NUM, "tier xmin")) || (st = tg_expect(x, TG_NUM, "tier xmax")) ||
            (st = tg_count(x, interval ? "interval count" : "point count", &n)))
            break;
        double prev_end = -INFINITY;
        for (size_t k = 0; !st && k < n; k++) {
            if (!interval) { /* TextTier point: time "mark" */
                if (!(st = tg_expect(x, TG_NUM, "point time"))) st = tg_expect(x, TG_STR, "mark");
                continue;
            }
            double a, b;
            if ((st = tg_expect(x, TG_NUM, "interval xmin"))) break;
            a = x->num;
            size_t line = x->tok_line;
            if ((st = tg_expect(x, TG_NUM, "interval xmax"))) break;
            b = x->num;
            if ((st = tg_expect(x, TG_STR, "interval text"))) break;
            if (!words) continue;
            if (a < 0 || b < a) {
                st = sr_error(SR_ERR_FORMAT, "%s:%zu: interval [%g, %g] is negative or ends before "
                              "it starts", x->path, line, a, b);
                break;
            }
            if (a < prev_end - 1e-9) {
                st = sr_error(SR_ERR_FORMAT, "%s:%zu: interval [%g, %g] starts before the previous "
                              "one ends (%g)", x->path, line, a, b, prev_end);
                break;
            }
            prev_end = b;
            /* keep the label as written, without surrounding blanks; empty = silence */
            const char *s = x->str.data;
            size_t len = x->str.len;
            while (len && isspace((unsigned char)*s)) { s++; len--; }
            while (len && isspace((unsigned char)s[len - 1])) len--;
            if (len) st = push_word(u, &cap, s, len, a, b);
        }
    }
    sr_strbuf_free(&cls);
    if (st) return st;
    if (!found)
        return sr_error(SR_ERR_FORMAT, "%s: no IntervalTier named \"words\" (or \"<speaker> - "
                        "words\")", x->path);
    return SR_OK;
}

static sr_status load_textgrid(const char *path, sr_utt_words *u)
{
    memset(u, 0, sizeof *u);
    char *buf;
    size_t len;
    sr_status st = sr_read_file(path, &buf, &len);
    if (st) return st;
    const unsigned char *b = (const unsigned char *)buf;
    if (len >= 2 && ((b[0] == 0xFF && b[1] == 0xFE) || (b[0] == 0xFE && b[1] == 0xFF))) {
        free(buf);
        return sr_error(SR_ERR_FORMAT, "%s: UTF-16 TextGrid is not supported; convert it to UTF-8 "
                        "(iconv -f UTF-16 -t UTF-8)", path);
    }
    if (memchr(buf, '\0', len)) {
        free(buf);
        return sr_error(SR_ERR_FORMAT, "%s: NUL byte in the file (binary TextGrid? save it as "
                        "a text file)", path);
    }
    size_t skip = len >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF ? 3 : 0;
    tg_lex x = {.path = path, .p = buf + skip, .end = buf + len, .line = 1};
    u->id = sr_path_stem(path);
    u->where = sr_strdup(path);
    if (!u->id || !u->where) st = SR_ERR_NOMEM;
    else if (!*u->id) st = sr_error(SR_ERR_FORMAT, "%s: empty utterance id (file name)", path);
    if (!st) st = tg_parse(&x, u);
    sr_strbuf_free(&x.str);
    free(buf);
    if (st) utt_words_clear(u);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------ */

sr_status sr_alignments_load(const char *path, sr_alignments **out)
{
    *out = NULL;
    if (!path) return sr_error(SR_ERR_ARG, "alignments path is NULL");
    int dir = sr_path_is_dir(path);
    if (!dir && !sr_path_is_file(path))
        return sr_error(SR_ERR_IO, "%s: no such alignment file or folder", path);
    sr_alignments *a = sr_calloc(1, sizeof *a, "alignments");
    if (!a) return SR_ERR_NOMEM;
    sr_status st = SR_OK;
    if (dir) {
        static const char *const ext[] = {".TextGrid"};
        char **files;
        size_t n;
        if (!(st = sr_find_files(path, ext, 1, &files, &n))) {
            if (!n)
                st = sr_error(SR_ERR_FORMAT, "%s: no *.TextGrid file in this folder or below", path);
            else if (!(a->utts = sr_calloc(n, sizeof *a->utts, "alignments")))
                st = SR_ERR_NOMEM;
            for (size_t i = 0; !st && i < n; i++)
                if (!(st = load_textgrid(files[i], &a->utts[a->n]))) a->n++;
            sr_paths_free(files, n);
        }
    } else if (sr_ends_with_nocase(path, ".TextGrid")) {
        if (!(a->utts = sr_calloc(1, sizeof *a->utts, "alignments"))) st = SR_ERR_NOMEM;
        else if (!(st = load_textgrid(path, &a->utts[0]))) a->n = 1;
    } else {
        st = load_ctm(path, a);
    }
    if (!st)
        st = sr_sort_unique(a->utts, a->n, sizeof *a->utts, offsetof(sr_utt_words, id),
                            offsetof(sr_utt_words, where), "duplicate utterance id");
    if (st) { sr_alignments_free(a); return st; }
    *out = a;
    return SR_OK;
}
