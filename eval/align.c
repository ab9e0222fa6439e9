/*
 * align.c — word splitting, sclite-compatible alignment, WER and CER counts.
 *
 * Algorithm (NIST sclite's DP over a linear reference and hypothesis): D[i][j] is the least cost
 * of aligning the first i reference units with the first j hypothesis units, with costs
 * correct 0, substitution 4, deletion 3, insertion 3. D[0][j] are insertions, D[i][0] deletions;
 * inside, the three candidates are diag = D[i-1][j-1] + (equal ? 0 : 4), del = D[i-1][j] + 3,
 * ins = D[i][j-1] + 3, and the cell keeps diag when diag <= del and diag <= ins, else del when
 * del < ins, else ins (sclite's order, which decides between equal-cost alignments and hence the
 * split of errors into S/D/I). The path is traced back from D[N][M]. One cost row is kept; the
 * choices take one byte per cell up to 64 M cells, beyond that the trace recomputes blocks of
 * rows from checkpoints (align_spans), so a 20,000-word utterance needs megabytes, not 400 MB.
 *
 * Units are spans of bytes: words for WER, UTF-8 code points for CER, numbered first (equal
 * units, equal ids) so that the DP compares integers.
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

/* Largest (n + 1)(m + 1) aligned with the whole back-pointer matrix (one byte per cell); larger
 * problems use the checkpointed trace below (test hook: sr_align_set_full_limit). */
static size_t full_limit = (size_t)64 << 20;

void sr_align_set_full_limit(size_t cells) { full_limit = cells ? cells : ((size_t)64 << 20); }

/* One DP cell of the file comment: the cost from its three predecessors and sclite's choice. */
static inline int64_t cell(int64_t diag_prev, int64_t up, int64_t left, int eq, unsigned char *b)
{
    int64_t diag = diag_prev + (eq ? 0 : COST_SUB);
    int64_t del = up + COST_DEL;
    int64_t ins = left + COST_INS;
    if (diag <= del && diag <= ins) {
        *b = BACK_DIAG;
        return diag;
    }
    if (del < ins) {
        *b = BACK_DEL;
        return del;
    }
    *b = BACK_INS;
    return ins;
}

/* Rows i0 + 1 .. i1 of the DP over columns 0 .. jmax from the cost row of i0 (row: [jmax + 1],
 * overwritten with the cost row of i1); back pointers of row i go to back[(i - i0 - 1) * w] when
 * back is not NULL; every save_every-th row (absolute index) is copied to ck[i / save_every]
 * when ck is not NULL. */
static void dp_rows(const uint32_t *ref, const uint32_t *hyp, size_t i0, size_t i1, size_t jmax,
                    int64_t *row, unsigned char *back, size_t w, int32_t *ck, size_t save_every,
                    size_t ck_w)
{
    unsigned char scratch = 0;
    for (size_t i = i0 + 1; i <= i1; i++) {
        unsigned char *brow = back ? back + (i - i0 - 1) * w : NULL;
        int64_t diag_prev = row[0];
        row[0] = diag_prev + COST_DEL;
        if (brow) brow[0] = BACK_DEL;
        for (size_t j = 1; j <= jmax; j++) {
            int64_t up = row[j];
            row[j] = cell(diag_prev, up, row[j - 1], ref[i - 1] == hyp[j - 1],
                          brow ? &brow[j] : &scratch);
            diag_prev = up;
        }
        if (ck && i % save_every == 0) /* costs <= 4 (n + m) < 2^31: checked by the caller */
            for (size_t j = 0, o = (i / save_every) * ck_w; j <= jmax; j++) ck[o + j] = (int32_t)row[j];
    }
}

/* Number the units of both sequences so that equal units get equal ids (an exact hash table
 * over their bytes): the DP then compares integers. ids: [n + m], ref's first. */
static sr_status intern(const span *ref, size_t n, const span *hyp, size_t m, uint32_t *ids)
{
    size_t total = n + m, cap = 16;
    while (cap < 2 * total) cap *= 2;
    int64_t *slot = sr_malloc(cap * sizeof *slot, "alignment unit table"); /* unit index or -1 */
    if (!slot) return SR_ERR_NOMEM;
    for (size_t k = 0; k < cap; k++) slot[k] = -1;
    uint32_t next = 0;
    for (size_t u = 0; u < total; u++) {
        const span *a = u < n ? &ref[u] : &hyp[u - n];
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (size_t b = 0; b < a->len; b++) h = (h ^ (unsigned char)a->s[b]) * 1099511628211ULL;
        size_t k = (size_t)h & (cap - 1);
        for (;;) {
            if (slot[k] < 0) {
                slot[k] = (int64_t)u;
                ids[u] = next++;
                break;
            }
            size_t v = (size_t)slot[k];
            const span *b = v < n ? &ref[v] : &hyp[v - n];
            if (span_eq(*a, *b)) {
                ids[u] = ids[v];
                break;
            }
            k = (k + 1) & (cap - 1);
        }
    }
    free(slot);
    return SR_OK;
}

/* The DP of the file comment over two span sequences. Up to full_limit cells the back pointers
 * of every cell are kept (one byte each). Beyond, the cost rows of every B-th row are kept (B
 * about 2 sqrt(n), costs as int32), and the trace recomputes one block of B rows at a time from its checkpoint,
 * only up to the column the trace has reached: the same arithmetic gives the same costs and
 * choices, so the path is exactly the full matrix's, in O(m sqrt(n)) memory and twice the time. */
static sr_status align_spans(const span *ref, size_t n, const span *hyp, size_t m,
                             sr_edit_counts *counts, sr_align_step **path, size_t *n_path)
{
    if (path) *path = NULL;
    if (n_path) *n_path = 0;
    memset(counts, 0, sizeof *counts);
    if (n > (size_t)INT64_MAX / 8 || m > (size_t)INT64_MAX / 8 || (m + 1) > SIZE_MAX / (n + 1) ||
        n + m > SIZE_MAX / sizeof(sr_align_step))
        return sr_error(SR_ERR_ARG, "sr_align: %zu x %zu units is too large to align", n, m);
    size_t w = m + 1;
    int full = (n + 1) * w <= full_limit;
    size_t B = n, nck = 0;
    if (!full) {
        /* B ~ 2 sqrt(n): the checkpoints ((n / B) rows of 4-byte costs) and one block of back
         * pointers (B rows of bytes) then take about the same memory */
        B = 64;
        while (B * B < 4 * n) B += 64;
        nck = n / B + 1;
        if (n + m > (size_t)INT32_MAX / 4 || nck > SIZE_MAX / w / sizeof(int32_t) || B > SIZE_MAX / w)
            return sr_error(SR_ERR_ARG, "sr_align: %zu x %zu units is too large to align", n, m);
    }
    /* back: the whole matrix (full) or one block of B rows; ck: the checkpoint cost rows */
    unsigned char *back = sr_malloc((full ? n + 1 : B) * w, "alignment back-pointers");
    int64_t *row = back ? sr_malloc(w * sizeof *row, "alignment cost row") : NULL;
    uint32_t *ids = row ? sr_malloc((n + m + 1) * sizeof *ids, "alignment unit ids") : NULL;
    if (ids && intern(ref, n, hyp, m, ids)) {
        free(ids);
        ids = NULL;
    }
    const uint32_t *ra = ids, *ha = ids ? ids + n : NULL;
    int32_t *ck = ids && !full ? sr_malloc(nck * w * sizeof *ck, "alignment checkpoints") : NULL;
    sr_align_step *steps = (ids && (full || ck)) ? sr_malloc((n + m + 1) * sizeof *steps, "alignment path") : NULL;
    if (!steps) {
        free(back);
        free(row);
        free(ids);
        free(ck);
        return SR_ERR_NOMEM;
    }
    row[0] = 0;
    for (size_t j = 1; j <= m; j++) row[j] = row[j - 1] + COST_INS;
    if (full) {
        back[0] = BACK_DIAG;
        for (size_t j = 1; j <= m; j++) back[j] = BACK_INS;
        dp_rows(ra, ha, 0, n, m, row, back + w, w, NULL, 1, 0);
    } else {
        for (size_t j = 0; j <= m; j++) ck[j] = (int32_t)row[j];
        dp_rows(ra, ha, 0, n, m, row, NULL, w, ck, B, w);
    }
    /* trace back from (n, m), collecting the steps in reverse */
    size_t ns = 0, bi0 = 0; /* full: back row i at back + i w; else block rows bi0 + 1 .. */
    size_t i = n, j = m;
    while (i > 0 || j > 0) {
        unsigned char b;
        if (i == 0) b = BACK_INS;
        else if (full) b = back[i * w + j];
        else {
            if (ns == 0 || i <= bi0) {
                /* the block holding row i: rows bi0 + 1 .. i, columns 0 .. j (the trace only
                 * moves up and left from here) */
                bi0 = ((i - 1) / B) * B;
                for (size_t c = 0; c <= j; c++) row[c] = ck[(bi0 / B) * w + c];
                dp_rows(ra, ha, bi0, i, j, row, back, w, NULL, 1, 0);
            }
            b = back[(i - bi0 - 1) * w + j];
        }
        sr_align_step st;
        if (i > 0 && j > 0 && b == BACK_DIAG) {
            int eq = ra[i - 1] == ha[j - 1];
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
        steps[ns++] = st;
    }
    free(back);
    free(row);
    free(ids);
    free(ck);
    counts->n_ref = (int64_t)n;
    counts->n_hyp = (int64_t)m;
    if (!path || !ns) {
        free(steps);
        return SR_OK;
    }
    for (size_t a = 0, z = ns - 1; a < z; a++, z--) { /* into order */
        sr_align_step t = steps[a];
        steps[a] = steps[z];
        steps[z] = t;
    }
    *path = steps;
    if (n_path) *n_path = ns;
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
