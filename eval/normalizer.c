/*
 * normalizer.c — the whisper_en, basic and none text normalizers (see normalizer.h).
 *
 * The text is decoded once from UTF-8 into code points and then goes through a fixed sequence of
 * passes, each reading one code-point buffer and writing the other. Every pass reproduces one
 * rewriting step of openai-whisper's normalizers with the same matching rules as Python's `re`
 * on str: scanning left to right, non-overlapping, a match resuming after the previous one, with
 * Unicode classes — \w is a letter (L*), a number (N*) or '_'; \d is a decimal digit (Nd); \s is
 * Python's str.isspace set; \b is a change between \w and not-\w (string ends count as not-\w).
 *
 * whisper_en, in order:
 *   1. full Unicode lower-casing (SpecialCasing and Final_Sigma, like str.lower);
 *   2. delete "<...>" / "[...]" spans (opener '<' or '[', up to the first '>' or ']'), then
 *      "(...)" spans with at least one character inside;
 *   3. delete the filler words hmm, mm, mhm, mmm, uh, um when they are whole \w runs;
 *   4. join whitespace runs that precede an apostrophe to it;
 *   5. expand contractions and titles (won't -> will not, mr -> "mister ", 's been -> has been,
 *      n't -> not, ...), one pass per rule in a fixed order, each rule a literal with optional \b
 *      at either end;
 *   6. drop a comma between two digits; replace a period not followed by an ASCII digit (the
 *      period and the character after it become " " plus that character);
 *   7. NFKD, then per character: keep . % $ ¢ € £; map the few letters that NFKD does not
 *      decompose (æ -> ae, ø -> o, ß -> ss, ł -> l, ...); delete non-spacing marks (Mn); other
 *      marks, symbols and punctuation become a space;
 *   8. numbers (number_normalize below): "and a half" -> "point five" after a number word, spaces
 *      at letter/digit boundaries, digit + "st/nd/rd/th/s" joined; then a left-to-right state
 *      machine over the words that accumulates spelled-out and written numbers into one value
 *      (an integer in arbitrary precision, or a digit string when the words read as digits,
 *      "one oh one" -> 101), attaches currency and sign prefixes and % suffixes, and writes
 *      ordinals/plurals with their suffix; finally "$2 and ¢7" -> "$2.07", "$0.07" -> "¢7" and a
 *      standalone "1"/"1s" back to "one"/"ones";
 *   9. British -> American spellings word by word from the map file;
 *  10. a currency symbol or period not followed by an ASCII digit becomes a space (the character
 *      after it stays); a '%' not preceded by an ASCII digit becomes a space;
 *  11. every whitespace run becomes one space (no trimming: a leading or trailing space can stay,
 *      as in the original).
 * basic: 1, 2, NFKC, marks/symbols/punctuation -> space, lower-case again, 11.
 * none: the input unchanged (after UTF-8 validation).
 *
 * Unicode data comes from libunistring (Unicode 14.0). Nothing here keeps state between calls:
 * all buffers are per call, the spelling map is read-only after create.
 */
#include "normalizer.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

#include "../core/internal.h"

#define TRY(x)                                \
    do {                                      \
        sr_status st_ = (x);                  \
        if (st_ != SR_OK) return st_;         \
    } while (0)

/* ---- code-point buffers ---------------------------------------------------------------------- */

typedef struct {
    uint32_t *p;
    size_t n, cap;
} ubuf;

static sr_status ub_reserve(ubuf *b, size_t extra)
{
    if (extra <= b->cap - b->n) return SR_OK;
    if (extra > SIZE_MAX / sizeof(uint32_t) / 4 - b->n)
        return sr_error(SR_ERR_NOMEM, "normalizer: text too long");
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n < extra) cap *= 2;
    uint32_t *p = realloc(b->p, cap * sizeof *p);
    if (!p) return sr_error(SR_ERR_NOMEM, "normalizer: out of memory (%zu characters)", cap);
    b->p = p;
    b->cap = cap;
    return SR_OK;
}

static sr_status ub_put(ubuf *b, uint32_t c)
{
    if (b->n == b->cap) TRY(ub_reserve(b, 1));
    b->p[b->n++] = c;
    return SR_OK;
}

static sr_status ub_add(ubuf *b, const uint32_t *s, size_t n)
{
    if (!n) return SR_OK;
    TRY(ub_reserve(b, n));
    memcpy(b->p + b->n, s, n * sizeof *s);
    b->n += n;
    return SR_OK;
}

/* Append an ASCII string. */
static sr_status ub_ascii(ubuf *b, const char *s)
{
    size_t n = strlen(s);
    TRY(ub_reserve(b, n));
    for (size_t i = 0; i < n; i++) b->p[b->n++] = (unsigned char)s[i];
    return SR_OK;
}

static sr_status ub_uint(ubuf *b, unsigned v)
{
    char tmp[16];
    snprintf(tmp, sizeof tmp, "%u", v);
    return ub_ascii(b, tmp);
}

static void ub_free(ubuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---- character classes (Python's re on str) -------------------------------------------------- */

/* str.isspace(): bidi classes WS, B, S and category Zs. */
static int is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* \w: str.isalnum() or '_' — exactly the categories L* and N* plus '_' (checked over all code
 * points against Python 3.11). */
static int is_word(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    return uc_is_general_category(c, UC_CATEGORY_L) || uc_is_general_category(c, UC_CATEGORY_N);
}

/* \d: a decimal digit, category Nd. */
static int is_decimal(uint32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    return uc_is_general_category(c, UC_CATEGORY_Nd);
}

static int digit_value(uint32_t c)
{
    if (c >= '0' && c <= '9') return (int)(c - '0');
    return uc_decimal_value(c);
}

static int is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }
static int is_ascii_lower(uint32_t c) { return c >= 'a' && c <= 'z'; }

/* \b at position i of s[0..n). */
static int at_boundary(const uint32_t *s, size_t n, size_t i)
{
    int before = i > 0 && is_word(s[i - 1]);
    int after = i < n && is_word(s[i]);
    return before != after;
}

/* s[i..] starts with the ASCII literal lit. */
static int match_ascii(const uint32_t *s, size_t n, size_t i, const char *lit)
{
    for (size_t k = 0; lit[k]; k++)
        if (i + k >= n || s[i + k] != (unsigned char)lit[k]) return 0;
    return 1;
}

/* The whole slice equals the ASCII string lit. */
static int eq_ascii(const uint32_t *s, size_t n, const char *lit)
{
    return strlen(lit) == n && match_ascii(s, n, 0, lit);
}

/* ---- libunistring wrappers ------------------------------------------------------------------- */

/* Lower-case of the capital sigma at s[i], as str.lower() decides it: final sigma when a cased
 * letter precedes it (skipping case-ignorable characters) and none follows it (same skipping).
 * libunistring's own context test differs (it takes "Σ'" followed by a letter as final). */
static uint32_t lower_sigma(const uint32_t *s, size_t n, size_t i)
{
    size_t j = i;
    while (j > 0 && uc_is_property_case_ignorable(s[j - 1])) j--;
    if (j == 0 || !uc_is_property_cased(s[j - 1])) return 0x03C3;
    j = i + 1;
    while (j < n && uc_is_property_case_ignorable(s[j])) j++;
    return j == n || !uc_is_property_cased(s[j]) ? 0x03C2 : 0x03C3;
}

/* out = lower(in) (full case mapping; Final_Sigma as Python decides it). */
static sr_status pass_lower(const ubuf *in, ubuf *out)
{
    if (!in->n) return SR_OK;
    /* settle capital sigmas first, on the original text; the rest has no context rules */
    for (size_t i = 0; i < in->n; i++)
        TRY(ub_put(out, in->p[i] == 0x03A3 ? lower_sigma(in->p, in->n, i) : in->p[i]));
    size_t len = 0;
    uint32_t *r = u32_tolower(out->p, out->n, NULL, NULL, NULL, &len);
    out->n = 0;
    if (!r) return sr_error(SR_ERR_NOMEM, "normalizer: out of memory lower-casing");
    sr_status st = ub_add(out, r, len);
    free(r);
    return st;
}

static sr_status normalize_form(uninorm_t form, const ubuf *in, ubuf *out)
{
    if (!in->n) return SR_OK;
    size_t len = 0;
    uint32_t *r = u32_normalize(form, in->p, in->n, NULL, &len);
    if (!r) return sr_error(SR_ERR_NOMEM, "normalizer: out of memory in Unicode normalization");
    sr_status st = ub_add(out, r, len);
    free(r);
    return st;
}

/* ---- passes shared by whisper_en and basic --------------------------------------------------- */

/* Delete "<...>"/"[...]": an opener '<' or '[' up to the first '>' or ']' after it. */
static sr_status pass_brackets(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (s[i] == '<' || s[i] == '[') {
            size_t j = i + 1;
            while (j < n && s[j] != '>' && s[j] != ']') j++;
            if (j == n) return ub_add(out, s + i, n - i); /* no closer anywhere further on */
            i = j + 1;
            continue;
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* Delete "(...)" with at least one character inside, up to the first ')'. */
static sr_status pass_parens(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (s[i] == '(') {
            size_t j = i + 1;
            while (j < n && s[j] != ')') j++;
            if (j == n) return ub_add(out, s + i, n - i);
            if (j > i + 1) {
                i = j + 1;
                continue;
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* Every whitespace run -> one space. */
static sr_status pass_collapse(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (is_space(s[i])) {
            while (i < n && is_space(s[i])) i++;
            TRY(ub_put(out, ' '));
        } else {
            TRY(ub_put(out, s[i++]));
        }
    }
    return SR_OK;
}

/* basic: NFKC, then every mark, symbol or punctuation character -> space. */
static sr_status pass_remove_symbols(const ubuf *in, ubuf *out)
{
    ubuf tmp = {0};
    sr_status st = normalize_form(UNINORM_NFKC, in, &tmp);
    for (size_t i = 0; !st && i < tmp.n; i++) {
        uint32_t c = tmp.p[i];
        int sym = uc_is_general_category(c, UC_CATEGORY_M) ||
                  uc_is_general_category(c, UC_CATEGORY_S) ||
                  uc_is_general_category(c, UC_CATEGORY_P);
        st = ub_put(out, sym ? ' ' : c);
    }
    ub_free(&tmp);
    return st;
}

/* ---- whisper_en passes ----------------------------------------------------------------------- */

/* Filler words, deleted when they form a whole \w run. */
static const char *const FILLERS[] = {"hmm", "mm", "mhm", "mmm", "uh", "um"};

static sr_status pass_fillers(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (is_word(s[i]) && (i == 0 || !is_word(s[i - 1]))) {
            size_t len = 0;
            for (size_t k = 0; k < SR_ARRAY_LEN(FILLERS) && !len; k++) {
                size_t l = strlen(FILLERS[k]);
                if (match_ascii(s, n, i, FILLERS[k]) && !(i + l < n && is_word(s[i + l]))) len = l;
            }
            if (len) {
                i += len;
                continue;
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* "\s+'" -> "'": a whitespace run directly before an apostrophe is deleted. */
static sr_status pass_space_apostrophe(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (is_space(s[i])) {
            size_t j = i;
            while (j < n && is_space(s[j])) j++;
            if (j < n && s[j] == '\'') {
                TRY(ub_put(out, '\''));
                i = j + 1;
            } else {
                TRY(ub_add(out, s + i, j - i));
                i = j;
            }
            continue;
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* One rewriting rule: a literal with optional \b before (lead) and after (trail). */
typedef struct {
    const char *pat;
    const char *rep;
    unsigned char lead, trail;
} literal_rule;

/* The contraction and title rules, applied one after the other in this order (each one over
 * the output of the previous). Title replacements end in a space, collapsed at the end. */
static const literal_rule RULES[] = {
    {"won't", "will not", 1, 1},       {"can't", "can not", 1, 1},
    {"let's", "let us", 1, 1},         {"ain't", "aint", 1, 1},
    {"y'all", "you all", 1, 1},        {"wanna", "want to", 1, 1},
    {"gotta", "got to", 1, 1},         {"gonna", "going to", 1, 1},
    {"i'ma", "i am going to", 1, 1},   {"imma", "i am going to", 1, 1},
    {"woulda", "would have", 1, 1},    {"coulda", "could have", 1, 1},
    {"shoulda", "should have", 1, 1},  {"ma'am", "madam", 1, 1},
    {"mr", "mister ", 1, 1},           {"mrs", "missus ", 1, 1},
    {"st", "saint ", 1, 1},            {"dr", "doctor ", 1, 1},
    {"prof", "professor ", 1, 1},      {"capt", "captain ", 1, 1},
    {"gov", "governor ", 1, 1},        {"ald", "alderman ", 1, 1},
    {"gen", "general ", 1, 1},         {"sen", "senator ", 1, 1},
    {"rep", "representative ", 1, 1},  {"pres", "president ", 1, 1},
    {"rev", "reverend ", 1, 1},        {"hon", "honorable ", 1, 1},
    {"asst", "assistant ", 1, 1},      {"assoc", "associate ", 1, 1},
    {"lt", "lieutenant ", 1, 1},       {"col", "colonel ", 1, 1},
    {"jr", "junior ", 1, 1},           {"sr", "senior ", 1, 1},
    {"esq", "esquire ", 1, 1},
    {"'d been", " had been", 0, 1},    {"'s been", " has been", 0, 1},
    {"'d gone", " had gone", 0, 1},    {"'s gone", " has gone", 0, 1},
    {"'d done", " had done", 0, 1},    {"'s got", " has got", 0, 1},
    {"n't", " not", 0, 1},             {"'re", " are", 0, 1},
    {"'s", " is", 0, 1},               {"'d", " would", 0, 1},
    {"'ll", " will", 0, 1},            {"'t", " not", 0, 1},
    {"'ve", " have", 0, 1},            {"'m", " am", 0, 1},
};

static sr_status pass_rule(const ubuf *in, ubuf *out, const literal_rule *r)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0, len = strlen(r->pat);
    while (i < n) {
        if (s[i] == (unsigned char)r->pat[0] && match_ascii(s, n, i, r->pat) &&
            (!r->lead || at_boundary(s, n, i)) && (!r->trail || at_boundary(s, n, i + len))) {
            TRY(ub_ascii(out, r->rep));
            i += len;
            continue;
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* "(\d),(\d)" -> "\1\2". */
static sr_status pass_digit_commas(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (i + 2 < n && is_decimal(s[i]) && s[i + 1] == ',' && is_decimal(s[i + 2])) {
            TRY(ub_put(out, s[i]));
            TRY(ub_put(out, s[i + 2]));
            i += 3;
            continue;
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* "\.([^0-9]|$)" -> " \1": a period followed by a non-digit (or the end) becomes a space. */
static sr_status pass_periods(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (s[i] == '.') {
            if (i + 1 == n) return ub_put(out, ' ');
            if (!is_ascii_digit(s[i + 1])) {
                TRY(ub_put(out, ' '));
                TRY(ub_put(out, s[i + 1]));
                i += 2;
                continue;
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* Letters that NFKD leaves whole, with their replacements. */
static const struct {
    uint32_t c;
    const char *rep;
} EXTRA_DIACRITICS[] = {
    {0x0153, "oe"}, {0x0152, "OE"}, {0x00F8, "o"},  {0x00D8, "O"},  {0x00E6, "ae"}, {0x00C6, "AE"},
    {0x00DF, "ss"}, {0x1E9E, "SS"}, {0x0111, "d"},  {0x0110, "D"},  {0x00F0, "d"},  {0x00D0, "D"},
    {0x00FE, "th"}, {0x00DE, "th"}, {0x0142, "l"},  {0x0141, "L"},
};

#define CH_CENT 0x00A2
#define CH_POUND 0x00A3
#define CH_EURO 0x20AC

/* NFKD; keep . % $ ¢ € £; replace the extra letters; drop Mn; other M*, S*, P* -> space. */
static sr_status pass_symbols_diacritics(const ubuf *in, ubuf *out)
{
    ubuf tmp = {0};
    sr_status st = normalize_form(UNINORM_NFKD, in, &tmp);
    for (size_t i = 0; !st && i < tmp.n; i++) {
        uint32_t c = tmp.p[i];
        if (c == '.' || c == '%' || c == '$' || c == CH_CENT || c == CH_EURO || c == CH_POUND) {
            st = ub_put(out, c);
            continue;
        }
        const char *rep = NULL;
        for (size_t k = 0; k < SR_ARRAY_LEN(EXTRA_DIACRITICS); k++)
            if (EXTRA_DIACRITICS[k].c == c) rep = EXTRA_DIACRITICS[k].rep;
        if (rep)
            st = ub_ascii(out, rep);
        else if (uc_is_general_category(c, UC_CATEGORY_Mn))
            continue;
        else if (uc_is_general_category(c, UC_CATEGORY_M) ||
                 uc_is_general_category(c, UC_CATEGORY_S) ||
                 uc_is_general_category(c, UC_CATEGORY_P))
            st = ub_put(out, ' ');
        else
            st = ub_put(out, c);
    }
    ub_free(&tmp);
    return st;
}

/* "[.$¢€£]([^0-9])" -> " \1". */
static sr_status pass_lone_symbols(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        uint32_t c = s[i];
        if ((c == '.' || c == '$' || c == CH_CENT || c == CH_EURO || c == CH_POUND) && i + 1 < n &&
            !is_ascii_digit(s[i + 1])) {
            TRY(ub_put(out, ' '));
            TRY(ub_put(out, s[i + 1]));
            i += 2;
            continue;
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* "([^0-9])%" -> "\1 ". */
static sr_status pass_lone_percent(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (!is_ascii_digit(s[i]) && i + 1 < n && s[i + 1] == '%') {
            TRY(ub_put(out, s[i]));
            TRY(ub_put(out, ' '));
            i += 2;
            continue;
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* ---- number normalization -------------------------------------------------------------------- */

typedef enum {
    NW_ZERO,     /* o, oh, zero */
    NW_ONE,      /* one .. nineteen */
    NW_ONE_SUF,  /* ones, twos, .., first, second, .., nineteenth, zeroth */
    NW_TEN,      /* twenty .. ninety */
    NW_TEN_SUF,  /* twenties .., twentieth .. */
    NW_MULT,     /* hundred .. decillion */
    NW_MULT_SUF, /* hundreds, hundredth, .. */
    NW_PRE,      /* minus, negative, plus, positive: a sign before a number */
    NW_FOLLOW,   /* pound(s), euro(s), dollar(s), cent(s): a currency after a number */
    NW_PER,      /* per (followed by cent: %) */
    NW_PERCENT,  /* percent */
    NW_AND,
    NW_DOUBLE,   /* double, triple: repeat the next digit */
    NW_POINT
} nw_kind;

typedef struct {
    const char *name;
    unsigned char kind;
    unsigned char val;  /* ONE/TEN: the value; MULT: the power of ten; DOUBLE: the repeat */
    const char *suffix; /* *_SUF: the suffix written after the number */
    uint32_t sym;       /* PRE/FOLLOW: the prefix symbol */
} numword;

static const numword NUMWORDS[] = {
    {"o", NW_ZERO, 0, NULL, 0}, {"oh", NW_ZERO, 0, NULL, 0}, {"zero", NW_ZERO, 0, NULL, 0},
    {"one", NW_ONE, 1, NULL, 0}, {"two", NW_ONE, 2, NULL, 0}, {"three", NW_ONE, 3, NULL, 0},
    {"four", NW_ONE, 4, NULL, 0}, {"five", NW_ONE, 5, NULL, 0}, {"six", NW_ONE, 6, NULL, 0},
    {"seven", NW_ONE, 7, NULL, 0}, {"eight", NW_ONE, 8, NULL, 0}, {"nine", NW_ONE, 9, NULL, 0},
    {"ten", NW_ONE, 10, NULL, 0}, {"eleven", NW_ONE, 11, NULL, 0},
    {"twelve", NW_ONE, 12, NULL, 0}, {"thirteen", NW_ONE, 13, NULL, 0},
    {"fourteen", NW_ONE, 14, NULL, 0}, {"fifteen", NW_ONE, 15, NULL, 0},
    {"sixteen", NW_ONE, 16, NULL, 0}, {"seventeen", NW_ONE, 17, NULL, 0},
    {"eighteen", NW_ONE, 18, NULL, 0}, {"nineteen", NW_ONE, 19, NULL, 0},
    /* plurals */
    {"ones", NW_ONE_SUF, 1, "s", 0}, {"twos", NW_ONE_SUF, 2, "s", 0},
    {"threes", NW_ONE_SUF, 3, "s", 0}, {"fours", NW_ONE_SUF, 4, "s", 0},
    {"fives", NW_ONE_SUF, 5, "s", 0}, {"sixes", NW_ONE_SUF, 6, "s", 0},
    {"sevens", NW_ONE_SUF, 7, "s", 0}, {"eights", NW_ONE_SUF, 8, "s", 0},
    {"nines", NW_ONE_SUF, 9, "s", 0}, {"tens", NW_ONE_SUF, 10, "s", 0},
    {"elevens", NW_ONE_SUF, 11, "s", 0}, {"twelves", NW_ONE_SUF, 12, "s", 0},
    {"thirteens", NW_ONE_SUF, 13, "s", 0}, {"fourteens", NW_ONE_SUF, 14, "s", 0},
    {"fifteens", NW_ONE_SUF, 15, "s", 0}, {"sixteens", NW_ONE_SUF, 16, "s", 0},
    {"seventeens", NW_ONE_SUF, 17, "s", 0}, {"eighteens", NW_ONE_SUF, 18, "s", 0},
    {"nineteens", NW_ONE_SUF, 19, "s", 0},
    /* ordinals; the original spells 9th "nineth" (so "ninth" stays a word) */
    {"zeroth", NW_ONE_SUF, 0, "th", 0}, {"first", NW_ONE_SUF, 1, "st", 0},
    {"second", NW_ONE_SUF, 2, "nd", 0}, {"third", NW_ONE_SUF, 3, "rd", 0},
    {"fourth", NW_ONE_SUF, 4, "th", 0}, {"fifth", NW_ONE_SUF, 5, "th", 0},
    {"sixth", NW_ONE_SUF, 6, "th", 0}, {"seventh", NW_ONE_SUF, 7, "th", 0},
    {"eighth", NW_ONE_SUF, 8, "th", 0}, {"nineth", NW_ONE_SUF, 9, "th", 0},
    {"tenth", NW_ONE_SUF, 10, "th", 0}, {"eleventh", NW_ONE_SUF, 11, "th", 0},
    {"twelfth", NW_ONE_SUF, 12, "th", 0}, {"thirteenth", NW_ONE_SUF, 13, "th", 0},
    {"fourteenth", NW_ONE_SUF, 14, "th", 0}, {"fifteenth", NW_ONE_SUF, 15, "th", 0},
    {"sixteenth", NW_ONE_SUF, 16, "th", 0}, {"seventeenth", NW_ONE_SUF, 17, "th", 0},
    {"eighteenth", NW_ONE_SUF, 18, "th", 0}, {"nineteenth", NW_ONE_SUF, 19, "th", 0},
    {"twenty", NW_TEN, 20, NULL, 0}, {"thirty", NW_TEN, 30, NULL, 0},
    {"forty", NW_TEN, 40, NULL, 0}, {"fifty", NW_TEN, 50, NULL, 0},
    {"sixty", NW_TEN, 60, NULL, 0}, {"seventy", NW_TEN, 70, NULL, 0},
    {"eighty", NW_TEN, 80, NULL, 0}, {"ninety", NW_TEN, 90, NULL, 0},
    {"twenties", NW_TEN_SUF, 20, "s", 0}, {"thirties", NW_TEN_SUF, 30, "s", 0},
    {"forties", NW_TEN_SUF, 40, "s", 0}, {"fifties", NW_TEN_SUF, 50, "s", 0},
    {"sixties", NW_TEN_SUF, 60, "s", 0}, {"seventies", NW_TEN_SUF, 70, "s", 0},
    {"eighties", NW_TEN_SUF, 80, "s", 0}, {"nineties", NW_TEN_SUF, 90, "s", 0},
    {"twentieth", NW_TEN_SUF, 20, "th", 0}, {"thirtieth", NW_TEN_SUF, 30, "th", 0},
    {"fortieth", NW_TEN_SUF, 40, "th", 0}, {"fiftieth", NW_TEN_SUF, 50, "th", 0},
    {"sixtieth", NW_TEN_SUF, 60, "th", 0}, {"seventieth", NW_TEN_SUF, 70, "th", 0},
    {"eightieth", NW_TEN_SUF, 80, "th", 0}, {"ninetieth", NW_TEN_SUF, 90, "th", 0},
    {"hundred", NW_MULT, 2, NULL, 0}, {"thousand", NW_MULT, 3, NULL, 0},
    {"million", NW_MULT, 6, NULL, 0}, {"billion", NW_MULT, 9, NULL, 0},
    {"trillion", NW_MULT, 12, NULL, 0}, {"quadrillion", NW_MULT, 15, NULL, 0},
    {"quintillion", NW_MULT, 18, NULL, 0}, {"sextillion", NW_MULT, 21, NULL, 0},
    {"septillion", NW_MULT, 24, NULL, 0}, {"octillion", NW_MULT, 27, NULL, 0},
    {"nonillion", NW_MULT, 30, NULL, 0}, {"decillion", NW_MULT, 33, NULL, 0},
    {"minus", NW_PRE, 0, NULL, '-'}, {"negative", NW_PRE, 0, NULL, '-'},
    {"plus", NW_PRE, 0, NULL, '+'}, {"positive", NW_PRE, 0, NULL, '+'},
    {"pound", NW_FOLLOW, 0, NULL, CH_POUND}, {"pounds", NW_FOLLOW, 0, NULL, CH_POUND},
    {"euro", NW_FOLLOW, 0, NULL, CH_EURO}, {"euros", NW_FOLLOW, 0, NULL, CH_EURO},
    {"dollar", NW_FOLLOW, 0, NULL, '$'}, {"dollars", NW_FOLLOW, 0, NULL, '$'},
    {"cent", NW_FOLLOW, 0, NULL, CH_CENT}, {"cents", NW_FOLLOW, 0, NULL, CH_CENT},
    {"per", NW_PER, 0, NULL, 0}, {"percent", NW_PERCENT, 0, NULL, 0},
    {"and", NW_AND, 0, NULL, 0}, {"double", NW_DOUBLE, 2, NULL, 0},
    {"triple", NW_DOUBLE, 3, NULL, 0}, {"point", NW_POINT, 0, NULL, 0},
};

/* Multipliers with a suffix ("hundreds", "millionth"), recognised by their stem. */
static const numword MULT_S[] = {
    {"s", NW_MULT_SUF, 0, "s", 0},
    {"th", NW_MULT_SUF, 0, "th", 0},
};

typedef struct {
    const uint32_t *p;
    size_t n;
} slice;

/* The number word w is, or NULL. *mult_exp receives the power of ten of suffixed multipliers. */
static const numword *lookup_numword(slice w, unsigned *mult_exp)
{
    if (!w.p || !w.n) return NULL;
    for (size_t k = 0; k < SR_ARRAY_LEN(NUMWORDS); k++)
        if (eq_ascii(w.p, w.n, NUMWORDS[k].name)) return &NUMWORDS[k];
    for (size_t s = 0; s < SR_ARRAY_LEN(MULT_S); s++) {
        size_t sl = strlen(MULT_S[s].suffix);
        if (w.n <= sl || !eq_ascii(w.p + w.n - sl, sl, MULT_S[s].suffix)) continue;
        for (size_t k = 0; k < SR_ARRAY_LEN(NUMWORDS); k++)
            if (NUMWORDS[k].kind == NW_MULT && eq_ascii(w.p, w.n - sl, NUMWORDS[k].name)) {
                if (mult_exp) *mult_exp = NUMWORDS[k].val;
                return &MULT_S[s];
            }
    }
    return NULL;
}

static int nw_is(const numword *w, nw_kind k) { return w && w->kind == k; }

/* "^\d+(\.\d+)?$" */
static int is_numeric_word(const uint32_t *s, size_t n)
{
    size_t i = 0;
    while (i < n && is_decimal(s[i])) i++;
    if (i == 0) return 0;
    if (i == n) return 1;
    if (s[i] != '.') return 0;
    size_t j = ++i;
    while (i < n && is_decimal(s[i])) i++;
    return i > j && i == n;
}

static int is_prefix_symbol(uint32_t c)
{
    return c == '-' || c == '+' || c == CH_POUND || c == CH_EURO || c == '$' || c == CH_CENT;
}

/* Append the decimal number formed by the digits s[0..n) (any Nd digits) in canonical ASCII form
 * (no leading zeros, "0" for zero). */
static sr_status put_canonical(ubuf *out, const uint32_t *s, size_t n)
{
    size_t i = 0;
    while (i < n && digit_value(s[i]) == 0) i++;
    if (i == n) return ub_put(out, '0');
    TRY(ub_reserve(out, n - i));
    for (; i < n; i++) out->p[out->n++] = (uint32_t)('0' + digit_value(s[i]));
    return SR_OK;
}

/* out = a + b for canonical ASCII decimal strings. */
static sr_status dec_add(const ubuf *a, const ubuf *b, ubuf *out)
{
    size_t n = SR_MAX(a->n, b->n) + 1;
    out->n = 0;
    TRY(ub_reserve(out, n));
    int carry = 0;
    for (size_t k = 0; k < n; k++) { /* least significant first, reversed below */
        int d = carry;
        if (k < a->n) d += (int)(a->p[a->n - 1 - k] - '0');
        if (k < b->n) d += (int)(b->p[b->n - 1 - k] - '0');
        out->p[k] = (uint32_t)('0' + d % 10);
        carry = d / 10;
    }
    while (n > 1 && out->p[n - 1] == '0') n--;
    for (size_t k = 0; k < n / 2; k++) {
        uint32_t t = out->p[k];
        out->p[k] = out->p[n - 1 - k];
        out->p[n - 1 - k] = t;
    }
    out->n = n;
    return SR_OK;
}

/* Value of the last two digits of a canonical decimal string (the number mod 100). */
static unsigned dec_mod100(const ubuf *d)
{
    unsigned v = d->p[d->n - 1] - '0';
    if (d->n >= 2) v += 10 * (d->p[d->n - 2] - '0');
    return v;
}

static int dec_is_zero(const ubuf *d) { return d->n == 1 && d->p[0] == '0'; }

/* The accumulated number: none, an integer (canonical ASCII digits) or a string of digits
 * (possibly with '.', leading zeros or other characters) that is written as it is. */
typedef enum { V_NONE, V_INT, V_STR } vkind;

typedef struct {
    ubuf *out;     /* the joined output words */
    int first;     /* no word written yet */
    uint32_t prefix; /* pending sign/currency symbol, 0 = none */
    vkind vk;
    ubuf v;        /* the value's characters */
    ubuf t1, t2, t3; /* scratch */
} numstate;

/* Write one output word: the pending prefix and the text; the value and prefix are reset. */
static sr_status emit(numstate *st, const uint32_t *s, size_t n)
{
    if (!st->first) TRY(ub_put(st->out, ' '));
    st->first = 0;
    if (st->prefix) TRY(ub_put(st->out, st->prefix));
    TRY(ub_add(st->out, s, n));
    st->prefix = 0;
    st->vk = V_NONE;
    return SR_OK;
}

static sr_status emit_value(numstate *st) { return emit(st, st->v.p, st->v.n); }

static sr_status set_int(numstate *st, unsigned v)
{
    st->v.n = 0;
    st->vk = V_INT;
    return ub_uint(&st->v, v);
}

/* 10^e as a decimal string into b. */
static sr_status put_pow10(ubuf *b, unsigned e)
{
    TRY(ub_put(b, '1'));
    for (unsigned k = 0; k < e; k++) TRY(ub_put(b, '0'));
    return SR_OK;
}

/* Integer value += small k. */
static sr_status int_add(numstate *st, unsigned k)
{
    st->t1.n = 0;
    TRY(ub_uint(&st->t1, k));
    TRY(dec_add(&st->v, &st->t1, &st->t2));
    st->v.n = 0;
    return ub_add(&st->v, st->t2.p, st->t2.n);
}

/* Integer value -> value // 1000 * 1000 + (value % 1000) * 10^e. */
static sr_status int_multiply(numstate *st, unsigned e)
{
    ubuf *v = &st->v;
    size_t keep = v->n > 3 ? v->n - 3 : 0;
    st->t1.n = 0; /* before */
    if (keep) {
        TRY(ub_add(&st->t1, v->p, keep));
        TRY(ub_ascii(&st->t1, "000"));
    } else {
        TRY(ub_put(&st->t1, '0'));
    }
    st->t3.n = 0; /* residual * 10^e */
    TRY(put_canonical(&st->t3, v->p + keep, v->n - keep));
    if (!dec_is_zero(&st->t3))
        for (unsigned k = 0; k < e; k++) TRY(ub_put(&st->t3, '0'));
    TRY(dec_add(&st->t1, &st->t3, &st->t2));
    v->n = 0;
    return ub_add(v, st->t2.p, st->t2.n);
}

/* Read value as a Python Fraction literal (digits, at most one '.', a digit before the end or
 * right after the '.') and multiply it by 10^e. On an integer result, *ok = 1 and res holds it
 * in canonical form; otherwise (not a number, or a fraction) *ok = 0. */
static sr_status fraction_times_pow10(const ubuf *value, unsigned e, ubuf *res, int *ok)
{
    const uint32_t *s = value->p;
    size_t n = value->n, i = 0, dot = n;
    *ok = 0;
    for (i = 0; i < n; i++) {
        if (s[i] == '.' && dot == n) dot = i;
        else if (!is_decimal(s[i])) return SR_OK;
    }
    if (n == 0 || !(is_decimal(s[0]) || (s[0] == '.' && n > 1))) return SR_OK;
    size_t nfrac = dot < n ? n - dot - 1 : 0;
    /* digits of the numerator N = int part followed by fraction part; value = N / 10^nfrac */
    res->n = 0;
    for (i = 0; i < n; i++)
        if (i != dot) TRY(ub_put(res, (uint32_t)('0' + digit_value(s[i]))));
    if (nfrac <= e) {
        for (unsigned k = 0; k < e - nfrac; k++) TRY(ub_put(res, '0'));
    } else {
        size_t drop = nfrac - e; /* the last `drop` digits must be zeros */
        for (size_t k = 0; k < drop; k++)
            if (res->p[res->n - 1 - k] != '0') return SR_OK;
        res->n -= drop;
    }
    /* canonical form */
    size_t z = 0;
    while (z + 1 < res->n && res->p[z] == '0') z++;
    if (z) {
        memmove(res->p, res->p + z, (res->n - z) * sizeof *res->p);
        res->n -= z;
    }
    if (res->n == 0) TRY(ub_put(res, '0'));
    *ok = 1;
    return SR_OK;
}

/* "str(value or '')": empty for none and for the integer 0. */
static void value_or_empty(numstate *st)
{
    if (st->vk == V_NONE || (st->vk == V_INT && dec_is_zero(&st->v))) st->v.n = 0;
    st->vk = V_STR;
}

/* Apply a ones word (1..19) or, with suffix, a suffixed ones word, to the value. */
static sr_status apply_ones(numstate *st, unsigned ones, const char *suffix, const numword *prev)
{
    ubuf *v = &st->v;
    if (st->vk == V_NONE) {
        if (!suffix) return set_int(st, ones);
        st->t1.n = 0;
        TRY(ub_uint(&st->t1, ones));
        TRY(ub_ascii(&st->t1, suffix));
        return emit(st, st->t1.p, st->t1.n);
    }
    if (st->vk == V_STR || nw_is(prev, NW_ONE)) {
        if (nw_is(prev, NW_TEN) && ones < 10) {
            if (v->n) v->n--; /* the last zero of the tens becomes the digit */
        }
        TRY(ub_uint(v, ones));
        st->vk = V_STR; /* "str(value) + ..." */
    } else if (ones < 10 ? v->p[v->n - 1] == '0' : dec_mod100(v) == 0) {
        TRY(int_add(st, ones));
    } else {
        TRY(ub_uint(v, ones));
        st->vk = V_STR; /* "str(value) + ..." */
    }
    if (!suffix) return SR_OK;
    TRY(ub_ascii(v, suffix));
    return emit_value(st);
}

static sr_status apply_tens(numstate *st, unsigned tens, const char *suffix)
{
    ubuf *v = &st->v;
    if (st->vk == V_NONE) {
        if (!suffix) return set_int(st, tens);
        st->t1.n = 0;
        TRY(ub_uint(&st->t1, tens));
        TRY(ub_ascii(&st->t1, suffix));
        return emit(st, st->t1.p, st->t1.n);
    }
    if (st->vk == V_INT && dec_mod100(v) == 0) {
        TRY(int_add(st, tens));
    } else {
        TRY(ub_uint(v, tens));
        st->vk = V_STR; /* "str(value) + ..." */
    }
    if (!suffix) return SR_OK;
    TRY(ub_ascii(v, suffix));
    return emit_value(st);
}

static sr_status apply_mult(numstate *st, unsigned e, const char *suffix)
{
    ubuf *v = &st->v;
    if (st->vk == V_NONE) {
        if (!suffix) {
            v->n = 0;
            st->vk = V_INT;
            return put_pow10(v, e);
        }
        st->t1.n = 0;
        TRY(put_pow10(&st->t1, e));
        TRY(ub_ascii(&st->t1, suffix));
        return emit(st, st->t1.p, st->t1.n);
    }
    if (st->vk == V_STR || (!suffix && dec_is_zero(v))) {
        int ok;
        TRY(fraction_times_pow10(v, e, &st->t3, &ok));
        if (ok) {
            v->n = 0;
            TRY(ub_add(v, st->t3.p, st->t3.n));
            st->vk = V_INT;
            if (!suffix) return SR_OK;
            TRY(ub_ascii(v, suffix));
            return emit_value(st);
        }
        TRY(emit_value(st));
        st->t1.n = 0;
        TRY(put_pow10(&st->t1, e));
        if (!suffix) {
            v->n = 0;
            st->vk = V_INT;
            return ub_add(v, st->t1.p, st->t1.n);
        }
        TRY(ub_ascii(&st->t1, suffix));
        return emit(st, st->t1.p, st->t1.n);
    }
    TRY(int_multiply(st, e));
    if (!suffix) return SR_OK;
    TRY(ub_ascii(v, suffix));
    return emit_value(st);
}

/* The word-level state machine over words[0..nw). */
static sr_status process_words(numstate *st, const slice *words, size_t nw)
{
    int skip = 0;
    for (size_t wi = 0; wi < nw; wi++) {
        if (skip) {
            skip = 0;
            continue;
        }
        slice cur = words[wi];
        slice prev = wi > 0 ? words[wi - 1] : (slice){NULL, 0};
        slice next = wi + 1 < nw ? words[wi + 1] : (slice){NULL, 0};
        unsigned cur_exp = 0;
        const numword *cw = lookup_numword(cur, &cur_exp);
        const numword *pw = lookup_numword(prev, NULL);
        const numword *nx = lookup_numword(next, NULL);
        int next_numeric = next.p && is_numeric_word(next.p, next.n);
        int has_prefix = is_prefix_symbol(cur.p[0]);
        const uint32_t *bare = cur.p + (has_prefix ? 1 : 0);
        size_t bare_n = cur.n - (has_prefix ? 1 : 0);

        if (is_numeric_word(bare, bare_n)) {
            /* a written number, possibly with a sign or currency prefix */
            if (st->vk != V_NONE) {
                if (st->vk == V_STR && st->v.n && st->v.p[st->v.n - 1] == '.') {
                    TRY(ub_add(&st->v, cur.p, cur.n)); /* decimals / address components */
                    continue;
                }
                TRY(emit_value(st));
            }
            if (has_prefix) st->prefix = cur.p[0];
            size_t dot = 0;
            while (dot < bare_n && bare[dot] != '.') dot++;
            int integral = 1;
            for (size_t k = dot + 1; k < bare_n; k++)
                if (digit_value(bare[k]) != 0) integral = 0;
            st->v.n = 0;
            if (integral) {
                st->vk = V_INT;
                TRY(put_canonical(&st->v, bare, dot));
            } else {
                st->vk = V_STR;
                TRY(ub_add(&st->v, bare, bare_n));
            }
            continue;
        }
        if (!cw) {
            if (st->vk != V_NONE) TRY(emit_value(st));
            TRY(emit(st, cur.p, cur.n));
            continue;
        }
        switch ((nw_kind)cw->kind) {
        case NW_ZERO:
            value_or_empty(st);
            TRY(ub_put(&st->v, '0'));
            break;
        case NW_ONE: TRY(apply_ones(st, cw->val, NULL, pw)); break;
        case NW_ONE_SUF: TRY(apply_ones(st, cw->val, cw->suffix, pw)); break;
        case NW_TEN: TRY(apply_tens(st, cw->val, NULL)); break;
        case NW_TEN_SUF: TRY(apply_tens(st, cw->val, cw->suffix)); break;
        case NW_MULT: TRY(apply_mult(st, cw->val, NULL)); break;
        case NW_MULT_SUF: TRY(apply_mult(st, cur_exp, cw->suffix)); break;
        case NW_PRE:
            if (st->vk != V_NONE) TRY(emit_value(st));
            if (nx || next_numeric)
                st->prefix = cw->sym;
            else
                TRY(emit(st, cur.p, cur.n));
            break;
        case NW_FOLLOW:
            if (st->vk != V_NONE) {
                st->prefix = cw->sym;
                TRY(emit_value(st));
            } else {
                TRY(emit(st, cur.p, cur.n));
            }
            break;
        case NW_PER:
        case NW_PERCENT:
            if (st->vk == V_NONE) {
                TRY(emit(st, cur.p, cur.n));
            } else if (cw->kind == NW_PERCENT || (next.p && eq_ascii(next.p, next.n, "cent"))) {
                TRY(ub_put(&st->v, '%'));
                TRY(emit_value(st));
                skip = cw->kind == NW_PER;
            } else {
                TRY(emit_value(st));
                TRY(emit(st, cur.p, cur.n));
            }
            break;
        case NW_AND:
        case NW_DOUBLE:
        case NW_POINT:
            if (!nx && !next_numeric) {
                /* only special when the next word can be part of a number */
                if (st->vk != V_NONE) TRY(emit_value(st));
                TRY(emit(st, cur.p, cur.n));
            } else if (cw->kind == NW_AND) {
                if (!nw_is(pw, NW_MULT)) { /* "and" after hundred, thousand, ... is dropped */
                    if (st->vk != V_NONE) TRY(emit_value(st));
                    TRY(emit(st, cur.p, cur.n));
                }
            } else if (cw->kind == NW_DOUBLE) {
                if (nw_is(nx, NW_ONE) || nw_is(nx, NW_ZERO)) {
                    unsigned digit = nw_is(nx, NW_ONE) ? nx->val : 0;
                    value_or_empty(st);
                    for (unsigned r = 0; r < cw->val; r++) TRY(ub_uint(&st->v, digit));
                    skip = 1;
                } else {
                    if (st->vk != V_NONE) TRY(emit_value(st));
                    TRY(emit(st, cur.p, cur.n));
                }
            } else if (nw_is(nx, NW_ONE) || nw_is(nx, NW_TEN) || nw_is(nx, NW_ZERO) ||
                       next_numeric) {
                value_or_empty(st); /* "point": a decimal point */
                TRY(ub_put(&st->v, '.'));
            }
            break;
        }
    }
    if (st->vk != V_NONE) TRY(emit_value(st));
    return SR_OK;
}

/* Split on whitespace (str.split()). *words is malloc'ed. */
static sr_status split_words(const ubuf *s, slice **words, size_t *nw)
{
    size_t n = 0, cap = 0, i = 0;
    slice *w = NULL;
    *words = NULL;
    *nw = 0;
    while (i < s->n) {
        while (i < s->n && is_space(s->p[i])) i++;
        if (i == s->n) break;
        size_t j = i;
        while (j < s->n && !is_space(s->p[j])) j++;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            slice *nwp = realloc(w, cap * sizeof *w);
            if (!nwp) {
                free(w);
                return sr_error(SR_ERR_NOMEM, "normalizer: out of memory splitting words");
            }
            w = nwp;
        }
        w[n++] = (slice){s->p + i, j - i};
        i = j;
    }
    *words = w;
    *nw = n;
    return SR_OK;
}

/* Length of a "\band\s+a\s+half\b" match at i, or 0. */
static size_t match_and_a_half(const uint32_t *s, size_t n, size_t i)
{
    if (!match_ascii(s, n, i, "and") || !at_boundary(s, n, i)) return 0;
    size_t j = i + 3, k = j;
    while (k < n && is_space(s[k])) k++;
    if (k == j || k >= n || s[k] != 'a') return 0;
    j = k + 1;
    k = j;
    while (k < n && is_space(s[k])) k++;
    if (k == j || !match_ascii(s, n, k, "half") || !at_boundary(s, n, k + 4)) return 0;
    return k + 4 - i;
}

/* "<number> and a half" -> "<number> point five": split at every "and a half"; keep the
 * non-blank pieces, joined by spaces; after each piece but the last, put "point five" when its
 * last word is a ones/tens/zero/multiplier word, else "and a half" again. */
static sr_status pre_half(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, start = 0, i = 0;
    int first = 1;
    for (;;) {
        size_t m = 0, end = n;
        for (; i < n; i++)
            if ((m = match_and_a_half(s, n, i))) break;
        int last = i >= n;
        end = last ? n : i;
        /* piece s[start, end) */
        size_t a = start, b = end;
        while (a < b && is_space(s[a])) a++;
        while (b > a && is_space(s[b - 1])) b--;
        if (a < b) {
            if (!first) TRY(ub_put(out, ' '));
            first = 0;
            TRY(ub_add(out, s + start, end - start));
            if (!last) {
                size_t w = b;
                while (w > a && !is_space(s[w - 1])) w--;
                const numword *lw = lookup_numword((slice){s + w, b - w}, NULL);
                int numeric = lw && (lw->kind == NW_ONE || lw->kind == NW_TEN ||
                                     lw->kind == NW_ZERO || lw->kind == NW_MULT);
                TRY(ub_ascii(out, numeric ? " point five" : " and a half"));
            }
        }
        if (last) break;
        i += m;
        start = i;
    }
    return SR_OK;
}

/* "([a-z])([0-9])" -> "\1 \2" (letter_first) or "([0-9])([a-z])" -> "\1 \2". */
static sr_status pre_split_alnum(const ubuf *in, ubuf *out, int letter_first)
{
    const uint32_t *s = in->p;
    size_t n = in->n;
    for (size_t i = 0; i < n; i++) {
        TRY(ub_put(out, s[i]));
        if (i + 1 < n && (letter_first ? is_ascii_lower(s[i]) && is_ascii_digit(s[i + 1])
                                       : is_ascii_digit(s[i]) && is_ascii_lower(s[i + 1]))) {
            TRY(ub_put(out, ' '));
            TRY(ub_put(out, s[++i]));
        }
    }
    return SR_OK;
}

/* "([0-9])\s+(st|nd|rd|th|s)\b" -> "\1\2". */
static sr_status pre_join_suffix(const ubuf *in, ubuf *out)
{
    static const char *const SUF[] = {"st", "nd", "rd", "th", "s"};
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (is_ascii_digit(s[i]) && i + 1 < n && is_space(s[i + 1])) {
            size_t k = i + 1;
            while (k < n && is_space(s[k])) k++;
            size_t len = 0;
            for (size_t a = 0; a < SR_ARRAY_LEN(SUF) && !len; a++) {
                size_t l = strlen(SUF[a]);
                if (match_ascii(s, n, k, SUF[a]) && at_boundary(s, n, k + l)) len = l;
            }
            if (len) {
                TRY(ub_put(out, s[i]));
                TRY(ub_add(out, s + k, len));
                i = k + len;
                continue;
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* Number of consecutive ASCII digits at s[i..]. */
static size_t ascii_digits_at(const uint32_t *s, size_t n, size_t i)
{
    size_t k = i;
    while (k < n && is_ascii_digit(s[k])) k++;
    return k - i;
}

static int is_currency(uint32_t c) { return c == CH_EURO || c == CH_POUND || c == '$'; }

/* "([€£$])([0-9]+) (?:and )?¢([0-9]{1,2})\b" -> currency integer "." cents (two digits). */
static sr_status post_combine_cents(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (is_currency(s[i])) {
            size_t nd = ascii_digits_at(s, n, i + 1), k = i + 1 + nd;
            if (nd && k < n && s[k] == ' ') {
                k++;
                if (match_ascii(s, n, k, "and ")) k += 4;
                if (k < n && s[k] == CH_CENT) {
                    size_t c = k + 1, nc = ascii_digits_at(s, n, c);
                    if ((nc == 1 || nc == 2) && !(c + nc < n && is_word(s[c + nc]))) {
                        TRY(ub_add(out, s + i, 1 + nd));
                        TRY(ub_put(out, '.'));
                        if (nc == 1) TRY(ub_put(out, '0'));
                        TRY(ub_add(out, s + c, nc));
                        i = c + nc;
                        continue;
                    }
                }
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* "[€£$]0.([0-9]{1,2})\b" -> "¢" + the cents without leading zero ('.' is any character). */
static sr_status post_extract_cents(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (is_currency(s[i]) && i + 3 < n && s[i + 1] == '0' && s[i + 2] != '\n') {
            size_t c = i + 3, nc = ascii_digits_at(s, n, c);
            if ((nc == 1 || nc == 2) && !(c + nc < n && is_word(s[c + nc]))) {
                TRY(ub_put(out, CH_CENT));
                if (nc == 2 && s[c] == '0') {
                    TRY(ub_put(out, s[c + 1]));
                } else {
                    TRY(ub_add(out, s + c, nc));
                }
                i = c + nc;
                continue;
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* "\b1(s?)\b" -> "one\1". */
static sr_status post_ones(const ubuf *in, ubuf *out)
{
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    while (i < n) {
        if (s[i] == '1' && (i == 0 || !is_word(s[i - 1]))) {
            if (i + 1 < n && s[i + 1] == 's' && !(i + 2 < n && is_word(s[i + 2]))) {
                TRY(ub_ascii(out, "ones"));
                i += 2;
                continue;
            }
            if (!(i + 1 < n && is_word(s[i + 1]))) {
                TRY(ub_ascii(out, "one"));
                i += 1;
                continue;
            }
        }
        TRY(ub_put(out, s[i++]));
    }
    return SR_OK;
}

/* ---- the normalizer object ------------------------------------------------------------------- */

typedef enum { K_WHISPER_EN = 0, K_BASIC = 1, K_NONE = 2 } norm_kind;

static const char *const NAMES[] = {"whisper_en", "basic", "none"};

typedef struct {
    uint32_t *key, *val;
    size_t klen, vlen;
    size_t order; /* position in the file: the last of duplicate keys wins, like json.load */
} spelling;

struct sr_normalizer {
    norm_kind kind;
    spelling *map; /* sorted by key */
    size_t n_map;
};

const char *sr_normalizer_name_at(size_t i) { return i < SR_ARRAY_LEN(NAMES) ? NAMES[i] : NULL; }

const char *sr_normalizer_name(const sr_normalizer *n) { return n ? NAMES[n->kind] : NULL; }

sr_status sr_normalizer_default_map_path(char *buf, size_t cap)
{
    if (!buf || !cap) return sr_error(SR_ERR_ARG, "normalizer: map path buffer is NULL or empty");
    const char *home = getenv("SRKIT_HOME");
    int w;
    if (home && *home) {
        w = snprintf(buf, cap, "%s/assets/whisper_english.json", home);
    } else {
        const char *h = getenv("HOME");
        if (!h || !*h)
            return sr_error(SR_ERR_ARG, "normalizer: neither SRKIT_HOME nor HOME is set, so the "
                                        "spelling map has no default path");
        w = snprintf(buf, cap, "%s/.cache/srkit/assets/whisper_english.json", h);
    }
    if (w < 0 || (size_t)w >= cap)
        return sr_error(SR_ERR_ARG, "normalizer: spelling map path longer than %zu bytes", cap);
    return SR_OK;
}

static int cmp_u32(const uint32_t *a, size_t an, const uint32_t *b, size_t bn)
{
    size_t n = SR_MIN(an, bn);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

static int cmp_spelling(const void *pa, const void *pb)
{
    const spelling *a = pa, *b = pb;
    int c = cmp_u32(a->key, a->klen, b->key, b->klen);
    if (c) return c;
    return a->order < b->order ? -1 : a->order > b->order ? 1 : 0;
}

/* UTF-8 -> malloc'ed code points. Invalid UTF-8: returns SR_ERR_FORMAT without a message and
 * sets *bad_at to the offset of the first bad byte (the caller words the error). */
static sr_status utf8_to_u32(const char *s, size_t n, uint32_t **out, size_t *len, size_t *bad_at)
{
    *out = NULL;
    *len = 0;
    const uint8_t *u = (const uint8_t *)s;
    const uint8_t *badp = u8_check(u, n);
    if (badp) {
        *bad_at = (size_t)(badp - u);
        return SR_ERR_FORMAT;
    }
    if (!n) {
        *out = malloc(sizeof(uint32_t));
        if (!*out) return sr_error(SR_ERR_NOMEM, "normalizer: out of memory");
        return SR_OK;
    }
    size_t l = 0;
    uint32_t *r = u8_to_u32(u, n, NULL, &l);
    if (!r) return sr_error(SR_ERR_NOMEM, "normalizer: out of memory decoding UTF-8");
    *out = r;
    *len = l;
    return SR_OK;
}

static void free_map(sr_normalizer *nz)
{
    for (size_t i = 0; i < nz->n_map; i++) {
        free(nz->map[i].key);
        free(nz->map[i].val);
    }
    free(nz->map);
    nz->map = NULL;
    nz->n_map = 0;
}

static sr_status load_map(sr_normalizer *nz, const char *path)
{
    char *data = NULL;
    size_t len = 0;
    if (sr_read_file(path, &data, &len) != SR_OK)
        return sr_error(SR_ERR_IO,
                        "%s: cannot read the whisper_en spelling map (%s); install it with "
                        "scripts/fetch_assets.sh (or pass another path)",
                        path, sr_last_error());
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - data) : 0;
        free(data);
        return sr_error(SR_ERR_FORMAT, "%s: spelling map is not valid JSON (near byte %zu)", path,
                        at);
    }
    sr_status st = SR_OK;
    if (!cJSON_IsObject(root)) {
        st = sr_error(SR_ERR_FORMAT, "%s: spelling map must be a JSON object of "
                                     "\"british\": \"american\" strings", path);
        goto done;
    }
    size_t n = (size_t)cJSON_GetArraySize(root);
    nz->map = calloc(n ? n : 1, sizeof *nz->map);
    if (!nz->map) {
        st = sr_error(SR_ERR_NOMEM, "%s: out of memory for %zu spellings", path, n);
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (!cJSON_IsString(it) || !it->string) {
            st = sr_error(SR_ERR_FORMAT, "%s: spelling map key \"%s\": value is not a string",
                          path, it->string ? it->string : "");
            goto done;
        }
        spelling *e = &nz->map[nz->n_map];
        e->order = nz->n_map;
        size_t bad = 0;
        st = utf8_to_u32(it->string, strlen(it->string), &e->key, &e->klen, &bad);
        if (st == SR_ERR_FORMAT) {
            st = sr_error(SR_ERR_FORMAT, "%s: spelling map key is not valid UTF-8 (byte %zu)",
                          path, bad);
            goto done;
        }
        if (st) goto done;
        nz->n_map++; /* owns key from here on */
        st = utf8_to_u32(it->valuestring, strlen(it->valuestring), &e->val, &e->vlen, &bad);
        if (st == SR_ERR_FORMAT) {
            st = sr_error(SR_ERR_FORMAT,
                          "%s: spelling map value of \"%s\" is not valid UTF-8 (byte %zu)", path,
                          it->string, bad);
            goto done;
        }
        if (st) goto done;
    }
    qsort(nz->map, nz->n_map, sizeof *nz->map, cmp_spelling);
    /* drop all but the last of equal keys */
    size_t w = 0;
    for (size_t r = 0; r < nz->n_map; r++) {
        if (r + 1 < nz->n_map && !cmp_u32(nz->map[r].key, nz->map[r].klen, nz->map[r + 1].key,
                                          nz->map[r + 1].klen)) {
            free(nz->map[r].key);
            free(nz->map[r].val);
            continue;
        }
        nz->map[w++] = nz->map[r];
    }
    nz->n_map = w;
done:
    cJSON_Delete(root);
    free(data);
    return st;
}

sr_status sr_normalizer_create(const char *name, const char *map_path, sr_normalizer **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_normalizer_create: out is NULL");
    *out = NULL;
    if (!name) name = "whisper_en";
    size_t k = 0;
    while (k < SR_ARRAY_LEN(NAMES) && strcmp(NAMES[k], name)) k++;
    if (k == SR_ARRAY_LEN(NAMES))
        return sr_error_unknown("normalizer", name, sr_normalizer_name_at);
    sr_normalizer *nz = calloc(1, sizeof *nz);
    if (!nz) return sr_error(SR_ERR_NOMEM, "normalizer: out of memory");
    nz->kind = (norm_kind)k;
    if (nz->kind == K_WHISPER_EN) {
        char def[4096];
        sr_status st = SR_OK;
        if (!map_path) {
            st = sr_normalizer_default_map_path(def, sizeof def);
            map_path = def;
        }
        if (!st) st = load_map(nz, map_path);
        if (st) {
            sr_normalizer_free(nz);
            return st;
        }
    }
    *out = nz;
    return SR_OK;
}

void sr_normalizer_free(sr_normalizer *n)
{
    if (!n) return;
    free_map(n);
    free(n);
}

/* ---- running the passes ---------------------------------------------------------------------- */

typedef struct {
    ubuf a, b; /* current text in a; passes write b, then swap */
} work;

typedef sr_status (*pass_fn)(const ubuf *in, ubuf *out);

static sr_status run(work *w, pass_fn f)
{
    w->b.n = 0;
    TRY(f(&w->a, &w->b));
    ubuf t = w->a;
    w->a = w->b;
    w->b = t;
    return SR_OK;
}

static sr_status run_rule(work *w, const literal_rule *r)
{
    w->b.n = 0;
    TRY(pass_rule(&w->a, &w->b, r));
    ubuf t = w->a;
    w->a = w->b;
    w->b = t;
    return SR_OK;
}

static sr_status pre_split_letter_digit(const ubuf *in, ubuf *out)
{
    return pre_split_alnum(in, out, 1);
}

static sr_status pre_split_digit_letter(const ubuf *in, ubuf *out)
{
    return pre_split_alnum(in, out, 0);
}

/* Number normalization of w->a (step 8). */
static sr_status numbers(work *w)
{
    TRY(run(w, pre_half));
    TRY(run(w, pre_split_letter_digit));
    TRY(run(w, pre_split_digit_letter));
    TRY(run(w, pre_join_suffix));
    slice *words = NULL;
    size_t nw = 0;
    TRY(split_words(&w->a, &words, &nw));
    numstate st = {.out = &w->b, .first = 1};
    w->b.n = 0;
    sr_status s = process_words(&st, words, nw);
    free(words);
    ub_free(&st.v);
    ub_free(&st.t1);
    ub_free(&st.t2);
    ub_free(&st.t3);
    TRY(s);
    ubuf t = w->a;
    w->a = w->b;
    w->b = t;
    TRY(run(w, post_combine_cents));
    TRY(run(w, post_extract_cents));
    return run(w, post_ones);
}

/* Spelling map (step 9): split on whitespace, map each word, join with spaces. */
static sr_status spellings(const sr_normalizer *nz, work *w)
{
    slice *words = NULL;
    size_t nw = 0;
    TRY(split_words(&w->a, &words, &nw));
    w->b.n = 0;
    sr_status st = SR_OK;
    for (size_t i = 0; i < nw && !st; i++) {
        if (i) st = ub_put(&w->b, ' ');
        size_t lo = 0, hi = nz->n_map;
        const spelling *hit = NULL;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = cmp_u32(words[i].p, words[i].n, nz->map[mid].key, nz->map[mid].klen);
            if (!c) {
                hit = &nz->map[mid];
                break;
            }
            if (c < 0) hi = mid;
            else lo = mid + 1;
        }
        if (!st)
            st = hit ? ub_add(&w->b, hit->val, hit->vlen) : ub_add(&w->b, words[i].p, words[i].n);
    }
    free(words);
    TRY(st);
    ubuf t = w->a;
    w->a = w->b;
    w->b = t;
    return SR_OK;
}

static sr_status whisper_en(const sr_normalizer *nz, work *w)
{
    TRY(run(w, pass_lower));
    TRY(run(w, pass_brackets));
    TRY(run(w, pass_parens));
    TRY(run(w, pass_fillers));
    TRY(run(w, pass_space_apostrophe));
    for (size_t i = 0; i < SR_ARRAY_LEN(RULES); i++) TRY(run_rule(w, &RULES[i]));
    TRY(run(w, pass_digit_commas));
    TRY(run(w, pass_periods));
    TRY(run(w, pass_symbols_diacritics));
    TRY(numbers(w));
    TRY(spellings(nz, w));
    TRY(run(w, pass_lone_symbols));
    TRY(run(w, pass_lone_percent));
    return run(w, pass_collapse);
}

static sr_status basic(work *w)
{
    TRY(run(w, pass_lower));
    TRY(run(w, pass_brackets));
    TRY(run(w, pass_parens));
    TRY(run(w, pass_remove_symbols));
    TRY(run(w, pass_lower));
    return run(w, pass_collapse);
}

sr_status sr_normalize(const sr_normalizer *n, const char *text, char **out)
{
    if (!out) return sr_error(SR_ERR_ARG, "sr_normalize: out is NULL");
    *out = NULL;
    if (!n) return sr_error(SR_ERR_ARG, "sr_normalize: normalizer is NULL");
    if (!text) return sr_error(SR_ERR_ARG, "sr_normalize: text is NULL");
    size_t len = strlen(text);
    const uint8_t *bad = u8_check((const uint8_t *)text, len);
    if (bad)
        return sr_error(SR_ERR_ARG,
                        "normalizer %s: input text is not valid UTF-8 (byte %zu of %zu)",
                        NAMES[n->kind], (size_t)(bad - (const uint8_t *)text), len);
    if (n->kind == K_NONE) {
        *out = sr_strdup(text);
        return *out ? SR_OK : sr_error(SR_ERR_NOMEM, "sr_normalize: out of memory");
    }
    work w = {0};
    uint32_t *u = NULL;
    size_t ul = 0;
    size_t bad_at = 0;
    sr_status st = utf8_to_u32(text, len, &u, &ul, &bad_at); /* already validated */
    if (!st) {
        w.a.p = u;
        w.a.n = ul;
        w.a.cap = ul ? ul : 1;
        st = n->kind == K_WHISPER_EN ? whisper_en(n, &w) : basic(&w);
    }
    if (!st) {
        size_t ol = 0;
        uint8_t *r = w.a.n ? u32_to_u8(w.a.p, w.a.n, NULL, &ol) : NULL;
        if (w.a.n && !r) {
            st = sr_error(SR_ERR_NOMEM, "sr_normalize: out of memory encoding the result");
        } else {
            *out = malloc(ol + 1);
            if (!*out) {
                st = sr_error(SR_ERR_NOMEM, "sr_normalize: out of memory");
            } else {
                if (ol) memcpy(*out, r, ol);
                (*out)[ol] = '\0';
            }
        }
        free(r);
    }
    ub_free(&w.a);
    ub_free(&w.b);
    return st;
}
