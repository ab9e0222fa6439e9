/*
 * align.c — word splitting, sclite-compatible alignment, WER and CER counts.
 *
 * Algorithm (NIST sclite's DP over a linear reference and hypothesis): D[i][j] is the least cost
 * of aligning the first i reference units with the first j hypothesis units, with costs
 * correct 0, substitution 4, deletion 3, insertion 3. D[0][j] are insertions, D[i][0] deletions;
 * inside, the three candidates are diag = D[i-1][j-1] + (equal ? 0 : 4), del = D[i-1][j] + 3,
 * ins = D[i][j-1] + 3, and the cell keeps diag when diag <= del and diag <= ins, else del when
 * del < ins, else ins (sclite's order, which decides between equal-cost alignments and hence the
 * split of errors into S/D/I). The path is traced back from D[N][M]. Only two cost rows are kept;
 * the choices take one byte per cell.
 *
 * Units are spans of bytes: words for WER, UTF-8 code points for CER.
 */
#include "metrics.h"

#include <math.h>
#include <string.h>

#include "../core/internal.h"

enum { COST_SUB = 4, COST_INS = 3, COST_DEL = 3 };
enum { BACK_DIAG = 0, BACK_DEL = 1, BACK_INS = 2 };

typedef struct span {
    const char *s;
    size_t len;
} span;

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

sr_status sr_words_split(const char *text, sr_words *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_words_split: out is NULL");
    memset(out, 0, sizeof *out);
    if (!text) text = "";
    size_t len = strlen(text), n = 0;
    for (size_t i = 0; i < len; i++)
        if (!is_space((unsigned char)text[i]) && (i == 0 || is_space((unsigned char)text[i - 1]))) n++;
    if (n == 0) return SR_OK;
    char *buf = sr_malloc(len + 1, "word split buffer");
    char **w = buf ? sr_calloc(n, sizeof *w, "word list") : NULL;
    if (!w) {
        free(buf);
        return SR_ERR_NOMEM;
    }
    memcpy(buf, text, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_space((unsigned char)buf[i])) {
            buf[i] = '\0';
        } else if (i == 0 || buf[i - 1] == '\0') {
            w[k++] = buf + i;
        }
    }
    out->w = w;
    out->n = n;
    out->buf = buf;
    return SR_OK;
}

void sr_words_free(sr_words *w)
{
    if (!w) return;
    free(w->w);
    free(w->buf);
    memset(w, 0, sizeof *w);
}

size_t sr_words_complete_prefix(const char *text, size_t stable_bytes)
{
    if (!text) return 0;
    size_t len = strlen(text), n = 0;
    if (stable_bytes > len) stable_bytes = len;
    size_t i = 0;
    while (i < stable_bytes) {
        while (i < stable_bytes && is_space((unsigned char)text[i])) i++;
        if (i >= stable_bytes) break;
        size_t end = i;
        while (end < len && !is_space((unsigned char)text[end])) end++;
        /* the word runs to `end` in the full text: it is complete only if that is inside the
         * committed bytes */
        if (end > stable_bytes) break;
        n++;
        i = end;
    }
    return n;
}

static int span_eq(span a, span b) { return a.len == b.len && memcmp(a.s, b.s, a.len) == 0; }

/* The DP of the file comment over two span sequences. */
static sr_status align_spans(const span *ref, size_t n, const span *hyp, size_t m,
                             sr_edit_counts *counts, sr_align_step **path, size_t *n_path)
{
    if (path) *path = NULL;
    if (n_path) *n_path = 0;
    memset(counts, 0, sizeof *counts);
    if (n > (size_t)INT64_MAX / 8 || m > (size_t)INT64_MAX / 8 ||
        (m + 1) > SIZE_MAX / (n + 1))
        return sr_error(SR_ERR_ARG, "sr_align: %zu x %zu units is too large to align", n, m);
    size_t w = m + 1;
    unsigned char *back = sr_malloc((n + 1) * w, "alignment back-pointers");
    int64_t *prev = back ? sr_malloc(w * sizeof *prev, "alignment cost row") : NULL;
    int64_t *cur = prev ? sr_malloc(w * sizeof *cur, "alignment cost row") : NULL;
    if (!cur) {
        free(back);
        free(prev);
        return SR_ERR_NOMEM;
    }
    prev[0] = 0;
    back[0] = BACK_DIAG;
    for (size_t j = 1; j <= m; j++) {
        prev[j] = prev[j - 1] + COST_INS;
        back[j] = BACK_INS;
    }
    for (size_t i = 1; i <= n; i++) {
        unsigned char *brow = back + i * w;
        cur[0] = prev[0] + COST_DEL;
        brow[0] = BACK_DEL;
        for (size_t j = 1; j <= m; j++) {
            int64_t diag = prev[j - 1] + (span_eq(ref[i - 1], hyp[j - 1]) ? 0 : COST_SUB);
            int64_t del = prev[j] + COST_DEL;
            int64_t ins = cur[j - 1] + COST_INS;
            if (diag <= del && diag <= ins) {
                cur[j] = diag;
                brow[j] = BACK_DIAG;
            } else if (del < ins) {
                cur[j] = del;
                brow[j] = BACK_DEL;
            } else {
                cur[j] = ins;
                brow[j] = BACK_INS;
            }
        }
        int64_t *t = prev;
        prev = cur;
        cur = t;
    }
    free(prev);
    free(cur);

    /* trace back twice: once to size the path, once to fill it in order */
    size_t steps = 0;
    for (size_t i = n, j = m; i > 0 || j > 0; steps++) {
        unsigned char b = back[i * w + j];
        if (i > 0 && j > 0 && b == BACK_DIAG) { i--; j--; }
        else if (i > 0 && (j == 0 || b == BACK_DEL)) i--;
        else j--;
    }
    sr_align_step *p = NULL;
    if (path && steps) {
        p = sr_malloc(steps * sizeof *p, "alignment path");
        if (!p) {
            free(back);
            return SR_ERR_NOMEM;
        }
    }
    size_t k = steps;
    for (size_t i = n, j = m; i > 0 || j > 0;) {
        unsigned char b = back[i * w + j];
        sr_align_step st;
        if (i > 0 && j > 0 && b == BACK_DIAG) {
            int eq = span_eq(ref[i - 1], hyp[j - 1]);
            st.op = eq ? SR_EDIT_COR : SR_EDIT_SUB;
            if (eq) counts->cor++; else counts->sub++;
            st.ref = (int64_t)--i;
            st.hyp = (int64_t)--j;
        } else if (i > 0 && (j == 0 || b == BACK_DEL)) {
            st.op = SR_EDIT_DEL;
            counts->del++;
            st.ref = (int64_t)--i;
            st.hyp = -1;
        } else {
            st.op = SR_EDIT_INS;
            counts->ins++;
            st.ref = -1;
            st.hyp = (int64_t)--j;
        }
        if (p) p[--k] = st;
    }
    free(back);
    counts->n_ref = (int64_t)n;
    counts->n_hyp = (int64_t)m;
    if (path) *path = p;
    if (n_path) *n_path = path ? steps : 0;
    return SR_OK;
}

static sr_status words_to_spans(const char *const *w, size_t n, const char *which, span **out)
{
    *out = NULL;
    if (n == 0) return SR_OK;
    if (!w) return sr_error(SR_ERR_ARG, "sr_align: %s words are NULL with a count of %zu", which, n);
    span *s = sr_malloc(n * sizeof *s, "alignment units");
    if (!s) return SR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!w[i]) {
            free(s);
            return sr_error(SR_ERR_ARG, "sr_align: %s word %zu is NULL", which, i);
        }
        s[i].s = w[i];
        s[i].len = strlen(w[i]);
    }
    *out = s;
    return SR_OK;
}

sr_status sr_align(const char *const *ref, size_t n_ref, const char *const *hyp, size_t n_hyp,
                   sr_edit_counts *counts, sr_align_step **path, size_t *n_path)
{
    if (path) *path = NULL;
    if (n_path) *n_path = 0;
    if (!counts) return sr_error(SR_ERR_ARG, "sr_align: counts is NULL");
    memset(counts, 0, sizeof *counts);
    span *r = NULL, *h = NULL;
    sr_status st = words_to_spans(ref, n_ref, "reference", &r);
    if (!st) st = words_to_spans(hyp, n_hyp, "hypothesis", &h);
    if (!st) st = align_spans(r, n_ref, h, n_hyp, counts, path, n_path);
    free(r);
    free(h);
    return st;
}

sr_status sr_wer_counts(const char *ref, const char *hyp, sr_edit_counts *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_wer_counts: out is NULL");
    memset(out, 0, sizeof *out);
    sr_words r = {0}, h = {0};
    sr_status st = sr_words_split(ref, &r);
    if (!st) st = sr_words_split(hyp, &h);
    if (!st) st = sr_align((const char *const *)r.w, r.n, (const char *const *)h.w, h.n, out, NULL, NULL);
    sr_words_free(&r);
    sr_words_free(&h);
    return st;
}

/* Length of the UTF-8 sequence at s (at most `left` bytes); 1 for a byte that does not start a
 * well-formed sequence, so malformed input still splits into units. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 1;
    if (n > left) return 1;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    /* overlong forms, surrogates and values past U+10FFFF are not code points */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 1;
    return n;
}

/* Code points of the words joined by single spaces. */
static sr_status text_to_chars(const char *text, span **out, size_t *n_out)
{
    static const char space[] = " ";
    *out = NULL;
    *n_out = 0;
    sr_words w = {0};
    sr_status st = sr_words_split(text, &w);
    if (st) return st;
    size_t cap = 0;
    for (size_t i = 0; i < w.n; i++) cap += strlen(w.w[i]) + 1;
    if (cap == 0) {
        sr_words_free(&w);
        return SR_OK;
    }
    span *s = sr_malloc(cap * sizeof *s, "character units");
    if (!s) {
        sr_words_free(&w);
        return SR_ERR_NOMEM;
    }
    /* spans point into the caller's text, which outlives them, not into w's copy */
    const char *p = text;
    size_t k = 0;
    for (size_t i = 0; i < w.n; i++) {
        while (is_space((unsigned char)*p)) p++;
        size_t len = strlen(w.w[i]);
        if (i > 0) s[k++] = (span){space, 1};
        for (size_t b = 0; b < len;) {
            size_t l = utf8_len((const unsigned char *)p + b, len - b);
            s[k++] = (span){p + b, l};
            b += l;
        }
        p += len;
    }
    sr_words_free(&w);
    *out = s;
    *n_out = k;
    return SR_OK;
}

sr_status sr_cer_counts(const char *ref, const char *hyp, sr_edit_counts *out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_cer_counts: out is NULL");
    memset(out, 0, sizeof *out);
    span *r = NULL, *h = NULL;
    size_t nr = 0, nh = 0;
    sr_status st = text_to_chars(ref, &r, &nr);
    if (!st) st = text_to_chars(hyp, &h, &nh);
    if (!st) st = align_spans(r, nr, h, nh, out, NULL, NULL);
    free(r);
    free(h);
    return st;
}

double sr_edit_rate(const sr_edit_counts *c)
{
    if (!c) return NAN;
    int64_t err = c->sub + c->del + c->ins;
    if (c->n_ref == 0) return err == 0 ? 0.0 : NAN;
    return (double)err / (double)c->n_ref;
}

void sr_edit_counts_add(sr_edit_counts *acc, const sr_edit_counts *x)
{
    if (!acc || !x) return;
    acc->cor += x->cor;
    acc->sub += x->sub;
    acc->del += x->del;
    acc->ins += x->ins;
    acc->n_ref += x->n_ref;
    acc->n_hyp += x->n_hyp;
}
