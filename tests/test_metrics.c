/*
 * test_metrics.c — suites eval_wer (alignment with sclite's costs and tie-breaking, WER/CER,
 * agreement with NIST sclite on tests/fixtures/sclite and, when sclite is installed, live on that
 * set and on a seeded random set), eval_rwer (hand-worked RWER/ARWER and committed-prefix
 * variants) and eval_latency (percentiles, emission delay, revisions, RTF, corpus aggregation,
 * shard merge). Expected numbers in comments are worked out by hand from the definitions in
 * docs/metrics.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../eval/metrics.h"
#include "test.h"

#define EPS 1e-12

static void assert_counts(const sr_edit_counts *c, int64_t cor, int64_t sub, int64_t del, int64_t ins)
{
    CU_ASSERT_EQUAL(c->cor, cor);
    CU_ASSERT_EQUAL(c->sub, sub);
    CU_ASSERT_EQUAL(c->del, del);
    CU_ASSERT_EQUAL(c->ins, ins);
    CU_ASSERT_EQUAL(c->n_ref, cor + sub + del);
    CU_ASSERT_EQUAL(c->n_hyp, cor + sub + ins);
    if (c->cor != cor || c->sub != sub || c->del != del || c->ins != ins)
        printf("\n      counts C%lld S%lld D%lld I%lld, wanted C%lld S%lld D%lld I%lld\n",
               (long long)c->cor, (long long)c->sub, (long long)c->del, (long long)c->ins,
               (long long)cor, (long long)sub, (long long)del, (long long)ins);
}

/* The path of two texts as a string of C/S/D/I letters (into buf). */
static const char *ops_of(const char *ref, const char *hyp, char *buf, size_t cap, sr_edit_counts *c)
{
    static const char letter[] = "CSDI";
    sr_words r = {0}, h = {0};
    sr_align_step *path = NULL;
    size_t n = 0;
    buf[0] = '\0';
    CU_ASSERT_EQUAL_FATAL(sr_words_split(ref, &r), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_words_split(hyp, &h), SR_OK);
    sr_status st = sr_align((const char *const *)r.w, r.n, (const char *const *)h.w, h.n, c, &path, &n);
    CU_ASSERT_EQUAL(st, SR_OK);
    if (!st && n < cap) {
        for (size_t i = 0; i < n; i++) buf[i] = letter[path[i].op];
        buf[n] = '\0';
    }
    free(path);
    sr_words_free(&r);
    sr_words_free(&h);
    return buf;
}

static void check_ops(const char *ref, const char *hyp, const char *want)
{
    char buf[256];
    sr_edit_counts c;
    ops_of(ref, hyp, buf, sizeof buf, &c);
    CU_ASSERT_STRING_EQUAL(buf, want);
    if (strcmp(buf, want)) printf("\n      \"%s\" vs \"%s\": %s, wanted %s\n", ref, hyp, buf, want);
}

/* ---- eval_wer ---------------------------------------------------------------------------- */

static void test_words_split(void)
{
    sr_words w;
    CU_ASSERT_EQUAL_FATAL(sr_words_split("  the\tcat \n\r sat\v\f", &w), SR_OK);
    CU_ASSERT_EQUAL_FATAL(w.n, 3);
    CU_ASSERT_STRING_EQUAL(w.w[0], "the");
    CU_ASSERT_STRING_EQUAL(w.w[1], "cat");
    CU_ASSERT_STRING_EQUAL(w.w[2], "sat");
    sr_words_free(&w);
    CU_ASSERT_PTR_NULL(w.w);
    CU_ASSERT_EQUAL_FATAL(sr_words_split(NULL, &w), SR_OK);
    CU_ASSERT_EQUAL(w.n, 0);
    sr_words_free(&w);
    CU_ASSERT_EQUAL_FATAL(sr_words_split(" \t ", &w), SR_OK);
    CU_ASSERT_EQUAL(w.n, 0);
    sr_words_free(&w);
    sr_words_free(NULL);
    /* UTF-8 bytes are not whitespace */
    CU_ASSERT_EQUAL_FATAL(sr_words_split("caf\xc3\xa9 \xc2\xa0x", &w), SR_OK);
    CU_ASSERT_EQUAL(w.n, 2);
    sr_words_free(&w);
    TEST_ASSERT_ERR(sr_words_split("a", NULL), SR_ERR_ARG, "out");
}

static void test_complete_prefix(void)
{
    const char *t = "hello wor ld";
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 0), 0);
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 3), 0);  /* "hel" cuts "hello" */
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 5), 1);  /* "hello" ends at the boundary */
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 6), 1);
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 8), 1);  /* "wo" of "wor" */
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 9), 2);
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 12), 3);
    CU_ASSERT_EQUAL(sr_words_complete_prefix(t, 99), 3); /* clamped */
    CU_ASSERT_EQUAL(sr_words_complete_prefix(" a ", 2), 1);
    CU_ASSERT_EQUAL(sr_words_complete_prefix(NULL, 4), 0);
}

static void test_align_hand(void)
{
    sr_edit_counts c;
    /* costs: correct 0, sub 4, del/ins 3 */
    check_ops("a b c", "a b c", "CCC");
    check_ops("a b c", "a x c", "CSC");
    /* "the cat sat" / "the the cat": I C C D (cost 6) beats C S S (cost 8) */
    check_ops("the cat sat", "the the cat", "ICCD");
    /* ties, decided like sclite: diagonal first, deletion only when strictly cheaper */
    check_ops("a b", "b a", "DCI");
    check_ops("a", "b c", "IS");
    check_ops("b c", "a", "DS");
    check_ops("a b c", "c", "DDC");
    check_ops("go", "go go go", "IIC");
    check_ops("a b c", "a c b", "CDCI");
    /* a substitution (4) is cheaper than a deletion plus an insertion (6) */
    check_ops("p q", "w x", "SS");
    /* minimizing 4S + 3D + 3I can cost an error: 5 here (sclite says C3 D3 I2), where a
     * unit-cost Levenshtein distance is 4 */
    CU_ASSERT_EQUAL(sr_wer_counts("a a b a c b", "b c b b c", &c), SR_OK);
    assert_counts(&c, 3, 0, 3, 2);

    /* the path's indices */
    const char *ref[] = {"the", "cat", "sat"}, *hyp[] = {"the", "the", "cat"};
    sr_align_step *p = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(sr_align(ref, 3, hyp, 3, &c, &p, &n), SR_OK);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT(p[0].op == SR_EDIT_INS && p[0].ref == -1 && p[0].hyp == 0);
    CU_ASSERT(p[1].op == SR_EDIT_COR && p[1].ref == 0 && p[1].hyp == 1);
    CU_ASSERT(p[2].op == SR_EDIT_COR && p[2].ref == 1 && p[2].hyp == 2);
    CU_ASSERT(p[3].op == SR_EDIT_DEL && p[3].ref == 2 && p[3].hyp == -1);
    assert_counts(&c, 2, 0, 1, 1);
    free(p);
    /* counts without a path */
    CU_ASSERT_EQUAL(sr_align(ref, 3, hyp, 3, &c, NULL, NULL), SR_OK);
    assert_counts(&c, 2, 0, 1, 1);
}

static void test_wer_empty(void)
{
    sr_edit_counts c;
    /* empty reference: all insertions, n_ref 0, no rate (and no division by zero) */
    CU_ASSERT_EQUAL_FATAL(sr_wer_counts("", "uh huh", &c), SR_OK);
    assert_counts(&c, 0, 0, 0, 2);
    CU_ASSERT(isnan(sr_edit_rate(&c)));
    CU_ASSERT_EQUAL_FATAL(sr_wer_counts(NULL, NULL, &c), SR_OK);
    assert_counts(&c, 0, 0, 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(sr_edit_rate(&c), 0.0, EPS);
    CU_ASSERT_EQUAL_FATAL(sr_wer_counts("a b c", " ", &c), SR_OK);
    assert_counts(&c, 0, 0, 3, 0);
    CU_ASSERT_DOUBLE_EQUAL(sr_edit_rate(&c), 1.0, EPS);
    CU_ASSERT_EQUAL_FATAL(sr_wer_counts("a", "b c d e", &c), SR_OK);
    assert_counts(&c, 0, 1, 0, 3);
    CU_ASSERT_DOUBLE_EQUAL(sr_edit_rate(&c), 4.0, EPS); /* WER above 1 is possible */

    /* corpus = sum of errors / sum of reference words, not a mean of rates */
    sr_edit_counts acc = {0}, u1, u2;
    CU_ASSERT_EQUAL(sr_wer_counts("a b c d", "a b c x", &u1), SR_OK); /* 1/4 */
    CU_ASSERT_EQUAL(sr_wer_counts("", "y", &u2), SR_OK);               /* 1/0 */
    sr_edit_counts_add(&acc, &u1);
    sr_edit_counts_add(&acc, &u2);
    CU_ASSERT_EQUAL(acc.n_ref, 4);
    CU_ASSERT_DOUBLE_EQUAL(sr_edit_rate(&acc), 0.5, EPS);
    CU_ASSERT(isnan(sr_edit_rate(NULL)));
}

static void test_cer(void)
{
    sr_edit_counts c;
    /* spaces count as units: "ab c" has 4 units; extra blanks collapse */
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("ab c", "  ab \t c ", &c), SR_OK);
    assert_counts(&c, 4, 0, 0, 0);
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("ab c", "abc", &c), SR_OK);
    assert_counts(&c, 3, 0, 1, 0);
    /* code points, not bytes: é is one unit */
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("caf\xc3\xa9", "cafe", &c), SR_OK);
    assert_counts(&c, 3, 1, 0, 0);
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("\xe2\x82\xac" "5", "\xe2\x82\xac" "5", &c), SR_OK);
    assert_counts(&c, 2, 0, 0, 0);
    /* a stray byte (0xff), a truncated sequence (0xc3 at the end) and an overlong form
     * (0xc0 0xaf) are one unit per byte */
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("a\xff" "b\xc0\xaf" "c\xc3", "ab", &c), SR_OK);
    CU_ASSERT_EQUAL(c.n_ref, 7);
    assert_counts(&c, 2, 0, 5, 0);
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("", "ab", &c), SR_OK);
    assert_counts(&c, 0, 0, 0, 2);
    CU_ASSERT_EQUAL_FATAL(sr_cer_counts("hello world", "helo wordl", &c), SR_OK);
    CU_ASSERT_EQUAL(c.n_ref, 11);
    CU_ASSERT_EQUAL(c.sub + c.del + c.ins, 3);
}

static void test_align_bad_args(void)
{
    sr_edit_counts c;
    const char *ref[] = {"a", "b"}, *hyp[] = {"a", NULL};
    TEST_ASSERT_ERR(sr_align(ref, 2, hyp, 2, &c, NULL, NULL), SR_ERR_ARG, "hypothesis word 1");
    TEST_ASSERT_ERR(sr_align(NULL, 2, ref, 2, &c, NULL, NULL), SR_ERR_ARG, "reference words are NULL");
    TEST_ASSERT_ERR(sr_align(ref, 2, ref, 2, NULL, NULL, NULL), SR_ERR_ARG, "counts");
    TEST_ASSERT_ERR(sr_wer_counts("a", "b", NULL), SR_ERR_ARG, "out");
    TEST_ASSERT_ERR(sr_cer_counts("a", "b", NULL), SR_ERR_ARG, "out");
    /* zero-length arrays may be NULL */
    CU_ASSERT_EQUAL(sr_align(NULL, 0, NULL, 0, &c, NULL, NULL), SR_OK);
}

/* A trn file: "text (utt_id)" lines. Returns the number of lines read into ids/texts
 * (malloc'ed strings), or -1. */
static int read_trn(const char *path, char ***ids, char ***texts)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0, cap = 0;
    *ids = NULL;
    *texts = NULL;
    while (fgets(line, sizeof line, f)) {
        char *close = strrchr(line, ')'), *open = strrchr(line, '(');
        if (!close || !open || open > close) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            *ids = realloc(*ids, (size_t)cap * sizeof **ids);
            *texts = realloc(*texts, (size_t)cap * sizeof **texts);
            if (!*ids || !*texts) { fclose(f); return -1; }
        }
        *close = '\0';
        (*ids)[n] = strdup(open + 1);
        *open = '\0';
        (*texts)[n] = strdup(line);
        n++;
    }
    fclose(f);
    return n;
}

static void free_trn(char **ids, char **texts, int n)
{
    for (int i = 0; i < n; i++) {
        free(ids[i]);
        free(texts[i]);
    }
    free(ids);
    free(texts);
}

/* Letters of the character-level path (the same units as sr_cer_counts). */
static void cer_ops(const char *ref, const char *hyp, char *buf, size_t cap)
{
    /* sr_cer_counts exposes no path; re-derive it by aligning code points as words ("_" for the
     * blank between words, as the generator script writes it) */
    char *rs = calloc(4 * strlen(ref) + 2, 1), *hs = calloc(4 * strlen(hyp) + 2, 1);
    const char *src[2] = {ref, hyp};
    char *dst[2] = {rs, hs};
    for (int t = 0; t < 2; t++) {
        sr_words w = {0};
        sr_words_split(src[t], &w);
        char *o = dst[t];
        for (size_t i = 0; i < w.n; i++) {
            if (i) o += sprintf(o, "_ ");
            for (const unsigned char *p = (const unsigned char *)w.w[i]; *p;) {
                size_t l = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : 2;
                memcpy(o, p, l);
                o[l] = ' ';
                o += l + 1;
                p += l;
            }
        }
        sr_words_free(&w);
    }
    sr_edit_counts c;
    ops_of(rs, hs, buf, cap, &c);
    free(rs);
    free(hs);
}

/* Compare srkit with an expected.txt written by scripts/gen_sclite_expected.sh for dir's
 * ref.trn/hyp.trn. Returns the number of utterances checked. */
static int check_sclite_expected(const char *dir, const char *expected)
{
    char rp[1024], hp[1024];
    snprintf(rp, sizeof rp, "%s/ref.trn", dir);
    snprintf(hp, sizeof hp, "%s/hyp.trn", dir);
    char **rid, **rtx, **hid, **htx;
    int nr = read_trn(rp, &rid, &rtx), nh = read_trn(hp, &hid, &htx);
    CU_ASSERT_FATAL(nr > 0 && nr == nh);
    FILE *f = fopen(expected, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[8192];
    int checked = 0, totals = 0, bad = 0;
    sr_edit_counts sum[2] = {{0}, {0}};
    while (fgets(line, sizeof line, f)) {
        char kind[16], id[256], ops[4096];
        long long c, s, d, i;
        if (line[0] == '#') continue;
        if (sscanf(line, "%15s %255s %lld %lld %lld %lld %4095s", kind, id, &c, &s, &d, &i, ops) != 7) {
            CU_FAIL("malformed expected line");
            continue;
        }
        int is_cer = !strncmp(kind, "cer", 3);
        if (strstr(kind, "_total")) {
            assert_counts(&sum[is_cer], c, s, d, i);
            totals++;
            continue;
        }
        int k = 0;
        while (k < nr && strcmp(rid[k], id)) k++;
        CU_ASSERT_FATAL(k < nr);
        int kh = 0;
        while (kh < nh && strcmp(hid[kh], id)) kh++;
        CU_ASSERT_FATAL(kh < nh);
        sr_edit_counts got;
        char buf[4096];
        if (is_cer) {
            CU_ASSERT_EQUAL(sr_cer_counts(rtx[k], htx[kh], &got), SR_OK);
            cer_ops(rtx[k], htx[kh], buf, sizeof buf);
        } else {
            sr_edit_counts pc;
            ops_of(rtx[k], htx[kh], buf, sizeof buf, &pc);
            CU_ASSERT_EQUAL(sr_wer_counts(rtx[k], htx[kh], &got), SR_OK);
        }
        if (!buf[0]) strcpy(buf, "-");
        sr_edit_counts_add(&sum[is_cer], &got);
        if (got.cor != c || got.sub != s || got.del != d || got.ins != i || strcmp(buf, ops)) {
            printf("\n      %s %s: srkit C%lld S%lld D%lld I%lld %s, sclite C%lld S%lld D%lld I%lld %s",
                   kind, id, (long long)got.cor, (long long)got.sub, (long long)got.del,
                   (long long)got.ins, buf, c, s, d, i, ops);
            bad++;
        }
        checked++;
    }
    fclose(f);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(totals, 2);
    CU_ASSERT_EQUAL(checked, 2 * nr); /* every utterance at word and character level */
    free_trn(rid, rtx, nr);
    free_trn(hid, htx, nh);
    return checked;
}

/* ---- the region alignment (long utterances) against a plain reference -------------------- */

/* The plain DP of docs/metrics.md over integer sequences, written independently of eval/align.c:
 * the whole matrix, one 2-bit choice per cell (sclite's rule spelled out literally), traced back
 * from (n, m). Writes the path as ops letters ("CSDI") plus indices; returns its length, or -1
 * when out of memory. */
#define TEST_LEN(a) (sizeof(a) / sizeof((a)[0]))
enum { REF_DIAG = 0, REF_DEL = 1, REF_INS = 2 };
static long ref_align(const int *a, size_t n, const int *b, size_t m, sr_align_step *out)
{
    size_t rb = (m + 1 + 3) / 4; /* bytes per row: 4 choices a byte */
    unsigned char *ch = calloc((n + 1) * rb, 1);
    long *row = malloc((m + 1) * sizeof *row);
    if (!ch || !row) {
        free(ch);
        free(row);
        return -1;
    }
#define REF_SET(i, j, v) (ch[(i) * rb + ((j) >> 2)] |= (unsigned char)((v) << (2 * ((j) & 3))))
#define REF_GET(i, j) ((ch[(i) * rb + ((j) >> 2)] >> (2 * ((j) & 3))) & 3)
    for (size_t j = 0; j <= m; j++) {
        row[j] = 3 * (long)j;
        if (j) REF_SET(0, j, REF_INS);
    }
    for (size_t i = 1; i <= n; i++) {
        long up_left = row[0];
        row[0] += 3;
        REF_SET(i, 0, REF_DEL);
        unsigned char *cr = ch + i * rb;
        for (size_t j = 1; j <= m; j++) {
            long diag = up_left + (a[i - 1] == b[j - 1] ? 0 : 4);
            long del = row[j] + 3;
            long ins = row[j - 1] + 3;
            up_left = row[j];
            if (diag <= del && diag <= ins) {
                row[j] = diag;
            } else if (del < ins) {
                row[j] = del;
                cr[j >> 2] |= (unsigned char)(REF_DEL << (2 * (j & 3)));
            } else {
                row[j] = ins;
                cr[j >> 2] |= (unsigned char)(REF_INS << (2 * (j & 3)));
            }
        }
    }
    long len = 0;
    size_t i = n, j = m;
    while (i > 0 || j > 0) {
        int c = REF_GET(i, j);
        sr_align_step st;
        if (c == REF_DIAG) {
            i--;
            j--;
            st = (sr_align_step){a[i] == b[j] ? SR_EDIT_COR : SR_EDIT_SUB, (int64_t)i, (int64_t)j};
        } else if (c == REF_DEL) {
            i--;
            st = (sr_align_step){SR_EDIT_DEL, (int64_t)i, -1};
        } else {
            j--;
            st = (sr_align_step){SR_EDIT_INS, -1, (int64_t)j};
        }
        out[len++] = st;
    }
#undef REF_SET
#undef REF_GET
    for (long x = 0, z = len - 1; x < z; x++, z--) {
        sr_align_step t = out[x];
        out[x] = out[z];
        out[z] = t;
    }
    free(ch);
    free(row);
    return len;
}

static uint64_t lcg(uint64_t *r)
{
    *r = *r * 6364136223846793005ULL + 1442695040888963407ULL;
    return *r >> 33;
}

/* b: a copy of a with edits: each unit substituted or dropped with probability pct_sub, pct_del
 * percent, and followed by 1..max_ins inserted units with probability pct_ins percent, all drawn
 * from a vocabulary of V units. Returns m (at most cap). */
static size_t edited(const int *a, size_t n, int *b, size_t cap, int V, int pct_sub, int pct_del,
                     int pct_ins, int max_ins, uint64_t *r)
{
    size_t m = 0;
    for (size_t i = 0; i < n && m < cap; i++) {
        int u = (int)(lcg(r) % 100);
        if (u < pct_sub) b[m++] = (int)(lcg(r) % (uint64_t)V);
        else if (u >= pct_sub + pct_del) b[m++] = a[i];
        if ((int)(lcg(r) % 100) < pct_ins)
            for (int k = 1 + (int)(lcg(r) % (uint64_t)max_ins); k > 0 && m < cap; k--)
                b[m++] = (int)(lcg(r) % (uint64_t)V);
    }
    return m;
}

/* sr_align of two integer sequences (as words "0", "1", ...) with each block limit in turn
 * (sr_align_set_full_limit; 0 = the default) against ref_align: the number of limits under which
 * the counts and every step agree. */
static int region_agrees(const int *a, size_t n, const int *b, size_t m, const size_t *limits,
                         size_t n_limits, const char *what)
{
    static char names[64][12];
    static const char *word[64];
    if (!word[0])
        for (int v = 0; v < 64; v++) {
            snprintf(names[v], sizeof names[v], "%d", v);
            word[v] = names[v];
        }
    const char **wa = malloc((n + 1) * sizeof *wa), **wb = malloc((m + 1) * sizeof *wb);
    sr_align_step *want = malloc((n + m + 1) * sizeof *want);
    CU_ASSERT_FATAL(wa && wb && want);
    for (size_t i = 0; i < n; i++) wa[i] = word[a[i]];
    for (size_t j = 0; j < m; j++) wb[j] = word[b[j]];
    long nw = ref_align(a, n, b, m, want);
    CU_ASSERT_FATAL(nw >= 0);
    sr_edit_counts wc = {0};
    for (long k = 0; k < nw; k++) {
        int64_t *slot[] = {&wc.cor, &wc.sub, &wc.del, &wc.ins};
        (*slot[want[k].op])++;
    }
    int agree = 0;
    for (size_t l = 0; l < n_limits; l++) {
        sr_edit_counts c;
        sr_align_step *got = NULL;
        size_t ng = 0;
        sr_align_set_full_limit(limits[l]);
        sr_status st = sr_align(wa, n, wb, m, &c, &got, &ng);
        sr_align_set_full_limit(0);
        CU_ASSERT_EQUAL(st, SR_OK);
        int eq = !st && ng == (size_t)nw && c.cor == wc.cor && c.sub == wc.sub && c.del == wc.del &&
                 c.ins == wc.ins && c.n_ref == (int64_t)n && c.n_hyp == (int64_t)m;
        size_t k = 0;
        for (; eq && k < ng; k++) /* field by field: the struct has padding */
            eq = got[k].op == want[k].op && got[k].ref == want[k].ref && got[k].hyp == want[k].hyp;
        if (!eq)
            printf("\n      %s, block limit %zu: %zu x %zu units: srkit C%lld S%lld D%lld I%lld, reference"
                   " C%lld S%lld D%lld I%lld, first difference at step %zu", what, limits[l], n, m,
                   (long long)c.cor, (long long)c.sub, (long long)c.del, (long long)c.ins,
                   (long long)wc.cor, (long long)wc.sub, (long long)wc.del, (long long)wc.ins,
                   k ? k - 1 : 0);
        agree += eq;
        free(got);
    }
    free(want);
    free(wa);
    free(wb);
    return agree;
}

/* Random pairs of 0..300 units from vocabularies of 2..9 units (many equal-cost alignments, so
 * the tie order is exercised): edited copies, unrelated pairs (R grows to most of the matrix),
 * lengths far apart (R's diagonal offset), empty sides. Each pair is aligned with the whole
 * matrix (the default for small problems) and with the region method forced at several block
 * sizes: 1 cell (every piece split down to two rows), 40 and 3000 cells. */
static void test_align_region_random(void)
{
    static const size_t limits[] = {0, 1, 40, 3000};
    uint64_t r = 12345;
    int *a = malloc(1300 * sizeof *a), *b = malloc(1300 * sizeof *b);
    CU_ASSERT_FATAL(a && b);
    int same = 0, total = 0;
    for (int it = 0; it < 320; it++) {
        int V = 2 + it % 8, kind = it % 8;
        size_t n = (size_t)(lcg(&r) % 301), m;
        for (size_t i = 0; i < n; i++) a[i] = (int)(lcg(&r) % (uint64_t)V);
        if (kind < 4) { /* similar: 0..30 % edits */
            int e = (int)(lcg(&r) % 11);
            m = edited(a, n, b, 1300, V, e, e, e, 1, &r);
        } else if (kind == 4) { /* unrelated */
            m = (size_t)(lcg(&r) % 301);
            for (size_t j = 0; j < m; j++) b[j] = (int)(lcg(&r) % (uint64_t)V);
        } else if (kind == 5) { /* hypothesis much longer */
            m = edited(a, n, b, 1300, V, 3, 3, 100, 6, &r);
        } else if (kind == 6) { /* hypothesis much shorter */
            m = edited(a, n, b, 1300, V, 3, 70, 0, 1, &r);
        } else { /* empty hypothesis, empty reference, both empty */
            int e = (it / 8) % 3;
            if (e > 0) n = 0;
            m = e == 1 ? (size_t)(lcg(&r) % 301) : 0;
            for (size_t j = 0; j < m; j++) b[j] = (int)(lcg(&r) % (uint64_t)V);
        }
        char what[32];
        snprintf(what, sizeof what, "pair %d", it);
        same += region_agrees(a, n, b, m, limits, TEST_LEN(limits), what);
        total += (int)TEST_LEN(limits);
    }
    CU_ASSERT_EQUAL(same, total);
    free(a);
    free(b);
}

/* Long pairs (up to 30,000 units) with the default settings, which take the region method and
 * split the trace, and with 5000-cell blocks (several levels of splitting): a similar pair over 4
 * units, lengths far apart both ways, unrelated texts, empty sides. */
static void test_align_region_long(void)
{
    static const struct { size_t n; int V, kind; } cases[] = {
        {7000, 4, 0},  /* similar, ~10 % edits, 4-unit vocabulary */
        {30000, 6, 1}, /* reference 30,000, hypothesis ~1,200: R far from the main diagonal */
        {1200, 6, 2},  /* the other way round */
        {3000, 3, 3},  /* unrelated: R is most of the matrix */
        {30000, 5, 4}, /* empty hypothesis */
        {0, 5, 5},     /* empty reference, 30,000 hypothesis units */
    };
    static const size_t limits[] = {0, 5000};
    uint64_t r = 777;
    int *a = malloc(30001 * sizeof *a), *b = malloc(30001 * sizeof *b);
    CU_ASSERT_FATAL(a && b);
    for (size_t t = 0; t < TEST_LEN(cases); t++) {
        size_t n = cases[t].n, m = 0;
        int V = cases[t].V;
        for (size_t i = 0; i < n; i++) a[i] = (int)(lcg(&r) % (uint64_t)V);
        switch (cases[t].kind) {
        case 0: m = edited(a, n, b, 30000, V, 6, 2, 2, 1, &r); break;
        case 1: m = edited(a, n, b, 30000, V, 2, 96, 0, 1, &r); break;
        case 2: m = edited(a, n, b, 30000, V, 2, 0, 100, 48, &r); break;
        case 3: m = 3500; for (size_t j = 0; j < m; j++) b[j] = (int)(lcg(&r) % (uint64_t)V); break;
        case 4: m = 0; break;
        default: m = 30000; for (size_t j = 0; j < m; j++) b[j] = (int)(lcg(&r) % (uint64_t)V); break;
        }
        char what[32];
        snprintf(what, sizeof what, "long case %zu", t);
        CU_ASSERT_EQUAL(region_agrees(a, n, b, m, limits, TEST_LEN(limits), what), (int)TEST_LEN(limits));
    }
    free(a);
    free(b);
}

/* The sclite fixtures again, every problem through the region method. */
static void test_align_region_sclite(void)
{
    sr_align_set_full_limit(1);
    int n = check_sclite_expected(test_fixture("sclite"), test_fixture("sclite/expected.txt"));
    sr_align_set_full_limit(0);
    CU_ASSERT(n >= 60);
}

static void test_sclite_stored(void)
{
    int n = check_sclite_expected(test_fixture("sclite"), test_fixture("sclite/expected.txt"));
    CU_ASSERT(n >= 60);
}

static int have_sclite(void)
{
    return system("command -v sctk >/dev/null 2>&1 || command -v sclite >/dev/null 2>&1") == 0;
}

static void test_sclite_live(void)
{
    if (!have_sclite()) {
        TEST_SKIP("sclite not installed (Debian package sctk); stored numbers checked instead");
        return;
    }
    char cmd[2048];
    const char *out = test_tmppath("sclite-live.txt");
    snprintf(cmd, sizeof cmd, "bash scripts/gen_sclite_expected.sh %s %s 2>/dev/null", out,
             test_fixture("sclite"));
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    check_sclite_expected(test_fixture("sclite"), out);
}

/* A seeded random set (small vocabulary, so that repeats, shifts and ties are frequent), scored
 * live by sclite and by srkit. */
static void test_sclite_random(void)
{
    if (!have_sclite()) {
        TEST_SKIP("sclite not installed (Debian package sctk)");
        return;
    }
    static const char *vocab[] = {"a", "b", "c", "the", "cat", "sat", "on", "mat", "x", "caf\xc3\xa9"};
    const char *dir = test_tmppath("sclite-random");
    char cmd[2048], path[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(path, sizeof path, "%s/ref.trn", dir);
    FILE *fr = fopen(path, "w");
    snprintf(path, sizeof path, "%s/hyp.trn", dir);
    FILE *fh = fopen(path, "w");
    CU_ASSERT_FATAL(fr && fh);
    unsigned long long rng = 0x9E3779B97F4A7C15ull;
    for (int u = 0; u < 300; u++) {
        FILE *fs[2] = {fr, fh};
        for (int t = 0; t < 2; t++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int n = (int)((rng >> 33) % 13);
            for (int w = 0; w < n; w++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                /* the first 4 words of the vocabulary are drawn most often */
                unsigned r = (unsigned)(rng >> 33) % 16;
                fprintf(fs[t], "%s ", vocab[r < 10 ? r % 4 : r - 6]);
            }
            fprintf(fs[t], "(s%d-u%03d)\n", u % 7, u);
        }
    }
    fclose(fr);
    fclose(fh);
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    snprintf(cmd, sizeof cmd, "bash scripts/gen_sclite_expected.sh %s %s 2>/dev/null", path, dir);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    CU_ASSERT_EQUAL(check_sclite_expected(dir, path), 600);
}

/* ---- eval_rwer --------------------------------------------------------------------------- */

/* Reference "a b c d" ending at 500, 1000, 1500, 2000 ms, and a timeline with an entry before
 * the first word ends, an empty hypothesis and a final hypothesis longer than the reference.
 * Per entry (err/ref):              RWER   ARWER  RWER_s ARWER_s
 *   t=300  "a"          n_stable 0   0/1    1/0    0/0    0/0
 *   t=800  "a"          n_stable 0   0/1    0/1    0/0    1/1
 *   t=1000 ""           n_stable 0   0/0    2/2    0/0    2/2
 *   t=1200 "a x c"      n_stable 1   1/3    2/2    0/1    1/2
 *   t=2100 "a b c d e"  n_stable 5   1/4    1/4    1/4    1/4
 *   sums                             2/9    6/9    1/5    5/9                                 */
static const int64_t ends_abcd[] = {500, 1000, 1500, 2000};
static const sr_tl_entry tl_abcd[] = {
    {300, "a", 0, -1}, {800, "a", 0, -1}, {1000, "", 0, -1}, {1200, "a x c", 1, -1},
    {2100, "a b c d e", 5, -1},
};

static void assert_sums(const sr_rwer_sums *s, int64_t err, int64_t ref, int64_t n)
{
    CU_ASSERT_EQUAL(s->valid, 1);
    CU_ASSERT_EQUAL(s->err, err);
    CU_ASSERT_EQUAL(s->ref, ref);
    CU_ASSERT_EQUAL(s->n_entries, n);
    if (s->err != err || s->ref != ref)
        printf("\n      sums %lld/%lld, wanted %lld/%lld\n", (long long)s->err, (long long)s->ref,
               (long long)err, (long long)ref);
}

static void test_rwer_hand(void)
{
    sr_word_times wt = {ends_abcd, 4};
    sr_rwer_result r;
    CU_ASSERT_EQUAL_FATAL(sr_rwer_utt("a b c d", &wt, tl_abcd, 5, &r), SR_OK);
    assert_sums(&r.rwer, 2, 9, 5);
    assert_sums(&r.arwer, 6, 9, 5);
    assert_sums(&r.rwer_stable, 1, 5, 5);
    assert_sums(&r.arwer_stable, 5, 9, 5);
    CU_ASSERT_DOUBLE_EQUAL(sr_rwer_rate(&r.rwer), 2.0 / 9.0, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_rwer_rate(&r.arwer), 6.0 / 9.0, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_rwer_rate(&r.rwer_stable), 0.2, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_rwer_rate(&r.arwer_stable), 5.0 / 9.0, EPS);
}

static void test_rwer_availability(void)
{
    sr_rwer_result r;
    /* no word times: ARWER unavailable (NAN), RWER still there */
    CU_ASSERT_EQUAL_FATAL(sr_rwer_utt("a b c d", NULL, tl_abcd, 5, &r), SR_OK);
    CU_ASSERT_EQUAL(r.arwer.valid, 0);
    CU_ASSERT_EQUAL(r.arwer_stable.valid, 0);
    CU_ASSERT(isnan(sr_rwer_rate(&r.arwer)));
    assert_sums(&r.rwer, 2, 9, 5);
    /* one entry without n_stable: committed variants unavailable */
    sr_tl_entry e[2] = {{100, "a", 1, -1}, {200, "a b", -1, -1}};
    CU_ASSERT_EQUAL_FATAL(sr_rwer_utt("a b", NULL, e, 2, &r), SR_OK);
    CU_ASSERT_EQUAL(r.rwer_stable.valid, 0);
    CU_ASSERT(isnan(sr_rwer_rate(&r.rwer_stable)));
    assert_sums(&r.rwer, 0, 3, 2);
    /* no timeline at all */
    CU_ASSERT_EQUAL_FATAL(sr_rwer_utt("a b", NULL, NULL, 0, &r), SR_OK);
    CU_ASSERT_EQUAL(r.rwer.valid, 0);
    /* empty reference, aligned (no words, no times): every hypothesis word is an insertion
     * against an empty prefix; the rate is undefined, the sums still add up */
    sr_word_times none = {NULL, 0};
    sr_tl_entry f[2] = {{100, "", 0, -1}, {400, "uh huh", 2, -1}};
    CU_ASSERT_EQUAL_FATAL(sr_rwer_utt("", &none, f, 2, &r), SR_OK);
    assert_sums(&r.rwer, 2, 0, 2);
    assert_sums(&r.arwer, 2, 0, 2);
    assert_sums(&r.arwer_stable, 2, 0, 2);
    CU_ASSERT(isnan(sr_rwer_rate(&r.rwer)));
    /* a hypothesis much longer than the reference: the prefix is the whole reference */
    sr_tl_entry g[1] = {{900, "x a y b z", 0, -1}};
    CU_ASSERT_EQUAL_FATAL(sr_rwer_utt("a b", NULL, g, 1, &r), SR_OK);
    assert_sums(&r.rwer, 3, 2, 1);
    assert_sums(&r.rwer_stable, 0, 0, 1);
    CU_ASSERT_DOUBLE_EQUAL(sr_rwer_rate(&r.rwer_stable), 0.0, EPS);

    /* corpus sums skip invalid utterances */
    sr_rwer_sums acc = {0}, inval = {0};
    sr_rwer_sums_add(&acc, &inval);
    CU_ASSERT_EQUAL(acc.valid, 0);
    sr_rwer_sums one = {3, 4, 2, 1};
    sr_rwer_sums_add(&acc, &one);
    sr_rwer_sums_add(&acc, &one);
    assert_sums(&acc, 6, 8, 4);
}

static void test_rwer_bad_input(void)
{
    sr_rwer_result r;
    sr_word_times wt = {ends_abcd, 4};
    sr_tl_entry back[3] = {{100, "a", 0, -1}, {300, "a", 0, -1}, {200, "a b", 0, -1}};
    TEST_ASSERT_ERR(sr_rwer_utt("a b c d", &wt, back, 3, &r), SR_ERR_ARG, "timeline entry 2");
    sr_tl_entry neg[1] = {{-5, "a", 0, -1}};
    TEST_ASSERT_ERR(sr_rwer_utt("a b c d", &wt, neg, 1, &r), SR_ERR_ARG, "negative");
    sr_tl_entry over[2] = {{100, "a", 0, -1}, {300, "a b", 3, -1}};
    TEST_ASSERT_ERR(sr_rwer_utt("a b c d", &wt, over, 2, &r), SR_ERR_ARG, "timeline entry 1: n_stable 3");
    sr_word_times short_wt = {ends_abcd, 3};
    TEST_ASSERT_ERR(sr_rwer_utt("a b c d", &short_wt, tl_abcd, 5, &r), SR_ERR_ARG, "3 end times for 4");
    static const int64_t unordered[] = {500, 400, 1500, 2000};
    sr_word_times bad_wt = {unordered, 4};
    TEST_ASSERT_ERR(sr_rwer_utt("a b c d", &bad_wt, tl_abcd, 5, &r), SR_ERR_ARG, "reference word 1 \"b\"");
    TEST_ASSERT_ERR(sr_rwer_utt("a", NULL, NULL, 2, &r), SR_ERR_ARG, "entries are NULL");
    TEST_ASSERT_ERR(sr_rwer_utt("a", NULL, tl_abcd, 1, NULL), SR_ERR_ARG, "out");
}

/* ---- eval_latency ------------------------------------------------------------------------ */

static void test_percentiles(void)
{
    const double s4[] = {1, 2, 3, 4}, s10[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s4, 4, 50), 2, EPS);  /* ceil(2) = rank 2 */
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s4, 4, 51), 3, EPS);  /* ceil(2.04) = rank 3 */
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s4, 4, 90), 4, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s4, 4, 0), 1, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s4, 4, 100), 4, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s10, 10, 50), 5, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s10, 10, 90), 9, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s10, 10, 99), 10, EPS);
    CU_ASSERT_DOUBLE_EQUAL(sr_percentile_sorted(s10, 1, 99), 1, EPS);
    CU_ASSERT(isnan(sr_percentile_sorted(s10, 0, 50)));

    double x[] = {40, 10, 30, 20, 1000};
    sr_stat st;
    CU_ASSERT_EQUAL_FATAL(sr_stat_compute(x, 5, &st), SR_OK);
    CU_ASSERT_EQUAL(st.n, 5);
    CU_ASSERT_DOUBLE_EQUAL(st.mean, 220, EPS);
    CU_ASSERT_DOUBLE_EQUAL(st.p50, 30, EPS);  /* rank ceil(2.5) = 3 */
    CU_ASSERT_DOUBLE_EQUAL(st.p90, 1000, EPS);
    CU_ASSERT_DOUBLE_EQUAL(st.max, 1000, EPS);
    CU_ASSERT_DOUBLE_EQUAL(x[0], 40, EPS); /* input untouched */
    CU_ASSERT_EQUAL_FATAL(sr_stat_compute(NULL, 0, &st), SR_OK);
    CU_ASSERT(st.n == 0 && isnan(st.mean) && isnan(st.p50) && isnan(st.max));
    double bad[] = {1, NAN};
    TEST_ASSERT_ERR(sr_stat_compute(bad, 2, &st), SR_ERR_ARG, "value 1 is NaN");
}

/* Reference "a b c" ending at 400, 900, 1500 ms. Emission delays of the final "a b c":
 * a: held from t=500 on -> 100; b: only the last entry has it (t=1200 had "d") -> 2000-900 =
 * 1100; c: held from t=1600 -> 100. Retracted: [a b]->[a d] 1, [a d c]->[a b c] 2, total 3. */
static const int64_t ends_abc[] = {400, 900, 1500};
static const sr_tl_entry tl_abc[] = {
    {300, "", 0, 5000000},      {500, "a", 1, 20000000},     {1000, "a b", 1, 40000000},
    {1200, "a d", 1, 10000000}, {1600, "a d c", 2, 30000000}, {2000, "a b c", 3, 15000000},
};

static void test_emission_delay(void)
{
    sr_word_times wt = {ends_abc, 3};
    sr_words f = {0};
    CU_ASSERT_EQUAL_FATAL(sr_words_split("a b c", &f), SR_OK);
    const char *ref[] = {"a", "b", "c"};
    sr_edit_counts c;
    sr_align_step *p = NULL;
    size_t np = 0;
    CU_ASSERT_EQUAL_FATAL(sr_align(ref, 3, (const char *const *)f.w, f.n, &c, &p, &np), SR_OK);
    double *d = NULL;
    size_t nd = 0;
    CU_ASSERT_EQUAL_FATAL(sr_emission_delays(&f, p, np, &wt, tl_abc, 6, &d, &nd), SR_OK);
    CU_ASSERT_EQUAL_FATAL(nd, 3);
    CU_ASSERT_DOUBLE_EQUAL(d[0], 100, EPS);
    CU_ASSERT_DOUBLE_EQUAL(d[1], 1100, EPS);
    CU_ASSERT_DOUBLE_EQUAL(d[2], 100, EPS);
    free(d);
    /* no word times: no delays */
    CU_ASSERT_EQUAL(sr_emission_delays(&f, p, np, NULL, tl_abc, 6, &d, &nd), SR_OK);
    CU_ASSERT(nd == 0 && d == NULL);
    /* a final hypothesis given apart from the timeline ("a c b", the last entry being "a b c") */
    sr_words f2 = {0};
    CU_ASSERT_EQUAL_FATAL(sr_words_split("a c b", &f2), SR_OK);
    sr_align_step *p2 = NULL;
    size_t np2 = 0;
    CU_ASSERT_EQUAL_FATAL(sr_align(ref, 3, (const char *const *)f2.w, f2.n, &c, &p2, &np2), SR_OK);
    /* "a b c" vs "a c b" aligns C D C I (as sclite does); of the correct words a (position 0)
     * and c (position 1), the last entry holds only a at its position, so only a gets a delay */
    CU_ASSERT_EQUAL(sr_emission_delays(&f2, p2, np2, &wt, tl_abc, 6, &d, &nd), SR_OK);
    CU_ASSERT_EQUAL_FATAL(nd, 1);
    CU_ASSERT_DOUBLE_EQUAL(d[0], 100, EPS);
    free(d);
    /* a path that does not fit the word times */
    sr_word_times short_wt = {ends_abc, 1};
    TEST_ASSERT_ERR(sr_emission_delays(&f, p, np, &short_wt, tl_abc, 6, &d, &nd), SR_ERR_ARG,
                    "reference word 1 has no end time");
    free(p);
    free(p2);
    sr_words_free(&f);
    sr_words_free(&f2);
}

static void test_retracted(void)
{
    int64_t r = -1;
    CU_ASSERT_EQUAL(sr_retracted_words(tl_abc, 6, &r), SR_OK);
    CU_ASSERT_EQUAL(r, 3);
    sr_tl_entry e[3] = {{100, "a b c", -1, -1}, {200, "x", -1, -1}, {300, "x y", -1, -1}};
    CU_ASSERT_EQUAL(sr_retracted_words(e, 3, &r), SR_OK);
    CU_ASSERT_EQUAL(r, 3);
    CU_ASSERT_EQUAL(sr_retracted_words(NULL, 0, &r), SR_OK);
    CU_ASSERT_EQUAL(r, 0);
    TEST_ASSERT_ERR(sr_retracted_words(NULL, 3, &r), SR_ERR_ARG, "entries are NULL");
}

static void test_score_utt(void)
{
    sr_word_times wt = {ends_abc, 3};
    sr_utt_input in = {.id = "u1", .ref = "a b c", .times = &wt, .entries = tl_abc, .n_entries = 6,
                       .hyp = NULL, .audio_ms = 2000};
    sr_utt_metrics m;
    CU_ASSERT_EQUAL_FATAL(sr_score_utt(&in, &m), SR_OK);
    assert_counts(&m.wer, 3, 0, 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.wer_rate, 0, EPS);
    CU_ASSERT_EQUAL(m.first_hyp_ms, 500);
    CU_ASSERT_DOUBLE_EQUAL(m.finalization_ms, 15, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(m.emission_delay_mean_ms, 1300.0 / 3.0, 1e-9);
    CU_ASSERT_EQUAL(m.n_emission_words, 3);
    CU_ASSERT_EQUAL(m.retracted_words, 3);
    CU_ASSERT_DOUBLE_EQUAL(m.revisions_per_word, 1.0, EPS);
    CU_ASSERT_DOUBLE_EQUAL(m.compute_ms, 120, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(m.audio_ms, 2000, EPS);
    CU_ASSERT_DOUBLE_EQUAL(m.rtf, 0.06, 1e-12);
    /* RWER per entry: "" 0/0, a 0/1, a b 0/2, a d 1/2, a d c 1/3, a b c 0/3 -> 2 / 11 */
    CU_ASSERT_DOUBLE_EQUAL(m.rwer_rate, 2.0 / 11.0, EPS);
    CU_ASSERT(!isnan(m.arwer_rate));

    /* hypothesis only (a trn file): WER and CER, streaming figures unavailable */
    sr_utt_input h = {.id = "u2", .ref = "a b", .hyp = "a c", .audio_ms = -1};
    CU_ASSERT_EQUAL_FATAL(sr_score_utt(&h, &m), SR_OK);
    assert_counts(&m.wer, 1, 1, 0, 0);
    CU_ASSERT(isnan(m.rwer_rate) && isnan(m.arwer_rate) && isnan(m.rtf) && isnan(m.finalization_ms));
    CU_ASSERT(isnan(m.audio_ms) && isnan(m.revisions_per_word) && m.first_hyp_ms == -1);

    /* one entry without compute time: no RTF for the utterance */
    sr_tl_entry e[2] = {{500, "a", -1, 1000000}, {900, "a b", -1, -1}};
    sr_utt_input u = {.id = "u3", .ref = "a b", .entries = e, .n_entries = 2, .audio_ms = -1};
    CU_ASSERT_EQUAL_FATAL(sr_score_utt(&u, &m), SR_OK);
    CU_ASSERT(isnan(m.rtf) && isnan(m.compute_ms) && isnan(m.finalization_ms));
    CU_ASSERT_DOUBLE_EQUAL(m.audio_ms, 900, EPS); /* the last entry's time */

    /* bad input names the utterance */
    sr_utt_input none = {.id = "spk-7", .ref = "a"};
    TEST_ASSERT_ERR(sr_score_utt(&none, &m), SR_ERR_ARG, "utterance spk-7: no hypothesis");
    sr_tl_entry badc[1] = {{500, "a", -1, -7}};
    sr_utt_input bc = {.id = "u9", .ref = "a", .entries = badc, .n_entries = 1};
    TEST_ASSERT_ERR(sr_score_utt(&bc, &m), SR_ERR_ARG, "compute_ns -7");
    TEST_ASSERT_ERR(sr_score_utt(NULL, &m), SR_ERR_ARG, "in");
}

/* Two utterances: u1 = tl_abc above; u2 = 3 chunks of 500 ms + a final entry with no new audio.
 *   u2 compute 50, 100, 25, 10 ms; audio 1600 ms; ref "x y", final "x z" (1 sub).
 * Corpus: chunk compute over 10 entries {5,20,40,10,30,15, 50,100,25,10}: sorted
 *   5 10 10 15 20 25 30 40 50 100 -> p50 rank 5 = 20, p90 rank 9 = 50, p99 = 100, max 100.
 * RTF = (120 + 185) / (2000 + 1600). Chunk RTFs: u1 5/300, 20/200, 40/500, 10/200, 30/400,
 * 15/400; u2 50/500, 100/500, 25/500 (the final entry adds no audio). */
static const sr_tl_entry tl_u2[] = {
    {500, "x", 0, 50000000}, {1000, "x", 1, 100000000}, {1500, "x z", 1, 25000000},
    {1500, "x z", 2, 10000000},
};

static void add_two(sr_corpus *a, sr_corpus *b)
{
    static const sr_word_times wt = {ends_abc, 3};
    sr_utt_input u1 = {.id = "u1", .ref = "a b c", .times = &wt, .entries = tl_abc, .n_entries = 6,
                       .audio_ms = 2000};
    sr_utt_input u2 = {.id = "u2", .ref = "x y", .entries = tl_u2, .n_entries = 4, .audio_ms = 1600};
    CU_ASSERT_EQUAL(sr_corpus_add(a, &u1, NULL), SR_OK);
    CU_ASSERT_EQUAL(sr_corpus_add(b, &u2, NULL), SR_OK);
}

static void check_corpus(const sr_corpus_metrics *c)
{
    CU_ASSERT_EQUAL(c->n_utts, 2);
    assert_counts(&c->wer, 4, 1, 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(c->wer_rate, 0.2, EPS);
    CU_ASSERT_EQUAL(c->n_utts_timeline, 2);
    CU_ASSERT_EQUAL(c->n_utts_stable, 2);
    CU_ASSERT_EQUAL(c->n_utts_aligned, 1);
    /* RWER: u1 2/11 (above); u2: x 0/1, x 0/1, "x z" vs "x y" 1/2, 1/2 -> 2/6 */
    CU_ASSERT_EQUAL(c->rwer.rwer.err, 4);
    CU_ASSERT_EQUAL(c->rwer.rwer.ref, 17);
    CU_ASSERT_DOUBLE_EQUAL(c->rwer_rate, 4.0 / 17.0, EPS);
    CU_ASSERT_EQUAL(c->chunk_compute_ms.n, 10);
    CU_ASSERT_DOUBLE_EQUAL(c->chunk_compute_ms.p50, 20, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(c->chunk_compute_ms.p90, 50, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(c->chunk_compute_ms.p99, 100, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(c->chunk_compute_ms.max, 100, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(c->chunk_compute_ms.mean, 30.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(c->rtf, 305.0 / 3600.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(c->rtfx, 3600.0 / 305.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(c->audio_s, 3.6, 1e-12);
    double chunk = (5.0 / 300 + 20.0 / 200 + 40.0 / 500 + 10.0 / 200 + 30.0 / 400 + 15.0 / 400 +
                    50.0 / 500 + 100.0 / 500 + 25.0 / 500) / 9.0;
    CU_ASSERT_DOUBLE_EQUAL(c->rtf_chunk_mean, chunk, 1e-12);
    CU_ASSERT_EQUAL(c->first_hyp_ms.n, 2);
    CU_ASSERT_DOUBLE_EQUAL(c->first_hyp_ms.mean, 500, EPS); /* 500 and 500 */
    CU_ASSERT_EQUAL(c->finalization_ms.n, 2);
    CU_ASSERT_DOUBLE_EQUAL(c->finalization_ms.max, 15, 1e-9);
    CU_ASSERT_EQUAL(c->emission_delay_ms.n, 3); /* u2 has no word times */
    CU_ASSERT_DOUBLE_EQUAL(c->emission_delay_ms.p50, 100, EPS);
    CU_ASSERT_DOUBLE_EQUAL(c->emission_delay_ms.max, 1100, EPS);
    /* retracted: u1 3, u2 0; final words 3 + 2 */
    CU_ASSERT_EQUAL(c->retracted_words, 3);
    CU_ASSERT_EQUAL(c->final_words, 5);
    CU_ASSERT_DOUBLE_EQUAL(c->revisions_per_word, 0.6, EPS);
    CU_ASSERT_EQUAL(c->memory.peak_rss_bytes, 900);
    CU_ASSERT_EQUAL(c->memory.weight_bytes, 70);
}

static void test_scorer_corpus(void)
{
    sr_corpus *sc = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_corpus_create(&sc), SR_OK);
    sr_corpus_metrics c;
    CU_ASSERT_EQUAL_FATAL(sr_corpus_result(sc, &c), SR_OK);
    CU_ASSERT(c.n_utts == 0 && isnan(c.wer_rate) && isnan(c.rwer_rate) && isnan(c.rtf));
    add_two(sc, sc);
    sr_memstats m1 = {.weight_bytes = 70, .stream_bytes = 10, .peak_rss_bytes = 900,
                      .gpu_live_bytes = 1000, .gpu_pool_bytes = 300},
                m2 = {.weight_bytes = 50, .stream_bytes = 20, .peak_rss_bytes = 300,
                      .gpu_live_bytes = 500, .gpu_pool_bytes = 400};
    sr_corpus_add_memory(sc, &m1);
    sr_corpus_add_memory(sc, &m2);
    CU_ASSERT_EQUAL_FATAL(sr_corpus_result(sc, &c), SR_OK);
    check_corpus(&c);
    CU_ASSERT_EQUAL(c.memory.stream_bytes, 20);
    /* each figure the most over the utterances, the device bytes too */
    CU_ASSERT(c.memory.gpu_live_bytes == 1000 && c.memory.gpu_pool_bytes == 400);
    /* a failing utterance leaves the corpus unchanged */
    sr_tl_entry bad[2] = {{500, "a", 0, 1}, {100, "a", 0, 1}};
    sr_utt_input ub = {.id = "u3", .ref = "a", .entries = bad, .n_entries = 2};
    sr_utt_metrics um;
    TEST_ASSERT_ERR(sr_corpus_add(sc, &ub, &um), SR_ERR_ARG, "utterance u3: timeline entry 1");
    CU_ASSERT_EQUAL_FATAL(sr_corpus_result(sc, &c), SR_OK);
    check_corpus(&c);
    sr_corpus_free(sc);
    sr_corpus_free(NULL);
}

/* Shards scored apart and merged give the same corpus figures as one scorer. */
static void test_scorer_merge(void)
{
    sr_corpus *a = NULL, *b = NULL, *all = NULL;
    CU_ASSERT_EQUAL_FATAL(sr_corpus_create(&a), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_corpus_create(&b), SR_OK);
    CU_ASSERT_EQUAL_FATAL(sr_corpus_create(&all), SR_OK);
    add_two(a, b);
    sr_memstats m1 = {.weight_bytes = 70, .stream_bytes = 10, .peak_rss_bytes = 900};
    sr_corpus_add_memory(b, &m1);
    CU_ASSERT_EQUAL(sr_corpus_merge(all, a), SR_OK);
    CU_ASSERT_EQUAL(sr_corpus_merge(all, b), SR_OK);
    sr_corpus_metrics c;
    CU_ASSERT_EQUAL_FATAL(sr_corpus_result(all, &c), SR_OK);
    check_corpus(&c);
    TEST_ASSERT_ERR(sr_corpus_merge(all, all), SR_ERR_ARG, "same scorer");
    TEST_ASSERT_ERR(sr_corpus_merge(all, NULL), SR_ERR_ARG, "src");
    sr_corpus_free(a);
    sr_corpus_free(b);
    sr_corpus_free(all);
}

void test_register_eval_metrics(void);
void test_register_eval_metrics(void)
{
    TEST_SUITE("eval_wer", {"words_split", test_words_split}, {"complete_prefix", test_complete_prefix},
               {"align_hand", test_align_hand}, {"wer_empty", test_wer_empty}, {"cer", test_cer},
               {"align_bad_args", test_align_bad_args}, {"sclite_stored", test_sclite_stored},
               {"sclite_live", test_sclite_live}, {"sclite_random", test_sclite_random},
               {"align_region_random", test_align_region_random},
               {"align_region_long", test_align_region_long}, {"align_region_sclite", test_align_region_sclite});
    TEST_SUITE("eval_rwer", {"hand_worked", test_rwer_hand}, {"availability", test_rwer_availability},
               {"bad_input", test_rwer_bad_input});
    TEST_SUITE("eval_latency", {"percentiles", test_percentiles}, {"emission_delay", test_emission_delay},
               {"retracted", test_retracted}, {"score_utt", test_score_utt},
               {"scorer_corpus", test_scorer_corpus}, {"scorer_merge", test_scorer_merge});
}
