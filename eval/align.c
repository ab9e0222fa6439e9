/*
 * align.c — word splitting, sclite-compatible alignment, WER and CER counts.
 *
 * The alignment is NIST sclite's DP over a linear reference a[0..n) and hypothesis b[0..m):
 * F(i, j) is the least cost of aligning a[0..i) with b[0..j), with costs correct 0, substitution
 * 4, deletion 3, insertion 3. A cell's candidates are diag = F(i-1, j-1) + (a[i-1] == b[j-1] ? 0
 * : 4), del = F(i-1, j) + 3, ins = F(i, j-1) + 3, and it chooses diag when diag <= del and diag <=
 * ins, else del when del < ins, else ins (sclite's order, which decides between equal-cost
 * alignments and hence the split of errors into S/D/I). That rule is the least (value, rank)
 * with ranks diag 0, ins 1, del 2. The path T is the chain of choices from (n, m) back to (0, 0).
 * Units are spans of bytes (words for WER, UTF-8 code points for CER), numbered first (equal
 * units, equal ids) so that the DP compares integers.
 *
 * Small problems ((n+1)(m+1) <= 4 M cells) keep one choice byte per cell. Larger ones get the very
 * same path in memory linear in n + m, and in time proportional to the cells of a region R around
 * the path, which is narrow when the texts are similar:
 *
 *  1. U = the cost of one real path: the DP restricted to a 513-column band that follows the
 *     cheapest cell of each row (guide_cost). So U >= OPT = F(n, m).
 *  2. R is found row by row (run_pass, discover): a cell enters R when V + 3 |(m - n) - (j - i)|
 *     <= U, V being its cost computed from R's cells of the previous row and from the cells to its
 *     left in its own row; 3 |(m - n) - (j - i)| is a lower bound on the cost from (i, j) to
 *     (n, m), since every deletion or insertion moves the diagonal j - i by one.
 *  3. The path is traced inside R: from one choice byte per cell where a block of R is small,
 *     otherwise by splitting. One pass carries, per cell, the column where its chain of choices
 *     enters the latest split row above it (a label, like Hirschberg's but following the chosen
 *     predecessors rather than a cost sum, so the tie order is kept); that yields the path's cell
 *     on each split row, and the pieces between consecutive such cells are solved the same way
 *     (solve). Memory: two cost and two label rows, R's bounds per row, the labels of the split
 *     rows (at most max(8 M, 8 (n + m)) 4-byte entries) and one block of choice bytes (at most
 *     4 M, or two rows).
 *
 * Why the path is exactly the full matrix's. Lemma: let some cells C get values V, each V(c) the
 * cost of the choice rule applied to a non-empty subset of its predecessors in C (cells outside the
 * subset count as +infinity), starting from a corner s on T with V(s) = 0. If T's piece from s to
 * some cell e lies in C and every cell of that piece has its T-predecessor in its subset, then
 * every such cell chooses its T-predecessor. Proof: V(c) + F(s) is the cost of a real path to c, so
 * V(c) + F(s) >= F(c) everywhere. Along T, by induction from s, V(t) + F(s) <= V(p) + F(s) + step
 * = F(p) + step = F(t) (T's steps are optimal), so V(t) + F(s) = F(t). At t the T-predecessor's
 * candidate equals its true value (shifted by F(s)) and every other candidate is no smaller than its
 * true value or absent; the true choice is the least (value, rank), and raising the values of the
 * losers cannot change the least. So t makes T's choice. Every pass here is such a DP, with s a
 * cell known to be on T: hence the labels follow T (the split cells found are T's) and the traced
 * pieces are T's pieces. What remains is that T's pieces lie in the cells each pass computes:
 *  - discover (corner (0, 0)): by induction along T, T's cell t has V(t) = F(t) and F(t) + 3 |(m -
 *    n) - (j - i)| <= F(t) + (true cost from t to the end) = OPT <= U, so t enters R. T's first
 *    cell on row i lies at the column of its cell on row i-1 or one right of it, which the row's
 *    span covers (it starts at R's first column of row i-1 and reaches one past its last), and
 *    T's further cells on row i are insertions, each of which enters R, so the span extends over
 *    them (it stops only at the first insertion past that point that fails the test).
 *  - later passes compute exactly R's cells inside the box between two cells of T; T's piece
 *    between them lies in R and in the box.
 * No band certificate is needed: U >= OPT holds by construction, so the result is exact for any
 * input; a poor U or dissimilar texts only make R wider (up to the whole matrix: quadratic time,
 * still linear memory).
 */
#include "metrics.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
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

/* Problems of at most full_limit (n + 1)(m + 1) cells keep the whole back-pointer matrix (one
 * byte per cell); larger ones use the region method, whose blocks keep back pointers up to the
 * same number of cells (test hook: sr_align_set_full_limit). */
#define FULL_LIMIT_DEFAULT ((size_t)4 << 20)
static size_t full_limit = FULL_LIMIT_DEFAULT;

void sr_align_set_full_limit(size_t cells) { full_limit = cells ? cells : FULL_LIMIT_DEFAULT; }

/* Half-width of the guide band that gives the first upper bound U (units on each side). */
enum { GUIDE_HALF_WIDTH = 256 };

/* Costs fit int32: any path costs at most 4 (n + m) (checked by align_spans), far below INF, and
 * INF + COST_SUB does not overflow. */
#define COST_INF (INT32_MAX / 2)

enum { MODE_COST, MODE_LABEL, MODE_BACK };

typedef struct aln {
    const uint32_t *a, *b;  /* unit ids: reference [n], hypothesis [m] */
    size_t n, m;
    size_t base;            /* most cells of a block traced from back pointers */
    size_t lab_budget;      /* most label entries one pass keeps */
    uint32_t *lo, *hi;      /* the region R: columns lo[i] .. hi[i] of row i, lo non-decreasing */
    int32_t *va, *vb;       /* two cost rows [m + 3]; column j at index j + 1 */
    uint32_t *la, *lb;      /* two label rows [m + 3], same layout */
    sr_align_step *steps;   /* the path, last step first (NULL: counts only) */
    size_t ns;
    sr_edit_counts *counts;
} aln;

/* Row i of the DP over columns L..H from row i - 1, whose costs P cover pL..pH with P[pL - 1] and
 * P[pH + 1] set to COST_INF by the caller (pL <= L <= pH + 1, L <= H): the candidates are diag =
 * P[j - 1] + (equal ? 0 : 4), del = P[j] + 3, ins = C[j - 1] + 3 (none left of L), and the cell
 * takes sclite's choice (file comment). MODE_LABEL also copies the label of the chosen predecessor
 * (PL: the previous row's labels), MODE_BACK writes the choice of column j to back[j - L]. Always
 * inlined with a constant mode, so the cost-only loop carries no choice. */
static inline void dp_row(int mode, const int32_t *P, int32_t *C, size_t L, size_t H, size_t pH,
                          uint32_t ai, const uint32_t *b, const uint32_t *PL, uint32_t *CL,
                          unsigned char *back)
{
    size_t j = L, e = SR_MIN(H, pH + 1);
    int32_t left = COST_INF;
    uint32_t llab = 0;
    if (j == 0) { /* column 0: deletions only (then pL = 0) */
        left = C[0] = P[0] + COST_DEL;
        if (mode == MODE_LABEL) llab = CL[0] = PL[0];
        if (mode == MODE_BACK) back[0] = BACK_DEL;
        j = 1;
    }
    for (; j <= e; j++) {
        /* v = min(diag, del, ins); then sclite's choice is diag when diag == v, else ins when
         * ins == v (ins <= del: a deletion wins only when strictly cheaper), else del. Only
         * v depends on the previous column, so the loop carries one add and one min. */
        int32_t diag = P[j - 1] + (ai == b[j - 1] ? 0 : COST_SUB);
        int32_t del = P[j] + COST_DEL, ins = left + COST_INS;
        int32_t t = diag < del ? diag : del;
        int32_t v = t < ins ? t : ins;
        C[j] = v;
        if (mode == MODE_LABEL) {
            uint32_t up = PL[j], dl = PL[j - 1];
            uint32_t l = ins == v ? llab : up;
            llab = CL[j] = diag == v ? dl : l;
        } else if (mode == MODE_BACK) {
            back[j - L] = (unsigned char)(diag == v ? BACK_DIAG : ins == v ? BACK_INS : BACK_DEL);
        }
        left = v;
    }
    for (; j <= H; j++) { /* past pH + 1 only the insertion is left */
        left = C[j] = left + COST_INS;
        if (mode == MODE_LABEL) CL[j] = llab;
        if (mode == MODE_BACK) back[j - L] = BACK_INS;
    }
}

static void dp_row_mode(int mode, const int32_t *P, int32_t *C, size_t L, size_t H, size_t pH,
                        uint32_t ai, const uint32_t *b, const uint32_t *PL, uint32_t *CL,
                        unsigned char *back)
{
    switch (mode) { /* one specialised copy of the loop per mode */
    case MODE_COST: dp_row(MODE_COST, P, C, L, H, pH, ai, b, PL, CL, back); break;
    case MODE_LABEL: dp_row(MODE_LABEL, P, C, L, H, pH, ai, b, PL, CL, back); break;
    default: dp_row(MODE_BACK, P, C, L, H, pH, ai, b, PL, CL, back); break;
    }
}

/* The cost of one real path (an upper bound U on the optimum): the DP restricted to a band of
 * 2 w + 1 columns that follows, row by row, the cheapest cell of the previous row (so it tracks
 * the drift of the alignment away from the diagonal), widened on the last row to reach (n, m). */
static int64_t guide_cost(aln *x, size_t w)
{
    size_t n = x->n, m = x->m;
    if (n == 0) return (int64_t)COST_INS * (int64_t)m;
    int32_t *P = x->va + 1, *C = x->vb + 1;
    size_t pL = 0, pH = SR_MIN(m, w), best = 0;
    for (size_t j = 0; j <= pH; j++) C[j] = (int32_t)(COST_INS * j);
    for (size_t i = 1; i <= n; i++) {
        int32_t *t = P;
        P = C;
        C = t;
        size_t c = best + 1; /* the diagonal successor of the previous row's cheapest cell */
        size_t L = SR_MIN(SR_MAX(pL, c > w ? c - w : 0), SR_MIN(pH + 1, m));
        size_t H = i == n ? m : SR_MIN(m, SR_MAX(L, c + w));
        P[(ptrdiff_t)pL - 1] = COST_INF;
        P[pH + 1] = COST_INF;
        dp_row(MODE_COST, P, C, L, H, pH, x->a[i - 1], x->b, NULL, NULL, NULL);
        best = L;
        for (size_t j = L + 1; j <= H; j++)
            if (C[j] < C[best]) best = j;
        pL = L;
        pH = H;
    }
    return C[m];
}

static int64_t floor_div6(int64_t v) { return v >= 0 ? v / 6 : -((-v + 5) / 6); }

/* Settings of one forward pass (run_pass). */
typedef struct pass {
    int discover;          /* top level: find R by pruning with U and write lo/hi */
    int64_t U;
    unsigned char *back;   /* non-NULL: keep every cell's choice, rows one after the other */
    const size_t *sp;      /* else: k split rows, increasing, strictly between r0 and r1 */
    size_t k;
    uint32_t *store;       /* the labels of split rows sp[1..k-1] (store_cap entries) */
    size_t store_cap;
    size_t *soff;          /* [k]: offset in store and first column of each saved split row */
    uint32_t *sL;
    uint32_t *cols;        /* out [k]: the column where the path enters each split row */
} pass;

static sr_status lost(size_t row)
{
    /* unreachable when the file comment's argument holds; reported rather than read out of bounds */
    return sr_error(SR_ERR_UNSUPPORTED, "sr_align: internal error: the path left the region at row %zu", row);
}

/* One forward pass over rows r0..r1 from the corner (r0, c0), cost 0, over R clipped to columns
 * c0..c1 (discover: over the cells found by pruning, see the file comment). Labels: from the first
 * split row on, every cell carries the column where the chain of its choices enters the latest
 * split row above it; at each split row that column is saved per cell before the labels restart,
 * so that after the last row the end cell's label and the saved rows give the path's column at
 * every split row (cols). */
static sr_status run_pass(aln *x, size_t r0, size_t c0, size_t r1, size_t c1, pass *p)
{
    int32_t *P = x->va + 1, *C = x->vb + 1;
    uint32_t *PL = x->la + 1, *CL = x->lb + 1;
    const size_t m = x->m;
    const int64_t delta = (int64_t)m - (int64_t)x->n;
    size_t L = c0, H, s = 0, boff = 0, soff = 0;
    if (p->discover) {
        /* row 0: the insertions from (0, 0) while they pass the test */
        H = 0;
        while (H < m && (int64_t)COST_INS * (int64_t)(H + 1) + (int64_t)COST_INS * llabs(delta - (int64_t)(H + 1)) <= p->U)
            H++;
        x->lo[r0] = 0;
        x->hi[r0] = (uint32_t)H;
    } else {
        H = SR_MIN((size_t)x->hi[r0], c1);
    }
    for (size_t j = c0; j <= H; j++) {
        C[j] = (int32_t)(COST_INS * (j - c0));
        CL[j] = (uint32_t)j;
        if (p->back) p->back[j - c0] = j == c0 ? BACK_DIAG : BACK_INS;
    }
    boff = H - L + 1;
    for (size_t i = r0 + 1; i <= r1; i++) {
        int32_t *t = P;
        P = C;
        C = t;
        uint32_t *tl = PL;
        PL = CL;
        CL = tl;
        size_t pL = L, pH = H;
        P[(ptrdiff_t)pL - 1] = COST_INF;
        P[pH + 1] = COST_INF;
        int mode = p->back ? MODE_BACK : (p->k && i > p->sp[0]) ? MODE_LABEL : MODE_COST;
        if (p->discover) {
            /* the span: pL .. pH + 1 from the previous row, then insertions while they pass */
            size_t e = SR_MIN(m, pH + 1);
            dp_row_mode(mode, P, C, pL, e, pH, x->a[i - 1], x->b, PL, CL, NULL);
            const int64_t tgt = delta + (int64_t)i; /* the column of diagonal delta on row i */
            while (e < m && (int64_t)C[e] + COST_INS + (int64_t)COST_INS * llabs(tgt - (int64_t)(e + 1)) <= p->U) {
                C[e + 1] = C[e] + COST_INS;
                CL[e + 1] = CL[e];
                e++;
            }
            /* R's row: from the first to the last cell with cost + 3 |delta - (j - i)| <= U */
            L = pL;
            while (L <= e && (int64_t)C[L] + (int64_t)COST_INS * llabs(tgt - (int64_t)L) > p->U) L++;
            if (L > e) return lost(i);
            H = e;
            while ((int64_t)C[H] + (int64_t)COST_INS * llabs(tgt - (int64_t)H) > p->U) H--;
            x->lo[i] = (uint32_t)L;
            x->hi[i] = (uint32_t)H;
        } else {
            L = SR_MAX((size_t)x->lo[i], c0);
            H = SR_MIN((size_t)x->hi[i], c1);
            if (L > H || L > pH + 1) return lost(i);
            dp_row_mode(mode, P, C, L, H, pH, x->a[i - 1], x->b, PL, CL, p->back ? p->back + boff : NULL);
            boff += H - L + 1;
        }
        if (s < p->k && i == p->sp[s]) {
            if (s > 0) { /* keep where each cell's chain entered the previous split row */
                if (soff + (H - L + 1) > p->store_cap) return lost(i);
                memcpy(p->store + soff, CL + L, (H - L + 1) * sizeof *CL);
                p->soff[s] = soff;
                p->sL[s] = (uint32_t)L;
                soff += H - L + 1;
            }
            for (size_t j = L; j <= H; j++) CL[j] = (uint32_t)j;
            s++;
        }
    }
    if (c1 < L || c1 > H) return lost(r1);
    if (p->k) {
        p->cols[p->k - 1] = CL[c1];
        for (size_t q = p->k - 1; q > 0; q--) {
            size_t c = p->cols[q];
            if (c < p->sL[q] || c - p->sL[q] >= p->store_cap - p->soff[q]) return lost(p->sp[q]);
            p->cols[q - 1] = p->store[p->soff[q] + c - p->sL[q]];
        }
    }
    return SR_OK;
}

static void push_step(aln *x, int op, size_t i, size_t j)
{
    sr_align_step st;
    if (op == BACK_DIAG) {
        int eq = x->a[i - 1] == x->b[j - 1];
        st = (sr_align_step){eq ? SR_EDIT_COR : SR_EDIT_SUB, (int64_t)i - 1, (int64_t)j - 1};
        if (eq) x->counts->cor++; else x->counts->sub++;
    } else if (op == BACK_DEL) {
        st = (sr_align_step){SR_EDIT_DEL, (int64_t)i - 1, -1};
        x->counts->del++;
    } else {
        st = (sr_align_step){SR_EDIT_INS, -1, (int64_t)j - 1};
        x->counts->ins++;
    }
    if (x->steps) x->steps[x->ns] = st;
    x->ns++;
}

static sr_status solve(aln *x, size_t r0, size_t c0, size_t r1, size_t c1);

/* One pass p over the box (r0, c0)..(r1, c1) with k split rows evenly spaced strictly inside
 * (labels kept for k - 1 rows of at most w columns), then the pieces of the path between its
 * cells on them, the last piece first (the steps are collected backwards). */
static sr_status split_solve(aln *x, size_t r0, size_t c0, size_t r1, size_t c1, pass p, size_t k,
                             size_t w)
{
    size_t *sp = NULL;
    sr_status st = SR_OK;
    if (k) {
        sp = sr_malloc(k * (2 * sizeof(size_t) + 2 * sizeof(uint32_t)), "alignment split rows");
        if (!sp) return SR_ERR_NOMEM;
        p.sp = sp;
        p.k = k;
        p.soff = sp + k;
        p.sL = (uint32_t *)(sp + 2 * k);
        p.cols = p.sL + k;
        for (size_t q = 0; q < k; q++) sp[q] = r0 + (q + 1) * (r1 - r0) / (k + 1);
        p.store_cap = (k - 1) * w;
        if (p.store_cap && !(p.store = sr_malloc(p.store_cap * sizeof *p.store, "alignment labels")))
            st = SR_ERR_NOMEM;
    }
    if (!st) st = run_pass(x, r0, c0, r1, c1, &p);
    free(p.store);
    for (size_t q = k + 1; !st && q-- > 0;) {
        size_t a0 = q ? sp[q - 1] : r0, b0 = q ? p.cols[q - 1] : c0;
        size_t a1 = q < k ? sp[q] : r1, b1 = q < k ? p.cols[q] : c1;
        st = b0 <= b1 ? solve(x, a0, b0, a1, b1) : lost(a0);
    }
    free(sp);
    return st;
}

/* The path between two of its cells, (r0, c0) and (r1, c1), appended last step first: traced from
 * back pointers when the box's part of R is small (or only two rows), else split at rows found by
 * one labelled pass and solved piece by piece, the last piece first. */
static sr_status solve(aln *x, size_t r0, size_t c0, size_t r1, size_t c1)
{
    if (r0 == r1) {
        for (size_t j = c1; j > c0; j--) push_step(x, BACK_INS, r0, j);
        return SR_OK;
    }
    size_t pL = c0, pH = SR_MIN((size_t)x->hi[r0], c1);
    if (c0 < x->lo[r0] || c0 > pH) return lost(r0);
    size_t cells = pH - pL + 1, wmax = cells;
    for (size_t i = r0 + 1; i <= r1; i++) {
        size_t L = SR_MAX((size_t)x->lo[i], c0), H = SR_MIN((size_t)x->hi[i], c1);
        if (L > H || L > pH + 1) return lost(i);
        cells += H - L + 1;
        wmax = SR_MAX(wmax, H - L + 1);
        pL = L;
        pH = H;
    }
    if (c1 < pL || c1 > pH) return lost(r1);
    pass p = {0};
    sr_status st;
    if (cells <= x->base || r1 - r0 == 1) {
        p.back = sr_malloc(cells, "alignment back-pointers");
        if (!p.back) return SR_ERR_NOMEM;
        if ((st = run_pass(x, r0, c0, r1, c1, &p))) {
            free(p.back);
            return st;
        }
        /* trace back; off: where row i's choices start, L: its first column */
        size_t i = r1, j = c1, L = pL, off = cells - (pH - pL + 1);
        while (i > r0 || j > c0) {
            unsigned char b = i == r0 ? BACK_INS : p.back[off + j - L];
            if ((b != BACK_DEL && j == 0) || (b == BACK_INS && j == L && i > r0)) {
                free(p.back);
                return lost(i);
            }
            push_step(x, b, i, j);
            if (b != BACK_INS) {
                i--;
                size_t nL = i == r0 ? c0 : SR_MAX((size_t)x->lo[i], c0);
                size_t nH = SR_MIN((size_t)x->hi[i], c1);
                if (b == BACK_DIAG) j--;
                if (j < nL || j > nH) {
                    free(p.back);
                    return lost(i);
                }
                off -= nH - nL + 1;
                L = nL;
            } else {
                j--;
            }
        }
        free(p.back);
        return SR_OK;
    }
    /* as many split rows as the label budget allows */
    size_t k = SR_MIN(r1 - r0 - 1, SR_MAX((size_t)1, x->lab_budget / wmax));
    return split_solve(x, r0, c0, r1, c1, (pass){0}, k, wmax);
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

/* The DP of the file comment over two span sequences. */
static sr_status align_spans(const span *ref, size_t n, const span *hyp, size_t m,
                             sr_edit_counts *counts, sr_align_step **path, size_t *n_path)
{
    if (path) *path = NULL;
    if (n_path) *n_path = 0;
    memset(counts, 0, sizeof *counts);
    /* costs <= 4 (n + m) must stay far below COST_INF; indices fit uint32 */
    if (n > (size_t)INT32_MAX / 16 || m > (size_t)INT32_MAX / 16 || n + m > (size_t)INT32_MAX / 16)
        return sr_error(SR_ERR_ARG, "sr_align: %zu x %zu units is too large to align", n, m);
    aln x = {0};
    x.n = n;
    x.m = m;
    x.base = full_limit;
    x.lab_budget = SR_MAX(2 * full_limit, 8 * (n + m) + 8);
    x.counts = counts;
    uint32_t *ids = sr_malloc((n + m + 1) * sizeof *ids, "alignment unit ids");
    x.lo = ids ? sr_malloc(2 * (n + 1) * sizeof *x.lo, "alignment region") : NULL;
    x.va = x.lo ? sr_malloc(2 * (m + 3) * sizeof *x.va, "alignment cost rows") : NULL;
    x.la = x.va ? sr_malloc(2 * (m + 3) * sizeof *x.la, "alignment label rows") : NULL;
    if (x.la && path) x.steps = sr_malloc((n + m + 1) * sizeof *x.steps, "alignment path");
    sr_status st = x.la && (x.steps || !path) ? intern(ref, n, hyp, m, ids) : SR_ERR_NOMEM;
    if (st) goto out;
    x.a = ids;
    x.b = ids + n;
    x.hi = x.lo + (n + 1);
    x.vb = x.va + (m + 3);
    x.lb = x.la + (m + 3);
    if ((m + 1) <= full_limit / (n + 1)) {
        /* small: R is the whole matrix, traced from back pointers in one block */
        for (size_t i = 0; i <= n; i++) {
            x.lo[i] = 0;
            x.hi[i] = (uint32_t)m;
        }
        st = solve(&x, 0, 0, n, m);
    } else {
        pass p = {0};
        p.discover = 1;
        p.U = guide_cost(&x, GUIDE_HALF_WIDTH);
        /* every cell of R lies on a diagonal k = j - i with 3|k| + 3|delta - k| <= U (its cost
         * is at least 3|k|): the bound on R's width that sizes the label rows */
        int64_t delta = (int64_t)m - (int64_t)n;
        int64_t kmax = floor_div6(p.U + 3 * delta), kmin = -floor_div6(p.U - 3 * delta);
        size_t wb = (size_t)SR_MIN((int64_t)m + 1, kmax - kmin + 1), k = 0;
        if (n >= 2 && wb > x.base / (n + 1)) k = SR_MIN(n - 1, SR_MAX((size_t)1, x.lab_budget / wb));
        st = split_solve(&x, 0, 0, n, m, p, k, wb);
    }
    if (st) goto out;
    counts->n_ref = (int64_t)n;
    counts->n_hyp = (int64_t)m;
    if (path && x.ns) {
        for (size_t a = 0, z = x.ns - 1; a < z; a++, z--) { /* into order */
            sr_align_step t = x.steps[a];
            x.steps[a] = x.steps[z];
            x.steps[z] = t;
        }
        *path = x.steps;
        x.steps = NULL;
        if (n_path) *n_path = x.ns;
    }
out:
    if (st) memset(counts, 0, sizeof *counts);
    free(x.steps);
    free(ids);
    free(x.lo);
    free(x.va);
    free(x.la);
    return st;
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
